/*
 * fp8_ref.h - the e4m3 reference of the fp8 and quantization tests
 * (test_fp8.c, test_quantized_fp.c), written from the format's definition:
 * 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits, no infinities,
 * code 0x7F / 0xFF NaN, 448 the largest finite magnitude (code 126).
 */
#ifndef WEFT_TESTS_FP8_REF_H
#define WEFT_TESTS_FP8_REF_H

#include <math.h>
#include <stdint.h>

/* The value of code c: sign, exponent (bias 7), mantissa; e = 0 subnormal. */
static inline double fp8_e4m3_value(unsigned c)
{
    const double s = (c & 0x80u) ? -1.0 : 1.0;
    const unsigned e = (c >> 3) & 15u, m = c & 7u;
    return s * (e == 0 ? m * ldexp(1.0, -9) : (8 + m) * ldexp(1.0, (int)e - 10));
}

/* The code of x: the nearest of codes 0..126 to |x|, the even one on a
 * tie (a search, independent of any rounding trick); |x| >= 464, inf and
 * NaN give 126 (448); x's sign bit. */
static inline uint8_t fp8_e4m3_nearest(double x)
{
    const unsigned sign = signbit(x) ? 0x80u : 0u;
    const double a = fabs(x);
    if (isnan(x) || a >= 464.0)
        return (uint8_t)(0x7Eu | sign);
    unsigned best = 0;
    for (unsigned c = 1; c <= 126; c++) {
        const double dc = fabs(fp8_e4m3_value(c) - a), db = fabs(fp8_e4m3_value(best) - a);
        if (dc < db || (dc == db && (c % 2 == 0) && (best % 2 == 1)))
            best = c;
    }
    return (uint8_t)(best | sign);
}

#endif
