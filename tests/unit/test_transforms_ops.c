/*
 * Every differentiable op through the transforms, in float64: the vjp and
 * the jvp against central finite differences (contiguous and
 * non-contiguous inputs, broadcasting shapes), the two against each other
 * (<u, jvp(v)> = <vjp(u), v>), and vmap against building the op per
 * example and stacking, for in-axes 0, 1, -1 and not mapped.
 */
#include "transforms_util.h"

/* ---------------------------------------------------------------- builders */

static wf_array *b_negative(wf_array *const *x) { return wf_negative(x[0]); }
static wf_array *b_abs(wf_array *const *x) { return wf_abs(x[0]); }
static wf_array *b_exp(wf_array *const *x) { return wf_exp(x[0]); }
static wf_array *b_expm1(wf_array *const *x) { return wf_expm1(x[0]); }
static wf_array *b_log(wf_array *const *x) { return wf_log(x[0]); }
static wf_array *b_log1p(wf_array *const *x) { return wf_log1p(x[0]); }
static wf_array *b_log2(wf_array *const *x) { return wf_log2(x[0]); }
static wf_array *b_sqrt(wf_array *const *x) { return wf_sqrt(x[0]); }
static wf_array *b_rsqrt(wf_array *const *x) { return wf_rsqrt(x[0]); }
static wf_array *b_square(wf_array *const *x) { return wf_square(x[0]); }
static wf_array *b_reciprocal(wf_array *const *x) { return wf_reciprocal(x[0]); }
static wf_array *b_sin(wf_array *const *x) { return wf_sin(x[0]); }
static wf_array *b_cos(wf_array *const *x) { return wf_cos(x[0]); }
static wf_array *b_tan(wf_array *const *x) { return wf_tan(x[0]); }
static wf_array *b_tanh(wf_array *const *x) { return wf_tanh(x[0]); }
static wf_array *b_sinh(wf_array *const *x) { return wf_sinh(x[0]); }
static wf_array *b_cosh(wf_array *const *x) { return wf_cosh(x[0]); }
static wf_array *b_arcsin(wf_array *const *x) { return wf_arcsin(x[0]); }
static wf_array *b_arccos(wf_array *const *x) { return wf_arccos(x[0]); }
static wf_array *b_arctan(wf_array *const *x) { return wf_arctan(x[0]); }
static wf_array *b_sigmoid(wf_array *const *x) { return wf_sigmoid(x[0]); }
static wf_array *b_erf(wf_array *const *x) { return wf_erf(x[0]); }
static wf_array *b_erfinv(wf_array *const *x) { return wf_erfinv(x[0]); }
static wf_array *b_silu(wf_array *const *x) { return wf_silu(x[0]); }
static wf_array *b_gelu(wf_array *const *x) { return wf_gelu(x[0]); }
static wf_array *b_gelu_tanh(wf_array *const *x) { return wf_gelu_tanh(x[0]); }

static wf_array *b_add(wf_array *const *x) { return wf_add(x[0], x[1]); }
static wf_array *b_subtract(wf_array *const *x) { return wf_subtract(x[0], x[1]); }
static wf_array *b_multiply(wf_array *const *x) { return wf_multiply(x[0], x[1]); }
static wf_array *b_divide(wf_array *const *x) { return wf_divide(x[0], x[1]); }
static wf_array *b_power(wf_array *const *x) { return wf_power(x[0], x[1]); }
static wf_array *b_maximum(wf_array *const *x) { return wf_maximum(x[0], x[1]); }
static wf_array *b_minimum(wf_array *const *x) { return wf_minimum(x[0], x[1]); }
static wf_array *b_remainder(wf_array *const *x) { return wf_remainder(x[0], x[1]); }
static wf_array *b_logaddexp(wf_array *const *x) { return wf_logaddexp(x[0], x[1]); }
static wf_array *b_arctan2(wf_array *const *x) { return wf_arctan2(x[0], x[1]); }

