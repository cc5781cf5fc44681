/*
 * bench_reduce: ns per input element of sum, max, argmax and softmax over a
 * 4096 x 4096 float32 array along axis 1, axis 0 and all axes, on the
 * contiguous array and on its transposed view, in one run; with a plain C
 * loop summing the same memory (single thread) as the yardstick.
 *
 *   build/release/bench_reduce [n=4096] [repeats=5]
 *
 * WEFT_NUM_THREADS sets the intra-op pool size (default: all cores).
 */
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

enum op { OP_SUM, OP_MAX, OP_ARGMAX, OP_SOFTMAX, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"sum", "max", "argmax", "softmax"};

/* axis: 0, 1, or -1 for all axes. */
static wf_array *build(enum op op, wf_array *a, int axis)
{
    int ax[1] = {axis};
    const int *axes = axis < 0 ? NULL : ax;
    const int naxes = axis < 0 ? 0 : 1;
    switch (op) {
    case OP_SUM: return wf_sum(a, axes, naxes, false);
    case OP_MAX: return wf_max(a, axes, naxes, false);
    case OP_SOFTMAX: return wf_softmax(a, axes, naxes);
    default:
        if (axis >= 0)
            return wf_argmax(a, axis, false);
        /* All axes: argmax of the flattened array. */
        {
            int64_t flat = wf_array_size(a);
            wf_array *f = wf_reshape(a, &flat, 1);
            wf_array *r = wf_argmax(f, 0, false);
            wf_release(f);
            return r;
        }
    }
}

/* Best of `repeats` runs, in ns per input element. */
static double time_op(enum op op, wf_array *a, int axis, int repeats)
{
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_seconds();
        wf_array *out = build(op, a, axis);
        if (out == NULL || wf_eval(&out, 1) != WF_OK) {
            fprintf(stderr, "bench_reduce: %s failed: %s\n", op_names[op],
                    wf_last_error_message());
            wf_release(out);
            return -1;
        }
        double t = now_seconds() - t0;
        wf_release(out);
        if (t < best)
            best = t;
    }
    return best * 1e9 / (double)wf_array_size(a);
}

int main(int argc, char **argv)
{
    const int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    const int repeats = argc > 2 ? atoi(argv[2]) : 5;
    const int64_t shape[2] = {n, n};
    float *data = malloc((size_t)(n * n) * sizeof(float));
    if (data == NULL)
        return 1;
    uint32_t s = 12345;
    for (int64_t i = 0; i < n * n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        data[i] = (float)(s % 100000u) / 25000.0f - 2.0f;
    }
    wf_array *a = wf_array_from_data(data, shape, 2, WF_DTYPE_F32);
    wf_array *t = wf_transpose(a, NULL, 0);
    if (a == NULL || t == NULL || wf_eval(&t, 1) != WF_OK) {
        fprintf(stderr, "bench_reduce: setup failed: %s\n", wf_last_error_message());
        return 1;
    }

    /* Yardstick: one thread summing the memory in order. */
    double best = 1e30, sink = 0;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_seconds();
        float acc[8] = {0};
        for (int64_t i = 0; i + 8 <= n * n; i += 8)
            for (int j = 0; j < 8; j++)
                acc[j] += data[i + j];
        for (int j = 0; j < 8; j++)
            sink += acc[j];
        double el = now_seconds() - t0;
        if (el < best)
            best = el;
    }
    const double base_ns = best * 1e9 / (double)(n * n);
    printf("bench_reduce: %lld x %lld float32, best of %d (ns per input element)\n",
           (long long)n, (long long)n, repeats);
    printf("plain C loop sum, 1 thread: %.3f ns/elem (checksum %.1f)\n\n", base_ns, sink);

    const char *layouts[2] = {"contiguous", "transposed"};
    const int axes[3] = {1, 0, -1};
    const char *axis_names[3] = {"axis 1", "axis 0", "all"};
    printf("%-8s %-11s", "op", "layout");
    for (int k = 0; k < 3; k++)
        printf(" %10s", axis_names[k]);
    printf("   (ratio to the plain loop)\n");
    for (int op = 0; op < OP_COUNT; op++)
        for (int l = 0; l < 2; l++) {
            printf("%-8s %-11s", op_names[op], layouts[l]);
            double v[3];
            for (int k = 0; k < 3; k++) {
                v[k] = time_op((enum op)op, l ? t : a, axes[k], repeats);
                printf(" %10.3f", v[k]);
            }
            printf("   (");
            for (int k = 0; k < 3; k++)
                printf("%s%.2fx", k ? " " : "", v[k] / base_ns);
            printf(")\n");
        }
    wf_release(t);
    wf_release(a);
    free(data);
    return 0;
}
