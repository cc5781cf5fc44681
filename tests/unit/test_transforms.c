/*
 * Function handles and the reverse-mode API: wf_fn, wf_vjp, wf_grad,
 * wf_value_and_grad, their bad inputs, integer inputs, stop_gradient,
 * non-differentiable primitives, data-dependent control flow, and grad of
 * grad checked against finite differences.
 */
#include <stdatomic.h>

#include "core/array.h"
#include "transforms_util.h"

/* ---------------------------------------------------------------- helpers */

typedef wf_array *(*unary_fn)(wf_array *x);

typedef struct unary_payload {
    unary_fn op;
} unary_payload;

/* f(x) = sum(op(x)) as a wf_fn (payload: the op). */
static wf_status sum_of_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)n;
    const unary_payload *p = payload;
    wf_array *y = p->op(in[0]);
    out[0] = wf_sum(y, NULL, 0, false);
    wf_release(y);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_fn *sum_of(unary_fn op)
{
    unary_payload *p = malloc(sizeof *p);
    p->op = op;
    return wf_fn_new(sum_of_call, p, free);
}

static wf_array *vec(const double *v, int64_t n)
{
    return wf_array_from_data(v, &n, 1, WF_DTYPE_F64);
}

static double item(wf_array *a)
{
    double v = NAN;
    CHECK_OK(wf_array_item(a, &v));
    return v;
}

/* Calls a one-input function and returns its only output. */
static wf_array *call1(wf_fn *fn, wf_array *x)
{
    wf_array *out = NULL;
    size_t n = 1;
    if (wf_fn_call(fn, &x, 1, &out, &n) != WF_OK)
        return NULL;
    CHECK_EQ_INT(n, 1);
    return out;
}

/* ---------------------------------------------------------------- wf_fn */

static atomic_int destroyed;
static void count_destroy(void *p)
{
    (void)p;
    atomic_fetch_add(&destroyed, 1);
}

static wf_status identity_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    if (*nout < n)
        return WF_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        out[i] = wf_retain(in[i]);
    *nout = n;
    return WF_OK;
}

static void test_fn_basics(void)
{
    atomic_store(&destroyed, 0);
    wf_fn *fn = wf_fn_new(identity_call, NULL, count_destroy);
    if (!CHECK_NOT_NULL(fn))
        return;
    CHECK(wf_fn_retain(fn) == fn);
    wf_fn_release(fn);
    const double v[3] = {1, 2, 3};
    wf_array *x = vec(v, 3);
    wf_array *outs[2] = {NULL, NULL};
    size_t n = 2;
    CHECK_OK(wf_fn_call(fn, &x, 1, outs, &n));
    CHECK_EQ_INT(n, 1);
    CHECK(outs[0] == x);
    wf_release(outs[0]);
    /* Too little room: the body's status, with a message naming it. */
    wf_array *two[2] = {x, x};
    n = 1;
    CHECK_STATUS(wf_fn_call(fn, two, 2, outs, &n), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "WF_ERR_INVALID_ARGUMENT");
    CHECK_EQ_INT(n, 0);
    wf_clear_error();
    CHECK_EQ_INT(atomic_load(&destroyed), 0);
    wf_fn_release(fn);
    CHECK_EQ_INT(atomic_load(&destroyed), 1);
    wf_release(x);
    wf_fn_release(NULL);
    CHECK(wf_fn_retain(NULL) == NULL);
}

static wf_status null_output_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    (void)payload;
    (void)in;
    (void)n;
    out[0] = wf_retain(in[0]);
    out[1] = NULL;
    *nout = 2;
    return WF_OK;
}

static wf_status too_many_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_retain(in[0]);
    *nout = *nout + 1; /* claims more than there was room for */
    return WF_OK;
}

