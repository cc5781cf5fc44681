/*
 * Forward mode and batching through the public API: wf_jvp (bad inputs,
 * zero tangents, several outputs), the Hessian-vector product as a jvp of a
 * function that calls wf_vjp, wf_vmap's axes and errors, per-example
 * gradients of an MLP (vmap of grad) against a loop, and the number of
 * kernels a vmap runs not growing with the batch.
 */
#include "core/array.h"
#include "transforms_util.h"

static wf_array *call1(wf_fn *fn, wf_array *x)
{
    wf_array *out = NULL;
    size_t n = 1;
    if (wf_fn_call(fn, &x, 1, &out, &n) != WF_OK)
        return NULL;
    return out;
}

/* (sin(x) * y, sum(x)) */
static wf_status two_outputs_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *s = wf_sin(in[0]);
    out[0] = wf_multiply(s, in[1]);
    out[1] = wf_sum(in[0], NULL, 0, false);
    wf_release(s);
    *nout = 2;
    return out[0] && out[1] ? WF_OK : wf_last_error();
}

static void test_jvp_api(void)
{
    const int64_t shape[1] = {3};
    wf_array *x = tu_input(shape, 1, -1, 1, 1, false), *y = tu_input(shape, 1, -1, 1, 2, false);
    wf_array *tx = tu_input(shape, 1, -1, 1, 3, false);
    wf_fn *f = wf_fn_new(two_outputs_call, NULL, NULL);
    wf_array *in[2] = {x, y}, *t[2] = {tx, NULL}; /* y's tangent is zero */
    wf_array *outs[2] = {NULL, NULL}, *touts[2] = {NULL, NULL};
    size_t n = 2;
    CHECK_OK(wf_jvp(f, in, 2, t, outs, touts, &n));
    CHECK_EQ_INT(n, 2);
    double *xv = tu_read(x), *yv = tu_read(y), *tv = tu_read(tx);
    double *t0 = tu_read(touts[0]), *t1 = tu_read(touts[1]);
    double sum_t = 0;
    for (int i = 0; CHECK(t0 && t1) && i < 3; i++) {
        CHECK_NEAR(t0[i], cos(xv[i]) * yv[i] * tv[i], 1e-14);
        sum_t += tv[i];
    }
    if (t1)
        CHECK_NEAR(t1[0], sum_t, 1e-14);
    free(xv);
    free(yv);
    free(tv);
    free(t0);
    free(t1);
    for (int i = 0; i < 2; i++) {
        wf_release(outs[i]);
        wf_release(touts[i]);
    }
    /* outputs may be NULL; room must suffice */
    n = 2;
    CHECK_OK(wf_jvp(f, in, 2, t, NULL, touts, &n));
    wf_release(touts[0]);
    wf_release(touts[1]);
    n = 1;
    CHECK_STATUS(wf_jvp(f, in, 2, t, NULL, touts, &n), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_jvp(NULL, in, 2, t, NULL, touts, &n), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_jvp(f, in, 2, NULL, NULL, touts, &n), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_jvp(f, in, 2, t, NULL, NULL, &n), WF_ERR_NULL_ARGUMENT);
    wf_array *wrong[2] = {y, wf_scalar(1, WF_DTYPE_F64)};
    n = 2;
    CHECK_STATUS(wf_jvp(f, in, 2, wrong, NULL, touts, &n), WF_ERR_SHAPE);
    wf_clear_error();
    wf_release(wrong[1]);
    wf_fn_release(f);
    wf_release(x);
    wf_release(y);
    wf_release(tx);
}

/* f(x) = sum(exp(x) * sin(x)^2), and its gradient through wf_vjp. */
static wf_status energy_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *y = wf_sum(wf_multiply(wf_exp(in[0]), wf_square(wf_sin(in[0]))), NULL, 0, false);
    out[0] = y ? wf_keep(y) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status grad_by_vjp_call(void *payload, wf_array *const *in, size_t n,
                                  wf_array **out, size_t *nout)
{
    wf_fn *f = payload;
    wf_array *one = wf_scalar(1, WF_DTYPE_F64);
    wf_status st = wf_vjp(f, in, n, &one, 1, NULL, out);
    wf_release(one);
    *nout = 1;
    return st;
}

