/*
 * The floating-point quantization modes (weft.h: WF_QUANT_MXFP4, _MXFP8,
 * _NVFP4), against references written here from the formats' definitions:
 *  - quantize (float32): scales and codes equal a direct search (nearest
 *    fp4 value with ties to the smaller magnitude, nearest e4m3 code with
 *    ties to the even code, e8m0 = smallest power of two >= max|w| / max
 *    element), groups with ties, zeros and saturating values included;
 *  - dequantize = element value * scale, exactly, as float32;
 *  - quantized_matmul: the bits of wf_matmul on the dequantized float32
 *    matrix (every ISA variant, 1 .. 17 rows, both transpose flags) and
 *    within float32 rounding of a float64 product;
 *  - gather_qmm equals per-expert quantized_matmul; the vjp of x equals the
 *    dense one; bad arguments give errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "fp8_ref.h"
#include "harness.h"
#include "quant_ref.h"

static const wf_quant_mode fp_modes[] = {WF_QUANT_MXFP4, WF_QUANT_MXFP8, WF_QUANT_NVFP4};

static int mode_group(wf_quant_mode m) { return m == WF_QUANT_NVFP4 ? 16 : 32; }
static int mode_bits(wf_quant_mode m) { return m == WF_QUANT_MXFP8 ? 8 : 4; }
static const char *mode_name(wf_quant_mode m)
{
    return m == WF_QUANT_MXFP4 ? "mxfp4" : m == WF_QUANT_MXFP8 ? "mxfp8" : "nvfp4";
}

/* ---------------------------------------------------------------- reference formats */

static const float fp4_magnitudes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

/* Nearest fp4 code; a tie goes to the smaller magnitude; zero is +0. */
static uint8_t fp4_nearest(double v)
{
    const double a = fabs(v);
    int best = 0;
    for (int c = 1; c < 8; c++)
        if (fabs(a - fp4_magnitudes[c]) < fabs(a - fp4_magnitudes[best]))
            best = c;
    return (uint8_t)(best | (best && v < 0 ? 8 : 0));
}

static double fp4_value(uint8_t c) { return (c & 8 ? -1 : 1) * fp4_magnitudes[c & 7]; }

/* Scale byte and decoded scale of one group of float32 weights. */
static uint8_t ref_scale(wf_quant_mode mode, const float *w, int n, double *decoded)
{
    float amax = 0;
    for (int j = 0; j < n; j++)
        amax = fmaxf(amax, fabsf(w[j]));
    const float s = amax / (mode == WF_QUANT_MXFP8 ? 448.0f : 6.0f);
    if (mode == WF_QUANT_NVFP4) {
        const uint8_t c = fp8_e4m3_nearest(s);
        *decoded = fp8_e4m3_value(c);
        return c;
    }
    int e = 0;
    if (s > 0) {
        e = -127;
        while (ldexp(1.0, e) < s)
            e++;
    }
    *decoded = ldexp(1.0, e);
    return (uint8_t)(e + 127);
}

static uint8_t ref_code(wf_quant_mode mode, float w, double scale)
{
    const double q = (float)(w / (float)scale); /* the quotient in float32 */
    return mode == WF_QUANT_MXFP8 ? fp8_e4m3_nearest(q) : fp4_nearest(q);
}

static double ref_value(wf_quant_mode mode, uint8_t code)
{
    return mode == WF_QUANT_MXFP8 ? fp8_e4m3_value(code) : fp4_value(code);
}

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

/* Weights whose groups span magnitudes 2^-20 .. 2^20, with a group of
 * zeros and groups of exact ties and saturating values. */
static float *weights(int64_t rows, int64_t cols, int gs)
{
    float *w = malloc((size_t)(rows * cols) * sizeof *w);
    for (int64_t i = 0; i < rows * cols; i++) {
        const int64_t g = i / gs;
        w[i] = quant_rnd(&rng_state) * ldexpf(1.0f, (int)(g * 7 % 41) - 20);
    }
    for (int j = 0; j < gs && rows * cols >= 4 * gs; j++) {
        w[j] = 0;                                     /* a group of zeros */
        w[gs + j] = (j % 2 ? -1 : 1) * (0.25f + j % 4 * 1.0f); /* ties: .25, 1.25, ... */
        w[2 * gs + j] = j == 0 ? 6 : (j % 3 - 1) * 5.0f;         /* 5: between 4 and 6 */
        w[3 * gs + j] = j == 0 ? 448 : 0.75f * (float)(j % 5);
    }
    return w;
}

