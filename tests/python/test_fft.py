"""weft.fft against numpy.fft: every function, lengths that take each path
of the kernel (radix 2/3/4/5/7, Bluestein), n / s padding and truncation,
axes in any order, norms, input dtypes, layouts, errors; gradients (vjp,
jvp, vmap) against central differences in double of the same function
written with numpy.fft, and against MLX when it is installed."""
import math

import numpy as np
import pytest

import weft as mx

LENGTHS = (1, 2, 3, 5, 7, 8, 16, 17, 64, 100, 127, 1024)
NORMS = ("backward", "ortho", "forward")


def assert_close(got, want, n):
    """Largest error within 1e-5 * log2(n) of the largest magnitude (float32
    work against numpy's double)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err / scale <= 1e-5 * max(1.0, math.log2(max(n, 1))), (err / scale, n)


def complex_input(rng, *shape):
    return (rng.randn(*shape) + 1j * rng.randn(*shape)).astype(np.complex64)


def test_one_axis_transforms_match_numpy():
    rng = np.random.RandomState(0)
    for n in LENGTHS:
        c = complex_input(rng, 3, n)
        r = rng.randn(3, n).astype(np.float32)
        for norm in NORMS:
            assert_close(mx.fft.fft(mx.array(c), norm=norm), np.fft.fft(c, norm=norm), n)
            assert_close(mx.fft.ifft(mx.array(c), norm=norm), np.fft.ifft(c, norm=norm), n)
            assert_close(mx.fft.rfft(mx.array(r), norm=norm), np.fft.rfft(r, norm=norm), n)
            spec = np.fft.rfft(r).astype(np.complex64)
            assert_close(mx.fft.irfft(mx.array(spec), n=n, norm=norm),
                         np.fft.irfft(spec, n=n, norm=norm), n)
    # padding and truncation to n, along either axis
    c = complex_input(rng, 12, 10)
    for n in (1, 6, 10, 15, 32):
        for axis in (0, 1, -1):
            assert_close(mx.fft.fft(mx.array(c), n=n, axis=axis), np.fft.fft(c, n=n, axis=axis), n)
            assert_close(mx.fft.ifft(mx.array(c), n=n, axis=axis),
                         np.fft.ifft(c, n=n, axis=axis), n)
            assert_close(mx.fft.rfft(mx.array(c.real), n=n, axis=axis),
                         np.fft.rfft(c.real, n=n, axis=axis), n)
            assert_close(mx.fft.irfft(mx.array(c), n=n, axis=axis),
                         np.fft.irfft(c, n=n, axis=axis), n)
    # irfft's default length 2 (m - 1)
    assert_close(mx.fft.irfft(mx.array(c)), np.fft.irfft(c), 18)


def test_many_axes_match_numpy():
    rng = np.random.RandomState(1)
    c = complex_input(rng, 6, 5, 8)
    r = c.real.copy()
    cases = [(None, None), (None, (1, 2)), (None, (2, 0)), ((4, 9), (0, 2)), ((7, 3), (2, 1)),
             ((3, 4, 5), (0, 1, 2)), ((6,), (-1,))]
    for s, axes in cases:
        for name in ("fftn", "ifftn", "rfftn", "irfftn"):
            x = r if name == "rfftn" else c
            want = getattr(np.fft, name)(x, s=s, axes=axes)
            got = getattr(mx.fft, name)(mx.array(x), s=s, axes=axes)
            assert_close(got, want, want.size)
    for name in ("fft2", "ifft2", "rfft2", "irfft2"):
        x = r if name == "rfft2" else c
        for axes in ((-2, -1), (0, 2), (2, 0)):
            for norm in NORMS:
                want = getattr(np.fft, name)(x, axes=axes, norm=norm)
                got = getattr(mx.fft, name)(mx.array(x), axes=axes, norm=norm)
                assert_close(got, want, want.size)
    # views: transposed, strided, broadcast
    t = mx.transpose(mx.array(c), (2, 0, 1))
    assert_close(mx.fft.fftn(t, axes=(0, 2)), np.fft.fftn(c.transpose(2, 0, 1), axes=(0, 2)), 40)
    s = mx.array(c)[::2, :, ::-3]
    assert_close(mx.fft.fft(s, axis=0), np.fft.fft(c[::2, :, ::-3], axis=0), 3)
    b = mx.broadcast_to(mx.array(r[:1]), (4, 5, 8))
    assert_close(mx.fft.rfft2(b), np.fft.rfft2(np.broadcast_to(r[:1], (4, 5, 8))), 40)


def test_input_dtypes():
    ints = np.arange(10, dtype=np.int32) - 3
    out = mx.fft.fft(mx.array(ints))
    assert out.dtype == mx.complex64
    assert_close(out, np.fft.fft(ints), 10)
    assert mx.fft.rfft(mx.array(ints)).dtype == mx.complex64
    assert_close(mx.fft.rfft(mx.array(ints)), np.fft.rfft(ints), 10)
    flags = np.array([True, False, True, True])
    assert_close(mx.fft.fft(mx.array(flags)), np.fft.fft(flags.astype(np.float64)), 4)
    # a complex input of rfft keeps its real part, as MLX
    c = np.array([1 + 2j, 3 - 1j, -2 + 0.5j], dtype=np.complex64)
    assert_close(mx.fft.rfft(mx.array(c)), np.fft.rfft(c.real), 3)
    assert mx.fft.irfft(mx.array(c)).dtype == mx.float32
    # lists are accepted like arrays
    assert_close(mx.fft.fft([1.0, 2.0, 0.5]), np.fft.fft([1.0, 2.0, 0.5]), 3)
    # no axes: the input as is (MLX)
    a = mx.array([[1.0, 2.0]])
    assert np.array_equal(np.array(mx.fft.fftn(a, axes=[])), np.array(a))


def test_errors_are_value_errors():
    a = mx.array(np.ones((3, 4), np.complex64))
    bad = [
        lambda: mx.fft.fft(a, norm="invalid"),
        lambda: mx.fft.fft(a, n=0),
        lambda: mx.fft.fft(a, n=-2),
        lambda: mx.fft.fft(a, axis=2),
        lambda: mx.fft.fft(a, axis=-3),
        lambda: mx.fft.fftn(a, axes=(0, 0)),
        lambda: mx.fft.fftn(a, axes=(0, -2)),
        lambda: mx.fft.fftn(a, s=(3,), axes=(0, 1)),
        lambda: mx.fft.rfftn(a, s=(3, 4)),  # s without axes, as MLX
        lambda: mx.fft.irfftn(mx.array(3.0)),
        lambda: mx.fft.fft(mx.array(3.0)),
        lambda: mx.fft.irfft(mx.ones((2, 1))),  # the default length 0
        lambda: mx.fft.fftshift(a, axes=[2]),
        lambda: mx.fft.fftfreq(0),
        lambda: mx.fft.rfftfreq(-1),
        lambda: mx.fft.fftfreq(4, d=0.0),
    ]
    for call in bad:
        with pytest.raises(ValueError):
            call()


def test_shift_and_frequencies():
    rng = np.random.RandomState(2)
    for shape in ((100,), (4, 6), (5, 7), (3, 4, 5)):
        x = rng.rand(*shape).astype(np.float32)
        for axes in (None, 0, -1, [0], list(range(len(shape)))):
            np.testing.assert_array_equal(mx.fft.fftshift(mx.array(x), axes=axes),
                                          np.fft.fftshift(x, axes=axes))
            np.testing.assert_array_equal(mx.fft.ifftshift(mx.array(x), axes=axes),
                                          np.fft.ifftshift(x, axes=axes))
    empty = mx.array(np.zeros((0,), np.float32))
    assert mx.fft.fftshift(empty).shape == (0,)
    for n, d in ((1, 1.0), (4, 0.5), (5, 0.25), (8, -0.5), (6, 1.0), (7, 3.0)):
        for name in ("fftfreq", "rfftfreq"):
            got = getattr(mx.fft, name)(n, d=d)
            assert got.dtype == mx.float32
            np.testing.assert_array_equal(got, getattr(np.fft, name)(n, d=d).astype(np.float32))
    # a huge n is a lazy array like any other (a Python list of its indices
    # took ~100 bytes a frequency: 2**31 ran the machine out of memory), and
    # it meets weft's memory limit when evaluated
    old = mx.set_memory_limit(1 << 30)
    try:
        big = mx.fft.rfftfreq(2**31)
        assert big.shape == (2**30 + 1,)
        with pytest.raises(MemoryError):
            mx.eval(big)
    finally:
        mx.set_memory_limit(old)
    np.testing.assert_array_equal(mx.fft.fftfreq(4, mx.array(0.5)), np.fft.fftfreq(4, 0.5))
    with pytest.raises(TypeError):
        mx.fft.fftfreq(4, None)


def test_speed_paths_large_lengths():
    """Lengths past one cache line of work: a big power of two, a big prime
    (Bluestein over 2^16 points), a product of small primes."""
    rng = np.random.RandomState(3)
    for n in (1 << 16, 18247, 3 ** 8 * 2):
        c = complex_input(rng, 1, n)
        assert_close(mx.fft.fft(mx.array(c)), np.fft.fft(c), n)
        assert_close(mx.fft.irfft(mx.array(c), n=n), np.fft.irfft(c, n=n), n)


# ---------------------------------------------------------------- gradients


def numeric_grad(f, x, eps=1e-6):
    """Central differences of real f in double; for a complex x, MLX's
    convention: d/dRe + 1j * d/dIm."""
    x = np.asarray(x, dtype=np.complex128 if np.iscomplexobj(x) else np.float64)
    g = np.zeros(x.shape, dtype=x.dtype)
    for idx in np.ndindex(x.shape):
        for unit in ((1.0, 1j) if np.iscomplexobj(x) else (1.0,)):
            step = np.zeros_like(x)
            step[idx] = eps * unit
            d = (f(x + step) - f(x - step)) / (2 * eps)
            g[idx] += d * (1 if unit == 1.0 else 1j)
    return g


GRAD_CASES = [
    ("fft", {"n": 6}), ("fft", {"norm": "ortho"}), ("ifft", {"n": 4}),
    ("ifft", {"norm": "forward"}), ("rfft", {}), ("rfft", {"n": 7, "norm": "ortho"}),
    ("irfft", {}), ("irfft", {"n": 7}), ("irfft", {"norm": "forward"}),
    ("fft2", {}), ("ifftn", {"axes": (1, 0)}), ("rfftn", {"s": (3, 6), "axes": (0, 1)}),
    ("rfft2", {"norm": "forward"}), ("irfft2", {}), ("irfftn", {"s": (4, 7), "axes": (0, 1), "norm": "ortho"}),
]


def input_for(name, rng):
    if name.startswith("rfft"):
        return rng.randn(3, 5).astype(np.float32)
    return complex_input(rng, 3, 5)


def loss_weights(shape, rng, complex_out):
    w = rng.randn(*shape)
    return (w + 1j * rng.randn(*shape)) if complex_out else w


def test_vjp_matches_central_differences():
    rng = np.random.RandomState(4)
    for name, kw in GRAD_CASES:
        x = input_for(name, rng)
        out = getattr(np.fft, name)(x, **kw)
        w = loss_weights(out.shape, rng, not name.startswith("irfft"))

        def np_loss(v):
            y = getattr(np.fft, name)(v, **kw)
            return float(np.sum(y.real * w.real + y.imag * w.imag))

        wr = mx.array(w.real.astype(np.float32))
        wi = mx.array(w.imag.astype(np.float32))

        def mx_loss(v):
            y = getattr(mx.fft, name)(v, **kw)
            if y.dtype == mx.complex64:
                return mx.sum(mx.real(y) * wr + mx.imag(y) * wi)
            return mx.sum(y * wr)

        got = np.array(mx.grad(mx_loss)(mx.array(x)))
        want = numeric_grad(np_loss, x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.max(np.abs(want)),
                                   err_msg=f"{name} {kw}")


def test_jvp_and_vmap():
    rng = np.random.RandomState(5)
    for name, kw in GRAD_CASES:
        x = input_for(name, rng)
        t = input_for(name, rng)
        f = getattr(mx.fft, name)
        (y,), (ty,) = mx.jvp(lambda v: f(v, **kw), [mx.array(x)], [mx.array(t)])
        # every transform is linear over the reals: the tangent is f(t)
        want = getattr(np.fft, name)(t, **kw)
        assert_close(ty, want, want.size)
        assert_close(y, getattr(np.fft, name)(x, **kw), want.size)
        # vmap over a new leading axis (moved from the back) = one call per example
        xs = np.stack([x, t, x + t], axis=-1)
        batched = mx.vmap(lambda v: f(v, **kw), in_axes=-1)(mx.array(xs))
        for i in range(3):
            want_i = getattr(np.fft, name)(xs[..., i], **kw)
            assert_close(batched[i], want_i, want_i.size)


def test_gradients_match_mlx():
    mlx = pytest.importorskip("mlx.core")
    rng = np.random.RandomState(6)
    for name, kw in GRAD_CASES:
        x = input_for(name, rng)
        out = getattr(np.fft, name)(x, **kw)
        w = loss_weights(out.shape, rng, True).astype(np.complex64)

        def loss(lib, v, w=w):
            y = getattr(lib.fft, name)(v, **kw)
            return lib.sum(lib.abs(y * lib.array(w)) ** 2)

        got = np.array(mx.grad(lambda v: loss(mx, v))(mx.array(x)))
        want = np.array(mlx.grad(lambda v: loss(mlx, v))(mlx.array(x)))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.max(np.abs(want)),
                                   err_msg=f"{name} {kw}")


def test_compile_shapeless():
    """The fft node keeps no shape of its own: a shapeless compiled function
    replays it on other shapes (a real inverse's output length is fixed by n)."""
    f = mx.compile(lambda v: mx.fft.rfft(v * 2.0), shapeless=True)
    g = mx.compile(lambda v: mx.fft.ifft2(mx.fft.fft2(v)))
    rng = np.random.RandomState(7)
    for shape in ((4, 8), (3, 16), (2, 5)):
        x = rng.randn(*shape).astype(np.float32)
        assert_close(f(mx.array(x)), np.fft.rfft(2.0 * x), shape[-1])
        assert_close(g(mx.array(x)), x.astype(np.complex64), x.size)
