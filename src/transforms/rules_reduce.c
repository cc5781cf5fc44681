/*
 * Rules of the reductions (sum, prod, max, min, mean, var, std, logsumexp,
 * all, any), argmax / argmin, softmax and the scans (cumsum, cumprod).
 *
 * A reduction out = R(x) over the axes in a mask has a partial derivative
 * d out / d x in x's shape (out broadcast back where needed): the vjp is
 * the cotangent broadcast back times it, the jvp the same reduction's sum
 * of tangent times it. Batching moves the batch axis to 0 and shifts the
 * axis mask by one.
 */
#include <string.h>

#include "core/error.h"
#include "prim/prims.h"
#include "prim/reduce.h"
#include "transforms/rules.h"

static wf_array *num(const wf_array *like, double v) { return wf__rule_scalar(like, v); }

static uint64_t reduce_mask(const wf_array *node)
{
    if (node->prim == &wf__prim_sum)
        return ((const wf_sum_params *)node->params)->axes;
    return ((const wf_reduce_params *)node->params)->axes;
}

static bool reduce_keepdims(const wf_array *node)
{
    if (node->prim == &wf__prim_sum)
        return ((const wf_sum_params *)node->params)->keepdims;
    return ((const wf_reduce_params *)node->params)->keepdims;
}

static int mask_axes(uint64_t mask, int ndim, int *axes)
{
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if ((mask >> d) & 1u)
            axes[n++] = d;
    return n;
}

/* sum over the masked axes, keepdims as given. */
static wf_array *sum_mask(wf_array *x, uint64_t mask, bool keepdims)
{
    if (!x)
        return NULL;
    int axes[WF_MAX_NDIM];
    int n = mask_axes(mask, x->ndim, axes);
    return wf_sum(x, axes, n, keepdims);
}

/* The product of every other element along the last axis, without
 * dividing (so zeros are handled): exclusive cumprods from both ends. */
static wf_array *product_of_others_last(wf_array *x)
{
    wf_array *left = wf_cumprod(x, -1, false, false);
    wf_array *right = wf_cumprod(x, -1, true, false);
    return wf_multiply(left, right);
}

/* d prod(x) / d x over the masked axes: those axes moved last and merged,
 * product_of_others_last, and back. */
static wf_array *product_of_others(wf_array *x, uint64_t mask)
{
    int perm[WF_MAX_NDIM], inverse[WF_MAX_NDIM];
    int64_t merged[WF_MAX_NDIM], moved[WF_MAX_NDIM];
    int n = 0, nkept = 0;
    int64_t reduced = 1;
    for (int d = 0; d < x->ndim; d++)
        if (!((mask >> d) & 1u)) {
            merged[nkept++] = x->shape[d];
            perm[n++] = d;
        }
    for (int d = 0; d < x->ndim; d++)
        if ((mask >> d) & 1u) {
            reduced *= x->shape[d];
            perm[n++] = d;
        }
    for (int i = 0; i < n; i++) {
        inverse[perm[i]] = i;
        moved[i] = x->shape[perm[i]];
    }
    merged[nkept] = reduced;
    wf_array *t = wf_transpose(x, perm, x->ndim);
    wf_array *flat = t ? wf_reshape(t, merged, nkept + 1) : NULL;
    wf_array *g = flat ? product_of_others_last(flat) : NULL;
    wf_array *back = g ? wf_reshape(g, moved, x->ndim) : NULL;
    return back ? wf_transpose(back, inverse, x->ndim) : NULL;
}

/* y, or y in float32 where its dtype is narrower (a count of up to 2^24
 * stays exact, and 1 / count stays normal). */
static wf_array *wide_like(wf_array *y)
{
    const bool narrow = y->dtype == WF_DTYPE_F16 || y->dtype == WF_DTYPE_BF16;
    return narrow ? wf_astype(y, WF_DTYPE_F32) : y;
}

