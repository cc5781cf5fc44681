/* mx.to_fp8 / mx.from_fp8 (weft.h's fp8 section). */
#include "weft_py.h"

/* Parses `names` (the first the array, the last "stream"), converts the
 * array and pushes the stream; false with an exception set. */
static bool begin(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  const char *const *names, int nnames, PyObject **given, wf_array **a,
                  bool *pushed)
{
    if (!weftpy_parse_args(fname, args, nargs, kwnames, names, 1, 1, given))
        return false;
    *a = weftpy_array_from_object(given[0], WF_DTYPE_COUNT);
    if (*a == NULL)
        return false;
    if (!weftpy_push_stream_arg(given[nnames - 1], pushed)) {
        wf_release(*a);
        return false;
    }
    return true;
}

static PyObject *py_to_fp8(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"x", "stream", NULL};
    PyObject *given[2];
    wf_array *a;
    bool pushed;
    if (!begin("to_fp8", args, nargs, kwnames, names, 2, given, &a, &pushed))
        return NULL;
    wf_array *out = wf_to_fp8(a);
    weftpy_pop_stream(pushed);
    wf_release(a);
    return weftpy_array_wrap(out);
}

static PyObject *py_from_fp8(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"x", "dtype", "stream", NULL};
    PyObject *given[3];
    wf_array *a;
    bool pushed;
    if (!begin("from_fp8", args, nargs, kwnames, names, 3, given, &a, &pushed))
        return NULL;
    wf_dtype dtype = WF_DTYPE_BF16; /* MLX's default */
    wf_array *out = NULL;
    if (given[1] == NULL || given[1] == Py_None ||
        weftpy_dtype_from_object(given[1], false, &dtype))
        out = wf_from_fp8(a, dtype);
    weftpy_pop_stream(pushed);
    wf_release(a);
    if (out == NULL && PyErr_Occurred())
        return NULL;
    return weftpy_array_wrap(out);
}

static PyMethodDef fp8_methods[] = {
    {"to_fp8", (PyCFunction)(void (*)(void))py_to_fp8, METH_FASTCALL | METH_KEYWORDS,
     "to_fp8(x, *, stream=None): e4m3 codes (uint8) of a real float array"},
    {"from_fp8", (PyCFunction)(void (*)(void))py_from_fp8, METH_FASTCALL | METH_KEYWORDS,
     "from_fp8(x, dtype=bfloat16, *, stream=None): the values of uint8 e4m3 codes"},
    {NULL, NULL, 0, NULL},
};

int weftpy_fp8_init(PyObject *module) { return PyModule_AddFunctions(module, fp8_methods); }
