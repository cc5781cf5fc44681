/*
 * Sort-family kernels: sort, argsort, partition, argpartition, topk,
 * argtopk, along any axis, rows in parallel.
 *
 * Each row is read into unsigned keys whose integer order is the order
 * wanted: integers with the sign bit flipped, floats with the sign bit
 * flipped when positive and every bit flipped when negative (so -0 comes
 * before +0), every NaN the largest key (NumPy puts NaNs last). Keys of
 * 8-, 16- and 32-bit dtypes are 32 bits wide, of 64-bit dtypes 64.
 * complex64 keys are 64 bits in NumPy's order: lexicographic (real part,
 * then imaginary part) for values without NaN, then R + NaN j by their real
 * part, then NaN + R j by their imaginary part, then NaN + NaN j last (a NaN
 * part comes back as the canonical NaN).
 *  - sort: an LSD radix sort of the keys (bytes that are the same in
 *    every key are skipped), decoded back (a NaN comes back as the
 *    canonical NaN); float32, int32 and uint32 keys, where the active
 *    variant is AVX2 or above, by the AVX2 quicksort of sort_avx2.c
 *    instead (see "one long row, AVX2" for why and where);
 *  - argsort: the same over (key, index) pairs: a 32-bit key packed above
 *    its index in one 64-bit word, a 64-bit key with its index beside it.
 *    LSD radix sorting is stable, so equal keys stay in index order;
 *  - partition / topk: introselect over those pairs, which are all
 *    distinct, so the result is one fixed arrangement: quickselect with a
 *    median-of-three pivot, falling back to a radix sort of the range when
 *    it recurses too deep (linear time either way). topk negates the keys
 *    (largest first, ties by index), selects k and sorts those k. Values
 *    are then read from the row at the selected indices, so partition's
 *    values are exactly a's at argpartition's indices. topk of 32-bit
 *    keys under AVX2 finds the same k pairs through a threshold key
 *    (topk_by_threshold).
 * Rows below INSERTION_MAX elements use insertion sort. Every result is a
 * function of the row alone: the same bits for any thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/scatter.h"
#include "backend/cpu/sort_avx2.h"
#include "core/error.h"
#include "prim/sort.h"
#include "runtime/pool.h"
#include "util/fault.h"

enum { INSERTION_MAX = 48 };

typedef struct key_pair {
    uint64_t key;
    uint64_t index;
} key_pair;

/* ---------------------------------------------------------------- keys */

