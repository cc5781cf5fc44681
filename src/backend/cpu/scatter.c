/*
 * General gather and scatter kernels (prim/scatter.h).
 *
 * Both resolve each position p of the index shape I to the offset of its
 * slice's first element (an index out of range, or a slice that would not
 * fit, fails the kernel naming it) and walk the slice as rows: the slice's
 * last dim is a run of L elements, its other dims give `rows` run starts,
 * precomputed once.
 *
 * gather copies run by run into the row-major output, in parallel over
 * (p, row), asking for the runs a few KiB ahead (their sources lie
 * anywhere); an output past 16 MiB whose runs are whole cache lines is
 * written around the caches, as a large memcpy is.
 *
 * scatter copies `a` into the output and combines the update slices into
 * it. When every indexed axis has slice size 1, two positions touch a
 * common element only if they have the same index tuple: positions are
 * grouped by tuple (a stable counting sort when the tuples' range is small,
 * else a stable merge sort), groups are disjoint and run in parallel, and
 * within a group the updates combine in position order through a tile of
 * accumulators (float32 for f16/bf16, so a group rounds once; float32
 * add under AVX2 keeps them in registers), asking for the update runs a
 * few KiB ahead, into the next groups. Otherwise
 * (wider slices on indexed axes, which may overlap) the positions run one
 * after another, each slice in parallel. Either way the order in which an
 * element sees its updates is fixed by the indices: the same bits for any
 * thread count.
 */
#include "backend/cpu/scatter.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/scatter.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* ---------------------------------------------------------------- positions */

/* Room for n int64 from the buffer cache, held by *held (release it with
 * wf__buffer_release), or NULL out of memory. Cached buffers are reused
 * from call to call; malloc maps each array of a few MiB afresh, and
 * faulting in its pages took a sixth of scatter_add's time on 1M rows. */
static int64_t *scratch_i64(wf_buffer **held, int64_t n)
{
    *held = wf__buffer_alloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    return *held ? (int64_t *)(*held)->data : NULL;
}

/* Where each position's slice starts (elements, in a layout of `strides`)
 * and, if `tuples` is not NULL, its index tuple as one number (row-major
 * over the indexed dims). Index k is inputs[first + k], of n elements. */
static wf_status load_positions(const char *op, wf_array *const *inputs, int first, int naxes,
                                const int *axes, const int64_t *shape, const int64_t *sizes,
                                const int64_t *strides, int64_t n, int64_t *offsets,
                                int64_t *tuples)
{
    memset(offsets, 0, (size_t)n * sizeof *offsets);
    if (tuples)
        memset(tuples, 0, (size_t)n * sizeof *tuples);
    wf_buffer *held;
    int64_t *v = scratch_i64(&held, n);
    if (!v)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory reading indices", op);
    for (int k = 0; k < naxes; k++) {
        const wf_array *ix = inputs[first + k];
        int64_t row[WF_MAX_NDIM];
        wf__contiguous_strides(ix->shape, ix->ndim, row);
        wf__cpu_convert_strided(ix->ndim, ix->shape, wf__array_data_ptr(ix), ix->dtype,
                                ix->strides, v, WF_DTYPE_I64, row);
        const int ax = axes[k];
        const int64_t dim = shape[ax], size = sizes[ax], stride = strides[ax];
        for (int64_t p = 0; p < n; p++) {
            int64_t x = v[p];
            if (x < 0 && x >= -dim)
                x += dim;
            if (x < 0 || x >= dim || x + size > dim) {
                wf_status st = wf__error(
                    WF_ERR_INVALID_ARGUMENT,
                    x + size > dim && x >= 0 && x < dim
                        ? "%s: index %lld on axis %d of size %lld leaves no room for a slice of "
                          "%lld"
                        : "%s: index %lld is out of range for axis %d of size %lld (slice %lld)",
                    op, (long long)v[p], ax, (long long)dim, (long long)size);
                wf__buffer_release(held);
                return st;
            }
            offsets[p] += x * stride;
            if (tuples)
                tuples[p] = tuples[p] * dim + x;
        }
    }
    wf__buffer_release(held);
    return WF_OK;
}

