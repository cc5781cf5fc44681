/* The shared compile cache on its own: single flight, its bounded wait,
 * failures, erase, LRU limits, counters. Traces here are plain counters,
 * not graphs. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/cache.h"
#include "harness.h"

static atomic_int traces_freed;

static void trace_free(void *trace)
{
    atomic_fetch_add(&traces_freed, 1);
    free(trace);
}

static void *trace_new(int value)
{
    int *t = malloc(sizeof *t);
    *t = value;
    return t;
}

/* Fresh function ids per test, like compile's 64-bit counter. */
static uint64_t next_fn_id(void)
{
    static atomic_uint_fast64_t id = 1000;
    return atomic_fetch_add(&id, 1);
}

static enum wf_cache_outcome acquire(uint64_t fn, int key, wf_cache_entry **e)
{
    return wf__cache_acquire(fn, &key, sizeof key, true, e, NULL, NULL);
}

static void trace_and_publish(uint64_t fn, int key)
{
    wf_cache_entry *e;
    CHECK_EQ_INT(acquire(fn, key, &e), WF_CACHE_TRACE);
    wf__cache_publish(e, trace_new(key), trace_free);
    wf__cache_release(e);
}

/* ------------------------------------------------------------ single flight */

struct flight {
    uint64_t fn;
    pthread_barrier_t start;
    atomic_int tracers, waited, hits, wrong;
};

static void *flight_thread(void *arg)
{
    struct flight *f = arg;
    pthread_barrier_wait(&f->start);
    wf_cache_entry *e;
    enum wf_cache_outcome o = acquire(f->fn, 7, &e);
    if (o == WF_CACHE_TRACE) {
        atomic_fetch_add(&f->tracers, 1);
        usleep(50 * 1000); /* hold the window open so the others find it TRACING */
        wf__cache_publish(e, trace_new(7), trace_free);
    } else if (o == WF_CACHE_WAITED) {
        atomic_fetch_add(&f->waited, 1);
    } else if (o == WF_CACHE_HIT) {
        atomic_fetch_add(&f->hits, 1);
    } else {
        atomic_fetch_add(&f->wrong, 1);
        return NULL;
    }
    if (*(int *)wf__cache_trace(e) != 7)
        atomic_fetch_add(&f->wrong, 1);
    wf__cache_release(e);
    return NULL;
}

static void test_single_flight(void)
{
    enum { N = 8 };
    struct flight f = {.fn = next_fn_id()};
    pthread_barrier_init(&f.start, NULL, N);
    wf_cache_counters before, after;
    wf__cache_counters(&before);
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        pthread_create(&t[i], NULL, flight_thread, &f);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&f.start);
    wf__cache_counters(&after);
    CHECK_EQ_INT(atomic_load(&f.tracers), 1);
    CHECK_EQ_INT(atomic_load(&f.waited) + atomic_load(&f.hits), N - 1);
    CHECK(atomic_load(&f.waited) > 0); /* the window was open: someone waited */
    CHECK_EQ_INT(atomic_load(&f.wrong), 0);
    CHECK_EQ_INT(after.traces - before.traces, 1);
    CHECK_EQ_INT(after.waits - before.waits, atomic_load(&f.waited));
    CHECK_EQ_SIZE(wf__cache_erase_function(f.fn), 1);
}

/* ------------------------------------------------------------ bounded wait */

