/*
 * convert.c - Python objects to arrays (scalars, nested sequences, buffers)
 * and arrays back to Python (item, tolist, the buffer protocol).
 */
#include "weft_py.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ small helpers */

PyObject *weftpy_shape_tuple(const int64_t *shape, int ndim)
{
    PyObject *tuple = PyTuple_New(ndim);
    if (tuple == NULL)
        return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *dim = PyLong_FromLongLong(shape[i]);
        if (dim == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, dim);
    }
    return tuple;
}

/* An index-like Python object (int, NumPy integer, 0-d integer array) as a
 * C integer; false with TypeError for anything else. */
static bool int64_from_index(PyObject *obj, int64_t *out)
{
    if (WeftArray_Check(obj)) {
        WeftArray *a = (WeftArray *)obj;
        if (wf_array_size(a->handle) != 1 ||
            !weftpy_dtype_is_integer(wf_array_dtype(a->handle))) {
            PyErr_SetString(PyExc_TypeError, "only integer scalar arrays can be indices");
            return false;
        }
        PyObject *item = weftpy_array_item(a->handle);
        if (item == NULL)
            return false;
        long long v = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if (v == -1 && PyErr_Occurred())
            return false;
        *out = v;
        return true;
    }
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL)
        return false;
    long long v = PyLong_AsLongLong(index);
    Py_DECREF(index);
    if (v == -1 && PyErr_Occurred())
        return false;
    *out = v;
    return true;
}

bool weftpy_int64_list(PyObject *obj, const char *what, int64_t *out, int *count)
{
    if (PyLong_Check(obj)) {
        *count = 1;
        return int64_from_index(obj, &out[0]);
    }
    PyObject *seq = PySequence_Fast(obj, what);
    if (seq == NULL)
        return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > WF_MAX_NDIM) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: at most %d entries", what, WF_MAX_NDIM);
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!int64_from_index(PySequence_Fast_GET_ITEM(seq, i), &out[i])) {
            Py_DECREF(seq);
            return false;
        }
    Py_DECREF(seq);
    *count = (int)n;
    return true;
}

bool weftpy_shape_list(PyObject *obj, const char *what, int64_t *out, int *count)
{
    if (!weftpy_int64_list(obj, what, out, count))
        return false;
    for (int i = 0; i < *count; i++)
        if (out[i] > INT32_MAX || out[i] < INT32_MIN) {
            /* MLX's shapes are int32: a larger dimension is an OverflowError */
            PyErr_Format(PyExc_OverflowError, "dimension %lld does not fit in int32",
                         (long long)out[i]);
            return false;
        }
    return true;
}

bool weftpy_axes(PyObject *obj, int *out, int *count)
{
    if (obj == NULL || obj == Py_None) {
        *count = -1;
        return true;
    }
    int64_t wide[WF_MAX_NDIM];
    if (!weftpy_int64_list(obj, "axis must be an int or a sequence of ints", wide, count))
        return false;
    for (int i = 0; i < *count; i++) {
        if (wide[i] < INT_MIN || wide[i] > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "axis out of range");
            return false;
        }
        out[i] = (int)wide[i];
    }
    return true;
}

bool weftpy_is_python_scalar(PyObject *obj)
{
    return PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) || PyComplex_Check(obj);
}

/* ------------------------------------------------------------ scalars */

/* The natural dtype of a Python scalar: bool, int32 (int64 past its range),
 * float32, complex64. */
static wf_dtype scalar_dtype(PyObject *obj, int64_t *int_value)
{
    if (PyBool_Check(obj))
        return WF_DTYPE_BOOL;
    if (PyComplex_Check(obj))
        return WF_DTYPE_C64;
    if (PyLong_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        *int_value = v;
        if (overflow != 0)
            return WF_DTYPE_COUNT;
        return v >= INT32_MIN && v <= INT32_MAX ? WF_DTYPE_I32 : WF_DTYPE_I64;
    }
    return WF_DTYPE_F32;
}

/* A 0-d array of `dtype` holding the Python scalar `obj`. Integers are
 * exact: past 2^53 they travel as int64, not double. */
