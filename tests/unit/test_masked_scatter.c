/*
 * wf_masked_scatter against a loop reference written here: every dtype,
 * masks over all of a's dims or its leading ones, sources with and without
 * a rows dim (a scalar fills every selected element), strided inputs, a
 * large mask that crosses the kernel's chunks, empty arrays; errors at
 * construction (mask not bool, shapes) and at evaluation (a source too
 * small), after which the library still computes; vjp / jvp against finite
 * differences in float64, vmap against per-example results (each example
 * takes its own source), and a compiled call whose mask changes between
 * calls of one trace.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "transforms_util.h"

static const wf_dtype all_dtypes[] = {WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I32,
                                      WF_DTYPE_I64,  WF_DTYPE_F16, WF_DTYPE_BF16,
                                      WF_DTYPE_F32,  WF_DTYPE_F64, WF_DTYPE_I16};

/* Pseudo-random 0/1 values, about `percent` percent ones. */
static double *mask_values(int64_t n, int percent, uint32_t seed)
{
    double *m = malloc(((size_t)n + 1) * sizeof *m);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        m[i] = (int)((s >> 8) % 100) < percent ? 1 : 0;
    }
    return m;
}

/* The reference: a (n_a elements) where mask (n_mask entries, each over a
 * slice of `slice` elements of a) is true takes src[0], src[1], ... */
static double *ref_masked_scatter(const double *a, int64_t n_a, const double *mask,
                                  int64_t n_mask, const double *src)
{
    double *out = malloc(((size_t)n_a + 1) * sizeof *out);
    memcpy(out, a, (size_t)n_a * sizeof *out);
    const int64_t slice = n_mask > 0 ? n_a / n_mask : 0;
    int64_t next = 0;
    for (int64_t m = 0; m < n_mask; m++)
        if (mask[m] != 0)
            for (int64_t s = 0; s < slice; s++)
                out[m * slice + s] = src[next++];
    return out;
}

static int64_t count_true(const double *mask, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++)
        c += mask[i] != 0;
    return c;
}

/* One case: a of `shape`, a mask over its first mask_ndim dims, a source
 * of (selected rows, remaining dims) plus `extra` rows (ignored). */
static void check_case(wf_dtype dtype, const int64_t *shape, int ndim, int mask_ndim, int extra,
                       bool strided, uint32_t seed)
{
    const int64_t n = conf_size(shape, ndim), n_mask = conf_size(shape, mask_ndim);
    const int64_t slice = conf_size(shape + mask_ndim, ndim - mask_ndim);
    double *av = conf_integer_values(n, dtype, seed);
    double *mv = mask_values(n_mask, 40, seed + 1);
    const int64_t rows = count_true(mv, n_mask) + extra;
    int64_t src_shape[WF_MAX_NDIM];
    src_shape[0] = rows;
    memcpy(src_shape + 1, shape + mask_ndim, (size_t)(ndim - mask_ndim) * sizeof *shape);
    double *sv = conf_integer_values(rows * slice, dtype, seed + 2);
    wf_array *a = strided ? conf_strided(av, shape, ndim, dtype) : conf_array(av, shape, ndim, dtype);
    wf_array *mask = strided ? conf_strided(mv, shape, mask_ndim, WF_DTYPE_BOOL)
                             : conf_array(mv, shape, mask_ndim, WF_DTYPE_BOOL);
    wf_array *src = conf_array(sv, src_shape, 1 + ndim - mask_ndim, dtype);
    double *want = ref_masked_scatter(av, n, mv, n_mask, sv);
    if (!conf_check(wf_masked_scatter(a, mask, src), dtype, shape, ndim, want, 0))
        printf("      (%s, rank %d, mask rank %d, strided %d)\n", wf_dtype_name(dtype), ndim,
               mask_ndim, strided);
    free(want);
    wf_release(a);
    wf_release(mask);
    wf_release(src);
    free(av);
    free(mv);
    free(sv);
}

static void test_every_dtype_and_mask_rank(void)
{
    const int64_t shape[3] = {3, 4, 5};
    for (size_t t = 0; t < sizeof all_dtypes / sizeof all_dtypes[0]; t++)
        for (int mask_ndim = 0; mask_ndim <= 3; mask_ndim++)
            for (int strided = 0; strided < 2; strided++)
                check_case(all_dtypes[t], shape, 3, mask_ndim, mask_ndim % 2 ? 2 : 0, strided,
                           (uint32_t)(t * 10 + (size_t)mask_ndim));
}

