/*
 * complex64 through the sort family and the extra scans, against references
 * written here:
 *  - sort, argsort (stable), partition, argpartition, topk, argtopk along
 *    both axes of a matrix whose values repeat and hold every NaN class and
 *    infinities, in NumPy's order (ordered below by np_less: lexicographic,
 *    then R + NaN j, NaN + R j, NaN + NaN j);
 *  - cummax / cummin (forward, reverse, inclusive, exclusive) against a
 *    running max / min in that order with NaN propagation, exclusive scans
 *    starting at -inf - inf j / inf + inf j;
 *  - logcumsumexp against log(running sum of exp) in double complex (the
 *    principal branch: imaginary parts beyond pi in the input);
 *  - the gradient of real(sum(logcumsumexp(x) * w)) against central
 *    differences of that function in double.
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef double _Complex cd;

enum { ROWS = 5, COLS = 97 };

typedef struct c64 {
    float re, im;
} c64;

/* NumPy's order: [R + Rj, R + nanj, nan + Rj, nan + nanj]. */
static int order_class(c64 v)
{
    const bool r = isnan(v.re), i = isnan(v.im);
    return r ? (i ? 3 : 2) : (i ? 1 : 0);
}

static bool np_less(c64 a, c64 b)
{
    const int ca = order_class(a), cb = order_class(b);
    if (ca != cb)
        return ca < cb;
    switch (ca) {
    case 0: return a.re < b.re || (a.re == b.re && a.im < b.im);
    case 1: return a.re < b.re;
    case 2: return a.im < b.im;
    default: return false;
    }
}

/* Same value, NaN parts matching NaN parts. */
static bool same(c64 a, c64 b)
{
    return (a.re == b.re || (isnan(a.re) && isnan(b.re))) &&
           (a.im == b.im || (isnan(a.im) && isnan(b.im)));
}

static void fill(c64 *v, int64_t n, unsigned seed)
{
    static const float parts[] = {-INFINITY, -2.0f, -0.5f, 0.0f, 1.0f, 3.0f, INFINITY, NAN};
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i].re = parts[(seed >> 10) % 8];
        v[i].im = parts[(seed >> 20) % 8];
    }
}

/* Stable sort of indices 0..n-1 of v (insertion); `descending`: by
 * reversed order, ties still by index. */
static void reference_order(const c64 *v, int64_t stride, int64_t n, bool descending,
                            int64_t *idx)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        for (; j > 0; j--) {
            const c64 x = v[i * stride], y = v[idx[j - 1] * stride];
            if (!(descending ? np_less(y, x) : np_less(x, y)))
                break;
            idx[j] = idx[j - 1];
        }
        idx[j] = i;
    }
}

static bool read_back(wf_array *a, void *out, size_t bytes)
{
    if (!CHECK_NOT_NULL(a) || !CHECK_OK(wf_array_copy_to(a, out, bytes))) {
        printf("      (%s)\n", wf_last_error_message());
        wf_clear_error();
        return false;
    }
    return true;
}

/* One row (n values, stride apart in src): every sort-family op's result
 * for it, read from out arrays whose row is `r` along the other axis. */