static wf_array *scalar_array(PyObject *obj, wf_dtype dtype)
{
    int64_t int_value = 0;
    const wf_dtype natural = scalar_dtype(obj, &int_value);
    if (natural == WF_DTYPE_COUNT) {
        PyErr_SetString(PyExc_OverflowError, "Python int too large for any weft integer type");
        return NULL;
    }
    if (dtype == WF_DTYPE_COUNT)
        dtype = natural;
    wf_array *out;
    if (natural == WF_DTYPE_C64) {
        wf_array *re = wf_scalar(PyComplex_RealAsDouble(obj), WF_DTYPE_F32);
        wf_array *im = wf_scalar(PyComplex_ImagAsDouble(obj), WF_DTYPE_F32);
        wf_array *z = wf_complex(re, im);
        out = dtype == WF_DTYPE_C64 ? wf_retain_unscoped(z) : wf_astype(z, dtype);
        wf_release(re);
        wf_release(im);
        wf_release(z);
    } else if (natural == WF_DTYPE_I64 && (int_value > (1LL << 53) || int_value < -(1LL << 53))) {
        wf_array *wide = wf_array_from_data(&int_value, NULL, 0, WF_DTYPE_I64);
        out = wf_astype(wide, dtype);
        wf_release(wide);
    } else {
        double value;
        if (PyFloat_Check(obj))
            value = PyFloat_AS_DOUBLE(obj);
        else
            value = (double)int_value;
        if (PyBool_Check(obj))
            value = obj == Py_True ? 1.0 : 0.0;
        out = wf_scalar(value, dtype);
    }
    if (out == NULL)
        weftpy_raise_weft_error();
    return out;
}

static wf_dtype weak_scalar_dtype(PyObject *scalar, wf_dtype other)
{
    if (PyBool_Check(scalar))
        return other;
    if (PyLong_Check(scalar))
        return other == WF_DTYPE_BOOL ? WF_DTYPE_I32 : other;
    if (PyComplex_Check(scalar))
        return WF_DTYPE_C64;
    /* a Python float: float (and complex) arrays keep their dtype */
    const bool integral = weftpy_dtype_is_integer(other) || other == WF_DTYPE_BOOL;
    return integral ? WF_DTYPE_F32 : other;
}

/* A Python int taking an integer array's dtype must fit in it (MLX raises
 * ValueError rather than wrapping 3000000000 into an int32). */
static bool weak_int_fits(PyObject *obj, wf_dtype dtype)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj))
        return true;
    long long lo, hi;
    switch (dtype) {
    case WF_DTYPE_U8:
        lo = 0, hi = UINT8_MAX;
        break;
    case WF_DTYPE_I32:
        lo = INT32_MIN, hi = INT32_MAX;
        break;
    default:
        return true;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow == 0 && v >= lo && v <= hi)
        return true;
    PyErr_Format(PyExc_ValueError, "Python int %R is out of range for %s", obj,
                 wf_dtype_name(dtype));
    return false;
}

wf_array *weftpy_operand(PyObject *obj, PyObject *other)
{
    if (WeftArray_Check(obj))
        return wf_retain_unscoped(((WeftArray *)obj)->handle);
    if (weftpy_is_python_scalar(obj)) {
        wf_dtype dtype = WF_DTYPE_COUNT;
        if (other != NULL && WeftArray_Check(other))
            dtype = weak_scalar_dtype(obj, wf_array_dtype(((WeftArray *)other)->handle));
        if (!weak_int_fits(obj, dtype))
            return NULL;
        return scalar_array(obj, dtype);
    }
    return weftpy_array_from_object(obj, WF_DTYPE_COUNT);
}

/* ------------------------------------------------------------ nested sequences */

typedef enum { KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_COMPLEX } element_kind;

typedef struct {
    int ndim;
    int64_t shape[WF_MAX_NDIM];
    element_kind kind;    /* of the Python scalars found */
    bool has_scalar;      /* a Python scalar leaf was found */
    bool has_array;       /* an array leaf was found */
    wf_dtype array_dtype; /* promoted dtype of the arrays found */
    bool big_int;         /* an int outside int32's range */
} nested_info;

static bool is_sequence_element(PyObject *obj)
{
    return PyList_Check(obj) || PyTuple_Check(obj);
}

static bool push_dim(nested_info *info, int64_t n)
{
    if (info->ndim >= WF_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "nested sequence deeper than %d", WF_MAX_NDIM);
        return false;
    }
    info->shape[info->ndim++] = n;
    return true;
}

/* The shape, from the first element at each depth (an array there adds its
 * own dimensions; nested_leaves then checks that every other element
 * agrees). */
static bool nested_scan(PyObject *obj, nested_info *info)
{
    while (is_sequence_element(obj)) {
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (!push_dim(info, n))
            return false;
        if (n == 0)
            return true;
        obj = PySequence_Fast_GET_ITEM(obj, 0);
    }
    if (WeftArray_Check(obj)) {
        wf_array *a = ((WeftArray *)obj)->handle;
        for (int d = 0; d < wf_array_ndim(a); d++)
            if (!push_dim(info, wf_array_dim(a, d)))
                return false;
    }
    return true;
}

