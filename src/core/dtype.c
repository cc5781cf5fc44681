#include "core/dtype.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

static const size_t dtype_sizes[WF_DTYPE_COUNT] = {
    [WF_DTYPE_BOOL] = 1, [WF_DTYPE_U8] = 1,  [WF_DTYPE_I32] = 4,  [WF_DTYPE_I64] = 8,
    [WF_DTYPE_F16] = 2,  [WF_DTYPE_BF16] = 2, [WF_DTYPE_F32] = 4,  [WF_DTYPE_F64] = 8,
    [WF_DTYPE_I8] = 1,   [WF_DTYPE_I16] = 2,  [WF_DTYPE_U16] = 2,  [WF_DTYPE_U32] = 4,
    [WF_DTYPE_U64] = 8,  [WF_DTYPE_C64] = 8};
static const char *const dtype_names[WF_DTYPE_COUNT] = {
    [WF_DTYPE_BOOL] = "bool",    [WF_DTYPE_U8] = "uint8",       [WF_DTYPE_I32] = "int32",
    [WF_DTYPE_I64] = "int64",    [WF_DTYPE_F16] = "float16",    [WF_DTYPE_BF16] = "bfloat16",
    [WF_DTYPE_F32] = "float32",  [WF_DTYPE_F64] = "float64",    [WF_DTYPE_I8] = "int8",
    [WF_DTYPE_I16] = "int16",    [WF_DTYPE_U16] = "uint16",     [WF_DTYPE_U32] = "uint32",
    [WF_DTYPE_U64] = "uint64",   [WF_DTYPE_C64] = "complex64"};

bool wf__dtype_valid(wf_dtype dtype) { return (unsigned)dtype < WF_DTYPE_COUNT; }

bool wf__dtype_is_float(wf_dtype dtype)
{
    return dtype == WF_DTYPE_F16 || dtype == WF_DTYPE_BF16 || dtype == WF_DTYPE_F32 ||
           dtype == WF_DTYPE_F64;
}

bool wf__dtype_is_signed_int(wf_dtype dtype)
{
    return dtype == WF_DTYPE_I8 || dtype == WF_DTYPE_I16 || dtype == WF_DTYPE_I32 ||
           dtype == WF_DTYPE_I64;
}

bool wf__dtype_is_unsigned_int(wf_dtype dtype)
{
    return dtype == WF_DTYPE_U8 || dtype == WF_DTYPE_U16 || dtype == WF_DTYPE_U32 ||
           dtype == WF_DTYPE_U64;
}

bool wf__dtype_is_integer(wf_dtype dtype)
{
    return wf__dtype_is_signed_int(dtype) || wf__dtype_is_unsigned_int(dtype);
}

bool wf__dtype_is_complex(wf_dtype dtype) { return dtype == WF_DTYPE_C64; }

bool wf__dtype_is_inexact(wf_dtype dtype)
{
    return wf__dtype_is_float(dtype) || wf__dtype_is_complex(dtype);
}

wf_status wf__reject_complex(const char *op, wf_dtype dtype)
{
    if (dtype != WF_DTYPE_C64)
        return WF_OK;
    return wf__error(WF_ERR_DTYPE, "%s: complex64 inputs are not supported", op);
}

size_t wf_dtype_size(wf_dtype dtype) { return wf__dtype_valid(dtype) ? dtype_sizes[dtype] : 0; }

const char *wf_dtype_name(wf_dtype dtype)
{
    return wf__dtype_valid(dtype) ? dtype_names[dtype] : "invalid";
}

/* The signed integer type of `bytes` bytes (1, 2, 4 or 8). */
static wf_dtype signed_of_size(size_t bytes)
{
    switch (bytes) {
    case 1: return WF_DTYPE_I8;
    case 2: return WF_DTYPE_I16;
    case 4: return WF_DTYPE_I32;
    default: return WF_DTYPE_I64;
    }
}

/* Float with float: float64 holds every other; f16 and bf16 hold neither
 * the other (float32 holds both); float32 holds the halves. */
static wf_dtype promote_floats(wf_dtype a, wf_dtype b)
{
    if (a == WF_DTYPE_F64 || b == WF_DTYPE_F64)
        return WF_DTYPE_F64;
    if (a == WF_DTYPE_F32 || b == WF_DTYPE_F32 || a != b)
        return WF_DTYPE_F32;
    return a;
}

