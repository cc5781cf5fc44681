"""mlx.core functions weft composes in Python (weft/_composed.py), against
NumPy; each bad input raises the documented exception and weft keeps
working afterwards."""
import math

import numpy as np
import pytest

import weft as mx


def still_works():
    assert (mx.array([1.0, 2.0]) + 1).tolist() == [2.0, 3.0]


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.array(a), b, rtol=tol, atol=tol)


def test_arange_overloads_and_dtypes():
    assert mx.arange(4).tolist() == [0, 1, 2, 3]
    assert mx.arange(-2, None, -1).tolist() == [0, -1]
    assert mx.arange(stop=2, step=0.5).tolist() == [0.0, 0.5, 1.0, 1.5]
    assert mx.arange(1, 7, 2).dtype == mx.int32
    assert mx.arange(1, 7, 2.0).dtype == mx.float32
    assert mx.arange(2**35, 2**35 + 2).dtype == mx.int64
    assert mx.arange(2**35, 2**35 + 2).tolist() == [2**35, 2**35 + 1]
    # an integer dtype steps by the bounds cast to it: int(0.5) == 0
    assert mx.arange(0, 2, 0.5, dtype=mx.int32).tolist() == [0, 0, 0, 0]
    assert mx.arange(-1, -5, -1.5, dtype=mx.int32).tolist() == [-1, -2, -3]
    assert mx.arange(0, 5, math.inf).tolist() == [0.0]
    assert mx.arange(5, 0, math.inf).tolist() == []


@pytest.mark.parametrize("call, exc", [
    (lambda: mx.arange(start=1, step=2), TypeError),
    (lambda: mx.arange(0, 3, 0), ValueError),
    (lambda: mx.arange(math.nan, 3), ValueError),
    (lambda: mx.arange(0, math.inf, 1), ValueError),
    (lambda: mx.arange(0, 2**32), ValueError),
])
def test_arange_bad_inputs(call, exc):
    with pytest.raises(exc):
        call()
    still_works()


def test_linspace_endpoint():
    for num in (0, 1, 4, 7):
        close(mx.linspace(-1.5, 2.0, num, False), np.linspace(-1.5, 2.0, num, endpoint=False))
    close(mx.linspace(0, 1, 5), np.linspace(0, 1, 5))
    assert mx.linspace(0, 10, 5, False, mx.int32).tolist() == [0, 2, 4, 6, 8]
    with pytest.raises(ValueError):
        mx.linspace(0, 1, -1)
    still_works()


def test_tri_and_windows():
    for n, m, k in [(3, None, 0), (2, 5, 1), (4, 3, -1)]:
        close(mx.tri(n, m, k), np.tri(n, m, k))
    assert mx.tri(2, dtype=mx.int32).dtype == mx.int32
    for name in ("hanning", "hamming", "blackman", "bartlett"):
        for size in (0, 1, 6):
            close(getattr(mx, name)(size), getattr(np, name)(size), 1e-5)


def test_elementwise_compositions():
    x = np.array([-2.7, -0.5, 0.0, 0.5, 3.9], np.float32)
    close(mx.trunc(mx.array(x)), np.trunc(x))
    a, b = np.array([True, False, True]), np.array([True, True, False])
    assert mx.logical_xor(mx.array(a), mx.array(b)).tolist() == list(a ^ b)
    q, r = mx.divmod(mx.array([-7, 7, 5]), mx.array([2, -2, 3]))
    assert q.tolist() == [-4, -4, 1] and r.tolist() == [1, -1, 2]
    assert mx.real(mx.array([1.5])).tolist() == [1.5]
    assert mx.imag(mx.array([1.5])).tolist() == [0.0]
    inf = math.inf
    assert mx.isclose(mx.array([inf, inf, -inf, 1.0]),
                      mx.array([inf, -inf, -inf, 1.0 + 1e-9])).tolist() == [True, False, True, True]
    assert mx.isclose(mx.array([math.nan]), mx.array([math.nan]), equal_nan=True).tolist() == [True]


