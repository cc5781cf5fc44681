/* Binary element-wise kernels: add, multiply, subtract, divide, power,
 * maximum, minimum, floor_divide, remainder, the comparisons, logical
 * and/or, logaddexp, arctan2; and the half <-> float32 block conversions.
 *
 * Inputs have the output's shape and one compute dtype (the op inserted
 * casts and broadcast views), any strides. Comparisons and logical ops write
 * bool. Half types (f16, bf16) run the float32 loop over blocks converted
 * into local buffers (see half_binary), never per-element calls. */
#include "backend/cpu/binary.h"

#include <complex.h>
#include <math.h>
#include <stdbool.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/vmath.h"
#include "core/dtype.h"
#include "core/error.h"

/* ---------------------------------------------------------------- half blocks */

/* Contiguous runs in blocks of 8 (a fixed-count inner loop GCC vectorizes
 * at -O2), then a scalar tail; other strides use a plain loop. */
static void f16_to_f32_block(int64_t n, const uint16_t *restrict s, int64_t ss,
                             float *restrict d)
{
    int64_t i = 0;
    if (ss == 1) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                d[i + j] = wf__cpu_f16_to_f32(s[i + j]);
        for (; i < n; i++)
            d[i] = wf__cpu_f16_to_f32(s[i]);
    } else {
        for (; i < n; i++)
            d[i] = wf__cpu_f16_to_f32(s[i * ss]);
    }
}

static void bf16_to_f32_block(int64_t n, const uint16_t *restrict s, int64_t ss,
                              float *restrict d)
{
    int64_t i = 0;
    if (ss == 1) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                d[i + j] = wf__cpu_bf16_to_f32(s[i + j]);
        for (; i < n; i++)
            d[i] = wf__cpu_bf16_to_f32(s[i]);
    } else {
        for (; i < n; i++)
            d[i] = wf__cpu_bf16_to_f32(s[i * ss]);
    }
}

static void f32_to_f16_block(int64_t n, const float *restrict s, uint16_t *restrict d,
                             int64_t ds)
{
    int64_t i = 0;
    if (ds == 1) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                d[i + j] = wf__cpu_f32_to_f16(s[i + j]);
        for (; i < n; i++)
            d[i] = wf__cpu_f32_to_f16(s[i]);
    } else {
        for (; i < n; i++)
            d[i * ds] = wf__cpu_f32_to_f16(s[i]);
    }
}

static void f32_to_bf16_block(int64_t n, const float *restrict s, uint16_t *restrict d,
                              int64_t ds)
{
    int64_t i = 0;
    if (ds == 1) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                d[i + j] = wf__cpu_f32_to_bf16(s[i + j]);
        for (; i < n; i++)
            d[i] = wf__cpu_f32_to_bf16(s[i]);
    } else {
        for (; i < n; i++)
            d[i * ds] = wf__cpu_f32_to_bf16(s[i]);
    }
}

/* x86-64: hardware conversions (F16C: 8 halves per instruction), AVX2
 * builds of the bf16 loops and an AVX-512 float32 -> bf16 loop, chosen at
 * run time; the portable loops above serve other CPUs and strided
 * operands. Every path gives the same bits (exhaustively checked over all
 * float32 inputs when written; tests sweep the rounding boundaries). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define WF_HAVE_X86_DISPATCH 1

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(int64_t n,
                                                                 const uint16_t *restrict s,
                                                                 float *restrict d)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++)
        d[i] = wf__cpu_f16_to_f32(s[i]);
}

/* Immediate 0: round to nearest even, as wf__f32_to_f16. The hardware keeps
 * a NaN's payload; blocks holding a NaN are redone by the inline converter,
 * so every variant gives the quiet NaN 0x7e00 (bit-identical results). */
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(int64_t n,
                                                                 const float *restrict s,
                                                                 uint16_t *restrict d)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(s + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) {
            for (int j = 0; j < 8; j++)
                d[i + j] = wf__cpu_f32_to_f16(s[i + j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(x, 0));
    }
    for (; i < n; i++)
        d[i] = wf__cpu_f32_to_f16(s[i]);
}

__attribute__((target("avx2"))) static void bf16_to_f32_avx2(int64_t n,
                                                              const uint16_t *restrict s,
                                                              float *restrict d)
{
    bf16_to_f32_block(n, s, 1, d);
}

__attribute__((target("avx2"))) static void f32_to_bf16_avx2(int64_t n, const float *restrict s,
                                                              uint16_t *restrict d)
{
    f32_to_bf16_block(n, s, d, 1);
}

/* wf__cpu_f32_to_bf16 on 16 lanes: round to nearest even in integer
 * arithmetic, NaN lanes quieted. */
__attribute__((target("avx512f"))) static void f32_to_bf16_avx512(int64_t n,
                                                                 const float *restrict s,
                                                                 uint16_t *restrict d)
{
    const __m512i round_base = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(s + i);
        const __m512i u = _mm512_castps_si512(x);
        const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(round_base, odd)), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++)
        d[i] = wf__cpu_f32_to_bf16(s[i]);
}

/* The hardware paths run unless the vmath variant was forced down to the
 * baseline (WEFT_ISA=baseline, wf__vm_isa_force), so tests reach both. */
static bool cpu_has_f16c(void)
{
    return wf__vm_isa_active() >= WF_VM_ISA_AVX2 && __builtin_cpu_supports("avx") &&
           wf__cpu_has_f16c();
}
static bool cpu_has_avx2(void)
{
    return wf__vm_isa_active() >= WF_VM_ISA_AVX2 && __builtin_cpu_supports("avx2");
}
#endif

void wf__cpu_halves_to_f32(int64_t n, const uint16_t *src, int64_t stride, wf_dtype dtype,
                           float *dst)
{
#ifdef WF_HAVE_X86_DISPATCH
    if (stride == 1 && n >= 8) {
        if (dtype == WF_DTYPE_F16 && cpu_has_f16c()) {
            f16_to_f32_f16c(n, src, dst);
            return;
        }
        if (dtype == WF_DTYPE_BF16 && cpu_has_avx2()) {
            bf16_to_f32_avx2(n, src, dst);
            return;
        }
    }
#endif
    if (dtype == WF_DTYPE_BF16)
        bf16_to_f32_block(n, src, stride, dst);
    else
        f16_to_f32_block(n, src, stride, dst);
}

