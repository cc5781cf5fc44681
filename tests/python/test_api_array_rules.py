"""Array behaviour that follows mlx.core: operand rules of the operators,
repr, conversions, indexing limits, reductions over empty axes, random
sampler dtypes. NumPy is the reference for values; each bad input raises the
documented exception and weft keeps working afterwards."""
import numpy as np
import pytest

import weft as mx


def still_works():
    assert (mx.array([1, 2]) * 2).tolist() == [2, 4]


def test_operators_refuse_sequences_and_strings():
    a = mx.array([1.0, 2.0, 3.0])
    for other in ([1, 2, 3], (1, 2, 3), "abc"):
        for op in (lambda: a * other, lambda: a - other, lambda: a ** other, lambda: a < other):
            with pytest.raises(ValueError):
                op()
        assert (a == other) is False
        assert (a != other) is True
    b = mx.array([1.0])
    with pytest.raises(ValueError):
        b /= [1.0]
    assert b.tolist() == [1.0]
    # NumPy arrays still combine
    assert (a + np.array([1.0, 1.0, 1.0], np.float32)).tolist() == [2.0, 3.0, 4.0]
    still_works()


def test_bitwise_operators():
    t, f = mx.array([True, False]), mx.array([True, True])
    assert (t & f).tolist() == [True, False]
    assert (t | False).tolist() == [True, False]
    assert (t ^ f).tolist() == [False, True]
    x = mx.array([True])
    x ^= True
    assert x.tolist() == [False]
    assert (mx.array([6]) & 3).tolist() == [2] and (mx.array([4]) | 1).tolist() == [5]
    assert (mx.array([5], mx.uint8) ^ 1).tolist() == [4] and (~mx.array([0], mx.int8)).tolist() == [-1]
    assert (mx.array([1]) << 3).tolist() == [8] and (mx.array([-8]) >> 1).tolist() == [-4]
    for op in (lambda: mx.array(1.0) & mx.array(1), lambda: mx.array([1.5]) | mx.array([2]),
               lambda: mx.array([1.5]) ^ True, lambda: ~mx.array([1.5])):
        with pytest.raises(ValueError):
            op()
    still_works()


def test_python_int_out_of_range_for_int32():
    y = mx.array(2_000_000_000, dtype=mx.int32)
    with pytest.raises(ValueError):
        y + 3_000_000_000
    with pytest.raises(ValueError):
        mx.add(y, -3_000_000_000)
    with pytest.raises(ValueError):
        mx.array([1], mx.uint8) + 256
    assert (y + 1).item() == 2_000_000_001
    assert (mx.array([1], mx.int64) + 3_000_000_000).item() == 3_000_000_001
    still_works()


def test_float64_numpy_becomes_float32():
    x = mx.array(np.array([0.1, 0.2]))
    assert x.dtype == mx.float32
    np.testing.assert_allclose(np.array(x), [0.1, 0.2], rtol=1e-6)
    assert mx.array(np.array([0.1]), dtype=mx.float64).dtype == mx.float64
    assert mx.array(np.array([], np.float64)).dtype == mx.float32


def test_bytes_make_uint8():
    assert mx.array(b"Hi").tolist() == [72, 105]
    assert mx.array(bytearray([1, 2])).dtype == mx.uint8


def test_repr_and_format():
    assert repr(mx.array(True)) == "array(True, dtype=bool)"
    assert repr(mx.array(1.0)) == "array(1, dtype=float32)"
    assert repr(mx.array([1.123456789])) == "array([1.12346], dtype=float32)"
    assert repr(mx.array([1] * 7)) == "array([1, 1, 1, ..., 1, 1, 1], dtype=int32)"
    assert repr(mx.array([[1, 2], [3, 4]])) == "array([[1, 2],\n       [3, 4]], dtype=int32)"
    with mx.printoptions(precision=3):
        assert str(mx.array([0.5])) == "array([0.500], dtype=float32)"
    assert str(mx.array([0.5])) == "array([0.5], dtype=float32)"
    assert f"{mx.array(0.35487):.1f}" == "0.4"
    assert f"{mx.array([1, 2])}" == "array([1, 2], dtype=int32)"
    with pytest.raises(TypeError):
        f"{mx.array([1, 2]):.2f}"
    # a bad precision is refused where it is given (it used to be kept and
    # break every repr afterwards)
    for bad, exc in (("3", TypeError), (2.5, TypeError), (True, TypeError), (-1, ValueError)):
        with pytest.raises(exc):
            mx.set_printoptions(precision=bad)
        with pytest.raises(exc):
            mx.printoptions(precision=bad)
    assert repr(mx.array([0.5])) == "array([0.5], dtype=float32)"
    mx.set_printoptions(precision=2)
    assert mx.get_printoptions() == {"precision": 2} and str(mx.array([0.5])) == "array([0.50], dtype=float32)"
    mx.set_printoptions()
    still_works()


