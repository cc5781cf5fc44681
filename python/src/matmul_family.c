/*
 * matmul_family.c - gather_mm, block_masked_mm and segmented_mm under
 * mlx.core's names and signatures (weft.h's matmul family section).
 */
#include "weft_py.h"

/* An optional array argument: NULL for None or not given, else a new
 * reference (false with an exception set on a bad value). */
static bool optional_array(PyObject *obj, wf_array **out)
{
    *out = NULL;
    if (obj == NULL || obj == Py_None)
        return true;
    *out = weftpy_array_from_object(obj, WF_DTYPE_COUNT);
    return *out != NULL;
}

/* Runs the wrapped call's result through the usual error mapping. */
static PyObject *finish(wf_array *out, bool pushed, wf_array *const *held, int nheld)
{
    weftpy_pop_stream(pushed);
    for (int i = 0; i < nheld; i++)
        wf_release(held[i]);
    if (out == NULL)
        return PyErr_Occurred() ? NULL : weftpy_raise_weft_error();
    return weftpy_array_wrap(out);
}

/* gather_mm(a, b, /, lhs_indices=None, rhs_indices=None, *, sorted_indices=False, stream=None) */
static PyObject *py_gather_mm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"a",      "b", "lhs_indices", "rhs_indices",
                                        "sorted_indices", "stream", NULL};
    PyObject *given[6];
    if (!weftpy_parse_args("gather_mm", args, nargs, kwnames, names, 2, 2, given))
        return NULL;
    wf_array *held[4] = {NULL, NULL, NULL, NULL}, *out = NULL;
    bool pushed = false;
    const int sorted = given[4] ? PyObject_IsTrue(given[4]) : 0;
    if (sorted >= 0 && optional_array(given[0], &held[0]) && optional_array(given[1], &held[1]) &&
        optional_array(given[2], &held[2]) && optional_array(given[3], &held[3]) &&
        weftpy_push_stream_arg(given[5], &pushed))
        out = wf_gather_mm(held[0], held[1], held[2], held[3], sorted != 0);
    return finish(out, pushed, held, 4);
}

/* block_masked_mm(a, b, /, block_size=64, mask_out=None, mask_lhs=None, mask_rhs=None, *, stream=None) */
static PyObject *py_block_masked_mm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"a",        "b",        "block_size", "mask_out",
                                        "mask_lhs", "mask_rhs", "stream",     NULL};
    PyObject *given[7];
    if (!weftpy_parse_args("block_masked_mm", args, nargs, kwnames, names, 2, 2, given))
        return NULL;
    long block_size = 64;
    if (given[2] != NULL && given[2] != Py_None) {
        block_size = PyLong_AsLong(given[2]);
        if (block_size == -1 && PyErr_Occurred())
            return NULL;
        if (block_size <= 0 || block_size > (1L << 30)) {
            PyErr_Format(PyExc_ValueError, "[block_masked_mm] block_size must be positive, not %ld",
                         block_size);
            return NULL;
        }
    }
    wf_array *held[5] = {NULL, NULL, NULL, NULL, NULL}, *out = NULL;
    bool pushed = false;
    if (optional_array(given[0], &held[0]) && optional_array(given[1], &held[1]) &&
        optional_array(given[3], &held[2]) && optional_array(given[4], &held[3]) &&
        optional_array(given[5], &held[4]) && weftpy_push_stream_arg(given[6], &pushed))
        out = wf_block_masked_mm(held[0], held[1], (int)block_size, held[2], held[3], held[4]);
    return finish(out, pushed, held, 5);
}

/* segmented_mm(a, b, /, segments, *, stream=None) */
static PyObject *py_segmented_mm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"a", "b", "segments", "stream", NULL};
    PyObject *given[4];
    if (!weftpy_parse_args("segmented_mm", args, nargs, kwnames, names, 2, 3, given))
        return NULL;
    wf_array *held[3] = {NULL, NULL, NULL}, *out = NULL;
    bool pushed = false;
    if (optional_array(given[0], &held[0]) && optional_array(given[1], &held[1]) &&
        optional_array(given[2], &held[2]) && weftpy_push_stream_arg(given[3], &pushed))
        out = wf_segmented_mm(held[0], held[1], held[2]);
    return finish(out, pushed, held, 3);
}

#define FAMILY_OP(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef matmul_family_methods[] = {
    FAMILY_OP("gather_mm", py_gather_mm,
              "gather_mm(a, b, /, lhs_indices=None, rhs_indices=None, *, sorted_indices=False, "
              "stream=None): products of the matrices of a and b that the indices pick"),
    FAMILY_OP("block_masked_mm", py_block_masked_mm,
              "block_masked_mm(a, b, /, block_size=64, mask_out=None, mask_lhs=None, "
              "mask_rhs=None, *, stream=None): a @ b with block masks"),
    FAMILY_OP("segmented_mm", py_segmented_mm,
              "segmented_mm(a, b, /, segments, *, stream=None): a[:, s0:s1] @ b[s0:s1, :] for "
              "each segment (s0, s1)"),
    {NULL, NULL, 0, NULL},
};

int weftpy_matmul_family_init(PyObject *module)
{
    return PyModule_AddFunctions(module, matmul_family_methods);
}
