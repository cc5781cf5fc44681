/*
 * bench_matmul: weft's GEMM (through wf_matmul) beside direct OpenBLAS calls
 * on the same data, in one run:
 *  - float32 square products 256 ... 4096: GFLOP/s of each and the ratio;
 *    float64 1024 against cblas_dgemm; complex64 256 ... 2048, 16 batched
 *    256^3 and 1 x 4096 @ 4096^2 against cblas_cgemm (what NumPy's complex64
 *    matmul calls, but Debian's build: bench/peers/complex_matmul.py sets
 *    weft beside NumPy's own; 8 m n k flops);
 *  - 8 batched 512 x 512 products (against a loop of cblas_sgemm calls);
 *  - the transposed products of an MLP backward pass, x.T @ dy and dy @ W.T
 *    (against cblas_sgemm with CblasTrans);
 *  - bfloat16 1024 and 2048 (weft; against weft's and OpenBLAS's float32);
 *  - the matrix-vector product 1 x 784 @ 784 x 1024 in microseconds
 *    (against cblas_sgemv; and weft in bfloat16);
 *  - scaled dot-product attention (8 heads, L = 512, D = 64, plain and causal);
 *  - concurrent requests: batch-32 products 32 x 784 @ 784 x 1024 from 1 and
 *    from 2 threads at once (weft, and cblas_sgemm called the same way).
 * Ratios are weft / OpenBLAS throughput (> 1: weft faster). The float32,
 * complex64 and float64 lines also give weft's share of the machine's limit:
 * the FMA rate of the vector width weft's GEMM uses, measured in the same
 * run by a loop of independent FMAs on as many threads as weft's pool has
 * (the header prints it, and the rate of vdpbf16ps or of AMX's tdpbf16ps
 * where weft's bfloat16 GEMM uses that instruction). Each figure is the
 * best of several runs, weft and OpenBLAS in alternating blocks; big sizes
 * run fewer times. The header says which kernels each library picked: OpenBLAS's core
 * name (set OPENBLAS_CORETYPE to change it; weft never does) and weft's ISA
 * variant (WEFT_ISA caps it).
 *
 *   build/release/bench_matmul [--cpu-time] [--matvec | --complex | --small-m | --square]
 *                              [max_repeats=7]
 *
 * --matvec runs only the matrix-vector lines (x @ W and x @ W.T);
 * --complex only the complex64 lines; --small-m only the small-row products
 * of a BERT-small layer (M = 16 ... 256 rows: a few sentences of a serving
 * batch; K x N = 384 x 1152, 384 x 384, 384 x 1536, 1536 x 384), W taken in
 * turn from 8 copies, so it comes from outside L2 as served weights do;
 * --square the complex64, float32 and float64 square products only.
 *
 * --cpu-time times with the process's CPU time instead of the wall clock:
 * with WEFT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 it compares the libraries
 * on one core even on a machine shared with other work (the concurrent
 * requests line always uses the wall clock).
 */
#include <cblas.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
#include "runtime/pool.h"
#include "weft.h"
#include "machine_limit.h"

