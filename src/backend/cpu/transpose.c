/* Block transposes for the 2-d tiles of the shared walk (iter.c) and the
 * gathers of the rows engine: blocks moved through registers, the edges
 * element by element. 1- and 2-byte elements go in 8 x 8 blocks and 4-byte
 * ones in 4 x 4 blocks with SSE2 (part of every x86-64); AVX2 moves 8 x 8
 * blocks of 4-byte and 4 x 4 of 8-byte elements, AVX-512 16 x 16 and 8 x 8.
 * The variant is the active one of wf__vm_isa_active. Copies only: every
 * variant gives the same bytes. */
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"

/* dst[j * ld_dst + i] = src[i * ld_src + j], element by element. */
#define TRANSPOSE_SCALAR(NAME, T)                                                          \
    static void NAME(int64_t rows, int64_t cols, const T *src, int64_t ld_src, T *dst,     \
                     int64_t ld_dst)                                                       \
    {                                                                                      \
        for (int64_t i = 0; i < rows; i++)                                                 \
            for (int64_t j = 0; j < cols; j++)                                             \
                dst[j * ld_dst + i] = src[i * ld_src + j];                                 \
    }
TRANSPOSE_SCALAR(transpose_1, uint8_t)
TRANSPOSE_SCALAR(transpose_2, uint16_t)
TRANSPOSE_SCALAR(transpose_4, uint32_t)
TRANSPOSE_SCALAR(transpose_8, uint64_t)

/* Whole B x B blocks, then the edges element by element. */
#define TRANSPOSE_BLOCKED(ATTR, NAME, T, B, BLOCK, EDGE)                                   \
    ATTR static void NAME(int64_t rows, int64_t cols, const T *src, int64_t ld_src,        \
                          T *dst, int64_t ld_dst)                                          \
    {                                                                                      \
        const int64_t rb = rows - rows % B, cb = cols - cols % B;                          \
        for (int64_t i = 0; i < rb; i += B)                                                \
            for (int64_t j = 0; j < cb; j += B)                                            \
                BLOCK(src + i * ld_src + j, ld_src, dst + j * ld_dst + i, ld_dst);         \
        EDGE(rb, cols - cb, src + cb, ld_src, dst + cb * ld_dst, ld_dst);                  \
        EDGE(rows - rb, cols, src + rb * ld_src, ld_src, dst + rb, ld_dst);                \
    }

#if defined(__x86_64__) && defined(__GNUC__)
#define TRANSPOSE_HAVE_X86 1
#include <immintrin.h>

#define ATTR_AVX2 __attribute__((target("avx2")))
#define ATTR_AVX512 __attribute__((target("avx512f")))
#define NO_ATTR

/* The unaligned 128-bit load and store of the element at p. */
static inline __m128i load_128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline void store_128(void *p, __m128i v) { _mm_storeu_si128((__m128i *)p, v); }

/* 8 x 8 bytes: rows interleaved by bytes, pairs, quads; each result
 * register holds two columns (low and high 8 bytes). */
