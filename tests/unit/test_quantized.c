/*
 * Quantization (weft.h's quantization section):
 *  - quantize / dequantize round trips for every bit width and group size:
 *    codes decoded here from the bit stream are in range, dequantize is
 *    code * scale + bias, and every element is within half a step of w;
 *  - quantized_matmul against a float64 reference (dequantize in double,
 *    then multiply) for every bits x group size x transpose, ragged shapes;
 *  - the same bits as wf_matmul on the dequantized matrix, for 1 .. 5, 17
 *    and 40 rows, on every ISA variant this CPU has (the matrix-vector
 *    kernels and the GEMM path agree), with strided operands; 2-bit codes
 *    for every group size, ragged shapes and K blocks that split a word;
 *    K of one group to many K blocks (summed in pairs, a block left over,
 *    a shorter last one), 1 .. 4 rows;
 *  - batched W, gather_qmm against per-batch products;
 *  - vjp (x, scales, biases) and vmap;
 *  - bad arguments give errors;
 *  - the same bits for WEFT_NUM_THREADS = 1, 2, 3, 5 (child processes);
 *  - the matrix-vector kernels' interleaved copies of a weight (AVX2 and
 *    AVX-512): made at its second product, the same bits (scales out of
 *    the in-place range too), freed with it, none where unused, one set
 *    for racing threads.
 *
 *   test_quantized            the tests
 *   WEFT_QUANT_CHILD=1 test_quantized   (internal) prints a hash of products
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/quantized.h"
#include "child_process.h"
#include "harness.h"
#include "quant_ref.h"

static const int all_bits[] = {2, 3, 4, 5, 6, 8};
static const int all_groups[] = {32, 64, 128};

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static wf_array *random_f32(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = quant_rnd(&rng_state) * (1.0f + (float)(i % 7));
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
    free(v);
    return a;
}

/* Dense W (rows x cols) from codes, scales, biases, in double. */
static double *dequantize_ref(const uint32_t *codes, const float *s, const float *b, int64_t rows,
                              int64_t cols, int gs, int bits)
{
    double *w = malloc((size_t)(rows * cols) * sizeof *w);
    const int64_t words = cols * bits / 32, groups = cols / gs;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            w[r * cols + c] = (double)quant_code_at(codes + r * words, c, bits) *
                                  (double)s[r * groups + c / gs] +
                              (double)b[r * groups + c / gs];
    return w;
}

/* ---------------------------------------------------------------- quantize */

static void round_trip(int rows, int gs, int bits)
{
    const int64_t k = gs * 3, shape[2] = {rows, k};
    wf_array *w = random_f32(shape, 2), *q, *s, *b;
    if (!CHECK_OK(wf_quantize(w, gs, bits, WF_QUANT_AFFINE, &q, &s, &b)))
        return;
    CHECK_EQ_INT(wf_array_dtype(q), WF_DTYPE_U32);
    CHECK_EQ_INT(wf_array_shape(q)[1], k * bits / 32);
    CHECK_EQ_INT(wf_array_shape(s)[1], k / gs);
    wf_array *deq = wf_dequantize(q, s, b, gs, bits, WF_QUANT_AFFINE);
    float *wv = quant_host_copy(w, 4), *sv = quant_host_copy(s, 4), *bv = quant_host_copy(b, 4),
          *dv = quant_host_copy(deq, 4);
    uint32_t *qv = quant_host_copy(q, 4);
    int bad_code = 0, bad_deq = 0, bad_err = 0;
    for (int64_t r = 0; r < rows && wv && qv && dv; r++)
        for (int64_t c = 0; c < k; c++) {
            const uint32_t code = quant_code_at(qv + r * (k * bits / 32), c, bits);
            const float sc = sv[r * (k / gs) + c / gs], bi = bv[r * (k / gs) + c / gs];
            bad_code += code >= (1u << bits);
            bad_deq += dv[r * k + c] != (float)code * sc + bi;
            /* Half a step, plus what the far end of the group loses when
             * the scale is fitted to the edge: edge / rint(edge / scale)
             * moves the scale by up to half a step over q0 = edge / scale
             * steps, so the other end may be clamped by n_bins / 2 q0
             * steps. */
            const double q0 = fabs((double)bi / sc), n_bins = (double)((1 << bits) - 1);
            const double tol = fabs(sc) * (0.5 + 0.5 * n_bins / (q0 > 1 ? q0 : 1)) * 1.001 + 1e-6;
            bad_err += fabs((double)dv[r * k + c] - wv[r * k + c]) > tol;
        }
    CHECK_EQ_INT(bad_code, 0);
    CHECK_EQ_INT(bad_deq, 0);
    if (!CHECK_EQ_INT(bad_err, 0))
        printf("      group %d bits %d\n", gs, bits);
    free(wv), free(sv), free(bv), free(dv), free(qv);
    wf_release(w), wf_release(q), wf_release(s), wf_release(b), wf_release(deq);
}

static void test_round_trip_every_width(void)
{
    for (size_t i = 0; i < sizeof all_bits / sizeof *all_bits; i++)
        for (size_t g = 0; g < 3; g++)
            round_trip(5, all_groups[g], all_bits[i]);
}

/* float16 / bfloat16 weights: scales and biases of w's dtype, dequantize
 * in it. */
static void test_half_weights(void)
{
    const int64_t shape[2] = {3, 64};
    const wf_dtype types[2] = {WF_DTYPE_F16, WF_DTYPE_BF16};
    for (int t = 0; t < 2; t++) {
        wf_array *w32 = random_f32(shape, 2), *w = wf_astype(w32, types[t]), *q, *s, *b;
        if (!CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b)))
            continue;
        CHECK_EQ_INT(wf_array_dtype(s), types[t]);
        wf_array *d = wf_dequantize(q, s, b, 32, 4, WF_QUANT_AFFINE);
        CHECK_EQ_INT(wf_array_dtype(d), types[t]);
        wf_array *err = wf_max(wf_abs(wf_subtract(wf_astype(d, WF_DTYPE_F32), w32)), NULL, 0, false);
        double e = 0;
        CHECK_OK(wf_array_item(err, &e));
        CHECK(e < 0.5); /* 4 bits over a range of at most 2 * 7 */
        wf_release(w32), wf_release(w), wf_release(q), wf_release(s), wf_release(b);
        wf_release(d), wf_release(err);
    }
}

