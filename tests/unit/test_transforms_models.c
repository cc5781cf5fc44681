/*
 * Whole models through grad: an MLP and a transformer block (embedding,
 * rms_norm, causal attention through scaled_dot_product_attention, a silu
 * MLP, cross-entropy), every parameter's gradient against central finite
 * differences in float64. Also: attention's training path (taken only
 * inside a grad trace of the calling thread) gives the fused kernel's
 * values, masked rows included.
 */
#include "core/array.h"
#include "ops/fast.h"
#include "transforms_util.h"

/* Central differences of a scalar function of n inputs, for every element of
 * input i, against grads[i]. */
static bool check_all_grads(const char *name, wf_fn *loss, wf_array *const *params, size_t n,
                            double tol)
{
    int argnums[16];
    for (size_t i = 0; i < n; i++)
        argnums[i] = (int)i;
    wf_fn *g = wf_grad(loss, argnums, n);
    wf_array *grads[16] = {NULL};
    size_t ng = n;
    bool ok = CHECK_OK(wf_fn_call(g, params, n, grads, &ng)) && CHECK_EQ_INT(ng, n);
    for (size_t i = 0; ok && i < n; i++) {
        const int64_t count = wf_array_size(params[i]);
        double *gv = tu_read(grads[i]);
        double *fd = malloc(((size_t)count + 1) * sizeof *fd);
        for (int64_t k = 0; k < count; k++) {
            double l[2] = {NAN, NAN};
            for (int s = 0; s < 2; s++) {
                wf_array *moved[16];
                for (size_t j = 0; j < n; j++)
                    moved[j] = j == i ? tu_perturbed(params[j], k, s ? -TU_EPS : TU_EPS)
                                      : params[j];
                wf_array *out = NULL;
                size_t one = 1;
                if (wf_fn_call(loss, moved, n, &out, &one) == WF_OK)
                    wf_array_item(out, &l[s]);
                wf_release(out);
                wf_release(moved[i]);
            }
            fd[k] = (l[0] - l[1]) / (2 * TU_EPS);
        }
        char what[32];
        snprintf(what, sizeof what, "param %zu", i);
        ok = CHECK(gv != NULL) && tu_check_values(name, what, gv, fd, count, tol);
        free(gv);
        free(fd);
    }
    for (size_t i = 0; i < n; i++)
        wf_release(grads[i]);
    wf_fn_release(g);
    return ok;
}

/* ---------------------------------------------------------------- MLP */

/* (w1, b1, w2, b2): mean((gelu(x @ w1 + b1) @ w2 + b2 - y)^2) for fixed x, y */
static wf_status mlp_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)n;
    wf_array *const *data = payload; /* x, y */
    wf_scope_begin();
    wf_array *h = wf_gelu(wf_add(wf_matmul(data[0], in[0]), in[1]));
    wf_array *pred = wf_add(wf_matmul(h, in[2]), in[3]);
    wf_array *loss = wf_mean(wf_square(wf_subtract(pred, data[1])), NULL, 0, false);
    out[0] = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_mlp(void)
{
    const int64_t xs[2] = {5, 3}, ys[2] = {5, 2}, w1s[2] = {3, 4}, b1s[1] = {4};
    const int64_t w2s[2] = {4, 2}, b2s[1] = {2};
    wf_array *data[2] = {tu_input(xs, 2, -1, 1, 1, false), tu_input(ys, 2, -1, 1, 2, false)};
    wf_array *params[4] = {tu_input(w1s, 2, -1, 1, 3, false), tu_input(b1s, 1, -1, 1, 4, false),
                           tu_input(w2s, 2, -1, 1, 5, false), tu_input(b2s, 1, -1, 1, 6, false)};
    wf_fn *loss = wf_fn_new(mlp_call, data, NULL);
    check_all_grads("mlp", loss, params, 4, 1e-6);
    wf_fn_release(loss);
    for (int i = 0; i < 4; i++)
        wf_release(params[i]);
    wf_release(data[0]);
    wf_release(data[1]);
}

/* ---------------------------------------------------------------- transformer block */

enum { VOCAB = 7, DIM = 4, HEADS = 2, SEQ = 3 };

/* params: embedding (VOCAB, DIM), norm weight (DIM), wq, wk, wv, wo (DIM,
 * DIM), w_up (DIM, 2 DIM), w_down (2 DIM, DIM), head (DIM, VOCAB).
 * payload: tokens (SEQ,) and targets (SEQ, 1), int32. */
