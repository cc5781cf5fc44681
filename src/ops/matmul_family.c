/* The rest of MLX's matmul family: wf_gather_mm and wf_segmented_mm
 * (primitives of their own, prim/matmul_family.h) and wf_block_masked_mm
 * (block masks expanded to element masks around one wf_matmul, so its
 * gradients, vmap and compile are those of the ops it is made of). */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/ops.h"
#include "prim/matmul_family.h"
#include "prim/shape.h"

/* a and b cast to their promoted real float type (new references). */
static wf_status promote_operands(const char *op, wf_array *a, wf_array *b, wf_array **ca,
                                  wf_array **cb)
{
    *ca = *cb = NULL;
    const wf_dtype dtype = wf_promote_types(a->dtype, b->dtype);
    if (!wf__dtype_is_float(dtype))
        return wf__error(WF_ERR_DTYPE,
                         "%s: dtypes %s and %s (only real floating point types are supported)",
                         op, wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    *ca = wf__op_astype(a, dtype);
    *cb = *ca ? wf__op_astype(b, dtype) : NULL;
    if (!*cb) {
        wf__array_release(*ca);
        *ca = NULL;
        return wf_last_error();
    }
    return WF_OK;
}

/* 1-d operands as MLX: a (k) -> (1, k), b (k) -> (k, 1); then the inner
 * dims must agree. New references in *ma / *mb. */
static wf_status as_matrices(const char *op, wf_array *a, wf_array *b, wf_array **ma,
                             wf_array **mb)
{
    *ma = *mb = NULL;
    char s0[256], s1[256];
    if (a->ndim == 0 || b->ndim == 0)
        return wf__error(WF_ERR_SHAPE, "%s: operands must have at least 1 dim (got ranks %d and "
                                       "%d)",
                         op, a->ndim, b->ndim);
    const int front = 0, back = 1;
    *ma = a->ndim == 1 ? wf__op_expand_dims(a, &front, 1) : wf__array_incref(a);
    *mb = b->ndim == 1 ? wf__op_expand_dims(b, &back, 1) : wf__array_incref(b);
    if (!*ma || !*mb)
        return wf_last_error();
    if ((*ma)->shape[(*ma)->ndim - 1] != (*mb)->shape[(*mb)->ndim - 2])
        return wf__error(WF_ERR_SHAPE, "%s: inner dimensions of %s and %s differ", op,
                         wf__shape_str(a->shape, a->ndim, s0, sizeof s0),
                         wf__shape_str(b->shape, b->ndim, s1, sizeof s1));
    return WF_OK;
}

/* The result without the dims 1-d operands gained (a new reference; takes
 * `out`). */
static wf_array *drop_vector_dims(wf_array *out, int a_ndim, int b_ndim)
{
    if (!out || (a_ndim != 1 && b_ndim != 1))
        return out;
    int axes[2], n = 0;
    if (a_ndim == 1)
        axes[n++] = out->ndim - 2;
    if (b_ndim == 1)
        axes[n++] = out->ndim - 1;
    wf_array *squeezed = wf__op_squeeze(out, axes, n);
    wf__array_release(out);
    return squeezed;
}

/* x (batch..., r, c) as (prod batch, r, c), by flatten and expand_dims,
 * which follow x's shape in a shapeless compiled replay. */
static wf_array *as_stack(wf_array *x)
{
    if (x->ndim == 2) {
        const int front = 0;
        return wf__op_expand_dims(x, &front, 1);
    }
    if (x->ndim == 3)
        return wf__array_incref(x);
    return wf__op_flatten(x, 0, x->ndim - 3);
}

/* Integer indices as a dtype the kernels read; NULL: every matrix of the
 * stack in order, shaped like x's batch dims. */
static wf_array *index_or_default(const char *op, wf_array *indices, const wf_array *x)
{
    if (indices == NULL) {
        int64_t count = 1;
        for (int d = 0; d < x->ndim - 2; d++)
            count *= x->shape[d];
        wf_array *range = wf__op_arange(0, (double)count, 1, WF_DTYPE_I64);
        wf_array *shaped = range ? wf__op_reshape(range, x->shape, x->ndim - 2) : NULL;
        wf__array_release(range);
        return shaped;
    }
    if (!wf__array_check(indices, op, "indices"))
        return NULL;
    if (wf__is_index_dtype(indices->dtype))
        return wf__array_incref(indices);
    if (!wf__dtype_is_integer(indices->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: indices must be integers, not %s", op,
                  wf_dtype_name(indices->dtype));
        return NULL;
    }
    return wf__op_astype(indices, WF_DTYPE_I64);
}

static wf_array *op_gather_mm(wf_array *a, wf_array *b, wf_array *lhs_indices,
                              wf_array *rhs_indices, bool sorted_indices)
{
    const char *op = "wf_gather_mm";
    if (!wf__array_check(a, op, "a") || !wf__array_check(b, op, "b"))
        return NULL;
    if (!lhs_indices && !rhs_indices)
        return wf__op_matmul(a, b);
    wf_array *ma = NULL, *mb = NULL, *ca = NULL, *cb = NULL, *sa = NULL, *sb = NULL;
    wf_array *li = NULL, *ri = NULL, *lb = NULL, *rb = NULL, *out = NULL;
    if (as_matrices(op, a, b, &ma, &mb) != WF_OK ||
        promote_operands(op, ma, mb, &ca, &cb) != WF_OK)
        goto done;
    li = index_or_default(op, lhs_indices, ca);
    ri = li ? index_or_default(op, rhs_indices, cb) : NULL;
    int64_t ishape[WF_MAX_NDIM];
    int indim = 0;
    if (!ri || wf__broadcast_shapes(op, li->shape, li->ndim, ri->shape, ri->ndim, ishape,
                                    &indim) != WF_OK)
        goto done;
    if (indim + 2 > WF_MAX_NDIM) {
        wf__error(WF_ERR_SHAPE, "%s: the result would have rank %d (max %d)", op, indim + 2,
                  WF_MAX_NDIM);
        goto done;
    }
    lb = wf__op_broadcast_to(li, ishape, indim);
    rb = lb ? wf__op_broadcast_to(ri, ishape, indim) : NULL;
    sa = rb ? as_stack(ca) : NULL;
    sb = sa ? as_stack(cb) : NULL;
    if (sb) {
        wf_gather_mm_params p;
        memset(&p, 0, sizeof p);
        p.sorted_indices = sorted_indices;
        wf_array *inputs[4] = {sa, sb, lb, rb};
        out = drop_vector_dims(wf__node_new(&wf__prim_gather_mm, &p, inputs, 4), a->ndim,
                               b->ndim);
    }
done:
    wf__array_release(ma);
    wf__array_release(mb);
    wf__array_release(ca);
    wf__array_release(cb);
    wf__array_release(sa);
    wf__array_release(sb);
    wf__array_release(li);
    wf__array_release(ri);
    wf__array_release(lb);
    wf__array_release(rb);
    return out;
}

static wf_array *op_segmented_mm(wf_array *a, wf_array *b, wf_array *segments)
{
    const char *op = "wf_segmented_mm";
    if (!wf__array_check(a, op, "a") || !wf__array_check(b, op, "b") ||
        !wf__array_check(segments, op, "segments"))
        return NULL;
    char s0[256], s1[256];
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0]) {
        wf__error(WF_ERR_SHAPE, "%s: operands of shapes %s and %s (two matrices, inner dims "
                                "equal; batches are not supported)",
                  op, wf__shape_str(a->shape, a->ndim, s0, sizeof s0),
                  wf__shape_str(b->shape, b->ndim, s1, sizeof s1));
        return NULL;
    }
    if (segments->ndim < 1 || segments->shape[segments->ndim - 1] != 2) {
        wf__error(WF_ERR_SHAPE, "%s: segments should have shape (..., 2), not %s", op,
                  wf__shape_str(segments->shape, segments->ndim, s0, sizeof s0));
        return NULL;
    }
    if (!wf__dtype_is_integer(segments->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: segments must be integers, not %s", op,
                  wf_dtype_name(segments->dtype));
        return NULL;
    }
    wf_array *ca, *cb, *seg = NULL, *out = NULL;
    if (promote_operands(op, a, b, &ca, &cb) != WF_OK)
        return NULL;
    seg = wf__is_index_dtype(segments->dtype) ? wf__array_incref(segments)
                                              : wf__op_astype(segments, WF_DTYPE_I64);
    if (seg) {
        wf_array *inputs[3] = {ca, cb, seg};
        out = wf__node_new(&wf__prim_segmented_mm, NULL, inputs, 3);
    }
    wf__array_release(seg);
    wf__array_release(ca);
    wf__array_release(cb);
    return out;
}

