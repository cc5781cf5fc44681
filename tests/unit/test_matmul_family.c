/*
 * wf_gather_mm, wf_segmented_mm and wf_block_masked_mm against loop
 * references written here (sums in double): every real float dtype, index
 * shapes that broadcast, default (NULL) indices, negative indices, 1-d
 * operands, strided operands, empty and full segments, bool and float block
 * masks; errors at construction and at evaluation (an index or a segment
 * out of range); gather_mm's products have the bits of wf_matmul on the
 * same matrices; vjp / jvp against finite differences in float64, vmap
 * against per-example results (operands and indices batched), and a
 * compiled call.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "settle.h"
#include "transforms_util.h"

static const wf_dtype float_dtypes[4] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16,
                                         WF_DTYPE_BF16};

static double tolerance(wf_dtype d)
{
    return d == WF_DTYPE_F64 ? 1e-12 : d == WF_DTYPE_F32 ? 1e-5 : 3e-2;
}

/* c (m x n) = a[:, k0:k1] (m x k, rows lda apart) @ b[k0:k1, :] (n cols). */
static void ref_product(const double *a, const double *b, int64_t m, int64_t k, int64_t n,
                        int64_t k0, int64_t k1, double *c)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t t = k0; t < k1; t++)
                s += a[i * k + t] * b[t * n + j];
            c[i * n + j] = s;
        }
}

/* Values rounded to `dtype`, so the reference multiplies what weft does. */
static double *values_in(int64_t n, wf_dtype dtype, uint32_t seed)
{
    double *v = conf_values(n, -1, 1, seed);
    for (int64_t i = 0; i < n; i++)
        v[i] = conf_round_to(v[i], dtype);
    return v;
}

/* ---------------------------------------------------------------- gather_mm */

static void test_gather_mm_every_dtype(void)
{
    const int64_t as[3] = {3, 2, 5}, bs[3] = {4, 5, 6};
    const int64_t m = 2, k = 5, n = 6;
    const double lv[2] = {2, -3}, rv[3] = {3, 0, -1}; /* -3: matrix 0, -1: matrix 3 */
    const int64_t ls[2] = {2, 1}, rs = 3;
    for (int t = 0; t < 4; t++) {
        const wf_dtype dt = float_dtypes[t];
        for (int strided = 0; strided < 2; strided++) {
            double *av = values_in(30, dt, 1 + (uint32_t)t), *bv = values_in(120, dt, 5);
            wf_array *a = strided ? conf_strided(av, as, 3, dt) : conf_array(av, as, 3, dt);
            wf_array *b = conf_array(bv, bs, 3, dt);
            wf_array *lhs = conf_array(lv, ls, 2, WF_DTYPE_I32);
            wf_array *rhs = conf_array(rv, &rs, 1, WF_DTYPE_I64);
            const int64_t out_shape[4] = {2, 3, m, n};
            double want[2 * 3 * 12];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) {
                    const int li = (int)(lv[i] < 0 ? lv[i] + 3 : lv[i]);
                    const int ri = (int)(rv[j] < 0 ? rv[j] + 4 : rv[j]);
                    ref_product(av + li * m * k, bv + ri * k * n, m, k, n, 0, k,
                                want + (i * 3 + j) * m * n);
                }
            if (!conf_check(wf_gather_mm(a, b, lhs, rhs, false), dt, out_shape, 4, want,
                            tolerance(dt)))
                printf("      (%s, strided %d)\n", wf_dtype_name(dt), strided);
            wf_release(a);
            wf_release(b);
            wf_release(lhs);
            wf_release(rhs);
            free(av);
            free(bv);
        }
    }
}

