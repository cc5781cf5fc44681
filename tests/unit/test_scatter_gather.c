/*
 * General gather / scatter (wf_gather, wf_scatter with every mode,
 * wf_put_along_axis) and the dynamic slices built on them, against plain
 * references written here (loops over doubles, positions combined in
 * row-major order of the index shape): every dtype with every index
 * dtype, negative indices, several index arrays that broadcast, slices
 * wider than 1 on indexed and other axes, strided inputs, duplicates
 * (REPLACE: the last wins; ADD/PROD/MAX/MIN: all combine, NaN propagates),
 * empty arrays, errors at construction and out-of-range indices at
 * evaluation; gathers large enough to stream their output; vjp / jvp against finite differences in float64, vmap
 * against per-example results, and a compiled dynamic slice whose start
 * changes between calls of one trace.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "transforms_util.h"

/* Every dtype, in enum order (a shorter list would leave BOOL entries). */
static const wf_dtype all_dtypes[WF_DTYPE_COUNT] = {
    WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I32, WF_DTYPE_I64, WF_DTYPE_F16,
    WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_I8,  WF_DTYPE_I16,
    WF_DTYPE_U16,  WF_DTYPE_U32, WF_DTYPE_U64, WF_DTYPE_C64};
static const wf_dtype index_dtypes[3] = {WF_DTYPE_U8, WF_DTYPE_I32, WF_DTYPE_I64};

/* ---------------------------------------------------------------- references */

/* Index arrays as doubles, all of shape I (ishape, indim). */
typedef struct ref_indices {
    int n;
    int axes[4];
    const double *v[4];
    int64_t ishape[4];
    int indim;
} ref_indices;

static int64_t ref_index(const ref_indices *ix, int k, int64_t p, int64_t dim)
{
    int64_t x = (int64_t)ix->v[k][p];
    return x < 0 ? x + dim : x;
}

/* The a-coordinates of slice element s (row-major over sizes) of position p. */
static void ref_coords(const ref_indices *ix, const int64_t *shape, int ndim,
                       const int64_t *sizes, int64_t p, int64_t s, int64_t *coord)
{
    conf_unravel(s, sizes, ndim, coord);
    for (int k = 0; k < ix->n; k++)
        coord[ix->axes[k]] += ref_index(ix, k, p, shape[ix->axes[k]]);
}

static double *ref_gather(const double *v, const int64_t *shape, int ndim, const ref_indices *ix,
                          const int64_t *sizes)
{
    const int64_t n = conf_size(ix->ishape, ix->indim), m = conf_size(sizes, ndim);
    double *out = malloc((size_t)(n * m + 1) * sizeof *out);
    int64_t c[WF_MAX_NDIM];
    for (int64_t p = 0; p < n; p++)
        for (int64_t s = 0; s < m; s++) {
            ref_coords(ix, shape, ndim, sizes, p, s, c);
            out[p * m + s] = v[conf_ravel(c, shape, ndim)];
        }
    return out;
}

static double ref_combine(double x, double u, wf_scatter_mode mode, wf_dtype d)
{
    double r;
    switch (mode) {
    case WF_SCATTER_REPLACE: return u;
    case WF_SCATTER_ADD: r = d == WF_DTYPE_BOOL ? (double)(x != 0 || u != 0) : x + u; break;
    case WF_SCATTER_PROD: r = d == WF_DTYPE_BOOL ? (double)(x != 0 && u != 0) : x * u; break;
    case WF_SCATTER_MAX: r = isnan(x) || isnan(u) ? NAN : (x > u ? x : u); break;
    default: r = isnan(x) || isnan(u) ? NAN : (x < u ? x : u); break;
    }
    return d == WF_DTYPE_BOOL ? r : conf_wrap_to(r, d);
}

/* Sequential scatter: positions in row-major order. f16/bf16 round once at
 * the end (the kernel accumulates a group in float32; the test data keeps
 * every partial result exact). */
static double *ref_scatter(const double *v, const int64_t *shape, int ndim, const ref_indices *ix,
                           const double *u, const int64_t *sizes, wf_scatter_mode mode,
                           wf_dtype d)
{
    const int64_t size = conf_size(shape, ndim);
    const int64_t n = conf_size(ix->ishape, ix->indim), m = conf_size(sizes, ndim);
    double *out = malloc((size_t)(size + 1) * sizeof *out);
    memcpy(out, v, (size_t)size * sizeof *out);
    int64_t c[WF_MAX_NDIM];
    for (int64_t p = 0; p < n; p++)
        for (int64_t s = 0; s < m; s++) {
            ref_coords(ix, shape, ndim, sizes, p, s, c);
            const int64_t at = conf_ravel(c, shape, ndim);
            out[at] = ref_combine(out[at], u[p * m + s], mode, d);
        }
    for (int64_t i = 0; i < size; i++)
        out[i] = conf_round_to(out[i], d);
    return out;
}

