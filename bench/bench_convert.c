/*
 * bench_convert: wf_astype between float32 and the half types, beside the
 * path it took before (one out-of-line scalar conversion per element, the
 * loop kept here as reference) and beside a memcpy moving the same bytes
 * (what the memory allows), side by side in one run. Then ops on f16 and
 * bf16 inputs (computed in float32 over converted blocks) beside their
 * float32 twins. Last, wf_astype between every pair of dtypes. ns per
 * element, best of `reps`, 4M contiguous elements, one thread
 * (WEFT_NUM_THREADS=1 is set before the first op).
 *
 * Usage: bench_convert [elements] [reps]   (WEFT_ISA=baseline|avx2|avx512
 * picks the variant)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "bench_args.h"
#include "weft.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The previous path: one call into dtype.c per element. */
static void reference_convert(int64_t n, const void *src, wf_dtype from, void *dst, wf_dtype to)
{
    for (int64_t i = 0; i < n; i++) {
        if (from == WF_DTYPE_F32) {
            const float f = ((const float *)src)[i];
            ((uint16_t *)dst)[i] = to == WF_DTYPE_F16 ? wf__f32_to_f16(f) : wf__f32_to_bf16(f);
        } else {
            const uint16_t h = ((const uint16_t *)src)[i];
            ((float *)dst)[i] = from == WF_DTYPE_F16 ? wf__f16_to_f32(h) : wf__bf16_to_f32(h);
        }
    }
}

enum { OP_EXP, OP_SUM, OP_SOFTMAX, OP_LAYER_NORM, OP_MULTIPLY, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"exp", "sum(axis -1)", "softmax(-1)",
                                               "layer_norm", "x * y"};

static wf_array *run_op(int op, wf_array *x, wf_array *y, wf_array *w, wf_array *b)
{
    const int last = -1;
    switch (op) {
    case OP_EXP: return wf_exp(x);
    case OP_SUM: return wf_sum(x, &last, 1, false);
    case OP_SOFTMAX: return wf_softmax(x, &last, 1);
    case OP_LAYER_NORM: return wf_layer_norm(x, w, b, 1e-5);
    default: return wf_multiply(x, y);
    }
}

/* Best time of `reps` evaluations of op on (rows x cols) inputs of dtype t. */
static double time_op(int op, wf_dtype t, int64_t rows, int64_t cols, int reps)
{
    const int64_t shape[2] = {rows, cols};
    wf_array *x = wf_random_uniform(shape, 2, t, -1.0, 1.0, NULL);
    wf_array *y = wf_random_uniform(shape, 2, t, -1.0, 1.0, NULL);
    wf_array *w = wf_random_uniform(shape + 1, 1, t, -1.0, 1.0, NULL);
    wf_array *b = wf_random_uniform(shape + 1, 1, t, -1.0, 1.0, NULL);
    wf_array *all[4] = {x, y, w, b};
    double best = -1.0;
    if (wf_eval(all, 4) == WF_OK) {
        best = 1e30;
        for (int r = 0; r < reps; r++) {
            double start = now();
            wf_array *out = run_op(op, x, y, w, b);
            if (out == NULL || wf_eval(&out, 1) != WF_OK) {
                best = -1.0;
                break;
            }
            const double took = now() - start;
            best = took < best ? took : best;
            wf_release(out);
        }
    }
    for (int i = 0; i < 4; i++)
        wf_release(all[i]);
    return best;
}

/* Ops on half inputs compute in float32 over converted blocks: each beside
 * its float32 twin. */
static int print_half_ops(int64_t n, int reps)
{
    const int64_t cols = 4096, rows = n / cols > 0 ? n / cols : 1;
    printf("\nops on %lld x %lld inputs, ns per element (best of %d)\n", (long long)rows,
           (long long)cols, reps);
    printf("%-13s %10s %10s %10s %9s %9s\n", "op", "float16", "bfloat16", "float32", "f16/f32",
           "bf16/f32");
    for (int op = 0; op < OP_COUNT; op++) {
        const double h = time_op(op, WF_DTYPE_F16, rows, cols, reps);
        const double bh = time_op(op, WF_DTYPE_BF16, rows, cols, reps);
        const double f = time_op(op, WF_DTYPE_F32, rows, cols, reps);
        if (h < 0 || bh < 0 || f < 0) {
            fprintf(stderr, "bench_convert: %s\n", wf_last_error_message());
            return 1;
        }
        const double per = 1e9 / (double)(rows * cols);
        printf("%-13s %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", op_names[op], h * per, bh * per,
               f * per, h / f, bh / f);
    }
    return 0;
}

/* Every dtype pair: ns per element of wf_astype (values from float32 in
 * +-100, converted to the source dtype first). */
