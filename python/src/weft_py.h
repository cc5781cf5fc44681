/*
 * weft_py.h - what the files of the weft extension share.
 *
 * The extension is built on include/weft.h alone (DESIGN section 8). Each file
 * covers one section of that header: array.c the array type, convert.c
 * conversions between Python objects and arrays, indexing.c __getitem__ and
 * __setitem__, ops.c the ops, transforms.c and compile.c function transforms,
 * streams.c devices and streams, random.c and memory.c their sections,
 * module.c the module itself, errors and the callback guard.
 *
 * Reference ownership follows CPython's conventions: functions returning
 * PyObject * return a new reference (NULL with an exception set); functions
 * returning wf_array * return a new weft reference (NULL with an exception
 * set) that the caller releases with wf_release.
 *
 * The GIL: weft's state never relies on it. Every weft call that can wait
 * (eval, data access of an unevaluated array, synchronize, calls of wf_fn
 * handles, which may wait for another thread's trace) is made with the GIL
 * released; every call from weft into Python goes through
 * weftpy_callback_enter, which takes the GIL itself.
 */
#ifndef WEFT_PY_H
#define WEFT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include "weft.h"

/* ------------------------------------------------------------ module.c */

/* The module's exception helpers. Raises the Python exception for this
 * thread's last weft error: the exception a Python callback raised when the
 * error came from it (traceback kept), else the status's exception type
 * (argument, shape, dtype and axis errors are ValueError, as in MLX) with
 * weft's message. Always returns NULL. */
PyObject *weftpy_raise_weft_error(void);
/* The same for a function returning a status: NULL, or Py_None (a new
 * reference) when status is WF_OK. */
PyObject *weftpy_none_or_raise(wf_status status);

/* Called by a weft callback when its Python code raised: keeps the exception
 * for this thread (weftpy_raise_weft_error re-raises it) and records it as
 * weft's last error. Needs the GIL; returns the status to hand back to weft. */
wf_status weftpy_callback_failed(void);

/* The same for a callback that runs where no binding call waits for its
 * exception (a custom kernel on a stream's worker): the exception is
 * cleared and only its text travels, as the weft error's message. */
wf_status weftpy_callback_failed_here(void);

/* The guard around every call from weft into Python. Returns false, with a
 * weft error recorded, when the interpreter is finalizing (the callback must
 * then do nothing that needs Python); true with the GIL taken otherwise, to
 * be given back with weftpy_callback_leave. Any thread. */
bool weftpy_callback_enter(PyGILState_STATE *state);
void weftpy_callback_leave(PyGILState_STATE state);
/* True once the interpreter started finalizing (atexit ran): Python objects
 * held by weft are then leaked on purpose instead of touched. */
bool weftpy_finalizing(void);
/* Drops a reference to `obj` from a weft thread that may not hold the GIL
 * (payload destructors); leaks it when the interpreter is finalizing. */
void weftpy_decref_from_any_thread(PyObject *obj);

/* Argument parsing for METH_FASTCALL | METH_KEYWORDS functions, in the style
 * of argument clinic: `names` lists every parameter (NULL-terminated),
 * the first `npositional_only` can only be passed by position, the first
 * `nrequired` are required; `out` (one slot per name) receives borrowed
 * references, NULL for those not given. Returns false with TypeError set. */
bool weftpy_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, const char *const *names, int npositional_only,
                       int nrequired, PyObject **out);

/* ------------------------------------------------------------ dtype.c */

typedef struct {
    PyObject_HEAD
    wf_dtype code;
} WeftDtype;

extern PyTypeObject WeftDtype_Type;
/* The Dtype object of `dtype` (borrowed, static for the process). */
PyObject *weftpy_dtype_object(wf_dtype dtype);
/* Parses a Dtype object (or None when `allow_none`, giving WF_DTYPE_COUNT).
 * Returns false with TypeError set. */
bool weftpy_dtype_from_object(PyObject *obj, bool allow_none, wf_dtype *out);
bool weftpy_dtype_is_float(wf_dtype dtype);
bool weftpy_dtype_is_integer(wf_dtype dtype);
/* Adds the Dtype type, the dtype objects, finfo/iinfo support to the module. */
int weftpy_dtype_init(PyObject *module);

/* ------------------------------------------------------------ array.c */

/* A Python array holds one weft handle. In-place operators and __setitem__
 * replace the handle (the old value stays immutable for whoever shares it),
 * so id() is kept. */
typedef struct {
    PyObject_HEAD
    wf_array *handle; /* owned; never NULL once initialized */
    PyObject *weakrefs;
} WeftArray;

extern PyTypeObject WeftArray_Type;
#define WeftArray_Check(obj) PyObject_TypeCheck((obj), &WeftArray_Type)
/* Wraps `handle` (stolen) in a new Python array; NULL handle raises the last
 * weft error. */
PyObject *weftpy_array_wrap(wf_array *handle);
/* Replaces the handle of `self` with `handle` (stolen). */
void weftpy_array_replace(WeftArray *self, wf_array *handle);
int weftpy_array_init_type(PyObject *module);

/* ------------------------------------------------------------ convert.c */

/* An array from any array-like: an array (a new reference to its handle),
 * a Python scalar, a nested list or tuple, an object with the buffer
 * protocol (NumPy arrays), a DLPack producer (PyTorch, JAX) or an object
 * with __array__. `dtype` WF_DTYPE_COUNT: inferred. */
wf_array *weftpy_array_from_object(PyObject *obj, wf_dtype dtype);
/* A copy of host data: `data` laid out with byte `strides` (NULL:
 * row-major), elements of `source` (complex128: float64 pairs, made
 * complex64), cast to `dtype` (WF_DTYPE_COUNT: MLX's default, float64
 * becoming float32). NULL with a Python exception set. */
