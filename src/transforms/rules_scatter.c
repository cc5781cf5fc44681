/*
 * Rules of the general gather and scatter primitives (prim/scatter.h).
 * Indices are constants of the differentiation. gather's cotangent is
 * scattered back with ADD; scatter's update cotangent is gathered. vmap
 * turns the batch into one more indexed axis (an arange index over it), so
 * any mix of batched array, updates and indices is one gather / scatter.
 */
#include "core/error.h"
#include "prim/scatter.h"
#include "transforms/rules.h"

/* The node's index inputs (from `first`) as an array of borrowed handles. */
static void index_inputs(wf_array *const *inputs, int first, int n, wf_array **out)
{
    for (int k = 0; k < n; k++)
        out[k] = inputs[first + k];
}

/* arange(batch) shaped (batch, 1, ..., 1) with rank 1 + rank. */
static wf_array *batch_index(int64_t batch, int rank)
{
    int64_t shape[WF_MAX_NDIM];
    shape[0] = batch;
    for (int d = 0; d < rank; d++)
        shape[1 + d] = 1;
    return wf_reshape(wf_arange(0, (double)batch, 1, WF_DTYPE_I32), shape, 1 + rank);
}

/* ---------------------------------------------------------------- gather */

static wf_status vjp_gather(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    const wf_gather_params *p = node->params;
    wf_array *idx[WF_MAX_NDIM];
    index_inputs(node->inputs, 1, p->naxes, idx);
    cts[0] = wf_scatter(wf_zeros_like(node->inputs[0]), idx, p->naxes, ct, p->axes,
                        WF_SCATTER_ADD);
    return wf__rule_result(cts[0]);
}

