/* Primitives with several outputs (prim/sibling.h): one node of the
 * primitive runs its kernel exactly once, however many siblings are
 * evaluated, by however many threads; failures reach every sibling;
 * nothing leaks whichever siblings are released unevaluated. The primitive
 * is the test's own, registered from here: row sums (float32, (n,)) and the
 * input doubled (float64, (n, d)) of a float32 (n, d) input. */
#include <pthread.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "harness.h"
#include "prim/kernel.h"
#include "prim/sibling.h"
#include "settle.h"

typedef struct stats_params {
    int fail; /* the kernel fails */
} stats_params;

static atomic_int kernel_runs;
static atomic_int params_released;

static wf_status infer_stats(const void *params, const wf_desc *inputs, int ninputs,
                             wf_out_desc *outputs)
{
    (void)params;
    if (ninputs != 1)
        return WF_ERR_INTERNAL;
    const wf_desc *x = &inputs[0];
    if (x->dtype != WF_DTYPE_F32 || x->ndim != 2)
        return wf__error(WF_ERR_DTYPE, "test_stats: needs a 2-d float32 input");
    outputs[0].dtype = WF_DTYPE_F32;
    outputs[0].ndim = 1;
    outputs[0].shape[0] = x->shape[0];
    outputs[1].dtype = WF_DTYPE_F64;
    outputs[1].ndim = 2;
    outputs[1].shape[0] = x->shape[0];
    outputs[1].shape[1] = x->shape[1];
    return WF_OK;
}

static void release_stats_params(void *params)
{
    (void)params;
    atomic_fetch_add(&params_released, 1);
}

static wf_status kernel_stats(wf_array *out, wf_array *const *inputs, int ninputs,
                              const void *params)
{
    (void)ninputs;
    atomic_fetch_add(&kernel_runs, 1);
    const stats_params *p = params;
    if (p->fail)
        return WF_ERR_KERNEL;
    const wf_array *x = inputs[0];
    wf_array *sums = wf__node_output(out, 0), *doubled = wf__node_output(out, 1);
    if (wf__array_alloc_output(sums) != WF_OK || wf__array_alloc_output(doubled) != WF_OK)
        return wf_last_error();
    const int64_t n = x->shape[0], d = x->shape[1];
    const float *src = wf__array_data_ptr(x);
    float *s = wf__array_data_ptr(sums);
    double *t = wf__array_data_ptr(doubled);
    for (int64_t i = 0; i < n; i++) {
        s[i] = 0;
        for (int64_t j = 0; j < d; j++) {
            const float v = src[i * x->strides[0] + j * x->strides[1]];
            s[i] += v;
            t[i * d + j] = 2.0 * v;
        }
    }
    return WF_OK;
}

