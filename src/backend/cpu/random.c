/*
 * Random kernels: Threefry-2x32 bits (prim/random.h gives the layout) mapped
 * to uniform, normal (Box-Muller), integer, Bernoulli and Gumbel-max
 * categorical samples. Every element's bits depend on (key, its index) only,
 * so the work splits over the intra-op pool with no shared state and the
 * result does not depend on the number of threads.
 *
 * Threefry runs on blocks of 8 counters with a fixed-count lane loop, which
 * GCC vectorizes at -O2 (SSE2 baseline; an AVX2 clone where the CPU has it).
 */
#include "backend/cpu/random.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/random.h"
#include "runtime/pool.h"

enum { BLOCK = 256 };

__extension__ typedef unsigned __int128 wf_u128;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define TF_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TF_CLONES
#endif

/* o0[i], o1[i] = threefry2x32(key, counter j0 + i) for i < m (64-bit
 * counter j as (hi32(j), lo32(j))). */
TF_CLONES
static void tf_blocks(uint32_t k0, uint32_t k1, uint64_t j0, int64_t m, uint32_t *restrict o0,
                      uint32_t *restrict o1)
{
    const uint32_t k2 = 0x1BD11BDAu ^ k0 ^ k1;
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) {
        const uint64_t j = j0 + (uint64_t)i;
        if ((j >> 32) != ((j + 7) >> 32))
            break; /* the high word changes inside the block: scalar tail */
        const uint32_t hi = (uint32_t)(j >> 32), lo = (uint32_t)j;
        /* wf__threefry2x32 written out again: called here (results through
         * pointers) GCC does not vectorize the 8 lanes, 3x slower. */
        for (uint32_t l = 0; l < 8; l++) {
            uint32_t x0 = hi + k0, x1 = lo + l + k1;
            WF__TF_ROUND(13); WF__TF_ROUND(15); WF__TF_ROUND(26); WF__TF_ROUND(6);
            x0 += k1; x1 += k2 + 1u;
            WF__TF_ROUND(17); WF__TF_ROUND(29); WF__TF_ROUND(16); WF__TF_ROUND(24);
            x0 += k2; x1 += k0 + 2u;
            WF__TF_ROUND(13); WF__TF_ROUND(15); WF__TF_ROUND(26); WF__TF_ROUND(6);
            x0 += k0; x1 += k1 + 3u;
            WF__TF_ROUND(17); WF__TF_ROUND(29); WF__TF_ROUND(16); WF__TF_ROUND(24);
            x0 += k1; x1 += k2 + 4u;
            WF__TF_ROUND(13); WF__TF_ROUND(15); WF__TF_ROUND(26); WF__TF_ROUND(6);
            x0 += k2; x1 += k0 + 5u;
            o0[i + l] = x0;
            o1[i + l] = x1;
        }
    }
    for (; i < m; i++) {
        const uint64_t j = j0 + (uint64_t)i;
        wf__threefry2x32(k0, k1, (uint32_t)(j >> 32), (uint32_t)j, &o0[i], &o1[i]);
    }
}

void wf__cpu_random_bits32(const uint32_t key[2], int64_t first, int64_t n, uint32_t *out)
{
    uint32_t o0[BLOCK], o1[BLOCK], tmp[2 * BLOCK];
    while (n > 0) {
        const int64_t off = first & 1;
        const int64_t m = n < 2 * BLOCK - off ? n : 2 * BLOCK - off;
        const int64_t pairs = (off + m + 1) >> 1;
        tf_blocks(key[0], key[1], (uint64_t)first >> 1, pairs, o0, o1);
        for (int64_t p = 0; p < pairs; p++) {
            tmp[2 * p] = o0[p];
            tmp[2 * p + 1] = o1[p];
        }
        memcpy(out, tmp + off, (size_t)m * sizeof *out);
        out += m;
        first += m;
        n -= m;
    }
}

void wf__cpu_random_bits64(const uint32_t key[2], int64_t first, int64_t n, uint64_t *out)
{
    uint32_t o0[BLOCK], o1[BLOCK];
    while (n > 0) {
        const int64_t m = n < BLOCK ? n : BLOCK;
        tf_blocks(key[0], key[1], (uint64_t)first, m, o0, o1);
        for (int64_t i = 0; i < m; i++)
            out[i] = (uint64_t)o0[i] << 32 | o1[i];
        out += m;
        first += m;
        n -= m;
    }
}

