/*
 * wf_custom_function and wf_checkpoint.
 *
 * Under a transform, a custom function's outputs are nodes of the
 * "custom_function" primitive: output j is a view of the function's output
 * j, with the primals and every output as inputs, and params pointing at
 * the user's rules. Transforms apply those rules at such a node; a missing
 * rule sends the transform through the function's own graph (the view's
 * last inputs). Outside any transform the function is simply called.
 *
 * A checkpointed function is a custom function whose forward runs with this
 * thread's tracing suspended, so its intermediates form a plain graph that
 * is freed once evaluated; its rules run the function again under the
 * transform that needs them (vjp, jvp or vmap).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scope.h"
#include "prim/kernel.h"
#include "prim/prims.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"
#include "util/fault.h"

typedef struct custom_rules {
    atomic_int refcount;
    wf_fn *fn, *vjp, *jvp, *vmap;
    bool checkpoint;
} custom_rules;

static custom_rules *rules_retain(custom_rules *r)
{
    atomic_fetch_add_explicit(&r->refcount, 1, memory_order_relaxed);
    return r;
}

static void rules_release(custom_rules *r)
{
    if (atomic_fetch_sub_explicit(&r->refcount, 1, memory_order_acq_rel) != 1)
        return;
    wf_fn_release(r->fn);
    wf_fn_release(r->vjp);
    wf_fn_release(r->jvp);
    wf_fn_release(r->vmap);
    free(r);
}

/* ---------------------------------------------------------------- the primitive */

/* The node holds one reference to the rules (released with the node). */
typedef struct custom_fn_params {
    custom_rules *rules;
    int nprimals, noutputs, index;
} custom_fn_params;

static const custom_fn_params *params_of(const wf_array *node) { return node->params; }

static wf_status infer_custom_fn(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *outputs)
{
    const custom_fn_params *p = params;
    if (ninputs != p->nprimals + p->noutputs || p->index >= p->noutputs)
        return wf__error(WF_ERR_INTERNAL, "custom_function: %d inputs for %d primals, %d outputs",
                         ninputs, p->nprimals, p->noutputs);
    const wf_desc *out = &inputs[p->nprimals + p->index];
    outputs[0].dtype = out->dtype;
    outputs[0].ndim = out->ndim;
    wf__shape_copy(outputs[0].shape, out->shape, out->ndim);
    return WF_OK;
}

/* Its only kernel: a view of the function's output. */
static wf_status view_kernel(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    const custom_fn_params *p = params;
    const wf_array *src = inputs[p->nprimals + p->index];
    wf__array_set_view(out, src, src->strides, src->offset);
    return WF_OK;
}

static void release_custom_fn(void *params) { rules_release(((custom_fn_params *)params)->rules); }
/* A compiled trace shares the rules: its copy of the params holds a
 * reference, and so does every node replayed from it. */
static void retain_custom_fn(void *params) { rules_retain(((custom_fn_params *)params)->rules); }

/* Defined here rather than in src/prim/: its params hold transform rules.
 * Not in wf__prim_registry (built-in primitives only); the rules table and
 * test_transforms_coverage add it. */
const wf_prim_def wf__prim_custom_function = {
    .name = "custom_function",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(custom_fn_params),
    .infer = infer_custom_fn,
    .params_release = release_custom_fn,
    .params_retain = retain_custom_fn,
    .kernels = &(wf_kernel_slots){{0}},
};

/* The view kernel is registered for every device kind the first time a
 * custom function is made (before any node of the primitive exists, so no
 * lookup races the registration). A view is the same on every device. */
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void register_kernels(void)
{
    for (int d = 0; d < WF_DEVICE_KIND_COUNT; d++)
        wf__kernel_register(&wf__prim_custom_function, (enum wf_device_kind)d, view_kernel);
}

/* ---------------------------------------------------------------- calling */

/* Runs fn; a checkpoint runs it with this thread's tracing suspended. */
static wf_status run_forward(const custom_rules *r, wf_array *const *in, size_t n,
                             wf_array **outs, size_t *nouts)
{
    if (!r->checkpoint)
        return wf__fn_call_owned(r->fn, in, n, outs, nouts);
    wf_trace_saved saved;
    wf__trace_suspend(&saved);
    wf_status st = wf__fn_call_owned(r->fn, in, n, outs, nouts);
    wf__trace_resume(&saved);
    return st;
}

