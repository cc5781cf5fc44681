/*
 * Shape and creation ops against plain references computed here with loops
 * over doubles: swapaxes, moveaxis, expand_dims, squeeze, flatten,
 * slice_update, concatenate, stack, split, split_at, pad, tril, triu,
 * repeat, tile, full_like / zeros_like / ones_like, linspace, eye. Every
 * dtype, non-contiguous inputs (conf_strided), 0-d and empty arrays; views
 * where promised; and every op's bad inputs give NULL (or a status) with the
 * expected code and a message naming the op, after which the library keeps
 * working.
 */
#include <math.h>
#include <limits.h>
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

/* ---------------------------------------------------------------- reference helpers */

/* want[i] = in[transposed index]: out axis d is in axis perm[d]. */
static void ref_transpose(const double *in, const int64_t *shape, int ndim, const int *perm,
                          double *want)
{
    int64_t oshape[WF_MAX_NDIM], oidx[WF_MAX_NDIM], iidx[WF_MAX_NDIM];
    for (int d = 0; d < ndim; d++)
        oshape[d] = shape[perm[d]];
    int64_t n = conf_size(shape, ndim);
    for (int64_t i = 0; i < n; i++) {
        conf_unravel(i, oshape, ndim, oidx);
        for (int d = 0; d < ndim; d++)
            iidx[perm[d]] = oidx[d];
        want[i] = in[conf_ravel(iidx, shape, ndim)];
    }
}

/* Evaluates `a` and tells whether it shares `base`'s buffer (a view). */
static bool shares_buffer(wf_array *a, wf_array *base)
{
    wf_array *both[2] = {a, base};
    if (wf_eval(both, 2) != WF_OK)
        return false;
    return a->buffer == base->buffer;
}

/* ---------------------------------------------------------------- permutations and reshapes */

static void test_swapaxes_moveaxis(void)
{
    const int64_t shape[3] = {2, 3, 4};
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        double *v = conf_integer_values(24, d, 1 + k), want[24];
        wf_array *a = conf_strided(v, shape, 3, d);
        int perm[3] = {2, 1, 0};
        ref_transpose(v, shape, 3, perm, want);
        const int64_t s1[3] = {4, 3, 2};
        conf_check(wf_swapaxes(a, 0, -1), d, s1, 3, want, 0);
        int perm2[3] = {1, 2, 0}; /* moveaxis(a, 0, 2) */
        ref_transpose(v, shape, 3, perm2, want);
        const int64_t s2[3] = {3, 4, 2};
        conf_check(wf_moveaxis(a, 0, 2), d, s2, 3, want, 0);
        int perm3[3] = {2, 0, 1}; /* moveaxis(a, -1, 0) */
        ref_transpose(v, shape, 3, perm3, want);
        const int64_t s3[3] = {4, 2, 3};
        conf_check(wf_moveaxis(a, -1, 0), d, s3, 3, want, 0);
        wf_array *sw = wf_swapaxes(a, 1, 1);
        CHECK(shares_buffer(sw, a));
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    double s = 3;
    wf_array *z = conf_array(&s, NULL, 0, WF_DTYPE_F32);
    conf_check_error(wf_swapaxes(z, 0, 0), WF_ERR_AXIS, "wf_swapaxes");
    const int64_t shape2[2] = {2, 2};
    double v4[4] = {1, 2, 3, 4};
    wf_array *m = conf_array(v4, shape2, 2, WF_DTYPE_F32);
    conf_check_error(wf_swapaxes(m, 0, 2), WF_ERR_AXIS, "wf_swapaxes");
    conf_check_error(wf_moveaxis(m, -3, 0), WF_ERR_AXIS, "wf_moveaxis");
    conf_check_error(wf_moveaxis(m, 0, 5), WF_ERR_AXIS, "wf_moveaxis");
    conf_check_error(wf_swapaxes(NULL, 0, 1), WF_ERR_NULL_ARGUMENT, "wf_swapaxes");
    conf_check_error(wf_moveaxis(NULL, 0, 1), WF_ERR_NULL_ARGUMENT, "wf_moveaxis");
    wf_scope_end();
}

