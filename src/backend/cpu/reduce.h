/*
 * CPU reductions, arg-reductions, softmax, scans and norms: kernels and the
 * machinery they share. Internal.
 *
 * Files:
 *   reduce_isa.c/.inc  hot loops, one copy per instruction-set variant
 *   reduce_tree.c      operators; fixed-tree row reductions (pairwise sums)
 *   reduce_walk.c      the walk engine: memory-order walks, tiling, staging
 *                      of other dtypes, and the reproducible parallel driver
 *   reduce_rows.c      the rows engine: one row at a time along an axis,
 *                      strided rows gathered in 2-d tiles
 *   reduce.c           sum, prod, max, min, all, any, mean, var, std,
 *                      logsumexp (the general form)
 *   softmax.c          softmax and row logsumexp
 *   arg_reduce.c       argmax, argmin
 *   scan.c             cumsum, cumprod
 *
 * Reproducibility (docs/THREADING.md): the bits of every result depend on
 * the input's shape, strides and values only, never on the thread count or
 * on how the work is split: a row is reduced by a fixed tree over leaves of
 * WF_CPU_LEAF elements, an outer reduced axis is cut into blocks whose size
 * follows from the shape and whose partial results are combined by a fixed
 * tree, and parallel work is only ever split along kept axes, across those
 * blocks, or across a row's leaves.
 */
#ifndef WEFT_BACKEND_CPU_REDUCE_H
#define WEFT_BACKEND_CPU_REDUCE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/array.h"
#include "core/buffer.h"

/* ---------------------------------------------------------------- operators */

/* The accumulate operators. */
typedef enum wf_cpu_kop {
    WF_CPU_KOP_SUM,
    WF_CPU_KOP_PROD,
    WF_CPU_KOP_MAX,
    WF_CPU_KOP_MIN,
    WF_CPU_KOP_AND,
    WF_CPU_KOP_OR,
} wf_cpu_kop;

/* One value of any compute dtype. */
typedef union wf_cpu_scalar {
    uint8_t u8;
    int32_t i32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
} wf_cpu_scalar;

/* take ? x : a through the bits (compilers branch on a float ?: whose
 * condition is not one comparison, and a branch on data mispredicts). */
static inline float wf__cpu_pick_f32(bool take, float x, float a)
{
    uint32_t ux, ua;
    memcpy(&ux, &x, sizeof ux);
    memcpy(&ua, &a, sizeof ua);
    const uint32_t m = 0u - (uint32_t)take, r = (ux & m) | (ua & ~m);
    float out;
    memcpy(&out, &r, sizeof out);
    return out;
}
static inline double wf__cpu_pick_f64(bool take, double x, double a)
{
    uint64_t ux, ua;
    memcpy(&ux, &x, sizeof ux);
    memcpy(&ua, &a, sizeof ua);
    const uint64_t m = 0u - (uint64_t)take, r = (ux & m) | (ua & ~m);
    double out;
    memcpy(&out, &r, sizeof out);
    return out;
}

/* a (k) x for floats; max and min propagate NaN (a NaN input is taken, a
 * NaN accumulator kept). */
static inline float wf__cpu_kop_f32(int k, float a, float x)
{
    switch (k) {
    case WF_CPU_KOP_SUM: return a + x;
    case WF_CPU_KOP_PROD: return a * x;
    case WF_CPU_KOP_MAX: return wf__cpu_pick_f32((x > a) | (x != x), x, a);
    default: return wf__cpu_pick_f32((x < a) | (x != x), x, a);
    }
}
static inline double wf__cpu_kop_f64(int k, double a, double x)
{
    switch (k) {
    case WF_CPU_KOP_SUM: return a + x;
    case WF_CPU_KOP_PROD: return a * x;
    case WF_CPU_KOP_MAX: return wf__cpu_pick_f64((x > a) | (x != x), x, a);
    default: return wf__cpu_pick_f64((x < a) | (x != x), x, a);
    }
}

/* The dtype a plain reduction with operator k accumulates in for input
 * dtype `in`: half types in float32; sums and products of integers of up to
 * 4 bytes in int32 (the bits of any 32-bit wrapping sum), of 8 bytes in
 * int64; max and min of the narrow integers in int32, of uint32 in int64. */
