/* AVX2 matrix-vector kernel of quantized_matmul (backend/cpu/quantized.h):
 * the AVX-512 kernel's scheme with 8 lanes (8 rows of W at a time).
 * Compiled with per-function target attributes; called only after a CPU
 * check. */
#include "backend/cpu/quantized.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ATTR_AVX2 __attribute__((target("avx2,fma")))
#define INLINE_AVX2 ATTR_AVX2 __attribute__((always_inline)) static inline

/* Lanes [0, n) of 8 as a vector mask. */
INLINE_AVX2 __m256i lanes(int64_t n)
{
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), iota);
}

INLINE_AVX2 void accumulate(__m256i word, int shift, int count, int bits, __m256 s, __m256 b,
                            const float *x, int64_t ldx, int rows, int64_t k, int j0,
                            __m256 *acc)
{
    const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
    for (int j = 0; j < count; j++) {
        const __m256i q = _mm256_and_si256(
            _mm256_srl_epi32(word, _mm_cvtsi32_si128(shift + j * bits)), mask);
        const __m256 w = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), s), b);
        for (int r = 0; r < rows; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r * ldx + k + j0 + j]), w, acc[r]);
    }
}

INLINE_AVX2 void block_sums(const wf_qmv_args *a, int64_t nb, __m256i m, int64_t k0, int64_t k1,
                            int rows, __m256 *acc)
{
    const int bits = a->bits, gs = a->group_size;
    const int *words = (const int *)(a->codes + nb * a->row_bytes);
    const float *sb = a->scales + nb * a->groups, *bb = a->biases + nb * a->groups;
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i word_index = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)(a->row_bytes / 4)));
    const __m256i group_index = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)a->groups));
    const __m256 mf = _mm256_castsi256_ps(m);
    __m256 s = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    for (int r = 0; r < rows; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t k = k0; k < k1; k += 8) {
        if (k == k0 || k % gs == 0) {
            const int64_t g = k / gs;
            s = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), sb + g, group_index, mf, 4);
            b = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), bb + g, group_index, mf, 4);
        }
        const int64_t bit = k * bits;
        const __m256i w0 =
            _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), words + bit / 32, word_index, m, 4);
        if (bits == 8) {
            const __m256i w1 = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                           words + bit / 32 + 1, word_index, m, 4);
            accumulate(w0, 0, 4, 8, s, b, a->x, a->ldx, rows, k, 0, acc);
            accumulate(w1, 0, 4, 8, s, b, a->x, a->ldx, rows, k, 4, acc);
        } else {
            accumulate(w0, (int)(bit % 32), 8, bits, s, b, a->x, a->ldx, rows, k, 0, acc);
        }
    }
}

INLINE_AVX2 void qmv_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int rows)
{
    for (int64_t nb = n0; nb < n1; nb += 8) {
        const __m256i m = lanes(n1 - nb);
        for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
            const int64_t k1 = k0 + a->kcb < a->k ? k0 + a->kcb : a->k;
            __m256 acc[WF_QMV_ROWS];
            block_sums(a, nb, m, k0, k1, rows, acc);
            for (int r = 0; r < rows; r++) {
                float *c = a->out + r * a->ldo + nb;
                const __m256 v =
                    k0 == 0 ? acc[r] : _mm256_add_ps(_mm256_maskload_ps(c, m), acc[r]);
                _mm256_maskstore_ps(c, m, v);
            }
        }
    }
}

ATTR_AVX2 static void qmv_avx2(const wf_qmv_args *a, int64_t n0, int64_t n1)
{
    switch (a->rows) {
    case 1: qmv_rows(a, n0, n1, 1); break;
    case 2: qmv_rows(a, n0, n1, 2); break;
    case 3: qmv_rows(a, n0, n1, 3); break;
    default: qmv_rows(a, n0, n1, 4); break;
    }
}

/* 8 codes from `row` at code j (a multiple of 8) as int32 lanes. */
INLINE_AVX2 __m256i codes8(const uint8_t *row, int64_t j, int bits)
{
    const uint8_t *p = row + j * bits / 8;
    if (bits == 8)
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    int32_t word = 0;
    __builtin_memcpy(&word, p, (size_t)bits); /* 8 codes: `bits` bytes */
    const __m256i shifts = bits == 4 ? _mm256_set_epi32(28, 24, 20, 16, 12, 8, 4, 0)
                                     : _mm256_set_epi32(14, 12, 10, 8, 6, 4, 2, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), shifts),
                            _mm256_set1_epi32((1 << bits) - 1));
}


/* The values of fp4 (e2m1) or fp8 (e4m3) codes: the magnitude bits placed
 * at the top of a float32 mantissa and exponent, scaled by the difference
 * of the biases (exact, subnormal codes included), and the sign bit. */
INLINE_AVX2 __m256 fp_values(__m256i c, int mode)
{
    const bool fp8 = mode == WF_QUANT_MXFP8;
    const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(fp8 ? 0x7f : 7));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(fp8 ? 0x80 : 8)),
                                           fp8 ? 24 : 28);
    const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, fp8 ? 20 : 22)),
                                   _mm256_set1_ps(fp8 ? 0x1p120f : 0x1p126f));
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), sign));
}

ATTR_AVX2 static void qdeq_avx2(const uint8_t *row, const float *scales, const float *biases,
                                int group_size, int bits, int mode, int64_t j0, int64_t count,
                                float *dst)
{
    for (int64_t j = 0; j < count; j += 8) {
        const int64_t g = (j0 + j) / group_size;
        if (mode != WF_QUANT_AFFINE) {
            const __m256 v = fp_values(codes8(row, j0 + j, bits), mode);
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(v, _mm256_set1_ps(scales[g])));
            continue;
        }
        const __m256 q = _mm256_cvtepi32_ps(codes8(row, j0 + j, bits));
        _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_mul_ps(q, _mm256_set1_ps(scales[g])),
                                                _mm256_set1_ps(biases[g])));
    }
}

const wf_qmv_fn wf__qmv_avx2 = qmv_avx2;
const wf_qdeq_fn wf__qdeq_avx2 = qdeq_avx2;
#else
const wf_qmv_fn wf__qmv_avx2 = 0;
const wf_qdeq_fn wf__qdeq_avx2 = 0;
#endif
