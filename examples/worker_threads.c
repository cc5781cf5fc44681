/*
 * worker_threads: the inference-server shape. One set of weights is built
 * once and shared; worker threads each answer requests with it at the same
 * time (some on a stream of their own), and every answer is checked against
 * a single-threaded run. No lock is needed around any weft call.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <weft.h>

enum { WORKERS = 4, REQUESTS = 50, IN = 64, HIDDEN = 128 };

static wf_array *weights; /* shared by every thread, read-only */

/* score(x) = sum(exp(-0.01 * x @ W)) for a request x of shape (1, IN). */
static double answer(int request)
{
    float x[IN];
    for (int i = 0; i < IN; i++)
        x[i] = (float)((request * 31 + i * 7) % 13) / 13.0f;
    wf_scope_begin();
    wf_array *input = wf_array_from_data(x, (int64_t[]){1, IN}, 2, WF_DTYPE_F32);
    wf_array *h = wf_matmul(input, weights);
    wf_array *e = wf_exp(wf_multiply(h, wf_scalar(-0.01, WF_DTYPE_F32)));
    double score = NAN;
    if (wf_array_item(wf_sum(e, NULL, 0, false), &score) != WF_OK)
        fprintf(stderr, "request %d: %s\n", request, wf_last_error_message());
    wf_scope_end();
    return score;
}

static double expected[REQUESTS];
static int mismatches[WORKERS];

static void *worker(void *arg)
{
    long id = (long)arg;
    wf_stream *own = id % 2 ? wf_stream_new() : NULL; /* odd workers: own stream */
    if (own)
        wf_stream_push(own);
    for (int r = (int)id; r < REQUESTS; r += WORKERS)
        if (fabs(answer(r) - expected[r]) > 1e-4 * fabs(expected[r]))
            mismatches[id]++;
    if (own) {
        wf_stream_pop();
        wf_stream_release(own);
    }
    return NULL;
}

int main(void)
{
    float w[IN * HIDDEN];
    for (int i = 0; i < IN * HIDDEN; i++)
        w[i] = (float)(i % 17) / 17.0f - 0.5f;
    weights = wf_array_from_data(w, (int64_t[]){IN, HIDDEN}, 2, WF_DTYPE_F32);
    for (int r = 0; r < REQUESTS; r++)
        expected[r] = answer(r);

    pthread_t threads[WORKERS];
    for (long t = 0; t < WORKERS; t++)
        pthread_create(&threads[t], NULL, worker, (void *)t);
    int total = 0;
    for (int t = 0; t < WORKERS; t++) {
        pthread_join(threads[t], NULL);
        total += mismatches[t];
    }
    printf("%d workers answered %d requests concurrently; %d differed from the "
           "single-threaded answers\n", WORKERS, REQUESTS, total);
    wf_release(weights);
    return total == 0 ? 0 : 1;
}
