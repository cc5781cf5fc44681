/*
 * suite_matmul: issue 14 item 2, weft's side and Debian's OpenBLAS called
 * directly (cblas_sgemm, the same library weft links). float32 square
 * products 256..4096, a batched 8 x 512 x 512 product, and bfloat16 products
 * (weft only: cblas has no bf16 GEMM). 256 entries of every output are
 * checked against a double reference before timing. run_all.py runs it
 * with and without OPENBLAS_CORETYPE.
 *
 *   build/release/suite_matmul [largest size = 4096]
 */
#include <cblas.h>
#include <unistd.h>

#include "suite.h"

enum { CHECKED_ENTRIES = 256 };

/* Timed repetitions per size: fewer for the big ones (run_all.py's
 * SUITE_REPS caps them further). */
static int reps_for(int64_t n)
{
    int base = n >= 4096 ? 3 : n >= 2048 ? 5 : 10;
    int cap = suite_reps(base);
    return cap < base ? cap : base;
}

/* A batch of float32 matrices as the reference sees them. */
typedef struct operands {
    int64_t batch, n;
    float *a, *b; /* batch * n * n each, row-major */
} operands;

/* Checks CHECKED_ENTRIES entries of c (batch x n x n) against a double dot
 * product; the bound is tol * sum |a_ik b_kj| (rounding grows with it). */
static int check_product(suite_record *r, const operands *op, const float *c, double tol)
{
    const int64_t n = op->n;
    for (int e = 0; e < CHECKED_ENTRIES; e++) {
        uint32_t h = suite_hash32((uint32_t)e * 7919u + 17u);
        int64_t bi = (int64_t)(h % (uint32_t)op->batch), i = (int64_t)((h >> 4) % (uint32_t)n),
                j = (int64_t)(suite_hash32(h) % (uint32_t)n);
        const float *a = op->a + bi * n * n, *b = op->b + bi * n * n;
        double want = 0, scale = 0;
        for (int64_t k = 0; k < n; k++) {
            want += (double)a[i * n + k] * (double)b[k * n + j];
            scale += fabs((double)a[i * n + k] * (double)b[k * n + j]);
        }
        double got = c[bi * n * n + i * n + j];
        if (!(fabs(got - want) <= tol * scale + 1e-6)) {
            suite_record_fail(r, "entry (%lld, %lld, %lld): got %.9g, want %.9g",
                              (long long)bi, (long long)i, (long long)j, got, want);
            return 0;
        }
    }
    return 1;
}

/* Debian's OpenBLAS keeps a thread spinning on a core for ~100 ms after it
 * loads and after each call (measured: 100 ms of CPU in the first 300 ms,
 * then a full core for 100 ms after one sgemm); weft's pool threads watch
 * for 200 us. Timed right after the other library, either one would share
 * a core with those spinning threads, so each block of timed calls starts
 * after a pause, as in bench_matmul. */
enum { SETTLE_US = 300000 };

static void settle(void) { usleep(SETTLE_US); }

/* weft: wf_matmul of ready inputs, evaluated; output checked, then timed. */
static void measure_weft(const char *kase, const operands *op, wf_array *a, wf_array *b,
                         double tol, int reps)
{
    suite_record r = suite_record_new(kase, "weft", suite_weft_threads());
    r.flops = 2.0 * (double)op->batch * (double)op->n * (double)op->n * (double)op->n;
    wf_array *c = wf_matmul(a, b);
    wf_array *c32 = wf_astype(c, WF_DTYPE_F32);
    const void *data = NULL;
    if (!c32 || wf_array_data(c32, &data) != WF_OK)
        suite_record_fail(&r, "weft error: %s", wf_last_error_message());
    else if (check_product(&r, op, data, tol))
        r.checksum = suite_l1(data, wf_array_size(c32));
    wf_release(c32);
    wf_release(c);
    for (int i = 0; i < reps && strcmp(r.check, "ok") == 0; i++) {
        double start = suite_now();
        c = wf_matmul(a, b);
        wf_status st = c ? wf_eval(&c, 1) : wf_last_error();
        double elapsed = suite_now() - start;
        wf_release(c);
        if (st != WF_OK)
            suite_record_fail(&r, "weft error while timing: %s", wf_last_error_message());
        suite_record_time(&r, elapsed);
    }
    suite_record_print(&r);
}