void wf__cpu_f32_to_halves(int64_t n, const float *src, uint16_t *dst, int64_t stride,
                           wf_dtype dtype)
{
#ifdef WF_HAVE_X86_DISPATCH
    if (stride == 1 && n >= 8) {
        if (dtype == WF_DTYPE_F16 && cpu_has_f16c()) {
            f32_to_f16_f16c(n, src, dst);
            return;
        }
        if (dtype == WF_DTYPE_BF16 && wf__vm_isa_active() >= WF_VM_ISA_AVX512) {
            f32_to_bf16_avx512(n, src, dst);
            return;
        }
        if (dtype == WF_DTYPE_BF16 && cpu_has_avx2()) {
            f32_to_bf16_avx2(n, src, dst);
            return;
        }
    }
#endif
    if (dtype == WF_DTYPE_BF16)
        f32_to_bf16_block(n, src, dst, stride);
    else
        f32_to_f16_block(n, src, dst, stride);
}

/* ---------------------------------------------------------------- scalar operations */

/* Bool values are normalized (any non-zero byte is true). Integers wrap
 * (computed in unsigned arithmetic of at least 32 bits, so that no product
 * of promoted narrow types overflows int). */
static inline uint8_t b01(uint8_t x) { return (uint8_t)(x != 0); }

/* add / multiply: bool add is logical or, multiply logical and. */
static inline uint8_t add_bool(uint8_t a, uint8_t b) { return (uint8_t)(b01(a) | b01(b)); }
static inline uint8_t mul_bool(uint8_t a, uint8_t b) { return (uint8_t)(b01(a) & b01(b)); }

/* From the unsigned computation back to each integer type, wrapping. */
#define WRAP_U8(v) ((uint8_t)(v))
#define WRAP_U16(v) ((uint16_t)(v))
#define WRAP_U32(v) ((uint32_t)(v))
#define WRAP_U64(v) ((uint64_t)(v))
#define WRAP_I8(v) wf__cpu_wrap_i8((uint8_t)(v))
#define WRAP_I16(v) wf__cpu_wrap_i16((uint16_t)(v))
#define WRAP_I32(v) wf__cpu_wrap_i32((uint32_t)(v))
#define WRAP_I64(v) wf__cpu_wrap_i64((uint64_t)(v))

/* Integer power by repeated squaring, wrapping. A negative exponent gives 0
 * for every base, as MLX does (NumPy raises an error there). 0^0 is 1.
 * Bool: a^b is a or not b. */
static inline uint64_t ipow_u64(uint64_t base, uint64_t exponent)
{
    uint64_t r = 1;
    while (exponent) {
        if (exponent & 1u)
            r *= base;
        base *= base;
        exponent >>= 1;
    }
    return r;
}
static inline uint8_t pow_bool(uint8_t a, uint8_t b) { return (uint8_t)(b01(a) | !b01(b)); }

/* Shifts follow NumPy: a shift by the type's width or more (or by a
 * negative amount) gives 0, or for a right shift of a negative value -1;
 * right shifts of signed values are arithmetic. Bool: a << b is a, a >> b
 * is a and not b (1 shifted right by 1 is 0). */
static inline uint8_t shl_bool(uint8_t a, uint8_t b)
{
    (void)b;
    return b01(a);
}
static inline uint8_t shr_bool(uint8_t a, uint8_t b) { return (uint8_t)(b01(a) & !b01(b)); }
static inline uint8_t and_bool(uint8_t a, uint8_t b) { return mul_bool(a, b); }
static inline uint8_t or_bool(uint8_t a, uint8_t b) { return add_bool(a, b); }
static inline uint8_t xor_bool(uint8_t a, uint8_t b) { return (uint8_t)(b01(a) ^ b01(b)); }

/* The operations of one integer type T (suffix SFX, computed in unsigned UT
 * of at least 32 bits, wrapped back by WRAP). */
#define INT_OPS(T, SFX, UT, WRAP)                                                       \
    static inline T add_##SFX(T a, T b) { return WRAP((UT)a + (UT)b); }                 \
    static inline T sub_##SFX(T a, T b) { return WRAP((UT)a - (UT)b); }                 \
    static inline T mul_##SFX(T a, T b) { return WRAP((UT)a * (UT)b); }                 \
    static inline T and_##SFX(T a, T b) { return (T)(a & b); }                          \
    static inline T or_##SFX(T a, T b) { return (T)(a | b); }                           \
    static inline T xor_##SFX(T a, T b) { return (T)(a ^ b); }                          \
    static inline T shl_##SFX(T a, T b)                                                 \
    {                                                                                   \
        const bool in_range = (uint64_t)b < 8 * sizeof(T); /* a negative b is huge */   \
        return in_range ? WRAP((UT)a << (b & (8 * sizeof(T) - 1))) : 0;                 \
    }
INT_OPS(uint8_t, u8, uint32_t, WRAP_U8)
INT_OPS(uint16_t, u16, uint32_t, WRAP_U16)
INT_OPS(uint32_t, u32, uint32_t, WRAP_U32)
INT_OPS(uint64_t, u64, uint64_t, WRAP_U64)
INT_OPS(int8_t, i8, uint32_t, WRAP_I8)
INT_OPS(int16_t, i16, uint32_t, WRAP_I16)
INT_OPS(int32_t, i32, uint32_t, WRAP_I32)
INT_OPS(int64_t, i64, uint64_t, WRAP_I64)

#define INT_MINMAX(T, SFX)                                                              \
    static inline T max_##SFX(T a, T b) { return a > b ? a : b; }                       \
    static inline T min_##SFX(T a, T b) { return a < b ? a : b; }
INT_MINMAX(uint8_t, u8)
INT_MINMAX(uint16_t, u16)
INT_MINMAX(uint32_t, u32)
INT_MINMAX(uint64_t, u64)
INT_MINMAX(int16_t, i16)
INT_MINMAX(int32_t, i32)
INT_MINMAX(int64_t, i64)
/* int8: the baseline (SSE2) has no signed byte maximum (pmaxsb is SSE4.1),
 * so the plain form ran 5x slower than uint8's; flipping the sign bit maps
 * int8's order onto uint8's, whose maximum SSE2 has (pmaxub). */
