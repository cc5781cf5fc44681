/* Linear algebra primitives: matmul and addmm on operands of rank >= 2 (the
 * ops reshape 1-d operands). Leading (batch) axes broadcast; the inputs may
 * have different dtypes (the kernel converts while staging for BLAS); the
 * output has their promoted type, which must be a float type. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/linalg.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/linalg.h"
#include "prim/prims.h"

/* Output dtype and shape of a @ b, with errors naming `op`. */
static wf_status infer_product(const char *op, const wf_array *a, const wf_array *b,
                               wf_dtype *dtype, int *ndim, int64_t *shape)
{
    if (a->ndim < 2 || b->ndim < 2)
        return wf__error(WF_ERR_SHAPE, "%s: operands of rank %d and %d (the primitive needs 2+)",
                         op, a->ndim, b->ndim);
    const wf_dtype dt = wf_promote_types(a->dtype, b->dtype);
    if (!wf__dtype_is_float(dt))
        return wf__error(WF_ERR_DTYPE, "%s: dtypes %s and %s (needs a float type)", op,
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    if (a->shape[a->ndim - 1] != b->shape[b->ndim - 2]) {
        char sa[256], sb[256];
        return wf__error(WF_ERR_SHAPE, "%s: inner dimensions differ (%s @ %s)", op,
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(b->shape, b->ndim, sb, sizeof sb));
    }
    int nb = 0;
    wf_status st = wf__broadcast_shapes(op, a->shape, a->ndim - 2, b->shape, b->ndim - 2, shape,
                                        &nb);
    if (st != WF_OK)
        return st;
    shape[nb] = a->shape[a->ndim - 2];
    shape[nb + 1] = b->shape[b->ndim - 1];
    *ndim = nb + 2;
    *dtype = dt;
    return WF_OK;
}

static wf_status infer_matmul(const void *params, wf_array *const *inputs, int ninputs,
                              wf_dtype *dtype, int *ndim, int64_t *shape)
{
    (void)params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "matmul: expected 2 inputs, got %d", ninputs);
    return infer_product("wf_matmul", inputs[0], inputs[1], dtype, ndim, shape);
}

const wf_prim_def wf__prim_matmul = {
    .name = "matmul",
    .flags = 0,
    .params_size = 0,
    .infer = infer_matmul,
    .cpu_kernel = wf__cpu_matmul,
};

/* c must already have the product's shape (the op broadcasts it). */
static wf_status infer_addmm(const void *params, wf_array *const *inputs, int ninputs,
                             wf_dtype *dtype, int *ndim, int64_t *shape)
{
    (void)params;
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "addmm: expected 3 inputs, got %d", ninputs);
    wf_status st = infer_product("wf_addmm", inputs[0], inputs[1], dtype, ndim, shape);
    if (st != WF_OK)
        return st;
    const wf_array *c = inputs[2];
    if (!wf__shape_equal(c->shape, c->ndim, shape, *ndim)) {
        char sc[256], sp[256];
        return wf__error(WF_ERR_SHAPE, "wf_addmm: c has shape %s, the product %s",
                         wf__shape_str(c->shape, c->ndim, sc, sizeof sc),
                         wf__shape_str(shape, *ndim, sp, sizeof sp));
    }
    *dtype = wf_promote_types(*dtype, c->dtype);
    if (!wf__dtype_is_float(*dtype))
        return wf__error(WF_ERR_DTYPE, "wf_addmm: dtype %s of c", wf_dtype_name(c->dtype));
    return WF_OK;
}

const wf_prim_def wf__prim_addmm = {
    .name = "addmm",
    .flags = 0,
    .params_size = sizeof(wf_addmm_params),
    .infer = infer_addmm,
    .cpu_kernel = wf__cpu_addmm,
};
