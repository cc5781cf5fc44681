/*
 * The node pool and node identity (issue 7, items 1, 6 and 8, node ids and
 * flags): memory stays bounded whichever threads build and free, a stale
 * handle is checked without a data race while its node is reused, the
 * use-after-release window is the documented WF_NODE_QUARANTINE releases,
 * ids are unique and never reused, and placeholder nodes are never evaluated.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/array.h"
#include "core/node_pool.h"
#include "harness.h"
#include "settle.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static size_t node_pool_bytes(void)
{
    wf_memory_stats stats = wf_memory_stats_default();
    return wf_memory_stats_get(&stats) == WF_OK ? stats.node_pool_bytes : 0;
}

/* ------------------------------------------------- item 1: bounded memory */

/* Two threads take turns: the builder runs `y = exp(x); z = exp(y);
 * release y; async_eval z; synchronize` (the stream worker frees y) and
 * hands z to the other thread (in batches of BATCH, to spare wake-ups),
 * which checks a value now and then and releases them. Roles swap every
 * SWAP_EVERY iterations. */
/* The baseline is taken halfway, once the pool has warmed up: with the
 * calling thread, the releasing thread and the stream worker each freeing
 * through their own shard, the pool grows in chunk steps while each shard's
 * release queue and ready list fill, then stays flat to the millionth
 * (measured on an idle machine: 1.84 MB at 5,000, 2.05 MB from 40,000 to
 * 1,000,000). On a loaded one the warm-up takes longer: beside other tests
 * (ctest -j2 on 2 cores) the pool was still 2 chunks short at 50,000. */
#if defined(__SANITIZE_THREAD__)
enum { CHURN_ITERATIONS = 100000 }; /* TSan runs this about 10x slower */
#elif defined(SANITIZED)
/* ASan runs 100,000 in 1.3 s, but at 50,000 the pool was once still 2 chunks
 * short of its plateau (a CI run: 1,945,904 bytes, then 2,048,320 flat) */
enum { CHURN_ITERATIONS = 400000 };
#else
enum { CHURN_ITERATIONS = 1000000 };
#endif
enum { SWAP_EVERY = 5000, BASELINE_AFTER = CHURN_ITERATIONS / 2, BATCH = 50 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    wf_array *batch[BATCH]; /* handed over when full; count 0 means taken */
    int count;
    pthread_barrier_t round_end;
    wf_array *x;
    size_t baseline_bytes;
    atomic_long built, released, failures, wrong_values;
} churn = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

/* Waits until the previous batch was taken, then hands over this one. */
static void batch_hand_over(wf_array *const *batch)
{
    pthread_mutex_lock(&churn.lock);
    while (churn.count)
        pthread_cond_wait(&churn.changed, &churn.lock);
    memcpy(churn.batch, batch, sizeof churn.batch);
    churn.count = BATCH;
    pthread_cond_broadcast(&churn.changed);
    pthread_mutex_unlock(&churn.lock);
}

static void batch_take(wf_array **batch)
{
    pthread_mutex_lock(&churn.lock);
    while (!churn.count)
        pthread_cond_wait(&churn.changed, &churn.lock);
    memcpy(batch, churn.batch, sizeof churn.batch);
    churn.count = 0;
    pthread_cond_broadcast(&churn.changed);
    pthread_mutex_unlock(&churn.lock);
}

static void build_round(wf_stream *stream)
{
    wf_array *batch[BATCH];
    for (int i = 0; i < SWAP_EVERY; i++) {
        wf_array *y = wf_exp(churn.x);
        wf_array *z = wf_exp(y);
        wf_release(y);
        if (!z || wf_async_eval(&z, 1) != WF_OK || wf_stream_synchronize(stream) != WF_OK)
            atomic_fetch_add(&churn.failures, 1);
        atomic_fetch_add(&churn.built, 1);
        batch[i % BATCH] = z;
        if (i % BATCH == BATCH - 1)
            batch_hand_over(batch);
    }
}

static void release_round(void)
{
    wf_array *batch[BATCH];
    for (int b = 0; b < SWAP_EVERY / BATCH; b++) {
        batch_take(batch);
        double v = 0;
        if (wf_array_item(batch[b % BATCH], &v) != WF_OK || fabs(v - exp(1.0)) > 1e-6)
            atomic_fetch_add(&churn.wrong_values, 1);
        for (int i = 0; i < BATCH; i++)
            wf_release(batch[i]);
        atomic_fetch_add(&churn.released, BATCH);
    }
}

