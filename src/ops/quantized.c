/* Quantization ops: wf_quantize, wf_dequantize, wf_quantized_matmul and
 * wf_gather_qmm (composed of takes and a quantized_matmul). The primitives
 * compute in float32; half-precision operands are converted around them. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/quantized.h"

static wf_quant_params quant_params(int group_size, int bits, int output, bool transpose,
                                    wf_quant_mode mode)
{
    wf_quant_params p;
    memset(&p, 0, sizeof p);
    p.group_size = group_size;
    p.bits = bits;
    p.output = output;
    p.transpose = transpose;
    p.mode = (int)mode;
    return p;
}

/* Biases are given in the affine mode and only there. */
static bool check_biases(const char *op, wf_quant_mode mode, wf_array *biases)
{
    if (mode == WF_QUANT_AFFINE)
        return wf__array_check(biases, op, "biases");
    if (biases) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: biases must be NULL in a floating-point "
                                           "quantization mode",
                  op);
        return false;
    }
    return true;
}

wf_status wf_quantize(wf_array *w, int group_size, int bits, wf_quant_mode mode,
                      wf_array **codes, wf_array **scales, wf_array **biases)
{
    const char *op = "wf_quantize";
    if (!codes || !scales || !biases)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: NULL output pointer", op);
    *codes = *scales = *biases = NULL;
    if (!wf__array_check(w, op, "w"))
        return wf_last_error();
    if (wf__quant_check_params(op, (int)mode, group_size, bits) != WF_OK)
        return wf_last_error();
    const int nout = mode == WF_QUANT_AFFINE ? 3 : 2;
    wf_array *out[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nout; i++) {
        wf_quant_params p = quant_params(group_size, bits, i, false, mode);
        out[i] = wf__node_new(&wf__prim_quantize, &p, &w, 1);
        if (!out[i]) {
            for (int j = 0; j < i; j++)
                wf__array_release(out[j]);
            return wf_last_error();
        }
    }
    wf_array **dst[3] = {codes, scales, biases};
    return wf__array_publish_all(out, dst, nout);
}

wf_array *wf_dequantize_as(wf_array *codes, wf_array *scales, wf_array *biases, int group_size,
                           int bits, wf_quant_mode mode, wf_dtype dtype)
{
    const char *op = "wf_dequantize";
    if (!wf__array_check(codes, op, "codes") || !wf__array_check(scales, op, "scales") ||
        !check_biases(op, mode, biases))
        return NULL;
    if (dtype != WF_DTYPE_COUNT && dtype != WF_DTYPE_F16 && dtype != WF_DTYPE_BF16 &&
        dtype != WF_DTYPE_F32) {
        wf__error(WF_ERR_DTYPE, "%s: the result must be float16, bfloat16 or float32, not %s", op,
                  (unsigned)dtype < WF_DTYPE_COUNT ? wf_dtype_name(dtype) : "unknown");
        return NULL;
    }
    wf_quant_params p = quant_params(group_size, bits, 0, false, mode);
    if (mode != WF_QUANT_AFFINE) {
        p.dtype = (int)(dtype == WF_DTYPE_COUNT ? WF_DTYPE_BF16 : dtype);
        wf_array *inputs[2] = {codes, scales};
        return wf__array_publish(wf__node_new(&wf__prim_dequantize, &p, inputs, 2));
    }
    wf_array *inputs[3] = {codes, scales, biases};
    wf_array *out = wf__node_new(&wf__prim_dequantize, &p, inputs, 3);
    if (out && dtype != WF_DTYPE_COUNT && dtype != out->dtype) {
        wf_array *cast = wf__op_astype(out, dtype);
        wf__array_release(out);
        out = cast;
    }
    return wf__array_publish(out);
}

wf_array *wf_dequantize(wf_array *codes, wf_array *scales, wf_array *biases, int group_size,
                        int bits, wf_quant_mode mode)
{
    return wf_dequantize_as(codes, scales, biases, group_size, bits, mode, WF_DTYPE_COUNT);
}

