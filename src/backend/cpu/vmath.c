/*
 * Vectorized math (see vmath.h).
 *
 * Each function is a static inline per-element body written without
 * branches (selects instead) and without calls, run by a loop over blocks of
 * VM_BLOCK elements with a fixed-count inner loop: GCC -O2 (very cheap cost
 * model) vectorizes loops whose trip count is a known multiple of the vector
 * width, and -fno-trapping-math lets it if-convert the selects. The tail is
 * padded into one more block, so every element goes through the same vector
 * code and results do not depend on where a block starts. Float-to-integer
 * conversions are avoided (the 1.5 * 2^23 shift trick gives rounded
 * integers in the low mantissa bits), so no out-of-range conversion can
 * happen whatever the input.
 *
 * Coefficients were fitted with mpmath (Chebyshev fits of the remainder
 * functions named in each comment) and rounded to float (or double for
 * the float64 functions). Float64 code uses the same tricks with 1.5 * 2^52
 * and builds doubles from integer bits (0x1p52 + k has k in its low bits)
 * instead of converting 64-bit integers, which AVX2 cannot vectorize.
 */
#include "backend/cpu/vmath.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { VM_BLOCK = 16 };

static inline __attribute__((always_inline)) uint32_t as_u32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline __attribute__((always_inline)) float as_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#define VM_INLINE static inline __attribute__((always_inline))

/* c ? a : b as bit operations on values already computed. GCC sinks work
 * that only one arm of a ?: uses into a branch, and a branch in the loop
 * body stops vectorization; a mask select keeps the body straight-line. */
VM_INLINE float vsel(int c, float a, float b)
{
    const uint32_t m = 0u - (uint32_t)(c != 0);
    return as_f32((as_u32(a) & m) | (as_u32(b) & ~m));
}
/* a with the sign bit of s added (a >= 0). */
VM_INLINE float with_sign_of(float a, float s)
{
    return as_f32(as_u32(a) | (as_u32(s) & 0x80000000u));
}

/* 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer
 * (to nearest even) held in the low mantissa bits. */
#define VM_SHIFT 0x1.8p23f

/* The same for doubles (magnitude < 2^51). */
#define VD_SHIFT 0x1.8p52
#define VD_LOG2E 0x1.71547652b82fep+0
#define VD_LN2 0x1.62e42fefa39efp-1
#define VM_GELU_K1 0x1.9884533d43651p+0 /* 2 sqrt(2/pi) */
#define VM_GELU_K2 0x1.2444f2a4d8b4bp-4 /* 2 sqrt(2/pi) 0.044715 */