typedef struct fpmat {
    wf_array *q, *s;
    int64_t rows, cols;
} fpmat;

static bool fpmat_make(fpmat *m, wf_quant_mode mode, int64_t rows, int64_t cols)
{
    float *v = weights(rows, cols, mode_group(mode));
    const int64_t shape[2] = {rows, cols};
    wf_array *w = wf_array_from_data(v, shape, 2, WF_DTYPE_F32), *b = NULL;
    free(v);
    m->rows = rows, m->cols = cols;
    const bool ok = CHECK_OK(wf_quantize(w, mode_group(mode), mode_bits(mode), mode, &m->q, &m->s, &b));
    CHECK(b == NULL);
    wf_release(w);
    return ok;
}

static void fpmat_free(fpmat *m) { wf_release(m->q), wf_release(m->s); }

/* ---------------------------------------------------------------- tests */

static void test_quantize_and_dequantize_match_reference(void)
{
    for (size_t mi = 0; mi < 3; mi++) {
        const wf_quant_mode mode = fp_modes[mi];
        const int gs = mode_group(mode), bits = mode_bits(mode);
        const int64_t rows = 6, cols = 8 * gs;
        float *v = weights(rows, cols, gs);
        const int64_t shape[2] = {rows, cols};
        wf_array *w = wf_array_from_data(v, shape, 2, WF_DTYPE_F32), *q, *s, *b;
        if (!CHECK_OK(wf_quantize(w, gs, bits, mode, &q, &s, &b)))
            continue;
        CHECK(b == NULL);
        CHECK_EQ_INT(wf_array_dtype(s), WF_DTYPE_U8);
        CHECK_EQ_INT(wf_array_shape(q)[1], cols * bits / 32);
        wf_array *d = wf_dequantize_as(q, s, NULL, gs, bits, mode, WF_DTYPE_F32);
        uint32_t *codes = quant_host_copy(q, 4);
        uint8_t *scales = quant_host_copy(s, 1);
        float *deq = quant_host_copy(d, 4);
        int64_t bad_scales = 0, bad_codes = 0, bad_values = 0;
        for (int64_t g = 0; codes && scales && deq && g < rows * cols / gs; g++) {
            double scale;
            bad_scales += ref_scale(mode, v + g * gs, gs, &scale) != scales[g];
            const int64_t r = g / (cols / gs);
            for (int j = 0; j < gs; j++) {
                const int64_t col = g % (cols / gs) * gs + j;
                const uint8_t c = quant_code_at(codes + r * cols * bits / 32, col, bits);
                bad_codes += c != ref_code(mode, v[g * gs + j], scale);
                bad_values += (double)deq[g * gs + j] != ref_value(mode, c) * scale;
            }
        }
        if (!CHECK_EQ_INT(bad_scales, 0) + !CHECK_EQ_INT(bad_codes, 0) + !CHECK_EQ_INT(bad_values, 0))
            printf("      mode %s\n", mode_name(mode));
        /* the default result is bfloat16, MLX's */
        wf_array *d16 = wf_dequantize(q, s, NULL, gs, bits, mode);
        CHECK_EQ_INT(wf_array_dtype(d16), WF_DTYPE_BF16);
        free(v), free(codes), free(scales), free(deq);
        wf_release(w), wf_release(q), wf_release(s), wf_release(d), wf_release(d16);
    }
}

static wf_array *random_x(int64_t rows, int64_t k)
{
    float *v = malloc((size_t)(rows * k) * sizeof *v);
    for (int64_t i = 0; i < rows * k; i++)
        v[i] = quant_rnd(&rng_state);
    const int64_t shape[2] = {rows, k};
    wf_array *x = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    free(v);
    return x;
}

/* x @ W.T (transpose) or x @ W through the dequantized float32 matrix. */
static wf_array *dense_product(wf_array *x, const fpmat *m, wf_quant_mode mode, bool transpose)
{
    wf_array *w = wf_dequantize_as(m->q, m->s, NULL, mode_group(mode), mode_bits(mode), mode,
                                   WF_DTYPE_F32);
    return wf_matmul(x, transpose ? wf_swapaxes(w, 0, 1) : w);
}

static double max_rel_diff(wf_array *a, wf_array *b)
{
    wf_array *d = wf_max(wf_abs(wf_subtract(a, b)), NULL, 0, false);
    wf_array *m = wf_max(wf_abs(b), NULL, 0, false);
    double dv = 1, mv = 1;
    CHECK_OK(wf_array_item(d, &dv));
    CHECK_OK(wf_array_item(m, &mv));
    return dv / (mv > 0 ? mv : 1);
}