/* The broadcast of two batch shapes (NumPy rules) into out; *nout its rank. */
static wf_status broadcast_batch(const char *op, const int64_t *a, int na, const int64_t *b,
                                 int nb, int64_t *out, int *nout)
{
    const int n = na > nb ? na : nb;
    for (int d = 0; d < n; d++) {
        const int64_t da = d < n - na ? 1 : a[d - (n - na)];
        const int64_t db = d < n - nb ? 1 : b[d - (n - nb)];
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return wf__error(WF_ERR_SHAPE, "%s: batch shapes %s and %s do not broadcast", op,
                             wf__shape_str(a, na, sa, sizeof sa), wf__shape_str(b, nb, sb, sizeof sb));
        }
        out[d] = da == 1 ? db : da;
    }
    *nout = n;
    return WF_OK;
}

/* a with leading axes broadcast to `batch` (its last two axes kept). */
static wf_array *to_batch(wf_array *a, const int64_t *batch, int nbatch)
{
    int64_t shape[WF_MAX_NDIM];
    wf__shape_copy(shape, batch, nbatch);
    shape[nbatch] = a->shape[a->ndim - 2];
    shape[nbatch + 1] = a->shape[a->ndim - 1];
    return wf__op_broadcast_to(a, shape, nbatch + 2);
}

static wf_array *as_f32(wf_array *a)
{
    return a->dtype == WF_DTYPE_F32 ? wf__array_incref(a) : wf__op_astype(a, WF_DTYPE_F32);
}

/* quantized_matmul's internal builder; the operands are checked non-NULL
 * (biases NULL in a floating-point mode). */
static wf_array *qmm(const char *op, wf_array *x, wf_array *w, wf_array *scales,
                     wf_array *biases, bool transpose, int group_size, int bits,
                     wf_quant_mode mode)
{
    const wf_dtype dtype = mode == WF_QUANT_AFFINE ? wf_promote_types(x->dtype, scales->dtype)
                                                   : x->dtype;
    if (dtype != WF_DTYPE_F32 && dtype != WF_DTYPE_F16 && dtype != WF_DTYPE_BF16) {
        wf__error(WF_ERR_DTYPE, "%s: x (%s) and scales (%s) must promote to float16, bfloat16 "
                                "or float32",
                  op, wf_dtype_name(x->dtype), wf_dtype_name(scales->dtype));
        return NULL;
    }
    if (w->ndim < 2 || x->ndim < 1 || scales->ndim != w->ndim ||
        (biases && biases->ndim != w->ndim)) {
        wf__error(WF_ERR_SHAPE, "%s: w must be at least 2-d (got %d), x at least 1-d, scales "
                                "and biases of w's rank",
                  op, w->ndim);
        return NULL;
    }
    const int n = biases ? 4 : 3; /* x and the matrix's inputs */
    wf_array *in[4] = {NULL, NULL, NULL, NULL};
    wf_array *src[4] = {x, w, scales, biases};
    int64_t batch[WF_MAX_NDIM];
    int nbatch = 0;
    bool ok = true;
    if (w->ndim > 2) {
        if (x->ndim < 2) {
            wf__error(WF_ERR_SHAPE, "%s: x must be at least 2-d with a batched w", op);
            return NULL;
        }
        ok = broadcast_batch(op, x->shape, x->ndim - 2, w->shape, w->ndim - 2, batch, &nbatch) ==
             WF_OK;
        for (int i = 0; ok && i < n; i++)
            ok = (in[i] = to_batch(src[i], batch, nbatch)) != NULL;
    } else {
        for (int i = 0; i < n; i++)
            in[i] = wf__array_incref(src[i]);
    }
    wf_array *out = NULL;
    if (ok) {
        const bool affine = mode == WF_QUANT_AFFINE;
        wf_array *f[4] = {as_f32(in[0]), wf__array_incref(in[1]),
                          affine ? as_f32(in[2]) : wf__array_incref(in[2]),
                          affine ? as_f32(in[3]) : NULL};
        if (f[0] && f[2] && (!affine || f[3])) {
            wf_quant_params p = quant_params(group_size, bits, 0, transpose, mode);
            out = wf__node_new(&wf__prim_quantized_matmul, &p, f, n);
        }
        for (int i = 0; i < 4; i++)
            wf__array_release(f[i]);
    }
    for (int i = 0; i < 4; i++)
        wf__array_release(in[i]);
    if (out && dtype != WF_DTYPE_F32) {
        wf_array *cast = wf__op_astype(out, dtype);
        wf__array_release(out);
        out = cast;
    }
    return out;
}

