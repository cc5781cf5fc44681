/*
 * Unary element-wise ops through the public API against plain references
 * computed here with doubles: every dtype, strided and broadcast (stride-0)
 * inputs, 0-d and empty arrays, NaN/inf/signed zeros, large arrays (the
 * parallel path), and every op's bad inputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "prim/unary.h"

enum kind { FLOATF, NEG, KEEP, ROUNDF, PRED, IDENT };

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_rsqrt(double x) { return 1.0 / sqrt(x); }
static double ref_square(double x) { return x * x; }
static double ref_recip(double x) { return 1.0 / x; }
static double ref_neg(double x) { return -x; }
static double ref_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }
static double ref_not(double x) { return x == 0 ? 1 : 0; }
static double ref_isnan(double x) { return isnan(x) ? 1 : 0; }
static double ref_isinf(double x) { return isinf(x) ? 1 : 0; }
static double ref_isfinite(double x) { return isfinite(x) ? 1 : 0; }
static double ref_ident(double x) { return x; }
static double ref_round(double x) { return nearbyint(x); } /* default mode: half even */
static double ref_erfinv(double x)
{
    /* bisection on erf: slow but simple and exact to double precision */
    if (isnan(x) || x < -1 || x > 1)
        return NAN;
    if (x == 1 || x == -1)
        return x * INFINITY;
    double lo = -10, hi = 10;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        /* erf(mid) < x; near +-1 through erfc, which keeps the digits */
        bool below = x > 0.5 ? erfc(mid) > 1.0 - x : x < -0.5 ? erfc(-mid) < 1.0 + x : erf(mid) < x;
        if (below)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

typedef struct unary_case {
    const char *name;
    wf_array *(*op)(wf_array *);
    double (*ref)(double);
    enum kind kind;
    double lo, hi; /* test domain */
} unary_case;

static const unary_case cases[] = {
    {"wf_exp", wf_exp, exp, FLOATF, -10, 10},
    {"wf_negative", wf_negative, ref_neg, NEG, -100, 100},
    {"wf_abs", wf_abs, fabs, KEEP, -100, 100},
    {"wf_sign", wf_sign, ref_sign, KEEP, -3, 3},
    {"wf_expm1", wf_expm1, expm1, FLOATF, -10, 10},
    {"wf_log", wf_log, log, FLOATF, 0.01, 100},
    {"wf_log1p", wf_log1p, log1p, FLOATF, -0.9, 100},
    {"wf_log2", wf_log2, log2, FLOATF, 0.01, 100},
    {"wf_sqrt", wf_sqrt, sqrt, FLOATF, 0, 100},
    {"wf_rsqrt", wf_rsqrt, ref_rsqrt, FLOATF, 0.01, 100},
    {"wf_square", wf_square, ref_square, KEEP, -100, 100},
    {"wf_reciprocal", wf_reciprocal, ref_recip, FLOATF, 0.5, 100},
    {"wf_sin", wf_sin, sin, FLOATF, -10, 10},
    {"wf_cos", wf_cos, cos, FLOATF, -10, 10},
    {"wf_tan", wf_tan, tan, FLOATF, -1.4, 1.4},
    {"wf_tanh", wf_tanh, tanh, FLOATF, -5, 5},
    {"wf_sinh", wf_sinh, sinh, FLOATF, -5, 5},
    {"wf_cosh", wf_cosh, cosh, FLOATF, -5, 5},
    {"wf_arcsin", wf_arcsin, asin, FLOATF, -1, 1},
    {"wf_arccos", wf_arccos, acos, FLOATF, -1, 1},
    {"wf_arctan", wf_arctan, atan, FLOATF, -10, 10},
    {"wf_sigmoid", wf_sigmoid, ref_sigmoid, FLOATF, -20, 20},
    {"wf_erf", wf_erf, erf, FLOATF, -4, 4},
    {"wf_erfinv", wf_erfinv, ref_erfinv, FLOATF, -0.99, 0.99},
    {"wf_floor", wf_floor, floor, ROUNDF, -100, 100},
    {"wf_ceil", wf_ceil, ceil, ROUNDF, -100, 100},
    {"wf_round", wf_round, ref_round, ROUNDF, -100, 100},
    {"wf_logical_not", wf_logical_not, ref_not, PRED, -2, 2},
    {"wf_isnan", wf_isnan, ref_isnan, PRED, -2, 2},
    {"wf_isinf", wf_isinf, ref_isinf, PRED, -2, 2},
    {"wf_isfinite", wf_isfinite, ref_isfinite, PRED, -2, 2},
    {"wf_stop_gradient", wf_stop_gradient, ref_ident, IDENT, -100, 100},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static bool is_int(wf_dtype d) { return !wf__dtype_is_float(d); }

/* Output dtype of the case for input dtype d (WF_DTYPE_COUNT: an error). */
static wf_dtype out_dtype(const unary_case *c, wf_dtype d)
{
    if (d == WF_DTYPE_C64) /* only stop_gradient takes it so far (test_errors) */
        return c->kind == IDENT ? d : WF_DTYPE_COUNT;
    switch (c->kind) {
    case FLOATF: return is_int(d) ? WF_DTYPE_F32 : d;
    case NEG: return d == WF_DTYPE_BOOL ? WF_DTYPE_COUNT : d;
    case PRED: return WF_DTYPE_BOOL;
    default: return d;
    }
}

/* Input values for dtype d within the case's domain (integers rounded into
 * range; u8 and bool non-negative). */
static double *make_inputs(const unary_case *c, wf_dtype d, int64_t n, uint32_t seed)
{
    double *v = conf_values(n, c->lo, c->hi, seed);
    for (int64_t i = 0; i < n; i++) {
        double x = v[i];
        if (d == WF_DTYPE_BOOL)
            x = (i % 3) != 0;
        else if (is_int(d)) {
            x = round(x);
            if (x < c->lo)
                x = ceil(c->lo);
            if (x > c->hi)
                x = floor(c->hi);
            if (wf__dtype_is_unsigned_int(d) && x < 0)
                x = -x;
        }
        if (i == 0 && c->lo <= 0 && c->hi >= 0)
            x = 0; /* include a zero */
        v[i] = conf_round_to(x, d);
    }
    return v;
}

/* The exact integer result of negative/abs/sign/square (with wraparound). */
static double int_ref(const unary_case *c, wf_dtype d, double x)
{
    if (d == WF_DTYPE_BOOL)
        return x; /* abs, sign, square of bool keep it */
    const double r = c->ref(x);
    if (!wf__dtype_is_integer(d) || d == WF_DTYPE_I64)
        return r;
    /* The low bits (r is small: the test domains keep it within int64). */
    const int bits = 8 * (int)wf_dtype_size(d);
    uint64_t u = (uint64_t)(int64_t)r;
    if (bits < 64)
        u &= (UINT64_C(1) << bits) - 1;
    if (wf__dtype_is_unsigned_int(d))
        return (double)u;
    return (u >> (bits - 1)) ? (double)u - ldexp(1, bits) : (double)u;
}

static double tol_for(const unary_case *c, wf_dtype out)
{
    if (c->kind == PRED || c->kind == IDENT || c->kind == ROUNDF || !wf__dtype_is_float(out))
        return 0;
    if (out == WF_DTYPE_F32)
        return 1e-6; /* a few ulp */
    if (out == WF_DTYPE_F64)
        return c->op == wf_erfinv ? 1e-12 : 1e-14;
    return conf_tolerance(out);
}

/* Runs one case for one dtype over contiguous, strided, broadcast, 0-d and
 * empty inputs. */
static void check_case(const unary_case *c, wf_dtype d)
{
    const int64_t shape[2] = {7, 9};
    const int64_t n = 63;
    wf_dtype od = out_dtype(c, d);
    if (od == WF_DTYPE_COUNT)
        return; /* checked in test_errors */
    double *in = make_inputs(c, d, n, 17u + (uint32_t)d);
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++) {
        double r = (c->kind == NEG || c->kind == KEEP) && is_int(d) ? int_ref(c, d, in[i])
                                                                    : c->ref(in[i]);
        want[i] = conf_round_to(r, od);
    }
    const double tol = tol_for(c, od);
    wf_scope_begin();
    char what[128];
    snprintf(what, sizeof what, "%s %s", c->name, wf_dtype_name(d));

    /* contiguous */
    wf_array *a = conf_array(in, shape, 2, d);
    if (!conf_check((c->op(a)), od, shape, 2, want, tol))
        printf("    (%s contiguous)\n", what);
    /* non-contiguous (transposed storage) */
    wf_array *s = conf_strided(in, shape, 2, d);
    if (!conf_check((c->op(s)), od, shape, 2, want, tol))
        printf("    (%s strided)\n", what);
    /* broadcast: a row viewed with stride 0 */
    const int64_t row_shape[1] = {9};
    wf_array *row = conf_array(in, row_shape, 1, d);
    wf_array *b = wf_broadcast_to(row, shape, 2);
    double *want_b = malloc((size_t)n * sizeof *want_b);
    for (int64_t i = 0; i < n; i++)
        want_b[i] = want[i % 9];
    if (!conf_check((c->op(b)), od, shape, 2, want_b, tol))
        printf("    (%s broadcast)\n", what);
    /* 0-d, from a stride-2 view */
    wf_array *z = conf_strided(in + 3, NULL, 0, d);
    if (!conf_check((c->op(z)), od, NULL, 0, want + 3, tol))
        printf("    (%s 0-d)\n", what);
    /* empty */
    const int64_t empty_shape[2] = {0, 5};
    wf_array *e = conf_array(in, empty_shape, 2, d);
    conf_check((c->op(e)), od, empty_shape, 2, want, tol);
    wf_scope_end();
    free(want_b);
    free(want);
    free(in);
}

static void test_all_ops_all_dtypes(void)
{
    for (int k = 0; k < NCASES; k++)
        for (int d = 0; d < WF_DTYPE_COUNT; d++)
            check_case(&cases[k], (wf_dtype)d);
}

/* NaN, infinities, signed zeros, subnormals and out-of-domain values in
 * float32 and float64, against libm (float32 results: within 4 ulp). */
static void test_special_values(void)
{
    const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5,
                               -2.5, 1e-40, -1e-40, 1e-30, 100.0, -100.0, 88.7, 89.0, -103.0,
                               -110.0, 1e30, -1e30, 5000.0, 1e6, -2.0};
    const int64_t n = (int64_t)(sizeof specials / sizeof specials[0]);
    const wf_dtype dtypes[2] = {WF_DTYPE_F32, WF_DTYPE_F64};
    for (int k = 0; k < NCASES; k++) {
        const unary_case *c = &cases[k];
        if (c->op == wf_erfinv || c->kind == IDENT)
            continue; /* erfinv: test_erfinv */
        for (int t = 0; t < 2; t++) {
            wf_dtype d = dtypes[t];
            double want[32], in[32];
            for (int64_t i = 0; i < n; i++) {
                in[i] = conf_round_to(specials[i], d);
                want[i] = conf_round_to(c->ref(in[i]), out_dtype(c, d));
            }
            wf_scope_begin();
            wf_array *a = conf_array(in, &n, 1, d);
            wf_array *r = c->op(a);
            double *got = r ? conf_read(r) : NULL;
            if (CHECK_NOT_NULL(got)) {
                for (int64_t i = 0; i < n; i++) {
                    double w = want[i], g = got[i];
                    bool ok;
                    if (isnan(w))
                        ok = isnan(g);
                    else if (isinf(w) || w == 0)
                        ok = g == w && signbit(g) == signbit(w);
                    else
                        ok = fabs(g - w) <= (d == WF_DTYPE_F32 ? 4 * 0x1p-24 : 1e-15) * fabs(w) ||
                             (fabs(w) < 0x1p-126 && fabs(g - w) <= 4 * 0x1p-149);
                    if (!ok)
                        CHECK(!printf("    %s(%s %.9g) = %.9g, want %.9g\n", c->name,
                                      wf_dtype_name(d), in[i], g, w));
                }
            }
            free(got);
            wf_scope_end();
        }
    }
}

