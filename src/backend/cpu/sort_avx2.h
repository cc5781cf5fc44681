/*
 * The sort family's AVX2 kernels over 32-bit keys (sort.c's unsigned keys:
 * their integer order is the order wanted). Internal; sort.c calls them
 * when wf__sort_avx2_usable() says the active instruction-set variant
 * (wf__vm_isa_active, WEFT_ISA) is AVX2 or above, and keeps its portable
 * radix sort and introselect otherwise. Where the variant is AVX-512 the
 * quicksort partitions with sort_avx512.c's 16-lane kernel and sorts its
 * leaves of up to 256 keys there: wf_sort of float32 rows of 4096 takes
 * 0.67-0.79x the AVX2 kernels' time, of one row of 16M 0.74-0.92x (Intel
 * Xeon with AVX-512, WEFT_ISA=avx2 against avx512 side by side, in two
 * harnesses). Each call works on its own array only: any number of threads may
 * call them at once on different arrays.
 */
#ifndef WEFT_BACKEND_CPU_SORT_AVX2_H
#define WEFT_BACKEND_CPU_SORT_AVX2_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the AVX2 kernels below may run now (built for x86-64, the CPU has
 * AVX2 and the active variant is AVX2 or above). */
bool wf__sort_avx2_usable(void);
/* Whether the AVX-512 kernels (sort_avx512.c) may run now: the active
 * variant is AVX-512 (which the CPU then has). The kernels below use them
 * where it is. */
bool wf__sort_avx512_usable(void);
/* The quicksort's partition over 16-lane vectors: rearranges keys[0 .. n)
 * (n >= 128) so that the keys below pivot come first; returns how many. */
int64_t wf__partition_u32_avx512(uint32_t *keys, int64_t n, uint32_t pivot);
/* Writes the keys of float32 bits[0 .. n) (n >= 16) to keys[0 .. n)
 * (another array), those below pivot from the front and the others from
 * the back; returns how many are below. */
int64_t wf__partition_f32_keys_avx512(const uint32_t *bits, uint32_t *keys, int64_t n,
                                      uint32_t pivot);
/* Sorts keys[0 .. n), n <= 256, in sixteen 16-lane registers. */
void wf__sort_small_u32_avx512(uint32_t *keys, int64_t n);
/* Sorts keys[0 .. n) in ascending unsigned order, in place. to_f32: the
 * keys are float32 keys (wf__keys_of_f32_avx2), and each stretch of them is
 * turned back into float32 bits as soon as it is sorted, while it is in
 * cache, instead of in a pass of its own over the sorted row (a pass over
 * memory for a long row). */
void wf__sort_u32_avx2(uint32_t *keys, int64_t n, bool to_f32);
/* Splits keys[0 .. n) by quicksort partitions into at most max_parts parts
 * [parts[i][0], parts[i][1]) (in no particular order), written to parts:
 * every key of a part is above every key of the parts before it in the
 * array and below those after it, and the keys outside every part are
 * already in their sorted place (to_f32: and turned into float32 bits, as
 * wf__sort_u32_avx2 does). So sorting each part (wf__sort_u32_avx2 with the
 * same to_f32, on any threads) sorts the whole. Returns the number of parts. */
int wf__split_u32_avx2(uint32_t *keys, int64_t n, int max_parts, int64_t (*parts)[2],
                       bool to_f32);
/* wf__split_u32_avx2 with to_f32 for the float32 bits[0 .. n): keys[0 .. n)
 * (another array) receives their keys, split. Where the variant is
 * AVX-512, the first partition reads bits and maps each key as it goes
 * (wf__partition_f32_keys_avx512), instead of a pass of its own. */
int wf__split_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n, int max_parts,
                       int64_t (*parts)[2]);
/* Sorts the float32 bits[0 .. n) into keys[0 .. n) (another array), which
 * ends holding float32 bits: wf__split_f32_avx2 into two parts, each
 * sorted by wf__sort_u32_avx2 with to_f32. */
void wf__sort_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n);
/* Rearranges keys[0 .. n) so that keys[kth] (0 <= kth < n) holds the key of
 * rank kth, the keys before it are <= it and the keys after it >= it. */
void wf__select_u32_avx2(uint32_t *keys, int64_t n, int64_t kth);
/* keys[i] = the key of float32 bits[i] and back (NaN keys give the
 * canonical NaN): sort.c's key mapping for contiguous rows, n elements;
 * keys and bits may be the same array. */
void wf__keys_of_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n);
void wf__f32_of_keys_avx2(const uint32_t *keys, uint32_t *bits, int64_t n);
/* topk's passes over a row's keys (sort.c, topk_by_threshold):
 * flip_keys: keys[i] = ~keys[i] and copy[i] = the same, n keys;
 * count_below: how many of keys[0 .. n) are below threshold;
 * collect_below: walks keys[0 .. n) in order and writes
 * (key << 32 | index) to packed for every key below threshold and for the
 * first `ties` keys equal to it, stopping after k; returns how many. */
void wf__flip_keys_u32_avx2(uint32_t *keys, uint32_t *copy, int64_t n);
int64_t wf__count_below_u32_avx2(const uint32_t *keys, int64_t n, uint32_t threshold);
int64_t wf__collect_below_u32_avx2(const uint32_t *keys, int64_t n, uint32_t threshold,
                                   int64_t ties, int64_t k, uint64_t *packed);

#endif
