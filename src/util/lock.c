#include "util/lock.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef WEFT_LOCK_CHECK
enum { MAX_HELD = 16 };
static _Thread_local int held_levels[MAX_HELD];
static _Thread_local int held_count;
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
static void note_acquire(int level)
{
    if (held_count > 0 && held_levels[held_count - 1] >= level) {
        int held = held_levels[held_count - 1];
        if (violation_handler) {
            violation_handler(held, level);
        } else {
            fprintf(stderr, "weft: lock order violation: taking level %d while holding level %d\n",
                    level, held);
            abort();
        }
    }
    if (held_count < MAX_HELD)
        held_levels[held_count] = level;
    held_count++;
}

static void note_release(int level)
{
    /* Locks are normally released in reverse order; tolerate any order. */
    int top = held_count < MAX_HELD ? held_count : MAX_HELD;
    for (int i = top - 1; i >= 0; i--) {
        if (held_levels[i] == level) {
            for (int j = i; j + 1 < top; j++)
                held_levels[j] = held_levels[j + 1];
            break;
        }
    }
    held_count--;
}
#endif

void wf__assert_no_locks_held(const char *what)
{
#ifdef WEFT_LOCK_CHECK
    if (held_count == 0)
        return;
    int held = held_levels[(held_count < MAX_HELD ? held_count : MAX_HELD) - 1];
    if (violation_handler) {
        violation_handler(held, 0);
        return;
    }
    fprintf(stderr, "weft: lock of level %d held while %s runs\n", held, what);
    abort();
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

void wf__cond_wait(pthread_cond_t *cond, wf_mutex *m)
{
    pthread_cond_wait(cond, &m->mutex);
}
