/*
 * wf_searchsorted against a linear-scan reference written here (NumPy's
 * order: NaN after every number): every orderable dtype, both sides, ties,
 * values below / above / equal to the ends, NaN in the sequence and the
 * values, strided and broadcast inputs, empty sequences and values, mixed
 * dtypes (promoted, not truncated), complex64 in NumPy's order (NaN parts
 * included), vmap over the values, and the errors.
 */
#include <math.h>
#include <stdlib.h>

#include "conformance.h"
#include "harness.h"

static const wf_dtype dtypes[] = {WF_DTYPE_BOOL, WF_DTYPE_I8,  WF_DTYPE_U8,  WF_DTYPE_I16,
                                  WF_DTYPE_U16,  WF_DTYPE_I32, WF_DTYPE_U32, WF_DTYPE_I64,
                                  WF_DTYPE_U64,  WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32,
                                  WF_DTYPE_F64};

/* x orders before y: x < y, or y is NaN and x is not. */
static bool before(double x, double y) { return x < y || (isnan(y) && !isnan(x)); }

static uint32_t ref_position(const double *s, int64_t n, double v, bool right)
{
    int64_t i = 0;
    while (i < n && (right ? !before(v, s[i]) : before(s[i], v)))
        i++;
    return (uint32_t)i;
}

static int by_order(const void *pa, const void *pb)
{
    const double a = *(const double *)pa, b = *(const double *)pb;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* positions of `values` (shape vshape) in the sorted `seq` against the reference. */
static void check_search(wf_array *seq_arr, const double *seq, int64_t n, wf_array *val_arr,
                         const double *values, int64_t nv, bool right, const char *what)
{
    wf_array *pos = wf_searchsorted(seq_arr, val_arr, right);
    if (!CHECK_NOT_NULL(pos) || !CHECK_EQ_INT(wf_array_dtype(pos), WF_DTYPE_U32) ||
        !CHECK_EQ_INT(wf_array_size(pos), nv)) {
        printf("      (%s: %s)\n", what, wf_last_error_message());
        wf_clear_error();
        return;
    }
    uint32_t *got = malloc((size_t)(nv + 1) * sizeof *got);
    if (CHECK_OK(wf_array_copy_to(pos, got, (size_t)nv * sizeof *got)))
        for (int64_t i = 0; i < nv; i++)
            if (!CHECK_EQ_INT(got[i], ref_position(seq, n, values[i], right))) {
                printf("      (%s, right=%d, value %g)\n", what, right, values[i]);
                break;
            }
    free(got);
    wf_release(pos);
}

static void test_every_dtype(void)
{
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
        wf_scope_begin();
        const wf_dtype d = dtypes[t];
        const bool is_float = d == WF_DTYPE_F16 || d == WF_DTYPE_BF16 || d == WF_DTYPE_F32 ||
                              d == WF_DTYPE_F64;
        const bool is_unsigned = d == WF_DTYPE_U8 || d == WF_DTYPE_U16 || d == WF_DTYPE_U32 ||
                                 d == WF_DTYPE_U64 || d == WF_DTYPE_BOOL;
        const int64_t n = 37, nv = 60;
        double *seq = conf_values(n, is_unsigned ? 0 : -20, 20, 7 + (uint32_t)t);
        double *values = conf_values(nv, is_unsigned ? 0 : -25, 25, 11 + (uint32_t)t);
        for (int64_t i = 0; i < n; i++)
            seq[i] = d == WF_DTYPE_BOOL ? (double)(i > n / 2) : conf_round_to(floor(seq[i]), d);
        for (int64_t i = 0; i < nv; i++)
            values[i] = d == WF_DTYPE_BOOL ? (double)(i % 2) : conf_round_to(floor(values[i]), d);
        if (is_float) {
            seq[n - 1] = NAN;       /* NaN sorts last */
            values[3] = NAN;
            values[4] = -INFINITY;
            values[5] = INFINITY;
        }
        qsort(seq, (size_t)n, sizeof *seq, by_order);
        values[0] = seq[0];     /* equal to the ends */
        values[1] = seq[n - 2];
        const int64_t vshape[2] = {6, 10};
        wf_array *s = conf_array(seq, &n, 1, d), *ss = conf_strided(seq, &n, 1, d);
        wf_array *v = conf_array(values, vshape, 2, d), *vs = conf_strided(values, vshape, 2, d);
        for (int right = 0; right < 2; right++) {
            check_search(s, seq, n, v, values, nv, right, wf_dtype_name(d));
            /* a strided sequence and transposed values: the transposed
             * view's logical order is the same as `values` */
            check_search(ss, seq, n, vs, values, nv, right, "strided");
        }
        free(seq);
        free(values);
        wf_scope_end();
    }
}

