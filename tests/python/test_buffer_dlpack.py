"""The buffer protocol and DLPack export: a strided view's real strides (no
copy), every dtype, lifetimes (the exported memory outlives the Python array
and an in-place operator), read-only flags; NumPy is the reference."""
import gc
import threading

import numpy as np
import pytest

import weft as mx

BASE = np.arange(48, dtype=np.float32).reshape(6, 8)


def views():
    x = mx.array(BASE)
    return [
        (x.T[::2, 1:], BASE.T[::2, 1:]),
        (x[::-1, ::-3], BASE[::-1, ::-3]),
        (mx.broadcast_to(mx.array(BASE[0]), (3, 8)), np.broadcast_to(BASE[0], (3, 8))),
        (mx.swapaxes(x.reshape(2, 3, 8), 0, 2), np.swapaxes(BASE.reshape(2, 3, 8), 0, 2)),
        (x[2], BASE[2]),
    ]


@pytest.mark.parametrize("k", range(5))
def test_buffer_exports_real_strides(k):
    view, want = views()[k]
    m = memoryview(view)
    assert m.readonly
    assert m.shape == want.shape and m.strides == want.strides
    got = np.asarray(view)
    assert got.strides == want.strides and np.array_equal(got, want)
    # a consumer that needs contiguous data gets the row-major copy
    assert memoryview(view).tobytes() == np.ascontiguousarray(want).tobytes()
    assert np.array_equal(np.array(view), want)


@pytest.mark.parametrize("k", range(5))
def test_dlpack_exports_real_strides_read_only(k):
    view, want = views()[k]
    assert view.__dlpack_device__() == (1, 0)
    got = np.from_dlpack(view)
    assert got.strides == want.strides and np.array_equal(got, want)
    assert not got.flags.writeable
    copied = np.from_dlpack(view, copy=True)
    assert np.array_equal(copied, want)


@pytest.mark.parametrize("dtype", ["bool_", "uint8", "uint16", "uint32", "uint64", "int8",
                                   "int16", "int32", "int64", "float16", "float32", "float64",
                                   "complex64"])
def test_every_dtype_through_dlpack_and_buffer(dtype):
    ref = (np.arange(12).reshape(3, 4) % 5).astype(getattr(np, dtype.rstrip("_")))
    if dtype == "complex64":
        ref = ref + 1j * ref[::-1]
    a = mx.array(ref)[:, ::2]
    assert np.array_equal(np.from_dlpack(a), ref[:, ::2])
    assert np.array_equal(np.asarray(a), ref[:, ::2])


def test_bfloat16_dlpack_capsule():
    a = mx.array([1.0, 2.0]).astype(mx.bfloat16)
    capsule = a.__dlpack__()
    assert "dltensor" in repr(capsule)


def test_exported_memory_outlives_the_array():
    y = mx.arange(1000, dtype=mx.float32) * 2
    d = np.from_dlpack(y)
    b = np.asarray(y[::2])
    del y
    gc.collect()
    assert d[-1] == 1998 and b[-1] == 1996
    z = mx.arange(10, dtype=mx.float32)
    held = np.asarray(z)
    held_dl = np.from_dlpack(z)
    z += 1  # replaces the handle; the exported memory stays the old value
    gc.collect()
    assert np.array_equal(held, np.arange(10)) and np.array_equal(held_dl, np.arange(10))
    assert np.array_equal(np.array(z), np.arange(10) + 1)


def test_unconsumed_capsules_and_a_deleter_on_another_thread():
    for _ in range(100):
        mx.arange(64).__dlpack__()  # never consumed: the capsule deletes it
    arrays = [np.from_dlpack(mx.arange(256) + i) for i in range(8)]
    t = threading.Thread(target=arrays.clear)  # the deleters run on that thread
    t.start()
    t.join()
    gc.collect()


def test_legacy_consumer_gets_the_unversioned_capsule():
    capsule = mx.arange(3).__dlpack__()
    assert "dltensor" in repr(capsule) and "versioned" not in repr(capsule)
    capsule = mx.arange(3).__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    with pytest.raises(BufferError):
        mx.arange(3).__dlpack__(dl_device=(2, 0))
