/* DLPack export and import.
 *
 * Export: _dlpack(a, versioned, copied) behind array.__dlpack__ (a
 * "dltensor_versioned" capsule flagged read-only for DLPack 1.0 consumers
 * such as NumPy 2, else the unversioned "dltensor" one; np.from_dlpack,
 * PyTorch, JAX ... take both) and the device tuple behind
 * __dlpack_device__.
 *
 * The tensor is the array's memory in place with its real strides (no
 * copy; evaluated first with the GIL released). Its manager holds a weft
 * reference to the array (not the Python object), so the deleter, which a
 * consumer may call from any thread with or without the GIL, touches no
 * Python object: it drops that reference (which never waits) and frees
 * plain C memory.
 *
 * Import: weftpy_array_from_dlpack (behind array(x) for producers without
 * the buffer protocol, and from_dlpack) asks the producer for a capsule,
 * copies the tensor and lets the capsule go unconsumed: its destructor,
 * the producer's, then calls the deleter, as DLPack specifies for a
 * capsule whose name was left alone.
 *
 * The structs are DLPack's ABI (1.0 and the older unversioned one),
 * written here from the specification. */
#include <stdlib.h>

#include "weft_py.h"

typedef struct {
    int32_t device_type; /* 1: kDLCPU */
    int32_t device_id;
} dl_device;

typedef struct {
    uint8_t code; /* 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool */
    uint8_t bits;
    uint16_t lanes;
} dl_dtype;

typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* elements */
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed_tensor {
    dl_tensor tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed_tensor *self);
} dl_managed_tensor;

typedef struct dl_managed_tensor_versioned {
    struct {
        uint32_t major, minor;
    } version;
    void *manager_ctx;
    void (*deleter)(struct dl_managed_tensor_versioned *self);
    uint64_t flags; /* bit 0: read-only; bit 1: a copy */
    dl_tensor tensor;
} dl_managed_tensor_versioned;

enum { DL_CPU = 1, DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_COMPLEX = 5,
       DL_BOOL = 6 };

/* The managed tensor (of either form) and what it points into, in one
 * allocation. */
typedef struct export {
    dl_managed_tensor managed;
    dl_managed_tensor_versioned versioned;
    wf_array *array;
    int64_t dims[2 * WF_MAX_NDIM]; /* shape, then strides */
} export;

static void export_free(export *e)
{
    wf_release(e->array); /* no Python involved: any thread, GIL or not */
    free(e);
}
static void export_delete(dl_managed_tensor *managed) { export_free(managed->manager_ctx); }
static void export_delete_versioned(dl_managed_tensor_versioned *managed)
{
    export_free(managed->manager_ctx);
}

/* The capsules' destructors: a capsule still under its first name was
 * never consumed, so its tensor is ours to delete (a consumer renames it to
 * "used_dltensor..." and deletes it itself). */
static void capsule_delete(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        dl_managed_tensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
        managed->deleter(managed);
    }
}
static void capsule_delete_versioned(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        dl_managed_tensor_versioned *managed =
            PyCapsule_GetPointer(capsule, "dltensor_versioned");
        managed->deleter(managed);
    }
}

static bool dl_dtype_of(wf_dtype d, dl_dtype *out)
{
    out->lanes = 1;
    out->bits = (uint8_t)(8 * wf_dtype_size(d));
    switch (d) {
    case WF_DTYPE_BOOL: out->code = DL_BOOL; return true;
    case WF_DTYPE_U8:
    case WF_DTYPE_U16:
    case WF_DTYPE_U32:
    case WF_DTYPE_U64: out->code = DL_UINT; return true;
    case WF_DTYPE_I8:
    case WF_DTYPE_I16:
    case WF_DTYPE_I32:
    case WF_DTYPE_I64: out->code = DL_INT; return true;
    case WF_DTYPE_F16:
    case WF_DTYPE_F32:
    case WF_DTYPE_F64: out->code = DL_FLOAT; return true;
    case WF_DTYPE_BF16: out->code = DL_BFLOAT; return true;
    case WF_DTYPE_C64: out->code = DL_COMPLEX; return true;
    default: return false;
    }
}

