/* Reduction kernels: sum, prod, max, min, all, any, mean, var, std, and
 * the entry of logsumexp (softmax.c computes it).
 *
 * Plain reductions run one walk through the reproducible driver
 * (reduce_walk.c). Composite reductions run passes over the same walk:
 * mean = sum / n; var = sum((x - mean)^2) / (n - ddof) (two passes, stable);
 * std = sqrt(var). Half types and integers of a float-valued reduction
 * accumulate in float32 (float64 for float64) and round once at the end. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "prim/prims.h"
#include "prim/reduce.h"
#include "prim/shape.h"
#include "runtime/pool.h"

/* ================================================================ var */

/* Pass 2 of var over operands [acc, mean, x]: a row adds its squared
 * deviations through the fixed tree, a row of accumulators adds element by
 * element. x is of the compute dtype here (the element-wise form is staged). */
static void var_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    const int64_t sa = strides[0], sm = strides[1], sx = strides[2];
    if (sa == 0) {
        const double mu = c->at == WF_DTYPE_F64 ? *(const double *)ptrs[1]
                                                : (double)*(const float *)ptrs[1];
        const wf_cpu_row r = {WF_CPU_KOP_SUM, c->at, ptrs[2], sx, c->xdt, WF_CPU_ROW_SQDEV,
                              mu,             NULL,  0};
        const wf_cpu_scalar v = wf__cpu_row_reduce(&r, n);
        wf__cpu_kop_combine1(WF_CPU_KOP_SUM, c->at, ptrs[0], &v);
        return;
    }
    if (c->at == WF_DTYPE_F64) {
        double *acc = (double *)ptrs[0];
        const double *mu = (const double *)ptrs[1], *x = (const double *)ptrs[2];
        for (int64_t i = 0; i < n; i++) {
            const double d = x[i * sx] - mu[i * sm];
            acc[i * sa] += d * d;
        }
    } else {
        float *acc = (float *)ptrs[0];
        const float *mu = (const float *)ptrs[1], *x = (const float *)ptrs[2];
        for (int64_t i = 0; i < n; i++) {
            const float d = x[i * sx] - mu[i * sm];
            acc[i * sa] += d * d;
        }
    }
}

/* The element-wise form sees x staged to the compute dtype; the row form
 * reads x in its own dtype (the tree stages it). */
static void var_dispatch(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    if (strides[0] == 0)
        var_inner(n, ptrs, strides, ctx);
    else
        wf__cpu_staged(n, ptrs, strides, ctx);
}

/* Pass 2 of var over many short rows (operands as var_inner's). */
static void var_rows(int64_t rows, int64_t n, char *const *ptrs, const int64_t *row_st,
                     const int64_t *st, const void *ctx)
{
    enum { BLOCK = 256 };
    const wf_cpu_stage_ctx *c = ctx;
    const wf_cpu_row r = {WF_CPU_KOP_SUM, c->at, ptrs[2], st[2], c->xdt, WF_CPU_ROW_SQDEV,
                          0,              NULL,  0};
    double vals[BLOCK]; /* room for float64 values */
    for (int64_t i0 = 0; i0 < rows; i0 += BLOCK) {
        const int64_t m = rows - i0 < BLOCK ? rows - i0 : BLOCK;
        wf_cpu_row part = r;
        part.x += i0 * row_st[2] * (int64_t)c->item[2];
        wf__cpu_rows_reduce(&part, n, m, row_st[2], ptrs[1] + i0 * row_st[1] * (int64_t)c->item[1],
                            row_st[1], 0, vals);
        wf__cpu_kop_combine_strided(WF_CPU_KOP_SUM, c->at, m,
                                    ptrs[0] + i0 * row_st[0] * (int64_t)c->item[0], row_st[0],
                                    vals, 1);
    }
}

