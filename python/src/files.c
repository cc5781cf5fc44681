/*
 * files.c - the .npy, .npz and GGUF loaders and writers of weft_nn.h for
 * mx.load / mx.save / mx.savez / mx.savez_compressed / mx.save_gguf
 * (python/weft/__init__.py picks the format). A file that exists but is
 * truncated or corrupt raises ValueError (as MLX); one that cannot be
 * opened, OSError. Reading and writing release the GIL.
 */
#include "weft_py.h"

#include <unistd.h>

#include "weft_nn.h"

/* The error of a failed load of `path`: ValueError when the file is there. */
static PyObject *load_error(const char *path)
{
    if (wf_last_error() == WF_ERR_IO && access(path, R_OK) == 0) {
        PyErr_SetString(PyExc_ValueError, wf_last_error_message());
        return NULL;
    }
    return weftpy_raise_weft_error();
}

/* {name: array} as a new list; NULL with an exception. */
static wf_nn_params *params_from_dict(PyObject *dict)
{
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict of arrays");
        return NULL;
    }
    wf_nn_params *params = wf_nn_params_new();
    if (!params) {
        weftpy_raise_weft_error();
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        wf_array *a = name ? weftpy_array_from_object(value, WF_DTYPE_COUNT) : NULL;
        const wf_status st = a ? wf_nn_params_add(params, name, a) : WF_ERR_INVALID_ARGUMENT;
        wf_release(a);
        if (st != WF_OK) {
            wf_nn_params_release(params);
            if (!PyErr_Occurred()) {
                if (!name)
                    PyErr_SetString(PyExc_TypeError, "array names must be str");
                else
                    weftpy_raise_weft_error();
            }
            return NULL;
        }
    }
    return params;
}

static PyObject *dict_from_params(wf_nn_params *params)
{
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < wf_nn_params_count(params); i++) {
        PyObject *v = weftpy_array_wrap(wf_retain_unscoped(wf_nn_params_get(params, i)));
        if (!v || PyDict_SetItemString(dict, wf_nn_params_name(params, i), v) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(v);
    }
    return dict;
}

static PyObject *py_load_npy(PyObject *module, PyObject *arg)
{
    (void)module;
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path)
        return NULL;
    wf_array *a;
    Py_BEGIN_ALLOW_THREADS
    a = wf_nn_load_npy(path);
    Py_END_ALLOW_THREADS
    return a ? weftpy_array_wrap(a) : load_error(path);
}

static PyObject *py_save_npy(PyObject *module, PyObject *args)
{
    (void)module;
    const char *path;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "sO:_save_npy", &path, &obj))
        return NULL;
    wf_array *a = weftpy_array_from_object(obj, WF_DTYPE_COUNT);
    if (!a)
        return NULL;
    wf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = wf_nn_save_npy(a, path);
    Py_END_ALLOW_THREADS
    wf_release(a);
    return weftpy_none_or_raise(st);
}

static PyObject *py_load_npz(PyObject *module, PyObject *arg)
{
    (void)module;
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path)
        return NULL;
    wf_nn_params *p;
    Py_BEGIN_ALLOW_THREADS
    p = wf_nn_load_npz(path);
    Py_END_ALLOW_THREADS
    if (!p)
        return load_error(path);
    PyObject *d = dict_from_params(p);
    wf_nn_params_release(p);
    return d;
}

static PyObject *py_save_npz(PyObject *module, PyObject *args)
{
    (void)module;
    const char *path;
    PyObject *dict;
    int compressed;
    if (!PyArg_ParseTuple(args, "sOp:_save_npz", &path, &dict, &compressed))
        return NULL;
    wf_nn_params *p = params_from_dict(dict);
    if (!p)
        return NULL;
    wf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = wf_nn_save_npz(p, path, compressed != 0);
    Py_END_ALLOW_THREADS
    wf_nn_params_release(p);
    return weftpy_none_or_raise(st);
}

/* One metadata value as Python: an array, a str or a list of str. */
static PyObject *meta_value(const wf_nn_gguf_meta *m, size_t i)
{
    const char *const *s;
    const size_t n = wf_nn_gguf_meta_strings(m, i, &s);
    switch (wf_nn_gguf_meta_kind(m, i)) {
    case WF_GGUF_STRING: return PyUnicode_DecodeUTF8(s[0], (Py_ssize_t)strlen(s[0]), "replace");
    case WF_GGUF_STRINGS: {
        PyObject *list = PyList_New((Py_ssize_t)n);
        for (size_t j = 0; list && j < n; j++) {
            PyObject *v = PyUnicode_DecodeUTF8(s[j], (Py_ssize_t)strlen(s[j]), "replace");
            if (!v)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, (Py_ssize_t)j, v);
        }
        return list;
    }
    default: return weftpy_array_wrap(wf_retain_unscoped(wf_nn_gguf_meta_array(m, i)));
    }
}