/* A fixed bool mask broadcasting against (2, 3). */
static wf_array *b_where(wf_array *const *x)
{
    const bool m[3] = {true, false, true};
    const int64_t shape[1] = {3};
    wf_array *c = wf_array_from_data(m, shape, 1, WF_DTYPE_BOOL);
    wf_array *y = wf_where(c, x[0], x[1]);
    wf_release(c);
    return y;
}

/* Bounds built from inputs (so they get gradients): lo - 1 and hi + 1. */
static wf_array *b_clip(wf_array *const *x)
{
    wf_array *one = wf_scalar(1, WF_DTYPE_F64);
    wf_array *lo = wf_subtract(x[1], one), *hi = wf_add(x[2], one);
    wf_array *y = wf_clip(x[0], lo, hi);
    wf_release(one);
    wf_release(lo);
    wf_release(hi);
    return y;
}

static wf_array *b_clip_low(wf_array *const *x) { return wf_clip(x[0], x[1], NULL); }

static const int AX1[1] = {1}, AX0[1] = {0}, AXM1[1] = {-1}, AX01[2] = {0, 1};
static wf_array *b_sum1(wf_array *const *x) { return wf_sum(x[0], AX1, 1, false); }
static wf_array *b_sum_all(wf_array *const *x) { return wf_sum(x[0], NULL, 0, true); }
static wf_array *b_mean0(wf_array *const *x) { return wf_mean(x[0], AX0, 1, true); }
static wf_array *b_prod1(wf_array *const *x) { return wf_prod(x[0], AX1, 1, false); }
static wf_array *b_prod01(wf_array *const *x) { return wf_prod(x[0], AX01, 2, false); }
static wf_array *b_max1(wf_array *const *x) { return wf_max(x[0], AX1, 1, false); }
static wf_array *b_min_all(wf_array *const *x) { return wf_min(x[0], NULL, 0, false); }
static wf_array *b_logsumexp(wf_array *const *x) { return wf_logsumexp(x[0], AXM1, 1, false); }
static wf_array *b_var(wf_array *const *x) { return wf_var(x[0], AX1, 1, false, 0); }
static wf_array *b_var_ddof(wf_array *const *x) { return wf_var(x[0], AX01, 2, true, 1); }
static wf_array *b_std(wf_array *const *x) { return wf_std(x[0], AX1, 1, false, 1); }
static wf_array *b_softmax(wf_array *const *x) { return wf_softmax(x[0], AXM1, 1); }
static wf_array *b_softmax01(wf_array *const *x) { return wf_softmax(x[0], AX01, 2); }
static wf_array *b_cumsum(wf_array *const *x) { return wf_cumsum(x[0], 1, false, true); }
static wf_array *b_cumsum_rev(wf_array *const *x) { return wf_cumsum(x[0], 0, true, false); }
static wf_array *b_cumprod(wf_array *const *x) { return wf_cumprod(x[0], 1, false, true); }
static wf_array *b_cumprod_rev(wf_array *const *x) { return wf_cumprod(x[0], 0, true, false); }

