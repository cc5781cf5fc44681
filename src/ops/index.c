/* Indexing ops: wf_take, wf_take_along_axis, wf_scatter_add. Indices are
 * arrays of any integer dtype: the kernels read u8, i32 and i64, and the
 * ops convert the others first (int8, int16, uint16 to int32, uint32 and
 * uint64 to int64; a uint64 from 2^63 on is clamped to 2^63 first, which
 * wraps to INT64_MIN, out of range for every array). Out-of-range indices
 * fail at evaluation. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/shape.h"

static bool check_index_dtype(const char *op, const wf_array *indices)
{
    if (wf__is_index_dtype(indices->dtype))
        return true;
    wf__error(WF_ERR_DTYPE, "%s: indices must have an integer dtype, not %s", op,
              wf_dtype_name(indices->dtype));
    return false;
}

/* The dtype the kernels read `d` as. */
static wf_dtype kernel_index_dtype(wf_dtype d)
{
    if (wf__is_index_dtype(d) || !wf__dtype_is_integer(d))
        return d;
    return wf_dtype_size(d) <= 2 ? WF_DTYPE_I32 : WF_DTYPE_I64;
}

/* Runs `build` with indices the kernels read (converted if needed). */
static wf_array *with_kernel_indices(const char *op, wf_array *a, wf_array *indices,
                                     wf_array *updates, int axis,
                                     wf_array *(*build)(wf_array *, wf_array *, wf_array *, int))
{
    if (!wf__array_check(a, op, "a") || !wf__array_check(indices, op, "indices"))
        return NULL;
    const wf_dtype kd = kernel_index_dtype(indices->dtype);
    if (kd == indices->dtype)
        return build(a, indices, updates, axis);
    wf_array *clamped = NULL;
    if (indices->dtype == WF_DTYPE_U64) { /* not to wrap onto a valid negative index */
        wf_array *limit = wf__op_full(NULL, 0, 9223372036854775808.0, WF_DTYPE_U64);
        clamped = limit ? wf__op_minimum(indices, limit) : NULL;
        wf__array_release(limit);
        if (!clamped)
            return NULL;
    }
    wf_array *ix = wf__op_astype(clamped ? clamped : indices, kd);
    wf__array_release(clamped);
    if (!ix)
        return NULL;
    wf_array *out = build(a, ix, updates, axis);
    wf__array_release(ix);
    return out;
}

static wf_array *take_node(wf_array *a, wf_array *indices, wf_array *unused, int axis)
{
    (void)unused;
    if (!wf__array_check(a, "wf_take", "a") || !wf__array_check(indices, "wf_take", "indices"))
        return NULL;
    wf_axis_params p;
    memset(&p, 0, sizeof p);
    if (wf__normalize_axis("wf_take", axis, a->ndim, &p.axis) != WF_OK ||
        !check_index_dtype("wf_take", indices))
        return NULL;
    if (a->shape[p.axis] == 0 && indices->size > 0) {
        wf__error(WF_ERR_SHAPE, "wf_take: cannot take %lld indices from axis %d of size 0",
                  (long long)indices->size, p.axis);
        return NULL;
    }
    wf_array *inputs[2] = {a, indices};
    return wf__node_new(&wf__prim_take, &p, inputs, 2);
}

static wf_array *take_along_node(wf_array *a, wf_array *indices, wf_array *unused, int axis)
{
    (void)unused;
    const char *op = "wf_take_along_axis";
    if (!wf__array_check(a, op, "a") || !wf__array_check(indices, op, "indices"))
        return NULL;
    wf_axis_params p;
    memset(&p, 0, sizeof p);
    if (wf__normalize_axis(op, axis, a->ndim, &p.axis) != WF_OK ||
        !check_index_dtype(op, indices))
        return NULL;
    char sa[256], si[256];
    if (indices->ndim != a->ndim) {
        wf__error(WF_ERR_SHAPE, "%s: indices of shape %s and array of shape %s differ in rank",
                  op, wf__shape_str(indices->shape, indices->ndim, si, sizeof si),
                  wf__shape_str(a->shape, a->ndim, sa, sizeof sa));
        return NULL;
    }
    /* Broadcast everything but the axis. */
    int64_t a_shape[WF_MAX_NDIM], i_shape[WF_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++) {
        int64_t x = a->shape[d], y = indices->shape[d];
        if (d == p.axis) {
            a_shape[d] = x;
            i_shape[d] = y;
            continue;
        }
        if (x != y && x != 1 && y != 1) {
            wf__error(WF_ERR_SHAPE,
                      "%s: indices of shape %s do not broadcast against the array's shape %s "
                      "(axis %d)",
                      op, wf__shape_str(indices->shape, indices->ndim, si, sizeof si),
                      wf__shape_str(a->shape, a->ndim, sa, sizeof sa), d);
            return NULL;
        }
        a_shape[d] = i_shape[d] = x == 1 ? y : x;
    }
    wf_array *x = a, *ix = indices, *out = NULL;
    if (!wf__shape_equal(a_shape, a->ndim, a->shape, a->ndim))
        x = wf__op_broadcast_to(a, a_shape, a->ndim);
    if (x && !wf__shape_equal(i_shape, a->ndim, indices->shape, a->ndim))
        ix = wf__op_broadcast_to(indices, i_shape, a->ndim);
    if (x && ix) {
        wf_array *inputs[2] = {x, ix};
        out = wf__node_new(&wf__prim_take_along_axis, &p, inputs, 2);
    }
    if (x != a)
        wf__array_release(x);
    if (ix != indices)
        wf__array_release(ix);
    return out;
}

