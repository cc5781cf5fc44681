/*
 * test_mixed_precision_grads: a vjp or jvp computes in the promoted dtype
 * of the forward computation and rounds once, to each input's dtype, at the
 * end - after any sum over broadcast axes (issue 23, item 4).
 *
 * Every differentiable primitive with several float inputs runs with one
 * float32 input (broadcast where the op allows) and the others float64,
 * against the same function in float64 with the float32 values widened
 * exactly: float64 gradients and tangents must be float64-accurate, a
 * float32 gradient the float64 one rounded once (within one float32 ulp).
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

enum { MAX_INPUTS = 4, ROWS = 64, COLS = 32 };

typedef wf_array *(*case_body)(wf_array *const *in);

typedef struct mixed_case {
    const char *name;
    case_body body;
    int ninputs;
    int ndims[MAX_INPUTS];
    int64_t shapes[MAX_INPUTS][4];
    unsigned f32_inputs; /* bit i: input i is float32 in the mixed call */
    bool positive;       /* inputs in [0.5, 1.5] (power's base, log domains) */
} mixed_case;

/* ---------------------------------------------------------------- bodies */

static wf_array *bin_add(wf_array *const *in) { return wf_add(in[0], in[1]); }
static wf_array *bin_subtract(wf_array *const *in) { return wf_subtract(in[0], in[1]); }
static wf_array *bin_multiply(wf_array *const *in) { return wf_multiply(in[0], in[1]); }
static wf_array *bin_divide(wf_array *const *in) { return wf_divide(in[0], in[1]); }
static wf_array *bin_power(wf_array *const *in) { return wf_power(in[0], in[1]); }
static wf_array *bin_maximum(wf_array *const *in) { return wf_maximum(in[0], in[1]); }
static wf_array *bin_minimum(wf_array *const *in) { return wf_minimum(in[0], in[1]); }
static wf_array *bin_remainder(wf_array *const *in) { return wf_remainder(in[0], in[1]); }
static wf_array *bin_logaddexp(wf_array *const *in) { return wf_logaddexp(in[0], in[1]); }
static wf_array *bin_arctan2(wf_array *const *in) { return wf_arctan2(in[0], in[1]); }

static wf_array *layer_norm3(wf_array *const *in) { return wf_layer_norm(in[0], in[1], in[2], 1e-5); }
static wf_array *rms_norm2(wf_array *const *in) { return wf_rms_norm(in[0], in[1], 1e-5); }

static wf_array *attention_masked(wf_array *const *in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.3, in[3], false);
}

static wf_array *attention(wf_array *const *in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.3, NULL, true);
}

/* where(x0 > 0.2, x0, x1) on values it does not depend on otherwise */
static wf_array *where2(wf_array *const *in)
{
    wf_array *cond = wf_greater(in[1], wf_scalar(0.2, WF_DTYPE_F64));
    return wf_where(cond, in[0], in[1]);
}

static wf_array *clip3(wf_array *const *in) { return wf_clip(in[0], in[1], in[2]); }

static wf_array *matmul2(wf_array *const *in) { return wf_matmul(in[0], in[1]); }
static wf_array *addmm3(wf_array *const *in) { return wf_addmm(in[0], in[1], in[2], 0.7, 1.3); }

static wf_array *scatter_add2(wf_array *const *in)
{
    const int64_t n = 8, rows[8] = {1, 5, 5, 9, 20, 33, 33, 63};
    wf_array *idx = wf_array_from_data(rows, &n, 1, WF_DTYPE_I64);
    return wf_scatter_add(in[0], idx, in[1], 0);
}

static wf_array *slice_update2(wf_array *const *in)
{
    const int64_t starts[2] = {4, 0}, stops[2] = {12, COLS}, steps[2] = {1, 1};
    return wf_slice_update(in[0], in[1], starts, stops, steps);
}

static wf_array *concatenate2(wf_array *const *in) { return wf_concatenate(in, 2, 0); }

/* ---------------------------------------------------------------- cases */

#define ROW_SHAPE {1, COLS}
#define GRID_SHAPE {ROWS, COLS}
#define BINARY(NAME, BODY, F32, POS)                                                     \
    {NAME, BODY, 2, {2, 2}, {ROW_SHAPE, GRID_SHAPE}, F32, POS}