/* Default indices, 1-d operands, mixed dtypes, both NULL (a plain matmul). */
static void test_gather_mm_defaults_and_vectors(void)
{
    const int64_t as[3] = {2, 3, 4}, bs[3] = {5, 4, 2}, k = 4;
    double *av = values_in(24, WF_DTYPE_F32, 11), *bv = values_in(40, WF_DTYPE_F32, 12);
    wf_array *a = conf_array(av, as, 3, WF_DTYPE_F32);
    wf_array *b = conf_array(bv, bs, 3, WF_DTYPE_F64); /* promotes to float64 */
    const double rv[2] = {4, 1};
    const int64_t two = 2;
    wf_array *rhs = conf_array(rv, &two, 1, WF_DTYPE_U8);
    /* lhs NULL: a's matrices in order (shape (2,)), broadcast with rhs (2,) */
    double want[2 * 3 * 2];
    for (int i = 0; i < 2; i++)
        ref_product(av + i * 12, bv + (int)rv[i] * 8, 3, 4, 2, 0, 4, want + i * 6);
    const int64_t out_shape[3] = {2, 3, 2};
    conf_check(wf_gather_mm(a, b, NULL, rhs, true), WF_DTYPE_F64, out_shape, 3, want, 1e-6);
    /* a 1-d a: (k) as (1, k), the dim dropped again */
    wf_array *vec = conf_array(av, &k, 1, WF_DTYPE_F32);
    double wv[2 * 2];
    for (int i = 0; i < 2; i++)
        ref_product(av, bv + (int)rv[i] * 8, 1, 4, 2, 0, 4, wv + i * 2);
    const int64_t vshape[2] = {2, 2};
    conf_check(wf_gather_mm(vec, b, NULL, rhs, false), WF_DTYPE_F64, vshape, 2, wv, 1e-6);
    /* no indices at all: wf_matmul's broadcasting (a (2,3,4) @ b[:2]) */
    const int64_t b2s[3] = {2, 4, 2};
    wf_array *b2 = conf_array(bv, b2s, 3, WF_DTYPE_F32);
    double wm[12];
    for (int i = 0; i < 2; i++)
        ref_product(av + i * 12, bv + i * 8, 3, 4, 2, 0, 4, wm + i * 6);
    const int64_t mshape[3] = {2, 3, 2};
    conf_check(wf_gather_mm(a, b2, NULL, NULL, false), WF_DTYPE_F32, mshape, 3, wm, 1e-5);
    wf_release(b2);
    wf_release(vec);
    wf_release(rhs);
    wf_release(a);
    wf_release(b);
    free(av);
    free(bv);
}

/* Each product has the bits of wf_matmul on the same two matrices (weft's
 * GEMM computes an element the same way whatever surrounds it). */
static void test_gather_mm_bits_of_matmul(void)
{
#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    const int64_t m = 33, k = 70, n = 45, experts = 3, picks = 4;
#else
    const int64_t m = 130, k = 300, n = 170, experts = 4, picks = 6;
#endif
    const int64_t as[3] = {experts, m, k}, bs[3] = {experts, k, n};
    double *av = values_in(experts * m * k, WF_DTYPE_F32, 21);
    double *bv = values_in(experts * k * n, WF_DTYPE_F32, 22);
    wf_array *a = conf_array(av, as, 3, WF_DTYPE_F32), *b = conf_array(bv, bs, 3, WF_DTYPE_F32);
    double iv[8];
    for (int i = 0; i < picks; i++)
        iv[i] = (double)((i * 3 + 1) % experts);
    wf_array *idx = conf_array(iv, &picks, 1, WF_DTYPE_I32);
    wf_array *g = wf_gather_mm(a, b, idx, idx, false);
    float *got = malloc((size_t)(picks * m * n) * sizeof *got);
    float *one = malloc((size_t)(m * n) * sizeof *one);
    bool same = CHECK_OK(wf_array_copy_to(g, got, (size_t)(picks * m * n) * sizeof *got));
    for (int i = 0; same && i < picks; i++) {
        const int64_t e = (int64_t)iv[i];
        const int64_t st[3] = {e, 0, 0}, sa[3] = {e + 1, m, k}, sb[3] = {e + 1, k, n},
                      step[3] = {1, 1, 1};
        wf_array *ai = wf_slice(a, st, sa, step), *bi = wf_slice(b, st, sb, step);
        wf_array *prod = wf_matmul(ai, bi);
        same = CHECK_OK(wf_array_copy_to(prod, one, (size_t)(m * n) * sizeof *one)) &&
               CHECK(memcmp(one, got + i * m * n, (size_t)(m * n) * sizeof *one) == 0);
        wf_release(prod);
        wf_release(ai);
        wf_release(bi);
    }
    free(one);
    free(got);
    wf_release(g);
    wf_release(idx);
    wf_release(a);
    wf_release(b);
    free(av);
    free(bv);
}

