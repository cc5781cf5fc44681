/* General gather / scatter ops (wf_gather, wf_scatter, wf_put_along_axis)
 * and the dynamic slices built on them (wf_slice_dynamic,
 * wf_slice_update_dynamic): a dynamic slice is a gather / scatter with 0-d
 * index arrays, so it shares their kernels, rules and compile support. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/scatter.h"
#include "prim/shape.h"

/* Checks a, the index arrays and the axes (normalized into `norm`), and
 * broadcasts the index arrays to one shape: out_idx[k] are new references
 * (released by release_all). */
static wf_status prepare_indices(const char *op, wf_array *a, wf_array *const *indices,
                                 int nindices, const int *axes, int *norm, wf_array **out_idx)
{
    if (!wf__array_check(a, op, "a"))
        return wf_last_error();
    if (nindices < 0 || nindices > a->ndim)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %d index arrays for a rank-%d array", op,
                         nindices, a->ndim);
    if (nindices > 0 && (!indices || !axes))
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: indices or axes is NULL", op);
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    uint64_t seen = 0;
    for (int k = 0; k < nindices; k++) {
        if (!wf__array_check(indices[k], op, "indices[k]"))
            return wf_last_error();
        if (!wf__is_index_dtype(indices[k]->dtype) && !wf__dtype_is_integer(indices[k]->dtype))
            return wf__error(WF_ERR_DTYPE, "%s: indices must have an integer dtype, not %s", op,
                             wf_dtype_name(indices[k]->dtype));
        wf_status st = wf__normalize_axis(op, axes[k], a->ndim, &norm[k]);
        if (st != WF_OK)
            return st;
        if ((seen >> norm[k]) & 1u)
            return wf__error(WF_ERR_AXIS, "%s: axis %d is repeated", op, axes[k]);
        seen |= 1ull << norm[k];
        int64_t joined[WF_MAX_NDIM];
        int njoined;
        st = k == 0 ? WF_OK
                    : wf__broadcast_shapes(op, shape, ndim, indices[k]->shape, indices[k]->ndim,
                                           joined, &njoined);
        if (st != WF_OK)
            return st;
        if (k == 0) {
            ndim = indices[0]->ndim;
            wf__shape_copy(shape, indices[0]->shape, ndim);
        } else {
            ndim = njoined;
            wf__shape_copy(shape, joined, ndim);
        }
    }
    for (int k = 0; k < nindices; k++) {
        /* the kernels read uint8, int32, int64: other integers (argsort's
         * uint32 indices, int8, ...) are converted (exactly) to int64 */
        wf_array *ix = wf__is_index_dtype(indices[k]->dtype)
                           ? wf__array_incref(indices[k])
                           : wf__op_astype(indices[k], WF_DTYPE_I64);
        out_idx[k] = !ix ? NULL
                     : wf__shape_equal(ix->shape, ix->ndim, shape, ndim)
                         ? wf__array_incref(ix)
                         : wf__op_broadcast_to(ix, shape, ndim);
        wf__array_release(ix);
        if (!out_idx[k]) {
            for (int j = 0; j < k; j++)
                wf__array_release(out_idx[j]);
            return wf_last_error();
        }
    }
    return WF_OK;
}

static void release_all(wf_array **arrays, int n)
{
    for (int k = 0; k < n; k++)
        wf__array_release(arrays[k]);
}

static wf_array *op_gather(wf_array *a, wf_array *const *indices, int nindices, const int *axes,
                           const int64_t *slice_sizes)
{
    const char *op = "wf_gather";
    wf_gather_params p;
    memset(&p, 0, sizeof p);
    wf_array *idx[WF_MAX_NDIM];
    if (prepare_indices(op, a, indices, nindices, axes, p.axes, idx) != WF_OK)
        return NULL;
    p.naxes = nindices;
    if (!slice_sizes && a->ndim > 0) {
        release_all(idx, nindices);
        wf__error(WF_ERR_NULL_ARGUMENT, "%s: slice_sizes is NULL", op);
        return NULL;
    }
    wf__shape_copy(p.slice_sizes, slice_sizes, a->ndim);
    wf_array *inputs[WF_MAX_NDIM + 1];
    inputs[0] = a;
    for (int k = 0; k < nindices; k++)
        inputs[1 + k] = idx[k];
    wf_array *out = wf__node_new(&wf__prim_gather, &p, inputs, 1 + nindices);
    release_all(idx, nindices);
    return out;
}