static void *churn_thread(void *arg)
{
    int me = (int)(intptr_t)arg;
    wf_stream *stream = wf_default_stream();
    for (int round = 0; round < CHURN_ITERATIONS / SWAP_EVERY; round++) {
        if (round % 2 == me)
            build_round(stream);
        else
            release_round();
        pthread_barrier_wait(&churn.round_end);
        if ((round + 1) * SWAP_EVERY == BASELINE_AFTER && me == 0)
            churn.baseline_bytes = node_pool_bytes();
        pthread_barrier_wait(&churn.round_end);
    }
    wf_stream_release(stream);
    return NULL;
}

/* Issue 7 item 1: node memory stays within its value after the first half
 * of the iterations (the warm-up above) plus one chunk, to the last. The
 * pool's size is the most nodes ever in flight at once, which a sanitizer
 * build's slower stream worker lets wander further on a loaded machine
 * (TSan in CI: two chunks once): three chunks there. A leak of one node
 * per iteration would add hundreds of chunks. */
#ifdef WF_TEST_SLOW_BUILD
enum { CHURN_SLACK_CHUNKS = 3 };
#else
enum { CHURN_SLACK_CHUNKS = 1 };
#endif
static void test_async_churn_keeps_node_memory_bounded(void)
{
    int64_t live = live_arrays();
    churn.x = wf_scalar(0, WF_DTYPE_F32);
    pthread_barrier_init(&churn.round_end, NULL, 2);
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        pthread_create(&threads[t], NULL, churn_thread, (void *)(intptr_t)t);
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&churn.round_end);
    wf_release(churn.x);
    size_t end_bytes = node_pool_bytes();
    printf("    node pool: %zu bytes after %d iterations, %zu after %d (chunk %zu)\n",
           churn.baseline_bytes, BASELINE_AFTER, end_bytes, CHURN_ITERATIONS,
           wf__node_pool_chunk_bytes());
    CHECK_EQ_INT(atomic_load(&churn.built), CHURN_ITERATIONS);
    CHECK_EQ_INT(atomic_load(&churn.released), CHURN_ITERATIONS);
    CHECK_EQ_INT(atomic_load(&churn.failures), 0);
    CHECK_EQ_INT(atomic_load(&churn.wrong_values), 0);
    CHECK(churn.baseline_bytes > 0);
    CHECK(end_bytes <= churn.baseline_bytes + CHURN_SLACK_CHUNKS * wf__node_pool_chunk_bytes());
    CHECK_EQ_INT(live_arrays(), live);
}

/* ------------------------------------------------- item 8: quarantine */

static bool reports_released(wf_array *stale)
{
    bool caught = wf__array_check(stale, "test", "the array") == NULL &&
                  wf_last_error() == WF_ERR_MISUSE;
    wf_clear_error();
    return caught;
}

struct quarantine_result {
    bool caught_after_allocations, caught_after_releases, never_handed_out, reused_later;
    uint64_t old_id, new_id;
};

/* On a fresh thread (its shard has a short free list), release one node,
 * then allocate WF_NODE_QUARANTINE - 1 nodes, release them, and allocate as
 * many again: the stale handle stays caught throughout. One more release
 * ends its quarantine, and the pool hands it out again soon after. */
static void *quarantine_scenario(void *arg)
{
    struct quarantine_result *r = arg;
    enum { N = WF_NODE_QUARANTINE - 1 };
    wf_array **held = malloc(sizeof *held * 2 * N);
    wf_array *stale = wf_scalar(1, WF_DTYPE_F32);
    r->old_id = wf_array_id(stale);
    wf_release(stale);
    r->never_handed_out = true;
    for (int i = 0; i < N; i++)
        r->never_handed_out &= (held[i] = wf_scalar(i, WF_DTYPE_F32)) != stale;
    r->caught_after_allocations = reports_released(stale);
    for (int i = 0; i < N; i++)
        wf_release(held[i]);
    for (int i = 0; i < N; i++)
        r->never_handed_out &= (held[i] = wf_scalar(i, WF_DTYPE_F32)) != stale;
    r->caught_after_releases = reports_released(stale);
    wf_release(held[0]); /* the WF_NODE_QUARANTINE-th release after stale's */
    held[0] = NULL;
    int count = N;
    while (count < 2 * N && !r->reused_later) {
        wf_array *fresh = held[count++] = wf_scalar(2, WF_DTYPE_F32);
        if (fresh == stale) {
            r->reused_later = true;
            r->new_id = wf_array_id(fresh);
        }
    }
    for (int i = 0; i < count; i++)
        wf_release(held[i]);
    free(held);
    return NULL;
}

