/* The walk engine of the reduction family (see reduce.h): walks over an
 * input in its memory order with accumulators seen as operands of stride 0
 * on the reduced dims, tiling of strided walks, staging of other dtypes,
 * and the reproducible parallel driver.
 *
 * The accumulator (the output, or a float32/float64 buffer for half types
 * and composite ops) is laid out row-major over the kept axes and seen as an
 * operand with the input's shape and stride 0 on the reduced axes. The walk
 * visits the input in memory order (dims sorted by stride), so the inner
 * loop either reduces a row to one value (accumulator stride 0) or combines
 * a row into a row of accumulators; neither does index arithmetic. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "core/error.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* ================================================================ walks */

void wf__cpu_reduce_walk(wf_cpu_iter *it, const wf_array *in, uint64_t axes, int nops,
                         char *const *data, const size_t *items,
                         const enum wf_cpu_layout *layout)
{
    int64_t acc_st[WF_MAX_NDIM], full_st[WF_MAX_NDIM];
    int64_t s = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        const bool reduced = (axes >> d) & 1u;
        acc_st[d] = reduced ? 0 : s;
        if (!reduced)
            s *= in->shape[d];
    }
    wf__contiguous_strides(in->shape, in->ndim, full_st);
    int perm[WF_MAX_NDIM];
    int64_t shape[WF_MAX_NDIM], st[WF_CPU_MAX_OPERANDS][WF_MAX_NDIM];
    wf__cpu_dims_by_stride(in->ndim, in->strides, perm);
    for (int d = 0; d < in->ndim; d++) {
        shape[d] = in->shape[perm[d]];
        for (int k = 0; k < nops; k++) {
            const int64_t *src = layout[k] == WF_CPU_LAYOUT_ACC    ? acc_st
                                 : layout[k] == WF_CPU_LAYOUT_FULL ? full_st
                                                                   : in->strides;
            st[k][d] = src[perm[d]];
        }
    }
    const int64_t *strides[WF_CPU_MAX_OPERANDS];
    for (int k = 0; k < nops; k++)
        strides[k] = st[k];
    wf__cpu_iter_init(it, in->ndim, shape, nops, data, items, strides);
}

bool wf__cpu_axis_walk(wf_cpu_iter *it, const wf_array *in, int axis, int nops, char *const *data,
                       const size_t *items, const enum wf_cpu_layout *layout)
{
    int64_t shape[WF_MAX_NDIM] = {0}, in_st[WF_MAX_NDIM] = {0};
    int64_t st[WF_CPU_MAX_OPERANDS][WF_MAX_NDIM];
    int64_t acc_st[WF_MAX_NDIM], full_st[WF_MAX_NDIM];
    int map[WF_MAX_NDIM];
    int m = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d == axis)
            continue;
        map[m] = d;
        shape[m] = in->shape[d];
        in_st[m] = in->strides[d];
        m++;
    }
    wf__contiguous_strides(shape, m, acc_st);
    wf__contiguous_strides(in->shape, in->ndim, full_st);
    int perm[WF_MAX_NDIM];
    wf__cpu_dims_by_stride(m, in_st, perm);
    int64_t pshape[WF_MAX_NDIM];
    bool innermost = true;
    const int64_t ax = in->strides[axis] < 0 ? -in->strides[axis] : in->strides[axis];
    for (int d = 0; d < m; d++) {
        pshape[d] = shape[perm[d]];
        const int64_t s = in_st[perm[d]] < 0 ? -in_st[perm[d]] : in_st[perm[d]];
        if (shape[perm[d]] > 1 && s < ax)
            innermost = false;
        for (int k = 0; k < nops; k++)
            st[k][d] = layout[k] == WF_CPU_LAYOUT_ACC    ? acc_st[perm[d]]
                       : layout[k] == WF_CPU_LAYOUT_FULL ? full_st[map[perm[d]]]
                                                         : in_st[perm[d]];
    }
    const int64_t *strides[WF_CPU_MAX_OPERANDS];
    for (int k = 0; k < nops; k++)
        strides[k] = st[k];
    wf__cpu_iter_init(it, m, pshape, nops, data, items, strides);
    return innermost;
}

