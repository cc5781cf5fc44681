/* A 16 x 16 transpose of 32-bit elements held in sixteen 512-bit registers,
 * for the AVX-512 kernels (sort_avx512.c's networks, gemm_amx.c's packing,
 * quantized_avx512.c's rows to lanes). Internal; moves only. */
#ifndef WEFT_BACKEND_CPU_TRANSPOSE_AVX512_H
#define WEFT_BACKEND_CPU_TRANSPOSE_AVX512_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Lane j of register i goes to lane i of register j. */
__attribute__((target("avx512f"), always_inline)) static inline void
wf__transpose16_epi32(__m512i *r)
{
    __m512i t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + j]: in 128-bit lane q, the elements of column 4q + j of rows
     * 4i .. 4i + 3 */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m512i even_low = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i odd_low = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
        const __m512i even_high = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i odd_high = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_i32x4(even_low, even_high, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(odd_low, odd_high, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(even_low, even_high, 0xDD);
        r[12 + j] = _mm512_shuffle_i32x4(odd_low, odd_high, 0xDD);
    }
}
#endif

#endif
