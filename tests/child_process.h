/*
 * child_process.h - runs this test program again in a child process with
 * some environment variables changed, capturing its standard output. Tests
 * use it where a setting is read once per process (WEFT_NUM_THREADS,
 * WEFT_ISA): each child computes under one setting and prints hashes of
 * its results, and the parent compares them (wf_test_thread_counts_agree
 * for the usual check: the same output for every thread count).
 */
#ifndef WEFT_TESTS_CHILD_PROCESS_H
#define WEFT_TESTS_CHILD_PROCESS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

/* The path of this program (for wf_test_run_child); false if unknown. */
static inline bool wf_test_self_path(char *path, size_t cap)
{
    const ssize_t n = readlink("/proc/self/exe", path, cap - 1);
    if (n <= 0)
        return false;
    path[n] = '\0';
    return true;
}

/* Whether environment entry `entry` ("NAME=value") names the variable of
 * `change` ("NAME=value" to set it, or "NAME" to unset it). */
static inline bool wf_test_same_variable(const char *entry, const char *change)
{
    const size_t name = strcspn(change, "=");
    return strncmp(entry, change, name) == 0 && entry[name] == '=';
}

/* Runs `self` with this process's environment changed by `changes` (each
 * "NAME=value" sets NAME, each bare "NAME" unsets it); what it prints goes
 * to `out` (at most cap - 1 bytes, NUL-terminated). True when it exited 0. */
static inline bool wf_test_run_child(const char *self, const char *const *changes,
                                     size_t nchanges, char *out, size_t cap)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + nchanges + 1, sizeof *env);
    if (env == NULL)
        return false;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool changed = false;
        for (size_t c = 0; c < nchanges && !changed; c++)
            changed = wf_test_same_variable(environ[i], changes[c]);
        if (!changed)
            env[m++] = environ[i];
    }
    for (size_t c = 0; c < nchanges; c++)
        if (strchr(changes[c], '=') != NULL)
            env[m++] = (char *)changes[c];
    env[m] = NULL;
    int fds[2];
    if (pipe(fds) != 0) {
        free(env);
        return false;
    }
    char *const argv[] = {(char *)self, NULL};
    const pid_t pid = fork();
    if (pid == 0) { /* only async-signal-safe calls until exec */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execve(self, argv, env);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t r;
    while (pid > 0 && used + 1 < cap && (r = read(fds[0], out + used, cap - 1 - used)) > 0)
        used += (size_t)r;
    out[used] = '\0';
    close(fds[0]);
    free(env);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The thread-count check of the determinism tests: runs `self` once per
 * entry of `counts` (n of them) with WEFT_NUM_THREADS set to it and the
 * environment change `flag` (e.g. "WEFT_X_CHILD=1", which makes the child
 * compute and print its hashes). The first child's output goes to
 * `reference`, each later one's to `got` (cap bytes each). Returns 0 when
 * every child exited 0 and printed what the first printed; else the first
 * thread count that did not: negative when its child failed. */
static inline int wf_test_thread_counts_agree(const char *self, const char *flag,
                                              const int *counts, size_t n, char *reference,
                                              char *got, size_t cap)
{
    got[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char threads[64];
        snprintf(threads, sizeof threads, "WEFT_NUM_THREADS=%d", counts[i]);
        const char *const changes[] = {threads, flag};
        if (!wf_test_run_child(self, changes, 2, i == 0 ? reference : got, cap))
            return -counts[i];
        if (i > 0 && strcmp(reference, got) != 0)
            return counts[i];
    }
    return 0;
}

/* wf_test_thread_counts_agree with its failure reported through the
 * harness at file:line (`what` prefixes the message when not NULL).
 * Returns whether every thread count agreed. */
static inline bool wf_test_check_thread_counts(const char *file, int line, const char *what,
                                               const char *self, const char *flag,
                                               const int *counts, size_t n, char *reference,
                                               char *got, size_t cap)
{
    const int bad = wf_test_thread_counts_agree(self, flag, counts, n, reference, got, cap);
    if (bad != 0)
        wf_test_fail(file, line, "%s%sWEFT_NUM_THREADS=%d %s:\n%s\nvs 1 thread:\n%s",
                     what ? what : "", what ? ": " : "", abs(bad), bad < 0 ? "failed" : "differs",
                     got, reference);
    return bad == 0;
}

#endif