/* A slice of `sizes` seen as rows: run length *run, and the offset of each
 * row's first element (in a layout of `strides`) in a new array of *rows
 * entries. */
static wf_status slice_rows(const char *op, int ndim, const int64_t *sizes,
                            const int64_t *strides, int64_t *rows, int64_t *run,
                            int64_t **row_offsets)
{
    int64_t r = 1;
    for (int d = 0; d + 1 < ndim; d++)
        r *= sizes[d];
    *rows = r;
    *run = ndim > 0 ? sizes[ndim - 1] : 1;
    int64_t *offs = wf__malloc((size_t)(r > 0 ? r : 1) * sizeof *offs);
    if (!offs)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    int64_t coord[WF_MAX_NDIM] = {0}, off = 0;
    for (int64_t i = 0; i < r; i++) {
        offs[i] = off;
        for (int d = ndim - 2; d >= 0; d--) { /* next row: odometer over dims < ndim - 1 */
            off += strides[d];
            if (++coord[d] < sizes[d])
                break;
            off -= coord[d] * strides[d];
            coord[d] = 0;
        }
    }
    *row_offsets = offs;
    return WF_OK;
}

/* ---------------------------------------------------------------- gather */

#define STRIDED_COPY(NAME, T)                                                               \
    static void NAME(char *dst, const char *src, int64_t n, int64_t stride)                 \
    {                                                                                       \
        T *restrict d = (T *)dst;                                                           \
        const T *restrict s = (const T *)src;                                               \
        for (int64_t i = 0; i < n; i++)                                                     \
            d[i] = s[i * stride];                                                           \
    }
STRIDED_COPY(strided_copy_1, uint8_t)
STRIDED_COPY(strided_copy_2, uint16_t)
STRIDED_COPY(strided_copy_4, uint32_t)
STRIDED_COPY(strided_copy_8, uint64_t)

/* Gathered outputs of at least this many bytes are far larger than the
 * caches: their runs are written around them (as iter.c's walks do). */
enum { GATHER_STREAM_BYTES = 1 << 24 };

/* How far ahead (bytes of runs) gather and scatter ask for the indexed runs
 * they will read next: a few DRAM latencies' worth of copying. */
enum { PREFETCH_AHEAD_BYTES = 4096 };

struct gather_job {
    const char *src;
    char *dst;
    const int64_t *offsets, *row_offsets;
    int64_t rows, run, run_stride;
    size_t item;
    bool stream; /* contiguous runs of whole lines written around the caches */
};

/* Asks for the cache lines of `bytes` at p (a hint; no effect on results). */
static inline void prefetch_run(const void *p, int64_t bytes)
{
    for (int64_t off = 0; off < bytes; off += 64)
        __builtin_prefetch((const char *)p + off);
}

/* Runs that are contiguous in the source: one copy each, the runs a few
 * KiB ahead fetched meanwhile (their sources are anywhere in `a`). */
static void gather_contiguous_runs(const struct gather_job *job, int64_t begin, int64_t end)
{
    const int64_t bytes = job->run * (int64_t)job->item;
    const int64_t ahead = bytes >= PREFETCH_AHEAD_BYTES ? 1 : PREFETCH_AHEAD_BYTES / bytes;
    const int64_t item = (int64_t)job->item;
    int64_t p = begin / job->rows, r = begin % job->rows;     /* run `begin` */
    int64_t pa = (begin + ahead) / job->rows, ra = (begin + ahead) % job->rows; /* the one ahead */
    for (int64_t w = begin; w < end; w++) {
        if (w + ahead < end)
            prefetch_run(job->src + (job->offsets[pa] + job->row_offsets[ra]) * item, bytes);
        const char *src = job->src + (job->offsets[p] + job->row_offsets[r]) * item;
        char *dst = job->dst + w * bytes;
        if (job->stream)
            wf__cpu_stream_copy(dst, src, (size_t)bytes);
        else
            memcpy(dst, src, (size_t)bytes);
        if (++r == job->rows) {
            r = 0;
            p++;
        }
        if (++ra == job->rows) {
            ra = 0;
            pa++;
        }
    }
    if (job->stream) /* before the pool hands the chunk back */
        wf__cpu_stream_fence();
}

