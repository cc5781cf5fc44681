/*
 * bench_embed_server: the sentence-embedding server of
 * examples/embed_server.h serving all-MiniLM-L6-v2 to 1, 4 and 16 client
 * threads. Each client sends one sentence at a time (the next when the
 * answer comes back) for a fixed time; the server batches what arrives
 * together. Prints sentences per second and the p50 / p99 latency of a
 * request, per client count, and the machine's load average (the figures
 * are only comparable on an idle machine).
 *
 *   bench_embed_server [seconds per client count = 3] [float32|bfloat16]
 *
 * bench/peers/embed_server.py runs the same model and sentences in JAX and
 * NumPy. Needs the model (see embed_find_model); without it, says so and
 * exits 0.
 */
#include <stdatomic.h>
#include <sys/resource.h>

#include "../examples/embed_server.h"
#include "bench_args.h"

/* Sentences of a search workload: short queries and longer passages
 * (7 to ~60 tokens). Shared with bench/peers/embed_server.py. */
static const char *const sentences[] = {
    "how do I reset my password",
    "A man is playing a guitar on the street corner.",
    "The weather forecast predicts heavy rain for the weekend, so the outdoor concert "
    "has been moved into the town hall.",
    "cheap flights to lisbon in may",
    "Researchers found that regular exercise improves memory in older adults, according "
    "to a study published on Monday in a leading medical journal.",
    "best pizza near me",
    "The committee approved the budget after a long debate about funding for schools, "
    "roads and the new public library downtown.",
    "What is the capital of Australia?",
    "Quantum computers use qubits, which can represent zero and one at the same time, "
    "to solve certain problems much faster than classical machines.",
    "She forgot her umbrella at the café.",
    "symptoms of vitamin d deficiency",
    "The museum's new exhibition brings together paintings, sculptures and photographs "
    "from more than forty artists across three continents.",
};
enum { NSENTENCES = sizeof sentences / sizeof sentences[0], MAX_SAMPLES = 1 << 20 };

struct run {
    embed_server *server;
    double stop_at;
    double *latencies; /* MAX_SAMPLES */
    atomic_long count;
    atomic_int failures;
};

struct client {
    struct run *run;
    int index;
    pthread_t thread;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    struct run *r = c->run;
    float *out = malloc((size_t)r->server->hidden * sizeof *out);
    for (int k = c->index; embed_now() < r->stop_at; k++) {
        double start = embed_now();
        if (embed_server_embed(r->server, sentences[k % NSENTENCES], out) != WF_OK) {
            atomic_fetch_add(&r->failures, 1);
            break;
        }
        long slot = atomic_fetch_add(&r->count, 1);
        if (slot < MAX_SAMPLES)
            r->latencies[slot] = embed_now() - start;
    }
    free(out);
    return NULL;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* CPU seconds (user + system) the process has used: on a shared machine,
 * CPU time per sentence says more than wall-clock throughput. */
static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static double load_average(void)
{
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}

int main(int argc, char **argv)
{
    double seconds = bench_double_arg(argc, argv, 1, 3.0, 0.01, 86400, "seconds");
    wf_dtype dtype = argc > 2 && strcmp(argv[2], "bfloat16") == 0 ? WF_DTYPE_BF16 : WF_DTYPE_F32;
    if (!(seconds > 0))
        seconds = 3.0;
    char root[PATH_MAX], model_dir[PATH_MAX];
    snprintf(root, sizeof root, "%s", __FILE__);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(root, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(root, sizeof root, ".");
    }
    if (!embed_find_model(root, model_dir, sizeof model_dir)) {
        printf("bench_embed_server: skipped: ");
        embed_print_install_hint(stdout);
        return 0;
    }
    embed_server *server = embed_server_start(model_dir, dtype, 32);
    if (!server)
        return 1;
    /* Warm-up: trace every run size passes of these sentences (up to 64
     * tokens) can use, as the peers trace theirs. */
    if (embed_server_warm_up(server, 64) != WF_OK) {
        fprintf(stderr, "bench_embed_server: %s\n", wf_last_error_message());
        return 1;
    }
    struct run r = {.server = server, .latencies = malloc(MAX_SAMPLES * sizeof(double))};
    printf("embed_server (%s), all-MiniLM-L6-v2, %d sentences of 6-30 tokens, %.1f s per "
           "client count, load average %.2f before\n",
           dtype == WF_DTYPE_BF16 ? "bfloat16" : "float32", NSENTENCES, seconds, load_average());
    printf("%-8s %12s %10s %10s %10s %10s %12s\n", "clients", "sentences/s", "p50 ms", "p99 ms",
           "sent/pass", "tok/pass", "CPU ms/sent");
    static const int client_counts[] = {1, 4, 16};
    int status = 0;
    for (size_t t = 0; t < sizeof client_counts / sizeof client_counts[0]; t++) {
        int n = client_counts[t];
        struct client clients[16];
        atomic_store(&r.count, 0);
        pthread_mutex_lock(&server->lock);
        uint64_t calls0 = server->forward_calls, sentences0 = server->sentences_run,
                 tokens0 = server->tokens_run;
        pthread_mutex_unlock(&server->lock);
        double start = embed_now(), cpu0 = cpu_seconds();
        r.stop_at = start + seconds;
        for (int i = 0; i < n; i++) {
            clients[i] = (struct client){&r, i, 0};
            pthread_create(&clients[i].thread, NULL, client_main, &clients[i]);
        }
        for (int i = 0; i < n; i++)
            pthread_join(clients[i].thread, NULL);
        double elapsed = embed_now() - start, cpu = cpu_seconds() - cpu0;
        long done = atomic_load(&r.count);
        long samples = done < MAX_SAMPLES ? done : MAX_SAMPLES;
        qsort(r.latencies, (size_t)samples, sizeof(double), compare_double);
        pthread_mutex_lock(&server->lock);
        double calls = (double)(server->forward_calls - calls0 ? server->forward_calls - calls0
                                                                : 1);
        double pass_sentences = (double)(server->sentences_run - sentences0) / calls;
        double pass_tokens = (double)(server->tokens_run - tokens0) / calls;
        pthread_mutex_unlock(&server->lock);
        if (samples == 0 || atomic_load(&r.failures)) {
            printf("%-8d failed: %s\n", n, wf_last_error_message());
            status = 1;
            continue;
        }
        printf("%-8d %12.1f %10.2f %10.2f %10.1f %10.1f %12.2f\n", n, (double)done / elapsed,
               1e3 * r.latencies[samples / 2], 1e3 * r.latencies[samples * 99 / 100],
               pass_sentences, pass_tokens, 1e3 * cpu / (double)done);
    }
    printf("load average %.2f after\n", load_average());
    free(r.latencies);
    embed_server_stop(server);
    return status;
}
