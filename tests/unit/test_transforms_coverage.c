/*
 * Every primitive has its transform rules: a vjp, a jvp and a vmap rule,
 * unless it is on one of the explicit lists below (constants, which have no
 * inputs to differentiate or batch, and opaque kernels, which answer
 * WF_ERR_UNSUPPORTED naming themselves). Zero-gradient and non-float-output
 * primitives have rules too (zero ones), and are listed so a primitive
 * cannot slip into those kinds unnoticed.
 */
#include "harness.h"
#include "prim/binary.h"
#include "prim/custom.h"
#include "prim/linalg.h"
#include "prim/prims.h"
#include "prim/random.h"
#include "prim/reduce.h"
#include "prim/registry.h"
#include "prim/shape.h"
#include "prim/search.h"
#include "prim/sort.h"
#include "prim/fused.h"
#include "prim/distributed.h"
#include "prim/sibling.h"
#include "prim/unary.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"

/* ---------------------------------------------------------------- every primitive */

/* Every primitive weft has: the built-in registry, plus custom_function,
 * which src/transforms defines. */
static const wf_prim_def *const *all_primitives(size_t *count)
{
    static const wf_prim_def *all[256];
    size_t n = 0;
    const wf_prim_def *const *builtin = wf__prim_registry(&n);
    for (size_t i = 0; i < n && i < 255; i++)
        all[i] = builtin[i];
    all[n] = &wf__prim_custom_function;
    *count = n + 1;
    return all;
}

/* ---------------------------------------------------------------- the explicit lists */

/* No inputs: always constants of a trace (creation and generation). */
static const wf_prim_def *const constants[] = {
    &wf__prim_full,           &wf__prim_arange,         &wf__prim_linspace,
    &wf__prim_eye,            &wf__prim_random_uniform, &wf__prim_random_normal,
    &wf__prim_random_randint,
};

/* Every transform answers WF_ERR_UNSUPPORTED naming these:
 *  - custom: weft cannot see into a user kernel (wf_custom_function gives it
 *    rules);
 *  - sibling: an output of a multi-output primitive. Only compile's fused
 *    nodes have several outputs yet (fused tapes only, see below); their
 *    rules (taking every output's cotangent at once) come with the first
 *    other;
 *  - fused: compile's fused element-wise programs live only in fused tapes,
 *    which are never replayed under a transform (a compiled function called
 *    under a transform replays its unfused tape). */
static const wf_prim_def *const unsupported[] = {&wf__prim_custom, &wf__prim_sibling,
                                                 &wf__prim_fused, &wf__prim_fused2,
                                                 &wf__prim_fused3, &wf__prim_fused4};

/* Float outputs with a zero derivative wherever one exists (as MLX):
 * rounding, sign, floor division; stop_gradient by definition; random draws
 * with their key as an input (compile's default-key draws); recv, whose
 * one optional input (recv_like's) only orders it. */
static const wf_prim_def *const zero_gradient[] = {
    &wf__prim_sign, &wf__prim_floor,        &wf__prim_ceil,
    &wf__prim_round, &wf__prim_floor_divide, &wf__prim_stop_gradient,
    &wf__prim_random_keyed, &wf__prim_view, &wf__prim_full_like,
    &wf__prim_recv, &wf__prim_size_ratio,
};

/* Bool or integer outputs: no cotangent or tangent ever reaches them. */
static const wf_prim_def *const non_float_output[] = {
    &wf__prim_logical_not, &wf__prim_isnan,         &wf__prim_isinf,
    &wf__prim_isfinite,    &wf__prim_equal,         &wf__prim_not_equal,
    &wf__prim_less,        &wf__prim_less_equal,    &wf__prim_greater,
    &wf__prim_greater_equal, &wf__prim_logical_and, &wf__prim_logical_or,
    &wf__prim_all,         &wf__prim_any,           &wf__prim_argmax,
    &wf__prim_argmin,      &wf__prim_random_bernoulli, &wf__prim_random_categorical,
    &wf__prim_bitwise_and, &wf__prim_bitwise_or,    &wf__prim_bitwise_xor,
    &wf__prim_left_shift,  &wf__prim_right_shift,
    &wf__prim_argsort,     &wf__prim_argpartition,  &wf__prim_argtopk,
    &wf__prim_searchsorted,
};

static bool listed(const wf_prim_def *p, const wf_prim_def *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == p)
            return true;
    return false;
}