static wf_array *b_reshape(wf_array *const *x)
{
    const int64_t s[3] = {3, -1, 2};
    return wf_reshape(x[0], s, 3);
}
static wf_array *b_transpose(wf_array *const *x)
{
    const int perm[3] = {2, 0, 1};
    return wf_transpose(x[0], perm, 3);
}
static wf_array *b_broadcast(wf_array *const *x)
{
    const int64_t s[3] = {2, 3, 4};
    return wf_broadcast_to(x[0], s, 3);
}
static wf_array *b_slice(wf_array *const *x)
{
    const int64_t start[2] = {3, 0}, stop[2] = {-5, 3}, step[2] = {-2, 2};
    return wf_slice(x[0], start, stop, step);
}
/* Unit steps, a negative start and a stop past the end (the pad path). */
static wf_array *b_slice_unit(wf_array *const *x)
{
    const int64_t start[3] = {-4, 1, 0}, stop[3] = {4, 100, -1}, step[3] = {1, 1, 1};
    return wf_slice(x[0], start, stop, step);
}
static wf_array *b_slice_update(wf_array *const *x)
{
    const int64_t start[2] = {1, 0}, stop[2] = {3, 4}, step[2] = {1, 2};
    return wf_slice_update(x[0], x[1], start, stop, step);
}
static wf_array *b_concatenate(wf_array *const *x) { return wf_concatenate(x, 3, 1); }
static wf_array *b_expand_squeeze(wf_array *const *x)
{
    const int at[2] = {0, 3};
    wf_array *e = wf_expand_dims(x[0], at, 2);
    wf_array *m = wf_multiply(e, e);
    const int drop[1] = {0};
    wf_array *y = wf_squeeze(m, drop, 1);
    wf_release(e);
    wf_release(m);
    return y;
}
static wf_array *b_pad(wf_array *const *x)
{
    const int64_t lo[2] = {1, 0}, hi[2] = {0, 2};
    return wf_pad(x[0], lo, hi, 3.5);
}
static wf_array *b_tril(wf_array *const *x) { return wf_tril(x[0], 0); }
static wf_array *b_triu(wf_array *const *x) { return wf_triu(x[0], 1); }
static wf_array *b_tile(wf_array *const *x)
{
    const int64_t reps[2] = {2, 1};
    return wf_tile(x[0], reps, 2);
}
static wf_array *b_repeat(wf_array *const *x) { return wf_repeat(x[0], 2, 1); }

static wf_array *b_take(wf_array *const *x)
{
    const int32_t idx[4] = {2, 0, -1, 2};
    const int64_t s[2] = {2, 2};
    wf_array *i = wf_array_from_data(idx, s, 2, WF_DTYPE_I32);
    wf_array *y = wf_take(x[0], i, 1);
    wf_release(i);
    return y;
}
static wf_array *b_take_along(wf_array *const *x)
{
    const int64_t idx[4] = {1, 0, 2, 2};
    const int64_t s[2] = {2, 2};
    wf_array *i = wf_array_from_data(idx, s, 2, WF_DTYPE_I64);
    wf_array *y = wf_take_along_axis(x[0], i, 1);
    wf_release(i);
    return y;
}
static wf_array *b_scatter_add(wf_array *const *x)
{
    const int32_t idx[3] = {1, 1, 0};
    const int64_t s[1] = {3};
    wf_array *i = wf_array_from_data(idx, s, 1, WF_DTYPE_I32);
    wf_array *y = wf_scatter_add(x[0], i, x[1], 0);
    wf_release(i);
    return y;
}

static wf_array *b_matmul(wf_array *const *x) { return wf_matmul(x[0], x[1]); }
static wf_array *b_addmm(wf_array *const *x) { return wf_addmm(x[0], x[1], x[2], 0.7, -1.3); }

static wf_array *b_layer_norm(wf_array *const *x) { return wf_layer_norm(x[0], x[1], x[2], 1e-5); }
static wf_array *b_layer_norm_plain(wf_array *const *x)
{
    return wf_layer_norm(x[0], NULL, NULL, 1e-3);
}
static wf_array *b_rms_norm(wf_array *const *x) { return wf_rms_norm(x[0], x[1], 1e-5); }
static wf_array *b_rope(wf_array *const *x) { return wf_rope(x[0], 4, false, 10000, 1.0, 2); }
static wf_array *b_rope_trad(wf_array *const *x) { return wf_rope(x[0], 2, true, 100, 0.5, 0); }
static wf_array *b_sdpa(wf_array *const *x)
{
    return wf_scaled_dot_product_attention(x[0], x[1], x[2], 0.5, NULL, false);
}
static wf_array *b_sdpa_causal(wf_array *const *x)
{
    return wf_scaled_dot_product_attention(x[0], x[1], x[2], 0.7, NULL, true);
}
static wf_array *b_sdpa_add_mask(wf_array *const *x)
{
    return wf_scaled_dot_product_attention(x[0], x[1], x[2], 0.5, x[3], false);
}
/* A bool mask hiding every key of query row 1 (its output is zeros). */
static wf_array *b_sdpa_bool_mask(wf_array *const *x)
{
    bool m[15];
    for (int i = 0; i < 15; i++)
        m[i] = i / 5 != 1 && i % 3 != 0;
    const int64_t s[2] = {3, 5};
    wf_array *mask = wf_array_from_data(m, s, 2, WF_DTYPE_BOOL);
    wf_array *y = wf_scaled_dot_product_attention(x[0], x[1], x[2], 0.5, mask, true);
    wf_release(mask);
    return y;
}

