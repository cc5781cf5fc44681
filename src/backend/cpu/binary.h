/*
 * CPU binary and ternary element-wise kernels, and fast half-precision
 * conversions for block loops. Internal.
 *
 * Every kernel here takes inputs of the output's shape (the op constructor
 * inserted broadcast views) and one compute dtype (the op inserted casts);
 * the strides may be anything. Halves (f16, bf16) are computed in float32:
 * a block of elements is converted into a small local buffer with the
 * branch-free converters below (which GCC vectorizes), the float32 loop runs
 * over the block, and the result is converted back.
 */
#ifndef WEFT_BACKEND_CPU_BINARY_H
#define WEFT_BACKEND_CPU_BINARY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/array.h"
#include "weft.h"

/* ---------------------------------------------------------------- halves */

static inline uint32_t wf__cpu_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float wf__cpu_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 -> float32, exact (the same values as wf__f16_to_f32; a
 * signaling NaN comes back quiet). Branch-free (after M. Dukhan's FP16). */
static inline float wf__cpu_f16_to_f32(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    /* Normal, inf and NaN: shift the exponent and mantissa into place and
     * rebias with one exact multiply. */
    const float normalized = wf__cpu_bits_f32((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    /* Subnormal and zero: the mantissa under the exponent of 0.5, minus 0.5. */
    const float denormalized = wf__cpu_bits_f32((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t bits = two_w < (1u << 27) ? wf__cpu_f32_bits(denormalized)
                                             : wf__cpu_f32_bits(normalized);
    return wf__cpu_bits_f32(sign | bits);
}

/* float32 -> IEEE binary16 with round to nearest even; overflow gives inf,
 * NaN gives the quiet NaN 0x7e00 with the sign kept: bit-identical to
 * wf__f32_to_f16. The rounding is done by the FPU's float32 addition (the
 * default rounding mode), branch-free. */
static inline uint16_t wf__cpu_f32_to_f16(float f)
{
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = wf__cpu_f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    base = wf__cpu_bits_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = wf__cpu_f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

/* bfloat16 <-> float32 (round to nearest even, NaN kept quiet): identical to
 * wf__bf16_to_f32 / wf__f32_to_bf16, branch-free. */
static inline float wf__cpu_bf16_to_f32(uint16_t h) { return wf__cpu_bits_f32((uint32_t)h << 16); }
static inline uint16_t wf__cpu_f32_to_bf16(float f)
{
    const uint32_t u = wf__cpu_f32_bits(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* Block conversions for `dtype` F16 or BF16: n elements, element stride on
 * the half side (may be 0 or negative), contiguous on the float side. */
void wf__cpu_halves_to_f32(int64_t n, const uint16_t *src, int64_t stride, wf_dtype dtype,
                           float *dst);
void wf__cpu_f32_to_halves(int64_t n, const float *src, uint16_t *dst, int64_t stride,
                           wf_dtype dtype);

/* ---------------------------------------------------------------- kernels */

/* Binary: inputs[0], inputs[1] of the compute dtype; the output has that
 * dtype, or bool for comparisons and logical ops. */
#define WF__CPU_BINARY_KERNELS(X)                                                       \
    X(subtract)                                                                         \
    X(divide)                                                                           \
    X(power)                                                                            \
    X(maximum)                                                                          \
    X(minimum)                                                                          \
    X(floor_divide)                                                                     \
    X(remainder)                                                                        \
    X(equal)                                                                            \
    X(not_equal)                                                                        \
    X(less)                                                                             \
    X(less_equal)                                                                       \
    X(greater)                                                                          \
    X(greater_equal)                                                                    \
    X(logical_and)                                                                      \
    X(logical_or)                                                                       \
    X(logaddexp)                                                                        \
    X(arctan2)                                                                          \
    X(bitwise_and)                                                                      \
    X(bitwise_or)                                                                       \
    X(bitwise_xor)                                                                      \
    X(left_shift)                                                                       \
    X(right_shift)

#define WF__CPU_DECLARE_KERNEL(NAME)                                                    \
    wf_status wf__cpu_##NAME(wf_array *out, wf_array *const *inputs, int ninputs,       \
                             const void *params);
WF__CPU_BINARY_KERNELS(WF__CPU_DECLARE_KERNEL)

/* complex: (float32 re, float32 im) -> complex64; real, imag: complex64 ->
 * float32; conjugate: complex64 -> complex64. */
WF__CPU_DECLARE_KERNEL(complex)
WF__CPU_DECLARE_KERNEL(real)
WF__CPU_DECLARE_KERNEL(imag)
WF__CPU_DECLARE_KERNEL(conjugate)

/* where: inputs (cond bool, a, b), a and b of the output dtype. */
WF__CPU_DECLARE_KERNEL(where)
/* clip: inputs (a, low, high), all of the output dtype; NaN propagates. */
WF__CPU_DECLARE_KERNEL(clip)

#endif
