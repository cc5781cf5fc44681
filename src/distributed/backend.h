/*
 * Distributed backends (DESIGN section 9). Internal.
 *
 * A backend moves bytes between the processes of a communicator and knows
 * nothing of dtypes, reductions or graphs: collectives (distributed/
 * collective.c) are built on these few calls, so an NCCL backend later adds
 * a table like this one, not new ops. Every call blocks until its part is
 * done and returns WF_OK, or records the error (WF_ERR_DISTRIBUTED) and
 * returns it. Calls on different communicators may run on different
 * threads at once; calls on one communicator run one at a time (its
 * group's stream serializes them).
 */
#ifndef WEFT_DISTRIBUTED_BACKEND_H
#define WEFT_DISTRIBUTED_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "weft.h"

/* One nonblocking message of at most max_message bytes: a receive into
 * data from `peer` (of a message of at most `bytes`), or a send of data to
 * it. */
typedef struct wf_comm_message {
    void *data;
    size_t bytes;
    int peer, tag;
    bool receive;
    void *request; /* the backend's, between post and wait */
} wf_comm_message;

typedef struct wf_comm_backend {
    const char *name;
    int (*rank)(void *comm);
    int (*size)(void *comm);
    /* A new communicator of the ranks with `color`, ordered by key then rank. */
    wf_status (*split)(void *comm, int color, int key, void **out);
    void (*free)(void *comm);
    /* The most bytes one message may carry: callers split larger
     * transfers (MPI counts in int). */
    size_t max_message;
    /* Starts each message without waiting (its request is set); wait ends
     * them. Messages between two ranks with one tag match in posting order. */
    wf_status (*post)(void *comm, wf_comm_message *messages, size_t n);
    wf_status (*wait)(void *comm, wf_comm_message *messages, size_t n);
    wf_status (*send)(void *comm, const void *data, size_t bytes, int dst, int tag);
    wf_status (*recv)(void *comm, void *data, size_t bytes, int src, int tag);
} wf_comm_backend;

/* The MPI backend (distributed/mpi.c). wf__mpi_available: libmpi.so.40 can be
 * loaded. wf__mpi_world: initialises MPI (once per process) and returns the
 * world communicator, or NULL with the error recorded. */
extern const wf_comm_backend wf__mpi_backend;
bool wf__mpi_available(void);
void *wf__mpi_world(void);

/* The group of one process (distributed/local.c): every collective is a copy. */
extern const wf_comm_backend wf__local_backend;

#endif