def test_scans_against_numpy():
    x = np.random.RandomState(0).randn(3, 9).astype(np.float32)
    a = mx.array(x)
    close(mx.cummax(a, 1), np.maximum.accumulate(x, 1))
    close(mx.cummin(a, 0), np.minimum.accumulate(x, 0))
    close(mx.cummax(a, 1, reverse=True), np.maximum.accumulate(x[:, ::-1], 1)[:, ::-1])
    close(mx.logcumsumexp(a, 1), np.logaddexp.accumulate(x, 1), 1e-4)
    exclusive = mx.cummax(a, 1, inclusive=False)
    assert np.array(exclusive)[:, 0].tolist() == [-math.inf] * 3
    close(exclusive[:, 1:], np.maximum.accumulate(x, 1)[:, :-1])
    assert a.cummax(1).shape == (3, 9)
    assert mx.cummax(mx.array([3, 1, 4, 1, 5]), 0).tolist() == [3, 3, 4, 4, 5]
    with pytest.raises(ValueError):
        mx.cummax(a, 2)
    still_works()


def test_count_nonzero_vecdot_inner():
    c = np.array([[0, 1, 0], [2, 3, 0]])
    assert mx.count_nonzero(mx.array(c)).item() == 3
    assert mx.count_nonzero(mx.array(c), axis=0).tolist() == [1, 2, 0]
    assert mx.count_nonzero(mx.array(c)).dtype == mx.int32
    u = np.random.RandomState(1).randn(4, 3).astype(np.float32)
    v = np.random.RandomState(2).randn(2, 3).astype(np.float32)
    close(mx.vecdot(mx.array(u), mx.array(u)), np.sum(u * u, -1))
    close(mx.inner(mx.array(u), mx.array(v)), np.inner(u, v))
    close(mx.inner(mx.array(u[None]), mx.array(v)), np.inner(u[None], v))
    assert mx.inner(mx.zeros((0, 3)), mx.zeros((2, 3))).shape == (0, 2)
    with pytest.raises(ValueError):
        mx.inner(mx.array(u), mx.zeros((2, 4)))
    still_works()


def test_shape_compositions():
    x = np.arange(24).reshape(2, 3, 4)
    a = mx.array(x)
    assert mx.flip(a).tolist() == np.flip(x).tolist()
    assert mx.flip(a, 1).tolist() == np.flip(x, 1).tolist()
    for shift, axis in [(1, None), (-2, 2), ((1, 2), (0, 2)), ((1, 1), 1)]:
        assert mx.roll(a, shift, axis).tolist() == np.roll(x, shift, axis).tolist()
    assert mx.diff(a, 2, axis=2).tolist() == np.diff(x, 2, axis=2).tolist()
    assert mx.diff(a, 1, 1, prepend=0).tolist() == np.diff(x, 1, 1, prepend=0).tolist()
    # an order past the axis' length is empty, at once (it looped n times,
    # holding every step: 2**31 steps ran the machine out of memory)
    assert mx.diff(a, 2**31, axis=2).shape == np.diff(x, x.shape[2] + 1, axis=2).shape
    parts = mx.unstack(a, 1)
    assert len(parts) == 3 and parts[2].tolist() == x[:, 2].tolist()
    assert mx.unflatten(a, 2, (2, -1)).shape == (2, 3, 2, 2)
    for call in (lambda: mx.flip(a, 3), lambda: mx.diff(a, -1), lambda: mx.roll(a, (1, 2), (0, 1, 2)),
                 lambda: mx.unflatten(a, 0, (-1, -1))):
        with pytest.raises(ValueError):
            call()
    still_works()


def test_as_strided_and_dynamic_slices():
    base = np.arange(30, dtype=np.float32)
    y = mx.as_strided(mx.array(base), (4, 3), (5, 2), 1)
    ref = np.lib.stride_tricks.as_strided(base[1:], (4, 3), (20, 8))
    assert np.array(y).tolist() == ref.tolist()
    with pytest.raises(ValueError):
        mx.as_strided(mx.array(base), (-1, 2), (1, 1))
    x = np.arange(60).reshape(3, 4, 5)
    out = mx.slice(mx.array(x), mx.array([1, 2]), (0, 2), (2, 4, 3))
    assert out.tolist() == x[1:3, :, 2:5].tolist()
    upd = -np.ones((1, 2, 2), np.int64)
    got = mx.slice_update(mx.array(x), mx.array(upd), mx.array([2, 1]), (0, 2))
    want = x.copy()
    want[2:3, :2, 1:3] = upd
    assert got.tolist() == want.tolist()
    still_works()