/* A block mask (..., ceil(rows / bs), ceil(cols / bs)) as an element mask
 * (batch..., rows, cols) of `dtype` (bool: 0 / 1; float: the scale). */
static wf_array *element_mask(const char *op, wf_array *mask, const int64_t *batch, int nbatch,
                              int64_t rows, int64_t cols, int64_t bs, wf_dtype dtype)
{
    if (mask->dtype != WF_DTYPE_BOOL && !wf__dtype_is_float(mask->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: masks must be bool or float, not %s", op,
                  wf_dtype_name(mask->dtype));
        return NULL;
    }
    int64_t shape[WF_MAX_NDIM];
    wf__shape_copy(shape, batch, nbatch);
    shape[nbatch] = (rows + bs - 1) / bs;
    shape[nbatch + 1] = (cols + bs - 1) / bs;
    wf_array *cast = wf__op_astype(mask, dtype);
    wf_array *blocks = cast ? wf__op_broadcast_to(cast, shape, nbatch + 2) : NULL;
    wf_array *tall = blocks ? wf__op_repeat(blocks, bs, nbatch) : NULL;
    wf_array *wide = tall ? wf__op_repeat(tall, bs, nbatch + 1) : NULL;
    int64_t starts[WF_MAX_NDIM] = {0}, stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < nbatch + 2; d++) {
        stops[d] = d < nbatch ? batch[d] : (d == nbatch ? rows : cols);
        steps[d] = 1;
    }
    wf_array *out = wide ? wf__op_slice(wide, starts, stops, steps) : NULL;
    wf__array_release(wide);
    wf__array_release(tall);
    wf__array_release(blocks);
    wf__array_release(cast);
    return out;
}

