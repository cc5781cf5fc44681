/*
 * Collectives on a group's backend (see distributed/group.h).
 *
 * Matching. Before any payload, every rank of the group learns every other
 * rank's header (one message from each rank to each other): the
 * collective's position on the group, its op, dtype, element count and
 * shape. Each rank compares all headers itself, so all of them reach the
 * same verdict: either every rank goes on to the payload or every rank
 * fails with the same message. Small arrays (up to 3952 bytes), or each
 * rank's block of a reduction when every block is that small, travel with
 * the headers (see agree). A send and its recv exchange headers the same
 * way (the receiver answers with its own).
 *
 * Determinism. all_sum / all_max / all_min never use a reduction of the
 * backend (MPI_Allreduce may combine in any order): rank r receives block r
 * of every rank's array, combines the blocks in rank order 0, 1, ...,
 * size-1, and sends the combined block to every rank. Only bytes move
 * through the backend, so every rank gets the same bits, run after run,
 * with the same number of ranks (and whatever the message size).
 *
 * Pipelining and size. Blocks travel as pieces of 256 KB up to an eighth of
 * a block (and never more than the backend's max_message, which keeps every
 * MPI count within int), all received with nonblocking messages posted before
 * any is sent: a rank combines piece k as soon as it arrived from every
 * rank, while the later pieces are still moving, and sends it on at once.
 * WEFT_DISTRIBUTED_MAX_MESSAGE (bytes) lowers the limit, so tests take the
 * many-piece paths with small arrays.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "distributed/group.h"
#include "util/fault.h"

const char *wf__collective_name(int kind)
{
    static const char *names[] = {"all_sum",     "all_max", "all_min", "all_gather",
                                  "sum_scatter", "send",    "recv"};
    return kind >= 0 && kind <= WF_COLLECTIVE_RECV ? names[kind] : "collective";
}

/* ------------------------------------------------------------ headers */

enum {
    HEADER_MAGIC = 0x77656674,
    TAG_HEADER = 1,
    TAG_ANSWER = 2,
    TAG_PAYLOAD = 3,
    TAG_BLOCK = 4,    /* a piece of a block, to the rank that combines it */
    TAG_COMBINED = 5, /* a combined piece, to every rank */
    TAG_GATHER = 6,
    TAG_FRAME = 7 /* a header and what it carries (see agree) */
};

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

/* Block j of `count` elements over `size` ranks: [lo(j), lo(j + 1)). */
static int64_t block_start(int64_t count, int size, int j)
{
    return count / size * j + count % size * j / size;
}

/* The first exchange of every collective: each rank sends every other rank
 * one frame, its header followed by what that rank needs first of its array
 * when that fits (carry): the whole array (all_gather, and reductions of
 * arrays that small: one exchange in all), or the receiver's block of it (a
 * reduction whose blocks fit: the combined blocks are the second and last
 * exchange). A rank decides what to carry from its own header, so ranks
 * whose headers differ may carry differently; but each sends exactly one
 * frame to each other rank and receives one from each (up to FRAME_BYTES),
 * so a mismatch leaves nothing in flight. Frames stay under Open MPI's
 * eager limit for shared memory (4 KB, its own header included): a larger
 * message goes by rendezvous, a handshake more. Measured on 2 local ranks,
 * an allgather of 4000-byte frames took 2.3 us, of 8 KB ones 4.1 us, of
 * 64-byte ones 1.0 us (4 ranks: 8, 15 and 2.2 us); frames sent one to each
 * rank are never forwarded (an allgather's steps may be), and a frame that
 * carries nothing is a header alone. */
enum { FRAME_BYTES = 4000 };
static const size_t FRAME_PAYLOAD = FRAME_BYTES - sizeof(header);

typedef enum { CARRY_NOTHING, CARRY_WHOLE, CARRY_BLOCKS } carry;

/* What a rank carries in its frames for a collective of `count` elements. */
static carry carry_for(int kind, size_t es, int64_t count, int size)
{
    if ((size_t)count * es <= FRAME_PAYLOAD)
        return CARRY_WHOLE;
    const bool reduction = kind != WF_COLLECTIVE_ALL_GATHER;
    const size_t largest_block = (size_t)((count + size - 1) / size) * es;
    return reduction && largest_block <= FRAME_PAYLOAD ? CARRY_BLOCKS : CARRY_NOTHING;
}

