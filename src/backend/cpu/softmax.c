/* softmax and logsumexp.
 *
 * softmax = exp(x - m) / sum(exp(x - m)) and logsumexp = m + log(sum(exp(x
 * - m))), m the max, or 0 when the max is infinite (all -inf, or a +inf
 * present) so that no inf - inf appears. Both compute in float32 (float64
 * for float64) and round once into half types.
 *
 * When the reduced axes form one dim of the input's memory-order walk (one
 * axis, or axes contiguous with each other) the rows engine runs one row at
 * a time: max, exponentials and their sum through the fixed tree, scaling;
 * a row stays in cache and its bits depend on the row alone. Otherwise
 * (several separate reduced dims, or very long strided rows) the general
 * form runs passes over the whole input through the reproducible driver. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "prim/reduce.h"
#include "runtime/pool.h"

static double shift_of(double m) { return isinf(m) ? 0.0 : m; }

static double scalar_value(wf_dtype at, const wf_cpu_scalar *v)
{
    return at == WF_DTYPE_F64 ? v->f64 : (double)v->f32;
}

/* The max and the sum of exp(x - shift) of a contiguous row of dtype at;
 * the exponentials are stored to y when given. */
static double row_max(wf_dtype at, int64_t len, const void *x)
{
    const wf_cpu_row r = {WF_CPU_KOP_MAX, at, x, 1, at, WF_CPU_ROW_PLAIN, 0, NULL, 0};
    const wf_cpu_scalar m = wf__cpu_row_reduce(&r, len);
    return scalar_value(at, &m);
}

static double row_expsum(wf_dtype at, int64_t len, const void *x, double shift, void *y)
{
    const wf_cpu_row r = {WF_CPU_KOP_SUM, at, x, 1, at, WF_CPU_ROW_EXP, shift, y, 1};
    const wf_cpu_scalar s = wf__cpu_row_reduce(&r, len);
    return scalar_value(at, &s);
}

/* ================================================================ rows */

struct scale_arg {
    wf_dtype at;
    void *y;
    double inv;
};

static void scale_chunk(void *p, int64_t begin, int64_t end)
{
    const struct scale_arg *a = p;
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    if (a->at == WF_DTYPE_F64)
        isa->scale_f64(end - begin, (double *)a->y + begin, a->inv);
    else
        isa->scale_f32(end - begin, (float *)a->y + begin, (float)a->inv);
}

static void softmax_row(const wf_cpu_rows *rows, int64_t len, const void *x, void *y, char *res)
{
    (void)res;
    const wf_dtype at = rows->at;
    const double shift = shift_of(row_max(at, len, x));
    const double s = row_expsum(at, len, x, shift, y);
    /* 1/s rounded to the compute dtype, then one product per element. */
    const double inv = at == WF_DTYPE_F64 ? 1.0 / s : (double)(1.0f / (float)s);
    struct scale_arg a = {at, y, inv};
    wf__parallel_for(len, WF_CPU_RED_CHEAP, scale_chunk, &a);
}

static void lse_row(const wf_cpu_rows *rows, int64_t len, const void *x, void *y, char *res)
{
    (void)y;
    const wf_dtype at = rows->at;
    const double shift = shift_of(row_max(at, len, x));
    const double s = row_expsum(at, len, x, shift, NULL);
    if (at == WF_DTYPE_F64)
        *(double *)res = shift + log(s);
    else
        *(float *)res = (float)shift + logf((float)s);
}

/* Short rows, many at a time: the maxima, the exponentials and their sums
 * through wf__cpu_rows_reduce (the bits of row_max and row_expsum), then
 * per row what softmax_row / lse_row do with them. */
enum { BATCH_BLOCK = 256 };

/* m (count values of dtype at) becomes the shifts. */
static void shifts_of(wf_dtype at, int64_t count, void *m)
{
    for (int64_t i = 0; i < count; i++) {
        if (at == WF_DTYPE_F64)
            ((double *)m)[i] = shift_of(((double *)m)[i]);
        else
            ((float *)m)[i] = (float)shift_of(((float *)m)[i]);
    }
}

/* The shifts and sums of exp(x - shift) of c rows (exponentials to y when
 * given). */
