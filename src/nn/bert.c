/*
 * BERT encoder of weft_nn.h: loads a Hugging Face BERT checkpoint
 * (config.json + model.safetensors, as sentence-transformers models ship it)
 * and runs it with the public ops only: embeddings (word + position + token
 * type 0), post-LayerNorm encoder layers (self-attention with a padding mask,
 * exact-GELU feed-forward), then mean pooling over the real tokens and L2
 * normalisation for sentence embeddings.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"
#include "weft_nn.h"
#include "nn/heads.h"
#include "nn/loaders.h"
#include "util/fault.h"

enum { MAX_CONFIG_BYTES = 1 << 20, MAX_JSON_DEPTH = 64, MAX_LAYERS = 1024 };

/* ------------------------------------------------------------ config.json */

/* A bounded cursor over JSON text: every read checks pos < n. */
struct json {
    const char *s;
    size_t n, pos;
};

static void json_space(struct json *j)
{
    while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                             j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

static bool json_eat(struct json *j, char c)
{
    json_space(j);
    if (j->pos < j->n && j->s[j->pos] == c) {
        j->pos++;
        return true;
    }
    return false;
}

/* A string; its raw bytes (escapes kept as written, enough for the ASCII
 * keys and values compared here) go to out, truncated to cap - 1. */
static bool json_string(struct json *j, char *out, size_t cap)
{
    if (!json_eat(j, '"'))
        return false;
    size_t len = 0;
    while (j->pos < j->n && j->s[j->pos] != '"') {
        char c = j->s[j->pos++];
        if ((unsigned char)c < 0x20)
            return false;
        if (c == '\\') {
            if (j->pos >= j->n)
                return false;
            if (len + 1 < cap)
                out[len++] = c;
            c = j->s[j->pos++];
        }
        if (len + 1 < cap)
            out[len++] = c;
    }
    if (cap)
        out[len] = 0;
    return json_eat(j, '"');
}

static bool json_number(struct json *j, double *out)
{
    json_space(j);
    char buf[64];
    size_t len = 0;
    while (j->pos < j->n && len + 1 < sizeof buf &&
           (isdigit((unsigned char)j->s[j->pos]) ||
            (j->s[j->pos] != 0 && strchr("+-.eE", j->s[j->pos]))))
        buf[len++] = j->s[j->pos++];
    buf[len] = 0;
    char *end;
    *out = strtod(buf, &end);
    return len > 0 && *end == 0 && isfinite(*out);
}

static bool json_skip(struct json *j, int depth);

/* Skips an object's or array's members after its opening bracket. */
static bool json_skip_members(struct json *j, int depth, char close, bool keys)
{
    if (json_eat(j, close))
        return true;
    do {
        char key[8];
        if (keys && (!json_string(j, key, sizeof key) || !json_eat(j, ':')))
            return false;
        if (!json_skip(j, depth + 1))
            return false;
    } while (json_eat(j, ','));
    return json_eat(j, close);
}

static bool json_skip(struct json *j, int depth)
{
    if (depth > MAX_JSON_DEPTH)
        return false;
    json_space(j);
    if (j->pos >= j->n)
        return false;
    char c = j->s[j->pos];
    if (c == '"') {
        char ignored[1];
        return json_string(j, ignored, sizeof ignored);
    }
    if (c == '{' || c == '[') {
        j->pos++;
        return json_skip_members(j, depth, c == '{' ? '}' : ']', c == '{');
    }
    static const char *const literals[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(literals[i]);
        if (j->n - j->pos >= len && memcmp(j->s + j->pos, literals[i], len) == 0) {
            j->pos += len;
            return true;
        }
    }
    double ignored;
    return json_number(j, &ignored);
}

/* Where each numeric key of config.json lands. */
struct config_key {
    const char *name;
    int64_t *integer; /* or */
    double *real;
};

static wf_status parse_config(const char *path, const char *text, size_t n,
                              wf_nn_bert_config *c, char *activation, size_t activation_cap,
                              char *position_type, size_t position_cap)
{
    const struct config_key keys[] = {
        {"vocab_size", &c->vocab_size, NULL},
        {"hidden_size", &c->hidden_size, NULL},
        {"num_hidden_layers", &c->num_layers, NULL},
        {"num_attention_heads", &c->num_heads, NULL},
        {"intermediate_size", &c->intermediate_size, NULL},
        {"max_position_embeddings", &c->max_positions, NULL},
        {"type_vocab_size", &c->type_vocab_size, NULL},
        {"layer_norm_eps", NULL, &c->layer_norm_eps},
    };
    struct json j = {text, n, 0};
    bool ok = json_eat(&j, '{');
    if (ok && !json_eat(&j, '}')) {
        do {
            char key[64];
            ok = json_string(&j, key, sizeof key) && json_eat(&j, ':');
            const struct config_key *k = NULL;
            for (size_t i = 0; ok && i < sizeof keys / sizeof keys[0]; i++)
                if (strcmp(key, keys[i].name) == 0)
                    k = &keys[i];
            double value;
            if (!ok) {
            } else if (k) {
                ok = json_number(&j, &value);
                if (ok && k->real)
                    *k->real = value;
                else if (ok)
                    ok = value == floor(value) && fabs(value) < 9e15 &&
                         (*k->integer = (int64_t)value, true);
            } else if (strcmp(key, "hidden_act") == 0) {
                ok = json_string(&j, activation, activation_cap);
            } else if (strcmp(key, "position_embedding_type") == 0) {
                ok = json_string(&j, position_type, position_cap);
            } else {
                ok = json_skip(&j, 1);
            }
        } while (ok && json_eat(&j, ','));
        ok = ok && json_eat(&j, '}');
    }
    json_space(&j);
    if (!ok || j.pos != j.n)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: malformed JSON near byte %zu", path,
                            j.pos);
    return WF_OK;
}