/* An array leaf at `depth` must fill the dimensions left below it. */
static bool array_leaf_fits(wf_array *a, int depth, const nested_info *info)
{
    if (wf_array_ndim(a) != info->ndim - depth)
        return false;
    for (int d = 0; d < wf_array_ndim(a); d++)
        if (wf_array_dim(a, d) != info->shape[depth + d])
            return false;
    return true;
}

/* Checks that every leaf is at the same depth and finds their kind. */
static bool nested_leaves(PyObject *obj, int depth, nested_info *info)
{
    if (is_sequence_element(obj)) {
        if (depth >= info->ndim) {
            PyErr_SetString(PyExc_ValueError, "Initialization encountered non-uniform length.");
            return false;
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (n != info->shape[depth]) {
            PyErr_SetString(PyExc_ValueError, "Initialization encountered non-uniform length.");
            return false;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (!nested_leaves(PySequence_Fast_GET_ITEM(obj, i), depth + 1, info))
                return false;
        return true;
    }
    if (WeftArray_Check(obj)) {
        wf_array *a = ((WeftArray *)obj)->handle;
        if (!array_leaf_fits(a, depth, info)) {
            PyErr_SetString(PyExc_ValueError, "Initialization encountered non-uniform length.");
            return false;
        }
        const wf_dtype d = wf_array_dtype(a);
        info->array_dtype = info->has_array ? wf_promote_types(info->array_dtype, d) : d;
        info->has_array = true;
        return true;
    }
    if (depth != info->ndim) {
        PyErr_SetString(PyExc_ValueError, "Initialization encountered non-uniform length.");
        return false;
    }
    info->has_scalar = true;
    if (PyBool_Check(obj))
        return true;
    if (PyLong_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow != 0) {
            PyErr_SetString(PyExc_OverflowError, "Python int too large for any weft integer type");
            return false;
        }
        if (v < INT32_MIN || v > INT32_MAX)
            info->big_int = true;
        if (info->kind < KIND_INT)
            info->kind = KIND_INT;
        return true;
    }
    if (PyComplex_Check(obj)) {
        info->kind = KIND_COMPLEX;
        return true;
    }
    if (PyFloat_Check(obj)) {
        if (info->kind < KIND_FLOAT)
            info->kind = KIND_FLOAT;
        return true;
    }
    PyObject *as_float = PyNumber_Float(obj); /* NumPy scalars and the like */
    if (as_float == NULL) {
        PyErr_Format(PyExc_ValueError, "cannot make an array element from %s",
                     Py_TYPE(obj)->tp_name);
        return false;
    }
    Py_DECREF(as_float);
    if (info->kind < KIND_FLOAT)
        info->kind = KIND_FLOAT;
    return true;
}

/* Writes the real and imaginary parts of the leaves in row-major order. */
static bool nested_fill_complex(PyObject *obj, double *re, double *im, int64_t *pos)
{
    if (is_sequence_element(obj)) {
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        for (Py_ssize_t i = 0; i < n; i++)
            if (!nested_fill_complex(PySequence_Fast_GET_ITEM(obj, i), re, im, pos))
                return false;
        return true;
    }
    Py_complex z = PyComplex_AsCComplex(obj);
    if (z.real == -1.0 && PyErr_Occurred())
        return false;
    re[*pos] = z.real;
    im[(*pos)++] = z.imag;
    return true;
}

static wf_array *complex_from_sequence(PyObject *obj, const nested_info *info, int64_t size,
                                       wf_dtype dtype)
{
    double *parts = PyMem_Malloc((size_t)(size > 0 ? size : 1) * 2 * sizeof(double));
    if (parts == NULL)
        return (wf_array *)PyErr_NoMemory();
    int64_t pos = 0;
    wf_array *out = NULL;
    if (nested_fill_complex(obj, parts, parts + size, &pos)) {
        wf_array *re = wf_array_from_data(parts, info->shape, info->ndim, WF_DTYPE_F64);
        wf_array *im = wf_array_from_data(parts + size, info->shape, info->ndim, WF_DTYPE_F64);
        wf_array *z = wf_complex(re, im);
        out = dtype == WF_DTYPE_COUNT || dtype == WF_DTYPE_C64 ? wf_retain_unscoped(z)
                                                               : wf_astype(z, dtype);
        wf_release(re);
        wf_release(im);
        wf_release(z);
        if (out == NULL)
            weftpy_raise_weft_error();
    }
    PyMem_Free(parts);
    return out;
}

/* Writes the leaves in row-major order into doubles or int64s. */
static bool nested_fill(PyObject *obj, bool as_int, void *buffer, int64_t *pos)
{
    if (is_sequence_element(obj)) {
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        for (Py_ssize_t i = 0; i < n; i++)
            if (!nested_fill(PySequence_Fast_GET_ITEM(obj, i), as_int, buffer, pos))
                return false;
        return true;
    }
    if (as_int) {
        long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred())
            return false;
        ((int64_t *)buffer)[(*pos)++] = v;
    } else {
        double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred())
            return false;
        ((double *)buffer)[(*pos)++] = v;
    }
    return true;
}

