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
#include <string.h> /* memset, for the inline *_default() initializers */

#ifdef __cplusplus
extern "C" {
#endif

#define WF_VERSION_MAJOR 0
#define WF_VERSION_MINOR 1
#define WF_VERSION_PATCH 0
/* The same version as a string and as one number (major*10000 + minor*100 +
 * patch), for compile-time checks; wf_version() and wf_version_number() give
 * the library's at run time. */
#define WF_VERSION_STRING "0.1.0"
#define WF_VERSION_NUMBER (WF_VERSION_MAJOR * 10000 + WF_VERSION_MINOR * 100 + WF_VERSION_PATCH)

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
    WF_ERR_INTERNAL = -11,        /* a broken invariant inside weft */
    WF_ERR_IO = -12,              /* a file could not be read or written */
    WF_ERR_DISTRIBUTED = -13      /* a collective failed or did not match across processes */
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
/* Records `status` and a printf-style message (NULL: the status's name) as
 * this thread's last error and returns `status`: how a wf_fn body, a custom
 * kernel or a library built on weft says why it failed. */
wf_status wf_set_error(wf_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

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
    /* Appended later; the values above keep their numbers. */
    WF_DTYPE_I8,
    WF_DTYPE_I16,
    WF_DTYPE_U16,
    WF_DTYPE_U32,
    WF_DTYPE_U64,
    /* Two float32 (real, imaginary), 8 bytes. Supported so far: creation,
     * astype, data movement (shape ops, indexing, where, wf_view), add,
     * subtract, multiply, divide, negative, abs (float32), exp, log, sqrt,
     * sin, cos, tanh, equal, not_equal, isnan/isinf/isfinite, sum, mean,
     * wf_real/wf_imag/wf_conjugate; other ops give WF_ERR_DTYPE naming
     * complex64. */
    WF_DTYPE_C64,
    WF_DTYPE_COUNT
} wf_dtype;

/* Bytes per element; 0 for an invalid dtype. */
size_t wf_dtype_size(wf_dtype dtype);
/* Static name ("float32", "int8", "complex64"); "invalid" for an invalid
 * dtype. */
const char *wf_dtype_name(wf_dtype dtype);
/* The dtype two operands promote to, MLX's table (JAX's lattice): unsigned
 * with unsigned or signed with signed gives the wider; unsigned with a wider
 * signed gives the signed, with a signed of its size or smaller the next
 * wider signed (u8 + i8 = i16, u32 + i32 = i64), and u64 with any signed
 * integer gives float32; any integer with a float gives the float; f16 with
 * bf16 gives f32; anything with c64 gives c64 (float64 included, as MLX
 * has no complex128). Returns WF_DTYPE_COUNT for an invalid input. */
wf_dtype wf_promote_types(wf_dtype a, wf_dtype b);

/* ---------------------------------------------------------------- arrays */

/* A lazy n-dimensional array. Opaque, refcounted, immutable to the user. */
typedef struct wf_array wf_array;
/* A FIFO of work with its own worker thread. Opaque, refcounted. */
typedef struct wf_stream wf_stream;

/* Adds a reference to `a` and returns it (NULL for NULL). */
wf_array *wf_retain(wf_array *a);
/* Like wf_retain, but the new reference belongs to no scope even while one
 * is open: for containers and libraries that keep arrays beyond the
 * caller's scope (release it with wf_release). */
wf_array *wf_retain_unscoped(wf_array *a);
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
/* Zeros of `shape` and `dtype` (lazy). */
wf_array *wf_zeros(const int64_t *shape, int ndim, wf_dtype dtype);
/* Ones of `shape` and `dtype` (lazy). */
wf_array *wf_ones(const int64_t *shape, int ndim, wf_dtype dtype);
/* 1-d array start, start+step, ... up to but excluding stop (lazy).
 * step must be non-zero and finite. */
wf_array *wf_arange(double start, double stop, double step, wf_dtype dtype);

/* Metadata never evaluates; for NULL or a released array these return 0,
 * NULL or WF_DTYPE_COUNT. Number of dimensions. */
int wf_array_ndim(const wf_array *a);
/* Pointer to ndim sizes, valid while `a` lives (NULL for 0-d). */
const int64_t *wf_array_shape(const wf_array *a);
/* Size of dimension `axis` (negative counts from the end); -1 if out of range. */
int64_t wf_array_dim(const wf_array *a, int axis);
/* Number of elements (1 for 0-d). */
int64_t wf_array_size(const wf_array *a);
/* Element type. */
wf_dtype wf_array_dtype(const wf_array *a);
/* Bytes of the elements: size times the dtype's size. */
size_t wf_array_nbytes(const wf_array *a);
/* True once the array's value is computed (or failed). */
bool wf_array_is_evaluated(const wf_array *a);
/* The array's id: unique in the process and never reused, even after the
 * array is freed (0 for NULL or a released array). */
uint64_t wf_array_id(const wf_array *a);

/* Evaluates `a` if needed and sets *out to its elements, row-major and
 * contiguous, valid while `a` lives. For a strided view a contiguous copy is
 * made once and kept with the array. */
wf_status wf_array_data(wf_array *a, const void **out);
/* Evaluates `a` if needed and sets *out to its element (0, ..., 0) in place
 * and strides[0 .. ndim) to its element strides (0 along broadcast dims,
 * negative along reversed ones): no copy, even for a strided view (the
 * buffer protocol and DLPack export these). Valid while `a` lives. */
wf_status wf_array_data_strided(wf_array *a, const void **out, int64_t *strides);
/* Evaluates `a` and copies its elements row-major into `dst`;
 * `dst_bytes` must be at least wf_array_nbytes(a). */
wf_status wf_array_copy_to(wf_array *a, void *dst, size_t dst_bytes);
/* Evaluates a one-element array and returns its value as double. */
wf_status wf_array_item(wf_array *a, double *out);

/* ---------------------------------------------------------------- scopes */

/* Opens a scope on this thread. Every array reference handed to this thread
 * while it is open (op results, wf_retain) belongs to it. Scopes nest.
 * wf_release of an array an open scope holds takes one such reference out
 * of the scope. Op results are always new arrays; but if you wf_retain
 * inside a scope an array you already held, release your older reference
 * after the scope ends (the scope tracks arrays, not references). */
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
 * shared with and evaluated by other threads at the same time. The calling
 * thread runs the nodes it claims itself, without taking any stream. */
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
/* Drops one reference. NULL is a no-op. The last reference never waits
 * for user code: it joins the worker only when the worker is idle, else the
 * worker frees the stream when its destructors and deleters have run. */
void wf_stream_release(wf_stream *s);
/* Makes `s` this thread's current stream until the matching pop; ops built on
 * this thread run on it. The thread holds a reference while pushed. */
wf_status wf_stream_push(wf_stream *s);
/* Undoes this thread's last push. WF_ERR_MISUSE without one. */
wf_status wf_stream_pop(void);
/* This thread's current stream (a new reference): the last one pushed,
 * else the thread's default (below). */
wf_stream *wf_current_stream(void);
/* Makes `s` this thread's default stream (NULL: back to the process-wide
 * one): ops built on this thread with nothing pushed run on it (MLX's
 * per-thread default streams). The thread holds a reference until it sets
 * another or exits. Code weft runs inside an evaluation (kernels,
 * callbacks) sees the process-wide default, as it sees no pushed stream. */
wf_status wf_stream_set_thread_default(wf_stream *s);
/* This thread's default stream: the one set above, else the process-wide
 * default (a new reference). */
wf_stream *wf_thread_default_stream(void);
/* Waits until everything enqueued on `s` before the call has run (work
 * enqueued meanwhile by other threads is not waited for). It does not wait
 * for the payload destructors and external deleters of what that work
 * freed: those of tasks run on the stream's worker after each task (also
 * when this call helped run the task: never on this thread), those freed
 * inside another thread's wf_eval on that thread after its evaluation; they
 * may still be running when this returns and may synchronize `s`
 * themselves. WF_ERR_MISUSE inside a kernel. If a task queued on `s` by
 * wf_async_eval failed since the last synchronize that reported a failure,
 * returns the first such failure with its message (its array and the other
 * failed arrays keep theirs): once, to whichever thread's synchronize comes
 * first, also when wf_eval or data access of the array reported it. */
wf_status wf_stream_synchronize(wf_stream *s);
/* Number of live streams in the process, default stream included. */
size_t wf_stream_count(void);
/* The stream's id: unique for the life of the process, never reused (a
 * 64-bit counter, not an address), so caches may key on it. 0 for NULL.
 * Borrows `s`; any thread. */
uint64_t wf_stream_id(const wf_stream *s);

/* ---------------------------------------------------------------- memory */

/* Allocator counters, in bytes. Can grow: set struct_size (use
 * wf_memory_stats_default()); fields past it are never written. */
typedef struct wf_memory_stats {
    size_t struct_size;  /* sizeof the struct as the caller knows it */
    size_t active_bytes; /* held by live buffers */
    size_t peak_bytes;   /* highest active_bytes since start or last reset */
    size_t cached_bytes; /* freed buffers kept for reuse */
    size_t limit_bytes;  /* current limit; SIZE_MAX when unlimited */
    /* Memory of the array-node pool (live, quarantined and free node
     * headers); not counted in the other fields or the limit. */
    size_t node_pool_bytes;
    /* Cap on cached_bytes: min(1 GiB, limit / 2, wf_set_cache_limit's). */
    size_t cache_limit_bytes;
} wf_memory_stats;

/* Caps active + cached bytes; allocations beyond it fail with
 * WF_ERR_OUT_OF_MEMORY (after dropping the cache). SIZE_MAX: no limit. */
wf_status wf_set_memory_limit(size_t bytes);
/* A zeroed wf_memory_stats whose struct_size is the size this code was
 * compiled with (inline, so a newer library never writes past it). Bindings
 * that cannot call it set struct_size to the size of their own struct. */
static inline wf_memory_stats wf_memory_stats_default(void)
{
    wf_memory_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    return stats;
}
/* Fills the fields of *out that fit in out->struct_size with the current
 * counters (struct_size itself is left alone). WF_ERR_INVALID_ARGUMENT when
 * struct_size is smaller than the first version of the struct (5 fields). */
wf_status wf_memory_stats_get(wf_memory_stats *out);
/* Caps the bytes of freed buffers kept for reuse (0: keep none; SIZE_MAX:
 * only the default cap, min(1 GiB, limit / 2)); trims the cache at once.
 * Returns the cap in force before the call. */
size_t wf_set_cache_limit(size_t bytes);
/* Sets peak_bytes to the current active_bytes. */
void wf_reset_peak_memory(void);
/* Frees every cached buffer back to the system. */
void wf_clear_cache(void);

/* ---------------------------------------------------------------- ops
 *
 * Every op returns a new lazy array (NULL + last error on bad input) and
 * borrows its inputs. Element-wise ops broadcast (NumPy rules) and promote
 * dtypes (wf_promote_types). Axis arguments may be negative. Ops are built
 * on this thread's current stream. */

/* ---- creation */

/* `value` shaped and typed like `a` (never evaluates `a`; likewise the two
 * below). Inside a shapeless wf_compile the result follows the shape of
 * `a` at each call. */
wf_array *wf_full_like(wf_array *a, double value);
/* Zeros shaped and typed like `a`. */
wf_array *wf_zeros_like(wf_array *a);
/* Ones shaped and typed like `a`. */
wf_array *wf_ones_like(wf_array *a);
/* `num` evenly spaced values from start to stop inclusive (num >= 0). */
wf_array *wf_linspace(double start, double stop, int64_t num, wf_dtype dtype);
/* n x m matrix with ones on diagonal k (k > 0 above the main diagonal). */
wf_array *wf_eye(int64_t n, int64_t m, int64_t k, wf_dtype dtype);

/* ---- random numbers
 *
 * Counter-based (Threefry-2x32), so a key and a position give the same bits
 * on any thread. Functions taking `const wf_key *key` use that key; with
 * NULL they split this thread's default key (each thread has its own, so
 * threads never race on RNG state). */
typedef struct wf_key {
    uint32_t words[2];
} wf_key;

/* A key from a seed. */
wf_key wf_random_key(uint64_t seed);
/* Writes `count` independent keys derived from `key` into `out`. */
wf_status wf_random_split(wf_key key, int count, wf_key *out);
/* Reseeds this thread's default key. */
void wf_random_seed(uint64_t seed);
/* Normal(loc, scale) samples of a float dtype. */
wf_array *wf_random_normal(const int64_t *shape, int ndim, wf_dtype dtype, double loc,
                           double scale, const wf_key *key);
/* Uniform samples in [low, high) of a float dtype. */
wf_array *wf_random_uniform(const int64_t *shape, int ndim, wf_dtype dtype, double low,
                            double high, const wf_key *key);
/* Bool samples, true with probability `p` (broadcast to `shape`; shape NULL
 * with ndim 0 takes p's shape). */
wf_array *wf_random_bernoulli(wf_array *p, const int64_t *shape, int ndim, const wf_key *key);
/* Integers uniform in [low, high) of any integer dtype (the range must fit
 * the dtype; uint64 draws below 2^63, as the bounds are int64). */
wf_array *wf_random_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                            wf_dtype dtype, const wf_key *key);
/* Int32 indices sampled along `axis` from unnormalized log-probabilities;
 * the result has logits' shape without `axis`. */