char *openblas_get_corename(void); /* OpenBLAS's, not in every cblas.h */

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double clock_seconds(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now_seconds(void) { return clock_seconds(bench_clock); }

static float *random_floats(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return v;
}

static void check(wf_status st)
{
    if (st != WF_OK) {
        fprintf(stderr, "bench_matmul: %s\n", wf_last_error_message());
        exit(1);
    }
}

/* A timed pair: weft builds a fresh op on ready inputs and evaluates it;
 * the BLAS side calls `blas` on raw data. */
typedef wf_array *(*build_fn)(wf_array **in);
typedef void (*blas_fn)(void *ctx);

static double time_weft(build_fn build, wf_array **in)
{
    wf_array *out = build(in);
    const double t0 = now_seconds();
    check(wf_eval(&out, 1));
    const double t = now_seconds() - t0;
    wf_release(out);
    return t;
}

static double time_blas(blas_fn blas, void *ctx)
{
    const double t0 = now_seconds();
    blas(ctx);
    return now_seconds() - t0;
}

/* Both libraries keep their idle pool threads busy-waiting for a while
 * after a call (weft for WEFT_POOL_SPIN_US, OpenBLAS much longer, yielding):
 * on a machine with few cores the threads of one would take the cores from
 * the next call of the other. So the libraries run in blocks, with a pause
 * for the other's threads to go to sleep before each block. */
enum { ROUNDS = 3, SETTLE_US = 300000 };

static void settle(void) { usleep(SETTLE_US); }

/* Best times of weft and BLAS (blas may be NULL), in ROUNDS rounds of a
 * block of each, after one warm-up each; big products run fewer times (a
 * quarter of max_repeats, at least 2, above ~4 GFLOP), small ones more. */
static void best_pair(build_fn build, wf_array **in, blas_fn blas, void *ctx, double flops,
                      int max_repeats, double *tw, double *tb)
{
    int repeats = flops > 4e9   ? (max_repeats / 4 > 2 ? max_repeats / 4 : 2)
                  : flops > 1e9 ? (max_repeats / 2 > 3 ? max_repeats / 2 : 3)
                                : max_repeats;
    if (flops < 1e8)
        repeats = 20 * max_repeats;
    const int per_block = (repeats + ROUNDS - 1) / ROUNDS;
    *tw = *tb = 1e30;
    for (int round = 0; round < ROUNDS; round++) {
        settle();
        for (int r = 0; r <= per_block; r++) { /* r == 0: warm-up */
            const double t = time_weft(build, in);
            *tw = r > 0 && t < *tw ? t : *tw;
        }
        if (!blas)
            continue;
        settle();
        for (int r = 0; r <= per_block; r++) {
            const double t = time_blas(blas, ctx);
            *tb = r > 0 && t < *tb ? t : *tb;
        }
    }
}

static wf_array *build_matmul(wf_array **in) { return wf_matmul(in[0], in[1]); }
static wf_array *build_matmul_bf16(wf_array **in) { return wf_matmul(in[2], in[3]); }
static wf_array *build_matmul_f32_f16(wf_array **in) { return wf_matmul(in[0], in[4]); }
static wf_array *build_matmul_wt(wf_array **in)
{
    wf_array *wt = wf_transpose(in[1], NULL, 0);
    wf_array *y = wf_matmul(in[0], wt);
    wf_release(wt);
    return y;
}
static wf_array *build_sdpa(wf_array **in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.125, NULL, false);
}
static wf_array *build_sdpa_causal(wf_array **in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.125, NULL, true);
}

/* A BLAS call's operands: float32, or float64 for run_dgemm; ta / tb: a is
 * stored k x m, b n x k (their transposes are multiplied). */
typedef struct blas_ctx {
    int batches, m, n, k;
    const void *a, *b;
    void *c;
    bool ta, tb;
} blas_ctx;

static void run_sgemm(void *vctx)
{
    const blas_ctx *s = vctx;
    const float *a = s->a, *b = s->b;
    float *c = s->c;
    for (int i = 0; i < s->batches; i++)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                    s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f,
                    a + (size_t)i * s->m * s->k, s->ta ? s->m : s->k,
                    b + (size_t)i * s->k * s->n, s->tb ? s->k : s->n, 0.0f,
                    c + (size_t)i * s->m * s->n, s->n);
}

static void run_dgemm(void *vctx)
{
    const blas_ctx *s = vctx;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, 1.0, s->a, s->k,
                s->b, s->n, 0.0, s->c, s->n);
}

static void run_sgemv(void *vctx)
{
    const blas_ctx *s = vctx; /* y (1 x n) = x (1 x k) B (k x n): y^T = B^T x^T */
    cblas_sgemv(CblasRowMajor, CblasTrans, s->k, s->n, 1.0f, s->b, s->n, s->a, 1, 0.0f, s->c, 1);
}