/* Lists and tuples may contain arrays: then each element is converted and the
 * results are stacked (their dtypes promoted). */
static wf_array *stack_elements(PyObject *seq, wf_dtype dtype)
{
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    wf_array **parts = PyMem_Calloc((size_t)n + 1, sizeof *parts);
    if (parts == NULL)
        return (wf_array *)PyErr_NoMemory();
    wf_array *out = NULL;
    Py_ssize_t made = 0;
    for (; made < n; made++) {
        parts[made] = weftpy_array_from_object(PySequence_Fast_GET_ITEM(seq, made), dtype);
        if (parts[made] == NULL)
            goto done;
    }
    out = wf_stack(parts, (int)n, 0);
    if (out == NULL)
        weftpy_raise_weft_error();
done:
    for (Py_ssize_t i = 0; i < made; i++)
        wf_release(parts[i]);
    PyMem_Free(parts);
    return out;
}

/* The dtype of a sequence holding arrays: theirs, promoted, with Python
 * scalars beside them taken as weak scalars (a float joins a float16 array
 * as float16, an int array as float32). */
static wf_dtype mixed_dtype(const nested_info *info)
{
    if (!info->has_scalar)
        return info->array_dtype;
    const wf_dtype natural = info->kind == KIND_COMPLEX ? WF_DTYPE_C64
                             : info->kind == KIND_FLOAT ? WF_DTYPE_F32
                             : info->kind == KIND_INT   ? WF_DTYPE_I32
                                                        : WF_DTYPE_BOOL;
    const wf_dtype a = info->array_dtype;
    const element_kind array_kind = a == WF_DTYPE_C64            ? KIND_COMPLEX
                                    : weftpy_dtype_is_float(a)   ? KIND_FLOAT
                                    : weftpy_dtype_is_integer(a) ? KIND_INT
                                                                 : KIND_BOOL;
    return info->kind <= array_kind ? a : wf_promote_types(a, natural);
}

static wf_array *array_from_sequence(PyObject *obj, wf_dtype dtype)
{
    nested_info info = {.ndim = 0, .kind = KIND_BOOL};
    if (!nested_scan(obj, &info) || !nested_leaves(obj, 0, &info))
        return NULL;
    if (info.has_array)
        return stack_elements(obj, dtype != WF_DTYPE_COUNT ? dtype : mixed_dtype(&info));
    int64_t size = 1;
    for (int i = 0; i < info.ndim; i++)
        size *= info.shape[i];
    if (size == 0 && info.kind == KIND_BOOL)
        info.kind = KIND_FLOAT; /* [] is float32, as in MLX */
    if (info.kind == KIND_COMPLEX)
        return complex_from_sequence(obj, &info, size, dtype);
    wf_dtype natural = info.kind == KIND_FLOAT  ? WF_DTYPE_F32
                       : info.kind == KIND_INT ? (info.big_int ? WF_DTYPE_I64 : WF_DTYPE_I32)
                                               : WF_DTYPE_BOOL;
    if (dtype == WF_DTYPE_COUNT)
        dtype = natural;
    const bool as_int = info.kind != KIND_FLOAT;
    void *buffer = PyMem_Malloc((size_t)(size > 0 ? size : 1) * 8);
    if (buffer == NULL)
        return (wf_array *)PyErr_NoMemory();
    int64_t pos = 0;
    wf_array *out = NULL;
    if (nested_fill(obj, as_int, buffer, &pos)) {
        wf_array *wide = wf_array_from_data(buffer, info.shape, info.ndim,
                                            as_int ? WF_DTYPE_I64 : WF_DTYPE_F64);
        out = wf_astype(wide, dtype);
        wf_release(wide);
        if (out == NULL)
            weftpy_raise_weft_error();
    }
    PyMem_Free(buffer);
    return out;
}

