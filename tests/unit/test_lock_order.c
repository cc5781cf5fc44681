/* The lock-order checker (DESIGN section 4) fires on a deliberate inversion.
 * Debug builds (ASan and TSan in `make test`) have the checker; the release
 * build checks that it is compiled out. */
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
    RUN_TEST(test_library_work_holds_no_lock_after);
    return TEST_SUMMARY();
}
