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

#pragma GCC push_options
#pragma GCC target("avx2")

/* ASIDE 8, not 4: half the side choices (an unpredictable branch each)
 * per key; 9% less time on float32 rows of 4096, 13% on one row of 16M
 * (Zen 3), though the set-aside vectors no longer stay in registers. */
enum { LANES = 8, ASIDE = 8, SMALL_REGS = 16, SMALL_MAX = LANES * SMALL_REGS };
_Static_assert(SMALL_MAX + 1 >= 2 * ASIDE * LANES, "partition() needs 2 * ASIDE vectors");
enum { SAMPLE_WIDE_MIN = 8192 };

/* For each mask of lanes (bit i: lane i is below the pivot), the lane order
 * that puts the masked lanes first and the others after, both in lane
 * order: lane index j of the result in bits 4j .. 4j+2. */
static const uint32_t compress_order[256] = {
    0x76543210, 0x76543210, 0x76543201, 0x76543210, 0x76543102, 0x76543120, 0x76543021, 0x76543210,
    0x76542103, 0x76542130, 0x76542031, 0x76542310, 0x76541032, 0x76541320, 0x76540321, 0x76543210,
    0x76532104, 0x76532140, 0x76532041, 0x76532410, 0x76531042, 0x76531420, 0x76530421, 0x76534210,
    0x76521043, 0x76521430, 0x76520431, 0x76524310, 0x76510432, 0x76514320, 0x76504321, 0x76543210,
    0x76432105, 0x76432150, 0x76432051, 0x76432510, 0x76431052, 0x76431520, 0x76430521, 0x76435210,
    0x76421053, 0x76421530, 0x76420531, 0x76425310, 0x76410532, 0x76415320, 0x76405321, 0x76453210,
    0x76321054, 0x76321540, 0x76320541, 0x76325410, 0x76310542, 0x76315420, 0x76305421, 0x76354210,
    0x76210543, 0x76215430, 0x76205431, 0x76254310, 0x76105432, 0x76154320, 0x76054321, 0x76543210,
    0x75432106, 0x75432160, 0x75432061, 0x75432610, 0x75431062, 0x75431620, 0x75430621, 0x75436210,
    0x75421063, 0x75421630, 0x75420631, 0x75426310, 0x75410632, 0x75416320, 0x75406321, 0x75463210,
    0x75321064, 0x75321640, 0x75320641, 0x75326410, 0x75310642, 0x75316420, 0x75306421, 0x75364210,
    0x75210643, 0x75216430, 0x75206431, 0x75264310, 0x75106432, 0x75164320, 0x75064321, 0x75643210,
    0x74321065, 0x74321650, 0x74320651, 0x74326510, 0x74310652, 0x74316520, 0x74306521, 0x74365210,
    0x74210653, 0x74216530, 0x74206531, 0x74265310, 0x74106532, 0x74165320, 0x74065321, 0x74653210,
    0x73210654, 0x73216540, 0x73206541, 0x73265410, 0x73106542, 0x73165420, 0x73065421, 0x73654210,
    0x72106543, 0x72165430, 0x72065431, 0x72654310, 0x71065432, 0x71654320, 0x70654321, 0x76543210,
    0x65432107, 0x65432170, 0x65432071, 0x65432710, 0x65431072, 0x65431720, 0x65430721, 0x65437210,
    0x65421073, 0x65421730, 0x65420731, 0x65427310, 0x65410732, 0x65417320, 0x65407321, 0x65473210,
    0x65321074, 0x65321740, 0x65320741, 0x65327410, 0x65310742, 0x65317420, 0x65307421, 0x65374210,
    0x65210743, 0x65217430, 0x65207431, 0x65274310, 0x65107432, 0x65174320, 0x65074321, 0x65743210,
    0x64321075, 0x64321750, 0x64320751, 0x64327510, 0x64310752, 0x64317520, 0x64307521, 0x64375210,
    0x64210753, 0x64217530, 0x64207531, 0x64275310, 0x64107532, 0x64175320, 0x64075321, 0x64753210,
    0x63210754, 0x63217540, 0x63207541, 0x63275410, 0x63107542, 0x63175420, 0x63075421, 0x63754210,
    0x62107543, 0x62175430, 0x62075431, 0x62754310, 0x61075432, 0x61754320, 0x60754321, 0x67543210,
    0x54321076, 0x54321760, 0x54320761, 0x54327610, 0x54310762, 0x54317620, 0x54307621, 0x54376210,
    0x54210763, 0x54217630, 0x54207631, 0x54276310, 0x54107632, 0x54176320, 0x54076321, 0x54763210,
    0x53210764, 0x53217640, 0x53207641, 0x53276410, 0x53107642, 0x53176420, 0x53076421, 0x53764210,
    0x52107643, 0x52176430, 0x52076431, 0x52764310, 0x51076432, 0x51764320, 0x50764321, 0x57643210,
    0x43210765, 0x43217650, 0x43207651, 0x43276510, 0x43107652, 0x43176520, 0x43076521, 0x43765210,
    0x42107653, 0x42176530, 0x42076531, 0x42765310, 0x41076532, 0x41765320, 0x40765321, 0x47653210,
    0x32107654, 0x32176540, 0x32076541, 0x32765410, 0x31076542, 0x31765420, 0x30765421, 0x37654210,
    0x21076543, 0x21765430, 0x20765431, 0x27654310, 0x10765432, 0x17654320, 0x07654321, 0x76543210,
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
    const __m256i order = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int)compress_order[mask]),
                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(7));
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
 * (the key of rank 4 of 8, or of rank 32 of 64). */
