/*
 * The intra-op thread pool: a list of open jobs; each job is a range split
 * into chunks taken with an atomic counter by the caller and by pool threads.
 * A job lives on its caller's stack; the caller unlinks it and waits until no
 * pool thread is still inside it before returning.
 *
 * fork(): the pool lock is held across it; in the child the pool threads
 * and the jobs (on the stacks of gone threads) are gone, so the pool counts
 * as not started and its threads are created again on first use.
 *
 * Steering: Linux may queue a pool thread on its caller's core (a woken
 * thread: the other cores' virtual CPUs look busy or far away; a watching
 * one: the two threads just share a core until the load balancer, which
 * leaves recently run threads where they are for a few milliseconds, moves
 * one), where it does nothing for the job until the caller is done with it.
 * So a caller posting a job first takes its own core out of the CPU set of
 * each idle pool thread that sleeps or was last seen watching on that core;
 * the thread puts its set back as soon as it sees the job, before it takes
 * a chunk (steer_idle_threads, wait_for_work).
 */
#include "runtime/pool.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

enum { MAX_POOL_THREADS = 256 };

/* A job's chunks are guided: each take gets what is left divided by
 * twice the job's threads (at least min_chunk), large first and small at
 * the end, so that its threads finish together. Equal chunks (a quarter
 * of a thread's share each) left one thread running the last one alone:
 * a 4-bit 4096 x 4096 matvec of 43 tasks in 9 chunks on two threads read
 * 23.6 GB/s on Zen 4, 25.1 in 8 equal ones. */
struct job {
    wf_parallel_fn fn;
    void *ctx;
    int64_t n, min_chunk, divisor;
    atomic_int_fast64_t next_item; /* the first item not taken */
    atomic_int helpers; /* pool threads inside the job (changed under the pool lock) */
    int max_helpers;    /* pool threads it may take: the cores other work leaves */
    struct job *next;
};

/* How long an idle pool thread watches for the next job, and a caller for
 * its helpers to leave, before sleeping on a condition variable. Waking a
 * sleeping thread costs tens of microseconds on a virtual machine (longer
 * than a matrix-vector product): without the watch, a kernel split over
 * the pool mostly runs on its caller alone. WEFT_POOL_SPIN_US sets it
 * (0: sleep at once). */
enum { DEFAULT_SPIN_US = 200 };

/* A pool thread as callers see it, to steer it while it is idle. `tid`
 * is set before the thread first takes the pool lock and `cpu` by the
 * thread as it watches; the rest changes under the pool lock. */
struct pool_worker {
    pid_t tid;
    atomic_int cpu;    /* the core it last watched on (-1: not known) */
    bool idle;         /* watching or sleeping, not in a job */
    bool sleeping;     /* in the condition wait for work */
    bool usual_known;  /* `usual` holds its CPU set */
    bool steered;      /* its CPU set is `usual` less a caller's core */
    cpu_set_t usual;   /* read when it started and before each sleep */
};

static struct {
    wf_mutex lock; /* level 55 */
    pthread_cond_t work;     /* pool threads wait for jobs */
    pthread_cond_t finished; /* callers wait for helpers to leave */
    struct job *jobs;
    atomic_uint_fast64_t posted; /* jobs ever posted: what idle threads watch */
    atomic_int callers;          /* threads inside wf__parallel_for */
    atomic_int evaluators;       /* threads running an evaluation's kernels */
    int64_t spin_ns;     /* the watch (set when started) */
    int size;            /* threads per kernel, caller included (set when started) */
    struct pool_worker workers[MAX_POOL_THREADS]; /* size - 1 of them */
    atomic_bool started; /* pool threads created (set under the lock; cleared in a fork child) */
} pool = {.lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_POOL},
          .work = PTHREAD_COND_INITIALIZER,
          .finished = PTHREAD_COND_INITIALIZER};
static atomic_uint_fast64_t chunks_helped, threads_steered;
static _Thread_local int evaluation_depth; /* wf__pool_evaluation_begin/end nesting */

uint64_t wf__pool_chunks_helped(void) { return atomic_load(&chunks_helped); }
uint64_t wf__pool_threads_steered(void) { return atomic_load(&threads_steered); }

