/*
 * quantized.c - mx.quantize, mx.dequantize, mx.quantized_matmul and
 * mx.gather_qmm with mlx.core's signatures, on weft.h's quantization
 * section: modes "affine", "mxfp4", "mxfp8" and "nvfp4". nvfp4's
 * global_scale is taken by the Python wrappers in weft/_qqmm.py, which call
 * quantize and dequantize here without it.
 * Building the graph never waits, so the GIL is kept.
 */
#include "weft_py.h"

#include <string.h>

/* Arguments common to the four functions. */
typedef struct {
    PyObject *given[14];
    wf_array *arrays[6];
    int narrays;
    int group_size, bits;
    wf_quant_mode mode;
    bool pushed;
} quant_call;

/* The mode named `m` and its default group size and bits, as MLX. */
static bool parse_mode(const char *fname, const char *m, wf_quant_mode *mode, int *group_size,
                       int *bits)
{
    static const struct {
        const char *name;
        wf_quant_mode mode;
        int group_size, bits;
    } modes[] = {{"affine", WF_QUANT_AFFINE, 64, 4},
                 {"mxfp4", WF_QUANT_MXFP4, 32, 4},
                 {"mxfp8", WF_QUANT_MXFP8, 32, 8},
                 {"nvfp4", WF_QUANT_NVFP4, 16, 4}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(m, modes[i].name) == 0) {
            *mode = modes[i].mode;
            *group_size = modes[i].group_size;
            *bits = modes[i].bits;
            return true;
        }
    }
    PyErr_Format(PyExc_ValueError, "[%s] Invalid quantization mode '%s' (affine, mxfp4, mxfp8 "
                                   "or nvfp4)",
                 fname, m);
    return false;
}

static void call_release(quant_call *c)
{
    for (int i = 0; i < c->narrays; i++)
        wf_release(c->arrays[i]);
    c->narrays = 0;
}

/* Parses; converts the leading `array_args` arguments (None stays NULL);
 * reads group_size, bits and mode at their indices; pushes the stream (the
 * last name). */
static bool call_begin(quant_call *c, const char *fname, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, const char *const *names, int nrequired,
                       int array_args, int group_index)
{
    c->narrays = 0;
    c->pushed = false;
    if (!weftpy_parse_args(fname, args, nargs, kwnames, names, 0, nrequired, c->given))
        return false;
    PyObject *gs = c->given[group_index], *bits = c->given[group_index + 1];
    PyObject *mode = c->given[group_index + 2];
    const char *m = "affine";
    if (mode && mode != Py_None && !(m = PyUnicode_AsUTF8(mode)))
        return false;
    if (!parse_mode(fname, m, &c->mode, &c->group_size, &c->bits))
        return false;
    if (gs && gs != Py_None && (c->group_size = (int)PyLong_AsLong(gs)) == -1 && PyErr_Occurred())
        return false;
    if (bits && bits != Py_None && (c->bits = (int)PyLong_AsLong(bits)) == -1 && PyErr_Occurred())
        return false;
    for (int i = 0; i < array_args; i++) {
        PyObject *obj = c->given[i];
        wf_array *a = NULL;
        if (obj && obj != Py_None && !(a = weftpy_array_from_object(obj, WF_DTYPE_COUNT))) {
            call_release(c);
            return false;
        }
        c->arrays[c->narrays++] = a;
    }
    int nnames = 0;
    while (names[nnames])
        nnames++;
    if (!weftpy_push_stream_arg(c->given[nnames - 1], &c->pushed)) {
        call_release(c);
        return false;
    }
    return true;
}

static void call_end(quant_call *c)
{
    weftpy_pop_stream(c->pushed);
    call_release(c);
}

/* Biases are given with the affine mode and only there. */
static bool check_biases(const char *fname, const quant_call *c, wf_array *biases)
{
    if (c->mode == WF_QUANT_AFFINE && !biases) {
        PyErr_Format(PyExc_ValueError, "[%s] Biases must be provided for affine quantization.",
                     fname);
        return false;
    }
    if (c->mode != WF_QUANT_AFFINE && biases) {
        PyErr_Format(PyExc_ValueError, "[%s] Biases must be null for a floating-point "
                                       "quantization mode.",
                     fname);
        return false;
    }
    return true;
}

static bool no_global_scale(const char *fname, PyObject *global_scale)
{
    if (!global_scale || global_scale == Py_None)
        return true;
    PyErr_Format(PyExc_ValueError, "[%s] global_scale is not supported by weft", fname);
    return false;
}

