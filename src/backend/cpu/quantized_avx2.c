/* AVX2 kernels of quantized_matmul (backend/cpu/quantized.h): the
 * matrix-vector kernel of quantized_kernel.h over 8-lane vectors, and the
 * panel dequantizer. Compiled with per-function target attributes; called
 * only after a CPU check. */
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

/* The values of fp4 (e2m1) or fp8 (e4m3) codes (the low 4 or 8 bits of
 * each lane). fp8: (mantissa with its implicit bit) * 2^(max(e, 1) - 10),
 * built from integers so that no operand is subnormal (subnormal operands
 * cost microcode assists). */
INLINE_AVX2 __m256 fp_values(__m256i c, int mode)
{
    if (mode != WF_QUANT_MXFP8) { /* magnitude by the low 3 bits, then the sign */
        const __m256 mag = _mm256_permutevar8x32_ps(_mm256_set_ps(6, 4, 3, 2, 1.5f, 1, 0.5f, 0), c);
        const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
        return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(mag), sign));
    }
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(c, 3), _mm256_set1_epi32(15));
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i mant = _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi32(7)),
                                          _mm256_slli_epi32(_mm256_min_epu32(e, one), 3));
    const __m256i power = _mm256_slli_epi32(_mm256_add_epi32(_mm256_max_epu32(e, one),
                                                             _mm256_set1_epi32(127 - 10)), 23);
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(mant), _mm256_castsi256_ps(power));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), sign));
}

/* ---- the vector layer of quantized_kernel.h */

typedef __m256 vf;
typedef __m256i vi;
typedef __m256i vmask;
enum { LANES = 8 };
#define KERNEL ATTR_AVX2
#define KINLINE INLINE_AVX2

INLINE_AVX2 vf vf_zero(void) { return _mm256_setzero_ps(); }
INLINE_AVX2 vf vf_set1(float v) { return _mm256_set1_ps(v); }
INLINE_AVX2 vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
INLINE_AVX2 vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
INLINE_AVX2 vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
INLINE_AVX2 vf vf_fma_x(const float *x, vf w, vf acc) { return vf_fma(vf_set1(*x), w, acc); }
INLINE_AVX2 const float *vf_own_x(const float *x) { return x; }
INLINE_AVX2 vf vf_load(const float *p, vmask m) { return _mm256_maskload_ps(p, m); }
INLINE_AVX2 void vf_store(float *p, vmask m, vf v) { _mm256_maskstore_ps(p, m, v); }
INLINE_AVX2 vf vf_gather(const float *base, vi index, vmask m)
{
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, index, _mm256_castsi256_ps(m), 4);
}
INLINE_AVX2 vi vi_gather(const int32_t *base, vi index, vmask m)
{
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)base, index, m, 4);
}
INLINE_AVX2 vi vi_iota_times(int32_t stride)
{
    const vi iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_mullo_epi32(iota, _mm256_set1_epi32(stride));
}
INLINE_AVX2 vi vi_srli(vi v, int n) { return _mm256_srli_epi32(v, n); }
INLINE_AVX2 vi vi_srl(vi v, int n) { return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n)); }
INLINE_AVX2 vf vi_to_float(vi v) { return _mm256_cvtepi32_ps(v); }
INLINE_AVX2 vi vi_low_bits(vi v, int bits)
{
    return _mm256_and_si256(v, _mm256_set1_epi32((1 << bits) - 1));
}

/* Codes are shifted down and converted (vcvtdq2ps), their scales and
 * biases read from memory: 16 registers hold the fma chains and words. */
#define QMV_CODES_CONVERTED 1

INLINE_AVX2 vf vf_load_all(const float *p) { return _mm256_load_ps(p); }
INLINE_AVX2 vi vi_load_all(const int32_t *p) { return _mm256_load_si256((const __m256i *)p); }
INLINE_AVX2 void vf_store_all(float *p, vf v) { _mm256_storeu_ps(p, v); }

/* dst[j][r] = src[r * stride + j] for rows r < active (0 for the others)
 * and j < count (rounded up to 8): 8x8 transposes of masked row loads. */
INLINE_AVX2 void rows_to_lanes(const void *src, int64_t stride, int active, int count, void *dst)
{
    const int32_t *s = src;
    __m256i *d = dst;
    for (int j0 = 0; j0 < count; j0 += 8) {
        const __m256i m = lanes(count - j0);
        __m256i r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            r[i] = i < active ? _mm256_maskload_epi32(s + i * stride + j0, m)
                              : _mm256_setzero_si256();
        __m256i t[8], u[8];
#pragma GCC unroll 4
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
        }
#pragma GCC unroll 2
        for (int i = 0; i < 8; i += 4) { /* columns (c, c + 4) for c = 0 .. 3, rows i .. i + 3 */
            u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
            u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
            u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
            u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            _mm256_store_si256(d + j0 + c, _mm256_permute2x128_si256(u[c], u[c + 4], 0x20));
            _mm256_store_si256(d + j0 + c + 4, _mm256_permute2x128_si256(u[c], u[c + 4], 0x31));
        }
    }
}

#include "backend/cpu/quantized_kernel.h"

DEFINE_QMV(qmv_avx2)
DEFINE_QPACK(qpack_avx2)

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
const wf_qpack_fn wf__qpack_avx2 = qpack_avx2;
#else
const wf_qmv_fn wf__qmv_avx2 = 0;
const wf_qdeq_fn wf__qdeq_avx2 = 0;
const wf_qpack_fn wf__qpack_avx2 = 0;
#endif