static char *read_text_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        wf_set_error(WF_ERR_IO, "cannot open %s", path);
        return NULL;
    }
    char *text = wf__malloc(MAX_CONFIG_BYTES + 1);
    size_t n = text ? fread(text, 1, MAX_CONFIG_BYTES + 1, f) : 0;
    bool failed = ferror(f) || n > MAX_CONFIG_BYTES;
    fclose(f);
    if (!text || failed) {
        free(text);
        wf_set_error(text ? WF_ERR_IO : WF_ERR_OUT_OF_MEMORY, "%s: %s", path,
                     !text ? "out of memory" : "unreadable or larger than 1 MiB");
        return NULL;
    }
    text[n] = 0;
    *size = n;
    return text;
}

wf_status wf_nn_bert_config_load(const char *path, wf_nn_bert_config *out)
{
    if (!path || !out)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_bert_config_load: %s is NULL",
                            !path ? "path" : "out");
    size_t n;
    char *text = read_text_file(path, &n);
    if (!text)
        return wf_last_error();
    const wf_status st = wf__nn_bert_config_parse(text, n, path, out);
    free(text);
    return st;
}

wf_status wf__nn_bert_config_parse(const char *text, size_t n, const char *path,
                                   wf_nn_bert_config *out)
{
    if (n > MAX_CONFIG_BYTES)
        return wf_set_error(WF_ERR_IO, "%s: larger than 1 MiB", path);
    wf_nn_bert_config c = {.type_vocab_size = 2, .layer_norm_eps = 1e-12};
    c.vocab_size = c.hidden_size = c.num_layers = c.num_heads = c.intermediate_size =
        c.max_positions = -1;
    char activation[32] = "gelu", position_type[32] = "absolute";
    const wf_status st = parse_config(path, text, n, &c, activation, sizeof activation,
                                      position_type, sizeof position_type);
    if (st != WF_OK)
        return st;
    const int64_t limit = (int64_t)1 << 24;
    if (c.vocab_size < 1 || c.vocab_size > limit || c.hidden_size < 1 ||
        c.hidden_size > limit || c.num_layers < 1 || c.num_layers > MAX_LAYERS ||
        c.num_heads < 1 || c.hidden_size % c.num_heads != 0 || c.intermediate_size < 1 ||
        c.intermediate_size > limit || c.max_positions < 1 || c.max_positions > limit ||
        c.type_vocab_size < 1 || c.type_vocab_size > limit || !(c.layer_norm_eps > 0))
        return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                            "%s: missing or out-of-range sizes (vocab_size, hidden_size, "
                            "num_hidden_layers, num_attention_heads dividing hidden_size, "
                            "intermediate_size, max_position_embeddings, type_vocab_size, "
                            "layer_norm_eps > 0)",
                            path);
    if (strcmp(activation, "gelu") != 0 || strcmp(position_type, "absolute") != 0)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                            "%s: only hidden_act \"gelu\" and absolute positions are supported "
                            "(got \"%s\", \"%s\")",
                            path, activation, position_type);
    *out = c;
    return WF_OK;
}

