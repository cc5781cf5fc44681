/*
 * Shared pieces of the reproductions: run one round on a helper thread with a
 * deadline. Exit codes: 0 pass, 1 failed or hung, 2 scenario not reached.
 */
#ifndef WEFT_TESTS_REPRO_COMMON_H
#define WEFT_TESTS_REPRO_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

enum { REPRO_PASS = 0, REPRO_FAIL = 1, REPRO_NOT_REACHED = 2 };

/* Runs fn(arg) on a new thread; returns false if it did not finish within
 * `seconds` (the thread is left running: the process is about to exit 1). */
static inline bool repro_run_with_deadline(void *(*fn)(void *), void *arg, int seconds)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0)
        return false;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    int rc = pthread_timedjoin_np(t, NULL, &deadline);
    return rc == 0;
}

#endif
