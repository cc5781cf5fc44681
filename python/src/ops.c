/*
 * ops.c - weft's ops under mlx.core's names. Element-wise unary and binary
 * ops and reductions are tables: one trampoline per family parses the
 * arguments (MLX's signatures, `stream=` included) and calls the weft
 * function its table entry names. The rest are written out one by one.
 */
#include "weft_py.h"

#include <math.h>
#include <string.h>

/* Every op runs on the stream its `stream=` argument names (a Stream or a
 * Device), else on this thread's current one. */
typedef struct {
    bool pushed;
} stream_scope;

static bool stream_scope_enter(PyObject *stream_arg, stream_scope *scope)
{
    return weftpy_push_stream_arg(stream_arg, &scope->pushed);
}

static void stream_scope_leave(stream_scope *scope)
{
    weftpy_pop_stream(scope->pushed);
}

wf_array *weftpy_binary(wf_array *(*op)(wf_array *, wf_array *), PyObject *a, PyObject *b)
{
    /* A Python scalar takes its dtype from the other operand (weak typing). */
    wf_array *x = weftpy_operand(a, b);
    if (x == NULL)
        return NULL;
    wf_array *y = weftpy_operand(b, a);
    if (y == NULL) {
        wf_release(x);
        return NULL;
    }
    wf_array *out = op(x, y);
    wf_release(x);
    wf_release(y);
    return out;
}

/* ------------------------------------------------------------ unary */

typedef struct {
    const char *name;
    wf_array *(*fn)(wf_array *);
    const char *doc;
} unary_entry;

static const unary_entry unary_ops[] = {
    {"abs", wf_abs, "Element-wise absolute value."},
    {"negative", wf_negative, "Element-wise negation."},
    {"sign", wf_sign, "Element-wise sign (-1, 0 or 1)."},
    {"exp", wf_exp, "Element-wise e^x."},
    {"expm1", wf_expm1, "Element-wise e^x - 1, accurate near 0."},
    {"log", wf_log, "Element-wise natural logarithm."},
    {"log1p", wf_log1p, "Element-wise log(1 + x), accurate near 0."},
    {"log2", wf_log2, "Element-wise base-2 logarithm."},
    {"sqrt", wf_sqrt, "Element-wise square root."},
    {"rsqrt", wf_rsqrt, "Element-wise 1 / sqrt(x)."},
    {"square", wf_square, "Element-wise x * x."},
    {"reciprocal", wf_reciprocal, "Element-wise 1 / x."},
    {"sin", wf_sin, "Element-wise sine."},
    {"cos", wf_cos, "Element-wise cosine."},
    {"tan", wf_tan, "Element-wise tangent."},
    {"tanh", wf_tanh, "Element-wise hyperbolic tangent."},
    {"sinh", wf_sinh, "Element-wise hyperbolic sine."},
    {"cosh", wf_cosh, "Element-wise hyperbolic cosine."},
    {"arcsin", wf_arcsin, "Element-wise inverse sine."},
    {"arccos", wf_arccos, "Element-wise inverse cosine."},
    {"arctan", wf_arctan, "Element-wise inverse tangent."},
    {"sigmoid", wf_sigmoid, "Element-wise logistic sigmoid."},
    {"erf", wf_erf, "Element-wise error function."},
    {"erfinv", wf_erfinv, "Element-wise inverse error function."},
    {"floor", wf_floor, "Element-wise floor."},
    {"ceil", wf_ceil, "Element-wise ceiling."},
    {"logical_not", wf_logical_not, "Element-wise logical not."},
    {"isnan", wf_isnan, "True where the element is NaN."},
    {"isinf", wf_isinf, "True where the element is +-inf."},
    {"isfinite", wf_isfinite, "True where the element is finite."},
    {"stop_gradient", wf_stop_gradient, "The same values, with no gradient through them."},
    {"_silu", wf_silu, "x * sigmoid(x)."},
    {"_gelu", wf_gelu, "Exact GELU."},
    {"_gelu_tanh", wf_gelu_tanh, "GELU with the tanh approximation."},
    {"bitwise_invert", wf_bitwise_invert, "Element-wise ~a of bool or integer arrays."},
    {"real", wf_real, "The real part (a real array itself)."},
    {"imag", wf_imag, "The imaginary part (zeros for a real array)."},
    {"conjugate", wf_conjugate, "The complex conjugate (a real array itself)."},
};

static PyObject *call_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    const unary_entry *entry = PyCapsule_GetPointer(self, NULL);
    static const char *const names[] = {"a", "stream", NULL};
    PyObject *given[2];
    if (!weftpy_parse_args(entry->name, args, nargs, kwnames, names, 1, 1, given))
        return NULL;
    wf_array *a = weftpy_array_from_object(given[0], WF_DTYPE_COUNT);
    if (a == NULL)
        return NULL;
    stream_scope scope;
    wf_array *out = NULL;
    if (stream_scope_enter(given[1], &scope)) {
        out = entry->fn(a);
        stream_scope_leave(&scope);
    }
    wf_release(a);
    if (out == NULL && PyErr_Occurred())
        return NULL;
    return weftpy_array_wrap(out);
}

/* ------------------------------------------------------------ binary */

typedef struct {
    const char *name;
    wf_array *(*fn)(wf_array *, wf_array *);
    const char *doc;
} binary_entry;

static const binary_entry binary_ops[] = {
    {"add", wf_add, "Element-wise a + b with broadcasting."},
    {"subtract", wf_subtract, "Element-wise a - b."},
    {"multiply", wf_multiply, "Element-wise a * b."},
    {"divide", wf_divide, "Element-wise true division."},
    {"power", wf_power, "Element-wise a ** b."},
    {"maximum", wf_maximum, "Element-wise maximum (NaN propagates)."},
    {"minimum", wf_minimum, "Element-wise minimum (NaN propagates)."},
    {"floor_divide", wf_floor_divide, "Element-wise floor division (Python's //)."},
    {"remainder", wf_remainder, "Element-wise remainder with the divisor's sign (Python's %)."},
    {"equal", wf_equal, "Element-wise a == b."},
    {"not_equal", wf_not_equal, "Element-wise a != b."},
    {"less", wf_less, "Element-wise a < b."},
    {"less_equal", wf_less_equal, "Element-wise a <= b."},
    {"greater", wf_greater, "Element-wise a > b."},
    {"greater_equal", wf_greater_equal, "Element-wise a >= b."},
    {"logical_and", wf_logical_and, "Element-wise logical and."},
    {"logical_or", wf_logical_or, "Element-wise logical or."},
    {"logaddexp", wf_logaddexp, "Element-wise log(exp(a) + exp(b)), computed stably."},
    {"arctan2", wf_arctan2, "Element-wise angle of the point (b, a)."},
    {"_complex_from_parts", wf_complex, "a + i b as complex64 (a and b real), exactly."},
    {"bitwise_and", wf_bitwise_and, "Element-wise a & b of bool or integer arrays."},
    {"bitwise_or", wf_bitwise_or, "Element-wise a | b."},
    {"bitwise_xor", wf_bitwise_xor, "Element-wise a ^ b."},
    {"left_shift", wf_left_shift, "Element-wise a << b."},
    {"right_shift", wf_right_shift, "Element-wise a >> b."},
    {"matmul", wf_matmul, "Matrix product with NumPy's matmul rules."},
};

