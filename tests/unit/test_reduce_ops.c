/*
 * Reductions, arg-reductions, softmax and scans through the public API
 * against plain references computed here with loops over doubles: every
 * dtype, every axis set with and without keepdims, contiguous and strided
 * (transposed) inputs, broadcast inputs, 0-d and empty arrays, NaN and
 * infinities; large inputs that take the parallel paths (split over kept
 * axes, private partial accumulators, row mode and vertical mode); and every
 * op's bad inputs (NULL, bad axes, zero-size reductions without identity)
 * give NULL with the expected status and a message.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "settle.h"
#include "conformance.h"

/* Every real dtype (complex64 reductions are rejected: test_errors). */
enum { NDTYPES = 13 };
static const wf_dtype all_dtypes[NDTYPES] = {
    WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I32, WF_DTYPE_I64, WF_DTYPE_F16,
    WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_I8,  WF_DTYPE_I16,
    WF_DTYPE_U16,  WF_DTYPE_U32, WF_DTYPE_U64,
};

static bool is_float(wf_dtype d)
{
    return d == WF_DTYPE_F16 || d == WF_DTYPE_BF16 || d == WF_DTYPE_F32 || d == WF_DTYPE_F64;
}

/* ---------------------------------------------------------------- reference */

typedef enum rop {
    R_SUM,
    R_PROD,
    R_MAX,
    R_MIN,
    R_ALL,
    R_ANY,
    R_MEAN,
    R_VAR,
    R_STD,
    R_LSE,
    R_COUNT
} rop;

static const char *const rop_names[R_COUNT] = {"sum", "prod", "max", "min", "all",
                                               "any", "mean", "var", "std", "logsumexp"};

static wf_array *call_rop(rop op, wf_array *a, const int *axes, int naxes, bool keep, int ddof)
{
    switch (op) {
    case R_SUM: return wf_sum(a, axes, naxes, keep);
    case R_PROD: return wf_prod(a, axes, naxes, keep);
    case R_MAX: return wf_max(a, axes, naxes, keep);
    case R_MIN: return wf_min(a, axes, naxes, keep);
    case R_ALL: return wf_all(a, axes, naxes, keep);
    case R_ANY: return wf_any(a, axes, naxes, keep);
    case R_MEAN: return wf_mean(a, axes, naxes, keep);
    case R_VAR: return wf_var(a, axes, naxes, keep, ddof);
    case R_STD: return wf_std(a, axes, naxes, keep, ddof);
    default: return wf_logsumexp(a, axes, naxes, keep);
    }
}

static wf_dtype rop_dtype(rop op, wf_dtype in)
{
    switch (op) {
    case R_SUM:
    case R_PROD: /* MLX's: 32 bits of the input's signedness, 64-bit types kept */
        if (in == WF_DTYPE_BOOL)
            return WF_DTYPE_I32;
        if (wf__dtype_is_signed_int(in))
            return in == WF_DTYPE_I64 ? in : WF_DTYPE_I32;
        if (wf__dtype_is_unsigned_int(in))
            return in == WF_DTYPE_U64 ? in : WF_DTYPE_U32;
        return in;
    case R_MAX:
    case R_MIN: return in;
    case R_ALL:
    case R_ANY: return WF_DTYPE_BOOL;
    default: return is_float(in) ? in : WF_DTYPE_F32;
    }
}

/* Output flat index (row-major over kept axes) of input flat index i. */
static int64_t out_index(int64_t i, const int64_t *shape, int ndim, unsigned mask)
{
    int64_t o = 0, mul = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t c = i % shape[d];
        i /= shape[d];
        if (!((mask >> d) & 1u)) {
            o += c * mul;
            mul *= shape[d];
        }
    }
    return o;
}

static int64_t kept_size(const int64_t *shape, int ndim, unsigned mask)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (!((mask >> d) & 1u))
            n *= shape[d];
    return n;
}

/* Reference reduction in doubles (NaN propagates through max/min). */
static void ref_reduce(rop op, const double *x, const int64_t *shape, int ndim, unsigned mask,
                       int ddof, double *out)
{
    const int64_t n = conf_size(shape, ndim), nout = kept_size(shape, ndim, mask);
    double *acc = calloc((size_t)nout + 1, sizeof *acc);
    double *aux = calloc((size_t)nout + 1, sizeof *aux);
    int64_t *cnt = calloc((size_t)nout + 1, sizeof *cnt);
    for (int64_t o = 0; o < nout; o++) {
        acc[o] = op == R_PROD || op == R_ALL ? 1 : op == R_MAX ? -INFINITY
                                                : op == R_MIN ? INFINITY
                                                              : 0;
        aux[o] = op == R_LSE ? -INFINITY : 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t o = out_index(i, shape, ndim, mask);
        double v = x[i];
        cnt[o]++;
        switch (op) {
        case R_PROD: acc[o] *= v; break;
        case R_MAX: acc[o] = (isnan(v) || isnan(acc[o])) ? NAN : fmax(acc[o], v); break;
        case R_MIN: acc[o] = (isnan(v) || isnan(acc[o])) ? NAN : fmin(acc[o], v); break;
        case R_ALL: acc[o] = acc[o] && v != 0; break;
        case R_ANY: acc[o] = acc[o] || v != 0; break;
        case R_LSE: aux[o] = (isnan(v) || isnan(aux[o])) ? NAN : fmax(aux[o], v); break;
        default: acc[o] += v; break;
        }
    }
    if (op == R_VAR || op == R_STD) {
        for (int64_t o = 0; o < nout; o++)
            aux[o] = acc[o] / (double)cnt[o], acc[o] = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t o = out_index(i, shape, ndim, mask);
            acc[o] += (x[i] - aux[o]) * (x[i] - aux[o]);
        }
    }
    if (op == R_LSE) {
        for (int64_t i = 0; i < n; i++) {
            int64_t o = out_index(i, shape, ndim, mask);
            double sh = isinf(aux[o]) ? 0 : aux[o];
            acc[o] += exp(x[i] - sh);
        }
    }
    for (int64_t o = 0; o < nout; o++) {
        double r = acc[o];
        if (op == R_MEAN)
            r = cnt[o] ? acc[o] / (double)cnt[o] : NAN;
        if (op == R_VAR || op == R_STD) {
            double den = (double)cnt[o] - ddof;
            r = cnt[o] == 0 ? NAN : acc[o] / (den > 0 ? den : 0);
            if (op == R_STD)
                r = sqrt(r);
        }
        if (op == R_LSE)
            r = (isinf(aux[o]) ? 0 : aux[o]) + log(acc[o]);
        out[o] = r;
    }
    free(acc);
    free(aux);
    free(cnt);
}

/* Tolerance of a result of `op` in dtype `out`. */
static double rop_tol(rop op, wf_dtype out)
{
    double t = conf_tolerance(out);
    if (out == WF_DTYPE_F32 && op != R_MAX && op != R_MIN)
        t = 2e-5;
    return t;
}

/* Values for dtype d (small integers so sums and products stay exact),
 * already rounded to d. For prod, factors in {1, -1, 2}. */
static double *test_values(int64_t n, wf_dtype d, rop op, uint32_t seed)
{
    double *v = conf_values(n, -3, 3, seed);
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = (i * 7 + seed) % 11;
        if (d == WF_DTYPE_BOOL)
            v[i] = (i * 5 + seed) % 3 == 0;
        else if (op == R_PROD)
            v[i] = wf__dtype_is_unsigned_int(d) ? (double)(1 + k % 2)
                                                : (double)((int64_t[]){1, -1, 2}[k % 3]);
        else if (wf__dtype_is_unsigned_int(d))
            v[i] = (double)k;
        else if (!is_float(d))
            v[i] = (double)(k - 5);
        else if (op == R_PROD)
            v[i] = 0.5 + fabs(v[i]) / 3;
        v[i] = conf_round_to(v[i], d);
    }
    return v;
}

