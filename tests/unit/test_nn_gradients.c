/* The demo's model, tiny and in float64, differentiated by weft and by
 * central differences: token + position embedding, pre-norm blocks of
 * rms_norm -> causal self-attention and rms_norm -> gelu MLP with residuals,
 * a final rms_norm and output projection, and a weighted cross-entropy on
 * the last positions (as the demo weighs the answer digits). Every
 * parameter's gradient is checked at sampled entries; the compiled gradient
 * equals the plain one, and the gradient taken through slice views of one
 * flat vector (the demo's parameter layout) equals the per-parameter
 * gradients laid end to end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "weft.h"
#include "weft_nn.h"

enum { VOCAB = 7, SEQ = 5, DIM = 8, HEADS = 2, LAYERS = 2, BATCH = 3 };
enum { NPARAMS = 2 + 8 * LAYERS + 2 };

struct param_shape {
    const char *name;
    int ndim;
    int64_t shape[2];
};

static struct param_shape shapes[NPARAMS];
static int64_t param_sizes[NPARAMS], total_size;

static void add_shape(int *k, const char *name, int64_t rows, int64_t cols)
{
    shapes[*k] = (struct param_shape){name, cols ? 2 : 1, {rows, cols}};
    param_sizes[*k] = rows * (cols ? cols : 1);
    total_size += param_sizes[*k];
    (*k)++;
}

static void layout(void)
{
    int k = 0;
    add_shape(&k, "tok_emb", VOCAB, DIM);
    add_shape(&k, "pos_emb", SEQ, DIM);
    for (int l = 0; l < LAYERS; l++) {
        add_shape(&k, "norm1", DIM, 0);
        add_shape(&k, "wqkv", DIM, 3 * DIM);
        add_shape(&k, "wo", DIM, DIM);
        add_shape(&k, "norm2", DIM, 0);
        add_shape(&k, "w1", DIM, 4 * DIM);
        add_shape(&k, "b1", 4 * DIM, 0);
        add_shape(&k, "w2", 4 * DIM, DIM);
        add_shape(&k, "b2", DIM, 0);
    }
    add_shape(&k, "norm_out", DIM, 0);
    add_shape(&k, "w_out", DIM, VOCAB);
}

/* The demo's forward pass (demo/demo.c), parameters in layout order. */
static wf_array *forward(wf_array *const *p, wf_array *tokens)
{
    int k = 0;
    wf_array *h = wf_add(wf_nn_embedding(p[k], tokens), p[k + 1]);
    k += 2;
    for (int l = 0; l < LAYERS; l++, k += 8) {
        wf_array *a = wf_rms_norm(h, p[k], 1e-5);
        h = wf_add(h, wf_nn_causal_self_attention(a, p[k + 1], p[k + 2], HEADS));
        wf_array *b = wf_rms_norm(h, p[k + 3], 1e-5);
        h = wf_add(h, wf_nn_mlp(b, p[k + 4], p[k + 5], p[k + 6], p[k + 7]));
    }
    return wf_nn_linear(wf_rms_norm(h, p[k], 1e-5), p[k + 1], NULL);
}

/* Targets are the next tokens; only the last two positions count. */
static wf_array *loss_of(wf_array *const *p, wf_array *tokens, wf_array *targets)
{
    double w[BATCH * SEQ];
    for (int i = 0; i < BATCH * SEQ; i++)
        w[i] = i % SEQ >= SEQ - 2 ? 1.0 : 0.0;
    wf_array *weights = wf_array_from_data(w, (int64_t[]){BATCH * SEQ}, 1, WF_DTYPE_F64);
    wf_array *logits = wf_reshape(forward(p, tokens), (int64_t[]){BATCH * SEQ, VOCAB}, 2);
    return wf_nn_cross_entropy(logits, wf_reshape(targets, (int64_t[]){BATCH * SEQ}, 1),
                               weights);
}

static wf_status keep_one(wf_array *result, wf_array **out, size_t *nout)
{
    result = result ? wf_keep(result) : NULL;
    wf_scope_end();
    if (!result)
        return wf_last_error();
    out[0] = result;
    *nout = 1;
    return WF_OK;
}

/* loss(p_0, ..., p_{n-1}, tokens, targets) */
static wf_status loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)payload, (void)n;
    wf_scope_begin();
    return keep_one(loss_of(in, in[NPARAMS], in[NPARAMS + 1]), out, nout);
}

/* loss(flat, tokens, targets) through slice + reshape views of flat. */
static wf_status flat_loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload, (void)n;
    wf_scope_begin();
    wf_array *views[NPARAMS];
    int64_t offset = 0, step = 1;
    for (int i = 0; i < NPARAMS; i++) {
        int64_t stop = offset + param_sizes[i];
        views[i] = wf_reshape(wf_slice(in[0], &offset, &stop, &step), shapes[i].shape,
                              shapes[i].ndim);
        offset = stop;
    }
    return keep_one(loss_of(views, in[1], in[2]), out, nout);
}

