/* conv_general on the CPU (prim/conv.h for the semantics).
 *
 * Implicit GEMM. With rows r = (n, output position) and columns the output
 * channels of one group, a convolution is the product P (rows x K) W
 * (K x C_out/groups), where K = kernel positions x C_in/groups and row r of
 * P holds the input patch output r sees (zeros where it falls on padding,
 * or between dilated input elements on the transposed path). P is never
 * built whole: the output rows are cut into blocks, and for each block the
 * patch rows are gathered, K chunk by K chunk, into a per-thread buffer of
 * a few hundred KB that the GEMM (gemm.h) packs into its panels at once;
 * the weight is laid out once as W (contiguous rows), so the GEMM packs it
 * with its fast row copies.
 * Special cases:
 * - an input dilation (a transposed convolution, and its weight's
 *   cotangent): phase by phase, each phase a plain convolution over the
 *   taps that meet input elements (see "input dilation, phase by phase"
 *   below);
 * - a 1x1 kernel at stride 1 without padding or dilation of the input: P is
 *   the input itself (rows C_in apart), handed to the GEMM in place;
 * - a 1-d convolution (one group, no dilation): the patch of an output away
 *   from the edges is kernel x C_in contiguous elements of x, so such rows
 *   are handed to the GEMM in place too (rows stride x C_in apart), only
 *   the edge rows gathered;
 * - the weight's cotangent (x with batch and channels exchanged, few
 *   output rows over a long K): see "all positions at once" below;
 * - depthwise (one input and one output channel per group): direct loops
 *   vectorized over channels, the kernel positions summed in order (per
 *   row with the sums in registers; a huge kernel over few rows, as the
 *   weight's cotangent, in sets of rows; row by row with an input
 *   dilation).
 *
 * Reproducibility: the K chunks are a function of K alone, each chunk is
 * one GEMM call that adds to C (the first sets it), and the GEMM's bits for
 * a row never depend on the other rows of the call (gemm.h); the depthwise
 * loop sums each output in kernel order. Blocks of rows are spread over the
 * intra-op pool, so the result's bits never depend on the thread count.
 *
 * Types: float32 and float64 compute in their own type; bfloat16 multiplies
 * bfloat16 panels where the GEMM variant has AVX512_BF16 (float32 sums),
 * else goes through float32, as float16 does; half results are computed in
 * float32 and rounded once. */
#include <stdatomic.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "core/error.h"
#include "core/shape.h"
#include "prim/conv.h"
#include "runtime/pool.h"

/* K is cut into chunks of this many (a function of K alone) when longer
 * than CONV_KMAX: gradients with respect to the weight sum over a whole
 * batch of positions. */