/* erfinv: f32 within 1e-6 relative, f64 within 1e-12, across (-1, 1). */
static void test_erfinv(void)
{
    const int64_t n = 2001;
    double *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = -1.0 + 2.0 * (double)i / (double)(n - 1);
    x[1] = -0.9999999;
    x[n - 2] = 0.999999;
    x[5] = 1e-30;
    const wf_dtype dtypes[2] = {WF_DTYPE_F32, WF_DTYPE_F64};
    for (int t = 0; t < 2; t++) {
        double *in = malloc((size_t)n * sizeof *in), *want = malloc((size_t)n * sizeof *want);
        for (int64_t i = 0; i < n; i++) {
            in[i] = conf_round_to(x[i], dtypes[t]);
            want[i] = conf_round_to(ref_erfinv(in[i]), dtypes[t]);
        }
        wf_array *a = conf_array(in, &n, 1, dtypes[t]);
        conf_check(wf_erfinv(a), dtypes[t], &n, 1, want, t == 0 ? 1e-6 : 1e-12);
        wf_release(a);
        free(in);
        free(want);
    }
    free(x);
    double v = 0;
    wf_array *bad = wf_scalar(1.5, WF_DTYPE_F32);
    wf_array *r = wf_erfinv(bad);
    CHECK_OK(wf_array_item(r, &v));
    CHECK(isnan(v));
    wf_release(r);
    wf_release(bad);
}

