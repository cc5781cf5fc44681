/* Reduction primitives: sum. */
#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "prim/prims.h"

wf_dtype wf__sum_dtype(wf_dtype in)
{
    return (in == WF_DTYPE_BOOL || in == WF_DTYPE_U8) ? WF_DTYPE_I32 : in;
}

static wf_status infer_sum(const void *params, wf_array *const *inputs, int ninputs,
                           wf_dtype *dtype, int *ndim, int64_t *shape)
{
    const wf_sum_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "sum: expected 1 input, got %d", ninputs);
    const wf_array *a = inputs[0];
    if (a->ndim < 64 && (p->axes >> a->ndim) != 0)
        return wf__error(WF_ERR_AXIS, "wf_sum: axis mask 0x%llx out of range for ndim %d",
                         (unsigned long long)p->axes, a->ndim);
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        if ((p->axes >> d) & 1u) {
            if (p->keepdims)
                shape[n++] = 1;
        } else {
            shape[n++] = a->shape[d];
        }
    }
    *ndim = n;
    *dtype = wf__sum_dtype(a->dtype);
    return WF_OK;
}

const wf_prim_def wf__prim_sum = {
    .name = "sum",
    .flags = 0,
    .params_size = sizeof(wf_sum_params),
    .infer = infer_sum,
    .cpu_kernel = wf__cpu_sum,
};
