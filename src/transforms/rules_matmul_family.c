/*
 * Rules of gather_mm and segmented_mm (prim/matmul_family.h). Indices and
 * segments are constants of the differentiation.
 *
 * gather_mm: each product's cotangent goes back to the matrices it read,
 * through gather_mm itself (ct @ B^T, A^T @ ct per position) and an ADD
 * scatter into the stack (duplicates sum in a fixed order). vmap folds a
 * batched operand's batch into its stack and offsets the indices.
 *
 * segmented_mm: out[s] = (a * mask_s) @ b with mask_s the columns of
 * segment s, so the cotangents are sums over segments of masked products;
 * vmap uses the same form with a batch dim.
 */
#include "core/error.h"
#include "prim/matmul_family.h"
#include "transforms/rules.h"

/* ---------------------------------------------------------------- gather_mm */

/* x (P, r, c) with dims -1 and -2 swapped. */
static wf_array *swap_last(wf_array *x) { return wf_swapaxes(x, -1, -2); }

/* A stack of zeros shaped like `stack` with each position's matrix of
 * `per_position` (I + (r, c)) added at indices (I). */
static wf_array *scatter_back(wf_array *stack, wf_array *indices, wf_array *per_position)
{
    int64_t shape[WF_MAX_NDIM];
    const int indim = indices->ndim;
    wf__shape_copy(shape, indices->shape, indim);
    shape[indim] = 1;
    shape[indim + 1] = stack->shape[1];
    shape[indim + 2] = stack->shape[2];
    const int axis = 0;
    return wf_scatter(wf_zeros_like(stack), &indices, 1,
                      wf_reshape(per_position, shape, indim + 3), &axis, WF_SCATTER_ADD);
}

static wf_status vjp_gather_mm(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    const wf_gather_mm_params *p = node->params;
    wf_array *a = node->inputs[0], *b = node->inputs[1];
    wf_array *lhs = node->inputs[2], *rhs = node->inputs[3];
    if (wanted[0]) {
        cts[0] = scatter_back(a, lhs, wf_gather_mm(ct, swap_last(b), NULL, rhs,
                                                   p->sorted_indices));
        if (!cts[0])
            return wf_last_error();
    }
    if (wanted[1]) {
        cts[1] = scatter_back(b, rhs, wf_gather_mm(swap_last(a), ct, lhs, NULL,
                                                   p->sorted_indices));
        if (!cts[1])
            return wf_last_error();
    }
    return WF_OK;
}

static wf_status jvp_gather_mm(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_array *in[4] = {NULL, node->inputs[1], node->inputs[2], node->inputs[3]};
    wf_array *ta = NULL, *tb = NULL;
    if (t[0]) {
        in[0] = t[0];
        ta = wf__rule_rebuild(node, in);
    }
    if (t[1]) {
        in[0] = node->inputs[0];
        in[1] = t[1];
        tb = wf__rule_rebuild(node, in);
    }
    *out = ta && tb ? wf_add(ta, tb) : (ta ? ta : tb);
    return wf__rule_result(*out);
}

/* A stack operand and its indices under vmap: a batched stack (B, S, r, c)
 * becomes (B * S, r, c) and example e's indices move to e * S + index. */
static wf_status fold_stack(wf_array *stack, int stack_axis, wf_array *indices, int index_axis,
                            int64_t batch, wf_array **folded, wf_array **moved)
{
    wf_array *ix = wf__vmap_front_or_one(indices, index_axis);
    if (stack_axis == WF_VMAP_NOT_MAPPED) {
        *folded = stack;
        *moved = ix;
        return wf__rule_result(ix);
    }
    wf_array *s = wf__vmap_to_front(stack, stack_axis);
    if (!s || !ix)
        return wf_last_error();
    const int64_t count = s->shape[1];
    const int64_t shape[3] = {batch * count, s->shape[2], s->shape[3]};
    *folded = wf_reshape(s, shape, 3);
    /* negative indices count from the end of their own example's stack */
    wf_array *wide = wf_astype(ix, WF_DTYPE_I64);
    wf_array *zero = wf_scalar(0, WF_DTYPE_I64), *size = wf_scalar((double)count, WF_DTYPE_I64);
    wf_array *normal = wf_where(wf_less(wide, zero), wf_add(wide, size), wide);
    int64_t oshape[WF_MAX_NDIM];
    oshape[0] = batch;
    for (int d = 1; d < ix->ndim; d++)
        oshape[d] = 1;
    wf_array *offsets = wf_reshape(wf_arange(0, (double)(batch * count), (double)count,
                                             WF_DTYPE_I64),
                                   oshape, ix->ndim);
    *moved = wf_add(normal, offsets);
    return *folded && *moved ? WF_OK : wf_last_error();
}

