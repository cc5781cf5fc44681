/* Shape ops: wf_reshape, wf_transpose, wf_broadcast_to, wf_slice. */
#include <string.h>

#include "core/error.h"
#include "prim/prims.h"

wf_array *wf_reshape(wf_array *a, const int64_t *shape, int ndim)
{
    if (!wf__array_check(a, "wf_reshape", "a"))
        return NULL;
    if (ndim < 0 || ndim > WF_MAX_NDIM) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_reshape: ndim %d is out of range [0, %d]", ndim,
                  WF_MAX_NDIM);
        return NULL;
    }
    if (shape == NULL && ndim > 0) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_reshape: shape is NULL with ndim %d", ndim);
        return NULL;
    }
    wf_reshape_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    return wf__node_new(&wf__prim_reshape, &p, &a, 1);
}

wf_array *wf_transpose(wf_array *a, const int *perm, int nperm)
{
    if (!wf__array_check(a, "wf_transpose", "a"))
        return NULL;
    const int ndim = a->ndim;
    wf_transpose_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    if (perm == NULL) {
        if (nperm != 0 && nperm != ndim) {
            wf__error(WF_ERR_NULL_ARGUMENT, "wf_transpose: perm is NULL with nperm %d", nperm);
            return NULL;
        }
        for (int i = 0; i < ndim; i++)
            p.perm[i] = ndim - 1 - i;
        return wf__node_new(&wf__prim_transpose, &p, &a, 1);
    }
    if (nperm != ndim) {
        wf__error(WF_ERR_AXIS, "wf_transpose: %d axes given for an array of ndim %d", nperm,
                  ndim);
        return NULL;
    }
    uint64_t seen = 0;
    for (int i = 0; i < ndim; i++) {
        int axis;
        if (wf__normalize_axis("wf_transpose", perm[i], ndim, &axis) != WF_OK)
            return NULL;
        if ((seen >> axis) & 1u) {
            wf__error(WF_ERR_AXIS, "wf_transpose: axis %d repeated", perm[i]);
            return NULL;
        }
        seen |= (uint64_t)1 << axis;
        p.perm[i] = axis;
    }
    return wf__node_new(&wf__prim_transpose, &p, &a, 1);
}

wf_array *wf_broadcast_to(wf_array *a, const int64_t *shape, int ndim)
{
    if (!wf__array_check(a, "wf_broadcast_to", "a"))
        return NULL;
    if (wf__check_shape("wf_broadcast_to", shape, ndim, a->dtype) != WF_OK)
        return NULL;
    wf_broadcast_to_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    return wf__node_new(&wf__prim_broadcast_to, &p, &a, 1);
}

wf_array *wf_slice(wf_array *a, const int64_t *starts, const int64_t *stops,
                   const int64_t *steps)
{
    if (!wf__array_check(a, "wf_slice", "a"))
        return NULL;
    const int ndim = a->ndim;
    if (ndim > 0 && (starts == NULL || stops == NULL || steps == NULL)) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_slice: %s is NULL",
                  starts == NULL ? "starts" : stops == NULL ? "stops" : "steps");
        return NULL;
    }
    wf_slice_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        if (steps[d] == 0) {
            wf__error(WF_ERR_INVALID_ARGUMENT, "wf_slice: step is 0 on axis %d", d);
            return NULL;
        }
        p.starts[d] = starts[d];
        p.stops[d] = stops[d];
        p.steps[d] = steps[d];
    }
    return wf__node_new(&wf__prim_slice, &p, &a, 1);
}
