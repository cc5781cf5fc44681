/*
 * Indexing ops against plain references computed here with loops over
 * doubles: wf_take, wf_take_along_axis, wf_scatter_add. Every data dtype
 * with every index dtype (u8, i32, i64), negative indices, non-contiguous
 * data, indices and updates (conf_strided), broadcasting, 0-d and empty
 * arrays, repeated scatter indices (f16/bf16 accumulate in float32), arrays
 * large enough for the parallel paths; and bad inputs: NULL, bool/float
 * indices, bad axes and shapes at construction, out-of-range indices at
 * evaluation (WF_ERR_INVALID_ARGUMENT naming the index).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "settle.h"

/* Every dtype, in enum order (a shorter list would leave BOOL entries). */
static const wf_dtype all_dtypes[WF_DTYPE_COUNT] = {
    WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I32, WF_DTYPE_I64, WF_DTYPE_F16,
    WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_I8,  WF_DTYPE_I16,
    WF_DTYPE_U16,  WF_DTYPE_U32, WF_DTYPE_U64, WF_DTYPE_C64};
static const wf_dtype index_dtypes[3] = {WF_DTYPE_U8, WF_DTYPE_I32, WF_DTYPE_I64};

/* Evaluates `a` expecting a kernel failure with `want` and `needle` in the
 * message; releases `a`. */
static void check_eval_fails(wf_array *a, wf_status want, const char *needle)
{
    if (!CHECK_NOT_NULL(a))
        return;
    CHECK_STATUS(wf_eval(&a, 1), want);
    CHECK_STR_CONTAINS(wf_last_error_message(), needle);
    wf_release(a);
    wf_clear_error();
    conf_check_error(NULL, WF_OK, NULL); /* still computes */
}

/* NumPy take reference. */
static void ref_take(const double *v, const int64_t *shape, int ndim, const double *idx,
                     const int64_t *ishape, int indim, int axis, double *want, int64_t *oshape,
                     int *ondim)
{
    int n = 0;
    for (int d = 0; d < axis; d++)
        oshape[n++] = shape[d];
    for (int d = 0; d < indim; d++)
        oshape[n++] = ishape[d];
    for (int d = axis + 1; d < ndim; d++)
        oshape[n++] = shape[d];
    *ondim = n;
    int64_t oidx[WF_MAX_NDIM], aidx[WF_MAX_NDIM], iidx[WF_MAX_NDIM];
    for (int64_t i = 0; i < conf_size(oshape, n); i++) {
        conf_unravel(i, oshape, n, oidx);
        for (int d = 0; d < axis; d++)
            aidx[d] = oidx[d];
        for (int d = 0; d < indim; d++)
            iidx[d] = oidx[axis + d];
        int64_t k = (int64_t)idx[conf_ravel(iidx, ishape, indim)];
        aidx[axis] = k < 0 ? k + shape[axis] : k;
        for (int d = axis + 1; d < ndim; d++)
            aidx[d] = oidx[d - 1 + indim];
        want[i] = v[conf_ravel(aidx, shape, ndim)];
    }
}