/* ---------------------------------------------------------------- gather */

static void test_gather_every_dtype(void)
{
    const int64_t shape[3] = {5, 4, 6};
    const int64_t ishape[2] = {2, 3};
    for (int t = 0; t < WF_DTYPE_COUNT; t++)
        for (int q = 0; q < 3; q++) {
            wf_scope_begin();
            const wf_dtype d = all_dtypes[t], id = index_dtypes[q];
            double *v = conf_integer_values(120, d, 3 + t);
            wf_array *a = (t + q) % 2 ? conf_strided(v, shape, 3, d) : conf_array(v, shape, 3, d);
            /* index axes 0 and 2; slices (1, 3, 2): width 2 on indexed axis 2 */
            double i0[6] = {0, 4, 2, 1, 3, 4}, i2[6] = {0, 4, 1, 2, 3, 4};
            if (id != WF_DTYPE_U8) {
                i0[1] = -1; /* 4 */
                i2[5] = -2; /* 4 */
            }
            wf_array *idx[2] = {conf_array(i0, ishape, 2, id), conf_array(i2, ishape, 2, id)};
            const int axes[2] = {0, 2};
            const int64_t sizes[3] = {1, 3, 2};
            ref_indices ix = {2, {0, 2}, {i0, i2}, {2, 3}, 2};
            double *want = ref_gather(v, shape, 3, &ix, sizes);
            const int64_t oshape[5] = {2, 3, 1, 3, 2};
            conf_check(wf_gather(a, idx, 2, axes, sizes), d, oshape, 5, want, 0);
            free(want);
            free(v);
            wf_scope_end();
        }
}

