/*
 * suite_train: issue 14 item 7, weft's side, through the nn layer.
 *   train/mlp_adamw        an MLP 784-512-512-10 (relu), batch 256,
 *                          cross-entropy, AdamW: one compiled step (value
 *                          and gradients, then the optimizer) per call;
 *   train/transformer_fwd_bwd  a pre-norm transformer block (d 256, 4 heads,
 *                          causal, seq 128, batch 8, GELU MLP 256-1024-256),
 *                          loss mean(out^2): compiled value and gradients.
 * Steps per second come from the median step time. Before timing, each
 * checks its gradients by a central difference along the gradient's
 * direction, and the compiled call's loss against the uncompiled one; the
 * MLP also checks that the timed steps lowered the loss. The first loss is
 * the checksum run_all.py compares with the peers (same inputs and
 * initial parameters, from the shared hash).
 *
 *   build/release/suite_train
 */
#include "weft_nn.h"

#include "suite_compiled.h"
#include "suite_funcs.h"

enum { MAX_PARAMS = 10, MAX_INPUTS = 40 };

/* A model: `nparams` parameters followed by `ndata` data inputs. */
typedef struct model {
    size_t nparams, ndata;
    wf_array *inputs[MAX_INPUTS];
    wf_array *(*loss)(wf_array *const *in);
} model;

static wf_status loss_callback(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                               size_t *nout)
{
    const model *m = payload;
    if (nin != m->nparams + m->ndata || *nout < 1)
        return WF_ERR_INVALID_ARGUMENT;
    out[0] = m->loss(in);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_array *uniform_param(const int64_t *shape, int ndim, uint32_t seed, double fan_in)
{
    float bound = (float)(1.0 / sqrt(fan_in));
    return suite_array(shape, ndim, seed, -bound, bound);
}

/* ---- the MLP */

static wf_array *mlp_loss(wf_array *const *in)
{
    wf_scope_begin();
    wf_array *zero = suite_f32(0);
    wf_array *h = wf_maximum(wf_nn_linear(in[6], in[0], in[1]), zero);
    h = wf_maximum(wf_nn_linear(h, in[2], in[3]), zero);
    wf_array *loss = wf_nn_cross_entropy(wf_nn_linear(h, in[4], in[5]), in[7], NULL);
    return suite_scope_return(loss);
}

static void mlp_model(model *m)
{
    m->nparams = 6;
    m->ndata = 2;
    m->loss = mlp_loss;
    m->inputs[0] = uniform_param((int64_t[]){784, 512}, 2, 21, 784);
    m->inputs[1] = wf_zeros((int64_t[]){512}, 1, WF_DTYPE_F32);
    m->inputs[2] = uniform_param((int64_t[]){512, 512}, 2, 22, 512);
    m->inputs[3] = wf_zeros((int64_t[]){512}, 1, WF_DTYPE_F32);
    m->inputs[4] = uniform_param((int64_t[]){512, 10}, 2, 23, 512);
    m->inputs[5] = wf_zeros((int64_t[]){10}, 1, WF_DTYPE_F32);
    m->inputs[6] = suite_array((int64_t[]){256, 784}, 2, 27, 0.0f, 1.0f);
    int32_t labels[256];
    for (int i = 0; i < 256; i++)
        labels[i] = (int32_t)(suite_unit(28, i) * 10.0f);
    m->inputs[7] = wf_array_from_data(labels, (int64_t[]){256}, 1, WF_DTYPE_I32);
}

/* ---- the transformer block */

static wf_array *block_loss(wf_array *const *in)
{
    /* in: ln1 w, b, wqkv, wo, ln2 w, b, w1, b1, w2, b2, then x */
    wf_scope_begin();
    wf_array *x = in[10];
    wf_array *h = wf_add(x, wf_nn_causal_self_attention(wf_layer_norm(x, in[0], in[1], 1e-5),
                                                        in[2], in[3], 4));
    wf_array *out = wf_add(h, wf_nn_mlp(wf_layer_norm(h, in[4], in[5], 1e-5), in[6], in[7],
                                        in[8], in[9]));
    wf_array *loss = wf_mean(wf_square(out), NULL, 0, false);
    return suite_scope_return(loss);
}

static void block_model(model *m)
{
    m->nparams = 10;
    m->ndata = 1;
    m->loss = block_loss;
    m->inputs[0] = wf_ones((int64_t[]){256}, 1, WF_DTYPE_F32);
    m->inputs[1] = wf_zeros((int64_t[]){256}, 1, WF_DTYPE_F32);
    m->inputs[2] = uniform_param((int64_t[]){256, 768}, 2, 32, 256);
    m->inputs[3] = uniform_param((int64_t[]){256, 256}, 2, 33, 256);
    m->inputs[4] = wf_ones((int64_t[]){256}, 1, WF_DTYPE_F32);
    m->inputs[5] = wf_zeros((int64_t[]){256}, 1, WF_DTYPE_F32);
    m->inputs[6] = uniform_param((int64_t[]){256, 1024}, 2, 34, 256);
    m->inputs[7] = wf_zeros((int64_t[]){1024}, 1, WF_DTYPE_F32);
    m->inputs[8] = uniform_param((int64_t[]){1024, 256}, 2, 35, 1024);
    m->inputs[9] = wf_zeros((int64_t[]){256}, 1, WF_DTYPE_F32);
    m->inputs[10] = suite_array((int64_t[]){8, 128, 256}, 3, 31, -1.0f, 1.0f);
}

static void release_model(model *m)
{
    for (size_t i = 0; i < m->nparams + m->ndata; i++)
        wf_release(m->inputs[i]);
}

/* ---- checks */

static double item(wf_array *a)
{
    double v = NAN;
    if (!a || wf_array_item(a, &v) != WF_OK)
        return NAN;
    return v;
}

/* Loss of the model with every parameter moved by step * direction. */
static double loss_moved(wf_fn *loss_fn, const model *m, wf_array *const *direction, double step)
{
    wf_scope_begin();
    wf_array *in[MAX_INPUTS];
    for (size_t i = 0; i < m->nparams + m->ndata; i++)
        in[i] = i < m->nparams ? wf_add(m->inputs[i],
                                        wf_multiply(direction[i], suite_f32(step)))
                               : m->inputs[i];
    wf_array *loss = NULL;
    size_t n = 1;
    double v = wf_fn_call(loss_fn, in, m->nparams + m->ndata, &loss, &n) == WF_OK ? item(loss)
                                                                                   : NAN;
    wf_release(loss);
    wf_scope_end();
    return v;
}

/* Uncompiled value and gradients; then the central difference of the loss
 * along g / |g| must give |g| within 2%. Sets *loss0. */
static void check_gradients(suite_record *r, wf_fn *loss_fn, wf_fn *vg, const model *m,
                            double *loss0)
{
    wf_array *out[1 + MAX_PARAMS] = {NULL};
    size_t n = 1 + m->nparams;
    if (wf_fn_call(vg, m->inputs, m->nparams + m->ndata, out, &n) != WF_OK) {
        suite_record_fail(r, "value_and_grad: %s", wf_last_error_message());
        return;
    }
    *loss0 = item(out[0]);
    double norm2 = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        wf_array *sq = wf_sum(wf_square(out[1 + i]), NULL, 0, false);
        norm2 += item(sq);
        wf_release(sq);
    }
    double norm = sqrt(norm2), h = 1e-2;
    wf_array *direction[MAX_PARAMS];
    for (size_t i = 0; i < m->nparams; i++)
        direction[i] = wf_multiply(out[1 + i], suite_f32(1.0 / norm));
    double slope = (loss_moved(loss_fn, m, direction, h) - loss_moved(loss_fn, m, direction, -h)) /
                   (2 * h);
    if (!(isfinite(*loss0) && norm > 0 && fabs(slope - norm) <= 0.02 * norm))
        suite_record_fail(r, "loss %.6g: |gradient| %.6g but the central difference along it "
                             "gives %.6g",
                          *loss0, norm, slope);
    else
        r->checksum = *loss0;
    for (size_t i = 0; i < m->nparams; i++)
        wf_release(direction[i]);
    for (size_t i = 0; i < n; i++)
        wf_release(out[i]);
}

