/* Matrix products: matmul and addmm, batched with broadcast leading axes,
 * on weft's GEMM (gemm.h).
 *
 * float32 and float64 multiply in their own type; bfloat16 @ bfloat16
 * multiplies bfloat16 panels (float32 sums) where the variant has
 * AVX512_BF16, else converts to float32; float16 and mixed dtypes convert
 * the operands to float32 once (but a half B of a few-row product, read as
 * it lies: gemm.h's b_stored). Half-type results are computed in float32
 * and rounded once. An operand already in the compute dtype is read in place
 * whatever its strides (the GEMM packs any layout); any other is copied to
 * contiguous once (broadcast batch dims are not expanded by the copy). When
 * b is the same matrix for every batch and a's batches are stacked rows,
 * the whole batch is one product with m * batches rows.
 *
 * Each product is split into blocks of rows and columns chosen from the
 * shape and the pool's size (wf__gemm_blocks) and the blocks of all the
 * batches are spread over the intra-op pool. K is never split, so results
 * are bitwise the same for any thread count and any blocks, and a row's
 * result does not depend on the other rows of its batch (gemm.h).
 *
 * Why not OpenBLAS (weft used it before). Measured side by side
 * (bench_matmul), weft's GEMM is within a few percent of OpenBLAS 0.3.21
 * where OpenBLAS knows the CPU, and several times faster where Debian's
 * build does not: it then falls back to its oldest x86-64 kernels, and
 * openblas_get_corename() names an old core ("Prescott", "Core2", ...).
 * OpenBLAS is also not batch-invariant (its gemv, gemm and edge kernels
 * round differently), runs large products on its own thread pool beside
 * weft's, and hides its synchronization from ThreadSanitizer. So weft's GEMM
 * is used for every dtype on every CPU, and the rule "keep OpenBLAS where it
 * is measurably faster" selects it nowhere; weft never touches OpenBLAS's
 * settings (the OPENBLAS_* environment is the user's). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linalg.h"
#include "core/error.h"
#include "prim/linalg.h"
#include "runtime/pool.h"
#include "util/fault.h"

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

wf_dtype wf__cpu_mm_compute_dtype(wf_dtype a, wf_dtype b, wf_dtype out, int isa)
{
    if (out == WF_DTYPE_F64)
        return WF_DTYPE_F64;
    if (a == WF_DTYPE_BF16 && b == WF_DTYPE_BF16 && wf__gemm_isa_has_bf16(isa))
        return WF_DTYPE_BF16;
    return WF_DTYPE_F32;
}

/* wf__cpu_mm_prepare; `unit_cs`: read x in place only if its columns are
 * contiguous (else copy). */
static wf_status mm_prepare(const wf_array *x, int nb, const int64_t *bshape, wf_dtype compute,
                            bool unit_cs, wf_cpu_mm_operand *op)
{
    memset(op, 0, sizeof *op);
    op->nb = nb;
    const int xb = x->ndim - 2;
    const int64_t r = x->shape[xb], c = x->shape[xb + 1];
    int64_t cshape[WF_MAX_NDIM + 2], sstrides[WF_MAX_NDIM + 2], dstrides[WF_MAX_NDIM + 2];
    for (int d = 0; d < nb; d++) {
        const int xd = d - (nb - xb);
        op->div[d] = 1;
        if (xd < 0 || x->shape[xd] == 1 || x->strides[xd] == 0) {
            op->bstrides[d] = 0;
            cshape[d] = 1;
        } else {
            op->bstrides[d] = x->strides[xd];
            op->div[d] = bshape[d] / x->shape[xd];
            cshape[d] = x->shape[xd];
        }
        sstrides[d] = op->bstrides[d];
    }
    if (x->dtype == compute && (!unit_cs || x->strides[xb + 1] == 1 || c == 1)) {
        op->data = wf__array_data_ptr(x);
        op->rs = x->strides[xb];
        op->cs = x->strides[xb + 1];
        return WF_OK;
    }
    cshape[nb] = r;
    cshape[nb + 1] = c;
    sstrides[nb] = x->strides[xb];
    sstrides[nb + 1] = x->strides[xb + 1];
    int64_t count = 1;
    for (int d = 0; d < nb + 2; d++)
        count *= cshape[d];
    wf_buffer *buf = wf__buffer_alloc((size_t)count * wf_dtype_size(compute));
    if (buf == NULL)
        return WF_ERR_OUT_OF_MEMORY; /* recorded by the allocator */
    wf__contiguous_strides(cshape, nb + 2, dstrides);
    if (count > 0)
        wf__cpu_convert_strided(nb + 2, cshape, wf__array_data_ptr(x), x->dtype, sstrides,
                                buf->data, compute, dstrides);
    for (int d = 0; d < nb; d++)
        op->bstrides[d] = cshape[d] > 1 ? dstrides[d] : 0;
    op->owned = buf;
    op->data = buf->data;
    op->rs = max1(c);
    op->cs = 1;
    return WF_OK;
}

