/*
 * Indexing kernels: take, take_along_axis, scatter_add.
 *
 * Indices may be u8, i32 or i64; negative ones count from the end of the
 * axis, and an index outside [-size, size) makes the kernel fail with
 * WF_ERR_INVALID_ARGUMENT naming it.
 *
 * take sees `a` as (outer, size, inner) and copies one inner block per
 * (outer, index): memcpy when the block is contiguous, a typed gather loop
 * when it is one element, a strided walk otherwise. take_along_axis walks
 * (out, indices, a) with the strided iterator, a's stride on the axis set
 * to 0 and the index applied in the inner loop. scatter_add copies `a`,
 * groups the indices by target (stable), and adds each group's update rows
 * into its target row through an accumulator (float32 for f16/bf16, so
 * repeated indices round once); groups are disjoint, so they run in
 * parallel, and the order within a group is the order of the indices.
 */
#include "backend/cpu/index.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* ---------------------------------------------------------------- indices */

/* Reads `indices` (any strides) into a new int64 array normalized to
 * [0, dim); *out is NULL when there are none. */
static wf_status load_indices(const char *op, const wf_array *indices, int axis, int64_t dim,
                              int64_t **out)
{
    *out = NULL;
    const int64_t n = indices->size;
    if (n == 0)
        return WF_OK;
    int64_t *v = wf__malloc((size_t)n * sizeof *v);
    if (!v)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory reading %lld indices", op,
                         (long long)n);
    int64_t row[WF_MAX_NDIM];
    wf__contiguous_strides(indices->shape, indices->ndim, row);
    wf__cpu_convert_strided(indices->ndim, indices->shape, wf__array_data_ptr(indices),
                            indices->dtype, indices->strides, v, WF_DTYPE_I64, row);
    for (int64_t i = 0; i < n; i++) {
        int64_t x = v[i];
        if (x < 0 && x >= -dim)
            x += dim;
        if (x < 0 || x >= dim) {
            wf_status st = wf__error(WF_ERR_INVALID_ARGUMENT,
                                     "%s: index %lld is out of range for axis %d of size %lld",
                                     op, (long long)v[i], axis, (long long)dim);
            free(v);
            return st;
        }
        v[i] = x;
    }
    *out = v;
    return WF_OK;
}

/* Offset in elements of a[o, 0, ...] for outer position o over dims
 * [0, axis). */
static int64_t outer_offset(const wf_array *a, int axis, int64_t o)
{
    int64_t off = 0;
    for (int d = axis - 1; d >= 0; d--) {
        off += (o % a->shape[d]) * a->strides[d];
        o /= a->shape[d];
    }
    return off;
}

/* ---------------------------------------------------------------- take */

/* Typed copy loops for the strided inner blocks of take. */
#define TAKE_COPY_LOOP(NAME, T)                                                             \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                       \
        (void)ctx;                                                                          \
        T *restrict dst = (T *)ptrs[0];                                                     \
        const T *restrict src = (const T *)ptrs[1];                                         \
        const int64_t ds = strides[0], ss = strides[1];                                     \
        for (int64_t i = 0; i < n; i++)                                                     \
            dst[i * ds] = src[i * ss];                                                      \
    }
TAKE_COPY_LOOP(take_copy_1, uint8_t)
TAKE_COPY_LOOP(take_copy_2, uint16_t)
TAKE_COPY_LOOP(take_copy_4, uint32_t)
TAKE_COPY_LOOP(take_copy_8, uint64_t)

/* One-element blocks: dst[j] = row[idx[j] * stride] for j in [j0, j1). */
#define TAKE_GATHER(NAME, T)                                                                \
    static void NAME(T *restrict dst, const T *restrict row, const int64_t *restrict idx,   \
                     int64_t stride, int64_t j0, int64_t j1)                                \
    {                                                                                       \
        if (stride == 1) {                                                                  \
            for (int64_t j = j0; j < j1; j++)                                               \
                dst[j - j0] = row[idx[j]];                                                  \
        } else {                                                                            \
            for (int64_t j = j0; j < j1; j++)                                               \
                dst[j - j0] = row[idx[j] * stride];                                         \
        }                                                                                   \
    }
TAKE_GATHER(take_gather_1, uint8_t)
TAKE_GATHER(take_gather_2, uint16_t)
TAKE_GATHER(take_gather_4, uint32_t)
TAKE_GATHER(take_gather_8, uint64_t)

enum { TAKE_SCALAR, TAKE_MEMCPY, TAKE_STRIDED };

