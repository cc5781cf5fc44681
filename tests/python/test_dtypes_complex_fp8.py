"""complex64 ops and the fp8 conversions against NumPy (references here)."""
import numpy as np
import pytest

import weft as mx

RNG = np.random.default_rng(7)


def cplx(*shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


@pytest.mark.parametrize("name", ["tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "log1p",
                                  "log2", "log10", "square", "sqrt", "reciprocal", "arcsinh",
                                  "arccosh", "arctanh"])
def test_complex_functions_match_numpy(name):
    z = np.concatenate([cplx(64), np.array([3 + 4j, -5 + 12j, -8 + 0j, 9j, -0.5 + 0j],
                                           np.complex64)])
    got = np.array(getattr(mx, name)(mx.array(z)))
    assert got.dtype == np.complex64
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_complex_sign_rsqrt_power():
    z = np.array([3 + 4j, 0j, -2 + 0j, 1e-3 - 1e-3j], np.complex64)
    with np.errstate(invalid="ignore"):
        want = np.where(z == 0, 0, z / np.abs(z))
    np.testing.assert_allclose(np.array(mx.sign(mx.array(z))), want, rtol=1e-6)
    nz = z[z != 0]
    np.testing.assert_allclose(np.array(mx.rsqrt(mx.array(nz))), 1 / np.sqrt(nz), rtol=1e-5)
    assert mx.power(mx.array(0j), 2).item() == 0j
    assert mx.isnan(mx.power(mx.array(0j), float("nan"))).item()
    w = cplx(8)
    np.testing.assert_allclose(np.array(mx.power(mx.array(w), mx.array(w[::-1].copy()))),
                               np.power(w, w[::-1]), rtol=1e-4)


@pytest.mark.parametrize("op", ["prod", "max", "min", "sum"])
def test_complex_reductions_every_axis_set(op):
    x = (RNG.integers(-2, 3, (3, 4, 5)) + 1j * RNG.integers(-2, 3, (3, 4, 5))).astype(np.complex64)
    for axes in (None, 0, 1, 2, (0, 1), (0, 2), (1, 2), (0, 1, 2)):
        got = np.array(getattr(mx, op)(mx.array(x), axis=axes))
        np.testing.assert_allclose(got, getattr(np, op)(x, axis=axes), rtol=1e-5)


def test_complex_max_min_nan_and_maximum():
    for pos in range(4):
        v = np.array([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j], np.complex64)
        v[pos] = complex(np.nan, 1) if pos % 2 else complex(1, np.nan)
        a = v.reshape(2, 2)
        for axis in (0, 1):
            for op in ("max", "min"):
                assert np.array_equal(np.array(getattr(mx, op)(mx.array(a), axis=axis)),
                                      getattr(np, op)(a, axis=axis), equal_nan=True)
    x, y = cplx(50), cplx(50)
    y[::3] = x[::3].real + 1j * (x[::3].imag + 1)  # ties in the real part
    assert np.array_equal(np.array(mx.maximum(mx.array(x), mx.array(y))), np.maximum(x, y))
    assert np.array_equal(np.array(mx.minimum(mx.array(x), mx.array(y))), np.minimum(x, y))


def test_complex_scans():
    x = cplx(4, 6)
    for axis in (0, 1):
        np.testing.assert_allclose(np.array(mx.cumsum(mx.array(x), axis=axis)),
                                   np.cumsum(x, axis=axis), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(mx.cumprod(mx.array(x), axis=axis)),
                                   np.cumprod(x, axis=axis), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(mx.cumprod(mx.array(x), axis=axis, reverse=True)),
                                   np.flip(np.cumprod(np.flip(x, axis), axis=axis), axis),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 3)), ((7,), (7, 4)), ((5, 7), (7,)),
                                   ((2, 5, 7), (7, 3)), ((2, 1, 5, 7), (3, 7, 4)),
                                   ((64, 96), (96, 80))])
