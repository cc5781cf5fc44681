/*
 * Scopes (issue 7, item 4): re-entrant under payload destructors that open
 * and close scopes while wf_scope_end (or thread exit) releases, exact when
 * one array is adopted several times and kept, and linear in the number of
 * arrays when releasing inside one large scope.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/array.h"
#include "core/scope.h"
#include "harness.h"
#include "settle.h"

static atomic_int destructor_runs;
static atomic_int destructor_failures;

static wf_status never_runs(void *payload, const wf_custom_call *call)
{
    (void)payload;
    (void)call;
    return WF_ERR_INVALID_ARGUMENT;
}

/* A payload destructor that uses scopes the way user code may: nested
 * scopes deeper than the frame stack's first allocation (so it grows),
 * arrays in each, a kept one released by hand. */
static void destructor_opening_scopes(void *payload)
{
    free(payload);
    enum { DEPTH = 12 };
    bool ok = true;
    for (int d = 0; d < DEPTH; d++) {
        ok &= wf_scope_begin() == WF_OK;
        wf_array *a = wf_scalar(d, WF_DTYPE_F32);
        ok &= wf_add(a, a) != NULL;
    }
    wf_array *kept = NULL;
    for (int d = DEPTH - 1; d >= 0; d--) {
        if (d == 0)
            kept = wf_keep(wf_scalar(7, WF_DTYPE_F32));
        ok &= wf_scope_end() == WF_OK;
    }
    ok &= kept != NULL && wf_array_size(kept) == 1;
    wf_release(kept);
    if (!ok)
        atomic_fetch_add(&destructor_failures, 1);
    atomic_fetch_add(&destructor_runs, 1);
}

/* A never-evaluated custom array whose payload destructor opens scopes. */
static wf_array *array_with_scoping_destructor(void)
{
    int64_t n = 1;
    return wf_custom("scoping_destructor", never_runs, malloc(16), destructor_opening_scopes,
                     NULL, 0, &n, 1, WF_DTYPE_F32);
}

/* wf_scope_end releases a custom array whose destructor opens 12 scopes:
 * the frame being ended must be detached first, or the destructor's
 * wf_scope_begin reuses its slot (the rest of the frame leaks) or moves the
 * frame stack under it (use after free under ASan). */
static void test_destructor_opens_scopes_during_scope_end(void)
{
    int64_t live = live_arrays();
    int runs = atomic_load(&destructor_runs);
    CHECK_OK(wf_scope_begin());
    wf_array *before = wf_scalar(1, WF_DTYPE_F32);
    for (int i = 0; i < 3; i++)
        CHECK_NOT_NULL(array_with_scoping_destructor());
    wf_array *after = wf_add(before, before);
    CHECK_NOT_NULL(after);
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(atomic_load(&destructor_runs), runs + 3);
    CHECK_EQ_INT(atomic_load(&destructor_failures), 0);
    CHECK_STATUS(wf_scope_end(), WF_ERR_MISUSE); /* every scope the destructors opened closed */
    wf_clear_error();
    CHECK_EQ_INT(live_arrays(), live);
}

static void *exit_with_scoping_destructor_in_scope(void *arg)
{
    (void)arg;
    wf_scope_begin();
    wf_scalar(1, WF_DTYPE_F32);
    wf_scope_begin();
    array_with_scoping_destructor();
    wf_scalar(2, WF_DTYPE_F32);
    return NULL; /* exits with two scopes open */
}

/* The same holds when thread exit closes the scopes. */
static void test_destructor_opens_scopes_during_thread_exit(void)
{
    int64_t live = live_arrays();
    int runs = atomic_load(&destructor_runs);
    pthread_t t;
    pthread_create(&t, NULL, exit_with_scoping_destructor_in_scope, NULL);
    pthread_join(t, NULL);
    CHECK_EQ_INT(atomic_load(&destructor_runs), runs + 1);
    CHECK_EQ_INT(atomic_load(&destructor_failures), 0);
    CHECK_EQ_INT(live_arrays(), live);
}

/* One array adopted three times (wf_retain returns the same handle), one
 * reference kept into the outer scope, one released by hand: the inner scope
 * releases exactly one, the outer the kept one. */
static void test_same_array_adopted_several_times_and_kept(void)
{
    int64_t live = live_arrays();
    CHECK_OK(wf_scope_begin());
    CHECK_OK(wf_scope_begin());
    wf_array *a = wf_scalar(4, WF_DTYPE_F32);
    CHECK(wf_retain(a) == a);
    CHECK(wf_retain(a) == a);
    CHECK(wf_keep(a) == a);
    wf_release(a);
    CHECK(wf_keep(a) == a); /* the third reference moves out too */
    CHECK_NULL_WITH(wf_keep(a), WF_ERR_MISUSE); /* the inner scope owns none now */
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(wf_array_size(a), 1); /* the outer scope holds two references */
    wf_release(a);
    CHECK_EQ_INT(wf_array_size(a), 1);
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(wf_array_size(a), 0); /* released */
    CHECK_EQ_INT(live_arrays(), live);
}

