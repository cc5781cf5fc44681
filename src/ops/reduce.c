/* Reductions: wf_sum. */
#include <string.h>

#include "core/error.h"
#include "prim/prims.h"

/* Turns an axis list into a bitmask; NULL with 0 axes means every axis. */
static wf_status axes_mask(const char *op, const int *axes, int naxes, int ndim, uint64_t *mask)
{
    *mask = 0;
    if (axes == NULL && naxes == 0) {
        *mask = ndim == 64 ? ~(uint64_t)0 : ((uint64_t)1 << ndim) - 1;
        return WF_OK;
    }
    if (axes == NULL)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: axes is NULL with naxes %d", op, naxes);
    if (naxes < 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: naxes is negative (%d)", op, naxes);
    for (int i = 0; i < naxes; i++) {
        int axis;
        wf_status st = wf__normalize_axis(op, axes[i], ndim, &axis);
        if (st != WF_OK)
            return st;
        if ((*mask >> axis) & 1u)
            return wf__error(WF_ERR_AXIS, "%s: axis %d repeated", op, axes[i]);
        *mask |= (uint64_t)1 << axis;
    }
    return WF_OK;
}

wf_array *wf_sum(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    if (!wf__array_check(a, "wf_sum", "a"))
        return NULL;
    wf_sum_params p;
    memset(&p, 0, sizeof p);
    if (axes_mask("wf_sum", axes, naxes, a->ndim, &p.axes) != WF_OK)
        return NULL;
    p.keepdims = keepdims;
    return wf__node_new(&wf__prim_sum, &p, &a, 1);
}