def test_diag_trace_kron_meshgrid():
    v = np.array([1, 2, 3])
    for k in (-1, 0, 2):
        assert mx.diag(mx.array(v), k).tolist() == np.diag(v, k).tolist()
    m = np.arange(12).reshape(3, 4)
    for k in (-2, 0, 1, 5):
        assert mx.diag(mx.array(m), k).tolist() == np.diag(m, k).tolist()
        assert mx.trace(mx.array(m), k).item() == np.trace(m, k)
    t = np.arange(24).reshape(2, 3, 4)
    assert mx.diagonal(mx.array(t), 1, 1, 2).tolist() == np.diagonal(t, 1, 1, 2).tolist()
    assert mx.kron(mx.array([1, 2]), mx.array([[3, 4]])).tolist() == np.kron([1, 2], [[3, 4]]).tolist()
    gx, gy = mx.meshgrid(mx.array([1, 2, 3]), mx.array([4, 5]))
    nx, ny = np.meshgrid([1, 2, 3], [4, 5])
    assert gx.tolist() == nx.tolist() and gy.tolist() == ny.tolist()
    assert isinstance(mx.meshgrid(mx.array([1])), tuple)
    for call in (lambda: mx.diag(mx.zeros((2, 2, 2))), lambda: mx.kron(mx.array([]), mx.array([1])),
                 lambda: mx.diagonal(mx.array(m), 0, 1, 1), lambda: mx.meshgrid(mx.array([1]), indexing="q")):
        with pytest.raises(ValueError):
            call()
    still_works()


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric"])
def test_pad_modes(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for width in [1, (2, 3), [(0, 5), (3, 1)], [(7, 2), (0, 0)]]:
        assert np.array(mx.pad(mx.array(x), width, mode)).tolist() == np.pad(x, width, mode).tolist()
    with pytest.raises(ValueError):
        mx.pad(mx.array(x), 1, "wrap-around")
    with pytest.raises(ValueError):
        mx.pad(mx.zeros((0, 2)), 1, mode)
    still_works()


def test_depends_keeps_values():
    a = mx.array([1.0, 2.0])
    b, c = mx.exp(a), mx.log(a)
    assert mx.array_equal(mx.depends([b], [c])[0], b).item()
    assert mx.array_equal(mx.depends(b, c), b).item()


def test_dtype_helpers():
    assert mx.result_type(mx.int32, mx.float32) == mx.float32
    assert mx.result_type(mx.array([1]), 2.5) == mx.float32
    assert mx.result_type(mx.float16, 1.0) == mx.float16
    assert mx.can_cast(mx.int32, mx.int64) and not mx.can_cast(mx.float64, mx.float32)
    assert mx.isdtype(mx.float32, "real floating") and mx.isdtype(mx.int32, ("bool", "integral"))
    assert not mx.isdtype(mx.bool_, "numeric")
    with pytest.raises(ValueError):
        mx.result_type()
    with pytest.raises(ValueError):
        mx.isdtype(mx.int32, "no such kind")
    still_works()


def test_asarray_and_dlpack():
    a = mx.array([1, 2, 3])
    assert mx.asarray(a) is a
    assert mx.asarray([1, 2], mx.float32).dtype == mx.float32
    with pytest.raises(ValueError):
        mx.asarray(a, copy=False)
    y = mx.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3).T)
    assert y.tolist() == np.arange(6).reshape(2, 3).T.tolist()
    with pytest.raises(ValueError):
        mx.from_dlpack(np.arange(3), copy=False)
    # a producer NumPy refuses (strings have no DLPack dtype; torch's
    # complex32 is refused the same way): ValueError, as in MLX
    with pytest.raises(ValueError, match="from_dlpack"):
        mx.from_dlpack(np.array(["a", "b"]))
    assert np.from_dlpack(mx.array([1.5, 2.5])).tolist() == [1.5, 2.5]
    still_works()


def test_devices_and_backends():
    assert mx.default_device() == mx.cpu and mx.cpu == mx.default_device()
    assert mx.default_device().type == mx.Device(mx.cpu)
    assert not mx.metal.is_available() and not mx.cuda.is_available()
    with pytest.raises(ValueError):
        mx.default_stream(mx.gpu)
    assert mx.default_stream(mx.cpu).device == mx.cpu
    still_works()