static inline int8_t max_i8(int8_t a, int8_t b)
{
    return WRAP_I8((uint8_t)(max_u8((uint8_t)(a ^ 0x80), (uint8_t)(b ^ 0x80)) ^ 0x80u));
}
static inline int8_t min_i8(int8_t a, int8_t b)
{
    return WRAP_I8((uint8_t)(min_u8((uint8_t)(a ^ 0x80), (uint8_t)(b ^ 0x80)) ^ 0x80u));
}

/* Unsigned: power, floor division and remainder (no sign rules), logical
 * right shift. Integer division by zero gives 0 (NumPy warns and gives 0;
 * C would trap). */
#define UINT_OPS(T, SFX)                                                                \
    static inline T pow_##SFX(T a, T b) { return (T)ipow_u64(a, b); }                   \
    static inline T floordiv_##SFX(T a, T b) { return b ? (T)(a / b) : 0; }             \
    static inline T rem_##SFX(T a, T b) { return b ? (T)(a % b) : 0; }                  \
    static inline T shr_##SFX(T a, T b)                                                 \
    {                                                                                   \
        return (uint64_t)b < 8 * sizeof(T) ? (T)(a >> (b & (8 * sizeof(T) - 1))) : 0;  \
    }
UINT_OPS(uint8_t, u8)
UINT_OPS(uint16_t, u16)
UINT_OPS(uint32_t, u32)
UINT_OPS(uint64_t, u64)

/* Signed: power (see ipow_u64), floor division and remainder with Python
 * semantics (the quotient rounds toward -inf, the remainder takes the
 * divisor's sign; dividing the minimum by -1 wraps, giving the minimum back
 * and remainder 0), arithmetic right shift. */
#define SINT_OPS(T, SFX, UT, WRAP)                                                      \
    static inline T pow_##SFX(T a, T b)                                                 \
    {                                                                                   \
        if (b < 0)                                                                      \
            return 0;                                                                   \
        return WRAP(ipow_u64((uint64_t)(UT)a, (uint64_t)b));                            \
    }                                                                                   \
    static inline T floordiv_##SFX(T a, T b)                                            \
    {                                                                                   \
        if (b == 0)                                                                     \
            return 0; /* integer division by zero gives 0 */                            \
        if (b == -1)                                                                    \
            return WRAP((UT)0 - (UT)a);                                                 \
        const T q = (T)(a / b), r = (T)(a % b);                                         \
        return (r != 0 && ((r < 0) != (b < 0))) ? (T)(q - 1) : q;                       \
    }                                                                                   \
    static inline T rem_##SFX(T a, T b)                                                 \
    {                                                                                   \
        if (b == 0 || b == -1)                                                          \
            return 0; /* integer division by zero gives 0 */                            \
        const T r = (T)(a % b);                                                         \
        return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;                       \
    }                                                                                   \
    static inline T shr_##SFX(T a, T b)                                                 \
    {                                                                                   \
        const bool in_range = (uint64_t)b < 8 * sizeof(T); /* a negative b is huge */   \
        const T fill = a < 0 ? (T)-1 : 0;                                               \
        return in_range ? (T)(a >> (b & (8 * sizeof(T) - 1))) : fill;                   \
    }
SINT_OPS(int8_t, i8, uint32_t, WRAP_I8)
SINT_OPS(int16_t, i16, uint32_t, WRAP_I16)
SINT_OPS(int32_t, i32, uint32_t, WRAP_I32)
SINT_OPS(int64_t, i64, uint64_t, WRAP_I64)

/* maximum / minimum: bool is or / and. */
static inline uint8_t max_bool(uint8_t a, uint8_t b) { return add_bool(a, b); }
static inline uint8_t min_bool(uint8_t a, uint8_t b) { return mul_bool(a, b); }
/* Bool: a // b is a and b, a % b is false. */
static inline uint8_t floordiv_bool(uint8_t a, uint8_t b) { return mul_bool(a, b); }
static inline uint8_t rem_bool(uint8_t a, uint8_t b)
{
    (void)a;
    (void)b;
    return 0;
}

/* Float operations for float32 and float64 (halves use the float32 ones).
 * floor_divide and remainder follow Python / NumPy's divmod: computed from
 * fmod so that a == b * q + r holds as closely as it can; division by zero
 * gives IEEE results (a / 0 for floor_divide: +-inf or NaN; NaN for
 * remainder). */
#define FLOAT_OPS(T, SFX, S)                                                            \
    static inline T add_##SFX(T a, T b) { return a + b; }                               \
    static inline T sub_##SFX(T a, T b) { return a - b; }                               \
    static inline T mul_##SFX(T a, T b) { return a * b; }                               \
    static inline T div_##SFX(T a, T b) { return a / b; }                               \
    static inline T max_##SFX(T a, T b) { return (a >= b || a != a) ? a : b; }          \
    static inline T min_##SFX(T a, T b) { return (a <= b || a != a) ? a : b; }          \
    static inline T floordiv_##SFX(T a, T b)                                            \
    {                                                                                   \
        if (b == 0)                                                                     \
            return a / b;                                                               \
        const T mod = fmod##S(a, b);                                                    \
        T div = (a - mod) / b;                                                          \
        if (mod != 0 && ((b < 0) != (mod < 0)))                                         \
            div -= 1;                                                                   \
        if (div == 0)                                                                   \
            return copysign##S(0, a / b);                                               \
        T fl = floor##S(div);                                                           \
        if (div - fl > (T)0.5)                                                          \
            fl += 1;                                                                    \
        return fl;                                                                      \
    }                                                                                   \
    static inline T rem_##SFX(T a, T b)                                                 \
    {                                                                                   \
        T mod = fmod##S(a, b);                                                          \
        if (b == 0)                                                                     \
            return mod;                                                                 \
        if (mod != 0)                                                                   \
            return ((b < 0) != (mod < 0)) ? mod + b : mod;                              \
        return copysign##S(0, b);                                                       \
    }
FLOAT_OPS(float, f32, f)
FLOAT_OPS(double, f64, )