/* ---------------------------------------------------------------- uniform and normal */

/* Shared context of the no-input generators. `units` are pairs of elements
 * for 32-bit draws and for f64 normals, else elements. */
struct gen_ctx {
    const wf_random_params *p;
    void *out;
    int64_t n;
    /* uniform: v = (base + span * u) * mult, clamped to [lo, hi] */
    double base, span, mult;
};

static inline uint16_t to_half(float v, wf_dtype dtype)
{
    return dtype == WF_DTYPE_F16 ? wf__f32_to_f16(v) : wf__f32_to_bf16(v);
}

static inline double clamp_d(double v, double lo, double hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

static inline __attribute__((always_inline)) void uniform_pair(uint32_t w0, uint32_t w1,
                                                               double base, double span,
                                                               double mult, double lo,
                                                               double hi, float *v)
{
    const double u0 = (double)(w0 >> 8) * 0x1p-24, u1 = (double)(w1 >> 8) * 0x1p-24;
    v[0] = (float)clamp_d((base + span * u0) * mult, lo, hi);
    v[1] = (float)clamp_d((base + span * u1) * mult, lo, hi);
}

/* Uniform of f32 / f16 / bf16: pairs [pb, pe), element 2p from word 0 and
 * 2p + 1 from word 1 of counter p; 24 random bits each. */
TF_CLONES
static void uniform32_chunk(void *arg, int64_t pb, int64_t pe)
{
    const struct gen_ctx *c = arg;
    const wf_random_params *p = c->p;
    uint32_t o0[BLOCK], o1[BLOCK];
    float vals[2 * BLOCK];
    const double base = c->base, span = c->span, mult = c->mult, lo = p->lo, hi = p->hi;
    for (int64_t q = pb; q < pe; q += BLOCK) {
        const int64_t m = pe - q < BLOCK ? pe - q : BLOCK;
        tf_blocks(p->key[0], p->key[1], (uint64_t)q, m, o0, o1);
        int64_t i = 0;
        for (; i + 8 <= m; i += 8)
            for (int l = 0; l < 8; l++)
                uniform_pair(o0[i + l], o1[i + l], base, span, mult, lo, hi, &vals[2 * (i + l)]);
        for (; i < m; i++)
            uniform_pair(o0[i], o1[i], base, span, mult, lo, hi, &vals[2 * i]);
        const int64_t e0 = 2 * q;
        const int64_t cnt = c->n - e0 < 2 * m ? c->n - e0 : 2 * m;
        if (p->dtype == WF_DTYPE_F32) {
            memcpy((float *)c->out + e0, vals, (size_t)cnt * sizeof(float));
        } else {
            uint16_t *o = (uint16_t *)c->out + e0;
            for (int64_t k = 0; k < cnt; k++)
                o[k] = to_half(vals[k], p->dtype);
        }
    }
}

/* Uniform of f64: elements [eb, ee), 53 random bits each. */
static void uniform64_chunk(void *arg, int64_t eb, int64_t ee)
{
    const struct gen_ctx *c = arg;
    const wf_random_params *p = c->p;
    uint32_t o0[BLOCK], o1[BLOCK];
    const double base = c->base, span = c->span, mult = c->mult, lo = p->lo, hi = p->hi;
    double *out = c->out;
    for (int64_t q = eb; q < ee; q += BLOCK) {
        const int64_t m = ee - q < BLOCK ? ee - q : BLOCK;
        tf_blocks(p->key[0], p->key[1], (uint64_t)q, m, o0, o1);
        for (int64_t i = 0; i < m; i++) {
            const uint64_t w = (uint64_t)o0[i] << 32 | o1[i];
            const double u = (double)(w >> 11) * 0x1p-53;
            out[q + i] = clamp_d((base + span * u) * mult, lo, hi);
        }
    }
}

/* log(x) for a positive normal float, vectorizable (no table, no branch):
 * x = 2^k m with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s), s =
 * (m - 1) / (m + 1), by its series to s^9 (|s| < 0.172: error below 1e-8
 * relative to the result). */
static inline __attribute__((always_inline)) float log_pos_f32(float x)
{
    uint32_t i;
    memcpy(&i, &x, sizeof i);
    int32_t k = (int32_t)(i >> 23) - 127;
    const uint32_t mi = (i & 0x7fffffu) | 0x3f800000u;
    float m;
    memcpy(&m, &mi, sizeof m);
    const bool big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    k = big ? k + 1 : k;
    const float f = m - 1.0f;
    const float s = f / (2.0f + f), z = s * s;
    const float tail = z * (1.0f / 3 + z * (1.0f / 5 + z * (1.0f / 7 + z * (1.0f / 9))));
    return (float)k * 0.693147180559945f + (2.0f * s + 2.0f * s * tail);
}

/* One Box-Muller pair from two 32-bit words: u1 = 1 - (w0 >> 8) 2^-24 in
 * [2^-24, 1] (so the log is finite), theta = 2 pi (w1 >> 8) 2^-24.
 * z0 = r cos(theta), z1 = r sin(theta), r = sqrt(-2 log u1). The angle is
 * reduced exactly in integers: n = round(4 u2), a = (4 u2 - n) pi / 2 in
 * [-pi/4, pi/4], then Taylor polynomials (error below 3e-9). */
static inline __attribute__((always_inline)) void box_muller_f32(uint32_t w0, uint32_t w1,
                                                                 float *z0, float *z1)
{
    const float u1 = 1.0f - (float)(w0 >> 8) * 0x1p-24f;
    const float r = sqrtf(-2.0f * log_pos_f32(u1));
    const uint32_t t = w1 >> 8;
    const uint32_t n = (t + (1u << 21)) >> 22; /* 0..4 */
    const int32_t fr = (int32_t)t - (int32_t)(n << 22);
    const float a = (float)fr * (float)(1.5707963267948966 * 0x1p-22), a2 = a * a;
    const float sn_a =
        a + a * a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 + a2 * (1.0f / 362880))));
    const float cs_a =
        1.0f + a2 * (-0.5f + a2 * (1.0f / 24 + a2 * (-1.0f / 720 + a2 * (1.0f / 40320))));
    float sn = (n & 1u) ? cs_a : sn_a, cs = (n & 1u) ? sn_a : cs_a;
    sn = (n & 2u) ? -sn : sn;
    cs = ((n + 1u) & 2u) ? -cs : cs;
    *z0 = r * cs;
    *z1 = r * sn;
}

