/*
 * AVX-512 kernels of the 32-bit key quicksort (see sort_avx2.h, whose
 * driver calls them where the active variant is AVX-512).
 *
 * partition: the AVX2 partition's scheme (sort_avx2.c) over 16-lane
 * vectors. A vector's lanes below the pivot are compressed (vpcompressd,
 * register form: the memory form is microcoded and slow on AMD's Zen 4)
 * and stored whole at the left write position; the others are compressed
 * and stored, masked, ending at the right one (one compress fewer than
 * building the whole permuted vector: 0.15 against 0.19 ns a key). The
 * last keys of the range go as one masked vector (one by one, their
 * unpredictable branches took a quarter of the time of ranges of 4096).
 *
 * partition_f32_keys: the same, out of place, over float32 bits mapped to
 * their keys as they are loaded (a long float32 row's first partition,
 * which so makes the keys without a pass of its own).
 *
 * sort_small: leaves of 129 to 256 keys (the driver keeps AVX2's networks
 * for up to 128), see "256 keys in registers" below.
 */
#include "backend/cpu/sort_avx2.h"

#include "backend/cpu/transpose_avx512.h"
#include "backend/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2")
#endif

/* ASIDE 4: 2 * ASIDE vectors are 128 keys, and the smallest range the
 * driver partitions is 129 (quickselect's; the sort's is 257). ASIDE 8
 * measured slower on one row of 16M (0.116 against 0.110 s). */
enum { LANES = 16, ASIDE = 4 };

/* Moves v's lanes below the pivot to the front, the others after them
 * (each group in lane order), stores the vector at left and ending at
 * right; returns how many lanes were below. */
static inline __attribute__((always_inline)) int partition_vector(__m512i v, __m512i pivot,
                                                                  uint32_t *left, uint32_t *right)
{
    const __mmask16 below = _mm512_cmplt_epu32_mask(v, pivot);
    const int count = __builtin_popcount((unsigned)below);
    _mm512_storeu_si512(left, _mm512_maskz_compress_epi32(below, v));
    _mm512_mask_storeu_epi32(right - (LANES - count), (__mmask16)(0xffffu >> count),
                             _mm512_maskz_compress_epi32((__mmask16)~below, v));
    return count;
}

int64_t wf__partition_u32_avx512(uint32_t *v, int64_t n, uint32_t pivot_key)
{
    const __m512i pivot = _mm512_set1_epi32((int)pivot_key);
    __m512i aside[2 * ASIDE];
    for (int i = 0; i < ASIDE; i++) {
        aside[i] = _mm512_loadu_si512(v + LANES * i);
        aside[ASIDE + i] = _mm512_loadu_si512(v + n - LANES * (i + 1));
    }
    int64_t read_left = ASIDE * LANES, read_right = n - ASIDE * LANES;
    int64_t write_left = 0, write_right = n;
    while (read_right - read_left >= ASIDE * LANES) {
        __m512i x[ASIDE];
        if (read_left - write_left <= write_right - read_right) {
#pragma GCC unroll 8
            for (int i = 0; i < ASIDE; i++)
                x[i] = _mm512_loadu_si512(v + read_left + LANES * i);
            read_left += ASIDE * LANES;
        } else {
            read_right -= ASIDE * LANES;
#pragma GCC unroll 8
            for (int i = 0; i < ASIDE; i++)
                x[i] = _mm512_loadu_si512(v + read_right + LANES * i);
        }
#pragma GCC unroll 8
        for (int i = 0; i < ASIDE; i++) {
            const int below = partition_vector(x[i], pivot, v + write_left, v + write_right);
            write_left += below;
            write_right -= LANES - below;
        }
    }
    while (read_right - read_left >= LANES) {
        __m512i x;
        if (read_left - write_left <= write_right - read_right) {
            x = _mm512_loadu_si512(v + read_left);
            read_left += LANES;
        } else {
            read_right -= LANES;
            x = _mm512_loadu_si512(v + read_right);
        }
        const int below = partition_vector(x, pivot, v + write_left, v + write_right);
        write_left += below;
        write_right -= LANES - below;
    }
    /* the last few keys as one masked vector; [write_left, write_right)
     * then holds exactly them and the set-aside vectors, room for a full
     * store at the left */
    const int nrest = (int)(read_right - read_left);
    const __mmask16 valid = (__mmask16)((1u << nrest) - 1);
    const __m512i x = _mm512_maskz_loadu_epi32(valid, v + read_left);
    const __mmask16 rest_below = _mm512_mask_cmplt_epu32_mask(valid, x, pivot);
    const int count = __builtin_popcount((unsigned)rest_below);
    _mm512_storeu_si512(v + write_left, _mm512_maskz_compress_epi32(rest_below, x));
    _mm512_mask_storeu_epi32(v + write_right - (nrest - count),
                             (__mmask16)((1u << (nrest - count)) - 1),
                             _mm512_maskz_compress_epi32((__mmask16)(valid & ~rest_below), x));
    write_left += count;
    write_right -= nrest - count;
    for (int i = 0; i < 2 * ASIDE; i++) {
        const int below = partition_vector(aside[i], pivot, v + write_left, v + write_right);
        write_left += below;
        write_right -= LANES - below;
    }
    return write_left;
}

