/*
 * Rules of conv_general (prim/conv.h). Both cotangents are convolutions:
 * - input: the cotangent, dilated by the stride, convolved with the kernel
 *   flipped (channels swapped within each group) at a stride of the input
 *   dilation: a transposed convolution (the CPU kernel skips the taps that
 *   meet the dilation's zeros, phase by phase);
 * - weight: the input correlated with the cotangent, with the roles of
 *   batch and channels exchanged (input channels are the batch, the batch
 *   is summed as channels) and stride and kernel dilation exchanged.
 * The tangent is bilinear. Batching folds a batched input into N; a
 * batched weight becomes more groups (the batch joins the channels).
 */
#include <string.h>

#include "core/error.h"
#include "prim/conv.h"
#include "prim/prims.h"
#include "transforms/rules.h"

static const wf_conv_params *conv_of(const wf_array *node) { return node->params; }

static wf_array *reshape_n(wf_array *a, const int64_t *shape, int ndim)
{
    return a ? wf_reshape(a, shape, ndim) : NULL;
}

static wf_array *transpose_n(wf_array *a, const int *perm, int n)
{
    return a ? wf_transpose(a, perm, n) : NULL;
}

/* w (Cout, K..., Cin_g) as (Cin, K..., Cout_g): within each group, input
 * and output channels exchanged. */
static wf_array *swap_channels_per_group(wf_array *w, int64_t groups)
{
    const int s = w->ndim - 2;
    const int64_t cout = w->shape[0], cin_g = w->shape[s + 1], cout_g = cout / groups;
    int64_t shape[WF_MAX_NDIM];
    int perm[WF_MAX_NDIM];
    /* (G, Cout_g, K..., Cin_g) -> (G, Cin_g, K..., Cout_g) */
    shape[0] = groups;
    shape[1] = cout_g;
    for (int d = 0; d < s; d++)
        shape[2 + d] = w->shape[1 + d];
    shape[s + 2] = cin_g;
    perm[0] = 0;
    perm[1] = s + 2;
    for (int d = 0; d < s; d++)
        perm[2 + d] = 2 + d;
    perm[s + 2] = 1;
    wf_array *t = transpose_n(reshape_n(w, shape, s + 3), perm, s + 3);
    shape[0] = groups * cin_g;
    for (int d = 0; d < s; d++)
        shape[1 + d] = w->shape[1 + d];
    shape[s + 1] = cout_g;
    return reshape_n(t, shape, s + 2);
}

/* d/dx: a transposed convolution of ct (see the file comment). */
static wf_array *input_ct(wf_array *node, wf_array *ct)
{
    const wf_conv_params *p = conv_of(node);
    wf_array *x = node->inputs[0], *w = node->inputs[1];
    wf_conv_params q;
    memset(&q, 0, sizeof q);
    q.spatial = p->spatial;
    q.groups = p->groups;
    q.flip = !p->flip;
    for (int d = 0; d < p->spatial; d++) {
        const int64_t l = x->shape[d + 1], o = node->shape[d + 1], k = w->shape[d + 1];
        const int64_t span = (k - 1) * p->kernel_dilation[d]; /* dilated kernel - 1 */
        q.strides[d] = p->input_dilation[d];
        q.input_dilation[d] = p->strides[d];
        q.kernel_dilation[d] = p->kernel_dilation[d];
        q.padding_lo[d] = span - p->padding_lo[d];
        q.padding_hi[d] =
            (l - 1) * p->input_dilation[d] - (o - 1) * p->strides[d] + p->padding_lo[d];
    }
    wf_array *inputs[2] = {ct, swap_channels_per_group(w, p->groups)};
    return wf__rule_node(&wf__prim_conv_general, &q, inputs, 2);
}

/* a (N, S..., G * C) as (C, S..., G * N): channels within a group become
 * the batch, the batch becomes the channels of each group. */
static wf_array *batch_as_channels(wf_array *a, int64_t groups)
{
    const int s = a->ndim - 2;
    const int64_t n = a->shape[0], c = a->shape[s + 1] / groups;
    int64_t shape[WF_MAX_NDIM];
    int perm[WF_MAX_NDIM];
    /* (N, S..., G, C) -> (C, S..., G, N) */
    for (int d = 0; d < s + 1; d++)
        shape[d] = a->shape[d];
    shape[s + 1] = groups;
    shape[s + 2] = c;
    perm[0] = s + 2;
    for (int d = 0; d < s; d++)
        perm[1 + d] = 1 + d;
    perm[s + 1] = s + 1;
    perm[s + 2] = 0;
    wf_array *t = transpose_n(reshape_n(a, shape, s + 3), perm, s + 3);
    shape[0] = c;
    for (int d = 0; d < s; d++)
        shape[1 + d] = a->shape[1 + d];
    shape[s + 1] = groups * n;
    return reshape_n(t, shape, s + 2);
}

