/* The rows engine (see reduce.h): softmax, logsumexp and the norms run a
 * row function once per row along the reduced axes.
 *
 * The input is walked in memory order with three operands: x, a marker laid
 * out like the per-row results (stride 0 on the reduced dims) and y laid
 * out like the row outputs. When the reduced axes merge into one dim of
 * that walk, the other dims enumerate the rows. Rows are handled in groups
 * of consecutive rows along the kept dim where x is least strided; a group
 * whose rows are strided in memory (a reduction over an axis that is not
 * innermost, or a transposed view) is gathered into a contiguous block by
 * 2-d tiles (wf__cpu_copy_2d), so both sides of the copy stay in cache and
 * the row function always sees contiguous rows of the compute dtype. Row
 * outputs go back the same way. A row therefore gives the same bits
 * whatever its layout, the rows around it and the number of threads. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "core/error.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* Rows per group: about GROUP_BYTES of compute dtype, at least MIN_GROUP
 * (a cache line of float32 along the kept dim) when rows are gathered, as
 * long as the group stays under MAX_GATHER_BYTES. */
enum { GROUP_BYTES = 1 << 20, MIN_GROUP = 16, MAX_GROUP = 64, MAX_GATHER_BYTES = 1 << 24 };
/* Elements per group of short rows handed to rows->batch at once; the
 * longest columns handed to rows->cols WF_CPU_COLS_WIDE at a time (blocks
 * of 16 MB), longer ones WF_CPU_COLS at a time, with blocks of at most
 * MAX_GATHER_BYTES (else none: the column form then reads in place). */
enum { BATCH_ELEMENTS = 1 << 14, WIDE_COLUMNS_LEN = 1 << 16 };

typedef struct rows_plan {
    const wf_cpu_rows *rows;
    wf_cpu_iter walk;   /* operands [x, res, y]; dim `axis` removed */
    int64_t len;        /* row length */
    int64_t axis_st[3]; /* each operand's stride along the row */
    int64_t group;      /* rows per group, along the walk's last dim */
    int64_t groups;     /* groups per index of the other dims */
    bool x_direct, y_direct;
    bool columns;       /* groups of adjacent float32 columns go to rows->cols */
    bool batched;       /* groups of short rows go to rows->batch */
    size_t xi, yi, ai;
    atomic_int failed;
} rows_plan;

/* Byte offset of operand k for rows-walk index `outer` over every dim but
 * the last, and position g along the last. */
static int64_t row_offset(const rows_plan *p, int k, int64_t outer, int64_t g)
{
    const wf_cpu_iter *w = &p->walk;
    if (w->ndim == 0)
        return 0;
    const int last = w->ndim - 1;
    int64_t el = g * w->strides[k][last];
    for (int d = last - 1; d >= 0; d--) {
        el += (outer % w->shape[d]) * w->strides[k][d];
        outer /= w->shape[d];
    }
    return el * (int64_t)w->itemsize[k];
}

/* Copies rows [0, g) of length len between a strided operand (row stride
 * `rs`, element stride `es`, dtype dt) and a contiguous block of the
 * compute dtype; `raw` is room for the block in dt when dt differs. */
static void gather(const rows_plan *p, int64_t g, const char *src, wf_dtype dt, int64_t rs,
                   int64_t es, void *block, void *raw)
{
    const wf_dtype at = p->rows->at;
    const size_t item = wf_dtype_size(dt);
    if (es == 1) {
        for (int64_t r = 0; r < g; r++)
            wf__cpu_convert_1d(p->len, src + r * rs * (int64_t)item, dt, 1,
                               (char *)block + (size_t)(r * p->len) * p->ai, at, 1);
        return;
    }
    void *dst = dt == at ? block : raw;
    wf__cpu_copy_2d(g, p->len, item, src, rs, es, dst, p->len, 1);
    if (dt != at)
        wf__cpu_convert_1d(g * p->len, raw, dt, 1, block, at, 1);
}

static void scatter(const rows_plan *p, int64_t g, const void *block, char *dst, wf_dtype dt,
                    int64_t rs, int64_t es, void *raw)
{
    const wf_dtype at = p->rows->at;
    const size_t item = wf_dtype_size(dt);
    if (es == 1) {
        for (int64_t r = 0; r < g; r++)
            wf__cpu_convert_1d(p->len, (const char *)block + (size_t)(r * p->len) * p->ai, at, 1,
                               dst + r * rs * (int64_t)item, dt, 1);
        return;
    }
    const void *src = block;
    if (dt != at) {
        wf__cpu_convert_1d(g * p->len, block, at, 1, raw, dt, 1);
        src = raw;
    }
    wf__cpu_copy_2d(g, p->len, item, src, p->len, 1, dst, rs, es);
}

