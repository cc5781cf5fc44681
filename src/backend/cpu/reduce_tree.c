/* Reduction operators and fixed-tree row reductions (see reduce.h).
 *
 * A row of n elements is cut into leaves of WF_CPU_LEAF elements. A float
 * leaf is spread over WF_CPU_LANES_* lanes (element i into lane i mod the
 * lane count, in order), its last partial group padded with the operator's
 * identity, and the lanes are combined pairwise (lane j with lane j + w for
 * w = half the lanes, then a quarter, ...). The leaves are combined by a
 * balanced tree: tree(lo, hi) = tree(lo, mid) (k) tree(mid, hi) with mid =
 * lo + (hi - lo) / 2. Both trees depend on n only, so the result is the same
 * whether the leaves are computed one after another or in parallel, and the
 * error of a float sum grows like log(n) (as NumPy's pairwise sum). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* ================================================================ operators */

wf_dtype wf__cpu_kop_acc_dtype(wf_cpu_kop k, wf_dtype in)
{
    const bool half = in == WF_DTYPE_F16 || in == WF_DTYPE_BF16;
    switch (k) {
    case WF_CPU_KOP_SUM:
    case WF_CPU_KOP_PROD:
        if (in == WF_DTYPE_BOOL || (wf__dtype_is_integer(in) && wf_dtype_size(in) <= 4))
            return WF_DTYPE_I32;
        if (in == WF_DTYPE_U64)
            return WF_DTYPE_I64;
        return half ? WF_DTYPE_F32 : in;
    case WF_CPU_KOP_MAX:
    case WF_CPU_KOP_MIN:
        if (in == WF_DTYPE_I8 || in == WF_DTYPE_I16 || in == WF_DTYPE_U16)
            return WF_DTYPE_I32;
        if (in == WF_DTYPE_U32)
            return WF_DTYPE_I64;
        return half ? WF_DTYPE_F32 : in;
    default: return WF_DTYPE_BOOL;
    }
}

/* The identity of k in dtype at. */
static wf_cpu_scalar kop_identity(wf_cpu_kop k, wf_dtype at)
{
    wf_cpu_scalar v;
    memset(&v, 0, sizeof v);
    switch (at) {
    case WF_DTYPE_BOOL: v.u8 = k == WF_CPU_KOP_AND || k == WF_CPU_KOP_MIN; break;
    case WF_DTYPE_U8: v.u8 = k == WF_CPU_KOP_MIN ? 255 : k == WF_CPU_KOP_PROD; break;
    case WF_DTYPE_I32:
        v.i32 = k == WF_CPU_KOP_PROD  ? 1
                : k == WF_CPU_KOP_MAX ? INT32_MIN
                : k == WF_CPU_KOP_MIN ? INT32_MAX
                                      : 0;
        break;
    case WF_DTYPE_I64:
        v.i64 = k == WF_CPU_KOP_PROD  ? 1
                : k == WF_CPU_KOP_MAX ? INT64_MIN
                : k == WF_CPU_KOP_MIN ? INT64_MAX
                                      : 0;
        break;
    case WF_DTYPE_U64:
        v.u64 = k == WF_CPU_KOP_PROD ? 1 : k == WF_CPU_KOP_MIN ? UINT64_MAX : 0;
        break;
    case WF_DTYPE_F32:
        v.f32 = k == WF_CPU_KOP_PROD ? 1.0f : k == WF_CPU_KOP_MAX ? -INFINITY
                                          : k == WF_CPU_KOP_MIN ? INFINITY
                                                                : 0.0f;
        break;
    default:
        v.f64 = k == WF_CPU_KOP_PROD ? 1.0 : k == WF_CPU_KOP_MAX ? -INFINITY
                                         : k == WF_CPU_KOP_MIN ? INFINITY
                                                               : 0.0;
        break;
    }
    return v;
}

/* Called once per row (on short rows it is a large share of the work):
 * typed stores for the float accumulators, a byte copy for the rest. */
void wf__cpu_kop_fill(wf_cpu_kop k, wf_dtype at, void *acc, int64_t n)
{
    const wf_cpu_scalar v = kop_identity(k, at);
    if (at == WF_DTYPE_F32) {
        float *a = acc;
        for (int64_t i = 0; i < n; i++)
            a[i] = v.f32;
        return;
    }
    if (at == WF_DTYPE_F64) {
        double *a = acc;
        for (int64_t i = 0; i < n; i++)
            a[i] = v.f64;
        return;
    }
    const size_t item = wf_dtype_size(at);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)acc + (size_t)i * item, &v, item);
}