/* Reduced output shape for `mask` over shape (with keepdims or not). */
static int reduced_shape(const int64_t *shape, int ndim, unsigned mask, bool keep, int64_t *out)
{
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if ((mask >> d) & 1u) {
            if (keep)
                out[n++] = 1;
        } else {
            out[n++] = shape[d];
        }
    }
    return n;
}

/* ---------------------------------------------------------------- reductions */

/* Every reduction, dtype, axis set, keepdims, contiguous and strided. */
static void test_reductions_every_dtype_and_axes(void)
{
    const int64_t s[3] = {2, 3, 4};
    for (int op = 0; op < R_COUNT; op++) {
        for (int k = 0; k < NDTYPES; k++) {
            const wf_dtype d = all_dtypes[k];
            const wf_dtype od = rop_dtype((rop)op, d);
            double *x = test_values(24, d, (rop)op, (uint32_t)(op * 8 + k));
            wf_scope_begin();
            wf_array *arrays[2] = {conf_array(x, s, 3, d), conf_strided(x, s, 3, d)};
            for (unsigned mask = 0; mask < 8; mask++) {
                int axes[3], naxes = 0;
                for (int ax = 0; ax < 3; ax++)
                    if (mask & (1u << ax))
                        axes[naxes++] = ax == 2 ? -1 : ax;
                double want[24];
                const int ddof = op == R_VAR || op == R_STD ? (int)(mask % 2) : 0;
                ref_reduce((rop)op, x, s, 3, mask, ddof, want);
                int64_t nout = kept_size(s, 3, mask);
                for (int64_t i = 0; i < nout; i++)
                    want[i] = conf_round_to(want[i], od);
                for (int layout = 0; layout < 2; layout++) {
                    for (int keep = 0; keep < 2; keep++) {
                        int64_t oshape[3];
                        int ondim = reduced_shape(s, 3, mask, keep, oshape);
                        /* mask 7 with naxes 3 and also via NULL (every axis). */
                        const int *ax = mask == 7 && keep ? NULL : axes;
                        int nax = mask == 7 && keep ? 0 : naxes;
                        if (!conf_check(call_rop((rop)op, arrays[layout], ax, nax, keep, ddof),
                                        od, oshape, ondim, want, rop_tol((rop)op, od)))
                            printf("      %s %s mask %u layout %d keep %d\n", rop_names[op],
                                   wf_dtype_name(d), mask, layout, keep);
                    }
                }
            }
            wf_scope_end();
            free(x);
        }
    }
}

/* Reductions of a 4-d array with a stepped, reversed slice as input. */
static void test_reductions_sliced_4d(void)
{
    const int64_t base_shape[4] = {3, 4, 5, 6};
    double *x = conf_values(360, -2, 2, 7);
    wf_scope_begin();
    wf_array *base = conf_array(x, base_shape, 4, WF_DTYPE_F64);
    /* x[::-1, 1:4, ::2, :] -> (3, 3, 3, 6). */
    wf_array *v = wf_slice(base, (int64_t[]){-1, 1, 0, 0}, (int64_t[]){INT64_MIN, 4, 5, 6},
                           (int64_t[]){-1, 1, 2, 1});
    const int64_t vs[4] = {3, 3, 3, 6};
    double vx[162];
    int64_t n = 0;
    for (int a = 2; a >= 0; a--)
        for (int b = 1; b < 4; b++)
            for (int c = 0; c < 5; c += 2)
                for (int e = 0; e < 6; e++)
                    vx[n++] = x[((a * 4 + b) * 5 + c) * 6 + e];
    for (int op = 0; op < R_COUNT; op++) {
        for (unsigned mask = 0; mask < 16; mask++) {
            int axes[4], naxes = 0;
            for (int ax = 0; ax < 4; ax++)
                if (mask & (1u << ax))
                    axes[naxes++] = ax;
            double want[162];
            ref_reduce((rop)op, vx, vs, 4, mask, 0, want);
            int64_t oshape[4];
            int ondim = reduced_shape(vs, 4, mask, false, oshape);
            if (!conf_check(call_rop((rop)op, v, axes, naxes, false, 0),
                            rop_dtype((rop)op, WF_DTYPE_F64), oshape, ondim, want, 1e-12))
                printf("      %s mask %u\n", rop_names[op], mask);
        }
    }
    wf_scope_end();
    free(x);
}

/* A broadcast (stride-0) input. */
static void test_reductions_broadcast(void)
{
    wf_scope_begin();
    const int64_t r[1] = {5}, s[2] = {4, 5};
    double x[5] = {1, -2, 3, 0.5, 2};
    wf_array *row = conf_array(x, r, 1, WF_DTYPE_F32);
    wf_array *b = wf_broadcast_to(row, s, 2);
    double full[20];
    for (int i = 0; i < 20; i++)
        full[i] = x[i % 5];
    for (int op = 0; op < R_COUNT; op++)
        for (unsigned mask = 1; mask < 4; mask++) {
            int axes[2], naxes = 0;
            for (int ax = 0; ax < 2; ax++)
                if (mask & (1u << ax))
                    axes[naxes++] = ax;
            double want[20];
            ref_reduce((rop)op, full, s, 2, mask, 0, want);
            int64_t oshape[2];
            int ondim = reduced_shape(s, 2, mask, false, oshape);
            if (!conf_check(call_rop((rop)op, b, axes, naxes, false, 0),
                            rop_dtype((rop)op, WF_DTYPE_F32), oshape, ondim, want,
                            rop_tol((rop)op, WF_DTYPE_F32)))
                printf("      %s mask %u\n", rop_names[op], mask);
        }
    wf_scope_end();
}

/* Large inputs: the parallel paths (kept-axis split, partial accumulators)
 * and long rows, contiguous and transposed. */
static void test_reductions_large(void)
{
    const int64_t s[2] = {384, 700};
    const int64_t n = 384 * 700;
    double *x = conf_values(n, 0.5, 1.5, 11);
    double *want = malloc(sizeof(double) * 800);
    for (int k = 0; k < 2; k++) {
        const wf_dtype d = k == 0 ? WF_DTYPE_F32 : WF_DTYPE_I32;
        if (d == WF_DTYPE_I32)
            for (int64_t i = 0; i < n; i++)
                x[i] = (double)((i * 13) % 7) - 3;
        else
            for (int64_t i = 0; i < n; i++)
                x[i] = conf_round_to(x[i], d);
        wf_scope_begin();
        wf_array *arrays[2] = {conf_array(x, s, 2, d), conf_strided(x, s, 2, d)};
        const rop ops[6] = {R_SUM, R_MAX, R_MIN, R_MEAN, R_VAR, R_LSE};
        for (int o = 0; o < 6; o++)
            for (unsigned mask = 1; mask < 4; mask++) {
                int axes[2], naxes = 0;
                for (int ax = 0; ax < 2; ax++)
                    if (mask & (1u << ax))
                        axes[naxes++] = ax;
                ref_reduce(ops[o], x, s, 2, mask, 0, want);
                int64_t oshape[2];
                int ondim = reduced_shape(s, 2, mask, false, oshape);
                const wf_dtype od = rop_dtype(ops[o], d);
                const double tol = od == WF_DTYPE_I32 ? 0 : 1e-4;
                for (int layout = 0; layout < 2; layout++)
                    if (!conf_check(call_rop(ops[o], arrays[layout], axes, naxes, false, 0), od,
                                    oshape, ondim, want, tol))
                        printf("      %s %s mask %u layout %d\n", rop_names[ops[o]],
                               wf_dtype_name(d), mask, layout);
            }
        wf_scope_end();
    }
    free(want);
    free(x);

    /* One long row of ones (partial accumulators of a full reduction). */
    wf_scope_begin();
    const int64_t big[1] = {1 << 21};
    double one = 1 << 21, zero = 0, lse = log((double)(1 << 21));
    conf_check(wf_sum(wf_ones(big, 1, WF_DTYPE_I64), NULL, 0, false), WF_DTYPE_I64, NULL, 0,
               &one, 0);
    conf_check(wf_sum(wf_ones(big, 1, WF_DTYPE_BF16), NULL, 0, false), WF_DTYPE_BF16, NULL, 0,
               &one, 0);
    conf_check(wf_var(wf_ones(big, 1, WF_DTYPE_F32), NULL, 0, false, 0), WF_DTYPE_F32, NULL, 0,
               &zero, 0);
    conf_check(wf_logsumexp(wf_zeros(big, 1, WF_DTYPE_F32), NULL, 0, false), WF_DTYPE_F32, NULL,
               0, &lse, 1e-5);
    double half = 0.5;
    conf_check(wf_mean(wf_full(big, 1, 0.5, WF_DTYPE_F16), NULL, 0, false), WF_DTYPE_F16, NULL,
               0, &half, 0);
    double yes = 1;
    conf_check(wf_all(wf_ones(big, 1, WF_DTYPE_U8), NULL, 0, false), WF_DTYPE_BOOL, NULL, 0,
               &yes, 0);
    wf_scope_end();
}