static void batch_max_expsum(wf_dtype at, int64_t len, int64_t c, const char *x, int64_t xs,
                             char *y, int64_t ys, void *m, void *s)
{
    const wf_cpu_row rm = {WF_CPU_KOP_MAX, at, x, 1, at, WF_CPU_ROW_PLAIN, 0, NULL, 0};
    wf__cpu_rows_reduce(&rm, len, c, xs, NULL, 0, 0, m);
    shifts_of(at, c, m);
    const wf_cpu_row re = {WF_CPU_KOP_SUM, at, x, 1, at, WF_CPU_ROW_EXP, 0, y, 1};
    wf__cpu_rows_reduce(&re, len, c, xs, m, 1, ys, s);
}

static void softmax_batch(const wf_cpu_rows *rows, int64_t len, int64_t g, const void *x,
                          int64_t xs, void *y, int64_t ys, char *res, int64_t res_step)
{
    (void)res;
    (void)res_step;
    const wf_dtype at = rows->at;
    const size_t ai = wf_dtype_size(at);
    double m[BATCH_BLOCK], s[BATCH_BLOCK]; /* room for values of either dtype */
    for (int64_t i0 = 0; i0 < g; i0 += BATCH_BLOCK) {
        const int64_t c = g - i0 < BATCH_BLOCK ? g - i0 : BATCH_BLOCK;
        char *yb = (char *)y + i0 * ys * (int64_t)ai;
        batch_max_expsum(at, len, c, (const char *)x + i0 * xs * (int64_t)ai, xs, yb, ys, m, s);
        for (int64_t i = 0; i < c; i++) {
            /* 1/s rounded to the compute dtype, then one product per element. */
            if (at == WF_DTYPE_F64) {
                double *row = (double *)yb + i * ys;
                const double inv = 1.0 / s[i];
                for (int64_t j = 0; j < len; j++)
                    row[j] *= inv;
            } else {
                float *row = (float *)yb + i * ys;
                const float inv = 1.0f / ((float *)s)[i];
                for (int64_t j = 0; j < len; j++)
                    row[j] *= inv;
            }
        }
    }
}

static void lse_batch(const wf_cpu_rows *rows, int64_t len, int64_t g, const void *x,
                      int64_t xs, void *y, int64_t ys, char *res, int64_t res_step)
{
    (void)y;
    (void)ys;
    const wf_dtype at = rows->at;
    const size_t ai = wf_dtype_size(at);
    double m[BATCH_BLOCK], s[BATCH_BLOCK];
    for (int64_t i0 = 0; i0 < g; i0 += BATCH_BLOCK) {
        const int64_t c = g - i0 < BATCH_BLOCK ? g - i0 : BATCH_BLOCK;
        batch_max_expsum(at, len, c, (const char *)x + i0 * xs * (int64_t)ai, xs, NULL, 0, m, s);
        char *r = res + i0 * res_step;
        for (int64_t i = 0; i < c; i++) {
            if (at == WF_DTYPE_F64)
                *(double *)(r + i * res_step) = m[i] + log(s[i]);
            else
                *(float *)(r + i * res_step) = ((float *)m)[i] + logf(((float *)s)[i]);
        }
    }
}

/* Adjacent float32 columns (an axis that is not innermost): the same
 * steps with the column form of the tree, so each column gets the bits the
 * row form gives it. Whole groups of WF_CPU_COLS columns are read once, all
 * groups in one pass over the strided rows, into contiguous blocks of len x
 * WF_CPU_COLS that the passes then share (the exponentials replace the
 * values there) and that are written back in one pass; a last partial group
 * (or all of them, if the blocks cannot be had) is read where it is. */

/* The shifts and sums of exp(x - shift) of w columns of x (rows sx apart);
 * the exponentials go to y (rows sy apart). */
static void columns_max_expsum(int64_t len, int w, const float *x, int64_t sx, float *y,
                               int64_t sy, float *shift, wf_cpu_scalar *s)
{
    wf_cpu_scalar m[WF_CPU_COLS];
    const wf_cpu_row rm = {WF_CPU_KOP_MAX, WF_DTYPE_F32, (const char *)x, sx, WF_DTYPE_F32,
                           WF_CPU_ROW_PLAIN, 0, NULL, 0};
    wf__cpu_cols_reduce(&rm, len, w, NULL, m);
    for (int c = 0; c < w; c++)
        shift[c] = (float)shift_of(m[c].f32);
    const wf_cpu_row re = {WF_CPU_KOP_SUM, WF_DTYPE_F32, (const char *)x, sx, WF_DTYPE_F32,
                           WF_CPU_ROW_EXP, 0, (char *)y, sy};
    wf__cpu_cols_reduce(&re, len, w, shift, s);
}

