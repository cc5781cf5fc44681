"""DLPack import: array(x) for a producer without the buffer protocol (how
PyTorch and JAX tensors arrive, bfloat16 included) and from_dlpack(x) for
any producer. The producers here hide NumPy's (and weft's own) arrays
behind __dlpack__ alone, and hand-made capsules stand for what no library
here exports: another device, an unknown dtype, a newer major version, a
byte offset. NumPy is the reference."""
import ctypes

import numpy as np
import pytest

import weft as mx


class Producer:
    """Only __dlpack__ / __dlpack_device__ of the wrapped array."""

    def __init__(self, array, keywords=True):
        self.array = array
        self.keywords = keywords

    def __dlpack__(self, *args, **kwargs):
        if not self.keywords and kwargs:
            raise TypeError("__dlpack__() takes no keyword arguments")  # a pre-1.0 producer
        return self.array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


HOST = np.arange(24, dtype=np.float32).reshape(4, 6)
LAYOUTS = [
    HOST,
    HOST.T,
    HOST[::2, 1::3],
    HOST[::-1, ::-2],  # negative strides
    np.broadcast_to(HOST[0], (3, 6)),  # a zero stride
    HOST[1:2, :].reshape(6),
    np.float32(2.5) * np.ones(()),
    np.zeros((0, 5), np.float32),
]


@pytest.mark.parametrize("k", range(len(LAYOUTS)))
@pytest.mark.parametrize("keywords", [True, False])
def test_every_layout(k, keywords):
    want = np.asarray(LAYOUTS[k], np.float32)
    for make in (mx.array, mx.from_dlpack):
        if not keywords and not want.flags.writeable:
            # NumPy exports a read-only array only as DLPack 1.0, which
            # says so: a BufferError from the producer, a ValueError here
            with pytest.raises(ValueError, match="cannot export"):
                make(Producer(want, keywords))
            continue
        got = make(Producer(want, keywords))
        assert got.dtype == mx.float32 and got.shape == want.shape
        assert np.array_equal(np.array(got), want)


DTYPES = [
    (np.bool_, mx.bool_),
    (np.int8, mx.int8),
    (np.int16, mx.int16),
    (np.int32, mx.int32),
    (np.int64, mx.int64),
    (np.uint8, mx.uint8),
    (np.uint16, mx.uint16),
    (np.uint32, mx.uint32),
    (np.uint64, mx.uint64),
    (np.float16, mx.float16),
    (np.float32, mx.float32),
    (np.float64, mx.float32),  # MLX's rule for float64 without a dtype
    (np.complex64, mx.complex64),
    (np.complex128, mx.complex64),
]


@pytest.mark.parametrize("np_dtype, weft_dtype", DTYPES)
def test_every_dtype(np_dtype, weft_dtype):
    values = np.array([[0, 1, 5], [7, 3, 2]]).astype(np_dtype)[:, ::-1]
    for make in (mx.array, mx.from_dlpack):
        got = make(Producer(values))
        assert got.dtype == weft_dtype
        assert np.array_equal(np.array(got), values.astype(np.array(got).dtype))
    assert mx.array(Producer(values), mx.float64).dtype == mx.float64


def test_bfloat16_which_numpy_cannot_hold():
    source = mx.array([1.0, 2.5, -3.0, 1e30], mx.bfloat16)[::-1]
    for make in (mx.array, mx.from_dlpack):
        got = make(Producer(source))
        assert got.dtype == mx.bfloat16
        assert mx.array_equal(got, source).item()
    assert mx.array(Producer(source), mx.float32).tolist() == source.astype(mx.float32).tolist()


