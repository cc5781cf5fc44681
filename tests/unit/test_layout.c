/*
 * The layout of element-wise results (backend/cpu/layout.c): an op over
 * transposed or permuted views gives a result laid out like them (its
 * strides in the same order, dense), a mix of layouts gives a row-major
 * one, broadcast operands follow either; the values are right whatever the
 * layout, through wf_array_data, copies, reshapes, products and reductions
 * of such a result. And the transposed copies that make such data
 * row-major, on every ISA variant, small and past the caches (streamed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "core/array.h"
#include "harness.h"

enum { ROWS = 37, COLS = 53 };

static wf_array *filled(const int64_t *shape, int ndim, float scale)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * (float)((i * 7919) % 1009) / 1009.0f - 0.5f;
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
    free(v);
    return a;
}

static const float *values(wf_array *a)
{
    const void *p = NULL;
    if (!CHECK_OK(wf_array_data(a, &p)))
        return NULL;
    return p;
}

static wf_array *transposed(wf_array *a)
{
    wf_array *t = wf_transpose(a, NULL, 0);
    CHECK_OK(wf_eval(&t, 1));
    return t;
}

/* Whether `a` (evaluated) has exactly the strides of `like`, a dense view. */
static bool same_strides(const wf_array *a, const wf_array *like)
{
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != 1 && a->strides[d] != like->strides[d])
            return false;
    return true;
}

/* Checks r[i][j] (COLS x ROWS, computed from x.T) against f(x[j][i]). */
static void check_transposed_values(wf_array *r, const float *x, double (*f)(double), double tol)
{
    const float *v = values(r);
    int bad = 0;
    for (int i = 0; v && x && i < COLS && bad < 5; i++)
        for (int j = 0; j < ROWS && bad < 5; j++) {
            const double want = f((double)x[j * COLS + i]);
            if (!CHECK_NEAR(v[i * ROWS + j], want, tol * (1.0 + fabs(want))))
                bad++;
        }
}

static double plus_zero(double v) { return v; }
static double exp_of(double v) { return exp(v); }
static double negated(double v) { return -v; }
static double silu_of(double v) { return v / (1.0 + exp(-v)); }
static double clipped(double v) { return v < -0.25 ? -0.25 : v > 0.25 ? 0.25 : v; }

static void test_results_keep_a_transposed_layout(void)
{
    const int64_t shape[2] = {ROWS, COLS};
    wf_array *x = filled(shape, 2, 2.0f), *xt = transposed(x);
    wf_array *zero = wf_scalar(0, WF_DTYPE_F32), *lo = wf_scalar(-0.25, WF_DTYPE_F32),
             *hi = wf_scalar(0.25, WF_DTYPE_F32);
    wf_array *cond = wf_greater(xt, zero);
    wf_array *results[] = {wf_add(xt, zero), wf_exp(xt), wf_negative(xt), wf_silu(xt),
                           wf_clip(xt, lo, hi), wf_where(cond, xt, xt),
                           wf_astype(xt, WF_DTYPE_F64)};
    double (*refs[])(double) = {plus_zero, exp_of, negated, silu_of, clipped, plus_zero, NULL};
    const int count = (int)(sizeof results / sizeof results[0]);
    CHECK_OK(wf_eval(results, count));
    const float *xv = values(x);
    for (int k = 0; k < count; k++) {
        wf_array *r = results[k];
        CHECK(!r->row_contiguous);
        CHECK(same_strides(r, xt));
        if (refs[k])
            check_transposed_values(r, xv, refs[k], 2e-6);
    }
    /* float64 from astype: compare as doubles. */
    const void *p = NULL;
    if (CHECK_OK(wf_array_data(results[count - 1], &p)) && xv)
        for (int i = 0; i < COLS; i++)
            for (int j = 0; j < ROWS; j++)
                if (((const double *)p)[i * ROWS + j] != (double)xv[j * COLS + i]) {
                    CHECK(false);
                    i = COLS;
                    break;
                }
    for (int k = 0; k < count; k++)
        wf_release(results[k]);
    wf_release(cond);
    wf_release(zero);
    wf_release(lo);
    wf_release(hi);
    wf_release(xt);
    wf_release(x);
}

