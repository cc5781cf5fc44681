"""weft.nn: Module mechanics, and every layer against NumPy written here."""
import math

import numpy as np
import pytest

import weft as mx
import weft.nn as nn
from weft.utils import tree_flatten, tree_map

rng = np.random.default_rng(1)


def close(got, expected, atol=1e-5, rtol=1e-5):
    np.testing.assert_allclose(np.array(got), expected, atol=atol, rtol=rtol)


def randn(*shape):
    return rng.normal(size=shape).astype(np.float32)


# ---------------------------------------------------------------- Module


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.extras = [nn.Linear(4, 4, bias=False), {"scale": mx.ones((4,))}]
        self.name = "block"  # not an array: a plain attribute
        self._hidden = mx.zeros((2,))  # underscore: never a parameter

    def __call__(self, x):
        return self.extras[0](self.norm(self.proj(x))) * self.extras[1]["scale"]


def test_module_parameters_children_and_paths():
    m = Block()
    keys = [k for k, _ in tree_flatten(m.parameters())]
    assert keys == ["proj.weight", "proj.bias", "norm.weight", "norm.bias", "extras.0.weight",
                    "extras.1.scale"]
    assert m.name == "block" and "name" not in m
    assert set(m.children()) == {"proj", "norm", "extras"}
    assert [k for k, _ in tree_flatten(m.leaf_modules(), is_leaf=nn.Module.is_module)] == \
        ["proj", "norm", "extras.0"]
    names = [n for n, _ in m.named_modules()]
    assert names[0] == "" and set(names[1:]) == {"proj", "norm", "extras.0"}
    assert len(m.modules()) == 4
    del m.proj
    assert not hasattr(m, "proj")


def test_freeze_unfreeze_and_trainable_parameters():
    m = Block()
    m.freeze(keys="bias")
    trainable = [k for k, _ in tree_flatten(m.trainable_parameters())]
    assert "proj.bias" not in trainable and "norm.bias" not in trainable
    assert "proj.weight" in trainable
    m.freeze()
    assert tree_flatten(m.trainable_parameters()) == []
    m.unfreeze(keys=["weight"])
    assert sorted(k for k, _ in tree_flatten(m.trainable_parameters())) == \
        ["extras.0.weight", "norm.weight", "proj.weight"]
    m.unfreeze()
    assert len(tree_flatten(m.trainable_parameters())) == 6
    m.proj.freeze(recurse=False)
    assert "proj.weight" not in dict(tree_flatten(m.trainable_parameters()))
    with pytest.raises(KeyError):
        m.freeze(keys="nothing", strict=True)


def test_update_apply_and_errors():
    m = nn.Linear(2, 3)
    w = mx.array(randn(3, 2))
    m.update({"weight": w})
    assert m.weight is w
    m.update({"weight": mx.zeros((2, 2))})  # any shape, as MLX's (sharding cuts weights)
    assert m.weight.shape == (2, 2)
    m.update({"weight": w})
    with pytest.raises(ValueError):  # not an array where an array was
        m.update({"weight": "hi"})
    with pytest.raises(ValueError):
        m.update({"missing": mx.zeros((1,))})
    m.update({"missing": mx.zeros((1,))}, strict=False)
    m.apply(lambda p: p * 0 + 2)
    assert np.all(np.array(m.weight) == 2) and np.all(np.array(m.bias) == 2)
    m.set_dtype(mx.float16)
    assert m.weight.dtype == mx.float16
    seq = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    replacement = nn.Linear(2, 5)
    seq.update_modules({"layers": [{}, replacement]})
    assert seq.layers[1] is replacement
    with pytest.raises(ValueError):
        seq.update_modules({"layers": [0, 1]})


def test_train_eval_propagates():
    m = nn.Sequential(nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.1)))
    assert m.training and m.layers[1].layers[0].training
    m.eval()
    assert not m.training and not m.layers[1].layers[0].training
    m.train()
    assert m.layers[1].layers[0].training


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_save_and_load_weights(tmp_path, ext):
    a, b = Block(), Block()
    path = str(tmp_path / f"w.{ext}")
    a.save_weights(path)
    b.load_weights(path)
    for (k, x), (_, y) in zip(tree_flatten(a.parameters()), tree_flatten(b.parameters())):
        np.testing.assert_array_equal(np.array(x), np.array(y), err_msg=k)
    with pytest.raises(ValueError, match="Missing"):
        b.load_weights([("proj.weight", mx.zeros((4, 3)))])
    with pytest.raises(ValueError, match="shape"):
        flat = tree_flatten(a.parameters())
        b.load_weights([(k, mx.zeros((1,)) if k == "proj.bias" else v) for k, v in flat])
    with pytest.raises(ValueError, match="not in model"):
        b.load_weights(tree_flatten(a.parameters()) + [("extra", mx.zeros((1,)))])
    b.load_weights([("proj.bias", mx.ones((4,)))], strict=False)
    assert np.all(np.array(b.proj.bias) == 1)
    with pytest.raises(ValueError):
        a.save_weights(str(tmp_path / "w.bin"))