int64_t wf__cpu_iter_count(const wf_cpu_iter *it)
{
    if (it->empty)
        return 0;
    int64_t total = 1;
    for (int d = 0; d < it->ndim; d++)
        total *= it->shape[d];
    return total;
}

int wf__cpu_pick_split_dim(const wf_cpu_iter *it, int written, int64_t want)
{
    int best = -1;
    for (int d = 0; d < it->ndim; d++) {
        bool ok = true;
        for (int k = 0; k < it->nops; k++)
            if ((written < 0 || k == written) && it->strides[k][d] == 0)
                ok = false;
        if (!ok)
            continue;
        if (it->shape[d] >= want)
            return d;
        if (best < 0 || it->shape[d] > it->shape[best])
            best = d;
    }
    return best;
}

/* The sub-walk of `it` over indices [lo, hi) of dim d. */
static wf_cpu_iter sub_walk(const wf_cpu_iter *it, int d, int64_t lo, int64_t hi)
{
    wf_cpu_iter sub = *it;
    sub.shape[d] = hi - lo;
    for (int k = 0; k < sub.nops; k++)
        sub.data[k] += lo * sub.strides[k][d] * (int64_t)sub.itemsize[k];
    return sub;
}

struct split_ctx {
    const wf_cpu_iter *it;
    int dim;
    wf_cpu_walk_body body;
    void *arg;
};

static void split_chunk(void *p, int64_t begin, int64_t end)
{
    const struct split_ctx *s = p;
    const wf_cpu_iter sub = sub_walk(s->it, s->dim, begin, end);
    s->body(&sub, s->arg);
}

void wf__cpu_split_run(const wf_cpu_iter *it, int dim, int64_t min_chunk, wf_cpu_walk_body body,
                       void *arg)
{
    struct split_ctx s = {it, dim, body, arg};
    wf__parallel_for(it->shape[dim], min_chunk, split_chunk, &s);
}

void wf__cpu_vertical_run(const wf_cpu_iter *it, int written, int64_t len, int64_t min_chunk,
                          wf_cpu_walk_body body, void *arg)
{
    const int64_t total = wf__cpu_iter_count(it) * len;
    const int d = wf__cpu_pick_split_dim(it, written, 2 * (int64_t)wf__pool_size());
    if (d < 0 || total < 2 * min_chunk) {
        body(it, arg);
        return;
    }
    const int64_t per_index = total / it->shape[d];
    const int64_t chunk = min_chunk / (per_index > 0 ? per_index : 1);
    wf__cpu_split_run(it, d, chunk > 0 ? chunk : 1, body, arg);
}

/* ================================================================ tiling */

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

bool wf__cpu_wants_tiling(const wf_cpu_iter *it)
{
    if (it->empty || it->ndim < 2)
        return false;
    const int last = it->ndim - 1;
    for (int k = 0; k < it->nops; k++) {
        const int64_t s = abs64(it->strides[k][last]);
        if (s < WF_CPU_TILE_STRIDE)
            continue;
        for (int d = 0; d < last; d++)
            if (abs64(it->strides[k][d]) < s)
                return true;
    }
    return false;
}

/* A 1-d walk with an operand strided by at least WF_CPU_TILE_STRIDE. */
static bool strided_1d(const wf_cpu_iter *it)
{
    if (it->empty || it->ndim != 1)
        return false;
    for (int k = 0; k < it->nops; k++)
        if (abs64(it->strides[k][0]) >= WF_CPU_TILE_STRIDE)
            return true;
    return false;
}

void wf__cpu_tiles_run(const wf_cpu_iter *it, bool axis_outside, wf_cpu_walk_body body,
                       void *arg)
{
    if (!wf__cpu_wants_tiling(it) && !(axis_outside && strided_1d(it))) {
        body(it, arg);
        return;
    }
    const int last = it->ndim - 1;
    for (int64_t b = 0; b < it->shape[last]; b += WF_CPU_TILE) {
        const int64_t e = it->shape[last] - b < WF_CPU_TILE ? it->shape[last] : b + WF_CPU_TILE;
        const wf_cpu_iter tile = sub_walk(it, last, b, e);
        body(&tile, arg);
    }
}

