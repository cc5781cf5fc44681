/* fork() (issue 8): a child forked after heavy use, or in the middle of
 * concurrent evaluation, can use weft; the parent goes on unharmed. The
 * children end with _exit (fork_child_exit explains why); the parent's leak
 * checks run as usual. */
#include <stdlib.h>

#include "fork_scenario.h"
#include "harness.h"
#include "settle.h"

/* ------------------------------------------------------------ the registry's order */

enum { ORDER_CALLS = 12 };
static int order_calls[ORDER_CALLS];
static int order_count;

static void note_call(int code)
{
    if (order_count < ORDER_CALLS)
        order_calls[order_count++] = code;
}

/* Codes: level * 10 + 1 prepare, + 2 parent, + 3 child. */
static void low_prepare(void) { note_call(51); }
static void low_parent(void) { note_call(52); }
static void low_child(void) { note_call(53); }
static void high_prepare(void) { note_call(651); }
static void high_parent(void) { note_call(652); }
static void high_child(void) { note_call(653); }

static const wf_fork_hooks low_hooks = {5, low_prepare, low_parent, low_child};
static const wf_fork_hooks high_hooks = {65, high_prepare, high_parent, high_child};

/* Registered in the order that is wrong for the locks: the registry sorts. */
static void register_test_hooks(void) __attribute__((constructor));
static void register_test_hooks(void)
{
    wf__fork_hooks_register(&high_hooks);
    wf__fork_hooks_register(&low_hooks);
}

/* Runs `fn` in a child; returns its exit status (FORK_FAIL if it hung). */
static int run_in_child(int (*fn)(void *), void *arg)
{
    fork_note_parent_pool();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        fork_child_exit(fn(arg));
    if (pid < 0)
        return FORK_FAIL;
    return fork_wait_child(pid);
}

static int child_reports_order(void *arg)
{
    (void)arg;
    /* prepare ascending, then the child hooks descending. */
    const int want[] = {51, 651, 653, 53};
    if (order_count != 4)
        return 1;
    for (int i = 0; i < 4; i++)
        if (order_calls[i] != want[i])
            return 1;
    return 0;
}

static void test_hooks_run_in_level_order(void)
{
    order_count = 0;
    CHECK_EQ_INT(run_in_child(child_reports_order, NULL), 0);
    /* The parent saw prepare ascending, then parent hooks descending. */
    CHECK_EQ_INT(order_count, 4);
    CHECK_EQ_INT(order_calls[0], 51);
    CHECK_EQ_INT(order_calls[1], 651);
    CHECK_EQ_INT(order_calls[2], 652);
    CHECK_EQ_INT(order_calls[3], 52);
    CHECK_EQ_INT(wf__fork_children(), 0); /* child hooks ran only in the child */
}

/* ------------------------------------------------------------ the lock checker in a child */

static int checker_reports;

static void count_report(int held, int wanted)
{
    (void)held;
    (void)wanted;
    checker_reports++;
}

static void *hold_a_checked_lock(void *arg)
{
    wf_mutex *m = arg;
    wf__mutex_lock(m); /* recorded in this thread's checker state only */
    while (!atomic_load(&fork_gate_open))
        fork_sleep_us(200);
    wf__mutex_unlock(m);
    return NULL;
}

/* The child's thread starts with the checker's record it had in the parent
 * (none); the record of a thread holding a lock at the fork is gone with
 * it; and the checker still fires on an inversion. */
static int child_checks_the_checker(void *arg)
{
    (void)arg;
    fork_child_begin();
    if (wf__locks_held() != 0)
        return 1;
    wf_mutex low, high;
    wf__mutex_init(&low, WF_LOCK_STREAM_QUEUE);
    wf__mutex_init(&high, WF_LOCK_ALLOCATOR);
    wf__set_lock_violation_handler(count_report);
    wf__mutex_lock(&low); /* right order: no report */
    wf__mutex_lock(&high);
    bool held_two = wf__locks_held() == (wf__lock_check_enabled() ? 2 : 0);
    wf__mutex_unlock(&high);
    wf__mutex_unlock(&low);
    int after_right_order = checker_reports;
    wf__mutex_lock(&high); /* inversion: one report where the checker is on */
    wf__mutex_lock(&low);
    wf__mutex_unlock(&low);
    wf__mutex_unlock(&high);
    int want = wf__lock_check_enabled() ? 1 : 0;
    return held_two && after_right_order == 0 && checker_reports == want &&
                   wf__locks_held() == 0
               ? 0
               : 1;
}

static void test_lock_checker_in_child(void)
{
    wf_mutex busy;
    wf__mutex_init(&busy, WF_LOCK_LEAF);
    atomic_store(&fork_gate_open, 0);
    pthread_t holder;
    pthread_create(&holder, NULL, hold_a_checked_lock, &busy);
    fork_sleep_us(20000); /* the holder has most likely taken it; either way is fine */
    CHECK_EQ_INT(run_in_child(child_checks_the_checker, NULL), 0);
    atomic_store(&fork_gate_open, 1);
    pthread_join(holder, NULL);
    wf__mutex_destroy(&busy);
    CHECK_EQ_INT(wf__locks_held(), 0);
}

