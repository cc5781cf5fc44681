/*
 * Scan kernels beside cumsum's: cummax, cummin, logcumsumexp (inclusive or
 * exclusive, forward or reverse), rows along the axis in parallel.
 *
 * Each output depends on its own row alone, walked in order, so results
 * never depend on the thread count. Max / min keep the dtype (f16 / bf16
 * compare as float32, exactly) and propagate NaN; an exclusive scan starts
 * at the dtype's lowest (max) or highest (min) value. logcumsumexp runs a
 * log-sum in float64 (c = max + log1p(exp(-|c - x|))), starts at -inf and
 * rounds each output once.
 *
 * complex64 (MLX accepts it for all three): max / min order by real part,
 * then imaginary part, a NaN in either part propagating (as wf_maximum /
 * wf_minimum; the exclusive scan starts at -inf - inf j / inf + inf j, as
 * MLX); logcumsumexp is log(sum exp) in double-precision complex, c = m +
 * log(1 + exp(o - m)) with m the term of larger real part, its imaginary
 * part brought to the principal branch (-pi, pi] (NumPy's
 * log(cumsum(exp(x))); MLX leaves it unwrapped), starting at -inf + 0j.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/scatter.h"
#include "core/dtype.h"
#include "prim/sort.h"
#include "runtime/pool.h"

#define MAX_OP(c, x) ((x) > (c) ? (x) : (c))
#define MIN_OP(c, x) ((x) < (c) ? (x) : (c))
/* NaN wins: once the carry is NaN it stays NaN. */
#define MAX_NAN(c, x) (((x) > (c) || (x) != (x)) && (c) == (c) ? (x) : (c))
#define MIN_NAN(c, x) (((x) < (c) || (x) != (x)) && (c) == (c) ? (x) : (c))

/* One row of n elements (x with stride sx, o with so), from its start. */
#define SCAN_ROW(NAME, T, C, LOAD, STORE, OP)                                               \
    static void NAME(const char *x_, int64_t sx, char *o_, int64_t so, int64_t n,            \
                     bool inclusive, C init)                                                \
    {                                                                                       \
        const T *x = (const T *)x_;                                                         \
        T *o = (T *)o_;                                                                     \
        C c = init;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const C v = LOAD(x[i * sx]);                                                    \
            if (inclusive) {                                                                \
                c = i == 0 ? v : OP(c, v);                                                  \
                o[i * so] = STORE(c);                                                       \
            } else {                                                                        \
                o[i * so] = STORE(c);                                                       \
                c = i == 0 ? v : OP(c, v);                                                  \
            }                                                                               \
        }                                                                                   \
    }
#define ID(x) (x)
SCAN_ROW(max_u8, uint8_t, uint8_t, ID, ID, MAX_OP)
SCAN_ROW(min_u8, uint8_t, uint8_t, ID, ID, MIN_OP)
SCAN_ROW(max_i8, int8_t, int8_t, ID, ID, MAX_OP)
SCAN_ROW(min_i8, int8_t, int8_t, ID, ID, MIN_OP)
SCAN_ROW(max_i16, int16_t, int16_t, ID, ID, MAX_OP)
SCAN_ROW(min_i16, int16_t, int16_t, ID, ID, MIN_OP)
SCAN_ROW(max_u16, uint16_t, uint16_t, ID, ID, MAX_OP)
SCAN_ROW(min_u16, uint16_t, uint16_t, ID, ID, MIN_OP)
SCAN_ROW(max_u32, uint32_t, uint32_t, ID, ID, MAX_OP)
SCAN_ROW(min_u32, uint32_t, uint32_t, ID, ID, MIN_OP)
SCAN_ROW(max_u64, uint64_t, uint64_t, ID, ID, MAX_OP)
SCAN_ROW(min_u64, uint64_t, uint64_t, ID, ID, MIN_OP)
SCAN_ROW(max_i32, int32_t, int32_t, ID, ID, MAX_OP)
SCAN_ROW(min_i32, int32_t, int32_t, ID, ID, MIN_OP)
SCAN_ROW(max_i64, int64_t, int64_t, ID, ID, MAX_OP)
SCAN_ROW(min_i64, int64_t, int64_t, ID, ID, MIN_OP)
SCAN_ROW(max_f16, uint16_t, float, wf__f16_to_f32, wf__f32_to_f16, MAX_NAN)
SCAN_ROW(min_f16, uint16_t, float, wf__f16_to_f32, wf__f32_to_f16, MIN_NAN)
SCAN_ROW(max_bf16, uint16_t, float, wf__bf16_to_f32, wf__f32_to_bf16, MAX_NAN)
SCAN_ROW(min_bf16, uint16_t, float, wf__bf16_to_f32, wf__f32_to_bf16, MIN_NAN)
SCAN_ROW(max_f32, float, float, ID, ID, MAX_NAN)
SCAN_ROW(min_f32, float, float, ID, ID, MIN_NAN)
SCAN_ROW(max_f64, double, double, ID, ID, MAX_NAN)
SCAN_ROW(min_f64, double, double, ID, ID, MIN_NAN)