static void test_edges_and_mixed_dtypes(void)
{
    wf_scope_begin();
    const double seq[4] = {1, 3, 4, 7}, probe[3] = {4.5, 0, 8};
    const int64_t four = 4, three = 3, zero = 0;
    /* 4.5 is promoted (float32), not truncated to 4: it goes after the 4 */
    check_search(conf_array(seq, &four, 1, WF_DTYPE_I32), seq, 4,
                 conf_array(probe, &three, 1, WF_DTYPE_F32), probe, 3, false, "promoted");
    /* an empty sequence puts everything at 0; empty values give an empty result */
    wf_array *empty = wf_zeros(&zero, 1, WF_DTYPE_F32);
    check_search(empty, seq, 0, conf_array(probe, &three, 1, WF_DTYPE_F32), probe, 3, true,
                 "empty sequence");
    wf_array *none = wf_searchsorted(conf_array(seq, &four, 1, WF_DTYPE_F32), empty, false);
    CHECK_OK(wf_eval(&none, 1));
    CHECK_EQ_INT(wf_array_size(none), 0);
    /* 0-d values, and a broadcast view read in its logical order */
    wf_array *scalar = wf_scalar(3, WF_DTYPE_F32);
    check_search(conf_array(seq, &four, 1, WF_DTYPE_F32), seq, 4, scalar, (double[]){3}, 1, true,
                 "0-d");
    CHECK_EQ_INT(wf_array_ndim(wf_searchsorted(conf_array(seq, &four, 1, WF_DTYPE_F32), scalar,
                                               false)),
                 0);
    const int64_t wide[2] = {2, 3};
    const double spread[6] = {4.5, 0, 8, 4.5, 0, 8};
    check_search(conf_array(seq, &four, 1, WF_DTYPE_F32), seq, 4,
                 wf_broadcast_to(conf_array(probe, &three, 1, WF_DTYPE_F32), wide, 2), spread, 6,
                 false, "broadcast");
    /* errors: a sequence that is not 1-d, NULL */
    const int64_t square[2] = {2, 2};
    CHECK_NULL_WITH(wf_searchsorted(wf_zeros(square, 2, WF_DTYPE_F32), scalar, false),
                    WF_ERR_SHAPE);
    CHECK_NULL_WITH(wf_searchsorted(wf_scalar(1, WF_DTYPE_F32), scalar, false), WF_ERR_SHAPE);
    CHECK_NULL_WITH(wf_searchsorted(NULL, scalar, false), WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    wf_scope_end();
}

/* f(sorted, values) = searchsorted(sorted, values), for vmap. */
static wf_status search_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)nin;
    out[0] = wf_searchsorted(in[0], in[1], false); /* no scope open: the body's own */
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* complex64 in NumPy's order, by rank: values without NaN, then R + NaN j,
 * then NaN + R j, then NaN + NaN j; lexicographic within the first class,
 * by the part that is a number within the next two. */
static double complex_rank(float re, float im, int part)
{
    const int nan_re = isnan(re), nan_im = isnan(im);
    const int cls = nan_re ? 2 + nan_im : nan_im;
    const double key[4][2] = {{re, im}, {re, 0}, {im, 0}, {0, 0}};
    return part < 0 ? cls : key[cls][part];
}

