/*
 * Convolutions (wf_conv_general, wf_conv1d/2d/3d, wf_conv_transpose1d/2d/3d)
 * against direct loops written here: 1 to 3 spatial axes, strides,
 * asymmetric and negative padding, kernel and input dilation, groups
 * (depthwise included), flipped kernels, the 1x1 path, non-contiguous
 * inputs, empty batches, every float dtype and every GEMM ISA variant;
 * argument errors; vjp / jvp against finite differences and vmap against
 * per-example calls (float64); compile; the same bits for
 * WEFT_NUM_THREADS = 1, 2, 3, 5 (the test runs itself as a child).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_process.h"
#include "backend/cpu/gemm.h"
#include "transforms_util.h"

/* ---------------------------------------------------------------- reference */

typedef struct conv_case {
    int s; /* spatial axes */
    int64_t n, cin, cout, groups;
    int64_t in[3], k[3];
    int64_t st[3], lo[3], hi[3], kd[3], id[3];
    bool flip;
} conv_case;

static int64_t ref_out_size(const conv_case *c, int d)
{
    const int64_t span = (c->in[d] - 1) * c->id[d] + 1 + c->lo[d] + c->hi[d] -
                         ((c->k[d] - 1) * c->kd[d] + 1);
    return span < 0 ? -1 : span / c->st[d] + 1;
}

static void case_shapes(const conv_case *c, int64_t *xs, int64_t *ws, int64_t *ys)
{
    xs[0] = ys[0] = c->n;
    ws[0] = c->cout;
    for (int d = 0; d < c->s; d++) {
        xs[1 + d] = c->in[d];
        ws[1 + d] = c->k[d];
        ys[1 + d] = ref_out_size(c, d);
    }
    xs[c->s + 1] = c->cin;
    ws[c->s + 1] = c->cin / c->groups;
    ys[c->s + 1] = c->cout;
}

/* y = conv_general(x, w) by its definition (prim/conv.h), in double. */
static double *ref_conv(const conv_case *c, const double *x, const double *w)
{
    int64_t xs[5], ws[5], ys[5];
    case_shapes(c, xs, ws, ys);
    const int nd = c->s + 2;
    const int64_t ny = conf_size(ys, nd), cin_g = c->cin / c->groups;
    const int64_t cout_g = c->cout / c->groups, nk = conf_size(c->k, c->s);
    double *y = calloc((size_t)ny + 1, sizeof *y);
    for (int64_t f = 0; f < ny; f++) {
        int64_t yi[5];
        conf_unravel(f, ys, nd, yi);
        const int64_t co = yi[nd - 1], g = co / cout_g;
        double acc = 0;
        for (int64_t t = 0; t < nk; t++) {
            int64_t k[3], xi[5], wi[5];
            conf_unravel(t, c->k, c->s, k);
            bool inside = true;
            for (int d = 0; d < c->s && inside; d++) {
                const int64_t pos = yi[1 + d] * c->st[d] + k[d] * c->kd[d] - c->lo[d];
                inside = pos >= 0 && pos % c->id[d] == 0 && pos / c->id[d] < c->in[d];
                xi[1 + d] = inside ? pos / c->id[d] : 0;
                wi[1 + d] = c->flip ? c->k[d] - 1 - k[d] : k[d];
            }
            if (!inside)
                continue;
            xi[0] = yi[0];
            wi[0] = co;
            for (int64_t ci = 0; ci < cin_g; ci++) {
                xi[nd - 1] = g * cin_g + ci;
                wi[nd - 1] = ci;
                acc += x[conf_ravel(xi, xs, nd)] * w[conf_ravel(wi, ws, nd)];
            }
        }
        y[f] = acc;
    }
    return y;
}

/* ---------------------------------------------------------------- forward */

static wf_array *build_case(const conv_case *c, wf_array *x, wf_array *w)
{
    return wf_conv_general(x, w, c->st, c->lo, c->hi, c->kd, c->id, c->groups, c->flip);
}

/* Rounded tolerance per dtype for a case's sums of products of values in
 * [-1, 1]: float32 for a few dozen products, and past that growing as the
 * square root of the count (the GEMM sums blocks of up to 512 in order,
 * whose rounding errors add up as a random walk). */
static double sum_tolerance(const conv_case *c, wf_dtype dt)
{
    double terms = (double)(c->cin / c->groups);
    for (int d = 0; d < c->s; d++)
        terms *= (double)c->k[d];
    const double f32 = fmax(2e-5, 1e-6 * sqrt(terms));
    return dt == WF_DTYPE_F64 ? 1e-12 : dt == WF_DTYPE_F32 ? f32 : dt == WF_DTYPE_F16 ? 4e-3 : 2e-2;
}

/* Case c in dtype dt (x strided if asked) against the reference. */
static bool check_case(const conv_case *c, wf_dtype dt, bool strided, uint32_t seed)
{
    int64_t xs[5], ws[5], ys[5];
    case_shapes(c, xs, ws, ys);
    const int nd = c->s + 2;
    const int64_t nx = conf_size(xs, nd), nw = conf_size(ws, nd);
    double *xv = conf_values(nx, -1, 1, seed), *wv = conf_values(nw, -1, 1, seed + 1);
    for (int64_t i = 0; i < nx; i++)
        xv[i] = conf_round_to(xv[i], dt);
    for (int64_t i = 0; i < nw; i++)
        wv[i] = conf_round_to(wv[i], dt);
    double *want = ref_conv(c, xv, wv);
    wf_array *x = strided ? conf_strided(xv, xs, nd, dt) : conf_array(xv, xs, nd, dt);
    wf_array *w = conf_array(wv, ws, nd, dt);
    const bool ok = conf_check(build_case(c, x, w), dt, ys, nd, want, sum_tolerance(c, dt));
    wf_release(x);
    wf_release(w);
    free(xv);
    free(wv);
    free(want);
    return ok;
}

