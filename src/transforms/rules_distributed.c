/*
 * Rules of the collectives (prim/distributed.h). The loss a distributed
 * program differentiates is the sum of every rank's loss, so a cotangent
 * that reaches an input on one rank sums the cotangents of every rank that
 * used it: the vjp of all_sum is all_sum, of all_gather a sum_scatter (and
 * of sum_scatter an all_gather), of all_max / all_min all_sum of the
 * cotangent where x was the extremum. Tangents follow the forward op. vmap
 * keeps the batch out of axis 0 for the ops that concatenate or split along
 * it, so a batch runs as one collective. send is its input's value (its
 * derivatives pass through); recv has no differentiable input.
 */
#include "core/error.h"
#include "prim/distributed.h"
#include "transforms/rules.h"

static wf_group *group_of(const wf_array *node)
{
    return ((const wf_collective_params *)node->params)->group;
}

static wf_array *same_collective(const wf_array *node, wf_array *x)
{
    wf_group *g = group_of(node);
    switch (wf__collective_kind(node->prim)) {
    case 0: return wf_all_sum(x, g);
    case 1: return wf_all_max(x, g);
    case 2: return wf_all_min(x, g);
    case 3: return wf_all_gather(x, g);
    case 4: return wf_sum_scatter(x, g);
    default: return NULL;
    }
}

static wf_status vjp_all_sum(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    cts[0] = wf_all_sum(ct, group_of(node));
    return wf__rule_result(cts[0]);
}

static wf_status jvp_same(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = same_collective(node, t[0]);
    return wf__rule_result(*out);
}

/* Where this rank's x is the extremum (ties: every rank holding it). */
static wf_array *extremum_mask(wf_array *node)
{
    return wf_equal(node->inputs[0], node);
}

static wf_status vjp_all_extremum(wf_array *node, wf_array *ct, const bool *wanted,
                                  wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    wf_array *summed = wf_all_sum(ct, group_of(node));
    cts[0] = wf_where(extremum_mask(node), summed, wf_zeros_like(summed));
    return wf__rule_result(cts[0]);
}

/* The tangent of the rank holding the extremum (the mean over ties). */
static wf_status jvp_all_extremum(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_group *g = group_of(node);
    wf_array *mask = extremum_mask(node);
    wf_array *picked = wf_all_sum(wf_where(mask, t[0], wf_zeros_like(t[0])), g);
    wf_array *holders = wf_all_sum(wf_astype(mask, t[0] ? t[0]->dtype : node->dtype), g);
    *out = wf_divide(picked, holders);
    return wf__rule_result(*out);
}

static wf_status vjp_all_gather(wf_array *node, wf_array *ct, const bool *wanted,
                                wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    wf_array *x = node->inputs[0];
    wf_array *part = wf_sum_scatter(ct, group_of(node));
    cts[0] = x->ndim == 0 ? wf_reshape(part, NULL, 0) : part;
    return wf__rule_result(cts[0]);
}

static wf_status vjp_sum_scatter(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    cts[0] = wf_all_gather(ct, group_of(node));
    return wf__rule_result(cts[0]);
}

static wf_status vmap_elementwise(wf_array *node, wf_array *const *in, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    *out = same_collective(node, in[0]);
    *out_axis = axes[0];
    return wf__rule_result(*out);
}

/* The batch on axis 1: axis 0 is the one gathered or scattered. */
static wf_status vmap_along_axis0(wf_array *node, wf_array *const *in, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis)
{
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    if (x && node->inputs[0]->ndim == 0) { /* a 0-d x gathers as shape (1,) */
        const int64_t shape[2] = {batch, 1};
        x = wf_reshape(x, shape, 2);
    }
    *out = x ? same_collective(node, wf_swapaxes(x, 0, 1)) : NULL;
    *out_axis = 1;
    return wf__rule_result(*out);
}

static wf_status vjp_send(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    if (wanted[0])
        cts[0] = wf__rule_same(ct);
    return wanted[0] ? wf__rule_result(cts[0]) : WF_OK;
}

static wf_status jvp_send(wf_array *node, wf_array *const *t, wf_array **out)
{
    (void)node;
    *out = wf__rule_same(t[0]);
    return wf__rule_result(*out);
}

/* A batched send sends the whole batch (the receiver asks for its shape). */
static wf_status vmap_send(wf_array *node, wf_array *const *in, const int *axes,
                           int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_collective_params *p = node->params;
    *out = wf_send(in[0], p->peer, p->group);
    *out_axis = axes[0];
    return wf__rule_result(*out);
}

/* recv_like's input only orders the recv: the received value is not batched. */
static wf_status vmap_recv(wf_array *node, wf_array *const *in, const int *axes,
                           int64_t batch, wf_array **out, int *out_axis)
{
    (void)in, (void)axes, (void)batch;
    *out = wf__rule_same(node);
    *out_axis = WF_VMAP_NOT_MAPPED;
    return wf__rule_result(*out);
}

const wf_prim_rules wf__rules_distributed[] = {
    {&wf__prim_all_sum, WF_RULES_DIFFERENTIABLE, vjp_all_sum, jvp_same, vmap_elementwise, false},
    {&wf__prim_all_max, WF_RULES_DIFFERENTIABLE, vjp_all_extremum, jvp_all_extremum,
     vmap_elementwise, false},
    {&wf__prim_all_min, WF_RULES_DIFFERENTIABLE, vjp_all_extremum, jvp_all_extremum,
     vmap_elementwise, false},
    {&wf__prim_all_gather, WF_RULES_DIFFERENTIABLE, vjp_all_gather, jvp_same, vmap_along_axis0,
     false},
    {&wf__prim_sum_scatter, WF_RULES_DIFFERENTIABLE, vjp_sum_scatter, jvp_same,
     vmap_along_axis0, false},
    {&wf__prim_send, WF_RULES_DIFFERENTIABLE, vjp_send, jvp_send, vmap_send, false},
    {&wf__prim_recv, WF_RULES_ZERO_GRADIENT, wf__rule_vjp_zero, wf__rule_jvp_zero, vmap_recv,
     false},
};
const size_t wf__rules_distributed_count =
    sizeof wf__rules_distributed / sizeof wf__rules_distributed[0];