static PyObject *call_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    const binary_entry *entry = PyCapsule_GetPointer(self, NULL);
    static const char *const names[] = {"a", "b", "stream", NULL};
    PyObject *given[3];
    if (!weftpy_parse_args(entry->name, args, nargs, kwnames, names, 2, 2, given))
        return NULL;
    stream_scope scope;
    if (!stream_scope_enter(given[2], &scope))
        return NULL;
    wf_array *out = weftpy_binary(entry->fn, given[0], given[1]);
    stream_scope_leave(&scope);
    if (out == NULL && PyErr_Occurred())
        return NULL;
    return weftpy_array_wrap(out);
}

/* ------------------------------------------------------------ reductions */

typedef struct {
    const char *name;
    wf_array *(*fn)(wf_array *, const int *, int, bool);
    const char *doc;
} reduce_entry;

static const reduce_entry reduce_ops[] = {
    {"sum", wf_sum, "Sum over axis (None: every axis)."},
    {"mean", wf_mean, "Mean over axis."},
    {"prod", wf_prod, "Product over axis."},
    {"max", wf_max, "Maximum over axis."},
    {"min", wf_min, "Minimum over axis."},
    {"all", wf_all, "True where every element is nonzero."},
    {"any", wf_any, "True where any element is nonzero."},
    {"logsumexp", wf_logsumexp, "log(sum(exp(a))) over axis, computed stably."},
};

/* max and min have no identity: reducing an empty axis is a ValueError, as
 * in NumPy and MLX. */
static bool reduces_empty_axis(wf_array *a, const int *axes, int naxes)
{
    const int ndim = wf_array_ndim(a);
    if (naxes < 0)
        return wf_array_size(a) == 0;
    for (int i = 0; i < naxes; i++) {
        const int axis = axes[i] < 0 ? axes[i] + ndim : axes[i];
        if (axis >= 0 && axis < ndim && wf_array_shape(a)[axis] == 0)
            return true;
    }
    return false;
}

static PyObject *call_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    const reduce_entry *entry = PyCapsule_GetPointer(self, NULL);
    static const char *const names[] = {"a", "axis", "keepdims", "stream", NULL};
    PyObject *given[4];
    if (!weftpy_parse_args(entry->name, args, nargs, kwnames, names, 1, 1, given))
        return NULL;
    int axes[WF_MAX_NDIM], naxes;
    if (!weftpy_axes(given[1], axes, &naxes))
        return NULL;
    const int keepdims = given[2] != NULL ? PyObject_IsTrue(given[2]) : 0;
    if (keepdims < 0)
        return NULL;
    wf_array *a = weftpy_array_from_object(given[0], WF_DTYPE_COUNT);
    if (a == NULL)
        return NULL;
    if ((entry->fn == wf_max || entry->fn == wf_min) && reduces_empty_axis(a, axes, naxes)) {
        PyErr_Format(PyExc_ValueError, "%s: cannot reduce an empty axis (no identity)",
                     entry->name);
        wf_release(a);
        return NULL;
    }
    stream_scope scope;
    wf_array *out = NULL;
    if (stream_scope_enter(given[3], &scope)) {
        out = entry->fn(a, naxes < 0 ? NULL : axes, naxes < 0 ? 0 : naxes, keepdims);
        stream_scope_leave(&scope);
    }
    wf_release(a);
    if (out == NULL && PyErr_Occurred())
        return NULL;
    return weftpy_array_wrap(out);
}

/* ------------------------------------------------------------ registration */

typedef PyObject *(*fastcall_fn)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);

/* Adds a module function whose `self` is a capsule around `entry`. The
 * PyMethodDef must outlive the module: it is one slot of `defs`. */
static int add_table_function(PyObject *module, PyMethodDef *def, const char *name,
                              const char *doc, fastcall_fn trampoline, const void *entry)
{
    def->ml_name = name;
    def->ml_meth = (PyCFunction)(void (*)(void))trampoline;
    def->ml_flags = METH_FASTCALL | METH_KEYWORDS;
    def->ml_doc = doc;
    PyObject *capsule = PyCapsule_New((void *)entry, NULL, NULL);
    if (capsule == NULL)
        return -1;
    PyObject *module_name = PyModule_GetNameObject(module);
    PyObject *fn = module_name != NULL ? PyCMethod_New(def, capsule, module_name, NULL) : NULL;
    Py_XDECREF(module_name);
    Py_DECREF(capsule);
    if (fn == NULL)
        return -1;
    return PyModule_AddObject(module, name, fn) < 0 ? (Py_DECREF(fn), -1) : 0;
}

#define COUNT_OF(table) (sizeof(table) / sizeof((table)[0]))

static PyMethodDef unary_defs[COUNT_OF(unary_ops)];
static PyMethodDef binary_defs[COUNT_OF(binary_ops)];
static PyMethodDef reduce_defs[COUNT_OF(reduce_ops)];