static void run_sgemv_t(void *vctx)
{
    const blas_ctx *s = vctx; /* y = x W^T with W (n x k): y^T = W x^T */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, s->n, s->k, 1.0f, s->b, s->k, s->a, 1, 0.0f, s->c, 1);
}

/* ---------------------------------------------------------------- the machine's limit */

/* float32 GFLOP/s that weft's figures are set against: one thread's FMA
 * rate under CPU time (each figure is then per busy core), all threads'
 * under the wall clock; 0 where it is not measured. */
static double fma_limit;
/* The same for the instruction weft's bfloat16 GEMM uses (vdpbf16ps, or
 * AMX's tdpbf16ps; else 0), and its name. */
static double bf16_limit;
static const char *bf16_instruction;

/* Measures and prints the limit; sets fma_limit (left 0 where weft's GEMM
 * has no vector kernel). */
static void measure_machine_limit(void)
{
    const int isa = wf__gemm_isa(), threads = wf__pool_size();
    if (isa < WF_GEMM_ISA_AVX2) {
        printf("machine limit: not measured (weft's GEMM runs its scalar kernel)\n");
        return;
    }
    const bool wide = isa >= WF_GEMM_ISA_AVX512;
    const double per_thread =
        machine_gflops_per_thread(wide ? MACHINE_FMA_512 : MACHINE_FMA_256, threads);
    fma_limit = bench_clock == CLOCK_MONOTONIC ? per_thread * threads : per_thread;
    printf("machine limit: float32 FMA peak (%s) %.1f GFLOP/s per thread with %d thread(s) "
           "busy, %.1f in all",
           wide ? "512-bit" : "256-bit", per_thread, threads, per_thread * threads);
    if (wf__gemm_isa_has_bf16(isa)) {
        const bool amx = isa == WF_GEMM_ISA_AMX_BF16;
        const double dp =
            machine_gflops_per_thread(amx ? MACHINE_TDPBF16 : MACHINE_DPBF16_512, threads);
        bf16_limit = bench_clock == CLOCK_MONOTONIC ? dp * threads : dp;
        bf16_instruction = amx ? "tdpbf16ps" : "vdpbf16ps";
        printf("; %s (bfloat16) %.1f GFLOP/s per thread", bf16_instruction, dp);
    }
    printf("\n");
}

/* One line: weft's and OpenBLAS's throughput for `flops` done in tw and tb
 * seconds, the ratio (> 1: weft faster) and weft's share of `limit`
 * (GFLOP/s; 0: none). */
static void print_pair(const char *label, double flops, double tw, double tb, double limit)
{
    printf("%-22s weft %7.1f GFLOP/s   OpenBLAS %7.1f GFLOP/s   ratio %.2f", label,
           flops / tw * 1e-9, flops / tb * 1e-9, tb / tw);
    if (limit > 0.0)
        printf("   weft %3.0f%% of peak", 100.0 * flops / tw * 1e-9 / limit);
    printf("\n");
}