enum { CONV_KMAX = 4096, CONV_KCHUNK = 1024 };
/* Patch buffer aimed at per thread (it stays in L2 while the GEMM packs). */
enum { CONV_PATCH_BYTES = 512 * 1024 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

typedef struct conv_plan {
    const wf_conv_params *p;
    int spatial;
    int64_t batch, cin, cout, cin_g, cout_g, groups;
    int64_t in_sp[WF_CONV_MAX_SPATIAL], out_sp[WF_CONV_MAX_SPATIAL];
    int64_t k_sp[WF_CONV_MAX_SPATIAL];
    int64_t in_pos_stride[WF_CONV_MAX_SPATIAL]; /* elements between input positions */
    int64_t kpos;                               /* kernel positions */
    int64_t rows;                               /* batch x output positions */
    int64_t kdim;                               /* kpos x cin_g */
    int64_t kchunk;
    wf_dtype compute; /* operands' dtype in the GEMM */
    size_t es;        /* its size */
    wf_dtype cdt;     /* C's: float32 or float64 */
    int isa;
    const char *x; /* (N, spatial..., C_in), compute dtype: contiguous, except for the
                      transposed product, which reads it through xstrides */
    int64_t xstrides[WF_CONV_MAX_SPATIAL + 2];
    const char *w; /* per group: W (kdim x cout_g) contiguous, compute dtype */
    char *c;       /* (rows, C_out) contiguous, cdt */
    bool direct_a; /* 1x1 case: P is x itself */
    bool rows_in_place; /* 1-d: P's rows inside x read in place (row_in_place) */
    int64_t mblock, mblocks;
    /* W packed once for all blocks of rows (wf__gemm_pack_b), group by group
     * and K chunk by K chunk, packed_per_chunk bytes a chunk (the room of a
     * full one: the variants' layouts need not be linear in k); or NULL */
    wf_buffer *packed;
    size_t packed_per_chunk;
    /* A phase of an input-dilated convolution (run_phases): each block of
     * rows is computed into a per-thread buffer and its rows copied to their
     * places in the output from there; or NULL: rows written to c. */
    const struct phase_scatter *scatter;
    atomic_int failed;
} conv_plan;

static wf_status prepare_input(const wf_array *x, wf_dtype compute, bool any_strides,
                               wf_buffer **owned, const char **data, int64_t *strides);
static void scatter_block(const struct phase_scatter *ps, int64_t g, int64_t row0, int64_t rows,
                          const char *block);

/* Does any axis dilate the input? */
static bool input_dilated(const conv_plan *pl)
{
    for (int d = 0; d < pl->spatial; d++)
        if (pl->p->input_dilation[d] > 1)
            return true;
    return false;
}

/* ---------------------------------------------------------------- patches */

/* Input position (per axis) of output position o and kernel offset k, or
 * -1 where it falls on padding or between dilated elements. */
static int64_t input_index(const conv_plan *pl, int d, int64_t o, int64_t k)
{
    const wf_conv_params *p = pl->p;
    const int64_t pos = o * p->strides[d] + k * p->kernel_dilation[d] - p->padding_lo[d];
    const int64_t idil = p->input_dilation[d];
    if (idil == 1)
        return pos >= 0 && pos < pl->in_sp[d] ? pos : -1;
    if (pos < 0 || pos % idil != 0)
        return -1;
    const int64_t i = pos / idil;
    return i < pl->in_sp[d] ? i : -1;
}

/* Decodes row r into its batch index and output position. */
static void row_coords(const conv_plan *pl, int64_t r, int64_t *n, int64_t *o)
{
    for (int d = pl->spatial - 1; d >= 0; d--) {
        o[d] = r % pl->out_sp[d];
        r /= pl->out_sp[d];
    }
    *n = r;
}

/* Per spatial axis d, for one output position: tab[d][k] = the offset
 * (elements) of the input position kernel offset k reads, or -1 on padding.
 * The tables hold sum(k_sp) entries (ksum in the plan). */
static void fill_axis_tables_from(const conv_plan *pl, int first, const int64_t *o,
                                  int64_t *const *tab)
{
    for (int d = first; d < pl->spatial; d++)
        for (int64_t k = 0; k < pl->k_sp[d]; k++) {
            const int64_t i = input_index(pl, d, o[d], k);
            tab[d][k] = i < 0 ? -1 : i * pl->in_pos_stride[d];
        }
}

static void fill_axis_tables(const conv_plan *pl, const int64_t *o, int64_t *const *tab)
{
    fill_axis_tables_from(pl, 0, o, tab);
}

/* The next row's batch index and output position; returns the first
 * spatial axis whose coordinate changed (the tables to refill from). */
static int row_next(const conv_plan *pl, int64_t *n, int64_t *o)
{
    for (int d = pl->spatial - 1; d >= 0; d--) {
        if (++o[d] < pl->out_sp[d])
            return d;
        o[d] = 0;
    }
    ++*n;
    return 0;
}

/* Offset of kernel position k (a multi-index) from the tables, -1 on padding. */
static int64_t table_offset(const conv_plan *pl, int64_t *const *tab, const int64_t *k)
{
    int64_t off = 0;
    for (int d = 0; d < pl->spatial; d++) {
        const int64_t v = tab[d][k[d]];
        if (v < 0)
            return -1;
        off += v;
    }
    return off;
}

/* Splits kernel position t into its multi-index. */
static void kernel_index(const conv_plan *pl, int64_t t, int64_t *k)
{
    for (int d = pl->spatial - 1; d >= 0; d--) {
        k[d] = t % pl->k_sp[d];
        t /= pl->k_sp[d];
    }
}

/* The next kernel position's multi-index (the last axis fastest). */
static void kernel_next(const conv_plan *pl, int64_t *k)
{
    for (int d = pl->spatial - 1; d >= 0; d--) {
        if (++k[d] < pl->k_sp[d])
            return;
        k[d] = 0;
    }
}

/* Per-thread room for the axis tables. */
typedef struct axis_tables {
    int64_t *tab[WF_CONV_MAX_SPATIAL];
    wf_buffer *buf;
} axis_tables;

static bool axis_tables_init(const conv_plan *pl, axis_tables *t)
{
    int64_t total = 0;
    for (int d = 0; d < pl->spatial; d++)
        total += pl->k_sp[d];
    t->buf = wf__buffer_alloc((size_t)total * sizeof(int64_t));
    if (t->buf == NULL)
        return false;
    int64_t *p = (int64_t *)t->buf->data;
    for (int d = 0; d < pl->spatial; d++) {
        t->tab[d] = p;
        p += pl->k_sp[d];
    }
    return true;
}

/* Elements between gathered patch rows of kc elements: kc, unless the rows
 * would then lie a multiple of 4 KB apart, in the same L1 sets, where the
 * GEMM packs them rather than read them in place (gemm.c's
 * rows_share_l1_set): 64 bytes more. (A 2x2 phase of 256 channels, rows of
 * 4 KB, spent 5% of its time packing.) */
static int64_t patch_row_stride(const conv_plan *pl, int64_t kc)
{
    const int64_t bytes = kc * (int64_t)pl->es;
    return bytes % 4096 == 0 ? kc + 64 / (int64_t)pl->es : kc;
}

/* dst (rows x kc, rows patch_row_stride apart) = P[row0 + i][k0 + j] for
 * group g. */
static void gather_patches(const conv_plan *pl, const axis_tables *at, int64_t g, int64_t row0,
                           int64_t rows, int64_t k0, int64_t kc, char *dst)
{
    const size_t es = pl->es;
    const int64_t batch_stride = pl->in_pos_stride[0] * pl->in_sp[0];
    int64_t n, o[WF_CONV_MAX_SPATIAL];
    row_coords(pl, row0, &n, o);
    fill_axis_tables(pl, o, at->tab);
    for (int64_t r = 0; r < rows; r++) {
        if (r > 0)
            fill_axis_tables_from(pl, row_next(pl, &n, o), o, at->tab);
        int64_t k[WF_CONV_MAX_SPATIAL];
        const char *base = pl->x + (size_t)(n * batch_stride + g * pl->cin_g) * es;
        char *d = dst + (size_t)(r * patch_row_stride(pl, kc)) * es;
        kernel_index(pl, k0 / pl->cin_g, k);
        int64_t ci = k0 % pl->cin_g;
        for (int64_t kk = k0; kk < k0 + kc;) {
            const int64_t run = min64(pl->cin_g - ci, k0 + kc - kk);
            const int64_t off = table_offset(pl, at->tab, k);
            if (off < 0)
                memset(d, 0, (size_t)run * es);
            else
                memcpy(d, base + (size_t)(off + ci) * es, (size_t)run * es);
            d += (size_t)run * es;
            kk += run;
            ci = 0;
            kernel_next(pl, k);
        }
    }
}

/* ---------------------------------------------------------------- GEMM path */

/* Does row r's patch lie whole and contiguous in x (a 1-d convolution
 * with one group, no dilation, the kernel inside the input)? Then P's rows
 * of one batch entry are x's rows `stride` apart, read in place. */
static bool row_in_place(const conv_plan *pl, int64_t r)
{
    const wf_conv_params *p = pl->p;
    if (!pl->rows_in_place)
        return false;
    const int64_t pos = r % pl->out_sp[0] * p->strides[0] - p->padding_lo[0];
    return pos >= 0 && pos + pl->k_sp[0] <= pl->in_sp[0];
}

/* W's K chunk length (the 1x1 case takes K whole) and how many chunks a
 * group has. */
static int64_t weight_chunk(const conv_plan *pl) { return pl->direct_a ? pl->kdim : pl->kchunk; }
static int64_t weight_chunks(const conv_plan *pl) { return ceil_div(pl->kdim, weight_chunk(pl)); }

/* Where group g's K chunk at k0 lies in pl->packed. */
static size_t packed_chunk_offset(const conv_plan *pl, int64_t g, int64_t k0)
{
    return (size_t)(g * weight_chunks(pl) + k0 / weight_chunk(pl)) * pl->packed_per_chunk;
}

/* `rows` rows of group g's columns [0, cout_g) into c (rows ldc apart),
 * over K columns [k0, k0 + kc): beta 0 for the first chunk, else 1. */
static wf_status gemm_chunk(const conv_plan *pl, const char *a, int64_t rsa, int64_t g,
                            int64_t rows, int64_t k0, int64_t kc, char *c, int64_t ldc,
                            wf_gemm_scratch *s)
{
    const size_t es = pl->es;
    const char *w = pl->w + (size_t)((g * pl->kdim + k0) * pl->cout_g) * es;
    wf_gemm_args ga;
    wf__gemm_args_init(&ga, pl->compute, rows, pl->cout_g, kc, a, rsa, 1, w, pl->cout_g, 1, c,
                       ldc, 1.0, k0 == 0 ? 0.0 : 1.0);
    ga.isa = pl->isa;
    if (pl->packed != NULL)
        ga.b_packed = (char *)pl->packed->data + packed_chunk_offset(pl, g, k0);
    for (int64_t j0 = 0; j0 < pl->cout_g; j0 += 512) {
        const wf_status st = wf__gemm_block(&ga, 0, rows, j0, min64(pl->cout_g, j0 + 512), s);
        if (st != WF_OK)
            return st;
    }
    return WF_OK;
}

/* C rows [row0, row0 + rows) of group g, every column: K chunk by K chunk,
 * runs of rows read in place where row_in_place allows, the others
 * gathered (the GEMM gives a row the same bits either way). Into `block`
 * (rows x cout_g) when set, else into C. */
static wf_status gemm_rows(const conv_plan *pl, const axis_tables *at, int64_t g, int64_t row0,
                           int64_t rows, char *patch, char *block, wf_gemm_scratch *s)
{
    const size_t es = pl->es, cs = wf_dtype_size(pl->cdt);
    const int64_t kchunk = weight_chunk(pl), ldc = block ? pl->cout_g : pl->cout;
    char *c0 = block ? block : pl->c + (size_t)(row0 * pl->cout + g * pl->cout_g) * cs;
    for (int64_t k0 = 0; k0 < pl->kdim; k0 += kchunk) {
        const int64_t kc = min64(kchunk, pl->kdim - k0);
        if (pl->direct_a) {
            const char *a = pl->x + (size_t)(row0 * pl->cin + g * pl->cin_g) * es;
            const wf_status st = gemm_chunk(pl, a, pl->cin, g, rows, k0, kc, c0, ldc, s);
            if (st != WF_OK)
                return st;
            continue;
        }
        for (int64_t r = row0; r < row0 + rows;) {
            /* a run: rows of one batch entry, all in place or all gathered */
            const bool here = row_in_place(pl, r);
            int64_t end = r + 1;
            while (end < row0 + rows && end % pl->out_sp[0] != 0 && row_in_place(pl, end) == here)
                end++;
            if (!pl->rows_in_place)
                end = row0 + rows;
            wf_status st;
            char *c = c0 + (size_t)((r - row0) * ldc) * cs;
            if (here) {
                const int64_t n = r / pl->out_sp[0], t = r % pl->out_sp[0];
                const int64_t pos = t * pl->p->strides[0] - pl->p->padding_lo[0];
                const char *a = pl->x + (size_t)((n * pl->in_sp[0] + pos) * pl->cin + k0) * es;
                st = gemm_chunk(pl, a, pl->p->strides[0] * pl->cin, g, end - r, k0, kc, c, ldc, s);
            } else {
                gather_patches(pl, at, g, r, end - r, k0, kc, patch);
                st = gemm_chunk(pl, patch, patch_row_stride(pl, kc), g, end - r, k0, kc, c, ldc,
                                s);
            }
            if (st != WF_OK)
                return st;
            r = end;
        }
    }
    return WF_OK;
}

/* Units of work: (group, block of rows). */
static void gemm_units(void *ctx, int64_t begin, int64_t end)
{
    conv_plan *pl = ctx;
    wf_gemm_scratch scratch = {0};
    wf_buffer *patch = NULL, *block = NULL;
    axis_tables at = {{NULL}, NULL};
    if (!pl->direct_a) {
        patch = wf__buffer_alloc((size_t)(pl->mblock * pl->kchunk) * pl->es + 64 * pl->mblock);
        if (patch == NULL || !axis_tables_init(pl, &at))
            begin = end;
    }
    if (pl->scatter != NULL) {
        block = wf__buffer_alloc((size_t)(pl->mblock * pl->cout_g) * wf_dtype_size(pl->cdt));
        if (block == NULL)
            begin = end;
    }
    if (begin == end)
        atomic_store(&pl->failed, 1);
    for (int64_t u = begin; u < end; u++) {
        const int64_t g = u / pl->mblocks, row0 = u % pl->mblocks * pl->mblock;
        const int64_t rows = min64(pl->mblock, pl->rows - row0);
        if (gemm_rows(pl, &at, g, row0, rows, patch ? patch->data : NULL,
                      block ? block->data : NULL, &scratch) != WF_OK) {
            atomic_store(&pl->failed, 1);
            break;
        }
        if (block != NULL)
            scatter_block(pl->scatter, g, row0, rows, block->data);
    }
    wf__gemm_scratch_free(&scratch);
    if (patch != NULL)
        wf__buffer_release(patch);
    if (block != NULL)
        wf__buffer_release(block);
    if (at.buf != NULL)
        wf__buffer_release(at.buf);
}

/* Rows per unit: the patch buffer within CONV_PATCH_BYTES, enough units to
 * keep the pool busy, then the rows dealt out evenly over that many units
 * (blocks of a multiple of 16 rows left a short last one: 8 x 14 x 14
 * rows ran as 7 blocks of 208 and one of 112, the threads' last units
 * unequal). */
static int64_t rows_per_block(const conv_plan *pl)
{
    const int64_t by_cache = CONV_PATCH_BYTES / max64(1, pl->kchunk * (int64_t)pl->es);
    int64_t mb = min64(256, max64(16, by_cache / 16 * 16));
    const int64_t units = 4 * (int64_t)wf__pool_size();
    const int64_t by_split = ceil_div(pl->rows * pl->groups, units);
    mb = min64(pl->rows, min64(mb, max64(16, ceil_div(by_split, 16) * 16)));
    return ceil_div(pl->rows, ceil_div(pl->rows, mb));
}

/* Rows per unit of the 1x1 case (nothing to gather): the GEMM's own
 * blocking of a product of this size, whole column strips. */
static int64_t rows_per_block_direct(const conv_plan *pl)
{
    wf_gemm_args g;
    wf__gemm_args_init(&g, pl->compute, pl->rows, pl->cout_g, pl->kdim, pl->x, pl->cin, 1, pl->w,
                       pl->cout_g, 1, pl->c, pl->cout, 1.0, 0.0);
    g.isa = pl->isa;
    int64_t mblock, nblock;
    wf__gemm_blocks(&g, pl->groups, &mblock, &nblock);
    if (nblock < pl->cout_g) /* the columns a unit would have had go to rows instead */
        mblock = max64(16, mblock / ceil_div(pl->cout_g, nblock));
    return min64(mblock, pl->rows);
}

/* W's K chunk at k0 (kc rows) of group g as the B of a product. */
static wf_gemm_args weight_args(const conv_plan *pl, int64_t g, int64_t k0, int64_t kc)
{
    wf_gemm_args gw;
    wf__gemm_args_init(&gw, pl->compute, 1, pl->cout_g, kc, NULL, kc, 1,
                       pl->w + (size_t)((g * pl->kdim + k0) * pl->cout_g) * pl->es, pl->cout_g,
                       1, NULL, pl->cout_g, 1.0, 0.0);
    gw.isa = pl->isa;
    return gw;
}

/* Packs W once when several blocks of rows would each pack it (a 3 x 3
 * layer's blocks of 256 rows spent ~5% of their time packing W again);
 * the blocks then read the packed panels (the same bits). */
static wf_status pack_weight(conv_plan *pl)
{
    const int64_t kchunk = weight_chunk(pl);
    const wf_gemm_args full = weight_args(pl, 0, 0, min64(kchunk, pl->kdim));
    if (pl->mblocks < 2 || !wf__gemm_can_pack_b(&full))
        return WF_OK;
    pl->packed_per_chunk = wf__gemm_packed_b_size(&full);
    pl->packed =
        wf__buffer_alloc((size_t)(pl->groups * weight_chunks(pl)) * pl->packed_per_chunk);
    if (pl->packed == NULL)
        return wf_last_error();
    for (int64_t g = 0; g < pl->groups; g++)
        for (int64_t k0 = 0; k0 < pl->kdim; k0 += kchunk) {
            const wf_gemm_args gw = weight_args(pl, g, k0, min64(kchunk, pl->kdim - k0));
            wf__gemm_pack_b(&gw, (char *)pl->packed->data + packed_chunk_offset(pl, g, k0));
        }
    return WF_OK;
}

static wf_status run_gemm(conv_plan *pl)
{
    pl->mblock = pl->direct_a ? rows_per_block_direct(pl) : rows_per_block(pl);
    pl->mblocks = ceil_div(pl->rows, pl->mblock);
    wf_status st = pack_weight(pl);
    if (st == WF_OK) {
        atomic_init(&pl->failed, 0);
        wf__parallel_for(pl->groups * pl->mblocks, 1, gemm_units, pl);
        if (atomic_load(&pl->failed))
            st = wf__error(WF_ERR_OUT_OF_MEMORY, "conv_general: out of memory for patch buffers");
    }
    if (pl->packed != NULL)
        wf__buffer_release(pl->packed);
    pl->packed = NULL;
    return st;
}

/* ---------------------------------------------------------------- few rows, long K
 * A convolution with few output rows and a long K (the weight's cotangent:
 * the kernel is the whole cotangent, the output the kernel's size) is
 * computed transposed, C^T (C_out/groups x rows) = W^T Q with Q = P^T, K
 * chunk by K chunk. Q's rows (one kernel position and input channel each)
 * are gathered from x through its strides with the output rows ordered
 * (position, batch): there the batch is the forward input's channel axis,
 * contiguous in memory, so each gather is a run of whole channel vectors,
 * where P's rows would be runs as short as the forward batch. Column blocks
 * go to threads; C^T is written back into the output at the end. */

enum { CONV_TCHUNK = 256, CONV_TCOLS = 96 };

/* Use the transposed product? */
static bool use_transposed(const conv_plan *pl)
{
    return !pl->direct_a && pl->kdim > CONV_KMAX && pl->rows <= 8192 && pl->kdim >= 8 * pl->rows;
}

/* dst (kc x cols, row-major) = Q[k0 + i][columns c0 + j], columns ordered
 * (output position, batch): column c is batch c % N at position c / N. */
static void gather_columns(const conv_plan *pl, const axis_tables *at, int64_t g, int64_t k0,
                           int64_t kc, int64_t c0, int64_t cols, char *dst)
{
    const size_t es = pl->es;
    const int64_t nb = pl->batch;
    const int64_t sb = pl->xstrides[0], sc = pl->xstrides[pl->spatial + 1];
    for (int64_t j0 = 0; j0 < cols;) {
        const int64_t c = c0 + j0, pos = c / nb, b0 = c % nb;
        const int64_t run = min64(nb - b0, cols - j0);
        int64_t n, o[WF_CONV_MAX_SPATIAL], k[WF_CONV_MAX_SPATIAL];
        row_coords(pl, pos, &n, o); /* n is 0: positions of one batch entry */
        fill_axis_tables(pl, o, at->tab);
        kernel_index(pl, k0 / pl->cin_g, k);
        int64_t ci = k0 % pl->cin_g;
        for (int64_t kk = 0; kk < kc; kk++) {
            char *d = dst + (size_t)(kk * cols + j0) * es;
            const int64_t off = table_offset(pl, at->tab, k);
            if (off < 0) {
                memset(d, 0, (size_t)run * es);
            } else {
                const char *src = pl->x + (off + (g * pl->cin_g + ci) * sc + b0 * sb) * (int64_t)es;
                if (sb == 1)
                    memcpy(d, src, (size_t)run * es);
                else
                    for (int64_t b = 0; b < run; b++)
                        memcpy(d + (size_t)b * es, src + b * sb * (int64_t)es, es);
            }
            if (++ci == pl->cin_g) {
                ci = 0;
                kernel_next(pl, k);
            }
        }
        j0 += run;
    }
}

/* Output columns [c0, c0 + cols) of group g: C^T into ct, then into C. */
static wf_status transposed_block(const conv_plan *pl, const axis_tables *at, int64_t g,
                                  int64_t c0, int64_t cols, char *q, char *ct,
                                  wf_gemm_scratch *s)
{
    const size_t es = pl->es, cs = wf_dtype_size(pl->cdt);
    const char *w = pl->w + (size_t)(g * pl->kdim * pl->cout_g) * es;
    for (int64_t k0 = 0; k0 < pl->kdim; k0 += CONV_TCHUNK) {
        const int64_t kc = min64(CONV_TCHUNK, pl->kdim - k0);
        gather_columns(pl, at, g, k0, kc, c0, cols, q);
        wf_gemm_args ga; /* A[co][kk] = W_g[kk][co] */
        wf__gemm_args_init(&ga, pl->compute, pl->cout_g, cols, kc,
                           w + (size_t)(k0 * pl->cout_g) * es, 1, pl->cout_g, q, cols, 1, ct,
                           cols, 1.0, k0 == 0 ? 0.0 : 1.0);
        ga.isa = pl->isa;
        const wf_status st = wf__gemm_block(&ga, 0, pl->cout_g, 0, cols, s);
        if (st != WF_OK)
            return st;
    }
    /* column c = (position, batch) is output row batch * positions + position */
    const int64_t nb = pl->batch, positions = pl->rows / nb;
    for (int64_t j = 0; j < cols; j++) {
        const int64_t c = c0 + j, row = (c % nb) * positions + c / nb;
        char *dst = pl->c + (size_t)(row * pl->cout + g * pl->cout_g) * cs;
        for (int64_t co = 0; co < pl->cout_g; co++)
            memcpy(dst + (size_t)co * cs, ct + (size_t)(co * cols + j) * cs, cs);
    }
    return WF_OK;
}

static void transposed_units(void *ctx, int64_t begin, int64_t end)
{
    conv_plan *pl = ctx;
    const int64_t blocks = ceil_div(pl->rows, CONV_TCOLS);
    wf_gemm_scratch scratch = {0};
    axis_tables at = {{NULL}, NULL};
    wf_buffer *q = wf__buffer_alloc((size_t)(CONV_TCHUNK * CONV_TCOLS) * pl->es);
    wf_buffer *ct = wf__buffer_alloc((size_t)(pl->cout_g * CONV_TCOLS) * wf_dtype_size(pl->cdt));
    if (q == NULL || ct == NULL || !axis_tables_init(pl, &at)) {
        atomic_store(&pl->failed, 1);
        begin = end;
    }
    for (int64_t u = begin; u < end; u++) {
        const int64_t g = u / blocks, c0 = u % blocks * CONV_TCOLS;
        if (transposed_block(pl, &at, g, c0, min64(CONV_TCOLS, pl->rows - c0), q->data, ct->data,
                             &scratch) != WF_OK) {
            atomic_store(&pl->failed, 1);
            break;
        }
    }
    wf__gemm_scratch_free(&scratch);
    if (q != NULL)
        wf__buffer_release(q);
    if (ct != NULL)
        wf__buffer_release(ct);
    if (at.buf != NULL)
        wf__buffer_release(at.buf);
}

static wf_status run_transposed(conv_plan *pl)
{
    atomic_init(&pl->failed, 0);
    wf__parallel_for(pl->groups * ceil_div(pl->rows, CONV_TCOLS), 1, transposed_units, pl);
    if (atomic_load(&pl->failed))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "conv_general: out of memory for patch buffers");
    return WF_OK;
}