def test_array_methods_match_functions():
    x = mx.array(np.random.RandomState(0).rand(3, 4).astype(np.float32))
    for name, args in [("log10", ()), ("cummax", (1,)), ("cummin", (0,)), ("logcumsumexp", (1,)),
                       ("tan", ()), ("floor", ())]:
        assert mx.array_equal(getattr(mx, name)(x, *args), getattr(x, name)(*args)).item()
    assert mx.array_equal(x.real, x).item() and x.imag.tolist() == [[0.0] * 4] * 3
    z = mx.array([1 + 2j, -3j])  # complex: the parts (was the array itself before)
    assert z.real.tolist() == [1.0, 0.0] and z.imag.tolist() == [2.0, -3.0]
    assert z.conj().tolist() == [1 - 2j, 3j]
    assert x.__array_namespace__() is mx


def test_index_limits_and_updates():
    x = mx.array([0, 1, 2])
    with pytest.raises(ValueError):
        x[2**32]
    with pytest.raises(ValueError):
        x[: 2**32]
    with pytest.raises(IndexError):
        x[3]
    a = mx.zeros((2, 3))
    a[0] = mx.array([[1.0, 2.0, 3.0]])  # leading 1s of the value drop, as in NumPy
    assert a.tolist() == [[1, 2, 3], [0, 0, 0]]
    ident = id(a)
    a[a > 1.5] = -1.0
    assert id(a) == ident and a.tolist() == [[1, -1, -1], [0, 0, 0]]
    with pytest.raises(ValueError):
        a.at.add(1)
    still_works()


def test_shapes_past_int32_overflow():
    for call in (lambda: mx.zeros(2**31), lambda: mx.ones([2, 2**31]),
                 lambda: mx.reshape(mx.zeros(4), [2**31]), lambda: mx.full([2**31], 1.0)):
        with pytest.raises(OverflowError):
            call()
    still_works()


@pytest.mark.parametrize("op", [mx.max, mx.min])
def test_max_min_of_empty_axis(op):
    for shape, axis in [((2, 0), -1), ((0, 2), 0), ((0,), None)]:
        with pytest.raises(ValueError):
            op(mx.zeros(shape), axis=axis)
    assert op(mx.zeros((0, 2)), axis=1).shape == (0,)
    assert mx.sum(mx.zeros((2, 0)), axis=1).tolist() == [0, 0]
    still_works()


def test_random_dtypes_and_bounds():
    key = mx.random.key(3)
    for sampler in (mx.random.uniform, mx.random.normal, mx.random.gumbel):
        assert sampler(shape=(2,), dtype=None).dtype == mx.float32
    a = mx.random.normal((3, 2), dtype=mx.float16, loc=1.0, scale=2.0, key=key)
    b = 2.0 * mx.random.normal((3, 2), dtype=mx.float16, key=key) + 1.0
    assert mx.array_equal(a, b).item()
    loc = mx.random.normal((3, 1, 2))
    assert mx.random.normal((3, 4, 2), dtype=mx.float16, loc=loc, scale=loc).dtype == mx.float16
    with pytest.raises(ValueError):
        mx.random.normal((2, 10, 2), loc=mx.zeros((10,)))
    low, high = mx.array([[0], [3]]), mx.array([5, 20, 30])
    r = np.array(mx.random.randint(low, high, (2, 3), key=key))
    assert r.shape == (2, 3)
    assert (r >= np.array([[0], [3]])).all() and (r < np.array([5, 20, 30])).all()
    assert mx.random.randint(10, -10, [4]).tolist() == [10] * 4
    t = mx.random.truncated_normal(2.0, -2.0, (5,))
    assert t.tolist() == [2.0] * 5
    with pytest.raises(ValueError):
        mx.random.bernoulli(0, [2])
    still_works()
