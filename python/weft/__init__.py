"""weft: a thread-safe lazy array framework with mlx.core's Python API.

    import weft as mx
    a = mx.array([1.0, 2.0, 3.0])
    print(mx.grad(lambda x: (x * x).sum())(a))

Every call may be made from any thread; waits release the GIL. See
docs/PYTHON.md for where weft differs from mlx.core.
"""
import atexit as _atexit
import enum as _enum
import itertools as _itertools
import math as _math
import operator as _operator
import threading as _threading
import weakref as _weakref

from . import _core
from ._core import (  # noqa: F401
    argpartition, argsort, bitwise_and, bitwise_invert, bitwise_or, bitwise_xor, conjugate,
    conv1d, conv2d, conv3d, conv_general, conv_transpose1d, conv_transpose2d, conv_transpose3d,
    block_masked_mm, gather_mm, masked_scatter, segmented_mm,
    cummax, cummin, imag, left_shift, logcumsumexp, partition, real, right_shift, searchsorted,
    sort, topk, view,
    to_fp8, from_fp8, dequantize, gather_qmm, quantize, quantized_matmul,
    Device, Dtype, Stream, custom_kernel, get_compile_wait_timeout, set_compile_wait_timeout, abs, add, addmm, all, any, arange, arccos, arcsin, arctan, arctan2,
    argmax, argmin, bfloat16, bool_, broadcast_to, ceil, clear_cache, clip, concatenate, cos,
    cosh, cumprod, cumsum, default_stream, divide, equal, erf, erfinv, exp, expand_dims, expm1,
    eye, flatten, float16, float32, float64, floor, floor_divide, full, get_active_memory,
    get_cache_memory, get_peak_memory, greater, greater_equal, identity, int32, int64, isfinite,
    isinf, isnan, less, less_equal, linspace, log, log1p, log2, logaddexp, logical_and,
    logical_not, logical_or, logsumexp, matmul, max, maximum, mean, min, minimum, moveaxis,
    multiply, negative, new_stream, not_equal, ones, ones_like, pad, power, prod, put_along_axis,
    reciprocal,
    remainder, repeat, reset_peak_memory, reshape, round, rsqrt, set_cache_limit, set_memory_limit,
    sigmoid,
    sign, sin, sinh, softmax, split, sqrt, square, squeeze, stack, std, stop_gradient,
    subtract, sum, swapaxes, synchronize, take, take_along_axis, tan, tanh, tile, transpose,
    tril, triu, uint8, unflatten, var, where, zeros, zeros_like,
)
from ._array import array  # noqa: F401  (registers itself as the result class)
from ._composed import _as_array
from ._compile import compile, disable_compile, enable_compile  # noqa: F401
from ._export import (  # noqa: F401
    FunctionExporter, export_function, export_to_dot, exporter, import_function,
)
from ._transforms import (  # noqa: F401
    checkpoint, custom_function, grad, jvp, value_and_grad, vjp, vmap,
)
from . import cuda, distributed, fast, fft, linalg, metal, random  # noqa: F401

__version__ = _core.__version__

# ---------------------------------------------------------------- dtypes


class DtypeCategory(_enum.Enum):
    """Kinds of dtypes, for issubdtype (mlx.core's categories)."""

    complexfloating = "complexfloating"
    floating = "floating"
    inexact = "inexact"
    signedinteger = "signedinteger"
    unsignedinteger = "unsignedinteger"
    integer = "integer"
    number = "number"
    generic = "generic"


complexfloating = DtypeCategory.complexfloating
floating = DtypeCategory.floating
inexact = DtypeCategory.inexact
signedinteger = DtypeCategory.signedinteger
unsignedinteger = DtypeCategory.unsignedinteger
integer = DtypeCategory.integer
number = DtypeCategory.number
generic = DtypeCategory.generic

_ALL_DTYPES = {name: getattr(_core, name) for name in dir(_core) if isinstance(getattr(_core, name), Dtype)}
globals().update(_ALL_DTYPES)

