/* Helpers shared by the transform rules (see transforms/rules.h). */
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
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

/* A reshape to a's traced shape, not a shape-following identity: a graph
 * that gradient rules built may depend on the traced sizes (which axes an
 * unbroadcast sums), so a shapeless compile refuses to replay it. */
wf_array *wf__rule_same(wf_array *a)
{
    return a ? wf__array_publish(wf__op_reshape(a, a->shape, a->ndim)) : NULL;
}

wf_array *wf__rule_rebuild(wf_array *node, wf_array *const *inputs)
{
    return wf__rule_node(node->prim, node->params, inputs, node->ninputs);
}

wf_array *wf__rule_unbroadcast(wf_array *x, const int64_t *shape, int ndim)
{
    if (!x)
        return NULL;
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

wf_array *wf__rule_expand_reduced(wf_array *y, const wf_array *in, uint64_t mask)
{
    if (!y)
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    wf__rule_keepdims_shape(in, mask, shape);
    wf_array *r = wf_reshape(y, shape, in->ndim);
    return r ? wf_broadcast_to(r, in->shape, in->ndim) : NULL;
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
    return e ? wf_broadcast_to(e, shape, x->ndim + 1) : NULL;
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
    for (int i = 0; i < node->ninputs; i++)
        in[i] = wf__vmap_materialize(inputs[i], axes[i], batch);
    *out = wf__rule_rebuild(node, in);
    *out_axis = 0;
    return wf__rule_result(*out);
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
            in[i] = wf__dtype_is_inexact(x->dtype) ? wf_zeros_like(x) : x;
    }
    *out = wf__rule_rebuild(node, in);
    if (in != stack_in)
        free(in);
    return wf__rule_result(*out);
}
