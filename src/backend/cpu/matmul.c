/* Matrix products through BLAS (OpenBLAS cblas): matmul and addmm, batched
 * with broadcast leading axes.
 *
 * float32 -> sgemm, float64 -> dgemm, float16/bfloat16 (and mixed dtypes) ->
 * operands converted to float32 once, sgemm, result converted back. An
 * operand whose matrices BLAS can read where they lie (row-contiguous, or
 * transposed row-contiguous, with any leading dimension) is passed in place
 * with CblasNoTrans/CblasTrans; any other layout is copied to contiguous
 * once (broadcast batch dims are not expanded by the copy). When b is the
 * same matrix for every batch and a's batches are stacked rows, the whole
 * batch is one gemm with m * batches rows.
 *
 * Threads. OpenBLAS (the pthread build) has its own thread pool, sized by
 * the user's OPENBLAS_NUM_THREADS / OMP_NUM_THREADS; weft never changes it
 * (openblas_set_num_threads is process-global and would override the user's
 * choice; the OPENBLAS_* environment, OPENBLAS_CORETYPE included, is left
 * alone). OpenBLAS runs a gemm with m * n * k <= 2^18 on the calling thread
 * and larger ones on its pool. So:
 *  - products that are large enough for OpenBLAS to thread are called one
 *    after another from the kernel's thread, and OpenBLAS spreads each over
 *    its threads while weft's pool threads sleep;
 *  - many small products (batches, or row blocks of one product, each at or
 *    below 2^18) are spread over weft's intra-op pool, each gemm running
 *    single-threaded inside OpenBLAS on the pool thread that called it.
 * The two pools are therefore never both busy for one kernel. When OpenBLAS
 * runs with one thread (OPENBLAS_NUM_THREADS=1), weft's pool is the only
 * parallelism and every product is split over it by batches and rows. */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/linalg.h"
#include "core/error.h"
#include "prim/linalg.h"
#include "runtime/pool.h"

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* Can BLAS read an (r x c) matrix with strides (s0, s1) where it lies? */
static bool blas_layout(int64_t r, int64_t c, int64_t s0, int64_t s1,
                        enum CBLAS_TRANSPOSE *trans, int64_t *ld)
{
    if ((c == 1 || s1 == 1) && (r == 1 || s0 >= max1(c))) {
        *trans = CblasNoTrans;
        *ld = r == 1 ? max1(c) : s0;
    } else if ((r == 1 || s0 == 1) && (c == 1 || s1 >= max1(r))) {
        *trans = CblasTrans;
        *ld = c == 1 ? max1(r) : s1;
    } else {
        return false;
    }
    return *ld <= INT_MAX;
}