/* Index arrays of different shapes broadcast; a 0-d index; no index at all. */
static void test_gather_broadcast_and_edges(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {4, 5};
    double *v = conf_values(20, -1, 1, 7);
    wf_array *a = conf_array(v, shape, 2, WF_DTYPE_F32);
    const double r[2] = {3, 1}, c[3] = {0, 4, 2};
    const int64_t rs[2] = {2, 1}, cs[1] = {3};
    wf_array *idx[2] = {conf_array(r, rs, 2, WF_DTYPE_I32), conf_array(c, cs, 1, WF_DTYPE_I32)};
    const int axes[2] = {0, 1};
    const int64_t ones[2] = {1, 1};
    wf_array *g = wf_gather(a, idx, 2, axes, ones);
    const int64_t gs[4] = {2, 3, 1, 1};
    double want[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = conf_round_to(v[(int)r[i] * 5 + (int)c[j]], WF_DTYPE_F32);
    conf_check(g, WF_DTYPE_F32, gs, 4, want, 0);
    /* no index arrays: one slice at the origin (a static slice) */
    const int64_t sizes[2] = {2, 3};
    double w2[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            w2[i * 3 + j] = conf_round_to(v[i * 5 + j], WF_DTYPE_F32);
    conf_check(wf_gather(a, NULL, 0, NULL, sizes), WF_DTYPE_F32, sizes, 2, w2, 0);
    /* empty index arrays and empty slices */
    const int64_t zero = 0;
    wf_array *none = wf_array_from_data(NULL, &zero, 1, WF_DTYPE_I64);
    wf_array *e = wf_gather(a, &none, 1, axes, ones);
    const int64_t es[3] = {0, 1, 1};
    conf_check(e, WF_DTYPE_F32, es, 3, want, 0);
    const int64_t nothing[2] = {0, 3};
    conf_check(wf_gather(a, idx, 1, axes, nothing), WF_DTYPE_F32,
               (const int64_t[4]){2, 1, 0, 3}, 4, want, 0);
    free(v);
    wf_scope_end();
}

static void check_eval_fails(wf_array *a, const char *needle)
{
    if (!CHECK_NOT_NULL(a))
        return;
    CHECK_STATUS(wf_eval(&a, 1), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), needle);
    wf_clear_error();
}

static void test_gather_scatter_errors(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {4, 5};
    wf_array *a = wf_zeros(shape, 2, WF_DTYPE_F32);
    const double bad[2] = {1, 4}, neg[2] = {-6, 0}, ok[2] = {0, 3};
    const int64_t two = 2;
    wf_array *ib = conf_array(bad, &two, 1, WF_DTYPE_I32);
    wf_array *in = conf_array(neg, &two, 1, WF_DTYPE_I64);
    wf_array *io = conf_array(ok, &two, 1, WF_DTYPE_I32);
    const int ax0 = 0, ax1 = 1;
    const int64_t ones[2] = {1, 1}, wide[2] = {2, 1};
    check_eval_fails(wf_gather(a, &ib, 1, &ax0, ones), "index 4 is out of range");
    check_eval_fails(wf_gather(a, &in, 1, &ax1, ones), "index -6");
    check_eval_fails(wf_gather(a, &io, 1, &ax0, wide), "leaves no room");
    const int64_t us[3] = {2, 1, 5};
    wf_array *u = wf_ones(us, 3, WF_DTYPE_F32);
    check_eval_fails(wf_scatter(a, &ib, 1, u, &ax0, WF_SCATTER_ADD), "out of range");
    /* construction errors */
    const double fl[2] = {0, 1};
    wf_array *fidx = conf_array(fl, &two, 1, WF_DTYPE_F32);
    conf_check_error(wf_gather(a, &fidx, 1, &ax0, ones), WF_ERR_DTYPE, "wf_gather");
    const int bad_axis = 2, twice[2] = {0, -2};
    conf_check_error(wf_gather(a, &io, 1, &bad_axis, ones), WF_ERR_AXIS, "wf_gather");
    wf_array *pair[2] = {io, io};
    conf_check_error(wf_gather(a, pair, 2, twice, ones), WF_ERR_AXIS, "wf_gather");
    const int64_t too_big[2] = {1, 6};
    conf_check_error(wf_gather(a, &io, 1, &ax0, too_big), WF_ERR_SHAPE, "wf_gather");
    conf_check_error(wf_gather(NULL, &io, 1, &ax0, ones), WF_ERR_NULL_ARGUMENT, "wf_gather");
    const int64_t wrong[2] = {2, 5};
    wf_array *u2 = wf_ones(wrong, 2, WF_DTYPE_F32);
    conf_check_error(wf_scatter(a, &io, 1, u2, &ax0, WF_SCATTER_ADD), WF_ERR_SHAPE,
                     "wf_scatter");
    conf_check_error(wf_scatter(a, &io, 1, u, &ax0, (wf_scatter_mode)9),
                     WF_ERR_INVALID_ARGUMENT, "wf_scatter");
    const int64_t three[3] = {3, 1, 5};
    wf_array *u3 = wf_ones(three, 3, WF_DTYPE_F32);
    conf_check_error(wf_scatter(a, &io, 1, u3, &ax0, WF_SCATTER_ADD), WF_ERR_SHAPE,
                     "wf_scatter");
    wf_scope_end();
}

/* ---------------------------------------------------------------- scatter */

static const char *mode_name(wf_scatter_mode m)
{
    static const char *names[] = {"replace", "add", "prod", "max", "min"};
    return names[m];
}

/* Duplicates: positions 0, 2 and 5 hit the same tuple, 1 and 4 another. */
static void test_scatter_every_dtype_and_mode(void)
{
    const int64_t shape[3] = {4, 3, 5};
    const int64_t ishape[2] = {2, 3};
    for (int t = 0; t < WF_DTYPE_COUNT; t++)
        for (int mode = WF_SCATTER_REPLACE; mode <= WF_SCATTER_MIN; mode++)
            for (int q = 0; q < 3; q++) {
                wf_scope_begin();
                const wf_dtype d = all_dtypes[t], id = index_dtypes[q];
                double *v = conf_integer_values(60, d, 11 + t);
                /* small updates so products stay exact in every dtype */
                double *u = conf_integer_values(2 * 3 * 1 * 3 * 4, d, 19 + t);
                for (int i = 0; i < 72; i++)
                    u[i] = conf_round_to(fmod(u[i], 3), d);
                wf_array *a = (t + mode) % 2 ? conf_strided(v, shape, 3, d)
                                             : conf_array(v, shape, 3, d);
                double i0[6] = {1, 3, 1, 0, 3, 1}, i2[6] = {0, 1, 0, 1, 1, 0};
                if (id != WF_DTYPE_U8)
                    i0[4] = -1;
                wf_array *idx[2] = {conf_array(i0, ishape, 2, id),
                                    conf_array(i2, ishape, 2, id)};
                const int axes[2] = {0, 2};
                const int64_t us[5] = {2, 3, 1, 3, 4}; /* slices (1, 3, 4) */
                wf_array *ua = (t + q) % 2 ? conf_strided(u, us, 5, d) : conf_array(u, us, 5, d);
                ref_indices ix = {2, {0, 2}, {i0, i2}, {2, 3}, 2};
                double *want = ref_scatter(v, shape, 3, &ix, u, us + 2, (wf_scatter_mode)mode, d);
                if (d == WF_DTYPE_C64 && mode != WF_SCATTER_REPLACE) /* complex has no order */
                    conf_check_error(wf_scatter(a, idx, 2, ua, axes, (wf_scatter_mode)mode),
                                     WF_ERR_DTYPE, "complex64 arrays support only WF_SCATTER_REPLACE");
                else if (!conf_check(wf_scatter(a, idx, 2, ua, axes, (wf_scatter_mode)mode), d, shape,
                                3, want, 0))
                    printf("      (%s, %s, indices %s)\n", wf_dtype_name(d),
                           mode_name((wf_scatter_mode)mode), wf_dtype_name(id));
                free(want);
                free(u);
                free(v);
                wf_scope_end();
            }
}

/* Wider slices on an indexed axis overlap: positions combine in order. */
static void test_scatter_overlapping_slices_and_nan(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {6, 2};
    double *v = conf_values(12, -1, 1, 5);
    wf_array *a = conf_array(v, shape, 2, WF_DTYPE_F64);
    const double i0[3] = {1, 2, 1};
    const int64_t three = 3;
    wf_array *idx = conf_array(i0, &three, 1, WF_DTYPE_I32);
    const int64_t us[3] = {3, 3, 2};
    double *u = conf_values(18, -2, 2, 9);
    wf_array *ua = conf_array(u, us, 3, WF_DTYPE_F64);
    const int ax = 0;
    ref_indices ix = {1, {0}, {i0}, {3}, 1};
    for (int mode = WF_SCATTER_REPLACE; mode <= WF_SCATTER_MIN; mode++) {
        double *want = ref_scatter(v, shape, 2, &ix, u, us + 1, (wf_scatter_mode)mode,
                                   WF_DTYPE_F64);
        conf_check(wf_scatter(a, &idx, 1, ua, &ax, (wf_scatter_mode)mode), WF_DTYPE_F64, shape,
                   2, want, 1e-15);
        free(want);
    }
    /* NaN in an update or in a propagates through MAX and MIN */
    const int64_t n4 = 4;
    const double base[4] = {NAN, 1, 2, 3}, upd[3] = {5, NAN, 0};
    const double at[3] = {0, 1, 2};
    wf_array *b = conf_array(base, &n4, 1, WF_DTYPE_F32);
    wf_array *bi = conf_array(at, &three, 1, WF_DTYPE_I64);
    const int64_t bus[2] = {3, 1};
    wf_array *bu = conf_array(upd, bus, 2, WF_DTYPE_F32);
    const double wmax[4] = {NAN, NAN, 2, 3}, wmin[4] = {NAN, NAN, 0, 3};
    conf_check(wf_scatter(b, &bi, 1, bu, &ax, WF_SCATTER_MAX), WF_DTYPE_F32, &n4, 1, wmax, 0);
    conf_check(wf_scatter(b, &bi, 1, bu, &ax, WF_SCATTER_MIN), WF_DTYPE_F32, &n4, 1, wmin, 0);
    /* empty updates leave a as it is */
    const int64_t zero = 0, eus[2] = {0, 1};
    wf_array *none = wf_array_from_data(NULL, &zero, 1, WF_DTYPE_I32);
    wf_array *eu = wf_zeros(eus, 2, WF_DTYPE_F32);
    conf_check(wf_scatter(b, &none, 1, eu, &ax, WF_SCATTER_ADD), WF_DTYPE_F32, &n4, 1, base, 0);
    free(u);
    free(v);
    wf_scope_end();
}

/* Many updates into few rows (an embedding gradient): the parallel grouped
 * path against the reference. */
static void test_scatter_add_large(void)
{
    wf_scope_begin();
    enum { ROWS = 300, COLS = 70, N = 5000 };
    const int64_t shape[2] = {ROWS, COLS};
    double *v = conf_integer_values(ROWS * COLS, WF_DTYPE_F32, 1);
    double *iv = malloc(N * sizeof *iv);
    for (int i = 0; i < N; i++)
        iv[i] = (double)((i * 7919) % ROWS);
    double *u = conf_integer_values((int64_t)N * COLS, WF_DTYPE_F32, 2);
    const int64_t n = N, us[3] = {N, 1, COLS};
    wf_array *a = conf_array(v, shape, 2, WF_DTYPE_F32);
    wf_array *idx = conf_array(iv, &n, 1, WF_DTYPE_I32);
    wf_array *ua = conf_array(u, us, 3, WF_DTYPE_F32);
    const int ax = 0;
    ref_indices ix = {1, {0}, {iv}, {N}, 1};
    double *want = ref_scatter(v, shape, 2, &ix, u, us + 1, WF_SCATTER_ADD, WF_DTYPE_F32);
    conf_check(wf_scatter(a, &idx, 1, ua, &ax, WF_SCATTER_ADD), WF_DTYPE_F32, shape, 2, want, 0);
    /* the same through the gather of those rows */
    const int64_t sizes[2] = {1, COLS};
    const int64_t gs[3] = {N, 1, COLS};
    double *gw = malloc((size_t)N * COLS * sizeof *gw);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < COLS; j++)
            gw[(int64_t)i * COLS + j] = v[(int64_t)iv[i] * COLS + j];
    conf_check(wf_gather(a, &idx, 1, &ax, sizes), WF_DTYPE_F32, gs, 3, gw, 0);
    free(gw);
    free(want);
    free(u);
    free(iv);
    free(v);
    wf_scope_end();
}

