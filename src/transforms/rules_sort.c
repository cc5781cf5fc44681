/*
 * Rules of the sort family and of cummax / cummin / logcumsumexp
 * (prim/sort.h). Values of sort, partition and topk are a gather of a
 * along the axis at the indices argsort / argpartition / argtopk return
 * (the kernels guarantee it), so their cotangent is scattered back there
 * (put_along_axis with ADD) and their tangent gathered from there. The
 * index outputs are integers (zero rules). vmap moves the batch to axis 0
 * and runs the primitive one axis further.
 *
 * The scans' rules work in the frame of a forward inclusive scan: reverse
 * flips the axis, an exclusive output is the inclusive one shifted by one
 * (the first output, the identity, gets no gradient).
 */
#include <string.h>

#include "core/error.h"
#include "prim/search.h"
#include "prim/sort.h"
#include "transforms/rules.h"

/* ---------------------------------------------------------------- sort family */

/* The index primitive matching a values primitive's op. */
static wf_array *selected_indices(wf_array *node)
{
    wf_sort_params p = *(const wf_sort_params *)node->params;
    p.op += 1; /* WF_SORT_VALUES -> WF_SORT_INDICES, and so on */
    wf_array *a = node->inputs[0];
    return wf__rule_node(wf__sort_prim(p.op), &p, &a, 1);
}

static int sort_axis(const wf_array *node) { return ((const wf_sort_params *)node->params)->axis; }

static wf_status vjp_sort_values(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    cts[0] = wf_put_along_axis(wf_zeros_like(node->inputs[0]), selected_indices(node), ct,
                               sort_axis(node), WF_SCATTER_ADD);
    return wf__rule_result(cts[0]);
}

static wf_status jvp_sort_values(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = wf_take_along_axis(t[0], selected_indices(node), sort_axis(node));
    return wf__rule_result(*out);
}

static wf_status vmap_sort(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    (void)batch;
    wf_sort_params p = *(const wf_sort_params *)node->params;
    p.axis += 1;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_node(node->prim, &p, &x, 1);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- scans */

static const wf_scan_extra_params *scan_params(const wf_array *node) { return node->params; }

/* x reversed along axis (a view). */
static wf_array *flip(wf_array *x, int axis)
{
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < x->ndim; d++) {
        starts[d] = 0;
        stops[d] = x->shape[d];
        steps[d] = 1;
    }
    starts[axis] = x->shape[axis] - 1;
    stops[axis] = -x->shape[axis] - 1;
    steps[axis] = -1;
    return wf_slice(x, starts, stops, steps);
}

/* x shifted by one along axis, a zero entering: toward the start (left) or
 * the end. */
static wf_array *shift(wf_array *x, int axis, bool left)
{
    const int64_t n = x->shape[axis];
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM], zshape[WF_MAX_NDIM];
    for (int d = 0; d < x->ndim; d++) {
        starts[d] = 0;
        stops[d] = x->shape[d];
        steps[d] = 1;
        zshape[d] = d == axis ? 1 : x->shape[d];
    }
    if (n == 0)
        return x;
    starts[axis] = left ? 1 : 0;
    stops[axis] = left ? n : n - 1;
    wf_array *kept = wf_slice(x, starts, stops, steps);
    wf_array *parts[2];
    parts[left ? 0 : 1] = kept;
    parts[left ? 1 : 0] = wf_zeros(zshape, x->ndim, x->dtype);
    return wf_concatenate(parts, 2, axis);
}

static wf_array *to_frame(wf_array *x, const wf_scan_extra_params *p)
{
    return p->reverse ? flip(x, p->axis) : x;
}

/* An output-shaped cotangent into the inclusive frame. */
static wf_array *ct_to_frame(wf_array *ct, const wf_scan_extra_params *p)
{
    wf_array *c = to_frame(ct, p);
    return p->inclusive || !c ? c : shift(c, p->axis, true);
}

/* An inclusive-frame tangent out to the output's frame. */
static wf_array *tangent_from_frame(wf_array *t, const wf_scan_extra_params *p)
{
    wf_array *s = p->inclusive || !t ? t : shift(t, p->axis, false);
    return p->reverse && s ? flip(s, p->axis) : s;
}

/* cummax / cummin: for each position of the inclusive forward scan of xf,
 * the index it took its value from, as int32: the latest position whose
 * element equals the running value (ties go to the latest, as in MLX), or
 * where the running value changed (NaN). */
static wf_array *winners(wf_array *xf, const wf_scan_extra_params *p)
{
    const int axis = p->axis, r = xf->ndim;
    wf_array *(*scan)(wf_array *, int, bool, bool) = p->op == WF_SCAN_MAX ? wf_cummax : wf_cummin;
    wf_array *y = scan(xf, axis, false, true);
    wf_array *prev = scan(xf, axis, false, false);
    int64_t shape[WF_MAX_NDIM];
    for (int d = 0; d < r; d++)
        shape[d] = d == axis ? xf->shape[d] : 1;
    wf_array *pos = wf_reshape(wf_arange(0, (double)xf->shape[axis], 1, WF_DTYPE_I32), shape, r);
    wf_array *changed = wf_logical_or(wf_equal(xf, y), wf_not_equal(y, prev));
    return wf_cummax(wf_where(changed, pos, wf_scalar(0, WF_DTYPE_I32)), axis, false, true);
}

static wf_status vjp_cum_extreme(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    const wf_scan_extra_params *p = scan_params(node);
    wf_array *xf = to_frame(node->inputs[0], p);
    wf_array *g = wf_put_along_axis(wf_zeros_like(xf), winners(xf, p), ct_to_frame(ct, p),
                                    p->axis, WF_SCATTER_ADD);
    cts[0] = p->reverse && g ? flip(g, p->axis) : g;
    return wf__rule_result(cts[0]);
}

