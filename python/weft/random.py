"""weft.random: counter-based random numbers (mlx.core.random's API).

A key is a uint32-valued array of shape (2,); key=None draws from this
thread's default key, so threads never share RNG state.
"""
import math as _math

from . import _core
from ._composed import _normal_axis

_KEY_DTYPE = getattr(_core, "uint32", _core.int64)


def _words(key):
    if key is None:
        return None
    values = key.tolist() if hasattr(key, "tolist") else list(key)
    if len(values) != 2:
        raise ValueError("a random key has shape (2,)")
    return (int(values[0]) & 0xFFFFFFFF, int(values[1]) & 0xFFFFFFFF)


def _key_array(words):
    return _core.array(list(words), dtype=_KEY_DTYPE) if _KEY_DTYPE is not _core.int64 \
        else _core.array([int(w) for w in words], dtype=_core.int64)


class _ThreadKeyState:
    """The type of `state`: stands for the calling thread's default key.

    mlx.core.random.state is a list holding the global key, passed to
    compile as inputs= and outputs= so a compiled function draws fresh
    numbers per call. weft's compile already does that for every compiled
    function (default-key draws are redone per call from the calling
    thread's key, which they advance; weft.h, wf_compile), so as compile
    state this object carries no arrays: compile skips it.
    """

    __slots__ = ()

    def __repr__(self):
        return "weft.random.state"


state = _ThreadKeyState()


def seed(seed):
    """Reseeds this thread's default key."""
    _core._random_seed(seed)


def key(seed):
    """A key from an integer seed."""
    return _key_array(_core._random_key(seed))


def split(key, num=2, *, stream=None):
    """num new keys (shape (num, 2)) derived from key."""
    keys = _core._random_split(_words(key), num)
    return _core.array([list(k) for k in keys], dtype=_KEY_DTYPE)


def _shape(shape):
    if shape is None:
        return []
    return [shape] if isinstance(shape, int) else list(shape)


def _float_dtype(dtype):
    return _core.float32 if dtype is None else dtype


def uniform(low=0.0, high=1.0, shape=[], dtype=None, key=None, *, stream=None):
    """Uniform samples in [low, high)."""
    dtype = _float_dtype(dtype)
    if isinstance(low, _core.array) or isinstance(high, _core.array):
        shape = _shape(shape) or _broadcast(low, high)
        u = _core._random_uniform(shape, dtype, 0.0, 1.0, _words(key))
        return _core.add(_core.multiply(u, _core.subtract(high, low)), low).astype(dtype)
    if float(high) <= float(low):  # an empty or reversed range: low + (high - low) u, as MLX
        u = _core._random_uniform(_shape(shape), dtype, 0.0, 1.0, _words(key))
        return _core.add(_core.multiply(u, float(high) - float(low)), float(low)).astype(dtype)
    return _core._random_uniform(_shape(shape), dtype, float(low), float(high), _words(key))


def _broadcast(*xs):
    shapes = [x.shape if isinstance(x, _core.array) else () for x in xs]
    n = max(len(s) for s in shapes)
    out = []
    for i in range(-n, 0):
        out.append(max((s[i] for s in shapes if len(s) >= -i), default=1))
    return out


def _scaled(z, loc, scale, shape):
    """z * scale + loc in z's dtype (the order MLX's samplers use), loc and
    scale broadcast to shape."""
    dtype = z.dtype
    if isinstance(scale, _core.array):
        _core.broadcast_to(scale, list(z.shape))  # ValueError if it does not fit
        scale = scale.astype(dtype)
    if isinstance(loc, _core.array):
        _core.broadcast_to(loc, list(z.shape))
        loc = loc.astype(dtype)
    if not (isinstance(scale, (int, float)) and scale == 1.0):
        z = _core.multiply(z, scale)
    if not (isinstance(loc, (int, float)) and loc == 0.0):
        z = _core.add(z, loc)
    return z


