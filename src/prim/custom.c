/* The custom-kernel primitive: the output shape and dtype are the user's. */
#include "prim/custom.h"

#include <string.h>

#include "core/dtype.h"
#include "core/error.h"

static wf_status infer_custom(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    (void)inputs;
    (void)ninputs;
    const wf_custom_params *p = params;
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_custom '%s': invalid dtype %d", p->name, (int)p->dtype);
    out->dtype = p->dtype;
    out->ndim = p->ndim;
    if (p->ndim)
        memcpy(out->shape, p->shape, (size_t)p->ndim * sizeof *out->shape);
    return WF_OK;
}

static void release_payload(void *params)
{
    wf_custom_params *p = params;
    if (p->payload_free)
        p->payload_free(p->payload);
    p->payload_free = NULL;
}

const wf_prim_def wf__prim_custom = {
    .name = "custom",
    .flags = 0,
    .params_size = sizeof(wf_custom_params),
    .infer = infer_custom,
    .kernels = &(wf_kernel_slots){{0}},
    .params_release = release_payload,
};