/* NaN, infinities, empty and 0-d inputs. */
static void test_reductions_special_values(void)
{
    wf_scope_begin();
    const int64_t s4[1] = {4}, s23[2] = {2, 3};
    double nanv = NAN, inf = INFINITY, ninf = -INFINITY;
    const wf_dtype fl[4] = {WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64};
    for (int k = 0; k < 4; k++) {
        /* max / min / mean / logsumexp propagate NaN, wherever it is. */
        for (int pos = 0; pos < 4; pos++) {
            double x[4] = {1, 5, -2, 3};
            x[pos] = NAN;
            wf_array *a = conf_array(x, s4, 1, fl[k]);
            conf_check(wf_max(a, NULL, 0, false), fl[k], NULL, 0, &nanv, 0);
            conf_check(wf_min(a, NULL, 0, false), fl[k], NULL, 0, &nanv, 0);
            conf_check(wf_mean(a, NULL, 0, false), fl[k], NULL, 0, &nanv, 0);
            conf_check(wf_logsumexp(a, NULL, 0, false), fl[k], NULL, 0, &nanv, 0);
            double yes = 1;
            conf_check(wf_all(a, NULL, 0, false), WF_DTYPE_BOOL, NULL, 0, &yes, 0);
        }
        /* Infinities: max/min take them; logsumexp of all -inf is -inf, with a
         * +inf it is +inf (no inf - inf). */
        double xi[4] = {1, INFINITY, -INFINITY, 3};
        wf_array *a = conf_array(xi, s4, 1, fl[k]);
        conf_check(wf_max(a, NULL, 0, false), fl[k], NULL, 0, &inf, 0);
        conf_check(wf_min(a, NULL, 0, false), fl[k], NULL, 0, &ninf, 0);
        conf_check(wf_logsumexp(a, NULL, 0, false), fl[k], NULL, 0, &inf, 0);
        double xn[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        conf_check(wf_logsumexp(conf_array(xn, s4, 1, fl[k]), NULL, 0, false), fl[k], NULL, 0,
                   &ninf, 0);
        double xm[4] = {-INFINITY, 0, -INFINITY, 0};
        double l2 = conf_round_to(log(2.0), fl[k]);
        conf_check(wf_logsumexp(conf_array(xm, s4, 1, fl[k]), NULL, 0, false), fl[k], NULL, 0,
                   &l2, conf_tolerance(fl[k]));
        /* Large values do not overflow (the max is subtracted). */
        double xb[4] = {1000, 1000, 1000, 1000};
        double lb = 1000 + log(4.0);
        if (fl[k] == WF_DTYPE_F32 || fl[k] == WF_DTYPE_F64)
            conf_check(wf_logsumexp(conf_array(xb, s4, 1, fl[k]), NULL, 0, false), fl[k], NULL,
                       0, &lb, 1e-6);
    }
    /* Integer extremes: max/min of int64 near the limits, prod wraps. */
    const int64_t s3[1] = {3};
    int64_t big[3] = {INT64_MIN, INT64_MAX, 0};
    wf_array *bi = wf_array_from_data(big, s3, 1, WF_DTYPE_I64);
    double got = 0;
    CHECK_OK(wf_array_item(wf_max(bi, NULL, 0, false), &got));
    CHECK(got == (double)INT64_MAX);
    CHECK_OK(wf_array_item(wf_min(bi, NULL, 0, false), &got));
    CHECK(got == (double)INT64_MIN);
    int32_t w[3] = {65536, 65536, 3};
    wf_array *wi = wf_array_from_data(w, s3, 1, WF_DTYPE_I32);
    double wrapped = 0; /* 2^32 * 3 wraps to 0 in int32 */
    conf_check(wf_prod(wi, NULL, 0, false), WF_DTYPE_I32, NULL, 0, &wrapped, 0);

    /* Empty: sum 0, prod 1, all true, any false, mean/var NaN, logsumexp
     * -inf; reductions of an empty axis into an empty output are fine. */
    const int64_t e03[2] = {0, 3}, s3v[1] = {3}, s0[1] = {0};
    wf_array *e = wf_zeros(e03, 2, WF_DTYPE_F32);
    double ones3[3] = {1, 1, 1}, zeros3[3] = {0, 0, 0}, nans3[3] = {NAN, NAN, NAN};
    conf_check(wf_prod(e, (int[]){0}, 1, false), WF_DTYPE_F32, s3v, 1, ones3, 0);
    conf_check(wf_all(e, (int[]){0}, 1, false), WF_DTYPE_BOOL, s3v, 1, ones3, 0);
    conf_check(wf_any(e, (int[]){0}, 1, false), WF_DTYPE_BOOL, s3v, 1, zeros3, 0);
    conf_check(wf_mean(e, (int[]){0}, 1, false), WF_DTYPE_F32, s3v, 1, nans3, 0);
    conf_check(wf_var(e, (int[]){0}, 1, false, 0), WF_DTYPE_F32, s3v, 1, nans3, 0);
    conf_check(wf_std(e, NULL, 0, false, 1), WF_DTYPE_F32, NULL, 0, nans3, 0);
    double ninf3[3] = {-INFINITY, -INFINITY, -INFINITY};
    conf_check(wf_logsumexp(e, (int[]){0}, 1, false), WF_DTYPE_F32, s3v, 1, ninf3, 0);
    conf_check(wf_max(e, (int[]){1}, 1, false), WF_DTYPE_F32, s0, 1, NULL, 0);
    conf_check(wf_min(e, (int[]){1}, 1, true), WF_DTYPE_F32, (int64_t[]){0, 1}, 2, NULL, 0);
    conf_check(wf_argmax(e, 1, false), WF_DTYPE_U32, s0, 1, NULL, 0);
    conf_check(wf_prod(wf_zeros(e03, 2, WF_DTYPE_U8), NULL, 0, false), WF_DTYPE_U32, NULL, 0,
               ones3, 0);

    /* 0-d: every reduction of a scalar is the scalar (var 0). */
    for (int op = 0; op < R_COUNT; op++) {
        wf_array *sc = wf_scalar(2.5, WF_DTYPE_F32);
        double want = op == R_VAR || op == R_STD ? 0 : op == R_ALL || op == R_ANY ? 1 : 2.5;
        conf_check(call_rop((rop)op, sc, NULL, 0, true, 0), rop_dtype((rop)op, WF_DTYPE_F32),
                   NULL, 0, &want, 1e-6);
    }
    /* var/std ddof: 1 (sample), n (inf: divisor 0), negative (allowed). */
    double x6[6] = {1, 2, 3, 4, 5, 7};
    wf_array *a6 = conf_array(x6, s23, 2, WF_DTYPE_F64);
    double v1[2] = {1, 42.0 / 9 / 2}, vneg[2] = {2.0 / 4, 42.0 / 9 / 4};
    const int64_t s2[1] = {2};
    conf_check(wf_var(a6, (int[]){1}, 1, false, 1), WF_DTYPE_F64, s2, 1, v1, 1e-12);
    double sd1[2] = {1, sqrt(42.0 / 9 / 2)};
    conf_check(wf_std(a6, (int[]){-1}, 1, false, 1), WF_DTYPE_F64, s2, 1, sd1, 1e-12);
    double *vg = conf_read(wf_var(a6, (int[]){1}, 1, false, 3));
    CHECK(vg != NULL && isinf(vg[0]) && vg[0] > 0 && isinf(vg[1]) && vg[1] > 0);
    free(vg);
    conf_check(wf_var(a6, (int[]){1}, 1, false, -1), WF_DTYPE_F64, s2, 1, vneg, 1e-12);
    wf_scope_end();
}

/* Reduction values that need care: mean and var of large offsets (the
 * two-pass variance does not cancel), u8 means without wrapping. */
static void test_reductions_accuracy(void)
{
    wf_scope_begin();
    const int64_t n[1] = {10000};
    double *x = malloc(sizeof(double) * 10000);
    for (int i = 0; i < 10000; i++)
        x[i] = 1e4 + (i % 2 ? 1 : -1);
    wf_array *a = conf_array(x, n, 1, WF_DTYPE_F32);
    double one = 1, mean = 1e4;
    conf_check(wf_var(a, NULL, 0, false, 0), WF_DTYPE_F32, NULL, 0, &one, 1e-4);
    conf_check(wf_std(a, NULL, 0, false, 0), WF_DTYPE_F32, NULL, 0, &one, 1e-4);
    conf_check(wf_mean(a, NULL, 0, false), WF_DTYPE_F32, NULL, 0, &mean, 1e-6);
    double m255 = 255;
    conf_check(wf_mean(wf_full(n, 1, 255, WF_DTYPE_U8), NULL, 0, false), WF_DTYPE_F32, NULL, 0,
               &m255, 0);
    free(x);
    wf_scope_end();
}

/* ---------------------------------------------------------------- argmax / argmin */

static void ref_arg(bool argmin, const double *x, const int64_t *shape, int ndim, int axis,
                    double *out)
{
    int64_t outer = 1, inner = 1, len = shape[axis];
    for (int d = 0; d < axis; d++)
        outer *= shape[d];
    for (int d = axis + 1; d < ndim; d++)
        inner *= shape[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            double bv = x[o * len * inner + i];
            for (int64_t k = 1; k < len && !isnan(bv); k++) {
                double v = x[(o * len + k) * inner + i];
                if (isnan(v) || (argmin ? v < bv : v > bv)) {
                    bv = v;
                    best = k;
                }
            }
            out[o * inner + i] = (double)best;
        }
}

static void test_argmax_argmin(void)
{
    const int64_t s[3] = {3, 4, 5};
    for (int k = 0; k < NDTYPES; k++) {
        const wf_dtype d = all_dtypes[k];
        double x[60];
        for (int i = 0; i < 60; i++) /* many ties: the first one wins */
            x[i] = conf_round_to(d == WF_DTYPE_BOOL ? (i * 7) % 5 == 0
                                 : wf__dtype_is_unsigned_int(d) ? (double)((i * 7) % 6)
                                                    : (double)((i * 7) % 9) - 4,
                                 d);
        if (is_float(d)) {
            x[13] = NAN; /* NaN wins wherever it is */
            x[40] = NAN;
            x[44] = NAN;
        }
        wf_scope_begin();
        wf_array *arrays[2] = {conf_array(x, s, 3, d), conf_strided(x, s, 3, d)};
        for (int axis = 0; axis < 3; axis++)
            for (int argmin = 0; argmin < 2; argmin++) {
                double want[20];
                ref_arg(argmin, x, s, 3, axis, want);
                int64_t oshape[3];
                int ondim = reduced_shape(s, 3, 1u << axis, false, oshape);
                int64_t kshape[3];
                reduced_shape(s, 3, 1u << axis, true, kshape);
                for (int layout = 0; layout < 2; layout++) {
                    wf_array *a = arrays[layout];
                    const int ax = axis == 2 && layout ? -1 : axis;
                    if (!conf_check(argmin ? wf_argmin(a, ax, false) : wf_argmax(a, ax, false),
                                    WF_DTYPE_U32, oshape, ondim, want, 0))
                        printf("      arg%s %s axis %d layout %d\n", argmin ? "min" : "max",
                               wf_dtype_name(d), axis, layout);
                    conf_check(argmin ? wf_argmin(a, ax, true) : wf_argmax(a, ax, true),
                               WF_DTYPE_U32, kshape, 3, want, 0);
                }
            }
        wf_scope_end();
    }
    /* Large: rows (axis 1) and vertical (axis 0), contiguous and transposed. */
    const int64_t b[2] = {300, 500};
    double *x = conf_values(150000, -100, 100, 3);
    x[777] = NAN;
    double *want = malloc(sizeof(double) * 500);
    wf_scope_begin();
    for (int t = 0; t < 2; t++) {
        const wf_dtype d = t ? WF_DTYPE_BF16 : WF_DTYPE_F32;
        for (int i = 0; i < 150000; i++)
            x[i] = conf_round_to(x[i], d);
        wf_array *arrays[2] = {conf_array(x, b, 2, d), conf_strided(x, b, 2, d)};
        for (int axis = 0; axis < 2; axis++)
            for (int argmin = 0; argmin < 2; argmin++) {
                ref_arg(argmin, x, b, 2, axis, want);
                const int64_t os[1] = {b[1 - axis]};
                for (int layout = 0; layout < 2; layout++)
                    if (!conf_check(argmin ? wf_argmin(arrays[layout], axis, false)
                                           : wf_argmax(arrays[layout], axis, false),
                                    WF_DTYPE_U32, os, 1, want, 0))
                        printf("      large %s axis %d argmin %d layout %d\n", wf_dtype_name(d),
                               axis, argmin, layout);
            }
    }
    /* 1-d and one-element axes. */
    const int64_t one[2] = {4, 1}, s4[1] = {4};
    double zeros[4] = {0, 0, 0, 0};
    conf_check(wf_argmax(wf_ones(one, 2, WF_DTYPE_F32), 1, false), WF_DTYPE_U32, s4, 1, zeros, 0);
    double v5[5] = {3, 9, -1, 9, 2}, i1 = 1, i2 = 2;
    const int64_t s5[1] = {5};
    conf_check(wf_argmax(conf_array(v5, s5, 1, WF_DTYPE_I64), 0, false), WF_DTYPE_U32, NULL, 0,
               &i1, 0);
    conf_check(wf_argmin(conf_strided(v5, s5, 1, WF_DTYPE_F16), -1, false), WF_DTYPE_U32, NULL,
               0, &i2, 0);
    wf_scope_end();
    free(want);
    free(x);
}

/* ---------------------------------------------------------------- softmax */

static void ref_softmax(const double *x, const int64_t *shape, int ndim, unsigned mask,
                        double *out)
{
    const int64_t n = conf_size(shape, ndim), nout = kept_size(shape, ndim, mask);
    double *m = malloc(sizeof(double) * ((size_t)nout + 1));
    double *s = calloc((size_t)nout + 1, sizeof(double));
    for (int64_t o = 0; o < nout; o++)
        m[o] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = out_index(i, shape, ndim, mask);
        m[o] = fmax(m[o], x[i]);
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t o = out_index(i, shape, ndim, mask);
        out[i] = exp(x[i] - (isinf(m[o]) ? 0 : m[o]));
        s[out_index(i, shape, ndim, mask)] += out[i];
    }
    for (int64_t i = 0; i < n; i++)
        out[i] /= s[out_index(i, shape, ndim, mask)];
    free(m);
    free(s);
}