static void test_mixed_layouts_give_row_major(void)
{
    const int64_t shape[2] = {ROWS, COLS}, tshape[2] = {COLS, ROWS};
    wf_array *x = filled(shape, 2, 1.0f), *xt = transposed(x);
    wf_array *y = filled(tshape, 2, 3.0f);
    wf_array *r[2] = {wf_add(xt, y), wf_add(y, xt)};
    CHECK_OK(wf_eval(r, 2));
    const float *xv = values(x), *yv = values(y), *v0 = values(r[0]), *v1 = values(r[1]);
    CHECK(r[0]->row_contiguous);
    CHECK(r[1]->row_contiguous);
    int bad = 0;
    for (int i = 0; xv && yv && v0 && v1 && i < COLS && bad < 5; i++)
        for (int j = 0; j < ROWS && bad < 5; j++) {
            const float want = xv[j * COLS + i] + yv[i * ROWS + j];
            bad += !CHECK_NEAR(v0[i * ROWS + j], want, 0);
            bad += !CHECK_NEAR(v1[i * ROWS + j], want, 0);
        }
    wf_release(r[0]);
    wf_release(r[1]);
    wf_release(y);
    wf_release(xt);
    wf_release(x);
}

/* A row or a column broadcast over x.T fits its layout: the result keeps it. */
static void test_broadcast_operands_follow_the_layout(void)
{
    const int64_t shape[2] = {ROWS, COLS}, row_shape[2] = {1, ROWS}, col_shape[2] = {COLS, 1};
    wf_array *x = filled(shape, 2, 1.0f), *xt = transposed(x);
    wf_array *row = filled(row_shape, 2, 5.0f), *col = filled(col_shape, 2, 7.0f);
    wf_array *r[3] = {wf_add(xt, row), wf_multiply(col, xt), wf_subtract(row, col)};
    CHECK_OK(wf_eval(r, 3));
    CHECK(same_strides(r[0], xt));
    CHECK(same_strides(r[1], xt));
    CHECK(r[2]->row_contiguous); /* no operand without broadcast dims: row-major */
    const float *xv = values(x), *rv = values(row), *cv = values(col);
    const float *v0 = values(r[0]), *v1 = values(r[1]), *v2 = values(r[2]);
    int bad = 0;
    for (int i = 0; xv && rv && cv && v0 && v1 && v2 && i < COLS && bad < 5; i++)
        for (int j = 0; j < ROWS && bad < 5; j++) {
            const float e = xv[j * COLS + i];
            bad += !CHECK_NEAR(v0[i * ROWS + j], e + rv[j], 0);
            bad += !CHECK_NEAR(v1[i * ROWS + j], cv[i] * e, 0);
            bad += !CHECK_NEAR(v2[i * ROWS + j], rv[j] - cv[i], 0);
        }
    for (int k = 0; k < 3; k++)
        wf_release(r[k]);
    wf_release(row);
    wf_release(col);
    wf_release(xt);
    wf_release(x);
}

/* Every permutation of a 3-d array: the result has the view's strides. */
static void test_every_3d_permutation(void)
{
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    const int64_t shape[3] = {4, 5, 6};
    wf_array *x = filled(shape, 3, 1.0f);
    const float *xv = values(x);
    wf_array *two = wf_scalar(2, WF_DTYPE_F32);
    for (int p = 0; p < 6; p++) {
        wf_array *view = wf_transpose(x, perms[p], 3);
        wf_array *r = wf_multiply(view, two);
        CHECK_OK(wf_eval(&r, 1));
        CHECK(same_strides(r, view));
        CHECK_EQ_INT(r->row_contiguous, p == 0);
        const float *v = values(r);
        int64_t pshape[3], index[3];
        for (int d = 0; d < 3; d++)
            pshape[d] = shape[perms[p][d]];
        int bad = 0;
        for (int64_t f = 0; v && xv && f < 120 && bad < 5; f++) {
            index[0] = f / (pshape[1] * pshape[2]);
            index[1] = f / pshape[2] % pshape[1];
            index[2] = f % pshape[2];
            int64_t src[3];
            for (int d = 0; d < 3; d++)
                src[perms[p][d]] = index[d];
            bad += !CHECK_NEAR(v[f], 2.0f * xv[(src[0] * 5 + src[1]) * 6 + src[2]], 0);
        }
        wf_release(r);
        wf_release(view);
    }
    wf_release(two);
    wf_release(x);
}

