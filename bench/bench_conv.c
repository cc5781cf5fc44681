/*
 * bench_conv: convolutions (float32) on the layers of issue 26, each beside
 * weft's own GEMM on the product of the same size (rows = batch x output
 * positions, inner = kernel positions x C_in / groups, columns = C_out /
 * groups, times groups), in one run:
 *  - ResNet-style conv2d, batch 8: 56x56x64 -> 64 3x3 stride 1; 28x28x128
 *    -> 256 3x3 stride 2; 1x1 64 -> 256 on 56x56;
 *  - depthwise 3x3 on 112x112x32 (batch 8);
 *  - conv1d of an audio front end: batch 4, 3000 frames, 80 -> 384, kernel 3.
 * Forward: one convolution. Backward: the input's and the weight's
 * cotangents (two convolutions, built by wf_vjp: the forward is timed
 * apart and subtracted). GFLOP/s count 2 x multiply-adds of the
 * convolution (the backward does twice the forward's). Each figure is the
 * best of several runs. The ratios to the GEMM's rate: the forward's, the
 * backward's, and forward and backward together (one wf_vjp call and its
 * evaluation, three times the forward's work, timed whole).
 *
 *   build/release/bench_conv [--cpu-time] [--only WORD] [repeats=5]
 *
 * --cpu-time times with the process's CPU time instead of the wall clock:
 * with WEFT_NUM_THREADS=1 it measures one core's rate even on a machine
 * shared with other work. --only runs just the layers whose name contains
 * WORD (for profiling one layer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "weft.h"

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static wf_array *random_array(const int64_t *shape, int ndim, unsigned seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
    free(v);
    return a;
}

static void check(wf_status st)
{
    if (st != WF_OK) {
        fprintf(stderr, "bench_conv: %s\n", wf_last_error_message());
        exit(1);
    }
}

typedef struct layer {
    const char *name;
    int s;
    int64_t x[5], w[5];
    int64_t stride, pad, groups;
} layer;

static wf_array *conv(const layer *l, wf_array *x, wf_array *w)
{
    int64_t st[3] = {l->stride, l->stride, l->stride}, pad[3] = {l->pad, l->pad, l->pad};
    return wf_conv_general(x, w, st, pad, pad, NULL, NULL, l->groups, false);
}

static wf_status conv_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)n;
    out[0] = conv(payload, in[0], in[1]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* Best wall time of `repeats` forward evaluations. */
static double time_forward(const layer *l, wf_array *x, wf_array *w, int repeats)
{
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_seconds();
        wf_array *y = conv(l, x, w);
        check(wf_eval(&y, 1));
        const double t = now_seconds() - t0;
        wf_release(y);
        best = t < best ? t : best;
    }
    return best;
}

/* Best wall time of `repeats` vjp calls: the forward and the cotangents
 * `which` asks for (1: the input's, 2: the weight's, 3: both; evaluation
 * is lazy, so an unevaluated cotangent costs nothing). */
static double time_vjp(const layer *l, wf_array *x, wf_array *w, wf_array *u, int which,
                       int repeats)
{
    wf_fn *fn = wf_fn_new(conv_call, (void *)l, NULL);
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        wf_array *in[2] = {x, w}, *g[2] = {NULL, NULL}, *y = NULL;
        const double t0 = now_seconds();
        check(wf_vjp(fn, in, 2, &u, 1, &y, g));
        /* the forward too, as the peers do (nothing else would run it) */
        wf_array *want[3] = {y, which == 2 ? g[1] : g[0], g[1]};
        check(wf_eval(want, which == 3 ? 3 : 2));
        const double t = now_seconds() - t0;
        wf_release(y);
        wf_release(g[0]);
        wf_release(g[1]);
        best = t < best ? t : best;
    }
    wf_fn_release(fn);
    return best;
}

/* Best time of the GEMM of the convolution's size: groups products of
 * (rows x inner) @ (inner x cols). */
