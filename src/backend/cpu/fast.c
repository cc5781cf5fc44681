/* CPU kernels of the fused ("fast") ops: layer_norm, rms_norm, rope,
 * scaled_dot_product_attention, silu, gelu, gelu_tanh.
 *
 * Every kernel computes in float32 (float64 for float64 outputs): half
 * types are converted a row or a block at a time into a float32 scratch
 * buffer, so f16/bf16 accumulate in float32. Rows (or blocks of elements)
 * are split over the intra-op pool. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linalg.h"
#include "backend/cpu/reduce.h"
#include "backend/cpu/vmath.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/linalg.h"
#include "runtime/pool.h"
#include "util/fault.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Element offset of row r of an array walked by rows over its first `nd`
 * dims (per-row index arithmetic only). */
static int64_t row_offset(int nd, const int64_t *shape, const int64_t *strides, int64_t r)
{
    int64_t off = 0;
    for (int d = nd - 1; d >= 0 && r > 0; d--) {
        off += (r % shape[d]) * strides[d];
        r /= shape[d];
    }
    return off;
}

/* ---------------------------------------------------------------- normalization */

/* layer_norm and rms_norm run on the rows engine (reduce_rows.c): rows of a
 * transposed input are gathered in 2-d tiles, every row is computed alone
 * (the same bits whatever the batch around it and the thread count), mean
 * and variance through the fixed-tree row reduction. */
typedef struct norm_ctx {
    const void *w, *b; /* compute type, or NULL */
    double eps;
    bool rms;
} norm_ctx;

/* One row: y = (x - mean) / sqrt(var + eps) * w + b, or for rms
 * y = x / sqrt(mean(x^2) + eps) * w. */
static void norm_row(const wf_cpu_rows *rows, int64_t n, const void *x, void *y, char *res)
{
    (void)res;
    const norm_ctx *c = rows->arg;
    const wf_dtype at = rows->at;
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    double mean = 0;
    if (!c->rms) {
        const wf_cpu_row r = {WF_CPU_KOP_SUM, at, x, 1, at, WF_CPU_ROW_PLAIN, 0, NULL, 0};
        const wf_cpu_scalar s = wf__cpu_row_reduce(&r, n);
        mean = at == WF_DTYPE_F64 ? s.f64 / (double)n : (double)(s.f32 / (float)n);
    }
    const wf_cpu_row r2 = {WF_CPU_KOP_SUM, at, x, 1, at, WF_CPU_ROW_SQDEV, mean, NULL, 0};
    const wf_cpu_scalar ss = wf__cpu_row_reduce(&r2, n);
    if (at == WF_DTYPE_F64) {
        const double inv = 1.0 / sqrt(ss.f64 / (double)n + c->eps);
        isa->norm_f64(n, x, mean, inv, c->w, c->b, y);
    } else {
        const float inv = 1.0f / sqrtf(ss.f32 / (float)n + (float)c->eps);
        isa->norm_f32(n, x, (float)mean, inv, c->w, c->b, y);
    }
}

/* A 1-d operand converted to the compute type (malloc'd), or NULL. */
static void *vector_in(const wf_array *v, wf_dtype cdt, bool *oom)
{
    void *buf = wf__malloc((size_t)(v->size + 1) * wf_dtype_size(cdt));
    if (buf == NULL) {
        *oom = true;
        return NULL;
    }
    wf__cpu_convert_1d(v->size, wf__array_data_ptr(v), v->dtype, v->strides[0], buf, cdt, 1);
    return buf;
}