/* ---------------------------------------------------------------- cases */

#define S1(a) 1, {a}
#define SH(...) {__VA_ARGS__}

static const tu_case cases[] = {
    {"negative", b_negative, 1, {2}, {SH(2, 3)}, -2, 2},
    {"abs", b_abs, 1, {2}, {SH(2, 3)}, 0.2, 2},
    {"exp", b_exp, 1, {2}, {SH(2, 3)}, -2, 2},
    {"expm1", b_expm1, 1, {1}, {SH(5)}, -1, 1},
    {"log", b_log, 1, {2}, {SH(2, 3)}, 0.3, 3},
    {"log1p", b_log1p, 1, {2}, {SH(3, 2)}, -0.5, 2},
    {"log2", b_log2, 1, {2}, {SH(2, 2)}, 0.3, 3},
    {"sqrt", b_sqrt, 1, {2}, {SH(2, 3)}, 0.3, 3},
    {"rsqrt", b_rsqrt, 1, {2}, {SH(2, 3)}, 0.3, 3},
    {"square", b_square, 1, {0}, {SH(0)}, -2, 2},
    {"reciprocal", b_reciprocal, 1, {2}, {SH(2, 3)}, 0.5, 2},
    {"sin", b_sin, 1, {2}, {SH(2, 3)}, -3, 3},
    {"cos", b_cos, 1, {2}, {SH(2, 3)}, -3, 3},
    {"tan", b_tan, 1, {2}, {SH(2, 3)}, -1, 1},
    {"tanh", b_tanh, 1, {3}, {SH(2, 1, 3)}, -2, 2},
    {"sinh", b_sinh, 1, {2}, {SH(2, 3)}, -2, 2},
    {"cosh", b_cosh, 1, {2}, {SH(2, 3)}, -2, 2},
    {"arcsin", b_arcsin, 1, {2}, {SH(2, 3)}, -0.9, 0.9},
    {"arccos", b_arccos, 1, {2}, {SH(2, 3)}, -0.9, 0.9},
    {"arctan", b_arctan, 1, {2}, {SH(2, 3)}, -2, 2},
    {"sigmoid", b_sigmoid, 1, {2}, {SH(2, 3)}, -3, 3},
    {"erf", b_erf, 1, {2}, {SH(2, 3)}, -2, 2},
    {"erfinv", b_erfinv, 1, {2}, {SH(2, 3)}, -0.9, 0.9},
    {"silu", b_silu, 1, {2}, {SH(2, 3)}, -3, 3},
    {"gelu", b_gelu, 1, {2}, {SH(2, 3)}, -3, 3},
    {"gelu_tanh", b_gelu_tanh, 1, {2}, {SH(2, 3)}, -3, 3},
    {"add", b_add, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, -2, 2},
    {"add bcast", b_add, 2, {2, 1}, {SH(2, 3), SH(3)}, -2, 2},
    {"subtract bcast", b_subtract, 2, {2, 2}, {SH(2, 1), SH(1, 3)}, -2, 2},
    {"multiply scalar", b_multiply, 2, {0, 2}, {SH(0), SH(2, 2)}, -2, 2},
    {"multiply", b_multiply, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, -2, 2},
    {"divide bcast", b_divide, 2, {2, 1}, {SH(2, 3), SH(3)}, 0.5, 2},
    {"power", b_power, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, 0.5, 2},
    {"maximum", b_maximum, 2, {2, 1}, {SH(2, 3), SH(3)}, -2, 2},
    {"minimum", b_minimum, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, -2, 2},
    {"remainder", b_remainder, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, 0.3, 2.9},
    {"logaddexp", b_logaddexp, 2, {2, 1}, {SH(2, 3), SH(3)}, -2, 2},
    {"arctan2", b_arctan2, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, 0.2, 2},
    {"where", b_where, 2, {2, 2}, {SH(2, 3), SH(2, 3)}, -2, 2},
    {"clip", b_clip, 3, {2, 1, 2}, {SH(2, 3), SH(3), SH(2, 3)}, -2, 2},
    {"clip low", b_clip_low, 2, {2, 1}, {SH(2, 3), SH(3)}, -2, 2},
    {"sum axis", b_sum1, 1, {3}, {SH(2, 3, 2)}, -2, 2},
    {"sum all", b_sum_all, 1, {2}, {SH(2, 3)}, -2, 2},
    {"mean", b_mean0, 1, {2}, {SH(3, 2)}, -2, 2},
    {"prod", b_prod1, 1, {2}, {SH(2, 4)}, 0.5, 1.5},
    {"prod 2 axes", b_prod01, 1, {3}, {SH(2, 3, 2)}, 0.5, 1.5},
    {"max", b_max1, 1, {2}, {SH(2, 4)}, -2, 2},
    {"min", b_min_all, 1, {2}, {SH(2, 3)}, -2, 2},
    {"logsumexp", b_logsumexp, 1, {2}, {SH(2, 4)}, -2, 2},
    {"var", b_var, 1, {2}, {SH(2, 4)}, -2, 2},
    {"var ddof", b_var_ddof, 1, {2}, {SH(2, 3)}, -2, 2},
    {"std", b_std, 1, {2}, {SH(2, 4)}, -2, 2},
    {"softmax", b_softmax, 1, {2}, {SH(2, 4)}, -2, 2},
    {"softmax 2 axes", b_softmax01, 1, {3}, {SH(2, 3, 2)}, -2, 2},
    {"cumsum", b_cumsum, 1, {2}, {SH(2, 4)}, -2, 2},
    {"cumsum reverse exclusive", b_cumsum_rev, 1, {2}, {SH(3, 2)}, -2, 2},
    {"cumprod", b_cumprod, 1, {2}, {SH(2, 4)}, 0.5, 1.5},
    {"cumprod reverse exclusive", b_cumprod_rev, 1, {2}, {SH(4, 2)}, -1.5, 1.5},
    {"reshape", b_reshape, 1, {2}, {SH(2, 6)}, -2, 2},
    {"transpose", b_transpose, 1, {3}, {SH(2, 3, 2)}, -2, 2},
    {"broadcast_to", b_broadcast, 1, {2}, {SH(3, 1)}, -2, 2},
    {"slice", b_slice, 1, {2}, {SH(5, 4)}, -2, 2},
    {"slice unit steps", b_slice_unit, 1, {3}, {SH(5, 4, 3)}, -2, 2},
    {"slice_update", b_slice_update, 2, {2, 2}, {SH(4, 4), SH(2, 2)}, -2, 2},
    {"concatenate", b_concatenate, 3, {2, 2, 2}, {SH(2, 1), SH(2, 3), SH(2, 2)}, -2, 2},
    {"expand_dims squeeze", b_expand_squeeze, 1, {2}, {SH(2, 3)}, -2, 2},
    {"pad", b_pad, 1, {2}, {SH(2, 3)}, -2, 2},
    {"tril", b_tril, 1, {2}, {SH(3, 3)}, -2, 2},
    {"triu", b_triu, 1, {3}, {SH(2, 3, 4)}, -2, 2},
    {"tile", b_tile, 1, {2}, {SH(2, 3)}, -2, 2},
    {"repeat", b_repeat, 1, {2}, {SH(2, 3)}, -2, 2},
    {"take", b_take, 1, {2}, {SH(2, 3)}, -2, 2},
    {"take_along_axis", b_take_along, 1, {2}, {SH(2, 3)}, -2, 2},
    {"scatter_add", b_scatter_add, 2, {2, 2}, {SH(2, 3), SH(3, 3)}, -2, 2},
    {"matmul", b_matmul, 2, {2, 2}, {SH(2, 3), SH(3, 4)}, -2, 2},
    {"matmul batch bcast", b_matmul, 2, {3, 2}, {SH(2, 2, 3), SH(3, 2)}, -2, 2},
    {"matmul shared weight 4-d", b_matmul, 2, {4, 2}, {SH(2, 3, 2, 3), SH(3, 2)}, -2, 2},
    {"matmul shared weight ones", b_matmul, 2, {3, 3}, {SH(2, 2, 3), SH(1, 3, 2)}, -2, 2},
    {"matmul both bcast", b_matmul, 2, {3, 3}, {SH(1, 2, 3), SH(2, 3, 2)}, -2, 2},
    {"matmul left bcast", b_matmul, 2, {4, 3}, {SH(2, 1, 2, 3), SH(3, 3, 2)}, -2, 2},
    {"matmul vector", b_matmul, 2, {1, 2}, {SH(3), SH(3, 2)}, -2, 2},
    {"matmul matvec", b_matmul, 2, {3, 1}, {SH(2, 2, 3), SH(3)}, -2, 2},
    {"addmm", b_addmm, 3, {1, 2, 2}, {SH(4), SH(2, 3), SH(3, 4)}, -2, 2},
    {"layer_norm", b_layer_norm, 3, {2, 1, 1}, {SH(2, 5), SH(5), SH(5)}, -2, 2},
    {"layer_norm plain", b_layer_norm_plain, 1, {3}, {SH(2, 3, 4)}, -2, 2},
    {"rms_norm", b_rms_norm, 2, {2, 1}, {SH(2, 5), SH(5)}, -2, 2},
    {"rope", b_rope, 1, {3}, {SH(2, 3, 6)}, -2, 2},
    {"rope traditional", b_rope_trad, 1, {2}, {SH(3, 4)}, -2, 2},
    {"sdpa", b_sdpa, 3, {3, 3, 3}, {SH(2, 3, 4), SH(2, 5, 4), SH(2, 5, 3)}, -1, 1},
    {"sdpa causal bcast", b_sdpa_causal, 3, {3, 2, 2}, {SH(2, 3, 4), SH(5, 4), SH(5, 3)}, -1, 1},
    {"sdpa add mask", b_sdpa_add_mask, 4, {3, 3, 3, 2},
     {SH(2, 3, 4), SH(2, 5, 4), SH(2, 5, 3), SH(3, 5)}, -1, 1},
    {"sdpa bool mask", b_sdpa_bool_mask, 3, {2, 2, 2}, {SH(3, 4), SH(5, 4), SH(5, 2)}, -1, 1},
    {"sdpa grouped heads", b_sdpa, 3, {4, 4, 4},
     {SH(1, 4, 3, 2), SH(1, 2, 5, 2), SH(1, 2, 5, 2)}, -1, 1},
};