def normal(shape=[], dtype=None, loc=0.0, scale=1.0, key=None, *, stream=None):
    """Normal(loc, scale) samples. complex64: real and imaginary parts each
    normal with variance 1/2 (unit variance in all, as MLX)."""
    dtype = _float_dtype(dtype)
    shape = _shape(shape)
    if not shape and (isinstance(loc, _core.array) or isinstance(scale, _core.array)):
        shape = _broadcast(loc, scale)
    if dtype == _core.complex64:
        parts = _core._random_normal(shape + [2], _core.float32, 0.0, _math.sqrt(0.5),
                                     _words(key))
        z = _core.squeeze(_core.view(parts, _core.complex64), -1)
        if not (isinstance(scale, (int, float)) and scale == 1.0):
            z = _core.multiply(scale, z)
        if not (isinstance(loc, (int, float)) and loc == 0.0):
            z = _core.add(loc, z)
        return z
    z = _core._random_normal(shape, dtype, 0.0, 1.0, _words(key))
    return _scaled(z, loc, scale, shape)


def randint(low, high, shape=[], dtype=_core.int32, key=None, *, stream=None):
    """Integers uniform in [low, high); low and high may be arrays that
    broadcast with shape."""
    dtype = _core.int32 if dtype is None else dtype
    if isinstance(low, _core.array) or isinstance(high, _core.array):
        shape = _shape(shape) or _broadcast(low, high)
        low_f = _core.broadcast_to(_core.array(low).astype(_core.float64), shape)
        high_f = _core.broadcast_to(_core.array(high).astype(_core.float64), shape)
        u = _core._random_uniform(shape, _core.float64, 0.0, 1.0, _words(key))
        span = _core.maximum(_core.subtract(high_f, low_f), 0.0)
        out = _core.floor(_core.add(low_f, _core.multiply(u, span)))
        out = _core.minimum(out, _core.maximum(_core.subtract(high_f, 1.0), low_f))
        return out.astype(dtype)
    low, high = int(low), int(high)
    if high <= low:  # an empty range gives low, as in MLX
        return _core.full(_shape(shape), low, dtype)
    if dtype == _core.bool_:  # drawn as integers, then cast (MLX's bool draws)
        return _core._random_randint(low, high, _shape(shape), _core.int32,
                                     _words(key)).astype(_core.bool_)
    return _core._random_randint(low, high, _shape(shape), dtype, _words(key))


def bernoulli(p=0.5, shape=None, key=None, *, stream=None):
    """Bool samples, true with probability p (a float or a float array)."""
    if isinstance(p, int) and not isinstance(p, bool):
        raise ValueError("bernoulli: p must be a float or an array of floats")
    return _core._random_bernoulli(p, None if shape is None else _shape(shape), _words(key))


def categorical(logits, axis=-1, shape=None, num_samples=None, key=None, *, stream=None):
    """Samples from the categorical distribution given by unnormalized log-probabilities."""
    if shape is not None and num_samples is not None:
        raise ValueError("categorical: give at most one of shape and num_samples")
    if shape is None and num_samples is None:
        return _core._random_categorical(logits, axis, _words(key)).astype(_core.uint32)
    # Several samples per distribution: add a sample axis and draw with Gumbel noise.
    logits = _core.array(logits) if not isinstance(logits, _core.array) else logits
    axis = _normal_axis(axis, logits.ndim, "categorical")
    moved = _core.moveaxis(logits, axis, -1)
    batch = list(moved.shape[:-1])
    if num_samples is not None:
        out_shape = batch + [num_samples]
        expanded = _core.expand_dims(moved, -2)
    else:
        out_shape = _shape(shape)
        expanded = moved
    target = out_shape + [moved.shape[-1]]
    g = gumbel(target, moved.dtype if moved.dtype in (_core.float32, _core.float64) else _core.float32, key)
    return _core.argmax(_core.add(_core.broadcast_to(expanded, target), g), -1).astype(_core.uint32)


def gumbel(shape=[], dtype=None, key=None, *, stream=None):
    """Samples of the standard Gumbel distribution."""
    dtype = _float_dtype(dtype)
    u = _core._random_uniform(_shape(shape), dtype, 1e-7 if dtype != _core.float64 else 1e-16, 1.0, _words(key))
    return _core.negative(_core.log(_core.negative(_core.log(u))))


