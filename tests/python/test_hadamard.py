"""hadamard_transform against an explicit Sylvester matrix, MLX's lengths m * 2^k
(m = 12, 20, 28), its gradient and vmap."""
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
    for n in (3, 36, 44, 12 * 3):
        with pytest.raises(ValueError, match="powers of two and 12, 20 or 28"):
            mx.hadamard_transform(mx.zeros((2, n)))


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


def matrix_of(n, dtype=mx.float32):
    """The transform's matrix (scale 1): its rows are the transforms of e_i."""
    return np.array(mx.hadamard_transform(mx.eye(n, dtype=dtype), scale=1.0)).T


@pytest.mark.parametrize("m", [12, 20, 28])
def test_lengths_m_times_a_power_of_two(m):
    h = matrix_of(m)
    assert set(np.unique(h)) == {-1.0, 1.0}
    np.testing.assert_array_equal(h @ h.T, m * np.eye(m))  # a Hadamard matrix
    for p in (2, 4, 16):  # kron(H_m, H_p): the m part outside, as MLX
        np.testing.assert_array_equal(matrix_of(m * p), np.kron(h, sylvester(p)))
    x = np.random.default_rng(m).standard_normal((5, 3, 4 * m)).astype(np.float32)
    got = np.array(mx.hadamard_transform(mx.array(x)))
    want = x @ np.kron(h, sylvester(4)).T / np.sqrt(4 * m)
    np.testing.assert_allclose(got, want, atol=1e-5)
    c = np.array(mx.hadamard_transform(mx.array(x[0, 0] + 2j * x[0, 1], dtype=mx.complex64)))
    np.testing.assert_allclose(c, (x[0, 0] + 2j * x[0, 1]) @ np.kron(h, sylvester(4)).T
                               / np.sqrt(4 * m), atol=1e-5)
    half = mx.hadamard_transform(mx.array(x).astype(mx.bfloat16), scale=0.5)
    assert half.dtype == mx.bfloat16
    np.testing.assert_allclose(np.array(half.astype(mx.float32)),
                               0.5 * x @ np.kron(h, sylvester(4)).T, rtol=1e-2, atol=5e-2)
    xs = mx.array(np.random.default_rng(1).standard_normal(m).astype(np.float32))
    cs = mx.array(np.random.default_rng(2).standard_normal(m).astype(np.float32))
    _, (g,) = mx.vjp(mx.hadamard_transform, [xs], [cs])  # the transpose's product
    np.testing.assert_allclose(np.array(g), h.T @ np.array(cs) / np.sqrt(m), atol=1e-5)


def test_same_matrices_as_mlx():
    mlx = pytest.importorskip("mlx.core")
    for n in (12, 20, 28, 24, 40, 56, 96, 160, 448):
        x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
        want = np.array(mlx.hadamard_transform(mlx.array(x), stream=mlx.cpu))
        got = np.array(mx.hadamard_transform(mx.array(x)))
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"n={n}")
