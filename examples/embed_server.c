/*
 * embed_server: the sentence-embedding server of embed_server.h, tested on
 * itself. Client threads send sentences at the same time; the server
 * batches what arrives together into compiled forward passes over packed
 * runs of tokens. Each answer is checked against the same sentence embedded
 * alone (no packing, no batching, not compiled): cosine >= 0.99999. Prints
 * how the requests were batched and the compile cache's size, and exits
 * non-zero on any mismatch.
 *
 * Needs all-MiniLM-L6-v2 (see embed_find_model); without it, says how to
 * install it and exits 0.
 */
#include <stdatomic.h>

#include "embed_server.h"

/* Sanitizer builds send fewer, shorter sentences (the first SENT_USED). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { CLIENTS = 2, ROUNDS = 1, SENT_USED = 4 };
#else
enum { CLIENTS = 8, ROUNDS = 2, SENT_USED = 8 };
#endif

static const char *const sentences[] = {
    "A man is eating food.",
    "",
    "我们今天去公园散步。",
    "Café au lait, s'il vous plaît!",
    "A man is riding a horse.",
    "Weft batches requests that arrive together into one compiled forward pass.",
    "The stock rose 4.5% on Tuesday, closing at $312.20.",
    "Packing never changes a sentence's embedding because the others are masked out of "
    "attention and pooling, so short and long sentences can share a forward pass without any "
    "difference in what each of them gets back from the server at the end of the day.",
};
enum { NSENTENCES = sizeof sentences / sizeof sentences[0] };

struct shared {
    embed_server *server;
    const float *alone; /* NSENTENCES x hidden */
    atomic_int mismatches, failures;
};

struct client {
    struct shared *shared;
    int index;
    pthread_t thread;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    struct shared *sh = c->shared;
    int64_t hidden = sh->server->hidden;
    float *got = malloc((size_t)hidden * sizeof *got);
    for (int round = 0; round < ROUNDS; round++)
        for (int k = 0; k < SENT_USED; k++) {
            int i = (k + c->index) % SENT_USED; /* clients start at different sentences */
            if (embed_server_embed(sh->server, sentences[i], got) != WF_OK) {
                atomic_fetch_add(&sh->failures, 1);
                continue;
            }
            double cosine = embed_dot(got, sh->alone + (size_t)i * (size_t)hidden, hidden);
            if (!(cosine >= 0.99999)) {
                printf("client %d, sentence %d: cosine %.7f to the sentence alone\n", c->index,
                       i, cosine);
                atomic_fetch_add(&sh->mismatches, 1);
            }
        }
    free(got);
    return NULL;
}

/* Each sentence embedded alone: batch of one, no padding, not compiled. */
static bool embed_alone(embed_server *s, float *out)
{
    bool ok = true;
    for (int i = 0; i < SENT_USED && ok; i++) {
        int32_t ids[EMBED_MAX_TOKENS];
        int64_t n = wf_nn_wordpiece_encode(s->tokenizer, sentences[i], strlen(sentences[i]), ids,
                                           EMBED_MAX_TOKENS);
        wf_scope_begin();
        int64_t shape[2] = {1, n};
        wf_array *a_ids = wf_array_from_data(ids, shape, 2, WF_DTYPE_I32);
        wf_array *e = wf_nn_bert_embed(s->model, a_ids, wf_ones(shape, 2, WF_DTYPE_I32));
        ok = n > 0 && e &&
             wf_array_copy_to(e, out + (size_t)i * (size_t)s->hidden,
                              (size_t)s->hidden * sizeof *out) == WF_OK;
        wf_scope_end();
    }
    return ok;
}

static char source_root[PATH_MAX];

int main(void)
{
    snprintf(source_root, sizeof source_root, "%s", __FILE__);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(source_root, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(source_root, sizeof source_root, ".");
    }
    char model_dir[PATH_MAX];
    if (!embed_find_model(source_root, model_dir, sizeof model_dir)) {
        printf("embed_server: skipped: ");
        embed_print_install_hint(stdout);
        return 0;
    }
    embed_server *server = embed_server_start(model_dir, WF_DTYPE_F32, 16);
    if (!server)
        return 1;
    struct shared sh = {.server = server};
    float *alone = malloc(NSENTENCES * (size_t)server->hidden * sizeof *alone);
    if (!embed_alone(server, alone)) {
        fprintf(stderr, "embed_server: %s\n", wf_last_error_message());
        return 1;
    }
    sh.alone = alone;
    struct client clients[CLIENTS];
    double start = embed_now();
    for (int i = 0; i < CLIENTS; i++) {
        clients[i] = (struct client){&sh, i, 0};
        pthread_create(&clients[i].thread, NULL, client_main, &clients[i]);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(clients[i].thread, NULL);
    double seconds = embed_now() - start;
    wf_compile_stats stats = wf_compile_stats_default();
    wf_compile_stats_get(server->forward, &stats);
    pthread_mutex_lock(&server->lock);
    printf("embed_server: %d clients, %llu requests in %.2f s (%.1f sentences/s): %llu batches, "
           "%llu forward passes of %.1f sentences (%.0f tokens) on average; compile cache: %llu "
           "traces, %llu hits\n",
           CLIENTS, (unsigned long long)server->requests, seconds,
           (double)server->requests / seconds, (unsigned long long)server->batches,
           (unsigned long long)server->forward_calls,
           (double)server->sentences_run / (double)server->forward_calls,
           (double)server->tokens_run / (double)server->forward_calls,
           (unsigned long long)stats.traces, (unsigned long long)stats.hits);
    bool batched = server->forward_calls < server->requests;
    pthread_mutex_unlock(&server->lock);
    int bad = atomic_load(&sh.mismatches) + atomic_load(&sh.failures);
    /* Every trace is one run size. */
    bool cache_small = stats.traces <= (uint64_t)EMBED_NPACK_SIZES;
    embed_server_stop(server);
    free(alone);
    if (bad || !cache_small) {
        printf("embed_server: FAILED (%d mismatches or errors, %llu traces)\n", bad,
               (unsigned long long)stats.traces);
        return 1;
    }
    printf("embed_server: every answer equals its sentence embedded alone%s\n",
           batched ? "; requests shared forward passes" : "");
    return 0;
}
