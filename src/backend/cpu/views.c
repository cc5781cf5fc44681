/* Layout kernels: transpose, broadcast_to and slice make views; reshape
 * makes a view whenever the input's strides allow it (NumPy's
 * attempt_nocopy_reshape) and copies otherwise. The copying layout kernels
 * (slice_update, concatenate, pad, tril/triu) walk their operands with the
 * strided iterator. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/index.h"
#include "core/dtype.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "prim/sibling.h"
#include "runtime/pool.h"

bool wf__cpu_reshape_strides(const int64_t *shape, const int64_t *strides, int ndim,
                             const int64_t *nshape, int nndim, int64_t *nstrides)
{
    int64_t odims[WF_MAX_NDIM], ostrides[WF_MAX_NDIM];
    int ond = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return false;
        if (shape[d] != 1) {
            odims[ond] = shape[d];
            ostrides[ond] = strides[d];
            ond++;
        }
    }
    for (int d = 0; d < nndim; d++)
        if (nshape[d] == 0)
            return false;
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nndim && oi < ond) {
        int64_t np = nshape[ni], op = odims[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= nndim)
                    return false;
                np *= nshape[nj++];
            } else {
                if (oj >= ond)
                    return false;
                op *= odims[oj++];
            }
        }
        /* The old dims oi..oj-1 must be contiguous with each other. */
        for (int k = oi; k < oj - 1; k++)
            if (ostrides[k] != odims[k + 1] * ostrides[k + 1])
                return false;
        nstrides[nj - 1] = ostrides[oj - 1];
        for (int k = nj - 1; k > ni; k--)
            nstrides[k - 1] = nstrides[k] * nshape[k];
        ni = nj++;
        oi = oj++;
    }
    /* Trailing size-1 dims: any stride will do. */
    for (int k = ni; k < nndim; k++)
        nstrides[k] = 1;
    return true;
}

wf_status wf__cpu_reshape(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *in = inputs[0];
    int64_t strides[WF_MAX_NDIM];
    if (in->size == 0 || wf__is_row_contiguous(in->shape, in->strides, in->ndim)) {
        wf__contiguous_strides(out->shape, out->ndim, strides);
        wf__array_set_view(out, in, strides, in->offset);
        return WF_OK;
    }
    if (wf__cpu_reshape_strides(in->shape, in->strides, in->ndim, out->shape, out->ndim,
                                strides)) {
        wf__array_set_view(out, in, strides, in->offset);
        return WF_OK;
    }
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    return wf__cpu_copy_to_contiguous(in, wf__array_data_ptr(out));
}

wf_status wf__cpu_view(wf_array *out, wf_array *const *inputs, int ninputs,
                       const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *in = inputs[0];
    const int64_t from = (int64_t)wf_dtype_size(in->dtype), to = (int64_t)wf_dtype_size(out->dtype);
    if (from == to) { /* strides and offset count elements of one size */
        wf__array_set_view(out, in, in->strides, in->offset);
        return WF_OK;
    }
    const int64_t offset_bytes = in->offset * from;
    if ((in->size == 0 || wf__is_row_contiguous(in->shape, in->strides, in->ndim)) &&
        offset_bytes % to == 0) {
        int64_t strides[WF_MAX_NDIM];
        wf__contiguous_strides(out->shape, out->ndim, strides);
        wf__array_set_view(out, in, strides, offset_bytes / to);
        return WF_OK;
    }
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    return wf__cpu_copy_to_contiguous(in, wf__array_data_ptr(out)); /* the same bytes */
}

wf_status wf__cpu_transpose(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_transpose_params *p = params;
    int64_t strides[WF_MAX_NDIM];
    for (int i = 0; i < out->ndim; i++)
        strides[i] = in->strides[p->perm[i]];
    wf__array_set_view(out, in, strides, in->offset);
    return WF_OK;
}

wf_status wf__cpu_broadcast_to(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *in = inputs[0];
    const int lead = out->ndim - in->ndim;
    int64_t strides[WF_MAX_NDIM];
    for (int i = 0; i < out->ndim; i++) {
        const int j = i - lead;
        const bool stretched = j < 0 || (in->shape[j] == 1 && out->shape[i] != 1);
        strides[i] = stretched ? 0 : in->strides[j];
    }
    wf__array_set_view(out, in, strides, in->offset);
    return WF_OK;
}