static wf_status run_norm(wf_array *out, wf_array *const *inputs, int ninputs,
                          const wf_norm_params *p, bool rms)
{
    (void)ninputs;
    const wf_array *x = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    const wf_dtype cdt = out->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    norm_ctx c;
    memset(&c, 0, sizeof c);
    c.eps = p->eps;
    c.rms = rms;
    bool oom = false;
    int next = 1;
    void *w = p->has_weight ? vector_in(inputs[next++], cdt, &oom) : NULL;
    void *b = !oom && p->has_bias ? vector_in(inputs[next++], cdt, &oom) : NULL;
    c.w = w;
    c.b = b;
    if (!oom) {
        const wf_cpu_rows rows = {.x = x,
                                  .axes = (uint64_t)1 << (x->ndim - 1),
                                  .at = cdt,
                                  .y = out,
                                  .row = norm_row,
                                  .arg = &c,
                                  .row_cost = 4};
        st = wf__cpu_rows_run(&rows);
    }
    free(w);
    free(b);
    if (oom || st == WF_ERR_OUT_OF_MEMORY)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory for scratch rows",
                         rms ? "wf_rms_norm" : "wf_layer_norm");
    return st;
}

wf_status wf__cpu_layer_norm(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    return run_norm(out, inputs, ninputs, params, false);
}

wf_status wf__cpu_rms_norm(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params)
{
    return run_norm(out, inputs, ninputs, params, true);
}

/* ---------------------------------------------------------------- rope */

typedef struct rope_ctx {
    const char *x;
    wf_dtype xdt, cdt;
    int outer_nd;
    const int64_t *outer_shape, *outer_strides;
    int64_t seq, f, sx, half;
    bool traditional;
    void *cos_tab, *sin_tab; /* (seq, half) in the compute type */
    double base, scale;
    int64_t offset, dims;
    char *out;
    atomic_int failed;
} rope_ctx;

static void rope_table(void *vctx, int64_t begin, int64_t end)
{
    rope_ctx *c = vctx;
    for (int64_t s = begin; s < end; s++) {
        const double pos = ((double)c->offset + (double)s) * c->scale;
        for (int64_t i = 0; i < c->half; i++) {
            const double theta = pos * pow(c->base, -(double)(2 * i) / (double)c->dims);
            const double cs = cos(theta), sn = sin(theta);
            if (c->cdt == WF_DTYPE_F64) {
                ((double *)c->cos_tab)[s * c->half + i] = cs;
                ((double *)c->sin_tab)[s * c->half + i] = sn;
            } else {
                ((float *)c->cos_tab)[s * c->half + i] = (float)cs;
                ((float *)c->sin_tab)[s * c->half + i] = (float)sn;
            }
        }
    }
}

#define ROPE_ROW(NAME, T)                                                               \
    static void NAME(int64_t f, int64_t half, bool traditional, const T *restrict x,   \
                     const T *restrict cs, const T *restrict sn, T *restrict y)        \
    {                                                                                   \
        if (traditional) {                                                              \
            for (int64_t i = 0; i < half; i++) {                                        \
                const T x1 = x[2 * i], x2 = x[2 * i + 1];                               \
                y[2 * i] = x1 * cs[i] - x2 * sn[i];                                     \
                y[2 * i + 1] = x1 * sn[i] + x2 * cs[i];                                 \
            }                                                                           \
        } else {                                                                        \
            for (int64_t i = 0; i < half; i++) {                                        \
                const T x1 = x[i], x2 = x[i + half];                                    \
                y[i] = x1 * cs[i] - x2 * sn[i];                                         \
                y[i + half] = x1 * sn[i] + x2 * cs[i];                                  \
            }                                                                           \
        }                                                                               \
        for (int64_t i = 2 * half; i < f; i++)                                          \
            y[i] = x[i];                                                                \
    }

ROPE_ROW(rope_row_f32, float)
ROPE_ROW(rope_row_f64, double)

