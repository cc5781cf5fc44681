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

/* Transposing copies. When the destination runs along its last dim with
 * stride 1 but the source runs along the dim before it with stride 1 (a
 * transposed view), a plain row-by-row walk touches a new source cache line
 * for every element. Copying bands of TILE rows, TILE columns at a time,
 * keeps the TILE source lines of a tile in L1 while they are used. */
enum { TILE = 32 };

static bool wants_tiles(const wf_cpu_iter *it)
{
    if (it->ndim < 2)
        return false;
    const int last = it->ndim - 1;
    const int64_t src_row = it->strides[1][last - 1], src_col = it->strides[1][last];
    return it->strides[0][last] == 1 && (src_row == 1 || src_row == -1) && src_col != 1 &&
           src_col != 0 && it->shape[last] >= TILE && it->shape[last - 1] >= TILE;
}

struct tiled_copy {
    const wf_cpu_iter *it;
    wf_cpu_inner_fn fn;
    int64_t row_bands; /* bands of TILE rows per outer index */
};

/* Byte offset of outer index `outer` (over dims 0..ndim-3) for operand k. */
static int64_t outer_offset(const wf_cpu_iter *it, int k, int64_t outer)
{
    int64_t elements = 0;
    for (int d = it->ndim - 3; d >= 0; d--) {
        elements += (outer % it->shape[d]) * it->strides[k][d];
        outer /= it->shape[d];
    }
    return elements * (int64_t)it->itemsize[k];
}

static void copy_bands(void *arg, int64_t begin, int64_t end)
{
    const struct tiled_copy *t = arg;
    const wf_cpu_iter *it = t->it;
    const int last = it->ndim - 1;
    const int64_t rows = it->shape[last - 1], cols = it->shape[last];
    const int64_t inner[2] = {it->strides[0][last], it->strides[1][last]};
    for (int64_t task = begin; task < end; task++) {
        int64_t outer = task / t->row_bands, r0 = (task % t->row_bands) * TILE;
        int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
        char *base[2];
        for (int k = 0; k < 2; k++)
            base[k] = it->data[k] + outer_offset(it, k, outer);
        for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
            int64_t n = c0 + TILE < cols ? TILE : cols - c0;
            for (int64_t r = r0; r < r1; r++) {
                char *ptrs[2];
                for (int k = 0; k < 2; k++)
                    ptrs[k] = base[k] + (r * it->strides[k][last - 1] + c0 * inner[k]) *
                                            (int64_t)it->itemsize[k];
                t->fn(n, ptrs, inner, NULL);
            }
        }
    }
}

void wf__cpu_copy_iter(const wf_cpu_iter *it)
{
    wf_cpu_inner_fn fn = copy_loop(it->itemsize[0]);
    if (it->empty || !wants_tiles(it)) {
        wf__cpu_iter_run_parallel(it, fn, NULL, WF_CPU_CHUNK_CHEAP);
        return;
    }
    const int last = it->ndim - 1;
    int64_t outer = 1;
    for (int d = 0; d < last - 1; d++)
        outer *= it->shape[d];
    struct tiled_copy t = {it, fn, (it->shape[last - 1] + TILE - 1) / TILE};
    int64_t band_elements = TILE * it->shape[last];
    int64_t min_bands = WF_CPU_CHUNK_CHEAP / band_elements;
    wf__parallel_for(outer * t.row_bands, min_bands > 0 ? min_bands : 1, copy_bands, &t);
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