/* ------------------------------------------------------------ buffers */

/* The dtype of a PEP 3118 format string, WF_DTYPE_COUNT if weft has none. */
static wf_dtype dtype_from_format(const char *format, Py_ssize_t itemsize)
{
    if (format == NULL)
        return WF_DTYPE_U8;
    if (*format == '@' || *format == '=' || *format == '<')
        format++;
    if (strcmp(format, "Zf") == 0)
        return WF_DTYPE_C64;
    if (format[0] == '\0' || format[1] != '\0')
        return WF_DTYPE_COUNT;
    switch (format[0]) {
    case '?':
        return WF_DTYPE_BOOL;
    case 'b':
        return WF_DTYPE_I8;
    case 'B':
        return WF_DTYPE_U8;
    case 'h':
        return WF_DTYPE_I16;
    case 'H':
        return WF_DTYPE_U16;
    case 'i':
    case 'l':
    case 'q':
    case 'n':
        return itemsize == 4 ? WF_DTYPE_I32 : itemsize == 8 ? WF_DTYPE_I64 : WF_DTYPE_COUNT;
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
        return itemsize == 4 ? WF_DTYPE_U32 : itemsize == 8 ? WF_DTYPE_U64 : WF_DTYPE_COUNT;
    case 'e':
        return WF_DTYPE_F16;
    case 'f':
        return WF_DTYPE_F32;
    case 'd':
        return WF_DTYPE_F64;
    default:
        return WF_DTYPE_COUNT;
    }
}

static const char *format_of_dtype(wf_dtype dtype)
{
    switch (dtype) {
    case WF_DTYPE_BOOL:
        return "?";
    case WF_DTYPE_I8:
        return "b";
    case WF_DTYPE_U8:
        return "B";
    case WF_DTYPE_I16:
        return "h";
    case WF_DTYPE_U16:
        return "H";
    case WF_DTYPE_I32:
        return "i";
    case WF_DTYPE_U32:
        return "I";
    case WF_DTYPE_I64:
        return "q";
    case WF_DTYPE_U64:
        return "Q";
    case WF_DTYPE_F16:
        return "e";
    case WF_DTYPE_F32:
        return "f";
    case WF_DTYPE_F64:
        return "d";
    case WF_DTYPE_C64:
        return "Zf";
    default:
        return NULL; /* bfloat16: no PEP 3118 code */
    }
}

/* Copies a strided buffer into row-major order, one element at a time along
 * the last axis (the buffer's strides are in bytes and may be negative). */
static void copy_strided(const char *src, const Py_ssize_t *shape, const Py_ssize_t *strides,
                         int ndim, Py_ssize_t itemsize, char *dst)
{
    if (ndim == 0) {
        memcpy(dst, src, (size_t)itemsize);
        return;
    }
    Py_ssize_t index[WF_MAX_NDIM] = {0};
    Py_ssize_t total = 1;
    for (int i = 0; i < ndim; i++)
        total *= shape[i];
    for (Py_ssize_t n = 0; n < total; n++) {
        const char *p = src;
        for (int i = 0; i < ndim; i++)
            p += index[i] * strides[i];
        memcpy(dst + n * itemsize, p, (size_t)itemsize);
        for (int i = ndim - 1; i >= 0; i--) {
            if (++index[i] < shape[i])
                break;
            index[i] = 0;
        }
    }
}

/* `out` (of dtype `from`; stolen) cast to `dtype` unless that is
 * WF_DTYPE_COUNT or `from`; NULL (out NULL or the cast failing) raises the
 * last weft error. */
static wf_array *cast_or_raise(wf_array *out, wf_dtype from, wf_dtype dtype)
{
    if (out != NULL && dtype != WF_DTYPE_COUNT && dtype != from) {
        wf_array *cast = wf_astype(out, dtype);
        wf_release(out);
        out = cast;
    }
    if (out == NULL)
        weftpy_raise_weft_error();
    return out;
}