struct take_job {
    const wf_array *a;
    int axis;
    int mode;
    const int64_t *idx;
    int64_t nidx, inner;
    int64_t axis_stride; /* elements */
    size_t item;
    const char *src; /* a's element 0 */
    char *dst;
    wf_cpu_iter block; /* TAKE_STRIDED: the inner block walk (data filled per block) */
    wf_cpu_inner_fn copy;
};

static void take_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct take_job *job = arg;
    const int64_t item = (int64_t)job->item;
    int64_t pos = begin;
    if (job->mode == TAKE_SCALAR) {
        while (pos < end) { /* one run of j per outer position */
            const int64_t o = pos / job->nidx, j0 = pos % job->nidx;
            const int64_t j1 = j0 + (end - pos) < job->nidx ? j0 + (end - pos) : job->nidx;
            const char *row = job->src + outer_offset(job->a, job->axis, o) * item;
            char *dst = job->dst + pos * item;
            switch (job->item) {
            case 1: take_gather_1((uint8_t *)dst, (const uint8_t *)row, job->idx, job->axis_stride, j0, j1); break;
            case 2: take_gather_2((uint16_t *)dst, (const uint16_t *)row, job->idx, job->axis_stride, j0, j1); break;
            case 4: take_gather_4((uint32_t *)dst, (const uint32_t *)row, job->idx, job->axis_stride, j0, j1); break;
            default: take_gather_8((uint64_t *)dst, (const uint64_t *)row, job->idx, job->axis_stride, j0, j1); break;
            }
            pos += j1 - j0;
        }
        return;
    }
    const int64_t block_bytes = job->inner * item;
    wf_cpu_iter it = job->block; /* TAKE_STRIDED only */
    int64_t o = pos / job->nidx, j = pos % job->nidx;
    const char *row = job->src + outer_offset(job->a, job->axis, o) * item;
    for (; pos < end; pos++) {
        const char *src = row + job->idx[j] * job->axis_stride * item;
        char *dst = job->dst + pos * block_bytes;
        if (job->mode == TAKE_MEMCPY) {
            memcpy(dst, src, (size_t)block_bytes);
        } else {
            it.data[0] = dst;
            it.data[1] = (char *)src;
            wf__cpu_iter_run(&it, job->copy, NULL);
        }
        if (++j == job->nidx && pos + 1 < end) {
            j = 0;
            o++;
            row = job->src + outer_offset(job->a, job->axis, o) * item;
        }
    }
}

wf_status wf__cpu_take(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_axis_params *p = params;
    const wf_array *a = inputs[0], *indices = inputs[1];
    const int axis = p->axis;
    int64_t *idx;
    wf_status st = load_indices("wf_take", indices, axis, a->shape[axis], &idx);
    if (st != WF_OK)
        return st;
    st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0) {
        free(idx);
        return st;
    }
    struct take_job job;
    memset(&job, 0, sizeof job);
    job.a = a;
    job.axis = axis;
    job.idx = idx;
    job.nidx = indices->size;
    job.inner = 1;
    for (int d = axis + 1; d < a->ndim; d++)
        job.inner *= a->shape[d];
    job.axis_stride = a->strides[axis];
    job.item = wf_dtype_size(a->dtype);
    job.src = wf__array_data_ptr(a);
    job.dst = wf__array_data_ptr(out);
    const int inner_ndim = a->ndim - axis - 1;
    const int64_t *inner_shape = a->shape + axis + 1, *inner_strides = a->strides + axis + 1;
    if (job.inner == 1) {
        job.mode = TAKE_SCALAR;
    } else if (wf__is_row_contiguous(inner_shape, inner_strides, inner_ndim)) {
        job.mode = TAKE_MEMCPY;
    } else {
        job.mode = TAKE_STRIDED;
        int64_t row[WF_MAX_NDIM];
        wf__contiguous_strides(inner_shape, inner_ndim, row);
        char *data[2] = {job.dst, (char *)job.src};
        const size_t sizes[2] = {job.item, job.item};
        const int64_t *strides[2] = {row, inner_strides};
        wf__cpu_iter_init(&job.block, inner_ndim, inner_shape, 2, data, sizes, strides);
        job.copy = job.item == 1   ? take_copy_1
                   : job.item == 2 ? take_copy_2
                   : job.item == 4 ? take_copy_4
                                   : take_copy_8;
    }
    const int64_t outer = out->size / (job.nidx * job.inner);
    const int64_t nblocks = outer * job.nidx;
    int64_t min_chunk = job.inner >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / job.inner;
    if (job.mode == TAKE_SCALAR)
        min_chunk = WF_CPU_CHUNK_CHEAP / 4;
    wf__parallel_for(nblocks, min_chunk, take_chunk, &job);
    free(idx);
    return WF_OK;
}

