/* Reductions (wf_sum, wf_mean, wf_prod, wf_max, wf_min, wf_all, wf_any,
 * wf_logsumexp, wf_var, wf_std), arg-reductions (wf_argmax, wf_argmin),
 * wf_softmax and scans (wf_cumsum, wf_cumprod).
 *
 * Every op is one primitive whose kernel reads the input as it is (any
 * strides, any dtype: conversions happen in the kernel's staging blocks), so
 * no cast or copy node is added in front of it. */
#include <string.h>

#include "core/error.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/reduce.h"

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

/* A reduction of a complex64 as the same reduction of each part (the same
 * fixed order as a real reduction of that shape). */
static wf_array *complex_parts_reduce(wf_array *a, const int *axes, int naxes, bool keepdims,
                                      wf_array *(*reduce)(wf_array *, const int *, int, bool))
{
    wf_array *re = wf__op_real(a), *im = wf__op_imag(a);
    wf_array *sr = re ? reduce(re, axes, naxes, keepdims) : NULL;
    wf_array *si = im ? reduce(im, axes, naxes, keepdims) : NULL;
    wf_array *out = sr && si ? wf__op_complex(sr, si) : NULL;
    wf__array_release(re);
    wf__array_release(im);
    wf__array_release(sr);
    wf__array_release(si);
    return out;
}

wf_array *wf__op_sum(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    if (!wf__array_check(a, "wf_sum", "a"))
        return NULL;
    if (a->dtype == WF_DTYPE_C64)
        return complex_parts_reduce(a, axes, naxes, keepdims, wf__op_sum);
    wf_sum_params p;
    memset(&p, 0, sizeof p);
    if (axes_mask("wf_sum", axes, naxes, a->ndim, &p.axes) != WF_OK)
        return NULL;
    p.keepdims = keepdims;
    return wf__node_new(&wf__prim_sum, &p, &a, 1);
}

static wf_array *reduce_op(const char *op, wf_reduce_op rop, wf_array *a, const int *axes,
                           int naxes, bool keepdims, int ddof)
{
    if (!wf__array_check(a, op, "a"))
        return NULL;
    wf_reduce_params p;
    memset(&p, 0, sizeof p);
    if (axes_mask(op, axes, naxes, a->ndim, &p.axes) != WF_OK)
        return NULL;
    p.op = rop;
    p.keepdims = keepdims;
    p.ddof = ddof;
    return wf__node_new(wf__reduce_prim(rop), &p, &a, 1);
}

wf_array *wf__op_mean(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    if (a && wf__array_check(a, "wf_mean", "a") && a->dtype == WF_DTYPE_C64)
        return complex_parts_reduce(a, axes, naxes, keepdims, wf__op_mean);
    return reduce_op("wf_mean", WF_REDUCE_MEAN, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_prod(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return reduce_op("wf_prod", WF_REDUCE_PROD, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_max(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return reduce_op("wf_max", WF_REDUCE_MAX, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_min(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return reduce_op("wf_min", WF_REDUCE_MIN, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_all(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return reduce_op("wf_all", WF_REDUCE_ALL, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_any(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return reduce_op("wf_any", WF_REDUCE_ANY, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_logsumexp(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return reduce_op("wf_logsumexp", WF_REDUCE_LOGSUMEXP, a, axes, naxes, keepdims, 0);
}

/* ddof follows NumPy: the divisor is max(n - ddof, 0) (so ddof >= n gives
 * inf or NaN), and a negative ddof is allowed. */
wf_array *wf__op_var(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof)
{
    return reduce_op("wf_var", WF_REDUCE_VAR, a, axes, naxes, keepdims, ddof);
}

wf_array *wf__op_std(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof)
{
    return reduce_op("wf_std", WF_REDUCE_STD, a, axes, naxes, keepdims, ddof);
}

static wf_array *arg_reduce(const char *op, int which, wf_array *a, int axis, bool keepdims)
{
    if (!wf__array_check(a, op, "a"))
        return NULL;
    wf_arg_reduce_params p;
    memset(&p, 0, sizeof p);
    if (wf__normalize_axis(op, axis, a->ndim, &p.axis) != WF_OK)
        return NULL;
    p.op = which;
    p.keepdims = keepdims;
    return wf__node_new(which == 1 ? &wf__prim_argmin : &wf__prim_argmax, &p, &a, 1);
}

wf_array *wf__op_argmax(wf_array *a, int axis, bool keepdims)
{
    return arg_reduce("wf_argmax", 0, a, axis, keepdims);
}

wf_array *wf__op_argmin(wf_array *a, int axis, bool keepdims)
{
    return arg_reduce("wf_argmin", 1, a, axis, keepdims);
}

wf_array *wf__op_softmax(wf_array *a, const int *axes, int naxes)
{
    if (!wf__array_check(a, "wf_softmax", "a"))
        return NULL;
    wf_softmax_params p;
    memset(&p, 0, sizeof p);
    if (axes_mask("wf_softmax", axes, naxes, a->ndim, &p.axes) != WF_OK)
        return NULL;
    return wf__node_new(&wf__prim_softmax, &p, &a, 1);
}

static wf_array *scan(const char *op, int which, wf_array *a, int axis, bool reverse,
                      bool inclusive)
{
    if (!wf__array_check(a, op, "a"))
        return NULL;
    wf_scan_params p;
    memset(&p, 0, sizeof p);
    if (wf__normalize_axis(op, axis, a->ndim, &p.axis) != WF_OK)
        return NULL;
    p.op = which;
    p.reverse = reverse;
    p.inclusive = inclusive;
    return wf__node_new(which == 1 ? &wf__prim_cumprod : &wf__prim_cumsum, &p, &a, 1);
}

wf_array *wf__op_cumsum(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return scan("wf_cumsum", 0, a, axis, reverse, inclusive);
}

wf_array *wf__op_cumprod(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return scan("wf_cumprod", 1, a, axis, reverse, inclusive);
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_sum(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_sum(a, axes, naxes, keepdims));
}

wf_array *wf_mean(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_mean(a, axes, naxes, keepdims));
}

wf_array *wf_prod(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_prod(a, axes, naxes, keepdims));
}

wf_array *wf_max(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_max(a, axes, naxes, keepdims));
}

wf_array *wf_min(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_min(a, axes, naxes, keepdims));
}

wf_array *wf_all(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_all(a, axes, naxes, keepdims));
}

wf_array *wf_any(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_any(a, axes, naxes, keepdims));
}

wf_array *wf_logsumexp(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    return wf__array_publish(wf__op_logsumexp(a, axes, naxes, keepdims));
}

wf_array *wf_var(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof)
{
    return wf__array_publish(wf__op_var(a, axes, naxes, keepdims, ddof));
}

wf_array *wf_std(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof)
{
    return wf__array_publish(wf__op_std(a, axes, naxes, keepdims, ddof));
}

wf_array *wf_argmax(wf_array *a, int axis, bool keepdims)
{
    return wf__array_publish(wf__op_argmax(a, axis, keepdims));
}

wf_array *wf_argmin(wf_array *a, int axis, bool keepdims)
{
    return wf__array_publish(wf__op_argmin(a, axis, keepdims));
}

wf_array *wf_softmax(wf_array *a, const int *axes, int naxes)
{
    return wf__array_publish(wf__op_softmax(a, axes, naxes));
}

wf_array *wf_cumsum(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return wf__array_publish(wf__op_cumsum(a, axis, reverse, inclusive));
}

wf_array *wf_cumprod(wf_array *a, int axis, bool reverse, bool inclusive)
{
    return wf__array_publish(wf__op_cumprod(a, axis, reverse, inclusive));
}