static int add_tables(PyObject *module)
{
    for (size_t i = 0; i < COUNT_OF(unary_ops); i++)
        if (add_table_function(module, &unary_defs[i], unary_ops[i].name, unary_ops[i].doc,
                               call_unary, &unary_ops[i]) < 0)
            return -1;
    for (size_t i = 0; i < COUNT_OF(binary_ops); i++)
        if (add_table_function(module, &binary_defs[i], binary_ops[i].name, binary_ops[i].doc,
                               call_binary, &binary_ops[i]) < 0)
            return -1;
    for (size_t i = 0; i < COUNT_OF(reduce_ops); i++)
        if (add_table_function(module, &reduce_defs[i], reduce_ops[i].name, reduce_ops[i].doc,
                               call_reduce, &reduce_ops[i]) < 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------ helpers for the rest */

/* Parses, converts `array_args` leading arguments to arrays, pushes the
 * stream (the last name must be "stream"). */
typedef struct {
    PyObject *given[12];
    wf_array *arrays[4];
    int narrays;
    stream_scope scope;
} op_call;

static bool op_begin(op_call *call, const char *fname, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, const char *const *names, int npositional_only,
                     int nrequired, int array_args)
{
    call->narrays = 0;
    if (!weftpy_parse_args(fname, args, nargs, kwnames, names, npositional_only, nrequired,
                           call->given))
        return false;
    int nnames = 0;
    while (names[nnames] != NULL)
        nnames++;
    for (int i = 0; i < array_args; i++) {
        if (call->given[i] == NULL || call->given[i] == Py_None) {
            call->arrays[call->narrays++] = NULL;
            continue;
        }
        wf_array *a = weftpy_array_from_object(call->given[i], WF_DTYPE_COUNT);
        if (a == NULL) {
            for (int j = 0; j < call->narrays; j++)
                wf_release(call->arrays[j]);
            call->narrays = 0;
            return false;
        }
        call->arrays[call->narrays++] = a;
    }
    if (!stream_scope_enter(call->given[nnames - 1], &call->scope)) {
        for (int j = 0; j < call->narrays; j++)
            wf_release(call->arrays[j]);
        call->narrays = 0;
        return false;
    }
    return true;
}

static PyObject *op_end(op_call *call, wf_array *out)
{
    stream_scope_leave(&call->scope);
    for (int j = 0; j < call->narrays; j++)
        wf_release(call->arrays[j]);
    if (out == NULL && PyErr_Occurred())
        return NULL;
    return weftpy_array_wrap(out);
}

static bool bool_arg(PyObject *obj, bool fallback, bool *out)
{
    if (obj == NULL) {
        *out = fallback;
        return true;
    }
    const int truth = PyObject_IsTrue(obj);
    if (truth < 0)
        return false;
    *out = truth != 0;
    return true;
}

static bool int_arg(PyObject *obj, long fallback, long *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = fallback;
        return true;
    }
    *out = PyLong_AsLong(obj);
    return !(*out == -1 && PyErr_Occurred());
}

static bool double_arg(PyObject *obj, double fallback, double *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = fallback;
        return true;
    }
    *out = PyFloat_AsDouble(obj);
    return !(*out == -1.0 && PyErr_Occurred());
}

/* The array flattened to 1-d (for axis=None in arg-reductions and scans). */
static wf_array *flat(wf_array *a)
{
    const int64_t shape[1] = {-1};
    return wf_reshape(a, shape, 1);
}

#define FASTCALL_ARGS PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames

/* ------------------------------------------------------------ reductions with extras */

