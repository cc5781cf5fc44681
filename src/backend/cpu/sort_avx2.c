/*
 * AVX2 quicksort and quickselect of 32-bit keys (see sort_avx2.h).
 *
 * Compares are unsigned throughout: minima and maxima by AVX2's unsigned
 * min/max, "x below the pivot" as max(x, pivot) != x. The design follows
 * the published vectorized quicksorts (e.g. x86-simd-sort), written here
 * from their description:
 *  - partition: in place, eight keys a vector. ASIDE vectors at each end
 *    are set aside, so each side always has room for a block of stores;
 *    the next block of ASIDE vectors is read from the side with fewer free
 *    slots. A vector's lanes below the pivot are moved to its front (the
 *    others to its back) by one permutation looked up from the compare
 *    mask, and the vector is stored twice: at the left write position (its
 *    front is kept) and ending at the right write position (its back is
 *    kept). The set-aside vectors go last, into the room left between.
 *  - pivot: the median of 8 keys spread over the range (64 for ranges of
 *    at least SAMPLE_WIDE_MIN keys), sorted by the network below. When no
 *    key is below the pivot (the pivot is the minimum) the range is split
 *    again at pivot + 1: the keys equal to the pivot are then in place, so
 *    every step makes progress, and all-equal ranges take one pass.
 *  - ranges of at most SMALL_MAX keys: a bitonic sorting network in up to
 *    16 registers, the range padded with the largest key. Up to 4
 *    registers: each register sorted by in-register compare-exchange
 *    stages, then merged pairwise (compare with the reversed partner, then
 *    half-cleaners). 8 or 16: the network runs in column-major rank order
 *    (see "column-major networks"), where most stages compare whole
 *    registers, and a transpose puts the keys in memory order: 64 to 128
 *    keys in about half the time of the first form (measured on Zen 3).
 *    Not 32 registers (256 keys): twice the 16 ymm registers, the network
 *    spills; with 128-key leaves sorting float32 rows of 4096 takes a
 *    tenth less time, one row of 16M a twentieth (Zen 3).
 *  - recursion deeper than 2 log2(n) + 8 falls back to a heap sort of the
 *    range (n log n in the worst case; never seen on real data).
 * Quickselect uses the same partition and small sort, following only the
 * side holding the wanted rank (linear time on average).
 */
#include "backend/cpu/sort_avx2.h"

#include "backend/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <string.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif

/* ASIDE 8, not 4: half the side choices (an unpredictable branch each)
 * per key; 9% less time on float32 rows of 4096, 13% on one row of 16M
 * (Zen 3), though the set-aside vectors no longer stay in registers. */
enum { LANES = 8, ASIDE = 8, SMALL_REGS = 16, SMALL_MAX = LANES * SMALL_REGS };
_Static_assert(SMALL_MAX + 1 >= 2 * ASIDE * LANES, "partition() needs 2 * ASIDE vectors");
enum { SAMPLE_WIDE_MIN = 8192 };

/* For each mask of lanes (bit i: lane i is below the pivot), the lane order
 * that puts the masked lanes first and the others after, both in lane
 * order: lane index j of the result in byte j (widened to a permutation
 * by one vpmovzxbd; 4-bit fields took a shift and a mask more). */
