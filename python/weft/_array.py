"""The array class results are made of: weft._core.array plus the named
methods MLX's array has, each a thin call of the op of the same name."""
from . import _core


class array(_core.array):
    """array(val, dtype=None): a lazy n-dimensional array (mlx.core.array)."""

    __slots__ = ()

    def __repr__(self):
        return _format(self)

    def __str__(self):
        return _format(self)

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"unsupported format string '{spec}' for an array of {self.ndim} "
                            "dimensions")
        return str(self)

    def __array_namespace__(self, *, api_version=None):
        import weft

        return weft

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        value = self.astype(_core.float32) if self.dtype == _core.bfloat16 else self
        out = np.array(memoryview(value), copy=True)
        return out.astype(dtype) if dtype is not None else out

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the array's memory, in place (real strides, no
        copy). A consumer that speaks DLPack 1.0 (max_version >= (1, 0), as
        NumPy 2) gets a versioned tensor flagged read-only; an older one the
        unversioned tensor, which cannot say so (do not write through it).
        copy=True exports a fresh buffer instead."""
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError(f"weft arrays live on the CPU, not on device {dl_device}")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        source = _core.where(True, self, self) if copy else self  # where() writes a new buffer
        return _core._dlpack(source, versioned, bool(copy))

    def __dlpack_device__(self):
        return _core._dlpack_device(self)

    def __reduce__(self):
        import numpy as np

        return (_from_numpy_pickled, (np.asarray(self), self.dtype))

    # A copy is a new object over the same (immutable) value: an in-place
    # operator on it replaces its own handle only, never the original's.
    def __copy__(self):
        return array(self)

    def __deepcopy__(self, memo):
        return array(self)

    def __hash__(self):
        return id(self)

    @property
    def at(self):
        return _At(self)

    # shape methods
    def reshape(self, *shape, stream=None):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return _core.reshape(self, list(shape), stream=stream)

    def transpose(self, *axes, stream=None):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return _core.transpose(self, list(axes) if axes else None, stream=stream)

    def flatten(self, start_axis=0, end_axis=-1, *, stream=None):
        return _core.flatten(self, start_axis, end_axis, stream=stream)

    def squeeze(self, axis=None, *, stream=None):
        return _core.squeeze(self, axis, stream=stream)

    def swapaxes(self, axis1, axis2, *, stream=None):
        return _core.swapaxes(self, axis1, axis2, stream=stream)

    def moveaxis(self, source, destination, *, stream=None):
        return _core.moveaxis(self, source, destination, stream=stream)

    def split(self, indices_or_sections, axis=0, *, stream=None):
        return _core.split(self, indices_or_sections, axis, stream=stream)

    def split_at(self, indices, axis=0, *, stream=None):
        return _core.split(self, indices, axis, stream=stream)

    def var(self, axis=None, keepdims=False, ddof=0, *, stream=None):
        return _core.var(self, axis, keepdims, ddof, stream=stream)

    def std(self, axis=None, keepdims=False, ddof=0, *, stream=None):
        return _core.std(self, axis, keepdims, ddof, stream=stream)

    def argmax(self, axis=None, keepdims=False, *, stream=None):
        return _core.argmax(self, axis, keepdims, stream=stream)

    def argmin(self, axis=None, keepdims=False, *, stream=None):
        return _core.argmin(self, axis, keepdims, stream=stream)

    def cumsum(self, axis=None, *, reverse=False, inclusive=True, stream=None):
        return _core.cumsum(self, axis, reverse, inclusive, stream=stream)

    def cumprod(self, axis=None, *, reverse=False, inclusive=True, stream=None):
        return _core.cumprod(self, axis, reverse, inclusive, stream=stream)

    def round(self, decimals=0, *, stream=None):
        return _core.round(self, decimals, stream=stream)

    def diag(self, k=0, *, stream=None):
        from . import diag

        return diag(self, k, stream=stream)

    def diagonal(self, offset=0, axis1=0, axis2=1, stream=None):
        from . import diagonal

        return diagonal(self, offset, axis1, axis2, stream=stream)

    def conj(self, *, stream=None):
        return _core.conjugate(self, stream=stream)

    def conjugate(self, *, stream=None):
        return _core.conjugate(self, stream=stream)

    @property
    def real(self):
        return _core.real(self)

    @property
    def imag(self):
        return _core.imag(self)

    def view(self, dtype, *, stream=None):
        return _core.view(self, dtype, stream=stream)

    def __complex__(self):
        return complex(self.item())

    def log10(self, *, stream=None):
        from . import log10

        return log10(self, stream=stream)

    def _scan_method(name):
        def method(self, axis=None, *, reverse=False, inclusive=True, stream=None):
            return getattr(_core, name)(self, axis, reverse=reverse, inclusive=inclusive,
                                        stream=stream)

        method.__name__ = name
        return method

    cummax = _scan_method("cummax")
    cummin = _scan_method("cummin")
    logcumsumexp = _scan_method("logcumsumexp")
    del _scan_method


def _make_reduction(name):
    op = getattr(_core, name)

    def method(self, axis=None, keepdims=False, *, stream=None):
        return op(self, axis, keepdims, stream=stream)

    method.__name__ = name
    method.__doc__ = op.__doc__
    return method


def _make_unary(name):
    op = getattr(_core, name)

    def method(self, *, stream=None):
        return op(self, stream=stream)

    method.__name__ = name
    method.__doc__ = op.__doc__
    return method


for _name in ("sum", "mean", "prod", "max", "min", "all", "any", "logsumexp"):
    setattr(array, _name, _make_reduction(_name))
for _name in ("abs", "exp", "log", "log1p", "log2", "sqrt", "rsqrt", "square", "reciprocal",
              "sin", "cos", "tan", "tanh", "sigmoid", "floor", "ceil", "negative", "sign"):
    setattr(array, _name, _make_unary(_name))


def _from_numpy_pickled(value, dtype):
    return array(value, dtype)


class _At:
    """a.at[index].add(v) and friends: the updated array (a itself unchanged)."""

    __slots__ = ("_array",)

    def __init__(self, a):
        self._array = a

    def __getitem__(self, index):
        return _AtIndex(self._array, index)

    def __getattr__(self, name):
        if name not in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "set"):
            raise AttributeError(name)
        raise ValueError(f"at: index the array first (a.at[index].{name}(value))")


def _advanced(index):
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (_core.array, list)) or hasattr(i, "__array__") for i in items)


class _AtIndex:
    __slots__ = ("_array", "_index")

    def __init__(self, a, index):
        self._array = a
        self._index = index

    def _basic(self, op, value):
        out = array(self._array)
        out[self._index] = op(self._array[self._index], value)
        return out

    def set(self, value):
        out = array(self._array)
        out[self._index] = value
        return out

    def _scatter(self, mode, op, value):
        """Integer-array indices combine through one weft scatter (repeated
        indices all count, in index order); basic ones update the slice."""
        if not _advanced(self._index):
            return self._basic(op, value)
        return _core._index_scatter(self._array, self._index, value, mode)

    def add(self, value):
        return self._scatter(_SCATTER_ADD, _core.add, value)

    def subtract(self, value):
        return self.add(_core.negative(value if isinstance(value, _core.array) else array(value)))

    def multiply(self, value):
        return self._scatter(_SCATTER_PROD, _core.multiply, value)

    def divide(self, value):
        return self.multiply(_core.reciprocal(value if isinstance(value, _core.array) else array(value)))

    def maximum(self, value):
        return self._scatter(_SCATTER_MAX, _core.maximum, value)

    def minimum(self, value):
        return self._scatter(_SCATTER_MIN, _core.minimum, value)


# wf_scatter_mode's values (weft.h).
_SCATTER_ADD, _SCATTER_PROD, _SCATTER_MAX, _SCATTER_MIN = 1, 2, 3, 4


def _format(a):
    """repr like MLX's: array([1, 2], dtype=int32); floats with 6 significant
    digits (or the set_printoptions precision after the point), dimensions
    past 6 summarised by their first and last 3."""
    import numpy as np

    from . import _PrintOptions

    value = np.asarray(a)
    is_bool = a.dtype == _core.bool_
    is_int = not is_bool and str(a.dtype).split(".")[-1].startswith(("int", "uint"))
    precision = _PrintOptions.precision

    def scalar(v):
        if is_bool:
            return "True" if v else "False"
        if is_int:
            return str(int(v))
        if isinstance(v.item() if hasattr(v, "item") else v, complex):
            z = complex(v)
            return f"{z.real:g}{z.imag:+g}j"
        v = float(v)
        if precision is not None:
            return f"{v:.{precision}f}"
        return f"{v:g}"

    def block(x, depth):
        if x.ndim == 0:
            return scalar(x)
        n = x.shape[0]
        rows = list(range(n)) if n <= 6 else [0, 1, 2, None, n - 3, n - 2, n - 1]
        if x.ndim == 1:
            parts = ["..." if i is None else scalar(x[i]) for i in rows]
            return "[" + ", ".join(parts) + "]"
        parts = ["..." if i is None else block(x[i], depth + 1) for i in rows]
        return "[" + (",\n" + " " * (7 + depth)).join(parts) + "]"

    return f"array({block(value, 0)}, dtype={str(a.dtype).split('.')[-1]})"


_core._set_array_class(array)