/* {s, n, cin, cout, groups, in, k, stride, lo, hi, kdil, idil, flip} */
static const conv_case cases[] = {
    {1, 2, 3, 4, 1, {9}, {3}, {1}, {0}, {0}, {1}, {1}, false},
    {1, 3, 4, 6, 2, {11}, {3}, {2}, {1}, {2}, {2}, {1}, false},
    {1, 2, 5, 3, 1, {6}, {2}, {1}, {2}, {0}, {1}, {3}, true},
    {1, 1, 3, 2, 1, {10}, {3}, {2}, {-1}, {-2}, {1}, {1}, false}, /* negative padding */
    {2, 2, 3, 5, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},
    {2, 1, 4, 8, 2, {8, 9}, {3, 2}, {2, 3}, {1, 0}, {0, 2}, {1, 2}, {1, 1}, false},
    {2, 2, 6, 6, 6, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false}, /* depthwise */
    {2, 1, 5, 5, 5, {9, 8}, {3, 2}, {2, 1}, {0, 1}, {2, 0}, {2, 1}, {1, 2}, true},  /* depthwise */
    {2, 2, 7, 9, 1, {5, 4}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, false}, /* 1x1 */
    {2, 2, 8, 6, 2, {4, 5}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, false}, /* 1x1 grouped */
    {2, 1, 3, 4, 1, {4, 5}, {3, 2}, {1, 2}, {2, 1}, {1, 2}, {1, 1}, {2, 3}, true},
    {3, 2, 3, 4, 1, {4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 2}, {1, 1, 1}, false},
    {3, 1, 4, 4, 2, {3, 4, 4}, {2, 2, 2}, {2, 1, 1}, {0, 1, 0}, {1, 0, 0}, {1, 2, 1}, {2, 1, 1}, true},
    /* Input dilation, run phase by phase: a stride that is no multiple of it
     * (2 phases, stride 3 each); kernel dilation sharing a factor with it; a
     * 1x1 kernel (phases without taps: zeros); more phases than outputs; a
     * 1-tap phase read in place (the strided convolution's input
     * cotangent); K chunked inside a phase (last). */
    {1, 2, 3, 4, 1, {7}, {3}, {3}, {1}, {1}, {1}, {2}, false},
    {2, 1, 3, 4, 1, {4, 4}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, false},
    {2, 1, 2, 3, 1, {4, 5}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {3, 2}, false},
    {1, 1, 2, 2, 1, {2}, {2}, {1}, {0}, {0}, {1}, {20}, false},
    {2, 2, 6, 5, 1, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {2, 2}, {1, 1}, {2, 2}, true},
    /* K longer than one chunk (K > 4096): 3x3 x 480 channels */
    {2, 1, 480, 20, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},
    /* many rows (several row blocks per group) */
    {2, 3, 16, 24, 1, {20, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},
    /* K chunked on the row-block path (many rows, K > 4096) */
    {2, 3, 480, 4, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},
    {2, 1, 1100, 3, 1, {4, 4}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, {2, 2}, false},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
enum { ISA_CASES = NCASES - 4 }; /* the four largest cases: in float32 only under
                                 * sanitizers */
#else
enum { ISA_CASES = NCASES };
#endif

static void test_forward_every_dtype(void)
{
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_BF16};
    for (size_t t = 0; t < 4; t++)
        for (int k = 0; k < NCASES; k++)
            for (int strided = 0; strided < 2; strided++)
                if ((k < ISA_CASES || (t == 0 && !strided)) &&
                    !check_case(&cases[k], dts[t], strided, 7 + (uint32_t)k))
                    printf("      (case %d, %s%s)\n", k, wf_dtype_name(dts[t]),
                           strided ? ", strided" : "");
}

/* Every GEMM variant this CPU runs, float32, float64 and bfloat16. */
static void test_forward_every_isa(void)
{
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_BF16};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t t = 0; t < 3; t++)
            for (int k = 0; k < ISA_CASES; k++)
                if (!check_case(&cases[k], dts[t], false, 31 + (uint32_t)k))
                    printf("      (case %d, %s, isa %s)\n", k, wf_dtype_name(dts[t]),
                           wf__gemm_isa_name(isa));
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* 1-d convolutions whose rows away from the edges are read in place,
 * between gathered edge rows, over several row blocks: every dtype and
 * GEMM variant. */
static void test_conv1d_rows_in_place(void)
{
    static const conv_case c1[] = {
        {1, 3, 5, 7, 1, {40}, {3}, {2}, {2}, {1}, {1}, {1}, false},
        {1, 2, 16, 8, 1, {300}, {5}, {1}, {2}, {3}, {1}, {1}, false},
        {1, 2, 6, 4, 1, {12}, {4}, {3}, {-1}, {2}, {1}, {1}, true},
    };
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_BF16};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t t = 0; t < 4; t++)
            for (int k = 0; k < 3; k++)
                if (!check_case(&c1[k], dts[t], k == 1, 61 + (uint32_t)k))
                    printf("      (1-d case %d, %s, isa %s)\n", k, wf_dtype_name(dts[t]),
                           wf__gemm_isa_name(isa));
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* Depthwise convolutions on each loop: a small kernel over many rows
 * (channels in whole vectors and a tail of lanes, strides, kernel
 * dilation), a huge kernel over a few rows (the sets), an input dilation
 * (row by row); every dtype and variant. */
