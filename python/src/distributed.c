/*
 * distributed.c - the C side of weft.distributed (python/weft/distributed.py
 * gives it mlx.core.distributed's names and signatures): group handles as
 * capsules and the collective ops. Nothing here waits except split, which
 * releases the GIL; collectives wait inside evaluation, which releases it.
 */
#include "weft_py.h"

static const char GROUP_CAPSULE[] = "weft.distributed.group";

static void group_capsule_free(PyObject *capsule)
{
    wf_group *g = PyCapsule_GetPointer(capsule, GROUP_CAPSULE);
    if (g)
        wf_group_release(g);
}

static PyObject *group_capsule(wf_group *g)
{
    if (!g)
        return weftpy_raise_weft_error();
    PyObject *capsule = PyCapsule_New(g, GROUP_CAPSULE, group_capsule_free);
    if (!capsule)
        wf_group_release(g);
    return capsule;
}

/* The group of a capsule (borrowed), NULL for None: the world group. */
static bool group_arg(PyObject *obj, wf_group **out)
{
    *out = NULL;
    if (obj == Py_None)
        return true;
    *out = PyCapsule_GetPointer(obj, GROUP_CAPSULE);
    return *out != NULL;
}

static PyObject *py_is_available(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    return PyBool_FromLong(wf_distributed_is_available());
}

static PyObject *py_init(PyObject *module, PyObject *args)
{
    (void)module;
    int strict = 0;
    if (!PyArg_ParseTuple(args, "p", &strict))
        return NULL;
    wf_group *g;
    Py_BEGIN_ALLOW_THREADS /* MPI_Init may take a while */
    g = wf_group_init(strict);
    Py_END_ALLOW_THREADS
    return group_capsule(g);
}

static PyObject *py_rank_size(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *capsule;
    wf_group *g;
    if (!PyArg_ParseTuple(args, "O", &capsule) || !group_arg(capsule, &g))
        return NULL;
    return Py_BuildValue("(ii)", wf_group_rank(g), wf_group_size(g));
}

static PyObject *py_split(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *capsule;
    int color, key;
    wf_group *g;
    if (!PyArg_ParseTuple(args, "Oii", &capsule, &color, &key) || !group_arg(capsule, &g))
        return NULL;
    wf_group *split;
    Py_BEGIN_ALLOW_THREADS /* collective: waits for the other ranks */
    split = wf_group_split(g, color, key);
    Py_END_ALLOW_THREADS
    return group_capsule(split);
}

static PyObject *wrap_result(wf_array *out)
{
    if (!out)
        return weftpy_raise_weft_error();
    return weftpy_array_wrap(out);
}

/* _collective(kind, x, group): kind 0 all_sum, 1 all_max, 2 all_min,
 * 3 all_gather, 4 sum_scatter. */
static PyObject *py_collective(PyObject *module, PyObject *args)
{
    (void)module;
    static wf_array *(*const ops[])(wf_array *, wf_group *) = {
        wf_all_sum, wf_all_max, wf_all_min, wf_all_gather, wf_sum_scatter};
    int kind;
    PyObject *x_obj, *capsule;
    wf_group *g;
    if (!PyArg_ParseTuple(args, "iOO", &kind, &x_obj, &capsule) || !group_arg(capsule, &g))
        return NULL;
    if (kind < 0 || kind > 4)
        return PyErr_Format(PyExc_ValueError, "unknown collective %d", kind);
    wf_array *x = weftpy_array_from_object(x_obj, WF_DTYPE_COUNT);
    if (!x)
        return NULL;
    wf_array *out = ops[kind](x, g);
    wf_release(x);
    return wrap_result(out);
}

static PyObject *py_send(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *x_obj, *capsule;
    int dst;
    wf_group *g;
    if (!PyArg_ParseTuple(args, "OiO", &x_obj, &dst, &capsule) || !group_arg(capsule, &g))
        return NULL;
    wf_array *x = weftpy_array_from_object(x_obj, WF_DTYPE_COUNT);
    if (!x)
        return NULL;
    wf_array *out = wf_send(x, dst, g);
    wf_release(x);
    return wrap_result(out);
}

static PyObject *py_recv(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *shape_obj, *dtype_obj, *capsule;
    int src;
    wf_group *g;
    if (!PyArg_ParseTuple(args, "OOiO", &shape_obj, &dtype_obj, &src, &capsule) ||
        !group_arg(capsule, &g))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    wf_dtype dtype;
    if (!weftpy_shape_list(shape_obj, "shape", shape, &ndim) ||
        !weftpy_dtype_from_object(dtype_obj, false, &dtype))
        return NULL;
    return wrap_result(wf_recv(shape, ndim, dtype, src, g));
}

static PyObject *py_recv_like(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *x_obj, *capsule;
    int src;
    wf_group *g;
    if (!PyArg_ParseTuple(args, "OiO", &x_obj, &src, &capsule) || !group_arg(capsule, &g))
        return NULL;
    wf_array *x = weftpy_array_from_object(x_obj, WF_DTYPE_COUNT);
    if (!x)
        return NULL;
    wf_array *out = wf_recv_like(x, src, g);
    wf_release(x);
    return wrap_result(out);
}

static PyMethodDef distributed_methods[] = {
    {"_distributed_is_available", py_is_available, METH_NOARGS, NULL},
    {"_distributed_init", py_init, METH_VARARGS, NULL},
    {"_distributed_rank_size", py_rank_size, METH_VARARGS, NULL},
    {"_distributed_split", py_split, METH_VARARGS, NULL},
    {"_distributed_collective", py_collective, METH_VARARGS, NULL},
    {"_distributed_send", py_send, METH_VARARGS, NULL},
    {"_distributed_recv", py_recv, METH_VARARGS, NULL},
    {"_distributed_recv_like", py_recv_like, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int weftpy_distributed_init(PyObject *module)
{
    return PyModule_AddFunctions(module, distributed_methods);
}