wf_array *weftpy_array_from_host(const char *data, const Py_ssize_t *shape,
                                 const Py_ssize_t *strides, int ndim, Py_ssize_t itemsize,
                                 wf_dtype source, bool complex128, wf_dtype dtype)
{
    if (ndim > WF_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "data has more than %d dimensions", WF_MAX_NDIM);
        return NULL;
    }
    int64_t dims[WF_MAX_NDIM + 1];
    Py_ssize_t count = 1;
    for (int i = 0; i < ndim; i++) {
        dims[i] = shape[i];
        count *= shape[i];
    }
    dims[ndim] = 2; /* complex128: the pair axis */
    const int data_ndim = ndim + (complex128 ? 1 : 0);
    wf_array *out;
    if (strides == NULL) {
        out = wf_array_from_data(data, dims, data_ndim, source);
    } else {
        char *copy = PyMem_Malloc(count > 0 ? (size_t)(count * itemsize) : 1);
        if (copy == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        copy_strided(data, shape, strides, ndim, itemsize, copy);
        out = wf_array_from_data(copy, dims, data_ndim, source);
        PyMem_Free(copy);
    }
    if (out != NULL && complex128) {
        /* read as float64 pairs; becomes complex64, as in MLX */
        wf_array *pairs = wf_astype(out, WF_DTYPE_F32);
        wf_array *c = pairs ? wf_view(pairs, WF_DTYPE_C64) : NULL; /* (..., 1) */
        wf_release(out);
        out = c ? wf_reshape(c, dims, ndim) : NULL;
        wf_release(pairs);
        wf_release(c);
        source = WF_DTYPE_C64;
    }
    /* MLX's rule: float64 data without an explicit dtype becomes float32. */
    if (dtype == WF_DTYPE_COUNT && source == WF_DTYPE_F64)
        dtype = WF_DTYPE_F32;
    return cast_or_raise(out, source, dtype);
}

/* Whether obj is a NumPy array of ml_dtypes' bfloat16 (what JAX hands to
 * NumPy), whose buffer NumPy refuses to describe. */
static bool is_ml_dtypes_bfloat16(PyObject *obj)
{
    PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
    PyObject *name = dtype ? PyObject_GetAttrString(dtype, "name") : NULL;
    PyObject *itemsize = dtype ? PyObject_GetAttrString(dtype, "itemsize") : NULL;
    const bool yes = name && itemsize && PyUnicode_Check(name) &&
                     PyUnicode_CompareWithASCIIString(name, "bfloat16") == 0 &&
                     PyLong_Check(itemsize) && PyLong_AsLong(itemsize) == 2;
    Py_XDECREF(dtype);
    Py_XDECREF(name);
    Py_XDECREF(itemsize);
    PyErr_Clear();
    return yes;
}

static wf_array *array_from_buffer(PyObject *obj, wf_dtype dtype);

/* An ml_dtypes bfloat16 array through its bits: obj.view("uint16"). */
static wf_array *array_from_bfloat16_bits(PyObject *obj, wf_dtype dtype)
{
    PyObject *bits = PyObject_CallMethod(obj, "view", "s", "uint16");
    wf_array *codes = bits ? array_from_buffer(bits, WF_DTYPE_COUNT) : NULL;
    Py_XDECREF(bits);
    if (codes == NULL)
        return NULL;
    wf_array *out = wf_view(codes, WF_DTYPE_BF16);
    wf_release(codes);
    return cast_or_raise(out, WF_DTYPE_BF16, dtype);
}

static wf_array *array_from_buffer(PyObject *obj, wf_dtype dtype)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO) < 0) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (!is_ml_dtypes_bfloat16(obj)) {
            PyErr_Restore(type, value, traceback); /* the buffer's own error */
            return NULL;
        }
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return array_from_bfloat16_bits(obj, dtype);
    }
    wf_array *out = NULL;
    const bool complex128 = view.format != NULL && strcmp(view.format, "Zd") == 0 &&
                            view.itemsize == 16;
    const wf_dtype source =
        complex128 ? WF_DTYPE_F64 : dtype_from_format(view.format, view.itemsize);
    if (source == WF_DTYPE_COUNT ||
        (!complex128 && (size_t)view.itemsize != wf_dtype_size(source)))
        PyErr_Format(PyExc_TypeError, "cannot make an array from a buffer of format '%s'",
                     view.format != NULL ? view.format : "B");
    else
        out = weftpy_array_from_host(view.buf, view.shape,
                                     PyBuffer_IsContiguous(&view, 'C') ? NULL : view.strides,
                                     view.ndim, view.itemsize, source, complex128, dtype);
    PyBuffer_Release(&view);
    return out;
}

