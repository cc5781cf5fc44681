/*
 * The opt-in int8-activation path of quantized_matmul
 * (wf_set_quantized_matvec_int8, weft.h), on the AVX2 and AVX-512
 * variants (VNNI's kernel or AVX2's; the tests that need a kernel pass
 * trivially on the baseline variant, saying so); the reference and
 * thread-count tests run once per variant the CPU has (wf__gemm_isa_set):
 *  - against a float64 reference (dequantize in double, then multiply),
 *    4 and 8 bits, group sizes 32 / 64 / 128, 1 .. 4 rows, ragged outputs
 *    and K not a multiple of 128, within the bound the int8 rounding of x
 *    gives (see int8_bound); the result really is the int8 path's (it
 *    differs from the exact path somewhere);
 *  - batched W: each batch the same bits as its own product;
 *  - x not finite, 5 rows, 2 bits: the exact path (same bits as switched off);
 *  - switched off again: the exact path's bits;
 *  - the same bits for WEFT_NUM_THREADS = 1, 2, 3, 5 (child processes).
 *
 *   test_quantized_int8                          the tests
 *   WEFT_INT8_CHILD=1 test_quantized_int8        (internal) prints hashes
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "child_process.h"
#include "harness.h"
#include "quant_ref.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

static wf_array *random_f32(int64_t rows, int64_t cols)
{
    const int64_t shape[2] = {rows, cols};
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = quant_rnd(&rng_state) * (1.0f + (float)(i % 5));
    wf_array *a = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    free(v);
    return a;
}

/* W (n, k) quantized, with host copies of its codes, scales and biases. */
typedef struct qmat {
    wf_array *q, *s, *b;
    uint32_t *qv;
    float *sv, *bv;
} qmat;

static bool qmat_make(qmat *m, int64_t n, int64_t k, int gs, int bits)
{
    wf_array *w = random_f32(n, k);
    const bool ok = CHECK_OK(wf_quantize(w, gs, bits, WF_QUANT_AFFINE, &m->q, &m->s, &m->b));
    wf_release(w);
    if (!ok)
        return false;
    m->qv = quant_host_copy(m->q, 4);
    m->sv = quant_host_copy(m->s, 4);
    m->bv = quant_host_copy(m->b, 4);
    return m->qv && m->sv && m->bv;
}

static void qmat_free(qmat *m)
{
    wf_release(m->q), wf_release(m->s), wf_release(m->b);
    free(m->qv), free(m->sv), free(m->bv);
}

/* The evaluated product x @ W.T as a host copy, the switch set to `int8`. */
static float *product(wf_array *x, const qmat *w, int gs, int bits, bool int8)
{
    wf_set_quantized_matvec_int8(int8);
    wf_array *y = wf_quantized_matmul(x, w->q, w->s, w->b, true, gs, bits);
    float *v = CHECK_NOT_NULL(y) ? quant_host_copy(y, 4) : NULL;
    wf_release(y);
    wf_set_quantized_matvec_int8(false);
    return v;
}

/* The int8 path's error bound for output (i, j). x is rounded per 32
 * elements with d = max|x| / 127 (float32) to xq = rint(x / d), so
 * |x - d xq| <= d / 2 plus the division's rounding (|x / d| <= 127:
 * 127 * 2^-24 d < 2^-17 d); the codes' part q s of W meets that error:
 * R = sum_k |q_k s_g| d_k (1/2 + 2^-17). The biases meet the float32 sum
 * of x over a group (at most 128 additions), the lane sums are exact
 * integers, each scaled and accumulated in float32 (a few dozen roundings
 * at most here): 2^-14 of S = sum_k (|q_k s_g| + |b_g|) |x_k| covers them. */