/* Large arrays go through the pool in chunks; results are those of the
 * block functions called directly (bit for bit), contiguous or strided. */
static void test_large_parallel(void)
{
    const int64_t n = 300001;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((double)(i % 20011) * 1e-3 - 10.0);
    wf_array *a = wf_array_from_data(x, &n, 1, WF_DTYPE_F32);
    struct {
        wf_array *(*op)(wf_array *);
        void (*fn)(int64_t, const float *restrict, float *restrict);
    } fns[] = {{wf_exp, wf__vm_exp_f32},     {wf_sin, wf__vm_sin_f32},
               {wf_tanh, wf__vm_tanh_f32},   {wf_erf, wf__vm_erf_f32},
               {wf_sigmoid, wf__vm_sigmoid_f32}};
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        fns[k].fn(n, x, y);
        wf_array *r = fns[k].op(a);
        const void *data = NULL;
        if (CHECK_OK(wf_array_data(r, &data)))
            CHECK(memcmp(data, y, (size_t)n * sizeof *y) == 0);
        wf_release(r);
    }
    /* strided: every other element of a 2n array */
    int64_t n2 = 2 * n, start = 0, stop = 2 * n, step = 2;
    float *x2 = malloc((size_t)n2 * sizeof *x2);
    for (int64_t i = 0; i < n; i++) {
        x2[2 * i] = x[i];
        x2[2 * i + 1] = 1e30f;
    }
    wf_array *wide = wf_array_from_data(x2, &n2, 1, WF_DTYPE_F32);
    wf_array *view = wf_slice(wide, &start, &stop, &step);
    wf__vm_log1p_f32(n, x, y);
    wf_array *r = wf_log1p(view);
    const void *data = NULL;
    if (CHECK_OK(wf_array_data(r, &data)))
        CHECK(memcmp(data, y, (size_t)n * sizeof *y) == 0);
    wf_release(r);
    wf_release(view);
    wf_release(wide);
    wf_release(a);
    free(x2);
    free(x);
    free(y);
}

/* Integer corner cases: wraparound of negative/abs/square, u8 negation. */
static void test_integer_wrap(void)
{
    const int32_t v32[4] = {INT32_MIN, INT32_MAX, -7, 65536};
    const int64_t v64[3] = {INT64_MIN, INT64_MAX, -3};
    const int64_t n32 = 4, n64 = 3;
    wf_array *a = wf_array_from_data(v32, &n32, 1, WF_DTYPE_I32);
    wf_array *b = wf_array_from_data(v64, &n64, 1, WF_DTYPE_I64);
    int32_t o32[4];
    int64_t o64[3];
    wf_array *r = wf_negative(a);
    CHECK_OK(wf_array_copy_to(r, o32, sizeof o32));
    CHECK_EQ_INT(o32[0], INT32_MIN);
    CHECK_EQ_INT(o32[1], -INT32_MAX);
    CHECK_EQ_INT(o32[2], 7);
    wf_release(r);
    r = wf_abs(a);
    CHECK_OK(wf_array_copy_to(r, o32, sizeof o32));
    CHECK_EQ_INT(o32[0], INT32_MIN);
    CHECK_EQ_INT(o32[2], 7);
    wf_release(r);
    r = wf_square(a);
    CHECK_OK(wf_array_copy_to(r, o32, sizeof o32));
    CHECK_EQ_INT(o32[3], 0); /* 2^32 wraps to 0 */
    CHECK_EQ_INT(o32[1], 1); /* (2^31 - 1)^2 = 1 mod 2^32 */
    wf_release(r);
    r = wf_negative(b);
    CHECK_OK(wf_array_copy_to(r, o64, sizeof o64));
    CHECK(o64[0] == INT64_MIN);
    CHECK(o64[1] == -INT64_MAX);
    wf_release(r);
    r = wf_sign(b);
    CHECK_OK(wf_array_copy_to(r, o64, sizeof o64));
    CHECK(o64[0] == -1 && o64[1] == 1 && o64[2] == -1);
    wf_release(r);
    const uint8_t u[3] = {0, 1, 200};
    const int64_t nu = 3;
    wf_array *c = wf_array_from_data(u, &nu, 1, WF_DTYPE_U8);
    uint8_t ou[3];
    r = wf_negative(c);
    CHECK_OK(wf_array_copy_to(r, ou, sizeof ou));
    CHECK(ou[0] == 0 && ou[1] == 255 && ou[2] == 56);
    wf_release(r);
    wf_release(a);
    wf_release(b);
    wf_release(c);
}

/* Rounding returns integer inputs unchanged, as a view (a new array node,
 * like every op result); half to even for floats; stop_gradient is its own
 * primitive and a view. */