VM_INLINE uint64_t as_u64(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
VM_INLINE double as_f64(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}
VM_INLINE double vseld(int c, double a, double b)
{
    const uint64_t m = 0u - (uint64_t)(c != 0);
    return as_f64((as_u64(a) & m) | (as_u64(b) & ~m));
}
VM_INLINE double with_sign_of_d(double a, double s)
{
    return as_f64(as_u64(a) | (as_u64(s) & 0x8000000000000000u));
}

/* ---------------------------------------------------------------- exp, expm1 */

/* expm1(r) = r + r^2 q(r) on |r| <= ln2/2; q fitted to (expm1(r) - r)/r^2
 * (degree 5, error 2e-10). */
VM_INLINE float expm1_poly(float r)
{
    float q = 0x1.a01a02p-13f; /* 1.98919806e-4 */
    q = q * r + 1.39345415e-3f;
    q = q * r + 8.33331048e-3f;
    q = q * r + 4.16664556e-2f;
    q = q * r + 1.66666672e-1f;
    q = q * r + 0.5f;
    return r + (r * r) * q;
}

#define VM_LOG2E 0x1.715476p+0f
#define VM_LN2_HI 0x1.63p-1f        /* 0.693359375: n * hi exact for |n| < 2^15 */
#define VM_LN2_LO (-0x1.bd0106p-13f) /* ln2 - hi */

/* e^x: x = n ln2 + r, e^x = 2^n e^r. 2^n is applied as two factors so that
 * n down to -150 (subnormal results) and up to 128 (overflow to inf) come
 * out right with one rounding. */
VM_INLINE float vm_exp(float x)
{
    float xc = x > 88.8f ? 88.8f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    const float kf = xc * VM_LOG2E + VM_SHIFT;
    const uint32_t kb = as_u32(kf);
    const float n = kf - VM_SHIFT;
    const float r = (xc - n * VM_LN2_HI) - n * VM_LN2_LO;
    const float p = 1.0f + expm1_poly(r);
    /* n = (kb - 0x4b400000) as a signed integer in [-150, 128]; split it into
     * n1 = n >> 1 and n2 = n - n1 (both within the normal exponent range). */
    const uint32_t nb = kb - 0x4b400000u + 256u; /* n + 256, in [106, 384] */
    const uint32_t n1 = nb >> 1;                 /* (n + 256) / 2 */
    const uint32_t n2 = nb - n1;
    const float s1 = as_f32((n1 - 128u + 127u) << 23); /* 2^(n1 - 128) */
    const float s2 = as_f32((n2 - 128u + 127u) << 23); /* 2^(n2 - 128) */
    const float y = (p * s1) * s2;
    return vsel(x != x, x, y);
}

/* e^x - 1: with x = n ln2 + r, e^x - 1 = 2 (2^(n-1) expm1(r) + (2^(n-1) -
 * 1/2)); the factor 2 keeps 2^(n-1) finite up to n = 128. */
VM_INLINE float vm_expm1(float x)
{
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -20.0f ? -20.0f : xc;
    const float kf = xc * VM_LOG2E + VM_SHIFT;
    const uint32_t kb = as_u32(kf);
    const float n = kf - VM_SHIFT;
    const float r = (xc - n * VM_LN2_HI) - n * VM_LN2_LO;
    const float p = expm1_poly(r);
    /* n in [-29, 128]: 2^(n-1) has biased exponent n - 1 + 127 in [97, 254]. */
    const uint32_t e = kb - 0x4b400000u + 126u;
    const float s = as_f32(e << 23);
    const float y = 2.0f * (s * p + (s - 0.5f));
    /* expm1 is exact to first order for tiny x (keeps -0 and subnormals). */
    const float ax = fabsf(x);
    return vsel(x != x || ax < 0x1p-25f, x, y);
}

/* ---------------------------------------------------------------- log family */

/* log1p(f) - f + f^2/2 = f^3 q(f) on f in [-1/3, 1/3] (degree 7, error 7e-9
 * relative to f^3 scale). Returns f^3 q(f). */
VM_INLINE float log_tail(float f)
{
    float q = -0.121255808f;
    q = q * f + 0.134257495f;
    q = q * f - 0.123461902f;
    q = q * f + 0.141183093f;
    q = q * f - 0.166701406f;
    q = q * f + 0.200037807f;
    q = q * f - 0.249999881f;
    q = q * f + 0.333333194f;
    return (f * f) * f * q;
}

#define VM_LN2F_HI 0x1.62e3p-1f      /* 0.69313812256: e * hi exact */
#define VM_LN2F_LO 0x1.2fefa2p-17f   /* ln2 - hi */

/* Splits a positive normal float (bits ix) into x = 2^e m with m in
 * [2/3, 4/3); returns f = m - 1 and e. */
VM_INLINE float log_split(uint32_t ix, float *e)
{
    const uint32_t t = ix - 0x3f2aaaabu; /* 2/3 */
    const uint32_t eb = ((t + 0x40000000u) >> 23); /* e + 128 */
    *e = (float)(int32_t)eb - 128.0f;
    const float m = as_f32(ix - (t & 0xff800000u));
    return m - 1.0f;
}

/* log(x) = e ln2 + log1p(f). */
VM_INLINE float vm_log(float x)
{
    const int sub = x < 0x1p-126f;
    const float xs = vsel(sub, x * 0x1p23f, x);
    float e;
    const float f = log_split(as_u32(xs), &e);
    e = vsel(sub, e - 23.0f, e);
    const float hf = 0.5f * f * f;
    float y = log_tail(f) + e * VM_LN2F_LO - hf + f + e * VM_LN2F_HI;
    y = vsel(x < 0.0f, NAN, y);
    y = vsel(x == 0.0f, -INFINITY, y);
    y = vsel(x == INFINITY || x != x, x, y);
    return y;
}

/* log2(x) = e + log1p(f) log2(e). */
VM_INLINE float vm_log2(float x)
{
    const int sub = x < 0x1p-126f;
    const float xs = vsel(sub, x * 0x1p23f, x);
    float e;
    const float f = log_split(as_u32(xs), &e);
    e = vsel(sub, e - 23.0f, e);
    const float hf = 0.5f * f * f;
    const float lp = log_tail(f) - hf + f;
    float y = lp * 0x1.715476p+0f + (lp * 0x1.4ae0cp-26f + e);
    y = vsel(x < 0.0f, NAN, y);
    y = vsel(x == 0.0f, -INFINITY, y);
    y = vsel(x == INFINITY || x != x, x, y);
    return y;
}

/* log1p(x): u = 1 + x rounded, log(u) plus the first-order correction
 * (x - (u - 1)) / u for the rounding of u. */
VM_INLINE float vm_log1p(float x)
{
    const float xc = vsel(x < -1.0f || x == INFINITY, 1.0f, x); /* keep the path finite */
    const float u = 1.0f + xc; /* up to FLT_MAX: no overflow, and then c = 0 */
    const float c = (xc - (u - 1.0f)) / u;
    float e;
    const float f = log_split(as_u32(u), &e);
    const float hf = 0.5f * f * f;
    float y = log_tail(f) + (e * VM_LN2F_LO + c) - hf + f + e * VM_LN2F_HI;
    y = vsel(fabsf(x) < 0x1p-25f || x != x || x == INFINITY, x, y); /* keeps -0 */
    y = vsel(x < -1.0f, NAN, y);
    y = vsel(x == -1.0f, -INFINITY, y);
    return y;
}

/* ---------------------------------------------------------------- tanh, sigmoid */

/* tanh(|x|) = e / (e + 2) with e = expm1(2|x|); accurate for tiny x too. */
VM_INLINE float vm_tanh(float x)
{
    const float ax = fabsf(x);
    const float a = ax > 9.5f ? 9.5f : ax; /* tanh(9.5) rounds to 1 */
    const float em = vm_expm1(2.0f * a);
    const float t = em / (em + 2.0f);
    const float y = with_sign_of(vsel(ax < 0x1p-12f, ax, t), x); /* x (1 - x^2/3) */
    return vsel(x != x, x, y);
}

/* 1 / (1 + e^-x), evaluated with t = e^-|x| <= 1 so nothing overflows:
 * x >= 0 gives 1 / (1 + t), x < 0 gives t / (1 + t). */
VM_INLINE float vm_sigmoid(float x)
{
    const float t = vm_exp(-fabsf(x));
    const float num = vsel(x < 0.0f, t, 1.0f);
    return num / (1.0f + t);
}

/* ---------------------------------------------------------------- erf */

/* |x| < 0.875: erf(x) = x P(x^2), P fitted to erf(x)/x (degree 6, error
 * 2e-10). 0.875 <= |x| <= 4: erf(x) = 1 - exp(Q(|x| - 2.4375)), Q fitted to
 * log(erfc) (degree 10, error 4e-9). |x| > 4: erf = +-1 (erfc(4) < 2^-27). */
VM_INLINE float vm_erf(float x)
{
    const float ax = fabsf(x);
    const float t = x * x;
    float p = 8.69036885e-05f;
    p = p * t - 8.2145707e-04f;
    p = p * t + 5.20704873e-03f;
    p = p * t - 2.68617067e-02f;
    p = p * t + 1.12837352e-01f;
    p = p * t - 3.76126349e-01f;
    p = p * t + 1.12837923f;
    const float small = x * p;

    const float u = (ax > 4.0f ? 4.0f : ax) - 2.4375f;
    float q = -5.49260584e-08f;
    q = q * u - 2.20300986e-08f;
    q = q * u + 1.94071208e-06f;
    q = q * u - 1.39881022e-05f;
    q = q * u + 8.27135445e-05f;
    q = q * u - 4.50529158e-04f;
    q = q * u + 2.30168435e-03f;
    q = q * u - 1.14164278e-02f;
    q = q * u - 9.41806078e-01f;
    q = q * u - 5.23482323f;
    q = q * u - 7.47595692f;
    const float big = 1.0f - vm_exp(q);
    const float y = vsel(ax < 0.875f, small, with_sign_of(big, x));
    return vsel(x != x, x, y);
}

/* ---------------------------------------------------------------- sin, cos, tan */

/* pi/2 = C1 + C2 + C3 with C1 and C2 of 12 significant bits, so j * C1 and
 * j * C2 are exact for |j| < 2^12 (|x| <= VM_TRIG_MAX). */
#define VM_2_PI 0x1.45f306p-1f
#define VM_PIO2_1 0x1.922p+0f
#define VM_PIO2_2 (-0x1.2aep-18f)
#define VM_PIO2_3 (-0x1.de973ep-31f)
#define VM_TRIG_MAX 4096.0f
#define VM_TRIG_MAX_BITS 0x45800000u /* bits of 4096.0f */

/* sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4
 * (S, C degree 3; errors 3e-11 and 2e-12). */
VM_INLINE void sincos_poly(float r, float *s, float *c)
{
    const float t = r * r;
    float ps = 2.72499256e-06f;
    ps = ps * t - 1.9840087e-04f;
    ps = ps * t + 8.33333191e-03f;
    ps = ps * t - 1.66666672e-01f;
    *s = r + (r * t) * ps;
    float pc = -2.7300959e-07f;
    pc = pc * t + 2.48005999e-05f;
    pc = pc * t - 1.38888881e-03f;
    pc = pc * t + 4.16666679e-02f;
    *c = (1.0f - 0.5f * t) + (t * t) * pc;
}

/* x = j pi/2 + r; returns r and the quadrant j mod 4. Garbage (but no
 * undefined behavior) for |x| > VM_TRIG_MAX, NaN, inf: callers patch those. */
VM_INLINE float trig_reduce(float x, uint32_t *quadrant)
{
    const float jf = x * VM_2_PI + VM_SHIFT;
    *quadrant = as_u32(jf) & 3u;
    const float j = jf - VM_SHIFT;
    return ((x - j * VM_PIO2_1) - j * VM_PIO2_2) - j * VM_PIO2_3;
}

VM_INLINE float vm_sin(float x)
{
    uint32_t q;
    const float r = trig_reduce(x, &q);
    float s, c;
    sincos_poly(r, &s, &c);
    const float v = vsel(q & 1u, c, s);
    const float y = as_f32(as_u32(v) ^ ((q & 2u) << 30));
    return vsel(x == 0.0f, x, y); /* the reduction turns -0 into +0 */
}

VM_INLINE float vm_cos(float x)
{
    uint32_t q;
    const float r = trig_reduce(x, &q);
    float s, c;
    sincos_poly(r, &s, &c);
    const float v = vsel(q & 1u, s, c);
    return as_f32(as_u32(v) ^ (((q + 1u) & 2u) << 30));
}

VM_INLINE float vm_tan(float x)
{
    uint32_t q;
    const float r = trig_reduce(x, &q);
    float s, c;
    sincos_poly(r, &s, &c);
    const float num = vsel(q & 1u, -c, s);
    const float den = vsel(q & 1u, s, c);
    return vsel(x == 0.0f, x, num / den); /* keeps -0 */
}

/* ---------------------------------------------------------------- float32 activations */

/* 2^-n (n in [0, 252]) as two normal factors s1 s2, so that m s1 s2 rounds
 * once even when it lands among the subnormals. */
VM_INLINE void pow2_neg_split(uint32_t n, float *s1, float *s2)
{
    const uint32_t n1 = n >> 1, n2 = n - n1;
    *s1 = as_f32((127u - n1) << 23);
    *s2 = as_f32((127u - n2) << 23);
}

/* e^-a = p 2^-n with p = e^-r in [0.7, 1.42], for 0 <= a <= 112 (a larger
 * or NaN is taken as 112; callers replace those results). */
VM_INLINE float exp_neg_parts(float a, uint32_t *n)
{
    const float ac = a < 112.0f ? a : 112.0f;
    const float kf = ac * VM_LOG2E + VM_SHIFT;
    *n = as_u32(kf) - 0x4b400000u;
    const float nf = kf - VM_SHIFT;
    const float r = (ac - nf * VM_LN2_HI) - nf * VM_LN2_LO;
    return 1.0f + expm1_poly(-r);
}

/* x / (1 + e^-a) where a has x's sign, given e^-|a| = p 2^-n: x / (1 + t)
 * for x >= 0, x t / (1 + t) for x < 0 with x t = (x p) 2^-n rounded once,
 * so the negative tail survives down to the smallest subnormal. gone: |a|
 * is beyond exp_neg_parts' range, where x < 0 gives -0 (-inf included: the
 * limit). NaN stays NaN. */
VM_INLINE float x_sigmoid_from_parts(float x, float p, uint32_t n, int gone)
{
    float s1, s2;
    pow2_neg_split(n, &s1, &s2);
    const float t = (p * s1) * s2;
    const float num = vsel(x < 0.0f, ((x * p) * s1) * s2, x);
    const float y = num / (1.0f + t);
    return vsel(gone && x < 0.0f, -0.0f, vsel(x != x, x, y));
}

/* silu(x) = x sigmoid(x). */
VM_INLINE float vm_silu(float x)
{
    uint32_t n;
    const float a = fabsf(x);
    const float p = exp_neg_parts(a, &n);
    return x_sigmoid_from_parts(x, p, n, a >= 112.0f);
}

/* gelu_tanh(x) = x/2 (1 + tanh(u)) = x sigmoid(2u), 2u = x (K1 + K2 x^2).
 * 2u and its reduction by ln2 are computed in double, so the tail (where
 * |2u| reaches 100) is not lost to the rounding of 2u in float. */
VM_INLINE float vm_gelu_tanh(float x)
{
    const double xd = x;
    const double a = fabs(xd * (VM_GELU_K1 + VM_GELU_K2 * (xd * xd)));
    const double ac = a < 112.0 ? a : 112.0;
    const double kd = ac * VD_LOG2E + VD_SHIFT;
    const uint32_t n = (uint32_t)(as_u64(kd) - 0x4338000000000000u);
    const double nd = kd - VD_SHIFT;
    const float r = (float)(ac - nd * VD_LN2);
    const float p = 1.0f + expm1_poly(-r);
    return x_sigmoid_from_parts(x, p, n, a >= 112.0);
}

/* gelu(x) = x Phi(x), Phi the normal distribution function. With t = |x|,
 * Phi(-t) = erfc(t/sqrt2)/2 = e^(-t^2/2) G(t), G(t) = Phi(-t) e^(t^2/2)
 * smooth and slowly varying: fitted in t - 1 on [0, 2] (degree 11,
 * relative error 1.8e-9) and, as t G(t) = h(u), in u = 1/t on [2, 15]
 * (degree 10 in u - 0.2833, relative error 2.5e-9). Both variables are
 * exact or harmless to round (a fit in 1/(1 + t/4) over the whole range
 * amplified the rounding of that variable to ~5 ulp). Then gelu = x Phi(-t)
 * for x < 0 (= -e^(-t^2/2) h(u) beyond 2), x (1 - Phi(-t)) for x >= 0.
 * t^2/2 is split exactly into hi + lo (t = th + tl with 12-bit halves, so
 * th^2, th tl, tl^2 are exact): e^(-t^2/2) = e^-hi e^-lo carries no error
 * from rounding t^2 or t/sqrt2, which near t = 14 would cost ~200 ulp; and
 * the negative tail rounds once among the subnormals. */
VM_INLINE float gelu_small_g(float t)
{
    const float s = t - 1.0f;
    float q = -0x1.04773ep-19f;
    q = q * s + 0x1.03bf5p-17f;
    q = q * s - 0x1.91e4d8p-16f;
    q = q * s + 0x1.6c8072p-14f;
    q = q * s - 0x1.426f9ep-12f;
    q = q * s + 0x1.0a42a6p-10f;
    q = q * s - 0x1.9ef958p-9f;
    q = q * s + 0x1.2f463p-7f;
    q = q * s - 0x1.9b00b4p-6f;
    q = q * s + 0x1.fcc82cp-5f;
    q = q * s - 0x1.19524ap-3f;
    return q * s + 0x1.0bdb2ep-2f;
}

VM_INLINE float gelu_big_h(float u)
{
    const float w = u - 0x1.222222p-2f;
    float q = -0x1.48c666p+3f;
    q = q * w + 0x1.9a64bap+1f;
    q = q * w + 0x1.e702eap+0f;
    q = q * w - 0x1.e74de6p+0f;
    q = q * w + 0x1.ba4e5p-1f;
    q = q * w - 0x1.55bc04p-5f;
    q = q * w - 0x1.59a4bcp-2f;
    q = q * w + 0x1.522b3p-2f;
    q = q * w - 0x1.c8b32ep-4f;
    q = q * w - 0x1.3f6e4cp-3f;
    return q * w + 0x1.7d859ep-2f;
}

VM_INLINE float vm_gelu(float x)
{
    const float a = fabsf(x);
    const float t = a < 15.0f ? a : 15.0f; /* NaN: 15 */
    const int big = t > 2.0f;
    const float u = 1.0f / (big ? t : 2.0f);
    const float h = gelu_big_h(u), gs = gelu_small_g(t);
    const float th = as_f32(as_u32(t) & 0xfffff000u), tl = t - th;
    const float hi = 0.5f * (th * th);
    const float lo = th * tl + 0.5f * (tl * tl); /* < 0.07 */
    float el = -0x1.111112p-7f; /* e^-lo, Taylor to lo^5 (error < 2e-10) */
    el = el * lo + 0x1.555556p-5f;
    el = el * lo - 0x1.555556p-3f;
    el = el * lo + 0.5f;
    el = el * lo - 1.0f;
    el = el * lo + 1.0f;
    const float m = el * vsel(big, u * h, gs); /* Phi(-t) e^hi */
    const float xm = vsel(big, -(el * h), x * (el * gs)); /* x m, for x < 0 */
    uint32_t n;
    const float p = exp_neg_parts(hi, &n);
    float s1, s2;
    pow2_neg_split(n, &s1, &s2);
    const float neg = ((xm * p) * s1) * s2;
    const float pos = x * (1.0f - ((m * p) * s1) * s2);
    float y = vsel(x < 0.0f, neg, pos);
    y = vsel(a > 15.0f, vsel(x > 0.0f, x, -0.0f), y);
    return vsel(x != x, x, y);
}

/* ---------------------------------------------------------------- sinh, cosh */

/* |x| < 44: sinh = (em + em / (em + 1)) / 2 with em = expm1(|x|) (no
 * cancellation, exact to first order for tiny x); beyond, (e^(|x|/2) / 2)
 * e^(|x|/2), which stays finite up to sinh's own overflow. */
VM_INLINE float vm_sinh(float x)
{
    const float a = fabsf(x);
    const float em = vm_expm1(a < 44.0f ? a : 44.0f);
    const float mid = 0.5f * (em + em / (em + 1.0f));
    const float h = vm_exp(0.5f * a);
    const float big = (0.5f * h) * h;
    const float y = with_sign_of(vsel(a < 44.0f, mid, big), x);
    return vsel(x != x, x, y);
}

VM_INLINE float vm_cosh(float x)
{
    const float a = fabsf(x);
    const float e = vm_exp(a < 44.0f ? a : 44.0f);
    const float mid = 0.5f * e + 0.5f / e;
    const float h = vm_exp(0.5f * a);
    const float big = (0.5f * h) * h;
    return vsel(a < 44.0f, mid, big); /* NaN: big is NaN */
}

/* ---------------------------------------------------------------- arctan, arctan2 */

/* pi/2, pi, pi/4 as float hi + lo. */
#define VM_PIO2_HI 0x1.921fb6p+0f
#define VM_PIO2_LO (-0x1.777a5cp-25f)
#define VM_PI_HI 0x1.921fb6p+1f
#define VM_PI_LO (-0x1.777a5cp-24f)
#define VM_PIO4_HI 0x1.921fb6p-1f
#define VM_PIO4_LO (-0x1.777a5cp-26f)

/* atan(u) = u + u z P(z), z = u^2, for |u| <= tan(pi/8); P fitted to
 * (atan(sqrt z)/sqrt z - 1)/z (degree 4, error 1.6e-8). */
VM_INLINE float atan_poly(float u)
{
    const float z = u * u;
    float p = -0x1.08455ep-4f;
    p = p * z + 0x1.b8103p-4f;
    p = p * z - 0x1.242036p-3f;
    p = p * z + 0x1.99973p-3f;
    p = p * z - 0x1.555554p-2f;
    return u + u * (z * p);
}

/* atan(t) for t >= 0 (inf included): pi/2 + atan(-1/t) above tan(3pi/8),
 * pi/4 + atan((t - 1)/(t + 1)) above tan(pi/8). */
VM_INLINE float atan_nonneg(float t)
{
    const int big = t > 2.41421356f, mid = t > 0.41421356f;
    const float u = vsel(big, -1.0f / t, vsel(mid, (t - 1.0f) / (t + 1.0f), t));
    const float hi = vsel(big, VM_PIO2_HI, vsel(mid, VM_PIO4_HI, 0.0f));
    const float lo = vsel(big, VM_PIO2_LO, vsel(mid, VM_PIO4_LO, 0.0f));
    return hi + (atan_poly(u) + lo);
}

VM_INLINE float vm_atan(float x) { return with_sign_of(atan_nonneg(fabsf(x)), x); }

/* atan2(y, x): atan of min(|x|,|y|) / max(|x|,|y|) in [0, 1], then
 * reflected: pi/2 - r if |y| > |x|, pi - r if x is negative (-0 too), and
 * y's sign. inf/inf counts as 1 and 0/0 as 0, which gives C99's special
 * values (+-pi/4, +-3pi/4, +-0, +-pi). */
VM_INLINE float vm_atan2(float y, float x)
{
    const float ax = fabsf(x), ay = fabsf(y);
    const int swap = ay > ax;
    const float num = vsel(swap, ax, ay), den = vsel(swap, ay, ax);
    float t = num / den;
    t = vsel(ax == INFINITY && ay == INFINITY, 1.0f, t);
    t = vsel(den == 0.0f, 0.0f, t);
    float r = atan_nonneg(t);
    r = vsel(swap, (VM_PIO2_HI - r) + VM_PIO2_LO, r);
    r = vsel(as_u32(x) >> 31, (VM_PI_HI - r) + VM_PI_LO, r);
    r = with_sign_of(r, y);
    return vsel(x != x || y != y, x + y, r);
}

/* ---------------------------------------------------------------- arcsin, arccos */

/* asin(u) = u + u z P(z) for |u| <= 1/2, given z = u^2; P fitted to
 * (asin(sqrt z)/sqrt z - 1)/z (degree 5, error 4.2e-9). */
VM_INLINE float asin_poly(float u, float z)
{
    float p = 0x1.13fed4p-5f;
    p = p * z + 0x1.18f91ep-6f;
    p = p * z + 0x1.fd8da2p-6f;
    p = p * z + 0x1.6d5bbap-5f;
    p = p * z + 0x1.33343p-4f;
    p = p * z + 0x1.555554p-3f;
    return u + u * (z * p);
}

/* |x| > 1/2: asin(|x|) = pi/2 - 2 asin(sqrt((1 - |x|)/2)), where
 * (1 - |x|)/2 is exact. */
VM_INLINE float vm_asin(float x)
{
    const float a = fabsf(x);
    const int big = a > 0.5f;
    const float zb = 0.5f * (1.0f - a);
    const float c = asin_poly(vsel(big, sqrtf(zb), a), vsel(big, zb, x * x));
    const float r = vsel(big, VM_PIO2_HI - (2.0f * c - VM_PIO2_LO), c);
    const float y = vsel(a > 1.0f, NAN, with_sign_of(r, x));
    return vsel(x != x, x, y);
}

/* acos(x) = pi/2 - asin(x) for |x| <= 1/2, 2 asin(sqrt((1 - x)/2)) above,
 * pi - 2 asin(sqrt((1 + x)/2)) below. */
VM_INLINE float vm_acos(float x)
{
    const float a = fabsf(x);
    const int big = a > 0.5f;
    const float zb = 0.5f * (1.0f - a);
    const float c = asin_poly(vsel(big, sqrtf(zb), x), vsel(big, zb, x * x));
    const float small = VM_PIO2_HI - (c - VM_PIO2_LO);
    const float neg = VM_PI_HI - (2.0f * c - VM_PI_LO);
    const float r = vsel(big, vsel(x < 0.0f, neg, 2.0f * c), small);
    const float y = vsel(a > 1.0f, NAN, r);
    return vsel(x != x, x, y);
}

/* ---------------------------------------------------------------- power */

/* log2(x) for a positive normal double: x = 2^e m, m in [sqrt(1/2),
 * sqrt(2)), log2(m) = (2/ln2) atanh(s) with s = (m - 1)/(m + 1), |s| <=
 * 0.172: the Taylor series to s^13 (truncation < 2e-12 relative). Enough for
 * a float32 power: the product y log2(x) is off by < 2^-28 wherever the
 * result is a finite nonzero float. */
VM_INLINE double log2_for_pow(double x)
{
    const uint64_t ix = as_u64(x);
    const uint64_t t = ix - 0x3fe6a09e667f3bcdu;           /* bits of sqrt(1/2) */
    const uint64_t eb = (t + 0x4000000000000000u) >> 52; /* e + 1024 */
    const double e = as_f64(0x4330000000000000u | eb) - (0x1p52 + 1024.0);
    const double m = as_f64(ix - (t & 0xfff0000000000000u));
    const double s = (m - 1.0) / (m + 1.0), z = s * s;
    double q = 0x1.c68f568d3176p-3; /* 2 / ((2k + 1) ln2), k = 6 .. 0 */
    q = q * z + 0x1.0c9a84994022dp-2;
    q = q * z + 0x1.484b13d7c02a9p-2;
    q = q * z + 0x1.a61762a7aded9p-2;
    q = q * z + 0x1.2776c50ef9bfep-1;
    q = q * z + 0x1.ec709dc3a03fdp-1;
    q = q * z + 0x1.71547652b82fep+1;
    return e + s * q;
}

/* 2^w for w in [-160, 130], in double: w = n + f, 2^f by a degree-7 fit on
 * |f| <= 1/2 (relative error 4.2e-11), 2^n built from bits. */
VM_INLINE double exp2_for_pow(double w)
{
    const double kd = w + VD_SHIFT;
    const uint64_t nb = as_u64(kd) - 0x4338000000000000u; /* n, two's complement */
    const double f = w - (kd - VD_SHIFT);
    double p = 0x1.00c0e4e15189cp-16;
    p = p * f + 0x1.446c79efd4834p-13;
    p = p * f + 0x1.5d877598350dep-10;
    p = p * f + 0x1.3b29d8bb0b97ep-7;
    p = p * f + 0x1.c6b08da70cce3p-5;
    p = p * f + 0x1.ebfbe0aa03df0p-3;
    p = p * f + 0x1.62e42fef9cc69p-1;
    p = p * f + 0x1.ffffffffa7135p-1;
    return p * as_f64((nb + 1023u) << 52);
}

/* x^y = 2^(y log2|x|) in double, rounded once to float; then the sign
 * (negative x, odd integer y) and C99's special cases by selects. y is an
 * integer if |y| >= 2^24 or y rounds to itself. */
VM_INLINE float vm_pow(float x, float y)
{
    const double ax = fabs((double)x), yd = y;
    double lg = log2_for_pow(ax);
    lg = vseld(ax == 0.0, -INFINITY, vseld(ax == INFINITY, INFINITY, lg));
    double w = yd * lg;
    w = w > 130.0 ? 130.0 : w;
    w = w < -160.0 ? -160.0 : w;
    float r = (float)exp2_for_pow(w);
    const double ay = fabs(yd);
    const double yr = ay + VD_SHIFT;
    const int y_int = ay >= 0x1p24 || (yr - VD_SHIFT) == ay;
    const int y_odd = ay < 0x1p24 && (yr - VD_SHIFT) == ay && (as_u64(yr) & 1u);
    r = as_f32(as_u32(r) | ((as_u32(x) & 0x80000000u) & (0u - (uint32_t)y_odd)));
    r = vsel(x < 0.0f && x != -INFINITY && !y_int, NAN, r);
    r = vsel(x != x || y != y, x + y, r);
    r = vsel(ax == 1.0 && ay == INFINITY, 1.0f, r); /* (-1)^+-inf */
    return vsel(x == 1.0f || y == 0.0f, 1.0f, r);
}

/* ---------------------------------------------------------------- float64 exp family */

#define VD_LN2_HI 0x1.62e42feep-1 /* 32 bits: n * hi exact for |n| < 2^21 */
#define VD_LN2_LO 0x1.a39ef35793c76p-33

/* e^r - 1 - r - r^2/2 = r^3 Q(r) on |r| <= ln2/2: Q of degree 9 fitted to
 * (e^r - 1 - r - r^2/2)/r^3, error 8e-18. */
VM_INLINE double expm1_q_d(double r)
{
    double q = 0x1.1f66d948a47d2p-29;
    q = q * r + 0x1.af389ecfc4b9cp-26;
    q = q * r + 0x1.27e4e1f7222cbp-22;
    q = q * r + 0x1.71de0db2f6b19p-19;
    q = q * r + 0x1.a01a01a47a591p-16;
    q = q * r + 0x1.a01a01a7c2efep-13;
    q = q * r + 0x1.6c16c16c167e2p-10;
    q = q * r + 0x1.11111111109b5p-7;
    q = q * r + 0x1.5555555555555p-5;
    return q * r + 0x1.5555555555556p-3;
}

/* e^r - 1 = r + (r^2/2 + r^3 Q(r)). */
VM_INLINE double expm1_poly_d(double r)
{
    const double r2 = r * r;
    return r + (0.5 * r2 + (r2 * r) * expm1_q_d(r));
}

/* x = n ln2 + r with |r| <= ln2/2 (xc within +-1100); returns r, and the
 * bits of 1.5 * 2^52 + n. */
VM_INLINE double exp_reduce_d(double xc, uint64_t *kbits)
{
    const double kd = xc * VD_LOG2E + VD_SHIFT;
    *kbits = as_u64(kd);
    const double n = kd - VD_SHIFT;
    return (xc - n * VD_LN2_HI) - n * VD_LN2_LO;
}

/* e^(x + xlo) for a small xlo (|xlo| < 2^-40 |x|; 0 where x is clamped):
 * 2^n e^r, 2^n applied as two normal factors (n in [-1075, 1024]) so
 * subnormal results round once. e^r = 1 + r + tail is summed keeping the
 * rounding errors of r (c, into which xlo goes) and of 1 + r (e1), so the
 * last addition is the only rounding that counts: < 0.52 ulp, and libm's
 * value nearly always. NaN x gives NaN. */
VM_INLINE double exp_plus_lo_d(double x, double xlo)
{
    double xc = x > 709.8 ? 709.8 : x;
    xc = xc < -745.2 ? -745.2 : xc;
    const double kd = xc * VD_LOG2E + VD_SHIFT;
    const uint64_t kb = as_u64(kd);
    const double nd = kd - VD_SHIFT;
    const double rh = xc - nd * VD_LN2_HI, rl = nd * VD_LN2_LO; /* rh exact */
    const double r = rh - rl;
    const double rb = r - rh;
    const double c = ((rh - (r - rb)) - (rl + rb)) + xlo; /* r + c = rh - rl exactly, + xlo */
    const double r2 = r * r;
    const double tail = 0.5 * r2 + (r2 * r) * expm1_q_d(r);
    const double s = 1.0 + r;
    const double e1 = (1.0 - s) + r;
    const double p = s + (e1 + (tail + c * (s + tail))); /* e^(r + c) = e^r (1 + c) */
    const uint64_t nb = kb - 0x4338000000000000u + 2048u; /* n + 2048 */
    const uint64_t n1 = nb >> 1, n2 = nb - n1;
    const double s1 = as_f64((n1 - 1u) << 52); /* 2^(n1 - 1024) */
    const double s2 = as_f64((n2 - 1u) << 52);
    return vseld(x != x, x, (p * s1) * s2);
}

VM_INLINE double vmd_exp(double x) { return exp_plus_lo_d(x, 0.0); }

/* e^x - 1 = 2 (2^(n-1) expm1(r) + (2^(n-1) - 1/2)), as in float32. */
VM_INLINE double vmd_expm1(double x)
{
    double xc = x > 709.8 ? 709.8 : x;
    xc = xc < -40.0 ? -40.0 : xc;
    uint64_t kb;
    const double r = exp_reduce_d(xc, &kb);
    const double q = expm1_poly_d(r);
    const double s = as_f64((kb - 0x4338000000000000u + 1022u) << 52); /* 2^(n-1) */
    const double y = 2.0 * (s * q + (s - 0.5));
    return vseld(x != x || fabs(x) < 0x1p-54, x, y);
}

/* 2^-n (n in [0, 2044]) as two normal factors. */
VM_INLINE void pow2_neg_split_d(uint64_t n, double *s1, double *s2)
{
    const uint64_t n1 = n >> 1, n2 = n - n1;
    *s1 = as_f64((1023u - n1) << 52);
    *s2 = as_f64((1023u - n2) << 52);
}

/* e^-(a + lo) = p 2^-n for 0 <= a <= 760 (larger a and NaN are taken as
 * 760) and a tiny correction lo. */
VM_INLINE double exp_neg_parts_d(double a, double lo, uint64_t *n)
{
    const double ac = a < 760.0 ? a : 760.0;
    uint64_t kb;
    const double r = exp_reduce_d(ac, &kb) + lo;
    *n = kb - 0x4338000000000000u;
    return 1.0 + expm1_poly_d(-r);
}

/* x / (1 + e^-a) as x_sigmoid_from_parts. */
VM_INLINE double x_sigmoid_from_parts_d(double x, double p, uint64_t n, int gone)
{
    double s1, s2;
    pow2_neg_split_d(n, &s1, &s2);
    const double t = (p * s1) * s2;
    const double num = vseld(x < 0.0, ((x * p) * s1) * s2, x);
    const double y = num / (1.0 + t);
    return vseld(gone && x < 0.0, -0.0, vseld(x != x, x, y));
}

VM_INLINE double vmd_silu(double x)
{
    uint64_t n;
    const double a = fabs(x);
    const double p = exp_neg_parts_d(a, 0.0, &n);
    return x_sigmoid_from_parts_d(x, p, n, a >= 760.0);
}

/* x = hi + lo, hi with 26 significant bits (Dekker's split; |x| < 2^995). */
VM_INLINE void split_d(double x, double *hi, double *lo)
{
    const double t = x * 134217729.0; /* 2^27 + 1 */
    *hi = t - (t - x);
    *lo = x - *hi;
}

/* a b = p + *e exactly (Dekker's product, no FMA). */
VM_INLINE double two_prod_d(double a, double b, double *e)
{
    double ah, al, bh, bl;
    split_d(a, &ah, &al);
    split_d(b, &bh, &bl);
    const double p = a * b;
    *e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return p;
}

/* 2 sqrt(2/pi) and 2 sqrt(2/pi) 0.044715 as double + double (mpmath). */
#define VD_GELU_K1_LO (-0x1.cbc0d30ebfd15p-54)
#define VD_GELU_K2_LO (-0x1.6c843a29d1c70p-61)

/* As float32, with 2u = x (K1 + K2 x^2) in double-double (a rounded 2u
 * would cost |2u| 2^-53 relative, 60 ulp at x = -9). Beyond |x| = 30 the
 * result is x or -0 whatever 2u is, so x is clamped there (keeping the
 * splits finite). */
VM_INLINE double vmd_gelu_tanh(double x)
{
    const double xc = x < -30.0 ? -30.0 : x > 30.0 ? 30.0 : x;
    double pl, ql, al;
    const double ph = two_prod_d(xc, xc, &pl);
    const double qh = two_prod_d(VM_GELU_K2, ph, &ql);
    ql += VM_GELU_K2 * pl + VD_GELU_K2_LO * ph;
    const double sh = VM_GELU_K1 + qh, sb = sh - VM_GELU_K1;
    const double sl = ((VM_GELU_K1 - (sh - sb)) + (qh - sb)) + (VD_GELU_K1_LO + ql);
    const double ah = two_prod_d(xc, sh, &al);
    al += xc * sl;
    uint64_t n;
    const double p = exp_neg_parts_d(fabs(ah), ah < 0.0 ? -al : al, &n);
    return x_sigmoid_from_parts_d(x, p, n, fabs(ah) >= 760.0);
}

VM_INLINE double vmd_sigmoid(double x)
{
    const double t = vmd_exp(-fabs(x));
    return vseld(x < 0.0, t, 1.0) / (1.0 + t);
}

/* tanh(|x|) = em / (em + 2), em = expm1(2|x|); tanh(x) = x below 2^-27. */
VM_INLINE double vmd_tanh(double x)
{
    const double a = fabs(x);
    const double em = vmd_expm1(2.0 * (a < 20.0 ? a : 20.0)); /* tanh(20) rounds to 1 */
    const double t = em / (em + 2.0);
    const double y = with_sign_of_d(vseld(a < 0x1p-27, a, t), x);
    return vseld(x != x, x, y);
}

/* As float32, with the switch at 700. */
VM_INLINE double vmd_sinh(double x)
{
    const double a = fabs(x);
    const double em = vmd_expm1(a < 700.0 ? a : 700.0);
    const double mid = 0.5 * (em + em / (em + 1.0));
    const double h = vmd_exp(0.5 * a);
    const double big = (0.5 * h) * h;
    const double y = with_sign_of_d(vseld(a < 700.0, mid, big), x);
    return vseld(x != x, x, y);
}

VM_INLINE double vmd_cosh(double x)
{
    const double a = fabs(x);
    const double e = vmd_exp(a < 700.0 ? a : 700.0);
    const double mid = 0.5 * e + 0.5 / e;
    const double h = vmd_exp(0.5 * a);
    const double big = (0.5 * h) * h;
    return vseld(a < 700.0, mid, big);
}

/* ---------------------------------------------------------------- float64 log family */

/* x = 2^e m for a positive normal double (bits ix), m in [sqrt(1/2),
 * sqrt(2)); returns f = m - 1 (exact) and e. */
VM_INLINE double log_split_d(uint64_t ix, double *e)
{
    const uint64_t t = ix - 0x3fe6a09e667f3bcdu;
    const uint64_t eb = (t + 0x4000000000000000u) >> 52; /* e + 1024 */
    *e = as_f64(0x4330000000000000u | eb) - (0x1p52 + 1024.0);
    return as_f64(ix - (t & 0xfff0000000000000u)) - 1.0;
}

/* log(1 + f) + c for f from log_split_d and a small c, as f - (hfsq -
 * (s (hfsq + R) + c)) with hfsq = f^2/2, s = f/(2 + f), and R = z P(z),
 * z = s^2, P fitted to (2 atanh(s) - 2s)/s^3 (degree 6, error 3e-16): the
 * exact f carries the result and every correction is small. */
VM_INLINE double log1p_body_d(double f, double c)
{
    const double s = f / (2.0 + f), z = s * s;
    double p = 0x1.2b584aae78a57p-3;
    p = p * z + 0x1.39fe606542ddep-3;
    p = p * z + 0x1.7462b4ab2ef6bp-3;
    p = p * z + 0x1.c71c62e5800a1p-3;
    p = p * z + 0x1.2492492df148dp-2;
    p = p * z + 0x1.99999999952e2p-2;
    p = p * z + 0x1.5555555555558p-1;
    const double hfsq = 0.5 * (f * f);
    return f - (hfsq - (s * (hfsq + z * p) + c));
}

VM_INLINE double vmd_log(double x)
{
    const int sub = x < 0x1p-1022;
    double e;
    const double f = log_split_d(as_u64(vseld(sub, x * 0x1p54, x)), &e);
    e = vseld(sub, e - 54.0, e);
    double y = e * VD_LN2_HI + log1p_body_d(f, e * VD_LN2_LO);
    y = vseld(x < 0.0, NAN, y);
    y = vseld(x == 0.0, -INFINITY, y);
    return vseld(x == INFINITY || x != x, x, y);
}

/* log2(x) = e + log1p(f) log2(e), log2(e) as hi (32 bits) + lo. */
VM_INLINE double vmd_log2(double x)
{
    const int sub = x < 0x1p-1022;
    double e;
    const double f = log_split_d(as_u64(vseld(sub, x * 0x1p54, x)), &e);
    e = vseld(sub, e - 54.0, e);
    const double lp = log1p_body_d(f, 0.0);
    double y = lp * 0x1.71547652p+0 + (lp * 0x1.705fc2eefa2p-33 + e);
    y = vseld(x < 0.0, NAN, y);
    y = vseld(x == 0.0, -INFINITY, y);
    return vseld(x == INFINITY || x != x, x, y);
}

/* log1p(x): u = 1 + x rounded, log(u) plus (x - (u - 1)) / u for the
 * rounding of u (as float32). */
VM_INLINE double vmd_log1p(double x)
{
    const double xc = vseld(x < -1.0 || x == INFINITY, 1.0, x);
    const double u = 1.0 + xc; /* up to DBL_MAX: no overflow, and then c = 0 */
    const double c = (xc - (u - 1.0)) / u;
    double e;
    const double f = log_split_d(as_u64(u), &e);
    double y = e * VD_LN2_HI + log1p_body_d(f, e * VD_LN2_LO + c);
    y = vseld(fabs(x) < 0x1p-54 || x != x || x == INFINITY, x, y);
    y = vseld(x < -1.0, NAN, y);
    return vseld(x == -1.0, -INFINITY, y);
}

/* logaddexp(a, b) = max + log1p(e^-|a - b|); equal arguments (equal
 * infinities included) give a + log 2. */
VM_INLINE double vmd_logaddexp(double a, double b)
{
    const double m = a > b ? a : b;
    const double y = m + vmd_log1p(vmd_exp(-fabs(a - b)));
    const double r = vseld(a == b, a + VD_LN2, y);
    return vseld(a != a || b != b, a + b, r);
}

/* ---------------------------------------------------------------- float64 power */

/* The functions below use fma (exact products, division residuals, and
 * Horner steps at one rounding each, half the instructions of a multiply
 * and an add): they are compiled for AVX2 and AVX-512 only, which have it
 * (the baseline calls libm, see VM_DOUBLE_CODE). */

/* a + b = s + *e exactly (Knuth's two-sum, any order of magnitudes). */
VM_INLINE double two_sum_d(double a, double b, double *e)
{
    const double s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

#define VD_LN2_FULL 0x1.62e42fefa39efp-1 /* ln2 = VD_LN2_FULL + VD_LN2_FULL_LO */
#define VD_LN2_FULL_LO 0x1.abc9e3b39803fp-56
#define VD_TWO_THIRDS_LO 0x1.5555555555555p-55 /* 2/3 = 0x1.5555555555555p-1 + this */

/* log(1 + f) - 2s - (2/3) s^3 = s^5 R(z), z = s^2 <= 0.0295; R fitted to
 * (2 atanh(s) - 2s - (2/3) s^3)/s^5 (degree 7, error 1.9e-18). */
VM_INLINE double log_dd_r(double z)
{
    double p = 0x1.e02d197c00c78p-4;
    p = fma(p, z, 0x1.df7ce9a6bcccbp-4);
    p = fma(p, z, 0x1.1118c74823a2ep-3);
    p = fma(p, z, 0x1.3b1395d4f9e5fp-3);
    p = fma(p, z, 0x1.745d177a8f200p-3);
    p = fma(p, z, 0x1.c71c71c6eaa8dp-3);
    p = fma(p, z, 0x1.2492492492521p-2);
    return fma(p, z, 0x1.999999999999ap-2);
}

/* log(x) as hi + *lo, relative error ~2^-64, for a positive finite x
 * (subnormals too): x = 2^e (1 + f), log(1 + f) = 2 atanh(s), s = f/(2 +
 * f); e ln2, 2s and (2/3) s^3 are carried as double-doubles (the rounding
 * of a plain s^3 term would be 2^-60 of log(x), 2 ulp of a pow near
 * overflow), the rest of the series in double. */
VM_INLINE double log_dd(double x, double *lo)
{
    const int sub = x < 0x1p-1022;
    double e;
    const double f = log_split_d(as_u64(vseld(sub, x * 0x1p54, x)), &e);
    e = vseld(sub, e - 54.0, e);
    const double d = 2.0 + f, dl = f - (d - 2.0); /* d + dl = 2 + f */
    const double sh = f / d;
    const double sl = (fma(-sh, d, f) - sh * dl) / d; /* s = sh + sl */
    const double z = sh * sh;
    const double zl = fma(sh, sh, -z) + 2.0 * (sh * sl); /* s^2 = z + zl */
    const double th = z * sh;
    const double tl = fma(z, sh, -th) + (zl * sh + z * sl); /* s^3 = th + tl */
    const double c3 = 0x1.5555555555555p-1;
    const double uh = c3 * th;
    const double ul = fma(c3, th, -uh) + (c3 * tl + VD_TWO_THIRDS_LO * th); /* (2/3) s^3 */
    const double rest = (th * z) * log_dd_r(z);
    const double eh = e * VD_LN2_FULL;
    const double el = fma(e, VD_LN2_FULL, -eh) + e * VD_LN2_FULL_LO;
    double e1, e2;
    const double s1 = two_sum_d(eh, 2.0 * sh, &e1);
    const double s2 = two_sum_d(s1, uh, &e2);
    const double l = ((e1 + e2) + (el + 2.0 * sl)) + (ul + rest);
    const double hi = s2 + l;
    *lo = l - (hi - s2);
    return hi;
}

/* y is an integer (|y| >= 2^52 always is), and an odd one. */
VM_INLINE void int_parity_d(double y, int *is_int, int *is_odd)
{
    const double ay = fabs(y);
    const double yr = ay + 0x1p52; /* for ay < 2^52: the nearest integer, parity in bit 0 */
    const int small = ay < 0x1p52;
    const int small_int = (yr - 0x1p52) == ay;
    const int big = !small;
    *is_int = big | small_int;
    *is_odd = (small & small_int & (int)(as_u64(yr) & 1u)) |
              (big & (ay < 0x1p53) & (int)(as_u64(ay) & 1u));
}

/* x^y = e^(y log|x|) with log|x| and the product y log|x| as
 * double-doubles, e^ taking the low part as a correction; then the sign
 * (negative x, odd integer y) and C99's special cases by selects. */
VM_INLINE double vmd_pow(double x, double y)
{
    const double ax = fabs(x);
    const int finite_x = ax < INFINITY && ax > 0.0;
    double lo;
    const double hi = log_dd(vseld(finite_x, ax, 1.0), &lo);
    const double wh = y * hi;
    const int in_range = fabs(wh) < 800.0; /* beyond, e^wh is 0 or inf anyway */
    const double wl = vseld(in_range, fma(y, hi, -wh) + y * lo, 0.0);
    double r = exp_plus_lo_d(vseld(in_range, wh, vseld(wh > 0.0, 800.0, -800.0)), wl);
    int y_int, y_odd;
    int_parity_d(y, &y_int, &y_odd);
    const double big = vseld(y < 0.0, 0.0, INFINITY); /* |x| = inf */
    r = vseld(ax == INFINITY, big, vseld(ax == 0.0, vseld(y < 0.0, INFINITY, 0.0), r));
    r = as_f64(as_u64(r) | ((as_u64(x) & 0x8000000000000000u) & (0u - (uint64_t)y_odd)));
    r = vseld(x < 0.0 && x != -INFINITY && !y_int, NAN, r);
    r = vseld(x != x || y != y, x + y, r);
    r = vseld(ax == 1.0 && fabs(y) == INFINITY, 1.0, r); /* (-1)^+-inf */
    return vseld(x == 1.0 || y == 0.0, 1.0, r);
}

/* ---------------------------------------------------------------- float64 arctan family */

#define VD_PIO2_HI 0x1.921fb54442d18p+0
#define VD_PIO2_LO 0x1.1a62633145c07p-54
#define VD_PI_HI 0x1.921fb54442d18p+1
#define VD_PI_LO 0x1.1a62633145c07p-53
#define VD_PIO4_HI 0x1.921fb54442d18p-1
#define VD_PIO4_LO 0x1.1a62633145c07p-55

/* atan(u) = u + u z P(z), z = u^2, for |u| <= tan(pi/8); P fitted to
 * (atan(sqrt z)/sqrt z - 1)/z (degree 11, error 1.2e-18). */
VM_INLINE double atan_poly_d(double u)
{
    const double z = u * u;
    double p = 0x1.0ad36a455cafbp-6;
    p = fma(p, z, -0x1.1b33b923aa954p-5);
    p = fma(p, z, 0x1.74ddd408bb4c1p-5);
    p = fma(p, z, -0x1.ac7a938b69c93p-5);
    p = fma(p, z, 0x1.e19a13b9fc6dfp-5);
    p = fma(p, z, -0x1.110e880a7a521p-4);
    p = fma(p, z, 0x1.3b1392d9e785cp-4);
    p = fma(p, z, -0x1.745d165df3f95p-4);
    p = fma(p, z, 0x1.c71c71c304b68p-4);
    p = fma(p, z, -0x1.249249248d7eep-3);
    p = fma(p, z, 0x1.9999999999953p-3);
    p = fma(p, z, -0x1.5555555555555p-2);
    return u + u * (z * p);
}

/* atan(t + tl) for t >= 0 (inf included) and a correction tl below t's
 * ulp, as hi + *lo (|lo| < 0.42), as in float32: pi/2 + atan(-1/t) above
 * tan(3pi/8), pi/4 + atan((t - 1)/(t + 1)) above tan(pi/8). The roundings
 * of that u (of t - 1, t + 1 from two-sums, and of the quotient, from the
 * fma residual, so one reciprocal serves both) and tl give du, and
 * atan(u + du) = atan(u) + du/(1 + u^2). */
VM_INLINE double atan_nonneg_d(double t, double tl, double *lo)
{
    const int big = t > 0x1.3504f333f9de6p+1, mid = t > 0x1.a827999fcef32p-2;
    double e1, e2;
    const double nu = two_sum_d(t, -1.0, &e1), de = two_sum_d(t, 1.0, &e2);
    const double n = vseld(big, -1.0, nu), d = vseld(big, t, de); /* d >= 1 */
    const double nl = vseld(big, 0.0, e1 + tl), dl = vseld(big, tl, e2 + tl);
    const double rd = 1.0 / d;
    const double uq = n * rd; /* within ~1 ulp of n/d: the residual corrects it */
    const double duq = (fma(-uq, d, n) + (nl - uq * dl)) * rd;
    const double u = vseld(big | mid, uq, t);
    const double du = vseld(big | mid, vseld(t < INFINITY, duq, 0.0), tl);
    *lo = atan_poly_d(u) + (du * (1.0 - u * u) + vseld(big, VD_PIO2_LO, vseld(mid, VD_PIO4_LO, 0.0)));
    return vseld(big, VD_PIO2_HI, vseld(mid, VD_PIO4_HI, 0.0));
}

VM_INLINE double vmd_atan(double x)
{
    double lo;
    const double hi = atan_nonneg_d(fabs(x), 0.0, &lo);
    return with_sign_of_d(hi + lo, x);
}

/* atan2(y, x) as the float32 one: r = atan of min/max of |x|, |y| in [0,
 * 1] (inf/inf as 1 and 0/0 as 0: C99's special values), then k + r or k -
 * r for k = 0, pi/2 (|y| > |x|) or pi (x negative, -0 too), and y's sign.
 * The division's rounding (from its fma residual) is passed on to atan;
 * k's and r's high parts are added exactly (two-sum) and everything else
 * after them, so the result is rounded about once. */
VM_INLINE double vmd_atan2(double y, double x)
{
    const double ax = fabs(x), ay = fabs(y);
    const int swap = ay > ax, neg_x = (int)(as_u64(x) >> 63);
    const double num = vseld(swap, ax, ay), den = vseld(swap, ay, ax);
    double t = num / den;
    t = vseld(ax == INFINITY && ay == INFINITY, 1.0, t);
    t = vseld(den == 0.0, 0.0, t);
    const double tl = fma(-t, den, num) / den;
    double lo;
    const double hi = atan_nonneg_d(t, vseld(den < INFINITY && den > 0.0, tl, 0.0), &lo);
    const double k_hi = vseld(swap, VD_PIO2_HI, vseld(neg_x, VD_PI_HI, 0.0));
    const double k_lo = vseld(swap, VD_PIO2_LO, vseld(neg_x, VD_PI_LO, 0.0));
    const int minus = swap != neg_x;
    double e;
    const double s = two_sum_d(k_hi, vseld(minus, -hi, hi), &e);
    const double r = s + (vseld(minus, -lo, lo) + (k_lo + e));
    return vseld(x != x || y != y, x + y, with_sign_of_d(r, y));
}

/* asin(u) - u = u z P(z) for |u| <= 1/2, z = u^2; P fitted to
 * (asin(sqrt z)/sqrt z - 1)/z (degree 12, error 1.5e-17). */
VM_INLINE double asin_tail_d(double u, double z)
{
    double p = 0x1.d72b2bc8155f8p-6;
    p = fma(p, z, -0x1.e6aaa8a0a04ccp-7);
    p = fma(p, z, 0x1.1d189408314eep-6);
    p = fma(p, z, 0x1.65a9c4dfcf8b2p-8);
    p = fma(p, z, 0x1.52420b04b37bep-7);
    p = fma(p, z, 0x1.782651caa6547p-7);
    p = fma(p, z, 0x1.c9cf07674736ap-7);
    p = fma(p, z, 0x1.1c4d35cf95421p-6);
    p = fma(p, z, 0x1.6e8bb1c8209a2p-6);
    p = fma(p, z, 0x1.f1c71c1db0623p-6);
    p = fma(p, z, 0x1.6db6db6e31f13p-5);
    p = fma(p, z, 0x1.3333333332ecap-4);
    p = fma(p, z, 0x1.5555555555556p-3);
    return u * (z * p);
}

/* For |x| > 1/2: s + *sl = sqrt((1 - |x|)/2) (the halving and 1 - |x| are
 * exact there; sl from the square root's fma residual), and the tail
 * asin(s) - s; for |x| <= 1/2, *sl = 0, and the tail of |x|. Sets *big. */
VM_INLINE double asin_parts_d(double x, double *sl, double *tail, int *big)
{
    const double a = fabs(x);
    *big = a > 0.5;
    const double zb = 0.5 * (1.0 - a);
    const double s = sqrt(zb);
    *sl = vseld(*big & (s > 0.0), fma(-s, s, zb) / (2.0 * s), 0.0);
    const double u = vseld(*big, s, a);
    *tail = asin_tail_d(u, vseld(*big, zb, a * a));
    return u;
}

/* asin(|x|) = |x| + tail up to 1/2, pi/2 - 2 asin(s) above, the high
 * parts subtracted exactly (two-sum) and the rest added to that. */
VM_INLINE double vmd_asin(double x)
{
    double sl, tail;
    int big;
    const double u = asin_parts_d(x, &sl, &tail, &big);
    double e;
    const double h = two_sum_d(VD_PIO2_HI, -2.0 * u, &e);
    const double r_big = h + ((VD_PIO2_LO + e) - 2.0 * (sl + tail));
    const double y = with_sign_of_d(vseld(big, r_big, u + tail), x);
    return vseld(fabs(x) > 1.0, NAN, vseld(x != x, x, y));
}

/* acos(x) = pi/2 - asin(x) up to |x| = 1/2, 2 asin(s) above, pi - 2
 * asin(s) below -1/2. */
VM_INLINE double vmd_acos(double x)
{
    double sl, tail;
    int big;
    const double u = asin_parts_d(x, &sl, &tail, &big);
    const double mid = VD_PIO2_HI - (x + (with_sign_of_d(tail, x) - VD_PIO2_LO));
    const double pos = 2.0 * (u + (sl + tail));
    double e;
    const double h = two_sum_d(VD_PI_HI, -2.0 * u, &e);
    const double neg = h + ((VD_PI_LO + e) - 2.0 * (sl + tail));
    const double y = vseld(big, vseld(x < 0.0, neg, pos), mid);
    return vseld(fabs(x) > 1.0, NAN, vseld(x != x, x, y));
}

/* ---------------------------------------------------------------- float64 sin, cos, tan */

/* pi/2 = VD_PIO2_1 + VD_PIO2_2 + VD_PIO2_3 (159 bits, mpmath). */
#define VD_PIO2_1 0x1.921fb54442d18p+0
#define VD_PIO2_2 0x1.1a62633145c07p-54
#define VD_PIO2_3 (-0x1.f1976b7ed8fbcp-110)
#define VD_2_PI 0x1.45f306dc9c883p-1
/* Above this |x| (and for inf, NaN) the block loop calls libm instead. */
#define VD_TRIG_MAX 0x1p20
#define VD_TRIG_MAX_BITS 0x4130000000000000u /* bits of 2^20 */

/* x = n pi/2 + (r + *rl), |r| <= pi/4 + tiny, for |x| <= VD_TRIG_MAX;
 * returns r and the quadrant n mod 4. x - n pi/2_1 is exact (fma: both
 * are multiples of 2^-53 and the difference is below 1), n pi/2_2 is split
 * exactly, and what is left of pi/2 is 2^-160: the reduction keeps ~100
 * bits, enough for the closest doubles to multiples of pi/2 in range.
 * Garbage (but no undefined behavior) beyond: callers patch those. */
VM_INLINE double trig_reduce_d(double x, double *rl, uint64_t *quadrant)
{
    const double kd = x * VD_2_PI + VD_SHIFT;
    *quadrant = as_u64(kd) & 3u;
    const double n = kd - VD_SHIFT;
    const double a = fma(-n, VD_PIO2_1, x);
    const double bh = n * VD_PIO2_2, bl = fma(n, VD_PIO2_2, -bh);
    double e;
    const double rh = two_sum_d(a, -bh, &e);
    const double l = (e - bl) - n * VD_PIO2_3;
    const double r = rh + l;
    *rl = l - (r - rh);
    return r;
}

/* sin(r + rl) and cos(r + rl) for |r| <= pi/4 + tiny, rl below r's ulp:
 * sin = r + r z S(z) + rl (1 - z/2), cos = 1 - z/2 + z^2 C(z) - r rl with
 * the rounding of 1 - z/2 kept (z = r^2). S fitted to (sin(sqrt z)/sqrt z
 * - 1)/z (degree 6, error 1.2e-20), C to (cos(sqrt z) - 1 + z/2)/z^2
 * (degree 5, error 1.3e-18). */
VM_INLINE void sincos_poly_d(double r, double rl, double *s, double *c)
{
    const double z = r * r;
    double ps = -0x1.ab17bdcbd3414p-41;
    ps = fma(ps, z, 0x1.61217ee5cca1bp-33);
    ps = fma(ps, z, -0x1.ae64541295cdfp-26);
    ps = fma(ps, z, 0x1.71de3a54607a5p-19);
    ps = fma(ps, z, -0x1.a01a01a019937p-13);
    ps = fma(ps, z, 0x1.1111111111110p-7);
    ps = fma(ps, z, -0x1.5555555555555p-3);
    double pc = -0x1.907d8f29fe831p-37;
    pc = fma(pc, z, 0x1.1eeb68cd22f56p-29);
    pc = fma(pc, z, -0x1.27e4fa17bf139p-22);
    pc = fma(pc, z, 0x1.a01a019f4e9b4p-16);
    pc = fma(pc, z, -0x1.6c16c16c16967p-10);
    pc = fma(pc, z, 0x1.5555555555555p-5);
    const double hz = 0.5 * z, w = 1.0 - hz;
    *s = r + (r * (z * ps) + rl * (1.0 - hz));
    *c = w + (((1.0 - w) - hz) + ((z * z) * pc - r * rl));
}

/* sin: quadrant n gives sin r, cos r, -sin r, -cos r; |x| < 2^-26 is its
 * own sine (keeps -0, subnormals exact). */
VM_INLINE double vmd_sin(double x)
{
    double rl, s, c;
    uint64_t q;
    const double r = trig_reduce_d(x, &rl, &q);
    sincos_poly_d(r, rl, &s, &c);
    const double v = vseld(q & 1u, c, s);
    const double y = as_f64(as_u64(v) ^ ((q & 2u) << 62));
    return vseld(fabs(x) < 0x1p-26, x, y);
}

/* cos: cos r, -sin r, -cos r, sin r (tiny x: r = x, and 1 - z/2 rounds
 * right). */
VM_INLINE double vmd_cos(double x)
{
    double rl, s, c;
    uint64_t q;
    const double r = trig_reduce_d(x, &rl, &q);
    sincos_poly_d(r, rl, &s, &c);
    const double v = vseld(q & 1u, s, c);
    return as_f64(as_u64(v) ^ (((q + 1u) & 2u) << 62));
}

/* tan: sin r / cos r in even quadrants, -cos r / sin r in odd ones. */
VM_INLINE double vmd_tan(double x)
{
    double rl, s, c;
    uint64_t q;
    const double r = trig_reduce_d(x, &rl, &q);
    sincos_poly_d(r, rl, &s, &c);
    const int odd = (int)(q & 1u);
    const double y = vseld(odd, -c, s) / vseld(odd, s, c);
    return vseld(fabs(x) < 0x1p-27, x, y);
}

/* ---------------------------------------------------------------- float64 erf */

/* erf(x) = x + x Q(x^2) for |x| < 3/4, Q fitted to erf(x)/x - 1 in x^2
 * (degree 10, error 8e-19). */
VM_INLINE double erf_small_d(double x)
{
    const double z = x * x;
    double q = 0x1.8a312cb07e6ccp-27;
    q = fma(q, z, -0x1.564f71bbc0d35p-23);
    q = fma(q, z, 0x1.b90ecd4aeec12p-20);
    q = fma(q, z, -0x1.f4c5debf1228ap-17);
    q = fma(q, z, 0x1.f9a2afa3a8f86p-14);
    q = fma(q, z, -0x1.c02db1220cfe6p-11);
    q = fma(q, z, 0x1.565bcd03657c0p-8);
    q = fma(q, z, -0x1.b82ce31257412p-6);
    q = fma(q, z, 0x1.ce2f21a0424c3p-4);
    q = fma(q, z, -0x1.812746b0379e0p-2);
    q = fma(q, z, 0x1.06eba8214db69p-3);
    return x + x * q;
}

/* erfc(a) e^(a^2) on [0.75, 1.25], in s = a - 1 (degree 13, relative
 * error 1.69e-18). */
VM_INLINE double erfc_scaled_0(double a)
{
    const double s = a - 1;
    double p = -0x1.402bf227feaf2p-18;
    p = fma(p, s, 0x1.f9b9bcb7c7007p-17);
    p = fma(p, s, -0x1.7aa026fb393b1p-15);
    p = fma(p, s, 0x1.184101c3813a8p-13);
    p = fma(p, s, -0x1.90823b7243782p-12);
    p = fma(p, s, 0x1.1352770df6c59p-10);
    p = fma(p, s, -0x1.6af2653d4b73bp-9);
    p = fma(p, s, 0x1.c8cb9570457c7p-8);
    p = fma(p, s, -0x1.10fcf1b55ebcdp-6);
    p = fma(p, s, 0x1.33cad0ef68078p-5);
    p = fma(p, s, -0x1.44837f8906fbap-4);
    p = fma(p, s, 0x1.3c27283c32c9ep-3);
    p = fma(p, s, -0x1.17c4e3f17c050p-2);
    p = fma(p, s, 0x1.b5d8780f956b2p-2);
    return p;
}

/* erfc(a) e^(a^2) on [1.25, 2], in s = a - 1.625 (degree 14, relative
 * error 2.49e-18). */
VM_INLINE double erfc_scaled_1(double a)
{
    const double s = a - 1.625;
    double p = 0x1.c10979c4f1d83p-24;
    p = fma(p, s, -0x1.9927ecc2742adp-22);
    p = fma(p, s, 0x1.5ceba066057b1p-20);
    p = fma(p, s, -0x1.2d7e8d1a33abcp-18);
    p = fma(p, s, 0x1.fafd4f8a3cc0bp-17);
    p = fma(p, s, -0x1.9d62df8acc348p-15);
    p = fma(p, s, 0x1.465ecc645afacp-13);
    p = fma(p, s, -0x1.f1b43be885071p-12);
    p = fma(p, s, 0x1.6d609f6b58f9fp-10);
    p = fma(p, s, -0x1.014eae28d0450p-8);
    p = fma(p, s, 0x1.5a142948a96d0p-7);
    p = fma(p, s, -0x1.ba018e64278acp-6);
    p = fma(p, s, 0x1.0a15ac2adab35p-4);
    p = fma(p, s, -0x1.2b11e6959934dp-3);
    p = fma(p, s, 0x1.3583f6644327bp-2);
    return p;
}

/* erfc(a) e^(a^2) on [2, 3], in s = a - 2.5 (degree 14, relative
 * error 8.66e-18). */
VM_INLINE double erfc_scaled_2(double a)
{
    const double s = a - 2.5;
    double p = 0x1.1395650bd6106p-28;
    p = fma(p, s, -0x1.247092d91b604p-26);
    p = fma(p, s, 0x1.200cd85731b89p-24);
    p = fma(p, s, -0x1.24bbed0b3392dp-22);
    p = fma(p, s, 0x1.2350e5ea264dfp-20);
    p = fma(p, s, -0x1.1ad21df850abdp-18);
    p = fma(p, s, 0x1.0bcba18a8f4b3p-16);
    p = fma(p, s, -0x1.edd4201bab49dp-15);
    p = fma(p, s, 0x1.ba8a67d269207p-13);
    p = fma(p, s, -0x1.809ce8ae42cf9p-11);
    p = fma(p, s, 0x1.435c04e206cd2p-9);
    p = fma(p, s, -0x1.0632076808c92p-7);
    p = fma(p, s, 0x1.98958a7a8e4a6p-6);
    p = fma(p, s, -0x1.3086d7f01ac89p-4);
    p = fma(p, s, 0x1.afbb3f3b7343bp-3);
    return p;
}

/* erfc(a) e^(a^2) on [3, 4.25], in s = a - 3.625 (degree 14, relative
 * error 7.98e-18). */
VM_INLINE double erfc_scaled_3(double a)
{
    const double s = a - 3.625;
    double p = 0x1.efe7100bda44ep-34;
    p = fma(p, s, -0x1.3b652004fbb39p-31);
    p = fma(p, s, 0x1.74740a6aaa0adp-29);
    p = fma(p, s, -0x1.ca791f61fdbbcp-27);
    p = fma(p, s, 0x1.15f719290fef6p-24);
    p = fma(p, s, -0x1.4ad14215cbdfbp-22);
    p = fma(p, s, 0x1.82a918a6fedd9p-20);
    p = fma(p, s, -0x1.bb73a9a778a96p-18);
    p = fma(p, s, 0x1.f28b1c3a75a1bp-16);
    p = fma(p, s, -0x1.1267afc759274p-13);
    p = fma(p, s, 0x1.276b01ef6e74ap-11);
    p = fma(p, s, -0x1.36992d37ba831p-9);
    p = fma(p, s, 0x1.3e68313870544p-7);
    p = fma(p, s, -0x1.3dacc8d85f6c8p-5);
    p = fma(p, s, 0x1.33cb19179d7f6p-3);
    return p;
}

/* erfc(a) e^(a^2) on [4.25, 6], in s = a - 5.125 (degree 14, relative
 * error 2.77e-17). */
VM_INLINE double erfc_scaled_4(double a)
{
    const double s = a - 5.125;
    double p = 0x1.3e4c319b799f6p-39;
    p = fma(p, s, -0x1.f6442a2dde903p-37);
    p = fma(p, s, 0x1.6b89d191c0b2cp-34);
    p = fma(p, s, -0x1.183bd50a01debp-31);
    p = fma(p, s, 0x1.ac2fefdcc746fp-29);
    p = fma(p, s, -0x1.42957f05f1e2ep-26);
    p = fma(p, s, 0x1.e0329765fe1c5p-24);
    p = fma(p, s, -0x1.60fd01d89ce1bp-21);
    p = fma(p, s, 0x1.0025440f9273bp-18);
    p = fma(p, s, -0x1.6ecb6c3bd52ecp-16);
    p = fma(p, s, 0x1.02fdcfb10396fp-13);
    p = fma(p, s, -0x1.687d168eb695bp-11);
    p = fma(p, s, 0x1.ee3ffedd01db4p-9);
    p = fma(p, s, -0x1.4d86dc5446019p-6);
    p = fma(p, s, 0x1.bac6ca42e1bfbp-4);
    return p;
}

/* erf(|x|) = 1 - e^(-x^2) F(|x|) for 3/4 <= |x| < 6, F = erfc e^(x^2) by
 * pieces; x^2 is split exactly (fma), so e^(-x^2) carries no rounding of
 * it, and erfc <= 0.29 there, so its errors shrink in 1 - erfc. 1 from 6
 * on (erfc(6) = 2e-17 is below half an ulp of 1). */
VM_INLINE double vmd_erf(double x)
{
    const double a = fabs(x);
    const double ac = a < 0.75 ? 0.75 : a > 6.0 ? 6.0 : a;
    const double a2 = ac * ac, a2l = fma(ac, ac, -a2);
    const double e = exp_plus_lo_d(-a2, -a2l);
    const double f = vseld(ac < 1.25, erfc_scaled_0(ac),
                           vseld(ac < 2.0, erfc_scaled_1(ac),
                                 vseld(ac < 3.0, erfc_scaled_2(ac),
                                       vseld(ac < 4.25, erfc_scaled_3(ac), erfc_scaled_4(ac)))));
    const double big = with_sign_of_d(1.0 - e * f, x);
    const double y = vseld(a < 0.75, erf_small_d(x), big);
    return vseld(x != x, x, y);
}

/* float32 logaddexp through the double one: one rounding at the end. */
VM_INLINE float vm_logaddexp(float a, float b) { return (float)vmd_logaddexp(a, b); }

/* ---------------------------------------------------------------- block loops */

/* A loop over whole blocks, then the tail padded into one block. */
#define VM_LOOP_BODY(T, FN)                                                                \
    int64_t i = 0;                                                                       \
    for (; i + VM_BLOCK <= n; i += VM_BLOCK)                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            y[i + j] = FN(x[i + j]);                                                     \
    if (i < n) {                                                                         \
        T xt[VM_BLOCK], yt[VM_BLOCK];                                                    \
        const int m = (int)(n - i);                                                      \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            xt[j] = j < m ? x[i + j] : (T)0;                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            yt[j] = FN(xt[j]);                                                           \
        for (int j = 0; j < m; j++)                                                      \
            y[i + j] = yt[j];                                                            \
    }

/* The same for two inputs (a and b may overlap each other, not y). */
#define VM_LOOP2_BODY(T, FN)                                                               \
    int64_t i = 0;                                                                       \
    for (; i + VM_BLOCK <= n; i += VM_BLOCK)                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            y[i + j] = FN(a[i + j], b[i + j]);                                           \
    if (i < n) {                                                                         \
        T at[VM_BLOCK], bt[VM_BLOCK], yt[VM_BLOCK];                                      \
        const int m = (int)(n - i);                                                      \
        for (int j = 0; j < VM_BLOCK; j++) {                                             \
            at[j] = j < m ? a[i + j] : (T)1;                                             \
            bt[j] = j < m ? b[i + j] : (T)1;                                             \
        }                                                                                \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            yt[j] = FN(at[j], bt[j]);                                                    \
        for (int j = 0; j < m; j++)                                                      \
            y[i + j] = yt[j];                                                            \
    }

/* Beyond the range the vector argument reduction covers (|x| above
 * VM_TRIG_MAX / VD_TRIG_MAX, inf, NaN): libm takes those elements. */
VM_INLINE bool vm_trig_beyond(float x) { return (as_u32(x) & 0x7fffffffu) > VM_TRIG_MAX_BITS; }
VM_INLINE bool vmd_trig_beyond(double x)
{
    return (as_u64(x) & 0x7fffffffffffffffu) > VD_TRIG_MAX_BITS;
}

/* Trig: the same, and each block with elements BEYOND the reduction range
 * has those elements recomputed with libm. */
#define VM_TRIG_FIX(BEYOND, LIBM, X, Y, CNT)                                               \
    do {                                                                                 \
        bool big = false;                                                                \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            big |= BEYOND((X)[j]);                                                       \
        if (big)                                                                         \
            for (int j = 0; j < (CNT); j++)                                              \
                if (BEYOND((X)[j]))                                                      \
                    (Y)[j] = LIBM((X)[j]);                                               \
    } while (0)

#define VM_TRIG_BODY(T, FN, LIBM, BEYOND)                                                  \
    int64_t i = 0;                                                                       \
    for (; i + VM_BLOCK <= n; i += VM_BLOCK) {                                           \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            y[i + j] = FN(x[i + j]);                                                     \
        VM_TRIG_FIX(BEYOND, LIBM, x + i, y + i, VM_BLOCK);                               \
    }                                                                                    \
    if (i < n) {                                                                         \
        T xt[VM_BLOCK], yt[VM_BLOCK];                                                    \
        const int m = (int)(n - i);                                                      \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            xt[j] = j < m ? x[i + j] : (T)0;                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            yt[j] = FN(xt[j]);                                                           \
        VM_TRIG_FIX(BEYOND, LIBM, xt, yt, m);                                            \
        for (int j = 0; j < m; j++)                                                      \
            y[i + j] = yt[j];                                                            \
    }

/* One function of one variant, compiled with target attribute ATTR. The
 * pointers are restrict: GCC's -O2 cost model does not version loops for
 * aliasing, so without it nothing would vectorize. */
#define VM_DEF1(NAME, SUFFIX, ATTR, T, FN)                                                 \
    ATTR static void NAME##_##SUFFIX(int64_t n, const T *restrict x, T *restrict y)       \
    {                                                                                    \
        VM_LOOP_BODY(T, FN)                                                              \
    }
#define VM_DEF2(NAME, SUFFIX, ATTR, T, FN)                                                 \
    ATTR static void NAME##_##SUFFIX(int64_t n, const T *a, const T *b, T *restrict y)    \
    {                                                                                    \
        VM_LOOP2_BODY(T, FN)                                                             \
    }
#define VM_DEF_TRIG(NAME, SUFFIX, ATTR, FN, LIBM)                                          \
    ATTR static void NAME##_##SUFFIX(int64_t n, const float *restrict x, float *restrict y) \
    {                                                                                    \
        VM_TRIG_BODY(float, FN, LIBM, vm_trig_beyond)                                    \
    }
#define VMD_DEF_TRIG(NAME, SUFFIX, ATTR, FN, LIBM)                                         \
    ATTR static void NAME##_##SUFFIX(int64_t n, const double *restrict x, double *restrict y) \
    {                                                                                    \
        VM_TRIG_BODY(double, FN, LIBM, vmd_trig_beyond)                                  \
    }

/* The functions every variant compiles from this file, with ATTR. */
#define VM_COMMON(SUFFIX, ATTR)                                                            \
    VM_DEF1(exp, SUFFIX, ATTR, float, vm_exp)                                            \
    VM_DEF1(expm1, SUFFIX, ATTR, float, vm_expm1)                                        \
    VM_DEF1(log, SUFFIX, ATTR, float, vm_log)                                            \
    VM_DEF1(log1p, SUFFIX, ATTR, float, vm_log1p)                                        \
    VM_DEF1(log2, SUFFIX, ATTR, float, vm_log2)                                          \
    VM_DEF1(tanh, SUFFIX, ATTR, float, vm_tanh)                                          \
    VM_DEF1(sigmoid, SUFFIX, ATTR, float, vm_sigmoid)                                    \
    VM_DEF1(erf, SUFFIX, ATTR, float, vm_erf)                                            \
    VM_DEF_TRIG(sin, SUFFIX, ATTR, vm_sin, sinf)                                         \
    VM_DEF_TRIG(cos, SUFFIX, ATTR, vm_cos, cosf)                                         \
    VM_DEF_TRIG(tan, SUFFIX, ATTR, vm_tan, tanf)                                         \
    VM_DEF1(sinh, SUFFIX, ATTR, float, vm_sinh)                                          \
    VM_DEF1(cosh, SUFFIX, ATTR, float, vm_cosh)                                          \
    VM_DEF1(arcsin, SUFFIX, ATTR, float, vm_asin)                                        \
    VM_DEF1(arccos, SUFFIX, ATTR, float, vm_acos)                                        \
    VM_DEF1(arctan, SUFFIX, ATTR, float, vm_atan)                                        \
    VM_DEF1(silu, SUFFIX, ATTR, float, vm_silu)                                          \
    VM_DEF1(gelu_tanh, SUFFIX, ATTR, float, vm_gelu_tanh)                                \
    VM_DEF2(arctan2, SUFFIX, ATTR, float, vm_atan2)                                      \
    VM_DEF1(silu_f64, SUFFIX, ATTR, double, vmd_silu)                                    \
    VM_DEF1(gelu_tanh_f64, SUFFIX, ATTR, double, vmd_gelu_tanh)

/* The ones built on double arithmetic, which GCC vectorizes for AVX2 and
 * AVX-512 but not for SSE2 (there they ran at 0.2-0.8x libm's speed, so
 * the baseline calls libm instead, below). */
#define VM_DOUBLE_CODE(SUFFIX, ATTR)                                                       \
    VM_DEF2(power, SUFFIX, ATTR, float, vm_pow)                                          \
    VM_DEF2(logaddexp, SUFFIX, ATTR, float, vm_logaddexp)                                \
    VM_DEF1(exp_f64, SUFFIX, ATTR, double, vmd_exp)                                      \
    VM_DEF1(expm1_f64, SUFFIX, ATTR, double, vmd_expm1)                                  \
    VM_DEF1(log_f64, SUFFIX, ATTR, double, vmd_log)                                      \
    VM_DEF1(log1p_f64, SUFFIX, ATTR, double, vmd_log1p)                                  \
    VM_DEF1(log2_f64, SUFFIX, ATTR, double, vmd_log2)                                    \
    VM_DEF1(tanh_f64, SUFFIX, ATTR, double, vmd_tanh)                                    \
    VM_DEF1(sigmoid_f64, SUFFIX, ATTR, double, vmd_sigmoid)                              \
    VM_DEF1(sinh_f64, SUFFIX, ATTR, double, vmd_sinh)                                    \
    VM_DEF1(cosh_f64, SUFFIX, ATTR, double, vmd_cosh)                                    \
    VM_DEF2(logaddexp_f64, SUFFIX, ATTR, double, vmd_logaddexp)                          \
    VM_DEF2(power_f64, SUFFIX, ATTR, double, vmd_pow)                                    \
    VM_DEF2(arctan2_f64, SUFFIX, ATTR, double, vmd_atan2)                                \
    VM_DEF1(arctan_f64, SUFFIX, ATTR, double, vmd_atan)                                  \
    VM_DEF1(arcsin_f64, SUFFIX, ATTR, double, vmd_asin)                                  \
    VM_DEF1(arccos_f64, SUFFIX, ATTR, double, vmd_acos)                                  \
    VMD_DEF_TRIG(sin_f64, SUFFIX, ATTR, vmd_sin, sin)                                    \
    VMD_DEF_TRIG(cos_f64, SUFFIX, ATTR, vmd_cos, cos)                                    \
    VMD_DEF_TRIG(tan_f64, SUFFIX, ATTR, vmd_tan, tan)                                    \
    VM_DEF1(erf_f64, SUFFIX, ATTR, double, vmd_erf)

/* A variant's table. */
#define VM_TABLE(SUFFIX)                                                                   \
    static const wf_vm_table table_##SUFFIX = {                                          \
        .exp = exp_##SUFFIX,                                                             \
        .expm1 = expm1_##SUFFIX,                                                         \
        .log = log_##SUFFIX,                                                             \
        .log1p = log1p_##SUFFIX,                                                         \
        .log2 = log2_##SUFFIX,                                                           \
        .tanh = tanh_##SUFFIX,                                                           \
        .sigmoid = sigmoid_##SUFFIX,                                                     \
        .erf = erf_##SUFFIX,                                                             \
        .sin = sin_##SUFFIX,                                                             \
        .cos = cos_##SUFFIX,                                                             \
        .tan = tan_##SUFFIX,                                                             \
        .sinh = sinh_##SUFFIX,                                                           \
        .cosh = cosh_##SUFFIX,                                                           \
        .arcsin = arcsin_##SUFFIX,                                                       \
        .arccos = arccos_##SUFFIX,                                                       \
        .arctan = arctan_##SUFFIX,                                                       \
        .silu = silu_##SUFFIX,                                                           \
        .gelu = gelu_##SUFFIX,                                                           \
        .gelu_tanh = gelu_tanh_##SUFFIX,                                                 \
        .power = power_##SUFFIX,                                                         \
        .arctan2 = arctan2_##SUFFIX,                                                     \
        .logaddexp = logaddexp_##SUFFIX,                                                 \
        .exp_f64 = exp_f64_##SUFFIX,                                                     \
        .expm1_f64 = expm1_f64_##SUFFIX,                                                 \
        .log_f64 = log_f64_##SUFFIX,                                                     \
        .log1p_f64 = log1p_f64_##SUFFIX,                                                 \
        .log2_f64 = log2_f64_##SUFFIX,                                                   \
        .tanh_f64 = tanh_f64_##SUFFIX,                                                   \
        .sigmoid_f64 = sigmoid_f64_##SUFFIX,                                             \
        .sinh_f64 = sinh_f64_##SUFFIX,                                                   \
        .cosh_f64 = cosh_f64_##SUFFIX,                                                   \
        .silu_f64 = silu_f64_##SUFFIX,                                                   \
        .gelu_tanh_f64 = gelu_tanh_f64_##SUFFIX,                                         \
        .logaddexp_f64 = logaddexp_f64_##SUFFIX,                                         \
        .power_f64 = power_f64_##SUFFIX,                                                 \
        .arctan2_f64 = arctan2_f64_##SUFFIX,                                             \
        .arctan_f64 = arctan_f64_##SUFFIX,                                               \
        .arcsin_f64 = arcsin_f64_##SUFFIX,                                               \
        .arccos_f64 = arccos_f64_##SUFFIX,                                               \
        .sin_f64 = sin_f64_##SUFFIX,                                                     \
        .cos_f64 = cos_f64_##SUFFIX,                                                     \
        .tan_f64 = tan_f64_##SUFFIX,                                                     \
        .erf_f64 = erf_f64_##SUFFIX,                                                     \
    };

/* The baseline's libm functions (within an ulp or two, but not
 * bit-identical with the AVX2 and AVX-512 results). float32 logaddexp
 * computes in double and rounds once, as the vectorized one does. */
static double libm_sigmoid(double x)
{
    const double t = exp(-fabs(x)); /* never overflows */
    return (x < 0.0 ? t : 1.0) / (1.0 + t);
}
static double libm_logaddexp(double a, double b)
{
    if (a != a || b != b)
        return a + b;
    if (a == b)
        return a + VD_LN2;
    return (a > b ? a : b) + log1p(exp(-fabs(a - b)));
}
static float libm_logaddexp_f32(float a, float b) { return (float)libm_logaddexp(a, b); }

#define VM_ATTR_BASELINE
VM_COMMON(baseline, VM_ATTR_BASELINE)
VM_DEF1(gelu, baseline, VM_ATTR_BASELINE, float, vm_gelu)
VM_DEF2(power, baseline, VM_ATTR_BASELINE, float, powf)
VM_DEF2(logaddexp, baseline, VM_ATTR_BASELINE, float, libm_logaddexp_f32)
VM_DEF1(exp_f64, baseline, VM_ATTR_BASELINE, double, exp)
VM_DEF1(expm1_f64, baseline, VM_ATTR_BASELINE, double, expm1)
VM_DEF1(log_f64, baseline, VM_ATTR_BASELINE, double, log)
VM_DEF1(log1p_f64, baseline, VM_ATTR_BASELINE, double, log1p)
VM_DEF1(log2_f64, baseline, VM_ATTR_BASELINE, double, log2)
VM_DEF1(tanh_f64, baseline, VM_ATTR_BASELINE, double, tanh)
VM_DEF1(sigmoid_f64, baseline, VM_ATTR_BASELINE, double, libm_sigmoid)
VM_DEF1(sinh_f64, baseline, VM_ATTR_BASELINE, double, sinh)
VM_DEF1(cosh_f64, baseline, VM_ATTR_BASELINE, double, cosh)
VM_DEF2(logaddexp_f64, baseline, VM_ATTR_BASELINE, double, libm_logaddexp)
VM_DEF2(power_f64, baseline, VM_ATTR_BASELINE, double, pow)
VM_DEF2(arctan2_f64, baseline, VM_ATTR_BASELINE, double, atan2)
VM_DEF1(arctan_f64, baseline, VM_ATTR_BASELINE, double, atan)
VM_DEF1(arcsin_f64, baseline, VM_ATTR_BASELINE, double, asin)
VM_DEF1(arccos_f64, baseline, VM_ATTR_BASELINE, double, acos)
VM_DEF1(sin_f64, baseline, VM_ATTR_BASELINE, double, sin)
VM_DEF1(cos_f64, baseline, VM_ATTR_BASELINE, double, cos)
VM_DEF1(tan_f64, baseline, VM_ATTR_BASELINE, double, tan)
VM_DEF1(erf_f64, baseline, VM_ATTR_BASELINE, double, erf)
VM_TABLE(baseline)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VM_HAVE_X86 1
#define VM_ATTR_AVX2 __attribute__((target("avx2,fma")))
#define VM_ATTR_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
VM_COMMON(avx2, VM_ATTR_AVX2)
VM_DOUBLE_CODE(avx2, VM_ATTR_AVX2)

/* gelu for AVX2 written with intrinsics: vm_gelu's operations one for one
 * (no fma), so its bits are the baseline's. GCC's vectorization of vm_gelu
 * took ~290 instructions a vector (its ~50 constants broadcast one by one,
 * with spills) and ran one vector's long dependent chains (two polynomials
 * of degree 10 and 11, then two more) at a time. Here two vectors go
 * through every step side by side (a pair of values, one instruction for
 * each), so the core has independent work while each chain waits, and the
 * two polynomials are one chain whose coefficients each lane picks (the
 * big one led by a 0 that its first step turns into its top coefficient
 * exactly). GELU was 7% of the embedding server's time. */
typedef struct pair8 {
    __m256 a, b;
} pair8;

VM_ATTR_AVX2 VM_INLINE pair8 p8_mul(pair8 x, pair8 y)
{
    return (pair8){_mm256_mul_ps(x.a, y.a), _mm256_mul_ps(x.b, y.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_add(pair8 x, pair8 y)
{
    return (pair8){_mm256_add_ps(x.a, y.a), _mm256_add_ps(x.b, y.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_sub(pair8 x, pair8 y)
{
    return (pair8){_mm256_sub_ps(x.a, y.a), _mm256_sub_ps(x.b, y.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_min(pair8 x, pair8 y) /* x < y ? x : y */
{
    return (pair8){_mm256_min_ps(x.a, y.a), _mm256_min_ps(x.b, y.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_and(pair8 x, pair8 y)
{
    return (pair8){_mm256_and_ps(x.a, y.a), _mm256_and_ps(x.b, y.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_xor(pair8 x, pair8 y)
{
    return (pair8){_mm256_xor_ps(x.a, y.a), _mm256_xor_ps(x.b, y.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_sel(pair8 c, pair8 yes, pair8 no) /* vsel */
{
    return (pair8){_mm256_blendv_ps(no.a, yes.a, c.a), _mm256_blendv_ps(no.b, yes.b, c.b)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_const(float c)
{
    return (pair8){_mm256_set1_ps(c), _mm256_set1_ps(c)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_gt(pair8 x, pair8 y)
{
    return (pair8){_mm256_cmp_ps(x.a, y.a, _CMP_GT_OQ), _mm256_cmp_ps(x.b, y.b, _CMP_GT_OQ)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_lt(pair8 x, pair8 y)
{
    return (pair8){_mm256_cmp_ps(x.a, y.a, _CMP_LT_OQ), _mm256_cmp_ps(x.b, y.b, _CMP_LT_OQ)};
}
VM_ATTR_AVX2 VM_INLINE pair8 p8_unordered(pair8 x, pair8 y)
{
    return (pair8){_mm256_cmp_ps(x.a, y.a, _CMP_UNORD_Q), _mm256_cmp_ps(x.b, y.b, _CMP_UNORD_Q)};
}

/* Horner's rule over c[0..count) (highest first), as vm_gelu's chains. */
VM_ATTR_AVX2 VM_INLINE pair8 p8_horner(pair8 v, const float *c, int count)
{
    pair8 q = p8_const(c[0]);
#pragma GCC unroll 12
    for (int i = 1; i < count; i++)
        q = p8_add(p8_mul(q, v), p8_const(c[i]));
    return q;
}

/* pow2_neg_split(n): 2^-n as two factors. */
VM_ATTR_AVX2 VM_INLINE void p8_pow2_neg_split(__m256i n, __m256 *s1, __m256 *s2)
{
    const __m256i n1 = _mm256_srli_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
    const __m256i e127 = _mm256_set1_epi32(127);
    *s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(e127, n1), 23));
    *s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(e127, n2), 23));
}

static const float gelu_small_coefs[12] = {
    -0x1.04773ep-19f, 0x1.03bf5p-17f,  -0x1.91e4d8p-16f, 0x1.6c8072p-14f,
    -0x1.426f9ep-12f, 0x1.0a42a6p-10f, -0x1.9ef958p-9f,  0x1.2f463p-7f,
    -0x1.9b00b4p-6f,  0x1.fcc82cp-5f,  -0x1.19524ap-3f,  0x1.0bdb2ep-2f};
static const float gelu_big_coefs[11] = {
    -0x1.48c666p+3f, 0x1.9a64bap+1f,  0x1.e702eap+0f,  -0x1.e74de6p+0f,
    0x1.ba4e5p-1f,   -0x1.55bc04p-5f, -0x1.59a4bcp-2f, 0x1.522b3p-2f,
    -0x1.c8b32ep-4f, -0x1.3f6e4cp-3f, 0x1.7d859ep-2f};
static const float gelu_el_coefs[6] = {-0x1.111112p-7f, 0x1.555556p-5f, -0x1.555556p-3f,
                                       0.5f, -1.0f, 1.0f};
static const float expm1_coefs[6] = {0x1.a01a02p-13f, 1.39345415e-3f, 8.33331048e-3f,
                                     4.16664556e-2f, 1.66666672e-1f, 0.5f};

VM_ATTR_AVX2 VM_INLINE pair8 gelu_pair_avx2(pair8 x)
{
    const pair8 sign = p8_const(-0.0f), one = p8_const(1.0f);
    const pair8 a = p8_xor(p8_and(x, sign), x); /* fabsf: the sign bit cleared */
    const pair8 t = p8_min(a, p8_const(15.0f)); /* NaN: 15 */
    const pair8 big = p8_gt(t, p8_const(2.0f));
    const pair8 den = p8_sel(big, t, p8_const(2.0f));
    const pair8 u = {_mm256_div_ps(one.a, den.a), _mm256_div_ps(one.b, den.b)};
    /* h (big) or G (small): one chain with the coefficients picked per lane */
    const pair8 v = p8_sel(big, p8_sub(u, p8_const(0x1.222222p-2f)), p8_sub(t, one));
    pair8 f = p8_sel(big, p8_const(0.0f), p8_const(gelu_small_coefs[0]));
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++)
        f = p8_add(p8_mul(f, v),
                   p8_sel(big, p8_const(gelu_big_coefs[i - 1]), p8_const(gelu_small_coefs[i])));
    const __m256 high_bits = _mm256_castsi256_ps(_mm256_set1_epi32((int)0xfffff000u));
    const pair8 th = p8_and(t, (pair8){high_bits, high_bits}), tl = p8_sub(t, th);
    const pair8 half = p8_const(0.5f);
    const pair8 hi = p8_mul(half, p8_mul(th, th));
    const pair8 lo = p8_add(p8_mul(th, tl), p8_mul(half, p8_mul(tl, tl)));
    const pair8 el = p8_horner(lo, gelu_el_coefs, 6);
    const pair8 m = p8_mul(el, p8_sel(big, p8_mul(u, f), f));
    const pair8 xm = p8_sel(big, p8_xor(p8_mul(el, f), sign), p8_mul(x, p8_mul(el, f)));
    /* exp_neg_parts(hi): e^-hi = p 2^-n */
    const pair8 ac = p8_min(hi, p8_const(112.0f));
    const pair8 kf = p8_add(p8_mul(ac, p8_const(VM_LOG2E)), p8_const(VM_SHIFT));
    const __m256i bias = _mm256_set1_epi32(0x4b400000);
    const __m256i na = _mm256_sub_epi32(_mm256_castps_si256(kf.a), bias);
    const __m256i nb = _mm256_sub_epi32(_mm256_castps_si256(kf.b), bias);
    const pair8 nf = p8_sub(kf, p8_const(VM_SHIFT));
    const pair8 r = p8_sub(p8_sub(ac, p8_mul(nf, p8_const(VM_LN2_HI))),
                           p8_mul(nf, p8_const(VM_LN2_LO)));
    const pair8 rn = p8_xor(r, sign);
    const pair8 q = p8_horner(rn, expm1_coefs, 6);
    const pair8 p = p8_add(one, p8_add(rn, p8_mul(p8_mul(rn, rn), q)));
    pair8 s1, s2;
    p8_pow2_neg_split(na, &s1.a, &s2.a);
    p8_pow2_neg_split(nb, &s1.b, &s2.b);
    const pair8 neg = p8_mul(p8_mul(p8_mul(xm, p), s1), s2);
    const pair8 pos = p8_mul(x, p8_sub(one, p8_mul(p8_mul(p8_mul(m, p), s1), s2)));
    const pair8 zero = p8_const(0.0f);
    pair8 y = p8_sel(p8_lt(x, zero), neg, pos);
    y = p8_sel(p8_gt(a, p8_const(15.0f)), p8_sel(p8_gt(x, zero), x, sign), y);
    return p8_sel(p8_unordered(x, x), x, y);
}
#undef V8

VM_ATTR_AVX2 static void gelu_avx2(int64_t n, const float *restrict x, float *restrict y)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const pair8 r = gelu_pair_avx2((pair8){_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8)});
        _mm256_storeu_ps(y + i, r.a);
        _mm256_storeu_ps(y + i + 8, r.b);
    }
    if (i < n) {
        float xt[16] = {0}, yt[16];
        memcpy(xt, x + i, (size_t)(n - i) * sizeof *xt);
        const pair8 r = gelu_pair_avx2((pair8){_mm256_loadu_ps(xt), _mm256_loadu_ps(xt + 8)});
        _mm256_storeu_ps(yt, r.a);
        _mm256_storeu_ps(yt + 8, r.b);
        memcpy(y + i, yt, (size_t)(n - i) * sizeof *yt);
    }
}
VM_TABLE(avx2)
VM_COMMON(avx512, VM_ATTR_AVX512)
VM_DEF1(gelu, avx512, VM_ATTR_AVX512, float, vm_gelu)
VM_DOUBLE_CODE(avx512, VM_ATTR_AVX512)
VM_TABLE(avx512)
#else
#define VM_HAVE_X86 0
#endif

/* ---------------------------------------------------------------- dispatch */

static bool isa_supported(int isa)
{
    if (isa == WF_VM_ISA_BASELINE)
        return true;
#if VM_HAVE_X86
    __builtin_cpu_init();
    if (isa == WF_VM_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == WF_VM_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return false;
}

const wf_vm_table *wf__vm_table(int isa)
{
    if (isa < 0 || isa >= WF_VM_ISA_COUNT || !isa_supported(isa))
        return NULL;
#if VM_HAVE_X86
    if (isa == WF_VM_ISA_AVX2)
        return &table_avx2;
    if (isa == WF_VM_ISA_AVX512)
        return &table_avx512;
#endif
    return &table_baseline;
}

static const char *const isa_names[WF_VM_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *wf__vm_isa_name(int isa)
{
    return isa >= 0 && isa < WF_VM_ISA_COUNT ? isa_names[isa] : "invalid";
}

int wf__vm_isa_parse(const char *name)
{
    for (int isa = 0; name && isa < WF_VM_ISA_COUNT; isa++)
        if (strcmp(name, isa_names[isa]) == 0)
            return isa;
    return -1;
}

int wf__vm_isa_best(void)
{
    static atomic_int best = -1; /* detection is idempotent: a race only repeats it */
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (b < 0) {
        b = WF_VM_ISA_BASELINE;
        for (int isa = WF_VM_ISA_COUNT - 1; isa > WF_VM_ISA_BASELINE; isa--)
            if (isa_supported(isa)) {
                b = isa;
                break;
            }
        atomic_store_explicit(&best, b, memory_order_relaxed);
    }
    return b;
}

/* WEFT_ISA's variant if this CPU runs it (each variant needs the ones
 * below it, so "runs it" is "not above the best"), else the best. */
static int default_isa(void)
{
    const int want = wf__vm_isa_parse(getenv("WEFT_ISA"));
    const int best = wf__vm_isa_best();
    return want >= 0 && want <= best ? want : best;
}

/* -1 until the first dispatch or force. */
static atomic_int active_isa = -1;

int wf__vm_isa_active(void)
{
    int isa = atomic_load_explicit(&active_isa, memory_order_relaxed);
    if (isa < 0) {
        int unset = -1;
        atomic_compare_exchange_strong(&active_isa, &unset, default_isa()); /* a force wins */
        isa = atomic_load_explicit(&active_isa, memory_order_relaxed);
    }
    return isa;
}

wf_status wf__vm_isa_force(int isa)
{
    if (isa < -1 || isa >= WF_VM_ISA_COUNT)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf__vm_isa_force: no variant %d", isa);
    if (isa >= 0 && !isa_supported(isa))
        return wf__error(WF_ERR_UNSUPPORTED, "wf__vm_isa_force: this CPU cannot run %s",
                         wf__vm_isa_name(isa));
    atomic_store_explicit(&active_isa, isa < 0 ? default_isa() : isa, memory_order_relaxed);
    return WF_OK;
}

static const wf_vm_table *const tables[WF_VM_ISA_COUNT] = {
#if VM_HAVE_X86
    &table_baseline, &table_avx2, &table_avx512,
#else
    &table_baseline, &table_baseline, &table_baseline, /* never active: not supported */
#endif
};

static const wf_vm_table *active_table(void) { return tables[wf__vm_isa_active()]; }

#define VM_DISPATCH(NAME, FIELD, T)                                                        \
    void wf__vm_##NAME(int64_t n, const T *restrict x, T *restrict y)                     \
    {                                                                                    \
        active_table()->FIELD(n, x, y);                                                  \
    }
#define VM_DISPATCH2(NAME, FIELD, T)                                                       \
    void wf__vm_##NAME(int64_t n, const T *a, const T *b, T *restrict y)                  \
    {                                                                                    \
        active_table()->FIELD(n, a, b, y);                                               \
    }
VM_DISPATCH(exp_f32, exp, float)
VM_DISPATCH(expm1_f32, expm1, float)
VM_DISPATCH(log_f32, log, float)
VM_DISPATCH(log1p_f32, log1p, float)
VM_DISPATCH(log2_f32, log2, float)
VM_DISPATCH(tanh_f32, tanh, float)
VM_DISPATCH(sigmoid_f32, sigmoid, float)
VM_DISPATCH(erf_f32, erf, float)
VM_DISPATCH(sin_f32, sin, float)
VM_DISPATCH(cos_f32, cos, float)
VM_DISPATCH(tan_f32, tan, float)
VM_DISPATCH(sinh_f32, sinh, float)
VM_DISPATCH(cosh_f32, cosh, float)
VM_DISPATCH(arcsin_f32, arcsin, float)
VM_DISPATCH(arccos_f32, arccos, float)
VM_DISPATCH(arctan_f32, arctan, float)
VM_DISPATCH(silu_f32, silu, float)
VM_DISPATCH(gelu_f32, gelu, float)
VM_DISPATCH(gelu_tanh_f32, gelu_tanh, float)
VM_DISPATCH2(power_f32, power, float)
VM_DISPATCH2(arctan2_f32, arctan2, float)
VM_DISPATCH2(logaddexp_f32, logaddexp, float)
VM_DISPATCH(exp_f64, exp_f64, double)
VM_DISPATCH(expm1_f64, expm1_f64, double)
VM_DISPATCH(log_f64, log_f64, double)
VM_DISPATCH(log1p_f64, log1p_f64, double)
VM_DISPATCH(log2_f64, log2_f64, double)
VM_DISPATCH(tanh_f64, tanh_f64, double)
VM_DISPATCH(sigmoid_f64, sigmoid_f64, double)
VM_DISPATCH(sinh_f64, sinh_f64, double)
VM_DISPATCH(cosh_f64, cosh_f64, double)
VM_DISPATCH(silu_f64, silu_f64, double)
VM_DISPATCH(gelu_tanh_f64, gelu_tanh_f64, double)
VM_DISPATCH2(logaddexp_f64, logaddexp_f64, double)
VM_DISPATCH2(power_f64, power_f64, double)
VM_DISPATCH2(arctan2_f64, arctan2_f64, double)
VM_DISPATCH(arctan_f64, arctan_f64, double)
VM_DISPATCH(arcsin_f64, arcsin_f64, double)
VM_DISPATCH(arccos_f64, arccos_f64, double)
VM_DISPATCH(sin_f64, sin_f64, double)
VM_DISPATCH(cos_f64, cos_f64, double)
VM_DISPATCH(tan_f64, tan_f64, double)
VM_DISPATCH(erf_f64, erf_f64, double)

/* ---------------------------------------------------------------- gelu, float64 */

/* gelu(x) = x erfc(-x/sqrt2) / 2 with libm's erfc. z = -x/sqrt2 is rounded
 * to zh; erfc(zh + dz) = erfc(zh) (1 - dz k), k = (2/sqrt(pi)) e^-zh^2 /
 * erfc(zh) (about 2 zh in the tail), with dz the rounding error of zh from
 * 1/sqrt2 as hi + lo. Without it the tail is off by ~2 zh^2 ulp (400 ulp at
 * x = -20). */
/* Far tail (t = -x > 36.7, where erfc(-x/sqrt2) is subnormal and would
 * pass its lost digits on, multiplied by t): gelu = -t phi(t) M(t), M the
 * Mills ratio by its continued fraction 1/(t + 1/(t + 2/(t + ...))) (16
 * levels: converged far below rounding at t > 36), e^(-t^2/2) with t^2
 * split exactly (Dekker: t = th + tl, 26-bit halves). */
static double gelu_f64_far_tail(double t)
{
    double d = t;
    for (int k = 16; k >= 1; k--)
        d = t + k / d;
    const double split = t * 134217729.0; /* 2^27 + 1 */
    const double th = split - (split - t), tl = t - th;
    const double hi = 0.5 * (th * th), lo = th * tl + 0.5 * (tl * tl);
    const double q = -(t / d) * 0x1.9884533d43651p-2 * exp(-lo); /* 1/sqrt(2 pi) */
    return q * exp(-hi);
}

double wf__vm_gelu_f64_scalar(double x)
{
    if (x == -INFINITY)
        return -0.0;
    if (x < -36.7)
        return gelu_f64_far_tail(-x);
    const double rs_hi = 0x1.6a09e667f3bcdp-1, rs_lo = -0x1.bdd3413b26456p-55;
    double e;
    const double zh = two_prod_d(-x, rs_hi, &e); /* |x| <= 36.7: the split is finite */
    const double dz = e + -x * rs_lo;
    const double ec = erfc(zh);
    if (!(zh > 0.5) || !(ec > 0.0))
        return 0.5 * x * ec; /* no tail here (or none left) */
    /* k needs only ~1e-5 relative accuracy (k dz is below 2 zh^2 ulp):
     * beyond zh = 5 its asymptotic series does that without an exp */
    const double w = 1.0 / (zh * zh);
    const double k = zh < 5.0 ? 0x1.20dd750429b6dp+0 * exp(-zh * zh) / ec
                              : 2.0 * zh / (1.0 - w * (0.5 - w * (0.75 - 1.875 * w)));
    return (0.5 * x) * (ec - ec * (k * dz));
}

/* ---------------------------------------------------------------- erfinv */

/* The Newton step for erf(y) = x at y (|x| <= 1/2). */
static double erfinv_step_center(double x, double y)
{
    return (erf(y) - x) / (0x1.20dd750429b6dp+0 * exp(-y * y));
}

/* The Newton step for log(erfc(y)) = log(q) at y > 0, q = 1 - |x|: the
 * logarithm is nearly quadratic in y, so the steps converge from far off,
 * and q = 1 - |x| is exact for |x| >= 1/2. */
static double erfinv_step_tail(double log_q, double y)
{
    const double ec = erfc(y);
    const double dlog = -0x1.20dd750429b6dp+0 * exp(-y * y) / ec; /* d log(erfc(y)) / dy */
    return (log(ec) - log_q) / dlog;
}

/* Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011),
 * single-precision branch (relative error about 4e-7) for w = -log(1 -
 * x^2) < 16; beyond (only float64 gets there, up to w = 36.7), the
 * asymptotic y = sqrt(t - log(pi t)/2), t = -log(1 - |x|), off by < 1e-3.
 * Then Newton steps (see above), at most newton_steps, stopping after a
 * step below 2^-40 |y| (the next one would be below the rounding). */
double wf__vm_erfinv(double x, int newton_steps)
{
    if (x != x || x < -1.0 || x > 1.0)
        return NAN;
    if (x == 1.0)
        return INFINITY;
    if (x == -1.0)
        return -INFINITY;
    if (x == 0.0)
        return x; /* keeps -0 */
    const double ax = fabs(x);
    const double q = 1.0 - ax; /* exact for ax >= 1/2 */
    double w = -log((1.0 - x) * (1.0 + x)), p, y;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
        y = p * ax;
    } else if (w < 16.0) {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
        y = p * ax;
    } else {
        const double t = -log(q);
        y = sqrt(t - 0.5 * log(0x1.921fb54442d18p+1 * t));
    }
    const double log_q = ax > 0.5 ? log(q) : 0.0;
    for (int k = 0; k < newton_steps; k++) {
        const double step = ax > 0.5 ? erfinv_step_tail(log_q, y) : erfinv_step_center(ax, y);
        if (!(step == step))
            break;
        y -= step;
        if (fabs(step) <= 0x1p-40 * y)
            break;
    }
    return copysign(y, x);
}
