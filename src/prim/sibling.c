/* Multi-output primitives: siblings of a hidden primary (see prim/sibling.h). */
#include "prim/sibling.h"

#include <string.h>

#include "core/error.h"
#include "prim/prims.h"

static wf_status infer_sibling(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    const wf_sibling_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "sibling: expected 1 input, got %d", ninputs);
    (void)inputs;
    out->dtype = p->dtype;
    out->ndim = p->ndim;
    wf__shape_copy(out->shape, p->shape, p->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_sibling = {
    .name = "sibling",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_sibling_params),
    .infer = infer_sibling,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_status release_outputs(wf_array **outputs, int count)
{
    for (int i = 0; i < count; i++) {
        wf__array_decref(outputs[i]);
        outputs[i] = NULL;
    }
    return wf_last_error();
}

wf_status wf__node_new_multi(const wf_prim_def *prim, const void *params,
                             wf_array *const *inputs, int ninputs, wf_array **outputs,
                             int noutputs)
{
    for (int i = 0; i < noutputs; i++)
        outputs[i] = NULL;
    if (noutputs != wf__prim_noutputs(prim)) {
        if (prim->params_release)
            prim->params_release((void *)params);
        return wf__error(WF_ERR_INTERNAL, "%s: %d outputs asked of a primitive with %d", prim->name,
                         noutputs, wf__prim_noutputs(prim));
    }
    wf_array *primary = wf__node_new(prim, params, inputs, ninputs);
    if (!primary)
        return wf_last_error();
    for (int i = 0; i < noutputs; i++) {
        const wf_array *result = wf__node_output(primary, i);
        wf_sibling_params p;
        memset(&p, 0, sizeof p);
        p.index = i;
        p.dtype = result->dtype;
        p.ndim = result->ndim;
        wf__shape_copy(p.shape, result->shape, result->ndim);
        outputs[i] = wf__node_new(&wf__prim_sibling, &p, &primary, 1);
        if (!outputs[i]) {
            wf__array_decref(primary);
            return release_outputs(outputs, i);
        }
    }
    wf__array_decref(primary); /* the siblings hold it */
    return WF_OK;
}