/* ---------------------------------------------------------------- few rows, all positions at once
 * The same shape (few output positions, a long kernel: the weight's
 * cotangent) when x's batch axis is its contiguous one: x is the forward
 * input seen with batch and channels exchanged, w the forward cotangent.
 * With the rows of C ordered (batch b, position o), as C lies, C = A B
 * with B[(ci, t)][co] = w[co][t][ci] (a cotangent row of the forward:
 * output channels contiguous, and consecutive pairs (ci, t) consecutive
 * rows when the cotangent is contiguous: read in place) and
 * A[(b, o)][(ci, t)] = x[b][o * stride + t * kdil - lo][ci] (zero outside
 * x). The pairs are taken CONV_PCHUNK at a time; for each, A's rows are
 * gathered (a pair's x values for all b are contiguous, so a block's rows
 * are gathered in the order (o, b), one copy per pair and position) and
 * one GEMM call adds the chunk's product to the block's C, whose rows are
 * copied to their places at the end. Every position shares each packed
 * chunk of B, read once. A long K (a weight gradient over many images and
 * pixels) is cut into `parts` runs of chunks, each summed into its own
 * copy of C, and the copies are then added in order: so two threads each
 * gather whole rows of A for their own pixels, instead of each gathering
 * a slice of every row (a row of x read for a few of its channels) or the
 * same rows twice. The chunks and parts are a function of the shapes
 * alone, threads split only parts, C's rows (whole batch entries) and
 * columns, so the bits never depend on the thread count. */

enum {
    CONV_PCHUNK = 256,
    CONV_PROWS = 1024,
    CONV_PPOSITIONS = 256,
    CONV_PART_CHUNKS = 2, /* K chunks per part at least */
    CONV_MAX_PARTS = 16,
    CONV_PARTS_BYTES = 32 << 20 /* the parts' copies of C at most */
};

/* Its shape? x's batch axis contiguous, in the compute dtype, few output
 * positions (a kernel's) and no flip (w read in place). With an input
 * dilation, each phase (run_phases) is such a product. */
static bool by_position_fits(const conv_plan *pl, const wf_array *x)
{
    return !pl->p->flip && x->dtype == pl->compute && x->strides[0] == 1 && pl->batch >= 2 &&
           pl->rows / pl->batch <= CONV_PPOSITIONS;
}

/* Valid kernel indices t of axis d at output position o: [*lo, *hi). */
static void valid_taps(const conv_plan *pl, int d, int64_t o, int64_t *lo, int64_t *hi)
{
    const wf_conv_params *p = pl->p;
    const int64_t base = o * p->strides[d] - p->padding_lo[d], kd = p->kernel_dilation[d];
    if (kd == 1) { /* no division (the depthwise loop asks per row) */
        *lo = min64(max64(0, -base), pl->k_sp[d]);
        *hi = max64(*lo, min64(pl->in_sp[d] - base, pl->k_sp[d]));
        return;
    }
    /* 0 <= base + t kd < in */
    const int64_t first = base >= 0 ? 0 : ceil_div(-base, kd);
    const int64_t last = pl->in_sp[d] - 1 - base < 0 ? -1 : (pl->in_sp[d] - 1 - base) / kd;
    *lo = min64(first, pl->k_sp[d]);
    *hi = max64(*lo, min64(last + 1, pl->k_sp[d]));
}

typedef struct by_position {
    conv_plan *pl;
    const char *w; /* the weight read in place (compute dtype) */
    int64_t wstrides[WF_CONV_MAX_SPATIAL + 2];
    bool b_in_place;   /* consecutive pairs are rows of w ws_row apart */
    int64_t ws_row;
    int64_t positions; /* output positions per batch entry */
    int64_t bblock, bblocks, nblock, nblocks;
    int64_t parts, chunks; /* K cut into `parts` runs of whole chunks, as even as can be */
    char *partial[CONV_MAX_PARTS]; /* C for each part; partial[0] is C itself */
} by_position;

/* Per thread: the chunk's A (rows x CONV_PCHUNK), unless B is read in
 * place its B (CONV_PCHUNK x columns), and the block's C (rows x columns)
 * with its rows in A's order. */
typedef struct pair_bufs {
    char *a, *b, *c;
} pair_bufs;

/* Copies n elements of es bytes, src `stride` elements apart, to dst
 * `dstep` elements apart. */