static PyObject *py_load_gguf(PyObject *module, PyObject *arg)
{
    (void)module;
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path)
        return NULL;
    wf_nn_params *p;
    wf_nn_gguf_meta *m = NULL;
    Py_BEGIN_ALLOW_THREADS
    p = wf_nn_load_gguf(path, &m);
    Py_END_ALLOW_THREADS
    if (!p)
        return load_error(path);
    PyObject *arrays = dict_from_params(p), *meta = PyDict_New();
    for (size_t i = 0; meta && i < wf_nn_gguf_meta_count(m); i++) {
        PyObject *v = meta_value(m, i);
        if (!v || PyDict_SetItemString(meta, wf_nn_gguf_meta_key(m, i), v) < 0)
            Py_CLEAR(meta);
        Py_XDECREF(v);
    }
    wf_nn_params_release(p);
    wf_nn_gguf_meta_release(m);
    if (!arrays || !meta) {
        Py_XDECREF(arrays);
        Py_XDECREF(meta);
        return NULL;
    }
    return Py_BuildValue("(NN)", arrays, meta);
}

/* Adds one metadata item (str, list of str, or anything array-like). */
static bool add_meta(wf_nn_gguf_meta *m, const char *key, PyObject *v)
{
    wf_status st;
    if (PyUnicode_Check(v)) {
        const char *s = PyUnicode_AsUTF8(v);
        if (!s)
            return false;
        st = wf_nn_gguf_meta_add_strings(m, key, &s, 1, false);
    } else if (PyList_Check(v) && PyList_GET_SIZE(v) > 0 && PyUnicode_Check(PyList_GET_ITEM(v, 0))) {
        const Py_ssize_t n = PyList_GET_SIZE(v);
        const char **s = PyMem_Malloc((size_t)n * sizeof *s);
        if (!s) {
            PyErr_NoMemory();
            return false;
        }
        for (Py_ssize_t j = 0; j < n; j++)
            if (!(s[j] = PyUnicode_Check(PyList_GET_ITEM(v, j)) ? PyUnicode_AsUTF8(PyList_GET_ITEM(v, j))
                                                                 : NULL)) {
                PyMem_Free(s);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "save_gguf: a metadata list must hold only str");
                return false;
            }
        st = wf_nn_gguf_meta_add_strings(m, key, s, (size_t)n, true);
        PyMem_Free(s);
    } else {
        wf_array *a = weftpy_array_from_object(v, WF_DTYPE_COUNT);
        if (!a)
            return false;
        st = wf_nn_gguf_meta_add_array(m, key, a);
        wf_release(a);
    }
    if (st != WF_OK) {
        PyErr_SetString(PyExc_ValueError, wf_last_error_message());
        return false;
    }
    return true;
}

static PyObject *py_save_gguf(PyObject *module, PyObject *args)
{
    (void)module;
    const char *path;
    PyObject *dict, *meta_dict;
    if (!PyArg_ParseTuple(args, "sOO:_save_gguf", &path, &dict, &meta_dict))
        return NULL;
    wf_nn_params *p = params_from_dict(dict);
    if (!p)
        return NULL;
    wf_nn_gguf_meta *m = wf_nn_gguf_meta_new();
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    bool ok = m != NULL && PyDict_Check(meta_dict);
    while (ok && PyDict_Next(meta_dict, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        ok = k && add_meta(m, k, value);
    }
    wf_status st = WF_OK;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        st = wf_nn_save_gguf(p, m, path);
        Py_END_ALLOW_THREADS
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "save_gguf: metadata must be a dict with str keys");
    }
    wf_nn_params_release(p);
    wf_nn_gguf_meta_release(m);
    if (!ok)
        return NULL;
    if (st == WF_ERR_DTYPE) {
        PyErr_SetString(PyExc_ValueError, wf_last_error_message());
        return NULL;
    }
    return weftpy_none_or_raise(st);
}

static PyMethodDef file_methods[] = {
    {"_load_npy", py_load_npy, METH_O, NULL},
    {"_save_npy", py_save_npy, METH_VARARGS, NULL},
    {"_load_npz", py_load_npz, METH_O, NULL},
    {"_save_npz", py_save_npz, METH_VARARGS, NULL},
    {"_load_gguf", py_load_gguf, METH_O, NULL},
    {"_save_gguf", py_save_gguf, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int weftpy_files_init(PyObject *module)
{
    return PyModule_AddFunctions(module, file_methods);
}
