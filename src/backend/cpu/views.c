/* Layout kernels: transpose, broadcast_to and slice make views; reshape
 * makes a view of a row-contiguous input and copies otherwise. */
#include "backend/cpu/cpu.h"
#include "prim/prims.h"

wf_status wf__cpu_reshape(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *in = inputs[0];
    if (wf__is_row_contiguous(in->shape, in->strides, in->ndim)) {
        int64_t strides[WF_MAX_NDIM];
        wf__cpu_row_strides(out->shape, out->ndim, strides);
        wf__array_set_view(out, in, strides, in->offset);
        return WF_OK;
    }
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    return wf__cpu_copy_to_contiguous(in, wf__array_data_ptr(out));
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