/* Integer operators in unsigned arithmetic, so sums and products wrap. */
#define INT_ACCUM(NAME, T, UT, WRAP)                                                       \
    static void NAME(int k, int64_t n, T *acc, int64_t sa, const T *x, int64_t sx)        \
    {                                                                                      \
        switch (k) {                                                                       \
        case WF_CPU_KOP_SUM:                                                               \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i * sa] = WRAP((UT)acc[i * sa] + (UT)x[i * sx]);                       \
            break;                                                                         \
        case WF_CPU_KOP_PROD:                                                              \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i * sa] = WRAP((UT)acc[i * sa] * (UT)x[i * sx]);                       \
            break;                                                                         \
        case WF_CPU_KOP_MAX:                                                               \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i * sa] = x[i * sx] > acc[i * sa] ? x[i * sx] : acc[i * sa];           \
            break;                                                                         \
        case WF_CPU_KOP_MIN:                                                               \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i * sa] = x[i * sx] < acc[i * sa] ? x[i * sx] : acc[i * sa];           \
            break;                                                                         \
        case WF_CPU_KOP_AND:                                                               \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i * sa] = (T)(acc[i * sa] & x[i * sx]);                                \
            break;                                                                         \
        default:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i * sa] = (T)(acc[i * sa] | x[i * sx]);                                \
            break;                                                                         \
        }                                                                                  \
    }
#define WRAP_U8(v) ((uint8_t)(v))
INT_ACCUM(accum_u8, uint8_t, uint32_t, WRAP_U8)
INT_ACCUM(accum_i32, int32_t, uint32_t, wf__cpu_wrap_i32)
INT_ACCUM(accum_i64, int64_t, uint64_t, wf__cpu_wrap_i64)
#define WRAP_U64(v) ((uint64_t)(v))
INT_ACCUM(accum_u64, uint64_t, uint64_t, WRAP_U64)

void wf__cpu_kop_combine_strided(wf_cpu_kop k, wf_dtype at, int64_t n, void *acc, int64_t sa,
                                 const void *x, int64_t sx)
{
    switch (at) {
    case WF_DTYPE_F32:
        if (sa == 1 && sx == 1) {
            wf__cpu_red_isa()->accum_f32(k, n, acc, x);
        } else {
            float *a = acc;
            const float *v = x;
            for (int64_t i = 0; i < n; i++)
                a[i * sa] = wf__cpu_kop_f32(k, a[i * sa], v[i * sx]);
        }
        break;
    case WF_DTYPE_F64:
        if (sa == 1 && sx == 1) {
            wf__cpu_red_isa()->accum_f64(k, n, acc, x);
        } else {
            double *a = acc;
            const double *v = x;
            for (int64_t i = 0; i < n; i++)
                a[i * sa] = wf__cpu_kop_f64(k, a[i * sa], v[i * sx]);
        }
        break;
    case WF_DTYPE_I32: accum_i32(k, n, acc, sa, x, sx); break;
    case WF_DTYPE_I64: accum_i64(k, n, acc, sa, x, sx); break;
    case WF_DTYPE_U64: accum_u64(k, n, acc, sa, x, sx); break;
    default: accum_u8(k, n, acc, sa, x, sx); break;
    }
}

void wf__cpu_kop_combine(wf_cpu_kop k, wf_dtype at, void *dst, const void *src, int64_t n)
{
    wf__cpu_kop_combine_strided(k, at, n, dst, 1, src, 1);
}

void wf__cpu_kop_combine1(wf_cpu_kop k, wf_dtype at, void *a, const wf_cpu_scalar *v)
{
    wf__cpu_kop_combine_strided(k, at, 1, a, 0, v, 0);
}

/* ================================================================ leaves */

/* Lanes of either float dtype (256 bytes). */
typedef union lanes {
    float f32[WF_CPU_LANES_F32];
    double f64[WF_CPU_LANES_F64];
} lanes;

/* The value element i of the stage gets in the padding of the last partial
 * group: what leaves the lanes unchanged. */
static double pad_value(const wf_cpu_row *r)
{
    if (r->map == WF_CPU_ROW_SQDEV)
        return r->a; /* (a - a)^2 = 0 */
    if (r->map == WF_CPU_ROW_EXP || r->k == WF_CPU_KOP_SUM)
        return -0.0; /* x + -0 = x for every x */
    return r->k == WF_CPU_KOP_PROD ? 1.0 : r->k == WF_CPU_KOP_MAX ? -INFINITY : INFINITY;
}

