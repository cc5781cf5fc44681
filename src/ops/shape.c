/* Shape ops: wf_reshape, wf_transpose, wf_broadcast_to, wf_slice and the
 * ops built on them (swapaxes, moveaxis, expand_dims, squeeze, flatten,
 * split, split_at, stack, repeat, tile); slice_update, concatenate, pad,
 * tril and triu have primitives of their own. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/scope.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "util/fault.h"

/* An identity reshape whose dims follow the input's (expand_dims of no
 * axes): a shapeless compiled replay follows the call's shape through it. */
wf_array *wf__same_value(wf_array *a) { return wf__op_expand_dims(a, NULL, 0); }

wf_array *wf__op_reshape(wf_array *a, const int64_t *shape, int ndim)
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

/* Output dimension d of `p` is the product of a's dimensions [begin, end):
 * it follows a's shape when a shapeless compiled call replays the node. */
static void derive_dim(wf_reshape_params *p, int d, const wf_array *a, int begin, int end)
{
    p->shape[d] = 1;
    for (int k = begin; k < end; k++)
        p->shape[d] *= a->shape[k]; /* bounded by a's size */
    p->in_begin[d] = (int8_t)begin;
    p->in_end[d] = (int8_t)end;
}

wf_array *wf__op_transpose(wf_array *a, const int *perm, int nperm)
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

wf_array *wf__op_implicit_broadcast(wf_array *a, const int64_t *shape, int ndim)
{
    wf_array *b = wf__op_broadcast_to(a, shape, ndim);
    if (b) /* not yet seen by any other thread */
        b->node_flags |= WF_NODE_FLAG_IMPLICIT_BROADCAST;
    return b;
}

wf_array *wf__op_broadcast_to(wf_array *a, const int64_t *shape, int ndim)
{
    if (!wf__array_check(a, "wf_broadcast_to", "a"))
        return NULL;
    if (wf__check_shape("wf_broadcast_to", shape, ndim) != WF_OK)
        return NULL;
    wf_broadcast_to_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    return wf__node_new(&wf__prim_broadcast_to, &p, &a, 1);
}

wf_array *wf__op_slice(wf_array *a, const int64_t *starts, const int64_t *stops,
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

/* ---------------------------------------------------------------- axis permutations */

wf_array *wf__op_swapaxes(wf_array *a, int axis1, int axis2)
{
    if (!wf__array_check(a, "wf_swapaxes", "a"))
        return NULL;
    int x, y;
    if (wf__normalize_axis("wf_swapaxes", axis1, a->ndim, &x) != WF_OK ||
        wf__normalize_axis("wf_swapaxes", axis2, a->ndim, &y) != WF_OK)
        return NULL;
    int perm[WF_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++)
        perm[d] = d;
    perm[x] = y;
    perm[y] = x;
    return wf__op_transpose(a, perm, a->ndim);
}

wf_array *wf__op_moveaxis(wf_array *a, int source, int destination)
{
    if (!wf__array_check(a, "wf_moveaxis", "a"))
        return NULL;
    int src, dst;
    if (wf__normalize_axis("wf_moveaxis", source, a->ndim, &src) != WF_OK ||
        wf__normalize_axis("wf_moveaxis", destination, a->ndim, &dst) != WF_OK)
        return NULL;
    int rest[WF_MAX_NDIM], perm[WF_MAX_NDIM], n = 0;
    for (int d = 0; d < a->ndim; d++)
        if (d != src)
            rest[n++] = d;
    for (int d = 0, k = 0; d < a->ndim; d++)
        perm[d] = d == dst ? src : rest[k++];
    return wf__op_transpose(a, perm, a->ndim);
}

/* ---------------------------------------------------------------- reshapes */

wf_array *wf__op_expand_dims(wf_array *a, const int *axes, int naxes)
{
    if (!wf__array_check(a, "wf_expand_dims", "a"))
        return NULL;
    if (naxes < 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_expand_dims: naxes is negative (%d)", naxes);
        return NULL;
    }
    if (axes == NULL && naxes > 0) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_expand_dims: axes is NULL with naxes %d", naxes);
        return NULL;
    }
    const int rank = a->ndim + naxes;
    if (naxes > WF_MAX_NDIM || rank > WF_MAX_NDIM) {
        wf__error(WF_ERR_AXIS, "wf_expand_dims: the result would have rank %d (max %d)",
                  a->ndim + naxes, WF_MAX_NDIM);
        return NULL;
    }
    bool inserted[WF_MAX_NDIM] = {false};
    for (int i = 0; i < naxes; i++) {
        int axis;
        if (wf__normalize_axis("wf_expand_dims", axes[i], rank, &axis) != WF_OK)
            return NULL;
        if (inserted[axis]) {
            wf__error(WF_ERR_AXIS, "wf_expand_dims: axis %d repeated", axes[i]);
            return NULL;
        }
        inserted[axis] = true;
    }
    wf_reshape_params p;
    memset(&p, 0, sizeof p);
    p.follows_input = true;
    p.ndim = rank;
    for (int d = 0, k = 0; d < rank; d++) {
        if (inserted[d]) {
            p.shape[d] = 1;
        } else {
            derive_dim(&p, d, a, k, k + 1);
            k++;
        }
    }
    return wf__node_new(&wf__prim_reshape, &p, &a, 1);
}

