/* General gather and scatter primitives: shape and dtype inference (see
 * prim/scatter.h). */
#include "prim/scatter.h"

#include "core/error.h"
#include "prim/shape.h"

/* Checks the index inputs inputs[first .. first + naxes): integer dtypes,
 * one shape, which goes to *ishape / *indim. Axes: in range, distinct. */
static wf_status check_indices(const char *op, const wf_desc *a, const wf_desc *inputs,
                               int first, int naxes, const int *axes, const int64_t **ishape,
                               int *indim)
{
    char s0[256], s1[256];
    uint64_t seen = 0;
    if (naxes < 0 || naxes > a->ndim)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %d index arrays for a rank-%d array",
                         op, naxes, a->ndim);
    *ishape = NULL;
    *indim = 0;
    for (int k = 0; k < naxes; k++) {
        const wf_desc *ix = &inputs[first + k];
        if (axes[k] < 0 || axes[k] >= a->ndim || ((seen >> axes[k]) & 1u))
            return wf__error(WF_ERR_AXIS, "%s: axis %d is out of range or repeated", op,
                             axes[k]);
        seen |= 1ull << axes[k];
        if (!wf__is_index_dtype(ix->dtype))
            return wf__error(WF_ERR_DTYPE, "%s: indices must have an integer dtype, not %s", op,
                             wf_dtype_name(ix->dtype));
        if (k == 0) {
            *ishape = ix->shape;
            *indim = ix->ndim;
        } else if (!wf__shape_equal(ix->shape, ix->ndim, *ishape, *indim)) {
            return wf__error(WF_ERR_SHAPE, "%s: index arrays of shapes %s and %s differ", op,
                             wf__shape_str(ix->shape, ix->ndim, s0, sizeof s0),
                             wf__shape_str(*ishape, *indim, s1, sizeof s1));
        }
    }
    if (*indim + a->ndim > WF_MAX_NDIM)
        return wf__error(WF_ERR_SHAPE, "%s: the result would have rank %d (max %d)", op,
                         *indim + a->ndim, WF_MAX_NDIM);
    return WF_OK;
}

/* ---------------------------------------------------------------- gather */

static wf_status infer_gather(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    const wf_gather_params *p = params;
    if (ninputs != 1 + p->naxes)
        return wf__error(WF_ERR_INTERNAL, "gather: expected %d inputs, got %d", 1 + p->naxes,
                         ninputs);
    const wf_desc *a = &inputs[0];
    const int64_t *ishape;
    int indim;
    wf_status st = check_indices("wf_gather", a, inputs, 1, p->naxes, p->axes, &ishape, &indim);
    if (st != WF_OK)
        return st;
    for (int d = 0; d < a->ndim; d++)
        if (p->slice_sizes[d] < 0 || p->slice_sizes[d] > a->shape[d])
            return wf__error(WF_ERR_SHAPE,
                             "wf_gather: slice size %lld on axis %d does not fit in %lld",
                             (long long)p->slice_sizes[d], d, (long long)a->shape[d]);
    wf__shape_copy(out->shape, ishape, indim);
    wf__shape_copy(out->shape + indim, p->slice_sizes, a->ndim);
    out->ndim = indim + a->ndim;
    out->dtype = a->dtype;
    return WF_OK;
}

const wf_prim_def wf__prim_gather = {
    .name = "gather",
    .flags = 0,
    .params_size = sizeof(wf_gather_params),
    .infer = infer_gather,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- scatter */

static wf_status infer_scatter(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    const wf_scatter_params *p = params;
    if (ninputs != 2 + p->naxes)
        return wf__error(WF_ERR_INTERNAL, "scatter: expected %d inputs, got %d", 2 + p->naxes,
                         ninputs);
    if (p->mode < WF_SCATTER_REPLACE || p->mode > WF_SCATTER_MIN)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_scatter: unknown mode %d", p->mode);
    const wf_desc *a = &inputs[0], *u = &inputs[1];
    const int64_t *ishape;
    int indim;
    wf_status st = check_indices("wf_scatter", a, inputs, 2, p->naxes, p->axes, &ishape, &indim);
    if (st != WF_OK)
        return st;
    char s0[256], s1[256], s2[256];
    if (u->dtype != a->dtype)
        return wf__error(WF_ERR_DTYPE, "wf_scatter: updates dtype %s differs from %s",
                         wf_dtype_name(u->dtype), wf_dtype_name(a->dtype));
    bool ok = u->ndim == indim + a->ndim && wf__shape_equal(u->shape, indim, ishape, indim);
    for (int d = 0; ok && d < a->ndim; d++)
        ok = u->shape[indim + d] <= a->shape[d];
    if (!ok)
        return wf__error(WF_ERR_SHAPE,
                         "wf_scatter: updates of shape %s do not fit index shape %s followed "
                         "by slices of an array of shape %s",
                         wf__shape_str(u->shape, u->ndim, s0, sizeof s0),
                         wf__shape_str(ishape, indim, s1, sizeof s1),
                         wf__shape_str(a->shape, a->ndim, s2, sizeof s2));
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->ndim = a->ndim;
    out->dtype = a->dtype;
    return WF_OK;
}

const wf_prim_def wf__prim_scatter = {
    .name = "scatter",
    .flags = WF_PRIM_INPLACE_FIRST, /* a dead table is updated where it lies */
    .params_size = sizeof(wf_scatter_params),
    .infer = infer_scatter,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- masked_scatter */

static wf_status infer_masked_scatter(const void *params, const wf_desc *inputs, int ninputs,
                                      wf_out_desc *out)
{
    const wf_masked_scatter_params *p = params;
    const char *op = "wf_masked_scatter";
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "masked_scatter: expected 3 inputs, got %d", ninputs);
    const wf_desc *a = &inputs[0], *mask = &inputs[1], *src = &inputs[2];
    char s0[256], s1[256];
    if (mask->dtype != WF_DTYPE_BOOL)
        return wf__error(WF_ERR_DTYPE, "%s: the mask must be bool, not %s", op,
                         wf_dtype_name(mask->dtype));
    if (src->dtype != a->dtype)
        return wf__error(WF_ERR_DTYPE, "%s: source dtype %s differs from %s", op,
                         wf_dtype_name(src->dtype), wf_dtype_name(a->dtype));
    if (!wf__shape_equal(mask->shape, mask->ndim, a->shape, a->ndim))
        return wf__error(WF_ERR_SHAPE, "%s: mask of shape %s differs from the array's %s", op,
                         wf__shape_str(mask->shape, mask->ndim, s0, sizeof s0),
                         wf__shape_str(a->shape, a->ndim, s1, sizeof s1));
    if (p->nbatch < 0 || p->nbatch > a->ndim || src->ndim != p->nbatch + 1 ||
        !wf__shape_equal(src->shape, p->nbatch, a->shape, p->nbatch))
        return wf__error(WF_ERR_SHAPE,
                         "%s: source of shape %s must be the array's first %d dims of %s and "
                         "one more",
                         op, wf__shape_str(src->shape, src->ndim, s0, sizeof s0), p->nbatch,
                         wf__shape_str(a->shape, a->ndim, s1, sizeof s1));
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->ndim = a->ndim;
    out->dtype = a->dtype;
    return WF_OK;
}

const wf_prim_def wf__prim_masked_scatter = {
    .name = "masked_scatter",
    .flags = WF_PRIM_INPLACE_FIRST, /* a dead array is updated where it lies */
    .params_size = sizeof(wf_masked_scatter_params),
    .infer = infer_masked_scatter,
    .kernels = &(wf_kernel_slots){{0}},
};
