/* Array creation ops: wf_full, wf_zeros, wf_ones, wf_arange, wf_full_like,
 * wf_zeros_like, wf_ones_like, wf_linspace, wf_eye (all lazy). */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/shape.h"

wf_array *wf__op_full(const int64_t *shape, int ndim, double value, wf_dtype dtype)
{
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_full: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (wf__check_shape("wf_full", shape, ndim) != WF_OK)
        return NULL;
    wf_full_params p;
    memset(&p, 0, sizeof p);
    p.value = value;
    p.dtype = dtype;
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    return wf__node_new(&wf__prim_full, &p, NULL, 0);
}

wf_array *wf__op_zeros(const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf__op_full(shape, ndim, 0.0, dtype);
}

wf_array *wf__op_ones(const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf__op_full(shape, ndim, 1.0, dtype);
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

wf_array *wf__op_arange(double start, double stop, double step, wf_dtype dtype)
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

/* An untraced `a` gives its shape now and is never evaluated. A traced one
 * (compile) becomes the input of a full_like node, so that a shapeless
 * replay fills the shape of the call instead of the traced shape. */
static wf_array *full_in_shape_of(wf_array *a, double value, const char *fn)
{
    if (!wf__array_check(a, fn, "a"))
        return NULL;
    if (!wf__array_is_placeholder(a))
        return wf__op_full(a->shape, a->ndim, value, a->dtype);
    wf_full_like_params p;
    memset(&p, 0, sizeof p);
    p.value = value;
    p.dtype = a->dtype;
    return wf__node_new(&wf__prim_full_like, &p, &a, 1);
}

wf_array *wf__op_full_like(wf_array *a, double value)
{
    return full_in_shape_of(a, value, "wf_full_like");
}

wf_array *wf__op_zeros_like(wf_array *a) { return full_in_shape_of(a, 0.0, "wf_zeros_like"); }

wf_array *wf__op_ones_like(wf_array *a) { return full_in_shape_of(a, 1.0, "wf_ones_like"); }

wf_array *wf__op_linspace(double start, double stop, int64_t num, wf_dtype dtype)
{
    wf_linspace_params p;
    memset(&p, 0, sizeof p);
    p.start = start;
    p.stop = stop;
    p.num = num;
    p.dtype = dtype;
    return wf__node_new(&wf__prim_linspace, &p, NULL, 0); /* checked by its infer */
}

wf_array *wf__op_eye(int64_t n, int64_t m, int64_t k, wf_dtype dtype)
{
    wf_eye_params p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.m = m;
    p.k = k;
    p.dtype = dtype;
    return wf__node_new(&wf__prim_eye, &p, NULL, 0); /* checked by its infer */
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_full(const int64_t *shape, int ndim, double value, wf_dtype dtype)
{
    return wf__array_publish(wf__op_full(shape, ndim, value, dtype));
}

wf_array *wf_zeros(const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf__array_publish(wf__op_zeros(shape, ndim, dtype));
}

wf_array *wf_ones(const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf__array_publish(wf__op_ones(shape, ndim, dtype));
}

wf_array *wf_arange(double start, double stop, double step, wf_dtype dtype)
{
    return wf__array_publish(wf__op_arange(start, stop, step, dtype));
}

wf_array *wf_full_like(wf_array *a, double value)
{
    return wf__array_publish(wf__op_full_like(a, value));
}

wf_array *wf_zeros_like(wf_array *a) { return wf__array_publish(wf__op_zeros_like(a)); }
wf_array *wf_ones_like(wf_array *a) { return wf__array_publish(wf__op_ones_like(a)); }

wf_array *wf_linspace(double start, double stop, int64_t num, wf_dtype dtype)
{
    return wf__array_publish(wf__op_linspace(start, stop, num, dtype));
}

wf_array *wf_eye(int64_t n, int64_t m, int64_t k, wf_dtype dtype)
{
    return wf__array_publish(wf__op_eye(n, m, k, dtype));
}
