/* Copies between strided layouts of the same dtype. */
#include "backend/cpu/cpu.h"

#include <string.h>

#include "runtime/pool.h"

/* One typed copy loop per element size: contiguous -> memcpy, 0-stride source
 * -> fill (blocks of 8 that GCC vectorizes at -O2), otherwise a general
 * strided loop. The typed body takes restrict parameters (GCC ignores
 * restrict on local pointers). */
#define COPY_LOOP(NAME, T)                                                              \
    static void NAME##_typed(int64_t n, T *restrict dst, int64_t ds, const T *restrict src, \
                             int64_t ss)                                                \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (ds == 1 && ss == 1) {                                                       \
            memcpy(dst, src, (size_t)n * sizeof(T));                                    \
        } else if (ds == 1 && ss == 0) {                                                \
            const T v = *src;                                                           \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    dst[i + j] = v;                                                     \
            for (; i < n; i++)                                                          \
                dst[i] = v;                                                             \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                dst[i * ds] = src[i * ss];                                              \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1]);      \
    }

COPY_LOOP(copy_1, uint8_t)
COPY_LOOP(copy_2, uint16_t)
COPY_LOOP(copy_4, uint32_t)
COPY_LOOP(copy_8, uint64_t)

static wf_cpu_inner_fn copy_loop(size_t itemsize)
{
    switch (itemsize) {
    case 1: return copy_1;
    case 2: return copy_2;
    case 4: return copy_4;
    default: return copy_8;
    }
}

/* Transposed layouts are copied in 2-d tiles by the shared walk (iter.c). */
void wf__cpu_copy_iter(const wf_cpu_iter *it)
{
    wf_cpu_iter copy = *it;
    copy.copy_only = true;
    wf__cpu_iter_run_parallel(&copy, copy_loop(it->itemsize[0]), NULL, WF_CPU_CHUNK_CHEAP);
}

void wf__cpu_copy_2d(int64_t rows, int64_t cols, size_t itemsize, const void *src,
                     int64_t src_row, int64_t src_col, void *dst, int64_t dst_row,
                     int64_t dst_col)
{
    const bool sized = itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8;
    if (sized && src_row == 1 && dst_col == 1 && src_col > 0 && dst_row > 0) {
        wf__cpu_transpose_block(cols, rows, itemsize, src, src_col, dst, dst_row);
        return;
    }
    if (sized && src_col == 1 && dst_row == 1 && src_row > 0 && dst_col > 0) {
        wf__cpu_transpose_block(rows, cols, itemsize, src, src_row, dst, dst_col);
        return;
    }
    const int64_t shape[2] = {rows, cols};
    const int64_t dst_st[2] = {dst_row, dst_col}, src_st[2] = {src_row, src_col};
    char *data[2] = {(char *)dst, (char *)src};
    const size_t sizes[2] = {itemsize, itemsize};
    const int64_t *strides[2] = {dst_st, src_st};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, 2, shape, 2, data, sizes, strides);
    wf__cpu_iter_run_blocked(&it, copy_loop(itemsize), NULL);
}

void wf__cpu_copy_strided(int ndim, const int64_t *shape, size_t itemsize, const void *src,
                          const int64_t *src_strides, void *dst)
{
    int64_t dst_strides[WF_MAX_NDIM];
    wf__contiguous_strides(shape, ndim, dst_strides);
    char *data[2] = {(char *)dst, (char *)src};
    const size_t sizes[2] = {itemsize, itemsize};
    const int64_t *strides[2] = {dst_strides, src_strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, ndim, shape, 2, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_copy_iter(&it);
}

wf_status wf__cpu_copy_to_contiguous(const wf_array *src, void *dst)
{
    if (src->size == 0)
        return WF_OK;
    wf__cpu_copy_strided(src->ndim, src->shape, wf_dtype_size(src->dtype),
                         wf__array_data_ptr(src), src->strides, dst);
    return WF_OK;
}