_PARENTS = {
    floating: inexact, complexfloating: inexact, inexact: number,
    signedinteger: integer, unsignedinteger: integer, integer: number, number: generic,
}


def _category_of(dtype):
    name = str(dtype).split(".")[-1]
    if name == "bool":
        return generic
    if name.startswith("complex"):
        return complexfloating
    if name.startswith("float") or name == "bfloat16":
        return floating
    if name.startswith("uint"):
        return unsignedinteger
    return signedinteger


def issubdtype(a, b):
    """True if dtype (or category) a is b or falls under category b."""
    if isinstance(a, Dtype) and isinstance(b, Dtype):
        return a == b
    if isinstance(b, Dtype):
        return False
    node = _category_of(a) if isinstance(a, Dtype) else a
    if isinstance(a, Dtype) and str(a).endswith("bool"):
        return b == generic
    while node is not None:
        if node == b:
            return True
        node = _PARENTS.get(node)
    return False


class finfo:
    """Machine limits of a float dtype."""

    _TABLE = {
        "float16": (5, 10, 6.103515625e-05),
        "bfloat16": (8, 7, 1.1754943508222875e-38),
        "float32": (8, 23, 1.1754943508222875e-38),
        "float64": (11, 52, 2.2250738585072014e-308),
    }

    def __init__(self, dtype):
        name = str(dtype).split(".")[-1]
        if name == "complex64":  # its real component's limits (array API, MLX)
            dtype, name = float32, "float32"
        if name not in self._TABLE:
            raise ValueError(f"finfo: {dtype} is not a floating point type")
        exp_bits, mant_bits, tiny = self._TABLE[name]
        self.dtype = dtype
        self.bits = 1 + exp_bits + mant_bits
        self.eps = 2.0 ** -mant_bits
        max_exp = 2 ** (exp_bits - 1)
        self.max = (2.0 - 2.0 ** -mant_bits) * 2.0 ** (max_exp - 1)
        self.min = -self.max
        self.tiny = self.smallest_normal = tiny

    def __repr__(self):
        return f"finfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class iinfo:
    """Limits of an integer dtype."""

    def __init__(self, dtype):
        name = str(dtype).split(".")[-1]
        if not name.startswith(("int", "uint")):
            raise ValueError(f"iinfo: {dtype} is not an integer type")
        bits = int(name.lstrip("uint"))
        self.dtype = dtype
        self.bits = bits
        if name.startswith("u"):
            self.min, self.max = 0, 2 ** bits - 1
        else:
            self.min, self.max = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# ---------------------------------------------------------------- constants

pi = _math.pi
e = _math.e
euler_gamma = 0.5772156649015329
inf = _math.inf
nan = _math.nan
newaxis = None

# ---------------------------------------------------------------- devices and streams


class DeviceType(_enum.IntEnum):
    cpu = 0
    gpu = 1


cpu = DeviceType.cpu
gpu = DeviceType.gpu


def default_device():
    """The default Device (weft computes on the CPU)."""
    return Device(cpu, 0)


def set_default_device(device):
    """Only the CPU exists; anything else is a ValueError."""
    if isinstance(device, DeviceType):
        device = Device(device, 0)
    if device != Device(cpu, 0):
        raise ValueError(f"weft has no device {device}")


def is_available(device):
    if isinstance(device, DeviceType):
        device = Device(device, 0)
    return device == Device(cpu, 0)


class stream:
    """with weft.stream(s_or_device): ops on this thread run on that stream."""

    def __init__(self, s):
        self._stream = s

    def __enter__(self):
        _core._push_stream(self._stream)
        return self

    def __exit__(self, *exc):
        _core._pop_stream()
        return False


StreamContext = stream

set_default_stream = _core.set_default_stream


def new_thread_unsafe_stream(device):
    """MLX's stream usable from any thread: every weft stream is, so this is
    new_stream(device)."""
    return new_stream(device)