static void test_products_have_dense_bits(void)
{
    static const int64_t row_counts[] = {1, 2, 5, 17};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t mi = 0; mi < 3; mi++)
            for (int t = 0; t < 2; t++) {
                const wf_quant_mode mode = fp_modes[mi];
                const int64_t n = t ? 45 : 64, kdim = 576; /* 3 K blocks */
                fpmat m;
                if (!(t ? fpmat_make(&m, mode, n, kdim) : fpmat_make(&m, mode, kdim, n)))
                    continue;
                for (size_t r = 0; r < sizeof row_counts / sizeof *row_counts; r++) {
                    wf_array *x = random_x(row_counts[r], kdim);
                    wf_array *y = wf_quantized_matmul_mode(x, m.q, m.s, NULL, t, mode_group(mode),
                                                           mode_bits(mode), mode);
                    wf_array *ref = dense_product(x, &m, mode, t);
                    if (!CHECK(quant_same_bits(y, ref)))
                        printf("      isa %s mode %s transpose %d rows %lld\n",
                               wf__gemm_isa_name(isa), mode_name(mode), t,
                               (long long)row_counts[r]);
                    /* and near the float64 product */
                    wf_array *ref64 = wf_matmul(wf_astype(x, WF_DTYPE_F64),
                                                wf_astype(t ? wf_swapaxes(wf_dequantize_as(m.q, m.s, NULL, mode_group(mode), mode_bits(mode), mode, WF_DTYPE_F32), 0, 1)
                                                            : wf_dequantize_as(m.q, m.s, NULL, mode_group(mode), mode_bits(mode), mode, WF_DTYPE_F32),
                                                          WF_DTYPE_F64));
                    CHECK(max_rel_diff(wf_astype(y, WF_DTYPE_F64), ref64) < 1e-5);
                    wf_release(x), wf_release(y), wf_release(ref);
                }
                fpmat_free(&m);
            }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

static void test_gather_qmm(void)
{
    const wf_quant_mode mode = WF_QUANT_MXFP4;
    const int64_t experts = 3, n = 20, kdim = 64;
    float *v = weights(experts * n, kdim, 32);
    const int64_t shape[3] = {experts, n, kdim};
    wf_array *w = wf_array_from_data(v, shape, 3, WF_DTYPE_F32), *q, *s, *b;
    free(v);
    if (!CHECK_OK(wf_quantize(w, 32, 4, mode, &q, &s, &b)))
        return;
    const int64_t xs[3] = {2, 1, kdim};
    wf_array *x = wf_reshape(random_x(2, kdim), xs, 3);
    const int32_t lhs_v[4] = {0, 1, 1, 0}, rhs_v[4] = {2, 0, 1, 2};
    const int64_t four = 4;
    wf_array *lhs = wf_array_from_data(lhs_v, &four, 1, WF_DTYPE_I32);
    wf_array *rhs = wf_array_from_data(rhs_v, &four, 1, WF_DTYPE_I32);
    wf_array *y = wf_gather_qmm_mode(x, q, s, NULL, lhs, rhs, true, 32, 4, mode);
    if (CHECK_NOT_NULL(y)) {
        CHECK_EQ_INT(wf_array_ndim(y), 3);
        for (int i = 0; i < 4; i++) {
            const int64_t e = rhs_v[i];
            wf_array *qi = wf_take(q, wf_array_from_data(&e, (int64_t[]){1}, 1, WF_DTYPE_I64), 0);
            wf_array *si = wf_take(s, wf_array_from_data(&e, (int64_t[]){1}, 1, WF_DTYPE_I64), 0);
            wf_array *xi = wf_take(x, wf_array_from_data(&(int64_t){lhs_v[i]}, (int64_t[]){1}, 1,
                                                         WF_DTYPE_I64), 0);
            wf_array *want = wf_quantized_matmul_mode(xi, qi, si, NULL, true, 32, 4, mode);
            wf_array *got = wf_take(y, wf_array_from_data(&(int64_t){i}, (int64_t[]){1}, 1,
                                                          WF_DTYPE_I64), 0);
            CHECK(quant_same_bits(got, want));
        }
    }
    wf_release(w), wf_release(q), wf_release(s), wf_release(x), wf_release(lhs), wf_release(rhs),
        wf_release(y);
}

typedef struct closure {
    wf_quant_mode mode;
    wf_array *q, *s;
} closure;