static void test_expand_squeeze_flatten(void)
{
    const int64_t shape[3] = {2, 3, 4};
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        double *v = conf_integer_values(24, d, 11 + k);
        wf_array *a = conf_strided(v, shape, 3, d);
        /* Same element order: only the shape changes. */
        const int axes[2] = {0, -1};
        const int64_t e1[5] = {1, 2, 3, 4, 1};
        wf_array *e = wf_expand_dims(a, axes, 2);
        conf_check(wf_retain(e), d, e1, 5, v, 0);
        CHECK(shares_buffer(e, a)); /* a view even of a non-contiguous input */
        const int mid[1] = {2};
        const int64_t e2[4] = {2, 3, 1, 4};
        conf_check(wf_expand_dims(a, mid, 1), d, e2, 4, v, 0);
        const int sq[2] = {0, 4};
        wf_array *s = wf_squeeze(e, sq, 2);
        conf_check(wf_retain(s), d, shape, 3, v, 0);
        CHECK(shares_buffer(s, a));
        conf_check(wf_squeeze(e, NULL, 0), d, shape, 3, v, 0);
        const int64_t f1[1] = {24}, f2[2] = {6, 4}, f3[2] = {2, 12};
        conf_check(wf_flatten(a, 0, -1), d, f1, 1, v, 0);
        conf_check(wf_flatten(a, 0, 1), d, f2, 2, v, 0);
        conf_check(wf_flatten(a, 1, 2), d, f3, 2, v, 0);
        conf_check(wf_flatten(a, 1, 1), d, shape, 3, v, 0);
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    /* Flattening leading axes of a transposed array is a view. */
    const int64_t s3[3] = {2, 3, 4};
    double *v = conf_integer_values(24, WF_DTYPE_F32, 5);
    wf_array *base = conf_array(v, s3, 3, WF_DTYPE_F32);
    const int perm[3] = {2, 0, 1}; /* (4, 2, 3), strides (1, 12, 4) */
    wf_array *t = wf_transpose(base, perm, 3);
    wf_array *flat = wf_flatten(t, 1, 2);
    CHECK(shares_buffer(flat, base));
    double want[24];
    ref_transpose(v, s3, 3, perm, want);
    const int64_t fs[2] = {4, 6};
    conf_check(wf_retain(flat), WF_DTYPE_F32, fs, 2, want, 0);
    free(v);
    /* 0-d and empty. */
    double x = 7;
    wf_array *z = conf_array(&x, NULL, 0, WF_DTYPE_I32);
    const int64_t one[1] = {1}, ones[3] = {1, 1, 1};
    const int ax3[3] = {0, 1, 2};
    conf_check(wf_expand_dims(z, ax3, 3), WF_DTYPE_I32, ones, 3, &x, 0);
    conf_check(wf_flatten(z, 0, -1), WF_DTYPE_I32, one, 1, &x, 0);
    wf_array *e3 = wf_expand_dims(z, ax3, 3);
    conf_check(wf_squeeze(e3, NULL, 0), WF_DTYPE_I32, NULL, 0, &x, 0);
    conf_check(wf_squeeze(z, NULL, 0), WF_DTYPE_I32, NULL, 0, &x, 0);
    const int64_t es[3] = {0, 1, 3}, es2[2] = {0, 3}, ef[1] = {0};
    wf_array *empty = wf_zeros(es, 3, WF_DTYPE_F32);
    conf_check(wf_squeeze(empty, NULL, 0), WF_DTYPE_F32, es2, 2, NULL, 0);
    conf_check(wf_flatten(empty, 0, -1), WF_DTYPE_F32, ef, 1, NULL, 0);
    /* Errors. */
    const int bad[2] = {1, 1};
    conf_check_error(wf_expand_dims(z, bad, 2), WF_ERR_AXIS, "wf_expand_dims");
    conf_check_error(wf_expand_dims(base, (const int[]){4}, 1), WF_ERR_AXIS, "wf_expand_dims");
    conf_check_error(wf_expand_dims(base, NULL, 1), WF_ERR_NULL_ARGUMENT, "wf_expand_dims");
    conf_check_error(wf_expand_dims(base, ax3, -1), WF_ERR_INVALID_ARGUMENT, "wf_expand_dims");
    int many[WF_MAX_NDIM];
    for (int i = 0; i < WF_MAX_NDIM; i++)
        many[i] = i;
    conf_check_error(wf_expand_dims(base, many, WF_MAX_NDIM), WF_ERR_AXIS, "wf_expand_dims");
    conf_check_error(wf_squeeze(base, (const int[]){1}, 1), WF_ERR_SHAPE, "wf_squeeze");
    conf_check_error(wf_squeeze(e3, bad, 2), WF_ERR_AXIS, "wf_squeeze");
    conf_check_error(wf_squeeze(base, (const int[]){3}, 1), WF_ERR_AXIS, "wf_squeeze");
    conf_check_error(wf_squeeze(base, NULL, 2), WF_ERR_NULL_ARGUMENT, "wf_squeeze");
    conf_check_error(wf_flatten(base, 2, 1), WF_ERR_AXIS, "wf_flatten");
    conf_check_error(wf_flatten(base, 0, 3), WF_ERR_AXIS, "wf_flatten");
    conf_check_error(wf_flatten(NULL, 0, 1), WF_ERR_NULL_ARGUMENT, "wf_flatten");
    conf_check_error(wf_expand_dims(NULL, ax3, 1), WF_ERR_NULL_ARGUMENT, "wf_expand_dims");
    conf_check_error(wf_squeeze(NULL, NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_squeeze");
    wf_scope_end();
}

/* ---------------------------------------------------------------- slice_update */

/* want = a with a[slice] = update (update broadcast from `ushape`). */
static void ref_slice_update(const double *a, const int64_t *shape, int ndim,
                             const int64_t *starts, const int64_t *stops, const int64_t *steps,
                             const double *u, const int64_t *ushape, int undim, double *want)
{
    int64_t n = conf_size(shape, ndim);
    memcpy(want, a, (size_t)n * sizeof *want);
    int64_t first[WF_MAX_NDIM], count[WF_MAX_NDIM], idx[WF_MAX_NDIM], uidx[WF_MAX_NDIM];
    for (int d = 0; d < ndim; d++) {
        /* Python slice semantics, written out independently. */
        int64_t dim = shape[d], st = steps[d], lo = starts[d], hi = stops[d];
        if (lo < 0) lo += dim;
        if (hi < 0) hi += dim;
        if (st > 0) {
            lo = lo < 0 ? 0 : lo > dim ? dim : lo;
            hi = hi < 0 ? 0 : hi > dim ? dim : hi;
            count[d] = hi > lo ? (hi - lo + st - 1) / st : 0;
        } else {
            lo = lo < -1 ? -1 : lo > dim - 1 ? dim - 1 : lo;
            hi = hi < -1 ? -1 : hi > dim - 1 ? dim - 1 : hi;
            count[d] = lo > hi ? (lo - hi - st - 1) / -st : 0;
        }
        first[d] = lo;
    }
    int64_t m = conf_size(count, ndim);
    for (int64_t i = 0; i < m; i++) {
        conf_unravel(i, count, ndim, idx);
        int64_t pos[WF_MAX_NDIM];
        for (int d = 0; d < ndim; d++)
            pos[d] = first[d] + idx[d] * steps[d];
        for (int d = 0; d < undim; d++) {
            int64_t od = idx[ndim - undim + d];
            uidx[d] = ushape[d] == 1 ? 0 : od;
        }
        want[conf_ravel(pos, shape, ndim)] = u[conf_ravel(uidx, ushape, undim)];
    }
}

static void test_slice_update(void)
{
    const int64_t shape[2] = {5, 6};
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        double *v = conf_integer_values(30, d, 21 + k), want[30];
        wf_array *a = conf_strided(v, shape, 2, d);
        /* Full-shape update, strided. */
        const int64_t st[2] = {1, -1}, sp[2] = {5, 0}, ss[2] = {2, -2}, ush[2] = {2, 3};
        double *u = conf_integer_values(6, d, 99 + k);
        wf_array *up = conf_strided(u, ush, 2, d);
        ref_slice_update(v, shape, 2, st, sp, ss, u, ush, 2, want);
        conf_check(wf_slice_update(a, up, st, sp, ss), d, shape, 2, want, 0);
        /* Broadcast row update, and an update of another dtype (converted). */
        const int64_t st2[2] = {0, 1}, sp2[2] = {4, 4}, ss2[2] = {1, 1}, rsh[1] = {3};
        double r[3] = {1, 0, 3};
        wf_array *row = conf_array(r, rsh, 1, WF_DTYPE_F64);
        double rr[3];
        for (int i = 0; i < 3; i++)
            rr[i] = conf_round_to(r[i], d);
        ref_slice_update(v, shape, 2, st2, sp2, ss2, rr, rsh, 1, want);
        conf_check(wf_slice_update(a, row, st2, sp2, ss2), d, shape, 2, want, 0);
        /* Empty slice: a copy of a. */
        const int64_t st3[2] = {3, 0}, sp3[2] = {3, 6}, ss3[2] = {1, 1}, esh[2] = {0, 6};
        wf_array *none = wf_zeros(esh, 2, d);
        conf_check(wf_slice_update(a, none, st3, sp3, ss3), d, shape, 2, v, 0);
        CHECK(!wf_array_is_evaluated(a) || true);
        free(u);
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    /* 0-d: the whole array is replaced. */
    double x = 2, y = 9;
    wf_array *z = conf_array(&x, NULL, 0, WF_DTYPE_I32);
    wf_array *zy = conf_array(&y, NULL, 0, WF_DTYPE_I32);
    conf_check(wf_slice_update(z, zy, NULL, NULL, NULL), WF_DTYPE_I32, NULL, 0, &y, 0);
    /* The input is unchanged (immutable). */
    const int64_t sh[1] = {4}, s0[1] = {0}, s1[1] = {2}, s2[1] = {1};
    double v4[4] = {1, 2, 3, 4}, w4[4] = {9, 9, 3, 4};
    wf_array *a = conf_array(v4, sh, 1, WF_DTYPE_F32);
    conf_check(wf_slice_update(a, zy, s0, s1, s2), WF_DTYPE_F32, sh, 1, w4, 0);
    conf_check(wf_retain(a), WF_DTYPE_F32, sh, 1, v4, 0);
    /* Errors. */
    const int64_t bsh[1] = {3}, zero[1] = {0};
    wf_array *three = wf_ones(bsh, 1, WF_DTYPE_F32);
    conf_check_error(wf_slice_update(a, three, s0, s1, s2), WF_ERR_SHAPE, "wf_slice_update");
    conf_check_error(wf_slice_update(a, zy, s0, s1, zero), WF_ERR_INVALID_ARGUMENT,
                     "wf_slice_update");
    conf_check_error(wf_slice_update(a, zy, NULL, s1, s2), WF_ERR_NULL_ARGUMENT,
                     "wf_slice_update");
    conf_check_error(wf_slice_update(NULL, zy, s0, s1, s2), WF_ERR_NULL_ARGUMENT,
                     "wf_slice_update");
    conf_check_error(wf_slice_update(a, NULL, s0, s1, s2), WF_ERR_NULL_ARGUMENT,
                     "wf_slice_update");
    wf_scope_end();
}

/* ---------------------------------------------------------------- concatenate, stack */

static void test_concatenate(void)
{
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        const int64_t sa[3] = {2, 3, 4}, sb[3] = {2, 1, 4}, sc[3] = {2, 2, 4};
        double *va = conf_integer_values(24, d, 31 + k), *vb = conf_integer_values(8, d, 32 + k),
               *vc = conf_integer_values(16, WF_DTYPE_I32, 33 + k);
        wf_array *x[3] = {conf_strided(va, sa, 3, d), conf_array(vb, sb, 3, d),
                          conf_strided(vc, sc, 3, WF_DTYPE_I32)};
        const wf_dtype out_d = wf_promote_types(d, WF_DTYPE_I32);
        const int64_t so[3] = {2, 6, 4};
        double want[48];
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < 6; j++)
                for (int64_t l = 0; l < 4; l++) {
                    double val = j < 3 ? va[(i * 3 + j) * 4 + l]
                                 : j < 4 ? vb[i * 4 + l]
                                         : vc[(i * 2 + (j - 4)) * 4 + l];
                    want[(i * 6 + j) * 4 + l] = conf_round_to(val, out_d);
                }
        conf_check(wf_concatenate(x, 3, 1), out_d, so, 3, want, 0);
        conf_check(wf_concatenate(x, 3, -2), out_d, so, 3, want, 0);
        /* Axis 0 and the last axis, same dtype. */
        wf_array *y[2] = {x[0], x[0]};
        const int64_t s0[3] = {4, 3, 4}, s2[3] = {2, 3, 8};
        double w0[48], w2[48];
        for (int64_t i = 0; i < 48; i++) {
            w0[i] = va[i % 24];
            int64_t row = i / 8, col = i % 8;
            w2[i] = va[row * 4 + col % 4];
        }
        conf_check(wf_concatenate(y, 2, 0), d, s0, 3, w0, 0);
        conf_check(wf_concatenate(y, 2, 2), d, s2, 3, w2, 0);
        conf_check(wf_concatenate(x, 1, 0), d, sa, 3, va, 0);
        free(va);
        free(vb);
        free(vc);
        wf_scope_end();
    }
    wf_scope_begin();
    /* Empty pieces, many inputs. */
    const int64_t e[2] = {0, 3}, s1[2] = {1, 3};
    double r[3] = {1, 2, 3};
    wf_array *row = conf_array(r, s1, 2, WF_DTYPE_F32);
    wf_array *em = wf_zeros(e, 2, WF_DTYPE_F32);
    wf_array *parts[4] = {em, row, em, row};
    const int64_t s2[2] = {2, 3};
    double w[6] = {1, 2, 3, 1, 2, 3};
    conf_check(wf_concatenate(parts, 4, 0), WF_DTYPE_F32, s2, 2, w, 0);
    wf_array *empties[2] = {em, em};
    conf_check(wf_concatenate(empties, 2, 0), WF_DTYPE_F32, e, 2, NULL, 0);
    enum { MANY = 200 };
    wf_array *many[MANY];
    double wm[MANY * 3];
    for (int i = 0; i < MANY; i++) {
        many[i] = row;
        for (int j = 0; j < 3; j++)
            wm[i * 3 + j] = r[j];
    }
    const int64_t sm[2] = {MANY, 3};
    conf_check(wf_concatenate(many, MANY, 0), WF_DTYPE_F32, sm, 2, wm, 0);
    /* Errors. */
    double x = 1;
    wf_array *z = conf_array(&x, NULL, 0, WF_DTYPE_F32);
    const int64_t s23[2] = {2, 4}, s3[1] = {3};
    wf_array *other = wf_zeros(s23, 2, WF_DTYPE_F32);
    wf_array *vec = wf_zeros(s3, 1, WF_DTYPE_F32);
    wf_array *bad1[2] = {row, other};
    conf_check_error(wf_concatenate(bad1, 2, 0), WF_ERR_SHAPE, "wf_concatenate");
    wf_array *bad2[2] = {row, vec};
    conf_check_error(wf_concatenate(bad2, 2, 0), WF_ERR_SHAPE, "wf_concatenate");
    wf_array *bad3[2] = {z, z};
    conf_check_error(wf_concatenate(bad3, 2, 0), WF_ERR_SHAPE, "wf_concatenate");
    conf_check_error(wf_concatenate(parts, 2, 2), WF_ERR_AXIS, "wf_concatenate");
    conf_check_error(wf_concatenate(parts, 2, -3), WF_ERR_AXIS, "wf_concatenate");
    conf_check_error(wf_concatenate(parts, 0, 0), WF_ERR_INVALID_ARGUMENT, "wf_concatenate");
    conf_check_error(wf_concatenate(NULL, 2, 0), WF_ERR_NULL_ARGUMENT, "wf_concatenate");
    wf_array *bad4[2] = {row, NULL};
    conf_check_error(wf_concatenate(bad4, 2, 0), WF_ERR_NULL_ARGUMENT, "wf_concatenate");
    wf_scope_end();
}