class ThreadLocalStream:
    """A stream per thread (MLX's new_thread_local_stream): wherever a stream
    is taken (stream=, with weft.stream(...)), each thread gets its own,
    made on its first use and dropped when the thread ends or calls
    clear_streams(), so threads sharing this object never queue on one
    worker."""

    def __init__(self, device):
        if isinstance(device, DeviceType):
            device = Device(device, 0)
        if not is_available(device):
            raise ValueError(f"weft has no device {device}")
        self.device = device
        self._streams = _threading.local()
        with _thread_local_lock:
            self.index = next(_thread_local_numbers)
            _thread_local_streams.add(self)

    def _stream_of_this_thread(self):
        s = getattr(self._streams, "stream", None)
        if s is None:
            s = self._streams.stream = new_stream(self.device)
        return s

    def _drop_this_thread(self):
        self._streams.stream = None

    def __repr__(self):
        return f"ThreadLocalStream({self.device}, {self.index})"

    def __eq__(self, other):
        return isinstance(other, ThreadLocalStream) and self.index == other.index

    def __hash__(self):
        return hash(("ThreadLocalStream", self.index))


# Every ThreadLocalStream alive (for clear_streams) and the numbers they
# take, under one lock: threads make and clear them at once.
_thread_local_lock = _threading.Lock()
_thread_local_streams = _weakref.WeakSet()
_thread_local_numbers = _itertools.count()


def new_thread_local_stream(device):
    """A ThreadLocalStream on device: one stream per thread that uses it."""
    return ThreadLocalStream(device)


def clear_streams():
    """Drops the calling thread's streams of every ThreadLocalStream and its
    set_default_stream (back to the process-wide default), as MLX's
    clear_streams ends the thread's streams. Streams from new_stream are
    process-wide: they live while referenced."""
    with _thread_local_lock:
        alive = list(_thread_local_streams)
    for tls in alive:
        tls._drop_this_thread()
    _core.set_default_stream(None)


def set_wired_limit(limit):
    """MLX's limit on memory kept resident (wired) for Metal. weft wires
    nothing, so, like MLX built without a GPU, it changes nothing and
    returns the previous limit, 0."""
    if _operator.index(limit) < 0:  # MLX's size_t argument refuses it with a TypeError
        raise TypeError("set_wired_limit: the limit cannot be negative")
    return 0


# ---------------------------------------------------------------- evaluation


def _arrays_in(trees):
    """The arrays in the trees, in order. Arrays and flat lists of arrays
    (the common calls) are taken as they are: walking them as trees cost
    2.6 us of a 3.7 us `eval(matmul(a, b))` of small arrays."""
    arrays = []
    for x in trees:
        if isinstance(x, _core.array):
            arrays.append(x)
            continue
        if type(x) not in (list, tuple):
            break
        flat = [y for y in x if isinstance(y, _core.array)]
        if len(flat) != len(x):
            break
        arrays.extend(flat)
    else:
        return arrays
    from ._tree import flatten

    leaves, _ = flatten(list(trees))
    return [x for x in leaves if isinstance(x, _core.array)]


def eval(*args):
    """Evaluates the arrays in the given trees (GIL released while waiting)."""
    _core._eval(_arrays_in(args), False)


def async_eval(*args):
    """Schedules the arrays in the given trees and returns at once."""
    _core._eval(_arrays_in(args), True)


# ---------------------------------------------------------------- composed ops


def _real_composition(a, compute, stream):
    """compute(a) (a composition of ops) for a real a: in float32 for
    integers, bool and halves, the result of a half rounded to it once (with each
    op rounding in the half dtype, 15-50% of the results were an ulp off)."""
    half = a.dtype in (float16, bfloat16)
    if half or not issubdtype(a.dtype, floating):
        out = compute(a.astype(float32))
        return out.astype(a.dtype, stream=stream) if half else out
    return compute(a)


def log10(a, /, *, stream=None):
    a = _as_array(a)
    if a.dtype == complex64:
        return divide(log(a), _math.log(10.0), stream=stream)
    return _real_composition(a, lambda v: divide(log(v), _math.log(10.0), stream=stream), stream)


