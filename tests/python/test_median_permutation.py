"""mx.median against NumPy and mx.random.permutation (a permutation, the
same for the same key, shuffling along an axis)."""
import numpy as np
import pytest

import weft as mx


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), [1, 2]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_median_matches_numpy(axis, keepdims):
    a = np.random.default_rng(0).normal(size=(4, 5, 6)).astype(np.float32)
    got = mx.median(mx.array(a), axis=axis, keepdims=keepdims)
    want = np.median(a, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.array(got), want, rtol=1e-6)


def test_median_even_odd_integers_and_nan():
    assert mx.median(mx.array([3, 1, 2])).item() == 2.0
    assert mx.median(mx.array([4, 1, 3, 2])).item() == 2.5
    assert mx.median(mx.array([4, 1, 3, 2])).dtype == mx.float32
    x = mx.array([[1.0, np.nan, 2.0], [3.0, 1.0, 2.0]])
    got = np.array(mx.median(x, axis=1))
    assert np.isnan(got[0]) and got[1] == 2.0


def test_median_bad_axes():
    with pytest.raises(ValueError):
        mx.median(mx.ones((2, 3)), axis=2)
    with pytest.raises(ValueError):
        mx.median(mx.ones((2, 3)), axis=(0, 0))
    with pytest.raises(ValueError):
        mx.median(mx.ones((0, 3)), axis=0)


def test_permutation_of_int_and_key():
    key = mx.random.key(7)
    p = np.array(mx.random.permutation(1000, key=key))
    assert sorted(p.tolist()) == list(range(1000))
    assert not np.array_equal(p, np.arange(1000))
    assert np.array_equal(p, np.array(mx.random.permutation(1000, key=key)))
    assert mx.random.permutation(0).shape == (0,)


def test_permutation_of_array_along_axis():
    a = np.arange(24).reshape(4, 6)
    got = np.array(mx.random.permutation(mx.array(a), axis=1, key=mx.random.key(3)))
    # each row is a's row with one shared column order
    order = got[0] - a[0, 0]
    assert sorted(order.tolist()) == list(range(6))
    np.testing.assert_array_equal(got, a[:, order])
    rows = np.array(mx.random.permutation(mx.array(a)))
    assert sorted(rows[:, 0].tolist()) == [0, 6, 12, 18]
    with pytest.raises(ValueError):
        mx.random.permutation(mx.array(a), axis=2)


def test_median_complex_orders_as_numpy():
    v = np.array([2 + 1j, 1 + 5j, 2 - 1j, 0 + 0j], dtype=np.complex64)
    np.testing.assert_allclose(np.array(mx.median(mx.array(v))), np.median(v))
    np.testing.assert_allclose(np.array(mx.median(mx.array(v[:3]))), np.median(v[:3]))
