/*
 * Ops through the public API against plain references computed here with
 * loops over doubles: every dtype, broadcasting, transposed and sliced
 * (non-contiguous) inputs, 0-d and empty arrays; and every op's bad inputs
 * (NULL, shapes, axes, dtypes, steps, permutations, overflowing sizes) give
 * NULL with the expected status and a message, after which the library
 * keeps working.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/dtype.h"
#include "conformance.h"
#include "harness.h"

/* ---------------------------------------------------------------- helpers */

/* 0, 1, 2, ... as `dtype` (values kept small so every dtype holds them). */
static wf_array *iota(const int64_t *shape, int ndim, wf_dtype dtype, double scale, double shift)
{
    int64_t n = conf_size(shape, ndim);
    double *v = malloc(((size_t)n + 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i * scale + shift;
    wf_array *a = conf_array(v, shape, ndim, dtype);
    free(v);
    return a;
}

/* Checks shape, dtype and values (relative tolerance, NaN equals NaN). */
static bool check_array(wf_array *a, wf_dtype dtype, const int64_t *shape, int ndim,
                        const double *want, double tol)
{
    if (!CHECK_NOT_NULL(a))
        return false;
    bool ok = CHECK_EQ_INT(wf_array_dtype(a), dtype);
    ok = CHECK_EQ_INT(wf_array_ndim(a), ndim) && ok;
    if (!ok)
        return false;
    for (int d = 0; d < ndim; d++)
        ok = CHECK_EQ_INT(wf_array_shape(a)[d], shape[d]) && ok;
    if (!ok)
        return false;
    double *got = conf_read(a);
    if (!CHECK_NOT_NULL(got))
        return false;
    int64_t n = conf_size(shape, ndim);
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; i++) {
        double t = tol * (fabs(want[i]) > 1 ? fabs(want[i]) : 1);
        if (!CHECK_NEAR(got[i], want[i], t)) {
            printf("      at flat index %lld\n", (long long)i);
            bad++;
        }
    }
    free(got);
    return bad == 0;
}

/* Checks the last error: status and a non-empty message naming the op. */
static void check_error(const void *result, wf_status want, const char *op)
{
    CHECK(result == NULL);
    CHECK_EQ_INT(wf_last_error(), want);
    CHECK(strlen(wf_last_error_message()) > 0);
    if (op)
        CHECK_STR_CONTAINS(wf_last_error_message(), op);
    wf_clear_error();
}

/* The library still computes after an error. */
static void check_still_works(void)
{
    int64_t shape[1] = {3};
    wf_array *a = iota(shape, 1, WF_DTYPE_F32, 1, 1);
    wf_array *s = wf_sum(wf_add(a, a), NULL, 0, false);
    double want[1] = {12};
    check_array(s, WF_DTYPE_F32, NULL, 0, want, 0);
}

/* Every dtype; the first NREAL are the real ones (complex64, last, only
 * goes through creation and astype so far). */
enum { NREAL = WF_DTYPE_COUNT - 1 };
static const wf_dtype all_dtypes[WF_DTYPE_COUNT] = {
    WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I32, WF_DTYPE_I64, WF_DTYPE_F16,
    WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_I8,  WF_DTYPE_I16,
    WF_DTYPE_U16,  WF_DTYPE_U32, WF_DTYPE_U64, WF_DTYPE_C64};

static bool is_int(wf_dtype d) { return wf__dtype_is_integer(d); }
static bool is_float(wf_dtype d) { return wf__dtype_is_float(d); }

/* The low bits of an exact integer (within int64) in integer dtype d, read
 * as two's complement for signed types: integer arithmetic wraps so. */
static double wrap_int(int64_t v, wf_dtype d)
{
    const int bits = 8 * (int)wf_dtype_size(d);
    uint64_t u = (uint64_t)v;
    if (bits < 64)
        u &= (UINT64_C(1) << bits) - 1;
    if (wf__dtype_is_unsigned_int(d))
        return (double)u;
    if (bits == 64)
        return (double)(int64_t)u;
    return (u >> (bits - 1)) ? (double)u - ldexp(1, bits) : (double)u;
}

/* ---------------------------------------------------------------- creation */

static void test_full_zeros_ones(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {2, 3};
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_dtype d = all_dtypes[k];
        wf_array *f = wf_full(shape, 2, 2.5, d);
        CHECK(!wf_array_is_evaluated(f)); /* lazy */
        double want[6];
        for (int i = 0; i < 6; i++)
            want[i] = conf_round_to(2.5, d);
        check_array(f, d, shape, 2, want, 0);
        for (int i = 0; i < 6; i++)
            want[i] = 0;
        check_array(wf_zeros(shape, 2, d), d, shape, 2, want, 0);
        for (int i = 0; i < 6; i++)
            want[i] = 1;
        check_array(wf_ones(shape, 2, d), d, shape, 2, want, 0);
    }
    /* 0-d, empty, saturating and NaN values. */
    double v = -7;
    check_array(wf_full(NULL, 0, -7, WF_DTYPE_I64), WF_DTYPE_I64, NULL, 0, &v, 0);
    const int64_t empty[2] = {0, 3};
    check_array(wf_zeros(empty, 2, WF_DTYPE_F32), WF_DTYPE_F32, empty, 2, NULL, 0);
    const int64_t one[1] = {1};
    v = 255;
    check_array(wf_full(one, 1, 1e9, WF_DTYPE_U8), WF_DTYPE_U8, one, 1, &v, 0);
    v = 0;
    check_array(wf_full(one, 1, NAN, WF_DTYPE_I32), WF_DTYPE_I32, one, 1, &v, 0);
    wf_scope_end();
}