def _times_i(a, sign=1, stream=None):
    """i a (sign 1) or -i a (sign -1) for complex64 a, exactly: a
    multiplication by 1j loses the sign of a zero part, which picks the side
    of a branch cut."""
    if sign > 0:
        return _core._complex_from_parts(negative(imag(a)), real(a), stream=stream)
    return _core._complex_from_parts(imag(a), negative(real(a)), stream=stream)


def _large_argument(a):
    """Where |a| is so large that sqrt(a^2 + 1) is |a| to the dtype's
    precision (and a^2 may overflow): 1/sqrt(eps)."""
    return 1.0 / _math.sqrt(finfo(a.dtype).eps)


def _odd(a, f, stream):
    """f extended as an odd function from f(t), t >= 0, for an f with
    f(0) = 0 and f'(0) = 1."""
    below_zero = less(a, 0.0)
    t = where(below_zero, negative(a), a)
    ft = f(t)
    odd = where(below_zero, negative(ft), ft)
    # f(+-0) = +-0 exactly (the branch above gives +0 for -0); the
    # derivative at 0 is then 1, as it is for these f
    return where(equal(a, 0.0), a, odd, stream=stream)


def _arcsinh_real(a, stream):
    big = _large_argument(a)

    def for_nonnegative(t):
        # log1p(t + t^2 / (1 + sqrt(1 + t^2))): no cancellation for small t;
        # above `big`, log(t) + ln 2 (t^2 would overflow). Each branch sees
        # only arguments it is finite on, so that where's other branch
        # never puts inf * 0 into a gradient.
        large = greater(t, big)
        small_t = where(large, 0.0, t)
        t2 = square(small_t)
        near = log1p(add(small_t, divide(t2, add(1.0, sqrt(add(1.0, t2))))))
        far = add(log(where(large, t, big)), _math.log(2.0))
        return where(large, far, near)

    return _odd(a, for_nonnegative, stream)


def arcsinh(a, /, *, stream=None):
    a = _as_array(a)
    if a.dtype == complex64:  # -i arcsin(i a): log(a + sqrt(a^2 + 1)) lost digits near 0
        return _times_i(arcsin(_times_i(a)), -1, stream)
    return _real_composition(a, lambda v: _arcsinh_real(v, stream), stream)


def _arccosh_real(a, stream):
    big = _large_argument(a)
    large = greater(a, big)
    # log1p(d + sqrt(d) sqrt(d + 2)) with d = a - 1 (exact near 1): accurate
    # near a = 1, NaN for every a < 1 (sqrt(d (d + 2)) is not, below -1);
    # above `big`, log(a) + ln 2
    d = subtract(where(large, 1.0, a), 1.0)
    near = log1p(add(d, multiply(sqrt(d), sqrt(add(d, 2.0)))))
    far = add(log(where(large, a, big)), _math.log(2.0))
    return where(large, far, near, stream=stream)


def arccosh(a, /, *, stream=None):
    a = _as_array(a)
    if a.dtype == complex64:
        # log(a + sqrt(a + 1) sqrt(a - 1)), not sqrt(a^2 - 1): the principal
        # branch; +-1 added to the real part alone (adding 1 + 0j turns an
        # imaginary -0 into +0: the other side of the cut below -1). Where
        # |a| > 1/sqrt(eps), infinities included, log(2 a) instead, which the
        # product would turn into inf * 0 = NaN; each branch sees only
        # arguments it is finite on.
        big = _large_argument(a)
        large = greater(abs(a), big)
        near_a = where(large, 2.0 + 0j, a)

        def shifted(c):
            return _core._complex_from_parts(add(real(near_a), c), imag(near_a))
        near = log(add(near_a, multiply(sqrt(shifted(1.0)), sqrt(shifted(-1.0)))))
        log_a = log(where(large, a, big))
        far = _core._complex_from_parts(add(real(log_a), _math.log(2.0)), imag(log_a))
        return where(large, far, near, stream=stream)
    return _real_composition(a, lambda v: _arccosh_real(v, stream), stream)