static void test_gather_mm_errors(void)
{
    const int64_t as[3] = {2, 3, 4}, bs[3] = {2, 4, 5}, bad_b[3] = {2, 3, 5}, two = 2;
    wf_array *a = wf_ones(as, 3, WF_DTYPE_F32), *b = wf_ones(bs, 3, WF_DTYPE_F32);
    wf_array *wrong = wf_ones(bad_b, 3, WF_DTYPE_F32);
    const double iv[2] = {0, 1}, far[2] = {0, 2};
    wf_array *idx = conf_array(iv, &two, 1, WF_DTYPE_I32);
    wf_array *fidx = conf_array(iv, &two, 1, WF_DTYPE_F32);
    wf_array *ints = wf_ones(as, 3, WF_DTYPE_I32), *int_b = wf_ones(bs, 3, WF_DTYPE_I32);
    conf_check_error(wf_gather_mm(a, wrong, idx, idx, false), WF_ERR_SHAPE, "wf_gather_mm");
    conf_check_error(wf_gather_mm(a, b, fidx, idx, false), WF_ERR_DTYPE, "wf_gather_mm");
    conf_check_error(wf_gather_mm(ints, int_b, idx, idx, false), WF_ERR_DTYPE, "wf_gather_mm");
    wf_array *three = wf_ones(&(int64_t){3}, 1, WF_DTYPE_I32);
    conf_check_error(wf_gather_mm(a, b, idx, three, false), WF_ERR_SHAPE, NULL);
    wf_array *out_of_range = conf_array(far, &two, 1, WF_DTYPE_I64);
    wf_array *bad = wf_gather_mm(a, b, idx, out_of_range, false);
    if (CHECK_NOT_NULL(bad)) {
        CHECK_STATUS(wf_eval(&bad, 1), WF_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(wf_last_error_message(), "rhs index 2 is out of range");
        wf_clear_error();
    }
    wf_release(bad);
    wf_release(out_of_range);
    wf_release(three);
    wf_release(ints);
    wf_release(int_b);
    wf_release(fidx);
    wf_release(idx);
    wf_release(wrong);
    wf_release(a);
    wf_release(b);
}

/* ---------------------------------------------------------------- segmented_mm */

static void test_segmented_mm(void)
{
    const int64_t m = 4, k = 7, n = 3;
    const int64_t as[2] = {m, k}, bs[2] = {k, n};
    /* (2, 3) segments: ordinary, empty, full, reversed (empty), single */
    const double sv[12] = {0, 3, 3, 3, 0, 7, 5, 2, 6, 7, 2, 6};
    const int64_t ss[3] = {2, 3, 2};
    for (int t = 0; t < 4; t++) {
        const wf_dtype dt = float_dtypes[t];
        double *av = values_in(m * k, dt, 31), *bv = values_in(k * n, dt, 32);
        wf_array *a = conf_strided(av, as, 2, dt), *b = conf_array(bv, bs, 2, dt);
        wf_array *seg = conf_array(sv, ss, 3, WF_DTYPE_I32);
        double want[6 * 12];
        for (int s = 0; s < 6; s++) {
            const int64_t s0 = (int64_t)sv[2 * s], s1 = (int64_t)sv[2 * s + 1];
            ref_product(av, bv, m, k, n, s0, s1 > s0 ? s1 : s0, want + s * m * n);
        }
        const int64_t out_shape[4] = {2, 3, m, n};
        if (!conf_check(wf_segmented_mm(a, b, seg), dt, out_shape, 4, want, tolerance(dt)))
            printf("      (%s)\n", wf_dtype_name(dt));
        wf_release(seg);
        wf_release(a);
        wf_release(b);
        free(av);
        free(bv);
    }
    wf_array *a = wf_ones(as, 2, WF_DTYPE_F32), *b = wf_ones(bs, 2, WF_DTYPE_F32);
    const double bad_v[2] = {2, 8};
    const int64_t two = 2, three = 3;
    wf_array *bad = conf_array(bad_v, &two, 1, WF_DTYPE_I64);
    wf_array *out = wf_segmented_mm(a, b, bad);
    if (CHECK_NOT_NULL(out)) {
        CHECK_STATUS(wf_eval(&out, 1), WF_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(wf_last_error_message(), "segment (2, 8) is out of range");
        wf_clear_error();
    }
    wf_release(out);
    wf_array *three_wide = wf_zeros(&three, 1, WF_DTYPE_I32);
    conf_check_error(wf_segmented_mm(a, b, three_wide), WF_ERR_SHAPE, "wf_segmented_mm");
    conf_check_error(wf_segmented_mm(a, a, bad), WF_ERR_SHAPE, "wf_segmented_mm");
    wf_release(three_wide);
    wf_release(bad);
    wf_release(a);
    wf_release(b);
}

/* ---------------------------------------------------------------- block_masked_mm */

static double block_entry(const double *mask, int64_t cols_blocks, int64_t i, int64_t j,
                          int64_t bs)
{
    return mask ? mask[(i / bs) * cols_blocks + j / bs] : 1;
}

static void test_block_masked_mm(void)
{
    const int64_t m = 5, k = 6, n = 7, bs = 2;
    const int64_t tm = 3, tk = 3, tn = 4;
    const int64_t as[3] = {2, m, k}, bsh[2] = {k, n};
    double *av = values_in(2 * m * k, WF_DTYPE_F32, 41), *bv = values_in(k * n, WF_DTYPE_F32, 42);
    const double lhs_v[9] = {1, 0, 1, 1, 1, 0, 0, 1, 1};
    const double rhs_v[12] = {1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0};
    const double out_v[12] = {0.5, 1, 2, 0, 1, 1, -1, 1, 0, 3, 1, 1};
    const int64_t ls[2] = {tm, tk}, rs[2] = {tk, tn}, os[2] = {tm, tn};
    for (int float_masks = 0; float_masks < 2; float_masks++) {
        wf_array *a = conf_array(av, as, 3, WF_DTYPE_F32), *b = conf_array(bv, bsh, 2, WF_DTYPE_F32);
        const wf_dtype mdt = float_masks ? WF_DTYPE_F32 : WF_DTYPE_BOOL;
        wf_array *ml = conf_array(lhs_v, ls, 2, mdt), *mr = conf_array(rhs_v, rs, 2, mdt);
        double ov[12];
        for (int i = 0; i < 12; i++)
            ov[i] = float_masks ? out_v[i] : (out_v[i] != 0);
        wf_array *mo = conf_array(ov, os, 2, mdt);
        double want[2 * 5 * 7];
        for (int e = 0; e < 2; e++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t t = 0; t < k; t++)
                        s += av[e * m * k + i * k + t] * block_entry(lhs_v, tk, i, t, bs) *
                             bv[t * n + j] * block_entry(rhs_v, tn, t, j, bs);
                    want[(e * m + i) * n + j] = s * block_entry(ov, tn, i, j, bs);
                }
        const int64_t out_shape[3] = {2, m, n};
        if (!conf_check(wf_block_masked_mm(a, b, (int)bs, mo, ml, mr), WF_DTYPE_F32, out_shape, 3,
                        want, 1e-5))
            printf("      (float masks %d)\n", float_masks);
        /* only an output mask */
        for (int e = 0; e < 2; e++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t t = 0; t < k; t++)
                        s += av[e * m * k + i * k + t] * bv[t * n + j];
                    want[(e * m + i) * n + j] = s * block_entry(ov, tn, i, j, bs);
                }
        conf_check(wf_block_masked_mm(a, b, (int)bs, mo, NULL, NULL), WF_DTYPE_F32, out_shape, 3,
                   want, 1e-5);
        wf_release(mo);
        wf_release(ml);
        wf_release(mr);
        wf_release(a);
        wf_release(b);
    }
    wf_array *a = wf_ones(as, 3, WF_DTYPE_F32), *b = wf_ones(bsh, 2, WF_DTYPE_F32);
    wf_array *mo = wf_ones(os, 2, WF_DTYPE_BOOL), *wrong = wf_ones(ls, 2, WF_DTYPE_BOOL);
    conf_check_error(wf_block_masked_mm(a, b, 0, mo, NULL, NULL), WF_ERR_INVALID_ARGUMENT,
                     "wf_block_masked_mm");
    conf_check_error(wf_block_masked_mm(a, b, 2, wrong, NULL, NULL), WF_ERR_SHAPE, NULL);
    wf_array *ints = wf_ones(os, 2, WF_DTYPE_I32);
    conf_check_error(wf_block_masked_mm(a, b, 2, ints, NULL, NULL), WF_ERR_DTYPE,
                     "wf_block_masked_mm");
    wf_release(ints);
    wf_release(wrong);
    wf_release(mo);
    wf_release(a);
    wf_release(b);
    free(av);
    free(bv);
}