static void run_group(const rows_plan *p, int64_t task, char *xblock, char *yblock, char *raw)
{
    const wf_cpu_rows *rows = p->rows;
    const wf_cpu_iter *w = &p->walk;
    const int64_t outer = task / p->groups, g0 = (task % p->groups) * p->group;
    const int last = w->ndim - 1;
    const int64_t along = w->ndim > 0 ? w->shape[last] : 1;
    const int64_t g = along - g0 < p->group ? along - g0 : p->group;
    const int64_t rs[3] = {w->ndim > 0 ? w->strides[0][last] : 0,
                           w->ndim > 0 ? w->strides[1][last] : 0,
                           w->ndim > 0 ? w->strides[2][last] : 0};
    char *base[3];
    for (int k = 0; k < 3; k++)
        base[k] = w->data[k] + row_offset(p, k, outer, g0);
    if (p->columns) {
        rows->cols(rows, p->len, (int)g, (const float *)base[0], p->axis_st[0], (float *)base[2],
                   p->axis_st[2], rows->res != NULL ? base[1] : NULL,
                   rs[1] * (int64_t)rows->res_item, (float *)xblock);
        return;
    }
    if (!p->x_direct)
        gather(p, g, base[0], rows->x->dtype, rs[0], p->axis_st[0], xblock, raw);
    if (p->batched) {
        void *y = rows->y == NULL ? NULL : p->y_direct ? (void *)base[2] : (void *)yblock;
        rows->batch(rows, p->len, g, p->x_direct ? (const void *)base[0] : (const void *)xblock,
                    p->x_direct ? rs[0] : p->len, y, p->y_direct ? rs[2] : p->len,
                    rows->res != NULL ? base[1] : NULL, rs[1] * (int64_t)rows->res_item);
    }
    for (int64_t r = 0; r < g && !p->batched; r++) {
        const void *x = p->x_direct ? (const void *)(base[0] + r * rs[0] * (int64_t)p->xi)
                                    : (const void *)(xblock + (size_t)(r * p->len) * p->ai);
        void *y = NULL;
        if (rows->y != NULL)
            y = p->y_direct ? (void *)(base[2] + r * rs[2] * (int64_t)p->yi)
                            : (void *)(yblock + (size_t)(r * p->len) * p->ai);
        char *res = rows->res != NULL ? base[1] + r * rs[1] * (int64_t)rows->res_item : NULL;
        rows->row(rows, p->len, x, y, res);
    }
    if (rows->y != NULL && !p->y_direct)
        scatter(p, g, yblock, base[2], rows->y->dtype, rs[2], p->axis_st[2], raw);
}

static void run_tasks(void *arg, int64_t begin, int64_t end)
{
    rows_plan *p = arg;
    const size_t block = (size_t)(p->group * p->len);
    const size_t raw_item = p->xi > p->yi ? p->xi : p->yi;
    char *mem = NULL;
    if (p->columns) { /* the column form's blocks; it does without them (past 16 MB) */
        mem = block * sizeof(float) <= MAX_GATHER_BYTES ? wf__malloc(block * sizeof(float)) : NULL;
    } else if (!p->x_direct || (p->rows->y != NULL && !p->y_direct)) {
        mem = wf__malloc(block * (2 * p->ai + raw_item) + 64);
        if (mem == NULL) {
            atomic_store(&p->failed, 1);
            return;
        }
    }
    char *xblock = mem, *yblock = mem && !p->columns ? mem + block * p->ai : NULL;
    char *raw = mem && !p->columns ? mem + 2 * block * p->ai : NULL;
    for (int64_t t = begin; t < end; t++)
        run_group(p, t, xblock, yblock, raw);
    free(mem);
}

/* Drops dim a from the walk. */
static void drop_dim(wf_cpu_iter *w, int a)
{
    for (int d = a; d + 1 < w->ndim; d++) {
        w->shape[d] = w->shape[d + 1];
        for (int k = 0; k < w->nops; k++)
            w->strides[k][d] = w->strides[k][d + 1];
    }
    w->ndim--;
}

/* Rows per group. */
static int64_t group_size(const rows_plan *p, bool strided, int64_t along)
{
    if (p->x_direct && p->y_direct)
        return 1;
    const int64_t row_bytes = p->len * (int64_t)p->ai;
    int64_t g = GROUP_BYTES / row_bytes;
    if (strided && g < MIN_GROUP)
        g = MAX_GATHER_BYTES / row_bytes < MIN_GROUP ? MAX_GATHER_BYTES / row_bytes : MIN_GROUP;
    if (g < 1)
        g = 1;
    if (g > MAX_GROUP)
        g = MAX_GROUP;
    return g < along ? g : along;
}