/* Gathers whose output passes 16 MiB write whole-line runs around the
 * caches (backend/cpu/scatter.c) and fetch the runs ahead: rows of 256
 * float32 (streamed) and of 1001 (not whole lines: copied as before),
 * against a copy made here. */
static void test_gather_large_outputs(void)
{
    enum { ROWS = 509 };
    static const int64_t widths[2] = {256, 1001}, counts[2] = {16400, 4200};
    for (int w = 0; w < 2; w++) {
        wf_scope_begin();
        const int64_t cols = widths[w], shape[2] = {ROWS, cols}, n = counts[w];
        float *v = malloc((size_t)(ROWS * cols) * sizeof *v);
        int32_t *iv = malloc((size_t)n * sizeof *iv);
        float *want = malloc((size_t)(n * cols) * sizeof *want);
        float *got = malloc((size_t)(n * cols) * sizeof *got);
        for (int64_t i = 0; i < ROWS * cols; i++)
            v[i] = (float)(i % 8191) - 4000.5f;
        for (int64_t i = 0; i < n; i++)
            iv[i] = (int32_t)((i * 7919 + i / 3) % ROWS) - (i % 5 == 0 ? ROWS : 0);
        for (int64_t i = 0; i < n; i++) {
            const int64_t r = iv[i] < 0 ? iv[i] + ROWS : iv[i];
            memcpy(want + i * cols, v + r * cols, (size_t)cols * sizeof *v);
        }
        wf_array *a = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
        wf_array *idx = wf_array_from_data(iv, &n, 1, WF_DTYPE_I32);
        const int ax = 0;
        const int64_t sizes[2] = {1, cols};
        wf_array *g = wf_gather(a, &idx, 1, &ax, sizes);
        CHECK(wf_array_copy_to(g, got, (size_t)(n * cols) * sizeof *got) == WF_OK);
        CHECK(memcmp(got, want, (size_t)(n * cols) * sizeof *got) == 0);
        free(got);
        free(want);
        free(iv);
        free(v);
        wf_scope_end();
    }
}

