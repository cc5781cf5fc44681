"""mx.searchsorted against np.searchsorted: sides, dtypes (complex64 in
NumPy's order), NaN, shapes, views, vmap, and the errors (ValueError)."""
import numpy as np
import pytest

import weft as mx


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.int64])
def test_matches_numpy(side, dtype):
    rng = np.random.default_rng(0)
    for n, m in [(1, 5), (8, 64), (33, 257), (1000, 17)]:
        a = np.sort((rng.standard_normal(n) * 20).astype(dtype))
        v = (rng.standard_normal(m) * 30).astype(dtype)
        got = mx.searchsorted(mx.array(a), mx.array(v), side=side)
        assert got.dtype == mx.uint32
        np.testing.assert_array_equal(np.array(got), np.searchsorted(a, v, side=side))


def test_nan_shapes_views_and_promotion():
    a = np.array([1, 2, np.nan], np.float32)
    nan = np.array([np.nan], np.float32)
    assert mx.searchsorted(mx.array(a), mx.array(nan)).tolist() == [2]
    assert mx.searchsorted(mx.array(a), mx.array(nan), side="right").tolist() == [3]
    seq = mx.arange(16, dtype=mx.float32)
    base = np.random.default_rng(1).uniform(0, 20, (4, 6)).astype(np.float32)
    for view, ref in [(mx.array(base).T, base.T), (mx.array(base)[::2], base[::2]),
                      (mx.broadcast_to(mx.array(base[0]), (3, 6)), np.broadcast_to(base[0], (3, 6))),
                      (mx.array(base[0, 0]), base[0, 0])]:
        got = mx.searchsorted(seq, view)
        assert got.shape == np.shape(ref)
        np.testing.assert_array_equal(np.array(got), np.searchsorted(np.arange(16), ref))
    desc = mx.array(np.arange(8, dtype=np.float32)[::-1].copy())
    assert mx.searchsorted(desc[::-1], mx.array([-1.0, 3.0, 100.0])).tolist() == [0, 3, 8]
    assert mx.searchsorted(mx.array([1, 3, 4, 7]), mx.array([4.5])).tolist() == [3]
    assert mx.searchsorted(mx.array([], mx.float32), mx.array([1.0])).tolist() == [0]
    vs = mx.random.uniform(0, 10, (3, 5))
    out = mx.vmap(lambda x: mx.searchsorted(seq, x))(vs)
    np.testing.assert_array_equal(np.array(out), np.array(mx.searchsorted(seq, vs)))


def test_complex_in_numpys_order():
    rng = np.random.default_rng(2)
    parts = rng.integers(-3, 4, (2, 60)).astype(np.float32)  # many ties in each part
    z = (parts[0] + 1j * parts[1]).astype(np.complex64)
    z[::7] = np.complex64(complex(np.nan, 1))
    z[3::11] = np.complex64(complex(2, np.nan))
    z[5] = np.complex64(complex(np.nan, np.nan))
    a = np.sort(z)  # NumPy's order: NaN parts last, by class
    v = np.concatenate([z[:30], np.array([-9 - 9j, 9 + 9j], np.complex64)])
    for side in ("left", "right"):
        got = mx.searchsorted(mx.array(a), mx.array(v), side=side)
        np.testing.assert_array_equal(np.array(got), np.searchsorted(a, v, side=side))


def test_errors():
    with pytest.raises(ValueError):
        mx.searchsorted(mx.zeros((3, 4)), mx.array([1.0]))
    with pytest.raises(ValueError):
        mx.searchsorted(mx.array(1.0), mx.array([1.0]))
    with pytest.raises(ValueError):
        mx.searchsorted(mx.array([1.0, 2.0]), mx.array([1.0]), side="middle")
    with pytest.raises(ValueError):
        mx.vmap(lambda s: mx.searchsorted(s, mx.array([1.0])))(mx.zeros((3, 4)))
    assert mx.searchsorted(mx.array([1.0, 2.0]), mx.array([1.5])).tolist() == [1]