static void test_softmax(void)
{
    const int64_t s[3] = {2, 3, 4};
    for (int k = 0; k < NDTYPES; k++) {
        const wf_dtype d = all_dtypes[k];
        const wf_dtype od = is_float(d) ? d : WF_DTYPE_F32;
        double *x = test_values(24, d, R_SUM, (uint32_t)k + 3);
        wf_scope_begin();
        wf_array *arrays[2] = {conf_array(x, s, 3, d), conf_strided(x, s, 3, d)};
        for (unsigned mask = 1; mask < 8; mask++) {
            int axes[3], naxes = 0;
            for (int ax = 0; ax < 3; ax++)
                if (mask & (1u << ax))
                    axes[naxes++] = ax == 2 ? -1 : ax;
            double want[24];
            ref_softmax(x, s, 3, mask, want);
            for (int i = 0; i < 24; i++)
                want[i] = conf_round_to(want[i], od);
            const double tol = od == WF_DTYPE_F32 ? 1e-5 : 2 * conf_tolerance(od);
            for (int layout = 0; layout < 2; layout++) {
                const int *ax = mask == 7 && layout ? NULL : axes;
                if (!conf_check(wf_softmax(arrays[layout], ax, ax ? naxes : 0), od, s, 3, want,
                                tol))
                    printf("      softmax %s mask %u layout %d\n", wf_dtype_name(d), mask,
                           layout);
            }
        }
        wf_scope_end();
        free(x);
    }
    /* Large: rows (last axis), outer axis and all axes; transposed. */
    const int64_t b[2] = {256, 600};
    double *x = conf_values(256 * 600, -5, 5, 9);
    double *want = malloc(sizeof(double) * 256 * 600);
    wf_scope_begin();
    wf_array *arrays[2] = {conf_array(x, b, 2, WF_DTYPE_F32), conf_strided(x, b, 2, WF_DTYPE_F32)};
    for (unsigned mask = 1; mask < 4; mask++) {
        int axes[2], naxes = 0;
        for (int ax = 0; ax < 2; ax++)
            if (mask & (1u << ax))
                axes[naxes++] = ax;
        ref_softmax(x, b, 2, mask, want);
        for (int layout = 0; layout < 2; layout++)
            if (!conf_check(wf_softmax(arrays[layout], axes, naxes), WF_DTYPE_F32, b, 2, want,
                            1e-5))
                printf("      large softmax mask %u layout %d\n", mask, layout);
    }
    /* -inf entries get 0; a row of all -inf is NaN (0/0) as in NumPy; large
     * values do not overflow; 0-d softmax is 1; empty stays empty. */
    const int64_t s4[1] = {4}, s0[1] = {0};
    double xi[4] = {-INFINITY, 0, -INFINITY, 0}, wi[4] = {0, 0.5, 0, 0.5};
    conf_check(wf_softmax(conf_array(xi, s4, 1, WF_DTYPE_F32), NULL, 0), WF_DTYPE_F32, s4, 1, wi,
               1e-6);
    double xb[4] = {1000, 1000, 1000, 1000}, wb[4] = {0.25, 0.25, 0.25, 0.25};
    conf_check(wf_softmax(conf_array(xb, s4, 1, WF_DTYPE_F64), NULL, 0), WF_DTYPE_F64, s4, 1, wb,
               1e-12);
    double one = 1;
    conf_check(wf_softmax(wf_scalar(3, WF_DTYPE_F32), NULL, 0), WF_DTYPE_F32, NULL, 0, &one, 0);
    conf_check(wf_softmax(wf_zeros(s0, 1, WF_DTYPE_F32), NULL, 0), WF_DTYPE_F32, s0, 1, NULL, 0);
    double xn[4] = {1, NAN, 2, 3}, wn[4] = {NAN, NAN, NAN, NAN};
    conf_check(wf_softmax(conf_array(xn, s4, 1, WF_DTYPE_F32), NULL, 0), WF_DTYPE_F32, s4, 1, wn,
               0);
    wf_scope_end();
    free(want);
    free(x);
}