static void rope_rows(void *vctx, int64_t begin, int64_t end)
{
    rope_ctx *c = vctx;
    const int64_t n = c->f;
    const size_t citem = wf_dtype_size(c->cdt), xitem = wf_dtype_size(c->xdt);
    char *buf = wf__malloc(2 * (size_t)n * citem);
    if (buf == NULL) {
        atomic_store(&c->failed, 1);
        return;
    }
    char *ybuf = buf + (size_t)n * citem;
    for (int64_t r = begin; r < end; r++) {
        const int64_t s = r % c->seq;
        const char *src =
            c->x + row_offset(c->outer_nd, c->outer_shape, c->outer_strides, r) * (int64_t)xitem;
        const void *xr = src;
        if (c->xdt != c->cdt || c->sx != 1) {
            wf__cpu_convert_1d(n, src, c->xdt, c->sx, buf, c->cdt, 1);
            xr = buf;
        }
        char *dst = c->out + (size_t)(r * n) * xitem;
        void *y = c->xdt == c->cdt ? (void *)dst : (void *)ybuf;
        const size_t toff = (size_t)(s * c->half) * citem;
        if (c->cdt == WF_DTYPE_F64)
            rope_row_f64(n, c->half, c->traditional, xr,
                         (const double *)((const char *)c->cos_tab + toff),
                         (const double *)((const char *)c->sin_tab + toff), y);
        else
            rope_row_f32(n, c->half, c->traditional, xr,
                         (const float *)((const char *)c->cos_tab + toff),
                         (const float *)((const char *)c->sin_tab + toff), y);
        if (y == ybuf)
            wf__cpu_convert_1d(n, ybuf, c->cdt, 1, dst, c->xdt, 1);
    }
    free(buf);
}

wf_status wf__cpu_rope(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_rope_params *p = params;
    const wf_array *x = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    rope_ctx c;
    memset(&c, 0, sizeof c);
    c.x = wf__array_data_ptr(x);
    c.xdt = x->dtype;
    c.cdt = x->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    c.outer_nd = x->ndim - 1;
    c.outer_shape = x->shape;
    c.outer_strides = x->strides;
    c.seq = x->shape[x->ndim - 2];
    c.f = x->shape[x->ndim - 1];
    c.sx = x->strides[x->ndim - 1];
    c.half = p->dims / 2;
    c.dims = p->dims;
    c.traditional = p->traditional;
    c.base = p->base;
    c.scale = p->scale;
    c.offset = p->offset;
    c.out = wf__array_data_ptr(out);
    atomic_init(&c.failed, 0);
    const size_t tab = (size_t)(c.seq * c.half + 1) * wf_dtype_size(c.cdt);
    c.cos_tab = wf__malloc(tab);
    c.sin_tab = wf__malloc(tab);
    if (c.cos_tab && c.sin_tab) {
        wf__parallel_for(c.seq, max64(1, 4096 / max64(1, c.half)), rope_table, &c);
        const int64_t rows = out->size / c.f;
        wf__parallel_for(rows, max64(1, 16384 / c.f), rope_rows, &c);
    }
    const bool failed = !c.cos_tab || !c.sin_tab || atomic_load(&c.failed);
    free(c.cos_tab);
    free(c.sin_tab);
    if (failed)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_rope: out of memory for scratch rows");
    return WF_OK;
}

/* ---------------------------------------------------------------- attention
 *
 * Flash-attention style: for each batch entry and block of bq queries, the
 * keys are visited in blocks of bk with an online softmax (running max m,
 * running sum l, output accumulator rescaled when the max grows):
 *   S = scale * Q_blk K_blk^T (gemm), S += mask / -inf where masked,
 *   P = exp(S - m_new), O = O * exp(m_old - m_new) + P V_blk (gemm),
 * and O / l at the end. Memory is O(bq * bk) per thread whatever L is, and
 * with `causal` key blocks past the last visible key are skipped. The
 * products run on weft's GEMM on the unit's thread while the (batch, query
 * block) units are spread over weft's pool. Reproducible: the key blocks
 * depend on Lk only, never on Lq or the thread count, and the GEMM gives a
 * query row the same bits whatever rows share its block (gemm.h), so a
 * row's result does not depend on the other queries.
 * A query row whose keys are all masked gets zeros (not NaN): its running
 * sum stays 0 and the division is skipped. */