/* ---------------------------------------------------------------- products */

typedef struct qmat {
    wf_array *q, *s, *b;
    double *dense; /* stored rows x cols, double */
    int64_t rows, cols;
} qmat;

static bool qmat_make(qmat *m, int64_t rows, int64_t cols, int gs, int bits)
{
    const int64_t shape[2] = {rows, cols};
    wf_array *w = random_f32(shape, 2);
    m->rows = rows;
    m->cols = cols;
    m->dense = NULL;
    bool ok = CHECK_OK(wf_quantize(w, gs, bits, WF_QUANT_AFFINE, &m->q, &m->s, &m->b));
    wf_release(w);
    if (!ok)
        return false;
    uint32_t *qv = quant_host_copy(m->q, 4);
    float *sv = quant_host_copy(m->s, 4), *bv = quant_host_copy(m->b, 4);
    if (qv && sv && bv)
        m->dense = dequantize_ref(qv, sv, bv, rows, cols, gs, bits);
    free(qv), free(sv), free(bv);
    return m->dense != NULL;
}

static void qmat_free(qmat *m)
{
    wf_release(m->q), wf_release(m->s), wf_release(m->b);
    free(m->dense);
}

/* qmm(x, W) against sum_k x[i][k] W(k, j) in double. */
static void check_against_reference(int64_t m, int64_t n, int64_t kdim, int gs, int bits,
                                    bool transpose)
{
    qmat w;
    if (!(transpose ? qmat_make(&w, n, kdim, gs, bits) : qmat_make(&w, kdim, n, gs, bits)))
        return;
    const int64_t xs[2] = {m, kdim};
    wf_array *x = random_f32(xs, 2);
    wf_array *y = wf_quantized_matmul(x, w.q, w.s, w.b, transpose, gs, bits);
    float *xv = quant_host_copy(x, 4), *yv = y ? quant_host_copy(y, 4) : NULL;
    int bad = 0;
    for (int64_t i = 0; i < m && xv && yv; i++)
        for (int64_t j = 0; j < n; j++) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < kdim; k++) {
                const double wv = transpose ? w.dense[j * kdim + k] : w.dense[k * n + j];
                sum += xv[i * kdim + k] * wv;
                mag += fabs(xv[i * kdim + k] * wv);
            }
            /* each product and dequantized value rounds once to float32 */
            bad += fabs(yv[i * n + j] - sum) > mag * (double)kdim * 1.2e-7 + 1e-6;
        }
    if (!CHECK_EQ_INT(bad, 0))
        printf("      m %lld n %lld k %lld group %d bits %d transpose %d\n", (long long)m,
               (long long)n, (long long)kdim, gs, bits, transpose);
    free(xv), free(yv);
    wf_release(x), wf_release(y);
    qmat_free(&w);
}

static void test_against_float64_reference(void)
{
    for (size_t i = 0; i < sizeof all_bits / sizeof *all_bits; i++)
        for (size_t g = 0; g < 3; g++)
            for (int t = 0; t < 2; t++) {
                const int gs = all_groups[g];
                /* stored rows are packed: W (n, k) or (k, n) */
                check_against_reference(1, t ? 37 : gs, gs * 3, gs, all_bits[i], t);
                check_against_reference(6, t ? 21 : 2 * gs, gs * 2, gs, all_bits[i], t);
            }
}

/* wf_matmul(x, W.T or W) on the dequantized float32 matrix. */
static wf_array *dense_product(wf_array *x, const qmat *w, int gs, int bits, bool transpose)
{
    wf_array *d = wf_dequantize(w->q, w->s, w->b, gs, bits, WF_QUANT_AFFINE);
    wf_array *y = wf_matmul(x, transpose ? wf_swapaxes(d, 0, 1) : d);
    wf_release(d);
    return y;
}

static void test_same_bits_as_dense_matmul_every_variant(void)
{
#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    static const int64_t row_counts[] = {1, 3, 5, 17};
    static const int bits_list[] = {4, 3};
#else
    static const int64_t row_counts[] = {1, 2, 3, 4, 5, 16, 17, 40};
    static const int bits_list[] = {2, 4, 8, 3};
#endif
    const size_t nbits = sizeof bits_list / sizeof bits_list[0];
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t bi = 0; bi < nbits; bi++)
            for (int t = 0; t < 2; t++) {
                const int bits = bits_list[bi], gs = 64;
                /* 3 K blocks; ragged lanes where n is free (transpose) */
                const int64_t n = t ? 45 : 128, kdim = 576;
                qmat w;
                if (!(t ? qmat_make(&w, n, kdim, gs, bits) : qmat_make(&w, kdim, n, gs, bits)))
                    continue;
                for (size_t r = 0; r < sizeof row_counts / sizeof *row_counts; r++) {
                    const int64_t xs[2] = {row_counts[r], kdim};
                    wf_array *x = random_f32(xs, 2);
                    wf_array *y = wf_quantized_matmul(x, w.q, w.s, w.b, t, gs, bits);
                    wf_array *ref = dense_product(x, &w, gs, bits, t);
                    if (!CHECK(quant_same_bits(y, ref)))
                        printf("      isa %s bits %d transpose %d rows %lld\n",
                               wf__gemm_isa_name(isa), bits, t, (long long)row_counts[r]);
                    wf_release(x), wf_release(y), wf_release(ref);
                }
                qmat_free(&w);
            }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* 2-bit codes through the matrix-vector kernels (16 codes a word): every
 * group size, ragged row counts around the 8/16-lane blocks and their
 * pairs, K of one group, of several K blocks, and K blocks that split a
 * word (K = 25 groups of 32: blocks of 200, the general path), on every
 * ISA variant: the bits of wf_matmul on the dequantized matrix, and the
 * float64 reference. */
