/*
 * linalg.c - weft.h's wf_linalg_* section as private functions of _core;
 * python/weft/linalg.py gives them mlx.core.linalg's names and keywords.
 * Every function takes (a, [b,] flag, stream) positionally and returns an
 * array or a tuple of arrays.
 */
#include "weft_py.h"

/* The operands, converted; false with the Python error set. */
static bool operands(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                     Py_ssize_t narrays, wf_array **arrays)
{
    if (nargs != narrays + 2) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fname,
                     narrays + 2, nargs);
        return false;
    }
    for (Py_ssize_t i = 0; i < narrays; i++) {
        arrays[i] = weftpy_array_from_object(args[i], WF_DTYPE_COUNT);
        if (!arrays[i]) {
            for (Py_ssize_t j = 0; j < i; j++)
                wf_release(arrays[j]);
            return false;
        }
    }
    return true;
}

/* The results as an array or a tuple (stolen); NULL if any is NULL. */
static PyObject *results(wf_array **out, int n)
{
    for (int i = 0; i < n; i++)
        if (!out[i]) {
            for (int j = 0; j < n; j++)
                wf_release(out[j]);
            return weftpy_raise_weft_error();
        }
    if (n == 1)
        return weftpy_array_wrap(out[0]);
    PyObject *tuple = PyTuple_New(n);
    for (int i = 0; i < n; i++) {
        PyObject *item = tuple ? weftpy_array_wrap(out[i]) : NULL; /* steals out[i] */
        if (!tuple)
            wf_release(out[i]);
        if (!item) {
            for (int j = i + 1; j < n; j++)
                wf_release(out[j]);
            Py_XDECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, item);
    }
    return tuple;
}

enum linalg_fn {
    FN_INV,
    FN_TRI_INV,
    FN_CHOLESKY,
    FN_CHOLESKY_INV,
    FN_SOLVE,
    FN_SOLVE_TRIANGULAR,
    FN_LU_FACTOR,
    FN_LU,
    FN_QR,
    FN_EIGH,
    FN_EIGVALSH,
    FN_SVD,
    FN_SVDVALS,
    FN_EIG,
    FN_EIGVALS
};

/* Runs `fn` under the stream argument; fills out[0 .. *nout). */
static void run(int fn, wf_array *a, wf_array *b, bool flag, wf_array **out, int *nout)
{
    *nout = 1;
    switch (fn) {
    case FN_INV: out[0] = wf_linalg_inv(a); break;
    case FN_TRI_INV: out[0] = wf_linalg_tri_inv(a, flag); break;
    case FN_CHOLESKY: out[0] = wf_linalg_cholesky(a, flag); break;
    case FN_CHOLESKY_INV: out[0] = wf_linalg_cholesky_inv(a, flag); break;
    case FN_SOLVE: out[0] = wf_linalg_solve(a, b); break;
    case FN_SOLVE_TRIANGULAR: out[0] = wf_linalg_solve_triangular(a, b, flag); break;
    case FN_LU_FACTOR: *nout = 2, wf_linalg_lu_factor(a, &out[0], &out[1]); break;
    case FN_LU: *nout = 3, wf_linalg_lu(a, &out[0], &out[1], &out[2]); break;
    case FN_QR: *nout = 2, wf_linalg_qr(a, &out[0], &out[1]); break;
    case FN_EIGH: *nout = 2, wf_linalg_eigh(a, flag, &out[0], &out[1]); break;
    case FN_EIGVALSH: wf_linalg_eigh(a, flag, &out[0], NULL); break;
    case FN_SVD: *nout = 3, wf_linalg_svd(a, &out[0], &out[1], &out[2]); break;
    case FN_SVDVALS: wf_linalg_svd(a, NULL, &out[0], NULL); break;
    case FN_EIG: *nout = 2, wf_linalg_eig(a, &out[0], &out[1]); break;
    case FN_EIGVALS: wf_linalg_eig(a, &out[0], NULL); break;
    default: out[0] = NULL; break;
    }
}