/* The float32 key of each lane's bits (sort.c's key_of_f32). */
static inline __attribute__((always_inline)) __m512i keys_of_f32_lanes(__m512i b)
{
    const __m512i flip = _mm512_or_si512(_mm512_srai_epi32(b, 31), _mm512_set1_epi32(INT32_MIN));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(INT32_MAX)),
                                                  _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_mov_epi32(_mm512_xor_si512(b, flip), nan, _mm512_set1_epi32(-1));
}

/* Out of place, nothing is set aside: while a whole vector is left to
 * read, the unwritten gap holds at least its 16 lanes, so the left store
 * may be whole (its lanes past the keys below are overwritten later, or by
 * the right store that follows it). */
int64_t wf__partition_f32_keys_avx512(const uint32_t *bits, uint32_t *keys, int64_t n,
                                      uint32_t pivot_key)
{
    const __m512i pivot = _mm512_set1_epi32((int)pivot_key);
    int64_t write_left = 0, write_right = n, i = 0;
    for (; i + ASIDE * LANES <= n; i += ASIDE * LANES) {
        __m512i x[ASIDE];
#pragma GCC unroll 8
        for (int j = 0; j < ASIDE; j++)
            x[j] = keys_of_f32_lanes(_mm512_loadu_si512(bits + i + LANES * j));
#pragma GCC unroll 8
        for (int j = 0; j < ASIDE; j++) {
            const int below = partition_vector(x[j], pivot, keys + write_left, keys + write_right);
            write_left += below;
            write_right -= LANES - below;
        }
    }
    for (; i < n; i += LANES) { /* the last vectors, the very last masked */
        const int count = n - i < LANES ? (int)(n - i) : LANES;
        const __mmask16 valid = (__mmask16)(0xffffu >> (LANES - count));
        const __m512i x = keys_of_f32_lanes(_mm512_maskz_loadu_epi32(valid, bits + i));
        const __mmask16 below = _mm512_mask_cmplt_epu32_mask(valid, x, pivot);
        const int nb = __builtin_popcount((unsigned)below);
        _mm512_mask_storeu_epi32(keys + write_left, (__mmask16)((1u << nb) - 1),
                                 _mm512_maskz_compress_epi32(below, x));
        _mm512_mask_storeu_epi32(keys + write_right - (count - nb),
                                 (__mmask16)((1u << (count - nb)) - 1),
                                 _mm512_maskz_compress_epi32((__mmask16)(valid & ~below), x));
        write_left += nb;
        write_right -= count - nb;
    }
    return write_left;
}

/* ---------------------------------------------------------------- 256 keys in registers
 *
 * The column-major bitonic network of sort_avx2.c ("column-major
 * networks") over 16 registers of 16 lanes: rank l * 16 + i sits in lane l
 * of register i, so the stages at rank distances below 16 compare whole
 * registers, the others lanes within registers, and one 16 x 16 transpose
 * puts the keys in memory order. */

/* The compare-exchange of registers a (keeps the minima) and b. */
static inline __attribute__((always_inline)) void exchange(__m512i *a, __m512i *b)
{
    const __m512i lo = _mm512_min_epu32(*a, *b);
    *b = _mm512_max_epu32(*a, *b);
    *a = lo;
}

/* Lanes reversed within groups of `group` (2, 4, 8 or 16). */
static inline __attribute__((always_inline)) __m512i mirror_groups(__m512i v, int group)
{
    if (group == 2)
        return _mm512_shuffle_epi32(v, _MM_PERM_CDAB);
    if (group == 4)
        return _mm512_shuffle_epi32(v, _MM_PERM_ABCD);
    if (group == 8)
        return _mm512_permutexvar_epi32(
            _mm512_set_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7), v);
    return _mm512_permutexvar_epi32(
        _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), v);
}

