/*
 * Every op family under concurrency: graphs mixing unary, binary, reduction,
 * shape, indexing, matmul, fused and random ops are built once and evaluated
 * by several threads at the same time, on the default stream and on streams
 * of their own. Each node must run exactly once, and every result must equal,
 * bit for bit, a single-threaded evaluation of the same graph built again
 * (kernels are deterministic for a given pool size).
 */
#include <pthread.h>
#include <stdlib.h>

#include "conformance.h"
#include "core/array.h"
#include "harness.h"
#include "settle.h"

enum { ROOTS = 12, THREADS = 6, ROUNDS = 150 };

/* A graph over (8, 16) float32 inputs made from `seed`; ROOTS new roots. */
static void build_mixed_graph(uint32_t seed, wf_array **roots)
{
    const int64_t shape[2] = {8, 16};
    double *vx = conf_values(128, -2, 2, seed), *vw = conf_values(16 * 16, -0.5, 0.5, seed + 1);
    wf_scope_begin();
    wf_array *x = conf_array(vx, shape, 2, WF_DTYPE_F32);
    wf_array *w = conf_array(vw, (int64_t[]){16, 16}, 2, WF_DTYPE_F32);
    wf_key key = wf_random_key(seed);
    wf_array *noise = wf_random_normal(shape, 2, WF_DTYPE_F32, 0, 0.1, &key);
    wf_array *h = wf_add(wf_matmul(x, w), noise);                 /* linalg, random */
    wf_array *act = wf_gelu(wf_layer_norm(h, NULL, NULL, 1e-5));  /* fused */
    int last = 1, first = 0;
    wf_array *probs = wf_softmax(act, &last, 1);                  /* reductions */
    wf_array *t = wf_transpose(act, NULL, 0);                     /* views */
    wf_array *idx = wf_argmax(act, 1, false);
    wf_array *picked = wf_take(x, idx, 1);                        /* indexing */
    wf_array *mixed = wf_where(wf_greater(act, wf_scalar(0, WF_DTYPE_F32)), wf_tanh(act),
                               wf_multiply(wf_sin(act), wf_exp(act)));
    wf_array *cat = wf_concatenate((wf_array *[]){act, mixed}, 2, 0);
    wf_array *half = wf_astype(cat, WF_DTYPE_F16);
    roots[0] = wf_keep(probs);
    roots[1] = wf_keep(wf_sum(t, &first, 1, false));
    roots[2] = wf_keep(picked);
    roots[3] = wf_keep(wf_cumsum(mixed, 1, false, true));
    roots[4] = wf_keep(wf_astype(wf_sum(half, NULL, 0, false), WF_DTYPE_F32));
    roots[5] = wf_keep(wf_logsumexp(cat, &last, 1, true));
    roots[6] = wf_keep(wf_rms_norm(wf_reshape(t, (int64_t[]){4, 32}, 2), NULL, 1e-6));
    roots[7] = wf_keep(wf_var(mixed, NULL, 0, false, 1));
    roots[8] = wf_keep(wf_pad(wf_tril(act, 0), (int64_t[]){1, 0}, (int64_t[]){0, 2}, -1));
    roots[9] = wf_keep(wf_maximum(probs, wf_sigmoid(h)));
    roots[10] = wf_keep(wf_scatter_add(x, wf_arange(0, 4, 1, WF_DTYPE_I32),
                                       wf_slice(act, (int64_t[]){0, 0}, (int64_t[]){8, 4},
                                                (int64_t[]){1, 1}),
                                       1));
    roots[11] = wf_keep(wf_max(wf_abs(wf_subtract(act, mixed)), NULL, 0, false));
    wf_scope_end();
    free(vx);
    free(vw);
}

struct job {
    pthread_t thread;
    pthread_barrier_t *start, *done;
    wf_array *const *roots;
    int index;
    wf_status status;
};

static void *evaluate_some(void *arg)
{
    struct job *j = arg;
    wf_stream *own = j->index % 2 ? wf_stream_new() : NULL; /* odd threads: own stream */
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(j->start);
        if (own)
            wf_stream_push(own);
        wf_array *mine[4];
        for (int k = 0; k < 4; k++)
            mine[k] = j->roots[(j->index * 3 + k * 5) % ROOTS];
        wf_status s = wf_eval(mine, 4);
        if (s != WF_OK)
            j->status = s;
        if (own)
            wf_stream_pop();
        pthread_barrier_wait(j->done);
    }
    wf_stream_release(own);
    return NULL;
}

static bool same_bits(wf_array *a, wf_array *b)
{
    size_t n = wf_array_nbytes(a);
    if (n != wf_array_nbytes(b))
        return false;
    const void *pa, *pb;
    if (wf_array_data(a, &pa) != WF_OK || wf_array_data(b, &pb) != WF_OK)
        return false;
    return memcmp(pa, pb, n) == 0;
}

static void test_every_family_under_threads(void)
{
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, THREADS + 1);
    pthread_barrier_init(&done, NULL, THREADS + 1);
    wf_array *shared[ROOTS];
    struct job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (struct job){.start = &start, .done = &done, .roots = shared, .index = t};
        pthread_create(&jobs[t].thread, NULL, evaluate_some, &jobs[t]);
    }
    int count_mismatches = 0, value_mismatches = 0, not_evaluated = 0;
    for (int round = 0; round < ROUNDS; round++) {
        wf_array *reference[ROOTS];
        build_mixed_graph((uint32_t)round, reference);
        uint64_t before = wf__kernels_run();
        CHECK_OK(wf_eval(reference, ROOTS));
        uint64_t nodes = wf__kernels_run() - before;

        build_mixed_graph((uint32_t)round, shared);
        before = wf__kernels_run();
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&done);
        for (int r = 0; r < ROOTS; r++)
            not_evaluated += !wf_array_is_evaluated(shared[r]);
        CHECK_OK(wf_eval(shared, ROOTS)); /* roots no thread picked */
        count_mismatches += wf__kernels_run() - before != nodes;
        for (int r = 0; r < ROOTS; r++)
            value_mismatches += !same_bits(reference[r], shared[r]);
        for (int r = 0; r < ROOTS; r++) {
            wf_release(reference[r]);
            wf_release(shared[r]);
        }
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(jobs[t].thread, NULL);
        CHECK_OK(jobs[t].status);
    }
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
    CHECK_EQ_INT(count_mismatches, 0);
    CHECK_EQ_INT(value_mismatches, 0);
    CHECK(not_evaluated < ROUNDS * ROOTS); /* the threads did evaluate */
}

int main(void)
{
    int64_t live = live_arrays();
    RUN_TEST(test_every_family_under_threads);
    int status = TEST_SUMMARY();
    if (live_arrays() != live) {
        printf("leaked %lld arrays\n", (long long)(live_arrays() - live));
        status = 1;
    }
    return status;
}