static PyObject *variance_like(FASTCALL_ARGS, const char *fname,
                               wf_array *(*fn)(wf_array *, const int *, int, bool, int))
{
    (void)module;
    static const char *const names[] = {"a", "axis", "keepdims", "ddof", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    int axes[WF_MAX_NDIM], naxes;
    bool keepdims;
    long ddof;
    wf_array *out = NULL;
    if (weftpy_axes(call.given[1], axes, &naxes) && bool_arg(call.given[2], false, &keepdims) &&
        int_arg(call.given[3], 0, &ddof))
        out = fn(call.arrays[0], naxes < 0 ? NULL : axes, naxes < 0 ? 0 : naxes, keepdims,
                 (int)ddof);
    return op_end(&call, out);
}

static PyObject *op_var(FASTCALL_ARGS)
{
    return variance_like(module, args, nargs, kwnames, "var", wf_var);
}

static PyObject *op_std(FASTCALL_ARGS)
{
    return variance_like(module, args, nargs, kwnames, "std", wf_std);
}

static PyObject *arg_reduce(FASTCALL_ARGS, const char *fname, wf_array *(*fn)(wf_array *, int, bool))
{
    (void)module;
    static const char *const names[] = {"a", "axis", "keepdims", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    bool keepdims;
    long axis = 0;
    wf_array *out = NULL;
    if (bool_arg(call.given[2], false, &keepdims) && int_arg(call.given[1], 0, &axis)) {
        if (call.given[1] == NULL || call.given[1] == Py_None) {
            wf_array *flattened = flat(call.arrays[0]);
            out = fn(flattened, 0, false);
            wf_release(flattened);
            if (out != NULL && keepdims) {
                int64_t ones[WF_MAX_NDIM];
                for (int i = 0; i < wf_array_ndim(call.arrays[0]); i++)
                    ones[i] = 1;
                wf_array *shaped = wf_reshape(out, ones, wf_array_ndim(call.arrays[0]));
                wf_release(out);
                out = shaped;
            }
        } else {
            out = fn(call.arrays[0], (int)axis, keepdims);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_argmax(FASTCALL_ARGS)
{
    return arg_reduce(module, args, nargs, kwnames, "argmax", wf_argmax);
}

static PyObject *op_argmin(FASTCALL_ARGS)
{
    return arg_reduce(module, args, nargs, kwnames, "argmin", wf_argmin);
}

static PyObject *scan(FASTCALL_ARGS, const char *fname, wf_array *(*fn)(wf_array *, int, bool, bool))
{
    (void)module;
    static const char *const names[] = {"a", "axis", "reverse", "inclusive", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    bool reverse, inclusive;
    long axis;
    wf_array *out = NULL;
    if (bool_arg(call.given[2], false, &reverse) && bool_arg(call.given[3], true, &inclusive) &&
        int_arg(call.given[1], 0, &axis)) {
        if (call.given[1] == NULL || call.given[1] == Py_None) {
            wf_array *flattened = flat(call.arrays[0]);
            out = fn(flattened, 0, reverse, inclusive);
            wf_release(flattened);
        } else {
            out = fn(call.arrays[0], (int)axis, reverse, inclusive);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_cumsum(FASTCALL_ARGS)
{
    return scan(module, args, nargs, kwnames, "cumsum", wf_cumsum);
}

static PyObject *op_cummax(FASTCALL_ARGS)
{
    return scan(module, args, nargs, kwnames, "cummax", wf_cummax);
}

static PyObject *op_cummin(FASTCALL_ARGS)
{
    return scan(module, args, nargs, kwnames, "cummin", wf_cummin);
}

static PyObject *op_logcumsumexp(FASTCALL_ARGS)
{
    return scan(module, args, nargs, kwnames, "logcumsumexp", wf_logcumsumexp);
}

/* sort(a, axis=-1) and argsort: axis None sorts the flattened array. */
static PyObject *sort_like(FASTCALL_ARGS, const char *fname, wf_array *(*fn)(wf_array *, int))
{
    (void)module;
    static const char *const names[] = {"a", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    long axis;
    wf_array *out = NULL;
    if (int_arg(call.given[1], -1, &axis)) {
        if (call.given[1] == Py_None) {
            wf_array *flattened = flat(call.arrays[0]);
            out = fn(flattened, 0);
            wf_release(flattened);
        } else {
            out = fn(call.arrays[0], (int)axis);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_sort(FASTCALL_ARGS)
{
    return sort_like(module, args, nargs, kwnames, "sort", wf_sort);
}

static PyObject *op_argsort(FASTCALL_ARGS)
{
    return sort_like(module, args, nargs, kwnames, "argsort", wf_argsort);
}

/* partition(a, kth, axis=-1), argpartition, topk(a, k, axis=-1). */
static PyObject *select_like(FASTCALL_ARGS, const char *fname, const char *count_name,
                             wf_array *(*fn)(wf_array *, int64_t, int))
{
    (void)module;
    const char *const names[] = {"a", count_name, "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    long count, axis;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &count) && int_arg(call.given[2], -1, &axis)) {
        if (call.given[2] == Py_None) {
            wf_array *flattened = flat(call.arrays[0]);
            out = fn(flattened, count, 0);
            wf_release(flattened);
        } else {
            out = fn(call.arrays[0], count, (int)axis);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_partition(FASTCALL_ARGS)
{
    return select_like(module, args, nargs, kwnames, "partition", "kth", wf_partition);
}

static PyObject *op_argpartition(FASTCALL_ARGS)
{
    return select_like(module, args, nargs, kwnames, "argpartition", "kth", wf_argpartition);
}

static PyObject *op_topk(FASTCALL_ARGS)
{
    return select_like(module, args, nargs, kwnames, "topk", "k", wf_topk);
}

/* searchsorted(a, v, side="left"): positions in the 1-d sorted a. */
static PyObject *op_searchsorted(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "v", "side", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "searchsorted", args, nargs, kwnames, names, 2, 2, 2))
        return NULL;
    PyObject *side = call.given[2];
    const bool right = side != NULL && PyUnicode_Check(side) &&
                       PyUnicode_CompareWithASCIIString(side, "right") == 0;
    if (side != NULL && !right &&
        !(PyUnicode_Check(side) && PyUnicode_CompareWithASCIIString(side, "left") == 0)) {
        PyErr_Format(PyExc_ValueError, "searchsorted: side must be 'left' or 'right', not %R",
                     side);
        return op_end(&call, NULL);
    }
    return op_end(&call, wf_searchsorted(call.arrays[0], call.arrays[1], right));
}

static PyObject *op_view(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "view", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    wf_dtype dtype;
    wf_array *out = NULL;
    if (weftpy_dtype_from_object(call.given[1], false, &dtype))
        out = wf_view(call.arrays[0], dtype);
    return op_end(&call, out);
}

static PyObject *op_cumprod(FASTCALL_ARGS)
{
    return scan(module, args, nargs, kwnames, "cumprod", wf_cumprod);
}

static PyObject *op_softmax(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "axis", "precise", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "softmax", args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    int axes[WF_MAX_NDIM], naxes;
    wf_array *out = NULL;
    if (weftpy_axes(call.given[1], axes, &naxes)) {
        if (naxes < 0) {
            naxes = wf_array_ndim(call.arrays[0]);
            for (int i = 0; i < naxes; i++)
                axes[i] = i;
        }
        out = wf_softmax(call.arrays[0], axes, naxes);
    }
    return op_end(&call, out);
}

/* ------------------------------------------------------------ shape ops */

static PyObject *op_reshape(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "shape", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "reshape", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_array *out = NULL;
    if (weftpy_shape_list(call.given[1], "shape must be a sequence of ints", shape, &ndim))
        out = wf_reshape(call.arrays[0], shape, ndim);
    return op_end(&call, out);
}

static PyObject *op_transpose(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "axes", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "transpose", args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    int axes[WF_MAX_NDIM], naxes;
    wf_array *out = NULL;
    if (weftpy_axes(call.given[1], axes, &naxes))
        out = wf_transpose(call.arrays[0], naxes < 0 ? NULL : axes, naxes < 0 ? 0 : naxes);
    return op_end(&call, out);
}

static PyObject *op_swapaxes(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "axis1", "axis2", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "swapaxes", args, nargs, kwnames, names, 1, 3, 1))
        return NULL;
    long a1, a2;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &a1) && int_arg(call.given[2], 0, &a2))
        out = wf_swapaxes(call.arrays[0], (int)a1, (int)a2);
    return op_end(&call, out);
}

static PyObject *op_moveaxis(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "source", "destination", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "moveaxis", args, nargs, kwnames, names, 1, 3, 1))
        return NULL;
    long s, d;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &s) && int_arg(call.given[2], 0, &d))
        out = wf_moveaxis(call.arrays[0], (int)s, (int)d);
    return op_end(&call, out);
}

static PyObject *op_expand_dims(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "expand_dims", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    int axes[WF_MAX_NDIM], naxes;
    wf_array *out = NULL;
    if (weftpy_axes(call.given[1], axes, &naxes))
        out = wf_expand_dims(call.arrays[0], axes, naxes < 0 ? 0 : naxes);
    return op_end(&call, out);
}

static PyObject *op_squeeze(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "squeeze", args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    int axes[WF_MAX_NDIM], naxes;
    wf_array *out = NULL;
    if (weftpy_axes(call.given[1], axes, &naxes))
        out = wf_squeeze(call.arrays[0], naxes < 0 ? NULL : axes, naxes < 0 ? 0 : naxes);
    return op_end(&call, out);
}

static PyObject *op_unflatten(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "axis", "shape", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "unflatten", args, nargs, kwnames, names, 1, 3, 1))
        return NULL;
    long axis;
    int64_t shape[WF_MAX_NDIM];
    int n;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &axis) &&
        weftpy_shape_list(call.given[2], "shape must be a sequence of ints", shape, &n))
        out = wf_unflatten(call.arrays[0], (int)axis, shape, n);
    return op_end(&call, out);
}

static PyObject *op_flatten(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "start_axis", "end_axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "flatten", args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    long start, end;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &start) && int_arg(call.given[2], -1, &end)) {
        if (wf_array_ndim(call.arrays[0]) == 0) {
            const int64_t one[1] = {1};
            out = wf_reshape(call.arrays[0], one, 1);
        } else {
            out = wf_flatten(call.arrays[0], (int)start, (int)end);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_broadcast_to(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "shape", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "broadcast_to", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_array *out = NULL;
    if (weftpy_shape_list(call.given[1], "shape must be a sequence of ints", shape, &ndim))
        out = wf_broadcast_to(call.arrays[0], shape, ndim);
    return op_end(&call, out);
}

/* A list of arrays from a sequence argument; *count entries, each a new
 * reference (release with release_arrays). */
static wf_array **array_list(PyObject *seq_obj, int *count)
{
    PyObject *seq = PySequence_Fast(seq_obj, "expected a list or tuple of arrays");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    wf_array **arrays = PyMem_Calloc((size_t)n + 1, sizeof *arrays);
    if (arrays == NULL) {
        Py_DECREF(seq);
        return (wf_array **)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        arrays[i] = weftpy_array_from_object(PySequence_Fast_GET_ITEM(seq, i), WF_DTYPE_COUNT);
        if (arrays[i] == NULL) {
            for (Py_ssize_t j = 0; j < i; j++)
                wf_release(arrays[j]);
            PyMem_Free(arrays);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    *count = (int)n;
    return arrays;
}

static void release_arrays(wf_array **arrays, int count)
{
    for (int i = 0; i < count; i++)
        wf_release(arrays[i]);
    PyMem_Free(arrays);
}

static PyObject *join(FASTCALL_ARGS, const char *fname,
                      wf_array *(*fn)(wf_array *const *, int, int))
{
    (void)module;
    static const char *const names[] = {"arrays", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 0))
        return NULL;
    long axis;
    wf_array *out = NULL;
    int count = 0;
    if (int_arg(call.given[1], 0, &axis)) {
        wf_array **arrays = array_list(call.given[0], &count);
        if (arrays != NULL) {
            if (call.given[1] == Py_None && fn == wf_concatenate) {
                for (int i = 0; i < count; i++) {
                    wf_array *flattened = flat(arrays[i]);
                    wf_release(arrays[i]);
                    arrays[i] = flattened;
                }
            }
            out = fn(arrays, count, (int)axis);
            release_arrays(arrays, count);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_concatenate(FASTCALL_ARGS)
{
    return join(module, args, nargs, kwnames, "concatenate", wf_concatenate);
}

static PyObject *op_stack(FASTCALL_ARGS)
{
    return join(module, args, nargs, kwnames, "stack", wf_stack);
}

/* split(a, indices_or_sections, axis=0) -> list of arrays. */
static PyObject *op_split(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "indices_or_sections", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "split", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    long axis;
    PyObject *result = NULL;
    if (!int_arg(call.given[2], 0, &axis))
        goto done;
    wf_array *parts[WF_MAX_NDIM + 1];
    wf_array **out = parts;
    int count;
    wf_status status;
    if (PyLong_Check(call.given[1])) {
        const long sections = PyLong_AsLong(call.given[1]);
        if (sections == -1 && PyErr_Occurred())
            goto done;
        if (sections <= 0 || sections > 1 << 20) {
            PyErr_SetString(PyExc_ValueError, "split: sections must be positive");
            goto done;
        }
        count = (int)sections;
        out = count > WF_MAX_NDIM + 1 ? PyMem_Calloc((size_t)count, sizeof *out) : parts;
        if (out == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        status = wf_split(call.arrays[0], count, (int)axis, out);
    } else {
        int64_t indices[WF_MAX_NDIM];
        int nindices;
        if (!weftpy_int64_list(call.given[1], "indices must be a sequence of ints", indices,
                               &nindices))
            goto done;
        count = nindices + 1;
        status = wf_split_at(call.arrays[0], indices, nindices, (int)axis, out);
    }
    if (status == WF_OK) {
        result = PyList_New(count);
        for (int i = 0; i < count; i++) {
            PyObject *item = result != NULL ? weftpy_array_wrap(out[i]) : NULL;
            if (result == NULL)
                wf_release(out[i]);
            else if (item == NULL)
                Py_CLEAR(result);
            else
                PyList_SET_ITEM(result, i, item);
        }
    } else {
        weftpy_raise_weft_error();
    }
    if (out != parts)
        PyMem_Free(out);
done:
    stream_scope_leave(&call.scope);
    for (int j = 0; j < call.narrays; j++)
        wf_release(call.arrays[j]);
    return result;
}

/* pad(a, pad_width, mode="constant", constant_values=0). */
static PyObject *op_pad(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "pad_width", "mode", "constant_values", "stream",
                                        NULL};
    op_call call;
    if (!op_begin(&call, "pad", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    wf_array *out = NULL;
    const int ndim = wf_array_ndim(call.arrays[0]);
    int64_t low[WF_MAX_NDIM], high[WF_MAX_NDIM];
    double value;
    if (call.given[2] != NULL && PyUnicode_Check(call.given[2]) &&
        PyUnicode_CompareWithASCIIString(call.given[2], "constant") != 0) {
        PyErr_SetString(PyExc_ValueError, "pad: only mode='constant' is supported");
        return op_end(&call, NULL);
    }
    if (!double_arg(call.given[3], 0.0, &value))
        return op_end(&call, NULL);
    /* pad_width: an int, (before, after), or one pair per axis. */
    PyObject *width = call.given[1];
    if (PyLong_Check(width)) {
        const long w = PyLong_AsLong(width);
        if (w == -1 && PyErr_Occurred())
            return op_end(&call, NULL);
        for (int i = 0; i < ndim; i++)
            low[i] = high[i] = w;
    } else {
        PyObject *seq = PySequence_Fast(width, "pad_width must be an int or sequence");
        if (seq == NULL)
            return op_end(&call, NULL);
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        bool pairs = n > 0 && PySequence_Check(PySequence_Fast_GET_ITEM(seq, 0));
        for (int i = 0; i < ndim; i++) {
            PyObject *entry = pairs ? PySequence_Fast_GET_ITEM(seq, n == 1 ? 0 : i) : seq;
            if (pairs && n != 1 && n != ndim) {
                PyErr_SetString(PyExc_ValueError, "pad_width must have one pair per axis");
                Py_DECREF(seq);
                return op_end(&call, NULL);
            }
            int64_t pair[WF_MAX_NDIM];
            int count;
            if (!weftpy_int64_list(entry, "pad_width entries must be ints", pair, &count)) {
                Py_DECREF(seq);
                return op_end(&call, NULL);
            }
            low[i] = pair[0];
            high[i] = count > 1 ? pair[1] : pair[0];
        }
        Py_DECREF(seq);
    }
    out = wf_pad(call.arrays[0], low, high, value);
    return op_end(&call, out);
}

static PyObject *triangle(FASTCALL_ARGS, const char *fname, wf_array *(*fn)(wf_array *, int64_t))
{
    (void)module;
    static const char *const names[] = {"x", "k", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    long k;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &k))
        out = fn(call.arrays[0], k);
    return op_end(&call, out);
}

static PyObject *op_tril(FASTCALL_ARGS)
{
    return triangle(module, args, nargs, kwnames, "tril", wf_tril);
}

static PyObject *op_triu(FASTCALL_ARGS)
{
    return triangle(module, args, nargs, kwnames, "triu", wf_triu);
}

static PyObject *op_repeat(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"array", "repeats", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "repeat", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    long repeats, axis;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 1, &repeats) && int_arg(call.given[2], 0, &axis)) {
        if (call.given[2] == NULL || call.given[2] == Py_None) {
            wf_array *flattened = flat(call.arrays[0]);
            out = wf_repeat(flattened, repeats, 0);
            wf_release(flattened);
        } else {
            out = wf_repeat(call.arrays[0], repeats, (int)axis);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_tile(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "reps", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "tile", args, nargs, kwnames, names, 1, 2, 1))
        return NULL;
    int64_t reps[WF_MAX_NDIM];
    int nreps;
    wf_array *out = NULL;
    if (weftpy_int64_list(call.given[1], "reps must be an int or a sequence of ints", reps, &nreps))
        out = wf_tile(call.arrays[0], reps, nreps);
    return op_end(&call, out);
}

/* ------------------------------------------------------------ selection and indexing */

static PyObject *op_where(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"condition", "x", "y", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "where", args, nargs, kwnames, names, 3, 3, 1))
        return NULL;
    /* x and y: Python scalars take the other's dtype (weak typing). */
    wf_array *x = weftpy_operand(call.given[1], call.given[2]);
    wf_array *y = x != NULL ? weftpy_operand(call.given[2], call.given[1]) : NULL;
    wf_array *out = y != NULL ? wf_where(call.arrays[0], x, y) : NULL;
    wf_release(x);
    wf_release(y);
    return op_end(&call, out);
}

static PyObject *op_clip(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "a_min", "a_max", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "clip", args, nargs, kwnames, names, 1, 3, 1))
        return NULL;
    PyObject *self_obj = call.given[0];
    wf_array *low = NULL, *high = NULL, *out = NULL;
    bool ok = true;
    if (call.given[1] != Py_None)
        ok = (low = weftpy_operand(call.given[1], WeftArray_Check(self_obj) ? self_obj : NULL)) != NULL;
    if (ok && call.given[2] != Py_None)
        ok = (high = weftpy_operand(call.given[2], WeftArray_Check(self_obj) ? self_obj : NULL)) != NULL;
    if (ok && low == NULL && high == NULL) {
        PyErr_SetString(PyExc_ValueError, "clip: a_min and a_max cannot both be None");
        ok = false;
    }
    if (ok)
        out = wf_clip(call.arrays[0], low, high);
    wf_release(low);
    wf_release(high);
    return op_end(&call, out);
}

static PyObject *op_take(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "indices", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "take", args, nargs, kwnames, names, 1, 2, 2))
        return NULL;
    long axis;
    wf_array *out = NULL;
    if (int_arg(call.given[2], 0, &axis)) {
        if (call.given[2] == NULL || call.given[2] == Py_None) {
            wf_array *flattened = flat(call.arrays[0]);
            out = wf_take(flattened, call.arrays[1], 0);
            wf_release(flattened);
        } else {
            out = wf_take(call.arrays[0], call.arrays[1], (int)axis);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_take_along_axis(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "indices", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "take_along_axis", args, nargs, kwnames, names, 1, 2, 2))
        return NULL;
    long axis;
    wf_array *out = NULL;
    if (int_arg(call.given[2], 0, &axis)) {
        if (call.given[2] == NULL || call.given[2] == Py_None) {
            wf_array *fa = flat(call.arrays[0]), *fi = flat(call.arrays[1]);
            out = wf_take_along_axis(fa, fi, 0);
            wf_release(fa);
            wf_release(fi);
        } else {
            out = wf_take_along_axis(call.arrays[0], call.arrays[1], (int)axis);
        }
    }
    return op_end(&call, out);
}

/* put_along_axis(a, indices, values, axis=None): axis None puts into the
 * flattened a and gives back a's shape (MLX's behaviour). */
static PyObject *op_put_along_axis(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "indices", "values", "axis", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "put_along_axis", args, nargs, kwnames, names, 1, 3, 3))
        return NULL;
    long axis;
    wf_array *out = NULL;
    if (int_arg(call.given[3], 0, &axis)) {
        if (call.given[3] == NULL || call.given[3] == Py_None) {
            wf_array *fa = flat(call.arrays[0]);
            wf_array *put = wf_put_along_axis(fa, call.arrays[1], call.arrays[2], 0,
                                              WF_SCATTER_REPLACE);
            int64_t shape[WF_MAX_NDIM];
            int ndim = wf_array_ndim(call.arrays[0]);
            for (int d = 0; d < ndim; d++)
                shape[d] = wf_array_dim(call.arrays[0], d);
            out = put ? wf_reshape(put, shape, ndim) : NULL;
            wf_release(put);
            wf_release(fa);
        } else {
            out = wf_put_along_axis(call.arrays[0], call.arrays[1], call.arrays[2], (int)axis,
                                    WF_SCATTER_REPLACE);
        }
    }
    return op_end(&call, out);
}

static PyObject *op_addmm(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"c", "a", "b", "alpha", "beta", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "addmm", args, nargs, kwnames, names, 3, 3, 3))
        return NULL;
    double alpha, beta;
    wf_array *out = NULL;
    if (double_arg(call.given[3], 1.0, &alpha) && double_arg(call.given[4], 1.0, &beta))
        out = wf_addmm(call.arrays[0], call.arrays[1], call.arrays[2], alpha, beta);
    return op_end(&call, out);
}

