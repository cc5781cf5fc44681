/* Indexing primitives: take, take_along_axis, scatter_add. */
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"
#include "prim/shape.h"

static wf_status check_indices(const char *op, const wf_desc *indices)
{
    if (!wf__is_index_dtype(indices->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: indices must have an integer dtype, not %s", op,
                         wf_dtype_name(indices->dtype));
    return WF_OK;
}

static wf_status check_axis(const char *op, int axis, const wf_desc *a)
{
    if (a->ndim == 0)
        return wf__error(WF_ERR_AXIS, "%s: axis %d is out of range for a 0-d array", op, axis);
    if (axis < 0 || axis >= a->ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d is out of range for rank %d", op, axis,
                         a->ndim);
    return WF_OK;
}

/* ---------------------------------------------------------------- take */

static wf_status infer_take(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    const wf_axis_params *p = params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "take: expected 2 inputs, got %d", ninputs);
    const wf_desc *a = &inputs[0], *idx = &inputs[1];
    wf_status st = check_axis("wf_take", p->axis, a);
    if (st == WF_OK)
        st = check_indices("wf_take", idx);
    if (st != WF_OK)
        return st;
    const int rank = a->ndim - 1 + idx->ndim;
    if (rank > WF_MAX_NDIM)
        return wf__error(WF_ERR_SHAPE, "wf_take: the result would have rank %d (max %d)", rank,
                         WF_MAX_NDIM);
    int n = 0;
    for (int d = 0; d < p->axis; d++)
        out->shape[n++] = a->shape[d];
    for (int d = 0; d < idx->ndim; d++)
        out->shape[n++] = idx->shape[d];
    for (int d = p->axis + 1; d < a->ndim; d++)
        out->shape[n++] = a->shape[d];
    out->dtype = a->dtype;
    out->ndim = rank;
    return WF_OK;
}

const wf_prim_def wf__prim_take = {
    .name = "take",
    .flags = 0,
    .params_size = sizeof(wf_axis_params),
    .infer = infer_take,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- take_along_axis */

static wf_status infer_take_along_axis(const void *params, const wf_desc *inputs, int ninputs,
                                       wf_out_desc *out)
{
    const wf_axis_params *p = params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "take_along_axis: expected 2 inputs, got %d",
                         ninputs);
    const wf_desc *a = &inputs[0], *idx = &inputs[1];
    wf_status st = check_axis("wf_take_along_axis", p->axis, a);
    if (st == WF_OK)
        st = check_indices("wf_take_along_axis", idx);
    if (st != WF_OK)
        return st;
    char sa[256], si[256];
    if (idx->ndim != a->ndim)
        return wf__error(WF_ERR_SHAPE,
                         "wf_take_along_axis: indices of shape %s and array of shape %s "
                         "differ in rank",
                         wf__shape_str(idx->shape, idx->ndim, si, sizeof si),
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa));
    for (int d = 0; d < a->ndim; d++)
        if (d != p->axis && idx->shape[d] != a->shape[d])
            return wf__error(WF_ERR_SHAPE,
                             "wf_take_along_axis: indices of shape %s do not match the array's "
                             "shape %s off axis %d",
                             wf__shape_str(idx->shape, idx->ndim, si, sizeof si),
                             wf__shape_str(a->shape, a->ndim, sa, sizeof sa), p->axis);
    out->dtype = a->dtype;
    out->ndim = idx->ndim;
    wf__shape_copy(out->shape, idx->shape, idx->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_take_along_axis = {
    .name = "take_along_axis",
    .flags = 0,
    .params_size = sizeof(wf_axis_params),
    .infer = infer_take_along_axis,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- scatter_add */

static wf_status infer_scatter_add(const void *params, const wf_desc *inputs, int ninputs,
                                   wf_out_desc *out)
{
    const wf_axis_params *p = params;
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "scatter_add: expected 3 inputs, got %d", ninputs);
    const wf_desc *a = &inputs[0], *idx = &inputs[1], *u = &inputs[2];
    wf_status st = check_axis("wf_scatter_add", p->axis, a);
    if (st == WF_OK)
        st = check_indices("wf_scatter_add", idx);
    if (st != WF_OK)
        return st;
    char s0[256], s1[256];
    if (idx->ndim != 1)
        return wf__error(WF_ERR_SHAPE, "wf_scatter_add: indices must be 1-d, got shape %s",
                         wf__shape_str(idx->shape, idx->ndim, s0, sizeof s0));
    if (u->dtype != a->dtype)
        return wf__error(WF_ERR_DTYPE, "wf_scatter_add: updates dtype %s differs from %s",
                         wf_dtype_name(u->dtype), wf_dtype_name(a->dtype));
    int64_t want[WF_MAX_NDIM];
    wf__shape_copy(want, a->shape, a->ndim);
    want[p->axis] = idx->shape[0];
    if (!wf__shape_equal(u->shape, u->ndim, want, a->ndim))
        return wf__error(WF_ERR_SHAPE, "wf_scatter_add: updates of shape %s, expected %s",
                         wf__shape_str(u->shape, u->ndim, s0, sizeof s0),
                         wf__shape_str(want, a->ndim, s1, sizeof s1));
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_scatter_add = {
    .name = "scatter_add",
    .flags = WF_PRIM_INPLACE_FIRST, /* a dead table is updated where it lies */
    .params_size = sizeof(wf_axis_params),
    .infer = infer_scatter_add,
    .kernels = &(wf_kernel_slots){{0}},
};