static void test_identities(void)
{
    wf_array *i = wf_arange(0, 5, 1, WF_DTYPE_I32);
    const int64_t five = 5;
    const double iota5[5] = {0, 1, 2, 3, 4};
    wf_array *r = wf_round(i);
    CHECK(r != i);
    CHECK_OK(wf_eval(&r, 1));
    CHECK(r->buffer == i->buffer);
    conf_check(r, WF_DTYPE_I32, &five, 1, iota5, 0);
    r = wf_floor(i);
    CHECK(r != i);
    conf_check(r, WF_DTYPE_I32, &five, 1, iota5, 0);
    const double halves[8] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 8388607.5, -0.0};
    const double even[8] = {0, 2, 2, -0.0, -2, -2, 8388608, -0.0};
    const int64_t n = 8;
    wf_array *h = conf_array(halves, &n, 1, WF_DTYPE_F64);
    conf_check(wf_round(h), WF_DTYPE_F64, &n, 1, even, 0);
    wf_array *g = wf_stop_gradient(h);
    if (CHECK_NOT_NULL(g)) {
        CHECK(strcmp(g->prim->name, "stop_gradient") == 0);
        CHECK_OK(wf_eval(&g, 1));
        CHECK(g->buffer == h->buffer); /* a view: no copy */
    }
    conf_check(g, WF_DTYPE_F64, &n, 1, halves, 0);
    wf_release(h);
    wf_release(i);
}

static void test_errors(void)
{
    for (int k = 0; k < NCASES; k++)
        conf_check_error(cases[k].op(NULL), WF_ERR_NULL_ARGUMENT, cases[k].name);
    /* a NULL from an earlier failed op keeps its error */
    wf_array *bad = wf_negative(NULL);
    wf_clear_error();
    wf_array *t = wf_full(NULL, -1, 0, WF_DTYPE_F32); /* records an error */
    wf_status first = wf_last_error();
    CHECK(t == NULL && first != WF_OK);
    CHECK(wf_sin(t) == NULL);
    CHECK_EQ_INT(wf_last_error(), first);
    wf_clear_error();
    (void)bad;
    /* negative of bool */
    wf_array *b = wf_scalar(1, WF_DTYPE_BOOL);
    conf_check_error(wf_negative(b), WF_ERR_DTYPE, "wf_negative");
    /* the primitives check their input dtype themselves too */
    wf_array *x = wf_scalar(3, WF_DTYPE_I32);
    conf_check_error(wf__node_new(&wf__prim_sin, NULL, &x, 1), WF_ERR_DTYPE, "sin");
    /* complex64: what MLX rejects (expm1, sigmoid, erf, erfinv, floor, ceil,
     * round; logical_not) is WF_ERR_DTYPE, saying why; the rest is checked
     * in test_dtypes and test_complex_ops */
    wf_array *z = wf_scalar(1, WF_DTYPE_C64);
    for (int k = 0; k < NCASES; k++) {
        if (cases[k].op != wf_expm1 && cases[k].op != wf_sigmoid && cases[k].op != wf_erf &&
            cases[k].op != wf_erfinv && cases[k].op != wf_floor && cases[k].op != wf_ceil &&
            cases[k].op != wf_round && cases[k].op != wf_logical_not)
            continue;
        CHECK(cases[k].op(z) == NULL);
        CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
        CHECK_STR_CONTAINS(wf_last_error_message(), cases[k].name);
        CHECK_STR_CONTAINS(wf_last_error_message(), "complex64");
        wf_clear_error();
    }
    wf_release(z);
    wf_release(x);
    wf_release(b);
}

/* The minimum and maximum of each new integer type through negative, abs,
 * sign and square (wrapping as NumPy does). */
static void test_new_integer_edges(void)
{
    wf_scope_begin();
    const int64_t n = 4;
    const int8_t i8[4] = {INT8_MIN, INT8_MAX, -1, 0};
    const int16_t i16[4] = {INT16_MIN, INT16_MAX, 300, -300};
    const uint16_t u16[4] = {0, 1, UINT16_MAX, 300};
    const uint32_t u32[4] = {0, 1, UINT32_MAX, 70000};
    const uint64_t u64[4] = {0, 1, UINT64_MAX, UINT64_C(1) << 33};
    wf_array *a8 = wf_array_from_data(i8, &n, 1, WF_DTYPE_I8);
    wf_array *a16 = wf_array_from_data(i16, &n, 1, WF_DTYPE_I16);
    wf_array *b16 = wf_array_from_data(u16, &n, 1, WF_DTYPE_U16);
    wf_array *b32 = wf_array_from_data(u32, &n, 1, WF_DTYPE_U32);
    wf_array *b64 = wf_array_from_data(u64, &n, 1, WF_DTYPE_U64);
    int8_t o8[4];
    CHECK_OK(wf_array_copy_to(wf_negative(a8), o8, sizeof o8));
    CHECK(o8[0] == INT8_MIN && o8[1] == -INT8_MAX && o8[2] == 1 && o8[3] == 0);
    CHECK_OK(wf_array_copy_to(wf_abs(a8), o8, sizeof o8));
    CHECK(o8[0] == INT8_MIN && o8[1] == INT8_MAX && o8[2] == 1);
    CHECK_OK(wf_array_copy_to(wf_square(a8), o8, sizeof o8));
    CHECK(o8[0] == 0 && o8[1] == 1 && o8[2] == 1); /* 16384, 16129 mod 256 */
    int16_t o16[4];
    CHECK_OK(wf_array_copy_to(wf_square(a16), o16, sizeof o16));
    CHECK(o16[0] == 0 && o16[1] == 1 && o16[2] == 24464 && o16[3] == 24464);
    CHECK_OK(wf_array_copy_to(wf_sign(a16), o16, sizeof o16));
    CHECK(o16[0] == -1 && o16[1] == 1 && o16[2] == 1 && o16[3] == -1);
    uint16_t p16[4];
    CHECK_OK(wf_array_copy_to(wf_negative(b16), p16, sizeof p16));
    CHECK(p16[0] == 0 && p16[1] == UINT16_MAX && p16[2] == 1 && p16[3] == 65236);
    CHECK_OK(wf_array_copy_to(wf_square(b16), p16, sizeof p16));
    CHECK(p16[2] == 1 && p16[3] == 24464);
    uint32_t p32[4];
    CHECK_OK(wf_array_copy_to(wf_square(b32), p32, sizeof p32));
    CHECK(p32[2] == 1 && p32[3] == (uint32_t)(UINT64_C(70000) * 70000));
    CHECK_OK(wf_array_copy_to(wf_abs(b32), p32, sizeof p32));
    CHECK(p32[2] == UINT32_MAX);
    uint64_t p64[4];
    CHECK_OK(wf_array_copy_to(wf_negative(b64), p64, sizeof p64));
    CHECK(p64[1] == UINT64_MAX && p64[2] == 1 && p64[3] == 0u - (UINT64_C(1) << 33));
    CHECK_OK(wf_array_copy_to(wf_square(b64), p64, sizeof p64));
    CHECK(p64[2] == 1 && p64[3] == 0); /* 2^66 wraps to 0 */
    CHECK_OK(wf_array_copy_to(wf_sign(b64), p64, sizeof p64));
    CHECK(p64[0] == 0 && p64[2] == 1);
    /* float-valued functions compute in float32, as for the old integers */
    float f[4];
    wf_array *r = wf_sqrt(b64);
    CHECK_EQ_INT(wf_array_dtype(r), WF_DTYPE_F32);
    CHECK_OK(wf_array_copy_to(r, f, sizeof f));
    CHECK_NEAR(f[2], 4294967296.0, 1); /* sqrt(2^64 rounded to float32) */
    CHECK_NEAR(f[3], 92681.8999, 0.01);
    wf_scope_end();
}

