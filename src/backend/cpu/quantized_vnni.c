/* The opt-in int8-activation matrix-vector kernels of quantized_matmul
 * (quantized.h, wf_set_quantized_matvec_int8 in weft.h): affine 4- or
 * 8-bit W stored (N, K), 1 .. WF_QMV_ROWS rows of x, on AVX512_VNNI or,
 * without it, AVX2.
 *
 * x is rounded once per product (wf__qmv_int8_prepare): per 32 elements
 * (the smallest group size) one scale d = max|x| / 127 and int8 values
 * xq = rint(x / d), so |x - d xq| <= d / 2 (+ the division's rounding);
 * per group the float32 sum of x in k order. Then per output
 *   y = sum over lanes of float(sum q xq) * (s_g d) + sum_g b_g * sum_g(x)
 * with vpdpbusd summing 4 products of unsigned codes and signed xq per
 * int32 lane (exact), a lane covering 8 (4-bit) or 4 (8-bit) consecutive k
 * inside one 32-block, so one group and one d. AVX2 has no vpdpbusd: there
 * vpmaddubsw sums pairs of products into int16 (exact: 4-bit codes, and
 * 8-bit codes split into their two nibbles, keep each pair's sum within
 * +-2 * 15 * 127), vpmaddwd the pairs into the same int32 lane sums, over
 * 8 lanes instead of 16 (so the float32 sums, and the bits, differ from
 * the VNNI kernel's within the same bound). Each output is summed alone,
 * in a fixed order: the bits do not depend on the thread count. */
#include "backend/cpu/quantized.h"

#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "util/fault.h"

enum { X_BLOCK = 32, K_BLOCK = 128, PREFETCH_BYTES = 1024 };

struct wf_qmv_int8_x {
    int64_t rows, kp, groups;
    int bits;
    int8_t *xq;       /* per row kp values; 4-bit: per K_BLOCK the even k, then the odd */
    float *lane_d;    /* per row kp / lane_k: the d of each vpdpbusd lane */
    float *group_sum; /* per row `groups` sums of x */
};

/* k values an int32 lane of vpdpbusd covers. */
static int lane_k(int bits)
{
    return bits == 4 ? 8 : 4;
}

void wf__qmv_int8_free(wf_qmv_int8_x *px)
{
    if (!px)
        return;
    free(px->xq);
    free(px->lane_d);
    free(px->group_sum);
    free(px);
}

/* Where x's element k goes in a row of xq (4-bit: evens and odds apart). */
static int64_t xq_slot(int64_t k, int bits)
{
    if (bits != 4)
        return k;
    const int64_t base = k / K_BLOCK * K_BLOCK, i = k % K_BLOCK;
    return base + (i % 2) * (K_BLOCK / 2) + i / 2;
}

/* One row of x: its 32-blocks rounded, lane scales and group sums. False
 * where x is not finite (the exact path takes such products). */
static bool prepare_row(const float *x, int64_t k, int bits, int group_size, int64_t kp,
                        int8_t *xq, float *lane_d, float *group_sum)
{
    const int per_lane = lane_k(bits);
    for (int64_t b = 0; b < k; b += X_BLOCK) {
        float amax = 0;
        for (int64_t i = b; i < b + X_BLOCK; i++) {
            if (!isfinite(x[i]))
                return false;
            amax = fmaxf(amax, fabsf(x[i]));
        }
        const float d = amax / 127;
        for (int64_t i = b; i < b + X_BLOCK; i++)
            xq[xq_slot(i, bits)] = d > 0 ? (int8_t)rintf(x[i] / d) : 0;
        for (int64_t l = b / per_lane; l < (b + X_BLOCK) / per_lane; l++)
            lane_d[l] = d;
    }
    for (int64_t l = k / per_lane; l < kp / per_lane; l++)
        lane_d[l] = 0;
    for (int64_t g = 0; g * group_size < k; g++) {
        float sum = 0;
        for (int64_t i = g * group_size; i < (g + 1) * group_size; i++)
            sum += x[i];
        group_sum[g] = sum;
    }
    return true;
}