/* main() sets WEFT_COMPILE_WAIT_TIMEOUT=0.75 before anything reads it. */
static void test_wait_timeout_setting(void)
{
    CHECK_NEAR(wf_compile_get_wait_timeout(), 0.75, 1e-9); /* from the environment */
    CHECK_STATUS(wf_compile_set_wait_timeout(-1.0), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_compile_set_wait_timeout");
    CHECK_STATUS(wf_compile_set_wait_timeout(NAN), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_compile_set_wait_timeout(-INFINITY), WF_ERR_INVALID_ARGUMENT);
    CHECK_NEAR(wf_compile_get_wait_timeout(), 0.75, 1e-9); /* bad values change nothing */
    CHECK_OK(wf_compile_set_wait_timeout(0.25));
    CHECK_NEAR(wf_compile_get_wait_timeout(), 0.25, 1e-9);
    CHECK_OK(wf_compile_set_wait_timeout(0));
    CHECK_NEAR(wf_compile_get_wait_timeout(), 0.0, 0.0);
    CHECK_OK(wf_compile_set_wait_timeout(INFINITY));
    CHECK(isinf(wf_compile_get_wait_timeout()));
    CHECK_OK(wf_compile_set_wait_timeout(2e9)); /* past 1e9 s: no bound */
    CHECK(isinf(wf_compile_get_wait_timeout()));
    CHECK_OK(wf_compile_set_wait_timeout(WF_CACHE_DEFAULT_WAIT_SECONDS));
    CHECK_NEAR(wf_compile_get_wait_timeout(), 1.0, 0.0);
}

/* A bound well above the trace's time: still one trace for 8 threads. */
static void test_short_wait_keeps_one_trace(void)
{
    CHECK_OK(wf_compile_set_wait_timeout(0.5)); /* the trace takes 50 ms */
    enum { N = 8 };
    struct flight f = {.fn = next_fn_id()};
    pthread_barrier_init(&f.start, NULL, N);
    wf_cache_counters before, after;
    wf__cache_counters(&before);
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        pthread_create(&t[i], NULL, flight_thread, &f);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&f.start);
    wf__cache_counters(&after);
    CHECK_EQ_INT(atomic_load(&f.tracers), 1);
    CHECK(atomic_load(&f.waited) > 0);
    CHECK_EQ_INT(atomic_load(&f.wrong), 0);
    CHECK_EQ_INT(after.traces - before.traces, 1);
    CHECK_EQ_INT(after.timeout_traces - before.timeout_traces, 0);
    CHECK_EQ_SIZE(wf__cache_erase_function(f.fn), 1);
    CHECK_OK(wf_compile_set_wait_timeout(WF_CACHE_DEFAULT_WAIT_SECONDS));
}

struct late_waiter {
    uint64_t fn;
    int key;
    enum wf_cache_outcome outcome;
    wf_cache_entry *entry;
};

static void *late_waiter_thread(void *arg)
{
    struct late_waiter *w = arg;
    w->outcome = acquire(w->fn, w->key, &w->entry);
    return NULL;
}

/* Acquires (fn, key) on another thread while this one holds its trace. */
static struct late_waiter wait_elsewhere(uint64_t fn, int key)
{
    struct late_waiter w = {.fn = fn, .key = key};
    pthread_t t;
    pthread_create(&t, NULL, late_waiter_thread, &w);
    pthread_join(t, NULL);
    return w;
}

/* The tracer is stuck; the waiter gives up at the bound, traces and stores
 * first. The stuck tracer's later trace serves only its own call; later
 * calls replay the waiter's. */
static void test_timed_out_waiter_traces_and_first_stored_is_kept(void)
{
    CHECK_OK(wf_compile_set_wait_timeout(0.05));
    uint64_t fn = next_fn_id();
    wf_cache_counters before, after;
    wf__cache_counters(&before);
    wf_cache_entry *stuck;
    CHECK_EQ_INT(acquire(fn, 4, &stuck), WF_CACHE_TRACE);
    struct late_waiter w = wait_elsewhere(fn, 4); /* returns after about 50 ms */
    CHECK_EQ_INT(w.outcome, WF_CACHE_TIMED_OUT);
    CHECK(w.entry == stuck); /* the same entry: the first store settles it */
    CHECK(wf__cache_publish(w.entry, trace_new(40), trace_free));
    wf__cache_release(w.entry);
    void *late = trace_new(41);
    CHECK(!wf__cache_publish(stuck, late, trace_free)); /* not stored: still the caller's */
    CHECK_EQ_INT(*(int *)wf__cache_trace(stuck), 40);
    trace_free(late);
    wf__cache_release(stuck);
    wf_cache_entry *e;
    CHECK_EQ_INT(acquire(fn, 4, &e), WF_CACHE_HIT);
    CHECK_EQ_INT(*(int *)wf__cache_trace(e), 40);
    wf__cache_release(e);
    wf__cache_counters(&after);
    CHECK_EQ_INT(after.traces - before.traces, 2);
    CHECK_EQ_INT(after.timeout_traces - before.timeout_traces, 1);
    CHECK_EQ_INT(after.waits - before.waits, 1);
    CHECK_EQ_INT(after.hits - before.hits, 1);
    CHECK_EQ_SIZE(wf__cache_function_entries(fn), 1);
    CHECK_EQ_SIZE(wf__cache_erase_function(fn), 1);
    CHECK_OK(wf_compile_set_wait_timeout(WF_CACHE_DEFAULT_WAIT_SECONDS));
}