/* Normal of f32 / f16 / bf16: pair p's two words give elements 2p and
 * 2p + 1 (Box-Muller in float32). */
TF_CLONES
static void normal32_chunk(void *arg, int64_t pb, int64_t pe)
{
    const struct gen_ctx *c = arg;
    const wf_random_params *p = c->p;
    uint32_t o0[BLOCK], o1[BLOCK];
    float z0[BLOCK], z1[BLOCK], vals[2 * BLOCK];
    const float loc = (float)p->a, scale = (float)p->b;
    for (int64_t q = pb; q < pe; q += BLOCK) {
        const int64_t m = pe - q < BLOCK ? pe - q : BLOCK;
        tf_blocks(p->key[0], p->key[1], (uint64_t)q, m, o0, o1);
        int64_t i = 0;
        for (; i + 8 <= m; i += 8)
            for (int l = 0; l < 8; l++)
                box_muller_f32(o0[i + l], o1[i + l], &z0[i + l], &z1[i + l]);
        for (; i < m; i++)
            box_muller_f32(o0[i], o1[i], &z0[i], &z1[i]);
        for (i = 0; i < m; i++) {
            vals[2 * i] = loc + scale * z0[i];
            vals[2 * i + 1] = loc + scale * z1[i];
        }
        const int64_t e0 = 2 * q;
        const int64_t cnt = c->n - e0 < 2 * m ? c->n - e0 : 2 * m;
        if (p->dtype == WF_DTYPE_F32) {
            memcpy((float *)c->out + e0, vals, (size_t)cnt * sizeof(float));
        } else {
            uint16_t *o = (uint16_t *)c->out + e0;
            for (int64_t k = 0; k < cnt; k++)
                o[k] = to_half(vals[k], p->dtype);
        }
    }
}