static const uint64_t compress_order[256] = {
    0x0706050403020100u, 0x0706050403020100u, 0x0706050403020001u, 0x0706050403020100u,
    0x0706050403010002u, 0x0706050403010200u, 0x0706050403000201u, 0x0706050403020100u,
    0x0706050402010003u, 0x0706050402010300u, 0x0706050402000301u, 0x0706050402030100u,
    0x0706050401000302u, 0x0706050401030200u, 0x0706050400030201u, 0x0706050403020100u,
    0x0706050302010004u, 0x0706050302010400u, 0x0706050302000401u, 0x0706050302040100u,
    0x0706050301000402u, 0x0706050301040200u, 0x0706050300040201u, 0x0706050304020100u,
    0x0706050201000403u, 0x0706050201040300u, 0x0706050200040301u, 0x0706050204030100u,
    0x0706050100040302u, 0x0706050104030200u, 0x0706050004030201u, 0x0706050403020100u,
    0x0706040302010005u, 0x0706040302010500u, 0x0706040302000501u, 0x0706040302050100u,
    0x0706040301000502u, 0x0706040301050200u, 0x0706040300050201u, 0x0706040305020100u,
    0x0706040201000503u, 0x0706040201050300u, 0x0706040200050301u, 0x0706040205030100u,
    0x0706040100050302u, 0x0706040105030200u, 0x0706040005030201u, 0x0706040503020100u,
    0x0706030201000504u, 0x0706030201050400u, 0x0706030200050401u, 0x0706030205040100u,
    0x0706030100050402u, 0x0706030105040200u, 0x0706030005040201u, 0x0706030504020100u,
    0x0706020100050403u, 0x0706020105040300u, 0x0706020005040301u, 0x0706020504030100u,
    0x0706010005040302u, 0x0706010504030200u, 0x0706000504030201u, 0x0706050403020100u,
    0x0705040302010006u, 0x0705040302010600u, 0x0705040302000601u, 0x0705040302060100u,
    0x0705040301000602u, 0x0705040301060200u, 0x0705040300060201u, 0x0705040306020100u,
    0x0705040201000603u, 0x0705040201060300u, 0x0705040200060301u, 0x0705040206030100u,
    0x0705040100060302u, 0x0705040106030200u, 0x0705040006030201u, 0x0705040603020100u,
    0x0705030201000604u, 0x0705030201060400u, 0x0705030200060401u, 0x0705030206040100u,
    0x0705030100060402u, 0x0705030106040200u, 0x0705030006040201u, 0x0705030604020100u,
    0x0705020100060403u, 0x0705020106040300u, 0x0705020006040301u, 0x0705020604030100u,
    0x0705010006040302u, 0x0705010604030200u, 0x0705000604030201u, 0x0705060403020100u,
    0x0704030201000605u, 0x0704030201060500u, 0x0704030200060501u, 0x0704030206050100u,
    0x0704030100060502u, 0x0704030106050200u, 0x0704030006050201u, 0x0704030605020100u,
    0x0704020100060503u, 0x0704020106050300u, 0x0704020006050301u, 0x0704020605030100u,
    0x0704010006050302u, 0x0704010605030200u, 0x0704000605030201u, 0x0704060503020100u,
    0x0703020100060504u, 0x0703020106050400u, 0x0703020006050401u, 0x0703020605040100u,
    0x0703010006050402u, 0x0703010605040200u, 0x0703000605040201u, 0x0703060504020100u,
    0x0702010006050403u, 0x0702010605040300u, 0x0702000605040301u, 0x0702060504030100u,
    0x0701000605040302u, 0x0701060504030200u, 0x0700060504030201u, 0x0706050403020100u,
    0x0605040302010007u, 0x0605040302010700u, 0x0605040302000701u, 0x0605040302070100u,
    0x0605040301000702u, 0x0605040301070200u, 0x0605040300070201u, 0x0605040307020100u,
    0x0605040201000703u, 0x0605040201070300u, 0x0605040200070301u, 0x0605040207030100u,
    0x0605040100070302u, 0x0605040107030200u, 0x0605040007030201u, 0x0605040703020100u,
    0x0605030201000704u, 0x0605030201070400u, 0x0605030200070401u, 0x0605030207040100u,
    0x0605030100070402u, 0x0605030107040200u, 0x0605030007040201u, 0x0605030704020100u,
    0x0605020100070403u, 0x0605020107040300u, 0x0605020007040301u, 0x0605020704030100u,
    0x0605010007040302u, 0x0605010704030200u, 0x0605000704030201u, 0x0605070403020100u,
    0x0604030201000705u, 0x0604030201070500u, 0x0604030200070501u, 0x0604030207050100u,
    0x0604030100070502u, 0x0604030107050200u, 0x0604030007050201u, 0x0604030705020100u,
    0x0604020100070503u, 0x0604020107050300u, 0x0604020007050301u, 0x0604020705030100u,
    0x0604010007050302u, 0x0604010705030200u, 0x0604000705030201u, 0x0604070503020100u,
    0x0603020100070504u, 0x0603020107050400u, 0x0603020007050401u, 0x0603020705040100u,
    0x0603010007050402u, 0x0603010705040200u, 0x0603000705040201u, 0x0603070504020100u,
    0x0602010007050403u, 0x0602010705040300u, 0x0602000705040301u, 0x0602070504030100u,
    0x0601000705040302u, 0x0601070504030200u, 0x0600070504030201u, 0x0607050403020100u,
    0x0504030201000706u, 0x0504030201070600u, 0x0504030200070601u, 0x0504030207060100u,
    0x0504030100070602u, 0x0504030107060200u, 0x0504030007060201u, 0x0504030706020100u,
    0x0504020100070603u, 0x0504020107060300u, 0x0504020007060301u, 0x0504020706030100u,
    0x0504010007060302u, 0x0504010706030200u, 0x0504000706030201u, 0x0504070603020100u,
    0x0503020100070604u, 0x0503020107060400u, 0x0503020007060401u, 0x0503020706040100u,
    0x0503010007060402u, 0x0503010706040200u, 0x0503000706040201u, 0x0503070604020100u,
    0x0502010007060403u, 0x0502010706040300u, 0x0502000706040301u, 0x0502070604030100u,
    0x0501000706040302u, 0x0501070604030200u, 0x0500070604030201u, 0x0507060403020100u,
    0x0403020100070605u, 0x0403020107060500u, 0x0403020007060501u, 0x0403020706050100u,
    0x0403010007060502u, 0x0403010706050200u, 0x0403000706050201u, 0x0403070605020100u,
    0x0402010007060503u, 0x0402010706050300u, 0x0402000706050301u, 0x0402070605030100u,
    0x0401000706050302u, 0x0401070605030200u, 0x0400070605030201u, 0x0407060503020100u,
    0x0302010007060504u, 0x0302010706050400u, 0x0302000706050401u, 0x0302070605040100u,
    0x0301000706050402u, 0x0301070605040200u, 0x0300070605040201u, 0x0307060504020100u,
    0x0201000706050403u, 0x0201070605040300u, 0x0200070605040301u, 0x0207060504030100u,
    0x0100070605040302u, 0x0107060504030200u, 0x0007060504030201u, 0x0706050403020100u,
};

