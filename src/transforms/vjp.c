/*
 * Reverse mode: wf_vjp, wf_grad, wf_value_and_grad.
 *
 * The function runs on tracers (fresh nodes standing for the primals) while
 * this thread is inside a vjp trace; the graph from its outputs back to the
 * tracers is then walked in reverse topological order, each node's vjp rule
 * turning its output cotangent into its inputs' cotangents. Cotangents flow
 * only through float nodes: integer and bool values have no gradient.
 *
 * Precision: a rule computes in its node's dtype (the promoted dtype of the
 * forward computation), and a cotangent is rounded to a narrower node's
 * dtype where it enters that node - except a broadcast: its vjp sums over
 * the broadcast axes, so a wider cotangent stays wide through it and is
 * rounded once, after the sum, where it reaches the node it broadcast (a
 * float32 mask broadcast over float64 attention scores gets a float64 sum).
 */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scope.h"
#include "prim/prims.h"
#include "prim/quantized.h"
#include "prim/scatter.h"
#include "prim/shape.h"
#include "prim/unary.h"
#include "transforms/graph.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"
#include "util/fault.h"

enum { MAX_RULE_INPUTS = 64 };

/* The dtype a cotangent `c` for node x is kept in: x's, but a broadcast
 * keeps a wider float one until its sum is done (see the top). */
static wf_dtype cotangent_dtype(const wf_array *x, const wf_array *c)
{
    if (x->prim == &wf__prim_broadcast_to && wf__dtype_is_float(c->dtype) &&
        wf_promote_types(c->dtype, x->dtype) == c->dtype)
        return c->dtype;
    return x->dtype;
}

/* Adds c (a cotangent for entry e's node) to what e holds. */
static wf_status accumulate(wf_graph_entry *e, wf_array *c)
{
    const wf_array *x = e->node;
    if (!wf__shape_equal(c->shape, c->ndim, x->shape, x->ndim))
        return wf__error(WF_ERR_INTERNAL, "vjp: a cotangent of rank %d for an input of rank %d",
                         c->ndim, x->ndim);
    const wf_dtype keep = cotangent_dtype(x, c);
    if (c->dtype != keep)
        c = wf_astype(c, keep);
    if (c && e->value)
        c = wf_add(e->value, c);
    if (!c)
        return wf_last_error();
    e->value = c;
    return WF_OK;
}

static wf_status unsupported(const char *op, const wf_array *node)
{
    return wf__error(WF_ERR_UNSUPPORTED, "%s: primitive '%s' has no vjp rule", op,
                     node->prim->name);
}

/* The rules are written as the transpose of the jvp: J^T ct, with no
 * conjugation. Through a node with a complex output the engine applies the
 * adjoint instead, conj(J^T conj(ct)) = J^H ct, which is MLX's (and
 * PyTorch's) convention: the gradient of |z|^2 is 2z, the vjp of exp(z) is
 * ct * conj(exp(z)). Real-output rules of complex inputs (real, imag, abs)
 * are written in that convention directly; a custom function's rule is the
 * user's and is taken as it is. */
static bool adjoint_vjp(const wf_array *node)
{
    return node->dtype == WF_DTYPE_C64 && node->prim != &wf__prim_custom_function;
}

static wf_status vjp_adjoint(const wf_prim_rules *rules, wf_array *node, wf_array *ct,
                             const bool *wanted, wf_array **cts)
{
    wf_array *ct_conj = wf_conjugate(ct);
    if (!ct_conj)
        return wf_last_error();
    wf_status st = rules->vjp(node, ct_conj, wanted, cts);
    for (int i = 0; i < node->ninputs && st == WF_OK; i++)
        if (wanted[i] && cts[i] && !(cts[i] = wf_conjugate(cts[i])))
            st = wf_last_error();
    return st;
}

/* An element-wise node of a shapeless trace whose operand had the output's
 * shape when traced may get a broadcast operand in a later call (replay
 * broadcasts it, tape.c): its cotangent is summed to the operand's shape
 * of each call. An operand broadcast when traced is an implicit broadcast,
 * whose own rule does the same. */
static wf_status unbroadcast_operands(wf_array *node, const bool *wanted, wf_array **cts)
{
    if (!wf__array_is_shapeless(node) || !(node->prim->flags & WF_PRIM_ELEMENTWISE) ||
        node->ninputs < 2)
        return WF_OK;
    for (int i = 0; i < node->ninputs; i++) {
        wf_array *x = node->inputs[i];
        if (!wanted[i] || !cts[i] || (x->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST))
            continue;
        if (!(cts[i] = wf__rule_unbroadcast(cts[i], x)))
            return wf_last_error();
    }
    return WF_OK;
}

