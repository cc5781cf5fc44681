/* Convolutions (MLX's semantics, channels last): wf_conv_general and its
 * conveniences wf_conv1d/2d/3d and wf_conv_transpose1d/2d/3d. Every one is
 * one conv_general node (prim/conv.h); a transposed convolution is the
 * convolution of the input dilated by the stride with the flipped kernel. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/conv.h"
#include "prim/prims.h"

/* Fills one axis list of p: src's entries, or `dflt` everywhere (src NULL). */
static void fill_axes(int64_t *dst, const int64_t *src, int spatial, int64_t dflt)
{
    for (int d = 0; d < spatial; d++)
        dst[d] = src ? src[d] : dflt;
}

/* x and w converted to their promoted dtype, then the node. */
static wf_array *conv_node(const char *op, wf_array *x, wf_array *w, const wf_conv_params *p)
{
    if (!wf__array_check(x, op, "input") || !wf__array_check(w, op, "weight"))
        return NULL;
    if (!wf__dtype_is_float(x->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: input of dtype %s (convolutions take float inputs)", op,
                  wf_dtype_name(x->dtype));
        return NULL;
    }
    const wf_dtype dt = wf_promote_types(x->dtype, w->dtype);
    if (!wf__dtype_is_float(dt)) {
        wf__error(WF_ERR_DTYPE, "%s: input %s and weight %s do not promote to a float type", op,
                  wf_dtype_name(x->dtype), wf_dtype_name(w->dtype));
        return NULL;
    }
    wf_desc xd = wf__array_desc(x), wd = wf__array_desc(w);
    xd.dtype = wd.dtype = dt;
    wf_out_desc probe;
    if (wf__conv_infer(op, p, &xd, &wd, &probe) != WF_OK)
        return NULL; /* checked before any cast is built */
    wf_array *xc = x->dtype == dt ? wf__array_incref(x) : wf__op_astype(x, dt);
    wf_array *wc = w->dtype == dt ? wf__array_incref(w) : wf__op_astype(w, dt);
    wf_array *inputs[2] = {xc, wc};
    wf_array *out = xc && wc ? wf__node_new(&wf__prim_conv_general, p, inputs, 2) : NULL;
    wf__array_release(xc);
    wf__array_release(wc);
    return out;
}

/* The spatial rank of x, or -1 (error recorded) when x cannot have one. */
static int spatial_of(const char *op, const wf_array *x)
{
    if (!wf__array_check(x, op, "input"))
        return -1;
    const int s = x->ndim - 2;
    if (s < 1 || s > WF_CONV_MAX_SPATIAL) {
        wf__error(WF_ERR_SHAPE,
                  "%s: input of rank %d (a convolution takes (N, spatial..., C_in) with 1 to 3 "
                  "spatial axes)",
                  op, x->ndim);
        return -1;
    }
    return s;
}

wf_array *wf__op_conv_general(wf_array *x, wf_array *w, const int64_t *strides,
                              const int64_t *padding_lo, const int64_t *padding_hi,
                              const int64_t *kernel_dilation, const int64_t *input_dilation,
                              int64_t groups, bool flip)
{
    const char *op = "wf_conv_general";
    const int s = spatial_of(op, x);
    if (s < 0)
        return NULL;
    wf_conv_params p;
    memset(&p, 0, sizeof p);
    p.spatial = s;
    fill_axes(p.strides, strides, s, 1);
    fill_axes(p.padding_lo, padding_lo, s, 0);
    fill_axes(p.padding_hi, padding_hi, s, 0);
    fill_axes(p.kernel_dilation, kernel_dilation, s, 1);
    fill_axes(p.input_dilation, input_dilation, s, 1);
    p.groups = groups;
    p.flip = flip;
    return conv_node(op, x, w, &p);
}

/* conv1d/2d/3d: symmetric padding, no input dilation. */
static wf_array *conv_nd(const char *op, int spatial, wf_array *x, wf_array *w,
                         const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                         int64_t groups)
{
    const int s = spatial_of(op, x);
    if (s < 0)
        return NULL;
    if (s != spatial) {
        wf__error(WF_ERR_SHAPE, "%s: input of rank %d (expected (N, %d spatial axes, C_in))", op,
                  x->ndim, spatial);
        return NULL;
    }
    wf_conv_params p;
    memset(&p, 0, sizeof p);
    p.spatial = s;
    fill_axes(p.strides, stride, s, 1);
    fill_axes(p.padding_lo, padding, s, 0);
    fill_axes(p.padding_hi, padding, s, 0);
    fill_axes(p.kernel_dilation, dilation, s, 1);
    fill_axes(p.input_dilation, NULL, s, 1);
    p.groups = groups;
    for (int d = 0; d < s; d++)
        if (p.padding_lo[d] < 0) {
            wf__error(WF_ERR_INVALID_ARGUMENT, "%s: negative padding %lld", op,
                      (long long)p.padding_lo[d]);
            return NULL;
        }
    return conv_node(op, x, w, &p);
}