/* Compare-exchanges of v's lanes with lanes of a permutation of v: the
 * lanes of the blend mask keep the maximum, the others the minimum (each
 * mask is spelled out: the blend needs a constant). Lane i against i ^ 1. */
static inline __m256i pairs_d1(__m256i v)
{
    const __m256i p = _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1));
    return _mm256_blend_epi32(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p), 0xAA);
}
/* Lane i against i ^ 2. */
static inline __m256i pairs_d2(__m256i v)
{
    const __m256i p = _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2));
    return _mm256_blend_epi32(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p), 0xCC);
}
/* Lane i against i ^ 4. */
static inline __m256i pairs_d4(__m256i v)
{
    const __m256i p = _mm256_permute2x128_si256(v, v, 1);
    return _mm256_blend_epi32(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p), 0xF0);
}
/* Lane i against lane 3 - i of each half. */
static inline __m256i mirror4(__m256i v)
{
    const __m256i p = _mm256_shuffle_epi32(v, _MM_SHUFFLE(0, 1, 2, 3));
    return _mm256_blend_epi32(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p), 0xCC);
}
static inline __m256i reverse8(__m256i v)
{
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
}
/* Lane i against lane 7 - i. */
static inline __m256i mirror8(__m256i v)
{
    const __m256i p = reverse8(v);
    return _mm256_blend_epi32(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p), 0xF0);
}

/* Sorts the eight lanes of v. */
static inline __m256i sort_lanes(__m256i v)
{
    v = pairs_d1(v);
    v = pairs_d1(mirror4(v));
    return pairs_d1(pairs_d2(mirror8(v)));
}
/* Sorts the eight lanes of a bitonic v. */
static inline __m256i clean_lanes(__m256i v) { return pairs_d1(pairs_d2(pairs_d4(v))); }

/* Sorts the 8 * count keys of r[0 .. count) (count 1, 2, 4 or 8) as one
 * sequence, register after register: each register's lanes, then merges. */
static inline __attribute__((always_inline)) void sort_registers(__m256i *r, int count)
{
#pragma GCC unroll 16
    for (int i = 0; i < count; i++)
        r[i] = sort_lanes(r[i]);
#pragma GCC unroll 4
    for (int s = 1; s < count; s *= 2) {     /* merge blocks of s registers */
#pragma GCC unroll 8
        for (int b = 0; b < count; b += 2 * s) {
#pragma GCC unroll 8
            for (int j = 0; j < s; j++) {    /* key t against key 16s - 1 - t */
                const __m256i a = r[b + j], c = reverse8(r[b + 2 * s - 1 - j]);
                r[b + j] = _mm256_min_epu32(a, c);
                r[b + 2 * s - 1 - j] = reverse8(_mm256_max_epu32(a, c));
            }
#pragma GCC unroll 4
            for (int d = s / 2; d >= 1; d /= 2) /* half-cleaners across registers */
#pragma GCC unroll 16
                for (int i = b; i < b + 2 * s; i++)
                    if (((i - b) & d) == 0) {
                        const __m256i a = r[i], c = r[i + d];
                        r[i] = _mm256_min_epu32(a, c);
                        r[i + d] = _mm256_max_epu32(a, c);
                    }
#pragma GCC unroll 16
            for (int i = b; i < b + 2 * s; i++)
                r[i] = clean_lanes(r[i]);
        }
    }
}

/* ---------------------------------------------------------------- column-major networks
 *
 * The keys of `count` registers (8 or 16) ranked column-major: rank
 * l * count + i sits in lane l of register i. A bitonic sort in that order
 * compares keys at rank distances below `count` across whole registers
 * (a minimum and a maximum, no lane moves: most of the stages) and only
 * the larger distances within registers; a transpose of 8 x 8 blocks then
 * puts the keys in memory order. */

/* The compare-exchange of registers a (keeps the minima) and b. */
static inline __attribute__((always_inline)) void exchange(__m256i *a, __m256i *b)
{
    const __m256i lo = _mm256_min_epu32(*a, *b);
    *b = _mm256_max_epu32(*a, *b);
    *a = lo;
}

/* Lanes reversed within groups of `group` (2, 4 or 8). */
static inline __attribute__((always_inline)) __m256i mirror_groups(__m256i v, int group)
{
    if (group == 2)
        return _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1));
    if (group == 4)
        return _mm256_shuffle_epi32(v, _MM_SHUFFLE(0, 1, 2, 3));
    return reverse8(v);
}

/* Lanes of hi where the lane index has bit `bit` set (1, 2 or 4), of lo
 * elsewhere. */