static PyObject *call(const char *fname, int fn, PyObject *const *args, Py_ssize_t nargs)
{
    const bool two = fn == FN_SOLVE || fn == FN_SOLVE_TRIANGULAR;
    wf_array *arrays[2] = {NULL, NULL};
    if (!operands(fname, args, nargs, two ? 2 : 1, arrays))
        return NULL;
    const Py_ssize_t narrays = two ? 2 : 1;
    const int flag = PyObject_IsTrue(args[narrays]);
    wf_array *out[3] = {NULL, NULL, NULL};
    int nout = 1;
    bool pushed = false;
    PyObject *r = NULL;
    if (flag >= 0 && weftpy_push_stream_arg(args[narrays + 1], &pushed)) {
        run(fn, arrays[0], arrays[1], flag == 1, out, &nout);
        weftpy_pop_stream(pushed);
        r = results(out, nout);
    }
    wf_release(arrays[1]);
    wf_release(arrays[0]);
    return r;
}

#define LINALG_FN(NAME, FN)                                                                 \
    static PyObject *py_##NAME(PyObject *module, PyObject *const *args, Py_ssize_t nargs)   \
    {                                                                                       \
        (void)module;                                                                       \
        return call(#NAME, FN, args, nargs);                                                \
    }
LINALG_FN(_linalg_inv, FN_INV)
LINALG_FN(_linalg_tri_inv, FN_TRI_INV)
LINALG_FN(_linalg_cholesky, FN_CHOLESKY)
LINALG_FN(_linalg_cholesky_inv, FN_CHOLESKY_INV)
LINALG_FN(_linalg_solve, FN_SOLVE)
LINALG_FN(_linalg_solve_triangular, FN_SOLVE_TRIANGULAR)
LINALG_FN(_linalg_lu_factor, FN_LU_FACTOR)
LINALG_FN(_linalg_lu, FN_LU)
LINALG_FN(_linalg_qr, FN_QR)
LINALG_FN(_linalg_eigh, FN_EIGH)
LINALG_FN(_linalg_eigvalsh, FN_EIGVALSH)
LINALG_FN(_linalg_svd, FN_SVD)
LINALG_FN(_linalg_svdvals, FN_SVDVALS)
LINALG_FN(_linalg_eig, FN_EIG)
LINALG_FN(_linalg_eigvals, FN_EIGVALS)
#undef LINALG_FN

#define ENTRY(NAME, DOC) {#NAME, (PyCFunction)(void (*)(void))py_##NAME, METH_FASTCALL, DOC}
static PyMethodDef linalg_methods[] = {
    ENTRY(_linalg_inv, "_linalg_inv(a, unused, stream)"),
    ENTRY(_linalg_tri_inv, "_linalg_tri_inv(a, upper, stream)"),
    ENTRY(_linalg_cholesky, "_linalg_cholesky(a, upper, stream)"),
    ENTRY(_linalg_cholesky_inv, "_linalg_cholesky_inv(factor, upper, stream)"),
    ENTRY(_linalg_solve, "_linalg_solve(a, b, unused, stream)"),
    ENTRY(_linalg_solve_triangular, "_linalg_solve_triangular(a, b, upper, stream)"),
    ENTRY(_linalg_lu_factor, "_linalg_lu_factor(a, unused, stream) -> (LU, pivots)"),
    ENTRY(_linalg_lu, "_linalg_lu(a, unused, stream) -> (P, L, U)"),
    ENTRY(_linalg_qr, "_linalg_qr(a, unused, stream) -> (Q, R)"),
    ENTRY(_linalg_eigh, "_linalg_eigh(a, upper, stream) -> (w, V)"),
    ENTRY(_linalg_eigvalsh, "_linalg_eigvalsh(a, upper, stream) -> w"),
    ENTRY(_linalg_svd, "_linalg_svd(a, unused, stream) -> (U, S, Vt)"),
    ENTRY(_linalg_svdvals, "_linalg_svdvals(a, unused, stream) -> S"),
    ENTRY(_linalg_eig, "_linalg_eig(a, unused, stream) -> (w, V)"),
    ENTRY(_linalg_eigvals, "_linalg_eigvals(a, unused, stream) -> w"),
    {NULL, NULL, 0, NULL},
};
#undef ENTRY

int weftpy_linalg_init(PyObject *module) { return PyModule_AddFunctions(module, linalg_methods); }
