/* The intra-op pool: every index runs exactly once, callers work too, a
 * saturated pool (more concurrent kernels than pool threads, kernels that
 * split again) finishes instead of deadlocking, a kernel whose cores are
 * all taken by other callers runs on its own caller, and other threads'
 * evaluations keep their cores. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/pool.h"

struct coverage {
    atomic_int *hits;
    int64_t n;
};

static void mark(void *arg, int64_t begin, int64_t end)
{
    struct coverage *c = arg;
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
}

static int64_t count_wrong(const struct coverage *c)
{
    int64_t wrong = 0;
    for (int64_t i = 0; i < c->n; i++)
        wrong += atomic_load(&c->hits[i]) != 1;
    return wrong;
}

static void test_every_index_once(void)
{
    const int64_t sizes[] = {0, 1, 7, 1000, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        struct coverage c = {calloc((size_t)sizes[s] + 1, sizeof(atomic_int)), sizes[s]};
        wf__parallel_for(c.n, 64, mark, &c);
        CHECK_EQ_INT(count_wrong(&c), 0);
        free(c.hits);
    }
}

/* The chunks of one split, as taken. */
enum { MAX_CHUNKS = 4096 };
struct chunk_log {
    atomic_int count;
    int64_t begin[MAX_CHUNKS], end[MAX_CHUNKS];
};

static void log_chunk(void *arg, int64_t begin, int64_t end)
{
    struct chunk_log *log = arg;
    const int i = atomic_fetch_add(&log->count, 1);
    if (i < MAX_CHUNKS) {
        log->begin[i] = begin;
        log->end[i] = end;
    }
}

static int by_begin(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Guided chunks (pool.c): laid end to end they cover [0, n) once; in
 * order, none is larger than the one before, none smaller than min_chunk
 * but the last, none larger than n / (2 threads), and the last no larger
 * than min_chunk; a range of fewer than 2 min_chunk runs whole on the
 * caller. */
static void test_guided_chunks(void)
{
    static const int64_t cases[][2] = {{43, 2}, {14, 1}, {1000, 1}, {100003, 64}, {5, 3}};
    const int64_t threads = wf__pool_size();
    struct chunk_log *log = malloc(sizeof *log);
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        const int64_t n = cases[t][0], min_chunk = cases[t][1];
        atomic_init(&log->count, 0);
        wf__parallel_for(n, min_chunk, log_chunk, log);
        const int count = atomic_load(&log->count);
        if (!CHECK(count >= 1 && count <= MAX_CHUNKS))
            continue;
        int64_t pairs[MAX_CHUNKS][2];
        for (int i = 0; i < count; i++) {
            pairs[i][0] = log->begin[i];
            pairs[i][1] = log->end[i];
        }
        qsort(pairs, (size_t)count, sizeof pairs[0], by_begin);
        int64_t at = 0, bad = 0;
        for (int i = 0; i < count; i++) {
            const int64_t size = pairs[i][1] - pairs[i][0];
            bad += pairs[i][0] != at;
            bad += i > 0 && size > pairs[i - 1][1] - pairs[i - 1][0];
            bad += i < count - 1 && size < min_chunk;
            bad += count > 1 && size > n / (2 * threads) && size > min_chunk;
            bad += count > 1 && i == count - 1 && size > min_chunk; /* equal chunks fail here */
            at = pairs[i][1];
        }
        CHECK_EQ_INT(at, n);
        if (!CHECK_EQ_INT(bad, 0))
            printf("      n %lld min_chunk %lld: %d chunks\n", (long long)n, (long long)min_chunk,
                   count);
        if (n < 2 * min_chunk || threads == 1)
            CHECK_EQ_INT(count, 1);
    }
    free(log);
}

/* Kernels marking every index of n, up to `rounds` of them, each after
 * `pause_us` of idling, until a pool thread has run a chunk of one: every
 * index must be marked once each time, and a pool thread must have helped. */
static void mark_until_helped(int64_t n, int rounds, unsigned pause_us)
{
    struct coverage c = {calloc((size_t)n, sizeof(atomic_int)), n};
    const uint64_t before = wf__pool_chunks_helped();
    for (int round = 0; round < rounds && wf__pool_chunks_helped() == before; round++) {
        if (pause_us > 0)
            usleep(pause_us);
        for (int64_t i = 0; i < c.n; i++)
            atomic_store_explicit(&c.hits[i], 0, memory_order_relaxed);
        wf__parallel_for(c.n, 1024, mark, &c);
        CHECK_EQ_INT(count_wrong(&c), 0);
    }
    CHECK(wf__pool_chunks_helped() > before);
    free(c.hits);
}