wf_array *wf_random_categorical(wf_array *logits, int axis, const wf_key *key);

/* ---- unary element-wise (integer and bool inputs of float-valued functions
 * compute in float32) */

/* e^x; integer and bool inputs give float32. */
wf_array *wf_exp(wf_array *a);
/* Converts to `dtype` (floats to integers truncate toward zero, NaN gives
 * 0, out-of-range values saturate; bool is value != 0). To the same dtype:
 * a view of `a`. */
wf_array *wf_astype(wf_array *a, wf_dtype dtype);
/* -a (bool: WF_ERR_DTYPE; integers wrap). */
wf_array *wf_negative(wf_array *a);
/* |a| (integers wrap at the minimum; bool unchanged). */
wf_array *wf_abs(wf_array *a);
/* -1, 0 or 1 in a's dtype (keeps -0 and NaN; bool unchanged; complex64:
 * z / |z|, 0 for 0). */
wf_array *wf_sign(wf_array *a);
/* e^a - 1, accurate near 0. */
wf_array *wf_expm1(wf_array *a);
/* Natural logarithm (log of a negative: NaN; log 0: -inf). */
wf_array *wf_log(wf_array *a);
/* log(1 + a), accurate near 0. */
wf_array *wf_log1p(wf_array *a);
/* Base-2 logarithm. */
wf_array *wf_log2(wf_array *a);
/* Square root (negative: NaN). */
wf_array *wf_sqrt(wf_array *a);
/* 1 / sqrt(a). */
wf_array *wf_rsqrt(wf_array *a);
/* a * a (integers wrap; bool unchanged). */
wf_array *wf_square(wf_array *a);
/* 1 / a. */
wf_array *wf_reciprocal(wf_array *a);
/* Sine (radians). */
wf_array *wf_sin(wf_array *a);
/* Cosine (radians). */
wf_array *wf_cos(wf_array *a);
/* Tangent (radians). */
wf_array *wf_tan(wf_array *a);
/* Hyperbolic tangent. */
wf_array *wf_tanh(wf_array *a);
/* Hyperbolic sine. */
wf_array *wf_sinh(wf_array *a);
/* Hyperbolic cosine. */
wf_array *wf_cosh(wf_array *a);
/* Inverse sine (outside [-1, 1]: NaN). */
wf_array *wf_arcsin(wf_array *a);
/* Inverse cosine (outside [-1, 1]: NaN). */
wf_array *wf_arccos(wf_array *a);
/* Inverse tangent. */
wf_array *wf_arctan(wf_array *a);
/* 1 / (1 + e^-a). */
wf_array *wf_sigmoid(wf_array *a);
/* The error function. */
wf_array *wf_erf(wf_array *a);
/* Inverse of erf on (-1, 1); +-1 give +-inf. */
wf_array *wf_erfinv(wf_array *a);
/* Largest integral value <= a. Rounding keeps the dtype; integer inputs
 * give a view of the same values. */
wf_array *wf_floor(wf_array *a);
/* Smallest integral value >= a. */
wf_array *wf_ceil(wf_array *a);
/* Nearest integral value, halves to even. */
wf_array *wf_round(wf_array *a);
/* True where a is zero (bool result, as for the is* tests below). */
wf_array *wf_logical_not(wf_array *a);
/* True where a is NaN. */
wf_array *wf_isnan(wf_array *a);
/* True where a is +-inf. */
wf_array *wf_isinf(wf_array *a);
/* True where a is neither NaN nor +-inf. */
wf_array *wf_isfinite(wf_array *a);
/* The same values; transforms treat it as a constant (no gradient). */
wf_array *wf_stop_gradient(wf_array *a);

/* ---- binary element-wise */

/* bool add is logical or, multiply logical and; integers wrap around. */
wf_array *wf_add(wf_array *a, wf_array *b);
/* a * b. */
wf_array *wf_multiply(wf_array *a, wf_array *b);
/* a - b (bool: WF_ERR_DTYPE). */
wf_array *wf_subtract(wf_array *a, wf_array *b);
/* True division: integer inputs give float32. */
wf_array *wf_divide(wf_array *a, wf_array *b);
/* a ** b (integers: repeated squaring, wrapping; a negative exponent gives 0, as MLX). */
wf_array *wf_power(wf_array *a, wf_array *b);
/* Element-wise maximum (NaN propagates). */
wf_array *wf_maximum(wf_array *a, wf_array *b);
/* Element-wise minimum (NaN propagates). */
wf_array *wf_minimum(wf_array *a, wf_array *b);
/* Python semantics: floor division and remainder with the divisor's sign;
 * integer division by zero gives 0. */
wf_array *wf_floor_divide(wf_array *a, wf_array *b);
/* The remainder with the divisor's sign (Python's %); integer % 0 gives 0. */
wf_array *wf_remainder(wf_array *a, wf_array *b);
/* Comparisons and logical ops give bool. */
wf_array *wf_equal(wf_array *a, wf_array *b);
/* a != b. */
wf_array *wf_not_equal(wf_array *a, wf_array *b);
/* a < b. */
wf_array *wf_less(wf_array *a, wf_array *b);
/* a <= b. */
wf_array *wf_less_equal(wf_array *a, wf_array *b);
/* a > b. */
wf_array *wf_greater(wf_array *a, wf_array *b);
/* a >= b. */
wf_array *wf_greater_equal(wf_array *a, wf_array *b);
/* a && b (inputs converted to bool). */
wf_array *wf_logical_and(wf_array *a, wf_array *b);
/* a || b (inputs converted to bool). */
wf_array *wf_logical_or(wf_array *a, wf_array *b);
/* log(exp(a) + exp(b)), computed stably. */
wf_array *wf_logaddexp(wf_array *a, wf_array *b);
/* Angle of the point (b, a), in (-pi, pi]. */
wf_array *wf_arctan2(wf_array *a, wf_array *b);
/* re + i im as complex64 (both converted to float32, broadcast together;
 * complex inputs: WF_ERR_DTYPE). */
wf_array *wf_complex(wf_array *re, wf_array *im);
/* The real part (float32) of a complex64; a real array itself. */
wf_array *wf_real(wf_array *a);
/* The imaginary part (float32) of a complex64; zeros like a real array. */
wf_array *wf_imag(wf_array *a);
/* re - i im of a complex64; a real array itself. */
wf_array *wf_conjugate(wf_array *a);
/* Bitwise and / or / xor of bool or integer inputs (promoted; a float
 * promotion, as uint64 with a signed type, is WF_ERR_DTYPE). */
wf_array *wf_bitwise_and(wf_array *a, wf_array *b);
/* a | b. */
wf_array *wf_bitwise_or(wf_array *a, wf_array *b);
/* a ^ b. */
wf_array *wf_bitwise_xor(wf_array *a, wf_array *b);
/* ~a of a bool (logical not) or integer input. */
wf_array *wf_bitwise_invert(wf_array *a);
/* a << b, wrapping; a shift by the width or more (or a negative one) gives 0
 * (NumPy). Bool: a. */
wf_array *wf_left_shift(wf_array *a, wf_array *b);
/* a >> b, arithmetic for signed types; by the width or more (or negative):
 * 0, or -1 for a negative a (NumPy). Bool: a and not b. */
wf_array *wf_right_shift(wf_array *a, wf_array *b);
/* cond ? a : b element-wise (cond is converted to bool). */
wf_array *wf_where(wf_array *cond, wf_array *a, wf_array *b);
/* Clamps to [low, high]; either bound may be NULL (not both), meaning no
 * bound, so check bounds built by other ops before passing them. */
wf_array *wf_clip(wf_array *a, wf_array *low, wf_array *high);

/* ---- reductions over `axes` (negative allowed, no repeats; NULL with
 * naxes 0: every axis), keeping reduced axes as size 1 if `keepdims` */

/* MLX's dtypes: bool and signed integers of up to 4 bytes sum to int32,
 * unsigned ones of up to 4 bytes to uint32 (wrapping), int64 / uint64 keep
 * their type; f16/bf16 accumulate in float32; complex64 sums each part. */
wf_array *wf_sum(wf_array *a, const int *axes, int naxes, bool keepdims);
/* Mean (integers give float32). */
wf_array *wf_mean(wf_array *a, const int *axes, int naxes, bool keepdims);
/* Product, in wf_sum's dtypes (u8, u16, u32 give uint32; complex64 in
 * order along each axis). */
wf_array *wf_prod(wf_array *a, const int *axes, int naxes, bool keepdims);
/* Maximum (NaN propagates; a zero-size reduction is WF_ERR_SHAPE;
 * complex64: by real part, then imaginary part, as NumPy). */
wf_array *wf_max(wf_array *a, const int *axes, int naxes, bool keepdims);
/* Minimum (NaN propagates; a zero-size reduction is WF_ERR_SHAPE;
 * complex64 ordered as in wf_max). */
wf_array *wf_min(wf_array *a, const int *axes, int naxes, bool keepdims);
/* True where every element is nonzero (bool result). */
wf_array *wf_all(wf_array *a, const int *axes, int naxes, bool keepdims);
/* True where any element is nonzero. */
wf_array *wf_any(wf_array *a, const int *axes, int naxes, bool keepdims);
/* log(sum(exp(a))), computed stably. */
wf_array *wf_logsumexp(wf_array *a, const int *axes, int naxes, bool keepdims);
/* Variance: mean squared deviation, divided by n - ddof instead of n
 * (integers give float32). */