static double int8_bound(const float *x, const qmat *w, int64_t j, int64_t k, int gs, int bits,
                         double *exact)
{
    const int64_t words = k * bits / 32, groups = k / gs;
    double r = 0, s = 0, sum = 0;
    for (int64_t b0 = 0; b0 < k; b0 += 32) {
        float amax = 0;
        for (int64_t i = b0; i < b0 + 32; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const double d = (double)(amax / 127);
        for (int64_t i = b0; i < b0 + 32; i++) {
            const double qs = (double)quant_code_at(w->qv + j * words, i, bits) *
                              (double)w->sv[j * groups + i / gs];
            const double bias = (double)w->bv[j * groups + i / gs];
            sum += (qs + bias) * (double)x[i];
            r += fabs(qs) * d * (0.5 + 0x1p-17);
            s += (fabs(qs) + fabs(bias)) * fabs((double)x[i]);
        }
    }
    *exact = sum;
    return r + s * 0x1p-14;
}

/* rows x k times W (n, k) through the int8 path against float64; returns
 * whether any output differs from the exact path's. */
static bool check_int8_product(int rows, int64_t n, int64_t k, int gs, int bits)
{
    qmat w;
    bool differs = false;
    if (!qmat_make(&w, n, k, gs, bits)) {
        qmat_free(&w);
        return false;
    }
    wf_array *x = random_f32(rows, k);
    float *xv = quant_host_copy(x, 4);
    float *y8 = product(x, &w, gs, bits, true), *ye = product(x, &w, gs, bits, false);
    int bad = 0;
    for (int i = 0; xv && y8 && ye && i < rows; i++)
        for (int64_t j = 0; j < n; j++) {
            double exact;
            const double bound = int8_bound(xv + i * k, &w, j, k, gs, bits, &exact);
            bad += fabs((double)y8[i * n + j] - exact) > bound;
            differs |= y8[i * n + j] != ye[i * n + j];
        }
    if (!CHECK_EQ_INT(bad, 0))
        printf("      rows %d n %lld k %lld group %d bits %d\n", rows, (long long)n,
               (long long)k, gs, bits);
    free(xv), free(y8), free(ye);
    wf_release(x);
    qmat_free(&w);
    return differs;
}

/* One variant's products against float64 (the variant set). */
static void check_variant_against_float64(int isa)
{
    const bool available = wf_set_quantized_matvec_int8(false);
    if (!available)
        printf("      (no int8 kernel in variant %s: the exact path ran)\n",
               wf__gemm_isa_name(isa));
    static const int bits[] = {4, 8}, groups[] = {32, 64, 128};
    bool differs = false;
    for (int b = 0; b < 2; b++)
        for (int g = 0; g < 3; g++)
            for (int rows = 1; rows <= 4; rows++) {
                const int gs = groups[g];
                differs |= check_int8_product(rows, 37 + rows * 13, 3 * gs, gs, bits[b]);
                differs |= check_int8_product(rows, 100, 640, gs, bits[b]);
            }
    if (!CHECK(differs == available))
        printf("      isa %s\n", wf__gemm_isa_name(isa));
}

static void test_against_float64_reference(void)
{
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa) && CHECK_OK(wf__gemm_isa_set(isa)))
            check_variant_against_float64(isa);
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* A batched W (3 batches): each batch's outputs are its own product's. */
static void test_batched(void)
{
    const int gs = 64, bits = 4;
    const int64_t e = 3, n = 21, k = 192, ws[3] = {e, n, k}, xs[3] = {e, 2, k};
    wf_array *w2 = random_f32(e * n, k), *w = wf_reshape(w2, ws, 3), *q, *s, *b;
    wf_array *x2 = random_f32(e * 2, k), *x = wf_reshape(x2, xs, 3);
    if (!CHECK_OK(wf_quantize(w, gs, bits, WF_QUANT_AFFINE, &q, &s, &b)))
        return;
    wf_set_quantized_matvec_int8(true);
    wf_array *y = wf_quantized_matmul(x, q, s, b, true, gs, bits);
    CHECK_OK(wf_eval(&y, 1));
    for (int64_t i = 0; i < e; i++) {
        const int64_t a0[3] = {i, 0, 0}, one[3] = {1, 1, 1};
        const int64_t qa1[3] = {i + 1, n, k * bits / 32}, sa1[3] = {i + 1, n, k / gs};
        const int64_t xa1[3] = {i + 1, 2, k}, ya1[3] = {i + 1, 2, n};
        wf_array *qi = wf_squeeze(wf_slice(q, a0, qa1, one), (int[]){0}, 1);
        wf_array *si = wf_squeeze(wf_slice(s, a0, sa1, one), (int[]){0}, 1);
        wf_array *bi = wf_squeeze(wf_slice(b, a0, sa1, one), (int[]){0}, 1);
        wf_array *xi = wf_squeeze(wf_slice(x, a0, xa1, one), (int[]){0}, 1);
        wf_array *yi = wf_quantized_matmul(xi, qi, si, bi, true, gs, bits);
        CHECK(quant_same_bits(wf_squeeze(wf_slice(y, a0, ya1, one), (int[]){0}, 1), yi));
    }
    wf_set_quantized_matvec_int8(false);
    wf_release(w2), wf_release(w), wf_release(x2), wf_release(x), wf_release(y);
    wf_release(q), wf_release(s), wf_release(b);
}