/* One float32 product (batches x m x k @ batches x k x n); prints a line. */
static void bench_product(const char *label, int batches, int m, int n, int k, int max_repeats,
                          bool with_bf16)
{
    float *a = random_floats((int64_t)batches * m * k, 1);
    float *b = random_floats((int64_t)batches * k * n, 2);
    float *c = malloc((size_t)batches * m * n * sizeof *c);
    const int64_t sa[3] = {batches, m, k}, sb[3] = {batches, k, n};
    const int nd = batches > 1 ? 3 : 2;
    wf_array *in[4] = {wf_array_from_data(a, sa + 3 - nd, nd, WF_DTYPE_F32),
                       wf_array_from_data(b, sb + 3 - nd, nd, WF_DTYPE_F32), NULL, NULL};
    blas_ctx ctx = {batches, m, n, k, a, b, c, false, false};
    const double flops = 2.0 * batches * m * n * (double)k;
    double tw, tb;
    best_pair(build_matmul, in, run_sgemm, &ctx, flops, max_repeats, &tw, &tb);
    print_pair(label, flops, tw, tb, fma_limit);
    if (with_bf16) {
        in[2] = wf_astype(in[0], WF_DTYPE_BF16);
        in[3] = wf_astype(in[1], WF_DTYPE_BF16);
        check(wf_eval(&in[2], 2));
        double th, unused;
        best_pair(build_matmul_bf16, in, NULL, NULL, flops, max_repeats, &th, &unused);
        printf("%-22s weft %7.1f GFLOP/s   (%.2fx weft float32, %.2fx OpenBLAS float32)",
               "  bfloat16 inputs", flops / th * 1e-9, tw / th, tb / th);
        if (bf16_limit > 0.0)
            printf("   weft %3.0f%% of %s's peak", 100.0 * flops / th * 1e-9 / bf16_limit,
                   bf16_instruction);
        printf("\n");
    }
    for (int i = 0; i < 4; i++)
        wf_release(in[i]);
    free(a);
    free(b);
    free(c);
}

static wf_array *build_matmul_at(wf_array **in)
{
    wf_array *at = wf_transpose(in[0], NULL, 0);
    wf_array *y = wf_matmul(at, in[1]);
    wf_release(at);
    return y;
}

/* The transposed products of an MLP's backward pass (784-512 layer, batch
 * 256): the weight gradient x.T @ dy (A stored transposed) and the input
 * gradient dy @ W.T (B stored transposed), each beside cblas_sgemm told the
 * same layout. */
static void bench_transposed(int max_repeats)
{
    enum { M = 784, N = 512, K = 256 };
    float *x = random_floats((int64_t)K * M, 3), *dy = random_floats((int64_t)K * N, 4);
    float *w = random_floats((int64_t)M * N, 5), *c = malloc((size_t)M * N * sizeof *c);
    const int64_t sx[2] = {K, M}, sdy[2] = {K, N}, sw[2] = {M, N};
    wf_array *in[2] = {wf_array_from_data(x, sx, 2, WF_DTYPE_F32),
                       wf_array_from_data(dy, sdy, 2, WF_DTYPE_F32)};
    blas_ctx ctx = {1, M, N, K, x, dy, c, true, false};
    double flops = 2.0 * M * N * K, tw, tb;
    best_pair(build_matmul_at, in, run_sgemm, &ctx, flops, max_repeats, &tw, &tb);
    print_pair("x.T@dy 784x512x256", flops, tw, tb, fma_limit);
    wf_release(in[0]);
    in[0] = in[1]; /* dy (K x N) @ W.T with W stored M x N: K x M out, over N */
    in[1] = wf_array_from_data(w, sw, 2, WF_DTYPE_F32);
    ctx = (blas_ctx){1, K, M, N, dy, w, c, false, true};
    best_pair(build_matmul_wt, in, run_sgemm, &ctx, flops, max_repeats, &tw, &tb);
    print_pair("dy@W.T 256x784x512", flops, tw, tb, fma_limit);
    wf_release(in[0]);
    wf_release(in[1]);
    free(x);
    free(dy);
    free(w);
    free(c);
}

/* One cblas_cgemm per batch (a row: what cgemv would do, through cgemm). */
static void run_cgemm(void *vctx)
{
    const blas_ctx *s = vctx;
    const float one[2] = {1.0f, 0.0f}, zero[2] = {0.0f, 0.0f};
    const float *a = s->a, *b = s->b;
    float *c = s->c;
    for (int i = 0; i < s->batches; i++)
        cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, one,
                    a + 2 * (size_t)i * s->m * s->k, s->k, b + 2 * (size_t)i * s->k * s->n, s->n,
                    zero, c + 2 * (size_t)i * s->m * s->n, s->n);
}