/* ct (N, O..., G * Cout_g) as a kernel (Cout, O..., N) for the weight's
 * cotangent: output channels first, the batch as input channels. */
static wf_array *cotangent_as_kernel(wf_array *ct)
{
    const int s = ct->ndim - 2;
    int perm[WF_MAX_NDIM];
    perm[0] = s + 1;
    for (int d = 0; d < s; d++)
        perm[1 + d] = 1 + d;
    perm[s + 1] = 0;
    return wf_transpose(ct, perm, s + 2);
}

/* The weight cotangent's conv parameters: stride and kernel dilation
 * exchanged, padded to exactly K outputs (the dilated input plus padding
 * spans (K - 1) * kdil + the dilated cotangent). */
static wf_conv_params weight_ct_params(wf_array *node, int64_t groups)
{
    const wf_conv_params *p = conv_of(node);
    wf_array *x = node->inputs[0], *w = node->inputs[1];
    wf_conv_params q;
    memset(&q, 0, sizeof q);
    q.spatial = p->spatial;
    q.groups = groups;
    for (int d = 0; d < p->spatial; d++) {
        const int64_t l = x->shape[d + 1], o = node->shape[d + 1], k = w->shape[d + 1];
        q.strides[d] = p->kernel_dilation[d];
        q.kernel_dilation[d] = p->strides[d];
        q.input_dilation[d] = p->input_dilation[d];
        q.padding_lo[d] = p->padding_lo[d];
        q.padding_hi[d] = (k - 1) * p->kernel_dilation[d] + (o - 1) * p->strides[d] -
                          (l - 1) * p->input_dilation[d] - p->padding_lo[d];
    }
    return q;
}

/* g (Cout, K..., Cin_g) reversed along the kernel axes when the node flips. */
static wf_array *unflip(const wf_array *node, wf_array *g)
{
    if (!g || !conv_of(node)->flip)
        return g;
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < g->ndim; d++) {
        const bool kernel_axis = d >= 1 && d < g->ndim - 1;
        starts[d] = kernel_axis ? g->shape[d] - 1 : 0;
        stops[d] = kernel_axis ? -g->shape[d] - 1 : g->shape[d];
        steps[d] = kernel_axis ? -1 : 1;
    }
    return wf_slice(g, starts, stops, steps);
}

/* d/dw: the input correlated with ct (see the file comment), then back to
 * (Cout, K..., Cin_g). */
static wf_array *weight_ct(wf_array *node, wf_array *ct)
{
    const wf_conv_params *p = conv_of(node);
    const int s = p->spatial;
    const wf_conv_params q = weight_ct_params(node, p->groups);
    wf_array *inputs[2] = {batch_as_channels(node->inputs[0], p->groups), cotangent_as_kernel(ct)};
    wf_array *g = wf__rule_node(&wf__prim_conv_general, &q, inputs, 2);
    /* (Cin_g, K..., Cout) -> (Cout, K..., Cin_g) */
    int perm[WF_MAX_NDIM];
    perm[0] = s + 1;
    for (int d = 0; d < s; d++)
        perm[1 + d] = 1 + d;
    perm[s + 1] = 0;
    return unflip(node, transpose_n(g, perm, s + 2));
}

/* d/dw of a depthwise convolution (one input channel per group): each
 * (example, channel) pair is a group of its own, so the cotangent is one
 * depthwise convolution (the batch summed afterwards) instead of a
 * product over tiny channel counts:
 *   x (N, L..., C) -> (1, L..., N * C), ct (N, O..., Cout) -> (N * Cout, O..., 1),
 *   result (1, K..., N * Cout) -> (K..., N, Cout) summed over N -> (Cout, K..., 1). */
static wf_array *depthwise_weight_ct(wf_array *node, wf_array *ct)
{
    const int s = conv_of(node)->spatial;
    wf_array *x = node->inputs[0], *w = node->inputs[1];
    const int64_t n = x->shape[0], c = x->shape[s + 1], cout = ct->shape[s + 1];
    int64_t shape[WF_MAX_NDIM];
    shape[0] = 1;
    for (int d = 0; d < s; d++)
        shape[1 + d] = x->shape[1 + d];
    shape[s + 1] = n * c;
    wf_array *xr = reshape_n(wf_moveaxis(x, 0, s), shape, s + 2);
    shape[0] = n * cout;
    for (int d = 0; d < s; d++)
        shape[1 + d] = ct->shape[1 + d];
    shape[s + 1] = 1;
    wf_array *kr = reshape_n(wf_moveaxis(ct, s + 1, 1), shape, s + 2);
    const wf_conv_params q = weight_ct_params(node, n * c);
    wf_array *g = wf__rule_node(&wf__prim_conv_general, &q, (wf_array *[]){xr, kr}, 2);
    for (int d = 0; d < s; d++)
        shape[d] = w->shape[1 + d];
    shape[s] = n;
    shape[s + 1] = cout;
    wf_array *summed = reshape_n(g, shape, s + 2);
    summed = summed ? wf_sum(summed, (int[]){s}, 1, false) : NULL; /* (K..., Cout) */
    summed = summed ? wf_moveaxis(summed, s, 0) : NULL;
    return unflip(node, reshape_n(summed, w->shape, w->ndim));
}

