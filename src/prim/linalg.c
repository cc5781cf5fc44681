/* Linear algebra primitives: matmul and addmm on operands of rank >= 2 (the
 * ops reshape 1-d operands). Leading (batch) axes broadcast; the inputs may
 * have different dtypes (the kernel converts while staging for BLAS); the
 * output has their promoted type, which must be a float type. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/linalg.h"
#include "prim/prims.h"

/* Output dtype and shape of a @ b, with errors naming `op`. */
static wf_status infer_product(const char *op, const wf_desc *a, const wf_desc *b,
                               wf_out_desc *out)
{
    if (a->ndim < 2 || b->ndim < 2)
        return wf__error(WF_ERR_SHAPE, "%s: operands of rank %d and %d (the primitive needs 2+)",
                         op, a->ndim, b->ndim);
    const wf_dtype dt = wf_promote_types(a->dtype, b->dtype);
    if (!wf__dtype_is_float(dt) && !(dt == WF_DTYPE_C64 && strcmp(op, "wf_matmul") == 0))
        return wf__error(WF_ERR_DTYPE, "%s: dtypes %s and %s (needs a float type)", op,
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    if (a->shape[a->ndim - 1] != b->shape[b->ndim - 2]) {
        char sa[256], sb[256];
        return wf__error(WF_ERR_SHAPE, "%s: inner dimensions differ (%s @ %s)", op,
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(b->shape, b->ndim, sb, sizeof sb));
    }
    int nb = 0;
    wf_status st = wf__broadcast_shapes(op, a->shape, a->ndim - 2, b->shape, b->ndim - 2,
                                        out->shape, &nb);
    if (st != WF_OK)
        return st;
    out->shape[nb] = a->shape[a->ndim - 2];
    out->shape[nb + 1] = b->shape[b->ndim - 1];
    out->ndim = nb + 2;
    out->dtype = dt;
    return WF_OK;
}

static wf_status infer_matmul(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    (void)params;
    if (ninputs != 2)
        return wf__error(WF_ERR_INTERNAL, "matmul: expected 2 inputs, got %d", ninputs);
    return infer_product("wf_matmul", &inputs[0], &inputs[1], out);
}

const wf_prim_def wf__prim_matmul = {
    .name = "matmul",
    .flags = 0,
    .params_size = 0,
    .infer = infer_matmul,
    .kernels = &(wf_kernel_slots){{0}},
};

/* c must already have the product's shape (the op broadcasts it). */
static wf_status infer_addmm(const void *params, const wf_desc *inputs, int ninputs,
                             wf_out_desc *out)
{
    (void)params;
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "addmm: expected 3 inputs, got %d", ninputs);
    wf_status st = infer_product("wf_addmm", &inputs[0], &inputs[1], out);
    if (st != WF_OK)
        return st;
    const wf_desc *c = &inputs[2];
    if (!wf__shape_equal(c->shape, c->ndim, out->shape, out->ndim)) {
        char sc[256], sp[256];
        return wf__error(WF_ERR_SHAPE, "wf_addmm: c has shape %s, the product %s",
                         wf__shape_str(c->shape, c->ndim, sc, sizeof sc),
                         wf__shape_str(out->shape, out->ndim, sp, sizeof sp));
    }
    out->dtype = wf_promote_types(out->dtype, c->dtype);
    if (!wf__dtype_is_float(out->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_addmm: dtype %s of c", wf_dtype_name(c->dtype));
    return WF_OK;
}

const wf_prim_def wf__prim_addmm = {
    .name = "addmm",
    .flags = 0,
    .params_size = sizeof(wf_addmm_params),
    .infer = infer_addmm,
    .kernels = &(wf_kernel_slots){{0}},
};
