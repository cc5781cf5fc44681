/* Element-wise ops: wf_astype, wf_add, wf_multiply, wf_exp.
 *
 * Binary ops promote both operands to one dtype (wf_astype) and broadcast
 * them to one shape (wf_broadcast_to, a 0-stride view) here, so their
 * kernels see inputs of the output's shape and dtype. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

wf_array *wf_astype(wf_array *a, wf_dtype dtype)
{
    if (!wf__array_check(a, "wf_astype", "a"))
        return NULL;
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_astype: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (a->dtype == dtype) /* arrays are immutable: the same value will do */
        return wf_retain(a);
    wf_astype_params p;
    memset(&p, 0, sizeof p);
    p.dtype = dtype;
    return wf__node_new(&wf__prim_astype, &p, &a, 1);
}

/* Casts and broadcasts `x` to (dtype, shape). *owned receives the new
 * reference when one was made (released by the caller), else NULL. */
static wf_array *conform(wf_array *x, wf_dtype dtype, const int64_t *shape, int ndim,
                         wf_array **owned)
{
    *owned = NULL;
    if (x->dtype != dtype) {
        x = wf_astype(x, dtype);
        if (!x)
            return NULL;
        *owned = x;
    }
    if (!wf__shape_equal(x->shape, x->ndim, shape, ndim)) {
        wf_array *b = wf_broadcast_to(x, shape, ndim);
        wf_release(*owned);
        *owned = b;
        x = b;
    }
    return x;
}

static wf_array *binary_op(const char *op, const wf_prim_def *prim, wf_array *a, wf_array *b)
{
    if (!wf__array_check(a, op, "a") || !wf__array_check(b, op, "b"))
        return NULL;
    const wf_dtype dtype = wf_promote_types(a->dtype, b->dtype);
    int64_t shape[WF_MAX_NDIM];
    int ndim;
    if (wf__broadcast_shapes(op, a->shape, a->ndim, b->shape, b->ndim, shape, &ndim) != WF_OK)
        return NULL;
    wf_array *owned_a, *owned_b = NULL, *out = NULL;
    wf_array *x = conform(a, dtype, shape, ndim, &owned_a);
    wf_array *y = x ? conform(b, dtype, shape, ndim, &owned_b) : NULL;
    if (x && y) {
        wf_array *inputs[2] = {x, y};
        out = wf__node_new(prim, NULL, inputs, 2);
    }
    wf_release(owned_a);
    wf_release(owned_b);
    return out;
}

wf_array *wf_add(wf_array *a, wf_array *b) { return binary_op("wf_add", &wf__prim_add, a, b); }

wf_array *wf_multiply(wf_array *a, wf_array *b)
{
    return binary_op("wf_multiply", &wf__prim_multiply, a, b);
}

wf_array *wf_exp(wf_array *a)
{
    if (!wf__array_check(a, "wf_exp", "a"))
        return NULL;
    if (wf__dtype_is_float(a->dtype))
        return wf__node_new(&wf__prim_exp, NULL, &a, 1);
    wf_array *x = wf_astype(a, WF_DTYPE_F32);
    if (!x)
        return NULL;
    wf_array *out = wf__node_new(&wf__prim_exp, NULL, &x, 1);
    wf_release(x);
    return out;
}