/* Adds m staged values (contiguous, dtype at) into the lanes; only the last
 * stage of a leaf may have m that is not a multiple of the lane count. */
static void lanes_add(const wf_cpu_row *r, const wf_cpu_red_isa *isa, lanes *l, int64_t m,
                      const void *v)
{
    const bool f32 = r->at == WF_DTYPE_F32;
    const int w = f32 ? WF_CPU_LANES_F32 : WF_CPU_LANES_F64;
    const wf_cpu_kop k = r->map == WF_CPU_ROW_PLAIN ? r->k : WF_CPU_KOP_SUM;
    const int64_t whole = m - m % w;
    for (int pass = 0; pass < 2; pass++) {
        lanes pad;
        const void *src = v;
        int64_t count = whole;
        if (pass == 1) { /* the partial group, padded */
            if (whole == m)
                break;
            const double p = pad_value(r);
            for (int j = 0; j < w; j++) {
                const int64_t i = whole + j;
                if (f32)
                    pad.f32[j] = i < m ? ((const float *)v)[i] : (float)p;
                else
                    pad.f64[j] = i < m ? ((const double *)v)[i] : p;
            }
            src = &pad;
            count = w;
        }
        if (r->map == WF_CPU_ROW_SQDEV) {
            if (f32)
                isa->sqdev_f32(l->f32, count, src, (float)r->a);
            else
                isa->sqdev_f64(l->f64, count, src, r->a);
        } else if (f32) {
            isa->lanes_f32(k, l->f32, count, src);
        } else {
            isa->lanes_f64(k, l->f64, count, src);
        }
    }
}

/* exp(x - a) of the m elements from i0 on: into the row's y when it is
 * contiguous (also stored there otherwise); returns where the values are. */
static const void *exp_stage(const wf_cpu_row *r, const wf_cpu_red_isa *isa, int64_t i0,
                             int64_t m, const void *x, void *buf)
{
    const size_t ai = wf_dtype_size(r->at);
    char *y = r->y != NULL ? r->y + i0 * r->sy * (int64_t)ai : NULL;
    void *e = y != NULL && r->sy == 1 ? (void *)y : buf;
    double t[WF_CPU_STAGE];
    if (r->at == WF_DTYPE_F32) {
        isa->shift_f32(m, x, (float)r->a, (float *)t);
        wf__cpu_exp_f32(m, (const float *)t, e);
    } else {
        isa->shift_f64(m, x, r->a, t);
        wf__cpu_exp_f64(m, t, e);
    }
    if (y != NULL && e != y)
        wf__cpu_convert_1d(m, e, r->at, 1, y, r->at, r->sy);
    return e;
}

/* Leaf [lo, hi) of a float row. */
static wf_cpu_scalar leaf_float(const wf_cpu_row *r, int64_t lo, int64_t hi)
{
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    const bool f32 = r->at == WF_DTYPE_F32;
    const wf_cpu_kop k = r->map == WF_CPU_ROW_PLAIN ? r->k : WF_CPU_KOP_SUM;
    lanes l;
    wf__cpu_kop_fill(k, r->at, &l, f32 ? WF_CPU_LANES_F32 : WF_CPU_LANES_F64);
    if (k == WF_CPU_KOP_SUM && f32) /* -0: the exact identity of + */
        for (int j = 0; j < WF_CPU_LANES_F32; j++)
            l.f32[j] = -0.0f;
    else if (k == WF_CPU_KOP_SUM)
        for (int j = 0; j < WF_CPU_LANES_F64; j++)
            l.f64[j] = -0.0;
    const size_t xi = wf_dtype_size(r->xdt);
    const bool direct = r->xdt == r->at && r->sx == 1;
    const bool exp = r->map == WF_CPU_ROW_EXP;
    const int64_t step = direct && !exp ? hi - lo : WF_CPU_STAGE;
    double buf[WF_CPU_STAGE], ebuf[WF_CPU_STAGE]; /* room for a stage of either dtype */
    for (int64_t i0 = lo; i0 < hi; i0 += step) {
        const int64_t m = hi - i0 < step ? hi - i0 : step;
        const char *src = r->x + i0 * r->sx * (int64_t)xi;
        const void *v = src;
        if (!direct) {
            wf__cpu_convert_1d(m, src, r->xdt, r->sx, buf, r->at, 1);
            v = buf;
        }
        if (exp)
            v = exp_stage(r, isa, i0, m, v, ebuf);
        lanes_add(r, isa, &l, m, v);
    }
    /* The lanes, pairwise. */
    wf_cpu_scalar out;
    if (f32) {
        for (int w = WF_CPU_LANES_F32 / 2; w >= 1; w /= 2)
            for (int j = 0; j < w; j++)
                l.f32[j] = wf__cpu_kop_f32(k, l.f32[j], l.f32[j + w]);
        out.f32 = l.f32[0];
    } else {
        for (int w = WF_CPU_LANES_F64 / 2; w >= 1; w /= 2)
            for (int j = 0; j < w; j++)
                l.f64[j] = wf__cpu_kop_f64(k, l.f64[j], l.f64[j + w]);
        out.f64 = l.f64[0];
    }
    return out;
}

