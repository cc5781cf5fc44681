/*
 * complex64 matmul on weft's GEMM (gemm.h's complex64 B: B' packed straight
 * from complex B, a few rows read in place by gemm_complex.c), under every
 * GEMM variant this CPU runs (forced):
 *  - against a float64 reference written here, within the bound of a
 *    float32 dot product of 2k terms: |error| <= (2k + 1) u sum_t
 *    (|a_re| + |a_im|)(|b_re| + |b_im|), u = 2^-24 (each output element is
 *    such a dot product: gemm.h's rule over B''s 2k rows), on shapes that
 *    take the few-row path (1 to 4 rows, more columns than one sweep, K over
 *    several blocks, odd tails) and the packed one, batched and strided;
 *  - a row's bits do not depend on the rows around it (slices of A of 1 to
 *    17 rows, so both paths, give the bits of the whole product's rows) nor
 *    on B's layout (a transposed view gives the bits of the contiguous B);
 *  - the same bits for WEFT_NUM_THREADS = 1, 2, 3, 5 (this program runs
 *    itself as a child, WEFT_CMM_CHILD set, and compares hashes).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "child_process.h"
#include "harness.h"

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static float *random_pairs(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)(2 * n) * sizeof *v);
    for (int64_t i = 0; i < 2 * n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return v;
}

static wf_array *carr(const float *pairs, const int64_t *shape, int ndim)
{
    return wf_array_from_data(pairs, shape, ndim, WF_DTYPE_C64);
}

/* The n complex values of `a` as 2n floats (caller frees); NULL on error. */
static float *values(wf_array *a, int64_t n)
{
    float *out = malloc((size_t)(2 * n + 1) * sizeof *out);
    if (!CHECK_NOT_NULL(a) || !CHECK_EQ_INT(wf_array_size(a), n) ||
        !CHECK_OK(wf_array_copy_to(a, out, (size_t)n * 8))) {
        printf("      (%s)\n", wf_last_error_message());
        wf_clear_error();
        free(out);
        return NULL;
    }
    return out;
}

/* got (batches x m x n) against A (batches x m x k) B (k x n, shared when
 * b_batched is false) in double, within the bound above. */
static void check_against_double(const float *got, const float *a, const float *b,
                                 int64_t batches, int64_t m, int64_t n, int64_t k,
                                 bool b_batched, const char *what)
{
    const double u = ldexp(1.0, -24);
    for (int64_t bi = 0; bi < batches; bi++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double re = 0, im = 0, bound = 0;
                for (int64_t t = 0; t < k; t++) {
                    const float *x = a + 2 * ((bi * m + i) * k + t);
                    const float *y = b + 2 * (((b_batched ? bi : 0) * k + t) * n + j);
                    re += (double)x[0] * y[0] - (double)x[1] * y[1];
                    im += (double)x[0] * y[1] + (double)x[1] * y[0];
                    bound += (fabs(x[0]) + fabs(x[1])) * (fabs(y[0]) + fabs(y[1]));
                }
                bound *= (double)(2 * k + 1) * u;
                const float *g = got + 2 * ((bi * m + i) * n + j);
                if (!(fabs(g[0] - re) <= bound && fabs(g[1] - im) <= bound)) {
                    wf_test_fail(__FILE__, __LINE__,
                                 "%s: (%lld, %lld, %lld) (%.9g, %.9g), want (%.9g, %.9g) "
                                 "within %.3g",
                                 what, (long long)bi, (long long)i, (long long)j, g[0], g[1], re,
                                 im, bound);
                    return;
                }
            }
}

/* One shape: plain, batched (3 A's, one shared B and 3 B's), and with B a
 * transposed view. */