wf_array *wf_quantized_matmul_mode(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                                   bool transpose, int group_size, int bits, wf_quant_mode mode)
{
    const char *op = "wf_quantized_matmul";
    if (!wf__array_check(x, op, "x") || !wf__array_check(w, op, "w") ||
        !wf__array_check(scales, op, "scales") || !check_biases(op, mode, biases))
        return NULL;
    return wf__array_publish(qmm(op, x, w, scales, biases, transpose, group_size, bits, mode));
}

wf_array *wf_quantized_matmul(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                              bool transpose, int group_size, int bits)
{
    return wf_quantized_matmul_mode(x, w, scales, biases, transpose, group_size, bits,
                                    WF_QUANT_AFFINE);
}

/* a (rank >= 2) with its leading axes flattened into one: (B, r, c), by
 * ops that follow a's shape in a shapeless compiled replay. */
static wf_array *flatten_batch(wf_array *a)
{
    if (a->ndim == 2) {
        const int front = 0;
        return wf__op_expand_dims(a, &front, 1);
    }
    if (a->ndim == 3)
        return wf__array_incref(a);
    return wf__op_flatten(a, 0, a->ndim - 3);
}

/* `indices` (integers) or, when NULL, arange over a's batch in its shape. */
static wf_array *batch_indices(const char *op, wf_array *indices, const wf_array *a)
{
    if (indices) {
        if (!wf__dtype_is_integer(indices->dtype)) {
            wf__error(WF_ERR_DTYPE, "%s: indices must be integers, got %s", op,
                      wf_dtype_name(indices->dtype));
            return NULL;
        }
        return wf__array_incref(indices);
    }
    int64_t b = 1;
    for (int d = 0; d < a->ndim - 2; d++)
        b *= a->shape[d];
    wf_array *r = wf__op_arange(0, (double)b, 1, WF_DTYPE_I32);
    wf_array *out = r ? wf__op_reshape(r, a->shape, a->ndim - 2) : NULL;
    wf__array_release(r);
    return out;
}

/* An index array flattened to (count) int32. */
static wf_array *flat_indices(wf_array *idx, const int64_t *shape, int ndim, int64_t count)
{
    wf_array *b = wf__op_broadcast_to(idx, shape, ndim);
    wf_array *f = b ? wf__op_reshape(b, &count, 1) : NULL;
    wf_array *i = f ? wf__op_astype(f, WF_DTYPE_I32) : NULL;
    wf__array_release(b);
    wf__array_release(f);
    return i;
}

/* The gather_qmm node on flattened operands, reshaped to (ishape..., M, N)
 * and cast to the promoted dtype. */
