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
 * one loop reaches it everywhere: on the KVM Xeon these figures come from,
 * one sequential stream a thread read 22-26 GB/s where 4 or 16 streams a
 * thread, each asked for 1 KiB ahead, read 30-33 (and the int8 matvec
 * kernel, which reads 16 rows at once, 30). Taking the best keeps the
 * ratios honest: a weak probe would flatter every kernel. */
enum { PROBE_AHEAD_WORDS = 128 }; /* 1 KiB */

typedef struct sum_part {
    const uint64_t *data;
    size_t n;     /* words */
    int streams;  /* 1: one pass in order; else n / streams words each, a line of each in turn */
    uint64_t sum;
} sum_part;

static void *sum_words(void *arg)
{
    sum_part *p = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0;
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

/* GB/s of `threads` threads summing `words` words of buf, each its share
 * in `streams` streams (best of READ_REPEATS). */
static double read_loop(const uint64_t *buf, size_t words, int threads, int streams,
                        uint64_t *check)
{
    double best = 0;
    for (int r = 0; r < READ_REPEATS; r++) {
        pthread_t tid[256];
        sum_part parts[256];
        const size_t share = words / (size_t)threads;
        const double t0 = bench_now();
        for (int t = 0; t < threads; t++) {
            parts[t] = (sum_part){buf + share * (size_t)t, share, streams, 0};
            pthread_create(&tid[t], NULL, sum_words, &parts[t]);
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            *check += parts[t].sum;
        }
        const double gbs = (double)(share * (size_t)threads * 8) / (bench_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* The best GB/s of the read loops (1, 4 and 16 streams a thread) over
 * `bytes` bytes; prints each loop's figure on a comment line. */
static double read_bandwidth(int64_t bytes, int threads, const char *when)
{
    const size_t words = (size_t)bytes / 8;
    threads = threads < 1 ? 1 : threads > 256 ? 256 : threads; /* read_loop's arrays */
    uint64_t *buf = malloc(words * 8);
    if (!buf)
        return 0;
    for (size_t i = 0; i < words; i++)
        buf[i] = i;
    static const int streams[3] = {1, 4, 16};
    double best = 0;
    uint64_t check = 0;
    printf("# read loops %s:", when);
    for (int i = 0; i < 3; i++) {
        const double gbs = read_loop(buf, words, threads, streams[i], &check);
        printf(" %d stream%s %.2f GB/s%s", streams[i], streams[i] > 1 ? "s" : "", gbs,
               i < 2 ? "," : "\n");
        best = gbs > best ? gbs : best;
    }
    free(buf);
    if (check == 42)
        printf("(unlikely)\n");
    return best;
}

#endif