/* ------------------------------------------------------------ weights */

struct bert_layer {
    wf_array *wqkv, *bqkv;  /* (H, 3H), (3H): query, key, value side by side */
    wf_array *wo, *bo;      /* attention output projection (H, H), (H) */
    wf_array *ln1_w, *ln1_b;
    wf_array *w1, *b1;      /* (H, I), (I) */
    wf_array *w2, *b2;      /* (I, H), (H) */
    wf_array *ln2_w, *ln2_b;
};

struct wf_nn_bert {
    wf_nn_bert_config config;
    wf_dtype dtype;
    wf_array *word, *position, *type0; /* (V, H), (P, H), (H) */
    wf_array *ln_w, *ln_b;
    struct bert_layer *layers;
};

/* The checkpoint's tensor `name`, checked to be float32 or bfloat16 of the
 * given shape (borrowed from params). */
static wf_array *tensor(const wf_nn_params *params, const char *path, const char *name,
                        int64_t d0, int64_t d1)
{
    long i = wf_nn_params_find(params, name);
    if (i < 0) {
        wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: no tensor %s", path, name);
        return NULL;
    }
    wf_array *a = wf_nn_params_get(params, (size_t)i);
    int ndim = d1 ? 2 : 1;
    bool ok = wf_array_ndim(a) == ndim && wf_array_dim(a, 0) == d0 &&
              (ndim == 1 || wf_array_dim(a, 1) == d1);
    if (!ok) {
        char want[64];
        if (d1)
            snprintf(want, sizeof want, "(%lld, %lld)", (long long)d0, (long long)d1);
        else
            snprintf(want, sizeof want, "(%lld,)", (long long)d0);
        wf_set_error(WF_ERR_SHAPE, "%s: tensor %s does not have the shape %s the config gives",
                     path, name, want);
        return NULL;
    }
    wf_dtype dt = wf_array_dtype(a);
    if (dt != WF_DTYPE_F32 && dt != WF_DTYPE_BF16 && dt != WF_DTYPE_F16) {
        wf_set_error(WF_ERR_DTYPE, "%s: tensor %s is not a float tensor", path, name);
        return NULL;
    }
    return a;
}

/* A weight held by the model: `a` cast to dtype, made contiguous and
 * evaluated, with a reference outside any scope. */
static wf_array *hold(wf_array *a, wf_dtype dtype)
{
    if (!a)
        return NULL;
    wf_array *cast = wf_astype(a, dtype);
    if (!cast)
        return NULL;
    size_t bytes = wf_array_nbytes(cast);
    void *data = wf__malloc(bytes ? bytes : 1);
    if (!data) {
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_bert_load: out of memory");
        return NULL;
    }
    wf_array *copy = NULL;
    if (wf_array_copy_to(cast, data, bytes) == WF_OK)
        copy = wf_array_from_data(data, wf_array_shape(cast), wf_array_ndim(cast), dtype);
    free(data);
    return copy ? wf_retain_unscoped(copy) : NULL;
}

