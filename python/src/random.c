/*
 * random.c - the primitives behind weft.random: keys travel between Python
 * and C as pairs of 32-bit words (the package turns them into key arrays);
 * key None draws from this thread's default key, as in C.
 */
#include "weft_py.h"

/* A key from None (-> *has_key false) or a 2-tuple of words. */
static bool key_arg(PyObject *obj, wf_key *key, bool *has_key)
{
    *has_key = false;
    if (obj == NULL || obj == Py_None)
        return true;
    unsigned long w0, w1;
    if (!PyArg_ParseTuple(obj, "kk", &w0, &w1))
        return false;
    key->words[0] = (uint32_t)w0;
    key->words[1] = (uint32_t)w1;
    *has_key = true;
    return true;
}

static PyObject *key_tuple(wf_key key)
{
    return Py_BuildValue("(kk)", (unsigned long)key.words[0], (unsigned long)key.words[1]);
}

static PyObject *py_random_seed(PyObject *module, PyObject *arg)
{
    (void)module;
    const unsigned long long seed = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred())
        return NULL;
    wf_random_seed(seed);
    Py_RETURN_NONE;
}

static PyObject *py_random_key(PyObject *module, PyObject *arg)
{
    (void)module;
    const unsigned long long seed = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred())
        return NULL;
    return key_tuple(wf_random_key(seed));
}

static PyObject *py_random_split(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *key_obj;
    int num;
    if (!PyArg_ParseTuple(args, "Oi:split", &key_obj, &num))
        return NULL;
    wf_key key;
    bool has_key;
    if (!key_arg(key_obj, &key, &has_key))
        return NULL;
    if (!has_key || num < 1 || num > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "split needs a key and 1 <= num <= 2^20");
        return NULL;
    }
    wf_key *keys = PyMem_Calloc((size_t)num, sizeof *keys);
    if (keys == NULL)
        return PyErr_NoMemory();
    PyObject *list = NULL;
    if (wf_random_split(key, num, keys) != WF_OK) {
        weftpy_raise_weft_error();
    } else if ((list = PyList_New(num)) != NULL) {
        for (int i = 0; i < num; i++) {
            PyObject *item = key_tuple(keys[i]);
            if (item == NULL) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, i, item);
        }
    }
    PyMem_Free(keys);
    return list;
}

/* _random_uniform / _random_normal(shape, dtype, a, b, key) */
static PyObject *float_draw(PyObject *args, const char *fname,
                            wf_array *(*fn)(const int64_t *, int, wf_dtype, double, double,
                                            const wf_key *))
{
    PyObject *shape_obj, *dtype_obj, *key_obj;
    double a, b;
    if (!PyArg_ParseTuple(args, "OOddO", &shape_obj, &dtype_obj, &a, &b, &key_obj))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_dtype dtype;
    wf_key key;
    bool has_key;
    if (!weftpy_shape_list(shape_obj, fname, shape, &ndim) ||
        !weftpy_dtype_from_object(dtype_obj, false, &dtype) || !key_arg(key_obj, &key, &has_key))
        return NULL;
    return weftpy_array_wrap(fn(shape, ndim, dtype, a, b, has_key ? &key : NULL));
}

static PyObject *py_random_uniform(PyObject *module, PyObject *args)
{
    (void)module;
    return float_draw(args, "uniform: shape must be a sequence of ints", wf_random_uniform);
}

static PyObject *py_random_normal(PyObject *module, PyObject *args)
{
    (void)module;
    return float_draw(args, "normal: shape must be a sequence of ints", wf_random_normal);
}

static PyObject *py_random_randint(PyObject *module, PyObject *args)
{
    (void)module;
    long long low, high;
    PyObject *shape_obj, *dtype_obj, *key_obj;
    if (!PyArg_ParseTuple(args, "LLOOO:randint", &low, &high, &shape_obj, &dtype_obj, &key_obj))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    wf_dtype dtype;
    wf_key key;
    bool has_key;
    if (!weftpy_int64_list(shape_obj, "randint: shape must be a sequence of ints", shape, &ndim) ||
        !weftpy_dtype_from_object(dtype_obj, false, &dtype) || !key_arg(key_obj, &key, &has_key))
        return NULL;
    return weftpy_array_wrap(
        wf_random_randint(low, high, shape, ndim, dtype, has_key ? &key : NULL));
}

static PyObject *py_random_bernoulli(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *p_obj, *shape_obj, *key_obj;
    if (!PyArg_ParseTuple(args, "OOO:bernoulli", &p_obj, &shape_obj, &key_obj))
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    wf_key key;
    bool has_key;
    if ((shape_obj != Py_None &&
         !weftpy_int64_list(shape_obj, "bernoulli: shape must be a sequence of ints", shape,
                            &ndim)) ||
        !key_arg(key_obj, &key, &has_key))
        return NULL;
    wf_array *p = weftpy_array_from_object(p_obj, WF_DTYPE_COUNT);
    if (p == NULL)
        return NULL;
    wf_array *out = wf_random_bernoulli(p, shape_obj == Py_None ? NULL : shape, ndim,
                                        has_key ? &key : NULL);
    wf_release(p);
    return weftpy_array_wrap(out);
}

static PyObject *py_random_categorical(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *logits_obj, *key_obj;
    int axis;
    if (!PyArg_ParseTuple(args, "OiO:categorical", &logits_obj, &axis, &key_obj))
        return NULL;
    wf_key key;
    bool has_key;
    if (!key_arg(key_obj, &key, &has_key))
        return NULL;
    wf_array *logits = weftpy_array_from_object(logits_obj, WF_DTYPE_COUNT);
    if (logits == NULL)
        return NULL;
    wf_array *out = wf_random_categorical(logits, axis, has_key ? &key : NULL);
    wf_release(logits);
    return weftpy_array_wrap(out);
}

static PyMethodDef random_methods[] = {
    {"_random_seed", py_random_seed, METH_O, "Reseeds this thread's default key."},
    {"_random_key", py_random_key, METH_O, "The key words of a seed."},
    {"_random_split", py_random_split, METH_VARARGS, "num keys derived from a key."},
    {"_random_uniform", py_random_uniform, METH_VARARGS, NULL},
    {"_random_normal", py_random_normal, METH_VARARGS, NULL},
    {"_random_randint", py_random_randint, METH_VARARGS, NULL},
    {"_random_bernoulli", py_random_bernoulli, METH_VARARGS, NULL},
    {"_random_categorical", py_random_categorical, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int weftpy_random_init(PyObject *module)
{
    return PyModule_AddFunctions(module, random_methods);
}
