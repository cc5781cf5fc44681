/* Array creation ops: wf_full, wf_zeros, wf_ones, wf_arange (all lazy). */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

wf_array *wf_full(const int64_t *shape, int ndim, double value, wf_dtype dtype)
{
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_full: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (wf__check_shape("wf_full", shape, ndim, dtype) != WF_OK)
        return NULL;
    wf_full_params p;
    memset(&p, 0, sizeof p);
    p.value = value;
    p.dtype = dtype;
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    return wf__node_new(&wf__prim_full, &p, NULL, 0);
}

wf_array *wf_zeros(const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf_full(shape, ndim, 0.0, dtype);
}

wf_array *wf_ones(const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf_full(shape, ndim, 1.0, dtype);
}

/* Number of elements: ceil((stop - start) / step), 0 if negative. */
static wf_status arange_count(double start, double stop, double step, int64_t *count)
{
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_arange: start, stop and step must be finite (%g, %g, %g)", start,
                         stop, step);
    if (step == 0.0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_arange: step is 0");
    const double n = ceil((stop - start) / step);
    if (!(n <= (double)(INT64_MAX / 8))) /* also catches inf from stop - start */
        return wf__error(WF_ERR_OVERFLOW, "wf_arange: (%g - %g) / %g elements is too many",
                         stop, start, step);
    *count = n > 0 ? (int64_t)n : 0;
    return WF_OK;
}

wf_array *wf_arange(double start, double stop, double step, wf_dtype dtype)
{
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_arange: invalid dtype %d", (int)dtype);
        return NULL;
    }
    int64_t count = 0;
    if (arange_count(start, stop, step, &count) != WF_OK)
        return NULL;
    wf_arange_params p;
    memset(&p, 0, sizeof p);
    p.start = start;
    p.step = step;
    p.count = count;
    p.dtype = dtype;
    return wf__node_new(&wf__prim_arange, &p, NULL, 0);
}
