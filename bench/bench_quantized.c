/*
 * bench_quantized: quantized_matmul (affine, group 64) beside the machine's
 * measured read bandwidth and weft's float32 GEMM, in one run:
 *  - read bandwidth: threads (the pool's size) summing one large buffer,
 *    the best of the read loops, measured before and after the matrix-
 *    vector products (the higher kept; the products' lines are printed
 *    after it), and the sustained figure, the median of 5 s of reads
 *    right after them (memory_bench.h: some machines read faster for a
 *    few seconds after a pause); each line's ratio to both;
 *  - matrix-vector products (batch 1) with 2-, 4- and 8-bit weights of
 *    4096 x 4096, 14336 x 4096 (x @ W.T, W stored out x in) and
 *    4096 x 14336, rotating over enough weight matrices that their total
 *    exceeds 4x the last-level cache, so the weights come from memory:
 *    GB/s of codes + scales + biases read, and the ratio to the bandwidth;
 *  - batch 32 and 512 against 4096 x 4096: GFLOP/s beside wf_matmul of the
 *    same float32 product.
 * Each figure is the best of a few repetitions. The machine's load (from
 * /proc/loadavg) is printed with the figures: on a shared machine they
 * move with it. bench/peers/quantized.py runs MLX's CPU quantized_matmul
 * on the same shapes.
 *
 *   build/release/bench_quantized [rotation_MiB [matvec]]   (default: 4x the LLC;
 *                                  "matvec": the matrix-vector lines only)
 * bench/peers/quantized_matvec.py runs the matvec lines with 1 and 2
 * threads beside MLX in one table.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/pool.h"
#include "bench_args.h"
#include "memory_bench.h"
#include "weft.h"

enum { GROUP = 64, REPEATS = 3 };
#define SUSTAINED_SECONDS 5.0


/* ---------------------------------------------------------------- weights */

typedef struct qweight {
    wf_array *codes, *scales, *biases;
    int64_t bytes;
} qweight;

/* Random codes with scales and biases of a typical spread (the product's
 * speed does not depend on the values). */
static qweight random_qweight(int64_t out, int64_t in, int bits)
{
    qweight w;
    const int64_t words = out * in * bits / 32, groups = out * in / GROUP;
    uint32_t *c = malloc((size_t)words * 4);
    float *s = malloc((size_t)groups * 4), *b = malloc((size_t)groups * 4);
    for (int64_t i = 0; i < words; i++)
        c[i] = (uint32_t)next_random();
    for (int64_t i = 0; i < groups; i++) {
        s[i] = 0.01f + (float)(next_random() % 100) * 1e-4f;
        b[i] = -s[i] * (float)((1 << bits) / 2);
    }
    const int64_t cs[2] = {out, in * bits / 32}, ss[2] = {out, in / GROUP};
    w.codes = wf_array_from_data(c, cs, 2, WF_DTYPE_U32);
    w.scales = wf_array_from_data(s, ss, 2, WF_DTYPE_F32);
    w.biases = wf_array_from_data(b, ss, 2, WF_DTYPE_F32);
    w.bytes = words * 4 + groups * 8;
    free(c), free(s), free(b);
    return w;
}

static wf_array *random_x(int64_t rows, int64_t cols)
{
    const int64_t shape[2] = {rows, cols};
    float *v = malloc((size_t)(rows * cols) * 4);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = (float)(next_random() % 2001) / 1000.0f - 1.0f;
    wf_array *x = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    free(v);
    return x;
}

/* Seconds for one product (evaluated). */
static double time_qmm(wf_array *x, const qweight *w, int bits)
{
    const double t0 = bench_now();
    wf_array *y = wf_quantized_matmul(x, w->codes, w->scales, w->biases, true, GROUP, bits);
    if (!y || wf_eval(&y, 1) != WF_OK) {
        printf("error: %s\n", wf_last_error_message());
        exit(1);
    }
    const double t = bench_now() - t0;
    wf_release(y);
    return t;
}

/* One matrix-vector line's figure, printed once the bandwidth is known. */
typedef struct matvec_figure {
    int64_t out, in, count, bytes; /* bytes: of one product's codes + scales + biases */
    int bits;
    double gbs;
} matvec_figure;

static matvec_figure matvec_line(int64_t out, int64_t in, int bits, int64_t rotation_bytes)
{
    const int64_t one = out * in * bits / 8 + out * in / GROUP * 8;
    int64_t count = (rotation_bytes + one - 1) / one;
    count = count < 2 ? 2 : count;
    qweight *w = malloc((size_t)count * sizeof *w);
    for (int64_t i = 0; i < count; i++)
        w[i] = random_qweight(out, in, bits);
    wf_array *x = random_x(1, in);
    /* two rounds untimed: the figures are those of served weights (the
     * AVX-512 kernel's interleaved copies are made at the second product) */
    for (int r = 0; r < 2; r++)
        for (int64_t i = 0; i < count; i++)
            time_qmm(x, &w[i], bits);
    double best = 0;
    for (int r = 0; r < REPEATS; r++) {
        double total = 0;
        for (int64_t i = 0; i < count; i++)
            total += time_qmm(x, &w[i], bits);
        const double gbs = (double)(one * count) / total / 1e9;
        best = gbs > best ? gbs : best;
    }
    for (int64_t i = 0; i < count; i++)
        wf_release(w[i].codes), wf_release(w[i].scales), wf_release(w[i].biases);
    free(w);
    wf_release(x);
    return (matvec_figure){out, in, count, one, bits, best};
}