/* d out / d x for a differentiable reduction node, in x's shape. */
static wf_array *reduce_partial(wf_array *node)
{
    wf_array *x = node->inputs[0];
    const uint64_t mask = reduce_mask(node);
    const int64_t n = wf__rule_reduced_count(x, mask);
    const wf_prim_def *p = node->prim;
    if (p == &wf__prim_sum)
        return wf_ones_like(x);
    const bool shapeless = wf__array_is_shapeless(node);
    if (p == &wf__prim_mean && shapeless) /* 1 / n of each call, n in float32 at least */
        return wf_astype(wf_reciprocal(wf__rule_reduced_count_of(x, wide_like(node))),
                         x->dtype);
    if (p == &wf__prim_mean)
        return wf_full_like(x, n ? 1.0 / (double)n : 0.0);
    if (p == &wf__prim_prod)
        return product_of_others(x, mask);
    wf_array *y = wf__rule_expand_reduced(node, x, mask);
    if (p == &wf__prim_max || p == &wf__prim_min) {
        /* ties share the gradient evenly */
        wf_array *hit = wf_astype(wf_equal(x, y), x->dtype);
        return wf_divide(hit, wf__rule_expand_reduced(sum_mask(hit, mask, true), x, mask));
    }
    if (p == &wf__prim_logsumexp)
        return wf_exp(wf_subtract(x, y));
    /* var: 2 (x - mean) / (n - ddof); std: (x - mean) / ((n - ddof) std) */
    const int ddof = ((const wf_reduce_params *)node->params)->ddof;
    int axes[WF_MAX_NDIM];
    const int naxes = mask_axes(mask, x->ndim, axes);
    wf_array *centered = wf_subtract(x, wf_mean(x, axes, naxes, true));
    if (shapeless) { /* n - ddof of each call */
        wf_array *count = wf__rule_reduced_count_of(x, node);
        wf_array *divisor = wf_maximum(wf_subtract(count, num(node, ddof)), num(node, 0));
        if (p == &wf__prim_var)
            return wf_multiply(centered, wf_divide(num(node, 2), divisor));
        return wf_divide(centered, wf_multiply(y, divisor));
    }
    const double divisor = (double)n - ddof > 0 ? (double)n - ddof : 0.0;
    if (p == &wf__prim_var)
        return wf_multiply(centered, num(x, 2.0 / divisor));
    return wf_divide(centered, wf_multiply(y, num(x, divisor)));
}

static wf_status vjp_reduce(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    wf_array *x = node->inputs[0];
    wf_array *ctb = wf__rule_expand_reduced(ct, x, reduce_mask(node));
    cts[0] = node->prim == &wf__prim_sum ? ctb : wf_multiply(ctb, reduce_partial(node));
    return wf__rule_result(cts[0]);
}

static wf_status jvp_reduce(wf_array *node, wf_array *const *t, wf_array **out)
{
    if (node->prim == &wf__prim_sum || node->prim == &wf__prim_mean)
        return wf__rule_jvp_linear(node, t, out);
    *out = sum_mask(wf_multiply(t[0], reduce_partial(node)), reduce_mask(node),
                    reduce_keepdims(node));
    return wf__rule_result(*out);
}