wf_qmv_int8_x *wf__qmv_int8_prepare(const float *x, int64_t rows, int64_t k, int bits,
                                    int group_size)
{
    wf_qmv_int8_x *px = wf__calloc(1, sizeof *px);
    if (!px)
        return NULL;
    px->rows = rows;
    px->kp = (k + K_BLOCK - 1) / K_BLOCK * K_BLOCK;
    px->groups = k / group_size;
    px->bits = bits;
    px->xq = wf__calloc((size_t)(rows * px->kp), 1);
    px->lane_d = wf__malloc((size_t)(rows * px->kp / lane_k(bits)) * sizeof(float));
    px->group_sum = wf__malloc((size_t)(rows * px->groups + 1) * sizeof(float));
    bool ok = px->xq && px->lane_d && px->group_sum;
    for (int64_t r = 0; ok && r < rows; r++)
        ok = prepare_row(x + r * k, k, bits, group_size, px->kp, px->xq + r * px->kp,
                         px->lane_d + r * (px->kp / lane_k(bits)),
                         px->group_sum + r * px->groups);
    if (!ok) {
        wf__qmv_int8_free(px);
        return NULL;
    }
    return px;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ATTR_VNNI                                                                                  \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx512vnni,avx2,fma")))
#define INLINE_VNNI ATTR_VNNI __attribute__((always_inline)) static inline

static bool vnni_available(void)
{
    return wf__cpu_has_avx512_vnni() && __builtin_cpu_supports("avx512bw");
}

/* The lane scales s_g of 16 lanes from group g0 on (index: each lane's
 * group minus g0, at most 3; groups past the row's end read as 0). */
INLINE_VNNI __m512 lane_scales(const float *scales, int64_t groups, int64_t g0, __m512i index)
{
    const int64_t left = groups - g0;
    const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    return _mm512_permutexvar_ps(index, _mm512_maskz_loadu_ps(m, scales + g0));
}

/* The codes' bytes [at, at + 64) of a row of `row_bytes`, zero past its end. */
INLINE_VNNI __m512i code_bytes(const uint8_t *row, int64_t at, int64_t row_bytes)
{
    const int64_t left = row_bytes - at;
    const __mmask64 m = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
    return _mm512_maskz_loadu_epi8(m, row + at);
}

/* Output n over all of K for `rows` rows of x (from px's row x_row). */
INLINE_VNNI void int8_output(const wf_qmv_int8_x *px, int64_t x_row, const wf_qmv_args *a,
                             int64_t n, int rows, int bits, __m512i index)
{
    const uint8_t *row = a->codes + n * a->row_bytes;
    const float *s = a->scales + n * a->groups;
    const int64_t lanes_per_row = px->kp / lane_k(bits);
    __m512 acc[WF_QMV_ROWS];
    for (int r = 0; r < rows; r++)
        acc[r] = _mm512_setzero_ps();
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const int halves = bits == 4 ? 1 : 2; /* 16-lane steps per K_BLOCK */
    for (int64_t k0 = 0; k0 < a->k; k0 += K_BLOCK) {
        for (int h = 0; h < halves; h++) {
            const int64_t kh = k0 + h * (K_BLOCK / 2);
            if (kh >= a->k)
                break;
            const __m512 sv = lane_scales(s, a->groups, kh / a->group_size, index);
            /* ahead of the hardware prefetcher (it stops at page ends) */
            _mm_prefetch((const char *)row + kh * bits / 8 + PREFETCH_BYTES, _MM_HINT_T0);
            const __m512i raw = code_bytes(row, kh * bits / 8, a->row_bytes);
            __m512i lo = raw, hi = raw;
            if (bits == 4) {
                lo = _mm512_and_si512(raw, nibble);
                hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
            }
            const int64_t lane0 = kh / lane_k(bits);
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++) {
                const int8_t *xq = px->xq + (x_row + r) * px->kp + kh;
                __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                                                   _mm512_loadu_si512(xq));
                if (bits == 4)
                    isum = _mm512_dpbusd_epi32(isum, hi, _mm512_loadu_si512(xq + 64));
                const __m512 d = _mm512_loadu_ps(px->lane_d + (x_row + r) * lanes_per_row + lane0);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sv, d), acc[r]);
            }
        }
    }
    const float *b = a->biases ? a->biases + n * a->groups : NULL;
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        const float *gsum = px->group_sum + (x_row + r) * px->groups;
        __m512 bias = _mm512_setzero_ps();
        for (int64_t g = 0; b && g < a->groups; g += 16) {
            const int64_t left = a->groups - g;
            const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            bias = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, b + g),
                                   _mm512_maskz_loadu_ps(m, gsum + g), bias);
        }
        a->out[r * a->ldo + n] = _mm512_reduce_add_ps(acc[r]) + _mm512_reduce_add_ps(bias);
    }
}