/* A strided slice of x.T: the result is dense, its dims in the view's
 * order; a reversed view (negative stride) gives a row-major result. */
static void test_sliced_and_reversed_views(void)
{
    const int64_t shape[2] = {ROWS, COLS};
    wf_array *x = filled(shape, 2, 1.0f), *xt = transposed(x);
    const int64_t starts[2] = {1, 0}, stops[2] = {COLS, ROWS}, steps[2] = {2, 3};
    wf_array *s = wf_slice(xt, starts, stops, steps);
    const int64_t rstarts[2] = {COLS - 1, 0}, rstops[2] = {-COLS - 1, ROWS}, rsteps[2] = {-1, 1};
    wf_array *rev = wf_slice(xt, rstarts, rstops, rsteps);
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *r[2] = {wf_add(s, one), wf_add(rev, one)};
    CHECK_OK(wf_eval(r, 2));
    CHECK(!r[0]->row_contiguous);
    CHECK(r[0]->strides[0] == 1 && r[0]->strides[1] == r[0]->shape[0]);
    CHECK(r[1]->row_contiguous);
    const float *xv = values(x), *v0 = values(r[0]), *v1 = values(r[1]);
    const int64_t srows = r[0]->shape[0], scols = r[0]->shape[1];
    int bad = 0;
    for (int64_t i = 0; xv && v0 && i < srows && bad < 5; i++)
        for (int64_t j = 0; j < scols && bad < 5; j++)
            bad += !CHECK_NEAR(v0[i * scols + j], xv[(3 * j) * COLS + 1 + 2 * i] + 1.0f, 0);
    for (int64_t i = 0; xv && v1 && i < COLS && bad < 5; i++)
        for (int64_t j = 0; j < ROWS && bad < 5; j++)
            bad += !CHECK_NEAR(v1[i * ROWS + j], xv[j * COLS + (COLS - 1 - i)] + 1.0f, 0);
    wf_release(r[0]);
    wf_release(r[1]);
    wf_release(one);
    wf_release(rev);
    wf_release(s);
    wf_release(xt);
    wf_release(x);
}

/* What reads a transposed result sees its values: a copy out, a reshape
 * (which must copy), a product, sums over each axis, a softmax. */
