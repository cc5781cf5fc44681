/*
 * memory.c - the allocator's counters and limits (mlx.core's memory
 * functions), and safetensors files through weft_nn.
 */
#include "weft_py.h"

#include <stdint.h>

#include "weft_nn.h"

static PyObject *memory_field(size_t offset)
{
    wf_memory_stats stats = wf_memory_stats_default();
    if (wf_memory_stats_get(&stats) != WF_OK)
        return weftpy_raise_weft_error();
    size_t value;
    memcpy(&value, (const char *)&stats + offset, sizeof value);
    return PyLong_FromSize_t(value);
}

static PyObject *py_get_active_memory(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return memory_field(offsetof(wf_memory_stats, active_bytes));
}

static PyObject *py_get_peak_memory(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return memory_field(offsetof(wf_memory_stats, peak_bytes));
}

static PyObject *py_get_cache_memory(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return memory_field(offsetof(wf_memory_stats, cached_bytes));
}

static PyObject *py_reset_peak_memory(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    wf_reset_peak_memory();
    Py_RETURN_NONE;
}

static PyObject *py_clear_cache(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    wf_clear_cache();
    Py_RETURN_NONE;
}

/* set_memory_limit(limit) -> the previous limit (0 means none, as MLX). */
static PyObject *py_set_memory_limit(PyObject *module, PyObject *arg)
{
    (void)module;
    const unsigned long long limit = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    wf_memory_stats stats = wf_memory_stats_default();
    if (wf_memory_stats_get(&stats) != WF_OK)
        return weftpy_raise_weft_error();
    const wf_status status = wf_set_memory_limit(limit == 0 ? SIZE_MAX : (size_t)limit);
    if (status != WF_OK)
        return weftpy_raise_weft_error();
    return PyLong_FromSize_t(stats.limit_bytes == SIZE_MAX ? 0 : stats.limit_bytes);
}

/* set_cache_limit(limit) -> the previous cache limit, in bytes. */
static PyObject *py_set_cache_limit(PyObject *module, PyObject *arg)
{
    (void)module;
    const unsigned long long limit = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSize_t(wf_set_cache_limit(limit > SIZE_MAX ? SIZE_MAX : (size_t)limit));
}

/* A new metadata list of a {str: str} dict (TypeError naming the first
 * other key or value: the safetensors format maps strings to strings). */
static wf_nn_gguf_meta *string_metadata(PyObject *dict)
{
    wf_nn_gguf_meta *meta = wf_nn_gguf_meta_new();
    if (meta == NULL) {
        weftpy_raise_weft_error();
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError,
                         "save_safetensors: metadata maps str to str, not %R: %R", key, value);
            wf_nn_gguf_meta_release(meta);
            return NULL;
        }
        const char *k = PyUnicode_AsUTF8(key), *v = PyUnicode_AsUTF8(value);
        if (k == NULL || v == NULL || wf_nn_gguf_meta_add_strings(meta, k, &v, 1, false) != WF_OK) {
            if (!PyErr_Occurred())
                weftpy_raise_weft_error();
            wf_nn_gguf_meta_release(meta);
            return NULL;
        }
    }
    return meta;
}

/* _save_safetensors(path, {name: array}, {str: str} or None) */
static PyObject *py_save_safetensors(PyObject *module, PyObject *args)
{
    (void)module;
    const char *path;
    PyObject *dict, *meta_dict;
    if (!PyArg_ParseTuple(args, "sO!O:save_safetensors", &path, &PyDict_Type, &dict, &meta_dict))
        return NULL;
    if (meta_dict != Py_None && !PyDict_Check(meta_dict))
        return PyErr_Format(PyExc_TypeError, "save_safetensors: metadata must be a dict, not %s",
                            Py_TYPE(meta_dict)->tp_name);
    wf_nn_gguf_meta *meta = meta_dict != Py_None ? string_metadata(meta_dict) : NULL;
    if (meta_dict != Py_None && meta == NULL)
        return NULL;
    wf_nn_params *params = wf_nn_params_new();
    if (params == NULL) {
        wf_nn_gguf_meta_release(meta);
        return weftpy_raise_weft_error();
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        wf_array *a = name != NULL ? weftpy_array_from_object(value, WF_DTYPE_COUNT) : NULL;
        if (a == NULL) {
            wf_nn_params_release(params);
            wf_nn_gguf_meta_release(meta);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "keys must be str");
            return NULL;
        }
        const wf_status status = wf_nn_params_add(params, name, a);
        wf_release(a);
        if (status != WF_OK) {
            wf_nn_params_release(params);
            wf_nn_gguf_meta_release(meta);
            return weftpy_raise_weft_error();
        }
    }
    wf_status status;
    Py_BEGIN_ALLOW_THREADS /* evaluates the arrays and writes the file */
    status = wf_nn_save_safetensors_with_metadata(params, meta, path);
    Py_END_ALLOW_THREADS
    wf_nn_params_release(params);
    wf_nn_gguf_meta_release(meta);
    return weftpy_none_or_raise(status);
}

