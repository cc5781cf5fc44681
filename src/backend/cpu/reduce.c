/* Reduction kernels: sum, prod, max, min, all, any, mean, var, std,
 * logsumexp, softmax, argmax, argmin.
 *
 * One machinery serves every reduction. The accumulator (the output, or a
 * float32/float64 buffer for half types and composite ops) is laid out
 * row-major over the kept axes and seen as an operand with the input's shape
 * and stride 0 on the reduced axes. The walk visits the input in memory order
 * (dims sorted by stride), so the inner loop either reduces a row to one
 * value (accumulator stride 0) or combines a row into a row of accumulators;
 * neither does index arithmetic. Inputs whose dtype differs from the
 * accumulator's (half types, integers of a float-valued reduction) are
 * converted in stack blocks ("staging") before the typed loop sees them.
 *
 * Parallel work (drive()): large walks are split over the intra-op pool
 * along a kept dim (chunks write disjoint accumulators) or, when the kept
 * dims give too little parallelism (a full reduction, a reduction over the
 * outer axis), along a reduced dim into a few private partial accumulators
 * that are combined in a fixed order at the end.
 *
 * Composite reductions run passes over the same walk: mean = sum / n;
 * var = sum((x - mean)^2) / (n - ddof) (two passes, stable); logsumexp =
 * m + log(sum(exp(x - m))) with m the max; softmax = exp(x - m) / sum. When
 * the reduced axes form the innermost run of the input in memory (the last
 * axis of a contiguous array) logsumexp and softmax run row by row instead:
 * each row is read while it is in cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"
#include "prim/reduce.h"
#include "runtime/pool.h"

enum { PAIRWISE_BLOCK = 128, STAGE = 512 };

/* Minimum elements per parallel chunk for cheap (sum-like) and costly
 * (exp-like) reductions. */
enum { CHUNK_CHEAP = 1 << 15, CHUNK_COSTLY = 1 << 12 };

/* ================================================================ pairwise sums */

/* Pairwise summation (as NumPy): 8 partial sums over blocks of up to 128,
 * blocks combined in a balanced tree. */
float wf__cpu_sum_f32(int64_t n, const float *x, int64_t stride)
{
    if (n > PAIRWISE_BLOCK) {
        int64_t half = n / 2;
        half -= half % 8;
        return wf__cpu_sum_f32(half, x, stride) +
               wf__cpu_sum_f32(n - half, x + half * stride, stride);
    }
    float r[8] = {0};
    int64_t i = 0;
    if (stride == 1) { /* a separate loop so that it vectorizes */
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[i + j];
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[(i + j) * stride];
        }
    }
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
        s += x[i * stride];
    return s;
}

double wf__cpu_sum_f64(int64_t n, const double *x, int64_t stride)
{
    if (n > PAIRWISE_BLOCK) {
        int64_t half = n / 2;
        half -= half % 8;
        return wf__cpu_sum_f64(half, x, stride) +
               wf__cpu_sum_f64(n - half, x + half * stride, stride);
    }
    double r[8] = {0};
    int64_t i = 0;
    if (stride == 1) { /* a separate loop so that it vectorizes */
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[i + j];
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[(i + j) * stride];
        }
    }
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
        s += x[i * stride];
    return s;
}

/* Pairwise sum of squared deviations from mu. */
#define SQDEV_PAIRWISE(NAME, T)                                                          \
    static T NAME(int64_t n, const T *x, int64_t stride, T mu)                           \
    {                                                                                    \
        if (n > PAIRWISE_BLOCK) {                                                        \
            int64_t half = n / 2;                                                        \
            half -= half % 8;                                                            \
            return NAME(half, x, stride, mu) + NAME(n - half, x + half * stride, stride, mu); \
        }                                                                                \
        T r[8] = {0};                                                                    \
        int64_t i = 0;                                                                   \
        if (stride == 1) {                                                               \
            for (; i + 8 <= n; i += 8)                                                   \
                for (int j = 0; j < 8; j++) {                                            \
                    T d = x[i + j] - mu;                                                 \
                    r[j] += d * d;                                                       \
                }                                                                        \
        }                                                                                \
        T s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));         \
        for (; i < n; i++) {                                                             \
            T d = x[i * stride] - mu;                                                    \
            s += d * d;                                                                  \
        }                                                                                \
        return s;                                                                        \
    }
SQDEV_PAIRWISE(sqdev_f32, float)
SQDEV_PAIRWISE(sqdev_f64, double)

/* ================================================================ typed loops
 *
 * Operand 0 is the accumulator, operand 1 the input (of the accumulator's
 * dtype unless said otherwise). Three stride patterns: a row reduced into one
 * accumulator (sa == 0; 8 independent partial results in blocks of 8, which
 * GCC vectorizes at -O2), a contiguous row into a contiguous row of
 * accumulators, and the general strided form. Typed bodies take restrict
 * parameters (GCC ignores restrict on local pointers). */

#define RED_LOOP(NAME, T, STEP)                                                          \
    static void NAME##_typed(int64_t n, T *restrict acc, int64_t sa, const T *restrict x, \
                             int64_t sx)                                                 \
    {                                                                                    \
        int64_t i = 0;                                                                   \
        if (sa == 0) {                                                                   \
            T s = *acc;                                                                  \
            if (sx == 1 && n >= 16) {                                                    \
                T r[8];                                                                  \
                for (int j = 0; j < 8; j++)                                              \
                    r[j] = x[j];                                                         \
                for (i = 8; i + 8 <= n; i += 8)                                          \
                    for (int j = 0; j < 8; j++)                                          \
                        r[j] = STEP(r[j], x[i + j]);                                     \
                for (int j = 0; j < 8; j++)                                              \
                    s = STEP(s, r[j]);                                                   \
            }                                                                            \
            for (; i < n; i++)                                                           \
                s = STEP(s, x[i * sx]);                                                  \
            *acc = s;                                                                    \
        } else if (sa == 1 && sx == 1) {                                                 \
            for (; i + 8 <= n; i += 8)                                                   \
                for (int j = 0; j < 8; j++)                                              \
                    acc[i + j] = STEP(acc[i + j], x[i + j]);                             \
            for (; i < n; i++)                                                           \
                acc[i] = STEP(acc[i], x[i]);                                             \
        } else {                                                                         \
            for (; i < n; i++)                                                           \
                acc[i * sa] = STEP(acc[i * sa], x[i * sx]);                              \
        }                                                                                \
    }                                                                                    \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        (void)ctx;                                                                       \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1]);       \
    }

/* Integer sums: input IT into accumulator AT, in unsigned UT so overflow
 * wraps (bool and u8 sum straight into int32). */
#define SUM_INT_LOOP(NAME, IT, AT, UT, WRAP)                                            \
    static void NAME##_typed(int64_t n, AT *restrict acc, int64_t sa, const IT *restrict x, \
                             int64_t sx)                                                \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (sa == 0) {                                                                  \
            UT r[8] = {0};                                                              \
            if (sx == 1) {                                                              \
                for (; i + 8 <= n; i += 8)                                              \
                    for (int j = 0; j < 8; j++)                                         \
                        r[j] += (UT)x[i + j];                                           \
            }                                                                           \
            UT s = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];               \
            for (; i < n; i++)                                                          \
                s += (UT)x[i * sx];                                                     \
            *acc = WRAP((UT)*acc + s);                                                  \
        } else if (sa == 1 && sx == 1) {                                                \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    acc[i + j] = WRAP((UT)acc[i + j] + (UT)x[i + j]);                   \
            for (; i < n; i++)                                                          \
                acc[i] = WRAP((UT)acc[i] + (UT)x[i]);                                   \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                acc[i * sa] = WRAP((UT)acc[i * sa] + (UT)x[i * sx]);                    \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (AT *)ptrs[0], strides[0], (const IT *)ptrs[1], strides[1]);    \
    }

SUM_INT_LOOP(sum_u8, uint8_t, int32_t, uint32_t, wf__cpu_wrap_i32)
SUM_INT_LOOP(sum_i32, int32_t, int32_t, uint32_t, wf__cpu_wrap_i32)
SUM_INT_LOOP(sum_i64, int64_t, int64_t, uint64_t, wf__cpu_wrap_i64)

/* float32 and float64 sums: pairwise when reducing a row to one value. */
#define SUM_FLOAT_LOOP(NAME, T, ROW_SUM)                                                \
    static void NAME##_typed(int64_t n, T *restrict acc, int64_t sa, const T *restrict x, \
                             int64_t sx)                                                \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (sa == 0) {                                                                  \
            *acc += ROW_SUM(n, x, sx);                                                  \
        } else if (sa == 1 && sx == 1) {                                                \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    acc[i + j] += x[i + j];                                             \
            for (; i < n; i++)                                                          \
                acc[i] += x[i];                                                         \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                acc[i * sa] += x[i * sx];                                               \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1]);      \
    }