/* For every entry of g: is it an integer array computed from an integer
 * tracer through integer nodes only, with no stop_gradient on the way (or
 * such a tracer itself)? One pass in g's order, inputs before users. A
 * vjp whose indices are such an array was asked for a derivative with
 * respect to indices. Indices computed from float values (argsort(x) in
 * the user's function or in a rule's own graph) are not. NULL: out of
 * memory (recorded). */
static bool *integer_traced(const wf_graph *g)
{
    bool *traced = wf__calloc(g->count + 1, sizeof *traced);
    if (traced == NULL) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "vjp: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < g->count; i++) {
        const wf_graph_entry *e = &g->entries[i];
        traced[i] = e->tracer >= 0 && !wf__dtype_is_inexact(e->node->dtype);
    }
    for (size_t k = 0; k < g->norder; k++) {
        const int idx = g->order[k];
        const wf_array *x = g->entries[idx].node;
        if (wf__dtype_is_inexact(x->dtype) || x->prim == &wf__prim_stop_gradient)
            continue;
        for (int i = 0; i < x->ninputs && !traced[idx]; i++) {
            const wf_graph_entry *in = wf__graph_find(g, x->inputs[i]);
            traced[idx] = in != NULL && traced[in - g->entries];
        }
    }
    return traced;
}

/* The primitives whose inputs [first, first + count) are indices (count
 * -1: to the last input). */
static const struct {
    const wf_prim_def *prim;
    int first, count;
} index_operands[] = {
    {&wf__prim_take, 1, 1},
    {&wf__prim_take_along_axis, 1, 1},
    {&wf__prim_scatter_add, 1, 1},
    {&wf__prim_gather, 1, -1},  /* a, indices... */
    {&wf__prim_scatter, 2, -1}, /* a, updates, indices... */
};

/* Whether input i of `node` comes from an integer argument of the vjp
 * (`traced`: integer_traced's flags). */
static bool input_traced(const wf_graph *g, const bool *traced, const wf_array *node, int i)
{
    const wf_graph_entry *in = wf__graph_find(g, node->inputs[i]);
    return in != NULL && traced[in - g->entries];
}

/* MLX refuses a vjp with respect to a gather's or scatter's indices (its
 * error names stop_gradient); so does weft, for indices that come from an
 * integer argument of the vjp. */
static wf_status check_index_inputs(const char *op, const wf_graph *g, const bool *traced,
                                    const wf_array *node)
{
    size_t k = 0;
    const size_t n = sizeof index_operands / sizeof index_operands[0];
    while (k < n && index_operands[k].prim != node->prim)
        k++;
    if (k == n)
        return WF_OK;
    const int first = index_operands[k].first, count = index_operands[k].count;
    const int end = count < 0 ? node->ninputs : first + count;
    for (int i = first; i < end && i < node->ninputs; i++)
        if (input_traced(g, traced, node, i))
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "%s: cannot differentiate with respect to the indices of '%s' "
                             "(input %d); wrap them in stop_gradient",
                             op, node->prim->name, i);
    return WF_OK;
}

/* MLX refuses a vjp of quantized_matmul or gather_qmm with respect to the
 * codes (a RuntimeError: WF_ERR_UNSUPPORTED) and, in a floating-point
 * mode, to the uint8 scales (a ValueError); weft too, where they come
 * from an integer argument of the vjp (otherwise they would silently get
 * no cotangent, as integers do). */
static wf_status check_quantized_inputs(const char *op, const wf_graph *g, const bool *traced,
                                        const wf_array *node)
{
    if (node->prim != &wf__prim_quantized_matmul && node->prim != &wf__prim_gather_qmm)
        return WF_OK;
    const wf_quant_params *p = node->params;
    if (input_traced(g, traced, node, 1))
        return wf__error(WF_ERR_UNSUPPORTED,
                         "%s: '%s' has no derivative with respect to the quantized weights "
                         "(codes)",
                         op, node->prim->name);
    if (p->mode != WF_QUANT_AFFINE && input_traced(g, traced, node, 2))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: '%s' has no derivative with respect to the scales of a "
                         "floating-point quantization mode",
                         op, node->prim->name);
    return WF_OK;
}

