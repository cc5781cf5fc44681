/* Helpers shared by the transform rules (see transforms/rules.h). */
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/graph_mode.h"
#include "ops/ops.h"
#include "prim/shape.h"
#include "transforms/rules.h"
#include "util/fault.h"

wf_array *wf__rule_scalar(const wf_array *like, double v) { return wf_scalar(v, like->dtype); }

wf_array *wf__rule_node(const wf_prim_def *prim, const void *params, wf_array *const *inputs,
                        int ninputs)
{
    for (int i = 0; i < ninputs; i++)
        if (!inputs[i])
            return NULL; /* an earlier op failed: keep its error */
    return wf__array_publish(wf__node_new(prim, params, inputs, ninputs));
}

bool wf__rule_shapeless(const wf_array *a, const wf_array *b)
{
    return (a && wf__array_is_shapeless(a)) || (b && wf__array_is_shapeless(b));
}

bool wf__rule_begin(const wf_prim_rules *rules, const wf_array *node)
{
    const bool marked = wf__array_is_shapeless(node) && !rules->follows_shapes;
    if (marked)
        wf__graph_traced_shape_enter();
    return marked;
}

void wf__rule_end(bool marked)
{
    if (marked)
        wf__graph_traced_shape_leave();
}

wf_array *wf__rule_same(wf_array *a)
{
    if (!a)
        return NULL;
    if (wf__array_is_shapeless(a))
        return wf__array_publish(wf__same_value(a));
    return wf__array_publish(wf__op_reshape(a, a->shape, a->ndim));
}

/* A node of a shape-following primitive on (x, like). */
static wf_array *like_node(const wf_prim_def *prim, wf_array *x, wf_array *like)
{
    wf_array *inputs[2] = {x, like};
    return wf__rule_node(prim, NULL, inputs, 2);
}

wf_array *wf__rule_reshape_like(wf_array *x, wf_array *like)
{
    if (!x || !like)
        return NULL;
    if (wf__rule_shapeless(x, like))
        return like_node(&wf__prim_reshape_like, x, like);
    return wf_reshape(x, like->shape, like->ndim);
}

wf_array *wf__rule_rebuild(wf_array *node, wf_array *const *inputs)
{
    return wf__rule_node(node->prim, node->params, inputs, node->ninputs);
}

wf_array *wf__rule_unbroadcast(wf_array *x, wf_array *like)
{
    if (!x || !like)
        return NULL;
    if (wf__rule_shapeless(x, like))
        return like_node(&wf__prim_unbroadcast_like, x, like);
    const int64_t *shape = like->shape;
    const int ndim = like->ndim;
    const int lead = x->ndim - ndim;
    int axes[WF_MAX_NDIM];
    int naxes = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d < lead || (shape[d - lead] == 1 && x->shape[d] != 1))
            axes[naxes++] = d;
    if (naxes == 0 && lead == 0)
        return x;
    wf_array *s = wf_sum(x, axes, naxes, true);
    return s ? wf_reshape(s, shape, ndim) : NULL;
}

void wf__rule_keepdims_shape(const wf_array *in, uint64_t mask, int64_t *shape)
{
    for (int d = 0; d < in->ndim; d++)
        shape[d] = ((mask >> d) & 1u) ? 1 : in->shape[d];
}

/* y in keepdims form by expand_dims (a reshape that follows y's shape). */
static wf_array *keepdims_following(wf_array *y, const wf_array *in, uint64_t mask)
{
    if (y->ndim == in->ndim)
        return y;
    int axes[WF_MAX_NDIM];
    int naxes = 0;
    for (int d = 0; d < in->ndim; d++)
        if ((mask >> d) & 1u)
            axes[naxes++] = d;
    return wf_expand_dims(y, axes, naxes);
}

wf_array *wf__rule_expand_reduced(wf_array *y, wf_array *in, uint64_t mask)
{
    if (!y)
        return NULL;
    if (wf__rule_shapeless(y, in)) {
        wf_array *k = keepdims_following(y, in, mask);
        return k ? like_node(&wf__prim_broadcast_like, k, in) : NULL;
    }
    int64_t shape[WF_MAX_NDIM];
    wf__rule_keepdims_shape(in, mask, shape);
    wf_array *r = wf_reshape(y, shape, in->ndim);
    return r ? wf_broadcast_to(r, in->shape, in->ndim) : NULL;
}

wf_array *wf__rule_reduced_count_of(wf_array *in, wf_array *y)
{
    return in && y ? like_node(&wf__prim_size_ratio, in, y) : NULL;
}

int64_t wf__rule_reduced_count(const wf_array *in, uint64_t mask)
{
    int64_t n = 1;
    for (int d = 0; d < in->ndim; d++)
        if ((mask >> d) & 1u)
            n *= in->shape[d];
    return n;
}

/* ---------------------------------------------------------------- vmap */

wf_array *wf__vmap_to_front(wf_array *x, int axis)
{
    if (!x || axis == WF_VMAP_NOT_MAPPED || axis == 0)
        return x;
    return wf_moveaxis(x, axis, 0);
}

wf_array *wf__vmap_materialize(wf_array *x, int axis, int64_t batch)
{
    if (!x)
        return NULL;
    if (axis != WF_VMAP_NOT_MAPPED)
        return wf__vmap_to_front(x, axis);
    int64_t shape[WF_MAX_NDIM];
    if (x->ndim + 1 > WF_MAX_NDIM) {
        wf__error(WF_ERR_SHAPE, "vmap: batching a rank-%d array exceeds rank %d", x->ndim,
                  WF_MAX_NDIM);
        return NULL;
    }
    shape[0] = batch;
    for (int d = 0; d < x->ndim; d++)
        shape[d + 1] = x->shape[d];
    const int zero = 0;
    wf_array *e = wf_expand_dims(x, &zero, 1);
    wf_array *b = e ? wf__op_broadcast_to(e, shape, x->ndim + 1) : NULL;
    if (b && wf__vmap_batching_shapeless()) /* names the traced batch size */
        b->node_flags |= WF_NODE_FLAG_SHAPELESS | WF_NODE_FLAG_TRACED_SHAPE; /* not yet seen */
    return wf__array_publish(b);
}