static void test_consumers_of_a_transposed_result(void)
{
    const int64_t shape[2] = {ROWS, COLS}, wshape[2] = {ROWS, 3};
    wf_array *x = filled(shape, 2, 1.0f), *xt = transposed(x);
    wf_array *w = filled(wshape, 2, 1.0f);
    wf_array *zero = wf_scalar(0, WF_DTYPE_F32);
    wf_array *r = wf_add(xt, zero);
    CHECK_OK(wf_eval(&r, 1));
    CHECK(!r->row_contiguous);
    const int64_t flat_shape[1] = {ROWS * COLS};
    const int axis0 = 0, axis1 = 1;
    wf_array *out[5] = {wf_reshape(r, flat_shape, 1), wf_matmul(r, w),
                        wf_sum(r, &axis0, 1, false), wf_sum(r, &axis1, 1, false),
                        wf_softmax(r, &axis1, 1)};
    CHECK_OK(wf_eval(out, 5));
    float *copied = malloc(sizeof(float) * ROWS * COLS);
    CHECK_OK(wf_array_copy_to(r, copied, sizeof(float) * ROWS * COLS));
    const float *xv = values(x), *wv = values(w), *flat = values(out[0]), *prod = values(out[1]);
    const float *s0 = values(out[2]), *s1 = values(out[3]), *sm = values(out[4]);
    int bad = 0;
    for (int i = 0; xv && wv && flat && prod && s0 && s1 && sm && i < COLS && bad < 5; i++) {
        double row_sum = 0, exp_sum = 0, row_max = -INFINITY;
        for (int j = 0; j < ROWS; j++) {
            const float e = xv[j * COLS + i];
            bad += !CHECK_NEAR(flat[i * ROWS + j], e, 0);
            bad += !CHECK_NEAR(copied[i * ROWS + j], e, 0);
            row_sum += e;
            row_max = e > row_max ? e : row_max;
        }
        for (int j = 0; j < ROWS; j++)
            exp_sum += exp(xv[j * COLS + i] - row_max);
        bad += !CHECK_NEAR(s1[i], row_sum, 1e-5);
        for (int j = 0; j < ROWS; j++)
            bad += !CHECK_NEAR(sm[i * ROWS + j], exp(xv[j * COLS + i] - row_max) / exp_sum, 1e-6);
        for (int c = 0; c < 3; c++) {
            double dot = 0;
            for (int j = 0; j < ROWS; j++)
                dot += (double)xv[j * COLS + i] * wv[j * 3 + c];
            bad += !CHECK_NEAR(prod[i * 3 + c], dot, 1e-5);
        }
    }
    for (int j = 0; xv && s0 && j < ROWS && bad < 5; j++) {
        double col_sum = 0;
        for (int i = 0; i < COLS; i++)
            col_sum += xv[j * COLS + i];
        bad += !CHECK_NEAR(s0[j], col_sum, 1e-5);
    }
    free(copied);
    for (int k = 0; k < 5; k++)
        wf_release(out[k]);
    wf_release(r);
    wf_release(zero);
    wf_release(w);
    wf_release(xt);
    wf_release(x);
}

/* softmax over one axis of a transposed array keeps its layout and gives
 * each row the bits of the same row laid out contiguously (float32 through
 * the column form, float64 and float16 gathered); over two axes the result
 * is row-major. */
static void test_softmax_keeps_a_transposed_layout(void)
{
    static const wf_dtype dtypes[3] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16};
    const int64_t shape[2] = {300, 200};
    const int axis1 = 1, both[2] = {0, 1};
    for (int t = 0; t < 3; t++) {
        wf_array *x32 = filled(shape, 2, 8.0f);
        wf_array *x = wf_astype(x32, dtypes[t]), *xt = transposed(x);
        const void *dense = NULL;
        CHECK_OK(wf_array_data(xt, &dense));
        const int64_t tshape[2] = {shape[1], shape[0]};
        wf_array *xc = wf_array_from_data(dense, tshape, 2, dtypes[t]);
        wf_array *r[3] = {wf_softmax(xt, &axis1, 1), wf_softmax(xc, &axis1, 1),
                          wf_softmax(xt, both, 2)};
        CHECK_OK(wf_eval(r, 3));
        CHECK(!r[0]->row_contiguous && same_strides(r[0], xt));
        CHECK(r[2]->row_contiguous);
        const void *a = NULL, *b = NULL;
        CHECK_OK(wf_array_data(r[0], &a));
        CHECK_OK(wf_array_data(r[1], &b));
        CHECK(a && b && memcmp(a, b, (size_t)wf_array_nbytes(r[0])) == 0);
        for (int k = 0; k < 3; k++)
            wf_release(r[k]);
        wf_release(xc);
        wf_release(xt);
        wf_release(x);
        wf_release(x32);
    }
}

/* A rows x cols array of `item`-byte elements (bytes of a counter: every
 * element differs from its neighbours), of a dtype of that size. */
static wf_array *pattern(int ndim, const int64_t *shape, size_t item, unsigned char **bytes)
{
    static const wf_dtype by_size[9] = {[1] = WF_DTYPE_U8, [2] = WF_DTYPE_F16,
                                        [4] = WF_DTYPE_I32, [8] = WF_DTYPE_I64};
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    unsigned char *b = malloc((size_t)n * item);
    for (int64_t i = 0; i < n * (int64_t)item; i++)
        b[i] = (unsigned char)(i * 131 + (i >> 8) * 7 + (i >> 16));
    if (item == 2) /* no NaN payloads to canonicalise: clear each half's top exponent bit */
        for (int64_t i = 1; i < n * 2; i += 2)
            b[i] &= 0xbf;
    *bytes = b;
    return wf_array_from_data(b, shape, ndim, by_size[item]);
}