static void test_sort_family(void)
{
    c64 *data = malloc(ROWS * COLS * sizeof *data);
    fill(data, ROWS * COLS, 9);
    data[3] = (c64){1.0f, NAN}; /* make sure each class is present in row 0 */
    data[4] = (c64){NAN, -2.0f};
    data[5] = (c64){NAN, NAN};
    int64_t *idx = malloc(COLS * sizeof *idx);
    c64 *got = malloc(ROWS * COLS * sizeof *got);
    uint32_t *gidx = malloc(ROWS * COLS * sizeof *gidx);
    wf_scope_begin();
    wf_array *m = wf_array_from_data(data, (int64_t[]){ROWS, COLS}, 2, WF_DTYPE_C64);
    for (int axis = 0; axis < 2; axis++) {
        /* along axis 1: rows of COLS; along axis 0: columns of ROWS */
        const int64_t n = axis == 1 ? COLS : ROWS, lines = axis == 1 ? ROWS : COLS;
        const int64_t step = axis == 1 ? 1 : COLS, line_step = axis == 1 ? COLS : 1;
        if (read_back(wf_sort(m, axis), got, ROWS * COLS * sizeof *got))
            for (int64_t l = 0; l < lines; l++) {
                reference_order(data + l * line_step, step, n, false, idx);
                for (int64_t i = 0; i < n; i++)
                    if (!CHECK(same(got[l * line_step + i * step],
                                    data[l * line_step + idx[i] * step]))) {
                        printf("      sort axis %d line %lld pos %lld\n", axis, (long long)l,
                               (long long)i);
                        break;
                    }
            }
        if (read_back(wf_argsort(m, axis), gidx, ROWS * COLS * sizeof *gidx))
            for (int64_t l = 0; l < lines; l++) {
                reference_order(data + l * line_step, step, n, false, idx);
                for (int64_t i = 0; i < n; i++)
                    if (!CHECK_EQ_INT(gidx[l * line_step + i * step], idx[i]))
                        break;
            }
        const int64_t kths[] = {0, n / 2, n - 1};
        for (int t = 0; t < 3; t++) {
            const int64_t kth = kths[t];
            if (!read_back(wf_partition(m, kth, axis), got, ROWS * COLS * sizeof *got) ||
                !read_back(wf_argpartition(m, kth, axis), gidx, ROWS * COLS * sizeof *gidx))
                continue;
            for (int64_t l = 0; l < lines; l++) {
                reference_order(data + l * line_step, step, n, false, idx);
                const c64 *row = got + l * line_step, *src = data + l * line_step;
                const uint32_t *ir = gidx + l * line_step;
                CHECK(same(row[kth * step], src[idx[kth] * step]));
                bool seen[COLS] = {false};
                for (int64_t i = 0; i < n; i++) {
                    CHECK(!(i < kth && np_less(row[kth * step], row[i * step])));
                    CHECK(!(i > kth && np_less(row[i * step], row[kth * step])));
                    CHECK(ir[i * step] < n && !seen[ir[i * step]]);
                    if (ir[i * step] < n) {
                        seen[ir[i * step]] = true;
                        CHECK(same(row[i * step], src[ir[i * step] * step]));
                    }
                }
            }
        }
        const int64_t ks[] = {0, 1, 7 < n ? 7 : n, n};
        for (int t = 0; t < 4; t++) {
            const int64_t k = ks[t];
            wf_array *tv = wf_topk(m, k, axis), *ti = wf_argtopk(m, k, axis);
            const size_t count = (size_t)(k * lines);
            if (k == 0) {
                CHECK(tv != NULL && wf_array_size(tv) == 0);
                continue;
            }
            if (!read_back(tv, got, count * sizeof *got) ||
                !read_back(ti, gidx, count * sizeof *gidx))
                continue;
            const int64_t ostep = axis == 1 ? 1 : lines, oline = axis == 1 ? k : 1;
            for (int64_t l = 0; l < lines; l++) {
                reference_order(data + l * line_step, step, n, true, idx);
                for (int64_t i = 0; i < k; i++) {
                    if (!CHECK_EQ_INT(gidx[l * oline + i * ostep], idx[i]) ||
                        !CHECK(same(got[l * oline + i * ostep],
                                    data[l * line_step + idx[i] * step]))) {
                        printf("      topk k %lld axis %d line %lld pos %lld\n", (long long)k,
                               axis, (long long)l, (long long)i);
                        l = lines;
                        break;
                    }
                }
            }
        }
    }
    wf_scope_end();
    free(data);
    free(idx);
    free(got);
    free(gidx);
}

/* ---------------------------------------------------------------- scans */

static bool isnan_c(c64 v) { return isnan(v.re) || isnan(v.im); }
static bool lex_less(c64 a, c64 b) { return a.re < b.re || (a.re == b.re && a.im < b.im); }

/* Running max (or min) of a line, as wf_maximum orders and propagates NaN. */
static void reference_extreme(const c64 *x, int64_t n, bool max, bool reverse, bool inclusive,
                              c64 *out)
{
    c64 c = max ? (c64){-INFINITY, -INFINITY} : (c64){INFINITY, INFINITY};
    for (int64_t s = 0; s < n; s++) {
        const int64_t i = reverse ? n - 1 - s : s;
        if (!inclusive)
            out[i] = c;
        const c64 v = x[i];
        if (s == 0)
            c = v;
        else if (!isnan_c(c) && (isnan_c(v) || (max ? lex_less(c, v) : lex_less(v, c))))
            c = v;
        if (inclusive)
            out[i] = c;
    }
}