/* wf_exp: every float dtype, strided. */
static void test_exp_kernel_paths(void)
{
    const int64_t shape[3] = {3, 5, 40};
    const int64_t n = 600;
    double *v = conf_values(n, -20, 20, 5);
    double *want = malloc((size_t)n * sizeof *want);
    for (int d = WF_DTYPE_F16; d <= WF_DTYPE_F64; d++) {
        for (int64_t i = 0; i < n; i++)
            want[i] = conf_round_to(exp(conf_round_to(v[i], (wf_dtype)d)), (wf_dtype)d);
        wf_array *s = conf_strided(v, shape, 3, (wf_dtype)d);
        double tol = d == WF_DTYPE_F32 ? 1e-6 : d == WF_DTYPE_F64 ? 1e-15 : conf_tolerance(d);
        conf_check(wf_exp(s), (wf_dtype)d, shape, 3, want, tol);
        wf_release(s);
    }
    free(want);
    free(v);
}

/* ---------------------------------------------------------------- numerics (issue 11) */

/* Reads `a` (evaluated) as doubles exactly as stored; NULL on error. */
static double *read_all(wf_array *a)
{
    return a ? conf_read(a) : NULL;
}

/* |got - want| in ulps of want for float64 (subnormals: 2^-1074). */
static double ulps_f64(double got, long double want)
{
    long double w = fabsl(want);
    long double ulp = 0x1p-1074L;
    if (w >= 0x1p-1022L) {
        int e;
        frexpl(w, &e);
        ulp = ldexpl(1.0L, e - 53);
    }
    return (double)(fabsl((long double)got - want) / ulp);
}

/* erfinv in float64 is right up to 1 - 2^-53 (it gave 5.364 for 5.8636 and
 * was not monotonic near 1): values from mpmath (21 digits), odd symmetry,
 * and monotonic over the last 2^16 doubles below 1. */
static void test_erfinv_float64_near_one(void)
{
    static const double table[][2] = {
        {0.1, 0.0888559904942576919743},
        {0.5, 0.476936276204469873381},
        {0.75, 0.81341984759761854169},
        {0.9, 1.16308715367667416284},
        {0.99, 1.82138636771844945587},
        {0.9999, 2.75106390571207969174},
        {0.9999999999, 4.57282495854492493785},
        {1 - 0x1p-40, 5.05125408524938996707},
        {1 - 0x1p-50, 5.68612844131039098005},
        {1 - 0x1p-52, 5.80501868319345330018},
        {1 - 0x1p-53, 5.86358474875516792721},
        {1e-300, 8.86226925452758035857e-301},
    };
    const int64_t n = (int64_t)(sizeof table / sizeof table[0]);
    double in[2 * 12];
    for (int64_t i = 0; i < n; i++) {
        in[i] = table[i][0];
        in[n + i] = -table[i][0];
    }
    const int64_t n2 = 2 * n;
    wf_array *a = wf_array_from_data(in, &n2, 1, WF_DTYPE_F64);
    wf_array *r = wf_erfinv(a);
    double *got = read_all(r);
    if (CHECK_NOT_NULL(got))
        for (int64_t i = 0; i < n2; i++) {
            const double want = i < n ? table[i][1] : -table[i - n][1];
            if (!CHECK(ulps_f64(got[i], want) <= 2.0))
                printf("    erfinv(%a) = %.17g, want %.17g\n", in[i], got[i], want);
        }
    free(got);
    wf_release(r);
    wf_release(a);
    /* monotonic: the last 2^16 doubles below 1 (spacing 2^-53) */
    const int64_t m = 1 << 16;
    double *x = malloc((size_t)m * sizeof *x);
    for (int64_t i = 0; i < m; i++)
        x[i] = 1.0 - (double)(m - i) * 0x1p-53;
    a = wf_array_from_data(x, &m, 1, WF_DTYPE_F64);
    r = wf_erfinv(a);
    got = read_all(r);
    if (CHECK_NOT_NULL(got)) {
        int64_t backwards = 0;
        for (int64_t i = 1; i < m; i++)
            backwards += !(got[i] > got[i - 1]);
        CHECK_EQ_INT(backwards, 0);
        CHECK(ulps_f64(got[m - 1], 5.86358474875516792721L) <= 2.0);
    }
    free(got);
    free(x);
    wf_release(r);
    wf_release(a);
}

/* ceil of (-1, -0.5] (and of (-0.5, 0]) is -0 in every float dtype; it
 * gave +0 on (-1, -0.5). */