def arctanh(a, /, *, stream=None):
    a = _as_array(a)
    if a.dtype == complex64:  # -i arctan(i a), as arcsinh
        return _times_i(arctan(_times_i(a)), -1, stream)
    # 0.5 log1p(2t / (1 - t)) for t = |a| >= 0: 1 - t is exact near t = 1,
    # where a < 0 in the formula would take log1p near -1 (cancellation)
    def compute(v):
        return _odd(v, lambda t: multiply(0.5, log1p(divide(multiply(2.0, t), subtract(1.0, t)))),
                    stream)
    return _real_composition(a, compute, stream)


def degrees(a, /, *, stream=None):
    return multiply(a, 180.0 / _math.pi, stream=stream)


def radians(a, /, *, stream=None):
    return multiply(a, _math.pi / 180.0, stream=stream)


def isposinf(a, /, *, stream=None):
    a = array(a) if not isinstance(a, _core.array) else a
    a = real(a) if a.dtype == complex64 else a  # complex: the real part (MLX)
    return logical_and(isinf(a), greater(a, 0), stream=stream)


def isneginf(a, /, *, stream=None):
    a = array(a) if not isinstance(a, _core.array) else a
    a = real(a) if a.dtype == complex64 else a
    return logical_and(isinf(a), less(a, 0), stream=stream)


def nan_to_num(a, nan=0.0, posinf=None, neginf=None, *, stream=None):
    a = array(a) if not isinstance(a, _core.array) else a
    if issubdtype(a.dtype, integer) or a.dtype == bool_:
        return a
    big = finfo(a.dtype).max
    out = where(isnan(a), nan, a)
    out = where(isposinf(out), big if posinf is None else posinf, out)
    return where(isneginf(out), -big if neginf is None else neginf, out, stream=stream)


def allclose(a, b, rtol=1e-05, atol=1e-08, *, equal_nan=False, stream=None):
    return all(isclose(a, b, rtol, atol, equal_nan=equal_nan), stream=stream)




def array_equal(a, b, equal_nan=False, *, stream=None):
    a = array(a) if not isinstance(a, _core.array) else a
    b = array(b) if not isinstance(b, _core.array) else b
    if a.shape != b.shape:
        return array(False)
    eq = equal(a, b)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a), isnan(b)))
    return all(eq, stream=stream)


def outer(a, b, *, stream=None):
    return multiply(reshape(a, [-1, 1]), reshape(b, [1, -1]), stream=stream)




def tensordot(a, b, axes=2, *, stream=None):
    from ._composed import _normal_axis

    a, b = _as_array(a), _as_array(b)
    if isinstance(axes, int):
        if not 0 <= axes <= _builtins.min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: {axes} axes for operands of rank {a.ndim} and {b.ndim}")
        axes_a = list(range(a.ndim - axes, a.ndim))
        axes_b = list(range(axes))
    else:
        axes_a, axes_b = [list(x) if not isinstance(x, int) else [x] for x in axes]
    axes_a = [_normal_axis(x, a.ndim, "tensordot") for x in axes_a]
    axes_b = [_normal_axis(x, b.ndim, "tensordot") for x in axes_b]
    if len(axes_a) != len(axes_b):
        raise ValueError(f"tensordot: {len(axes_a)} axes of a against {len(axes_b)} of b")
    free_a = [i for i in range(a.ndim) if i not in axes_a]
    free_b = [i for i in range(b.ndim) if i not in axes_b]
    k = 1
    for i in axes_a:
        k *= a.shape[i]
    at = reshape(transpose(a, free_a + axes_a), [-1, k])
    bt = reshape(transpose(b, axes_b + free_b), [k, -1])
    shape = [a.shape[i] for i in free_a] + [b.shape[i] for i in free_b]
    return reshape(matmul(at, bt), shape, stream=stream)