/* A contiguous integer row folded into *acc through 8 partial results that
 * start as its first 8 elements (a loop without a carried dependency, which
 * vectorizes; the operators are exact, so the grouping does not change the
 * value). */
#define INT_ROW(NAME, ACCUM, T, UT, WRAP)                                                  \
    static void NAME(int k, int64_t n, T *acc, const T *restrict x)                        \
    {                                                                                      \
        if (n < 16) {                                                                      \
            ACCUM(k, n, acc, 0, x, 1);                                                     \
            return;                                                                        \
        }                                                                                  \
        T part[8];                                                                         \
        for (int j = 0; j < 8; j++)                                                        \
            part[j] = x[j];                                                                \
        const int64_t whole = n - n % 8;                                                   \
        for (int64_t i = 8; i < whole; i += 8)                                             \
            switch (k) {                                                                   \
            case WF_CPU_KOP_SUM:                                                           \
                for (int j = 0; j < 8; j++)                                                \
                    part[j] = WRAP((UT)part[j] + (UT)x[i + j]);                            \
                break;                                                                     \
            case WF_CPU_KOP_PROD:                                                          \
                for (int j = 0; j < 8; j++)                                                \
                    part[j] = WRAP((UT)part[j] * (UT)x[i + j]);                            \
                break;                                                                     \
            case WF_CPU_KOP_MAX:                                                           \
                for (int j = 0; j < 8; j++)                                                \
                    part[j] = x[i + j] > part[j] ? x[i + j] : part[j];                     \
                break;                                                                     \
            case WF_CPU_KOP_MIN:                                                           \
                for (int j = 0; j < 8; j++)                                                \
                    part[j] = x[i + j] < part[j] ? x[i + j] : part[j];                     \
                break;                                                                     \
            case WF_CPU_KOP_AND:                                                           \
                for (int j = 0; j < 8; j++)                                                \
                    part[j] = (T)(part[j] & x[i + j]);                                     \
                break;                                                                     \
            default:                                                                       \
                for (int j = 0; j < 8; j++)                                                \
                    part[j] = (T)(part[j] | x[i + j]);                                     \
                break;                                                                     \
            }                                                                              \
        ACCUM(k, 8, acc, 0, part, 1);                                                      \
        ACCUM(k, n - whole, acc, 0, x + whole, 1);                                         \
    }
INT_ROW(row_u8, accum_u8, uint8_t, uint32_t, WRAP_U8)
INT_ROW(row_i32, accum_i32, int32_t, uint32_t, wf__cpu_wrap_i32)
INT_ROW(row_i64, accum_i64, int64_t, uint64_t, wf__cpu_wrap_i64)
INT_ROW(row_u64, accum_u64, uint64_t, uint64_t, WRAP_U64)

/* Leaf [lo, hi) of an integer or bool row. */
static wf_cpu_scalar leaf_int(const wf_cpu_row *r, int64_t lo, int64_t hi)
{
    wf_cpu_scalar acc = kop_identity(r->k, r->at);
    const size_t xi = wf_dtype_size(r->xdt);
    const bool direct = r->xdt == r->at && r->sx == 1;
    const int64_t step = direct ? hi - lo : WF_CPU_STAGE;
    int64_t buf[WF_CPU_STAGE];
    for (int64_t i0 = lo; i0 < hi; i0 += step) {
        const int64_t m = hi - i0 < step ? hi - i0 : step;
        const char *src = r->x + i0 * r->sx * (int64_t)xi;
        const void *v = src;
        if (!direct) {
            wf__cpu_convert_1d(m, src, r->xdt, r->sx, buf, r->at, 1);
            v = buf;
        }
        switch (r->at) {
        case WF_DTYPE_I32: row_i32(r->k, m, &acc.i32, v); break;
        case WF_DTYPE_I64: row_i64(r->k, m, &acc.i64, v); break;
        case WF_DTYPE_U64: row_u64(r->k, m, &acc.u64, v); break;
        default: row_u8(r->k, m, &acc.u8, v); break;
        }
    }
    return acc;
}

