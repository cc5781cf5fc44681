/* Element-wise ops: wf_astype, wf_exp, and the binary and ternary ops
 * (wf_add ... wf_arctan2, wf_where, wf_clip).
 *
 * Binary and ternary ops promote their operands to one compute dtype
 * (wf_astype) and broadcast them to one shape (wf_broadcast_to, a 0-stride
 * view) here, in nary_op, so their kernels see inputs of the output's shape
 * and one dtype. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/binary.h"
#include "prim/prims.h"
#include "prim/shape.h"

wf_array *wf__op_astype(wf_array *a, wf_dtype dtype)
{
    if (!wf__array_check(a, "wf_astype", "a"))
        return NULL;
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_astype: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (a->dtype == dtype)
        return wf__same_value(a);
    wf_astype_params p;
    memset(&p, 0, sizeof p);
    p.dtype = dtype;
    return wf__node_new(&wf__prim_astype, &p, &a, 1);
}

/* Casts and broadcasts `x` to (dtype, shape). *owned receives the new
 * reference when one was made (released by the caller), else NULL. */
static wf_array *conform(wf_array *x, wf_dtype dtype, const int64_t *shape, int ndim,
                         wf_array **owned)
{
    *owned = NULL;
    if (x->dtype != dtype) {
        x = wf__op_astype(x, dtype);
        if (!x)
            return NULL;
        *owned = x;
    }
    if (!wf__shape_equal(x->shape, x->ndim, shape, ndim)) {
        wf_array *b = wf__op_implicit_broadcast(x, shape, ndim);
        wf__array_release(*owned);
        *owned = b;
        x = b;
    }
    return x;
}

enum { MAX_OPERANDS = 3 };

/* The shared path of every binary and ternary op: broadcasts the n inputs
 * (already checked non-NULL) together, conforms input i to dtypes[i], and
 * builds the node. */
static wf_array *nary_op(const char *op, const wf_prim_def *prim, wf_array *const *in, int n,
                         const wf_dtype *dtypes)
{
    int64_t shape[WF_MAX_NDIM];
    int ndim = in[0]->ndim;
    wf__shape_copy(shape, in[0]->shape, ndim);
    for (int i = 1; i < n; i++) {
        int64_t next[WF_MAX_NDIM];
        int nnext;
        if (wf__broadcast_shapes(op, shape, ndim, in[i]->shape, in[i]->ndim, next, &nnext) !=
            WF_OK)
            return NULL;
        wf__shape_copy(shape, next, nnext);
        ndim = nnext;
    }
    wf_array *owned[MAX_OPERANDS] = {NULL, NULL, NULL};
    wf_array *conformed[MAX_OPERANDS];
    wf_array *out = NULL;
    int i = 0;
    for (; i < n; i++) {
        conformed[i] = conform(in[i], dtypes[i], shape, ndim, &owned[i]);
        if (!conformed[i])
            break;
    }
    if (i == n)
        out = wf__node_new(prim, NULL, conformed, n);
    for (int k = 0; k < n; k++)
        wf__array_release(owned[k]);
    return out;
}

/* How a binary op picks its compute dtype from the promoted one. */
enum compute_rule {
    RULE_PROMOTE,         /* the promoted dtype */
    RULE_PROMOTE_NO_BOOL, /* the promoted dtype; bool is an error */
    RULE_FLOAT,           /* the promoted dtype if a float (or complex) type, else float32 */
    RULE_BOOL,            /* bool (inputs converted: value != 0) */
    RULE_INTEGER          /* the promoted dtype, which must be bool or an integer */
};