static PyObject *wrap_or_raise(wf_array *out)
{
    if (out)
        return weftpy_array_wrap(out);
    return PyErr_Occurred() ? NULL : weftpy_raise_weft_error();
}

static PyObject *py_quantize(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"w", "group_size", "bits", "mode", "global_scale",
                                        "stream", NULL};
    quant_call c;
    if (!call_begin(&c, "quantize", args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    PyObject *result = NULL;
    if (no_global_scale("quantize", c.given[4])) {
        wf_array *q, *s, *b;
        if (wf_quantize(c.arrays[0], c.group_size, c.bits, c.mode, &q, &s, &b) != WF_OK)
            weftpy_raise_weft_error();
        else if (b)
            result = Py_BuildValue("(NNN)", weftpy_array_wrap(q), weftpy_array_wrap(s),
                                   weftpy_array_wrap(b));
        else
            result = Py_BuildValue("(NN)", weftpy_array_wrap(q), weftpy_array_wrap(s));
    }
    call_end(&c);
    return result;
}

static PyObject *py_dequantize(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"w",     "scales",       "biases", "group_size", "bits",
                                        "mode",  "global_scale", "dtype",  "stream",     NULL};
    quant_call c;
    if (!call_begin(&c, "dequantize", args, nargs, kwnames, names, 2, 3, 3))
        return NULL;
    wf_array *out = NULL;
    wf_dtype dtype = WF_DTYPE_COUNT;
    if (check_biases("dequantize", &c, c.arrays[2]) &&
        no_global_scale("dequantize", c.given[6]) &&
        weftpy_dtype_from_object(c.given[7] ? c.given[7] : Py_None, true, &dtype))
        out = wf_dequantize_as(c.arrays[0], c.arrays[1], c.arrays[2], c.group_size, c.bits, c.mode,
                               dtype);
    call_end(&c);
    return wrap_or_raise(out);
}

static PyObject *py_quantized_matmul(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"x",          "w",    "scales", "biases", "transpose",
                                        "group_size", "bits", "mode",   "stream", NULL};
    quant_call c;
    if (!call_begin(&c, "quantized_matmul", args, nargs, kwnames, names, 3, 4, 5))
        return NULL;
    wf_array *out = NULL;
    const int transpose = c.given[4] ? PyObject_IsTrue(c.given[4]) : 1;
    if (transpose >= 0 && check_biases("quantized_matmul", &c, c.arrays[3]))
        out = wf_quantized_matmul_mode(c.arrays[0], c.arrays[1], c.arrays[2], c.arrays[3],
                                       transpose != 0, c.group_size, c.bits, c.mode);
    call_end(&c);
    return wrap_or_raise(out);
}

static PyObject *py_gather_qmm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {
        "x",          "w",    "scales", "biases",         "lhs_indices", "rhs_indices",
        "transpose",  "group_size", "bits", "mode",     "sorted_indices", "stream", NULL};
    quant_call c;
    if (!call_begin(&c, "gather_qmm", args, nargs, kwnames, names, 3, 6, 7))
        return NULL;
    wf_array *out = NULL;
    const int transpose = c.given[6] ? PyObject_IsTrue(c.given[6]) : 1;
    if (transpose >= 0 && check_biases("gather_qmm", &c, c.arrays[3]))
        out = wf_gather_qmm_mode(c.arrays[0], c.arrays[1], c.arrays[2], c.arrays[3], c.arrays[4],
                                 c.arrays[5], transpose != 0, c.group_size, c.bits, c.mode);
    call_end(&c);
    return wrap_or_raise(out);
}

#define QFN(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef quantized_methods[] = {
    QFN("quantize", py_quantize,
        "quantize(w, group_size=None, bits=None, mode='affine'): (w_q, scales, biases), MLX's "
        "layout; (w_q, scales) in the modes 'mxfp4', 'mxfp8' and 'nvfp4'"),
    QFN("dequantize", py_dequantize,
        "dequantize(w, scales, biases=None, group_size=None, bits=None, mode='affine', "
        "dtype=None)"),
    QFN("quantized_matmul", py_quantized_matmul,
        "quantized_matmul(x, w, scales, biases=None, transpose=True, group_size=None, bits=None, "
        "mode='affine')"),
    QFN("gather_qmm", py_gather_qmm,
        "gather_qmm(x, w, scales, biases=None, lhs_indices=None, rhs_indices=None, "
        "transpose=True, group_size=None, bits=None, mode='affine')"),
    {NULL, NULL, 0, NULL},
};

int weftpy_quantized_init(PyObject *module)
{
    return PyModule_AddFunctions(module, quantized_methods);
}