def test_like_constructors_follow_dtype_rules():
    x = mx.zeros((2, 3), mx.int32)
    assert mx.full_like(x, 2.5).tolist() == [[2] * 3] * 2  # a's dtype: int32
    assert mx.full_like(x, 2.5, mx.float32).tolist() == [[2.5] * 3] * 2
    assert mx.zeros_like(x, mx.float16).dtype == mx.float16
    assert mx.ones_like(x, dtype=mx.float32).tolist() == [[1.0] * 3] * 2
    assert mx.empty_like(x).shape == (2, 3) and mx.empty_like(x).dtype == mx.int32


def test_cummax_cummin_gradients_route_to_latest_tie():
    a = mx.array([3.0, 3.0, 1.0, 5.0, 5.0])
    grad = lambda **kw: mx.grad(lambda y: mx.cummax(y, **kw).sum())(a).tolist()  # noqa: E731
    assert grad() == [1.0, 2.0, 0.0, 1.0, 1.0]
    assert grad(inclusive=False) == [1.0, 2.0, 0.0, 1.0, 0.0]
    assert grad(reverse=True) == [0.0, 0.0, 0.0, 4.0, 1.0]
    b = mx.array([2.0, 1.0, 1.0, 4.0])
    assert mx.grad(lambda y: mx.cummin(y).sum())(b).tolist() == [1.0, 1.0, 2.0, 0.0]
    nan = math.nan
    got = np.array(mx.cummax(mx.array([1.0, 3.0, nan, 5.0, 2.0]), 0))
    assert got[:2].tolist() == [1.0, 3.0] and np.isnan(got[2:]).all()


def ulps(got, want):
    """|got - want| in float32 ulps of want (float64 reference)."""
    spacing = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("name,ranges", [
    ("arcsinh", [(-100, 100), (1e-8, 1e-2), (-1e-2, -1e-8), (1e10, 1e30), (-1e30, -1e10)]),
    ("arccosh", [(1, 100), (1 + 1e-6, 1.01), (1e10, 1e30)]),
    ("arctanh", [(-0.999, 0.999), (0.99, 0.99999), (-0.99999, -0.99), (1e-8, 1e-2)]),
])
def test_inverse_hyperbolic_accuracy(name, ranges):
    # log(x + sqrt(x^2 + 1)) lost every digit for small x (16.7M ulps),
    # thousands of ulps for negative x and overflowed above 1.8e19; the
    # forms near 1 of arccosh and arctanh lost hundreds
    rng = np.random.default_rng(3)
    for lo, hi in ranges:
        if lo * hi > 0:  # one sign: magnitudes spread evenly in log scale
            small, large = sorted((abs(lo), abs(hi)))
            x = np.sign(lo) * np.exp(rng.uniform(np.log(small), np.log(large), 20000))
        else:
            x = rng.uniform(lo, hi, 20000)
        x = x.astype(np.float32)
        want = getattr(np, name)(x.astype(np.float64))
        assert ulps(np.array(getattr(mx, name)(mx.array(x))), want).max() <= 4, (name, lo, hi)


@pytest.mark.parametrize("name", ["arcsinh", "arccosh", "arctanh"])
def test_inverse_hyperbolic_special_values_and_derivatives(name):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, -0.5, 1e-30, -3e38,
                  3e38], np.float32)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
    got = np.array(getattr(mx, name)(mx.array(x)))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)
    numbers = ~np.isnan(want)  # NaN where NumPy's; -0 stays -0
    assert np.array_equal(np.isnan(got), ~numbers)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
    derivative = {"arcsinh": lambda t: 1 / np.sqrt(t * t + 1),
                  "arccosh": lambda t: 1 / np.sqrt(t * t - 1),
                  "arctanh": lambda t: 1 / (1 - t * t)}[name]
    points = {"arcsinh": [-50.0, -1.0, -1e-3, 0.0, 1e-6, 0.3, 7.0, 1e5],
              "arccosh": [1.0001, 1.01, 1.5, 3.0, 1e3, 1e5],
              "arctanh": [-0.999, -0.5, 0.0, 1e-5, 0.3, 0.99]}[name]
    t = np.array(points, np.float32)
    exact = derivative(t.astype(np.float64))
    grads = np.array(mx.vmap(mx.grad(getattr(mx, name)))(mx.array(t)))
    np.testing.assert_allclose(grads, exact, rtol=1e-6)
    _, (tangent,) = mx.jvp(getattr(mx, name), [mx.array(t)], [mx.ones(t.shape)])
    np.testing.assert_allclose(np.array(tangent), exact, rtol=1e-6)
    compiled = mx.compile(getattr(mx, name))
    assert np.array_equal(np.array(compiled(mx.array(t))), np.array(getattr(mx, name)(mx.array(t))))
    # integers and bool become float32, as MLX; float64 and halves keep their dtype
    assert getattr(mx, name)(mx.array([2, 3])).dtype == mx.float32
    for dt in (mx.float16, mx.bfloat16, mx.float64):
        assert getattr(mx, name)(mx.array([0.5], dt)).dtype == dt