static void test_cummax_cummin(void)
{
    c64 *data = malloc(ROWS * COLS * sizeof *data), *got = malloc(ROWS * COLS * sizeof *got);
    c64 line[COLS], want[COLS];
    fill(data, ROWS * COLS, 5);
    for (int64_t i = 0; i < ROWS * COLS; i++) /* NaNs rarer: runs between them */
        if (i % 13 != 0 && isnan_c(data[i]))
            data[i] = (c64){(float)(i % 5) - 2.0f, (float)(i % 3)};
    wf_scope_begin();
    wf_array *m = wf_array_from_data(data, (int64_t[]){ROWS, COLS}, 2, WF_DTYPE_C64);
    for (int op = 0; op < 2; op++)
        for (int axis = 0; axis < 2; axis++)
            for (int reverse = 0; reverse < 2; reverse++)
                for (int inclusive = 0; inclusive < 2; inclusive++) {
                    wf_array *r = (op == 0 ? wf_cummax : wf_cummin)(m, axis, reverse, inclusive);
                    if (!read_back(r, got, ROWS * COLS * sizeof *got))
                        continue;
                    const int64_t n = axis == 1 ? COLS : ROWS, lines = axis == 1 ? ROWS : COLS;
                    const int64_t step = axis == 1 ? 1 : COLS, ls = axis == 1 ? COLS : 1;
                    for (int64_t l = 0; l < lines; l++) {
                        for (int64_t i = 0; i < n; i++)
                            line[i] = data[l * ls + i * step];
                        reference_extreme(line, n, op == 0, reverse, inclusive, want);
                        for (int64_t i = 0; i < n; i++)
                            if (!CHECK(same(got[l * ls + i * step], want[i]))) {
                                printf("      %s axis %d reverse %d inclusive %d line %lld pos "
                                       "%lld\n",
                                       op == 0 ? "cummax" : "cummin", axis, reverse, inclusive,
                                       (long long)l, (long long)i);
                                i = n;
                                l = lines;
                            }
                    }
                }
    wf_scope_end();
    free(data);
    free(got);
}

static void random_complex(c64 *v, int64_t n, unsigned seed, float re_span, float im_span)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i].re = re_span * ((float)(seed >> 8) / (float)(1u << 24) - 0.5f);
        seed = seed * 1664525u + 1013904223u;
        v[i].im = im_span * ((float)(seed >> 8) / (float)(1u << 24) - 0.5f);
    }
}

static void test_logcumsumexp(void)
{
    c64 *data = malloc(ROWS * COLS * sizeof *data), *got = malloc(ROWS * COLS * sizeof *got);
    random_complex(data, ROWS * COLS, 17, 6.0f, 9.0f); /* |im| up to 4.5 > pi */
    data[7] = (c64){NAN, 0.0f};
    wf_scope_begin();
    wf_array *m = wf_array_from_data(data, (int64_t[]){ROWS, COLS}, 2, WF_DTYPE_C64);
    for (int reverse = 0; reverse < 2; reverse++)
        for (int inclusive = 0; inclusive < 2; inclusive++) {
            if (!read_back(wf_logcumsumexp(m, 1, reverse, inclusive), got,
                           ROWS * COLS * sizeof *got))
                continue;
            for (int64_t l = 0; l < ROWS; l++) {
                cd sum = 0;
                bool nan_seen = false, ok = true;
                for (int64_t s = 0; s < COLS && ok; s++) {
                    const int64_t i = reverse ? COLS - 1 - s : s;
                    const c64 g = got[l * COLS + i], x = data[l * COLS + i];
                    if (!inclusive) {
                        if (s == 0)
                            ok = CHECK(g.re == -INFINITY && g.im == 0.0f);
                        else
                            ok = nan_seen ? CHECK(isnan(g.re) && isnan(g.im))
                                          : CHECK(cabs(g.re + I * g.im - clog(sum)) <=
                                                  1e-5 * (1 + cabs(clog(sum))));
                    }
                    nan_seen = nan_seen || isnan_c(x);
                    sum += cexp(x.re + I * x.im);
                    if (inclusive && ok) {
                        const cd want = clog(sum);
                        ok = nan_seen ? CHECK(isnan(g.re) && isnan(g.im))
                                      : CHECK(cabs(g.re + I * g.im - want) <=
                                              1e-5 * (1 + cabs(want)));
                    }
                    if (!ok)
                        printf("      reverse %d inclusive %d line %lld pos %lld: (%g, %g)\n",
                               reverse, inclusive, (long long)l, (long long)i, g.re, g.im);
                }
            }
        }
    /* the first element alone wraps too: log(exp(1 + 5j)) = 1 + (5 - 2 pi) j */
    const c64 one[1] = {{1.0f, 5.0f}};
    c64 w;
    if (read_back(wf_logcumsumexp(wf_array_from_data(one, (int64_t[]){1}, 1, WF_DTYPE_C64), 0,
                                  false, true),
                  &w, sizeof w))
        CHECK(fabs(w.re - 1.0) < 1e-6 && fabs(w.im - (5.0 - 2 * M_PI)) < 1e-5);
    wf_scope_end();
    free(data);
    free(got);
}

