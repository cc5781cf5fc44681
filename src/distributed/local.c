/*
 * The group of one process: what wf_group_init gives a program not launched
 * by mpirun (as MLX does). A gather copies this rank's block; there is
 * nobody to send to.
 */
#include <stdint.h>

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

static wf_status one_post(void *comm, wf_comm_message *messages, size_t n)
{
    return n ? no_peer(comm, messages[0].peer) : WF_OK;
}

const wf_comm_backend wf__local_backend = {
    .name = "local",
    .rank = one_rank,
    .size = one_size,
    .split = one_split,
    .free = one_free,
    .max_message = SIZE_MAX,
    .post = one_post,
    .wait = one_post,
    .send = one_send,
    .recv = one_recv,
};