wf_array *weftpy_array_from_object(PyObject *obj, wf_dtype dtype)
{
    if (WeftArray_Check(obj)) {
        wf_array *handle = ((WeftArray *)obj)->handle;
        wf_array *out = dtype == WF_DTYPE_COUNT ? wf_retain_unscoped(handle)
                                                : wf_astype(handle, dtype);
        if (out == NULL)
            weftpy_raise_weft_error();
        return out;
    }
    if (weftpy_is_python_scalar(obj))
        return scalar_array(obj, dtype);
    if (is_sequence_element(obj)) {
        PyObject *seq = PySequence_Fast(obj, "expected a sequence");
        if (seq == NULL)
            return NULL;
        Py_DECREF(seq); /* a list or tuple is its own fast sequence */
        return array_from_sequence(obj, dtype);
    }
    if (PyObject_CheckBuffer(obj)) /* NumPy, memoryview, bytes and bytearray (uint8) */
        return array_from_buffer(obj, dtype);
    /* PyTorch, JAX, ...: their own DLPack export (bfloat16 included, which
     * NumPy, and so __array__, cannot hold) */
    if (PyObject_HasAttrString(obj, "__dlpack__"))
        return weftpy_array_from_dlpack(obj, dtype);
    /* NumPy scalars and objects with __array__ go through NumPy's buffer. */
    if (PyObject_HasAttrString(obj, "__array__")) {
        PyObject *np_array = PyObject_CallMethod(obj, "__array__", NULL);
        if (np_array == NULL)
            return NULL;
        wf_array *out = PyObject_CheckBuffer(np_array) ? array_from_buffer(np_array, dtype)
                                                       : NULL;
        if (out == NULL && !PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "cannot make an array from %s",
                         Py_TYPE(obj)->tp_name);
        Py_DECREF(np_array);
        return out;
    }
    PyErr_Format(PyExc_ValueError, "cannot make an array from an object of type %s",
                 Py_TYPE(obj)->tp_name);
    return NULL;
}

/* ------------------------------------------------------------ to Python */

bool weftpy_array_host_data(wf_array *a, const void **out)
{
    wf_status status;
    if (wf_array_is_evaluated(a)) {
        status = wf_array_data(a, out); /* may make a strided view's copy: no wait */
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = wf_array_data(a, out);
        Py_END_ALLOW_THREADS
    }
    if (status != WF_OK) {
        weftpy_raise_weft_error();
        return false;
    }
    return true;
}

static double half_to_double(uint16_t bits)
{
    const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    double value;
    if (exponent == 0)
        value = ldexp(mantissa, -24);
    else if (exponent == 31)
        value = mantissa != 0 ? NAN : INFINITY;
    else
        value = ldexp(mantissa + 1024, exponent - 25);
    return sign ? -value : value;
}

static double bfloat16_to_double(uint16_t bits)
{
    uint32_t wide = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &wide, sizeof f);
    return f;
}

/* One element as a Python object. */
static PyObject *element_object(const char *p, wf_dtype dtype)
{
    switch (dtype) {
    case WF_DTYPE_BOOL:
        return PyBool_FromLong(*(const uint8_t *)p != 0);
    case WF_DTYPE_U8:
        return PyLong_FromLong(*(const uint8_t *)p);
    case WF_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromLong(v);
    }
    case WF_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromLongLong(v);
    }
    case WF_DTYPE_F16: {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(half_to_double(v));
    }
    case WF_DTYPE_BF16: {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(bfloat16_to_double(v));
    }
    case WF_DTYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(v);
    }
    case WF_DTYPE_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(v);
    }
    case WF_DTYPE_I8:
        return PyLong_FromLong(*(const int8_t *)p);
    case WF_DTYPE_I16: {
        int16_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromLong(v);
    }
    case WF_DTYPE_U16: {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromLong(v);
    }
    case WF_DTYPE_U32: {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromUnsignedLong(v);
    }
    case WF_DTYPE_U64: {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromUnsignedLongLong(v);
    }
    case WF_DTYPE_C64: {
        float parts[2];
        memcpy(parts, p, sizeof parts);
        return PyComplex_FromDoubles(parts[0], parts[1]);
    }
    default:
        PyErr_Format(PyExc_NotImplementedError, "no Python value for dtype %s",
                     wf_dtype_name(dtype));
        return NULL;
    }
}

PyObject *weftpy_array_item(wf_array *a)
{
    if (wf_array_size(a) != 1) {
        PyErr_SetString(PyExc_ValueError, "item() needs an array of exactly one element");
        return NULL;
    }
    const void *data;
    if (!weftpy_array_host_data(a, &data))
        return NULL;
    return element_object(data, wf_array_dtype(a));
}

