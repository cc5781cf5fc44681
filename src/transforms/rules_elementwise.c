/*
 * Rules of the element-wise primitives: unary functions, exp, astype, the
 * binary ops, where, clip, and the element-wise activations (silu, gelu,
 * gelu_tanh).
 *
 * A differentiable unary primitive has a derivative builder (d out / d x,
 * from the input x and output y); its vjp is ct * d and its jvp t * d. A
 * binary one has partial derivatives the same way. Every element-wise
 * primitive batches by running on the batched inputs as they are.
 */
#include <math.h>

#include "core/error.h"
#include "prim/binary.h"
#include "prim/linalg.h"
#include "prim/prims.h"
#include "prim/unary.h"
#include "transforms/rules.h"

/* Shorthands: results belong to the engine's scope. */
static wf_array *num(const wf_array *like, double v) { return wf__rule_scalar(like, v); }
static wf_array *mul(wf_array *a, wf_array *b) { return wf_multiply(a, b); }
static wf_array *add(wf_array *a, wf_array *b) { return wf_add(a, b); }
static wf_array *sub(wf_array *a, wf_array *b) { return wf_subtract(a, b); }
static wf_array *dvd(wf_array *a, wf_array *b) { return wf_divide(a, b); }

/* Input i of a node with several: in a shapeless trace, the source of an
 * implicit broadcast instead of the broadcast, which would fix the traced
 * shape where the source is a constant (a Python scalar's broadcast). The
 * partials built from it broadcast against the cotangent or tangent, which
 * have the node's shape at every call. */
static wf_array *operand(wf_array *node, int i)
{
    wf_array *x = node->inputs[i];
    if (wf__array_is_shapeless(node) && (x->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST))
        return x->inputs[0];
    return x;
}

/* ---------------------------------------------------------------- unary */

typedef wf_array *(*derivative_fn)(wf_array *x, wf_array *y);

static wf_array *d_negative(wf_array *x, wf_array *y) { (void)y; return num(x, -1); }
static wf_array *d_abs(wf_array *x, wf_array *y) { (void)y; return wf_sign(x); }
static wf_array *d_exp(wf_array *x, wf_array *y) { (void)x; return y; }
static wf_array *d_expm1(wf_array *x, wf_array *y) { return add(y, num(x, 1)); }
static wf_array *d_log(wf_array *x, wf_array *y) { (void)y; return wf_reciprocal(x); }
static wf_array *d_log1p(wf_array *x, wf_array *y)
{
    (void)y;
    return wf_reciprocal(add(x, num(x, 1)));
}
static wf_array *d_log2(wf_array *x, wf_array *y)
{
    (void)y;
    return wf_reciprocal(mul(x, num(x, M_LN2)));
}
static wf_array *d_sqrt(wf_array *x, wf_array *y) { return dvd(num(x, 0.5), y); }
/* d x^(-1/2) = -x^(-3/2) / 2 = -y / (2x) */
static wf_array *d_rsqrt(wf_array *x, wf_array *y) { return dvd(mul(y, num(x, -0.5)), x); }
static wf_array *d_square(wf_array *x, wf_array *y) { (void)y; return mul(x, num(x, 2)); }
static wf_array *d_reciprocal(wf_array *x, wf_array *y)
{
    (void)x;
    return wf_negative(wf_square(y));
}
static wf_array *d_sin(wf_array *x, wf_array *y) { (void)y; return wf_cos(x); }
static wf_array *d_cos(wf_array *x, wf_array *y) { (void)y; return wf_negative(wf_sin(x)); }
static wf_array *d_tan(wf_array *x, wf_array *y) { return add(num(x, 1), wf_square(y)); }
static wf_array *d_tanh(wf_array *x, wf_array *y) { return sub(num(x, 1), wf_square(y)); }
static wf_array *d_sinh(wf_array *x, wf_array *y) { (void)y; return wf_cosh(x); }
static wf_array *d_cosh(wf_array *x, wf_array *y) { (void)y; return wf_sinh(x); }
static wf_array *d_arcsin(wf_array *x, wf_array *y)
{
    (void)y;
    return wf_rsqrt(sub(num(x, 1), wf_square(x)));
}
static wf_array *d_arccos(wf_array *x, wf_array *y)
{
    (void)y;
    return wf_negative(wf_rsqrt(sub(num(x, 1), wf_square(x))));
}
static wf_array *d_arctan(wf_array *x, wf_array *y)
{
    (void)y;
    return wf_reciprocal(add(num(x, 1), wf_square(x)));
}
static wf_array *d_sigmoid(wf_array *x, wf_array *y) { return mul(y, sub(num(x, 1), y)); }
/* 2 / sqrt(pi) e^(-x^2) */
static wf_array *d_erf(wf_array *x, wf_array *y)
{
    (void)y;
    return mul(num(x, M_2_SQRTPI), wf_exp(wf_negative(wf_square(x))));
}
/* sqrt(pi) / 2 e^(y^2) */
static wf_array *d_erfinv(wf_array *x, wf_array *y)
{
    return mul(num(x, 1.0 / M_2_SQRTPI), wf_exp(wf_square(y)));
}
/* silu = x s(x): s (1 + x (1 - s)) */
static wf_array *d_silu(wf_array *x, wf_array *y)
{
    (void)y;
    wf_array *s = wf_sigmoid(x);
    return mul(s, add(num(x, 1), mul(x, sub(num(x, 1), s))));
}
/* gelu = x Phi(x): Phi(x) + x phi(x) */
static wf_array *d_gelu(wf_array *x, wf_array *y)
{
    (void)y;
    wf_array *cdf = mul(num(x, 0.5), add(num(x, 1), wf_erf(mul(x, num(x, M_SQRT1_2)))));
    wf_array *pdf = mul(num(x, 0.5 * M_2_SQRTPI * M_SQRT1_2),
                        wf_exp(mul(wf_square(x), num(x, -0.5))));
    return add(cdf, mul(x, pdf));
}
/* gelu_tanh = x/2 (1 + tanh u), u = c (x + k x^3):
 * (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 k x^2) */