static wf_array *binary_op(const char *op, const wf_prim_def *prim, wf_array *a, wf_array *b,
                           enum compute_rule rule)
{
    if (!wf__array_check(a, op, "a") || !wf__array_check(b, op, "b"))
        return NULL;
    wf_dtype dtype = wf_promote_types(a->dtype, b->dtype);
    switch (rule) {
    case RULE_PROMOTE: break;
    case RULE_PROMOTE_NO_BOOL:
        if (dtype == WF_DTYPE_BOOL) {
            wf__error(WF_ERR_DTYPE,
                      "%s: bool inputs are not supported (for a bool difference use "
                      "wf_not_equal)",
                      op);
            return NULL;
        }
        break;
    case RULE_FLOAT:
        if (!wf__dtype_is_float(dtype) && !wf__dtype_is_complex(dtype))
            dtype = WF_DTYPE_F32;
        break;
    case RULE_BOOL: dtype = WF_DTYPE_BOOL; break;
    case RULE_INTEGER:
        if (dtype != WF_DTYPE_BOOL && !wf__dtype_is_integer(dtype)) {
            wf__error(WF_ERR_DTYPE,
                      "%s: needs bool or integer inputs, got %s and %s (they promote to %s)",
                      op, wf_dtype_name(a->dtype), wf_dtype_name(b->dtype),
                      wf_dtype_name(dtype));
            return NULL;
        }
        break;
    }
    wf_array *in[2] = {a, b};
    const wf_dtype dtypes[2] = {dtype, dtype};
    return nary_op(op, prim, in, 2, dtypes);
}

wf_array *wf__op_add(wf_array *a, wf_array *b)
{
    return binary_op("wf_add", &wf__prim_add, a, b, RULE_PROMOTE);
}

wf_array *wf__op_multiply(wf_array *a, wf_array *b)
{
    return binary_op("wf_multiply", &wf__prim_multiply, a, b, RULE_PROMOTE);
}

/* Bool subtract is an error, as in NumPy. */
wf_array *wf__op_subtract(wf_array *a, wf_array *b)
{
    return binary_op("wf_subtract", &wf__prim_subtract, a, b, RULE_PROMOTE_NO_BOOL);
}

/* True division: bool and integer inputs compute in float32. */
wf_array *wf__op_divide(wf_array *a, wf_array *b)
{
    return binary_op("wf_divide", &wf__prim_divide, a, b, RULE_FLOAT);
}

/* Integers: exact power by repeated squaring, wrapping; a negative exponent
 * gives 0 except for bases 1 and -1 (see backend/cpu/binary.c). */
wf_array *wf__op_power(wf_array *a, wf_array *b)
{
    return binary_op("wf_power", &wf__prim_power, a, b, RULE_PROMOTE);
}

/* NaN propagates (NumPy maximum / minimum, not fmax / fmin). */
wf_array *wf__op_maximum(wf_array *a, wf_array *b)
{
    return binary_op("wf_maximum", &wf__prim_maximum, a, b, RULE_PROMOTE);
}

wf_array *wf__op_minimum(wf_array *a, wf_array *b)
{
    return binary_op("wf_minimum", &wf__prim_minimum, a, b, RULE_PROMOTE);
}

/* Python semantics (quotient rounds toward -inf, remainder has the divisor's
 * sign). Integer division by zero gives 0 for both; float division by zero
 * gives IEEE results (floor_divide: a / 0, remainder: NaN). */
wf_array *wf__op_floor_divide(wf_array *a, wf_array *b)
{
    return binary_op("wf_floor_divide", &wf__prim_floor_divide, a, b, RULE_PROMOTE);
}

wf_array *wf__op_remainder(wf_array *a, wf_array *b)
{
    return binary_op("wf_remainder", &wf__prim_remainder, a, b, RULE_PROMOTE);
}

/* Comparisons compare in the promoted dtype and give bool. */
wf_array *wf__op_equal(wf_array *a, wf_array *b)
{
    return binary_op("wf_equal", &wf__prim_equal, a, b, RULE_PROMOTE);
}

wf_array *wf__op_not_equal(wf_array *a, wf_array *b)
{
    return binary_op("wf_not_equal", &wf__prim_not_equal, a, b, RULE_PROMOTE);
}

wf_array *wf__op_less(wf_array *a, wf_array *b)
{
    return binary_op("wf_less", &wf__prim_less, a, b, RULE_PROMOTE);
}

wf_array *wf__op_less_equal(wf_array *a, wf_array *b)
{
    return binary_op("wf_less_equal", &wf__prim_less_equal, a, b, RULE_PROMOTE);
}

