/* AVX-512 kernels of quantized_matmul (backend/cpu/quantized.h): the
 * matrix-vector kernel of quantized_kernel.h over 16-lane vectors, and the
 * panel dequantizer. Compiled with per-function target attributes; called
 * only after a CPU check. */
#include "backend/cpu/quantized.h"

#include "backend/cpu/transpose_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ATTR_512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
#define INLINE_512 ATTR_512 __attribute__((always_inline)) static inline

INLINE_512 __mmask16 lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* The values of fp4 (e2m1) or fp8 (e4m3) codes (the low 4 or 8 bits of
 * each lane). fp8: (mantissa with its implicit bit) * 2^(max(e, 1) - 10),
 * built from integers so that no operand is subnormal (subnormal operands
 * cost microcode assists). */
INLINE_512 __m512 fp_values(__m512i c, int mode)
{
    if (mode != WF_QUANT_MXFP8) /* the 16 values, indexed by the code's low 4 bits */
        return _mm512_permutexvar_ps(c, _mm512_set_ps(-6, -4, -3, -2, -1.5f, -1, -0.5f, -0.0f, 6,
                                                      4, 3, 2, 1.5f, 1, 0.5f, 0));
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(c, 3), _mm512_set1_epi32(15));
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i mant = _mm512_or_si512(_mm512_and_si512(c, _mm512_set1_epi32(7)),
                                          _mm512_slli_epi32(_mm512_min_epu32(e, one), 3));
    const __m512i power = _mm512_slli_epi32(_mm512_add_epi32(_mm512_max_epu32(e, one),
                                                             _mm512_set1_epi32(127 - 10)), 23);
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(mant), _mm512_castsi512_ps(power));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}

/* ---- the vector layer of quantized_kernel.h */

typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vmask;
enum { LANES = 16 };
#define KERNEL ATTR_512
#define KINLINE INLINE_512

INLINE_512 vf vf_zero(void) { return _mm512_setzero_ps(); }
INLINE_512 vf vf_set1(float v) { return _mm512_set1_ps(v); }
INLINE_512 vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
INLINE_512 vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
INLINE_512 vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
INLINE_512 vf vf_fma_x(const float *x, vf w, vf acc)
{
    return _mm512_fmadd_ps(_mm512_set1_ps(*x), w, acc);
}
/* x, as a pointer GCC cannot prove equal to x. Where two fmas read the
 * same x through different pointers, each broadcasts it itself ({1to16}
 * operand); through one pointer GCC loads it once with vbroadcastss, and
 * on Zen 4 that broadcast takes a vector pipe (8 of them: 10.4 cycles,
 * against 7.6 for 8 fmas that broadcast their operand; 4-bit matvec from
 * L3 on one core: 12.9 -> 14.0 GB/s). On Intel both are a load. */
INLINE_512 const float *vf_own_x(const float *x)
{
    __asm__("" : "+r"(x));
    return x;
}
INLINE_512 vf vf_load(const float *p, vmask m) { return _mm512_maskz_loadu_ps(m, p); }
INLINE_512 void vf_store(float *p, vmask m, vf v) { _mm512_mask_storeu_ps(p, m, v); }
INLINE_512 vf vf_gather(const float *base, vi index, vmask m)
{
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, index, base, 4);
}
INLINE_512 vi vi_gather(const int32_t *base, vi index, vmask m)
{
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, index, base, 4);
}
INLINE_512 vi vi_iota_times(int32_t stride)
{
    const vi iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_mullo_epi32(iota, _mm512_set1_epi32(stride));
}
INLINE_512 vi vi_srli(vi v, int n) { return _mm512_srli_epi32(v, (unsigned)n); }
INLINE_512 vi vi_srl(vi v, int n) { return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n)); }
INLINE_512 vf vi_to_float(vi v) { return _mm512_cvtepi32_ps(v); }
INLINE_512 vi vi_low_bits(vi v, int bits)
{
    return _mm512_and_si512(v, _mm512_set1_epi32((1 << bits) - 1));
}

/* Codes masked in place (32 registers hold s and c per bit offset). */
#define QMV_CODES_CONVERTED 0

/* A 16-bit half of each lane's word (high: the upper) under the exponent
 * of 2^23: the float 2^23 + half. Done once per word; code_float then
 * needs one AND (any vector pipe; a ternary-logic instruction runs only
 * on the pipes the FMAs need). The low half is a 16-bit blend with the
 * exponent for the same reason (the ternary-logic form: 4-bit from L2 on
 * one Zen 4 core 14.0 GB/s, 14.2 with the blend). */
INLINE_512 vi half_word_float(vi word, bool high)
{
    const vi exponent = _mm512_set1_epi32(150 << 23);
    vi half = high ? _mm512_or_si512(_mm512_srli_epi32(word, 16), exponent)
                   : _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, word, exponent);
    __asm__("" : "+v"(half)); /* kept whole: GCC would fold the OR into each code's AND */
    return half;
}

