/*
 * wf_searchsorted's kernel: a binary search per value, the values split
 * over the intra-op pool. Both inputs are read as contiguous (a strided one
 * is copied first). NaN orders after every number, as the sort kernels put
 * it: a value x goes before y when x < y, or y is NaN and x is not.
 * complex64 in NumPy's order, the sort kernels' too: lexicographic (real
 * part, then imaginary part) without NaN, then R + NaN j by the real part,
 * then NaN + R j by the imaginary part, then NaN + NaN j.
 */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/search.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/search.h"
#include "runtime/pool.h"
#include "util/fault.h"

struct search_job {
    const void *sorted;
    const void *values;
    uint32_t *out;
    int64_t n; /* elements of sorted */
    bool right;
    wf_dtype dtype;
};

typedef struct {
    float re, im;
} complex64;

/* The NaN class of z, in NumPy's order: 0 none, 1 R + NaN j, 2 NaN + R j,
 * 3 NaN + NaN j. */
static int nan_class(complex64 z) { return isnan(z.re) ? 2 + isnan(z.im) : isnan(z.im); }

static bool complex_before(complex64 x, complex64 y)
{
    const int cx = nan_class(x), cy = nan_class(y);
    if (cx != cy)
        return cx < cy;
    switch (cx) {
    case 0: return x.re < y.re || (x.re == y.re && x.im < y.im);
    case 1: return x.re < y.re;
    case 2: return x.im < y.im;
    default: return false;
    }
}

#define FLOAT_BEFORE(x, y) ((x) < (y) || (isnan(y) && !isnan(x)))
#define PLAIN_BEFORE(x, y) ((x) < (y))
#define ID(v) (v)

/* The position of each value in [begin, end): the first i where sorted[i]
 * is not before the value (left), or where the value is before sorted[i]
 * (right). */
#define SEARCH_BODY(NAME, T, LOAD, BEFORE)                                                    \
    static void NAME(const struct search_job *job, int64_t begin, int64_t end)                \
    {                                                                                         \
        const T *s = job->sorted, *v = job->values;                                           \
        for (int64_t i = begin; i < end; i++) {                                               \
            const __typeof__(LOAD(v[0])) x = LOAD(v[i]);                                      \
            int64_t lo = 0, hi = job->n;                                                      \
            while (lo < hi) {                                                                 \
                const int64_t mid = lo + (hi - lo) / 2;                                       \
                const __typeof__(x) y = LOAD(s[mid]);                                         \
                if (job->right ? !BEFORE(x, y) : BEFORE(y, x))                                \
                    lo = mid + 1;                                                             \
                else                                                                          \
                    hi = mid;                                                                 \
            }                                                                                 \
            job->out[i] = (uint32_t)lo;                                                       \
        }                                                                                     \
    }

SEARCH_BODY(search_bool, uint8_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_i8, int8_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_u8, uint8_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_i16, int16_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_u16, uint16_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_i32, int32_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_u32, uint32_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_i64, int64_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_u64, uint64_t, ID, PLAIN_BEFORE)
SEARCH_BODY(search_f16, uint16_t, wf__f16_to_f32, FLOAT_BEFORE)
SEARCH_BODY(search_bf16, uint16_t, wf__bf16_to_f32, FLOAT_BEFORE)
SEARCH_BODY(search_f32, float, ID, FLOAT_BEFORE)
SEARCH_BODY(search_f64, double, ID, FLOAT_BEFORE)
SEARCH_BODY(search_c64, complex64, ID, complex_before)

static void search_chunk(void *arg, int64_t begin, int64_t end)
{
    const struct search_job *job = arg;
    switch (job->dtype) {
    case WF_DTYPE_BOOL: search_bool(job, begin, end); break;
    case WF_DTYPE_I8: search_i8(job, begin, end); break;
    case WF_DTYPE_U8: search_u8(job, begin, end); break;
    case WF_DTYPE_I16: search_i16(job, begin, end); break;
    case WF_DTYPE_U16: search_u16(job, begin, end); break;
    case WF_DTYPE_I32: search_i32(job, begin, end); break;
    case WF_DTYPE_U32: search_u32(job, begin, end); break;
    case WF_DTYPE_I64: search_i64(job, begin, end); break;
    case WF_DTYPE_U64: search_u64(job, begin, end); break;
    case WF_DTYPE_F16: search_f16(job, begin, end); break;
    case WF_DTYPE_BF16: search_bf16(job, begin, end); break;
    case WF_DTYPE_F32: search_f32(job, begin, end); break;
    case WF_DTYPE_C64: search_c64(job, begin, end); break;
    default: search_f64(job, begin, end); break; /* inference allows no other */
    }
}

/* a's elements in row-major order: its own memory when contiguous, else a
 * copy in *copy (freed by the caller). */
static wf_status contiguous_data(const wf_array *a, const void **data, void **copy)
{
    *copy = NULL;
    if (wf__is_row_contiguous(a->shape, a->strides, a->ndim)) {
        *data = wf__array_data_ptr(a);
        return WF_OK;
    }
    *copy = wf__malloc((size_t)(a->size > 0 ? a->size : 1) * wf_dtype_size(a->dtype));
    if (!*copy)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_searchsorted: out of memory");
    *data = *copy;
    return wf__cpu_copy_to_contiguous(a, *copy);
}

wf_status wf__cpu_searchsorted(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params)
{
    (void)ninputs;
    const wf_search_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    struct search_job job = {
        .out = wf__array_data_ptr(out),
        .n = inputs[0]->size,
        .right = p->right,
        .dtype = inputs[0]->dtype,
    };
    void *sorted_copy = NULL, *values_copy = NULL;
    st = contiguous_data(inputs[0], &job.sorted, &sorted_copy);
    if (st == WF_OK)
        st = contiguous_data(inputs[1], &job.values, &values_copy);
    if (st == WF_OK) {
        const int64_t per_value = 8 + 4 * (int64_t)log2((double)job.n + 1);
        const int64_t min_chunk =
            per_value >= WF_CPU_CHUNK_CHEAP ? 1 : WF_CPU_CHUNK_CHEAP / per_value;
        wf__parallel_for(out->size, min_chunk, search_chunk, &job);
    }
    free(sorted_copy);
    free(values_copy);
    return st;
}