/* complex64 batches x (m x k @ k x n) beside cblas_cgemm (interleaved re, im). */
static void bench_complex(const char *label, int batches, int m, int n, int k, int max_repeats)
{
    const int64_t asize = (int64_t)batches * m * k, bsize = (int64_t)batches * k * n;
    float *a = random_floats(2 * asize, 7), *b = random_floats(2 * bsize, 8);
    float *c = malloc((size_t)batches * m * n * 2 * sizeof *c);
    const int64_t sa[3] = {batches, m, k}, sb[3] = {batches, k, n};
    wf_array *in[2] = {wf_array_from_data(a, batches > 1 ? sa : sa + 1, batches > 1 ? 3 : 2,
                                          WF_DTYPE_C64),
                       wf_array_from_data(b, batches > 1 ? sb : sb + 1, batches > 1 ? 3 : 2,
                                          WF_DTYPE_C64)};
    blas_ctx ctx = {batches, m, n, k, a, b, c, false, false};
    const double flops = 8.0 * batches * m * n * (double)k;
    double tw, tb;
    best_pair(build_matmul, in, run_cgemm, &ctx, flops, max_repeats, &tw, &tb);
    /* 8 flops: 4 float32 multiply-adds. A matrix-vector product is bound
     * by memory, not by the FMA rate. */
    print_pair(label, flops, tw, tb, m > 1 ? fma_limit : 0.0);
    wf_release(in[0]);
    wf_release(in[1]);
    free(a);
    free(b);
    free(c);
}

static void bench_float64(int n, int max_repeats)
{
    double *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
    double *c = malloc((size_t)n * n * sizeof *c);
    float *fa = random_floats((int64_t)n * n, 5), *fb = random_floats((int64_t)n * n, 6);
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        a[i] = fa[i];
        b[i] = fb[i];
    }
    const int64_t s2[2] = {n, n};
    wf_array *in[2] = {wf_array_from_data(a, s2, 2, WF_DTYPE_F64),
                       wf_array_from_data(b, s2, 2, WF_DTYPE_F64)};
    blas_ctx ctx = {1, n, n, n, a, b, c, false, false};
    const double flops = 2.0 * n * n * (double)n;
    double tw, tb;
    best_pair(build_matmul, in, run_dgemm, &ctx, flops, max_repeats, &tw, &tb);
    char label[32];
    snprintf(label, sizeof label, "dgemm %d^3", n);
    print_pair(label, flops, tw, tb, fma_limit / 2.0); /* half the lanes */
    wf_release(in[0]);
    wf_release(in[1]);
    free(a);
    free(b);
    free(c);
    free(fa);
    free(fb);
}

/* 1 x 784 @ 784 x 1024 with W row-major (x @ W) and with W stored 1024 x
 * 784 (x @ W.T, a view), each beside the matching sgemv; x @ W also with
 * W and x bfloat16, and x float32 with W float16 (half weights). */
