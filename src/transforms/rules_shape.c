/*
 * Rules of the layout primitives: reshape, transpose, broadcast_to, slice,
 * slice_update, concatenate, pad, tri. All are linear, so their jvp is the
 * primitive applied to the tangents; their vjp is the adjoint layout
 * operation (reshape back, inverse permutation, sum over broadcast axes,
 * scatter into zeros, ...). Batching puts the batch first and extends the
 * params by one leading axis.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/graph_mode.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "transforms/rules.h"
#include "util/fault.h"

static wf_status too_big(const char *name)
{
    return wf__error(WF_ERR_SHAPE, "vmap: batching '%s' exceeds rank %d", name, WF_MAX_NDIM);
}

/* ---------------------------------------------------------------- reshape */

static wf_status vjp_reshape(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    cts[0] = wf__rule_reshape_like(ct, node->inputs[0]);
    return wf__rule_result(cts[0]);
}

/* A literal reshape rebuilt on the tangent would name the traced shape:
 * a shapeless trace's tangent takes the node's shape instead. */
static wf_status jvp_reshape(wf_array *node, wf_array *const *t, wf_array **out)
{
    if (!wf__array_is_shapeless(node))
        return wf__rule_jvp_linear(node, t, out);
    *out = wf__rule_reshape_like(t[0], node);
    return wf__rule_result(*out);
}

