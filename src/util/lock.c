#include "util/lock.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef WEFT_LOCK_CHECK
static _Thread_local int held_levels[WF_LOCK_MAX_HELD];
static _Thread_local int held_count; /* may exceed WF_LOCK_MAX_HELD after an overflow report */
#endif

static wf_lock_violation_handler violation_handler;

void wf__set_lock_violation_handler(wf_lock_violation_handler handler) { violation_handler = handler; }

int wf__lock_check_enabled(void)
{
#ifdef WEFT_LOCK_CHECK
    return 1;
#else
    return 0;
#endif
}

int wf__locks_held(void)
{
#ifdef WEFT_LOCK_CHECK
    return held_count;
#else
    return 0;
#endif
}

#ifdef WEFT_LOCK_CHECK
static int recorded_count(void) { return held_count < WF_LOCK_MAX_HELD ? held_count : WF_LOCK_MAX_HELD; }

/* The highest level recorded (0 if none). */
static int top_level(void) { return held_count > 0 ? held_levels[recorded_count() - 1] : 0; }

/* Hands the violation to the test's handler, or prints it and aborts. */
static void report(int held, int wanted, const char *message)
{
    if (violation_handler) {
        violation_handler(held, wanted);
        return;
    }
    fprintf(stderr, "weft: %s\n", message);
    abort();
}

static void note_acquire(int level)
{
    char message[128];
    if (held_count > 0 && top_level() >= level) {
        snprintf(message, sizeof message,
                 "lock order violation: taking level %d while holding level %d", level,
                 top_level());
        report(top_level(), level, message);
    }
    if (held_count >= WF_LOCK_MAX_HELD) {
        snprintf(message, sizeof message,
                 "lock checker overflow: taking level %d while holding %d locks", level,
                 held_count);
        report(top_level(), WF_LOCK_REPORT_OVERFLOW, message);
    } else {
        held_levels[held_count] = level;
    }
    held_count++;
}

static void note_release(int level)
{
    /* Locks are normally released in reverse order; tolerate any order. */
    int top = recorded_count();
    for (int i = top - 1; i >= 0; i--) {
        if (held_levels[i] == level) {
            for (int j = i; j + 1 < top; j++)
                held_levels[j] = held_levels[j + 1];
            break;
        }
    }
    held_count--;
}

/* While waiting, only the waited mutex is released: any other lock held
 * stays held for as long as the wait lasts. */
static void note_cond_wait(int level)
{
    if (held_count == 1 && held_levels[0] == level)
        return;
    int other = 0;
    for (int i = recorded_count() - 1; i >= 0 && !other; i--)
        if (held_levels[i] != level)
            other = held_levels[i];
    char message[128];
    snprintf(message, sizeof message,
             "condition wait on a level-%d mutex while holding %d locks (level %d besides it)",
             level, held_count, other);
    report(other, WF_LOCK_REPORT_COND_WAIT, message);
}
#endif

void wf__assert_no_locks_held(const char *what)
{
#ifdef WEFT_LOCK_CHECK
    if (held_count == 0)
        return;
    char message[128];
    snprintf(message, sizeof message, "lock of level %d held while %s runs", top_level(), what);
    report(top_level(), WF_LOCK_REPORT_HELD, message);
#else
    (void)what;
#endif
}

void wf__mutex_init(wf_mutex *m, int level)
{
    pthread_mutex_init(&m->mutex, NULL);
    m->level = level;
}

void wf__mutex_destroy(wf_mutex *m) { pthread_mutex_destroy(&m->mutex); }

void wf__mutex_lock(wf_mutex *m)
{
#ifdef WEFT_LOCK_CHECK
    note_acquire(m->level);
#endif
    pthread_mutex_lock(&m->mutex);
}

void wf__mutex_unlock(wf_mutex *m)
{
    pthread_mutex_unlock(&m->mutex);
#ifdef WEFT_LOCK_CHECK
    note_release(m->level);
#endif
}

void wf__mutex_lock_for_fork(wf_mutex *m) { pthread_mutex_lock(&m->mutex); }

void wf__mutex_unlock_for_fork(wf_mutex *m) { pthread_mutex_unlock(&m->mutex); }

void wf__cond_wait(pthread_cond_t *cond, wf_mutex *m)
{
#ifdef WEFT_LOCK_CHECK
    note_cond_wait(m->level);
#endif
    pthread_cond_wait(cond, &m->mutex);
}

int wf__cond_timedwait(pthread_cond_t *cond, wf_mutex *m, const struct timespec *deadline)
{
#ifdef WEFT_LOCK_CHECK
    note_cond_wait(m->level);
#endif
    return pthread_cond_timedwait(cond, &m->mutex, deadline);
}