/* Lane l against lane l ^ bit (1, 2, 4 or 8). */
static inline __attribute__((always_inline)) __m512i partner_lanes(__m512i v, int bit)
{
    if (bit == 1)
        return _mm512_shuffle_epi32(v, _MM_PERM_CDAB);
    if (bit == 2)
        return _mm512_shuffle_epi32(v, _MM_PERM_BADC);
    if (bit == 4)
        return _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1));
    return _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2));
}

/* The lanes whose index has bit `bit` set. */
static inline __attribute__((always_inline)) __mmask16 upper_lanes(int bit)
{
    return bit == 1 ? 0xAAAA : bit == 2 ? 0xCCCC : bit == 4 ? 0xF0F0 : 0xFF00;
}

/* One bitonic stage at rank distance d of a merge of blocks of k ranks
 * (see sort_avx2.c's column_stage), 16 registers. */
static inline __attribute__((always_inline)) void column_stage(__m512i *r, int k, int d)
{
    if (d < LANES) { /* ranks in other registers, the same lane */
        const int partner = d == k / 2 ? k - 1 : d;
#pragma GCC unroll 16
        for (int i = 0; i < LANES; i++)
            if ((i & d) == 0)
                exchange(&r[i], &r[i ^ partner]);
        return;
    }
    const int lane_bit = d / LANES;
    const __mmask16 upper = upper_lanes(lane_bit);
    if (d == k / 2) { /* flip: register i against 15 - i, lanes mirrored in groups */
        const int group = 2 * lane_bit;
#pragma GCC unroll 8
        for (int i = 0; i < LANES / 2; i++) {
            const __m512i a = r[i], b = mirror_groups(r[LANES - 1 - i], group);
            const __m512i lo = _mm512_min_epu32(a, b), hi = _mm512_max_epu32(a, b);
            r[i] = _mm512_mask_blend_epi32(upper, lo, hi);
            r[LANES - 1 - i] = mirror_groups(_mm512_mask_blend_epi32(upper, hi, lo), group);
        }
        return;
    }
#pragma GCC unroll 16
    for (int i = 0; i < LANES; i++) { /* half-cleaner within each register */
        const __m512i v = r[i], p = partner_lanes(v, lane_bit);
        r[i] = _mm512_mask_blend_epi32(upper, _mm512_min_epu32(v, p), _mm512_max_epu32(v, p));
    }
}

void wf__sort_small_u32_avx512(uint32_t *v, int64_t n)
{
    __m512i r[LANES];
    const __m512i pad = _mm512_set1_epi32(-1);
#pragma GCC unroll 16
    for (int i = 0; i < LANES; i++) {
        const int64_t left = n - LANES * i;
        const __mmask16 m = left >= LANES ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        r[i] = _mm512_mask_loadu_epi32(pad, m, v + LANES * i);
    }
#pragma GCC unroll 8
    for (int log_k = 1; log_k <= 8; log_k++)
#pragma GCC unroll 8
        for (int log_d = log_k - 1; log_d >= 0; log_d--)
            column_stage(r, 1 << log_k, 1 << log_d);
    wf__transpose16_epi32(r);
#pragma GCC unroll 16
    for (int i = 0; i < LANES; i++) {
        const int64_t left = n - LANES * i;
        const __mmask16 m = left >= LANES ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        _mm512_mask_storeu_epi32(v + LANES * i, m, r[i]);
    }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool wf__sort_avx512_usable(void) { return wf__vm_isa_active() >= WF_VM_ISA_AVX512; }

#else /* not x86-64 GCC: never usable, never called */

bool wf__sort_avx512_usable(void) { return false; }

int64_t wf__partition_u32_avx512(uint32_t *v, int64_t n, uint32_t pivot_key)
{
    (void)v;
    (void)n;
    (void)pivot_key;
    return 0;
}
int64_t wf__partition_f32_keys_avx512(const uint32_t *bits, uint32_t *keys, int64_t n,
                                      uint32_t pivot_key)
{
    (void)bits;
    (void)keys;
    (void)n;
    (void)pivot_key;
    return 0;
}
void wf__sort_small_u32_avx512(uint32_t *v, int64_t n)
{
    (void)v;
    (void)n;
}

#endif
