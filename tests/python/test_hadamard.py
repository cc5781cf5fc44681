"""hadamard_transform against an explicit Sylvester matrix, its gradient and vmap."""
import numpy as np
import pytest

import weft as mx


def sylvester(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


@pytest.mark.parametrize("n", [1, 2, 4, 8, 64, 1024])
def test_matches_the_matrix(n):
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
    got = np.array(mx.hadamard_transform(mx.array(x)))
    np.testing.assert_allclose(got, x @ sylvester(n).T / np.sqrt(n), atol=1e-5 * np.log2(2 * n))
    got = np.array(mx.hadamard_transform(mx.array(x), scale=0.34))
    np.testing.assert_allclose(got, 0.34 * x @ sylvester(n).T, atol=1e-4 * np.sqrt(n))


def test_dtypes_strides_and_scalars():
    x = np.arange(-8, 8, dtype=np.int32).reshape(4, 4)
    y = mx.hadamard_transform(mx.array(x)[::2])
    assert y.dtype == mx.float32
    np.testing.assert_allclose(np.array(y), x[::2] @ sylvester(4).T / 2, atol=1e-6)
    h = mx.hadamard_transform(mx.array(x).astype(mx.float16))
    assert h.dtype == mx.float16
    np.testing.assert_allclose(np.array(h).astype(np.float32), x @ sylvester(4).T / 2, atol=1e-2)
    assert mx.hadamard_transform(mx.array(x, dtype=mx.float64)).dtype == mx.float64
    assert mx.hadamard_transform(mx.array(5.0)).item() == 5.0
    assert mx.hadamard_transform(mx.array(5.0), scale=0.2).item() == pytest.approx(1.0)
    ones = mx.ones((8, 8, 1))
    assert mx.array_equal(mx.hadamard_transform(ones), ones).item()


def test_bad_sizes():
    with pytest.raises(ValueError, match="empty"):
        mx.hadamard_transform(mx.array([]))
    with pytest.raises(ValueError, match="powers of two"):
        mx.hadamard_transform(mx.zeros((2, 12)))


def test_gradient_and_vmap():
    n = 16
    h = mx.array(sylvester(n).astype(np.float32)) / np.sqrt(n)
    x = mx.array(np.random.default_rng(1).standard_normal(n).astype(np.float32))
    c = mx.array(np.random.default_rng(2).standard_normal(n).astype(np.float32))
    _, (want,) = mx.vjp(lambda v: h @ v, [x], [c])
    _, (got,) = mx.vjp(mx.hadamard_transform, [x], [c])
    np.testing.assert_allclose(np.array(got), np.array(want), atol=1e-5)
    xb = mx.array(np.random.default_rng(3).standard_normal((n, 4, n)).astype(np.float32))
    got = mx.vmap(mx.hadamard_transform, in_axes=1, out_axes=1)(xb)
    np.testing.assert_allclose(np.array(got), np.array(mx.hadamard_transform(xb)), atol=1e-5)