/* ================================================================ the tree */

typedef struct tree_ctx {
    const wf_cpu_row *row;
    int64_t n, leaves;
    wf_cpu_scalar *vals; /* computed leaves, or NULL: compute on the way */
} tree_ctx;

static wf_cpu_scalar leaf(const tree_ctx *t, int64_t j)
{
    if (t->vals != NULL)
        return t->vals[j];
    const int64_t lo = j * WF_CPU_LEAF, hi = lo + WF_CPU_LEAF < t->n ? lo + WF_CPU_LEAF : t->n;
    const wf_dtype at = t->row->at;
    return at == WF_DTYPE_F32 || at == WF_DTYPE_F64 ? leaf_float(t->row, lo, hi)
                                                    : leaf_int(t->row, lo, hi);
}

static wf_cpu_scalar tree(const tree_ctx *t, int64_t lo, int64_t hi)
{
    if (hi - lo == 1)
        return leaf(t, lo);
    const int64_t mid = lo + (hi - lo) / 2;
    wf_cpu_scalar a = tree(t, lo, mid);
    const wf_cpu_scalar b = tree(t, mid, hi);
    const wf_cpu_kop k = t->row->map == WF_CPU_ROW_PLAIN ? t->row->k : WF_CPU_KOP_SUM;
    wf__cpu_kop_combine1(k, t->row->at, &a, &b);
    return a;
}

static void leaves_chunk(void *p, int64_t begin, int64_t end)
{
    tree_ctx *t = p;
    tree_ctx one = *t;
    one.vals = NULL;
    for (int64_t j = begin; j < end; j++)
        t->vals[j] = leaf(&one, j);
}

/* Leaves per parallel chunk, and the fewest leaves worth a parallel pass.
 * Rows shorter than SHORT_ROW are folded in order (the lanes would cost
 * more than the row). */
enum { LEAVES_PER_CHUNK = 2, PARALLEL_LEAVES = 8, SHORT_ROW = 16 };

wf_cpu_scalar wf__cpu_row_reduce(const wf_cpu_row *r, int64_t n)
{
    const wf_cpu_kop k = r->map == WF_CPU_ROW_PLAIN ? r->k : WF_CPU_KOP_SUM;
    if (n <= 0)
        return kop_identity(k, r->at);
    if (n < SHORT_ROW && r->map == WF_CPU_ROW_PLAIN) { /* folded in order */
        wf_cpu_scalar acc = kop_identity(k, r->at);
        if (r->xdt == r->at) {
            wf__cpu_kop_combine_strided(k, r->at, n, &acc, 0, r->x, r->sx);
        } else {
            double buf[SHORT_ROW];
            wf__cpu_convert_1d(n, r->x, r->xdt, r->sx, buf, r->at, 1);
            wf__cpu_kop_combine_strided(k, r->at, n, &acc, 0, buf, 1);
        }
        return acc;
    }
    tree_ctx t = {r, n, (n + WF_CPU_LEAF - 1) / WF_CPU_LEAF, NULL};
    if (t.leaves >= PARALLEL_LEAVES && wf__pool_size() > 1)
        t.vals = wf__malloc((size_t)t.leaves * sizeof *t.vals); /* NULL: one leaf at a time */
    if (t.vals != NULL)
        wf__parallel_for(t.leaves, LEAVES_PER_CHUNK, leaves_chunk, &t);
    const wf_cpu_scalar v = tree(&t, 0, t.leaves);
    free(t.vals);
    return v;
}

/* ================================================================ many short rows */

/* Elements of the compute dtype a stack block holds (8 KB): rows are staged
 * (converted, shifted, exponentiated) a block at a time; longer rows go one
 * by one through wf__cpu_row_reduce. */
enum { ROWS_STAGE = 1024 };