/* A 1-d a (its masks' row dim added, as its matrix's), a 1-d b (their
 * column dim added), and operand masks without an output mask. */
static void test_block_masked_mm_vectors_and_operand_masks(void)
{
    const int64_t m = 5, k = 6, n = 7, bs = 2, tm = 3, tk = 3, tn = 4;
    double *av = values_in(m * k, WF_DTYPE_F32, 43), *bv = values_in(k * n, WF_DTYPE_F32, 44);
    const double lhs_v[9] = {1, 0, 1, 1, 1, 0, 0, 1, 1}, rhs_v[12] = {1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0};
    const double out_v[4] = {1, 0, 1, 1}, kv[3] = {1, 0, 1}, mv[3] = {0, 1, 1};
    const int64_t as[2] = {m, k}, bsh[2] = {k, n}, ls[2] = {tm, tk}, rs[2] = {tk, tn};
    wf_array *a = conf_array(av, as, 2, WF_DTYPE_F32), *b = conf_array(bv, bsh, 2, WF_DTYPE_F32);
    wf_array *row = conf_array(av, &k, 1, WF_DTYPE_F32), *col = conf_array(av, &k, 1, WF_DTYPE_F32);
    wf_array *mk = conf_array(kv, &tk, 1, WF_DTYPE_BOOL), *mn = conf_array(out_v, &tn, 1, WF_DTYPE_BOOL);
    wf_array *mm = conf_array(mv, &tm, 1, WF_DTYPE_BOOL);
    wf_array *ml = conf_array(lhs_v, ls, 2, WF_DTYPE_BOOL), *mr = conf_array(rhs_v, rs, 2, WF_DTYPE_BOOL);
    double want[5 * 7];
    /* row (k) @ b with a (1, tk) lhs mask given as (tk) and an output mask (tn) */
    for (int64_t j = 0; j < n; j++) {
        double sum = 0;
        for (int64_t t = 0; t < k; t++)
            sum += av[t] * kv[t / bs] * bv[t * n + j];
        want[j] = sum * out_v[j / bs];
    }
    CHECK(conf_check(wf_block_masked_mm(row, b, (int)bs, mn, mk, NULL), WF_DTYPE_F32, &n, 1, want,
                     1e-5));
    /* a @ col (k) with a (tk, 1) rhs mask given as (tk) and an output mask (tm) */
    for (int64_t i = 0; i < m; i++) {
        double sum = 0;
        for (int64_t t = 0; t < k; t++)
            sum += av[i * k + t] * av[t] * kv[t / bs];
        want[i] = sum * mv[i / bs];
    }
    CHECK(conf_check(wf_block_masked_mm(a, col, (int)bs, mm, NULL, mk), WF_DTYPE_F32, &m, 1, want,
                     1e-5));
    /* operand masks only */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double sum = 0;
            for (int64_t t = 0; t < k; t++)
                sum += av[i * k + t] * lhs_v[(i / bs) * tk + t / bs] * bv[t * n + j] *
                       rhs_v[(t / bs) * tn + j / bs];
            want[i * n + j] = sum;
        }
    const int64_t os[2] = {m, n};
    CHECK(conf_check(wf_block_masked_mm(a, b, (int)bs, NULL, ml, mr), WF_DTYPE_F32, os, 2, want,
                     1e-5));
    /* no mask at all: the plain product */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double sum = 0;
            for (int64_t t = 0; t < k; t++)
                sum += av[i * k + t] * bv[t * n + j];
            want[i * n + j] = sum;
        }
    CHECK(conf_check(wf_block_masked_mm(a, b, 0, NULL, NULL, NULL), WF_DTYPE_F32, os, 2, want,
                     1e-5));
    /* Regression: a released mask was given a new reference (revived) and
     * its recycled node read as a mask (a reshape of a garbage shape failed,
     * or a wrong product) instead of refusing it. */
    const int64_t live = live_arrays();
    wf_array *gone = wf_ones(ls, 2, WF_DTYPE_BOOL);
    wf_release(gone);
    conf_check_error(wf_block_masked_mm(a, b, (int)bs, NULL, gone, NULL), WF_ERR_MISUSE,
                     "wf_block_masked_mm: mask_lhs was already released");
    conf_check_error(wf_block_masked_mm(row, b, (int)bs, NULL, NULL, gone), WF_ERR_MISUSE,
                     "wf_block_masked_mm: mask_rhs was already released");
    conf_check_error(wf_block_masked_mm(a, col, (int)bs, gone, NULL, NULL), WF_ERR_MISUSE,
                     "wf_block_masked_mm: mask_out was already released");
    CHECK_EQ_INT(live_arrays(), live);
    wf_array *arrays[] = {a, b, row, col, mk, mn, mm, ml, mr};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        wf_release(arrays[i]);
    free(av);
    free(bv);
}