/* A {str: str} dict of a metadata list of strings. */
static PyObject *string_metadata_dict(const wf_nn_gguf_meta *meta)
{
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict != NULL && i < wf_nn_gguf_meta_count(meta); i++) {
        const char *const *v;
        wf_nn_gguf_meta_strings(meta, i, &v);
        PyObject *value = PyUnicode_DecodeUTF8(v[0], (Py_ssize_t)strlen(v[0]), "replace");
        if (value == NULL || PyDict_SetItemString(dict, wf_nn_gguf_meta_key(meta, i), value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(value);
    }
    return dict;
}

/* _load_safetensors(path, with_metadata) -> {name: array}, or with the
 * metadata ({name: array}, {str: str}) */
static PyObject *py_load_safetensors(PyObject *module, PyObject *args)
{
    (void)module;
    const char *path;
    int with_metadata;
    if (!PyArg_ParseTuple(args, "sp:_load_safetensors", &path, &with_metadata))
        return NULL;
    wf_nn_params *params;
    wf_nn_gguf_meta *meta = NULL;
    Py_BEGIN_ALLOW_THREADS
    params = wf_nn_load_safetensors_with_metadata(path, with_metadata ? &meta : NULL);
    Py_END_ALLOW_THREADS
    if (params == NULL)
        return weftpy_raise_weft_error();
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict != NULL && i < wf_nn_params_count(params); i++) {
        PyObject *value = weftpy_array_wrap(wf_retain_unscoped(wf_nn_params_get(params, i)));
        if (value == NULL || PyDict_SetItemString(dict, wf_nn_params_name(params, i), value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(value);
    }
    wf_nn_params_release(params);
    if (!with_metadata || dict == NULL) {
        wf_nn_gguf_meta_release(meta);
        return dict;
    }
    PyObject *meta_dict = string_metadata_dict(meta);
    wf_nn_gguf_meta_release(meta);
    if (meta_dict == NULL) {
        Py_DECREF(dict);
        return NULL;
    }
    return Py_BuildValue("(NN)", dict, meta_dict); /* steals both */
}

static PyMethodDef memory_methods[] = {
    {"get_active_memory", py_get_active_memory, METH_NOARGS, "Bytes held by live arrays."},
    {"get_peak_memory", py_get_peak_memory, METH_NOARGS, "Highest active memory since reset."},
    {"get_cache_memory", py_get_cache_memory, METH_NOARGS, "Bytes kept in the buffer cache."},
    {"reset_peak_memory", py_reset_peak_memory, METH_NOARGS, "Peak memory := active memory."},
    {"clear_cache", py_clear_cache, METH_NOARGS, "Frees the buffer cache."},
    {"set_cache_limit", py_set_cache_limit, METH_O,
     "set_cache_limit(limit): caps the buffer cache (0: none kept); returns the previous cap."},
    {"set_memory_limit", py_set_memory_limit, METH_O,
     "set_memory_limit(limit): caps memory (0: none); returns the previous limit."},
    {"_save_safetensors", py_save_safetensors, METH_VARARGS, NULL},
    {"_load_safetensors", py_load_safetensors, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int weftpy_memory_init(PyObject *module)
{
    return PyModule_AddFunctions(module, memory_methods);
}
