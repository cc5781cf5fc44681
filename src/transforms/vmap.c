/*
 * Batching: wf_vmap.
 *
 * The function is traced once on the first example of each mapped input
 * (a real slice, so data-dependent code sees real values) while this thread
 * is inside a vmap trace. The traced graph is then replayed in topological
 * order on the whole batch: each node's vmap rule runs its primitive on the
 * batched inputs at once and says where the batch axis of its output is. The
 * number of nodes built, and so of kernels run, does not depend on the batch
 * size.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "prim/prims.h"
#include "transforms/graph.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"
#include "util/fault.h"

enum { MAX_RULE_INPUTS = 64 };

static _Thread_local bool batching_shapeless;

bool wf__vmap_batching_shapeless(void) { return batching_shapeless; }

/* A node none of whose inputs is batched: its value is the same for every
 * example, unbatched (the node itself, or rebuilt on inputs a rule
 * replaced by unbatched values). */
static wf_status same_for_every_example(wf_graph_entry *e, wf_array *const *inputs,
                                        bool rebuild)
{
    e->axis = WF_VMAP_NOT_MAPPED;
    e->value = NULL;
    if (!rebuild)
        return WF_OK;
    wf_array *node = e->node;
    wf_array *copy = wf__node_new(node->prim, node->params, inputs, node->ninputs);
    if (copy) /* an operator's implicit broadcast stays one (not yet published) */
        copy->node_flags |= node->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST;
    e->value = wf__array_publish(copy);
    return wf__rule_result(e->value);
}

/* Replays one node on the batch. The entry's value is its batched value
 * (batch axis e->axis) or, with e->axis WF_VMAP_NOT_MAPPED, an unbatched
 * value standing for the node (NULL: the node itself). */
static wf_status batch_node(const char *op, wf_graph *g, wf_graph_entry *e, int64_t batch)
{
    wf_array *node = e->node;
    if (node->ninputs > MAX_RULE_INPUTS)
        return wf__error(WF_ERR_UNSUPPORTED, "%s: '%s' has %d inputs (at most %d)", op,
                         node->prim->name, node->ninputs, MAX_RULE_INPUTS);
    wf_array *inputs[MAX_RULE_INPUTS];
    int axes[MAX_RULE_INPUTS];
    bool any_batched = false, any_replaced = false;
    for (int i = 0; i < node->ninputs; i++) {
        const wf_graph_entry *in = wf__graph_find(g, node->inputs[i]);
        const bool replaced = in && in->value;
        inputs[i] = replaced ? in->value : node->inputs[i];
        axes[i] = replaced ? in->axis : WF_VMAP_NOT_MAPPED;
        any_batched |= axes[i] != WF_VMAP_NOT_MAPPED;
        any_replaced |= replaced;
    }
    if (!any_batched) /* after a rule that found its result the same for every example */
        return same_for_every_example(e, inputs, any_replaced);
    const wf_prim_rules *rules = wf__rules_find(node->prim);
    if (!rules || !rules->vmap)
        return wf__error(WF_ERR_UNSUPPORTED, "%s: primitive '%s' has no vmap rule", op,
                         node->prim->name);
    wf_array *out = NULL;
    int axis = WF_VMAP_NOT_MAPPED;
    const bool outer = batching_shapeless; /* a rule may run a vmap of its own */
    batching_shapeless = wf__array_is_shapeless(node);
    wf_status st = rules->vmap(node, inputs, axes, batch, &out, &axis);
    batching_shapeless = outer;
    if (st == WF_OK && out && axis != WF_VMAP_NOT_MAPPED &&
        (out->ndim != node->ndim + 1 || out->shape[axis] != batch))
        st = wf__error(WF_ERR_INTERNAL, "%s: the vmap rule of '%s' gave a wrong batch", op,
                       node->prim->name);
    e->value = st == WF_OK ? out : NULL;
    e->axis = axis;
    return st;
}

