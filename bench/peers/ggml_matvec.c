/*
 * ggml's CPU matrix-vector product (ggml_mul_mat of Q4_0 / Q8_0 weights by
 * one float32 vector) on bench_quantized's matvec shapes, printed like its
 * matvec lines so the two sit side by side: GB/s of the weight tensor (codes
 * and scales) over a rotation set of weight matrices larger than the LLC,
 * best of a few repetitions. ggml rounds x to Q8_0 (int8 per 32) before the
 * dot products, as weft's opt-in int8 path does.
 *
 * ggml is not a dependency of weft: this program is built only when CMake
 * is given -DGGML_DIR=<an install prefix of ggml> (its CPU backend), e.g.
 *   cmake -S ggml -B out -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON && cmake
 *   --build out && cmake --install out --prefix build/ggml/install
 *
 *   bench_ggml_matvec [rotation_MiB = 512 [threads = 1]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"

enum { REPEATS = 3 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t seed = 88172645463325252u;
static float next_uniform(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (float)(seed >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

/* Fills w (out rows of `in`) with random values quantized to its type. */
static void fill_weight(struct ggml_tensor *w, int64_t out, int64_t in)
{
    float *row = malloc((size_t)in * sizeof *row);
    const size_t row_size = ggml_row_size(w->type, in);
    for (int64_t r = 0; r < out; r++) {
        for (int64_t j = 0; j < in; j++)
            row[j] = next_uniform();
        ggml_quantize_chunk(w->type, row, (char *)w->data + r * row_size, 0, 1, in, NULL);
    }
    free(row);
}

static void matvec_line(enum ggml_type type, int64_t out, int64_t in, int64_t rotation,
                        struct ggml_threadpool *pool, int threads)
{
    const size_t one = ggml_row_size(type, in) * (size_t)out;
    int64_t count = (rotation + (int64_t)one - 1) / (int64_t)one;
    count = count < 2 ? 2 : count;
    const size_t overhead = ggml_tensor_overhead() * 4 + ggml_graph_overhead();
    /* per matrix: its codes, its tensors' and graph's headers, its product */
    struct ggml_init_params ip = {(size_t)count * (one + overhead + (size_t)out * 4) + in * 4 +
                                      (1 << 20),
                                  NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, in, 1);
    for (int64_t j = 0; j < in; j++)
        ((float *)x->data)[j] = next_uniform();
    struct ggml_cgraph **graphs = malloc((size_t)count * sizeof *graphs);
    size_t work = 0;
    const void *first = NULL;
    for (int64_t i = 0; i < count; i++) {
        struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, in, out);
        if (!first) {
            fill_weight(w, out, in);
            first = w->data;
        } else { /* the same values: only where they lie matters */
            memcpy(w->data, first, one);
        }
        graphs[i] = ggml_new_graph(ctx);
        ggml_build_forward_expand(graphs[i], ggml_mul_mat(ctx, w, x));
        const struct ggml_cplan plan = ggml_graph_plan(graphs[i], threads, pool);
        work = plan.work_size > work ? plan.work_size : work;
    }
    uint8_t *work_data = malloc(work + 1);
    double best = 0;
    for (int r = 0; r < REPEATS; r++) {
        double total = 0;
        for (int64_t i = 0; i < count; i++) {
            struct ggml_cplan plan = ggml_graph_plan(graphs[i], threads, pool);
            plan.work_data = work_data;
            const double t0 = now();
            if (ggml_graph_compute(graphs[i], &plan) != GGML_STATUS_SUCCESS) {
                printf("error: ggml_graph_compute failed\n");
                exit(1);
            }
            total += now() - t0;
        }
        const double gbs = (double)one * (double)count / total / 1e9;
        best = gbs > best ? gbs : best;
    }
    printf("ggml %-4s %5lld x %5lld  (%3lld matrices, %6.0f MiB)  %7.2f GB/s  %8.1f us/product\n",
           ggml_type_name(type), (long long)out, (long long)in, (long long)count,
           (double)one * (double)count / 1048576.0, best, (double)one / best / 1e3);
    free(work_data);
    free(graphs);
    ggml_free(ctx);
}

int main(int argc, char **argv)
{
    const int64_t rotation = (argc > 1 ? atoll(argv[1]) : 512) << 20;
    const int threads = argc > 2 ? atoi(argv[2]) : 1;
    ggml_cpu_init();
    struct ggml_threadpool_params tp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool *pool = ggml_threadpool_new(&tp);
    double load[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = load[1] = load[2] = 0;
        fclose(f);
    }
    printf("# ggml matvec: %d threads, rotation set %lld MiB, x float32 (ggml rounds it to "
           "Q8_0); load average %.2f %.2f %.2f\n",
           threads, (long long)(rotation >> 20), load[0], load[1], load[2]);
    static const int64_t shapes[3][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
    static const enum ggml_type types[2] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 3; s++)
            matvec_line(types[t], shapes[s][0], shapes[s][1], rotation, pool, threads);
    ggml_threadpool_free(pool);
    return 0;
}
