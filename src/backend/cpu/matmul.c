/* Matrix product of two 2-d float arrays through BLAS (OpenBLAS cblas).
 * float32 -> sgemm, float64 -> dgemm, float16/bfloat16 -> converted to
 * float32, sgemm, converted back. A matrix that is row-contiguous or a
 * transposed row-contiguous one is passed to BLAS in place (with its leading
 * dimension and CblasTrans); any other layout is copied first. */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/error.h"

typedef struct blas_operand {
    const void *data;
    enum CBLAS_TRANSPOSE trans;
    int64_t ld;
    wf_buffer *owned; /* staging copy, or NULL */
} blas_operand;

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* Can BLAS read x (r x c) where it lies? Sets trans and ld if so. */
static bool blas_layout(const wf_array *x, enum CBLAS_TRANSPOSE *trans, int64_t *ld)
{
    const int64_t r = x->shape[0], c = x->shape[1];
    const int64_t s0 = x->strides[0], s1 = x->strides[1];
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

/* Makes x usable by BLAS in `compute` dtype, staging a contiguous copy when
 * its dtype or layout needs one. */
static wf_status prepare(const wf_array *x, wf_dtype compute, blas_operand *op)
{
    memset(op, 0, sizeof *op);
    if (x->dtype == compute && blas_layout(x, &op->trans, &op->ld)) {
        op->data = wf__array_data_ptr(x);
        return WF_OK;
    }
    op->owned = wf__buffer_alloc((size_t)x->size * wf_dtype_size(compute));
    if (op->owned == NULL)
        return WF_ERR_OUT_OF_MEMORY; /* recorded by the allocator */
    int64_t dst_strides[2];
    wf__cpu_row_strides(x->shape, 2, dst_strides);
    wf__cpu_convert_strided(2, x->shape, wf__array_data_ptr(x), x->dtype, x->strides,
                            op->owned->data, compute, dst_strides);
    op->data = op->owned->data;
    op->trans = CblasNoTrans;
    op->ld = max1(x->shape[1]);
    return WF_OK;
}

static void gemm(wf_dtype compute, int64_t m, int64_t n, int64_t k, const blas_operand *a,
                 const blas_operand *b, void *c)
{
    if (compute == WF_DTYPE_F64) {
        cblas_dgemm(CblasRowMajor, a->trans, b->trans, (blasint)m, (blasint)n, (blasint)k, 1.0,
                    a->data, (blasint)a->ld, b->data, (blasint)b->ld, 0.0, c, (blasint)n);
    } else {
        cblas_sgemm(CblasRowMajor, a->trans, b->trans, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                    a->data, (blasint)a->ld, b->data, (blasint)b->ld, 0.0f, c, (blasint)n);
    }
}

static wf_status matmul_blas(wf_array *out, const wf_array *a, const wf_array *b)
{
    const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    const wf_dtype compute = out->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    blas_operand oa, ob;
    wf_buffer *staged_c = NULL;
    wf_status st = prepare(a, compute, &oa);
    if (st == WF_OK)
        st = prepare(b, compute, &ob);
    else
        memset(&ob, 0, sizeof ob);
    void *c = wf__array_data_ptr(out);
    if (st == WF_OK && out->dtype != compute) {
        staged_c = wf__buffer_alloc((size_t)out->size * sizeof(float));
        if (staged_c == NULL)
            st = WF_ERR_OUT_OF_MEMORY;
        else
            c = staged_c->data;
    }
    if (st == WF_OK) {
        gemm(compute, m, n, k, &oa, &ob, c);
        if (staged_c != NULL)
            wf__cpu_convert_1d(out->size, c, compute, 1, wf__array_data_ptr(out), out->dtype, 1);
    }
    if (staged_c != NULL)
        wf__buffer_release(staged_c);
    if (oa.owned != NULL)
        wf__buffer_release(oa.owned);
    if (ob.owned != NULL)
        wf__buffer_release(ob.owned);
    return st;
}

wf_status wf__cpu_matmul(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *a = inputs[0], *b = inputs[1];
    const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (m == 0 || n == 0)
        return WF_OK;
    if (k == 0) {
        memset(wf__array_data_ptr(out), 0, (size_t)out->size * wf_dtype_size(out->dtype));
        return WF_OK;
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return wf__error(WF_ERR_UNSUPPORTED,
                         "matmul: dimensions (%lld, %lld) @ (%lld, %lld) exceed BLAS's int range",
                         (long long)m, (long long)k, (long long)k, (long long)n);
    return matmul_blas(out, a, b);
}