/* A timed-out waiter whose trace fails leaves the entry to its tracer; a
 * tracer that fails after a waiter stored leaves the waiter's trace. */
static void test_timeout_failures_settle_nothing_twice(void)
{
    CHECK_OK(wf_compile_set_wait_timeout(0));
    uint64_t fn = next_fn_id();
    wf_cache_entry *tracing;
    CHECK_EQ_INT(acquire(fn, 6, &tracing), WF_CACHE_TRACE);
    struct late_waiter w = wait_elsewhere(fn, 6);
    CHECK_EQ_INT(w.outcome, WF_CACHE_TIMED_OUT);
    wf__cache_release(w.entry); /* its trace failed: only its reference goes */
    CHECK(wf__cache_publish(tracing, trace_new(60), trace_free));
    wf__cache_release(tracing);
    wf_cache_entry *e;
    CHECK_EQ_INT(acquire(fn, 6, &e), WF_CACHE_HIT);
    wf__cache_release(e);

    CHECK_EQ_INT(acquire(fn, 7, &tracing), WF_CACHE_TRACE);
    w = wait_elsewhere(fn, 7);
    CHECK_EQ_INT(w.outcome, WF_CACHE_TIMED_OUT);
    CHECK(wf__cache_publish(w.entry, trace_new(70), trace_free));
    wf__cache_release(w.entry);
    wf__cache_fail(tracing, WF_ERR_KERNEL, "the stuck trace failed late");
    CHECK_EQ_INT(acquire(fn, 7, &e), WF_CACHE_HIT);
    CHECK_EQ_INT(*(int *)wf__cache_trace(e), 70);
    wf__cache_release(e);
    CHECK_EQ_SIZE(wf__cache_erase_function(fn), 2);
    CHECK_OK(wf_compile_set_wait_timeout(WF_CACHE_DEFAULT_WAIT_SECONDS));
}

/* ------------------------------------------------------------ failures */

struct failing {
    uint64_t fn;
    wf_cache_entry *tracing;
    atomic_int waiting;
    wf_status got;
    char message[128];
};

static void *failing_waiter(void *arg)
{
    struct failing *f = arg;
    wf_cache_entry *e;
    atomic_store(&f->waiting, 1);
    enum wf_cache_outcome o = acquire(f->fn, 1, &e);
    f->got = o == WF_CACHE_FAILED ? wf_last_error() : WF_OK;
    snprintf(f->message, sizeof f->message, "%s", wf_last_error_message());
    if (o != WF_CACHE_FAILED)
        wf__cache_release(e);
    return NULL;
}

static void test_failed_trace_reaches_waiters_and_leaves_no_entry(void)
{
    struct failing f = {.fn = next_fn_id()};
    CHECK_EQ_INT(acquire(f.fn, 1, &f.tracing), WF_CACHE_TRACE);
    pthread_t waiter;
    pthread_create(&waiter, NULL, failing_waiter, &f);
    while (!atomic_load(&f.waiting))
        usleep(100);
    usleep(20 * 1000);
    wf__cache_fail(f.tracing, WF_ERR_KERNEL, "the traced function failed: boom");
    pthread_join(waiter, NULL);
    CHECK_EQ_INT(f.got, WF_ERR_KERNEL);
    CHECK_STR_CONTAINS(f.message, "boom");
    CHECK_EQ_SIZE(wf__cache_function_entries(f.fn), 0);
    /* A later call may retry. */
    trace_and_publish(f.fn, 1);
    CHECK_EQ_SIZE(wf__cache_function_entries(f.fn), 1);
    CHECK_EQ_SIZE(wf__cache_erase_function(f.fn), 1);
}

/* ------------------------------------------------------------ erase */