/* Normal of f64: pair p takes the 64-bit draws of elements 2p and 2p + 1. */
static void normal64_chunk(void *arg, int64_t pb, int64_t pe)
{
    const struct gen_ctx *c = arg;
    const wf_random_params *p = c->p;
    uint32_t o0[BLOCK], o1[BLOCK];
    const double loc = p->a, scale = p->b;
    double *out = c->out;
    for (int64_t q = pb; q < pe; q += BLOCK / 2) {
        const int64_t m = pe - q < BLOCK / 2 ? pe - q : BLOCK / 2;
        tf_blocks(p->key[0], p->key[1], 2 * (uint64_t)q, 2 * m, o0, o1);
        for (int64_t i = 0; i < m; i++) {
            const uint64_t w1 = (uint64_t)o0[2 * i] << 32 | o1[2 * i];
            const uint64_t w2 = (uint64_t)o0[2 * i + 1] << 32 | o1[2 * i + 1];
            const double u1 = 1.0 - (double)(w1 >> 11) * 0x1p-53;
            const double u2 = (double)(w2 >> 11) * 0x1p-53;
            const double r = sqrt(-2.0 * log(u1));
            const double t = 6.28318530717958647692 * u2;
            const int64_t e = 2 * (q + i);
            out[e] = loc + scale * (r * cos(t));
            if (e + 1 < c->n)
                out[e + 1] = loc + scale * (r * sin(t));
        }
    }
}

enum { GEN_MIN_UNITS = 1 << 13 };

wf_status wf__cpu_random_uniform(wf_array *out, wf_array *const *inputs, int ninputs,
                                 const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_random_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct gen_ctx c = {.p = p, .out = wf__array_data_ptr(out), .n = out->size};
    /* Scale by 1/2 when high - low overflows, so that the span is finite. */
    c.mult = isfinite(p->b - p->a) ? 1.0 : 2.0;
    c.base = p->a / c.mult;
    c.span = p->b / c.mult - p->a / c.mult;
    if (p->dtype == WF_DTYPE_F64)
        wf__parallel_for(out->size, GEN_MIN_UNITS, uniform64_chunk, &c);
    else
        wf__parallel_for((out->size + 1) / 2, GEN_MIN_UNITS, uniform32_chunk, &c);
    return WF_OK;
}

wf_status wf__cpu_random_normal(wf_array *out, wf_array *const *inputs, int ninputs,
                                const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_random_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct gen_ctx c = {.p = p, .out = wf__array_data_ptr(out), .n = out->size};
    wf__parallel_for((out->size + 1) / 2, GEN_MIN_UNITS / 2,
                     p->dtype == WF_DTYPE_F64 ? normal64_chunk : normal32_chunk, &c);
    return WF_OK;
}

/* ---------------------------------------------------------------- randint */

/* low + floor(w * range / 2^64): the bias is below range / 2^64. */
static void randint_chunk(void *arg, int64_t eb, int64_t ee)
{
    const struct gen_ctx *c = arg;
    const wf_random_params *p = c->p;
    uint64_t w[BLOCK];
    const uint64_t low = (uint64_t)p->ilow, range = (uint64_t)p->ihigh - (uint64_t)p->ilow;
    for (int64_t q = eb; q < ee; q += BLOCK) {
        const int64_t m = ee - q < BLOCK ? ee - q : BLOCK;
        wf__cpu_random_bits64(p->key, q, m, w);
        for (int64_t i = 0; i < m; i++)
            w[i] = low + (uint64_t)(((wf_u128)w[i] * range) >> 64);
        switch (p->dtype) {
        case WF_DTYPE_U8:
            for (int64_t i = 0; i < m; i++)
                ((uint8_t *)c->out)[q + i] = (uint8_t)w[i];
            break;
        case WF_DTYPE_I32:
            for (int64_t i = 0; i < m; i++)
                ((int32_t *)c->out)[q + i] = wf__cpu_wrap_i32((uint32_t)w[i]);
            break;
        case WF_DTYPE_I64:
            for (int64_t i = 0; i < m; i++)
                ((int64_t *)c->out)[q + i] = wf__cpu_wrap_i64(w[i]);
            break;
        default: /* the other integer types: the low bits, as the loops above */
            wf__cpu_convert_1d(m, w, WF_DTYPE_U64, 1,
                               (char *)c->out + q * (int64_t)wf_dtype_size(p->dtype), p->dtype,
                               1);
            break;
        }
    }
}