wf_array *wf_var(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof);
/* sqrt(wf_var). */
wf_array *wf_std(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof);
/* Index of the first maximum along `axis`, as a uint32 array (MLX). The
 * axis may hold at most 2^31 elements, so every index is below 2^31 and its
 * bits read as int32_t give the same value: code written when this returned
 * int32 keeps working if it reads the data as int32_t (a check of the dtype
 * must accept WF_DTYPE_U32). */
wf_array *wf_argmax(wf_array *a, int axis, bool keepdims);
/* Index of the first minimum along `axis` (uint32, as wf_argmax). */
wf_array *wf_argmin(wf_array *a, int axis, bool keepdims);
/* exp(a) / sum(exp(a)) over `axes`, computed stably; same shape as `a`. */
wf_array *wf_softmax(wf_array *a, const int *axes, int naxes);
/* Running sum along `axis`; `reverse` runs from the end, `inclusive` false
 * shifts by one (starting at 0; at 1 for wf_cumprod). The input's dtype
 * (integers wrap), except that bool gives int32 (MLX). */
wf_array *wf_cumsum(wf_array *a, int axis, bool reverse, bool inclusive);
/* Running product along `axis`, as wf_cumsum. */
wf_array *wf_cumprod(wf_array *a, int axis, bool reverse, bool inclusive);

/* ---- shape */

/* Same elements in a new shape; one entry may be -1. A view when possible.
 * Under a shapeless wf_compile the shape stays as given (-1 re-inferred at
 * each call; a call it cannot fit fails with WF_ERR_SHAPE), as MLX's. */
wf_array *wf_reshape(wf_array *a, const int64_t *shape, int ndim);
/* Permutes axes; `perm` NULL reverses them. Always a view. */
wf_array *wf_transpose(wf_array *a, const int *perm, int nperm);
/* Exchanges two axes (a view). */
wf_array *wf_swapaxes(wf_array *a, int axis1, int axis2);
/* Moves axis `source` to position `destination` (a view). */
wf_array *wf_moveaxis(wf_array *a, int source, int destination);
/* Inserts size-1 axes at `axes` (positions in the result). */
wf_array *wf_expand_dims(wf_array *a, const int *axes, int naxes);
/* Removes size-1 axes (`axes` NULL with 0: every size-1 axis). */
wf_array *wf_squeeze(wf_array *a, const int *axes, int naxes);
/* Merges axes start_axis..end_axis (inclusive) into one. */
wf_array *wf_flatten(wf_array *a, int start_axis, int end_axis);
/* Splits `axis` into the n dimensions of `shape` (one may be -1). Like
 * expand_dims, squeeze and flatten, the other dimensions follow the input's
 * shape under a shapeless wf_compile. */
wf_array *wf_unflatten(wf_array *a, int axis, const int64_t *shape, int n);
/* Broadcasts to `shape` (NumPy rules). Always a view. */
wf_array *wf_broadcast_to(wf_array *a, const int64_t *shape, int ndim);
/* Slice with per-axis start, stop, step (NumPy semantics; negative
 * indices count from the end, steps may be negative but not 0). `starts`,
 * `stops` and `steps` have ndim entries. Always a view. */
wf_array *wf_slice(wf_array *a, const int64_t *starts, const int64_t *stops,
                   const int64_t *steps);
/* A copy of `a` with the slice (as in wf_slice) replaced by `update`
 * (broadcast to the slice's shape). */
wf_array *wf_slice_update(wf_array *a, wf_array *update, const int64_t *starts,
                          const int64_t *stops, const int64_t *steps);
/* Joins `count` arrays along an existing axis / a new axis. */
wf_array *wf_concatenate(wf_array *const *arrays, int count, int axis);
/* Joins `count` arrays of one shape along a new axis. */
wf_array *wf_stack(wf_array *const *arrays, int count, int axis);
/* Splits into `sections` equal parts along `axis`; writes `sections` new
 * arrays to `out`. On failure no array is returned: `out` is untouched when
 * the arguments are invalid, else its entries are NULL. */
wf_status wf_split(wf_array *a, int sections, int axis, wf_array **out);
/* Splits before each of the `count` ascending `indices`; writes count + 1
 * new arrays to `out` (failure as in wf_split). */
wf_status wf_split_at(wf_array *a, const int64_t *indices, int count, int axis,
                      wf_array **out);
/* Pads each axis with `low[i]` values before and `high[i]` after (ndim
 * entries each, >= 0), filled with `value`. */
wf_array *wf_pad(wf_array *a, const int64_t *low, const int64_t *high, double value);
/* Lower triangle of the last two axes, from diagonal k (zeros above). */
wf_array *wf_tril(wf_array *a, int64_t k);
/* Upper triangle of the last two axes, from diagonal k. */
wf_array *wf_triu(wf_array *a, int64_t k);
/* Repeats each element `repeats` times along `axis`. */
wf_array *wf_repeat(wf_array *a, int64_t repeats, int axis);
/* Tiles `a` reps[i] times along each axis (NumPy tile rules). */
wf_array *wf_tile(wf_array *a, const int64_t *reps, int nreps);
/* The bits of `a` read as `dtype` (MLX's view, NumPy's ndarray.view): the
 * same shape for a dtype of the same size; for a smaller one the last axis
 * grows by the size ratio, for a larger one it shrinks (its byte count must
 * be a multiple of the new size: WF_ERR_SHAPE otherwise; a 0-d array only
 * to a dtype of its size). Little-endian bytes. A view of a's memory when
 * its layout allows, else a copy. Transforms treat it as having no
 * gradient. A bool view of other bytes may hold values other than 0 and 1;
 * weft's ops read any non-zero byte as true. */
wf_array *wf_view(wf_array *a, wf_dtype dtype);

/* ---- fp8 (e4m3) conversions, as MLX's to_fp8 / from_fp8: 1 sign, 4
 * exponent (bias 7), 3 mantissa bits, every code finite (0x7f is 480) */

/* The e4m3 code (uint8) of each element of a real float array (integers,
 * bool, complex: WF_ERR_DTYPE): |x| rounded to nearest, ties to even (below
 * 2^-6 to a multiple of 2^-9); |x| >= 464, infinities and NaN saturate to
 * +-448 (0x7e / 0xfe). Element-wise, any shape; no gradient. */
wf_array *wf_to_fp8(wf_array *a);
/* The values of uint8 e4m3 codes (other dtypes: WF_ERR_DTYPE) as `dtype`, a
 * real float type: exact in every float type but bfloat16 / float16, where
 * the value is rounded once. */
wf_array *wf_from_fp8(wf_array *a, wf_dtype dtype);

/* ---- indexing: indices are integer arrays; out-of-range indices make the
 * evaluation fail with WF_ERR_INVALID_ARGUMENT (negative ones count from
 * the end) */

/* Elements of `a` at `indices` along `axis`; the result has a's shape with
 * `axis` replaced by indices' shape. */
wf_array *wf_take(wf_array *a, wf_array *indices, int axis);
/* NumPy take_along_axis: indices broadcast against `a` except on `axis`. */
wf_array *wf_take_along_axis(wf_array *a, wf_array *indices, int axis);
/* A copy of `a` with updates[..., i, ...] added at a[..., indices[i], ...]
 * along `axis` (1-d indices; repeated indices accumulate). */
wf_array *wf_scatter_add(wf_array *a, wf_array *indices, wf_array *updates, int axis);

/* ---- general gather and scatter (MLX's semantics). `indices` holds
 * `nindices` integer arrays of one shape I; indices[k] indexes axis
 * axes[k] of `a` (distinct axes; negative indices count from the end).
 * Position p of I selects the slice of `a` that starts at indices[k][p] on
 * axes[k] and at 0 on every other axis. An index out of range, or a slice
 * that does not fit (index + slice size > dim), fails the evaluation with
 * WF_ERR_INVALID_ARGUMENT, as for wf_take. nindices 0: one slice at 0. */

/* The slice of `slice_sizes` (ndim(a) entries, 0 <= size <= dim) at each
 * position of I: the result has shape I + slice_sizes. NumPy's a[i0, i1]
 * on a 3-d `a` is wf_gather(a, {i0, i1}, 2, {0, 1}, {1, 1, n2}) reshaped
 * to drop the two size-1 axes. */
wf_array *wf_gather(wf_array *a, wf_array *const *indices, int nindices, const int *axes,
                    const int64_t *slice_sizes);

/* How wf_scatter combines an update with the value it lands on. */
typedef enum wf_scatter_mode {
    WF_SCATTER_REPLACE = 0, /* the update replaces the value */
    WF_SCATTER_ADD = 1,     /* value + update (bool: or) */
    WF_SCATTER_PROD = 2,    /* value * update (bool: and) */
    WF_SCATTER_MAX = 3,     /* maximum (NaN propagates; bool: or) */
    WF_SCATTER_MIN = 4      /* minimum (NaN propagates; bool: and) */
} wf_scatter_mode;

/* A copy of `a` with `updates` combined into the slices the positions of
 * I select. updates has rank ndim(I) + ndim(a): its leading dims broadcast
 * to I, its trailing ndim(a) dims are the slice S every position writes
 * (S[d] <= a's dim d); it is converted to a's dtype. Integers wrap.
 * Positions that hit the same element combine in row-major order of I,
 * never in thread order (REPLACE: the last one wins): the same bits for
 * any thread count. NumPy's a[i0, i1] = v (v of shape I + (n2,)) on a 3-d
 * `a` is wf_scatter(a, {i0, i1}, 2, v reshaped to I + (1, 1, n2), {0, 1},
 * WF_SCATTER_REPLACE); a.at[i0, i1].add(v) the same with WF_SCATTER_ADD.
 * Gradients: REPLACE (an update's reaches it only where it was kept), ADD,
 * MAX and MIN (ties share the cotangent); PROD has none
 * (WF_ERR_UNSUPPORTED under wf_vjp / wf_jvp). */
wf_array *wf_scatter(wf_array *a, wf_array *const *indices, int nindices, wf_array *updates,
                     const int *axes, wf_scatter_mode mode);
/* NumPy put_along_axis with a mode: a copy of `a` where the element of
 * each position of `indices` (a's rank; broadcast against `a` except on
 * `axis`) along `axis` is combined with `values` (broadcast to the
 * indices' shape) as in wf_scatter. */
wf_array *wf_put_along_axis(wf_array *a, wf_array *indices, wf_array *values, int axis,
                            wf_scatter_mode mode);

/* ---- boolean-mask assignment (MLX's masked_scatter, NumPy's a[mask] = v) */

/* A copy of `a` whose elements under the true entries of `mask` take the
 * elements of `src` in row-major order: the i-th selected element gets the
 * i-th source element. `mask` is bool (else WF_ERR_DTYPE) with a shape equal
 * to a's leading dims; each mask entry then selects the whole slice of a's
 * remaining dims. `src` (converted to a's dtype) has at most one dim more
 * than those remaining dims: its trailing dims broadcast to them, its first
 * (rows) dim is taken as is, or is one row per mask entry when absent (so a
 * scalar fills every selected element). A mask selecting more elements than
 * src holds fails the evaluation with WF_ERR_INVALID_ARGUMENT; extra source
 * elements are ignored. Gradients reach `a` (where the mask is false) and
 * `src` (its used elements); vmap gives every example its own source. */
wf_array *wf_masked_scatter(wf_array *a, wf_array *mask, wf_array *src);

/* ---- dynamic slices: start positions are an array read at evaluation, so
 * a compiled function can slice at a position given at call time */

/* The slice of `slice_sizes` (ndim(a) entries) of `a` that starts at
 * start[k] on axes[k] (`start`: integer, 1-d of naxes entries; negative
 * counts from the end) and at 0 on the other axes. A slice that does not
 * fit fails the evaluation with WF_ERR_INVALID_ARGUMENT. */
