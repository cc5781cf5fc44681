/*
 * Rules of the primitives that are not differentiable in any useful sense:
 * creation and random generation (constants: no inputs), the random
 * primitives that take inputs (bool / index outputs: no gradient, but they
 * batch), and wf_custom kernels, which weft cannot see into.
 */
#include "core/error.h"
#include "prim/custom.h"
#include "prim/fused.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "prim/sibling.h"
#include "prim/random.h"
#include "transforms/rules.h"

/* ---------------------------------------------------------------- random */

static wf_status vmap_categorical(wf_array *node, wf_array *const *in, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *logits = wf__vmap_to_front(in[0], axes[0]);
    wf_random_params p = *(const wf_random_params *)node->params;
    p.axis += 1;
    *out = logits ? wf__rule_node(node->prim, &p, &logits, 1) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* A draw whose key is an input (compile's default-key draws): batched as
 * the primitive of its kind with the key passed along, so the bits match
 * that primitive's vmap rule. The key comes from a compiled call, never
 * from a vmapped argument; a batch of keys is refused. */
static wf_status vmap_keyed(wf_array *node, wf_array *const *in, const int *axes,
                            int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_random_params *p = node->params;
    if (axes[0] != WF_VMAP_NOT_MAPPED)
        return wf__error(WF_ERR_UNSUPPORTED,
                         "vmap: a batch of random keys is not supported (random_keyed)");
    if (p->kind == WF_RANDOM_BERNOULLI) { /* element-wise in p, as bernoulli's rule */
        *out = wf__rule_rebuild(node, in);
        *out_axis = axes[1];
        return wf__rule_result(*out);
    }
    if (p->kind == WF_RANDOM_CATEGORICAL) {
        wf_array *args[2] = {in[0], wf__vmap_to_front(in[1], axes[1])};
        wf_random_params moved = *p;
        moved.axis += 1;
        *out = args[1] ? wf__rule_node(node->prim, &moved, args, 2) : NULL;
        *out_axis = 0;
        return wf__rule_result(*out);
    }
    return wf__error(WF_ERR_INTERNAL, "vmap: random_keyed of kind %d has a batched input",
                     p->kind);
}

/* ---------------------------------------------------------------- unsupported
 *
 * Opaque user kernels, outputs of multi-output primitives and compile's
 * fused kernels: every transform answers WF_ERR_UNSUPPORTED, naming the
 * primitive and why. */

static wf_status unsupported(const wf_array *node, const char *what)
{
    if (node->prim == &wf__prim_custom)
        return wf__error(WF_ERR_UNSUPPORTED,
                         "primitive 'custom' (kernel '%s') has no %s rule: wrap it with "
                         "wf_custom_function",
                         ((const wf_custom_params *)node->params)->name, what);
    if (wf__prim_is_fused(node->prim)) /* a compiled call under a transform replays unfused */
        return wf__error(WF_ERR_UNSUPPORTED,
                         "primitive 'fused' (a compiled function's fused kernel) has no %s "
                         "rule: transform the function, not its fused trace",
                         what);
    return wf__error(WF_ERR_UNSUPPORTED, "primitive '%s' (an output of a multi-output "
                                         "primitive) has no %s rule yet",
                     node->prim->name, what);
}

static wf_status vjp_unsupported(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **cts)
{
    (void)ct;
    (void)wanted;
    (void)cts;
    return unsupported(node, "vjp");
}

static wf_status jvp_unsupported(wf_array *node, wf_array *const *t, wf_array **out)
{
    (void)t;
    (void)out;
    return unsupported(node, "jvp");
}

static wf_status vmap_unsupported(wf_array *node, wf_array *const *in, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis)
{
    (void)in;
    (void)axes;
    (void)batch;
    (void)out;
    (void)out_axis;
    return unsupported(node, "vmap");
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_other[] = {
    /* No inputs: always constants of a trace, no rule ever applies. */
    {&wf__prim_full, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    {&wf__prim_arange, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    {&wf__prim_linspace, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    {&wf__prim_eye, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    /* Reads only its input's shape: zero derivative; a batch fills the
     * batched shape. */
    {&wf__prim_full_like, WF_RULES_ZERO_GRADIENT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     wf__rule_vmap_elementwise, true},
    {&wf__prim_random_uniform, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    {&wf__prim_random_normal, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    {&wf__prim_random_randint, WF_RULES_CONSTANT, NULL, NULL, NULL, false},
    /* Bool / index outputs (MLX builds both from comparisons and argmax,
     * whose gradients are zero). bernoulli is element-wise in p; a batch
     * draws different bits per example (their counters differ). */
    {&wf__prim_random_bernoulli, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero,
     wf__rule_jvp_zero, wf__rule_vmap_elementwise, false},
    {&wf__prim_random_categorical, WF_RULES_NON_FLOAT_OUTPUT, wf__rule_vjp_zero,
     wf__rule_jvp_zero, vmap_categorical, false},
    /* Inputs: an integer key and bernoulli's p or categorical's logits, none
     * with a gradient; the output may be float (uniform, normal). */
    {&wf__prim_random_keyed, WF_RULES_ZERO_GRADIENT, wf__rule_vjp_zero, wf__rule_jvp_zero,
     vmap_keyed, false},
    /* Opaque user kernels: every transform answers WF_ERR_UNSUPPORTED;
     * wf_custom_function gives them rules. */
    {&wf__prim_custom, WF_RULES_UNSUPPORTED, vjp_unsupported, jvp_unsupported,
     vmap_unsupported, false},
    /* Outputs of multi-output primitives: only compile's fused nodes have
     * several, and they live in fused tapes, which no transform replays;
     * rules (every output's cotangent at once) come with the first other. */
    {&wf__prim_sibling, WF_RULES_UNSUPPORTED, vjp_unsupported, jvp_unsupported,
     vmap_unsupported, false},
    /* compile's fused kernels: a compiled function called under a transform
     * replays its unfused trace, so no transform meets one. */
    {&wf__prim_fused, WF_RULES_UNSUPPORTED, vjp_unsupported, jvp_unsupported,
     vmap_unsupported, false},
    {&wf__prim_fused2, WF_RULES_UNSUPPORTED, vjp_unsupported, jvp_unsupported,
     vmap_unsupported, false},
    {&wf__prim_fused3, WF_RULES_UNSUPPORTED, vjp_unsupported, jvp_unsupported,
     vmap_unsupported, false},
    {&wf__prim_fused4, WF_RULES_UNSUPPORTED, vjp_unsupported, jvp_unsupported,
     vmap_unsupported, false},
};

const size_t wf__rules_other_count = sizeof wf__rules_other / sizeof wf__rules_other[0];
