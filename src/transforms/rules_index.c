/*
 * Rules of the indexing primitives: take, take_along_axis, scatter_add.
 * Indices are constants of the differentiation (integers get no gradient).
 * Gathers scatter their cotangent back (scatter_add); scatter_add gathers
 * its cotangent for the updates. Batched indices (a different index per
 * example) become indices into the batch flattened with the indexed axis.
 */
#include <stdlib.h>

#include "core/error.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "transforms/rules.h"

static int axis_of(const wf_array *node) { return ((const wf_axis_params *)node->params)->axis; }

/* idx as int64 with negative entries counted from the end of an axis of n. */
static wf_array *normalized_indices(wf_array *idx, int64_t n)
{
    wf_array *i = wf_astype(idx, WF_DTYPE_I64);
    wf_array *zero = wf_scalar(0, WF_DTYPE_I64);
    return wf_where(wf_less(i, zero), wf_add(i, wf_scalar((double)n, WF_DTYPE_I64)), i);
}

/* Batched indices idx (B, ...) into an axis of n, as indices into the
 * batch-and-axis flattened (B * n): idx + b * n. */
static wf_array *flat_batch_indices(wf_array *idx, int64_t n)
{
    const int64_t batch = idx->shape[0];
    int64_t shape[WF_MAX_NDIM];
    shape[0] = batch;
    for (int d = 1; d < idx->ndim; d++)
        shape[d] = 1;
    wf_array *b = wf_arange(0, (double)batch, 1, WF_DTYPE_I64);
    wf_array *offsets = wf_multiply(wf_reshape(b, shape, idx->ndim),
                                    wf_scalar((double)n, WF_DTYPE_I64));
    return wf_add(normalized_indices(idx, n), offsets);
}

/* x (B, ..., at axis `axis` size n, ...) as (B * n, rest...). */
static wf_array *merge_batch_with_axis(wf_array *x, int axis)
{
    wf_array *m = axis == 1 ? x : wf_moveaxis(x, axis, 1);
    if (!m)
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    shape[0] = m->shape[0] * m->shape[1];
    for (int d = 2; d < m->ndim; d++)
        shape[d - 1] = m->shape[d];
    return wf_reshape(m, shape, m->ndim - 1);
}

/* ---------------------------------------------------------------- take */

/* ct's index dims merged into one and the indices flattened by reshapes
 * that follow each call's shapes (a shapeless trace: an embedding lookup's
 * gradient for any number of tokens). */
static wf_array *vjp_take_following(wf_array *a, wf_array *idx, wf_array *ct, int axis)
{
    const int front = 0;
    wf_array *c = idx->ndim ? wf_flatten(ct, axis, axis + idx->ndim - 1)
                            : wf_expand_dims(ct, &axis, 1);
    wf_array *i = idx->ndim ? wf_flatten(idx, 0, -1) : wf_expand_dims(idx, &front, 1);
    return wf_scatter_add(wf_zeros_like(a), i, c, axis);
}

static wf_status vjp_take(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    wf_array *a = node->inputs[0], *idx = node->inputs[1];
    const int axis = axis_of(node);
    if (wf__array_is_shapeless(node)) {
        cts[0] = vjp_take_following(a, idx, ct, axis);
        return wf__rule_result(cts[0]);
    }
    int64_t shape[WF_MAX_NDIM];
    int n = 0;
    for (int d = 0; d < axis; d++)
        shape[n++] = a->shape[d];
    shape[n++] = idx->size;
    for (int d = axis + 1; d < a->ndim; d++)
        shape[n++] = a->shape[d];
    const int64_t flat = idx->size;
    wf_array *c = wf_reshape(ct, shape, n);
    wf_array *i = wf_reshape(idx, &flat, 1);
    cts[0] = wf_scatter_add(wf_zeros_like(a), i, c, axis);
    return wf__rule_result(cts[0]);
}

/* Both batched: gather from the batch flattened with the axis, then put the
 * index dims back after the leading dims. */