/* A Linear weight stored (out, in), as PyTorch does, turned to (in, out). */
static wf_array *transposed(wf_array *w)
{
    return w ? wf_transpose(w, (int[]){1, 0}, 2) : NULL;
}

void wf_nn_bert_free(wf_nn_bert *m)
{
    if (!m)
        return;
    wf_release(m->word);
    wf_release(m->position);
    wf_release(m->type0);
    wf_release(m->ln_w);
    wf_release(m->ln_b);
    for (int64_t i = 0; m->layers && i < m->config.num_layers; i++) {
        struct bert_layer *l = &m->layers[i];
        wf_array *all[] = {l->wqkv, l->bqkv, l->wo, l->bo, l->ln1_w, l->ln1_b,
                           l->w1,   l->b1,   l->w2, l->b2, l->ln2_w, l->ln2_b};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            wf_release(all[k]);
    }
    free(m->layers);
    free(m);
}

/* Loads one encoder layer's weights (borrowed from params) into l. */
static wf_status load_layer(const wf_nn_params *p, const char *path, int64_t i,
                            const wf_nn_bert_config *c, wf_dtype dtype, struct bert_layer *l)
{
    int64_t h = c->hidden_size, inter = c->intermediate_size;
    char name[160];
#define T(suffix, d0, d1) \
    (snprintf(name, sizeof name, "encoder.layer.%lld.%s", (long long)i, suffix), \
     tensor(p, path, name, d0, d1))
    wf_array *q = T("attention.self.query.weight", h, h);
    wf_array *k = T("attention.self.key.weight", h, h);
    wf_array *v = T("attention.self.value.weight", h, h);
    wf_array *qb = T("attention.self.query.bias", h, 0);
    wf_array *kb = T("attention.self.key.bias", h, 0);
    wf_array *vb = T("attention.self.value.bias", h, 0);
    if (!q || !k || !v || !qb || !kb || !vb)
        return wf_last_error();
    wf_array *qkv[3] = {transposed(q), transposed(k), transposed(v)};
    wf_array *qkv_bias[3] = {qb, kb, vb};
    if (!qkv[0] || !qkv[1] || !qkv[2])
        return wf_last_error();
    l->wqkv = hold(wf_concatenate(qkv, 3, 1), dtype);
    l->bqkv = hold(wf_concatenate(qkv_bias, 3, 0), dtype);
    l->wo = hold(transposed(T("attention.output.dense.weight", h, h)), dtype);
    l->bo = hold(T("attention.output.dense.bias", h, 0), dtype);
    l->ln1_w = hold(T("attention.output.LayerNorm.weight", h, 0), dtype);
    l->ln1_b = hold(T("attention.output.LayerNorm.bias", h, 0), dtype);
    l->w1 = hold(transposed(T("intermediate.dense.weight", inter, h)), dtype);
    l->b1 = hold(T("intermediate.dense.bias", inter, 0), dtype);
    l->w2 = hold(transposed(T("output.dense.weight", h, inter)), dtype);
    l->b2 = hold(T("output.dense.bias", h, 0), dtype);
    l->ln2_w = hold(T("output.LayerNorm.weight", h, 0), dtype);
    l->ln2_b = hold(T("output.LayerNorm.bias", h, 0), dtype);
#undef T
    bool ok = l->wqkv && l->bqkv && l->wo && l->bo && l->ln1_w && l->ln1_b && l->w1 && l->b1 &&
              l->w2 && l->b2 && l->ln2_w && l->ln2_b;
    return ok ? WF_OK : wf_last_error();
}

