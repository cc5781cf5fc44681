/* Linear algebra: wf_matmul. 1-d operands follow NumPy: a vector on the left
 * becomes (1, k), on the right (k, 1), and that dim is dropped from the
 * result; this is done with reshapes around a 2-d matmul primitive. */
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

static wf_status check_operands(const wf_array *a, const wf_array *b, wf_dtype *dtype)
{
    if (a->ndim == 0 || b->ndim == 0)
        return wf__error(WF_ERR_SHAPE,
                         "wf_matmul: operands must have at least 1 dim (got %d and %d)", a->ndim,
                         b->ndim);
    if (a->ndim > 2 || b->ndim > 2)
        return wf__error(WF_ERR_UNSUPPORTED,
                         "wf_matmul: operands of rank %d and %d (batched matmul is not done yet)",
                         a->ndim, b->ndim);
    *dtype = wf_promote_types(a->dtype, b->dtype);
    if (!wf__dtype_is_float(*dtype))
        return wf__error(WF_ERR_DTYPE, "wf_matmul: dtypes %s and %s (needs a float type)",
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    const int64_t ka = a->shape[a->ndim - 1];
    const int64_t kb = b->shape[0];
    if (ka != kb) {
        char sa[128], sb[128];
        return wf__error(WF_ERR_SHAPE, "wf_matmul: inner dimensions differ (%s @ %s)",
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(b->shape, b->ndim, sb, sizeof sb));
    }
    return WF_OK;
}

/* `x` cast to dtype and made 2-d ((1, k) for a left vector, (k, 1) for a
 * right one). Returns a new reference. */
static wf_array *as_matrix(wf_array *x, wf_dtype dtype, bool left)
{
    wf_array *cast = wf_astype(x, dtype);
    if (!cast || cast->ndim == 2)
        return cast;
    const int64_t k = cast->shape[0];
    const int64_t shape[2] = {left ? 1 : k, left ? k : 1};
    wf_array *m = wf_reshape(cast, shape, 2);
    wf_release(cast);
    return m;
}

wf_array *wf_matmul(wf_array *a, wf_array *b)
{
    if (!wf__array_check(a, "wf_matmul", "a") || !wf__array_check(b, "wf_matmul", "b"))
        return NULL;
    wf_dtype dtype = WF_DTYPE_F32;
    if (check_operands(a, b, &dtype) != WF_OK)
        return NULL;
    wf_array *x = as_matrix(a, dtype, true);
    wf_array *y = x ? as_matrix(b, dtype, false) : NULL;
    wf_array *product = NULL;
    if (x && y) {
        wf_array *inputs[2] = {x, y};
        product = wf__node_new(&wf__prim_matmul, NULL, inputs, 2);
    }
    wf_release(x);
    wf_release(y);
    if (!product || (a->ndim == 2 && b->ndim == 2))
        return product;
    /* Drop the dims that the vectors added. */
    int64_t shape[2];
    int ndim = 0;
    if (a->ndim == 2)
        shape[ndim++] = a->shape[0];
    if (b->ndim == 2)
        shape[ndim++] = b->shape[1];
    wf_array *out = wf_reshape(product, shape, ndim);
    wf_release(product);
    return out;
}