static wf_status vmap_gather_mm(wf_array *node, wf_array *const *in, const int *axes,
                                int64_t batch, wf_array **out, int *out_axis)
{
    const wf_gather_mm_params *p = node->params;
    wf_array *a, *b, *lhs, *rhs;
    wf_status st = fold_stack(in[0], axes[0], in[2], axes[2], batch, &a, &lhs);
    if (st == WF_OK)
        st = fold_stack(in[1], axes[1], in[3], axes[3], batch, &b, &rhs);
    if (st != WF_OK)
        return st;
    *out = wf_gather_mm(a, b, lhs, rhs, p->sorted_indices);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- segmented_mm */

/* The columns of each segment as a mask of `dtype`: segments (..., P, 2)
 * -> (..., P, 1, K) (0 / 1). */
static wf_array *segment_columns(wf_array *segments, int64_t k, wf_dtype dtype)
{
    const int r = segments->ndim;
    int64_t starts[WF_MAX_NDIM] = {0}, stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < r; d++) {
        stops[d] = segments->shape[d];
        steps[d] = 1;
    }
    stops[r - 1] = 1;
    wf_array *s0 = wf_slice(segments, starts, stops, steps); /* (..., P, 1) */
    starts[r - 1] = 1;
    stops[r - 1] = 2;
    wf_array *s1 = wf_slice(segments, starts, stops, steps);
    const int axis = -1;
    s0 = wf_expand_dims(s0, &axis, 1); /* (..., P, 1, 1) */
    s1 = wf_expand_dims(s1, &axis, 1);
    wf_array *column = wf_arange(0, (double)k, 1, WF_DTYPE_I64);
    wf_array *inside = wf_logical_and(wf_greater_equal(column, s0), wf_less(column, s1));
    return wf_astype(inside, dtype);
}

/* segments (S..., 2) as (P, 2). */
static wf_array *flat_segments(wf_array *segments, int lead)
{
    int64_t p = 1;
    for (int d = lead; d < segments->ndim - 1; d++)
        p *= segments->shape[d];
    int64_t shape[3];
    for (int d = 0; d < lead; d++)
        shape[d] = segments->shape[d];
    shape[lead] = p;
    shape[lead + 1] = 2;
    return wf_reshape(segments, shape, lead + 2);
}

static wf_status vjp_segmented_mm(wf_array *node, wf_array *ct, const bool *wanted,
                                  wf_array **cts)
{
    wf_array *a = node->inputs[0], *b = node->inputs[1];
    wf_array *seg = flat_segments(node->inputs[2], 0);
    if (!seg)
        return wf_last_error();
    const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1], count = seg->shape[0];
    const int64_t ct_shape[3] = {count, m, n};
    wf_array *cts3 = wf_reshape(ct, ct_shape, 3);
    wf_array *mask = segment_columns(seg, k, ct->dtype); /* (P, 1, K) */
    const int first = 0;
    if (wanted[0]) { /* sum_s (ct[s] @ b^T) * mask_s */
        wf_array *full = wf_matmul(cts3, swap_last(b));
        cts[0] = wf_sum(wf_multiply(full, mask), &first, 1, false);
        if (!cts[0])
            return wf_last_error();
    }
    if (wanted[1]) { /* sum_s (a^T @ ct[s]) * mask_s^T */
        wf_array *full = wf_matmul(swap_last(a), cts3);
        cts[1] = wf_sum(wf_multiply(full, swap_last(mask)), &first, 1, false);
        if (!cts[1])
            return wf_last_error();
    }
    return WF_OK;
}

static wf_status jvp_segmented_mm(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_array *in[3] = {node->inputs[0], node->inputs[1], node->inputs[2]};
    wf_array *ta = NULL, *tb = NULL;
    if (t[0]) {
        in[0] = t[0];
        ta = wf__rule_rebuild(node, in);
        in[0] = node->inputs[0];
    }
    if (t[1]) {
        in[1] = t[1];
        tb = wf__rule_rebuild(node, in);
    }
    *out = ta && tb ? wf_add(ta, tb) : (ta ? ta : tb);
    return wf__rule_result(*out);
}

/* out[e, s] = (a[e] * mask[e, s]) @ b[e]: one batched product. */
static wf_status vmap_segmented_mm(wf_array *node, wf_array *const *in, const int *axes,
                                   int64_t batch, wf_array **out, int *out_axis)
{
    wf_array *a = wf__vmap_materialize(in[0], axes[0], batch); /* (B, M, K) */
    wf_array *b = wf__vmap_materialize(in[1], axes[1], batch); /* (B, K, N) */
    wf_array *seg = wf__vmap_materialize(in[2], axes[2], batch);
    if (!a || !b || !seg)
        return wf_last_error();
    const wf_array *s_node = node->inputs[2];
    wf_array *flat = flat_segments(seg, 1); /* (B, P, 2) */
    wf_array *mask = flat ? segment_columns(flat, a->shape[2], a->dtype) : NULL; /* (B, P, 1, K) */
    const int second = 1;
    wf_array *masked = wf_multiply(wf_expand_dims(a, &second, 1), mask); /* (B, P, M, K) */
    wf_array *prod = wf_matmul(masked, wf_expand_dims(b, &second, 1));  /* (B, P, M, N) */
    int64_t shape[WF_MAX_NDIM];
    shape[0] = batch;
    wf__shape_copy(shape + 1, s_node->shape, s_node->ndim - 1);
    shape[s_node->ndim] = a->shape[1];
    shape[s_node->ndim + 1] = b->shape[2];
    *out = prod ? wf_reshape(prod, shape, s_node->ndim + 2) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_matmul_family[] = {
    {&wf__prim_gather_mm, WF_RULES_DIFFERENTIABLE, vjp_gather_mm, jvp_gather_mm,
     vmap_gather_mm, false},
    {&wf__prim_segmented_mm, WF_RULES_DIFFERENTIABLE, vjp_segmented_mm, jvp_segmented_mm,
     vmap_segmented_mm, false},
};

const size_t wf__rules_matmul_family_count =
    sizeof wf__rules_matmul_family / sizeof wf__rules_matmul_family[0];
