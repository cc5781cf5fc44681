/*
 * Fallible system calls and fault injection (docs/FAULTS.md).
 *
 * EVERY allocation, thread creation and mapping in src/ goes through the
 * wrappers below, never through malloc/calloc/realloc/strdup/aligned_alloc/
 * posix_memalign/pthread_create/mmap directly. Each wrapper behaves exactly
 * like the call it wraps, except that a test may arm a countdown
 * (wf__fault_arm): the Nth fallible operation from then on fails as the
 * system would (NULL, ENOMEM, EAGAIN, MAP_FAILED), once, and the countdown
 * disarms itself. Kernels count as fallible operations too (run_kernel in
 * runtime/eval.c asks wf__fault_hit), and so does MPI_Comm_split
 * (distributed/mpi.c), so their failure paths are reached.
 *
 * Off, it costs one relaxed atomic load and a predicted branch per call in
 * every build. Internal (tests include src/); buffer requests and node-pool
 * takes are injection points too (their caches would hide failures). New
 * allocation sites (ops, loaders, backends) must use these wrappers:
 * include "util/fault.h", write wf__malloc for malloc, wf__thread_create
 * for pthread_create; scripts/check-fallible.sh (make test) enforces it.
 */
#ifndef WEFT_UTIL_FAULT_H
#define WEFT_UTIL_FAULT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Operations left before the injected failure; 0 when disarmed. */
extern atomic_int_fast64_t wf__fault_countdown;

bool wf__fault_hit_slow(void);

/* True when this fallible operation is the one that must fail. */
static inline bool wf__fault_hit(void)
{
    if (__builtin_expect(atomic_load_explicit(&wf__fault_countdown, memory_order_relaxed) == 0, 1))
        return false;
    return wf__fault_hit_slow();
}

/* Arms the countdown: the nth fallible operation from now fails (n >= 1);
 * n = 0 disarms. Resets the hit flag and the operation counter. */
void wf__fault_arm(int64_t nth);
/* Whether the armed failure was injected since the last wf__fault_arm. */
bool wf__fault_fired(void);
/* Fallible operations counted since the last wf__fault_arm (while armed). */
int64_t wf__fault_ops_seen(void);

void *wf__malloc(size_t bytes);
void *wf__calloc(size_t count, size_t size);
void *wf__realloc(void *p, size_t bytes);
char *wf__strdup(const char *s);
void *wf__aligned_alloc(size_t alignment, size_t bytes);
int wf__posix_memalign(void **out, size_t alignment, size_t bytes);
void *wf__mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset);
int wf__thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                      void *arg);

#endif