def test_ml_dtypes_bfloat16():
    """ml_dtypes' bfloat16 NumPy arrays (JAX's), whose buffer NumPy will not
    describe: read through their bits, any strides."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([[1.5, -2.0, 3.0e20], [0.0, -0.0, 7.0]], dtype=ml_dtypes.bfloat16)
    for view in (values, values.T, values[:, ::-2], values[1, 2]):
        got = mx.array(view)
        assert got.dtype == mx.bfloat16 and got.shape == view.shape
        assert np.array_equal(np.array(got.astype(mx.float32)), view.astype(np.float32))
    assert mx.array(values, mx.float32).tolist() == values.astype(np.float32).tolist()
    assert mx.asarray(values).dtype == mx.bfloat16
    with pytest.raises(ValueError):  # NumPy's own refusal for other custom dtypes stays
        mx.array(np.zeros(2, dtype=ml_dtypes.float8_e4m3fn))


def test_refusals():
    with pytest.raises(ValueError, match="from_dlpack"):
        mx.from_dlpack(np.array(["a", "b"]))  # the producer refuses (BufferError)
    with pytest.raises(ValueError):
        mx.from_dlpack(Producer(HOST), copy=False)
    with pytest.raises(TypeError):
        mx.from_dlpack(3.5)

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 7

    with pytest.raises(ValueError, match="capsule"):
        mx.from_dlpack(NotACapsule())
    assert mx.array([1, 2]).sum().item() == 3  # still usable


# ---------------------------------------------------------------- hand-made capsules


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("tensor", DLTensor),
    ]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class HandMade:
    """A versioned capsule over `data` (a NumPy array kept alive here), with
    any field overridden; no deleter (the capsule owns nothing)."""

    def __init__(self, data, shape, strides=None, code=2, bits=32, lanes=1, device=1,
                 major=1, byte_offset=0, no_shape=False, no_data=False):
        self.data = data
        self.shape = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        self.strides = (ctypes.c_int64 * max(1, len(shape)))(*strides) if strides else None
        self.managed = DLManagedTensorVersioned()
        self.managed.major, self.managed.minor = major, 0
        t = self.managed.tensor
        t.data = None if no_data else data.ctypes.data
        t.device = DLDevice(device, 0)
        t.ndim = len(shape)
        t.dtype = DLDataType(code, bits, lanes)
        t.shape = None if no_shape else self.shape
        t.strides = self.strides
        t.byte_offset = byte_offset

    def __dlpack__(self, **kwargs):
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor_versioned", None)


def test_hand_made_layouts():
    data = np.arange(12, dtype=np.float32)
    got = mx.from_dlpack(HandMade(data, (2, 3), byte_offset=8))  # from element 2
    assert got.tolist() == [[2, 3, 4], [5, 6, 7]]
    got = mx.from_dlpack(HandMade(data, (3, 2), strides=(1, 3)))  # column-major, no copy asked
    assert got.tolist() == data[:6].reshape(2, 3).T.tolist()
    got = mx.from_dlpack(HandMade(data, (0, 4)))
    assert got.shape == (0, 4)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"device": 2}, "device type 2"),  # CUDA
        ({"code": 5, "bits": 32}, "unsupported dtype"),  # complex32
        ({"code": 2, "bits": 8}, "unsupported dtype"),  # an fp8 as plain float
        ({"code": 3, "bits": 64}, "unsupported dtype"),  # an opaque handle
        ({"lanes": 4}, "unsupported dtype"),
        ({"major": 2}, "version 2.0"),
        ({"shape": (-1, 3)}, "shape is invalid"),
        ({"shape": (1 << 40, 1 << 40)}, "shape is invalid"),
        ({"shape": (1,) * 33}, "dimensions"),
        ({"strides": (1 << 62, 1)}, "strides are invalid"),
        ({"no_shape": True}, "no shape"),  # a broken producer: no crash
        ({"no_data": True}, "no data"),
    ],
)
def test_hand_made_refusals(fields, message):
    data = np.zeros(8, np.float32)
    shape = fields.pop("shape", (2, 4))
    with pytest.raises(ValueError, match=message):
        mx.from_dlpack(HandMade(data, shape, **fields))
    with pytest.raises(ValueError, match=message):
        mx.array(HandMade(data, shape, **fields))
    assert mx.array([1, 2]).sum().item() == 3