wf_dtype wf__cpu_kop_acc_dtype(wf_cpu_kop k, wf_dtype in);
/* Fills n values of dtype `at` with k's identity (max and min start from the
 * lowest / highest value). */
void wf__cpu_kop_fill(wf_cpu_kop k, wf_dtype at, void *acc, int64_t n);
/* dst[i] = dst[i] (k) src[i] over n contiguous values of dtype at. */
void wf__cpu_kop_combine(wf_cpu_kop k, wf_dtype at, void *dst, const void *src, int64_t n);
/* acc[i * sa] = acc[i * sa] (k) x[i * sx] for n values of dtype at (strides
 * in elements, 0 allowed). */
void wf__cpu_kop_combine_strided(wf_cpu_kop k, wf_dtype at, int64_t n, void *acc, int64_t sa,
                                 const void *x, int64_t sx);
/* *a = *a (k) v for one value of dtype at. */
void wf__cpu_kop_combine1(wf_cpu_kop k, wf_dtype at, void *a, const wf_cpu_scalar *v);

/* ---------------------------------------------------------------- ISA variants */

enum { WF_CPU_LANES_F32 = 64, WF_CPU_LANES_F64 = 32, WF_CPU_COLS = 16 };
/* Columns a column form handles per call: several groups of WF_CPU_COLS, so
 * that each visit of a strided row reads (and writes) several cache lines
 * of it, not one (one line per 16 KB-strided row costs a TLB miss each). */
enum { WF_CPU_COLS_WIDE = 4 * WF_CPU_COLS };

/* The hot loops of one instruction-set variant (reduce_isa.c). "Lanes" are
 * WF_CPU_LANES_* running values that a row is spread over (element i goes
 * to lane i mod the lane count); n is a multiple of the lane count there.
 * Operators are SUM, PROD, MAX, MIN. */
typedef struct wf_cpu_red_isa {
    void (*lanes_f32)(int k, float *lanes, int64_t n, const float *x);
    void (*lanes_f64)(int k, double *lanes, int64_t n, const double *x);
    /* lanes += (x - mu)^2 */
    void (*sqdev_f32)(float *lanes, int64_t n, const float *x, float mu);
    void (*sqdev_f64)(double *lanes, int64_t n, const double *x, double mu);
    /* WF_CPU_COLS adjacent columns at once (lanes: 64 x WF_CPU_COLS): row i
     * of x (stride sx) into lane (lane0 + i) mod 64 of every column */
    void (*col_lanes_f32)(int k, float *lanes, int64_t n, const float *x, int64_t sx,
                          int64_t lane0);
    void (*col_sqdev_f32)(float *lanes, int64_t n, const float *x, int64_t sx, int64_t lane0,
                          const float *mu);
    /* n rows of WF_CPU_COLS columns: t[i][c] = x[i * sx + c] - a[c];
     * y[i * sy + c] = v[i][c]; y[i * sy + c] = v[i * sv + c] * f[c] */
    void (*col_shift_f32)(int64_t n, const float *x, int64_t sx, const float *a, float *t);
    void (*col_store_f32)(int64_t n, const float *v, float *y, int64_t sy);
    void (*col_scale_f32)(int64_t n, const float *v, int64_t sv, const float *f, float *y,
                          int64_t sy);
    /* acc[i] = acc[i] (k) x[i], contiguous */
    void (*accum_f32)(int k, int64_t n, float *acc, const float *x);
    void (*accum_f64)(int k, int64_t n, double *acc, const double *x);
    /* y[i] = x[i] - s */
    void (*shift_f32)(int64_t n, const float *restrict x, float s, float *restrict y);
    void (*shift_f64)(int64_t n, const double *restrict x, double s, double *restrict y);
    /* y[i] *= s */
    void (*scale_f32)(int64_t n, float *y, float s);
    void (*scale_f64)(int64_t n, double *y, double s);
    /* y = (x - mean) * inv [* w] [+ b] (w, b may be NULL) */
    void (*norm_f32)(int64_t n, const float *restrict x, float mean, float inv,
                     const float *restrict w, const float *restrict b, float *restrict y);
    void (*norm_f64)(int64_t n, const double *restrict x, double mean, double inv,
                     const double *restrict w, const double *restrict b, double *restrict y);
    /* Many rows of n <= WF_CPU_LEAF elements, row r at x + r * rs (rs >= 0):
     * out[r] = the row's leaf (lanes, padding, pairwise) for operator k,
     * or of the squared deviations from mu[r * smu]. */
    void (*rows_f32)(int k, int64_t rows, int64_t n, const float *x, int64_t rs, float *out);
    void (*rows_f64)(int k, int64_t rows, int64_t n, const double *x, int64_t rs, double *out);
    void (*rows_sqdev_f32)(int64_t rows, int64_t n, const float *x, int64_t rs,
                           const float *mu, int64_t smu, float *out);
    void (*rows_sqdev_f64)(int64_t rows, int64_t n, const double *x, int64_t rs,
                           const double *mu, int64_t smu, double *out);
    /* The same rows each folded in order from k's identity (rows under 16
     * elements of a plain reduction). */
    void (*fold_f32)(int k, int64_t rows, int64_t n, const float *x, int64_t rs, float *out);
    void (*fold_f64)(int k, int64_t rows, int64_t n, const double *x, int64_t rs, double *out);
    /* acc[c] (k)= x[r * rs + c] for c < n, rows r in order (accum per row,
     * the accumulators kept in registers across rows). */
    void (*accum_rows_f32)(int k, int64_t rows, int64_t n, float *acc, const float *x,
                           int64_t rs);
    void (*accum_rows_f64)(int k, int64_t rows, int64_t n, double *acc, const double *x,
                           int64_t rs);
    /* nq groups of WF_CPU_COLS columns at once, in one pass over the rows:
     * block q of t (tq floats apart) gets t[q * tq + i * 16 + c] = x[i * sx
     * + 16 q + c]; and back, y[i * sy + 16 q + c] = v[q * vq + i * 16 + c]
     * * f[16 q + c]. */
    void (*col_gather_f32)(int64_t n, int nq, const float *x, int64_t sx, float *t, int64_t tq);
    void (*col_scatter_scale_f32)(int64_t n, int nq, const float *v, int64_t vq, const float *f,
                                  float *y, int64_t sy);
} wf_cpu_red_isa;

