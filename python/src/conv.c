/*
 * conv.c - convolutions under mlx.core's names and signatures: conv1d,
 * conv2d, conv3d, conv_transpose1d/2d/3d and conv_general (weft.h's
 * convolution section). Per-axis arguments take an int (every spatial axis)
 * or a sequence with one entry per spatial axis; conv_general's padding may
 * also be a pair (low, high) of such sequences. convolve is composed in
 * Python (weft/_composed.py).
 */
#include "weft_py.h"

enum { MAX_SPATIAL = 3 };

/* An int for every axis, or a sequence of `spatial` ints. */
static bool per_axis(PyObject *obj, const char *fname, const char *what, int spatial,
                     int64_t fallback, int64_t *out)
{
    if (obj == NULL || obj == Py_None) {
        for (int d = 0; d < spatial; d++)
            out[d] = fallback;
        return true;
    }
    if (PyLong_Check(obj)) {
        const long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred())
            return false;
        for (int d = 0; d < spatial; d++)
            out[d] = v;
        return true;
    }
    int64_t values[WF_MAX_NDIM];
    int count = 0;
    if (!weftpy_int64_list(obj, what, values, &count))
        return false;
    if (count != spatial) {
        PyErr_Format(PyExc_ValueError, "[%s] %s must have %d entries (one per spatial axis), got %d",
                     fname, what, spatial, count);
        return false;
    }
    for (int d = 0; d < spatial; d++)
        out[d] = values[d];
    return true;
}

/* conv_general's padding: an int, a sequence, or a pair (low, high) of
 * sequences. */
static bool padding_arg(PyObject *obj, int spatial, int64_t *lo, int64_t *hi)
{
    if (obj != NULL && PySequence_Check(obj) && !PyLong_Check(obj) && PySequence_Size(obj) == 2) {
        PyObject *first = PySequence_GetItem(obj, 0);
        PyObject *second = first ? PySequence_GetItem(obj, 1) : NULL;
        const bool pair = second && PySequence_Check(first) && PySequence_Check(second);
        bool ok = second != NULL;
        if (pair)
            ok = per_axis(first, "conv_general", "padding", spatial, 0, lo) &&
                 per_axis(second, "conv_general", "padding", spatial, 0, hi);
        Py_XDECREF(first);
        Py_XDECREF(second);
        if (!ok || pair)
            return ok;
    }
    if (!per_axis(obj, "conv_general", "padding", spatial, 0, lo))
        return false;
    for (int d = 0; d < spatial; d++)
        hi[d] = lo[d];
    return true;
}

static bool groups_arg(PyObject *obj, int64_t *out)
{
    *out = 1;
    if (obj == NULL || obj == Py_None)
        return true;
    const long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return false;
    *out = v;
    return true;
}

/* The input's spatial rank, checked against `want` (0: any of 1..3). */
static int spatial_rank(const char *fname, wf_array *x, int want)
{
    const int s = wf_array_ndim(x) - 2;
    if ((want > 0 && s != want) || s < 1 || s > MAX_SPATIAL) {
        PyErr_Format(PyExc_ValueError,
                     "[%s] input of %d dimensions: expected (N, %s spatial axes, C_in)", fname,
                     wf_array_ndim(x), want == 1 ? "1" : want == 2 ? "2" : want == 3 ? "3" : "1 to 3");
        return -1;
    }
    return s;
}

/* Parsed arguments of one call. */
typedef struct {
    PyObject *given[10];
    wf_array *x, *w;
    bool pushed;
} conv_call;

static bool conv_begin(conv_call *c, const char *fname, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, const char *const *names)
{
    c->x = c->w = NULL;
    c->pushed = false;
    if (!weftpy_parse_args(fname, args, nargs, kwnames, names, 0, 2, c->given))
        return false;
    c->x = weftpy_array_from_object(c->given[0], WF_DTYPE_COUNT);
    c->w = c->x ? weftpy_array_from_object(c->given[1], WF_DTYPE_COUNT) : NULL;
    int nnames = 0;
    while (names[nnames] != NULL)
        nnames++;
    if (c->w == NULL || !weftpy_push_stream_arg(c->given[nnames - 1], &c->pushed)) {
        wf_release(c->x);
        wf_release(c->w);
        return false;
    }
    return true;
}

