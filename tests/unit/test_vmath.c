/*
 * Maximum error of the vectorized math (backend/cpu/vmath.c) against long
 * double references (glibc's 64-bit-mantissa libm: its own error is ~2^-11
 * ulp of a double result), in ulps of the result's type (subnormal results:
 * ulp 2^-149 or 2^-1074), for every instruction-set variant this CPU runs.
 *
 * Each one-input float32 function is swept over 2^20 + points: every
 * 4096th float32 bit pattern (so the whole float line, both signs,
 * subnormals, NaNs and infinities), plus 2^18 uniform points in the
 * function's interesting range, plus edge cases. float64 functions: every
 * 2^44th bit pattern plus 2^18 uniform points plus edges. Two-input
 * functions: 2^19 pairs of random bit patterns, 2^18 pairs in the
 * interesting region, and every pair of a list of special values. (Under
 * the sanitizers the sweeps are 8x shorter.) Bounds asserted; the maximum
 * measured in this sweep, on an AMD EPYC (AVX-512), in parentheses:
 *
 *   float32
 *   exp      2 (0.92)   expm1  2 (1.39)   log    2 (0.83)   log1p   2 (0.84)
 *   log2     3 (2.13)   tanh   3 (2.20)   sigmoid 3 (2.12)  erf     4 (2.73)
 *   sin      3 (2.24)   cos    3 (2.24)   tan    5 (3.58)
 *   sinh     3 (2.62)   cosh   3 (2.72)   arcsin 3 (2.32)   arccos  3 (1.08)
 *   arctan   3 (2.01)   silu   4 (2.78)   gelu   4 (3.49)   gelu_tanh 4 (2.79)
 *   power    2 (0.50)   arctan2 3 (2.37)  logaddexp 2 (0.50)
 *   float64
 *   exp      2 (0.74)   expm1  2 (1.75)   log    2 (0.76)   log1p   2 (0.73)
 *   log2     2 (1.68)   tanh   3 (2.26)   sigmoid 3 (1.83)  sinh    3 (2.01)
 *   cosh     3 (1.85)   silu   4 (2.74)   gelu_tanh 4 (2.68)
 *   logaddexp 2 (1.40; in ulps of max(|result|, |a|, |b|): the formula
 *            cancels near 0 and double has no wider type to hide that in)
 *   power    4 (0.75)   arctan2 4 (1.07)  arctan 4 (1.05)   arcsin  4 (0.64)
 *   arccos   4 (0.76)   sin    4 (0.77)   cos    4 (0.77)   tan     4 (2.05)
 *   erf      4 (1.23)
 *   (power: also x near 1 with |y| up to 2^40, results from overflow down
 *   to the subnormals; sin/cos/tan: also the doubles closest to multiples
 *   of pi/2 below 2^20, and exact tables of C99's special cases)
 *   gelu (scalar, libm erfc corrected) 4 (3.63)
 *
 * Non-finite results must match exactly (NaN for NaN, infinities by sign),
 * zero results by sign, and the variants must agree bit for bit (except
 * the baseline's libm functions, see vmath.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "harness.h"

typedef long double ld;

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
enum { SWEEP_SHIFT = 3 }; /* sanitizers: 8x fewer points */
#else
enum { SWEEP_SHIFT = 0 };
#endif

/* ---------------------------------------------------------------- references */

static ld r_exp(ld x) { return expl(x); }
static ld r_expm1(ld x) { return expm1l(x); }
static ld r_log(ld x) { return logl(x); }
static ld r_log1p(ld x) { return log1pl(x); }
static ld r_log2(ld x) { return log2l(x); }
static ld r_tanh(ld x) { return tanhl(x); }
static ld r_sigmoid(ld x) { return 1.0L / (1.0L + expl(-x)); }
static ld r_erf(ld x) { return erfl(x); }
static ld r_sin(ld x) { return sinl(x); }
static ld r_cos(ld x) { return cosl(x); }
static ld r_tan(ld x) { return tanl(x); }
static ld r_sinh(ld x) { return sinhl(x); }
static ld r_cosh(ld x) { return coshl(x); }
static ld r_asin(ld x) { return asinl(x); }
static ld r_acos(ld x) { return acosl(x); }
static ld r_atan(ld x) { return atanl(x); }
/* silu, gelu, gelu_tanh give -0 at -inf (their limit). */
static ld r_silu(ld x) { return x == -INFINITY ? -0.0L : x / (1.0L + expl(-x)); }
/* gelu = x erfc(z)/2, z = -x/sqrt2 in long double, with the rounding dz of
 * z corrected (erfc(z + dz) = erfc(z) (1 - k dz), k = erfc'/erfc): without
 * it the reference itself is off by 2 z^2 2^-64, 0.7 ulp of a double at
 * x = -38. 1/sqrt2 = c + c_lo (mpmath). */
static ld r_gelu(ld x)
{
    if (x == -INFINITY)
        return -0.0L;
    const ld c = 0.707106781186547524381894L, c_lo = 1.89503255889325707965571e-20L;
    const ld z = -x * c;
    const ld dz = fmal(-x, c, -z) + -x * c_lo;
    const ld ec = erfcl(z);
    if (!(z > 0.5L) || !(ec > 0))
        return 0.5L * x * ec;
    const ld k = 1.128379167095512573896158903121545172L * expl(-z * z) / ec;
    return 0.5L * x * (ec - ec * k * dz);
}
static ld r_gelu_tanh(ld x)
{
    const ld k1 = 2.0L * sqrtl(2.0L / 3.14159265358979323846264338327950288L);
    const ld u2 = x * (k1 + k1 * 0.044715L * x * x);
    return x == -INFINITY ? -0.0L : x / (1.0L + expl(-u2));
}
static ld r_pow(ld a, ld b) { return powl(a, b); }
static ld r_atan2(ld a, ld b) { return atan2l(a, b); }
static ld r_logaddexp(ld a, ld b)
{
    if (a != a || b != b)
        return a + b;
    if (a == b)
        return a + 0.693147180559945309417232121458176568L;
    const ld m = a > b ? a : b;
    return m + log1pl(expl(-fabsl(a - b)));
}