/* ------------------------------------------------------------ creation */

static bool dtype_arg(PyObject *obj, wf_dtype fallback, wf_dtype *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = fallback;
        return true;
    }
    return weftpy_dtype_from_object(obj, false, out);
}

/* full(shape, vals, dtype=None): vals may be an array (broadcast to shape). */
static PyObject *op_full(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"shape", "vals", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "full", args, nargs, kwnames, names, 0, 2, 0))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_dtype dtype;
    wf_array *out = NULL;
    if (weftpy_shape_list(call.given[0], "shape must be an int or a sequence of ints", shape,
                          &ndim) &&
        dtype_arg(call.given[2], WF_DTYPE_COUNT, &dtype)) {
        wf_array *vals = weftpy_array_from_object(call.given[1], dtype);
        if (vals != NULL) {
            out = wf_broadcast_to(vals, shape, ndim);
            /* A dense copy, not a broadcast view, as MLX's full gives. */
            if (out != NULL) {
                wf_array *zeros = wf_zeros(shape, ndim, wf_array_dtype(out));
                wf_array *dense = wf_add(zeros, out);
                wf_release(zeros);
                wf_release(out);
                out = dense;
            }
            wf_release(vals);
        }
    }
    return op_end(&call, out);
}

static PyObject *filled(FASTCALL_ARGS, const char *fname, double value)
{
    (void)module;
    static const char *const names[] = {"shape", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 0, 1, 0))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_dtype dtype;
    wf_array *out = NULL;
    if (weftpy_shape_list(call.given[0], "shape must be an int or a sequence of ints", shape,
                          &ndim) &&
        dtype_arg(call.given[1], WF_DTYPE_F32, &dtype))
        out = wf_full(shape, ndim, value, dtype);
    return op_end(&call, out);
}