def test_value_and_grad_of_a_model_matches_numpy():
    m = nn.Linear(3, 2)
    x = randn(5, 3)
    target = randn(5, 2)

    def loss(model, inputs):
        return mx.mean(mx.square(model(inputs) - mx.array(target)))

    value, grads = nn.value_and_grad(m, loss)(m, mx.array(x))
    w, b = np.array(m.weight), np.array(m.bias)
    err = x @ w.T + b - target
    close(value, np.mean(err ** 2))
    close(grads["weight"], 2 * err.T @ x / err.size)
    close(grads["bias"], 2 * err.sum(0) / err.size)
    # the model keeps its own arrays afterwards
    np.testing.assert_array_equal(np.array(m.weight), w)
    m.freeze(keys="bias")
    _, grads = nn.value_and_grad(m, loss)(m, mx.array(x))
    assert set(grads) == {"weight"}


def test_grad_through_a_module_argument():
    m = nn.Linear(2, 1)
    g = mx.grad(lambda model: model(mx.ones((2,))).sum())(m)
    close(g["weight"], np.ones((1, 2)))


# ---------------------------------------------------------------- layers


def test_linear_bilinear_identity_embedding():
    m = nn.Linear(4, 3)
    x = randn(2, 5, 4)
    close(m(mx.array(x)), x @ np.array(m.weight).T + np.array(m.bias))
    bound = 1 / math.sqrt(4)
    assert np.abs(np.array(m.weight)).max() <= bound
    m = nn.Linear(4, 3, bias=False)
    close(m(mx.array(x)), x @ np.array(m.weight).T)

    bl = nn.Bilinear(3, 4, 2)
    x1, x2 = randn(6, 3), randn(6, 4)
    w = np.array(bl.weight)
    close(bl(mx.array(x1), mx.array(x2)), np.einsum("bi,oji,bj->bo", x1, w, x2) + np.array(bl.bias),
          atol=1e-4)

    assert nn.Identity(1, foo=2)(mx.array(x1)) is not None
    close(nn.Identity()(mx.array(x1)), x1)

    emb = nn.Embedding(10, 4)
    ids = np.array([[1, 9, 0], [3, 3, 2]])
    table = np.array(emb.weight)
    close(emb(mx.array(ids)), table[ids])
    close(emb.as_linear(mx.array(x2)), x2 @ table.T)


def test_sequential_calls_in_order():
    seq = nn.Sequential(nn.Linear(3, 4), nn.relu, nn.Linear(4, 2))
    x = randn(5, 3)
    w1, b1 = np.array(seq.layers[0].weight), np.array(seq.layers[0].bias)
    w2, b2 = np.array(seq.layers[2].weight), np.array(seq.layers[2].bias)
    close(seq(mx.array(x)), np.maximum(x @ w1.T + b1, 0) @ w2.T + b2)


def _np_normalize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def test_layer_norm_rms_norm():
    x = randn(3, 4, 8)
    ln = nn.LayerNorm(8, eps=1e-4)
    ln.weight = mx.array(randn(8))
    ln.bias = mx.array(randn(8))
    close(ln(mx.array(x)), _np_normalize(x, -1, 1e-4) * np.array(ln.weight) + np.array(ln.bias),
          atol=1e-4)
    close(nn.LayerNorm(8, affine=False)(mx.array(x)), _np_normalize(x, -1, 1e-5), atol=1e-4)
    rms = nn.RMSNorm(8)
    rms.weight = mx.array(randn(8))
    close(rms(mx.array(x)), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * np.array(rms.weight),
          atol=1e-4)
    for cls in (nn.LayerNorm, nn.RMSNorm, nn.InstanceNorm, nn.BatchNorm):
        with pytest.raises(ValueError):
            cls(8, eps=0.0)


