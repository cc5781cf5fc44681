/*
 * streams.c - weft.Device and weft.Stream, pushing streams for `stream=`
 * arguments and `with weft.stream(...)`, and synchronize (GIL released).
 */
#include "weft_py.h"

typedef struct {
    PyObject_HEAD
    int kind; /* a weft.DeviceType value: 0 cpu, 1 gpu */
    int index;
} WeftDevice;

typedef struct {
    PyObject_HEAD
    wf_stream *handle; /* owned */
} WeftStream;

static PyTypeObject WeftDevice_Type;
static PyTypeObject WeftStream_Type;

/* ------------------------------------------------------------ Device */

static PyObject *device_make(int kind, int index)
{
    WeftDevice *self = PyObject_New(WeftDevice, &WeftDevice_Type);
    if (self == NULL)
        return NULL;
    self->kind = kind;
    self->index = index;
    return (PyObject *)self;
}

static PyObject *device_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    static char *names[] = {"type", "index", NULL};
    PyObject *kind_obj;
    int index = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|i:Device", names, &kind_obj, &index))
        return NULL;
    const long kind = PyLong_AsLong(kind_obj);
    if (kind == -1 && PyErr_Occurred())
        return NULL;
    if (kind != 0 && kind != 1) {
        PyErr_SetString(PyExc_ValueError, "Device: type must be weft.cpu or weft.gpu");
        return NULL;
    }
    return device_make((int)kind, index);
}

static PyObject *device_get_type(PyObject *self, void *closure)
{
    (void)closure;
    PyObject *package = PyImport_ImportModule("weft");
    if (package == NULL)
        return NULL;
    PyObject *enum_type = PyObject_GetAttrString(package, "DeviceType");
    Py_DECREF(package);
    if (enum_type == NULL)
        return NULL;
    PyObject *out = PyObject_CallFunction(enum_type, "i", ((WeftDevice *)self)->kind);
    Py_DECREF(enum_type);
    return out;
}

static PyObject *device_repr(PyObject *self)
{
    const WeftDevice *d = (const WeftDevice *)self;
    return PyUnicode_FromFormat("Device(%s, %d)", d->kind == 0 ? "cpu" : "gpu", d->index);
}