static wf_status load_weights(wf_nn_bert *m, const wf_nn_params *p, const char *path)
{
    const wf_nn_bert_config *c = &m->config;
    int64_t h = c->hidden_size;
    m->word = hold(tensor(p, path, "embeddings.word_embeddings.weight", c->vocab_size, h),
                   m->dtype);
    m->position = hold(
        tensor(p, path, "embeddings.position_embeddings.weight", c->max_positions, h), m->dtype);
    wf_array *types =
        tensor(p, path, "embeddings.token_type_embeddings.weight", c->type_vocab_size, h);
    m->type0 = hold(types ? wf_take(types, wf_scalar(0, WF_DTYPE_I32), 0) : NULL, m->dtype);
    m->ln_w = hold(tensor(p, path, "embeddings.LayerNorm.weight", h, 0), m->dtype);
    m->ln_b = hold(tensor(p, path, "embeddings.LayerNorm.bias", h, 0), m->dtype);
    if (!m->word || !m->position || !m->type0 || !m->ln_w || !m->ln_b)
        return wf_last_error();
    for (int64_t i = 0; i < c->num_layers; i++) {
        wf_status st = load_layer(p, path, i, c, m->dtype, &m->layers[i]);
        if (st != WF_OK)
            return st;
    }
    return WF_OK;
}

static char *join_path(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *out = wf__malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", dir, file);
    else
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_bert_load: out of memory");
    return out;
}

wf_nn_bert *wf_nn_bert_load(const char *model_dir, wf_dtype dtype)
{
    if (!model_dir) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_bert_load: model_dir is NULL");
        return NULL;
    }
    if (dtype != WF_DTYPE_F32 && dtype != WF_DTYPE_BF16 && dtype != WF_DTYPE_F16) {
        wf_set_error(WF_ERR_DTYPE, "wf_nn_bert_load: dtype must be float32, bfloat16 or float16");
        return NULL;
    }
    wf_nn_bert *m = wf__calloc(1, sizeof *m);
    char *config_path = join_path(model_dir, "config.json");
    char *weights_path = join_path(model_dir, "model.safetensors");
    wf_status st = m && config_path && weights_path ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    if (st == WF_OK && (st = wf_nn_bert_config_load(config_path, &m->config)) == WF_OK) {
        m->dtype = dtype;
        m->layers = wf__calloc((size_t)m->config.num_layers, sizeof *m->layers);
        if (!m->layers)
            st = wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_bert_load: out of memory");
    }
    if (st == WF_OK && (st = wf_scope_begin()) == WF_OK) {
        wf_nn_params *params = wf_nn_load_safetensors(weights_path);
        st = params ? load_weights(m, params, weights_path) : wf_last_error();
        char message[512];
        snprintf(message, sizeof message, "%s", wf_last_error_message());
        wf_nn_params_release(params);
        wf_scope_end();
        if (st != WF_OK)
            wf_set_error(st, "%s", message);
    }
    free(config_path);
    free(weights_path);
    if (st != WF_OK) {
        if (!m)
            wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_bert_load: out of memory");
        wf_nn_bert_free(m);
        return NULL;
    }
    return m;
}

const wf_nn_bert_config *wf_nn_bert_get_config(const wf_nn_bert *m)
{
    return m ? &m->config : NULL;
}

wf_dtype wf_nn_bert_dtype(const wf_nn_bert *m) { return m ? m->dtype : WF_DTYPE_COUNT; }

/* ------------------------------------------------------------ forward */

/* Ends the function's scope, keeping `result` (NULL keeps the error). */
static wf_array *finish(wf_array *result)
{
    wf_array *kept = result ? wf_keep(result) : NULL;
    wf_status error = wf_last_error();
    char message[512];
    snprintf(message, sizeof message, "%s", wf_last_error_message());
    wf_scope_end();
    if (!kept)
        wf_set_error(error, "%s", message);
    return kept;
}