/* Outputs [n0, n1) with the row count and bit width as constants. */
INLINE_VNNI void int8_outputs(const wf_qmv_int8_x *px, int64_t x_row, const wf_qmv_args *a,
                              int64_t n0, int64_t n1, int rows, int bits)
{
    int32_t lane_group[16]; /* each lane's group, counted from the step's first */
    for (int i = 0; i < 16; i++)
        lane_group[i] = i * lane_k(bits) / a->group_size;
    const __m512i index = _mm512_loadu_si512(lane_group);
    for (int64_t n = n0; n < n1; n++)
        int8_output(px, x_row, a, n, rows, bits, index);
}

ATTR_VNNI static void qmv_int8_vnni(const wf_qmv_int8_x *px, int64_t x_row,
                                    const wf_qmv_args *a, int64_t n0, int64_t n1)
{
    const int rows = a->rows < WF_QMV_ROWS ? a->rows : WF_QMV_ROWS;
    if (px->bits == 4) {
        switch (rows) {
        case 1: int8_outputs(px, x_row, a, n0, n1, 1, 4); break;
        case 2: int8_outputs(px, x_row, a, n0, n1, 2, 4); break;
        case 3: int8_outputs(px, x_row, a, n0, n1, 3, 4); break;
        default: int8_outputs(px, x_row, a, n0, n1, 4, 4); break;
        }
        return;
    }
    switch (rows) {
    case 1: int8_outputs(px, x_row, a, n0, n1, 1, 8); break;
    case 2: int8_outputs(px, x_row, a, n0, n1, 2, 8); break;
    case 3: int8_outputs(px, x_row, a, n0, n1, 3, 8); break;
    default: int8_outputs(px, x_row, a, n0, n1, 4, 8); break;
    }
}

/* ---------------------------------------------------------------- AVX2 */

#define ATTR_INT8_AVX2 __attribute__((target("avx2,fma")))
#define INLINE_INT8_AVX2 ATTR_INT8_AVX2 __attribute__((always_inline)) static inline

/* Lanes [0, n) of 8 as a vector mask. */
INLINE_INT8_AVX2 __m256i lanes8(int64_t n)
{
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? (n < 0 ? 0 : n) : 8)), iota);
}

/* The lane scales s_g of 8 lanes from group g0 on (index: each lane's
 * group minus g0, at most 1; groups past the row's end read as 0). */
INLINE_INT8_AVX2 __m256 lane_scales8(const float *scales, int64_t groups, int64_t g0,
                                     __m256i index)
{
    return _mm256_permutevar8x32_ps(_mm256_maskload_ps(scales + g0, lanes8(groups - g0)), index);
}

/* The codes' bytes [at, at + 32) of a row of `row_bytes` (a multiple of
 * 4), zero past its end. */
INLINE_INT8_AVX2 __m256i code_bytes32(const uint8_t *row, int64_t at, int64_t row_bytes)
{
    const int64_t left = row_bytes - at;
    if (left >= 32)
        return _mm256_loadu_si256((const __m256i *)(row + at));
    return _mm256_maskload_epi32((const int *)(row + at), lanes8(left / 4));
}

/* The int32 lane sums of 32 code bytes `raw` with the int8 x: 4-bit,
 * low nibbles with x_lo and high nibbles with x_hi (8 k per lane); 8-bit,
 * each byte with x_lo (4 k per lane). */
INLINE_INT8_AVX2 __m256i lane_sums(__m256i raw, const int8_t *x_lo, const int8_t *x_hi, int bits)
{
    const __m256i nibble = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_and_si256(raw, nibble);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
    const __m256i xl = _mm256_loadu_si256((const __m256i *)x_lo);
    if (bits == 4) { /* |pair| <= 2 * 15 * 127, two of them: within int16 */
        const __m256i xh = _mm256_loadu_si256((const __m256i *)x_hi);
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl),
                                               _mm256_maddubs_epi16(hi, xh));
        return _mm256_madd_epi16(pairs, ones);
    }
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xl),
                                              _mm256_set1_epi16(16)));
}