static inline void block_1_8x8(const uint8_t *src, int64_t ls, uint8_t *dst, int64_t ld)
{
    __m128i r[8], a[4], b[4], c[4];
    for (int k = 0; k < 8; k++)
        r[k] = _mm_loadl_epi64((const __m128i *)(const void *)(src + k * ls));
    for (int k = 0; k < 4; k++)
        a[k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    b[0] = _mm_unpacklo_epi16(a[0], a[1]);
    b[1] = _mm_unpackhi_epi16(a[0], a[1]);
    b[2] = _mm_unpacklo_epi16(a[2], a[3]);
    b[3] = _mm_unpackhi_epi16(a[2], a[3]);
    c[0] = _mm_unpacklo_epi32(b[0], b[2]);
    c[1] = _mm_unpackhi_epi32(b[0], b[2]);
    c[2] = _mm_unpacklo_epi32(b[1], b[3]);
    c[3] = _mm_unpackhi_epi32(b[1], b[3]);
    for (int k = 0; k < 4; k++) {
        _mm_storel_epi64((__m128i *)(void *)(dst + 2 * k * ld), c[k]);
        _mm_storel_epi64((__m128i *)(void *)(dst + (2 * k + 1) * ld),
                         _mm_unpackhi_epi64(c[k], c[k]));
    }
}

/* 8 x 8 2-byte elements: interleaved by elements, pairs, quads. */
static inline void block_2_8x8(const uint16_t *src, int64_t ls, uint16_t *dst, int64_t ld)
{
    __m128i r[8], a[8], b[8];
    for (int k = 0; k < 8; k++)
        r[k] = load_128(src + k * ls);
    for (int k = 0; k < 8; k += 2) {
        a[k] = _mm_unpacklo_epi16(r[k], r[k + 1]);
        a[k + 1] = _mm_unpackhi_epi16(r[k], r[k + 1]);
    }
    for (int h = 0; h < 8; h += 4) { /* rows h .. h + 3 */
        b[h] = _mm_unpacklo_epi32(a[h], a[h + 2]);
        b[h + 1] = _mm_unpackhi_epi32(a[h], a[h + 2]);
        b[h + 2] = _mm_unpacklo_epi32(a[h + 1], a[h + 3]);
        b[h + 3] = _mm_unpackhi_epi32(a[h + 1], a[h + 3]);
    }
    for (int k = 0; k < 4; k++) {
        store_128(dst + 2 * k * ld, _mm_unpacklo_epi64(b[k], b[k + 4]));
        store_128(dst + (2 * k + 1) * ld, _mm_unpackhi_epi64(b[k], b[k + 4]));
    }
}

/* 4 x 4 4-byte elements. */
static inline void block_4_4x4(const uint32_t *src, int64_t ls, uint32_t *dst, int64_t ld)
{
    const __m128i r0 = load_128(src), r1 = load_128(src + ls);
    const __m128i r2 = load_128(src + 2 * ls), r3 = load_128(src + 3 * ls);
    const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpackhi_epi32(r0, r1);
    const __m128i t2 = _mm_unpacklo_epi32(r2, r3), t3 = _mm_unpackhi_epi32(r2, r3);
    store_128(dst, _mm_unpacklo_epi64(t0, t2));
    store_128(dst + ld, _mm_unpackhi_epi64(t0, t2));
    store_128(dst + 2 * ld, _mm_unpacklo_epi64(t1, t3));
    store_128(dst + 3 * ld, _mm_unpackhi_epi64(t1, t3));
}

/* 8 x 8 4-byte elements: interleaved by elements, pairs, 128-bit halves. */
ATTR_AVX2 static inline void block_4_8x8(const uint32_t *src, int64_t ls, uint32_t *dst,
                                         int64_t ld)
{
    __m256 r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps((const float *)(const void *)(src + k * ls));
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps((float *)(void *)(dst + k * ld), _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps((float *)(void *)(dst + (k + 4) * ld),
                         _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
}

/* 4 x 4 8-byte elements. */
ATTR_AVX2 static inline void block_8_4x4(const uint64_t *src, int64_t ls, uint64_t *dst,
                                         int64_t ld)
{
    __m256d r[4];
    for (int k = 0; k < 4; k++)
        r[k] = _mm256_loadu_pd((const double *)(const void *)(src + k * ls));
    const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    _mm256_storeu_pd((double *)(void *)dst, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd((double *)(void *)(dst + ld), _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd((double *)(void *)(dst + 2 * ld), _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd((double *)(void *)(dst + 3 * ld), _mm256_permute2f128_pd(t1, t3, 0x31));
}

/* A row of an AVX-512 block: 64 bytes, stored past the caches (`stream`,
 * dst on a 64-byte line) or plainly. */
ATTR_AVX512 static inline void store_row_ps(uint32_t *dst, __m512 v, bool stream)
{
    if (stream)
        _mm512_stream_ps((float *)(void *)dst, v);
    else
        _mm512_storeu_ps((float *)(void *)dst, v);
}
ATTR_AVX512 static inline void store_row_pd(uint64_t *dst, __m512d v, bool stream)
{
    if (stream)
        _mm512_stream_pd((double *)(void *)dst, v);
    else
        _mm512_storeu_pd((double *)(void *)dst, v);
}

/* 16 x 16 4-byte elements: interleaved by elements and pairs within
 * 128-bit lanes, then the lanes of the four row groups gathered in two
 * lane shuffles. */
ATTR_AVX512 static inline void block_4_16x16_to(const uint32_t *src, int64_t ls, uint32_t *dst,
                                                int64_t ld, bool stream)
{
    __m512 r[16], t[16];
    for (int k = 0; k < 16; k++)
        r[k] = _mm512_loadu_ps((const float *)(const void *)(src + k * ls));
    for (int k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int h = 0; h < 16; h += 4) { /* lane L of r[h + m]: column 4 L + m, rows h .. h + 3 */
        r[h] = _mm512_shuffle_ps(t[h], t[h + 2], 0x44);
        r[h + 1] = _mm512_shuffle_ps(t[h], t[h + 2], 0xEE);
        r[h + 2] = _mm512_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        r[h + 3] = _mm512_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int m = 0; m < 4; m++) {
        const __m512 v0 = _mm512_shuffle_f32x4(r[m], r[m + 4], 0x88);
        const __m512 v1 = _mm512_shuffle_f32x4(r[m + 8], r[m + 12], 0x88);
        const __m512 w0 = _mm512_shuffle_f32x4(r[m], r[m + 4], 0xDD);
        const __m512 w1 = _mm512_shuffle_f32x4(r[m + 8], r[m + 12], 0xDD);
        store_row_ps(dst + m * ld, _mm512_shuffle_f32x4(v0, v1, 0x88), stream);
        store_row_ps(dst + (m + 8) * ld, _mm512_shuffle_f32x4(v0, v1, 0xDD), stream);
        store_row_ps(dst + (m + 4) * ld, _mm512_shuffle_f32x4(w0, w1, 0x88), stream);
        store_row_ps(dst + (m + 12) * ld, _mm512_shuffle_f32x4(w0, w1, 0xDD), stream);
    }
}
ATTR_AVX512 static inline void block_4_16x16(const uint32_t *src, int64_t ls, uint32_t *dst,
                                             int64_t ld)
{
    block_4_16x16_to(src, ls, dst, ld, false);
}
ATTR_AVX512 static inline void block_4_16x16_stream(const uint32_t *src, int64_t ls,
                                                    uint32_t *dst, int64_t ld)
{
    block_4_16x16_to(src, ls, dst, ld, true);
}

/* 8 x 8 8-byte elements, the same way. */
ATTR_AVX512 static inline void block_8_8x8_to(const uint64_t *src, int64_t ls, uint64_t *dst,
                                              int64_t ld, bool stream)
{
    __m512d r[8], t[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm512_loadu_pd((const double *)(const void *)(src + k * ls));
    for (int k = 0; k < 8; k += 2) { /* lane L of t[k + p]: column 2 L + p, rows k, k + 1 */
        t[k] = _mm512_unpacklo_pd(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_pd(r[k], r[k + 1]);
    }
    for (int p = 0; p < 2; p++) {
        const __m512d v0 = _mm512_shuffle_f64x2(t[p], t[p + 2], 0x88);
        const __m512d v1 = _mm512_shuffle_f64x2(t[p + 4], t[p + 6], 0x88);
        const __m512d w0 = _mm512_shuffle_f64x2(t[p], t[p + 2], 0xDD);
        const __m512d w1 = _mm512_shuffle_f64x2(t[p + 4], t[p + 6], 0xDD);
        store_row_pd(dst + p * ld, _mm512_shuffle_f64x2(v0, v1, 0x88), stream);
        store_row_pd(dst + (p + 4) * ld, _mm512_shuffle_f64x2(v0, v1, 0xDD), stream);
        store_row_pd(dst + (p + 2) * ld, _mm512_shuffle_f64x2(w0, w1, 0x88), stream);
        store_row_pd(dst + (p + 6) * ld, _mm512_shuffle_f64x2(w0, w1, 0xDD), stream);
    }
}
ATTR_AVX512 static inline void block_8_8x8(const uint64_t *src, int64_t ls, uint64_t *dst,
                                           int64_t ld)
{
    block_8_8x8_to(src, ls, dst, ld, false);
}
ATTR_AVX512 static inline void block_8_8x8_stream(const uint64_t *src, int64_t ls,
                                                  uint64_t *dst, int64_t ld)
{
    block_8_8x8_to(src, ls, dst, ld, true);
}

TRANSPOSE_BLOCKED(NO_ATTR, transpose_1_sse2, uint8_t, 8, block_1_8x8, transpose_1)
TRANSPOSE_BLOCKED(NO_ATTR, transpose_2_sse2, uint16_t, 8, block_2_8x8, transpose_2)
TRANSPOSE_BLOCKED(NO_ATTR, transpose_4_sse2, uint32_t, 4, block_4_4x4, transpose_4)
TRANSPOSE_BLOCKED(ATTR_AVX2, transpose_4_avx2, uint32_t, 8, block_4_8x8, transpose_4)
TRANSPOSE_BLOCKED(ATTR_AVX2, transpose_8_avx2, uint64_t, 4, block_8_4x4, transpose_8)
TRANSPOSE_BLOCKED(ATTR_AVX512, transpose_4_avx512, uint32_t, 16, block_4_16x16, transpose_4)
TRANSPOSE_BLOCKED(ATTR_AVX512, transpose_8_avx512, uint64_t, 8, block_8_8x8, transpose_8)
TRANSPOSE_BLOCKED(ATTR_AVX512, transpose_4_avx512_stream, uint32_t, 16, block_4_16x16_stream,
                  transpose_4)
TRANSPOSE_BLOCKED(ATTR_AVX512, transpose_8_avx512_stream, uint64_t, 8, block_8_8x8_stream,
                  transpose_8)
#else
#define TRANSPOSE_HAVE_X86 0
#endif

void wf__cpu_transpose_block(int64_t rows, int64_t cols, size_t itemsize, const void *src,
                             int64_t ld_src, void *dst, int64_t ld_dst)
{
#if TRANSPOSE_HAVE_X86
    const int isa = wf__vm_isa_active();
    switch (itemsize) {
    case 1: transpose_1_sse2(rows, cols, src, ld_src, dst, ld_dst); return;
    case 2: transpose_2_sse2(rows, cols, src, ld_src, dst, ld_dst); return;
    case 4:
        if (isa >= WF_VM_ISA_AVX512)
            transpose_4_avx512(rows, cols, src, ld_src, dst, ld_dst);
        else if (isa >= WF_VM_ISA_AVX2)
            transpose_4_avx2(rows, cols, src, ld_src, dst, ld_dst);
        else
            transpose_4_sse2(rows, cols, src, ld_src, dst, ld_dst);
        return;
    default:
        if (isa >= WF_VM_ISA_AVX512)
            transpose_8_avx512(rows, cols, src, ld_src, dst, ld_dst);
        else if (isa >= WF_VM_ISA_AVX2)
            transpose_8_avx2(rows, cols, src, ld_src, dst, ld_dst);
        else
            transpose_8(rows, cols, src, ld_src, dst, ld_dst);
        return;
    }
#else
    switch (itemsize) {
    case 1: transpose_1(rows, cols, src, ld_src, dst, ld_dst); break;
    case 2: transpose_2(rows, cols, src, ld_src, dst, ld_dst); break;
    case 4: transpose_4(rows, cols, src, ld_src, dst, ld_dst); break;
    default: transpose_8(rows, cols, src, ld_src, dst, ld_dst); break;
    }
#endif
}

bool wf__cpu_transpose_streams(size_t itemsize, const void *dst, int64_t ld_dst)
{
#if TRANSPOSE_HAVE_X86
    /* Every block row starts a line: dst and its row pitch on 64 bytes. */
    return (itemsize == 4 || itemsize == 8) && wf__vm_isa_active() >= WF_VM_ISA_AVX512 &&
           ((uintptr_t)dst & 63) == 0 && (ld_dst * (int64_t)itemsize) % 64 == 0;
#else
    (void)itemsize, (void)dst, (void)ld_dst;
    return false;
#endif
}

void wf__cpu_transpose_block_stream(int64_t rows, int64_t cols, size_t itemsize,
                                    const void *src, int64_t ld_src, void *dst, int64_t ld_dst)
{
#if TRANSPOSE_HAVE_X86
    if (wf__cpu_transpose_streams(itemsize, dst, ld_dst)) {
        if (itemsize == 4)
            transpose_4_avx512_stream(rows, cols, src, ld_src, dst, ld_dst);
        else
            transpose_8_avx512_stream(rows, cols, src, ld_src, dst, ld_dst);
        return;
    }
#endif
    wf__cpu_transpose_block(rows, cols, itemsize, src, ld_src, dst, ld_dst);
}

#if TRANSPOSE_HAVE_X86

/* SSE2 is part of x86-64: no variant needed. The head up to the first
 * 64-byte boundary and the tail are plain copies, so only whole lines
 * bypass the caches (a partial line written that way costs a memory read). */
void wf__cpu_stream_copy(void *dst, const void *src, size_t bytes)
{
    char *d = dst;
    const char *s = src;
    const size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (bytes < head + 64) {
        memcpy(d, s, bytes);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64)
        for (int q = 0; q < 4; q++)
            _mm_stream_si128((__m128i *)(void *)(d + 16 * q),
                             _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * q)));
    memcpy(d, s, bytes);
}

void wf__cpu_stream_fence(void) { _mm_sfence(); }
#else
void wf__cpu_stream_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void wf__cpu_stream_fence(void) {}
#endif