static int print_matrix(int64_t n, int reps)
{
    const int64_t shape[1] = {n};
    printf("\nwf_astype, every pair (rows: from, columns: to), ns per element\n%-9s", "");
    for (int to = 0; to < WF_DTYPE_COUNT; to++)
        printf("%9s", wf_dtype_name((wf_dtype)to));
    printf("\n");
    for (int from = 0; from < WF_DTYPE_COUNT; from++) {
        wf_array *u = wf_random_uniform(shape, 1, WF_DTYPE_F32, -100.0, 100.0, NULL);
        wf_array *x = wf_astype(u, (wf_dtype)from);
        if (x == NULL || wf_eval(&x, 1) != WF_OK) {
            fprintf(stderr, "bench_convert: %s\n", wf_last_error_message());
            return 1;
        }
        printf("%-9s", wf_dtype_name((wf_dtype)from));
        for (int to = 0; to < WF_DTYPE_COUNT; to++) {
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                const double start = now();
                wf_array *y = wf_astype(x, (wf_dtype)to);
                if (y == NULL || wf_eval(&y, 1) != WF_OK) {
                    fprintf(stderr, "bench_convert: %s\n", wf_last_error_message());
                    return 1;
                }
                const double took = now() - start;
                best = took < best ? took : best;
                wf_release(y);
            }
            printf("%9.3f", 1e9 * best / (double)n);
        }
        printf("\n");
        wf_release(x);
        wf_release(u);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const int64_t n = bench_int_arg(argc, argv, 1, (int64_t)1 << 22, 1, (int64_t)1 << 30, "elements");
    const int reps = (int)bench_int_arg(argc, argv, 2, 7, 1, 1000000, "repeats");
    if (n <= 0 || reps <= 0) {
        fprintf(stderr, "usage: bench_convert [elements > 0] [reps > 0]\n");
        return 2;
    }
    setenv("WEFT_NUM_THREADS", "1", 1);
    static const wf_dtype pairs[4][2] = {{WF_DTYPE_F32, WF_DTYPE_F16},
                                         {WF_DTYPE_F16, WF_DTYPE_F32},
                                         {WF_DTYPE_F32, WF_DTYPE_BF16},
                                         {WF_DTYPE_BF16, WF_DTYPE_F32}};
    const int64_t shape[1] = {n};
    void *scratch_src = malloc((size_t)n * 4), *scratch_dst = malloc((size_t)n * 4);
    if (scratch_src == NULL || scratch_dst == NULL)
        return 1;
    memset(scratch_src, 1, (size_t)n * 4);
    memset(scratch_dst, 0, (size_t)n * 4);
    printf("bench_convert: %lld contiguous elements, one thread, ns per element (best of %d)\n",
           (long long)n, reps);
    printf("%-13s %10s %10s %10s %9s %9s\n", "astype", "weft", "previous", "memcpy",
           "prev/weft", "weft/copy");
    for (int p = 0; p < 4; p++) {
        const wf_dtype from = pairs[p][0], to = pairs[p][1];
        wf_array *u = wf_random_uniform(shape, 1, WF_DTYPE_F32, -1000.0, 1000.0, NULL);
        wf_array *x = wf_astype(u, from);
        if (x == NULL || wf_eval(&x, 1) != WF_OK) {
            fprintf(stderr, "bench_convert: %s\n", wf_last_error_message());
            return 1;
        }
        const void *xdata = NULL;
        if (wf_array_data(x, &xdata) != WF_OK)
            return 1;
        const size_t bytes = (size_t)n * (wf_dtype_size(from) + wf_dtype_size(to)) / 2;
        double best_op = 1e30, best_ref = 1e30, best_copy = 1e30;
        for (int r = 0; r < reps; r++) {
            double t = now();
            wf_array *y = wf_astype(x, to);
            if (y == NULL || wf_eval(&y, 1) != WF_OK) {
                fprintf(stderr, "bench_convert: %s\n", wf_last_error_message());
                return 1;
            }
            t = now() - t;
            best_op = t < best_op ? t : best_op;
            wf_release(y);

            t = now();
            reference_convert(n, xdata, from, scratch_dst, to);
            t = now() - t;
            best_ref = t < best_ref ? t : best_ref;

            t = now(); /* the same bytes read and written */
            memcpy(scratch_dst, scratch_src, bytes);
            t = now() - t;
            best_copy = t < best_copy ? t : best_copy;
        }
        printf("%-5s -> %-5s %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", wf_dtype_name(from),
               wf_dtype_name(to), 1e9 * best_op / (double)n, 1e9 * best_ref / (double)n,
               1e9 * best_copy / (double)n, best_ref / best_op, best_op / best_copy);
        wf_release(x);
        wf_release(u);
    }
    free(scratch_src);
    free(scratch_dst);
    return print_half_ops(n, reps) != 0 ? 1 : print_matrix(n, reps);
}