/* ---------------------------------------------------------------- cases */

enum vm_kind { F32, F64, F32_2, F64_2 };

typedef struct vm_case {
    const char *name;
    size_t offset; /* of the function in wf_vm_table */
    enum vm_kind kind;
    ld (*ref)(ld);
    ld (*ref2)(ld, ld);
    double bound; /* ulp */
    double lo, hi; /* uniform points */
    bool of_max;   /* ulp of max(|result|, |a|, |b|): the formula cancels */
    bool libm_on_baseline; /* the baseline calls libm: not bit-identical */
} vm_case;

#define CASE1(field, kind, ref, bound, lo, hi)                                             \
    {#field, offsetof(wf_vm_table, field), kind, ref, NULL, bound, lo, hi, false, false}
#define CASE2(field, kind, ref, bound, lo, hi)                                             \
    {#field, offsetof(wf_vm_table, field), kind, NULL, ref, bound, lo, hi, false, false}
#define CASE1_LIBM0(field, kind, ref, bound, lo, hi)                                       \
    {#field, offsetof(wf_vm_table, field), kind, ref, NULL, bound, lo, hi, false, true}
#define CASE2_LIBM0(field, kind, ref, bound, lo, hi)                                       \
    {#field, offsetof(wf_vm_table, field), kind, NULL, ref, bound, lo, hi, false, true}

static const vm_case vm_cases[] = {
    CASE1(exp, F32, r_exp, 2, -104, 89),
    CASE1(expm1, F32, r_expm1, 2, -20, 89),
    CASE1(log, F32, r_log, 2, 0, 100),
    CASE1(log1p, F32, r_log1p, 2, -1, 100),
    CASE1(log2, F32, r_log2, 3, 0, 100),
    CASE1(tanh, F32, r_tanh, 3, -10, 10),
    CASE1(sigmoid, F32, r_sigmoid, 3, -110, 30),
    CASE1(erf, F32, r_erf, 4, -5, 5),
    CASE1(sin, F32, r_sin, 3, -4096, 4096),
    CASE1(cos, F32, r_cos, 3, -4096, 4096),
    CASE1(tan, F32, r_tan, 5, -10, 10),
    CASE1(sinh, F32, r_sinh, 3, -90, 90),
    CASE1(cosh, F32, r_cosh, 3, -90, 90),
    CASE1(arcsin, F32, r_asin, 3, -1, 1),
    CASE1(arccos, F32, r_acos, 3, -1, 1),
    CASE1(arctan, F32, r_atan, 3, -10, 10),
    CASE1(silu, F32, r_silu, 4, -110, 20),
    CASE1(gelu, F32, r_gelu, 4, -15, 6),
    CASE1(gelu_tanh, F32, r_gelu_tanh, 4, -12, 6),
    CASE2_LIBM0(power, F32_2, r_pow, 2, 0, 0),
    CASE2(arctan2, F32_2, r_atan2, 3, 0, 0),
    CASE2_LIBM0(logaddexp, F32_2, r_logaddexp, 2, 0, 0),
    CASE1_LIBM0(exp_f64, F64, r_exp, 2, -746, 710),
    CASE1_LIBM0(expm1_f64, F64, r_expm1, 2, -40, 710),
    CASE1_LIBM0(log_f64, F64, r_log, 2, 0, 100),
    CASE1_LIBM0(log1p_f64, F64, r_log1p, 2, -1, 100),
    CASE1_LIBM0(log2_f64, F64, r_log2, 2, 0, 100),
    CASE1_LIBM0(tanh_f64, F64, r_tanh, 3, -20, 20),
    CASE1_LIBM0(sigmoid_f64, F64, r_sigmoid, 3, -750, 40),
    CASE1_LIBM0(sinh_f64, F64, r_sinh, 3, -711, 711),
    CASE1_LIBM0(cosh_f64, F64, r_cosh, 3, -711, 711),
    CASE1(silu_f64, F64, r_silu, 4, -760, 40),
    CASE1(gelu_tanh_f64, F64, r_gelu_tanh, 4, -25, 10),
    /* max(a, b) + log1p(e^-|a-b|) cancels where the sum is near 0; in
     * double there is no wider type to hide it (float32 computes in double) */
    {"logaddexp_f64", offsetof(wf_vm_table, logaddexp_f64), F64_2, NULL, r_logaddexp, 2, 0, 0,
     true, true},
    CASE2_LIBM0(power_f64, F64_2, r_pow, 4, 0, 0),
    CASE2_LIBM0(arctan2_f64, F64_2, r_atan2, 4, 0, 0),
    CASE1_LIBM0(arctan_f64, F64, r_atan, 4, -10, 10),
    CASE1_LIBM0(arcsin_f64, F64, r_asin, 4, -1, 1),
    CASE1_LIBM0(arccos_f64, F64, r_acos, 4, -1, 1),
    CASE1_LIBM0(sin_f64, F64, r_sin, 4, -20, 20),
    CASE1_LIBM0(cos_f64, F64, r_cos, 4, -1100000, 1100000),
    CASE1_LIBM0(tan_f64, F64, r_tan, 4, -100000, 100000),
    CASE1_LIBM0(erf_f64, F64, r_erf, 4, -6.5, 6.5),
};
enum { NVM = sizeof vm_cases / sizeof vm_cases[0] };

static size_t elem_size(const vm_case *c) { return c->kind == F32 || c->kind == F32_2 ? 4 : 8; }
static bool two_inputs(const vm_case *c) { return c->kind == F32_2 || c->kind == F64_2; }

/* Runs the case's function of table t on n points (b unused for one input). */
static void run_case(const vm_case *c, const wf_vm_table *t, int64_t n, const void *a,
                     const void *b, void *y)
{
    void *fp;
    memcpy(&fp, (const char *)t + c->offset, sizeof fp);
    switch (c->kind) {
    case F32: {
        wf_vm_fn f;
        memcpy(&f, &fp, sizeof f);
        f(n, a, y);
        break;
    }
    case F64: {
        wf_vm_fn_f64 f;
        memcpy(&f, &fp, sizeof f);
        f(n, a, y);
        break;
    }
    case F32_2: {
        wf_vm_fn2 f;
        memcpy(&f, &fp, sizeof f);
        f(n, a, b, y);
        break;
    }
    case F64_2: {
        wf_vm_fn2_f64 f;
        memcpy(&f, &fp, sizeof f);
        f(n, a, b, y);
        break;
    }
    }
}

/* ---------------------------------------------------------------- points */

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 11;
}
static double rng_unit(uint64_t *s) { return (double)rng_next(s) * 0x1p-53; }

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static double f64_from_bits(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static const double edges[] = {
    0.0,   -0.0,   1.0,    -1.0,   0.5,    -0.5,  0x1p-149, -0x1p-149, 0x1p-126, 0x1p-25,
    0x1p-12, 88.72, 88.73, -87.33, -103.9, -104.1, 0.875,   -0.875,    4.0,      3.92,
    9.5,   1.5707964, 3.1415927, 4096.0, 4097.0, 1e10, -1e-30, 0.99999994, 1.0000001,
    INFINITY, -INFINITY, NAN, 0.33333334, -0.33333334, 0.6666667, 1.3333334, -89.05,
    -14.4, -14.5, -15.0, 15.0, 44.0, -44.0, 89.4, 89.5, -10.0, -20.1, 0.41421356, 2.4142135,
    0x1p-1022, 0x1p-1074, -745.2, -745.0, 709.78, 709.79, -38.0, 700.0, 710.5, 0x1p-54,
    0x1p-27, -0x1p-1074, 19.1, 1e300, -751.0, -1e300, 0.70710678, 1.41421356, -0.9999999};
enum { NEDGE = sizeof edges / sizeof edges[0] };

/* Special values for two-input functions: every pair is tested. */
static const double specials2[] = {0.0,  -0.0, 1.0,  -1.0, 0.5,  -0.5, 2.0,     -2.0,
                                   3.0,  -3.0, 2.5,  -2.5, 1e30, -1e30, 1e-30, -1e-30,
                                   INFINITY, -INFINITY, NAN, 0x1p-149, 127.5, -149.5,
                                   16777216.0, 16777217.0, -33554432.0, 0.75, 7.0, 88.0};
enum { NSPEC2 = sizeof specials2 / sizeof specials2[0] };

/* float64 power's region, from uniform u, v in [0, 1): x in (0, 4] with y
 * in [-600, 600] (results up to the overflow and down to the subnormals),
 * x in [-4, 0) with an integer y, x within 2^-20 of 1 with |y| up to 2^40,
 * and x over the whole positive range with y in [-2, 2]. */
static void power_f64_point(int64_t i, double u, double v, double *x, double *y)
{
    switch (i & 3) {
    case 0:
        *x = 4.0 * u;
        *y = 1200.0 * v - 600.0;
        break;
    case 1:
        *x = -4.0 * u;
        *y = floor(1200.0 * v - 600.0);
        break;
    case 2:
        *x = 1.0 + (u - 0.5) * 0x1p-19;
        *y = ldexp(v - 0.5, (int)(i % 41));
        break;
    default:
        *x = ldexp(u + 0.5, (int)(i % 2046) - 1023 - 50);
        *y = 4.0 * v - 2.0;
        break;
    }
}

/* Fills a (and b) with the sweep's points in the case's type; returns n. */
static int64_t make_points(const vm_case *c, void **pa, void **pb)
{
    const int64_t nbits = ((int64_t)1 << 20) >> SWEEP_SHIFT;
    const int64_t nuni = ((int64_t)1 << 18) >> SWEEP_SHIFT;
    const int64_t cap = nbits + nuni + NEDGE + NSPEC2 * NSPEC2;
    const bool f32 = elem_size(c) == 4;
    double *da = malloc((size_t)cap * sizeof *da), *db = malloc((size_t)cap * sizeof *db);
    uint64_t s = 0x9e3779b97f4a7c15u ^ (uint64_t)c->offset;
    int64_t n = 0;
    if (!two_inputs(c)) {
        const int64_t stride32 = (int64_t)4096 << SWEEP_SHIFT, stride64 = (int64_t)1 << (44 + SWEEP_SHIFT);
        for (int64_t i = 0; i < nbits; i++, n++)
            da[n] = f32 ? f32_from_bits((uint32_t)(i * stride32 + 1234))
                        : f64_from_bits((uint64_t)i * (uint64_t)stride64 + 123456789u);
        for (int64_t i = 0; i < nuni; i++, n++)
            da[n] = c->lo + (c->hi - c->lo) * rng_unit(&s);
        for (int64_t i = 0; i < NEDGE; i++, n++)
            da[n] = edges[i];
    } else {
        for (int64_t i = 0; i < nbits / 2; i++, n++) {
            const uint64_t u = rng_next(&s), v = rng_next(&s);
            da[n] = f32 ? f32_from_bits((uint32_t)u) : f64_from_bits(u << 11 | (v & 2047u));
            db[n] = f32 ? f32_from_bits((uint32_t)v) : f64_from_bits(v << 11 | (u & 2047u));
        }
        for (int64_t i = 0; i < nuni; i++, n++) {
            const double u = rng_unit(&s), v = rng_unit(&s);
            if (c->offset == offsetof(wf_vm_table, power_f64)) {
                power_f64_point(i, u, v, &da[n], &db[n]);
            } else if (c->offset == offsetof(wf_vm_table, power)) {
                /* x in (0, 4] with y in [-60, 60], or x in [-4, 0) with an integer y */
                da[n] = (i & 1) ? 4.0 * u : -4.0 * u;
                db[n] = (i & 1) ? 120.0 * v - 60.0 : floor(60.0 * v - 30.0);
            } else if (c->offset == offsetof(wf_vm_table, arctan2) ||
                       c->offset == offsetof(wf_vm_table, arctan2_f64)) {
                da[n] = 20.0 * u - 10.0;
                db[n] = 20.0 * v - 10.0;
            } else { /* logaddexp: near each other, and anywhere */
                da[n] = 200.0 * u - 100.0;
                db[n] = (i & 1) ? da[n] + 8.0 * v - 4.0 : 200.0 * v - 100.0;
            }
        }
        for (int i = 0; i < NSPEC2; i++)
            for (int j = 0; j < NSPEC2; j++, n++) {
                da[n] = specials2[i];
                db[n] = specials2[j];
            }
    }
    *pa = malloc((size_t)n * 8);
    *pb = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) {
        if (f32) {
            ((float *)*pa)[i] = (float)da[i];
            ((float *)*pb)[i] = (float)db[i];
        } else {
            ((double *)*pa)[i] = da[i];
            ((double *)*pb)[i] = db[i];
        }
    }
    free(da);
    free(db);
    return n;
}

/* ---------------------------------------------------------------- sweep */

static ld ulp_in(ld r, bool f32)
{
    r = fabsl(r);
    const ld tiny = f32 ? 0x1p-126L : 0x1p-1022L;
    if (r < tiny)
        return f32 ? 0x1p-149L : 0x1p-1074L;
    int e;
    frexpl(r, &e);
    return ldexpl(1.0L, e - (f32 ? 24 : 53));
}

static ld load_point(const void *p, int64_t i, bool f32)
{
    return f32 ? (ld)((const float *)p)[i] : (ld)((const double *)p)[i];
}

/* Checks y against the references; returns the worst error in ulp. */
static double check_results(const vm_case *c, const char *isa, int64_t n, const void *a,
                            const void *b, const void *y, const ld *ref)
{
    const bool f32 = elem_size(c) == 4;
    double worst = 0;
    int64_t worst_i = 0;
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; i++) {
        const ld r = ref[i], got = load_point(y, i, f32);
        const ld rt = f32 ? (ld)(float)r : (ld)(double)r; /* rounded to the type */
        bool ok = true;
        if (isnan(r))
            ok = isnan(got);
        else if (isinf(rt))
            ok = got == rt;
        else if (!isfinite(got))
            ok = false;
        else if (rt == 0 && got == 0)
            ok = signbit(got) == signbit(rt);
        else {
            ld scale = fabsl(r);
            if (c->of_max) {
                const ld ma = fabsl(load_point(a, i, f32)), mb = fabsl(load_point(b, i, f32));
                scale = fmaxl(scale, fmaxl(ma, mb));
            }
            const double e = (double)(fabsl(got - r) / ulp_in(scale, f32));
            if (e > worst) {
                worst = e;
                worst_i = i;
            }
        }
        if (!ok) {
            if (two_inputs(c))
                printf("    %s/%s(%La, %La) = %La, want %La\n", c->name, isa,
                       load_point(a, i, f32), load_point(b, i, f32), got, rt);
            else
                printf("    %s/%s(%La) = %La, want %La\n", c->name, isa, load_point(a, i, f32),
                       got, rt);
            bad++;
        }
    }
    CHECK(bad == 0);
    if (two_inputs(c))
        printf("    %-14s %-8s max error %.3f ulp at (%La, %La) (bound %g)\n", c->name, isa,
               worst, load_point(a, worst_i, f32), load_point(b, worst_i, f32), c->bound);
    else
        printf("    %-14s %-8s max error %.3f ulp at %La (bound %g)\n", c->name, isa, worst,
               load_point(a, worst_i, f32), c->bound);
    return worst;
}

static void sweep_case(const vm_case *c)
{
    void *a, *b;
    const int64_t n = make_points(c, &a, &b);
    const bool f32 = elem_size(c) == 4;
    ld *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++)
        ref[i] = two_inputs(c) ? c->ref2(load_point(a, i, f32), load_point(b, i, f32))
                               : c->ref(load_point(a, i, f32));
    const size_t bytes = (size_t)n * elem_size(c);
    char *y = malloc(bytes), *y0 = malloc(bytes);
    bool have0 = false;
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        const wf_vm_table *t = wf__vm_table(isa);
        if (!t || !wf_test_runs_isa(isa, wf__vm_isa_best()))
            continue;
        run_case(c, t, n, a, b, y);
        const double worst = check_results(c, wf__vm_isa_name(isa), n, a, b, y, ref);
        CHECK(worst <= c->bound);
        if (c->libm_on_baseline && isa == WF_VM_ISA_BASELINE)
            continue; /* libm: checked against the bound only */
        if (!have0) {
            memcpy(y0, y, bytes);
            have0 = true;
            continue;
        }
        /* bit-identical across variants (NaN payloads aside) */
        int64_t diff = 0;
        for (int64_t i = 0; i < n; i++) {
            const size_t k = elem_size(c);
            const bool both_nan = isnan(load_point(y, i, f32)) && isnan(load_point(y0, i, f32));
            if (memcmp(y + (size_t)i * k, y0 + (size_t)i * k, k) != 0 && !both_nan)
                diff++;
        }
        CHECK_EQ_INT(diff, 0);
    }
    free(ref);
    free(a);
    free(b);
    free(y);
    free(y0);
}