/* (Written as selects, without branches: the loops over rows vectorize.) */
static inline uint32_t key_of_f32(uint32_t b)
{
    const uint32_t flip = (uint32_t)((int32_t)b >> 31) | 0x80000000u; /* all bits if negative */
    return (b & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : b ^ flip;
}
static inline uint32_t f32_of_key(uint32_t k)
{
    const uint32_t flip = ~(uint32_t)((int32_t)k >> 31) | 0x80000000u; /* top bit only if set */
    return k == 0xffffffffu ? 0x7fc00000u : k ^ flip;
}
static inline uint32_t key_of_half(uint32_t h, uint32_t inf)
{
    if ((h & 0x7fffu) > inf)
        return 0xffffu;
    return (h & 0x8000u) ? ~h & 0xffffu : h | 0x8000u;
}
static inline uint32_t half_of_key(uint32_t k, uint32_t nan)
{
    if (k == 0xffffu)
        return nan;
    return (k & 0x8000u) ? k & 0x7fffu : ~k & 0xffffu;
}
static inline uint64_t key_of_f64(uint64_t b)
{
    if ((b & 0x7fffffffffffffffu) > 0x7ff0000000000000u)
        return UINT64_MAX;
    return (b & 0x8000000000000000u) ? ~b : b | 0x8000000000000000u;
}
static inline uint64_t f64_of_key(uint64_t k)
{
    if (k == UINT64_MAX)
        return 0x7ff8000000000000u;
    return (k & 0x8000000000000000u) ? k & 0x7fffffffffffffffu : ~k;
}

/* complex64 (re, im bits): (key re, key im) above each other when
 * neither is NaN (float32 keys of non-NaN values are at most 0xff800000);
 * the classes with NaN parts above all those, in NumPy's order. */
static inline uint64_t key_of_c64(uint64_t bits)
{
    const uint32_t re = key_of_f32((uint32_t)bits), im = key_of_f32((uint32_t)(bits >> 32));
    if (re == 0xffffffffu)
        return im == 0xffffffffu ? UINT64_MAX : 0xffffffff00000000u | im;
    if (im == 0xffffffffu)
        return 0xfffffffe00000000u | re;
    return (uint64_t)re << 32 | im;
}
static inline uint64_t c64_of_key(uint64_t k)
{
    const uint32_t high = (uint32_t)(k >> 32), low = (uint32_t)k;
    uint32_t re = high, im = low;
    if (high == 0xffffffffu) { /* NaN + R j, or NaN + NaN j */
        re = 0xffffffffu;
    } else if (high == 0xfffffffeu) { /* R + NaN j */
        re = low;
        im = 0xffffffffu;
    }
    return (uint64_t)f32_of_key(im) << 32 | f32_of_key(re);
}

static bool wide_keys(wf_dtype d)
{
    return d == WF_DTYPE_I64 || d == WF_DTYPE_U64 || d == WF_DTYPE_F64 || d == WF_DTYPE_C64;
}

/* Whether the dtype's 32-bit keys use all 32 bits (else 8 or 16). */
static bool keys32_are_full_width(wf_dtype d)
{
    return d == WF_DTYPE_F32 || d == WF_DTYPE_I32 || d == WF_DTYPE_U32;
}

/* keys[i] = key of row element i (n elements, stride in elements). */
static void load_keys32(wf_dtype d, const char *row, int64_t stride, int64_t n, uint32_t *keys)
{
    switch (d) {
    case WF_DTYPE_BOOL:
    case WF_DTYPE_U8:
        for (int64_t i = 0; i < n; i++)
            keys[i] = ((const uint8_t *)row)[i * stride];
        break;
    case WF_DTYPE_I8: /* signed: flip the sign bit, so the order is unsigned */
        for (int64_t i = 0; i < n; i++)
            keys[i] = ((const uint8_t *)row)[i * stride] ^ 0x80u;
        break;
    case WF_DTYPE_I16:
        for (int64_t i = 0; i < n; i++)
            keys[i] = ((const uint16_t *)row)[i * stride] ^ 0x8000u;
        break;
    case WF_DTYPE_U16:
        for (int64_t i = 0; i < n; i++)
            keys[i] = ((const uint16_t *)row)[i * stride];
        break;
    case WF_DTYPE_U32:
        for (int64_t i = 0; i < n; i++)
            keys[i] = ((const uint32_t *)row)[i * stride];
        break;
    case WF_DTYPE_I32:
        for (int64_t i = 0; i < n; i++)
            keys[i] = ((const uint32_t *)row)[i * stride] ^ 0x80000000u;
        break;
    case WF_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            keys[i] = key_of_half(((const uint16_t *)row)[i * stride], 0x7c00u);
        break;
    case WF_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            keys[i] = key_of_half(((const uint16_t *)row)[i * stride], 0x7f80u);
        break;
    default: /* F32 */
        if (stride == 1 && wf__sort_avx2_usable()) {
            wf__keys_of_f32_avx2((const uint32_t *)row, keys, n);
            break;
        }
        for (int64_t i = 0; i < n; i++)
            keys[i] = key_of_f32(((const uint32_t *)row)[i * stride]);
        break;
    }
}

static void load_keys64(wf_dtype d, const char *row, int64_t stride, int64_t n, uint64_t *keys)
{
    const uint64_t *x = (const uint64_t *)row;
    if (d == WF_DTYPE_I64) {
        for (int64_t i = 0; i < n; i++)
            keys[i] = x[i * stride] ^ 0x8000000000000000u;
    } else if (d == WF_DTYPE_U64) {
        for (int64_t i = 0; i < n; i++)
            keys[i] = x[i * stride];
    } else if (d == WF_DTYPE_C64) {
        for (int64_t i = 0; i < n; i++)
            keys[i] = key_of_c64(x[i * stride]);
    } else {
        for (int64_t i = 0; i < n; i++)
            keys[i] = key_of_f64(x[i * stride]);
    }
}

static void store_keys32(wf_dtype d, const uint32_t *keys, int64_t n, char *row, int64_t stride)
{
    switch (d) {
    case WF_DTYPE_BOOL:
    case WF_DTYPE_U8:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)row)[i * stride] = (uint8_t)keys[i];
        break;
    case WF_DTYPE_I8:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)row)[i * stride] = (uint8_t)(keys[i] ^ 0x80u);
        break;
    case WF_DTYPE_I16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)row)[i * stride] = (uint16_t)(keys[i] ^ 0x8000u);
        break;
    case WF_DTYPE_U16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)row)[i * stride] = (uint16_t)keys[i];
        break;
    case WF_DTYPE_U32:
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)row)[i * stride] = keys[i];
        break;
    case WF_DTYPE_I32:
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)row)[i * stride] = keys[i] ^ 0x80000000u;
        break;
    case WF_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)row)[i * stride] = (uint16_t)half_of_key(keys[i], 0x7e00u);
        break;
    case WF_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)row)[i * stride] = (uint16_t)half_of_key(keys[i], 0x7fc0u);
        break;
    default:
        if (stride == 1 && wf__sort_avx2_usable()) {
            wf__f32_of_keys_avx2(keys, (uint32_t *)row, n);
            break;
        }
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)row)[i * stride] = f32_of_key(keys[i]);
        break;
    }
}