static wf_status custom_call(void *payload, wf_array *const *in, size_t n, wf_array **outputs,
                             size_t *noutputs)
{
    custom_rules *r = payload;
    if (wf__trace_depth() == 0)
        return wf_fn_call(r->fn, in, n, outputs, noutputs);
    wf_array *outs[WF_FN_MAX_OUTPUTS];
    size_t nouts = 0;
    wf_status st = run_forward(r, in, n, outs, &nouts);
    if (st != WF_OK)
        return st;
    wf_array **node_in = wf__malloc((n + nouts + 1) * sizeof *node_in);
    if (!node_in)
        st = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_custom_function: out of memory");
    else if (nouts > *noutputs)
        st = wf__error(WF_ERR_INVALID_ARGUMENT,
                       "wf_custom_function: %zu outputs, room was given for %zu", nouts,
                       *noutputs);
    else if (n + nouts > 64)
        st = wf__error(WF_ERR_UNSUPPORTED,
                       "wf_custom_function: %zu inputs and outputs under a transform (at most 64)",
                       n + nouts);
    size_t made = 0;
    if (st == WF_OK) {
        memcpy(node_in, in, n * sizeof *node_in);
        memcpy(node_in + n, outs, nouts * sizeof *node_in);
        for (; made < nouts; made++) {
            custom_fn_params p;
            memset(&p, 0, sizeof p);
            p.rules = rules_retain(r);
            p.nprimals = (int)n;
            p.noutputs = (int)nouts;
            p.index = (int)made;
            outputs[made] = wf__array_publish(
                wf__node_new(&wf__prim_custom_function, &p, node_in, (int)(n + nouts)));
            if (!outputs[made]) {
                st = wf_last_error();
                break;
            }
        }
    }
    if (st != WF_OK)
        for (size_t j = 0; j < made; j++)
            wf_release(outputs[j]);
    else
        *noutputs = nouts;
    free(node_in);
    wf__release_owned(outs, nouts);
    return st;
}

static void custom_free(void *payload) { rules_release(payload); }

static wf_fn *make_custom(const char *op, wf_fn *fn, wf_fn *vjp, wf_fn *jvp, wf_fn *vmap,
                          bool checkpoint)
{
    if (!fn) {
        wf__error(WF_ERR_NULL_ARGUMENT, "%s: fn is NULL", op);
        return NULL;
    }
    pthread_once(&kernels_once, register_kernels);
    custom_rules *r = wf__calloc(1, sizeof *r);
    if (!r) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        return NULL;
    }
    atomic_init(&r->refcount, 1);
    r->fn = wf_fn_retain(fn);
    r->vjp = wf_fn_retain(vjp);
    r->jvp = wf_fn_retain(jvp);
    r->vmap = wf_fn_retain(vmap);
    r->checkpoint = checkpoint;
    return wf__fn_make(custom_call, r, custom_free);
}

wf_fn *wf_custom_function(wf_fn *fn, wf_fn *vjp, wf_fn *jvp, wf_fn *vmap)
{
    return make_custom("wf_custom_function", fn, vjp, jvp, vmap, false);
}

wf_fn *wf_checkpoint(wf_fn *fn) { return make_custom("wf_checkpoint", fn, NULL, NULL, NULL, true); }

/* ---------------------------------------------------------------- rules */

bool wf__rule_uses_input(const wf_array *node, int input, void *ctx)
{
    if (node->prim != &wf__prim_custom_function)
        return true;
    const custom_fn_params *p = params_of(node);
    const custom_rules *r = p->rules;
    const wf_trace_kind kind = *(const wf_trace_kind *)ctx;
    const bool own = r->checkpoint || (kind == WF_TRACE_JVP ? r->jvp != NULL
                                       : kind == WF_TRACE_VMAP ? r->vmap != NULL
                                                               : r->vjp != NULL);
    return !own || input < p->nprimals;
}

/* Checks a user rule's results: `want` arrays shaped like `like` (NULL
 * entries of `like` are not checked). */
static wf_status check_rule_results(const char *rule, wf_array *const *got, size_t ngot,
                                    wf_array *const *like, size_t want)
{
    if (ngot != want)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_custom_function: the %s rule returned %zu arrays, expected %zu",
                         rule, ngot, want);
    for (size_t i = 0; i < want; i++) {
        if (!like[i] || wf__shape_equal(got[i]->shape, got[i]->ndim, like[i]->shape,
                                        like[i]->ndim))
            continue;
        char sa[256], sb[256];
        return wf__error(WF_ERR_SHAPE,
                         "wf_custom_function: the %s rule's result %zu has shape %s, expected %s",
                         rule, i, wf__shape_str(got[i]->shape, got[i]->ndim, sa, sizeof sa),
                         wf__shape_str(like[i]->shape, like[i]->ndim, sb, sizeof sb));
    }
    return WF_OK;
}

/* The output cotangents with ct at this node's index and zeros elsewhere
 * (vjps are linear in them). */
static wf_status cotangent_list(wf_array *node, wf_array *ct, wf_array **cts)
{
    const custom_fn_params *p = params_of(node);
    for (int j = 0; j < p->noutputs; j++) {
        cts[j] = j == p->index ? ct : wf_zeros_like(node->inputs[p->nprimals + j]);
        if (!cts[j])
            return wf_last_error();
    }
    return WF_OK;
}