static inline __attribute__((always_inline)) __m256i blend_upper(__m256i lo, __m256i hi, int bit)
{
    if (bit == 1)
        return _mm256_blend_epi32(lo, hi, 0xAA);
    if (bit == 2)
        return _mm256_blend_epi32(lo, hi, 0xCC);
    return _mm256_blend_epi32(lo, hi, 0xF0);
}

/* One bitonic stage at rank distance d of a merge of blocks of k ranks:
 * d == k / 2 compares rank p with the mirror p ^ (k - 1) (a flip), smaller
 * d with p ^ d (a half-cleaner); the lower rank keeps the minimum. */
static inline __attribute__((always_inline)) void column_stage(__m256i *r, int count, int k, int d)
{
    if (d < count) { /* ranks in other registers, the same lane */
        const int partner = d == k / 2 ? k - 1 : d;
#pragma GCC unroll 32
        for (int i = 0; i < count; i++)
            if ((i & d) == 0)
                exchange(&r[i], &r[i ^ partner]);
        return;
    }
    const int lane_bit = d / count;
    if (d == k / 2) { /* flip: register i against count - 1 - i, lanes mirrored in groups */
        const int group = 2 * lane_bit;
#pragma GCC unroll 16
        for (int i = 0; i < count / 2; i++) {
            const __m256i a = r[i], b = mirror_groups(r[count - 1 - i], group);
            const __m256i lo = _mm256_min_epu32(a, b), hi = _mm256_max_epu32(a, b);
            r[i] = blend_upper(lo, hi, lane_bit);
            r[count - 1 - i] = mirror_groups(blend_upper(hi, lo, lane_bit), group);
        }
        return;
    }
#pragma GCC unroll 32
    for (int i = 0; i < count; i++) { /* half-cleaner within each register */
        const __m256i v = r[i];
        const __m256i p = lane_bit == 1 ? _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1))
                          : lane_bit == 2 ? _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2))
                                          : _mm256_permute2x128_si256(v, v, 1);
        r[i] = blend_upper(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p), lane_bit);
    }
}

/* Sorts the 8 * count keys of r[0 .. count) (count 8 or 16) into
 * column-major rank order: the stages of the bitonic sort of blocks of
 * 2, 4, ..., 8 * count ranks. */
static inline __attribute__((always_inline)) void sort_columns_major(__m256i *r, int count)
{
    /* log2 of the 8 * count keys, as a plain bound: GCC ignores (an error
     * with -Werror at -O1) the unroll annotation of a loop whose exit test
     * is a shift */
    const int log_keys = count == 8 ? 6 : 7;
#pragma GCC unroll 8
    for (int log_k = 1; log_k <= log_keys; log_k++)
#pragma GCC unroll 8
        for (int log_d = log_k - 1; log_d >= 0; log_d--)
            column_stage(r, count, 1 << log_k, 1 << log_d);
}

/* Transposes the 8 x 8 keys of r[0 .. 8) (lane j of register i goes to
 * lane i of register j). */
static inline __attribute__((always_inline)) void transpose8(__m256i *r)
{
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
    }
}

/* Column-major rank order of r[0 .. count) to memory order in out[0 ..
 * count): lane l of register i held rank l * count + i. */
static inline __attribute__((always_inline)) void columns_to_rows(__m256i *r, int count, __m256i *out)
{
#pragma GCC unroll 4
    for (int b = 0; b < count / LANES; b++) {
        transpose8(r + LANES * b); /* register l of the block: lane l's ranks 8b .. 8b + 7 */
#pragma GCC unroll 8
        for (int l = 0; l < LANES; l++)
            out[l * (count / LANES) + b] = r[LANES * b + l];
    }
}

/* Sorts the 8 * count keys of r[0 .. count) (count 8 or 16) into
 * out[0 .. count), register after register (r is left scrambled). */
static inline __attribute__((always_inline)) void sort_to_rows(__m256i *r, int count, __m256i *out)
{
    sort_columns_major(r, count);
    columns_to_rows(r, count, out);
}

/* Lanes 0 .. count - 1 set (0 <= count <= 8). */
static inline __m256i first_lanes(int64_t count)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Sorts v[0 .. n), n <= 8 * count (count 1, 2, 4, 8 or 16, a constant
 * where inlined), in registers padded with UINT32_MAX
 * (nothing outside v is touched). The loops over registers unroll fully:
 * as loops GCC turns the stores into a rep movsq, slow to start on AMD. */
