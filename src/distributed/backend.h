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

typedef struct wf_comm_backend {
    const char *name;
    int (*rank)(void *comm);
    int (*size)(void *comm);
    /* A new communicator of the ranks with `color`, ordered by key then rank. */
    wf_status (*split)(void *comm, int color, int key, void **out);
    void (*free)(void *comm);
    /* Every rank's `bytes` from `send` into recv, rank r's at r * bytes. */
    wf_status (*allgather)(void *comm, const void *send, size_t bytes, void *recv);
    /* Rank r's block lies at recv + displs[r] (counts[r] bytes); this rank's
     * own block is already there (in place). */
    wf_status (*allgatherv_in_place)(void *comm, void *recv, const size_t *counts,
                                     const size_t *displs);
    /* Block j of send (send_counts[j] bytes at send_displs[j]) goes to rank j;
     * the block from rank j lands at recv + recv_displs[j]. */
    wf_status (*alltoallv)(void *comm, const void *send, const size_t *send_counts,
                           const size_t *send_displs, void *recv, const size_t *recv_counts,
                           const size_t *recv_displs);
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