/* The largest |x - y| (both evaluated; -1 when either failed). */
static double max_abs_diff(wf_array *x, wf_array *y)
{
    wf_array *m = wf_max(wf_abs(wf_subtract(x, y)), NULL, 0, false);
    double v = -1;
    if (wf_array_item(m, &v) != WF_OK)
        v = -1;
    wf_release(m);
    return v;
}

/* The argument checks the every-dtype tests do not reach, each with its
 * message, and the integer index/segment dtypes that are converted first
 * (the same products as with int32/int64). */
static void test_matmul_family_argument_checks(void)
{
    wf_scope_begin();
    const int64_t as[3] = {2, 3, 4}, bs[3] = {2, 4, 5}, two = 2, seg_shape[2] = {1, 2};
    wf_array *a = wf_ones(as, 3, WF_DTYPE_F32), *b = wf_ones(bs, 3, WF_DTYPE_F32);
    wf_array *scalar = wf_scalar(1, WF_DTYPE_F32), *gone = wf_zeros(&two, 1, WF_DTYPE_I32);
    wf_release(gone);
    const double iv[2] = {1, 0};
    wf_array *idx = conf_array(iv, &two, 1, WF_DTYPE_I32), *idx16 = conf_array(iv, &two, 1, WF_DTYPE_I16);
    conf_check_error(wf_gather_mm(scalar, b, idx, idx, false), WF_ERR_SHAPE,
                     "wf_gather_mm: operands must have at least 1 dim (got ranks 0 and 3)");
    conf_check_error(wf_gather_mm(a, b, gone, idx, false), WF_ERR_MISUSE,
                     "wf_gather_mm: indices was already released");
    int64_t ones[WF_MAX_NDIM - 1];
    for (int d = 0; d < WF_MAX_NDIM - 1; d++)
        ones[d] = 1;
    wf_array *deep = wf_zeros(ones, WF_MAX_NDIM - 1, WF_DTYPE_I32);
    char why[96];
    snprintf(why, sizeof why, "wf_gather_mm: the result would have rank %d (max %d)",
             WF_MAX_NDIM + 1, WF_MAX_NDIM);
    conf_check_error(wf_gather_mm(a, b, deep, idx, false), WF_ERR_SHAPE, why);
    CHECK_NEAR(max_abs_diff(wf_gather_mm(a, b, idx16, idx16, false),
                            wf_gather_mm(a, b, idx, idx, false)), 0, 0);

    const int64_t ms[2] = {3, 4}, ns[2] = {4, 5};
    wf_array *m = wf_ones(ms, 2, WF_DTYPE_F32), *n = wf_ones(ns, 2, WF_DTYPE_F32);
    wf_array *mi = wf_ones(ms, 2, WF_DTYPE_I32), *ni = wf_ones(ns, 2, WF_DTYPE_I32);
    const double sv[2] = {1, 3};
    wf_array *seg = conf_array(sv, seg_shape, 2, WF_DTYPE_I64);
    conf_check_error(wf_segmented_mm(m, n, wf_scalar(1, WF_DTYPE_I32)), WF_ERR_SHAPE,
                     "wf_segmented_mm: segments should have shape (..., 2), not ()");
    conf_check_error(wf_segmented_mm(m, n, conf_array(sv, seg_shape, 2, WF_DTYPE_F32)),
                     WF_ERR_DTYPE, "wf_segmented_mm: segments must be integers, not float32");
    conf_check_error(wf_segmented_mm(mi, ni, seg), WF_ERR_DTYPE,
                     "wf_segmented_mm: dtypes int32 and int32 (only real floating point");
    conf_check_error(wf_segmented_mm(a, n, seg), WF_ERR_SHAPE, "batches are not supported");
    CHECK_NEAR(max_abs_diff(wf_segmented_mm(m, n, conf_array(sv, seg_shape, 2, WF_DTYPE_U16)),
                            wf_segmented_mm(m, n, seg)), 0, 0);

    const int64_t mask_shape[2] = {2, 3};
    wf_array *mask = wf_ones(mask_shape, 2, WF_DTYPE_BOOL);
    conf_check_error(wf_block_masked_mm(scalar, n, 2, mask, NULL, NULL), WF_ERR_SHAPE,
                     "wf_block_masked_mm: operands must have at least 1 dim");
    conf_check_error(wf_block_masked_mm(mi, ni, 2, mask, NULL, NULL), WF_ERR_DTYPE,
                     "wf_block_masked_mm: dtypes int32 and int32");
    const int64_t b3s[3] = {3, 4, 5};
    conf_check_error(wf_block_masked_mm(a, wf_ones(b3s, 3, WF_DTYPE_F32), 2, mask, NULL, NULL),
                     WF_ERR_SHAPE, "wf_block_masked_mm");
    /* no mask at all: the plain product */
    CHECK_NEAR(max_abs_diff(wf_block_masked_mm(m, n, 2, NULL, NULL, NULL), wf_matmul(m, n)), 0, 0);
    wf_scope_end();
}