/* A sibling of a multi-output primary: a view of the primary's result. */
wf_status wf__cpu_sibling(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)ninputs;
    const wf_sibling_params *p = params;
    const wf_array *result = wf__node_output(inputs[0], p->index);
    wf__array_set_view(out, result, result->strides, result->offset);
    return WF_OK;
}

wf_status wf__cpu_slice(wf_array *out, wf_array *const *inputs, int ninputs,
                        const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_slice_params *p = params;
    int64_t strides[WF_MAX_NDIM];
    int64_t offset = in->offset;
    for (int d = 0; d < in->ndim; d++) {
        int64_t first, count;
        wf__slice_resolve(in->shape[d], p->starts[d], p->stops[d], p->steps[d], &first, &count);
        /* With fewer than two elements the stride is never used; keeping the
         * input's avoids overflowing stride * step for huge steps. */
        strides[d] = count > 1 ? in->strides[d] * p->steps[d] : in->strides[d];
        if (count > 0)
            offset += first * in->strides[d];
    }
    wf__array_set_view(out, in, strides, offset);
    return WF_OK;
}

/* The block's start on each axis (prim/shape_like.c): the params' low
 * pads plus, on their axis, the sizes of the inputs after (x, like). */
static void block_starts(const wf_block_params *p, wf_array *const *inputs, int ninputs,
                         int64_t *starts)
{
    int64_t before = 0;
    for (int i = 2; i < ninputs; i++)
        before += inputs[i]->shape[p->axis];
    for (int d = 0; d < p->ndim; d++)
        starts[d] = wf__block_start(p, d, before);
}

/* The block of x with like's (the output's) shape: a view. */
wf_status wf__cpu_crop_like(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params)
{
    const wf_array *in = inputs[0];
    int64_t starts[WF_MAX_NDIM], offset = in->offset;
    block_starts(params, inputs, ninputs, starts);
    if (out->size > 0) /* an empty block may start past x's end */
        for (int d = 0; d < in->ndim; d++)
            offset += starts[d] * in->strides[d];
    wf__array_set_view(out, in, in->strides, offset);
    return WF_OK;
}

/* ---------------------------------------------------------------- copying layouts */

/* Copies `src` (shape and strides of `src`, any offset) into the region of
 * the contiguous output `out` that starts at element `dst_offset` and has
 * element strides `dst_strides`. */
static void copy_into(wf_array *out, int64_t dst_offset, const int64_t *dst_strides,
                      const wf_array *src)
{
    if (src->size == 0)
        return;
    const size_t item = wf_dtype_size(out->dtype);
    char *data[2] = {(char *)wf__array_data_ptr(out) + dst_offset * (int64_t)item,
                     (char *)wf__array_data_ptr(src)};
    const size_t sizes[2] = {item, item};
    const int64_t *strides[2] = {dst_strides, src->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, src->ndim, src->shape, 2, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_copy_iter(&it);
}

/* Fills the whole contiguous output with one element value. */
static void fill_value(wf_array *out, double value)
{
    if (out->size == 0)
        return;
    uint64_t cell = 0;
    wf__store_from_double(&cell, out->dtype, 0, value);
    const int64_t size = out->size, zero = 0;
    wf__cpu_copy_strided(1, &size, wf_dtype_size(out->dtype), &cell, &zero,
                         wf__array_data_ptr(out));
}

wf_status wf__cpu_slice_update(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params)
{
    (void)ninputs;
    const wf_slice_params *p = params;
    const wf_array *a = inputs[0], *update = inputs[1];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    /* a donated array (WF_PRIM_INPLACE_FIRST) already is the output */
    if (wf__array_data_ptr(out) != wf__array_data_ptr(a))
        st = wf__cpu_copy_to_contiguous(a, wf__array_data_ptr(out));
    if (st != WF_OK || update->size == 0)
        return st;
    int64_t row[WF_MAX_NDIM], strides[WF_MAX_NDIM], offset = 0;
    wf__contiguous_strides(out->shape, out->ndim, row);
    for (int d = 0; d < out->ndim; d++) {
        int64_t first, count;
        wf__slice_resolve(out->shape[d], p->starts[d], p->stops[d], p->steps[d], &first,
                          &count);
        strides[d] = count > 1 ? row[d] * p->steps[d] : row[d];
        offset += first * row[d];
    }
    copy_into(out, offset, strides, update);
    return WF_OK;
}

wf_status wf__cpu_concatenate(wf_array *out, wf_array *const *inputs, int ninputs,
                              const void *params)
{
    const wf_axis_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    int64_t row[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, row);
    int64_t at = 0; /* position along the axis */
    for (int i = 0; i < ninputs; i++) {
        copy_into(out, at * row[p->axis], row, inputs[i]);
        at += inputs[i]->shape[p->axis];
    }
    return WF_OK;
}

wf_status wf__cpu_pad(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_pad_params *p = params;
    const wf_array *a = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size != a->size)
        fill_value(out, p->value);
    int64_t row[WF_MAX_NDIM], offset = 0;
    wf__contiguous_strides(out->shape, out->ndim, row);
    for (int d = 0; d < out->ndim; d++)
        offset += p->low[d] * row[d];
    copy_into(out, offset, row, a);
    return WF_OK;
}