wf_array *weftpy_array_from_host(const char *data, const Py_ssize_t *shape,
                                 const Py_ssize_t *strides, int ndim, Py_ssize_t itemsize,
                                 wf_dtype source, bool complex128, wf_dtype dtype);
/* An operand of a binary op: arrays as they are, Python scalars weakly typed
 * against `other` (the other operand, may be NULL): a Python int takes an
 * integer or float array's dtype, a Python float a float array's (float32
 * beside integers and bool), bool the other's dtype. */
wf_array *weftpy_operand(PyObject *obj, PyObject *other);
/* True for Python bool, int and float (not arrays). */
bool weftpy_is_python_scalar(PyObject *obj);
/* Evaluates `a` with the GIL released and returns its row-major elements. */
bool weftpy_array_host_data(wf_array *a, const void **out);
/* a.item() and a.tolist(). */
PyObject *weftpy_array_item(wf_array *a);
PyObject *weftpy_array_tolist(wf_array *a);
/* The buffer protocol of the array type (read-only; real strides for
 * consumers that take strides, else row-major). */
extern PyBufferProcs weftpy_array_buffer_procs;
/* A tuple of ints from a shape. */
PyObject *weftpy_shape_tuple(const int64_t *shape, int ndim);
/* Parses an int or a sequence of ints into `out` (at most WF_MAX_NDIM);
 * sets *count. Returns false with an exception set. */
bool weftpy_int64_list(PyObject *obj, const char *what, int64_t *out, int *count);
/* Like weftpy_int64_list for a shape: a dimension past int32 is an OverflowError. */
bool weftpy_shape_list(PyObject *obj, const char *what, int64_t *out, int *count);
/* Parses None / int / sequence of ints as axes; *count -1 means None. */
bool weftpy_axes(PyObject *obj, int *out, int *count);

/* ------------------------------------------------------------ indexing.c */

PyObject *weftpy_array_getitem(PyObject *self, PyObject *index);
int weftpy_array_setitem(PyObject *self, PyObject *index, PyObject *value);
/* _index_scatter(a, index, value, mode): a with a[index] combined with
 * value by a wf_scatter_mode (a.at[index].add(value) and friends). */
PyObject *weftpy_index_scatter(PyObject *module, PyObject *args);
/* The value of `a` with `index` replaced by `update` (used by .at[].set). */
wf_array *weftpy_index_update(wf_array *a, PyObject *index, wf_array *update);

/* ------------------------------------------------------------ ops.c */

int weftpy_ops_init(PyObject *module);
/* The C functions behind the array type's operator slots. */
wf_array *weftpy_binary(wf_array *(*op)(wf_array *, wf_array *), PyObject *a, PyObject *b);

/* ------------------------------------------------------------ streams.c */

/* Pushes `stream_arg` (a Stream, a Device, or NULL/None: nothing) as this
 * thread's current stream; *pushed says whether to pop. */
bool weftpy_push_stream_arg(PyObject *stream_arg, bool *pushed);
void weftpy_pop_stream(bool pushed);
int weftpy_streams_init(PyObject *module);

/* ------------------------------------------------------------ transforms.c */

/* The wf_fn of a weft._core.Function (borrowed), NULL for None; NULL with
 * TypeError for anything else. */
wf_fn *weftpy_function_handle(PyObject *obj);
/* A Function owning `fn` (stolen); NULL fn raises the last weft error. */
PyObject *weftpy_function_wrap(wf_fn *fn);

/* ------------------------------------------------------------ others */

/* New references to the weft arrays of a sequence of arrays (or values
 * convertible to arrays); release with weftpy_array_args_release, also
 * after a failure (Python error set), which leaves `count` converted. */
typedef struct {
    wf_array **items;
    size_t count;
} weftpy_array_args;
bool weftpy_array_args_from(PyObject *list, weftpy_array_args *out);
void weftpy_array_args_release(weftpy_array_args *args);
int weftpy_transforms_init(PyObject *module);
int weftpy_export_init(PyObject *module);
int weftpy_compile_init(PyObject *module);
int weftpy_random_init(PyObject *module);
int weftpy_memory_init(PyObject *module);
int weftpy_kernels_init(PyObject *module);
int weftpy_conv_init(PyObject *module);
/* masked.c: masked_scatter */
int weftpy_masked_init(PyObject *module);
/* linalg.c: weft.h's wf_linalg_* (python/weft/linalg.py names them) */
int weftpy_linalg_init(PyObject *module);
/* matmul_family.c: gather_mm, block_masked_mm, segmented_mm */
int weftpy_matmul_family_init(PyObject *module);
int weftpy_fp8_init(PyObject *module);
int weftpy_dlpack_init(PyObject *module);
/* A copy of a DLPack producer's tensor (obj.__dlpack__(), asked for
 * version 1.0): CPU memory of any layout, every dtype weft has (complex128
 * made complex64, float64 float32 when `dtype` is WF_DTYPE_COUNT, as
 * weftpy_array_from_host); ValueError for another device, dtype or
 * version. NULL with a Python exception set. */
wf_array *weftpy_array_from_dlpack(PyObject *obj, wf_dtype dtype);
int weftpy_distributed_init(PyObject *module);
int weftpy_quantized_init(PyObject *module);
int weftpy_files_init(PyObject *module);
/* fft.c: _fft, under weft.fft */
int weftpy_fft_init(PyObject *module);

#endif /* WEFT_PY_H */