struct run_arg {
    wf_cpu_inner_fn fn;
    const void *ctx;
};

static void run_body(const wf_cpu_iter *sub, void *arg)
{
    const struct run_arg *r = arg;
    wf__cpu_iter_run(sub, r->fn, r->ctx);
}

void wf__cpu_iter_run_tiled(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx)
{
    struct run_arg r = {fn, ctx};
    wf__cpu_tiles_run(it, false, run_body, &r);
}

wf_buffer *wf__cpu_scratch(int64_t n, wf_dtype at)
{
    return wf__buffer_alloc((size_t)n * wf_dtype_size(at) + 8);
}

/* ================================================================ staging */

void wf__cpu_stage_init(wf_cpu_stage_ctx *c, wf_cpu_inner_fn typed, wf_dtype at)
{
    memset(c, 0, sizeof *c);
    c->typed = typed;
    c->at = at;
    c->xop = -1;
    c->oop = -1;
    c->k = WF_CPU_KOP_SUM;
}

void wf__cpu_staged(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    if (c->xop < 0 && c->oop < 0) {
        c->typed(n, ptrs, strides, ctx);
        return;
    }
    double xb[WF_CPU_STAGE], ob[WF_CPU_STAGE]; /* room for a stage of any dtype */
    char *p[WF_CPU_MAX_OPERANDS];
    int64_t s[WF_CPU_MAX_OPERANDS];
    for (int64_t i0 = 0; i0 < n; i0 += WF_CPU_STAGE) {
        const int64_t m = n - i0 < WF_CPU_STAGE ? n - i0 : WF_CPU_STAGE;
        for (int k = 0; k < WF_CPU_MAX_OPERANDS; k++) {
            p[k] = c->item[k] ? ptrs[k] + i0 * strides[k] * (int64_t)c->item[k] : NULL;
            s[k] = c->item[k] ? strides[k] : 0;
        }
        char *odst = NULL;
        int64_t os = 0;
        if (c->xop >= 0) {
            wf__cpu_convert_1d(m, p[c->xop], c->xdt, s[c->xop], xb, c->at, 1);
            p[c->xop] = (char *)xb;
            s[c->xop] = 1;
        }
        if (c->oop >= 0) {
            odst = p[c->oop];
            os = s[c->oop];
            if (c->oread)
                wf__cpu_convert_1d(m, odst, c->odt, os, ob, c->at, 1);
            p[c->oop] = (char *)ob;
            s[c->oop] = 1;
        }
        c->typed(m, p, s, ctx);
        if (c->oop >= 0)
            wf__cpu_convert_1d(m, ob, c->at, 1, odst, c->odt, os);
    }
}

/* ================================================================ the driver */

typedef struct drive_plan {
    const wf_cpu_red_job *job;
    int block_dim;   /* the outer reduced dim cut into blocks, or -1 */
    int64_t block;   /* its indices per block */
    int64_t nblocks;
    int kept_dim;    /* the kept dim cut into chunks, or -1 */
    int64_t nkept;   /* chunks of it */
    char *partials;  /* nblocks - 1 accumulators, blocks 1... */
    size_t acc_bytes;
} drive_plan;

/* The accumulator of block b. */
static char *block_acc(const drive_plan *p, int64_t b)
{
    return b == 0 ? p->job->it.data[p->job->acc_op]
                  : p->partials + (size_t)(b - 1) * p->acc_bytes;
}

/* The 2-d function for the last two dims of the walk of one task, or NULL
 * (then fn runs per row): rows_fn when the innermost dim is a reduced row
 * no longer than a leaf, fold_fn when it is kept and the next reduced. */
