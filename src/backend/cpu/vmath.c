/*
 * Vectorized float32 math (see vmath.h).
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
 * functions named in each comment) and rounded to float.
 */
#include "backend/cpu/vmath.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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
    const float xc = vsel(x < -1.0f || x > 0x1p100f, 1.0f, x); /* keep the path finite */
    const float u = 1.0f + xc;
    const float c = (xc - (u - 1.0f)) / u;
    float e;
    const float f = log_split(as_u32(u), &e);
    const float hf = 0.5f * f * f;
    float y = log_tail(f) + (e * VM_LN2F_LO + c) - hf + f + e * VM_LN2F_HI;
    /* Beyond 2^100 the correction is negligible: log1p(x) = log(x). */
    y = vsel(x > 0x1p100f, vm_log(x), y);
    y = vsel(fabsf(x) < 0x1p-25f || x != x, x, y); /* first order exact; keeps -0 */
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

/* ---------------------------------------------------------------- block loops */

/* A loop over whole blocks, then the tail padded into one block. */
#define VM_LOOP_BODY(FN)                                                                   \
    int64_t i = 0;                                                                       \
    for (; i + VM_BLOCK <= n; i += VM_BLOCK)                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            y[i + j] = FN(x[i + j]);                                                     \
    if (i < n) {                                                                         \
        float xt[VM_BLOCK], yt[VM_BLOCK];                                                \
        const int m = (int)(n - i);                                                      \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            xt[j] = j < m ? x[i + j] : 0.0f;                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            yt[j] = FN(xt[j]);                                                           \
        for (int j = 0; j < m; j++)                                                      \
            y[i + j] = yt[j];                                                            \
    }

/* Trig: the same, and each block whose |x| exceed VM_TRIG_MAX (or are NaN or
 * inf) has those elements recomputed with libm. */
#define VM_TRIG_FIX(LIBM, X, Y, CNT)                                                       \
    do {                                                                                 \
        uint32_t big = 0;                                                                \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            big |= (as_u32((X)[j]) & 0x7fffffffu) > VM_TRIG_MAX_BITS;                    \
        if (big)                                                                         \
            for (int j = 0; j < (CNT); j++)                                              \
                if ((as_u32((X)[j]) & 0x7fffffffu) > VM_TRIG_MAX_BITS)                   \
                    (Y)[j] = LIBM((X)[j]);                                               \
    } while (0)

#define VM_TRIG_BODY(FN, LIBM)                                                             \
    int64_t i = 0;                                                                       \
    for (; i + VM_BLOCK <= n; i += VM_BLOCK) {                                           \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            y[i + j] = FN(x[i + j]);                                                     \
        VM_TRIG_FIX(LIBM, x + i, y + i, VM_BLOCK);                                       \
    }                                                                                    \
    if (i < n) {                                                                         \
        float xt[VM_BLOCK], yt[VM_BLOCK];                                                \
        const int m = (int)(n - i);                                                      \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            xt[j] = j < m ? x[i + j] : 0.0f;                                             \
        for (int j = 0; j < VM_BLOCK; j++)                                               \
            yt[j] = FN(xt[j]);                                                           \
        VM_TRIG_FIX(LIBM, xt, yt, m);                                                    \
        for (int j = 0; j < m; j++)                                                      \
            y[i + j] = yt[j];                                                            \
    }

/* One variant: every function compiled with target attribute ATTR. The
 * pointers are restrict: GCC's -O2 cost model does not version loops for
 * aliasing, so without it nothing would vectorize. */
#define VM_VARIANT(SUFFIX, ATTR)                                                           \
    ATTR static void exp_##SUFFIX(int64_t n, const float *restrict x, float *restrict y) { VM_LOOP_BODY(vm_exp) } \
    ATTR static void expm1_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                 \
    {                                                                                    \
        VM_LOOP_BODY(vm_expm1)                                                           \
    }                                                                                    \
    ATTR static void log_##SUFFIX(int64_t n, const float *restrict x, float *restrict y) { VM_LOOP_BODY(vm_log) } \
    ATTR static void log1p_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                 \
    {                                                                                    \
        VM_LOOP_BODY(vm_log1p)                                                           \
    }                                                                                    \
    ATTR static void log2_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                  \
    {                                                                                    \
        VM_LOOP_BODY(vm_log2)                                                            \
    }                                                                                    \
    ATTR static void tanh_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                  \
    {                                                                                    \
        VM_LOOP_BODY(vm_tanh)                                                            \
    }                                                                                    \
    ATTR static void sigmoid_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)               \
    {                                                                                    \
        VM_LOOP_BODY(vm_sigmoid)                                                         \
    }                                                                                    \
    ATTR static void erf_##SUFFIX(int64_t n, const float *restrict x, float *restrict y) { VM_LOOP_BODY(vm_erf) } \
    ATTR static void sin_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                   \
    {                                                                                    \
        VM_TRIG_BODY(vm_sin, sinf)                                                       \
    }                                                                                    \
    ATTR static void cos_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                   \
    {                                                                                    \
        VM_TRIG_BODY(vm_cos, cosf)                                                       \
    }                                                                                    \
    ATTR static void tan_##SUFFIX(int64_t n, const float *restrict x, float *restrict y)                   \
    {                                                                                    \
        VM_TRIG_BODY(vm_tan, tanf)                                                       \
    }                                                                                    \
    static const wf_vm_table table_##SUFFIX = {                                          \
        exp_##SUFFIX,   expm1_##SUFFIX, log_##SUFFIX, log1p_##SUFFIX,                    \
        log2_##SUFFIX,  tanh_##SUFFIX,  sigmoid_##SUFFIX, erf_##SUFFIX,                  \
        sin_##SUFFIX,   cos_##SUFFIX,   tan_##SUFFIX,                                    \
    };