def truncated_normal(lower, upper, shape=None, dtype=None, key=None, *, stream=None):
    """Normal samples truncated to [lower, upper] (inverse-CDF method)."""
    dtype = _float_dtype(dtype)
    lower = _core.array(lower, dtype) if not isinstance(lower, _core.array) else lower
    upper = _core.array(upper, dtype) if not isinstance(upper, _core.array) else upper
    shape = _shape(shape) if shape is not None else _broadcast(lower, upper)
    sq2 = _math.sqrt(2.0)
    lo = _core.erf(_core.divide(lower, sq2))
    hi = _core.erf(_core.divide(upper, sq2))
    u = _core._random_uniform(shape, dtype, 0.0, 1.0, _words(key))
    v = _core.add(lo, _core.multiply(u, _core.subtract(hi, lo)))
    v = _core.clip(v, -1 + 1e-7, 1 - 1e-7)
    out = _core.multiply(sq2, _core.erfinv(v))
    return _core.maximum(_core.minimum(out, upper), lower)


def laplace(shape=[], dtype=None, loc=0.0, scale=1.0, key=None, *, stream=None):
    """Laplace(loc, scale) samples."""
    dtype = _float_dtype(dtype)
    u = _core._random_uniform(_shape(shape), dtype, -0.5 + 1e-7, 0.5, _words(key))
    s = _core.sign(u)
    z = _core.negative(_core.multiply(s, _core.log1p(_core.multiply(-2.0, _core.abs(u)))))
    return _scaled(z, loc, scale, _shape(shape))


def permutation(x, axis=0, key=None, *, stream=None):
    """A random permutation of arange(x) (x an int), or x's entries shuffled
    along `axis`: the order that sorts one random 31-bit integer per entry
    (argsort is stable, so the rare equal draws keep their index order)."""
    if isinstance(x, int):
        if x < 0:
            raise ValueError(f"[permutation] negative size {x}")
        draws = _core._random_randint(0, 2 ** 62, [x], _core.int64, _words(key))
        return _core.argsort(draws, 0, stream=stream)
    x = x if isinstance(x, _core.array) else _core.array(x)
    if x.ndim == 0:
        raise ValueError("[permutation] cannot permute a 0-d array")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"[permutation] axis {axis} is out of range for rank {x.ndim}")
    order = permutation(x.shape[axis], key=key, stream=stream)
    return _core.take(x, order, axis, stream=stream)


def multivariate_normal(mean, cov, shape=[], dtype=None, key=None, *, stream=None):
    """Samples of N(mean, cov) (float32): mean + z @ (U sqrt(S))^T with U, S the
    SVD of cov, so a positive semi-definite (even singular) cov works. mean
    (..., n) and cov (..., n, n) broadcast over their batch dims, and with
    `shape`; the result is (broadcast batch..., n)."""
    from . import linalg

    dtype = _core.float32 if dtype is None else dtype
    if dtype != _core.float32:
        raise ValueError(f"multivariate_normal: dtype must be float32, not {dtype}")
    mean = mean if isinstance(mean, _core.array) else _core.array(mean)
    cov = cov if isinstance(cov, _core.array) else _core.array(cov)
    if mean.ndim < 1:
        raise ValueError("multivariate_normal: mean must have at least one dimension")
    if cov.ndim < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"multivariate_normal: cov must be a (batch of) square matrices, "
                         f"not of shape {cov.shape}")
    if cov.shape[-1] != mean.shape[-1]:
        raise ValueError(f"multivariate_normal: mean has {mean.shape[-1]} elements but cov "
                         f"is {cov.shape[-2]} x {cov.shape[-1]}")
    batch = _broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2]))
    batch = _broadcast_shapes(batch, tuple(_shape(shape)))
    u, s, _ = linalg.svd(cov.astype(_core.float32))
    factor = _core.multiply(u, _core.expand_dims(_core.sqrt(s), -2))
    z = normal(list(batch) + [mean.shape[-1]], key=key)
    mixed = _core.matmul(_core.expand_dims(z, -2), _core.swapaxes(factor, -1, -2))
    return _core.add(mean.astype(_core.float32), _core.squeeze(mixed, -2))


def _broadcast_shapes(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"multivariate_normal: shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)