/* The blocks of the whole groups of w columns (len x WF_CPU_COLS each) in
 * `scratch`, read from x; NULL if none or no scratch. */
static float *columns_blocks(int64_t len, int w, const float *x, int64_t sx, float *scratch)
{
    const int nq = w / WF_CPU_COLS;
    if (nq == 0 || scratch == NULL)
        return NULL;
    wf__cpu_red_isa()->col_gather_f32(len, nq, x, sx, scratch, len * WF_CPU_COLS);
    return scratch;
}

/* shift and s of all w columns: through the blocks (their exponentials
 * left there) for the first `in_blocks` columns, the rest read from x with
 * their exponentials to y (NULL: not kept). */
static void columns_all(int64_t len, int w, const float *x, int64_t sx, float *y, int64_t sy,
                        float *blocks, int in_blocks, float *shift, wf_cpu_scalar *s)
{
    for (int c0 = 0; c0 < w; c0 += WF_CPU_COLS) {
        const int cw = w - c0 < WF_CPU_COLS ? w - c0 : WF_CPU_COLS;
        if (c0 < in_blocks) {
            float *b = blocks + (int64_t)(c0 / WF_CPU_COLS) * len * WF_CPU_COLS;
            columns_max_expsum(len, cw, b, WF_CPU_COLS, b, WF_CPU_COLS, shift + c0, s + c0);
        } else {
            columns_max_expsum(len, cw, x + c0, sx, y != NULL ? y + c0 : NULL, sy, shift + c0,
                               s + c0);
        }
    }
}

static void softmax_cols(const wf_cpu_rows *rows, int64_t len, int w, const float *x,
                         int64_t sx, float *y, int64_t sy, char *res, int64_t res_step,
                         float *scratch)
{
    (void)rows;
    (void)res;
    (void)res_step;
    float shift[WF_CPU_COLS_WIDE], inv[WF_CPU_COLS_WIDE];
    wf_cpu_scalar s[WF_CPU_COLS_WIDE];
    float *blocks = columns_blocks(len, w, x, sx, scratch);
    const int in_blocks = blocks != NULL ? w / WF_CPU_COLS * WF_CPU_COLS : 0;
    columns_all(len, w, x, sx, y, sy, blocks, in_blocks, shift, s);
    for (int c = 0; c < w; c++)
        inv[c] = 1.0f / s[c].f32;
    if (blocks != NULL) {
        wf__cpu_red_isa()->col_scatter_scale_f32(len, in_blocks / WF_CPU_COLS, blocks,
                                                 len * WF_CPU_COLS, inv, y, sy);
    }
    for (int64_t i = 0; i < len; i++) /* the columns whose exponentials are in y */
        for (int c = in_blocks; c < w; c++)
            y[i * sy + c] *= inv[c];
}

static void lse_cols(const wf_cpu_rows *rows, int64_t len, int w, const float *x, int64_t sx,
                     float *y, int64_t sy, char *res, int64_t res_step, float *scratch)
{
    (void)rows;
    (void)y;
    (void)sy;
    float shift[WF_CPU_COLS_WIDE];
    wf_cpu_scalar s[WF_CPU_COLS_WIDE];
    float *blocks = columns_blocks(len, w, x, sx, scratch);
    const int in_blocks = blocks != NULL ? w / WF_CPU_COLS * WF_CPU_COLS : 0;
    columns_all(len, w, x, sx, NULL, 0, blocks, in_blocks, shift, s);
    for (int c = 0; c < w; c++)
        *(float *)(res + c * res_step) = shift[c] + logf(s[c].f32);
}

/* ================================================================ general passes */

/* Pass 2 of the general form over operands [acc (s), m, x] (logsumexp) or
 * [y, s, m, x] (softmax, y of dtype at): s += exp(x - shift(m)), y =
 * exp(x - shift(m)). ctx: a wf_cpu_stage_ctx; `flag` set for softmax. */