def test_complex_matmul(sa, sb):
    a, b = cplx(*sa), cplx(*sb)
    np.testing.assert_allclose(np.array(mx.array(a) @ mx.array(b)), a @ b, rtol=1e-4, atol=1e-4)
    ar = np.ascontiguousarray(a.real)
    np.testing.assert_allclose(np.array(mx.array(ar) @ mx.array(b)), ar @ b, rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(np.array(mx.matmul(mx.array(a), mx.array(b.real.copy()))),
                               a @ b.real, rtol=1e-4, atol=1e-4)


def test_complex_matmul_transposed_views_and_grad():
    a, b = cplx(6, 5), cplx(4, 6)
    got = mx.matmul(mx.array(a).T, mx.array(b).T)
    np.testing.assert_allclose(np.array(got), a.T @ b.T, rtol=1e-4, atol=1e-4)
    c = cplx(5, 4)
    # MLX's convention (the adjoint, as PyTorch): d/da = ones @ conj(c).T
    g = mx.grad(lambda x: mx.real(mx.sum(x @ mx.array(c))))(mx.array(a))
    np.testing.assert_allclose(np.array(g), np.ones((6, 4)) @ c.conj().T, rtol=1e-4, atol=1e-4)


def test_complex_rejections_are_value_errors():
    z = mx.array([1 + 1j])
    for f in (mx.floor, mx.expm1, mx.sigmoid, mx.erf, lambda t: mx.less(t, t),
              lambda t: mx.remainder(t, t), lambda t: mx.argmax(t)):
        with pytest.raises(ValueError):
            f(z)


def fp8_value(c):
    s = -1.0 if c & 0x80 else 1.0
    e, m = (c >> 3) & 15, c & 7
    return s * (m * 2.0 ** -9 if e == 0 else (8 + m) * 2.0 ** (e - 10))


def test_from_fp8_every_code():
    codes = np.arange(256, dtype=np.uint8)
    want = np.array([fp8_value(int(c)) for c in codes])
    for dt, npdt in ((mx.float32, np.float32), (mx.float64, np.float64)):
        assert np.array_equal(np.array(mx.from_fp8(mx.array(codes), dtype=dt)), want.astype(npdt))
    default = mx.from_fp8(mx.array(codes))
    assert default.dtype == mx.bfloat16
    assert np.array_equal(np.array(default.astype(mx.float64)), want)


def test_to_fp8_nearest_even_and_saturation():
    pos = np.array([fp8_value(c) for c in range(127)])
    mids = (pos[:-1] + pos[1:]) / 2
    x = np.concatenate([RNG.standard_normal(3000) * 10.0 ** RNG.uniform(-4, 3, 3000), pos, mids,
                        -mids, [0.0, -0.0, 448, 463.9, 464, 1e9, np.inf, -np.inf]]).astype(np.float32)
    got = np.array(mx.to_fp8(mx.array(x)))
    a = np.abs(x.astype(np.float64))
    idx = np.clip(np.searchsorted(pos, a), 1, 126)
    lo, hi = idx - 1, idx
    dl, dh = a - pos[lo], pos[hi] - a
    code = np.where(dl < dh, lo, np.where(dh < dl, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a >= 464, 126, np.where(a >= pos[126], 126, code))
    code = code | np.where(np.signbit(x), 0x80, 0)
    assert np.array_equal(got, code.astype(np.uint8))
    assert mx.to_fp8(mx.array([np.nan])).item() == 0x7E
    with pytest.raises(ValueError):
        mx.to_fp8(mx.array([1, 2]))
    with pytest.raises(ValueError):
        mx.from_fp8(mx.array([1.0]))


def test_complex_round_var_logaddexp_vecdot_and_parts():
    z = np.array([22.2 + 3.6j, 18.5 + 98.2j, -0.5 - 2.5j], np.complex64)
    assert mx.round(mx.array(z)).tolist() == [22 + 4j, 18 + 98j, -0 - 2j]
    x = cplx(5, 3)
    for ddof in (0, 1):
        v = mx.var(mx.array(x), axis=0, ddof=ddof)
        assert v.dtype == mx.float32
        np.testing.assert_allclose(np.array(v), x.var(axis=0, ddof=ddof), rtol=1e-5)
        np.testing.assert_allclose(np.array(mx.std(mx.array(x), ddof=ddof)), x.std(ddof=ddof),
                                   rtol=1e-5)
    a, b = cplx(6), cplx(6)
    got = np.array(mx.logaddexp(mx.array(a), mx.array(b)))
    np.testing.assert_allclose(np.exp(got), np.exp(a) + np.exp(b), rtol=1e-4)  # up to 2 pi i
    np.testing.assert_allclose(np.array(mx.vecdot(mx.array(a), mx.array(b))), np.vdot(a, b),
                               rtol=1e-5)
    w = mx.array(np.array([1 + 2j, 3j]))  # complex128 in: complex64
    assert w.dtype == mx.complex64 and w.real.tolist() == [1, 0] and w.imag.tolist() == [2, 3]
    assert complex(mx.array(1 + 2j)) == 1 + 2j
    assert mx.finfo(mx.complex64).dtype == mx.float32


def test_integer_round_with_decimals_keeps_the_dtype():
    for decimals, want in ((0, [15, 122]), (-1, [20, 120]), (-2, [0, 100])):
        y = mx.round(mx.array([15, 122], mx.int32), decimals=decimals)
        assert y.dtype == mx.int32 and y.tolist() == want


def test_copies_are_separate_objects_for_in_place_operators():
    import copy

    for dtype in (mx.int8, mx.uint32, mx.float16, mx.complex64):
        x = mx.array([[1, 2], [3, 4]], dtype=dtype)
        for make in (copy.copy, copy.deepcopy):
            y = make(x)
            assert y is not x
            y -= 1
            assert (np.array(y) == np.array(x) - 1).all()
            assert np.array(x).tolist() == [[1, 2], [3, 4]]


def test_int8_maximum_minimum_every_pair():
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    assert np.array_equal(np.array(mx.maximum(mx.array(a), mx.array(b))), np.maximum(a, b))
    assert np.array_equal(np.array(mx.minimum(mx.array(a), mx.array(b))), np.minimum(a, b))


def test_complex_vjps_equal_mlx():
    """The adjoint convention, checked against MLX itself where it is installed."""
    mlx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(3)
    z = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    w = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    ct = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    unary = ["exp", "log", "sqrt", "sin", "cos", "tanh", "square", "reciprocal", "conj",
             "negative", "sinh", "cosh"]
    for name in unary:
        got = mx.vjp(getattr(mx, name), [mx.array(z)], [mx.array(ct)])[1][0]
        want = mlx.vjp(getattr(mlx, name), [mlx.array(z)], [mlx.array(ct)])[1][0]
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=2e-4, atol=2e-5,
                                   err_msg=name)
    for name in ["multiply", "divide", "add", "subtract"]:
        got = mx.vjp(getattr(mx, name), [mx.array(z), mx.array(w)], [mx.array(ct)])[1]
        want = mlx.vjp(getattr(mlx, name), [mlx.array(z), mlx.array(w)], [mlx.array(ct)])[1]
        for g, h in zip(got, want):
            np.testing.assert_allclose(np.array(g), np.array(h), rtol=2e-4, atol=2e-5,
                                       err_msg=name)
    for name in ["real", "imag", "abs"]:
        real_ct = ct.real.copy()
        got = mx.vjp(getattr(mx, name), [mx.array(z)], [mx.array(real_ct)])[1][0]
        want = mlx.vjp(getattr(mlx, name), [mlx.array(z)], [mlx.array(real_ct)])[1][0]
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=2e-4, atol=2e-5,
                                   err_msg=name)
    a, b, g_out = z.T.copy(), w[:, :3].copy(), ct.T[:, :3].copy()  # (4, 3) @ (3, 3)
    got = mx.vjp(mx.matmul, [mx.array(a), mx.array(b)], [mx.array(g_out)])[1]
    want = mlx.vjp(mlx.matmul, [mlx.array(a), mlx.array(b)], [mlx.array(g_out)])[1]
    for g, h in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(h), rtol=2e-4, atol=2e-5)
    loss = lambda x: mx.real(mx.sum(x * mx.conj(x)))
    np.testing.assert_allclose(np.array(mx.grad(loss)(mx.array(z))), 2 * z, rtol=1e-5)