static void bench_matvec(int max_repeats)
{
    const int k = 784, n = 1024;
    float *x = random_floats(k, 3), *w = random_floats((int64_t)k * n, 4), *y = malloc(n * 4);
    const int64_t sx[2] = {1, k}, sw[2] = {k, n}, swt[2] = {n, k};
    wf_array *in[5] = {wf_array_from_data(x, sx, 2, WF_DTYPE_F32),
                       wf_array_from_data(w, sw, 2, WF_DTYPE_F32), NULL, NULL, NULL};
    in[2] = wf_astype(in[0], WF_DTYPE_BF16);
    in[3] = wf_astype(in[1], WF_DTYPE_BF16);
    in[4] = wf_astype(in[1], WF_DTYPE_F16);
    check(wf_eval(&in[2], 3));
    blas_ctx ctx = {1, 1, n, k, x, w, y, false, false};
    double tw, tv, th, tf, unused;
    best_pair(build_matmul, in, run_sgemv, &ctx, 2.0 * k * n, max_repeats, &tw, &tv);
    best_pair(build_matmul_bf16, in, NULL, NULL, 2.0 * k * n, max_repeats, &th, &unused);
    best_pair(build_matmul_f32_f16, in, NULL, NULL, 2.0 * k * n, max_repeats, &tf, &unused);
    printf("%-22s weft %7.1f us       OpenBLAS sgemv %6.1f us (ratio %.2f); weft bf16 %.1f us, "
           "W float16 %.1f us\n",
           "matvec 1x784@784x1024", tw * 1e6, tv * 1e6, tv / tw, th * 1e6, tf * 1e6);
    /* The same data read as W (1024 x 784): x @ W.T. */
    wf_release(in[1]);
    in[1] = wf_array_from_data(w, swt, 2, WF_DTYPE_F32);
    best_pair(build_matmul_wt, in, run_sgemv_t, &ctx, 2.0 * k * n, max_repeats, &tw, &tv);
    printf("%-22s weft %7.1f us       OpenBLAS sgemv %6.1f us (ratio %.2f)\n",
           "matvec 1x784@(1024x784).T", tw * 1e6, tv * 1e6, tv / tw);
    for (int i = 0; i < 5; i++)
        wf_release(in[i]);
    free(x);
    free(w);
    free(y);
}

static void bench_sdpa(int max_repeats)
{
    const int64_t h = 8, l = 512, d = 64;
    const int64_t s4[4] = {1, h, l, d};
    float *q = random_floats(h * l * d, 5), *k = random_floats(h * l * d, 6),
          *v = random_floats(h * l * d, 7);
    wf_array *in[3] = {wf_array_from_data(q, s4, 4, WF_DTYPE_F32),
                       wf_array_from_data(k, s4, 4, WF_DTYPE_F32),
                       wf_array_from_data(v, s4, 4, WF_DTYPE_F32)};
    const double flops = 4.0 * (double)h * (double)l * (double)l * (double)d;
    double t_sdpa, t_causal, unused;
    best_pair(build_sdpa, in, NULL, NULL, flops, max_repeats, &t_sdpa, &unused);
    best_pair(build_sdpa_causal, in, NULL, NULL, flops, max_repeats, &t_causal, &unused);
    printf("%-22s weft %7.2f ms (%6.1f GFLOP/s)   causal %7.2f ms\n", "sdpa 8x512x64", t_sdpa * 1e3,
           flops / t_sdpa * 1e-9, t_causal * 1e3);
    for (int i = 0; i < 3; i++)
        wf_release(in[i]);
    free(q);
    free(k);
    free(v);
}

/* Products x @ W over WEIGHT_COPIES copies of W taken in turn, so W comes
 * from outside L2 as a model's weights do when it is served (a model's
 * layers together are far larger than L2). */
enum { WEIGHT_COPIES = 8 };
static int weight_turn;

static wf_array *build_matmul_rotating(wf_array **in)
{
    weight_turn = (weight_turn + 1) % WEIGHT_COPIES;
    return wf_matmul(in[0], in[1 + weight_turn]);
}

static void run_sgemm_rotating(void *vctx)
{
    blas_ctx ctx = *(const blas_ctx *)vctx;
    weight_turn = (weight_turn + 1) % WEIGHT_COPIES;
    ctx.b = (const float *)ctx.b + (size_t)weight_turn * ctx.k * ctx.n;
    run_sgemm(&ctx);
}

/* The products of one all-MiniLM-L6-v2 encoder layer (x @ W, W row-major
 * k x n as the model holds it) at the row counts of a serving batch, W
 * taken from outside L2: per shape and in all (the layer's flops over its
 * summed time). */
