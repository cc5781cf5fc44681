/* The strided N-d iteration every CPU kernel uses (see cpu.h). */
#include "backend/cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/pool.h"
#include "util/fault.h"

/* Can dim d be merged into dim d + 1 (its inner neighbour) for every operand? */
static bool mergeable(const wf_cpu_iter *it, int outer, int inner)
{
    for (int k = 0; k < it->nops; k++) {
        if (it->strides[k][outer] != it->strides[k][inner] * it->shape[inner])
            return false;
    }
    return true;
}

void wf__cpu_iter_init(wf_cpu_iter *it, int ndim, const int64_t *shape, int nops,
                       char *const *data, const size_t *itemsize,
                       const int64_t *const *strides)
{
    memset(it, 0, sizeof *it);
    it->nops = nops;
    for (int k = 0; k < nops; k++) {
        it->data[k] = data[k];
        it->itemsize[k] = itemsize[k];
    }
    /* Keep the dims of size > 1, outermost first. */
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            it->empty = true;
        if (shape[d] == 1)
            continue;
        it->shape[n] = shape[d];
        for (int k = 0; k < nops; k++)
            it->strides[k][n] = strides[k][d];
        n++;
    }
    if (it->empty) {
        it->ndim = 0;
        return;
    }
    /* Compact into m slots, merging each dim into the previous slot when the
     * two are contiguous with each other for every operand. */
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0) {
            /* Tentatively place d at slot m and test against slot m - 1. */
            it->shape[m] = it->shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][m] = it->strides[k][d];
            if (mergeable(it, m - 1, m)) {
                it->shape[m - 1] *= it->shape[m];
                for (int k = 0; k < nops; k++)
                    it->strides[k][m - 1] = it->strides[k][m];
                continue;
            }
        }
        m++;
    }
    it->ndim = m;
}

void wf__cpu_iter_run(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx)
{
    char *ptrs[WF_CPU_MAX_OPERANDS];
    int64_t inner[WF_CPU_MAX_OPERANDS];
    if (it->empty)
        return;
    if (it->ndim == 0) {
        for (int k = 0; k < it->nops; k++) {
            ptrs[k] = it->data[k];
            inner[k] = 0;
        }
        fn(1, ptrs, inner, ctx);
        return;
    }
    const int last = it->ndim - 1;
    const int64_t n = it->shape[last];
    int64_t index[WF_MAX_NDIM] = {0};
    int64_t offset[WF_CPU_MAX_OPERANDS] = {0}; /* in bytes */
    for (int k = 0; k < it->nops; k++)
        inner[k] = it->strides[k][last];
    for (;;) {
        for (int k = 0; k < it->nops; k++)
            ptrs[k] = it->data[k] + offset[k];
        fn(n, ptrs, inner, ctx);
        int d = last - 1;
        for (; d >= 0; d--) {
            for (int k = 0; k < it->nops; k++)
                offset[k] += it->strides[k][d] * (int64_t)it->itemsize[k];
            if (++index[d] < it->shape[d])
                break;
            for (int k = 0; k < it->nops; k++)
                offset[k] -= it->strides[k][d] * it->shape[d] * (int64_t)it->itemsize[k];
            index[d] = 0;
        }
        if (d < 0)
            return;
    }
}

/* Runs fn over the flat element range [begin, end) of the walk (row-major
 * over the merged dims): a partial first row, whole rows, a partial last
 * row. Only the row start costs index arithmetic. */
static void run_range(const wf_cpu_iter *it, int64_t begin, int64_t end, wf_cpu_inner_fn fn,
                      const void *ctx)
{
    const int last = it->ndim - 1;
    const int64_t n = it->shape[last];
    char *ptrs[WF_CPU_MAX_OPERANDS];
    int64_t inner[WF_CPU_MAX_OPERANDS];
    for (int k = 0; k < it->nops; k++)
        inner[k] = it->strides[k][last];
    int64_t pos = begin;
    while (pos < end) {
        int64_t row = pos / n, col = pos % n;
        int64_t len = n - col < end - pos ? n - col : end - pos;
        for (int k = 0; k < it->nops; k++) {
            int64_t elements = col * it->strides[k][last];
            int64_t r = row;
            for (int d = last - 1; d >= 0; d--) {
                elements += (r % it->shape[d]) * it->strides[k][d];
                r /= it->shape[d];
            }
            ptrs[k] = it->data[k] + elements * (int64_t)it->itemsize[k];
        }
        fn(len, ptrs, inner, ctx);
        pos += len;
    }
}

