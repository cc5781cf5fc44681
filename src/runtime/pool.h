/*
 * The intra-op thread pool (DESIGN section 2, step 4). Internal.
 *
 * One pool for the process, shared by every stream. A kernel splits a range
 * into chunks with wf__parallel_for; pool threads and the calling thread all
 * take chunks, so a saturated pool only means the caller does the work
 * itself: it can never deadlock. Size: WEFT_NUM_THREADS (total threads that
 * work on one kernel, caller included), default the number of cores.
 * The pool lock (level WF_LOCK_POOL) is never held while a chunk runs.
 */
#ifndef WEFT_RUNTIME_POOL_H
#define WEFT_RUNTIME_POOL_H

#include <stdint.h>

/* Runs fn(ctx, begin, end) over [0, n) in chunks of at least `min_chunk`
 * items; returns when every chunk has run. Small ranges run inline. */
typedef void (*wf_parallel_fn)(void *ctx, int64_t begin, int64_t end);
void wf__parallel_for(int64_t n, int64_t min_chunk, wf_parallel_fn fn, void *ctx);

/* Threads that work on one kernel, caller included (1: no pool threads). */
int wf__pool_size(void);
/* Starts the pool threads now (they are process-lifetime, like the default
 * stream), so thread counts are stable from the first evaluation on. */
void wf__pool_start(void);
/* Bracket a thread's run of an evaluation's kernels (eval.c: a run list,
 * a stream task); nesting allowed. While other threads are inside such a
 * bracket, each keeps a core: a split by this thread takes only the cores
 * they leave (none: the kernel runs on its caller alone). Two evaluations
 * side by side on two cores thus run one thread each, not three threads
 * on two cores. */
void wf__pool_evaluation_begin(void);
void wf__pool_evaluation_end(void);
/* Around a wait inside such a bracket (an input another thread computes):
 * the thread counts as not evaluating meanwhile, whatever its nesting
 * (returned by pause, given back to resume). */
int wf__pool_evaluation_pause(void);
void wf__pool_evaluation_resume(int depth);
/* Chunks run by pool threads rather than callers (a test counter). */
uint64_t wf__pool_chunks_helped(void);
/* Idle pool threads steered off a posting caller's core (a test counter;
 * see pool.c). */
uint64_t wf__pool_threads_steered(void);

#endif