static wf_array *take_both_batched(wf_array *a, wf_array *idx, int axis)
{
    const int64_t n = a->shape[axis + 1];
    wf_array *flat = merge_batch_with_axis(a, axis + 1);
    wf_array *g = flat ? wf_take(flat, flat_batch_indices(idx, n), 0) : NULL;
    if (!g)
        return NULL;
    /* g: (B, I..., pre..., post...) -> (B, pre..., I..., post...) */
    const int ni = idx->ndim - 1, pre = axis;
    int perm[WF_MAX_NDIM], k = 0;
    perm[k++] = 0;
    for (int d = 0; d < pre; d++)
        perm[k++] = 1 + ni + d;
    for (int d = 0; d < ni; d++)
        perm[k++] = 1 + d;
    for (int d = 1 + ni + pre; d < g->ndim; d++)
        perm[k++] = d;
    return wf_transpose(g, perm, g->ndim);
}

static wf_status vmap_take(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    (void)batch;
    const int axis = axis_of(node);
    const bool a_b = axes[0] != WF_VMAP_NOT_MAPPED, i_b = axes[1] != WF_VMAP_NOT_MAPPED;
    wf_array *a = wf__vmap_to_front(in[0], axes[0]), *idx = wf__vmap_to_front(in[1], axes[1]);
    if (!a || !idx)
        return wf_last_error();
    if (a_b && !i_b) {
        *out = wf_take(a, idx, axis + 1);
        *out_axis = 0;
    } else if (!a_b) {
        *out = wf_take(a, idx, axis);
        *out_axis = axis;
    } else {
        *out = take_both_batched(a, idx, axis);
        *out_axis = 0;
    }
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- take_along_axis */

/* Flat (row-major) positions in a (shape of a) of the elements
 * take_along_axis(a, idx, axis) reads, in idx's shape. */
static wf_array *along_axis_positions(const wf_array *a, wf_array *idx, int axis)
{
    const int r = a->ndim;
    int64_t strides[WF_MAX_NDIM];
    wf__contiguous_strides(a->shape, r, strides);
    wf_array *pos = wf_multiply(normalized_indices(idx, a->shape[axis]),
                                wf_scalar((double)strides[axis], WF_DTYPE_I64));
    for (int d = 0; d < r && pos; d++) {
        if (d == axis)
            continue;
        int64_t shape[WF_MAX_NDIM];
        for (int e = 0; e < r; e++)
            shape[e] = e == d ? idx->shape[d] : 1;
        wf_array *coord = wf_arange(0, (double)idx->shape[d], 1, WF_DTYPE_I64);
        pos = wf_add(pos, wf_multiply(wf_reshape(coord, shape, r),
                                      wf_scalar((double)strides[d], WF_DTYPE_I64)));
    }
    return pos;
}

/* The same scatter for a shapeless trace, from arrays that follow each
 * call's shapes: a general scatter over every axis, idx on `axis` and on
 * each other axis d the position along d (an exclusive cumsum of ones in
 * idx's shape), each position's update a one-element slice of ct. */
static wf_array *vjp_along_axis_following(wf_array *a, wf_array *idx, wf_array *ct, int axis)
{
    const int r = a->ndim;
    if (2 * r > WF_MAX_NDIM) {
        wf__error(WF_ERR_SHAPE, "vjp: take_along_axis of rank %d in a shapeless trace exceeds "
                  "rank %d", r, WF_MAX_NDIM / 2);
        return NULL;
    }
    wf_array *ones = wf_ones_like(wf_astype(idx, WF_DTYPE_I32));
    wf_array *index[WF_MAX_NDIM];
    int axes[WF_MAX_NDIM], slice_axes[WF_MAX_NDIM];
    for (int d = 0; d < r; d++) {
        axes[d] = d;
        slice_axes[d] = r + d;
        index[d] = d == axis ? idx : wf_cumsum(ones, d, false, false);
        if (!index[d])
            return NULL;
    }
    wf_array *updates = wf_expand_dims(ct, slice_axes, r);
    return updates ? wf_scatter(wf_zeros_like(a), index, r, updates, axes, WF_SCATTER_ADD)
                   : NULL;
}

static wf_status vjp_take_along_axis(wf_array *node, wf_array *ct, const bool *wanted,
                                     wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    wf_array *a = node->inputs[0], *idx = node->inputs[1];
    if (wf__array_is_shapeless(node)) {
        cts[0] = vjp_along_axis_following(a, idx, ct, axis_of(node));
        return wf__rule_result(cts[0]);
    }
    const int64_t size = a->size, count = idx->size;
    wf_array *pos = wf_reshape(along_axis_positions(a, idx, axis_of(node)), &count, 1);
    wf_array *flat = wf_scatter_add(wf_zeros(&size, 1, a->dtype), pos,
                                    wf_reshape(ct, &count, 1), 0);
    cts[0] = wf_reshape(flat, a->shape, a->ndim);
    return wf__rule_result(cts[0]);
}

static wf_status vmap_take_along_axis(wf_array *node, wf_array *const *in, const int *axes,
                                      int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *a = wf__vmap_front_or_one(in[0], axes[0]);
    wf_array *idx = wf__vmap_front_or_one(in[1], axes[1]);
    *out = a && idx ? wf_take_along_axis(a, idx, axis_of(node) + 1) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- scatter_add */

static wf_status vjp_scatter_add(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **cts)
{
    cts[0] = wanted[0] ? ct : NULL;
    if (wanted[2] && !(cts[2] = wf_take(ct, node->inputs[1], axis_of(node))))
        return wf_last_error();
    return WF_OK;
}

/* Batched indices: scatter into the batch flattened with the axis. */
static wf_array *scatter_batched_indices(wf_array *a, wf_array *idx, wf_array *u, int axis)
{
    const int64_t n = a->shape[axis + 1];
    wf_array *fa = merge_batch_with_axis(a, axis + 1);
    wf_array *fu = merge_batch_with_axis(u, axis + 1);
    const int64_t count = idx->size;
    wf_array *fi = wf_reshape(flat_batch_indices(idx, n), &count, 1);
    wf_array *s = fa && fu ? wf_scatter_add(fa, fi, fu, 0) : NULL;
    if (!s)
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    shape[0] = a->shape[0];
    shape[1] = n;
    for (int d = 1; d < s->ndim; d++)
        shape[d + 1] = s->shape[d];
    wf_array *back = wf_reshape(s, shape, s->ndim + 1);
    return axis + 1 == 1 ? back : wf_moveaxis(back, 1, axis + 1);
}

static wf_status vmap_scatter_add(wf_array *node, wf_array *const *in, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis)
{
    const int axis = axis_of(node);
    wf_array *a = wf__vmap_materialize(in[0], axes[0], batch);
    wf_array *u = wf__vmap_materialize(in[2], axes[2], batch);
    if (!a || !u)
        return wf_last_error();
    if (axes[1] == WF_VMAP_NOT_MAPPED)
        *out = wf_scatter_add(a, in[1], u, axis + 1);
    else
        *out = scatter_batched_indices(a, wf__vmap_to_front(in[1], axes[1]), u, axis);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_index[] = {
    {&wf__prim_take, WF_RULES_DIFFERENTIABLE, vjp_take, wf__rule_jvp_linear, vmap_take, true},
    {&wf__prim_take_along_axis, WF_RULES_DIFFERENTIABLE, vjp_take_along_axis,
     wf__rule_jvp_linear, vmap_take_along_axis, true},
    {&wf__prim_scatter_add, WF_RULES_DIFFERENTIABLE, vjp_scatter_add, wf__rule_jvp_linear,
     vmap_scatter_add, false},
};

const size_t wf__rules_index_count = sizeof wf__rules_index / sizeof wf__rules_index[0];
