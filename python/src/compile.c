/*
 * compile.c - wf_compile over a Function, the process-wide compile mode and
 * the cache's counters. The package (weft/_compile.py) makes one compiled
 * Function per (Python function, pytree structure, constants): weft's
 * never-reused function ids are the cache key, never id(fun).
 */
#include "weft_py.h"

/* _compile(fn, shapeless) -> compiled Function. */
static PyObject *py_compile(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *fn_obj;
    int shapeless = 0;
    if (!PyArg_ParseTuple(args, "O|p:compile", &fn_obj, &shapeless))
        return NULL;
    wf_fn *fn = weftpy_function_handle(fn_obj);
    if (fn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "compile needs a Function");
        return NULL;
    }
    wf_compile_options options = wf_compile_options_default();
    options.shapeless = shapeless != 0;
    return weftpy_function_wrap(wf_compile(fn, &options));
}

static PyObject *py_set_compile_mode(PyObject *module, PyObject *arg)
{
    (void)module;
    const long mode = PyLong_AsLong(arg);
    if (mode == -1 && PyErr_Occurred())
        return NULL;
    return weftpy_none_or_raise(wf_set_compile_mode((wf_compile_mode)mode));
}

static PyObject *py_get_compile_mode(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(wf_get_compile_mode());
}

/* _compile_stats(fn or None) -> dict of the counters. */
static PyObject *py_compile_stats(PyObject *module, PyObject *fn_obj)
{
    (void)module;
    wf_fn *fn = NULL;
    if (fn_obj != Py_None && (fn = weftpy_function_handle(fn_obj)) == NULL)
        return NULL;
    wf_compile_stats stats = wf_compile_stats_default();
    if (wf_compile_stats_get(fn, &stats) != WF_OK)
        return weftpy_raise_weft_error();
    return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsK}", "calls", stats.calls, "hits", stats.hits,
                         "misses", stats.misses, "traces", stats.traces, "waits", stats.waits,
                         "inline_calls", stats.inline_calls, "evictions", stats.evictions,
                         "erases", stats.erases, "entries", stats.entries, "fused_kernels_run",
                         stats.fused_kernels_run, "timeout_traces", stats.timeout_traces);
}

/* set_compile_wait_timeout(seconds): how long a call waits for another
 * thread's trace of the same function before tracing itself. */
static PyObject *py_set_compile_wait_timeout(PyObject *module, PyObject *arg)
{
    (void)module;
    const double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred())
        return NULL;
    return weftpy_none_or_raise(wf_compile_set_wait_timeout(seconds));
}

static PyObject *py_get_compile_wait_timeout(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyFloat_FromDouble(wf_compile_get_wait_timeout());
}

static PyMethodDef compile_methods[] = {
    {"set_compile_wait_timeout", py_set_compile_wait_timeout, METH_O,
     "set_compile_wait_timeout(seconds): bound on waiting for another thread's trace."},
    {"get_compile_wait_timeout", py_get_compile_wait_timeout, METH_NOARGS,
     "The bound on waiting for another thread's trace, in seconds."},
    {"_compile", py_compile, METH_VARARGS, "_compile(fn, shapeless=False) -> Function"},
    {"_set_compile_mode", py_set_compile_mode, METH_O, "Sets the process-wide compile mode."},
    {"_get_compile_mode", py_get_compile_mode, METH_NOARGS, "The process-wide compile mode."},
    {"_compile_stats", py_compile_stats, METH_O, "Counters of a compiled Function or (None) all."},
    {NULL, NULL, 0, NULL},
};

int weftpy_compile_init(PyObject *module)
{
    if (PyModule_AddIntConstant(module, "_COMPILE_DISABLED", WF_COMPILE_DISABLED) < 0 ||
        PyModule_AddIntConstant(module, "_COMPILE_ENABLED", WF_COMPILE_ENABLED) < 0)
        return -1;
    return PyModule_AddFunctions(module, compile_methods);
}