static void test_ceil_keeps_negative_zero(void)
{
    const double in[6] = {-0.99, -0.7, -0.5, -0.3, -0.0, 0.3};
    const int64_t n = 6;
    for (int d = WF_DTYPE_F16; d <= WF_DTYPE_F64; d++) {
        for (int strided = 0; strided < 2; strided++) {
            wf_array *a = strided ? conf_strided(in, &n, 1, (wf_dtype)d)
                                  : conf_array(in, &n, 1, (wf_dtype)d);
            wf_array *r = wf_ceil(a);
            double *got = read_all(r);
            if (CHECK_NOT_NULL(got)) {
                for (int i = 0; i < 5; i++)
                    if (!CHECK(got[i] == 0 && signbit(got[i])))
                        printf("    ceil %s(%g) = %g\n", wf_dtype_name((wf_dtype)d), in[i],
                               got[i]);
                CHECK(got[5] == 1);
            }
            free(got);
            wf_release(r);
            wf_release(a);
        }
    }
}

/* Checks that the one-element `a` (released) holds exactly `want`. */
static void check_exact(wf_array *a, double want, const char *what)
{
    double *got = read_all(a);
    if (CHECK_NOT_NULL(got) && !CHECK(got[0] == want || (isnan(want) && isnan(got[0]))))
        printf("    %s: got %a, want %a\n", what, got[0], want);
    free(got);
    wf_release(a);
}

/* float64 and integer values round once, correctly, to float16/bfloat16:
 * through float32's nearest they rounded twice (1 + 2^-11 + 2^-40 gave 1.0).
 * In astype, wf_scalar, wf_full and a mixed-dtype binary op. */
static void test_half_conversions_round_once(void)
{
    const double f64_in[] = {1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40), 65519.99,
                             65520.0, 0x1p-25 + 0x1p-60, 1e300, NAN, -INFINITY, -0.0};
    const double f16_want[] = {1.0009765625, -1.0009765625, 65504.0, INFINITY, 0x1p-24,
                               INFINITY, NAN, -INFINITY, -0.0};
    /* the third: just below the halfway point between the largest bf16 and
     * 2^128, exactly halfway once rounded to float32 */
    const double bf16_in[] = {1 + 0x1p-8 + 0x1p-40, 0x1p-134 + 0x1p-170, 0x1.feffffffffffp+127,
                              -0.0};
    const double bf16_want[] = {1.0078125, 0x1p-133, 0x1.fep+127, -0.0};
    const int64_t n16 = 9, nb = 4;
    wf_array *a = wf_array_from_data(f64_in, &n16, 1, WF_DTYPE_F64);
    wf_array *h = wf_astype(a, WF_DTYPE_F16);
    double *got = read_all(h);
    if (CHECK_NOT_NULL(got))
        for (int i = 0; i < n16; i++)
            if (!CHECK(got[i] == f16_want[i] ? signbit(got[i]) == signbit(f16_want[i])
                                             : isnan(got[i]) && isnan(f16_want[i])))
                printf("    f64 -> f16 %a: got %a, want %a\n", f64_in[i], got[i], f16_want[i]);
    free(got);
    wf_release(h);
    wf_release(a);
    a = wf_array_from_data(bf16_in, &nb, 1, WF_DTYPE_F64);
    h = wf_astype(a, WF_DTYPE_BF16);
    got = read_all(h);
    if (CHECK_NOT_NULL(got))
        for (int i = 0; i < nb; i++)
            if (!CHECK(got[i] == bf16_want[i] && signbit(got[i]) == signbit(bf16_want[i])))
                printf("    f64 -> bf16 %a: got %a, want %a\n", bf16_in[i], got[i], bf16_want[i]);
    free(got);
    wf_release(h);
    wf_release(a);
    /* integers: 2^24 + 2^16 + 1 is just above a bf16 halfway point */
    const int32_t i32[4] = {16842753, -16842753, 2049, 2051};
    const int64_t n4 = 4;
    wf_array *ia = wf_array_from_data(i32, &n4, 1, WF_DTYPE_I32);
    wf_array *ib = wf_astype(ia, WF_DTYPE_BF16);
    got = read_all(ib);
    if (CHECK_NOT_NULL(got))
        CHECK(got[0] == 16908288.0 && got[1] == -16908288.0 && got[2] == 2048 && got[3] == 2048);
    free(got);
    wf_release(ib);
    ib = wf_astype(ia, WF_DTYPE_F16);
    got = read_all(ib);
    if (CHECK_NOT_NULL(got))
        CHECK(got[2] == 2048 && got[3] == 2052 && isinf(got[0]));
    free(got);
    wf_release(ib);
    const int64_t i64[3] = {((int64_t)1 << 60) + ((int64_t)1 << 52) + 1, INT64_MIN, INT64_MAX};
    const int64_t n3 = 3;
    wf_array *la = wf_array_from_data(i64, &n3, 1, WF_DTYPE_I64);
    wf_array *lb = wf_astype(la, WF_DTYPE_BF16);
    got = read_all(lb);
    if (CHECK_NOT_NULL(got))
        CHECK(got[0] == 0x1p60 + 0x1p53 && got[1] == -0x1p63 && got[2] == 0x1p63);
    free(got);
    wf_release(lb);
    wf_release(la);
    /* wf_scalar and wf_full */
    check_exact(wf_scalar(1 + 0x1p-11 + 0x1p-40, WF_DTYPE_F16), 1.0009765625, "wf_scalar f16");
    check_exact(wf_scalar(1 + 0x1p-8 + 0x1p-40, WF_DTYPE_BF16), 1.0078125, "wf_scalar bf16");
    const int64_t one = 1;
    check_exact(wf_full(&one, 1, 1 + 0x1p-11 + 0x1p-40, WF_DTYPE_F16), 1.0009765625,
                "wf_full f16");
    check_exact(wf_full(&one, 1, 1 + 0x1p-8 + 0x1p-40, WF_DTYPE_BF16), 1.0078125,
                "wf_full bf16");
    /* a mixed-dtype binary op: int32 + bfloat16 computes in bfloat16 */
    wf_array *zero = wf_full(&one, 1, 0.0, WF_DTYPE_BF16);
    wf_array *i1 = wf_array_from_data(i32, &one, 1, WF_DTYPE_I32);
    check_exact(wf_add(i1, zero), 16908288.0, "int32 + bf16");
    wf_release(i1);
    wf_release(zero);
    wf_release(ia);
}