wf_array *wf__op_squeeze(wf_array *a, const int *axes, int naxes)
{
    if (!wf__array_check(a, "wf_squeeze", "a"))
        return NULL;
    if (naxes < 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_squeeze: naxes is negative (%d)", naxes);
        return NULL;
    }
    if (axes == NULL && naxes > 0) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_squeeze: axes is NULL with naxes %d", naxes);
        return NULL;
    }
    bool drop[WF_MAX_NDIM] = {false};
    if (axes == NULL) {
        for (int d = 0; d < a->ndim; d++)
            drop[d] = a->shape[d] == 1;
    } else {
        for (int i = 0; i < naxes; i++) {
            int axis;
            if (wf__normalize_axis("wf_squeeze", axes[i], a->ndim, &axis) != WF_OK)
                return NULL;
            if (drop[axis]) {
                wf__error(WF_ERR_AXIS, "wf_squeeze: axis %d repeated", axes[i]);
                return NULL;
            }
            if (a->shape[axis] != 1) {
                wf__error(WF_ERR_SHAPE, "wf_squeeze: axis %d has size %lld, not 1", axes[i],
                          (long long)a->shape[axis]);
                return NULL;
            }
            drop[axis] = true;
        }
    }
    wf_reshape_params p;
    memset(&p, 0, sizeof p);
    p.follows_input = true;
    for (int d = 0; d < a->ndim; d++)
        if (!drop[d])
            derive_dim(&p, p.ndim++, a, d, d + 1);
    return wf__node_new(&wf__prim_reshape, &p, &a, 1);
}

wf_array *wf__op_flatten(wf_array *a, int start_axis, int end_axis)
{
    if (!wf__array_check(a, "wf_flatten", "a"))
        return NULL;
    const int ndim = a->ndim > 0 ? a->ndim : 1;
    int start, end;
    if (wf__normalize_axis("wf_flatten", start_axis, ndim, &start) != WF_OK ||
        wf__normalize_axis("wf_flatten", end_axis, ndim, &end) != WF_OK)
        return NULL;
    if (start > end) {
        wf__error(WF_ERR_AXIS, "wf_flatten: start axis %d is after end axis %d", start_axis,
                  end_axis);
        return NULL;
    }
    wf_reshape_params p;
    memset(&p, 0, sizeof p);
    p.follows_input = true;
    if (a->ndim == 0) { /* a scalar flattens to (1) */
        p.ndim = 1;
        p.shape[0] = 1;
        return wf__node_new(&wf__prim_reshape, &p, &a, 1);
    }
    for (int d = 0; d < start; d++)
        derive_dim(&p, p.ndim++, a, d, d + 1);
    derive_dim(&p, p.ndim++, a, start, end + 1);
    for (int d = end + 1; d < a->ndim; d++)
        derive_dim(&p, p.ndim++, a, d, d + 1);
    return wf__node_new(&wf__prim_reshape, &p, &a, 1);
}