/* The active variant's loops (wf__vm_isa_active). */
const wf_cpu_red_isa *wf__cpu_red_isa(void);

/* ---------------------------------------------------------------- row reductions */

/* A row is reduced as a fixed tree: leaves of WF_CPU_LEAF elements (each
 * spread over the lanes, then the lanes combined pairwise), leaves combined
 * pairwise. Long rows compute their leaves in parallel; the bits are the
 * same either way. Inputs of another dtype or stride are staged through
 * blocks of WF_CPU_STAGE elements (a multiple of the lane counts), so a
 * float16 row gives the bits of the same row converted to float32. */
enum { WF_CPU_LEAF = 4096, WF_CPU_STAGE = 512 };

/* What each element contributes: x, (x - a)^2, or exp(x - a). */
typedef enum wf_cpu_row_map { WF_CPU_ROW_PLAIN, WF_CPU_ROW_SQDEV, WF_CPU_ROW_EXP } wf_cpu_row_map;

typedef struct wf_cpu_row {
    wf_cpu_kop k;     /* SQDEV and EXP: SUM */
    wf_dtype at;      /* compute dtype; SQDEV and EXP: F32 or F64 */
    const char *x;    /* element 0 of the row */
    int64_t sx;       /* its stride in elements */
    wf_dtype xdt;     /* its dtype */
    wf_cpu_row_map map;
    double a;         /* SQDEV: the mean; EXP: the shift */
    char *y;          /* EXP: where exp(x - a) is stored (dtype at), or NULL */
    int64_t sy;
} wf_cpu_row;

/* The row's n elements reduced (n >= 0; an empty row gives the identity). */
wf_cpu_scalar wf__cpu_row_reduce(const wf_cpu_row *r, int64_t n);
/* The same for `rows` rows of n elements in one call (short rows: what
 * the per-row calls would cost is most of the work): row i starts at r->x
 * + i * rs elements (its elements r->sx apart), its mean (SQDEV) or shift
 * (EXP) is a[i * sa] (dtype r->at; NULL for PLAIN), its exponentials go to
 * r->y + i * ys elements (EXP, when r->y is given); its value (dtype r->at)
 * to vals[i]. Each row gets the bits wf__cpu_row_reduce gives it. */
