/* Linear algebra: wf_matmul and wf_addmm with NumPy matmul rules.
 *
 * 1-d operands are vectors: on the left one becomes (1, k), on the right
 * (k, 1), and that dim is dropped from the result (expand_dims and squeeze,
 * views whose other dims follow the operands' shapes, so a shapeless
 * compiled product replays at any size). Leading axes batch and broadcast. The primitives take operands of
 * any (mixed) dtypes and produce the promoted float type; the kernel
 * converts while staging operands for BLAS, so no cast nodes are made. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/linalg.h"
#include "prim/prims.h"

/* The operands as matrices plus the shapes of the internal product (pshape,
 * rank >= 2) and of the result (rshape, vector dims dropped). x and y are
 * new references on success. */
typedef struct product_setup {
    wf_array *x, *y;
    wf_dtype dtype;
    int pndim, rndim;
    int64_t pshape[WF_MAX_NDIM];
    int64_t rshape[WF_MAX_NDIM];
    int ndropped;   /* vector dims of the product that the result drops */
    int dropped[2]; /* their positions in the product, ascending */
} product_setup;

/* `v` (1-d, k) as (1, k) when `left`, else (k, 1); other ranks retained. */
static wf_array *as_matrix(wf_array *v, bool left)
{
    if (v->ndim != 1)
        return wf__array_incref(v);
    const int axis = left ? 0 : 1;
    return wf__op_expand_dims(v, &axis, 1);
}

static wf_status setup_product(const char *op, wf_array *a, wf_array *b, product_setup *s)
{
    s->x = s->y = NULL;
    if (a->ndim == 0 || b->ndim == 0)
        return wf__error(WF_ERR_SHAPE,
                         "%s: operands must have at least 1 dim (got ranks %d and %d)", op,
                         a->ndim, b->ndim);
    s->dtype = wf_promote_types(a->dtype, b->dtype);
    if (!wf__dtype_is_float(s->dtype) && s->dtype != WF_DTYPE_C64)
        return wf__error(WF_ERR_DTYPE, "%s: dtypes %s and %s (needs a float or complex type)", op,
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    const int64_t ka = a->shape[a->ndim - 1];
    const int64_t kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (ka != kb) {
        char sa[256], sb[256];
        return wf__error(WF_ERR_SHAPE, "%s: inner dimensions differ (%s @ %s: %lld vs %lld)", op,
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(b->shape, b->ndim, sb, sizeof sb), (long long)ka,
                         (long long)kb);
    }
    int nb = 0;
    const int ab = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
    wf_status st = wf__broadcast_shapes(op, a->shape, ab, b->shape, bb, s->pshape, &nb);
    if (st != WF_OK) {
        char sa[256], sb[256];
        return wf__error(WF_ERR_SHAPE, "%s: batch dims of %s and %s do not broadcast", op,
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(b->shape, b->ndim, sb, sizeof sb));
    }
    const int64_t m = a->ndim == 1 ? 1 : a->shape[a->ndim - 2];
    const int64_t n = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
    s->pshape[nb] = m;
    s->pshape[nb + 1] = n;
    s->pndim = nb + 2;
    s->rndim = 0;
    s->ndropped = 0;
    for (int d = 0; d < nb; d++)
        s->rshape[s->rndim++] = s->pshape[d];
    if (a->ndim != 1)
        s->rshape[s->rndim++] = m;
    else
        s->dropped[s->ndropped++] = nb;
    if (b->ndim != 1)
        s->rshape[s->rndim++] = n;
    else
        s->dropped[s->ndropped++] = nb + 1;
    s->x = as_matrix(a, true);
    s->y = s->x ? as_matrix(b, false) : NULL;
    if (!s->y) {
        wf__array_release(s->x);
        s->x = NULL;
        return wf_last_error();
    }
    return WF_OK;
}

/* Drops the vector dims from the internal product; consumes `product`. */
static wf_array *finish(wf_array *product, const product_setup *s)
{
    if (!product || s->ndropped == 0)
        return product;
    wf_array *out = wf__op_squeeze(product, s->dropped, s->ndropped);
    wf__array_release(product);
    return out;
}

wf_array *wf__op_matmul(wf_array *a, wf_array *b)
{
    if (!wf__array_check(a, "wf_matmul", "a") || !wf__array_check(b, "wf_matmul", "b"))
        return NULL;
    product_setup s;
    if (setup_product("wf_matmul", a, b, &s) != WF_OK)
        return NULL;
    wf_array *inputs[2] = {s.x, s.y};
    wf_array *product = wf__node_new(&wf__prim_matmul, NULL, inputs, 2);
    wf__array_release(s.x);
    wf__array_release(s.y);
    return finish(product, &s);
}

/* complex64: alpha (a @ b) + beta c from the complex product (c broadcast
 * by the ops). */
static wf_array *complex_addmm(wf_array *c, wf_array *a, wf_array *b, double alpha, double beta)
{
    wf_array *ab = wf__op_matmul(a, b);
    wf_array *sa = wf__op_full(NULL, 0, alpha, WF_DTYPE_F32);
    wf_array *sb = wf__op_full(NULL, 0, beta, WF_DTYPE_F32);
    wf_array *left = ab && sa ? wf__op_multiply(ab, sa) : NULL;
    wf_array *right = sb ? wf__op_multiply(c, sb) : NULL;
    wf_array *out = left && right ? wf__op_add(left, right) : NULL;
    wf_array *temps[] = {ab, sa, sb, left, right};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++)
        wf__array_release(temps[i]);
    return out;
}