static void gather_strided(char *dst, int64_t dstep, const char *src, int64_t n, int64_t stride,
                           size_t es)
{
    if (stride == 1 && dstep == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
#define GATHER_AS(T)                                                                           \
    do {                                                                                       \
        T *restrict d_ = (T *)(void *)dst;                                                     \
        const T *restrict s_ = (const T *)(const void *)src;                                   \
        for (int64_t i = 0; i < n; i++)                                                        \
            d_[i * dstep] = s_[i * stride];                                                    \
    } while (0)
    if (es == 4)
        GATHER_AS(uint32_t);
    else if (es == 8)
        GATHER_AS(uint64_t);
    else
        GATHER_AS(uint16_t);
#undef GATHER_AS
}

/* A's rows of batch entries [b0, b0 + nb) for the pairs [k0, k0 + kc) of
 * group g, into a stored transposed (a[k * rows + row]: each pair's x
 * values lie close together), the rows ordered (position o, batch entry
 * b): row o * nb + (b - b0). x's batch axis is contiguous
 * (by_position_fits), so a pair's values at one position are nb contiguous
 * elements, or zeros outside x: one copy each. (Ordered as C lies, (b, o),
 * they had to be interleaved element by element.) */
static void gather_pair_rows(const by_position *bp, int64_t g, int64_t b0, int64_t nb,
                             int64_t k0, int64_t kc, char *a)
{
    const conv_plan *pl = bp->pl;
    const wf_conv_params *p = pl->p;
    const size_t es = pl->es;
    const int64_t P = bp->positions, rows = nb * P;
    int64_t t[WF_CONV_MAX_SPATIAL];
    kernel_index(pl, k0 % pl->kpos, t);
    int64_t ci = k0 / pl->kpos;
    for (int64_t k = 0; k < kc; k++) {
        const int64_t chan = (g * pl->cin_g + ci) * pl->xstrides[pl->spatial + 1] +
                             b0 * pl->xstrides[0];
        int64_t o[WF_CONV_MAX_SPATIAL], unused;
        char *dst = a + (size_t)(k * rows) * es;
        for (int64_t op = 0; op < P; op++, dst += (size_t)nb * es) {
            if (op == 0)
                row_coords(pl, 0, &unused, o);
            else
                row_next(pl, &unused, o);
            int64_t off = chan;
            bool inside = true;
            for (int d = 0; d < pl->spatial && inside; d++) {
                const int64_t pos = o[d] * p->strides[d] + t[d] * p->kernel_dilation[d] -
                                    p->padding_lo[d];
                inside = pos >= 0 && pos < pl->in_sp[d];
                off += pos * pl->xstrides[d + 1];
            }
            if (inside)
                memcpy(dst, pl->x + off * (int64_t)es, (size_t)nb * es);
            else
                memset(dst, 0, (size_t)nb * es);
        }
        kernel_next(pl, t);
        bool wrapped = true; /* past the last kernel position: the next channel */
        for (int d = 0; d < pl->spatial; d++)
            wrapped = wrapped && t[d] == 0;
        ci += wrapped;
    }
}

/* w's element offset of pair k's row (group g, column j0). */
static int64_t pair_row_offset(const by_position *bp, int64_t g, int64_t j0, int64_t k)
{
    const conv_plan *pl = bp->pl;
    int64_t t[WF_CONV_MAX_SPATIAL];
    kernel_index(pl, k % pl->kpos, t);
    int64_t off = (g * pl->cout_g + j0) * bp->wstrides[0] +
                  k / pl->kpos * bp->wstrides[pl->spatial + 1];
    for (int d = 0; d < pl->spatial; d++)
        off += t[d] * bp->wstrides[d + 1];
    return off;
}

/* The first pair of part `part` (of parts + 1: the end): its first chunk
 * of the chunks dealt out evenly, the earlier parts taking fewer. */
static int64_t part_first_pair(const by_position *bp, int64_t part)
{
    return part * bp->chunks / bp->parts * CONV_PCHUNK;
}

/* Part `part`'s C rows of batch entries [b0, b0 + nb), columns [j0, j1)
 * of group g. */
static wf_status by_position_block(const by_position *bp, int64_t part, int64_t g, int64_t b0,
                                   int64_t nb, int64_t j0, int64_t j1, const pair_bufs *bufs,
                                   wf_gemm_scratch *s)
{
    const conv_plan *pl = bp->pl;
    const size_t es = pl->es, cs = wf_dtype_size(pl->cdt);
    const int64_t rows = nb * bp->positions, cols = j1 - j0;
    const int64_t kfirst = part_first_pair(bp, part);
    const int64_t kdim = min64(pl->kdim, part_first_pair(bp, part + 1));
    for (int64_t k0 = kfirst; k0 < kdim; k0 += CONV_PCHUNK) {
        const int64_t kc = min64(CONV_PCHUNK, kdim - k0);
        gather_pair_rows(bp, g, b0, nb, k0, kc, bufs->a);
        const char *b;
        int64_t rsb;
        if (bp->b_in_place) {
            b = bp->w + pair_row_offset(bp, g, j0, k0) * (int64_t)es;
            rsb = bp->ws_row;
        } else {
            for (int64_t k = 0; k < kc; k++)
                gather_strided(bufs->b + (size_t)(k * cols) * es, 1,
                               bp->w + pair_row_offset(bp, g, j0, k0 + k) * (int64_t)es, cols,
                               bp->wstrides[0], es);
            b = bufs->b;
            rsb = cols;
        }
        wf_gemm_args ga;
        wf__gemm_args_init(&ga, pl->compute, rows, cols, kc, bufs->a, 1, rows, b, rsb,
                           bp->b_in_place ? bp->wstrides[0] : 1, bufs->c, cols, 1.0,
                           k0 == kfirst ? 0.0 : 1.0);
        ga.isa = pl->isa;
        const wf_status st = wf__gemm_block(&ga, 0, rows, 0, cols, s);
        if (st != WF_OK)
            return st;
    }
    /* Row o * nb + i of the block is C's row (b0 + i) * positions + o. */
    char *c = bp->partial[part] + (size_t)(g * pl->cout_g + j0) * cs;
    for (int64_t o = 0; o < bp->positions; o++)
        for (int64_t i = 0; i < nb; i++)
            memcpy(c + (size_t)(((b0 + i) * bp->positions + o) * pl->cout) * cs,
                   bufs->c + (size_t)((o * nb + i) * cols) * cs, (size_t)cols * cs);
    return WF_OK;
}

static void by_position_units(void *ctx, int64_t begin, int64_t end)
{
    by_position *bp = ctx;
    conv_plan *pl = bp->pl;
    wf_gemm_scratch scratch = {0};
    const int64_t arows = bp->bblock * bp->positions;
    wf_buffer *abuf = wf__buffer_alloc((size_t)(arows * CONV_PCHUNK) * pl->es);
    wf_buffer *bbuf =
        bp->b_in_place ? NULL : wf__buffer_alloc((size_t)(CONV_PCHUNK * bp->nblock) * pl->es);
    wf_buffer *cbuf = wf__buffer_alloc((size_t)(arows * bp->nblock) * wf_dtype_size(pl->cdt));
    if (abuf == NULL || (!bp->b_in_place && bbuf == NULL) || cbuf == NULL) {
        atomic_store(&pl->failed, 1);
        begin = end;
    }
    const pair_bufs bufs = {abuf ? abuf->data : NULL, bbuf ? bbuf->data : NULL,
                            cbuf ? cbuf->data : NULL};
    for (int64_t u = begin; u < end; u++) {
        const int64_t j = u % bp->nblocks, rest = u / bp->nblocks;
        const int64_t bi = rest % bp->bblocks, gp = rest / bp->bblocks;
        const int64_t g = gp % pl->groups, part = gp / pl->groups;
        const int64_t b0 = bi * bp->bblock, j0 = j * bp->nblock;
        if (by_position_block(bp, part, g, b0, min64(bp->bblock, pl->batch - b0), j0,
                              min64(pl->cout_g, j0 + bp->nblock), &bufs, &scratch) != WF_OK) {
            atomic_store(&pl->failed, 1);
            break;
        }
    }
    wf__gemm_scratch_free(&scratch);
    if (abuf != NULL)
        wf__buffer_release(abuf);
    if (bbuf != NULL)
        wf__buffer_release(bbuf);
    if (cbuf != NULL)
        wf__buffer_release(cbuf);
}

/* Are w's rows for consecutive pairs (ci, t) evenly spaced (a contiguous
 * cotangent)? Their spacing in *row. */
static bool pair_rows_even(const conv_plan *pl, const int64_t *ws, int64_t *row)
{
    const int sp = pl->spatial;
    *row = ws[sp];
    for (int d = sp - 1; d >= 1; d--)
        if (ws[d] != ws[d + 1] * pl->k_sp[d])
            return false;
    return ws[sp + 1] == ws[1] * pl->k_sp[0] || pl->cin_g == 1;
}

/* The parts' sums added into C (part 0), in part order. */
static void add_parts(void *ctx, int64_t begin, int64_t end)
{
    const by_position *bp = ctx;
    if (bp->pl->cdt == WF_DTYPE_F64) {
        double *c = (double *)(void *)bp->partial[0];
        for (int64_t part = 1; part < bp->parts; part++) {
            const double *q = (const double *)(const void *)bp->partial[part];
            for (int64_t i = begin; i < end; i++)
                c[i] += q[i];
        }
        return;
    }
    float *c = (float *)(void *)bp->partial[0];
    for (int64_t part = 1; part < bp->parts; part++) {
        const float *q = (const float *)(const void *)bp->partial[part];
        for (int64_t i = begin; i < end; i++)
            c[i] += q[i];
    }
}

/* How many units (parts x groups x row blocks x column blocks). */
static int64_t by_position_units_count(const conv_plan *pl, const by_position *bp)
{
    return bp->parts * pl->groups * ceil_div(pl->batch, bp->bblock) *
           ceil_div(pl->cout_g, bp->nblock);
}

static void by_position_split(conv_plan *pl, by_position *bp)
{
    /* K parts of CONV_PART_CHUNKS chunks at least (a part's copy of C
     * costs one pass over it), CONV_PARTS_BYTES of copies at most. Then
     * units of whole column strips of at most 512 and all rows (one packed
     * B chunk serves them all) on one thread; else split, rows first (in
     * whole batch entries, 96 rows at least), until 4 units a thread. */
    bp->chunks = ceil_div(pl->kdim, CONV_PCHUNK);
    const int64_t c_bytes = pl->rows * pl->cout * (int64_t)wf_dtype_size(pl->cdt);
    bp->parts = min64(CONV_MAX_PARTS, bp->chunks / CONV_PART_CHUNKS);
    bp->parts = max64(1, min64(bp->parts, 1 + CONV_PARTS_BYTES / max64(c_bytes, 1)));
    const int64_t threads = wf__pool_size(), target = threads > 1 ? 4 * threads : 1;
    bp->nblock = min64(pl->cout_g, 512);
    bp->bblock = max64(1, min64(pl->batch, CONV_PROWS / bp->positions));
    const int64_t min_b = max64(1, ceil_div(96, bp->positions));
    while (bp->bblock > min_b && by_position_units_count(pl, bp) < target)
        bp->bblock = max64(min_b, ceil_div(bp->bblock, 2));
    while (bp->nblock > 64 && by_position_units_count(pl, bp) < threads)
        bp->nblock = ceil_div(bp->nblock / 2, 16) * 16;
    /* Blocks of rows as even as can be, and a unit count that the threads
     * share evenly where one more block of rows makes it so (the units of
     * a part being alike, one thread would otherwise run the last alone). */
    bp->bblocks = ceil_div(pl->batch, bp->bblock);
    const int64_t other = bp->parts * pl->groups * ceil_div(pl->cout_g, bp->nblock);
    if (threads > 1 && other * bp->bblocks % threads != 0 &&
        ceil_div(pl->batch, bp->bblocks + 1) >= min_b &&
        other * (bp->bblocks + 1) % threads == 0)
        bp->bblocks++;
    bp->bblock = ceil_div(pl->batch, bp->bblocks);
    bp->bblocks = ceil_div(pl->batch, bp->bblock);
    bp->nblocks = ceil_div(pl->cout_g, bp->nblock);
}

/* The product with w (compute dtype) read through `wstrides`. */
static wf_status by_position_product(conv_plan *pl, const char *w, const int64_t *wstrides)
{
    by_position bp = {.pl = pl, .w = w};
    memcpy(bp.wstrides, wstrides, sizeof bp.wstrides);
    bp.positions = pl->rows / pl->batch;
    bp.b_in_place = pair_rows_even(pl, bp.wstrides, &bp.ws_row);
    by_position_split(pl, &bp);
    const int64_t csize = pl->rows * pl->cout;
    const size_t cbytes = (size_t)csize * wf_dtype_size(pl->cdt);
    wf_buffer *parts_buf = bp.parts > 1 ? wf__buffer_alloc((size_t)(bp.parts - 1) * cbytes) : NULL;
    bp.partial[0] = pl->c;
    for (int64_t part = 1; part < bp.parts && parts_buf; part++)
        bp.partial[part] = (char *)parts_buf->data + (size_t)(part - 1) * cbytes;
    atomic_init(&pl->failed, 0);
    if (bp.parts > 1 && parts_buf == NULL)
        atomic_store(&pl->failed, 1);
    else
        wf__parallel_for(by_position_units_count(pl, &bp), 1, by_position_units, &bp);
    if (!atomic_load(&pl->failed) && bp.parts > 1)
        wf__parallel_for(csize, WF_CPU_CHUNK_CHEAP, add_parts, &bp);
    if (parts_buf != NULL)
        wf__buffer_release(parts_buf);
    if (atomic_load(&pl->failed))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "conv_general: out of memory for packing");
    return WF_OK;
}

