/* wf_searchsorted: shape and dtype inference (see prim/search.h). */
#include "prim/search.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/sort.h"

static wf_status infer_searchsorted(const void *params, const wf_desc *inputs, int ninputs,
                                    wf_out_desc *out)
{
    (void)params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "wf_searchsorted: expected 2 inputs, got %d", ninputs);
    const wf_desc *sorted = &inputs[0], *values = &inputs[1];
    if (sorted->ndim != 1)
        return wf__error(WF_ERR_SHAPE, "wf_searchsorted: the sorted sequence must be 1-d, not %d-d",
                         sorted->ndim);
    if (sorted->shape[0] > UINT32_MAX)
        return wf__error(WF_ERR_SHAPE,
                         "wf_searchsorted: %lld elements are more than uint32 positions count",
                         (long long)sorted->shape[0]);
    if (sorted->dtype != values->dtype || !wf__sort_dtype_ok(sorted->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_searchsorted: cannot order %s against %s",
                         wf_dtype_name(sorted->dtype), wf_dtype_name(values->dtype));
    wf__shape_copy(out->shape, values->shape, values->ndim);
    out->ndim = values->ndim;
    out->dtype = WF_DTYPE_U32;
    return WF_OK;
}

const wf_prim_def wf__prim_searchsorted = {
    .name = "searchsorted",
    .params_size = sizeof(wf_search_params),
    .infer = infer_searchsorted,
    .kernels = &(wf_kernel_slots){{0}},
};