static const mixed_case cases[] = {
    {"layer_norm, float32 x", layer_norm3, 3, {2, 1, 1}, {GRID_SHAPE, {COLS}, {COLS}}, 1u, false},
    {"layer_norm, float32 weight and bias", layer_norm3, 3, {2, 1, 1},
     {GRID_SHAPE, {COLS}, {COLS}}, 6u, false},
    {"rms_norm, float32 x", rms_norm2, 2, {2, 1}, {GRID_SHAPE, {COLS}}, 1u, false},
    {"rms_norm, float32 weight", rms_norm2, 2, {2, 1}, {GRID_SHAPE, {COLS}}, 2u, false},
    {"attention, float32 mask broadcast over the keys", attention_masked, 4, {3, 3, 3, 2},
     {{2, 16, 8}, {2, 24, 8}, {2, 24, 8}, {16, 1}}, 8u, false},
    {"attention, float32 q", attention, 3, {3, 3, 3}, {{2, 16, 8}, {2, 24, 8}, {2, 24, 8}}, 1u,
     false},
    BINARY("add, float32 broadcast", bin_add, 1u, false),
    BINARY("add, float64 broadcast", bin_add, 2u, false),
    BINARY("subtract, float32 broadcast", bin_subtract, 1u, false),
    BINARY("multiply, float32 broadcast", bin_multiply, 1u, false),
    BINARY("multiply, float64 broadcast", bin_multiply, 2u, false),
    BINARY("divide, float32 broadcast", bin_divide, 1u, true),
    BINARY("divide, float64 broadcast", bin_divide, 2u, true),
    BINARY("power, float32 broadcast", bin_power, 1u, true),
    BINARY("power, float64 broadcast", bin_power, 2u, true),
    BINARY("maximum, float32 broadcast", bin_maximum, 1u, false),
    BINARY("minimum, float32 broadcast", bin_minimum, 1u, false),
    BINARY("remainder, float32 broadcast", bin_remainder, 1u, true),
    BINARY("logaddexp, float32 broadcast", bin_logaddexp, 1u, false),
    BINARY("arctan2, float32 broadcast", bin_arctan2, 1u, true),
    {"where, float32 broadcast", where2, 2, {1, 2}, {{COLS}, GRID_SHAPE}, 1u, false},
    {"clip, float32 bounds broadcast", clip3, 3, {2, 1, 1}, {GRID_SHAPE, {COLS}, {COLS}}, 6u,
     false},
    {"matmul, float32 a", matmul2, 2, {2, 2}, {{ROWS, 16}, {16, 8}}, 1u, false},
    {"matmul, float32 b shared by a batch", matmul2, 2, {3, 2}, {{4, 16, 16}, {16, 8}}, 2u,
     false},
    {"matmul, float32 a broadcast over a batch", matmul2, 2, {2, 3}, {{16, 16}, {4, 16, 8}},
     1u, false},
    {"addmm, float32 c broadcast", addmm3, 3, {1, 2, 2}, {{8}, {ROWS, 16}, {16, 8}}, 1u, false},
    {"scatter_add, float32 updates", scatter_add2, 2, {2, 2}, {GRID_SHAPE, {8, COLS}}, 2u,
     false},
    {"slice_update, float32 update", slice_update2, 2, {2, 2}, {GRID_SHAPE, {8, COLS}}, 2u,
     false},
    {"concatenate, float32 part", concatenate2, 2, {2, 2}, {{8, COLS}, GRID_SHAPE}, 1u, false},
};

/* ---------------------------------------------------------------- running */

static wf_status body_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)n;
    const mixed_case *c = payload;
    wf_scope_begin();
    wf_array *y = wf_keep(c->body(in));
    wf_scope_end();
    out[0] = y;
    *nout = 1;
    return y ? WF_OK : wf_last_error();
}

static int64_t shape_size(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* Values exactly representable in float32, as doubles. */
static double *values(int64_t n, unsigned seed, bool positive)
{
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double t = sin(0.731 * (double)(i + 1) + 1.37 * seed) * 0.5 + 0.5; /* [0, 1] */
        v[i] = (double)(float)(positive ? 0.5 + t : 3.0 * t - 1.5);
    }
    return v;
}

static wf_array *array_of(const double *v, const int64_t *shape, int ndim, wf_dtype dtype)
{
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F64);
    if (dtype == WF_DTYPE_F64)
        return a;
    wf_array *b = wf_astype(a, dtype);
    wf_release(a);
    return b;
}

static double *read_f64(wf_array *a)
{
    int64_t n = wf_array_size(a);
    wf_array *w = wf_astype(a, WF_DTYPE_F64);
    double *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    if (!CHECK_OK(wf_array_copy_to(w, out, (size_t)n * sizeof *out)))
        memset(out, 0, (size_t)n * sizeof *out);
    wf_release(w);
    return out;
}

/* Largest error of `got` against the float64 reference, relative to the
 * reference's largest magnitude. */
static double relative_error(wf_array *got, wf_array *want)
{
    const int64_t n = wf_array_size(want);
    double *g = read_f64(got), *w = read_f64(want), err = 0, scale = 1e-300;
    for (int64_t i = 0; i < n; i++) {
        err = fmax(err, fabs(g[i] - w[i]));
        scale = fmax(scale, fabs(w[i]));
    }
    free(g);
    free(w);
    return err / scale;
}

/* Elements of a float32 result further than one float32 ulp from the
 * float64 reference (rounded once, it is within half an ulp). */
static int64_t beyond_one_ulp(wf_array *got, wf_array *want)
{
    const int64_t n = wf_array_size(want);
    double *g = read_f64(got), *w = read_f64(want);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const float r = (float)fabs(w[i]);
        const double ulp = (double)nextafterf(r, INFINITY) - (double)r;
        bad += fabs(g[i] - w[i]) > ulp;
    }
    free(g);
    free(w);
    return bad;
}