/* ---- the MLP training step: inputs p[6], m[6], v[6], t, lr, x, y;
 * outputs loss, p'[6], m'[6], v'[6] */

typedef struct step_payload {
    wf_fn *vg;
    wf_nn_adamw_options adamw;
} step_payload;

static wf_status step_callback(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                               size_t *nout)
{
    const step_payload *p = payload;
    if (nin != 22 || *nout < 19)
        return WF_ERR_INVALID_ARGUMENT;
    wf_array *vg_in[8] = {in[0], in[1], in[2], in[3], in[4], in[5], in[20], in[21]};
    wf_array *vg_out[7] = {NULL};
    size_t nvg = 7;
    wf_status st = wf_fn_call(p->vg, vg_in, 8, vg_out, &nvg);
    if (st != WF_OK)
        return st;
    st = wf_nn_adamw_step(&p->adamw, 6, in, vg_out + 1, in + 6, in + 12, in[18], in[19],
                          out + 1, out + 7, out + 13);
    for (size_t i = 1; i < nvg; i++)
        wf_release(vg_out[i]);
    if (st != WF_OK) {
        wf_release(vg_out[0]);
        return st;
    }
    out[0] = vg_out[0];
    *nout = 19;
    return WF_OK;
}

static void measure_mlp(int reps)
{
    suite_record r = suite_record_new("train/mlp_adamw", "weft", suite_weft_threads());
    model m = {0};
    mlp_model(&m);
    suite_require(wf_eval(m.inputs, m.nparams + m.ndata) == WF_OK, "MLP inputs");
    wf_fn *loss_fn = wf_fn_new(loss_callback, &m, NULL);
    wf_fn *vg = loss_fn ? wf_value_and_grad(loss_fn, (int[]){0, 1, 2, 3, 4, 5}, 6) : NULL;
    step_payload sp = {vg, wf_nn_adamw_options_default()};
    wf_fn *step_plain = vg ? wf_fn_new(step_callback, &sp, NULL) : NULL;
    wf_fn *step = step_plain ? wf_compile(step_plain, NULL) : NULL;
    suite_require(step != NULL, "building the MLP step");
    double loss0 = NAN;
    check_gradients(&r, loss_fn, vg, &m, &loss0);

    /* State: p, m, v (zeros), then t and lr per step. */
    wf_array *state[18];
    for (int i = 0; i < 6; i++) {
        state[i] = wf_retain(m.inputs[i]);
        state[6 + i] = wf_zeros_like(m.inputs[i]);
        state[12 + i] = wf_zeros_like(m.inputs[i]);
    }
    wf_array *lr = suite_f32(1e-3);
    double first_loss = NAN, last_loss = NAN, first_step_s = 0;
    for (int s = 0; s <= reps && strcmp(r.check, "ok") == 0; s++) {
        double start = suite_now();
        wf_array *t = suite_f32(s + 1);
        wf_array *in[22], *out[19] = {NULL};
        memcpy(in, state, sizeof state);
        in[18] = t;
        in[19] = lr;
        in[20] = m.inputs[6];
        in[21] = m.inputs[7];
        size_t nout = 19;
        wf_status st = wf_fn_call(step, in, 22, out, &nout);
        if (st == WF_OK)
            st = wf_eval(out, nout);
        double elapsed = suite_now() - start;
        wf_release(t);
        if (st != WF_OK) {
            suite_record_fail(&r, "compiled step %d: %s", s, wf_last_error_message());
            break;
        }
        last_loss = item(out[0]);
        wf_release(out[0]);
        for (int i = 0; i < 18; i++) {
            wf_release(state[i]);
            state[i] = out[1 + i];
        }
        if (s == 0) { /* the first call traces: reported, not timed */
            first_loss = last_loss;
            first_step_s = elapsed;
        } else {
            suite_record_time(&r, elapsed);
        }
    }
    if (strcmp(r.check, "ok") == 0 && !(fabs(first_loss - loss0) <= 1e-4 * fabs(loss0)))
        suite_record_fail(&r, "compiled step's loss %.9g != uncompiled %.9g", first_loss, loss0);
    else if (strcmp(r.check, "ok") == 0 && !(last_loss < first_loss))
        suite_record_fail(&r, "loss did not go down: %.6g -> %.6g", first_loss, last_loss);
    snprintf(r.note, sizeof r.note, "loss %.5f -> %.5f over %d steps; first step (traces) %.3f s",
             first_loss, last_loss, reps, first_step_s);
    suite_record_print(&r);
    for (int i = 0; i < 18; i++)
        wf_release(state[i]);
    wf_release(lr);
    wf_fn_release(step);
    wf_fn_release(step_plain);
    wf_fn_release(vg);
    wf_fn_release(loss_fn);
    release_model(&m);
}