/* The sum of 8 lanes (a fixed order). */
INLINE_INT8_AVX2 float sum8(__m256 v)
{
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

/* Output n over all of K for `rows` rows of x (from px's row x_row). */
INLINE_INT8_AVX2 void int8_output_avx2(const wf_qmv_int8_x *px, int64_t x_row,
                                       const wf_qmv_args *a, int64_t n, int rows, int bits,
                                       __m256i index)
{
    const uint8_t *row = a->codes + n * a->row_bytes;
    const float *s = a->scales + n * a->groups;
    const int64_t lanes_per_row = px->kp / lane_k(bits);
    const int step = 256 / bits; /* k per 32 code bytes */
    __m256 acc[WF_QMV_ROWS];
    for (int r = 0; r < rows; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t kh = 0; kh < a->k; kh += step) {
        const __m256 sv = lane_scales8(s, a->groups, kh / a->group_size, index);
        _mm_prefetch((const char *)row + kh * bits / 8 + PREFETCH_BYTES, _MM_HINT_T0);
        const __m256i raw = code_bytes32(row, kh * bits / 8, a->row_bytes);
        /* 4-bit: xq holds per K_BLOCK the even k, then the odd (xq_slot) */
        const int64_t k0 = kh / K_BLOCK * K_BLOCK, lo = bits == 4 ? k0 + (kh - k0) / 2 : kh;
        const int64_t lane0 = kh / lane_k(bits);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const int8_t *xq = px->xq + (x_row + r) * px->kp;
            const int8_t *x_hi = bits == 4 ? xq + lo + K_BLOCK / 2 : xq + lo; /* 8-bit: unused */
            const __m256i isum = lane_sums(raw, xq + lo, x_hi, bits);
            const __m256 d = _mm256_loadu_ps(px->lane_d + (x_row + r) * lanes_per_row + lane0);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sv, d), acc[r]);
        }
    }
    const float *b = a->biases ? a->biases + n * a->groups : NULL;
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        const float *gsum = px->group_sum + (x_row + r) * px->groups;
        __m256 bias = _mm256_setzero_ps();
        for (int64_t g = 0; b && g < a->groups; g += 8) {
            const __m256i m = lanes8(a->groups - g);
            bias = _mm256_fmadd_ps(_mm256_maskload_ps(b + g, m), _mm256_maskload_ps(gsum + g, m),
                                   bias);
        }
        a->out[r * a->ldo + n] = sum8(acc[r]) + sum8(bias);
    }
}

/* Outputs [n0, n1) with the row count and bit width as constants. */
INLINE_INT8_AVX2 void int8_outputs_avx2(const wf_qmv_int8_x *px, int64_t x_row,
                                        const wf_qmv_args *a, int64_t n0, int64_t n1, int rows,
                                        int bits)
{
    int32_t lane_group[8]; /* each lane's group, counted from the step's first */
    for (int i = 0; i < 8; i++)
        lane_group[i] = i * lane_k(bits) / a->group_size;
    const __m256i index = _mm256_loadu_si256((const __m256i *)lane_group);
    for (int64_t n = n0; n < n1; n++)
        int8_output_avx2(px, x_row, a, n, rows, bits, index);
}

ATTR_INT8_AVX2 static void qmv_int8_avx2(const wf_qmv_int8_x *px, int64_t x_row,
                                         const wf_qmv_args *a, int64_t n0, int64_t n1)
{
    const int rows = a->rows < WF_QMV_ROWS ? a->rows : WF_QMV_ROWS;
    if (px->bits == 4) {
        switch (rows) {
        case 1: int8_outputs_avx2(px, x_row, a, n0, n1, 1, 4); break;
        case 2: int8_outputs_avx2(px, x_row, a, n0, n1, 2, 4); break;
        case 3: int8_outputs_avx2(px, x_row, a, n0, n1, 3, 4); break;
        default: int8_outputs_avx2(px, x_row, a, n0, n1, 4, 4); break;
        }
        return;
    }
    switch (rows) {
    case 1: int8_outputs_avx2(px, x_row, a, n0, n1, 1, 8); break;
    case 2: int8_outputs_avx2(px, x_row, a, n0, n1, 2, 8); break;
    case 3: int8_outputs_avx2(px, x_row, a, n0, n1, 3, 8); break;
    default: int8_outputs_avx2(px, x_row, a, n0, n1, 4, 8); break;
    }
}

wf_qmv_int8_fn wf__qmv_int8_kernel(int isa)
{
    const bool avx512 = isa >= WF_GEMM_ISA_AVX512;
    if (avx512 && vnni_available())
        return qmv_int8_vnni;
    return avx512 || isa == WF_GEMM_ISA_AVX2 ? qmv_int8_avx2 : NULL;
}
#else
wf_qmv_int8_fn wf__qmv_int8_kernel(int isa)
{
    (void)isa;
    return NULL;
}
#endif