static void test_depthwise_paths(void)
{
    static const conv_case cdw[] = {
        {2, 2, 40, 40, 40, {9, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {2, 1}, {1, 1}, false},
        {2, 2, 6, 6, 6, {20, 19}, {17, 16}, {1, 1}, {2, 1}, {1, 2}, {1, 1}, {1, 1}, false},
        {1, 3, 35, 35, 35, {30}, {5}, {1}, {3}, {1}, {2}, {1}, true},
        {2, 1, 17, 17, 17, {6, 5}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, {2, 1}, false},
    };
    enum { NDW = sizeof cdw / sizeof cdw[0] };
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_BF16};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t t = 0; t < 4; t++)
            for (int k = 0; k < NDW; k++)
                if (!check_case(&cdw[k], dts[t], k == 0, 71 + (uint32_t)k))
                    printf("      (depthwise case %d, %s, isa %s)\n", k, wf_dtype_name(dts[t]),
                           wf__gemm_isa_name(isa));
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

static void test_empty_batch(void)
{
    const conv_case c = {2, 0, 4, 6, 2, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false};
    int64_t xs[4], ws[4], ys[4];
    case_shapes(&c, xs, ws, ys);
    wf_array *x = wf_zeros(xs, 4, WF_DTYPE_F32), *w = wf_ones(ws, 4, WF_DTYPE_F32);
    conf_check(build_case(&c, x, w), WF_DTYPE_F32, ys, 4, NULL, 0);
    wf_release(x);
    wf_release(w);
}

/* ---------------------------------------------------------------- conveniences */

/* conv_transpose by its scatter definition: y[i * s - p + k * d] += x[i] w[k]. */
static double *ref_conv_transpose(int s, const int64_t *xs, const int64_t *ws, const double *x,
                                  const double *w, const int64_t *st, const int64_t *pad,
                                  const int64_t *dil, int64_t groups, const int64_t *ys)
{
    const int nd = s + 2;
    const int64_t cout = ws[0], cin_g = ws[nd - 1], cout_g = cout / groups;
    const int64_t nk = conf_size(ws + 1, s), nxsp = conf_size(xs, nd - 1);
    double *y = calloc((size_t)conf_size(ys, nd) + 1, sizeof *y);
    for (int64_t f = 0; f < nxsp; f++) {
        int64_t xi[5], yi[5], wi[5];
        conf_unravel(f, xs, nd - 1, xi);
        for (int64_t t = 0; t < nk; t++) {
            int64_t k[3];
            conf_unravel(t, ws + 1, s, k);
            bool inside = true;
            for (int d = 0; d < s; d++) {
                yi[1 + d] = xi[1 + d] * st[d] - pad[d] + k[d] * dil[d];
                inside = inside && yi[1 + d] >= 0 && yi[1 + d] < ys[1 + d];
                wi[1 + d] = k[d];
            }
            if (!inside)
                continue;
            yi[0] = xi[0];
            for (int64_t co = 0; co < cout; co++) {
                const int64_t g = co / cout_g;
                yi[nd - 1] = wi[0] = co;
                for (int64_t ci = 0; ci < cin_g; ci++) {
                    xi[nd - 1] = g * cin_g + ci;
                    wi[nd - 1] = ci;
                    y[conf_ravel(yi, ys, nd)] +=
                        x[conf_ravel(xi, xs, nd)] * w[conf_ravel(wi, ws, nd)];
                }
            }
        }
    }
    return y;
}

static void check_transpose(int s, const int64_t *xs, const int64_t *ws, const int64_t *st,
                            const int64_t *pad, const int64_t *dil, const int64_t *opad,
                            int64_t groups)
{
    const int nd = s + 2;
    int64_t ys[5];
    ys[0] = xs[0];
    ys[nd - 1] = ws[0];
    for (int d = 0; d < s; d++)
        ys[1 + d] = (xs[1 + d] - 1) * st[d] - 2 * pad[d] + dil[d] * (ws[1 + d] - 1) + 1 + opad[d];
    double *xv = conf_values(conf_size(xs, nd), -1, 1, 3);
    double *wv = conf_values(conf_size(ws, nd), -1, 1, 4);
    double *want = ref_conv_transpose(s, xs, ws, xv, wv, st, pad, dil, groups, ys);
    wf_array *x = conf_array(xv, xs, nd, WF_DTYPE_F64), *w = conf_array(wv, ws, nd, WF_DTYPE_F64);
    wf_array *y = s == 1   ? wf_conv_transpose1d(x, w, st[0], pad[0], dil[0], opad[0], groups)
                  : s == 2 ? wf_conv_transpose2d(x, w, st, pad, dil, opad, groups)
                           : wf_conv_transpose3d(x, w, st, pad, dil, opad, groups);
    if (!conf_check(y, WF_DTYPE_F64, ys, nd, want, 1e-12))
        printf("      (conv_transpose%dd)\n", s);
    wf_release(x);
    wf_release(w);
    free(xv);
    free(wv);
    free(want);
}

