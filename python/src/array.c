/*
 * array.c - the array type: construction, metadata, operators, conversions
 * to Python numbers. Most named methods (a.sum(), a.reshape(), ...) are added
 * by the package's Python subclass (weft/_array.py), which is the class every
 * result is made of.
 */
#include "weft_py.h"

#include <math.h>

/* The class results are made of: the package's subclass once registered
 * (_set_array_class), this type before. A strong reference, never dropped. */
static PyTypeObject *result_class = &WeftArray_Type;

PyObject *weftpy_array_wrap(wf_array *handle)
{
    if (handle == NULL)
        return weftpy_raise_weft_error();
    WeftArray *self = (WeftArray *)result_class->tp_alloc(result_class, 0);
    if (self == NULL) {
        wf_release(handle);
        return NULL;
    }
    self->handle = handle;
    self->weakrefs = NULL;
    return (PyObject *)self;
}

void weftpy_array_replace(WeftArray *self, wf_array *handle)
{
    wf_array *old = self->handle;
    self->handle = handle;
    wf_release(old); /* never waits: frees at most the old node and its graph */
}

static PyObject *array_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"val", "dtype", NULL};
    PyObject *val, *dtype_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:array", names, &val, &dtype_obj))
        return NULL;
    wf_dtype dtype;
    if (!weftpy_dtype_from_object(dtype_obj, true, &dtype))
        return NULL;
    wf_array *handle = weftpy_array_from_object(val, dtype);
    if (handle == NULL)
        return NULL;
    if (type == &WeftArray_Type)
        type = result_class; /* _core.array(...) makes the package's arrays too */
    WeftArray *self = (WeftArray *)type->tp_alloc(type, 0);
    if (self == NULL) {
        wf_release(handle);
        return NULL;
    }
    self->handle = handle;
    self->weakrefs = NULL;
    return (PyObject *)self;
}

static void array_dealloc(PyObject *obj)
{
    WeftArray *self = (WeftArray *)obj;
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs(obj);
    wf_release(self->handle); /* never waits */
    self->handle = NULL;
    /* A Python subclass's instances are freed through subtype_dealloc, which
     * drops the reference to their heap type itself. */
    Py_TYPE(obj)->tp_free(obj);
}

/* ------------------------------------------------------------ metadata */

#define HANDLE(obj) (((WeftArray *)(obj))->handle)

static PyObject *array_get_shape(PyObject *self, void *closure)
{
    (void)closure;
    return weftpy_shape_tuple(wf_array_shape(HANDLE(self)), wf_array_ndim(HANDLE(self)));
}

static PyObject *array_get_dtype(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(weftpy_dtype_object(wf_array_dtype(HANDLE(self))));
}

static PyObject *array_get_ndim(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(wf_array_ndim(HANDLE(self)));
}

static PyObject *array_get_size(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(wf_array_size(HANDLE(self)));
}

static PyObject *array_get_itemsize(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(wf_dtype_size(wf_array_dtype(HANDLE(self))));
}

static PyObject *array_get_nbytes(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(wf_array_nbytes(HANDLE(self)));
}

static PyObject *array_get_T(PyObject *self, void *closure)
{
    (void)closure;
    return weftpy_array_wrap(wf_transpose(HANDLE(self), NULL, 0));
}

static PyObject *array_get_id(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(wf_array_id(HANDLE(self)));
}