/* Debian's OpenBLAS, one cblas_sgemm per batch entry. */
static void measure_cblas(const char *kase, const operands *op, int reps)
{
    suite_record r = suite_record_new(kase, "openblas-debian", openblas_get_num_threads());
    snprintf(r.note, sizeof r.note, "core %s", openblas_get_corename());
    const int64_t n = op->n, nn = n * n;
    r.flops = 2.0 * (double)op->batch * (double)n * (double)n * (double)n;
    float *c = malloc((size_t)(op->batch * nn) * sizeof *c);
    if (!c) {
        suite_record_fail(&r, "out of memory");
        suite_record_print(&r);
        return;
    }
    for (int i = 0; i <= reps; i++) { /* run 0 is the checked warm-up */
        double start = suite_now();
        for (int64_t bi = 0; bi < op->batch; bi++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f,
                        op->a + bi * nn, (int)n, op->b + bi * nn, (int)n, 0.0f, c + bi * nn,
                        (int)n);
        double elapsed = suite_now() - start;
        if (i == 0) {
            if (!check_product(&r, op, c, 1e-5))
                break;
            r.checksum = suite_l1(c, op->batch * nn);
        } else {
            suite_record_time(&r, elapsed);
        }
    }
    free(c);
    suite_record_print(&r);
}

/* Inputs for one case: float32 arrays from the shared hash (seeds as in
 * bench/peers/matmul.py); for bf16 the reference reads the rounded values. */
static void run_case(const char *kase, int64_t batch, int64_t n, wf_dtype dtype, int with_cblas)
{
    const int64_t shape3[3] = {batch, n, n};
    const int64_t *shape = batch > 1 ? shape3 : shape3 + 1;
    const int ndim = batch > 1 ? 3 : 2;
    const uint32_t seed = batch > 1 ? 4 : 2;
    operands op = {batch, n, suite_uniform(batch * n * n, seed, -1, 1),
                   suite_uniform(batch * n * n, seed + 1, -1, 1)};
    wf_array *a = wf_array_from_data(op.a, shape, ndim, WF_DTYPE_F32);
    wf_array *b = wf_array_from_data(op.b, shape, ndim, WF_DTYPE_F32);
    double tol = 1e-5;
    if (dtype != WF_DTYPE_F32) {
        wf_array *a16 = wf_astype(a, dtype), *b16 = wf_astype(b, dtype);
        wf_release(a);
        wf_release(b);
        a = a16;
        b = b16;
        /* The reference multiplies the rounded inputs; the product is
         * rounded to bf16 (8 bits) once more. */
        wf_array *ra = wf_astype(a, WF_DTYPE_F32), *rb = wf_astype(b, WF_DTYPE_F32);
        size_t bytes = (size_t)(batch * n * n) * sizeof(float);
        suite_require(wf_array_copy_to(ra, op.a, bytes) == WF_OK &&
                          wf_array_copy_to(rb, op.b, bytes) == WF_OK,
                      "bf16 inputs");
        wf_release(ra);
        wf_release(rb);
        tol = 1.0 / 128;
    }
    suite_require(a && b, "inputs");
    wf_array *ready[2] = {a, b};
    suite_require(wf_eval(ready, 2) == WF_OK, "inputs");
    settle();
    measure_weft(kase, &op, a, b, tol, reps_for(n));
    if (with_cblas) {
        settle();
        measure_cblas(kase, &op, reps_for(n));
    }
    wf_release(a);
    wf_release(b);
    free(op.a);
    free(op.b);
}

int main(int argc, char **argv)
{
    int64_t largest = argc > 1 ? atoll(argv[1]) : 4096;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    suite_print_info("openblas_coretype_env", coretype ? coretype : "(unset)");
    suite_print_info("openblas_debian_corename", openblas_get_corename());
    static char names[5][32];
    int k = 0;
    for (int64_t n = 256; n <= largest && k < 5; n *= 2, k++) {
        snprintf(names[k], sizeof names[k], "matmul/f32_%lld", (long long)n);
        run_case(names[k], 1, n, WF_DTYPE_F32, 1);
    }
    run_case("matmul/f32_batched_8x512", 8, 512, WF_DTYPE_F32, 1);
    run_case("matmul/bf16_1024", 1, 1024, WF_DTYPE_BF16, 0);
    if (largest >= 2048)
        run_case("matmul/bf16_2048", 1, 2048, WF_DTYPE_BF16, 0);
    return 0;
}