static wf_status vmap_gather(wf_array *node, wf_array *const *in, const int *axes,
                             int64_t batch, wf_array **out, int *out_axis)
{
    const wf_gather_params *p = node->params;
    const wf_array *a0 = node->inputs[0];
    const int rank = p->naxes > 0 ? node->inputs[1]->ndim : 0;
    wf_array *idx[WF_MAX_NDIM + 1];
    int gaxes[WF_MAX_NDIM + 1];
    int64_t sizes[WF_MAX_NDIM + 1];
    const bool a_batched = axes[0] != WF_VMAP_NOT_MAPPED;
    const int shift = a_batched ? 1 : 0;
    if (a_batched) {
        idx[0] = batch_index(batch, rank);
        gaxes[0] = 0;
        sizes[0] = 1;
    }
    for (int k = 0; k < p->naxes; k++) {
        idx[shift + k] = wf__vmap_front_or_one(in[1 + k], axes[1 + k]);
        gaxes[shift + k] = p->axes[k] + shift;
    }
    for (int d = 0; d < a0->ndim; d++)
        sizes[shift + d] = p->slice_sizes[d];
    wf_array *a = a_batched ? wf__vmap_to_front(in[0], axes[0]) : in[0];
    wf_array *g = wf_gather(a, idx, p->naxes + shift, gaxes, sizes);
    if (g && a_batched) { /* (B, I..., 1, sizes...) -> (B, I..., sizes...) */
        int64_t shape[WF_MAX_NDIM];
        int r = 0;
        for (int d = 0; d < g->ndim; d++)
            if (d != 1 + rank)
                shape[r++] = g->shape[d];
        g = wf_reshape(g, shape, r);
    }
    *out = g;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- scatter */

static int update_rank(const wf_array *node)
{
    return node->inputs[1]->ndim - node->inputs[0]->ndim;
}

/* The slice shape S of the node's updates (a's rank entries). */
static const int64_t *update_slice(const wf_array *node)
{
    return node->inputs[1]->shape + update_rank(node);
}

/* True where an element of the updates is the one REPLACE kept (the last
 * position writing its element): scatter each position's number, gather
 * the numbers back, compare. */
static wf_array *replace_winners(wf_array *node, wf_array *const *idx)
{
    const wf_scatter_params *p = node->params;
    const wf_array *a = node->inputs[0], *u = node->inputs[1];
    const int rank = update_rank(node);
    int64_t count = 1, shape[WF_MAX_NDIM];
    for (int d = 0; d < rank; d++)
        count *= u->shape[d];
    wf__shape_copy(shape, u->shape, rank);
    for (int d = 0; d < a->ndim; d++)
        shape[rank + d] = 1;
    wf_array *position = wf_reshape(wf_arange(0, (double)count, 1, WF_DTYPE_I64), shape, u->ndim);
    wf_array *numbers = wf_broadcast_to(position, u->shape, u->ndim);
    wf_array *last = wf_scatter(wf_full(a->shape, a->ndim, -1, WF_DTYPE_I64), idx, p->naxes,
                                numbers, p->axes, WF_SCATTER_REPLACE);
    return wf_equal(wf_gather(last, idx, p->naxes, p->axes, update_slice(node)), numbers);
}

static wf_status unsupported_prod(const char *what)
{
    return wf__error(WF_ERR_UNSUPPORTED, "%s: scatter with WF_SCATTER_PROD has no derivative",
                     what);
}

static wf_status vjp_scatter(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    const wf_scatter_params *p = node->params;
    if (p->mode == WF_SCATTER_PROD)
        return unsupported_prod("vjp");
    wf_array *a = node->inputs[0], *u = node->inputs[1];
    wf_array *idx[WF_MAX_NDIM];
    index_inputs(node->inputs, 2, p->naxes, idx);
    wf_array *ct_slices = wf_gather(ct, idx, p->naxes, p->axes, update_slice(node));
    if (!ct_slices)
        return wf_last_error();
    switch (p->mode) {
    case WF_SCATTER_REPLACE:
        if (wanted[0])
            cts[0] = wf_scatter(ct, idx, p->naxes, wf_zeros_like(u), p->axes, WF_SCATTER_REPLACE);
        if (wanted[1])
            cts[1] = wf_where(replace_winners(node, idx), ct_slices, wf__rule_scalar(ct, 0));
        break;
    case WF_SCATTER_ADD:
        if (wanted[0])
            cts[0] = ct;
        if (wanted[1])
            cts[1] = ct_slices;
        break;
    default: { /* MAX, MIN: the cotangent reaches every operand equal to the result */
        wf_array *zero = wf__rule_scalar(ct, 0);
        if (wanted[0])
            cts[0] = wf_where(wf_equal(a, node), ct, zero);
        if (wanted[1]) {
            wf_array *won = wf_gather(node, idx, p->naxes, p->axes, update_slice(node));
            cts[1] = wf_where(wf_equal(u, won), ct_slices, zero);
        }
        break;
    }
    }
    if ((wanted[0] && !cts[0]) || (wanted[1] && !cts[1]))
        return wf_last_error();
    return WF_OK;
}

static wf_status jvp_scatter(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_scatter_params *p = node->params;
    if (p->mode == WF_SCATTER_PROD)
        return unsupported_prod("jvp");
    if (p->mode == WF_SCATTER_REPLACE || p->mode == WF_SCATTER_ADD)
        return wf__rule_jvp_linear(node, t, out);
    /* MAX, MIN: the tangents of the operands equal to the result, summed. */
    wf_array *a = node->inputs[0], *u = node->inputs[1];
    wf_array *idx[WF_MAX_NDIM];
    index_inputs(node->inputs, 2, p->naxes, idx);
    wf_array *zero = wf__rule_scalar(node, 0);
    wf_array *ta = t[0] ? wf_where(wf_equal(a, node), t[0], zero) : wf_zeros_like(node);
    wf_array *tu = NULL;
    if (t[1]) {
        wf_array *won = wf_gather(node, idx, p->naxes, p->axes, update_slice(node));
        tu = wf_where(wf_equal(u, won), t[1], zero);
    }
    *out = tu ? wf_scatter(ta, idx, p->naxes, tu, p->axes, WF_SCATTER_ADD) : ta;
    return wf__rule_result(*out);
}

static wf_status vmap_scatter(wf_array *node, wf_array *const *in, const int *axes,
                              int64_t batch, wf_array **out, int *out_axis)
{
    const wf_scatter_params *p = node->params;
    const int rank = update_rank(node);
    wf_array *idx[WF_MAX_NDIM + 1];
    int saxes[WF_MAX_NDIM + 1];
    idx[0] = batch_index(batch, rank);
    saxes[0] = 0;
    for (int k = 0; k < p->naxes; k++) {
        idx[1 + k] = wf__vmap_front_or_one(in[2 + k], axes[2 + k]);
        saxes[1 + k] = p->axes[k] + 1;
    }
    wf_array *a = wf__vmap_materialize(in[0], axes[0], batch);
    wf_array *u = wf__vmap_materialize(in[1], axes[1], batch);
    if (!a || !u)
        return wf_last_error();
    /* updates (B, I..., S...) -> (B, I..., 1, S...) */
    int64_t shape[WF_MAX_NDIM];
    int r = 0;
    for (int d = 0; d < u->ndim; d++) {
        if (d == 1 + rank)
            shape[r++] = 1;
        shape[r++] = u->shape[d];
    }
    if (u->ndim == 1 + rank)
        shape[r++] = 1;
    u = wf_reshape(u, shape, r);
    *out = wf_scatter(a, idx, p->naxes + 1, u, saxes, (wf_scatter_mode)p->mode);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- masked_scatter */

/* The source's cotangent: per batch row, the output cotangent at the
 * selected elements, in order (the forward's positions found again with a
 * running count of the mask); unselected elements land in a spare last
 * column that is sliced off, and unused source elements get zero. */
static wf_array *masked_src_cotangent(wf_array *node, wf_array *ct)
{
    const wf_masked_scatter_params *p = node->params;
    wf_array *a = node->inputs[0], *mask = node->inputs[1], *src = node->inputs[2];
    int64_t rows = 1;
    for (int d = 0; d < p->nbatch; d++)
        rows *= a->shape[d];
    const int64_t row_len = rows > 0 ? a->size / rows : 0;
    const int64_t k = src->shape[p->nbatch];
    const int64_t flat_shape[2] = {rows, row_len};
    wf_array *m = wf_reshape(mask, flat_shape, 2);
    wf_dtype index_dtype = row_len < INT32_MAX ? WF_DTYPE_I32 : WF_DTYPE_I64;
    wf_array *taken = wf_cumsum(wf_astype(m, index_dtype), 1, false, true);
    wf_array *spare = wf_full(NULL, 0, (double)k, index_dtype);
    wf_array *position = wf_where(m, wf_subtract(taken, wf_full(NULL, 0, 1, index_dtype)), spare);
    const int64_t gathered_shape[2] = {rows, k + 1};
    wf_array *gathered = wf_put_along_axis(wf_zeros(gathered_shape, 2, ct->dtype), position,
                                           wf_reshape(ct, flat_shape, 2), 1, WF_SCATTER_ADD);
    const int64_t start[2] = {0, 0}, stop[2] = {rows, k}, step[2] = {1, 1};
    return wf_reshape(wf_slice(gathered, start, stop, step), src->shape, src->ndim);
}

static wf_status vjp_masked_scatter(wf_array *node, wf_array *ct, const bool *wanted,
                                    wf_array **cts)
{
    if (wanted[0]) {
        cts[0] = wf_where(node->inputs[1], wf__rule_scalar(ct, 0), ct);
        if (!cts[0])
            return wf_last_error();
    }
    if (wanted[2]) {
        cts[2] = masked_src_cotangent(node, ct);
        if (!cts[2])
            return wf_last_error();
    }
    return WF_OK;
}

/* Every input batched on axis 0 (unbatched ones broadcast): one more batch
 * axis, so each example takes its own source from its start. */
static wf_status vmap_masked_scatter(wf_array *node, wf_array *const *in, const int *axes,
                                     int64_t batch, wf_array **out, int *out_axis)
{
    wf_masked_scatter_params p = *(const wf_masked_scatter_params *)node->params;
    p.nbatch += 1;
    wf_array *batched[3];
    for (int i = 0; i < 3; i++)
        batched[i] = wf__vmap_materialize(in[i], axes[i], batch);
    *out = wf__rule_node(node->prim, &p, batched, 3);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_scatter[] = {
    {&wf__prim_gather, WF_RULES_DIFFERENTIABLE, vjp_gather, wf__rule_jvp_linear, vmap_gather,
     false},
    {&wf__prim_scatter, WF_RULES_DIFFERENTIABLE, vjp_scatter, jvp_scatter, vmap_scatter, false},
    {&wf__prim_masked_scatter, WF_RULES_DIFFERENTIABLE, vjp_masked_scatter, wf__rule_jvp_linear,
     vmap_masked_scatter, false},
};

const size_t wf__rules_scatter_count = sizeof wf__rules_scatter / sizeof wf__rules_scatter[0];