typedef struct sdpa_ctx {
    wf_dtype cdt, odt, mdt;
    int nb;
    int64_t bshape[WF_MAX_NDIM];
    int64_t lq, lk, d, dv, bq, bk, qblocks;
    wf_cpu_mm_operand q, k, v;
    int mask_kind;
    const char *mask;
    int64_t mbstrides[WF_MAX_NDIM], mi, mj;
    bool causal;
    double scale;
    char *out;
    int isa; /* weft's GEMM variant, fixed for the whole op */
    atomic_int failed;
} sdpa_ctx;

/* S (rows x cols) = scale * Q[q0..] K[j0..]^T on weft's GEMM. False when
 * the GEMM's scratch could not grow. */
static bool sdpa_scores(const sdpa_ctx *c, int64_t rows, int64_t cols, const char *qp,
                        const char *kp, void *S, wf_gemm_scratch *scratch)
{
    wf_gemm_args g;
    wf__gemm_args_init(&g, c->cdt, rows, cols, c->d, qp, c->q.rs, c->q.cs, kp, c->k.cs, c->k.rs,
                       S, cols, c->scale, 0.0);
    g.isa = c->isa;
    return wf__gemm_serial(&g, scratch) == WF_OK;
}

/* O (rows x dv) += P (rows x cols) V[j0..]. */
static bool sdpa_values(const sdpa_ctx *c, int64_t rows, int64_t cols, const void *P,
                        const char *vp, void *O, wf_gemm_scratch *scratch)
{
    wf_gemm_args g;
    wf__gemm_args_init(&g, c->cdt, rows, c->dv, cols, P, cols, 1, vp, c->v.rs, c->v.cs, O, c->dv,
                       1.0, 1.0);
    g.isa = c->isa;
    return wf__gemm_serial(&g, scratch) == WF_OK;
}

/* A unit's row steps, written over 8 elements at a time so that GCC
 * vectorizes them (a loop of unknown length stays scalar at -O2): these
 * rows are short (a block of keys, a head's values), and their scalar
 * loops took most of a unit's time beside its two small products (MiniLM,
 * 32 tokens: the max alone, one compare chain, a third). The max of 8
 * partial maxima is the row's max (max is exact), so the bits are those of
 * a loop in order. */
#define SDPA_ROW_STEPS(SUFFIX, T)                                                       \
    static T row_max_##SUFFIX(int64_t n, const T *s)                                    \
    {                                                                                   \
        T part[8];                                                                      \
        for (int t = 0; t < 8; t++)                                                     \
            part[t] = -(T)INFINITY;                                                     \
        int64_t j = 0;                                                                  \
        for (; j + 8 <= n; j += 8)                                                      \
            for (int t = 0; t < 8; t++)                                                 \
                part[t] = s[j + t] > part[t] ? s[j + t] : part[t];                      \
        for (; j < n; j++)                                                              \
            part[0] = s[j] > part[0] ? s[j] : part[0];                                  \
        T m = part[0];                                                                  \
        for (int t = 1; t < 8; t++)                                                     \
            m = part[t] > m ? part[t] : m;                                              \
        return m;                                                                       \
    }                                                                                   \
    static void row_add_##SUFFIX(int64_t n, T *y, T v) /* y += v */                   \
    {                                                                                   \
        int64_t j = 0;                                                                  \
        for (; j + 8 <= n; j += 8)                                                      \
            for (int t = 0; t < 8; t++)                                                 \
                y[j + t] += v;                                                          \
        for (; j < n; j++)                                                              \
            y[j] += v;                                                                  \
    }                                                                                   \
    static void row_add_row_##SUFFIX(int64_t n, T *y, const T *a) /* y += a */         \
    {                                                                                   \
        int64_t j = 0;                                                                  \
        for (; j + 8 <= n; j += 8)                                                      \
            for (int t = 0; t < 8; t++)                                                 \
                y[j + t] += a[j + t];                                                   \
        for (; j < n; j++)                                                              \
            y[j] += a[j];                                                               \
    }                                                                                   \
    static void row_scale_##SUFFIX(int64_t n, T *y, T f) /* y *= f */                  \
    {                                                                                   \
        int64_t j = 0;                                                                  \
        for (; j + 8 <= n; j += 8)                                                      \
            for (int t = 0; t < 8; t++)                                                 \
                y[j + t] *= f;                                                          \
        for (; j < n; j++)                                                              \
            y[j] *= f;                                                                  \
    }