def atleast_1d(*arys):
    out = [reshape(x, [1]) if array(x).ndim == 0 else array(x) for x in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    out = []
    for x in arys:
        x = array(x) if not isinstance(x, _core.array) else x
        out.append(reshape(x, [1] * (2 - x.ndim) + list(x.shape)) if x.ndim < 2 else x)
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    out = []
    for x in arys:
        x = array(x) if not isinstance(x, _core.array) else x
        if x.ndim == 0:
            x = reshape(x, [1, 1, 1])
        elif x.ndim == 1:
            x = reshape(x, [1, x.shape[0], 1])
        elif x.ndim == 2:
            x = reshape(x, list(x.shape) + [1])
        out.append(x)
    return out[0] if len(out) == 1 else out




def broadcast_arrays(*arrays, stream=None):
    arrays = [_as_array(a) for a in arrays]
    shape = broadcast_shapes(*[a.shape for a in arrays])
    return [broadcast_to(a, shape, stream=stream) for a in arrays]


def broadcast_shapes(*shapes):
    if not shapes:
        raise ValueError("broadcast_shapes: needs at least one shape")
    ndim = builtins_max([len(s) for s in shapes]) if shapes else 0
    out = []
    for i in range(-ndim, 0):
        dims = {s[i] for s in shapes if len(s) >= -i and s[i] != 1}
        if len(dims) > 1:
            raise ValueError(f"shapes {shapes} cannot be broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


import builtins as _builtins  # noqa: E402

builtins_max = _builtins.max


def hstack(arrays, *, stream=None):
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1, stream=stream)


def vstack(arrays, *, stream=None):
    return concatenate([atleast_2d(a) for a in arrays], axis=0, stream=stream)


def dstack(arrays, *, stream=None):
    return concatenate([atleast_3d(a) for a in arrays], axis=2, stream=stream)


def einsum(subscripts, *operands, stream=None):
    """einsum over weft ops along a greedy contraction path, each pair
    contracted as one batched matmul (see einsum_path)."""
    from ._einsum import einsum as _einsum

    if stream is None:
        return _einsum(subscripts, *operands)
    with StreamContext(stream):
        return _einsum(subscripts, *operands)


def einsum_path(subscripts, *operands):
    """(path, report): the order in which einsum contracts the operands, as
    mlx.core.einsum_path and NumPy's greedy einsum_path."""
    from ._einsum import einsum_path as _einsum_path

    return _einsum_path(subscripts, *operands)


def from_dlpack(x, *, copy=None):
    """An array from any DLPack producer on the CPU (bfloat16 included).
    weft copies the data; copy=False, which forbids that, is a ValueError,
    and so is a tensor of a dtype weft has not (complex32, ...) or on
    another device, as in MLX."""
    if copy is False:
        raise ValueError("from_dlpack: copy=False is not supported (weft copies the data)")
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} is not a DLPack producer")
    return _core._from_dlpack(x)


def save_safetensors(file, arrays, metadata=None):
    """Writes a dict of arrays to a safetensors file (a path, ".safetensors"
    appended when it lacks it, or a file object). metadata: a {str: str}
    dict written as "__metadata__" (TypeError for anything else); None
    writes {"format": "weft"}."""
    if _is_file_object(file):
        return _through_temp_file(
            file, ".safetensors", lambda p: _core._save_safetensors(p, dict(arrays), metadata))
    path = str(file)
    if not path.endswith(".safetensors"):
        path += ".safetensors"
    _core._save_safetensors(path, dict(arrays), metadata)


def _is_file_object(file):
    return hasattr(file, "read") or hasattr(file, "write")


def _through_temp_file(file, suffix, write):
    """Runs write(path) on a temporary file and copies it into the file
    object `file` (the C writers take paths)."""
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=suffix)
    os.close(fd)
    try:
        write(path)
        with open(path, "rb") as f:
            file.write(f.read())
    finally:
        os.unlink(path)