static uint32_t choose_pivot(const uint32_t *v, int64_t n)
{
    __m256i r[8];
    if (n < SAMPLE_WIDE_MIN) {
        load_sample(v, n / LANES, 1, r);
        sort_registers(r, 1);
        return (uint32_t)_mm256_extract_epi32(r[0], 4);
    }
    load_sample(v, n / (LANES * 8), 8, r);
    sort_registers(r, 8);
    return (uint32_t)_mm256_extract_epi32(r[4], 0);
}

/* Splits v[0 .. n) at a sampled pivot: keys [0, *low_end) are below the
 * keys [*high_begin, n), and those between (if any) all equal the pivot. */
static void split(uint32_t *v, int64_t n, int64_t *low_end, int64_t *high_begin)
{
    const uint32_t pivot = choose_pivot(v, n);
    const int64_t below = partition(v, n, pivot);
    if (below > 0) {
        *low_end = *high_begin = below;
        return;
    }
    /* the pivot is the minimum: set its copies aside */
    *low_end = 0;
    *high_begin = pivot == UINT32_MAX ? n : partition(v, n, pivot + 1);
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

static void quicksort(uint32_t *v, int64_t n, int depth)
{
    while (n > SMALL_MAX) {
        if (depth-- == 0) {
            heap_sort(v, n);
            return;
        }
        int64_t low_end, high_begin;
        split(v, n, &low_end, &high_begin);
        if (low_end < n - high_begin) { /* recurse into the smaller side */
            quicksort(v, low_end, depth);
            v += high_begin;
            n -= high_begin;
        } else {
            quicksort(v + high_begin, n - high_begin, depth);
            n = low_end;
        }
    }
    sort_small(v, n);
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

int wf__split_u32_avx2(uint32_t *keys, int64_t n, int max_parts, int64_t (*parts)[2])
{
    int count = 0;
    if (n > 0 && max_parts > 0) {
        parts[0][0] = 0;
        parts[0][1] = n;
        count = 1;
    }
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
        parts[widest][1] = begin + low_end;
        parts[count][0] = begin + high_begin;
        parts[count][1] = end;
        count++;
    }
    return count;
}

void wf__sort_u32_avx2(uint32_t *keys, int64_t n) { quicksort(keys, n, depth_limit(n)); }

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
    const __m256i top = _mm256_set1_epi32(INT32_MIN), magnitude = _mm256_set1_epi32(INT32_MAX);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(bits + i));
        const __m256i flip = _mm256_or_si256(_mm256_srai_epi32(b, 31), top);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, magnitude), inf);
        _mm256_storeu_si256((__m256i *)(keys + i),
                            _mm256_or_si256(_mm256_xor_si256(b, flip), nan));
    }
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

#pragma GCC pop_options

bool wf__sort_avx2_usable(void)
{
    return wf__vm_isa_active() >= WF_VM_ISA_AVX2 && __builtin_cpu_supports("avx2");
}

#else /* not x86-64 GCC: never usable, never called */

bool wf__sort_avx2_usable(void) { return false; }
void wf__sort_u32_avx2(uint32_t *keys, int64_t n)
{
    (void)keys;
    (void)n;
}
int wf__split_u32_avx2(uint32_t *keys, int64_t n, int max_parts, int64_t (*parts)[2])
{
    (void)keys;
    (void)n;
    (void)max_parts;
    (void)parts;
    return 0;
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

#endif