def test_group_norm_both_layouts():
    x = randn(2, 3, 3, 8)
    groups = 4
    # mlx's layout: group g holds channels c with c % groups == g
    strided = x.reshape(2, 9, 2, groups)
    expected = _np_normalize(strided, (1, 2), 1e-5).reshape(x.shape)
    close(nn.GroupNorm(groups, 8)(mx.array(x)), expected, atol=1e-4)
    contiguous = x.reshape(2, 9, groups, 2)
    expected = _np_normalize(contiguous, (1, 3), 1e-5).reshape(x.shape)
    gn = nn.GroupNorm(groups, 8, pytorch_compatible=True)
    gn.weight = mx.array(randn(8))
    close(gn(mx.array(x)), expected * np.array(gn.weight), atol=1e-4)
    with pytest.raises(ValueError):
        nn.GroupNorm(3, 8)


def test_instance_norm():
    x = randn(2, 4, 5, 3)
    close(nn.InstanceNorm(3)(mx.array(x)), _np_normalize(x, (1, 2), 1e-5), atol=1e-4)
    half = mx.array(np.where(np.indices((1, 4, 4)).sum(0) % 2, 512.0, -512.0)[..., None]
                    .astype(np.float16))
    y = nn.InstanceNorm(1)(half)
    assert y.dtype == mx.float16
    close(y.astype(mx.float32), np.where(np.array(half, dtype=np.float32) > 0, 1.0, -1.0), atol=1e-2)


def test_batch_norm_training_running_stats_and_eval():
    x = randn(6, 3, 4)
    bn = nn.BatchNorm(4, momentum=0.2)
    y = bn(mx.array(x))
    close(y, _np_normalize(x, (0, 1), 1e-5), atol=1e-4)
    n = 18
    close(bn.running_mean, 0.2 * x.mean((0, 1)), atol=1e-5)
    close(bn.running_var, 0.8 + 0.2 * x.var((0, 1)) * n / (n - 1), atol=1e-5)
    assert "running_mean" in dict(tree_flatten(bn.parameters()))
    assert "running_mean" not in dict(tree_flatten(bn.trainable_parameters()))
    bn.unfreeze()
    assert "running_var" not in dict(tree_flatten(bn.trainable_parameters()))
    bn.eval()
    rm, rv = np.array(bn.running_mean), np.array(bn.running_var)
    close(bn(mx.array(x)), (x - rm) / np.sqrt(rv + 1e-5), atol=1e-4)
    with pytest.raises(ValueError):
        nn.BatchNorm(4)(mx.zeros((1, 4)))


def test_dropout_variants():
    x = mx.ones((200, 50))
    d = nn.Dropout(0.25)
    y = np.array(d(x))
    kept = y != 0
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    np.testing.assert_array_equal(np.array(d(x)), 1.0)
    x4 = mx.ones((8, 5, 5, 16), mx.bfloat16)
    y4 = np.array(nn.Dropout2d(0.5)(x4).astype(mx.float32))
    assert nn.Dropout2d(0.5)(x4).dtype == mx.bfloat16
    # a channel is dropped everywhere or nowhere
    per_channel = (y4 != 0).reshape(8, 25, 16)
    assert np.all(per_channel.all(1) | ~per_channel.any(1))
    y5 = np.array(nn.Dropout3d(0.5)(mx.ones((2, 3, 3, 3, 8))))
    per_channel = (y5 != 0).reshape(2, 27, 8)
    assert np.all(per_channel.all(1) | ~per_channel.any(1))
    with pytest.raises(ValueError):
        nn.Dropout(1.0)
    with pytest.raises(ValueError):
        nn.Dropout2d(0.5)(mx.ones((4, 4)))


