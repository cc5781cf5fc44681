/* Linear algebra primitives: matmul (2-d x 2-d; the op reshapes 1-d). */
#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

static wf_status infer_matmul(const void *params, wf_array *const *inputs, int ninputs,
                              wf_dtype *dtype, int *ndim, int64_t *shape)
{
    (void)params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "matmul: expected 2 inputs, got %d", ninputs);
    const wf_array *a = inputs[0], *b = inputs[1];
    if (a->ndim != 2 || b->ndim != 2)
        return wf__error(WF_ERR_UNSUPPORTED, "wf_matmul: operands of rank %d and %d (only 2-d)",
                         a->ndim, b->ndim);
    if (a->dtype != b->dtype || !wf__dtype_is_float(a->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_matmul: dtypes %s and %s (need one float type)",
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    if (a->shape[1] != b->shape[0])
        return wf__error(WF_ERR_SHAPE,
                         "wf_matmul: inner dimensions differ ((%lld, %lld) @ (%lld, %lld))",
                         (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0],
                         (long long)b->shape[1]);
    *dtype = a->dtype;
    *ndim = 2;
    shape[0] = a->shape[0];
    shape[1] = b->shape[1];
    return WF_OK;
}

const wf_prim_def wf__prim_matmul = {
    .name = "matmul",
    .flags = 0,
    .params_size = 0,
    .infer = infer_matmul,
    .cpu_kernel = wf__cpu_matmul,
};
