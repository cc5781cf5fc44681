/*
 * kernels.c - custom kernels written in Python (weft.custom_kernel): a
 * wf_custom node whose kernel calls a Python function with memoryviews of
 * its inputs and output. The kernel runs on whichever weft thread computes
 * the node (a stream's worker or an evaluating thread) and takes the GIL
 * itself; the evaluating thread waits with the GIL released, so Python code
 * on other threads keeps running meanwhile.
 */
#include "weft_py.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject *callable; /* owned; released from any thread with the GIL */
} kernel_payload;

static void kernel_payload_free(void *payload)
{
    kernel_payload *p = payload;
    weftpy_decref_from_any_thread(p->callable);
    free(p);
}

/* A memoryview of `bytes` at `data`, valid only during the kernel call. */
static PyObject *view_of(const void *data, size_t bytes, int flags)
{
    static char empty;
    return PyMemoryView_FromMemory(bytes > 0 ? (char *)data : &empty, (Py_ssize_t)bytes, flags);
}

/* Ends a view after the call; a view still exported (np.frombuffer kept
 * past the call) stays open - the documentation says not to do that. */
static void view_release(PyObject *view)
{
    if (view == NULL)
        return;
    PyObject *ok = PyObject_CallMethod(view, "release", NULL);
    if (ok == NULL)
        PyErr_Clear();
    Py_XDECREF(ok);
    Py_DECREF(view);
}

static size_t bytes_of(wf_dtype dtype, int ndim, const int64_t *shape)
{
    size_t n = wf_dtype_size(dtype);
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    return n;
}

static wf_status python_kernel(void *payload, const wf_custom_call *call)
{
    kernel_payload *p = payload;
    PyGILState_STATE state;
    if (!weftpy_callback_enter(&state))
        return WF_ERR_MISUSE;
    wf_status status = WF_OK;
    PyObject *inputs = PyList_New(call->ninputs);
    PyObject *output = view_of(call->output,
                               bytes_of(call->output_dtype, call->output_ndim, call->output_shape),
                               PyBUF_WRITE);
    for (int i = 0; inputs != NULL && i < call->ninputs; i++) {
        PyObject *view = view_of(call->inputs[i],
                                 bytes_of(call->input_dtypes[i], call->input_ndims[i],
                                          call->input_shapes[i]),
                                 PyBUF_READ);
        if (view == NULL) {
            Py_CLEAR(inputs);
            break;
        }
        PyList_SET_ITEM(inputs, i, view);
    }
    PyObject *result = inputs != NULL && output != NULL
                           ? PyObject_CallFunctionObjArgs(p->callable, inputs, output, NULL)
                           : NULL;
    if (result == NULL)
        status = weftpy_callback_failed_here();
    Py_XDECREF(result);
    for (int i = 0; inputs != NULL && i < call->ninputs; i++)
        view_release(Py_NewRef(PyList_GET_ITEM(inputs, i)));
    Py_XDECREF(inputs);
    view_release(output);
    weftpy_callback_leave(state);
    return status;
}

/* custom_kernel(fun, inputs, shape, dtype, name="python_kernel"): a lazy
 * array of shape and dtype computed by fun(input_views, output_view). */
static PyObject *py_custom_kernel(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"fun", "inputs", "shape", "dtype", "name", NULL};
    PyObject *given[5];
    if (!weftpy_parse_args("custom_kernel", args, nargs, kwnames, names, 0, 4, given))
        return NULL;
    if (!PyCallable_Check(given[0])) {
        PyErr_SetString(PyExc_TypeError, "custom_kernel: fun must be callable");
        return NULL;
    }
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_dtype dtype;
    const char *name = "python_kernel";
    if (!weftpy_int64_list(given[2], "custom_kernel: shape must be a sequence of ints", shape,
                           &ndim) ||
        !weftpy_dtype_from_object(given[3], false, &dtype))
        return NULL;
    if (given[4] != NULL && (name = PyUnicode_AsUTF8(given[4])) == NULL)
        return NULL;
    PyObject *seq = PySequence_Fast(given[1], "custom_kernel: inputs must be a list of arrays");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    wf_array **inputs = PyMem_Calloc((size_t)count + 1, sizeof *inputs);
    Py_ssize_t made = 0;
    PyObject *result = NULL;
    if (inputs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; made < count; made++)
        if ((inputs[made] = weftpy_array_from_object(PySequence_Fast_GET_ITEM(seq, made),
                                                     WF_DTYPE_COUNT)) == NULL)
            goto done;
    kernel_payload *payload = malloc(sizeof *payload);
    if (payload == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    payload->callable = Py_NewRef(given[0]);
    /* wf_custom frees the payload (and so the reference) itself on failure. */
    result = weftpy_array_wrap(wf_custom(name, python_kernel, payload, kernel_payload_free,
                                         inputs, (int)count, shape, ndim, dtype));
done:
    for (Py_ssize_t i = 0; i < made; i++)
        wf_release(inputs[i]);
    PyMem_Free(inputs);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef kernel_methods[] = {
    {"custom_kernel", (PyCFunction)(void (*)(void))py_custom_kernel, METH_FASTCALL | METH_KEYWORDS,
     "custom_kernel(fun, inputs, shape, dtype, name='python_kernel'): a lazy array computed by "
     "fun(input_views, output_view), called with the GIL on a weft thread; the memoryviews "
     "(row-major bytes) are valid during the call only."},
    {NULL, NULL, 0, NULL},
};

int weftpy_kernels_init(PyObject *module)
{
    return PyModule_AddFunctions(module, kernel_methods);
}
