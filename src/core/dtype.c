#include "core/dtype.h"

#include <math.h>
#include <string.h>

static const size_t dtype_sizes[WF_DTYPE_COUNT] = {1, 1, 4, 8, 2, 2, 4, 8};
static const char *const dtype_names[WF_DTYPE_COUNT] = {
    "bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"};

bool wf__dtype_valid(wf_dtype dtype) { return (unsigned)dtype < WF_DTYPE_COUNT; }

bool wf__dtype_is_float(wf_dtype dtype)
{
    return dtype == WF_DTYPE_F16 || dtype == WF_DTYPE_BF16 || dtype == WF_DTYPE_F32 ||
           dtype == WF_DTYPE_F64;
}

size_t wf_dtype_size(wf_dtype dtype) { return wf__dtype_valid(dtype) ? dtype_sizes[dtype] : 0; }

const char *wf_dtype_name(wf_dtype dtype)
{
    return wf__dtype_valid(dtype) ? dtype_names[dtype] : "invalid";
}

/* Promotion lattice: bool < u8 < i32 < i64 < f16|bf16 < f32 < f64, with
 * f16 + bf16 = f32 (neither holds the other). */
static int dtype_rank(wf_dtype d)
{
    switch (d) {
    case WF_DTYPE_BOOL: return 0;
    case WF_DTYPE_U8: return 1;
    case WF_DTYPE_I32: return 2;
    case WF_DTYPE_I64: return 3;
    case WF_DTYPE_F16:
    case WF_DTYPE_BF16: return 4;
    case WF_DTYPE_F32: return 5;
    case WF_DTYPE_F64: return 6;
    default: return -1;
    }
}

wf_dtype wf_promote_types(wf_dtype a, wf_dtype b)
{
    if (!wf__dtype_valid(a) || !wf__dtype_valid(b))
        return WF_DTYPE_COUNT;
    if (a == b)
        return a;
    if ((a == WF_DTYPE_F16 && b == WF_DTYPE_BF16) || (a == WF_DTYPE_BF16 && b == WF_DTYPE_F16))
        return WF_DTYPE_F32;
    return dtype_rank(a) >= dtype_rank(b) ? a : b;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float wf__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) /* inf or NaN */
        return bits_f32(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24 */
        float value = (float)mantissa * 5.9604644775390625e-8f;
        return sign ? -value : value;
    }
    return bits_f32(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t wf__f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs_bits = u & 0x7fffffffu;
    if (abs_bits >= 0x7f800000u) /* inf or NaN (keep a quiet NaN) */
        return (uint16_t)(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0));
    if (abs_bits >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (abs_bits < 0x38800000u) { /* below 2^-14: subnormal or zero */
        /* Adding 0.5 shifts the value so the FPU's round-to-nearest-even
         * leaves the half subnormal bits in the low mantissa. */
        float shifted = bits_f32(abs_bits) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(f32_bits(shifted) - 0x3f000000u));
    }
    uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
    abs_bits += 0xc8000fffu + mantissa_odd; /* rebias exponent and round to nearest even */
    return (uint16_t)(sign | (uint16_t)(abs_bits >> 13));
}

float wf__bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t wf__f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t wf__f64_to_f16(double x) { return wf__f32_to_f16(wf__f64_to_f32_round_odd(x)); }
uint16_t wf__f64_to_bf16(double x) { return wf__f32_to_bf16(wf__f64_to_f32_round_odd(x)); }
uint16_t wf__i64_to_f16(int64_t v) { return wf__f32_to_f16(wf__i64_to_f32_round_odd(v)); }
uint16_t wf__i64_to_bf16(int64_t v) { return wf__f32_to_bf16(wf__i64_to_f32_round_odd(v)); }

double wf__load_as_double(const void *data, wf_dtype dtype, int64_t index)
{
    switch (dtype) {
    case WF_DTYPE_BOOL: return ((const uint8_t *)data)[index] ? 1.0 : 0.0;
    case WF_DTYPE_U8: return ((const uint8_t *)data)[index];
    case WF_DTYPE_I32: return ((const int32_t *)data)[index];
    case WF_DTYPE_I64: return (double)((const int64_t *)data)[index];
    case WF_DTYPE_F16: return wf__f16_to_f32(((const uint16_t *)data)[index]);
    case WF_DTYPE_BF16: return wf__bf16_to_f32(((const uint16_t *)data)[index]);
    case WF_DTYPE_F32: return ((const float *)data)[index];
    case WF_DTYPE_F64: return ((const double *)data)[index];
    default: return NAN;
    }
}

/* Float to integer conversion that is defined for every input: NaN gives 0,
 * out-of-range values saturate (C leaves these undefined). */
static int64_t saturate_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

void wf__store_from_double(void *data, wf_dtype dtype, int64_t index, double value)
{
    switch (dtype) {
    case WF_DTYPE_BOOL: ((uint8_t *)data)[index] = value != 0.0; break;
    case WF_DTYPE_U8: {
        int64_t v = saturate_i64(value);
        ((uint8_t *)data)[index] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        break;
    }
    case WF_DTYPE_I32: {
        int64_t v = saturate_i64(value);
        ((int32_t *)data)[index] = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
        break;
    }
    case WF_DTYPE_I64: ((int64_t *)data)[index] = saturate_i64(value); break;
    case WF_DTYPE_F16: ((uint16_t *)data)[index] = wf__f64_to_f16(value); break;
    case WF_DTYPE_BF16: ((uint16_t *)data)[index] = wf__f64_to_bf16(value); break;
    case WF_DTYPE_F32: ((float *)data)[index] = (float)value; break;
    case WF_DTYPE_F64: ((double *)data)[index] = value; break;
    default: break;
    }
}