/* Zeros of like's (the output's) shape with x copied into its block. */
wf_status wf__cpu_pad_like(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params)
{
    const wf_array *x = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size != x->size)
        fill_value(out, 0.0);
    int64_t starts[WF_MAX_NDIM], row[WF_MAX_NDIM], offset = 0;
    block_starts(params, inputs, ninputs, starts);
    wf__contiguous_strides(out->shape, out->ndim, row);
    for (int d = 0; d < out->ndim; d++)
        offset += starts[d] * row[d];
    copy_into(out, offset, row, x);
    return WF_OK;
}

/* Copies n elements of `item` bytes with source stride `ss` (elements) into
 * contiguous dst. */
static void copy_row(char *restrict dst, const char *restrict src, int64_t n, int64_t ss,
                     size_t item)
{
    if (n <= 0)
        return;
    if (ss == 1) {
        memcpy(dst, src, (size_t)n * item);
        return;
    }
    switch (item) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = ((const uint8_t *)src)[i * ss];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i * ss];
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i * ss];
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i * ss];
        break;
    }
}

struct tri_job {
    const wf_array *in;
    char *dst;
    int64_t rows, cols, k;
    bool upper;
    size_t item;
};

/* Rows [begin, end) of all the matrices, flattened (batch-major). */
static void tri_rows(void *arg, int64_t begin, int64_t end)
{
    const struct tri_job *job = arg;
    const wf_array *in = job->in;
    const int nd = in->ndim;
    const int64_t R = job->rows, C = job->cols, k = job->k;
    const size_t item = job->item;
    const int64_t row_stride = in->strides[nd - 2], col_stride = in->strides[nd - 1];
    const char *base = wf__array_data_ptr(in);
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / R, i = r % R, off = i * row_stride;
        for (int d = nd - 3; d >= 0; d--) {
            off += (b % in->shape[d]) * in->strides[d];
            b /= in->shape[d];
        }
        const char *src = base + off * (int64_t)item;
        char *dst = job->dst + r * C * (int64_t)item;
        /* Boundary column: tril keeps j <= i + k, triu keeps j >= i + k. */
        int64_t edge; /* tril: number kept from the left; triu: number zeroed */
        if (!job->upper)
            edge = k >= C ? C : k < -R ? 0 : i + k + 1;
        else
            edge = k >= C ? C : k < -R ? 0 : i + k;
        edge = edge < 0 ? 0 : edge > C ? C : edge;
        if (!job->upper) {
            copy_row(dst, src, edge, col_stride, item);
            if (C > edge)
                memset(dst + edge * (int64_t)item, 0, (size_t)(C - edge) * item);
        } else {
            if (edge > 0)
                memset(dst, 0, (size_t)edge * item);
            if (C > edge)
                copy_row(dst + edge * (int64_t)item, src + edge * col_stride * (int64_t)item,
                         C - edge, col_stride, item);
        }
    }
}

wf_status wf__cpu_tri(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_tri_params *p = params;
    const wf_array *in = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct tri_job job = {
        .in = in,
        .dst = wf__array_data_ptr(out),
        .rows = out->shape[out->ndim - 2],
        .cols = out->shape[out->ndim - 1],
        .k = p->k,
        .upper = p->upper != 0,
        .item = wf_dtype_size(out->dtype),
    };
    const int64_t nrows = out->size / job.cols;
    const int64_t min_rows = job.cols >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / job.cols;
    wf__parallel_for(nrows, min_rows, tri_rows, &job);
    return WF_OK;
}