static void test_two_bit_matvec_every_variant(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    static const int64_t outs[] = {7, 33};
    static const int64_t x_rows[] = {1, 4};
#else
    static const int64_t outs[] = {1, 7, 16, 33, 50, 97};
    static const int64_t x_rows[] = {1, 2, 3, 4};
#endif
    const int bits = 2;
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t g = 0; g < 3; g++) {
            const int gs = all_groups[g];
            const int64_t depths[] = {gs, 768, 25 * 32};
            for (size_t d = 0; d < 3; d++) {
                const int64_t kdim = depths[d];
                if (kdim % gs != 0)
                    continue;
                for (size_t o = 0; o < sizeof outs / sizeof *outs; o++) {
                    qmat w;
                    if (!qmat_make(&w, outs[o], kdim, gs, bits))
                        continue;
                    for (size_t r = 0; r < sizeof x_rows / sizeof *x_rows; r++) {
                        const int64_t xs[2] = {x_rows[r], kdim};
                        wf_array *x = random_f32(xs, 2);
                        wf_array *y = wf_quantized_matmul(x, w.q, w.s, w.b, true, gs, bits);
                        wf_array *ref = dense_product(x, &w, gs, bits, true);
                        if (!CHECK(quant_same_bits(y, ref)))
                            printf("      isa %s group %d n %lld k %lld rows %lld\n",
                                   wf__gemm_isa_name(isa), gs, (long long)outs[o],
                                   (long long)kdim, (long long)x_rows[r]);
                        wf_release(x), wf_release(y), wf_release(ref);
                    }
                    qmat_free(&w);
                }
                check_against_reference(1, 37, kdim, gs, bits, true);
            }
        }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* The matrix-vector kernels sum K blocks side by side, in pairs: K of
 * one group, of one K block, of pairs of blocks, of pairs and one left
 * over, of a shorter last block, and of blocks not a multiple of the group
 * size (summed one at a time; 2 bits: a word split, the general path), for
 * 1 .. 4 rows of x and ragged lanes, on every ISA variant: the bits of
 * wf_matmul on the dequantized matrix. */
static void test_matvec_k_blocks_every_variant(void)
{
    static const struct {
        int64_t k;
        int gs;
    } depths[] = {{32, 32}, {256, 64}, {1024, 64}, {1280, 64}, {1312, 32}, {640, 128}};
#ifdef WF_TEST_SLOW_BUILD
    static const int bits_list[] = {2, 8};
    static const int64_t x_rows[] = {1, 4};
#else
    static const int bits_list[] = {2, 4, 8, 3};
    static const int64_t x_rows[] = {1, 2, 3, 4};
#endif
    const int64_t n = 21; /* lanes of 8 (16) and a ragged rest */
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t d = 0; d < sizeof depths / sizeof *depths; d++)
            for (size_t bi = 0; bi < sizeof bits_list / sizeof *bits_list; bi++) {
                const int bits = bits_list[bi], gs = depths[d].gs;
                const int64_t kdim = depths[d].k;
                qmat w;
                if (!qmat_make(&w, n, kdim, gs, bits))
                    continue;
                for (size_t r = 0; r < sizeof x_rows / sizeof *x_rows; r++) {
                    const int64_t xs[2] = {x_rows[r], kdim};
                    wf_array *x = random_f32(xs, 2);
                    wf_array *y = wf_quantized_matmul(x, w.q, w.s, w.b, true, gs, bits);
                    wf_array *ref = dense_product(x, &w, gs, bits, true);
                    if (!CHECK(quant_same_bits(y, ref)))
                        printf("      isa %s bits %d k %lld (K block %lld) group %d rows %lld\n",
                               wf__gemm_isa_name(isa), bits, (long long)kdim,
                               (long long)wf__gemm_k_block(kdim), gs, (long long)x_rows[r]);
                    wf_release(x), wf_release(y), wf_release(ref);
                }
                qmat_free(&w);
            }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* Replaces w's scales by a copy with a scale zero, tiny or huge in rows
 * 0, 11, 22, .. 66 (w: at least 67 rows): outside the range of the AVX-512
 * kernel's codes in place (its general path), and at the range's ends,
 * 2^-100 and 2^100 (its fast path); the AVX2 kernel converts codes and
 * takes any scale. */
static bool put_extreme_scales(qmat *w, int gs)
{
    static const float odd_scales[] = {0.0f,       -0.0f,     0x1p-120f, 0x1p110f,
                                       -0x1p-101f, 0x1p-100f, -0x1p100f};
    const int64_t groups = w->cols / gs;
    float *sv = quant_host_copy(w->s, 4);
    if (!sv)
        return false;
    for (size_t i = 0; i < sizeof odd_scales / sizeof *odd_scales; i++)
        sv[(int64_t)i * 11 * groups + (int64_t)i % groups] = odd_scales[i];
    const int64_t ss[2] = {w->rows, groups};
    wf_release(w->s);
    w->s = wf_array_from_data(sv, ss, 2, WF_DTYPE_F32);
    free(sv);
    return w->s != NULL;
}

/* Extreme scales (put_extreme_scales) in some rows only still give the
 * dense product's bits. */
static void test_extreme_scales(void)
{
    static const int fast_bits[] = {2, 4, 8};
    for (int bi = 0; bi < 3; bi++) {
        const int bits = fast_bits[bi], gs = 32;
        const int64_t n = 70, kdim = 128;
        qmat w;
        if (!qmat_make(&w, n, kdim, gs, bits))
            return;
        if (!CHECK(put_extreme_scales(&w, gs))) {
            qmat_free(&w);
            return;
        }
        wf_array *s = w.s;
        const int64_t xs[2] = {2, kdim};
        wf_array *x = random_f32(xs, 2);
        wf_array *d = wf_dequantize(w.q, s, w.b, gs, bits, WF_QUANT_AFFINE);
        const int best_isa = wf__gemm_isa();
        for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
            if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
                continue;
            CHECK_OK(wf__gemm_isa_set(isa));
            wf_array *y = wf_quantized_matmul(x, w.q, s, w.b, true, gs, bits);
            wf_array *ref = wf_matmul(x, wf_swapaxes(d, 0, 1));
            if (!CHECK(quant_same_bits(y, ref)))
                printf("      bits %d isa %s\n", bits, wf__gemm_isa_name(isa));
            wf_release(y), wf_release(ref);
        }
        CHECK_OK(wf__gemm_isa_set(-1));
        wf_release(x), wf_release(d);
        qmat_free(&w);
    }
}