static void test_hessian_vector_product(void)
{
    const int64_t shape[1] = {4};
    wf_array *x = tu_input(shape, 1, -1, 1, 5, false), *v = tu_input(shape, 1, -1, 1, 6, false);
    wf_fn *f = wf_fn_new(energy_call, NULL, NULL);
    wf_fn *g = wf_fn_new(grad_by_vjp_call, f, NULL);
    wf_array *hv = NULL;
    size_t n = 1;
    CHECK_OK(wf_jvp(g, &x, 1, &v, NULL, &hv, &n));
    /* central differences of the gradient along v */
    wf_array *xp = tu_axpy(x, TU_EPS, v), *xm = tu_axpy(x, -TU_EPS, v);
    wf_array *gp = call1(g, xp), *gm = call1(g, xm);
    double *h = tu_read(hv), *a = tu_read(gp), *b = tu_read(gm);
    double fd[4];
    for (int i = 0; i < 4; i++)
        fd[i] = a && b ? (a[i] - b[i]) / (2 * TU_EPS) : NAN;
    if (CHECK(h != NULL))
        tu_check_values("hvp", "H v", h, fd, 4, 1e-6);
    /* and the reverse-over-reverse route agrees */
    wf_fn *wg = tu_weighted_fn(g, v), *gg = wf_grad(wg, NULL, 0);
    wf_array *hv2 = call1(gg, x);
    double *h2 = tu_read(hv2);
    if (CHECK(h2 && h))
        tu_check_values("hvp", "reverse over reverse", h2, h, 4, 1e-12);
    free(h);
    free(h2);
    free(a);
    free(b);
    wf_release(hv);
    wf_release(hv2);
    wf_release(xp);
    wf_release(xm);
    wf_release(gp);
    wf_release(gm);
    wf_fn_release(gg);
    wf_fn_release(wg);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_release(x);
    wf_release(v);
}

/* ---------------------------------------------------------------- vmap */

/* (x @ w, w * 2) with w not mapped. */
static wf_status affine_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *two = wf_scalar(2, WF_DTYPE_F64);
    out[0] = wf_matmul(in[0], in[1]);
    out[1] = wf_multiply(in[1], two);
    wf_release(two);
    *nout = 2;
    return out[0] && out[1] ? WF_OK : wf_last_error();
}