def _np_erf(x):
    return np.vectorize(math.erf)(x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(x, 0)


ACTIVATIONS = [
    (nn.relu, lambda x: np.maximum(x, 0)),
    (nn.relu6, lambda x: np.clip(x, 0, 6)),
    (nn.relu2, lambda x: np.maximum(x, 0) ** 2),
    (nn.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    (nn.sigmoid, _sigmoid),
    (nn.tanh, np.tanh),
    (nn.silu, lambda x: x * _sigmoid(x)),
    (nn.softplus, _softplus),
    (nn.log_sigmoid, lambda x: -_softplus(-x)),
    (nn.elu, lambda x: np.where(x > 0, x, np.exp(x) - 1)),
    (nn.celu, lambda x: np.maximum(x, 0) + np.minimum(np.exp(np.minimum(x, 0)) - 1, 0)),
    (nn.selu, lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1))),
    (nn.softsign, lambda x: x / (1 + np.abs(x))),
    (nn.softshrink, lambda x: np.where(np.abs(x) > 0.5, x - np.sign(x) * 0.5, 0)),
    (nn.hard_shrink, lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    (nn.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (nn.mish, lambda x: x * np.tanh(_softplus(x))),
    (nn.gelu, lambda x: 0.5 * x * (1 + _np_erf(x / math.sqrt(2)))),
    (nn.gelu_approx, lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.gelu_fast_approx, lambda x: x * _sigmoid(1.702 * x)),
    (nn.step, lambda x: (x >= 0).astype(np.float32)),
    (nn.softmax, lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    (nn.softmin, lambda x: np.exp(-x) / np.exp(-x).sum(-1, keepdims=True)),
    (nn.log_softmax, lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))),
    (nn.glu, lambda x: x[..., :3] * _sigmoid(x[..., 3:])),
]


@pytest.mark.parametrize("fn,reference", ACTIVATIONS, ids=[f.__name__ for f, _ in ACTIVATIONS])
def test_activation_functions(fn, reference):
    x = np.concatenate([randn(4, 6) * 3, np.array([[-2, -0.5, 0, 0.25, 0.5, 7]], np.float32)])
    close(fn(mx.array(x)), reference(x.astype(np.float64)), atol=1e-5, rtol=1e-4)


def test_exponential_units_near_zero_and_their_gradients_far_out():
    # exp(x) - 1 lost up to 170 ulps near 0, and exp of a large x (in the
    # branch where() drops) overflowed and made the gradient NaN
    x = -np.exp(np.linspace(np.log(1e-7), np.log(1e-1), 200)).astype(np.float32)
    want = np.expm1(x.astype(np.float64))
    for fn in (nn.elu, nn.celu):
        np.testing.assert_allclose(np.array(fn(mx.array(x))), want, rtol=2e-7, atol=0)
    points = mx.array([100.0, 1.0, 0.0, -1.0, -100.0])
    for fn, slopes in ((nn.elu, [1, 1, 1, math.exp(-1), 0]),
                       (lambda v: nn.elu(v, 2.0), [1, 1, 2, 2 * math.exp(-1), 0]),
                       (nn.celu, [1, 1, 1, math.exp(-1), 0]),
                       (nn.selu, [1.0507, 1.0507, 1.0507 * 1.67326, 1.0507 * 1.67326 * math.exp(-1),
                                  0])):
        grads = np.array(mx.grad(lambda v: fn(v).sum())(points))
        np.testing.assert_allclose(grads, slopes, rtol=1e-6, atol=1e-30)


def test_activation_classes_and_options():
    x = randn(3, 4) * 2
    close(nn.LeakyReLU(0.2)(mx.array(x)), np.where(x > 0, x, 0.2 * x))
    close(nn.ELU(alpha=0.5)(mx.array(x)), np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), atol=1e-6)
    close(nn.Step(1.0)(mx.array(x)), (x >= 1).astype(np.float32))
    close(nn.HardTanh(-0.5, 0.5)(mx.array(x)), np.clip(x, -0.5, 0.5))
    close(nn.GELU(approx="tanh")(mx.array(x)), np.array(nn.gelu_approx(mx.array(x))))
    close(nn.GELU(approx="fast")(mx.array(x)), x * _sigmoid(1.702 * x), atol=1e-6)
    p = nn.PReLU(4, init=0.1)
    close(p(mx.array(x)), np.where(x > 0, x, 0.1 * x))
    assert dict(tree_flatten(p.parameters())).keys() == {"weight"}
    with pytest.raises(ValueError):
        nn.GELU(approx="bogus")
    with pytest.raises(TypeError):
        nn.ReLU(3)
    close(nn.log_softmax(mx.array([[1e8, 1e8]])), [[-math.log(2)] * 2])


def _np_attention(q, k, v, mask=None):
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    return (scores / scores.sum(-1, keepdims=True)) @ v