static void test_max_error_every_isa(void)
{
    for (int k = 0; k < NVM; k++)
        sweep_case(&vm_cases[k]);
}

/* Lengths 0..40 (tails padded into a block) and an unaligned start give the
 * same values as the long run; nothing is written outside. */
static void test_tails(void)
{
    for (int k = 0; k < NVM; k++) {
        const vm_case *c = &vm_cases[k];
        const size_t es = elem_size(c);
        char a[64 * 8], b[64 * 8], y[64 * 8], ylong[64 * 8], guard[8];
        for (int i = 0; i < 64; i++) {
            const double va = (double)i * 0.37 - 11.0, vb = 3.0 - (double)i * 0.21;
            if (es == 4) {
                ((float *)a)[i] = (float)va;
                ((float *)b)[i] = (float)vb;
            } else {
                ((double *)a)[i] = va;
                ((double *)b)[i] = vb;
            }
        }
        memset(guard, 0x5a, sizeof guard);
        const wf_vm_table *t = wf__vm_table(wf__vm_isa_best());
        run_case(c, t, 64, a, b, ylong);
        for (int n = 0; n <= 40; n++) {
            for (int i = 0; i < 64; i++)
                memcpy(y + (size_t)i * es, guard, es);
            run_case(c, t, n, a + 3 * es, b + 3 * es, y + es);
            for (int i = 0; i < n; i++)
                if (memcmp(y + (size_t)(1 + i) * es, ylong + (size_t)(3 + i) * es, es) != 0)
                    CHECK(!printf("    %s len %d index %d\n", c->name, n, i));
            CHECK(memcmp(y, guard, es) == 0 && memcmp(y + (size_t)(1 + n) * es, guard, es) == 0);
        }
    }
}

