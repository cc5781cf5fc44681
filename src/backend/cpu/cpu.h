/*
 * CPU backend: kernels (wf_kernel_fn) and the loops they are made of.
 * Internal.
 *
 * Every kernel walks its operands with the strided iterator below: adjacent
 * dims that are contiguous with each other for all operands are merged, the
 * outer dims are walked with index counters, and an inner 1-d loop runs over
 * the innermost dim with one element stride per operand. Inner loops never do
 * per-element index arithmetic; they specialize the common stride patterns
 * (all 1, a 0-stride broadcast operand) and fall back to a general stride.
 */
#ifndef WEFT_BACKEND_CPU_CPU_H
#define WEFT_BACKEND_CPU_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/array.h"
#include "weft.h"

/* ---------------------------------------------------------------- iteration */

enum { WF_CPU_MAX_OPERANDS = 4 };

/* The inner 1-d loop: `n` elements; ptrs[k] points at operand k's first
 * element and strides[k] is its stride in elements (may be 0 or negative). */
typedef void (*wf_cpu_inner_fn)(int64_t n, char *const *ptrs, const int64_t *strides,
                                const void *ctx);

/* A walk over `nops` operands sharing one shape. */
typedef struct wf_cpu_iter {
    int nops;
    int ndim;   /* after dropping size-1 dims and merging; 0 means one element */
    bool empty; /* some dim is 0: nothing to do */
    int64_t shape[WF_MAX_NDIM];
    int64_t strides[WF_CPU_MAX_OPERANDS][WF_MAX_NDIM]; /* elements */
    char *data[WF_CPU_MAX_OPERANDS];                   /* element 0 of each operand */
    size_t itemsize[WF_CPU_MAX_OPERANDS];
    /* The inner function only writes operand 0, never reads it (false after
     * wf__cpu_iter_init; element-wise kernels set it): a tiled walk may then
     * compute a tile into a buffer and stream it to memory. */
    bool out_write_only;
    /* The inner function copies operand 1 to operand 0, of one element size
     * (set by wf__cpu_copy_iter): a tiled walk moves each tile straight from
     * one to the other. */
    bool copy_only;
} wf_cpu_iter;

/* Two's complement wraparound from unsigned without implementation-defined
 * conversions (compiles to a plain move). */
static inline int32_t wf__cpu_wrap_i32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 0x80000000u) + INT32_MIN;
}
static inline int64_t wf__cpu_wrap_i64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u
                                    : (int64_t)(u - 0x8000000000000000u) + INT64_MIN;
}
static inline int8_t wf__cpu_wrap_i8(uint8_t u)
{
    return u <= (uint8_t)INT8_MAX ? (int8_t)u : (int8_t)(u - 0x80u) + INT8_MIN;
}
static inline int16_t wf__cpu_wrap_i16(uint16_t u)
{
    return u <= (uint16_t)INT16_MAX ? (int16_t)u : (int16_t)((int)u - 0x8000) + INT16_MIN;
}

/* A complex64 element: real part first, as NumPy and MLX store it. */
typedef struct wf_cpu_c64 {
    float re, im;
} wf_cpu_c64;

/* A C complex from its parts, exactly (re + im * I would turn an infinite
 * part into NaN). C11 lays a complex out as two reals. CMPLXF does the
 * same, but glibc defines it only for compilers with __builtin_complex,
 * which clang 14 lacks. */