/* complex64: arithmetic in float32 parts (NumPy's); division by Smith's
 * method, which scales by the larger part of the divisor so that |b|^2
 * neither overflows nor underflows where the quotient is representable.
 * Equality compares both parts. */
static inline wf_cpu_c64 add_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return (wf_cpu_c64){a.re + b.re, a.im + b.im};
}
static inline wf_cpu_c64 sub_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return (wf_cpu_c64){a.re - b.re, a.im - b.im};
}
static inline wf_cpu_c64 mul_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return (wf_cpu_c64){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
static inline wf_cpu_c64 div_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    if (b.im == 0 && b.re != 0) /* a real divisor divides each part (no inf * 0) */
        return (wf_cpu_c64){a.re / b.re, a.im / b.re};
    if (fabsf(b.re) >= fabsf(b.im)) {
        if (b.re == 0 && b.im == 0) /* IEEE results part by part, as NumPy */
            return (wf_cpu_c64){a.re / fabsf(b.re), a.im / fabsf(b.im)};
        const float r = b.im / b.re, d = b.re + b.im * r;
        return (wf_cpu_c64){(a.re + a.im * r) / d, (a.im - a.re * r) / d};
    }
    const float r = b.re / b.im, d = b.re * r + b.im;
    return (wf_cpu_c64){(a.re * r + a.im) / d, (a.im * r - a.re) / d};
}
static inline uint8_t eq_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return (uint8_t)((a.re == b.re) & (a.im == b.im));
}
static inline uint8_t ne_c64(wf_cpu_c64 a, wf_cpu_c64 b) { return (uint8_t)!eq_c64(a, b); }
/* maximum/minimum order complex numbers by real part, then imaginary part
 * (NumPy's and MLX's order); a NaN in either part propagates, a's first. */
static inline bool isnan_c64(wf_cpu_c64 a) { return a.re != a.re || a.im != a.im; }
static inline bool less_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return a.re < b.re || (a.re == b.re && a.im < b.im);
}
static inline wf_cpu_c64 max_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return isnan_c64(a) || (!isnan_c64(b) && !less_c64(a, b)) ? a : b;
}
static inline wf_cpu_c64 min_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    return isnan_c64(a) || (!isnan_c64(b) && !less_c64(b, a)) ? a : b;
}
/* a^b = exp(b log a), with a^0 = 1 and 0^b = 0 for a real b > 0 (where
 * exp(b log 0) would give NaN parts). */
static inline wf_cpu_c64 pow_c64(wf_cpu_c64 a, wf_cpu_c64 b)
{
    if (b.re == 0 && b.im == 0)
        return (wf_cpu_c64){1.0f, 0.0f};
    if (a.re == 0 && a.im == 0 && b.im == 0 && b.re > 0)
        return (wf_cpu_c64){0.0f, 0.0f};
    const float _Complex za = wf__cpu_c64_make(a.re, a.im), zb = wf__cpu_c64_make(b.re, b.im);
    const float _Complex r = cexpf(zb * clogf(za));
    return (wf_cpu_c64){crealf(r), cimagf(r)};
}

/* Comparisons give bool; NaN compares unequal to everything. */
#define CMP_OPS(T, SFX)                                                                 \
    static inline uint8_t eq_##SFX(T a, T b) { return (uint8_t)(a == b); }              \
    static inline uint8_t ne_##SFX(T a, T b) { return (uint8_t)(a != b); }              \
    static inline uint8_t lt_##SFX(T a, T b) { return (uint8_t)(a < b); }               \
    static inline uint8_t le_##SFX(T a, T b) { return (uint8_t)(a <= b); }              \
    static inline uint8_t gt_##SFX(T a, T b) { return (uint8_t)(a > b); }               \
    static inline uint8_t ge_##SFX(T a, T b) { return (uint8_t)(a >= b); }
CMP_OPS(uint8_t, u8)
CMP_OPS(uint16_t, u16)
CMP_OPS(uint32_t, u32)
CMP_OPS(uint64_t, u64)
CMP_OPS(int8_t, i8)
CMP_OPS(int16_t, i16)
CMP_OPS(int32_t, i32)
CMP_OPS(int64_t, i64)
CMP_OPS(float, f32)
CMP_OPS(double, f64)
static inline uint8_t eq_bool(uint8_t a, uint8_t b) { return eq_u8(b01(a), b01(b)); }
static inline uint8_t ne_bool(uint8_t a, uint8_t b) { return ne_u8(b01(a), b01(b)); }
static inline uint8_t lt_bool(uint8_t a, uint8_t b) { return lt_u8(b01(a), b01(b)); }
static inline uint8_t le_bool(uint8_t a, uint8_t b) { return le_u8(b01(a), b01(b)); }
static inline uint8_t gt_bool(uint8_t a, uint8_t b) { return gt_u8(b01(a), b01(b)); }
static inline uint8_t ge_bool(uint8_t a, uint8_t b) { return ge_u8(b01(a), b01(b)); }

/* ---------------------------------------------------------------- loops */

/* The typed loop: o[i] = OP(a[i], b[i]). Specialized for all-contiguous and
 * for either input broadcast (stride 0). The contiguous cases run in blocks
 * of 8 with a fixed-count inner loop, which GCC vectorizes at -O2 (its
 * default cost model skips loops of unknown count), followed by a scalar
 * tail. The typed body takes its pointers as restrict parameters (GCC
 * ignores restrict on local pointers). */
#define TYPED_LOOP(NAME, TI, TO, OP)                                                    \
    static void NAME##_typed(int64_t n, TO *restrict o, int64_t so, const TI *restrict a, \
                             int64_t sa, const TI *restrict b, int64_t sb)              \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (so == 1 && sa == 1 && sb == 1) {                                            \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    o[i + j] = OP(a[i + j], b[i + j]);                                  \
            for (; i < n; i++)                                                          \
                o[i] = OP(a[i], b[i]);                                                  \
        } else if (so == 1 && sa == 1 && sb == 0) {                                     \
            const TI y = *b;                                                            \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    o[i + j] = OP(a[i + j], y);                                         \
            for (; i < n; i++)                                                          \
                o[i] = OP(a[i], y);                                                     \
        } else if (so == 1 && sa == 0 && sb == 1) {                                     \
            const TI x = *a;                                                            \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    o[i + j] = OP(x, b[i + j]);                                         \
            for (; i < n; i++)                                                          \
                o[i] = OP(x, b[i]);                                                     \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                o[i * so] = OP(a[i * sa], b[i * sb]);                                   \
        }                                                                               \
    }

