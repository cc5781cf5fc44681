/*
 * weft.h - the public API of weft, a lazy array framework in C.
 *
 * What is not declared here is not API.
 *
 * Conventions (DESIGN.md section 6):
 *  - Every handle a function returns is a new reference the caller releases
 *    (wf_release, wf_stream_release). Arguments are borrowed, never stolen.
 *    Releasing NULL does nothing.
 *  - Functions returning an array return NULL on error; wf_last_error() and
 *    wf_last_error_message() say why. An op given a NULL input returns NULL and
 *    keeps the error already recorded, so a chain can be checked once at its end.
 *    Successful calls do not clear the last error (like errno).
 *  - Every other function returns wf_status: WF_OK (0) or a negative code.
 *  - Threading: every function may be called from any thread at any time, and
 *    arrays and streams may be shared between threads (see docs/THREADING.md).
 *    Functions documented "this thread" act on thread-local state only.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WF_VERSION_MAJOR 0
#define WF_VERSION_MINOR 1
#define WF_VERSION_PATCH 0

/* Highest rank an array may have. */
#define WF_MAX_NDIM 32

/* ---------------------------------------------------------------- errors */

/* Status codes: WF_OK is 0, errors are negative. */
typedef enum wf_status {
    WF_OK = 0,
    WF_ERR_INVALID_ARGUMENT = -1, /* a bad value: negative size, bad option */
    WF_ERR_NULL_ARGUMENT = -2,    /* a required pointer was NULL */
    WF_ERR_SHAPE = -3,            /* shapes do not match or cannot broadcast */
    WF_ERR_DTYPE = -4,            /* dtype not supported by this operation */
    WF_ERR_AXIS = -5,             /* axis out of range or repeated */
    WF_ERR_OUT_OF_MEMORY = -6,    /* allocation failed or memory limit reached */
    WF_ERR_OVERFLOW = -7,         /* a size or byte count overflows */
    WF_ERR_MISUSE = -8,           /* API used out of order (pop without push, ...) */
    WF_ERR_KERNEL = -9,           /* a kernel failed while running */
    WF_ERR_UNSUPPORTED = -10,     /* valid request that weft does not do yet */
    WF_ERR_INTERNAL = -11         /* a broken invariant inside weft */
} wf_status;

/* This thread's last error code (WF_OK if none since wf_clear_error). */
wf_status wf_last_error(void);
/* This thread's last error message; "" if none. Valid until this thread's
 * next weft call. */
const char *wf_last_error_message(void);
/* Resets this thread's last error to WF_OK. */
void wf_clear_error(void);
/* A static, human-readable name for a status ("WF_ERR_SHAPE"). */
const char *wf_status_name(wf_status status);

/* ---------------------------------------------------------------- dtypes */

typedef enum wf_dtype {
    WF_DTYPE_BOOL = 0,
    WF_DTYPE_U8,
    WF_DTYPE_I32,
    WF_DTYPE_I64,
    WF_DTYPE_F16,
    WF_DTYPE_BF16,
    WF_DTYPE_F32,
    WF_DTYPE_F64,
    WF_DTYPE_COUNT
} wf_dtype;

/* Bytes per element; 0 for an invalid dtype. */
size_t wf_dtype_size(wf_dtype dtype);
/* Static name ("float32"); "invalid" for an invalid dtype. */
const char *wf_dtype_name(wf_dtype dtype);
/* The dtype two operands promote to (NumPy/MLX rules: bool < u8 < i32 < i64 <
 * floats; an integer with f16/bf16 gives that float type; f16 with bf16 gives
 * f32). Returns WF_DTYPE_COUNT for an invalid input. */
wf_dtype wf_promote_types(wf_dtype a, wf_dtype b);

/* ---------------------------------------------------------------- arrays */

/* A lazy n-dimensional array. Opaque, refcounted, immutable to the user. */
typedef struct wf_array wf_array;
/* A FIFO of work with its own worker thread. Opaque, refcounted. */
typedef struct wf_stream wf_stream;

/* Adds a reference to `a` and returns it (NULL for NULL). */
wf_array *wf_retain(wf_array *a);
/* Drops one reference; the array is freed with the last one. NULL is a no-op. */
void wf_release(wf_array *a);

/* A new array holding a copy of `data` (row-major, `ndim` dims of `shape`).
 * `data` may be NULL only when the size is 0. */
wf_array *wf_array_from_data(const void *data, const int64_t *shape, int ndim,
                             wf_dtype dtype);
/* A 0-d array holding `value` converted to `dtype`. */
wf_array *wf_scalar(double value, wf_dtype dtype);
/* An array of `shape` filled with `value` converted to `dtype` (lazy). */
wf_array *wf_full(const int64_t *shape, int ndim, double value, wf_dtype dtype);
/* wf_full with 0 and 1. */
wf_array *wf_zeros(const int64_t *shape, int ndim, wf_dtype dtype);
wf_array *wf_ones(const int64_t *shape, int ndim, wf_dtype dtype);
/* 1-d array start, start+step, ... up to but excluding stop (lazy).
 * step must be non-zero and finite. */
wf_array *wf_arange(double start, double stop, double step, wf_dtype dtype);

/* Metadata; these never evaluate. For NULL they return 0 / NULL / COUNT. */
int wf_array_ndim(const wf_array *a);
/* Pointer to ndim sizes, valid while `a` lives (NULL for 0-d). */
const int64_t *wf_array_shape(const wf_array *a);
/* Size of dimension `axis` (negative counts from the end); -1 if out of range. */
int64_t wf_array_dim(const wf_array *a, int axis);
int64_t wf_array_size(const wf_array *a);
wf_dtype wf_array_dtype(const wf_array *a);
size_t wf_array_nbytes(const wf_array *a);
/* True once the array's value is computed (or failed). */
bool wf_array_is_evaluated(const wf_array *a);