static void expsum_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    const int o = c->flag ? 1 : 0; /* operand index of s */
    const int64_t ss = strides[o], sm = strides[o + 1], sx = strides[o + 2];
    char *y = c->flag ? ptrs[0] : NULL;
    const int64_t sy = c->flag ? strides[0] : 0;
    const size_t ai = wf_dtype_size(c->at), xi = wf_dtype_size(c->xdt);
    if (ss == 0) { /* a row: the fixed tree */
        const double m = c->at == WF_DTYPE_F64 ? *(const double *)ptrs[o + 1]
                                               : (double)*(const float *)ptrs[o + 1];
        const wf_cpu_row r = {WF_CPU_KOP_SUM, c->at, ptrs[o + 2], sx, c->xdt, WF_CPU_ROW_EXP,
                              shift_of(m),    y,     sy};
        const wf_cpu_scalar v = wf__cpu_row_reduce(&r, n);
        wf__cpu_kop_combine1(WF_CPU_KOP_SUM, c->at, ptrs[o], &v);
        return;
    }
    double t[WF_CPU_STAGE], e[WF_CPU_STAGE];
    for (int64_t i0 = 0; i0 < n; i0 += WF_CPU_STAGE) {
        const int64_t len = n - i0 < WF_CPU_STAGE ? n - i0 : WF_CPU_STAGE;
        wf__cpu_convert_1d(len, ptrs[o + 2] + i0 * sx * (int64_t)xi, c->xdt, sx, t, c->at, 1);
        const char *mb = ptrs[o + 1] + i0 * sm * (int64_t)ai;
        char *sb = ptrs[o] + i0 * ss * (int64_t)ai;
        if (c->at == WF_DTYPE_F64) {
            for (int64_t i = 0; i < len; i++)
                t[i] -= shift_of(((const double *)mb)[i * sm]);
            wf__cpu_exp_f64(len, t, e);
            for (int64_t i = 0; i < len; i++)
                ((double *)sb)[i * ss] += e[i];
        } else {
            float *tf = (float *)t, *ef = (float *)e;
            for (int64_t i = 0; i < len; i++)
                tf[i] = tf[i] - (float)shift_of(((const float *)mb)[i * sm]);
            wf__cpu_exp_f32(len, tf, ef);
            for (int64_t i = 0; i < len; i++)
                ((float *)sb)[i * ss] += ef[i];
        }
        if (y != NULL)
            wf__cpu_convert_1d(len, e, c->at, 1, y + i0 * sy * (int64_t)ai, c->at, sy);
    }
}

/* m: the max over the axes (count values of dtype at); s (count values)
 * gets the sums of exp(x - shift(m)), y (x's shape, row-major, dtype at)
 * the exponentials when not NULL. */
static wf_status expsum_pass(const wf_array *in, uint64_t axes, wf_dtype at, void *m, void *s,
                             void *y, int64_t count)
{
    wf_status st = wf__cpu_reduce_into(in, axes, WF_CPU_KOP_MAX, at, m, count);
    if (st != WF_OK)
        return st;
    wf__cpu_kop_fill(WF_CPU_KOP_SUM, at, s, count);
    wf_cpu_stage_ctx c;
    wf__cpu_stage_init(&c, NULL, at);
    c.xdt = in->dtype;
    c.flag = y != NULL;
    const int o = y != NULL ? 1 : 0;
    const size_t ai = wf_dtype_size(at);
    char *data[4] = {y, s, m, wf__array_data_ptr(in)};
    const size_t items[4] = {ai, ai, ai, wf_dtype_size(in->dtype)};
    const enum wf_cpu_layout lay[4] = {WF_CPU_LAYOUT_FULL, WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_ACC,
                                       WF_CPU_LAYOUT_IN};
    const int skip = 1 - o; /* logsumexp has no y operand */
    wf_cpu_red_job j;
    memset(&j, 0, sizeof j);
    wf__cpu_reduce_walk(&j.it, in, axes, 4 - skip, data + skip, items + skip, lay + skip);
    j.fn = expsum_inner;
    j.ctx = &c;
    j.acc_op = o;
    j.k = WF_CPU_KOP_SUM;
    j.at = at;
    j.acc_count = count;
    j.min_chunk = WF_CPU_RED_COSTLY;
    return wf__cpu_red_drive(&j);
}