#define VM_ATTR_BASELINE
VM_VARIANT(baseline, VM_ATTR_BASELINE)

#if defined(__x86_64__) && defined(__GNUC__)
#define VM_HAVE_X86 1
#define VM_ATTR_AVX2 __attribute__((target("avx2,fma")))
#define VM_ATTR_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
VM_VARIANT(avx2, VM_ATTR_AVX2)
VM_VARIANT(avx512, VM_ATTR_AVX512)
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
    /* Support is detected once per variant: this runs on every dispatch. */
    static atomic_int supported[WF_VM_ISA_COUNT]; /* 0 unknown, 1 yes, 2 no */
    if (isa < 0 || isa >= WF_VM_ISA_COUNT)
        return NULL;
    int s = atomic_load_explicit(&supported[isa], memory_order_relaxed);
    if (s == 0) {
        s = isa_supported(isa) ? 1 : 2;
        atomic_store_explicit(&supported[isa], s, memory_order_relaxed);
    }
    if (s != 1)
        return NULL;
#if VM_HAVE_X86
    if (isa == WF_VM_ISA_AVX2)
        return &table_avx2;
    if (isa == WF_VM_ISA_AVX512)
        return &table_avx512;
#endif
    return &table_baseline;
}

const char *wf__vm_isa_name(int isa)
{
    switch (isa) {
    case WF_VM_ISA_BASELINE: return "baseline";
    case WF_VM_ISA_AVX2: return "avx2";
    case WF_VM_ISA_AVX512: return "avx512";
    default: return "invalid";
    }
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

/* The variant in use; -1 until first asked for. */
static atomic_int active_isa = -1;

/* WEFT_ISA names a variant the CPU runs, or the best one is taken. */
static int isa_from_environment(void)
{
    const char *env = getenv("WEFT_ISA");
    for (int isa = 0; env != NULL && isa < WF_VM_ISA_COUNT; isa++)
        if (strcmp(env, wf__vm_isa_name(isa)) == 0 && isa_supported(isa))
            return isa;
    return wf__vm_isa_best();
}

int wf__vm_isa_active(void)
{
    int a = atomic_load_explicit(&active_isa, memory_order_relaxed);
    if (a < 0) {
        a = isa_from_environment();
        int expected = -1; /* a concurrent first call or force wins */
        if (!atomic_compare_exchange_strong(&active_isa, &expected, a))
            a = expected;
    }
    return a;
}

bool wf__vm_isa_force(int isa)
{
    if (wf__vm_table(isa) == NULL)
        return false;
    atomic_store_explicit(&active_isa, isa, memory_order_relaxed);
    return true;
}

static const wf_vm_table *best_table(void)
{
    return wf__vm_table(wf__vm_isa_active());
}

#define VM_DISPATCH(NAME)                                                                  \
    void wf__vm_##NAME##_f32(int64_t n, const float *restrict x, float *restrict y) { best_table()->NAME(n, x, y); }
VM_DISPATCH(exp)
VM_DISPATCH(expm1)
VM_DISPATCH(log)
VM_DISPATCH(log1p)
VM_DISPATCH(log2)
VM_DISPATCH(tanh)
VM_DISPATCH(sigmoid)
VM_DISPATCH(erf)
VM_DISPATCH(sin)
VM_DISPATCH(cos)
VM_DISPATCH(tan)

/* ---------------------------------------------------------------- erfinv */

/* Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011),
 * single-precision branch (relative error about 4e-7), then Newton steps
 * y -= (erf(y) - x) / (2/sqrt(pi) e^(-y^2)), each of which squares the
 * relative error. */
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
    double w = -log((1.0 - x) * (1.0 + x)), p;
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
    } else {
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
    }
    double y = p * x;
    for (int k = 0; k < newton_steps; k++) {
        const double d = 1.1283791670955126 * exp(-y * y); /* erf'(y) */
        if (!(d > 0.0))
            break;
        /* erf(y) - x; near |x| = 1 through erfc, which keeps the digits. */
        const double err = x > 0.5 ? (1.0 - x) - erfc(y)
                                   : x < -0.5 ? erfc(-y) - (1.0 + x) : erf(y) - x;
        y -= err / d;
    }
    return y;
}