static void test_erase_keeps_calls_in_flight_alive(void)
{
    uint64_t fn = next_fn_id();
    trace_and_publish(fn, 1);
    trace_and_publish(fn, 2);
    wf_cache_entry *held;
    CHECK_EQ_INT(acquire(fn, 1, &held), WF_CACHE_HIT);
    int freed = atomic_load(&traces_freed);
    CHECK_EQ_SIZE(wf__cache_erase_function(fn), 2);
    CHECK_EQ_INT(atomic_load(&traces_freed) - freed, 1); /* key 2 freed, key 1 held */
    CHECK_EQ_INT(*(int *)wf__cache_trace(held), 1);
    wf__cache_release(held);
    CHECK_EQ_INT(atomic_load(&traces_freed) - freed, 2);
    CHECK_EQ_SIZE(wf__cache_function_entries(fn), 0);
    /* Other functions' entries with the same key bytes are untouched. */
    uint64_t other = next_fn_id();
    trace_and_publish(other, 1);
    CHECK_EQ_SIZE(wf__cache_erase_function(fn), 0);
    CHECK_EQ_INT(acquire(other, 1, &held), WF_CACHE_HIT);
    wf__cache_release(held);
    CHECK_EQ_SIZE(wf__cache_erase_function(other), 1);
}

static void test_tracing_entry_erased_then_published(void)
{
    uint64_t fn = next_fn_id();
    wf_cache_entry *e;
    CHECK_EQ_INT(acquire(fn, 3, &e), WF_CACHE_TRACE);
    CHECK_EQ_SIZE(wf__cache_erase_function(fn), 1);
    int freed = atomic_load(&traces_freed);
    wf__cache_publish(e, trace_new(3), trace_free); /* the call still gets its trace */
    CHECK_EQ_INT(*(int *)wf__cache_trace(e), 3);
    wf__cache_release(e);
    CHECK_EQ_INT(atomic_load(&traces_freed) - freed, 1);
}

/* ------------------------------------------------------------ limits */

static void test_lru_limits(void)
{
    wf_cache_counters before, after;
    wf__cache_counters(&before);
    wf__cache_set_limits(2, 0);
    uint64_t fn = next_fn_id();
    trace_and_publish(fn, 1);
    trace_and_publish(fn, 2);
    wf_cache_entry *e;
    CHECK_EQ_INT(acquire(fn, 1, &e), WF_CACHE_HIT); /* 1 is now the most recent */
    wf__cache_release(e);
    trace_and_publish(fn, 3); /* evicts 2 */
    CHECK_EQ_SIZE(wf__cache_function_entries(fn), 2);
    CHECK_EQ_INT(wf__cache_function_evictions(fn), 1);
    CHECK_EQ_INT(acquire(fn, 1, &e), WF_CACHE_HIT);
    wf__cache_release(e);
    CHECK_EQ_INT(acquire(fn, 2, &e), WF_CACHE_TRACE); /* evicts 3 */
    wf__cache_publish(e, trace_new(2), trace_free);
    wf__cache_release(e);
    wf__cache_counters(&after);
    CHECK_EQ_INT(after.evictions - before.evictions, 2);

    /* A total limit across functions. */
    wf__cache_set_limits(0, 3);
    uint64_t g = next_fn_id();
    trace_and_publish(g, 1); /* 3 listed in all: fn's 1 and 2, g's 1 */
    trace_and_publish(g, 2); /* evicts the oldest: fn's 1 */
    CHECK_EQ_SIZE(wf__cache_function_entries(fn), 1);
    CHECK_EQ_SIZE(wf__cache_function_entries(g), 2);
    size_t per_function, total;
    wf__cache_get_limits(&per_function, &total);
    CHECK_EQ_SIZE(per_function, 0);
    CHECK_EQ_SIZE(total, 3);
    wf__cache_set_limits(0, 0);
    wf__cache_erase_function(fn);
    wf__cache_erase_function(g);
}