/* ---------------------------------------------------------------- put_along_axis */

static void test_put_along_axis(void)
{
    for (int t = 0; t < WF_DTYPE_COUNT; t++) {
        wf_scope_begin();
        const wf_dtype d = all_dtypes[t];
        const int64_t shape[2] = {3, 4}, ishape[2] = {3, 2};
        double *v = conf_integer_values(12, d, 4 + t);
        const double iv[6] = {0, 3, 1, 1, 2, -1}; /* row 1 repeats column 1 */
        const double vals[6] = {1, 2, 3, 0, 1, 1};
        wf_array *a = conf_array(v, shape, 2, d);
        wf_array *idx = conf_array(iv, ishape, 2, WF_DTYPE_I32);
        wf_array *va = conf_array(vals, ishape, 2, d);
        for (int mode = WF_SCATTER_REPLACE; mode <= WF_SCATTER_ADD; mode++) {
            double want[12];
            for (int i = 0; i < 12; i++)
                want[i] = v[i];
            for (int r = 0; r < 3; r++)
                for (int j = 0; j < 2; j++) {
                    int c = (int)iv[r * 2 + j];
                    c = c < 0 ? c + 4 : c;
                    want[r * 4 + c] = ref_combine(want[r * 4 + c], conf_round_to(vals[r * 2 + j], d),
                                                  (wf_scatter_mode)mode, d);
                }
            for (int i = 0; i < 12; i++)
                want[i] = conf_round_to(want[i], d);
            if (d == WF_DTYPE_C64 && mode != WF_SCATTER_REPLACE)
                conf_check_error(wf_put_along_axis(a, idx, va, 1, (wf_scatter_mode)mode),
                                 WF_ERR_DTYPE, "complex64 arrays support only WF_SCATTER_REPLACE");
            else
                conf_check(wf_put_along_axis(a, idx, va, 1, (wf_scatter_mode)mode), d, shape, 2,
                           want, 0);
        }
        free(v);
        wf_scope_end();
    }
    wf_scope_begin();
    const int64_t shape[2] = {3, 4}, bad[2] = {3, 5};
    wf_array *a = wf_zeros(shape, 2, WF_DTYPE_F32);
    wf_array *idx = wf_zeros(bad, 2, WF_DTYPE_I32);
    conf_check_error(wf_put_along_axis(a, idx, a, 0, WF_SCATTER_REPLACE), WF_ERR_SHAPE,
                     "wf_put_along_axis");
    wf_scope_end();
}