static wf_cpu_rows_inner_fn walk_fn_2d(const wf_cpu_red_job *j, const wf_cpu_iter *it)
{
    const int last = it->ndim - 1;
    if (it->empty || it->ndim < 2 || wf__cpu_wants_tiling(it))
        return NULL;
    const int64_t *acc = it->strides[j->acc_op];
    if (acc[last] == 0)
        return it->shape[last] <= WF_CPU_LEAF ? j->rows_fn : NULL;
    return acc[last - 1] == 0 ? j->fold_fn : NULL;
}

static void run_walk(const wf_cpu_red_job *j, const wf_cpu_iter *it)
{
    const int last = it->ndim - 1;
    const wf_cpu_rows_inner_fn fn2 = walk_fn_2d(j, it);
    if (fn2 == NULL) {
        wf__cpu_iter_run_tiled(it, j->fn, j->ctx);
        return;
    }
    int64_t row_st[WF_CPU_MAX_OPERANDS], st[WF_CPU_MAX_OPERANDS];
    int64_t index[WF_MAX_NDIM] = {0};
    char *ptrs[WF_CPU_MAX_OPERANDS];
    for (int k = 0; k < it->nops; k++) {
        row_st[k] = it->strides[k][last - 1];
        st[k] = it->strides[k][last];
        ptrs[k] = it->data[k];
    }
    for (;;) {
        fn2(it->shape[last - 1], it->shape[last], ptrs, row_st, st, j->ctx);
        int d = last - 2;
        for (; d >= 0; d--) {
            for (int k = 0; k < it->nops; k++)
                ptrs[k] += it->strides[k][d] * (int64_t)it->itemsize[k];
            if (++index[d] < it->shape[d])
                break;
            for (int k = 0; k < it->nops; k++)
                ptrs[k] -= it->strides[k][d] * it->shape[d] * (int64_t)it->itemsize[k];
            index[d] = 0;
        }
        if (d < 0)
            return;
    }
}

static void run_task(void *arg, int64_t begin, int64_t end)
{
    const drive_plan *p = arg;
    const wf_cpu_red_job *j = p->job;
    for (int64_t t = begin; t < end; t++) {
        const int64_t b = t / p->nkept, c = t % p->nkept;
        wf_cpu_iter sub = j->it;
        sub.data[j->acc_op] = block_acc(p, b);
        if (p->block_dim >= 0) {
            const int64_t lo = b * p->block, len = sub.shape[p->block_dim];
            sub = sub_walk(&sub, p->block_dim, lo, lo + p->block < len ? lo + p->block : len);
        }
        if (p->kept_dim >= 0) {
            const int64_t len = sub.shape[p->kept_dim];
            sub = sub_walk(&sub, p->kept_dim, len * c / p->nkept, len * (c + 1) / p->nkept);
        }
        run_walk(j, &sub);
    }
}

/* Block 0 (the accumulator) (k)= every other block, pairwise: block b takes
 * block b + s for s = 1, 2, 4, ... (b a multiple of 2s). */
static void combine_chunk(void *arg, int64_t begin, int64_t end)
{
    const drive_plan *p = arg;
    const size_t item = wf_dtype_size(p->job->at);
    for (int64_t s = 1; s < p->nblocks; s *= 2)
        for (int64_t b = 0; b + s < p->nblocks; b += 2 * s)
            wf__cpu_kop_combine(p->job->k, p->job->at, block_acc(p, b) + (size_t)begin * item,
                                block_acc(p, b + s) + (size_t)begin * item, end - begin);
}

/* The blocks: a function of the walk's shape and strides only. */
static void plan_blocks(drive_plan *p)
{
    const wf_cpu_iter *it = &p->job->it;
    const int acc = p->job->acc_op, last = it->ndim - 1;
    const bool row = it->strides[acc][last] == 0;
    int64_t reduced = 1;
    p->block_dim = -1;
    p->nblocks = 1;
    for (int d = 0; d < it->ndim; d++) {
        if (it->strides[acc][d] != 0)
            continue;
        reduced *= it->shape[d];
        if ((d != last || !row) && (p->block_dim < 0 || it->shape[d] > it->shape[p->block_dim]))
            p->block_dim = d;
    }
    if (p->block_dim < 0)
        return;
    const int64_t per_index = reduced / it->shape[p->block_dim];
    p->block = WF_CPU_RED_BLOCK / per_index > 1 ? WF_CPU_RED_BLOCK / per_index : 1;
    p->nblocks = (it->shape[p->block_dim] + p->block - 1) / p->block;
    if (p->nblocks == 1)
        p->block_dim = -1;
}