/* softmax and logsumexp on float16 / bfloat16 compute in float32 and round
 * once: the bytes of the float32 result rounded to the half type. Rows
 * (last axis), an outer axis (gathered rows), all axes (one long row) and
 * two separate axes (the general passes). */
static void test_half_rounds_once(void)
{
    const wf_dtype halves[2] = {WF_DTYPE_F16, WF_DTYPE_BF16};
    const int64_t s[3] = {6, 700, 9};
    const int64_t n = 6 * 700 * 9;
    double *x = conf_values(n, -8, 8, 77);
    static const int masks[4][3] = {{2}, {1}, {0, 1, 2}, {0, 2}};
    static const int counts[4] = {1, 1, 3, 2};
    for (int h = 0; h < 2; h++) {
        wf_scope_begin();
        wf_array *xh = conf_array(x, s, 3, halves[h]);
        wf_array *x32 = wf_astype(xh, WF_DTYPE_F32);
        for (int m = 0; m < 4; m++) {
            wf_array *got[2] = {wf_softmax(xh, masks[m], counts[m]),
                                wf_logsumexp(xh, masks[m], counts[m], false)};
            wf_array *want[2] = {wf_astype(wf_softmax(x32, masks[m], counts[m]), halves[h]),
                                 wf_astype(wf_logsumexp(x32, masks[m], counts[m], false),
                                           halves[h])};
            for (int k = 0; k < 2; k++) {
                const size_t bytes = wf_array_nbytes(want[k]);
                unsigned char *a = malloc(bytes), *b = malloc(bytes);
                if (CHECK_OK(wf_array_copy_to(got[k], a, bytes)) &&
                    CHECK_OK(wf_array_copy_to(want[k], b, bytes)) && memcmp(a, b, bytes) != 0)
                    wf_test_fail(__FILE__, __LINE__, "%s %s axes case %d: not the float32 "
                                 "result rounded once", k ? "logsumexp" : "softmax",
                                 wf_dtype_name(halves[h]), m);
                free(a);
                free(b);
            }
        }
        wf_scope_end();
    }
    free(x);
}

/* ---------------------------------------------------------------- the fixed order of short rows */

/* The order reduce_tree.c documents for a row of n <= 4096 float32 values
 * (one leaf), written out plainly: below 16 elements a plain reduction
 * folds in order from the identity; otherwise 64 lanes start at the
 * identity (-0 for sums), element i goes into lane i mod 64, the lanes of
 * the last group past the row take the padding (the identity; the mean for
 * squared deviations), and the lanes combine pairwise (lane j with lane j +
 * w for w = 32, 16, ..., 1). k: 0 sum, 1 prod, 2 max, 3 min. */
static float order_kop(int k, float a, float x)
{
    switch (k) {
    case 0: return a + x;
    case 1: return a * x;
    case 2: return (x > a || x != x) ? x : a;
    default: return (x < a || x != x) ? x : a;
    }
}

static float order_identity(int k)
{
    static const float id[4] = {-0.0f, 1.0f, -INFINITY, INFINITY};
    return id[k];
}