SUM_FLOAT_LOOP(sum_f32, float, wf__cpu_sum_f32)
SUM_FLOAT_LOOP(sum_f64, double, wf__cpu_sum_f64)

#define PROD_I32(a, x) wf__cpu_wrap_i32((uint32_t)(a) * (uint32_t)(x))
#define PROD_I64(a, x) wf__cpu_wrap_i64((uint64_t)(a) * (uint64_t)(x))
#define PROD_F(a, x) ((a) * (x))
/* NaN propagates: a NaN input is taken, a NaN accumulator kept. */
#define MAX_F(a, x) (((x) > (a) || (x) != (x)) ? (x) : (a))
#define MIN_F(a, x) (((x) < (a) || (x) != (x)) ? (x) : (a))
#define MAX_I(a, x) ((x) > (a) ? (x) : (a))
#define MIN_I(a, x) ((x) < (a) ? (x) : (a))
#define AND_B(a, x) ((uint8_t)((a) & (x)))
#define OR_B(a, x) ((uint8_t)((a) | (x)))

RED_LOOP(prod_i32, int32_t, PROD_I32)
RED_LOOP(prod_i64, int64_t, PROD_I64)
RED_LOOP(prod_f32, float, PROD_F)
RED_LOOP(prod_f64, double, PROD_F)
RED_LOOP(max_u8, uint8_t, MAX_I)
RED_LOOP(max_i32, int32_t, MAX_I)
RED_LOOP(max_i64, int64_t, MAX_I)
RED_LOOP(max_f32, float, MAX_F)
RED_LOOP(max_f64, double, MAX_F)
RED_LOOP(min_u8, uint8_t, MIN_I)
RED_LOOP(min_i32, int32_t, MIN_I)
RED_LOOP(min_i64, int64_t, MIN_I)
RED_LOOP(min_f32, float, MIN_F)
RED_LOOP(min_f64, double, MIN_F)
RED_LOOP(and_b, uint8_t, AND_B)
RED_LOOP(or_b, uint8_t, OR_B)

/* The accumulate operators of the walk. */
enum kop { K_SUM, K_PROD, K_MAX, K_MIN, K_AND, K_OR, K_COUNT };

/* The dtype a plain reduction accumulates in, for input dtype `in`. */
static wf_dtype kop_acc_dtype(enum kop k, wf_dtype in)
{
    const bool half = in == WF_DTYPE_F16 || in == WF_DTYPE_BF16;
    switch (k) {
    case K_SUM:
    case K_PROD:
        if (in == WF_DTYPE_BOOL || in == WF_DTYPE_U8)
            return WF_DTYPE_I32;
        return half ? WF_DTYPE_F32 : in;
    case K_MAX:
    case K_MIN: return half ? WF_DTYPE_F32 : in;
    default: return WF_DTYPE_BOOL;
    }
}

/* The typed loop for operator k with an input of dtype `x` into an
 * accumulator of dtype `at`; NULL if the input must be staged to `at`. */
static wf_cpu_inner_fn kop_loop(enum kop k, wf_dtype x, wf_dtype at)
{
    if (k == K_SUM && at == WF_DTYPE_I32 && (x == WF_DTYPE_BOOL || x == WF_DTYPE_U8))
        return sum_u8;
    if (x != at)
        return NULL;
    const bool byte = at == WF_DTYPE_BOOL || at == WF_DTYPE_U8;
    switch (k) {
    case K_SUM:
        return at == WF_DTYPE_I32   ? sum_i32
               : at == WF_DTYPE_I64 ? sum_i64
               : at == WF_DTYPE_F32 ? sum_f32
               : at == WF_DTYPE_F64 ? sum_f64
                                    : NULL;
    case K_PROD:
        return at == WF_DTYPE_I32   ? prod_i32
               : at == WF_DTYPE_I64 ? prod_i64
               : at == WF_DTYPE_F32 ? prod_f32
               : at == WF_DTYPE_F64 ? prod_f64
                                    : NULL;
    case K_MAX:
        return byte                 ? max_u8
               : at == WF_DTYPE_I32 ? max_i32
               : at == WF_DTYPE_I64 ? max_i64
               : at == WF_DTYPE_F32 ? max_f32
               : at == WF_DTYPE_F64 ? max_f64
                                    : NULL;
    case K_MIN:
        return byte                 ? min_u8
               : at == WF_DTYPE_I32 ? min_i32
               : at == WF_DTYPE_I64 ? min_i64
               : at == WF_DTYPE_F32 ? min_f32
               : at == WF_DTYPE_F64 ? min_f64
                                    : NULL;
    case K_AND: return at == WF_DTYPE_BOOL ? and_b : NULL;
    case K_OR: return at == WF_DTYPE_BOOL ? or_b : NULL;
    default: return NULL;
    }
}

/* Fills n accumulators of dtype `at` with operator k's identity (max and
 * min start from the lowest / highest value). */
static void kop_fill_identity(enum kop k, wf_dtype at, void *acc, int64_t n)
{
#define FILL(T, V)                                                                       \
    do {                                                                                 \
        T *p_ = acc;                                                                     \
        for (int64_t i_ = 0; i_ < n; i_++)                                               \
            p_[i_] = (V);                                                                \
    } while (0)
    switch (at) {
    case WF_DTYPE_BOOL:
        FILL(uint8_t, k == K_AND || k == K_MIN ? 1 : 0);
        break;
    case WF_DTYPE_U8:
        FILL(uint8_t, k == K_MIN ? 255 : 0);
        break;
    case WF_DTYPE_I32:
        FILL(int32_t, k == K_SUM    ? 0
                      : k == K_PROD ? 1
                      : k == K_MAX  ? INT32_MIN
                                    : INT32_MAX);
        break;
    case WF_DTYPE_I64:
        FILL(int64_t, k == K_SUM    ? 0
                      : k == K_PROD ? 1
                      : k == K_MAX  ? INT64_MIN
                                    : INT64_MAX);
        break;
    case WF_DTYPE_F32:
        FILL(float, k == K_SUM ? 0.0f : k == K_PROD ? 1.0f : k == K_MAX ? -INFINITY : INFINITY);
        break;
    default:
        FILL(double, k == K_SUM ? 0.0 : k == K_PROD ? 1.0 : k == K_MAX ? -INFINITY : INFINITY);
        break;
    }
#undef FILL
}

/* dst[i] = dst[i] (k) src[i]: combines partial accumulators. */
static void kop_combine(enum kop k, wf_dtype at, void *dst, const void *src, int64_t n)
{
    wf_cpu_inner_fn fn = kop_loop(k, at, at);
    char *ptrs[2] = {dst, (char *)src};
    const int64_t strides[2] = {1, 1};
    fn(n, ptrs, strides, NULL);
}

/* ================================================================ staging */

/* Context of a walk's inner function. The typed loop sees every operand in
 * the compute dtype `at`: operand `xop` (an input, dtype xdt) is converted
 * into a stack block first, operand `oop` (an output, dtype odt) is written
 * to a stack block and converted back (read first if `oread`). */
typedef struct rctx {
    wf_cpu_inner_fn typed;
    int xop, oop; /* -1: none */
    bool oread;
    wf_dtype xdt, odt, at;
    size_t item[WF_CPU_MAX_OPERANDS]; /* stored bytes per element */
    /* Extras read by some typed loops. */
    int64_t k;      /* argmax: index along the axis */
    bool flag;      /* argmin instead of argmax */
} rctx;

static void staged(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const rctx *c = ctx;
    if (c->xop < 0 && c->oop < 0) {
        c->typed(n, ptrs, strides, ctx);
        return;
    }
    double xb[STAGE], ob[STAGE]; /* room for STAGE elements of any dtype */
    char *p[WF_CPU_MAX_OPERANDS];
    int64_t s[WF_CPU_MAX_OPERANDS];
    const int nops = WF_CPU_MAX_OPERANDS;
    for (int64_t i0 = 0; i0 < n; i0 += STAGE) {
        const int64_t m = n - i0 < STAGE ? n - i0 : STAGE;
        for (int k = 0; k < nops; k++) {
            p[k] = c->item[k] ? ptrs[k] + i0 * strides[k] * (int64_t)c->item[k] : NULL;
            s[k] = c->item[k] ? strides[k] : 0;
        }
        char *odst = NULL;
        int64_t os = 0;
        if (c->xop >= 0) {
            wf__cpu_convert_1d(m, p[c->xop], c->xdt, s[c->xop], xb, c->at, 1);
            p[c->xop] = (char *)xb;
            s[c->xop] = 1;
        }
        if (c->oop >= 0) {
            odst = p[c->oop];
            os = s[c->oop];
            if (c->oread)
                wf__cpu_convert_1d(m, odst, c->odt, os, ob, c->at, 1);
            p[c->oop] = (char *)ob;
            s[c->oop] = 1;
        }
        c->typed(m, p, s, ctx);
        if (c->oop >= 0)
            wf__cpu_convert_1d(m, ob, c->at, 1, odst, c->odt, os);
    }
}