/* Unsigned u with signed s: the signed type if it is wider, else the signed
 * type twice u's size; uint64 has no wider signed type and gives float32
 * (MLX, after JAX). */
static wf_dtype promote_mixed_sign(wf_dtype u, wf_dtype s)
{
    if (u == WF_DTYPE_U64)
        return WF_DTYPE_F32;
    if (wf_dtype_size(s) > wf_dtype_size(u))
        return s;
    return signed_of_size(2 * wf_dtype_size(u));
}

wf_dtype wf_promote_types(wf_dtype a, wf_dtype b)
{
    if (!wf__dtype_valid(a) || !wf__dtype_valid(b))
        return WF_DTYPE_COUNT;
    if (a == b)
        return a;
    if (a == WF_DTYPE_C64 || b == WF_DTYPE_C64)
        return WF_DTYPE_C64;
    const bool fa = wf__dtype_is_float(a), fb = wf__dtype_is_float(b);
    if (fa && fb)
        return promote_floats(a, b);
    if (fa || fb)
        return fa ? a : b;
    if (a == WF_DTYPE_BOOL || b == WF_DTYPE_BOOL)
        return a == WF_DTYPE_BOOL ? b : a;
    const bool ua = wf__dtype_is_unsigned_int(a), ub = wf__dtype_is_unsigned_int(b);
    if (ua == ub)
        return wf_dtype_size(a) >= wf_dtype_size(b) ? a : b;
    return ua ? promote_mixed_sign(a, b) : promote_mixed_sign(b, a);
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
    case WF_DTYPE_I8: return ((const int8_t *)data)[index];
    case WF_DTYPE_I16: return ((const int16_t *)data)[index];
    case WF_DTYPE_U16: return ((const uint16_t *)data)[index];
    case WF_DTYPE_U32: return ((const uint32_t *)data)[index];
    case WF_DTYPE_U64: return (double)((const uint64_t *)data)[index];
    case WF_DTYPE_C64: return ((const float *)data)[2 * index]; /* the real part */
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

static int64_t clamp_i64(int64_t v, int64_t low, int64_t high)
{
    return v < low ? low : v > high ? high : v;
}

static uint64_t saturate_u64(double v)
{
    if (!(v > 0.0)) /* NaN too */
        return 0;
    if (v >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

void wf__store_from_double(void *data, wf_dtype dtype, int64_t index, double value)
{
    switch (dtype) {
    case WF_DTYPE_BOOL: ((uint8_t *)data)[index] = value != 0.0; break;
    case WF_DTYPE_U8:
        ((uint8_t *)data)[index] = (uint8_t)clamp_i64(saturate_i64(value), 0, UINT8_MAX);
        break;
    case WF_DTYPE_I32:
        ((int32_t *)data)[index] =
            (int32_t)clamp_i64(saturate_i64(value), INT32_MIN, INT32_MAX);
        break;
    case WF_DTYPE_I64: ((int64_t *)data)[index] = saturate_i64(value); break;
    case WF_DTYPE_F16: ((uint16_t *)data)[index] = wf__f64_to_f16(value); break;
    case WF_DTYPE_BF16: ((uint16_t *)data)[index] = wf__f64_to_bf16(value); break;
    case WF_DTYPE_F32: ((float *)data)[index] = (float)value; break;
    case WF_DTYPE_F64: ((double *)data)[index] = value; break;
    case WF_DTYPE_I8:
        ((int8_t *)data)[index] = (int8_t)clamp_i64(saturate_i64(value), INT8_MIN, INT8_MAX);
        break;
    case WF_DTYPE_I16:
        ((int16_t *)data)[index] =
            (int16_t)clamp_i64(saturate_i64(value), INT16_MIN, INT16_MAX);
        break;
    case WF_DTYPE_U16:
        ((uint16_t *)data)[index] = (uint16_t)clamp_i64(saturate_i64(value), 0, UINT16_MAX);
        break;
    case WF_DTYPE_U32:
        ((uint32_t *)data)[index] = (uint32_t)clamp_i64(saturate_i64(value), 0, UINT32_MAX);
        break;
    case WF_DTYPE_U64: ((uint64_t *)data)[index] = saturate_u64(value); break;
    case WF_DTYPE_C64:
        ((float *)data)[2 * index] = (float)value;
        ((float *)data)[2 * index + 1] = 0.0f;
        break;
    default: break;
    }
}