/* The batch size and each mapped input's first example (a tracer). */
static wf_status make_tracers(const char *op, wf_array *const *inputs, const int *in_axes,
                              size_t n, int *axes, int64_t *batch, wf_array **tracers,
                              wf_array **call_inputs)
{
    *batch = -1;
    for (size_t i = 0; i < n; i++) {
        tracers[i] = NULL;
        call_inputs[i] = inputs[i];
        axes[i] = in_axes ? in_axes[i] : 0;
        if (axes[i] == WF_VMAP_NOT_MAPPED)
            continue;
        const wf_array *x = inputs[i];
        if (axes[i] < -x->ndim || axes[i] >= x->ndim)
            return wf__error(WF_ERR_AXIS, "%s: in_axes[%zu] = %d is out of range for rank %d",
                             op, i, axes[i], x->ndim);
        if (axes[i] < 0)
            axes[i] += x->ndim;
        const int64_t b = x->shape[axes[i]];
        if (*batch >= 0 && b != *batch)
            return wf__error(WF_ERR_SHAPE,
                             "%s: input %zu has %lld examples on its mapped axis, others %lld",
                             op, i, (long long)b, (long long)*batch);
        *batch = b;
    }
    if (*batch < 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: no input is mapped", op);
    for (size_t i = 0; i < n; i++) {
        if (axes[i] == WF_VMAP_NOT_MAPPED)
            continue;
        wf_array *x = inputs[i];
        int64_t shape[WF_MAX_NDIM], starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
        int r = 0;
        for (int d = 0; d < x->ndim; d++) {
            starts[d] = 0;
            stops[d] = d == axes[i] ? 1 : INT64_MAX;
            steps[d] = 1;
            if (d != axes[i])
                shape[r++] = x->shape[d];
        }
        /* An empty batch has no first example: zeros stand for it. */
        wf_array *t = *batch > 0 ? wf_squeeze(wf_slice(x, starts, stops, steps), &axes[i], 1)
                                 : wf_zeros(shape, r, x->dtype);
        if (!t)
            return wf_last_error();
        tracers[i] = call_inputs[i] = t;
    }
    return WF_OK;
}

/* Output j with its batch moved to out_axes[j]; unbatched outputs are
 * broadcast along a new axis unless their out-axis is NOT_MAPPED. */
static wf_array *place_output(const char *op, wf_graph *g, wf_array *out, int out_axis,
                              size_t j, int64_t batch)
{
    const wf_graph_entry *e = wf__graph_find(g, out);
    const bool batched = e && e->value && e->axis != WF_VMAP_NOT_MAPPED;
    if (e && e->value && !batched)
        out = e->value;
    if (out_axis == WF_VMAP_NOT_MAPPED) {
        if (batched) {
            wf__error(WF_ERR_INVALID_ARGUMENT,
                      "%s: output %zu depends on a mapped input but its out-axis is "
                      "WF_VMAP_NOT_MAPPED",
                      op, j);
            return NULL;
        }
        return wf__rule_same(out);
    }
    const int rank = out->ndim + 1;
    if (out_axis < -rank || out_axis >= rank) {
        wf__error(WF_ERR_AXIS, "%s: out_axes[%zu] = %d is out of range for rank %d", op, j,
                  out_axis, rank);
        return NULL;
    }
    if (out_axis < 0)
        out_axis += rank;
    wf_array *x = batched ? e->value : wf__vmap_materialize(out, WF_VMAP_NOT_MAPPED, batch);
    const int from = batched ? e->axis : 0;
    if (!x)
        return NULL;
    /* An identity that follows the shape (expand_dims of no axes), so a
     * shapeless compiled vmap replays at the call's shapes. */
    return from == out_axis ? wf_expand_dims(x, NULL, 0) : wf_moveaxis(x, from, out_axis);
}

wf_status wf__vmap(const char *op, wf_fn *fn, wf_array *const *inputs, const int *in_axes,
                   size_t ninputs, const int *out_axes, size_t nout_axes, wf_array **outputs,
                   size_t *noutputs)
{
    wf_array **tracers = wf__calloc(2 * ninputs + 1, sizeof *tracers);
    int *axes = wf__calloc(ninputs + 1, sizeof *axes);
    if (!tracers || !axes) {
        free(tracers);
        free(axes);
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    wf_array **call_inputs = tracers + ninputs;
    wf_array *outs[WF_FN_MAX_OUTPUTS], *placed[WF_FN_MAX_OUTPUTS];
    size_t nouts = 0;
    int64_t batch = 0;
    wf_status st = wf_scope_begin();
    if (st != WF_OK) {
        free(tracers);
        free(axes);
        return st;
    }
    wf__trace_enter(WF_TRACE_VMAP);
    st = make_tracers(op, inputs, in_axes, ninputs, axes, &batch, tracers, call_inputs);
    if (st == WF_OK)
        st = wf__fn_call_owned(fn, call_inputs, ninputs, outs, &nouts);
    wf__trace_leave(WF_TRACE_VMAP);
    if (st == WF_OK && out_axes && nout_axes != nouts)
        st = wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %zu out_axes for %zu outputs", op,
                       nout_axes, nouts);
    if (st == WF_OK && nouts > *noutputs)
        st = wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %zu outputs, room was given for %zu", op,
                       nouts, *noutputs);
    wf_graph g;
    memset(&g, 0, sizeof g);
    if (st == WF_OK)
        st = wf__graph_build(&g, outs, nouts, tracers, ninputs);
    for (size_t i = 0; i < ninputs && st == WF_OK; i++) {
        wf_graph_entry *e = tracers[i] ? wf__graph_find(&g, tracers[i]) : NULL;
        if (e) {
            e->value = inputs[i];
            e->axis = axes[i];
        }
    }
    wf_trace_kind kind = WF_TRACE_VMAP;
    if (st == WF_OK)
        wf__graph_mark_needed(&g, outs, nouts, wf__rule_uses_input, &kind);
    for (size_t k = 0; k < g.norder && st == WF_OK; k++)
        if (g.entries[g.order[k]].needed)
            st = batch_node(op, &g, &g.entries[g.order[k]], batch);
    for (size_t j = 0; j < nouts && st == WF_OK; j++)
        st = wf__rule_result(
            placed[j] = place_output(op, &g, outs[j], out_axes ? out_axes[j] : 0, j, batch));
    if (st == WF_OK)
        st = wf__export(placed, nouts, outputs);
    if (st == WF_OK)
        *noutputs = nouts;
    wf__graph_free(&g);
    wf__release_owned(outs, nouts);
    wf_scope_end();
    free(tracers);
    free(axes);
    return st;
}