/* Issue 7 item 8: a released node is not handed out again before
 * WF_NODE_QUARANTINE (1,024) later releases, even when the free list was short. */
static void test_quarantine_holds_for_documented_count(void)
{
    CHECK_EQ_INT(WF_NODE_QUARANTINE, 1024);
    int64_t live = live_arrays();
    struct quarantine_result r = {0};
    pthread_t t;
    pthread_create(&t, NULL, quarantine_scenario, &r);
    pthread_join(t, NULL);
    CHECK(r.never_handed_out);
    CHECK(r.caught_after_allocations);
    CHECK(r.caught_after_releases);
    CHECK(r.reused_later); /* memory is recycled, not only ever fresh */
    CHECK(r.old_id != 0 && r.new_id != 0 && r.new_id != r.old_id); /* same node, new id */
    CHECK_EQ_INT(live_arrays(), live);
}

/* ------------------------------------------------- item 6: stale handles */

static struct {
    atomic_bool done;
    _Atomic(wf_array *) stale;
    atomic_long reuses, checks, seen_live, seen_released, bad_ndim;
} race;

/* Releases and reallocates nodes of rank 1 and 2 (holding HOLD at a
 * time) until the stale node was handed out again several times. */
static void *reallocate_nodes(void *arg)
{
    (void)arg;
    enum { HOLD = 512, MAX_ITERATIONS = 200000, WANTED_REUSES = 8 };
    int64_t shape[2] = {2, 3};
    wf_array *stale = wf_scalar(1, WF_DTYPE_F32);
    wf_release(stale);
    atomic_store(&race.stale, stale);
    while (atomic_load(&race.checks) == 0) /* the checker is running */
        sched_yield();
    wf_array *held[HOLD] = {0};
    for (int i = 0; i < MAX_ITERATIONS && atomic_load(&race.reuses) < WANTED_REUSES; i++) {
        wf_release(held[i % HOLD]);
        held[i % HOLD] = wf_zeros(shape, 1 + i % 2, WF_DTYPE_F32);
        if (held[i % HOLD] == stale) { /* let the checker see it live (1 s at most) */
            atomic_fetch_add(&race.reuses, 1);
            long seen = atomic_load(&race.seen_live);
            for (int spin = 0; spin < 1000 && atomic_load(&race.seen_live) == seen; spin++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
    }
    for (int i = 0; i < HOLD; i++)
        wf_release(held[i]);
    atomic_store(&race.done, true);
    return NULL;
}

static void *check_stale_handle(void *arg)
{
    (void)arg;
    wf_array *stale;
    while (!(stale = atomic_load(&race.stale)))
        ;
    while (!atomic_load(&race.done)) {
        if (wf__array_check(stale, "test", "the array"))
            atomic_fetch_add(&race.seen_live, 1);
        else
            atomic_fetch_add(&race.seen_released, 1);
        wf_clear_error();
        int ndim = wf_array_ndim(stale);
        if (ndim != 0 && ndim != 1 && ndim != 2)
            atomic_fetch_add(&race.bad_ndim, 1);
        atomic_fetch_add(&race.checks, 1);
    }
    return NULL;
}

/* Issue 7 item 6: under TSan this fails if the check races with the node's
 * reinitialisation. The stale handle must have been reused for the
 * scenario to count. */
static void test_stale_handle_check_races_nothing(void)
{
    int64_t live = live_arrays();
    pthread_t releaser, checker;
    pthread_create(&checker, NULL, check_stale_handle, NULL);
    pthread_create(&releaser, NULL, reallocate_nodes, NULL);
    pthread_join(releaser, NULL);
    pthread_join(checker, NULL);
    printf("    %ld reuses of the stale node, %ld checks (%ld live, %ld released)\n",
           atomic_load(&race.reuses), atomic_load(&race.checks), atomic_load(&race.seen_live),
           atomic_load(&race.seen_released));
    CHECK(atomic_load(&race.reuses) >= 1);
    CHECK(atomic_load(&race.seen_live) >= 1);
    CHECK(atomic_load(&race.seen_released) >= 1);
    CHECK_EQ_INT(atomic_load(&race.bad_ndim), 0);
    CHECK_EQ_INT(live_arrays(), live);
}

/* ------------------------------------------------- ids and flags */

enum { ID_THREADS = 4, IDS_PER_THREAD = 20000 };
static uint64_t ids[ID_THREADS][IDS_PER_THREAD];

static void *collect_ids(void *arg)
{
    uint64_t *mine = arg;
    for (int i = 0; i < IDS_PER_THREAD; i++) {
        wf_array *a = wf_scalar(i, WF_DTYPE_I32);
        mine[i] = wf_array_id(a);
        if (mine[i] != wf__array_id(a))
            mine[i] = 0;
        wf_release(a);
    }
    return NULL;
}

static int compare_ids(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ids are unique across threads although node memory is reused. */
static void test_ids_unique_across_threads(void)
{
    pthread_t threads[ID_THREADS];
    for (int t = 0; t < ID_THREADS; t++)
        pthread_create(&threads[t], NULL, collect_ids, ids[t]);
    for (int t = 0; t < ID_THREADS; t++)
        pthread_join(threads[t], NULL);
    uint64_t *all = &ids[0][0];
    size_t n = (size_t)ID_THREADS * IDS_PER_THREAD;
    qsort(all, n, sizeof *all, compare_ids);
    size_t zero = 0, duplicates = 0;
    for (size_t i = 0; i < n; i++) {
        zero += all[i] == 0;
        duplicates += i > 0 && all[i] == all[i - 1];
    }
    CHECK_EQ_SIZE(zero, 0);
    CHECK_EQ_SIZE(duplicates, 0);
    CHECK_EQ_INT(wf_array_id(NULL), 0);
    wf_array *a = wf_scalar(1, WF_DTYPE_F32);
    CHECK(wf_array_id(a) != 0);
    wf_release(a);
    CHECK_EQ_INT(wf_array_id(a), 0); /* released */
}

/* A placeholder, and anything built from it, is refused by every way of
 * evaluating, with WF_ERR_MISUSE naming the problem; the library stays usable. */
static void test_placeholder_is_never_evaluated(void)
{
    int64_t live = live_arrays();
    int64_t shape[2] = {2, 3};
    wf_array *p = wf__array_new_placeholder(WF_DTYPE_F32, shape, 2, false);
    wf_array *p0 = wf__array_new_placeholder(WF_DTYPE_F64, NULL, 0, false);
    if (!CHECK_NOT_NULL(p))
        return;
    CHECK(wf__array_is_placeholder(p));
    CHECK_EQ_INT(wf_array_ndim(p), 2);
    CHECK_EQ_INT(wf_array_dim(p, 1), 3);
    CHECK(!wf_array_is_evaluated(p));
    wf_array *real = wf_ones(shape, 2, WF_DTYPE_F32);
    wf_array *exp_p = wf_exp(p);
    wf_array *derived = wf_add(exp_p, real);
    if (!CHECK_NOT_NULL(derived))
        return;
    wf_release(exp_p); /* dropping a derived node is fine */
    CHECK(wf__array_is_placeholder(derived));
    CHECK(!wf__array_is_placeholder(real));

    CHECK_STATUS(wf_eval(&p, 1), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "placeholder");
    CHECK_STATUS(wf_eval(&derived, 1), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_eval");
    wf_array *both[2] = {real, derived};
    CHECK_STATUS(wf_eval(both, 2), WF_ERR_MISUSE);
    CHECK(!wf_array_is_evaluated(real)); /* refused before anything was scheduled */
    CHECK_STATUS(wf_async_eval(&derived, 1), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "placeholder");
    const void *data;
    CHECK_STATUS(wf_array_data(derived, &data), WF_ERR_MISUSE);
    double v;
    CHECK_STATUS(wf_array_item(p0, &v), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "placeholder");
    wf_clear_error();

    CHECK_OK(wf_eval(&real, 1)); /* still usable */
    CHECK_OK(wf_array_data(real, &data));
    CHECK_NEAR(((const float *)data)[5], 1, 0);
    wf_release(derived);
    wf_release(real);
    wf_release(p);
    wf_release(p0);
    CHECK_EQ_INT(live_arrays(), live);

    CHECK_NULL_WITH(wf__array_new_placeholder(WF_DTYPE_COUNT, shape, 2, false), WF_ERR_DTYPE);
    int64_t negative[1] = {-1};
    CHECK_NULL_WITH(wf__array_new_placeholder(WF_DTYPE_F32, negative, 1, false),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf__array_new_placeholder(WF_DTYPE_F32, NULL, 1, false), WF_ERR_NULL_ARGUMENT);
}

int main(void)
{
    RUN_TEST(test_quarantine_holds_for_documented_count);
    RUN_TEST(test_stale_handle_check_races_nothing);
    RUN_TEST(test_ids_unique_across_threads);
    RUN_TEST(test_placeholder_is_never_evaluated);
    RUN_TEST(test_async_churn_keeps_node_memory_bounded);
    return TEST_SUMMARY();
}