static wf_status run_by_position(conv_plan *pl, const wf_array *w)
{
    wf_buffer *wbuf = NULL;
    const char *data;
    int64_t strides[WF_CONV_MAX_SPATIAL + 2] = {0}; /* w->ndim of them set */
    wf_status st = prepare_input(w, pl->compute, true, &wbuf, &data, strides);
    if (st == WF_OK)
        st = by_position_product(pl, data, strides);
    if (wbuf != NULL)
        wf__buffer_release(wbuf);
    return st;
}

/* ---------------------------------------------------------------- depthwise */

/* ---- Any input dilation: one output row at a time, acc[c] = sum over kernel
 * positions t (in order) of x[patch t][c] * wt[t][c]; float32 or float64
 * (`T`). Written once, compiled per instruction set. */
#define DEPTHWISE_BODY(T)                                                                      \
    do {                                                                                       \
        const T *restrict wt_ = (const T *)wt;                                                 \
        T *restrict acc_ = (T *)acc;                                                           \
        for (int64_t c = 0; c < channels; c++)                                                 \
            acc_[c] = 0;                                                                       \
        for (int64_t t = 0; t < npos; t++) {                                                   \
            if (offsets[t] < 0)                                                                \
                continue;                                                                      \
            const T *restrict xs_ = (const T *)x + offsets[t];                                 \
            const T *restrict wr_ = wt_ + t * channels;                                        \
            for (int64_t c = 0; c < channels; c++)                                             \
                acc_[c] += xs_[c] * wr_[c];                                                    \
        }                                                                                      \
    } while (0)

typedef void (*depthwise_row_fn)(int64_t channels, int64_t npos, const int64_t *offsets,
                                 const void *x, const void *wt, void *acc);

#define DEPTHWISE_VARIANT(name, T, attr)                                                       \
    attr static void name(int64_t channels, int64_t npos, const int64_t *offsets,              \
                          const void *x, const void *wt, void *acc)                            \
    {                                                                                          \
        DEPTHWISE_BODY(T);                                                                     \
    }

DEPTHWISE_VARIANT(depthwise_f32_base, float, )
DEPTHWISE_VARIANT(depthwise_f64_base, double, )
#if defined(__x86_64__) && defined(__GNUC__)
DEPTHWISE_VARIANT(depthwise_f32_avx2, float, __attribute__((target("avx2"))))
DEPTHWISE_VARIANT(depthwise_f64_avx2, double, __attribute__((target("avx2"))))
DEPTHWISE_VARIANT(depthwise_f32_avx512, float, __attribute__((target("avx512f"))))
DEPTHWISE_VARIANT(depthwise_f64_avx512, double, __attribute__((target("avx512f"))))
#endif

/* The variant for the GEMM's instruction set (products and sums round
 * separately in every one: C11 does not contract a * b + c). */
static depthwise_row_fn depthwise_variant(int isa, bool f64)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= WF_GEMM_ISA_AVX512)
        return f64 ? depthwise_f64_avx512 : depthwise_f32_avx512;
    if (isa == WF_GEMM_ISA_AVX2)
        return f64 ? depthwise_f64_avx2 : depthwise_f32_avx2;
#else
    (void)isa;
#endif
    return f64 ? depthwise_f64_base : depthwise_f32_base;
}

/* Rows begin..end one at a time (any input dilation). */
static void depthwise_rows(void *ctx, int64_t begin, int64_t end)
{
    conv_plan *pl = ctx;
    const size_t cs = wf_dtype_size(pl->cdt);
    const depthwise_row_fn row_fn = depthwise_variant(pl->isa, pl->cdt == WF_DTYPE_F64);
    const int64_t batch_stride = pl->in_pos_stride[0] * pl->in_sp[0];
    wf_buffer *obuf = wf__buffer_alloc((size_t)pl->kpos * sizeof(int64_t));
    axis_tables at = {{NULL}, NULL};
    if (obuf == NULL || !axis_tables_init(pl, &at)) {
        atomic_store(&pl->failed, 1);
        begin = end;
    }
    int64_t *offs = obuf ? (int64_t *)obuf->data : NULL;
    int64_t n = 0, o[WF_CONV_MAX_SPATIAL] = {0, 0, 0};
    if (begin < end) {
        row_coords(pl, begin, &n, o);
        fill_axis_tables(pl, o, at.tab);
    }
    for (int64_t r = begin; r < end; r++) {
        if (r > begin)
            fill_axis_tables_from(pl, row_next(pl, &n, o), o, at.tab);
        int64_t k[WF_CONV_MAX_SPATIAL] = {0, 0, 0};
        for (int64_t t = 0; t < pl->kpos; t++, kernel_next(pl, k)) {
            const int64_t off = table_offset(pl, at.tab, k);
            offs[t] = off < 0 ? -1 : off + n * batch_stride;
        }
        row_fn(pl->cout, pl->kpos, offs, pl->x, pl->w, pl->c + (size_t)(r * pl->cout) * cs);
    }
    if (obuf != NULL)
        wf__buffer_release(obuf);
    if (at.buf != NULL)
        wf__buffer_release(at.buf);
}


/* ---- Without input dilation, the kernel positions a row reads from x form
 * a box (valid_taps per axis). Per row and block of DW_CHANNELS channels,
 * the sums stay in registers while the box is walked (x and the weights
 * read once per kernel position); units are (block of channels, rows),
 * the channel block outermost, so that a huge kernel over a few rows (the
 * weight's cotangent, whose kernel is the forward's cotangent) re-reads its
 * slice of x and of the weights from cache. Each sum still runs over its
 * kernel positions in order, skipping those outside x, with the products
 * and sums rounded separately: the bits of depthwise_rows. */

enum { DW_ROWS = 64 };

/* The walk: per axis, kernel positions, x elements and weight elements
 * per kernel step; a row's x offset of (virtual) kernel position 0 and its
 * box. */
typedef struct dw_walk {
    int spatial;
    int64_t xstep[WF_CONV_MAX_SPATIAL], wstep[WF_CONV_MAX_SPATIAL];
    int64_t base, lo[WF_CONV_MAX_SPATIAL], hi[WF_CONV_MAX_SPATIAL];
} dw_walk;

/* out[c] = sum over the box, in order, of x[base + t . xstep + c] *
 * w[t . wstep + c], for c < cb: cb = NV vectors of 64 bytes (`V`, lanes of
 * `T`: float32 or float64) summed in registers, or, `tail`, fewer than one
 * vector, lane by lane. */
#define DEPTHWISE_BOX_WALK(T, STEP)                                                             \
    do {                                                                                       \
        const int last = wk->spatial - 1;                                                      \
        bool empty = false;                                                                    \
        int64_t t[WF_CONV_MAX_SPATIAL];                                                        \
        for (int d = 0; d < wk->spatial; d++) {                                                \
            t[d] = wk->lo[d];                                                                  \
            empty = empty || wk->hi[d] <= wk->lo[d];                                           \
        }                                                                                      \
        for (int d = 0; !empty && d >= 0;) {                                                   \
            int64_t xo = wk->base, wo = 0;                                                     \
            for (int e = 0; e < last; e++) {                                                   \
                xo += t[e] * wk->xstep[e];                                                     \
                wo += t[e] * wk->wstep[e];                                                     \
            }                                                                                  \
            for (int64_t tl = wk->lo[last]; tl < wk->hi[last]; tl++) {                         \
                const T *xs_ = x_ + xo + tl * wk->xstep[last];                                 \
                const T *ws_ = w_ + wo + tl * wk->wstep[last];                                 \
                STEP;                                                                          \
            }                                                                                  \
            for (d = last - 1; d >= 0; d--) {                                                  \
                if (++t[d] < wk->hi[d])                                                        \
                    break;                                                                     \
                t[d] = wk->lo[d];                                                              \
            }                                                                                  \
        }                                                                                      \
    } while (0)

