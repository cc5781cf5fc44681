/* The sort family and the extra scans: shape and dtype inference (see
 * prim/sort.h). */
#include "prim/sort.h"

#include "core/dtype.h"
#include "core/error.h"

bool wf__sort_dtype_ok(wf_dtype d)
{
    switch (d) {
    case WF_DTYPE_BOOL:
    case WF_DTYPE_I8:
    case WF_DTYPE_U8:
    case WF_DTYPE_I16:
    case WF_DTYPE_U16:
    case WF_DTYPE_I32:
    case WF_DTYPE_U32:
    case WF_DTYPE_I64:
    case WF_DTYPE_U64:
    case WF_DTYPE_F16:
    case WF_DTYPE_BF16:
    case WF_DTYPE_F32:
    case WF_DTYPE_F64:
    case WF_DTYPE_C64: return true;
    default: return false;
    }
}

static const char *sort_op_name(int op)
{
    static const char *names[] = {"wf_sort", "wf_argsort", "wf_partition", "wf_argpartition",
                                  "wf_topk", "wf_argtopk"};
    return op >= 0 && op <= WF_TOPK_INDICES ? names[op] : "sort";
}

static wf_status infer_sort(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    const wf_sort_params *p = params;
    const char *op = sort_op_name(p->op);
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    const wf_desc *a = &inputs[0];
    if (a->ndim == 0 || p->axis < 0 || p->axis >= a->ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d is out of range for rank %d", op, p->axis,
                         a->ndim);
    if (!wf__sort_dtype_ok(a->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: cannot order %s", op, wf_dtype_name(a->dtype));
    const int64_t n = a->shape[p->axis];
    if (n > UINT32_MAX) /* the kernels count in 32 bits */
        return wf__error(WF_ERR_SHAPE, "%s: axis of %lld elements is longer than 2^32 - 1", op,
                         (long long)n);
    const bool indices = p->op == WF_SORT_INDICES || p->op == WF_PARTITION_INDICES ||
                         p->op == WF_TOPK_INDICES;
    if (indices && n > INT32_MAX)
        return wf__error(WF_ERR_SHAPE, "%s: axis of %lld elements is too long for int32 indices",
                         op, (long long)n);
    const bool partition = p->op == WF_PARTITION_VALUES || p->op == WF_PARTITION_INDICES;
    const bool topk = p->op == WF_TOPK_VALUES || p->op == WF_TOPK_INDICES;
    if (partition && (p->k < 0 || p->k >= n))
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: kth %lld is out of range for %lld elements",
                         op, (long long)p->k, (long long)n);
    if (topk && (p->k < 0 || p->k > n))
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: k %lld is out of range for %lld elements",
                         op, (long long)p->k, (long long)n);
    wf__shape_copy(out->shape, a->shape, a->ndim);
    if (topk)
        out->shape[p->axis] = p->k;
    out->ndim = a->ndim;
    out->dtype = indices ? WF_DTYPE_U32 : a->dtype; /* MLX's index dtype */
    return WF_OK;
}

#define SORT_PRIM(NAME)                                                                     \
    const wf_prim_def wf__prim_##NAME = {                                                   \
        .name = #NAME,                                                                      \
        .params_size = sizeof(wf_sort_params),                                              \
        .infer = infer_sort,                                                                \
        .kernels = &(wf_kernel_slots){{0}},                                                 \
    };
SORT_PRIM(sort)
SORT_PRIM(argsort)
SORT_PRIM(partition)
SORT_PRIM(argpartition)
SORT_PRIM(topk)
SORT_PRIM(argtopk)
#undef SORT_PRIM

const wf_prim_def *wf__sort_prim(int op)
{
    static const wf_prim_def *const prims[] = {&wf__prim_sort,      &wf__prim_argsort,
                                               &wf__prim_partition, &wf__prim_argpartition,
                                               &wf__prim_topk,      &wf__prim_argtopk};
    return op >= 0 && op <= WF_TOPK_INDICES ? prims[op] : NULL;
}

/* ---------------------------------------------------------------- extra scans */

static wf_status infer_scan_extra(const void *params, const wf_desc *inputs, int ninputs,
                                  wf_out_desc *out)
{
    const wf_scan_extra_params *p = params;
    static const char *names[] = {"wf_cummax", "wf_cummin", "wf_logcumsumexp"};
    const char *op = p->op >= 0 && p->op <= WF_SCAN_LOGSUMEXP ? names[p->op] : "scan";
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    const wf_desc *a = &inputs[0];
    if (a->ndim == 0 || p->axis < 0 || p->axis >= a->ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d is out of range for rank %d", op, p->axis,
                         a->ndim);
    if (!wf__sort_dtype_ok(a->dtype) ||
        (p->op == WF_SCAN_LOGSUMEXP && !wf__dtype_is_inexact(a->dtype)))
        return wf__error(WF_ERR_DTYPE, "%s: unsupported dtype %s", op, wf_dtype_name(a->dtype));
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->ndim = a->ndim;
    out->dtype = a->dtype;
    return WF_OK;
}

#define SCAN_PRIM(NAME)                                                                     \
    const wf_prim_def wf__prim_##NAME = {                                                   \
        .name = #NAME,                                                                      \
        .params_size = sizeof(wf_scan_extra_params),                                        \
        .infer = infer_scan_extra,                                                          \
        .kernels = &(wf_kernel_slots){{0}},                                                 \
    };
SCAN_PRIM(cummax)
SCAN_PRIM(cummin)
SCAN_PRIM(logcumsumexp)
#undef SCAN_PRIM