static void test_pool_threads_help(void)
{
    printf("    pool size %d\n", wf__pool_size());
    if (wf__pool_size() < 2) {
        CHECK_EQ_INT(wf__pool_size(), 1); /* WEFT_NUM_THREADS=1 or one core */
        return;
    }
    mark_until_helped(1 << 22, 20, 0);
}

/* A kernel that splits its work again inside each chunk. */
static void nested(void *arg, int64_t begin, int64_t end)
{
    struct coverage *c = arg;
    for (int64_t i = begin; i < end; i++) {
        struct coverage inner = {c->hits + i * 256, 256};
        wf__parallel_for(inner.n, 8, mark, &inner);
    }
}

static void *many_kernels(void *arg)
{
    struct coverage *c = arg;
    for (int round = 0; round < 20; round++)
        wf__parallel_for(c->n / 256, 1, nested, c);
    return NULL;
}

static void test_saturated_pool_finishes(void)
{
    enum { CALLERS = 8, ROWS = 64 };
    struct coverage cs[CALLERS];
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        cs[i] = (struct coverage){calloc(ROWS * 256, sizeof(atomic_int)), ROWS * 256};
        pthread_create(&t[i], NULL, many_kernels, &cs[i]);
    }
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(t[i], NULL);
        int64_t wrong = 0;
        for (int64_t k = 0; k < cs[i].n; k++)
            wrong += atomic_load(&cs[i].hits[k]) != 20;
        CHECK_EQ_INT(wrong, 0);
        free(cs[i].hits);
    }
}

/* Plain (non-atomic) writes of a chunk that outlasts the caller's watch
 * for its helpers (200 us by default): the caller then sleeps until the
 * helper leaves, and must see every write after it returns. */
struct slow_rows {
    int done[2];
};

static void slow_row(void *arg, int64_t begin, int64_t end)
{
    struct slow_rows *r = arg;
    for (int64_t i = begin; i < end; i++) {
        usleep(i == 1 ? 3000 : 1000); /* row 0 leaves a pool thread time to take row 1 */
        r->done[i] = 1;
    }
}

static void test_caller_outwaits_its_watch(void)
{
    const uint64_t before = wf__pool_chunks_helped();
    /* At least 10 rounds; on a loaded machine more, until a pool thread got
     * to run a slow row (the scenario), up to 300 (about 1.2 s). */
    for (int round = 0; round < 300; round++) {
        struct slow_rows r = {{0, 0}};
        wf__parallel_for(2, 1, slow_row, &r);
        CHECK_EQ_INT(r.done[0] + r.done[1], 2);
        if (round >= 9 && (wf__pool_size() < 2 || wf__pool_chunks_helped() > before))
            break;
    }
    if (wf__pool_size() >= 2) /* the scenario happened: a pool thread ran a slow row */
        CHECK(wf__pool_chunks_helped() > before);
}

/* After idling past their watch the pool threads sleep; the next kernel
 * must wake them (they help again), not only find them watching. */
static void test_sleeping_pool_threads_wake(void)
{
    if (wf__pool_size() < 2)
        return;
    mark_until_helped(1 << 20, 40, 5000); /* 5 ms: past the watch, the threads sleep */
}

/* A pool thread that a kernel's caller finds idle on its own core, asleep
 * or watching, must run the kernel's chunks on another core: Linux would
 * otherwise leave it queued there (a woken thread; a watching one until the
 * load balancer moves one of the two, milliseconds later), waiting until the
 * caller has done the whole job alone. The caller is pinned to one core and
 * keeps it busy until a helper has run a chunk; the helper must run
 * elsewhere, with its CPU set as before (the steering is undone before it
 * works). Rounds where no pool thread was steered (none idle on that core
 * at the post) are not this scenario and are not counted. */
struct steered_round {
    pthread_t caller;
    atomic_int helped;
    int helper_cpu;
    int helper_set_restored;
    const cpu_set_t *original;
};

static void note_helper(void *arg, int64_t begin, int64_t end)
{
    struct steered_round *r = arg;
    (void)begin, (void)end;
    if (pthread_equal(pthread_self(), r->caller)) {
        /* Keep the core busy (no sleep, no yield: either would let a helper
         * queued on this core run here) until a helper ran, or for 1-2 s. */
        const time_t give_up = time(NULL) + 2;
        while (!atomic_load(&r->helped) && time(NULL) < give_up)
            ;
        return;
    }
    cpu_set_t now;
    r->helper_cpu = sched_getcpu();
    r->helper_set_restored =
        sched_getaffinity(0, sizeof now, &now) == 0 && CPU_EQUAL(&now, r->original);
    atomic_store(&r->helped, 1);
}

/* Runs `rounds` kernels, each after `pause_us`, with the caller pinned to
 * `cpu` (or, with cpu < 0, to the core the last helper ran on); returns
 * the rounds in which a steered pool thread helped, checking each. */