SDPA_ROW_STEPS(f32, float)
SDPA_ROW_STEPS(f64, double)

#define SDPA_UNIT(NAME, SUFFIX, T, EXPV, EXPS)                                          \
    static bool NAME(const sdpa_ctx *c, int64_t u, T *S, T *P, T *O, T *mrow, T *mx, T *l, \
                     wf_gemm_scratch *scratch)                                          \
    {                                                                                   \
        const int64_t item = sizeof(T); /* offsets may be negative: signed */            \
        const int64_t bi = u / c->qblocks, q0 = (u % c->qblocks) * c->bq;              \
        const int64_t rows = min64(c->bq, c->lq - q0), dv = c->dv;                      \
        const char *qp = c->q.data + (wf__cpu_mm_batch_offset(&c->q, c->bshape, bi) +  \
                                      wf__cpu_mm_row_offset(&c->q, q0)) * item;        \
        const char *kp = c->k.data + wf__cpu_mm_batch_offset(&c->k, c->bshape, bi) * item; \
        const char *vp = c->v.data + wf__cpu_mm_batch_offset(&c->v, c->bshape, bi) * item; \
        const char *mp = NULL;                                                          \
        const size_t mitem = c->mask ? wf_dtype_size(c->mdt) : 0;                        \
        if (c->mask) {                                                                  \
            int64_t moff = 0, idx = bi;                                                 \
            for (int d = c->nb - 1; d >= 0; d--) {                                      \
                moff += (idx % c->bshape[d]) * c->mbstrides[d];                         \
                idx /= c->bshape[d];                                                    \
            }                                                                           \
            mp = c->mask + moff * (int64_t)mitem;                                       \
        }                                                                               \
        const int64_t shift = c->lk - c->lq; /* causal: query i sees keys j <= i + shift */ \
        for (int64_t i = 0; i < rows * dv; i++)                                         \
            O[i] = 0;                                                                   \
        for (int64_t i = 0; i < rows; i++) {                                            \
            mx[i] = -(T)INFINITY;                                                       \
            l[i] = 0;                                                                   \
        }                                                                               \
        int64_t kend = c->lk;                                                           \
        if (c->causal)                                                                  \
            kend = min64(c->lk, max64(0, q0 + rows + shift));                           \
        for (int64_t j0 = 0; j0 < kend; j0 += c->bk) {                                  \
            const int64_t cols = min64(c->bk, kend - j0);                               \
            if (c->d > 0) {                                                             \
                if (!sdpa_scores(c, rows, cols, qp,                                     \
                                 kp + wf__cpu_mm_row_offset(&c->k, j0) * item, S, \
                                 scratch))                                              \
                    return false;                                                       \
            } else                                                                      \
                for (int64_t i = 0; i < rows * cols; i++)                               \
                    S[i] = 0;                                                           \
            for (int64_t i = 0; i < rows; i++) {                                        \
                T *s = S + i * cols, *p = P + i * cols;                                 \
                if (mp && (i == 0 || c->mi != 0)) /* a padding mask: one row for all */ \
                    wf__cpu_convert_1d(cols, mp + ((q0 + i) * c->mi + j0 * c->mj) * (int64_t)mitem, \
                                       c->mdt, c->mj, mrow, c->cdt, 1);                 \
                if (mp) {                                                               \
                    if (c->mask_kind == WF_SDPA_MASK_BOOL) {                            \
                        for (int64_t j = 0; j < cols; j++)                              \
                            s[j] = mrow[j] != 0 ? s[j] : -(T)INFINITY;                  \
                    } else {                                                            \
                        row_add_row_##SUFFIX(cols, s, mrow);                            \
                    }                                                                   \
                }                                                                       \
                if (c->causal) {                                                        \
                    const int64_t first_hidden = q0 + i + shift + 1;                    \
                    for (int64_t j = max64(first_hidden - j0, 0); j < cols; j++)        \
                        s[j] = -(T)INFINITY;                                            \
                }                                                                       \
                const T bmax = row_max_##SUFFIX(cols, s);                               \
                const T mnew = mx[i] > bmax ? mx[i] : bmax;                             \
                if (mnew == -(T)INFINITY) { /* all masked so far */                     \
                    for (int64_t j = 0; j < cols; j++)                                  \
                        p[j] = 0;                                                       \
                    continue;                                                           \
                }                                                                       \
                const T corr = mx[i] == -(T)INFINITY ? (T)0 : EXPS(mx[i] - mnew);       \
                row_add_##SUFFIX(cols, s, -mnew);                                       \
                EXPV(cols, s, p);                                                       \
                T acc[8] = {0};                                                         \
                int64_t j = 0;                                                          \
                for (; j + 8 <= cols; j += 8)                                           \
                    for (int t = 0; t < 8; t++)                                         \
                        acc[t] += p[j + t];                                             \
                T sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +                       \
                        ((acc[4] + acc[5]) + (acc[6] + acc[7]));                        \
                for (; j < cols; j++)                                                   \
                    sum += p[j];                                                        \
                l[i] = l[i] * corr + sum;                                               \
                if (corr != 1 && mx[i] != -(T)INFINITY) /* else O's row is 0 */         \
                    row_scale_##SUFFIX(dv, O + i * dv, corr);                           \
                mx[i] = mnew;                                                           \
            }                                                                           \
            if (!sdpa_values(c, rows, cols, P,                                          \
                             vp + wf__cpu_mm_row_offset(&c->v, j0) * item, O, scratch)) \
                return false;                                                           \
        }                                                                               \
        const size_t oitem = wf_dtype_size(c->odt);                                     \
        for (int64_t i = 0; i < rows; i++) {                                            \
            T *o = O + i * dv;                                                          \
            const T inv = l[i] == 0 ? (T)0 : (T)1 / l[i];                               \
            row_scale_##SUFFIX(dv, o, inv);                                             \
            char *dst = c->out + (size_t)((bi * c->lq + q0 + i) * dv) * oitem;          \
            wf__cpu_convert_1d(dv, o, c->cdt, 1, dst, c->odt, 1);                       \
        }                                                                               \
        return true;                                                                    \
    }