static double log_add(double c, double x)
{
    if (c == -INFINITY)
        return x;
    if (x == -INFINITY)
        return c;
    if (isnan(c) || isnan(x))
        return NAN;
    const double m = c > x ? c : x;
    if (m == INFINITY)
        return INFINITY;
    return m + log1p(exp(-fabs(c - x)));
}
#define F16_AS_DOUBLE(x) ((double)wf__f16_to_f32(x))
#define BF16_AS_DOUBLE(x) ((double)wf__bf16_to_f32(x))
#define DOUBLE_AS_F16(x) wf__f32_to_f16((float)(x))
#define DOUBLE_AS_BF16(x) wf__f32_to_bf16((float)(x))
#define DOUBLE_AS_F32(x) ((float)(x))
#define AS_DOUBLE(x) ((double)(x))
SCAN_ROW(lse_f16, uint16_t, double, F16_AS_DOUBLE, DOUBLE_AS_F16, log_add)
SCAN_ROW(lse_bf16, uint16_t, double, BF16_AS_DOUBLE, DOUBLE_AS_BF16, log_add)
SCAN_ROW(lse_f32, float, double, AS_DOUBLE, DOUBLE_AS_F32, log_add)
SCAN_ROW(lse_f64, double, double, ID, ID, log_add)

/* ---------------------------------------------------------------- complex64 */

static inline bool isnan_c64(wf_cpu_c64 a) { return a.re != a.re || a.im != a.im; }
static inline bool less_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return a.re < b.re || (a.re == b.re && a.im < b.im);
}
/* The carry c wins ties and keeps a NaN; else a NaN x propagates. */
static inline wf_cpu_c64 max_c64(wf_cpu_c64 c, wf_cpu_c64 x)
{
    return isnan_c64(c) || (!isnan_c64(x) && !less_c64(c, x)) ? c : x;
}
static inline wf_cpu_c64 min_c64(wf_cpu_c64 c, wf_cpu_c64 x)
{
    return isnan_c64(c) || (!isnan_c64(x) && !less_c64(x, c)) ? c : x;
}
SCAN_ROW(max_c64_row, wf_cpu_c64, wf_cpu_c64, ID, ID, max_c64)
SCAN_ROW(min_c64_row, wf_cpu_c64, wf_cpu_c64, ID, ID, min_c64)

typedef struct cd {
    double re, im;
} cd;

/* The angle t brought into (-pi, pi]. */
static double principal(double t)
{
    if (t > -M_PI && t <= M_PI)
        return t;
    const double w = atan2(sin(t), cos(t));
    return w == -M_PI ? M_PI : w;
}

/* log(exp(c) + exp(x)), principal branch (x's already is). */
static cd log_add_c(cd c, cd x)
{
    if (isnan(c.re) || isnan(c.im) || isnan(x.re) || isnan(x.im))
        return (cd){NAN, NAN};
    if (c.re == -INFINITY)
        return x;
    if (x.re == -INFINITY)
        return c;
    const cd m = c.re >= x.re ? c : x, o = c.re >= x.re ? x : c;
    if (m.re == INFINITY)
        return (cd){INFINITY, principal(m.im)};
    /* z = exp(o - m), |z| <= 1; log(1 + z) = (log1p(2 Re z + |z|^2) / 2, arg(1 + z)) */
    const double r = exp(o.re - m.re), zr = r * cos(o.im - m.im), zi = r * sin(o.im - m.im);
    return (cd){m.re + 0.5 * log1p(2.0 * zr + r * r), principal(m.im + atan2(zi, 1.0 + zr))};
}
/* An input as the log of its exp: the imaginary part on the principal
 * branch (a row's first output is its first element). */
static inline cd c64_as_cd(wf_cpu_c64 x) { return (cd){x.re, principal(x.im)}; }
static inline wf_cpu_c64 cd_as_c64(cd x) { return (wf_cpu_c64){(float)x.re, (float)x.im}; }
SCAN_ROW(lse_c64, wf_cpu_c64, cd, c64_as_cd, cd_as_c64, log_add_c)

static void run_row_c64(int op, bool inc, const char *x, int64_t sx, char *o, int64_t so,
                        int64_t n)
{
    if (op == WF_SCAN_LOGSUMEXP)
        lse_c64(x, sx, o, so, n, inc, (cd){-INFINITY, 0.0});
    else if (op == WF_SCAN_MAX)
        max_c64_row(x, sx, o, so, n, inc, (wf_cpu_c64){-INFINITY, -INFINITY});
    else
        min_c64_row(x, sx, o, so, n, inc, (wf_cpu_c64){INFINITY, INFINITY});
}

