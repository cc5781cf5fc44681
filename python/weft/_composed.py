"""mlx.core functions composed from weft's ops in Python: each is a few
calls of ops weft already has (so grad, vmap and compile see through them)."""
import builtins as _builtins
import math as _math
import operator as _operator

from . import _core
from ._array import array

_py_max = _builtins.max
_py_min = _builtins.min
_py_abs = _builtins.abs
_slice = _builtins.slice


def _as_array(a):
    return a if isinstance(a, _core.array) else array(a)


def _normal_axis(axis, ndim, name):
    try:  # any integer (NumPy's too); a float, str or None is a TypeError
        axis = _operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: an axis must be an int, not {type(axis).__name__}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of range for rank {ndim}")
    return axis % ndim


_INTEGRAL = tuple(getattr(_core, name) for name in (
    "bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"))


def _is_integral(dtype):
    return dtype in _INTEGRAL


# ---------------------------------------------------------------- creation


def arange(*args, dtype=None, stream=None, **bounds):
    """arange([start,] stop[, step], dtype=None): int32 when every bound is an
    int (int64 when one does not fit in int32), else float32."""
    if len(args) > 3 or set(bounds) - {"start", "stop", "step"}:
        raise TypeError("arange(start, stop, step, dtype=None): unexpected arguments")
    named = dict(zip(("start", "stop", "step"), args))
    if args and named.get("stop") is None and "stop" not in bounds:
        # arange(stop) and arange(stop, None, step): the first bound is stop
        named["start"], named["stop"] = 0, args[0]
    for name, value in bounds.items():
        if name in named:
            raise TypeError(f"arange: got multiple values for '{name}'")
        named[name] = value
    start, stop, step = named.get("start"), named.get("stop"), named.get("step")
    if stop is None:
        raise TypeError("arange: missing the stop bound")
    start = 0 if start is None else start
    step = 1 if step is None else step
    for b in (start, stop, step):
        if not isinstance(b, (int, float)):
            raise TypeError(f"arange: bounds must be numbers, got {type(b).__name__}")
    if not (_math.isfinite(start) and _math.isfinite(stop)) or _math.isnan(step):
        raise ValueError("arange: start and stop must be finite and step a number")
    if step == 0:
        raise ValueError("arange: step must not be zero")
    all_int = _builtins.all(isinstance(b, int) for b in (start, stop, step))
    if dtype is None:
        if all_int:
            wide = _builtins.any(not -2**31 <= b < 2**31 for b in (start, stop, step))
            dtype = _core.int64 if wide else _core.int32
        else:
            dtype = _core.float32
    if _math.isinf(step):
        # one element when stop lies the step's way from start, else none
        count = 1 if (stop - start) * step > 0 else 0
        step = 1
    else:
        count = _py_max(0, _math.ceil((stop - start) / step))
    if count > 2**31 - 1:
        raise ValueError(f"arange: {count} elements are more than an array may hold")
    if _is_integral(dtype) and not all_int:
        # MLX's rule: an integer arange steps by the bounds cast to the dtype.
        first, delta = int(start), int(step)
        out = _core.arange(0, count, 1, dtype=dtype, stream=stream)
        return _core.add(_core.multiply(out, delta, stream=stream), first, stream=stream)
    if count <= 1 and not all_int:
        return _core.full([count], start, dtype, stream=stream)
    if _is_integral(dtype) and _builtins.any(not -2**31 <= b < 2**31 for b in (start, stop)):
        # past int32 the values wrap into the dtype, as MLX's do
        wide = _core.arange(start, stop, step, dtype=_core.int64, stream=stream)
        return wide.astype(dtype, stream=stream)
    return _core.arange(start, stop, step, dtype=dtype, stream=stream)


def linspace(start, stop, num=50, endpoint=True, dtype=None, *, stream=None):
    """num evenly spaced values from start to stop (stop excluded when
    endpoint is False); float32 unless dtype says otherwise."""
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    if dtype is None:
        dtype = _core.float32
    if endpoint:
        return _core.linspace(start, stop, num, dtype, stream=stream)
    if num == 0:
        return _core.zeros([0], dtype, stream=stream)
    step = (stop - start) / num
    out = _core.add(_core.multiply(_core.arange(0, num, 1, dtype=_core.float32), step), start)
    return out.astype(dtype, stream=stream)