@pytest.mark.parametrize("name", ["arcsinh", "arctanh"])
def test_complex_inverse_hyperbolic_far_and_near_and_on_branch_cuts(name):
    # log(z + sqrt(z^2 + 1)) lost every digit near 0 (1e6 eps) and overflowed
    # far out; the log1p form of arctanh lost digits near +-1 and far out
    rng = np.random.default_rng(5)
    for lo, hi in ((1e-6, 1e-2), (0.1, 10), (10, 80), (1e5, 1e15)):
        r = np.exp(rng.uniform(np.log(lo), np.log(hi), 4000))
        z = (r * np.exp(1j * rng.uniform(-np.pi, np.pi, 4000))).astype(np.complex64)
        want = getattr(np, name)(z.astype(np.complex128))
        got = np.array(getattr(mx, name)(mx.array(z)))
        assert np.max(np.abs(got - want) / np.abs(want)) < 8 * 2**-24, (name, lo, hi)
    # special values, the side of each branch cut (the sign of a zero part)
    z = np.array([0j, complex(-0.0, -0.0), complex(-0.0, 0.0), complex(0.0, -0.0), np.inf + 0j,
                  complex(0, np.inf), complex(np.nan, 0), 1 + 0j, -1 + 0j, 1j, -1j, 2 + 0j,
                  complex(2, -0.0), 2j, complex(-0.0, 2), complex(-0.0, -2), -3 + 4j], np.complex64)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
    got = np.array(getattr(mx, name)(mx.array(z)))
    np.testing.assert_allclose(got, want, rtol=3e-7)
    for part in (np.real, np.imag):
        numbers = ~np.isnan(part(want))
        assert np.array_equal(np.signbit(part(got))[numbers], np.signbit(part(want))[numbers])


def test_complex_arccosh_takes_the_side_of_its_cut_from_the_zero_sign():
    # a + 1 with 1 + 0j turned an imaginary -0 into +0: arccosh(-2 - 0j) was
    # -1.317 + 3.14j, not 1.317 - 3.14j; an infinite part gave NaN
    parts = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1e4, -1e4, np.inf, -np.inf, np.nan]
    z = np.array([complex(re, im) for re in parts for im in parts], np.complex64)
    with np.errstate(all="ignore"):
        want = np.arccosh(z)
    got = np.array(mx.arccosh(mx.array(z)))
    np.testing.assert_allclose(got, want, rtol=3e-7)
    for part in (np.real, np.imag):
        numbers = ~np.isnan(part(want))
        assert np.array_equal(np.signbit(part(got))[numbers], np.signbit(part(want))[numbers])