/* One row at a time (integers, long rows, negative row strides). */
static void rows_one_by_one(const wf_cpu_row *r, int64_t n, int64_t rows, int64_t rs,
                            const void *a, int64_t sa, int64_t ys, void *vals)
{
    const size_t xi = wf_dtype_size(r->xdt), ai = wf_dtype_size(r->at);
    for (int64_t i = 0; i < rows; i++) {
        wf_cpu_row one = *r;
        one.x = r->x + i * rs * (int64_t)xi;
        if (a != NULL)
            one.a = r->at == WF_DTYPE_F64 ? ((const double *)a)[i * sa]
                                          : (double)((const float *)a)[i * sa];
        if (r->y != NULL)
            one.y = r->y + i * ys * (int64_t)ai;
        const wf_cpu_scalar v = wf__cpu_row_reduce(&one, n);
        memcpy((char *)vals + (size_t)i * ai, &v, ai);
    }
}

/* Float rows of another dtype or stride, converted a block of rows at a
 * time into contiguous rows of the compute dtype. */
static void rows_converted(const wf_cpu_row *r, int64_t n, int64_t rows, int64_t rs,
                           const void *a, int64_t sa, int64_t ys, void *vals)
{
    const size_t xi = wf_dtype_size(r->xdt), ai = wf_dtype_size(r->at);
    const int64_t per = ROWS_STAGE * (int64_t)sizeof(double) / (int64_t)ai / n;
    double buf[ROWS_STAGE];
    for (int64_t i0 = 0; i0 < rows; i0 += per) {
        const int64_t m = rows - i0 < per ? rows - i0 : per;
        for (int64_t i = 0; i < m; i++)
            wf__cpu_convert_1d(n, r->x + (i0 + i) * rs * (int64_t)xi, r->xdt, r->sx,
                               (char *)buf + (size_t)(i * n) * ai, r->at, 1);
        wf_cpu_row c = *r;
        c.x = (const char *)buf;
        c.xdt = r->at;
        c.sx = 1;
        if (r->y != NULL)
            c.y = r->y + i0 * ys * (int64_t)ai;
        wf__cpu_rows_reduce(&c, n, m, n, a != NULL ? (const char *)a + (size_t)(i0 * sa) * ai : NULL,
                            sa, ys, (char *)vals + (size_t)i0 * ai);
    }
}

/* Contiguous float rows of exp(x - a[i]): a block of rows shifted and
 * exponentiated at once (exp gives each element the same bits wherever it
 * lies in a block), stored to y, then their leaves. */
static void rows_exp(const wf_cpu_row *r, int64_t n, int64_t rows, int64_t rs, const void *a,
                     int64_t sa, int64_t ys, void *vals)
{
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    const bool f32 = r->at == WF_DTYPE_F32;
    const size_t ai = f32 ? sizeof(float) : sizeof(double);
    const int64_t per = ROWS_STAGE * (int64_t)sizeof(double) / (int64_t)ai / n;
    double t[ROWS_STAGE], e[ROWS_STAGE];
    for (int64_t i0 = 0; i0 < rows; i0 += per) {
        const int64_t m = rows - i0 < per ? rows - i0 : per;
        char *y = r->y != NULL ? r->y + i0 * ys * (int64_t)ai : NULL;
        const bool into_y = y != NULL && r->sy == 1 && ys == n;
        void *ev = into_y ? (void *)y : (void *)e;
        if (f32) {
            const float *x = (const float *)r->x + i0 * rs, *s = (const float *)a + i0 * sa;
            float *tf = (float *)t;
            for (int64_t i = 0; i < m; i++) {
                if (n >= SHORT_ROW) /* the variant's vector loop, worth a call */
                    isa->shift_f32(n, x + i * rs, s[i * sa], tf + i * n);
                else
                    for (int64_t j = 0; j < n; j++)
                        tf[i * n + j] = x[i * rs + j] - s[i * sa];
            }
            wf__cpu_exp_f32(m * n, tf, ev);
            isa->rows_f32(WF_CPU_KOP_SUM, m, n, ev, n, (float *)vals + i0);
        } else {
            const double *x = (const double *)r->x + i0 * rs, *s = (const double *)a + i0 * sa;
            for (int64_t i = 0; i < m; i++) {
                if (n >= SHORT_ROW)
                    isa->shift_f64(n, x + i * rs, s[i * sa], t + i * n);
                else
                    for (int64_t j = 0; j < n; j++)
                        t[i * n + j] = x[i * rs + j] - s[i * sa];
            }
            wf__cpu_exp_f64(m * n, t, ev);
            isa->rows_f64(WF_CPU_KOP_SUM, m, n, ev, n, (double *)vals + i0);
        }
        for (int64_t i = 0; y != NULL && !into_y && i < m; i++)
            wf__cpu_convert_1d(n, (const char *)e + (size_t)(i * n) * ai, r->at, 1,
                               y + i * ys * (int64_t)ai, r->at, r->sy);
    }
}