/* Runs `op` on float64 `x` (n elements) and returns the results. */
static double *run_f64(wf_array *(*op)(wf_array *), const double *x, int64_t n)
{
    wf_array *a = wf_array_from_data(x, &n, 1, WF_DTYPE_F64);
    wf_array *r = op(a);
    double *got = read_all(r);
    wf_release(r);
    wf_release(a);
    return got;
}

static float *run_f32(wf_array *(*op)(wf_array *), const float *x, int64_t n)
{
    wf_array *a = wf_array_from_data(x, &n, 1, WF_DTYPE_F32);
    wf_array *r = op(a);
    float *got = NULL;
    if (r && (got = malloc((size_t)n * sizeof *got)) && wf_array_copy_to(r, got, (size_t)n * 4)) {
        free(got);
        got = NULL;
    }
    wf_release(r);
    wf_release(a);
    return got;
}

/* silu, gelu, gelu_tanh keep their negative tails (silu(-89.05f) gave -0.0,
 * float64 gelu was 425 ulp off at -20.1), on every variant this CPU runs.
 * Expected values from mpmath (50 digits). */
static void test_activation_tails_every_isa(void)
{
    for (int isa = 0; isa <= wf__vm_isa_best(); isa++) {
        CHECK_OK(wf__vm_isa_force(isa));
        const float xs = -89.05f, xt = -10.0f, xg = -13.0f;
        float *y = run_f32(wf_silu, &xs, 1);
        if (CHECK_NOT_NULL(y))
            CHECK(fabs((double)y[0] - -1.886726719242687181e-37) <= 2 * 0x1p-146);
        free(y);
        y = run_f32(wf_gelu_tanh, &xt, 1);
        if (CHECK_NOT_NULL(y))
            CHECK(fabs((double)y[0] - -1.2040923482098059937e-37) <= 4 * 0x1p-146);
        free(y);
        y = run_f32(wf_gelu, &xg, 1);
        if (CHECK_NOT_NULL(y))
            CHECK(fabs((double)y[0] - -7.952313719414843587e-38) <= 4 * 0x1p-147);
        free(y);
        const double xd[4] = {-20.1, -740.5, -20.1, -37.5};
        double *g = run_f64(wf_gelu, xd, 4);
        if (CHECK_NOT_NULL(g)) {
            CHECK(ulps_f64(g[0], -7.41625853607999352873e-89L) <= 2.0);
            CHECK(ulps_f64(g[3], -1.72700737859323306644e-306L) <= 2.0);
        }
        free(g);
        g = run_f64(wf_silu, xd, 4);
        if (CHECK_NOT_NULL(g)) {
            CHECK(ulps_f64(g[0], -3.748667926033262974263738e-8L) <= 4.0);
            CHECK(ulps_f64(g[1], -1.881313680060923566059312e-319L) <= 1.0); /* subnormal */
        }
        free(g);
        g = run_f64(wf_gelu_tanh, xd, 4);
        if (CHECK_NOT_NULL(g))
            CHECK(ulps_f64(g[0], -5.295289946595303833013399e-265L) <= 4.0);
        free(g);
    }
    CHECK_OK(wf__vm_isa_force(-1));
}

typedef struct vec_case {
    const char *name;
    wf_array *(*op)(wf_array *);
    long double (*ref)(long double);
    double lo, hi;
    bool f64; /* a vectorized float64 kernel too */
} vec_case;

static long double lr_sigmoid(long double x) { return 1.0L / (1.0L + expl(-x)); }
static long double lr_silu(long double x) { return x / (1.0L + expl(-x)); }
static long double lr_gelu(long double x) { return 0.5L * x * erfcl(-x / sqrtl(2.0L)); }
static long double lr_gelu_tanh(long double x)
{
    const long double k = sqrtl(2.0L / 3.14159265358979323846264338327950288L);
    return x / (1.0L + expl(-2.0L * k * (x + 0.044715L * x * x * x)));
}

static const vec_case vec_cases[] = {
    {"exp", wf_exp, expl, -20, 20, true},
    {"expm1", wf_expm1, expm1l, -5, 5, true},
    {"log", wf_log, logl, 1e-3, 1e3, true},
    {"log1p", wf_log1p, log1pl, -0.9, 100, true},
    {"log2", wf_log2, log2l, 1e-3, 1e3, true},
    {"tanh", wf_tanh, tanhl, -5, 5, true},
    {"sigmoid", wf_sigmoid, lr_sigmoid, -30, 30, true},
    {"sinh", wf_sinh, sinhl, -20, 20, true},
    {"cosh", wf_cosh, coshl, -20, 20, true},
    {"arcsin", wf_arcsin, asinl, -1, 1, false},
    {"arccos", wf_arccos, acosl, -1, 1, false},
    {"arctan", wf_arctan, atanl, -20, 20, false},
    {"silu", wf_silu, lr_silu, -30, 10, true},
    {"gelu", wf_gelu, lr_gelu, -12, 6, false},
    {"gelu_tanh", wf_gelu_tanh, lr_gelu_tanh, -9, 6, true},
};

/* Relative error of `got` against `want`, in ulps of the type. */
static double ulps_of(double got, long double want, bool f32)
{
    long double w = fabsl(want);
    long double ulp = f32 ? 0x1p-149L : 0x1p-1074L;
    if (w >= (f32 ? 0x1p-126L : 0x1p-1022L)) {
        int e;
        frexpl(w, &e);
        ulp = ldexpl(1.0L, e - (f32 ? 24 : 53));
    }
    return (double)(fabsl((long double)got - want) / ulp);
}

/* Every vectorized unary op through the API on every variant this CPU runs
 * (contiguous, strided, float16): float32/float64 are within 5 ulp of long
 * double references on each variant, and the variants agree bit for bit
 * (the baseline's float64 is libm: it is held to the bound only). */