wf_status wf__cpu_mm_prepare(const wf_array *x, int nb, const int64_t *bshape, wf_dtype compute,
                             wf_cpu_mm_operand *op)
{
    return mm_prepare(x, nb, bshape, compute, false, op);
}

void wf__cpu_mm_release(wf_cpu_mm_operand *op)
{
    if (op->owned != NULL)
        wf__buffer_release(op->owned);
    op->owned = NULL;
}

int64_t wf__cpu_mm_batch_offset(const wf_cpu_mm_operand *op, const int64_t *bshape,
                                int64_t index)
{
    int64_t off = 0;
    for (int d = op->nb - 1; d >= 0 && index > 0; d--) {
        const int64_t i = index % bshape[d];
        index /= bshape[d];
        off += (i / op->div[d]) * op->bstrides[d];
    }
    return off;
}

/* ---------------------------------------------------------------- batched product */

typedef struct mm_plan {
    wf_dtype compute; /* operands' dtype */
    wf_dtype b_stored; /* b's, where the GEMM reads it as it is (gemm.h), else compute */
    size_t item;      /* its size */
    wf_dtype cdt;     /* C's: float32, or float64 */
    size_t citem;     /* its size */
    int nb;
    int64_t bshape[WF_MAX_NDIM];
    int64_t batches, m, n, k;
    wf_cpu_mm_operand a, b;
    wf_buffer *b_buffer; /* b's buffer when b is read where it lies, else NULL */
    char *c; /* (batches, m, n) contiguous, cdt */
    double alpha, beta;
    int64_t mblock, mblocks; /* rows per unit of work, units per batch (column) */
    int64_t nblock, nblocks; /* columns per unit, units per batch (row) */
    wf_gemm_args g;          /* batch 0's product */
    atomic_int failed;
} mm_plan;

/* One gemm for the whole batch when b is shared and a's matrices are rows
 * stacked at a uniform stride. */
static void merge_batches(mm_plan *p)
{
    if (p->nb == 0)
        return;
    for (int d = 0; d < p->nb; d++)
        if (p->b.bstrides[d] != 0 || p->a.div[d] != 1)
            return;
    int64_t expected = p->m * p->a.rs;
    for (int d = p->nb - 1; d >= 0; d--) {
        if (p->bshape[d] == 1)
            continue;
        if (p->a.bstrides[d] != expected)
            return;
        expected *= p->bshape[d];
    }
    p->m *= p->batches;
    p->batches = 1;
    p->nb = 0;
    p->a.nb = 0;
    p->b.nb = 0;
}

/* Units of work: (batch, row block, column block), column block fastest. */
static void gemm_units(void *ctx, int64_t begin, int64_t end)
{
    mm_plan *p = ctx;
    wf_gemm_scratch scratch = {0};
    const int64_t per_batch = p->mblocks * p->nblocks;
    for (int64_t u = begin; u < end; u++) {
        const int64_t bi = u / per_batch, ib = u % per_batch / p->nblocks, jb = u % p->nblocks;
        wf_gemm_args g = p->g;
        g.a = p->a.data + wf__cpu_mm_batch_offset(&p->a, p->bshape, bi) * (int64_t)p->item;
        g.b = p->b.data + wf__cpu_mm_batch_offset(&p->b, p->bshape, bi) *
                              (int64_t)wf_dtype_size(p->b_stored);
        g.c = p->c + (size_t)(bi * p->m * p->n) * p->citem;
        const int64_t i0 = ib * p->mblock, j0 = jb * p->nblock;
        if (wf__gemm_block(&g, i0, min64(p->m, i0 + p->mblock), j0, min64(p->n, j0 + p->nblock),
                           &scratch) != WF_OK) {
            atomic_store(&p->failed, 1);
            break;
        }
    }
    wf__gemm_scratch_free(&scratch);
}