wf_array *wf__op_unflatten(wf_array *a, int axis, const int64_t *shape, int n)
{
    if (!wf__array_check(a, "wf_unflatten", "a"))
        return NULL;
    int ax;
    if (wf__normalize_axis("wf_unflatten", axis, a->ndim, &ax) != WF_OK)
        return NULL;
    if (n < 1 || shape == NULL) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_unflatten: the shape must not be empty");
        return NULL;
    }
    if (a->ndim - 1 + n > WF_MAX_NDIM) {
        wf__error(WF_ERR_SHAPE, "wf_unflatten: the result would have rank %d (max %d)",
                  a->ndim - 1 + n, WF_MAX_NDIM);
        return NULL;
    }
    wf_reshape_params p;
    memset(&p, 0, sizeof p);
    p.follows_input = true;
    for (int d = 0; d < ax; d++)
        derive_dim(&p, p.ndim++, a, d, d + 1);
    for (int i = 0; i < n; i++)
        p.shape[p.ndim++] = shape[i]; /* one may be -1: the axis's size over the others */
    for (int d = ax + 1; d < a->ndim; d++)
        derive_dim(&p, p.ndim++, a, d, d + 1);
    return wf__node_new(&wf__prim_reshape, &p, &a, 1);
}

/* ---------------------------------------------------------------- slice_update */

/* Casts `x` to `dtype` and broadcasts it to `shape`, with errors naming `op`.
 * Returns a new reference. */
static wf_array *cast_and_broadcast(const char *op, const char *what, wf_array *x,
                                    wf_dtype dtype, const int64_t *shape, int ndim)
{
    int64_t joined[WF_MAX_NDIM];
    int njoined = 0;
    char sx[256], st[256];
    if (x->ndim > ndim ||
        wf__broadcast_shapes(op, x->shape, x->ndim, shape, ndim, joined, &njoined) != WF_OK ||
        !wf__shape_equal(joined, njoined, shape, ndim)) {
        wf__error(WF_ERR_SHAPE, "%s: %s of shape %s cannot broadcast to %s", op, what,
                  wf__shape_str(x->shape, x->ndim, sx, sizeof sx),
                  wf__shape_str(shape, ndim, st, sizeof st));
        return NULL;
    }
    wf_array *c = wf__op_astype(x, dtype);
    if (!c || wf__shape_equal(c->shape, c->ndim, shape, ndim))
        return c;
    wf_array *b = wf__op_broadcast_to(c, shape, ndim);
    wf__array_release(c);
    return b;
}

wf_array *wf__op_slice_update(wf_array *a, wf_array *update, const int64_t *starts,
                              const int64_t *stops, const int64_t *steps)
{
    if (!wf__array_check(a, "wf_slice_update", "a") ||
        !wf__array_check(update, "wf_slice_update", "update"))
        return NULL;
    const int ndim = a->ndim;
    if (ndim > 0 && (starts == NULL || stops == NULL || steps == NULL)) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_slice_update: %s is NULL",
                  starts == NULL ? "starts" : stops == NULL ? "stops" : "steps");
        return NULL;
    }
    wf_slice_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    int64_t shape[WF_MAX_NDIM];
    for (int d = 0; d < ndim; d++) {
        if (steps[d] == 0) {
            wf__error(WF_ERR_INVALID_ARGUMENT, "wf_slice_update: step is 0 on axis %d", d);
            return NULL;
        }
        p.starts[d] = starts[d];
        p.stops[d] = stops[d];
        p.steps[d] = steps[d];
        int64_t first;
        wf__slice_resolve(a->shape[d], starts[d], stops[d], steps[d], &first, &shape[d]);
    }
    wf_array *u = cast_and_broadcast("wf_slice_update", "update", update, a->dtype, shape, ndim);
    if (!u)
        return NULL;
    wf_array *inputs[2] = {a, u};
    wf_array *out = wf__node_new(&wf__prim_slice_update, &p, inputs, 2);
    wf__array_release(u);
    return out;
}