/* ================================================================ walks */

#define L_ACC WF_CPU_LAYOUT_ACC
#define L_FULL WF_CPU_LAYOUT_FULL
#define L_IN WF_CPU_LAYOUT_IN

/* Builds the walk over `in`'s shape in its memory order. Operand k has
 * layout[k]: L_ACC (row-major over the kept axes, stride 0 on reduced ones),
 * L_FULL (row-major over the whole shape: an output like the input), L_IN
 * (the input's own strides). */
static void build_walk(wf_cpu_iter *it, const wf_array *in, uint64_t axes, int nops,
                       char *const *data, const size_t *items, const enum wf_cpu_layout *layout)
{
    int64_t acc_st[WF_MAX_NDIM], full_st[WF_MAX_NDIM];
    int64_t s = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        const bool reduced = (axes >> d) & 1u;
        acc_st[d] = reduced ? 0 : s;
        if (!reduced)
            s *= in->shape[d];
    }
    wf__contiguous_strides(in->shape, in->ndim, full_st);
    int perm[WF_MAX_NDIM];
    int64_t shape[WF_MAX_NDIM], st[WF_CPU_MAX_OPERANDS][WF_MAX_NDIM];
    wf__cpu_dims_by_stride(in->ndim, in->strides, perm);
    for (int d = 0; d < in->ndim; d++) {
        shape[d] = in->shape[perm[d]];
        for (int k = 0; k < nops; k++) {
            const int64_t *src = layout[k] == L_ACC    ? acc_st
                                 : layout[k] == L_FULL ? full_st
                                                       : in->strides;
            st[k][d] = src[perm[d]];
        }
    }
    const int64_t *strides[WF_CPU_MAX_OPERANDS];
    for (int k = 0; k < nops; k++)
        strides[k] = st[k];
    wf__cpu_iter_init(it, in->ndim, shape, nops, data, items, strides);
}

int64_t wf__cpu_iter_count(const wf_cpu_iter *it)
{
    if (it->empty)
        return 0;
    int64_t total = 1;
    for (int d = 0; d < it->ndim; d++)
        total *= it->shape[d];
    return total;
}

int wf__cpu_pick_split_dim(const wf_cpu_iter *it, int written, int64_t want)
{
    int best = -1;
    for (int d = 0; d < it->ndim; d++) {
        bool ok = true;
        for (int k = 0; k < it->nops; k++)
            if ((written < 0 || k == written) && it->strides[k][d] == 0)
                ok = false;
        if (!ok)
            continue;
        if (it->shape[d] >= want)
            return d;
        if (best < 0 || it->shape[d] > it->shape[best])
            best = d;
    }
    return best;
}

bool wf__cpu_wants_tiling(const wf_cpu_iter *it)
{
    if (it->empty || it->ndim < 2)
        return false;
    const int last = it->ndim - 1;
    for (int k = 0; k < it->nops; k++) {
        const int64_t s = it->strides[k][last] < 0 ? -it->strides[k][last] : it->strides[k][last];
        if (s < WF_CPU_TILE_STRIDE)
            continue;
        for (int d = 0; d < last; d++) {
            const int64_t o = it->strides[k][d] < 0 ? -it->strides[k][d] : it->strides[k][d];
            if (o < s)
                return true;
        }
    }
    return false;
}

void wf__cpu_iter_run_tiled(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx)
{
    if (!wf__cpu_wants_tiling(it)) {
        wf__cpu_iter_run(it, fn, ctx);
        return;
    }
    const int last = it->ndim - 1;
    wf_cpu_iter sub = *it;
    for (int64_t b = 0; b < it->shape[last]; b += WF_CPU_TILE) {
        sub.shape[last] = it->shape[last] - b < WF_CPU_TILE ? it->shape[last] - b : WF_CPU_TILE;
        for (int k = 0; k < it->nops; k++)
            sub.data[k] = it->data[k] + b * it->strides[k][last] * (int64_t)it->itemsize[k];
        wf__cpu_iter_run(&sub, fn, ctx);
    }
}

struct split_ctx {
    const wf_cpu_iter *it;
    int dim;
    wf_cpu_walk_body body;
    void *arg;
};

static void split_chunk(void *p, int64_t begin, int64_t end)
{
    const struct split_ctx *s = p;
    wf_cpu_iter sub = *s->it;
    sub.shape[s->dim] = end - begin;
    for (int k = 0; k < sub.nops; k++)
        sub.data[k] += begin * sub.strides[k][s->dim] * (int64_t)sub.itemsize[k];
    s->body(&sub, s->arg);
}

void wf__cpu_split_run(const wf_cpu_iter *it, int dim, int64_t min_chunk, wf_cpu_walk_body body,
                       void *arg)
{
    struct split_ctx s = {it, dim, body, arg};
    wf__parallel_for(it->shape[dim], min_chunk, split_chunk, &s);
}

/* A reduction walk to run: `acc_op` is the operand written as an
 * accumulator (-1: none; every operand then has non-zero strides), reduced
 * with operator `k` in dtype `at` over `acc_count` elements. */
typedef struct rjob {
    wf_cpu_iter it;
    wf_cpu_inner_fn fn;
    const rctx *ctx;
    int acc_op;
    enum kop k;
    wf_dtype at;
    int64_t acc_count;
    int64_t min_chunk;
} rjob;

static void run_body(const wf_cpu_iter *sub, void *arg)
{
    const rjob *j = arg;
    wf__cpu_iter_run_tiled(sub, j->fn, j->ctx);
}

struct partial_arg {
    const rjob *job;
    int dim;
    int64_t parts;
    char *priv; /* parts - 1 private accumulators */
};

static void run_part(void *p, int64_t begin, int64_t end)
{
    const struct partial_arg *a = p;
    const rjob *j = a->job;
    const int64_t len = j->it.shape[a->dim];
    const size_t acc_bytes = (size_t)j->acc_count * wf_dtype_size(j->at);
    for (int64_t part = begin; part < end; part++) {
        const int64_t lo = len * part / a->parts, hi = len * (part + 1) / a->parts;
        wf_cpu_iter sub = j->it;
        sub.shape[a->dim] = hi - lo;
        for (int k = 0; k < sub.nops; k++)
            sub.data[k] += lo * sub.strides[k][a->dim] * (int64_t)sub.itemsize[k];
        if (part > 0)
            sub.data[j->acc_op] = a->priv + (size_t)(part - 1) * acc_bytes;
        wf__cpu_iter_run_tiled(&sub, j->fn, j->ctx);
    }
}

/* Runs a reduction walk, in parallel when it is large (see the top). The
 * accumulator operand must start at its buffer's first element. */
static void drive(const rjob *j)
{
    const wf_cpu_iter *it = &j->it;
    const int64_t total = wf__cpu_iter_count(it);
    if (total == 0)
        return;
    const int threads = wf__pool_size();
    if (threads <= 1 || it->ndim == 0 || total < 2 * j->min_chunk) {
        wf__cpu_iter_run_tiled(it, j->fn, j->ctx);
        return;
    }
    const int kd = wf__cpu_pick_split_dim(it, j->acc_op, 2 * (int64_t)threads);
    const bool kept_ok = kd >= 0 && it->shape[kd] >= threads && kd != it->ndim - 1;
    if (!kept_ok && j->acc_op >= 0) {
        /* The largest reduced dim, split into private partial accumulators. */
        int rd = -1;
        for (int d = 0; d < it->ndim; d++)
            if (it->strides[j->acc_op][d] == 0 && (rd < 0 || it->shape[d] > it->shape[rd]))
                rd = d;
        int64_t parts = 2 * (int64_t)threads;
        if (rd >= 0 && parts > it->shape[rd])
            parts = it->shape[rd];
        if (rd >= 0 && parts > total / j->min_chunk)
            parts = total / j->min_chunk;
        if (rd >= 0 && parts >= 2 && j->acc_count * parts <= total / 4) {
            const size_t acc_bytes = (size_t)j->acc_count * wf_dtype_size(j->at);
            char *priv = malloc(acc_bytes * (size_t)(parts - 1) + 1);
            if (priv != NULL) {
                for (int64_t p = 0; p < parts - 1; p++)
                    kop_fill_identity(j->k, j->at, priv + (size_t)p * acc_bytes, j->acc_count);
                struct partial_arg a = {j, rd, parts, priv};
                wf__parallel_for(parts, 1, run_part, &a);
                for (int64_t p = 0; p < parts - 1; p++)
                    kop_combine(j->k, j->at, it->data[j->acc_op], priv + (size_t)p * acc_bytes,
                                j->acc_count);
                free(priv);
                return;
            }
        }
    }
    if (kd >= 0) {
        const int64_t per_index = total / it->shape[kd];
        int64_t min_chunk = j->min_chunk / (per_index > 0 ? per_index : 1);
        wf__cpu_split_run(it, kd, min_chunk > 0 ? min_chunk : 1, run_body, (void *)j);
        return;
    }
    wf__cpu_iter_run_tiled(it, j->fn, j->ctx);
}