struct parallel_walk {
    const wf_cpu_iter *it;
    wf_cpu_inner_fn fn;
    const void *ctx;
};

static void run_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct parallel_walk *w = arg;
    run_range(w->it, begin, end, w->fn, w->ctx);
}

/* ---------------------------------------------------------------- 2-d tiles
 *
 * A walk whose innermost dim is strided for some operand (a transposed or
 * permuted view: each element of a row is on another cache line) while that
 * operand is nearly contiguous along another dim p runs in tiles of TILE2 x
 * TILE2 over (p, innermost): the TILE2 rows of a tile reuse the cache lines
 * the strided operand brought in, instead of evicting each after one
 * element. Dim p is moved next to the innermost dim (the order of a walk
 * does not matter to element-wise work). A tile's rows are 128 elements
 * long: with 64 (runs of 256 bytes on 64 lines of memory at once) the
 * memory system found too little to fetch ahead, and a 4096 x 4096 x.T + 0
 * took 0.88 ns an element on one core against 0.64 with 128
 * (bench_strided). Walks with at least TILE2_MIN_COLS columns are tiled. */
enum { TILE2 = 128, TILE2_MIN_COLS = 64, TILE2_MIN_STRIDE = 16, TILE2_LINE_BYTES = 32,
       TILE2_MIN_ROWS = 8 };

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* The dim to tile with the innermost one, or -1. */
static int tile_partner(const wf_cpu_iter *it)
{
    if (it->empty || it->ndim < 2 || it->shape[it->ndim - 1] < TILE2_MIN_COLS)
        return -1;
    const int last = it->ndim - 1;
    for (int k = 0; k < it->nops; k++) {
        const int64_t s = abs64(it->strides[k][last]);
        if (s < TILE2_MIN_STRIDE)
            continue;
        int best = -1;
        for (int d = 0; d < last; d++) {
            const int64_t o = abs64(it->strides[k][d]);
            if (it->shape[d] >= TILE2_MIN_ROWS && o < s && o * (int64_t)it->itemsize[k] <= TILE2_LINE_BYTES &&
                (best < 0 || o < abs64(it->strides[k][best])))
                best = d;
        }
        if (best >= 0)
            return best;
    }
    return -1;
}

/* `it` with dim p moved to just before the innermost dim. */
static wf_cpu_iter with_partner_inner(const wf_cpu_iter *it, int p)
{
    wf_cpu_iter t = *it;
    const int last = it->ndim - 1;
    int m = 0;
    for (int d = 0; d <= last; d++) {
        if (d == p || d == last)
            continue;
        t.shape[m] = it->shape[d];
        for (int k = 0; k < it->nops; k++)
            t.strides[k][m] = it->strides[k][d];
        m++;
    }
    t.shape[m] = it->shape[p];
    for (int k = 0; k < it->nops; k++)
        t.strides[k][m] = it->strides[k][p];
    return t;
}

struct tiled_walk {
    wf_cpu_iter it; /* partner at ndim - 2 */
    wf_cpu_inner_fn fn;
    const void *ctx;
    int64_t bands;     /* bands of TILE2 partner indices per outer index */
    int64_t out_bytes; /* size of operand 0's walk */
};

/* Operand k is transposed within a tile (contiguous along the partner,
 * strided along the innermost dim): its tile then moves through a
 * contiguous buffer by block transposes (transpose.c), so the inner
 * function sees it with stride 1 and the memory is read or written a row of
 * the partner at a time. An output is read first, then written back. */
static bool buffered(const wf_cpu_iter *it, int k)
{
    const int last = it->ndim - 1;
    const size_t item = it->itemsize[k];
    return it->strides[k][last - 1] == 1 && it->strides[k][last] >= TILE2_MIN_STRIDE &&
           (item == 1 || item == 2 || item == 4 || item == 8);
}

/* Outputs of at least this many bytes are far larger than the caches: a
 * tiled walk computes each tile of such an output into a buffer and streams
 * its rows to memory past the caches (wf__cpu_stream_copy). Written in place,
 * a tile's short rows on as many cache lines each cost a read of the line
 * before the write, which no prefetcher foresees. */