static int steered_rounds(int cpu, int rounds, unsigned pause_us, const cpu_set_t *original)
{
    int counted = 0, pin = cpu;
    for (int round = 0; round < rounds; round++) {
        cpu_set_t pinned;
        CPU_ZERO(&pinned);
        CPU_SET(pin >= 0 ? pin : sched_getcpu(), &pinned);
        CHECK(sched_setaffinity(0, sizeof pinned, &pinned) == 0);
        const int here = sched_getcpu();
        usleep(pause_us);
        const uint64_t steered = wf__pool_threads_steered();
        struct steered_round r = {.caller = pthread_self(), .helper_cpu = -1, .original = original};
        wf__parallel_for(2, 1, note_helper, &r);
        if (cpu < 0 && r.helper_cpu >= 0)
            pin = r.helper_cpu; /* next round: the core that helper watches on */
        if (!atomic_load(&r.helped) || wf__pool_threads_steered() == steered)
            continue;
        counted++;
        CHECK(r.helper_cpu >= 0 && r.helper_cpu != here);
        CHECK(r.helper_set_restored);
    }
    CHECK(sched_setaffinity(0, sizeof *original, original) == 0);
    return counted;
}

static bool can_steer(cpu_set_t *original)
{
    if (sched_getaffinity(0, sizeof *original, original) != 0 || wf__pool_size() < 2 ||
        CPU_COUNT(original) < 2 || sched_getcpu() < 0) {
        printf("    skipped: one core or one pool thread\n");
        return false;
    }
    return true;
}

static void test_woken_threads_leave_the_callers_core(void)
{
    cpu_set_t original;
    if (!can_steer(&original))
        return;
    /* 5 ms: past the watch, the pool threads sleep. */
    const int n = steered_rounds(sched_getcpu(), 20, 5000, &original);
    printf("    %d of 20 rounds woke a steered pool thread\n", n);
    CHECK(n >= 10);
}

static void test_watching_threads_leave_the_callers_core(void)
{
    cpu_set_t original;
    if (!can_steer(&original) || getenv("WEFT_POOL_SPIN_US"))
        return; /* without the watch every idle thread sleeps: the test above */
    /* 50 us: the helper of the last round is watching on the core the
     * caller is moved to. */
    const int n = steered_rounds(-1, 40, 50, &original);
    printf("    %d of 40 rounds moved a watching pool thread\n", n);
    CHECK(n >= 10);
}

/* While other callers keep every core of the pool busy in kernels of their
 * own, a new kernel runs whole on its caller (one call of its function);
 * once they are gone it is split again. */
struct held_kernel {
    atomic_int entered, release;
};

static void hold_row(void *arg, int64_t begin, int64_t end)
{
    struct held_kernel *h = arg;
    if (begin > 0)
        return;
    atomic_fetch_add(&h->entered, 1);
    while (!atomic_load(&h->release))
        usleep(100);
    (void)end;
}

static void *held_caller(void *arg)
{
    wf__parallel_for(2, 1, hold_row, arg);
    return NULL;
}

struct call_log {
    atomic_int calls;
    atomic_int foreign; /* calls run by a thread other than `caller` */
    int64_t first_begin, first_end;
    pthread_t caller;
};

static void log_call(void *arg, int64_t begin, int64_t end)
{
    struct call_log *log = arg;
    if (atomic_fetch_add(&log->calls, 1) == 0) {
        log->first_begin = begin;
        log->first_end = end;
    }
    if (!pthread_equal(pthread_self(), log->caller))
        atomic_fetch_add(&log->foreign, 1);
}

static void test_busy_callers_run_inline(void)
{
    enum { MAX_HELD = 64 };
    const int size = wf__pool_size();
    if (size < 2 || size - 1 > MAX_HELD)
        return;
    struct held_kernel held = {0, 0};
    pthread_t t[MAX_HELD];
    for (int i = 0; i < size - 1; i++)
        pthread_create(&t[i], NULL, held_caller, &held);
    while (atomic_load(&held.entered) < size - 1)
        usleep(100);

    struct call_log busy = {.caller = pthread_self()};
    wf__parallel_for(1000, 1, log_call, &busy);
    CHECK_EQ_INT(atomic_load(&busy.calls), 1);
    CHECK_EQ_INT(atomic_load(&busy.foreign), 0);
    CHECK_EQ_INT(busy.first_begin, 0);
    CHECK_EQ_INT(busy.first_end, 1000);

    atomic_store(&held.release, 1);
    for (int i = 0; i < size - 1; i++)
        pthread_join(t[i], NULL);
    struct call_log idle = {.caller = pthread_self()};
    wf__parallel_for(1000, 1, log_call, &idle);
    CHECK(atomic_load(&idle.calls) > 1);
}