/* ------------------------------------------------------------ fixtures */

struct fixture {
    wf_array *params[NPARAMS + 2]; /* the parameters, then tokens and targets */
    wf_fn *loss, *value_and_grad, *compiled;
};

static bool fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof *f);
    wf_key keys[NPARAMS];
    if (!CHECK_OK(wf_random_split(wf_random_key(7), NPARAMS, keys)))
        return false;
    for (int i = 0; i < NPARAMS; i++) {
        /* Norm weights near 1, everything else of the demo's spread. */
        bool norm = strstr(shapes[i].name, "norm") != NULL;
        f->params[i] = wf_random_normal(shapes[i].shape, shapes[i].ndim, WF_DTYPE_F64,
                                        norm ? 1.0 : 0.0, norm ? 0.1 : 0.3, &keys[i]);
    }
    int32_t tokens[BATCH * SEQ], targets[BATCH * SEQ];
    for (int i = 0; i < BATCH * SEQ; i++) {
        tokens[i] = (i * 5 + 3) % VOCAB;
        targets[i] = (i * 3 + 1) % VOCAB;
    }
    f->params[NPARAMS] = wf_array_from_data(tokens, (int64_t[]){BATCH, SEQ}, 2, WF_DTYPE_I32);
    f->params[NPARAMS + 1] =
        wf_array_from_data(targets, (int64_t[]){BATCH, SEQ}, 2, WF_DTYPE_I32);
    int argnums[NPARAMS];
    for (int i = 0; i < NPARAMS; i++)
        argnums[i] = i;
    f->loss = wf_fn_new(loss_body, NULL, NULL);
    f->value_and_grad = f->loss ? wf_value_and_grad(f->loss, argnums, NPARAMS) : NULL;
    f->compiled = f->value_and_grad ? wf_compile(f->value_and_grad, NULL) : NULL;
    for (int i = 0; i < NPARAMS + 2; i++)
        if (!CHECK_NOT_NULL(f->params[i]))
            return false;
    return CHECK_NOT_NULL(f->compiled);
}

static void fixture_free(struct fixture *f)
{
    for (int i = 0; i < NPARAMS + 2; i++)
        wf_release(f->params[i]);
    wf_fn_release(f->compiled);
    wf_fn_release(f->value_and_grad);
    wf_fn_release(f->loss);
}

static double call_loss(wf_fn *loss, wf_array *const *in)
{
    wf_array *out = NULL;
    size_t nout = 1;
    double v = NAN;
    if (CHECK_OK(wf_fn_call(loss, in, NPARAMS + 2, &out, &nout)))
        CHECK_OK(wf_array_item(out, &v));
    wf_release(out);
    return v;
}

/* value_and_grad's outputs (loss, then one gradient per parameter). */
static bool call_value_and_grad(wf_fn *fn, wf_array *const *in, wf_array **out)
{
    size_t nout = NPARAMS + 1;
    return CHECK_OK(wf_fn_call(fn, in, NPARAMS + 2, out, &nout)) &&
           CHECK_EQ_SIZE(nout, NPARAMS + 1);
}

static bool read_doubles(wf_array *a, double *out, int64_t n)
{
    return CHECK_EQ_INT(wf_array_dtype(a), WF_DTYPE_F64) &&
           CHECK_EQ_INT(wf_array_size(a), n) &&
           CHECK_OK(wf_array_copy_to(a, out, (size_t)n * sizeof *out));
}

/* The loss with entry j of parameter i moved by delta. */
static double loss_moved(struct fixture *f, int i, int64_t j, double delta)
{
    int64_t n = param_sizes[i];
    double *values = malloc((size_t)n * sizeof *values);
    if (!values || !read_doubles(f->params[i], values, n)) {
        free(values);
        return NAN;
    }
    values[j] += delta;
    wf_array *in[NPARAMS + 2];
    memcpy(in, f->params, sizeof in);
    in[i] = wf_array_from_data(values, shapes[i].shape, shapes[i].ndim, WF_DTYPE_F64);
    double v = in[i] ? call_loss(f->loss, in) : NAN;
    wf_release(in[i]);
    free(values);
    return v;
}

/* ------------------------------------------------------------ tests */

enum { SAMPLES = 5 };