wf_array *wf__op_greater(wf_array *a, wf_array *b)
{
    return binary_op("wf_greater", &wf__prim_greater, a, b, RULE_PROMOTE);
}

wf_array *wf__op_greater_equal(wf_array *a, wf_array *b)
{
    return binary_op("wf_greater_equal", &wf__prim_greater_equal, a, b, RULE_PROMOTE);
}

wf_array *wf__op_logical_and(wf_array *a, wf_array *b)
{
    return binary_op("wf_logical_and", &wf__prim_logical_and, a, b, RULE_BOOL);
}

wf_array *wf__op_logical_or(wf_array *a, wf_array *b)
{
    return binary_op("wf_logical_or", &wf__prim_logical_or, a, b, RULE_BOOL);
}

/* Float results; bool and integer inputs compute in float32. */
/* complex64 (MLX): hi + log1p(exp(lo - hi)) with hi the operand of the
 * larger real part, so exp never overflows where the result is finite. */
static wf_array *complex_logaddexp(wf_array *a, wf_array *b)
{
    wf_array *ra = wf__op_real(a), *rb = wf__op_real(b);
    wf_array *a_high = ra && rb ? wf__op_greater_equal(ra, rb) : NULL;
    wf_array *hi = a_high ? wf__op_where(a_high, a, b) : NULL;
    wf_array *lo = a_high ? wf__op_where(a_high, b, a) : NULL;
    wf_array *d = hi && lo ? wf__op_subtract(lo, hi) : NULL;
    wf_array *e = d ? wf__op_exp(d) : NULL;
    wf_array *l = e ? wf__op_log1p(e) : NULL;
    wf_array *out = l ? wf__op_add(hi, l) : NULL;
    wf_array *temps[] = {ra, rb, a_high, hi, lo, d, e, l};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++)
        wf__array_release(temps[i]);
    return out;
}

wf_array *wf__op_logaddexp(wf_array *a, wf_array *b)
{
    if (a && b && wf__array_check(a, "wf_logaddexp", "a") &&
        wf__array_check(b, "wf_logaddexp", "b") &&
        wf_promote_types(a->dtype, b->dtype) == WF_DTYPE_C64) {
        wf_array *ca = wf__op_astype(a, WF_DTYPE_C64), *cb = wf__op_astype(b, WF_DTYPE_C64);
        wf_array *out = ca && cb ? complex_logaddexp(ca, cb) : NULL;
        wf__array_release(ca);
        wf__array_release(cb);
        return out;
    }
    return binary_op("wf_logaddexp", &wf__prim_logaddexp, a, b, RULE_FLOAT);
}

wf_array *wf__op_arctan2(wf_array *a, wf_array *b)
{
    return binary_op("wf_arctan2", &wf__prim_arctan2, a, b, RULE_FLOAT);
}

/* Bitwise ops on bool and integers (promoted; a promotion to a float, as
 * uint64 with a signed type, is an error). Shifts follow NumPy: by the
 * width or more, or by a negative amount, they give 0 (-1 for a right shift
 * of a negative value); signed right shifts are arithmetic. */
wf_array *wf__op_bitwise_and(wf_array *a, wf_array *b)
{
    return binary_op("wf_bitwise_and", &wf__prim_bitwise_and, a, b, RULE_INTEGER);
}

wf_array *wf__op_bitwise_or(wf_array *a, wf_array *b)
{
    return binary_op("wf_bitwise_or", &wf__prim_bitwise_or, a, b, RULE_INTEGER);
}

wf_array *wf__op_bitwise_xor(wf_array *a, wf_array *b)
{
    return binary_op("wf_bitwise_xor", &wf__prim_bitwise_xor, a, b, RULE_INTEGER);
}

wf_array *wf__op_left_shift(wf_array *a, wf_array *b)
{
    return binary_op("wf_left_shift", &wf__prim_left_shift, a, b, RULE_INTEGER);
}

wf_array *wf__op_right_shift(wf_array *a, wf_array *b)
{
    return binary_op("wf_right_shift", &wf__prim_right_shift, a, b, RULE_INTEGER);
}

