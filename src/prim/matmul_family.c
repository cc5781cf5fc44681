/* gather_mm and segmented_mm primitives: shape and dtype inference (see
 * prim/matmul_family.h). */
#include "prim/matmul_family.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/shape.h"

static wf_status check_operands(const char *op, const wf_desc *a, const wf_desc *b, int rank)
{
    char s0[256], s1[256];
    if (a->dtype != b->dtype || !wf__dtype_is_float(a->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: operands of dtypes %s and %s (one real float type)",
                         op, wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    if (a->ndim != rank || b->ndim != rank || a->shape[rank - 1] != b->shape[rank - 2])
        return wf__error(WF_ERR_SHAPE, "%s: operands of shapes %s and %s (rank %d, inner dims "
                                       "equal)",
                         op, wf__shape_str(a->shape, a->ndim, s0, sizeof s0),
                         wf__shape_str(b->shape, b->ndim, s1, sizeof s1), rank);
    return WF_OK;
}

static wf_status infer_gather_mm(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *out)
{
    (void)params;
    const char *op = "wf_gather_mm";
    if (ninputs != 4)
        return wf__error(WF_ERR_INTERNAL, "gather_mm: expected 4 inputs, got %d", ninputs);
    const wf_desc *a = &inputs[0], *b = &inputs[1], *lhs = &inputs[2], *rhs = &inputs[3];
    wf_status st = check_operands(op, a, b, 3);
    if (st != WF_OK)
        return st;
    char s0[256], s1[256];
    if (!wf__is_index_dtype(lhs->dtype) || !wf__is_index_dtype(rhs->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: indices of dtypes %s and %s", op,
                         wf_dtype_name(lhs->dtype), wf_dtype_name(rhs->dtype));
    if (!wf__shape_equal(lhs->shape, lhs->ndim, rhs->shape, rhs->ndim) ||
        lhs->ndim + 2 > WF_MAX_NDIM)
        return wf__error(WF_ERR_SHAPE, "%s: index shapes %s and %s differ", op,
                         wf__shape_str(lhs->shape, lhs->ndim, s0, sizeof s0),
                         wf__shape_str(rhs->shape, rhs->ndim, s1, sizeof s1));
    wf__shape_copy(out->shape, lhs->shape, lhs->ndim);
    out->shape[lhs->ndim] = a->shape[1];
    out->shape[lhs->ndim + 1] = b->shape[2];
    out->ndim = lhs->ndim + 2;
    out->dtype = a->dtype;
    return WF_OK;
}

static wf_status infer_segmented_mm(const void *params, const wf_desc *inputs, int ninputs,
                                    wf_out_desc *out)
{
    (void)params;
    const char *op = "wf_segmented_mm";
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "segmented_mm: expected 3 inputs, got %d", ninputs);
    const wf_desc *a = &inputs[0], *b = &inputs[1], *seg = &inputs[2];
    wf_status st = check_operands(op, a, b, 2);
    if (st != WF_OK)
        return st;
    char s0[256];
    if (!wf__is_index_dtype(seg->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: segments of dtype %s", op, wf_dtype_name(seg->dtype));
    if (seg->ndim < 1 || seg->shape[seg->ndim - 1] != 2 || seg->ndim + 1 > WF_MAX_NDIM)
        return wf__error(WF_ERR_SHAPE, "%s: segments of shape %s (want (..., 2))", op,
                         wf__shape_str(seg->shape, seg->ndim, s0, sizeof s0));
    wf__shape_copy(out->shape, seg->shape, seg->ndim - 1);
    out->shape[seg->ndim - 1] = a->shape[0];
    out->shape[seg->ndim] = b->shape[1];
    out->ndim = seg->ndim + 1;
    out->dtype = a->dtype;
    return WF_OK;
}

const wf_prim_def wf__prim_gather_mm = {
    .name = "gather_mm",
    .flags = 0,
    .params_size = sizeof(wf_gather_mm_params),
    .infer = infer_gather_mm,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_segmented_mm = {
    .name = "segmented_mm",
    .flags = 0,
    .params_size = 0,
    .infer = infer_segmented_mm,
    .kernels = &(wf_kernel_slots){{0}},
};