static float order_leaf(int k, const float *x, int64_t n, bool fold, const float *mu)
{
    if (fold && n < 16) {
        float a = k == 0 ? 0.0f : order_identity(k);
        for (int64_t i = 0; i < n; i++)
            a = order_kop(k, a, x[i]);
        return a;
    }
    float l[64];
    for (int j = 0; j < 64; j++)
        l[j] = order_identity(mu != NULL ? 0 : k);
    for (int64_t i = 0; i < (n + 63) / 64 * 64; i++) {
        const float v = i < n ? x[i] : mu != NULL ? *mu : order_identity(k);
        if (mu != NULL)
            l[i % 64] += (v - *mu) * (v - *mu);
        else
            l[i % 64] = order_kop(k, l[i % 64], v);
    }
    for (int w = 32; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            l[j] = order_kop(mu != NULL ? 0 : k, l[j], l[j + w]);
    return l[0];
}

enum { ORDER_OPS = 8 };
static const char *const order_names[ORDER_OPS] = {"sum",  "prod", "max",       "min",
                                                   "mean", "var",  "logsumexp", "softmax"};

/* Op `op` of one row by the plain order; y: the row's softmax. */
static float order_row(int op, const float *x, int64_t n, float *y)
{
    const float nf = (float)n;
    switch (op) {
    case 0: return 0.0f + order_leaf(0, x, n, true, NULL);
    case 1: return 1.0f * order_leaf(1, x, n, true, NULL);
    case 2:
    case 3: return order_leaf(op, x, n, true, NULL);
    case 4: return (0.0f + order_leaf(0, x, n, true, NULL)) / nf;
    case 5: {
        const float mean = (0.0f + order_leaf(0, x, n, true, NULL)) / nf;
        return (0.0f + order_leaf(0, x, n, false, &mean)) / nf;
    }
    default: {
        const float m = order_leaf(2, x, n, true, NULL), shift = isinf(m) ? 0.0f : m;
        float *t = malloc((size_t)n * sizeof *t), *e = malloc((size_t)n * sizeof *e);
        for (int64_t i = 0; i < n; i++)
            t[i] = x[i] - shift;
        wf__cpu_exp_f32(n, t, e);
        const float s = order_leaf(0, e, n, false, NULL), inv = 1.0f / s;
        for (int64_t i = 0; op == 7 && i < n; i++)
            y[i] = e[i] * inv;
        free(t);
        free(e);
        return shift + logf(s);
    }
    }
}

static wf_array *order_op(int op, wf_array *a)
{
    const int last[1] = {1};
    switch (op) {
    case 0: return wf_sum(a, last, 1, false);
    case 1: return wf_prod(a, last, 1, false);
    case 2: return wf_max(a, last, 1, false);
    case 3: return wf_min(a, last, 1, false);
    case 4: return wf_mean(a, last, 1, false);
    case 5: return wf_var(a, last, 1, false, 0);
    case 6: return wf_logsumexp(a, last, 1, false);
    default: return wf_softmax(a, last, 1);
    }
}

/* Many short rows reduced at once give each row the bits of the fixed
 * order, whatever the row length (every length to 70, the lane and leaf
 * edges), for contiguous rows and rows cut out of wider ones (a row stride
 * above the length), and a number of rows that is no multiple of 16. */
static void test_short_rows_fixed_order(void)
{
    enum { ROWS = 37, PAD = 5, SHORT = 70, LENGTHS = SHORT + 8 };
    uint16_t lengths[LENGTHS] = {[SHORT] = 100, 127, 128, 129, 200, 1000, 4095, 4096};
    for (int i = 0; i < SHORT; i++)
        lengths[i] = (uint16_t)(i + 1);
    for (int li = 0; li < LENGTHS; li++) {
        const int64_t n = lengths[li], w = n + PAD;
        double *v = conf_values(ROWS * w, -3, 3, (uint32_t)(500 + li));
        float *x = malloc((size_t)(ROWS * w) * sizeof *x), *want = malloc((size_t)n * sizeof *x);
        for (int64_t i = 0; i < ROWS * w; i++)
            x[i] = i % 53 == 7 ? -0.0f : (float)v[i];
        wf_scope_begin();
        const int64_t shape[2] = {ROWS, w}, start[2] = {0, 2}, stop[2] = {ROWS, 2 + n},
                      step[2] = {1, 1}, packed_shape[2] = {ROWS, n};
        wf_array *wide = wf_array_from_data(x, shape, 2, WF_DTYPE_F32);
        float *packed = malloc((size_t)(ROWS * n) * sizeof *packed);
        for (int64_t r = 0; r < ROWS; r++)
            memcpy(packed + r * n, x + r * w + 2, (size_t)n * sizeof *x);
        wf_array *layouts[2] = {wf_array_from_data(packed, packed_shape, 2, WF_DTYPE_F32),
                                wf_slice(wide, start, stop, step)};
        for (int lay = 0; lay < 2; lay++)
            for (int op = 0; op < ORDER_OPS; op++) {
                wf_array *got = order_op(op, layouts[lay]);
                const size_t nb = wf_array_nbytes(got);
                float *g = malloc(nb);
                if (!CHECK_OK(wf_array_copy_to(got, g, nb))) {
                    free(g);
                    continue;
                }
                for (int64_t r = 0; r < ROWS; r++) {
                    const float one = order_row(op, packed + r * n, n, want);
                    const bool same = op == 7 ? memcmp(g + r * n, want, (size_t)n * 4) == 0
                                              : memcmp(g + r, &one, 4) == 0;
                    if (!same) {
                        wf_test_fail(__FILE__, __LINE__, "%s of row %lld (length %lld, %s): "
                                     "not the bits of the fixed order", order_names[op],
                                     (long long)r, (long long)n, lay ? "sliced" : "contiguous");
                        break;
                    }
                }
                free(g);
            }
        wf_scope_end();
        free(packed);
        free(want);
        free(x);
        free(v);
    }
}

/* Every ISA variant computes the same bytes (they run the same operations
 * in the same order); forcing a variant the CPU lacks is refused. */
static void test_isa_variants_agree(void)
{
    const int active = wf__vm_isa_active();
    const int64_t s[2] = {300, 1000};
    double *x = conf_values(300 * 1000, -3, 3, 91);
    unsigned char *first[6] = {NULL};
    size_t bytes[6] = {0};
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        if (!wf_test_runs_isa(isa, wf__vm_isa_best()) || wf__vm_isa_force(isa) != WF_OK)
            continue;
        CHECK_EQ_INT(wf__vm_isa_active(), isa);
        wf_scope_begin();
        wf_array *a = conf_array(x, s, 2, WF_DTYPE_F32);
        const int ax0[1] = {0}, ax1[1] = {1};
        wf_array *r[6] = {wf_sum(a, NULL, 0, false),         wf_max(a, ax0, 1, false),
                          wf_var(a, ax1, 1, false, 0),       wf_softmax(a, ax1, 1),
                          wf_layer_norm(a, NULL, NULL, 1e-5), wf_prod(a, ax0, 1, false)};
        for (int k = 0; k < 6; k++) {
            const size_t nb = wf_array_nbytes(r[k]);
            unsigned char *buf = malloc(nb);
            CHECK_OK(wf_array_copy_to(r[k], buf, nb));
            if (first[k] == NULL) {
                first[k] = buf;
                bytes[k] = nb;
            } else {
                if (nb != bytes[k] || memcmp(buf, first[k], nb) != 0)
                    wf_test_fail(__FILE__, __LINE__, "result %d differs on %s", k,
                                 wf__vm_isa_name(isa));
                free(buf);
            }
        }
        wf_scope_end();
    }
    for (int k = 0; k < 6; k++)
        free(first[k]);
    CHECK_STATUS(wf__vm_isa_force(-2), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf__vm_isa_force(WF_VM_ISA_COUNT), WF_ERR_INVALID_ARGUMENT);
    CHECK_OK(wf__vm_isa_force(active));
    free(x);
}

/* Sum, product, maximum and minimum of float32 and float64 over rows
 * (contiguous, many short ones at once; strided) and columns, for row
 * lengths around every lane and leaf edge, on every ISA variant the CPU
 * runs: each equals a plain loop here (max/min exactly, a NaN in a row
 * wins; sum/prod within rounding), and the variants agree bit for bit. */
enum { KIND_ROWS = 19 };
static const char *const kind_names[4] = {"sum", "prod", "max", "min"};