static void test_vectorized_ops_every_isa(void)
{
    const int64_t n = 999; /* not a multiple of any block */
    const int64_t shape[2] = {27, 37};
    const wf_dtype dts[3] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16};
    for (size_t k = 0; k < sizeof vec_cases / sizeof vec_cases[0]; k++) {
        const vec_case *c = &vec_cases[k];
        double *x = conf_values(n, c->lo, c->hi, 40u + (uint32_t)k);
        double *first[3] = {NULL, NULL, NULL};
        for (int isa = 0; isa <= wf__vm_isa_best(); isa++) {
            CHECK_OK(wf__vm_isa_force(isa));
            for (int t = 0; t < 3; t++) {
                wf_array *a = conf_strided(x, shape, 2, dts[t]);
                double *got = read_all(c->op(a));
                wf_array *cont = conf_array(x, shape, 2, dts[t]);
                double *got_c = read_all(c->op(cont));
                wf_release(cont);
                wf_release(a);
                if (!CHECK_NOT_NULL(got) || !CHECK_NOT_NULL(got_c)) {
                    free(got);
                    free(got_c);
                    continue;
                }
                CHECK(memcmp(got, got_c, (size_t)n * sizeof *got) == 0);
                free(got_c);
                double worst = 0;
                for (int64_t i = 0; t < 2 && i < n; i++) {
                    const long double xi = t == 0 ? (long double)(float)x[i] : (long double)x[i];
                    const double e = ulps_of(got[i], c->ref(xi), t == 0);
                    worst = e > worst ? e : worst;
                }
                if (!CHECK(worst <= 5.0))
                    printf("    %s %s on %s: %.2f ulp\n", c->name, wf_dtype_name(dts[t]),
                           wf__vm_isa_name(isa), worst);
                if (t == 1 && isa == WF_VM_ISA_BASELINE) {
                    free(got);
                    continue;
                }
                if (!first[t]) {
                    first[t] = got;
                    continue;
                }
                if (!CHECK(memcmp(got, first[t], (size_t)n * sizeof *got) == 0))
                    printf("    %s %s differs on %s\n", c->name, wf_dtype_name(dts[t]),
                           wf__vm_isa_name(isa));
                free(got);
            }
        }
        for (int t = 0; t < 3; t++)
            free(first[t]);
        free(x);
    }
    CHECK_OK(wf__vm_isa_force(-1));
}

/* power, arctan2, logaddexp (vectorized float32, logaddexp float64 too)
 * through the API on every variant: contiguous, a broadcast scalar,
 * strided, float16; close to references on each variant, bit-identical
 * across variants (the baseline's power and logaddexp are libm: held to
 * the bound only). */
static void test_vectorized_binary_every_isa(void)
{
    typedef wf_array *(*bin_op)(wf_array *, wf_array *);
    const bin_op ops[3] = {wf_power, wf_arctan2, wf_logaddexp};
    const int64_t shape[2] = {23, 41}, n = 23 * 41;
    const wf_dtype dts[4] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_F32};
    double *xa = conf_values(n, 0.01, 4, 3), *xb = conf_values(n, -8, 8, 4);
    for (int k = 0; k < 3; k++) {
        double *first[4] = {NULL, NULL, NULL, NULL};
        for (int isa = 0; isa <= wf__vm_isa_best(); isa++) {
            CHECK_OK(wf__vm_isa_force(isa));
            for (int t = 0; t < 4; t++) {
                wf_array *a = conf_strided(xa, shape, 2, dts[t]);
                wf_array *b = t == 3 ? wf_scalar(1.75, dts[t]) : conf_array(xb, shape, 2, dts[t]);
                double *got = read_all(ops[k](a, b));
                wf_release(a);
                wf_release(b);
                if (!CHECK_NOT_NULL(got))
                    continue;
                double worst = 0;
                for (int64_t i = 0; t != 2 && i < n; i++) {
                    const bool f32 = t != 1;
                    const long double va = f32 ? (long double)(float)xa[i] : (long double)xa[i];
                    const long double vb = t == 3 ? 1.75L
                                           : f32  ? (long double)(float)xb[i]
                                                  : (long double)xb[i];
                    const long double r = k == 0 ? powl(va, vb)
                                          : k == 1 ? atan2l(va, vb)
                                                   : fmaxl(va, vb) + log1pl(expl(-fabsl(va - vb)));
                    const double rel = (double)fabsl(((long double)got[i] - r) / r);
                    worst = rel > worst ? rel : worst;
                }
                if (!CHECK(worst <= (t == 1 ? 1e-15 : 3 * 0x1p-24)))
                    printf("    binary op %d, %s, on %s: relative error %g\n", k,
                           wf_dtype_name(dts[t]), wf__vm_isa_name(isa), worst);
                const bool libm = isa == WF_VM_ISA_BASELINE && (k != 1 || t == 1);
                if (libm) {
                    free(got);
                    continue;
                }
                if (!first[t]) {
                    first[t] = got;
                    continue;
                }
                CHECK(memcmp(got, first[t], (size_t)n * sizeof *got) == 0);
                free(got);
            }
        }
        for (int t = 0; t < 4; t++)
            free(first[t]);
    }
    free(xa);
    free(xb);
    CHECK_OK(wf__vm_isa_force(-1));
}

int main(void)
{
    RUN_TEST(test_all_ops_all_dtypes);
    RUN_TEST(test_special_values);
    RUN_TEST(test_erfinv);
    RUN_TEST(test_large_parallel);
    RUN_TEST(test_integer_wrap);
    RUN_TEST(test_identities);
    RUN_TEST(test_errors);
    RUN_TEST(test_new_integer_edges);
    RUN_TEST(test_exp_kernel_paths);
    RUN_TEST(test_erfinv_float64_near_one);
    RUN_TEST(test_ceil_keeps_negative_zero);
    RUN_TEST(test_half_conversions_round_once);
    RUN_TEST(test_activation_tails_every_isa);
    RUN_TEST(test_vectorized_ops_every_isa);
    RUN_TEST(test_vectorized_binary_every_isa);
    return TEST_SUMMARY();
}