static void bench_small_m(int max_repeats)
{
    static const int rows[] = {16, 32, 64, 128, 256};
    static const int kn[4][2] = {{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}};
    printf("small-M products of a BERT layer, W from outside L2 (GFLOP/s, weft / OpenBLAS):\n"
           "%-8s", "rows");
    for (int s = 0; s < 4; s++) {
        char label[32];
        snprintf(label, sizeof label, "%dx%d", kn[s][0], kn[s][1]);
        printf(" %17s", label);
    }
    printf(" %17s %6s\n", "layer", "ratio");
    for (int r = 0; r < 5; r++) {
        const int m = rows[r];
        double sum_w = 0, sum_b = 0, layer_flops = 0;
        printf("%-8d", m);
        for (int s = 0; s < 4; s++) {
            const int k = kn[s][0], n = kn[s][1];
            float *a = random_floats((int64_t)m * k, 11);
            float *b = random_floats((int64_t)WEIGHT_COPIES * k * n, 12);
            float *c = malloc((size_t)m * n * sizeof *c);
            const int64_t sa[2] = {m, k}, sb[2] = {k, n};
            wf_array *in[1 + WEIGHT_COPIES] = {wf_array_from_data(a, sa, 2, WF_DTYPE_F32)};
            for (int w = 0; w < WEIGHT_COPIES; w++)
                in[1 + w] = wf_array_from_data(b + (size_t)w * k * n, sb, 2, WF_DTYPE_F32);
            blas_ctx ctx = {1, m, n, k, a, b, c, false, false};
            const double flops = 2.0 * m * n * (double)k;
            double tw, tb;
            best_pair(build_matmul_rotating, in, run_sgemm_rotating, &ctx, flops, max_repeats,
                      &tw, &tb);
            printf("  %7.1f / %-7.1f", flops / tw * 1e-9, flops / tb * 1e-9);
            sum_w += tw;
            sum_b += tb;
            layer_flops += flops;
            for (int i = 0; i < 1 + WEIGHT_COPIES; i++)
                wf_release(in[i]);
            free(a);
            free(b);
            free(c);
        }
        printf("  %7.1f / %-7.1f %6.2f\n", layer_flops / sum_w * 1e-9, layer_flops / sum_b * 1e-9,
               sum_b / sum_w);
    }
}

/* ---------------------------------------------------------------- concurrent requests */

enum { REQ_ROWS = 32, REQ_K = 784, REQ_N = 1024, REQUESTS = 40 };

typedef struct request_ctx {
    bool blas;
    wf_array *x, *w;          /* weft */
    const float *xd, *wd;     /* BLAS */
    float *out;
} request_ctx;

static void *serve_requests(void *vctx)
{
    request_ctx *r = vctx;
    for (int i = 0; i < REQUESTS; i++) {
        if (r->blas) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, REQ_ROWS, REQ_N, REQ_K, 1.0f,
                        r->xd, REQ_K, r->wd, REQ_N, 0.0f, r->out, REQ_N);
        } else {
            wf_array *y = wf_matmul(r->x, r->w);
            check(wf_eval(&y, 1));
            wf_release(y);
        }
    }
    return NULL;
}

/* Requests per second from `threads` threads at once (best of 3). */
static double requests_per_second(int threads, request_ctx *ctx)
{
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t t[2];
        const double t0 = clock_seconds(CLOCK_MONOTONIC);
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, serve_requests, &ctx[i]);
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
        const double t1 = clock_seconds(CLOCK_MONOTONIC) - t0;
        best = t1 < best ? t1 : best;
    }
    return threads * REQUESTS / best;
}

