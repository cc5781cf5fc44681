/* View and layout primitives: reshape, transpose, broadcast_to, slice. */
#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "prim/prims.h"

/* ---------------------------------------------------------------- reshape */

wf_status wf__reshape_resolve(const char *op, int64_t size, const int64_t *shape, int ndim,
                              int64_t *out)
{
    char buf[256];
    if (ndim < 0 || ndim > WF_MAX_NDIM)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: ndim %d is out of range [0, %d]", op,
                         ndim, WF_MAX_NDIM);
    int infer_at = -1;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == -1) {
            if (infer_at >= 0)
                return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: more than one -1 in %s", op,
                                 wf__shape_str(shape, ndim, buf, sizeof buf));
            infer_at = d;
            continue;
        }
        if (shape[d] < 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: negative dimension in %s", op,
                             wf__shape_str(shape, ndim, buf, sizeof buf));
        if (shape[d] != 0 && known > INT64_MAX / shape[d])
            return wf__error(WF_ERR_OVERFLOW, "%s: size of %s overflows", op,
                             wf__shape_str(shape, ndim, buf, sizeof buf));
        known *= shape[d];
    }
    wf__shape_copy(out, shape, ndim);
    if (infer_at >= 0) {
        if (known == 0 || size % known != 0)
            return wf__error(WF_ERR_SHAPE, "%s: cannot reshape size %lld into %s", op,
                             (long long)size, wf__shape_str(shape, ndim, buf, sizeof buf));
        out[infer_at] = size / known;
    } else if (known != size) {
        return wf__error(WF_ERR_SHAPE, "%s: cannot reshape size %lld into %s", op,
                         (long long)size, wf__shape_str(shape, ndim, buf, sizeof buf));
    }
    return WF_OK;
}

static wf_status infer_reshape(const void *params, wf_array *const *inputs, int ninputs,
                               wf_dtype *dtype, int *ndim, int64_t *shape)
{
    const wf_reshape_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "reshape: expected 1 input, got %d", ninputs);
    wf_status st = wf__reshape_resolve("wf_reshape", inputs[0]->size, p->shape, p->ndim, shape);
    if (st != WF_OK)
        return st;
    *dtype = inputs[0]->dtype;
    *ndim = p->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_reshape = {
    .name = "reshape",
    .flags = 0,
    .params_size = sizeof(wf_reshape_params),
    .infer = infer_reshape,
    .cpu_kernel = wf__cpu_reshape,
};

/* ---------------------------------------------------------------- transpose */

static wf_status infer_transpose(const void *params, wf_array *const *inputs, int ninputs,
                                 wf_dtype *dtype, int *ndim, int64_t *shape)
{
    const wf_transpose_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "transpose: expected 1 input, got %d", ninputs);
    const wf_array *a = inputs[0];
    if (p->ndim != a->ndim)
        return wf__error(WF_ERR_AXIS, "wf_transpose: permutation of %d axes for ndim %d",
                         p->ndim, a->ndim);
    bool seen[WF_MAX_NDIM] = {false};
    for (int i = 0; i < p->ndim; i++) {
        int axis = p->perm[i];
        if (axis < 0 || axis >= a->ndim)
            return wf__error(WF_ERR_AXIS, "wf_transpose: axis %d out of range for ndim %d",
                             axis, a->ndim);
        if (seen[axis])
            return wf__error(WF_ERR_AXIS, "wf_transpose: axis %d repeated", axis);
        seen[axis] = true;
        shape[i] = a->shape[axis];
    }
    *dtype = a->dtype;
    *ndim = a->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_transpose = {
    .name = "transpose",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_transpose_params),
    .infer = infer_transpose,
    .cpu_kernel = wf__cpu_transpose,
};

/* ---------------------------------------------------------------- broadcast_to */

static wf_status infer_broadcast_to(const void *params, wf_array *const *inputs, int ninputs,
                                    wf_dtype *dtype, int *ndim, int64_t *shape)
{
    const wf_broadcast_to_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "broadcast_to: expected 1 input, got %d", ninputs);
    const wf_array *a = inputs[0];
    wf_status st = wf__check_shape("wf_broadcast_to", p->shape, p->ndim, a->dtype);
    if (st != WF_OK)
        return st;
    char sa[256], sb[256];
    if (p->ndim < a->ndim)
        return wf__error(WF_ERR_SHAPE, "wf_broadcast_to: cannot broadcast %s to %s",
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(p->shape, p->ndim, sb, sizeof sb));
    const int lead = p->ndim - a->ndim;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != 1 && a->shape[d] != p->shape[lead + d])
            return wf__error(WF_ERR_SHAPE, "wf_broadcast_to: cannot broadcast %s to %s",
                             wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                             wf__shape_str(p->shape, p->ndim, sb, sizeof sb));
    }
    wf__shape_copy(shape, p->shape, p->ndim);
    *dtype = a->dtype;
    *ndim = p->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_broadcast_to = {
    .name = "broadcast_to",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_broadcast_to_params),
    .infer = infer_broadcast_to,
    .cpu_kernel = wf__cpu_broadcast_to,
};

/* ---------------------------------------------------------------- slice */

/* Clamps one bound as CPython's PySlice_AdjustIndices does. */
static int64_t clamp_bound(int64_t v, int64_t dim, int64_t step)
{
    if (v < 0) {
        v += dim; /* v >= INT64_MIN and dim >= 0: no overflow */
        if (v < 0)
            v = step < 0 ? -1 : 0;
    } else if (v >= dim) {
        v = step < 0 ? dim - 1 : dim;
    }
    return v;
}

void wf__slice_resolve(int64_t dim, int64_t start, int64_t stop, int64_t step, int64_t *first,
                       int64_t *count)
{
    start = clamp_bound(start, dim, step);
    stop = clamp_bound(stop, dim, step);
    *first = start;
    if (step > 0)
        *count = stop > start ? (int64_t)((uint64_t)(stop - start - 1) / (uint64_t)step) + 1 : 0;
    else
        *count = start > stop
                     ? (int64_t)((uint64_t)(start - stop - 1) / (0u - (uint64_t)step)) + 1
                     : 0;
}

static wf_status infer_slice(const void *params, wf_array *const *inputs, int ninputs,
                             wf_dtype *dtype, int *ndim, int64_t *shape)
{
    const wf_slice_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "slice: expected 1 input, got %d", ninputs);
    const wf_array *a = inputs[0];
    if (p->ndim != a->ndim)
        return wf__error(WF_ERR_INTERNAL, "slice: %d axes given for ndim %d", p->ndim, a->ndim);
    for (int d = 0; d < a->ndim; d++) {
        if (p->steps[d] == 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_slice: step is 0 on axis %d", d);
        int64_t first;
        wf__slice_resolve(a->shape[d], p->starts[d], p->stops[d], p->steps[d], &first,
                          &shape[d]);
    }
    *dtype = a->dtype;
    *ndim = a->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_slice = {
    .name = "slice",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_slice_params),
    .infer = infer_slice,
    .cpu_kernel = wf__cpu_slice,
};