/* f(x) = real(sum(logcumsumexp(x) * w)) in double, for the differences. */
static double f_double(const c64 *x, const c64 *w, int64_t n)
{
    cd sum = 0, total = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += cexp(x[i].re + I * x[i].im);
        total += clog(sum) * (w[i].re + I * w[i].im);
    }
    return creal(total);
}

static wf_status loss_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_scope_begin();
    out[0] = wf_keep(wf_sum(
        wf_real(wf_multiply(wf_logcumsumexp(in[0], 0, false, true), in[1])), NULL, 0, false));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* MLX's convention for a real loss of complex x (the adjoint, as PyTorch):
 * the gradient is df/dre + i df/dim. */
static void test_logcumsumexp_gradient(void)
{
    enum { N = 9 };
    c64 x[N], w[N], g[N];
    random_complex(x, N, 3, 2.0f, 2.0f);
    random_complex(w, N, 4, 2.0f, 2.0f);
    wf_scope_begin();
    wf_array *in[2] = {wf_array_from_data(x, (int64_t[]){N}, 1, WF_DTYPE_C64),
                       wf_array_from_data(w, (int64_t[]){N}, 1, WF_DTYPE_C64)};
    wf_fn *f = wf_fn_new(loss_body, NULL, NULL);
    wf_fn *gf = wf_grad(f, (int[]){0}, 1);
    wf_array *grads[1] = {NULL};
    size_t nout = 1;
    if (CHECK_OK(wf_fn_call(gf, in, 2, grads, &nout)) && read_back(grads[0], g, sizeof g))
        for (int i = 0; i < N; i++) {
            c64 xp[N], xm[N];
            const double h = 1e-4;
            double d[2];
            for (int part = 0; part < 2; part++) {
                memcpy(xp, x, sizeof xp);
                memcpy(xm, x, sizeof xm);
                (part ? &xp[i].im : &xp[i].re)[0] += (float)h;
                (part ? &xm[i].im : &xm[i].re)[0] -= (float)h;
                const double step = (double)(part ? xp[i].im - xm[i].im : xp[i].re - xm[i].re);
                d[part] = (f_double(xp, w, N) - f_double(xm, w, N)) / step;
            }
            if (!CHECK(fabs(g[i].re - d[0]) < 2e-3 * (1 + fabs(d[0])) &&
                       fabs(g[i].im - d[1]) < 2e-3 * (1 + fabs(d[1]))))
                printf("      [%d] (%g, %g), want (%g, %g)\n", i, g[i].re, g[i].im, d[0], d[1]);
        }
    wf_fn_release(gf);
    wf_fn_release(f);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_sort_family);
    RUN_TEST(test_cummax_cummin);
    RUN_TEST(test_logcumsumexp);
    RUN_TEST(test_logcumsumexp_gradient);
    return TEST_SUMMARY();
}