static void test_full_errors(void)
{
    const int64_t huge[2] = {1LL << 40, 1LL << 40};
    check_error(wf_zeros(huge, 2, WF_DTYPE_F32), WF_ERR_OVERFLOW, "wf_full");
    const int64_t negative[2] = {2, -1};
    check_error(wf_ones(negative, 2, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_full");
    const int64_t shape[1] = {2};
    check_error(wf_full(shape, 1, 1, (wf_dtype)42), WF_ERR_DTYPE, "wf_full");
    check_error(wf_full(shape, WF_MAX_NDIM + 1, 1, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT,
                "wf_full");
    check_error(wf_full(shape, -1, 1, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_full");
    check_error(wf_full(NULL, 2, 1, WF_DTYPE_F32), WF_ERR_NULL_ARGUMENT, "wf_full");
    wf_scope_begin();
    check_still_works();
    wf_scope_end();
}

static void test_arange(void)
{
    wf_scope_begin();
    int64_t shape[1];
    double want[8];

    shape[0] = 5;
    for (int i = 0; i < 5; i++)
        want[i] = i;
    check_array(wf_arange(0, 5, 1, WF_DTYPE_F32), WF_DTYPE_F32, shape, 1, want, 0);
    check_array(wf_arange(0, 5, 1, WF_DTYPE_I64), WF_DTYPE_I64, shape, 1, want, 0);

    shape[0] = 3; /* 5, 3, 1 */
    for (int i = 0; i < 3; i++)
        want[i] = 5 - 2 * i;
    check_array(wf_arange(5, 0, -2, WF_DTYPE_I32), WF_DTYPE_I32, shape, 1, want, 0);

    shape[0] = 4; /* ceil(1 / 0.3) = 4 */
    for (int i = 0; i < 4; i++)
        want[i] = 0.3 * i;
    check_array(wf_arange(0, 1, 0.3, WF_DTYPE_F64), WF_DTYPE_F64, shape, 1, want, 1e-15);
    for (int i = 0; i < 4; i++)
        want[i] = conf_round_to(0.3 * i, WF_DTYPE_F16);
    check_array(wf_arange(0, 1, 0.3, WF_DTYPE_F16), WF_DTYPE_F16, shape, 1, want, 0);

    shape[0] = 0;
    check_array(wf_arange(3, 3, 1, WF_DTYPE_F32), WF_DTYPE_F32, shape, 1, want, 0);
    check_array(wf_arange(0, -5, 1, WF_DTYPE_F32), WF_DTYPE_F32, shape, 1, want, 0);

    shape[0] = 600; /* more than one block */
    double *big = malloc(600 * sizeof *big);
    for (int i = 0; i < 600; i++)
        big[i] = -3 + 0.5 * i;
    check_array(wf_arange(-3, 297, 0.5, WF_DTYPE_F32), WF_DTYPE_F32, shape, 1, big, 0);
    free(big);
    wf_scope_end();

    check_error(wf_arange(0, 1, 0, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_arange");
    check_error(wf_arange(0, 1, NAN, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_arange");
    check_error(wf_arange(0, INFINITY, 1, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_arange");
    check_error(wf_arange(0, 1e300, 1e-300, WF_DTYPE_F32), WF_ERR_OVERFLOW, "wf_arange");
    check_error(wf_arange(-1e308, 1e308, 1, WF_DTYPE_F64), WF_ERR_OVERFLOW, "wf_arange");
    check_error(wf_arange(0, 1, 1, WF_DTYPE_COUNT), WF_ERR_DTYPE, "wf_arange");
    wf_scope_begin();
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- astype */

/* Reference cast: integer -> integer wraps, anything else as dtype.c. */
static double ref_cast(double v, wf_dtype from, wf_dtype to)
{
    if ((is_int(from) || from == WF_DTYPE_BOOL) && is_int(to))
        return wrap_int((int64_t)v, to);
    return conf_round_to(v, to);
}

static void test_astype_all_pairs(void)
{
    const double values[8] = {-1.5, 0, 2.75, 300, -70000.25, 1e10, 0.5, 65504};
    const int64_t shape[2] = {2, 4};
    for (int s = 0; s < WF_DTYPE_COUNT; s++) {
        for (int t = 0; t < WF_DTYPE_COUNT; t++) {
            wf_scope_begin();
            wf_dtype sd = all_dtypes[s], td = all_dtypes[t];
            wf_array *a = conf_array(values, shape, 2, sd);
            double in[8], want[8];
            for (int i = 0; i < 8; i++) {
                in[i] = conf_round_to(values[i], sd);
                want[i] = ref_cast(in[i], sd, td);
            }
            if (!check_array(wf_astype(a, td), td, shape, 2, want, 0))
                printf("      astype %s -> %s\n", wf_dtype_name(sd), wf_dtype_name(td));
            /* Through a transposed view: (4, 2). */
            wf_array *at = wf_transpose(a, NULL, 0);
            const int64_t tshape[2] = {4, 2};
            double twant[8];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 2; j++)
                    twant[i * 2 + j] = want[j * 4 + i];
            check_array(wf_astype(at, td), td, tshape, 2, twant, 0);
            wf_scope_end();
        }
    }
    check_error(wf_astype(NULL, WF_DTYPE_F32), WF_ERR_NULL_ARGUMENT, "wf_astype");
    wf_scope_begin();
    const int64_t one[1] = {1};
    wf_array *a = wf_zeros(one, 1, WF_DTYPE_F32);
    check_error(wf_astype(a, (wf_dtype)-1), WF_ERR_DTYPE, "wf_astype");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- add, multiply */

static double ref_binary(double x, double y, bool add, wf_dtype d)
{
    if (d == WF_DTYPE_BOOL)
        return add ? (double)(x != 0 || y != 0) : (double)(x != 0 && y != 0);
    if (is_int(d)) {
        uint64_t ux = (uint64_t)(int64_t)x, uy = (uint64_t)(int64_t)y;
        const uint64_t r = add ? ux + uy : ux * uy;
        return wrap_int((int64_t)r, d);
    }
    if (d == WF_DTYPE_F64)
        return add ? x + y : x * y;
    float r = add ? (float)x + (float)y : (float)x * (float)y;
    return conf_round_to(r, d);
}

/* a (2, 3) op b (3,) broadcast, for every dtype and both ops. */
static void test_binary_every_dtype(void)
{
    const int64_t sa[2] = {2, 3}, sb[1] = {3};
    const double va[6] = {0, 1, 2, 3, 4, 5};
    const double vb[3] = {1, 0, 3};
    for (int k = 0; k < NREAL; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        wf_array *a = conf_array(va, sa, 2, d), *b = conf_array(vb, sb, 1, d);
        double want_add[6], want_mul[6], want_rev[6];
        for (int i = 0; i < 6; i++) {
            double x = conf_round_to(va[i], d), y = conf_round_to(vb[i % 3], d);
            want_add[i] = ref_binary(x, y, true, d);
            want_mul[i] = ref_binary(x, y, false, d);
            want_rev[i] = ref_binary(y, x, true, d);
        }
        check_array(wf_add(a, b), d, sa, 2, want_add, conf_tolerance(d));
        check_array(wf_multiply(a, b), d, sa, 2, want_mul, conf_tolerance(d));
        check_array(wf_add(b, a), d, sa, 2, want_rev, conf_tolerance(d));
        wf_scope_end();
    }
}

static void test_binary_wraparound_and_bool(void)
{
    wf_scope_begin();
    const int64_t one[1] = {1}, two[1] = {2};
    double v;
    wf_array *imax = conf_array((double[]){2147483647}, one, 1, WF_DTYPE_I32);
    wf_array *i1 = conf_array((double[]){1}, one, 1, WF_DTYPE_I32);
    v = -2147483648.0;
    check_array(wf_add(imax, i1), WF_DTYPE_I32, one, 1, &v, 0);
    v = -2; /* (2^31 - 1) * 2 wraps to -2 */
    check_array(wf_multiply(imax, conf_array((double[]){2}, one, 1, WF_DTYPE_I32)),
                WF_DTYPE_I32, one, 1, &v, 0);
    wf_array *u200 = conf_array((double[]){200}, one, 1, WF_DTYPE_U8);
    v = 144; /* 400 mod 256 */
    check_array(wf_add(u200, u200), WF_DTYPE_U8, one, 1, &v, 0);
    wf_array *lmax = conf_array((double[]){9.2233720368547758e18}, one, 1, WF_DTYPE_I64);
    double neg2 = -2; /* INT64_MAX + INT64_MAX wraps to -2 */
    check_array(wf_add(lmax, lmax), WF_DTYPE_I64, one, 1, &neg2, 0);

    wf_array *t = conf_array((double[]){1, 0}, two, 1, WF_DTYPE_BOOL);
    wf_array *f = conf_array((double[]){1, 1}, two, 1, WF_DTYPE_BOOL);
    double orv[2] = {1, 1}, andv[2] = {1, 0};
    check_array(wf_add(t, f), WF_DTYPE_BOOL, two, 1, orv, 0);
    check_array(wf_multiply(t, f), WF_DTYPE_BOOL, two, 1, andv, 0);
    wf_scope_end();
}

static void test_binary_promotion(void)
{
    wf_scope_begin();
    const int64_t s[1] = {3};
    const double v1[3] = {1, 2, 3}, v2[3] = {0.5, 1.5, -2};
    struct {
        wf_dtype a, b, out;
    } cases[] = {
        {WF_DTYPE_I32, WF_DTYPE_F32, WF_DTYPE_F32}, {WF_DTYPE_U8, WF_DTYPE_BOOL, WF_DTYPE_U8},
        {WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32}, {WF_DTYPE_I64, WF_DTYPE_F16, WF_DTYPE_F16},
        {WF_DTYPE_BOOL, WF_DTYPE_F64, WF_DTYPE_F64}, {WF_DTYPE_U8, WF_DTYPE_I64, WF_DTYPE_I64},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        wf_array *a = conf_array(v1, s, 1, cases[c].a), *b = conf_array(v2, s, 1, cases[c].b);
        double want[3];
        for (int i = 0; i < 3; i++) {
            double x = ref_cast(conf_round_to(v1[i], cases[c].a), cases[c].a, cases[c].out);
            double y = ref_cast(conf_round_to(v2[i], cases[c].b), cases[c].b, cases[c].out);
            want[i] = ref_binary(x, y, true, cases[c].out);
        }
        check_array(wf_add(a, b), cases[c].out, s, 1, want, conf_tolerance(cases[c].out));
    }
    wf_scope_end();
}

static void test_binary_layouts(void)
{
    wf_scope_begin();
    /* Transposed a (3, 4) view plus a reversed, stepped slice of b. */
    const int64_t sa[2] = {4, 3}, sb[2] = {3, 8};
    wf_array *a = iota(sa, 2, WF_DTYPE_F32, 1, 0);
    wf_array *at = wf_transpose(a, NULL, 0); /* (3, 4): at[i][j] = a[j][i] = 3j + i */
    wf_array *b = iota(sb, 2, WF_DTYPE_F32, 1, 100);
    /* b[::-1, 7::-2] -> (3, 4): b[2 - i][7 - 2j] = 100 + 8(2 - i) + 7 - 2j */
    wf_array *bs = wf_slice(b, (int64_t[]){INT64_MAX, 7}, (int64_t[]){INT64_MIN, INT64_MIN},
                            (int64_t[]){-1, -2});
    const int64_t so[2] = {3, 4};
    double want[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            want[i * 4 + j] = (3 * j + i) + (100 + 8 * (2 - i) + 7 - 2 * j);
    check_array(wf_add(at, bs), WF_DTYPE_F32, so, 2, want, 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            want[i * 4 + j] = (3 * j + i) * (double)(100 + 8 * (2 - i) + 7 - 2 * j);
    check_array(wf_multiply(at, bs), WF_DTYPE_F32, so, 2, want, 0);

    /* 0-d with (2, 3); (2, 1) with (1, 3); a long row (vector blocks + tail). */
    wf_array *s = wf_scalar(10, WF_DTYPE_I32);
    const int64_t s23[2] = {2, 3}, s21[2] = {2, 1}, s13[2] = {1, 3};
    wf_array *m = iota(s23, 2, WF_DTYPE_I32, 1, 0);
    double w[6];
    for (int i = 0; i < 6; i++)
        w[i] = i + 10;
    check_array(wf_add(s, m), WF_DTYPE_I32, s23, 2, w, 0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            w[i * 3 + j] = i * (10 + j);
    check_array(wf_multiply(iota(s21, 2, WF_DTYPE_I32, 1, 0), iota(s13, 2, WF_DTYPE_I32, 1, 10)),
                WF_DTYPE_I32, s23, 2, w, 0);
    double w0 = 20;
    check_array(wf_add(s, s), WF_DTYPE_I32, NULL, 0, &w0, 0);
    const int64_t long_shape[1] = {1003};
    wf_array *l = iota(long_shape, 1, WF_DTYPE_F64, 0.5, 0);
    double *lw = malloc(1003 * sizeof *lw);
    for (int i = 0; i < 1003; i++)
        lw[i] = 0.5 * i + 10;
    check_array(wf_add(l, s), WF_DTYPE_F64, long_shape, 1, lw, 0);
    free(lw);

    /* Empty with broadcast. */
    const int64_t e03[2] = {0, 3}, e3[1] = {3};
    check_array(wf_add(wf_zeros(e03, 2, WF_DTYPE_F32), wf_ones(e3, 1, WF_DTYPE_F32)),
                WF_DTYPE_F32, e03, 2, NULL, 0);
    wf_scope_end();
}

static void test_binary_errors(void)
{
    wf_scope_begin();
    const int64_t s23[2] = {2, 3}, s4[1] = {4};
    wf_array *a = wf_zeros(s23, 2, WF_DTYPE_F32), *b = wf_zeros(s4, 1, WF_DTYPE_F32);
    check_error(wf_add(a, b), WF_ERR_SHAPE, "wf_add");
    check_error(wf_multiply(b, a), WF_ERR_SHAPE, "wf_multiply");
    check_error(wf_add(NULL, a), WF_ERR_NULL_ARGUMENT, "wf_add");
    check_error(wf_multiply(a, NULL), WF_ERR_NULL_ARGUMENT, "wf_multiply");
    /* A chain keeps the first error. */
    wf_array *chain = wf_exp(wf_multiply(wf_add(a, b), a));
    CHECK(chain == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_add");
    wf_clear_error();
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- exp */

static void test_exp(void)
{
    const int64_t s[2] = {3, 5};
    for (int k = 0; k < NREAL; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        wf_array *a = iota(s, 2, d, 0.5, -3);
        wf_dtype out = is_float(d) ? d : WF_DTYPE_F32;
        double want[15];
        for (int i = 0; i < 15; i++)
            want[i] = conf_round_to(exp(conf_round_to(i * 0.5 - 3, d)), out);
        check_array(wf_exp(a), out, s, 2, want, conf_tolerance(out) + 1e-6);
        /* Transposed input. */
        const int64_t ts[2] = {5, 3};
        double twant[15];
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 3; j++)
                twant[i * 3 + j] = want[j * 5 + i];
        check_array(wf_exp(wf_transpose(a, NULL, 0)), out, ts, 2, twant, conf_tolerance(out) + 1e-6);
        wf_scope_end();
    }
    wf_scope_begin();
    /* Broadcast input (stride 0), long rows, 0-d, empty. */
    const int64_t row[1] = {700}, big[2] = {2, 700};
    wf_array *r = iota(row, 1, WF_DTYPE_F32, 0.01, -3);
    double *w = malloc(1400 * sizeof *w);
    for (int i = 0; i < 1400; i++)
        w[i] = exp((double)(float)((i % 700) * 0.01 - 3));
    check_array(wf_exp(wf_broadcast_to(r, big, 2)), WF_DTYPE_F32, big, 2, w, 2e-6);
    check_array(wf_exp(r), WF_DTYPE_F32, row, 1, w, 2e-6);
    free(w);
    double e1 = exp(1.0);
    check_array(wf_exp(wf_scalar(1, WF_DTYPE_F64)), WF_DTYPE_F64, NULL, 0, &e1, 1e-15);
    const int64_t empty[1] = {0};
    check_array(wf_exp(wf_zeros(empty, 1, WF_DTYPE_BF16)), WF_DTYPE_BF16, empty, 1, NULL, 0);
    wf_scope_end();
    check_error(wf_exp(NULL), WF_ERR_NULL_ARGUMENT, "wf_exp");
}

/* ---------------------------------------------------------------- sum */

/* Reference sum of a row-major (d0, d1, d2) block over a mask of axes. */
static void ref_sum3(const double *x, const int64_t *s, unsigned mask, double *out, int64_t nout)
{
    for (int64_t i = 0; i < nout; i++)
        out[i] = 0;
    for (int64_t i = 0; i < s[0]; i++)
        for (int64_t j = 0; j < s[1]; j++)
            for (int64_t k = 0; k < s[2]; k++) {
                int64_t oi = (mask & 1) ? 0 : i, oj = (mask & 2) ? 0 : j, ok = (mask & 4) ? 0 : k;
                int64_t n1 = (mask & 2) ? 1 : s[1], n2 = (mask & 4) ? 1 : s[2];
                out[(oi * n1 + oj) * n2 + ok] += x[(i * s[1] + j) * s[2] + k];
            }
}

static void test_sum_every_dtype_and_axes(void)
{
    const int64_t s[3] = {2, 3, 4};
    for (int k = 0; k < NREAL; k++) {
        wf_dtype d = all_dtypes[k];
        wf_dtype out = wf__dtype_is_unsigned_int(d) ? (d == WF_DTYPE_U64 ? d : WF_DTYPE_U32)
                       : (d == WF_DTYPE_BOOL || wf__dtype_is_signed_int(d))
                           ? (d == WF_DTYPE_I64 ? d : WF_DTYPE_I32)
                           : d;
        double x[24];
        for (int i = 0; i < 24; i++)
            x[i] = conf_round_to(d == WF_DTYPE_BOOL ? i % 3 == 0 : i * 0.5, d);
        for (unsigned mask = 0; mask < 8; mask++) {
            wf_scope_begin();
            wf_array *a = conf_array(x, s, 3, d);
            int axes[3], naxes = 0;
            int64_t oshape[3], kshape[3];
            int ondim = 0;
            for (int ax = 0; ax < 3; ax++) {
                if (mask & (1u << ax)) {
                    axes[naxes++] = ax - (ax == 2 ? 3 : 0); /* -1 for the last axis */
                    kshape[ax] = 1;
                } else {
                    oshape[ondim++] = s[ax];
                    kshape[ax] = s[ax];
                }
            }
            double want[24];
            ref_sum3(x, s, mask, want, conf_size(oshape, ondim));
            for (int i = 0; i < conf_size(oshape, ondim); i++)
                want[i] = conf_round_to(want[i], out);
            if (!check_array(wf_sum(a, axes, naxes, false), out, oshape, ondim, want,
                             conf_tolerance(out)))
                printf("      sum %s mask %u\n", wf_dtype_name(d), mask);
            check_array(wf_sum(a, axes, naxes, true), out, kshape, 3, want, conf_tolerance(out));
            wf_scope_end();
        }
    }
}

static void test_sum_layouts(void)
{
    wf_scope_begin();
    /* Transposed (5, 4) view of a (4, 5) array, every axis choice. */
    const int64_t s[2] = {4, 5};
    wf_array *a = iota(s, 2, WF_DTYPE_F32, 1, 0);
    wf_array *t = wf_transpose(a, NULL, 0);
    double cols[5] = {0}, rows[4] = {0}, all = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            cols[j] += i * 5 + j;
            rows[i] += i * 5 + j;
            all += i * 5 + j;
        }
    const int64_t s5[1] = {5}, s4[1] = {4};
    check_array(wf_sum(t, (int[]){1}, 1, false), WF_DTYPE_F32, s5, 1, cols, 0);
    check_array(wf_sum(t, (int[]){0}, 1, false), WF_DTYPE_F32, s4, 1, rows, 0);
    check_array(wf_sum(t, NULL, 0, false), WF_DTYPE_F32, NULL, 0, &all, 0);

    /* A reversed, stepped slice: x[::-1, ::2] of (4, 5) -> (4, 3). */
    wf_array *sl = wf_slice(a, (int64_t[]){-1, 0}, (int64_t[]){INT64_MIN, INT64_MAX},
                            (int64_t[]){-1, 2});
    double srow[4] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            srow[i] += (3 - i) * 5 + 2 * j;
    check_array(wf_sum(sl, (int[]){-1}, 1, false), WF_DTYPE_F32, s4, 1, srow, 0);

    /* A broadcast input (stride 0): sum of (3, 4) broadcast of a row. */
    const int64_t r4[1] = {4}, b34[2] = {3, 4};
    wf_array *row = iota(r4, 1, WF_DTYPE_I32, 1, 1);
    double bsum = 3 * (1 + 2 + 3 + 4);
    check_array(wf_sum(wf_broadcast_to(row, b34, 2), NULL, 0, false), WF_DTYPE_I32, NULL, 0,
                &bsum, 0);

    /* Empty reductions give 0; a 0-d sum is the value; no axes converts. */
    const int64_t e[2] = {0, 3}, s3[1] = {3};
    double zeros[3] = {0, 0, 0};
    check_array(wf_sum(wf_ones(e, 2, WF_DTYPE_F32), (int[]){0}, 1, false), WF_DTYPE_F32, s3, 1,
                zeros, 0);
    check_array(wf_sum(wf_ones(e, 2, WF_DTYPE_U8), NULL, 0, false), WF_DTYPE_U32, NULL, 0,
                zeros, 0);
    double seven = 7;
    check_array(wf_sum(wf_scalar(7, WF_DTYPE_I64), NULL, 0, true), WF_DTYPE_I64, NULL, 0,
                &seven, 0);
    double ones3[3] = {1, 1, 1};
    check_array(wf_sum(wf_ones(s3, 1, WF_DTYPE_BOOL), (int[]){0}, 0, false), WF_DTYPE_I32, s3, 1,
                ones3, 0);

    /* Accuracy: a million float32 0.1s. */
    const int64_t n[1] = {1000000};
    double want = 1000000.0 * (double)0.1f;
    check_array(wf_sum(wf_full(n, 1, 0.1, WF_DTYPE_F32), NULL, 0, false), WF_DTYPE_F32, NULL, 0,
                &want, 1e-6);
    /* float16 accumulates in float32: 4096 ones is exact (f16 alone stalls at 2048). */
    const int64_t h[1] = {4096};
    double h_want = 4096;
    check_array(wf_sum(wf_ones(h, 1, WF_DTYPE_F16), NULL, 0, false), WF_DTYPE_F16, NULL, 0,
                &h_want, 0);
    /* u8 sums to uint32 (MLX) without wrapping at 256. */
    double u_want = 255.0 * 4096;
    check_array(wf_sum(wf_full(h, 1, 255, WF_DTYPE_U8), NULL, 0, false), WF_DTYPE_U32, NULL, 0,
                &u_want, 0);
    wf_scope_end();
}

static void test_sum_errors(void)
{
    wf_scope_begin();
    const int64_t s[2] = {2, 3};
    wf_array *a = wf_zeros(s, 2, WF_DTYPE_F32);
    check_error(wf_sum(a, (int[]){2}, 1, false), WF_ERR_AXIS, "wf_sum");
    check_error(wf_sum(a, (int[]){-3}, 1, false), WF_ERR_AXIS, "wf_sum");
    check_error(wf_sum(a, (int[]){0, -2}, 2, false), WF_ERR_AXIS, "wf_sum");
    check_error(wf_sum(a, NULL, 1, false), WF_ERR_NULL_ARGUMENT, "wf_sum");
    check_error(wf_sum(a, (int[]){0}, -1, false), WF_ERR_INVALID_ARGUMENT, "wf_sum");
    check_error(wf_sum(NULL, NULL, 0, false), WF_ERR_NULL_ARGUMENT, "wf_sum");
    check_error(wf_sum(wf_scalar(1, WF_DTYPE_F32), (int[]){0}, 1, false), WF_ERR_AXIS, "wf_sum");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- reshape */

static void test_reshape(void)
{
    wf_scope_begin();
    const int64_t s[2] = {2, 6};
    wf_array *a = iota(s, 2, WF_DTYPE_I32, 1, 0);
    double want[12];
    for (int i = 0; i < 12; i++)
        want[i] = i;
    const int64_t s34[2] = {3, 4}, s12[1] = {12}, s232[3] = {2, 3, 2};
    wf_array *r = wf_reshape(a, (int64_t[]){3, -1}, 2);
    check_array(r, WF_DTYPE_I32, s34, 2, want, 0);
    CHECK(r->buffer == a->buffer); /* a view of the contiguous input */
    check_array(wf_reshape(a, (int64_t[]){-1}, 1), WF_DTYPE_I32, s12, 1, want, 0);
    check_array(wf_reshape(a, s232, 3), WF_DTYPE_I32, s232, 3, want, 0);

    /* A transposed input is copied: (6, 2) -> (12,). */
    wf_array *t = wf_transpose(a, NULL, 0);
    double tw[12];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 2; j++)
            tw[i * 2 + j] = j * 6 + i;
    wf_array *tr = wf_reshape(t, s12, 1);
    check_array(tr, WF_DTYPE_I32, s12, 1, tw, 0);
    CHECK(tr->buffer != a->buffer);

    /* 0-d <-> (1, 1), empty with -1. */
    double five = 5;
    const int64_t s11[2] = {1, 1};
    wf_array *one = wf_reshape(wf_scalar(5, WF_DTYPE_F64), s11, 2);
    check_array(one, WF_DTYPE_F64, s11, 2, &five, 0);
    check_array(wf_reshape(one, NULL, 0), WF_DTYPE_F64, NULL, 0, &five, 0);
    const int64_t e[2] = {0, 4}, e3[3] = {2, 0, 3};
    check_array(wf_reshape(wf_zeros(e, 2, WF_DTYPE_F32), e3, 3), WF_DTYPE_F32, e3, 3, NULL, 0);

    check_error(wf_reshape(a, (int64_t[]){5, 2}, 2), WF_ERR_SHAPE, "wf_reshape");
    check_error(wf_reshape(a, (int64_t[]){-1, -1}, 2), WF_ERR_INVALID_ARGUMENT, "wf_reshape");
    check_error(wf_reshape(a, (int64_t[]){-1, 5}, 2), WF_ERR_SHAPE, "wf_reshape");
    check_error(wf_reshape(a, (int64_t[]){-2, -6}, 2), WF_ERR_INVALID_ARGUMENT, "wf_reshape");
    check_error(wf_reshape(wf_zeros(e, 2, WF_DTYPE_F32), (int64_t[]){0, -1}, 2), WF_ERR_SHAPE,
                "wf_reshape");
    check_error(wf_reshape(a, (int64_t[]){1LL << 40, 1LL << 40}, 2), WF_ERR_OVERFLOW,
                "wf_reshape");
    check_error(wf_reshape(a, NULL, 2), WF_ERR_NULL_ARGUMENT, "wf_reshape");
    check_error(wf_reshape(a, s, WF_MAX_NDIM + 1), WF_ERR_INVALID_ARGUMENT, "wf_reshape");
    check_error(wf_reshape(NULL, s, 2), WF_ERR_NULL_ARGUMENT, "wf_reshape");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- transpose */

static void test_transpose(void)
{
    wf_scope_begin();
    const int64_t s[3] = {2, 3, 4};
    wf_array *a = iota(s, 3, WF_DTYPE_F64, 1, 0);
    /* perm (1, -1, 0): out[j][k][i] = a[i][j][k] */
    const int64_t so[3] = {3, 4, 2};
    double want[24];
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++)
                want[(j * 4 + k) * 2 + i] = (i * 3 + j) * 4 + k;
    wf_array *t = wf_transpose(a, (int[]){1, -1, 0}, 3);
    check_array(t, WF_DTYPE_F64, so, 3, want, 0);
    CHECK(t->buffer == a->buffer); /* a view */
    /* NULL reverses; transposing twice gives the original. */
    const int64_t sr[3] = {4, 3, 2};
    double rw[24];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                rw[(k * 3 + j) * 2 + i] = (i * 3 + j) * 4 + k;
    wf_array *r = wf_transpose(a, NULL, 0);
    check_array(r, WF_DTYPE_F64, sr, 3, rw, 0);
    double id[24];
    for (int i = 0; i < 24; i++)
        id[i] = i;
    check_array(wf_transpose(r, NULL, 3), WF_DTYPE_F64, s, 3, id, 0);
    double pi = 3.5;
    check_array(wf_transpose(wf_scalar(3.5, WF_DTYPE_F32), NULL, 0), WF_DTYPE_F32, NULL, 0, &pi,
                0);

    check_error(wf_transpose(a, (int[]){0, 1}, 2), WF_ERR_AXIS, "wf_transpose");
    check_error(wf_transpose(a, (int[]){0, 1, 3}, 3), WF_ERR_AXIS, "wf_transpose");
    check_error(wf_transpose(a, (int[]){0, 1, -4}, 3), WF_ERR_AXIS, "wf_transpose");
    check_error(wf_transpose(a, (int[]){0, 2, -1}, 3), WF_ERR_AXIS, "wf_transpose");
    check_error(wf_transpose(a, NULL, 2), WF_ERR_NULL_ARGUMENT, "wf_transpose");
    check_error(wf_transpose(NULL, NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_transpose");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- broadcast_to */

static void test_broadcast_to(void)
{
    wf_scope_begin();
    const int64_t s3[1] = {3}, s21[2] = {2, 1}, s23[2] = {2, 3}, s423[3] = {4, 2, 3};
    wf_array *row = iota(s3, 1, WF_DTYPE_BF16, 1, 1);
    double w[24];
    for (int i = 0; i < 24; i++)
        w[i] = 1 + i % 3;
    wf_array *b = wf_broadcast_to(row, s423, 3);
    check_array(b, WF_DTYPE_BF16, s423, 3, w, 0);
    CHECK(b->buffer == row->buffer);
    wf_array *col = iota(s21, 2, WF_DTYPE_U8, 1, 7);
    for (int i = 0; i < 6; i++)
        w[i] = 7 + i / 3;
    check_array(wf_broadcast_to(col, s23, 2), WF_DTYPE_U8, s23, 2, w, 0);
    for (int i = 0; i < 6; i++)
        w[i] = 9;
    check_array(wf_broadcast_to(wf_scalar(9, WF_DTYPE_I64), s23, 2), WF_DTYPE_I64, s23, 2, w, 0);
    const int64_t e[2] = {0, 3};
    check_array(wf_broadcast_to(row, e, 2), WF_DTYPE_BF16, e, 2, NULL, 0);
    /* A broadcast of a transposed view. */
    const int64_t s32[2] = {3, 2}, s232[3] = {2, 3, 2};
    wf_array *m = wf_transpose(iota(s23, 2, WF_DTYPE_F32, 1, 0), NULL, 0);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                w[(r * 3 + i) * 2 + j] = j * 3 + i;
    check_array(wf_broadcast_to(m, s232, 3), WF_DTYPE_F32, s232, 3, w, 0);
    (void)s32;

    const int64_t s4[1] = {4};
    check_error(wf_broadcast_to(row, s4, 1), WF_ERR_SHAPE, "wf_broadcast_to");
    check_error(wf_broadcast_to(wf_zeros(s23, 2, WF_DTYPE_F32), s3, 1), WF_ERR_SHAPE,
                "wf_broadcast_to");
    check_error(wf_broadcast_to(row, (int64_t[]){-1, 3}, 2), WF_ERR_INVALID_ARGUMENT,
                "wf_broadcast_to");
    check_error(wf_broadcast_to(row, (int64_t[]){1LL << 40, 1LL << 40, 3}, 3), WF_ERR_OVERFLOW,
                "wf_broadcast_to");
    check_error(wf_broadcast_to(row, NULL, 2), WF_ERR_NULL_ARGUMENT, "wf_broadcast_to");
    check_error(wf_broadcast_to(NULL, s3, 1), WF_ERR_NULL_ARGUMENT, "wf_broadcast_to");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- slice */

/* Python's slice semantics for one axis, written independently. */
static void ref_slice(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *idx,
                      int64_t *count)
{
    *count = 0;
    if (step > 0) {
        int64_t lo = start < 0 ? (start + n < 0 ? 0 : start + n) : (start > n ? n : start);
        int64_t hi = stop < 0 ? (stop + n < 0 ? 0 : stop + n) : (stop > n ? n : stop);
        for (int64_t i = lo; i < hi; i += step)
            idx[(*count)++] = i;
    } else {
        int64_t hi = start < 0 ? (start + n < 0 ? -1 : start + n) : (start >= n ? n - 1 : start);
        int64_t lo = stop < 0 ? (stop + n < 0 ? -1 : stop + n) : (stop >= n ? n - 1 : stop);
        for (int64_t i = hi; i > lo; i += step)
            idx[(*count)++] = i;
    }
}

static void test_slice_cases(void)
{
    const int64_t s[2] = {5, 6};
    const int64_t cases[][6] = {
        /* start0, stop0, step0, start1, stop1, step1 */
        {0, 5, 1, 0, 6, 1},   {1, 4, 1, 2, 6, 2},     {-1, -6, -1, 5, 0, -2},
        {-100, 100, 2, 100, -100, -1}, {3, 1, 1, 0, 6, 3}, {INT64_MIN, INT64_MAX, 3, -2, -1, 1},
        {INT64_MAX, INT64_MIN, -2, 4, 4, 1}, {2, 3, 1, 1, 6, 100}, {4, -7, -1, -1, -100, -4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        wf_scope_begin();
        wf_array *a = iota(s, 2, WF_DTYPE_I64, 1, 0);
        const int64_t *p = cases[c];
        int64_t i0[8], i1[8], n0, n1;
        ref_slice(5, p[0], p[1], p[2], i0, &n0);
        ref_slice(6, p[3], p[4], p[5], i1, &n1);
        double want[64];
        for (int64_t i = 0; i < n0; i++)
            for (int64_t j = 0; j < n1; j++)
                want[i * n1 + j] = (double)(i0[i] * 6 + i1[j]);
        const int64_t so[2] = {n0, n1};
        wf_array *sl = wf_slice(a, (int64_t[]){p[0], p[3]}, (int64_t[]){p[1], p[4]},
                                (int64_t[]){p[2], p[5]});
        if (!check_array(sl, WF_DTYPE_I64, so, 2, want, 0))
            printf("      slice case %zu\n", c);
        if (sl)
            CHECK(sl->buffer == a->buffer);
        wf_scope_end();
    }
}

static void test_slice_of_slice_and_errors(void)
{
    wf_scope_begin();
    const int64_t s[1] = {10};
    wf_array *a = iota(s, 1, WF_DTYPE_F16, 1, 0);
    /* a[::-1][1:8:3] = 8, 5, 2 */
    wf_array *r = wf_slice(a, (int64_t[]){INT64_MAX}, (int64_t[]){INT64_MIN}, (int64_t[]){-1});
    wf_array *rr = wf_slice(r, (int64_t[]){1}, (int64_t[]){8}, (int64_t[]){3});
    const int64_t s3[1] = {3};
    double w[3] = {8, 5, 2};
    check_array(rr, WF_DTYPE_F16, s3, 1, w, 0);
    /* Slicing a 0-d array needs no arrays at all. */
    double v = 4;
    check_array(wf_slice(wf_scalar(4, WF_DTYPE_F32), NULL, NULL, NULL), WF_DTYPE_F32, NULL, 0, &v,
                0);

    check_error(wf_slice(a, (int64_t[]){0}, (int64_t[]){5}, (int64_t[]){0}),
                WF_ERR_INVALID_ARGUMENT, "wf_slice");
    check_error(wf_slice(a, NULL, (int64_t[]){5}, (int64_t[]){1}), WF_ERR_NULL_ARGUMENT,
                "wf_slice");
    check_error(wf_slice(a, (int64_t[]){0}, NULL, (int64_t[]){1}), WF_ERR_NULL_ARGUMENT,
                "wf_slice");
    check_error(wf_slice(a, (int64_t[]){0}, (int64_t[]){5}, NULL), WF_ERR_NULL_ARGUMENT,
                "wf_slice");
    check_error(wf_slice(NULL, (int64_t[]){0}, (int64_t[]){5}, (int64_t[]){1}),
                WF_ERR_NULL_ARGUMENT, "wf_slice");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- matmul */

static void ref_matmul(const double *a, const double *b, int64_t m, int64_t k, int64_t n,
                       double *out)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            out[i * n + j] = s;
        }
}

static void test_matmul_dtypes(void)
{
    const wf_dtype dts[4] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_BF16};
    const int64_t sa[2] = {3, 4}, sb[2] = {4, 5}, so[2] = {3, 5};
    for (int k = 0; k < 4; k++) {
        wf_scope_begin();
        wf_dtype d = dts[k];
        double va[12], vb[20], want[15];
        for (int i = 0; i < 12; i++)
            va[i] = conf_round_to(i * 0.25 - 1, d);
        for (int i = 0; i < 20; i++)
            vb[i] = conf_round_to(2 - i * 0.125, d);
        ref_matmul(va, vb, 3, 4, 5, want);
        for (int i = 0; i < 15; i++)
            want[i] = conf_round_to(want[i], d);
        wf_array *a = conf_array(va, sa, 2, d), *b = conf_array(vb, sb, 2, d);
        check_array(wf_matmul(a, b), d, so, 2, want, conf_tolerance(d));
        wf_scope_end();
    }
}

static void test_matmul_layouts(void)
{
    wf_scope_begin();
    /* A transposed operand (BLAS reads it in place with CblasTrans) and a
     * stepped slice (copied first). */
    const int64_t s43[2] = {4, 3}, s58[2] = {5, 8}, so[2] = {3, 4};
    double va[12], vb[40];
    for (int i = 0; i < 12; i++)
        va[i] = i - 5;
    for (int i = 0; i < 40; i++)
        vb[i] = (i % 7) - 3;
    wf_array *a = conf_array(va, s43, 2, WF_DTYPE_F32); /* (4, 3) */
    wf_array *at = wf_transpose(a, NULL, 0);              /* (3, 4) */
    wf_array *b = conf_array(vb, s58, 2, WF_DTYPE_F32);
    /* b[1:, ::2] -> (4, 4) */
    wf_array *bs = wf_slice(b, (int64_t[]){1, 0}, (int64_t[]){5, 8}, (int64_t[]){1, 2});
    double ta[12], sbv[16], want[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ta[i * 4 + j] = va[j * 3 + i];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            sbv[i * 4 + j] = vb[(i + 1) * 8 + 2 * j];
    ref_matmul(ta, sbv, 3, 4, 4, want);
    check_array(wf_matmul(at, bs), WF_DTYPE_F32, so, 2, want, 1e-6);
    /* Both transposed: (a^T)^T-style product bs^T @ at^T = (at @ bs)^T. */
    double want_t[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            want_t[i * 3 + j] = want[j * 4 + i];
    const int64_t so_t[2] = {4, 3};
    check_array(wf_matmul(wf_transpose(bs, NULL, 0), a), WF_DTYPE_F32, so_t, 2, want_t, 1e-6);
    /* A row-sliced operand with a leading dimension larger than its width. */
    wf_array *bw = wf_slice(b, (int64_t[]){0, 2}, (int64_t[]){3, 6}, (int64_t[]){1, 1}); /* (3,4) */
    double vbw[12], want_w[16];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            vbw[i * 4 + j] = vb[i * 8 + 2 + j];
    ref_matmul(va, vbw, 4, 3, 4, want_w);
    const int64_t s44[2] = {4, 4};
    check_array(wf_matmul(a, bw), WF_DTYPE_F32, s44, 2, want_w, 1e-6);
    wf_scope_end();
}

static void test_matmul_vectors_and_empty(void)
{
    wf_scope_begin();
    const int64_t s3[1] = {3}, s32[2] = {3, 2}, s23[2] = {2, 3}, s2[1] = {2};
    wf_array *v = iota(s3, 1, WF_DTYPE_F64, 1, 1);  /* 1 2 3 */
    wf_array *m = iota(s32, 2, WF_DTYPE_F64, 1, 0); /* [[0 1] [2 3] [4 5]] */
    double vm[2] = {0 + 4 + 12, 1 + 6 + 15};
    check_array(wf_matmul(v, m), WF_DTYPE_F64, s2, 1, vm, 0);
    wf_array *mt = iota(s23, 2, WF_DTYPE_F64, 1, 0); /* [[0 1 2] [3 4 5]] */
    double mv[2] = {0 + 2 + 6, 3 + 8 + 15};
    check_array(wf_matmul(mt, v), WF_DTYPE_F64, s2, 1, mv, 0);
    double dot = 14;
    check_array(wf_matmul(v, v), WF_DTYPE_F64, NULL, 0, &dot, 0);
    /* Mixed int32 @ float32 promotes to float32. */
    wf_array *vi = iota(s3, 1, WF_DTYPE_I32, 1, 1);
    check_array(wf_matmul(vi, wf_astype(v, WF_DTYPE_F32)), WF_DTYPE_F32, NULL, 0, &dot, 0);

    /* k == 0 gives zeros; m == 0 or n == 0 gives empty. */
    const int64_t s20[2] = {2, 0}, s03[2] = {0, 3}, s02[2] = {0, 2};
    double z[6] = {0};
    check_array(wf_matmul(wf_ones(s20, 2, WF_DTYPE_F32), wf_ones(s03, 2, WF_DTYPE_F32)),
                WF_DTYPE_F32, s23, 2, z, 0);
    check_array(wf_matmul(wf_ones(s03, 2, WF_DTYPE_F16), wf_ones(s32, 2, WF_DTYPE_F16)),
                WF_DTYPE_F16, s02, 2, NULL, 0);
    wf_scope_end();
}

static void test_matmul_errors(void)
{
    wf_scope_begin();
    const int64_t s34[2] = {3, 4}, s52[2] = {5, 2}, s234[3] = {2, 3, 4}, s4[1] = {4};
    wf_array *a = wf_ones(s34, 2, WF_DTYPE_F32);
    check_error(wf_matmul(a, wf_ones(s52, 2, WF_DTYPE_F32)), WF_ERR_SHAPE, "wf_matmul");
    check_error(wf_matmul(wf_ones(s34, 2, WF_DTYPE_I32), wf_ones(s4, 1, WF_DTYPE_I32)),
                WF_ERR_DTYPE, "wf_matmul");
    check_error(wf_matmul(wf_ones(s34, 2, WF_DTYPE_BOOL), wf_ones(s4, 1, WF_DTYPE_U8)),
                WF_ERR_DTYPE, "wf_matmul");
    const int64_t s345[3] = {3, 4, 5};
    check_error(wf_matmul(wf_ones(s234, 3, WF_DTYPE_F32), wf_ones(s345, 3, WF_DTYPE_F32)),
                WF_ERR_SHAPE, "wf_matmul"); /* batch 2 vs 3 does not broadcast */
    check_error(wf_matmul(wf_scalar(1, WF_DTYPE_F32), a), WF_ERR_SHAPE, "wf_matmul");
    check_error(wf_matmul(NULL, a), WF_ERR_NULL_ARGUMENT, "wf_matmul");
    check_error(wf_matmul(a, NULL), WF_ERR_NULL_ARGUMENT, "wf_matmul");
    check_still_works();
    wf_scope_end();
}

/* ---------------------------------------------------------------- misc */

/* Views share data with their base; an expression over views of views is
 * right, and evaluating the same node twice runs its kernel once. */
static void test_chain_and_views(void)
{
    wf_scope_begin();
    const int64_t s[2] = {4, 4};
    wf_array *a = iota(s, 2, WF_DTYPE_F32, 1, 0);
    wf_array *t = wf_transpose(a, NULL, 0);
    wf_array *y = wf_sum(wf_multiply(wf_add(a, t), wf_scalar(0.5, WF_DTYPE_F32)), (int[]){0}, 1,
                         true);
    double want[4] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            want[j] += 0.5 * ((i * 4 + j) + (j * 4 + i));
    const int64_t so[2] = {1, 4};
    check_array(y, WF_DTYPE_F32, so, 2, want, 0);
    uint64_t before = wf__kernels_run();
    CHECK_OK(wf_eval(&y, 1));
    CHECK_EQ_INT(wf__kernels_run(), before);
    /* wf_array_data gives a contiguous copy of a strided view. */
    const float *data;
    CHECK_OK(wf_array_data(t, (const void **)&data));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            CHECK_NEAR(data[i * 4 + j], j * 4 + i, 0);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_full_zeros_ones);
    RUN_TEST(test_full_errors);
    RUN_TEST(test_arange);
    RUN_TEST(test_astype_all_pairs);
    RUN_TEST(test_binary_every_dtype);
    RUN_TEST(test_binary_wraparound_and_bool);
    RUN_TEST(test_binary_promotion);
    RUN_TEST(test_binary_layouts);
    RUN_TEST(test_binary_errors);
    RUN_TEST(test_exp);
    RUN_TEST(test_sum_every_dtype_and_axes);
    RUN_TEST(test_sum_layouts);
    RUN_TEST(test_sum_errors);
    RUN_TEST(test_reshape);
    RUN_TEST(test_transpose);
    RUN_TEST(test_broadcast_to);
    RUN_TEST(test_slice_cases);
    RUN_TEST(test_slice_of_slice_and_errors);
    RUN_TEST(test_matmul_dtypes);
    RUN_TEST(test_matmul_layouts);
    RUN_TEST(test_matmul_vectors_and_empty);
    RUN_TEST(test_matmul_errors);
    RUN_TEST(test_chain_and_views);
    return TEST_SUMMARY();
}