wf_status wf__cpu_mm_prepare(const wf_array *x, int nb, const int64_t *bshape, wf_dtype compute,
                             wf_cpu_mm_operand *op)
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
    if (x->dtype == compute &&
        blas_layout(r, c, x->strides[xb], x->strides[xb + 1], &op->trans, &op->ld)) {
        op->data = wf__array_data_ptr(x);
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
    op->trans = CblasNoTrans;
    op->ld = max1(c);
    return WF_OK;
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

void wf__cpu_gemm(wf_dtype compute, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int64_t m,
                  int64_t n, int64_t k, double alpha, const void *a, int64_t lda, const void *b,
                  int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (compute == WF_DTYPE_F64)
        cblas_dgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, alpha, a,
                    (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, (float)alpha, a,
                    (blasint)lda, b, (blasint)ldb, (float)beta, c, (blasint)ldc);
}

/* ---------------------------------------------------------------- batched product */

typedef struct mm_plan {
    wf_dtype compute;
    size_t item;
    int nb;
    int64_t bshape[WF_MAX_NDIM];
    int64_t batches, m, n, k;
    wf_cpu_mm_operand a, b;
    char *c; /* (batches, m, n) contiguous, compute dtype */
    double alpha, beta;
    int64_t mblock, mblocks; /* rows per unit of work, units per batch */
} mm_plan;

static void run_unit(const mm_plan *p, int64_t unit)
{
    const int64_t bi = unit / p->mblocks, r0 = (unit % p->mblocks) * p->mblock;
    const int64_t rows = p->m - r0 < p->mblock ? p->m - r0 : p->mblock;
    const int64_t oa = wf__cpu_mm_batch_offset(&p->a, p->bshape, bi) +
                       wf__cpu_mm_row_offset(&p->a, r0);
    const int64_t ob = wf__cpu_mm_batch_offset(&p->b, p->bshape, bi);
    char *c = p->c + (size_t)(bi * p->m * p->n + r0 * p->n) * p->item;
    wf__cpu_gemm(p->compute, p->a.trans, p->b.trans, rows, p->n, p->k, p->alpha,
                 p->a.data + (size_t)oa * p->item, p->a.ld, p->b.data + (size_t)ob * p->item,
                 p->b.ld, p->beta, c, p->n);
}

static void run_units(void *ctx, int64_t begin, int64_t end)
{
    const mm_plan *p = ctx;
    for (int64_t u = begin; u < end; u++)
        run_unit(p, u);
}

/* One gemm for the whole batch when b is shared and a's matrices are rows
 * stacked at a uniform stride. */
static void merge_batches(mm_plan *p)
{
    if (p->nb == 0 || p->a.trans != CblasNoTrans)
        return;
    for (int d = 0; d < p->nb; d++)
        if (p->b.bstrides[d] != 0 || p->a.div[d] != 1)
            return;
    int64_t expected = p->m * p->a.ld;
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

/* Chooses rows per unit of work (see the comment at the top). Returns false
 * when the products should run one after another, threaded by OpenBLAS. */
static bool plan_split(mm_plan *p)
{
    p->mblock = p->m;
    p->mblocks = 1;
    const int pool = wf__pool_size();
    if (pool <= 1)
        return false;
    const int64_t nk = p->n * p->k;
    if (openblas_get_num_threads() <= 1) {
        /* weft's pool is the only parallelism: about 4 units per thread. */
        const int64_t target = 4 * (int64_t)pool;
        const int64_t per_batch = (target + p->batches - 1) / p->batches;
        const int64_t rows = (p->m + per_batch - 1) / per_batch;
        const int64_t floor_rows = p->m < 32 ? p->m : 32;
        p->mblock = rows > floor_rows ? rows : floor_rows;
    } else if (nk <= WF_CPU_BLAS_SINGLE_THREAD_MNK) {
        /* Units that OpenBLAS runs single-threaded; blocks of fewer than 8
         * rows would repack b too often: leave those to OpenBLAS. */
        const int64_t rows = WF_CPU_BLAS_SINGLE_THREAD_MNK / nk;
        if (rows < p->m && rows < 8)
            return false;
        p->mblock = rows >= p->m ? p->m : rows - rows % 8;
    } else {
        return false;
    }
    p->mblocks = (p->m + p->mblock - 1) / p->mblock;
    return p->batches * p->mblocks > 1;
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
    p.compute = out->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    p.item = wf_dtype_size(p.compute);
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
    if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
        return wf__error(WF_ERR_UNSUPPORTED,
                         "matmul: matrices of (%lld, %lld) @ (%lld, %lld) exceed BLAS's int range",
                         (long long)p.m, (long long)p.k, (long long)p.k, (long long)p.n);

    /* C: the output itself, or a float32 staging buffer for half types. */
    wf_buffer *staged = NULL;
    p.c = wf__array_data_ptr(out);
    if (out->dtype != p.compute) {
        staged = wf__buffer_alloc((size_t)out->size * p.item);
        if (staged == NULL)
            return WF_ERR_OUT_OF_MEMORY;
        p.c = staged->data;
    }
    int64_t cstrides[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, cstrides);
    if (c != NULL && beta != 0.0)
        wf__cpu_convert_strided(out->ndim, out->shape, wf__array_data_ptr(c), c->dtype,
                                c->strides, p.c, p.compute, cstrides);

    if (p.k == 0) {
        /* An empty sum: alpha * 0 + beta * c. */
        if (c == NULL || beta == 0.0) {
            memset(p.c, 0, (size_t)out->size * p.item);
        } else if (p.compute == WF_DTYPE_F64) {
            double *cc = (double *)p.c;
            for (int64_t i = 0; i < out->size; i++)
                cc[i] *= beta;
        } else {
            float *cc = (float *)p.c;
            for (int64_t i = 0; i < out->size; i++)
                cc[i] *= (float)beta;
        }
    } else {
        st = wf__cpu_mm_prepare(a, p.nb, p.bshape, p.compute, &p.a);
        if (st == WF_OK)
            st = wf__cpu_mm_prepare(b, p.nb, p.bshape, p.compute, &p.b);
        if (st == WF_OK) {
            merge_batches(&p);
            if (!plan_split(&p)) { /* serial: OpenBLAS threads each product */
                p.mblock = p.m;
                p.mblocks = 1;
                run_units(&p, 0, p.batches);
            } else {
                const int64_t units = p.batches * p.mblocks;
                const int64_t flops = 2 * p.mblock * p.n * p.k;
                const int64_t min_chunk = flops >= (1 << 16) ? 1 : (1 << 16) / max1(flops);
                wf__parallel_for(units, min_chunk, run_units, &p);
            }
        }
        wf__cpu_mm_release(&p.a);
        wf__cpu_mm_release(&p.b);
    }
    if (st == WF_OK && staged != NULL)
        wf__cpu_convert_1d(out->size, p.c, p.compute, 1, wf__array_data_ptr(out), out->dtype, 1);
    if (staged != NULL)
        wf__buffer_release(staged);
    return st;
}

wf_status wf__cpu_matmul(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    return batched_product(out, inputs[0], inputs[1], NULL, 1.0, 0.0);
}

wf_status wf__cpu_addmm(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_addmm_params *p = params;
    return batched_product(out, inputs[0], inputs[1], inputs[2], p->alpha, p->beta);
}