/* Exact special values of the dispatched functions. */
static void test_specials(void)
{
    const float in[] = {INFINITY, -INFINITY, 0.0f, -0.0f, NAN};
    float out[5];
    wf__vm_exp_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == 0 && out[2] == 1 && out[3] == 1 && isnan(out[4]));
    wf__vm_expm1_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == -1 && out[2] == 0 && signbit(out[3]) && isnan(out[4]));
    wf__vm_log_f32(5, in, out);
    CHECK(out[0] == INFINITY && isnan(out[1]) && out[2] == -INFINITY && out[3] == -INFINITY &&
          isnan(out[4]));
    wf__vm_log1p_f32(5, in, out);
    CHECK(out[0] == INFINITY && isnan(out[1]) && out[2] == 0 && signbit(out[3]) && isnan(out[4]));
    wf__vm_log2_f32(5, in, out);
    CHECK(out[0] == INFINITY && isnan(out[1]) && out[2] == -INFINITY && isnan(out[4]));
    wf__vm_tanh_f32(5, in, out);
    CHECK(out[0] == 1 && out[1] == -1 && out[2] == 0 && signbit(out[3]) && isnan(out[4]));
    wf__vm_sigmoid_f32(5, in, out);
    CHECK(out[0] == 1 && out[1] == 0 && out[2] == 0.5f && out[3] == 0.5f && isnan(out[4]));
    wf__vm_erf_f32(5, in, out);
    CHECK(out[0] == 1 && out[1] == -1 && out[2] == 0 && signbit(out[3]) && isnan(out[4]));
    wf__vm_sin_f32(5, in, out);
    CHECK(isnan(out[0]) && isnan(out[1]) && out[2] == 0 && signbit(out[3]) && isnan(out[4]));
    wf__vm_cos_f32(5, in, out);
    CHECK(isnan(out[0]) && isnan(out[1]) && out[2] == 1 && out[3] == 1 && isnan(out[4]));
    wf__vm_tan_f32(5, in, out);
    CHECK(isnan(out[0]) && isnan(out[1]) && out[2] == 0 && signbit(out[3]) && isnan(out[4]));
    wf__vm_sinh_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == -INFINITY && out[2] == 0 && signbit(out[3]) &&
          isnan(out[4]));
    wf__vm_cosh_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == INFINITY && out[2] == 1 && out[3] == 1 &&
          isnan(out[4]));
    wf__vm_arctan_f32(5, in, out);
    CHECK(out[0] == 0x1.921fb6p+0f && out[1] == -0x1.921fb6p+0f && out[2] == 0 &&
          signbit(out[3]) && isnan(out[4]));
    wf__vm_silu_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == 0 && signbit(out[1]) && out[2] == 0 &&
          signbit(out[3]) && isnan(out[4]));
    wf__vm_gelu_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == 0 && signbit(out[1]) && out[2] == 0 &&
          signbit(out[3]) && isnan(out[4]));
    wf__vm_gelu_tanh_f32(5, in, out);
    CHECK(out[0] == INFINITY && out[1] == 0 && signbit(out[1]) && out[2] == 0 &&
          signbit(out[3]) && isnan(out[4]));
    const float outside[3] = {1.0000001f, -1.5f, INFINITY};
    wf__vm_arcsin_f32(3, outside, out);
    CHECK(isnan(out[0]) && isnan(out[1]) && isnan(out[2]));
    wf__vm_arccos_f32(3, outside, out);
    CHECK(isnan(out[0]) && isnan(out[1]) && isnan(out[2]));
    const double ind[] = {INFINITY, -INFINITY, 0.0, -0.0, NAN};
    double outd[5];
    wf__vm_exp_f64(5, ind, outd);
    CHECK(outd[0] == INFINITY && outd[1] == 0 && outd[2] == 1 && outd[3] == 1 && isnan(outd[4]));
    wf__vm_log_f64(5, ind, outd);
    CHECK(outd[0] == INFINITY && isnan(outd[1]) && outd[2] == -INFINITY &&
          outd[3] == -INFINITY && isnan(outd[4]));
    wf__vm_tanh_f64(5, ind, outd);
    CHECK(outd[0] == 1 && outd[1] == -1 && outd[2] == 0 && signbit(outd[3]) && isnan(outd[4]));
    wf__vm_silu_f64(5, ind, outd);
    CHECK(outd[0] == INFINITY && outd[1] == 0 && signbit(outd[1]) && isnan(outd[4]));
}

