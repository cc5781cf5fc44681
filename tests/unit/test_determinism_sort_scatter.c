/*
 * Bitwise reproducibility of the scatter, gather, sort-family and extra
 * scan kernels (docs/THREADING.md, "Reproducible results"): the test runs
 * itself as a child (/proc/self/exe, WEFT_SORT_DET_CHILD set) for
 * WEFT_NUM_THREADS = 1, 2, 3 and 5; each child prints one hash of the
 * result bytes per case and the lists must be equal, and equal to this
 * process's own. The cases split across threads: float32 scatter-add with
 * many duplicates (the order of additions shows in the bits), scatter
 * max / replace, gather, sort / argsort / topk / partition of one long row
 * (sort also with many ties: the parallel split leaves runs of equal keys
 * out of its parts) and of many rows, cummax and logcumsumexp, masked_scatter, gather_mm and
 * segmented_mm (products split over threads by blocks). Smaller under
 * sanitizers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_process.h"
#include "harness.h"

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
enum { ROWS = 256, COLS = 512, UPDATES = 1 << 11, TABLE_COLS = 64, LONG_ROW = 1 << 16 };
#else
enum { ROWS = 1024, COLS = 1024, UPDATES = 1 << 13, TABLE_COLS = 256, LONG_ROW = 1 << 20 };
#endif

enum { MAX_CASES = 32, MAX_LINE = 96, OUT_CAP = MAX_CASES * MAX_LINE };

/* Values in [-2, 2) from a fixed xorshift sequence. */
static wf_array *values(int64_t rows, int64_t cols, uint32_t seed)
{
    const int64_t n = rows * cols;
    float *v = malloc((size_t)n * sizeof *v);
    uint32_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v[i] = (float)(s >> 8) * 0x1p-22f - 2.0f;
    }
    const int64_t shape[2] = {rows, cols};
    wf_array *a = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    free(v);
    return a;
}

/* n indices in [0, range), many repeated. */
static wf_array *indices(int64_t n, int64_t range, uint32_t seed)
{
    int32_t *v = malloc((size_t)n * sizeof *v);
    uint32_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v[i] = (int32_t)(s % (uint32_t)range);
    }
    wf_array *a = wf_array_from_data(v, &n, 1, WF_DTYPE_I32);
    free(v);
    return a;
}

static uint64_t bytes_hash(wf_array *a)
{
    const size_t n = wf_array_nbytes(a);
    unsigned char *buf = malloc(n + 1);
    uint64_t h = 0;
    if (buf && wf_array_copy_to(a, buf, n) == WF_OK) {
        h = 1469598103934665603ull;
        for (size_t i = 0; i < n; i++) {
            h ^= buf[i];
            h *= 1099511628211ull;
        }
    }
    free(buf);
    return h;
}