/* ~a: a xor all ones (bool: not). An all-ones scalar of a's dtype: -1 for
 * signed types, the maximum for unsigned ones (uint64's 2^64 - 1 is not a
 * double, but the conversion saturates to it from 2^64). */
wf_array *wf__op_bitwise_invert(wf_array *a)
{
    if (!wf__array_check(a, "wf_bitwise_invert", "a"))
        return NULL;
    const wf_dtype dt = a->dtype;
    if (dt != WF_DTYPE_BOOL && !wf__dtype_is_integer(dt)) {
        wf__error(WF_ERR_DTYPE, "wf_bitwise_invert: needs a bool or integer input, got %s",
                  wf_dtype_name(dt));
        return NULL;
    }
    const double ones = dt == WF_DTYPE_BOOL            ? 1.0
                        : wf__dtype_is_signed_int(dt) ? -1.0
                                                       : 18446744073709551616.0;
    wf_array *mask = wf__op_full(NULL, 0, ones, dt);
    if (!mask)
        return NULL;
    wf_array *out = wf__op_bitwise_xor(a, mask);
    wf__array_release(mask);
    return out;
}

/* ---- complex64 parts */

/* re + i im: both converted to float32 (complex64's parts; as MLX, which
 * has no complex128), broadcast together. */
wf_array *wf__op_complex(wf_array *re, wf_array *im)
{
    if (!wf__array_check(re, "wf_complex", "re") || !wf__array_check(im, "wf_complex", "im"))
        return NULL;
    if (wf__reject_complex("wf_complex", re->dtype) != WF_OK ||
        wf__reject_complex("wf_complex", im->dtype) != WF_OK)
        return NULL;
    wf_array *in[2] = {re, im};
    const wf_dtype dtypes[2] = {WF_DTYPE_F32, WF_DTYPE_F32};
    return nary_op("wf_complex", &wf__prim_complex, in, 2, dtypes);
}

/* A real input is its own real part and conjugate, with a zero imaginary
 * part of its dtype (as MLX). */
wf_array *wf__op_real(wf_array *a)
{
    if (!wf__array_check(a, "wf_real", "a"))
        return NULL;
    if (a->dtype != WF_DTYPE_C64)
        return wf__same_value(a);
    return wf__node_new(&wf__prim_real, NULL, &a, 1);
}

wf_array *wf__op_imag(wf_array *a)
{
    if (!wf__array_check(a, "wf_imag", "a"))
        return NULL;
    if (a->dtype != WF_DTYPE_C64)
        return wf__op_zeros_like(a);
    return wf__node_new(&wf__prim_imag, NULL, &a, 1);
}

wf_array *wf__op_conjugate(wf_array *a)
{
    if (!wf__array_check(a, "wf_conjugate", "a"))
        return NULL;
    if (a->dtype != WF_DTYPE_C64)
        return wf__same_value(a);
    return wf__node_new(&wf__prim_conjugate, NULL, &a, 1);
}

/* cond is converted to bool; a and b promote; all three broadcast. */
wf_array *wf__op_where(wf_array *cond, wf_array *a, wf_array *b)
{
    if (!wf__array_check(cond, "wf_where", "cond") || !wf__array_check(a, "wf_where", "a") ||
        !wf__array_check(b, "wf_where", "b"))
        return NULL;
    const wf_dtype dtype = wf_promote_types(a->dtype, b->dtype);
    wf_array *in[3] = {cond, a, b};
    const wf_dtype dtypes[3] = {WF_DTYPE_BOOL, dtype, dtype};
    return nary_op("wf_where", &wf__prim_where, in, 3, dtypes);
}

/* With both bounds, one clip node (max then min, NaN propagating, as NumPy);
 * with one, wf_maximum or wf_minimum (as MLX). The three operands promote
 * together and broadcast together. */