wf_array *wf_slice_dynamic(wf_array *a, wf_array *start, const int *axes, int naxes,
                           const int64_t *slice_sizes);
/* A copy of `a` with `update` (a's rank, each dim <= a's; converted to a's
 * dtype) written at the position wf_slice_dynamic would read. */
wf_array *wf_slice_update_dynamic(wf_array *a, wf_array *update, wf_array *start,
                                  const int *axes, int naxes);

/* ---- sorting along one axis, for every dtype. Order as NumPy:
 * ascending, NaNs last (all NaNs equal); -0 sorts before +0. complex64:
 * lexicographic (real part, then imaginary part), then NumPy's NaN classes
 * in its order: R + NaN j (by real part), NaN + R j (by imaginary part),
 * NaN + NaN j; a NaN part comes back as the canonical NaN.
 * Indices are uint32, as MLX's (and wf_argmax's): WF_ERR_SHAPE for an axis
 * longer than INT32_MAX, so every index is below 2^31 and code that reads
 * them as int32_t (they were int32 before) gets the same values; values:
 * WF_ERR_SHAPE past 2^32 - 1 elements. Results never depend on the thread
 * count. */

/* A sorted copy. */
wf_array *wf_sort(wf_array *a, int axis);
/* The indices that sort `a` (stable: equal elements keep their order). */
wf_array *wf_argsort(wf_array *a, int axis);
/* A copy rearranged so that position `kth` (negative counts from the end)
 * holds the element sorted order puts there, none before it greater and
 * none after it less (NumPy partition; linear time). */
wf_array *wf_partition(wf_array *a, int64_t kth, int axis);
/* The indices wf_partition's rearrangement takes (equal elements in index
 * order around kth: wf_partition's values are a's at these). */
wf_array *wf_argpartition(wf_array *a, int64_t kth, int axis);
/* The k largest elements (0 <= k <= the axis's size) in descending order,
 * ties in index order (NaNs count as largest); linear time plus k log k. */
wf_array *wf_topk(wf_array *a, int64_t k, int axis);
/* The indices of wf_topk's elements, in its order (for sampling). */
wf_array *wf_argtopk(wf_array *a, int64_t k, int axis);
/* For each element of `values`, where it would go in the 1-d ascending
 * `sorted` to keep it sorted: the first position whose element is not less
 * than it (`right` false: NumPy's side='left') or greater than it (`right`
 * true). Both are promoted to one dtype first; NaN orders after every
 * number, and complex64 in NumPy's order, as in wf_sort. uint32 with the
 * shape of `values`. */
wf_array *wf_searchsorted(wf_array *sorted, wf_array *values, bool right);

/* ---- cumulative max / min / logsumexp: `reverse` and `inclusive` as in
 * wf_cumsum; an exclusive scan starts at the dtype's lowest value (-inf
 * for floats) for wf_cummax, its highest (+inf) for wf_cummin and -inf for
 * wf_logcumsumexp. NaN propagates. complex64 (all three, as MLX): max / min
 * in the order of wf_maximum (real part, then imaginary part; exclusive
 * scans start at -inf - inf j / inf + inf j); logcumsumexp is NumPy's
 * log(cumsum(exp(a))) on the principal branch (imaginary parts in
 * (-pi, pi]; MLX leaves them unwrapped), starting at -inf + 0j. */

/* Running maximum along `axis`. */
wf_array *wf_cummax(wf_array *a, int axis, bool reverse, bool inclusive);
/* Running minimum along `axis`. */
wf_array *wf_cummin(wf_array *a, int axis, bool reverse, bool inclusive);
/* log(cumsum(exp(a))), computed stably (integer and bool inputs give
 * float32; f16/bf16 compute in float32). */
wf_array *wf_logcumsumexp(wf_array *a, int axis, bool reverse, bool inclusive);

/* ---- discrete Fourier transforms (MLX's mx.fft). A transform over several
 * axes is the 1-d transform along each of them. The forward transform is
 * X[k] = sum_j x[j] e^(-2 pi i jk/n), the inverse uses e^(+2 pi i jk/n).
 * Every length works (mixed radix 2/3/4/5/7/11/13, Bluestein's chirp-z for
 * the rest); the work is float32 with twiddles computed in double. */

/* What wf_fft computes. */
typedef enum wf_fft_kind {
    WF_FFT_FORWARD = 0,      /* complex64 -> complex64 */
    WF_FFT_INVERSE = 1,      /* complex64 -> complex64 */
    WF_FFT_REAL_FORWARD = 2, /* float32 -> complex64: the last of `axes` keeps n / 2 + 1 */
    WF_FFT_REAL_INVERSE = 3  /* complex64 (the n / 2 + 1 of a Hermitian spectrum along
                                the last of `axes`) -> float32 of n there */
} wf_fft_kind;

/* The scale applied (NumPy's and MLX's `norm`), N being the product of the
 * transformed lengths: BACKWARD leaves forward transforms unscaled and
 * divides inverse ones by N, FORWARD the opposite, ORTHO scales both by
 * 1 / sqrt(N). */
typedef enum wf_fft_norm {
    WF_FFT_NORM_BACKWARD = 0,
    WF_FFT_NORM_ORTHO = 1,
    WF_FFT_NORM_FORWARD = 2
} wf_fft_norm;

/* The transform `kind` of `a` over the `n_axes` distinct `axes` (negative
 * count from the end; 1 <= n_axes <= a's rank). `sizes` (n_axes entries,
 * each >= 1; NULL: a's lengths there, and for WF_FFT_REAL_INVERSE 2 (m - 1)
 * on the last axis of length m) are the transform lengths: `a` is truncated
 * or padded with zeros to them first (to n / 2 + 1 on the last axis of a
 * WF_FFT_REAL_INVERSE). Inputs convert as MLX's: to complex64, or float32
 * for WF_FFT_REAL_FORWARD (a complex input keeps its real part). Errors:
 * WF_ERR_AXIS (axis out of range or repeated), WF_ERR_INVALID_ARGUMENT (a
 * size < 1, no axes, a bad kind or norm), WF_ERR_SHAPE (a 0-d array).
 * Gradients: vjp, jvp and vmap (MLX's conventions: a complex cotangent
 * goes back through the conjugate transpose). */
wf_array *wf_fft(wf_array *a, const int *axes, int n_axes, const int64_t *sizes,
                 wf_fft_kind kind, wf_fft_norm norm);

/* ---- linear algebra */

/* Matrix product with NumPy matmul rules: 1-d operands are vectors, leading
 * axes batch and broadcast. Float types (f16/bf16 through float32) and
 * complex64 (one float32 GEMM over the parts; docs/API.md). */
wf_array *wf_matmul(wf_array *a, wf_array *b);
/* beta * c + alpha * (a @ b), c broadcast to the product's shape. */
wf_array *wf_addmm(wf_array *c, wf_array *a, wf_array *b, double alpha, double beta);

/* ---- matrix factorizations and solves (mlx.core.linalg's). `a` is
 * (..., m, n): float32 or float64 (eig, eigh and svd: complex64 too, as
 * MLX; other dtypes: WF_ERR_DTYPE), rank >= 2 (WF_ERR_SHAPE), each matrix
 * of the leading dims computed on its own by one thread (the bits do not
 * depend on the thread count), in double precision, by weft's CPU kernels
 * (no LAPACK). Results have a's dtype (the eigenvalues of a complex64 eigh
 * and the singular values of a complex64 svd: float32). A singular matrix
 * is not an error: inverses and solves hold inf / NaN there, cholesky of a
 * non-positive-definite matrix is all NaN (a semi-definite one, singular
 * to the dtype's rounding, gets a finite factor with L L^T = a), lu keeps
 * the zero pivot. Functions with several results write new arrays to
 * their out pointers (all NULL on failure). Gradients: inv, tri_inv,
 * cholesky, eigh (the last two take a as symmetric; repeated eigenvalues
 * give infinite gradients) and the solves built on them have vjp / jvp
 * rules (complex64 eigh too, in MLX's complex convention, with the
 * derivative of its phase convention); lu, qr and svd answer
 * WF_ERR_UNSUPPORTED under grad / jvp. vmap works for all. Thread notes: as any op. */

/* Inverse of square matrices (LU with partial pivoting). A matrix with an
 * exactly zero pivot fails its evaluation with WF_ERR_KERNEL ("singular"),
 * as LAPACK's getrf and MLX do; so do tri_inv with a zero on the diagonal
 * and the solves built on them. */
wf_array *wf_linalg_inv(wf_array *a);
/* Inverse of triangular matrices: only the `upper` (else lower) triangle of
 * a is read; the result is triangular the same way. */
wf_array *wf_linalg_tri_inv(wf_array *a, bool upper);
/* Cholesky factor of symmetric positive-definite matrices: L with
 * a = L L^T (the lower triangle of a read), or with `upper` U with
 * a = U^T U (the upper triangle read). */
wf_array *wf_linalg_cholesky(wf_array *a, bool upper);
/* Inverse of a = L L^T (or U^T U with `upper`) from its Cholesky factor. */
wf_array *wf_linalg_cholesky_inv(wf_array *factor, bool upper);
/* x with a x = b: b is (..., n, nrhs), or (n,) for one vector; leading
 * dims broadcast as in wf_matmul. Computed as inv(a) @ b. */
wf_array *wf_linalg_solve(wf_array *a, wf_array *b);
/* As wf_linalg_solve with a triangular a (its `upper` / lower triangle). */
wf_array *wf_linalg_solve_triangular(wf_array *a, wf_array *b, bool upper);
/* LU with partial pivoting of (..., m, n): *lu holds L below the diagonal
 * (unit diagonal implied) and U on and above; *pivots (uint32,
 * (..., min(m, n))) the row swapped with row i at step i (LAPACK's, from
 * 0). */
wf_status wf_linalg_lu_factor(wf_array *a, wf_array **lu, wf_array **pivots);
/* a = L[p] @ U: *p (uint32, (..., m)) row indices, *l (..., m, k) unit
 * lower, *u (..., k, n) upper, k = min(m, n). */
wf_status wf_linalg_lu(wf_array *a, wf_array **p, wf_array **l, wf_array **u);
/* Reduced QR (Householder): *q (..., m, k) orthonormal columns, *r (..., k,
 * n) upper triangular, k = min(m, n). */
wf_status wf_linalg_qr(wf_array *a, wf_array **q, wf_array **r);
/* Eigen-decomposition of symmetric matrices (Jacobi rotations), reading
 * the `upper` (UPLO "U") or lower triangle: *w (..., n) ascending
 * eigenvalues, *v (..., n, n) the eigenvectors as columns. v may be NULL
 * (eigvalsh). complex64 a is taken as Hermitian (complex Jacobi rotations
 * in complex double): the other triangle is the conjugate mirror of the
 * one read and the diagonal's imaginary part is ignored (as LAPACK's
 * heevd); *w is float32, *v complex64 with a v = v diag(w), v^H v = I and
 * each column scaled by a unit complex factor so that its component of
 * largest magnitude (the first on ties) is real and positive. */