/* ------------------------------------------------------------ fork when idle */

/* Heavy use on several threads and streams, then everything settles. */
static void *heavy_use_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    wf_stream *s = wf_stream_new();
    wf_stream_push(s);
    wf_scope_begin();
    int64_t n = FORK_BIG;
    for (int i = 0; i < 3; i++) {
        wf_array *total = wf_sum(wf_full(&n, 1, id + 1, WF_DTYPE_F32), NULL, 0, false);
        if (!fork_item_is(total, (double)FORK_BIG * (id + 1)))
            fork_fail("heavy use: a reduction");
        wf_array *x = fork_filled((float)id);
        if (wf_async_eval(&x, 1) != WF_OK)
            fork_fail("heavy use: async");
    }
    wf_stream_synchronize(s);
    wf_scope_end();
    wf_stream_pop();
    wf_stream_release(s);
    return NULL;
}

/* In a child (or grandchild): fresh work everywhere, exact. */
static int child_uses_everything(void *arg)
{
    int generation = (int)(intptr_t)arg;
    fork_child_begin();
    if (wf__fork_children() != generation)
        fork_fail("the child hooks did not run once per fork");
    fork_child_streams();
    fork_child_pool();
    wf_fn *body = wf_fn_new(fork_gated_body, NULL, NULL);
    wf_fn *compiled = wf_compile(body, NULL);
    wf_fn_release(body);
    wf_array *x = fork_filled(3), *y = NULL;
    size_t nout = 1;
    if (wf_fn_call(compiled, &x, 1, &y, &nout) != WF_OK || !fork_all_equal(y, 10))
        fork_fail("child: compile");
    wf_release(y);
    wf_release(x);
    wf_fn_release(compiled);
    if (wf__locks_held() != 0)
        fork_fail("child: a lock left held");
    /* The child can fork again: the hooks leave it ready for that too. */
    if (generation == 1 &&
        run_in_child(child_uses_everything, (void *)(intptr_t)(generation + 1)) != 0)
        fork_fail("the grandchild failed");
    return atomic_load(&fork_failures) ? FORK_FAIL : FORK_PASS;
}

static void test_fork_after_heavy_use(void)
{
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, heavy_use_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    CHECK_EQ_INT(atomic_load(&fork_failures), 0);
    CHECK_EQ_INT(run_in_child(child_uses_everything, (void *)(intptr_t)1), 0);
    /* The parent is untouched. */
    wf_scope_begin();
    CHECK(fork_all_equal(wf_add(fork_filled(1), fork_filled(2)), 3));
    wf_scope_end();
}

/* ------------------------------------------------------------ fork mid-evaluation */

static void test_fork_mid_evaluation(void)
{
    int64_t before = live_arrays();
    CHECK_EQ_INT(fork_round(), FORK_PASS);
    CHECK_EQ_INT(atomic_load(&fork_failures), 0);
    /* Everything the parent's threads held was released (the parent leaks nothing). */
    CHECK_EQ_INT(live_arrays(), before);
}

/* ------------------------------------------------------------ the parent under repeated forks */

static atomic_int keep_going;
static atomic_int evaluations;

static void *steady_thread(void *arg)
{
    (void)arg;
    for (int i = 0; atomic_load(&keep_going); i++) {
        wf_scope_begin();
        wf_array *a = wf_multiply(fork_filled((float)(i % 7)), wf_scalar(2, WF_DTYPE_F32));
        if (!fork_all_equal(a, (float)(i % 7) * 2))
            fork_fail("parent: an evaluation during repeated forks");
        wf_scope_end();
        atomic_fetch_add(&evaluations, 1);
    }
    return NULL;
}

static int child_quick_eval(void *arg)
{
    (void)arg;
    fork_child_begin();
    wf_scope_begin();
    bool ok = fork_all_equal(wf_add(fork_filled(20), wf_scalar(1, WF_DTYPE_F32)), 21);
    wf_scope_end();
    return ok && wf__locks_held() == 0 ? 0 : 1;
}

static void test_parent_unharmed_by_repeated_forks(void)
{
    int64_t before = live_arrays();
    atomic_store(&keep_going, 1);
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&threads[i], NULL, steady_thread, NULL);
    fork_wait_until(&evaluations, 3);
    for (int round = 0; round < 6; round++)
        CHECK_EQ_INT(run_in_child(child_quick_eval, NULL), 0);
    atomic_store(&keep_going, 0);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
    CHECK_EQ_INT(atomic_load(&fork_failures), 0);
    CHECK_EQ_INT(live_arrays(), before);
}

int main(void)
{
    RUN_TEST(test_hooks_run_in_level_order);
    RUN_TEST(test_lock_checker_in_child);
    RUN_TEST(test_fork_after_heavy_use);
    RUN_TEST(test_fork_mid_evaluation);
    RUN_TEST(test_parent_unharmed_by_repeated_forks);
    return TEST_SUMMARY();
}