static void test_stack(void)
{
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        const int64_t s[2] = {2, 3};
        double *va = conf_integer_values(6, d, 41 + k), *vb = conf_integer_values(6, d, 42 + k);
        wf_array *x[2] = {conf_strided(va, s, 2, d), conf_array(vb, s, 2, d)};
        const int64_t s0[3] = {2, 2, 3}, s1[3] = {2, 2, 3}, s2[3] = {2, 3, 2};
        double w0[12], w1[12], w2[12];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                w0[0 * 6 + i * 3 + j] = va[i * 3 + j];
                w0[1 * 6 + i * 3 + j] = vb[i * 3 + j];
                w1[i * 6 + 0 * 3 + j] = va[i * 3 + j];
                w1[i * 6 + 1 * 3 + j] = vb[i * 3 + j];
                w2[i * 6 + j * 2 + 0] = va[i * 3 + j];
                w2[i * 6 + j * 2 + 1] = vb[i * 3 + j];
            }
        conf_check(wf_stack(x, 2, 0), d, s0, 3, w0, 0);
        conf_check(wf_stack(x, 2, 1), d, s1, 3, w1, 0);
        conf_check(wf_stack(x, 2, -1), d, s2, 3, w2, 0);
        free(va);
        free(vb);
        wf_scope_end();
    }
    wf_scope_begin();
    double a = 1, b = 2.5;
    wf_array *z[2] = {conf_array(&a, NULL, 0, WF_DTYPE_I32), conf_array(&b, NULL, 0, WF_DTYPE_F32)};
    const int64_t two[1] = {2};
    double w[2] = {1, 2.5};
    conf_check(wf_stack(z, 2, 0), WF_DTYPE_F32, two, 1, w, 0);
    const int64_t s3[1] = {3};
    wf_array *v3 = wf_zeros(s3, 1, WF_DTYPE_F32);
    wf_array *bad[2] = {z[1], v3};
    conf_check_error(wf_stack(bad, 2, 0), WF_ERR_SHAPE, "wf_stack");
    conf_check_error(wf_stack(z, 2, 2), WF_ERR_AXIS, "wf_stack");
    conf_check_error(wf_stack(z, 0, 0), WF_ERR_INVALID_ARGUMENT, "wf_stack");
    conf_check_error(wf_stack(NULL, 1, 0), WF_ERR_NULL_ARGUMENT, "wf_stack");
    wf_array *withnull[2] = {v3, NULL};
    conf_check_error(wf_stack(withnull, 2, 0), WF_ERR_NULL_ARGUMENT, "wf_stack");
    wf_scope_end();
}