static wf_array *kind_op(int kind, wf_array *a, int axis)
{
    const int ax[1] = {axis};
    switch (kind) {
    case 0: return wf_sum(a, ax, 1, false);
    case 1: return wf_prod(a, ax, 1, false);
    case 2: return wf_max(a, ax, 1, false);
    default: return wf_min(a, ax, 1, false);
    }
}

static double kind_ref(int kind, const double *x, int64_t n, int64_t stride)
{
    double acc = x[0];
    for (int64_t i = 1; i < n; i++) {
        const double v = x[i * stride];
        if (isnan(v) || isnan(acc))
            acc = kind >= 2 ? NAN : acc + v;
        else
            acc = kind == 0 ? acc + v : kind == 1 ? acc * v : kind == 2 ? fmax(acc, v) : fmin(acc, v);
    }
    return acc;
}

/* Reduces each row of x (rows x n, row-major) laid out as `layout` (0:
 * contiguous rows; 1: stored transposed, each column reduced; 2: a
 * transposed view, strided rows) and checks every output. */
static void check_kinds(const double *x, int64_t n, wf_dtype dt, int layout, unsigned char **bits,
                        size_t *nbytes)
{
    const int64_t shape[2] = {KIND_ROWS, n}, tshape[2] = {n, KIND_ROWS};
    double *xt = malloc((size_t)(KIND_ROWS * n) * sizeof *xt);
    for (int64_t r = 0; r < KIND_ROWS; r++)
        for (int64_t c = 0; c < n; c++)
            xt[c * KIND_ROWS + r] = x[r * n + c];
    wf_scope_begin();
    wf_array *in = layout == 0   ? conf_array(x, shape, 2, dt)
                   : layout == 1 ? conf_array(xt, tshape, 2, dt)
                                 : conf_strided(x, shape, 2, dt);
    for (int kind = 0; kind < 4; kind++) {
        wf_array *r = kind_op(kind, in, layout == 1 ? 0 : 1);
        double got[KIND_ROWS];
        if (!CHECK_OK(wf_array_copy_to(wf_astype(r, WF_DTYPE_F64), got, sizeof got)))
            break;
        for (int64_t row = 0; row < KIND_ROWS; row++) {
            double want = kind_ref(kind, x + row * n, n, 1);
            if (kind >= 2)
                want = conf_round_to(want, dt);
            const double tol = kind >= 2 ? 0 : (dt == WF_DTYPE_F32 ? 1e-5 : 1e-13) * (fabs(want) + n);
            if (!CHECK_NEAR(got[row], want, tol)) {
                printf("    %s of row %lld, length %lld, %s, layout %d\n", kind_names[kind],
                       (long long)row, (long long)n, wf_dtype_name(dt), layout);
                break;
            }
        }
        const size_t nb = wf_array_nbytes(r);
        unsigned char *buf = malloc(nb);
        CHECK_OK(wf_array_copy_to(r, buf, nb));
        if (bits[kind] == NULL) {
            bits[kind] = buf;
            nbytes[kind] = nb;
        } else {
            if (!CHECK(nb == nbytes[kind] && memcmp(buf, bits[kind], nb) == 0))
                printf("    %s differs between ISA variants (length %lld, %s, layout %d)\n",
                       kind_names[kind], (long long)n, wf_dtype_name(dt), layout);
            free(buf);
        }
    }
    wf_scope_end();
    free(xt);
}

static void test_every_kind_f32_f64_every_isa(void)
{
    static const int64_t lengths[] = {1, 2, 3, 5, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 129, 300};
    enum { NL = sizeof lengths / sizeof lengths[0] };
    const int active = wf__vm_isa_active();
    for (int li = 0; li < NL; li++) {
        const int64_t n = lengths[li];
        double *x = conf_values(KIND_ROWS * n, 0.8, 1.25, (uint32_t)(700 + li));
        if (n > 4)
            x[3 * n + n / 2] = NAN; /* row 3 */
        for (int d = 0; d < 2; d++)
            for (int layout = 0; layout < 3; layout++) {
                unsigned char *bits[4] = {NULL};
                size_t nbytes[4] = {0};
                for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++)
                    if (wf__vm_isa_force(isa) == WF_OK)
                        check_kinds(x, n, d ? WF_DTYPE_F64 : WF_DTYPE_F32, layout, bits, nbytes);
                for (int k = 0; k < 4; k++)
                    free(bits[k]);
            }
        free(x);
    }
    CHECK_OK(wf__vm_isa_force(active));
}

/* ---------------------------------------------------------------- cumsum / cumprod */

static void ref_scan(bool prod, bool reverse, bool inclusive, const double *x,
                     const int64_t *shape, int ndim, int axis, double *out)
{
    int64_t outer = 1, inner = 1, len = shape[axis];
    for (int d = 0; d < axis; d++)
        outer *= shape[d];
    for (int d = axis + 1; d < ndim; d++)
        inner *= shape[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double c = prod ? 1 : 0;
            for (int64_t t = 0; t < len; t++) {
                int64_t k = reverse ? len - 1 - t : t;
                int64_t at = (o * len + k) * inner + i;
                double v = x[at];
                if (inclusive)
                    c = prod ? c * v : c + v;
                out[at] = c;
                if (!inclusive)
                    c = prod ? c * v : c + v;
            }
        }
}