enum { STREAM_OUTPUT_BYTES = 1 << 24 };

/* Each operand's element 0 for a task's outer index (in base) and the
 * task's first partner index (returned). */
static int64_t task_bases(const struct tiled_walk *t, int64_t task, char **base)
{
    const wf_cpu_iter *it = &t->it;
    const int part = it->ndim - 2;
    const int64_t outer = task / t->bands;
    for (int k = 0; k < it->nops; k++) {
        int64_t el = 0, o = outer;
        for (int d = part - 1; d >= 0; d--) {
            el += (o % it->shape[d]) * it->strides[k][d];
            o /= it->shape[d];
        }
        base[k] = it->data[k] + el * (int64_t)it->itemsize[k];
    }
    return (task % t->bands) * TILE2;
}

/* Task = (outer index over dims 0..ndim-3, band of TILE2 partner indices):
 * the band's rows, TILE2 columns at a time. Operands that are buffered for
 * the tile are laid out there as rows of the tile's width, so when every
 * operand is either that or constant over the tile (stride 0), the inner
 * function runs once over the whole tile. */
static void run_bands(void *arg, int64_t begin, int64_t end)
{
    const struct tiled_walk *t = arg;
    const wf_cpu_iter *it = &t->it;
    const int last = it->ndim - 1, part = last - 1;
    const int64_t rows = it->shape[part], cols = it->shape[last];
    int64_t inner[WF_CPU_MAX_OPERANDS];
    bool buf_k[WF_CPU_MAX_OPERANDS];
    char *buf[WF_CPU_MAX_OPERANDS] = {NULL};
    bool stream = it->out_write_only && it->strides[0][last] == 1 &&
                  t->out_bytes >= STREAM_OUTPUT_BYTES;
    for (int k = 0; k < it->nops; k++) {
        buf_k[k] = buffered(it, k) || (k == 0 && stream);
        if (buf_k[k]) { /* a tile of the operand; on the heap: tiles are large */
            buf[k] = wf__aligned_alloc(64, TILE2 * TILE2 * it->itemsize[k]);
            buf_k[k] = buf[k] != NULL;
        }
        inner[k] = buf_k[k] ? 1 : it->strides[k][last];
    }
    stream = stream && buf_k[0];
    for (int64_t task = begin; task < end; task++) {
        char *base[WF_CPU_MAX_OPERANDS];
        const int64_t r0 = task_bases(t, task, base);
        const int64_t r1 = r0 + TILE2 < rows ? r0 + TILE2 : rows;
        for (int64_t c0 = 0; c0 < cols; c0 += TILE2) {
            const int64_t n = cols - c0 < TILE2 ? cols - c0 : TILE2;
            char *ptrs[WF_CPU_MAX_OPERANDS], *mem[WF_CPU_MAX_OPERANDS];
            int64_t step[WF_CPU_MAX_OPERANDS];
            bool flat = true; /* every operand walks the tile as one row */
            for (int k = 0; k < it->nops; k++) {
                const int64_t item = (int64_t)it->itemsize[k];
                mem[k] = base[k] + (r0 * it->strides[k][part] + c0 * it->strides[k][last]) * item;
                ptrs[k] = buf_k[k] ? buf[k] : mem[k];
                step[k] = (buf_k[k] ? n : it->strides[k][part]) * item;
                flat = flat && (buf_k[k] || (inner[k] == 0 && step[k] == 0));
                if (buf_k[k] && !(k == 0 && stream)) /* buf[r][c] <- memory's [c][r] */
                    wf__cpu_transpose_block(n, r1 - r0, it->itemsize[k], mem[k],
                                            it->strides[k][last], buf[k], n);
            }
            if (flat) {
                t->fn(n * (r1 - r0), ptrs, inner, t->ctx);
            } else {
                for (int64_t r = r0; r < r1; r++) {
                    t->fn(n, ptrs, inner, t->ctx);
                    for (int k = 0; k < it->nops; k++)
                        ptrs[k] += step[k];
                }
            }
            const int64_t item0 = (int64_t)it->itemsize[0];
            if (stream)
                for (int64_t r = 0; r < r1 - r0; r++)
                    wf__cpu_stream_copy(mem[0] + r * it->strides[0][part] * item0,
                                        buf[0] + r * n * item0, (size_t)(n * item0));
            else if (buf_k[0])
                wf__cpu_transpose_block(r1 - r0, n, it->itemsize[0], buf[0], n, mem[0],
                                        it->strides[0][last]);
        }
    }
    if (stream)
        wf__cpu_stream_fence();
    for (int k = 0; k < it->nops; k++)
        free(buf[k]);
}