static wf_array *scatter_add_node(wf_array *a, wf_array *indices, wf_array *updates, int axis)
{
    const char *op = "wf_scatter_add";
    if (!wf__array_check(a, op, "a") || !wf__array_check(indices, op, "indices") ||
        !wf__array_check(updates, op, "updates"))
        return NULL;
    wf_axis_params p;
    memset(&p, 0, sizeof p);
    if (wf__normalize_axis(op, axis, a->ndim, &p.axis) != WF_OK ||
        !check_index_dtype(op, indices))
        return NULL;
    char s0[256], s1[256];
    if (indices->ndim != 1) {
        wf__error(WF_ERR_SHAPE, "%s: indices must be 1-d, got shape %s", op,
                  wf__shape_str(indices->shape, indices->ndim, s0, sizeof s0));
        return NULL;
    }
    /* Updates: a's shape with the axis replaced by the number of indices;
     * they broadcast to it and are converted to a's dtype. */
    int64_t want[WF_MAX_NDIM], joined[WF_MAX_NDIM];
    int njoined = 0;
    wf__shape_copy(want, a->shape, a->ndim);
    want[p.axis] = indices->shape[0];
    if (updates->ndim > a->ndim ||
        wf__broadcast_shapes(op, updates->shape, updates->ndim, want, a->ndim, joined,
                             &njoined) != WF_OK ||
        !wf__shape_equal(joined, njoined, want, a->ndim)) {
        wf__error(WF_ERR_SHAPE, "%s: updates of shape %s do not broadcast to %s", op,
                  wf__shape_str(updates->shape, updates->ndim, s0, sizeof s0),
                  wf__shape_str(want, a->ndim, s1, sizeof s1));
        return NULL;
    }
    wf_array *u = wf__op_astype(updates, a->dtype), *out = NULL;
    if (u && !wf__shape_equal(u->shape, u->ndim, want, a->ndim)) {
        wf_array *b = wf__op_broadcast_to(u, want, a->ndim);
        wf__array_release(u);
        u = b;
    }
    if (u) {
        wf_array *inputs[3] = {a, indices, u};
        out = wf__node_new(&wf__prim_scatter_add, &p, inputs, 3);
    }
    wf__array_release(u);
    return out;
}

wf_array *wf__op_take(wf_array *a, wf_array *indices, int axis)
{
    return with_kernel_indices("wf_take", a, indices, NULL, axis, take_node);
}

wf_array *wf__op_take_along_axis(wf_array *a, wf_array *indices, int axis)
{
    return with_kernel_indices("wf_take_along_axis", a, indices, NULL, axis, take_along_node);
}

wf_array *wf__op_scatter_add(wf_array *a, wf_array *indices, wf_array *updates, int axis)
{
    return with_kernel_indices("wf_scatter_add", a, indices, updates, axis, scatter_add_node);
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_take(wf_array *a, wf_array *indices, int axis)
{
    return wf__array_publish(wf__op_take(a, indices, axis));
}

wf_array *wf_take_along_axis(wf_array *a, wf_array *indices, int axis)
{
    return wf__array_publish(wf__op_take_along_axis(a, indices, axis));
}

wf_array *wf_scatter_add(wf_array *a, wf_array *indices, wf_array *updates, int axis)
{
    return wf__array_publish(wf__op_scatter_add(a, indices, updates, axis));
}