static void test_cumsum_cumprod(void)
{
    const int64_t s[3] = {2, 3, 4};
    for (int prod = 0; prod < 2; prod++)
        for (int k = 0; k < NDTYPES; k++) {
            const wf_dtype d = all_dtypes[k];
            const wf_dtype od = d == WF_DTYPE_BOOL ? WF_DTYPE_I32 : d; /* MLX: the dtype kept */
            double *x = test_values(24, d, prod ? R_PROD : R_SUM, (uint32_t)k + 17);
            wf_scope_begin();
            wf_array *arrays[2] = {conf_array(x, s, 3, d), conf_strided(x, s, 3, d)};
            for (int axis = 0; axis < 3; axis++)
                for (int rev = 0; rev < 2; rev++)
                    for (int inc = 0; inc < 2; inc++) {
                        double want[24];
                        ref_scan(prod, rev, inc, x, s, 3, axis, want);
                        for (int i = 0; i < 24; i++)
                            want[i] = conf_round_to(want[i], od);
                        for (int layout = 0; layout < 2; layout++) {
                            const int ax = layout ? axis - 3 : axis;
                            wf_array *r = prod ? wf_cumprod(arrays[layout], ax, rev, inc)
                                               : wf_cumsum(arrays[layout], ax, rev, inc);
                            if (!conf_check(r, od, s, 3, want, 2 * conf_tolerance(od)))
                                printf("      cum%s %s axis %d rev %d inc %d layout %d\n",
                                       prod ? "prod" : "sum", wf_dtype_name(d), axis, rev, inc,
                                       layout);
                        }
                    }
            wf_scope_end();
            free(x);
        }
    /* Large: row and vertical forms in parallel, contiguous and transposed. */
    const int64_t b[2] = {300, 400};
    double *x = malloc(sizeof(double) * 120000);
    double *want = malloc(sizeof(double) * 120000);
    for (int i = 0; i < 120000; i++)
        x[i] = (double)((i * 11) % 7) - 3;
    wf_scope_begin();
    wf_array *arrays[2] = {conf_array(x, b, 2, WF_DTYPE_I32), conf_strided(x, b, 2, WF_DTYPE_I32)};
    for (int axis = 0; axis < 2; axis++)
        for (int rev = 0; rev < 2; rev++) {
            ref_scan(false, rev, true, x, b, 2, axis, want);
            for (int layout = 0; layout < 2; layout++)
                if (!conf_check(wf_cumsum(arrays[layout], axis, rev, true), WF_DTYPE_I32, b, 2,
                                want, 0))
                    printf("      large cumsum axis %d rev %d layout %d\n", axis, rev, layout);
        }
    /* f16 accumulates in float32: 4096 ones count exactly to 4096. */
    const int64_t h[1] = {4096}, s0[2] = {3, 0};
    double *hw = malloc(sizeof(double) * 4096);
    for (int i = 0; i < 4096; i++)
        hw[i] = conf_round_to(i + 1, WF_DTYPE_F16);
    conf_check(wf_cumsum(wf_ones(h, 1, WF_DTYPE_F16), 0, false, true), WF_DTYPE_F16, h, 1, hw,
               0);
    free(hw);
    /* Empty and 1-element axes. */
    conf_check(wf_cumsum(wf_ones(s0, 2, WF_DTYPE_U8), 1, false, true), WF_DTYPE_U8, s0, 2, NULL,
               0);
    double o3[3] = {1, 1, 1};
    const int64_t s31[2] = {3, 1};
    conf_check(wf_cumprod(wf_ones(s31, 2, WF_DTYPE_F32), 1, true, false), WF_DTYPE_F32, s31, 2,
               o3, 0);
    wf_scope_end();
    free(want);
    free(x);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
    wf_scope_begin();
    const int64_t s[2] = {2, 3}, e[2] = {0, 3};
    wf_array *a = wf_zeros(s, 2, WF_DTYPE_F32);
    wf_array *empty = wf_zeros(e, 2, WF_DTYPE_F32);
    for (int op = 0; op < R_COUNT; op++) {
        char name[32];
        snprintf(name, sizeof name, "wf_%s", rop_names[op]);
        conf_check_error(call_rop((rop)op, NULL, NULL, 0, false, 0), WF_ERR_NULL_ARGUMENT, name);
        conf_check_error(call_rop((rop)op, a, (int[]){2}, 1, false, 0), WF_ERR_AXIS, name);
        conf_check_error(call_rop((rop)op, a, (int[]){-3}, 1, false, 0), WF_ERR_AXIS, name);
        conf_check_error(call_rop((rop)op, a, (int[]){1, -1}, 2, false, 0), WF_ERR_AXIS, name);
        conf_check_error(call_rop((rop)op, a, NULL, 2, false, 0), WF_ERR_NULL_ARGUMENT, name);
        conf_check_error(call_rop((rop)op, a, (int[]){0}, -1, false, 0),
                         WF_ERR_INVALID_ARGUMENT, name);
        conf_check_error(call_rop((rop)op, wf_scalar(1, WF_DTYPE_I32), (int[]){0}, 1, false, 0),
                         WF_ERR_AXIS, name);
    }
    /* No identity: max/min of an empty reduction with a non-empty output. */
    conf_check_error(wf_max(empty, NULL, 0, false), WF_ERR_SHAPE, "zero-size reduction");
    conf_check_error(wf_min(empty, (int[]){0}, 1, true), WF_ERR_SHAPE, "wf_min");
    conf_check_error(wf_argmax(empty, 0, false), WF_ERR_SHAPE, "wf_argmax");
    conf_check_error(wf_argmin(empty, -2, true), WF_ERR_SHAPE, "zero-size");
    /* A NULL input keeps the first error of a chain. */
    wf_clear_error();
    wf_array *bad = wf_max(a, (int[]){5}, 1, false);
    CHECK(bad == NULL);
    conf_check_error(wf_mean(wf_softmax(wf_cumsum(bad, 0, false, true), NULL, 0), NULL, 0, false),
                     WF_ERR_AXIS, "wf_max");
    /* Arg-reductions and scans: axis checks. */
    conf_check_error(wf_argmax(NULL, 0, false), WF_ERR_NULL_ARGUMENT, "wf_argmax");
    conf_check_error(wf_argmin(a, 2, false), WF_ERR_AXIS, "wf_argmin");
    conf_check_error(wf_argmax(a, -3, false), WF_ERR_AXIS, "wf_argmax");
    conf_check_error(wf_argmax(wf_scalar(1, WF_DTYPE_F32), 0, false), WF_ERR_AXIS, "wf_argmax");
    conf_check_error(wf_cumsum(NULL, 0, false, true), WF_ERR_NULL_ARGUMENT, "wf_cumsum");
    conf_check_error(wf_cumsum(a, 2, false, true), WF_ERR_AXIS, "wf_cumsum");
    conf_check_error(wf_cumprod(a, -3, true, false), WF_ERR_AXIS, "wf_cumprod");
    conf_check_error(wf_cumprod(wf_scalar(1, WF_DTYPE_F32), 0, true, false), WF_ERR_AXIS,
                     "wf_cumprod");
    conf_check_error(wf_softmax(NULL, NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_softmax");
    conf_check_error(wf_softmax(a, (int[]){0, 0}, 2), WF_ERR_AXIS, "wf_softmax");
    conf_check_error(wf_softmax(a, (int[]){2}, 1), WF_ERR_AXIS, "wf_softmax");
    conf_check_error(wf_softmax(a, NULL, 1), WF_ERR_NULL_ARGUMENT, "wf_softmax");
    conf_check_error(wf_softmax(a, (int[]){0}, -2), WF_ERR_INVALID_ARGUMENT, "wf_softmax");
    wf_scope_end();
}

/* Many threads reducing shared inputs at once get the right values. */
static void test_parallel_determinism(void)
{
    wf_scope_begin();
    const int64_t s[2] = {512, 512};
    double *x = conf_values(512 * 512, -1, 1, 5);
    wf_array *a = conf_array(x, s, 2, WF_DTYPE_F32);
    double first = 0, again = 0;
    CHECK_OK(wf_array_item(wf_sum(a, NULL, 0, false), &first));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(wf_array_item(wf_sum(a, NULL, 0, false), &again));
        CHECK(again == first); /* fixed partition: the same bits every time */
    }
    double ref = 0;
    for (int i = 0; i < 512 * 512; i++)
        ref += (float)x[i];
    CHECK_NEAR(first, ref, 1e-2);
    free(x);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_reductions_every_dtype_and_axes);
    RUN_TEST(test_reductions_sliced_4d);
    RUN_TEST(test_reductions_broadcast);
    RUN_TEST(test_reductions_large);
    RUN_TEST(test_reductions_special_values);
    RUN_TEST(test_reductions_accuracy);
    RUN_TEST(test_argmax_argmin);
    RUN_TEST(test_softmax);
    RUN_TEST(test_half_rounds_once);
    RUN_TEST(test_cumsum_cumprod);
    RUN_TEST(test_errors);
    RUN_TEST(test_parallel_determinism);
    RUN_TEST(test_isa_variants_agree);
    RUN_TEST(test_every_kind_f32_f64_every_isa);
    RUN_TEST(test_short_rows_fixed_order);
    /* The conformance tests again on every other variant the CPU runs (not
     * under TSan: the variants differ in loop code, not in threading, and
     * the release and ASan builds run them). */
    const int active = wf__vm_isa_active();
#if defined(__SANITIZE_THREAD__)
    const int last_isa = -1;
#else
    const int last_isa = WF_VM_ISA_COUNT - 1;
#endif
    for (int isa = 0; isa <= last_isa; isa++) {
        if (isa == active || wf__vm_isa_force(isa) != WF_OK)
            continue;
        printf("  on the %s variant:\n", wf__vm_isa_name(isa));
        RUN_TEST(test_reductions_every_dtype_and_axes);
        RUN_TEST(test_reductions_large);
        RUN_TEST(test_reductions_special_values);
        RUN_TEST(test_reductions_accuracy);
        RUN_TEST(test_softmax);
        RUN_TEST(test_half_rounds_once);
        RUN_TEST(test_cumsum_cumprod);
        RUN_TEST(test_short_rows_fixed_order);
    }
    wf__vm_isa_force(active);
    const int64_t live = live_arrays();
    if (live != 0)
        printf("  %lld arrays still live\n", (long long)live);
    return TEST_SUMMARY();
}