static PyGetSetDef array_getset[] = {
    {"shape", array_get_shape, NULL, "The array's shape as a tuple of ints.", NULL},
    {"dtype", array_get_dtype, NULL, "The array's Dtype.", NULL},
    {"ndim", array_get_ndim, NULL, "Number of dimensions.", NULL},
    {"size", array_get_size, NULL, "Number of elements.", NULL},
    {"itemsize", array_get_itemsize, NULL, "Bytes per element.", NULL},
    {"nbytes", array_get_nbytes, NULL, "Bytes of all elements.", NULL},
    {"T", array_get_T, NULL, "The transpose (axes reversed).", NULL},
    {"_weft_id", array_get_id, NULL, "weft's never-reused id of the current value.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------ methods */

static PyObject *array_item(PyObject *self, PyObject *unused)
{
    (void)unused;
    return weftpy_array_item(HANDLE(self));
}

static PyObject *array_tolist(PyObject *self, PyObject *unused)
{
    (void)unused;
    return weftpy_array_tolist(HANDLE(self));
}

static PyObject *array_astype(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"dtype", "stream", NULL};
    PyObject *given[2];
    if (!weftpy_parse_args("astype", args, nargs, kwnames, names, 0, 1, given))
        return NULL;
    wf_dtype dtype;
    if (!weftpy_dtype_from_object(given[0], false, &dtype))
        return NULL;
    bool pushed;
    if (!weftpy_push_stream_arg(given[1], &pushed))
        return NULL;
    wf_array *out = wf_astype(HANDLE(self), dtype);
    weftpy_pop_stream(pushed);
    return weftpy_array_wrap(out);
}

/* Replaces this object's value (used by in-place updates written in Python,
 * such as a.at[...] and the optimizers). */
static PyObject *array_set_value(PyObject *self, PyObject *value)
{
    wf_array *handle = weftpy_array_from_object(value, WF_DTYPE_COUNT);
    if (handle == NULL)
        return NULL;
    weftpy_array_replace((WeftArray *)self, handle);
    Py_RETURN_NONE;
}

static PyObject *array_is_evaluated(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(wf_array_is_evaluated(HANDLE(self)));
}

static PyMethodDef array_methods[] = {
    {"item", array_item, METH_NOARGS, "The value of a one-element array as a Python scalar."},
    {"tolist", array_tolist, METH_NOARGS, "The elements as nested Python lists."},
    {"astype", (PyCFunction)(void (*)(void))array_astype, METH_FASTCALL | METH_KEYWORDS,
     "astype(dtype, stream=None): the array converted to dtype."},
    {"_set_value", array_set_value, METH_O, "Replaces the value this object holds."},
    {"_is_evaluated", array_is_evaluated, METH_NOARGS, "True once computed."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------ numbers */

/* An operator's other operand is an array, a Python scalar or an array-like
 * (NumPy); lists, tuples and strings are a ValueError, as in MLX. */
static bool operator_operand_ok(PyObject *obj)
{
    if (!(PyList_Check(obj) || PyTuple_Check(obj) || PyUnicode_Check(obj) || PyBytes_Check(obj)))
        return true;
    PyErr_Format(PyExc_ValueError, "an array cannot be combined with a %s by an operator",
                 Py_TYPE(obj)->tp_name);
    return false;
}

#define BINARY_SLOT(slot, op)                                                                  \
    static PyObject *slot(PyObject *a, PyObject *b)                                            \
    {                                                                                          \
        if (!WeftArray_Check(a) && !WeftArray_Check(b))                                        \
            Py_RETURN_NOTIMPLEMENTED;                                                          \
        if (!operator_operand_ok(a) || !operator_operand_ok(b))                                \
            return NULL;                                                                       \
        return weftpy_array_wrap_or_raise(weftpy_binary(op, a, b));                            \
    }

/* weftpy_binary already raised when it returns NULL without a weft error. */
static PyObject *weftpy_array_wrap_or_raise(wf_array *handle)
{
    if (handle == NULL)
        return PyErr_Occurred() ? NULL : weftpy_raise_weft_error();
    return weftpy_array_wrap(handle);
}

BINARY_SLOT(array_add, wf_add)
BINARY_SLOT(array_subtract, wf_subtract)
BINARY_SLOT(array_multiply, wf_multiply)
BINARY_SLOT(array_true_divide, wf_divide)
BINARY_SLOT(array_floor_divide, wf_floor_divide)
BINARY_SLOT(array_remainder, wf_remainder)
BINARY_SLOT(array_matmul, wf_matmul)
/* &, |, ^, ~, << and >>: bitwise on bool and integer arrays (logical on
 * bool); floats are refused with ValueError, as in MLX. */
BINARY_SLOT(array_and, wf_bitwise_and)
BINARY_SLOT(array_or, wf_bitwise_or)
BINARY_SLOT(array_xor, wf_bitwise_xor)
BINARY_SLOT(array_lshift, wf_left_shift)
BINARY_SLOT(array_rshift, wf_right_shift)

static PyObject *array_power(PyObject *a, PyObject *b, PyObject *modulo)
{
    if (modulo != Py_None) {
        PyErr_SetString(PyExc_TypeError, "pow() with a modulus is not supported");
        return NULL;
    }
    if (!WeftArray_Check(a) && !WeftArray_Check(b))
        Py_RETURN_NOTIMPLEMENTED;
    if (!operator_operand_ok(a) || !operator_operand_ok(b))
        return NULL;
    return weftpy_array_wrap_or_raise(weftpy_binary(wf_power, a, b));
}

/* In-place forms compute the new value and replace the handle: id() stays,
 * other holders of the old value keep it. As in MLX, the result keeps the
 * promoted dtype (an int array += a float array becomes float). */
static PyObject *inplace_replace(PyObject *a, PyObject *b, wf_array *(*op)(wf_array *, wf_array *))
{
    if (!operator_operand_ok(b))
        return NULL;
    wf_array *out = weftpy_binary(op, a, b);
    if (out == NULL)
        return PyErr_Occurred() ? NULL : weftpy_raise_weft_error();
    weftpy_array_replace((WeftArray *)a, out);
    return Py_NewRef(a);
}

#define INPLACE_SLOT(slot, op)                                                                 \
    static PyObject *slot(PyObject *a, PyObject *b) { return inplace_replace(a, b, op); }

INPLACE_SLOT(array_inplace_add, wf_add)
INPLACE_SLOT(array_inplace_subtract, wf_subtract)
INPLACE_SLOT(array_inplace_multiply, wf_multiply)
INPLACE_SLOT(array_inplace_floor_divide, wf_floor_divide)
INPLACE_SLOT(array_inplace_remainder, wf_remainder)
INPLACE_SLOT(array_inplace_matmul, wf_matmul)
INPLACE_SLOT(array_inplace_and, wf_bitwise_and)
INPLACE_SLOT(array_inplace_or, wf_bitwise_or)
INPLACE_SLOT(array_inplace_xor, wf_bitwise_xor)
INPLACE_SLOT(array_inplace_lshift, wf_left_shift)
INPLACE_SLOT(array_inplace_rshift, wf_right_shift)

static PyObject *array_inplace_power(PyObject *a, PyObject *b, PyObject *modulo)
{
    (void)modulo;
    return inplace_replace(a, b, wf_power);
}

/* /= refuses integer and bool arrays, as MLX: the quotient would not be of
 * the array's kind. */
static PyObject *array_inplace_true_divide(PyObject *a, PyObject *b)
{
    const wf_dtype dtype = wf_array_dtype(HANDLE(a));
    if (dtype == WF_DTYPE_BOOL || weftpy_dtype_is_integer(dtype)) {
        PyErr_SetString(PyExc_ValueError,
                        "In place division cannot cast to non-floating point type.");
        return NULL;
    }
    return inplace_replace(a, b, wf_divide);
}

static PyObject *array_negative(PyObject *self)
{
    return weftpy_array_wrap(wf_negative(HANDLE(self)));
}

static PyObject *array_positive(PyObject *self)
{
    return weftpy_array_wrap(wf_retain_unscoped(HANDLE(self)));
}

static PyObject *array_absolute(PyObject *self)
{
    return weftpy_array_wrap(wf_abs(HANDLE(self)));
}

static PyObject *array_invert(PyObject *self)
{
    return weftpy_array_wrap(wf_bitwise_invert(HANDLE(self)));
}

/* The truth value of a one-element array (evaluates with the GIL released). */
static int array_bool(PyObject *self)
{
    if (wf_array_size(HANDLE(self)) != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "The truth value of an array with more than one element is ambiguous");
        return -1;
    }
    PyObject *item = weftpy_array_item(HANDLE(self));
    if (item == NULL)
        return -1;
    int truth = PyObject_IsTrue(item);
    Py_DECREF(item);
    return truth;
}

static PyObject *array_int(PyObject *self)
{
    PyObject *item = weftpy_array_item(HANDLE(self));
    if (item == NULL)
        return NULL;
    PyObject *out = PyNumber_Long(item);
    Py_DECREF(item);
    return out;
}

static PyObject *array_float(PyObject *self)
{
    PyObject *item = weftpy_array_item(HANDLE(self));
    if (item == NULL)
        return NULL;
    PyObject *out = PyNumber_Float(item);
    Py_DECREF(item);
    return out;
}

static PyObject *array_index(PyObject *self)
{
    if (!weftpy_dtype_is_integer(wf_array_dtype(HANDLE(self))) || wf_array_size(HANDLE(self)) != 1) {
        PyErr_SetString(PyExc_TypeError, "only integer scalar arrays can be converted to an index");
        return NULL;
    }
    return weftpy_array_item(HANDLE(self));
}

static PyNumberMethods array_number = {
    .nb_add = array_add,
    .nb_subtract = array_subtract,
    .nb_multiply = array_multiply,
    .nb_remainder = array_remainder,
    .nb_power = array_power,
    .nb_negative = array_negative,
    .nb_positive = array_positive,
    .nb_absolute = array_absolute,
    .nb_bool = array_bool,
    .nb_invert = array_invert,
    .nb_and = array_and,
    .nb_lshift = array_lshift,
    .nb_rshift = array_rshift,
    .nb_inplace_lshift = array_inplace_lshift,
    .nb_inplace_rshift = array_inplace_rshift,
    .nb_or = array_or,
    .nb_xor = array_xor,
    .nb_int = array_int,
    .nb_float = array_float,
    .nb_inplace_add = array_inplace_add,
    .nb_inplace_subtract = array_inplace_subtract,
    .nb_inplace_multiply = array_inplace_multiply,
    .nb_inplace_remainder = array_inplace_remainder,
    .nb_inplace_power = array_inplace_power,
    .nb_inplace_and = array_inplace_and,
    .nb_inplace_or = array_inplace_or,
    .nb_inplace_xor = array_inplace_xor,
    .nb_floor_divide = array_floor_divide,
    .nb_true_divide = array_true_divide,
    .nb_inplace_floor_divide = array_inplace_floor_divide,
    .nb_inplace_true_divide = array_inplace_true_divide,
    .nb_index = array_index,
    .nb_matrix_multiply = array_matmul,
    .nb_inplace_matrix_multiply = array_inplace_matmul,
};

static PyObject *array_richcompare(PyObject *a, PyObject *b, int op)
{
    wf_array *(*fn)(wf_array *, wf_array *) = NULL;
    switch (op) {
    case Py_LT:
        fn = wf_less;
        break;
    case Py_LE:
        fn = wf_less_equal;
        break;
    case Py_EQ:
        fn = wf_equal;
        break;
    case Py_NE:
        fn = wf_not_equal;
        break;
    case Py_GT:
        fn = wf_greater;
        break;
    case Py_GE:
        fn = wf_greater_equal;
        break;
    }
    /* a == None, a == [1, 2] and the like: MLX answers False / True, not an
     * error; ordering against them is a ValueError. */
    if ((op == Py_EQ || op == Py_NE) && !weftpy_is_python_scalar(b) && !WeftArray_Check(b) &&
        (PyList_Check(b) || PyTuple_Check(b) || PyUnicode_Check(b) ||
         (!PySequence_Check(b) && !PyObject_CheckBuffer(b))))
        return PyBool_FromLong(op == Py_NE);
    if (!operator_operand_ok(b))
        return NULL;
    if (!weftpy_is_python_scalar(b) && !WeftArray_Check(b) && !PyObject_CheckBuffer(b) &&
        !PyObject_HasAttrString(b, "__array__")) {
        PyErr_Format(PyExc_ValueError, "an array cannot be compared with a %s",
                     Py_TYPE(b)->tp_name);
        return NULL;
    }
    return weftpy_array_wrap_or_raise(weftpy_binary(fn, a, b));
}

/* ------------------------------------------------------------ sequence */

static Py_ssize_t array_length(PyObject *self)
{
    if (wf_array_ndim(HANDLE(self)) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of unsized (0-d) array");
        return -1;
    }
    return (Py_ssize_t)wf_array_shape(HANDLE(self))[0];
}

static PyMappingMethods array_mapping = {
    .mp_length = array_length,
    .mp_subscript = weftpy_array_getitem,
    .mp_ass_subscript = weftpy_array_setitem,
};

/* iter(a) yields a[0], a[1], ... (a 0-d array is not iterable). */
static PyObject *array_iter(PyObject *self)
{
    if (wf_array_ndim(HANDLE(self)) == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d array");
        return NULL;
    }
    return PySeqIter_New(self);
}

static PyObject *array_sq_item(PyObject *self, Py_ssize_t i)
{
    if (wf_array_ndim(HANDLE(self)) == 0 || i >= wf_array_shape(HANDLE(self))[0]) {
        PyErr_SetString(PyExc_IndexError, "array index out of range");
        return NULL;
    }
    PyObject *index = PyLong_FromSsize_t(i);
    if (index == NULL)
        return NULL;
    PyObject *out = weftpy_array_getitem(self, index);
    Py_DECREF(index);
    return out;
}

static PySequenceMethods array_sequence = {
    .sq_item = array_sq_item,
};

PyTypeObject WeftArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "weft.array",
    .tp_basicsize = sizeof(WeftArray),
    .tp_dealloc = array_dealloc,
    .tp_as_number = &array_number,
    .tp_as_sequence = &array_sequence,
    .tp_as_mapping = &array_mapping,
    .tp_as_buffer = &weftpy_array_buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "array(val, dtype=None): a lazy n-dimensional array.",
    .tp_richcompare = array_richcompare,
    .tp_weaklistoffset = offsetof(WeftArray, weakrefs),
    .tp_iter = array_iter,
    .tp_methods = array_methods,
    .tp_getset = array_getset,
    .tp_new = array_new,
};

/* _set_array_class(cls): results are made as instances of cls, a subclass
 * without instance dicts (the package's weft.array). */
static PyObject *set_array_class(PyObject *module, PyObject *cls)
{
    (void)module;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &WeftArray_Type) ||
        ((PyTypeObject *)cls)->tp_basicsize != WeftArray_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "expected a subclass of the array type with __slots__ = ()");
        return NULL;
    }
    Py_INCREF(cls);
    result_class = (PyTypeObject *)cls;
    Py_RETURN_NONE;
}

static PyMethodDef array_module_methods[] = {
    {"_set_array_class", set_array_class, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int weftpy_array_init_type(PyObject *module)
{
    if (PyType_Ready(&WeftArray_Type) < 0)
        return -1;
    Py_INCREF(&WeftArray_Type);
    if (PyModule_AddObject(module, "array", (PyObject *)&WeftArray_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, array_module_methods);
}
