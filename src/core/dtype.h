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
float wf__i64_to_f32_round_odd(int64_t v);

/* Reads element `index` of a contiguous array of `dtype` as double. */
double wf__load_as_double(const void *data, wf_dtype dtype, int64_t index);
/* Writes `value` converted to `dtype` (C conversion; floats to ints truncate,
 * bool is value != 0; f16/bf16 rounded once) at element `index`. */
void wf__store_from_double(void *data, wf_dtype dtype, int64_t index, double value);

#endif