/* ---------------------------------------------------------------- concatenate, stack */

wf_array *wf__op_concatenate(wf_array *const *arrays, int count, int axis)
{
    if (count <= 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_concatenate: count is %d, need at least 1",
                  count);
        return NULL;
    }
    if (arrays == NULL) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_concatenate: arrays is NULL with count %d", count);
        return NULL;
    }
    for (int i = 0; i < count; i++)
        if (!wf__array_check(arrays[i], "wf_concatenate", "an input array"))
            return NULL;
    const int ndim = arrays[0]->ndim;
    if (ndim == 0) {
        wf__error(WF_ERR_SHAPE, "wf_concatenate: 0-d arrays cannot be concatenated");
        return NULL;
    }
    wf_axis_params p;
    memset(&p, 0, sizeof p);
    if (wf__normalize_axis("wf_concatenate", axis, ndim, &p.axis) != WF_OK)
        return NULL;
    wf_dtype dtype = arrays[0]->dtype;
    for (int i = 1; i < count; i++)
        dtype = wf_promote_types(dtype, arrays[i]->dtype);
    wf_array **cast = wf__malloc((size_t)count * sizeof *cast);
    if (!cast) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_concatenate: out of memory");
        return NULL;
    }
    int made = 0;
    wf_array *out = NULL;
    for (; made < count; made++) {
        cast[made] = wf__op_astype(arrays[made], dtype);
        if (!cast[made])
            break;
    }
    if (made == count)
        out = wf__node_new(&wf__prim_concatenate, &p, cast, count);
    for (int i = 0; i < made; i++)
        wf__array_release(cast[i]);
    free(cast);
    return out;
}

wf_array *wf__op_stack(wf_array *const *arrays, int count, int axis)
{
    if (count <= 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_stack: count is %d, need at least 1", count);
        return NULL;
    }
    if (arrays == NULL) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_stack: arrays is NULL with count %d", count);
        return NULL;
    }
    for (int i = 0; i < count; i++)
        if (!wf__array_check(arrays[i], "wf_stack", "an input array"))
            return NULL;
    const wf_array *first = arrays[0];
    for (int i = 1; i < count; i++) {
        if (!wf__shape_equal(arrays[i]->shape, arrays[i]->ndim, first->shape, first->ndim)) {
            char s0[256], s1[256];
            wf__error(WF_ERR_SHAPE, "wf_stack: array %d has shape %s, array 0 has %s", i,
                      wf__shape_str(arrays[i]->shape, arrays[i]->ndim, s1, sizeof s1),
                      wf__shape_str(first->shape, first->ndim, s0, sizeof s0));
            return NULL;
        }
    }
    if (first->ndim + 1 > WF_MAX_NDIM) {
        wf__error(WF_ERR_SHAPE, "wf_stack: the result would have rank %d (max %d)",
                  first->ndim + 1, WF_MAX_NDIM);
        return NULL;
    }
    int ax;
    if (wf__normalize_axis("wf_stack", axis, first->ndim + 1, &ax) != WF_OK)
        return NULL;
    wf_array **expanded = wf__malloc((size_t)count * sizeof *expanded);
    if (!expanded) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_stack: out of memory");
        return NULL;
    }
    int made = 0;
    wf_array *out = NULL;
    for (; made < count; made++) {
        expanded[made] = wf__op_expand_dims(arrays[made], &ax, 1);
        if (!expanded[made])
            break;
    }
    if (made == count)
        out = wf__op_concatenate(expanded, count, ax);
    for (int i = 0; i < made; i++)
        wf__array_release(expanded[i]);
    free(expanded);
    return out;
}

/* ---------------------------------------------------------------- split */

/* a[..., start:stop, ...] along `axis` (slice semantics). */
static wf_array *slice_axis(wf_array *a, int axis, int64_t start, int64_t stop)
{
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++) {
        starts[d] = 0;
        stops[d] = INT64_MAX;
        steps[d] = 1;
    }
    starts[axis] = start;
    stops[axis] = stop;
    return wf__op_slice(a, starts, stops, steps);
}