static void gather_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct gather_job *job = arg;
    if (job->run_stride == 1 || job->run == 1) {
        gather_contiguous_runs(job, begin, end);
        return;
    }
    const int64_t item = (int64_t)job->item;
    for (int64_t w = begin; w < end; w++) {
        const int64_t p = w / job->rows, r = w % job->rows;
        const char *src = job->src + (job->offsets[p] + job->row_offsets[r]) * item;
        char *dst = job->dst + w * job->run * item;
        switch (job->item) {
        case 1: strided_copy_1(dst, src, job->run, job->run_stride); break;
        case 2: strided_copy_2(dst, src, job->run, job->run_stride); break;
        case 4: strided_copy_4(dst, src, job->run, job->run_stride); break;
        default: strided_copy_8(dst, src, job->run, job->run_stride); break;
        }
    }
}

wf_status wf__cpu_gather(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_gather_params *p = params;
    const wf_array *a = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    const int64_t n = p->naxes > 0 ? inputs[1]->size : 1;
    wf_buffer *held_offsets;
    int64_t *offsets = scratch_i64(&held_offsets, n), *row_offsets = NULL;
    if (!offsets)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_gather: out of memory");
    struct gather_job job = {.src = wf__array_data_ptr(a), .dst = wf__array_data_ptr(out),
                             .item = wf_dtype_size(a->dtype)};
    st = load_positions("wf_gather", inputs, 1, p->naxes, p->axes, a->shape, p->slice_sizes,
                        a->strides, n, offsets, NULL);
    if (st == WF_OK)
        st = slice_rows("wf_gather", a->ndim, p->slice_sizes, a->strides, &job.rows, &job.run,
                        &row_offsets);
    if (st == WF_OK) {
        job.offsets = offsets;
        job.row_offsets = row_offsets;
        job.run_stride = a->ndim > 0 ? a->strides[a->ndim - 1] : 1;
        /* whole lines only: a run sharing a line with the next would cost
         * a read of that line */
        job.stream = (uint64_t)out->size * job.item >= GATHER_STREAM_BYTES &&
                     job.run * (int64_t)job.item % 64 == 0;
        const int64_t per_item = job.run * (int64_t)job.item + 64;
        const int64_t min_chunk = per_item >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / per_item;
        wf__parallel_for(n * job.rows, min_chunk, gather_chunk, &job);
    }
    free(row_offsets);
    wf__buffer_release(held_offsets);
    return st;
}

/* ---------------------------------------------------------------- scatter: combining */

enum { COMBINE_TILE = 256, SCATTER_RUN_TILE = 1024 };

/* dst[0 .. m) = dst combined with each member's run, in member order. A
 * member k's run is at upd + members[k] * member_stride. members[count ..
 * lookahead) are the runs wanted next (the following groups'): the loop
 * fetches runs a few KiB ahead of the one it adds, across groups. */
typedef void (*combine_fn)(char *dst, const char *upd, int64_t member_stride,
                           const int64_t *members, int64_t count, int64_t lookahead, int64_t m);

#define COMBINE(NAME, T, ACC, LOAD, OP, STORE)                                              \
    static void NAME(char *dst_, const char *upd_, int64_t member_stride,                   \
                     const int64_t *members, int64_t count, int64_t lookahead, int64_t m)   \
    {                                                                                       \
        T *dst = (T *)dst_;                                                                 \
        const T *upd = (const T *)upd_;                                                     \
        ACC acc[COMBINE_TILE];                                                              \
        for (int64_t b0 = 0; b0 < m; b0 += COMBINE_TILE) {                                  \
            const int64_t mm = m - b0 < COMBINE_TILE ? m - b0 : COMBINE_TILE;               \
            const int64_t bytes = mm * (int64_t)sizeof(T);                                  \
            const int64_t ahead =                                                           \
                bytes >= PREFETCH_AHEAD_BYTES ? 1 : PREFETCH_AHEAD_BYTES / bytes;           \
            for (int64_t c = 0; c < mm; c++)                                                \
                acc[c] = LOAD(dst[b0 + c]);                                                 \
            for (int64_t k = 0; k < count; k++) {                                           \
                const T *u = upd + members[k] * member_stride + b0;                         \
                if (k + ahead < lookahead) /* the runs lie anywhere: fetch ahead */         \
                    prefetch_run(upd + members[k + ahead] * member_stride + b0, bytes);     \
                for (int64_t c = 0; c < mm; c++)                                            \
                    acc[c] = OP(acc[c], LOAD(u[c]));                                        \
            }                                                                               \
            for (int64_t c = 0; c < mm; c++)                                                \
                dst[b0 + c] = STORE(acc[c]);                                                \
        }                                                                                   \
    }

