/*
 * fft.c - the discrete Fourier transform primitive (weft.h's wf_fft) as
 * weft._core._fft; python/weft/fft.py builds mlx.core.fft's functions
 * (defaults for n / s / axes, norm names) on it.
 */
#include "weft_py.h"

/* A sequence of ints into out (at most WF_MAX_NDIM); -1 with the error set. */
static int int_sequence(PyObject *seq, const char *what, int64_t *out)
{
    PyObject *fast = PySequence_Fast(seq, "_fft: expected a sequence");
    if (!fast)
        return -1;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > WF_MAX_NDIM) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "[fft] too many %s (%zd; at most %d)", what, n,
                     WF_MAX_NDIM);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = v;
    }
    Py_DECREF(fast);
    return (int)n;
}

/* _fft(a, axes, sizes, kind, norm, *, stream=None): sizes None or one per
 * axis; kind and norm are weft.h's wf_fft_kind / wf_fft_norm codes. */
static PyObject *py_fft(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"a", "axes", "sizes", "kind", "norm", "stream", NULL};
    PyObject *given[6];
    if (!weftpy_parse_args("_fft", args, nargs, kwnames, names, 0, 5, given))
        return NULL;
    int64_t axes64[WF_MAX_NDIM], sizes[WF_MAX_NDIM];
    const int n_axes = int_sequence(given[1], "axes", axes64);
    if (n_axes < 0)
        return NULL;
    int axes[WF_MAX_NDIM];
    for (int i = 0; i < n_axes; i++) {
        if (axes64[i] < INT_MIN || axes64[i] > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "[fft] axis %lld is out of range",
                         (long long)axes64[i]);
            return NULL;
        }
        axes[i] = (int)axes64[i];
    }
    const bool have_sizes = given[2] != Py_None;
    if (have_sizes) {
        const int n_sizes = int_sequence(given[2], "sizes", sizes);
        if (n_sizes < 0)
            return NULL;
        if (n_sizes != n_axes) {
            PyErr_Format(PyExc_ValueError, "[fft] %d sizes given for %d axes", n_sizes, n_axes);
            return NULL;
        }
    }
    const long kind = PyLong_AsLong(given[3]), norm = PyLong_AsLong(given[4]);
    if ((kind == -1 || norm == -1) && PyErr_Occurred())
        return NULL;
    wf_array *a = weftpy_array_from_object(given[0], WF_DTYPE_COUNT);
    bool pushed = false;
    wf_array *out = NULL;
    if (a && weftpy_push_stream_arg(given[5], &pushed)) {
        out = wf_fft(a, axes, n_axes, have_sizes ? sizes : NULL, (wf_fft_kind)kind,
                     (wf_fft_norm)norm);
        weftpy_pop_stream(pushed);
        if (!out)
            weftpy_raise_weft_error();
    }
    wf_release(a);
    return out ? weftpy_array_wrap(out) : NULL;
}

static PyMethodDef fft_methods[] = {
    {"_fft", (PyCFunction)(void (*)(void))py_fft, METH_FASTCALL | METH_KEYWORDS,
     "_fft(a, axes, sizes, kind, norm, *, stream=None): weft.h's wf_fft (kind: 0 forward, 1 "
     "inverse, 2 real forward, 3 real inverse; norm: 0 backward, 1 ortho, 2 forward)"},
    {NULL, NULL, 0, NULL},
};

int weftpy_fft_init(PyObject *module) { return PyModule_AddFunctions(module, fft_methods); }