/* Row i of a 40-row product has the bits of row i alone; x and the codes
 * as strided views give the bits of contiguous copies. */
static void test_batch_invariance_and_strides(void)
{
    const int gs = 32, bits = 4;
    const int64_t n = 50, kdim = 96;
    qmat w;
    if (!qmat_make(&w, n, kdim, gs, bits))
        return;
    const int64_t xs[2] = {40, kdim};
    wf_array *x = random_f32(xs, 2);
    wf_array *all = wf_quantized_matmul(x, w.q, w.s, w.b, true, gs, bits);
    for (int64_t i = 0; i < 40; i += 13) {
        const int64_t start[2] = {i, 0}, stop[2] = {i + 1, kdim}, step[2] = {1, 1};
        const int64_t ostop[2] = {i + 1, n};
        wf_array *row = wf_slice(x, start, stop, step);
        wf_array *one = wf_quantized_matmul(row, w.q, w.s, w.b, true, gs, bits);
        wf_array *part = wf_slice(all, start, ostop, step);
        CHECK(quant_same_bits(one, part));
        wf_release(row), wf_release(one), wf_release(part);
    }
    /* x transposed twice (a strided view), codes of every other row. */
    const int64_t ts[2] = {kdim, 40};
    wf_array *xt = random_f32(ts, 2), *xv = wf_swapaxes(xt, 0, 1);
    wf_array *xc = wf_multiply(xv, wf_scalar(1, WF_DTYPE_F32));
    const int64_t s0[2] = {0, 0}, s1[2] = {n, kdim * bits / 32}, s2[2] = {n, kdim / gs},
                  st[2] = {2, 1};
    wf_array *qs = wf_slice(w.q, s0, s1, st), *ss = wf_slice(w.s, s0, s2, st),
             *bs = wf_slice(w.b, s0, s2, st);
    wf_array *ys = wf_quantized_matmul(xv, qs, ss, bs, true, gs, bits);
    wf_array *yc = wf_quantized_matmul(xc, wf_multiply(qs, wf_scalar(1, WF_DTYPE_U32)),
                                       wf_multiply(ss, wf_scalar(1, WF_DTYPE_F32)),
                                       wf_multiply(bs, wf_scalar(1, WF_DTYPE_F32)), true, gs, bits);
    CHECK(quant_same_bits(ys, yc));
    wf_release(x), wf_release(all), wf_release(xt), wf_release(xv), wf_release(xc);
    wf_release(qs), wf_release(ss), wf_release(bs), wf_release(ys), wf_release(yc);
    qmat_free(&w);
}

/* Batched W (3 experts) broadcast against x, and gather_qmm picking
 * experts by index, against per-expert 2-d products. */
static void test_batched_and_gather(void)
{
    const int gs = 32, bits = 4;
    const int64_t e = 3, n = 20, kdim = 64;
    const int64_t ws[3] = {e, n, kdim};
    wf_array *w = random_f32(ws, 3), *q, *s, *b;
    if (!CHECK_OK(wf_quantize(w, gs, bits, WF_QUANT_AFFINE, &q, &s, &b)))
        return;
    const int64_t xs[3] = {e, 2, kdim};
    wf_array *x = random_f32(xs, 3);
    wf_array *y = wf_quantized_matmul(x, q, s, b, true, gs, bits);
    CHECK_EQ_INT(wf_array_ndim(y), 3);
    const int32_t idx[4] = {2, 0, 2, 1};
    const int64_t ni = 4;
    wf_array *rhs = wf_array_from_data(idx, &ni, 1, WF_DTYPE_I32);
    const int64_t x1s[3] = {1, 2, kdim};
    wf_array *x1 = random_f32(x1s, 3);
    wf_array *g = wf_gather_qmm(x1, q, s, b, NULL, rhs, true, gs, bits);
    if (CHECK_NOT_NULL(g))
        CHECK_EQ_INT(wf_array_shape(g)[0], 4);
    for (int64_t i = 0; i < e; i++) {
        const int64_t a0[3] = {i, 0, 0}, a1[3] = {i + 1, n, kdim * bits / 32}, sa1[3] = {i + 1, n, kdim / gs},
                      x0[3] = {i, 0, 0}, xe[3] = {i + 1, 2, kdim}, one[3] = {1, 1, 1};
        wf_array *qi = wf_squeeze(wf_slice(q, a0, a1, one), (int[]){0}, 1);
        wf_array *si = wf_squeeze(wf_slice(s, a0, sa1, one), (int[]){0}, 1);
        wf_array *bi = wf_squeeze(wf_slice(b, a0, sa1, one), (int[]){0}, 1);
        wf_array *xi = wf_squeeze(wf_slice(x, x0, xe, one), (int[]){0}, 1);
        wf_array *yi = wf_quantized_matmul(xi, qi, si, bi, true, gs, bits);
        const int64_t y1[3] = {i + 1, 2, n};
        CHECK(quant_same_bits(wf_squeeze(wf_slice(y, x0, y1, one), (int[]){0}, 1), yi));
        for (int64_t j = 0; j < ni; j++) {
            if (idx[j] != i)
                continue;
            wf_array *x1i = wf_squeeze(x1, (int[]){0}, 1);
            wf_array *want = wf_quantized_matmul(x1i, qi, si, bi, true, gs, bits);
            const int64_t g0[3] = {j, 0, 0}, g1[3] = {j + 1, 2, n};
            CHECK(quant_same_bits(wf_squeeze(wf_slice(g, g0, g1, one), (int[]){0}, 1), want));
            wf_release(x1i), wf_release(want);
        }
        wf_release(qi), wf_release(si), wf_release(bi), wf_release(xi), wf_release(yi);
    }
    /* an expert index out of range fails the evaluation, naming it */
    const int32_t bad_idx[2] = {1, 3};
    const int64_t two = 2;
    wf_array *bad = wf_array_from_data(bad_idx, &two, 1, WF_DTYPE_I32);
    wf_array *gb = wf_gather_qmm(x1, q, s, b, NULL, bad, true, gs, bits);
    if (CHECK_NOT_NULL(gb)) {
        CHECK_EQ_INT(wf_eval(&gb, 1), WF_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(wf_last_error_message(), "out of range");
        wf_clear_error();
    }
    wf_release(bad), wf_release(gb);
    wf_release(w), wf_release(q), wf_release(s), wf_release(b), wf_release(x), wf_release(y);
    wf_release(rhs), wf_release(x1), wf_release(g);
}

/* ---------------------------------------------------------------- transforms */

typedef struct qmm_closure {
    int gs, bits;
    bool transpose;
} qmm_closure;

/* inputs: x, codes, scales, biases -> sum(qmm(...) * qmm(...)) */
static wf_status qmm_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)n;
    const qmm_closure *c = payload;
    wf_array *y = wf_quantized_matmul(in[0], in[1], in[2], in[3], c->transpose, c->gs, c->bits);
    wf_array *sq = wf_multiply(y, y);
    out[0] = wf_sum(sq, NULL, 0, false);
    *nout = 1;
    wf_release(y), wf_release(sq);
    return out[0] ? WF_OK : wf_last_error();
}