static inline __attribute__((always_inline)) void sort_registers_of(uint32_t *v, int64_t n,
                                                                     int count)
{
    __m256i r[SMALL_REGS];
    const int64_t full = n / LANES, rest = n % LANES;
#pragma GCC unroll 16
    for (int i = 0; i < count; i++) {
        if (i < full) {
            r[i] = _mm256_loadu_si256((const __m256i *)(v + LANES * i));
        } else {
            const __m256i mask = first_lanes(i == full ? rest : 0);
            const __m256i x = _mm256_maskload_epi32((const int *)(v + LANES * i), mask);
            r[i] = _mm256_blendv_epi8(_mm256_set1_epi32(-1), x, mask);
        }
    }
    __m256i rows[SMALL_REGS]; /* the column-major networks' keys in memory order */
    const __m256i *sorted = count >= 8 ? rows : r;
    if (count >= 8)
        sort_to_rows(r, count, rows);
    else
        sort_registers(r, count);
#pragma GCC unroll 16
    for (int i = 0; i < count; i++)
        if (i < full)
            _mm256_storeu_si256((__m256i *)(v + LANES * i), sorted[i]);
    if (rest > 0) { /* not a masked store: slow on AMD */
        uint32_t last[LANES];
        _mm256_storeu_si256((__m256i *)last, sorted[full]);
        memcpy(v + LANES * full, last, (size_t)rest * sizeof *v);
    }
}

/* Sorts v[0 .. n), n <= SMALL_MAX (see sort_registers_of). */
static void sort_small(uint32_t *v, int64_t n)
{
    if (n < 2)
        return;
    switch (n <= 8 ? 1 : n <= 16 ? 2 : n <= 32 ? 4 : n <= 64 ? 8 : 16) {
    case 1: sort_registers_of(v, n, 1); break;
    case 2: sort_registers_of(v, n, 2); break;
    case 4: sort_registers_of(v, n, 4); break;
    case 8: sort_registers_of(v, n, 8); break;
    default: sort_registers_of(v, n, 16); break;
    }
}

/* Moves v's lanes below the pivot to the front and stores it at left and
 * ending at right (see the header); returns how many lanes were below. */
static inline int partition_vector(__m256i v, __m256i pivot, uint32_t *left, uint32_t *right)
{
    const __m256i at_least = _mm256_cmpeq_epi32(_mm256_max_epu32(v, pivot), v);
    const int mask = ~_mm256_movemask_ps(_mm256_castsi256_ps(at_least)) & 0xff;
    const __m256i order =
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)compress_order[mask]));
    const __m256i packed = _mm256_permutevar8x32_epi32(v, order);
    _mm256_storeu_si256((__m256i *)left, packed);
    _mm256_storeu_si256((__m256i *)(right - LANES), packed);
    return __builtin_popcount((unsigned)mask);
}

/* Rearranges v[0 .. n) (n >= 2 * ASIDE * LANES) so that the keys below
 * pivot come first; returns how many there are. ASIDE vectors are set
 * aside at each end and the rest read ASIDE vectors at a time (fewer
 * unpredictable side choices, more independent work); a side then always
 * has room for ASIDE vectors' worth of stores. */
static int64_t partition(uint32_t *v, int64_t n, uint32_t pivot_key)
{
    const __m256i pivot = _mm256_set1_epi32(pivot_key);
    __m256i aside[2 * ASIDE];
    for (int i = 0; i < ASIDE; i++) {
        aside[i] = _mm256_loadu_si256((const __m256i *)(v + LANES * i));
        aside[ASIDE + i] = _mm256_loadu_si256((const __m256i *)(v + n - LANES * (i + 1)));
    }
    int64_t read_left = ASIDE * LANES, read_right = n - ASIDE * LANES;
    int64_t write_left = 0, write_right = n;
    while (read_right - read_left >= ASIDE * LANES) {
        __m256i x[ASIDE];
        if (read_left - write_left <= write_right - read_right) {
#pragma GCC unroll 8
            for (int i = 0; i < ASIDE; i++)
                x[i] = _mm256_loadu_si256((const __m256i *)(v + read_left + LANES * i));
            read_left += ASIDE * LANES;
        } else {
            read_right -= ASIDE * LANES;
#pragma GCC unroll 8
            for (int i = 0; i < ASIDE; i++)
                x[i] = _mm256_loadu_si256((const __m256i *)(v + read_right + LANES * i));
        }
#pragma GCC unroll 8
        for (int i = 0; i < ASIDE; i++) {
            const int below = partition_vector(x[i], pivot, v + write_left, v + write_right);
            write_left += below;
            write_right -= LANES - below;
        }
    }
    while (read_right - read_left >= LANES) {
        __m256i x;
        if (read_left - write_left <= write_right - read_right) {
            x = _mm256_loadu_si256((const __m256i *)(v + read_left));
            read_left += LANES;
        } else {
            read_right -= LANES;
            x = _mm256_loadu_si256((const __m256i *)(v + read_right));
        }
        const int below = partition_vector(x, pivot, v + write_left, v + write_right);
        write_left += below;
        write_right -= LANES - below;
    }
    /* the last few keys one by one; [write_left, write_right) is then free
     * but for them, and holds exactly them and the set-aside vectors */
    uint32_t rest[LANES];
    const int64_t nrest = read_right - read_left;
    memcpy(rest, v + read_left, (size_t)nrest * sizeof *v);
    for (int64_t i = 0; i < nrest; i++) {
        if (rest[i] < pivot_key)
            v[write_left++] = rest[i];
        else
            v[--write_right] = rest[i];
    }
    for (int i = 0; i < 2 * ASIDE; i++) {
        const int below = partition_vector(aside[i], pivot, v + write_left, v + write_right);
        write_left += below;
        write_right -= LANES - below;
    }
    return write_left;
}