static wf_status vmap_reduce(wf_array *node, wf_array *const *in, const int *axes,
                             int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    if (!x)
        return wf_last_error();
    if (node->prim == &wf__prim_sum) {
        wf_sum_params p = *(const wf_sum_params *)node->params;
        p.axes <<= 1;
        *out = wf__rule_node(node->prim, &p, &x, 1);
    } else {
        wf_reduce_params p = *(const wf_reduce_params *)node->params;
        p.axes <<= 1;
        *out = wf__rule_node(node->prim, &p, &x, 1);
    }
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- argmax, argmin */

static wf_status vmap_arg_reduce(wf_array *node, wf_array *const *in, const int *axes,
                                 int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    wf_arg_reduce_params p = *(const wf_arg_reduce_params *)node->params;
    p.axis += 1;
    *out = x ? wf__rule_node(node->prim, &p, &x, 1) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- softmax */

static uint64_t softmax_mask(const wf_array *node)
{
    return ((const wf_softmax_params *)node->params)->axes;
}

/* y (v - sum(v y)) over the softmax axes: both the vjp (v = ct) and the jvp
 * (v = t) of y = softmax(x). */
static wf_array *softmax_linear(wf_array *node, wf_array *v)
{
    wf_array *s = sum_mask(wf_multiply(v, node), softmax_mask(node), true);
    return wf_multiply(node, wf_subtract(v, s));
}

static wf_status vjp_softmax(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    cts[0] = softmax_linear(node, ct);
    return wf__rule_result(cts[0]);
}

static wf_status jvp_softmax(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = softmax_linear(node, t[0]);
    return wf__rule_result(*out);
}

static wf_status vmap_softmax(wf_array *node, wf_array *const *in, const int *axes,
                              int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    wf_softmax_params p = *(const wf_softmax_params *)node->params;
    p.axes <<= 1;
    *out = x ? wf__rule_node(node->prim, &p, &x, 1) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- scans */

static const wf_scan_params *scan_params(const wf_array *node) { return node->params; }

static wf_status vjp_cumsum(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    const wf_scan_params *p = scan_params(node);
    cts[0] = wf_cumsum(ct, p->axis, !p->reverse, p->inclusive);
    return wf__rule_result(cts[0]);
}

/* Which j enter y_i of a cumprod along its (last) axis, as a bool (n, n)
 * matrix indexed [i, j]: j <= i (inclusive), j < i (exclusive), mirrored
 * when reversed. */
static wf_array *cumprod_support(wf_array *x, const wf_scan_params *p)
{
    const int64_t n = x->shape[x->ndim - 1];
    const int64_t col_shape[2] = {n, 1};
    wf_array *i = wf_reshape(wf_arange(0, (double)n, 1, WF_DTYPE_I32), col_shape, 2);
    wf_array *j = wf_arange(0, (double)n, 1, WF_DTYPE_I32);
    wf_array *lhs = p->reverse ? i : j, *rhs = p->reverse ? j : i;
    return p->inclusive ? wf_less_equal(lhs, rhs) : wf_less(lhs, rhs);
}

/* For a cumprod along the last axis: M[..., i, j] = x_j where j enters y_i
 * (else 1), and S the support. P = product of the others in each row of M,
 * so d y_i / d x_j = S_ij P_ij (no division: zeros are handled). */
static wf_array *cumprod_jacobian(wf_array *x, const wf_scan_params *p)
{
    const int r = x->ndim;
    const int64_t n = x->shape[r - 1];
    int64_t shape[WF_MAX_NDIM + 1];
    for (int d = 0; d < r - 1; d++)
        shape[d] = x->shape[d];
    shape[r - 1] = n;
    shape[r] = n;
    const int at = r - 1;
    wf_array *rows = wf_broadcast_to(wf_expand_dims(x, &at, 1), shape, r + 1);
    wf_array *s = cumprod_support(x, p);
    wf_array *m = wf_where(s, rows, num(x, 1));
    wf_array *others = product_of_others_last(m);
    return wf_where(s, others, num(x, 0));
}

/* The scan moved to the last axis, and back. */
static wf_array *scan_axis_last(wf_array *x, int axis)
{
    return axis == x->ndim - 1 ? x : wf_moveaxis(x, axis, -1);
}

static wf_status vjp_cumprod(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    const wf_scan_params *p = scan_params(node);
    wf_array *x = scan_axis_last(node->inputs[0], p->axis);
    wf_array *c = scan_axis_last(ct, p->axis);
    if (!x || !c)
        return wf_last_error();
    const int r = x->ndim, last = r - 1;
    wf_array *jac = cumprod_jacobian(x, p);                     /* [..., i, j] */
    wf_array *weighted = wf_multiply(jac, wf_expand_dims(c, &r, 1)); /* c_i at [..., i, :] */
    const int rows = r - 1;
    wf_array *g = wf_sum(weighted, &rows, 1, false);
    cts[0] = p->axis == last ? g : wf_moveaxis(g, -1, p->axis);
    return wf__rule_result(cts[0]);
}

static wf_status jvp_cumprod(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_scan_params *p = scan_params(node);
    wf_array *x = scan_axis_last(node->inputs[0], p->axis);
    wf_array *tl = scan_axis_last(t[0], p->axis);
    if (!x || !tl)
        return wf_last_error();
    const int r = x->ndim, last = r - 1;
    wf_array *jac = cumprod_jacobian(x, p);
    const int before_cols = r - 1;
    wf_array *weighted = wf_multiply(jac, wf_expand_dims(tl, &before_cols, 1)); /* t_j */
    wf_array *y = wf_sum(weighted, &r, 1, false);
    *out = p->axis == last ? y : wf_moveaxis(y, -1, p->axis);
    return wf__rule_result(*out);
}

static wf_status vmap_scan(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    wf_scan_params p = *scan_params(node);
    p.axis += 1;
    *out = x ? wf__rule_node(node->prim, &p, &x, 1) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_reduce[] = {
    {&wf__prim_sum, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_mean, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_prod, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, false},
    {&wf__prim_max, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_min, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_var, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_std, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_logsumexp, WF_RULES_DIFFERENTIABLE, vjp_reduce, jvp_reduce, vmap_reduce, true},
    {&wf__prim_softmax, WF_RULES_DIFFERENTIABLE, vjp_softmax, jvp_softmax, vmap_softmax,
     true},
    {&wf__prim_cumsum, WF_RULES_DIFFERENTIABLE, vjp_cumsum, wf__rule_jvp_linear, vmap_scan,
     true},
    {&wf__prim_cumprod, WF_RULES_DIFFERENTIABLE, vjp_cumprod, jvp_cumprod, vmap_scan, false},
    /* Bool and index outputs: no gradient flows through them. */
    {&wf__prim_all, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero, vmap_reduce,
     false},
    {&wf__prim_any, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero, vmap_reduce,
     false},
    {&wf__prim_argmax, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_arg_reduce, false},
    {&wf__prim_argmin, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_arg_reduce, false},
};

const size_t wf__rules_reduce_count = sizeof wf__rules_reduce / sizeof wf__rules_reduce[0];
