"""Initialisers (mlx.nn.init): each returns a function that takes an array
and returns a new array of its shape, drawn or filled as named."""
import math

import weft as mx


def constant(value, dtype=mx.float32):
    """Every entry `value`."""
    def initializer(a):
        return mx.full(a.shape, value, dtype=dtype)
    return initializer


def normal(mean=0.0, std=1.0, dtype=mx.float32):
    """Normal with the given mean and standard deviation."""
    def initializer(a):
        return mx.random.normal(a.shape, dtype=dtype, loc=mean, scale=std)
    return initializer


def uniform(low=0.0, high=1.0, dtype=mx.float32):
    """Uniform over [low, high)."""
    def initializer(a):
        return mx.random.uniform(low, high, a.shape, dtype=dtype)
    return initializer


def identity(dtype=mx.float32):
    """The identity matrix (the array must be square)."""
    def initializer(a):
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"identity: the array must be a square matrix, got shape {a.shape}")
        return mx.eye(a.shape[0], dtype=dtype)
    return initializer


def _fans(a):
    """(fan_in, fan_out) of a weight of shape (out, ..., in)."""
    if a.ndim < 2:
        raise ValueError(f"fan in and fan out need an array of at least 2 dimensions, got {a.ndim}")
    receptive = math.prod(a.shape[1:-1])
    return a.shape[-1] * receptive, a.shape[0] * receptive


def glorot_normal(dtype=mx.float32):
    """Normal with std = gain * sqrt(2 / (fan_in + fan_out))."""
    def initializer(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        return mx.random.normal(a.shape, dtype=dtype) * (gain * math.sqrt(2.0 / (fan_in + fan_out)))
    return initializer


def glorot_uniform(dtype=mx.float32):
    """Uniform over +-gain * sqrt(6 / (fan_in + fan_out))."""
    def initializer(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)
    return initializer


def _fan(a, mode):
    fan_in, fan_out = _fans(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"mode must be 'fan_in' or 'fan_out', got '{mode}'")


def he_normal(dtype=mx.float32):
    """Normal with std = gain / sqrt(fan) (fan_in or fan_out)."""
    def initializer(a, mode="fan_in", gain=1.0):
        return mx.random.normal(a.shape, dtype=dtype) * (gain / math.sqrt(_fan(a, mode)))
    return initializer


def he_uniform(dtype=mx.float32):
    """Uniform over +-gain * sqrt(3 / fan)."""
    def initializer(a, mode="fan_in", gain=1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)
    return initializer


def sparse(sparsity, mean=0.0, std=1.0, dtype=mx.float32):
    """A 2-D normal(mean, std) matrix with ceil(sparsity * cols) zeros at random
    places in every row."""
    def initializer(a):
        if a.ndim != 2:
            raise ValueError(f"sparse: only 2-D arrays are supported, got {a.ndim}D array")
        rows, cols = a.shape
        zeros_per_row = int(math.ceil(sparsity * cols))
        values = mx.random.normal(a.shape, dtype=dtype, loc=mean, scale=std)
        # rank of each entry within its row under random keys: the lowest
        # `zeros_per_row` ranks are zeroed
        ranks = mx.argsort(mx.argsort(mx.random.uniform(shape=a.shape), axis=1), axis=1)
        return mx.where(ranks < zeros_per_row, mx.zeros([], dtype), values)
    return initializer


def orthogonal(gain=1.0, dtype=mx.float32):
    """A matrix with orthonormal rows or columns (whichever are fewer), times
    gain: the Q factor of a normal matrix's QR decomposition (computed with
    NumPy, since weft has no linear algebra yet)."""
    def initializer(a):
        if a.ndim != 2:
            raise ValueError(f"orthogonal: only 2-D arrays are supported, got {a.ndim}D array")
        import numpy as np

        rows, cols = a.shape
        n = max(rows, cols)
        draw = np.array(mx.random.normal((n, n)), dtype=np.float64)
        q, r = np.linalg.qr(draw)
        q *= np.sign(np.diag(r))  # a unique, uniformly distributed Q
        return mx.array((gain * q[:rows, :cols]).astype(np.float32)).astype(dtype)
    return initializer
