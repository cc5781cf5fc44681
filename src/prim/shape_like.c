/* Shape-following primitives: each takes its output shape from another
 * input (`like`, whose data it never reads) instead of a shape in its
 * parameters. Gradient rules build them for the nodes of a shapeless trace
 * (WF_NODE_FLAG_SHAPELESS), so that a shapeless compiled gradient replays
 * at each call's shapes: broadcast_like and unbroadcast_like where the rules
 * would broadcast or sum to the traced shape of an input, reshape_like
 * where they would reshape back to it, size_ratio where they would use a
 * traced element count (mean's 1/n), crop_like and pad_like where they
 * would slice or pad by traced sizes (a concatenation's or a pad's
 * cotangent, cut into its operands' shapes). */
#include "prim/shape.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

static wf_status expect_two(const char *name, int ninputs)
{
    return ninputs == 2 ? WF_OK
                        : wf__error(WF_ERR_INTERNAL, "%s: expected 2 inputs, got %d", name,
                                    ninputs);
}

static wf_status cannot(const char *name, const char *what, const wf_desc *x, const wf_desc *like)
{
    char sx[256], sl[256];
    return wf__error(WF_ERR_SHAPE, "%s: cannot %s %s to %s", name, what,
                     wf__shape_str(x->shape, x->ndim, sx, sizeof sx),
                     wf__shape_str(like->shape, like->ndim, sl, sizeof sl));
}

/* ---------------------------------------------------------------- broadcast_like */

/* x broadcast with like's shape (NumPy rules): the joint shape. */
static wf_status infer_broadcast_like(const void *params, const wf_desc *inputs, int ninputs,
                                      wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_two("broadcast_like", ninputs);
    if (st != WF_OK)
        return st;
    if (wf__broadcast_shapes("broadcast_like", inputs[0].shape, inputs[0].ndim, inputs[1].shape,
                             inputs[1].ndim, out->shape, &out->ndim) != WF_OK)
        return cannot("broadcast_like", "broadcast", &inputs[0], &inputs[1]);
    out->dtype = inputs[0].dtype;
    return WF_OK;
}

