/*
 * masked.c - masked_scatter under mlx.core's name (weft.h's boolean-mask
 * assignment section); indexing.c maps a[mask] = v onto the same op.
 */
#include "weft_py.h"

/* masked_scatter(a, mask, src, *, stream=None) */
static PyObject *py_masked_scatter(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"a", "mask", "src", "stream", NULL};
    PyObject *given[4];
    if (!weftpy_parse_args("masked_scatter", args, nargs, kwnames, names, 0, 3, given))
        return NULL;
    wf_array *a = weftpy_array_from_object(given[0], WF_DTYPE_COUNT);
    wf_array *mask = a ? weftpy_array_from_object(given[1], WF_DTYPE_COUNT) : NULL;
    wf_array *src = mask ? weftpy_operand(given[2], given[0]) : NULL;
    bool pushed = false;
    wf_array *out = NULL;
    if (src && weftpy_push_stream_arg(given[3], &pushed)) {
        out = wf_masked_scatter(a, mask, src);
        weftpy_pop_stream(pushed);
        if (!out)
            weftpy_raise_weft_error();
    }
    wf_release(src);
    wf_release(mask);
    wf_release(a);
    return out ? weftpy_array_wrap(out) : NULL;
}

static PyMethodDef masked_methods[] = {
    {"masked_scatter", (PyCFunction)(void (*)(void))py_masked_scatter,
     METH_FASTCALL | METH_KEYWORDS,
     "masked_scatter(a, mask, src, *, stream=None): a copy of a whose elements under the true "
     "entries of mask (bool, a's leading dims) take src's elements in row-major order"},
    {NULL, NULL, 0, NULL},
};

int weftpy_masked_init(PyObject *module) { return PyModule_AddFunctions(module, masked_methods); }