/* Is b the same matrix for every batch? */
static bool shared_b(const mm_plan *p)
{
    for (int d = 0; d < p->nb; d++)
        if (p->b.bstrides[d] != 0)
            return false;
    return true;
}

static wf_status run_gemm(mm_plan *p, int isa)
{
    wf__gemm_args_init(&p->g, p->compute, p->m, p->n, p->k, p->a.data, p->a.rs, p->a.cs,
                       p->b.data, p->b.rs, p->b.cs, p->c, p->n, p->alpha, p->beta);
    p->g.isa = isa;
    p->g.b_stored = p->b_stored;
    wf__gemm_blocks(&p->g, p->batches, &p->mblock, &p->nblock);
    if (p->b_buffer != NULL && shared_b(p))
        wf__gemm_use_packed_b(&p->g, p->b_buffer, p->mblock);
    p->mblocks = (p->m + p->mblock - 1) / p->mblock;
    p->nblocks = (p->n + p->nblock - 1) / p->nblock;
    atomic_init(&p->failed, 0);
    wf__parallel_for(p->batches * p->mblocks * p->nblocks, 1, gemm_units, p);
    if (atomic_load(&p->failed))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "matmul: out of memory for packing buffers");
    return WF_OK;
}

/* ---------------------------------------------------------------- complex64
 * A complex product is one float32 GEMM (gemm.h's complex64 B): A (m x k
 * complex, columns contiguous) is read in place as A' (m x 2k float32: re,
 * im of each element side by side), C' (m x 2n) is the output's re, im
 * pairs, written in place, and the GEMM makes B' (2k x 2n) from B (columns
 * contiguous) as it packs it, or reads B where it lies for a few rows.
 * Every element is sum_t a_t b_t in float32 FMAs in a fixed order
 * (gemm.h's rule over 2k terms), so the bits do not depend on threads or
 * the rows around it. A real operand is converted to complex64 first. */

/* p (complex64 operands prepared, m, n, k set) becomes the float32 plan of
 * A' B'. */
static void complex_plan(mm_plan *p)
{
    for (int d = 0; d < p->nb; d++)
        p->a.bstrides[d] *= 2;
    p->a.rs *= 2;
    p->a.cs = 1;
    p->compute = p->cdt = WF_DTYPE_F32;
    p->b_stored = WF_DTYPE_C64;
    p->item = p->citem = sizeof(float);
    p->n *= 2;
    p->k *= 2;
}

static wf_status complex_product(wf_array *out, const wf_array *a, const wf_array *b)
{
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    mm_plan p;
    memset(&p, 0, sizeof p);
    p.nb = out->ndim - 2;
    p.batches = 1;
    for (int d = 0; d < p.nb; d++) {
        p.bshape[d] = out->shape[d];
        p.batches *= out->shape[d];
    }
    p.m = out->shape[p.nb];
    p.n = out->shape[p.nb + 1];
    p.k = a->shape[a->ndim - 1];
    p.alpha = 1.0;
    p.c = wf__array_data_ptr(out);
    if (p.k == 0) {
        memset(p.c, 0, (size_t)out->size * sizeof(wf_cpu_c64));
        return WF_OK;
    }
    st = mm_prepare(a, p.nb, p.bshape, WF_DTYPE_C64, true, &p.a);
    if (st == WF_OK)
        st = mm_prepare(b, p.nb, p.bshape, WF_DTYPE_C64, true, &p.b);
    if (st == WF_OK) {
        complex_plan(&p);
        p.b_buffer = p.b.owned == NULL ? b->buffer : NULL;
        merge_batches(&p);
        st = run_gemm(&p, wf__gemm_isa());
    }
    wf__cpu_mm_release(&p.a);
    wf__cpu_mm_release(&p.b);
    return st;
}