enum { NCASES = sizeof cases / sizeof cases[0] };

/* ---------------------------------------------------------------- checks */

static void make_inputs(const tu_case *c, uint32_t seed, bool strided, wf_array **x)
{
    for (int i = 0; i < c->nin; i++)
        x[i] = tu_input(c->shapes[i], c->ndims[i], c->lo, c->hi, seed + (uint32_t)i, strided);
}

static void release_all(wf_array **x, int n)
{
    for (int i = 0; i < n; i++)
        wf_release(x[i]);
}

/* An array shaped like f's output, for cotangents. */
static wf_array *output_like(const tu_case *c, wf_array *const *x, uint32_t seed)
{
    wf_array *y = c->build(x);
    if (!y)
        return NULL;
    wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, seed, false);
    wf_release(y);
    return u;
}

static void check_case_gradients(const tu_case *c, bool strided)
{
    wf_array *x[TU_MAX_IN], *t[TU_MAX_IN];
    make_inputs(c, 11, strided, x);
    make_inputs(c, 97, false, t);
    for (int i = 0; i < c->nin; i++) { /* tangents in [-1, 1) whatever the domain */
        wf_release(t[i]);
        t[i] = tu_input(c->shapes[i], c->ndims[i], -1, 1, 97 + (uint32_t)i, false);
    }
    wf_array *u = output_like(c, x, 5);
    if (!CHECK_NOT_NULL(u)) {
        printf("      (%s)\n", c->name);
        release_all(x, c->nin);
        release_all(t, c->nin);
        return;
    }
    double *g[TU_MAX_IN] = {NULL}, *jt = NULL;
    bool ok = tu_check_vjp(c, x, u, 1e-5, g);
    ok = tu_check_jvp(c, x, t, 1e-5, &jt) && ok;
    if (ok) { /* <u, J v> = <J^T u, v> */
        double *uv = tu_read(u);
        double left = tu_dot(uv, jt, wf_array_size(u)), right = 0;
        for (int i = 0; i < c->nin; i++) {
            double *tv = tu_read(t[i]);
            right += tu_dot(g[i], tv, wf_array_size(t[i]));
            free(tv);
        }
        if (!CHECK_NEAR(left, right, 1e-10 * (1 + fabs(left))))
            printf("      (%s: vjp and jvp disagree)\n", c->name);
        free(uv);
    }
    if (!ok)
        printf("      (%s%s)\n", c->name, strided ? ", strided inputs" : "");
    for (int i = 0; i < c->nin; i++)
        free(g[i]);
    free(jt);
    wf_release(u);
    release_all(x, c->nin);
    release_all(t, c->nin);
}