static wf_array *op_scatter(wf_array *a, wf_array *const *indices, int nindices,
                            wf_array *updates, const int *axes, wf_scatter_mode mode)
{
    const char *op = "wf_scatter";
    if (!wf__array_check(updates, op, "updates"))
        return NULL;
    if ((int)mode < WF_SCATTER_REPLACE || (int)mode > WF_SCATTER_MIN) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: unknown mode %d", op, (int)mode);
        return NULL;
    }
    if (a && mode != WF_SCATTER_REPLACE && a->dtype == WF_DTYPE_C64) {
        wf__error(WF_ERR_DTYPE, "%s: complex64 arrays support only WF_SCATTER_REPLACE", op);
        return NULL;
    }
    wf_scatter_params p;
    memset(&p, 0, sizeof p);
    wf_array *idx[WF_MAX_NDIM];
    if (prepare_indices(op, a, indices, nindices, axes, p.axes, idx) != WF_OK)
        return NULL;
    p.naxes = nindices;
    p.mode = (int)mode;
    /* updates: its leading dims broadcast to the index shape I. */
    const int indim = nindices > 0 ? idx[0]->ndim : 0;
    char s0[256];
    if (updates->ndim != indim + a->ndim) {
        release_all(idx, nindices);
        wf__error(WF_ERR_SHAPE,
                  "%s: updates of shape %s must have rank %d (index rank %d + array rank %d)",
                  op, wf__shape_str(updates->shape, updates->ndim, s0, sizeof s0),
                  indim + a->ndim, indim, a->ndim);
        return NULL;
    }
    int64_t want[WF_MAX_NDIM];
    for (int d = 0; d < updates->ndim; d++) {
        want[d] = d < indim ? idx[0]->shape[d] : updates->shape[d];
        if (updates->shape[d] != want[d] && updates->shape[d] != 1) {
            char s1[256];
            wf__error(WF_ERR_SHAPE, "%s: updates of shape %s do not broadcast to index shape %s",
                      op, wf__shape_str(updates->shape, updates->ndim, s0, sizeof s0),
                      wf__shape_str(idx[0]->shape, indim, s1, sizeof s1));
            release_all(idx, nindices);
            return NULL;
        }
    }
    wf_array *u = wf__op_astype(updates, a->dtype), *out = NULL;
    if (u && !wf__shape_equal(u->shape, u->ndim, want, updates->ndim)) {
        wf_array *b = wf__op_broadcast_to(u, want, updates->ndim);
        wf__array_release(u);
        u = b;
    }
    if (u) {
        wf_array *inputs[WF_MAX_NDIM + 2];
        inputs[0] = a;
        inputs[1] = u;
        for (int k = 0; k < nindices; k++)
            inputs[2 + k] = idx[k];
        out = wf__node_new(&wf__prim_scatter, &p, inputs, 2 + nindices);
    }
    wf__array_release(u);
    release_all(idx, nindices);
    return out;
}

/* put_along_axis as a scatter over every axis: indices on `axis`, an
 * arange broadcast along each other axis. */