/* Evaluates `a` if needed and sets *out to its elements, row-major and
 * contiguous, valid while `a` lives. For a strided view a contiguous copy is
 * made once and kept with the array. */
wf_status wf_array_data(wf_array *a, const void **out);
/* Evaluates `a` and copies its elements row-major into `dst`;
 * `dst_bytes` must be at least wf_array_nbytes(a). */
wf_status wf_array_copy_to(wf_array *a, void *dst, size_t dst_bytes);
/* Evaluates a one-element array and returns its value as double. */
wf_status wf_array_item(wf_array *a, double *out);

/* ---------------------------------------------------------------- scopes */

/* Opens a scope on this thread. Every array reference handed to this thread
 * while it is open (op results, wf_retain) belongs to it. Scopes nest. */
wf_status wf_scope_begin(void);
/* Closes this thread's innermost scope, releasing the references it owns.
 * WF_ERR_MISUSE without a matching wf_scope_begin. */
wf_status wf_scope_end(void);
/* Takes one reference to `a` out of the innermost scope: it moves to the
 * enclosing scope, or to the caller if none. Returns `a`; NULL if `a` is NULL
 * (error kept) or not owned by the innermost scope (WF_ERR_MISUSE). */
wf_array *wf_keep(wf_array *a);

/* ---------------------------------------------------------------- eval and streams */

/* Computes the arrays and waits for them. Returns the first error stored on
 * any of them (errors of failed kernels reach every dependent). Arrays may be
 * shared with and evaluated by other threads at the same time. */
wf_status wf_eval(wf_array *const *arrays, size_t count);
/* Schedules the arrays and returns without waiting; data access or wf_eval
 * waits later. Errors found while scheduling are returned. */
wf_status wf_async_eval(wf_array *const *arrays, size_t count);

/* The process-wide default CPU stream (a new reference). */
wf_stream *wf_default_stream(void);
/* A new CPU stream with its own worker thread (freed with its last
 * reference, once its work is done). */
wf_stream *wf_stream_new(void);
/* Adds a reference to `s` and returns it. */
wf_stream *wf_stream_retain(wf_stream *s);
/* Drops one reference. NULL is a no-op. */
void wf_stream_release(wf_stream *s);
/* Makes `s` this thread's current stream until the matching pop; ops built on
 * this thread run on it. The thread holds a reference while pushed. */
wf_status wf_stream_push(wf_stream *s);
/* Undoes this thread's last push. WF_ERR_MISUSE without one. */
wf_status wf_stream_pop(void);
/* This thread's current stream (a new reference). */
wf_stream *wf_current_stream(void);
/* Waits until everything enqueued on `s` so far has run. */
wf_status wf_stream_synchronize(wf_stream *s);
/* Number of live streams in the process, default stream included. */
size_t wf_stream_count(void);

/* ---------------------------------------------------------------- memory */

/* Allocator counters, in bytes. */
typedef struct wf_memory_stats {
    size_t active_bytes; /* held by live buffers */
    size_t peak_bytes;   /* highest active_bytes since start or last reset */
    size_t cached_bytes; /* freed buffers kept for reuse */
    size_t limit_bytes;  /* current limit; SIZE_MAX when unlimited */
} wf_memory_stats;

/* Caps active + cached bytes; allocations beyond it fail with
 * WF_ERR_OUT_OF_MEMORY (after dropping the cache). SIZE_MAX: no limit. */
wf_status wf_set_memory_limit(size_t bytes);
wf_status wf_memory_stats_get(wf_memory_stats *out);
/* Sets peak_bytes to the current active_bytes. */
void wf_reset_peak_memory(void);
/* Frees every cached buffer back to the system. */
void wf_clear_cache(void);

/* ---------------------------------------------------------------- ops */

/* Element-wise, with NumPy broadcasting and type promotion. */
wf_array *wf_add(wf_array *a, wf_array *b);
wf_array *wf_multiply(wf_array *a, wf_array *b);
/* e^x; integer and bool inputs give float32. */
wf_array *wf_exp(wf_array *a);
/* Converts to `dtype` (floats to integers truncate toward zero). */
wf_array *wf_astype(wf_array *a, wf_dtype dtype);

/* Sum over `axes` (negative allowed, no repeats); `axes` NULL with
 * `naxes` 0 sums over every axis. bool and u8 sum to int32. */
wf_array *wf_sum(wf_array *a, const int *axes, int naxes, bool keepdims);

/* Same elements in a new shape; one entry may be -1. A view when possible. */
wf_array *wf_reshape(wf_array *a, const int64_t *shape, int ndim);
/* Permutes axes; `perm` NULL reverses them. Always a view. */
wf_array *wf_transpose(wf_array *a, const int *perm, int nperm);
/* Broadcasts to `shape` (NumPy rules). Always a view. */
wf_array *wf_broadcast_to(wf_array *a, const int64_t *shape, int ndim);
/* Slice with per-axis start, stop, step (NumPy semantics; negative
 * indices count from the end, steps may be negative but not 0). `starts`,
 * `stops` and `steps` have ndim entries. Always a view. */
wf_array *wf_slice(wf_array *a, const int64_t *starts, const int64_t *stops,
                   const int64_t *steps);

/* Matrix product of 2-d (or 1-d) arrays, NumPy matmul rules; float types. */
wf_array *wf_matmul(wf_array *a, wf_array *b);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H */
