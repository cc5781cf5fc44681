"""mx.quantize / dequantize / quantized_matmul / gather_qmm and nn's quantized
layers in MLX's floating-point modes (mxfp4, mxfp8, nvfp4). NumPy is the
reference (the formats decoded from their bit fields, nearest values by
search); MLX from PyPI, when importable, gives the same codes, scales and
dequantized values bit for bit."""
import numpy as np
import pytest

import weft as mx
import weft.nn as nn

try:
    import mlx.core as mlx_core
except ImportError:  # the check against MLX is skipped, with this reason
    mlx_core = None

MODES = {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}
FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)


def e4m3_magnitudes():
    c = np.arange(128)
    e, m = c >> 3, c & 7
    return np.where(e == 0, m * 2.0**-9, (1 + m / 8) * 2.0 ** (e - 7))


E4M3 = e4m3_magnitudes()


def e4m3_nearest(v):
    """Codes of the nearest e4m3 values (ties to the even code, >= 464 -> 448)."""
    d = np.abs(np.abs(v)[..., None] - E4M3[:127])
    nearest = d == d.min(axis=-1, keepdims=True)
    best = np.argmin(np.where(nearest, np.arange(127) % 2, 2), axis=-1)  # an even code first
    best = np.where(np.abs(v) >= 464, 126, best)
    return (best | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def fp4_nearest(v):
    """Codes of the nearest fp4 values (ties to the smaller magnitude, +0)."""
    best = np.argmin(np.abs(np.abs(v)[..., None] - FP4), axis=-1)  # first minimum
    return (best | np.where((best > 0) & (v < 0), 8, 0)).astype(np.uint8)


def values(codes, mode):
    if mode == "mxfp8":
        return np.where(codes & 0x80, -1, 1) * E4M3[codes & 0x7F]
    return np.where(codes & 8, -1, 1) * FP4[codes & 7]


def reference_quantize(w, mode):
    """float32 w -> (element codes, scale bytes, decoded scales)."""
    gs, _ = MODES[mode]
    g = w.reshape(-1, gs)
    s = (np.abs(g).max(axis=1) / np.float32(448 if mode == "mxfp8" else 6)).astype(np.float32)
    if mode == "nvfp4":
        sb = e4m3_nearest(s.astype(np.float64))
        sd = values(sb, "mxfp8")
    else:
        e = np.where(s > 0, np.ceil(np.log2(np.where(s > 0, s, 1).astype(np.float64))), 0)
        sb = (e + 127).astype(np.uint8)
        sd = 2.0**e
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero scale, as MLX divides
        q = (g / sd[:, None].astype(np.float32)).astype(np.float32).astype(np.float64)
    codes = e4m3_nearest(q) if mode == "mxfp8" else fp4_nearest(q)
    return codes.reshape(w.shape), sb.reshape(w.shape[:-1] + (-1,)), sd


def unpack(packed, bits):
    p = np.asarray(packed, np.uint32)
    if bits == 8:
        return p.view(np.uint8).reshape(p.shape[:-1] + (-1,))
    b = p.view(np.uint8).reshape(p.shape[:-1] + (-1,))
    return np.stack([b & 15, b >> 4], axis=-1).reshape(p.shape[:-1] + (-1,))


def weights(shape, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 12, shape[:-1] + (1,))
    w = w.astype(np.float32)
    w[0, :16] = 0
    w[1, :32] = 0.25 * np.arange(32) % 7  # ties of the fp4 rounding
    return w


@pytest.mark.parametrize("mode", sorted(MODES))
def test_quantize_matches_numpy_reference(mode):
    gs, bits = MODES[mode]
    w = weights((8, 8 * gs), seed=len(mode))
    q, s = mx.quantize(mx.array(w), mode=mode)
    assert q.dtype == mx.uint32 and s.dtype == mx.uint8
    assert q.shape == (8, 8 * gs * bits // 32) and s.shape == (8, 8)
    codes, sb, sd = reference_quantize(w, mode)
    np.testing.assert_array_equal(unpack(q, bits), codes)
    np.testing.assert_array_equal(np.array(s), sb)
    d = np.array(mx.dequantize(q, s, mode=mode, dtype=mx.float32))
    want = (values(codes, mode).reshape(-1, gs) * sd[:, None]).reshape(w.shape)
    np.testing.assert_array_equal(d, want.astype(np.float32))
    assert mx.dequantize(q, s, mode=mode).dtype == mx.bfloat16  # MLX's default


@pytest.mark.skipif(mlx_core is None, reason="mlx is not importable (pip install mlx mlx-cpu)")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_same_bits_as_mlx(mode):
    gs, _ = MODES[mode]
    w = weights((16, 4 * gs), seed=3)
    for dtype in ("float32", "float16", "bfloat16"):
        ours = mx.quantize(mx.array(w).astype(getattr(mx, dtype)), mode=mode)
        theirs = mlx_core.quantize(mlx_core.array(w).astype(getattr(mlx_core, dtype)), mode=mode)
        assert len(ours) == len(theirs) == 2
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(np.array(a), np.array(b), err_msg=f"{mode} {dtype}")
        for out in ("float32", "float16", "bfloat16"):
            d1 = mx.dequantize(*ours, mode=mode, dtype=getattr(mx, out)).astype(mx.float32)
            d2 = mlx_core.dequantize(*theirs, mode=mode, dtype=getattr(mlx_core, out))
            np.testing.assert_array_equal(np.array(d1), np.array(d2.astype(mlx_core.float32)),
                                          err_msg=f"{mode} {dtype} -> {out}")


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("transpose", [True, False])
def test_quantized_matmul(mode, transpose):
    gs, bits = MODES[mode]
    n, k = (40, 4 * gs) if transpose else (4 * gs, 4 * gs)
    w = weights((n, k), seed=5)
    q, s = mx.quantize(mx.array(w), mode=mode)
    dense = np.array(mx.dequantize(q, s, mode=mode, dtype=mx.float32)).astype(np.float64)
    x = np.random.default_rng(1).standard_normal((3, k if transpose else n)).astype(np.float32)
    y = mx.quantized_matmul(mx.array(x), q, s, transpose=transpose, mode=mode)
    want = x.astype(np.float64) @ (dense.T if transpose else dense)
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # the bits of the dense float32 product
    d32 = mx.dequantize(q, s, mode=mode, dtype=mx.float32)
    np.testing.assert_array_equal(np.array(y), np.array(mx.array(x) @ (d32.T if transpose else d32)))
    if mlx_core is not None:
        theirs = mlx_core.quantized_matmul(mlx_core.array(x), mlx_core.array(np.array(q)),
                                           mlx_core.array(np.array(s)), transpose=transpose,
                                           mode=mode)
        np.testing.assert_allclose(np.array(y), np.array(theirs), rtol=1e-5,
                                   atol=1e-5 * np.abs(want).max())


def test_gather_qmm_and_grad():
    w = weights((3 * 8, 64), seed=9).reshape(3, 8, 64)
    q, s = mx.quantize(mx.array(w), mode="mxfp8")
    x = mx.array(np.random.default_rng(2).standard_normal((2, 1, 64)).astype(np.float32))
    y = mx.gather_qmm(x, q, s, lhs_indices=mx.array([1, 0]), rhs_indices=mx.array([2, 2]),
                      mode="mxfp8")
    for i, (l, r) in enumerate([(1, 2), (0, 2)]):
        want = mx.quantized_matmul(x[l], q[r], s[r], mode="mxfp8")
        np.testing.assert_array_equal(np.array(y[i]), np.array(want))
    g = mx.grad(lambda a: (mx.quantized_matmul(a, q[0], s[0], mode="mxfp8") ** 2).sum())(x[0])
    d = mx.dequantize(q[0], s[0], mode="mxfp8", dtype=mx.float32)
    gd = mx.grad(lambda a: ((a @ d.T) ** 2).sum())(x[0])
    np.testing.assert_allclose(np.array(g), np.array(gd), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_no_gradient_with_respect_to_fp_scales(mode):
    # as MLX: a ValueError for the uint8 scales of a floating-point mode
    group, _ = MODES[mode]
    q, s = mx.quantize(mx.array(weights((8, 64), seed=4)), mode=mode)
    x = mx.array(np.random.default_rng(5).standard_normal((2, 64)).astype(np.float32))
    with pytest.raises(ValueError, match="scales of a floating-point"):
        mx.grad(lambda s_: mx.quantized_matmul(x, q, s_, mode=mode).sum())(s)
    with pytest.raises(ValueError, match="scales of a floating-point"):
        mx.grad(lambda s_: mx.gather_qmm(x, q, s_, rhs_indices=mx.array(0), mode=mode).sum())(s)
    # x's own gradient is still there afterwards
    g = mx.grad(lambda a: mx.quantized_matmul(a, q, s, mode=mode).sum())(x)
    d = mx.dequantize(q, s, mode=mode, dtype=mx.float32)
    np.testing.assert_allclose(np.array(g), np.tile(np.array(d).sum(0), (2, 1)), rtol=1e-5,
                               atol=1e-5)


def test_bad_arguments():
    w = mx.zeros((4, 64))
    with pytest.raises(ValueError):
        mx.quantize(w, group_size=64, mode="mxfp4")
    with pytest.raises(ValueError):
        mx.quantize(w, mode="fp3")
    q, s = mx.quantize(w, mode="mxfp4")
    with pytest.raises(ValueError):
        mx.dequantize(q, s, mx.zeros(s.shape), mode="mxfp4")
    with pytest.raises(ValueError):
        mx.quantized_matmul(mx.zeros((1, 64)), q, s)  # affine needs biases


@pytest.mark.parametrize("mode", sorted(MODES))
def test_quantized_linear_and_nn_quantize(mode):
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 16))
    x = mx.random.normal((5, 64))
    nn.quantize(model, mode=mode)
    layer = model.layers[0]
    assert isinstance(layer, nn.QuantizedLinear) and "biases" not in layer
    assert (layer.group_size, layer.bits) == MODES[mode]
    d = mx.dequantize(layer.weight, layer.scales, mode=mode, dtype=mx.float32)
    want = x @ d.T + layer.bias
    np.testing.assert_allclose(np.array(layer(x)), np.array(want), rtol=1e-5, atol=1e-6)
    emb = nn.QuantizedEmbedding(10, 64, mode=mode)
    rows = np.array(mx.dequantize(emb.weight, emb.scales, mode=mode))
    np.testing.assert_array_equal(np.array(emb(mx.array([3, 1]))), rows[[3, 1]])


@pytest.mark.parametrize("mode", ["nvfp4", "mxfp8"])
def test_qqmm_rounds_both_operands(mode):
    rng = np.random.default_rng(3)
    # the gradients round along N and M too: whole groups of them
    x = mx.array(rng.standard_normal((32, 128)).astype(np.float32))
    w = mx.array(rng.standard_normal((64, 128)).astype(np.float32))

    def rounded(a):
        return np.array(mx.dequantize(*mx.quantize(a, mode=mode), mode=mode, dtype=mx.float32),
                        np.float64)

    want = rounded(x) @ rounded(w).T  # exact values, float64 sums
    got = np.array(mx.qqmm(x, w, mode=mode))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    wq, scales = mx.quantize(w, mode=mode)
    np.testing.assert_allclose(np.array(mx.qqmm(x, wq, scales, mode=mode)), want,
                               rtol=1e-5, atol=1e-4)
    assert mx.qqmm(x.astype(mx.bfloat16), w, mode=mode).dtype == mx.bfloat16
    assert mx.qqmm(x[0], w, mode=mode).shape == (64,)
    # MLX's gradients: each product's operands rounded along their last axes
    ct = mx.array(rng.standard_normal((32, 64)).astype(np.float32))
    _, (dx, dw) = mx.vjp(lambda a, b: mx.qqmm(a, b, mode=mode), [x, w], [ct])
    np.testing.assert_allclose(np.array(dx), np.array(mx.qqmm(ct, w.T, mode=mode)), rtol=1e-6)
    np.testing.assert_allclose(np.array(dw), np.array(mx.qqmm(ct.T, x.T, mode=mode)),
                               rtol=1e-6)


def test_qqmm_refuses():
    x, w = mx.ones((2, 64)), mx.ones((8, 64))
    with pytest.raises(ValueError):
        mx.qqmm(x, w, mode="affine")
    with pytest.raises(ValueError):  # tensor scales for both operands or for neither
        mx.qqmm(x, w, mode="nvfp4", global_scale_x=mx.array(1.0))
    with pytest.raises(ValueError):  # only nvfp4 has them
        mx.qqmm(x, w, mode="mxfp8", global_scale_x=mx.array(1.0), global_scale_w=mx.array(1.0))
    with pytest.raises(ValueError):
        mx.qqmm(mx.ones((2, 64), dtype=mx.int32), w)
    with pytest.raises(ValueError):
        mx.qqmm(x, w, mx.ones((8, 4), dtype=mx.uint8))  # scales with an unquantized w
    with pytest.raises(ValueError):
        mx.qqmm(mx.ones((2, 60)), mx.ones((8, 60)))  # K not whole groups
    assert mx.qqmm(x, w, mode="mxfp8").tolist() == [[64.0] * 8] * 2  # ones are exact


def test_nvfp4_global_scale():
    """nvfp4's tensor scale: values quantized as w * 2688 / g, so a tensor of
    small values keeps its precision where e4m3 scales alone underflow."""
    rng = np.random.default_rng(5)
    lut = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    exact = lut[rng.integers(0, 16, (8, 64))]
    exact[:, ::16] = 6.0  # every group's largest value is 6: its scale is exact
    w = mx.array(exact)
    g = mx.array(6.0)
    codes, scales = mx.quantize(w, mode="nvfp4", global_scale=g)
    back = mx.dequantize(codes, scales, mode="nvfp4", global_scale=g, dtype=mx.float32)
    np.testing.assert_array_equal(np.array(back), exact)
    assert mx.dequantize(codes, scales, mode="nvfp4", global_scale=g).dtype == mx.bfloat16
    # small values: e4m3 scales alone lose them, a tensor scale keeps them
    tiny = rng.standard_normal((16, 256)).astype(np.float32) * 1e-5
    t = mx.array(tiny)
    g = mx.array(np.abs(tiny).max())
    plain = np.array(mx.dequantize(*mx.quantize(t, mode="nvfp4"), mode="nvfp4",
                                   dtype=mx.float32))
    scaled = np.array(mx.dequantize(*mx.quantize(t, mode="nvfp4", global_scale=g),
                                    mode="nvfp4", global_scale=g, dtype=mx.float32))
    err_plain = np.abs(plain - tiny).max() / np.abs(tiny).max()
    err_scaled = np.abs(scaled - tiny).max() / np.abs(tiny).max()
    # fp4 rounds by up to 1/6 of a group's largest value (6 has 4 as neighbour)
    assert err_scaled < 0.2 < err_plain, (err_scaled, err_plain)
    # qqmm with both tensor scales multiplies the operands as they round
    x = mx.array(rng.standard_normal((4, 64)).astype(np.float32) * 1e-4)
    wm = mx.array(rng.standard_normal((8, 64)).astype(np.float32) * 1e-4)
    gx, gw = mx.abs(x).max(), mx.abs(wm).max()

    def rounded(a, ga):
        return mx.dequantize(*mx.quantize(a, mode="nvfp4", global_scale=ga), mode="nvfp4",
                             global_scale=ga, dtype=mx.float32)

    want = np.array(rounded(x, gx)) @ np.array(rounded(wm, gw)).T
    got = mx.qqmm(x, wm, mode="nvfp4", global_scale_x=gx, global_scale_w=gw)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-14)
    wq, ws = mx.quantize(wm, mode="nvfp4", global_scale=gw)
    got_q = mx.qqmm(x, wq, ws, mode="nvfp4", global_scale_x=gx, global_scale_w=gw)
    np.testing.assert_allclose(np.array(got_q), want, rtol=1e-5, atol=1e-14)
    # MLX's checks: nvfp4 only, one element, float32
    for bad, mode in ((mx.array(1.0), "mxfp4"), (mx.array([1.0, 2.0]), "nvfp4"),
                      (mx.array(1.0, dtype=mx.float16), "nvfp4")):
        with pytest.raises(ValueError):
            mx.quantize(w, mode=mode, global_scale=bad)
        with pytest.raises(ValueError):
            mx.dequantize(codes, scales, mode=mode, global_scale=bad)
