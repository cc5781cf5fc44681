/*
 * Helpers for the memory-bound benchmarks (bench_quantized,
 * bench_qmv_ceiling): the last-level cache's size (rotation sets are a
 * multiple of it), the machine's load, a small random generator, and the
 * machine's read bandwidth: `threads` threads summing one large buffer,
 * the best of three read loops. Header-only; printf's its comment lines.
 */
#ifndef WEFT_BENCH_MEMORY_BENCH_H
#define WEFT_BENCH_MEMORY_BENCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The kernel's figure first: glibc's sysconf reads CPUID, which under a
 * hypervisor can report the host's cache (320 MiB for a 32 MiB L3 here). */
static int64_t llc_bytes(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long long kib = 0;
    if (f) {
        if (fscanf(f, "%lld", &kib) != 1)
            kib = 0;
        fclose(f);
    }
    if (kib > 0)
        return kib * 1024;
    const long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? v : 32 << 20;
}

static void print_load(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    char line[128] = "?";
    if (f) {
        if (!fgets(line, sizeof line, f))
            strcpy(line, "?\n");
        fclose(f);
    }
    printf("# load average (1/5/15 min, of %ld CPUs): %s", sysconf(_SC_NPROCESSORS_ONLN), line);
}

/* xorshift64: the benchmarks' random codes and values, the same every run. */
static uint64_t bench_seed = 88172645463325252u;
static uint64_t next_random(void)
{
    bench_seed ^= bench_seed << 13;
    bench_seed ^= bench_seed >> 7;
    bench_seed ^= bench_seed << 17;
    return bench_seed;
}

enum { READ_REPEATS = 3 };

static double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The machine's read bandwidth is the best of a few read loops, since no
 * one loop reaches it everywhere: on a KVM Xeon (model 167), one
 * sequential stream a thread read 22-26 GB/s where 4 or 16 streams a
 * thread, each asked for 1 KiB ahead, read 30-33 (and the int8 matvec
 * kernel, which reads 16 rows at once, 30); on two Zen 4 cores (AMD EPYC,
 * KVM) the loops read either about 35 GB/s or 54-68, by the moment (the
 * host's other load, it seems), a loop of 64-byte vector loads 64-68 where
 * the scalar ones read 54-62. Taking the best keeps the ratios honest: a
 * weak probe would flatter every kernel. */
enum { PROBE_AHEAD_WORDS = 128 }; /* 1 KiB */

typedef struct sum_part {
    const uint64_t *data;
    size_t n;     /* words */
    int streams;  /* 1: one pass in order; else n / streams words each, a line of each in turn */
    bool vector;  /* 64-byte vector loads (where the CPU has them), two lines at a time */
    uint64_t sum;
} sum_part;

#if defined(__x86_64__)
#include <immintrin.h>

/* The vector loop: no prefetch (on Zen 4 it read less with one). */
__attribute__((target("avx512f"))) static uint64_t sum_lines_avx512(const uint64_t *data,
                                                                     size_t n, int streams)
{
    const size_t len = n / (size_t)streams / 16 * 16;
    __m512i a = _mm512_setzero_si512(), b = a;
    for (size_t i = 0; i < len; i += 16)
        for (int s = 0; s < streams; s++) {
            const uint64_t *line = data + (size_t)s * len + i;
            a = _mm512_add_epi64(a, _mm512_loadu_si512(line));
            b = _mm512_add_epi64(b, _mm512_loadu_si512(line + 8));
        }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(a, b));
}

