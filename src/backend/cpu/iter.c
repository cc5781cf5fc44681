/* The strided N-d iteration every CPU kernel uses (see cpu.h). */
#include "backend/cpu/cpu.h"

#include <string.h>

#include "runtime/pool.h"

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

void wf__cpu_iter_run_parallel(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx,
                               int64_t min_chunk)
{
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
    struct parallel_walk w = {it, fn, ctx};
    wf__parallel_for(total, min_chunk, run_chunk, &w);
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

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