static const wf_prim_def prim_stats = {
    .name = "test_stats",
    .noutputs = 2,
    .params_size = sizeof(stats_params),
    .infer = infer_stats,
    .params_release = release_stats_params,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_array *input_2x3(void)
{
    const float v[6] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[2] = {2, 3};
    return wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
}

/* The two siblings of a new stats node on x (published to the caller). */
static bool make_stats(wf_array *x, int fail, wf_array **out)
{
    stats_params p = {fail};
    if (!CHECK_OK(wf__node_new_multi(&prim_stats, &p, &x, 1, out, 2)))
        return false;
    wf__array_publish(out[0]);
    wf__array_publish(out[1]);
    return true;
}

static void test_siblings_share_one_kernel_run(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = input_2x3(), *out[2];
    if (!make_stats(x, 0, out))
        return;
    CHECK_EQ_INT(wf_array_dtype(out[0]), WF_DTYPE_F32);
    CHECK_EQ_INT(wf_array_ndim(out[0]), 1);
    CHECK_EQ_INT(wf_array_dtype(out[1]), WF_DTYPE_F64);
    CHECK_EQ_INT(wf_array_dim(out[1], 1), 3);
    const int runs0 = atomic_load(&kernel_runs);
    double doubled[6];
    CHECK_OK(wf_array_copy_to(out[1], doubled, sizeof doubled)); /* sibling 1 first */
    CHECK_EQ_INT(atomic_load(&kernel_runs), runs0 + 1);
    float sums[2];
    CHECK_OK(wf_array_copy_to(out[0], sums, sizeof sums)); /* a view: no second run */
    CHECK_EQ_INT(atomic_load(&kernel_runs), runs0 + 1);
    CHECK(sums[0] == 6 && sums[1] == 15);
    CHECK(doubled[0] == 2 && doubled[5] == 12);
    wf_release(out[0]);
    wf_release(out[1]);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

static void test_siblings_evaluated_together(void)
{
    wf_array *x = input_2x3(), *out[2];
    if (!make_stats(x, 0, out))
        return;
    const int runs0 = atomic_load(&kernel_runs);
    wf_array *sum = wf_sum(out[1], NULL, 0, false); /* a dependent of one sibling */
    wf_array *roots[3] = {sum, out[0], out[1]};
    CHECK_OK(wf_eval(roots, 3));
    CHECK_EQ_INT(atomic_load(&kernel_runs), runs0 + 1);
    CHECK(wf_array_is_evaluated(out[0]) && wf_array_is_evaluated(out[1]));
    double total = 0;
    CHECK_OK(wf_array_item(sum, &total));
    CHECK_NEAR(total, 42, 0);
    wf_release(sum);
    wf_release(out[0]);
    wf_release(out[1]);
    wf_release(x);
}

static void test_released_siblings_leak_nothing(void)
{
    const int64_t live0 = live_arrays();
    const int released0 = atomic_load(&params_released);
    wf_array *x = input_2x3(), *out[2];
    /* Both released unevaluated. */
    if (!make_stats(x, 0, out))
        return;
    wf_release(out[0]);
    wf_release(out[1]);
    /* One released unevaluated, the other evaluated. */
    if (!make_stats(x, 0, out))
        return;
    wf_release(out[0]);
    CHECK_OK(wf_eval(&out[1], 1));
    wf_release(out[1]);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
    CHECK_EQ_INT(atomic_load(&params_released), released0 + 2);
}

static void test_kernel_failure_reaches_every_sibling(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = input_2x3(), *out[2];
    if (!make_stats(x, 1, out))
        return;
    wf_array *dep = wf_exp(out[0]);
    const int runs0 = atomic_load(&kernel_runs);
    CHECK_STATUS(wf_eval(&dep, 1), WF_ERR_KERNEL);
    CHECK_STATUS(wf_eval(&out[1], 1), WF_ERR_KERNEL);
    CHECK_STR_CONTAINS(wf_last_error_message(), "test_stats");
    CHECK_STATUS(wf_eval(&out[0], 1), WF_ERR_KERNEL);
    CHECK_EQ_INT(atomic_load(&kernel_runs), runs0 + 1);
    wf_release(dep);
    wf_release(out[0]);
    wf_release(out[1]);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

static void test_bad_input_and_output_count(void)
{
    const int64_t live0 = live_arrays();
    const int released0 = atomic_load(&params_released);
    const int32_t v[2] = {1, 2};
    const int64_t shape[2] = {1, 2};
    wf_array *ints = wf_array_from_data(v, shape, 2, WF_DTYPE_I32), *out[2] = {ints, ints};
    stats_params p = {0};
    CHECK_STATUS(wf__node_new_multi(&prim_stats, &p, &ints, 1, out, 2), WF_ERR_DTYPE);
    CHECK(out[0] == NULL && out[1] == NULL);
    wf_array *one[1];
    wf_array *x = input_2x3();
    CHECK_STATUS(wf__node_new_multi(&prim_stats, &p, &x, 1, one, 1), WF_ERR_INTERNAL);
    CHECK(one[0] == NULL);
    wf_clear_error();
    wf_array *null_input = NULL;
    CHECK_STATUS(wf__node_new_multi(&prim_stats, &p, &null_input, 1, out, 2),
                 WF_ERR_NULL_ARGUMENT);
    CHECK_EQ_INT(atomic_load(&params_released), released0 + 3); /* params owned from the call */
    wf_clear_error();
    wf_release(x);
    wf_release(ints);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* Threads evaluate different siblings of one node at once, round after
 * round: the kernel runs exactly once per node. */
enum { THREADS = 4, ROUNDS = 200 };

struct race {
    pthread_barrier_t start;
    wf_array *siblings[ROUNDS][2];
    atomic_int failures;
};

static void *race_thread(void *arg)
{
    struct race *r = arg;
    static atomic_int next_id;
    const int id = atomic_fetch_add(&next_id, 1) % THREADS;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&r->start);
        wf_array *mine = r->siblings[round][id % 2];
        if (wf_eval(&mine, 1) != WF_OK)
            atomic_fetch_add(&r->failures, 1);
    }
    return NULL;
}

static void test_concurrent_sibling_evaluation_runs_once(void)
{
    const int64_t live0 = live_arrays();
    static struct race r;
    memset(&r, 0, sizeof r);
    pthread_barrier_init(&r.start, NULL, THREADS);
    wf_array *x = input_2x3();
    for (int round = 0; round < ROUNDS; round++)
        if (!make_stats(x, 0, r.siblings[round]))
            return;
    const int runs0 = atomic_load(&kernel_runs);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, race_thread, &r);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_INT(atomic_load(&r.failures), 0);
    CHECK_EQ_INT(atomic_load(&kernel_runs), runs0 + ROUNDS);
    for (int round = 0; round < ROUNDS; round++) {
        float sums[2];
        CHECK_OK(wf_array_copy_to(r.siblings[round][0], sums, sizeof sums));
        CHECK(sums[0] == 6 && sums[1] == 15);
        wf_release(r.siblings[round][0]);
        wf_release(r.siblings[round][1]);
    }
    CHECK_EQ_INT(atomic_load(&kernel_runs), runs0 + ROUNDS);
    pthread_barrier_destroy(&r.start);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

int main(void)
{
    if (wf__kernel_register(&prim_stats, WF_DEVICE_KIND_CPU, kernel_stats) != WF_OK)
        return 1;
    RUN_TEST(test_siblings_share_one_kernel_run);
    RUN_TEST(test_siblings_evaluated_together);
    RUN_TEST(test_released_siblings_leak_nothing);
    RUN_TEST(test_kernel_failure_reaches_every_sibling);
    RUN_TEST(test_bad_input_and_output_count);
    RUN_TEST(test_concurrent_sibling_evaluation_runs_once);
    return TEST_SUMMARY();
}