static void test_tracing_entry_is_never_evicted(void)
{
    wf__cache_set_limits(1, 0);
    uint64_t fn = next_fn_id();
    wf_cache_entry *a, *b;
    CHECK_EQ_INT(acquire(fn, 1, &a), WF_CACHE_TRACE);
    CHECK_EQ_INT(acquire(fn, 2, &b), WF_CACHE_TRACE); /* both tracing: over the limit */
    CHECK_EQ_SIZE(wf__cache_function_entries(fn), 2);
    wf__cache_publish(a, trace_new(1), trace_free); /* now 1 may go */
    CHECK_EQ_SIZE(wf__cache_function_entries(fn), 1);
    wf__cache_publish(b, trace_new(2), trace_free);
    wf__cache_release(a);
    wf__cache_release(b);
    wf_cache_entry *e;
    CHECK_EQ_INT(acquire(fn, 2, &e), WF_CACHE_HIT);
    wf__cache_release(e);
    wf__cache_set_limits(0, 0);
    wf__cache_erase_function(fn);
}

/* ------------------------------------------------------------ misc */

static void test_no_wait_is_misuse(void)
{
    uint64_t fn = next_fn_id();
    wf_cache_entry *tracing, *e;
    CHECK_EQ_INT(acquire(fn, 5, &tracing), WF_CACHE_TRACE);
    int key = 5;
    CHECK_EQ_INT(wf__cache_acquire(fn, &key, sizeof key, false, &e, NULL, NULL), WF_CACHE_FAILED);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_MISUSE);
    CHECK(e == NULL);
    wf__cache_publish(tracing, trace_new(5), trace_free);
    wf__cache_release(tracing);
    CHECK_EQ_INT(wf__cache_acquire(fn, &key, sizeof key, false, &e, NULL, NULL), WF_CACHE_HIT);
    wf__cache_release(e);
    wf__cache_erase_function(fn);
}

static void test_previous_key_for_retrace_reasons(void)
{
    uint64_t fn = next_fn_id();
    int key = 10;
    wf_cache_entry *e;
    void *previous;
    size_t previous_bytes;
    CHECK_EQ_INT(wf__cache_acquire(fn, &key, sizeof key, true, &e, &previous, &previous_bytes),
                 WF_CACHE_TRACE);
    CHECK(previous == NULL);
    wf__cache_publish(e, trace_new(key), trace_free);
    wf__cache_release(e);
    key = 11;
    CHECK_EQ_INT(wf__cache_acquire(fn, &key, sizeof key, true, &e, &previous, &previous_bytes),
                 WF_CACHE_TRACE);
    CHECK_EQ_SIZE(previous_bytes, sizeof key);
    CHECK(previous && *(int *)previous == 10);
    free(previous);
    wf__cache_publish(e, trace_new(key), trace_free);
    wf__cache_release(e);
    wf__cache_erase_function(fn);
}

static void test_many_keys_grow_the_buckets(void)
{
    uint64_t fn = next_fn_id();
    for (int k = 0; k < 3000; k++)
        trace_and_publish(fn, k);
    for (int k = 0; k < 3000; k += 7) {
        wf_cache_entry *e;
        CHECK_EQ_INT(acquire(fn, k, &e), WF_CACHE_HIT);
        CHECK_EQ_INT(*(int *)wf__cache_trace(e), k);
        wf__cache_release(e);
    }
    CHECK_EQ_SIZE(wf__cache_erase_function(fn), 3000);
    wf_cache_counters c;
    wf__cache_counters(&c);
    CHECK_EQ_INT(c.entries, 0);
}

int main(void)
{
    setenv("WEFT_COMPILE_WAIT_TIMEOUT", "0.75", 1); /* read at the first use */
    RUN_TEST(test_wait_timeout_setting);
    RUN_TEST(test_single_flight);
    RUN_TEST(test_short_wait_keeps_one_trace);
    RUN_TEST(test_timed_out_waiter_traces_and_first_stored_is_kept);
    RUN_TEST(test_timeout_failures_settle_nothing_twice);
    RUN_TEST(test_failed_trace_reaches_waiters_and_leaves_no_entry);
    RUN_TEST(test_erase_keeps_calls_in_flight_alive);
    RUN_TEST(test_tracing_entry_erased_then_published);
    RUN_TEST(test_lru_limits);
    RUN_TEST(test_tracing_entry_is_never_evicted);
    RUN_TEST(test_no_wait_is_misuse);
    RUN_TEST(test_previous_key_for_retrace_reasons);
    RUN_TEST(test_many_keys_grow_the_buckets);
    return TEST_SUMMARY();
}
