"""mx.quantize, mx.dequantize, mx.quantized_matmul and mx.gather_qmm.
NumPy is the reference: MLX's affine rule written out in float32 for the
codes, scales and biases, and float64 products of the dequantized matrix;
MLX itself, when importable, gives the same codes, scales and biases bit
for bit."""
import numpy as np
import pytest

import weft as mx

try:
    import mlx.core as mlx_core
except ImportError:  # the check against MLX is skipped, with this reason
    mlx_core = None

BITS = (2, 3, 4, 5, 6, 8)
GROUPS = (32, 64, 128)


def reference_quantize(w, group_size, bits):
    """MLX's affine rule in float32 -> (codes per element, scales, biases)."""
    g = w.astype(np.float32).reshape(-1, group_size)
    n_bins = np.float32((1 << bits) - 1)
    w_max, w_min = g.max(axis=1), g.min(axis=1)
    mask = np.abs(w_min) > np.abs(w_max)
    scale = np.maximum((w_max - w_min) / n_bins, np.float32(1e-7)).astype(np.float32)
    scale = np.where(mask, scale, -scale)
    edge = np.where(mask, w_min, w_max)
    q0 = np.rint(edge / scale)
    nz = q0 != 0
    scale = np.where(nz, edge / np.where(nz, q0, 1), scale).astype(np.float32)
    bias = np.where(nz, edge, 0).astype(np.float32)
    codes = np.clip(np.rint((g - bias[:, None]) / scale[:, None]), 0, n_bins).astype(np.uint32)
    shape = w.shape[:-1] + (w.shape[-1] // group_size,)
    return codes.reshape(w.shape), scale.reshape(shape), bias.reshape(shape)


def unpack(packed, bits):
    """Codes of each row from its little-endian bit stream."""
    p = np.asarray(packed, dtype=np.uint32)
    raw = p.reshape(-1, p.shape[-1]).view(np.uint8)
    bitstream = np.unpackbits(raw, axis=1, bitorder="little")
    k = p.shape[-1] * 32 // bits
    weights = (1 << np.arange(bits)).astype(np.uint32)
    codes = (bitstream[:, : k * bits].reshape(-1, k, bits) * weights).sum(axis=2)
    return codes.astype(np.uint32).reshape(p.shape[:-1] + (k,))


def dense(codes, scales, biases, group_size):
    s = np.repeat(np.asarray(scales, np.float64), group_size, axis=-1)
    b = np.repeat(np.asarray(biases, np.float64), group_size, axis=-1)
    return codes * s + b


def weights(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * rng.uniform(0.5, 3, shape[:-1] + (1,))).astype(np.float32)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_quantize_matches_reference_rule(bits, group_size):
    w = weights((6, group_size * 3), seed=bits * group_size)
    q, s, b = mx.quantize(mx.array(w), group_size=group_size, bits=bits)
    assert q.dtype == mx.uint32 and q.shape == (6, group_size * 3 * bits // 32)
    codes, scales, biases = reference_quantize(w, group_size, bits)
    np.testing.assert_array_equal(unpack(q, bits), codes)
    np.testing.assert_array_equal(np.array(s), scales)
    np.testing.assert_array_equal(np.array(b), biases)
    d = np.array(mx.dequantize(q, s, b, group_size=group_size, bits=bits))
    want = (codes * np.repeat(scales, group_size, -1)).astype(np.float32) + np.repeat(biases, group_size, -1)
    np.testing.assert_array_equal(d, want)


@pytest.mark.skipif(mlx_core is None, reason="mlx is not importable (pip install mlx mlx-cpu)")
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_same_bits_as_mlx(bits, group_size):
    w = weights((2, 3, group_size * 4), seed=7 + bits)
    for dtype in ("float32", "float16", "bfloat16"):
        ours = mx.quantize(mx.array(w).astype(getattr(mx, dtype)), group_size, bits)
        theirs = mlx_core.quantize(mlx_core.array(w).astype(getattr(mlx_core, dtype)), group_size, bits)
        for a, b in zip(ours, theirs):
            a32, b32 = a.astype(mx.float32) if a.dtype != mx.uint32 else a, b
            if b.dtype != mlx_core.uint32:
                b32 = b.astype(mlx_core.float32)
            np.testing.assert_array_equal(np.array(a32), np.array(b32))
        d_ours = mx.dequantize(*ours, group_size, bits).astype(mx.float32)
        d_theirs = mlx_core.dequantize(*theirs, group_size, bits).astype(mlx_core.float32)
        np.testing.assert_array_equal(np.array(d_ours), np.array(d_theirs))
    x = np.random.default_rng(1).standard_normal((3, group_size * 4)).astype(np.float32)
    q, s, b = mx.quantize(mx.array(w[0]), group_size, bits)
    y = mx.quantized_matmul(mx.array(x), q, s, b, True, group_size, bits)
    y_mlx = mlx_core.quantized_matmul(mlx_core.array(x), *mlx_core.quantize(mlx_core.array(w[0]), group_size, bits),
                                      True, group_size, bits)
    np.testing.assert_allclose(np.array(y), np.array(y_mlx), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("transpose", (True, False))
def test_quantized_matmul_against_float64(bits, transpose):
    gs = 32
    rng = np.random.default_rng(bits)
    w = weights((40, 64) if transpose else (64, 96), seed=bits)
    q, s, b = mx.quantize(mx.array(w), gs, bits)
    wd = dense(unpack(q, bits), s, b, gs)
    for rows in (1, 3, 9):
        x = rng.standard_normal((2, rows, 64)).astype(np.float32)
        y = np.array(mx.quantized_matmul(mx.array(x), q, s, b, transpose=transpose, group_size=gs, bits=bits))
        want = x.astype(np.float64) @ (wd.T if transpose else wd)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


def test_half_activations_and_strided_x():
    w = weights((32, 64))
    q, s, b = mx.quantize(mx.array(w), 64, 4)
    x = np.random.default_rng(3).standard_normal((64, 5)).astype(np.float32)
    xt = mx.array(x).T  # a transposed view
    y = mx.quantized_matmul(xt, q, s, b)
    want = x.T.astype(np.float64) @ dense(unpack(q, 4), s, b, 64).T
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-4)
    yh = mx.quantized_matmul(xt.astype(mx.float16), q, s.astype(mx.float16), b.astype(mx.float16))
    assert yh.dtype == mx.float16


def test_gather_qmm_picks_experts():
    rng = np.random.default_rng(5)
    w = weights((4, 16, 64))
    q, s, b = mx.quantize(mx.array(w), 32, 4)
    wd = dense(unpack(q, 4), s, b, 32)
    x = rng.standard_normal((3, 2, 64)).astype(np.float32)
    lhs = np.array([0, 2, 1, 2], np.uint32)
    rhs = np.array([3, 0, 0, 1], np.uint32)
    y = np.array(mx.gather_qmm(mx.array(x), q, s, b, mx.array(lhs), mx.array(rhs), group_size=32, bits=4))
    want = np.stack([x[i] @ wd[j].T for i, j in zip(lhs, rhs)])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)
    only_rhs = np.array(mx.gather_qmm(mx.array(x[:1]), q, s, b, rhs_indices=mx.array(rhs), group_size=32, bits=4))
    np.testing.assert_allclose(only_rhs, np.stack([x[0] @ wd[j].T for j in rhs]), rtol=1e-5, atol=1e-4)


def test_gather_qmm_gradients_match_take_then_multiply():
    rng = np.random.default_rng(9)
    q, s, b = mx.quantize(mx.array(weights((3, 16, 64))), 32, 4)
    x = mx.array(rng.standard_normal((4, 2, 64)).astype(np.float32))
    lhs, rhs = mx.array([0, 3, 3, 1, 2]), mx.array([2, 0, 2, 1, 1])
    ct = mx.array(rng.standard_normal((5, 2, 16)).astype(np.float32))

    def gathered(x_, s_, b_):
        return mx.gather_qmm(x_, q, s_, b_, lhs, rhs, group_size=32, bits=4)

    def reference(x_, s_, b_):
        return mx.quantized_matmul(x_[lhs], q[rhs], s_[rhs], b_[rhs], group_size=32, bits=4)

    (o1,), g1 = mx.vjp(gathered, [x, s, b], [ct])
    (o2,), g2 = mx.vjp(reference, [x, s, b], [ct])
    np.testing.assert_allclose(np.array(o1), np.array(o2), rtol=1e-6, atol=1e-6)
    for a, r in zip(g1, g2):
        np.testing.assert_allclose(np.array(a), np.array(r), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        mx.eval(mx.gather_qmm(x, q, s, b, lhs, mx.array([0, 1, 2, 3, 0]), group_size=32, bits=4))


def test_grad_and_vmap():
    w = weights((24, 64))
    q, s, b = mx.quantize(mx.array(w), 32, 4)
    wd = dense(unpack(q, 4), s, b, 32)
    x = np.random.default_rng(2).standard_normal((3, 64)).astype(np.float32)
    g = mx.grad(lambda a: (mx.quantized_matmul(a, q, s, b, group_size=32, bits=4) ** 2).sum())(mx.array(x))
    want = 2 * (x @ wd.T) @ wd
    np.testing.assert_allclose(np.array(g), want, rtol=1e-4, atol=1e-3)
    gs, gb = mx.grad(lambda s_, b_: mx.quantized_matmul(mx.array(x), q, s_, b_, group_size=32, bits=4).sum(),
                     argnums=(0, 1))(s, b)
    col = x.sum(axis=0)  # d(sum y)/dW[n, k] = sum_i x[i, k]
    codes = unpack(q, 4)
    np.testing.assert_allclose(np.array(gb), np.tile(col.reshape(2, 32).sum(1), (24, 1)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.array(gs), (codes * col).reshape(24, 2, 32).sum(2), rtol=1e-4, atol=1e-3)
    v = mx.vmap(lambda a: mx.quantized_matmul(a, q, s, b, group_size=32, bits=4))(mx.array(x))
    np.testing.assert_allclose(np.array(v), x @ wd.T, rtol=1e-5, atol=1e-4)
    c = mx.compile(lambda a: mx.quantized_matmul(a, q, s, b, group_size=32, bits=4) * 2)(mx.array(x))
    np.testing.assert_allclose(np.array(c), 2 * (x @ wd.T), rtol=1e-5, atol=1e-4)


def test_no_gradient_with_respect_to_the_codes():
    # as MLX: a RuntimeError (NotImplementedError is one), for
    # quantized_matmul and gather_qmm alike; stop_gradient lets x's through
    w = mx.array(weights((8, 64)))
    q, s, b = mx.quantize(w, 32, 4)
    x = mx.array(np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32))
    products = [lambda c: mx.quantized_matmul(x, c, s, b, group_size=32, bits=4),
                lambda c: mx.gather_qmm(x, c, s, b, rhs_indices=mx.array(0), group_size=32, bits=4)]
    for product in products:
        with pytest.raises(RuntimeError, match="quantized weights"):
            mx.grad(lambda c: product(c).sum())(q)
    g = mx.grad(lambda a, c: mx.quantized_matmul(a, mx.stop_gradient(c), s, b, group_size=32,
                                                    bits=4).sum())(x, q)
    want = np.tile(dense(unpack(q, 4), s, b, 32).sum(0), (2, 1))
    np.testing.assert_allclose(np.array(g), want, rtol=1e-5, atol=1e-4)


def test_bad_arguments_raise_value_error():
    w = mx.array(weights((4, 64)))
    with pytest.raises(ValueError):
        mx.quantize(w, group_size=16)
    with pytest.raises(ValueError):
        mx.quantize(w, bits=7)
    with pytest.raises(ValueError):
        mx.quantize(w, mode="fp3")
    with pytest.raises(ValueError):
        mx.quantize(mx.array(weights((4, 48))), group_size=32)
    with pytest.raises(ValueError):
        mx.quantize(mx.array([1.0, 2.0]))
    q, s, b = mx.quantize(w)
    with pytest.raises(ValueError):
        mx.quantized_matmul(mx.ones((2, 63)), q, s, b)
    with pytest.raises(ValueError):
        mx.quantized_matmul(mx.ones((2, 64)), q, s)
    with pytest.raises(ValueError):
        mx.dequantize(q, s, b, group_size=32)
    with pytest.raises(ValueError):
        mx.gather_qmm(mx.ones((1, 2, 64)), q, s, b, lhs_indices=mx.array([0.5]))
    assert mx.quantize(w)[0].shape == (4, 8)  # still works