/* Fills out[0..n) with slices between consecutive bounds[0..n]; on failure
 * releases what it made and leaves every entry NULL. */
static wf_status split_bounds(wf_array *a, int axis, const int64_t *bounds, int n,
                              wf_array **out)
{
    for (int i = 0; i < n; i++) {
        out[i] = slice_axis(a, axis, bounds[i], bounds[i + 1]);
        if (!out[i]) {
            wf_status st = wf_last_error();
            for (int j = 0; j < i; j++) {
                wf__array_release(out[j]);
                out[j] = NULL;
            }
            return st;
        }
    }
    return WF_OK;
}

wf_status wf__op_split(wf_array *a, int sections, int axis, wf_array **out)
{
    /* Arguments are checked before `out` is touched: a wild `sections` must
     * not write past the caller's array. */
    if (out == NULL)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_split: out is NULL");
    if (!wf__array_check(a, "wf_split", "a"))
        return wf_last_error();
    if (sections <= 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_split: sections is %d, need at least 1",
                         sections);
    int ax;
    if (wf__normalize_axis("wf_split", axis, a->ndim, &ax) != WF_OK)
        return wf_last_error();
    const int64_t dim = a->shape[ax];
    if (dim % sections != 0)
        return wf__error(WF_ERR_SHAPE,
                         "wf_split: axis %d of size %lld does not split into %d equal sections",
                         axis, (long long)dim, sections);
    for (int i = 0; i < sections; i++)
        out[i] = NULL;
    int64_t *bounds = wf__malloc(((size_t)sections + 1) * sizeof *bounds);
    if (!bounds)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_split: out of memory");
    for (int i = 0; i <= sections; i++)
        bounds[i] = dim / sections * i;
    wf_status st = split_bounds(a, ax, bounds, sections, out);
    free(bounds);
    return st;
}

wf_status wf__op_split_at(wf_array *a, const int64_t *indices, int count, int axis,
                          wf_array **out)
{
    if (out == NULL)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_split_at: out is NULL");
    if (!wf__array_check(a, "wf_split_at", "a"))
        return wf_last_error();
    if (count < 0 || count == INT_MAX)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_split_at: count is %d", count);
    if (indices == NULL && count > 0)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_split_at: indices is NULL with count %d",
                         count);
    int ax;
    if (wf__normalize_axis("wf_split_at", axis, a->ndim, &ax) != WF_OK)
        return wf_last_error();
    for (int i = 0; i <= count; i++)
        out[i] = NULL;
    int64_t *bounds = wf__malloc(((size_t)count + 2) * sizeof *bounds);
    if (!bounds)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_split_at: out of memory");
    bounds[0] = 0;
    for (int i = 0; i < count; i++)
        bounds[i + 1] = indices[i];
    bounds[count + 1] = INT64_MAX;
    wf_status st = split_bounds(a, ax, bounds, count + 1, out);
    free(bounds);
    return st;
}

/* ---------------------------------------------------------------- pad, tril, triu */

wf_array *wf__op_pad(wf_array *a, const int64_t *low, const int64_t *high, double value)
{
    if (!wf__array_check(a, "wf_pad", "a"))
        return NULL;
    if (a->ndim > 0 && (low == NULL || high == NULL)) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_pad: %s is NULL", low == NULL ? "low" : "high");
        return NULL;
    }
    wf_pad_params p;
    memset(&p, 0, sizeof p);
    p.value = value;
    p.ndim = a->ndim;
    for (int d = 0; d < a->ndim; d++) {
        p.low[d] = low[d];
        p.high[d] = high[d];
    }
    return wf__node_new(&wf__prim_pad, &p, &a, 1);
}

static wf_array *tri(wf_array *a, int64_t k, bool upper)
{
    if (!wf__array_check(a, upper ? "wf_triu" : "wf_tril", "a"))
        return NULL;
    wf_tri_params p;
    memset(&p, 0, sizeof p);
    p.k = k;
    p.upper = upper;
    return wf__node_new(&wf__prim_tri, &p, &a, 1);
}