static PyObject *op_zeros(FASTCALL_ARGS)
{
    return filled(module, args, nargs, kwnames, "zeros", 0.0);
}

static PyObject *op_ones(FASTCALL_ARGS)
{
    return filled(module, args, nargs, kwnames, "ones", 1.0);
}

static PyObject *filled_like(FASTCALL_ARGS, const char *fname, double value)
{
    (void)module;
    static const char *const names[] = {"a", "stream", NULL};
    op_call call;
    if (!op_begin(&call, fname, args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    return op_end(&call, wf_full_like(call.arrays[0], value));
}

static PyObject *op_zeros_like(FASTCALL_ARGS)
{
    return filled_like(module, args, nargs, kwnames, "zeros_like", 0.0);
}

static PyObject *op_ones_like(FASTCALL_ARGS)
{
    return filled_like(module, args, nargs, kwnames, "ones_like", 1.0);
}

/* arange([start,] stop[, step], dtype=None): int32 when every bound is an
 * int, else float32 (MLX's rule). */
static PyObject *op_arange(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"start", "stop", "step", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "arange", args, nargs, kwnames, names, 0, 1, 0))
        return NULL;
    PyObject *start_obj = call.given[0], *stop_obj = call.given[1], *step_obj = call.given[2];
    if (stop_obj == NULL || stop_obj == Py_None) {
        stop_obj = start_obj;
        start_obj = NULL;
    }
    bool all_int = true;
    PyObject *bounds[3] = {start_obj, stop_obj, step_obj};
    double values[3] = {0.0, 0.0, 1.0};
    for (int i = 0; i < 3; i++) {
        if (bounds[i] == NULL || bounds[i] == Py_None)
            continue;
        all_int &= PyLong_Check(bounds[i]);
        if (!double_arg(bounds[i], values[i], &values[i]))
            return op_end(&call, NULL);
    }
    wf_dtype dtype;
    if (!dtype_arg(call.given[3], all_int ? WF_DTYPE_I32 : WF_DTYPE_F32, &dtype))
        return op_end(&call, NULL);
    return op_end(&call, wf_arange(values[0], values[1], values[2], dtype));
}

