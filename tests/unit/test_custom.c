/* wf_custom: user kernels run lazily with contiguous inputs, own their
 * payload, may fail (the failure reaches every dependent and every waiting
 * thread), and cannot evaluate from inside. */
#include <pthread.h>
#include <stdlib.h>

#include "conformance.h"
#include "core/array.h"
#include "harness.h"
#include "settle.h"

static atomic_int payloads_freed;
static atomic_int kernel_calls;

static void free_payload(void *payload)
{
    atomic_fetch_add(&payloads_freed, 1);
    free(payload);
}

/* out = a * scale + b, float32, with scale in the payload. */
static wf_status scaled_add(void *payload, const wf_custom_call *call)
{
    atomic_fetch_add(&kernel_calls, 1);
    float scale = *(const float *)payload;
    if (call->ninputs != 2 || call->output_dtype != WF_DTYPE_F32)
        return WF_ERR_INVALID_ARGUMENT;
    const float *a = call->inputs[0], *b = call->inputs[1];
    float *out = call->output;
    int64_t n = 1;
    for (int d = 0; d < call->output_ndim; d++)
        n *= call->output_shape[d];
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] * scale + b[i];
    return WF_OK;
}

static float *new_scale(float v)
{
    float *p = malloc(sizeof *p);
    *p = v;
    return p;
}

static void test_custom_kernel_computes_lazily(void)
{
    int freed = atomic_load(&payloads_freed), calls = atomic_load(&kernel_calls);
    const int64_t shape[2] = {3, 4};
    double *va = conf_values(12, -1, 1, 1), *vb = conf_values(12, -1, 1, 2);
    wf_array *a = conf_strided(va, shape, 2, WF_DTYPE_F32); /* a non-contiguous input */
    wf_array *b = conf_array(vb, shape, 2, WF_DTYPE_F32);
    wf_array *ins[2] = {a, b};
    wf_array *c = wf_custom("scaled_add", scaled_add, new_scale(3), free_payload, ins, 2, shape,
                            2, WF_DTYPE_F32);
    CHECK_NOT_NULL(c);
    CHECK_EQ_INT(atomic_load(&kernel_calls), calls); /* lazy */
    double want[12];
    for (int i = 0; i < 12; i++)
        want[i] = conf_round_to(conf_round_to(va[i], WF_DTYPE_F32) * 3 +
                                    conf_round_to(vb[i], WF_DTYPE_F32),
                                WF_DTYPE_F32);
    wf_array *d = wf_add(c, c); /* an ordinary op on top */
    conf_check(c, WF_DTYPE_F32, shape, 2, want, 1e-6);
    CHECK_EQ_INT(atomic_load(&kernel_calls), calls + 1);
    CHECK_EQ_INT(atomic_load(&payloads_freed), freed); /* d still holds c's node */
    wf_release(d);
    CHECK_EQ_INT(atomic_load(&payloads_freed), freed + 1);
    wf_release(a);
    wf_release(b);
    free(va);
    free(vb);
}

static wf_status always_fails(void *payload, const wf_custom_call *call)
{
    (void)payload;
    (void)call;
    atomic_fetch_add(&kernel_calls, 1);
    return WF_ERR_INVALID_ARGUMENT;
}

struct waiter {
    wf_array *root;
    pthread_barrier_t *barrier;
    wf_status status;
    char message[160];
};

static void *eval_waiter(void *arg)
{
    struct waiter *w = arg;
    pthread_barrier_wait(w->barrier);
    w->status = wf_eval(&w->root, 1);
    snprintf(w->message, sizeof w->message, "%s", wf_last_error_message());
    return NULL;
}

/* A failing custom kernel under shared dependents: every thread gets the
 * kernel's status and a message naming it; nothing stays CLAIMED; later
 * work runs. */