/* Every case's "name hash" line into out. */
static void compute(char *out, size_t cap)
{
    wf_scope_begin();
    wf_array *table = values(ROWS, TABLE_COLS, 3);
    wf_array *x = values(ROWS, COLS, 5), *xt = wf_transpose(x, NULL, 0);
    wf_array *row = values(1, LONG_ROW, 7);
    const int64_t us[3] = {UPDATES, 1, TABLE_COLS};
    wf_array *upd = wf_reshape(values(UPDATES, TABLE_COLS, 9), us, 3);
    wf_array *idx = indices(UPDATES, ROWS / 4, 11); /* about 16 hits a row */
    const int64_t s16[2] = {ROWS, COLS / 16};
    wf_array *x16 = wf_astype(wf_reshape(values(ROWS, COLS / 16, 13), s16, 2), WF_DTYPE_F16);
    const int ax0 = 0;
    const int64_t slice[2] = {1, TABLE_COLS};
    const int64_t flat = ROWS * COLS, experts_a[3] = {8, ROWS / 8, COLS};
    const int64_t experts_b[3] = {4, COLS, 64}, seg_shape[2] = {4, 2};
    wf_array *mask = wf_greater(x, wf_scalar(0, WF_DTYPE_F32));
    wf_array *src = wf_reshape(values(ROWS, COLS, 15), &flat, 1);
    wf_array *a3 = wf_reshape(x, experts_a, 3);
    wf_array *b3 = wf_reshape(values(4 * COLS, 64, 17), experts_b, 3);
    wf_array *lhs = indices(16, 8, 19), *rhs = indices(16, 4, 23);
    const int32_t bounds[8] = {0, COLS / 2, COLS / 4, COLS, 3, 3, 0, COLS};
    wf_array *segments = wf_array_from_data(bounds, seg_shape, 2, WF_DTYPE_I32);
    struct {
        const char *name;
        wf_array *out;
    } cases[] = {
        {"scatter_add", wf_scatter(table, &idx, 1, upd, &ax0, WF_SCATTER_ADD)},
        {"scatter_max", wf_scatter(table, &idx, 1, upd, &ax0, WF_SCATTER_MAX)},
        {"scatter_replace", wf_scatter(table, &idx, 1, upd, &ax0, WF_SCATTER_REPLACE)},
        {"scatter_add_f16", wf_scatter(wf_astype(table, WF_DTYPE_F16), &idx, 1,
                                       upd, &ax0, WF_SCATTER_ADD)},
        {"gather", wf_gather(table, &idx, 1, &ax0, slice)},
        {"sort_long_row", wf_sort(row, 1)},
        {"argsort_long_row", wf_argsort(row, 1)},
        {"sort_long_row_ties",
         wf_sort(wf_floor(wf_multiply(row, wf_scalar(8, WF_DTYPE_F32))), 1)},
        {"topk_long_row", wf_topk(row, 1000, 1)},
        {"sort_rows", wf_sort(x, 1)},
        {"argsort_cols", wf_argsort(xt, 0)},
        {"sort_f16", wf_sort(x16, 0)},
        {"topk_rows", wf_topk(x, 50, 1)},
        {"argtopk_rows", wf_argtopk(x, 50, 1)},
        {"argpartition_rows", wf_argpartition(x, COLS / 3, 1)},
        {"partition_long_row", wf_partition(row, LONG_ROW / 2, 1)},
        {"cummax_rows", wf_cummax(x, 1, false, true)},
        {"cummin_cols", wf_cummin(x, 0, true, false)},
        {"logcumsumexp_rows", wf_logcumsumexp(x, 1, false, true)},
        {"masked_scatter", wf_masked_scatter(x, mask, src)},
        {"gather_mm", wf_gather_mm(a3, b3, lhs, rhs, false)},
        {"segmented_mm", wf_segmented_mm(x, values(COLS, 64, 29), segments)},
    };
    size_t used = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s %016llx\n", cases[i].name,
                                 (unsigned long long)(cases[i].out ? bytes_hash(cases[i].out) : 0));
    wf_scope_end();
}

static char self_path[4096];

static void test_thread_counts(void)
{
    static const int counts[] = {1, 2, 3, 5};
    static char reference[OUT_CAP], got[OUT_CAP];
    wf_test_check_thread_counts(__FILE__, __LINE__, NULL, self_path, "WEFT_SORT_DET_CHILD=1", counts, 4,
                                reference, got, sizeof got);
    CHECK(strstr(reference, " 0000000000000000") == NULL); /* none failed */
    CHECK(strstr(reference, "logcumsumexp_rows") != NULL);  /* every case printed */
    static char here[OUT_CAP];
    compute(here, sizeof here);
    CHECK(strcmp(reference, here) == 0);
}

int main(void)
{
    if (getenv("WEFT_SORT_DET_CHILD")) {
        static char out[OUT_CAP];
        compute(out, sizeof out);
        fputs(out, stdout);
        fflush(stdout);
        return 0;
    }
    if (!wf_test_self_path(self_path, sizeof self_path)) {
        printf("cannot read /proc/self/exe\n");
        return 1;
    }
    RUN_TEST(test_thread_counts);
    return TEST_SUMMARY();
}