static void test_vjp_jvp_contiguous(void)
{
    for (int k = 0; k < NCASES; k++)
        check_case_gradients(&cases[k], false);
}

static void test_vjp_jvp_strided(void)
{
    for (int k = 0; k < NCASES; k++)
        check_case_gradients(&cases[k], true);
}

/* The in-axes each case is batched with: 0, 1, -1 for every input, then
 * each input alone left unmapped. */
static void test_vmap(void)
{
    for (int k = 0; k < NCASES; k++) {
        const tu_case *c = &cases[k];
        const int modes[3] = {0, 1, -1};
        for (int m = 0; m < 3; m++) {
            int axes[TU_MAX_IN];
            for (int i = 0; i < c->nin; i++)
                axes[i] = modes[m] == 1 && c->ndims[i] == 0 ? 0 : modes[m];
            tu_check_vmap(c, axes, 3, 100 + (uint32_t)m);
        }
        for (int skip = 0; c->nin > 1 && skip < c->nin; skip++) {
            int axes[TU_MAX_IN];
            for (int i = 0; i < c->nin; i++)
                axes[i] = i == skip ? WF_VMAP_NOT_MAPPED : (c->ndims[i] > 0 ? 1 : 0);
            tu_check_vmap(c, axes, 2, 300 + (uint32_t)skip);
        }
    }
}

int main(void)
{
    RUN_TEST(test_vjp_jvp_contiguous);
    RUN_TEST(test_vjp_jvp_strided);
    RUN_TEST(test_vmap);
    return TEST_SUMMARY();
}
