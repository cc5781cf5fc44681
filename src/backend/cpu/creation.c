/* Creation kernels: full, full_like, arange, linspace, eye. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/index.h"
#include "core/dtype.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "runtime/pool.h"

enum { ARANGE_BLOCK = 256 };

static wf_status fill(wf_array *out, double value)
{
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    uint64_t item = 0; /* one element of out->dtype, broadcast with stride 0 */
    wf__store_from_double(&item, out->dtype, 0, value);
    const int64_t size = out->size, zero = 0;
    wf__cpu_copy_strided(1, &size, wf_dtype_size(out->dtype), &item, &zero,
                         wf__array_data_ptr(out));
    return WF_OK;
}

wf_status wf__cpu_full(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)inputs;
    (void)ninputs;
    return fill(out, ((const wf_full_params *)params)->value);
}

/* The input gives the shape only (already in out); its data is not read. */
wf_status wf__cpu_full_like(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params)
{
    (void)inputs;
    (void)ninputs;
    return fill(out, ((const wf_full_like_params *)params)->value);
}

/* x's size over like's (0 for an empty like): a count, not data. */
wf_status wf__cpu_size_ratio(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    (void)params;
    const int64_t x = inputs[0]->size, like = inputs[1]->size;
    return fill(out, like ? (double)x / (double)like : 0.0);
}

/* start + i * step is computed in double for a block, then converted. */
wf_status wf__cpu_arange(wf_array *out, wf_array *const *inputs, int ninputs,
                         const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_arange_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    char *dst = wf__array_data_ptr(out);
    const size_t item = wf_dtype_size(out->dtype);
    double block[ARANGE_BLOCK];
    for (int64_t i0 = 0; i0 < out->size; i0 += ARANGE_BLOCK) {
        const int64_t m = out->size - i0 < ARANGE_BLOCK ? out->size - i0 : ARANGE_BLOCK;
        for (int64_t i = 0; i < m; i++)
            block[i] = p->start + (double)(i0 + i) * p->step;
        wf__cpu_convert_1d(m, block, WF_DTYPE_F64, 1, dst + i0 * (int64_t)item, out->dtype, 1);
    }
    return WF_OK;
}

/* NumPy's linspace: start + i * step in double, step = (stop - start) /
 * (num - 1) (or i / (num - 1) * delta when step underflows to 0), the last
 * element exactly stop; num == 1 gives start. Converted a block at a time. */
struct linspace_job {
    const wf_linspace_params *p;
    char *dst;
    wf_dtype dtype;
};

static void linspace_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct linspace_job *job = arg;
    const wf_linspace_params *p = job->p;
    const size_t item = wf_dtype_size(job->dtype);
    const double div = p->num > 1 ? (double)(p->num - 1) : 1.0;
    const double delta = p->stop - p->start;
    const double step = delta / div;
    double block[ARANGE_BLOCK];
    for (int64_t i0 = begin; i0 < end; i0 += ARANGE_BLOCK) {
        const int64_t m = end - i0 < ARANGE_BLOCK ? end - i0 : ARANGE_BLOCK;
        if (step != 0.0) {
            for (int64_t i = 0; i < m; i++)
                block[i] = p->start + (double)(i0 + i) * step;
        } else {
            for (int64_t i = 0; i < m; i++)
                block[i] = p->start + (double)(i0 + i) / div * delta;
        }
        if (p->num > 1 && i0 + m == p->num)
            block[m - 1] = p->stop;
        wf__cpu_convert_1d(m, block, WF_DTYPE_F64, 1, job->dst + i0 * (int64_t)item, job->dtype,
                           1);
    }
}

wf_status wf__cpu_linspace(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params)
{
    (void)inputs;
    (void)ninputs;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    struct linspace_job job = {params, wf__array_data_ptr(out), out->dtype};
    wf__parallel_for(out->size, WF_CPU_CHUNK_COSTLY, linspace_chunk, &job);
    return WF_OK;
}

/* Zeros, then a one at (i, i + k) for each row i where 0 <= i + k < m. */
wf_status wf__cpu_eye(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_eye_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    const size_t item = wf_dtype_size(out->dtype);
    char *dst = wf__array_data_ptr(out);
    uint64_t zero = 0, one = 0;
    const int64_t size = out->size, stride0 = 0;
    wf__cpu_copy_strided(1, &size, item, &zero, &stride0, dst);
    wf__store_from_double(&one, out->dtype, 0, 1.0);
    /* Rows with a one: max(0, -k) <= i < min(n, m - k), for -n < k < m. */
    if (p->k <= -p->n || p->k >= p->m)
        return WF_OK;
    const int64_t row_begin = p->k < 0 ? -p->k : 0;
    const int64_t row_end = p->m - p->k < p->n ? p->m - p->k : p->n;
    for (int64_t i = row_begin; i < row_end; i++)
        memcpy(dst + (i * p->m + i + p->k) * (int64_t)item, &one, item);
    return WF_OK;
}