static void test_conv_transpose(void)
{
    check_transpose(1, (int64_t[]){2, 5, 4}, (int64_t[]){6, 3, 2}, (int64_t[]){2},
                    (int64_t[]){1}, (int64_t[]){1}, (int64_t[]){1}, 2);
    check_transpose(1, (int64_t[]){1, 4, 3}, (int64_t[]){2, 4, 3}, (int64_t[]){3},
                    (int64_t[]){0}, (int64_t[]){2}, (int64_t[]){0}, 1);
    check_transpose(2, (int64_t[]){2, 3, 4, 3}, (int64_t[]){4, 3, 2, 3}, (int64_t[]){2, 1},
                    (int64_t[]){1, 0}, (int64_t[]){1, 2}, (int64_t[]){1, 0}, 1);
    check_transpose(3, (int64_t[]){1, 2, 3, 2, 2}, (int64_t[]){2, 2, 2, 3, 2},
                    (int64_t[]){2, 1, 2}, (int64_t[]){0, 1, 1}, (int64_t[]){1, 1, 1},
                    (int64_t[]){1, 0, 0}, 1);
}

/* conv1d/2d/3d equal conv_general with symmetric padding. */
static void test_conv_nd_conveniences(void)
{
    const conv_case c1 = {1, 2, 4, 6, 2, {9}, {3}, {2}, {1}, {1}, {2}, {1}, false};
    const conv_case c2 = {2, 1, 3, 4, 1, {6, 7}, {3, 2}, {1, 2}, {2, 1}, {2, 1}, {2, 1}, {1, 1}, false};
    const conv_case c3 = {3, 1, 2, 3, 1, {4, 4, 5}, {2, 3, 2}, {1, 1, 2}, {1, 0, 1}, {1, 0, 1}, {1, 1, 2}, {1, 1, 1}, false};
    const conv_case *cs[3] = {&c1, &c2, &c3};
    for (int i = 0; i < 3; i++) {
        const conv_case *c = cs[i];
        int64_t xs[5], ws[5], ys[5];
        case_shapes(c, xs, ws, ys);
        const int nd = c->s + 2;
        double *xv = conf_values(conf_size(xs, nd), -1, 1, 5);
        double *wv = conf_values(conf_size(ws, nd), -1, 1, 6);
        double *want = ref_conv(c, xv, wv);
        wf_array *x = conf_array(xv, xs, nd, WF_DTYPE_F64), *w = conf_array(wv, ws, nd, WF_DTYPE_F64);
        wf_array *y = c->s == 1   ? wf_conv1d(x, w, c->st[0], c->lo[0], c->kd[0], c->groups)
                      : c->s == 2 ? wf_conv2d(x, w, c->st, c->lo, c->kd, c->groups)
                                  : wf_conv3d(x, w, c->st, c->lo, c->kd, c->groups);
        if (!conf_check(y, WF_DTYPE_F64, ys, nd, want, 1e-12))
            printf("      (conv%dd)\n", c->s);
        wf_release(x);
        wf_release(w);
        free(xv);
        free(wv);
        free(want);
    }
}

/* A float32 input and a float64 weight promote to float64. */
static void test_promotion(void)
{
    const conv_case c = {1, 1, 2, 2, 1, {5}, {2}, {1}, {0}, {0}, {1}, {1}, false};
    int64_t xs[3], ws[3], ys[3];
    case_shapes(&c, xs, ws, ys);
    double *xv = conf_values(10, -1, 1, 1), *wv = conf_values(8, -1, 1, 2);
    for (int i = 0; i < 10; i++)
        xv[i] = conf_round_to(xv[i], WF_DTYPE_F32);
    double *want = ref_conv(&c, xv, wv);
    wf_array *x = conf_array(xv, xs, 3, WF_DTYPE_F32), *w = conf_array(wv, ws, 3, WF_DTYPE_F64);
    conf_check(build_case(&c, x, w), WF_DTYPE_F64, ys, 3, want, 1e-12);
    wf_release(x);
    wf_release(w);
    free(xv);
    free(wv);
    free(want);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
    int64_t xs[4] = {1, 5, 5, 4}, ws[4] = {6, 3, 3, 4};
    wf_array *x = wf_ones(xs, 4, WF_DTYPE_F32), *w = wf_ones(ws, 4, WF_DTYPE_F32);
    wf_array *xi = wf_ones(xs, 4, WF_DTYPE_I32);
    conf_check_error(wf_conv2d(xi, w, NULL, NULL, NULL, 1), WF_ERR_DTYPE, "wf_conv2d");
    conf_check_error(wf_conv2d(x, w, NULL, NULL, NULL, 3), WF_ERR_SHAPE, "groups");
    conf_check_error(wf_conv2d(x, w, NULL, NULL, NULL, 2), WF_ERR_SHAPE, "wf_conv2d");
    conf_check_error(wf_conv2d(x, w, NULL, NULL, NULL, 0), WF_ERR_INVALID_ARGUMENT, "groups");
    conf_check_error(wf_conv2d(x, w, (int64_t[]){0, 1}, NULL, NULL, 1), WF_ERR_INVALID_ARGUMENT,
                     "stride");
    conf_check_error(wf_conv2d(x, w, NULL, (int64_t[]){-1, 0}, NULL, 1), WF_ERR_INVALID_ARGUMENT,
                     "padding");
    conf_check_error(wf_conv2d(x, w, NULL, NULL, (int64_t[]){4, 1}, 1), WF_ERR_SHAPE,
                     "larger than");
    conf_check_error(wf_conv1d(x, w, 1, 0, 1, 1), WF_ERR_SHAPE, "wf_conv1d");
    int64_t w3s[3] = {6, 3, 4};
    wf_array *w3 = wf_ones(w3s, 3, WF_DTYPE_F32);
    conf_check_error(wf_conv_general(x, w3, NULL, NULL, NULL, NULL, NULL, 1, false), WF_ERR_SHAPE,
                     "dimensions");
    int64_t v2s[2] = {5, 4};
    wf_array *v2 = wf_ones(v2s, 2, WF_DTYPE_F32);
    conf_check_error(wf_conv_general(v2, w, NULL, NULL, NULL, NULL, NULL, 1, false), WF_ERR_SHAPE,
                     "rank");
    conf_check_error(wf_conv_transpose2d(x, w, (int64_t[]){1, -1}, NULL, NULL, NULL, 1),
                     WF_ERR_INVALID_ARGUMENT, "stride");
    conf_check_error(wf_conv2d(NULL, w, NULL, NULL, NULL, 1), WF_ERR_NULL_ARGUMENT, NULL);
    wf_release(x);
    wf_release(w);
    wf_release(xi);
    wf_release(w3);
    wf_release(v2);
}

