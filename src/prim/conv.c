/* The convolution primitive: argument checks and shape inference (see
 * prim/conv.h). */
#include "prim/conv.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

int64_t wf__conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t lo, int64_t hi,
                          int64_t kdil, int64_t idil)
{
    const int64_t dilated_in = in > 0 ? (in - 1) * idil + 1 : 0;
    const int64_t dilated_k = (kernel - 1) * kdil + 1;
    const int64_t span = dilated_in + lo + hi - dilated_k;
    return span < 0 ? -1 : span / stride + 1;
}

/* Strides and dilations positive, groups positive, paddings bounded. */
static wf_status check_params(const char *op, const wf_conv_params *p)
{
    if (p->spatial < 1 || p->spatial > WF_CONV_MAX_SPATIAL)
        return wf__error(WF_ERR_SHAPE,
                         "%s: %d spatial dimensions (1 to 3, inputs laid out as (N, ..., C))",
                         op, p->spatial);
    if (p->groups < 1)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: groups must be positive (got %lld)", op,
                         (long long)p->groups);
    for (int d = 0; d < p->spatial; d++) {
        if (p->strides[d] < 1 || p->kernel_dilation[d] < 1 || p->input_dilation[d] < 1)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "%s: stride %lld, kernel dilation %lld and input dilation %lld of "
                             "spatial axis %d must be positive",
                             op, (long long)p->strides[d], (long long)p->kernel_dilation[d],
                             (long long)p->input_dilation[d], d);
        const int64_t limit = (int64_t)1 << 40;
        if (p->padding_lo[d] < -limit || p->padding_lo[d] > limit || p->padding_hi[d] < -limit ||
            p->padding_hi[d] > limit || p->strides[d] > limit || p->kernel_dilation[d] > limit ||
            p->input_dilation[d] > limit)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: parameter of spatial axis %d too large",
                             op, d);
    }
    return WF_OK;
}

wf_status wf__conv_infer(const char *op, const wf_conv_params *p, const wf_desc *x,
                         const wf_desc *w, wf_out_desc *out)
{
    wf_status st = check_params(op, p);
    if (st != WF_OK)
        return st;
    char sx[256], sw[256];
    if (x->ndim != p->spatial + 2 || w->ndim != p->spatial + 2)
        return wf__error(WF_ERR_SHAPE,
                         "%s: input %s and weight %s must both have %d dimensions for a %dD "
                         "convolution (input (N, ..., C_in), weight (C_out, ..., C_in / groups))",
                         op, wf__shape_str(x->shape, x->ndim, sx, sizeof sx),
                         wf__shape_str(w->shape, w->ndim, sw, sizeof sw), p->spatial + 2,
                         p->spatial);
    if (!wf__dtype_is_float(x->dtype) || x->dtype == WF_DTYPE_C64 || x->dtype != w->dtype)
        return wf__error(WF_ERR_DTYPE,
                         "%s: input %s and weight %s (a real float type, the same for both)", op,
                         wf_dtype_name(x->dtype), wf_dtype_name(w->dtype));
    const int64_t cin = x->shape[x->ndim - 1], cout = w->shape[0];
    const int64_t cin_g = w->shape[w->ndim - 1];
    if (cin % p->groups != 0 || cout % p->groups != 0)
        return wf__error(WF_ERR_SHAPE,
                         "%s: input channels %lld and output channels %lld must be divisible by "
                         "groups %lld",
                         op, (long long)cin, (long long)cout, (long long)p->groups);
    if (cin_g * p->groups != cin)
        return wf__error(WF_ERR_SHAPE,
                         "%s: weight %s expects %lld input channels (groups %lld), input %s "
                         "has %lld",
                         op, wf__shape_str(w->shape, w->ndim, sw, sizeof sw),
                         (long long)(cin_g * p->groups), (long long)p->groups,
                         wf__shape_str(x->shape, x->ndim, sx, sizeof sx), (long long)cin);
    out->ndim = x->ndim;
    out->dtype = x->dtype;
    out->shape[0] = x->shape[0];
    out->shape[x->ndim - 1] = cout;
    for (int d = 0; d < p->spatial; d++) {
        if (w->shape[d + 1] < 1)
            return wf__error(WF_ERR_SHAPE, "%s: weight %s has an empty kernel axis", op,
                             wf__shape_str(w->shape, w->ndim, sw, sizeof sw));
        const int64_t o = wf__conv_out_size(x->shape[d + 1], w->shape[d + 1], p->strides[d],
                                            p->padding_lo[d], p->padding_hi[d],
                                            p->kernel_dilation[d], p->input_dilation[d]);
        if (o < 0)
            return wf__error(WF_ERR_SHAPE,
                             "%s: spatial axis %d: the kernel (%lld, dilation %lld) is larger "
                             "than the padded input (%lld, padding %lld/%lld, dilation %lld)",
                             op, d, (long long)w->shape[d + 1], (long long)p->kernel_dilation[d],
                             (long long)x->shape[d + 1], (long long)p->padding_lo[d],
                             (long long)p->padding_hi[d], (long long)p->input_dilation[d]);
        out->shape[d + 1] = o;
    }
    return WF_OK;
}

static wf_status infer_conv(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "conv_general: expected 2 inputs, got %d", ninputs);
    return wf__conv_infer("wf_conv_general", params, &inputs[0], &inputs[1], out);
}

const wf_prim_def wf__prim_conv_general = {
    .name = "conv_general",
    .flags = 0,
    .params_size = sizeof(wf_conv_params),
    .infer = infer_conv,
    .kernels = &(wf_kernel_slots){{0}},
};
