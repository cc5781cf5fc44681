/*
 * Derivatives in some inputs only. The rules of the matmul family, the
 * index and scatter ops, masked_scatter and convolution each skip the
 * cotangents nobody asked for (wf_grad's argnums) and the zero tangents
 * (NULL in wf_jvp). For every input i: the gradient in i alone equals
 * entry i of the gradient in all inputs, and the jvp with only i's tangent
 * (the others NULL) equals the jvp with the others' tangents zero; both
 * computed in float64 (tolerance 1e-12 relative, the sums may associate
 * differently).
 */
#include <math.h>
#include <stdlib.h>

#include "conformance.h"
#include "harness.h"
#include "transforms_util.h"

static double max_rel_diff(wf_array *a, wf_array *b)
{
    double *x = tu_read(a), *y = tu_read(b), worst = INFINITY;
    if (x && y && wf_array_size(a) == wf_array_size(b)) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < wf_array_size(a); i++) {
            num = fmax(num, fabs(x[i] - y[i]));
            den = fmax(den, fabs(y[i]));
        }
        worst = num / (den > 0 ? den : 1);
    }
    free(x), free(y);
    return worst;
}

static void check_case(const tu_case *c)
{
    wf_scope_begin();
    wf_array *in[TU_MAX_IN], *t[TU_MAX_IN], *zero[TU_MAX_IN];
    for (int i = 0; i < c->nin; i++) {
        in[i] = tu_input(c->shapes[i], c->ndims[i], c->lo, c->hi, 40 + (uint32_t)i, false);
        t[i] = tu_input(c->shapes[i], c->ndims[i], -1, 1, 50 + (uint32_t)i, false);
        zero[i] = wf_zeros_like(in[i]);
    }
    wf_array *y = c->build(in);
    if (!CHECK_NOT_NULL(y)) {
        wf_scope_end();
        return;
    }
    wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, 60, false);
    wf_fn *fn = tu_case_fn(c), *loss = tu_weighted_fn(fn, u);
    const int all[TU_MAX_IN] = {0, 1, 2, 3};
    wf_fn *g_all = wf_grad(loss, all, (size_t)c->nin);
    wf_array *every[TU_MAX_IN] = {NULL};
    size_t n = TU_MAX_IN;
    const bool have_all = CHECK_OK(wf_fn_call(g_all, in, (size_t)c->nin, every, &n));
    for (int i = 0; i < c->nin && have_all; i++) {
        wf_fn *g_one = wf_grad(loss, &i, 1);
        wf_array *one = NULL;
        n = 1;
        if (CHECK_OK(wf_fn_call(g_one, in, (size_t)c->nin, &one, &n)) &&
            !CHECK(max_rel_diff(one, every[i]) <= 1e-12))
            printf("      (%s: gradient in input %d alone)\n", c->name, i);
        wf_release(one);
        wf_fn_release(g_one);
        /* jvp: i's tangent alone, NULL or zeros for the others */
        wf_array *sparse[TU_MAX_IN], *dense[TU_MAX_IN], *ts = NULL, *td = NULL;
        for (int j = 0; j < c->nin; j++) {
            sparse[j] = j == i ? t[j] : NULL;
            dense[j] = j == i ? t[j] : zero[j];
        }
        size_t n1 = 1, n2 = 1;
        if (CHECK_OK(wf_jvp(fn, in, (size_t)c->nin, sparse, NULL, &ts, &n1)) &&
            CHECK_OK(wf_jvp(fn, in, (size_t)c->nin, dense, NULL, &td, &n2)) &&
            !CHECK(max_rel_diff(ts, td) <= 1e-12))
            printf("      (%s: tangent of input %d alone)\n", c->name, i);
        wf_release(ts), wf_release(td);
    }
    for (int i = 0; i < c->nin; i++)
        wf_release(every[i]);
    wf_fn_release(g_all), wf_fn_release(loss), wf_fn_release(fn);
    wf_scope_end();
}

static wf_array *idx_i32(wf_array *v) { return wf_astype(v, WF_DTYPE_I32); }

static wf_array *build_gather_mm(wf_array *const *in)
{
    return wf_gather_mm(in[0], in[1], idx_i32(in[2]), idx_i32(in[3]), false);
}

static wf_array *build_segmented_mm(wf_array *const *in)
{
    const double bounds[4] = {0, 2, 1, 5}; /* columns 0..1 and 1..4 */
    const int64_t shape[2] = {2, 2};
    return wf_segmented_mm(in[0], in[1], conf_array(bounds, shape, 2, WF_DTYPE_I32));
}

static wf_array *build_block_masked_mm(wf_array *const *in)
{
    return wf_block_masked_mm(in[0], in[1], 2, in[2], in[3], NULL);
}