/* ---------------------------------------------------------------- transforms */

static wf_array *build_gather_mm(wf_array *const *in)
{
    const double lv[3] = {2, 0, 2}, rv[3] = {1, 1, 0};
    const int64_t three = 3;
    wf_array *l = conf_array(lv, &three, 1, WF_DTYPE_I32), *r = conf_array(rv, &three, 1, WF_DTYPE_I32);
    wf_array *out = wf_gather_mm(in[0], in[1], l, r, false);
    wf_release(l);
    wf_release(r);
    return out;
}

/* indices from float inputs (truncated), so vmap batches them too */
static wf_array *build_gather_mm_batched_index(wf_array *const *in)
{
    wf_array *l = wf_astype(in[2], WF_DTYPE_I32), *r = wf_astype(in[3], WF_DTYPE_I64);
    wf_array *out = wf_gather_mm(in[0], in[1], l, r, false);
    wf_release(l);
    wf_release(r);
    return out;
}

static wf_array *build_segmented_mm(wf_array *const *in)
{
    const double sv[8] = {0, 2, 1, 5, 3, 3, 0, 5};
    const int64_t ss[2] = {4, 2};
    wf_array *seg = conf_array(sv, ss, 2, WF_DTYPE_I32);
    wf_array *out = wf_segmented_mm(in[0], in[1], seg);
    wf_release(seg);
    return out;
}

