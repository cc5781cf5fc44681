/*
 * module.c - the weft._core module: errors, the callback guard, argument
 * parsing, and the module's initialisation.
 */
#include "weft_py.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ errors */

/* The exception a Python callback raised on this thread, with the weft
 * message it was recorded under, so that weftpy_raise_weft_error re-raises it
 * only for the error it caused (a later, unrelated error drops it). */
static _Thread_local PyObject *saved_exception;
static _Thread_local char saved_message[512];

static void drop_saved_exception(void)
{
    Py_CLEAR(saved_exception);
    saved_message[0] = '\0';
}

wf_status weftpy_callback_failed(void)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value == NULL) { /* cannot happen after a raise; keep weft's error honest */
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        return wf_set_error(WF_ERR_KERNEL, "a Python callback failed without an exception");
    }
    if (traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    const char *type_name = Py_TYPE(value)->tp_name;
    PyObject *text = PyObject_Str(value);
    const char *utf8 = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    if (utf8 == NULL) {
        PyErr_Clear();
        utf8 = "";
    }
    drop_saved_exception();
    snprintf(saved_message, sizeof saved_message, "Python callback raised %s: %s", type_name,
             utf8);
    Py_XDECREF(text);
    saved_exception = value; /* the reference moves here */
    return wf_set_error(WF_ERR_KERNEL, "%s", saved_message);
}

wf_status weftpy_callback_failed_here(void)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    const char *utf8 = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    if (utf8 == NULL) {
        PyErr_Clear();
        utf8 = "";
    }
    const wf_status status =
        wf_set_error(WF_ERR_KERNEL, "Python kernel raised %s: %s",
                     value != NULL ? Py_TYPE(value)->tp_name : "an exception", utf8);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return status;
}

static PyObject *exception_for_status(wf_status status)
{
    switch (status) {
    case WF_ERR_INVALID_ARGUMENT:
    case WF_ERR_SHAPE:
    case WF_ERR_DTYPE:
    case WF_ERR_AXIS:
    case WF_ERR_OVERFLOW:
        return PyExc_ValueError;
    case WF_ERR_NULL_ARGUMENT:
        return PyExc_TypeError;
    case WF_ERR_OUT_OF_MEMORY:
        return PyExc_MemoryError;
    case WF_ERR_UNSUPPORTED:
        return PyExc_NotImplementedError;
    case WF_ERR_IO:
        return PyExc_OSError;
    default:
        return PyExc_RuntimeError;
    }
}

PyObject *weftpy_raise_weft_error(void)
{
    const wf_status status = wf_last_error();
    const char *message = wf_last_error_message();
    if (saved_exception != NULL && saved_message[0] != '\0' &&
        strstr(message, saved_message) != NULL) {
        PyObject *value = saved_exception;
        saved_exception = NULL;
        saved_message[0] = '\0';
        PyErr_SetObject((PyObject *)Py_TYPE(value), value);
        Py_DECREF(value);
        return NULL;
    }
    drop_saved_exception();
    if (status == WF_OK)
        PyErr_SetString(PyExc_RuntimeError, "weft reported a failure without an error");
    else
        PyErr_SetString(exception_for_status(status),
                        message[0] != '\0' ? message : wf_status_name(status));
    return NULL;
}