wf_status wf_linalg_eigh(wf_array *a, bool upper, wf_array **w, wf_array **v);
/* Eigen-decomposition of general square matrices (float32, float64 or
 * complex64; Hessenberg reduction and complex shifted QR in double
 * precision): *w (..., n) the eigenvalues in no particular order (as
 * LAPACK's geev), *v (..., n, n) the right eigenvectors as columns
 * (a v[:, i] = w[i] v[:, i], unit 2-norm, largest component real), both
 * complex64. v may be NULL (eigvals). A matrix whose QR iteration does not
 * converge fails the evaluation (WF_ERR_KERNEL). No derivative. */
wf_status wf_linalg_eig(wf_array *a, wf_array **w, wf_array **v);
/* Full SVD (one-sided Jacobi): *u (..., m, m), *s (..., k) descending,
 * *vt (..., n, n) with a = u[..., :k] diag(s) vt[..., :k, :]. u and vt may
 * both be NULL (singular values only). complex64 a (complex rotations in
 * complex double): *u and *vt complex64 unitary (vt = V^H), *s float32. */
wf_status wf_linalg_svd(wf_array *a, wf_array **u, wf_array **s, wf_array **vt);

/* ---- the rest of MLX's matmul family. Operands convert to their promoted
 * real float type (else WF_ERR_DTYPE); a 1-d a is (1, k), a 1-d b (k, 1),
 * and the dim they gained is dropped from the result, as in wf_matmul. */

/* out[i] = A[lhs[i]] @ B[rhs[i]] where A and B are a's and b's matrices
 * with their leading axes flattened (mixture of experts). lhs_indices and
 * rhs_indices (integers; NULL: every matrix in order, shaped like the
 * operand's leading axes) broadcast together to the result's leading
 * shape: result (broadcast index shape..., M, N). Both NULL: wf_matmul.
 * Negative indices count from the end; one out of range fails the
 * evaluation with WF_ERR_INVALID_ARGUMENT. sorted_indices is MLX's hint
 * and changes nothing. Each product runs on weft's GEMM, with its bits for
 * any thread count. Gradients reach a and b (never the indices). */
wf_array *wf_gather_mm(wf_array *a, wf_array *b, wf_array *lhs_indices, wf_array *rhs_indices,
                       bool sorted_indices);
/* a @ b with block masks, one entry per block_size x block_size tile
 * (block_size > 0; MLX allows only 32 and 64): mask_lhs (..., ceil(M/bs),
 * ceil(K/bs)) masks a's tiles, mask_rhs (..., ceil(K/bs), ceil(N/bs)) b's,
 * mask_out (..., ceil(M/bs), ceil(N/bs)) the result's; each may be NULL.
 * A bool mask zeroes the tiles where it is false, a float mask scales them.
 * Masks broadcast against the batch dims. No mask: wf_matmul. Built from
 * wf_matmul and element-wise products, so gradients reach a, b and float
 * masks. */
wf_array *wf_block_masked_mm(wf_array *a, wf_array *b, int block_size, wf_array *mask_out,
                             wf_array *mask_lhs, wf_array *mask_rhs);
/* out[s] = a[:, s0:s1] @ b[s0:s1, :] for each segment (s0, s1) of
 * `segments` (integers, shape (..., 2)): a (M, K) and b (K, N) are single
 * matrices; result (segments' leading shape..., M, N). A segment with
 * s1 <= s0 is an empty sum (zeros); a bound outside [0, K] fails the
 * evaluation with WF_ERR_INVALID_ARGUMENT. Gradients reach a and b. */
wf_array *wf_segmented_mm(wf_array *a, wf_array *b, wf_array *segments);

/* ---- convolution (MLX's layout, channels last): input (N, spatial...,
 * C_in) with 1 to 3 spatial axes, weight (C_out, kernel spatial...,
 * C_in / groups), output (N, out spatial..., C_out). Float inputs (the
 * weight is promoted with the input); float16 and bfloat16 accumulate in
 * float32. Errors: WF_ERR_DTYPE (non-float input), WF_ERR_SHAPE (ranks,
 * channels not divisible by or not matching groups, a kernel larger than
 * the padded input), WF_ERR_INVALID_ARGUMENT (non-positive stride,
 * dilation or groups; negative padding where not allowed). Results never
 * depend on the thread count. Per-axis arrays have one entry per spatial
 * axis; NULL means 1 (strides, dilations) or 0 (paddings). */

/* The general convolution (XLA's conv_general_dilated in NHWC): the input
 * is dilated by `input_dilation` (zeros between elements), padded with
 * padding_lo / padding_hi zeros (negative: cropped), and correlated with
 * the kernel dilated by `kernel_dilation` at steps of `strides`; `flip`
 * reverses the kernel's spatial axes (a true convolution). Output size
 * per axis: ((L - 1) * idil + 1 + lo + hi - (K - 1) * kdil - 1) / stride + 1.
 * C_out and C_in are divisible by `groups`; group g maps input channels
 * [g * C_in / groups, ...) to output channels [g * C_out / groups, ...). */
wf_array *wf_conv_general(wf_array *input, wf_array *weight, const int64_t *strides,
                          const int64_t *padding_lo, const int64_t *padding_hi,
                          const int64_t *kernel_dilation, const int64_t *input_dilation,
                          int64_t groups, bool flip);
/* 1-d convolution of (N, L, C_in) with (C_out, K, C_in / groups):
 * symmetric zero padding (>= 0), kernel dilation. */
wf_array *wf_conv1d(wf_array *input, wf_array *weight, int64_t stride, int64_t padding,
                    int64_t dilation, int64_t groups);
/* 2-d convolution of (N, H, W, C_in); stride, padding, dilation: 2 entries
 * each (NULL: 1, 0, 1). */
wf_array *wf_conv2d(wf_array *input, wf_array *weight, const int64_t *stride,
                    const int64_t *padding, const int64_t *dilation, int64_t groups);
/* 3-d convolution of (N, D, H, W, C_in); 3 entries per argument. */
wf_array *wf_conv3d(wf_array *input, wf_array *weight, const int64_t *stride,
                    const int64_t *padding, const int64_t *dilation, int64_t groups);
/* Transposed 1-d convolution (the gradient of wf_conv1d with respect to its
 * input; MLX's and PyTorch's sizes): weight (C_out, K, C_in / groups),
 * output length (L - 1) * stride - 2 * padding + dilation * (K - 1) + 1 +
 * output_padding. */
wf_array *wf_conv_transpose1d(wf_array *input, wf_array *weight, int64_t stride, int64_t padding,
                              int64_t dilation, int64_t output_padding, int64_t groups);
/* Transposed 2-d convolution; 2 entries per argument (NULL: 1, 0, 1, 0). */
wf_array *wf_conv_transpose2d(wf_array *input, wf_array *weight, const int64_t *stride,
                              const int64_t *padding, const int64_t *dilation,
                              const int64_t *output_padding, int64_t groups);
/* Transposed 3-d convolution; 3 entries per argument. */
wf_array *wf_conv_transpose3d(wf_array *input, wf_array *weight, const int64_t *stride,
                              const int64_t *padding, const int64_t *dilation,
                              const int64_t *output_padding, int64_t groups);
/* ---- quantization: MLX's affine layout. A float matrix (..., K) is cut
 * into groups of group_size (32, 64 or 128) consecutive elements of its
 * last axis; each group has a scale s and a bias b and each element the
 * code q in [0, 2^bits - 1] (bits 2, 3, 4, 5, 6 or 8) nearest to
 * (w - b) / s, so w ~ q * s + b. Codes are packed as one little-endian bit
 * stream per row (element j at bit j * bits), stored as uint32: codes
 * (..., K * bits / 32), scales and biases (..., K / group_size) of w's
 * dtype. The same codes, scales and biases as MLX's mx.quantize for the
 * same input.
 *
 * The other modes are MLX's floating-point formats: no biases, one uint8
 * scale per group, element codes packed like 4- or 8-bit affine codes.
 * fp4 is e2m1 (code bit 3 the sign; magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6),
 * fp8 is e4m3 (wf_to_fp8's). Quantizing a group: s = max|w| / (6 or 448),
 * encoded as e8m0 (mx*: the byte e + 127 of the smallest power 2^e >= s,
 * e = 0 when s is 0, as MLX 0.32 from PyPI does) or e4m3 (nvfp4); each
 * element w / (decoded s) then
 * takes the nearest fp4 value (a tie goes to the smaller magnitude, -0
 * becomes +0) or its e4m3 code. Every step is rounded to w's dtype as
 * MLX's composed ops do, so codes and scales equal mx.quantize's.
 * Dequantized: element value * decoded scale. Non-finite weights give
 * unspecified (but memory-safe) codes. */
typedef enum wf_quant_mode {
    WF_QUANT_AFFINE = 0, /* group_size 32/64/128, bits 2-8, scales and biases */
    WF_QUANT_MXFP4,      /* group_size 32, bits 4: fp4 e2m1, e8m0 scales */
    WF_QUANT_MXFP8,      /* group_size 32, bits 8: fp8 e4m3, e8m0 scales */
    WF_QUANT_NVFP4,      /* group_size 16, bits 4: fp4 e2m1, e4m3 scales */
} wf_quant_mode;

/* Quantizes w (float16, bfloat16 or float32; rank >= 2; last axis a
 * multiple of group_size) into three new arrays (*codes, *scales, *biases,
 * each released by the caller; NULL on error). The floating-point modes
 * set *biases to NULL and give uint8 scales. */
wf_status wf_quantize(wf_array *w, int group_size, int bits, wf_quant_mode mode,
                      wf_array **codes, wf_array **scales, wf_array **biases);
/* codes * scales + biases per group (the product and the sum each rounded
 * to the scales' dtype, as MLX), in the scales' dtype. Floating-point
 * modes: biases must be NULL; value * scale in bfloat16 (MLX's default). */
wf_array *wf_dequantize(wf_array *codes, wf_array *scales, wf_array *biases, int group_size,
                        int bits, wf_quant_mode mode);
/* wf_dequantize with the result in `dtype` (a real float type): affine
 * rounds the affine result once more; the floating-point modes compute in
 * `dtype` (scale, element value and product each rounded to it, as MLX). */
wf_array *wf_dequantize_as(wf_array *codes, wf_array *scales, wf_array *biases, int group_size,
                           int bits, wf_quant_mode mode, wf_dtype dtype);
/* x @ W.T (transpose) or x @ W, W the dequantized (..., N, K) or (..., K, N)
 * matrix, never formed: the kernels dequantize in registers. x (..., K);
 * batched W broadcasts its leading axes against x's. Result dtype: x's and
 * the scales' promoted (float). Bits: exactly those of wf_matmul(x,
 * W.T or W) with W = wf_dequantize(...) in float32 for any batch size and
 * thread count (the same per-element sums as weft's GEMM). vjp: x (a
 * quantized_matmul with !transpose), scales and biases (2-d W); a vjp with
 * respect to the codes fails (WF_ERR_UNSUPPORTED, as MLX). */
wf_array *wf_quantized_matmul(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                              bool transpose, int group_size, int bits);
/* Batched quantized_matmul with gathered operands (mixture of experts):
 * out[i] = x[lhs[i]] @ W[rhs[i]] (.T), where x's and W's leading axes are
 * flattened and indexed, lhs and rhs (integers, broadcast together; NULL:
 * every batch of x / of W in order) give the batch shape; result
 * (broadcast index shape..., M, N). */
wf_array *wf_gather_qmm(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                        wf_array *lhs_indices, wf_array *rhs_indices, bool transpose,
                        int group_size, int bits);
