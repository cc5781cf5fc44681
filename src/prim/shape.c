/* View and layout primitives: reshape, transpose, broadcast_to, slice; and
 * the copying layout primitives slice_update, concatenate, pad, tri. */
#include "prim/shape.h"

#include "core/dtype.h"
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

/* The requested shape with the dimensions derived from the input filled in
 * (-1 still unresolved). */
static wf_status reshape_target(const wf_reshape_params *p, const wf_desc *in, int64_t *target)
{
    for (int d = 0; d < p->ndim; d++) {
        if (p->in_end[d] <= p->in_begin[d]) {
            target[d] = p->shape[d];
            continue;
        }
        if (p->in_end[d] > in->ndim)
            return wf__error(WF_ERR_SHAPE,
                             "wf_reshape: derived from input dimensions up to %d of a rank-%d "
                             "input",
                             p->in_end[d], in->ndim);
        target[d] = 1;
        for (int k = p->in_begin[d]; k < p->in_end[d]; k++)
            target[d] *= in->shape[k]; /* bounded by the input's size */
    }
    return WF_OK;
}

static wf_status infer_reshape(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    const wf_reshape_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "reshape: expected 1 input, got %d", ninputs);
    if (p->ndim < 0 || p->ndim > WF_MAX_NDIM)
        return wf__error(WF_ERR_INTERNAL, "reshape: rank %d out of range", p->ndim);
    int64_t size = 1;
    for (int d = 0; d < inputs[0].ndim; d++)
        size *= inputs[0].shape[d]; /* an input's size fits int64 */
    int64_t target[WF_MAX_NDIM];
    wf_status st = reshape_target(p, &inputs[0], target);
    if (st == WF_OK)
        st = wf__reshape_resolve("wf_reshape", size, target, p->ndim, out->shape);
    if (st != WF_OK)
        return st;
    out->dtype = inputs[0].dtype;
    out->ndim = p->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_reshape = {
    .name = "reshape",
    .flags = 0,
    .params_size = sizeof(wf_reshape_params),
    .infer = infer_reshape,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- transpose */

static wf_status infer_transpose(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *out)
{
    const wf_transpose_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "transpose: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
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
        out->shape[i] = a->shape[axis];
    }
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_transpose = {
    .name = "transpose",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_transpose_params),
    .infer = infer_transpose,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- broadcast_to */

static wf_status infer_broadcast_to(const void *params, const wf_desc *inputs, int ninputs,
                                    wf_out_desc *out)
{
    const wf_broadcast_to_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "broadcast_to: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    wf_status st = wf__check_shape("wf_broadcast_to", p->shape, p->ndim);
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
    wf__shape_copy(out->shape, p->shape, p->ndim);
    out->dtype = a->dtype;
    out->ndim = p->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_broadcast_to = {
    .name = "broadcast_to",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_broadcast_to_params),
    .infer = infer_broadcast_to,
    .kernels = &(wf_kernel_slots){{0}},
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

static wf_status infer_slice(const void *params, const wf_desc *inputs, int ninputs,
                             wf_out_desc *out)
{
    const wf_slice_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "slice: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (p->ndim != a->ndim)
        return wf__error(WF_ERR_INTERNAL, "slice: %d axes given for ndim %d", p->ndim, a->ndim);
    for (int d = 0; d < a->ndim; d++) {
        if (p->steps[d] == 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_slice: step is 0 on axis %d", d);
        int64_t first;
        wf__slice_resolve(a->shape[d], p->starts[d], p->stops[d], p->steps[d], &first,
                          &out->shape[d]);
    }
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_slice = {
    .name = "slice",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_slice_params),
    .infer = infer_slice,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- slice_update */

static wf_status infer_slice_update(const void *params, const wf_desc *inputs, int ninputs,
                                    wf_out_desc *out)
{
    const wf_slice_params *p = params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "slice_update: expected 2 inputs, got %d", ninputs);
    const wf_desc *a = &inputs[0], *u = &inputs[1];
    if (p->ndim != a->ndim)
        return wf__error(WF_ERR_INTERNAL, "slice_update: %d axes given for ndim %d", p->ndim,
                         a->ndim);
    int64_t want[WF_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++) {
        if (p->steps[d] == 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_slice_update: step is 0 on axis %d",
                             d);
        int64_t first;
        wf__slice_resolve(a->shape[d], p->starts[d], p->stops[d], p->steps[d], &first,
                          &want[d]);
    }
    if (u->dtype != a->dtype)
        return wf__error(WF_ERR_DTYPE, "wf_slice_update: update dtype %s differs from %s",
                         wf_dtype_name(u->dtype), wf_dtype_name(a->dtype));
    if (!wf__shape_equal(u->shape, u->ndim, want, a->ndim)) {
        char su[256], sw[256];
        return wf__error(WF_ERR_SHAPE, "wf_slice_update: update shape %s is not the slice shape %s",
                         wf__shape_str(u->shape, u->ndim, su, sizeof su),
                         wf__shape_str(want, a->ndim, sw, sizeof sw));
    }
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_slice_update = {
    .name = "slice_update",
    .flags = WF_PRIM_INPLACE_FIRST, /* a dead array is updated where it lies */
    .params_size = sizeof(wf_slice_params),
    .infer = infer_slice_update,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- concatenate */

static wf_status infer_concatenate(const void *params, const wf_desc *inputs, int ninputs,
                                   wf_out_desc *out)
{
    const wf_axis_params *p = params;
    if (ninputs < 1)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_concatenate: no arrays given");
    const wf_desc *a = &inputs[0];
    if (a->ndim == 0)
        return wf__error(WF_ERR_SHAPE, "wf_concatenate: 0-d arrays cannot be concatenated");
    if (p->axis < 0 || p->axis >= a->ndim)
        return wf__error(WF_ERR_AXIS, "wf_concatenate: axis %d is out of range for rank %d",
                         p->axis, a->ndim);
    int64_t total = 0;
    for (int i = 0; i < ninputs; i++) {
        const wf_desc *x = &inputs[i];
        if (x->dtype != a->dtype)
            return wf__error(WF_ERR_DTYPE, "wf_concatenate: array %d has dtype %s, not %s", i,
                             wf_dtype_name(x->dtype), wf_dtype_name(a->dtype));
        char s0[256], s1[256];
        if (x->ndim != a->ndim)
            return wf__error(WF_ERR_SHAPE,
                             "wf_concatenate: array %d has shape %s, array 0 has %s (ranks differ)",
                             i, wf__shape_str(x->shape, x->ndim, s1, sizeof s1),
                             wf__shape_str(a->shape, a->ndim, s0, sizeof s0));
        for (int d = 0; d < a->ndim; d++) {
            if (d != p->axis && x->shape[d] != a->shape[d])
                return wf__error(WF_ERR_SHAPE,
                                 "wf_concatenate: array %d has shape %s, array 0 has %s "
                                 "(axis %d differs)",
                                 i, wf__shape_str(x->shape, x->ndim, s1, sizeof s1),
                                 wf__shape_str(a->shape, a->ndim, s0, sizeof s0), d);
        }
        if (x->shape[p->axis] > INT64_MAX / 8 - total)
            return wf__error(WF_ERR_OVERFLOW, "wf_concatenate: joined axis %d overflows",
                             p->axis);
        total += x->shape[p->axis];
    }
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->shape[p->axis] = total;
    return WF_OK;
}

const wf_prim_def wf__prim_concatenate = {
    .name = "concatenate",
    .flags = 0,
    .params_size = sizeof(wf_axis_params),
    .infer = infer_concatenate,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- pad */

static wf_status infer_pad(const void *params, const wf_desc *inputs, int ninputs, wf_out_desc *out)
{
    const wf_pad_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "pad: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (p->ndim != a->ndim)
        return wf__error(WF_ERR_INTERNAL, "pad: %d axes given for ndim %d", p->ndim, a->ndim);
    for (int d = 0; d < a->ndim; d++) {
        if (p->low[d] < 0 || p->high[d] < 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "wf_pad: negative padding (%lld, %lld) on axis %d",
                             (long long)p->low[d], (long long)p->high[d], d);
        const int64_t limit = INT64_MAX / 8;
        if (p->low[d] > limit - a->shape[d] || p->high[d] > limit - a->shape[d] - p->low[d])
            return wf__error(WF_ERR_OVERFLOW, "wf_pad: padded size of axis %d overflows", d);
        out->shape[d] = a->shape[d] + p->low[d] + p->high[d];
    }
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    return WF_OK;
}

const wf_prim_def wf__prim_pad = {
    .name = "pad",
    .flags = 0,
    .params_size = sizeof(wf_pad_params),
    .infer = infer_pad,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- tril / triu */

static wf_status infer_tri(const void *params, const wf_desc *inputs, int ninputs, wf_out_desc *out)
{
    const wf_tri_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "tri: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (a->ndim < 2)
        return wf__error(WF_ERR_SHAPE, "%s: the array needs at least 2 dimensions, got %d",
                         p->upper ? "wf_triu" : "wf_tril", a->ndim);
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_tri = {
    .name = "tri",
    .flags = 0,
    .params_size = sizeof(wf_tri_params),
    .infer = infer_tri,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- view */

static wf_status infer_view(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    const wf_astype_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "view: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_view: invalid dtype %d", (int)p->dtype);
    const int64_t from = (int64_t)wf_dtype_size(a->dtype), to = (int64_t)wf_dtype_size(p->dtype);
    out->dtype = p->dtype;
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    if (from == to)
        return WF_OK;
    char buf[256];
    if (a->ndim == 0)
        return wf__error(WF_ERR_SHAPE,
                         "wf_view: a 0-d %s can only be viewed as a dtype of its size (%lld "
                         "bytes), not %s",
                         wf_dtype_name(a->dtype), (long long)from, wf_dtype_name(p->dtype));
    const int64_t last = a->shape[a->ndim - 1];
    if (from > to) {
        out->shape[a->ndim - 1] = last * (from / to);
        return WF_OK;
    }
    if ((last * from) % to != 0)
        return wf__error(WF_ERR_SHAPE,
                         "wf_view: the last axis of shape %s holds %lld bytes, not a multiple "
                         "of %s's %lld",
                         wf__shape_str(a->shape, a->ndim, buf, sizeof buf),
                         (long long)(last * from), wf_dtype_name(p->dtype), (long long)to);
    out->shape[a->ndim - 1] = last * from / to;
    return WF_OK;
}

/* A view of the input's buffer when its layout allows, else a copy (the
 * kernel decides), as reshape. */
const wf_prim_def wf__prim_view = {
    .name = "view",
    .flags = 0,
    .params_size = sizeof(wf_astype_params),
    .infer = infer_view,
    .kernels = &(wf_kernel_slots){{0}},
};