wf_array *wf__op_tril(wf_array *a, int64_t k) { return tri(a, k, false); }
wf_array *wf__op_triu(wf_array *a, int64_t k) { return tri(a, k, true); }

/* ---------------------------------------------------------------- repeat, tile */

/* x with axis `axis` multiplied by r: each element repeated (before false)
 * or the whole axis tiled (before true), as reshape -> broadcast_to ->
 * reshape (one copy). At rank WF_MAX_NDIM the other axes are merged first. */
static wf_array *widen_axis(wf_array *x, int axis, int64_t r, bool before)
{
    const int n = x->ndim;
    int64_t s1[WF_MAX_NDIM], s2[WF_MAX_NDIM], s3[WF_MAX_NDIM];
    int rank = 0;
    if (n < WF_MAX_NDIM) {
        for (int d = 0; d < n; d++) {
            if (d == axis && before)
                s1[rank++] = 1;
            s1[rank++] = x->shape[d];
            if (d == axis && !before)
                s1[rank++] = 1;
        }
    } else {
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < axis; d++)
            outer *= x->shape[d];
        for (int d = axis + 1; d < n; d++)
            inner *= x->shape[d];
        s1[rank++] = outer;
        if (before)
            s1[rank++] = 1;
        s1[rank++] = x->shape[axis];
        if (!before)
            s1[rank++] = 1;
        s1[rank++] = inner;
    }
    const int at = n < WF_MAX_NDIM ? axis + (before ? 0 : 1) : (before ? 1 : 2);
    wf__shape_copy(s2, s1, rank);
    s2[at] = r;
    wf__shape_copy(s3, x->shape, n);
    s3[axis] *= r;
    wf_array *y = wf__op_reshape(x, s1, rank);
    wf_array *z = y ? wf__op_broadcast_to(y, s2, rank) : NULL;
    wf_array *out = z ? wf__op_reshape(z, s3, n) : NULL;
    wf__array_release(y);
    wf__array_release(z);
    return out;
}

/* Largest result axis wf_repeat builds gather indices for (4 MiB of int32). */
enum { REPEAT_GATHER_MAX = 1 << 20 };

wf_array *wf__op_repeat(wf_array *a, int64_t repeats, int axis)
{
    if (!wf__array_check(a, "wf_repeat", "a"))
        return NULL;
    if (repeats < 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_repeat: repeats is negative (%lld)",
                  (long long)repeats);
        return NULL;
    }
    int ax;
    if (wf__normalize_axis("wf_repeat", axis, a->ndim, &ax) != WF_OK)
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    wf__shape_copy(shape, a->shape, a->ndim);
    if (repeats > 0 && shape[ax] > INT64_MAX / 8 / repeats) {
        wf__error(WF_ERR_OVERFLOW, "wf_repeat: %lld repeats of axis %d overflow",
                  (long long)repeats, axis);
        return NULL;
    }
    shape[ax] *= repeats;
    if (wf__check_shape("wf_repeat", shape, a->ndim) != WF_OK)
        return NULL;
    int64_t inner = 1;
    for (int d = ax + 1; d < a->ndim; d++)
        inner *= a->shape[d];
    if (inner >= 16 || shape[ax] == 0 || shape[ax] > REPEAT_GATHER_MAX)
        return widen_axis(a, ax, repeats, false);
    /* Small inner blocks: the broadcast copy would run rows of `repeats`
     * elements; a gather with indices 0,..,0,1,..,1,... (int32, the size of
     * the result's axis) runs one tight loop instead. The indices are built
     * here, at construction, so only for a modest axis. */
    int32_t *idx = wf__malloc((size_t)shape[ax] * sizeof *idx);
    if (!idx) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_repeat: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < shape[ax]; i++)
        idx[i] = (int32_t)(i / repeats);
    wf_array *indices = wf__array_from_data(idx, &shape[ax], 1, WF_DTYPE_I32);
    free(idx);
    wf_array *out = indices ? wf__op_take(a, indices, ax) : NULL;
    wf__array_release(indices);
    return out;
}