static void test_take(void)
{
    const int64_t s[3] = {3, 4, 5};
    const int64_t is[2] = {2, 3};
    for (int t = 0; t < WF_DTYPE_COUNT; t++)
        for (int q = 0; q < 3; q++) {
            wf_scope_begin();
            wf_dtype d = all_dtypes[t], id = index_dtypes[q];
            double *v = conf_integer_values(60, d, 1 + t);
            wf_array *a = t % 2 ? conf_strided(v, s, 3, d) : conf_array(v, s, 3, d);
            for (int axis = 0; axis < 3; axis++) {
                double iv[6];
                for (int i = 0; i < 6; i++) {
                    int64_t k = (i * 7 + axis) % s[axis];
                    iv[i] = id != WF_DTYPE_U8 && i % 2 ? (double)(k - s[axis]) : (double)k;
                }
                wf_array *ix = q == 1 ? conf_strided(iv, is, 2, id) : conf_array(iv, is, 2, id);
                double want[360];
                int64_t os[WF_MAX_NDIM];
                int on;
                ref_take(v, s, 3, iv, is, 2, axis, want, os, &on);
                conf_check(wf_take(a, ix, axis), d, os, on, want, 0);
                conf_check(wf_take(a, ix, axis - 3), d, os, on, want, 0);
                /* 0-d index: the axis disappears. */
                wf_array *one = conf_array(iv + 1, NULL, 0, id);
                ref_take(v, s, 3, iv + 1, NULL, 0, axis, want, os, &on);
                conf_check(wf_take(a, one, axis), d, os, on, want, 0);
            }
            free(v);
            wf_scope_end();
        }
    wf_scope_begin();
    /* A data array whose inner block is not contiguous (strided walk). */
    const int64_t s2[3] = {4, 3, 2};
    double *v = conf_integer_values(24, WF_DTYPE_F32, 9);
    wf_array *base = conf_array(v, s2, 3, WF_DTYPE_F32);
    const int perm[3] = {0, 2, 1}; /* (4, 2, 3), inner (2, 3) strided */
    wf_array *tr = wf_transpose(base, perm, 3);
    double tv[24];
    const int64_t ts[3] = {4, 2, 3};
    for (int64_t i = 0; i < 24; i++) {
        int64_t idx[3], src[3];
        conf_unravel(i, ts, 3, idx);
        src[0] = idx[0];
        src[1] = idx[2];
        src[2] = idx[1];
        tv[i] = v[conf_ravel(src, s2, 3)];
    }
    const int64_t ns[1] = {5};
    double iv[5] = {3, -4, 0, 3, 1}, want[120];
    wf_array *ix = conf_array(iv, ns, 1, WF_DTYPE_I64);
    int64_t os[WF_MAX_NDIM];
    int on;
    ref_take(tv, ts, 3, iv, ns, 1, 0, want, os, &on);
    conf_check(wf_take(tr, ix, 0), WF_DTYPE_F32, os, on, want, 0);
    free(v);
    /* Empty indices, empty data with empty indices. */
    const int64_t e1[1] = {0}, es[3] = {3, 0, 5}, e0[2] = {0, 5};
    wf_array *none = wf_zeros(e1, 1, WF_DTYPE_I32);
    wf_array *m = wf_ones(s, 3, WF_DTYPE_F32);
    conf_check(wf_take(m, none, 1), WF_DTYPE_F32, es, 3, NULL, 0);
    conf_check(wf_take(wf_zeros(e0, 2, WF_DTYPE_F32), none, 0), WF_DTYPE_F32, e0, 2, NULL, 0);
    /* Errors at construction. */
    const int64_t two[1] = {2};
    double bi[2] = {0, 1};
    wf_array *bools = conf_array(bi, two, 1, WF_DTYPE_BOOL);
    wf_array *floats = conf_array(bi, two, 1, WF_DTYPE_F32);
    wf_array *good = conf_array(bi, two, 1, WF_DTYPE_I32);
    conf_check_error(wf_take(m, bools, 0), WF_ERR_DTYPE, "wf_take");
    conf_check_error(wf_take(m, floats, 0), WF_ERR_DTYPE, "wf_take");
    conf_check_error(wf_take(m, good, 3), WF_ERR_AXIS, "wf_take");
    conf_check_error(wf_take(m, good, -4), WF_ERR_AXIS, "wf_take");
    conf_check_error(wf_take(wf_scalar(1, WF_DTYPE_F32), good, 0), WF_ERR_AXIS, "wf_take");
    conf_check_error(wf_take(NULL, good, 0), WF_ERR_NULL_ARGUMENT, "wf_take");
    conf_check_error(wf_take(m, NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_take");
    /* Out of range at evaluation, both signs, every index dtype. */
    double big[2] = {1, 4};
    check_eval_fails(wf_take(m, conf_array(big, two, 1, WF_DTYPE_U8), 1),
                     WF_ERR_INVALID_ARGUMENT, "index 4");
    double negb[2] = {-5, 0};
    check_eval_fails(wf_take(m, conf_array(negb, two, 1, WF_DTYPE_I32), 1),
                     WF_ERR_INVALID_ARGUMENT, "index -5");
    double huge[2] = {0, 1e15};
    check_eval_fails(wf_take(m, conf_array(huge, two, 1, WF_DTYPE_I64), 2),
                     WF_ERR_INVALID_ARGUMENT, "wf_take: index 1000000000000000");
    /* Non-empty indices into an empty axis: refused at construction (MLX). */
    conf_check_error(wf_take(wf_zeros(e0, 2, WF_DTYPE_F32), good, 0), WF_ERR_SHAPE,
                     "from axis 0 of size 0");
    /* The failure reaches dependents. */
    wf_array *bad = wf_take(m, conf_array(big, two, 1, WF_DTYPE_I64), 1);
    check_eval_fails(wf_add(bad, bad), WF_ERR_INVALID_ARGUMENT, "index 4");
    wf_scope_end();
}

static void test_take_along_axis(void)
{
    const int64_t s[3] = {2, 3, 4};
    for (int t = 0; t < WF_DTYPE_COUNT; t++)
        for (int q = 0; q < 3; q++) {
            wf_scope_begin();
            wf_dtype d = all_dtypes[t], id = index_dtypes[q];
            double *v = conf_integer_values(24, d, 21 + t);
            wf_array *a = t % 2 ? conf_strided(v, s, 3, d) : conf_array(v, s, 3, d);
            for (int axis = 0; axis < 3; axis++) {
                /* Indices: axis dim 5, the middle axis broadcast (size 1) when not the axis. */
                int64_t is[3] = {2, 3, 4};
                is[axis] = 5;
                if (axis != 1)
                    is[1] = 1;
                const int64_t ni = conf_size(is, 3);
                double iv[40];
                for (int64_t i = 0; i < ni; i++) {
                    int64_t k = (i * 5 + 1) % s[axis];
                    iv[i] = id != WF_DTYPE_U8 && i % 3 == 0 ? (double)(k - s[axis]) : (double)k;
                }
                wf_array *ix = q == 2 ? conf_strided(iv, is, 3, id) : conf_array(iv, is, 3, id);
                int64_t os[3] = {2, 3, 4};
                os[axis] = 5;
                double want[120];
                int64_t oidx[3], iidx[3];
                for (int64_t i = 0; i < conf_size(os, 3); i++) {
                    conf_unravel(i, os, 3, oidx);
                    for (int dd = 0; dd < 3; dd++)
                        iidx[dd] = is[dd] == 1 ? 0 : oidx[dd];
                    int64_t k = (int64_t)iv[conf_ravel(iidx, is, 3)];
                    oidx[axis] = k < 0 ? k + s[axis] : k;
                    want[i] = v[conf_ravel(oidx, s, 3)];
                }
                conf_check(wf_take_along_axis(a, ix, axis), d, os, 3, want, 0);
            }
            free(v);
            wf_scope_end();
        }
    wf_scope_begin();
    /* The data broadcasts too: a (1, 4) with indices (3, 2) along axis 1. */
    const int64_t as[2] = {1, 4}, is[2] = {3, 2}, os[2] = {3, 2};
    double av[4] = {10, 20, 30, 40}, iv[6] = {0, 3, -1, 1, 2, 2}, w[6] = {10, 40, 40, 20, 30, 30};
    wf_array *a = conf_array(av, as, 2, WF_DTYPE_F32);
    wf_array *ix = conf_array(iv, is, 2, WF_DTYPE_I32);
    conf_check(wf_take_along_axis(a, ix, 1), WF_DTYPE_F32, os, 2, w, 0);
    conf_check(wf_take_along_axis(a, ix, -1), WF_DTYPE_F32, os, 2, w, 0);
    /* Empty. */
    const int64_t es[2] = {0, 2};
    wf_array *ei = wf_zeros(es, 2, WF_DTYPE_I64);
    conf_check(wf_take_along_axis(a, ei, 1), WF_DTYPE_F32, es, 2, NULL, 0);
    /* Errors. */
    const int64_t s1[1] = {2}, bs[2] = {2, 2};
    wf_array *rank1 = wf_zeros(s1, 1, WF_DTYPE_I32);
    wf_array *wrong = wf_zeros(bs, 2, WF_DTYPE_I32);
    wf_array *a3 = wf_zeros((const int64_t[]){3, 4}, 2, WF_DTYPE_F32);
    conf_check_error(wf_take_along_axis(a, rank1, 1), WF_ERR_SHAPE, "wf_take_along_axis");
    conf_check_error(wf_take_along_axis(a3, wrong, 1), WF_ERR_SHAPE, "wf_take_along_axis");
    conf_check_error(wf_take_along_axis(a, ix, 2), WF_ERR_AXIS, "wf_take_along_axis");
    conf_check_error(wf_take_along_axis(a, wf_zeros(is, 2, WF_DTYPE_BOOL), 1), WF_ERR_DTYPE,
                     "wf_take_along_axis");
    conf_check_error(wf_take_along_axis(a, wf_zeros(is, 2, WF_DTYPE_F64), 1), WF_ERR_DTYPE,
                     "wf_take_along_axis");
    conf_check_error(wf_take_along_axis(NULL, ix, 1), WF_ERR_NULL_ARGUMENT, "wf_take_along_axis");
    conf_check_error(wf_take_along_axis(a, NULL, 1), WF_ERR_NULL_ARGUMENT, "wf_take_along_axis");
    double bad[6] = {0, 4, 0, 0, 0, 0};
    check_eval_fails(wf_take_along_axis(a, conf_array(bad, is, 2, WF_DTYPE_I64), 1),
                     WF_ERR_INVALID_ARGUMENT, "wf_take_along_axis: index 4");
    bad[1] = -5;
    check_eval_fails(wf_take_along_axis(a, conf_array(bad, is, 2, WF_DTYPE_I32), 1),
                     WF_ERR_INVALID_ARGUMENT, "index -5");
    wf_scope_end();
}

/* want = a; want[..., idx[i], ...] += u[..., i, ...] (u of shape a with axis n). */
static void ref_scatter_add(const double *a, const int64_t *shape, int ndim, const double *idx,
                            int64_t n, const double *u, int axis, wf_dtype d, double *want)
{
    int64_t size = conf_size(shape, ndim);
    memcpy(want, a, (size_t)size * sizeof *want);
    int64_t us[WF_MAX_NDIM], uidx[WF_MAX_NDIM];
    memcpy(us, shape, (size_t)ndim * sizeof *us);
    us[axis] = n;
    for (int64_t i = 0; i < conf_size(us, ndim); i++) {
        conf_unravel(i, us, ndim, uidx);
        int64_t k = (int64_t)idx[uidx[axis]];
        uidx[axis] = k < 0 ? k + shape[axis] : k;
        int64_t f = conf_ravel(uidx, shape, ndim);
        if (d == WF_DTYPE_BOOL)
            want[f] = (want[f] != 0 || u[i] != 0) ? 1 : 0;
        else
            want[f] += u[i];
    }
    for (int64_t i = 0; i < size; i++) {
        if (d != WF_DTYPE_BOOL) /* integers wrap */
            want[i] = conf_wrap_to(want[i], d);
        if (d == WF_DTYPE_F16 || d == WF_DTYPE_BF16)
            want[i] = conf_round_to(want[i], d);
    }
}

static void test_scatter_add(void)
{
    const int64_t s[3] = {3, 4, 2};
    for (int t = 0; t < WF_DTYPE_COUNT; t++)
        for (int q = 0; q < 3; q++) {
            wf_scope_begin();
            wf_dtype d = all_dtypes[t], id = index_dtypes[q];
            double *v = conf_integer_values(24, d, 41 + t);
            if (d == WF_DTYPE_BOOL)
                for (int i = 0; i < 24; i++)
                    v[i] = i % 3 == 0;
            wf_array *a = t % 2 ? conf_strided(v, s, 3, d) : conf_array(v, s, 3, d);
            for (int axis = 0; axis < 3; axis++) {
                const int64_t n = 5, ns[1] = {5};
                double iv[5];
                for (int i = 0; i < 5; i++) { /* repeats, negatives */
                    int64_t k = (i * 3) % s[axis];
                    iv[i] = id != WF_DTYPE_U8 && i == 3 ? (double)(k - s[axis]) : (double)k;
                }
                iv[4] = iv[0];
                int64_t us[3] = {3, 4, 2};
                us[axis] = n;
                double *u = conf_integer_values(conf_size(us, 3), d, 51 + t);
                if (d == WF_DTYPE_BOOL)
                    for (int64_t i = 0; i < conf_size(us, 3); i++)
                        u[i] = i % 4 == 1;
                wf_array *ix = conf_array(iv, ns, 1, id);
                wf_array *up = q == 1 ? conf_strided(u, us, 3, d) : conf_array(u, us, 3, d);
                double want[24];
                ref_scatter_add(v, s, 3, iv, n, u, axis, d, want);
                conf_check(wf_scatter_add(a, ix, up, axis), d, s, 3, want, conf_tolerance(d));
                free(u);
            }
            free(v);
            wf_scope_end();
        }
    wf_scope_begin();
    /* f16 / bf16: repeated indices accumulate in float32 and round once. */
    const int64_t one[1] = {1}, eight[1] = {8};
    double base = 2048, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, zeros[8] = {0};
    double want = 2056;
    wf_array *h = conf_array(&base, one, 1, WF_DTYPE_F16);
    wf_array *z8 = conf_array(zeros, eight, 1, WF_DTYPE_I32);
    conf_check(wf_scatter_add(h, z8, conf_array(ones, eight, 1, WF_DTYPE_F16), 0), WF_DTYPE_F16,
               one, 1, &want, 0);
    double bbase = 256, bwant = 264;
    wf_array *bh = conf_array(&bbase, one, 1, WF_DTYPE_BF16);
    conf_check(wf_scatter_add(bh, z8, conf_array(ones, eight, 1, WF_DTYPE_BF16), 0),
               WF_DTYPE_BF16, one, 1, &bwant, 0);
    /* Broadcast updates (a scalar), converted from another dtype; `a` unchanged. */
    const int64_t s2[2] = {3, 2}, ns[1] = {4};
    double av[6] = {1, 2, 3, 4, 5, 6}, iv[4] = {2, 0, 2, -1};
    double w2[6] = {1.5, 2.5, 3, 4, 6.5, 7.5};
    wf_array *a = conf_array(av, s2, 2, WF_DTYPE_F32);
    wf_array *ix = conf_array(iv, ns, 1, WF_DTYPE_I64);
    conf_check(wf_scatter_add(a, ix, wf_scalar(0.5, WF_DTYPE_F64), 0), WF_DTYPE_F32, s2, 2, w2,
               0);
    conf_check(wf_retain(a), WF_DTYPE_F32, s2, 2, av, 0);
    /* i32 wraps around. */
    double big = 2147483647, wrap = -2147483648.0;
    wf_array *ib = conf_array(&big, one, 1, WF_DTYPE_I32);
    wf_array *z1 = wf_zeros(one, 1, WF_DTYPE_I32);
    conf_check(wf_scatter_add(ib, z1, wf_ones(one, 1, WF_DTYPE_I32), 0), WF_DTYPE_I32, one, 1,
               &wrap, 0);
    /* Empty indices: a copy. */
    const int64_t e1[1] = {0}, eu[2] = {0, 2};
    conf_check(wf_scatter_add(a, wf_zeros(e1, 1, WF_DTYPE_I32), wf_zeros(eu, 2, WF_DTYPE_F32), 0),
               WF_DTYPE_F32, s2, 2, av, 0);
    /* Errors. */
    const int64_t bs[2] = {4, 3};
    conf_check_error(wf_scatter_add(a, ix, wf_zeros(bs, 2, WF_DTYPE_F32), 0), WF_ERR_SHAPE,
                     "wf_scatter_add");
    conf_check_error(wf_scatter_add(a, wf_zeros(s2, 2, WF_DTYPE_I32), wf_scalar(1, WF_DTYPE_F32), 0),
                     WF_ERR_SHAPE, "wf_scatter_add");
    conf_check_error(wf_scatter_add(a, wf_zeros(ns, 1, WF_DTYPE_BOOL), wf_scalar(1, WF_DTYPE_F32), 0),
                     WF_ERR_DTYPE, "wf_scatter_add");
    conf_check_error(wf_scatter_add(a, ix, wf_scalar(1, WF_DTYPE_F32), 2), WF_ERR_AXIS,
                     "wf_scatter_add");
    conf_check_error(wf_scatter_add(NULL, ix, a, 0), WF_ERR_NULL_ARGUMENT, "wf_scatter_add");
    conf_check_error(wf_scatter_add(a, NULL, a, 0), WF_ERR_NULL_ARGUMENT, "wf_scatter_add");
    conf_check_error(wf_scatter_add(a, ix, NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_scatter_add");
    double bad[4] = {0, 3, 0, 0};
    check_eval_fails(wf_scatter_add(a, conf_array(bad, ns, 1, WF_DTYPE_I32),
                                    wf_scalar(1, WF_DTYPE_F32), 0),
                     WF_ERR_INVALID_ARGUMENT, "wf_scatter_add: index 3");
    bad[1] = -4;
    check_eval_fails(wf_scatter_add(a, conf_array(bad, ns, 1, WF_DTYPE_I64),
                                    wf_scalar(1, WF_DTYPE_F32), 0),
                     WF_ERR_INVALID_ARGUMENT, "index -4");
    wf_scope_end();
}

/* Sizes that take the parallel paths. */
static void test_large(void)
{
    wf_scope_begin();
    const int64_t rows = 2000, cols = 64, s[2] = {2000, 64};
    double *v = conf_integer_values(rows * cols, WF_DTYPE_F32, 3);
    wf_array *table = conf_array(v, s, 2, WF_DTYPE_F32);
    const int64_t n = 3000, ns[1] = {3000};
    double *iv = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        iv[i] = (double)((i * 7919) % rows);
    wf_array *ix = conf_array(iv, ns, 1, WF_DTYPE_I32);
    double *want = malloc(sizeof(double) * (size_t)(n * cols));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < cols; j++)
            want[i * cols + j] = v[(int64_t)iv[i] * cols + j];
    const int64_t os[2] = {3000, 64};
    conf_check(wf_take(table, ix, 0), WF_DTYPE_F32, os, 2, want, 0);
    /* Gather of single elements along the last axis (first 100 rows). */
    const int64_t sub = 100, os1[2] = {100, 3000};
    double *w1 = malloc(sizeof(double) * (size_t)(sub * n));
    wf_array *small_ix = conf_array(iv, ns, 1, WF_DTYPE_I64);
    wf_array *mod = wf_take(table, small_ix, 1); /* indices up to 1999: out of range for 64 */
    CHECK_STATUS(wf_eval(&mod, 1), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    for (int64_t i = 0; i < n; i++)
        iv[i] = (double)((i * 31) % cols);
    wf_array *col_ix = conf_array(iv, ns, 1, WF_DTYPE_I64);
    for (int64_t r = 0; r < sub; r++)
        for (int64_t i = 0; i < n; i++)
            w1[r * n + i] = v[r * cols + (int64_t)iv[i]];
    const int64_t st[2] = {0, 0}, sp[2] = {sub, cols}, ss[2] = {1, 1};
    wf_array *top = wf_slice(table, st, sp, ss);
    conf_check(wf_take(top, col_ix, 1), WF_DTYPE_F32, os1, 2, w1, 0);
    free(w1);
    /* Scatter-add of embedding-style rows. */
    double *u = conf_integer_values(n * cols, WF_DTYPE_F32, 4);
    for (int64_t i = 0; i < n; i++)
        iv[i] = (double)((i * 13) % 500);
    wf_array *rix = conf_array(iv, ns, 1, WF_DTYPE_I32);
    wf_array *up = conf_array(u, os, 2, WF_DTYPE_F32);
    double *ws = malloc(sizeof(double) * (size_t)(rows * cols));
    ref_scatter_add(v, s, 2, iv, n, u, 0, WF_DTYPE_F32, ws);
    conf_check(wf_scatter_add(table, rix, up, 0), WF_DTYPE_F32, s, 2, ws, 1e-5);
    free(ws);
    free(u);
    free(iv);
    free(want);
    free(v);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_take);
    RUN_TEST(test_take_along_axis);
    RUN_TEST(test_scatter_add);
    RUN_TEST(test_large);
    CHECK_EQ_INT(live_arrays(), 0);
    return TEST_SUMMARY();
}