/* The code at bit p of a half_word_float, kept in place: the float
 * 2^23 + code * 2^p. */
INLINE_512 vf code_float(vi half, int p, int bits)
{
    const vi keep = _mm512_set1_epi32((int32_t)(0x7F800000u | (uint32_t)((1 << bits) - 1) << p));
    return _mm512_castsi512_ps(_mm512_and_si512(half, keep));
}

INLINE_512 vf vf_load_all(const float *p) { return _mm512_load_ps(p); }
INLINE_512 vi vi_load_all(const int32_t *p) { return _mm512_load_si512(p); }
INLINE_512 void vf_store_all(float *p, vf v) { _mm512_storeu_ps(p, v); }

/* dst[j][r] = src[r * stride + j] for rows r < active (0 for the others)
 * and j < count: 16x16 transposes of masked row loads (a gather per j
 * took 60% of the kernel's time on Zen 4, whose gathers are microcoded).
 * Out of line: inlined into every kernel variant, it quadrupled the
 * file's compile time under the sanitizers. */
ATTR_512 __attribute__((noinline)) static void rows_to_lanes(const void *src, int64_t stride,
                                                         int active, int count, void *dst)
{
    const int32_t *s = src;
    __m512i *d = dst;
    if (active == 16 && count == 16) { /* the common case, kept in registers */
        __m512i r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = _mm512_loadu_si512(s + i * stride);
        wf__transpose16_epi32(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            _mm512_store_si512(d + j, r[j]);
        return;
    }
    for (int j0 = 0; j0 < count; j0 += 16) {
        const __mmask16 m = lanes(count - j0);
        __m512i r[16];
        if (active == 16) /* the common case: one mask, r kept in registers */
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = _mm512_maskz_loadu_epi32(m, s + i * stride + j0);
        else
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = i < active ? _mm512_maskz_loadu_epi32(m, s + i * stride + j0)
                                  : _mm512_setzero_si512();
        wf__transpose16_epi32(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            if (j0 + j < count)
                _mm512_store_si512(d + j0 + j, r[j]);
    }
}

INLINE_512 bool scales_in_range(const float *s, int64_t n)
{
    const __m512 lo = _mm512_set1_ps(0x1p-100f), hi = _mm512_set1_ps(0x1p100f);
    for (int64_t g = 0; g < n; g += 16) {
        const __mmask16 m = lanes(n - g);
        const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, s + g));
        const __mmask16 ok = _mm512_mask_cmp_ps_mask(m, v, lo, _CMP_GE_OQ) &
                             _mm512_mask_cmp_ps_mask(m, v, hi, _CMP_LE_OQ);
        if (ok != m)
            return false;
    }
    return true;
}

#include "backend/cpu/quantized_kernel.h"

DEFINE_QMV(qmv_avx512)
DEFINE_QPACK(qpack_avx512)

/* 16 codes from `row` at code j (a multiple of 16) as int32 lanes. */
INLINE_512 __m512i codes16(const uint8_t *row, int64_t j, int bits)
{
    const uint8_t *p = row + j * bits / 8;
    if (bits == 8)
        return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    if (bits == 4) {
        const __m128i x = _mm_loadl_epi64((const __m128i *)p), low = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_and_si128(x, low), hi = _mm_and_si128(_mm_srli_epi16(x, 4), low);
        return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
    }
    int32_t word;
    __builtin_memcpy(&word, p, 4);
    const __m512i shifts =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(word), shifts),
                            _mm512_set1_epi32(3));
}



ATTR_512 static void qdeq_avx512(const uint8_t *row, const float *scales, const float *biases,
                                 int group_size, int bits, int mode, int64_t j0, int64_t count,
                                 float *dst)
{
    for (int64_t j = 0; j < count; j += 16) {
        const int64_t g = (j0 + j) / group_size;
        if (mode != WF_QUANT_AFFINE) {
            const __m512 v = fp_values(codes16(row, j0 + j, bits), mode);
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(v, _mm512_set1_ps(scales[g])));
            continue;
        }
        const __m512 q = _mm512_cvtepi32_ps(codes16(row, j0 + j, bits));
        _mm512_storeu_ps(dst + j, _mm512_add_ps(_mm512_mul_ps(q, _mm512_set1_ps(scales[g])),
                                                _mm512_set1_ps(biases[g])));
    }
}

const wf_qmv_fn wf__qmv_avx512 = qmv_avx512;
const wf_qdeq_fn wf__qdeq_avx512 = qdeq_avx512;
const wf_qpack_fn wf__qpack_avx512 = qpack_avx512;
#else
const wf_qmv_fn wf__qmv_avx512 = 0;
const wf_qdeq_fn wf__qdeq_avx512 = 0;
const wf_qpack_fn wf__qpack_avx512 = 0;
#endif