/* The bytes of `in` that go to rank j with the header. */
static size_t carried(carry what, const char *in, size_t es, int64_t count, int size, int j,
                      const char **from)
{
    const int64_t lo = what == CARRY_BLOCKS ? block_start(count, size, j) : 0;
    const int64_t hi = what == CARRY_BLOCKS ? block_start(count, size, j + 1) : count;
    *from = in ? in + (size_t)lo * es : NULL;
    return in && what != CARRY_NOTHING ? (size_t)(hi - lo) * es : 0;
}

/* Every rank learns every header; all fail alike on any difference. On
 * success *frames (size frames, freed by the caller) holds every other
 * rank's frame (this rank's slot holds its own header). */
static wf_status agree(wf_group *g, const header *mine, const char *in, size_t es, carry what,
                       unsigned char **frames)
{
    const int n = g->size, me = g->rank;
    const int64_t count = mine->count;
    const size_t outgoing = what == CARRY_BLOCKS ? (size_t)n : 1;
    unsigned char *all = wf__calloc((size_t)n + outgoing, FRAME_BYTES);
    wf_comm_message *m = wf__calloc(2 * (size_t)n, sizeof *m);
    *frames = NULL;
    if (!all || !m) {
        free(all);
        free(m);
        return wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory");
    }
    memcpy(all + (size_t)me * FRAME_BYTES, mine, sizeof *mine);
    size_t used = 0;
    for (int j = 0; j < n; j++)
        if (j != me)
            m[used++] = (wf_comm_message){.data = all + (size_t)j * FRAME_BYTES,
                                          .bytes = FRAME_BYTES,
                                          .peer = j,
                                          .tag = TAG_FRAME,
                                          .receive = true};
    for (int j = 0; j < n; j++) {
        unsigned char *frame = all + (size_t)(n + (what == CARRY_BLOCKS ? j : 0)) * FRAME_BYTES;
        if (j == me)
            continue;
        const char *from;
        const size_t bytes = carried(what, in, es, count, n, j, &from);
        memcpy(frame, mine, sizeof *mine);
        if (bytes)
            memcpy(frame + sizeof *mine, from, bytes);
        m[used++] = (wf_comm_message){
            .data = frame, .bytes = sizeof *mine + bytes, .peer = j, .tag = TAG_FRAME};
    }
    wf_status status = g->backend->post(g->comm, m, used);
    if (status == WF_OK)
        status = g->backend->wait(g->comm, m, used);
    free(m);
    if (status != WF_OK) /* a peer gone (the job is ending): receives may still be posted */
        return status;
    header first, other;
    memcpy(&first, all, sizeof first);
    for (int r = 0; r < n && status == WF_OK; r++) {
        memcpy(&other, all + (size_t)r * FRAME_BYTES, sizeof other);
        if (other.input_failed)
            status = peer_input_failed(g, r, &other);
    }
    for (int r = 1; r < n && status == WF_OK; r++) {
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

/* What rank `rank` carried in its frame to this rank (not this rank's own). */
static const unsigned char *frame_payload(const unsigned char *frames, int rank)
{
    return frames + (size_t)rank * FRAME_BYTES + sizeof(header);
}

/* ------------------------------------------------------------ combining */

/* d[i] = a[i] (op) s[i] for n elements, in the dtype's own arithmetic
 * (integers wrap; float16/bfloat16 round after each step; NaN propagates
 * through max and min; bool: or, or, and). Each loop comes twice: in place
 * (a is d) and from two other arrays (the first step of a combination,
 * which so needs no copy of rank 0's piece first); restrict lets GCC
 * vectorize both. */
#define LOOP_PAIR(NAME, T, EXPR)                                                            \
    static void NAME##_##T(T *restrict d, const T *restrict s, int64_t n)                   \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T x = d[i], y = s[i];                                                     \
            d[i] = (EXPR);                                                                  \
        }                                                                                   \
    }                                                                                       \
    static void NAME##_##T##_from(T *restrict d, const T *restrict a, const T *restrict s,  \
                                  int64_t n)                                                \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T x = a[i], y = s[i];                                                     \
            d[i] = (EXPR);                                                                  \
        }                                                                                   \
    }