static void print_matvec(const matvec_figure *f, double bw, double sustained)
{
    printf("matvec %2d-bit %5lld x %5lld  (%3lld matrices, %6.0f MiB)  %7.2f GB/s  %5.1f%% of "
           "read bandwidth  (%5.1f%% of sustained)  %8.1f us/product\n",
           f->bits, (long long)f->out, (long long)f->in, (long long)f->count,
           (double)(f->bytes * f->count) / 1048576.0, f->gbs, 100.0 * f->gbs / bw,
           100.0 * f->gbs / sustained, (double)f->bytes / f->gbs / 1e3);
}

static void batch_line(int64_t rows, int bits)
{
    const int64_t n = 4096, k = 4096;
    qweight w = random_qweight(n, k, bits);
    wf_array *x = random_x(rows, k);
    wf_array *wd = wf_dequantize(w.codes, w.scales, w.biases, GROUP, bits, WF_QUANT_AFFINE);
    wf_array *wt = wf_swapaxes(wd, 0, 1);
    wf_eval(&wd, 1);
    double best_q = 1e30, best_f = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        const double tq = time_qmm(x, &w, bits);
        best_q = tq < best_q ? tq : best_q;
        const double t0 = bench_now();
        wf_array *y = wf_matmul(x, wt);
        wf_eval(&y, 1);
        const double tf = bench_now() - t0;
        best_f = tf < best_f ? tf : best_f;
        wf_release(y);
    }
    const double flop = 2.0 * (double)(rows * n * k);
    printf("batch %3lld %d-bit 4096 x 4096  quantized %7.1f GFLOP/s   float32 GEMM %7.1f GFLOP/s  "
           " ratio %.2f\n",
           (long long)rows, bits, flop / best_q / 1e9, flop / best_f / 1e9, best_f / best_q);
    wf_release(x), wf_release(wd), wf_release(wt);
    wf_release(w.codes), wf_release(w.scales), wf_release(w.biases);
}

int main(int argc, char **argv)
{
    const int64_t llc = llc_bytes();
    int64_t rotation = argc > 1 ? bench_int_arg(argc, argv, 1, 0, 1, 1 << 20, "rotation MiB") << 20 : 4 * llc;
    const int threads = wf__pool_size();
    const char *interleave = getenv("WEFT_QMM_INTERLEAVE");
    printf("# bench_quantized: %d threads, LLC %lld MiB, rotation set %lld MiB, group %d, "
           "activations %s, interleaved copies %s\n",
           threads, (long long)(llc >> 20), (long long)(rotation >> 20), GROUP,
           wf_quantized_matvec_int8() ? "int8 on AVX2 / AVX-512 (WEFT_QMM_INT8=1)" : "float32",
           interleave && strcmp(interleave, "0") == 0
               ? "off (WEFT_QMM_INTERLEAVE=0)"
               : "on (matvec kernels, from a weight's second product)");
    print_load();
    /* measured before and after the products, the higher kept: the
     * machine's speed drifts, and the ratios should not gain from a slow
     * moment of the probe */
    const double before = read_bandwidth(rotation, threads, "before the products");
    static const int64_t shapes[3][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
    static const int widths[3] = {2, 4, 8};
    matvec_figure figures[9];
    for (int b = 0; b < 3; b++)
        for (int s = 0; s < 3; s++)
            figures[b * 3 + s] = matvec_line(shapes[s][0], shapes[s][1], widths[b], rotation);
    const double after = read_bandwidth(rotation, threads, "after them");
    const double sustained = sustained_read_bandwidth(rotation, threads, SUSTAINED_SECONDS);
    const double bw = before > after ? before : after;
    printf("read bandwidth (%d threads reading %lld MiB, the best read loop): %.2f GB/s; "
           "sustained (the median of %.0f s of reads): %.2f GB/s\n",
           threads, (long long)(rotation >> 20), bw, SUSTAINED_SECONDS, sustained);
    for (int i = 0; i < 9; i++)
        print_matvec(&figures[i], bw, sustained);
    if (argc <= 2 || strcmp(argv[2], "matvec") != 0) {
        batch_line(32, 4);
        batch_line(512, 4);
        batch_line(32, 8);
        batch_line(512, 8);
    }
    print_load();
    return 0;
}