static void test_fn_bad_inputs(void)
{
    atomic_store(&destroyed, 0);
    CHECK_NULL_WITH(wf_fn_new(NULL, NULL, count_destroy), WF_ERR_NULL_ARGUMENT);
    CHECK_EQ_INT(atomic_load(&destroyed), 1); /* the payload is freed on failure */
    wf_fn *fn = wf_fn_new(identity_call, NULL, NULL);
    const double v[1] = {1};
    wf_array *x = vec(v, 1);
    wf_array *out[2];
    size_t n = 2;
    CHECK_STATUS(wf_fn_call(NULL, &x, 1, out, &n), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_fn_call(fn, &x, 1, out, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_fn_call(fn, &x, 1, NULL, &n), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_fn_call(fn, NULL, 1, out, &n), WF_ERR_NULL_ARGUMENT);
    wf_array *bad[1] = {NULL};
    CHECK_STATUS(wf_fn_call(fn, bad, 1, out, &n), WF_ERR_NULL_ARGUMENT);
    wf_fn *nulls = wf_fn_new(null_output_call, NULL, NULL);
    n = 2;
    CHECK_STATUS(wf_fn_call(nulls, &x, 1, out, &n), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "NULL output 1");
    wf_fn *many = wf_fn_new(too_many_call, NULL, NULL);
    n = 1;
    CHECK_STATUS(wf_fn_call(many, &x, 1, out, &n), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    wf_fn_release(nulls);
    wf_fn_release(many);
    wf_fn_release(fn);
    wf_release(x);
}

/* ---------------------------------------------------------------- grad */

static void test_grad_simple(void)
{
    const double v[3] = {0.5, -1, 2};
    wf_array *x = vec(v, 3);
    wf_fn *f = sum_of(wf_tanh);
    wf_fn *g = wf_grad(f, NULL, 0);
    wf_array *dx = call1(g, x);
    double *d = tu_read(dx);
    for (int i = 0; CHECK(d != NULL) && i < 3; i++)
        CHECK_NEAR(d[i], 1 - tanh(v[i]) * tanh(v[i]), 1e-14);
    free(d);
    /* value_and_grad: the value, then the gradient */
    wf_fn *vg = wf_value_and_grad(f, NULL, 0);
    wf_array *outs[2] = {NULL, NULL};
    size_t n = 2;
    CHECK_OK(wf_fn_call(vg, &x, 1, outs, &n));
    CHECK_EQ_INT(n, 2);
    CHECK_NEAR(item(outs[0]), tanh(0.5) + tanh(-1.0) + tanh(2.0), 1e-14);
    d = tu_read(outs[1]);
    CHECK_NEAR(d[2], 1 - tanh(2.0) * tanh(2.0), 1e-14);
    free(d);
    wf_release(outs[0]);
    wf_release(outs[1]);
    wf_release(dx);
    wf_fn_release(vg);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(x);
}

/* f(a, b, k) = sum(a * b^2) + k (k an integer input). */
static wf_status three_inputs_call(void *payload, wf_array *const *in, size_t n,
                                   wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *b2 = wf_square(in[1]);
    wf_array *p = wf_multiply(in[0], b2);
    wf_array *s = wf_sum(p, NULL, 0, false);
    wf_array *k = wf_astype(in[2], WF_DTYPE_F64);
    wf_array *ks = wf_sum(k, NULL, 0, false);
    out[0] = wf_add(s, ks);
    *nout = 1;
    wf_release(b2);
    wf_release(p);
    wf_release(s);
    wf_release(k);
    wf_release(ks);
    return out[0] ? WF_OK : wf_last_error();
}

static void test_grad_argnums_and_integers(void)
{
    const double av[2] = {1, 2}, bv[2] = {3, -1};
    const int32_t kv[2] = {4, 5};
    const int64_t two = 2;
    wf_array *in[3] = {vec(av, 2), vec(bv, 2), wf_array_from_data(kv, &two, 1, WF_DTYPE_I32)};
    wf_fn *f = wf_fn_new(three_inputs_call, NULL, NULL);
    const int argnums[3] = {2, 1, 0};
    wf_fn *g = wf_grad(f, argnums, 3);
    wf_array *outs[3] = {NULL, NULL, NULL};
    size_t n = 3;
    CHECK_OK(wf_fn_call(g, in, 3, outs, &n));
    CHECK_EQ_INT(n, 3);
    /* integer input: zeros of its own dtype */
    CHECK_EQ_INT(wf_array_dtype(outs[0]), WF_DTYPE_I32);
    double *dk = tu_read(outs[0]), *db = tu_read(outs[1]), *da = tu_read(outs[2]);
    CHECK(dk[0] == 0 && dk[1] == 0);
    CHECK_NEAR(db[0], 2 * av[0] * bv[0], 1e-14);
    CHECK_NEAR(db[1], 2 * av[1] * bv[1], 1e-14);
    CHECK_NEAR(da[0], bv[0] * bv[0], 1e-14);
    CHECK_NEAR(da[1], bv[1] * bv[1], 1e-14);
    free(dk);
    free(db);
    free(da);
    for (int i = 0; i < 3; i++) {
        wf_release(outs[i]);
        wf_release(in[i]);
    }
    wf_fn_release(g);
    wf_fn_release(f);
}

static wf_status identity_vector_call(void *payload, wf_array *const *in, size_t n,
                                      wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_sin(in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_grad_bad_inputs(void)
{
    wf_fn *f = sum_of(wf_tanh);
    const int neg[1] = {-1}, rep[2] = {0, 0}, big[1] = {3};
    CHECK_NULL_WITH(wf_grad(NULL, NULL, 0), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_grad(f, NULL, 2), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_grad(f, neg, 1), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_value_and_grad(f, rep, 2), WF_ERR_INVALID_ARGUMENT);
    const double v[2] = {1, 2};
    wf_array *x = vec(v, 2);
    /* argnum past the call's inputs */
    wf_fn *g = wf_grad(f, big, 1);
    CHECK_NULL_WITH(call1(g, x), WF_ERR_INVALID_ARGUMENT);
    wf_fn_release(g);
    /* non-scalar output */
    wf_fn *vector_f = wf_fn_new(identity_vector_call, NULL, NULL);
    g = wf_grad(vector_f, NULL, 0);
    CHECK_NULL_WITH(call1(g, x), WF_ERR_SHAPE);
    wf_fn_release(g);
    wf_fn_release(vector_f);
    /* integer output */
    const int32_t iv[2] = {1, 2};
    const int64_t two = 2;
    wf_array *xi = wf_array_from_data(iv, &two, 1, WF_DTYPE_I32);
    wf_fn *int_f = sum_of(wf_square);
    g = wf_grad(int_f, NULL, 0);
    CHECK_NULL_WITH(call1(g, xi), WF_ERR_DTYPE);
    wf_fn_release(g);
    wf_fn_release(int_f);
    wf_release(xi);
    /* wf_vjp argument checks */
    wf_array *ct = wf_scalar(1, WF_DTYPE_F64), *dx = NULL;
    CHECK_STATUS(wf_vjp(NULL, &x, 1, &ct, 1, NULL, &dx), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_vjp(f, &x, 1, &ct, 1, NULL, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_vjp(f, NULL, 1, &ct, 1, NULL, &dx), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_vjp(f, &x, 1, &ct, 2, NULL, &dx), WF_ERR_INVALID_ARGUMENT);
    wf_array *wrong = vec(v, 2);
    CHECK_STATUS(wf_vjp(f, &x, 1, &wrong, 1, NULL, &dx), WF_ERR_SHAPE);
    wf_array *none[1] = {NULL};
    wf_clear_error();
    CHECK_STATUS(wf_vjp(f, none, 1, &ct, 1, NULL, &dx), WF_ERR_NULL_ARGUMENT);
    CHECK(dx == NULL);
    wf_clear_error();
    wf_release(wrong);
    wf_release(ct);
    wf_release(x);
    wf_fn_release(f);
}

/* ---------------------------------------------------------------- failures */

static wf_status failing_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    (void)out;
    (void)nout;
    /* a real op failure inside the function: shapes that do not broadcast */
    const double v[3] = {1, 2, 3};
    const int64_t three = 3;
    wf_array *y = wf_array_from_data(v, &three, 1, WF_DTYPE_F64);
    wf_array *bad = wf_add(in[0], y);
    wf_release(y);
    return bad ? WF_OK : wf_last_error();
}

static wf_status plain_failure_call(void *payload, wf_array *const *in, size_t n,
                                    wf_array **out, size_t *nout)
{
    (void)payload;
    (void)in;
    (void)n;
    (void)out;
    (void)nout;
    return WF_ERR_INVALID_ARGUMENT; /* no weft error recorded */
}

static void test_failing_function(void)
{
    int64_t live = wf__arrays_live();
    const double v[2] = {1, 2};
    wf_array *x = vec(v, 2);
    wf_fn *f = wf_fn_new(failing_call, NULL, NULL);
    wf_fn *g = wf_grad(f, NULL, 0);
    CHECK_NULL_WITH(call1(g, x), WF_ERR_SHAPE);
    wf_fn *f2 = wf_fn_new(plain_failure_call, NULL, NULL);
    wf_fn *g2 = wf_value_and_grad(f2, NULL, 0);
    wf_array *outs[2];
    size_t n = 2;
    CHECK_STATUS(wf_fn_call(g2, &x, 1, outs, &n), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "the function failed");
    wf_clear_error();
    wf_fn_release(g);
    wf_fn_release(f);
    wf_fn_release(g2);
    wf_fn_release(f2);
    wf_release(x);
    CHECK_EQ_INT(wf__arrays_live(), live); /* nothing leaked */
}

/* ---------------------------------------------------------------- semantics */

static wf_array *stop_then_square(wf_array *x)
{
    wf_array *s = wf_stop_gradient(x);
    wf_array *y = wf_multiply(s, x); /* d/dx (stop(x) * x) = stop(x) = x */
    wf_release(s);
    return y;
}

static void test_stop_gradient(void)
{
    const double v[2] = {3, -2};
    wf_array *x = vec(v, 2);
    wf_fn *f = sum_of(stop_then_square), *g = wf_grad(f, NULL, 0);
    wf_array *dx = call1(g, x);
    double *d = tu_read(dx);
    CHECK(d && d[0] == 3 && d[1] == -2);
    free(d);
    wf_release(dx);
    wf_fn_release(g);
    wf_fn_release(f);
    /* only stop_gradient: the gradient is zero */
    f = sum_of(wf_stop_gradient);
    g = wf_grad(f, NULL, 0);
    dx = call1(g, x);
    d = tu_read(dx);
    CHECK(d && d[0] == 0 && d[1] == 0);
    free(d);
    wf_release(dx);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(x);
}

/* Zero-gradient ops (MLX gives zeros for these): floor, sign, round and
 * comparisons feeding a where. */
static wf_array *piecewise(wf_array *x)
{
    wf_array *f = wf_floor(x), *s = wf_sign(x), *r = wf_round(x);
    wf_array *a = wf_add(f, s), *b = wf_add(a, r);
    wf_release(f);
    wf_release(s);
    wf_release(r);
    wf_release(a);
    return b;
}

static void test_zero_gradients(void)
{
    const double v[3] = {0.3, 1.7, -2.2};
    wf_array *x = vec(v, 3);
    wf_fn *f = sum_of(piecewise), *g = wf_grad(f, NULL, 0);
    wf_array *dx = call1(g, x);
    double *d = tu_read(dx);
    CHECK(d && d[0] == 0 && d[1] == 0 && d[2] == 0);
    free(d);
    wf_release(dx);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(x);
}

static wf_status copy_kernel(void *payload, const wf_custom_call *call)
{
    (void)payload;
    memcpy(call->output, call->inputs[0], (size_t)call->input_shapes[0][0] * sizeof(double));
    return WF_OK;
}

static wf_array *opaque(wf_array *x)
{
    return wf_custom("my_kernel", copy_kernel, NULL, NULL, &x, 1, wf_array_shape(x), 1,
                     WF_DTYPE_F64);
}

static void test_non_differentiable(void)
{
    const double v[2] = {1, 2};
    wf_array *x = vec(v, 2);
    wf_fn *f = sum_of(opaque), *g = wf_grad(f, NULL, 0);
    CHECK_NULL_WITH(call1(g, x), WF_ERR_UNSUPPORTED);
    wf_fn_release(g);
    g = wf_grad(f, NULL, 0);
    wf_array *r = call1(g, x);
    CHECK(r == NULL);
    CHECK_STR_CONTAINS(wf_last_error_message(), "my_kernel");
    wf_clear_error();
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(x);
}

/* Data-dependent control flow: evaluates an intermediate inside the
 * function and branches on it. */
static wf_status branchy_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *s = wf_sum(in[0], NULL, 0, false);
    double total = 0;
    wf_status st = wf_array_item(s, &total);
    if (st == WF_OK) /* sum(x)^2 if positive, else sum(sin x) */
        out[0] = total > 0 ? wf_square(s) : wf_sum(wf_sin(in[0]), NULL, 0, false);
    wf_release(s);
    *nout = 1;
    return st != WF_OK ? st : out[0] ? WF_OK : wf_last_error();
}

static void test_data_dependent(void)
{
    wf_scope_begin(); /* the sin above is released by the scope */
    const double v[2] = {1, 2};
    wf_array *x = vec(v, 2);
    wf_fn *f = wf_fn_new(branchy_call, NULL, NULL), *g = wf_grad(f, NULL, 0);
    wf_array *dx = call1(g, x);
    double *d = tu_read(dx);
    CHECK(d && d[0] == 6 && d[1] == 6); /* 2 sum(x) */
    free(d);
    const double w[2] = {-1, -2};
    wf_array *y = vec(w, 2);
    wf_array *dy = call1(g, y);
    d = tu_read(dy);
    CHECK(d != NULL);
    CHECK_NEAR(d[0], cos(-1.0), 1e-14);
    free(d);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_scope_end();
}

/* ---------------------------------------------------------------- higher order */

/* grad of (x -> sum(w * grad f(x))) against finite differences of that
 * same first-order gradient (itself checked against finite differences in
 * test_transforms_ops). */
static void check_second_order(wf_fn *f, wf_array *x, wf_array *w, double tol)
{
    wf_fn *g = wf_grad(f, NULL, 0);
    wf_fn *wg = tu_weighted_fn(g, w);
    wf_fn *gg = wf_grad(wg, NULL, 0);
    wf_array *h = call1(gg, x);
    double *hv = tu_read(h), *fd = tu_fd_grad_fn(wg, x);
    if (CHECK(hv != NULL))
        tu_check_values("second order", "hvp", hv, fd, wf_array_size(x), tol);
    free(hv);
    free(fd);
    wf_release(h);
    wf_fn_release(gg);
    wf_fn_release(wg);
    wf_fn_release(g);
}

static void test_grad_of_grad_tanh(void)
{
    const double v[3] = {0.3, -0.8, 1.1}, ones[3] = {1, 1, 1};
    wf_array *x = vec(v, 3), *w = vec(ones, 3);
    wf_fn *f = sum_of(wf_tanh);
    check_second_order(f, x, w, 1e-6);
    /* exactly: d/dx tanh'(x) = -2 tanh(x) (1 - tanh(x)^2) */
    wf_fn *g = wf_grad(f, NULL, 0), *wg = tu_weighted_fn(g, w), *gg = wf_grad(wg, NULL, 0);
    wf_array *h = call1(gg, x);
    double *hv = tu_read(h);
    for (int i = 0; CHECK(hv != NULL) && i < 3; i++) {
        double t = tanh(v[i]);
        CHECK_NEAR(hv[i], -2 * t * (1 - t * t), 1e-13);
    }
    /* third order composes too */
    wf_fn *wgg = tu_weighted_fn(gg, w), *ggg = wf_grad(wgg, NULL, 0);
    wf_array *h3 = call1(ggg, x);
    double *h3v = tu_read(h3);
    for (int i = 0; CHECK(h3v != NULL) && i < 3; i++) {
        double t = tanh(v[i]), s = 1 - t * t;
        CHECK_NEAR(h3v[i], -2 * s * s + 4 * t * t * s, 1e-12);
    }
    free(h3v);
    wf_release(h3);
    wf_fn_release(ggg);
    wf_fn_release(wgg);
    free(hv);
    wf_release(h);
    wf_fn_release(gg);
    wf_fn_release(wg);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(x);
    wf_release(w);
}

/* Softmax cross-entropy of logits (2, 4) against fixed labels:
 * mean over rows of logsumexp(z) - z[label]. */
static wf_status cross_entropy_call(void *payload, wf_array *const *in, size_t n,
                                    wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    const int32_t labels[2] = {3, 1};
    const int64_t shape[2] = {2, 1};
    const int last = -1;
    wf_array *lab = wf_array_from_data(labels, shape, 2, WF_DTYPE_I32);
    wf_array *picked = wf_take_along_axis(in[0], lab, 1);
    wf_array *lse = wf_logsumexp(in[0], &last, 1, true);
    wf_array *loss = wf_mean(wf_subtract(lse, picked), NULL, 0, false);
    out[0] = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_grad_of_grad_cross_entropy(void)
{
    const int64_t shape[2] = {2, 4};
    wf_array *z = tu_input(shape, 2, -2, 2, 3, false);
    wf_array *w = tu_input(shape, 2, -1, 1, 4, false);
    wf_fn *f = wf_fn_new(cross_entropy_call, NULL, NULL);
    /* first order: (softmax(z) - onehot) / rows */
    wf_fn *g = wf_grad(f, NULL, 0);
    wf_array *dz = call1(g, z);
    double *d = tu_read(dz), *zv = tu_read(z);
    const int labels[2] = {3, 1};
    for (int r = 0; CHECK(d != NULL) && r < 2; r++) {
        double m = 0;
        for (int c = 0; c < 4; c++)
            m += exp(zv[r * 4 + c]);
        for (int c = 0; c < 4; c++)
            CHECK_NEAR(d[r * 4 + c], (exp(zv[r * 4 + c]) / m - (c == labels[r])) / 2, 1e-14);
    }
    free(d);
    free(zv);
    wf_release(dz);
    check_second_order(f, z, w, 1e-6);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(z);
    wf_release(w);
}

int main(void)
{
    RUN_TEST(test_fn_basics);
    RUN_TEST(test_fn_bad_inputs);
    RUN_TEST(test_grad_simple);
    RUN_TEST(test_grad_argnums_and_integers);
    RUN_TEST(test_grad_bad_inputs);
    RUN_TEST(test_failing_function);
    RUN_TEST(test_stop_gradient);
    RUN_TEST(test_zero_gradients);
    RUN_TEST(test_non_differentiable);
    RUN_TEST(test_data_dependent);
    RUN_TEST(test_grad_of_grad_tanh);
    RUN_TEST(test_grad_of_grad_cross_entropy);
    return TEST_SUMMARY();
}