PyObject *weftpy_none_or_raise(wf_status status)
{
    if (status != WF_OK)
        return weftpy_raise_weft_error();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ callback guard */

/* Set by weft._core._shutdown (the package registers it with atexit): from
 * then on callbacks do nothing that needs Python. callbacks_in_flight counts
 * callbacks between the check and their end, so shutdown can wait for them. */
static atomic_bool finalizing;
static atomic_long callbacks_in_flight;

/* Python 3.13 made the check public (and dropped the underscored one). */
#if PY_VERSION_HEX >= 0x030D0000
#define interpreter_finalizing() Py_IsFinalizing()
#else
#define interpreter_finalizing() _Py_IsFinalizing()
#endif

bool weftpy_finalizing(void)
{
    return atomic_load(&finalizing) || interpreter_finalizing();
}

bool weftpy_callback_enter(PyGILState_STATE *state)
{
    atomic_fetch_add(&callbacks_in_flight, 1);
    if (weftpy_finalizing()) {
        atomic_fetch_sub(&callbacks_in_flight, 1);
        wf_set_error(WF_ERR_MISUSE, "a Python callback was called while the interpreter "
                                    "is finalizing");
        return false;
    }
    *state = PyGILState_Ensure();
    return true;
}

void weftpy_callback_leave(PyGILState_STATE state)
{
    PyGILState_Release(state);
    atomic_fetch_sub(&callbacks_in_flight, 1);
}

void weftpy_decref_from_any_thread(PyObject *obj)
{
    if (obj == NULL)
        return;
    PyGILState_STATE state;
    if (!weftpy_callback_enter(&state)) {
        wf_clear_error();
        return; /* the interpreter is going away: leak rather than touch it */
    }
    Py_DECREF(obj);
    weftpy_callback_leave(state);
}

/* _shutdown(): stops callbacks into Python and waits (GIL released, at most
 * 10 s) for those already running, then for the default stream's work. */
static PyObject *module_shutdown(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    atomic_store(&finalizing, true);
    Py_BEGIN_ALLOW_THREADS
    const struct timespec pause = {0, 1000000};
    for (int i = 0; i < 10000 && atomic_load(&callbacks_in_flight) > 0; i++)
        nanosleep(&pause, NULL);
    wf_stream *stream = wf_default_stream();
    if (stream != NULL) {
        (void)wf_stream_synchronize(stream);
        wf_stream_release(stream);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ arguments */

bool weftpy_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, const char *const *names, int npositional_only,
                       int nrequired, PyObject **out)
{
    int nnames = 0;
    while (names[nnames] != NULL)
        nnames++;
    for (int i = 0; i < nnames; i++)
        out[i] = NULL;
    if (nargs > nnames) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     fname, nnames, nargs);
        return false;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    const Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        const char *key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        if (key == NULL)
            return false;
        int found = -1;
        for (int i = npositional_only; i < nnames; i++)
            if (strcmp(names[i], key) == 0) {
                found = i;
                break;
            }
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'",
                         fname, key);
            return false;
        }
        if (out[found] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                         key);
            return false;
        }
        out[found] = args[nargs + k];
    }
    for (int i = 0; i < nrequired; i++)
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)",
                         fname, names[i], i + 1);
            return false;
        }
    return true;
}

/* ------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"_shutdown", module_shutdown, METH_NOARGS,
     "Stops callbacks into Python and waits for running ones (called at exit)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef weft_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "weft._core",
    .m_doc = "weft's C extension: arrays, ops, transforms and compile (mlx.core's API).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__core(void);
PyMODINIT_FUNC PyInit__core(void)
{
    if (strcmp(wf_version(), WF_VERSION_STRING) != 0) {
        PyErr_Format(PyExc_ImportError, "weft: the library is %s, the header %s",
                     wf_version(), WF_VERSION_STRING);
        return NULL;
    }
    PyObject *module = PyModule_Create(&weft_module);
    if (module == NULL)
        return NULL;
    if (weftpy_dtype_init(module) < 0 || weftpy_array_init_type(module) < 0 ||
        weftpy_streams_init(module) < 0 || weftpy_ops_init(module) < 0 ||
        weftpy_transforms_init(module) < 0 || weftpy_compile_init(module) < 0 ||
        weftpy_export_init(module) < 0 ||
        weftpy_random_init(module) < 0 || weftpy_memory_init(module) < 0 ||
        weftpy_kernels_init(module) < 0 || weftpy_conv_init(module) < 0 ||
        weftpy_fp8_init(module) < 0 || weftpy_dlpack_init(module) < 0 ||
        weftpy_distributed_init(module) < 0 ||
        weftpy_quantized_init(module) < 0 || weftpy_files_init(module) < 0 ||
        weftpy_masked_init(module) < 0 || weftpy_matmul_family_init(module) < 0 ||
        weftpy_fft_init(module) < 0 || weftpy_linalg_init(module) < 0 ||
        PyModule_AddStringConstant(module, "__version__", wf_version()) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