static PyObject *device_richcompare(PyObject *a, PyObject *b, int op)
{
    if (op != Py_EQ && op != Py_NE)
        Py_RETURN_NOTIMPLEMENTED;
    if (!PyObject_TypeCheck(a, &WeftDevice_Type)) {
        PyObject *swap = a;
        a = b;
        b = swap;
    }
    const WeftDevice *x = (const WeftDevice *)a;
    bool same;
    if (PyObject_TypeCheck(b, &WeftDevice_Type)) {
        const WeftDevice *y = (const WeftDevice *)b;
        same = x->kind == y->kind && x->index == y->index;
    } else if (PyLong_Check(b)) {
        /* a DeviceType (weft.cpu, an IntEnum) equals its kind's device, as in
         * MLX; an int beyond long equals none (and leaves no error pending) */
        int overflow = 0;
        const long kind = PyLong_AsLongAndOverflow(b, &overflow);
        if (kind == -1 && !overflow && PyErr_Occurred())
            return NULL;
        same = !overflow && kind == x->kind;
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t device_hash(PyObject *self)
{
    const WeftDevice *d = (const WeftDevice *)self;
    return d->kind * 1000003 + d->index + 1;
}

static PyGetSetDef device_getset[] = {
    {"type", device_get_type, NULL, "The DeviceType.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WeftDevice_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "weft.Device",
    .tp_basicsize = sizeof(WeftDevice),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Device(type, index=0): where arrays are computed (weft has the CPU).",
    .tp_repr = device_repr,
    .tp_hash = device_hash,
    .tp_richcompare = device_richcompare,
    .tp_getset = device_getset,
    .tp_new = device_new,
};

/* The weft device of a Device object; ValueError for a device weft lacks. */
static wf_device *device_handle(PyObject *obj)
{
    const WeftDevice *d = (const WeftDevice *)obj;
    if (d->kind != 0 || d->index != 0) {
        PyErr_Format(PyExc_ValueError, "weft has no device %s %d (only the CPU, index 0)",
                     d->kind == 0 ? "cpu" : "gpu", d->index);
        return NULL;
    }
    return wf_device_cpu();
}

/* ------------------------------------------------------------ Stream */

static PyObject *stream_wrap(wf_stream *handle)
{
    if (handle == NULL)
        return weftpy_raise_weft_error();
    WeftStream *self = PyObject_New(WeftStream, &WeftStream_Type);
    if (self == NULL) {
        wf_stream_release(handle);
        return NULL;
    }
    self->handle = handle;
    return (PyObject *)self;
}

static void stream_dealloc(PyObject *obj)
{
    /* The last reference joins the stream's worker, which may be running a
     * Python callback (a kernel, a payload destructor) that needs the GIL:
     * release it while the stream goes. */
    wf_stream *handle = ((WeftStream *)obj)->handle;
    Py_BEGIN_ALLOW_THREADS
    wf_stream_release(handle);
    Py_END_ALLOW_THREADS
    PyObject_Free(obj);
}

static PyObject *stream_repr(PyObject *self)
{
    return PyUnicode_FromFormat("Stream(Device(cpu, 0), %llu)",
                                (unsigned long long)wf_stream_id(((WeftStream *)self)->handle));
}

static PyObject *stream_get_device(PyObject *self, void *closure)
{
    (void)self;
    (void)closure;
    return device_make(0, 0);
}

static PyObject *stream_get_index(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(wf_stream_id(((WeftStream *)self)->handle));
}

static PyObject *stream_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &WeftStream_Type))
        Py_RETURN_NOTIMPLEMENTED;
    const bool same = wf_stream_id(((WeftStream *)a)->handle) ==
                      wf_stream_id(((WeftStream *)b)->handle);
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t stream_hash(PyObject *self)
{
    return (Py_hash_t)wf_stream_id(((WeftStream *)self)->handle);
}

static PyGetSetDef stream_getset[] = {
    {"device", stream_get_device, NULL, "The stream's Device.", NULL},
    {"index", stream_get_index, NULL, "The stream's id (never reused).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WeftStream_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "weft.Stream",
    .tp_basicsize = sizeof(WeftStream),
    .tp_dealloc = stream_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A FIFO of work with its own worker; any thread may use it.",
    .tp_repr = stream_repr,
    .tp_hash = stream_hash,
    .tp_richcompare = stream_richcompare,
    .tp_getset = stream_getset,
};

/* ------------------------------------------------------------ pushing */

static wf_stream *stream_of_arg(PyObject *obj);

/* Is obj an instance of weft.<name> (-1: a Python error)? */
static int is_weft_instance(PyObject *obj, const char *name)
{
    PyObject *package = PyImport_ImportModule("weft");
    PyObject *type = package != NULL ? PyObject_GetAttrString(package, name) : NULL;
    Py_XDECREF(package);
    if (type == NULL)
        return -1;
    const int is = PyObject_IsInstance(obj, type);
    Py_DECREF(type);
    return is;
}

/* The calling thread's stream of a ThreadLocalStream (weft/__init__.py
 * makes it on the thread's first use). */
static wf_stream *thread_local_stream_of(PyObject *obj)
{
    PyObject *stream = PyObject_CallMethod(obj, "_stream_of_this_thread", NULL);
    if (stream == NULL)
        return NULL;
    wf_stream *s = PyObject_TypeCheck(stream, &WeftStream_Type) ? stream_of_arg(stream) : NULL;
    if (s == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "ThreadLocalStream gave no Stream");
    Py_DECREF(stream);
    return s;
}

/* The weft stream an argument names (a new reference): a Stream, a
 * ThreadLocalStream's stream for this thread, or for a Device (or
 * DeviceType) the calling thread's default stream. */
static wf_stream *stream_of_arg(PyObject *obj)
{
    if (PyObject_TypeCheck(obj, &WeftStream_Type))
        return wf_stream_retain(((WeftStream *)obj)->handle);
    if (PyObject_TypeCheck(obj, &WeftDevice_Type)) {
        if (device_handle(obj) == NULL)
            return NULL;
        return wf_thread_default_stream();
    }
    const int is_thread_local = is_weft_instance(obj, "ThreadLocalStream");
    if (is_thread_local != 0)
        return is_thread_local > 0 ? thread_local_stream_of(obj) : NULL;
    /* A DeviceType (weft.cpu) stands for its device 0. */
    const int is_kind = is_weft_instance(obj, "DeviceType");
    if (is_kind <= 0) {
        if (is_kind == 0)
            PyErr_Format(PyExc_TypeError, "stream must be a Stream or a Device, not %s",
                         Py_TYPE(obj)->tp_name);
        return NULL;
    }
    const long kind = PyLong_AsLong(obj);
    if (kind != 0) {
        PyErr_SetString(PyExc_ValueError, "weft has no GPU device");
        return NULL;
    }
    return wf_thread_default_stream();
}

bool weftpy_push_stream_arg(PyObject *stream_arg, bool *pushed)
{
    *pushed = false;
    if (stream_arg == NULL || stream_arg == Py_None)
        return true;
    wf_stream *s = stream_of_arg(stream_arg);
    if (s == NULL)
        return false;
    const wf_status status = wf_stream_push(s);
    wf_stream_release(s); /* the thread holds its own reference while pushed */
    if (status != WF_OK) {
        weftpy_raise_weft_error();
        return false;
    }
    *pushed = true;
    return true;
}

void weftpy_pop_stream(bool pushed)
{
    if (pushed)
        (void)wf_stream_pop();
}

/* ------------------------------------------------------------ functions */

static PyObject *py_push_stream(PyObject *module, PyObject *arg)
{
    (void)module;
    bool pushed;
    if (!weftpy_push_stream_arg(arg, &pushed))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_pop_stream(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return weftpy_none_or_raise(wf_stream_pop());
}

static PyObject *py_new_stream(PyObject *module, PyObject *device)
{
    (void)module;
    if (!PyObject_TypeCheck(device, &WeftDevice_Type)) {
        wf_stream *check = stream_of_arg(device); /* accepts weft.cpu */
        if (check == NULL)
            return NULL;
        wf_stream_release(check);
        return stream_wrap(wf_stream_new());
    }
    wf_device *d = device_handle(device);
    return d != NULL ? stream_wrap(wf_stream_new_on(d)) : NULL;
}

static PyObject *py_default_stream(PyObject *module, PyObject *device)
{
    (void)module;
    wf_stream *s = stream_of_arg(device);
    return s != NULL ? stream_wrap(s) : NULL;
}

/* set_default_stream(stream): the calling thread's default from now on
 * (None: back to the process-wide default). The old default may lose its
 * last reference here, which joins its worker: the GIL is released for
 * that, as in stream_dealloc. */
static PyObject *py_set_default_stream(PyObject *module, PyObject *arg)
{
    (void)module;
    wf_stream *s = NULL;
    if (arg != Py_None && (s = stream_of_arg(arg)) == NULL)
        return NULL;
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = wf_stream_set_thread_default(s);
    wf_stream_release(s);
    Py_END_ALLOW_THREADS
    return weftpy_none_or_raise(status);
}

static PyObject *py_current_stream(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return stream_wrap(wf_current_stream());
}

/* synchronize(stream=None): waits with the GIL released. */
static PyObject *py_synchronize(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *arg = Py_None;
    if (!PyArg_ParseTuple(args, "|O:synchronize", &arg))
        return NULL;
    wf_stream *s = arg == Py_None ? wf_current_stream() : stream_of_arg(arg);
    if (s == NULL)
        return PyErr_Occurred() ? NULL : weftpy_raise_weft_error();
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = wf_stream_synchronize(s);
    wf_stream_release(s);
    Py_END_ALLOW_THREADS
    return weftpy_none_or_raise(status);
}

static PyObject *py_stream_count(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromSize_t(wf_stream_count());
}

static PyObject *py_array_device(PyObject *module, PyObject *array)
{
    (void)module;
    if (!WeftArray_Check(array)) {
        PyErr_SetString(PyExc_TypeError, "expected an array");
        return NULL;
    }
    return device_make(0, 0);
}

static PyMethodDef stream_methods[] = {
    {"_push_stream", py_push_stream, METH_O, "Makes a Stream or Device current on this thread."},
    {"_pop_stream", py_pop_stream, METH_NOARGS, "Undoes this thread's last _push_stream."},
    {"new_stream", py_new_stream, METH_O, "new_stream(device): a new stream with its own worker."},
    {"default_stream", py_default_stream, METH_O,
     "default_stream(device): this thread's default stream (set_default_stream's, else the "
     "process-wide one)."},
    {"set_default_stream", py_set_default_stream, METH_O,
     "set_default_stream(stream): this thread's default stream from now on (None: the "
     "process-wide one)."},
    {"_current_stream", py_current_stream, METH_NOARGS, "This thread's current stream."},
    {"synchronize", py_synchronize, METH_VARARGS,
     "synchronize(stream=None): waits for the work queued on the stream so far."},
    {"_stream_count", py_stream_count, METH_NOARGS, "Live streams in the process."},
    {"_array_device", py_array_device, METH_O, "The Device of an array."},
    {NULL, NULL, 0, NULL},
};

int weftpy_streams_init(PyObject *module)
{
    if (PyType_Ready(&WeftDevice_Type) < 0 || PyType_Ready(&WeftStream_Type) < 0)
        return -1;
    Py_INCREF(&WeftDevice_Type);
    if (PyModule_AddObject(module, "Device", (PyObject *)&WeftDevice_Type) < 0)
        return -1;
    Py_INCREF(&WeftStream_Type);
    if (PyModule_AddObject(module, "Stream", (PyObject *)&WeftStream_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, stream_methods);
}