/* The kept chunks: only speed depends on them. Few, so that a chunk of
 * an innermost kept dim still reads long runs of memory. */
static void plan_kept(drive_plan *p, int64_t total)
{
    const wf_cpu_red_job *j = p->job;
    const int threads = wf__pool_size();
    const int64_t want = 2 * (int64_t)threads;
    p->kept_dim = -1;
    p->nkept = 1;
    if (threads <= 1 || p->nblocks >= want || total < 2 * j->min_chunk)
        return;
    const int kd = wf__cpu_pick_split_dim(&j->it, j->acc_op, want);
    if (kd < 0)
        return;
    int64_t n = (want + p->nblocks - 1) / p->nblocks;
    const int64_t by_work = total / p->nblocks / j->min_chunk;
    if (n > by_work)
        n = by_work;
    if (n > j->it.shape[kd])
        n = j->it.shape[kd];
    if (n > 1) {
        p->kept_dim = kd;
        p->nkept = n;
    }
}

wf_status wf__cpu_red_drive(const wf_cpu_red_job *j)
{
    const wf_cpu_iter *it = &j->it;
    const int64_t total = wf__cpu_iter_count(it);
    if (total == 0)
        return WF_OK;
    if (it->ndim == 0) {
        wf__cpu_iter_run(it, j->fn, j->ctx);
        return WF_OK;
    }
    drive_plan p;
    memset(&p, 0, sizeof p);
    p.job = j;
    p.acc_bytes = (size_t)j->acc_count * wf_dtype_size(j->at);
    plan_blocks(&p);
    plan_kept(&p, total);
    if (p.nblocks > 1) {
        p.partials = wf__malloc(p.acc_bytes * (size_t)(p.nblocks - 1));
        if (p.partials == NULL)
            return wf__error(WF_ERR_OUT_OF_MEMORY,
                             "reduction: out of memory for %lld partial results",
                             (long long)(j->acc_count * (p.nblocks - 1)));
        wf__cpu_kop_fill(j->k, j->at, p.partials, j->acc_count * (p.nblocks - 1));
    }
    const int64_t tasks = p.nblocks * p.nkept;
    const int64_t per_task = total / tasks;
    const int64_t min_tasks = j->min_chunk / (per_task > 0 ? per_task : 1);
    wf__parallel_for(tasks, min_tasks > 0 ? min_tasks : 1, run_task, &p);
    if (p.nblocks > 1) {
        const int64_t per = WF_CPU_RED_CHEAP / p.nblocks;
        wf__parallel_for(j->acc_count, per > 0 ? per : 1, combine_chunk, &p);
        free(p.partials);
    }
    return WF_OK;
}

/* ================================================================ plain reductions */

void wf__cpu_plain_ctx(wf_cpu_stage_ctx *c, wf_cpu_kop k, wf_dtype xdt, wf_dtype at)
{
    wf__cpu_stage_init(c, NULL, at);
    c->k = k;
    c->xdt = xdt;
    c->item[0] = wf_dtype_size(at);
    c->item[1] = wf_dtype_size(xdt);
}