/* x * the element mask of `mask` (x itself, a new reference, when NULL). */
static wf_array *apply_mask(const char *op, wf_array *x, wf_array *mask, const int64_t *batch,
                            int nbatch, int64_t bs, int expand_axis)
{
    if (!mask)
        return wf__array_incref(x);
    wf_array *m = expand_axis != 0 ? wf__op_expand_dims(mask, &expand_axis, 1)
                                   : wf__array_incref(mask);
    wf_array *em = m ? element_mask(op, m, batch, nbatch, x->shape[x->ndim - 2],
                                    x->shape[x->ndim - 1], bs, x->dtype)
                     : NULL;
    wf_array *out = em ? wf__op_multiply(x, em) : NULL;
    wf__array_release(em);
    wf__array_release(m);
    return out;
}

static wf_array *op_block_masked_mm(wf_array *a, wf_array *b, int block_size, wf_array *mask_out,
                                    wf_array *mask_lhs, wf_array *mask_rhs)
{
    const char *op = "wf_block_masked_mm";
    if (!wf__array_check(a, op, "a") || !wf__array_check(b, op, "b"))
        return NULL;
    /* before any use: a released mask must not be revived by a new reference */
    if ((mask_out && !wf__array_check(mask_out, op, "mask_out")) ||
        (mask_lhs && !wf__array_check(mask_lhs, op, "mask_lhs")) ||
        (mask_rhs && !wf__array_check(mask_rhs, op, "mask_rhs")))
        return NULL;
    if (!mask_out && !mask_lhs && !mask_rhs)
        return wf__op_matmul(a, b);
    if (block_size <= 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: block_size must be positive, not %d", op,
                  block_size);
        return NULL;
    }
    wf_array *ma = NULL, *mb = NULL, *ca = NULL, *cb = NULL, *xa = NULL, *xb = NULL;
    wf_array *prod = NULL, *out = NULL;
    int64_t batch[WF_MAX_NDIM];
    int nbatch = 0;
    if (as_matrices(op, a, b, &ma, &mb) != WF_OK ||
        promote_operands(op, ma, mb, &ca, &cb) != WF_OK ||
        wf__broadcast_shapes(op, ca->shape, ca->ndim - 2, cb->shape, cb->ndim - 2, batch,
                             &nbatch) != WF_OK)
        goto done;
    /* a 1-d operand's masks gain the dim its matrix gained, as in MLX */
    xa = apply_mask(op, ca, mask_lhs, batch, nbatch, block_size, a->ndim == 1 ? -2 : 0);
    xb = xa ? apply_mask(op, cb, mask_rhs, batch, nbatch, block_size, b->ndim == 1 ? -1 : 0)
            : NULL;
    prod = xb ? wf__op_matmul(xa, xb) : NULL;
    if (prod && mask_out) {
        wf_array *m = wf__array_incref(mask_out);
        if (a->ndim == 1) {
            const int ax = -2;
            wf_array *e = wf__op_expand_dims(m, &ax, 1);
            wf__array_release(m);
            m = e;
        }
        if (m && b->ndim == 1) {
            const int ax = -1;
            wf_array *e = wf__op_expand_dims(m, &ax, 1);
            wf__array_release(m);
            m = e;
        }
        wf_array *masked = m ? apply_mask(op, prod, m, batch, nbatch, block_size, 0) : NULL;
        out = drop_vector_dims(masked, a->ndim, b->ndim);
        wf__array_release(m);
    } else if (prod) {
        out = drop_vector_dims(wf__array_incref(prod), a->ndim, b->ndim);
    }
done:
    wf__array_release(prod);
    wf__array_release(xa);
    wf__array_release(xb);
    wf__array_release(ma);
    wf__array_release(mb);
    wf__array_release(ca);
    wf__array_release(cb);
    return out;
}

/* ---------------------------------------------------------------- public entry points */

wf_array *wf_gather_mm(wf_array *a, wf_array *b, wf_array *lhs_indices, wf_array *rhs_indices,
                       bool sorted_indices)
{
    return wf__array_publish(op_gather_mm(a, b, lhs_indices, rhs_indices, sorted_indices));
}

wf_array *wf_segmented_mm(wf_array *a, wf_array *b, wf_array *segments)
{
    return wf__array_publish(op_segmented_mm(a, b, segments));
}

wf_array *wf_block_masked_mm(wf_array *a, wf_array *b, int block_size, wf_array *mask_out,
                             wf_array *mask_lhs, wf_array *mask_rhs)
{
    return wf__array_publish(
        op_block_masked_mm(a, b, block_size, mask_out, mask_lhs, mask_rhs));
}
