"""masked_scatter and a[mask] = v against NumPy's a[mask] = src[:mask.sum()]:
dtypes, masks over all or the leading dims, scalar and row sources,
errors, gradients, vmap (each example its own source) and compile."""
import numpy as np
import pytest

import weft as mx


def numpy_masked(a, mask, src):
    """NumPy's assignment with exactly the source elements it needs."""
    out = a.copy()
    trailing = a.shape[mask.ndim:]
    rows = int(mask.sum())
    out[mask] = np.asarray(src).reshape((-1,) + trailing)[:rows]
    return out


def test_matches_numpy():
    # one test over every case: each test costs the suite a memory check
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.float16):
        for mask_ndim in (1, 2, 3):
            rng = np.random.RandomState(mask_ndim)
            a = (rng.rand(3, 4, 5) * 50).astype(dtype)
            mask = rng.rand(*a.shape[:mask_ndim]) < 0.4
            rows = int(mask.sum()) + 2  # extra source rows are ignored
            src = (rng.rand(rows, *a.shape[mask_ndim:]) * 50).astype(dtype)
            got = np.array(mx.masked_scatter(mx.array(a), mx.array(mask), mx.array(src)))
            # weft, as MLX, makes float32 arrays of float64 NumPy ones
            want = numpy_masked(a.astype(got.dtype), mask, src.astype(got.dtype))
            np.testing.assert_array_equal(got, want)
            target = mx.array(a)
            target[mx.array(mask)] = mx.array(src)
            np.testing.assert_array_equal(np.array(target), want)


def test_setitem_with_numpy_and_list_masks_and_scalars():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    mask = np.array([[True, False, True], [False, True, False]])
    target = mx.array(a)
    target[mask] = mx.array([10.0, 20.0, 30.0])
    np.testing.assert_array_equal(np.array(target), numpy_masked(a, mask, [10, 20, 30]))
    target = mx.array(a)
    target[mask.tolist()] = 7
    want = a.copy()
    want[mask] = 7
    np.testing.assert_array_equal(np.array(target), want)
    rows = mx.array(a)
    rows[mx.array([True, False])] = mx.array([2.0, 3.0, 4.0])
    assert rows.tolist() == [[2.0, 3.0, 4.0], [3.0, 4.0, 5.0]]


def test_strided_inputs():
    base = np.arange(10, dtype=np.float32)
    m = np.array([False, True, False, False, True, False, False, True, False, False])
    target = mx.array(base)[1::2]
    src = mx.arange(-4.0, 0.0)[::2]
    target[mx.array(m)[1::2]] = src
    want = base[1::2].copy()
    want[m[1::2]] = np.arange(-4.0, 0.0)[::2][: m[1::2].sum()]
    np.testing.assert_array_equal(np.array(target), want)


def test_errors():
    a = mx.zeros((2, 3))
    with pytest.raises(ValueError):
        mx.masked_scatter(a, mx.array([[1, 0, 1], [0, 0, 0]]), mx.array([1.0]))
    with pytest.raises(ValueError):
        mx.masked_scatter(a, mx.array([True, False, True]), mx.array([1.0]))
    with pytest.raises(ValueError):
        mx.masked_scatter(a, mx.ones((2, 3), dtype=mx.bool_), mx.ones((2, 3)))
    short = mx.masked_scatter(a, mx.ones((2, 3), dtype=mx.bool_), mx.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="source has only 2"):
        mx.eval(short)
    assert (mx.array([1.0]) * 3).tolist() == [3.0]


def test_empty():
    e = mx.zeros((0,))
    e[mx.zeros((0,), dtype=mx.bool_)] = mx.zeros((0,))
    assert e.shape == (0,)


def test_gradients():
    mask = mx.array([True, False, True, False])

    def f(a, src):
        return (mx.masked_scatter(a, mask, src) * mx.array([1.0, 2.0, 3.0, 4.0])).sum()

    ga, gs = mx.grad(f, argnums=(0, 1))(mx.ones(4), mx.ones(3))
    assert ga.tolist() == [0.0, 2.0, 0.0, 4.0]
    assert gs.tolist() == [1.0, 3.0, 0.0]
    _, (tangent,) = mx.jvp(lambda s: mx.masked_scatter(mx.zeros(4), mask, s), [mx.ones(2)],
                           [mx.ones(2)])
    assert tangent.tolist() == [1.0, 0.0, 1.0, 0.0]


def test_vmap_each_example_its_own_source():
    def put(x, m, s):
        return mx.masked_scatter(x, m, s)

    a = np.array([[10, 20, 30, 40], [50, 60, 70, 80]], dtype=np.float32)
    m = np.array([[False, True, True, True], [True, False, True, True]])
    s = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    got = mx.vmap(put, in_axes=(0, 0, 0))(mx.array(a), mx.array(m), mx.array(s))
    want = np.stack([numpy_masked(a[i], m[i], s[i]) for i in range(2)])
    np.testing.assert_array_equal(np.array(got), want)
    shared = mx.vmap(put, in_axes=(0, 0, None))(mx.array(a), mx.array(m), mx.array(s[0]))
    want = np.stack([numpy_masked(a[i], m[i], s[0]) for i in range(2)])
    np.testing.assert_array_equal(np.array(shared), want)


def test_compiled_mask_changes_between_calls():
    f = mx.compile(lambda x, m, s: mx.masked_scatter(x, m, s))
    rng = np.random.RandomState(3)
    a, s = rng.rand(5, 6).astype(np.float32), rng.rand(30).astype(np.float32)
    for p in (0.2, 0.7):
        m = rng.rand(5, 6) < p
        got = f(mx.array(a), mx.array(m), mx.array(s))
        np.testing.assert_array_equal(np.array(got), numpy_masked(a, m, s))