#define DEPTHWISE_BOX_VARIANT(name, T, attr)                                                   \
    attr static void name(const dw_walk *wk, int nv, int64_t tail, const void *x,              \
                          const void *w, void *out)                                            \
    {                                                                                          \
        typedef T V __attribute__((vector_size(64)));                                          \
        const T *x_ = (const T *)x, *w_ = (const T *)w;                                        \
        if (tail > 0) {                                                                        \
            T acc[64 / sizeof(T)] = {0};                                                       \
            DEPTHWISE_BOX_WALK(T, for (int64_t c = 0; c < tail; c++) acc[c] += xs_[c] * ws_[c]); \
            memcpy(out, acc, (size_t)tail * sizeof(T));                                        \
        } else if (nv == 2) {                                                                  \
            V a0 = {0}, a1 = {0}, xv, wv;                                                      \
            DEPTHWISE_BOX_WALK(T, memcpy(&xv, xs_, 64); memcpy(&wv, ws_, 64); a0 += xv * wv;      \
                               memcpy(&xv, xs_ + 64 / sizeof(T), 64);                          \
                               memcpy(&wv, ws_ + 64 / sizeof(T), 64); a1 += xv * wv);          \
            memcpy(out, &a0, 64);                                                              \
            memcpy((char *)out + 64, &a1, 64);                                                 \
        } else {                                                                               \
            V a0 = {0}, xv, wv;                                                                \
            DEPTHWISE_BOX_WALK(T, memcpy(&xv, xs_, 64); memcpy(&wv, ws_, 64); a0 += xv * wv);     \
            memcpy(out, &a0, 64);                                                              \
        }                                                                                      \
    }

typedef void (*depthwise_box_fn)(const dw_walk *wk, int nv, int64_t tail, const void *x,
                                 const void *w, void *out);

DEPTHWISE_BOX_VARIANT(depthwise_box_f32_base, float, )
DEPTHWISE_BOX_VARIANT(depthwise_box_f64_base, double, )
#if defined(__x86_64__) && defined(__GNUC__)
DEPTHWISE_BOX_VARIANT(depthwise_box_f32_avx2, float, __attribute__((target("avx2"))))
DEPTHWISE_BOX_VARIANT(depthwise_box_f64_avx2, double, __attribute__((target("avx2"))))
DEPTHWISE_BOX_VARIANT(depthwise_box_f32_avx512, float, __attribute__((target("avx512f"))))
DEPTHWISE_BOX_VARIANT(depthwise_box_f64_avx512, double, __attribute__((target("avx512f"))))
#endif

static depthwise_box_fn depthwise_box_variant(int isa, bool f64)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= WF_GEMM_ISA_AVX512)
        return f64 ? depthwise_box_f64_avx512 : depthwise_box_f32_avx512;
    if (isa == WF_GEMM_ISA_AVX2)
        return f64 ? depthwise_box_f64_avx2 : depthwise_box_f32_avx2;
#else
    (void)isa;
#endif
    return f64 ? depthwise_box_f64_base : depthwise_box_f32_base;
}

/* A huge kernel over a few rows (the weight's cotangent) instead walks the
 * kernel once for a set of up to DW_SET rows of one batch entry and a block
 * of DW_SET_BYTES of channels: each kernel position's weights and the rows'
 * inputs are read as contiguous runs (a block of channels strided across
 * positions, as the per-row walk reads them, aliases in the caches when
 * the channel count is a power of two), the set's sums in a buffer in L1.
 * The bits are again those of depthwise_rows. */

enum { DW_SET = 16, DW_SET_BYTES = 512 };

typedef struct dw_set {
    int count;
    int64_t base[DW_SET];
    int64_t lo[DW_SET][WF_CONV_MAX_SPATIAL], hi[DW_SET][WF_CONV_MAX_SPATIAL];
} dw_set;

/* acc[i * cb + c] = row i's sum (its box, in order) for c < cb. */
#define DEPTHWISE_SET_VARIANT(name, T, attr)                                                   \
    attr static void name(const dw_walk *wk, const int64_t *k, const dw_set *set, int64_t cb,  \
                          const void *x, const void *w, void *acc)                             \
    {                                                                                          \
        const T *restrict x_ = (const T *)x;                                                   \
        const T *restrict w_ = (const T *)w;                                                   \
        T *restrict acc_ = (T *)acc;                                                           \
        const int sp = wk->spatial, last = sp - 1;                                             \
        for (int64_t i = 0; i < set->count * cb; i++)                                          \
            acc_[i] = 0;                                                                       \
        int64_t t[WF_CONV_MAX_SPATIAL] = {0, 0, 0};                                            \
        for (int d = 0; d >= 0;) {                                                             \
            int64_t xo = 0, wo = 0;                                                            \
            for (int e = 0; e < last; e++) {                                                   \
                xo += t[e] * wk->xstep[e];                                                     \
                wo += t[e] * wk->wstep[e];                                                     \
            }                                                                                  \
            bool in_box[DW_SET];                                                               \
            for (int i = 0; i < set->count; i++) {                                             \
                in_box[i] = true;                                                              \
                for (int e = 0; e < last; e++)                                                 \
                    in_box[i] = in_box[i] && t[e] >= set->lo[i][e] && t[e] < set->hi[i][e];    \
            }                                                                                  \
            for (int64_t tl = 0; tl < k[last]; tl++) {                                         \
                const T *restrict wr_ = w_ + wo + tl * wk->wstep[last];                        \
                for (int i = 0; i < set->count; i++) {                                         \
                    if (!in_box[i] || tl < set->lo[i][last] || tl >= set->hi[i][last])         \
                        continue;                                                              \
                    const T *restrict xs_ = x_ + set->base[i] + xo + tl * wk->xstep[last];     \
                    T *restrict a_ = acc_ + i * cb;                                            \
                    for (int64_t c = 0; c < cb; c++)                                           \
                        a_[c] += xs_[c] * wr_[c];                                              \
                }                                                                              \
            }                                                                                  \
            for (d = last - 1; d >= 0; d--) {                                                  \
                if (++t[d] < k[d])                                                             \
                    break;                                                                     \
                t[d] = 0;                                                                      \
            }                                                                                  \
        }                                                                                      \
    }

typedef void (*depthwise_set_fn)(const dw_walk *wk, const int64_t *k, const dw_set *set,
                                 int64_t cb, const void *x, const void *w, void *acc);

DEPTHWISE_SET_VARIANT(depthwise_set_f32_base, float, )
DEPTHWISE_SET_VARIANT(depthwise_set_f64_base, double, )
#if defined(__x86_64__) && defined(__GNUC__)
DEPTHWISE_SET_VARIANT(depthwise_set_f32_avx2, float, __attribute__((target("avx2"))))
DEPTHWISE_SET_VARIANT(depthwise_set_f64_avx2, double, __attribute__((target("avx2"))))
DEPTHWISE_SET_VARIANT(depthwise_set_f32_avx512, float, __attribute__((target("avx512f"))))
DEPTHWISE_SET_VARIANT(depthwise_set_f64_avx512, double, __attribute__((target("avx512f"))))
#endif

static depthwise_set_fn depthwise_set_variant(int isa, bool f64)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= WF_GEMM_ISA_AVX512)
        return f64 ? depthwise_set_f64_avx512 : depthwise_set_f32_avx512;
    if (isa == WF_GEMM_ISA_AVX2)
        return f64 ? depthwise_set_f64_avx2 : depthwise_set_f32_avx2;
#else
    (void)isa;
#endif
    return f64 ? depthwise_set_f64_base : depthwise_set_f32_base;
}

/* Use the boxed loop? No input dilation (its taps are no box). */
static bool depthwise_boxed(const conv_plan *pl)
{
    for (int d = 0; d < pl->spatial; d++)
        if (pl->p->input_dilation[d] != 1)
            return false;
    return true;
}

/* Channel blocks of the boxed loop: 2 vectors of 64 bytes (the last block
 * may be narrower). */
static int64_t dw_block_channels(const conv_plan *pl)
{
    return 128 / (int64_t)pl->es;
}

/* The walk's steps per axis (kernel dilation x position stride in x; the
 * weights laid out wt[t][c]). */
static void dw_walk_init(const conv_plan *pl, dw_walk *wk)
{
    wk->spatial = pl->spatial;
    int64_t wstep = pl->cout;
    for (int d = pl->spatial - 1; d >= 0; d--) {
        wk->xstep[d] = pl->p->kernel_dilation[d] * pl->in_pos_stride[d];
        wk->wstep[d] = wstep;
        wstep *= pl->k_sp[d];
    }
}

/* Row r's offset of kernel position 0 in x (batch entry n, position o) and
 * its box. */
static void dw_row_box(const conv_plan *pl, int64_t n, const int64_t *o, int64_t *base,
                       int64_t *lo, int64_t *hi)
{
    *base = n * pl->in_pos_stride[0] * pl->in_sp[0];
    for (int d = 0; d < pl->spatial; d++) {
        *base += (o[d] * pl->p->strides[d] - pl->p->padding_lo[d]) * pl->in_pos_stride[d];
        valid_taps(pl, d, o[d], &lo[d], &hi[d]);
    }
}

/* Use the sets (a huge kernel over few rows)? */
static bool dw_use_sets(const conv_plan *pl)
{
    return pl->kpos >= 256 && pl->rows / pl->batch <= 4 * DW_SET;
}

static void depthwise_sets(void *ctx, int64_t begin, int64_t end)
{
    conv_plan *pl = ctx;
    const size_t cs = wf_dtype_size(pl->cdt);
    const depthwise_set_fn set_fn = depthwise_set_variant(pl->isa, pl->cdt == WF_DTYPE_F64);
    const int64_t positions = pl->rows / pl->batch, spb = ceil_div(positions, DW_SET);
    const int64_t bc = DW_SET_BYTES / (int64_t)pl->es, blocks = ceil_div(pl->cout, bc);
    dw_walk wk;
    dw_walk_init(pl, &wk);
    _Alignas(64) char acc[DW_SET * DW_SET_BYTES];
    dw_set set;
    for (int64_t u = begin; u < end; u++) {
        const int64_t sidx = u / blocks, c0 = u % blocks * bc, cb = min64(bc, pl->cout - c0);
        const int64_t n = sidx / spb, first = sidx % spb * DW_SET;
        set.count = (int)min64(DW_SET, positions - first);
        int64_t unused, o[WF_CONV_MAX_SPATIAL];
        row_coords(pl, first, &unused, o);
        for (int i = 0; i < set.count; i++) {
            if (i > 0)
                row_next(pl, &unused, o);
            dw_row_box(pl, n, o, &set.base[i], set.lo[i], set.hi[i]);
        }
        set_fn(&wk, pl->k_sp, &set, cb, pl->x + (size_t)c0 * pl->es, pl->w + (size_t)c0 * pl->es,
               acc);
        for (int i = 0; i < set.count; i++)
            memcpy(pl->c + (size_t)((n * positions + first + i) * pl->cout + c0) * cs,
                   acc + (size_t)(i * cb) * cs, (size_t)cb * cs);
    }
}