SDPA_UNIT(sdpa_unit_f32, f32, float, wf__cpu_exp_f32, expf)
SDPA_UNIT(sdpa_unit_f64, f64, double, wf__cpu_exp_f64, exp)

static void sdpa_units(void *vctx, int64_t begin, int64_t end)
{
    sdpa_ctx *c = vctx;
    const size_t item = wf_dtype_size(c->cdt);
    const size_t n = (size_t)(2 * c->bq * c->bk + c->bq * c->dv + c->bk + 2 * c->bq + 8);
    char *buf = wf__malloc(n * item);
    if (buf == NULL) {
        atomic_store(&c->failed, 1);
        return;
    }
    char *S = buf, *P = S + (size_t)(c->bq * c->bk) * item, *O = P + (size_t)(c->bq * c->bk) * item;
    char *mrow = O + (size_t)(c->bq * c->dv) * item, *mx = mrow + (size_t)c->bk * item;
    char *l = mx + (size_t)c->bq * item;
    wf_gemm_scratch scratch = {0};
    for (int64_t u = begin; u < end; u++) {
        const bool ok =
            c->cdt == WF_DTYPE_F64
                ? sdpa_unit_f64(c, u, (double *)S, (double *)P, (double *)O, (double *)mrow,
                                (double *)mx, (double *)l, &scratch)
                : sdpa_unit_f32(c, u, (float *)S, (float *)P, (float *)O, (float *)mrow,
                                (float *)mx, (float *)l, &scratch);
        if (!ok) {
            atomic_store(&c->failed, 1);
            break;
        }
    }
    wf__gemm_scratch_free(&scratch);
    free(buf);
}