const wf_prim_def wf__prim_broadcast_like = {
    .name = "broadcast_like",
    .flags = WF_PRIM_VIEW,
    .infer = infer_broadcast_like,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- unbroadcast_like */

/* x summed to like's shape, which broadcasts to x's: over x's leading axes
 * and the axes where like has 1. */
static wf_status infer_unbroadcast_like(const void *params, const wf_desc *inputs, int ninputs,
                                        wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_two("unbroadcast_like", ninputs);
    if (st != WF_OK)
        return st;
    const wf_desc *x = &inputs[0], *like = &inputs[1];
    const int lead = x->ndim - like->ndim;
    if (lead < 0)
        return cannot("unbroadcast_like", "sum", x, like);
    for (int d = 0; d < like->ndim; d++)
        if (like->shape[d] != 1 && like->shape[d] != x->shape[lead + d])
            return cannot("unbroadcast_like", "sum", x, like);
    out->dtype = x->dtype;
    out->ndim = like->ndim;
    wf__shape_copy(out->shape, like->shape, like->ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_unbroadcast_like = {
    .name = "unbroadcast_like",
    .infer = infer_unbroadcast_like,
    .kernels = &(wf_kernel_slots){{0}},
};

uint64_t wf__unbroadcast_axes(const int64_t *x_shape, int x_ndim, const int64_t *like_shape,
                              int like_ndim)
{
    const int lead = x_ndim - like_ndim;
    uint64_t mask = 0;
    for (int d = 0; d < x_ndim; d++)
        if (d < lead || (like_shape[d - lead] == 1 && x_shape[d] != 1))
            mask |= 1ull << d;
    return mask;
}

/* ---------------------------------------------------------------- reshape_like */

static wf_status infer_reshape_like(const void *params, const wf_desc *inputs, int ninputs,
                                    wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_two("reshape_like", ninputs);
    if (st != WF_OK)
        return st;
    int64_t size_x = 1, size_like = 1;
    for (int d = 0; d < inputs[0].ndim; d++)
        size_x *= inputs[0].shape[d]; /* an input's size fits int64 */
    for (int d = 0; d < inputs[1].ndim; d++)
        size_like *= inputs[1].shape[d];
    if (size_x != size_like)
        return cannot("reshape_like", "reshape", &inputs[0], &inputs[1]);
    out->dtype = inputs[0].dtype;
    out->ndim = inputs[1].ndim;
    wf__shape_copy(out->shape, inputs[1].shape, inputs[1].ndim);
    return WF_OK;
}

const wf_prim_def wf__prim_reshape_like = {
    .name = "reshape_like",
    .infer = infer_reshape_like,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- size_ratio */

/* A 0-d value of y's dtype: x's size over y's (the number of elements a
 * reduction of x into y combined into each), 0 when y is empty. */
static wf_status infer_size_ratio(const void *params, const wf_desc *inputs, int ninputs,
                                  wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_two("size_ratio", ninputs);
    if (st != WF_OK)
        return st;
    out->dtype = inputs[1].dtype;
    out->ndim = 0;
    return WF_OK;
}

const wf_prim_def wf__prim_size_ratio = {
    .name = "size_ratio",
    .infer = infer_size_ratio,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- crop_like, pad_like */

/* Checks (x, like, before...) of one rank, with the block of
 * inputs[inner]'s shape inside the other of x and like at wf__block_start,
 * and describes the output: like's shape, x's dtype. */
static wf_status infer_block(const char *name, const wf_block_params *p, const wf_desc *inputs,
                             int ninputs, int inner, wf_out_desc *out)
{
    if (ninputs < 2)
        return wf__error(WF_ERR_INTERNAL, "%s: expected at least 2 inputs, got %d", name,
                         ninputs);
    for (int i = 0; i < ninputs; i++)
        if (inputs[i].ndim != p->ndim)
            return wf__error(WF_ERR_INTERNAL, "%s: input %d has rank %d, not %d", name, i,
                             inputs[i].ndim, p->ndim);
    if (ninputs > 2 && (p->axis < 0 || p->axis >= p->ndim))
        return wf__error(WF_ERR_INTERNAL, "%s: axis %d for rank %d", name, p->axis, p->ndim);
    const wf_desc *block = &inputs[inner], *around = &inputs[1 - inner];
    int64_t before = 0; /* stops once past the whole axis: no overflow */
    for (int i = 2; i < ninputs && before <= around->shape[p->axis]; i++)
        before += inputs[i].shape[p->axis];
    for (int d = 0; d < p->ndim; d++)
        if (p->low[d] < 0 || wf__block_start(p, d, before) > around->shape[d] - block->shape[d])
            return cannot(name, "place the block of", block, around);
    out->dtype = inputs[0].dtype;
    out->ndim = p->ndim;
    wf__shape_copy(out->shape, inputs[1].shape, p->ndim);
    return WF_OK;
}

/* The block has like's shape, inside x. */
static wf_status infer_crop_like(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *out)
{
    return infer_block("crop_like", params, inputs, ninputs, 1, out);
}

/* The block is x, inside like's shape. */
static wf_status infer_pad_like(const void *params, const wf_desc *inputs, int ninputs,
                                wf_out_desc *out)
{
    return infer_block("pad_like", params, inputs, ninputs, 0, out);
}

const wf_prim_def wf__prim_crop_like = {
    .name = "crop_like",
    .flags = WF_PRIM_VIEW,
    .params_size = sizeof(wf_block_params),
    .infer = infer_crop_like,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_pad_like = {
    .name = "pad_like",
    .params_size = sizeof(wf_block_params),
    .infer = infer_pad_like,
    .kernels = &(wf_kernel_slots){{0}},
};