/* max / min: y wins when it is beyond x or NaN, unless x is NaN already. */
#define COMBINE_LOOPS(T)                                                                    \
    LOOP_PAIR(max, T, (y > x || y != y) && x == x ? y : x)                                  \
    LOOP_PAIR(min, T, (y < x || y != y) && x == x ? y : x)

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
LOOP_PAIR(sum, uint8_t, (uint8_t)(x + y))
LOOP_PAIR(sum, uint16_t, (uint16_t)(x + y))
LOOP_PAIR(sum, uint32_t, x + y)
LOOP_PAIR(sum, uint64_t, x + y)
LOOP_PAIR(sum, f32, x + y)
LOOP_PAIR(sum, f64, x + y)
/* Signed sums wrap: add as unsigned. */
LOOP_PAIR(wrap_sum, int8_t, (int8_t)(uint8_t)((uint8_t)x + (uint8_t)y))
LOOP_PAIR(wrap_sum, int16_t, (int16_t)(uint16_t)((uint16_t)x + (uint16_t)y))
LOOP_PAIR(wrap_sum, int32_t, (int32_t)((uint32_t)x + (uint32_t)y))
LOOP_PAIR(wrap_sum, int64_t, (int64_t)((uint64_t)x + (uint64_t)y))
#undef COMBINE_LOOPS
#undef LOOP_PAIR

/* a may be d (these are not vectorized anyway). */
static void combine_half(int kind, bool brain, uint16_t *d, const uint16_t *a,
                         const uint16_t *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const uint16_t x = a[i];
        const float fa = brain ? wf__bf16_to_f32(x) : wf__f16_to_f32(x);
        const float fb = brain ? wf__bf16_to_f32(s[i]) : wf__f16_to_f32(s[i]);
        if (kind == WF_COLLECTIVE_ALL_SUM || kind == WF_COLLECTIVE_SUM_SCATTER) {
            d[i] = brain ? wf__f32_to_bf16(fa + fb) : wf__f32_to_f16(fa + fb);
        } else {
            const bool take = fa == fa && (fb != fb || (kind == WF_COLLECTIVE_ALL_MAX ? fb > fa
                                                                                     : fb < fa));
            d[i] = take ? s[i] : x;
        }
    }
}

static void combine_bool(int kind, uint8_t *d, const uint8_t *a, const uint8_t *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = kind == WF_COLLECTIVE_ALL_MIN ? (a[i] && s[i]) : (a[i] || s[i]);
}