wf_status wf__cpu_sdpa(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_sdpa_params *p = params;
    const wf_array *q = inputs[0], *k = inputs[1], *v = inputs[2];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    sdpa_ctx c;
    memset(&c, 0, sizeof c);
    c.cdt = out->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    c.odt = out->dtype;
    c.nb = out->ndim - 2;
    int64_t batches = 1;
    for (int d = 0; d < c.nb; d++) {
        c.bshape[d] = out->shape[d];
        batches *= out->shape[d];
    }
    c.lq = q->shape[q->ndim - 2];
    c.d = q->shape[q->ndim - 1];
    c.lk = k->shape[k->ndim - 2];
    c.dv = v->shape[v->ndim - 1];
    c.isa = wf__gemm_isa();
    c.scale = p->scale;
    c.causal = p->causal;
    c.mask_kind = p->mask_kind;
    if (p->mask_kind != WF_SDPA_MASK_NONE) {
        const wf_array *m = inputs[3];
        c.mask = wf__array_data_ptr(m);
        c.mdt = m->dtype;
        for (int d = 0; d < c.nb; d++)
            c.mbstrides[d] = m->strides[d];
        c.mi = m->strides[c.nb];
        c.mj = m->strides[c.nb + 1];
    }
    c.out = wf__array_data_ptr(out);
    atomic_init(&c.failed, 0);
    /* Key blocks of 128 (part of the result's bits: they depend on Lk
     * only). Query blocks only share work: the largest of 84 (not when
     * causal: less masked work), 42, 28 rows (whole GEMM tiles of every
     * variant) that still leaves 32 units to share, else 14. */
    c.bk = min64(max64(c.lk, 1), 128);
    static const int64_t rows[] = {84, 42, 28, 14};
    for (int i = c.causal ? 1 : 0; i < 4; i++) {
        c.bq = rows[i];
        if (batches * ((c.lq + c.bq - 1) / c.bq) >= 32)
            break;
    }
    c.bq = min64(c.bq, c.lq);
    c.qblocks = (c.lq + c.bq - 1) / c.bq;

    st = wf__cpu_mm_prepare(q, c.nb, c.bshape, c.cdt, &c.q);
    if (st == WF_OK)
        st = wf__cpu_mm_prepare(k, c.nb, c.bshape, c.cdt, &c.k);
    if (st == WF_OK)
        st = wf__cpu_mm_prepare(v, c.nb, c.bshape, c.cdt, &c.v);
    if (st == WF_OK) {
        wf__parallel_for(batches * c.qblocks, 1, sdpa_units, &c);
        if (atomic_load(&c.failed))
            st = wf__error(WF_ERR_OUT_OF_MEMORY,
                           "wf_scaled_dot_product_attention: out of memory for scratch blocks");
    }
    wf__cpu_mm_release(&c.q);
    wf__cpu_mm_release(&c.k);
    wf__cpu_mm_release(&c.v);
    return st;
}