/* The iterator's inner function for a typed loop. */
#define INNER(NAME, TI, TO)                                                             \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (TO *)ptrs[0], strides[0], (const TI *)ptrs[1], strides[1],     \
                     (const TI *)ptrs[2], strides[2]);                                  \
    }

#define LOOP(NAME, TI, TO, OP)                                                          \
    TYPED_LOOP(NAME, TI, TO, OP)                                                        \
    INNER(NAME, TI, TO)

/* A float loop made of a vmath block function o = f(a, b) (contiguous):
 * all-contiguous rows call it directly; broadcast (stride 0) and strided
 * operands are gathered into blocks first, a strided output written back. */
enum { VM_STAGE = 512 };
#define VM_TYPED_LOOP(NAME, T, BLOCKFN)                                                 \
    static void NAME##_typed(int64_t n, T *restrict o, int64_t so, const T *restrict a,  \
                             int64_t sa, const T *restrict b, int64_t sb)               \
    {                                                                                   \
        if (so == 1 && sa == 1 && sb == 1) {                                            \
            BLOCKFN(n, a, b, o);                                                        \
            return;                                                                     \
        }                                                                               \
        T xa[VM_STAGE], xb[VM_STAGE], xr[VM_STAGE];                                     \
        for (int64_t i0 = 0; i0 < n; i0 += VM_STAGE) {                                  \
            const int64_t m = n - i0 < VM_STAGE ? n - i0 : VM_STAGE;                    \
            for (int64_t j = 0; sa != 1 && j < m; j++)                                  \
                xa[j] = a[(i0 + j) * sa];                                               \
            for (int64_t j = 0; sb != 1 && j < m; j++)                                  \
                xb[j] = b[(i0 + j) * sb];                                               \
            BLOCKFN(m, sa == 1 ? a + i0 : xa, sb == 1 ? b + i0 : xb, so == 1 ? o + i0 : xr); \
            for (int64_t j = 0; so != 1 && j < m; j++)                                  \
                o[(i0 + j) * so] = xr[j];                                               \
        }                                                                               \
    }

#define VM_LOOP(NAME, T, BLOCKFN)                                                       \
    VM_TYPED_LOOP(NAME, T, BLOCKFN)                                                     \
    INNER(NAME, T, T)

/* Halves: convert a block of each input into a float32 buffer (a stride-0
 * input once), run the float32 typed loop, convert the block back (or, for a
 * bool result, let the loop write the output directly). */
enum { HALF_BLOCK = 512 };

typedef void (*f32_arith_fn)(int64_t n, float *o, int64_t so, const float *a, int64_t sa,
                             const float *b, int64_t sb);
typedef void (*f32_cmp_fn)(int64_t n, uint8_t *o, int64_t so, const float *a, int64_t sa,
                           const float *b, int64_t sb);

/* Loads the block [i0, i0 + m) of input k into buf (a stride-0 input was
 * loaded once before the loop). */
static inline void half_load(int64_t i0, int64_t m, const char *p, int64_t s, wf_dtype dt,
                             float *buf)
{
    if (s != 0)
        wf__cpu_halves_to_f32(m, (const uint16_t *)p + i0 * s, s, dt, buf);
}

static void half_arith(int64_t n, char *const *ptrs, const int64_t *strides, wf_dtype dt,
                       f32_arith_fn fn)
{
    float xa[HALF_BLOCK], xb[HALF_BLOCK], xr[HALF_BLOCK];
    const int64_t so = strides[0], sa = strides[1], sb = strides[2];
    xa[0] = xb[0] = 0;
    if (sa == 0)
        wf__cpu_halves_to_f32(1, (const uint16_t *)ptrs[1], 1, dt, xa);
    if (sb == 0)
        wf__cpu_halves_to_f32(1, (const uint16_t *)ptrs[2], 1, dt, xb);
    for (int64_t i0 = 0; i0 < n; i0 += HALF_BLOCK) {
        const int64_t m = n - i0 < HALF_BLOCK ? n - i0 : HALF_BLOCK;
        half_load(i0, m, ptrs[1], sa, dt, xa);
        half_load(i0, m, ptrs[2], sb, dt, xb);
        fn(m, xr, 1, xa, sa != 0, xb, sb != 0);
        wf__cpu_f32_to_halves(m, xr, (uint16_t *)ptrs[0] + i0 * so, so, dt);
    }
}

static void half_cmp(int64_t n, char *const *ptrs, const int64_t *strides, wf_dtype dt,
                     f32_cmp_fn fn)
{
    float xa[HALF_BLOCK], xb[HALF_BLOCK];
    const int64_t so = strides[0], sa = strides[1], sb = strides[2];
    xa[0] = xb[0] = 0;
    if (sa == 0)
        wf__cpu_halves_to_f32(1, (const uint16_t *)ptrs[1], 1, dt, xa);
    if (sb == 0)
        wf__cpu_halves_to_f32(1, (const uint16_t *)ptrs[2], 1, dt, xb);
    for (int64_t i0 = 0; i0 < n; i0 += HALF_BLOCK) {
        const int64_t m = n - i0 < HALF_BLOCK ? n - i0 : HALF_BLOCK;
        half_load(i0, m, ptrs[1], sa, dt, xa);
        half_load(i0, m, ptrs[2], sb, dt, xb);
        fn(m, (uint8_t *)ptrs[0] + i0 * so, so, xa, sa != 0, xb, sb != 0);
    }
}