/* In place when a is d, else from a. */
#define CALL(FN, T)                                                                         \
    (a == d ? FN##_##T((T *)d, (const T *)s, n)                                             \
            : FN##_##T##_from((T *)d, (const T *)a, (const T *)s, n))
#define PICK(T, SUM)                                                                        \
    (kind == WF_COLLECTIVE_ALL_MAX   ? CALL(max, T)                                         \
     : kind == WF_COLLECTIVE_ALL_MIN ? CALL(min, T)                                         \
                                     : CALL(SUM, T))

/* d = a (op) s, element by element; a is d or does not overlap it. */
static void combine(int kind, wf_dtype dtype, void *d, const void *a, const void *s, int64_t n)
{
    switch (dtype) {
    case WF_DTYPE_BOOL: combine_bool(kind, d, a, s, n); break;
    case WF_DTYPE_I8: PICK(int8_t, wrap_sum); break;
    case WF_DTYPE_I16: PICK(int16_t, wrap_sum); break;
    case WF_DTYPE_I32: PICK(int32_t, wrap_sum); break;
    case WF_DTYPE_I64: PICK(int64_t, wrap_sum); break;
    case WF_DTYPE_U8: PICK(uint8_t, sum); break;
    case WF_DTYPE_U16: PICK(uint16_t, sum); break;
    case WF_DTYPE_U32: PICK(uint32_t, sum); break;
    case WF_DTYPE_U64: PICK(uint64_t, sum); break;
    case WF_DTYPE_F16: combine_half(kind, false, d, a, s, n); break;
    case WF_DTYPE_BF16: combine_half(kind, true, d, a, s, n); break;
    case WF_DTYPE_F32: PICK(f32, sum); break;
    case WF_DTYPE_F64: PICK(f64, sum); break;
    case WF_DTYPE_C64: n *= 2; CALL(sum, f32); break; /* sum only (checked by the op) */
    default: break;
    }
}
#undef PICK
#undef CALL


/* ------------------------------------------------------------ collectives */

/* ------------------------------------------------------------ pieces */

/* The largest message in bytes: the backend's, or less when
 * WEFT_DISTRIBUTED_MAX_MESSAGE says so (read once). */
static size_t configured_limit;
static pthread_once_t limit_once = PTHREAD_ONCE_INIT;

static void read_limit(void)
{
    const char *text = getenv("WEFT_DISTRIBUTED_MAX_MESSAGE");
    char *end = NULL;
    const unsigned long long v = text ? strtoull(text, &end, 10) : 0;
    configured_limit = text && end != text && *end == '\0' && v > 0 ? (size_t)v : SIZE_MAX;
}

/* At most this many bytes per message, a multiple of `es` (at least one element). */
static size_t message_limit(const wf_group *g, size_t es)
{
    pthread_once(&limit_once, read_limit);
    size_t limit = g->backend->max_message;
    if (configured_limit < limit)
        limit = configured_limit;
    limit -= limit % es;
    return limit ? limit : es;
}

/* Pipelining: a block is cut into about PIECES_PER_BLOCK pieces of at least
 * PIECE_MIN_BYTES (fewer messages for small blocks). Each piece is a
 * rendezvous message for MPI (a handshake, its first 32 KB copied through
 * shared memory twice, the rest once): with 64 KB pieces, all_sums of 1 and
 * 2 MB on 2 ranks took about 5% longer, the handshakes outweighing the
 * overlap of combining with moving. */
enum { PIECES_PER_BLOCK = 8, PIECE_MIN_BYTES = 256 << 10 };

/* How blocks are cut: every rank derives the same cut from count alone, so
 * its sends and the receives posted for them pair up. */
typedef struct cut {
    int64_t count, piece; /* elements per piece (the last of a block shorter) */
    int n;
    size_t es;
} cut;

static cut cut_make(const wf_group *g, size_t es, int64_t count)
{
    cut c = {.count = count, .n = g->size, .es = es};
    const int64_t most = (int64_t)(message_limit(g, es) / es);
    const int64_t least = PIECE_MIN_BYTES / (int64_t)es;
    int64_t piece = (count / c.n + PIECES_PER_BLOCK - 1) / PIECES_PER_BLOCK;
    piece = piece < least ? least : piece;
    c.piece = piece < most ? piece : most;
    return c;
}

static int64_t block_lo(const cut *c, int j) { return block_start(c->count, c->n, j); }
static int64_t block_len(const cut *c, int j) { return block_lo(c, j + 1) - block_lo(c, j); }
static int64_t pieces_of(const cut *c, int j)
{
    return (block_len(c, j) + c->piece - 1) / c->piece;
}
/* Elements in piece k of block j. */
static int64_t piece_len(const cut *c, int j, int64_t k)
{
    const int64_t left = block_len(c, j) - k * c->piece;
    return left < c->piece ? left : c->piece;
}

static wf_comm_message message(const void *data, int64_t elements, size_t es, int peer,
                               int tag, bool receive)
{
    return (wf_comm_message){.data = (void *)data,
                             .bytes = (size_t)elements * es,
                             .peer = peer,
                             .tag = tag,
                             .receive = receive};
}

/* ------------------------------------------------------------ reductions */

/* The messages of one reduction, in four runs: pieces of this rank's block
 * from each other rank (piece-major, so piece k's are adjacent), pieces of
 * the other blocks to their ranks, combined pieces from each other rank,
 * this rank's combined pieces to each other rank (piece-major). */
typedef struct reduction {
    cut c;
    int me;
    bool scatter;
    wf_comm_message *all;
    size_t n_in, n_out, n_back; /* lengths of the first three runs (the fourth is n_in) */
} reduction;

static bool reduction_make(reduction *r, const wf_group *g, int kind, size_t es, int64_t count)
{
    r->c = cut_make(g, es, count);
    r->me = g->rank;
    r->scatter = kind == WF_COLLECTIVE_SUM_SCATTER;
    r->n_in = (size_t)(g->size - 1) * (size_t)pieces_of(&r->c, r->me);
    r->n_out = 0;
    for (int j = 0; j < g->size; j++)
        r->n_out += j == r->me ? 0 : (size_t)pieces_of(&r->c, j);
    r->n_back = r->scatter ? 0 : r->n_out;
    const size_t total = r->n_in + r->n_out + r->n_back + (r->scatter ? 0 : r->n_in);
    r->all = wf__calloc(total ? total : 1, sizeof *r->all);
    return r->all != NULL;
}

/* Rank j's piece k of this rank's block: `in` itself for this rank, else
 * its slot of `scratch` ((size - 1) blocks of this rank's length). */
static const char *piece_from(const reduction *r, int j, int64_t k, const char *in,
                              const char *scratch)
{
    const size_t es = r->c.es;
    if (j == r->me)
        return in + (size_t)(block_lo(&r->c, r->me) + k * r->c.piece) * es;
    const size_t slot = (size_t)(j < r->me ? j : j - 1);
    const size_t at = slot * (size_t)block_len(&r->c, r->me) + (size_t)(k * r->c.piece);
    return scratch + at * es;
}

/* Fills the four runs (see reduction). `dst` is where this rank's combined
 * block goes. */
static void reduction_fill(reduction *r, const char *in, char *out, char *dst,
                           const char *scratch)
{
    const cut *c = &r->c;
    const size_t es = c->es;
    wf_comm_message *m = r->all;
    for (int64_t k = 0; k < pieces_of(c, r->me); k++)
        for (int j = 0; j < c->n; j++)
            if (j != r->me)
                *m++ = message(piece_from(r, j, k, in, scratch), piece_len(c, r->me, k), es,
                               j, TAG_BLOCK, true);
    for (int j = 0; j < c->n; j++)
        for (int64_t k = 0; j != r->me && k < pieces_of(c, j); k++)
            *m++ = message(in + (size_t)(block_lo(c, j) + k * c->piece) * es,
                           piece_len(c, j, k), es, j, TAG_BLOCK, false);
    for (int j = 0; j < c->n && !r->scatter; j++)
        for (int64_t k = 0; j != r->me && k < pieces_of(c, j); k++)
            *m++ = message(out + (size_t)(block_lo(c, j) + k * c->piece) * es,
                           piece_len(c, j, k), es, j, TAG_COMBINED, true);
    for (int64_t k = 0; k < pieces_of(c, r->me) && !r->scatter; k++)
        for (int j = 0; j < c->n; j++)
            if (j != r->me)
                *m++ = message(dst + (size_t)(k * c->piece) * es, piece_len(c, r->me, k), es,
                               j, TAG_COMBINED, false);
}

/* Every receive is posted before any send; piece k is combined (rank
 * order: rank 0's and rank 1's into dst, then the others in place) once
 * every rank's piece k is in, and sent on while later pieces still move. */
static wf_status reduction_run(reduction *r, const wf_group *g, int kind, wf_dtype dtype,
                               const char *in, char *dst, const char *scratch)
{
    const wf_comm_backend *b = g->backend;
    const size_t others = (size_t)g->size - 1;
    wf_comm_message *from = r->all, *to = from + r->n_in, *back = to + r->n_out,
                    *spread = back + r->n_back;
    wf_status status = b->post(g->comm, from, r->n_in);
    if (status == WF_OK)
        status = b->post(g->comm, back, r->n_back);
    if (status == WF_OK)
        status = b->post(g->comm, to, r->n_out);
    for (int64_t k = 0; status == WF_OK && k < pieces_of(&r->c, r->me); k++) {
        status = b->wait(g->comm, from + (size_t)k * others, others);
        if (status != WF_OK)
            break;
        const int64_t len = piece_len(&r->c, r->me, k);
        char *d = dst + (size_t)(k * r->c.piece) * r->c.es;
        const char *first = piece_from(r, 0, k, in, scratch);
        if (g->size == 1)
            memcpy(d, first, (size_t)len * r->c.es);
        for (int j = 1; j < g->size; j++)
            combine(kind, dtype, d, j == 1 ? first : d, piece_from(r, j, k, in, scratch), len);
        if (!r->scatter)
            status = b->post(g->comm, spread + (size_t)k * others, others);
    }
    if (status == WF_OK)
        status = b->wait(g->comm, to, r->n_out);
    if (status == WF_OK)
        status = b->wait(g->comm, back, r->n_back);
    if (status == WF_OK && !r->scatter)
        status = b->wait(g->comm, spread, r->n_in);
    return status;
}

/* Rank j's elements [lo, lo + len) of the array: this rank's own from `in`,
 * the others' from their frames, which start at element `carried_lo`. */
static const char *frame_part(const unsigned char *frames, const char *in, int me, int j,
                              size_t es, int64_t lo, int64_t carried_lo)
{
    return j == me ? in + (size_t)lo * es
                   : (const char *)frame_payload(frames, j) + (size_t)(lo - carried_lo) * es;
}

/* out = every rank's elements [lo, lo + len), combined in rank order, from
 * what came with the headers (carried_lo: where the frames start). */
static void reduce_frames(int kind, wf_dtype dtype, const wf_group *g, const unsigned char *frames,
                          const char *in, int64_t lo, int64_t carried_lo, void *out, int64_t len)
{
    const size_t es = wf_dtype_size(dtype);
    const int me = g->rank;
    const char *first = frame_part(frames, in, me, 0, es, lo, carried_lo);
    if (g->size == 1)
        memcpy(out, first, (size_t)len * es);
    for (int j = 1; j < g->size; j++)
        combine(kind, dtype, out, j == 1 ? first : out,
                frame_part(frames, in, me, j, es, lo, carried_lo), len);
}

/* The second exchange of a reduction whose blocks came with the headers:
 * this rank's combined block to every other rank, theirs into out. */
static wf_status spread_blocks(wf_group *g, size_t es, int64_t count, char *out)
{
    const int n = g->size, me = g->rank;
    wf_comm_message *m = wf__calloc(2 * (size_t)n, sizeof *m);
    if (!m)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory");
    const int64_t my_lo = block_start(count, n, me), my_len = block_start(count, n, me + 1) - my_lo;
    size_t used = 0;
    for (int j = 0; j < n; j++) {
        const int64_t lo = block_start(count, n, j);
        if (j != me)
            m[used++] = message(out + (size_t)lo * es, block_start(count, n, j + 1) - lo, es, j,
                                TAG_COMBINED, true);
    }
    for (int j = 0; j < n; j++)
        if (j != me)
            m[used++] = message(out + (size_t)my_lo * es, my_len, es, j, TAG_COMBINED, false);
    wf_status status = g->backend->post(g->comm, m, used);
    if (status == WF_OK)
        status = g->backend->wait(g->comm, m, used);
    free(m);
    return status;
}

wf_status wf__collective_reduce(wf_group *g, int kind, wf_dtype dtype, const int64_t *shape,
                                int ndim, const void *in, void *out, int64_t count)
{
    const size_t es = wf_dtype_size(dtype);
    const int n = g->size, me = g->rank;
    const bool scatter = kind == WF_COLLECTIVE_SUM_SCATTER;
    const int64_t my_lo = block_start(count, n, me);
    const int64_t mine_count = block_start(count, n, me + 1) - my_lo;
    const carry what = carry_for(kind, es, count, n);
    /* Memory first, before the headers: a rank that cannot get it says so in
     * its header rather than leaving the others waiting in the exchange. The
     * blocks come from weft's buffer cache, so a repeated collective reuses
     * pages instead of faulting fresh ones in. */
    reduction r = {0};
    wf_buffer *scratch = NULL;
    wf_status status = WF_OK;
    if (in && what == CARRY_NOTHING) {
        const size_t scratch_bytes = (size_t)(n - 1) * (size_t)mine_count * es;
        scratch = scratch_bytes ? wf__buffer_alloc(scratch_bytes) : NULL;
        if ((scratch_bytes && !scratch) || !reduction_make(&r, g, kind, es, count)) {
            status = wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory for %s",
                               wf__collective_name(kind));
            in = NULL;
        }
    }
    const header mine = header_make(kind, dtype, shape, ndim, count, g->collectives++, !in);
    unsigned char *frames;
    const wf_status agreed = agree(g, &mine, in, es, what, &frames);
    if (status == WF_OK)
        status = agreed;
    char *dst = scatter ? out : (char *)out + (size_t)my_lo * es;
    if (status == WF_OK && count && what != CARRY_NOTHING) { /* arrays came with the headers */
        if (what == CARRY_WHOLE && !scatter)
            reduce_frames(kind, dtype, g, frames, in, 0, 0, out, count);
        else /* this rank's block (whole arrays: from where it starts) */
            reduce_frames(kind, dtype, g, frames, in, my_lo, what == CARRY_WHOLE ? 0 : my_lo,
                          dst, mine_count);
        if (what == CARRY_BLOCKS && !scatter)
            status = spread_blocks(g, es, count, out);
    }
    free(frames);
    if (status == WF_OK && count && what == CARRY_NOTHING) {
        const char *blocks = scratch ? scratch->data : NULL;
        reduction_fill(&r, in, out, dst, blocks);
        status = reduction_run(&r, g, kind, dtype, in, dst, blocks);
        /* A failed exchange (a peer gone: the job is ending) may leave
         * receives posted into the scratch: it is never reused. */
        if (status != WF_OK)
            scratch = NULL;
    }
    free(r.all);
    if (scratch)
        wf__buffer_release(scratch);
    return status;
}