wf_status wf__cpu_rows_run(const wf_cpu_rows *rows)
{
    const wf_array *x = rows->x;
    static char no_operand; /* where absent operands point (item size 0) */
    rows_plan *p = wf__calloc(1, sizeof *p);
    if (p == NULL)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "rows: out of memory");
    p->rows = rows;
    atomic_init(&p->failed, 0);
    char *data[3] = {wf__array_data_ptr(x), rows->res ? rows->res : &no_operand,
                     rows->y ? wf__array_data_ptr(rows->y) : &no_operand};
    const size_t items[3] = {wf_dtype_size(x->dtype), rows->res ? rows->res_item : 0,
                             rows->y ? wf_dtype_size(rows->y->dtype) : 0};
    const bool y_like_x = rows->y != NULL && !rows->y->row_contiguous; /* x's strides */
    const enum wf_cpu_layout lay[3] = {WF_CPU_LAYOUT_IN, WF_CPU_LAYOUT_ACC,
                                       y_like_x ? WF_CPU_LAYOUT_IN : WF_CPU_LAYOUT_FULL};
    wf__cpu_reduce_walk(&p->walk, x, rows->axes, 3, data, items, lay);
    int axis = -1, reduced = 0;
    for (int d = 0; d < p->walk.ndim; d++)
        if (p->walk.strides[1][d] == 0) {
            axis = d;
            reduced++;
        }
    wf_status st = WF_ERR_UNSUPPORTED;
    if (reduced <= 1 && !p->walk.empty) {
        p->len = 1; /* no reduced dim left: the reduced axes have size 1 */
        for (int k = 0; k < 3; k++)
            p->axis_st[k] = 1;
        if (reduced == 1) {
            p->len = p->walk.shape[axis];
            for (int k = 0; k < 3; k++)
                p->axis_st[k] = p->walk.strides[k][axis];
            drop_dim(&p->walk, axis);
        }
        p->xi = items[0];
        p->yi = items[2];
        p->ai = wf_dtype_size(rows->at);
        p->x_direct = p->axis_st[0] == 1 && x->dtype == rows->at;
        p->y_direct = rows->y == NULL || (p->axis_st[2] == 1 && rows->y->dtype == rows->at);
        const bool strided = p->axis_st[0] != 1 || (rows->y != NULL && p->axis_st[2] != 1);
        const int last = p->walk.ndim - 1;
        const int64_t along = p->walk.ndim > 0 ? p->walk.shape[last] : 1;
        int64_t outer = 1;
        for (int d = 0; d < last; d++)
            outer *= p->walk.shape[d];
        p->columns = rows->cols != NULL && rows->at == WF_DTYPE_F32 &&
                     x->dtype == WF_DTYPE_F32 && p->walk.ndim > 0 &&
                     p->walk.strides[0][last] == 1 && p->axis_st[0] != 1 &&
                     (rows->y == NULL ||
                      (rows->y->dtype == WF_DTYPE_F32 && p->walk.strides[2][last] == 1));
        p->batched = rows->batch != NULL && !p->columns && p->len <= WF_CPU_LEAF;
        if (p->columns) { /* wide groups unless their blocks would be large */
            p->group = p->len <= WIDE_COLUMNS_LEN ? WF_CPU_COLS_WIDE : WF_CPU_COLS;
            if (p->group > along)
                p->group = along;
        } else {
            p->group = group_size(p, strided, along);
        }
        /* Short rows batched: enough of them per call to pay for the call
         * (never fewer than the gathering of strided rows wants). */
        const int64_t batch = BATCH_ELEMENTS / p->len < along ? BATCH_ELEMENTS / p->len : along;
        if (p->batched && batch > p->group)
            p->group = batch;
        if (p->group < 1)
            p->group = 1;
        p->groups = (along + p->group - 1) / p->group;
        const int64_t work = p->group * p->len * (rows->row_cost > 0 ? rows->row_cost : 1);
        const int64_t min_tasks = WF_CPU_RED_CHEAP / work;
        wf__parallel_for(outer * p->groups, min_tasks > 0 ? min_tasks : 1, run_tasks, p);
        st = atomic_load(&p->failed)
                 ? wf__error(WF_ERR_OUT_OF_MEMORY, "rows: out of memory for a row group")
                 : WF_OK;
    }
    free(p);
    return st;
}