/* ---------------------------------------------------------------- take_along_axis */

struct along_ctx {
    int64_t dim;         /* size of a's axis */
    int64_t axis_stride; /* a's stride on the axis, elements */
    atomic_bool *bad;
    atomic_int_fast64_t *bad_value;
};

static void record_bad(const struct along_ctx *c, int64_t v)
{
    bool expected = false;
    if (atomic_compare_exchange_strong(c->bad, &expected, true))
        atomic_store(c->bad_value, v);
}

/* Operands: 0 out, 1 indices, 2 a (stride 0 on the axis). */
#define ALONG_LOOP(NAME, T, IT)                                                             \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                       \
        const struct along_ctx *c = ctx;                                                    \
        T *restrict o = (T *)ptrs[0];                                                       \
        const IT *restrict ix = (const IT *)ptrs[1];                                        \
        const T *restrict a = (const T *)ptrs[2];                                           \
        const int64_t so = strides[0], si = strides[1], sa = strides[2];                    \
        const int64_t dim = c->dim, as = c->axis_stride;                                    \
        for (int64_t i = 0; i < n; i++) {                                                   \
            int64_t v = (int64_t)ix[i * si];                                                \
            int64_t w = v < 0 ? v + dim : v;                                                \
            if ((uint64_t)w >= (uint64_t)dim) {                                             \
                record_bad(c, v);                                                           \
                continue;                                                                   \
            }                                                                               \
            o[i * so] = a[i * sa + w * as];                                                 \
        }                                                                                   \
    }