/* Sets up and runs a plain reduction of `in` with operator k into the
 * accumulator `acc` of dtype `at` (filled with the identity here). */
static void reduce_into(const wf_array *in, uint64_t axes, enum kop k, wf_dtype at, void *acc,
                        int64_t acc_count)
{
    kop_fill_identity(k, at, acc, acc_count);
    rctx c;
    memset(&c, 0, sizeof c);
    c.at = at;
    c.xop = -1;
    c.oop = -1;
    c.typed = kop_loop(k, in->dtype, at);
    if (c.typed == NULL) {
        c.typed = kop_loop(k, at, at);
        c.xop = 1;
        c.xdt = in->dtype;
    }
    c.item[0] = wf_dtype_size(at);
    c.item[1] = wf_dtype_size(in->dtype);
    rjob j;
    memset(&j, 0, sizeof j);
    char *data[2] = {acc, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay[2] = {L_ACC, L_IN};
    build_walk(&j.it, in, axes, 2, data, c.item, lay);
    j.fn = staged;
    j.ctx = &c;
    j.acc_op = 0;
    j.k = k;
    j.at = at;
    j.acc_count = acc_count;
    j.min_chunk = CHUNK_CHEAP;
    drive(&j);
}

/* Number of input elements reduced into each output element. */
static int64_t reduced_count(const wf_array *in, uint64_t axes)
{
    int64_t n = 1;
    for (int d = 0; d < in->ndim; d++)
        if ((axes >> d) & 1u)
            n *= in->shape[d];
    return n;
}

/* A scratch accumulator of n elements of `at` (NULL + error recorded). */
static wf_buffer *scratch(int64_t n, wf_dtype at)
{
    return wf__buffer_alloc((size_t)n * wf_dtype_size(at) + 8);
}

/* ================================================================ composite passes */

/* Pass 2 of var: acc += (x - mean)^2, operands [acc, mean, x]. */
#define VAR_LOOP(NAME, T, SQDEV)                                                         \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        (void)ctx;                                                                       \
        T *restrict acc = (T *)ptrs[0];                                                  \
        const T *restrict mu = (const T *)ptrs[1];                                       \
        const T *restrict x = (const T *)ptrs[2];                                        \
        const int64_t sa = strides[0], sm = strides[1], sx = strides[2];                 \
        if (sa == 0) {                                                                   \
            *acc += SQDEV(n, x, sx, *mu);                                                \
            return;                                                                      \
        }                                                                                \
        int64_t i = 0;                                                                   \
        if (sa == 1 && sm == 1 && sx == 1) {                                             \
            for (; i + 8 <= n; i += 8)                                                   \
                for (int j = 0; j < 8; j++) {                                            \
                    T d = x[i + j] - mu[i + j];                                          \
                    acc[i + j] += d * d;                                                 \
                }                                                                        \
        }                                                                                \
        for (; i < n; i++) {                                                             \
            T d = x[i * sx] - mu[i * sm];                                                \
            acc[i * sa] += d * d;                                                        \
        }                                                                                \
    }
VAR_LOOP(var_f32, float, sqdev_f32)
VAR_LOOP(var_f64, double, sqdev_f64)

/* The shift logsumexp and softmax subtract: the max, or 0 when the max is
 * infinite (all -inf, or a +inf present) so that no inf - inf appears. */
static inline float shift_f32(float m) { return isinf(m) ? 0.0f : m; }
static inline double shift_f64(double m) { return isinf(m) ? 0.0 : m; }

static void exp_block_f64(int64_t n, const double *restrict x, double *restrict y)
{
    wf__cpu_exp_f64(n, x, y);
}
static void exp_block_f32(int64_t n, const float *restrict x, float *restrict y)
{
    wf__cpu_exp_f32(n, x, y);
}

/* t[i] = x[i * sx] - shift(m[i * sm]) for one stage of `len` elements: the
 * first step of pass 2 of logsumexp and of softmax alike. */
#define SHIFTED_STAGE(NAME, T, SHIFT)                                                    \
    static inline void NAME(int64_t len, const T *x, int64_t sx, const T *m, int64_t sm, \
                            T *t)                                                        \
    {                                                                                    \
        if (sm == 0) {                                                                   \
            const T sh = SHIFT(*m);                                                      \
            if (sx == 1)                                                                 \
                for (int64_t i = 0; i < len; i++)                                        \
                    t[i] = x[i] - sh;                                                    \
            else                                                                         \
                for (int64_t i = 0; i < len; i++)                                        \
                    t[i] = x[i * sx] - sh;                                               \
        } else if (sm == 1 && sx == 1) {                                                 \
            for (int64_t i = 0; i < len; i++)                                            \
                t[i] = x[i] - SHIFT(m[i]);                                               \
        } else {                                                                         \
            for (int64_t i = 0; i < len; i++)                                            \
                t[i] = x[i * sx] - SHIFT(m[i * sm]);                                     \
        }                                                                                \
    }
SHIFTED_STAGE(shifted_f32, float, shift_f32)
SHIFTED_STAGE(shifted_f64, double, shift_f64)

/* Pass 2 of logsumexp: acc += exp(x - shift(m)), operands [acc, m, x]. */
#define LSE_LOOP(NAME, T, SHIFTED, EXP, ROW_SUM)                                           \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        (void)ctx;                                                                       \
        T *acc = (T *)ptrs[0];                                                           \
        const T *m = (const T *)ptrs[1];                                                 \
        const T *x = (const T *)ptrs[2];                                                 \
        const int64_t sa = strides[0], sm = strides[1], sx = strides[2];                 \
        T t[STAGE], e[STAGE];                                                            \
        for (int64_t i0 = 0; i0 < n; i0 += STAGE) {                                      \
            const int64_t len = n - i0 < STAGE ? n - i0 : STAGE;                         \
            SHIFTED(len, x + i0 * sx, sx, m + i0 * sm, sm, t);                          \
            EXP(len, t, e);                                                              \
            if (sa == 0) {                                                               \
                *acc += ROW_SUM(len, e, 1);                                              \
            } else {                                                                     \
                T *ab = acc + i0 * sa;                                                   \
                for (int64_t i = 0; i < len; i++)                                        \
                    ab[i * sa] += e[i];                                                  \
            }                                                                            \
        }                                                                                \
    }
LSE_LOOP(lse_f32, float, shifted_f32, exp_block_f32, wf__cpu_sum_f32)
LSE_LOOP(lse_f64, double, shifted_f64, exp_block_f64, wf__cpu_sum_f64)

/* Pass 2 of softmax: out = exp(x - shift(m)); s += out. Operands
 * [out, s, m, x]. */
#define SOFTMAX_EXP_LOOP(NAME, T, SHIFTED, EXP, ROW_SUM)                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        (void)ctx;                                                                       \
        T *out = (T *)ptrs[0];                                                           \
        T *s = (T *)ptrs[1];                                                             \
        const T *m = (const T *)ptrs[2];                                                 \
        const T *x = (const T *)ptrs[3];                                                 \
        const int64_t so = strides[0], ss = strides[1], sm = strides[2], sx = strides[3]; \
        T t[STAGE], e[STAGE];                                                            \
        for (int64_t i0 = 0; i0 < n; i0 += STAGE) {                                      \
            const int64_t len = n - i0 < STAGE ? n - i0 : STAGE;                         \
            T *ob = out + i0 * so;                                                       \
            SHIFTED(len, x + i0 * sx, sx, m + i0 * sm, sm, t);                          \
            if (so == 1) {                                                               \
                EXP(len, t, ob);                                                         \
                if (ss == 0)                                                             \
                    *s += ROW_SUM(len, ob, 1);                                           \
                else                                                                     \
                    for (int64_t i = 0; i < len; i++)                                    \
                        s[(i0 + i) * ss] += ob[i];                                       \
            } else {                                                                     \
                EXP(len, t, e);                                                          \
                for (int64_t i = 0; i < len; i++)                                        \
                    ob[i * so] = e[i];                                                   \
                if (ss == 0)                                                             \
                    *s += ROW_SUM(len, e, 1);                                            \
                else                                                                     \
                    for (int64_t i = 0; i < len; i++)                                    \
                        s[(i0 + i) * ss] += e[i];                                        \
            }                                                                            \
        }                                                                                \
    }
SOFTMAX_EXP_LOOP(softmax_exp_f32, float, shifted_f32, exp_block_f32, wf__cpu_sum_f32)
SOFTMAX_EXP_LOOP(softmax_exp_f64, double, shifted_f64, exp_block_f64, wf__cpu_sum_f64)