/* wf_quantized_matmul and wf_gather_qmm in any mode (the two above are
 * these with WF_QUANT_AFFINE). Floating-point modes: biases NULL, uint8
 * scales; result in x's dtype; the same bit promise (W dequantized in
 * float32 is exact: element value * scale); vjp for x only (one with
 * respect to the uint8 scales: WF_ERR_INVALID_ARGUMENT, as MLX). */
wf_array *wf_quantized_matmul_mode(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                                   bool transpose, int group_size, int bits, wf_quant_mode mode);
wf_array *wf_gather_qmm_mode(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                             wf_array *lhs_indices, wf_array *rhs_indices, bool transpose,
                             int group_size, int bits, wf_quant_mode mode);

/* ---- quantized matrix-vector precision (opt-in int8 activations) */

/* Opts the process in (true) or out (false, the default) of int8
 * activations for quantized_matmul / gather_qmm: affine mode, 4 or 8 bits,
 * transpose, up to 4 rows of x per product, on the AVX2 and AVX-512
 * variants (elsewhere, and for every other product, the exact path runs;
 * AVX512_VNNI's kernel and AVX2's give different bits within the bound
 * below). Each row
 * of x is rounded per 32 elements to int8 with one float scale
 * d = max|x| / 127 (round to nearest), so each x differs from the value
 * used by at most d / 2; the codes' products with it are summed exactly
 * (vpdpbusd, or vpmaddubsw + vpmaddwd on AVX2), then scaled in float32, and the biases are applied to the
 * exact float32 sum of x over each group. Error bound per output:
 * sum_k |scale * code| * d_k / 2 plus float32 rounding. Not finite x: the
 * exact path. Results are the same bits for any thread count, but not
 * wf_matmul's on the dequantized W. The initial value is the environment
 * variable WEFT_QMM_INT8 (1: on), read at the first product or call.
 * Thread notes: process-wide; products evaluated after the call see it (a
 * product running concurrently sees the old or the new value). Returns
 * whether an int8 kernel runs here (the CPU has AVX2 and WEFT_ISA does not
 * pick the baseline variant). */
bool wf_set_quantized_matvec_int8(bool enable);
/* Whether int8 activations are on (wf_set_quantized_matvec_int8). */
bool wf_quantized_matvec_int8(void);

/* ---- fused ("fast") ops */

/* Normalizes over the last axis: (x - mean) / sqrt(var + eps) * weight +
 * bias; weight and bias (1-d, last axis size) may be NULL. */
wf_array *wf_layer_norm(wf_array *x, wf_array *weight, wf_array *bias, double eps);
/* x / sqrt(mean(x^2) + eps) * weight over the last axis; weight may be NULL. */
wf_array *wf_rms_norm(wf_array *x, wf_array *weight, double eps);
/* Rotary position embedding on the first `dims` features of the last axis of
 * x (..., seq, features); positions start at `offset`. `traditional` rotates
 * adjacent pairs, otherwise the two halves. Frequencies base^(-2i/dims),
 * positions multiplied by `scale`. */
wf_array *wf_rope(wf_array *x, int dims, bool traditional, double base, double scale,
                  int64_t offset);
/* softmax(q @ k^T * scale + mask) @ v for q (..., Lq, D), k and v
 * (..., Lk, D[v]); leading axes broadcast. `mask` (broadcast to
 * (..., Lq, Lk)) is added, or if bool, masks out false. `causal` masks
 * positions after the query's (aligned to the end). */
wf_array *wf_scaled_dot_product_attention(wf_array *q, wf_array *k, wf_array *v, double scale,
                                          wf_array *mask, bool causal);
/* x * sigmoid(x). */
wf_array *wf_silu(wf_array *x);
/* Exact GELU, x * Phi(x), and its tanh approximation. */
wf_array *wf_gelu(wf_array *x);
/* GELU with the tanh approximation. */
wf_array *wf_gelu_tanh(wf_array *x);

/* ---------------------------------------------------------------- distributed
 *
 * Collectives across processes (MLX's mx.distributed). A group is a set of
 * processes (ranks 0 .. size-1); the world group holds every process of the
 * job. The backend is MPI (Open MPI's libmpi.so.40, loaded with dlopen when
 * the world group is first initialised, so a program that never calls these
 * needs no MPI); a process not launched by mpirun is a group of one.
 *
 * Collectives are lazy ops: they build nodes and run when evaluated, on the
 * group's communication stream (one per group, its own worker thread), so
 * they overlap computation on other streams. Collectives of one group run
 * one at a time, in the order they are submitted to that stream (see
 * docs/THREADING.md, "Distributed"): every rank must submit the collectives
 * of a group in the same order. A collective whose op, dtype or size differs
 * from the other ranks' at the same position fails with WF_ERR_DISTRIBUTED
 * on every rank of the group (nothing is exchanged). all_sum / all_max /
 * all_min reduce in rank order: every rank gets the same bits, run after run. */

typedef struct wf_group wf_group;

/* Whether a distributed backend can be loaded here (libmpi.so.40 found).
 * True does not mean the process runs under mpirun. Any thread. */
bool wf_distributed_is_available(void);
/* The world group (a new reference). Under mpirun (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK or PMI_SIZE in the environment) it initialises MPI once per
 * process (thread level MPI_THREAD_MULTIPLE) and finalises it at exit;
 * otherwise, or if MPI cannot be loaded, it is a group of one process,
 * unless `strict`: then WF_ERR_UNSUPPORTED (NULL) says why. Any thread. */
wf_group *wf_group_init(bool strict);
/* This process's rank in `g` (0 .. size-1), or -1 with WF_ERR_NULL_ARGUMENT. */
int wf_group_rank(const wf_group *g);
/* The number of processes in `g`, or -1 with WF_ERR_NULL_ARGUMENT. */
int wf_group_size(const wf_group *g);
/* Splits `g` (MPI_Comm_split, collective over g: every rank calls it, in
 * the same order relative to g's other splits): ranks with the same `color`
 * (>= 0) form a new group, ordered by `key` then by rank in g; key -1 keeps
 * g's order. A new reference. Blocks until the split is done. */
wf_group *wf_group_split(wf_group *g, int color, int key);
/* Adds a reference to `g` and returns it. */
wf_group *wf_group_retain(wf_group *g);
/* Drops one reference (the group lives while arrays of its collectives do).
 * NULL is a no-op. */
void wf_group_release(wf_group *g);

/* Element-wise sum / maximum / minimum of x over the ranks of `g` (NULL:
 * the world group), in rank order. Every dtype (bool: or / or / and;
 * complex64: sum only, WF_ERR_DTYPE otherwise). Same shape and dtype. */
wf_array *wf_all_sum(wf_array *x, wf_group *g);
wf_array *wf_all_max(wf_array *x, wf_group *g);
wf_array *wf_all_min(wf_array *x, wf_group *g);
/* The ranks' x concatenated along axis 0 in rank order (a 0-d x counts as
 * shape (1,)): shape (size * x.shape[0], ...). */
wf_array *wf_all_gather(wf_array *x, wf_group *g);
/* The sum over ranks of x, scattered along axis 0: rank r gets rows
 * [r*n/size, (r+1)*n/size) (MLX's sum_scatter, a reduce-scatter); x.shape[0]
 * must be a multiple of the group size (WF_ERR_SHAPE). */
wf_array *wf_sum_scatter(wf_array *x, wf_group *g);
/* Sends x to rank `dst` of g when evaluated; the result is x's value
 * (evaluate it to send). The matching wf_recv on dst must ask for x's shape
 * and dtype, else both fail with WF_ERR_DISTRIBUTED. dst must not be this
 * rank (WF_ERR_INVALID_ARGUMENT). */
wf_array *wf_send(wf_array *x, int dst, wf_group *g);
/* Receives an array of `shape` and `dtype` from rank `src` of g. */
wf_array *wf_recv(const int64_t *shape, int ndim, wf_dtype dtype, int src, wf_group *g);
/* wf_recv with x's shape and dtype (x's value is not used). */
wf_array *wf_recv_like(wf_array *x, int src, wf_group *g);

/* ---------------------------------------------------------------- custom kernels */

/* What a custom kernel is given: its inputs as row-major contiguous data
 * (borrowed, read-only, valid during the call) and the output to fill. */
typedef struct wf_custom_call {
    int ninputs;
    const void *const *inputs;          /* input i's elements, row-major */
    const wf_dtype *input_dtypes;
    const int *input_ndims;
    const int64_t *const *input_shapes; /* NULL entries for 0-d inputs */
    void *output;                       /* the result's elements, row-major */
    wf_dtype output_dtype;
    int output_ndim;
    const int64_t *output_shape;
} wf_custom_call;

/* A user kernel: fills call->output and returns WF_OK, or returns an error
 * status, which fails the array and everything computed from it (with the
 * message the kernel recorded through wf_set_error, if it did). It runs on
 * a stream's worker or on a thread inside wf_eval, with no weft lock held and
 * neutral per-thread state (no open scope, the default stream current, a
 * default random key of its own). It may build arrays but not wait for work:
 * wf_eval, wf_async_eval, data access of an unevaluated array and
 * wf_stream_synchronize of any stream return WF_ERR_MISUSE inside a kernel. */
typedef wf_status (*wf_custom_kernel)(void *payload, const wf_custom_call *call);

/* A lazy array of `shape` and `dtype` computed by `kernel` from `count`
 * inputs. `name` (up to 31 characters kept) names it in error messages.
 * Takes ownership of `payload`: `payload_free` (may be NULL) is called once
 * when the array is freed - or before returning if wf_custom fails. It runs
 * where its thread holds nothing of weft's (when the node is freed by a
 * stream task: on that stream's worker after the task; inside a wf_eval:
 * after its work), with neutral per-thread state, and may call any
 * function, wf_eval included. */
wf_array *wf_custom(const char *name, wf_custom_kernel kernel, void *payload,
                    void (*payload_free)(void *payload), wf_array *const *inputs, int count,
                    const int64_t *shape, int ndim, wf_dtype dtype);

/* ---------------------------------------------------------------- version */

/* The library's version, "major.minor.patch" (a static string). Compare it
 * with WF_VERSION_STRING to check that the header matches the library. */
const char *wf_version(void);
/* The library's version as major*10000 + minor*100 + patch (WF_VERSION_NUMBER
 * of the header it was built with). */
int wf_version_number(void);

/* ---------------------------------------------------------------- devices
 *
 * A device is where arrays are computed and stored: the CPU today. Devices
 * are static objects that live as long as the process; they are never
 * released. Host data access (wf_array_data, wf_array_copy_to, wf_array_item)
 * always gives host memory: for an array on another device it will copy.
 * Getters given NULL record WF_ERR_NULL_ARGUMENT, and given a pointer that
 * is not a device WF_ERR_INVALID_ARGUMENT. */

typedef struct wf_device wf_device;

/* What kind of hardware a device is. */
typedef enum wf_device_type {
    WF_DEVICE_TYPE_INVALID = -1, /* returned for a bad handle */
    WF_DEVICE_TYPE_CPU = 0
} wf_device_type;

/* The CPU device (never NULL). */
wf_device *wf_device_cpu(void);
/* Number of devices (at least 1: the CPU is device 0). */
int wf_device_count(void);
/* Device `index` (0 .. wf_device_count()-1); NULL + WF_ERR_INVALID_ARGUMENT
 * out of range. */
wf_device *wf_device_get(int index);
/* The device's type; WF_DEVICE_TYPE_INVALID for a bad handle. */
wf_device_type wf_device_kind(const wf_device *device);
/* A static name ("cpu"); NULL for a bad handle. */
const char *wf_device_name(const wf_device *device);
/* A small id, equal to the device's index and stable for the process (never
 * an address; caches may key on it); UINT64_MAX for a bad handle. */
