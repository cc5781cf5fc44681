/* gemm.h's epilogue rule for 16 float32 sums, shared by the AVX-512 tiles
 * (gemm_avx512.c), the AMX blocks (gemm_amx.c) and the complex64 sweeps
 * (gemm_complex.c), so all store C alike. Internal. */
#ifndef WEFT_BACKEND_CPU_GEMM_EPILOGUE_AVX512_H
#define WEFT_BACKEND_CPU_GEMM_EPILOGUE_AVX512_H

#include "backend/cpu/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The value to store for sums `acc` over C lanes `m` at c. */
__attribute__((target("avx512f,fma"), always_inline)) static inline __m512
wf__gemm_finish_f32x16(__m512 acc, const float *c, __mmask16 m, const wf_gemm_epilogue *e)
{
    const __m512 alpha = _mm512_set1_ps((float)e->alpha);
    if (e->mode == WF_GEMM_STORE_SET)
        return _mm512_mul_ps(alpha, acc);
    __m512 old = _mm512_maskz_loadu_ps(m, c);
    if (e->mode == WF_GEMM_STORE_BETA)
        old = _mm512_mul_ps(_mm512_set1_ps((float)e->beta), old);
    return _mm512_fmadd_ps(alpha, acc, old);
}
#endif

#endif