/* ---------------------------------------------------------------- dynamic slices */

static void test_slice_dynamic(void)
{
    wf_scope_begin();
    const int64_t shape[3] = {4, 6, 3};
    double *v = conf_values(72, -1, 1, 3);
    wf_array *a = conf_strided(v, shape, 3, WF_DTYPE_F32);
    const double st[2] = {1, -4}; /* axis 1 starts at 2 */
    const int64_t two = 2;
    wf_array *start = conf_array(st, &two, 1, WF_DTYPE_I64);
    const int axes[2] = {0, 1};
    const int64_t sizes[3] = {2, 3, 3};
    const int64_t s0[3] = {1, 2, 0}, s1[3] = {3, 5, 3}, step[3] = {1, 1, 1};
    wf_array *got = wf_slice_dynamic(a, start, axes, 2, sizes);
    wf_array *want = wf_slice(a, s0, s1, step);
    double *wv = conf_read(want);
    conf_check(got, WF_DTYPE_F32, sizes, 3, wv, 0);
    free(wv);
    /* update */
    double *uvals = conf_values(18, 5, 6, 8);
    wf_array *upd = conf_array(uvals, sizes, 3, WF_DTYPE_F64); /* converted to float32 */
    wf_array *w2 = wf_slice_update(a, wf_astype(upd, WF_DTYPE_F32), s0, s1, step);
    wv = conf_read(w2);
    conf_check(wf_slice_update_dynamic(a, upd, start, axes, 2), WF_DTYPE_F32, shape, 3, wv, 0);
    free(wv);
    /* out of range at evaluation, bad start at construction */
    const double far[2] = {3, 0};
    wf_array *fs = conf_array(far, &two, 1, WF_DTYPE_I32);
    check_eval_fails(wf_slice_dynamic(a, fs, axes, 2, sizes), "leaves no room");
    check_eval_fails(wf_slice_update_dynamic(a, upd, fs, axes, 2), "leaves no room");
    conf_check_error(wf_slice_dynamic(a, a, axes, 2, sizes), WF_ERR_DTYPE, "wf_slice_dynamic");
    const int64_t three = 3;
    wf_array *s3 = wf_zeros(&three, 1, WF_DTYPE_I32);
    conf_check_error(wf_slice_dynamic(a, s3, axes, 2, sizes), WF_ERR_SHAPE, "wf_slice_dynamic");
    free(uvals);
    free(v);
    wf_scope_end();
}

/* A compiled KV-cache write: the position is an input, so one trace
 * serves every position. */
static wf_status cache_write(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    const int axis = 0;
    out[0] = wf_slice_update_dynamic(in[0], in[1], in[2], &axis, 1);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_slice_update_dynamic_compiled(void)
{
    wf_scope_begin();
    const int64_t cs[2] = {8, 4}, us[2] = {1, 4}, one = 1;
    wf_array *cache = wf_zeros(cs, 2, WF_DTYPE_F32);
    wf_array *row = wf_ones(us, 2, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(cache_write, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    for (int pos = 0; pos < 8; pos += 3) {
        const int32_t p = pos;
        wf_array *start = wf_array_from_data(&p, &one, 1, WF_DTYPE_I32);
        wf_array *in[3] = {cache, row, start}, *out = NULL;
        size_t nout = 1;
        if (!CHECK_OK(wf_fn_call(cf, in, 3, &out, &nout)))
            break;
        double want[32] = {0};
        for (int j = 0; j < 4; j++)
            want[pos * 4 + j] = 1;
        conf_check(out, WF_DTYPE_F32, cs, 2, want, 0);
    }
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cf, &s));
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, 2);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_scope_end();
}

/* ---------------------------------------------------------------- transforms */

static wf_array *idx_i32(const double *v, const int64_t *shape, int ndim)
{
    return conf_array(v, shape, ndim, WF_DTYPE_I32);
}

static wf_array *build_gather(wf_array *const *in)
{
    const double i0[4] = {2, 0, 2, 1}, i1[4] = {1, 0, 1, 3};
    const int64_t four = 4;
    wf_array *idx[2] = {idx_i32(i0, &four, 1), idx_i32(i1, &four, 1)};
    const int axes[2] = {0, 2};
    const int64_t sizes[3] = {1, 3, 2};
    wf_array *g = wf_gather(in[0], idx, 2, axes, sizes);
    wf_release(idx[0]);
    wf_release(idx[1]);
    return g;
}

static wf_scatter_mode case_mode;