static wf_array *d_gelu_tanh(wf_array *x, wf_array *y)
{
    (void)y;
    const double c = 0.7978845608028654, k = 0.044715;
    wf_array *x2 = wf_square(x);
    wf_array *u = mul(num(x, c), add(x, mul(num(x, k), mul(x2, x))));
    wf_array *t = wf_tanh(u);
    wf_array *left = mul(num(x, 0.5), add(num(x, 1), t));
    wf_array *du = mul(num(x, c), add(num(x, 1), mul(num(x, 3 * k), x2)));
    wf_array *right = mul(mul(num(x, 0.5), x), mul(sub(num(x, 1), wf_square(t)), du));
    return add(left, right);
}

static const struct {
    const wf_prim_def *prim;
    derivative_fn derivative;
} unary_derivatives[] = {
    {&wf__prim_negative, d_negative}, {&wf__prim_abs, d_abs},
    {&wf__prim_exp, d_exp},           {&wf__prim_expm1, d_expm1},
    {&wf__prim_log, d_log},           {&wf__prim_log1p, d_log1p},
    {&wf__prim_log2, d_log2},         {&wf__prim_sqrt, d_sqrt},
    {&wf__prim_rsqrt, d_rsqrt},       {&wf__prim_square, d_square},
    {&wf__prim_reciprocal, d_reciprocal}, {&wf__prim_sin, d_sin},
    {&wf__prim_cos, d_cos},           {&wf__prim_tan, d_tan},
    {&wf__prim_tanh, d_tanh},         {&wf__prim_sinh, d_sinh},
    {&wf__prim_cosh, d_cosh},         {&wf__prim_arcsin, d_arcsin},
    {&wf__prim_arccos, d_arccos},     {&wf__prim_arctan, d_arctan},
    {&wf__prim_sigmoid, d_sigmoid},   {&wf__prim_erf, d_erf},
    {&wf__prim_erfinv, d_erfinv},     {&wf__prim_silu, d_silu},
    {&wf__prim_gelu, d_gelu},         {&wf__prim_gelu_tanh, d_gelu_tanh},
};

static wf_array *unary_derivative(wf_array *node)
{
    for (size_t i = 0; i < sizeof unary_derivatives / sizeof unary_derivatives[0]; i++)
        if (unary_derivatives[i].prim == node->prim)
            return unary_derivatives[i].derivative(node->inputs[0], node);
    wf__error(WF_ERR_INTERNAL, "no derivative for '%s'", node->prim->name);
    return NULL;
}

static wf_status vjp_unary(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    cts[0] = mul(ct, unary_derivative(node));
    return wf__rule_result(cts[0]);
}

static wf_status jvp_unary(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = mul(t[0], unary_derivative(node));
    return wf__rule_result(*out);
}

