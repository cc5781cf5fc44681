/*
 * Per-thread state of the layers above core, neutralized around code run on
 * behalf of another thread. Internal.
 *
 * Kernels and deferred payload destructors may run on any thread (a stream
 * worker, or a thread evaluating someone else's graph). They must neither
 * see nor change that thread's own state: the random module's default key
 * now, the tracing state of transforms later. A module that keeps such
 * state registers a hook before it first touches the state; the runtime
 * suspends every hook around each kernel and destructor. (Core's own scope
 * stack and the runtime's stream stack are suspended directly.)
 */
#ifndef WEFT_CORE_THREAD_STATE_H
#define WEFT_CORE_THREAD_STATE_H

enum { WF_THREAD_STATE_HOOKS = 4, WF_THREAD_STATE_BYTES = 32 };

typedef struct wf_thread_state_hook {
    /* Copies this thread's state into `saved` (WF_THREAD_STATE_BYTES of
     * room) and resets it to the state of a thread that never used it. */
    void (*suspend)(void *saved);
    /* Puts back what `suspend` saved. */
    void (*resume)(const void *saved);
} wf_thread_state_hook;

/* Adds a hook (once per module, e.g. under pthread_once, before the module
 * first touches its state). At most WF_THREAD_STATE_HOOKS hooks. */
void wf__thread_state_register(const wf_thread_state_hook *hook);

typedef struct wf_thread_state {
    int count; /* hooks registered when suspended */
    unsigned char saved[WF_THREAD_STATE_HOOKS][WF_THREAD_STATE_BYTES];
} wf_thread_state;

/* Saves every hook's state into *saved and neutralizes it. */
void wf__thread_state_suspend(wf_thread_state *saved);
/* Restores what wf__thread_state_suspend saved. A hook registered in
 * between was untouched by this thread before: it is neutralized again. */
void wf__thread_state_resume(const wf_thread_state *saved);

#endif