static void store_keys64(wf_dtype d, const uint64_t *keys, int64_t n, char *row, int64_t stride)
{
    uint64_t *x = (uint64_t *)row;
    if (d == WF_DTYPE_I64) {
        for (int64_t i = 0; i < n; i++)
            x[i * stride] = keys[i] ^ 0x8000000000000000u;
    } else if (d == WF_DTYPE_U64) {
        for (int64_t i = 0; i < n; i++)
            x[i * stride] = keys[i];
    } else if (d == WF_DTYPE_C64) {
        for (int64_t i = 0; i < n; i++)
            x[i * stride] = c64_of_key(keys[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            x[i * stride] = f64_of_key(keys[i]);
    }
}

/* ---------------------------------------------------------------- sorting */

/* LSD radix sort of v[0 .. n) by NBYTES key bytes (BYTE(x, b) is byte b,
 * least significant first), stable; tmp has room for n; n <= UINT32_MAX
 * (32-bit counts, and the histogram loop unrolled over the bytes: about a
 * fifth faster on rows of 1K-64K float32 than 64-bit counts in a loop). */
#define RADIX_SORT(NAME, T, NBYTES, BYTE)                                                   \
    static void NAME(T *v, T *tmp, int64_t n)                                               \
    {                                                                                       \
        uint32_t hist[NBYTES][256];                                                         \
        memset(hist, 0, sizeof hist);                                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T x = v[i];                                                               \
            _Pragma("GCC unroll 8") for (int b = 0; b < NBYTES; b++) hist[b][BYTE(x, b)]++; \
        }                                                                                   \
        T *src = v, *dst = tmp;                                                             \
        for (int b = 0; b < NBYTES; b++) {                                                  \
            if (n == 0 || hist[b][BYTE(v[0], b)] == n)                                      \
                continue; /* every key has this byte */                                     \
            uint32_t offset[256], sum = 0;                                                  \
            for (int c = 0; c < 256; c++) {                                                 \
                offset[c] = sum;                                                            \
                sum += hist[b][c];                                                          \
            }                                                                               \
            for (int64_t i = 0; i < n; i++)                                                 \
                dst[offset[BYTE(src[i], b)]++] = src[i];                                    \
            T *swap = src;                                                                  \
            src = dst;                                                                      \
            dst = swap;                                                                     \
        }                                                                                   \
        if (src != v)                                                                       \
            memcpy(v, src, (size_t)n * sizeof(T));                                          \
    }

#define BYTE_OF(x, b) ((unsigned)((x) >> (8 * (b))) & 255u)
#define PACKED_KEY_BYTE(x, b) ((unsigned)((x) >> (32 + 8 * (b))) & 255u)
#define PAIR_KEY_BYTE(x, b) ((unsigned)((x).key >> (8 * (b))) & 255u)
#define PAIR_INDEX_BYTE(x, b) ((unsigned)((x).index >> (8 * (b))) & 255u)
RADIX_SORT(radix_u32, uint32_t, 4, BYTE_OF)
RADIX_SORT(radix_u64, uint64_t, 8, BYTE_OF)
RADIX_SORT(radix_packed, uint64_t, 4, PACKED_KEY_BYTE)
RADIX_SORT(radix_pair_key, key_pair, 8, PAIR_KEY_BYTE)
RADIX_SORT(radix_pair_index, key_pair, 8, PAIR_INDEX_BYTE)

#define LESS_PLAIN(a, b) ((a) < (b))
#define LESS_PAIR(a, b) ((a).key < (b).key || ((a).key == (b).key && (a).index < (b).index))

/* Insertion sort (stable) of v[0 .. n). */
#define INSERTION_SORT(NAME, T, LESS)                                                       \
    static void NAME(T *v, int64_t n)                                                       \
    {                                                                                       \
        for (int64_t i = 1; i < n; i++) {                                                   \
            const T x = v[i];                                                               \
            int64_t j = i;                                                                  \
            for (; j > 0 && LESS(x, v[j - 1]); j--)                                         \
                v[j] = v[j - 1];                                                            \
            v[j] = x;                                                                       \
        }                                                                                   \
    }
INSERTION_SORT(insertion_u32, uint32_t, LESS_PLAIN)
INSERTION_SORT(insertion_u64, uint64_t, LESS_PLAIN)
INSERTION_SORT(insertion_pair, key_pair, LESS_PAIR)

/* Full sorts of distinct elements (every byte counts). */
static void sort_all_u64(uint64_t *v, uint64_t *tmp, int64_t n)
{
    if (n <= INSERTION_MAX)
        insertion_u64(v, n);
    else
        radix_u64(v, tmp, n);
}
static void sort_all_pair(key_pair *v, key_pair *tmp, int64_t n)
{
    if (n <= INSERTION_MAX) {
        insertion_pair(v, n);
        return;
    }
    radix_pair_index(v, tmp, n);
    radix_pair_key(v, tmp, n);
}

/* Introselect: rearranges distinct v[0 .. n) so that v[kth] is the element
 * of rank kth, smaller ones before it, larger after. */
#define SELECT(NAME, T, LESS, SORT_ALL)                                                     \
    static void NAME(T *v, T *tmp, int64_t n, int64_t kth)                                  \
    {                                                                                       \
        int64_t lo = 0, hi = n - 1;                                                         \
        int depth = 4;                                                                      \
        for (int64_t m = n; m > 1; m >>= 1)                                                 \
            depth += 2;                                                                     \
        while (hi > lo) {                                                                   \
            if (hi - lo < INSERTION_MAX || depth-- == 0) {                                  \
                SORT_ALL(v + lo, tmp, hi - lo + 1);                                         \
                return;                                                                     \
            }                                                                               \
            const int64_t mid = lo + (hi - lo) / 2;                                         \
            T x = v[lo], y = v[mid], z = v[hi], pivot;                                      \
            if (LESS(x, y))                                                                 \
                pivot = LESS(y, z) ? y : (LESS(x, z) ? z : x);                              \
            else                                                                            \
                pivot = LESS(x, z) ? x : (LESS(y, z) ? z : y);                              \
            int64_t i = lo, j = hi;                                                         \
            while (i <= j) {                                                                \
                while (LESS(v[i], pivot))                                                   \
                    i++;                                                                    \
                while (LESS(pivot, v[j]))                                                   \
                    j--;                                                                    \
                if (i <= j) {                                                               \
                    T t = v[i];                                                             \
                    v[i++] = v[j];                                                          \
                    v[j--] = t;                                                             \
                }                                                                           \
            }                                                                               \
            if (kth <= j)                                                                   \
                hi = j;                                                                     \
            else if (kth >= i)                                                              \
                lo = i;                                                                     \
            else                                                                            \
                return;                                                                     \
        }                                                                                   \
    }
SELECT(select_u64, uint64_t, LESS_PLAIN, sort_all_u64)
SELECT(select_pair, key_pair, LESS_PAIR, sort_all_pair)

/* ---------------------------------------------------------------- one long row, in parallel
 *
 * A row of at least MSD_MIN elements, when there are fewer rows than
 * threads, is sorted (but by the AVX2 split below, and argsort's 32-bit
 * keys by the parallel LSD sort below) by one most-significant-digit pass
 * first: the 16 key
 * bits below the highest bit in which keys differ pick one of 65,536
 * buckets; chunks of the row count their digits, then place their
 * elements (stably: chunk after chunk, each in order) into the buckets;
 * the buckets are then sorted on their own, in parallel, by the row
 * kernel's LSD radix sort. A stable sort has one result, so this gives the
 * serial path's bits whatever the number of chunks. */

enum { MSD_BITS = 16, MSD_BUCKETS = 1 << MSD_BITS, MSD_MIN = 1 << 17, MSD_MAX_CHUNKS = 16 };

struct msd_job {
    void *v, *tmp;
    int64_t n, nchunks, chunk;
    int shift;
    uint64_t *spread;      /* per chunk: OR of (key ^ first key) */
    int64_t *counts;       /* nchunks x MSD_BUCKETS: counts, then placement offsets */
    int64_t *bucket_start; /* MSD_BUCKETS + 1 */
};

#define MSD_SORT(NAME, T, KEY64, INSERT, LSD)                                               \
    static void NAME##_spread(void *arg, int64_t begin, int64_t end)                        \
    {                                                                                       \
        struct msd_job *job = arg;                                                          \
        const T *v = job->v;                                                                \
        const uint64_t first = KEY64(v[0]);                                                 \
        for (int64_t j = begin; j < end; j++) {                                             \
            const int64_t lo = j * job->chunk;                                              \
            const int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;         \
            uint64_t s = 0;                                                                 \
            for (int64_t i = lo; i < hi; i++)                                               \
                s |= KEY64(v[i]) ^ first;                                                   \
            job->spread[j] = s;                                                             \
        }                                                                                   \
    }                                                                                       \
    static void NAME##_count(void *arg, int64_t begin, int64_t end)                         \
    {                                                                                       \
        struct msd_job *job = arg;                                                          \
        const T *v = job->v;                                                                \
        for (int64_t j = begin; j < end; j++) {                                             \
            int64_t *c = job->counts + j * MSD_BUCKETS;                                     \
            const int64_t lo = j * job->chunk;                                              \
            const int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;         \
            for (int64_t i = lo; i < hi; i++)                                               \
                c[(KEY64(v[i]) >> job->shift) & (MSD_BUCKETS - 1)]++;                       \
        }                                                                                   \
    }                                                                                       \
    static void NAME##_place(void *arg, int64_t begin, int64_t end)                         \
    {                                                                                       \
        struct msd_job *job = arg;                                                          \
        const T *v = job->v;                                                                \
        T *tmp = job->tmp;                                                                  \
        for (int64_t j = begin; j < end; j++) {                                             \
            int64_t *at = job->counts + j * MSD_BUCKETS;                                    \
            const int64_t lo = j * job->chunk;                                              \
            const int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;         \
            for (int64_t i = lo; i < hi; i++)                                               \
                tmp[at[(KEY64(v[i]) >> job->shift) & (MSD_BUCKETS - 1)]++] = v[i];          \
        }                                                                                   \
    }                                                                                       \
    static void NAME##_finish(void *arg, int64_t begin, int64_t end)                        \
    {                                                                                       \
        struct msd_job *job = arg;                                                          \
        T *v = job->v, *tmp = job->tmp;                                                     \
        for (int64_t d = begin; d < end; d++) {                                             \
            const int64_t s = job->bucket_start[d], len = job->bucket_start[d + 1] - s;     \
            if (len <= INSERTION_MAX)                                                       \
                INSERT(tmp + s, len);                                                       \
            else                                                                            \
                LSD(tmp + s, v + s, len);                                                   \
            memcpy(v + s, tmp + s, (size_t)len * sizeof(T));                                \
        }                                                                                   \
    }                                                                                       \
    static bool NAME(T *v, T *tmp, int64_t n)                                               \
    {                                                                                       \
        return msd_sort(v, tmp, n, NAME##_spread, NAME##_count, NAME##_place,               \
                        NAME##_finish);                                                     \
    }

/* The MSD pass and the bucket sorts; false (nothing done) out of memory. */
static bool msd_sort(void *v, void *tmp, int64_t n, wf_parallel_fn spread, wf_parallel_fn count,
                     wf_parallel_fn place, wf_parallel_fn finish)
{
    struct msd_job job = {.v = v, .tmp = tmp, .n = n};
    job.nchunks = wf__pool_size() < MSD_MAX_CHUNKS ? wf__pool_size() : MSD_MAX_CHUNKS;
    job.chunk = (n + job.nchunks - 1) / job.nchunks;
    job.spread = wf__calloc((size_t)job.nchunks, sizeof *job.spread);
    job.counts = wf__calloc((size_t)job.nchunks * MSD_BUCKETS, sizeof *job.counts);
    job.bucket_start = wf__malloc((MSD_BUCKETS + 1) * sizeof *job.bucket_start);
    if (!job.spread || !job.counts || !job.bucket_start) {
        free(job.spread);
        free(job.counts);
        free(job.bucket_start);
        return false;
    }
    wf__parallel_for(job.nchunks, 1, spread, &job);
    uint64_t all = 0;
    for (int64_t j = 0; j < job.nchunks; j++)
        all |= job.spread[j];
    if (all != 0) { /* else every key is equal: already sorted */
        int high = 63;
        while (!((all >> high) & 1u))
            high--;
        job.shift = high >= MSD_BITS - 1 ? high - (MSD_BITS - 1) : 0;
        wf__parallel_for(job.nchunks, 1, count, &job);
        int64_t at = 0; /* bucket-major, chunk-minor: stable placement */
        for (int64_t d = 0; d < MSD_BUCKETS; d++) {
            job.bucket_start[d] = at;
            for (int64_t j = 0; j < job.nchunks; j++) {
                const int64_t c = job.counts[j * MSD_BUCKETS + d];
                job.counts[j * MSD_BUCKETS + d] = at;
                at += c;
            }
        }
        job.bucket_start[MSD_BUCKETS] = at;
        wf__parallel_for(job.nchunks, 1, place, &job);
        wf__parallel_for(MSD_BUCKETS, 256, finish, &job);
    }
    free(job.spread);
    free(job.counts);
    free(job.bucket_start);
    return true;
}

/* ---------------------------------------------------------------- one long row, LSD in parallel
 *
 * The LSD radix sort of RADIX_SORT with each pass split over the pool:
 * chunks of the array count their digits, then place their elements
 * (bucket after bucket, chunk after chunk within a bucket: stably) into the
 * other array. A stable sort has one result, so the bits are the serial
 * sort's whatever the number of chunks. Each pass scatters to 256 buckets
 * (their write positions stay in L1), where the MSD pass above scatters to
 * 65,536 (a write missing L2 each time): argsort of 16M float32 on 2
 * threads, Zen 4, 6 alternating runs, 0.138-0.188 s (median 0.158) against
 * the MSD pass's 0.162-0.192 (0.183). 11-bit digits (3 passes) measured no
 * faster. Used for argsort's (32-bit key, index) words; the wider
 * elements keep the MSD pass (8 passes of 16 bytes would move more). */

enum { LSD_BITS = 8, LSD_BUCKETS = 1 << LSD_BITS, LSD_MAX_CHUNKS = 64 };

struct lsd_job {
    const void *src;
    void *dst;
    int64_t n, chunk;
    int digit;
    int64_t (*counts)[LSD_BUCKETS]; /* per chunk: counts, then placement offsets */
};

#define PARALLEL_LSD(NAME, T, NDIGITS, DIGIT)                                                 \
    static void NAME##_count(void *arg, int64_t begin, int64_t end)                         \
    {                                                                                       \
        struct lsd_job *job = arg;                                                          \
        const T *v = job->src;                                                              \
        for (int64_t j = begin; j < end; j++) {                                             \
            int64_t *c = job->counts[j];                                                    \
            memset(c, 0, LSD_BUCKETS * sizeof *c);                                          \
            const int64_t lo = j * job->chunk;                                              \
            const int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;         \
            for (int64_t i = lo; i < hi; i++)                                               \
                c[DIGIT(v[i], job->digit)]++;                                               \
        }                                                                                   \
    }                                                                                       \
    static void NAME##_place(void *arg, int64_t begin, int64_t end)                         \
    {                                                                                       \
        struct lsd_job *job = arg;                                                          \
        const T *v = job->src;                                                              \
        T *dst = job->dst;                                                                  \
        for (int64_t j = begin; j < end; j++) {                                             \
            int64_t *at = job->counts[j];                                                   \
            const int64_t lo = j * job->chunk;                                              \
            const int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;         \
            for (int64_t i = lo; i < hi; i++)                                               \
                dst[at[DIGIT(v[i], job->digit)]++] = v[i];                                  \
        }                                                                                   \
    }                                                                                       \
    static bool NAME(T *v, T *tmp, int64_t n)                                               \
    {                                                                                       \
        return lsd_sort(v, tmp, n, sizeof(T), NDIGITS, NAME##_count, NAME##_place);         \
    }

/* The passes; false (nothing done) out of memory. */
static bool lsd_sort(void *v, void *tmp, int64_t n, size_t size, int ndigits,
                     wf_parallel_fn count, wf_parallel_fn place)
{
    int64_t nchunks = wf__pool_size() < LSD_MAX_CHUNKS ? wf__pool_size() : LSD_MAX_CHUNKS;
    struct lsd_job job = {.src = v, .dst = tmp, .n = n, .chunk = (n + nchunks - 1) / nchunks};
    nchunks = (n + job.chunk - 1) / job.chunk;
    job.counts = wf__malloc((size_t)nchunks * sizeof *job.counts);
    if (!job.counts)
        return false;
    for (job.digit = 0; job.digit < ndigits; job.digit++) {
        wf__parallel_for(nchunks, 1, count, &job);
        int64_t at = 0;
        bool one_bucket = false; /* every element has this digit: nothing to do */
        for (int c = 0; c < LSD_BUCKETS; c++) {
            const int64_t start = at;
            for (int64_t j = 0; j < nchunks; j++) {
                const int64_t k = job.counts[j][c];
                job.counts[j][c] = at;
                at += k;
            }
            one_bucket = one_bucket || at - start == n;
        }
        if (one_bucket)
            continue;
        wf__parallel_for(nchunks, 1, place, &job);
        const void *swap = job.src;
        job.src = job.dst;
        job.dst = (void *)swap;
    }
    if (job.src != v)
        memcpy(v, job.src, (size_t)n * size);
    free(job.counts);
    return true;
}

#define KEY_PLAIN(x) ((uint64_t)(x))
#define KEY_PAIR(x) ((x).key)
MSD_SORT(msd_u32, uint32_t, KEY_PLAIN, insertion_u32, radix_u32)
MSD_SORT(msd_u64, uint64_t, KEY_PLAIN, insertion_u64, radix_u64)
MSD_SORT(msd_pair, key_pair, KEY_PAIR, insertion_pair, radix_pair_key)
#define PACKED_KEY_DIGIT(x, d) ((unsigned)((x) >> (32 + LSD_BITS * (d))) & (LSD_BUCKETS - 1u))
PARALLEL_LSD(lsd_packed, uint64_t, 4, PACKED_KEY_DIGIT)

/* ---------------------------------------------------------------- one long row, AVX2
 *
 * The AVX2 quicksort of 32-bit keys (sort_avx2.c) takes about half the
 * radix sort's CPU time, measured side by side on Zen 3 (uniform float32,
 * whole wf_sort calls: 1024 rows of 4096 0.036 s against 0.065 s, one row
 * of 16M 0.24 s against 0.54 s), so sort_row uses it for float32,
 * int32 and uint32 wherever it may run. Keys of 8- and 16-bit dtypes stay
 * with the radix sort: one or two counting passes. A long row (see
 * one_row_at_a_time) is split by the quicksort's own partitions into up
 * to LONG_ROW_PARTS_PER_THREAD parts a thread (the first few levels: the
 * first serially, its two parts' further splits side by side), and the
 * parts are sorted in parallel. The sorted keys are unique, so any split
 * gives the same bits. */

enum { LONG_ROW_PARTS_PER_THREAD = 4, LONG_ROW_MAX_PARTS = 256 };

/* From this length on, a contiguous float32 row's keys are made by the
 * sort's first partition and turned back into floats by its leaves
 * (wf__sort_f32_avx2, wf__sort_u32_avx2's to_f32), not in passes of their
 * own over the row: one row of 16M on one thread (Intel Xeon, AVX-512),
 * 0.093-0.096 s -> 0.089-0.090 s. Shorter rows are in cache for those
 * passes, which then cost less than the leaves' share (rows of 4096:
 * 0.048-0.050 s with the passes, 0.052-0.054 s without). AVX-512 only:
 * the AVX2 variant has no such partition, and the leaves alone gained
 * nothing there (16M: 0.111-0.113 s either way; rows of 65536 1-3%
 * slower). */
enum { FUSED_KEYS_MIN = 65536 };

struct long_row_job {
    uint32_t *keys;
    int64_t (*parts)[2];
    bool to_f32;
};

static void sort_long_row_parts(void *arg, int64_t begin, int64_t end)
{
    struct long_row_job *job = arg;
    for (int64_t i = begin; i < end; i++)
        wf__sort_u32_avx2(job->keys + job->parts[i][0], job->parts[i][1] - job->parts[i][0],
                          job->to_f32);
}

/* The split's second stage: each part of the first split cut into up to
 * `per` parts, the first split's parts side by side on the pool (slots
 * parts[i * per ..] for part i). */
struct long_row_split {
    uint32_t *keys;
    int64_t (*first)[2];
    int64_t (*parts)[2];
    int per;
    int counts[2];
    bool to_f32;
};

static void split_first_parts(void *arg, int64_t begin, int64_t end)
{
    struct long_row_split *job = arg;
    for (int64_t i = begin; i < end; i++) {
        const int64_t at = job->first[i][0];
        int64_t(*mine)[2] = job->parts + i * job->per;
        const int count = wf__split_u32_avx2(job->keys + at, job->first[i][1] - at, job->per,
                                             mine, job->to_f32);
        for (int j = 0; j < count; j++) {
            mine[j][0] += at;
            mine[j][1] += at;
        }
        job->counts[i] = count;
    }
}

/* to_f32: as wf__sort_u32_avx2's. f32_bits: NULL, or the contiguous
 * float32 row whose keys `keys` receives (to_f32), read by the first
 * partition (wf__split_f32_avx2: no pass of its own over a long row).
 * The split runs in two stages, the second on the pool (one row of 16M
 * float32 on 2 threads, alternated: 0.056-0.060 s with the whole split on
 * the calling thread, 0.050-0.054 s so). */
static void parallel_sort_keys32(const uint32_t *f32_bits, uint32_t *keys, int64_t n, bool to_f32)
{
    int64_t first[2][2], parts[LONG_ROW_MAX_PARTS][2];
    const int64_t want = (int64_t)wf__pool_size() * LONG_ROW_PARTS_PER_THREAD;
    const int max_parts = want < LONG_ROW_MAX_PARTS ? (int)want : LONG_ROW_MAX_PARTS;
    const int nfirst = f32_bits ? wf__split_f32_avx2(f32_bits, keys, n, 2, first)
                                : wf__split_u32_avx2(keys, n, 2, first, to_f32);
    struct long_row_split split = {
        .keys = keys, .first = first, .parts = parts, .per = max_parts / 2, .to_f32 = to_f32};
    wf__parallel_for(nfirst, 1, split_first_parts, &split);
    int count = 0; /* the parts gathered to the front (count <= each slot read) */
    for (int i = 0; i < nfirst; i++)
        for (int j = 0; j < split.counts[i]; j++) {
            parts[count][0] = parts[i * split.per + j][0];
            parts[count][1] = parts[i * split.per + j][1];
            count++;
        }
    struct long_row_job job = {.keys = keys, .parts = parts, .to_f32 = to_f32};
    wf__parallel_for(count, 1, sort_long_row_parts, &job);
}

/* ---------------------------------------------------------------- rows */

struct sort_job {
    const wf_array *a;
    wf_array *out;
    int op, axis;
    int64_t n, k, m; /* axis length, k, output axis length */
    int64_t in_stride, out_stride;
    size_t item;
    wf_dtype dtype;
    bool one_row_at_a_time; /* rows run on this thread, each sorted in parallel */
    _Atomic bool failed;
};

/* Offsets (elements) of row r's first element in a and in the output. */
static void row_offsets(const struct sort_job *job, int64_t r, int64_t *in_off, int64_t *out_off)
{
    const wf_array *a = job->a, *out = job->out;
    int64_t ia = 0, io = 0;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (d == job->axis)
            continue;
        const int64_t c = r % a->shape[d];
        r /= a->shape[d];
        ia += c * a->strides[d];
        io += c * out->strides[d];
    }
    *in_off = ia;
    *out_off = io;
}

/* ---------------------------------------------------------------- (key, index) pairs
 *
 * A row's (key, index) pairs are built, and the selected indices written,
 * in blocks of PAIR_BLOCK elements: a long row sorted on its own (see
 * one_row_at_a_time) spreads the blocks over the pool, as its sort does,
 * instead of leaving the other threads idle for a sixth of the time
 * (argsort of 16M float32, 2 threads). */

enum { PAIR_BLOCK = 4096 };

struct pair_job {
    const struct sort_job *job;
    const char *row;
    char *orow;
    uint64_t *packed; /* 32-bit keys: key << 32 | index */
    key_pair *pairs;  /* 64-bit keys */
    int64_t count;
    bool flip; /* topk: ~key, so that the largest come first */
};

static void build_pair_blocks(void *arg, int64_t begin, int64_t end)
{
    const struct pair_job *pj = arg;
    const struct sort_job *job = pj->job;
    for (int64_t b = begin; b < end; b++) {
        const int64_t lo = b * PAIR_BLOCK;
        const int64_t len = pj->count - lo < PAIR_BLOCK ? pj->count - lo : PAIR_BLOCK;
        const char *src = pj->row + lo * job->in_stride * (int64_t)job->item;
        if (pj->pairs) {
            uint64_t keys[PAIR_BLOCK];
            load_keys64(job->dtype, src, job->in_stride, len, keys);
            for (int64_t i = 0; i < len; i++)
                pj->pairs[lo + i] = (key_pair){pj->flip ? ~keys[i] : keys[i], (uint64_t)(lo + i)};
        } else {
            uint32_t keys[PAIR_BLOCK];
            load_keys32(job->dtype, src, job->in_stride, len, keys);
            for (int64_t i = 0; i < len; i++)
                pj->packed[lo + i] = ((uint64_t)(pj->flip ? ~keys[i] : keys[i]) << 32) |
                                     (uint64_t)(lo + i);
        }
    }
}

static void write_selection_blocks(void *arg, int64_t begin, int64_t end);

/* Runs fn over the blocks of pj->count elements: on the pool for a long
 * row sorted on its own, else here. */
static void over_pair_blocks(struct pair_job *pj, wf_parallel_fn fn)
{
    const int64_t blocks = (pj->count + PAIR_BLOCK - 1) / PAIR_BLOCK;
    if (pj->job->one_row_at_a_time)
        wf__parallel_for(blocks, 1, fn, pj);
    else
        fn(pj, 0, blocks);
}

/* pairs[i] (64-bit keys) or packed[i] (32-bit) = (key of element i, i). */
static void build_pairs(const struct sort_job *job, const char *row, uint64_t *packed,
                        key_pair *pairs, bool flip)
{
    struct pair_job pj = {
        .job = job, .row = row, .packed = packed, .pairs = pairs, .count = job->n, .flip = flip};
    over_pair_blocks(&pj, build_pair_blocks);
}

/* Writes the selected rows' values (copied from the row) or indices. */
static void write_selection(const struct sort_job *job, const char *row, char *orow,
                            const uint64_t *packed, const key_pair *pairs, int64_t count)
{
    struct pair_job pj = {.job = job,
                          .row = row,
                          .orow = orow,
                          .packed = (uint64_t *)packed,
                          .pairs = (key_pair *)pairs,
                          .count = count};
    over_pair_blocks(&pj, write_selection_blocks);
}

static void write_selection_blocks(void *arg, int64_t begin, int64_t end)
{
    const struct pair_job *pj = arg;
    const struct sort_job *job = pj->job;
    const char *row = pj->row;
    char *orow = pj->orow;
    const uint64_t *packed = pj->packed;
    const key_pair *pairs = pj->pairs;
    const bool values = job->op == WF_PARTITION_VALUES || job->op == WF_TOPK_VALUES;
    const int64_t item = (int64_t)job->item;
    const int64_t lo = begin * PAIR_BLOCK;
    const int64_t hi = end * PAIR_BLOCK < pj->count ? end * PAIR_BLOCK : pj->count;
    for (int64_t i = lo; i < hi; i++) {
        const int64_t index = packed ? (int64_t)(packed[i] & 0xffffffffu) : (int64_t)pairs[i].index;
        if (values)
            memcpy(orow + i * job->out_stride * item, row + index * job->in_stride * item,
                   job->item);
        else
            ((uint32_t *)orow)[i * job->out_stride] = (uint32_t)index; /* < 2^31 */
    }
}

/* topk of a row of 32-bit keys, AVX2: the same k pairs (flipped key,
 * index) in the same order as the pair selection below, found through the
 * keys alone: the flipped key of rank k - 1 (AVX2 quickselect of a copy)
 * is a threshold; the pairs are every key below it and, in index order,
 * as many keys equal to it as make k; then those k are sorted. Measured
 * (CPU time, one thread, Zen 3) on 512 rows of 50,000 float32, k = 50:
 * 0.09 s against 0.20 s for the selection over 64-bit pairs. buf and
 * tmp: room for 16 n bytes. */
static void topk_by_threshold(const struct sort_job *job, const char *row, char *orow,
                              void *buf, void *tmp)
{
    const int64_t n = job->n, k = job->k;
    if (k == 0)
        return;
    uint32_t *keys = tmp, *selected = keys + n;
    uint64_t *packed = buf, *scratch = (uint64_t *)tmp + n;
    load_keys32(job->dtype, row, job->in_stride, n, keys);
    wf__flip_keys_u32_avx2(keys, selected, n);
    uint32_t threshold = UINT32_MAX;
    if (k < n) {
        wf__select_u32_avx2(selected, n, k - 1);
        threshold = selected[k - 1];
    }
    const int64_t below = wf__count_below_u32_avx2(keys, n, threshold);
    wf__collect_below_u32_avx2(keys, n, threshold, k - below, k, packed);
    sort_all_u64(packed, scratch, k);
    write_selection(job, row, orow, packed, NULL, k);
}

static void sort_row(const struct sort_job *job, const char *row, char *orow, void *buf,
                     void *tmp)
{
    const int64_t n = job->n;
    const bool wide = wide_keys(job->dtype);
    if (job->op == WF_SORT_VALUES) {
        if (wide) {
            uint64_t *k = buf;
            load_keys64(job->dtype, row, job->in_stride, n, k);
            if (!job->one_row_at_a_time || !msd_u64(k, tmp, n))
                sort_all_u64(k, tmp, n);
            store_keys64(job->dtype, k, n, orow, job->out_stride);
        } else {
            const bool avx2 = keys32_are_full_width(job->dtype) && wf__sort_avx2_usable();
            /* a contiguous output row of 32-bit values holds the keys
             * itself (no pages of buf to touch: a sixth of the time on 16M) */
            uint32_t *k = avx2 && job->out_stride == 1 ? (uint32_t *)orow : buf;
            /* a long float32 row: keys made by the first partition and
             * turned back into floats where the sort leaves them */
            const bool to_f32 = k == (uint32_t *)orow && job->dtype == WF_DTYPE_F32 &&
                                n >= FUSED_KEYS_MIN && wf__sort_avx512_usable();
            if (to_f32 && job->in_stride == 1) {
                if (job->one_row_at_a_time)
                    parallel_sort_keys32((const uint32_t *)row, k, n, true);
                else
                    wf__sort_f32_avx2((const uint32_t *)row, k, n);
                return;
            }
            load_keys32(job->dtype, row, job->in_stride, n, k);
            if (avx2) {
                if (job->one_row_at_a_time)
                    parallel_sort_keys32(NULL, k, n, to_f32);
                else
                    wf__sort_u32_avx2(k, n, to_f32);
            } else if (n <= INSERTION_MAX) {
                insertion_u32(k, n);
            } else if (!job->one_row_at_a_time || !msd_u32(k, tmp, n)) {
                radix_u32(k, tmp, n);
            }
            if (!to_f32)
                store_keys32(job->dtype, k, n, orow, job->out_stride);
        }
        return;
    }
    const bool topk = job->op == WF_TOPK_VALUES || job->op == WF_TOPK_INDICES;
    if (topk && !wide && wf__sort_avx2_usable()) {
        topk_by_threshold(job, row, orow, buf, tmp);
        return;
    }
    /* (key, index) pairs; topk flips the keys so the largest come first */
    uint64_t *packed = NULL;
    key_pair *pairs = NULL;
    if (wide)
        pairs = buf;
    else
        packed = buf;
    build_pairs(job, row, packed, pairs, topk);
    if (job->op == WF_SORT_INDICES) {
        if (wide && n <= INSERTION_MAX)
            insertion_pair(pairs, n);
        else if (wide && (!job->one_row_at_a_time || !msd_pair(pairs, tmp, n)))
            radix_pair_key(pairs, tmp, n); /* stable: ties stay in index order */
        else if (!wide && n <= INSERTION_MAX)
            insertion_u64(packed, n);
        else if (!wide && (!job->one_row_at_a_time || !lsd_packed(packed, tmp, n)))
            radix_packed(packed, tmp, n);
        write_selection(job, row, orow, packed, pairs, n);
        return;
    }
    if (!topk) { /* partition */
        if (wide)
            select_pair(pairs, tmp, n, job->k);
        else
            select_u64(packed, tmp, n, job->k);
        write_selection(job, row, orow, packed, pairs, n);
        return;
    }
    const int64_t k = job->k;
    if (k == 0)
        return;
    if (wide) {
        if (k < n)
            select_pair(pairs, tmp, n, k - 1);
        sort_all_pair(pairs, tmp, k);
    } else {
        if (k < n)
            select_u64(packed, tmp, n, k - 1);
        sort_all_u64(packed, tmp, k);
    }
    write_selection(job, row, orow, packed, pairs, k);
}

/* A row's key buffers come from weft's buffer cache: from malloc, a long
 * row's two (128 MB each for 16M elements) were mapped afresh and faulted
 * in at every call, in the kernel and mostly serially (argsort of 16M
 * float32: 15% of its time, and no gain from a second thread). */
static void sort_chunk(void *arg, int64_t begin, int64_t end)
{
    struct sort_job *job = arg;
    const size_t bytes = (size_t)(job->n > 0 ? job->n : 1) * sizeof(key_pair);
    /* A failure is reported once, by the op on its caller's thread, not
     * left in a pool thread's error state. */
    wf_error_state saved;
    wf__error_save(&saved);
    wf_buffer *buf_memory = wf__buffer_alloc(bytes);
    wf_buffer *tmp_memory = buf_memory ? wf__buffer_alloc(bytes) : NULL;
    wf__error_restore(&saved);
    if (!tmp_memory) {
        job->failed = true;
        wf__buffer_release(buf_memory);
        return;
    }
    void *buf = buf_memory->data, *tmp = tmp_memory->data;
    const char *src = wf__array_data_ptr(job->a);
    char *dst = wf__array_data_ptr(job->out);
    const size_t out_item = wf_dtype_size(job->out->dtype);
    for (int64_t r = begin; r < end; r++) {
        int64_t ia, io;
        row_offsets(job, r, &ia, &io);
        sort_row(job, src + ia * (int64_t)job->item, dst + io * (int64_t)out_item, buf, tmp);
    }
    wf__buffer_release(buf_memory);
    wf__buffer_release(tmp_memory);
}

wf_status wf__cpu_sort(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_sort_params *p = params;
    const wf_array *a = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct sort_job job = {
        .a = a,
        .out = out,
        .op = p->op,
        .axis = p->axis,
        .n = a->shape[p->axis],
        .k = p->k,
        .m = out->shape[p->axis],
        .in_stride = a->strides[p->axis],
        .out_stride = out->strides[p->axis],
        .item = wf_dtype_size(a->dtype),
        .dtype = a->dtype,
    };
    const int64_t rows = out->size / job.m;
    const int64_t per_row = job.n * 16 + 64;
    const int64_t min_chunk = per_row >= WF_CPU_CHUNK_COSTLY ? 1 : WF_CPU_CHUNK_COSTLY / per_row;
    job.one_row_at_a_time = rows < wf__pool_size() && job.n >= MSD_MIN &&
                            (p->op == WF_SORT_VALUES || p->op == WF_SORT_INDICES);
    if (job.one_row_at_a_time)
        sort_chunk(&job, 0, rows);
    else
        wf__parallel_for(rows, min_chunk, sort_chunk, &job);
    if (job.failed)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory sorting rows of %lld",
                         out->prim ? out->prim->name : "sort", (long long)job.n);
    return WF_OK;
}
