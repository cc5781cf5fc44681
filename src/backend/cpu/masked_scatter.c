/*
 * masked_scatter kernel (prim/scatter.h): copies `a`, then writes each
 * batch row's source elements, in order, where the row's mask is true.
 *
 * Three passes over fixed chunks of each row (their size does not depend
 * on the thread count): the true elements of every chunk are counted in
 * parallel, a serial prefix sum gives each chunk its first source element
 * (and finds a row that asks for more elements than its source has, before
 * anything is read), and the chunks are filled in parallel. Every output
 * element has one writer, so the result never depends on the threads.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/scatter.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "prim/scatter.h"
#include "runtime/pool.h"
#include "util/fault.h"

enum { MASK_CHUNK = 1 << 14 };

struct masked_job {
    const uint8_t *mask; /* (rows, row_len), any non-zero byte is true */
    const char *src;     /* (rows, src_len) */
    char *out;           /* (rows, row_len) */
    int64_t row_len, src_len, chunks_per_row;
    int64_t *counts; /* per chunk: true elements, then its first source element */
    size_t item;
};

static void chunk_bounds(const struct masked_job *job, int64_t j, int64_t *row, int64_t *lo,
                         int64_t *hi)
{
    *row = j / job->chunks_per_row;
    *lo = (j % job->chunks_per_row) * MASK_CHUNK;
    *hi = *lo + MASK_CHUNK < job->row_len ? *lo + MASK_CHUNK : job->row_len;
}

static void count_chunk(void *arg, int64_t begin, int64_t end)
{
    struct masked_job *job = arg;
    for (int64_t j = begin; j < end; j++) {
        int64_t row, lo, hi, n = 0;
        chunk_bounds(job, j, &row, &lo, &hi);
        const uint8_t *m = job->mask + row * job->row_len;
        for (int64_t i = lo; i < hi; i++)
            n += m[i] != 0;
        job->counts[j] = n;
    }
}

#define FILL_RUN(NAME, T)                                                                   \
    static void NAME(T *restrict out, const T *restrict src, const uint8_t *m, int64_t lo,  \
                     int64_t hi)                                                            \
    {                                                                                       \
        for (int64_t i = lo; i < hi; i++)                                                   \
            if (m[i])                                                                       \
                out[i] = *src++;                                                            \
    }
FILL_RUN(fill_1, uint8_t)
FILL_RUN(fill_2, uint16_t)
FILL_RUN(fill_4, uint32_t)
FILL_RUN(fill_8, uint64_t)

static void fill_chunk(void *arg, int64_t begin, int64_t end)
{
    struct masked_job *job = arg;
    for (int64_t j = begin; j < end; j++) {
        int64_t row, lo, hi;
        chunk_bounds(job, j, &row, &lo, &hi);
        const uint8_t *m = job->mask + row * job->row_len;
        char *out = job->out + (size_t)(row * job->row_len) * job->item;
        const char *src = job->src + (size_t)(row * job->src_len + job->counts[j]) * job->item;
        switch (job->item) {
        case 1: fill_1((uint8_t *)out, (const uint8_t *)src, m, lo, hi); break;
        case 2: fill_2((uint16_t *)out, (const uint16_t *)src, m, lo, hi); break;
        case 4: fill_4((uint32_t *)out, (const uint32_t *)src, m, lo, hi); break;
        default: fill_8((uint64_t *)out, (const uint64_t *)src, m, lo, hi); break;
        }
    }
}

/* Turns the chunk counts into each chunk's first source element, row by
 * row; fails naming the first row that selects more than its source has. */
static wf_status chunk_starts(struct masked_job *job, int64_t rows, int nbatch)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t taken = 0;
        int64_t *c = job->counts + r * job->chunks_per_row;
        for (int64_t k = 0; k < job->chunks_per_row; k++) {
            const int64_t n = c[k];
            c[k] = taken;
            taken += n;
        }
        if (taken > job->src_len)
            return nbatch > 0
                       ? wf__error(WF_ERR_INVALID_ARGUMENT,
                                   "wf_masked_scatter: the mask selects %lld elements in batch "
                                   "row %lld but the source has only %lld",
                                   (long long)taken, (long long)r, (long long)job->src_len)
                       : wf__error(WF_ERR_INVALID_ARGUMENT,
                                   "wf_masked_scatter: the mask selects %lld elements but the "
                                   "source has only %lld",
                                   (long long)taken, (long long)job->src_len);
    }
    return WF_OK;
}

/* x's data if row-contiguous, else a contiguous copy in *copy (freed by
 * the caller). */
static wf_status contiguous_data(const wf_array *x, void **copy, const void **data)
{
    *copy = NULL;
    if (wf__is_row_contiguous(x->shape, x->strides, x->ndim)) {
        *data = wf__array_data_ptr(x);
        return WF_OK;
    }
    *copy = wf__malloc((size_t)x->size * wf_dtype_size(x->dtype));
    if (!*copy)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_masked_scatter: out of memory");
    *data = *copy;
    return wf__cpu_copy_to_contiguous(x, *copy);
}

wf_status wf__cpu_masked_scatter(wf_array *out, wf_array *const *inputs, int ninputs,
                                 const void *params)
{
    (void)ninputs;
    const wf_masked_scatter_params *p = params;
    const wf_array *a = inputs[0], *mask = inputs[1], *src = inputs[2];
    wf_status st = wf__array_alloc_output(out);
    /* a donated array (WF_PRIM_INPLACE_FIRST) already is the output */
    if (st == WF_OK && wf__array_data_ptr(out) != wf__array_data_ptr(a))
        st = wf__cpu_copy_to_contiguous(a, wf__array_data_ptr(out));
    if (st != WF_OK || a->size == 0)
        return st;
    int64_t rows = 1;
    for (int d = 0; d < p->nbatch; d++)
        rows *= a->shape[d];
    struct masked_job job = {.out = wf__array_data_ptr(out),
                             .item = wf_dtype_size(a->dtype),
                             .row_len = a->size / rows,
                             .src_len = src->shape[p->nbatch]};
    job.chunks_per_row = (job.row_len + MASK_CHUNK - 1) / MASK_CHUNK;
    const int64_t nchunks = rows * job.chunks_per_row;
    void *mask_copy = NULL, *src_copy = NULL;
    const void *mask_data = NULL, *src_data = NULL;
    job.counts = wf__malloc((size_t)nchunks * sizeof *job.counts);
    if (!job.counts)
        st = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_masked_scatter: out of memory");
    if (st == WF_OK)
        st = contiguous_data(mask, &mask_copy, &mask_data);
    if (st == WF_OK) {
        job.mask = mask_data;
        wf__parallel_for(nchunks, 1, count_chunk, &job);
        st = chunk_starts(&job, rows, p->nbatch);
    }
    if (st == WF_OK && src->size > 0)
        st = contiguous_data(src, &src_copy, &src_data);
    if (st == WF_OK && src->size > 0) {
        job.src = src_data;
        wf__parallel_for(nchunks, 1, fill_chunk, &job);
    }
    free(src_copy);
    free(mask_copy);
    free(job.counts);
    return st;
}