static void test_vmap_axes(void)
{
    wf_scope_begin(); /* releases the temporaries built inline below */
    const int64_t xs[2] = {3, 5}, ws[2] = {3, 2};
    wf_array *x = tu_input(xs, 2, -1, 1, 1, false), *w = tu_input(ws, 2, -1, 1, 2, false);
    wf_fn *f = wf_fn_new(affine_call, NULL, NULL);
    /* x mapped over its axis 1 (5 examples of 3), outputs stacked on -1
     * and not mapped */
    const int in_axes[2] = {1, WF_VMAP_NOT_MAPPED}, out_axes[2] = {-1, WF_VMAP_NOT_MAPPED};
    wf_fn *vf = wf_vmap(f, in_axes, 2, out_axes, 2);
    wf_array *in[2] = {x, w}, *outs[2] = {NULL, NULL};
    size_t n = 2;
    CHECK_OK(wf_fn_call(vf, in, 2, outs, &n));
    wf_array *want = wf_matmul(wf_transpose(x, NULL, 0), w); /* (5, 2) */
    wf_array *want_t = wf_transpose(want, NULL, 0);            /* (2, 5) */
    CHECK_EQ_INT(wf_array_shape(outs[0])[0], 2);
    CHECK_EQ_INT(wf_array_shape(outs[0])[1], 5);
    double *g = tu_read(outs[0]), *e = tu_read(want_t);
    if (CHECK(g && e))
        tu_check_values("vmap axes", "x @ w", g, e, 10, 1e-14);
    CHECK_EQ_INT(wf_array_ndim(outs[1]), 2); /* w * 2, unbatched */
    free(g);
    free(e);
    wf_release(outs[0]);
    wf_release(outs[1]);
    wf_release(want);
    wf_release(want_t);
    wf_fn_release(vf);
    /* a batched output may not be NOT_MAPPED */
    const int bad_out[2] = {WF_VMAP_NOT_MAPPED, 0};
    vf = wf_vmap(f, in_axes, 2, bad_out, 2);
    n = 2;
    CHECK_STATUS(wf_fn_call(vf, in, 2, outs, &n), WF_ERR_INVALID_ARGUMENT);
    wf_fn_release(vf);
    /* bad axes, counts, sizes */
    const int far[2] = {2, 0}, none[2] = {WF_VMAP_NOT_MAPPED, WF_VMAP_NOT_MAPPED};
    const int both[2] = {1, 0};
    vf = wf_vmap(f, far, 2, NULL, 0);
    CHECK_STATUS(wf_fn_call(vf, in, 2, outs, &n), WF_ERR_AXIS);
    wf_fn_release(vf);
    vf = wf_vmap(f, none, 2, NULL, 0);
    CHECK_STATUS(wf_fn_call(vf, in, 2, outs, &n), WF_ERR_INVALID_ARGUMENT);
    wf_fn_release(vf);
    vf = wf_vmap(f, both, 2, NULL, 0); /* 5 and 3 examples */
    CHECK_STATUS(wf_fn_call(vf, in, 2, outs, &n), WF_ERR_SHAPE);
    wf_fn_release(vf);
    vf = wf_vmap(f, in_axes, 1, NULL, 0);
    CHECK_STATUS(wf_fn_call(vf, in, 2, outs, &n), WF_ERR_INVALID_ARGUMENT);
    wf_fn_release(vf);
    vf = wf_vmap(f, in_axes, 2, out_axes, 1);
    CHECK_STATUS(wf_fn_call(vf, in, 2, outs, &n), WF_ERR_INVALID_ARGUMENT);
    wf_fn_release(vf);
    CHECK_NULL_WITH(wf_vmap(NULL, NULL, 0, NULL, 0), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_vmap(f, NULL, 2, NULL, 0), WF_ERR_NULL_ARGUMENT);
    wf_fn_release(f);
    wf_scope_end();
}

/* ---------------------------------------------------------------- MLP */

enum { IN = 4, HID = 5, OUT = 3 };

/* loss(w1, b1, w2, x, label) = cross-entropy(tanh(x @ w1 + b1) @ w2) for one
 * example x (IN,) with an int32 label (). */
static wf_status mlp_loss_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *h = wf_tanh(wf_add(wf_matmul(in[3], in[0]), in[1]));
    wf_array *logits = wf_matmul(h, in[2]);
    const int zero = 0;
    wf_array *lab = wf_expand_dims(in[4], &zero, 1);
    wf_array *picked = wf_take_along_axis(logits, lab, 0);
    wf_array *lse = wf_logsumexp(logits, &zero, 1, true);
    wf_array *loss = wf_sum(wf_subtract(lse, picked), NULL, 0, false);
    out[0] = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

typedef struct mlp {
    wf_array *w1, *b1, *w2;
} mlp;

static mlp mlp_new(void)
{
    const int64_t s1[2] = {IN, HID}, sb[1] = {HID}, s2[2] = {HID, OUT};
    return (mlp){tu_input(s1, 2, -1, 1, 7, false), tu_input(sb, 1, -1, 1, 8, false),
                 tu_input(s2, 2, -1, 1, 9, false)};
}

static void mlp_free(mlp *m)
{
    wf_release(m->w1);
    wf_release(m->b1);
    wf_release(m->w2);
}

/* Per-example gradients of w1, b1, w2: vmap(grad(loss)) with the weights
 * shared and the examples mapped. Returns 3 batched gradients. */