/* logsumexp's general form: acc = shift(m) + log(s). */
static wf_status lse_general(const wf_array *in, uint64_t axes, wf_dtype at, void *acc,
                             int64_t count)
{
    wf_buffer *mb = wf__cpu_scratch(count, at);
    if (mb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    const wf_status st = expsum_pass(in, axes, at, mb->data, acc, NULL, count);
    if (st == WF_OK)
        for (int64_t i = 0; i < count; i++) {
            if (at == WF_DTYPE_F64)
                ((double *)acc)[i] = shift_of(((double *)mb->data)[i]) + log(((double *)acc)[i]);
            else
                ((float *)acc)[i] = (float)shift_of(((float *)mb->data)[i]) +
                                    logf(((float *)acc)[i]);
        }
    wf__buffer_release(mb);
    return st;
}

wf_status wf__cpu_logsumexp(const wf_array *in, uint64_t axes, wf_dtype at, void *acc,
                            int64_t count)
{
    const wf_cpu_rows rows = {.x = in,
                              .axes = axes,
                              .at = at,
                              .res = acc,
                              .res_item = wf_dtype_size(at),
                              .row = lse_row,
                              .cols = lse_cols,
                              .batch = lse_batch,
                              .row_cost = 16};
    const wf_status st = wf__cpu_rows_run(&rows);
    return st == WF_ERR_UNSUPPORTED ? lse_general(in, axes, at, acc, count) : st;
}

/* ================================================================ softmax */

/* Pass 3 of the general form: y (x's shape, row-major, dtype at) /= s
 * broadcast over the reduced axes, as a product with 1/s. */
static void scale_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    const int64_t sy = strides[0], ss = strides[1];
    if (c->at == WF_DTYPE_F64) {
        double *y = (double *)ptrs[0];
        const double *s = (const double *)ptrs[1];
        for (int64_t i = 0; i < n; i++)
            y[i * sy] *= 1.0 / s[i * ss];
    } else {
        float *y = (float *)ptrs[0];
        const float *s = (const float *)ptrs[1];
        for (int64_t i = 0; i < n; i++)
            y[i * sy] *= 1.0f / s[i * ss];
    }
}

static wf_status softmax_general(wf_array *out, const wf_array *in, uint64_t axes, wf_dtype at,
                                 int64_t count)
{
    const size_t ai = wf_dtype_size(at);
    wf_buffer *ms = wf__cpu_scratch(2 * count, at);
    wf_buffer *yb = out->dtype == at ? NULL : wf__cpu_scratch(out->size, at);
    if (ms == NULL || (out->dtype != at && yb == NULL)) {
        wf__buffer_release(ms);
        wf__buffer_release(yb);
        return WF_ERR_OUT_OF_MEMORY;
    }
    char *m = ms->data, *s = (char *)ms->data + (size_t)count * ai;
    void *y = yb != NULL ? yb->data : wf__array_data_ptr(out);
    wf_status st = expsum_pass(in, axes, at, m, s, y, count);
    if (st == WF_OK) {
        int64_t y_st[WF_MAX_NDIM], s_st[WF_MAX_NDIM], step = 1;
        wf__contiguous_strides(out->shape, out->ndim, y_st);
        for (int d = out->ndim - 1; d >= 0; d--) {
            const bool reduced = (axes >> d) & 1u;
            s_st[d] = reduced ? 0 : step;
            if (!reduced)
                step *= out->shape[d];
        }
        wf_cpu_stage_ctx c;
        wf__cpu_stage_init(&c, scale_inner, at);
        wf_cpu_iter it;
        char *data[2] = {y, s};
        const size_t items[2] = {ai, ai};
        const int64_t *strides[2] = {y_st, s_st};
        wf__cpu_iter_init(&it, out->ndim, out->shape, 2, data, items, strides);
        wf__cpu_iter_run_parallel(&it, scale_inner, &c, WF_CPU_CHUNK_CHEAP);
        if (yb != NULL) /* rounded once */
            wf__cpu_convert_1d(out->size, y, at, 1, wf__array_data_ptr(out), out->dtype, 1);
    }
    wf__buffer_release(ms);
    wf__buffer_release(yb);
    return st;
}

wf_status wf__cpu_softmax(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_softmax_params *p = params;
    /* Over one axis the rows engine runs (it takes y laid out like x);
     * softmax_general writes y row-major. */
    const bool one_axis = p->axes != 0 && (p->axes & (p->axes - 1)) == 0;
    wf_status st = one_axis ? wf__cpu_alloc_output_like(out, in) : wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    const wf_dtype at = out->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    const wf_cpu_rows rows = {.x = in,
                              .axes = p->axes,
                              .at = at,
                              .y = out,
                              .row = softmax_row,
                              .cols = softmax_cols,
                              .batch = softmax_batch,
                              .row_cost = 16};
    st = wf__cpu_rows_run(&rows);
    if (st != WF_ERR_UNSUPPORTED)
        return st;
    int64_t count = 1;
    for (int d = 0; d < in->ndim; d++)
        if (!((p->axes >> d) & 1u))
            count *= in->shape[d];
    return softmax_general(out, in, p->axes, at, count);
}
