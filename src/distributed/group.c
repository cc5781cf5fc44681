/*
 * Group handles: the world group (MPI under mpirun, else a group of one),
 * split, reference counts. See distributed/group.h.
 */
#include "distributed/group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "util/fault.h"

static wf_group *world;
static wf_status world_status;
static char world_message[512];
static pthread_once_t world_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t splits_made;
static atomic_int_fast64_t groups_live;

int64_t wf__groups_live(void) { return atomic_load(&groups_live); }

/* Launched by an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one). */
static bool launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

static wf_group *group_new(const wf_comm_backend *backend, void *comm)
{
    wf_group *g = wf__calloc(1, sizeof *g);
    if (!g) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory making a group");
        return NULL;
    }
    wf_stream *stream = wf_stream_new(); /* sets its own error */
    if (!stream) {
        free(g);
        return NULL;
    }
    atomic_init(&g->refcount, 1);
    atomic_fetch_add(&groups_live, 1);
    g->backend = backend;
    g->comm = comm;
    g->rank = backend->rank(comm);
    g->size = backend->size(comm);
    g->stream = stream;
    return g;
}

static void make_world(void)
{
    const bool under_mpi = launched_by_mpi();
    void *comm = under_mpi ? wf__mpi_world() : NULL;
    if (under_mpi && !comm) {
        world_status = wf_last_error();
        snprintf(world_message, sizeof world_message, "%s", wf_last_error_message());
    } else if (!under_mpi) {
        world_status = WF_ERR_UNSUPPORTED;
        snprintf(world_message, sizeof world_message,
                 "distributed: not launched by mpirun (no OMPI_COMM_WORLD_SIZE, PMIX_RANK "
                 "or PMI_SIZE in the environment)");
    }
    world = comm ? group_new(&wf__mpi_backend, comm) : group_new(&wf__local_backend, NULL);
}

wf_group *wf__group_world(bool strict)
{
    pthread_once(&world_once, make_world);
    if (strict && world_status != WF_OK) {
        wf__error(world_status, "%s", world_message);
        return NULL;
    }
    if (!world)
        wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: could not make the world group");
    return world;
}

bool wf_distributed_is_available(void) { return wf__mpi_available(); }

wf_group *wf_group_init(bool strict)
{
    wf_group *g = wf__group_world(strict);
    return g ? wf_group_retain(g) : NULL;
}

int wf_group_rank(const wf_group *g)
{
    if (!g) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_group_rank: group is NULL");
        return -1;
    }
    return g->rank;
}

int wf_group_size(const wf_group *g)
{
    if (!g) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_group_size: group is NULL");
        return -1;
    }
    return g->size;
}

wf_group *wf_group_split(wf_group *g, int color, int key)
{
    if (!g) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_group_split: group is NULL");
        return NULL;
    }
    if (color < 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_group_split: color %d is negative", color);
        return NULL;
    }
    if (key < -1) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_group_split: key %d is below -1", key);
        return NULL;
    }
    /* Collectives of g queued before the split run first (its FIFO), so the
     * split never overlaps one of them on this thread's side. */
    if (wf_stream_synchronize(g->stream) != WF_OK)
        return NULL;
    void *comm = NULL;
    if (g->backend->split(g->comm, color, key < 0 ? g->rank : key, &comm) != WF_OK)
        return NULL;
    wf_group *split = group_new(g->backend, comm);
    if (!split) {
        if (comm != g->comm)
            g->backend->free(comm);
        return NULL;
    }
    split->split_id = atomic_fetch_add(&splits_made, 1) + 1;
    return split;
}

wf_group *wf_group_retain(wf_group *g)
{
    if (g)
        atomic_fetch_add(&g->refcount, 1);
    return g;
}

void wf_group_release(wf_group *g)
{
    if (!g || atomic_fetch_sub(&g->refcount, 1) != 1)
        return;
    if (g->comm && g != world)
        g->backend->free(g->comm);
    wf_stream_release(g->stream);
    free(g);
    atomic_fetch_sub(&groups_live, 1);
}