uint64_t wf_device_id(const wf_device *device);
/* The device's process-wide default stream (a new reference). */
wf_stream *wf_device_default_stream(wf_device *device);
/* A new stream on `device`, with its own worker (a new reference). */
wf_stream *wf_stream_new_on(wf_device *device);
/* The device a stream runs on (static, no reference); NULL for NULL. */
wf_device *wf_stream_device(const wf_stream *s);
/* The device where a's value lives (evaluated) or will be computed (lazy).
 * Never evaluates. NULL for NULL or a released array. */
wf_device *wf_array_device(const wf_array *a);

/* ---------------------------------------------------------------- external memory */

/* Called once when weft no longer uses external memory: `data` and `ctx` as
 * given to wf_array_from_external. */
typedef void (*wf_external_deleter)(void *data, void *ctx);

/* A READY array over caller-owned host memory, without a copy. `data` points
 * at element 0 and must be aligned for `dtype`; `strides` (ndim entries, in
 * elements, may be negative or 0) or NULL for row-major. Bool data must hold
 * only 0 and 1 (checked). weft never writes, reuses or hands out the memory
 * for writing; it is not counted in wf_memory_stats.
 * `deleter(data, ctx)` is called exactly once, with no weft lock held, when
 * the last reference to the array and to every view or result that still
 * reads the memory is gone: at once on the thread that drops it, but never
 * inside a stream task or an evaluation: one freed by a stream's task runs
 * on that stream's worker after the task, one freed inside a wf_eval on its
 * thread once its work is done (as wf_custom payload destructors). So it
 * may call any weft function, evaluations and waits included, and take a
 * lock that a thread holds while it waits for weft (an interpreter lock).
 * A NULL deleter means you keep ownership and keep the
 * memory valid for the whole life of the array and everything made from it
 * (ctx must then be NULL). On failure (NULL returned) the deleter is NOT
 * called: the memory is still yours. */
wf_array *wf_array_from_external(void *data, const int64_t *shape, int ndim, wf_dtype dtype,
                                 const int64_t *strides, wf_external_deleter deleter, void *ctx);

/* ---------------------------------------------------------------- slots
 *
 * A slot is a thread-safe cell holding at most one array reference: one
 * thread publishes new values while others read them, with no user lock.
 * A reader always gets a whole, live array (a new reference) that some store
 * put there. Slots are refcounted handles; using a released slot records
 * WF_ERR_MISUSE (slot memory is type-stable, so this is never undefined
 * behaviour, until the memory is reused for a later slot).
 * Functions that return an array return NULL both for an empty slot and on
 * error: to tell them apart, call wf_clear_error() first and check
 * wf_last_error() (a successful call leaves it as it was). */

typedef struct wf_slot wf_slot;

/* A new slot holding a reference to `initial`, or empty if `initial` is
 * NULL (a new reference; the slot takes its own reference to `initial`). */
wf_slot *wf_slot_new(wf_array *initial);
/* Adds a reference to `slot` and returns it (NULL for NULL). */
wf_slot *wf_slot_retain(wf_slot *slot);
/* Drops one reference; the last one releases the value it holds. NULL is a
 * no-op. */
void wf_slot_release(wf_slot *slot);
/* The current value (a new reference), or NULL if the slot is empty. */
wf_array *wf_slot_load(wf_slot *slot);
/* Replaces the value with `value` (the slot takes its own reference) and
 * drops the old one. `value` must not be NULL (an earlier error is kept, as
 * for ops); empty a slot with wf_slot_take. */
wf_status wf_slot_store(wf_slot *slot, wf_array *value);
/* Stores `value` (not NULL, as for wf_slot_store) and returns the old value
 * (the slot's reference, handed to you), NULL if the slot was empty. */
wf_array *wf_slot_exchange(wf_slot *slot, wf_array *value);
/* Empties the slot and returns its value (handed to you), NULL if empty. */
wf_array *wf_slot_take(wf_slot *slot);
/* If the slot holds `expected` (the same handle; NULL: the slot is empty),
 * stores `desired` (not NULL) and sets *swapped to true; otherwise leaves
 * the slot as it is and sets *swapped to false. */
wf_status wf_slot_compare_exchange(wf_slot *slot, wf_array *expected, wf_array *desired,
                                   bool *swapped);

/* ---------------------------------------------------------------- transforms
 *
 * Functions are wf_fn handles: a C callback plus a payload. Transforms take
 * a wf_fn and return a new one, so they compose: wf_grad(wf_grad(f)),
 * wf_vmap(wf_grad(f)), a wf_jvp of a function that calls wf_vjp. Tracing
 * state is per thread: one thread computing gradients never changes what
 * another thread's calls do. The callback runs with no weft lock held and
 * may call any API (evaluating intermediates included: the graph is kept for
 * the backward pass). Nodes built from a traced array on another thread are
 * not seen by the transform: build the function's graph on the calling
 * thread. */

/* A refcounted function handle. Opaque; immutable once made, so one wf_fn
 * may be called from many threads at once. */
typedef struct wf_fn wf_fn;

/* A function body. `inputs` are borrowed. It writes at most *noutputs (in:
 * capacity) new references to `outputs` and sets *noutputs to the count. A
 * non-OK status becomes the caller's error (with the message of the weft
 * call that failed, or one naming the status); on failure the callback
 * returns no references (it releases what it made). It runs with this
 * thread's scopes hidden (the caller's and the transforms' own): the arrays
 * it makes are its own to release or return, and scopes it leaves open are
 * closed when it returns. The outputs then belong to the caller's innermost
 * scope, if one is open, as op results do. */
typedef wf_status (*wf_fn_callback)(void *payload, wf_array *const *inputs, size_t ninputs,
                                    wf_array **outputs, size_t *noutputs);

/* Most outputs a transformed function may return (transforms call bodies
 * with this capacity). */
#define WF_FN_MAX_OUTPUTS 64

/* A function from `callback`. `payload_free` (may be NULL) is called once
 * with `payload`, with no lock held, on whichever thread drops the last
 * reference - or before returning if wf_fn_new fails. */
wf_fn *wf_fn_new(wf_fn_callback callback, void *payload, void (*payload_free)(void *payload));
/* Adds a reference and returns fn (NULL for NULL). */
wf_fn *wf_fn_retain(wf_fn *fn);
/* Drops a reference (NULL is a no-op). A call in flight holds its own
 * reference, so releasing during another thread's call is safe. */
void wf_fn_release(wf_fn *fn);
/* Calls fn: `outputs` has room for *noutputs (in) entries, receives new
 * references and *noutputs (out) their count. On failure no references
 * are returned and the callback's error is this thread's last error. */
wf_status wf_fn_call(wf_fn *fn, wf_array *const *inputs, size_t ninputs, wf_array **outputs,
                     size_t *noutputs);

/* Reverse mode: runs fn on `primals`, then pulls `cotangents` (one per
 * output, the output's shape) back to the inputs. `outputs` (may be NULL)
 * receives fn's ncotangents outputs; `primal_cotangents` receives nprimals
 * arrays shaped like the primals (zeros for integer and bool primals and
 * for primals the outputs do not depend on). New references. */
wf_status wf_vjp(wf_fn *fn, wf_array *const *primals, size_t nprimals,
                 wf_array *const *cotangents, size_t ncotangents, wf_array **outputs,
                 wf_array **primal_cotangents);
/* Forward mode: runs fn on `primals` and pushes `tangents` (one per primal,
 * its shape; a NULL entry is a zero tangent) through it. `outputs` (may be
 * NULL) and `output_tangents` have room for *noutputs (in) entries and
 * receive fn's outputs and their tangents; *noutputs (out) is the count. */
wf_status wf_jvp(wf_fn *fn, wf_array *const *primals, size_t nprimals,
                 wf_array *const *tangents, wf_array **outputs, wf_array **output_tangents,
                 size_t *noutputs);

/* A function returning the gradients of fn's first output (a float scalar,
 * else the call fails with WF_ERR_SHAPE / WF_ERR_DTYPE) with respect to the
 * inputs at `argnums` (distinct, >= 0; NULL with 0 means {0}), in argnums
 * order. Integer and bool inputs get zero gradients. */
wf_fn *wf_grad(wf_fn *fn, const int *argnums, size_t nargnums);
/* As wf_grad, but the new function returns fn's outputs followed by the
 * gradients of its first output. */
wf_fn *wf_value_and_grad(wf_fn *fn, const int *argnums, size_t nargnums);

/* The in-axis of an input that is not mapped (the same array for every
 * example), or the out-axis of an output that is not batched. */
#define WF_VMAP_NOT_MAPPED (-2147483647 - 1)
/* A function mapping fn over a batch axis: input i is split along
 * in_axes[i] (negative counts from the end; WF_VMAP_NOT_MAPPED: shared),
 * output j is stacked along out_axes[j]. NULL with 0 means axis 0 for every
 * input / output; otherwise the counts must match the call's. Every
 * primitive is batched as a whole (no per-example loop). fn is traced once
 * on the first example, so data-dependent code sees example 0's values. */
wf_fn *wf_vmap(wf_fn *fn, const int *in_axes, size_t nin, const int *out_axes, size_t nout);

/* fn with user rules for the transforms; each of vjp, jvp, vmap may be
 * NULL (the transform then goes through fn's own graph). With fn taking n
 * inputs and returning m outputs:
 *   vjp:  inputs (primals[n], cotangents[m], outputs[m]) -> n cotangents
 *         (one per primal, its shape; ignored for integer primals);
 *   jvp:  inputs (primals[n], tangents[n]; zero tangents are zeros)
 *         -> m tangents;
 *   vmap: inputs (primals[n], each batched on axis 0: unmapped ones are
 *         broadcast) -> m outputs batched on axis 0.
 * With several outputs the vjp rule is called once per output that gets a
 * cotangent (the others' cotangents zeros), the jvp and vmap rules once per
 * output used. Wrapping a wf_custom kernel this way makes it
 * differentiable. */
wf_fn *wf_custom_function(wf_fn *fn, wf_fn *vjp, wf_fn *jvp, wf_fn *vmap);
/* fn whose intermediates are not kept for the backward pass: under a
 * transform its forward builds a plain graph (freed once evaluated) and the
 * backward pass (and jvp / vmap) runs fn again. Trades compute for memory. */
wf_fn *wf_checkpoint(wf_fn *fn);

/* ---------------------------------------------------------------- compile
 *
 * wf_compile traces a function once per input signature (dtype, rank and
 * shape of each input; shape left out when shapeless) and calling context
 * (the current stream's device; whether the calling thread is inside a
 * transform, and a gradient one: a trace made inside one thread's wf_grad
 * never serves another's plain call), simplifies the trace
 * (shared scalar constants, common subexpressions, no-op reshapes/casts),
 * fuses chains of float32 element-wise ops into single kernels, caches it,
 * and replays it on later calls. The cache is one for the process: a trace
 * made on one thread is reused by all, N threads making the same cold call
 * produce one trace (the others wait for it, each at most the wait timeout:
 * wf_compile_set_wait_timeout), and releasing the compiled
 * function removes its entries from whichever thread releases it. The traced
 * function runs with no weft lock held; compiled functions it calls are
 * inlined into the trace. It must not read the values of its inputs (they
 * are placeholders while tracing: evaluating them is an error).
 * Random ops given key NULL inside it draw from the calling thread's default
 * key at each call, as uncompiled code does: a compiled dropout gives a
 * fresh mask per call, the same bits as uncompiled calls for the same
 * seed, whichever thread traced (wf_random_seed inside it is redone per
 * call too). An explicit key is part of the trace (same numbers every
 * call). Under shapeless, default-key draws of a fixed shape (uniform,
 * normal, randint) are refused at trace time; bernoulli and categorical
 * follow their input's shape. */