/* Elements of a destination row before its first 64-byte line boundary
 * (dst is aligned to its elements). */
static int64_t line_head(const char *dst, size_t item)
{
    return (int64_t)(((64 - ((uintptr_t)dst & 63)) & 63) / item);
}

/* Whether a copy (wf_cpu_iter.copy_only) reads a source transposed within
 * the tiles into destination rows, and the destination fits the caches or
 * can be streamed a whole line at a time past its rows' first line_head
 * elements (every row starts at the same offset in a line): then
 * run_copy_bands moves the tiles. (A large destination that cannot goes
 * through the buffered walk, which streams its rows.) */
static bool direct_copy(const struct tiled_walk *t)
{
    const wf_cpu_iter *it = &t->it;
    const int last = it->ndim - 1;
    const size_t item = it->itemsize[0];
    if (!it->copy_only || it->nops != 2 || !buffered(it, 1) || it->strides[0][last] != 1)
        return false;
    if (t->out_bytes < STREAM_OUTPUT_BYTES)
        return true;
    if ((uintptr_t)it->data[0] % item != 0)
        return false;
    const char *lined = it->data[0] + line_head(it->data[0], item) * (int64_t)item;
    bool lines = wf__cpu_transpose_streams(item, lined, it->strides[0][last - 1]);
    for (int d = 0; d < last - 1; d++)
        lines = lines && (it->strides[0][d] * (int64_t)item) % 64 == 0;
    return lines;
}

/* A copy of a source transposed within the tiles into destination rows:
 * each tile goes from one to the other through register blocks, with no
 * buffer between; a destination far larger than the caches goes around
 * them a whole line at a time. Its rows' first line_head elements are then
 * a narrow tile of their own, so the other tiles start on line boundaries
 * and no line is written in part by two tiles. */
static void run_copy_bands(void *arg, int64_t begin, int64_t end)
{
    const struct tiled_walk *t = arg;
    const wf_cpu_iter *it = &t->it;
    const int last = it->ndim - 1, part = last - 1;
    const int64_t rows = it->shape[part], cols = it->shape[last];
    const size_t item = it->itemsize[0];
    const bool stream = t->out_bytes >= STREAM_OUTPUT_BYTES;
    const int64_t head = stream ? line_head(it->data[0], item) : 0;
    for (int64_t task = begin; task < end; task++) {
        char *base[WF_CPU_MAX_OPERANDS];
        const int64_t r0 = task_bases(t, task, base);
        const int64_t r1 = r0 + TILE2 < rows ? r0 + TILE2 : rows;
        for (int64_t c0 = 0, n; c0 < cols; c0 += n) {
            n = c0 == 0 && head > 0 ? head : TILE2;
            n = cols - c0 < n ? cols - c0 : n;
            char *dst = base[0] + (r0 * it->strides[0][part] + c0) * (int64_t)item;
            const char *src =
                base[1] + (r0 + c0 * it->strides[1][last]) * (int64_t)item; /* [c][r] */
            if (stream)
                wf__cpu_transpose_block_stream(n, r1 - r0, item, src, it->strides[1][last], dst,
                                               it->strides[0][part]);
            else
                wf__cpu_transpose_block(n, r1 - r0, item, src, it->strides[1][last], dst,
                                        it->strides[0][part]);
        }
    }
    if (stream)
        wf__cpu_stream_fence();
}

/* Sets up a tiled walk; false when `it` does not want 2-d tiles. */
static bool tiled_walk_init(struct tiled_walk *t, const wf_cpu_iter *it, wf_cpu_inner_fn fn,
                            const void *ctx, int64_t *tasks)
{
    const int p = tile_partner(it);
    if (p < 0)
        return false;
    t->it = with_partner_inner(it, p);
    t->fn = fn;
    t->ctx = ctx;
    t->bands = (it->shape[p] + TILE2 - 1) / TILE2;
    int64_t outer = 1;
    for (int d = 0; d < it->ndim - 2; d++)
        outer *= t->it.shape[d];
    *tasks = outer * t->bands;
    t->out_bytes = outer * it->shape[p] * it->shape[it->ndim - 1] * (int64_t)it->itemsize[0];
    return true;
}

