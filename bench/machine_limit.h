/*
 * The machine's compute limit, for benchmarks to set their figures
 * against: the rate of a loop of independent float32 FMAs (512- or 256-bit),
 * of vdpbf16ps (AVX512_BF16's bfloat16 dot products) or of tdpbf16ps (AMX's
 * bfloat16 tile products), run on `threads` threads at once for a quarter
 * of a second. Header-only; x86-64 Linux (elsewhere machine_limit_supported
 * says no and the rate is 0).
 */
#ifndef WEFT_BENCH_MACHINE_LIMIT_H
#define WEFT_BENCH_MACHINE_LIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

typedef enum { MACHINE_FMA_512, MACHINE_FMA_256, MACHINE_DPBF16_512, MACHINE_TDPBF16 } machine_loop;

#if defined(__x86_64__)
/* Independent accumulators: two FMA ports with a latency of 4 need 8; 24
 * (512-bit: 32 registers) or 12 (256-bit: AVX2 has 16; 24 spill) leave no
 * doubt that the ports, not a chain, bound the loop. */
enum { MACHINE_CHAINS = 24, MACHINE_CHAINS_256 = 12, MACHINE_BLOCK = 100000 };

/* MACHINE_BLOCK iterations of the accumulators' FMAs; returns their sum so
 * the compiler keeps them. */
__attribute__((target("avx512f"))) static inline float machine_fma_block_512(void)
{
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    __m512 acc[MACHINE_CHAINS];
    for (int j = 0; j < MACHINE_CHAINS; j++)
        acc[j] = _mm512_set1_ps((float)j);
    for (int i = 0; i < MACHINE_BLOCK; i++)
#pragma GCC unroll 24
        for (int j = 0; j < MACHINE_CHAINS; j++)
            acc[j] = _mm512_fmadd_ps(acc[j], x, y);
    float s = 0.0f;
    for (int j = 0; j < MACHINE_CHAINS; j++)
        s += _mm512_reduce_add_ps(acc[j]);
    return s;
}

__attribute__((target("avx2,fma"))) static inline float machine_fma_block_256(void)
{
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    __m256 acc[MACHINE_CHAINS_256];
    for (int j = 0; j < MACHINE_CHAINS_256; j++)
        acc[j] = _mm256_set1_ps((float)j);
    for (int i = 0; i < MACHINE_BLOCK; i++)
#pragma GCC unroll 12
        for (int j = 0; j < MACHINE_CHAINS_256; j++)
            acc[j] = _mm256_fmadd_ps(acc[j], x, y);
    float lanes[8], s = 0.0f;
    for (int j = 0; j < MACHINE_CHAINS_256; j++) {
        _mm256_storeu_ps(lanes, acc[j]);
        for (int l = 0; l < 8; l++)
            s += lanes[l];
    }
    return s;
}

/* vdpbf16ps: 32 multiply-adds per instruction, 2 per float32 lane. */
__attribute__((target("avx512f,avx512bf16"))) static inline float machine_dpbf16_block_512(void)
{
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    __m512 acc[MACHINE_CHAINS];
    for (int j = 0; j < MACHINE_CHAINS; j++)
        acc[j] = _mm512_setzero_ps();
    for (int i = 0; i < MACHINE_BLOCK; i++)
#pragma GCC unroll 24
        for (int j = 0; j < MACHINE_CHAINS; j++)
            acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
    float s = 0.0f;
    for (int j = 0; j < MACHINE_CHAINS; j++)
        s += _mm512_reduce_add_ps(acc[j]);
    return s;
}

/* tdpbf16ps: 16 x 16 x 32 multiply-adds per instruction, into four
 * accumulator tiles in turn (A and B tiles loaded once: the tile unit's
 * rate, not the loads'). */
enum { MACHINE_AMX_BLOCK = 100000 };
__attribute__((target("amx-tile,amx-bf16"))) static inline float machine_tdpbf16_block(void)
{
    struct {
        unsigned char palette, start_row, reserved[14];
        unsigned short bytes_per_row[16];
        unsigned char rows[16];
    } config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 8; t++) {
        config.rows[t] = 16;
        config.bytes_per_row[t] = 64;
    }
    static const unsigned short zeros[16 * 32];
    float out[16 * 16];
    _tile_loadconfig(&config);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    for (int i = 0; i < MACHINE_AMX_BLOCK; i++) {
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 5);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

/* Floating-point operations (2 per multiply-add) of one block. */
static inline double machine_block_flops(machine_loop loop)
{
    if (loop == MACHINE_TDPBF16)
        return 2.0 * 16 * 16 * 32 * 4 * MACHINE_AMX_BLOCK;
    if (loop == MACHINE_FMA_256)
        return 2.0 * 8 * MACHINE_CHAINS_256 * MACHINE_BLOCK;
    return 2.0 * (loop == MACHINE_FMA_512 ? 16 : 32) * MACHINE_CHAINS * MACHINE_BLOCK;
}
#endif

/* Whether this CPU runs the loop. */
static inline bool machine_limit_supported(machine_loop loop)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (loop == MACHINE_FMA_256)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (loop == MACHINE_FMA_512)
        return __builtin_cpu_supports("avx512f");
    if (loop == MACHINE_TDPBF16) { /* CPUID leaf 7 EDX: AMX-BF16 22, AMX-TILE 24; Linux's leave */
        unsigned a, b, c, d;
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1u) && (d >> 24 & 1u) &&
               syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
    }
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    (void)loop;
    return false;
#endif
}

typedef struct machine_job {
    machine_loop loop;
    double flops, seconds;
    float sink;
} machine_job;

static inline double machine_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void *machine_thread(void *arg)
{
    machine_job *job = arg;
#if defined(__x86_64__)
    const double t0 = machine_seconds();
    double t = t0;
    for (; t - t0 < 0.25; t = machine_seconds()) {
        job->sink += job->loop == MACHINE_FMA_512      ? machine_fma_block_512()
                     : job->loop == MACHINE_FMA_256    ? machine_fma_block_256()
                     : job->loop == MACHINE_DPBF16_512 ? machine_dpbf16_block_512()
                                                       : machine_tdpbf16_block();
        job->flops += machine_block_flops(job->loop);
    }
    job->seconds = t - t0;
#endif
    return NULL;
}

/* The loop's rate in GFLOP/s per thread, run on `threads` threads at once
 * (all cores busy, as in a product using the whole pool); 0 where the CPU
 * does not run it. */
static inline double machine_gflops_per_thread(machine_loop loop, int threads)
{
    enum { MAX_THREADS_MEASURED = 256 };
    machine_job jobs[MAX_THREADS_MEASURED] = {{0}};
    pthread_t tids[MAX_THREADS_MEASURED];
    if (!machine_limit_supported(loop) || threads < 1)
        return 0.0;
    if (threads > MAX_THREADS_MEASURED)
        threads = MAX_THREADS_MEASURED;
    int started = 0;
    for (; started < threads; started++) {
        jobs[started].loop = loop;
        if (pthread_create(&tids[started], NULL, machine_thread, &jobs[started]) != 0)
            break;
    }
    double rate = 0.0;
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        if (jobs[i].seconds > 0.0)
            rate += jobs[i].flops / jobs[i].seconds;
    }
    return started > 0 ? rate / started * 1e-9 : 0.0;
}

#endif