def tri(n, m=None, k=0, dtype=None, *, stream=None):
    """An n x m matrix with ones at and below the k-th diagonal."""
    m = n if m is None else m
    rows = _core.reshape(_core.arange(0, n, 1, dtype=_core.int32), [n, 1])
    cols = _core.reshape(_core.arange(0, m, 1, dtype=_core.int32), [1, m])
    out = _core.less_equal(cols, _core.add(rows, k))
    return out.astype(_core.float32 if dtype is None else dtype, stream=stream)


def _like(a, fill, dtype, stream):
    """An array shaped like a (read from a at run time, so a shapeless
    compiled call follows a's shape), filled with fill."""
    a = _as_array(a)
    out = _core.zeros_like(a, stream=stream) if fill == 0 else _core.ones_like(a, stream=stream)
    if dtype is not None and dtype != a.dtype:
        out = out.astype(dtype, stream=stream)
    return out


def empty_like(a, dtype=None, *, stream=None):
    """An array shaped like a (weft fills it with zeros)."""
    return _like(a, 0, dtype, stream)


def empty(shape, dtype=None, *, stream=None):
    return _core.zeros(shape, _core.float32 if dtype is None else dtype, stream=stream)


def zeros_like(a, dtype=None, *, stream=None):
    return _like(a, 0, dtype, stream)


def ones_like(a, dtype=None, *, stream=None):
    return _like(a, 1, dtype, stream)


def full_like(a, fill_value, dtype=None, *, stream=None):
    """An array shaped like a holding fill_value, of a's dtype or dtype."""
    a = _as_array(a)
    out = _core.add(_like(a, 0, dtype, stream), fill_value, stream=stream)
    return out.astype(a.dtype if dtype is None else dtype, stream=stream)


def _window(m, terms):
    if m < 1:
        return _core.zeros([0], _core.float32)
    if m == 1:
        return _core.ones([1], _core.float32)
    n = _core.arange(0, m, 1, dtype=_core.float32)
    out = None
    for i, c in enumerate(terms):
        term = _core.multiply(_core.cos(_core.multiply(n, 2.0 * _math.pi * i / (m - 1))), c)
        out = term if out is None else _core.add(out, term)
    return out


def hanning(M, *, stream=None):
    return _window(M, [0.5, -0.5])


def hamming(M, *, stream=None):
    return _window(M, [0.54, -0.46])


def blackman(M, *, stream=None):
    return _window(M, [0.42, -0.5, 0.08])


def bartlett(M, *, stream=None):
    if M < 1:
        return _core.zeros([0], _core.float32)
    if M == 1:
        return _core.ones([1], _core.float32)
    n = _core.arange(0, M, 1, dtype=_core.float32)
    half = (M - 1) / 2.0
    return _core.subtract(1.0, _core.abs(_core.divide(_core.subtract(n, half), half)))


# ---------------------------------------------------------------- element-wise


def _reflect_index(n, size, symmetric):
    """For positions -before..size+after-1 of a padded axis, the source
    index under NumPy's reflect (edge not repeated) or symmetric rule."""
    if symmetric:
        period = 2 * size
        i = _core.remainder(n, period)
        return _core.where(_core.less(i, size), i, _core.subtract(period - 1, i))
    if size == 1:
        return _core.zeros_like(n)
    period = 2 * (size - 1)
    i = _core.remainder(n, period)
    return _core.where(_core.less(i, size), i, _core.subtract(period, i))