/* The same dtype is the same value; the primitive checks the shape. */
wf_array *wf__op_view(wf_array *a, wf_dtype dtype)
{
    if (!wf__array_check(a, "wf_view", "a"))
        return NULL;
    if (a->dtype == dtype)
        return wf__same_value(a);
    wf_astype_params p;
    memset(&p, 0, sizeof p);
    p.dtype = dtype;
    return wf__node_new(&wf__prim_view, &p, &a, 1);
}

wf_array *wf__op_tile(wf_array *a, const int64_t *reps, int nreps)
{
    if (!wf__array_check(a, "wf_tile", "a"))
        return NULL;
    if (nreps < 0 || nreps > WF_MAX_NDIM) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_tile: nreps %d is out of range [0, %d]", nreps,
                  WF_MAX_NDIM);
        return NULL;
    }
    if (reps == NULL && nreps > 0) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_tile: reps is NULL with nreps %d", nreps);
        return NULL;
    }
    const int n = a->ndim > nreps ? a->ndim : nreps;
    int64_t shape[WF_MAX_NDIM], r[WF_MAX_NDIM], final_shape[WF_MAX_NDIM];
    for (int d = 0; d < n; d++) {
        const int da = d - (n - a->ndim), dr = d - (n - nreps);
        shape[d] = da >= 0 ? a->shape[da] : 1;
        r[d] = dr >= 0 ? reps[dr] : 1;
        if (r[d] < 0) {
            wf__error(WF_ERR_INVALID_ARGUMENT, "wf_tile: reps[%d] is negative (%lld)", dr,
                      (long long)r[d]);
            return NULL;
        }
        if (r[d] > 0 && shape[d] > INT64_MAX / 8 / r[d]) {
            wf__error(WF_ERR_OVERFLOW, "wf_tile: tiling axis %d overflows", d);
            return NULL;
        }
        final_shape[d] = shape[d] * r[d];
    }
    if (wf__check_shape("wf_tile", final_shape, n) != WF_OK)
        return NULL;
    wf_array *x = wf__op_reshape(a, shape, n); /* leading 1s */
    /* Tile as many axes at once as the rank allows: (1, s) broadcast to
     * (r, s) for each, then one reshape (one copy). */
    int d0 = 0;
    while (x) {
        while (d0 < n && r[d0] == 1)
            d0++;
        if (d0 == n)
            break;
        if (n == WF_MAX_NDIM) {
            wf_array *y = widen_axis(x, d0, r[d0], true);
            wf__array_release(x);
            x = y;
            d0++;
            continue;
        }
        int64_t s1[WF_MAX_NDIM], s2[WF_MAX_NDIM], s3[WF_MAX_NDIM];
        int rank = 0;
        int d = 0;
        for (; d < n; d++) {
            const bool widen = d >= d0 && r[d] != 1 && rank + (n - d) < WF_MAX_NDIM;
            if (widen) {
                s1[rank] = 1;
                s2[rank++] = r[d];
            }
            s1[rank] = x->shape[d];
            s2[rank++] = x->shape[d];
            s3[d] = x->shape[d] * (widen ? r[d] : 1);
            if (widen)
                d0 = d + 1;
        }
        wf_array *y = wf__op_reshape(x, s1, rank);
        wf_array *z = y ? wf__op_broadcast_to(y, s2, rank) : NULL;
        wf_array *t = z ? wf__op_reshape(z, s3, n) : NULL;
        wf__array_release(x);
        wf__array_release(y);
        wf__array_release(z);
        x = t;
    }
    return x;
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

/* Hands the n results of a successful split to the caller's scope; if one
 * cannot be recorded, releases them all and leaves every entry NULL. */
static wf_status publish_parts(wf_status st, wf_array **out, int n)
{
    for (int i = 0; st == WF_OK && i < n; i++) {
        if (wf__scope_adopt(out[i]) == WF_OK)
            continue;
        st = wf_last_error();
        for (int j = 0; j < n; j++) {
            if (j < i)
                wf_release(out[j]);
            else
                wf__array_decref(out[j]);
            out[j] = NULL;
        }
    }
    return st;
}