/* ---------------------------------------------------------------- transforms */

static const conv_case grad_cases[] = {
    {2, 2, 3, 4, 1, {5, 6}, {3, 2}, {2, 1}, {1, 0}, {0, 2}, {1, 2}, {1, 1}, false},
    {1, 2, 4, 6, 2, {7}, {3}, {2}, {1}, {1}, {1}, {2}, true},
    {2, 1, 3, 3, 3, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},
    {3, 1, 2, 2, 1, {4, 3, 3}, {2, 2, 2}, {1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 2}, {1, 1, 1}, false},
    {2, 2, 5, 3, 1, {4, 4}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, false},
    {1, 1, 2, 3, 1, {9}, {2}, {3}, {-1}, {2}, {2}, {1}, true},
    {2, 1, 2, 2, 1, {3, 3}, {3, 3}, {1, 1}, {2, 2}, {2, 1}, {1, 1}, {2, 2}, true},
    /* depthwise with a channel multiplier, strided and dilated */
    {2, 2, 3, 6, 3, {6, 5}, {2, 3}, {2, 1}, {1, 0}, {0, 1}, {1, 2}, {1, 1}, true},
    /* pointwise, grouped: the weight's cotangent is one batched product */
    {3, 2, 4, 6, 2, {2, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, false},
};
enum { NGRAD = sizeof grad_cases / sizeof grad_cases[0] };

/* tu_case builders, one per entry of grad_cases (a builder has no payload). */
#define GRAD_BUILDER(i)                                                                        \
    static wf_array *grad_build_##i(wf_array *const *in)                                       \
    {                                                                                          \
        return build_case(&grad_cases[i], in[0], in[1]);                                       \
    }
GRAD_BUILDER(0)
GRAD_BUILDER(1)
GRAD_BUILDER(2)
GRAD_BUILDER(3)
GRAD_BUILDER(4)
GRAD_BUILDER(5)
GRAD_BUILDER(6)
GRAD_BUILDER(7)
GRAD_BUILDER(8)
static const tu_build grad_builders[NGRAD] = {grad_build_0, grad_build_1, grad_build_2,
                                              grad_build_3, grad_build_4, grad_build_5,
                                              grad_build_6, grad_build_7, grad_build_8};

static tu_case grad_tu_case(int i)
{
    const conv_case *c = &grad_cases[i];
    tu_case t;
    memset(&t, 0, sizeof t);
    t.name = "conv_general";
    t.build = grad_builders[i];
    t.nin = 2;
    t.ndims[0] = t.ndims[1] = c->s + 2;
    int64_t ys[5];
    case_shapes(c, t.shapes[0], t.shapes[1], ys);
    t.lo = -1;
    t.hi = 1;
    return t;
}

static void test_vjp_jvp(void)
{
    for (int i = 0; i < NGRAD; i++) {
        const tu_case t = grad_tu_case(i);
        for (int strided = 0; strided < 2; strided++) {
            wf_array *x[2], *tan[2];
            for (int j = 0; j < 2; j++) {
                x[j] = tu_input(t.shapes[j], t.ndims[j], -1, 1, 11 + (uint32_t)j, strided && j == 0);
                tan[j] = tu_input(t.shapes[j], t.ndims[j], -1, 1, 97 + (uint32_t)j, false);
            }
            wf_array *y = t.build(x);
            wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, 5, false);
            wf_release(y);
            bool ok = tu_check_vjp(&t, x, u, 1e-6, NULL);
            ok = tu_check_jvp(&t, x, tan, 1e-6, NULL) && ok;
            if (!ok)
                printf("      (gradient case %d%s)\n", i, strided ? ", strided" : "");
            for (int j = 0; j < 2; j++) {
                wf_release(x[j]);
                wf_release(tan[j]);
            }
            wf_release(u);
        }
    }
}

static void test_vmap(void)
{
    const int axes[][2] = {{0, 0}, {0, WF_VMAP_NOT_MAPPED}, {WF_VMAP_NOT_MAPPED, 0}, {2, 1}};
    for (int i = 0; i < NGRAD; i++) {
        const tu_case t = grad_tu_case(i);
        for (size_t a = 0; a < sizeof axes / sizeof axes[0]; a++)
            if (!tu_check_vmap(&t, axes[a], 3, 17))
                printf("      (vmap case %d, axes %zu)\n", i, a);
    }
}

