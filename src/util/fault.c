/* Fallible system calls and fault injection: see util/fault.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "util/fault.h"

#include <errno.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

atomic_int_fast64_t wf__fault_countdown;
static atomic_bool fired;
static atomic_int_fast64_t ops_seen;
static bool trace; /* WEFT_FAULT_TRACE set: print where the fault fires */

/* The call stack of the injected failure, to stderr (a debugging aid). */
static void print_trace(void)
{
    void *frames[32];
    int n = backtrace(frames, 32);
    fputs("weft: injected fault at:\n", stderr);
    backtrace_symbols_fd(frames, n, 2);
}

bool wf__fault_hit_slow(void)
{
    int_fast64_t left = atomic_load_explicit(&wf__fault_countdown, memory_order_relaxed);
    while (left > 0) {
        if (atomic_compare_exchange_weak(&wf__fault_countdown, &left, left - 1)) {
            atomic_fetch_add_explicit(&ops_seen, 1, memory_order_relaxed);
            if (left != 1)
                return false;
            atomic_store(&fired, true);
            if (trace)
                print_trace();
            return true;
        }
    }
    return false;
}

void wf__fault_arm(int64_t nth)
{
    atomic_store(&wf__fault_countdown, 0);
    atomic_store(&fired, false);
    atomic_store(&ops_seen, 0);
    const char *env = getenv("WEFT_FAULT_TRACE");
    trace = env && *env && strcmp(env, "0") != 0;
    atomic_store(&wf__fault_countdown, nth > 0 ? nth : 0);
}

bool wf__fault_fired(void) { return atomic_load(&fired); }

int64_t wf__fault_ops_seen(void) { return atomic_load(&ops_seen); }

void *wf__malloc(size_t bytes)
{
    if (wf__fault_hit()) {
        errno = ENOMEM;
        return NULL;
    }
    return malloc(bytes);
}

void *wf__calloc(size_t count, size_t size)
{
    if (wf__fault_hit()) {
        errno = ENOMEM;
        return NULL;
    }
    return calloc(count, size);
}

void *wf__realloc(void *p, size_t bytes)
{
    if (wf__fault_hit()) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, bytes);
}

char *wf__strdup(const char *s)
{
    if (wf__fault_hit()) {
        errno = ENOMEM;
        return NULL;
    }
    return strdup(s);
}

void *wf__aligned_alloc(size_t alignment, size_t bytes)
{
    if (wf__fault_hit()) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned_alloc(alignment, bytes);
}

int wf__posix_memalign(void **out, size_t alignment, size_t bytes)
{
    if (wf__fault_hit())
        return ENOMEM;
    return posix_memalign(out, alignment, bytes);
}

void *wf__mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
    if (wf__fault_hit()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return mmap(addr, length, prot, flags, fd, offset);
}

int wf__thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                      void *arg)
{
    if (wf__fault_hit())
        return EAGAIN;
    return pthread_create(thread, attr, start, arg);
}