static PyObject *conv_end(conv_call *c, wf_array *out)
{
    weftpy_pop_stream(c->pushed);
    wf_release(c->x);
    wf_release(c->w);
    if (out == NULL && PyErr_Occurred())
        return NULL;
    return weftpy_array_wrap(out);
}

/* conv1d/2d/3d(input, weight, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
 * conv_general with symmetric padding (negative padding crops, as MLX). */
static PyObject *conv_nd(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         const char *fname, int spatial)
{
    static const char *const names[] = {"input",    "weight", "stride", "padding",
                                        "dilation", "groups", "stream", NULL};
    conv_call c;
    if (!conv_begin(&c, fname, args, nargs, kwnames, names))
        return NULL;
    int64_t st[MAX_SPATIAL], pad[MAX_SPATIAL], dil[MAX_SPATIAL], groups;
    wf_array *out = NULL;
    /* As mlx.core: conv1d's ints apply to every spatial axis of any input
     * (MLX passes them to conv_general), conv2d / conv3d take that many. */
    const int s = spatial_rank(fname, c.x, spatial == 1 ? 0 : spatial);
    if (s > 0 && per_axis(c.given[2], fname, "stride", s, 1, st) &&
        per_axis(c.given[3], fname, "padding", s, 0, pad) &&
        per_axis(c.given[4], fname, "dilation", s, 1, dil) && groups_arg(c.given[5], &groups))
        out = wf_conv_general(c.x, c.w, st, pad, pad, dil, NULL, groups, false);
    return conv_end(&c, out);
}

/* conv_transpose1d/2d/3d(input, weight, stride=1, padding=0, dilation=1,
 * output_padding=0, groups=1, *, stream=None). */
static PyObject *conv_transpose_nd(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                   const char *fname, int spatial)
{
    static const char *const names[] = {"input",          "weight", "stride", "padding", "dilation",
                                        "output_padding", "groups", "stream", NULL};
    conv_call c;
    if (!conv_begin(&c, fname, args, nargs, kwnames, names))
        return NULL;
    int64_t st[MAX_SPATIAL], pad[MAX_SPATIAL], dil[MAX_SPATIAL], opad[MAX_SPATIAL], groups;
    wf_array *out = NULL;
    if (spatial_rank(fname, c.x, spatial) > 0 &&
        per_axis(c.given[2], fname, "stride", spatial, 1, st) &&
        per_axis(c.given[3], fname, "padding", spatial, 0, pad) &&
        per_axis(c.given[4], fname, "dilation", spatial, 1, dil) &&
        per_axis(c.given[5], fname, "output_padding", spatial, 0, opad) &&
        groups_arg(c.given[6], &groups))
        out = spatial == 1 ? wf_conv_transpose1d(c.x, c.w, st[0], pad[0], dil[0], opad[0], groups)
              : spatial == 2 ? wf_conv_transpose2d(c.x, c.w, st, pad, dil, opad, groups)
                             : wf_conv_transpose3d(c.x, c.w, st, pad, dil, opad, groups);
    return conv_end(&c, out);
}

#define FASTCALL_ARGS PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames

static PyObject *py_conv1d(FASTCALL_ARGS)
{
    (void)module;
    return conv_nd(args, nargs, kwnames, "conv1d", 1);
}

static PyObject *py_conv2d(FASTCALL_ARGS)
{
    (void)module;
    return conv_nd(args, nargs, kwnames, "conv2d", 2);
}

static PyObject *py_conv3d(FASTCALL_ARGS)
{
    (void)module;
    return conv_nd(args, nargs, kwnames, "conv3d", 3);
}

