/*
 * gather_mm and segmented_mm kernels (prim/matmul_family.h) on weft's GEMM.
 *
 * Both are a list of products of one shape M x N, each with its own A and
 * B matrices (gather_mm: the ones the indices pick; segmented_mm: the
 * columns / rows of one segment, so an inner length of its own). Operands
 * are prepared once in the GEMM's compute dtype (read in place when they
 * already are, as matmul does), every product is cut into the GEMM's blocks
 * of rows and columns, and the blocks of all products are spread over the
 * intra-op pool. K is never split, so each element has the bits gemm.h
 * promises whatever the thread count, the blocks or the other products.
 * Half-type results are computed in float32 and rounded once.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linalg.h"
#include "backend/cpu/matmul_family.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/matmul_family.h"
#include "runtime/pool.h"
#include "util/fault.h"

typedef struct product_list {
    wf_dtype compute, cdt;
    size_t item, citem;
    int isa;
    int64_t count, m, n, kmax;
    wf_cpu_mm_operand a, b;
    int64_t *a_off, *b_off, *k; /* per product: elements into a / b, inner length */
    char *c;                    /* (count, m, n) of cdt */
    int64_t mblock, nblock, mblocks, nblocks;
    atomic_int failed;
} product_list;

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

static void product_units(void *ctx, int64_t begin, int64_t end)
{
    product_list *p = ctx;
    wf_gemm_scratch scratch = {0};
    const int64_t per_product = p->mblocks * p->nblocks;
    for (int64_t u = begin; u < end; u++) {
        const int64_t q = u / per_product, ib = u % per_product / p->nblocks,
                      jb = u % p->nblocks;
        const int64_t i0 = ib * p->mblock, i1 = min64(p->m, i0 + p->mblock);
        const int64_t j0 = jb * p->nblock, j1 = min64(p->n, j0 + p->nblock);
        char *c = p->c + (size_t)(q * p->m * p->n) * p->citem;
        if (p->k[q] == 0) { /* an empty sum */
            for (int64_t i = i0; i < i1; i++)
                memset(c + (size_t)(i * p->n + j0) * p->citem, 0, (size_t)(j1 - j0) * p->citem);
            continue;
        }
        wf_gemm_args g;
        wf__gemm_args_init(&g, p->compute, p->m, p->n, p->k[q],
                           p->a.data + p->a_off[q] * (int64_t)p->item, p->a.rs, p->a.cs,
                           p->b.data + p->b_off[q] * (int64_t)p->item, p->b.rs, p->b.cs, c, p->n,
                           1.0, 0.0);
        g.isa = p->isa;
        if (wf__gemm_block(&g, i0, i1, j0, j1, &scratch) != WF_OK) {
            atomic_store(&p->failed, 1);
            break;
        }
    }
    wf__gemm_scratch_free(&scratch);
}

/* Runs the products of p (operands, offsets and lengths set) into out. */
static wf_status run_products(product_list *p, wf_array *out)
{
    wf_buffer *staged = NULL;
    p->c = wf__array_data_ptr(out);
    if (out->dtype != p->cdt) {
        staged = wf__buffer_alloc((size_t)out->size * p->citem);
        if (staged == NULL)
            return WF_ERR_OUT_OF_MEMORY;
        p->c = staged->data;
    }
    wf_gemm_args g;
    wf__gemm_args_init(&g, p->compute, p->m, p->n, p->kmax > 0 ? p->kmax : 1, p->a.data,
                       p->a.rs, p->a.cs, p->b.data, p->b.rs, p->b.cs, p->c, p->n, 1.0, 0.0);
    g.isa = p->isa;
    wf__gemm_blocks(&g, p->count, &p->mblock, &p->nblock);
    p->mblocks = (p->m + p->mblock - 1) / p->mblock;
    p->nblocks = (p->n + p->nblock - 1) / p->nblock;
    atomic_init(&p->failed, 0);
    wf__parallel_for(p->count * p->mblocks * p->nblocks, 1, product_units, p);
    wf_status st = WF_OK;
    if (atomic_load(&p->failed))
        st = wf__error(WF_ERR_OUT_OF_MEMORY, "matmul: out of memory for packing buffers");
    if (st == WF_OK && staged != NULL)
        wf__cpu_convert_1d(out->size, p->c, p->cdt, 1, wf__array_data_ptr(out), out->dtype, 1);
    if (staged != NULL)
        wf__buffer_release(staged);
    return st;
}

/* Sets up p for an output of `count` products m x n from a and b
 * (prepared with nb batch dims of sizes na / nbb), allocating the lists. */