static void depthwise_boxes(void *ctx, int64_t begin, int64_t end)
{
    conv_plan *pl = ctx;
    const size_t cs = wf_dtype_size(pl->cdt);
    const depthwise_box_fn box_fn = depthwise_box_variant(pl->isa, pl->cdt == WF_DTYPE_F64);
    const int64_t chunks = ceil_div(pl->rows, DW_ROWS), bc = dw_block_channels(pl);
    const int64_t lanes = 64 / (int64_t)pl->es;
    dw_walk wk;
    dw_walk_init(pl, &wk);
    for (int64_t u = begin; u < end; u++) {
        const int64_t c0 = u / chunks * bc, row0 = u % chunks * DW_ROWS;
        const int64_t cb = min64(bc, pl->cout - c0);
        int64_t n, o[WF_CONV_MAX_SPATIAL];
        row_coords(pl, row0, &n, o);
        for (int64_t r = row0; r < min64(pl->rows, row0 + DW_ROWS); r++) {
            if (r > row0)
                row_next(pl, &n, o);
            dw_row_box(pl, n, o, &wk.base, wk.lo, wk.hi);
            /* whole vectors, then the lanes left */
            for (int64_t c = c0; c < c0 + cb;) {
                const int64_t left = c0 + cb - c;
                const int nv = left >= 2 * lanes ? 2 : left >= lanes ? 1 : 0;
                box_fn(&wk, nv, nv ? 0 : left, pl->x + (size_t)c * pl->es,
                       pl->w + (size_t)c * pl->es, pl->c + (size_t)(r * pl->cout + c) * cs);
                c += nv ? nv * lanes : left;
            }
        }
    }
}

static wf_status run_depthwise(conv_plan *pl)
{
    atomic_init(&pl->failed, 0);
    if (depthwise_boxed(pl) && dw_use_sets(pl)) {
        const int64_t sets = pl->batch * ceil_div(pl->rows / pl->batch, DW_SET);
        wf__parallel_for(sets * ceil_div(pl->cout, DW_SET_BYTES / (int64_t)pl->es), 1,
                         depthwise_sets, pl);
    } else if (depthwise_boxed(pl)) {
        const int64_t units = ceil_div(pl->cout, dw_block_channels(pl)) * ceil_div(pl->rows, DW_ROWS);
        wf__parallel_for(units, 1, depthwise_boxes, pl);
    } else {
        const int64_t grain = max64(1, 4096 / max64(1, pl->kpos * pl->cout));
        wf__parallel_for(pl->rows, grain, depthwise_rows, pl);
    }
    if (atomic_load(&pl->failed))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "conv_general: out of memory");
    return WF_OK;
}

/* ---------------------------------------------------------------- input dilation, phase by phase
 * With an input dilation s on an axis (a transposed convolution), output o
 * reads x[(o * stride + t * kdil - lo) / s] only through the taps t that
 * make the division exact: the others meet the zeros between dilated
 * elements. The outputs of an axis fall into P = s / gcd(stride, s)
 * phases (o mod P), and phase phi's taps are t0 + j dt (dt = s / gcd(kdil,
 * s)), the same for all its outputs. So each phase is a plain convolution
 * of x with those taps (its own stride, kernel dilation and padding; no
 * product with a zero: a 2-d transposed convolution of stride 2 did four
 * times the work before), run on the path its shape takes (the GEMM's
 * blocks, the depthwise loops, or all positions at once for a weight
 * cotangent), its rows copied to the output positions phi + P i (by the
 * GEMM's blocks while they are in cache). Each output is the sum of its
 * taps' products in kernel order; the phases are a function of the shapes,
 * so the bits never depend on the thread count. */

typedef struct phase_axis {
    int64_t period;   /* P */
    int64_t first_tap, tap_step, taps; /* t0, dt, how many (0: none) */
    int64_t count;    /* outputs in the phase */
} phase_axis;

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Axis d of phase phi; *sub receives the phase's plain convolution
 * parameters for that axis (stride, kernel dilation, padding). */
static phase_axis phase_of_axis(const conv_plan *pl, int d, int64_t phi, wf_conv_params *sub)
{
    const wf_conv_params *p = pl->p;
    const int64_t s = p->input_dilation[d], st = p->strides[d], kd = p->kernel_dilation[d];
    const int64_t lo = p->padding_lo[d];
    phase_axis a = {.period = s / gcd64(st, s), .tap_step = s / gcd64(kd, s)};
    a.count = phi < pl->out_sp[d] ? ceil_div(pl->out_sp[d] - phi, a.period) : 0;
    int64_t t0 = 0;
    while (t0 < pl->k_sp[d] && ((phi * st + t0 * kd - lo) % s + s) % s != 0)
        t0++;
    a.first_tap = t0;
    a.taps = t0 < pl->k_sp[d] ? (pl->k_sp[d] - 1 - t0) / a.tap_step + 1 : 0;
    const int64_t c0 = a.taps > 0 ? (phi * st + t0 * kd - lo) / s : 0; /* exact */
    sub->strides[d] = a.period * st / s;
    sub->kernel_dilation[d] = a.tap_step * kd / s;
    sub->input_dilation[d] = 1;
    sub->padding_lo[d] = -c0;
    /* so that the phase's output length is `count` (the 1x1 case needs it) */
    sub->padding_hi[d] = (a.count - 1) * sub->strides[d] +
                         (max64(a.taps, 1) - 1) * sub->kernel_dilation[d] + 1 - pl->in_sp[d] + c0;
    return a;
}

/* The phase's weight: the rows of its taps out of pl->w (depthwise: wt[t][c];
 * else per group B_g[t * cin_g + ci][co]), in kernel order. */
static void phase_weight(const conv_plan *pl, const phase_axis *ax, bool depthwise, int64_t kpos,
                         char *dst)
{
    const size_t es = pl->es;
    const int64_t block = depthwise ? pl->groups : pl->cin_g * pl->cout_g;
    const int64_t groups = depthwise ? 1 : pl->groups;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t j = 0; j < kpos; j++) {
            int64_t rest = j, t = 0, scale = 1;
            for (int d = pl->spatial - 1; d >= 0; d--) {
                const int64_t jd = rest % ax[d].taps;
                rest /= ax[d].taps;
                t += (ax[d].first_tap + jd * ax[d].tap_step) * scale;
                scale *= pl->k_sp[d];
            }
            memcpy(dst + (size_t)((g * kpos + j) * block) * es,
                   pl->w + (size_t)((g * pl->kpos + t) * block) * es, (size_t)block * es);
        }
}

/* Where a phase's rows go: row r of the phase (batch entry, then its
 * positions i per axis) is output row (batch entry, phi + P i). */
typedef struct phase_scatter {
    const conv_plan *pl; /* the whole convolution's */
    const phase_axis *ax;
    const int64_t *phi;
    const char *rows; /* for scatter_phase_rows: all the phase's rows, or NULL: zeros */
    int64_t per_batch; /* the phase's outputs per batch entry */
} phase_scatter;

static char *phase_output_row(const phase_scatter *ps, int64_t r)
{
    const conv_plan *pl = ps->pl;
    int64_t rest = r % ps->per_batch, out = 0, scale = 1;
    for (int d = pl->spatial - 1; d >= 0; d--) {
        const int64_t i = rest % ps->ax[d].count;
        rest /= ps->ax[d].count;
        out += (ps->phi[d] + i * ps->ax[d].period) * scale;
        scale *= pl->out_sp[d];
    }
    return pl->c + (size_t)((r / ps->per_batch * scale + out) * pl->cout) * wf_dtype_size(pl->cdt);
}

/* Rows [row0, row0 + rows) of group g from a block (rows x cout_g): the
 * rows along the last axis go P output rows apart, found once per run. */
static void scatter_block(const phase_scatter *ps, int64_t g, int64_t row0, int64_t rows,
                          const char *block)
{
    const conv_plan *pl = ps->pl;
    const size_t cs = wf_dtype_size(pl->cdt), bytes = (size_t)pl->cout_g * cs;
    const phase_axis *last = &ps->ax[pl->spatial - 1];
    const size_t step = (size_t)(last->period * pl->cout) * cs;
    for (int64_t r = row0; r < row0 + rows;) {
        const int64_t run = min64(row0 + rows - r, last->count - r % last->count);
        char *dst = phase_output_row(ps, r) + (size_t)g * bytes;
        for (int64_t i = 0; i < run; i++, dst += step)
            memcpy(dst, block + (size_t)(r - row0 + i) * bytes, bytes);
        r += run;
    }
}

/* Whole rows begin..end of the phase, from ps->rows (or zeros). */
static void scatter_phase_rows(void *ctx, int64_t begin, int64_t end)
{
    const phase_scatter *ps = ctx;
    const size_t bytes = (size_t)ps->pl->cout * wf_dtype_size(ps->pl->cdt);
    for (int64_t r = begin; r < end; r++) {
        if (ps->rows != NULL)
            memcpy(phase_output_row(ps, r), ps->rows + (size_t)r * bytes, bytes);
        else
            memset(phase_output_row(ps, r), 0, bytes);
    }
}

/* Phases of axis d that hold outputs (at most its output length). */
static int64_t phases_of_axis(const conv_plan *pl, int d)
{
    const int64_t s = pl->p->input_dilation[d];
    return min64(s / gcd64(pl->p->strides[d], s), pl->out_sp[d]);
}

/* How each phase runs: the GEMM path over a cut of pl->w, the depthwise
 * loops over a cut of pl->w, or "all positions at once" over w itself,
 * its taps read through strides (a weight cotangent's shape). */
typedef enum phase_kind { PHASES_GEMM, PHASES_DEPTHWISE, PHASES_BY_POSITION } phase_kind;

/* Any input dilation: fills pl->c phase by phase (see above); `w` is the
 * weight array (read by PHASES_BY_POSITION only). */