/* Sources without a rows dim, or with dims that broadcast. */
static void test_source_shapes(void)
{
    const int64_t shape[2] = {2, 3};
    const double av[6] = {0, 0, 0, 1, 1, 1};
    wf_array *a = conf_array(av, shape, 2, WF_DTYPE_F32);
    const double mv[2] = {1, 0};
    const int64_t two = 2;
    wf_array *rows_mask = conf_array(mv, &two, 1, WF_DTYPE_BOOL);
    /* a (3,) source is one row, repeated for every selected row */
    const double sv[3] = {2, 3, 4};
    const int64_t three = 3;
    wf_array *row = conf_array(sv, &three, 1, WF_DTYPE_F32);
    const double want_row[6] = {2, 3, 4, 1, 1, 1};
    conf_check(wf_masked_scatter(a, rows_mask, row), WF_DTYPE_F32, shape, 2, want_row, 0);
    /* a scalar (here an int, converted) fills every selected element */
    wf_array *seven = wf_scalar(7, WF_DTYPE_I32);
    const double want_seven[6] = {7, 7, 7, 1, 1, 1};
    conf_check(wf_masked_scatter(a, rows_mask, seven), WF_DTYPE_F32, shape, 2, want_seven, 0);
    /* (rows, 1) broadcasts along the slice */
    const int64_t col_shape[2] = {2, 1};
    const double cv[2] = {5, 6};
    wf_array *col = conf_array(cv, col_shape, 2, WF_DTYPE_F32);
    const double want_col[6] = {5, 5, 5, 1, 1, 1};
    conf_check(wf_masked_scatter(a, rows_mask, col), WF_DTYPE_F32, shape, 2, want_col, 0);
    /* a full mask with a scalar source */
    const double fm[6] = {0, 1, 0, 1, 1, 0};
    wf_array *full_mask = conf_array(fm, shape, 2, WF_DTYPE_BOOL);
    const double want_full[6] = {0, 7, 0, 7, 7, 1};
    conf_check(wf_masked_scatter(a, full_mask, seven), WF_DTYPE_F32, shape, 2, want_full, 0);
    wf_release(full_mask);
    wf_release(col);
    wf_release(seven);
    wf_release(row);
    wf_release(rows_mask);
    wf_release(a);
}

static void test_large_and_empty(void)
{
#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    const int64_t big[2] = {3, 20000};
#else
    const int64_t big[2] = {7, 300000};
#endif
    check_case(WF_DTYPE_F32, big, 2, 2, 5, false, 91);
    check_case(WF_DTYPE_I64, big, 2, 1, 0, false, 92);
    const int64_t empty[2] = {0, 4};
    check_case(WF_DTYPE_F32, empty, 2, 2, 0, false, 93);
    check_case(WF_DTYPE_F32, empty, 2, 1, 3, false, 94);
    /* nothing selected: an empty source is enough */
    const int64_t shape[2] = {2, 2};
    wf_array *a = wf_ones(shape, 2, WF_DTYPE_F32);
    wf_array *none = wf_zeros(shape, 2, WF_DTYPE_BOOL);
    const int64_t zero = 0;
    wf_array *src = wf_zeros(&zero, 1, WF_DTYPE_F32);
    const double ones[4] = {1, 1, 1, 1};
    conf_check(wf_masked_scatter(a, none, src), WF_DTYPE_F32, shape, 2, ones, 0);
    wf_release(src);
    wf_release(none);
    wf_release(a);
}