def test_multi_head_attention_matches_numpy():
    att = nn.MultiHeadAttention(8, 2, bias=True)
    q_in, kv_in = randn(2, 3, 8), randn(2, 5, 8)
    p = {k: np.array(v) for k, v in tree_flatten(att.parameters())}

    def proj(name, x):
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def heads(x):
        return x.reshape(2, -1, 2, 4).transpose(0, 2, 1, 3)

    mask = np.where(rng.uniform(size=(3, 5)) < 0.3, -1e9, 0).astype(np.float32)
    out = _np_attention(heads(proj("query_proj", q_in)), heads(proj("key_proj", kv_in)),
                        heads(proj("value_proj", kv_in)), mask)
    expected = proj("out_proj", out.transpose(0, 2, 1, 3).reshape(2, 3, 8))
    close(att(mx.array(q_in), mx.array(kv_in), mx.array(kv_in), mx.array(mask)), expected, atol=1e-4)
    causal = np.array(nn.MultiHeadAttention.create_additive_causal_mask(3))
    assert causal[0, 1] < -1e30 and causal[1, 0] == 0 and causal[2, 2] == 0
    with pytest.raises(ValueError):
        nn.MultiHeadAttention(10, 3)


def test_transformer_encoder_layer_matches_numpy():
    layer = nn.TransformerEncoderLayer(8, 2, mlp_dims=16, norm_first=True)
    x = randn(2, 4, 8)
    p = {k: np.array(v) for k, v in tree_flatten(layer.parameters())}

    def ln(name, t):
        return _np_normalize(t, -1, 1e-5) * p[f"{name}.weight"] + p[f"{name}.bias"]

    def heads(t):
        return t.reshape(2, 4, 2, 4).transpose(0, 2, 1, 3)

    y = ln("ln1", x)
    a = _np_attention(*(heads(y @ p[f"attention.{n}_proj.weight"].T) for n in ("query", "key", "value")))
    x1 = x + a.transpose(0, 2, 1, 3).reshape(2, 4, 8) @ p["attention.out_proj.weight"].T
    h = np.maximum(ln("ln2", x1) @ p["linear1.weight"].T + p["linear1.bias"], 0)
    expected = x1 + h @ p["linear2.weight"].T + p["linear2.bias"]
    close(layer(mx.array(x), None), expected, atol=1e-4)
    enc = nn.TransformerEncoder(2, 8, 2)
    assert enc(mx.array(x), None).shape == (2, 4, 8)
    model = nn.Transformer(8, 2, 1, 1, custom_decoder=nn.Identity())
    assert isinstance(model.decoder, nn.Identity)
    dec = nn.TransformerDecoder(1, 8, 2, norm_first=False)
    assert dec(mx.array(x), mx.array(randn(2, 6, 8)), None, None).shape == (2, 4, 8)


def test_positional_encodings():
    x = randn(1, 2, 3, 8)
    rope = nn.RoPE(8, base=100.0)
    theta = 100.0 ** (-np.arange(0, 8, 2) / 8)
    pos = np.arange(3)[:, None] * theta
    cos, sin = np.cos(pos), np.sin(pos)
    a, b = x[..., :4], x[..., 4:]
    close(rope(mx.array(x)), np.concatenate([a * cos - b * sin, a * sin + b * cos], -1), atol=1e-5)

    pe = nn.SinusoidalPositionalEncoding(6, min_freq=0.01, max_freq=1.0)
    t = np.arange(5, dtype=np.float32)
    sig = np.exp((1 - np.arange(3) / 2) * (0 - np.log(0.01)) + np.log(0.01))
    ang = t[:, None] * sig
    close(pe(mx.array(t)), np.concatenate([np.sin(ang), np.cos(ang)], -1) * math.sqrt(2 / 6),
          atol=1e-6)
    with pytest.raises(ValueError):
        nn.SinusoidalPositionalEncoding(3)

    scores = randn(1, 4, 3, 5)
    slopes = (2.0 ** 8) ** (-np.arange(1, 5) / 4)
    dist = -np.abs(np.arange(3)[:, None] - np.arange(5)[None])
    close(nn.ALiBi()(mx.array(scores)), scores + slopes[:, None, None] * dist, atol=1e-6)