/* out = alpha * (a @ b) + beta * c (c NULL: beta is 0). */
static wf_status batched_product(wf_array *out, const wf_array *a, const wf_array *b,
                                 const wf_array *c, double alpha, double beta)
{
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    mm_plan p;
    memset(&p, 0, sizeof p);
    const int isa = wf__gemm_isa(); /* one variant for the whole product */
    p.compute = wf__cpu_mm_compute_dtype(a->dtype, b->dtype, out->dtype, isa);
    p.item = wf_dtype_size(p.compute);
    p.cdt = p.compute == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    const size_t citem = wf_dtype_size(p.cdt);
    p.citem = citem;
    p.nb = out->ndim - 2;
    p.batches = 1;
    for (int d = 0; d < p.nb; d++) {
        p.bshape[d] = out->shape[d];
        p.batches *= out->shape[d];
    }
    p.m = out->shape[p.nb];
    p.n = out->shape[p.nb + 1];
    p.k = a->shape[a->ndim - 1];
    p.alpha = alpha;
    p.beta = c ? beta : 0.0;

    /* C: the output itself, or a float32 staging buffer for half types. */
    wf_buffer *staged = NULL;
    p.c = wf__array_data_ptr(out);
    if (out->dtype != p.cdt) {
        staged = wf__buffer_alloc((size_t)out->size * citem);
        if (staged == NULL)
            return WF_ERR_OUT_OF_MEMORY;
        p.c = staged->data;
    }
    int64_t cstrides[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, cstrides);
    if (c != NULL && beta != 0.0)
        wf__cpu_convert_strided(out->ndim, out->shape, wf__array_data_ptr(c), c->dtype,
                                c->strides, p.c, p.cdt, cstrides);

    if (p.k == 0) {
        /* An empty sum: alpha * 0 + beta * c. */
        if (c == NULL || beta == 0.0) {
            memset(p.c, 0, (size_t)out->size * citem);
        } else if (p.cdt == WF_DTYPE_F64) {
            double *cc = (double *)p.c;
            for (int64_t i = 0; i < out->size; i++)
                cc[i] *= beta;
        } else {
            float *cc = (float *)p.c;
            for (int64_t i = 0; i < out->size; i++)
                cc[i] *= (float)beta;
        }
    } else {
        /* A few rows times float16/bfloat16 weights (small-batch serving):
         * the GEMM converts b's elements as it reads them, not all of b up
         * front. */
        p.b_stored = p.compute == WF_DTYPE_F32 && p.batches == 1 &&
                             wf__gemm_reads_half_b(isa, b->dtype, p.m, b->strides[b->ndim - 2],
                                                   b->strides[b->ndim - 1])
                         ? b->dtype
                         : p.compute;
        st = wf__cpu_mm_prepare(a, p.nb, p.bshape, p.compute, &p.a);
        if (st == WF_OK)
            st = wf__cpu_mm_prepare(b, p.nb, p.bshape, p.b_stored, &p.b);
        if (st == WF_OK) {
            p.b_buffer = p.b.owned == NULL ? b->buffer : NULL;
            merge_batches(&p);
            st = run_gemm(&p, isa);
        }
        wf__cpu_mm_release(&p.a);
        wf__cpu_mm_release(&p.b);
    }
    if (st == WF_OK && staged != NULL)
        wf__cpu_convert_1d(out->size, p.c, p.cdt, 1, wf__array_data_ptr(out), out->dtype, 1);
    if (staged != NULL)
        wf__buffer_release(staged);
    return st;
}

wf_status wf__cpu_matmul(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    if (out->dtype == WF_DTYPE_C64)
        return complex_product(out, inputs[0], inputs[1]);
    return batched_product(out, inputs[0], inputs[1], NULL, 1.0, 0.0);
}

wf_status wf__cpu_addmm(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_addmm_params *p = params;
    return batched_product(out, inputs[0], inputs[1], inputs[2], p->alpha, p->beta);
}