/* ---------------------------------------------------------------- wf_vmap */

typedef struct vmap_payload {
    wf_fn *fn;
    size_t nin, nout; /* 0 with NULL axes: all 0 */
    int *in_axes, *out_axes;
    int storage[];
} vmap_payload;

static void vmap_payload_free(void *p)
{
    vmap_payload *v = p;
    wf_fn_release(v->fn);
    free(v);
}

static wf_status vmap_call(void *payload, wf_array *const *inputs, size_t ninputs,
                           wf_array **outputs, size_t *noutputs)
{
    const vmap_payload *v = payload;
    if (v->in_axes && v->nin != ninputs)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_vmap: %zu in_axes for a call with %zu inputs",
                         v->nin, ninputs);
    return wf__vmap("wf_vmap", v->fn, inputs, v->in_axes, ninputs, v->out_axes, v->nout, outputs,
                    noutputs);
}

wf_fn *wf_vmap(wf_fn *fn, const int *in_axes, size_t nin, const int *out_axes, size_t nout)
{
    if (!fn) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_vmap: fn is NULL");
        return NULL;
    }
    if ((!in_axes && nin) || (!out_axes && nout)) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_vmap: in_axes or out_axes is NULL with a count");
        return NULL;
    }
    if (nin > 1u << 20 || nout > WF_FN_MAX_OUTPUTS) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_vmap: %zu in_axes / %zu out_axes is too many",
                  nin, nout);
        return NULL;
    }
    vmap_payload *v = wf__malloc(sizeof *v + (nin + nout) * sizeof(int));
    if (!v) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_vmap: out of memory");
        return NULL;
    }
    v->fn = wf_fn_retain(fn);
    v->nin = nin;
    v->nout = nout;
    v->in_axes = in_axes ? v->storage : NULL;
    v->out_axes = out_axes ? v->storage + nin : NULL;
    if (in_axes)
        memcpy(v->in_axes, in_axes, nin * sizeof(int));
    if (out_axes)
        memcpy(v->out_axes, out_axes, nout * sizeof(int));
    return wf__fn_make(vmap_call, v, vmap_payload_free);
}