/* The same loss through the dense float32 matrix (differentiable in s, b). */
static wf_status dense_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const qmm_closure *c = payload;
    wf_scope_begin();
    /* W = codes * s + b, built from ops that have derivatives */
    wf_array *ones = wf_ones_like(in[2]), *zeros = wf_zeros_like(in[3]);
    wf_array *codes = wf_dequantize(in[1], ones, zeros, c->gs, c->bits, WF_QUANT_AFFINE);
    const int64_t *cs = wf_array_shape(codes), *ss = wf_array_shape(in[2]);
    const int64_t g3[3] = {ss[0], ss[1], c->gs};
    wf_array *w = wf_add(wf_multiply(wf_reshape(codes, g3, 3), wf_expand_dims(in[2], (int[]){2}, 1)),
                         wf_expand_dims(in[3], (int[]){2}, 1));
    w = wf_reshape(w, cs, 2);
    wf_array *y = wf_matmul(in[0], c->transpose ? wf_swapaxes(w, 0, 1) : w);
    out[0] = wf_sum(wf_multiply(y, y), NULL, 0, false);
    wf_keep(out[0]);
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static double max_rel_diff(wf_array *a, wf_array *b)
{
    wf_array *d = wf_max(wf_abs(wf_subtract(a, b)), NULL, 0, false);
    wf_array *m = wf_max(wf_abs(b), NULL, 0, false);
    double dv = 1, mv = 1;
    CHECK_OK(wf_array_item(d, &dv));
    CHECK_OK(wf_array_item(m, &mv));
    wf_release(d), wf_release(m);
    return dv / (mv > 0 ? mv : 1);
}

static void test_vjp_x_scales_biases(void)
{
    for (int t = 0; t < 2; t++) {
        qmm_closure c = {32, 4, t};
        qmat w;
        if (!(t ? qmat_make(&w, 24, 64, 32, 4) : qmat_make(&w, 64, 32, 32, 4)))
            return;
        const int64_t xs[2] = {3, 64};
        wf_array *x = random_f32(xs, 2);
        wf_array *in[4] = {x, w.q, w.s, w.b};
        const int argnums[3] = {0, 2, 3};
        wf_fn *f = wf_fn_new(qmm_loss, &c, NULL), *fd = wf_fn_new(dense_loss, &c, NULL);
        wf_fn *g = wf_grad(f, argnums, 3), *gd = wf_grad(fd, argnums, 3);
        wf_array *got[3] = {0}, *want[3] = {0};
        size_t n1 = 3, n2 = 3;
        if (CHECK_OK(wf_fn_call(g, in, 4, got, &n1)) && CHECK_OK(wf_fn_call(gd, in, 4, want, &n2)))
            for (int i = 0; i < 3; i++)
                if (!CHECK(max_rel_diff(got[i], want[i]) < 1e-4))
                    printf("      gradient %d transpose %d\n", argnums[i], t);
        for (int i = 0; i < 3; i++)
            wf_release(got[i]), wf_release(want[i]);
        wf_fn_release(f), wf_fn_release(fd), wf_fn_release(g), wf_fn_release(gd);
        wf_release(x);
        qmat_free(&w);
    }
}

static wf_status qmm_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)n;
    const qmm_closure *c = payload;
    out[0] = wf_quantized_matmul(in[0], in[1], in[2], in[3], c->transpose, c->gs, c->bits);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* vmap over x's rows (a vector per example) and over stacked experts. */
static void test_vmap(void)
{
    qmm_closure c = {32, 4, true};
    qmat w;
    if (!qmat_make(&w, 24, 64, 32, 4))
        return;
    const int64_t xs[2] = {5, 64};
    wf_array *x = random_f32(xs, 2);
    wf_fn *f = wf_fn_new(qmm_body, &c, NULL);
    const int axes[4] = {0, WF_VMAP_NOT_MAPPED, WF_VMAP_NOT_MAPPED, WF_VMAP_NOT_MAPPED};
    wf_fn *v = wf_vmap(f, axes, 4, NULL, 0);
    wf_array *in[4] = {x, w.q, w.s, w.b}, *out = NULL;
    size_t n = 1;
    if (CHECK_OK(wf_fn_call(v, in, 4, &out, &n))) {
        wf_array *want = wf_quantized_matmul(x, w.q, w.s, w.b, true, 32, 4);
        CHECK(quant_same_bits(out, want));
        wf_release(want);
    }
    wf_release(out);
    /* experts: codes, scales, biases and x all mapped */
    const int64_t ws[3] = {3, 24, 64}, x3[3] = {3, 2, 64};
    wf_array *we = random_f32(ws, 3), *q, *s, *b, *xe = random_f32(x3, 3);
    if (CHECK_OK(wf_quantize(we, 32, 4, WF_QUANT_AFFINE, &q, &s, &b))) {
        wf_fn *v2 = wf_vmap(f, NULL, 0, NULL, 0);
        wf_array *in2[4] = {xe, q, s, b};
        n = 1;
        if (CHECK_OK(wf_fn_call(v2, in2, 4, &out, &n))) {
            wf_array *want = wf_quantized_matmul(xe, q, s, b, true, 32, 4);
            CHECK(quant_same_bits(out, want));
            wf_release(want);
        }
        wf_release(out);
        wf_fn_release(v2);
        wf_release(q), wf_release(s), wf_release(b);
    }
    wf_release(we), wf_release(xe), wf_release(x);
    wf_fn_release(f), wf_fn_release(v);
    qmat_free(&w);
}

