/*
 * bench_matmul: float32 GEMM 1024^3 through wf_matmul against a direct
 * cblas_sgemm call on the same data; 64 batched 128x128 products; and
 * scaled dot-product attention (8 heads, L=512, D=64, plain and causal).
 * Prints figures and ratios side by side.
 *
 *   build/release/bench_matmul [repeats=5]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *random_floats(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return v;
}

/* Best time of `repeats` evaluations of a fresh op on ready inputs. */
typedef wf_array *(*build_fn)(wf_array **in);
static double best_weft(build_fn build, wf_array **in, int repeats)
{
    double best = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        wf_array *out = build(in);
        double t0 = now_seconds();
        if (wf_eval(&out, 1) != WF_OK) {
            fprintf(stderr, "bench_matmul: %s\n", wf_last_error_message());
            exit(1);
        }
        double t = now_seconds() - t0;
        wf_release(out);
        if (r > 0 && t < best) /* the first run warms up */
            best = t;
    }
    return best;
}

static wf_array *build_matmul(wf_array **in) { return wf_matmul(in[0], in[1]); }
static wf_array *build_sdpa(wf_array **in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.125, NULL, false);
}
static wf_array *build_sdpa_causal(wf_array **in)
{
    return wf_scaled_dot_product_attention(in[0], in[1], in[2], 0.125, NULL, true);
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1)
        repeats = 1;
    printf("bench_matmul: OpenBLAS threads %d, %s\n", openblas_get_num_threads(),
           openblas_get_config());

    /* 1. 1024^3 sgemm. */
    const int64_t n = 1024;
    float *a = random_floats(n * n, 1), *b = random_floats(n * n, 2), *c = malloc((size_t)(n * n) * 4);
    const int64_t s2[2] = {n, n};
    wf_array *in[3] = {wf_array_from_data(a, s2, 2, WF_DTYPE_F32),
                       wf_array_from_data(b, s2, 2, WF_DTYPE_F32), NULL};
    double best_blas = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
                    (int)n, b, (int)n, 0.0f, c, (int)n);
        double t = now_seconds() - t0;
        if (r > 0 && t < best_blas)
            best_blas = t;
    }
    double best_w = best_weft(build_matmul, in, repeats);
    const double flops = 2.0 * (double)n * (double)n * (double)n;
    printf("sgemm 1024^3:       weft %8.1f GFLOP/s  direct cblas %8.1f GFLOP/s  ratio %.2f\n",
           flops / best_w * 1e-9, flops / best_blas * 1e-9, best_blas / best_w);
    wf_release(in[0]);
    wf_release(in[1]);

    /* 2. 64 x (128 x 128) @ (128 x 128). */
    const int64_t nb = 64, m = 128;
    float *ba = random_floats(nb * m * m, 3), *bb = random_floats(nb * m * m, 4);
    const int64_t s3[3] = {nb, m, m};
    in[0] = wf_array_from_data(ba, s3, 3, WF_DTYPE_F32);
    in[1] = wf_array_from_data(bb, s3, 3, WF_DTYPE_F32);
    float *bc = malloc((size_t)(nb * m * m) * 4);
    double best_loop = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = now_seconds();
        for (int64_t i = 0; i < nb; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m, (int)m, 1.0f,
                        ba + i * m * m, (int)m, bb + i * m * m, (int)m, 0.0f, bc + i * m * m,
                        (int)m);
        double t = now_seconds() - t0;
        if (r > 0 && t < best_loop)
            best_loop = t;
    }
    best_w = best_weft(build_matmul, in, repeats);
    const double bflops = 2.0 * (double)nb * (double)m * (double)m * (double)m;
    printf("batched 64x128^3:   weft %8.1f GFLOP/s  cblas loop   %8.1f GFLOP/s  ratio %.2f\n",
           bflops / best_w * 1e-9, bflops / best_loop * 1e-9, best_loop / best_w);
    wf_release(in[0]);
    wf_release(in[1]);

    /* 3. sdpa, 8 heads, L = 512, D = 64. */
    const int64_t h = 8, l = 512, d = 64;
    const int64_t s4[4] = {1, h, l, d};
    float *q = random_floats(h * l * d, 5), *k = random_floats(h * l * d, 6),
          *v = random_floats(h * l * d, 7);
    in[0] = wf_array_from_data(q, s4, 4, WF_DTYPE_F32);
    in[1] = wf_array_from_data(k, s4, 4, WF_DTYPE_F32);
    in[2] = wf_array_from_data(v, s4, 4, WF_DTYPE_F32);
    double t_sdpa = best_weft(build_sdpa, in, repeats);
    double t_causal = best_weft(build_sdpa_causal, in, repeats);
    const double sflops = 4.0 * (double)h * (double)l * (double)l * (double)d;
    printf("sdpa 8x512x64:      %8.2f ms (%6.1f GFLOP/s)   causal %8.2f ms\n", t_sdpa * 1e3,
           sflops / t_sdpa * 1e-9, t_causal * 1e3);
    for (int i = 0; i < 3; i++)
        wf_release(in[i]);
    free(a);
    free(b);
    free(c);
    free(ba);
    free(bb);
    free(bc);
    free(q);
    free(k);
    free(v);
    return 0;
}