#define ID(x) (x)
#define AS_U32(x) ((uint32_t)(x))
#define AS_U64(x) ((uint64_t)(x))
#define OP_OR(a, b) ((uint8_t)((a) | (b)))
#define OP_AND(a, b) ((uint8_t)((a) & (b)))
#define OP_ADD_U8(a, b) ((uint8_t)((a) + (b)))
#define OP_MUL_U8(a, b) ((uint8_t)((unsigned)(a) * (unsigned)(b)))
#define OP_PLUS(a, b) ((a) + (b))
#define OP_TIMES(a, b) ((a) * (b))
#define OP_MAX_INT(a, b) ((a) > (b) ? (a) : (b))
#define OP_MIN_INT(a, b) ((a) < (b) ? (a) : (b))
/* NaN in either operand wins (a NaN accumulator stays NaN). */
#define OP_MAX_FLOAT(a, b) (((a) >= (b) || (a) != (a)) ? (a) : (b))
#define OP_MIN_FLOAT(a, b) (((a) <= (b) || (a) != (a)) ? (a) : (b))

COMBINE(add_bool, uint8_t, uint8_t, ID, OP_OR, ID)
COMBINE(prod_bool, uint8_t, uint8_t, ID, OP_AND, ID)
COMBINE(add_u8, uint8_t, uint8_t, ID, OP_ADD_U8, ID)
COMBINE(prod_u8, uint8_t, uint8_t, ID, OP_MUL_U8, ID)
COMBINE(max_u8, uint8_t, uint8_t, ID, OP_MAX_INT, ID)
COMBINE(min_u8, uint8_t, uint8_t, ID, OP_MIN_INT, ID)
COMBINE(add_i32, int32_t, uint32_t, AS_U32, OP_PLUS, wf__cpu_wrap_i32)
COMBINE(prod_i32, int32_t, uint32_t, AS_U32, OP_TIMES, wf__cpu_wrap_i32)
COMBINE(max_i32, int32_t, int32_t, ID, OP_MAX_INT, ID)
COMBINE(min_i32, int32_t, int32_t, ID, OP_MIN_INT, ID)
COMBINE(add_i64, int64_t, uint64_t, AS_U64, OP_PLUS, wf__cpu_wrap_i64)
COMBINE(prod_i64, int64_t, uint64_t, AS_U64, OP_TIMES, wf__cpu_wrap_i64)
COMBINE(max_i64, int64_t, int64_t, ID, OP_MAX_INT, ID)
COMBINE(min_i64, int64_t, int64_t, ID, OP_MIN_INT, ID)
COMBINE(add_i8, int8_t, uint32_t, AS_U32, OP_PLUS, (int8_t))
COMBINE(prod_i8, int8_t, uint32_t, AS_U32, OP_TIMES, (int8_t))
COMBINE(max_i8, int8_t, int8_t, ID, OP_MAX_INT, ID)
COMBINE(min_i8, int8_t, int8_t, ID, OP_MIN_INT, ID)
COMBINE(add_i16, int16_t, uint32_t, AS_U32, OP_PLUS, (int16_t))
COMBINE(prod_i16, int16_t, uint32_t, AS_U32, OP_TIMES, (int16_t))
COMBINE(max_i16, int16_t, int16_t, ID, OP_MAX_INT, ID)
COMBINE(min_i16, int16_t, int16_t, ID, OP_MIN_INT, ID)
COMBINE(add_u16, uint16_t, uint32_t, AS_U32, OP_PLUS, (uint16_t))
COMBINE(prod_u16, uint16_t, uint32_t, AS_U32, OP_TIMES, (uint16_t))
COMBINE(max_u16, uint16_t, uint16_t, ID, OP_MAX_INT, ID)
COMBINE(min_u16, uint16_t, uint16_t, ID, OP_MIN_INT, ID)
COMBINE(add_u32, uint32_t, uint32_t, ID, OP_PLUS, ID)
COMBINE(prod_u32, uint32_t, uint32_t, ID, OP_TIMES, ID)
COMBINE(max_u32, uint32_t, uint32_t, ID, OP_MAX_INT, ID)
COMBINE(min_u32, uint32_t, uint32_t, ID, OP_MIN_INT, ID)
COMBINE(add_u64, uint64_t, uint64_t, ID, OP_PLUS, ID)
COMBINE(prod_u64, uint64_t, uint64_t, ID, OP_TIMES, ID)
COMBINE(max_u64, uint64_t, uint64_t, ID, OP_MAX_INT, ID)
COMBINE(min_u64, uint64_t, uint64_t, ID, OP_MIN_INT, ID)
COMBINE(add_f16, uint16_t, float, wf__f16_to_f32, OP_PLUS, wf__f32_to_f16)
COMBINE(prod_f16, uint16_t, float, wf__f16_to_f32, OP_TIMES, wf__f32_to_f16)
COMBINE(max_f16, uint16_t, float, wf__f16_to_f32, OP_MAX_FLOAT, wf__f32_to_f16)
COMBINE(min_f16, uint16_t, float, wf__f16_to_f32, OP_MIN_FLOAT, wf__f32_to_f16)
COMBINE(add_bf16, uint16_t, float, wf__bf16_to_f32, OP_PLUS, wf__f32_to_bf16)
COMBINE(prod_bf16, uint16_t, float, wf__bf16_to_f32, OP_TIMES, wf__f32_to_bf16)
COMBINE(max_bf16, uint16_t, float, wf__bf16_to_f32, OP_MAX_FLOAT, wf__f32_to_bf16)
COMBINE(min_bf16, uint16_t, float, wf__bf16_to_f32, OP_MIN_FLOAT, wf__f32_to_bf16)
COMBINE(add_f32, float, float, ID, OP_PLUS, ID)
COMBINE(prod_f32, float, float, ID, OP_TIMES, ID)
COMBINE(max_f32, float, float, ID, OP_MAX_FLOAT, ID)
COMBINE(min_f32, float, float, ID, OP_MIN_FLOAT, ID)
COMBINE(add_f64, double, double, ID, OP_PLUS, ID)
COMBINE(prod_f64, double, double, ID, OP_TIMES, ID)
COMBINE(max_f64, double, double, ID, OP_MAX_FLOAT, ID)
COMBINE(min_f64, double, double, ID, OP_MIN_FLOAT, ID)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* add_f32 for runs of at least ADD_F32_COLUMNS floats, AVX2: the
 * accumulators of ADD_F32_COLUMNS columns stay in registers while up to
 * ADD_F32_MEMBERS members' runs are added (the runs of those members then
 * stay in L1 for the next columns), and go back to dst in between. Every
 * element still sees its members one after another in member order, each
 * sum rounded to float32 as it is formed: add_f32's bits. */