/* alpha product + beta c by multiply and add: c's broadcast is then an
 * implicit one, which a shapeless compiled replay re-derives from each
 * call's shapes (a broadcast inside addmm would keep the traced one, a
 * constant for a layer's bias). Takes `product` (a @ b); returns a new
 * reference. */
static wf_array *addmm_composed(wf_array *c, wf_array *product, double alpha, double beta)
{
    wf_array *owned[4] = {product, NULL, NULL, NULL};
    wf_array *left = product, *right = c;
    if (alpha != 1.0) {
        owned[1] = wf__op_full(NULL, 0, alpha, product->dtype);
        left = owned[1] ? (owned[2] = wf__op_multiply(product, owned[1])) : NULL;
    }
    if (left && beta != 1.0) {
        wf_array *scale = wf__op_full(NULL, 0, beta, c->dtype);
        right = scale ? wf__op_multiply(c, scale) : NULL;
        wf__array_release(scale);
        owned[3] = right;
    }
    wf_array *out = left && right ? wf__op_add(left, right) : NULL;
    for (int i = 0; i < 4; i++)
        wf__array_release(owned[i]);
    return out;
}

wf_array *wf__op_addmm(wf_array *c, wf_array *a, wf_array *b, double alpha, double beta)
{
    if (!wf__array_check(c, "wf_addmm", "c") || !wf__array_check(a, "wf_addmm", "a") ||
        !wf__array_check(b, "wf_addmm", "b"))
        return NULL;
    if (wf__array_is_shapeless(a) || wf__array_is_shapeless(b)) {
        wf_array *product = wf__op_matmul(a, b); /* checks the operands, gives the shape */
        if (!product)
            return NULL;
        if (!wf__shape_equal(c->shape, c->ndim, product->shape, product->ndim))
            return addmm_composed(c, product, alpha, beta);
        wf__array_release(product);
    }
    product_setup s;
    if (setup_product("wf_addmm", a, b, &s) != WF_OK)
        return NULL;
    const wf_dtype dtype = wf_promote_types(s.dtype, c->dtype);
    if (dtype == WF_DTYPE_C64) {
        wf__array_release(s.x);
        wf__array_release(s.y);
        return complex_addmm(c, a, b, alpha, beta);
    }
    bool ok = true;
    if (!wf__dtype_is_float(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_addmm: dtype %s of c does not promote to a float type",
                  wf_dtype_name(c->dtype));
        ok = false;
    }
    /* c must broadcast to the product's shape (the result keeps that shape). */
    bool fits = c->ndim <= s.rndim;
    for (int d = 0; fits && d < c->ndim; d++) {
        const int64_t cd = c->shape[c->ndim - 1 - d], rd = s.rshape[s.rndim - 1 - d];
        fits = cd == 1 || cd == rd;
    }
    if (ok && !fits) {
        char sc[256], sr[256];
        wf__error(WF_ERR_SHAPE, "wf_addmm: c of shape %s does not broadcast to the product's %s",
                  wf__shape_str(c->shape, c->ndim, sc, sizeof sc),
                  wf__shape_str(s.rshape, s.rndim, sr, sizeof sr));
        ok = false;
    }
    wf_array *product = NULL;
    if (ok) {
        /* c of the result's own shape is used as it is, so that a shapeless
         * compiled addmm follows the call's shapes (MLX broadcasts only when
         * the shapes differ, too). */
        wf_array *cb = wf__shape_equal(c->shape, c->ndim, s.rshape, s.rndim)
                           ? wf__array_incref(c)
                           : wf__op_broadcast_to(c, s.rshape, s.rndim);
        wf_array *cp = cb && s.ndropped ? wf__op_expand_dims(cb, s.dropped, s.ndropped)
                                        : (cb ? wf__array_incref(cb) : NULL);
        if (cp) {
            wf_addmm_params p;
            memset(&p, 0, sizeof p);
            p.alpha = alpha;
            p.beta = beta;
            wf_array *inputs[3] = {s.x, s.y, cp};
            product = wf__node_new(&wf__prim_addmm, &p, inputs, 3);
        }
        wf__array_release(cb);
        wf__array_release(cp);
    }
    wf__array_release(s.x);
    wf__array_release(s.y);
    return finish(product, &s);
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_matmul(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_matmul(a, b)); }

wf_array *wf_addmm(wf_array *c, wf_array *a, wf_array *b, double alpha, double beta)
{
    return wf__array_publish(wf__op_addmm(c, a, b, alpha, beta));
}