enum { F64_TOLERANCE_EXPONENT = -12 };

static void check_case(const mixed_case *c)
{
    wf_fn *f = wf_fn_new(body_call, (void *)c, NULL);
    wf_array *mixed[MAX_INPUTS], *ref[MAX_INPUTS], *tan_mixed[MAX_INPUTS], *tan_ref[MAX_INPUTS];
    for (int i = 0; i < c->ninputs; i++) {
        const int64_t n = shape_size(c->shapes[i], c->ndims[i]);
        double *v = values(n, (unsigned)i + 1, c->positive), *t = values(n, (unsigned)i + 11, false);
        const wf_dtype dt = (c->f32_inputs >> i) & 1u ? WF_DTYPE_F32 : WF_DTYPE_F64;
        mixed[i] = array_of(v, c->shapes[i], c->ndims[i], dt);
        ref[i] = array_of(v, c->shapes[i], c->ndims[i], WF_DTYPE_F64);
        tan_mixed[i] = array_of(t, c->shapes[i], c->ndims[i], dt);
        tan_ref[i] = array_of(t, c->shapes[i], c->ndims[i], WF_DTYPE_F64);
        free(v);
        free(t);
    }
    /* The output (float64 in both) and a cotangent of its shape. */
    wf_array *out_ref = NULL;
    size_t nout = 1;
    if (!CHECK_OK(wf_fn_call(f, ref, (size_t)c->ninputs, &out_ref, &nout)))
        return;
    CHECK_EQ_INT(wf_array_dtype(out_ref), WF_DTYPE_F64);
    int64_t oshape[WF_MAX_NDIM];
    const int ondim = wf_array_ndim(out_ref);
    for (int d = 0; d < ondim; d++)
        oshape[d] = wf_array_dim(out_ref, d);
    double *cv = values(shape_size(oshape, ondim), 29, false);
    wf_array *ct = array_of(cv, oshape, ondim, WF_DTYPE_F64);
    free(cv);

    wf_array *g_mixed[MAX_INPUTS] = {NULL}, *g_ref[MAX_INPUTS] = {NULL};
    CHECK_OK(wf_vjp(f, mixed, (size_t)c->ninputs, &ct, 1, NULL, g_mixed));
    CHECK_OK(wf_vjp(f, ref, (size_t)c->ninputs, &ct, 1, NULL, g_ref));
    for (int i = 0; i < c->ninputs && g_mixed[i] && g_ref[i]; i++) {
        if ((c->f32_inputs >> i) & 1u) {
            const int64_t bad = beyond_one_ulp(g_mixed[i], g_ref[i]);
            if (bad)
                wf_test_fail(__FILE__, __LINE__,
                             "%s: vjp of float32 input %d: %lld elements beyond one ulp of the "
                             "float64 gradient rounded once",
                             c->name, i, (long long)bad);
        } else {
            const double err = relative_error(g_mixed[i], g_ref[i]);
            if (!(err <= pow(10, F64_TOLERANCE_EXPONENT)))
                wf_test_fail(__FILE__, __LINE__,
                             "%s: vjp of float64 input %d: relative error %.3g (float64 gives "
                             "~1e-16)",
                             c->name, i, err);
        }
    }

    wf_array *o_mixed = NULL, *o_ref = NULL, *t_mixed = NULL, *t_ref = NULL;
    size_t n1 = 1, n2 = 1;
    CHECK_OK(wf_jvp(f, mixed, (size_t)c->ninputs, tan_mixed, &o_mixed, &t_mixed, &n1));
    CHECK_OK(wf_jvp(f, ref, (size_t)c->ninputs, tan_ref, &o_ref, &t_ref, &n2));
    if (t_mixed && t_ref) {
        CHECK_EQ_INT(wf_array_dtype(t_mixed), WF_DTYPE_F64);
        const double out_err = relative_error(o_mixed, o_ref);
        const double err = relative_error(t_mixed, t_ref);
        if (!(err <= pow(10, F64_TOLERANCE_EXPONENT)) ||
            !(out_err <= pow(10, F64_TOLERANCE_EXPONENT)))
            wf_test_fail(__FILE__, __LINE__,
                         "%s: jvp: relative error %.3g of the tangent, %.3g of the output",
                         c->name, err, out_err);
    }

    wf_array *all[] = {out_ref, ct, o_mixed, o_ref, t_mixed, t_ref};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        wf_release(all[k]);
    for (int i = 0; i < c->ninputs; i++) {
        wf_array *per[] = {mixed[i], ref[i], tan_mixed[i], tan_ref[i], g_mixed[i], g_ref[i]};
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++)
            wf_release(per[k]);
    }
    wf_fn_release(f);
}

static void test_every_multi_input_rule_mixed(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

int main(void)
{
    RUN_TEST(test_every_multi_input_rule_mixed);
    return TEST_SUMMARY();
}