static void bench_concurrent(void)
{
    float *x = random_floats(REQ_ROWS * REQ_K, 8), *w = random_floats(REQ_K * REQ_N, 9);
    const int64_t sx[2] = {REQ_ROWS, REQ_K}, sw[2] = {REQ_K, REQ_N};
    wf_array *xa = wf_array_from_data(x, sx, 2, WF_DTYPE_F32);
    wf_array *wa = wf_array_from_data(w, sw, 2, WF_DTYPE_F32);
    float *out[2] = {malloc(REQ_ROWS * REQ_N * sizeof(float)),
                     malloc(REQ_ROWS * REQ_N * sizeof(float))};
    double rate[2][2];
    for (int blas = 0; blas < 2; blas++) {
        request_ctx ctx[2] = {{blas, xa, wa, x, w, out[0]}, {blas, xa, wa, x, w, out[1]}};
        for (int threads = 1; threads <= 2; threads++) {
            settle();
            rate[blas][threads - 1] = requests_per_second(threads, ctx);
        }
    }
    printf("requests 32x784@784x1024: weft %6.0f/s from 1 thread, %6.0f/s from 2 (x%.2f); "
           "OpenBLAS %6.0f/s, %6.0f/s (x%.2f)\n",
           rate[0][0], rate[0][1], rate[0][1] / rate[0][0], rate[1][0], rate[1][1],
           rate[1][1] / rate[1][0]);
    wf_release(xa);
    wf_release(wa);
    free(x);
    free(w);
    free(out[0]);
    free(out[1]);
}

int main(int argc, char **argv)
{
    int arg = 1;
    if (argc > arg && strcmp(argv[arg], "--cpu-time") == 0) {
        bench_clock = CLOCK_PROCESS_CPUTIME_ID;
        arg++;
    }
    bool matvec_only = false, complex_only = false, small_m_only = false, square_only = false;
    if (argc > arg && strcmp(argv[arg], "--matvec") == 0) {
        matvec_only = true;
        arg++;
    }
    if (argc > arg && strcmp(argv[arg], "--complex") == 0) {
        complex_only = true;
        arg++;
    }
    if (argc > arg && strcmp(argv[arg], "--small-m") == 0) {
        small_m_only = true;
        arg++;
    }
    if (argc > arg && strcmp(argv[arg], "--square") == 0) {
        square_only = true;
        arg++;
    }
    const int max_repeats = argc > arg && atoi(argv[arg]) > 0 ? atoi(argv[arg]) : 7;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("bench_matmul: OpenBLAS %s, core %s (OPENBLAS_CORETYPE %s), %d threads; weft GEMM "
           "%s, %d threads; %s time\n",
           openblas_get_config(), openblas_get_corename(), coretype ? coretype : "unset",
           openblas_get_num_threads(), wf__gemm_isa_name(wf__gemm_isa()), wf__pool_size(),
           bench_clock == CLOCK_MONOTONIC ? "wall" : "CPU");
    if (!matvec_only && !small_m_only)
        measure_machine_limit();
    if (matvec_only) {
        bench_matvec(max_repeats);
        return 0;
    }
    if (small_m_only) {
        bench_small_m(max_repeats);
        return 0;
    }
    for (int n = 256; n <= 2048; n *= 2) {
        char label[32];
        snprintf(label, sizeof label, "cgemm %d^3", n);
        bench_complex(label, 1, n, n, n, max_repeats);
    }
    bench_complex("cgemm batched 16x256^3", 16, 256, 256, 256, max_repeats);
    bench_complex("cgemm 1x4096 @ 4096^2", 1, 1, 4096, 4096, max_repeats);
    if (complex_only)
        return 0;
    static const int sizes[] = {256, 512, 1024, 2048, 4096};
    for (int i = 0; i < 5; i++) {
        char label[32];
        snprintf(label, sizeof label, "sgemm %d^3", sizes[i]);
        bench_product(label, 1, sizes[i], sizes[i], sizes[i], max_repeats,
                      sizes[i] == 1024 || sizes[i] == 2048);
    }
    bench_float64(1024, max_repeats);
    if (square_only)
        return 0;
    bench_product("batched 8x512^3", 8, 512, 512, 512, max_repeats, false);
    bench_transposed(max_repeats);
    bench_matvec(max_repeats);
    bench_small_m(max_repeats);
    bench_sdpa(max_repeats);
    bench_concurrent();
    return 0;
}