/* acc (the means) becomes the sums of squared deviations from them. */
static wf_status var_pass(const wf_array *in, uint64_t axes, wf_dtype at, void *acc,
                          int64_t count)
{
    wf_buffer *mb = wf__cpu_scratch(count, at);
    if (mb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    memcpy(mb->data, acc, (size_t)count * wf_dtype_size(at));
    wf__cpu_kop_fill(WF_CPU_KOP_SUM, at, acc, count);
    wf_cpu_stage_ctx c;
    wf__cpu_stage_init(&c, var_inner, at);
    c.item[0] = c.item[1] = wf_dtype_size(at);
    c.item[2] = wf_dtype_size(in->dtype);
    c.xdt = in->dtype;
    if (in->dtype != at)
        c.xop = 2;
    wf_cpu_red_job j;
    memset(&j, 0, sizeof j);
    char *data[3] = {acc, mb->data, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay[3] = {WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_IN};
    wf__cpu_reduce_walk(&j.it, in, axes, 3, data, c.item, lay);
    j.fn = var_dispatch;
    j.rows_fn = var_rows;
    j.ctx = &c;
    j.acc_op = 0;
    j.k = WF_CPU_KOP_SUM;
    j.at = at;
    j.acc_count = count;
    j.min_chunk = WF_CPU_RED_CHEAP;
    const wf_status st = wf__cpu_red_drive(&j);
    wf__buffer_release(mb);
    return st;
}

/* ================================================================ finalizers */

struct finalize_arg {
    int op; /* wf_reduce_op: MEAN, VAR or STD */
    wf_dtype at;
    void *acc;
    double n;  /* the divisor */
    bool nan;  /* every output is NaN (mean of nothing) */
};

typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef double v4d __attribute__((vector_size(32)));
typedef double v4d_u __attribute__((vector_size(32), aligned(8), may_alias));

/* acc[i] / n over whole vectors, then the rest (one division each way; a
 * scalar division per value was most of a short-row mean). */
static void divide_f32(int64_t count, float *acc, float n)
{
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
        *(v8f_u *)(acc + i) = *(const v8f_u *)(acc + i) / n;
    for (; i < count; i++)
        acc[i] /= n;
}
static void divide_f64(int64_t count, double *acc, double n)
{
    int64_t i = 0;
    for (; i + 4 <= count; i += 4)
        *(v4d_u *)(acc + i) = *(const v4d_u *)(acc + i) / n;
    for (; i < count; i++)
        acc[i] /= n;
}

static void finalize_chunk(void *p, int64_t begin, int64_t end)
{
    const struct finalize_arg *a = p;
    if (a->at == WF_DTYPE_F64) {
        double *acc = (double *)a->acc + begin;
        if (a->nan)
            for (int64_t i = 0; i < end - begin; i++)
                acc[i] = NAN;
        else
            divide_f64(end - begin, acc, a->n);
        for (int64_t i = 0; a->op == WF_REDUCE_STD && i < end - begin; i++)
            acc[i] = sqrt(acc[i]);
    } else {
        float *acc = (float *)a->acc + begin;
        if (a->nan)
            for (int64_t i = 0; i < end - begin; i++)
                acc[i] = NAN;
        else
            divide_f32(end - begin, acc, (float)a->n);
        for (int64_t i = 0; a->op == WF_REDUCE_STD && i < end - begin; i++)
            acc[i] = sqrtf(acc[i]);
    }
}

static void finalize(int op, wf_dtype at, void *acc, int64_t count, double n, bool nan)
{
    struct finalize_arg fa = {op, at, acc, n, nan};
    wf__parallel_for(count, WF_CPU_RED_CHEAP, finalize_chunk, &fa);
}

/* ================================================================ kernels */

static wf_cpu_kop plain_kop(int op)
{
    switch (op) {
    case WF_REDUCE_PROD: return WF_CPU_KOP_PROD;
    case WF_REDUCE_MAX: return WF_CPU_KOP_MAX;
    case WF_REDUCE_MIN: return WF_CPU_KOP_MIN;
    case WF_REDUCE_ALL: return WF_CPU_KOP_AND;
    case WF_REDUCE_ANY: return WF_CPU_KOP_OR;
    default: return WF_CPU_KOP_SUM;
    }
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

/* mean, var, std of `in` into acc (dtype at). */
static wf_status reduce_moments(const wf_array *in, const wf_reduce_params *p, wf_dtype at,
                                void *acc, int64_t count)
{
    const int64_t n = reduced_count(in, p->axes);
    wf_status st = wf__cpu_reduce_into(in, p->axes, WF_CPU_KOP_SUM, at, acc, count);
    if (st != WF_OK)
        return st;
    finalize(WF_REDUCE_MEAN, at, acc, count, (double)n, n == 0);
    if (p->op == WF_REDUCE_MEAN || n == 0) /* var of nothing: NaN, written above */
        return WF_OK;
    st = var_pass(in, p->axes, at, acc, count);
    if (st != WF_OK)
        return st;
    const double denom = (double)n - (double)p->ddof;
    finalize(p->op, at, acc, count, denom > 0 ? denom : 0, false);
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
                                  : wf__cpu_kop_acc_dtype(plain_kop(op), in->dtype);
    wf_buffer *accb = NULL;
    void *acc = wf__array_data_ptr(out);
    if (at != out->dtype) {
        accb = wf__cpu_scratch(count, at);
        if (accb == NULL)
            return WF_ERR_OUT_OF_MEMORY;
        acc = accb->data;
    }
    if (!composite)
        st = wf__cpu_reduce_into(in, p->axes, plain_kop(op), at, acc, count);
    else if (op == WF_REDUCE_LOGSUMEXP)
        st = wf__cpu_logsumexp(in, p->axes, at, acc, count);
    else
        st = reduce_moments(in, p, at, acc, count);
    if (accb != NULL) {
        if (st == WF_OK) /* rounded once */
            wf__cpu_convert_1d(count, acc, at, 1, wf__array_data_ptr(out), out->dtype, 1);
        wf__buffer_release(accb);
    }
    return st;
}

/* A sum over the axes the shapes say (prim/shape_like.c): the same bits as
 * wf_sum over them. */
wf_status wf__cpu_unbroadcast_like(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params)
{
    (void)params;
    const wf_array *x = inputs[0], *like = inputs[1];
    wf_reduce_params p;
    memset(&p, 0, sizeof p);
    p.op = WF_REDUCE_SUM;
    p.axes = wf__unbroadcast_axes(x->shape, x->ndim, like->shape, like->ndim);
    p.keepdims = true;
    if (p.axes == 0) /* x already has like's shape */
        return wf__cpu_reshape(out, inputs, 1, NULL);
    return wf__cpu_reduce(out, inputs, ninputs, &p);
}

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