/* Gradients of an empty batch are zeros of the inputs' shapes. */
static void test_empty_gradients(void)
{
    const tu_case t = grad_tu_case(0);
    int64_t xs[4];
    memcpy(xs, t.shapes[0], sizeof xs);
    xs[0] = 0;
    wf_array *x[2] = {wf_zeros(xs, 4, WF_DTYPE_F64), wf_ones(t.shapes[1], 4, WF_DTYPE_F64)};
    wf_array *y = t.build(x);
    wf_array *u = wf_ones_like(y);
    wf_array *g[2] = {NULL, NULL};
    wf_fn *fn = tu_case_fn(&t);
    if (CHECK_OK(wf_vjp(fn, x, 2, &u, 1, NULL, g))) {
        conf_check(g[0], WF_DTYPE_F64, xs, 4, NULL, 0);
        double *zeros = calloc((size_t)conf_size(t.shapes[1], 4), sizeof *zeros);
        conf_check(g[1], WF_DTYPE_F64, t.shapes[1], 4, zeros, 0);
        free(zeros);
    }
    wf_fn_release(fn);
    wf_release(x[0]);
    wf_release(x[1]);
    wf_release(y);
    wf_release(u);
}

/* Gradients in float32, float16 and bfloat16 (on every ISA variant)
 * against float64 ones on the same (rounded) values. The weight's
 * cotangent here has few rows over a long K (the transposed product), the
 * input's is strided (phase by phase). */
static wf_status wide_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)n;
    out[0] = build_case(payload, in[0], in[1]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static bool grads_in(const conv_case *c, wf_dtype dt, const double *xv, const double *wv,
                     const double *uv, double **gx, double **gw)
{
    int64_t xs[5], ws[5], ys[5];
    case_shapes(c, xs, ws, ys);
    const int nd = c->s + 2;
    wf_array *in[2] = {conf_array(xv, xs, nd, dt), conf_array(wv, ws, nd, dt)};
    wf_array *u = conf_array(uv, ys, nd, dt);
    wf_fn *fn = wf_fn_new(wide_call, (void *)c, NULL);
    wf_array *g[2] = {NULL, NULL};
    const bool ok = CHECK_OK(wf_vjp(fn, in, 2, &u, 1, NULL, g));
    *gx = ok ? conf_read(g[0]) : NULL;
    *gw = ok ? conf_read(g[1]) : NULL;
    wf_fn_release(fn);
    wf_release(in[0]);
    wf_release(in[1]);
    wf_release(u);
    wf_release(g[0]);
    wf_release(g[1]);
    return ok && *gx && *gw;
}

/* test_batch_contiguous_input's cases on one GEMM variant. */
static void check_batch_contiguous(const conv_case *cs, int ncases, const wf_dtype *dts, int isa)
{
    for (int k = 0; k < ncases; k++)
        for (int t = 0; t < 2; t++)
            for (int wt = 0; wt < 2; wt++) {
                const conv_case *c = &cs[k];
                const int nd = c->s + 2;
                int64_t xs[5], ws[5], ys[5], rs[5];
                case_shapes(c, xs, ws, ys);
                const int64_t nx = conf_size(xs, nd);
                double *xv = conf_values(nx, -1, 1, 91 + (uint32_t)k);
                double *wv = conf_values(conf_size(ws, nd), -1, 1, 93 + (uint32_t)k);
                double *rv = malloc((size_t)nx * sizeof *rv);
                int perm[5];
                for (int d = 0; d < nd; d++) {
                    perm[d] = nd - 1 - d; /* x = transpose(r), r laid out reversed */
                    rs[d] = xs[nd - 1 - d];
                }
                for (int64_t i = 0; i < nx; i++) {
                    int64_t idx[5], ridx[5];
                    conf_unravel(i, xs, nd, idx);
                    for (int d = 0; d < nd; d++)
                        ridx[d] = idx[nd - 1 - d];
                    rv[conf_ravel(ridx, rs, nd)] = xv[i];
                }
                double *want = ref_conv(c, xv, wv);
                wf_array *r = conf_array(rv, rs, nd, dts[t]);
                wf_array *x = wf_transpose(r, perm, nd);
                wf_array *w = wt ? conf_strided(wv, ws, nd, dts[t]) : conf_array(wv, ws, nd, dts[t]);
                if (!conf_check(build_case(c, x, w), dts[t], ys, nd, want, sum_tolerance(c, dts[t])))
                    printf("      (case %d, %s, weight %s, isa %s)\n", k, wf_dtype_name(dts[t]),
                           wt ? "strided" : "contiguous", wf__gemm_isa_name(isa));
                wf_release(r);
                wf_release(x);
                wf_release(w);
                free(xv);
                free(wv);
                free(rv);
                free(want);
            }
}

/* An input whose batch axis is the contiguous one (as the weight's
 * cotangent sees the forward input: every position at once), with the
 * weight contiguous (its rows per (channel, tap) pair gathered) and
 * transposed (read in place): float32 and float64 against the reference,
 * on every GEMM variant. */
static void test_batch_contiguous_input(void)
{
    static const conv_case cs[] = {
        {1, 6, 4, 10, 2, {30}, {3}, {2}, {1}, {2}, {1}, {1}, false},
        {2, 5, 3, 7, 1, {9, 8}, {3, 2}, {1, 2}, {1, 0}, {1, 1}, {1, 2}, {1, 1}, false},
        /* a long kernel: the product's K (2,400) is summed in parts */
        {1, 6, 4, 3, 1, {700}, {600}, {1}, {0}, {0}, {1}, {1}, false},
        /* an input dilation (a transposed convolution's weight cotangent):
         * each phase such a product over its taps, strided through w */
        {2, 5, 3, 4, 1, {6, 5}, {5, 4}, {1, 1}, {2, 1}, {1, 2}, {1, 1}, {2, 2}, false},
        {1, 4, 2, 3, 1, {9}, {7}, {2}, {3}, {1}, {2}, {3}, false},
    };
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_F64};
    const int best_isa = wf__gemm_isa(); /* the product runs on each GEMM variant */
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        check_batch_contiguous(cs, (int)(sizeof cs / sizeof cs[0]), dts, isa);
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

static void test_low_precision_gradients(void)
{
    const conv_case c = {2, 16, 4, 8, 1, {40, 40}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false};
    int64_t xs[4], ws[4], ys[4];
    case_shapes(&c, xs, ws, ys);
    const int64_t nx = conf_size(xs, 4), nw = conf_size(ws, 4), ny = conf_size(ys, 4);
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_F16, WF_DTYPE_BF16};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (int t = 0; t < 3; t++) {
            double *xv = conf_values(nx, -1, 1, 1), *wv = conf_values(nw, -1, 1, 2);
            double *uv = conf_values(ny, -1, 1, 3);
            for (int64_t i = 0; i < nx; i++)
                xv[i] = conf_round_to(xv[i], dts[t]);
            for (int64_t i = 0; i < nw; i++)
                wv[i] = conf_round_to(wv[i], dts[t]);
            for (int64_t i = 0; i < ny; i++)
                uv[i] = conf_round_to(uv[i], dts[t]);
            double *ex = NULL, *ew = NULL, *gx = NULL, *gw = NULL;
            if (grads_in(&c, WF_DTYPE_F64, xv, wv, uv, &ex, &ew) &&
                grads_in(&c, dts[t], xv, wv, uv, &gx, &gw)) {
                /* sums of up to 6400 products: relative to their magnitude */
                const double tol = dts[t] == WF_DTYPE_F32 ? 1e-5 : dts[t] == WF_DTYPE_F16 ? 2e-3 : 1e-2;
                double sx = 0, sw = 0;
                for (int64_t i = 0; i < nx; i++)
                    sx = fmax(sx, fabs(ex[i]));
                for (int64_t i = 0; i < nw; i++)
                    sw = fmax(sw, fabs(ew[i]));
                for (int64_t i = 0; i < nx; i++)
                    if (!CHECK_NEAR(gx[i], ex[i], tol * sx))
                        break;
                for (int64_t i = 0; i < nw; i++)
                    if (!CHECK_NEAR(gw[i], ew[i], tol * sw)) {
                        printf("      (weight gradient, %s, isa %s)\n", wf_dtype_name(dts[t]),
                               wf__gemm_isa_name(isa));
                        break;
                    }
            }
            free(xv);
            free(wv);
            free(uv);
            free(ex);
            free(ew);
            free(gx);
            free(gw);
        }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* ---------------------------------------------------------------- compile */

static wf_status compiled_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    (void)n;
    /* the same convolution twice: CSE merges them */
    wf_array *a = build_case(&cases[5], in[0], in[1]);
    wf_array *b = build_case(&cases[5], in[0], in[1]);
    out[0] = a && b ? wf_add(a, b) : NULL;
    *nout = 1;
    wf_release(a);
    wf_release(b);
    return out[0] ? WF_OK : wf_last_error();
}