#define ALONG_LOOPS(T, SUFFIX)                        \
    ALONG_LOOP(along_##SUFFIX##_u8, T, uint8_t)       \
    ALONG_LOOP(along_##SUFFIX##_i32, T, int32_t)      \
    ALONG_LOOP(along_##SUFFIX##_i64, T, int64_t)
ALONG_LOOPS(uint8_t, 1)
ALONG_LOOPS(uint16_t, 2)
ALONG_LOOPS(uint32_t, 4)
ALONG_LOOPS(uint64_t, 8)

static wf_cpu_inner_fn along_loop(size_t item, wf_dtype index_dtype)
{
    static const wf_cpu_inner_fn loops[4][3] = {
        {along_1_u8, along_1_i32, along_1_i64},
        {along_2_u8, along_2_i32, along_2_i64},
        {along_4_u8, along_4_i32, along_4_i64},
        {along_8_u8, along_8_i32, along_8_i64},
    };
    const int s = item == 1 ? 0 : item == 2 ? 1 : item == 4 ? 2 : 3;
    const int t = index_dtype == WF_DTYPE_U8 ? 0 : index_dtype == WF_DTYPE_I32 ? 1 : 2;
    return loops[s][t];
}

wf_status wf__cpu_take_along_axis(wf_array *out, wf_array *const *inputs, int ninputs,
                                  const void *params)
{
    (void)ninputs;
    const wf_axis_params *p = params;
    const wf_array *a = inputs[0], *indices = inputs[1];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    atomic_bool bad = false;
    atomic_int_fast64_t bad_value = 0;
    struct along_ctx ctx = {a->shape[p->axis], a->strides[p->axis], &bad, &bad_value};
    int64_t row[WF_MAX_NDIM], a_strides[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, row);
    wf__shape_copy(a_strides, a->strides, a->ndim);
    a_strides[p->axis] = 0;
    const size_t item = wf_dtype_size(out->dtype);
    char *data[3] = {wf__array_data_ptr(out), wf__array_data_ptr(indices),
                     wf__array_data_ptr(a)};
    const size_t sizes[3] = {item, wf_dtype_size(indices->dtype), item};
    const int64_t *strides[3] = {row, indices->strides, a_strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, out->ndim, out->shape, 3, data, sizes, strides);
    wf__cpu_iter_run_parallel(&it, along_loop(item, indices->dtype), &ctx, WF_CPU_CHUNK_CHEAP / 4);
    if (atomic_load(&bad))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_take_along_axis: index %lld is out of range for axis %d of size %lld",
                         (long long)atomic_load(&bad_value), p->axis,
                         (long long)a->shape[p->axis]);
    return WF_OK;
}

/* ---------------------------------------------------------------- scatter_add */

enum { SCATTER_TILE = 1024, SCATTER_ACC = 256 };

struct scatter_job {
    char *out;             /* contiguous copy of a: (outer, dim, inner) */
    const char *upd;       /* contiguous updates: (outer, n, inner) */
    const int64_t *order;  /* update positions grouped by target, stable */
    const int64_t *groups; /* ngroups + 1 starts into order */
    const int64_t *target; /* per group: its index into the axis */
    int64_t ngroups, ntiles, dim, n, inner;
    wf_dtype dtype;
};

/* One (outer, group, tile) item: acc = out row tile; acc += each update
 * row tile of the group in order; store. */
#define SCATTER_BODY(NAME, T, ACC, LOAD, ADD, STORE)                                        \
    static void NAME(const struct scatter_job *job, int64_t o, int64_t g, int64_t c0,       \
                     int64_t c1)                                                            \
    {                                                                                       \
        T *row = (T *)job->out + (o * job->dim + job->target[g]) * job->inner;              \
        const T *upd = (const T *)job->upd + o * job->n * job->inner;                       \
        ACC acc[SCATTER_ACC];                                                               \
        for (int64_t b0 = c0; b0 < c1; b0 += SCATTER_ACC) {                                 \
            const int64_t m = c1 - b0 < SCATTER_ACC ? c1 - b0 : SCATTER_ACC;                \
            for (int64_t c = 0; c < m; c++)                                                 \
                acc[c] = LOAD(row[b0 + c]);                                                 \
            for (int64_t k = job->groups[g]; k < job->groups[g + 1]; k++) {                 \
                const T *u = upd + job->order[k] * job->inner + b0;                         \
                for (int64_t c = 0; c < m; c++)                                             \
                    acc[c] = ADD(acc[c], LOAD(u[c]));                                       \
            }                                                                               \
            for (int64_t c = 0; c < m; c++)                                                 \
                row[b0 + c] = STORE(acc[c]);                                                \
        }                                                                                   \
    }
#define ID(x) (x)
#define OR(a, b) ((uint8_t)((a) | (b)))
#define ADD_U8(a, b) ((uint8_t)((a) + (b)))
#define PLUS(a, b) ((a) + (b))
#define U32(x) ((uint32_t)(x))
#define U64(x) ((uint64_t)(x))
SCATTER_BODY(scatter_bool, uint8_t, uint8_t, ID, OR, ID)
SCATTER_BODY(scatter_u8, uint8_t, uint8_t, ID, ADD_U8, ID)
SCATTER_BODY(scatter_i32, int32_t, uint32_t, U32, PLUS, wf__cpu_wrap_i32)
SCATTER_BODY(scatter_i64, int64_t, uint64_t, U64, PLUS, wf__cpu_wrap_i64)
#define WRAP_I8(x) wf__cpu_wrap_i8((uint8_t)(x))
#define WRAP_I16(x) wf__cpu_wrap_i16((uint16_t)(x))
#define ADD_U16(a, b) ((uint16_t)((uint32_t)(a) + (b)))
SCATTER_BODY(scatter_i8, int8_t, uint32_t, U32, PLUS, WRAP_I8)
SCATTER_BODY(scatter_i16, int16_t, uint32_t, U32, PLUS, WRAP_I16)
SCATTER_BODY(scatter_u16, uint16_t, uint16_t, ID, ADD_U16, ID)
SCATTER_BODY(scatter_u32, uint32_t, uint32_t, ID, PLUS, ID)
SCATTER_BODY(scatter_u64, uint64_t, uint64_t, ID, PLUS, ID)
SCATTER_BODY(scatter_f16, uint16_t, float, wf__f16_to_f32, PLUS, wf__f32_to_f16)
SCATTER_BODY(scatter_bf16, uint16_t, float, wf__bf16_to_f32, PLUS, wf__f32_to_bf16)
SCATTER_BODY(scatter_f32, float, float, ID, PLUS, ID)
SCATTER_BODY(scatter_f64, double, double, ID, PLUS, ID)

static void scatter_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct scatter_job *job = arg;
    for (int64_t w = begin; w < end; w++) {
        const int64_t t = w % job->ntiles, og = w / job->ntiles;
        const int64_t g = og % job->ngroups, o = og / job->ngroups;
        const int64_t c0 = t * SCATTER_TILE;
        const int64_t c1 = c0 + SCATTER_TILE < job->inner ? c0 + SCATTER_TILE : job->inner;
        switch (job->dtype) {
        case WF_DTYPE_BOOL: scatter_bool(job, o, g, c0, c1); break;
        case WF_DTYPE_U8: scatter_u8(job, o, g, c0, c1); break;
        case WF_DTYPE_I32: scatter_i32(job, o, g, c0, c1); break;
        case WF_DTYPE_I64: scatter_i64(job, o, g, c0, c1); break;
        case WF_DTYPE_F16: scatter_f16(job, o, g, c0, c1); break;
        case WF_DTYPE_BF16: scatter_bf16(job, o, g, c0, c1); break;
        case WF_DTYPE_F32: scatter_f32(job, o, g, c0, c1); break;
        case WF_DTYPE_I8: scatter_i8(job, o, g, c0, c1); break;
        case WF_DTYPE_I16: scatter_i16(job, o, g, c0, c1); break;
        case WF_DTYPE_U16: scatter_u16(job, o, g, c0, c1); break;
        case WF_DTYPE_U32: scatter_u32(job, o, g, c0, c1); break;
        case WF_DTYPE_U64: scatter_u64(job, o, g, c0, c1); break;
        default: scatter_f64(job, o, g, c0, c1); break; /* complex64 runs as float32 pairs */
        }
    }
}

/* Stable grouping of positions 0..n-1 by target: a merge sort of (target,
 * position) pairs. */
static void sort_by_target(int64_t *order, int64_t *tmp, const int64_t *target, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = target[order[j]] < target[order[i]] ? order[j++] : order[i++];
            while (i < mid)
                tmp[k++] = order[i++];
            while (j < hi)
                tmp[k++] = order[j++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

wf_status wf__cpu_scatter_add(wf_array *out, wf_array *const *inputs, int ninputs,
                              const void *params)
{
    (void)ninputs;
    const wf_axis_params *p = params;
    const wf_array *a = inputs[0], *indices = inputs[1], *updates = inputs[2];
    const int axis = p->axis;
    const int64_t dim = a->shape[axis], n = indices->size;
    int64_t *idx;
    wf_status st = load_indices("wf_scatter_add", indices, axis, dim, &idx);
    if (st != WF_OK)
        return st;
    st = wf__array_alloc_output(out);
    /* a donated table (WF_PRIM_INPLACE_FIRST) already is the output */
    if (st == WF_OK && wf__array_data_ptr(out) != wf__array_data_ptr(a))
        st = wf__cpu_copy_to_contiguous(a, wf__array_data_ptr(out));
    if (st != WF_OK || n == 0 || updates->size == 0) {
        free(idx);
        return st;
    }
    const size_t item = wf_dtype_size(a->dtype);
    void *upd_copy = NULL;
    const char *upd = wf__array_data_ptr(updates);
    if (!wf__is_row_contiguous(updates->shape, updates->strides, updates->ndim)) {
        upd_copy = wf__malloc((size_t)updates->size * item);
        if (!upd_copy) {
            free(idx);
            return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_scatter_add: out of memory");
        }
        wf__cpu_copy_to_contiguous(updates, upd_copy);
        upd = upd_copy;
    }
    int64_t *order = wf__malloc((size_t)n * sizeof *order);
    int64_t *tmp = wf__malloc((size_t)(n + 1) * sizeof *tmp);
    int64_t *targets = wf__malloc((size_t)n * sizeof *targets);
    if (!order || !tmp || !targets) {
        free(order);
        free(tmp);
        free(targets);
        free(upd_copy);
        free(idx);
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_scatter_add: out of memory");
    }
    sort_by_target(order, tmp, idx, n);
    /* Group starts go into tmp (at most n + 1 of them). */
    int64_t ngroups = 0;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || idx[order[k]] != idx[order[k - 1]]) {
            tmp[ngroups] = k;
            targets[ngroups] = idx[order[k]];
            ngroups++;
        }
    }
    tmp[ngroups] = n;
    struct scatter_job job = {
        .out = wf__array_data_ptr(out),
        .upd = upd,
        .order = order,
        .groups = tmp,
        .target = targets,
        .ngroups = ngroups,
        .dim = dim,
        .n = n,
        .dtype = a->dtype,
    };
    job.inner = 1;
    for (int d = axis + 1; d < a->ndim; d++)
        job.inner *= a->shape[d];
    const int64_t outer = a->size / (dim * job.inner);
    if (a->dtype == WF_DTYPE_C64) { /* complex sums add the float32 parts */
        job.dtype = WF_DTYPE_F32;
        job.inner *= 2;
    }
    job.ntiles = (job.inner + SCATTER_TILE - 1) / SCATTER_TILE;
    const int64_t per_item = (n / ngroups + 1) * (job.inner < SCATTER_TILE ? job.inner : SCATTER_TILE);
    const int64_t min_chunk = per_item >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / per_item;
    wf__parallel_for(outer * ngroups * job.ntiles, min_chunk, scatter_chunk, &job);
    free(order);
    free(tmp);
    free(targets);
    free(upd_copy);
    free(idx);
    return WF_OK;
}