void wf__cpu_rows_reduce(const wf_cpu_row *r, int64_t n, int64_t rows, int64_t rs,
                         const void *a, int64_t sa, int64_t ys, void *vals);
/* The same for w <= WF_CPU_COLS adjacent float32 columns at once (a
 * reduction over an axis that is not innermost): column c's elements are
 * at r->x + (i * r->sx + c) floats, its exponentials go to r->y + (i * r->sy
 * + c), its mean (SQDEV) or shift (EXP) is a[c]; out[c] gets the bits
 * wf__cpu_row_reduce gives for the column as a row. r->at and r->xdt are
 * F32. */
void wf__cpu_cols_reduce(const wf_cpu_row *r, int64_t n, int w, const float *a,
                         wf_cpu_scalar *out);

/* ---------------------------------------------------------------- walks */

/* Operand layouts over an input's shape: ACC row-major over the kept
 * axes (stride 0 on reduced ones; for an axis walk: row-major over every
 * axis but the axis), FULL row-major over the whole shape, IN the input's own
 * strides. */
enum wf_cpu_layout { WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_FULL, WF_CPU_LAYOUT_IN };

/* The walk over `in`'s shape in its memory order (dims by decreasing
 * stride), reduced axes `axes`, for `nops` operands of the given layouts. */
void wf__cpu_reduce_walk(wf_cpu_iter *it, const wf_array *in, uint64_t axes, int nops,
                         char *const *data, const size_t *items,
                         const enum wf_cpu_layout *layout);
/* A walk over every dim of `in` except `axis`, in the input's memory order.
 * Returns whether `axis` is the innermost dim of `in` in memory (then a row
 * along the axis is the natural inner loop; otherwise the walk is repeated
 * per axis index). */
bool wf__cpu_axis_walk(wf_cpu_iter *it, const wf_array *in, int axis, int nops,
                       char *const *data, const size_t *items,
                       const enum wf_cpu_layout *layout);
/* Elements in the walk (1 for 0 dims, 0 if empty). */
int64_t wf__cpu_iter_count(const wf_cpu_iter *it);
/* The dim of `it` to split for parallel work: among dims where operand
 * `written` (or every operand, if -1) has a non-zero stride, the outermost
 * with at least `want` indices, else the largest; -1 if none. */
int wf__cpu_pick_split_dim(const wf_cpu_iter *it, int written, int64_t want);
/* Runs body(sub, arg) over sub-walks of `it` that split dim `dim` into
 * chunks of at least `min_chunk` indices, in parallel on the intra-op pool.
 * Every operand a body writes must have a non-zero stride on `dim`. */
typedef void (*wf_cpu_walk_body)(const wf_cpu_iter *sub, void *arg);
void wf__cpu_split_run(const wf_cpu_iter *it, int dim, int64_t min_chunk, wf_cpu_walk_body body,
                       void *arg);
/* The vertical forms (scans, arg-reductions over an outer axis): body
 * repeats the walk `len` times (once per axis index); runs it split along
 * a dim where operand `written` (every operand: -1) has a non-zero stride,
 * in chunks of about min_chunk elements of work, or whole when small. */
void wf__cpu_vertical_run(const wf_cpu_iter *it, int written, int64_t len, int64_t min_chunk,
                          wf_cpu_walk_body body, void *arg);

/* Tiling: a walk whose innermost dim is strided by at least
 * WF_CPU_TILE_STRIDE elements for some operand that is less strided on an
 * outer dim (an output written in another order than the input is read)
 * runs in tiles of WF_CPU_TILE along the innermost dim, each tile walking
 * the outer dims: the strided operand then touches WF_CPU_TILE cache lines
 * at a time and fills them before they are evicted. */
enum { WF_CPU_TILE = 16, WF_CPU_TILE_STRIDE = 16 };
bool wf__cpu_wants_tiling(const wf_cpu_iter *it);
/* body(tile, arg) per tile when wf__cpu_wants_tiling, else body(it, arg).
 * `axis_outside`: the body repeats the walk once per index of an axis that
 * is not part of it (a vertical scan or arg-reduction), so a 1-d walk
 * strided by at least WF_CPU_TILE_STRIDE is tiled too. */