@pytest.mark.parametrize("name", ["log10", "arcsinh", "arccosh", "arctanh"])
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_composed_functions_round_halves_once(name, dtype):
    # each op of the composition rounding in the half dtype was an ulp off for
    # a third of the inputs; now float32 throughout, then one rounding
    lo, hi = {"log10": (0.01, 100), "arcsinh": (-10, 10), "arccosh": (1.01, 10),
              "arctanh": (-0.99, 0.99)}[name]
    x = mx.array(np.random.default_rng(9).uniform(lo, hi, 5000).astype(np.float32)).astype(dtype)
    got = getattr(mx, name)(x)
    assert got.dtype == dtype
    once = getattr(mx, name)(x.astype(mx.float32)).astype(dtype)
    assert mx.array_equal(got, once, equal_nan=True).item()
    grads = mx.grad(lambda v: getattr(mx, name)(v).astype(mx.float32).sum())(x)
    assert grads.dtype == dtype and bool(mx.all(mx.isfinite(grads)).item())


@pytest.mark.parametrize("call,exc", [
    (lambda: mx.compile_stats(3), TypeError),
    (lambda: mx.einsum((1, 2)), TypeError),
    (lambda: mx.einsum_path(3), TypeError),
    (lambda: mx.from_dlpack(1.5), TypeError),
    (lambda: mx.tensordot(2.0, 3.0, 1), ValueError),
    (lambda: mx.tensordot(mx.ones((2, 3)), mx.ones((3, 2)), ([1], [0, 1])), ValueError),
    (lambda: mx.tensordot(mx.ones((2, 3)), mx.ones((3, 2)), ([5], [0])), ValueError),
    (lambda: mx.random.categorical(mx.array(1.0), -1, num_samples=2), ValueError),
    (lambda: mx.random.categorical(mx.array([0.0, 1.0]), 0.5, num_samples=2), TypeError),
])
def test_bad_arguments_raise_the_documented_exceptions(call, exc):
    # found by calling every function with random arguments: these raised
    # AttributeError or ZeroDivisionError from inside the composition
    with pytest.raises(exc):
        call()
    still_works()


def test_axes_may_be_numpy_integers():
    # the axis check meant to refuse floats refused np.int64 too
    a = mx.array([[1.0, 4.0, 9.0], [2.0, 3.0, 5.0]])
    assert mx.diff(a, 1, np.int64(1)).tolist() == [[3.0, 5.0], [1.0, 2.0]]
    assert mx.tensordot(a, mx.ones((3, 2)), ([np.int64(1)], [0])).shape == (2, 2)
    assert mx.random.categorical(a, np.int64(1), num_samples=4).shape == (2, 4)


def test_broadcast_arrays_and_tensordot_take_python_values():
    out = mx.broadcast_arrays(mx.array([[1], [2]]), [1, 2, 3])
    assert [o.shape for o in out] == [(2, 3), (2, 3)]
    assert mx.tensordot(2.0, 3.0, 0).item() == 6.0
    a = np.random.default_rng(0).random((2, 3, 4)).astype(np.float32)
    b = np.random.default_rng(1).random((4, 3, 5)).astype(np.float32)
    close(mx.tensordot(mx.array(a), mx.array(b), axes=([1, 2], [1, 0])),
          np.tensordot(a, b, axes=([1, 2], [1, 0])))