static PyObject *op_linspace(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"start", "stop", "num", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "linspace", args, nargs, kwnames, names, 0, 2, 0))
        return NULL;
    double start, stop;
    long num;
    wf_dtype dtype;
    wf_array *out = NULL;
    if (double_arg(call.given[0], 0, &start) && double_arg(call.given[1], 0, &stop) &&
        int_arg(call.given[2], 50, &num) && dtype_arg(call.given[3], WF_DTYPE_F32, &dtype))
        out = wf_linspace(start, stop, num, dtype);
    return op_end(&call, out);
}

static PyObject *op_eye(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"n", "m", "k", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "eye", args, nargs, kwnames, names, 0, 1, 0))
        return NULL;
    long n, m, k;
    wf_dtype dtype;
    wf_array *out = NULL;
    if (int_arg(call.given[0], 0, &n) && int_arg(call.given[1], n, &m) &&
        int_arg(call.given[2], 0, &k) && dtype_arg(call.given[3], WF_DTYPE_F32, &dtype))
        out = wf_eye(n, m, k, dtype);
    return op_end(&call, out);
}

static PyObject *op_identity(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"n", "dtype", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "identity", args, nargs, kwnames, names, 0, 1, 0))
        return NULL;
    long n;
    wf_dtype dtype;
    wf_array *out = NULL;
    if (int_arg(call.given[0], 0, &n) && dtype_arg(call.given[1], WF_DTYPE_F32, &dtype))
        out = wf_eye(n, n, 0, dtype);
    return op_end(&call, out);
}

static PyObject *op_round(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"a", "decimals", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "round", args, nargs, kwnames, names, 1, 1, 1))
        return NULL;
    long decimals;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &decimals)) {
        const wf_dtype dtype = wf_array_dtype(call.arrays[0]);
        const bool integer = weftpy_dtype_is_integer(dtype);
        if (decimals == 0 || (integer && decimals > 0)) {
            out = wf_round(call.arrays[0]);
        } else {
            /* integers round to tens, hundreds ... in float64 and keep their
             * dtype (MLX) */
            wf_array *x = integer ? wf_astype(call.arrays[0], WF_DTYPE_F64) : NULL;
            wf_array *src = integer ? x : call.arrays[0];
            wf_array *scale = wf_scalar(pow(10.0, (double)decimals),
                                        integer ? WF_DTYPE_F64 : dtype);
            wf_array *up = wf_multiply(src, scale);
            wf_array *rounded = wf_round(up);
            wf_array *back = wf_divide(rounded, scale);
            out = integer && back ? wf_astype(back, dtype) : wf_retain_unscoped(back);
            wf_release(x);
            wf_release(scale);
            wf_release(up);
            wf_release(rounded);
            wf_release(back);
        }
    }
    return op_end(&call, out);
}

/* ------------------------------------------------------------ fast */

static PyObject *op_layer_norm(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"x", "weight", "bias", "eps", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "layer_norm", args, nargs, kwnames, names, 1, 4, 3))
        return NULL;
    double eps;
    wf_array *out = NULL;
    if (double_arg(call.given[3], 1e-5, &eps))
        out = wf_layer_norm(call.arrays[0], call.arrays[1], call.arrays[2], eps);
    return op_end(&call, out);
}

static PyObject *op_rms_norm(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"x", "weight", "eps", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "rms_norm", args, nargs, kwnames, names, 1, 3, 2))
        return NULL;
    double eps;
    wf_array *out = NULL;
    if (double_arg(call.given[2], 1e-5, &eps))
        out = wf_rms_norm(call.arrays[0], call.arrays[1], eps);
    return op_end(&call, out);
}

static PyObject *op_rope(FASTCALL_ARGS)
{
    (void)module;
    /* custom freqs are composed in weft/fast.py */
    static const char *const names[] = {"a",     "dims",   "traditional", "base",
                                        "scale", "offset", "stream",      NULL};
    op_call call;
    if (!op_begin(&call, "rope", args, nargs, kwnames, names, 1, 6, 1))
        return NULL;
    long dims, offset;
    bool traditional;
    double base, scale;
    wf_array *out = NULL;
    if (int_arg(call.given[1], 0, &dims) && bool_arg(call.given[2], false, &traditional) &&
        double_arg(call.given[3], 10000.0, &base) && double_arg(call.given[4], 1.0, &scale) &&
        int_arg(call.given[5], 0, &offset))
        out = wf_rope(call.arrays[0], (int)dims, traditional, base, scale, offset);
    return op_end(&call, out);
}