/* The float32 key of each lane's bits (sort.c's key_of_f32): the bits
 * with the sign flipped, or all of them for a negative float; NaN: the
 * largest key. */
static inline __m256i keys_of_f32_lanes(__m256i b)
{
    const __m256i top = _mm256_set1_epi32(INT32_MIN), magnitude = _mm256_set1_epi32(INT32_MAX);
    const __m256i flip = _mm256_or_si256(_mm256_srai_epi32(b, 31), top);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(b, magnitude), _mm256_set1_epi32(0x7f800000));
    return _mm256_or_si256(_mm256_xor_si256(b, flip), nan);
}

/* Register i of r[0 .. count): the keys v[step / 2 + step * (8 i + l)],
 * l = 0 .. 7, built in registers (eight scalar stores read back as one
 * vector wait for the stores to retire: a tenth of the time of rows of
 * 4096 went there). */
static inline __attribute__((always_inline)) void load_sample(const uint32_t *v, int64_t step,
                                                               int count, __m256i *r)
{
#pragma GCC unroll 8
    for (int i = 0; i < count; i++) {
        const uint32_t *s = v + step / 2 + step * LANES * i;
        r[i] = _mm256_setr_epi32((int)s[0], (int)s[step], (int)s[2 * step], (int)s[3 * step],
                                 (int)s[4 * step], (int)s[5 * step], (int)s[6 * step],
                                 (int)s[7 * step]);
    }
}

/* A pivot key: the median of a sample spread over v[0 .. n), n > SMALL_MAX
 * (the key of rank 4 of 8, or of rank 32 of 64). of_f32: v holds float32
 * bits, and the sample their keys. */
static uint32_t choose_pivot(const uint32_t *v, int64_t n, bool of_f32)
{
    __m256i r[8];
    if (n < SAMPLE_WIDE_MIN) {
        load_sample(v, n / LANES, 1, r);
        if (of_f32)
            r[0] = keys_of_f32_lanes(r[0]);
        sort_registers(r, 1);
        return (uint32_t)_mm256_extract_epi32(r[0], 4);
    }
    load_sample(v, n / (LANES * 8), 8, r);
    if (of_f32)
        for (int i = 0; i < 8; i++)
            r[i] = keys_of_f32_lanes(r[i]);
    sort_registers(r, 8);
    return (uint32_t)_mm256_extract_epi32(r[4], 0);
}

/* Splits v[0 .. n) at a sampled pivot: keys [0, *low_end) are below the
 * keys [*high_begin, n), and those between (if any) all equal the pivot. */
static void split(uint32_t *v, int64_t n, int64_t *low_end, int64_t *high_begin)
{
    const uint32_t pivot = choose_pivot(v, n, false);
    const bool wide = wf__sort_avx512_usable();
    const int64_t below = wide ? wf__partition_u32_avx512(v, n, pivot) : partition(v, n, pivot);
    if (below > 0) {
        *low_end = *high_begin = below;
        return;
    }
    /* the pivot is the minimum: set its copies aside */
    *low_end = 0;
    *high_begin = pivot == UINT32_MAX ? n
                  : wide               ? wf__partition_u32_avx512(v, n, pivot + 1)
                                       : partition(v, n, pivot + 1);
}

static void sift_down(uint32_t *v, int64_t root, int64_t n)
{
    for (int64_t child = 2 * root + 1; child < n; root = child, child = 2 * root + 1) {
        if (child + 1 < n && v[child + 1] > v[child])
            child++;
        if (v[root] >= v[child])
            return;
        const uint32_t t = v[root];
        v[root] = v[child];
        v[child] = t;
    }
}

static void heap_sort(uint32_t *v, int64_t n)
{
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift_down(v, i, n);
    for (int64_t end = n - 1; end > 0; end--) {
        const uint32_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(v, 0, end);
    }
}

static int depth_limit(int64_t n)
{
    int depth = 8;
    for (int64_t m = n; m > 1; m >>= 1)
        depth += 2;
    return depth;
}

/* Keys v[0 .. n) in their sorted place: to_f32, turned into float32 bits. */
static void sorted_stretch(uint32_t *v, int64_t n, bool to_f32)
{
    if (to_f32)
        wf__f32_of_keys_avx2(v, v, n);
}