/* A thread inside an evaluation (between kernels or in one) until
 * released; a test holds at most MAX_HELD of them. */
enum { MAX_HELD = 64 };
struct held_evaluation {
    atomic_int entered, release;
};

static void *held_evaluator(void *arg)
{
    struct held_evaluation *h = arg;
    wf__pool_evaluation_begin();
    atomic_fetch_add(&h->entered, 1);
    while (!atomic_load(&h->release))
        usleep(100);
    wf__pool_evaluation_end();
    return NULL;
}

/* Distinct threads other than the caller that ran chunks of one split. */
struct helper_log {
    pthread_mutex_t lock;
    pthread_t seen[64];
    int count;
    pthread_t caller;
    atomic_int calls;
};

static void log_helper(void *arg, int64_t begin, int64_t end)
{
    struct helper_log *log = arg;
    atomic_fetch_add(&log->calls, 1);
    usleep(50); /* chunks long enough for every pool thread to try to join */
    if (pthread_equal(pthread_self(), log->caller))
        return;
    pthread_mutex_lock(&log->lock);
    bool known = false;
    for (int i = 0; i < log->count; i++)
        known = known || pthread_equal(log->seen[i], pthread_self());
    if (!known && log->count < 64)
        log->seen[log->count++] = pthread_self();
    pthread_mutex_unlock(&log->lock);
    (void)begin, (void)end;
}

/* With `evaluators` (<= MAX_HELD) threads inside evaluations of their
 * own: a split's chunk calls and the distinct pool threads that ran some
 * of them. */
static void split_beside_evaluators(int evaluators, int *calls, int *helpers)
{
    struct held_evaluation held = {0, 0};
    pthread_t t[MAX_HELD];
    for (int i = 0; i < evaluators; i++)
        pthread_create(&t[i], NULL, held_evaluator, &held);
    while (atomic_load(&held.entered) < evaluators)
        usleep(100);
    struct helper_log log = {.lock = PTHREAD_MUTEX_INITIALIZER, .caller = pthread_self()};
    wf__parallel_for(400, 1, log_helper, &log);
    atomic_store(&held.release, 1);
    for (int i = 0; i < evaluators; i++)
        pthread_join(t[i], NULL);
    *calls = atomic_load(&log.calls);
    *helpers = log.count;
    printf("    %d evaluator(s): %d chunk call(s), %d helper(s)\n", evaluators, *calls, *helpers);
}

/* Threads running evaluations of their own (not splitting at the time)
 * keep their cores: with size - 1 of them a kernel runs whole on its
 * caller; with fewer, no more pool threads help it than the cores they
 * leave (size - 1 - evaluators); once they are done the split is whole. */
static void test_busy_evaluators_keep_their_cores(void)
{
    const int size = wf__pool_size();
    if (size < 2 || size - 1 > MAX_HELD)
        return;
    int calls, helpers;
    split_beside_evaluators(size - 1, &calls, &helpers);
    CHECK_EQ_INT(calls, 1);
    CHECK_EQ_INT(helpers, 0);
    if (size > 2) {
        split_beside_evaluators(1, &calls, &helpers);
        CHECK(helpers <= size - 2);
    }
    struct call_log idle = {.caller = pthread_self()};
    wf__parallel_for(1000, 1, log_call, &idle);
    CHECK(atomic_load(&idle.calls) > 1);
}

/* The same tests in a fresh process whose pool threads sleep at once
 * (WEFT_POOL_SPIN_US=0): every wake-up goes through the condition variables. */
static void test_again_without_the_watch(void)
{
    pid_t child = fork();
    if (child == 0) {
        setenv("WEFT_POOL_SPIN_US", "0", 1);
        execl("/proc/self/exe", "test_pool", (char *)NULL);
        _exit(127);
    }
    CHECK(child > 0);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

int main(void)
{
    RUN_TEST(test_every_index_once);
    RUN_TEST(test_guided_chunks);
    RUN_TEST(test_pool_threads_help);
    RUN_TEST(test_saturated_pool_finishes);
    RUN_TEST(test_caller_outwaits_its_watch);
    RUN_TEST(test_sleeping_pool_threads_wake);
    RUN_TEST(test_woken_threads_leave_the_callers_core);
    RUN_TEST(test_watching_threads_leave_the_callers_core);
    RUN_TEST(test_busy_callers_run_inline);
    RUN_TEST(test_busy_evaluators_keep_their_cores);
    if (getenv("WEFT_POOL_SPIN_US") == NULL)
        RUN_TEST(test_again_without_the_watch);
    return TEST_SUMMARY();
}