/* conv_transpose1d/2d/3d (MLX's and PyTorch's definition): the input
 * dilated by the stride, convolved with the flipped kernel, padded so that
 * out = (L - 1) * stride - 2 * padding + dilation * (K - 1) + 1 +
 * output_padding. */
static wf_array *conv_transpose_nd(const char *op, int spatial, wf_array *x, wf_array *w,
                                   const int64_t *stride, const int64_t *padding,
                                   const int64_t *dilation, const int64_t *output_padding,
                                   int64_t groups)
{
    const int s = spatial_of(op, x);
    if (s < 0 || !wf__array_check(w, op, "weight"))
        return NULL;
    if (s != spatial || w->ndim != x->ndim) {
        wf__error(WF_ERR_SHAPE,
                  "%s: input of rank %d and weight of rank %d (expected %d: (N, spatial..., "
                  "C_in) and (C_out, kernel..., C_in / groups))",
                  op, x->ndim, w->ndim, spatial + 2);
        return NULL;
    }
    wf_conv_params p;
    memset(&p, 0, sizeof p);
    p.spatial = s;
    p.groups = groups;
    p.flip = true;
    for (int d = 0; d < s; d++) {
        const int64_t st = stride ? stride[d] : 1, pad = padding ? padding[d] : 0;
        const int64_t dil = dilation ? dilation[d] : 1;
        const int64_t opad = output_padding ? output_padding[d] : 0;
        if (st < 1 || dil < 1 || pad < 0 || opad < 0) {
            wf__error(WF_ERR_INVALID_ARGUMENT,
                      "%s: axis %d: stride %lld and dilation %lld must be positive, padding "
                      "%lld and output_padding %lld non-negative",
                      op, d, (long long)st, (long long)dil, (long long)pad, (long long)opad);
            return NULL;
        }
        const int64_t span = dil * (w->shape[d + 1] - 1); /* dilated kernel - 1 */
        p.strides[d] = 1;
        p.kernel_dilation[d] = dil;
        p.input_dilation[d] = st;
        p.padding_lo[d] = span - pad;
        p.padding_hi[d] = span - pad + opad;
    }
    return conv_node(op, x, w, &p);
}

wf_array *wf_conv_general(wf_array *input, wf_array *weight, const int64_t *strides,
                          const int64_t *padding_lo, const int64_t *padding_hi,
                          const int64_t *kernel_dilation, const int64_t *input_dilation,
                          int64_t groups, bool flip)
{
    return wf__array_publish(wf__op_conv_general(input, weight, strides, padding_lo, padding_hi,
                                                 kernel_dilation, input_dilation, groups, flip));
}

wf_array *wf_conv1d(wf_array *input, wf_array *weight, int64_t stride, int64_t padding,
                    int64_t dilation, int64_t groups)
{
    return wf__array_publish(
        conv_nd("wf_conv1d", 1, input, weight, &stride, &padding, &dilation, groups));
}

wf_array *wf_conv2d(wf_array *input, wf_array *weight, const int64_t *stride,
                    const int64_t *padding, const int64_t *dilation, int64_t groups)
{
    return wf__array_publish(
        conv_nd("wf_conv2d", 2, input, weight, stride, padding, dilation, groups));
}

wf_array *wf_conv3d(wf_array *input, wf_array *weight, const int64_t *stride,
                    const int64_t *padding, const int64_t *dilation, int64_t groups)
{
    return wf__array_publish(
        conv_nd("wf_conv3d", 3, input, weight, stride, padding, dilation, groups));
}

wf_array *wf_conv_transpose1d(wf_array *input, wf_array *weight, int64_t stride, int64_t padding,
                              int64_t dilation, int64_t output_padding, int64_t groups)
{
    return wf__array_publish(conv_transpose_nd("wf_conv_transpose1d", 1, input, weight, &stride,
                                               &padding, &dilation, &output_padding, groups));
}

wf_array *wf_conv_transpose2d(wf_array *input, wf_array *weight, const int64_t *stride,
                              const int64_t *padding, const int64_t *dilation,
                              const int64_t *output_padding, int64_t groups)
{
    return wf__array_publish(conv_transpose_nd("wf_conv_transpose2d", 2, input, weight, stride,
                                               padding, dilation, output_padding, groups));
}

wf_array *wf_conv_transpose3d(wf_array *input, wf_array *weight, const int64_t *stride,
                              const int64_t *padding, const int64_t *dilation,
                              const int64_t *output_padding, int64_t groups)
{
    return wf__array_publish(conv_transpose_nd("wf_conv_transpose3d", 3, input, weight, stride,
                                               padding, dilation, output_padding, groups));
}
