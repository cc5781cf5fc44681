"""The array type: construction, metadata, conversions, operators, indexing."""
import math
import pickle
import weakref

import numpy as np
import pytest

import weft as mx


def test_scalars_are_typed_as_mlx_does():
    assert mx.array(True).dtype == mx.bool_
    assert mx.array(3).dtype == mx.int32
    assert mx.array(2**40).dtype == mx.int64
    assert mx.array(2**40).item() == 2**40
    assert mx.array(2**62 + 1).item() == 2**62 + 1  # exact past 2^53
    assert mx.array(1.5).dtype == mx.float32
    with pytest.raises(OverflowError):
        mx.array(2**70)


def test_nested_lists_and_ragged():
    a = mx.array([[1, 2, 3], [4, 5, 6]])
    assert a.shape == (2, 3) and a.ndim == 2 and a.size == 6
    assert a.dtype == mx.int32 and a.itemsize == 4 and a.nbytes == 24
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert mx.array([1, 2.5]).dtype == mx.float32
    assert mx.array([True, False]).dtype == mx.bool_
    assert mx.array([]).dtype == mx.float32 and mx.array([]).shape == (0,)
    assert mx.array((1, 2), dtype=mx.float16).dtype == mx.float16
    with pytest.raises(ValueError):
        mx.array([[1, 2], [3]])
    with pytest.raises(ValueError):
        mx.array([[1, 2], 3])
    # The library is usable after the errors.
    assert mx.array([1, 2]).sum().item() == 3


def test_lists_of_arrays_stack():
    a = mx.array([1.0, 2.0])
    b = mx.array([3.0, 4.0])
    assert mx.array([a, b]).tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_numpy_in_and_out_any_strides():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for view in (x, x[:, ::2, ::-1], x.transpose(2, 0, 1)):
        a = mx.array(view)
        assert a.shape == view.shape
        np.testing.assert_array_equal(np.array(a), view)
    for dtype in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                  np.int64, np.uint64, np.float16, np.float32, np.complex64):
        v = np.array([0, 1, 1], dtype=dtype)
        assert np.array(mx.array(v)).dtype == dtype
    assert mx.array(np.zeros(2)).dtype == mx.float32  # float64 NumPy arrays: float32, as MLX
    assert np.array(mx.array([1.5], mx.bfloat16)).dtype == np.float32
    m = memoryview(mx.array([[1, 2], [3, 4]]))
    assert m.shape == (2, 2) and m.strides == (8, 4) and m.readonly
    del m
    with pytest.raises(ValueError):
        mx.array(object())


def test_item_tolist_and_python_numbers():
    a = mx.array([[1.5]])
    assert a.item() == 1.5 and float(a) == 1.5 and int(a) == 1
    assert bool(mx.array(0)) is False and bool(mx.array([2])) is True
    with pytest.raises(ValueError):
        bool(mx.array([1, 2]))
    with pytest.raises(ValueError):
        mx.array([1, 2]).item()
    assert mx.array(1.0, mx.float16).item() == 1.0
    assert math.isnan(mx.array(float("nan")).item())
    assert len(mx.array([[1], [2], [3]])) == 3
    with pytest.raises(TypeError):
        len(mx.array(1))
    assert [x.item() for x in mx.array([4, 5, 6])] == [4, 5, 6]
    assert repr(mx.array([1, 2])) == "array([1, 2], dtype=int32)"
    assert f"{mx.array(2.5):.2f}" == "2.50"


def test_weak_scalars_take_the_array_dtype():
    assert (mx.array([1, 2], mx.int32) + 1).dtype == mx.int32
    assert (mx.array([1, 2], mx.int32) + 1.5).dtype == mx.float32
    assert (mx.array([1], mx.float16) * 2.0).dtype == mx.float16
    assert (2 * mx.array([1], mx.bfloat16)).dtype == mx.bfloat16
    assert (mx.array([True]) + 1).dtype == mx.int32
    assert (mx.array([1], mx.uint8) + 1).dtype == mx.uint8
    assert (mx.array([1], mx.float64) + 1.0).dtype == mx.float64
    assert (mx.array([1], mx.int32) + mx.array([1], mx.float16)).dtype == mx.float16