/* segments from a float input (truncated) */
static wf_array *build_segmented_mm_batched(wf_array *const *in)
{
    wf_array *seg = wf_astype(in[2], WF_DTYPE_I32);
    wf_array *out = wf_segmented_mm(in[0], in[1], seg);
    wf_release(seg);
    return out;
}

/* float masks are differentiable inputs too */
static wf_array *build_block_masked(wf_array *const *in)
{
    return wf_block_masked_mm(in[0], in[1], 2, in[2], in[3], NULL);
}

static void test_transforms(void)
{
    const tu_case g = {"gather_mm", build_gather_mm, 2, {3, 3}, {{3, 2, 4}, {2, 4, 3}}, -1, 1};
    tu_check_case(&g, true);
    /* indices in [0, 2) once truncated (and -2..-1 for negative ones) */
    const tu_case gi = {"gather_mm batched indices", build_gather_mm_batched_index, 4,
                        {3, 3, 1, 1}, {{2, 2, 4}, {2, 4, 3}, {3}, {3}}, 0, 1.99};
    tu_check_case(&gi, false);
    const tu_case s = {"segmented_mm", build_segmented_mm, 2, {2, 2}, {{3, 5}, {5, 2}}, -1, 1};
    tu_check_case(&s, true);
    const tu_case sb = {"segmented_mm batched segments", build_segmented_mm_batched, 3,
                        {2, 2, 2}, {{3, 5}, {5, 2}, {4, 2}}, 0, 4.99};
    tu_check_case(&sb, false);
    const tu_case bm = {"block_masked_mm", build_block_masked, 4, {2, 2, 2, 2},
                        {{3, 4}, {4, 5}, {2, 3}, {2, 2}}, -1, 1};
    tu_check_case(&bm, true);
}

