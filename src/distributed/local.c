/*
 * The group of one process: what wf_group_init gives a program not launched
 * by mpirun (as MLX does). Gathers and exchanges copy this rank's block;
 * there is nobody to send to.
 */
#include <string.h>

#include "core/error.h"
#include "distributed/backend.h"

static int one_rank(void *comm) { (void)comm; return 0; }
static int one_size(void *comm) { (void)comm; return 1; }

static wf_status one_split(void *comm, int color, int key, void **out)
{
    (void)color, (void)key;
    *out = comm;
    return WF_OK;
}

static void one_free(void *comm) { (void)comm; }

static wf_status one_allgather(void *comm, const void *send, size_t bytes, void *recv)
{
    (void)comm;
    if (bytes)
        memmove(recv, send, bytes);
    return WF_OK;
}

static wf_status one_allgatherv(void *comm, void *recv, const size_t *counts,
                                const size_t *displs)
{
    (void)comm, (void)recv, (void)counts, (void)displs; /* the one block is in place */
    return WF_OK;
}

static wf_status one_alltoallv(void *comm, const void *send, const size_t *send_counts,
                               const size_t *send_displs, void *recv,
                               const size_t *recv_counts, const size_t *recv_displs)
{
    (void)comm, (void)recv_counts;
    if (send_counts[0])
        memmove((char *)recv + recv_displs[0], (const char *)send + send_displs[0],
                send_counts[0]);
    return WF_OK;
}

static wf_status no_peer(void *comm, int peer)
{
    (void)comm;
    return wf__error(WF_ERR_INVALID_ARGUMENT,
                     "distributed: rank %d does not exist in a group of one process", peer);
}

static wf_status one_send(void *comm, const void *data, size_t bytes, int dst, int tag)
{
    (void)data, (void)bytes, (void)tag;
    return no_peer(comm, dst);
}

static wf_status one_recv(void *comm, void *data, size_t bytes, int src, int tag)
{
    (void)data, (void)bytes, (void)tag;
    return no_peer(comm, src);
}

const wf_comm_backend wf__local_backend = {
    .name = "local",
    .rank = one_rank,
    .size = one_size,
    .split = one_split,
    .free = one_free,
    .allgather = one_allgather,
    .allgatherv_in_place = one_allgatherv,
    .alltoallv = one_alltoallv,
    .send = one_send,
    .recv = one_recv,
};