static void test_gradients_match_central_differences(void)
{
    struct fixture f;
    wf_array *out[NPARAMS + 1] = {0};
    if (fixture_init(&f) && call_value_and_grad(f.value_and_grad, f.params, out)) {
        double loss = 0;
        CHECK_OK(wf_array_item(out[0], &loss));
        CHECK_NEAR(loss, call_loss(f.loss, f.params), 1e-12);
        CHECK(loss > 0.5); /* an untrained model: near log(VOCAB), not a degenerate 0 */
        const double h = 1e-5;
        int checked = 0;
        for (int i = 0; i < NPARAMS; i++) {
            int64_t n = param_sizes[i];
            double *grad = malloc((size_t)n * sizeof *grad);
            double largest = 0;
            if (grad && read_doubles(out[i + 1], grad, n)) {
                for (int64_t j = 0; j < n; j++)
                    largest = fmax(largest, fabs(grad[j]));
                /* first, last and spread entries between */
                for (int s = 0; s < SAMPLES; s++) {
                    int64_t j = s == SAMPLES - 1 ? n - 1 : (n * s) / (SAMPLES - 1) + s % 2;
                    if (j >= n)
                        j = n - 1;
                    double numeric = (loss_moved(&f, i, j, h) - loss_moved(&f, i, j, -h)) / (2 * h);
                    if (!CHECK_NEAR(grad[j], numeric, 1e-9 + 1e-6 * fabs(numeric)))
                        printf("    parameter %d (%s), entry %lld\n", i, shapes[i].name,
                               (long long)j);
                    checked++;
                }
            }
            /* every parameter takes part: a zero gradient would hide a cut path */
            if (!CHECK(largest > 1e-6))
                printf("    parameter %d (%s) has an all-zero gradient\n", i, shapes[i].name);
            free(grad);
        }
        CHECK_EQ_INT(checked, NPARAMS * SAMPLES);
    }
    for (int i = 0; i < NPARAMS + 1; i++)
        wf_release(out[i]);
    fixture_free(&f);
}

static void test_compiled_gradients_equal_plain(void)
{
    struct fixture f;
    wf_array *plain[NPARAMS + 1] = {0}, *compiled[NPARAMS + 1] = {0};
    if (fixture_init(&f) && call_value_and_grad(f.value_and_grad, f.params, plain) &&
        call_value_and_grad(f.compiled, f.params, compiled)) {
        for (int i = 0; i <= NPARAMS; i++) {
            int64_t n = i == 0 ? 1 : param_sizes[i - 1];
            double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
            if (a && b && read_doubles(plain[i], a, n) && read_doubles(compiled[i], b, n))
                for (int64_t j = 0; j < n; j++)
                    if (!CHECK_NEAR(a[j], b[j], 1e-12 * (1 + fabs(a[j]))))
                        break;
            free(a);
            free(b);
        }
    }
    for (int i = 0; i <= NPARAMS; i++) {
        wf_release(plain[i]);
        wf_release(compiled[i]);
    }
    fixture_free(&f);
}

static void test_flat_vector_gradient_is_the_parameters_end_to_end(void)
{
    struct fixture f;
    wf_array *per_param[NPARAMS + 1] = {0}, *flat_out[2] = {0}, *flat = NULL;
    wf_fn *flat_loss = wf_fn_new(flat_loss_body, NULL, NULL);
    wf_fn *flat_vg = flat_loss ? wf_value_and_grad(flat_loss, (int[]){0}, 1) : NULL;
    double *want = malloc((size_t)total_size * sizeof *want);
    double *got = malloc((size_t)total_size * sizeof *got);
    if (fixture_init(&f) && CHECK_NOT_NULL(flat_vg) && CHECK_NOT_NULL(want) &&
        CHECK_NOT_NULL(got) && call_value_and_grad(f.value_and_grad, f.params, per_param)) {
        wf_scope_begin();
        wf_array *parts[NPARAMS];
        for (int i = 0; i < NPARAMS; i++)
            parts[i] = wf_reshape(f.params[i], &param_sizes[i], 1);
        flat = wf_concatenate(parts, NPARAMS, 0);
        flat = flat ? wf_keep(flat) : NULL;
        wf_scope_end();
        wf_array *in[3] = {flat, f.params[NPARAMS], f.params[NPARAMS + 1]};
        size_t nout = 2;
        int64_t offset = 0;
        bool ok = true;
        for (int i = 0; i < NPARAMS && ok; i++) {
            ok = read_doubles(per_param[i + 1], want + offset, param_sizes[i]);
            offset += param_sizes[i];
        }
        if (ok && CHECK_NOT_NULL(flat) && CHECK_OK(wf_fn_call(flat_vg, in, 3, flat_out, &nout)) &&
            read_doubles(flat_out[1], got, total_size))
            for (int64_t j = 0; j < total_size; j++)
                if (!CHECK_NEAR(got[j], want[j], 1e-12 * (1 + fabs(want[j]))))
                    break;
    }
    free(want);
    free(got);
    wf_release(flat);
    for (int i = 0; i < 2; i++)
        wf_release(flat_out[i]);
    for (int i = 0; i <= NPARAMS; i++)
        wf_release(per_param[i]);
    wf_fn_release(flat_vg);
    wf_fn_release(flat_loss);
    fixture_free(&f);
}

int main(void)
{
    layout();
    RUN_TEST(test_gradients_match_central_differences);
    RUN_TEST(test_compiled_gradients_equal_plain);
    RUN_TEST(test_flat_vector_gradient_is_the_parameters_end_to_end);
    return TEST_SUMMARY();
}