/* view = x.transpose(perm) copied out row-major through wf_array_data
 * and wf_array_copy_to into a 64-byte aligned buffer and at two offsets
 * from one (16 bytes, as malloc gives, and one element): the streamed copy
 * then writes each row's elements before its first line boundary apart.
 * Against an element-by-element gather. */
static void check_copy_out(int ndim, const int64_t *shape, const int *perm, size_t item)
{
    unsigned char *src = NULL;
    wf_array *x = pattern(ndim, shape, item, &src);
    wf_array *view = wf_transpose(x, perm, ndim);
    const int64_t n = wf_array_size(x), bytes = n * (int64_t)item;
    unsigned char *want = malloc((size_t)bytes);
    int64_t vshape[3], sstride[3], index[3] = {0, 0, 0};
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        sstride[d] = stride;
        stride *= shape[d];
    }
    for (int d = 0; d < ndim; d++)
        vshape[d] = shape[perm[d]];
    for (int64_t f = 0; f < n; f++) {
        int64_t off = 0;
        for (int d = 0; d < ndim; d++)
            off += index[d] * sstride[perm[d]];
        memcpy(want + f * (int64_t)item, src + off * (int64_t)item, item);
        for (int d = ndim - 1; d >= 0 && ++index[d] == vshape[d]; d--)
            index[d] = 0;
    }
    unsigned char *aligned = aligned_alloc(64, (size_t)(bytes + 64 + 63) / 64 * 64);
    const void *data = NULL;
    CHECK_OK(wf_array_data(view, &data));
    CHECK(data && memcmp(data, want, (size_t)bytes) == 0);
    CHECK_OK(wf_array_copy_to(view, aligned, (size_t)bytes));
    CHECK(memcmp(aligned, want, (size_t)bytes) == 0);
    const size_t offsets[2] = {16, item}; /* malloc's alignment, one element */
    for (int i = 0; i < 2; i++) {
        memset(aligned, 0, (size_t)bytes + offsets[i]);
        CHECK_OK(wf_array_copy_to(view, aligned + offsets[i], (size_t)bytes));
        CHECK(memcmp(aligned + offsets[i], want, (size_t)bytes) == 0);
    }
    free(aligned);
    free(want);
    free(src);
    wf_release(view);
    wf_release(x);
}

static void test_transposed_copies(void)
{
    static const int swap[2] = {1, 0}, p021[3] = {0, 2, 1};
    const int64_t small[2] = {37, 53}, lines[2] = {2064, 2064}, ragged[2] = {2051, 2063};
    const int64_t lines8[2] = {1472, 1472}, wide3[3] = {3, 1504, 1000};
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        if (!wf_test_runs_isa(isa, wf__vm_isa_best()) || wf__vm_isa_force(isa) != WF_OK)
            continue;
        for (size_t item = 1; item <= 8; item *= 2)
            check_copy_out(2, small, swap, item);
        check_copy_out(2, lines, swap, 4);  /* 17 MB out: streamed, whole lines */
        check_copy_out(2, ragged, swap, 4); /* rows off the lines: the buffered walk */
        check_copy_out(2, lines8, swap, 8);
        check_copy_out(3, wide3, p021, 4);
        check_copy_out(2, lines, swap, 2);
    }
    CHECK_OK(wf__vm_isa_force(-1));
}

int main(void)
{
    RUN_TEST(test_results_keep_a_transposed_layout);
    RUN_TEST(test_mixed_layouts_give_row_major);
    RUN_TEST(test_broadcast_operands_follow_the_layout);
    RUN_TEST(test_every_3d_permutation);
    RUN_TEST(test_sliced_and_reversed_views);
    RUN_TEST(test_consumers_of_a_transposed_result);
    RUN_TEST(test_softmax_keeps_a_transposed_layout);
    RUN_TEST(test_transposed_copies);
    return TEST_SUMMARY();
}