/* mask: None, an array (additive or bool), or the string "causal". */
static PyObject *op_sdpa(FASTCALL_ARGS)
{
    (void)module;
    static const char *const names[] = {"q", "k", "v", "scale", "mask", "stream", NULL};
    op_call call;
    if (!op_begin(&call, "scaled_dot_product_attention", args, nargs, kwnames, names, 3, 4, 3))
        return NULL;
    double scale;
    wf_array *mask = NULL, *out = NULL;
    bool causal = false;
    if (!double_arg(call.given[3], 1.0, &scale))
        return op_end(&call, NULL);
    PyObject *mask_obj = call.given[4];
    if (mask_obj != NULL && PyUnicode_Check(mask_obj)) {
        if (PyUnicode_CompareWithASCIIString(mask_obj, "causal") != 0) {
            PyErr_SetString(PyExc_ValueError, "mask must be an array, None or 'causal'");
            return op_end(&call, NULL);
        }
        causal = true;
    } else if (mask_obj != NULL && mask_obj != Py_None) {
        mask = weftpy_array_from_object(mask_obj, WF_DTYPE_COUNT);
        if (mask == NULL)
            return op_end(&call, NULL);
    }
    out = wf_scaled_dot_product_attention(call.arrays[0], call.arrays[1], call.arrays[2], scale,
                                          mask, causal);
    wf_release(mask);
    return op_end(&call, out);
}

/* ------------------------------------------------------------ eval */

/* _eval(list_of_arrays, asynchronous): the package flattens pytrees. The
 * GIL is released for the whole evaluation. */
static PyObject *op_eval(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *list;
    int asynchronous;
    if (!PyArg_ParseTuple(args, "Op:_eval", &list, &asynchronous))
        return NULL;
    int count = 0;
    wf_array **arrays = array_list(list, &count);
    if (arrays == NULL)
        return NULL;
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = asynchronous ? wf_async_eval(arrays, (size_t)count) : wf_eval(arrays, (size_t)count);
    Py_END_ALLOW_THREADS
    release_arrays(arrays, count);
    return weftpy_none_or_raise(status);
}

#define OP(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef op_methods[] = {
    OP("var", op_var, "var(a, axis=None, keepdims=False, ddof=0)"),
    OP("std", op_std, "std(a, axis=None, keepdims=False, ddof=0)"),
    OP("argmax", op_argmax, "argmax(a, axis=None, keepdims=False)"),
    OP("argmin", op_argmin, "argmin(a, axis=None, keepdims=False)"),
    OP("cumsum", op_cumsum, "cumsum(a, axis=None, reverse=False, inclusive=True)"),
    OP("cumprod", op_cumprod, "cumprod(a, axis=None, reverse=False, inclusive=True)"),
    OP("cummax", op_cummax, "cummax(a, axis=None, reverse=False, inclusive=True)"),
    OP("cummin", op_cummin, "cummin(a, axis=None, reverse=False, inclusive=True)"),
    OP("logcumsumexp", op_logcumsumexp, "logcumsumexp(a, axis=None, reverse=False, inclusive=True)"),
    OP("sort", op_sort, "sort(a, axis=-1): sorted along axis (NaNs last)"),
    OP("argsort", op_argsort, "argsort(a, axis=-1): the stable sorting permutation"),
    OP("partition", op_partition, "partition(a, kth, axis=-1)"),
    OP("argpartition", op_argpartition, "argpartition(a, kth, axis=-1)"),
    OP("topk", op_topk, "topk(a, k, axis=-1): the k largest values"),
    OP("searchsorted", op_searchsorted, "searchsorted(a, v, side='left'): insertion positions"),
    OP("view", op_view, "view(a, dtype): the same bytes as another dtype"),
    OP("softmax", op_softmax, "softmax(a, axis=None, precise=False)"),
    OP("reshape", op_reshape, "reshape(a, shape)"),
    OP("transpose", op_transpose, "transpose(a, axes=None)"),
    OP("swapaxes", op_swapaxes, "swapaxes(a, axis1, axis2)"),
    OP("moveaxis", op_moveaxis, "moveaxis(a, source, destination)"),
    OP("expand_dims", op_expand_dims, "expand_dims(a, axis)"),
    OP("squeeze", op_squeeze, "squeeze(a, axis=None)"),
    OP("unflatten", op_unflatten, "unflatten(a, axis, shape)"),
    OP("flatten", op_flatten, "flatten(a, start_axis=0, end_axis=-1)"),
    OP("broadcast_to", op_broadcast_to, "broadcast_to(a, shape)"),
    OP("concatenate", op_concatenate, "concatenate(arrays, axis=0)"),
    OP("stack", op_stack, "stack(arrays, axis=0)"),
    OP("split", op_split, "split(a, indices_or_sections, axis=0)"),
    OP("pad", op_pad, "pad(a, pad_width, mode='constant', constant_values=0)"),
    OP("tril", op_tril, "tril(x, k=0)"),
    OP("triu", op_triu, "triu(x, k=0)"),
    OP("repeat", op_repeat, "repeat(array, repeats, axis=None)"),
    OP("tile", op_tile, "tile(a, reps)"),
    OP("where", op_where, "where(condition, x, y)"),
    OP("clip", op_clip, "clip(a, a_min, a_max)"),
    OP("take", op_take, "take(a, indices, axis=None)"),
    OP("take_along_axis", op_take_along_axis, "take_along_axis(a, indices, axis)"),
    OP("put_along_axis", op_put_along_axis, "put_along_axis(a, indices, values, axis=None)"),
    OP("addmm", op_addmm, "addmm(c, a, b, alpha=1.0, beta=1.0)"),
    OP("full", op_full, "full(shape, vals, dtype=None)"),
    OP("zeros", op_zeros, "zeros(shape, dtype=float32)"),
    OP("ones", op_ones, "ones(shape, dtype=float32)"),
    OP("zeros_like", op_zeros_like, "zeros_like(a)"),
    OP("ones_like", op_ones_like, "ones_like(a)"),
    OP("arange", op_arange, "arange(start, stop, step, dtype=None)"),
    OP("linspace", op_linspace, "linspace(start, stop, num=50, dtype=float32)"),
    OP("eye", op_eye, "eye(n, m=None, k=0, dtype=float32)"),
    OP("identity", op_identity, "identity(n, dtype=float32)"),
    OP("round", op_round, "round(a, decimals=0)"),
    OP("_layer_norm", op_layer_norm, "layer_norm(x, weight, bias, eps)"),
    OP("_rms_norm", op_rms_norm, "rms_norm(x, weight, eps)"),
    OP("_rope", op_rope, "rope(a, dims, traditional, base, scale, offset)"),
    OP("_scaled_dot_product_attention", op_sdpa,
       "scaled_dot_product_attention(q, k, v, scale, mask=None)"),
    {"_index_scatter", weftpy_index_scatter, METH_VARARGS,
     "_index_scatter(a, index, value, mode): a.at[index] combined by a scatter mode."},
    {"_eval", op_eval, METH_VARARGS, "_eval(arrays, asynchronous): evaluates a list of arrays."},
    {NULL, NULL, 0, NULL},
};

int weftpy_ops_init(PyObject *module)
{
    if (add_tables(module) < 0)
        return -1;
    return PyModule_AddFunctions(module, op_methods);
}
