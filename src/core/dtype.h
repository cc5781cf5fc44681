/* dtype helpers: half-precision conversions and classification. Internal. */
#ifndef WEFT_CORE_DTYPE_H
#define WEFT_CORE_DTYPE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "weft.h"

bool wf__dtype_valid(wf_dtype dtype);
bool wf__dtype_is_float(wf_dtype dtype); /* f16, bf16, f32, f64 */
bool wf__dtype_is_signed_int(wf_dtype dtype);   /* i8, i16, i32, i64 */
bool wf__dtype_is_unsigned_int(wf_dtype dtype); /* u8, u16, u32, u64 */
bool wf__dtype_is_integer(wf_dtype dtype);      /* either of the above (not bool) */
bool wf__dtype_is_complex(wf_dtype dtype);      /* c64 */
bool wf__dtype_is_inexact(wf_dtype dtype);      /* a float or complex64: differentiable */
/* WF_ERR_DTYPE with a message naming `op` for complex64, else WF_OK: for the
 * ops that have no complex kernels (or that MLX rejects for complex). */
wf_status wf__reject_complex(const char *op, wf_dtype dtype);

/* IEEE binary16 and bfloat16 <-> float, round to nearest even, NaN kept. */
float wf__f16_to_f32(uint16_t h);
uint16_t wf__f32_to_f16(float f);
float wf__bf16_to_f32(uint16_t h);
uint16_t wf__f32_to_bf16(float f);
/* float64 and int64 (int32, ...) to f16/bf16, rounded once to nearest even
 * (not through float32's nearest, which would round twice), NaN kept. */
uint16_t wf__f64_to_f16(double x);
uint16_t wf__f64_to_bf16(double x);
uint16_t wf__i64_to_f16(int64_t v);
uint16_t wf__i64_to_bf16(int64_t v);
/* x rounded to float32 "to odd" (toward zero, last bit set if inexact):
 * rounding that again to a narrower type rounds x once. A float of 24 bits
 * rounded to odd then rounded to nearest even at 8 or 11 bits gives x
 * rounded once: the odd last bit keeps "above the halfway point" from
 * turning into "exactly halfway". Inline and branch-free, so conversion
 * loops vectorize. */
static inline float wf__f64_to_f32_round_odd(double x)
{
    const float f = (float)x; /* nearest even; steps one toward x if even and inexact */
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    const double back = (double)f;
    const uint32_t step = (back != x && x == x && !(b & 1u)) ? 1u : 0u;
    const uint32_t odd = fabs(x) > fabs(back) ? b + step : b - step;
    float out;
    memcpy(&out, &odd, sizeof out);
    return out;
}
/* v rounded to float32 to odd, branch-free like the above. |v| is split
 * into two halves that are exact in double (2^84 + hi * 2^32 and 2^52 + lo,
 * built from bits), whose sum is |v| rounded once to double; the error of
 * that sum is computed exactly (two-sum), so whether the float32 nearest
 * the sum is above or below |v|, or equal to it, is known exactly. */
static inline float wf__i64_to_f32_round_odd(int64_t v)
{
    const uint64_t negative = (uint64_t)v >> 63;
    const uint64_t mag = (negative ? 0u - (uint64_t)v : (uint64_t)v);
    const uint64_t hi_bits = UINT64_C(0x4530000000000000) | (mag >> 32);
    const uint64_t lo_bits = UINT64_C(0x4330000000000000) | (mag & UINT64_C(0xffffffff));
    double hi, lo;
    memcpy(&hi, &hi_bits, sizeof hi);
    memcpy(&lo, &lo_bits, sizeof lo);
    const double high = hi - 0x1.00000001p84; /* hi * 2^32 - 2^52, exact */
    const double sum = high + lo;             /* |v| to nearest double */
    const double lo_part = sum - high;
    const double error = (high - (sum - lo_part)) + (lo - lo_part); /* |v| - sum, exact */
    const float f = (float)sum;
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    const double back = (double)f;
    const uint32_t inexact = (back != sum) | (error != 0.0);
    const uint32_t above = (sum > back) | ((sum == back) & (error > 0.0)); /* |v| > f */
    const uint32_t step = inexact & ~b & 1u;
    const uint32_t odd = (above ? b + step : b - step) | (uint32_t)(negative << 31);
    float out;
    memcpy(&out, &odd, sizeof out);
    return out;
}

/* v (unsigned) rounded to float32 to odd: below 2^63 as the int64 above;
 * from 2^63 on, v / 2 with the dropped bit kept sticky (it lies far below
 * float32's last bit, so it still marks the value inexact) rounded to odd
 * and doubled (exact). Branch-free. */
static inline float wf__u64_to_f32_round_odd(uint64_t v)
{
    const bool high = v >> 63;
    const uint64_t halved = (v >> 1) | (v & 1u);
    const float f = wf__i64_to_f32_round_odd((int64_t)(high ? halved : v));
    return high ? f * 2.0f : f;
}

/* Reads element `index` of a contiguous array of `dtype` as double (a
 * complex64's real part). */
double wf__load_as_double(const void *data, wf_dtype dtype, int64_t index);
/* Writes `value` converted to `dtype` (C conversion; floats to ints truncate,
 * bool is value != 0; f16/bf16 rounded once; a complex64 gets value + 0i) at
 * element `index`. */
void wf__store_from_double(void *data, wf_dtype dtype, int64_t index, double value);

#endif