/* |z| of a complex z is not holomorphic: its jvp is Re(conj(sign(z)) t)
 * (for a real x, sign(x) t as for the other unary functions). */
static wf_status jvp_abs(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_array *x = node->inputs[0];
    if (x->dtype != WF_DTYPE_C64)
        return jvp_unary(node, t, out);
    *out = wf_real(mul(wf_conjugate(wf_sign(x)), t[0]));
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- astype */

static wf_status vjp_astype(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    (void)wanted;
    cts[0] = ct; /* the engine casts it back to the input's dtype */
    return WF_OK;
}

static wf_status jvp_astype(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = wf_astype(t[0], node->dtype);
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- binary */

static wf_status vjp_add(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    (void)wanted;
    cts[0] = cts[1] = ct;
    return WF_OK;
}

static wf_status jvp_add(wf_array *node, wf_array *const *t, wf_array **out)
{
    (void)node;
    *out = t[0] && t[1] ? add(t[0], t[1]) : t[0] ? t[0] : t[1];
    return wf__rule_result(*out);
}

/* complex64 parts. real(z) and imag(z) have real outputs, so their rules
 * are written in the adjoint convention (see transforms/vjp.c): real(z)'s
 * cotangent ct goes back as ct + 0i (the engine's cast), imag(z)'s as i ct.
 * conjugate's and complex(re, im)'s outputs are complex: their rules are
 * transposes (ct -> conj(ct); ct -> (real(ct), -imag(ct))), which the
 * engine's adjoint turns into conj(ct) and (real(ct), imag(ct)). */
static wf_status vjp_real(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    (void)wanted;
    cts[0] = ct; /* the engine casts it to complex64: ct + 0i */
    return WF_OK;
}

static wf_status vjp_imag(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    (void)wanted;
    cts[0] = wf_complex(wf_zeros_like(ct), ct);
    return wf__rule_result(cts[0]);
}

static wf_status vjp_conjugate(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    (void)wanted;
    cts[0] = wf_conjugate(ct);
    return wf__rule_result(cts[0]);
}

static wf_status vjp_complex(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    if (wanted[0] && !(cts[0] = wf_real(ct)))
        return wf_last_error();
    if (wanted[1] && !(cts[1] = wf_negative(wf_imag(ct))))
        return wf_last_error();
    return WF_OK;
}

static wf_status vjp_subtract(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)node;
    cts[0] = ct;
    if (wanted[1] && !(cts[1] = wf_negative(ct)))
        return wf_last_error();
    return WF_OK;
}

static wf_status jvp_subtract(wf_array *node, wf_array *const *t, wf_array **out)
{
    (void)node;
    *out = t[0] && t[1] ? sub(t[0], t[1]) : t[0] ? t[0] : wf_negative(t[1]);
    return wf__rule_result(*out);
}

/* 1 where a takes the result, 0 where b does, 1/2 on ties (the subgradient
 * split evenly, as JAX). `a_wins` is a > b for maximum, a < b for minimum. */
static wf_array *pick_weight(wf_array *a, wf_array *b, wf_array *a_wins)
{
    return wf_where(a_wins, num(a, 1), wf_where(wf_equal(a, b), num(a, 0.5), num(a, 0)));
}

/* Partial derivatives of a binary primitive: *da and *db (in the output's
 * shape), from the inputs a, b and the output y. */
static void binary_partials(wf_array *node, wf_array **da, wf_array **db)
{
    wf_array *a = operand(node, 0), *b = operand(node, 1), *y = node;
    const wf_prim_def *p = node->prim;
    if (p == &wf__prim_multiply) {
        *da = b;
        *db = a;
    } else if (p == &wf__prim_divide) {
        *da = wf_reciprocal(b);
        *db = wf_negative(dvd(y, b));
    } else if (p == &wf__prim_power) {
        /* d/da = b a^(b-1); d/db = a^b log a, taken as 0 where a == 0 */
        *da = mul(b, wf_power(a, sub(b, num(b, 1))));
        *db = mul(y, wf_where(wf_equal(a, num(a, 0)), num(a, 0), wf_log(a)));
    } else if (p == &wf__prim_maximum || p == &wf__prim_minimum) {
        wf_array *a_wins = p == &wf__prim_maximum ? wf_greater(a, b) : wf_less(a, b);
        *da = pick_weight(a, b, a_wins);
        *db = sub(num(a, 1), *da);
    } else if (p == &wf__prim_remainder) {
        /* a - b floor(a / b) */
        *da = num(a, 1);
        *db = wf_negative(wf_floor_divide(a, b));
    } else if (p == &wf__prim_logaddexp) {
        *da = wf_exp(sub(a, y));
        *db = wf_exp(sub(b, y));
    } else { /* arctan2(a, b) = atan(a / b): d/da = b / r, d/db = -a / r */
        wf_array *r = add(wf_square(a), wf_square(b));
        *da = dvd(b, r);
        *db = wf_negative(dvd(a, r));
    }
}

static wf_status vjp_binary(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    wf_array *da, *db;
    binary_partials(node, &da, &db);
    if (wanted[0] && !(cts[0] = mul(ct, da)))
        return wf_last_error();
    if (wanted[1] && !(cts[1] = mul(ct, db)))
        return wf_last_error();
    return WF_OK;
}

static wf_status jvp_binary(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_array *da, *db;
    binary_partials(node, &da, &db);
    wf_array *ta = t[0] ? mul(t[0], da) : NULL, *tb = t[1] ? mul(t[1], db) : NULL;
    *out = t[0] && t[1] ? add(ta, tb) : t[0] ? ta : tb;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- where, clip */

static wf_status vjp_where(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    wf_array *c = operand(node, 0);
    wf_array *zero = num(ct, 0);
    if (wanted[1] && !(cts[1] = wf_where(c, ct, zero)))
        return wf_last_error();
    if (wanted[2] && !(cts[2] = wf_where(c, zero, ct)))
        return wf_last_error();
    return WF_OK;
}

/* clip(a, lo, hi) = min(max(a, lo), hi): the input that gives the value gets
 * the cotangent (ties go to a, then to lo). */
static void clip_masks(wf_array *node, wf_array **take_a, wf_array **take_lo,
                       wf_array **take_hi)
{
    wf_array *a = operand(node, 0), *lo = operand(node, 1), *hi = operand(node, 2);
    *take_hi = wf_greater(wf_maximum(a, lo), hi);
    *take_lo = wf_logical_and(wf_logical_not(*take_hi), wf_greater(lo, a));
    *take_a = wf_logical_not(wf_logical_or(*take_hi, *take_lo));
}

static wf_status vjp_clip(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    wf_array *m[3];
    clip_masks(node, &m[0], &m[1], &m[2]);
    wf_array *zero = num(ct, 0);
    for (int i = 0; i < 3; i++)
        if (wanted[i] && !(cts[i] = wf_where(m[i], ct, zero)))
            return wf_last_error();
    return WF_OK;
}

static wf_status jvp_clip(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_array *m[3];
    clip_masks(node, &m[0], &m[1], &m[2]);
    wf_array *acc = NULL;
    for (int i = 0; i < 3; i++) {
        if (!t[i])
            continue;
        wf_array *part = wf_where(m[i], t[i], num(t[i], 0));
        acc = acc ? add(acc, part) : part;
    }
    *out = acc;
    return wf__rule_result(acc);
}

/* ---------------------------------------------------------------- table
 * Every rule here combines element-wise ops of the node's inputs, output
 * and cotangent or tangents: they follow any shape (follows_shapes). */

#define UNARY_DIFF(P)                                                                   \
    {&P, WF_RULES_DIFFERENTIABLE, vjp_unary, jvp_unary, wf__rule_vmap_elementwise, true}
#define BINARY_DIFF(P)                                                                  \
    {&P, WF_RULES_DIFFERENTIABLE, vjp_binary, jvp_binary, wf__rule_vmap_elementwise, true}
#define ZERO(P, KIND)                                                                   \
    {&P, KIND, wf__rule_vjp_zero, wf__rule_jvp_zero, wf__rule_vmap_elementwise, true}

const wf_prim_rules wf__rules_elementwise[] = {
    UNARY_DIFF(wf__prim_negative),
    {&wf__prim_abs, WF_RULES_DIFFERENTIABLE, vjp_unary, jvp_abs, wf__rule_vmap_elementwise, true},
    UNARY_DIFF(wf__prim_exp),
    UNARY_DIFF(wf__prim_expm1),
    UNARY_DIFF(wf__prim_log),
    UNARY_DIFF(wf__prim_log1p),
    UNARY_DIFF(wf__prim_log2),
    UNARY_DIFF(wf__prim_sqrt),
    UNARY_DIFF(wf__prim_rsqrt),
    UNARY_DIFF(wf__prim_square),
    UNARY_DIFF(wf__prim_reciprocal),
    UNARY_DIFF(wf__prim_sin),
    UNARY_DIFF(wf__prim_cos),
    UNARY_DIFF(wf__prim_tan),
    UNARY_DIFF(wf__prim_tanh),
    UNARY_DIFF(wf__prim_sinh),
    UNARY_DIFF(wf__prim_cosh),
    UNARY_DIFF(wf__prim_arcsin),
    UNARY_DIFF(wf__prim_arccos),
    UNARY_DIFF(wf__prim_arctan),
    UNARY_DIFF(wf__prim_sigmoid),
    UNARY_DIFF(wf__prim_erf),
    UNARY_DIFF(wf__prim_erfinv),
    UNARY_DIFF(wf__prim_silu),
    UNARY_DIFF(wf__prim_gelu),
    UNARY_DIFF(wf__prim_gelu_tanh),
    /* Piecewise constant: zero derivative wherever it exists (MLX too). */
    ZERO(wf__prim_sign, WF_RULES_ZERO_GRADIENT),
    ZERO(wf__prim_floor, WF_RULES_ZERO_GRADIENT),
    ZERO(wf__prim_ceil, WF_RULES_ZERO_GRADIENT),
    ZERO(wf__prim_round, WF_RULES_ZERO_GRADIENT),
    ZERO(wf__prim_floor_divide, WF_RULES_ZERO_GRADIENT),
    /* stop_gradient: the identity whose derivative transforms take as 0. */
    ZERO(wf__prim_stop_gradient, WF_RULES_ZERO_GRADIENT),
    /* Bool outputs: no gradient flows through them. */
    ZERO(wf__prim_logical_not, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_isnan, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_isinf, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_isfinite, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_equal, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_not_equal, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_less, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_less_equal, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_greater, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_greater_equal, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_logical_and, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_logical_or, WF_RULES_NON_FLOAT_OUTPUT),
    /* Bitwise ops: bool and integer outputs only. */
    ZERO(wf__prim_bitwise_and, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_bitwise_or, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_bitwise_xor, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_left_shift, WF_RULES_NON_FLOAT_OUTPUT),
    ZERO(wf__prim_right_shift, WF_RULES_NON_FLOAT_OUTPUT),
    {&wf__prim_astype, WF_RULES_DIFFERENTIABLE, vjp_astype, jvp_astype, wf__rule_vmap_elementwise,
     true},
    {&wf__prim_add, WF_RULES_DIFFERENTIABLE, vjp_add, jvp_add, wf__rule_vmap_elementwise, true},
    {&wf__prim_complex, WF_RULES_DIFFERENTIABLE, vjp_complex, wf__rule_jvp_linear,
     wf__rule_vmap_elementwise, true},
    {&wf__prim_real, WF_RULES_DIFFERENTIABLE, vjp_real, wf__rule_jvp_linear,
     wf__rule_vmap_elementwise, true},
    {&wf__prim_imag, WF_RULES_DIFFERENTIABLE, vjp_imag, wf__rule_jvp_linear,
     wf__rule_vmap_elementwise, true},
    {&wf__prim_conjugate, WF_RULES_DIFFERENTIABLE, vjp_conjugate, wf__rule_jvp_linear,
     wf__rule_vmap_elementwise, true},
    {&wf__prim_subtract, WF_RULES_DIFFERENTIABLE, vjp_subtract, jvp_subtract,
     wf__rule_vmap_elementwise, true},
    BINARY_DIFF(wf__prim_multiply),
    BINARY_DIFF(wf__prim_divide),
    BINARY_DIFF(wf__prim_power),
    BINARY_DIFF(wf__prim_maximum),
    BINARY_DIFF(wf__prim_minimum),
    BINARY_DIFF(wf__prim_remainder),
    BINARY_DIFF(wf__prim_logaddexp),
    BINARY_DIFF(wf__prim_arctan2),
    {&wf__prim_where, WF_RULES_DIFFERENTIABLE, vjp_where, wf__rule_jvp_linear,
     wf__rule_vmap_elementwise, true},
    {&wf__prim_clip, WF_RULES_DIFFERENTIABLE, vjp_clip, jvp_clip, wf__rule_vmap_elementwise, true},
};

const size_t wf__rules_elementwise_count =
    sizeof wf__rules_elementwise / sizeof wf__rules_elementwise[0];
