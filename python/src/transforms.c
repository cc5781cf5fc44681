/*
 * transforms.c - weft._core.Function (a wf_fn over a Python callable taking
 * and returning flat lists of arrays) and the transforms over it. The
 * package (weft/_transforms.py) turns pytrees into those flat lists.
 *
 * Calls into Python: the wf_fn callback takes the GIL itself
 * (weftpy_callback_enter), so it works on any weft thread, and every call of
 * a wf_fn from here releases the GIL first: the call may wait for another
 * thread's trace, whose body needs the GIL.
 */
#include "weft_py.h"

#include <stdlib.h>

typedef struct {
    PyObject_HEAD
    wf_fn *fn; /* owned */
    PyObject *weakrefs;
} WeftFunction;

static PyTypeObject WeftFunction_Type;

/* ------------------------------------------------------------ the callback */

/* A Python callable behind a wf_fn: it takes a list of arrays and returns an
 * array or a list/tuple of arrays. */
typedef struct {
    PyObject *callable; /* owned; released with the GIL by python_payload_free */
} python_payload;

static void python_payload_free(void *payload)
{
    python_payload *p = payload;
    weftpy_decref_from_any_thread(p->callable);
    free(p);
}

static PyObject *array_list_object(wf_array *const *arrays, size_t count)
{
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        PyObject *item = weftpy_array_wrap(wf_retain_unscoped(arrays[i]));
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* Stores the arrays of `result` (an array or a sequence of arrays) as new
 * references in outputs; false with a Python exception set. */
static bool collect_outputs(PyObject *result, wf_array **outputs, size_t *noutputs)
{
    if (WeftArray_Check(result)) {
        if (*noutputs < 1) {
            PyErr_SetString(PyExc_ValueError, "no room for the function's output");
            return false;
        }
        outputs[0] = wf_retain_unscoped(((WeftArray *)result)->handle);
        *noutputs = 1;
        return true;
    }
    PyObject *seq = PySequence_Fast(result, "a weft function must return arrays");
    if (seq == NULL)
        return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((size_t)n > *noutputs) {
        PyErr_Format(PyExc_ValueError, "a weft function returned %zd arrays; at most %zu fit",
                     n, *noutputs);
        Py_DECREF(seq);
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!WeftArray_Check(PySequence_Fast_GET_ITEM(seq, i))) {
            PyErr_Format(PyExc_ValueError, "a weft function must return arrays, got %s",
                         Py_TYPE(PySequence_Fast_GET_ITEM(seq, i))->tp_name);
            Py_DECREF(seq);
            return false;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        outputs[i] = wf_retain_unscoped(((WeftArray *)PySequence_Fast_GET_ITEM(seq, i))->handle);
    *noutputs = (size_t)n;
    Py_DECREF(seq);
    return true;
}

static wf_status python_callback(void *payload, wf_array *const *inputs, size_t ninputs,
                                 wf_array **outputs, size_t *noutputs)
{
    python_payload *p = payload;
    PyGILState_STATE state;
    if (!weftpy_callback_enter(&state))
        return WF_ERR_MISUSE;
    wf_status status = WF_OK;
    PyObject *args = array_list_object(inputs, ninputs);
    PyObject *result = args != NULL ? PyObject_CallOneArg(p->callable, args) : NULL;
    if (result == NULL || !collect_outputs(result, outputs, noutputs)) {
        *noutputs = 0;
        status = weftpy_callback_failed();
    }
    Py_XDECREF(result);
    Py_XDECREF(args);
    weftpy_callback_leave(state);
    return status;
}

/* A wf_fn calling `callable` (a new reference); NULL with an exception set. */
static wf_fn *fn_from_callable(PyObject *callable)
{
    if (!PyCallable_Check(callable)) {
        PyErr_SetString(PyExc_TypeError, "expected a callable");
        return NULL;
    }
    python_payload *p = malloc(sizeof *p);
    if (p == NULL)
        return (wf_fn *)PyErr_NoMemory();
    p->callable = Py_NewRef(callable);
    /* wf_fn_new frees the payload itself when it fails; we hold the GIL, so
     * the decref in python_payload_free is immediate. */
    wf_fn *fn = wf_fn_new(python_callback, p, python_payload_free);
    if (fn == NULL)
        weftpy_raise_weft_error();
    return fn;
}

/* ------------------------------------------------------------ Function */

static PyObject *function_wrap(wf_fn *fn)
{
    if (fn == NULL)
        return weftpy_raise_weft_error();
    WeftFunction *self = PyObject_New(WeftFunction, &WeftFunction_Type);
    if (self == NULL) {
        wf_fn_release(fn);
        return NULL;
    }
    self->fn = fn;
    self->weakrefs = NULL;
    return (PyObject *)self;
}

static PyObject *function_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    PyObject *callable;
    static char *names[] = {"fn", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Function", names, &callable))
        return NULL;
    wf_fn *fn = fn_from_callable(callable);
    return fn != NULL ? function_wrap(fn) : NULL;
}

static void function_dealloc(PyObject *obj)
{
    WeftFunction *self = (WeftFunction *)obj;
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs(obj);
    /* Releasing may run the payload destructor (it takes the GIL, which this
     * thread holds: re-entrant) and erases cache entries; it never waits. */
    wf_fn_release(self->fn);
    PyObject_Free(obj);
}

bool weftpy_array_args_from(PyObject *list, weftpy_array_args *out)
{
    out->items = NULL;
    out->count = 0;
    PyObject *seq = PySequence_Fast(list, "expected a list of arrays");
    if (seq == NULL)
        return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    out->items = PyMem_Calloc((size_t)n + 1, sizeof(wf_array *));
    if (out->items == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        wf_array *a = weftpy_array_from_object(PySequence_Fast_GET_ITEM(seq, i), WF_DTYPE_COUNT);
        if (a == NULL) {
            out->count = (size_t)i;
            Py_DECREF(seq);
            return false;
        }
        out->items[i] = a;
    }
    out->count = (size_t)n;
    Py_DECREF(seq);
    return true;
}

void weftpy_array_args_release(weftpy_array_args *args)
{
    for (size_t i = 0; i < args->count; i++)
        wf_release(args->items[i]);
    PyMem_Free(args->items);
}

/* A list of Python arrays from `count` new references (stolen). */
static PyObject *steal_into_list(wf_array **arrays, size_t count)
{
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; i < count; i++) {
        if (list == NULL) {
            wf_release(arrays[i]);
            continue;
        }
        PyObject *item = weftpy_array_wrap(arrays[i]);
        if (item == NULL) {
            Py_CLEAR(list);
            for (size_t j = i + 1; j < count; j++)
                wf_release(arrays[j]);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* Output capacity of a Function call (compiled training steps return every
 * parameter). */
#define CALL_CAPACITY 4096

/* fn(list_of_arrays) -> list of arrays, the GIL released during the call. */
static PyObject *function_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *list;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "Function takes one list of arrays");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:Function", &list))
        return NULL;
    weftpy_array_args in;
    if (!weftpy_array_args_from(list, &in)) {
        weftpy_array_args_release(&in);
        return NULL;
    }
    wf_array **outputs = PyMem_Calloc(CALL_CAPACITY, sizeof(wf_array *));
    if (outputs == NULL) {
        weftpy_array_args_release(&in);
        return PyErr_NoMemory();
    }
    size_t noutputs = CALL_CAPACITY;
    wf_status status;
    wf_fn *fn = ((WeftFunction *)self)->fn;
    Py_BEGIN_ALLOW_THREADS
    status = wf_fn_call(fn, in.items, in.count, outputs, &noutputs);
    Py_END_ALLOW_THREADS
    weftpy_array_args_release(&in);
    PyObject *result = status == WF_OK ? steal_into_list(outputs, noutputs)
                                       : weftpy_raise_weft_error();
    PyMem_Free(outputs);
    return result;
}

static PyTypeObject WeftFunction_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "weft._core.Function",
    .tp_basicsize = sizeof(WeftFunction),
    .tp_dealloc = function_dealloc,
    .tp_call = function_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Function(fn): a weft function over a callable taking and returning lists of "
              "arrays; calling it releases the GIL.",
    .tp_weaklistoffset = offsetof(WeftFunction, weakrefs),
    .tp_new = function_new,
};

static bool function_arg(PyObject *obj, wf_fn **out)
{
    if (obj == Py_None) {
        *out = NULL;
        return true;
    }
    if (!PyObject_TypeCheck(obj, &WeftFunction_Type)) {
        PyErr_Format(PyExc_TypeError, "expected a weft._core.Function, got %s",
                     Py_TYPE(obj)->tp_name);
        return false;
    }
    *out = ((WeftFunction *)obj)->fn;
    return true;
}

wf_fn *weftpy_function_handle(PyObject *obj)
{
    wf_fn *fn;
    return function_arg(obj, &fn) ? fn : NULL;
}

PyObject *weftpy_function_wrap(wf_fn *fn)
{
    return function_wrap(fn);
}

/* ------------------------------------------------------------ transforms */

/* _vjp(fn, primals, cotangents) -> (outputs, cotangents of the primals). */
static PyObject *py_vjp(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *fn_obj, *primals_obj, *cotangents_obj;
    wf_fn *fn;
    if (!PyArg_ParseTuple(args, "OOO:vjp", &fn_obj, &primals_obj, &cotangents_obj) ||
        !function_arg(fn_obj, &fn))
        return NULL;
    weftpy_array_args primals, cotangents = {NULL, 0};
    PyObject *result = NULL;
    if (!weftpy_array_args_from(primals_obj, &primals) || !weftpy_array_args_from(cotangents_obj, &cotangents))
        goto done;
    wf_array **outputs = PyMem_Calloc(cotangents.count + 1, sizeof(wf_array *));
    wf_array **grads = PyMem_Calloc(primals.count + 1, sizeof(wf_array *));
    if (outputs == NULL || grads == NULL) {
        PyMem_Free(outputs);
        PyMem_Free(grads);
        PyErr_NoMemory();
        goto done;
    }
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = wf_vjp(fn, primals.items, primals.count, cotangents.items, cotangents.count,
                    outputs, grads);
    Py_END_ALLOW_THREADS
    if (status == WF_OK) {
        PyObject *out_list = steal_into_list(outputs, cotangents.count);
        PyObject *grad_list = steal_into_list(grads, primals.count);
        if (out_list != NULL && grad_list != NULL)
            result = PyTuple_Pack(2, out_list, grad_list);
        Py_XDECREF(out_list);
        Py_XDECREF(grad_list);
    } else {
        weftpy_raise_weft_error();
    }
    PyMem_Free(outputs);
    PyMem_Free(grads);
done:
    weftpy_array_args_release(&primals);
    weftpy_array_args_release(&cotangents);
    return result;
}

/* _jvp(fn, primals, tangents) -> (outputs, output tangents). */
static PyObject *py_jvp(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *fn_obj, *primals_obj, *tangents_obj;
    wf_fn *fn;
    if (!PyArg_ParseTuple(args, "OOO:jvp", &fn_obj, &primals_obj, &tangents_obj) ||
        !function_arg(fn_obj, &fn))
        return NULL;
    weftpy_array_args primals, tangents = {NULL, 0};
    PyObject *result = NULL;
    if (!weftpy_array_args_from(primals_obj, &primals) || !weftpy_array_args_from(tangents_obj, &tangents))
        goto done;
    if (tangents.count != primals.count) {
        PyErr_SetString(PyExc_ValueError, "jvp: one tangent per primal is needed");
        goto done;
    }
    wf_array *outputs[WF_FN_MAX_OUTPUTS], *out_tangents[WF_FN_MAX_OUTPUTS];
    size_t noutputs = WF_FN_MAX_OUTPUTS;
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = wf_jvp(fn, primals.items, primals.count, tangents.items, outputs, out_tangents,
                    &noutputs);
    Py_END_ALLOW_THREADS
    if (status == WF_OK) {
        PyObject *out_list = steal_into_list(outputs, noutputs);
        PyObject *tangent_list = steal_into_list(out_tangents, noutputs);
        if (out_list != NULL && tangent_list != NULL)
            result = PyTuple_Pack(2, out_list, tangent_list);
        Py_XDECREF(out_list);
        Py_XDECREF(tangent_list);
    } else {
        weftpy_raise_weft_error();
    }
done:
    weftpy_array_args_release(&primals);
    weftpy_array_args_release(&tangents);
    return result;
}

static bool int_vector(PyObject *obj, int **out, size_t *count, bool none_is_unmapped)
{
    *out = NULL;
    *count = 0;
    PyObject *seq = PySequence_Fast(obj, "expected a list of ints");
    if (seq == NULL)
        return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *values = PyMem_Calloc((size_t)n + 1, sizeof(int));
    if (values == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (none_is_unmapped && item == Py_None) {
            values[i] = WF_VMAP_NOT_MAPPED;
            continue;
        }
        const long v = PyLong_AsLong(item);
        if (v == -1 && PyErr_Occurred()) {
            PyMem_Free(values);
            Py_DECREF(seq);
            return false;
        }
        values[i] = (int)v;
    }
    Py_DECREF(seq);
    *out = values;
    *count = (size_t)n;
    return true;
}

static PyObject *grad_like(PyObject *args, wf_fn *(*make)(wf_fn *, const int *, size_t))
{
    PyObject *fn_obj, *argnums_obj;
    wf_fn *fn;
    if (!PyArg_ParseTuple(args, "OO", &fn_obj, &argnums_obj) || !function_arg(fn_obj, &fn))
        return NULL;
    int *argnums;
    size_t count;
    if (!int_vector(argnums_obj, &argnums, &count, false))
        return NULL;
    if (count == 0) {
        PyMem_Free(argnums);
        PyErr_SetString(PyExc_ValueError, "gradient with respect to no argument");
        return NULL;
    }
    wf_fn *made = make(fn, argnums, count);
    PyMem_Free(argnums);
    return function_wrap(made);
}

static PyObject *py_grad(PyObject *module, PyObject *args)
{
    (void)module;
    return grad_like(args, wf_grad);
}

static PyObject *py_value_and_grad(PyObject *module, PyObject *args)
{
    (void)module;
    return grad_like(args, wf_value_and_grad);
}

/* _vmap(fn, in_axes) with None for unmapped inputs; outputs on axis 0. */
static PyObject *py_vmap(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *fn_obj, *in_axes_obj;
    wf_fn *fn;
    if (!PyArg_ParseTuple(args, "OO:vmap", &fn_obj, &in_axes_obj) || !function_arg(fn_obj, &fn))
        return NULL;
    int *in_axes;
    size_t nin;
    if (!int_vector(in_axes_obj, &in_axes, &nin, true))
        return NULL;
    wf_fn *made = wf_vmap(fn, in_axes, nin, NULL, 0);
    PyMem_Free(in_axes);
    return function_wrap(made);
}

static PyObject *py_custom_function(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *objs[4];
    wf_fn *fns[4];
    if (!PyArg_ParseTuple(args, "OOOO:custom_function", &objs[0], &objs[1], &objs[2], &objs[3]))
        return NULL;
    for (int i = 0; i < 4; i++)
        if (!function_arg(objs[i], &fns[i]))
            return NULL;
    if (fns[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "custom_function needs a function");
        return NULL;
    }
    return function_wrap(wf_custom_function(fns[0], fns[1], fns[2], fns[3]));
}

static PyObject *py_checkpoint(PyObject *module, PyObject *fn_obj)
{
    (void)module;
    wf_fn *fn;
    if (!function_arg(fn_obj, &fn) || fn == NULL)
        return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_TypeError, "expected a Function"), NULL);
    return function_wrap(wf_checkpoint(fn));
}

static PyMethodDef transform_methods[] = {
    {"_vjp", py_vjp, METH_VARARGS, "_vjp(fn, primals, cotangents) -> (outputs, vjps)"},
    {"_jvp", py_jvp, METH_VARARGS, "_jvp(fn, primals, tangents) -> (outputs, jvps)"},
    {"_grad", py_grad, METH_VARARGS, "_grad(fn, argnums) -> Function"},
    {"_value_and_grad", py_value_and_grad, METH_VARARGS, "_value_and_grad(fn, argnums)"},
    {"_vmap", py_vmap, METH_VARARGS, "_vmap(fn, in_axes) -> Function (outputs on axis 0)"},
    {"_custom_function", py_custom_function, METH_VARARGS,
     "_custom_function(fn, vjp, jvp, vmap) -> Function"},
    {"_checkpoint", py_checkpoint, METH_O, "_checkpoint(fn) -> Function"},
    {NULL, NULL, 0, NULL},
};

int weftpy_transforms_init(PyObject *module)
{
    if (PyType_Ready(&WeftFunction_Type) < 0)
        return -1;
    Py_INCREF(&WeftFunction_Type);
    if (PyModule_AddObject(module, "Function", (PyObject *)&WeftFunction_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, transform_methods);
}