/* Process-wide compile mode; part of every cache key, so switching never
 * replays a trace made under another mode. WEFT_DISABLE_COMPILE=1 in the
 * environment starts the process in WF_COMPILE_DISABLED. */
typedef enum wf_compile_mode {
    WF_COMPILE_DISABLED = 0,    /* compiled functions call the function directly */
    WF_COMPILE_NO_SIMPLIFY = 1, /* trace and replay as recorded */
    WF_COMPILE_NO_FUSE = 2,     /* trace and simplify, no fusion */
    WF_COMPILE_ENABLED = 3      /* trace, simplify and fuse (the default) */
} wf_compile_mode;

/* Options of wf_compile. Start from wf_compile_options_default(): it sets
 * struct_size, which lets later versions add fields. */
typedef struct wf_compile_options {
    size_t struct_size; /* sizeof(wf_compile_options) of the caller's header */
    bool shapeless;     /* one trace for every shape of the same dtypes and ranks;
                           as in MLX, a shape an op was given (reshape, broadcast_to,
                           slice, slice_update, gather) is kept at each call (an error
                           where it cannot fit); default-key draws of a fixed shape are
                           refused at trace time */
    int retrace_warning; /* log a warning when one function has traced more than this
                            many times (0: never; default 16) */
    /* Declared state (MLX's compile(inputs=, outputs=)): each call passes the
     * slots' current arrays to the function after its inputs, and stores the
     * function's last nstate outputs back into the slots (the caller gets the
     * outputs before them). Each load and store is atomic; calls that share
     * state should not overlap, as with any read-modify-write. The compiled
     * function retains the slots. */
    wf_slot *const *state;
    size_t nstate;
} wf_compile_options;

wf_compile_options wf_compile_options_default(void);

/* A compiled version of fn (which it retains), with a fresh 64-bit id that
 * is never reused. `options` may be NULL (defaults). Release with
 * wf_fn_release; the cache entries go with the last reference, while calls
 * in flight finish with theirs. Transforms of compiled functions see the
 * simplified, unfused trace; compiled transforms are fused. Any thread. */
wf_fn *wf_compile(wf_fn *fn, const wf_compile_options *options);

/* Sets / reads the process-wide compile mode (any thread; takes effect for
 * calls that start afterwards). */
wf_status wf_set_compile_mode(wf_compile_mode mode);
wf_compile_mode wf_get_compile_mode(void);

/* Counters of one compiled function or (NULL) of the whole cache. */
typedef struct wf_compile_stats {
    size_t struct_size;   /* sizeof(wf_compile_stats) of the caller's header */
    uint64_t calls;       /* calls of this function (0 for the global form) */
    uint64_t hits;        /* calls that replayed a cached trace */
    uint64_t misses;      /* calls that found no trace */
    uint64_t traces;      /* traces made */
    uint64_t waits;       /* calls that waited for another thread's trace */
    uint64_t inline_calls; /* calls run directly (compile disabled, or inside a trace) */
    uint64_t evictions;   /* entries dropped by the cache limits */
    uint64_t erases;      /* entries removed because their function was released (global) */
    uint64_t entries;     /* entries cached now */
    uint64_t fused_kernels_run; /* fused kernels run in the process so far */
    uint64_t timeout_traces; /* traces made by calls that gave up waiting for another
                                thread's trace (wf_compile_set_wait_timeout); in traces too */
} wf_compile_stats;

wf_compile_stats wf_compile_stats_default(void);
/* Fills *out (its struct_size must be set: wf_compile_stats_default()).
 * `compiled` must come from wf_compile, or be NULL for the global counters. */
wf_status wf_compile_stats_get(wf_fn *compiled, wf_compile_stats *out);

/* At most `per_function` entries per compiled function and `total` in all
 * (0: unlimited, the default); least recently used entries are evicted. */
wf_status wf_compile_set_cache_limits(size_t per_function, size_t total);

/* How long a call waits for another thread's trace of the same signature
 * before it traces for itself (process-wide; default 1 second, or
 * WEFT_COMPILE_WAIT_TIMEOUT=<seconds> in the environment until set). The
 * bound keeps a caller that holds a lock the trace needs (a user mutex, a
 * binding's GIL-like lock taken by the traced function) from hanging it;
 * the cache keeps whichever trace is stored first, the other serves only
 * its own call, and wf_compile_stats counts such traces (timeout_traces).
 * 0: never wait; INFINITY (or more than 1e9): no bound (strict single
 * flight). Negative or NaN: WF_ERR_INVALID_ARGUMENT. Any thread; applies
 * to waits that start afterwards. A binding must not hold its own global
 * lock while a compiled call waits. */
wf_status wf_compile_set_wait_timeout(double seconds);
/* The wait timeout in seconds (INFINITY when unbounded). Any thread. */
double wf_compile_get_wait_timeout(void);

/* Where compile reports retraces (INFO: which input changed how) and
 * warnings (a function that keeps retracing). Called on the calling thread
 * with no lock held; NULL restores the default (warnings to stderr). */
typedef enum wf_compile_log_level { WF_COMPILE_LOG_INFO = 0, WF_COMPILE_LOG_WARNING = 1 } wf_compile_log_level;
typedef void (*wf_compile_log_fn)(void *ctx, wf_compile_log_level level, const char *message);
void wf_compile_set_log(wf_compile_log_fn fn, void *ctx);

/* ---------------------------------------------------------------- export and import
 *
 * A function can be written to a file and read back, by this process or
 * another, without the code that built it (MLX's export_function /
 * import_function). Exporting traces the function once per call of
 * wf_exporter_add with the compile tracer (its inputs are placeholders, as
 * under wf_compile: it must not read their values), simplifies the trace
 * (no fusion) and appends it to the file: primitives by name with their
 * parameters, constants the function captured or built as data (evaluated
 * when exported; written once per file however many traces share them),
 * and the inputs' dtypes and shapes. Random draws from the thread's
 * default key are recorded with the keys they took while exporting: the
 * imported function returns those numbers at every call. A shapeless
 * export is replayed for any shapes of the same dtypes and ranks (as
 * wf_compile's shapeless traces are). One file may hold several traces,
 * each with a caller-chosen tag (a binding's argument structure: MLX's
 * positional / keyword layout); a call picks the first trace whose tag and
 * input signature match.
 *
 * Refused with WF_ERR_UNSUPPORTED naming the primitive: user kernels
 * (wf_custom; the kernel is a callback), collectives (they hold a group),
 * the sibling outputs of multi-output primitives, and a custom function's own node (its rules are
 * callbacks; outside a transform a wf_custom_function records its
 * function's graph, which exports without the rules).
 *
 * The file format is weft's own, versioned and little-endian
 * (src/compile/export_format.h). Import treats the file as hostile: a
 * truncated, corrupt or foreign file, an unknown primitive, a parameter
 * out of range or a node whose recorded output its primitive's shape
 * inference does not give is WF_ERR_IO with a message; the reader never
 * allocates more than a small multiple of the file's size. */

/* Writes traces of one function to a file. Not for concurrent use: a call
 * made while another call on the same exporter runs fails with
 * WF_ERR_MISUSE. */
typedef struct wf_exporter wf_exporter;

/* Creates (truncates) `path` and writes the header, with `metadata` (may be
 * NULL: empty; a string the importer gets back) . Retains fn. NULL with
 * WF_ERR_IO when the file cannot be written. */
wf_exporter *wf_exporter_new(const char *path, wf_fn *fn, bool shapeless, const char *metadata);
/* Traces fn on placeholders shaped like `inputs` (borrowed) and appends the
 * trace under `tag` (may be NULL: ""). Runs fn with no weft lock held. */
wf_status wf_exporter_add(wf_exporter *ex, const char *tag, wf_array *const *inputs,
                          size_t ninputs);
/* Ends the file, closes it and frees the exporter (NULL is a no-op). A file
 * whose exporter was never closed has no end record and does not import. */
wf_status wf_exporter_close(wf_exporter *ex);
/* wf_exporter_new + one wf_exporter_add + wf_exporter_close; on failure
 * the partial file is removed. */
wf_status wf_export_function(const char *path, wf_fn *fn, const char *tag,
                             wf_array *const *inputs, size_t ninputs, bool shapeless,
                             const char *metadata);

/* A function read from a file: refcounted, immutable, callable from any
 * number of threads at once. */
typedef struct wf_imported wf_imported;

/* Reads `path` (WF_ERR_IO: missing, unreadable or invalid; see above). A
 * new reference. */
wf_imported *wf_import_function(const char *path);
/* The same from `size` bytes in memory (borrowed; copied as needed). */
wf_imported *wf_import_function_from_memory(const void *data, size_t size);
/* Adds / drops a reference (NULL is a no-op for both). */
wf_imported *wf_imported_retain(wf_imported *imp);
void wf_imported_release(wf_imported *imp);
/* The traces in the file, each one's tag and input count (borrowed strings
 * that live as long as imp; NULL / 0 out of range), and the metadata. */
size_t wf_imported_trace_count(const wf_imported *imp);
const char *wf_imported_trace_tag(const wf_imported *imp, size_t i);
size_t wf_imported_trace_inputs(const wf_imported *imp, size_t i);
/* Input k of trace i as exported: its dtype, rank and shape (*shape borrowed,
 * living as long as imp; the exported call's shape, which a shapeless trace
 * does not require). WF_ERR_INVALID_ARGUMENT when i or k is out of range. */
wf_status wf_imported_trace_input(const wf_imported *imp, size_t i, size_t k, wf_dtype *dtype,
                                  int *ndim, const int64_t **shape);
/* Whether trace i was exported shapeless (false out of range). */
bool wf_imported_trace_shapeless(const wf_imported *imp, size_t i);
const char *wf_imported_metadata(const wf_imported *imp);
/* Calls the first trace with tag `tag` (NULL: "") whose inputs have the
 * dtypes, ranks and (unless shapeless) shapes of `inputs`; none:
 * WF_ERR_INVALID_ARGUMENT naming what was given. Outputs as wf_fn_call's:
 * *noutputs in: room, out: count; new lazy arrays. */
wf_status wf_imported_call(wf_imported *imp, const char *tag, wf_array *const *inputs,
                           size_t ninputs, wf_array **outputs, size_t *noutputs);
/* imp's traces under `tag` as a wf_fn (retains imp), so they compose with
 * the transforms and wf_compile like any function. */
wf_fn *wf_imported_fn(wf_imported *imp, const char *tag);

/* The graph that computes `arrays` as Graphviz DOT text: each node still to
 * run is a box labelled with its primitive, each evaluated array (or array
 * made from data) an ellipse labelled with its dtype and shape, whose
 * inputs are not shown (evaluation has dropped them). names[i] (names may
 * be NULL, an entry NULL) labels arrays[i]. Writes at most capacity - 1
 * bytes and a NUL to buf (may be NULL with capacity 0) and the whole
 * text's length to *length. The arrays' graph must not be evaluated by
 * another thread meanwhile. */
wf_status wf_graph_to_dot(wf_array *const *arrays, const char *const *names, size_t n,
                          char *buf, size_t capacity, size_t *length);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H */