def pad(a, pad_width, mode="constant", constant_values=0, *, stream=None):
    """Pads a: mode 'constant' (constant_values), 'edge', 'reflect' or
    'symmetric' (NumPy's rules), pad_width an int, a (before, after) pair or
    one pair per axis."""
    a = _as_array(a)
    if mode == "constant":
        return _core.pad(a, pad_width, mode, constant_values, stream=stream)
    if mode not in ("edge", "reflect", "symmetric"):
        raise ValueError(f"pad: unknown mode '{mode}'")
    if isinstance(pad_width, int):
        widths = [(pad_width, pad_width)] * a.ndim
    elif len(pad_width) == 2 and _builtins.all(isinstance(w, int) for w in pad_width):
        widths = [tuple(pad_width)] * a.ndim  # one (before, after) pair for every axis
    else:
        widths = [tuple(w) if not isinstance(w, int) else (w, w) for w in pad_width]
        if len(widths) == 1:
            widths = widths * a.ndim
        widths = [w if len(w) == 2 else (w[0], w[0]) for w in widths]
    if len(widths) != a.ndim:
        raise ValueError(f"pad: pad_width has {len(widths)} entries for {a.ndim} axes")
    out = a
    for axis, (before, after) in enumerate(widths):
        if before < 0 or after < 0:
            raise ValueError("pad: widths must be non-negative")
        if before == 0 and after == 0:
            continue
        size = out.shape[axis]
        if size == 0:
            raise ValueError(f"pad: cannot pad an empty axis with mode '{mode}'")
        positions = _core.arange(-before, size + after, 1, dtype=_core.int32)
        if mode == "edge":
            source = _core.clip(positions, 0, size - 1)
        else:
            source = _reflect_index(positions, size, mode == "symmetric")
        out = _core.take(out, source, axis)
    return out


def depends(inputs, dependencies):
    """inputs, each made to depend on every array in dependencies: they are
    computed whenever the inputs are (values unchanged)."""
    single = isinstance(inputs, _core.array)
    inputs = [inputs] if single else list(inputs)
    deps = [dependencies] if isinstance(dependencies, _core.array) else list(dependencies)
    if not deps:
        return inputs[0] if single else inputs
    # A zero that reads every dependency: x + 0 * (sum of all) would change
    # NaN/inf inputs, so select through where with a condition that reads them.
    reads = _core.stop_gradient(_core.equal(_core.sum(_core.stack([
        _core.sum(_core.isnan(d).astype(_core.int32)) for d in deps])), -1))
    out = [_core.where(reads, x, x) for x in inputs]
    return out[0] if single else out


def trunc(a, /, *, stream=None):
    """Rounds toward zero."""
    a = _as_array(a)
    if _is_integral(a.dtype):
        return a
    return _core.where(_core.less(a, 0), _core.ceil(a), _core.floor(a), stream=stream)


def logical_xor(a, b, /, *, stream=None):
    a, b = _as_array(a), _as_array(b)
    return _core.not_equal(a.astype(_core.bool_), b.astype(_core.bool_), stream=stream)


def divmod(a, b, /, *, stream=None):
    """(floor_divide(a, b), remainder(a, b)), so that q * b + r == a."""
    return (_core.floor_divide(a, b, stream=stream), _core.remainder(a, b, stream=stream))


conj = _core.conjugate


def isclose(a, b, rtol=1e-05, atol=1e-08, *, equal_nan=False, stream=None):
    """|a - b| <= atol + rtol * |b|; infinities are close only to themselves."""
    a, b = _as_array(a), _as_array(b)
    finite = _core.logical_and(_core.isfinite(a), _core.isfinite(b))
    close = _core.less_equal(_core.abs(_core.subtract(a, b)),
                             _core.add(atol, _core.multiply(rtol, _core.abs(b))))
    close = _core.logical_or(_core.logical_and(close, finite), _core.equal(a, b))
    if equal_nan:
        close = _core.logical_or(close, _core.logical_and(_core.isnan(a), _core.isnan(b)))
    return close


# ---------------------------------------------------------------- reductions and scans


def count_nonzero(a, axis=None, keepdims=False, *, stream=None):
    a = _as_array(a)
    nonzero = _core.not_equal(a, 0).astype(_core.int32)
    return _core.sum(nonzero, axis, keepdims, stream=stream)