void wf__cpu_plain_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    if (strides[0] == 0) { /* a row into one value */
        const wf_cpu_row r = {c->k, c->at, ptrs[1], strides[1], c->xdt, WF_CPU_ROW_PLAIN,
                              0,    NULL,  0};
        const wf_cpu_scalar v = wf__cpu_row_reduce(&r, n);
        wf__cpu_kop_combine1(c->k, c->at, ptrs[0], &v);
        return;
    }
    if (c->xdt == c->at) {
        wf__cpu_kop_combine_strided(c->k, c->at, n, ptrs[0], strides[0], ptrs[1], strides[1]);
        return;
    }
    double xb[WF_CPU_STAGE]; /* a stage of the input, converted */
    for (int64_t i0 = 0; i0 < n; i0 += WF_CPU_STAGE) {
        const int64_t m = n - i0 < WF_CPU_STAGE ? n - i0 : WF_CPU_STAGE;
        wf__cpu_convert_1d(m, ptrs[1] + i0 * strides[1] * (int64_t)c->item[1], c->xdt,
                           strides[1], xb, c->at, 1);
        wf__cpu_kop_combine_strided(c->k, c->at, m,
                                    ptrs[0] + i0 * strides[0] * (int64_t)c->item[0], strides[0],
                                    xb, 1);
    }
}

/* Rows reduced into a stack block of values at a time. */
enum { ROWS_VALUES = 256 };

void wf__cpu_plain_rows(int64_t rows, int64_t n, char *const *ptrs, const int64_t *row_st,
                        const int64_t *st, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    const wf_cpu_row r = {c->k, c->at, ptrs[1], st[1], c->xdt, WF_CPU_ROW_PLAIN, 0, NULL, 0};
    double vals[ROWS_VALUES]; /* room for values of any dtype */
    for (int64_t i0 = 0; i0 < rows; i0 += ROWS_VALUES) {
        const int64_t m = rows - i0 < ROWS_VALUES ? rows - i0 : ROWS_VALUES;
        wf_cpu_row part = r;
        part.x += i0 * row_st[1] * (int64_t)c->item[1];
        wf__cpu_rows_reduce(&part, n, m, row_st[1], NULL, 0, 0, vals);
        wf__cpu_kop_combine_strided(c->k, c->at, m,
                                    ptrs[0] + i0 * row_st[0] * (int64_t)c->item[0], row_st[0],
                                    vals, 1);
    }
}

void wf__cpu_plain_fold(int64_t rows, int64_t n, char *const *ptrs, const int64_t *row_st,
                        const int64_t *st, const void *ctx)
{
    const wf_cpu_stage_ctx *c = ctx;
    const bool direct = c->xdt == c->at && st[0] == 1 && st[1] == 1 && row_st[0] == 0;
    if (direct && c->at == WF_DTYPE_F32) {
        wf__cpu_red_isa()->accum_rows_f32(c->k, rows, n, (float *)ptrs[0],
                                          (const float *)ptrs[1], row_st[1]);
        return;
    }
    if (direct && c->at == WF_DTYPE_F64) {
        wf__cpu_red_isa()->accum_rows_f64(c->k, rows, n, (double *)ptrs[0],
                                          (const double *)ptrs[1], row_st[1]);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        char *const row[2] = {ptrs[0] + r * row_st[0] * (int64_t)c->item[0],
                              ptrs[1] + r * row_st[1] * (int64_t)c->item[1]};
        wf__cpu_plain_inner(n, row, st, ctx);
    }
}

wf_status wf__cpu_reduce_into(const wf_array *in, uint64_t axes, wf_cpu_kop k, wf_dtype at,
                              void *acc, int64_t acc_count)
{
    wf__cpu_kop_fill(k, at, acc, acc_count);
    wf_cpu_stage_ctx c;
    wf__cpu_plain_ctx(&c, k, in->dtype, at);
    wf_cpu_red_job j;
    memset(&j, 0, sizeof j);
    char *data[2] = {acc, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay[2] = {WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_IN};
    wf__cpu_reduce_walk(&j.it, in, axes, 2, data, c.item, lay);
    j.fn = wf__cpu_plain_inner;
    j.rows_fn = wf__cpu_plain_rows;
    j.fold_fn = wf__cpu_plain_fold;
    j.ctx = &c;
    j.acc_op = 0;
    j.k = k;
    j.at = at;
    j.acc_count = acc_count;
    j.min_chunk = WF_CPU_RED_CHEAP;
    return wf__cpu_red_drive(&j);
}