static wf_status jvp_cum_extreme(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_scan_extra_params *p = scan_params(node);
    wf_array *xf = to_frame(node->inputs[0], p);
    wf_array *tf = wf_take_along_axis(to_frame(t[0], p), winners(xf, p), p->axis);
    *out = tangent_from_frame(tf, p);
    return wf__rule_result(*out);
}

/* sum over signs s of s * exp(base + lcse(log(max(s * v, 0)) + shift)):
 * a signed sum of exponentials kept in log space, so nothing overflows.
 * `reverse` picks the direction of the log-sum scan. */
static wf_array *signed_exp_scan(wf_array *v, wf_array *inner, wf_array *outer, int axis,
                                 bool reverse)
{
    wf_array *zero = wf__rule_scalar(v, 0);
    wf_array *pos = wf_log(wf_maximum(v, zero)), *neg = wf_log(wf_maximum(wf_negative(v), zero));
    wf_array *sp = wf_logcumsumexp(wf_add(pos, inner), axis, reverse, true);
    wf_array *sn = wf_logcumsumexp(wf_add(neg, inner), axis, reverse, true);
    return wf_subtract(wf_exp(wf_add(sp, outer)), wf_exp(wf_add(sn, outer)));
}

/* complex64 (no signs to split): exp(outer) * cumsum(v exp(inner)) in the
 * direction `reverse`, directly. */
static wf_array *complex_exp_scan(wf_array *v, wf_array *inner, wf_array *outer, int axis,
                                  bool reverse)
{
    return wf_multiply(wf_exp(outer),
                       wf_cumsum(wf_multiply(v, wf_exp(inner)), axis, reverse, true));
}

/* y = lcse(x) (inclusive forward): dx_j = sum_{i >= j} ct_i exp(x_j - y_i)
 * (complex64: the transpose; the engine conjugates around it, see vjp.c). */
static wf_status vjp_logcumsumexp(wf_array *node, wf_array *ct, const bool *wanted,
                                  wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    const wf_scan_extra_params *p = scan_params(node);
    wf_array *xf = to_frame(node->inputs[0], p);
    wf_array *yf = wf_logcumsumexp(xf, p->axis, false, true);
    wf_array *(*scan)(wf_array *, wf_array *, wf_array *, int, bool) =
        xf && xf->dtype == WF_DTYPE_C64 ? complex_exp_scan : signed_exp_scan;
    wf_array *g = scan(ct_to_frame(ct, p), wf_negative(yf), xf, p->axis, true);
    cts[0] = p->reverse && g ? flip(g, p->axis) : g;
    return wf__rule_result(cts[0]);
}

/* dy_i = sum_{j <= i} exp(x_j - y_i) t_j. */
static wf_status jvp_logcumsumexp(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_scan_extra_params *p = scan_params(node);
    wf_array *xf = to_frame(node->inputs[0], p);
    wf_array *yf = wf_logcumsumexp(xf, p->axis, false, true);
    wf_array *(*scan)(wf_array *, wf_array *, wf_array *, int, bool) =
        xf && xf->dtype == WF_DTYPE_C64 ? complex_exp_scan : signed_exp_scan;
    wf_array *tf = scan(to_frame(t[0], p), xf, wf_negative(yf), p->axis, false);
    *out = tangent_from_frame(tf, p);
    return wf__rule_result(*out);
}

static wf_status vmap_scan_extra(wf_array *node, wf_array *const *in, const int *axes,
                                 int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_scan_extra_params p = *scan_params(node);
    p.axis += 1;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_node(node->prim, &p, &x, 1);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- searchsorted */

/* Positions are integers (zero rules). Batched values search the same
 * sequence as they are; a batched sequence would need one search per batch
 * entry, which MLX refuses too. */
static wf_status vmap_searchsorted(wf_array *node, wf_array *const *in, const int *axes,
                                   int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    if (axes[0] >= 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_searchsorted: cannot vmap over the sorted sequence");
    *out = wf__rule_rebuild(node, in);
    *out_axis = axes[1];
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_sort[] = {
    {&wf__prim_sort, WF_RULES_DIFFERENTIABLE, vjp_sort_values, jvp_sort_values, vmap_sort, false},
    {&wf__prim_partition, WF_RULES_DIFFERENTIABLE, vjp_sort_values, jvp_sort_values, vmap_sort,
     false},
    {&wf__prim_topk, WF_RULES_DIFFERENTIABLE, vjp_sort_values, jvp_sort_values, vmap_sort, false},
    {&wf__prim_argsort, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_sort, false},
    {&wf__prim_argpartition, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_sort, false},
    {&wf__prim_argtopk, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_sort, false},
    {&wf__prim_cummax, WF_RULES_DIFFERENTIABLE, vjp_cum_extreme, jvp_cum_extreme,
     vmap_scan_extra, false},
    {&wf__prim_cummin, WF_RULES_DIFFERENTIABLE, vjp_cum_extreme, jvp_cum_extreme,
     vmap_scan_extra, false},
    {&wf__prim_logcumsumexp, WF_RULES_DIFFERENTIABLE, vjp_logcumsumexp, jvp_logcumsumexp,
     vmap_scan_extra, false},
    {&wf__prim_searchsorted, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_searchsorted, false},
};

const size_t wf__rules_sort_count = sizeof wf__rules_sort / sizeof wf__rules_sort[0];
