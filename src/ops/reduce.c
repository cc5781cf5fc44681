/* Reductions (wf_sum, wf_mean, wf_prod, wf_max, wf_min, wf_all, wf_any,
 * wf_logsumexp, wf_var, wf_std), arg-reductions (wf_argmax, wf_argmin),
 * wf_softmax and scans (wf_cumsum, wf_cumprod).
 *
 * Every op is one primitive whose kernel reads the input as it is (any
 * strides, any dtype: conversions happen in the kernel's staging blocks), so
 * no cast or copy node is added in front of it. */
#include <math.h>
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

/* The reduced axes of a complex64 reduction in a bitmask; keepdims results
 * are squeezed over them at the end. */
static wf_array *squeeze_mask(wf_array *x, uint64_t mask, bool keepdims)
{
    int axes[WF_MAX_NDIM], n = 0;
    for (int d = 0; d < x->ndim; d++)
        if ((mask >> d) & 1u)
            axes[n++] = d;
    if (keepdims || n == 0)
        return wf__same_value(x);
    return wf__op_squeeze(x, axes, n);
}

/* prod of a complex64: per reduced axis, the last element of the inclusive
 * cumprod along it (complex products in order, as NumPy's loop); an empty
 * axis gives 1. */
static wf_array *complex_prod(wf_array *a, uint64_t mask, bool keepdims)
{
    wf_array *x = wf__same_value(a);
    for (int d = 0; x && d < a->ndim; d++) {
        if (!((mask >> d) & 1u))
            continue;
        wf_array *next;
        if (x->shape[d] == 0) {
            int64_t shape[WF_MAX_NDIM];
            wf__shape_copy(shape, x->shape, x->ndim);
            shape[d] = 1;
            next = wf__op_full(shape, x->ndim, 1.0, WF_DTYPE_C64);
        } else {
            wf_array *scan = wf__op_cumprod(x, d, false, true);
            int64_t starts[WF_MAX_NDIM] = {0}, steps[WF_MAX_NDIM];
            for (int k = 0; k < x->ndim; k++)
                steps[k] = 1;
            starts[d] = x->shape[d] - 1;
            next = scan ? wf__op_slice(scan, starts, x->shape, steps) : NULL;
            wf__array_release(scan);
        }
        wf__array_release(x);
        x = next;
    }
    wf_array *out = x ? squeeze_mask(x, mask, keepdims) : NULL;
    wf__array_release(x);
    return out;
}

/* max/min of a complex64 in NumPy's order (real part, then imaginary part):
 * the extreme real part, then the extreme imaginary part among the elements
 * that have it; a slice holding a NaN (in either part) gives NaN + NaN i. */
static wf_array *complex_extreme(wf_array *a, uint64_t mask, bool keepdims, bool is_max)
{
    int axes[WF_MAX_NDIM], n = 0;
    for (int d = 0; d < a->ndim; d++)
        if ((mask >> d) & 1u)
            axes[n++] = d;
    wf_array *(*extreme)(wf_array *, const int *, int, bool) = is_max ? wf__op_max : wf__op_min;
    wf_array *re = wf__op_real(a), *im = wf__op_imag(a);
    wf_array *m_re = re ? extreme(re, axes, n, true) : NULL;
    wf_array *on = m_re ? wf__op_equal(re, m_re) : NULL;
    wf_array *fill = wf__op_full(NULL, 0, is_max ? -INFINITY : INFINITY, WF_DTYPE_F32);
    wf_array *cand = on && im && fill ? wf__op_where(on, im, fill) : NULL;
    wf_array *m_im = cand ? extreme(cand, axes, n, true) : NULL;
    wf_array *nan_in = wf__op_isnan(a);
    wf_array *has_nan = nan_in ? wf__op_any(nan_in, axes, n, true) : NULL;
    wf_array *nan = wf__op_full(NULL, 0, NAN, WF_DTYPE_F32);
    wf_array *value = m_re && m_im ? wf__op_complex(m_re, m_im) : NULL;
    wf_array *nan_c = nan ? wf__op_complex(nan, nan) : NULL;
    wf_array *kept = has_nan && value && nan_c ? wf__op_where(has_nan, nan_c, value) : NULL;
    wf_array *out = kept ? squeeze_mask(kept, mask, keepdims) : NULL;
    wf_array *temps[] = {re, im, m_re, on, fill, cand, m_im, nan_in, has_nan, nan, value, nan_c,
                         kept};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++)
        wf__array_release(temps[i]);
    return out;
}

/* A complex64 prod/max/min, composed of the ops above (so gradients, vmap
 * and compile come with them). */
static wf_array *complex_reduce(const char *op, wf_array *a, const int *axes, int naxes,
                                bool keepdims)
{
    uint64_t mask;
    if (axes_mask(op, axes, naxes, a->ndim, &mask) != WF_OK)
        return NULL;
    if (op[3] == 'p')
        return complex_prod(a, mask, keepdims);
    return complex_extreme(a, mask, keepdims, op[4] == 'a');
}

static bool is_complex(wf_array *a, const char *op)
{
    return a && wf__array_check(a, op, "a") && a->dtype == WF_DTYPE_C64;
}

wf_array *wf__op_prod(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    if (is_complex(a, "wf_prod"))
        return complex_reduce("wf_prod", a, axes, naxes, keepdims);
    return reduce_op("wf_prod", WF_REDUCE_PROD, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_max(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    if (is_complex(a, "wf_max"))
        return complex_reduce("wf_max", a, axes, naxes, keepdims);
    return reduce_op("wf_max", WF_REDUCE_MAX, a, axes, naxes, keepdims, 0);
}

wf_array *wf__op_min(wf_array *a, const int *axes, int naxes, bool keepdims)
{
    if (is_complex(a, "wf_min"))
        return complex_reduce("wf_min", a, axes, naxes, keepdims);
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