/* C99 Annex F's special cases of pow and atan2, and atan/asin/acos/erf at
 * their special points, asserted bit for bit (signed zeros included; any
 * NaN for NaN) in every variant this CPU runs. */
#define PI_D 0x1.921fb54442d18p+1
#define PIO2_D 0x1.921fb54442d18p+0
#define PIO4_D 0x1.921fb54442d18p-1
#define PI3O4_D 0x1.2d97c7f3321d2p+1
static const double pow_table[][3] = { /* x, y, pow(x, y) */
    {0.0, -3.0, INFINITY}, {-0.0, -3.0, -INFINITY}, {0.0, -INFINITY, INFINITY},
    {-0.0, -INFINITY, INFINITY}, {0.0, -2.0, INFINITY}, {-0.0, -2.5, INFINITY},
    {-0.0, -1e300, INFINITY}, {0.0, 3.0, 0.0}, {-0.0, 3.0, -0.0}, {-0.0, 2.0, 0.0},
    {-0.0, 0.5, 0.0}, {-0.0, INFINITY, 0.0}, {-1.0, INFINITY, 1.0}, {-1.0, -INFINITY, 1.0},
    {1.0, NAN, 1.0}, {1.0, INFINITY, 1.0}, {1.0, -1e300, 1.0}, {NAN, 0.0, 1.0},
    {NAN, -0.0, 1.0}, {INFINITY, 0.0, 1.0}, {-INFINITY, -0.0, 1.0}, {-3.0, 0.0, 1.0},
    {-2.0, 0.5, NAN}, {-0.5, -1.5, NAN}, {-1e-300, 1e-300, NAN}, {0.5, -INFINITY, INFINITY},
    {-0.5, -INFINITY, INFINITY}, {2.0, -INFINITY, 0.0}, {-2.0, -INFINITY, 0.0},
    {0.5, INFINITY, 0.0}, {-0.5, INFINITY, 0.0}, {2.0, INFINITY, INFINITY},
    {-2.0, INFINITY, INFINITY}, {-INFINITY, -3.0, -0.0}, {-INFINITY, -2.0, 0.0},
    {-INFINITY, -0.5, 0.0}, {-INFINITY, 3.0, -INFINITY}, {-INFINITY, 2.0, INFINITY},
    {-INFINITY, 0.5, INFINITY}, {INFINITY, -1.0, 0.0}, {INFINITY, 1e-300, INFINITY},
    {NAN, 1.0, NAN}, {1.5, NAN, NAN}, {-NAN, 2.0, NAN}, {10.0, 400.0, INFINITY},
    {-10.0, 401.0, -INFINITY}, {-10.0, 400.0, INFINITY}, {10.0, -400.0, 0.0},
    {-10.0, -401.0, -0.0}, {1e300, 1e300, INFINITY}, {1e-300, 1e300, 0.0},
    {2.0, 10.0, 1024.0}, {-2.0, 3.0, -8.0}, {4.0, 0.5, 2.0}, {2.0, -1074.0, 0x1p-1074},
    {2.0, 1023.0, 0x1p1023}, {-2.0, -1073.0, -0x1p-1073}, {0x1p-1074, 1.0, 0x1p-1074},
    {0x1p-1074, 0.5, 0x1p-537}, {-1.0, 4503599627370497.0, -1.0},
    {-1.0, 9007199254740992.0, 1.0}, {-1.0, 1e300, 1.0}, {-1.0, -4503599627370495.0, -1.0},
    {-1.0, 0.5, NAN}, {-1.0, 4503599627370495.5, NAN}, {3.0, 2.0, 9.0}, {10.0, 22.0, 1e22},
};
static const double atan2_table[][3] = { /* y, x, atan2(y, x) */
    {0.0, -0.0, PI_D}, {-0.0, -0.0, -PI_D}, {0.0, 0.0, 0.0}, {-0.0, 0.0, -0.0},
    {0.0, -2.0, PI_D}, {-0.0, -2.0, -PI_D}, {0.0, 2.0, 0.0}, {-0.0, 2.0, -0.0},
    {-2.0, 0.0, -PIO2_D}, {-2.0, -0.0, -PIO2_D}, {2.0, 0.0, PIO2_D}, {2.0, -0.0, PIO2_D},
    {2.0, -INFINITY, PI_D}, {-2.0, -INFINITY, -PI_D}, {2.0, INFINITY, 0.0},
    {-2.0, INFINITY, -0.0}, {INFINITY, 2.0, PIO2_D}, {-INFINITY, -2.0, -PIO2_D},
    {INFINITY, -INFINITY, PI3O4_D}, {-INFINITY, -INFINITY, -PI3O4_D},
    {INFINITY, INFINITY, PIO4_D}, {-INFINITY, INFINITY, -PIO4_D}, {1.0, 1.0, PIO4_D},
    {-1e300, -1e300, -PI3O4_D}, {0x1p-1074, 0x1p-1074, PIO4_D}, {NAN, 1.0, NAN},
    {1.0, NAN, NAN}, {NAN, NAN, NAN}, {INFINITY, NAN, NAN}, {0x1p-1074, 1e300, 0.0},
    {1e-300, 1e300, 0.0}, {1e300, 1e-300, PIO2_D}, {-1e-300, -1e300, -PI_D},
};
static const double unary_table[][4] = { /* x, atan, asin, acos */
    {0.0, 0.0, 0.0, PIO2_D}, {-0.0, -0.0, -0.0, PIO2_D}, {INFINITY, PIO2_D, NAN, NAN},
    {-INFINITY, -PIO2_D, NAN, NAN}, {NAN, NAN, NAN, NAN}, {1.0, PIO4_D, PIO2_D, 0.0},
    {-1.0, -PIO4_D, -PIO2_D, PI_D}, {1.0000000000000002, 0x1.921fb54442d19p-1, NAN, NAN},
    {-1.5, -0x1.f730bd281f69bp-1, NAN, NAN}, {0x1p-1074, 0x1p-1074, 0x1p-1074, PIO2_D},
    {-0x1p-1022, -0x1p-1022, -0x1p-1022, PIO2_D}, {1e300, PIO2_D, NAN, NAN},
};