static void test_errors(void)
{
    const int64_t shape[2] = {2, 3}, three = 3, four = 4;
    wf_array *a = wf_zeros(shape, 2, WF_DTYPE_F32);
    wf_array *int_mask = wf_ones(shape, 2, WF_DTYPE_I32);
    wf_array *src = wf_ones(&three, 1, WF_DTYPE_F32);
    conf_check_error(wf_masked_scatter(a, int_mask, src), WF_ERR_DTYPE, "wf_masked_scatter");
    wf_array *wrong = wf_ones(&four, 1, WF_DTYPE_BOOL);
    conf_check_error(wf_masked_scatter(a, wrong, src), WF_ERR_SHAPE, "wf_masked_scatter");
    /* a mask of a's trailing dims is not a leading-dims mask */
    wf_array *trailing = wf_ones(&three, 1, WF_DTYPE_BOOL);
    conf_check_error(wf_masked_scatter(a, trailing, src), WF_ERR_SHAPE, "wf_masked_scatter");
    wf_array *mask = wf_ones(shape, 2, WF_DTYPE_BOOL);
    wf_array *src2d = wf_ones(shape, 2, WF_DTYPE_F32);
    conf_check_error(wf_masked_scatter(a, mask, src2d), WF_ERR_SHAPE, "wf_masked_scatter");
    conf_check_error(wf_masked_scatter(a, NULL, src), WF_ERR_NULL_ARGUMENT, NULL);
    /* six selected, three given: the evaluation fails, never reads past */
    wf_array *short_out = wf_masked_scatter(a, mask, src);
    if (CHECK_NOT_NULL(short_out)) {
        CHECK_STATUS(wf_eval(&short_out, 1), WF_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(wf_last_error_message(), "selects 6 elements but the source has only 3");
        wf_clear_error();
        /* a dependent fails the same way */
        wf_array *next = wf_add(short_out, short_out);
        CHECK_STATUS(wf_eval(&next, 1), WF_ERR_INVALID_ARGUMENT);
        wf_clear_error();
        wf_release(next);
    }
    wf_release(short_out);
    /* the library still computes: the same op with enough source */
    const int64_t six_n = 6;
    wf_array *six = wf_ones(&six_n, 1, WF_DTYPE_F32);
    const double ones[6] = {1, 1, 1, 1, 1, 1};
    conf_check(wf_masked_scatter(a, mask, six), WF_DTYPE_F32, shape, 2, ones, 0);
    wf_release(six);
    wf_release(src2d);
    wf_release(mask);
    wf_release(trailing);
    wf_release(wrong);
    wf_release(src);
    wf_release(int_mask);
    wf_release(a);
}

/* ---------------------------------------------------------------- compile */

static wf_status masked_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_masked_scatter(in[0], in[1], in[2]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_compiled_mask_changes(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {4, 6}, k = 24;
    double av[24], sv[24];
    for (int i = 0; i < 24; i++) {
        av[i] = i;
        sv[i] = -1 - i;
    }
    wf_array *a = conf_array(av, shape, 2, WF_DTYPE_F32);
    wf_array *src = conf_array(sv, &k, 1, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(masked_call, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    for (int call = 0; call < 3; call++) {
        double *mv = mask_values(24, 20 + 30 * call, 7 + (uint32_t)call);
        wf_array *mask = conf_array(mv, shape, 2, WF_DTYPE_BOOL);
        wf_array *in[3] = {a, mask, src}, *out = NULL;
        size_t nout = 1;
        double *want = ref_masked_scatter(av, 24, mv, 24, sv);
        if (CHECK_OK(wf_fn_call(cf, in, 3, &out, &nout)))
            conf_check(out, WF_DTYPE_F32, shape, 2, want, 0);
        free(want);
        free(mv);
    }
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cf, &s));
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, 2);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_scope_end();
}

/* ---------------------------------------------------------------- transforms */

/* a = in[0], source in[1], mask: the sign of in[2] (all of a's dims, or
 * its leading ones). A source bigger than needed: unused elements get a
 * zero gradient, which the finite differences check too. */
static wf_array *build_masked(wf_array *const *in)
{
    wf_array *zero = wf_scalar(0, WF_DTYPE_F64);
    wf_array *mask = wf_greater(in[2], zero);
    wf_array *out = wf_masked_scatter(in[0], mask, in[1]);
    wf_release(mask);
    wf_release(zero);
    return out;
}

static void test_transforms(void)
{
    const tu_case full = {"masked_scatter full mask", build_masked, 3, {2, 1, 2},
                          {{3, 4}, {12}, {3, 4}}, -1, 1};
    tu_check_case(&full, true);
    const tu_case rows = {"masked_scatter row mask", build_masked, 3, {2, 2, 1},
                          {{3, 4}, {3, 4}, {3}}, -1, 1};
    tu_check_case(&rows, true);
}

int main(void)
{
    RUN_TEST(test_every_dtype_and_mask_rank);
    RUN_TEST(test_source_shapes);
    RUN_TEST(test_large_and_empty);
    RUN_TEST(test_errors);
    RUN_TEST(test_compiled_mask_changes);
    RUN_TEST(test_transforms);
    return TEST_SUMMARY();
}