/* A reference kept out of the only scope belongs to the caller; releasing it
 * inside a new scope does not take a record the new scope owns. */
static void test_release_of_unscoped_reference_inside_scope(void)
{
    int64_t live = live_arrays();
    CHECK_OK(wf_scope_begin());
    wf_array *mine = wf_keep(wf_scalar(1, WF_DTYPE_F32));
    CHECK_OK(wf_scope_end());
    CHECK_OK(wf_scope_begin());
    wf_array *scoped = wf_retain(mine); /* the scope owns this reference */
    wf_release(mine);                   /* mine: the scope's record goes */
    CHECK_EQ_INT(wf_array_size(scoped), 1);
    CHECK_OK(wf_scope_end()); /* nothing left to release twice */
    CHECK_EQ_INT(live_arrays(), live + 1);
    wf_release(scoped); /* the reference the record stood for */
    CHECK_EQ_INT(live_arrays(), live);
}

/* A function body that keeps its own references, as a binding's objects
 * do: each input retained unscoped and released by hand, a temporary made
 * and released, the output returned. */
static wf_status body_with_own_references(void *payload, wf_array *const *inputs, size_t n,
                                          wf_array **outputs, size_t *noutputs)
{
    (void)payload;
    (void)n;
    wf_array *held = wf_retain_unscoped(inputs[0]);
    wf_array *twice = wf_add(held, held);
    outputs[0] = wf_multiply(twice, held);
    wf_release(twice);
    wf_release(held);
    *noutputs = 1;
    return WF_OK;
}

/* A transform's scope (and the caller's) is hidden from the function body:
 * releasing a reference the body retained unscoped never takes the
 * reference the transform's scope holds on its tracer (the tracer then
 * outlived the transform: one leaked array per call). */
static void test_function_bodies_run_with_scopes_hidden(void)
{
    wf_fn *fn = wf_fn_new(body_with_own_references, NULL, NULL);
    wf_array *x = wf_scalar(3, WF_DTYPE_F32);
    wf_array *seed = wf_scalar(1, WF_DTYPE_F32);
    const int64_t live = live_arrays();
    for (int round = 0; round < 3; round++) {
        CHECK_OK(wf_scope_begin()); /* a caller's scope stays hidden too */
        wf_array *out = NULL, *grad = NULL;
        CHECK_OK(wf_vjp(fn, &x, 1, &seed, 1, &out, &grad));
        double value = 0, slope = 0;
        CHECK_OK(wf_array_item(out, &value));
        CHECK_OK(wf_array_item(grad, &slope));
        CHECK(value == 18.0 && slope == 12.0);
        wf_release(out);
        wf_release(grad);
        CHECK_OK(wf_scope_end());
        CHECK_EQ_INT(live_arrays(), live);
    }
    wf_release(x);
    wf_release(seed);
    wf_fn_release(fn);
}

/* Work (table probes and releases) to create n lazy arrays in one scope and
 * release them oldest first, the worst order for a newest-first search. */
static uint64_t work_to_release_in_scope(int n)
{
    wf_array *x = wf_scalar(1, WF_DTYPE_F32);
    wf_array **arrays = malloc(sizeof *arrays * (size_t)n);
    CHECK_OK(wf_scope_begin());
    uint64_t start = wf__scope_work();
    for (int i = 0; i < n; i++)
        arrays[i] = wf_negative(x);
    for (int i = 0; i < n; i++)
        wf_release(arrays[i]);
    uint64_t work = wf__scope_work() - start;
    CHECK_OK(wf_scope_end());
    free(arrays);
    wf_release(x);
    return work;
}

/* Releasing inside a large scope is O(1) each: twice the arrays, about
 * twice the work (a linear search would be four times), and a few probes
 * per array. */
static void test_release_in_large_scope_is_linear(void)
{
    int64_t live = live_arrays();
    uint64_t small = work_to_release_in_scope(100000);
    uint64_t large = work_to_release_in_scope(200000);
    printf("    scope work: %llu for 100k arrays, %llu for 200k\n", (unsigned long long)small,
           (unsigned long long)large);
    CHECK(large <= small * 22 / 10);
    CHECK(large <= 200000ull * 8);
    CHECK_EQ_INT(live_arrays(), live);
}

int main(void)
{
    RUN_TEST(test_destructor_opens_scopes_during_scope_end);
    RUN_TEST(test_destructor_opens_scopes_during_thread_exit);
    RUN_TEST(test_same_array_adopted_several_times_and_kept);
    RUN_TEST(test_release_of_unscoped_reference_inside_scope);
    RUN_TEST(test_function_bodies_run_with_scopes_hidden);
    RUN_TEST(test_release_in_large_scope_is_linear);
    return TEST_SUMMARY();
}