static wf_array *attention(const wf_nn_bert *m, const struct bert_layer *l, wf_array *x,
                           wf_array *keep_mask)
{
    wf_array *qkv = wf_nn_linear(x, l->wqkv, l->bqkv); /* (B, T, 3H) */
    wf_array *merged = wf__nn_attend_heads(qkv, m->config.num_heads, keep_mask, false);
    return wf_nn_linear(merged, l->wo, l->bo);
}

static wf_status check_inputs(const wf_nn_bert *m, wf_array *ids, wf_array *mask, const char *op)
{
    if (!m || !ids || !mask)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: %s is NULL", op,
                            !m ? "model" : !ids ? "ids" : "mask");
    if (wf_array_ndim(ids) != 2 || wf_array_ndim(mask) != 2 ||
        wf_array_dim(ids, 0) != wf_array_dim(mask, 0) ||
        wf_array_dim(ids, 1) != wf_array_dim(mask, 1) || wf_array_dim(ids, 1) < 1 ||
        wf_array_dim(ids, 1) > m->config.max_positions)
        return wf_set_error(WF_ERR_SHAPE,
                            "%s: ids and mask must both be (batch, seq) with 1 <= seq <= %lld",
                            op, (long long)m->config.max_positions);
    wf_dtype dt = wf_array_dtype(ids);
    if (dt != WF_DTYPE_I32 && dt != WF_DTYPE_I64)
        return wf_set_error(WF_ERR_DTYPE, "%s: ids must be int32 or int64", op);
    return WF_OK;
}

/* The encoder layers over embedded tokens x (batch, seq, hidden); keep
 * (broadcastable to (batch, heads, seq, seq)) says which keys each query
 * sees. */
static wf_array *encoder_layers(const wf_nn_bert *m, wf_array *x, wf_array *keep)
{
    double eps = m->config.layer_norm_eps;
    if (!keep) /* a failed op: attention would read NULL as "no mask" */
        return NULL;
    for (int64_t i = 0; i < m->config.num_layers && x; i++) {
        const struct bert_layer *l = &m->layers[i];
        x = wf_layer_norm(wf_add(x, attention(m, l, x, keep)), l->ln1_w, l->ln1_b, eps);
        wf_array *ffn = wf_nn_mlp(x, l->w1, l->b1, l->w2, l->b2);
        x = wf_layer_norm(wf_add(x, ffn), l->ln2_w, l->ln2_b, eps);
    }
    return x;
}

/* Embedded tokens: word + position + token type 0, then LayerNorm. */
static wf_array *embedded(const wf_nn_bert *m, wf_array *ids, wf_array *positions)
{
    wf_array *x = wf_add(wf_add(wf_take(m->word, ids, 0), positions), m->type0);
    return wf_layer_norm(x, m->ln_w, m->ln_b, m->config.layer_norm_eps);
}

wf_array *wf_nn_bert_encode(const wf_nn_bert *m, wf_array *ids, wf_array *mask)
{
    if (check_inputs(m, ids, mask, "wf_nn_bert_encode") != WF_OK ||
        wf_scope_begin() != WF_OK)
        return NULL;
    int64_t seq = wf_array_dim(ids, 1), dim = m->config.hidden_size;
    wf_array *positions = wf_slice(m->position, (int64_t[]){0, 0}, (int64_t[]){seq, dim},
                                   (int64_t[]){1, 1});
    /* (B, 1, 1, T): every query sees the real tokens of its own sequence. */
    wf_array *keep = wf_expand_dims(wf_not_equal(mask, wf_scalar(0, wf_array_dtype(mask))),
                                    (int[]){1, 2}, 2);
    return finish(encoder_layers(m, embedded(m, ids, positions), keep));
}

/* mean = summed / counts (counts floored at 1e-9), divided by its L2 norm
 * along axis 1 (floored at 1e-12): sentence-transformers' mean pooling +
 * Normalize, float32. */