enum { ADD_F32_COLUMNS = 64, ADD_F32_MEMBERS = 16 };

__attribute__((target("avx2"))) static void add_f32_avx2(char *dst_, const char *upd_,
                                                          int64_t member_stride,
                                                          const int64_t *members, int64_t count,
                                                          int64_t lookahead, int64_t m)
{
    float *dst = (float *)dst_;
    const float *upd = (const float *)upd_;
    const int64_t bytes = m * (int64_t)sizeof(float);
    const int64_t ahead = bytes >= PREFETCH_AHEAD_BYTES ? 1 : PREFETCH_AHEAD_BYTES / bytes;
    if (m < ADD_F32_COLUMNS) {
        add_f32(dst_, upd_, member_stride, members, count, lookahead, m);
        return;
    }
    const int64_t wide = m - m % ADD_F32_COLUMNS;
    for (int64_t k0 = 0; k0 < count; k0 += ADD_F32_MEMBERS) {
        const int64_t k1 = k0 + ADD_F32_MEMBERS < count ? k0 + ADD_F32_MEMBERS : count;
        for (int64_t c0 = 0; c0 < wide; c0 += ADD_F32_COLUMNS) {
            __m256 acc[ADD_F32_COLUMNS / 8];
#pragma GCC unroll 8
            for (int j = 0; j < ADD_F32_COLUMNS / 8; j++)
                acc[j] = _mm256_loadu_ps(dst + c0 + 8 * j);
            for (int64_t k = k0; k < k1; k++) {
                if (c0 == 0 && k + ahead < lookahead) /* the runs lie anywhere: fetch ahead */
                    prefetch_run(upd + members[k + ahead] * member_stride, bytes);
                const float *u = upd + members[k] * member_stride + c0;
#pragma GCC unroll 8
                for (int j = 0; j < ADD_F32_COLUMNS / 8; j++)
                    acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(u + 8 * j));
            }
#pragma GCC unroll 8
            for (int j = 0; j < ADD_F32_COLUMNS / 8; j++)
                _mm256_storeu_ps(dst + c0 + 8 * j, acc[j]);
        }
        for (int64_t c = wide; c < m; c++) {
            float acc = dst[c];
            for (int64_t k = k0; k < k1; k++)
                acc += upd[members[k] * member_stride + c];
            dst[c] = acc;
        }
    }
}
#endif

