/*
 * The sort family's AVX2 kernels over 32-bit keys (sort.c's unsigned keys:
 * their integer order is the order wanted). Internal; sort.c calls them
 * when wf__sort_avx2_usable() says the active instruction-set variant
 * (wf__vm_isa_active, WEFT_ISA) is AVX2 or above, and keeps its portable
 * radix sort and introselect otherwise. Each call works on its own array
 * only: any number of threads may call them at once on different arrays.
 */
#ifndef WEFT_BACKEND_CPU_SORT_AVX2_H
#define WEFT_BACKEND_CPU_SORT_AVX2_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the AVX2 kernels below may run now (built for x86-64, the CPU has
 * AVX2 and the active variant is AVX2 or above). */
bool wf__sort_avx2_usable(void);
/* Sorts keys[0 .. n) in ascending unsigned order, in place. */
void wf__sort_u32_avx2(uint32_t *keys, int64_t n);
/* Rearranges keys[0 .. n) so that keys[kth] (0 <= kth < n) holds the key of
 * rank kth, the keys before it are <= it and the keys after it >= it. */
void wf__select_u32_avx2(uint32_t *keys, int64_t n, int64_t kth);

#endif