static double time_gemm(int64_t groups, int64_t rows, int64_t inner, int64_t cols, int repeats)
{
    wf_array *a = random_array((int64_t[]){groups, rows, inner}, 3, 7);
    wf_array *b = random_array((int64_t[]){groups, inner, cols}, 3, 8);
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_seconds();
        wf_array *c = wf_matmul(a, b);
        check(wf_eval(&c, 1));
        const double t = now_seconds() - t0;
        wf_release(c);
        best = t < best ? t : best;
    }
    wf_release(a);
    wf_release(b);
    return best;
}

int main(int argc, char **argv)
{
    int repeats = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpu-time") == 0)
            bench_clock = CLOCK_PROCESS_CPUTIME_ID;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else
            repeats = (int)bench_int_arg(i + 1, argv, i, 5, 1, 1000000, "repeats");
    }
    static const layer layers[] = {
        {"conv2d 8x56x56x64->64 3x3 s1", 2, {8, 56, 56, 64}, {64, 3, 3, 64}, 1, 1, 1},
        {"conv2d 8x28x28x128->256 3x3 s2", 2, {8, 28, 28, 128}, {256, 3, 3, 128}, 2, 1, 1},
        {"conv2d 8x56x56x64->256 1x1", 2, {8, 56, 56, 64}, {256, 1, 1, 64}, 1, 0, 1},
        {"depthwise 8x112x112x32 3x3", 2, {8, 112, 112, 32}, {32, 3, 3, 1}, 1, 1, 32},
        {"conv1d 4x3000x80->384 k3", 1, {4, 3000, 80}, {384, 3, 80}, 1, 1, 1},
    };
    printf("bench_conv: float32, best of %d, %s; GFLOP/s (2 x multiply-adds)\n", repeats,
           bench_clock == CLOCK_MONOTONIC ? "wall clock" : "process CPU time");
    printf("%-32s %9s %9s %9s %9s %8s %8s %8s %8s %8s %8s\n", "layer", "fwd ms", "fwd GF/s",
           "bwd ms", "bwd GF/s", "dx GF/s", "dw GF/s", "gemm GF/s", "fwd/gemm", "bwd/gemm",
           "f+b/gemm");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        const layer *l = &layers[i];
        if (only != NULL && strstr(l->name, only) == NULL)
            continue;
        const int nd = l->s + 2;
        wf_array *x = random_array(l->x, nd, 1), *w = random_array(l->w, nd, 2);
        wf_array *y = conv(l, x, w);
        check(wf_eval(&y, 1));
        const int64_t *ys = wf_array_shape(y);
        int64_t rows = 1, kpos = 1;
        for (int d = 0; d < nd - 1; d++)
            rows *= ys[d];
        for (int d = 1; d < nd - 1; d++)
            kpos *= l->w[d];
        const int64_t inner = kpos * l->w[nd - 1], cols = l->w[0] / l->groups;
        const double flops = 2.0 * (double)rows * (double)inner * (double)cols * (double)l->groups;
        wf_array *u = random_array(ys, nd, 3);
        wf_release(y);
        const double tf = time_forward(l, x, w, repeats);
        const double tv = time_vjp(l, x, w, u, 3, repeats);
        const double tb = tv > tf ? tv - tf : tv;
        const double tx = time_vjp(l, x, w, u, 1, repeats) - tf;
        const double tw = time_vjp(l, x, w, u, 2, repeats) - tf;
        const double tg = time_gemm(l->groups, rows, inner, cols, repeats);
        printf("%-32s %9.2f %9.1f %9.2f %9.1f %8.1f %8.1f %8.1f %8.2f %8.2f %8.2f\n", l->name,
               1e3 * tf, flops / tf / 1e9, 1e3 * tb, 2 * flops / tb / 1e9,
               tx > 0 ? flops / tx / 1e9 : 0.0, tw > 0 ? flops / tw / 1e9 : 0.0, flops / tg / 1e9,
               tg / tf, 2 * tg / tb, 3 * tg / tv);
        wf_release(x);
        wf_release(w);
        wf_release(u);
    }
    return 0;
}