/* The combining loop of (dtype, mode); NULL for REPLACE (a copy of the
 * last member) or a dtype scatter does not know. */
static combine_fn combine_loop(wf_dtype dtype, int mode)
{
    static const combine_fn loops[WF_DTYPE_COUNT][4] = {
        [WF_DTYPE_BOOL] = {add_bool, prod_bool, add_bool, prod_bool},
        [WF_DTYPE_U8] = {add_u8, prod_u8, max_u8, min_u8},
        [WF_DTYPE_I32] = {add_i32, prod_i32, max_i32, min_i32},
        [WF_DTYPE_I64] = {add_i64, prod_i64, max_i64, min_i64},
        [WF_DTYPE_F16] = {add_f16, prod_f16, max_f16, min_f16},
        [WF_DTYPE_BF16] = {add_bf16, prod_bf16, max_bf16, min_bf16},
        [WF_DTYPE_F32] = {add_f32, prod_f32, max_f32, min_f32},
        [WF_DTYPE_F64] = {add_f64, prod_f64, max_f64, min_f64},
        [WF_DTYPE_I8] = {add_i8, prod_i8, max_i8, min_i8},
        [WF_DTYPE_I16] = {add_i16, prod_i16, max_i16, min_i16},
        [WF_DTYPE_U16] = {add_u16, prod_u16, max_u16, min_u16},
        [WF_DTYPE_U32] = {add_u32, prod_u32, max_u32, min_u32},
        [WF_DTYPE_U64] = {add_u64, prod_u64, max_u64, min_u64},
        /* complex64: REPLACE only (refused at construction otherwise) */
    };
    if (mode == WF_SCATTER_REPLACE || (int)dtype < 0 || dtype >= WF_DTYPE_COUNT)
        return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    if (dtype == WF_DTYPE_F32 && mode == WF_SCATTER_ADD && wf__vm_isa_active() >= WF_VM_ISA_AVX2 &&
        __builtin_cpu_supports("avx2"))
        return add_f32_avx2;
#endif
    return loops[dtype][mode - 1];
}

/* ---------------------------------------------------------------- scatter: the walk */

struct scatter_job {
    char *out;
    const char *upd;        /* contiguous updates: (n, rows, run) */
    const int64_t *order;   /* positions, grouped */
    const int64_t *groups;  /* ngroups + 1 starts into order */
    const int64_t *offsets; /* per position: its slice's start in out */
    const int64_t *row_offsets;
    int64_t ngroups, rows, run, ntiles;
    int64_t group; /* the one group scatter_one_group_chunk runs */
    size_t item;
    combine_fn combine; /* NULL: replace */
};