static wf_status gather_mm_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_gather_mm(in[0], in[1], in[2], in[3], false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_compiled(void)
{
    wf_scope_begin();
    const int64_t as[3] = {3, 2, 4}, bs[3] = {3, 4, 5}, two = 2;
    double *av = values_in(24, WF_DTYPE_F32, 51), *bv = values_in(60, WF_DTYPE_F32, 52);
    wf_array *a = conf_array(av, as, 3, WF_DTYPE_F32), *b = conf_array(bv, bs, 3, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(gather_mm_call, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    for (int call = 0; call < 3; call++) {
        const double lv[2] = {call % 3, (call + 1) % 3}, rv[2] = {(call + 2) % 3, call % 3};
        wf_array *l = conf_array(lv, &two, 1, WF_DTYPE_I32), *r = conf_array(rv, &two, 1, WF_DTYPE_I32);
        wf_array *in[4] = {a, b, l, r}, *out = NULL;
        size_t nout = 1;
        double want[2 * 10];
        for (int i = 0; i < 2; i++)
            ref_product(av + (int)lv[i] * 8, bv + (int)rv[i] * 20, 2, 4, 5, 0, 4, want + i * 10);
        const int64_t out_shape[3] = {2, 2, 5};
        if (CHECK_OK(wf_fn_call(cf, in, 4, &out, &nout)))
            conf_check(out, WF_DTYPE_F32, out_shape, 3, want, 1e-5);
    }
    wf_compile_stats st = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cf, &st));
    CHECK_EQ_INT(st.traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
    free(av);
    free(bv);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_gather_mm_every_dtype);
    RUN_TEST(test_gather_mm_defaults_and_vectors);
    RUN_TEST(test_gather_mm_bits_of_matmul);
    RUN_TEST(test_gather_mm_errors);
    RUN_TEST(test_segmented_mm);
    RUN_TEST(test_block_masked_mm);
    RUN_TEST(test_block_masked_mm_vectors_and_operand_masks);
    RUN_TEST(test_matmul_family_argument_checks);
    RUN_TEST(test_transforms);
    RUN_TEST(test_compiled);
    return TEST_SUMMARY();
}