static wf_array *build_scatter(wf_array *const *in)
{
    const double i0[4] = {2, 0, 2, 1};
    const int64_t four = 4;
    wf_array *idx = idx_i32(i0, &four, 1);
    const int axis = 0;
    wf_array *s = wf_scatter(in[0], &idx, 1, in[1], &axis, case_mode);
    wf_release(idx);
    return s;
}

static wf_array *build_put_along(wf_array *const *in)
{
    const double iv[6] = {0, 3, 1, 1, 2, 0};
    const int64_t is[2] = {3, 2};
    wf_array *idx = idx_i32(iv, is, 2);
    wf_array *r = wf_put_along_axis(in[0], idx, in[1], 1, WF_SCATTER_ADD);
    wf_release(idx);
    return r;
}

static wf_array *build_slice_dynamic(wf_array *const *in)
{
    const double st[1] = {2};
    const int64_t one = 1;
    wf_array *start = idx_i32(st, &one, 1);
    const int axis = 1;
    const int64_t sizes[2] = {3, 2};
    wf_array *r = wf_slice_dynamic(in[0], start, &axis, 1, sizes);
    wf_release(start);
    return r;
}

/* Argument checks the data tests do not reach, each with its message, and
 * updates of one row broadcast over the index positions. */
static void test_argument_checks(void)
{
    wf_scope_begin();
    const int64_t s23[2] = {2, 3}, two = 2, sizes[2] = {1, 3};
    const double av[6] = {1, 2, 3, 4, 5, 6};
    wf_array *a = conf_array(av, s23, 2, WF_DTYPE_F32);
    wf_array *ix = wf_zeros(&two, 1, WF_DTYPE_I32);
    wf_array *idx[3] = {ix, ix, ix};
    const int axes[3] = {0, 1, 0};
    conf_check_error(wf_gather(a, idx, 3, axes, sizes), WF_ERR_INVALID_ARGUMENT,
                     "wf_gather: 3 index arrays for a rank-2 array");
    conf_check_error(wf_gather(a, NULL, 1, axes, sizes), WF_ERR_NULL_ARGUMENT,
                     "wf_gather: indices or axes is NULL");
    conf_check_error(wf_gather(a, idx, 1, axes, NULL), WF_ERR_NULL_ARGUMENT,
                     "wf_gather: slice_sizes is NULL");
    /* one update row (1, 1, 3) for two positions of row 0: add twice */
    const double rowv[3] = {10, 20, 30};
    const int64_t us[3] = {1, 1, 3};
    const double w[6] = {21, 42, 63, 4, 5, 6};
    conf_check(wf_scatter(a, idx, 1, conf_array(rowv, us, 3, WF_DTYPE_F32), axes,
                          WF_SCATTER_ADD),
               WF_DTYPE_F32, s23, 2, w, 0);

    const int64_t s13[2] = {1, 3}, s33[2] = {3, 3}, s03[2] = {0, 3};
    wf_array *i33 = wf_zeros(s33, 2, WF_DTYPE_I32), *vals = wf_ones(s33, 2, WF_DTYPE_F32);
    conf_check_error(wf_put_along_axis(a, ix, a, 1, WF_SCATTER_REPLACE), WF_ERR_SHAPE,
                     "wf_put_along_axis: indices of shape (2,) and array of shape (2, 3) differ "
                     "in rank");
    conf_check_error(wf_put_along_axis(wf_zeros(s13, 2, WF_DTYPE_F32), i33, vals, 1,
                                       WF_SCATTER_REPLACE),
                     WF_ERR_SHAPE, "index past a's shape (1, 3)");
    wf_array *empty = wf_zeros(s03, 2, WF_DTYPE_F32);
    wf_array *same = wf_put_along_axis(empty, wf_zeros(s03, 2, WF_DTYPE_I32), empty, 1,
                                       WF_SCATTER_ADD);
    CHECK(same == empty); /* nothing to put into: a itself */

    wf_array *start = wf_zeros(&two, 1, WF_DTYPE_I32);
    conf_check_error(wf_slice_dynamic(a, start, axes, 3, sizes), WF_ERR_INVALID_ARGUMENT,
                     "wf_slice_dynamic: 3 axes for a rank-2 array");
    conf_check_error(wf_slice_update_dynamic(a, a, start, axes, -1), WF_ERR_INVALID_ARGUMENT,
                     "wf_slice_update_dynamic: -1 axes for a rank-2 array");
    wf_scope_end();
}

/* Indices made from a float input (truncated), so vmap can batch them. */
static wf_array *build_gather_batched_index(wf_array *const *in)
{
    wf_array *idx = wf_astype(in[1], WF_DTYPE_I32);
    const int axis = 1;
    const int64_t sizes[3] = {3, 1, 5};
    wf_array *g = wf_gather(in[0], &idx, 1, &axis, sizes);
    wf_release(idx);
    return g;
}