/* ---------------------------------------------------------------- split */

static void test_split(void)
{
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        const int64_t s[2] = {4, 6};
        double *v = conf_integer_values(24, d, 51 + k);
        wf_array *a = conf_strided(v, s, 2, d);
        wf_array *out[3];
        CHECK_OK(wf_split(a, 3, 1, out));
        for (int p = 0; p < 3; p++) {
            double w[8];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 2; j++)
                    w[i * 2 + j] = v[i * 6 + p * 2 + j];
            const int64_t ps[2] = {4, 2};
            CHECK(shares_buffer(out[p], a));
            conf_check(out[p], d, ps, 2, w, 0);
        }
        /* split_at with a negative and a repeated index: [0:1], [1:-1], [-1:3] (empty), [3:]. */
        wf_array *parts[4];
        const int64_t at[3] = {1, -1, 3};
        CHECK_OK(wf_split_at(a, at, 3, 0, parts));
        const int64_t lo[4] = {0, 1, 3, 3}, hi[4] = {1, 3, 3, 4};
        for (int p = 0; p < 4; p++) {
            const int64_t ps[2] = {hi[p] - lo[p], 6};
            conf_check(parts[p], d, ps, 2, v + lo[p] * 6, 0);
        }
        wf_array *whole[1];
        CHECK_OK(wf_split_at(a, NULL, 0, -1, whole));
        conf_check(whole[0], d, s, 2, v, 0);
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    const int64_t s[1] = {5};
    wf_array *a = wf_zeros(s, 1, WF_DTYPE_F32);
    wf_array *out[5] = {a, a, a, a, a};
    /* Invalid arguments leave `out` untouched (a wild count must not write
     * past the caller's array). */
    CHECK_STATUS(wf_split(a, 2, 0, out), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_split");
    CHECK(out[0] == a && out[1] == a);
    CHECK_STATUS(wf_split(a, 0, 0, out), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_split(a, 5, 1, out), WF_ERR_AXIS);
    CHECK_STATUS(wf_split(a, INT_MAX, 0, out), WF_ERR_SHAPE);
    CHECK(out[4] == a);
    wf_clear_error();
    CHECK_STATUS(wf_split(NULL, 1, 0, out), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_split(a, 1, 0, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_split_at(a, NULL, 1, 0, out), WF_ERR_NULL_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_split_at");
    CHECK(out[0] == a && out[1] == a);
    CHECK_STATUS(wf_split_at(a, NULL, INT_MAX, 0, out), WF_ERR_INVALID_ARGUMENT);
    const int64_t at[1] = {2};
    CHECK_STATUS(wf_split_at(a, at, 1, 2, out), WF_ERR_AXIS);
    CHECK_STATUS(wf_split_at(a, at, -1, 0, out), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    CHECK_STATUS(wf_split_at(NULL, at, 1, 0, out), WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    conf_check_error(NULL, WF_OK, NULL);
    wf_scope_end();
}

/* ---------------------------------------------------------------- pad */

static void test_pad(void)
{
    for (int k = 0; k < WF_DTYPE_COUNT; k++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[k];
        const int64_t s[2] = {3, 4};
        double *v = conf_integer_values(12, d, 61 + k);
        wf_array *a = conf_strided(v, s, 2, d);
        const int64_t low[2] = {1, 0}, high[2] = {2, 3}, so[2] = {6, 7};
        double want[42];
        const double fill = conf_round_to(-3.5, d);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 7; j++) {
                int si = i - 1, sj = j;
                want[i * 7 + j] = si >= 0 && si < 3 && sj < 4 ? v[si * 4 + sj] : fill;
            }
        conf_check(wf_pad(a, low, high, -3.5), d, so, 2, want, 0);
        const int64_t zero[2] = {0, 0};
        conf_check(wf_pad(a, zero, zero, 1), d, s, 2, v, 0);
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    double x = 4;
    wf_array *z = conf_array(&x, NULL, 0, WF_DTYPE_F32);
    conf_check(wf_pad(z, NULL, NULL, 0), WF_DTYPE_F32, NULL, 0, &x, 0);
    const int64_t e[2] = {0, 2}, lo[2] = {1, 1}, hi[2] = {0, 1}, so[2] = {1, 4};
    wf_array *em = wf_zeros(e, 2, WF_DTYPE_I32);
    double w[4] = {7, 7, 7, 7};
    conf_check(wf_pad(em, lo, hi, 7), WF_DTYPE_I32, so, 2, w, 0);
    const int64_t s1[1] = {2}, neg[1] = {-1}, ok[1] = {0}, huge[1] = {INT64_MAX};
    wf_array *a = wf_ones(s1, 1, WF_DTYPE_U8);
    const int64_t u1[1] = {1}, so1[1] = {4};
    double wu[4] = {255, 1, 1, 0}; /* 300 saturates to 255 in u8... only low[0] = 1 */
    wu[3] = 255;
    conf_check(wf_pad(a, u1, u1, 300), WF_DTYPE_U8, so1, 1, wu, 0);
    conf_check_error(wf_pad(a, neg, ok, 0), WF_ERR_INVALID_ARGUMENT, "wf_pad");
    conf_check_error(wf_pad(a, ok, neg, 0), WF_ERR_INVALID_ARGUMENT, "wf_pad");
    conf_check_error(wf_pad(a, ok, huge, 0), WF_ERR_OVERFLOW, "wf_pad");
    conf_check_error(wf_pad(a, NULL, ok, 0), WF_ERR_NULL_ARGUMENT, "wf_pad");
    conf_check_error(wf_pad(NULL, ok, ok, 0), WF_ERR_NULL_ARGUMENT, "wf_pad");
    wf_scope_end();
}

/* ---------------------------------------------------------------- tril, triu */

static void test_tril_triu(void)
{
    const int64_t s[3] = {2, 4, 5};
    const int64_t ks[9] = {-5, -4, -1, 0, 1, 3, 5, INT64_MAX, INT64_MIN};
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[t];
        double *v = conf_integer_values(40, d, 71 + t);
        wf_array *a = conf_strided(v, s, 3, d);
        for (int q = 0; q < 9; q++) {
            const int64_t k = ks[q];
            double lo[40], up[40];
            for (int64_t b = 0; b < 2; b++)
                for (int64_t i = 0; i < 4; i++)
                    for (int64_t j = 0; j < 5; j++) {
                        const int64_t f = (b * 4 + i) * 5 + j;
                        /* j - i <= k without overflow: j - i is small. */
                        const bool keep_lo = (j - i) <= k, keep_up = (j - i) >= k;
                        lo[f] = keep_lo ? v[f] : 0;
                        up[f] = keep_up ? v[f] : 0;
                    }
            conf_check(wf_tril(a, k), d, s, 3, lo, 0);
            conf_check(wf_triu(a, k), d, s, 3, up, 0);
        }
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    const int64_t e[3] = {0, 3, 3}, e2[2] = {3, 0};
    conf_check(wf_tril(wf_ones(e, 3, WF_DTYPE_F32), 0), WF_DTYPE_F32, e, 3, NULL, 0);
    conf_check(wf_triu(wf_ones(e2, 2, WF_DTYPE_F32), 0), WF_DTYPE_F32, e2, 2, NULL, 0);
    /* A broadcast (stride-0) input. */
    const int64_t r[1] = {3}, sq[2] = {3, 3};
    double rv[3] = {1, 2, 3}, w[9] = {1, 0, 0, 1, 2, 0, 1, 2, 3};
    wf_array *row = conf_array(rv, r, 1, WF_DTYPE_F64);
    conf_check(wf_tril(wf_broadcast_to(row, sq, 2), 0), WF_DTYPE_F64, sq, 2, w, 0);
    const int64_t s1[1] = {3};
    conf_check_error(wf_tril(wf_ones(s1, 1, WF_DTYPE_F32), 0), WF_ERR_SHAPE, "wf_tril");
    conf_check_error(wf_triu(wf_ones(NULL, 0, WF_DTYPE_F32), 0), WF_ERR_SHAPE, "wf_triu");
    conf_check_error(wf_tril(NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_tril");
    conf_check_error(wf_triu(NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_triu");
    wf_scope_end();
}

/* ---------------------------------------------------------------- repeat, tile */

static void test_repeat(void)
{
    const int64_t s[3] = {2, 3, 2};
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[t];
        double *v = conf_integer_values(12, d, 81 + t);
        wf_array *a = conf_strided(v, s, 3, d);
        for (int axis = -3; axis < 3; axis++) {
            const int ax = axis < 0 ? axis + 3 : axis;
            for (int64_t r = 0; r <= 3; r += 3) {
                int64_t so[3] = {2, 3, 2};
                so[ax] *= r;
                double want[36];
                int64_t idx[3];
                for (int64_t i = 0; i < conf_size(so, 3); i++) {
                    conf_unravel(i, so, 3, idx);
                    idx[ax] /= r;
                    want[i] = v[conf_ravel(idx, s, 3)];
                }
                conf_check(wf_repeat(a, r, axis), d, so, 3, want, 0);
            }
        }
        conf_check(wf_repeat(a, 1, 0), d, s, 3, v, 0);
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    const int64_t s1[1] = {2};
    wf_array *a = wf_ones(s1, 1, WF_DTYPE_F32);
    conf_check_error(wf_repeat(a, -1, 0), WF_ERR_INVALID_ARGUMENT, "wf_repeat");
    conf_check_error(wf_repeat(a, 2, 1), WF_ERR_AXIS, "wf_repeat");
    conf_check_error(wf_repeat(a, INT64_MAX, 0), WF_ERR_OVERFLOW, "wf_repeat");
    conf_check_error(wf_repeat(wf_ones(NULL, 0, WF_DTYPE_F32), 2, 0), WF_ERR_AXIS, "wf_repeat");
    conf_check_error(wf_repeat(NULL, 2, 0), WF_ERR_NULL_ARGUMENT, "wf_repeat");
    /* A huge repeat is lazy: no index table is built (it was: 1 GiB here,
     * past the memory limit, and a loop over 2^28 rows before returning). */
    wf_memory_stats before = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&before));
    CHECK_OK(wf_set_memory_limit((size_t)64 << 20));
    wf_array *huge = wf_repeat(a, (int64_t)1 << 27, 0);
    if (CHECK_NOT_NULL(huge))
        CHECK_EQ_INT(wf_array_dim(huge, 0), (int64_t)1 << 28);
    CHECK_OK(wf_set_memory_limit(before.limit_bytes));
    /* Rank WF_MAX_NDIM takes the merged path. */
    int64_t big[WF_MAX_NDIM];
    for (int i = 0; i < WF_MAX_NDIM; i++)
        big[i] = i == 3 || i == 30 ? 2 : 1;
    double bv[4] = {1, 2, 3, 4};
    wf_array *b = conf_array(bv, big, WF_MAX_NDIM, WF_DTYPE_F32);
    int64_t bs[WF_MAX_NDIM];
    memcpy(bs, big, sizeof bs);
    bs[30] = 4;
    double bw[8] = {1, 1, 2, 2, 3, 3, 4, 4};
    conf_check(wf_repeat(b, 2, 30), WF_DTYPE_F32, bs, WF_MAX_NDIM, bw, 0);
    /* Tiling at rank WF_MAX_NDIM (axes merged around the tiled one). */
    int64_t reps[WF_MAX_NDIM];
    for (int i = 0; i < WF_MAX_NDIM; i++)
        reps[i] = i == 30 ? 2 : 1;
    double tw[8] = {1, 2, 1, 2, 3, 4, 3, 4};
    conf_check(wf_tile(b, reps, WF_MAX_NDIM), WF_DTYPE_F32, bs, WF_MAX_NDIM, tw, 0);
    /* Inner blocks of 16 or more take the broadcast path; strided input. */
    const int64_t ls[3] = {3, 4, 16}, lo[3] = {3, 12, 16};
    double *lv = conf_integer_values(192, WF_DTYPE_I32, 8), lw[576];
    wf_array *l = conf_strided(lv, ls, 3, WF_DTYPE_I32);
    for (int64_t i = 0; i < 576; i++) {
        int64_t idx[3];
        conf_unravel(i, lo, 3, idx);
        idx[1] /= 3;
        lw[i] = lv[conf_ravel(idx, ls, 3)];
    }
    conf_check(wf_repeat(l, 3, 1), WF_DTYPE_I32, lo, 3, lw, 0);
    free(lv);
    wf_scope_end();
}

/* NumPy tile reference. */
static void ref_tile(const double *v, const int64_t *shape, int ndim, const int64_t *reps,
                     int nreps, double *want, int64_t *oshape, int *ondim)
{
    const int n = ndim > nreps ? ndim : nreps;
    int64_t s[WF_MAX_NDIM], idx[WF_MAX_NDIM];
    for (int d = 0; d < n; d++) {
        int da = d - (n - ndim), dr = d - (n - nreps);
        s[d] = da >= 0 ? shape[da] : 1;
        oshape[d] = s[d] * (dr >= 0 ? reps[dr] : 1);
    }
    *ondim = n;
    for (int64_t i = 0; i < conf_size(oshape, n); i++) {
        conf_unravel(i, oshape, n, idx);
        for (int d = 0; d < n; d++)
            idx[d] %= s[d];
        want[i] = v[conf_ravel(idx, s, n)];
    }
}

static void test_tile(void)
{
    const int64_t s[2] = {2, 3};
    const int64_t r1[2] = {2, 3}, r2[1] = {2}, r3[3] = {2, 1, 2}, r4[2] = {0, 2}, r5[2] = {1, 1};
    const int64_t *reps[5] = {r1, r2, r3, r4, r5};
    const int nr[5] = {2, 1, 3, 2, 2};
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[t];
        double *v = conf_integer_values(6, d, 91 + t);
        wf_array *a = conf_strided(v, s, 2, d);
        for (int q = 0; q < 5; q++) {
            double want[128];
            int64_t os[WF_MAX_NDIM];
            int on;
            ref_tile(v, s, 2, reps[q], nr[q], want, os, &on);
            conf_check(wf_tile(a, reps[q], nr[q]), d, os, on, want, 0);
        }
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    double x = 5;
    wf_array *z = conf_array(&x, NULL, 0, WF_DTYPE_I64);
    const int64_t r[2] = {2, 2}, zs[2] = {2, 2};
    double w[4] = {5, 5, 5, 5};
    conf_check(wf_tile(z, r, 2), WF_DTYPE_I64, zs, 2, w, 0);
    conf_check(wf_tile(z, NULL, 0), WF_DTYPE_I64, NULL, 0, &x, 0);
    /* Many axes with reps > 1: tiled in more than one stage. */
    int64_t sh[20], rp[20];
    for (int i = 0; i < 20; i++) {
        sh[i] = 1;
        rp[i] = i < 13 ? 2 : i == 19 ? 3 : 1; /* 14 axes: 20 + 14 > WF_MAX_NDIM */
    }
    sh[19] = 2;
    double v2[2] = {1, 2};
    wf_array *b = conf_array(v2, sh, 20, WF_DTYPE_F32);
    double *want = malloc(sizeof(double) * (1 << 17));
    int64_t os[WF_MAX_NDIM];
    int on;
    ref_tile(v2, sh, 20, rp, 20, want, os, &on);
    conf_check(wf_tile(b, rp, 20), WF_DTYPE_F32, os, on, want, 0);
    free(want);
    const int64_t neg[1] = {-1}, huge[2] = {INT64_MAX, 2};
    conf_check_error(wf_tile(z, neg, 1), WF_ERR_INVALID_ARGUMENT, "wf_tile");
    conf_check_error(wf_tile(b, huge, 2), WF_ERR_OVERFLOW, "wf_tile");
    conf_check_error(wf_tile(z, NULL, 1), WF_ERR_NULL_ARGUMENT, "wf_tile");
    conf_check_error(wf_tile(z, r, WF_MAX_NDIM + 1), WF_ERR_INVALID_ARGUMENT, "wf_tile");
    conf_check_error(wf_tile(NULL, r, 1), WF_ERR_NULL_ARGUMENT, "wf_tile");
    wf_scope_end();
}

/* ---------------------------------------------------------------- creation */

static void test_like(void)
{
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[t];
        const int64_t s[2] = {2, 3};
        wf_array *lazy = wf_add(wf_ones(s, 2, d), wf_ones(s, 2, d));
        double w[6];
        for (int i = 0; i < 6; i++)
            w[i] = conf_round_to(2.5, d);
        conf_check(wf_full_like(lazy, 2.5), d, s, 2, w, 0);
        for (int i = 0; i < 6; i++)
            w[i] = 0;
        conf_check(wf_zeros_like(lazy), d, s, 2, w, 0);
        for (int i = 0; i < 6; i++)
            w[i] = 1;
        conf_check(wf_ones_like(lazy), d, s, 2, w, 0);
        CHECK(!wf_array_is_evaluated(lazy)); /* never evaluated */
        wf_scope_end();
    }
    wf_scope_begin();
    double x = 0;
    wf_array *z = conf_array(&x, NULL, 0, WF_DTYPE_I32);
    x = -1;
    conf_check(wf_full_like(z, -1), WF_DTYPE_I32, NULL, 0, &x, 0);
    conf_check_error(wf_full_like(NULL, 1), WF_ERR_NULL_ARGUMENT, "wf_full_like");
    conf_check_error(wf_zeros_like(NULL), WF_ERR_NULL_ARGUMENT, "wf_zeros_like");
    conf_check_error(wf_ones_like(NULL), WF_ERR_NULL_ARGUMENT, "wf_ones_like");
    wf_scope_end();
}

static void test_linspace(void)
{
    const int64_t nums[5] = {0, 1, 2, 7, 1000};
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[t];
        for (int q = 0; q < 5; q++) {
            const int64_t n = nums[q];
            double *w = malloc(sizeof(double) * (size_t)(n + 1));
            const double start = 10, stop = -5;
            for (int64_t i = 0; i < n; i++)
                w[i] = conf_round_to(n == 1 ? start : start + (stop - start) * (double)i / (double)(n - 1), d);
            if (n > 1)
                w[n - 1] = conf_round_to(stop, d);
            conf_check(wf_linspace(start, stop, n, d), d, &n, 1, w, conf_tolerance(d) + 1e-15);
            free(w);
        }
        wf_scope_end();
    }
    wf_scope_begin();
    const int64_t three[1] = {3};
    double w[3] = {0.1, 0.2, 0.3};
    conf_check(wf_linspace(0.1, 0.3, 3, WF_DTYPE_F64), WF_DTYPE_F64, three, 1, w, 0);
    double c[3] = {2, 2, 2};
    conf_check(wf_linspace(2, 2, 3, WF_DTYPE_F32), WF_DTYPE_F32, three, 1, c, 0);
    conf_check_error(wf_linspace(0, 1, -1, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_linspace");
    conf_check_error(wf_linspace(0, INFINITY, 3, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT,
                     "wf_linspace");
    conf_check_error(wf_linspace(NAN, 1, 3, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT,
                     "wf_linspace");
    conf_check_error(wf_linspace(0, 1, 3, WF_DTYPE_COUNT), WF_ERR_DTYPE, "wf_linspace");
    conf_check_error(wf_linspace(0, 1, INT64_MAX, WF_DTYPE_F32), WF_ERR_OVERFLOW, "wf_linspace");
    wf_scope_end();
}

static void test_eye(void)
{
    const int64_t dims[4][2] = {{3, 3}, {3, 5}, {4, 2}, {0, 3}};
    const int64_t ks[8] = {0, 1, -1, 2, -3, 7, INT64_MAX, INT64_MIN};
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        wf_dtype d = all_dtypes[t];
        for (int q = 0; q < 4; q++)
            for (int kk = 0; kk < 8; kk++) {
                const int64_t n = dims[q][0], m = dims[q][1], k = ks[kk];
                double w[32];
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < m; j++)
                        w[i * m + j] = (j - i) == k ? 1 : 0;
                conf_check(wf_eye(n, m, k, d), d, dims[q], 2, w, 0);
            }
        wf_scope_end();
    }
    wf_scope_begin();
    conf_check_error(wf_eye(-1, 2, 0, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_eye");
    conf_check_error(wf_eye(2, -2, 0, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT, "wf_eye");
    conf_check_error(wf_eye(2, 2, 0, (wf_dtype)99), WF_ERR_DTYPE, "wf_eye");
    conf_check_error(wf_eye(INT64_MAX / 2, INT64_MAX / 2, 0, WF_DTYPE_F32), WF_ERR_OVERFLOW,
                     "wf_eye");
    wf_scope_end();
}

/* ---------------------------------------------------------------- larger arrays (parallel paths) */

static void test_large(void)
{
    wf_scope_begin();
    const int64_t s[2] = {300, 700};
    const int64_t n = 300 * 700;
    double *v = conf_integer_values(n, WF_DTYPE_F32, 7);
    wf_array *a = conf_strided(v, s, 2, WF_DTYPE_F32);
    double *want = malloc(sizeof(double) * (size_t)n * 2);
    for (int64_t i = 0; i < 300; i++)
        for (int64_t j = 0; j < 700; j++)
            want[i * 700 + j] = j <= i + 3 ? v[i * 700 + j] : 0;
    conf_check(wf_tril(a, 3), WF_DTYPE_F32, s, 2, want, 0);
    wf_array *two[2] = {a, a};
    const int64_t s2[2] = {300, 1400};
    for (int64_t i = 0; i < 300; i++)
        for (int64_t j = 0; j < 1400; j++)
            want[i * 1400 + j] = v[i * 700 + j % 700];
    conf_check(wf_concatenate(two, 2, 1), WF_DTYPE_F32, s2, 2, want, 0);
    free(v);
    free(want);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_swapaxes_moveaxis);
    RUN_TEST(test_expand_squeeze_flatten);
    RUN_TEST(test_slice_update);
    RUN_TEST(test_concatenate);
    RUN_TEST(test_stack);
    RUN_TEST(test_split);
    RUN_TEST(test_pad);
    RUN_TEST(test_tril_triu);
    RUN_TEST(test_repeat);
    RUN_TEST(test_tile);
    RUN_TEST(test_like);
    RUN_TEST(test_linspace);
    RUN_TEST(test_eye);
    RUN_TEST(test_large);
    CHECK_EQ_INT(live_arrays(), 0);
    return TEST_SUMMARY();
}