static wf_array *gather_node(const char *op, wf_array *x, wf_array *w, wf_array *scales,
                             wf_array *biases, wf_array *lhs, wf_array *rhs, const int64_t *ishape,
                             int indim, const wf_quant_params *p)
{
    const bool affine = p->mode == WF_QUANT_AFFINE;
    const wf_dtype dtype = affine ? wf_promote_types(x->dtype, scales->dtype) : x->dtype;
    if (dtype != WF_DTYPE_F32 && dtype != WF_DTYPE_F16 && dtype != WF_DTYPE_BF16) {
        wf__error(WF_ERR_DTYPE, "%s: x (%s) and scales (%s) must promote to float16, bfloat16 "
                                "or float32",
                  op, wf_dtype_name(x->dtype), wf_dtype_name(scales->dtype));
        return NULL;
    }
    int64_t count = 1;
    for (int d = 0; d < indim; d++)
        count *= ishape[d];
    wf_array *xf = as_f32(x);
    wf_array *sf = affine ? as_f32(scales) : wf__array_incref(scales);
    wf_array *bf = affine ? as_f32(biases) : NULL;
    /* x, codes, scales[, biases], lhs, rhs */
    wf_array *in[6] = {xf ? flatten_batch(xf) : NULL, flatten_batch(w),
                       sf ? flatten_batch(sf) : NULL, NULL, NULL, NULL};
    int n = 3;
    if (affine)
        in[n++] = bf ? flatten_batch(bf) : NULL;
    in[n++] = flat_indices(lhs, ishape, indim, count);
    in[n++] = flat_indices(rhs, ishape, indim, count);
    bool ok = true;
    for (int i = 0; i < n; i++)
        ok = ok && in[i];
    wf_array *prod = NULL, *out = NULL;
    if (ok)
        prod = wf__node_new(&wf__prim_gather_qmm, p, in, n);
    if (prod) {
        /* (count, M, N) to (ishape..., M, N); M and N follow the operands. */
        const int front = 0;
        wf_array *shaped = indim == 0 ? wf__op_squeeze(prod, &front, 1)
                                      : wf__op_unflatten(prod, 0, ishape, indim);
        out = shaped && dtype != WF_DTYPE_F32 ? wf__op_astype(shaped, dtype) : wf__array_incref(shaped);
        wf__array_release(shaped);
    }
    wf_array *tmp[] = {xf, sf, bf, in[0], in[1], in[2], in[3], in[4], in[5], prod};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++)
        wf__array_release(tmp[i]);
    return out;
}

wf_array *wf_gather_qmm_mode(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                             wf_array *lhs_indices, wf_array *rhs_indices, bool transpose,
                             int group_size, int bits, wf_quant_mode mode)
{
    const char *op = "wf_gather_qmm";
    if (!wf__array_check(x, op, "x") || !wf__array_check(w, op, "w") ||
        !wf__array_check(scales, op, "scales") || !check_biases(op, mode, biases))
        return NULL;
    /* before any use: a released index array must not be revived by a new reference */
    if ((lhs_indices && !wf__array_check(lhs_indices, op, "lhs_indices")) ||
        (rhs_indices && !wf__array_check(rhs_indices, op, "rhs_indices")))
        return NULL;
    if (!lhs_indices && !rhs_indices)
        return wf_quantized_matmul_mode(x, w, scales, biases, transpose, group_size, bits, mode);
    if (x->ndim < 2 || w->ndim < 2 || scales->ndim != w->ndim ||
        (biases && biases->ndim != w->ndim)) {
        wf__error(WF_ERR_SHAPE, "%s: x and w must be at least 2-d, scales and biases of w's rank",
                  op);
        return NULL;
    }
    wf_array *lhs = batch_indices(op, lhs_indices, x);
    wf_array *rhs = lhs ? batch_indices(op, rhs_indices, w) : NULL;
    wf_array *out = NULL;
    int64_t ishape[WF_MAX_NDIM];
    int indim = 0;
    if (rhs && broadcast_batch(op, lhs->shape, lhs->ndim, rhs->shape, rhs->ndim, ishape, &indim) ==
                   WF_OK) {
        if (indim + 2 > WF_MAX_NDIM) {
            wf__error(WF_ERR_SHAPE, "%s: the result would have more than %d dimensions", op,
                      WF_MAX_NDIM);
        } else {
            wf_quant_params p = quant_params(group_size, bits, 0, transpose, mode);
            out = gather_node(op, x, w, scales, biases, lhs, rhs, ishape, indim, &p);
        }
    }
    wf__array_release(lhs);
    wf__array_release(rhs);
    return wf__array_publish(out);
}

wf_array *wf_gather_qmm(wf_array *x, wf_array *w, wf_array *scales, wf_array *biases,
                        wf_array *lhs_indices, wf_array *rhs_indices, bool transpose,
                        int group_size, int bits)
{
    return wf_gather_qmm_mode(x, w, scales, biases, lhs_indices, rhs_indices, transpose,
                              group_size, bits, WF_QUANT_AFFINE);
}