static wf_array *build_scatter_batched_index(wf_array *const *in)
{
    wf_array *idx = wf_astype(in[2], WF_DTYPE_I32);
    const int axis = 0;
    wf_array *s = wf_scatter(in[0], &idx, 1, in[1], &axis, case_mode);
    wf_release(idx);
    return s;
}

static void check_case(const tu_case *c)
{
    wf_scope_begin();
    wf_array *in[TU_MAX_IN], *t[TU_MAX_IN];
    for (int i = 0; i < c->nin; i++) {
        in[i] = tu_input(c->shapes[i], c->ndims[i], c->lo, c->hi, 40 + (uint32_t)i, i == 0);
        t[i] = tu_input(c->shapes[i], c->ndims[i], -1, 1, 50 + (uint32_t)i, false);
    }
    wf_array *y = c->build(in);
    if (CHECK_NOT_NULL(y)) {
        wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, 60, false);
        if (!tu_check_vjp(c, in, u, 1e-6, NULL) || !tu_check_jvp(c, in, t, 1e-6, NULL))
            printf("      (%s)\n", c->name);
        int axes[TU_MAX_IN];
        for (int i = 0; i < c->nin; i++)
            axes[i] = 0;
        tu_check_vmap(c, axes, 3, 70);
        if (c->nin > 1) {
            axes[0] = WF_VMAP_NOT_MAPPED;
            tu_check_vmap(c, axes, 3, 71);
            axes[0] = 0;
            axes[1] = WF_VMAP_NOT_MAPPED;
            tu_check_vmap(c, axes, 2, 72);
        }
    }
    wf_scope_end();
}

static void test_transforms(void)
{
    const tu_case gather = {"gather", build_gather, 1, {3}, {{3, 4, 5}}, -1, 1};
    check_case(&gather);
    const tu_case put = {"put_along_axis", build_put_along, 2, {2, 2}, {{3, 4}, {3, 2}}, -1, 1};
    check_case(&put);
    const tu_case dyn = {"slice_dynamic", build_slice_dynamic, 1, {2}, {{3, 6}}, -1, 1};
    check_case(&dyn);
    /* values far apart so MAX / MIN have no ties under finite differences */
    static const wf_scatter_mode modes[4] = {WF_SCATTER_REPLACE, WF_SCATTER_ADD, WF_SCATTER_MAX,
                                             WF_SCATTER_MIN};
    for (int m = 0; m < 4; m++) {
        case_mode = modes[m];
        char name[32];
        snprintf(name, sizeof name, "scatter %s", mode_name(case_mode));
        const tu_case sc = {name, build_scatter, 2, {2, 3}, {{3, 5}, {4, 1, 5}}, -3, 3};
        check_case(&sc);
    }
    /* index arrays batched too (values in [0, 3): valid indices once truncated) */
    const tu_case gb = {"gather batched index", build_gather_batched_index, 2, {3, 1},
                        {{3, 4, 5}, {4}}, 0, 2.99};
    check_case(&gb);
    for (int m = 0; m < 2; m++) {
        case_mode = modes[m];
        const tu_case sb = {"scatter batched index", build_scatter_batched_index, 3, {2, 3, 1},
                            {{3, 5}, {4, 1, 5}, {4}}, 0, 2.99};
        check_case(&sb);
    }
    /* PROD has no derivative: an error, not a wrong answer */
    case_mode = WF_SCATTER_PROD;
    const tu_case prod = {"scatter prod", build_scatter, 2, {2, 3}, {{3, 5}, {4, 1, 5}}, -3, 3};
    wf_scope_begin();
    wf_array *in[2] = {tu_input(prod.shapes[0], 2, -1, 1, 1, false),
                       tu_input(prod.shapes[1], 3, -1, 1, 2, false)};
    wf_array *u = wf_ones(prod.shapes[0], 2, WF_DTYPE_F64), *g[2] = {NULL, NULL};
    wf_fn *fn = tu_case_fn(&prod);
    CHECK_STATUS(wf_vjp(fn, in, 2, &u, 1, NULL, g), WF_ERR_UNSUPPORTED);
    wf_clear_error();
    wf_fn_release(fn);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_gather_every_dtype);
    RUN_TEST(test_gather_broadcast_and_edges);
    RUN_TEST(test_gather_scatter_errors);
    RUN_TEST(test_scatter_every_dtype_and_mode);
    RUN_TEST(test_scatter_overlapping_slices_and_nan);
    RUN_TEST(test_scatter_add_large);
    RUN_TEST(test_gather_large_outputs);
    RUN_TEST(test_put_along_axis);
    RUN_TEST(test_argument_checks);
    RUN_TEST(test_slice_dynamic);
    RUN_TEST(test_slice_update_dynamic_compiled);
    RUN_TEST(test_transforms);
    return TEST_SUMMARY();
}
