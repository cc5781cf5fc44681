/*
 * Random-number primitives: params, tables and the Threefry-2x32 block
 * function. Internal.
 *
 * Bits are a pure function of (key, counter) (Threefry-2x32, 20 rounds, the
 * Random123 constants), so kernels generate element i's bits from (key, i)
 * with no shared state and the same key gives the same array on any thread
 * and any pool size. The mapping from an element index to bits:
 *
 *  - 32-bit draws (f16, bf16, f32 outputs; bernoulli with p below f64;
 *    categorical on f32 logits): element i takes word (i & 1) of
 *    threefry2x32(key, counter = (hi32(i >> 1), lo32(i >> 1))).
 *  - 64-bit draws (f64 outputs, randint, bernoulli with f64 p, categorical
 *    on f64 logits): element i takes w0 << 32 | w1 of
 *    threefry2x32(key, counter = (hi32(i), lo32(i))).
 *
 * Child key i of wf_random_split(key) is threefry2x32(key, (hi32(i),
 * lo32(i))), as JAX's partitionable split. Params hold the key words, so
 * equal params mean equal results.
 */
#ifndef WEFT_PRIM_RANDOM_H
#define WEFT_PRIM_RANDOM_H

#include <stdint.h>

#include "core/array.h"
#include "weft.h"

enum wf_random_kind {
    WF_RANDOM_UNIFORM = 1,
    WF_RANDOM_NORMAL,
    WF_RANDOM_RANDINT,
    WF_RANDOM_BERNOULLI,
    WF_RANDOM_CATEGORICAL
};

/* One params struct for every random primitive (zeroed, then filled). */
typedef struct wf_random_params {
    uint32_t key[2];
    int kind;       /* enum wf_random_kind (checked by infer) */
    wf_dtype dtype; /* output dtype (uniform, normal, randint) */
    int ndim;       /* output shape (uniform, normal, randint) */
    int64_t shape[WF_MAX_NDIM];
    double a, b;         /* uniform: low, high; normal: loc, scale */
    double lo, hi;       /* uniform: clamp bounds, values of dtype in [low, high) */
    int64_t ilow, ihigh; /* randint: [ilow, ihigh) */
    int axis;            /* categorical: normalized axis of the logits */
} wf_random_params;

extern const wf_prim_def wf__prim_random_uniform;
extern const wf_prim_def wf__prim_random_normal;
extern const wf_prim_def wf__prim_random_randint;
extern const wf_prim_def wf__prim_random_bernoulli;
extern const wf_prim_def wf__prim_random_categorical;

/* A random primitive whose key is an input instead of a parameter: what a
 * draw from the thread's default key becomes inside a compiled function's
 * trace, so each call feeds it a fresh key (compile/compile.c). Inputs: the
 * key, an int64 scalar (wf__random_key_pack), then the inputs of the
 * primitive of params->kind; params->key is unused (zero). Same output and
 * bits as that primitive given the key. */
extern const wf_prim_def wf__prim_random_keyed;

/* The primitive that draws `kind` (enum wf_random_kind) with its key in the
 * params, or NULL for an unknown kind. */
const wf_prim_def *wf__random_prim_of_kind(int kind);

/* A key as the int64 scalar random_keyed takes, and back. */
static inline int64_t wf__random_key_pack(const uint32_t key[2])
{
    return (int64_t)(((uint64_t)key[0] << 32) | key[1]);
}

static inline void wf__random_key_unpack(int64_t packed, uint32_t key[2])
{
    key[0] = (uint32_t)((uint64_t)packed >> 32);
    key[1] = (uint32_t)packed;
}

/* Threefry-2x32 with 20 rounds (Random123): encrypts counter (c0, c1) with
 * key (k0, k1) into (*o0, *o1). */
static inline uint32_t wf__rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32u - r));
}

#define WF__TF_ROUND(R) \
    do {                 \
        x0 += x1;        \
        x1 = wf__rotl32(x1, R) ^ x0; \
    } while (0)

static inline void wf__threefry2x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1,
                                    uint32_t *o0, uint32_t *o1)
{
    const uint32_t k2 = 0x1BD11BDAu ^ k0 ^ k1;
    uint32_t x0 = c0 + k0, x1 = c1 + k1;
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
    *o0 = x0;
    *o1 = x1;
}

#endif