static PyObject *py_conv_transpose1d(FASTCALL_ARGS)
{
    (void)module;
    return conv_transpose_nd(args, nargs, kwnames, "conv_transpose1d", 1);
}

static PyObject *py_conv_transpose2d(FASTCALL_ARGS)
{
    (void)module;
    return conv_transpose_nd(args, nargs, kwnames, "conv_transpose2d", 2);
}

static PyObject *py_conv_transpose3d(FASTCALL_ARGS)
{
    (void)module;
    return conv_transpose_nd(args, nargs, kwnames, "conv_transpose3d", 3);
}

/* conv_general(input, weight, stride=1, padding=0, kernel_dilation=1,
 * input_dilation=1, groups=1, flip=False, *, stream=None). */
static PyObject *py_conv_general(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"input",          "weight", "stride", "padding",
                                        "kernel_dilation", "input_dilation", "groups", "flip",
                                        "stream",         NULL};
    const char *fname = "conv_general";
    conv_call c;
    if (!conv_begin(&c, fname, args, nargs, kwnames, names))
        return NULL;
    int64_t st[MAX_SPATIAL], lo[MAX_SPATIAL], hi[MAX_SPATIAL], kd[MAX_SPATIAL], id[MAX_SPATIAL];
    int64_t groups;
    int flip = 0;
    wf_array *out = NULL;
    const int s = spatial_rank(fname, c.x, 0);
    if (s > 0 && per_axis(c.given[2], fname, "stride", s, 1, st) &&
        padding_arg(c.given[3], s, lo, hi) &&
        per_axis(c.given[4], fname, "kernel_dilation", s, 1, kd) &&
        per_axis(c.given[5], fname, "input_dilation", s, 1, id) &&
        groups_arg(c.given[6], &groups) &&
        (c.given[7] == NULL || (flip = PyObject_IsTrue(c.given[7])) >= 0))
        out = wf_conv_general(c.x, c.w, st, lo, hi, kd, id, groups, flip != 0);
    return conv_end(&c, out);
}

#define CONV_OP(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef conv_methods[] = {
    CONV_OP("conv1d", py_conv1d,
            "conv1d(input, weight, stride=1, padding=0, dilation=1, groups=1, *, stream=None): "
            "1-d convolution of (N, L, C_in) with (C_out, K, C_in / groups)"),
    CONV_OP("conv2d", py_conv2d,
            "conv2d(input, weight, stride=1, padding=0, dilation=1, groups=1, *, stream=None): "
            "2-d convolution of (N, H, W, C_in) with (C_out, KH, KW, C_in / groups)"),
    CONV_OP("conv3d", py_conv3d,
            "conv3d(input, weight, stride=1, padding=0, dilation=1, groups=1, *, stream=None): "
            "3-d convolution of (N, D, H, W, C_in)"),
    CONV_OP("conv_transpose1d", py_conv_transpose1d,
            "conv_transpose1d(input, weight, stride=1, padding=0, dilation=1, output_padding=0, "
            "groups=1, *, stream=None): 1-d transposed convolution"),
    CONV_OP("conv_transpose2d", py_conv_transpose2d,
            "conv_transpose2d(input, weight, stride=1, padding=0, dilation=1, output_padding=0, "
            "groups=1, *, stream=None): 2-d transposed convolution"),
    CONV_OP("conv_transpose3d", py_conv_transpose3d,
            "conv_transpose3d(input, weight, stride=1, padding=0, dilation=1, output_padding=0, "
            "groups=1, *, stream=None): 3-d transposed convolution"),
    CONV_OP("conv_general", py_conv_general,
            "conv_general(input, weight, stride=1, padding=0, kernel_dilation=1, "
            "input_dilation=1, groups=1, flip=False, *, stream=None): general convolution; "
            "padding is an int, a sequence, or a pair (low, high) of sequences"),
    {NULL, NULL, 0, NULL},
};

int weftpy_conv_init(PyObject *module) { return PyModule_AddFunctions(module, conv_methods); }