static wf_status vjp_conv(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    const bool empty = ct->size == 0 || node->inputs[0]->size == 0;
    for (int i = 0; i < 2; i++) {
        if (!wanted[i])
            continue;
        cts[i] = empty ? wf_zeros_like(node->inputs[i])
                       : i == 0 ? input_ct(node, ct)
                       : node->inputs[1]->shape[node->ndim - 1] == 1 && conv_of(node)->groups > 1
                           ? depthwise_weight_ct(node, ct)
                           : weight_ct(node, ct);
        if (!cts[i])
            return wf_last_error();
    }
    return WF_OK;
}

/* conv(tx, w) + conv(x, tw), either term absent when its tangent is zero. */
static wf_status jvp_conv(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_array *x = node->inputs[0], *w = node->inputs[1];
    wf_array *left = t[0] ? wf__rule_rebuild(node, (wf_array *[]){t[0], w}) : NULL;
    wf_array *right = t[1] ? wf__rule_rebuild(node, (wf_array *[]){x, t[1]}) : NULL;
    *out = t[0] && t[1] ? wf_add(left, right) : t[0] ? left : right;
    return wf__rule_result(*out);
}

/* The weight unbatched: the batch folded into N. */
static wf_status vmap_input_only(wf_array *node, wf_array *x, int axis, int64_t batch,
                                 wf_array **out, int *out_axis)
{
    const int nd = node->ndim;
    wf_array *xf = wf__vmap_to_front(x, axis);
    int64_t shape[WF_MAX_NDIM + 1];
    shape[0] = batch * node->inputs[0]->shape[0];
    for (int d = 1; d < nd; d++)
        shape[d] = node->inputs[0]->shape[d];
    wf_array *y = wf__rule_rebuild(node, (wf_array *[]){reshape_n(xf, shape, nd),
                                                        node->inputs[1]});
    shape[0] = batch;
    for (int d = 0; d < nd; d++)
        shape[1 + d] = node->shape[d];
    *out = reshape_n(y, shape, nd + 1);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* A batched weight: batch x groups groups, the batch joining the channels
 * of the input (broadcast if unbatched) and of the output. */
static wf_status vmap_weight(wf_array *node, wf_array *const *in, const int *axes,
                             int64_t batch, wf_array **out, int *out_axis)
{
    const wf_conv_params *p = conv_of(node);
    const int nd = node->ndim, s = p->spatial;
    const wf_array *x0 = node->inputs[0], *w0 = node->inputs[1];
    /* x: (B, N, S..., Cin) -> (N, S..., B, Cin) -> (N, S..., B * Cin) */
    wf_array *x = wf__vmap_materialize(in[0], axes[0], batch);
    wf_array *xm = x ? wf_moveaxis(x, 0, nd - 1) : NULL;
    int64_t shape[WF_MAX_NDIM + 1];
    for (int d = 0; d < nd - 1; d++)
        shape[d] = x0->shape[d];
    shape[nd - 1] = batch * x0->shape[nd - 1];
    wf_array *xr = reshape_n(xm, shape, nd);
    /* w: (B, Cout, K..., Cin_g) -> (B * Cout, K..., Cin_g) */
    wf_array *w = wf__vmap_to_front(in[1], axes[1]);
    shape[0] = batch * w0->shape[0];
    for (int d = 1; d < nd; d++)
        shape[d] = w0->shape[d];
    wf_array *wr = reshape_n(w, shape, nd);
    wf_conv_params q = *p;
    q.groups = p->groups * batch;
    wf_array *y = wf__rule_node(&wf__prim_conv_general, &q, (wf_array *[]){xr, wr}, 2);
    /* (N, O..., B * Cout) -> (N, O..., B, Cout): batched on axis s + 1 */
    for (int d = 0; d < nd - 1; d++)
        shape[d] = node->shape[d];
    shape[nd - 1] = batch;
    shape[nd] = node->shape[nd - 1];
    *out = reshape_n(y, shape, nd + 1);
    *out_axis = s + 1;
    return wf__rule_result(*out);
}

static wf_status vmap_conv(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    if (axes[1] == WF_VMAP_NOT_MAPPED)
        return vmap_input_only(node, in[0], axes[0], batch, out, out_axis);
    return vmap_weight(node, in, axes, batch, out, out_axis);
}

const wf_prim_rules wf__rules_conv[] = {
    {&wf__prim_conv_general, WF_RULES_DIFFERENTIABLE, vjp_conv, jvp_conv, vmap_conv, false},
};

const size_t wf__rules_conv_count = sizeof wf__rules_conv / sizeof wf__rules_conv[0];