static void quicksort(uint32_t *v, int64_t n, int depth, bool to_f32)
{
    const int64_t small_max = wf__sort_avx512_usable() ? 2 * SMALL_MAX : SMALL_MAX;
    while (n > small_max) {
        if (depth-- == 0) {
            heap_sort(v, n);
            sorted_stretch(v, n, to_f32);
            return;
        }
        int64_t low_end, high_begin;
        split(v, n, &low_end, &high_begin);
        sorted_stretch(v + low_end, high_begin - low_end, to_f32);
        if (low_end < n - high_begin) { /* recurse into the smaller side */
            quicksort(v, low_end, depth, to_f32);
            v += high_begin;
            n -= high_begin;
        } else {
            quicksort(v + high_begin, n - high_begin, depth, to_f32);
            n = low_end;
        }
    }
    if (n > SMALL_MAX)
        wf__sort_small_u32_avx512(v, n);
    else
        sort_small(v, n);
    sorted_stretch(v, n, to_f32);
}

static void quickselect(uint32_t *v, int64_t n, int64_t kth)
{
    int depth = depth_limit(n);
    while (n > SMALL_MAX) {
        if (depth-- == 0) {
            heap_sort(v, n);
            return;
        }
        int64_t low_end, high_begin;
        split(v, n, &low_end, &high_begin);
        if (kth < low_end) {
            n = low_end;
        } else if (kth >= high_begin) {
            v += high_begin;
            n -= high_begin;
            kth -= high_begin;
        } else {
            return; /* kth is one of the keys equal to the pivot */
        }
    }
    sort_small(v, n);
}

/* wf__split_u32_avx2 from its first `count` parts on. */
static int split_further(uint32_t *keys, int count, int max_parts, int64_t (*parts)[2],
                         bool to_f32)
{
    while (count > 0 && count < max_parts) {
        int widest = 0; /* split the longest part */
        for (int i = 1; i < count; i++)
            if (parts[i][1] - parts[i][0] > parts[widest][1] - parts[widest][0])
                widest = i;
        const int64_t begin = parts[widest][0], end = parts[widest][1];
        if (end - begin <= 2 * SMALL_MAX)
            break;
        int64_t low_end, high_begin;
        split(keys + begin, end - begin, &low_end, &high_begin);
        /* keys between low_end and high_begin are in place: no part */
        sorted_stretch(keys + begin + low_end, high_begin - low_end, to_f32);
        parts[widest][1] = begin + low_end;
        parts[count][0] = begin + high_begin;
        parts[count][1] = end;
        count++;
    }
    return count;
}

int wf__split_u32_avx2(uint32_t *keys, int64_t n, int max_parts, int64_t (*parts)[2],
                       bool to_f32)
{
    if (n <= 0 || max_parts <= 0)
        return 0;
    parts[0][0] = 0;
    parts[0][1] = n;
    return split_further(keys, 1, max_parts, parts, to_f32);
}

int wf__split_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n, int max_parts,
                       int64_t (*parts)[2])
{
    if (max_parts < 2 || n <= 2 * SMALL_MAX || !wf__sort_avx512_usable()) {
        wf__keys_of_f32_avx2(bits, keys, n);
        return wf__split_u32_avx2(keys, n, max_parts, parts, true);
    }
    const int64_t below = wf__partition_f32_keys_avx512(bits, keys, n, choose_pivot(bits, n, true));
    if (below == 0) /* the pivot is the minimum: keys holds the row's keys */
        return wf__split_u32_avx2(keys, n, max_parts, parts, true);
    parts[0][0] = 0;
    parts[0][1] = below;
    parts[1][0] = below;
    parts[1][1] = n;
    return split_further(keys, 2, max_parts, parts, true);
}

void wf__sort_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n)
{
    int64_t parts[2][2];
    const int count = wf__split_f32_avx2(bits, keys, n, 2, parts);
    for (int i = 0; i < count; i++)
        quicksort(keys + parts[i][0], parts[i][1] - parts[i][0], depth_limit(n), true);
}

void wf__sort_u32_avx2(uint32_t *keys, int64_t n, bool to_f32)
{
    quicksort(keys, n, depth_limit(n), to_f32);
}

void wf__select_u32_avx2(uint32_t *keys, int64_t n, int64_t kth) { quickselect(keys, n, kth); }

/* sort.c's float32 key mapping (key_of_f32, f32_of_key), one key. */
static inline uint32_t key_of_f32_bits(uint32_t b)
{
    const uint32_t flip = (uint32_t)((int32_t)b >> 31) | 0x80000000u;
    return (b & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : b ^ flip;
}
static inline uint32_t f32_bits_of_key(uint32_t k)
{
    const uint32_t flip = ~(uint32_t)((int32_t)k >> 31) | 0x80000000u;
    return k == 0xffffffffu ? 0x7fc00000u : k ^ flip;
}

void wf__keys_of_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n)
{
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        _mm256_storeu_si256((__m256i *)(keys + i),
                            keys_of_f32_lanes(_mm256_loadu_si256((const __m256i *)(bits + i))));
    for (; i < n; i++)
        keys[i] = key_of_f32_bits(bits[i]);
}

