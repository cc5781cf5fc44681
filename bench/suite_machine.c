/*
 * suite_machine: the machine's figures for the `make bench` header, measured
 * in the same run as the benchmarks: the core Debian's OpenBLAS chose, copy
 * and read bandwidth with 1 and 2 threads, the float32 FMA peak with 1 and 2
 * threads busy (bench/machine_limit.h: the widest FMA the CPU has, as weft's
 * GEMM uses), and the raw 2-thread calibration (a compute loop's 1 -> 2
 * thread scaling). Prints JSON lines (bench/suite.h).
 *
 *   build/release/suite_machine [MiB per buffer = 256]
 */
#include <cblas.h>
#include <stdint.h>

#include "machine_limit.h"
#include "suite.h"

enum { MAX_THREADS = 2 };

/* One bandwidth job: a pass over [begin, end) of the buffers. */
typedef struct band_job {
    const uint64_t *src;
    uint64_t *dst; /* NULL: read only */
    size_t begin, end;
    uint64_t sum;
} band_job;

/* Reads with 8 independent accumulators so the loop is bound by memory,
 * not by an add chain. */
static uint64_t read_words(const uint64_t *v, size_t begin, size_t end)
{
    uint64_t acc[8] = {0};
    size_t i = begin;
    for (; i + 8 <= end; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += v[i + (size_t)k];
    for (; i < end; i++)
        acc[0] += v[i];
    uint64_t s = 0;
    for (int k = 0; k < 8; k++)
        s += acc[k];
    return s;
}

static void *band_run(void *arg)
{
    band_job *job = arg;
    if (job->dst)
        memcpy(job->dst + job->begin, job->src + job->begin,
               (job->end - job->begin) * sizeof *job->src);
    else
        job->sum = read_words(job->src, job->begin, job->end);
    return NULL;
}

/* Seconds for one pass split over `threads` threads. */
static double band_pass(const uint64_t *src, uint64_t *dst, size_t words, int threads)
{
    pthread_t t[MAX_THREADS];
    band_job jobs[MAX_THREADS];
    uint64_t sum = 0;
    double start = suite_now();
    for (int i = 0; i < threads; i++) {
        jobs[i] = (band_job){src, dst, words * (size_t)i / (size_t)threads,
                             words * (size_t)(i + 1) / (size_t)threads, 0};
        pthread_create(&t[i], NULL, band_run, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        sum += jobs[i].sum;
    }
    double elapsed = suite_now() - start;
    if (!dst && sum == 1) /* never: keeps the reads from being optimized away */
        fprintf(stderr, "suite_machine: unexpected sum\n");
    return elapsed;
}

/* Copy counts read + write bytes (as STREAM does and as the element-wise
 * benchmarks count theirs); read counts the bytes read. */
static void bandwidth(const char *kase, const uint64_t *src, uint64_t *dst, size_t words,
                      int threads, int reps)
{
    suite_record r = suite_record_new(kase, "memcpy", threads);
    if (!dst)
        r.impl = "read-8-accumulators";
    band_pass(src, dst, words, threads); /* warm-up: pages and caches */
    for (int i = 0; i < reps; i++)
        suite_record_time(&r, band_pass(src, dst, words, threads));
    r.bytes = (double)(words * sizeof *src) * (dst ? 2.0 : 1.0);
    suite_record_print(&r);
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 256;
    if (mib < 16)
        mib = 16;
    size_t words = (size_t)mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t *src = malloc(words * sizeof *src), *dst = malloc(words * sizeof *dst);
    if (!src || !dst) {
        fprintf(stderr, "suite_machine: cannot allocate 2 x %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < words; i++)
        src[i] = i;
    memset(dst, 0, words * sizeof *dst);

    suite_print_info("openblas_debian_corename", openblas_get_corename());
    suite_print_info("openblas_debian_config", openblas_get_config());
    char threads[32];
    snprintf(threads, sizeof threads, "%d", openblas_get_num_threads());
    suite_print_info("openblas_debian_threads", threads);

    const int reps = suite_reps(5);
    for (int t = 1; t <= MAX_THREADS; t++) {
        bandwidth("machine/copy", src, dst, words, t, reps);
        bandwidth("machine/read", src, NULL, words, t, reps);
    }
    const machine_loop fma =
        machine_limit_supported(MACHINE_FMA_512) ? MACHINE_FMA_512 : MACHINE_FMA_256;
    for (int t = 1; t <= MAX_THREADS && machine_limit_supported(fma); t++)
        suite_print_value("machine/fma_peak", fma == MACHINE_FMA_512 ? "fma-512" : "fma-256",
                          t == 1 ? "gflops_1t" : "gflops_2t",
                          machine_gflops_per_thread(fma, t) * t);
    suite_calibration("spin-loop", reps);
    free(src);
    free(dst);
    return 0;
}