static inline float _Complex wf__cpu_c64_make(float re, float im)
{
    const float parts[2] = {re, im};
    float _Complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

/* Sets up a walk. strides[k] has `ndim` element strides for operand k. */
void wf__cpu_iter_init(wf_cpu_iter *it, int ndim, const int64_t *shape, int nops,
                       char *const *data, const size_t *itemsize,
                       const int64_t *const *strides);
/* Calls `fn` once per innermost row (once with n = 1 for 0 dims). */
void wf__cpu_iter_run(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx);
/* The same walk split over the intra-op pool in chunks of at least
 * `min_chunk` elements (pick it by the cost of one element: about 64K for an
 * add, 4K for an exp). Operand 0 must be the output; a walk where several
 * positions write one output element (a stride-0 output dim) runs serially.
 * An output that is an input's storage (a donated buffer: same start, same
 * layout) reaches `fn` through a stack buffer, never aliased.
 * When an operand is strided along the innermost dim but nearly contiguous
 * along another (a transposed view), the walk runs in 2-d tiles over those
 * two dims (any visiting order is fine for element-wise work), so that
 * cache lines are reused. */
enum { WF_CPU_CHUNK_CHEAP = 1 << 16, WF_CPU_CHUNK_COSTLY = 1 << 12 };
void wf__cpu_iter_run_parallel(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx,
                               int64_t min_chunk);
/* wf__cpu_iter_run on this thread, in 2-d tiles when an operand is read or
 * written transposed (wf__cpu_iter_run_parallel tiles the same way). */
void wf__cpu_iter_run_blocked(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx);
/* Writes into perm the dims ordered by decreasing |stride| (stable), so that
 * walking in that order reads the operand close to its memory order. */
void wf__cpu_dims_by_stride(int ndim, const int64_t *strides, int *perm);

/* ---------------------------------------------------------------- element-wise results */

/* The strides of `in` seen through out's shape: right-aligned, 0 on the
 * dims `in` broadcasts (missing, or of size 1). */
void wf__cpu_broadcast_strides(const wf_array *out, const wf_array *in, int64_t *strides);
/* Gives an element-wise kernel's output (its inputs broadcast to its shape,
 * as wf__cpu_broadcast_strides sees them) its storage (layout.c): a donated
 * buffer keeps the donor's layout; a fresh one follows the dim order every
 * input shares when that is not row-major (the result of an op over a
 * transposed view is laid out like the view), else it is row-major. */
wf_status wf__cpu_alloc_elementwise_output(wf_array *out, wf_array *const *inputs,
                                           int ninputs);
/* Gives the output of a kernel over rows of `in` (same shape: a softmax
 * over one axis, which the rows engine runs with y laid out like x) a fresh
 * buffer laid out like `in` when `in` is a dense transpose (the output's
 * strides are then exactly in's), else row-major. */
wf_status wf__cpu_alloc_output_like(wf_array *out, const wf_array *in);
/* out's shape and the `nops` operands' strides (strides[0] being out's)
 * with the dims in out's memory order, outermost first. */
void wf__cpu_in_output_order(const wf_array *out, int nops, const int64_t *const *strides,
                             int64_t *shape, int64_t (*ordered)[WF_MAX_NDIM]);
/* wf__cpu_iter_init with the dims taken in the memory order of `out`
 * (operand 0, whose strides are strides[0]), so a walk over operands laid
 * out like the output is a contiguous one. */
void wf__cpu_iter_init_output_order(wf_cpu_iter *it, const wf_array *out, int nops,
                                    char *const *data, const size_t *itemsize,
                                    const int64_t *const *strides);

/* ---------------------------------------------------------------- copy and convert */

/* dst[j * ld_dst + i] = src[i * ld_src + j] for i < rows, j < cols
 * (elements of 1, 2, 4 or 8 bytes; leading dims in elements), through
 * registers in blocks where the CPU allows (transpose.c). */
void wf__cpu_transpose_block(int64_t rows, int64_t cols, size_t itemsize, const void *src,
                             int64_t ld_src, void *dst, int64_t ld_dst);

/* The same for a destination that will not be read again soon: where
 * wf__cpu_transpose_streams (AVX-512, 4- or 8-byte elements, destination
 * rows starting on 64-byte lines), the blocks' rows are written around the
 * caches (call wf__cpu_stream_fence before the data is handed to another
 * thread). */
bool wf__cpu_transpose_streams(size_t itemsize, const void *dst, int64_t ld_dst);
void wf__cpu_transpose_block_stream(int64_t rows, int64_t cols, size_t itemsize,
                                    const void *src, int64_t ld_src, void *dst, int64_t ld_dst);

/* memcpy for a destination that will not be read again soon: whole 64-byte
 * lines are written around the caches (non-temporal stores) where the CPU
 * has them. wf__cpu_stream_fence orders those stores before later ones; call
 * it before the data is handed to another thread. */
void wf__cpu_stream_copy(void *dst, const void *src, size_t bytes);
void wf__cpu_stream_fence(void);

/* Copies an N-d strided block of `itemsize`-byte elements into contiguous,
 * row-major `dst`. */
void wf__cpu_copy_strided(int ndim, const int64_t *shape, size_t itemsize, const void *src,
                          const int64_t *src_strides, void *dst);
/* Runs a copy over a 2-operand walk (operand 0 destination, 1 source, same
 * element size). */
void wf__cpu_copy_iter(const wf_cpu_iter *it);
/* dst[r * dst_row + c * dst_col] = src[r * src_row + c * src_col] for a rows x
 * cols block (strides in elements), on this thread, in 2-d tiles when one
 * side is transposed. */
void wf__cpu_copy_2d(int64_t rows, int64_t cols, size_t itemsize, const void *src,
                     int64_t src_row, int64_t src_col, void *dst, int64_t dst_row,
                     int64_t dst_col);
/* Copies a READY array's elements (any strides and offset) row-major into
 * `dst` (same dtype). Used by wf_array_data / wf_array_copy_to. */
wf_status wf__cpu_copy_to_contiguous(const wf_array *src, void *dst);

/* Converts an N-d strided block from `src_dtype` to `dst_dtype` (both with
 * their own element strides). Float to integer saturates and maps NaN to 0,
 * integer to integer wraps, bool is value != 0, f16/bf16 are rounded once
 * to nearest even. Same dtypes copy. */
void wf__cpu_convert_strided(int ndim, const int64_t *shape, const void *src,
                             wf_dtype src_dtype, const int64_t *src_strides, void *dst,
                             wf_dtype dst_dtype, const int64_t *dst_strides);
/* 1-d form: n elements with element strides. */
void wf__cpu_convert_1d(int64_t n, const void *src, wf_dtype src_dtype, int64_t src_stride,
                        void *dst, wf_dtype dst_dtype, int64_t dst_stride);

/* ---------------------------------------------------------------- math loops */

/* y[i] = e^x[i] over contiguous blocks; the one place to swap in a
 * vectorized polynomial. */
void wf__cpu_exp_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__cpu_exp_f64(int64_t n, const double *restrict x, double *restrict y);
/* Sum of n floats with element stride, pairwise (error O(log n)). */
float wf__cpu_sum_f32(int64_t n, const float *x, int64_t stride);
double wf__cpu_sum_f64(int64_t n, const double *x, int64_t stride);

/* ---------------------------------------------------------------- kernels */

wf_status wf__cpu_full(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_full_like(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params);
wf_status wf__cpu_arange(wf_array *out, wf_array *const *inputs, int ninputs,
                         const void *params);
wf_status wf__cpu_astype(wf_array *out, wf_array *const *inputs, int ninputs,
                         const void *params);
wf_status wf__cpu_add(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_multiply(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params);
wf_status wf__cpu_exp(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_sum(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
/* Shape-following kernels (prim/shape_like.c); broadcast_like and
 * reshape_like use wf__cpu_broadcast_to and wf__cpu_reshape, which read
 * only the shapes of their input and output. */
wf_status wf__cpu_unbroadcast_like(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params);
wf_status wf__cpu_size_ratio(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);
wf_status wf__cpu_reshape(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params);
/* The input's bits as another dtype: a view when the item size is kept, or
 * when the input is row-contiguous at an offset the new size divides; else
 * a contiguous copy of the bytes. */
wf_status wf__cpu_view(wf_array *out, wf_array *const *inputs, int ninputs,
                       const void *params);
wf_status wf__cpu_transpose(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params);
wf_status wf__cpu_broadcast_to(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params);
wf_status wf__cpu_slice(wf_array *out, wf_array *const *inputs, int ninputs,
                        const void *params);
wf_status wf__cpu_matmul(wf_array *out, wf_array *const *inputs, int ninputs,
                         const void *params);
/* conv_general (conv.c): implicit GEMM on weft's GEMM, a direct depthwise
 * path. */
wf_status wf__cpu_conv_general(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params);
/* The matrix factorizations (linalg_factor.c, prim/linalg_factor.h). */
wf_status wf__cpu_linalg_factor(wf_array *out, wf_array *const *inputs, int ninputs,
                                const void *params);
/* Eigenvalues (and, with `vectors`, right eigenvectors as columns) of the
 * general n x n complex a, row-major, overwritten (linalg_eig.c). work:
 * n * n + 2 * n entries. False when the QR iteration did not converge. */
bool wf__cpu_eig(double _Complex *a, int64_t n, double _Complex *values,
                 double _Complex *vectors, double _Complex *work);
/* Eigen-decomposition of the Hermitian n x n a (both triangles set, row-
 * major, overwritten; linalg_hermitian.c): w gets the n eigenvalues
 * unsorted, order[0 .. n) their ascending order, v (n x n) the unit
 * eigenvectors as columns (column order[j] belongs to the j-th smallest),
 * each with its largest component real and positive. */
void wf__cpu_eigh_hermitian(double _Complex *a, int64_t n, double *w, double _Complex *v,
                            int64_t *order);
/* SVD of the complex m x n w (m >= n, row-major, overwritten;
 * linalg_hermitian.c): u (m x m), s (n descending; 2 * n doubles, the
 * second half scratch), v (n x n, the right singular vectors as columns:
 * w = u[:, :n] diag(s) v^H); order: n indices of scratch. */
void wf__cpu_svd_complex(double _Complex *w, int64_t m, int64_t n, double _Complex *u,
                         double *s, double _Complex *v, int64_t *order);
/* Indices 0..n-1 ordered by key, ascending or descending, stable
 * (linalg_factor.c). */
void wf__cpu_order_by(const double *key, int64_t *idx, int64_t n, bool descending);
/* wf_custom: contiguous inputs, a fresh output, the user's call. */
wf_status wf__cpu_custom(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
/* The discrete Fourier transform (prim/fft.h; fft.c): 1-d transforms along
 * each axis, batched over the intra-op pool. */
wf_status wf__cpu_fft(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
/* A sibling of a multi-output primitive (prim/sibling.h): a view. */
wf_status wf__cpu_sibling(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params);

#endif