def _np_pool(x, kernel, stride, padding, reduce, fill):
    dims = len(kernel)
    pad = [(0, 0)] + [(p, p) for p in padding] + [(0, 0)]
    x = np.pad(x, pad, constant_values=fill)
    outs = [(x.shape[1 + i] - kernel[i]) // stride[i] + 1 for i in range(dims)]
    out = np.zeros((x.shape[0], *outs, x.shape[-1]), x.dtype)
    for idx in np.ndindex(*outs):
        window = tuple(slice(i * s, i * s + k) for i, s, k in zip(idx, stride, kernel))
        out[(slice(None), *idx)] = reduce(x[(slice(None), *window)], axis=tuple(range(1, dims + 1)))
    return out


@pytest.mark.parametrize("dims,kernel,stride,padding", [
    (1, (3,), (2,), (1,)), (2, (2, 3), (2, 1), (1, 0)), (2, (3, 3), (1, 1), (0, 0)),
    (3, (2, 2, 2), (2, 1, 2), (0, 1, 1))])
def test_pooling_matches_numpy(dims, kernel, stride, padding):
    x = randn(2, *([6] * dims), 3)
    mp = getattr(nn, f"MaxPool{dims}d")(kernel, stride, padding)
    ap = getattr(nn, f"AvgPool{dims}d")(kernel, stride, padding)
    close(mp(mx.array(x)), _np_pool(x, kernel, stride, padding, np.max, -np.inf))
    close(ap(mx.array(x)), _np_pool(x, kernel, stride, padding, np.mean, 0.0), atol=1e-6)
    with pytest.raises(ValueError):
        mp(mx.array(x[0]))


def test_pooling_gradient():
    x = mx.array(np.arange(8, dtype=np.float32).reshape(1, 8, 1))
    g = mx.grad(lambda t: nn.MaxPool1d(2)(t).sum())(x)
    np.testing.assert_array_equal(np.array(g).ravel(), [0, 1] * 4)
    # tied maxima share the gradient equally (MLX's rule)
    ties = mx.array(np.array([1, 1, 1, 1, 2, 0], np.float32).reshape(1, 6, 1))
    g = mx.grad(lambda t: nn.MaxPool1d(3)(t).sum())(ties)
    np.testing.assert_allclose(np.array(g).ravel(), [1 / 3] * 3 + [0, 1, 0], rtol=1e-6)


def test_piecewise_activation_gradients_at_the_kinks():
    at = mx.array([0.0, 6.0, -1.0, 1.0])
    np.testing.assert_array_equal(np.array(mx.grad(lambda t: nn.relu(t).sum())(at)), [0, 1, 0, 1])
    np.testing.assert_array_equal(np.array(mx.grad(lambda t: nn.relu6(t).sum())(at)), [0, 0, 0, 1])
    np.testing.assert_allclose(np.array(mx.grad(lambda t: nn.leaky_relu(t, 0.1).sum())(at)),
                               [1, 1, 0.1, 1], rtol=1e-6)
    np.testing.assert_array_equal(np.array(mx.grad(lambda t: nn.hard_tanh(t).sum())(at)),
                                  [1, 0, 0, 0])


def _np_linear_resize(x, axis, scale, align):
    n = x.shape[axis]
    out = int(math.floor(n * scale))
    i = np.arange(out, dtype=np.float64)
    src = i * (n - 1) / (out - 1) if align and out > 1 else \
        (np.zeros(out) if align else np.maximum((i + 0.5) / scale - 0.5, 0))
    lo = np.minimum(np.floor(src).astype(int), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    w = (src - lo).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return np.take(x, lo, axis) * (1 - w) + np.take(x, hi, axis) * w


def test_upsample_nearest_and_linear():
    x = randn(1, 3, 4, 2)
    near = np.array(nn.Upsample(2.0)(mx.array(x)))
    np.testing.assert_array_equal(near, x.repeat(2, 1).repeat(2, 2))
    for align in (False, True):
        up = nn.Upsample((2.0, 1.5), mode="linear", align_corners=align)
        expected = _np_linear_resize(_np_linear_resize(x, 1, 2.0, align), 2, 1.5, align)
        close(up(mx.array(x)), expected, atol=1e-5)
    cubic = np.array(nn.Upsample(2.0, mode="cubic", align_corners=True)(mx.array(x)))
    # cubic convolution reproduces the samples at the aligned corners
    assert cubic.shape == (1, 6, 8, 2)
    np.testing.assert_allclose(cubic[:, [0, -1]][:, :, [0, -1]], x[:, [0, -1]][:, :, [0, -1]],
                               atol=1e-5)
    with pytest.raises(ValueError):
        nn.Upsample(2.0, mode="area")


def test_recurrent_layers_match_numpy():
    x = randn(2, 5, 3)
    rnn = nn.RNN(3, 4)
    p = {k: np.array(v) for k, v in tree_flatten(rnn.parameters())}
    h = np.zeros((2, 4))
    states = []
    for t in range(5):
        h = np.tanh(x[:, t] @ p["Wxh"].T + p["bias"] + h @ p["Whh"].T)
        states.append(h)
    close(rnn(mx.array(x)), np.stack(states, 1), atol=1e-5)

    gru = nn.GRU(3, 4)
    p = {k: np.array(v) for k, v in tree_flatten(gru.parameters())}
    h = np.zeros((2, 4))
    states = []
    for t in range(5):
        xp = x[:, t] @ p["Wx"].T + p["b"]
        hp = h @ p["Wh"].T
        r = _sigmoid(xp[:, :4] + hp[:, :4])
        z = _sigmoid(xp[:, 4:8] + hp[:, 4:8])
        n = np.tanh(xp[:, 8:] + r * (hp[:, 8:] + p["bhn"]))
        h = (1 - z) * n + z * h
        states.append(h)
    close(gru(mx.array(x)), np.stack(states, 1), atol=1e-5)

    lstm = nn.LSTM(3, 4)
    p = {k: np.array(v) for k, v in tree_flatten(lstm.parameters())}
    h, c = np.zeros((2, 4)), np.zeros((2, 4))
    hs, cs = [], []
    for t in range(5):
        gates = x[:, t] @ p["Wx"].T + p["bias"] + h @ p["Wh"].T
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    got_h, got_c = lstm(mx.array(x))
    close(got_h, np.stack(hs, 1), atol=1e-5)
    close(got_c, np.stack(cs, 1), atol=1e-5)
    with pytest.raises(ValueError):
        nn.RNN(3, 4, nonlinearity="tanh")


# ---------------------------------------------------------------- init


def test_initializers():
    a = mx.zeros((200, 300))
    np.testing.assert_array_equal(np.array(nn.init.constant(0.5)(a)), 0.5)
    n = np.array(nn.init.normal(1.0, 2.0)(a))
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 2.0) < 0.05
    u = np.array(nn.init.uniform(-2.0, 1.0)(a))
    assert u.min() >= -2.0 and u.max() < 1.0 and abs(u.mean() + 0.5) < 0.03
    np.testing.assert_array_equal(np.array(nn.init.identity()(mx.zeros((3, 3)))), np.eye(3))
    with pytest.raises(ValueError):
        nn.init.identity()(mx.zeros((3, 2)))
    fan_in, fan_out = 300, 200
    g = np.array(nn.init.glorot_normal()(a))
    assert abs(g.std() - math.sqrt(2 / (fan_in + fan_out))) < 0.003
    g = np.array(nn.init.glorot_uniform()(a, gain=2.0))
    assert abs(np.abs(g).max() - 2 * math.sqrt(6 / (fan_in + fan_out))) < 0.01
    h = np.array(nn.init.he_normal()(a, mode="fan_out"))
    assert abs(h.std() - 1 / math.sqrt(fan_out)) < 0.003
    h = np.array(nn.init.he_uniform()(a))
    assert abs(np.abs(h).max() - math.sqrt(3 / fan_in)) < 0.003
    with pytest.raises(ValueError):
        nn.init.he_normal()(a, mode="sideways")
    conv = mx.zeros((8, 3, 3, 4))  # fans include the receptive field
    h = np.array(nn.init.he_normal()(conv))
    assert abs(h.std() - 1 / math.sqrt(4 * 9)) < 0.03
    s = np.array(nn.init.sparse(0.25)(mx.zeros((6, 10))))
    assert np.all((s == 0).sum(1) == 3)
    o = np.array(nn.init.orthogonal()(mx.zeros((6, 4))))
    np.testing.assert_allclose(o.T @ o, np.eye(4), atol=1e-5)
    o = np.array(nn.init.orthogonal(gain=2.0)(mx.zeros((3, 5))))
    np.testing.assert_allclose(o @ o.T, 4 * np.eye(3), atol=1e-4)
    assert nn.init.normal(dtype=mx.float16)(a).dtype == mx.float16


def test_upsample_antialias_downsampling_kernel():
    # halving with the antialiased triangle filter widens it to 4 taps with
    # weights 1/8, 3/8, 3/8, 1/8 (renormalised where it leaves the input)
    x = randn(1, 10, 1)
    got = np.array(nn.Upsample(0.5, mode="linear", antialias=True)(mx.array(x)))[0, :, 0]
    v = x[0, :, 0]
    interior = [(v[2 * i - 1] + 3 * v[2 * i] + 3 * v[2 * i + 1] + v[2 * i + 2]) / 8 for i in range(1, 4)]
    np.testing.assert_allclose(got[1:4], interior, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], (3 * v[0] + 3 * v[1] + v[2]) / 7, rtol=1e-5)
    flat = np.array(nn.Upsample(0.3, mode="cubic", antialias=True)(mx.ones((1, 20, 20, 2))))
    np.testing.assert_allclose(flat, 1.0, rtol=1e-5)
    with pytest.raises(ValueError):
        nn.Upsample(0.5, mode="linear", align_corners=True, antialias=True)