void wf__cpu_tiles_run(const wf_cpu_iter *it, bool axis_outside, wf_cpu_walk_body body,
                       void *arg);
/* wf__cpu_iter_run, tiled when wf__cpu_wants_tiling. */
void wf__cpu_iter_run_tiled(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx);

/* A scratch buffer for n values of dtype `at` (NULL + error recorded). */
wf_buffer *wf__cpu_scratch(int64_t n, wf_dtype at);

/* ---------------------------------------------------------------- staging */

/* Context of wf__cpu_staged, the inner function that lets a typed
 * element-wise loop see every operand in the compute dtype `at`: operand
 * `xop` (an input of dtype xdt) is converted into a stack block first,
 * operand `oop` (an output of dtype odt) is written to a stack block and
 * converted back (read first if `oread`). Its ctx is this struct. */
typedef struct wf_cpu_stage_ctx {
    wf_cpu_inner_fn typed;
    int xop, oop; /* -1: none */
    bool oread;
    wf_dtype xdt, odt, at;
    size_t item[WF_CPU_MAX_OPERANDS]; /* stored bytes per element */
    /* Read by some typed loops. */
    wf_cpu_kop k;
    int64_t index; /* argmax: index along the axis */
    bool flag;     /* argmin instead of argmax */
} wf_cpu_stage_ctx;

/* A context with no staging around `typed` (k = SUM). */
void wf__cpu_stage_init(wf_cpu_stage_ctx *c, wf_cpu_inner_fn typed, wf_dtype at);
void wf__cpu_staged(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx);

/* ---------------------------------------------------------------- the driver */

/* A reduction walk: operand `acc_op` is the accumulator (dtype at,
 * acc_count values starting at its buffer's first element, already holding
 * the identity of operator k, stride 0 on the reduced dims); fn is the inner
 * function (a call with stride 0 for the accumulator reduces a row into one
 * value, otherwise it combines a row element-wise). Parallel chunks have at
 * least `min_chunk` elements. */
/* A reduction's inner function over many rows at once, for walks whose
 * innermost dim is a short reduced row (accumulator stride 0 there): `rows`
 * rows of n elements; operand k of row r starts at ptrs[k] + r * row_st[k]
 * elements, its elements st[k] apart. Each row must get the bits fn gives
 * it, and the rows combine into the accumulator in order. */
typedef void (*wf_cpu_rows_inner_fn)(int64_t rows, int64_t n, char *const *ptrs,
                                     const int64_t *row_st, const int64_t *st, const void *ctx);

typedef struct wf_cpu_red_job {
    wf_cpu_iter it;
    int acc_op;
    wf_cpu_inner_fn fn;
    wf_cpu_rows_inner_fn rows_fn; /* or NULL */
    /* or NULL: the same signature for walks whose innermost dim is kept
     * and the next one reduced (accumulator row stride 0): rows folded
     * into one row of accumulators, in order */
    wf_cpu_rows_inner_fn fold_fn;
    const void *ctx;
    wf_cpu_kop k;
    wf_dtype at;
    int64_t acc_count;
    int64_t min_chunk;
} wf_cpu_red_job;

/* Minimum elements per parallel chunk for cheap (sum-like) and costly
 * (exp-like) reductions. */
enum { WF_CPU_RED_CHEAP = 1 << 15, WF_CPU_RED_COSTLY = 1 << 12 };

/* Runs the walk. The outer reduced dim with the most indices is cut into
 * blocks of WF_CPU_RED_BLOCK reduced elements per output (a function of the
 * shape alone); each block reduces into its own partial accumulators, and
 * the partials are combined by a fixed pairwise tree. Blocks and chunks of
 * kept dims run in parallel. WF_ERR_OUT_OF_MEMORY if the partials do not
 * fit. */
enum { WF_CPU_RED_BLOCK = 1 << 10 };
wf_status wf__cpu_red_drive(const wf_cpu_red_job *j);

/* The inner function of a plain reduction: operands [acc (at), x]; ctx is a
 * wf_cpu_stage_ctx with k, at, xdt set (wf__cpu_plain_ctx). */
void wf__cpu_plain_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx);
/* Its form for many short rows (wf_cpu_rows_inner_fn), and for many rows
 * folded into one row of accumulators (fold_fn). */
