/*
 * Groups and the collectives they run (DESIGN section 9). Internal.
 *
 * A group is a communicator of a backend plus its communication stream:
 * every collective node of the group runs there (prim->stream), so the
 * collectives of one group run one at a time, in the order they reach that
 * stream's FIFO, which is the order every rank must agree on. The
 * collective functions below run inside those nodes' kernels: each first
 * exchanges a small header (position, op, dtype, size) so a mismatch fails
 * on every rank instead of exchanging wrong data or hanging.
 */
#ifndef WEFT_DISTRIBUTED_GROUP_H
#define WEFT_DISTRIBUTED_GROUP_H

#include <stdatomic.h>
#include <stdint.h>

#include "distributed/backend.h"
#include "weft.h"

struct wf_group {
    atomic_int_fast64_t refcount;
    const wf_comm_backend *backend;
    void *comm;
    int rank, size;
    wf_stream *stream; /* the communication stream (owned) */
    /* Collectives run so far: the position in the header. Only the group's
     * stream runs collectives, one at a time. */
    uint64_t collectives;
    uint64_t split_id; /* which split made it, for messages (0: the world) */
};

enum wf_collective_kind {
    WF_COLLECTIVE_ALL_SUM = 0,
    WF_COLLECTIVE_ALL_MAX,
    WF_COLLECTIVE_ALL_MIN,
    WF_COLLECTIVE_ALL_GATHER,
    WF_COLLECTIVE_SUM_SCATTER,
    WF_COLLECTIVE_SEND,
    WF_COLLECTIVE_RECV
};

/* Groups made and not yet freed (the world group counts while it lives,
 * which is until exit): a leak check for tests. */
int64_t wf__groups_live(void);

/* "all_sum", ... */
const char *wf__collective_name(int kind);

/* The world group (borrowed; lives until exit), or NULL with the error
 * recorded when `strict` and MPI is not there. */
wf_group *wf__group_world(bool strict);

/* The ranks' headers must agree on kind, dtype, `shape` (ndim entries) and
 * count. A NULL `in` (send: `data`; recv: `data`) says this rank's input
 * failed: it still takes part in the header exchange, so every rank fails
 * instead of waiting for it. all_sum / all_max / all_min (kind) of `count` elements: `out` gets the
 * reduction in rank order of every rank's `in`. With `scatter`
 * (sum_scatter) count is a multiple of the size and `out` gets only this
 * rank's count / size elements. `in` and `out` do not overlap. */
wf_status wf__collective_reduce(wf_group *g, int kind, wf_dtype dtype, const int64_t *shape,
                                int ndim, const void *in, void *out, int64_t count);
/* all_gather: out gets every rank's `count` elements, rank after rank. */
wf_status wf__collective_gather(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                                const void *in, void *out, int64_t count);
/* send to / recv from `peer` of `count` elements of `dtype` with `shape`
 * (matched against the other side's). */
wf_status wf__collective_send(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                              const void *data, int64_t count, int peer);
wf_status wf__collective_recv(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                              void *data, int64_t count, int peer);

#endif