#define LISTED(p, list) listed(p, list, sizeof list / sizeof list[0])

static void test_every_primitive_has_rules(void)
{
    size_t n;
    const wf_prim_def *const *prims = all_primitives(&n);
    int missing = 0;
    for (size_t i = 0; i < n; i++) {
        const wf_prim_def *p = prims[i];
        const wf_prim_rules *r = wf__rules_find(p);
        if (!r) {
            printf("    '%s' has no entry in the rules table\n", p->name);
            missing++;
            continue;
        }
        const bool complete = r->vjp && r->jvp && r->vmap;
        switch (r->kind) {
        case WF_RULES_DIFFERENTIABLE:
            if (!complete)
                printf("    '%s' lacks%s%s%s\n", p->name, r->vjp ? "" : " vjp",
                       r->jvp ? "" : " jvp", r->vmap ? "" : " vmap");
            missing += !complete;
            CHECK(!LISTED(p, constants) && !LISTED(p, unsupported) && !LISTED(p, zero_gradient) &&
                  !LISTED(p, non_float_output));
            break;
        case WF_RULES_ZERO_GRADIENT:
            CHECK(complete);
            if (!CHECK(LISTED(p, zero_gradient)))
                printf("    '%s' is zero-gradient but not listed\n", p->name);
            break;
        case WF_RULES_NON_FLOAT_OUTPUT:
            CHECK(complete);
            if (!CHECK(LISTED(p, non_float_output)))
                printf("    '%s' has a non-float output but is not listed\n", p->name);
            break;
        case WF_RULES_CONSTANT:
            if (!CHECK(LISTED(p, constants)))
                printf("    '%s' is a constant but not listed\n", p->name);
            break;
        case WF_RULES_UNSUPPORTED:
            CHECK(complete); /* rules that answer WF_ERR_UNSUPPORTED */
            if (!CHECK(LISTED(p, unsupported)))
                printf("    '%s' is unsupported but not listed\n", p->name);
            break;
        }
    }
    CHECK_EQ_INT(missing, 0);
}

/* The table holds nothing but known primitives, each once. */
static void test_table_matches_primitives(void)
{
    size_t n, nrules;
    const wf_prim_def *const *prims = all_primitives(&n);
    const wf_prim_rules *const *rules = wf__rules_all(&nrules);
    CHECK_EQ_INT(nrules, n);
    for (size_t i = 0; i < nrules; i++) {
        if (!CHECK(listed(rules[i]->prim, prims, n)))
            printf("    '%s' has rules but is not in the primitive list\n", rules[i]->prim->name);
        for (size_t j = 0; j < i; j++)
            CHECK(rules[j]->prim != rules[i]->prim);
    }
}

/* What "unsupported" means for the user: each transform names the kernel. */
static wf_status noop_kernel(void *payload, const wf_custom_call *call)
{
    (void)payload;
    (void)call;
    return WF_OK;
}

static wf_status opaque_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_custom("blackbox", noop_kernel, NULL, NULL, in, 1, wf_array_shape(in[0]), 1,
                       WF_DTYPE_F32);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_unsupported_names_itself(void)
{
    const float v[2] = {1, 2};
    const int64_t two = 2;
    wf_array *x = wf_array_from_data(v, &two, 1, WF_DTYPE_F32), *r = NULL;
    wf_fn *f = wf_fn_new(opaque_body, NULL, NULL);
    CHECK_STATUS(wf_vjp(f, &x, 1, &x, 1, NULL, &r), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "blackbox");
    size_t n = 1;
    CHECK_STATUS(wf_jvp(f, &x, 1, &x, NULL, &r, &n), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "blackbox");
    wf_fn *vf = wf_vmap(f, NULL, 0, NULL, 0);
    const int64_t shape[2] = {1, 2};
    wf_array *xb = wf_reshape(x, shape, 2);
    n = 1;
    CHECK_STATUS(wf_fn_call(vf, &xb, 1, &r, &n), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "blackbox");
    wf_clear_error();
    wf_release(xb);
    wf_fn_release(vf);
    wf_fn_release(f);
    wf_release(x);
}

int main(void)
{
    RUN_TEST(test_every_primitive_has_rules);
    RUN_TEST(test_table_matches_primitives);
    RUN_TEST(test_unsupported_names_itself);
    return TEST_SUMMARY();
}