static wf_array *build_addmm(wf_array *const *in)
{
    return wf_addmm(in[0], in[1], in[2], 0.5, 2.0);
}

static wf_array *build_masked_scatter(wf_array *const *in)
{
    wf_array *mask = wf_greater(in[2], wf_scalar(0, WF_DTYPE_F64));
    return wf_masked_scatter(in[0], mask, in[1]);
}

static wf_array *build_scatter_add(wf_array *const *in)
{
    return wf_scatter_add(in[0], idx_i32(in[1]), in[2], 0);
}

static wf_array *build_take_along(wf_array *const *in)
{
    return wf_take_along_axis(in[0], idx_i32(in[1]), 1);
}

static wf_array *build_conv1d(wf_array *const *in)
{
    return wf_conv1d(in[0], in[1], 1, 1, 1, 1);
}

static wf_array *build_layer_norm(wf_array *const *in)
{
    return wf_layer_norm(in[0], in[1], in[2], 1e-5);
}

static wf_array *build_rms_norm(wf_array *const *in) { return wf_rms_norm(in[0], in[1], 1e-5); }

static wf_array *build_attention(wf_array *const *in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.5, in[3], false);
}

static wf_array *build_put_along_add(wf_array *const *in)
{
    return wf_put_along_axis(in[0], idx_i32(in[1]), in[2], 1, WF_SCATTER_ADD);
}

static wf_array *build_scatter_max(wf_array *const *in)
{
    wf_array *idx = idx_i32(in[1]);
    const int axis = 0;
    return wf_scatter(in[0], &idx, 1, in[2], &axis, WF_SCATTER_MAX);
}

static wf_array *build_conv2d(wf_array *const *in)
{
    const int64_t stride[2] = {1, 2}, padding[2] = {1, 0};
    return wf_conv2d(in[0], in[1], stride, padding, NULL, 1);
}

static void test_matmul_family(void)
{
    const tu_case g = {"gather_mm", build_gather_mm, 4, {3, 3, 1, 1},
                       {{2, 2, 4}, {2, 4, 3}, {3}, {3}}, 0, 1.99};
    check_case(&g);
    const tu_case s = {"segmented_mm", build_segmented_mm, 2, {2, 2}, {{3, 5}, {5, 2}}, -1, 1};
    check_case(&s);
    const tu_case b = {"block_masked_mm", build_block_masked_mm, 4, {2, 2, 2, 2},
                       {{3, 4}, {4, 5}, {2, 3}, {2, 2}}, -1, 1};
    check_case(&b);
    const tu_case a = {"addmm", build_addmm, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}, -1, 1};
    check_case(&a);
}

static void test_index_and_scatter(void)
{
    const tu_case m = {"masked_scatter", build_masked_scatter, 3, {2, 1, 2},
                       {{3, 4}, {12}, {3, 4}}, -1, 1};
    check_case(&m);
    const tu_case s = {"scatter_add", build_scatter_add, 3, {2, 1, 2},
                       {{3, 4}, {2}, {2, 4}}, 0, 2.99};
    check_case(&s);
    const tu_case t = {"take_along_axis", build_take_along, 2, {2, 2}, {{3, 4}, {3, 2}}, 0, 2.99};
    check_case(&t);
    const tu_case p = {"put_along_axis add", build_put_along_add, 3, {2, 2, 2},
                       {{3, 4}, {3, 2}, {3, 2}}, 0, 2.99};
    check_case(&p);
    const tu_case m2 = {"scatter max", build_scatter_max, 3, {2, 1, 3},
                        {{3, 4}, {2}, {2, 1, 4}}, 0, 2.99};
    check_case(&m2);
}

static void test_convolution(void)
{
    const tu_case c = {"conv1d", build_conv1d, 2, {3, 3}, {{2, 7, 3}, {4, 3, 3}}, -1, 1};
    check_case(&c);
    const tu_case c2 = {"conv2d", build_conv2d, 2, {4, 4}, {{1, 5, 6, 2}, {3, 3, 2, 2}}, -1, 1};
    check_case(&c2);
}

static void test_fast_ops(void)
{
    const tu_case ln = {"layer_norm", build_layer_norm, 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, -1, 1};
    check_case(&ln);
    const tu_case rn = {"rms_norm", build_rms_norm, 2, {2, 1}, {{3, 5}, {5}}, -1, 1};
    check_case(&rn);
    const tu_case at = {"attention", build_attention, 4, {3, 3, 3, 2},
                        {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}, {3, 5}}, -1, 1};
    check_case(&at);
}

int main(void)
{
    RUN_TEST(test_matmul_family);
    RUN_TEST(test_index_and_scatter);
    RUN_TEST(test_convolution);
    RUN_TEST(test_fast_ops);
    return TEST_SUMMARY();
}
