/*
 * Leveled mutexes (DESIGN section 4). Every internal lock has a level; a
 * thread may take a lock only while holding locks of strictly lower level.
 * Builds with WEFT_LOCK_CHECK keep a per-thread stack of held levels and
 * report an inversion through wf__lock_order_violation (which aborts unless
 * a test installed a handler).
 */
#ifndef WEFT_UTIL_LOCK_H
#define WEFT_UTIL_LOCK_H

#include <pthread.h>

enum wf_lock_level {
    WF_LOCK_COMPILE_MAP = 10,
    WF_LOCK_CACHE_ENTRY = 20,
    WF_LOCK_STREAM_REGISTRY = 30,
    WF_LOCK_STREAM_QUEUE = 40,
    WF_LOCK_NODE_WAIT = 50,
    WF_LOCK_POOL = 55, /* intra-op pool job list; taken by kernels, alone */
    WF_LOCK_ALLOCATOR = 60,
    WF_LOCK_LEAF = 70 /* error/last-resort locks that call nothing */
};

typedef struct wf_mutex {
    pthread_mutex_t mutex;
    int level;
} wf_mutex;

void wf__mutex_init(wf_mutex *m, int level);
void wf__mutex_destroy(wf_mutex *m);
void wf__mutex_lock(wf_mutex *m);
void wf__mutex_unlock(wf_mutex *m);
/* Waits on `cond`; the mutex is released while waiting (and so is its level). */
void wf__cond_wait(pthread_cond_t *cond, wf_mutex *m);

/* Number of locks this thread holds now (0 when the checker is off). */
int wf__locks_held(void);
/* Called on an inversion: prints both levels and aborts, unless a handler is
 * installed (tests install one to see the checker fire). */
typedef void (*wf_lock_violation_handler)(int held_level, int wanted_level);
void wf__set_lock_violation_handler(wf_lock_violation_handler handler);
/* Reports (like an inversion, with wanted level 0) a lock held where none
 * may be: before a kernel or user code runs. No-op without the checker. */
void wf__assert_no_locks_held(const char *what);
/* True when this build checks lock order. */
int wf__lock_check_enabled(void);

#endif