/* _dlpack(a, versioned, copied): the capsule of a's tensor. */
static PyObject *py_dlpack(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *arg;
    int versioned, copied;
    if (!PyArg_ParseTuple(args, "O!pp:_dlpack", &WeftArray_Type, &arg, &versioned, &copied))
        return NULL;
    dl_dtype dtype;
    wf_array *a = ((WeftArray *)arg)->handle;
    if (!dl_dtype_of(wf_array_dtype(a), &dtype)) {
        PyErr_Format(PyExc_BufferError, "dtype %s has no DLPack code",
                     wf_dtype_name(wf_array_dtype(a)));
        return NULL;
    }
    export *e = calloc(1, sizeof *e);
    if (e == NULL)
        return PyErr_NoMemory();
    const int ndim = wf_array_ndim(a);
    const void *data;
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = wf_array_data_strided(a, &data, e->dims + WF_MAX_NDIM);
    Py_END_ALLOW_THREADS
    if (status != WF_OK) {
        free(e);
        return weftpy_raise_weft_error();
    }
    const int64_t *shape = wf_array_shape(a);
    for (int d = 0; d < ndim; d++)
        e->dims[d] = shape[d];
    e->array = wf_retain_unscoped(a);
    const dl_tensor tensor = {.data = (void *)data,
                              .device = {DL_CPU, 0},
                              .ndim = ndim,
                              .dtype = dtype,
                              .shape = e->dims,
                              .strides = e->dims + WF_MAX_NDIM,
                              .byte_offset = 0};
    PyObject *capsule;
    if (versioned) {
        e->versioned.version.major = 1;
        e->versioned.version.minor = 0;
        e->versioned.manager_ctx = e;
        e->versioned.deleter = export_delete_versioned;
        e->versioned.flags = copied ? 2u : 1u; /* weft's own memory is read-only */
        e->versioned.tensor = tensor;
        capsule = PyCapsule_New(&e->versioned, "dltensor_versioned", capsule_delete_versioned);
    } else {
        e->managed.tensor = tensor;
        e->managed.manager_ctx = e;
        e->managed.deleter = export_delete;
        capsule = PyCapsule_New(&e->managed, "dltensor", capsule_delete);
    }
    if (capsule == NULL)
        export_free(e);
    return capsule;
}

/* _dlpack_device(a): (kDLCPU, 0), weft's only device. */
static PyObject *py_dlpack_device(PyObject *module, PyObject *arg)
{
    (void)module;
    (void)arg;
    return Py_BuildValue("(ii)", DL_CPU, 0);
}

/* ---------------------------------------------------------------- import */

/* weft's dtype of a DLPack one: WF_DTYPE_COUNT for none; complex128 is
 * float64 with *complex128 set. */
static wf_dtype dtype_of_dl(dl_dtype t, bool *complex128)
{
    *complex128 = false;
    if (t.lanes != 1)
        return WF_DTYPE_COUNT;
    const wf_dtype ints[4] = {WF_DTYPE_I8, WF_DTYPE_I16, WF_DTYPE_I32, WF_DTYPE_I64};
    const wf_dtype uints[4] = {WF_DTYPE_U8, WF_DTYPE_U16, WF_DTYPE_U32, WF_DTYPE_U64};
    const int log_bytes = t.bits == 8 ? 0 : t.bits == 16 ? 1 : t.bits == 32 ? 2 : t.bits == 64 ? 3
                                                                                            : -1;
    switch (t.code) {
    case DL_INT: return log_bytes >= 0 ? ints[log_bytes] : WF_DTYPE_COUNT;
    case DL_UINT: return log_bytes >= 0 ? uints[log_bytes] : WF_DTYPE_COUNT;
    case DL_FLOAT:
        return t.bits == 16   ? WF_DTYPE_F16
               : t.bits == 32 ? WF_DTYPE_F32
               : t.bits == 64 ? WF_DTYPE_F64
                              : WF_DTYPE_COUNT;
    case DL_BFLOAT: return t.bits == 16 ? WF_DTYPE_BF16 : WF_DTYPE_COUNT;
    case DL_COMPLEX:
        *complex128 = t.bits == 128;
        return t.bits == 64 ? WF_DTYPE_C64 : t.bits == 128 ? WF_DTYPE_F64 : WF_DTYPE_COUNT;
    case DL_BOOL: return t.bits == 8 ? WF_DTYPE_BOOL : WF_DTYPE_COUNT;
    default: return WF_DTYPE_COUNT;
    }
}

/* obj.__dlpack__(max_version=(1, 0)), or obj.__dlpack__() for a producer
 * older than the keyword. */
static PyObject *capsule_of(PyObject *obj)
{
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    if (method == NULL)
        return NULL;
    PyObject *args = PyTuple_New(0);
    PyObject *kwargs = Py_BuildValue("{s(ii)}", "max_version", 1, 0);
    PyObject *capsule = args && kwargs ? PyObject_Call(method, args, kwargs) : NULL;
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        capsule = PyObject_CallNoArgs(method);
    }
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_DECREF(method);
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_BufferError)) {
        /* the producer cannot export it (NumPy: strings, or a read-only
         * array asked the pre-1.0 way): ValueError, as in MLX */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_Format(PyExc_ValueError, "from_dlpack: the producer cannot export it: %S", value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    }
    return capsule;
}

/* The tensor in a producer's capsule; NULL with ValueError for a capsule
 * of another kind or a newer major version. */