static wf_array *op_put_along_axis(wf_array *a, wf_array *indices, wf_array *values, int axis,
                                   wf_scatter_mode mode)
{
    const char *op = "wf_put_along_axis";
    if (!wf__array_check(a, op, "a") || !wf__array_check(indices, op, "indices") ||
        !wf__array_check(values, op, "values"))
        return NULL;
    int ax;
    if (wf__normalize_axis(op, axis, a->ndim, &ax) != WF_OK)
        return NULL;
    char s0[256], s1[256];
    if (indices->ndim != a->ndim) {
        wf__error(WF_ERR_SHAPE, "%s: indices of shape %s and array of shape %s differ in rank",
                  op, wf__shape_str(indices->shape, indices->ndim, s0, sizeof s0),
                  wf__shape_str(a->shape, a->ndim, s1, sizeof s1));
        return NULL;
    }
    if (a->size == 0) /* nothing to put into (MLX's rule: indices are not read) */
        return wf__array_incref(a);
    const int r = a->ndim;
    int64_t ishape[WF_MAX_NDIM];
    for (int d = 0; d < r; d++) {
        const int64_t x = a->shape[d], y = indices->shape[d];
        if (d != ax && x != y && x != 1 && y != 1) {
            wf__error(WF_ERR_SHAPE, "%s: indices of shape %s do not broadcast against %s", op,
                      wf__shape_str(indices->shape, indices->ndim, s0, sizeof s0),
                      wf__shape_str(a->shape, a->ndim, s1, sizeof s1));
            return NULL;
        }
        ishape[d] = d == ax ? y : (y == 1 ? x : y);
        if (d != ax && x == 1 && y != 1) { /* a cannot take more positions than it has */
            wf__error(WF_ERR_SHAPE, "%s: indices of shape %s index past a's shape %s", op,
                      wf__shape_str(indices->shape, indices->ndim, s0, sizeof s0),
                      wf__shape_str(a->shape, a->ndim, s1, sizeof s1));
            return NULL;
        }
    }
    wf_array *idx[WF_MAX_NDIM] = {NULL};
    int axes[WF_MAX_NDIM];
    bool ok = true;
    for (int d = 0; d < r && ok; d++) {
        axes[d] = d;
        if (d == ax) {
            idx[d] = wf__array_incref(indices);
            continue;
        }
        int64_t shape[WF_MAX_NDIM];
        for (int e = 0; e < r; e++)
            shape[e] = e == d ? ishape[d] : 1;
        wf_array *range = wf__op_arange(0, (double)ishape[d], 1, WF_DTYPE_I32);
        idx[d] = range ? wf__op_reshape(range, shape, r) : NULL;
        wf__array_release(range);
        ok = idx[d] != NULL;
    }
    /* values broadcast to I, then get the slice dims (all 1). */
    wf_array *v = NULL, *u = NULL, *out = NULL;
    if (ok)
        v = wf__op_broadcast_to(values, ishape, r);
    if (v) {
        int64_t ushape[WF_MAX_NDIM];
        wf__shape_copy(ushape, ishape, r);
        for (int d = 0; d < r; d++)
            ushape[r + d] = 1;
        u = wf__op_reshape(v, ushape, 2 * r);
    }
    if (u)
        out = op_scatter(a, idx, r, u, axes, mode);
    wf__array_release(u);
    wf__array_release(v);
    for (int d = 0; d < r; d++)
        wf__array_release(idx[d]);
    return out;
}

/* The naxes entries of a 1-d `start` as 0-d index arrays (new references). */
static wf_status split_start(const char *op, wf_array *start, int naxes, wf_array **out)
{
    if (!wf__array_check(start, op, "start"))
        return wf_last_error();
    if (!wf__dtype_is_integer(start->dtype) && !wf__is_index_dtype(start->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: start must have an integer dtype, not %s", op,
                         wf_dtype_name(start->dtype));
    if (start->ndim != 1 || start->shape[0] != naxes)
        return wf__error(WF_ERR_SHAPE, "%s: start must be 1-d with %d entries", op, naxes);
    for (int k = 0; k < naxes; k++) {
        const int64_t s0 = k, s1 = k + 1, step = 1;
        wf_array *one = wf__op_slice(start, &s0, &s1, &step);
        out[k] = one ? wf__op_reshape(one, NULL, 0) : NULL;
        wf__array_release(one);
        if (!out[k]) {
            release_all(out, k);
            return wf_last_error();
        }
    }
    return WF_OK;
}

static wf_array *op_slice_dynamic(wf_array *a, wf_array *start, const int *axes, int naxes,
                                  const int64_t *slice_sizes)
{
    const char *op = "wf_slice_dynamic";
    if (!wf__array_check(a, op, "a"))
        return NULL;
    if (naxes < 0 || naxes > a->ndim) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %d axes for a rank-%d array", op, naxes,
                  a->ndim);
        return NULL;
    }
    wf_array *idx[WF_MAX_NDIM];
    if (split_start(op, start, naxes, idx) != WF_OK)
        return NULL;
    wf_array *out = op_gather(a, idx, naxes, axes, slice_sizes);
    release_all(idx, naxes);
    return out;
}

static wf_array *op_slice_update_dynamic(wf_array *a, wf_array *update, wf_array *start,
                                         const int *axes, int naxes)
{
    const char *op = "wf_slice_update_dynamic";
    if (!wf__array_check(a, op, "a") || !wf__array_check(update, op, "update"))
        return NULL;
    if (naxes < 0 || naxes > a->ndim) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %d axes for a rank-%d array", op, naxes,
                  a->ndim);
        return NULL;
    }
    wf_array *idx[WF_MAX_NDIM];
    if (split_start(op, start, naxes, idx) != WF_OK)
        return NULL;
    wf_array *out = op_scatter(a, idx, naxes, update, axes, WF_SCATTER_REPLACE);
    release_all(idx, naxes);
    return out;
}