/* Pulls the cotangent of `e` back through its node. */
static wf_status pull_back(const char *op, wf_graph *g, const bool *traced, wf_graph_entry *e)
{
    wf_array *node = e->node;
    bool wanted[MAX_RULE_INPUTS];
    wf_array *cts[MAX_RULE_INPUTS];
    if (node->ninputs > MAX_RULE_INPUTS)
        return wf__error(WF_ERR_UNSUPPORTED, "%s: '%s' has %d inputs (at most %d)", op,
                         node->prim->name, node->ninputs, MAX_RULE_INPUTS);
    wf_status checked = check_index_inputs(op, g, traced, node);
    if (checked == WF_OK)
        checked = check_quantized_inputs(op, g, traced, node);
    if (checked != WF_OK)
        return checked;
    bool any = false;
    for (int i = 0; i < node->ninputs; i++) {
        const wf_graph_entry *in = wf__graph_find(g, node->inputs[i]);
        wanted[i] = in && in->active && wf__dtype_is_inexact(node->inputs[i]->dtype);
        any = any || wanted[i];
        cts[i] = NULL;
    }
    if (!any)
        return WF_OK;
    const wf_prim_rules *rules = wf__rules_find(node->prim);
    if (!rules || !rules->vjp)
        return unsupported(op, node);
    const bool marked = wf__rule_begin(rules, node);
    wf_status st = adjoint_vjp(node) ? vjp_adjoint(rules, node, e->value, wanted, cts)
                                     : rules->vjp(node, e->value, wanted, cts);
    wf__rule_end(marked);
    if (st == WF_OK)
        st = unbroadcast_operands(node, wanted, cts);
    for (int i = 0; i < node->ninputs && st == WF_OK; i++)
        if (wanted[i] && cts[i])
            st = accumulate(wf__graph_find(g, node->inputs[i]), cts[i]);
    return st;
}

static wf_status check_seeds(const char *op, wf_array *const *outs, size_t nouts,
                             wf_array *const *seeds, size_t nseeds)
{
    if (seeds == NULL) { /* grad: output 0 is the loss */
        if (nouts == 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: the function returned no outputs",
                             op);
        const wf_array *loss = outs[0];
        if (loss->size != 1) {
            char buf[256];
            return wf__error(WF_ERR_SHAPE, "%s: the function's output has shape %s, not a scalar",
                             op, wf__shape_str(loss->shape, loss->ndim, buf, sizeof buf));
        }
        if (!wf__dtype_is_float(loss->dtype))
            return wf__error(WF_ERR_DTYPE,
                             "%s: the function's output has dtype %s; gradients need a float "
                             "output",
                             op, wf_dtype_name(loss->dtype));
        return WF_OK;
    }
    if (nseeds != nouts)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: %zu cotangents given for a function with %zu outputs", op, nseeds,
                         nouts);
    for (size_t j = 0; j < nouts; j++) {
        if (!wf__array_check(seeds[j], op, "a cotangent"))
            return wf_last_error();
        if (!wf__shape_equal(seeds[j]->shape, seeds[j]->ndim, outs[j]->shape, outs[j]->ndim)) {
            char sa[256], sb[256];
            return wf__error(WF_ERR_SHAPE, "%s: cotangent %zu has shape %s, output %zu has %s",
                             op, j, wf__shape_str(seeds[j]->shape, seeds[j]->ndim, sa, sizeof sa),
                             j, wf__shape_str(outs[j]->shape, outs[j]->ndim, sb, sizeof sb));
        }
    }
    return WF_OK;
}

/* Seeds the outputs' cotangents and runs the reverse pass. */
static wf_status reverse(const char *op, wf_graph *g, wf_array *const *outs, size_t nouts,
                         wf_array *const *seeds)
{
    wf_status st = WF_OK;
    for (size_t j = 0; j < nouts && st == WF_OK; j++) {
        wf_graph_entry *e = wf__graph_find(g, outs[j]);
        if (!e->active || !wf__dtype_is_inexact(outs[j]->dtype) || (!seeds && j > 0))
            continue;
        /* a node of its own: a gradient handed back is never the caller's array */
        wf_array *seed = seeds ? wf__rule_same(seeds[j]) : wf_ones_like(outs[0]);
        st = seed ? accumulate(e, seed) : wf_last_error();
    }
    bool *traced = st == WF_OK ? integer_traced(g) : NULL;
    if (st == WF_OK && traced == NULL)
        st = wf_last_error();
    for (size_t k = g->norder; k-- > 0 && st == WF_OK;) {
        wf_graph_entry *e = &g->entries[g->order[k]];
        if (e->value)
            st = pull_back(op, g, traced, e);
    }
    free(traced);
    return st;
}

/* The cotangent each traced primal received (zeros if none). */
static wf_status collect_grads(wf_graph *g, wf_array *const *primals, wf_array *const *tracers,
                               size_t n, wf_array **grads)
{
    for (size_t i = 0; i < n; i++) {
        grads[i] = NULL;
        if (!tracers[i])
            continue;
        const wf_graph_entry *e = wf__graph_find(g, tracers[i]);
        grads[i] = e && e->value ? e->value : wf_zeros_like(primals[i]);
        if (!grads[i])
            return wf_last_error();
    }
    return WF_OK;
}