/* Group g, slice row r, run tile t; groups before `next_end` run next on
 * this thread. */
static void scatter_item(const struct scatter_job *job, int64_t g, int64_t r, int64_t t,
                         int64_t next_end)
{
    const int64_t item = (int64_t)job->item;
    const int64_t *members = job->order + job->groups[g];
    const int64_t count = job->groups[g + 1] - job->groups[g];
    const int64_t c0 = t * SCATTER_RUN_TILE;
    const int64_t m = job->run - c0 < SCATTER_RUN_TILE ? job->run - c0 : SCATTER_RUN_TILE;
    const int64_t member_stride = job->rows * job->run; /* elements between positions */
    char *dst = job->out + (job->offsets[members[0]] + job->row_offsets[r] + c0) * item;
    const char *upd = job->upd + (r * job->run + c0) * item;
    if (!job->combine) {
        memcpy(dst, upd + members[count - 1] * member_stride * item, (size_t)(m * item));
        return;
    }
    /* the next groups' runs are the next read only when a group is one run */
    const int64_t lookahead =
        job->rows == 1 && job->ntiles == 1 ? job->groups[next_end] - job->groups[g] : count;
    job->combine(dst, upd, member_stride, members, count, lookahead, m);
}

static void scatter_groups_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct scatter_job *job = arg;
    for (int64_t w = begin; w < end; w++) {
        const int64_t t = w % job->ntiles, gr = w / job->ntiles;
        scatter_item(job, gr / job->rows, gr % job->rows, t, (end - 1) / job->ntiles / job->rows + 1);
    }
}

static void scatter_one_group_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct scatter_job *job = arg;
    for (int64_t w = begin; w < end; w++)
        scatter_item(job, job->group, w / job->ntiles, w % job->ntiles, job->group + 1);
}