/* Products the int8 path does not take: the exact path's bits. */
static void test_exact_path_elsewhere(void)
{
    qmat w4, w2;
    if (!qmat_make(&w4, 40, 256, 64, 4) || !qmat_make(&w2, 40, 256, 64, 2))
        return;
    wf_array *x = random_f32(5, 256), *x1 = random_f32(1, 256);
    float *xv = quant_host_copy(x1, 4);
    xv[7] = INFINITY;
    const int64_t s1[2] = {1, 256};
    wf_array *xinf = wf_array_from_data(xv, s1, 2, WF_DTYPE_F32);
    struct {
        wf_array *x;
        const qmat *w;
        int bits;
    } cases[] = {{x, &w4, 4}, {xinf, &w4, 4}, {x1, &w2, 2}};
    for (size_t c = 0; c < 3; c++) {
        float *on = product(cases[c].x, cases[c].w, 64, cases[c].bits, true);
        float *off = product(cases[c].x, cases[c].w, 64, cases[c].bits, false);
        const int64_t count = wf_array_shape(cases[c].x)[0] * 40;
        if (CHECK(on && off))
            CHECK(memcmp(on, off, (size_t)count * 4) == 0);
        free(on), free(off);
    }
    free(xv);
    wf_release(x), wf_release(x1), wf_release(xinf);
    qmat_free(&w4), qmat_free(&w2);
}

/* Hashes of one variant's int8 products split over the pool (the
 * variant set). */
static void child_print_variant_hashes(int isa)
{
    for (int bits = 4; bits <= 8; bits += 4)
        for (int rows = 1; rows <= 4; rows += 3) {
            qmat w;
            if (!qmat_make(&w, 500, 512, 32, bits))
                return;
            wf_array *x = random_f32(rows, 512);
            wf_array *y = wf_quantized_matmul(x, w.q, w.s, w.b, true, 32, bits);
            uint32_t *v = quant_host_copy(y, 4);
            uint64_t h = 1469598103934665603u;
            for (int64_t i = 0; v && i < wf_array_size(y); i++)
                h = (h ^ v[i]) * 1099511628211u;
            printf("isa %s bits %d rows %d hash %016llx\n", wf__gemm_isa_name(isa), bits, rows,
                   (unsigned long long)h);
            free(v);
            wf_release(x), wf_release(y);
            qmat_free(&w);
        }
}

/* Hashes of int8 products (the child, switch on), for each variant the
 * CPU has. */
static void child_print_hashes(void)
{
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa) && wf__gemm_isa_set(isa) == WF_OK)
            child_print_variant_hashes(isa);
}

static void test_same_bits_for_any_thread_count(void)
{
    char self[4096];
    if (!CHECK(wf_test_self_path(self, sizeof self)))
        return;
    static const int threads[] = {1, 2, 3, 5};
    static char first[4096], other[4096];
    wf_test_check_thread_counts(__FILE__, __LINE__, NULL, self, "WEFT_INT8_CHILD=1", threads, 4,
                                first, other, sizeof other);
    CHECK(strstr(first, "isa avx2 bits 8 rows 4 hash") != NULL ||
          !wf__gemm_isa_supported(WF_GEMM_ISA_AVX2));
}

int main(void)
{
    if (getenv("WEFT_INT8_CHILD")) {
        wf_set_quantized_matvec_int8(true);
        child_print_hashes();
        return 0;
    }
    RUN_SCOPED(test_against_float64_reference);
    RUN_SCOPED(test_batched);
    RUN_SCOPED(test_exact_path_elsewhere);
    RUN_SCOPED(test_same_bits_for_any_thread_count);
    return TEST_SUMMARY();
}