wf_status wf__cpu_random_randint(wf_array *out, wf_array *const *inputs, int ninputs,
                                 const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_random_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct gen_ctx c = {.p = p, .out = wf__array_data_ptr(out), .n = out->size};
    wf__parallel_for(out->size, GEN_MIN_UNITS, randint_chunk, &c);
    return WF_OK;
}

/* ---------------------------------------------------------------- bernoulli */

struct walk_ctx {
    const wf_random_params *p;
    const char *out_base; /* element 0 of the contiguous output */
    size_t out_item;
    wf_dtype in_dtype; /* f32 or f64 */
    int64_t axis_len, axis_stride; /* categorical */
};

/* Operand 0: the bool output (contiguous), 1: p. u < p with u in [0, 1):
 * p <= 0 (or NaN) never, p >= 1 always. */
static void bernoulli_inner(int64_t n, char *const *ptrs, const int64_t *strides,
                            const void *arg)
{
    const struct walk_ctx *c = arg;
    uint8_t *o = (uint8_t *)ptrs[0];
    const int64_t first = (int64_t)(ptrs[0] - c->out_base);
    const int64_t sp = strides[1];
    if (n > 1 && strides[0] != 1) { /* not reached: the output is contiguous */
        for (int64_t i = 0; i < n; i++) {
            uint32_t w;
            wf__cpu_random_bits32(c->p->key, first + i * strides[0], 1, &w);
            const float pv = c->in_dtype == WF_DTYPE_F64
                                 ? (float)((const double *)ptrs[1])[i * sp]
                                 : ((const float *)ptrs[1])[i * sp];
            o[i * strides[0]] = (float)(w >> 8) * 0x1p-24f < pv;
        }
        return;
    }
    if (c->in_dtype == WF_DTYPE_F64) {
        const double *pv = (const double *)ptrs[1];
        uint64_t w[BLOCK];
        for (int64_t q = 0; q < n; q += BLOCK) {
            const int64_t m = n - q < BLOCK ? n - q : BLOCK;
            wf__cpu_random_bits64(c->p->key, first + q, m, w);
            for (int64_t i = 0; i < m; i++)
                o[q + i] = (double)(w[i] >> 11) * 0x1p-53 < pv[(q + i) * sp];
        }
    } else {
        const float *pv = (const float *)ptrs[1];
        uint32_t w[BLOCK];
        for (int64_t q = 0; q < n; q += BLOCK) {
            const int64_t m = n - q < BLOCK ? n - q : BLOCK;
            wf__cpu_random_bits32(c->p->key, first + q, m, w);
            for (int64_t i = 0; i < m; i++)
                o[q + i] = (float)(w[i] >> 8) * 0x1p-24f < pv[(q + i) * sp];
        }
    }
}

wf_status wf__cpu_random_bernoulli(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params)
{
    (void)ninputs;
    const wf_random_params *p = params;
    const wf_array *prob = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    int64_t out_strides[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, out_strides);
    char *data[2] = {wf__array_data_ptr(out), wf__array_data_ptr(prob)};
    const size_t sizes[2] = {1, wf_dtype_size(prob->dtype)};
    const int64_t *strides[2] = {out_strides, prob->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, out->ndim, out->shape, 2, data, sizes, strides);
    struct walk_ctx c = {.p = p, .out_base = data[0], .out_item = 1, .in_dtype = prob->dtype};
    wf__cpu_iter_run_parallel(&it, bernoulli_inner, &c, WF_CPU_CHUNK_COSTLY);
    return WF_OK;
}

/* ---------------------------------------------------------------- categorical */

/* Gumbel-max along the axis: argmax_k(logit[k] - log(-log(u_k))), u_k in
 * (0, 1) from the bits of logits element (row * K + k) in the order with
 * the axis moved last. The first NaN wins (as argmax); all -inf gives 0. */
