/* The lock-order checker (DESIGN section 4) fires on a deliberate inversion,
 * a lock held where none may be, a condition wait with another lock held, and
 * more locks held than its stack records. Debug builds (ASan and TSan in
 * `make test`) have the checker; the release build checks it is compiled out. */
#include <pthread.h>

#include "harness.h"
#include "util/lock.h"

static int violations;
static int last_held, last_wanted;

static void record_violation(int held, int wanted)
{
    violations++;
    last_held = held;
    last_wanted = wanted;
}

static void test_inversion_fires(void)
{
    if (!wf__lock_check_enabled()) {
        printf("    lock checking is compiled out in this build\n");
        CHECK_EQ_INT(wf__locks_held(), 0);
        return;
    }
    wf__set_lock_violation_handler(record_violation);
    wf_mutex allocator, queue;
    wf__mutex_init(&allocator, WF_LOCK_ALLOCATOR);
    wf__mutex_init(&queue, WF_LOCK_STREAM_QUEUE);

    /* Right order: no report. (Other mutex objects than below, so that
     * ThreadSanitizer's own detector sees no cycle between real mutexes.) */
    wf_mutex low, high;
    wf__mutex_init(&low, WF_LOCK_STREAM_QUEUE);
    wf__mutex_init(&high, WF_LOCK_ALLOCATOR);
    wf__mutex_lock(&low);
    wf__mutex_lock(&high);
    CHECK_EQ_INT(wf__locks_held(), 2);
    wf__mutex_unlock(&high);
    wf__mutex_unlock(&low);
    CHECK_EQ_INT(violations, 0);
    wf__mutex_destroy(&low);
    wf__mutex_destroy(&high);

    /* Inversion: queue (40) while holding allocator (60). */
    wf__mutex_lock(&allocator);
    wf__mutex_lock(&queue);
    wf__mutex_unlock(&queue);
    wf__mutex_unlock(&allocator);
    CHECK_EQ_INT(violations, 1);
    CHECK_EQ_INT(last_held, WF_LOCK_ALLOCATOR);
    CHECK_EQ_INT(last_wanted, WF_LOCK_STREAM_QUEUE);

    /* Equal level (two queues at once) is an inversion too. */
    wf_mutex other_queue;
    wf__mutex_init(&other_queue, WF_LOCK_STREAM_QUEUE);
    wf__mutex_lock(&queue);
    wf__mutex_lock(&other_queue);
    wf__mutex_unlock(&other_queue);
    wf__mutex_unlock(&queue);
    CHECK_EQ_INT(violations, 2);
    CHECK_EQ_INT(wf__locks_held(), 0);

    /* A lock held where a kernel is about to run is reported too. */
    wf__mutex_lock(&queue);
    wf__assert_no_locks_held("a test kernel");
    wf__mutex_unlock(&queue);
    CHECK_EQ_INT(violations, 3);
    CHECK_EQ_INT(last_held, WF_LOCK_STREAM_QUEUE);
    CHECK_EQ_INT(last_wanted, 0);
    wf__assert_no_locks_held("a test kernel");
    CHECK_EQ_INT(violations, 3);

    wf__mutex_destroy(&allocator);
    wf__mutex_destroy(&queue);
    wf__mutex_destroy(&other_queue);
    wf__set_lock_violation_handler(NULL);
}

static pthread_cond_t woken = PTHREAD_COND_INITIALIZER;
static bool wake_flag;

/* Takes the waited mutex (released by the waiter's wait) and wakes it. */
static void *wake_waiter(void *waited)
{
    wf__mutex_lock(waited);
    wake_flag = true;
    pthread_cond_signal(&woken);
    wf__mutex_unlock(waited);
    return NULL;
}

/* Waits on `waited` (which the caller holds) until wake_waiter ran; returns
 * how many waits that took (a spurious wake-up makes it more than one). */