void wf__cpu_rows_reduce(const wf_cpu_row *r, int64_t n, int64_t rows, int64_t rs,
                         const void *a, int64_t sa, int64_t ys, void *vals)
{
    const wf_cpu_kop k = r->map == WF_CPU_ROW_PLAIN ? r->k : WF_CPU_KOP_SUM;
    const bool f32 = r->at == WF_DTYPE_F32, f64 = r->at == WF_DTYPE_F64;
    const size_t ai = wf_dtype_size(r->at);
    if (rows <= 0)
        return;
    if (n <= 0) {
        const wf_cpu_scalar id = kop_identity(k, r->at);
        for (int64_t i = 0; i < rows; i++)
            memcpy((char *)vals + (size_t)i * ai, &id, ai);
        return;
    }
    const int64_t block_rows = ROWS_STAGE * (int64_t)sizeof(double) / (int64_t)ai / n;
    const bool staged = r->xdt != r->at || r->sx != 1 || r->map == WF_CPU_ROW_EXP;
    if ((!f32 && !f64) || rs < 0 || n > WF_CPU_LEAF || (staged && block_rows < 1)) {
        rows_one_by_one(r, n, rows, rs, a, sa, ys, vals);
        return;
    }
    if (r->xdt != r->at || r->sx != 1) {
        rows_converted(r, n, rows, rs, a, sa, ys, vals);
        return;
    }
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    switch (r->map) {
    case WF_CPU_ROW_EXP: rows_exp(r, n, rows, rs, a, sa, ys, vals); break;
    case WF_CPU_ROW_SQDEV:
        if (f32)
            isa->rows_sqdev_f32(rows, n, (const float *)r->x, rs, a, sa, vals);
        else
            isa->rows_sqdev_f64(rows, n, (const double *)r->x, rs, a, sa, vals);
        break;
    default:
        if (n < SHORT_ROW && f32)
            isa->fold_f32(k, rows, n, (const float *)r->x, rs, vals);
        else if (n < SHORT_ROW)
            isa->fold_f64(k, rows, n, (const double *)r->x, rs, vals);
        else if (f32)
            isa->rows_f32(k, rows, n, (const float *)r->x, rs, vals);
        else
            isa->rows_f64(k, rows, n, (const double *)r->x, rs, vals);
        break;
    }
}

/* ================================================================ columns */

/* Rows of columns staged at a time (a stage of WF_CPU_STAGE values). */
enum { COL_STAGE = WF_CPU_STAGE / WF_CPU_COLS };

typedef struct cols_ctx {
    const wf_cpu_row *row;
    int64_t n;
    int w;
    float a[WF_CPU_COLS]; /* mean or shift per column, 0 past w */
} cols_ctx;

/* Leaf [lo, hi) of the columns into out[WF_CPU_COLS] (the leaf_float of each
 * column, all at once). */