static void test_compile(void)
{
    const conv_case *c = &cases[5];
    int64_t xs[5], ws[5], ys[5];
    case_shapes(c, xs, ws, ys);
    wf_fn *f = wf_fn_new(compiled_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    for (uint32_t round = 0; round < 2; round++) { /* trace, then replay */
        double *xv = conf_values(conf_size(xs, 4), -1, 1, 40 + round);
        double *wv = conf_values(conf_size(ws, 4), -1, 1, 50 + round);
        double *want = ref_conv(c, xv, wv);
        for (int64_t i = 0; i < conf_size(ys, 4); i++)
            want[i] *= 2;
        wf_array *in[2] = {conf_array(xv, xs, 4, WF_DTYPE_F64), conf_array(wv, ws, 4, WF_DTYPE_F64)};
        wf_array *out[1] = {NULL};
        size_t nout = 1;
        if (CHECK_OK(wf_fn_call(cf, in, 2, out, &nout)))
            conf_check(out[0], WF_DTYPE_F64, ys, 4, want, 1e-12);
        wf_release(in[0]);
        wf_release(in[1]);
        free(xv);
        free(wv);
        free(want);
    }
    wf_compile_stats st = wf_compile_stats_default();
    if (CHECK_OK(wf_compile_stats_get(cf, &st)))
        CHECK_EQ_INT(st.traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* ---------------------------------------------------------------- thread counts */

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
enum { DET_HW = 12, DET_CH = 16 };
#else
enum { DET_HW = 28, DET_CH = 64 };
#endif

static uint64_t hash_bytes(wf_array *a)
{
    const size_t bytes = wf_array_nbytes(a);
    unsigned char *buf = malloc(bytes + 1);
    uint64_t h = 1469598103934665603ull;
    if (wf_array_copy_to(a, buf, bytes) != WF_OK)
        h = 0;
    for (size_t i = 0; h && i < bytes; i++)
        h = (h ^ buf[i]) * 1099511628211ull;
    free(buf);
    return h;
}

static wf_array *det_input(const int64_t *shape, int nd, wf_dtype dt, uint32_t seed)
{
    double *v = conf_values(conf_size(shape, nd), -1, 1, seed);
    wf_array *a = conf_array(v, shape, nd, dt);
    free(v);
    return a;
}

static wf_status det_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    (void)n;
    out[0] = build_case(payload, in[0], in[1]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* Hashes of a few convolutions and their gradients (input, weight), one
 * line each. */
static void det_compute(char *out, size_t cap)
{
    size_t used = 0;
    const conv_case c3 = {2, 2, DET_CH, DET_CH, 1, {DET_HW, DET_HW}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false};
    const conv_case cdw = {2, 2, DET_CH, DET_CH, DET_CH, {DET_HW, DET_HW}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false};
    const conv_case c1 = {2, 2, DET_CH, 2 * DET_CH, 1, {DET_HW, DET_HW}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, false};
    const conv_case c1d = {1, 2, DET_CH, DET_CH, 1, {8 * DET_HW}, {3}, {1}, {1}, {1}, {1}, {1}, false};
    /* a weight gradient long enough to be summed in parts (conv.c) */
    const conv_case c1d_long = {1, 2, DET_CH, DET_CH, 1, {3000}, {3}, {1}, {1}, {1}, {1}, {1}, false};
    /* strided (its input gradient phase by phase) and transposed (input
     * dilation: forward and weight gradient phase by phase) */
    const conv_case cs2 = {2, 2, DET_CH, DET_CH, 1, {DET_HW, DET_HW}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false};
    const conv_case ct2 = {2, 2, DET_CH, DET_CH, 1, {DET_HW, DET_HW}, {3, 3}, {1, 1}, {1, 1}, {2, 2}, {1, 1}, {2, 2}, true};
    const conv_case *cs[7] = {&c3, &cdw, &c1, &c1d, &c1d_long, &cs2, &ct2};
    static const wf_dtype dts[] = {WF_DTYPE_F32, WF_DTYPE_BF16, WF_DTYPE_F64};
    for (int i = 0; i < 7; i++)
        for (int t = 0; t < 3; t++) {
            int64_t xs[4], ws[4], ys[4];
            case_shapes(cs[i], xs, ws, ys);
            const int nd = cs[i]->s + 2;
            wf_array *in[2] = {det_input(xs, nd, dts[t], 3), det_input(ws, nd, dts[t], 4)};
            wf_array *u = det_input(ys, nd, dts[t], 5);
            wf_fn *fn = wf_fn_new(det_call, (void *)cs[i], NULL);
            wf_array *y = NULL, *g[2] = {NULL, NULL};
            const bool ok = wf_vjp(fn, in, 2, &u, 1, &y, g) == WF_OK;
            wf_array *shown[3] = {y, g[0], g[1]};
            static const char *names[3] = {"y", "xgrad", "wgrad"};
            for (int k = 0; k < 3; k++)
                used += (size_t)snprintf(out + used, cap - used, "%s%d_%s %016llx\n", names[k], i,
                                         wf_dtype_name(dts[t]),
                                         (unsigned long long)(ok ? hash_bytes(shown[k]) : 0));
            for (int k = 0; k < 3; k++)
                wf_release(shown[k]);
            wf_fn_release(fn);
            wf_release(in[0]);
            wf_release(in[1]);
            wf_release(u);
        }
}

static char self_path[4096];

static void test_thread_counts(void)
{
    static const int counts[] = {1, 2, 3, 5};
    static char reference[4096], got[4096];
    wf_test_check_thread_counts(__FILE__, __LINE__, NULL, self_path, "WEFT_CONV_DET_CHILD=1", counts, 4,
                                reference, got, sizeof got);
    CHECK(strstr(reference, " 0000000000000000") == NULL);
    CHECK(strstr(reference, "wgrad3_float64") != NULL); /* every case printed */
    CHECK(strstr(reference, "wgrad6_float64") != NULL);
}

int main(void)
{
    if (getenv("WEFT_CONV_DET_CHILD")) {
        static char out[4096];
        det_compute(out, sizeof out);
        fputs(out, stdout);
        fflush(stdout);
        return 0;
    }
    if (!wf_test_self_path(self_path, sizeof self_path)) {
        printf("cannot read /proc/self/exe\n");
        return 1;
    }
    RUN_TEST(test_forward_every_dtype);
    RUN_TEST(test_forward_every_isa);
    RUN_TEST(test_conv1d_rows_in_place);
    RUN_TEST(test_depthwise_paths);
    RUN_TEST(test_empty_batch);
    RUN_TEST(test_conv_transpose);
    RUN_TEST(test_conv_nd_conveniences);
    RUN_TEST(test_promotion);
    RUN_TEST(test_errors);
    RUN_TEST(test_vjp_jvp);
    RUN_TEST(test_vmap);
    RUN_TEST(test_empty_gradients);
    RUN_TEST(test_batch_contiguous_input);
    RUN_TEST(test_low_precision_gradients);
    RUN_TEST(test_compile);
    RUN_TEST(test_thread_counts);
    return TEST_SUMMARY();
}
