/*
 * export.c - function export and import (weft.h, "export and import") and
 * wf_graph_to_dot for the package's weft/_export.py, which turns MLX's
 * argument conventions (positional arrays, keyword arrays) into a flat list
 * of arrays and a tag naming their layout.
 *
 * An exporter is a capsule over a small holder (the exporter is closed,
 * and the holder emptied, by _exporter_close or by the capsule's
 * destructor). Tracing runs the Python function through a Function, whose
 * callback takes the GIL itself: every call that traces releases it.
 */
#include "weft_py.h"

#include <stdlib.h>

#define EXPORTER_CAPSULE "weft._core.exporter"

typedef struct {
    wf_exporter *ex; /* NULL once closed */
} exporter_holder;

static void exporter_capsule_free(PyObject *capsule)
{
    exporter_holder *h = PyCapsule_GetPointer(capsule, EXPORTER_CAPSULE);
    if (h == NULL) {
        PyErr_Clear();
        return;
    }
    wf_exporter_close(h->ex);
    free(h);
}

/* _exporter_new(path, fn, shapeless, metadata) -> exporter */
static PyObject *py_exporter_new(PyObject *module, PyObject *args)
{
    (void)module;
    const char *path, *metadata;
    PyObject *fn_obj;
    int shapeless;
    if (!PyArg_ParseTuple(args, "sOps:_exporter_new", &path, &fn_obj, &shapeless, &metadata))
        return NULL;
    wf_fn *fn = weftpy_function_handle(fn_obj);
    if (fn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_exporter_new needs a Function");
        return NULL;
    }
    exporter_holder *h = calloc(1, sizeof *h);
    if (h == NULL)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    h->ex = wf_exporter_new(path, fn, shapeless != 0, metadata);
    Py_END_ALLOW_THREADS
    if (h->ex == NULL) {
        free(h);
        return weftpy_raise_weft_error();
    }
    PyObject *capsule = PyCapsule_New(h, EXPORTER_CAPSULE, exporter_capsule_free);
    if (capsule == NULL) {
        wf_exporter_close(h->ex);
        free(h);
    }
    return capsule;
}

static exporter_holder *open_exporter(PyObject *capsule)
{
    exporter_holder *h = PyCapsule_GetPointer(capsule, EXPORTER_CAPSULE);
    if (h != NULL && h->ex == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the exporter is closed");
        return NULL;
    }
    return h;
}

/* _exporter_add(exporter, tag, arrays): traces the function once. */
static PyObject *py_exporter_add(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *capsule, *list;
    const char *tag;
    if (!PyArg_ParseTuple(args, "OsO:_exporter_add", &capsule, &tag, &list))
        return NULL;
    exporter_holder *h = open_exporter(capsule);
    if (h == NULL)
        return NULL;
    weftpy_array_args in;
    if (!weftpy_array_args_from(list, &in)) {
        weftpy_array_args_release(&in);
        return NULL;
    }
    wf_status status;
    wf_exporter *ex = h->ex;
    Py_BEGIN_ALLOW_THREADS
    status = wf_exporter_add(ex, tag, in.items, in.count);
    Py_END_ALLOW_THREADS
    weftpy_array_args_release(&in);
    return weftpy_none_or_raise(status);
}

static PyObject *py_exporter_close(PyObject *module, PyObject *capsule)
{
    (void)module;
    exporter_holder *h = PyCapsule_GetPointer(capsule, EXPORTER_CAPSULE);
    if (h == NULL)
        return NULL;
    wf_exporter *ex = h->ex;
    h->ex = NULL;
    wf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = wf_exporter_close(ex);
    Py_END_ALLOW_THREADS
    return weftpy_none_or_raise(status);
}

/* _import_function(path) -> (metadata, [(tag, Function, shapeless)] in file
 * order); each Function calls the file's traces of its tag. */
static PyObject *py_import_function(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *path_bytes;
    if (!PyUnicode_FSConverter(arg, &path_bytes))
        return NULL;
    wf_imported *imp;
    const char *path = PyBytes_AS_STRING(path_bytes);
    Py_BEGIN_ALLOW_THREADS
    imp = wf_import_function(path);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (imp == NULL)
        return weftpy_raise_weft_error();
    const size_t n = wf_imported_trace_count(imp);
    PyObject *traces = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; traces != NULL && i < n; i++) {
        const char *tag = wf_imported_trace_tag(imp, i);
        PyObject *fn = weftpy_function_wrap(wf_imported_fn(imp, tag));
        PyObject *entry = fn ? Py_BuildValue("(sNO)", tag, fn,
                                             wf_imported_trace_shapeless(imp, i) ? Py_True
                                                                                 : Py_False)
                             : NULL;
        if (entry == NULL)
            Py_CLEAR(traces);
        else
            PyList_SET_ITEM(traces, (Py_ssize_t)i, entry);
    }
    PyObject *result = traces ? Py_BuildValue("(sN)", wf_imported_metadata(imp), traces) : NULL;
    wf_imported_release(imp); /* the Functions hold their own references */
    return result;
}

/* _graph_to_dot(arrays, names) -> str; names: a list of str or None. */
static PyObject *py_graph_to_dot(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *list, *names_obj;
    if (!PyArg_ParseTuple(args, "OO:_graph_to_dot", &list, &names_obj))
        return NULL;
    weftpy_array_args in;
    if (!weftpy_array_args_from(list, &in)) {
        weftpy_array_args_release(&in);
        return NULL;
    }
    PyObject *result = NULL;
    const char **names = PyMem_Calloc(in.count + 1, sizeof *names);
    PyObject *seq = PySequence_Fast(names_obj, "names must be a sequence");
    if (names == NULL || seq == NULL || (size_t)PySequence_Fast_GET_SIZE(seq) != in.count) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "one name (or None) per array");
        goto done;
    }
    for (size_t i = 0; i < in.count; i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i);
        if (name != Py_None && (names[i] = PyUnicode_AsUTF8(name)) == NULL)
            goto done;
    }
    size_t length = 0, written = 0;
    char *text = NULL;
    wf_status status = wf_graph_to_dot(in.items, names, in.count, NULL, 0, &length);
    while (status == WF_OK && (text == NULL || written > length)) {
        PyMem_Free(text);
        length = written > length ? written : length;
        text = PyMem_Malloc(length + 1);
        if (text == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        status = wf_graph_to_dot(in.items, names, in.count, text, length + 1, &written);
    }
    result = status == WF_OK ? PyUnicode_FromStringAndSize(text, (Py_ssize_t)written)
                             : weftpy_raise_weft_error();
    PyMem_Free(text);
done:
    Py_XDECREF(seq);
    PyMem_Free(names);
    weftpy_array_args_release(&in);
    return result;
}

static PyMethodDef export_methods[] = {
    {"_exporter_new", py_exporter_new, METH_VARARGS,
     "_exporter_new(path, fn, shapeless, metadata) -> exporter"},
    {"_exporter_add", py_exporter_add, METH_VARARGS, "_exporter_add(exporter, tag, arrays)"},
    {"_exporter_close", py_exporter_close, METH_O, "_exporter_close(exporter)"},
    {"_import_function", py_import_function, METH_O,
     "_import_function(path) -> (metadata, [(tag, Function, shapeless)])"},
    {"_graph_to_dot", py_graph_to_dot, METH_VARARGS, "_graph_to_dot(arrays, names) -> str"},
    {NULL, NULL, 0, NULL},
};

int weftpy_export_init(PyObject *module) { return PyModule_AddFunctions(module, export_methods); }
