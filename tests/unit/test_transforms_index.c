/*
 * vmap of take, take_along_axis and scatter_add (src/transforms/
 * rules_index.c) with the indices batched, alone or with the array (and
 * the updates), on the first and on an inner axis, against the op run per
 * example and stacked (tu_check_vmap). The indices come from float inputs
 * in [0, 3) truncated to int32, so every mix of batched inputs draws its
 * own valid indices.
 */
#include "conformance.h"
#include "harness.h"
#include "transforms_util.h"

static wf_array *int_indices(wf_array *v) { return wf_astype(v, WF_DTYPE_I32); }

static wf_array *build_take0(wf_array *const *in)
{
    return wf_take(in[0], int_indices(in[1]), 0);
}

static wf_array *build_take1(wf_array *const *in)
{
    return wf_take(in[0], int_indices(in[1]), 1);
}

static wf_array *build_along0(wf_array *const *in)
{
    return wf_take_along_axis(in[0], int_indices(in[1]), 0);
}

static wf_array *build_along1(wf_array *const *in)
{
    return wf_take_along_axis(in[0], int_indices(in[1]), 1);
}

static wf_array *build_scatter_add0(wf_array *const *in)
{
    return wf_scatter_add(in[0], int_indices(in[1]), in[2], 0);
}

static wf_array *build_scatter_add1(wf_array *const *in)
{
    return wf_scatter_add(in[0], int_indices(in[1]), in[2], 1);
}

static void test_take_vmap(void)
{
    /* (3, 4) rows picked by (2, 2) indices; (4, 3) columns by (2,) */
    const tu_case t0 = {"take axis 0", build_take0, 2, {2, 2}, {{3, 4}, {2, 2}}, 0, 2.99};
    tu_check_case(&t0, false);
    const tu_case t1 = {"take axis 1", build_take1, 2, {2, 1}, {{4, 3}, {2}}, 0, 2.99};
    tu_check_case(&t1, false);
}

static void test_take_along_axis_vmap(void)
{
    const tu_case a0 = {"take_along_axis 0", build_along0, 2, {2, 2}, {{3, 4}, {2, 4}}, 0, 2.99};
    tu_check_case(&a0, false);
    const tu_case a1 = {"take_along_axis 1", build_along1, 2, {2, 2}, {{3, 4}, {3, 2}}, 0, 2.99};
    tu_check_case(&a1, false);
}

static void test_scatter_add_vmap(void)
{
    const tu_case s0 = {"scatter_add 0", build_scatter_add0, 3, {2, 1, 2},
                        {{3, 4}, {2}, {2, 4}}, 0, 2.99};
    tu_check_case(&s0, false);
    const tu_case s1 = {"scatter_add 1", build_scatter_add1, 3, {2, 1, 2},
                        {{4, 3}, {2}, {4, 2}}, 0, 2.99};
    tu_check_case(&s1, false);
}

int main(void)
{
    RUN_TEST(test_take_vmap);
    RUN_TEST(test_take_along_axis_vmap);
    RUN_TEST(test_scatter_add_vmap);
    return TEST_SUMMARY();
}