static wf_status qmm_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)n;
    const closure *c = payload;
    wf_array *y = wf_quantized_matmul_mode(in[0], c->q, c->s, NULL, true, mode_group(c->mode),
                                           mode_bits(c->mode), c->mode);
    out[0] = wf_sum(wf_multiply(y, y), NULL, 0, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status dense_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const closure *c = payload;
    wf_array *w = wf_dequantize_as(c->q, c->s, NULL, mode_group(c->mode), mode_bits(c->mode),
                                   c->mode, WF_DTYPE_F32);
    wf_array *y = wf_matmul(in[0], wf_swapaxes(w, 0, 1));
    out[0] = wf_sum(wf_multiply(y, y), NULL, 0, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_vjp_of_x(void)
{
    for (size_t mi = 0; mi < 3; mi++) {
        closure c = {fp_modes[mi], NULL, NULL};
        fpmat m;
        if (!fpmat_make(&m, c.mode, 24, 64))
            continue;
        c.q = m.q, c.s = m.s;
        wf_array *x = random_x(3, 64);
        const int argnum = 0;
        wf_fn *f = wf_fn_new(qmm_loss, &c, NULL), *fd = wf_fn_new(dense_loss, &c, NULL);
        wf_fn *g = wf_grad(f, &argnum, 1), *gd = wf_grad(fd, &argnum, 1);
        wf_array *got = NULL, *want = NULL;
        size_t n1 = 1, n2 = 1;
        if (CHECK_OK(wf_fn_call(g, &x, 1, &got, &n1)) && CHECK_OK(wf_fn_call(gd, &x, 1, &want, &n2)))
            CHECK(max_rel_diff(got, want) < 1e-5);
        wf_release(got), wf_release(want), wf_release(x);
        wf_fn_release(f), wf_fn_release(fd), wf_fn_release(g), wf_fn_release(gd);
        fpmat_free(&m);
    }
}

static void test_bad_arguments(void)
{
    const int64_t shape[2] = {4, 64};
    wf_array *w = wf_zeros(shape, 2, WF_DTYPE_F32), *q = NULL, *s = NULL, *b = NULL;
    CHECK_EQ_INT(wf_quantize(w, 64, 4, WF_QUANT_MXFP4, &q, &s, &b), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(wf_quantize(w, 32, 8, WF_QUANT_NVFP4, &q, &s, &b), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(wf_quantize(w, 32, 4, (wf_quant_mode)9, &q, &s, &b), WF_ERR_INVALID_ARGUMENT);
    if (CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_MXFP4, &q, &s, &b))) {
        wf_array *fs = wf_astype(s, WF_DTYPE_F32);
        CHECK_NULL_WITH(wf_dequantize(q, s, fs, 32, 4, WF_QUANT_MXFP4), WF_ERR_INVALID_ARGUMENT);
        CHECK_NULL_WITH(wf_dequantize(q, s, NULL, 32, 4, WF_QUANT_AFFINE), WF_ERR_NULL_ARGUMENT);
        CHECK_NULL_WITH(wf_dequantize(q, fs, NULL, 32, 4, WF_QUANT_MXFP4), WF_ERR_DTYPE);
        CHECK_NULL_WITH(wf_dequantize_as(q, s, NULL, 32, 4, WF_QUANT_MXFP4, WF_DTYPE_I32),
                        WF_ERR_DTYPE);
        CHECK_NULL_WITH(wf_dequantize(q, s, NULL, 16, 4, WF_QUANT_NVFP4), WF_ERR_SHAPE);
        wf_array *x = wf_zeros((int64_t[]){2, 64}, 2, WF_DTYPE_F32);
        CHECK_NULL_WITH(wf_quantized_matmul_mode(x, q, s, fs, true, 32, 4, WF_QUANT_MXFP4),
                        WF_ERR_INVALID_ARGUMENT);
        wf_array *x2 = wf_zeros((int64_t[]){2, 32}, 2, WF_DTYPE_F32);
        CHECK_NULL_WITH(wf_quantized_matmul_mode(x2, q, s, NULL, true, 32, 4, WF_QUANT_MXFP4),
                        WF_ERR_SHAPE);
        wf_release(fs), wf_release(x), wf_release(x2);
    }
    wf_release(w), wf_release(q), wf_release(s);
}

int main(void)
{
    RUN_SCOPED(test_quantize_and_dequantize_match_reference);
    RUN_SCOPED(test_products_have_dense_bits);
    RUN_SCOPED(test_gather_qmm);
    RUN_SCOPED(test_vjp_of_x);
    RUN_SCOPED(test_bad_arguments);
    return TEST_SUMMARY();
}