struct scan_job {
    const wf_array *a;
    wf_array *out;
    const wf_scan_extra_params *p;
    int64_t n;
};

/* The exclusive scan's first value: the identity of the operation. */
static void run_row(const struct scan_job *job, const char *x, int64_t sx, char *o, int64_t so)
{
    const int op = job->p->op;
    const bool inc = job->p->inclusive, mx = op == WF_SCAN_MAX;
    const int64_t n = job->n;
    switch (job->a->dtype) {
    case WF_DTYPE_C64: run_row_c64(op, inc, x, sx, o, so, n); break;
    case WF_DTYPE_BOOL:
    case WF_DTYPE_U8:
        (mx ? max_u8 : min_u8)(x, sx, o, so, n, inc,
                               mx ? 0 : (job->a->dtype == WF_DTYPE_BOOL ? 1 : 255));
        break;
    case WF_DTYPE_I8:
        (mx ? max_i8 : min_i8)(x, sx, o, so, n, inc, mx ? INT8_MIN : INT8_MAX);
        break;
    case WF_DTYPE_I16:
        (mx ? max_i16 : min_i16)(x, sx, o, so, n, inc, mx ? INT16_MIN : INT16_MAX);
        break;
    case WF_DTYPE_U16:
        (mx ? max_u16 : min_u16)(x, sx, o, so, n, inc, mx ? 0 : UINT16_MAX);
        break;
    case WF_DTYPE_U32:
        (mx ? max_u32 : min_u32)(x, sx, o, so, n, inc, mx ? 0 : UINT32_MAX);
        break;
    case WF_DTYPE_U64:
        (mx ? max_u64 : min_u64)(x, sx, o, so, n, inc, mx ? 0 : UINT64_MAX);
        break;
    case WF_DTYPE_I32:
        (mx ? max_i32 : min_i32)(x, sx, o, so, n, inc, mx ? INT32_MIN : INT32_MAX);
        break;
    case WF_DTYPE_I64:
        (mx ? max_i64 : min_i64)(x, sx, o, so, n, inc, mx ? INT64_MIN : INT64_MAX);
        break;
    case WF_DTYPE_F16:
        if (op == WF_SCAN_LOGSUMEXP)
            lse_f16(x, sx, o, so, n, inc, -INFINITY);
        else
            (mx ? max_f16 : min_f16)(x, sx, o, so, n, inc, mx ? -INFINITY : INFINITY);
        break;
    case WF_DTYPE_BF16:
        if (op == WF_SCAN_LOGSUMEXP)
            lse_bf16(x, sx, o, so, n, inc, -INFINITY);
        else
            (mx ? max_bf16 : min_bf16)(x, sx, o, so, n, inc, mx ? -INFINITY : INFINITY);
        break;
    case WF_DTYPE_F32:
        if (op == WF_SCAN_LOGSUMEXP)
            lse_f32(x, sx, o, so, n, inc, -INFINITY);
        else
            (mx ? max_f32 : min_f32)(x, sx, o, so, n, inc, mx ? -INFINITY : INFINITY);
        break;
    default:
        if (op == WF_SCAN_LOGSUMEXP)
            lse_f64(x, sx, o, so, n, inc, -INFINITY);
        else
            (mx ? max_f64 : min_f64)(x, sx, o, so, n, inc, mx ? -INFINITY : INFINITY);
        break;
    }
}

static void scan_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct scan_job *job = arg;
    const wf_array *a = job->a, *out = job->out;
    const int axis = job->p->axis;
    const int64_t item = (int64_t)wf_dtype_size(a->dtype);
    for (int64_t r = begin; r < end; r++) {
        int64_t rest = r, ia = 0, io = 0;
        for (int d = a->ndim - 1; d >= 0; d--) {
            if (d == axis)
                continue;
            const int64_t c = rest % a->shape[d];
            rest /= a->shape[d];
            ia += c * a->strides[d];
            io += c * out->strides[d];
        }
        int64_t sx = a->strides[axis], so = out->strides[axis];
        if (job->p->reverse) { /* walk from the end: start at the last element, step back */
            ia += (job->n - 1) * sx;
            io += (job->n - 1) * so;
            sx = -sx;
            so = -so;
        }
        run_row(job, (const char *)wf__array_data_ptr(a) + ia * item, sx,
                (char *)wf__array_data_ptr(out) + io * item, so);
    }
}

wf_status wf__cpu_scan_extra(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    const wf_scan_extra_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct scan_job job = {inputs[0], out, p, inputs[0]->shape[p->axis]};
    const int64_t rows = out->size / job.n;
    const int64_t per_row = job.n * 4 + 16;
    const int64_t min_chunk = per_row >= WF_CPU_CHUNK_COSTLY ? 1 : WF_CPU_CHUNK_COSTLY / per_row;
    wf__parallel_for(rows, min_chunk, scan_chunk, &job);
    return WF_OK;
}