__attribute__((target("avx2"))) static uint64_t sum_lines_avx2(const uint64_t *data, size_t n,
                                                               int streams)
{
    const size_t len = n / (size_t)streams / 16 * 16;
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < len; i += 16)
        for (int s = 0; s < streams; s++) {
            const __m256i *line = (const __m256i *)(data + (size_t)s * len + i);
            a = _mm256_add_epi64(a, _mm256_loadu_si256(line));
            b = _mm256_add_epi64(b, _mm256_loadu_si256(line + 1));
            c = _mm256_add_epi64(c, _mm256_loadu_si256(line + 2));
            d = _mm256_add_epi64(d, _mm256_loadu_si256(line + 3));
        }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(_mm256_add_epi64(a, b),
                                                           _mm256_add_epi64(c, d)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/* Which vector loop this CPU runs: "AVX-512", "AVX2" or NULL (none). */
static const char *vector_probe_name(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? "AVX-512"
           : __builtin_cpu_supports("avx2")  ? "AVX2"
                                             : NULL;
}
#else
static const char *vector_probe_name(void) { return NULL; }
#endif

static void *sum_words(void *arg)
{
    sum_part *p = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0;
#if defined(__x86_64__)
    if (p->vector) {
        p->sum = __builtin_cpu_supports("avx512f") ? sum_lines_avx512(p->data, p->n, p->streams)
                                                   : sum_lines_avx2(p->data, p->n, p->streams);
        return NULL;
    }
#endif
    if (p->streams == 1) {
        for (size_t i = 0; i + 4 <= p->n; i += 4) {
            a += p->data[i];
            b += p->data[i + 1];
            c += p->data[i + 2];
            d += p->data[i + 3];
        }
    } else {
        const size_t len = p->n / (size_t)p->streams / 8 * 8;
        for (size_t i = 0; i < len; i += 8)
            for (int s = 0; s < p->streams; s++) {
                const uint64_t *line = p->data + (size_t)s * len + i;
                __builtin_prefetch(line + PROBE_AHEAD_WORDS);
                a += line[0] + line[4];
                b += line[1] + line[5];
                c += line[2] + line[6];
                d += line[3] + line[7];
            }
    }
    p->sum = a + b + c + d;
    return NULL;
}

/* GB/s of one pass of `threads` threads (at most 256) summing `words`
 * words of buf, each its share in `streams` streams, with vector loads or
 * not. */
static double read_pass(const uint64_t *buf, size_t words, int threads, int streams, bool vector,
                        uint64_t *check)
{
    pthread_t tid[256];
    sum_part parts[256];
    const size_t share = words / (size_t)threads;
    const double t0 = bench_now();
    for (int t = 0; t < threads; t++) {
        parts[t] = (sum_part){buf + share * (size_t)t, share, streams, vector, 0};
        pthread_create(&tid[t], NULL, sum_words, &parts[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        *check += parts[t].sum;
    }
    return (double)(share * (size_t)threads * 8) / (bench_now() - t0) / 1e9;
}

/* read_pass's best of READ_REPEATS. */
static double read_loop(const uint64_t *buf, size_t words, int threads, int streams, bool vector,
                        uint64_t *check)
{
    double best = 0;
    for (int r = 0; r < READ_REPEATS; r++) {
        const double gbs = read_pass(buf, words, threads, streams, vector, check);
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* The best GB/s of the read loops (scalar: 1, 4 and 16 streams a thread;
 * vector: 1 and 2) over `bytes` bytes; prints each loop's figure on a
 * comment line. */
static double read_bandwidth(int64_t bytes, int threads, const char *when)
{
    const size_t words = (size_t)bytes / 8;
    threads = threads < 1 ? 1 : threads > 256 ? 256 : threads; /* read_loop's arrays */
    uint64_t *buf = malloc(words * 8);
    if (!buf)
        return 0;
    for (size_t i = 0; i < words; i++)
        buf[i] = i;
    static const struct {
        int streams;
        bool vector;
    } loops[5] = {{1, false}, {4, false}, {16, false}, {1, true}, {2, true}};
    const char *vector = vector_probe_name();
    double best = 0;
    uint64_t check = 0;
    printf("# read loops %s:", when);
    for (int i = 0; i < 5; i++) {
        if (loops[i].vector && !vector)
            continue;
        const double gbs = read_loop(buf, words, threads, loops[i].streams, loops[i].vector,
                                     &check);
        printf("%s %s%s%d stream%s %.2f GB/s", i ? "," : "", loops[i].vector ? vector : "",
               loops[i].vector ? " " : "", loops[i].streams, loops[i].streams > 1 ? "s" : "",
               gbs);
        best = gbs > best ? gbs : best;
    }
    printf("\n");
    free(buf);
    if (check == 42)
        printf("(unlikely)\n");
    return best;
}

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The read bandwidth a long run meets: `threads` threads reading `bytes`
 * again and again for `seconds` (two streams a thread of vector loads,
 * else four scalar ones), the median of the passes; prints it with the
 * lowest and highest. On the Zen 4 KVM guest a read that follows a pause
 * ran at 44-61 GB/s for a few seconds and then at 30-38 (a limit of the
 * host's, it seems), so read_bandwidth's best loop may meet a burst that
 * products running for seconds do not see: benchmarks print both. */
static double sustained_read_bandwidth(int64_t bytes, int threads, double seconds)
{
    enum { MOST_PASSES = 4096 };
    const size_t words = (size_t)bytes / 8;
    threads = threads < 1 ? 1 : threads > 256 ? 256 : threads;
    uint64_t *buf = malloc(words * 8);
    double *gbs = malloc(MOST_PASSES * sizeof *gbs);
    if (!buf || !gbs) {
        free(buf), free(gbs);
        return 0;
    }
    for (size_t i = 0; i < words; i++)
        buf[i] = i;
    const bool vector = vector_probe_name() != NULL;
    uint64_t check = 0;
    int n = 0;
    const double start = bench_now();
    for (; n < MOST_PASSES && bench_now() < start + seconds; n++)
        gbs[n] = read_pass(buf, words, threads, vector ? 2 : 4, vector, &check);
    const double elapsed = bench_now() - start;
    qsort(gbs, (size_t)n, sizeof *gbs, compare_doubles);
    const double median = n ? gbs[n / 2] : 0;
    printf("# sustained read: %d threads, %d passes of %lld MiB in %.1f s, %s: median %.2f GB/s "
           "(lowest %.2f, highest %.2f)\n",
           threads, n, (long long)(bytes >> 20), elapsed,
           vector ? "two vector streams a thread" : "four streams a thread", median,
           n ? gbs[0] : 0, n ? gbs[n - 1] : 0);
    free(buf), free(gbs);
    if (check == 42)
        printf("(unlikely)\n");
    return median;
}

#endif