void wf__f32_of_keys_avx2(const uint32_t *keys, uint32_t *bits, int64_t n)
{
    const __m256i top = _mm256_set1_epi32(INT32_MIN), ones = _mm256_set1_epi32(-1);
    const __m256i quiet_nan = _mm256_set1_epi32(0x7fc00000);
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        const __m256i k = _mm256_loadu_si256((const __m256i *)(keys + i));
        const __m256i flip = _mm256_or_si256(_mm256_xor_si256(_mm256_srai_epi32(k, 31), ones), top);
        const __m256i nan = _mm256_cmpeq_epi32(k, ones);
        _mm256_storeu_si256((__m256i *)(bits + i),
                            _mm256_blendv_epi8(_mm256_xor_si256(k, flip), quiet_nan, nan));
    }
    for (; i < n; i++)
        bits[i] = f32_bits_of_key(keys[i]);
}

void wf__flip_keys_u32_avx2(uint32_t *keys, uint32_t *copy, int64_t n)
{
    const __m256i ones = _mm256_set1_epi32(-1);
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        const __m256i k = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(keys + i)), ones);
        _mm256_storeu_si256((__m256i *)(keys + i), k);
        _mm256_storeu_si256((__m256i *)(copy + i), k);
    }
    for (; i < n; i++)
        copy[i] = keys[i] = ~keys[i];
}

/* Lanes of v below t (bit l: lane l). */
static inline unsigned lanes_below(__m256i v, __m256i t)
{
    const __m256i at_least = _mm256_cmpeq_epi32(_mm256_max_epu32(v, t), v);
    return ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(at_least)) & 0xffu;
}

int64_t wf__count_below_u32_avx2(const uint32_t *keys, int64_t n, uint32_t threshold)
{
    const __m256i t = _mm256_set1_epi32((int)threshold);
    int64_t count = 0, i = 0;
    for (; i + LANES <= n; i += LANES) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(keys + i));
        count += __builtin_popcount(lanes_below(v, t));
    }
    for (; i < n; i++)
        count += keys[i] < threshold;
    return count;
}

int64_t wf__collect_below_u32_avx2(const uint32_t *keys, int64_t n, uint32_t threshold,
                                   int64_t ties, int64_t k, uint64_t *packed)
{
    /* a vector of keys all above the threshold adds nothing: skipped whole
     * (there is no key above UINT32_MAX) */
    const bool skip = threshold < UINT32_MAX;
    const __m256i above = _mm256_set1_epi32((int)(threshold + 1));
    int64_t count = 0;
    for (int64_t i0 = 0; i0 < n && count < k; i0 += LANES) {
        const int64_t i1 = i0 + LANES < n ? i0 + LANES : n;
        if (skip && i1 - i0 == LANES &&
            lanes_below(_mm256_loadu_si256((const __m256i *)(keys + i0)), above) == 0)
            continue;
        for (int64_t i = i0; i < i1 && count < k; i++)
            if (keys[i] < threshold || (keys[i] == threshold && ties-- > 0))
                packed[count++] = (uint64_t)keys[i] << 32 | (uint64_t)i;
    }
    return count;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool wf__sort_avx2_usable(void)
{
    return wf__vm_isa_active() >= WF_VM_ISA_AVX2 && __builtin_cpu_supports("avx2");
}

#else /* not x86-64 GCC: never usable, never called */

bool wf__sort_avx2_usable(void) { return false; }
void wf__sort_u32_avx2(uint32_t *keys, int64_t n, bool to_f32)
{
    (void)keys;
    (void)n;
    (void)to_f32;
}
int wf__split_u32_avx2(uint32_t *keys, int64_t n, int max_parts, int64_t (*parts)[2],
                       bool to_f32)
{
    (void)keys;
    (void)n;
    (void)max_parts;
    (void)parts;
    (void)to_f32;
    return 0;
}
int wf__split_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n, int max_parts,
                       int64_t (*parts)[2])
{
    (void)bits;
    (void)keys;
    (void)n;
    (void)max_parts;
    (void)parts;
    return 0;
}
void wf__sort_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n)
{
    (void)bits;
    (void)keys;
    (void)n;
}
void wf__keys_of_f32_avx2(const uint32_t *bits, uint32_t *keys, int64_t n)
{
    (void)bits;
    (void)keys;
    (void)n;
}
void wf__f32_of_keys_avx2(const uint32_t *keys, uint32_t *bits, int64_t n)
{
    (void)keys;
    (void)bits;
    (void)n;
}
void wf__select_u32_avx2(uint32_t *keys, int64_t n, int64_t kth)
{
    (void)keys;
    (void)n;
    (void)kth;
}
void wf__flip_keys_u32_avx2(uint32_t *keys, uint32_t *copy, int64_t n)
{
    (void)keys;
    (void)copy;
    (void)n;
}
int64_t wf__count_below_u32_avx2(const uint32_t *keys, int64_t n, uint32_t threshold)
{
    (void)keys;
    (void)n;
    (void)threshold;
    return 0;
}
int64_t wf__collect_below_u32_avx2(const uint32_t *keys, int64_t n, uint32_t threshold,
                                   int64_t ties, int64_t k, uint64_t *packed)
{
    (void)keys;
    (void)n;
    (void)threshold;
    (void)ties;
    (void)k;
    (void)packed;
    return 0;
}

#endif
