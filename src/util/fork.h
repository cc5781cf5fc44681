/*
 * fork() support: a registry of per-module fork handlers, run in lock-level
 * order. Internal.
 *
 * Only the forking thread survives in a child (POSIX). For the child to use
 * weft, no internal lock may be mid-update at the fork, and whatever the
 * other threads were doing must be undone or made visible as an error. Each
 * module that owns locks registers one set of hooks:
 *   prepare  takes the module's locks (wf__mutex_lock_for_fork), in
 *            ascending level, so no data they guard is half-written; a lock
 *            that guards no multi-word data (a wait protocol, one pointer)
 *            may instead be reinitialised by the child hook, which keeps
 *            the number held at once bounded;
 *   parent   releases them;
 *   child    repairs the module for a process with one thread (conditions
 *            reinitialised: their waiters are gone; worker threads marked
 *            gone, to be recreated on first use; work of dead threads failed
 *            or dropped), then releases the locks.
 * A module's hooks take only locks of levels from `level` up to below the
 * next registered module's level. The registry runs every prepare in
 * ascending `level` and every parent and child hook in descending `level`
 * (locks are released in the reverse order of taking), so a child hook sees
 * the repairs of every higher level already done (the node pool, at the
 * leaf level, fails in-flight nodes before streams and the cache repair).
 *
 * Registration happens from constructors (before main or during the
 * library's load), one call per module; the registry installs its
 * pthread_atfork handlers on the first one.
 */
#ifndef WEFT_UTIL_FORK_H
#define WEFT_UTIL_FORK_H

typedef struct wf_fork_hooks {
    int level; /* the lowest lock level its hooks take (enum wf_lock_level) */
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} wf_fork_hooks;

/* Adds a module's hooks (static storage; called from a constructor). */
void wf__fork_hooks_register(const wf_fork_hooks *hooks);

/* Times a child hook ran in this process (a test counter). */
int wf__fork_children(void);

#endif