static bool same_double(double got, double want)
{
    return isnan(want) ? isnan(got) : memcmp(&got, &want, sizeof got) == 0;
}

static void check_pairs(const char *name, const char *isa, wf_vm_fn2_f64 f,
                        const double (*table)[3], int n)
{
    double a[128] = {0}, b[128] = {0}, y[128];
    for (int i = 0; i < n; i++) {
        a[i] = table[i][0];
        b[i] = table[i][1];
    }
    f(n, a, b, y);
    for (int i = 0; i < n; i++)
        if (!same_double(y[i], table[i][2]))
            CHECK(!printf("    %s/%s(%a, %a) = %a, want %a\n", name, isa, a[i], b[i], y[i],
                          table[i][2]));
}

static void test_specials_f64_every_isa(void)
{
    enum { NPOW = sizeof pow_table / sizeof pow_table[0] };
    enum { NATAN2 = sizeof atan2_table / sizeof atan2_table[0] };
    enum { NUN = sizeof unary_table / sizeof unary_table[0] };
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        const wf_vm_table *t = wf__vm_table(isa);
        if (!t || !wf_test_runs_isa(isa, wf__vm_isa_best()))
            continue;
        const char *name = wf__vm_isa_name(isa);
        check_pairs("pow", name, t->power_f64, pow_table, NPOW);
        check_pairs("atan2", name, t->arctan2_f64, atan2_table, NATAN2);
        const wf_vm_fn_f64 fns[3] = {t->arctan_f64, t->arcsin_f64, t->arccos_f64};
        static const char *const fn_names[3] = {"atan", "asin", "acos"};
        double x[NUN], y[NUN];
        for (int i = 0; i < NUN; i++)
            x[i] = unary_table[i][0];
        static const double erf_in[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 6.0, -5.95,
                                        1e300, 0x1p-1074, -0x1p-1074};
        static const double erf_want[] = {0.0, -0.0, 1.0, -1.0, NAN, 1.0, -1.0,
                                          1.0, 0x1p-1074, -0x1p-1074};
        enum { NERF = sizeof erf_in / sizeof erf_in[0] };
        double ye[NERF];
        t->erf_f64(NERF, erf_in, ye);
        for (int i = 0; i < NERF; i++)
            if (!same_double(ye[i], erf_want[i]))
                CHECK(!printf("    erf/%s(%a) = %a, want %a\n", name, erf_in[i], ye[i],
                              erf_want[i]));
        for (int k = 0; k < 3; k++) {
            fns[k](NUN, x, y);
            for (int i = 0; i < NUN; i++)
                if (!same_double(y[i], unary_table[i][1 + k]))
                    CHECK(!printf("    %s/%s(%a) = %a, want %a\n", fn_names[k], name, x[i],
                                  y[i], unary_table[i][1 + k]));
        }
    }
}

