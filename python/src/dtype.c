/*
 * dtype.c - weft.Dtype: one immortal object per weft dtype (weft.float32, ...).
 */
#include "weft_py.h"

#include <string.h>

static WeftDtype dtype_objects[WF_DTYPE_COUNT];

static PyObject *dtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat("weft.%s", wf_dtype_name(((WeftDtype *)self)->code));
}

static PyObject *dtype_get_size(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(wf_dtype_size(((WeftDtype *)self)->code));
}

static Py_hash_t dtype_hash(PyObject *self)
{
    return (Py_hash_t)((WeftDtype *)self)->code + 1;
}

/* Dtypes are singletons, so equality is identity; comparing with another type
 * is False (MLX's behaviour), not an error. */
static PyObject *dtype_richcompare(PyObject *self, PyObject *other, int op)
{
    if (op != Py_EQ && op != Py_NE)
        Py_RETURN_NOTIMPLEMENTED;
    const bool same = self == other;
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

/* Pickling: a dtype reduces to its name looked up on the package. */
static PyObject *dtype_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyUnicode_FromString(wf_dtype_name(((WeftDtype *)self)->code));
}

static PyGetSetDef dtype_getset[] = {
    {"size", dtype_get_size, NULL, "Bytes per element.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject WeftDtype_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "weft.Dtype",
    .tp_basicsize = sizeof(WeftDtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array's element type (weft.float32, weft.int32, ...).",
    .tp_repr = dtype_repr,
    .tp_hash = dtype_hash,
    .tp_richcompare = dtype_richcompare,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
};

PyObject *weftpy_dtype_object(wf_dtype dtype)
{
    return (PyObject *)&dtype_objects[dtype];
}

bool weftpy_dtype_from_object(PyObject *obj, bool allow_none, wf_dtype *out)
{
    if (allow_none && (obj == NULL || obj == Py_None)) {
        *out = WF_DTYPE_COUNT;
        return true;
    }
    if (obj != NULL && Py_IS_TYPE(obj, &WeftDtype_Type)) {
        *out = ((WeftDtype *)obj)->code;
        return true;
    }
    PyErr_Format(PyExc_TypeError, "expected a weft Dtype, got %s",
                 obj != NULL ? Py_TYPE(obj)->tp_name : "nothing");
    return false;
}

bool weftpy_dtype_is_float(wf_dtype dtype)
{
    return dtype == WF_DTYPE_F16 || dtype == WF_DTYPE_BF16 || dtype == WF_DTYPE_F32 ||
           dtype == WF_DTYPE_F64;
}

bool weftpy_dtype_is_integer(wf_dtype dtype)
{
    return dtype != WF_DTYPE_BOOL && !weftpy_dtype_is_float(dtype) &&
           strstr(wf_dtype_name(dtype), "complex") == NULL;
}

int weftpy_dtype_init(PyObject *module)
{
    if (PyType_Ready(&WeftDtype_Type) < 0)
        return -1;
    Py_INCREF(&WeftDtype_Type);
    if (PyModule_AddObject(module, "Dtype", (PyObject *)&WeftDtype_Type) < 0)
        return -1;
    for (int d = 0; d < WF_DTYPE_COUNT; d++) {
        WeftDtype *obj = &dtype_objects[d];
        (void)PyObject_Init((PyObject *)obj, &WeftDtype_Type);
        obj->code = (wf_dtype)d;
        /* The objects are static: this reference is never dropped. */
        Py_INCREF(obj);
        const char *name = wf_dtype_name((wf_dtype)d);
        /* mlx.core spells bool as bool_ (bool is Python's). */
        const char *attr = strcmp(name, "bool") == 0 ? "bool_" : name;
        Py_INCREF(obj);
        if (PyModule_AddObject(module, attr, (PyObject *)obj) < 0)
            return -1;
    }
    return 0;
}
