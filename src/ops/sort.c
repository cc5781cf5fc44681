/* The sort family (wf_sort, wf_argsort, wf_partition, wf_argpartition,
 * wf_topk, wf_argtopk) and the scans wf_cummax, wf_cummin,
 * wf_logcumsumexp. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/sort.h"

static wf_array *sort_node(const char *op, int which, wf_array *a, int axis, int64_t k)
{
    if (!wf__array_check(a, op, "a"))
        return NULL;
    wf_sort_params p;
    memset(&p, 0, sizeof p);
    p.op = which;
    if (wf__normalize_axis(op, axis, a->ndim, &p.axis) != WF_OK)
        return NULL;
    const int64_t n = a->shape[p.axis];
    if ((which == WF_PARTITION_VALUES || which == WF_PARTITION_INDICES) && k < 0)
        k += n; /* NumPy: negative kth counts from the end */
    p.k = k;
    return wf__node_new(wf__sort_prim(which), &p, &a, 1);
}

static wf_array *scan_node(const char *op, int which, wf_array *a, int axis, bool reverse,
                           bool inclusive)
{
    if (!wf__array_check(a, op, "a"))
        return NULL;
    wf_scan_extra_params p;
    memset(&p, 0, sizeof p);
    p.op = which;
    p.reverse = reverse;
    p.inclusive = inclusive;
    if (wf__normalize_axis(op, axis, a->ndim, &p.axis) != WF_OK)
        return NULL;
    static const wf_prim_def *const prims[] = {&wf__prim_cummax, &wf__prim_cummin,
                                               &wf__prim_logcumsumexp};
    if (which == WF_SCAN_LOGSUMEXP && !wf__dtype_is_inexact(a->dtype)) {
        wf_array *f = wf__op_astype(a, WF_DTYPE_F32); /* integers compute in float32 */
        wf_array *out = f ? wf__node_new(prims[which], &p, &f, 1) : NULL;
        wf__array_release(f);
        return out;
    }
    return wf__node_new(prims[which], &p, &a, 1);
}

wf_array *wf_sort(wf_array *a, int axis)
{
    return wf__array_publish(sort_node("wf_sort", WF_SORT_VALUES, a, axis, 0));
}

wf_array *wf_argsort(wf_array *a, int axis)
{
    return wf__array_publish(sort_node("wf_argsort", WF_SORT_INDICES, a, axis, 0));
}

wf_array *wf_partition(wf_array *a, int64_t kth, int axis)
{
    return wf__array_publish(sort_node("wf_partition", WF_PARTITION_VALUES, a, axis, kth));
}

wf_array *wf_argpartition(wf_array *a, int64_t kth, int axis)
{
    return wf__array_publish(sort_node("wf_argpartition", WF_PARTITION_INDICES, a, axis, kth));
}

wf_array *wf_topk(wf_array *a, int64_t k, int axis)
{
    return wf__array_publish(sort_node("wf_topk", WF_TOPK_VALUES, a, axis, k));
}

wf_array *wf_argtopk(wf_array *a, int64_t k, int axis)
{
    return wf__array_publish(sort_node("wf_argtopk", WF_TOPK_INDICES, a, axis, k));
}

wf_array *wf_cummax(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return wf__array_publish(scan_node("wf_cummax", WF_SCAN_MAX, a, axis, reverse, inclusive));
}

wf_array *wf_cummin(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return wf__array_publish(scan_node("wf_cummin", WF_SCAN_MIN, a, axis, reverse, inclusive));
}

wf_array *wf_logcumsumexp(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return wf__array_publish(
        scan_node("wf_logcumsumexp", WF_SCAN_LOGSUMEXP, a, axis, reverse, inclusive));
}