wf_array *wf__op_clip(wf_array *a, wf_array *low, wf_array *high)
{
    if (!wf__array_check(a, "wf_clip", "a"))
        return NULL;
    if (!low && !high) {
        wf__null_input("wf_clip", "low and high (at most one bound may be NULL)");
        return NULL;
    }
    if ((low && !wf__array_check(low, "wf_clip", "low")) ||
        (high && !wf__array_check(high, "wf_clip", "high")))
        return NULL;
    if (!high)
        return binary_op("wf_clip", &wf__prim_maximum, a, low, RULE_PROMOTE);
    if (!low)
        return binary_op("wf_clip", &wf__prim_minimum, a, high, RULE_PROMOTE);
    const wf_dtype dtype = wf_promote_types(wf_promote_types(a->dtype, low->dtype), high->dtype);
    if (wf__reject_complex("wf_clip", dtype) != WF_OK) /* complex numbers have no order */
        return NULL;
    wf_array *in[3] = {a, low, high};
    const wf_dtype dtypes[3] = {dtype, dtype, dtype};
    return nary_op("wf_clip", &wf__prim_clip, in, 3, dtypes);
}

wf_array *wf__op_exp(wf_array *a)
{
    if (!wf__array_check(a, "wf_exp", "a"))
        return NULL;
    if (wf__dtype_is_inexact(a->dtype))
        return wf__node_new(&wf__prim_exp, NULL, &a, 1);
    wf_array *x = wf__op_astype(a, WF_DTYPE_F32);
    if (!x)
        return NULL;
    wf_array *out = wf__node_new(&wf__prim_exp, NULL, &x, 1);
    wf__array_release(x);
    return out;
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_astype(wf_array *a, wf_dtype dtype)
{
    return wf__array_publish(wf__op_astype(a, dtype));
}

wf_array *wf_add(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_add(a, b)); }
wf_array *wf_multiply(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_multiply(a, b)); }
wf_array *wf_subtract(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_subtract(a, b)); }
wf_array *wf_divide(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_divide(a, b)); }
wf_array *wf_power(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_power(a, b)); }
wf_array *wf_maximum(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_maximum(a, b)); }
wf_array *wf_minimum(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_minimum(a, b)); }

wf_array *wf_floor_divide(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_floor_divide(a, b));
}

wf_array *wf_remainder(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_remainder(a, b));
}

wf_array *wf_equal(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_equal(a, b)); }

wf_array *wf_not_equal(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_not_equal(a, b));
}

wf_array *wf_less(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_less(a, b)); }

wf_array *wf_less_equal(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_less_equal(a, b));
}

wf_array *wf_greater(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_greater(a, b)); }

wf_array *wf_greater_equal(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_greater_equal(a, b));
}

wf_array *wf_logical_and(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_logical_and(a, b));
}

wf_array *wf_logical_or(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_logical_or(a, b));
}

wf_array *wf_logaddexp(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_logaddexp(a, b));
}

wf_array *wf_arctan2(wf_array *a, wf_array *b) { return wf__array_publish(wf__op_arctan2(a, b)); }

wf_array *wf_bitwise_and(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_bitwise_and(a, b));
}

wf_array *wf_bitwise_or(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_bitwise_or(a, b));
}

wf_array *wf_bitwise_xor(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_bitwise_xor(a, b));
}

wf_array *wf_bitwise_invert(wf_array *a) { return wf__array_publish(wf__op_bitwise_invert(a)); }

wf_array *wf_left_shift(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_left_shift(a, b));
}

wf_array *wf_right_shift(wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_right_shift(a, b));
}

wf_array *wf_complex(wf_array *re, wf_array *im)
{
    return wf__array_publish(wf__op_complex(re, im));
}
wf_array *wf_real(wf_array *a) { return wf__array_publish(wf__op_real(a)); }
wf_array *wf_imag(wf_array *a) { return wf__array_publish(wf__op_imag(a)); }
wf_array *wf_conjugate(wf_array *a) { return wf__array_publish(wf__op_conjugate(a)); }

wf_array *wf_where(wf_array *cond, wf_array *a, wf_array *b)
{
    return wf__array_publish(wf__op_where(cond, a, b));
}

wf_array *wf_clip(wf_array *a, wf_array *low, wf_array *high)
{
    return wf__array_publish(wf__op_clip(a, low, high));
}

wf_array *wf_exp(wf_array *a) { return wf__array_publish(wf__op_exp(a)); }