static wf_status vjp_custom_fn(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    const custom_fn_params *p = params_of(node);
    const custom_rules *r = p->rules;
    const size_t n = (size_t)p->nprimals, m = (size_t)p->noutputs;
    if (!r->vjp && !r->checkpoint) { /* through fn's own graph */
        cts[n + (size_t)p->index] = ct;
        return WF_OK;
    }
    wf_array *list[3 * 64], *result[64];
    wf_status st = cotangent_list(node, ct, list + n);
    if (st != WF_OK)
        return st;
    if (r->checkpoint) { /* the backward pass runs fn again */
        size_t room = 0;
        st = wf__vjp("wf_checkpoint", r->fn, node->inputs, n, wanted, list + n, m, NULL, &room,
                     result);
        for (size_t i = 0; i < n && st == WF_OK; i++)
            cts[i] = wanted[i] ? result[i] : NULL;
        return st;
    }
    memcpy(list, node->inputs, n * sizeof *list);
    memcpy(list + n + m, node->inputs + n, m * sizeof *list);
    size_t nres = n;
    st = wf_fn_call(r->vjp, list, n + 2 * m, result, &nres);
    if (st == WF_OK)
        st = check_rule_results("vjp", result, nres, node->inputs, n);
    for (size_t i = 0; i < n && st == WF_OK; i++)
        cts[i] = wanted[i] ? result[i] : NULL;
    return st;
}

static wf_status jvp_custom_fn(wf_array *node, wf_array *const *t, wf_array **out)
{
    const custom_fn_params *p = params_of(node);
    const custom_rules *r = p->rules;
    const size_t n = (size_t)p->nprimals, m = (size_t)p->noutputs;
    if (!r->jvp && !r->checkpoint) {
        *out = t[n + (size_t)p->index];
        return WF_OK;
    }
    wf_array *result[64];
    size_t nres = m;
    wf_status st;
    if (r->checkpoint) {
        st = wf__jvp("wf_checkpoint", r->fn, node->inputs, n, t, NULL, result, &nres);
    } else {
        wf_array *list[2 * 64];
        memcpy(list, node->inputs, n * sizeof *list);
        for (size_t i = 0; i < n; i++)
            if (!(list[n + i] = t[i] ? t[i] : wf_zeros_like(node->inputs[i])))
                return wf_last_error();
        st = wf_fn_call(r->jvp, list, 2 * n, result, &nres);
    }
    if (st == WF_OK)
        st = check_rule_results("jvp", result, nres, node->inputs + n, m);
    *out = st == WF_OK ? result[p->index] : NULL;
    return st;
}

static wf_status vmap_custom_fn(wf_array *node, wf_array *const *in, const int *axes,
                                int64_t batch, wf_array **out, int *out_axis)
{
    const custom_fn_params *p = params_of(node);
    const custom_rules *r = p->rules;
    const size_t n = (size_t)p->nprimals, m = (size_t)p->noutputs;
    if (!r->vmap && !r->checkpoint) {
        *out = in[n + (size_t)p->index];
        *out_axis = axes[n + (size_t)p->index];
        return WF_OK;
    }
    wf_array *result[64];
    size_t nres = m;
    wf_status st;
    if (r->checkpoint) {
        st = wf__vmap("wf_checkpoint", r->fn, in, axes, n, NULL, 0, result, &nres);
    } else {
        wf_array *list[64];
        for (size_t i = 0; i < n; i++)
            if (!(list[i] = wf__vmap_materialize(in[i], axes[i], batch)))
                return wf_last_error();
        st = wf_fn_call(r->vmap, list, n, result, &nres);
        if (st == WF_OK && nres != m)
            st = wf__error(WF_ERR_INVALID_ARGUMENT,
                           "wf_custom_function: the vmap rule returned %zu arrays, expected %zu",
                           nres, m);
        const wf_array *want = node;
        wf_array *got = st == WF_OK ? result[p->index] : NULL;
        if (got && (got->ndim != want->ndim + 1 || got->shape[0] != batch ||
                    !wf__shape_equal(got->shape + 1, got->ndim - 1, want->shape, want->ndim)))
            st = wf__error(WF_ERR_SHAPE,
                           "wf_custom_function: the vmap rule's result %d is not batched on "
                           "axis 0 with %lld examples of the output's shape",
                           p->index, (long long)batch);
    }
    *out = st == WF_OK ? result[p->index] : NULL;
    *out_axis = 0;
    return st;
}

const wf_prim_rules wf__rules_custom_function[] = {
    /* the user's rules may read any traced shape */
    {&wf__prim_custom_function, WF_RULES_DIFFERENTIABLE, vjp_custom_fn, jvp_custom_fn,
     vmap_custom_fn, false},
};

const size_t wf__rules_custom_function_count = 1;
