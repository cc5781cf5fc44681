/*
 * quant_ref.h - helpers of the quantization tests (test_quantized.c,
 * test_quantized_fp.c), written independently of weft's kernels: a
 * reproducible uniform generator, a host copy of an array, code j of a row
 * of little-endian packed codes, and a bitwise comparison of two float32
 * arrays. Include after harness.h.
 */
#ifndef WEFT_TESTS_QUANT_REF_H
#define WEFT_TESTS_QUANT_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

/* Uniform in [-1, 1) from a 64-bit LCG with state *state. */
static inline float quant_rnd(uint64_t *state)
{
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A copy of a's elements (row-major, `item` bytes each); caller frees.
 * NULL (and a test failure) when the copy fails. */
static inline void *quant_host_copy(wf_array *a, size_t item)
{
    const size_t bytes = (size_t)wf_array_size(a) * item;
    void *p = malloc(bytes ? bytes : 1);
    if (!CHECK_OK(wf_array_copy_to(a, p, bytes))) {
        free(p);
        return NULL;
    }
    return p;
}

/* Code j of a row of little-endian packed `bits`-bit codes (any width, a
 * code may straddle two words). */
static inline uint32_t quant_code_at(const uint32_t *row_words, int64_t j, int bits)
{
    uint32_t v = 0;
    for (int b = 0; b < bits; b++) {
        const int64_t bit = j * bits + b;
        v |= ((row_words[bit / 32] >> (bit % 32)) & 1u) << b;
    }
    return v;
}

/* Whether two float32 arrays have the same size and bits. */
static inline bool quant_same_bits(wf_array *a, wf_array *b)
{
    if (!CHECK_NOT_NULL(a) || !CHECK_NOT_NULL(b) || !CHECK_EQ_INT(wf_array_size(a), wf_array_size(b)))
        return false;
    float *x = quant_host_copy(a, 4), *y = quant_host_copy(b, 4);
    const bool same = x && y && memcmp(x, y, (size_t)wf_array_size(a) * 4) == 0;
    free(x);
    free(y);
    return same;
}

#endif