def test_batch_norm_statistics_persist_through_value_and_grad_and_compile():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm(4))
    x = mx.array(randn(8, 3))
    hidden = np.array(model.layers[0](x))

    def loss(m, inputs):
        return m(inputs).sum()

    _, grads = nn.value_and_grad(model, loss)(model, x)
    assert sorted(grads["layers"][1]) == ["bias", "weight"]  # statistics are not trainable
    close(model.layers[1].running_mean, 0.1 * hidden.mean(0), atol=1e-6)
    state = [model.state]
    step = mx.compile(lambda inputs: nn.value_and_grad(model, loss)(model, inputs)[0],
                      inputs=state, outputs=state)
    step(x)
    close(model.layers[1].running_mean, 0.19 * hidden.mean(0), atol=1e-6)


# ---------------------------------------------------------------- convolution


def _np_conv(x, w, stride, padding, dilation, groups):
    """Direct channels-last convolution: x (N, *S, C), w (O, *K, C/groups)."""
    dims = x.ndim - 2
    x = np.pad(x, [(0, 0)] + [(padding, padding)] * dims + [(0, 0)])
    out_ch, kernel, in_per_group = w.shape[0], w.shape[1:-1], w.shape[-1]
    spans = [dilation * (k - 1) + 1 for k in kernel]
    outs = [(x.shape[1 + d] - spans[d]) // stride + 1 for d in range(dims)]
    y = np.zeros((x.shape[0], *outs, out_ch))
    per_group = out_ch // groups
    for pos in np.ndindex(*outs):
        for k in np.ndindex(*kernel):
            at = tuple(p * stride + kk * dilation for p, kk in zip(pos, k))
            patch = x[(slice(None), *at)]  # (N, C)
            for g in range(groups):
                o = slice(g * per_group, (g + 1) * per_group)
                c = slice(g * in_per_group, (g + 1) * in_per_group)
                y[(slice(None), *pos, o)] += patch[:, c] @ w[(o, *k)].T
    return y


@pytest.mark.parametrize("dims,stride,padding,dilation,groups", [
    (1, 1, 0, 1, 1), (1, 2, 1, 2, 2), (2, 1, 1, 1, 1), (2, 2, 0, 1, 2), (3, 1, 1, 1, 1)])
def test_conv_layers_match_numpy(dims, stride, padding, dilation, groups):
    layer = getattr(nn, f"Conv{dims}d")(4, 6, 3, stride=stride, padding=padding,
                                        dilation=dilation, groups=groups)
    assert layer.weight.shape == (6, *([3] * dims), 4 // groups)
    x = randn(2, *([7] * dims), 4)
    expected = _np_conv(x, np.array(layer.weight), stride, padding, dilation, groups)
    close(layer(mx.array(x)), expected + np.array(layer.bias), atol=1e-4)
    with pytest.raises(ValueError):
        nn.Conv2d(3, 6, 3, groups=2)


@pytest.mark.parametrize("dims,stride,padding", [(1, 2, 1), (2, 2, 0), (2, 1, 1)])
def test_conv_transpose_layers_match_numpy(dims, stride, padding):
    layer = getattr(nn, f"ConvTranspose{dims}d")(3, 5, 3, stride=stride, padding=padding)
    w = np.array(layer.weight)  # (out, *kernel, in)
    x = randn(2, *([4] * dims), 3)
    full = [(4 - 1) * stride + 3 for _ in range(dims)]
    y = np.zeros((2, *full, 5))
    # each input position scatters the kernel, scaled, at stride steps
    for pos in np.ndindex(*([4] * dims)):
        for k in np.ndindex(*([3] * dims)):
            at = tuple(p * stride + kk for p, kk in zip(pos, k))
            y[(slice(None), *at)] += x[(slice(None), *pos)] @ w[(slice(None), *k)].T
    crop = tuple(slice(padding, f - padding) for f in full)
    expected = y[(slice(None), *crop)] + np.array(layer.bias)
    close(layer(mx.array(x)), expected, atol=1e-4)