def load(file, format=None, return_metadata=False, stream=None):
    """Reads a .safetensors, .npy, .npz or .gguf file (a path or a file
    object) into arrays (a dict, or one array for .npy). return_metadata:
    also the file's metadata (safetensors: its str values; GGUF: numbers as
    arrays, str, lists of str).
    A corrupt file raises ValueError. `stream` is accepted for mlx.core's
    signature (files load on the CPU)."""
    if _is_file_object(file):
        import os
        import tempfile

        name = getattr(file, "name", "")
        fmt = format or (str(name).rsplit(".", 1)[-1] if "." in str(name) else "npy")
        fd, path = tempfile.mkstemp(suffix="." + fmt)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(file.read())
            return load(path, fmt, return_metadata)
        finally:
            os.unlink(path)
    path = str(file)
    fmt = format or path.rsplit(".", 1)[-1]
    meta = {}
    if fmt == "safetensors":
        out = _core._load_safetensors(path, return_metadata)
        if return_metadata:
            out, meta = out
    elif fmt == "npy":
        out = _core._load_npy(path)
    elif fmt == "npz":
        out = _core._load_npz(path)
    elif fmt == "gguf":
        out, meta = _core._load_gguf(path)
    else:
        raise ValueError(f"load: unsupported format '{fmt}'")
    if return_metadata and fmt == "npy":
        raise ValueError("load: .npy files have no metadata")
    return (out, meta) if return_metadata else out


def save(file, arr):
    """Writes one array to a .npy file (".npy" appended to a path without it)
    or a file object."""
    if _is_file_object(file):
        return _through_temp_file(file, ".npy", lambda p: _core._save_npy(p, arr))
    path = str(file)
    if not path.endswith(".npy"):
        path += ".npy"
    _core._save_npy(path, arr)


def _npz_arrays(args, kwargs):
    arrays = {f"arr_{i}": a for i, a in enumerate(args)}
    for k, v in kwargs.items():
        if k in arrays:
            raise ValueError(f"savez: cannot use un-named variables and keyword {k}")
        arrays[k] = v
    return arrays


def _save_npz(file, arrays, compressed):
    if _is_file_object(file):
        return _through_temp_file(file, ".npz", lambda p: _core._save_npz(p, arrays, compressed))
    path = str(file)
    _core._save_npz(path if path.endswith(".npz") else path + ".npz", arrays, compressed)


def savez(file, *args, **kwargs):
    """Writes arrays to an uncompressed .npz archive (positional ones as arr_0, ...)."""
    _save_npz(file, _npz_arrays(args, kwargs), False)


def savez_compressed(file, *args, **kwargs):
    """Writes arrays to a deflated .npz archive."""
    _save_npz(file, _npz_arrays(args, kwargs), True)


def save_gguf(file, arrays, metadata=None):
    """Writes a dict of arrays (and metadata: str, list of str or arrays) to a GGUF file."""
    path = str(file)
    if not path.endswith(".gguf"):
        path += ".gguf"
    _core._save_gguf(path, dict(arrays), dict(metadata or {}))


def compile_stats(fun=None):
    """weft's compile counters: of one compiled function, or of the whole cache."""
    if fun is None:
        return _core._compile_stats(None)
    if not hasattr(fun, "_stats"):
        raise TypeError(f"compile_stats: {type(fun).__name__} is not a compiled function")
    return fun._stats()


from ._composed import (  # noqa: E402,F401
    arange, as_strided, convolve, depends, pad, asarray, bartlett, blackman, conj, count_nonzero, device_count, device_info, full_like, diag, diagonal, diff, divmod, empty, empty_like, flip,
    hadamard_transform, hamming, hanning, inner, isclose, kron, linspace, logical_xor, median, meshgrid,
    ones_like, roll, slice, slice_update, trace, tri, trunc, unstack, vecdot,
    zeros_like,
)
from ._qqmm import dequantize, qqmm, quantize  # noqa: E402,F401  (nvfp4 global_scale)


def result_type(*arrays_or_dtypes):
    """The dtype that combining the given arrays, dtypes and Python scalars
    yields (scalars are weak)."""
    if not arrays_or_dtypes:
        raise ValueError("result_type: needs at least one array or dtype")
    strong = [zeros([], x) if isinstance(x, Dtype) else x for x in arrays_or_dtypes
              if isinstance(x, (Dtype, _core.array))]
    weak = [x for x in arrays_or_dtypes if not isinstance(x, (Dtype, _core.array))]
    if not strong:
        return array(weak[0]).dtype
    out = zeros([], strong[0].dtype)
    for x in strong[1:] + weak:
        out = out + (zeros([], x.dtype) if isinstance(x, _core.array) else x)
    return out.dtype