def test_operators_against_numpy():
    x = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], dtype=np.float32)
    y = np.array([2.0, 3.0, -4.0], dtype=np.float32)
    a, b = mx.array(x), mx.array(y)
    cases = [
        (a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y), (a // b, x // y),
        (a % b, x % y), (a ** 2, x ** 2), (-a, -x), (abs(a), abs(x)), (2 - a, 2 - x),
        (1 / b, 1 / y), (a @ mx.array(x.T), x @ x.T), (a < b, x < y), (a >= b, x >= y),
        (a == b, x == y), (a != b, x != y),
    ]
    for got, want in cases:
        np.testing.assert_allclose(np.array(got), want, rtol=1e-6)
    assert (a == None) is False and (a != None) is True  # noqa: E711


def test_in_place_operators_keep_identity():
    a = mx.array([1.0, 2.0])
    alias = a
    before = id(a)
    shared = mx.array(a)  # another object holding the same value
    a += 1
    a *= 2
    assert id(a) == before and alias is a
    assert a.tolist() == [4.0, 6.0]
    assert shared.tolist() == [1.0, 2.0]  # values are immutable
    i = mx.array([1, 2])
    i += 1.5  # promotes, as MLX does: the result's dtype replaces the old one
    assert i.dtype == mx.float32 and i.tolist() == [2.5, 3.5]
    with pytest.raises(ValueError):  # except /= of an integer array (MLX's rule)
        j = mx.array([1])
        j /= 1
    assert mx.array([1.0]).__itruediv__(2).tolist() == [0.5]


def test_basic_indexing_matches_numpy():
    x = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    a = mx.array(x)
    for index in [0, -1, (1, 2), (slice(None), 1), (slice(1, None, 2),), (Ellipsis, 3),
                  (None, 1), (1, None, slice(None, None, -1)), (slice(None, None, -2), Ellipsis, None),
                  (slice(-2, None), slice(None, 1)), (slice(5, 0, -1),), ()]:
        np.testing.assert_array_equal(np.array(a[index]), x[index], err_msg=str(index))
    with pytest.raises(IndexError):
        a[3]
    with pytest.raises(ValueError):  # MLX raises ValueError here (NumPy IndexError)
        a[0, 0, 0, 0]
    with pytest.raises(ValueError):
        a[..., ...]


def test_advanced_indexing_matches_numpy():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    a = mx.array(x)
    i = np.array([2, 0, -1])
    j = np.array([[1], [2]])
    for index in [i, (slice(None), i), (i, i), (j, slice(None), i), (1, slice(None), i),
                  ([0, 1],), (Ellipsis, [4, 0]), (i, 1), (slice(None), j, i)]:
        mindex = tuple(mx.array(k) if isinstance(k, np.ndarray) else k for k in index) \
            if isinstance(index, tuple) else mx.array(index)
        np.testing.assert_array_equal(np.array(a[mindex]), x[index], err_msg=str(index))
    with pytest.raises(ValueError):
        a[mx.array([True, False, True])]
    with pytest.raises(ValueError):
        a[mx.array([0.5])]


def test_out_of_range_index_arrays_fail_at_evaluation():
    a = mx.arange(6).reshape(2, 3)
    with pytest.raises(ValueError):
        mx.eval(a[mx.array([0, 1]), mx.array([0, 3])])
    assert a[mx.array([1]), mx.array([2])].item() == 5


def test_setitem_keeps_identity_and_matches_numpy():
    x = np.zeros((3, 4), dtype=np.float32)
    a = mx.array(x)
    before = id(a)
    for index, value in [(0, 1.0), ((slice(None), 1), 2.0), ((1, slice(1, 3)), [5.0, 6.0]),
                         ((Ellipsis, -1), 9.0), ((None, 2), 7.0)]:
        a[index] = value
        x[index] = value
        np.testing.assert_array_equal(np.array(a), x, err_msg=str(index))
    assert id(a) == before
    for index, value in [(np.array([0, 2]), 3.0), ((np.array([1, 2]), np.array([0, 3])), [4.0, 5.0]),
                         ((slice(1, None), np.array([1, 1])), 6.0), ((np.array([-1]), 1), 8.0)]:
        mindex = tuple(mx.array(k) if isinstance(k, np.ndarray) else k for k in index) \
            if isinstance(index, tuple) else mx.array(index)
        a[mindex] = value
        x[index] = value
        np.testing.assert_array_equal(np.array(a), x, err_msg=str(index))
    assert id(a) == before


def test_at_updates():
    np.testing.assert_array_equal(
        np.array(mx.ones((3, 2)).at[mx.array([0, 0, 2]), mx.array([1, 1, 0])].multiply(3.0)),
        [[1, 9], [1, 1], [3, 1]])
    assert mx.zeros((3,)).at[mx.array([1, 1])].maximum(mx.array([2.0, 5.0])).tolist() == [0, 5, 0]
    assert mx.zeros((3,)).at[mx.array([1, 1])].minimum(mx.array([2.0, -5.0])).tolist() == [0, -5, 0]
    assert mx.ones((2,)).at[mx.array([0, 0])].divide(2.0).tolist() == [0.25, 1.0]
    a = mx.zeros((4,))
    out = a.at[mx.array([0, 0, 3])].add(1.0)
    assert out.tolist() == [2.0, 0.0, 0.0, 1.0]
    assert a.tolist() == [0.0] * 4
    assert a.at[1:3].add(2.0).tolist() == [0.0, 2.0, 2.0, 0.0]
    assert mx.ones((3,)).at[1].multiply(5).tolist() == [1.0, 5.0, 1.0]
    assert mx.ones((3,)).at[0].set(4).tolist() == [4.0, 1.0, 1.0]


def test_updates_of_a_table_nobody_else_holds_happen_in_place():
    """x = x.at[i].add(v) and x[i] = v reuse x's buffer when nothing else holds
    it (scatter and slice_update take it by donation): the peak memory of a loop of
    such steps stays below one more table. A table still held elsewhere is copied
    and left as it was."""
    x = mx.zeros((1024, 256)) + 1
    mx.eval(x)
    u = mx.arange(256).astype(mx.float32)
    mx.reset_peak_memory()
    start = mx.get_active_memory()
    for i in range(4):
        x = x.at[mx.array([i, i])].add(u)  # the scatter path (repeated index: both count)
        mx.eval(x)
        x = x.at[i + 8].add(u)  # a basic index: slice_update
        mx.eval(x)
        x[i + 16] = u
        mx.eval(x)
    assert mx.get_peak_memory() - start < x.nbytes // 2
    want = np.ones((1024, 256), np.float32)
    want[0:4] += 2 * np.arange(256)
    want[8:12] += np.arange(256)
    want[16:20] = np.arange(256)
    np.testing.assert_array_equal(np.array(x), want)
    kept = x
    y = x.at[mx.array([0])].add(u)
    x = None
    np.testing.assert_array_equal(np.array(y)[0], want[0] + np.arange(256))
    np.testing.assert_array_equal(np.array(kept), want)


def test_pickle_and_weakref():
    a = mx.array([[1, 2], [3, 4]], mx.int64)
    b = pickle.loads(pickle.dumps(a))
    assert b.dtype == mx.int64 and b.tolist() == a.tolist()
    r = weakref.ref(a)
    assert r() is a
    del a
    assert r() is None
    assert pickle.loads(pickle.dumps(mx.float16)) is mx.float16


def test_dtype_objects():
    assert mx.float32.size == 4 and mx.bool_.size == 1
    assert mx.float32 == mx.float32 and mx.float32 != mx.int32
    assert mx.issubdtype(mx.float16, mx.floating) and mx.issubdtype(mx.int32, mx.integer)
    assert not mx.issubdtype(mx.int32, mx.floating)
    assert mx.finfo(mx.float32).eps == 2.0 ** -23
    assert mx.finfo(mx.float16).max == 65504.0
    assert mx.iinfo(mx.int32).max == 2**31 - 1
    with pytest.raises(ValueError):
        mx.finfo(mx.int32)
    with pytest.raises(TypeError):
        mx.zeros((2,), dtype="float32")


def test_astype_and_errors_are_value_errors():
    assert mx.array([1.7, -1.7]).astype(mx.int32).tolist() == [1, -1]
    with pytest.raises(ValueError):
        mx.add(mx.ones((2, 3)), mx.ones((4,)))
    with pytest.raises(ValueError):
        mx.sum(mx.ones((2, 3)), axis=5)
    with pytest.raises(ValueError):
        mx.reshape(mx.ones((2, 3)), (4, 2))
    with pytest.raises(ValueError):
        mx.matmul(mx.ones((2, 3)), mx.ones((2, 3)))
    assert (mx.ones((2, 3)) @ mx.ones((3, 2))).tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_scatter_and_sort_over_every_integer_dtype():
    for dtype, np_dtype in [(mx.int8, np.int8), (mx.int16, np.int16), (mx.uint16, np.uint16),
                            (mx.uint32, np.uint32), (mx.uint64, np.uint64)]:
        a = mx.full((3,), 100, dtype)
        idx = mx.array([0, 0, 2])
        got = a.at[idx].add(mx.array([100, 100, 1]).astype(dtype))
        want = np.full(3, 100, np_dtype)
        np.add.at(want, [0, 0, 2], np.array([100, 100, 1], np_dtype))  # wraps like weft
        np.testing.assert_array_equal(np.array(got), want, err_msg=str(dtype))
        assert a.at[idx].maximum(mx.array([1, 120, 3]).astype(dtype)).tolist() == [120, 100, 100]
        v = np.array([5, 1, 4, 1, 3], np_dtype)
        np.testing.assert_array_equal(np.array(mx.sort(mx.array(v))), np.sort(v))
        assert mx.argsort(mx.array(v)).tolist() == np.argsort(v, kind="stable").tolist()
    with pytest.raises(ValueError):
        mx.zeros((2,), mx.complex64).at[mx.array([0])].add(1j)


def test_python_bool_index_is_a_0d_mask():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = mx.array(x)
    assert a[True].shape == x[True].shape == (1, 2, 3)
    assert a[False].shape == x[False].shape == (0, 2, 3)
    np.testing.assert_array_equal(np.array(a[True]), x[True])
    b = mx.array([1.0, 2.0, 3.0])
    b[True] = 5.0
    assert b.tolist() == [5.0, 5.0, 5.0]
    b[False] = 7.0
    assert b.tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(ValueError, match="non-uniform length"):
        mx.array([[1, 2], [3]])