/* ---------------------------------------------------------------- activations
 *
 * silu(x) = x / (1 + e^-x); gelu(x) = x * Phi(x) = x/2 * erfc(-x / sqrt 2);
 * gelu_tanh(x) = x/2 * (1 + tanh(u)) = x / (1 + e^(-2u)) with
 * u = sqrt(2/pi) (x + 0.044715 x^3). The vmath kernels keep the negative
 * tails (down to the subnormals) and give -0 at -inf (the limit); NaN stays
 * NaN. float64 gelu is scalar (libm erfc, see wf__vm_gelu_f64_scalar). */

enum act_kind { ACT_SILU, ACT_GELU, ACT_GELU_TANH };
enum { ACT_BLOCK = 256 };

static void act_f32(int64_t n, const float *restrict x, float *restrict y, int kind)
{
    if (kind == ACT_SILU)
        wf__vm_silu_f32(n, x, y);
    else if (kind == ACT_GELU)
        wf__vm_gelu_f32(n, x, y);
    else
        wf__vm_gelu_tanh_f32(n, x, y);
}

static void act_f64(int64_t n, const double *restrict x, double *restrict y, int kind)
{
    if (kind == ACT_SILU) {
        wf__vm_silu_f64(n, x, y);
    } else if (kind == ACT_GELU) {
        for (int64_t i = 0; i < n; i++)
            y[i] = wf__vm_gelu_f64_scalar(x[i]);
    } else {
        wf__vm_gelu_tanh_f64(n, x, y);
    }
}

typedef struct act_ctx {
    wf_dtype dtype;
    int kind;
} act_ctx;

/* Contiguous float32/float64 runs go straight to the block function;
 * anything else (strided, half types) is staged through blocks. */
static void act_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *vctx)
{
    const act_ctx *c = vctx;
    const bool f64 = c->dtype == WF_DTYPE_F64;
    const wf_dtype cdt = f64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    if (c->dtype == cdt && strides[0] == 1 && strides[1] == 1) {
        if (f64)
            act_f64(n, (const double *)ptrs[1], (double *)ptrs[0], c->kind);
        else
            act_f32(n, (const float *)ptrs[1], (float *)ptrs[0], c->kind);
        return;
    }
    const int64_t item = (int64_t)wf_dtype_size(c->dtype);
    double in[ACT_BLOCK], res[ACT_BLOCK]; /* room for either compute type */
    for (int64_t i0 = 0; i0 < n; i0 += ACT_BLOCK) {
        const int64_t m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
        const char *src = ptrs[1] + i0 * strides[1] * item;
        char *dst = ptrs[0] + i0 * strides[0] * item;
        wf__cpu_convert_1d(m, src, c->dtype, strides[1], in, cdt, 1);
        if (f64)
            act_f64(m, in, res, c->kind);
        else
            act_f32(m, (const float *)in, (float *)res, c->kind);
        wf__cpu_convert_1d(m, res, cdt, 1, dst, c->dtype, strides[0]);
    }
}

static wf_status run_act(wf_array *out, wf_array *const *inputs, int kind)
{
    const wf_array *a = inputs[0];
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 1);
    if (st != WF_OK)
        return st;
    const size_t item = wf_dtype_size(out->dtype);
    char *data[2] = {wf__array_data_ptr(out), wf__array_data_ptr(a)};
    const size_t sizes[2] = {item, item};
    const int64_t *strides[2] = {out->strides, a->strides};
    act_ctx c = {out->dtype, kind};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 2, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_iter_run_parallel(&it, act_inner, &c, WF_CPU_CHUNK_COSTLY);
    return WF_OK;
}

wf_status wf__cpu_silu(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    return run_act(out, inputs, ACT_SILU);
}

wf_status wf__cpu_gelu(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    return run_act(out, inputs, ACT_GELU);
}

wf_status wf__cpu_gelu_tanh(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params)
{
    (void)ninputs;
    (void)params;
    return run_act(out, inputs, ACT_GELU_TANH);
}