/* MLX's masked_scatter: the mask covers a's leading dims (and spreads over
 * the others); the source is (rows, trailing dims of a), rows defaulting to
 * one per mask element, flattened for the primitive. */
static wf_array *op_masked_scatter(wf_array *a, wf_array *mask, wf_array *src)
{
    const char *op = "wf_masked_scatter";
    if (!wf__array_check(a, op, "a") || !wf__array_check(mask, op, "mask") ||
        !wf__array_check(src, op, "src"))
        return NULL;
    char s0[256], s1[256];
    if (mask->dtype != WF_DTYPE_BOOL) {
        wf__error(WF_ERR_DTYPE, "%s: the mask must be bool, not %s", op,
                  wf_dtype_name(mask->dtype));
        return NULL;
    }
    if (mask->ndim > a->ndim || !wf__shape_equal(mask->shape, mask->ndim, a->shape, mask->ndim)) {
        wf__error(WF_ERR_SHAPE, "%s: the mask's shape %s must be the leading dims of the array's %s",
                  op, wf__shape_str(mask->shape, mask->ndim, s0, sizeof s0),
                  wf__shape_str(a->shape, a->ndim, s1, sizeof s1));
        return NULL;
    }
    const int unmasked = a->ndim - mask->ndim;
    if (src->ndim > unmasked + 1) {
        wf__error(WF_ERR_SHAPE,
                  "%s: a source of shape %s has more than %d dims (rows, then the array's last "
                  "%d dims)",
                  op, wf__shape_str(src->shape, src->ndim, s0, sizeof s0), unmasked + 1,
                  unmasked);
        return NULL;
    }
    int64_t rows_shape[WF_MAX_NDIM];
    rows_shape[0] = src->ndim == unmasked + 1 ? src->shape[0] : mask->size;
    wf__shape_copy(rows_shape + 1, a->shape + mask->ndim, unmasked);
    wf_array *cast = wf__op_astype(src, a->dtype);
    wf_array *rows = cast ? wf__op_broadcast_to(cast, rows_shape, unmasked + 1) : NULL;
    wf_array *flat = rows ? wf__op_flatten(rows, 0, -1) : NULL;
    int spread_axes[WF_MAX_NDIM];
    for (int d = 0; d < unmasked; d++)
        spread_axes[d] = mask->ndim + d;
    wf_array *spread = unmasked > 0 ? wf__op_expand_dims(mask, spread_axes, unmasked)
                                    : wf__array_incref(mask);
    wf_array *full = spread ? wf__op_broadcast_to(spread, a->shape, a->ndim) : NULL;
    wf_array *out = NULL;
    if (flat && full) {
        wf_masked_scatter_params p;
        memset(&p, 0, sizeof p);
        wf_array *inputs[3] = {a, full, flat};
        out = wf__node_new(&wf__prim_masked_scatter, &p, inputs, 3);
    }
    wf__array_release(full);
    wf__array_release(spread);
    wf__array_release(flat);
    wf__array_release(rows);
    wf__array_release(cast);
    return out;
}

/* ---------------------------------------------------------------- public entry points */

wf_array *wf_gather(wf_array *a, wf_array *const *indices, int nindices, const int *axes,
                    const int64_t *slice_sizes)
{
    return wf__array_publish(
        wf__mark_user_shape(op_gather(a, indices, nindices, axes, slice_sizes), a));
}

wf_array *wf_scatter(wf_array *a, wf_array *const *indices, int nindices, wf_array *updates,
                     const int *axes, wf_scatter_mode mode)
{
    return wf__array_publish(op_scatter(a, indices, nindices, updates, axes, mode));
}

wf_array *wf_put_along_axis(wf_array *a, wf_array *indices, wf_array *values, int axis,
                            wf_scatter_mode mode)
{
    return wf__array_publish(op_put_along_axis(a, indices, values, axis, mode));
}

wf_array *wf_slice_dynamic(wf_array *a, wf_array *start, const int *axes, int naxes,
                           const int64_t *slice_sizes)
{
    return wf__array_publish(op_slice_dynamic(a, start, axes, naxes, slice_sizes));
}

wf_array *wf_slice_update_dynamic(wf_array *a, wf_array *update, wf_array *start,
                                  const int *axes, int naxes)
{
    return wf__array_publish(op_slice_update_dynamic(a, update, start, axes, naxes));
}

wf_array *wf_masked_scatter(wf_array *a, wf_array *mask, wf_array *src)
{
    return wf__array_publish(op_masked_scatter(a, mask, src));
}