wf_array *wf__vmap_front_or_one(wf_array *x, int axis)
{
    if (!x)
        return NULL;
    if (axis != WF_VMAP_NOT_MAPPED)
        return wf__vmap_to_front(x, axis);
    const int zero = 0;
    return wf_expand_dims(x, &zero, 1);
}

wf_array *wf__vmap_pad_rank(wf_array *x, int rank)
{
    if (!x || x->ndim >= rank)
        return x;
    /* expand_dims, not a reshape to this call's shape: a shapeless compiled
     * replay follows each call's shapes through it. */
    int axes[WF_MAX_NDIM];
    const int extra = rank - x->ndim;
    for (int d = 0; d < extra; d++)
        axes[d] = 1 + d;
    return wf_expand_dims(x, axes, extra);
}

/* ---------------------------------------------------------------- generic rules */

wf_status wf__rule_vjp_zero(wf_array *node, wf_array *ct, const bool *wanted,
                            wf_array **input_cts)
{
    (void)node;
    (void)ct;
    (void)wanted;
    (void)input_cts;
    return WF_OK;
}

wf_status wf__rule_jvp_zero(wf_array *node, wf_array *const *tangents, wf_array **out)
{
    (void)node;
    (void)tangents;
    *out = NULL;
    return WF_OK;
}

/* In a shapeless trace: each operand with the batch (or a size-1 stand-in)
 * in front (an unbatched one's implicit broadcast replaced by its source),
 * brought to the batched shape by implicit broadcasts, which a shapeless
 * replay re-derives from the call's shapes (tape.c) rather than the traced
 * batch size that wf__vmap_materialize would name. */
static wf_array *vmap_elementwise_following(wf_array *node, wf_array *const *inputs,
                                            const int *axes, int64_t batch)
{
    wf_array *in[8], *owned[8] = {NULL};
    int64_t shape[WF_MAX_NDIM];
    shape[0] = batch;
    wf__shape_copy(shape + 1, node->shape, node->ndim);
    int i = 0;
    for (; i < node->ninputs; i++) {
        wf_array *x = inputs[i];
        if (axes[i] == WF_VMAP_NOT_MAPPED && (x->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST))
            x = x->inputs[0]; /* a broadcast to the traced example's shape */
        in[i] = wf__vmap_pad_rank(wf__vmap_front_or_one(x, axes[i]), node->ndim + 1);
        if (!in[i])
            break;
        if (wf__shape_equal(in[i]->shape, in[i]->ndim, shape, node->ndim + 1))
            continue;
        if (!(owned[i] = wf__op_implicit_broadcast(in[i], shape, node->ndim + 1)))
            break;
        in[i] = owned[i];
    }
    wf_array *out = i == node->ninputs ? wf__rule_rebuild(node, in) : NULL;
    for (int k = 0; k < node->ninputs; k++)
        wf__array_release(owned[k]);
    return out;
}

wf_status wf__rule_vmap_elementwise(wf_array *node, wf_array *const *inputs, const int *axes,
                                    int64_t batch, wf_array **out, int *out_axis)
{
    if (node->ninputs == 1) { /* any batch axis works for one input */
        *out = wf__rule_rebuild(node, inputs);
        *out_axis = axes[0];
        return wf__rule_result(*out);
    }
    wf_array *in[8];
    if (node->ninputs > 8)
        return wf__error(WF_ERR_INTERNAL, "vmap: %s has %d inputs", node->prim->name,
                         node->ninputs);
    *out_axis = 0;
    if (wf__array_is_shapeless(node)) {
        *out = vmap_elementwise_following(node, inputs, axes, batch);
        return wf__rule_result(*out);
    }
    for (int i = 0; i < node->ninputs; i++)
        in[i] = wf__vmap_materialize(inputs[i], axes[i], batch);
    *out = wf__rule_rebuild(node, in);
    return wf__rule_result(*out);
}

/* The zero tangent of `node`'s input x. For an implicit broadcast in a
 * shapeless trace, an implicit broadcast of its source's zeros: the
 * element-wise rebuild then reads that source, which replay broadcasts to
 * each call's shapes (tape.c), where zeros_like(x) would keep x's traced
 * shape. */
static wf_array *zero_tangent(const wf_array *node, wf_array *x)
{
    if (!wf__array_is_shapeless(node) || !(x->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST))
        return wf_zeros_like(x);
    wf_array *zeros = wf_zeros_like(x->inputs[0]);
    return wf__array_publish(zeros ? wf__op_implicit_broadcast(zeros, x->shape, x->ndim) : NULL);
}

wf_status wf__rule_jvp_linear(wf_array *node, wf_array *const *tangents, wf_array **out)
{
    wf_array *stack_in[8] = {NULL};
    wf_array **in = stack_in;
    if (node->ninputs > 8) {
        in = wf__malloc((size_t)node->ninputs * sizeof *in);
        if (!in)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "jvp: out of memory");
    }
    for (int i = 0; i < node->ninputs; i++) {
        wf_array *x = node->inputs[i];
        if (tangents[i])
            in[i] = tangents[i];
        else
            in[i] = wf__dtype_is_inexact(x->dtype) ? zero_tangent(node, x) : x;
    }
    *out = wf__rule_rebuild(node, in);
    if (in != stack_in)
        free(in);
    return wf__rule_result(*out);
}