/* ------------------------------------------------------------ gathers */

/* Each other rank's `bytes` into its place in out, in messages of at most
 * the limit; this rank's own copied. */
static wf_status gather_pieces(wf_group *g, const char *in, char *out, size_t bytes)
{
    const size_t limit = message_limit(g, 1);
    const size_t pieces = (bytes + limit - 1) / limit, others = (size_t)g->size - 1;
    wf_comm_message *m = wf__calloc(2 * pieces * others + 1, sizeof *m);
    if (!m)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "distributed: out of memory for all_gather");
    size_t used = 0;
    for (int pass = 0; pass < 2; pass++) /* receives, then sends */
        for (int j = 0; j < g->size; j++)
            for (size_t at = 0; j != g->rank && at < bytes; at += limit)
                m[used++] = message(pass ? in + at : out + (size_t)j * bytes + at,
                                    (int64_t)(bytes - at < limit ? bytes - at : limit), 1, j,
                                    TAG_GATHER, pass == 0);
    memcpy(out + (size_t)g->rank * bytes, in, bytes);
    wf_status status = g->backend->post(g->comm, m, used);
    if (status == WF_OK)
        status = g->backend->wait(g->comm, m, used);
    free(m);
    return status;
}

wf_status wf__collective_gather(wf_group *g, wf_dtype dtype, const int64_t *shape, int ndim,
                                const void *in, void *out, int64_t count)
{
    const header mine = header_make(WF_COLLECTIVE_ALL_GATHER, dtype, shape, ndim, count,
                                    g->collectives++, !in);
    const size_t es = wf_dtype_size(dtype), bytes = (size_t)count * es;
    const carry what = carry_for(WF_COLLECTIVE_ALL_GATHER, es, count, g->size);
    unsigned char *frames;
    wf_status status = agree(g, &mine, in, es, what, &frames);
    if (status == WF_OK && count && what == CARRY_WHOLE) {
        for (int r = 0; r < g->size; r++)
            memcpy((char *)out + (size_t)r * bytes,
                   r == g->rank ? in : (const void *)frame_payload(frames, r), bytes);
    } else if (status == WF_OK && count) {
        status = gather_pieces(g, in, out, bytes);
    }
    free(frames);
    return status;
}

/* ------------------------------------------------------------ send, recv */

static wf_status check_peer(const wf_group *g, const char *op, int peer)
{
    if (peer < 0 || peer >= g->size || peer == g->rank)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: rank %d is not another rank of this group of %d (this is %d)", op,
                         peer, g->size, g->rank);
    return WF_OK;
}

/* The payload of a send or recv, in messages of at most the limit. */
static wf_status payload(wf_group *g, bool receive, char *data, size_t bytes, int peer)
{
    const size_t limit = message_limit(g, 1);
    wf_status status = WF_OK;
    for (size_t at = 0; status == WF_OK && at < bytes; at += limit) {
        const size_t len = bytes - at < limit ? bytes - at : limit;
        status = receive ? g->backend->recv(g->comm, data + at, len, peer, TAG_PAYLOAD)
                         : g->backend->send(g->comm, data + at, len, peer, TAG_PAYLOAD);
    }
    return status;
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
    return payload(g, false, (char *)data, (size_t)count * wf_dtype_size(dtype), peer);
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
    return payload(g, true, data, (size_t)count * wf_dtype_size(dtype), peer);
}