static wf_status block_call(void *payload, wf_array *const *p, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    wf_array *const *data = payload;
    wf_scope_begin();
    wf_array *x = wf_take(p[0], data[0], 0); /* (SEQ, DIM) */
    wf_array *h = wf_rms_norm(x, p[1], 1e-5);
    const int64_t split[3] = {SEQ, HEADS, DIM / HEADS};
    const int perm[3] = {1, 0, 2};
    wf_array *q = wf_transpose(wf_reshape(wf_matmul(h, p[2]), split, 3), perm, 3);
    wf_array *k = wf_transpose(wf_reshape(wf_matmul(h, p[3]), split, 3), perm, 3);
    wf_array *v = wf_transpose(wf_reshape(wf_matmul(h, p[4]), split, 3), perm, 3);
    wf_array *a = wf_scaled_dot_product_attention(q, k, v, 0.7, NULL, true); /* (H, S, d) */
    const int64_t merged[2] = {SEQ, DIM};
    wf_array *att = wf_matmul(wf_reshape(wf_transpose(a, perm, 3), merged, 2), p[5]);
    wf_array *r = wf_add(x, att);
    wf_array *m = wf_matmul(wf_silu(wf_matmul(wf_rms_norm(r, p[1], 1e-5), p[6])), p[7]);
    wf_array *logits = wf_matmul(wf_add(r, m), p[8]); /* (SEQ, VOCAB) */
    const int last = -1;
    wf_array *lse = wf_logsumexp(logits, &last, 1, true);
    wf_array *picked = wf_take_along_axis(logits, data[1], 1);
    wf_array *loss = wf_mean(wf_subtract(lse, picked), NULL, 0, false);
    out[0] = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_transformer_block(void)
{
    const int32_t tokens[SEQ] = {3, 0, 6}, targets[SEQ] = {0, 6, 2};
    const int64_t seq = SEQ, tshape[2] = {SEQ, 1};
    wf_array *data[2] = {wf_array_from_data(tokens, &seq, 1, WF_DTYPE_I32),
                         wf_array_from_data(targets, tshape, 2, WF_DTYPE_I32)};
    const int64_t shapes[9][2] = {{VOCAB, DIM}, {DIM, 0},     {DIM, DIM},
                                  {DIM, DIM},   {DIM, DIM},   {DIM, DIM},
                                  {DIM, 2 * DIM}, {2 * DIM, DIM}, {DIM, VOCAB}};
    wf_array *params[9];
    for (int i = 0; i < 9; i++)
        params[i] = tu_input(shapes[i], i == 1 ? 1 : 2, -0.8, 0.8, 20 + (uint32_t)i, false);
    wf_fn *loss = wf_fn_new(block_call, data, NULL);
    const uint64_t before = wf__sdpa_training_path_calls();
    check_all_grads("transformer block", loss, params, 9, 1e-6);
    /* the grad trace took attention's training path; the direct calls of the
     * finite differences did not */
    CHECK_EQ_INT(wf__sdpa_training_path_calls() - before, 1);
    wf_fn_release(loss);
    for (int i = 0; i < 9; i++)
        wf_release(params[i]);
    wf_release(data[0]);
    wf_release(data[1]);
}

/* ---------------------------------------------------------------- attention paths */

static void compare_paths(const char *name, wf_array *q, wf_array *k, wf_array *v,
                          wf_array *mask, int mask_kind, bool causal)
{
    wf_array *mb = NULL;
    if (mask) { /* the composition takes the mask broadcast, as the op makes it */
        int64_t shape[WF_MAX_NDIM];
        const int n = wf_array_ndim(q);
        memcpy(shape, wf_array_shape(q), (size_t)n * sizeof *shape);
        shape[n - 1] = wf_array_shape(k)[wf_array_ndim(k) - 2];
        mb = wf_broadcast_to(mask, shape, n);
    }
    wf_array *fused = wf_scaled_dot_product_attention(q, k, v, 0.6, mask, causal);
    wf_array *comp = wf__sdpa_composed(q, k, v, mb, mask_kind, 0.6, causal);
    double *a = tu_read(fused), *b = tu_read(comp);
    if (CHECK(a && b))
        tu_check_values(name, "composed vs fused", b, a, wf_array_size(fused), 1e-12);
    free(a);
    free(b);
    wf_release(fused);
    wf_release(comp);
    wf_release(mb);
}

static void test_attention_paths(void)
{
    const int64_t qs[3] = {2, 3, 4}, ks[3] = {2, 5, 4}, vs[3] = {2, 5, 3};
    wf_array *q = tu_input(qs, 3, -1, 1, 1, false), *k = tu_input(ks, 3, -1, 1, 2, false);
    wf_array *v = tu_input(vs, 3, -1, 1, 3, false);
    compare_paths("plain", q, k, v, NULL, 0, false);
    compare_paths("causal", q, k, v, NULL, 0, true);
    bool m[15];
    for (int i = 0; i < 15; i++)
        m[i] = i / 5 != 2 && i % 2 == 0; /* row 2 sees nothing */
    const int64_t ms[2] = {3, 5};
    wf_array *bm = wf_array_from_data(m, ms, 2, WF_DTYPE_BOOL);
    compare_paths("bool mask", q, k, v, bm, 2, false);
    compare_paths("bool mask causal", q, k, v, bm, 2, true);
    double am[15];
    for (int i = 0; i < 15; i++)
        am[i] = i / 5 == 1 ? -INFINITY : 0.1 * i;
    wf_array *addm = wf_array_from_data(am, ms, 2, WF_DTYPE_F64);
    compare_paths("additive mask", q, k, v, addm, 1, false);
    /* grouped-query heads: 4 query heads over 2 kv heads */
    const int64_t gq[4] = {1, 4, 3, 2}, gk[4] = {1, 2, 5, 2};
    wf_array *q4 = tu_input(gq, 4, -1, 1, 4, false), *k4 = tu_input(gk, 4, -1, 1, 5, false);
    wf_array *v4 = tu_input(gk, 4, -1, 1, 6, false);
    compare_paths("grouped", q4, k4, v4, NULL, 0, true);
    /* no training path outside grad */
    const uint64_t before = wf__sdpa_training_path_calls();
    wf_array *o = wf_scaled_dot_product_attention(q, k, v, 1.0, NULL, false);
    CHECK_EQ_INT(wf__sdpa_training_path_calls(), before);
    wf_release(o);
    wf_release(q4);
    wf_release(k4);
    wf_release(v4);
    wf_release(bm);
    wf_release(addm);
    wf_release(q);
    wf_release(k);
    wf_release(v);
}

int main(void)
{
    RUN_TEST(test_mlp);
    RUN_TEST(test_transformer_block);
    RUN_TEST(test_attention_paths);
    return TEST_SUMMARY();
}