/* ---------------------------------------------------------------- errors */

static void test_bad_arguments(void)
{
    const int64_t shape[2] = {4, 64}, odd[2] = {4, 48}, vec = 64;
    wf_array *w = random_f32(shape, 2), *wodd = random_f32(odd, 2), *v = random_f32(&vec, 1);
    wf_array *q = NULL, *s = NULL, *b = NULL;
    CHECK_EQ_INT(wf_quantize(w, 16, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "group size 16");
    wf_clear_error();
    CHECK_EQ_INT(wf_quantize(w, 32, 7, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(wf_quantize(w, 32, 4, (wf_quant_mode)3, &q, &s, &b), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(wf_quantize(wodd, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_SHAPE);
    CHECK_EQ_INT(wf_quantize(v, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_SHAPE);
    wf_array *wi = wf_astype(w, WF_DTYPE_I32);
    CHECK_EQ_INT(wf_quantize(wi, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_DTYPE);
    /* a NULL input keeps the first error (a failed chain is checked once) */
    CHECK_EQ_INT(wf_quantize(NULL, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_DTYPE);
    wf_clear_error();
    CHECK_EQ_INT(wf_quantize(NULL, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_NULL_ARGUMENT);
    CHECK_EQ_INT(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, NULL, &s, &b), WF_ERR_NULL_ARGUMENT);
    if (CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b))) {
        CHECK_NULL_WITH(wf_dequantize(q, s, b, 64, 4, WF_QUANT_AFFINE), WF_ERR_SHAPE);
        CHECK_NULL_WITH(wf_dequantize(w, s, b, 32, 4, WF_QUANT_AFFINE), WF_ERR_DTYPE);
        const int64_t xs[2] = {2, 63};
        wf_array *x = random_f32(xs, 2);
        CHECK(wf_quantized_matmul(x, q, s, b, true, 32, 4) == NULL);
        CHECK_STR_CONTAINS(wf_last_error_message(), "does not match");
        wf_clear_error();
        CHECK_NULL_WITH(wf_quantized_matmul(v, q, s, b, true, 32, 8), WF_ERR_SHAPE);
        CHECK_NULL_WITH(wf_quantized_matmul(v, q, s, NULL, true, 32, 4), WF_ERR_NULL_ARGUMENT);
        wf_array *xi = wf_astype(v, WF_DTYPE_I32);
        CHECK_NULL_WITH(wf_quantized_matmul(xi, q, wf_astype(s, WF_DTYPE_I32), b, true, 32, 4),
                        WF_ERR_DTYPE);
        wf_array *fidx = wf_scalar(1, WF_DTYPE_F32);
        const int64_t x3s[3] = {1, 2, 64};
        wf_array *x3 = random_f32(x3s, 3);
        CHECK_NULL_WITH(wf_gather_qmm(x3, q, s, b, fidx, NULL, true, 32, 4), WF_ERR_DTYPE);
        wf_release(x), wf_release(xi), wf_release(fidx), wf_release(x3);
        wf_release(q), wf_release(s), wf_release(b);
    }
    wf_release(w), wf_release(wodd), wf_release(v), wf_release(wi);
}

/* ---------------------------------------------------------------- threads */

/* Hashes of products large enough to split over the pool. */
static void child_print_hashes(void)
{
    static const int64_t rows[] = {1, 3, 64};
    qmat w;
    if (!qmat_make(&w, 300, 512, 64, 4))
        return;
    for (size_t r = 0; r < 3; r++) {
        const int64_t xs[2] = {rows[r], 512};
        wf_array *x = random_f32(xs, 2);
        wf_array *y = wf_quantized_matmul(x, w.q, w.s, w.b, true, 64, 4);
        uint32_t *v = quant_host_copy(y, 4);
        uint64_t h = 1469598103934665603u;
        for (int64_t i = 0; v && i < wf_array_size(y); i++)
            h = (h ^ v[i]) * 1099511628211u;
        printf("rows %lld hash %016llx\n", (long long)rows[r], (unsigned long long)h);
        free(v);
        wf_release(x), wf_release(y);
    }
    qmat_free(&w);
}

static void test_same_bits_for_any_thread_count(void)
{
    char self[4096];
    if (!CHECK(wf_test_self_path(self, sizeof self)))
        return;
    static const int threads[] = {1, 2, 3, 5};
    static char first[1024], other[1024];
    wf_test_check_thread_counts(__FILE__, __LINE__, NULL, self, "WEFT_QUANT_CHILD=1", threads, 4,
                                first, other, sizeof other);
    CHECK(strstr(first, "rows 64 hash") != NULL);
}

/* ---------------------------------------------------------------- interleaved copies */

/* Bytes of the interleaved copies of w's codes, scales and biases for a
 * kernel of `lanes` lanes (0: none). */
static size_t interleaved_size(const qmat *w, int gs, int bits, int lanes)
{
    if (lanes == 0)
        return 0;
    const int64_t blocks = (w->rows + lanes - 1) / lanes;
    const int64_t per_row = w->cols * bits / 32 + 2 * (w->cols / gs);
    return (size_t)(blocks * lanes * per_row) * 4;
}

/* Three products of x and w (transposed), each against wf_matmul on the
 * dequantized matrix, bit for bit; false if one differs. */
static bool three_products_same_bits(wf_array *x, const qmat *w, int gs, int bits)
{
    wf_array *ref = dense_product(x, w, gs, bits, true);
    bool same = true;
    for (int call = 0; call < 3; call++) {
        wf_array *y = wf_quantized_matmul(x, w->q, w->s, w->b, true, gs, bits);
        same &= quant_same_bits(y, ref);
        wf_release(y);
    }
    wf_release(ref);
    return same;
}

typedef struct racing_products {
    const qmat *w;
    wf_array *x;
    int gs, bits;
    pthread_barrier_t *start;
    bool same;
} racing_products;

static void *race_products(void *arg)
{
    racing_products *r = arg;
    pthread_barrier_wait(r->start);
    r->same = three_products_same_bits(r->x, r->w, r->gs, r->bits);
    return NULL;
}

/* The kernels' interleaved copies (quantized.c), on every ISA variant
 * this CPU has: the second product with the same codes, scales and biases
 * makes them (16 rows a vector on AVX-512, 8 on AVX2, none on the
 * baseline) and later ones read them, the matrix-vector kernel (1 .. 16
 * rows of x, 4 at a time) and the packer of the GEMM's panels (17 and 33
 * rows), with wf_matmul's bits on the dequantized matrix every time (2, 4
 * and 8 bits, groups of 32, 64 and 128, n ragged around the blocks of
 * rows and their pairs, K of three K blocks); releasing the weight frees
 * them; none is made where the kernels would not read it (K blocks that
 * split a group, external codes); scales out of the AVX-512 kernel's
 * in-place range get copies and the same bits; four threads racing for
 * the first copies (two with 2 rows of x, two with 20) get the same bits
 * and one set of copies. */
static void interleaved_copies_on(int lanes)
{
#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    static const int bits_list[] = {4, 8}, groups[] = {64};
    static const int64_t ns[] = {45}, row_counts[] = {1, 6, 17};
#else
    static const int bits_list[] = {2, 4, 8}, groups[] = {32, 64, 128};
    static const int64_t ns[] = {45, 100}, row_counts[] = {1, 2, 3, 4, 5, 16, 17, 33};
#endif
    const int64_t kdim = 1536; /* three K blocks of 512 */
    for (size_t bi = 0; bi < sizeof bits_list / sizeof *bits_list; bi++)
        for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++)
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                const int bits = bits_list[bi], gs = groups[gi];
                const size_t before = wf__qmv_interleaved_bytes();
                qmat w;
                if (!qmat_make(&w, ns[ni], kdim, gs, bits))
                    continue;
                for (size_t ri = 0; ri < sizeof row_counts / sizeof *row_counts; ri++) {
                    const int64_t rows = row_counts[ri], xs[2] = {rows, kdim};
                    wf_array *x = random_f32(xs, 2);
                    if (!CHECK(three_products_same_bits(x, &w, gs, bits)))
                        printf("      lanes %d bits %d group %d n %lld rows %lld\n", lanes, bits,
                               gs, (long long)ns[ni], (long long)rows);
                    wf_release(x);
                }
                CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(),
                             (int64_t)(before + interleaved_size(&w, gs, bits, lanes)));
                qmat_free(&w);
                CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(), (int64_t)before);
            }

    /* K = 25 groups of 32: K blocks of 400 split a group, no copy */
    const size_t before = wf__qmv_interleaved_bytes();
    qmat w;
    if (qmat_make(&w, 40, 800, 32, 4)) {
        const int64_t xs[2] = {1, 800};
        wf_array *x = random_f32(xs, 2);
        CHECK(three_products_same_bits(x, &w, 32, 4));
        CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(), (int64_t)before);
        wf_release(x);
        qmat_free(&w);
    }

    /* external codes: weft never derives from caller memory */
    if (qmat_make(&w, 64, 512, 64, 4)) {
        uint32_t *host = quant_host_copy(w.q, 4);
        const int64_t shape[2] = {64, 512 * 4 / 32}, xs[2] = {1, 512};
        wf_array *external = wf_array_from_external(host, shape, 2, WF_DTYPE_U32, NULL, NULL, NULL);
        wf_array *x = random_f32(xs, 2);
        qmat outside = w;
        outside.q = external;
        CHECK(three_products_same_bits(x, &outside, 64, 4));
        CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(), (int64_t)before);
        wf_release(x), wf_release(external);
        free(host);
        qmat_free(&w);
    }

    /* extreme scales in some rows (the AVX-512 kernel checks their range
     * once, as the copies are made, and then takes its general path; the
     * panels' packer declines them and the rows are dequantized one by one) */
    if (qmat_make(&w, 70, kdim, 32, 4)) {
        const int64_t xs[2] = {2, kdim}, panel_xs[2] = {20, kdim};
        wf_array *x = random_f32(xs, 2), *panel_x = random_f32(panel_xs, 2);
        if (CHECK(put_extreme_scales(&w, 32))) {
            CHECK(three_products_same_bits(x, &w, 32, 4));
            CHECK(three_products_same_bits(panel_x, &w, 32, 4));
        }
        wf_release(panel_x);
        CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(),
                     (int64_t)(before + interleaved_size(&w, 32, 4, lanes)));
        wf_release(x);
        qmat_free(&w);
    }

    /* four threads make their first products at once, two through the
     * matrix-vector kernel and two through the panels' packer */
    enum { RACERS = 4 };
    if (qmat_make(&w, 100, kdim, 64, 4)) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, RACERS);
        const int64_t xs[2] = {2, kdim}, panel_xs[2] = {20, kdim};
        wf_array *x = random_f32(xs, 2), *panel_x = random_f32(panel_xs, 2);
        racing_products r[RACERS];
        pthread_t tid[RACERS];
        for (int t = 0; t < RACERS; t++) {
            r[t] = (racing_products){&w, t % 2 ? panel_x : x, 64, 4, &start, false};
            pthread_create(&tid[t], NULL, race_products, &r[t]);
        }
        for (int t = 0; t < RACERS; t++) {
            pthread_join(tid[t], NULL);
            CHECK(r[t].same);
        }
        CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(),
                     (int64_t)(before + interleaved_size(&w, 64, 4, lanes)));
        pthread_barrier_destroy(&start);
        wf_release(x), wf_release(panel_x);
        qmat_free(&w);
        CHECK_EQ_INT((int64_t)wf__qmv_interleaved_bytes(), (int64_t)before);
    }
}

