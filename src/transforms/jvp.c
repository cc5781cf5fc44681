/*
 * Forward mode: wf_jvp.
 *
 * The function runs on tracers while this thread is inside a jvp trace;
 * the traced graph is then walked in topological order, each node's jvp
 * rule turning its inputs' tangents into its output's tangent. Tangents
 * flow only through float nodes.
 */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"
#include "transforms/graph.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"
#include "util/fault.h"

enum { MAX_RULE_INPUTS = 64 };

/* Pushes tangents through one node. */
static wf_status push_forward(const char *op, wf_graph *g, wf_graph_entry *e)
{
    wf_array *node = e->node;
    if (!wf__dtype_is_inexact(node->dtype))
        return WF_OK;
    if (node->ninputs > MAX_RULE_INPUTS)
        return wf__error(WF_ERR_UNSUPPORTED, "%s: '%s' has %d inputs (at most %d)", op,
                         node->prim->name, node->ninputs, MAX_RULE_INPUTS);
    wf_array *tangents[MAX_RULE_INPUTS];
    bool any = false;
    for (int i = 0; i < node->ninputs; i++) {
        const wf_graph_entry *in = wf__graph_find(g, node->inputs[i]);
        tangents[i] = in && wf__dtype_is_inexact(node->inputs[i]->dtype) ? in->value : NULL;
        any = any || tangents[i];
    }
    if (!any)
        return WF_OK;
    const wf_prim_rules *rules = wf__rules_find(node->prim);
    if (!rules || !rules->jvp)
        return wf__error(WF_ERR_UNSUPPORTED, "%s: primitive '%s' has no jvp rule", op,
                         node->prim->name);
    wf_array *t = NULL;
    const bool marked = wf__rule_begin(rules, node);
    wf_status st = rules->jvp(node, tangents, &t);
    wf__rule_end(marked);
    if (st == WF_OK && t && t->dtype != node->dtype)
        st = wf__rule_result(t = wf_astype(t, node->dtype));
    if (st == WF_OK && t && !wf__shape_equal(t->shape, t->ndim, node->shape, node->ndim))
        st = wf__error(WF_ERR_INTERNAL, "%s: the jvp of '%s' has the wrong shape", op,
                       node->prim->name);
    e->value = st == WF_OK ? t : NULL;
    return st;
}

static wf_status check_tangents(const char *op, wf_array *const *primals,
                                wf_array *const *tangents, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!tangents[i])
            continue;
        if (!wf__array_check(tangents[i], op, "a tangent"))
            return wf_last_error();
        const wf_array *p = primals[i], *t = tangents[i];
        if (!wf__shape_equal(t->shape, t->ndim, p->shape, p->ndim)) {
            char sa[256], sb[256];
            return wf__error(WF_ERR_SHAPE, "%s: tangent %zu has shape %s, primal %zu has %s", op,
                             i, wf__shape_str(t->shape, t->ndim, sa, sizeof sa), i,
                             wf__shape_str(p->shape, p->ndim, sb, sizeof sb));
        }
    }
    return WF_OK;
}

/* Seeds the tracers' tangents (cast to the primal's dtype; none for
 * integer primals) and walks forward. */
static wf_status forward(const char *op, wf_graph *g, wf_array *const *primals,
                         wf_array *const *tracers, wf_array *const *tangents, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        wf_graph_entry *e = wf__graph_find(g, tracers[i]);
        if (!e || !tangents[i] || !wf__dtype_is_inexact(primals[i]->dtype))
            continue;
        e->value = wf_astype(tangents[i], primals[i]->dtype);
        if (!e->value)
            return wf_last_error();
    }
    wf_status st = WF_OK;
    for (size_t k = 0; k < g->norder && st == WF_OK; k++)
        if (g->entries[g->order[k]].needed)
            st = push_forward(op, g, &g->entries[g->order[k]]);
    return st;
}

/* The zero tangent of an output no tangent reached: of its dtype when that
 * is inexact; else (a comparison's bool, an integer) of the given tangents'
 * dtype, as MLX (a bool tangent would break the ops that consume it). */
