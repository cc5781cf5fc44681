/* Collective ops (wf_all_sum, ..., wf_recv_like): argument checks, then a
 * node of the collective primitive holding a reference to its group. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "distributed/group.h"
#include "ops/ops.h"
#include "prim/distributed.h"
#include "prim/prims.h"

static atomic_uint_fast64_t instances;

/* g, or the world group for NULL (borrowed). */
static wf_group *group_or_world(wf_group *g) { return g ? g : wf__group_world(false); }

static wf_array *collective_node(const wf_prim_def *prim, wf_group *g, int peer,
                                 wf_array *const *inputs, int ninputs,
                                 const wf_collective_params *shape_from)
{
    wf_collective_params p;
    memset(&p, 0, sizeof p);
    if (shape_from)
        p = *shape_from;
    p.group = wf_group_retain(g); /* the node's reference from here on */
    p.instance = atomic_fetch_add(&instances, 1) + 1;
    p.peer = peer;
    return wf__node_new(prim, &p, inputs, ninputs);
}

static wf_array *reduce_op(const char *op, const wf_prim_def *prim, wf_array *x, wf_group *g)
{
    if (!wf__array_check(x, op, "x") || !(g = group_or_world(g)))
        return NULL;
    if (prim != &wf__prim_all_sum && prim != &wf__prim_sum_scatter &&
        wf__dtype_is_complex(x->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: complex64 has no order", op);
        return NULL;
    }
    return wf__array_publish(collective_node(prim, g, 0, &x, 1, NULL));
}

wf_array *wf_all_sum(wf_array *x, wf_group *g)
{
    return reduce_op("wf_all_sum", &wf__prim_all_sum, x, g);
}

wf_array *wf_all_max(wf_array *x, wf_group *g)
{
    return reduce_op("wf_all_max", &wf__prim_all_max, x, g);
}

wf_array *wf_all_min(wf_array *x, wf_group *g)
{
    return reduce_op("wf_all_min", &wf__prim_all_min, x, g);
}

wf_array *wf_sum_scatter(wf_array *x, wf_group *g)
{
    return reduce_op("wf_sum_scatter", &wf__prim_sum_scatter, x, g);
}

wf_array *wf_all_gather(wf_array *x, wf_group *g)
{
    if (!wf__array_check(x, "wf_all_gather", "x") || !(g = group_or_world(g)))
        return NULL;
    return wf__array_publish(collective_node(&wf__prim_all_gather, g, 0, &x, 1, NULL));
}

static bool peer_ok(const char *op, const wf_group *g, int peer)
{
    if (peer >= 0 && peer < g->size && peer != g->rank)
        return true;
    wf__error(WF_ERR_INVALID_ARGUMENT,
              "%s: rank %d is not another rank of this group of %d processes (this is rank %d)",
              op, peer, g->size, g->rank);
    return false;
}

wf_array *wf_send(wf_array *x, int dst, wf_group *g)
{
    if (!wf__array_check(x, "wf_send", "x") || !(g = group_or_world(g)) ||
        !peer_ok("wf_send", g, dst))
        return NULL;
    return wf__array_publish(collective_node(&wf__prim_send, g, dst, &x, 1, NULL));
}

static wf_array *recv_node(const char *op, const int64_t *shape, int ndim, wf_dtype dtype,
                           int src, wf_group *g, wf_array *after)
{
    if (wf__check_shape(op, shape, ndim) != WF_OK || !(g = group_or_world(g)) ||
        !peer_ok(op, g, src))
        return NULL;
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
        return NULL;
    }
    wf_collective_params like;
    memset(&like, 0, sizeof like);
    like.dtype = dtype;
    like.ndim = ndim;
    wf__shape_copy(like.shape, shape, ndim);
    return collective_node(&wf__prim_recv, g, src, &after, after ? 1 : 0, &like);
}

wf_array *wf_recv(const int64_t *shape, int ndim, wf_dtype dtype, int src, wf_group *g)
{
    return wf__array_publish(recv_node("wf_recv", shape, ndim, dtype, src, g, NULL));
}

/* x is an input of the node (never read): inside a compiled function the
 * recv then hangs on a traced value and is replayed on every call. */
wf_array *wf_recv_like(wf_array *x, int src, wf_group *g)
{
    if (!wf__array_check(x, "wf_recv_like", "x"))
        return NULL;
    return wf__array_publish(recv_node("wf_recv_like", x->shape, x->ndim, x->dtype, src, g, x));
}
