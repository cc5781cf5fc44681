/*
 * Rules of conv_general (prim/conv.h). Both cotangents are convolutions:
 * - input: the cotangent, dilated by the stride, convolved with the kernel
 *   flipped (channels swapped within each group) at a stride of the input
 *   dilation: a transposed convolution;
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

/* ---- d/dx of a strided convolution, phase by phase. With stride s (and no
 * input dilation) the transposed convolution above would run on the
 * cotangent dilated by s, where all but 1 / s of the taps per axis meet
 * zeros. Instead, input positions j = phi + s m of one phase phi (per axis)
 * receive exactly the taps k with (phi + lo - k kdil) divisible by s: an
 * arithmetic progression k0 + q s' (s' = s / gcd(kdil, s)), reached from
 * output o = m + c0 - q e (c0 = (phi + lo - k0 kdil) / s, e = kdil s' / s).
 * So each phase is a plain convolution of ct with that sub-kernel
 * (reversed), and the phases are interleaved: zero-padded to ceil(L / s),
 * stacked after each spatial axis, reshaped and cut to L. */

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* One phase's convolution (N, ceil(L / s)..., Cin), zero past its own
 * length; wswap: the kernel with channels swapped per group, unflipped. */
static wf_array *phase_ct(wf_array *node, wf_array *ct, wf_array *wswap, const int64_t *phi)
{
    const wf_conv_params *p = conv_of(node);
    wf_array *x = node->inputs[0];
    const int s = p->spatial;
    wf_conv_params q;
    memset(&q, 0, sizeof q);
    q.spatial = s;
    q.groups = p->groups;
    q.flip = true;
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    int64_t pad_hi[WF_MAX_NDIM] = {0}, pad_lo[WF_MAX_NDIM] = {0};
    starts[0] = starts[s + 1] = 0;
    stops[0] = wswap->shape[0];
    stops[s + 1] = wswap->shape[s + 1];
    steps[0] = steps[s + 1] = 1;
    bool empty = false;
    for (int d = 0; d < s; d++) {
        const int64_t st = p->strides[d], kd = p->kernel_dilation[d], lo = p->padding_lo[d];
        const int64_t k = wswap->shape[d + 1], l = x->shape[d + 1], o = node->shape[d + 1];
        const int64_t step = st / gcd64(kd, st), e = kd * step / st;
        int64_t k0 = 0;
        while (k0 < k && ((phi[d] + lo - k0 * kd) % st + st) % st != 0)
            k0++;
        const int64_t taps = k0 < k ? (k - 1 - k0) / step + 1 : 0;
        const int64_t len = phi[d] < l ? (l - phi[d] + st - 1) / st : 0; /* this phase's length */
        const int64_t full = (l + st - 1) / st;
        empty = empty || taps == 0 || len == 0;
        if (taps == 0 || len == 0)
            continue;
        const int64_t c0 = (phi[d] + lo - k0 * kd) / st; /* exact: divisible */
        starts[d + 1] = k0;
        stops[d + 1] = k0 + (taps - 1) * step + 1;
        steps[d + 1] = step;
        q.strides[d] = 1;
        q.input_dilation[d] = 1;
        q.kernel_dilation[d] = e;
        q.padding_lo[d] = (taps - 1) * e - c0;
        q.padding_hi[d] = len - o - q.padding_lo[d] + (taps - 1) * e;
        pad_hi[d + 1] = full - len;
    }
    if (empty) { /* no tap reaches this phase */
        int64_t shape[WF_MAX_NDIM];
        shape[0] = x->shape[0];
        shape[s + 1] = x->shape[s + 1];
        for (int d = 0; d < s; d++)
            shape[d + 1] = (x->shape[d + 1] + p->strides[d] - 1) / p->strides[d];
        return wf_zeros(shape, s + 2, node->dtype);
    }
    wf_array *sub = wf_slice(wswap, starts, stops, steps);
    wf_array *y = wf__rule_node(&wf__prim_conv_general, &q, (wf_array *[]){ct, sub}, 2);
    bool padded = false;
    for (int d = 0; d < s; d++)
        padded = padded || pad_hi[d + 1] > 0;
    (void)pad_lo;
    return y && padded ? wf_pad(y, (int64_t[]){0, 0, 0, 0, 0}, pad_hi, 0.0) : y;
}

/* Interleaves the phases of axes d... (phi fixed before d): the result has
 * axis d + 1 of length ceil(L / s) * s. */
static wf_array *interleave(wf_array *node, wf_array *ct, wf_array *wswap, int64_t *phi, int d)
{
    const wf_conv_params *p = conv_of(node);
    if (d == p->spatial)
        return phase_ct(node, ct, wswap, phi);
    wf_array *parts[64];
    const int64_t st = p->strides[d];
    for (int64_t f = 0; f < st; f++) {
        phi[d] = f;
        if (!(parts[f] = interleave(node, ct, wswap, phi, d + 1)))
            return NULL;
    }
    /* (N, ..., M_d, ..., C) stacked after axis d + 1 -> merged */
    wf_array *stacked = wf_stack(parts, (int)st, d + 2);
    if (!stacked)
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    int nd = 0;
    for (int a = 0; a < stacked->ndim; a++) {
        if (a == d + 2)
            shape[nd - 1] *= stacked->shape[a];
        else
            shape[nd++] = stacked->shape[a];
    }
    return wf_reshape(stacked, shape, nd);
}

/* Whether d/dx goes phase by phase: a stride above 1, no input dilation,
 * and a few phases in all. */
static bool use_phases(const wf_conv_params *p)
{
    int64_t phases = 1;
    bool strided = false;
    for (int d = 0; d < p->spatial; d++) {
        if (p->input_dilation[d] != 1 || p->strides[d] > 8)
            return false;
        strided = strided || p->strides[d] > 1;
        phases *= p->strides[d];
    }
    return strided && phases <= 64;
}

static wf_array *input_ct_phases(wf_array *node, wf_array *ct)
{
    const wf_conv_params *p = conv_of(node);
    wf_array *x = node->inputs[0];
    const int s = p->spatial;
    wf_array *wswap = swap_channels_per_group(node->inputs[1], p->groups);
    if (wswap && p->flip) { /* the forward's kernel as it is applied */
        int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
        for (int d = 0; d < s + 2; d++) {
            const bool k = d >= 1 && d <= s;
            starts[d] = k ? wswap->shape[d] - 1 : 0;
            stops[d] = k ? -wswap->shape[d] - 1 : wswap->shape[d];
            steps[d] = k ? -1 : 1;
        }
        wswap = wf_slice(wswap, starts, stops, steps);
    }
    if (!wswap)
        return NULL;
    int64_t phi[WF_CONV_MAX_SPATIAL] = {0, 0, 0};
    wf_array *full = interleave(node, ct, wswap, phi, 0);
    if (!full)
        return NULL;
    int64_t starts[WF_MAX_NDIM] = {0}, stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < s + 2; d++) {
        stops[d] = x->shape[d];
        steps[d] = 1;
    }
    return wf_slice(full, starts, stops, steps);
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
                       : i == 0 ? (use_phases(conv_of(node)) ? input_ct_phases(node, ct)
                                                              : input_ct(node, ct))
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