def vecdot(a, b, /, axis=-1, *, stream=None):
    """The dot product of a and b along axis (broadcast together); a complex a
    is conjugated first (NumPy's vdot, MLX's vecdot)."""
    a, b = _as_array(a), _as_array(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("vecdot: inputs must be at least 1-d")
    ax = axis + a.ndim if axis < 0 else axis
    if not 0 <= ax < a.ndim or (axis + b.ndim != ax if axis < 0 else axis >= b.ndim):
        raise ValueError(f"vecdot: axis {axis} is out of bounds for shapes {a.shape} and {b.shape}")
    if a.shape[ax] != b.shape[axis]:
        raise ValueError(f"vecdot: a and b differ along axis {axis}: {a.shape} and {b.shape}")
    if a.dtype == _core.complex64:
        a = _core.conjugate(a)
    return _core.sum(_core.multiply(a, b), ax, stream=stream)


def inner(a, b, *, stream=None):
    """Sums over the last axes of a and b; the result's shape is a's other
    axes followed by b's."""
    a, b = _as_array(a), _as_array(b)
    if a.ndim == 0 or b.ndim == 0:
        return _core.multiply(a, b, stream=stream)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"inner: last dimensions differ: {a.shape} and {b.shape}")
    k = a.shape[-1]
    rows_a = _math.prod(a.shape[:-1])
    rows_b = _math.prod(b.shape[:-1])
    out = _core.matmul(_core.reshape(a, [rows_a, k]), _core.transpose(_core.reshape(b, [rows_b, k])))
    return _core.reshape(out, list(a.shape[:-1]) + list(b.shape[:-1]), stream=stream)


# ---------------------------------------------------------------- shapes