static PyObject *tolist_level(const char *data, const int64_t *shape, int ndim, size_t itemsize,
                              wf_dtype dtype, int64_t *offset)
{
    if (ndim == 0) {
        PyObject *item = element_object(data + (size_t)*offset * itemsize, dtype);
        (*offset)++;
        return item;
    }
    PyObject *list = PyList_New(shape[0]);
    if (list == NULL)
        return NULL;
    for (int64_t i = 0; i < shape[0]; i++) {
        PyObject *item = tolist_level(data, shape + 1, ndim - 1, itemsize, dtype, offset);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

PyObject *weftpy_array_tolist(wf_array *a)
{
    const void *data;
    if (!weftpy_array_host_data(a, &data))
        return NULL;
    int64_t offset = 0;
    const wf_dtype dtype = wf_array_dtype(a);
    return tolist_level(data, wf_array_shape(a), wf_array_ndim(a), wf_dtype_size(dtype), dtype,
                        &offset);
}

/* The buffer protocol, read-only. A consumer that takes strides
 * (PyBUF_STRIDES, as NumPy and memoryview do) gets the array's memory in
 * place with its real strides, a strided view included (no copy); one that
 * needs C-contiguous data, or no strides, gets the row-major elements (a
 * strided view's contiguous copy, kept with the array). The exported handle
 * is retained until the buffer is released, so an in-place operator that
 * replaces the Python object's handle cannot free memory a view still
 * reads. */
typedef struct buffer_hold {
    wf_array *array;   /* a reference of our own */
    Py_ssize_t dims[]; /* shape, then strides (bytes) */
} buffer_hold;

/* Evaluates (GIL released when it may wait) and sets *data and, when
 * `strided`, strides (elements); false with BufferError set. */
static bool buffer_data(wf_array *a, bool strided, const void **data, int64_t *strides)
{
    wf_status status;
    if (!strided) {
        if (weftpy_array_host_data(a, data))
            return true;
        status = WF_ERR_INTERNAL; /* the exception is set: reworded below */
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = wf_array_data_strided(a, data, strides);
        Py_END_ALLOW_THREADS
        if (status == WF_OK)
            return true;
        weftpy_raise_weft_error();
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    PyErr_Format(PyExc_BufferError, "the array could not be evaluated: %S", text);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return false;
}

static int array_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    wf_array *a = ((WeftArray *)self)->handle;
    const wf_dtype dtype = wf_array_dtype(a);
    const char *format = format_of_dtype(dtype);
    if (format == NULL) {
        PyErr_Format(PyExc_BufferError, "dtype %s has no buffer format", wf_dtype_name(dtype));
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "weft arrays are immutable: no writable buffer");
        return -1;
    }
    const bool contiguous_wanted = (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS ||
                                   (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS ||
                                   (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS ||
                                   (flags & PyBUF_STRIDES) != PyBUF_STRIDES;
    const int ndim = wf_array_ndim(a);
    int64_t strides[WF_MAX_NDIM];
    const void *data;
    if (!buffer_data(a, !contiguous_wanted, &data, strides))
        return -1;
    buffer_hold *hold = PyMem_Malloc(sizeof *hold + sizeof(Py_ssize_t) * (size_t)(2 * ndim + 1));
    if (hold == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t *dims = hold->dims;
    const int64_t *shape = wf_array_shape(a);
    const Py_ssize_t itemsize = (Py_ssize_t)wf_dtype_size(dtype);
    Py_ssize_t stride = itemsize;
    for (int i = ndim - 1; i >= 0; i--) {
        dims[i] = (Py_ssize_t)shape[i];
        dims[ndim + i] = contiguous_wanted ? stride : (Py_ssize_t)strides[i] * itemsize;
        stride *= dims[i];
    }
    hold->array = wf_retain_unscoped(a);
    view->buf = (void *)data;
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)wf_array_nbytes(a);
    view->itemsize = itemsize;
    view->readonly = 1;
    view->ndim = ndim;
    view->format = (flags & PyBUF_FORMAT) ? (char *)format : NULL;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? dims : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + ndim : NULL;
    view->suboffsets = NULL;
    view->internal = hold;
    return 0;
}

static void array_releasebuffer(PyObject *self, Py_buffer *view)
{
    (void)self;
    buffer_hold *hold = view->internal;
    wf_release(hold->array); /* dropping a reference never waits */
    PyMem_Free(hold);
}

PyBufferProcs weftpy_array_buffer_procs = {
    .bf_getbuffer = array_getbuffer,
    .bf_releasebuffer = array_releasebuffer,
};
