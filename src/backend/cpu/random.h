/* CPU kernels of the random primitives (see prim/random.h for the bit
 * layout). Internal. */
#ifndef WEFT_BACKEND_CPU_RANDOM_H
#define WEFT_BACKEND_CPU_RANDOM_H

#include <stdint.h>

#include "core/array.h"
#include "weft.h"

wf_status wf__cpu_random_uniform(wf_array *out, wf_array *const *inputs, int ninputs,
                                 const void *params);
wf_status wf__cpu_random_normal(wf_array *out, wf_array *const *inputs, int ninputs,
                                const void *params);
wf_status wf__cpu_random_randint(wf_array *out, wf_array *const *inputs, int ninputs,
                                 const void *params);
/* inputs[0]: p of the output's shape (any strides), float32 or float64. */
wf_status wf__cpu_random_bernoulli(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params);
/* inputs[0]: logits (any strides), float32 or float64. */
wf_status wf__cpu_random_categorical(wf_array *out, wf_array *const *inputs, int ninputs,
                                     const void *params);
/* inputs[0]: the key (int64 scalar), then the inputs of params->kind's
 * primitive, whose kernel it runs with that key. */
wf_status wf__cpu_random_keyed(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params);

/* 32-bit draws of elements [first, first + n) into out (any first). */
void wf__cpu_random_bits32(const uint32_t key[2], int64_t first, int64_t n, uint32_t *out);
/* 64-bit draws of elements [first, first + n) into out. */
void wf__cpu_random_bits64(const uint32_t key[2], int64_t first, int64_t n, uint64_t *out);

#endif
