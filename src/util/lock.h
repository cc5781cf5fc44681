/*
 * Leveled mutexes (DESIGN section 4). Every internal lock has a level; a
 * thread may take a lock only while holding locks of strictly lower level.
 * Builds with WEFT_LOCK_CHECK keep a per-thread stack of held levels and
 * report, through the violation handler (which aborts unless a test
 * installed one): an inversion, a lock held where none may be, a condition
 * wait with another lock held, and more locks held at once than the stack
 * records. docs/THREADING.md lists the same locks and levels.
 */
#ifndef WEFT_UTIL_LOCK_H
#define WEFT_UTIL_LOCK_H

#include <pthread.h>
#include <time.h>

enum wf_lock_level {
    WF_LOCK_COMPILE_MAP = 10,     /* compile cache map (reserved: compile is not built yet) */
    WF_LOCK_CACHE_ENTRY = 20,     /* one compile cache entry (reserved) */
    WF_LOCK_STREAM_REGISTRY = 30, /* the list of streams (runtime/stream.c) */
    WF_LOCK_STREAM_QUEUE = 40,    /* one stream's FIFO (runtime/stream.c) */
    WF_LOCK_NODE_WAIT = 50,       /* node-wait stripes (runtime/node_wait.c) */
    WF_LOCK_POOL = 55,            /* intra-op pool job list (runtime/pool.c); taken by kernels, alone */
    WF_LOCK_ALLOCATOR = 60,       /* buffer cache and memory counters (core/allocator.c) */
    WF_LOCK_LEAF = 70 /* leaves that call nothing, never nested: node-pool shards and the
                         node pool's spare list (core/node_pool.c), each slot and the slot
                         pool's free list (core/slot.c) */
};

/* Values of a report's `wanted_level` that are not the level being taken. */
enum wf_lock_report {
    WF_LOCK_REPORT_HELD = 0,       /* a lock held where none may be (wf__assert_no_locks_held) */
    WF_LOCK_REPORT_COND_WAIT = -1, /* a condition wait while holding held_level besides its mutex */
    WF_LOCK_REPORT_OVERFLOW = -2   /* taking a lock with the held-level stack full */
};

typedef struct wf_mutex {
    pthread_mutex_t mutex;
    int level;
} wf_mutex;

void wf__mutex_init(wf_mutex *m, int level);
void wf__mutex_destroy(wf_mutex *m);
void wf__mutex_lock(wf_mutex *m);
void wf__mutex_unlock(wf_mutex *m);
/* Waits on `cond`; the mutex is released while waiting (and so is its level).
 * The caller must hold `m` and no other lock (checked: WF_LOCK_REPORT_COND_WAIT). */
void wf__cond_wait(pthread_cond_t *cond, wf_mutex *m);
/* As wf__cond_wait, until the absolute `deadline` on the clock `cond` was
 * initialised with; returns 0 when woken (or spuriously), ETIMEDOUT once
 * the deadline has passed. Same checks as wf__cond_wait. */
int wf__cond_timedwait(pthread_cond_t *cond, wf_mutex *m, const struct timespec *deadline);

/* Number of locks this thread holds now (0 when the checker is off). */
int wf__locks_held(void);
/* Called on a violation: prints it and aborts, unless a handler is installed
 * (tests install one to see the checker fire). For an inversion
 * `wanted_level` is the level being taken; otherwise an enum wf_lock_report. */
typedef void (*wf_lock_violation_handler)(int held_level, int wanted_level);
void wf__set_lock_violation_handler(wf_lock_violation_handler handler);
/* Reports (WF_LOCK_REPORT_HELD) a lock held where none may be: before a
 * kernel or user code runs. No-op without the checker. */
void wf__assert_no_locks_held(const char *what);
/* For fork handlers only (util/fork.h): take and release a lock without
 * recording it. The prepare handlers hold every lock of the process at
 * once, many of one level (all stream queues, all node-pool shards), which the
 * per-thread checker (one lock per level at a time) cannot record. They
 * stay deadlock-free because the handlers run in ascending level order:
 * a thread holding a lock the handlers want only waits for higher levels,
 * which they have not taken yet. The checker's record of the forking
 * thread is untouched, so it is right in the child too. */
void wf__mutex_lock_for_fork(wf_mutex *m);
void wf__mutex_unlock_for_fork(wf_mutex *m);
/* True when this build checks lock order. */
int wf__lock_check_enabled(void);
/* Levels the checker records per thread; taking one more lock is reported
 * (WF_LOCK_REPORT_OVERFLOW), never written past the stack. */
enum { WF_LOCK_MAX_HELD = 16 };

#endif