static wf_status run_phases(conv_plan *pl, phase_kind kind, const wf_array *w)
{
    int64_t phases = 1;
    for (int d = 0; d < pl->spatial; d++)
        phases *= phases_of_axis(pl, d);
    /* The GEMM's blocks copy their rows out themselves (gemm_units); the
     * others write whole phases, copied out afterwards. */
    const size_t cs = wf_dtype_size(pl->cdt);
    const bool whole = kind != PHASES_GEMM, cut = kind != PHASES_BY_POSITION;
    wf_buffer *scratch = whole ? wf__buffer_alloc((size_t)pl->rows * (size_t)pl->cout * cs) : NULL;
    wf_buffer *wbuf =
        cut ? wf__buffer_alloc((size_t)(pl->groups * pl->kdim * pl->cout_g) * pl->es) : NULL;
    wf_buffer *wview = NULL;
    const char *wdata = NULL;
    int64_t wstrides[WF_CONV_MAX_SPATIAL + 2] = {0}; /* w->ndim of them set */
    wf_status st = WF_OK;
    if ((whole && scratch == NULL) || (cut && wbuf == NULL))
        st = wf__error(WF_ERR_OUT_OF_MEMORY, "conv_general: out of memory for a phase's rows");
    else if (!cut)
        st = prepare_input(w, pl->compute, true, &wview, &wdata, wstrides);
    for (int64_t f = 0; f < phases && st == WF_OK; f++) {
        wf_conv_params sub = *pl->p;
        phase_axis ax[WF_CONV_MAX_SPATIAL];
        int64_t phi[WF_CONV_MAX_SPATIAL], rest = f, kpos = 1, per_batch = 1;
        for (int d = pl->spatial - 1; d >= 0; d--) {
            phi[d] = rest % phases_of_axis(pl, d);
            rest /= phases_of_axis(pl, d);
        }
        for (int d = 0; d < pl->spatial; d++) {
            ax[d] = phase_of_axis(pl, d, phi[d], &sub);
            kpos *= ax[d].taps;
            per_batch *= ax[d].count;
        }
        sub.flip = false; /* pl->w is the kernel as applied */
        if (per_batch == 0)
            continue;
        phase_scatter ps = {pl, ax, phi, scratch ? scratch->data : NULL, per_batch};
        if (kpos == 0) { /* no tap reaches these outputs */
            ps.rows = NULL;
            wf__parallel_for(pl->batch * per_batch, 1024, scatter_phase_rows, &ps);
            continue;
        }
        conv_plan one;
        memcpy(&one, pl, sizeof one);
        one.p = &sub;
        one.kpos = kpos;
        one.kdim = kpos * pl->cin_g;
        one.kchunk = one.kdim > CONV_KMAX ? CONV_KCHUNK : one.kdim;
        one.rows = pl->batch * per_batch;
        bool unit = true;
        for (int d = 0; d < pl->spatial; d++) {
            one.out_sp[d] = ax[d].count;
            one.k_sp[d] = ax[d].taps;
            unit = unit && ax[d].taps == 1 && sub.strides[d] == 1 && sub.padding_lo[d] == 0 &&
                   sub.padding_hi[d] == 0;
        }
        one.direct_a = unit;
        one.rows_in_place = !unit && pl->spatial == 1 && pl->groups == 1 &&
                            sub.kernel_dilation[0] == 1;
        one.packed = NULL;
        if (kind == PHASES_GEMM) {
            phase_weight(pl, ax, false, kpos, wbuf->data);
            one.w = wbuf->data;
            one.scatter = &ps;
            st = run_gemm(&one);
            continue;
        }
        one.c = scratch->data;
        if (kind == PHASES_DEPTHWISE) {
            phase_weight(pl, ax, true, kpos, wbuf->data);
            one.w = wbuf->data;
            st = run_depthwise(&one);
        } else { /* the phase's taps of w: the first of each axis, dt apart */
            int64_t strides[WF_CONV_MAX_SPATIAL + 2];
            memcpy(strides, wstrides, sizeof strides);
            const char *first = wdata;
            for (int d = 0; d < pl->spatial; d++) {
                first += ax[d].first_tap * wstrides[d + 1] * (int64_t)pl->es;
                strides[d + 1] = wstrides[d + 1] * ax[d].tap_step;
            }
            st = by_position_product(&one, first, strides);
        }
        if (st == WF_OK)
            wf__parallel_for(one.rows, 1024, scatter_phase_rows, &ps);
    }
    if (scratch != NULL)
        wf__buffer_release(scratch);
    if (wbuf != NULL)
        wf__buffer_release(wbuf);
    if (wview != NULL)
        wf__buffer_release(wview);
    return st;
}

/* ---------------------------------------------------------------- setup */

/* x in the compute dtype, read in place when it already is that and
 * contiguous (or, `any_strides`, whatever its strides), else converted to
 * contiguous; `strides` receives the strides to read it with. */
static wf_status prepare_input(const wf_array *x, wf_dtype compute, bool any_strides,
                               wf_buffer **owned, const char **data, int64_t *strides)
{
    wf__contiguous_strides(x->shape, x->ndim, strides);
    bool in_place = x->dtype == compute;
    for (int d = 0; in_place && !any_strides && d < x->ndim; d++)
        in_place = x->shape[d] == 1 || x->strides[d] == strides[d];
    *owned = NULL;
    if (in_place) {
        *data = wf__array_data_ptr(x);
        if (any_strides)
            for (int d = 0; d < x->ndim; d++)
                strides[d] = x->strides[d];
        return WF_OK;
    }
    *owned = wf__buffer_alloc((size_t)x->size * wf_dtype_size(compute));
    if (*owned == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    wf__cpu_convert_strided(x->ndim, x->shape, wf__array_data_ptr(x), x->dtype, x->strides,
                            (*owned)->data, compute, strides);
    *data = (*owned)->data;
    return WF_OK;
}

/* The weight as the GEMM's B, per group g: B_g[t * cin_g + ci][co] =
 * w[g * cout_g + co][t (flipped if asked)][ci]; for the depthwise loop
 * (cin_g == cout_g == 1) it is laid out wt[t][c] instead. */
static wf_status prepare_weight(const conv_plan *pl, const wf_array *w, bool depthwise,
                                wf_buffer **owned)
{
    const int64_t total = pl->groups * pl->kdim * pl->cout_g;
    *owned = wf__buffer_alloc((size_t)max64(total, 1) * pl->es);
    if (*owned == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    /* Strided conversion: dst axes (g, t..., ci, co) read from w's (co, t..., ci). */
    const int s = pl->spatial;
    int64_t shape[WF_MAX_NDIM + 1], src[WF_MAX_NDIM + 1], dst[WF_MAX_NDIM + 1];
    const char *base = wf__array_data_ptr(w);
    const int64_t ws_co = w->strides[0], ws_ci = w->strides[s + 1];
    shape[0] = pl->groups;
    src[0] = pl->cout_g * ws_co;
    for (int d = 0; d < s; d++) {
        shape[1 + d] = pl->k_sp[d];
        src[1 + d] = pl->p->flip ? -w->strides[1 + d] : w->strides[1 + d];
        if (pl->p->flip)
            base += (pl->k_sp[d] - 1) * w->strides[1 + d] * (int64_t)wf_dtype_size(w->dtype);
    }
    shape[s + 1] = pl->cin_g;
    src[s + 1] = ws_ci;
    shape[s + 2] = pl->cout_g;
    src[s + 2] = ws_co;
    wf__contiguous_strides(shape, s + 3, dst);
    if (depthwise) { /* wt[t][g]: the channels of one kernel position side by side */
        int64_t step = pl->groups;
        for (int d = s - 1; d >= 0; d--) {
            dst[1 + d] = step;
            step *= pl->k_sp[d];
        }
        dst[0] = 1;
    }
    if (total > 0)
        wf__cpu_convert_strided(s + 3, shape, base, w->dtype, src, (*owned)->data, pl->compute,
                                dst);
    return WF_OK;
}

static void plan_shapes(conv_plan *pl, const wf_conv_params *p, const wf_array *x,
                        const wf_array *w, const wf_array *out)
{
    pl->p = p;
    pl->spatial = p->spatial;
    pl->batch = x->shape[0];
    pl->cin = x->shape[x->ndim - 1];
    pl->cout = w->shape[0];
    pl->cin_g = w->shape[w->ndim - 1];
    pl->groups = p->groups;
    pl->cout_g = pl->cout / p->groups;
    pl->kpos = 1;
    pl->rows = pl->batch;
    int64_t stride = pl->cin;
    for (int d = p->spatial - 1; d >= 0; d--) {
        pl->in_pos_stride[d] = stride;
        stride *= x->shape[d + 1];
    }
    for (int d = 0; d < p->spatial; d++) {
        pl->in_sp[d] = x->shape[d + 1];
        pl->out_sp[d] = out->shape[d + 1];
        pl->k_sp[d] = w->shape[d + 1];
        pl->kpos *= pl->k_sp[d];
        pl->rows *= pl->out_sp[d];
    }
    pl->kdim = pl->kpos * pl->cin_g;
    pl->kchunk = pl->kdim > CONV_KMAX ? CONV_KCHUNK : pl->kdim;
    bool one = true;
    for (int d = 0; d < p->spatial; d++)
        one = one && pl->k_sp[d] == 1 && p->strides[d] == 1 && p->padding_lo[d] == 0 &&
              p->padding_hi[d] == 0 && p->input_dilation[d] == 1;
    pl->direct_a = one;
    pl->rows_in_place = !one && p->spatial == 1 && p->groups == 1 &&
                        p->kernel_dilation[0] == 1 && p->input_dilation[0] == 1;
}

/* The operands' dtype: float64 and float32 their own; bfloat16 itself
 * where the GEMM variant multiplies it (not in the depthwise loop); else
 * float32. */
static wf_dtype compute_dtype(wf_dtype out, bool depthwise, int isa)
{
    if (out == WF_DTYPE_F64)
        return WF_DTYPE_F64;
    if (out == WF_DTYPE_BF16 && !depthwise && wf__gemm_isa_has_bf16(isa))
        return WF_DTYPE_BF16;
    return WF_DTYPE_F32;
}

wf_status wf__cpu_conv_general(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params)
{
    (void)ninputs;
    const wf_array *x = inputs[0], *w = inputs[1];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    conv_plan pl;
    memset(&pl, 0, sizeof pl);
    plan_shapes(&pl, params, x, w, out);
    const bool depthwise = pl.cin_g == 1 && pl.cout_g == 1 && pl.groups > 1;
    pl.isa = wf__gemm_isa(); /* one variant for the whole convolution */
    pl.compute = compute_dtype(out->dtype, depthwise, pl.isa);
    pl.es = wf_dtype_size(pl.compute);
    pl.cdt = pl.compute == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    const size_t cs = wf_dtype_size(pl.cdt);

    wf_buffer *staged = NULL, *xbuf = NULL, *wbuf = NULL;
    pl.c = wf__array_data_ptr(out);
    if (out->dtype != pl.cdt) {
        staged = wf__buffer_alloc((size_t)out->size * cs);
        if (staged == NULL)
            return WF_ERR_OUT_OF_MEMORY;
        pl.c = staged->data;
    }
    if (pl.kdim == 0 || x->size == 0) {
        memset(pl.c, 0, (size_t)out->size * cs); /* an empty sum */
    } else {
        const bool dilated = input_dilated(&pl);
        const bool positions = !depthwise && by_position_fits(&pl, x); /* x through its strides */
        const bool transposed = !depthwise && (positions || use_transposed(&pl));
        st = prepare_input(x, pl.compute, transposed, &xbuf, &pl.x, pl.xstrides);
        for (int d = 0; transposed && d < pl.spatial; d++)
            pl.in_pos_stride[d] = pl.xstrides[d + 1]; /* the tables follow x's strides */
        if (st == WF_OK && positions)
            st = dilated ? run_phases(&pl, PHASES_BY_POSITION, w) : run_by_position(&pl, w);
        else if (st == WF_OK)
            st = prepare_weight(&pl, w, depthwise, &wbuf);
        if (st == WF_OK && !positions) {
            pl.w = wbuf->data;
            if (!transposed && dilated)
                st = run_phases(&pl, depthwise ? PHASES_DEPTHWISE : PHASES_GEMM, w);
            else if (depthwise)
                st = run_depthwise(&pl);
            else
                st = transposed ? run_transposed(&pl) : run_gemm(&pl);
        }
    }
    if (st == WF_OK && staged != NULL)
        wf__cpu_convert_1d(out->size, pl.c, pl.cdt, 1, wf__array_data_ptr(out), out->dtype, 1);
    if (staged != NULL)
        wf__buffer_release(staged);
    if (xbuf != NULL)
        wf__buffer_release(xbuf);
    if (wbuf != NULL)
        wf__buffer_release(wbuf);
    return st;
}