static wf_array *zero_tangent(wf_array *out, wf_array *const *tangents, size_t ntangents)
{
    if (!wf__dtype_is_inexact(out->dtype))
        for (size_t i = 0; i < ntangents; i++)
            if (tangents[i] && wf__dtype_is_inexact(tangents[i]->dtype))
                return wf_zeros(out->shape, out->ndim, tangents[i]->dtype);
    return wf_zeros_like(out);
}

/* Outputs (as views built outside the trace) and their tangents. */
static wf_status export_results(const char *op, wf_graph *g, wf_array *const *outs,
                                size_t nouts, wf_array *const *tangents, size_t ntangents,
                                wf_array **outputs, wf_array **tangents_out, size_t *noutputs)
{
    if (nouts > *noutputs)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: the function returned %zu outputs, room was given for %zu", op,
                         nouts, *noutputs);
    wf_array *list[2 * WF_FN_MAX_OUTPUTS], *result[2 * WF_FN_MAX_OUTPUTS];
    size_t n = 0;
    for (size_t j = 0; j < nouts; j++) {
        const wf_graph_entry *e = wf__graph_find(g, outs[j]);
        wf_array *t = e && e->value ? e->value : zero_tangent(outs[j], tangents, ntangents);
        if (!t)
            return wf_last_error();
        list[n++] = t;
    }
    for (size_t j = 0; j < nouts && outputs; j++)
        if (!(list[n++] = wf__rule_same(outs[j])))
            return wf_last_error();
    wf_status st = wf__export(list, n, result);
    if (st != WF_OK)
        return st;
    for (size_t j = 0; j < nouts; j++) {
        tangents_out[j] = result[j];
        if (outputs)
            outputs[j] = result[nouts + j];
    }
    *noutputs = nouts;
    return WF_OK;
}

wf_status wf__jvp(const char *op, wf_fn *fn, wf_array *const *primals, size_t nprimals,
                  wf_array *const *tangents, wf_array **outputs, wf_array **tangents_out,
                  size_t *noutputs)
{
    wf_status st = check_tangents(op, primals, tangents, nprimals);
    if (st != WF_OK)
        return st;
    wf_array **tracers = wf__calloc(nprimals + 1, sizeof *tracers);
    if (!tracers)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    wf_array *outs[WF_FN_MAX_OUTPUTS];
    size_t nouts = 0;
    st = wf_scope_begin();
    if (st != WF_OK) {
        free(tracers);
        return st;
    }
    wf__trace_enter(WF_TRACE_JVP);
    for (size_t i = 0; i < nprimals && st == WF_OK; i++)
        st = wf__rule_result(tracers[i] = wf__rule_same(primals[i]));
    if (st == WF_OK)
        st = wf__fn_call_owned(fn, tracers, nprimals, outs, &nouts);
    wf__trace_leave(WF_TRACE_JVP);
    wf_graph g;
    memset(&g, 0, sizeof g);
    if (st == WF_OK)
        st = wf__graph_build(&g, outs, nouts, tracers, nprimals);
    wf_trace_kind kind = WF_TRACE_JVP;
    if (st == WF_OK) {
        wf__graph_mark_needed(&g, outs, nouts, wf__rule_uses_input, &kind);
        st = forward(op, &g, primals, tracers, tangents, nprimals);
    }
    if (st == WF_OK)
        st = export_results(op, &g, outs, nouts, tangents, nprimals, outputs, tangents_out,
                            noutputs);
    wf__graph_free(&g);
    wf__release_owned(outs, nouts);
    wf_scope_end();
    free(tracers);
    return st;
}

wf_status wf_jvp(wf_fn *fn, wf_array *const *primals, size_t nprimals,
                 wf_array *const *tangents, wf_array **outputs, wf_array **output_tangents,
                 size_t *noutputs)
{
    const char *op = "wf_jvp";
    if (!fn)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: fn is NULL", op);
    if (!output_tangents || !noutputs)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: output_tangents or noutputs is NULL", op);
    if ((!primals || !tangents) && nprimals)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: primals or tangents is NULL", op);
    for (size_t i = 0; i < nprimals; i++)
        if (!wf__array_check(primals[i], op, "a primal"))
            return wf_last_error();
    return wf__jvp(op, fn, primals, nprimals, tangents, outputs, output_tangents, noutputs);
}