def flip(a, /, axis=None, *, stream=None):
    """a reversed along axis (an int or a sequence), or along every axis."""
    a = _as_array(a)
    axes = range(a.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    index = [_slice(None)] * a.ndim
    for ax in axes:
        index[_normal_axis(ax, a.ndim, "flip")] = _slice(None, None, -1)
    return a[tuple(index)] if a.ndim else a


def roll(a, shift, axis=None, *, stream=None):
    """Elements moved shift places along axis, wrapping around."""
    a = _as_array(a)
    if axis is None:
        shifts = [shift] if isinstance(shift, int) else list(shift)
        flat = _core.reshape(a, [-1])
        for s in shifts:
            flat = roll(flat, s, 0)
        return _core.reshape(flat, a.shape, stream=stream)
    axes = [axis] if isinstance(axis, int) else list(axis)
    shifts = [shift] if isinstance(shift, int) else list(shift)
    # shift and axis broadcast against each other, as in NumPy
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis must have the same length")
    out = a
    for s, ax in zip(shifts, axes):
        ax = _normal_axis(ax, a.ndim, "roll")
        n = a.shape[ax]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        head = [_slice(None)] * a.ndim
        tail = [_slice(None)] * a.ndim
        head[ax] = _slice(n - s, None)
        tail[ax] = _slice(0, n - s)
        out = _core.concatenate([out[tuple(head)], out[tuple(tail)]], ax)
    return out


def diff(a, n=1, axis=-1, prepend=None, append=None, *, stream=None):
    """The n-th discrete difference along axis."""
    a = _as_array(a)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    axis = _normal_axis(axis, a.ndim, "diff")
    parts = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        extra = _as_array(extra)
        if extra is not a and extra.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            extra = _core.broadcast_to(extra, shape)
        parts.append(extra)
    out = _core.concatenate(parts, axis) if len(parts) > 1 else a
    for _ in range(n):
        m = out.shape[axis]
        if m == 0:  # empty from here on: an n far beyond the axis ends at once
            break
        hi = [_slice(None)] * out.ndim
        lo = [_slice(None)] * out.ndim
        hi[axis] = _slice(1, None)
        lo[axis] = _slice(0, _py_max(m - 1, 0))
        out = _core.subtract(out[tuple(hi)], out[tuple(lo)])
    return out


def unstack(a, axis=0, *, stream=None):
    """The slices of a along axis, that axis removed."""
    a = _as_array(a)
    axis = _normal_axis(axis, a.ndim, "unstack")
    return [_core.squeeze(p, axis) for p in _core.split(a, a.shape[axis], axis)]


def as_strided(a, /, shape=None, strides=None, offset=0, *, stream=None):
    """A view of a's row-major elements with the given shape and element
    strides, starting at offset (a gather in weft)."""
    a = _as_array(a)
    shape = list(a.shape) if shape is None else list(shape)
    if _builtins.any(d < 0 for d in shape):
        raise ValueError(f"as_strided: negative dimension in shape {tuple(shape)}")
    if strides is None:
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d
    strides = list(strides)
    if len(strides) != len(shape):
        raise ValueError("as_strided: shape and strides must have the same length")
    index = _core.full(shape, offset, _core.int32) if shape else array(offset)
    for i, (d, s) in enumerate(zip(shape, strides)):
        axis_shape = [1] * len(shape)
        axis_shape[i] = d
        step = _core.multiply(_core.arange(0, d, 1, dtype=_core.int32), s)
        index = _core.add(index, _core.reshape(step, axis_shape))
    return _core.take(_core.reshape(a, [-1]), index, stream=stream)


def _dynamic_index(a, start_indices, axes, sizes):
    start = _as_array(start_indices).astype(_core.int32)
    out = a
    for i, ax in enumerate(axes):
        ax = _normal_axis(ax, a.ndim, "slice")
        rows = _core.add(_core.arange(0, sizes[i], 1, dtype=_core.int32), start[i])
        out = _core.take(out, rows, ax)
    return out


def slice(a, start_indices, axes, slice_size, *, stream=None):  # noqa: A001
    """a[start:start + size] along each of axes, start an array (so it
    may be computed)."""
    a = _as_array(a)
    axes = list(axes)
    sizes = list(slice_size)
    if len(sizes) != a.ndim:
        raise ValueError("slice: slice_size needs one entry per dimension")
    return _dynamic_index(a, start_indices, axes, [sizes[_normal_axis(ax, a.ndim, "slice")]
                                                   for ax in axes])


def slice_update(a, update, start_indices, axes, *, stream=None):
    """a with update written at start_indices along axes (a computed start)."""
    a = _as_array(a)
    update = _as_array(update).astype(a.dtype)
    axes = [_normal_axis(ax, a.ndim, "slice_update") for ax in axes]
    start = _as_array(start_indices).astype(_core.int32)
    if update.ndim < a.ndim:
        update = _core.reshape(update, [1] * (a.ndim - update.ndim) + list(update.shape))
    inside = None
    source_index = []
    for ax in range(a.ndim):
        pos = _core.arange(0, a.shape[ax], 1, dtype=_core.int32)
        if ax in axes:
            pos = _core.subtract(pos, start[axes.index(ax)])
        within = _core.logical_and(_core.greater_equal(pos, 0), _core.less(pos, update.shape[ax]))
        axis_shape = [1] * a.ndim
        axis_shape[ax] = a.shape[ax]
        within = _core.reshape(within, axis_shape)
        inside = within if inside is None else _core.logical_and(inside, within)
        source_index.append(_core.clip(pos, 0, _py_max(update.shape[ax] - 1, 0)))
    spread = update
    for ax, pos in enumerate(source_index):
        spread = _core.take(spread, pos, ax)
    return _core.where(inside, spread, a, stream=stream)


def meshgrid(*arrays, sparse=False, indexing="xy", stream=None):
    """Coordinate arrays from 1-D arrays, as a tuple."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got '{indexing}'")
    arrays = [_as_array(a) for a in arrays]
    n = len(arrays)
    out = []
    for i, a in enumerate(arrays):
        shape = [1] * n
        position = i
        if indexing == "xy" and n >= 2 and i < 2:
            position = 1 - i
        shape[position] = -1
        out.append(_core.reshape(a, shape))
    if not sparse and out:
        from . import broadcast_arrays

        out = broadcast_arrays(*out)
    return tuple(out)


# The Hadamard matrices of orders 12, 20 and 28 that MLX's hadamard_transform
# uses for lengths m * 2^k (its transforms of the identity's rows are their
# columns), so that weft's transforms of those lengths give MLX's numbers:
# y = H_m x. Row i, column j of H_m: "+" is 1, "-" is -1.
_HADAMARD_ROWS = {
    12: (
        "+-++++++++++",
        "--+-+-+-+-+-",
        "+++-++----++",
        "+---+--+-++-",
        "+++++-++----",
        "+-+---+--+-+",
        "++--+++-++--",
        "+--++---+--+",
        "++----+++-++",
        "+--+-++---+-",
        "++++----+++-",
        "+-+--+-++---",
    ),
    20: (
        "+----+----++--++-++-",
        "-+----+---+++---+-++",
        "--+----+---+++-+-+-+",
        "---+----+---+++++-+-",
        "----+----++--++-++-+",
        "-+++++-----+--+++--+",
        "+-+++-+---+-+--+++--",
        "++-++--+---+-+--+++-",
        "+++-+---+---+-+--+++",
        "++++-----++--+-+--++",
        "--++-+-++-+-----++++",
        "---++-+-++-+---+-+++",
        "+---++-+-+--+--++-++",
        "++---++-+----+-+++-+",
        "-++---++-+----+++++-",
        "-+--+--++-+----+----",
        "+-+-----++-+----+---",
        "-+-+-+---+--+----+--",
        "--+-+++------+----+-",
        "+--+--++------+----+",
    ),
    28: (
        "+------++----++-+--+-+--++--",
        "-+-----+++-----+-+--+-+--++-",
        "--+-----+++---+-+-+----+--++",
        "---+-----+++---+-+-+-+--+--+",
        "----+-----+++---+-+-+++--+--",
        "-----+-----++++--+-+--++--+-",
        "------++----++-+--+-+--++--+",
        "--++++-+-------++--+++-+--+-",
        "---++++-+-----+-++--+-+-+--+",
        "+---+++--+----++-++--+-+-+--",
        "++---++---+----++-++--+-+-+-",
        "+++---+----+----++-++--+-+-+",
        "++++--------+-+--++-++--+-+-",
        "-++++--------+++--++--+--+-+",
        "-+-++-++--++--+--------++++-",
        "+-+-++--+--++--+--------++++",
        "-+-+-++--+--++--+----+---+++",
        "+-+-+-++--+--+---+---++---++",
        "++-+-+-++--+------+--+++---+",
        "-++-+-+-++--+------+-++++---",
        "+-++-+---++--+------+-++++--",
        "-++--++-+-++-+++----++------",
        "+-++--++-+-++-+++-----+-----",
        "++-++---+-+-++-+++-----+----",
        "-++-++-+-+-+-+--+++-----+---",
        "--++-++++-+-+----+++-----+--",
        "+--++-+-++-+-+----+++-----+-",
        "++--++-+-++-+-+----++------+",
    ),
}


def _hadamard_factor(n):
    """(m, 2^k) with n = m * 2^k and m 1, 12, 20 or 28; None if there is none."""
    for m in (1, 12, 20, 28):
        if n % m == 0 and (n // m) & (n // m - 1) == 0:
            return m, n // m
    return None


def hadamard_transform(a, scale=None, *, stream=None):
    """The Walsh-Hadamard transform of the last axis times `scale` (default
    1/sqrt(n)), as MLX defines it: for n a power of two, Sylvester's matrix
    (scipy.linalg.hadamard's) in log2(n) butterfly passes; for n = m * 2^k
    with m = 12, 20 or 28, kron(H_m, H_2^k) with MLX's H_m (_HADAMARD_ROWS):
    the butterflies over the 2^k part, then H_m's product over the m part.
    Integer and bool inputs give float32; float16 and bfloat16 are
    transformed in float32 and rounded once."""
    a = _as_array(a)
    if a.size == 0:
        raise ValueError("hadamard_transform: the array is empty")
    n = a.shape[-1] if a.ndim else 1
    factor = _hadamard_factor(n)
    if factor is None:
        raise ValueError(f"hadamard_transform: the last axis has {n} elements; weft supports "
                         "powers of two and 12, 20 or 28 times a power of two")
    m, p = factor
    if a.dtype in (_core.float32, _core.float64, _core.complex64):
        dtype = work = a.dtype
    elif a.dtype in (_core.float16, _core.bfloat16):
        dtype, work = a.dtype, _core.float32
    else:
        dtype = work = _core.float32
    x = a.astype(work)
    lead = list(a.shape[:-1]) + ([m] if m > 1 else [])
    half = 1
    while half < p:
        x = x.reshape(lead + [p // (2 * half), 2, half])
        top, bottom = x[..., 0, :], x[..., 1, :]
        x = _core.stack([top + bottom, top - bottom], axis=-2)
        half *= 2
    if m > 1:
        signs = [[1.0 if c == "+" else -1.0 for c in row] for row in _HADAMARD_ROWS[m]]
        x = _core.matmul(array(signs, dtype=work), x.reshape(lead + [p]))
    x = x.reshape(list(a.shape))
    factor = 1.0 / _math.sqrt(n) if scale is None else float(scale)
    return (x * factor).astype(dtype)


def kron(a, b, *, stream=None):
    """The Kronecker product."""
    a, b = _as_array(a), _as_array(b)
    if a.size == 0 or b.size == 0:
        raise ValueError("kron: inputs must not be empty")
    nd = _py_max(a.ndim, b.ndim)
    a = _core.reshape(a, [1] * (nd - a.ndim) + list(a.shape))
    b = _core.reshape(b, [1] * (nd - b.ndim) + list(b.shape))
    shape_a, shape_b = [], []
    for i in range(nd):
        shape_a += [a.shape[i], 1]
        shape_b += [1, b.shape[i]]
    out = _core.multiply(_core.reshape(a, shape_a), _core.reshape(b, shape_b))
    return _core.reshape(out, [a.shape[i] * b.shape[i] for i in range(nd)], stream=stream)


def diagonal(a, offset=0, axis1=0, axis2=1, *, stream=None):
    """The diagonal at offset of the matrices spanned by axis1 and axis2,
    as the last axis."""
    a = _as_array(a)
    if a.ndim < 2:
        raise ValueError("diagonal: the array needs at least 2 dimensions")
    axis1 = _normal_axis(axis1, a.ndim, "diagonal")
    axis2 = _normal_axis(axis2, a.ndim, "diagonal")
    if axis1 == axis2:
        raise ValueError("diagonal: axis1 and axis2 must differ")
    rest = [i for i in range(a.ndim) if i not in (axis1, axis2)]
    a = _core.transpose(a, rest + [axis1, axis2])
    n, m = a.shape[-2], a.shape[-1]
    first_row = _py_max(0, -offset)
    count = _py_max(0, _py_min(n - first_row, m - first_row - offset))
    if count == 0:
        return _core.zeros(list(a.shape[:-2]) + [0], a.dtype)
    rows = _core.arange(first_row, first_row + count, 1, dtype=_core.int32)
    flat = _core.reshape(a, list(a.shape[:-2]) + [n * m])
    return _core.take(flat, _core.add(_core.multiply(rows, m), _core.add(rows, offset)), -1,
                      stream=stream)


def diag(a, k=0, *, stream=None):
    """A 1-D a as the k-th diagonal of a square matrix; of a 2-D a, its
    k-th diagonal."""
    a = _as_array(a)
    if a.ndim == 1:
        n = a.shape[0] + _py_abs(k)
        rows = _core.reshape(_core.arange(0, n, 1, dtype=_core.int32), [n, 1])
        cols = _core.reshape(_core.arange(0, n, 1, dtype=_core.int32), [1, n])
        on_diag = _core.equal(_core.subtract(cols, rows), k)
        source = _core.clip(_core.where(on_diag, rows if k >= 0 else cols, 0), 0,
                            _py_max(a.shape[0] - 1, 0))
        if a.shape[0] == 0:
            return _core.zeros([n, n], a.dtype)
        return _core.where(on_diag, _core.take(a, source), _core.zeros([], a.dtype),
                           stream=stream)
    if a.ndim == 2:
        return diagonal(a, k, 0, 1, stream=stream)
    raise ValueError("diag: the input must be 1-D or 2-D")


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, *, stream=None):
    out = _core.sum(diagonal(a, offset, axis1, axis2), -1)
    return out.astype(dtype) if dtype is not None else out


# ---------------------------------------------------------------- dtypes


def asarray(a, dtype=None, *, copy=None):
    """a as an array; copy=False promises no copy, which weft can keep only
    for a weft array of that dtype (anything else is a ValueError)."""
    if copy is False:
        # MLX adopts memory only on Metal; on the CPU it raises, as weft does.
        raise ValueError("asarray: copy=False is not supported (weft always copies inputs)")
    if isinstance(a, _core.array) and (dtype is None or a.dtype == dtype) and not copy:
        return a
    return array(a, dtype)


def device_count(device_type=None):
    from . import cpu

    return 1 if device_type in (None, cpu) else 0


def device_info(device=None):
    return {"architecture": "cpu", "device_name": "cpu"}


# ---------------------------------------------------------------- convolution


def convolve(a, v, mode="full", *, stream=None):
    """The discrete convolution of 1-d arrays (NumPy's modes 'full', 'same',
    'valid'), as one conv1d of the longer array with the shorter one flipped
    (the two are swapped when v is longer)."""
    a, v = _as_array(a), _as_array(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError("[convolve] Inputs must be 1D.")
    if a.size == 0 or v.size == 0:
        raise ValueError("[convolve] Inputs cannot be empty.")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"[convolve] Invalid mode '{mode}' (full, same or valid).")
    signal, kernel = (v, a) if a.size < v.size else (a, v)
    taps = kernel.size
    kernel = _core.reshape(kernel[::-1], [1, taps, 1], stream=stream)
    signal = _core.reshape(signal, [1, signal.size, 1], stream=stream)
    if mode == "full":
        low = high = taps - 1
    elif mode == "valid":
        low = high = 0
    else:  # 'same': centred, the extra zero (even taps) on the left
        low, high = taps // 2, (taps - 1) // 2
    out = _core.conv_general(signal, kernel, padding=([low], [high]), stream=stream)
    return _core.reshape(out, [-1], stream=stream)


# ---------------------------------------------------------------- order statistics


def median(a, axis=None, keepdims=False, *, stream=None):
    """Median over `axis` (None: every axis; an int or a sequence): the
    reduced axes are moved last and flattened, sorted, and the middle
    element (or the mean of the two middle ones) taken; float results
    (integers give float32); NaN anywhere in a reduction gives NaN."""
    a = _as_array(a)
    if axis is None:
        axes = list(range(a.ndim))
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
        axes = [_normal_axis(ax, a.ndim, "[median]") for ax in axes]
        if len(set(axes)) != len(axes):
            raise ValueError("[median] Received duplicate axis.")
    axes = sorted(axes)
    kept = [d for d in range(a.ndim) if d not in axes]
    count = 1
    for d in axes:
        count *= a.shape[d]
    if count == 0:
        raise ValueError("[median] Cannot take median along empty axis.")
    dtype = a.dtype if a.dtype in (_core.float16, _core.bfloat16, _core.float32,
                                   _core.float64, _core.complex64) else _core.float32
    flat = _core.reshape(_core.transpose(a, kept + axes, stream=stream),
                         [a.shape[d] for d in kept] + [count], stream=stream)
    if a.dtype == _core.complex64:  # NumPy's order: by real part, then imaginary
        by_imag = _core.argsort(_core.imag(flat), -1, stream=stream)
        flat_i = _core.take_along_axis(flat, by_imag, -1, stream=stream)
        by_real = _core.argsort(_core.real(flat_i), -1, stream=stream)  # stable
        ordered = _core.take_along_axis(flat_i, by_real, -1, stream=stream)
    else:
        ordered = _core.sort(flat, -1, stream=stream)
    middle = ordered[..., count // 2].astype(dtype, stream=stream)
    if count % 2 == 0:
        lower = ordered[..., count // 2 - 1].astype(dtype, stream=stream)
        middle = _core.multiply(_core.add(middle, lower, stream=stream),
                                _core.array(0.5, dtype=dtype), stream=stream)
    if dtype == a.dtype:  # sorting puts NaNs last, out of the middle's reach
        nan = _core.any(_core.isnan(flat, stream=stream), -1, stream=stream)
        middle = _core.where(nan, _core.array(float("nan"), dtype=dtype), middle,
                             stream=stream)
    if keepdims:
        middle = _core.expand_dims(middle, axes, stream=stream)
    return middle
