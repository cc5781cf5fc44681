"""MLX's Array API standard names: aliases of weft's ops (the same function
objects) and the small functions astype, positive, permute_dims, concat and
contiguous, against NumPy. The results are new arrays: assigning into one
leaves its input alone."""
import numpy as np
import pytest

import weft as mx


def test_aliases_are_the_ops():
    pairs = {"acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh",
             "atan": "arctan", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
             "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
             "cumulative_sum": "cumsum", "cumulative_prod": "cumprod",
             "matrix_transpose": "transpose"}
    for alias, name in pairs.items():
        assert getattr(mx, alias) is getattr(mx, name), alias
    assert mx.matrix_norm is mx.linalg.norm


def test_alias_values():
    x = np.array([0.25, 0.5, 0.75], np.float32)
    np.testing.assert_allclose(np.array(mx.acos(mx.array(x))), np.arccos(x), rtol=1e-6)
    np.testing.assert_allclose(np.array(mx.atan2(mx.array(x), mx.array(1 - x))),
                               np.arctan2(x, 1 - x), rtol=1e-6)
    assert mx.pow(mx.array([2, 3]), 3).tolist() == [8, 27]
    assert mx.cumulative_sum(mx.array([1, 2, 3])).tolist() == [1, 3, 6]
    assert mx.bitwise_right_shift(mx.array([16]), mx.array([2])).tolist() == [4]
    np.testing.assert_allclose(float(mx.matrix_norm(mx.ones((3, 3)))), 3.0, rtol=1e-6)


def test_astype_and_positive_make_new_arrays():
    a = mx.array([1, 2, 3])
    b = mx.astype(a, mx.float16)
    assert b.dtype == mx.float16 and b.tolist() == [1.0, 2.0, 3.0]
    for make in (lambda: mx.positive(a), lambda: mx.astype(a, a.dtype),
                 lambda: mx.contiguous(a), lambda: mx.contiguous(a, allow_col_major=True)):
        c = make()
        assert c is not a and c.dtype == a.dtype
        c[0] = 9
        assert a.tolist() == [1, 2, 3] and c.tolist() == [9, 2, 3]
    assert mx.positive(mx.array([True, False])).tolist() == [True, False]
    assert mx.positive(2.5).item() == 2.5


def test_permute_dims_and_concat():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.array(mx.permute_dims(mx.array(x), (2, 0, 1))),
                                  np.transpose(x, (2, 0, 1)))
    np.testing.assert_array_equal(np.array(mx.permute_dims(mx.array(x))), x.T)
    y = np.ones((1, 3, 4), np.float32)
    np.testing.assert_array_equal(np.array(mx.concat([mx.array(x), mx.array(y)])),
                                  np.concatenate([x, y]))
    np.testing.assert_array_equal(np.array(mx.concat([mx.array(x), mx.array(y)], axis=None)),
                                  np.concatenate([x.ravel(), y.ravel()]))
    t = mx.contiguous(mx.transpose(mx.array(x)))
    np.testing.assert_array_equal(np.array(t), x.T)
    with pytest.raises(ValueError):
        mx.concat([mx.array(x), mx.ones((2, 2))], axis=1)
    with pytest.raises(ValueError):
        mx.permute_dims(mx.array(x), (0, 0, 1))