/* float64 sin, cos, tan at the doubles closest to multiples of pi/2 in
 * the vectorized range (|x| <= 2^20; found by an exact search over every
 * multiple, with mpmath: the first is within 2^-54.3 of 204551 pi/2), with
 * both signs, against the long double references; and exact values: odd
 * functions keep -0 and tiny x, cos(+-0) = 1, inf and NaN give NaN, and
 * beyond 2^20 the result is libm's, bit for bit. */
static void test_trig_f64_every_isa(void)
{
    static const double hard[] = {0x1.39c6fd67805a7p+18, 0x1.39c6fd67805a7p+19,
                                  0x1.a9adcc7f96cf0p+19, 0x1.93c05c9ed3cbcp+18,
                                  0x1.93c05c9ed3cbcp+19, 0x1.23d98d86bd573p+19,
                                  0x1.4fb46d48435dbp+19, 0x1.edb9bbd6273d1p+18};
    enum { NHARD = sizeof hard / sizeof hard[0] };
    static const double exact_in[] = {0.0, -0.0, 0x1p-1074, -0x1p-1030, INFINITY, -INFINITY,
                                      NAN, 0x1.0000000000001p+20, -3e6, 1e300, -0x1p1023};
    enum { NEX = sizeof exact_in / sizeof exact_in[0] };
    ld (*const refs[3])(ld) = {r_sin, r_cos, r_tan};
    double (*const libm[3])(double) = {sin, cos, tan};
    static const char *const names[3] = {"sin", "cos", "tan"};
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        const wf_vm_table *t = wf__vm_table(isa);
        if (!t || !wf_test_runs_isa(isa, wf__vm_isa_best()))
            continue;
        const wf_vm_fn_f64 fns[3] = {t->sin_f64, t->cos_f64, t->tan_f64};
        for (int k = 0; k < 3; k++) {
            double x[2 * NHARD], y[2 * NHARD];
            for (int i = 0; i < NHARD; i++) {
                x[2 * i] = hard[i];
                x[2 * i + 1] = -hard[i];
            }
            fns[k](2 * NHARD, x, y);
            double worst = 0;
            for (int i = 0; i < 2 * NHARD; i++) {
                const ld r = refs[k](x[i]);
                const double e = (double)(fabsl(y[i] - r) / ulp_in(r, false));
                worst = e > worst ? e : worst;
            }
            printf("    %s %s near multiples of pi/2: max error %.3f ulp (bound 4)\n", names[k],
                   wf__vm_isa_name(isa), worst);
            CHECK(worst <= 4);
            double ye[NEX];
            fns[k](NEX, exact_in, ye);
            for (int i = 0; i < NEX; i++) {
                const double want = fabs(exact_in[i]) < 0x1p-60 && k != 1 ? exact_in[i]
                                                                          : libm[k](exact_in[i]);
                if (!same_double(ye[i], want))
                    CHECK(!printf("    %s/%s(%a) = %a, want %a\n", names[k],
                                  wf__vm_isa_name(isa), exact_in[i], ye[i], want));
            }
        }
    }
}

/* The activations' negative tails, against values computed with mpmath
 * (50 digits) and written here (x are the float32 or float64 inputs). */
