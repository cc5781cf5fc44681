/* Unary element-wise ops (wf_exp is in elementwise.c).
 *
 * Dtype rules (MLX-like):
 *  - float-valued functions (expm1, log, sqrt, sin, sigmoid, erf, ...) on
 *    integer or bool inputs compute in float32 (the input is cast first);
 *    f16/bf16 compute in float32 and round back to their dtype;
 *  - negative, abs, sign, square keep integer dtypes (integers wrap around:
 *    negative/abs of the minimum give the minimum); negative of bool is
 *    WF_ERR_DTYPE (as in NumPy; use wf_logical_not), while abs, sign and
 *    square of bool keep bool and return the same values (|b| = sign(b) =
 *    b*b = b);
 *  - sign of a float gives -1, 1, NaN for NaN, and keeps +-0;
 *  - floor, ceil, round return integer and bool inputs unchanged (the same
 *    array, a new reference); round is half to even;
 *  - logical_not, isnan, isinf, isfinite give bool (logical_not: true where
 *    the value is 0, so NaN counts as true-valued; integers are never NaN or
 *    inf and always finite);
 *  - stop_gradient is an identity primitive of its own (a view, no copy). */
#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/shape.h"
#include "prim/unary.h"

/* Float-valued functions: integer/bool inputs are cast to float32. */
static wf_array *float_op(const char *op, const wf_prim_def *prim, wf_array *a)
{
    if (!wf__array_check(a, op, "a") || wf__reject_complex(op, a->dtype) != WF_OK)
        return NULL;
    if (wf__dtype_is_float(a->dtype))
        return wf__node_new(prim, NULL, &a, 1);
    wf_array *x = wf__op_astype(a, WF_DTYPE_F32);
    if (!x)
        return NULL;
    wf_array *out = wf__node_new(prim, NULL, &x, 1);
    wf__array_release(x);
    return out;
}

/* The same for the functions with a complex64 kernel too (every one MLX
 * defines on complex: exp, log, sqrt, the trigonometric and hyperbolic
 * functions and their inverses, log1p, log2, rsqrt, reciprocal (MLX
 * rejects expm1, sigmoid, erf, erfinv for complex; so does weft):
 * C99's cexpf ... on each element). */
static wf_array *float_or_complex_op(const char *op, const wf_prim_def *prim, wf_array *a)
{
    if (a && wf__array_check(a, op, "a") && a->dtype == WF_DTYPE_C64)
        return wf__node_new(prim, NULL, &a, 1);
    return float_op(op, prim, a);
}

/* Ops on every dtype (the primitive decides the output dtype). */
static wf_array *plain_op(const char *op, const wf_prim_def *prim, wf_array *a)
{
    if (!wf__array_check(a, op, "a") || wf__reject_complex(op, a->dtype) != WF_OK)
        return NULL;
    return wf__node_new(prim, NULL, &a, 1);
}

/* Rounding: integers are already integral. */
static wf_array *rounding_op(const char *op, const wf_prim_def *prim, wf_array *a)
{
    if (!wf__array_check(a, op, "a") || wf__reject_complex(op, a->dtype) != WF_OK)
        return NULL;
    if (!wf__dtype_is_float(a->dtype))
        return wf__same_value(a);
    return wf__node_new(prim, NULL, &a, 1);
}

wf_array *wf__op_negative(wf_array *a)
{
    if (!wf__array_check(a, "wf_negative", "a"))
        return NULL;
    if (a->dtype == WF_DTYPE_BOOL) {
        wf__error(WF_ERR_DTYPE,
                  "wf_negative: bool arrays cannot be negated (use wf_logical_not)");
        return NULL;
    }
    return wf__node_new(&wf__prim_negative, NULL, &a, 1);
}

/* |z| of a complex64 is its float32 magnitude. */
wf_array *wf__op_abs(wf_array *a)
{
    if (!wf__array_check(a, "wf_abs", "a"))
        return NULL;
    return wf__node_new(&wf__prim_abs, NULL, &a, 1);
}
/* complex64 too: sign(z) = z / |z| (0 for 0, as MLX), square(z) = z * z. */
wf_array *wf__op_sign(wf_array *a)
{
    if (!wf__array_check(a, "wf_sign", "a"))
        return NULL;
    return wf__node_new(&wf__prim_sign, NULL, &a, 1);
}
wf_array *wf__op_square(wf_array *a)
{
    if (!wf__array_check(a, "wf_square", "a"))
        return NULL;
    return wf__node_new(&wf__prim_square, NULL, &a, 1);
}

/* The internal builder and the public op of one float-valued function. */
#define FLOAT_OP(name)                                                                      \
    wf_array *wf__op_##name(wf_array *a) { return float_op("wf_" #name, &wf__prim_##name, a); } \
    wf_array *wf_##name(wf_array *a) { return wf__array_publish(wf__op_##name(a)); }
