"""complex64 through the sort family, the scans and matmul, against NumPy:
sort / argsort (stable) / partition / argpartition / topk in NumPy's order
(lexicographic, NaN classes last: R + nanj, nan + Rj, nan + nanj), cumsum /
cumprod / cummax / cummin (maximum.accumulate's order and NaN propagation)
and logcumsumexp (log(cumsum(exp(x))) on the principal branch), and matmul
(plain, batched, matrix-vector) within a float32 dot product's bound."""
import numpy as np
import pytest

import weft as mx

PARTS = np.array([-np.inf, -2.0, -0.5, 0.0, 1.0, 3.0, np.inf, np.nan], dtype=np.float32)


def pairs(re, im):
    """complex64 from parts (re + 1j * im would turn an infinite im into a
    NaN real part)."""
    z = np.empty(np.shape(re), dtype=np.complex64)
    z.real, z.imag = re, im
    return z


def messy(shape, seed):
    """Repeated values, infinities and every NaN class."""
    rng = np.random.default_rng(seed)
    return pairs(PARTS[rng.integers(0, len(PARTS), shape)],
                 PARTS[rng.integers(0, len(PARTS), shape)])


def assert_same_values(got, want):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(got.real, want.real)
    np.testing.assert_array_equal(got.imag, want.imag)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_and_argsort_as_numpy(axis):
    x = messy((6, 41), 1)
    assert_same_values(mx.sort(mx.array(x), axis=axis), np.sort(x, axis=axis))
    np.testing.assert_array_equal(np.array(mx.argsort(mx.array(x), axis=axis)),
                                  np.argsort(x, axis=axis, kind="stable"))


@pytest.mark.parametrize("kth", [0, 10, 40, -1])
def test_partition_and_argpartition_as_numpy(kth):
    x = messy((5, 41), 2)
    got = np.array(mx.partition(mx.array(x), kth, axis=1))
    idx = np.array(mx.argpartition(mx.array(x), kth, axis=1))
    want = np.sort(x, axis=1)
    k = kth % x.shape[1]
    assert_same_values(got[:, k], want[:, k])
    # NumPy's own partition guarantees only the split: compare sorted halves
    assert_same_values(np.sort(got[:, :k], axis=1), want[:, :k])
    assert_same_values(np.sort(got[:, k + 1:], axis=1), want[:, k + 1:])
    assert_same_values(np.take_along_axis(x, idx.astype(np.int64), axis=1), got)


@pytest.mark.parametrize("k", [1, 5, 41])
def test_topk_is_the_k_largest(k):
    x = messy((4, 41), 3)
    got = np.array(mx.topk(mx.array(x), k, axis=1))
    largest = np.sort(x, axis=1)[:, -k:]
    assert_same_values(np.sort(got, axis=1), largest)


def small(shape, seed, im_span=2.0):
    rng = np.random.default_rng(seed)
    re = rng.uniform(-2, 2, shape).astype(np.float32)
    im = rng.uniform(-im_span, im_span, shape).astype(np.float32)
    return pairs(re, im)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_cumprod_as_numpy(reverse):
    x = small((3, 30), 4, im_span=0.5) * np.complex64(0.5)
    for ours, theirs in ((mx.cumsum, np.cumsum), (mx.cumprod, np.cumprod)):
        got = np.array(ours(mx.array(x), axis=1, reverse=reverse))
        want = theirs(x[:, ::-1] if reverse else x, axis=1)
        want = want[:, ::-1] if reverse else want
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_cummin_as_numpy_accumulate(reverse):
    x = messy((4, 37), 5)
    x[np.isnan(x) & (np.arange(37) % 9 != 0)] = 1 + 1j  # NaNs rarer, runs between
    for ours, ufunc in ((mx.cummax, np.maximum), (mx.cummin, np.minimum)):
        got = np.array(ours(mx.array(x), axis=1, reverse=reverse))
        src = x[:, ::-1] if reverse else x
        want = ufunc.accumulate(src, axis=1)
        assert_same_values(got, want[:, ::-1] if reverse else want)


def test_exclusive_scans_start_as_mlx():
    x = mx.array(np.array([1 + 2j, 3 - 1j], dtype=np.complex64))
    assert_same_values(np.array(mx.cummax(x, inclusive=False))[0], pairs(-np.inf, -np.inf))
    assert_same_values(np.array(mx.cummin(x, inclusive=False))[0], pairs(np.inf, np.inf))
    first = np.array(mx.logcumsumexp(x, inclusive=False))[0]
    assert first.real == -np.inf and first.imag == 0


@pytest.mark.parametrize("reverse", [False, True])
def test_logcumsumexp_principal_branch(reverse):
    x = small((3, 40), 6, im_span=4.5)  # imaginary parts beyond pi
    got = np.array(mx.logcumsumexp(mx.array(x), axis=1, reverse=reverse))
    src = (x[:, ::-1] if reverse else x).astype(np.complex128)
    want = np.log(np.cumsum(np.exp(src), axis=1))
    want = want[:, ::-1] if reverse else want
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.all(np.abs(got.imag) <= np.pi + 1e-6)


def matmul_bound(a, b):
    k = a.shape[-1]
    return 3 * (2 * k + 1) * 2.0 ** -24 * np.matmul(np.abs(a).astype(np.float64),
                                                    np.abs(b).astype(np.float64))


@pytest.mark.parametrize("shape_a,shape_b", [
    ((1, 300), (300, 700)), ((3, 130), (130, 37)), ((65, 200), (200, 90)),
    ((4, 20, 33), (4, 33, 18)), ((300,), (300, 50))])
def test_matmul_within_float32_bound(shape_a, shape_b):
    a, b = small(shape_a, 7), small(shape_b, 8)
    got = np.array(mx.matmul(mx.array(a), mx.array(b)))
    want = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    assert np.all(np.abs(got - want) <= matmul_bound(a, b) + 1e-30)
