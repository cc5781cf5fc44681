/* Creation primitives: full, arange, linspace, eye (no inputs) and
 * full_like (the shape of its input). */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"
#include "prim/shape.h"

static wf_status infer_full(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    (void)inputs;
    const wf_full_params *p = params;
    if (ninputs != 0)
        return wf__error(WF_ERR_INTERNAL, "full: expected 0 inputs, got %d", ninputs);
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_full: invalid dtype %d", (int)p->dtype);
    wf_status st = wf__check_shape("wf_full", p->shape, p->ndim);
    if (st != WF_OK)
        return st;
    out->dtype = p->dtype;
    out->ndim = p->ndim;
    wf__shape_copy(out->shape, p->shape, p->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_full = {
    .name = "full",
    .flags = 0,
    .params_size = sizeof(wf_full_params),
    .infer = infer_full,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_status infer_full_like(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *out)
{
    const wf_full_like_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "full_like: expected 1 input, got %d", ninputs);
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_full_like: invalid dtype %d", (int)p->dtype);
    out->dtype = p->dtype;
    out->ndim = inputs[0].ndim;
    wf__shape_copy(out->shape, inputs[0].shape, inputs[0].ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_full_like = {
    .name = "full_like",
    .flags = 0,
    .params_size = sizeof(wf_full_like_params),
    .infer = infer_full_like,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_status infer_arange(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    (void)inputs;
    const wf_arange_params *p = params;
    if (ninputs != 0)
        return wf__error(WF_ERR_INTERNAL, "arange: expected 0 inputs, got %d", ninputs);
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_arange: invalid dtype %d", (int)p->dtype);
    if (p->count < 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_arange: negative count %lld",
                         (long long)p->count);
    int64_t one[1] = {p->count};
    wf_status st = wf__check_shape("wf_arange", one, 1);
    if (st != WF_OK)
        return st;
    out->dtype = p->dtype;
    out->ndim = 1;
    out->shape[0] = p->count;
    return WF_OK;
}

const wf_prim_def wf__prim_arange = {
    .name = "arange",
    .flags = 0,
    .params_size = sizeof(wf_arange_params),
    .infer = infer_arange,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_status infer_linspace(const void *params, const wf_desc *inputs, int ninputs,
                                wf_out_desc *out)
{
    (void)inputs;
    const wf_linspace_params *p = params;
    if (ninputs != 0)
        return wf__error(WF_ERR_INTERNAL, "linspace: expected 0 inputs, got %d", ninputs);
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_linspace: invalid dtype %d", (int)p->dtype);
    if (p->num < 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_linspace: num is negative (%lld)",
                         (long long)p->num);
    if (!isfinite(p->start) || !isfinite(p->stop))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_linspace: start and stop must be finite (%g, %g)", p->start,
                         p->stop);
    int64_t one[1] = {p->num};
    wf_status st = wf__check_shape("wf_linspace", one, 1);
    if (st != WF_OK)
        return st;
    out->dtype = p->dtype;
    out->ndim = 1;
    out->shape[0] = p->num;
    return WF_OK;
}

const wf_prim_def wf__prim_linspace = {
    .name = "linspace",
    .flags = 0,
    .params_size = sizeof(wf_linspace_params),
    .infer = infer_linspace,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_status infer_eye(const void *params, const wf_desc *inputs, int ninputs, wf_out_desc *out)
{
    (void)inputs;
    const wf_eye_params *p = params;
    if (ninputs != 0)
        return wf__error(WF_ERR_INTERNAL, "eye: expected 0 inputs, got %d", ninputs);
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_eye: invalid dtype %d", (int)p->dtype);
    if (p->n < 0 || p->m < 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_eye: negative size (%lld, %lld)",
                         (long long)p->n, (long long)p->m);
    int64_t two[2] = {p->n, p->m};
    wf_status st = wf__check_shape("wf_eye", two, 2);
    if (st != WF_OK)
        return st;
    out->dtype = p->dtype;
    out->ndim = 2;
    out->shape[0] = p->n;
    out->shape[1] = p->m;
    return WF_OK;
}

const wf_prim_def wf__prim_eye = {
    .name = "eye",
    .flags = 0,
    .params_size = sizeof(wf_eye_params),
    .infer = infer_eye,
    .kernels = &(wf_kernel_slots){{0}},
};