static wf_status per_example_grads(wf_fn *loss, const mlp *m, wf_array *xs, wf_array *labels,
                                   wf_array **grads)
{
    const int argnums[3] = {0, 1, 2};
    wf_fn *g = wf_grad(loss, argnums, 3);
    const int in_axes[5] = {WF_VMAP_NOT_MAPPED, WF_VMAP_NOT_MAPPED, WF_VMAP_NOT_MAPPED, 0, 0};
    wf_fn *vg = wf_vmap(g, in_axes, 5, NULL, 0);
    wf_array *in[5] = {m->w1, m->b1, m->w2, xs, labels};
    size_t n = 3;
    wf_status st = wf_fn_call(vg, in, 5, grads, &n);
    wf_fn_release(vg);
    wf_fn_release(g);
    return st;
}

static wf_array *labels_of(int64_t batch)
{
    int32_t *l = malloc((size_t)batch * sizeof *l);
    for (int64_t b = 0; b < batch; b++)
        l[b] = (int32_t)((b * 7 + 1) % OUT);
    wf_array *a = wf_array_from_data(l, &batch, 1, WF_DTYPE_I32);
    free(l);
    return a;
}

static void test_per_example_gradients(void)
{
    enum { B = 6 };
    mlp m = mlp_new();
    const int64_t xs_shape[2] = {B, IN};
    wf_array *xs = tu_input(xs_shape, 2, -1, 1, 10, false), *labels = labels_of(B);
    wf_fn *loss = wf_fn_new(mlp_loss_call, NULL, NULL);
    wf_array *grads[3] = {NULL, NULL, NULL};
    CHECK_OK(per_example_grads(loss, &m, xs, labels, grads));
    const int argnums[3] = {0, 1, 2};
    wf_fn *g = wf_grad(loss, argnums, 3);
    for (int64_t b = 0; b < B; b++) {
        wf_scope_begin();
        const int64_t start[2] = {b, 0}, stop[2] = {b + 1, IN}, step[2] = {1, 1};
        const int64_t ex_shape[1] = {IN};
        wf_array *xb = wf_reshape(wf_slice(xs, start, stop, step), ex_shape, 1);
        const int64_t ls = b, le = b + 1, one = 1;
        wf_array *lb = wf_reshape(wf_slice(labels, &ls, &le, &one), NULL, 0);
        wf_array *in[5] = {m.w1, m.b1, m.w2, xb, lb}, *want[3];
        size_t n = 3;
        if (!CHECK_OK(wf_fn_call(g, in, 5, want, &n))) {
            wf_scope_end();
            break;
        }
        for (int k = 0; k < 3; k++) {
            /* example b of the batched gradient */
            const int64_t count = wf_array_size(want[k]);
            double *got = tu_read(grads[k]), *w = tu_read(want[k]);
            if (CHECK(got && w))
                tu_check_values("per-example", "grad", got + b * count, w, count, 1e-12);
            free(got);
            free(w);
            wf_release(want[k]);
        }
        wf_scope_end();
    }
    for (int k = 0; k < 3; k++)
        wf_release(grads[k]);
    wf_fn_release(g);
    wf_fn_release(loss);
    wf_release(xs);
    wf_release(labels);
    mlp_free(&m);
}

/* Kernels run evaluating vmap(grad(loss)) over `batch` examples. */
static uint64_t kernels_for_batch(wf_fn *loss, const mlp *m, int64_t batch)
{
    const int64_t xs_shape[2] = {batch, IN};
    wf_array *xs = tu_input(xs_shape, 2, -1, 1, 12, false), *labels = labels_of(batch);
    wf_array *grads[3] = {NULL, NULL, NULL};
    uint64_t before = wf__kernels_run();
    if (CHECK_OK(per_example_grads(loss, m, xs, labels, grads)))
        CHECK_OK(wf_eval(grads, 3));
    uint64_t ran = wf__kernels_run() - before;
    for (int k = 0; k < 3; k++)
        wf_release(grads[k]);
    wf_release(xs);
    wf_release(labels);
    return ran;
}

static void test_vmap_kernel_count(void)
{
    mlp m = mlp_new();
    wf_array *w[3] = {m.w1, m.b1, m.w2};
    CHECK_OK(wf_eval(w, 3));
    wf_fn *loss = wf_fn_new(mlp_loss_call, NULL, NULL);
    const uint64_t one = kernels_for_batch(loss, &m, 1);
    const uint64_t many = kernels_for_batch(loss, &m, 64);
    CHECK(one > 10);
    CHECK_EQ_INT(many, one);
    printf("    vmap(grad(mlp)): %llu kernels for batch 1, %llu for batch 64\n",
           (unsigned long long)one, (unsigned long long)many);
    wf_fn_release(loss);
    mlp_free(&m);
}