wf_status wf_split(wf_array *a, int sections, int axis, wf_array **out)
{
    wf_status st = wf__op_split(a, sections, axis, out);
    return publish_parts(st, out, st == WF_OK ? sections : 0);
}

wf_status wf_split_at(wf_array *a, const int64_t *indices, int count, int axis, wf_array **out)
{
    wf_status st = wf__op_split_at(a, indices, count, axis, out);
    return publish_parts(st, out, st == WF_OK ? count + 1 : 0);
}

wf_array *wf__mark_user_shape(wf_array *out, const wf_array *in)
{
    if (out && out != in) /* a new node no other thread has seen */
        out->node_flags |= WF_NODE_FLAG_USER_SHAPE;
    return out;
}

wf_array *wf_reshape(wf_array *a, const int64_t *shape, int ndim)
{
    return wf__array_publish(wf__mark_user_shape(wf__op_reshape(a, shape, ndim), a));
}

wf_array *wf_transpose(wf_array *a, const int *perm, int nperm)
{
    return wf__array_publish(wf__op_transpose(a, perm, nperm));
}

wf_array *wf_broadcast_to(wf_array *a, const int64_t *shape, int ndim)
{
    return wf__array_publish(wf__mark_user_shape(wf__op_broadcast_to(a, shape, ndim), a));
}

wf_array *wf_slice(wf_array *a, const int64_t *starts, const int64_t *stops, const int64_t *steps)
{
    return wf__array_publish(wf__mark_user_shape(wf__op_slice(a, starts, stops, steps), a));
}

wf_array *wf_swapaxes(wf_array *a, int axis1, int axis2)
{
    return wf__array_publish(wf__op_swapaxes(a, axis1, axis2));
}

wf_array *wf_moveaxis(wf_array *a, int source, int destination)
{
    return wf__array_publish(wf__op_moveaxis(a, source, destination));
}

wf_array *wf_expand_dims(wf_array *a, const int *axes, int naxes)
{
    return wf__array_publish(wf__op_expand_dims(a, axes, naxes));
}

wf_array *wf_squeeze(wf_array *a, const int *axes, int naxes)
{
    return wf__array_publish(wf__op_squeeze(a, axes, naxes));
}

wf_array *wf_unflatten(wf_array *a, int axis, const int64_t *shape, int n)
{
    return wf__array_publish(wf__mark_user_shape(wf__op_unflatten(a, axis, shape, n), a));
}

wf_array *wf_flatten(wf_array *a, int start_axis, int end_axis)
{
    return wf__array_publish(wf__op_flatten(a, start_axis, end_axis));
}

wf_array *wf_slice_update(wf_array *a, wf_array *update, const int64_t *starts,
                          const int64_t *stops, const int64_t *steps)
{
    return wf__array_publish(
        wf__mark_user_shape(wf__op_slice_update(a, update, starts, stops, steps), a));
}

wf_array *wf_concatenate(wf_array *const *arrays, int count, int axis)
{
    return wf__array_publish(wf__op_concatenate(arrays, count, axis));
}

wf_array *wf_stack(wf_array *const *arrays, int count, int axis)
{
    return wf__array_publish(wf__op_stack(arrays, count, axis));
}

wf_array *wf_pad(wf_array *a, const int64_t *low, const int64_t *high, double value)
{
    return wf__array_publish(wf__op_pad(a, low, high, value));
}

wf_array *wf_tril(wf_array *a, int64_t k) { return wf__array_publish(wf__op_tril(a, k)); }
wf_array *wf_triu(wf_array *a, int64_t k) { return wf__array_publish(wf__op_triu(a, k)); }

wf_array *wf_repeat(wf_array *a, int64_t repeats, int axis)
{
    return wf__array_publish(wf__op_repeat(a, repeats, axis));
}

wf_array *wf_tile(wf_array *a, const int64_t *reps, int nreps)
{
    return wf__array_publish(wf__op_tile(a, reps, nreps));
}

wf_array *wf_view(wf_array *a, wf_dtype dtype)
{
    return wf__array_publish(wf__op_view(a, dtype));
}