static void test_interleaved_copies(void)
{
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        interleaved_copies_on(isa >= WF_GEMM_ISA_AVX512 ? 16 : isa == WF_GEMM_ISA_AVX2 ? 8 : 0);
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* The result dtype and rank corners of dequantize, quantized_matmul and
 * gather_qmm, against the float32 results; their shape and dtype checks. */
static void test_dtypes_and_ranks(void)
{
    const int64_t ws[2] = {8, 64}, xs[2] = {3, 64}, w3s[3] = {2, 8, 64}, x4s[4] = {2, 1, 3, 64};
    wf_array *w = random_f32(ws, 2), *x = random_f32(xs, 2);
    wf_array *q = NULL, *s = NULL, *b = NULL;
    if (!CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b)))
        return;
    /* dequantize into float16: the float32 result rounded */
    wf_array *d32 = wf_dequantize(q, s, b, 32, 4, WF_QUANT_AFFINE);
    wf_array *d16 = wf_dequantize_as(q, s, b, 32, 4, WF_QUANT_AFFINE, WF_DTYPE_F16);
    CHECK_EQ_INT(wf_array_dtype(d16), WF_DTYPE_F16);
    CHECK(max_rel_diff(wf_astype(d16, WF_DTYPE_F32), wf_astype(wf_astype(d32, WF_DTYPE_F16), WF_DTYPE_F32)) == 0);
    /* float16 x and scales: the product in float32, then rounded */
    wf_array *q16 = NULL, *s16 = NULL, *b16 = NULL;
    CHECK_OK(wf_quantize(wf_astype(w, WF_DTYPE_F16), 32, 4, WF_QUANT_AFFINE, &q16, &s16, &b16));
    wf_array *x16 = wf_astype(x, WF_DTYPE_F16);
    wf_array *y16 = wf_quantized_matmul(x16, q16, s16, b16, true, 32, 4);
    wf_array *y32 = wf_quantized_matmul(wf_astype(x16, WF_DTYPE_F32), q16,
                                        wf_astype(s16, WF_DTYPE_F32), wf_astype(b16, WF_DTYPE_F32),
                                        true, 32, 4);
    CHECK_EQ_INT(wf_array_dtype(y16), WF_DTYPE_F16);
    CHECK(max_rel_diff(wf_astype(y16, WF_DTYPE_F32), y32) < 1e-2);
    /* checks */
    const int64_t n64 = 64;
    wf_array *v = random_f32(&n64, 1);
    CHECK_NULL_WITH(wf_quantized_matmul(x, v, s, b, true, 32, 4), WF_ERR_SHAPE);
    wf_array *w3 = random_f32(w3s, 3), *q3 = NULL, *s3 = NULL, *b3 = NULL;
    CHECK_OK(wf_quantize(w3, 32, 4, WF_QUANT_AFFINE, &q3, &s3, &b3));
    CHECK(wf_quantized_matmul(v, q3, s3, b3, true, 32, 4) == NULL);
    CHECK_STR_CONTAINS(wf_last_error_message(), "x must be at least 2-d with a batched w");
    wf_clear_error();
    wf_array *x64 = wf_astype(x, WF_DTYPE_F64);
    CHECK(wf_gather_qmm(x64, q3, s3, b3, NULL, wf_zeros(&(int64_t){1}, 1, WF_DTYPE_I32), true,
                        32, 4) == NULL);
    CHECK_STR_CONTAINS(wf_last_error_message(),
                       "x (float64) and scales (float32) must promote to float16, bfloat16");
    wf_clear_error();
    /* gather_qmm with a 2-d x and with a 4-d x, against plain products;
     * 0-d indices give one (M, N) product */
    wf_array *one = wf_ones(NULL, 0, WF_DTYPE_I32), *zero = wf_zeros(NULL, 0, WF_DTYPE_I32);
    wf_array *d3 = wf_dequantize(q3, s3, b3, 32, 4, WF_QUANT_AFFINE);
    wf_array *w1 = wf_take(d3, one, 0); /* (8, 64) */
    wf_array *g2 = wf_gather_qmm(x, q3, s3, b3, zero, one, true, 32, 4);
    CHECK_EQ_INT(wf_array_ndim(g2), 2);
    CHECK(max_rel_diff(g2, wf_matmul(x, wf_swapaxes(w1, 0, 1))) < 1e-5);
    wf_array *x4 = random_f32(x4s, 4);
    wf_array *g4 = wf_gather_qmm(x4, q3, s3, b3, NULL, NULL, true, 32, 4);
    CHECK_EQ_INT(wf_array_ndim(g4), 4);
    CHECK(max_rel_diff(g4, wf_matmul(x4, wf_swapaxes(d3, -1, -2))) < 1e-5);
    const int64_t two = 2;
    wf_array *lhs = wf_zeros(&two, 1, WF_DTYPE_I32), *rhs = wf_ones(&two, 1, WF_DTYPE_I32);
    wf_array *g4i = wf_gather_qmm(x4, q3, s3, b3, lhs, rhs, true, 32, 4);
    const int64_t x0s[2] = {3, 64};
    wf_array *x0 = wf_reshape(wf_take(x4, zero, 0), x0s, 2); /* x4's first (1, 3, 64) */
    wf_array *want = wf_matmul(x0, wf_swapaxes(w1, 0, 1));
    CHECK_EQ_INT(wf_array_ndim(g4i), 3);
    CHECK(max_rel_diff(wf_take(g4i, zero, 0), want) < 1e-5);
    CHECK(max_rel_diff(wf_take(g4i, one, 0), want) < 1e-5);
}

int main(void)
{
    if (getenv("WEFT_QUANT_CHILD")) {
        child_print_hashes();
        return 0;
    }
    RUN_SCOPED(test_round_trip_every_width);
    RUN_SCOPED(test_half_weights);
    RUN_SCOPED(test_against_float64_reference);
    RUN_SCOPED(test_same_bits_as_dense_matmul_every_variant);
    RUN_SCOPED(test_two_bit_matvec_every_variant);
    RUN_SCOPED(test_matvec_k_blocks_every_variant);
    RUN_SCOPED(test_batch_invariance_and_strides);
    RUN_SCOPED(test_extreme_scales);
    RUN_SCOPED(test_batched_and_gather);
    RUN_SCOPED(test_vjp_x_scales_biases);
    RUN_SCOPED(test_vmap);
    RUN_SCOPED(test_bad_arguments);
    RUN_SCOPED(test_dtypes_and_ranks);
    RUN_SCOPED(test_same_bits_for_any_thread_count);
    RUN_SCOPED(test_interleaved_copies);
    return TEST_SUMMARY();
}