static void categorical_inner(int64_t n, char *const *ptrs, const int64_t *strides,
                              const void *arg)
{
    const struct walk_ctx *c = arg;
    const int64_t K = c->axis_len, sk = c->axis_stride;
    const int64_t so = n > 1 ? strides[0] : 1;
    const int64_t first = (int64_t)(ptrs[0] - c->out_base) / (int64_t)sizeof(int32_t);
    for (int64_t r = 0; r < n; r++) {
        const int64_t row = first + r * so;
        int32_t best_k = 0;
        if (c->in_dtype == WF_DTYPE_F64) {
            const double *x = (const double *)ptrs[1] + r * strides[1];
            double best = -INFINITY;
            uint64_t w[BLOCK];
            for (int64_t q = 0; q < K; q += BLOCK) {
                const int64_t m = K - q < BLOCK ? K - q : BLOCK;
                wf__cpu_random_bits64(c->p->key, row * K + q, m, w);
                for (int64_t i = 0; i < m; i++) {
                    const double u = ((double)(w[i] >> 11) + 0.5) * 0x1p-53;
                    const double v = x[(q + i) * sk] - log(-log(u));
                    if (v > best || isnan(v)) {
                        best = v;
                        best_k = (int32_t)(q + i);
                        if (isnan(v))
                            goto done;
                    }
                }
            }
        } else {
            const float *x = (const float *)ptrs[1] + r * strides[1];
            float best = -INFINITY;
            uint32_t w[BLOCK];
            for (int64_t q = 0; q < K; q += BLOCK) {
                const int64_t m = K - q < BLOCK ? K - q : BLOCK;
                wf__cpu_random_bits32(c->p->key, row * K + q, m, w);
                for (int64_t i = 0; i < m; i++) {
                    const float u = ((float)(w[i] >> 8) + 0.5f) * 0x1p-24f;
                    const float v = x[(q + i) * sk] - logf(-logf(u));
                    if (v > best || isnan(v)) {
                        best = v;
                        best_k = (int32_t)(q + i);
                        if (isnan(v))
                            goto done;
                    }
                }
            }
        }
    done:
        ((int32_t *)ptrs[0])[r * so] = best_k;
    }
}

wf_status wf__cpu_random_categorical(wf_array *out, wf_array *const *inputs, int ninputs,
                                     const void *params)
{
    (void)ninputs;
    const wf_random_params *p = params;
    const wf_array *logits = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    const int axis = p->axis;
    int64_t in_strides[WF_MAX_NDIM], out_strides[WF_MAX_NDIM];
    for (int d = 0, e = 0; d < logits->ndim; d++)
        if (d != axis)
            in_strides[e++] = logits->strides[d];
    wf__contiguous_strides(out->shape, out->ndim, out_strides);
    char *data[2] = {wf__array_data_ptr(out), wf__array_data_ptr(logits)};
    const size_t sizes[2] = {sizeof(int32_t), wf_dtype_size(logits->dtype)};
    const int64_t *strides[2] = {out_strides, in_strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, out->ndim, out->shape, 2, data, sizes, strides);
    struct walk_ctx c = {.p = p,
                         .out_base = data[0],
                         .out_item = sizeof(int32_t),
                         .in_dtype = logits->dtype,
                         .axis_len = logits->shape[axis],
                         .axis_stride = logits->strides[axis]};
    int64_t min_rows = (1 << 13) / (c.axis_len > 0 ? c.axis_len : 1);
    wf__cpu_iter_run_parallel(&it, categorical_inner, &c, min_rows > 0 ? min_rows : 1);
    return WF_OK;
}

/* ---------------------------------------------------------------- keyed */

wf_status wf__cpu_random_keyed(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params)
{
    wf_random_params p = *(const wf_random_params *)params;
    wf__random_key_unpack(*(const int64_t *)wf__array_data_ptr(inputs[0]), p.key);
    inputs++;
    ninputs--;
    switch (p.kind) {
    case WF_RANDOM_UNIFORM: return wf__cpu_random_uniform(out, inputs, ninputs, &p);
    case WF_RANDOM_NORMAL: return wf__cpu_random_normal(out, inputs, ninputs, &p);
    case WF_RANDOM_RANDINT: return wf__cpu_random_randint(out, inputs, ninputs, &p);
    case WF_RANDOM_BERNOULLI: return wf__cpu_random_bernoulli(out, inputs, ninputs, &p);
    case WF_RANDOM_CATEGORICAL: return wf__cpu_random_categorical(out, inputs, ninputs, &p);
    default: return wf__error(WF_ERR_INTERNAL, "random_keyed: params of kind %d", p.kind);
    }
}
