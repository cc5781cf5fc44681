/*
 * The machine's read bandwidth, for benchmarks to set memory-bound figures
 * against (bench_quantized, bench_qmv_ceiling): `threads` threads summing
 * one large buffer, the best of three read loops. Header-only; printf's
 * one comment line per measurement.
 */
#ifndef WEFT_BENCH_READ_BANDWIDTH_H
#define WEFT_BENCH_READ_BANDWIDTH_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { READ_REPEATS = 3 };

static double read_now(void)
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
    int streams;  /* 1: one pass in order; otherwise n / streams words each, a line of each in turn */
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
        const double t0 = read_now();
        for (int t = 0; t < threads; t++) {
            parts[t] = (sum_part){buf + share * (size_t)t, share, streams, 0};
            pthread_create(&tid[t], NULL, sum_words, &parts[t]);
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            *check += parts[t].sum;
        }
        const double gbs = (double)(share * (size_t)threads * 8) / (read_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* The best GB/s of the read loops (1, 4 and 16 streams a thread) over
 * `bytes` bytes; prints each loop's figure on a comment line. */
static double read_bandwidth(int64_t bytes, int threads, const char *when)
{
    const size_t words = (size_t)bytes / 8;
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