void wf__cpu_iter_run_blocked(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx)
{
    struct tiled_walk t;
    int64_t tasks;
    if (tiled_walk_init(&t, it, fn, ctx, &tasks))
        (direct_copy(&t) ? run_copy_bands : run_bands)(&t, 0, tasks);
    else
        wf__cpu_iter_run(it, fn, ctx);
}

/* ---------------------------------------------------------------- aliased output
 *
 * With buffer donation (runtime/eval.c) the output may be an input's
 * storage, element for element. Inner loops take restrict pointers, which
 * must never alias, so such a walk hands each row to the loop in pieces
 * whose output goes to a stack buffer, copied over the input afterwards:
 * every input element of a piece is read before any is overwritten. */
enum { STAGE_BYTES = 8192 };

struct staged {
    wf_cpu_inner_fn fn;
    const void *ctx;
    int nops;
    size_t itemsize[WF_CPU_MAX_OPERANDS];
};

static void staged_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *arg)
{
    const struct staged *s = arg;
    _Alignas(64) char stage[STAGE_BYTES];
    const int64_t item = (int64_t)s->itemsize[0], per = STAGE_BYTES / item;
    char *piece[WF_CPU_MAX_OPERANDS];
    int64_t piece_strides[WF_CPU_MAX_OPERANDS];
    piece[0] = stage;
    piece_strides[0] = 1;
    for (int k = 1; k < s->nops; k++)
        piece_strides[k] = strides[k];
    for (int64_t i0 = 0; i0 < n; i0 += per) {
        const int64_t m = n - i0 < per ? n - i0 : per;
        for (int k = 1; k < s->nops; k++)
            piece[k] = ptrs[k] + i0 * strides[k] * (int64_t)s->itemsize[k];
        s->fn(m, piece, piece_strides, s->ctx);
        char *out = ptrs[0] + i0 * strides[0] * item;
        if (strides[0] == 1) {
            memcpy(out, stage, (size_t)(m * item));
        } else {
            for (int64_t j = 0; j < m; j++)
                memcpy(out + j * strides[0] * item, stage + j * item, (size_t)item);
        }
    }
}

/* Whether the output's storage starts where an input's does (donation). */
static bool output_aliased(const wf_cpu_iter *it)
{
    for (int k = 1; k < it->nops; k++)
        if (it->data[k] == it->data[0])
            return true;
    return false;
}

static void staged_init(struct staged *s, const wf_cpu_iter *it, wf_cpu_inner_fn fn,
                        const void *ctx)
{
    s->fn = fn;
    s->ctx = ctx;
    s->nops = it->nops;
    for (int k = 0; k < it->nops; k++)
        s->itemsize[k] = it->itemsize[k];
}

void wf__cpu_iter_run_parallel(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx,
                               int64_t min_chunk)
{
    struct staged staged;
    if (output_aliased(it)) {
        staged_init(&staged, it, fn, ctx);
        fn = staged_inner;
        ctx = &staged;
    }
    if (it->empty || it->ndim == 0) {
        wf__cpu_iter_run(it, fn, ctx);
        return;
    }
    int64_t total = 1;
    for (int d = 0; d < it->ndim; d++) {
        if (it->strides[0][d] == 0) { /* several positions write one output */
            wf__cpu_iter_run(it, fn, ctx);
            return;
        }
        total *= it->shape[d];
    }
    struct tiled_walk t;
    int64_t tasks;
    if (tiled_walk_init(&t, it, fn, ctx, &tasks)) {
        const int64_t per_task = total / tasks;
        const int64_t min_tasks = min_chunk / (per_task > 0 ? per_task : 1);
        wf__parallel_for(tasks, min_tasks > 0 ? min_tasks : 1,
                         direct_copy(&t) ? run_copy_bands : run_bands, &t);
        return;
    }
    struct parallel_walk w = {it, fn, ctx};
    wf__parallel_for(total, min_chunk, run_chunk, &w);
}

void wf__cpu_dims_by_stride(int ndim, const int64_t *strides, int *perm)
{
    for (int d = 0; d < ndim; d++) {
        int j = d;
        while (j > 0 && abs64(strides[perm[j - 1]]) < abs64(strides[d])) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = d;
    }
}