static void test_failing_custom_kernel_reaches_everyone(void)
{
    enum { THREADS = 6 };
    int freed = atomic_load(&payloads_freed);
    int64_t n = 16;
    wf_array *x = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *bad = wf_custom("doomed", always_fails, new_scale(1), free_payload, &x, 1, &n, 1,
                              WF_DTYPE_F32);
    wf_array *roots[THREADS];
    for (int t = 0; t < THREADS; t++) {
        wf_array *k = wf_scalar(t, WF_DTYPE_F32);
        wf_array *scaled = wf_multiply(bad, k);
        roots[t] = wf_exp(scaled);
        wf_release(scaled);
        wf_release(k);
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t threads[THREADS];
    struct waiter ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t] = (struct waiter){.root = roots[t], .barrier = &barrier};
        pthread_create(&threads[t], NULL, eval_waiter, &ws[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&barrier);
    for (int t = 0; t < THREADS; t++) {
        CHECK_STATUS(ws[t].status, WF_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(ws[t].message, "doomed");
        CHECK(wf_array_is_evaluated(roots[t]));
    }
    double v;
    wf_array *sum_x = wf_sum(x, NULL, 0, false);
    CHECK_OK(wf_array_item(sum_x, &v)); /* the input itself is fine */
    CHECK_NEAR(v, 16, 0);
    for (int t = 0; t < THREADS; t++)
        wf_release(roots[t]);
    wf_release(bad);
    CHECK_EQ_INT(atomic_load(&payloads_freed), freed + 1);
    wf_release(sum_x);
    wf_release(x);
}

static wf_array *captured;
static wf_status status_inside;

static wf_status tries_to_evaluate(void *payload, const wf_custom_call *call)
{
    (void)payload;
    wf_array *y = wf_exp(captured); /* building is fine */
    status_inside = wf_eval(&y, 1); /* evaluating is not */
    wf_release(y);
    float *out = call->output;
    out[0] = 1;
    return WF_OK;
}

static wf_status fails_saying_why(void *payload, const wf_custom_call *call)
{
    (void)payload;
    (void)call;
    return wf_set_error(WF_ERR_INVALID_ARGUMENT, "the input had a %s", "hole in it");
}

/* The message a failing kernel records with wf_set_error is the array's
 * error message (naming the kernel), not only its status. */
static void test_failing_kernel_keeps_its_message(void)
{
    int64_t n = 2;
    wf_array *bad = wf_custom("holey", fails_saying_why, NULL, NULL, NULL, 0, &n, 1,
                              WF_DTYPE_F32);
    CHECK_STATUS(wf_eval(&bad, 1), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "holey");
    CHECK_STR_CONTAINS(wf_last_error_message(), "the input had a hole in it");
    wf_release(bad);
}

static void test_evaluating_inside_a_kernel_is_misuse(void)
{
    captured = wf_scalar(2, WF_DTYPE_F32);
    wf_array *c = wf_custom("nested", tries_to_evaluate, NULL, NULL, NULL, 0, NULL, 0,
                            WF_DTYPE_F32);
    double v;
    CHECK_OK(wf_array_item(c, &v));
    CHECK_NEAR(v, 1, 0);
    CHECK_EQ_INT(status_inside, WF_ERR_MISUSE);
    wf_release(c);
    wf_release(captured);
}

static void test_bad_custom_input(void)
{
    int freed = atomic_load(&payloads_freed);
    int64_t n = 4, negative = -1;
    wf_array *x = wf_ones(&n, 1, WF_DTYPE_F32);
    conf_check_error(wf_custom("k", NULL, new_scale(1), free_payload, &x, 1, &n, 1,
                               WF_DTYPE_F32),
                     WF_ERR_NULL_ARGUMENT, "kernel is NULL");
    conf_check_error(wf_custom("k", scaled_add, new_scale(1), free_payload, NULL, 1, &n, 1,
                               WF_DTYPE_F32),
                     WF_ERR_NULL_ARGUMENT, "inputs is NULL");
    conf_check_error(wf_custom("k", scaled_add, new_scale(1), free_payload, &x, -1, &n, 1,
                               WF_DTYPE_F32),
                     WF_ERR_INVALID_ARGUMENT, "inputs");
    conf_check_error(wf_custom("k", scaled_add, new_scale(1), free_payload, &x, 1, &negative,
                               1, WF_DTYPE_F32),
                     WF_ERR_INVALID_ARGUMENT, "negative");
    conf_check_error(wf_custom("k", scaled_add, new_scale(1), free_payload, &x, 1, &n, 1,
                               (wf_dtype)99),
                     WF_ERR_DTYPE, "dtype");
    wf_array *null_input = NULL;
    conf_check_error(wf_custom("k", scaled_add, new_scale(1), free_payload, &null_input, 1, &n,
                               1, WF_DTYPE_F32),
                     WF_ERR_NULL_ARGUMENT, "input");
    /* Every failed call freed its payload. */
    CHECK_EQ_INT(atomic_load(&payloads_freed), freed + 6);
    wf_release(x);
}

static void free_payload_slowly(void *payload)
{
    usleep(200 * 1000);
    free_payload(payload);
}

/* The fuzz_api finding (docs/FAULTS.md): a custom node freed by a stream
 * task keeps living until the worker has run its destructor, which may be
 * after wf_stream_synchronize returned; a leak check must let it settle.
 * The destructor here takes 200 ms, so an immediate count would see it. */
static void test_deferred_destructor_settles_after_synchronize(void)
{
    const int64_t live = live_arrays();
    const int freed = atomic_load(&payloads_freed);
    int64_t n = 4;
    wf_array *x = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *ins[2] = {x, x};
    wf_array *c = wf_custom("slow_free", scaled_add, new_scale(2), free_payload_slowly, ins, 2,
                            &n, 1, WF_DTYPE_F32);
    wf_array *d = wf_exp(c);
    wf_release(c); /* d's task drops c's last reference: its destructor is deferred */
    CHECK_OK(wf_async_eval(&d, 1));
    wf_release(d);
    wf_release(x);
    settle_default_stream();
    CHECK_EQ_INT(settle_live_arrays(live), live);
    CHECK_EQ_INT(atomic_load(&payloads_freed), freed + 1);
}

int main(void)
{
    int64_t live = live_arrays();
    RUN_TEST(test_custom_kernel_computes_lazily);
    RUN_TEST(test_failing_custom_kernel_reaches_everyone);
    RUN_TEST(test_failing_kernel_keeps_its_message);
    RUN_TEST(test_evaluating_inside_a_kernel_is_misuse);
    RUN_TEST(test_bad_custom_input);
    RUN_TEST(test_deferred_destructor_settles_after_synchronize);
    if (live_arrays() != live)
        printf("leaked %lld arrays\n", (long long)(live_arrays() - live));
    return TEST_SUMMARY() || live_arrays() != live;
}