static void leaf_cols(const cols_ctx *t, int64_t lo, int64_t hi, float *out)
{
    enum { W = WF_CPU_COLS, L = WF_CPU_LANES_F32 };
    const wf_cpu_row *r = t->row;
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    const wf_cpu_kop k = r->map == WF_CPU_ROW_PLAIN ? r->k : WF_CPU_KOP_SUM;
    const float *x = (const float *)r->x;
    float col_lanes[L * W] __attribute__((aligned(64)));
    wf__cpu_kop_fill(k, WF_DTYPE_F32, col_lanes, L * W);
    if (k == WF_CPU_KOP_SUM)
        for (int j = 0; j < L * W; j++)
            col_lanes[j] = -0.0f;
    static const float zeros[WF_CPU_COLS];
    float t_buf[COL_STAGE * W], v_buf[COL_STAGE * W];
    const bool staged = r->map == WF_CPU_ROW_EXP || t->w < W;
    for (int64_t i0 = lo; i0 < hi; i0 += COL_STAGE) {
        const int64_t m = hi - i0 < COL_STAGE ? hi - i0 : COL_STAGE;
        const float *v = x + i0 * r->sx;
        int64_t sv = r->sx;
        if (staged) { /* a block of whole rows of W columns, 0 past w */
            const float *a = r->map == WF_CPU_ROW_EXP ? t->a : zeros;
            if (t->w == W)
                isa->col_shift_f32(m, v, r->sx, a, t_buf);
            else
                for (int64_t i = 0; i < m; i++)
                    for (int c = 0; c < W; c++)
                        t_buf[i * W + c] = c < t->w ? v[i * r->sx + c] - a[c] : 0.0f;
            v = t_buf;
            sv = W;
        }
        if (r->map == WF_CPU_ROW_EXP) {
            wf__cpu_exp_f32(m * W, t_buf, v_buf);
            v = v_buf;
            float *y = r->y != NULL ? (float *)r->y + i0 * r->sy : NULL;
            if (y != NULL && t->w == W)
                isa->col_store_f32(m, v_buf, y, r->sy);
            else
                for (int64_t i = 0; y != NULL && i < m; i++)
                    memcpy(y + i * r->sy, v_buf + i * W, (size_t)t->w * sizeof *y);
        }
        if (r->map == WF_CPU_ROW_SQDEV)
            isa->col_sqdev_f32(col_lanes, m, v, sv, i0 - lo, t->a);
        else
            isa->col_lanes_f32(k, col_lanes, m, v, sv, i0 - lo);
    }
    /* The padding of the last partial group changes a lane only for the
     * squared deviations ((a - a)^2 = +0 turns a -0 lane into +0). */
    if (r->map == WF_CPU_ROW_SQDEV && (hi - lo) % L != 0)
        for (int64_t j = (hi - lo) % L; j < L; j++)
            for (int c = 0; c < W; c++)
                col_lanes[j * W + c] += 0.0f;
    for (int w = L / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            for (int c = 0; c < W; c++)
                col_lanes[j * W + c] =
                    wf__cpu_kop_f32(k, col_lanes[j * W + c], col_lanes[(j + w) * W + c]);
    memcpy(out, col_lanes, W * sizeof *out);
}

static void tree_cols(const cols_ctx *t, int64_t lo, int64_t hi, float *out)
{
    if (hi - lo == 1) {
        const int64_t a = lo * WF_CPU_LEAF, b = a + WF_CPU_LEAF < t->n ? a + WF_CPU_LEAF : t->n;
        leaf_cols(t, a, b, out);
        return;
    }
    const int64_t mid = lo + (hi - lo) / 2;
    float right[WF_CPU_COLS];
    tree_cols(t, lo, mid, out);
    tree_cols(t, mid, hi, right);
    const wf_cpu_kop k = t->row->map == WF_CPU_ROW_PLAIN ? t->row->k : WF_CPU_KOP_SUM;
    for (int c = 0; c < WF_CPU_COLS; c++)
        out[c] = wf__cpu_kop_f32(k, out[c], right[c]);
}

void wf__cpu_cols_reduce(const wf_cpu_row *r, int64_t n, int w, const float *a,
                         wf_cpu_scalar *out)
{
    const wf_cpu_kop k = r->map == WF_CPU_ROW_PLAIN ? r->k : WF_CPU_KOP_SUM;
    const float *x = (const float *)r->x;
    if (n <= 0 || (n < SHORT_ROW && r->map == WF_CPU_ROW_PLAIN)) { /* as the row form */
        for (int c = 0; c < w; c++) {
            out[c] = kop_identity(k, WF_DTYPE_F32);
            for (int64_t i = 0; i < n; i++)
                out[c].f32 = wf__cpu_kop_f32(k, out[c].f32, x[i * r->sx + c]);
        }
        return;
    }
    cols_ctx t = {r, n, w, {0}};
    for (int c = 0; c < w && a != NULL; c++)
        t.a[c] = a[c];
    float v[WF_CPU_COLS];
    tree_cols(&t, 0, (n + WF_CPU_LEAF - 1) / WF_CPU_LEAF, v);
    for (int c = 0; c < w; c++)
        out[c].f32 = v[c];
}

/* ================================================================ pairwise sums (cpu.h) */

float wf__cpu_sum_f32(int64_t n, const float *x, int64_t stride)
{
    const wf_cpu_row r = {WF_CPU_KOP_SUM, WF_DTYPE_F32, (const char *)x, stride,
                          WF_DTYPE_F32,   WF_CPU_ROW_PLAIN, 0, NULL, 0};
    return wf__cpu_row_reduce(&r, n).f32;
}

double wf__cpu_sum_f64(int64_t n, const double *x, int64_t stride)
{
    const wf_cpu_row r = {WF_CPU_KOP_SUM, WF_DTYPE_F64, (const char *)x, stride,
                          WF_DTYPE_F64,   WF_CPU_ROW_PLAIN, 0, NULL, 0};
    return wf__cpu_row_reduce(&r, n).f64;
}