static const dl_tensor *tensor_of(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        const dl_managed_tensor_versioned *m =
            PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m->version.major != 1) {
            PyErr_Format(PyExc_ValueError, "from_dlpack: DLPack version %u.%u is not supported",
                         m->version.major, m->version.minor);
            return NULL;
        }
        return &m->tensor;
    }
    if (PyCapsule_IsValid(capsule, "dltensor"))
        return &((const dl_managed_tensor *)PyCapsule_GetPointer(capsule, "dltensor"))->tensor;
    PyErr_SetString(PyExc_ValueError,
                    "from_dlpack: __dlpack__ did not return an unused DLPack capsule");
    return NULL;
}

/* The copy of a checked tensor (see weftpy_array_from_dlpack). */
static wf_array *copy_tensor(const dl_tensor *t, wf_dtype dtype)
{
    bool complex128;
    const wf_dtype source = dtype_of_dl(t->dtype, &complex128);
    if (t->device.device_type != DL_CPU) {
        PyErr_Format(PyExc_ValueError, "from_dlpack: the tensor is on device type %d, not the CPU",
                     (int)t->device.device_type);
        return NULL;
    }
    if (source == WF_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError,
                     "from_dlpack: unsupported dtype (DLPack code %u, %u bits, %u lanes)",
                     t->dtype.code, t->dtype.bits, t->dtype.lanes);
        return NULL;
    }
    if (t->ndim < 0 || t->ndim > WF_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "from_dlpack: %d dimensions (at most %d)", (int)t->ndim,
                     WF_MAX_NDIM);
        return NULL;
    }
    if (t->ndim > 0 && t->shape == NULL) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: the tensor has no shape");
        return NULL;
    }
    const Py_ssize_t itemsize = complex128 ? 16 : (Py_ssize_t)wf_dtype_size(source);
    Py_ssize_t shape[WF_MAX_NDIM], strides[WF_MAX_NDIM];
    int64_t count = 1; /* below 2^59: count * 16 bytes fits */
    bool row_major = true;
    for (int d = t->ndim - 1; d >= 0; d--) {
        shape[d] = (Py_ssize_t)t->shape[d];
        if (t->shape[d] < 0 || (count > 0 && t->shape[d] > ((int64_t)1 << 59) / count)) {
            PyErr_SetString(PyExc_ValueError, "from_dlpack: the tensor's shape is invalid");
            return NULL;
        }
        const int64_t stride_limit = (int64_t)1 << 58; /* times 16 bytes, no overflow */
        if (t->strides && (t->strides[d] > stride_limit || t->strides[d] < -stride_limit)) {
            PyErr_SetString(PyExc_ValueError, "from_dlpack: the tensor's strides are invalid");
            return NULL;
        }
        /* row-major strides, in bytes, where the producer gave none */
        strides[d] = t->strides ? (Py_ssize_t)t->strides[d] * itemsize : count * itemsize;
        row_major = row_major && (t->shape[d] == 1 || strides[d] == count * itemsize);
        count *= shape[d];
    }
    if (count > 0 && t->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: the tensor has no data");
        return NULL;
    }
    const char *data = (const char *)t->data + t->byte_offset;
    return weftpy_array_from_host(data, shape, row_major || count == 0 ? NULL : strides, t->ndim,
                                  itemsize, source, complex128, dtype);
}

wf_array *weftpy_array_from_dlpack(PyObject *obj, wf_dtype dtype)
{
    PyObject *capsule = capsule_of(obj);
    if (capsule == NULL)
        return NULL;
    const dl_tensor *t = tensor_of(capsule);
    wf_array *out = t ? copy_tensor(t, dtype) : NULL;
    Py_DECREF(capsule); /* unconsumed: the producer's destructor deletes the tensor */
    return out;
}

/* _from_dlpack(x): a copy of x's DLPack tensor, its dtype kept (as MLX's
 * from_dlpack: float64 becomes float32 here too, complex128 complex64). */
static PyObject *py_from_dlpack(PyObject *module, PyObject *arg)
{
    (void)module;
    wf_array *a = weftpy_array_from_dlpack(arg, WF_DTYPE_COUNT);
    return a ? weftpy_array_wrap(a) : NULL; /* NULL: the exception is set */
}

static PyMethodDef dlpack_methods[] = {
    {"_dlpack", py_dlpack, METH_VARARGS,
     "_dlpack(a, versioned, copied): a DLPack capsule of a's memory (no copy)"},
    {"_dlpack_device", py_dlpack_device, METH_O, "_dlpack_device(a): (1, 0), the CPU"},
    {"_from_dlpack", py_from_dlpack, METH_O,
     "_from_dlpack(x): a copy of the tensor of x's __dlpack__ (the CPU, any layout)"},
    {NULL, NULL, 0, NULL},
};

int weftpy_dlpack_init(PyObject *module) { return PyModule_AddFunctions(module, dlpack_methods); }