/* Exports the traced outputs (as views built outside the trace, so once
 * evaluated they let go of the traced graph; only if `outputs`) and the
 * gradients, all or nothing. */
static wf_status export_results(wf_array *const *outs, size_t nouts, wf_array **outputs,
                                size_t *noutputs, wf_array *const *grads, size_t nprimals,
                                wf_array **grads_out)
{
    const size_t want = outputs ? nouts : 0;
    if (outputs && nouts > *noutputs)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "the function returned %zu outputs, room was given for %zu", nouts,
                         *noutputs);
    wf_array **list = wf__malloc(2 * (want + nprimals + 1) * sizeof *list);
    if (!list)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "vjp: out of memory");
    wf_array **result = list + want + nprimals + 1;
    size_t n = 0;
    wf_status st = WF_OK;
    for (size_t j = 0; j < want && st == WF_OK; j++)
        st = wf__rule_result(list[n++] = wf__rule_same(outs[j]));
    for (size_t i = 0; i < nprimals; i++)
        if (grads[i])
            list[n++] = grads[i];
    if (st == WF_OK)
        st = wf__export(list, n, result);
    if (st == WF_OK) {
        for (size_t j = 0; j < want; j++)
            outputs[j] = result[j];
        for (size_t i = 0, k = want; i < nprimals; i++)
            grads_out[i] = grads[i] ? result[k++] : NULL;
        if (outputs)
            *noutputs = nouts;
    }
    free(list);
    return st;
}

wf_status wf__vjp(const char *op, wf_fn *fn, wf_array *const *primals, size_t nprimals,
                  const bool *traced, wf_array *const *cotangents, size_t ncotangents,
                  wf_array **outputs, size_t *noutputs, wf_array **grads)
{
    wf_array **tracers = wf__calloc(2 * nprimals + 1, sizeof *tracers);
    if (!tracers)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    wf_array **inputs = tracers + nprimals;
    wf_array *outs[WF_FN_MAX_OUTPUTS];
    size_t nouts = 0;
    wf_status st = wf_scope_begin();
    if (st != WF_OK) {
        free(tracers);
        return st;
    }
    wf__trace_enter(WF_TRACE_VJP);
    for (size_t i = 0; i < nprimals && st == WF_OK; i++) {
        inputs[i] = primals[i];
        if (!traced || traced[i]) {
            tracers[i] = inputs[i] = wf__rule_same(primals[i]);
            st = wf__rule_result(tracers[i]);
        }
    }
    if (st == WF_OK)
        st = wf__fn_call_owned(fn, inputs, nprimals, outs, &nouts);
    wf__trace_leave(WF_TRACE_VJP);
    if (st == WF_OK)
        st = check_seeds(op, outs, nouts, cotangents, ncotangents);
    wf_graph g;
    memset(&g, 0, sizeof g);
    if (st == WF_OK)
        st = wf__graph_build(&g, outs, nouts, tracers, nprimals);
    if (st == WF_OK)
        st = reverse(op, &g, outs, nouts, cotangents);
    wf_array **found = inputs; /* reused: the inputs are no longer needed */
    if (st == WF_OK)
        st = collect_grads(&g, primals, tracers, nprimals, found);
    if (st == WF_OK)
        st = export_results(outs, nouts, outputs, noutputs, found, nprimals, grads);
    wf__graph_free(&g);
    wf__release_owned(outs, nouts);
    wf_scope_end();
    free(tracers);
    return st;
}

/* ---------------------------------------------------------------- public */

wf_status wf_vjp(wf_fn *fn, wf_array *const *primals, size_t nprimals,
                 wf_array *const *cotangents, size_t ncotangents, wf_array **outputs,
                 wf_array **primal_cotangents)
{
    const char *op = "wf_vjp";
    if (!fn)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: fn is NULL", op);
    if (!primal_cotangents && nprimals)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: primal_cotangents is NULL", op);
    if ((!primals && nprimals) || (!cotangents && ncotangents))
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: primals or cotangents is NULL", op);
    if (ncotangents > WF_FN_MAX_OUTPUTS)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %zu cotangents (at most %d)", op,
                         ncotangents, WF_FN_MAX_OUTPUTS);
    for (size_t i = 0; i < nprimals; i++)
        if (!wf__array_check(primals[i], op, "a primal"))
            return wf_last_error();
    static wf_array *const no_seeds[1] = {NULL};
    size_t room = ncotangents;
    return wf__vjp(op, fn, primals, nprimals, NULL, ncotangents ? cotangents : no_seeds,
                   ncotangents, outputs, &room, primal_cotangents);
}