#define FLOAT_COMPLEX_OP(name)                                                              \
    wf_array *wf__op_##name(wf_array *a)                                                    \
    {                                                                                       \
        return float_or_complex_op("wf_" #name, &wf__prim_##name, a);                       \
    }                                                                                       \
    wf_array *wf_##name(wf_array *a) { return wf__array_publish(wf__op_##name(a)); }
FLOAT_OP(expm1)
FLOAT_COMPLEX_OP(log)
FLOAT_COMPLEX_OP(log1p)
FLOAT_COMPLEX_OP(log2)
FLOAT_COMPLEX_OP(sqrt)
FLOAT_COMPLEX_OP(rsqrt)
FLOAT_COMPLEX_OP(reciprocal)
FLOAT_COMPLEX_OP(sin)
FLOAT_COMPLEX_OP(cos)
FLOAT_COMPLEX_OP(tan)
FLOAT_COMPLEX_OP(tanh)
FLOAT_COMPLEX_OP(sinh)
FLOAT_COMPLEX_OP(cosh)
FLOAT_COMPLEX_OP(arcsin)
FLOAT_COMPLEX_OP(arccos)
FLOAT_COMPLEX_OP(arctan)
FLOAT_OP(sigmoid)
FLOAT_OP(erf)
FLOAT_OP(erfinv)

wf_array *wf__op_floor(wf_array *a) { return rounding_op("wf_floor", &wf__prim_floor, a); }
wf_array *wf__op_ceil(wf_array *a) { return rounding_op("wf_ceil", &wf__prim_ceil, a); }
wf_array *wf__op_round(wf_array *a) { return rounding_op("wf_round", &wf__prim_round, a); }

wf_array *wf__op_logical_not(wf_array *a)
{
    return plain_op("wf_logical_not", &wf__prim_logical_not, a);
}
/* A predicate of a complex64 from its parts: f(re) OP f(im). */
static wf_array *complex_predicate(wf_array *a, wf_array *(*f)(wf_array *), bool both)
{
    wf_array *re = wf__op_real(a), *im = wf__op_imag(a);
    wf_array *pr = re ? f(re) : NULL, *pi = im ? f(im) : NULL;
    wf_array *out = pr && pi ? (both ? wf__op_logical_and(pr, pi) : wf__op_logical_or(pr, pi))
                             : NULL;
    wf__array_release(re);
    wf__array_release(im);
    wf__array_release(pr);
    wf__array_release(pi);
    return out;
}

/* complex64: NaN or inf if either part is (NumPy), finite if both are. */
wf_array *wf__op_isnan(wf_array *a)
{
    if (a && wf__array_check(a, "wf_isnan", "a") && a->dtype == WF_DTYPE_C64)
        return complex_predicate(a, wf__op_isnan, false);
    return plain_op("wf_isnan", &wf__prim_isnan, a);
}
wf_array *wf__op_isinf(wf_array *a)
{
    if (a && wf__array_check(a, "wf_isinf", "a") && a->dtype == WF_DTYPE_C64)
        return complex_predicate(a, wf__op_isinf, false);
    return plain_op("wf_isinf", &wf__prim_isinf, a);
}
wf_array *wf__op_isfinite(wf_array *a)
{
    if (a && wf__array_check(a, "wf_isfinite", "a") && a->dtype == WF_DTYPE_C64)
        return complex_predicate(a, wf__op_isfinite, true);
    return plain_op("wf_isfinite", &wf__prim_isfinite, a);
}

/* Any dtype, complex64 included (a view). */
wf_array *wf__op_stop_gradient(wf_array *a)
{
    if (!wf__array_check(a, "wf_stop_gradient", "a"))
        return NULL;
    return wf__node_new(&wf__prim_stop_gradient, NULL, &a, 1);
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_negative(wf_array *a) { return wf__array_publish(wf__op_negative(a)); }
wf_array *wf_abs(wf_array *a) { return wf__array_publish(wf__op_abs(a)); }
wf_array *wf_sign(wf_array *a) { return wf__array_publish(wf__op_sign(a)); }
wf_array *wf_square(wf_array *a) { return wf__array_publish(wf__op_square(a)); }
wf_array *wf_floor(wf_array *a) { return wf__array_publish(wf__op_floor(a)); }
wf_array *wf_ceil(wf_array *a) { return wf__array_publish(wf__op_ceil(a)); }
wf_array *wf_round(wf_array *a) { return wf__array_publish(wf__op_round(a)); }
wf_array *wf_logical_not(wf_array *a) { return wf__array_publish(wf__op_logical_not(a)); }
wf_array *wf_isnan(wf_array *a) { return wf__array_publish(wf__op_isnan(a)); }
wf_array *wf_isinf(wf_array *a) { return wf__array_publish(wf__op_isinf(a)); }
wf_array *wf_isfinite(wf_array *a) { return wf__array_publish(wf__op_isfinite(a)); }
wf_array *wf_stop_gradient(wf_array *a) { return wf__array_publish(wf__op_stop_gradient(a)); }
