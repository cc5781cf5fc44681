/* Block transposes for the 2-d tiles of the shared walk (iter.c): 8 x 8
 * blocks of 4-byte and 4 x 4 blocks of 8-byte elements moved through
 * registers on AVX2 and AVX-512 CPUs (the active variant of
 * wf__vm_isa_active), element by element otherwise. Copies only: every
 * variant gives the same bytes. */
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

#if defined(__x86_64__) && defined(__GNUC__)
#define TRANSPOSE_HAVE_X86 1

typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint32_t v8u_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef uint64_t v4q __attribute__((vector_size(32)));
typedef uint64_t v4q_u __attribute__((vector_size(32), aligned(8), may_alias));

/* One 8 x 8 block of 4-byte elements: rows interleaved by pairs, then
 * quads, then the 128-bit halves. */
__attribute__((target("avx2"))) static void block_8x8(const uint32_t *src, int64_t ld_src,
                                                      uint32_t *dst, int64_t ld_dst)
{
    v8u r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        r[k] = *(const v8u_u *)(src + k * ld_src);
    for (int k = 0; k < 8; k += 2) {
        t[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int k = 0; k < 8; k += 4)
        for (int h = 0; h < 2; h++) {
            u[k + 2 * h] = __builtin_shufflevector(t[k + h], t[k + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[k + 2 * h + 1] =
                __builtin_shufflevector(t[k + h], t[k + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int k = 0; k < 4; k++) {
        *(v8u_u *)(dst + k * ld_dst) = __builtin_shufflevector(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        *(v8u_u *)(dst + (k + 4) * ld_dst) =
            __builtin_shufflevector(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* One 4 x 4 block of 8-byte elements. */
__attribute__((target("avx2"))) static void block_4x4(const uint64_t *src, int64_t ld_src,
                                                      uint64_t *dst, int64_t ld_dst)
{
    v4q r[4];
    for (int k = 0; k < 4; k++)
        r[k] = *(const v4q_u *)(src + k * ld_src);
    const v4q t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 2, 6);
    const v4q t1 = __builtin_shufflevector(r[0], r[1], 1, 5, 3, 7);
    const v4q t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 2, 6);
    const v4q t3 = __builtin_shufflevector(r[2], r[3], 1, 5, 3, 7);
    *(v4q_u *)dst = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
    *(v4q_u *)(dst + ld_dst) = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
    *(v4q_u *)(dst + 2 * ld_dst) = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    *(v4q_u *)(dst + 3 * ld_dst) = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

/* Whole B x B blocks, then the edges element by element. */
#define TRANSPOSE_BLOCKED(NAME, T, B, BLOCK, EDGE)                                         \
    static void NAME(int64_t rows, int64_t cols, const T *src, int64_t ld_src, T *dst,     \
                     int64_t ld_dst)                                                       \
    {                                                                                      \
        const int64_t rb = rows - rows % B, cb = cols - cols % B;                          \
        for (int64_t i = 0; i < rb; i += B)                                                \
            for (int64_t j = 0; j < cb; j += B)                                            \
                BLOCK(src + i * ld_src + j, ld_src, dst + j * ld_dst + i, ld_dst);         \
        EDGE(rb, cols - cb, src + cb, ld_src, dst + cb * ld_dst, ld_dst);                  \
        EDGE(rows - rb, cols, src + rb * ld_src, ld_src, dst + rb, ld_dst);                \
    }
TRANSPOSE_BLOCKED(transpose_4_avx2, uint32_t, 8, block_8x8, transpose_4)
TRANSPOSE_BLOCKED(transpose_8_avx2, uint64_t, 4, block_4x4, transpose_8)
#else
#define TRANSPOSE_HAVE_X86 0
#endif

void wf__cpu_transpose_block(int64_t rows, int64_t cols, size_t itemsize, const void *src,
                             int64_t ld_src, void *dst, int64_t ld_dst)
{
#if TRANSPOSE_HAVE_X86
    if (wf__vm_isa_active() >= WF_VM_ISA_AVX2) {
        if (itemsize == 4) {
            transpose_4_avx2(rows, cols, src, ld_src, dst, ld_dst);
            return;
        }
        if (itemsize == 8) {
            transpose_8_avx2(rows, cols, src, ld_src, dst, ld_dst);
            return;
        }
    }
#endif
    switch (itemsize) {
    case 1: transpose_1(rows, cols, src, ld_src, dst, ld_dst); break;
    case 2: transpose_2(rows, cols, src, ld_src, dst, ld_dst); break;
    case 4: transpose_4(rows, cols, src, ld_src, dst, ld_dst); break;
    default: transpose_8(rows, cols, src, ld_src, dst, ld_dst); break;
    }
}