/* Pass 3 of softmax: out /= s. Operands [out, s]. */
#define SOFTMAX_SCALE_LOOP(NAME, T)                                                      \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        (void)ctx;                                                                       \
        T *restrict out = (T *)ptrs[0];                                                  \
        const T *restrict s = (const T *)ptrs[1];                                        \
        const int64_t so = strides[0], ss = strides[1];                                  \
        int64_t i = 0;                                                                   \
        if (ss == 0) {                                                                   \
            const T inv = (T)1 / *s;                                                     \
            if (so == 1)                                                                 \
                for (; i + 8 <= n; i += 8)                                               \
                    for (int j = 0; j < 8; j++)                                          \
                        out[i + j] *= inv;                                               \
            for (; i < n; i++)                                                           \
                out[i * so] *= inv;                                                      \
        } else {                                                                         \
            if (so == 1 && ss == 1)                                                      \
                for (; i + 8 <= n; i += 8)                                               \
                    for (int j = 0; j < 8; j++)                                          \
                        out[i + j] /= s[i + j];                                          \
            for (; i < n; i++)                                                           \
                out[i * so] /= s[i * ss];                                                \
        }                                                                                \
    }
SOFTMAX_SCALE_LOOP(softmax_scale_f32, float)
SOFTMAX_SCALE_LOOP(softmax_scale_f64, double)

/* ================================================================ finalizers */

struct finalize_arg {
    int op; /* wf_reduce_op */
    wf_dtype at;
    void *acc;       /* the result of the last pass */
    const void *aux; /* MEAN: unused; LOGSUMEXP: the max */
    double n;        /* elements reduced; VAR/STD: the divisor */
    bool nan;        /* every output is NaN (mean of nothing) */
};

#define FINALIZE_BODY(T, SQRT, LOG, SHIFT)                                               \
    do {                                                                                 \
        T *acc = a->acc;                                                                 \
        const T *aux = a->aux;                                                           \
        const T n = (T)a->n;                                                             \
        switch (a->op) {                                                                 \
        case WF_REDUCE_MEAN:                                                             \
            for (int64_t i = begin; i < end; i++)                                        \
                acc[i] = a->nan ? (T)NAN : acc[i] / n;                                   \
            break;                                                                       \
        case WF_REDUCE_VAR:                                                              \
            for (int64_t i = begin; i < end; i++)                                        \
                acc[i] = a->nan ? (T)NAN : acc[i] / n;                                   \
            break;                                                                       \
        case WF_REDUCE_STD:                                                              \
            for (int64_t i = begin; i < end; i++)                                        \
                acc[i] = a->nan ? (T)NAN : SQRT(acc[i] / n);                             \
            break;                                                                       \
        default: /* LOGSUMEXP */                                                         \
            for (int64_t i = begin; i < end; i++)                                        \
                acc[i] = SHIFT(aux[i]) + LOG(acc[i]);                                    \
            break;                                                                       \
        }                                                                                \
    } while (0)

static void finalize_chunk(void *p, int64_t begin, int64_t end)
{
    const struct finalize_arg *a = p;
    if (a->at == WF_DTYPE_F64)
        FINALIZE_BODY(double, sqrt, log, shift_f64);
    else
        FINALIZE_BODY(float, sqrtf, logf, shift_f32);
}

/* ================================================================ kernels */

static enum kop plain_kop(int op)
{
    switch (op) {
    case WF_REDUCE_PROD: return K_PROD;
    case WF_REDUCE_MAX: return K_MAX;
    case WF_REDUCE_MIN: return K_MIN;
    case WF_REDUCE_ALL: return K_AND;
    case WF_REDUCE_ANY: return K_OR;
    default: return K_SUM;
    }
}

/* Writes the accumulator (dtype at, contiguous) into out. */
static void store_result(wf_array *out, const void *acc, wf_dtype at)
{
    wf__cpu_convert_1d(out->size, acc, at, 1, wf__array_data_ptr(out), out->dtype, 1);
}

/* Is the walk `it` "row mode": its innermost dim is the only one where
 * operand `acc_op` has stride 0 (each inner call reduces whole rows)? */
static bool row_mode(const wf_cpu_iter *it, int acc_op)
{
    if (it->empty || it->ndim == 0)
        return false;
    const int last = it->ndim - 1;
    if (it->strides[acc_op][last] != 0)
        return false;
    for (int d = 0; d < last; d++)
        if (it->strides[acc_op][d] == 0)
            return false;
    return true;
}

/* One value of any compute dtype. */
union scalar {
    uint8_t u8;
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
};

/* Row-mode context: each element of the rows walk is a row of `len`
 * elements with operand strides `rs`. */
typedef struct rows_ctx {
    int64_t len;
    int64_t rs[WF_CPU_MAX_OPERANDS];
    size_t item[WF_CPU_MAX_OPERANDS];
    int nops;
    void (*row)(const struct rows_ctx *c, char *const *ptrs);
    wf_cpu_inner_fn max_fn, pass2_fn, scale_fn;
    const rctx *max_ctx, *pass2_ctx, *scale_ctx;
    wf_dtype at;
} rows_ctx;

static void rows_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const rows_ctx *c = ctx;
    char *p[WF_CPU_MAX_OPERANDS];
    for (int64_t r = 0; r < n; r++) {
        for (int k = 0; k < c->nops; k++)
            p[k] = ptrs[k] + r * strides[k] * (int64_t)c->item[k];
        c->row(c, p);
    }
}

/* Drops the innermost dim of `it` (the rows) into a walk over rows. */
static void rows_walk(const wf_cpu_iter *it, wf_cpu_iter *rows, rows_ctx *c)
{
    *rows = *it;
    const int last = it->ndim - 1;
    c->len = it->shape[last];
    c->nops = it->nops;
    for (int k = 0; k < it->nops; k++) {
        c->rs[k] = it->strides[k][last];
        c->item[k] = it->itemsize[k];
    }
    rows->ndim = last;
}

/* Max of one row into a local accumulator of dtype at. */
static void row_max(const rows_ctx *c, char *x, int64_t sx, void *m)
{
    kop_fill_identity(K_MAX, c->at, m, 1);
    char *p[WF_CPU_MAX_OPERANDS] = {m, x};
    int64_t s[WF_CPU_MAX_OPERANDS] = {0, sx};
    c->max_fn(c->len, p, s, c->max_ctx);
}

/* logsumexp of one row: operands [out (at), x]. */
static void lse_row(const rows_ctx *c, char *const *ptrs)
{
    union scalar m, s;
    row_max(c, ptrs[1], c->rs[1], &m);
    kop_fill_identity(K_SUM, c->at, &s, 1);
    char *p[WF_CPU_MAX_OPERANDS] = {(char *)&s, (char *)&m, ptrs[1]};
    int64_t st[WF_CPU_MAX_OPERANDS] = {0, 0, c->rs[1]};
    c->pass2_fn(c->len, p, st, c->pass2_ctx);
    if (c->at == WF_DTYPE_F64)
        *(double *)ptrs[0] = shift_f64(m.f64) + log(s.f64);
    else
        *(float *)ptrs[0] = shift_f32(m.f32) + logf(s.f32);
}

/* softmax of one row: operands [out, x]. */
static void softmax_row(const rows_ctx *c, char *const *ptrs)
{
    union scalar m, s;
    row_max(c, ptrs[1], c->rs[1], &m);
    kop_fill_identity(K_SUM, c->at, &s, 1);
    char *p[WF_CPU_MAX_OPERANDS] = {ptrs[0], (char *)&s, (char *)&m, ptrs[1]};
    int64_t st[WF_CPU_MAX_OPERANDS] = {c->rs[0], 0, 0, c->rs[1]};
    c->pass2_fn(c->len, p, st, c->pass2_ctx);
    char *q[WF_CPU_MAX_OPERANDS] = {ptrs[0], (char *)&s};
    int64_t qs[WF_CPU_MAX_OPERANDS] = {c->rs[0], 0};
    c->scale_fn(c->len, q, qs, c->scale_ctx);
}

/* Runs a rows walk in parallel (chunks of whole rows). */
static void run_rows(const wf_cpu_iter *rows, const rows_ctx *c, int64_t min_elems)
{
    int64_t per = min_elems / (c->len > 0 ? c->len : 1);
    wf__cpu_iter_run_parallel(rows, rows_inner, c, per > 0 ? per : 1);
}

static void init_rctx(rctx *c, wf_cpu_inner_fn typed, wf_dtype at)
{
    memset(c, 0, sizeof *c);
    c->typed = typed;
    c->at = at;
    c->xop = -1;
    c->oop = -1;
}