static void measure_block(int reps)
{
    suite_record r = suite_record_new("train/transformer_fwd_bwd", "weft", suite_weft_threads());
    model m = {0};
    block_model(&m);
    suite_require(wf_eval(m.inputs, m.nparams + m.ndata) == WF_OK, "block inputs");
    wf_fn *loss_fn = wf_fn_new(loss_callback, &m, NULL);
    wf_fn *vg = loss_fn ? wf_value_and_grad(loss_fn, (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 10)
                        : NULL;
    wf_fn *compiled = vg ? wf_compile(vg, NULL) : NULL;
    suite_require(compiled != NULL, "compiling the block's value_and_grad");
    double loss0 = NAN, first_step_s = 0;
    check_gradients(&r, loss_fn, vg, &m, &loss0);
    for (int s = 0; s <= reps && strcmp(r.check, "ok") == 0; s++) {
        wf_array *out[11] = {NULL};
        size_t nout = 11;
        double start = suite_now();
        wf_status st = wf_fn_call(compiled, m.inputs, 11, out, &nout);
        if (st == WF_OK)
            st = wf_eval(out, nout);
        double elapsed = suite_now() - start;
        double loss = st == WF_OK ? item(out[0]) : NAN;
        for (size_t i = 0; i < nout && st == WF_OK; i++)
            wf_release(out[i]);
        if (st != WF_OK)
            suite_record_fail(&r, "compiled call %d: %s", s, wf_last_error_message());
        else if (!(fabs(loss - loss0) <= 1e-4 * fabs(loss0)))
            suite_record_fail(&r, "compiled loss %.9g != uncompiled %.9g", loss, loss0);
        else if (s == 0)
            first_step_s = elapsed;
        else
            suite_record_time(&r, elapsed);
    }
    snprintf(r.note, sizeof r.note, "loss %.5f; first call (traces) %.3f s", loss0, first_step_s);
    suite_record_print(&r);
    wf_fn_release(compiled);
    wf_fn_release(vg);
    wf_fn_release(loss_fn);
    release_model(&m);
}

int main(void)
{
    measure_mlp(suite_reps(10));
    measure_block(suite_reps(5));
    return 0;
}