static wf_status begin_products(const char *op, product_list *p, const wf_array *a,
                                const wf_array *b, wf_array *out, int nb, int64_t count)
{
    memset(p, 0, sizeof *p);
    p->isa = wf__gemm_isa();
    p->compute = wf__cpu_mm_compute_dtype(a->dtype, b->dtype, out->dtype, p->isa);
    p->cdt = p->compute == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    p->item = wf_dtype_size(p->compute);
    p->citem = wf_dtype_size(p->cdt);
    p->count = count;
    p->m = out->shape[out->ndim - 2];
    p->n = out->shape[out->ndim - 1];
    p->a_off = wf__malloc((size_t)count * sizeof *p->a_off);
    p->b_off = wf__malloc((size_t)count * sizeof *p->b_off);
    p->k = wf__malloc((size_t)count * sizeof *p->k);
    if (!p->a_off || !p->b_off || !p->k)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    const int64_t abatch = nb ? a->shape[0] : 1, bbatch = nb ? b->shape[0] : 1;
    wf_status st = wf__cpu_mm_prepare(a, nb, &abatch, p->compute, &p->a);
    if (st == WF_OK)
        st = wf__cpu_mm_prepare(b, nb, &bbatch, p->compute, &p->b);
    return st;
}

static void end_products(product_list *p)
{
    wf__cpu_mm_release(&p->a);
    wf__cpu_mm_release(&p->b);
    free(p->a_off);
    free(p->b_off);
    free(p->k);
}

/* The n elements of an index array as int64 into v. */
static void read_indices(const wf_array *ix, int64_t *v)
{
    int64_t row[WF_MAX_NDIM];
    wf__contiguous_strides(ix->shape, ix->ndim, row);
    wf__cpu_convert_strided(ix->ndim, ix->shape, wf__array_data_ptr(ix), ix->dtype, ix->strides,
                            v, WF_DTYPE_I64, row);
}

/* Indices into a batch of `dim` matrices as element offsets of op. */
static wf_status batch_offsets(const char *what, const wf_array *ix, int64_t dim,
                               const wf_cpu_mm_operand *op, int64_t *off)
{
    read_indices(ix, off);
    for (int64_t q = 0; q < ix->size; q++) {
        int64_t x = off[q];
        if (x < 0 && x >= -dim)
            x += dim;
        if (x < 0 || x >= dim)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "wf_gather_mm: %s index %lld is out of range for %lld matrices",
                             what, (long long)off[q], (long long)dim);
        off[q] = wf__cpu_mm_batch_offset(op, &dim, x);
    }
    return WF_OK;
}

wf_status wf__cpu_gather_mm(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *a = inputs[0], *b = inputs[1], *lhs = inputs[2], *rhs = inputs[3];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    product_list p;
    st = begin_products("wf_gather_mm", &p, a, b, out, 1, lhs->size);
    if (st == WF_OK)
        st = batch_offsets("lhs", lhs, a->shape[0], &p.a, p.a_off);
    if (st == WF_OK)
        st = batch_offsets("rhs", rhs, b->shape[0], &p.b, p.b_off);
    if (st == WF_OK) {
        p.kmax = a->shape[2];
        for (int64_t q = 0; q < p.count; q++)
            p.k[q] = p.kmax;
        st = run_products(&p, out);
    }
    end_products(&p);
    return st;
}

wf_status wf__cpu_segmented_mm(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *a = inputs[0], *b = inputs[1], *seg = inputs[2];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    product_list p;
    const int64_t count = seg->size / 2, k = a->shape[1];
    int64_t *bounds = NULL;
    st = begin_products("wf_segmented_mm", &p, a, b, out, 0, count);
    if (st == WF_OK && !(bounds = wf__malloc((size_t)(2 * count + 1) * sizeof *bounds)))
        st = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_segmented_mm: out of memory");
    if (st == WF_OK)
        read_indices(seg, bounds);
    for (int64_t q = 0; st == WF_OK && q < count; q++) {
        const int64_t s0 = bounds[2 * q], s1 = bounds[2 * q + 1];
        if (s0 < 0 || s0 > k || s1 < 0 || s1 > k) {
            st = wf__error(WF_ERR_INVALID_ARGUMENT,
                           "wf_segmented_mm: segment (%lld, %lld) is out of range for an inner "
                           "dimension of %lld",
                           (long long)s0, (long long)s1, (long long)k);
            break;
        }
        p.k[q] = s1 > s0 ? s1 - s0 : 0;
        p.a_off[q] = s0 * p.a.cs;
        p.b_off[q] = s0 * p.b.rs;
        p.kmax = p.k[q] > p.kmax ? p.k[q] : p.kmax;
    }
    if (st == WF_OK)
        st = run_products(&p, out);
    free(bounds);
    end_products(&p);
    return st;
}
