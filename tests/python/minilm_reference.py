"""A NumPy forward pass of a sentence-transformers BERT (all-MiniLM-L6-v2),
independent of weft: the reference of tests/python/test_bert_minilm.py.

    python minilm_reference.py MODEL_DIR IDS.json OUT.npy

reads token id lists (JSON) and writes their normalised mean-pooled
embeddings (float64, input order). The test runs it in its own process with
one BLAS thread: NumPy's threaded BLAS spins on a loaded 2-core machine.
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file


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


def main(model_dir, ids_file, out_file):
    weights = {k: v.astype(np.float64) for k, v in
               load_file(os.path.join(model_dir, "model.safetensors")).items()
               if v.dtype == np.float32}
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    with open(ids_file) as f:
        ids = json.load(f)
    out = np.zeros((len(ids), config["hidden_size"]))
    # sentences of equal length run together (no padding)
    by_length = {}
    for i, token_ids in enumerate(ids):
        by_length.setdefault(len(token_ids), []).append(i)
    for group in by_length.values():
        out[group] = numpy_embeddings(weights, config, np.array([ids[i] for i in group]))
    np.save(out_file, out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