static int wait_for_wake(wf_mutex *waited)
{
    wake_flag = false;
    pthread_t t;
    pthread_create(&t, NULL, wake_waiter, waited);
    int waits = 0;
    while (!wake_flag) {
        waits++;
        wf__cond_wait(&woken, waited);
    }
    wf__mutex_unlock(waited);
    pthread_join(t, NULL);
    return waits;
}

/* DESIGN section 4: no lock is held across a wait. A wait holding only its
 * own mutex is fine; one holding another lock besides is reported, naming
 * the other lock's level. */
static void test_cond_wait_with_another_lock_fires(void)
{
    if (!wf__lock_check_enabled()) {
        printf("    lock checking is compiled out in this build\n");
        return;
    }
    violations = 0;
    wf__set_lock_violation_handler(record_violation);
    wf_mutex queue, node_wait;
    wf__mutex_init(&queue, WF_LOCK_STREAM_QUEUE);
    wf__mutex_init(&node_wait, WF_LOCK_NODE_WAIT);

    wf__mutex_lock(&node_wait);
    wait_for_wake(&node_wait);
    CHECK_EQ_INT(violations, 0);

    wf__mutex_lock(&queue);
    wf__mutex_lock(&node_wait);
    int waits = wait_for_wake(&node_wait);
    wf__mutex_unlock(&queue);
    CHECK(waits >= 1);
    CHECK_EQ_INT(violations, waits);
    CHECK_EQ_INT(last_held, WF_LOCK_STREAM_QUEUE);
    CHECK_EQ_INT(last_wanted, WF_LOCK_REPORT_COND_WAIT);
    CHECK_EQ_INT(wf__locks_held(), 0);

    wf__mutex_destroy(&queue);
    wf__mutex_destroy(&node_wait);
    wf__set_lock_violation_handler(NULL);
}

/* Holding more locks than the checker's stack records is reported instead
 * of writing past the stack, and the count unwinds to zero after. */
static void test_held_stack_overflow_fires(void)
{
    if (!wf__lock_check_enabled()) {
        printf("    lock checking is compiled out in this build\n");
        return;
    }
    violations = 0;
    wf__set_lock_violation_handler(record_violation);
    enum { TAKEN = WF_LOCK_MAX_HELD + 2 };
    wf_mutex locks[TAKEN];
    for (int i = 0; i < TAKEN; i++)
        wf__mutex_init(&locks[i], i + 1); /* increasing levels: no inversion */
    for (int i = 0; i < WF_LOCK_MAX_HELD; i++)
        wf__mutex_lock(&locks[i]);
    CHECK_EQ_INT(violations, 0);
    wf__mutex_lock(&locks[WF_LOCK_MAX_HELD]);
    CHECK_EQ_INT(violations, 1);
    CHECK_EQ_INT(last_held, WF_LOCK_MAX_HELD);
    CHECK_EQ_INT(last_wanted, WF_LOCK_REPORT_OVERFLOW);
    wf__mutex_lock(&locks[WF_LOCK_MAX_HELD + 1]);
    CHECK_EQ_INT(violations, 2);
    CHECK_EQ_INT(wf__locks_held(), TAKEN);
    for (int i = TAKEN - 1; i >= 0; i--)
        wf__mutex_unlock(&locks[i]);
    CHECK_EQ_INT(wf__locks_held(), 0);
    for (int i = 0; i < TAKEN; i++)
        wf__mutex_destroy(&locks[i]);
    wf__set_lock_violation_handler(NULL);
}

static void test_library_work_holds_no_lock_after(void)
{
    wf_array *a = wf_scalar(2, WF_DTYPE_F32);
    wf_array *b = wf_add(a, a);
    CHECK_OK(wf_eval(&b, 1));
    CHECK_EQ_INT(wf__locks_held(), 0);
    wf_release(a);
    wf_release(b);
}

int main(void)
{
    RUN_TEST(test_inversion_fires);
    RUN_TEST(test_cond_wait_with_another_lock_fires);
    RUN_TEST(test_held_stack_overflow_fires);
    RUN_TEST(test_library_work_holds_no_lock_after);
    return TEST_SUMMARY();
}