static bool complex_before(const float *x, const float *y)
{
    for (int part = -1; part < 2; part++) {
        const double a = complex_rank(x[0], x[1], part), b = complex_rank(y[0], y[1], part);
        if (a != b)
            return a < b;
    }
    return false;
}

static void test_complex(void)
{
    const float q = NAN;
    /* sorted in that order, with ties and both zeros */
    const float seq[][2] = {{-2, 5}, {-0.0f, 1}, {0, 1}, {0, 3}, {1, -1}, {1, -1},
                            {-1, q}, {4, q},     {q, -3}, {q, 2}, {q, q}};
    const float probe[][2] = {{-3, 0}, {0, 1}, {-0.0f, 1}, {0, 2}, {1, -1}, {1, 0}, {9, 9},
                              {0, q},  {4, q}, {q, 0},     {q, 2}, {q, q},  {q, 9}};
    const int64_t n = sizeof seq / sizeof seq[0], nv = sizeof probe / sizeof probe[0];
    wf_array *a = wf_array_from_data(seq, &n, 1, WF_DTYPE_C64);
    wf_array *v = wf_array_from_data(probe, &nv, 1, WF_DTYPE_C64);
    for (int right = 0; right < 2; right++) {
        wf_array *pos = wf_searchsorted(a, v, right);
        uint32_t got[sizeof probe / sizeof probe[0]];
        if (!CHECK_NOT_NULL(pos) || !CHECK_OK(wf_array_copy_to(pos, got, sizeof got)))
            break;
        for (int64_t i = 0; i < nv; i++) {
            int64_t want = 0;
            while (want < n && (right ? !complex_before(probe[i], seq[want])
                                      : complex_before(seq[want], probe[i])))
                want++;
            if (!CHECK_EQ_INT(got[i], want))
                printf("      (right=%d, probe %lld)\n", right, (long long)i);
        }
        wf_release(pos);
    }
    wf_release(v);
    wf_release(a);
}

static void test_vmap(void)
{
    wf_scope_begin();
    const double seq[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int64_t eight = 8, vshape[2] = {3, 5};
    double *values = conf_values(15, -1, 9, 5);
    wf_array *s = conf_array(seq, &eight, 1, WF_DTYPE_F32);
    wf_array *v = conf_array(values, vshape, 2, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(search_body, NULL, NULL);
    wf_fn *over_values = wf_vmap(f, (int[]){WF_VMAP_NOT_MAPPED, 1}, 2, (int[]){0}, 1);
    wf_array *in[2] = {s, v}, *out[1] = {NULL};
    size_t n = 1;
    if (CHECK_OK(wf_fn_call(over_values, in, 2, out, &n))) {
        /* mapped over axis 1 of (3, 5), stacked at 0: the transpose's positions */
        wf_array *want = wf_transpose(wf_searchsorted(s, v, false), (int[]){1, 0}, 2);
        uint32_t got[15], expect[15];
        if (CHECK_OK(wf_array_copy_to(out[0], got, sizeof got)) &&
            CHECK_OK(wf_array_copy_to(want, expect, sizeof expect)))
            for (int i = 0; i < 15; i++)
                CHECK_EQ_INT(got[i], expect[i]);
        wf_release(out[0]);
    }
    wf_fn *over_sorted = wf_vmap(f, (int[]){0, WF_VMAP_NOT_MAPPED}, 2, NULL, 0);
    const int64_t square[2] = {2, 4};
    wf_array *bad[2] = {conf_array(seq, square, 2, WF_DTYPE_F32), v};
    n = 1;
    CHECK_STATUS(wf_fn_call(over_sorted, bad, 2, out, &n), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    wf_fn_release(over_sorted);
    wf_fn_release(over_values);
    wf_fn_release(f);
    free(values);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_every_dtype);
    RUN_TEST(test_edges_and_mixed_dtypes);
    RUN_TEST(test_complex);
    RUN_TEST(test_vmap);
    return TEST_SUMMARY();
}