void wf__cpu_plain_rows(int64_t rows, int64_t n, char *const *ptrs, const int64_t *row_st,
                        const int64_t *st, const void *ctx);
void wf__cpu_plain_fold(int64_t rows, int64_t n, char *const *ptrs, const int64_t *row_st,
                        const int64_t *st, const void *ctx);
void wf__cpu_plain_ctx(wf_cpu_stage_ctx *c, wf_cpu_kop k, wf_dtype xdt, wf_dtype at);
/* Fills acc (acc_count values of dtype at) with k's identity and reduces
 * `in` over `axes` into it. */
wf_status wf__cpu_reduce_into(const wf_array *in, uint64_t axes, wf_cpu_kop k, wf_dtype at,
                              void *acc, int64_t acc_count);

/* ---------------------------------------------------------------- the rows engine */

/* Runs row(rows, len, x, y, res) once per row along the reduced axes of
 * `x` (which must form one dim of its memory-order walk): x is the row in
 * the compute dtype `at`, contiguous; y (when the rows have an output) is
 * where the row's output goes, contiguous, dtype at; res points at the row's
 * slot in the per-row results (when there are some), row-major over the
 * kept axes. Rows that are not contiguous in memory are gathered a group at
 * a time through 2-d tiles, and their outputs scattered back the same way;
 * float32 rows that are adjacent columns of x and y go to `cols` instead
 * when given. */
typedef struct wf_cpu_rows wf_cpu_rows;
typedef void (*wf_cpu_row_fn)(const wf_cpu_rows *rows, int64_t len, const void *x, void *y,
                              char *res);
/* w <= WF_CPU_COLS_WIDE float32 rows at once that are adjacent columns in
 * memory: row c's element i is x[i * sx + c], its output y[i * sy + c], its
 * result at res + c * res_step bytes. Must give each row the bits `row`
 * gives it (wf__cpu_cols_reduce does for its part). `scratch`: room for len
 * x w floats, reused from call to call, or NULL. */
typedef void (*wf_cpu_cols_fn)(const wf_cpu_rows *rows, int64_t len, int w, const float *x,
                               int64_t sx, float *y, int64_t sy, char *res, int64_t res_step,
                               float *scratch);
/* g rows of len <= WF_CPU_LEAF elements at once (short rows, where a call
 * per row would cost more than the row): row r's x at x + r * xs elements,
 * contiguous, of the compute dtype; its output at y + r * ys elements (when
 * the rows have outputs), its result at res + r * res_step bytes. Must give
 * each row the bits `row` gives it (wf__cpu_rows_reduce does for its part). */
typedef void (*wf_cpu_batch_fn)(const wf_cpu_rows *rows, int64_t len, int64_t g, const void *x,
                                int64_t xs, void *y, int64_t ys, char *res, int64_t res_step);
struct wf_cpu_rows {
    const wf_array *x;
    uint64_t axes;
    wf_dtype at;
    wf_array *y;       /* row outputs (x's shape, row-major or x's strides), or NULL */
    char *res;         /* per-row results, or NULL */
    size_t res_item;
    wf_cpu_row_fn row;
    wf_cpu_cols_fn cols; /* or NULL: strided rows are always gathered */
    wf_cpu_batch_fn batch; /* or NULL: short rows go to `row` one by one */
    const void *arg;   /* for row and cols */
    int64_t row_cost;  /* work per row element, in cheap-element units */
};
/* WF_OK, WF_ERR_OUT_OF_MEMORY, or WF_ERR_UNSUPPORTED (nothing done) when the
 * reduced axes do not form one dim of the walk. */
wf_status wf__cpu_rows_run(const wf_cpu_rows *rows);

/* ---------------------------------------------------------------- kernels */

/* Kernels (params: prim/reduce.h). */
wf_status wf__cpu_reduce(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_arg_reduce(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);
wf_status wf__cpu_softmax(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params);
wf_status wf__cpu_scan(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
/* logsumexp of `in` over `axes` into acc (count values of dtype at, F32 or
 * F64); called by wf__cpu_reduce. */
wf_status wf__cpu_logsumexp(const wf_array *in, uint64_t axes, wf_dtype at, void *acc,
                            int64_t count);

#endif