/* Takes the job's next chunk into [*begin, *end); false when none is left. */
static bool take_chunk(struct job *job, int64_t *begin, int64_t *end)
{
    int64_t at = atomic_load_explicit(&job->next_item, memory_order_relaxed);
    for (;;) {
        if (at >= job->n)
            return false;
        int64_t size = (job->n - at) / job->divisor;
        size = size < job->min_chunk ? job->min_chunk : size;
        const int64_t stop = size < job->n - at ? at + size : job->n;
        if (atomic_compare_exchange_weak_explicit(&job->next_item, &at, stop, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *begin = at;
            *end = stop;
            return true;
        }
    }
}

/* Takes and runs chunks until none is left; returns how many it ran. */
static int64_t run_chunks(struct job *job)
{
    int64_t ran = 0, begin, end;
    while (take_chunk(job, &begin, &end)) {
        job->fn(job->ctx, begin, end);
        ran++;
    }
    return ran;
}

/* Pool lock held: a job with chunks left and room for one more helper. */
static struct job *open_job(void)
{
    for (struct job *j = pool.jobs; j; j = j->next)
        if (atomic_load_explicit(&j->next_item, memory_order_relaxed) < j->n &&
            atomic_load_explicit(&j->helpers, memory_order_relaxed) < j->max_helpers)
            return j;
    return NULL;
}

static int64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits up to pool.spin_ns, without the lock, for `done(arg)`. It never
 * calls sched_yield: under Linux's EEVDF scheduler a yield hands the core
 * to any runnable process, even one at nice 19, for a whole time slice
 * (milliseconds), and the watch exists to be there within microseconds.
 * Wake-ups still preempt the watch, and it ends after spin_ns. */
static bool spin_until(bool (*done)(const void *), const void *arg)
{
    if (pool.spin_ns <= 0)
        return done(arg);
    const int64_t deadline = monotonic_ns() + pool.spin_ns;
    for (unsigned i = 1;; i++) {
        if (done(arg))
            return true;
        cpu_relax();
        if (i % 16 == 0 && monotonic_ns() > deadline)
            return false;
    }
}

/* What an idle pool thread watches: a post since `seen`. It also notes
 * the core it watches on, for callers to steer it (see the top). */
struct watch {
    uint64_t seen;
    struct pool_worker *self;
};

static bool job_posted_since(const void *arg)
{
    const struct watch *w = arg;
    atomic_store_explicit(&w->self->cpu, sched_getcpu(), memory_order_relaxed);
    return atomic_load_explicit(&pool.posted, memory_order_acquire) != w->seen;
}

static bool no_helpers(const void *arg)
{
    return atomic_load_explicit(&((const struct job *)arg)->helpers, memory_order_acquire) == 0;
}

/* Pool lock held, about to post a job: narrows the CPU set of each idle
 * pool thread that sleeps (it may be woken anywhere) or last watched on
 * the caller's core to exclude that core, where its set allows another.
 * One system call per such thread, none in the common case; a failure
 * only leaves a thread unsteered. */
static void steer_idle_threads(void)
{
    const int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    for (int i = 0; i < pool.size - 1; i++) {
        struct pool_worker *t = &pool.workers[i];
        const bool here = atomic_load_explicit(&t->cpu, memory_order_relaxed) == cpu;
        if (!t->idle || !(t->sleeping || here) || t->steered || !t->usual_known ||
            !CPU_ISSET(cpu, &t->usual) || CPU_COUNT(&t->usual) < 2)
            continue;
        cpu_set_t elsewhere = t->usual;
        CPU_CLR(cpu, &elsewhere);
        if (sched_setaffinity(t->tid, sizeof elsewhere, &elsewhere) == 0) {
            t->steered = true;
            atomic_fetch_add_explicit(&threads_steered, 1, memory_order_relaxed);
        }
    }
}

/* Pool lock held: the thread's own CPU set, read without the lock. Not
 * while steered: the set read may be the narrowed one. */
static void note_usual_set(struct pool_worker *self, bool known, const cpu_set_t *set)
{
    if (self->steered)
        return;
    self->usual_known = known;
    if (known)
        self->usual = *set;
}

/* Pool lock held: puts back the CPU set a caller narrowed. */
static void undo_steering(struct pool_worker *self)
{
    if (self->steered) {
        self->steered = false;
        (void)sched_setaffinity(0, sizeof self->usual, &self->usual);
    }
}

/* Watches for a post without the lock, then sleeps if none came. Called
 * and returns with the pool lock held. */
static void wait_for_work(struct pool_worker *self)
{
    struct watch w = {atomic_load_explicit(&pool.posted, memory_order_relaxed), self};
    self->idle = true;
    wf__mutex_unlock(&pool.lock);
    const bool posted = spin_until(job_posted_since, &w);
    cpu_set_t set;
    const bool known = !posted && sched_getaffinity(0, sizeof set, &set) == 0;
    wf__mutex_lock(&pool.lock);
    if (!posted)
        note_usual_set(self, known, &set);
    if (!posted && atomic_load_explicit(&pool.posted, memory_order_relaxed) == w.seen) {
        self->sleeping = true;
        wf__cond_wait(&pool.work, &pool.lock);
        self->sleeping = false;
    }
    self->idle = false;
    undo_steering(self);
}

static void *pool_thread(void *arg)
{
    struct pool_worker *self = arg;
    cpu_set_t set;
    const bool known = sched_getaffinity(0, sizeof set, &set) == 0;
    self->tid = (pid_t)syscall(SYS_gettid);
    wf__mutex_lock(&pool.lock);
    note_usual_set(self, known, &set);
    for (;;) {
        struct job *job = open_job();
        if (!job) {
            wait_for_work(self);
            continue;
        }
        atomic_fetch_add_explicit(&job->helpers, 1, memory_order_relaxed);
        wf__mutex_unlock(&pool.lock);
        int64_t ran = run_chunks(job);
        atomic_fetch_add_explicit(&chunks_helped, (uint_fast64_t)ran, memory_order_relaxed);
        wf__mutex_lock(&pool.lock);
        /* The last touch of the job: its caller may return once it reads 0. */
        if (atomic_fetch_sub_explicit(&job->helpers, 1, memory_order_release) == 1)
            pthread_cond_broadcast(&pool.finished);
    }
    return NULL;
}

static int configured_size(void)
{
    const char *env = getenv("WEFT_NUM_THREADS");
    long n = env ? strtol(env, NULL, 10) : 0;
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > MAX_POOL_THREADS ? MAX_POOL_THREADS : (int)n;
}

static int64_t configured_spin_ns(void)
{
    const char *env = getenv("WEFT_POOL_SPIN_US");
    long us = env ? strtol(env, NULL, 10) : DEFAULT_SPIN_US;
    if (us < 0)
        us = 0;
    return us > 1000000 ? 1000000000 : (int64_t)us * 1000;
}

/* Pool lock held: the new threads wait for it before looking for jobs. */
static void start_threads(void)
{
    int wanted = configured_size();
    pool.spin_ns = configured_spin_ns();
    pool.size = 1;
    for (int i = 1; i < wanted; i++) {
        pthread_t t;
        struct pool_worker *slot = &pool.workers[pool.size - 1];
        *slot = (struct pool_worker){.tid = 0};
        atomic_init(&slot->cpu, -1);
        if (wf__thread_create(&t, NULL, pool_thread, slot) != 0)
            break; /* fewer helpers: the callers do more of the work */
        pthread_detach(t);
        pool.size++;
    }
}

/* Not a pthread_once: a fork child must be able to start the pool again. */
void wf__pool_start(void)
{
    if (atomic_load_explicit(&pool.started, memory_order_acquire))
        return;
    wf__mutex_lock(&pool.lock);
    if (!atomic_load_explicit(&pool.started, memory_order_relaxed)) {
        start_threads();
        atomic_store_explicit(&pool.started, true, memory_order_release);
    }
    wf__mutex_unlock(&pool.lock);
}

int wf__pool_size(void)
{
    wf__pool_start();
    return pool.size;
}

/* Posts the job for `threads` threads (caller included), runs chunks of
 * it, waits for the helpers to leave it. */
static void split_over_pool(int64_t n, int64_t min_chunk, int threads, wf_parallel_fn fn,
                            void *ctx)
{
    struct job job = {.fn = fn,
                      .ctx = ctx,
                      .n = n,
                      .min_chunk = min_chunk,
                      .divisor = 2 * (int64_t)threads,
                      .max_helpers = threads - 1};
    atomic_init(&job.next_item, 0);
    atomic_init(&job.helpers, 0);

    wf__mutex_lock(&pool.lock);
    job.next = pool.jobs;
    pool.jobs = &job;
    atomic_fetch_add_explicit(&pool.posted, 1, memory_order_release);
    steer_idle_threads();
    pthread_cond_broadcast(&pool.work);
    wf__mutex_unlock(&pool.lock);

    run_chunks(&job);

    /* Unlink the job (no thread joins it after this), then wait for pool
     * threads still running its chunks: watching first, then asleep. */
    wf__mutex_lock(&pool.lock);
    struct job **link = &pool.jobs;
    while (*link != &job)
        link = &(*link)->next;
    *link = job.next;
    wf__mutex_unlock(&pool.lock);
    if (spin_until(no_helpers, &job))
        return;
    wf__mutex_lock(&pool.lock);
    while (!no_helpers(&job))
        wf__cond_wait(&pool.finished, &pool.lock);
    wf__mutex_unlock(&pool.lock);
}

void wf__parallel_for(int64_t n, int64_t min_chunk, wf_parallel_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    int threads = wf__pool_size();
    if (min_chunk < 1)
        min_chunk = 1;
    if (threads == 1 || n < 2 * min_chunk) {
        fn(ctx, 0, n);
        return;
    }
    /* Other threads busy in kernels of their own (other client threads,
     * other streams: splitting now, or running an evaluation, which goes
     * from kernel to kernel) each keep a core: the split takes what they
     * leave, and none when they use up the pool's size; more would only
     * add threads the cores cannot run. */
    const int callers = atomic_fetch_add_explicit(&pool.callers, 1, memory_order_relaxed);
    const int evaluators = atomic_load_explicit(&pool.evaluators, memory_order_relaxed) -
                           (evaluation_depth > 0);
    const int busy = callers > evaluators ? callers : evaluators;
    if (busy + 1 >= threads) {
        fn(ctx, 0, n);
        atomic_fetch_sub_explicit(&pool.callers, 1, memory_order_relaxed);
        return;
    }
    split_over_pool(n, min_chunk, threads - busy, fn, ctx);
    atomic_fetch_sub_explicit(&pool.callers, 1, memory_order_relaxed);
}

void wf__pool_evaluation_begin(void)
{
    if (evaluation_depth++ == 0)
        atomic_fetch_add_explicit(&pool.evaluators, 1, memory_order_relaxed);
}

void wf__pool_evaluation_end(void)
{
    if (--evaluation_depth == 0)
        atomic_fetch_sub_explicit(&pool.evaluators, 1, memory_order_relaxed);
}

int wf__pool_evaluation_pause(void)
{
    const int depth = evaluation_depth;
    if (depth > 0) {
        evaluation_depth = 0;
        atomic_fetch_sub_explicit(&pool.evaluators, 1, memory_order_relaxed);
    }
    return depth;
}

void wf__pool_evaluation_resume(int depth)
{
    if (depth > 0) {
        evaluation_depth = depth;
        atomic_fetch_add_explicit(&pool.evaluators, 1, memory_order_relaxed);
    }
}

/* ------------------------------------------------------------ fork */

static void fork_prepare(void) { wf__mutex_lock_for_fork(&pool.lock); }
static void fork_parent(void) { wf__mutex_unlock_for_fork(&pool.lock); }

/* Alone in the child: no pool thread and no caller of a job survived. */
static void fork_child(void)
{
    pool.jobs = NULL;
    pool.size = 1;
    atomic_store_explicit(&pool.callers, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.evaluators, evaluation_depth > 0, memory_order_relaxed);
    atomic_store_explicit(&pool.started, false, memory_order_relaxed);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.finished, NULL);
    wf__mutex_unlock_for_fork(&pool.lock);
}

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_POOL, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }
