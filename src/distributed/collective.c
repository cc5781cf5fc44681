/*
 * Collectives on a group's backend (see distributed/group.h).
 *
 * Matching. Before any payload, every rank of the group learns every other
 * rank's header (allgather): the collective's position on the group, its
 * op, dtype, element count and shape. Each rank compares all headers itself, so
 * all of them reach the same verdict: either every rank goes on to the
 * payload or every rank fails with the same message. Arrays of up to about
 * 8 KB travel in that same allgather (one exchange in all). A send and its recv
 * exchange headers the same way (the receiver answers with its own).
 *
 * Determinism. all_sum / all_max / all_min never use a reduction of the
 * backend (MPI_Allreduce may combine in any order): rank r collects block r
 * of every rank's array (alltoallv), combines the blocks in rank order
 * 0, 1, ..., size-1, and the combined blocks are gathered back
 * (allgatherv). Only bytes move through the backend, so every rank gets
 * the same bits, run after run, with the same number of ranks.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "distributed/group.h"

const char *wf__collective_name(int kind)
{
    static const char *names[] = {"all_sum",     "all_max", "all_min", "all_gather",
                                  "sum_scatter", "send",    "recv"};
    return kind >= 0 && kind <= WF_COLLECTIVE_RECV ? names[kind] : "collective";
}

/* ------------------------------------------------------------ headers */

enum { HEADER_MAGIC = 0x77656674, TAG_HEADER = 1, TAG_ANSWER = 2, TAG_PAYLOAD = 3 };

typedef struct header {
    uint32_t magic;
    int32_t kind;
    int32_t dtype;
    int32_t ndim;
    uint64_t position; /* collectives before this one on the group */
    int64_t count;
    uint64_t shape_hash;
    uint32_t input_failed; /* this rank cannot take part: its input failed */
    uint32_t unused;
} header;

static uint64_t shape_hash(const int64_t *shape, int ndim)
{
    uint64_t h = 1469598103934665603u;
    for (int d = 0; d < ndim; d++)
        h = (h ^ (uint64_t)shape[d]) * 1099511628211u;
    return h;
}

static header header_make(int kind, wf_dtype dtype, const int64_t *shape, int ndim,
                          int64_t count, uint64_t position, bool input_failed)
{
    header h;
    memset(&h, 0, sizeof h);
    h.magic = HEADER_MAGIC;
    h.kind = kind;
    h.dtype = (int32_t)dtype;
    h.ndim = ndim;
    h.position = position;
    h.count = count;
    h.shape_hash = shape_hash(shape, ndim);
    h.input_failed = input_failed;
    return h;
}

static bool header_equal(const header *a, const header *b)
{
    return a->magic == b->magic && a->kind == b->kind && a->dtype == b->dtype &&
           a->count == b->count && a->position == b->position && a->ndim == b->ndim &&
           a->shape_hash == b->shape_hash;
}

static void header_describe(const header *h, char *buf, size_t cap)
{
    if (h->magic != HEADER_MAGIC) {
        snprintf(buf, cap, "something that is not a weft collective");
        return;
    }
    const wf_dtype dtype = (wf_dtype)h->dtype;
    snprintf(buf, cap, "%s of %" PRId64 " %s in %d dims (collective #%" PRIu64 ")",
             wf__collective_name(h->kind), h->count,
             wf__dtype_valid(dtype) ? wf_dtype_name(dtype) : "?", (int)h->ndim, h->position);
}

static wf_status mismatch(const wf_group *g, int rank_a, const header *a, int rank_b,
                          const header *b)
{
    char da[128], db[128];
    header_describe(a, da, sizeof da);
    header_describe(b, db, sizeof db);
    return wf__error(WF_ERR_DISTRIBUTED,
                     "distributed: collectives do not match across ranks of a group of %d "
                     "(split %" PRIu64 "): rank %d runs %s, rank %d runs %s; nothing was "
                     "exchanged",
                     g->size, g->split_id, rank_a, da, rank_b, db);
}

static wf_status peer_input_failed(const wf_group *g, int rank, const header *h)
{
    return wf__error(WF_ERR_DISTRIBUTED,
                     "distributed: %s (collective #%" PRIu64 " of a group of %d) failed: the "
                     "input of rank %d failed, so it could not take part",
                     wf__collective_name(h->kind), h->position, g->size, rank);
}

/* The first exchange of every collective: each rank contributes a frame of
 * FRAME_BYTES, its header followed by its payload when that fits (small
 * arrays then need no second exchange: one allgather in all). The frame
 * size is fixed so the ranks' byte counts agree whatever their headers say. */
enum { FRAME_BYTES = 8192 };
static const size_t FRAME_PAYLOAD = FRAME_BYTES - sizeof(header);

/* Every rank learns every header; all fail alike on any difference. On
 * success *frames (n frames, freed by the caller) holds every rank's frame. */
static wf_status agree(wf_group *g, const header *mine, const void *payload, size_t bytes,
                       unsigned char **frames)
{
    unsigned char *all = malloc((size_t)(g->size + 1) * FRAME_BYTES);
    *frames = NULL;
    if (!all)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory");
    unsigned char *own = all + (size_t)g->size * FRAME_BYTES;
    memset(own, 0, FRAME_BYTES);
    memcpy(own, mine, sizeof *mine);
    if (bytes <= FRAME_PAYLOAD && bytes && payload)
        memcpy(own + sizeof *mine, payload, bytes);
    wf_status status = g->backend->allgather(g->comm, own, FRAME_BYTES, all);
    header first, other;
    memcpy(&first, all, sizeof first);
    for (int r = 0; r < g->size && status == WF_OK; r++) {
        memcpy(&other, all + (size_t)r * FRAME_BYTES, sizeof other);
        if (other.input_failed)
            status = peer_input_failed(g, r, &other);
    }
    for (int r = 1; r < g->size && status == WF_OK; r++) {
        memcpy(&other, all + (size_t)r * FRAME_BYTES, sizeof other);
        if (!header_equal(&first, &other))
            status = mismatch(g, 0, &first, r, &other);
    }
    if (status == WF_OK)
        *frames = all;
    else
        free(all);
    return status;
}

static const unsigned char *frame_payload(const unsigned char *frames, int rank)
{
    return frames + (size_t)rank * FRAME_BYTES + sizeof(header);
}

/* ------------------------------------------------------------ combining */

/* dst[i] = dst[i] (op) src[i] for n elements, in the dtype's own arithmetic
 * (integers wrap; float16/bfloat16 round after each step; NaN propagates
 * through max and min; bool: or, or, and). */
#define SUM_LOOP(T)                                                                         \
    static void sum_##T(T *d, const T *s, int64_t n)                                        \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            d[i] = (T)(d[i] + s[i]);                                                        \
    }
#define COMBINE_LOOPS(T)                                                                    \
    static void max_##T(T *d, const T *s, int64_t n)                                        \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            if (s[i] > d[i] || s[i] != s[i])                                                \
                d[i] = (d[i] != d[i]) ? d[i] : s[i];                                        \
    }                                                                                       \
    static void min_##T(T *d, const T *s, int64_t n)                                        \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            if (s[i] < d[i] || s[i] != s[i])                                                \
                d[i] = (d[i] != d[i]) ? d[i] : s[i];                                        \
    }

typedef float f32;
typedef double f64;
COMBINE_LOOPS(int8_t)
COMBINE_LOOPS(int16_t)
COMBINE_LOOPS(int32_t)
COMBINE_LOOPS(int64_t)
COMBINE_LOOPS(uint8_t)
COMBINE_LOOPS(uint16_t)
COMBINE_LOOPS(uint32_t)
COMBINE_LOOPS(uint64_t)
COMBINE_LOOPS(f32)
COMBINE_LOOPS(f64)
SUM_LOOP(uint8_t)
SUM_LOOP(uint16_t)
SUM_LOOP(uint32_t)
SUM_LOOP(uint64_t)
SUM_LOOP(f32)
SUM_LOOP(f64)
#undef COMBINE_LOOPS
#undef SUM_LOOP

/* Signed sums wrap: add as unsigned. */
#define WRAPPING_SUM(T, U)                                                                  \
    static void wrap_sum_##T(T *d, const T *s, int64_t n)                                   \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            d[i] = (T)(U)((U)d[i] + (U)s[i]);                                               \
    }
WRAPPING_SUM(int8_t, uint8_t)
WRAPPING_SUM(int16_t, uint16_t)
WRAPPING_SUM(int32_t, uint32_t)
WRAPPING_SUM(int64_t, uint64_t)
#undef WRAPPING_SUM

static void combine_half(int kind, bool brain, uint16_t *d, const uint16_t *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float a = brain ? wf__bf16_to_f32(d[i]) : wf__f16_to_f32(d[i]);
        const float b = brain ? wf__bf16_to_f32(s[i]) : wf__f16_to_f32(s[i]);
        if (kind == WF_COLLECTIVE_ALL_SUM || kind == WF_COLLECTIVE_SUM_SCATTER) {
            d[i] = brain ? wf__f32_to_bf16(a + b) : wf__f32_to_f16(a + b);
        } else if (a == a && (b != b || (kind == WF_COLLECTIVE_ALL_MAX ? b > a : b < a))) {
            d[i] = s[i];
        }
    }
}

static void combine_bool(int kind, uint8_t *d, const uint8_t *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = kind == WF_COLLECTIVE_ALL_MIN ? (d[i] && s[i]) : (d[i] || s[i]);
}

#define PICK(T, WRAP)                                                                       \
    (kind == WF_COLLECTIVE_ALL_MAX   ? max_##T((T *)d, (const T *)s, n)                     \
     : kind == WF_COLLECTIVE_ALL_MIN ? min_##T((T *)d, (const T *)s, n)                     \
                                     : WRAP##T((T *)d, (const T *)s, n))

static void combine(int kind, wf_dtype dtype, void *d, const void *s, int64_t n)
{
    switch (dtype) {
    case WF_DTYPE_BOOL: combine_bool(kind, d, s, n); break;
    case WF_DTYPE_I8: PICK(int8_t, wrap_sum_); break;
    case WF_DTYPE_I16: PICK(int16_t, wrap_sum_); break;
    case WF_DTYPE_I32: PICK(int32_t, wrap_sum_); break;
    case WF_DTYPE_I64: PICK(int64_t, wrap_sum_); break;
    case WF_DTYPE_U8: PICK(uint8_t, sum_); break;
    case WF_DTYPE_U16: PICK(uint16_t, sum_); break;
    case WF_DTYPE_U32: PICK(uint32_t, sum_); break;
    case WF_DTYPE_U64: PICK(uint64_t, sum_); break;
    case WF_DTYPE_F16: combine_half(kind, false, d, s, n); break;
    case WF_DTYPE_BF16: combine_half(kind, true, d, s, n); break;
    case WF_DTYPE_F32: PICK(f32, sum_); break;
    case WF_DTYPE_F64: PICK(f64, sum_); break;
    case WF_DTYPE_C64: sum_f32(d, s, 2 * n); break; /* sum only (checked by the op) */
    default: break;
    }
}
#undef PICK

/* ------------------------------------------------------------ collectives */

/* Block j of `count` elements over `size` ranks: [lo(j), lo(j + 1)). */
static int64_t block_start(int64_t count, int size, int j)
{
    return count / size * j + count % size * j / size;
}

struct plan {
    size_t *send_counts, *send_displs, *recv_counts, *recv_displs;
};

static bool plan_make(struct plan *p, int size)
{
    size_t *all = calloc(4 * (size_t)size, sizeof *all);
    p->send_counts = all;
    p->send_displs = all ? all + size : NULL;
    p->recv_counts = all ? all + 2 * size : NULL;
    p->recv_displs = all ? all + 3 * size : NULL;
    return all != NULL;
}

/* Rank order over the arrays that came with the headers (small arrays). */
static void reduce_frames(int kind, wf_dtype dtype, const unsigned char *frames, int n,
                          size_t skip, void *out, int64_t len)
{
    const size_t es = wf_dtype_size(dtype);
    memcpy(out, frame_payload(frames, 0) + skip * es, (size_t)len * es);
    for (int j = 1; j < n; j++)
        combine(kind, dtype, out, frame_payload(frames, j) + skip * es, len);
}

wf_status wf__collective_reduce(wf_group *g, int kind, wf_dtype dtype, const int64_t *shape,
                                int ndim, const void *in, void *out, int64_t count)
{
    const size_t es = wf_dtype_size(dtype);
    const size_t bytes = (size_t)count * es;
    const int n = g->size, me = g->rank;
    const bool scatter = kind == WF_COLLECTIVE_SUM_SCATTER;
    const int64_t my_lo = block_start(count, n, me);
    const int64_t mine_count = block_start(count, n, me + 1) - my_lo;
    /* Memory first, before the headers: a rank that cannot get it says so in
     * its header rather than leaving the others waiting in the exchange. The
     * blocks come from weft's buffer cache, so a repeated collective reuses
     * pages instead of faulting fresh ones in. */
    struct plan p = {0};
    wf_buffer *scratch = NULL;
    wf_status status = WF_OK;
    if (in && bytes > FRAME_PAYLOAD) {
        scratch = wf__buffer_alloc((size_t)n * (size_t)mine_count * es);
        if (!scratch || !plan_make(&p, n)) {
            status = wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory for %s",
                               wf__collective_name(kind));
            in = NULL;
        }
    }
    const header mine = header_make(kind, dtype, shape, ndim, count, g->collectives++, !in);
    unsigned char *frames;
    const wf_status agreed = agree(g, &mine, in, bytes, &frames);
    if (status == WF_OK)
        status = agreed;
    if (status == WF_OK && count && bytes <= FRAME_PAYLOAD) /* arrays came with the headers */
        reduce_frames(kind, dtype, frames, n, scatter ? (size_t)my_lo : 0, out,
                      scatter ? mine_count : count);
    free(frames);
    if (status == WF_OK && count && bytes > FRAME_PAYLOAD) {
        char *blocks = scratch->data;
        for (int j = 0; j < n; j++) {
            const int64_t lo = block_start(count, n, j), hi = block_start(count, n, j + 1);
            p.send_counts[j] = (size_t)(hi - lo) * es;
            p.send_displs[j] = (size_t)lo * es;
            p.recv_counts[j] = (size_t)mine_count * es;
            p.recv_displs[j] = (size_t)j * (size_t)mine_count * es;
        }
        status = g->backend->alltoallv(g->comm, in, p.send_counts, p.send_displs, blocks,
                                       p.recv_counts, p.recv_displs);
        if (status == WF_OK) {
            char *dst = scatter ? out : (char *)out + (size_t)my_lo * es;
            memcpy(dst, blocks, (size_t)mine_count * es);
            for (int j = 1; j < n; j++) /* rank order: the same bits on every rank */
                combine(kind, dtype, dst, blocks + p.recv_displs[j], mine_count);
            if (!scatter) /* block j of the result lies where rank j's block was sent from */
                status = g->backend->allgatherv_in_place(g->comm, out, p.send_counts,
                                                         p.send_displs);
        }
    }
    free(p.send_counts);
    if (scratch)
        wf__buffer_release(scratch);
    return status;
}

wf_status wf__collective_gather(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                                const void *in, void *out, int64_t count)
{
    const header mine = header_make(WF_COLLECTIVE_ALL_GATHER, dtype, shape, ndim, count,
                                    g->collectives++, !in);
    const size_t bytes = (size_t)count * wf_dtype_size(dtype);
    unsigned char *frames;
    wf_status status = agree(g, &mine, in, bytes, &frames);
    if (status == WF_OK && count && bytes <= FRAME_PAYLOAD) {
        for (int r = 0; r < g->size; r++)
            memcpy((char *)out + (size_t)r * bytes, frame_payload(frames, r), bytes);
    } else if (status == WF_OK && count) {
        status = g->backend->allgather(g->comm, in, bytes, out);
    }
    free(frames);
    return status;
}

static wf_status check_peer(const wf_group *g, const char *op, int peer)
{
    if (peer < 0 || peer >= g->size || peer == g->rank)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: rank %d is not another rank of this group of %d (this is %d)", op,
                         peer, g->size, g->rank);
    return WF_OK;
}

/* The sender sends its header; the receiver answers with its own; each
 * compares the two. Positions are not compared: point-to-point messages
 * are matched per pair of ranks by MPI's own ordering. */
wf_status wf__collective_send(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                              const void *data, int64_t count, int peer)
{
    wf_status status = check_peer(g, "send", peer);
    if (status != WF_OK)
        return status;
    const header mine = header_make(WF_COLLECTIVE_SEND, dtype, shape, ndim, count, 0, !data);
    header answer;
    status = g->backend->send(g->comm, &mine, sizeof mine, peer, TAG_HEADER);
    if (status == WF_OK)
        status = g->backend->recv(g->comm, &answer, sizeof answer, peer, TAG_ANSWER);
    if (status != WF_OK)
        return status;
    if (mine.input_failed || answer.input_failed)
        return peer_input_failed(g, mine.input_failed ? g->rank : peer,
                                 mine.input_failed ? &mine : &answer);
    if (!header_equal(&mine, &answer))
        return mismatch(g, g->rank, &mine, peer, &answer);
    return count ? g->backend->send(g->comm, data, (size_t)count * wf_dtype_size(dtype), peer,
                                    TAG_PAYLOAD)
                 : WF_OK;
}

wf_status wf__collective_recv(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                              void *data, int64_t count, int peer)
{
    wf_status status = check_peer(g, "recv", peer);
    if (status != WF_OK)
        return status;
    /* What this side expects, written as the send it must match. */
    const header mine = header_make(WF_COLLECTIVE_SEND, dtype, shape, ndim, count, 0, !data);
    header theirs;
    status = g->backend->recv(g->comm, &theirs, sizeof theirs, peer, TAG_HEADER);
    if (status == WF_OK)
        status = g->backend->send(g->comm, &mine, sizeof mine, peer, TAG_ANSWER);
    if (status != WF_OK)
        return status;
    if (mine.input_failed || theirs.input_failed)
        return peer_input_failed(g, mine.input_failed ? g->rank : peer,
                                 mine.input_failed ? &mine : &theirs);
    if (!header_equal(&mine, &theirs))
        return mismatch(g, peer, &theirs, g->rank, &mine);
    return count ? g->backend->recv(g->comm, data, (size_t)count * wf_dtype_size(dtype), peer,
                                    TAG_PAYLOAD)
                 : WF_OK;
}