def can_cast(from_, to):
    """True if from_ (a dtype or an array) converts to `to` without loss."""
    source = from_.dtype if isinstance(from_, _core.array) else from_
    return source == to or result_type(source, to) == to


_KINDS = {
    "bool": lambda d: d == bool_,
    "signed integer": lambda d: issubdtype(d, signedinteger),
    "unsigned integer": lambda d: issubdtype(d, unsignedinteger),
    "integral": lambda d: issubdtype(d, integer),
    "real floating": lambda d: issubdtype(d, floating),
    "complex floating": lambda d: issubdtype(d, complexfloating),
    "numeric": lambda d: d != bool_,
}


def isdtype(dtype, kind):
    """The array API's isdtype: kind a dtype, a kind name or a tuple of them."""
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, Dtype):
        return dtype == kind
    if kind not in _KINDS:
        raise ValueError(f"isdtype: unknown kind '{kind}'")
    return _KINDS[kind](dtype)


class _PrintOptions:
    precision = None


def _checked_precision(precision):
    """precision itself: None or a non-negative int (anything else used to
    be kept and broke every array's repr afterwards)."""
    if precision is None:
        return None
    if isinstance(precision, bool) or not isinstance(precision, int):
        raise TypeError(f"precision must be an int or None, not {type(precision).__name__}")
    if precision < 0:
        raise ValueError(f"precision must be non-negative, got {precision}")
    return precision


def set_printoptions(precision=None):
    """Digits after the point when arrays print (None: 6 significant)."""
    _PrintOptions.precision = _checked_precision(precision)


def get_printoptions():
    return {"precision": _PrintOptions.precision}


class printoptions:
    """with weft.printoptions(precision=4): arrays print with 4 digits."""

    def __init__(self, precision=None):
        self._precision = _checked_precision(precision)

    def __enter__(self):
        self._saved = _PrintOptions.precision
        _PrintOptions.precision = self._precision
        return self

    def __exit__(self, *exc):
        _PrintOptions.precision = self._saved
        return False


# ---------------------------------------------------------------- Array API names
# MLX's aliases and small functions from the Array API standard
# (https://data-apis.org/array-api/latest/): the same ops under other names.

acos = arccos
acosh = arccosh
asin = arcsin
asinh = arcsinh
atan = arctan
atanh = arctanh
atan2 = arctan2
pow = power  # noqa: A001 (the standard's name)
bitwise_left_shift = left_shift
bitwise_right_shift = right_shift
cumulative_sum = cumsum
cumulative_prod = cumprod
matrix_transpose = transpose  # as MLX: every axis reversed
matrix_norm = linalg.norm


def astype(a, dtype, /, *, stream=None):
    """a converted to dtype (a new array even when a has that dtype)."""
    return (a if isinstance(a, _core.array) else array(a)).astype(dtype, stream=stream)


def positive(a, /, *, stream=None):
    """Unary plus: a new array with a's values."""
    a = a if isinstance(a, _core.array) else array(a)
    return a.astype(a.dtype, stream=stream)


def permute_dims(a, /, axes=None, *, stream=None):
    """transpose under the standard's name."""
    return transpose(a, axes, stream=stream)


def concat(arrays, axis=0, *, stream=None):
    """concatenate under the standard's name (axis None: flattened first)."""
    return concatenate(arrays, axis, stream=stream)


def contiguous(a, /, allow_col_major=False, *, stream=None):
    """a's values as a new array. weft arrays have no layout a program can
    see (views are made row-major when read), so this is a copy of the
    values whatever allow_col_major says."""
    del allow_col_major
    return positive(a, stream=stream)


# Stops callbacks into Python before the interpreter tears down, and waits
# for those running (GIL released), so exit with work in flight is clean.
_atexit.register(_core._shutdown)