/* max / staged max context for input dtype xdt into at. */
static void max_rctx(rctx *c, wf_dtype xdt, wf_dtype at)
{
    init_rctx(c, kop_loop(K_MAX, at, at), at);
    c->item[0] = wf_dtype_size(at);
    c->item[1] = wf_dtype_size(xdt);
    if (xdt != at) {
        c->xop = 1;
        c->xdt = xdt;
    }
}

static wf_status reduce_lse(wf_array *out, const wf_array *in, uint64_t axes, wf_dtype at,
                            void *acc, int64_t count)
{
    /* Pass 2 context: [acc, m, x] with x staged. */
    rctx c2;
    init_rctx(&c2, at == WF_DTYPE_F64 ? lse_f64 : lse_f32, at);
    c2.item[0] = c2.item[1] = wf_dtype_size(at);
    c2.item[2] = wf_dtype_size(in->dtype);
    if (in->dtype != at) {
        c2.xop = 2;
        c2.xdt = in->dtype;
    }
    rctx cm;
    max_rctx(&cm, in->dtype, at);

    /* Row mode: [acc, x]. */
    wf_cpu_iter it;
    char *data2[2] = {acc, wf__array_data_ptr(in)};
    const size_t items2[2] = {wf_dtype_size(at), wf_dtype_size(in->dtype)};
    const enum wf_cpu_layout lay2[2] = {L_ACC, L_IN};
    build_walk(&it, in, axes, 2, data2, items2, lay2);
    const int64_t total = wf__cpu_iter_count(&it);
    const int threads = wf__pool_size();
    if (row_mode(&it, 0) &&
        (it.shape[it.ndim - 1] <= 1 << 16 || count >= threads || total < 2 * CHUNK_COSTLY)) {
        wf_cpu_iter rows;
        rows_ctx rc;
        memset(&rc, 0, sizeof rc);
        rows_walk(&it, &rows, &rc);
        rc.row = lse_row;
        rc.at = at;
        rc.max_fn = staged;
        rc.max_ctx = &cm;
        rc.pass2_fn = staged;
        rc.pass2_ctx = &c2;
        run_rows(&rows, &rc, CHUNK_COSTLY);
        return WF_OK;
    }
    /* General: max pass, then the sum of exponentials. */
    wf_buffer *mb = scratch(count, at);
    if (mb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    reduce_into(in, axes, K_MAX, at, mb->data, count);
    kop_fill_identity(K_SUM, at, acc, count);
    rjob j;
    memset(&j, 0, sizeof j);
    char *data3[3] = {acc, mb->data, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay3[3] = {L_ACC, L_ACC, L_IN};
    build_walk(&j.it, in, axes, 3, data3, c2.item, lay3);
    j.fn = staged;
    j.ctx = &c2;
    j.acc_op = 0;
    j.k = K_SUM;
    j.at = at;
    j.acc_count = count;
    j.min_chunk = CHUNK_COSTLY;
    drive(&j);
    struct finalize_arg fa = {WF_REDUCE_LOGSUMEXP, at, acc, mb->data, 0, false};
    wf__parallel_for(count, CHUNK_CHEAP, finalize_chunk, &fa);
    wf__buffer_release(mb);
    (void)out;
    return WF_OK;
}

wf_status wf__cpu_reduce(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_reduce_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    const int64_t count = out->size;
    if (count == 0)
        return WF_OK;
    const int op = p->op;
    const bool composite = op == WF_REDUCE_MEAN || op == WF_REDUCE_VAR || op == WF_REDUCE_STD ||
                           op == WF_REDUCE_LOGSUMEXP;
    const wf_dtype at = composite ? (in->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32)
                                  : kop_acc_dtype(plain_kop(op), in->dtype);
    wf_buffer *accb = NULL;
    void *acc = wf__array_data_ptr(out);
    if (at != out->dtype) {
        accb = scratch(count, at);
        if (accb == NULL)
            return WF_ERR_OUT_OF_MEMORY;
        acc = accb->data;
    }
    const int64_t n = reduced_count(in, p->axes);
    if (!composite) {
        reduce_into(in, p->axes, plain_kop(op), at, acc, count);
    } else if (op == WF_REDUCE_LOGSUMEXP) {
        st = reduce_lse(out, in, p->axes, at, acc, count);
    } else {
        reduce_into(in, p->axes, K_SUM, at, acc, count);
        struct finalize_arg fa = {WF_REDUCE_MEAN, at, acc, NULL, (double)n, n == 0};
        wf__parallel_for(count, CHUNK_CHEAP, finalize_chunk, &fa);
        if (op != WF_REDUCE_MEAN && n > 0) {
            /* Pass 2: sum of squared deviations from the mean. */
            wf_buffer *mb = scratch(count, at);
            if (mb == NULL) {
                wf__buffer_release(accb);
                return WF_ERR_OUT_OF_MEMORY;
            }
            memcpy(mb->data, acc, (size_t)count * wf_dtype_size(at));
            kop_fill_identity(K_SUM, at, acc, count);
            rctx c;
            init_rctx(&c, at == WF_DTYPE_F64 ? var_f64 : var_f32, at);
            c.item[0] = c.item[1] = wf_dtype_size(at);
            c.item[2] = wf_dtype_size(in->dtype);
            if (in->dtype != at) {
                c.xop = 2;
                c.xdt = in->dtype;
            }
            rjob j;
            memset(&j, 0, sizeof j);
            char *data[3] = {acc, mb->data, wf__array_data_ptr(in)};
            const enum wf_cpu_layout lay[3] = {L_ACC, L_ACC, L_IN};
            build_walk(&j.it, in, p->axes, 3, data, c.item, lay);
            j.fn = staged;
            j.ctx = &c;
            j.acc_op = 0;
            j.k = K_SUM;
            j.at = at;
            j.acc_count = count;
            j.min_chunk = CHUNK_CHEAP;
            drive(&j);
            wf__buffer_release(mb);
            const double denom = (double)n - (double)p->ddof;
            struct finalize_arg fv = {op, at, acc, NULL, denom > 0 ? denom : 0, false};
            wf__parallel_for(count, CHUNK_CHEAP, finalize_chunk, &fv);
        } else if (op != WF_REDUCE_MEAN) {
            /* var of nothing: NaN (already written by the mean pass). */
        }
    }
    if (accb != NULL) {
        if (st == WF_OK)
            store_result(out, acc, at);
        wf__buffer_release(accb);
    }
    return st;
}

/* ---------------------------------------------------------------- sum */

wf_status wf__cpu_sum(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    const wf_sum_params *sp = params;
    wf_reduce_params p;
    memset(&p, 0, sizeof p);
    p.op = WF_REDUCE_SUM;
    p.axes = sp->axes;
    p.keepdims = sp->keepdims;
    return wf__cpu_reduce(out, inputs, ninputs, &p);
}

/* ---------------------------------------------------------------- softmax */

wf_status wf__cpu_softmax(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_softmax_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    const wf_dtype at = out->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    const int64_t count = out->size / reduced_count(in, p->axes);

    rctx cm, c2, c3;
    max_rctx(&cm, in->dtype, at);
    /* Pass 2: [out, s, m, x]; x staged from its dtype, out written. */
    init_rctx(&c2, at == WF_DTYPE_F64 ? softmax_exp_f64 : softmax_exp_f32, at);
    c2.item[0] = wf_dtype_size(out->dtype);
    c2.item[1] = c2.item[2] = wf_dtype_size(at);
    c2.item[3] = wf_dtype_size(in->dtype);
    if (in->dtype != at) {
        c2.xop = 3;
        c2.xdt = in->dtype;
    }
    if (out->dtype != at) {
        c2.oop = 0;
        c2.odt = out->dtype;
    }
    /* Pass 3: [out, s]; out read and written. */
    init_rctx(&c3, at == WF_DTYPE_F64 ? softmax_scale_f64 : softmax_scale_f32, at);
    c3.item[0] = wf_dtype_size(out->dtype);
    c3.item[1] = wf_dtype_size(at);
    if (out->dtype != at) {
        c3.oop = 0;
        c3.odt = out->dtype;
        c3.oread = true;
    }

    /* Row mode: [out, x] walked with a marker accumulator layout. */
    wf_buffer *sb = scratch(count, at);
    if (sb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    wf_cpu_iter it;
    char *data3[3] = {wf__array_data_ptr(out), wf__array_data_ptr(in), sb->data};
    const size_t items3[3] = {wf_dtype_size(out->dtype), wf_dtype_size(in->dtype),
                              wf_dtype_size(at)};
    const enum wf_cpu_layout lay3[3] = {L_FULL, L_IN, L_ACC};
    build_walk(&it, in, p->axes, 3, data3, items3, lay3);
    const int threads = wf__pool_size();
    if (row_mode(&it, 2) && it.strides[0][it.ndim - 1] == 1 &&
        (it.shape[it.ndim - 1] <= 1 << 16 || count >= threads ||
                             wf__cpu_iter_count(&it) < 2 * CHUNK_COSTLY)) {
        wf_cpu_iter rows;
        rows_ctx rc;
        memset(&rc, 0, sizeof rc);
        rows_walk(&it, &rows, &rc);
        rc.nops = 2; /* the marker is not used */
        rows.nops = 2;
        rc.row = softmax_row;
        rc.at = at;
        rc.max_fn = staged;
        rc.max_ctx = &cm;
        rc.pass2_fn = staged;
        rc.pass2_ctx = &c2;
        rc.scale_fn = staged;
        rc.scale_ctx = &c3;
        run_rows(&rows, &rc, CHUNK_COSTLY);
        wf__buffer_release(sb);
        return WF_OK;
    }
    /* General: max, then exponentials and their sums, then the scaling. */
    wf_buffer *mb = scratch(count, at);
    if (mb == NULL) {
        wf__buffer_release(sb);
        return WF_ERR_OUT_OF_MEMORY;
    }
    reduce_into(in, p->axes, K_MAX, at, mb->data, count);
    kop_fill_identity(K_SUM, at, sb->data, count);
    rjob j;
    memset(&j, 0, sizeof j);
    char *data4[4] = {wf__array_data_ptr(out), sb->data, mb->data, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay4[4] = {L_FULL, L_ACC, L_ACC, L_IN};
    build_walk(&j.it, in, p->axes, 4, data4, c2.item, lay4);
    j.fn = staged;
    j.ctx = &c2;
    j.acc_op = 1;
    j.k = K_SUM;
    j.at = at;
    j.acc_count = count;
    j.min_chunk = CHUNK_COSTLY;
    drive(&j);
    /* Scale: walk out row-major with s broadcast over the reduced axes. */
    int64_t out_st[WF_MAX_NDIM], s_st[WF_MAX_NDIM], sstride = 1;
    wf__contiguous_strides(out->shape, out->ndim, out_st);
    for (int d = out->ndim - 1; d >= 0; d--) {
        const bool reduced = (p->axes >> d) & 1u;
        s_st[d] = reduced ? 0 : sstride;
        if (!reduced)
            sstride *= out->shape[d];
    }
    wf_cpu_iter sit;
    char *sdata[2] = {wf__array_data_ptr(out), sb->data};
    const int64_t *sstrides[2] = {out_st, s_st};
    wf__cpu_iter_init(&sit, out->ndim, out->shape, 2, sdata, c3.item, sstrides);
    wf__cpu_iter_run_parallel(&sit, staged, &c3, CHUNK_CHEAP);
    wf__buffer_release(mb);
    wf__buffer_release(sb);
    return WF_OK;
}

/* ---------------------------------------------------------------- argmax / argmin */

/* Row arg-reduction over a block of the compute dtype: updates *best and
 * *bidx (index base + i) with the first strictly better element; `first`
 * makes the first element the starting best. NaN counts as the best. */
#define NAN_F(v) ((v) != (v))
#define NAN_I(v) ((void)(v), false)

#define ARG_BLOCK(NAME, T, ISNAN)                                                          \
    static void NAME(int64_t n, const T *x, int64_t sx, int64_t base, bool argmin,       \
                     T *best, int64_t *bidx, bool *first)                                \
    {                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                \
            const T v = x[i * sx];                                                       \
            const T b = *best;                                                           \
            bool take;                                                                   \
            if (*first)                                                                  \
                take = true;                                                             \
            else if (ISNAN(b))                                                           \
                return; /* a NaN already won */                                          \
            else if (ISNAN(v))                                                           \
                take = true;                                                             \
            else                                                                         \
                take = argmin ? v < b : v > b;                                           \
            if (take) {                                                                  \
                *best = v;                                                               \
                *bidx = base + i;                                                        \
                *first = false;                                                          \
            }                                                                            \
        }                                                                                \
    }
ARG_BLOCK(arg_block_u8, uint8_t, NAN_I)
ARG_BLOCK(arg_block_i32, int32_t, NAN_I)
ARG_BLOCK(arg_block_i64, int64_t, NAN_I)
ARG_BLOCK(arg_block_f32, float, NAN_F)
ARG_BLOCK(arg_block_f64, double, NAN_F)

/* One contiguous row of floats: the max / min with the vectorized
 * reduction, then the first index holding it (or the first NaN). */
#define ARG_ROW_FAST(NAME, T, MAXFN, MINFN, ISNAN)                                             \
    static int64_t NAME(int64_t n, const T *x, bool argmin)                             \
    {                                                                                   \
        T m = x[0];                                                                     \
        if (argmin)                                                                     \
            MINFN##_typed(n, &m, 0, x, 1);                                              \
        else                                                                            \
            MAXFN##_typed(n, &m, 0, x, 1);                                              \
        if (ISNAN(m)) {                                                                 \
            for (int64_t i = 0; i < n; i++)                                             \
                if (ISNAN(x[i]))                                                        \
                    return i;                                                           \
        }                                                                               \
        for (int64_t i = 0; i < n; i++)                                                 \
            if (x[i] == m)                                                              \
                return i;                                                               \
        return 0;                                                                       \
    }
ARG_ROW_FAST(arg_row_f32, float, max_f32, min_f32, NAN_F)
ARG_ROW_FAST(arg_row_f64, double, max_f64, min_f64, NAN_F)
ARG_ROW_FAST(arg_row_i32, int32_t, max_i32, min_i32, NAN_I)
ARG_ROW_FAST(arg_row_i64, int64_t, max_i64, min_i64, NAN_I)
ARG_ROW_FAST(arg_row_u8, uint8_t, max_u8, min_u8, NAN_I)

typedef struct arg_ctx {
    int64_t len;       /* axis length */
    int64_t sxa;       /* input stride along the axis (elements) */
    wf_dtype xdt, at;  /* input dtype, compute dtype */
    bool argmin;
    int64_t k;         /* vertical: the axis index being merged */
} arg_ctx;

/* Row form: operands [idx (int32), x]; each element is one row. */
static void arg_rows(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const arg_ctx *c = ctx;
    const size_t xi = wf_dtype_size(c->xdt);
    int32_t *idx = (int32_t *)ptrs[0];
    for (int64_t r = 0; r < n; r++) {
        const char *x = ptrs[1] + r * strides[1] * (int64_t)xi;
        int64_t found = 0;
        if (c->xdt == c->at && c->sxa == 1) {
            switch (c->at) {
            case WF_DTYPE_F32: found = arg_row_f32(c->len, (const float *)x, c->argmin); break;
            case WF_DTYPE_F64: found = arg_row_f64(c->len, (const double *)x, c->argmin); break;
            case WF_DTYPE_I32: found = arg_row_i32(c->len, (const int32_t *)x, c->argmin); break;
            case WF_DTYPE_I64: found = arg_row_i64(c->len, (const int64_t *)x, c->argmin); break;
            default: found = arg_row_u8(c->len, (const uint8_t *)x, c->argmin); break;
            }
        } else {
            double blk[STAGE];
            union scalar best;
            bool first = true;
            for (int64_t i0 = 0; i0 < c->len; i0 += STAGE) {
                const int64_t m = c->len - i0 < STAGE ? c->len - i0 : STAGE;
                const char *src = x + i0 * c->sxa * (int64_t)xi;
                const void *b = src;
                int64_t bs = c->sxa;
                if (c->xdt != c->at) {
                    wf__cpu_convert_1d(m, src, c->xdt, c->sxa, blk, c->at, 1);
                    b = blk;
                    bs = 1;
                }
                switch (c->at) {
                case WF_DTYPE_F32:
                    arg_block_f32(m, b, bs, i0, c->argmin, &best.f32, &found, &first);
                    break;
                case WF_DTYPE_F64:
                    arg_block_f64(m, b, bs, i0, c->argmin, &best.f64, &found, &first);
                    break;
                case WF_DTYPE_I32:
                    arg_block_i32(m, b, bs, i0, c->argmin, &best.i32, &found,
                                  &first);
                    break;
                case WF_DTYPE_I64:
                    arg_block_i64(m, b, bs, i0, c->argmin, &best.i64, &found,
                                  &first);
                    break;
                default:
                    arg_block_u8(m, b, bs, i0, c->argmin, &best.u8, &found,
                                 &first);
                    break;
                }
            }
        }
        idx[r * strides[0]] = (int32_t)found;
    }
}

/* Vertical form: operands [idx (int32), best (at), x (at, staged)]; merges
 * axis index k into the running bests. */
#define ARG_VERT(NAME, T, ISNAN)                                                           \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        const rctx *c = ctx;                                                             \
        int32_t *restrict idx = (int32_t *)ptrs[0];                                      \
        T *restrict best = (T *)ptrs[1];                                                 \
        const T *restrict x = (const T *)ptrs[2];                                        \
        const int64_t si = strides[0], sb = strides[1], sx = strides[2];                 \
        const int32_t k = (int32_t)c->k;                                                 \
        if (k > 0 && si == 1 && sb == 1 && sx == 1) {                                    \
            int64_t i = 0;                                                               \
            if (c->flag) {                                                               \
                for (; i + 8 <= n; i += 8)                                               \
                    for (int j = 0; j < 8; j++) {                                        \
                        const T v = x[i + j], b = best[i + j];                           \
                        const bool take = !ISNAN(b) && (v < b || ISNAN(v));              \
                        best[i + j] = take ? v : b;                                      \
                        idx[i + j] = take ? k : idx[i + j];                              \
                    }                                                                    \
            } else {                                                                     \
                for (; i + 8 <= n; i += 8)                                               \
                    for (int j = 0; j < 8; j++) {                                        \
                        const T v = x[i + j], b = best[i + j];                           \
                        const bool take = !ISNAN(b) && (v > b || ISNAN(v));              \
                        best[i + j] = take ? v : b;                                      \
                        idx[i + j] = take ? k : idx[i + j];                              \
                    }                                                                    \
            }                                                                            \
            idx += i;                                                                    \
            best += i;                                                                   \
            x += i;                                                                      \
            n -= i;                                                                      \
        }                                                                                \
        if (k == 0) {                                                                    \
            for (int64_t i = 0; i < n; i++) {                                            \
                best[i * sb] = x[i * sx];                                                \
                idx[i * si] = 0;                                                         \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        if (c->flag) {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T v = x[i * sx], b = best[i * sb];                                 \
                const bool take = !ISNAN(b) && (v < b || ISNAN(v));                      \
                best[i * sb] = take ? v : b;                                             \
                idx[i * si] = take ? k : idx[i * si];                                    \
            }                                                                            \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T v = x[i * sx], b = best[i * sb];                                 \
                const bool take = !ISNAN(b) && (v > b || ISNAN(v));                      \
                best[i * sb] = take ? v : b;                                             \
                idx[i * si] = take ? k : idx[i * si];                                    \
            }                                                                            \
        }                                                                                \
    }
ARG_VERT(arg_vert_u8, uint8_t, NAN_I)
ARG_VERT(arg_vert_i32, int32_t, NAN_I)
ARG_VERT(arg_vert_i64, int64_t, NAN_I)
ARG_VERT(arg_vert_f32, float, NAN_F)
ARG_VERT(arg_vert_f64, double, NAN_F)

struct vert_arg {
    const rctx *c;
    int64_t len;
    int64_t axis_stride_bytes; /* of operand 2 */
};

static void arg_vert_block(const wf_cpu_iter *sub, const struct vert_arg *a)
{
    rctx c = *a->c;
    wf_cpu_iter s = *sub;
    for (int64_t k = 0; k < a->len; k++) {
        c.k = k;
        s.data[2] = sub->data[2] + k * a->axis_stride_bytes;
        wf__cpu_iter_run(&s, staged, &c);
    }
}

/* The axis loop over a chunk of the other dims; tiled along the innermost
 * when an operand is strided there, so a tile's bests stay in cache. */
static void arg_vert_body(const wf_cpu_iter *sub, void *arg)
{
    const struct vert_arg *a = arg;
    if (!wf__cpu_wants_tiling(sub)) {
        arg_vert_block(sub, a);
        return;
    }
    const int last = sub->ndim - 1;
    wf_cpu_iter t = *sub;
    for (int64_t b = 0; b < sub->shape[last]; b += WF_CPU_TILE) {
        t.shape[last] = sub->shape[last] - b < WF_CPU_TILE ? sub->shape[last] - b : WF_CPU_TILE;
        for (int k = 0; k < sub->nops; k++)
            t.data[k] = sub->data[k] + b * sub->strides[k][last] * (int64_t)sub->itemsize[k];
        arg_vert_block(&t, a);
    }
}

bool wf__cpu_axis_walk(wf_cpu_iter *it, const wf_array *in, int axis, int nops, char *const *data,
                      const size_t *items, const enum wf_cpu_layout *layout)
{
    int64_t shape[WF_MAX_NDIM] = {0}, in_st[WF_MAX_NDIM] = {0};
    int64_t st[WF_CPU_MAX_OPERANDS][WF_MAX_NDIM];
    int64_t acc_st[WF_MAX_NDIM], full_st[WF_MAX_NDIM];
    int map[WF_MAX_NDIM];
    int m = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d == axis)
            continue;
        map[m] = d;
        shape[m] = in->shape[d];
        in_st[m] = in->strides[d];
        m++;
    }
    wf__contiguous_strides(shape, m, acc_st);
    wf__contiguous_strides(in->shape, in->ndim, full_st);
    int perm[WF_MAX_NDIM];
    wf__cpu_dims_by_stride(m, in_st, perm);
    int64_t pshape[WF_MAX_NDIM];
    bool innermost = true;
    const int64_t ax = in->strides[axis] < 0 ? -in->strides[axis] : in->strides[axis];
    for (int d = 0; d < m; d++) {
        pshape[d] = shape[perm[d]];
        const int64_t s = in_st[perm[d]] < 0 ? -in_st[perm[d]] : in_st[perm[d]];
        if (shape[perm[d]] > 1 && s < ax)
            innermost = false;
        for (int k = 0; k < nops; k++)
            st[k][d] = layout[k] == L_ACC    ? acc_st[perm[d]]
                       : layout[k] == L_FULL ? full_st[map[perm[d]]]
                                             : in_st[perm[d]];
    }
    const int64_t *strides[WF_CPU_MAX_OPERANDS];
    for (int k = 0; k < nops; k++)
        strides[k] = st[k];
    wf__cpu_iter_init(it, m, pshape, nops, data, items, strides);
    return innermost;
}