static wf_status vmap_reshape(wf_array *node, wf_array *const *in, const int *axes,
                              int64_t batch, wf_array **out, int *out_axis)
{
    if (node->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    const wf_reshape_params *p = node->params;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out_axis = 0;
    if (p->follows_input) { /* still derived: the batch and each derived dim */
        wf_reshape_params q;
        memset(&q, 0, sizeof q);
        q.ndim = p->ndim + 1;
        q.shape[0] = batch;
        q.in_begin[0] = 0;
        q.in_end[0] = 1;
        for (int d = 0; d < p->ndim; d++) {
            const bool derived = p->in_end[d] > p->in_begin[d];
            q.shape[d + 1] = p->shape[d];
            q.in_begin[d + 1] = (int8_t)(derived ? p->in_begin[d] + 1 : 0);
            q.in_end[d + 1] = (int8_t)(derived ? p->in_end[d] + 1 : 0);
        }
        q.follows_input = true;
        *out = x ? wf__rule_node(node->prim, &q, &x, 1) : NULL;
        return wf__rule_result(*out);
    }
    int64_t shape[WF_MAX_NDIM];
    shape[0] = batch;
    wf__shape_copy(shape + 1, node->shape, node->ndim);
    *out = wf_reshape(x, shape, node->ndim + 1);
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- transpose */

static const wf_transpose_params *perm_of(const wf_array *node) { return node->params; }

static wf_status vjp_transpose(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    const wf_transpose_params *p = perm_of(node);
    int inverse[WF_MAX_NDIM];
    for (int i = 0; i < p->ndim; i++)
        inverse[p->perm[i]] = i;
    cts[0] = wf_transpose(ct, inverse, p->ndim);
    return wf__rule_result(cts[0]);
}

static wf_status vmap_transpose(wf_array *node, wf_array *const *in, const int *axes,
                                int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_transpose_params *p = perm_of(node);
    if (p->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    int perm[WF_MAX_NDIM];
    perm[0] = 0;
    for (int i = 0; i < p->ndim; i++)
        perm[i + 1] = p->perm[i] + 1;
    *out = wf_transpose(wf__vmap_to_front(in[0], axes[0]), perm, p->ndim + 1);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- broadcast_to */

static wf_status vjp_broadcast_to(wf_array *node, wf_array *ct, const bool *wanted,
                                  wf_array **cts)
{
    (void)wanted;
    cts[0] = wf__rule_unbroadcast(ct, node->inputs[0]);
    return wf__rule_result(cts[0]);
}

/* In a shapeless trace, an implicit broadcast's tangent is an implicit
 * broadcast too (its element-wise consumer re-broadcasts at each call's
 * shapes); an explicit one follows the node's shape. */
static wf_status jvp_broadcast_to(wf_array *node, wf_array *const *t, wf_array **out)
{
    if (!wf__array_is_shapeless(node))
        return wf__rule_jvp_linear(node, t, out);
    if (node->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST) {
        *out = wf__array_publish(wf__op_implicit_broadcast(t[0], node->shape, node->ndim));
    } else {
        wf_array *inputs[2] = {t[0], node};
        *out = wf__rule_node(&wf__prim_broadcast_like, NULL, inputs, 2);
    }
    return wf__rule_result(*out);
}

static wf_status vmap_broadcast_to(wf_array *node, wf_array *const *in, const int *axes,
                                   int64_t batch, wf_array **out, int *out_axis)
{
    if (node->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    int64_t shape[WF_MAX_NDIM];
    shape[0] = batch;
    wf__shape_copy(shape + 1, node->shape, node->ndim);
    wf_array *x = wf__vmap_pad_rank(wf__vmap_to_front(in[0], axes[0]), node->ndim + 1);
    *out = x ? wf_broadcast_to(x, shape, node->ndim + 1) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- slice, slice_update */

static const wf_slice_params *slice_of(const wf_array *node) { return node->params; }

/* The slice params with a full leading axis. */
static wf_slice_params slice_batched(const wf_slice_params *p)
{
    wf_slice_params q;
    memset(&q, 0, sizeof q);
    q.ndim = p->ndim + 1;
    q.starts[0] = 0;
    q.stops[0] = INT64_MAX;
    q.steps[0] = 1;
    for (int d = 0; d < p->ndim; d++) {
        q.starts[d + 1] = p->starts[d];
        q.stops[d + 1] = p->stops[d];
        q.steps[d + 1] = p->steps[d];
    }
    return q;
}

/* For a slice with every step 1, the zeros before (low) and after (high) it
 * on each axis of the input; false for other steps. */
static bool slice_margins(const wf_array *node, int64_t *low, int64_t *high)
{
    const wf_slice_params *p = slice_of(node);
    const wf_array *x = node->inputs[0];
    for (int d = 0; d < x->ndim; d++) {
        if (p->steps[d] != 1)
            return false;
        int64_t start = p->starts[d] < 0 ? p->starts[d] + x->shape[d] : p->starts[d];
        start = start < 0 ? 0 : start > x->shape[d] ? x->shape[d] : start;
        low[d] = start;
        high[d] = x->shape[d] - start - node->shape[d];
    }
    return true;
}

/* Whether a rule of a slice or slice_update must read the traced sizes:
 * in a shapeless trace, any but the caller's, whose bounds a shapeless
 * replay keeps (so rules that reuse them follow each call). */
static bool slice_reads_traced_shape(const wf_array *node)
{
    return wf__array_is_shapeless(node) && !(node->node_flags & WF_NODE_FLAG_USER_SHAPE);
}

/* The node rebuilt on the tangents, under the traced-shape mark where its
 * rules read traced sizes. */
static wf_status jvp_slice_linear(wf_array *node, wf_array *const *t, wf_array **out)
{
    const bool traced = slice_reads_traced_shape(node);
    if (traced)
        wf__graph_traced_shape_enter();
    wf_status st = wf__rule_jvp_linear(node, t, out);
    if (traced)
        wf__graph_traced_shape_leave();
    return st;
}

/* The cotangent padded with zeros back to the input's shape: one pass (pad)
 * for unit steps, else zeros with the slice written in. */
static wf_status vjp_slice(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    const wf_slice_params *p = slice_of(node);
    int64_t low[WF_MAX_NDIM], high[WF_MAX_NDIM];
    const bool shapeless = wf__array_is_shapeless(node);
    if (shapeless && (node->node_flags & WF_NODE_FLAG_USER_SHAPE)) {
        /* the caller's slice, which a shapeless replay keeps as it keeps the
         * forward one: written into zeros by the same bounds */
        cts[0] = wf_slice_update(wf_zeros_like(node->inputs[0]), ct, p->starts, p->stops,
                                 p->steps);
        return wf__rule_result(cts[0]);
    }
    if (shapeless) /* a slice weft built, and the margins: traced sizes */
        wf__graph_traced_shape_enter();
    if (slice_margins(node, low, high))
        cts[0] = wf_pad(ct, low, high, 0.0);
    else
        cts[0] = wf_slice_update(wf_zeros_like(node->inputs[0]), ct, p->starts, p->stops,
                                 p->steps);
    if (shapeless)
        wf__graph_traced_shape_leave();
    return wf__rule_result(cts[0]);
}

/* A user's slice rebuilt on the tangent keeps the user's mark (a shapeless
 * replay keeps it as the forward one); any other is rebuilt under the
 * traced-shape mark in a shapeless trace. */
static wf_status jvp_slice(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_slice_params *p = slice_of(node);
    if (wf__array_is_shapeless(node) && !slice_reads_traced_shape(node)) {
        *out = wf_slice(t[0], p->starts, p->stops, p->steps);
        return wf__rule_result(*out);
    }
    return jvp_slice_linear(node, t, out);
}

static wf_status vmap_slice(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                            wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_slice_params *p = slice_of(node);
    if (p->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    wf_slice_params q = slice_batched(p);
    *out = wf_slice(wf__vmap_to_front(in[0], axes[0]), q.starts, q.stops, q.steps);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* The cotangent with the slice zeroed, and the slice of it: only the
 * node's bounds and the shapes of the cotangent and update. */
static wf_status vjp_slice_update(wf_array *node, wf_array *ct, const bool *wanted,
                                  wf_array **cts)
{
    const wf_slice_params *p = slice_of(node);
    const bool traced = slice_reads_traced_shape(node);
    if (traced)
        wf__graph_traced_shape_enter();
    wf_status st = WF_OK;
    if (wanted[0] && !(cts[0] = wf_slice_update(ct, wf_zeros_like(node->inputs[1]), p->starts,
                                                p->stops, p->steps)))
        st = wf_last_error();
    if (st == WF_OK && wanted[1] && !(cts[1] = wf_slice(ct, p->starts, p->stops, p->steps)))
        st = wf_last_error();
    if (traced)
        wf__graph_traced_shape_leave();
    return st;
}

/* The caller's slice_update in a shapeless trace is rebuilt on the tangents
 * as the caller's (its bounds kept at each call); any other as the node. */
static wf_status jvp_slice_update(wf_array *node, wf_array *const *t, wf_array **out)
{
    if (wf__array_is_shapeless(node) && !slice_reads_traced_shape(node)) {
        const wf_slice_params *p = slice_of(node);
        wf_array *a = t[0] ? t[0] : wf_zeros_like(node->inputs[0]);
        wf_array *u = t[1] ? t[1] : wf_zeros_like(node->inputs[1]);
        *out = a && u ? wf_slice_update(a, u, p->starts, p->stops, p->steps) : NULL;
        return wf__rule_result(*out);
    }
    return jvp_slice_linear(node, t, out);
}

static wf_status vmap_slice_update(wf_array *node, wf_array *const *in, const int *axes,
                                   int64_t batch, wf_array **out, int *out_axis)
{
    const wf_slice_params *p = slice_of(node);
    if (p->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    wf_slice_params q = slice_batched(p);
    wf_array *a = wf__vmap_materialize(in[0], axes[0], batch);
    wf_array *u = wf__vmap_materialize(in[1], axes[1], batch);
    *out = a && u ? wf_slice_update(a, u, q.starts, q.stops, q.steps) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- concatenate */

static int concat_axis(const wf_array *node)
{
    return ((const wf_axis_params *)node->params)->axis;
}

/* A node of `prim` with node's params on (first, second, node's inputs
 * after its first two): the shape-following primitives rebuilt on a
 * cotangent or tangent with the same like and block offsets. */
static wf_array *rebuild_leading(const wf_prim_def *prim, wf_array *node, wf_array *first,
                                 wf_array *second)
{
    if (!first || !second)
        return NULL;
    wf_array **inputs = wf__malloc((size_t)node->ninputs * sizeof *inputs);
    if (!inputs) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", prim->name);
        return NULL;
    }
    inputs[0] = first;
    inputs[1] = second;
    for (int i = 2; i < node->ninputs; i++)
        inputs[i] = node->inputs[i];
    wf_array *out = wf__rule_node(prim, node->params, inputs, node->ninputs);
    free(inputs);
    return out;
}

/* Each operand's part of the cotangent cropped to the operand's shape at
 * the summed sizes of the operands before it, both read at each call
 * (crop_like on ct, operand i, operands 0 .. i-1). */
static wf_status vjp_concatenate_following(wf_array *node, wf_array *ct, const bool *wanted,
                                           wf_array **cts)
{
    wf_block_params p;
    memset(&p, 0, sizeof p);
    p.axis = concat_axis(node);
    p.ndim = node->ndim;
    wf_array **inputs = wf__malloc((size_t)(node->ninputs + 1) * sizeof *inputs);
    if (!inputs)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "vjp: out of memory");
    inputs[0] = ct;
    wf_status st = WF_OK;
    for (int i = 0; i < node->ninputs && st == WF_OK; i++) {
        inputs[1] = node->inputs[i];
        if (i > 0)
            inputs[i + 1] = node->inputs[i - 1];
        if (wanted[i] && !(cts[i] = wf__rule_node(&wf__prim_crop_like, &p, inputs, i + 2)))
            st = wf_last_error();
    }
    free(inputs);
    return st;
}

static wf_status vjp_concatenate(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **cts)
{
    if (wf__array_is_shapeless(node))
        return vjp_concatenate_following(node, ct, wanted, cts);
    const int axis = concat_axis(node);
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < ct->ndim; d++) {
        starts[d] = 0;
        stops[d] = INT64_MAX;
        steps[d] = 1;
    }
    int64_t offset = 0;
    for (int i = 0; i < node->ninputs; i++) {
        const int64_t len = node->inputs[i]->shape[axis];
        starts[axis] = offset;
        stops[axis] = offset + len;
        offset += len;
        if (wanted[i] && !(cts[i] = wf_slice(ct, starts, stops, steps)))
            return wf_last_error();
    }
    return WF_OK;
}

static wf_status vmap_concatenate(wf_array *node, wf_array *const *in, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis)
{
    wf_array **xs = wf__malloc((size_t)node->ninputs * sizeof *xs);
    if (!xs)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    int i = 0;
    for (; i < node->ninputs; i++)
        if (!(xs[i] = wf__vmap_materialize(in[i], axes[i], batch)))
            break;
    *out = i == node->ninputs ? wf_concatenate(xs, node->ninputs, concat_axis(node) + 1) : NULL;
    *out_axis = 0;
    free(xs);
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- pad */

static const wf_pad_params *pad_of(const wf_array *node) { return node->params; }

/* The cotangent's interior: at the low pads, of the operand's shape (read
 * at each call by crop_like in a shapeless trace). */
static wf_status vjp_pad(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    const wf_pad_params *p = pad_of(node);
    wf_array *x = node->inputs[0];
    if (wf__array_is_shapeless(node)) {
        wf_block_params b;
        memset(&b, 0, sizeof b);
        b.ndim = x->ndim;
        wf__shape_copy(b.low, p->low, x->ndim);
        wf_array *inputs[2] = {ct, x};
        cts[0] = wf__rule_node(&wf__prim_crop_like, &b, inputs, 2);
        return wf__rule_result(cts[0]);
    }
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < x->ndim; d++) {
        starts[d] = p->low[d];
        stops[d] = p->low[d] + x->shape[d];
        steps[d] = 1;
    }
    cts[0] = wf_slice(ct, starts, stops, steps);
    return wf__rule_result(cts[0]);
}

/* The pad value is a constant: the tangent is padded with zeros. */
static wf_status jvp_pad(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_pad_params *p = pad_of(node);
    *out = wf_pad(t[0], p->low, p->high, 0.0);
    return wf__rule_result(*out);
}

static wf_status vmap_pad(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                          wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_pad_params *p = pad_of(node);
    if (p->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    int64_t low[WF_MAX_NDIM], high[WF_MAX_NDIM];
    low[0] = high[0] = 0;
    for (int d = 0; d < p->ndim; d++) {
        low[d + 1] = p->low[d];
        high[d + 1] = p->high[d];
    }
    *out = wf_pad(wf__vmap_to_front(in[0], axes[0]), low, high, p->value);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- tri */

/* tril / triu zero a fixed set of positions: its own adjoint. */
static wf_status vjp_tri(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    cts[0] = wf__rule_rebuild(node, &ct);
    return wf__rule_result(cts[0]);
}

static wf_status vmap_tri(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                          wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_rebuild(node, &x); /* it acts on the last two axes */
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- view */

/* Acts on the last axis: the batch axis goes in front. */
static wf_status vmap_view(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_rebuild(node, &x);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- shape-following */

/* The shape-following primitives of prim/shape_like.c: (x, like), linear in
 * x; like gives only a shape, so it gets no cotangent or tangent. */
static wf_array *like_node(const wf_prim_def *prim, wf_array *x, wf_array *like)
{
    wf_array *inputs[2] = {x, like};
    return wf__rule_node(prim, NULL, inputs, 2);
}

static wf_status vjp_broadcast_like(wf_array *node, wf_array *ct, const bool *wanted,
                                    wf_array **cts)
{
    if (wanted[0] && !(cts[0] = wf__rule_unbroadcast(ct, node->inputs[0])))
        return wf_last_error();
    return WF_OK;
}

static wf_status vjp_unbroadcast_like(wf_array *node, wf_array *ct, const bool *wanted,
                                      wf_array **cts)
{
    if (wanted[0] && !(cts[0] = like_node(&wf__prim_broadcast_like, ct, node->inputs[0])))
        return wf_last_error();
    return WF_OK;
}

static wf_status vjp_reshape_like(wf_array *node, wf_array *ct, const bool *wanted,
                                  wf_array **cts)
{
    if (wanted[0] && !(cts[0] = wf__rule_reshape_like(ct, node->inputs[0])))
        return wf_last_error();
    return WF_OK;
}

/* The primitive on x's tangent, with the same like, block offsets and
 * params (zero without one). */
static wf_status jvp_like(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = t[0] ? rebuild_leading(node->prim, node, t[0], node->inputs[1]) : NULL;
    return t[0] ? wf__rule_result(*out) : WF_OK;
}

/* Both operands batched on axis 0 and at one rank: broadcast_like then
 * broadcasts the batch too (a size-1 stand-in for an unbatched one). */
static wf_status vmap_broadcast_like(wf_array *node, wf_array *const *in, const int *axes,
                                     int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    if (node->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    wf_array *x = wf__vmap_pad_rank(wf__vmap_front_or_one(in[0], axes[0]), node->ndim + 1);
    wf_array *like = wf__vmap_pad_rank(wf__vmap_front_or_one(in[1], axes[1]), node->ndim + 1);
    *out = x && like ? like_node(&wf__prim_broadcast_like, x, like) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* (B, 1, ..., 1) of rank `rank`: x's first element along each axis after
 * the batch (x batched on axis 0), a view whose shape follows x's batch. */
static wf_array *batch_proxy(wf_array *x, int rank)
{
    int64_t starts[WF_MAX_NDIM] = {0}, stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < x->ndim; d++) {
        stops[d] = d == 0 ? INT64_MAX : 1;
        steps[d] = 1;
    }
    return wf__vmap_pad_rank(wf_slice(x, starts, stops, steps), rank);
}

/* An unbatched like for a batched x: like with the batch in front. In a
 * shapeless trace, like broadcast (a view) against a batch-sized proxy
 * taken from x, so the batch follows each call's; otherwise like
 * broadcast to the batch. */
static wf_array *like_with_batch(wf_array *like, wf_array *x, int64_t batch, int rank)
{
    if (!wf__vmap_batching_shapeless())
        return wf__vmap_pad_rank(wf__vmap_materialize(like, WF_VMAP_NOT_MAPPED, batch), rank);
    wf_array *front = wf__vmap_pad_rank(wf__vmap_front_or_one(like, WF_VMAP_NOT_MAPPED), rank);
    wf_array *proxy = x ? batch_proxy(x, rank) : NULL;
    return front && proxy ? like_node(&wf__prim_broadcast_like, front, proxy) : NULL;
}

/* x and like both batched on axis 0 (an unbatched one broadcast to the
 * batch), like raised to x's rank by size-1 axes after the batch, which
 * the sum keeps and a squeeze drops. */
static wf_status vmap_unbroadcast_like(wf_array *node, wf_array *const *in, const int *axes,
                                       int64_t batch, wf_array **out, int *out_axis)
{
    const int rank = node->inputs[0]->ndim + 1;
    if (rank > WF_MAX_NDIM)
        return too_big(node->prim->name);
    wf_array *x = wf__vmap_materialize(in[0], axes[0], batch);
    wf_array *like = axes[1] == WF_VMAP_NOT_MAPPED && axes[0] != WF_VMAP_NOT_MAPPED
                         ? like_with_batch(in[1], x, batch, rank)
                         : wf__vmap_pad_rank(wf__vmap_materialize(in[1], axes[1], batch), rank);
    wf_array *sum = x && like ? like_node(&wf__prim_unbroadcast_like, x, like) : NULL;
    int padded[WF_MAX_NDIM];
    const int npadded = rank - 1 - node->ndim;
    for (int d = 0; d < npadded; d++)
        padded[d] = 1 + d;
    *out = sum && npadded ? wf_squeeze(sum, padded, npadded) : sum;
    *out_axis = 0;
    return wf__rule_result(*out);
}

static wf_status vmap_reshape_like(wf_array *node, wf_array *const *in, const int *axes,
                                   int64_t batch, wf_array **out, int *out_axis)
{
    wf_array *x = wf__vmap_materialize(in[0], axes[0], batch);
    wf_array *like = wf__vmap_materialize(in[1], axes[1], batch);
    *out = x && like ? like_node(node->prim, x, like) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* The count is the same for each example. With both operands batched (a
 * mean's input and result) it is their batched sizes' ratio, unbatched and
 * right at any batch size; otherwise the node's, repeated along the batch
 * (a broadcast to the traced batch size). */
static wf_status vmap_size_ratio(wf_array *node, wf_array *const *in, const int *axes,
                                 int64_t batch, wf_array **out, int *out_axis)
{
    if (axes[0] != WF_VMAP_NOT_MAPPED && axes[1] != WF_VMAP_NOT_MAPPED) {
        *out = like_node(&wf__prim_size_ratio, in[0], in[1]);
        *out_axis = WF_VMAP_NOT_MAPPED;
        return wf__rule_result(*out);
    }
    *out = wf__vmap_materialize(node, WF_VMAP_NOT_MAPPED, batch);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* crop_like and pad_like are each other's adjoint, on the same block: the
 * cotangent goes where the node's x came from, shaped like x. */
static wf_status vjp_block(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    const wf_prim_def *adjoint =
        node->prim == &wf__prim_crop_like ? &wf__prim_pad_like : &wf__prim_crop_like;
    if (wanted[0] && !(cts[0] = rebuild_leading(adjoint, node, ct, node->inputs[0])))
        return wf_last_error();
    return WF_OK;
}

/* x and like batched on axis 0 (an unbatched one broadcast to the batch),
 * the inputs after them with their batch, or a size-1 stand-in, in front
 * (only their sizes along the block's axis count). */
static wf_status vmap_block(wf_array *node, wf_array *const *in, const int *axes,
                            int64_t batch, wf_array **out, int *out_axis)
{
    const wf_block_params *p = node->params;
    if (p->ndim + 1 > WF_MAX_NDIM)
        return too_big(node->prim->name);
    wf_block_params q;
    memset(&q, 0, sizeof q);
    q.axis = p->axis + 1;
    q.ndim = p->ndim + 1;
    wf__shape_copy(q.low + 1, p->low, p->ndim);
    wf_array **inputs = wf__malloc((size_t)node->ninputs * sizeof *inputs);
    if (!inputs)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    int i = 0;
    for (; i < node->ninputs; i++) {
        inputs[i] = i < 2 ? wf__vmap_materialize(in[i], axes[i], batch)
                          : wf__vmap_front_or_one(in[i], axes[i]);
        if (!inputs[i])
            break;
    }
    *out = i == node->ninputs ? wf__rule_node(node->prim, &q, inputs, node->ninputs) : NULL;
    *out_axis = 0;
    free(inputs);
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_shape[] = {
    {&wf__prim_reshape, WF_RULES_DIFFERENTIABLE, vjp_reshape, jvp_reshape, vmap_reshape,
     .follows_shapes = true},
    {&wf__prim_transpose, WF_RULES_DIFFERENTIABLE, vjp_transpose, wf__rule_jvp_linear,
     vmap_transpose, .follows_shapes = true},
    {&wf__prim_broadcast_to, WF_RULES_DIFFERENTIABLE, vjp_broadcast_to, jvp_broadcast_to,
     vmap_broadcast_to, .follows_shapes = true},
    /* vjp_slice marks its traced-size paths itself */
    {&wf__prim_slice, WF_RULES_DIFFERENTIABLE, vjp_slice, jvp_slice, vmap_slice, true},
    /* the slice_update rules mark their traced-size paths themselves */
    {&wf__prim_slice_update, WF_RULES_DIFFERENTIABLE, vjp_slice_update, jvp_slice_update,
     vmap_slice_update, true},
    {&wf__prim_concatenate, WF_RULES_DIFFERENTIABLE, vjp_concatenate, wf__rule_jvp_linear,
     vmap_concatenate, .follows_shapes = true},
    {&wf__prim_pad, WF_RULES_DIFFERENTIABLE, vjp_pad, jvp_pad, vmap_pad, .follows_shapes = true},
    {&wf__prim_tri, WF_RULES_DIFFERENTIABLE, vjp_tri, wf__rule_jvp_linear, vmap_tri,
     .follows_shapes = true},
    /* Reinterpreted bits have no derivative (MLX defines none). */
    {&wf__prim_view, WF_RULES_ZERO_GRADIENT, wf__rule_vjp_zero, wf__rule_jvp_zero, vmap_view,
     .follows_shapes = true},
    {&wf__prim_broadcast_like, WF_RULES_DIFFERENTIABLE, vjp_broadcast_like, jvp_like,
     vmap_broadcast_like, .follows_shapes = true},
    {&wf__prim_unbroadcast_like, WF_RULES_DIFFERENTIABLE, vjp_unbroadcast_like, jvp_like,
     vmap_unbroadcast_like, .follows_shapes = true},
    {&wf__prim_reshape_like, WF_RULES_DIFFERENTIABLE, vjp_reshape_like, jvp_like,
     vmap_reshape_like, .follows_shapes = true},
    {&wf__prim_crop_like, WF_RULES_DIFFERENTIABLE, vjp_block, jvp_like, vmap_block,
     .follows_shapes = true},
    {&wf__prim_pad_like, WF_RULES_DIFFERENTIABLE, vjp_block, jvp_like, vmap_block,
     .follows_shapes = true},
    /* A count: no derivative with respect to what it counts. */
    {&wf__prim_size_ratio, WF_RULES_ZERO_GRADIENT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_size_ratio, .follows_shapes = true},
};

const size_t wf__rules_shape_count = sizeof wf__rules_shape / sizeof wf__rules_shape[0];