static wf_array *normalized_mean(wf_array *summed, wf_array *counts)
{
    wf_array *mean = wf_divide(summed, wf_maximum(counts, wf_scalar(1e-9, WF_DTYPE_F32)));
    wf_array *norm = wf_sqrt(wf_sum(wf_square(mean), (int[]){1}, 1, true));
    return wf_divide(mean, wf_maximum(norm, wf_scalar(1e-12, WF_DTYPE_F32)));
}

wf_array *wf_nn_bert_embed(const wf_nn_bert *m, wf_array *ids, wf_array *mask)
{
    if (check_inputs(m, ids, mask, "wf_nn_bert_embed") != WF_OK || wf_scope_begin() != WF_OK)
        return NULL;
    wf_array *hidden = wf_astype(wf_nn_bert_encode(m, ids, mask), WF_DTYPE_F32);
    wf_array *weights = wf_expand_dims(wf_astype(mask, WF_DTYPE_F32), (int[]){2}, 1);
    wf_array *summed = wf_sum(wf_multiply(hidden, weights), (int[]){1}, 1, false);
    return finish(normalized_mean(summed, wf_sum(weights, (int[]){1}, 1, false)));
}

static wf_status check_packed_inputs(const wf_nn_bert *m, wf_array *ids, wf_array *positions,
                                     wf_array *segments, int64_t sequences)
{
    const char *op = "wf_nn_bert_embed_packed";
    if (!m || !ids || !positions || !segments)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: %s is NULL", op,
                            !m ? "model" : !ids ? "ids" : !positions ? "positions" : "segments");
    wf_array *all[3] = {ids, positions, segments};
    for (int i = 0; i < 3; i++) {
        wf_dtype dt = wf_array_dtype(all[i]);
        if (wf_array_ndim(all[i]) != 1 || wf_array_dim(all[i], 0) != wf_array_dim(ids, 0) ||
            wf_array_dim(ids, 0) < 1)
            return wf_set_error(WF_ERR_SHAPE, "%s: ids, positions and segments must be "
                                              "(tokens) with the same tokens >= 1", op);
        if (dt != WF_DTYPE_I32 && dt != WF_DTYPE_I64)
            return wf_set_error(WF_ERR_DTYPE,
                                "%s: ids, positions and segments must be int32 or int64", op);
    }
    if (sequences < 1 || sequences > INT32_MAX)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                            "%s: sequences must be in [1, 2^31 - 1], got %lld", op,
                            (long long)sequences);
    return WF_OK;
}

wf_array *wf_nn_bert_embed_packed(const wf_nn_bert *m, wf_array *ids, wf_array *positions,
                                  wf_array *segments, int64_t sequences)
{
    if (check_packed_inputs(m, ids, positions, segments, sequences) != WF_OK ||
        wf_scope_begin() != WF_OK)
        return NULL;
    /* (1, 1, T, T): a token sees the tokens of its own segment only (in
     * the segments' own dtype: an int64 filler value must not wrap). */
    wf_array *keep = wf_expand_dims(wf_equal(wf_expand_dims(segments, (int[]){1}, 1),
                                             wf_expand_dims(segments, (int[]){0}, 1)),
                                    (int[]){0, 1}, 2);
    wf_array *x = wf_expand_dims(embedded(m, ids, wf_take(m->position, positions, 0)),
                                 (int[]){0}, 1);
    wf_array *hidden = wf_astype(wf_squeeze(encoder_layers(m, x, keep), (int[]){0}, 1),
                                 WF_DTYPE_F32);
    /* (S, T): row s is 1 at the tokens of segment s; summed = members @ hidden. */
    wf_array *ordinals = wf_expand_dims(wf_arange(0, (double)sequences, 1, WF_DTYPE_I32),
                                        (int[]){1}, 1);
    wf_array *members = wf_astype(wf_equal(ordinals, wf_expand_dims(segments, (int[]){0}, 1)),
                                  WF_DTYPE_F32);
    wf_array *counts = wf_sum(members, (int[]){1}, 1, true);
    return finish(normalized_mean(wf_matmul(members, hidden), counts));
}