#define HALF_INNERS(NAME, HELPER)                                                       \
    static void L_##NAME##_f16(int64_t n, char *const *ptrs, const int64_t *strides,    \
                           const void *ctx)                                             \
    {                                                                                   \
        (void)ctx;                                                                      \
        HELPER(n, ptrs, strides, WF_DTYPE_F16, L_##NAME##_f32_typed);                   \
    }                                                                                   \
    static void L_##NAME##_bf16(int64_t n, char *const *ptrs, const int64_t *strides,   \
                            const void *ctx)                                            \
    {                                                                                   \
        (void)ctx;                                                                      \
        HELPER(n, ptrs, strides, WF_DTYPE_BF16, L_##NAME##_f32_typed);                  \
    }

/* The loops of an op over the integer types: L_NAME_u8 ... L_NAME_i64 of
 * OP##_u8 ... OP##_i64, each giving its input's type. */
#define INT_LOOPS(NAME, OP)                                                             \
    LOOP(L_##NAME##_u8, uint8_t, uint8_t, OP##_u8)                                      \
    LOOP(L_##NAME##_u16, uint16_t, uint16_t, OP##_u16)                                  \
    LOOP(L_##NAME##_u32, uint32_t, uint32_t, OP##_u32)                                  \
    LOOP(L_##NAME##_u64, uint64_t, uint64_t, OP##_u64)                                  \
    LOOP(L_##NAME##_i8, int8_t, int8_t, OP##_i8)                                        \
    LOOP(L_##NAME##_i16, int16_t, int16_t, OP##_i16)                                    \
    LOOP(L_##NAME##_i32, int32_t, int32_t, OP##_i32)                                    \
    LOOP(L_##NAME##_i64, int64_t, int64_t, OP##_i64)

/* The table entries of NAME's integer loops. */
#define INT_ENTRIES(NAME)                                                               \
    [WF_DTYPE_U8] = L_##NAME##_u8, [WF_DTYPE_U16] = L_##NAME##_u16,                     \
    [WF_DTYPE_U32] = L_##NAME##_u32, [WF_DTYPE_U64] = L_##NAME##_u64,                   \
    [WF_DTYPE_I8] = L_##NAME##_i8, [WF_DTYPE_I16] = L_##NAME##_i16,                     \
    [WF_DTYPE_I32] = L_##NAME##_i32, [WF_DTYPE_I64] = L_##NAME##_i64
#define FLOAT_ENTRIES(NAME)                                                             \
    [WF_DTYPE_F16] = L_##NAME##_f16, [WF_DTYPE_BF16] = L_##NAME##_bf16,                 \
    [WF_DTYPE_F32] = L_##NAME##_f32, [WF_DTYPE_F64] = L_##NAME##_f64

/* The loops of an op over every real dtype: bool, the integers, halves,
 * f32, f64 (OP##_bool, OP##_u8, ..., OP##_f64). */
#define ARITH_ALL(NAME, OP)                                                             \
    LOOP(L_##NAME##_bool, uint8_t, uint8_t, OP##_bool)                                  \
    INT_LOOPS(NAME, OP)                                                                 \
    LOOP(L_##NAME##_f32, float, float, OP##_f32)                                        \
    LOOP(L_##NAME##_f64, double, double, OP##_f64)                                      \
    HALF_INNERS(NAME, half_arith)                                                       \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {                       \
        [WF_DTYPE_BOOL] = L_##NAME##_bool, INT_ENTRIES(NAME), FLOAT_ENTRIES(NAME)};

/* The same with a complex64 loop (OP##_c64): add, multiply, maximum, minimum. */
#define ARITH_ALL_COMPLEX(NAME, OP)                                                     \
    LOOP(L_##NAME##_bool, uint8_t, uint8_t, OP##_bool)                                  \
    INT_LOOPS(NAME, OP)                                                                 \
    LOOP(L_##NAME##_f32, float, float, OP##_f32)                                        \
    LOOP(L_##NAME##_f64, double, double, OP##_f64)                                      \
    LOOP(L_##NAME##_c64, wf_cpu_c64, wf_cpu_c64, OP##_c64)                              \
    HALF_INNERS(NAME, half_arith)                                                       \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {                       \
        [WF_DTYPE_BOOL] = L_##NAME##_bool, INT_ENTRIES(NAME), FLOAT_ENTRIES(NAME),      \
        [WF_DTYPE_C64] = L_##NAME##_c64};

/* The same without bool, with complex64 (subtract). */
#define ARITH_NOBOOL(NAME, OP)                                                          \
    INT_LOOPS(NAME, OP)                                                                 \
    LOOP(L_##NAME##_f32, float, float, OP##_f32)                                        \
    LOOP(L_##NAME##_f64, double, double, OP##_f64)                                      \
    LOOP(L_##NAME##_c64, wf_cpu_c64, wf_cpu_c64, OP##_c64)                              \
    HALF_INNERS(NAME, half_arith)                                                       \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {                       \
        INT_ENTRIES(NAME), FLOAT_ENTRIES(NAME), [WF_DTYPE_C64] = L_##NAME##_c64};

/* Bool and integers only (the bitwise ops). */
#define ARITH_INT(NAME, OP)                                                             \
    LOOP(L_##NAME##_bool, uint8_t, uint8_t, OP##_bool)                                  \
    INT_LOOPS(NAME, OP)                                                                 \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {                       \
        [WF_DTYPE_BOOL] = L_##NAME##_bool, INT_ENTRIES(NAME)};

/* The loops of a float-only op (divide, logaddexp, arctan2: the op casts
 * integers) whose float32 and float64 loops are defined before it. */
#define FLOAT_ONLY_TABLE(NAME)                                                          \
    HALF_INNERS(NAME, half_arith)                                                       \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {FLOAT_ENTRIES(NAME)};

#define ARITH_FLOAT(NAME, OPF32, OPF64)                                                 \
    LOOP(L_##NAME##_f32, float, float, OPF32)                                           \
    LOOP(L_##NAME##_f64, double, double, OPF64)                                         \
    FLOAT_ONLY_TABLE(NAME)

/* Comparisons: every real dtype in, bool out. */
#define CMP_ALL(NAME, OP)                                                               \
    LOOP(L_##NAME##_bool, uint8_t, uint8_t, OP##_bool)                                  \
    LOOP(L_##NAME##_u8, uint8_t, uint8_t, OP##_u8)                                      \
    LOOP(L_##NAME##_u16, uint16_t, uint8_t, OP##_u16)                                   \
    LOOP(L_##NAME##_u32, uint32_t, uint8_t, OP##_u32)                                   \
    LOOP(L_##NAME##_u64, uint64_t, uint8_t, OP##_u64)                                   \
    LOOP(L_##NAME##_i8, int8_t, uint8_t, OP##_i8)                                       \
    LOOP(L_##NAME##_i16, int16_t, uint8_t, OP##_i16)                                    \
    LOOP(L_##NAME##_i32, int32_t, uint8_t, OP##_i32)                                    \
    LOOP(L_##NAME##_i64, int64_t, uint8_t, OP##_i64)                                    \
    LOOP(L_##NAME##_f32, float, uint8_t, OP##_f32)                                      \
    LOOP(L_##NAME##_f64, double, uint8_t, OP##_f64)                                     \
    HALF_INNERS(NAME, half_cmp)                                                         \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {                       \
        [WF_DTYPE_BOOL] = L_##NAME##_bool, INT_ENTRIES(NAME), FLOAT_ENTRIES(NAME)};

ARITH_ALL_COMPLEX(add, add)
ARITH_ALL_COMPLEX(mul, mul)
ARITH_NOBOOL(sub, sub)
/* divide: the float types and complex64 */
LOOP(L_div_f32, float, float, div_f32)
LOOP(L_div_f64, double, double, div_f64)
LOOP(L_div_c64, wf_cpu_c64, wf_cpu_c64, div_c64)
HALF_INNERS(div, half_arith)
static const wf_cpu_inner_fn div_loops[WF_DTYPE_COUNT] = {FLOAT_ENTRIES(div),
                                                          [WF_DTYPE_C64] = L_div_c64};
/* power: integer loops, vmath float32 and float64. */
LOOP(L_pow_bool, uint8_t, uint8_t, pow_bool)
INT_LOOPS(pow, pow)
VM_LOOP(L_pow_f32, float, wf__vm_power_f32)
VM_LOOP(L_pow_f64, double, wf__vm_power_f64)
LOOP(L_pow_c64, wf_cpu_c64, wf_cpu_c64, pow_c64)
HALF_INNERS(pow, half_arith)
static const wf_cpu_inner_fn pow_loops[WF_DTYPE_COUNT] = {
    [WF_DTYPE_BOOL] = L_pow_bool, INT_ENTRIES(pow), FLOAT_ENTRIES(pow),
    [WF_DTYPE_C64] = L_pow_c64};
ARITH_ALL_COMPLEX(max, max)
ARITH_ALL_COMPLEX(min, min)
ARITH_ALL(floordiv, floordiv)
ARITH_ALL(rem, rem)
ARITH_INT(bitand, and)
ARITH_INT(bitor, or)
ARITH_INT(bitxor, xor)
ARITH_INT(shl, shl)
ARITH_INT(shr, shr)
VM_LOOP(L_logaddexp_f32, float, wf__vm_logaddexp_f32)
VM_LOOP(L_logaddexp_f64, double, wf__vm_logaddexp_f64)
FLOAT_ONLY_TABLE(logaddexp)
VM_LOOP(L_atan2_f32, float, wf__vm_arctan2_f32)
VM_LOOP(L_atan2_f64, double, wf__vm_arctan2_f64)
FLOAT_ONLY_TABLE(atan2)
/* equal / not_equal take complex64 too. */
#define CMP_EQUALITY(NAME, OP)                                                          \
    LOOP(L_##NAME##_bool, uint8_t, uint8_t, OP##_bool)                                  \
    LOOP(L_##NAME##_u8, uint8_t, uint8_t, OP##_u8)                                      \
    LOOP(L_##NAME##_u16, uint16_t, uint8_t, OP##_u16)                                   \
    LOOP(L_##NAME##_u32, uint32_t, uint8_t, OP##_u32)                                   \
    LOOP(L_##NAME##_u64, uint64_t, uint8_t, OP##_u64)                                   \
    LOOP(L_##NAME##_i8, int8_t, uint8_t, OP##_i8)                                       \
    LOOP(L_##NAME##_i16, int16_t, uint8_t, OP##_i16)                                    \
    LOOP(L_##NAME##_i32, int32_t, uint8_t, OP##_i32)                                    \
    LOOP(L_##NAME##_i64, int64_t, uint8_t, OP##_i64)                                    \
    LOOP(L_##NAME##_f32, float, uint8_t, OP##_f32)                                      \
    LOOP(L_##NAME##_f64, double, uint8_t, OP##_f64)                                     \
    LOOP(L_##NAME##_c64, wf_cpu_c64, uint8_t, OP##_c64)                                 \
    HALF_INNERS(NAME, half_cmp)                                                         \
    static const wf_cpu_inner_fn NAME##_loops[WF_DTYPE_COUNT] = {                       \
        [WF_DTYPE_BOOL] = L_##NAME##_bool, INT_ENTRIES(NAME), FLOAT_ENTRIES(NAME),      \
        [WF_DTYPE_C64] = L_##NAME##_c64};
CMP_EQUALITY(eq, eq)
CMP_EQUALITY(ne, ne)
CMP_ALL(lt, lt)
CMP_ALL(le, le)
CMP_ALL(gt, gt)
CMP_ALL(ge, ge)

/* Logical ops: bool inputs (the op converts), bool out. */
static inline uint8_t land(uint8_t a, uint8_t b) { return mul_bool(a, b); }
static inline uint8_t lor(uint8_t a, uint8_t b) { return add_bool(a, b); }
LOOP(L_land_bool, uint8_t, uint8_t, land)
LOOP(L_lor_bool, uint8_t, uint8_t, lor)
static const wf_cpu_inner_fn land_loops[WF_DTYPE_COUNT] = {[WF_DTYPE_BOOL] = L_land_bool};
static const wf_cpu_inner_fn lor_loops[WF_DTYPE_COUNT] = {[WF_DTYPE_BOOL] = L_lor_bool};

/* ---------------------------------------------------------------- kernels */

/* Elements per parallel chunk: a cheap op (a few cycles) or a libm call. */
enum { COST_CHEAP = 0, COST_LIBM = 1 };

static wf_status run_binary(const char *name, wf_array *out, wf_array *const *inputs,
                            int ninputs, const wf_cpu_inner_fn *loops, int float_cost)
{
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 2 inputs, got %d", name, ninputs);
    const wf_array *a = inputs[0], *b = inputs[1];
    const wf_dtype dtype = a->dtype;
    if (!wf__dtype_valid(dtype) || b->dtype != dtype || !loops[dtype])
        return wf__error(WF_ERR_DTYPE, "%s: no CPU kernel for inputs %s, %s", name,
                         wf_dtype_name(dtype), wf_dtype_name(b->dtype));
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 2);
    if (st != WF_OK)
        return st;
    const size_t in_item = wf_dtype_size(dtype);
    char *data[3] = {wf__array_data_ptr(out), wf__array_data_ptr(a), wf__array_data_ptr(b)};
    const size_t sizes[3] = {wf_dtype_size(out->dtype), in_item, in_item};
    const int64_t *strides[3] = {out->strides, a->strides, b->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 3, data, sizes, strides);
    it.out_write_only = true;
    const int64_t chunk = float_cost == COST_LIBM && wf__dtype_is_float(dtype)
                              ? WF_CPU_CHUNK_COSTLY
                              : WF_CPU_CHUNK_CHEAP;
    wf__cpu_iter_run_parallel(&it, loops[dtype], NULL, chunk);
    return WF_OK;
}

#define KERNEL(NAME, LOOPS, COST)                                                       \
    wf_status wf__cpu_##NAME(wf_array *out, wf_array *const *inputs, int ninputs,       \
                             const void *params)                                        \
    {                                                                                   \
        (void)params;                                                                   \
        return run_binary(#NAME, out, inputs, ninputs, LOOPS, COST);                    \
    }

KERNEL(add, add_loops, COST_CHEAP)
KERNEL(multiply, mul_loops, COST_CHEAP)
KERNEL(subtract, sub_loops, COST_CHEAP)
KERNEL(divide, div_loops, COST_CHEAP)
KERNEL(power, pow_loops, COST_LIBM)
KERNEL(maximum, max_loops, COST_CHEAP)
KERNEL(minimum, min_loops, COST_CHEAP)
KERNEL(floor_divide, floordiv_loops, COST_LIBM)
KERNEL(remainder, rem_loops, COST_LIBM)
KERNEL(equal, eq_loops, COST_CHEAP)
KERNEL(not_equal, ne_loops, COST_CHEAP)
KERNEL(less, lt_loops, COST_CHEAP)
KERNEL(less_equal, le_loops, COST_CHEAP)
KERNEL(greater, gt_loops, COST_CHEAP)
KERNEL(greater_equal, ge_loops, COST_CHEAP)
KERNEL(logical_and, land_loops, COST_CHEAP)
KERNEL(logical_or, lor_loops, COST_CHEAP)
KERNEL(logaddexp, logaddexp_loops, COST_LIBM)
KERNEL(arctan2, atan2_loops, COST_LIBM)
KERNEL(bitwise_and, bitand_loops, COST_CHEAP)
KERNEL(bitwise_or, bitor_loops, COST_CHEAP)
KERNEL(bitwise_xor, bitxor_loops, COST_CHEAP)
KERNEL(left_shift, shl_loops, COST_CHEAP)
KERNEL(right_shift, shr_loops, COST_CHEAP)

/* ---------------------------------------------------------------- complex64 parts */

static inline wf_cpu_c64 make_c64(float re, float im) { return (wf_cpu_c64){re, im}; }
LOOP(L_complex, float, wf_cpu_c64, make_c64)

wf_status wf__cpu_complex(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)params;
    if (ninputs != 2 || inputs[0]->dtype != WF_DTYPE_F32 || inputs[1]->dtype != WF_DTYPE_F32)
        return wf__error(WF_ERR_INTERNAL, "complex: expected two float32 inputs");
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 2);
    if (st != WF_OK)
        return st;
    char *data[3] = {wf__array_data_ptr(out), wf__array_data_ptr(inputs[0]),
                     wf__array_data_ptr(inputs[1])};
    const size_t sizes[3] = {sizeof(wf_cpu_c64), sizeof(float), sizeof(float)};
    const int64_t *strides[3] = {out->strides, inputs[0]->strides, inputs[1]->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 3, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_iter_run_parallel(&it, L_complex, NULL, WF_CPU_CHUNK_CHEAP);
    return WF_OK;
}

/* One part of each element: y[i] = PART(x[i]). */
#define PART_LOOP(NAME, TO, EXPR)                                                       \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        TO *restrict y = (TO *)ptrs[0];                                                 \
        const wf_cpu_c64 *restrict x = (const wf_cpu_c64 *)ptrs[1];                     \
        const int64_t sy = strides[0], sx = strides[1];                                 \
        for (int64_t i = 0; i < n; i++) {                                               \
            const wf_cpu_c64 v = x[i * sx];                                             \
            y[i * sy] = EXPR;                                                           \
        }                                                                               \
    }
PART_LOOP(L_real, float, v.re)
PART_LOOP(L_imag, float, v.im)
PART_LOOP(L_conjugate, wf_cpu_c64, make_c64(v.re, -v.im))

static wf_status run_part(const char *name, wf_array *out, wf_array *const *inputs,
                          int ninputs, wf_cpu_inner_fn loop)
{
    if (ninputs != 1 || inputs[0]->dtype != WF_DTYPE_C64)
        return wf__error(WF_ERR_INTERNAL, "%s: expected one complex64 input", name);
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 1);
    if (st != WF_OK)
        return st;
    char *data[2] = {wf__array_data_ptr(out), wf__array_data_ptr(inputs[0])};
    const size_t sizes[2] = {wf_dtype_size(out->dtype), sizeof(wf_cpu_c64)};
    const int64_t *strides[2] = {out->strides, inputs[0]->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 2, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_iter_run_parallel(&it, loop, NULL, WF_CPU_CHUNK_CHEAP);
    return WF_OK;
}

wf_status wf__cpu_real(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)params;
    return run_part("real", out, inputs, ninputs, L_real);
}

wf_status wf__cpu_imag(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)params;
    return run_part("imag", out, inputs, ninputs, L_imag);
}

wf_status wf__cpu_conjugate(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params)
{
    (void)params;
    return run_part("conjugate", out, inputs, ninputs, L_conjugate);
}