/* Stable order of positions 0..n-1 by tuple, into order (tmp: n scratch). */
static void merge_sort_by_tuple(int64_t *order, int64_t *tmp, const int64_t *tuple, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            const int64_t mid = lo + width < n ? lo + width : n;
            const int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = tuple[order[j]] < tuple[order[i]] ? order[j++] : order[i++];
            while (i < mid)
                tmp[k++] = order[i++];
            while (j < hi)
                tmp[k++] = order[j++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

/* group_by_tuple for a small range: a stable counting sort, whose counts
 * also give the groups (one per tuple with members, in tuple order). */
static int64_t group_by_counting(const int64_t *tuple, int64_t n, int64_t range, int64_t *order,
                                 int64_t *groups)
{
    int64_t *count = wf__calloc((size_t)range + 1, sizeof *count);
    if (!count)
        return -1;
    for (int64_t p = 0; p < n; p++)
        count[tuple[p] + 1]++;
    int64_t ngroups = 0;
    for (int64_t v = 0; v < range; v++) {
        if (count[v + 1] > 0) /* tuple v's members start at count[v] */
            groups[ngroups++] = count[v];
        count[v + 1] += count[v];
    }
    groups[ngroups] = n;
    for (int64_t p = 0; p < n; p++)
        order[count[tuple[p]]++] = p;
    free(count);
    return ngroups;
}

/* Groups positions by tuple (range: tuples lie in [0, range)): order holds
 * the positions, group g is order[groups[g] .. groups[g + 1]). groups has
 * room for n + 1. Returns the number of groups, or -1 out of memory. */
static int64_t group_by_tuple(const int64_t *tuple, int64_t n, int64_t range, int64_t *order,
                              int64_t *groups)
{
    if (range <= 2 * n + 4096)
        return group_by_counting(tuple, n, range, order, groups);
    int64_t *tmp = wf__malloc((size_t)n * sizeof *tmp);
    if (!tmp)
        return -1;
    merge_sort_by_tuple(order, tmp, tuple, n);
    free(tmp);
    int64_t ngroups = 0;
    for (int64_t k = 0; k < n; k++)
        if (k == 0 || tuple[order[k]] != tuple[order[k - 1]])
            groups[ngroups++] = k;
    groups[ngroups] = n;
    return ngroups;
}

wf_status wf__cpu_scatter(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)ninputs;
    const wf_scatter_params *p = params;
    const wf_array *a = inputs[0], *updates = inputs[1];
    const char *op = "wf_scatter";
    wf_status st = wf__array_alloc_output(out);
    /* a donated table (WF_PRIM_INPLACE_FIRST) already is the output */
    if (st == WF_OK && wf__array_data_ptr(out) != wf__array_data_ptr(a))
        st = wf__cpu_copy_to_contiguous(a, wf__array_data_ptr(out));
    if (st != WF_OK || updates->size == 0)
        return st;
    const int indim = updates->ndim - a->ndim;
    const int64_t n = p->naxes > 0 ? inputs[2]->size : 1;
    const int64_t *sizes = updates->shape + indim;
    int64_t out_strides[WF_MAX_NDIM];
    wf__contiguous_strides(a->shape, a->ndim, out_strides);
    bool groupable = true;
    int64_t range = 1;
    for (int k = 0; k < p->naxes; k++) {
        groupable = groupable && sizes[p->axes[k]] == 1;
        /* updates->size > 0: every dim of a is too (slice dims are <= a's) */
        const int64_t dim = a->shape[p->axes[k]];
        range = range > (INT64_MAX / 4) / dim ? INT64_MAX / 4 : range * dim;
    }
    struct scatter_job job = {.out = wf__array_data_ptr(out),
                              .item = wf_dtype_size(a->dtype),
                              .combine = combine_loop(a->dtype, p->mode)};
    wf_buffer *held[4];
    int64_t *offsets = scratch_i64(&held[0], n), *tuples = scratch_i64(&held[1], n);
    int64_t *order = scratch_i64(&held[2], n), *groups = scratch_i64(&held[3], n + 1);
    int64_t *row_offsets = NULL;
    void *upd_copy = NULL;
    if (!offsets || !tuples || !order || !groups)
        st = wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    if (st == WF_OK)
        st = load_positions(op, inputs, 2, p->naxes, p->axes, a->shape, sizes, out_strides, n,
                            offsets, tuples);
    if (st == WF_OK)
        st = slice_rows(op, a->ndim, sizes, out_strides, &job.rows, &job.run, &row_offsets);
    job.upd = wf__array_data_ptr(updates);
    if (st == WF_OK && !wf__is_row_contiguous(updates->shape, updates->strides, updates->ndim)) {
        upd_copy = wf__malloc((size_t)updates->size * job.item);
        if (!upd_copy)
            st = wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        else
            st = wf__cpu_copy_to_contiguous(updates, upd_copy);
        job.upd = upd_copy;
    }
    if (st == WF_OK) {
        job.offsets = offsets;
        job.row_offsets = row_offsets;
        job.order = order;
        job.groups = groups;
        job.ntiles = (job.run + SCATTER_RUN_TILE - 1) / SCATTER_RUN_TILE;
        const int64_t tile = job.run < SCATTER_RUN_TILE ? job.run : SCATTER_RUN_TILE;
        if (groupable) {
            job.ngroups = group_by_tuple(tuples, n, range, order, groups);
            if (job.ngroups < 0) {
                st = wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
            } else {
                const int64_t per_item = (n / (job.ngroups > 0 ? job.ngroups : 1) + 1) * tile + 32;
                const int64_t min_chunk =
                    per_item >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / per_item;
                wf__parallel_for(job.ngroups * job.rows * job.ntiles, min_chunk,
                                 scatter_groups_chunk, &job);
            }
        } else { /* slices may overlap: one position after another */
            for (int64_t q = 0; q < n; q++) {
                order[q] = q;
                groups[q] = q;
            }
            groups[n] = n;
            job.ngroups = n;
            const int64_t min_chunk = tile >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / (tile + 32);
            for (int64_t g = 0; g < n; g++) {
                job.group = g;
                wf__parallel_for(job.rows * job.ntiles, min_chunk, scatter_one_group_chunk, &job);
            }
        }
    }
    free(upd_copy);
    free(row_offsets);
    for (int i = 0; i < 4; i++)
        wf__buffer_release(held[i]);
    return st;
}