static wf_cpu_inner_fn arg_vert_loop(wf_dtype at)
{
    switch (at) {
    case WF_DTYPE_F32: return arg_vert_f32;
    case WF_DTYPE_F64: return arg_vert_f64;
    case WF_DTYPE_I32: return arg_vert_i32;
    case WF_DTYPE_I64: return arg_vert_i64;
    default: return arg_vert_u8;
    }
}

wf_status wf__cpu_arg_reduce(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_arg_reduce_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    const int64_t len = in->shape[p->axis];
    const wf_dtype at = in->dtype == WF_DTYPE_F16 || in->dtype == WF_DTYPE_BF16 ? WF_DTYPE_F32
                                                                                : in->dtype;
    if (len <= 1) {
        memset(wf__array_data_ptr(out), 0, (size_t)out->size * sizeof(int32_t));
        return WF_OK;
    }
    const size_t xi = wf_dtype_size(in->dtype);
    char *data2[2] = {wf__array_data_ptr(out), wf__array_data_ptr(in)};
    const size_t items2[2] = {sizeof(int32_t), xi};
    const enum wf_cpu_layout lay2[2] = {L_ACC, L_IN};
    wf_cpu_iter it;
    if (wf__cpu_axis_walk(&it, in, p->axis, 2, data2, items2, lay2)) {
        arg_ctx c = {len, in->strides[p->axis], in->dtype, at, p->op == 1, 0};
        int64_t per = CHUNK_CHEAP / len;
        wf__cpu_iter_run_parallel(&it, arg_rows, &c, per > 0 ? per : 1);
        return WF_OK;
    }
    /* Vertical: walk the other dims once per axis index, keeping the bests
     * of a chunk of outputs in cache. */
    wf_buffer *bb = scratch(out->size, at);
    if (bb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    rctx c;
    init_rctx(&c, arg_vert_loop(at), at);
    c.flag = p->op == 1;
    c.item[0] = sizeof(int32_t);
    c.item[1] = wf_dtype_size(at);
    c.item[2] = xi;
    if (in->dtype != at) {
        c.xop = 2;
        c.xdt = in->dtype;
    }
    char *data3[3] = {wf__array_data_ptr(out), bb->data, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay3[3] = {L_ACC, L_ACC, L_IN};
    wf__cpu_axis_walk(&it, in, p->axis, 3, data3, c.item, lay3);
    struct vert_arg va = {&c, len, in->strides[p->axis] * (int64_t)xi};
    const int64_t total = wf__cpu_iter_count(&it) * len;
    const int d = wf__cpu_pick_split_dim(&it, -1, 2 * (int64_t)wf__pool_size());
    if (d >= 0 && total >= 2 * CHUNK_CHEAP) {
        const int64_t per_index = total / it.shape[d];
        const int64_t min_chunk = CHUNK_CHEAP / (per_index > 0 ? per_index : 1);
        wf__cpu_split_run(&it, d, min_chunk > 0 ? min_chunk : 1, arg_vert_body, &va);
    } else {
        arg_vert_body(&it, &va);
    }
    wf__buffer_release(bb);
    return WF_OK;
}