/* x (3,) -> tanh(x) . w for a fixed w: one example's score. */
static wf_status score_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    wf_array *w = payload;
    wf_array *t = wf_tanh(in[0]);
    out[0] = wf_sum(wf_multiply(t, w), NULL, 0, false);
    wf_release(t);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* sum over examples of vmap(score): grad of a vmap. */
static wf_status batch_total_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    wf_fn *vf = payload;
    wf_array *scores = NULL;
    size_t ns = 1;
    wf_status st = wf_fn_call(vf, in, n, &scores, &ns);
    if (st != WF_OK)
        return st;
    out[0] = wf_sum(scores, NULL, 0, false);
    wf_release(scores);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_grad_of_vmap(void)
{
    wf_scope_begin();
    const int64_t ws[1] = {3}, xs[2] = {4, 3};
    wf_array *w = tu_input(ws, 1, -1, 1, 1, false), *x = tu_input(xs, 2, -1, 1, 2, false);
    wf_fn *score = wf_fn_new(score_call, w, NULL);
    wf_fn *vf = wf_vmap(score, NULL, 0, NULL, 0);
    wf_fn *total = wf_fn_new(batch_total_call, vf, NULL), *g = wf_grad(total, NULL, 0);
    wf_array *dx = call1(g, x);
    /* d/dx sum_b tanh(x_b) . w = (1 - tanh(x)^2) * w */
    double *d = tu_read(dx), *xv = tu_read(x), *wv = tu_read(w);
    for (int i = 0; CHECK(d != NULL) && i < 12; i++) {
        const double t = tanh(xv[i]);
        CHECK_NEAR(d[i], (1 - t * t) * wv[i % 3], 1e-14);
    }
    free(d);
    free(xv);
    free(wv);
    wf_fn_release(g);
    wf_fn_release(total);
    wf_fn_release(vf);
    wf_fn_release(score);
    wf_scope_end();
}

/* vmap of vmap: scores of a (2, 4) grid of examples. */
static void test_vmap_of_vmap(void)
{
    wf_scope_begin();
    const int64_t ws[1] = {3}, xs[3] = {2, 4, 3};
    wf_array *w = tu_input(ws, 1, -1, 1, 3, false), *x = tu_input(xs, 3, -1, 1, 4, false);
    wf_fn *score = wf_fn_new(score_call, w, NULL);
    const int inner_axes[1] = {0}, outer_axes[1] = {1};
    wf_fn *inner = wf_vmap(score, inner_axes, 1, NULL, 0);
    wf_fn *outer = wf_vmap(inner, outer_axes, 1, NULL, 0); /* maps x's axis 1 first */
    wf_array *y = call1(outer, x);                          /* (4, 2) */
    CHECK_EQ_INT(wf_array_ndim(y), 2);
    CHECK_EQ_INT(wf_array_dim(y, 0), 4);
    double *d = tu_read(y), *xv = tu_read(x), *wv = tu_read(w);
    for (int j = 0; CHECK(d != NULL) && j < 4; j++)
        for (int i = 0; i < 2; i++) {
            double want = 0;
            for (int k = 0; k < 3; k++)
                want += tanh(xv[(i * 4 + j) * 3 + k]) * wv[k];
            CHECK_NEAR(d[j * 2 + i], want, 1e-14);
        }
    free(d);
    free(xv);
    free(wv);
    wf_fn_release(outer);
    wf_fn_release(inner);
    wf_fn_release(score);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_jvp_api);
    RUN_TEST(test_hessian_vector_product);
    RUN_TEST(test_vmap_axes);
    RUN_TEST(test_per_example_gradients);
    RUN_TEST(test_vmap_kernel_count);
    RUN_TEST(test_grad_of_vmap);
    RUN_TEST(test_vmap_of_vmap);
    return TEST_SUMMARY();
}