static void test_activation_tails(void)
{
    static const struct {
        float x, want, tol; /* tol in absolute terms: n ulp of want */
        wf_vm_fn *fn;
    } f32[] = {
        /* silu(-89.05f): the old path gave -0.0 */
        {-89.05f, -1.886726719242687181e-37f, 2 * 0x1p-146f, NULL},
        {-10.0f, -1.2040923482098059937e-37f, 4 * 0x1p-146f, NULL},  /* gelu_tanh */
        {-13.0f, -7.952313719414843587e-38f, 4 * 0x1p-147f, NULL},   /* gelu */
        {-14.0f, -1.0910951546869920356e-43f, 1 * 0x1p-149f, NULL},  /* gelu, subnormal */
    };
    const wf_vm_table *t = wf__vm_table(wf__vm_isa_best());
    const wf_vm_fn fns[4] = {t->silu, t->gelu_tanh, t->gelu, t->gelu};
    for (int k = 0; k < 4; k++) {
        float y;
        fns[k](1, &f32[k].x, &y);
        if (!CHECK(fabsf(y - f32[k].want) <= f32[k].tol))
            printf("    case %d: f(%a) = %a, want %a\n", k, f32[k].x, y, f32[k].want);
    }
    /* gelu float64 = x Phi(x) (mpmath, 21 digits): within 2 ulp */
    static const double g64[][2] = {
        {-38.0, -1.09646277682613803717e-314}, {-37.5, -1.72700737859323306644e-306},
        {-30.3, -1.7367122215045951149e-200},  {-25.0, -7.64174176595640229101e-137},
        {-20.1, -7.41625853607999352873e-89},  {-12.7, -3.75473641336210338782e-36},
        {-5.5, -1.04442593562382456611e-7},    {-1.3, -0.125840629961293427503},
        {-0.6, -0.164551870650044146526},      {0.25, 0.14967658142073093106},
        {2.0, 1.9544997361036415856},          {7.0, 6.99999999999104131219},
    };
    for (size_t k = 0; k < sizeof g64 / sizeof g64[0]; k++) {
        const double y = wf__vm_gelu_f64_scalar(g64[k][0]);
        const double e = (double)(fabsl((ld)y - (ld)g64[k][1]) / ulp_in(g64[k][1], false));
        if (!CHECK(e <= 2.0))
            printf("    gelu f64(%g) = %.17g, want %.17g (%.2f ulp)\n", g64[k][0], y,
                   g64[k][1], e);
    }
    CHECK(wf__vm_gelu_f64_scalar(-INFINITY) == 0 && signbit(wf__vm_gelu_f64_scalar(-INFINITY)));
    CHECK(wf__vm_gelu_f64_scalar(INFINITY) == INFINITY);
    CHECK(isnan(wf__vm_gelu_f64_scalar(NAN)));
    CHECK(wf__vm_gelu_f64_scalar(-40.0) == 0); /* below the smallest subnormal */
}

/* float64 gelu (scalar) against long double over its whole range down to
 * the last subnormal. */
static void test_gelu_f64_sweep(void)
{
    const int64_t n = ((int64_t)1 << 18) >> SWEEP_SHIFT;
    uint64_t s = 77;
    double worst = 0, worst_x = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = -38.5 + 45.0 * rng_unit(&s);
        const ld r = r_gelu(x);
        const double e = (double)(fabsl((ld)wf__vm_gelu_f64_scalar(x) - r) / ulp_in(r, false));
        if (e > worst) {
            worst = e;
            worst_x = x;
        }
    }
    printf("    gelu f64 (scalar) max error %.3f ulp at %a (bound 4)\n", worst, worst_x);
    CHECK(worst <= 4.0);
}

static void test_dispatch(void)
{
    const int best = wf__vm_isa_best();
    CHECK(best >= WF_VM_ISA_BASELINE && best < WF_VM_ISA_COUNT);
    CHECK(wf__vm_table(WF_VM_ISA_BASELINE) != NULL);
    CHECK(wf__vm_table(best) != NULL);
    CHECK(wf__vm_table(-1) == NULL && wf__vm_table(WF_VM_ISA_COUNT) == NULL);
    printf("    best variant on this CPU: %s\n", wf__vm_isa_name(best));
    CHECK_EQ_INT(wf__vm_isa_parse("baseline"), WF_VM_ISA_BASELINE);
    CHECK_EQ_INT(wf__vm_isa_parse("avx2"), WF_VM_ISA_AVX2);
    CHECK_EQ_INT(wf__vm_isa_parse("avx512"), WF_VM_ISA_AVX512);
    CHECK_EQ_INT(wf__vm_isa_parse("AVX2"), -1);
    CHECK_EQ_INT(wf__vm_isa_parse(NULL), -1);
    /* forcing: every variant this CPU runs; bad values are errors */
    for (int isa = 0; isa <= best; isa++) {
        CHECK_OK(wf__vm_isa_force(isa));
        CHECK_EQ_INT(wf__vm_isa_active(), isa);
    }
    CHECK_STATUS(wf__vm_isa_force(WF_VM_ISA_COUNT), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf__vm_isa_force(-2), WF_ERR_INVALID_ARGUMENT);
    if (best < WF_VM_ISA_AVX512)
        CHECK_STATUS(wf__vm_isa_force(WF_VM_ISA_AVX512), WF_ERR_UNSUPPORTED);
    /* -1 goes back to the default: WEFT_ISA (re-read) if this CPU runs it */
    setenv("WEFT_ISA", "baseline", 1);
    CHECK_OK(wf__vm_isa_force(-1));
    CHECK_EQ_INT(wf__vm_isa_active(), WF_VM_ISA_BASELINE);
    setenv("WEFT_ISA", "sse9", 1);
    CHECK_OK(wf__vm_isa_force(-1));
    CHECK_EQ_INT(wf__vm_isa_active(), best);
    unsetenv("WEFT_ISA");
    CHECK_OK(wf__vm_isa_force(-1));
    CHECK_EQ_INT(wf__vm_isa_active(), best);
}

/* WEFT_ISA is read at the first dispatch: main sets it before any. */
static int isa_at_start = -1;
static void test_env_at_start_up(void)
{
    printf("    WEFT_ISA=baseline at start-up gave %s\n", wf__vm_isa_name(isa_at_start));
    CHECK_EQ_INT(isa_at_start, WF_VM_ISA_BASELINE);
}

int main(void)
{
    setenv("WEFT_ISA", "baseline", 1);
    isa_at_start = wf__vm_isa_active();
    unsetenv("WEFT_ISA");
    RUN_TEST(test_env_at_start_up);
    RUN_TEST(test_dispatch);
    RUN_TEST(test_max_error_every_isa);
    RUN_TEST(test_tails);
    RUN_TEST(test_specials);
    RUN_TEST(test_specials_f64_every_isa);
    RUN_TEST(test_trig_f64_every_isa);
    RUN_TEST(test_activation_tails);
    RUN_TEST(test_gelu_f64_sweep);
    return TEST_SUMMARY();
}