static void check_shape(int64_t m, int64_t n, int64_t k)
{
    char what[96];
    float *a = random_pairs(3 * m * k, (unsigned)(m * 131 + k)), *b = random_pairs(3 * k * n, 5);
    float *bt = malloc((size_t)(2 * k * n) * sizeof *bt); /* B stored n x k */
    for (int64_t t = 0; t < k; t++)
        for (int64_t j = 0; j < n; j++)
            memcpy(bt + 2 * (j * k + t), b + 2 * (t * n + j), 8);
    wf_scope_begin();
    wf_array *x = carr(a, (int64_t[]){m, k}, 2), *y = carr(b, (int64_t[]){k, n}, 2);
    wf_array *x3 = carr(a, (int64_t[]){3, m, k}, 3), *y3 = carr(b, (int64_t[]){3, k, n}, 3);
    wf_array *yt = wf_transpose(carr(bt, (int64_t[]){n, k}, 2), NULL, 0);
    float *got;
    snprintf(what, sizeof what, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    if ((got = values(wf_matmul(x, y), m * n)) != NULL)
        check_against_double(got, a, b, 1, m, n, k, false, what);
    free(got);
    snprintf(what, sizeof what, "3 x %lldx%lldx%lld, shared B", (long long)m, (long long)n,
             (long long)k);
    if ((got = values(wf_matmul(x3, y), 3 * m * n)) != NULL)
        check_against_double(got, a, b, 3, m, n, k, false, what);
    free(got);
    snprintf(what, sizeof what, "3 x %lldx%lldx%lld, batched B", (long long)m, (long long)n,
             (long long)k);
    if ((got = values(wf_matmul(x3, y3), 3 * m * n)) != NULL)
        check_against_double(got, a, b, 3, m, n, k, true, what);
    free(got);
    snprintf(what, sizeof what, "%lldx%lldx%lld, B transposed", (long long)m, (long long)n,
             (long long)k);
    if ((got = values(wf_matmul(x, yt), m * n)) != NULL)
        check_against_double(got, a, b, 1, m, n, k, false, what);
    free(got);
    wf_scope_end();
    free(a);
    free(b);
    free(bt);
}

static void test_every_variant_against_double(void)
{
#if SANITIZED
    static const int64_t shapes[][3] = {{1, 9, 130}, {3, 17, 5}, {6, 20, 11}, {15, 9, 512},
                                        {1, 45, 7},  {2, 13, 9}};
#else
    /* k = 512 and 1024: A's rows 4 and 8 KB apart, so A is packed rather
     * than read where it lies (gemm.c's rows_share_l1_set). The few-row
     * kernels' edges: k not a multiple of the rows of B a pass sweeps (7,
     * 9, 33), columns past one chunk of sums (2100, 1030, 700 for 1, 2
     * and 3 rows) and a last chunk narrower than a vector or two. */
    static const int64_t shapes[][3] = {{1, 600, 200}, {2, 37, 130}, {3, 17, 5},
                                        {4, 530, 150}, {5, 40, 129}, {23, 70, 300},
                                        {16, 33, 64},  {1, 1, 1},    {40, 300, 8},
                                        {1, 2100, 20}, {20, 40, 512}, {33, 17, 1024},
                                        {1, 45, 7},    {2, 1030, 9},  {3, 700, 33}};
#endif
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        printf("  GEMM variant %s\n", wf__gemm_isa_name(isa));
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            check_shape(shapes[s][0], shapes[s][1], shapes[s][2]);
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* Rows r0..r1 of A (m x k) as their own product: the bits of those rows of
 * `whole`. */
static void check_rows(wf_array *x, wf_array *y, const float *whole, int64_t r0, int64_t r1,
                       int64_t n, const char *what)
{
    wf_array *rows = wf_slice(x, (int64_t[]){r0, 0}, (int64_t[]){r1, wf_array_shape(x)[1]},
                              (int64_t[]){1, 1});
    float *got = values(wf_matmul(rows, y), (r1 - r0) * n);
    if (got != NULL && memcmp(got, whole + 2 * r0 * n, (size_t)((r1 - r0) * n) * 8) != 0)
        wf_test_fail(__FILE__, __LINE__, "%s: rows %lld..%lld differ from the whole product's",
                     what, (long long)r0, (long long)r1);
    free(got);
}

/* k = 512: A's rows 4 KB apart, packed (gemm.c's rows_share_l1_set) where
 * other k read them in place; the few-row kernels read them in place. */
static void check_rows_independent(int64_t k)
{
    const int64_t m = 29, n = SANITIZED ? 40 : 700;
    float *a = random_pairs(m * k, 3), *b = random_pairs(k * n, 4);
    float *bt = malloc((size_t)(2 * k * n) * sizeof *bt);
    for (int64_t t = 0; t < k; t++)
        for (int64_t j = 0; j < n; j++)
            memcpy(bt + 2 * (j * k + t), b + 2 * (t * n + j), 8);
    static const int64_t ranges[][2] = {{0, 1}, {7, 9}, {10, 13}, {12, 16}, {3, 20}, {28, 29}};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        const char *name = wf__gemm_isa_name(isa);
        wf_scope_begin();
        wf_array *x = carr(a, (int64_t[]){m, k}, 2), *y = carr(b, (int64_t[]){k, n}, 2);
        wf_array *yt = wf_transpose(carr(bt, (int64_t[]){n, k}, 2), NULL, 0);
        float *whole = values(wf_matmul(x, y), m * n);
        if (whole != NULL) {
            for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
                check_rows(x, y, whole, ranges[r][0], ranges[r][1], n, name);
            float *t = values(wf_matmul(x, yt), m * n);
            if (t != NULL && memcmp(t, whole, (size_t)(m * n) * 8) != 0)
                wf_test_fail(__FILE__, __LINE__, "%s: B transposed changes the bits", name);
            free(t);
            /* the whole product as the second of two batches */
            wf_array *x2 = wf_stack((wf_array *[]){wf_negative(x), x}, 2, 0);
            float *two = values(wf_matmul(x2, y), 2 * m * n);
            if (two != NULL && memcmp(two + 2 * m * n, whole, (size_t)(m * n) * 8) != 0)
                wf_test_fail(__FILE__, __LINE__, "%s: a batch around it changes the bits", name);
            free(two);
        }
        free(whole);
        wf_scope_end();
    }
    CHECK_OK(wf__gemm_isa_set(-1));
    free(a);
    free(b);
    free(bt);
}

static void test_rows_independent_of_batch_and_layout(void)
{
    check_rows_independent(SANITIZED ? 70 : 260);
    check_rows_independent(512);
}

/* ---------------------------------------------------------------- thread counts */

enum { OUT_CAP = 4096 };

static uint64_t bytes_hash(const float *v, int64_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)v;
    for (int64_t i = 0; i < n * 8; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Hashes of products of 1, 3, 64 and 200 rows (and a batch of 4, and
 * 1030 rows of k = 8) under every variant, one line each. */
static void compute(char *out, size_t cap)
{
    const int64_t n = SANITIZED ? 96 : 520, k = SANITIZED ? 40 : 300;
    static const int64_t rows[] = {1, 3, 64, 200};
    float *a = random_pairs(4 * 200 * k, 21), *b = random_pairs(k * n, 22);
    size_t used = 0;
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) { /* every variant: the parent wants each */
        if (!wf__gemm_isa_supported(isa))
            continue;
        wf__gemm_isa_set(isa);
        wf_scope_begin();
        wf_array *y = carr(b, (int64_t[]){k, n}, 2);
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            const int64_t m = rows[r];
            float *got = values(wf_matmul(carr(a, (int64_t[]){m, k}, 2), y), m * n);
            used += (size_t)snprintf(out + used, cap - used, "%s %lld %016llx\n",
                                     wf__gemm_isa_name(isa), (long long)m,
                                     (unsigned long long)(got ? bytes_hash(got, m * n) : 0));
            free(got);
        }
        float *got = values(wf_matmul(carr(a, (int64_t[]){4, 200, k}, 3), y), 4 * 200 * n);
        used += (size_t)snprintf(out + used, cap - used, "%s batch %016llx\n",
                                 wf__gemm_isa_name(isa),
                                 (unsigned long long)(got ? bytes_hash(got, 800 * n) : 0));
        free(got);
        /* more rows than gemm.c packs A for at once (GEMM_A_ROWS) when one
         * thread's block spans several strips of B */
        got = values(wf_matmul(carr(a, (int64_t[]){1030, 8}, 2), carr(b, (int64_t[]){8, n}, 2)),
                     1030 * n);
        used += (size_t)snprintf(out + used, cap - used, "%s 1030 x 8 %016llx\n",
                                 wf__gemm_isa_name(isa),
                                 (unsigned long long)(got ? bytes_hash(got, 1030 * n) : 0));
        free(got);
        wf_scope_end();
    }
    wf__gemm_isa_set(-1);
    free(a);
    free(b);
}

static char self_path[4096];

static void test_same_bits_for_any_thread_count(void)
{
    static const int counts[] = {1, 2, 3, 5};
    static char reference[OUT_CAP], got[OUT_CAP];
    wf_test_check_thread_counts(__FILE__, __LINE__, NULL, self_path, "WEFT_CMM_CHILD=1", counts, 4,
                                reference, got, sizeof got);
    CHECK(strstr(reference, " 0000000000000000") == NULL);
    CHECK(strstr(reference, "baseline batch") != NULL);
}

int main(void)
{
    if (getenv("WEFT_CMM_CHILD")) {
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
    RUN_TEST(test_every_variant_against_double);
    RUN_TEST(test_rows_independent_of_batch_and_layout);
    RUN_TEST(test_same_bits_for_any_thread_count);
    return TEST_SUMMARY();
}
