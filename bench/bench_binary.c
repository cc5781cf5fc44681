/*
 * bench_binary: ns per element of binary and ternary element-wise ops on
 * 16M elements (4096 x 4096), for float32 and float16, with both operands
 * contiguous and with the second a broadcast row (1 x 4096). Each figure is
 * the best of `repeats` evaluations (building the node included), printed
 * side by side in one run. Then add, multiply, maximum and where over every
 * real dtype and complex64 (both operands contiguous), grouped by element
 * size, so that a dtype can be compared with the others of its size (int16
 * beside float16, uint32 beside int32 and float32, ...).
 *
 *   build/release/bench_binary [repeats=5]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_args.h"
#include "weft.h"

enum { ROWS = 4096, COLS = 4096 };

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum op { OP_ADD, OP_MULTIPLY, OP_MAXIMUM, OP_DIVIDE, OP_WHERE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"add", "multiply", "maximum", "divide",
                                               "where"};

static wf_array *apply(enum op op, wf_array *cond, wf_array *a, wf_array *b)
{
    switch (op) {
    case OP_ADD: return wf_add(a, b);
    case OP_MULTIPLY: return wf_multiply(a, b);
    case OP_MAXIMUM: return wf_maximum(a, b);
    case OP_DIVIDE: return wf_divide(a, b);
    case OP_WHERE: return wf_where(cond, a, b);
    default: return NULL;
    }
}

/* Best ns per output element over `repeats` runs. */
static double time_op(enum op op, wf_array *cond, wf_array *a, wf_array *b, int repeats)
{
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        double start = now_seconds();
        wf_array *y = apply(op, cond, a, b);
        if (!y || wf_eval(&y, 1) != WF_OK) {
            fprintf(stderr, "bench_binary: %s failed: %s\n", op_names[op],
                    wf_last_error_message());
            wf_release(y);
            return -1;
        }
        double t = now_seconds() - start;
        wf_release(y);
        if (t < best)
            best = t;
    }
    return 1e9 * best / ((double)ROWS * COLS);
}

static wf_array *evaluated(wf_array *x)
{
    if (x && wf_eval(&x, 1) != WF_OK) {
        wf_release(x);
        return NULL;
    }
    return x;
}

/* add, multiply, maximum, where over each dtype, by element size. */
static void print_every_dtype(int repeats, wf_key *key)
{
    static const wf_dtype order[] = {WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I8,  WF_DTYPE_U16,
                                     WF_DTYPE_I16,  WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_U32,
                                     WF_DTYPE_I32,  WF_DTYPE_F32, WF_DTYPE_U64, WF_DTYPE_I64,
                                     WF_DTYPE_F64,  WF_DTYPE_C64};
    static const enum op ops[4] = {OP_ADD, OP_MULTIPLY, OP_MAXIMUM, OP_WHERE};
    const int64_t shape[2] = {ROWS, COLS};
    printf("bench_binary: every dtype, %d x %d contiguous elements, best of %d, ns/element\n",
           ROWS, COLS, repeats);
    printf("%-10s %5s %10s %10s %10s %10s\n", "dtype", "bytes", "add", "multiply", "maximum",
           "where");
    for (size_t d = 0; d < sizeof order / sizeof order[0]; d++) {
        wf_array *u = wf_random_uniform(shape, 2, WF_DTYPE_F32, 0.5, 100, key);
        wf_array *v = wf_random_uniform(shape, 2, WF_DTYPE_F32, 0.5, 100, key);
        wf_array *a = evaluated(wf_astype(u, order[d])), *b = evaluated(wf_astype(v, order[d]));
        wf_array *half = wf_scalar(50, WF_DTYPE_F32);
        wf_array *cond = evaluated(wf_greater(u, half));
        wf_release(half);
        wf_release(u);
        wf_release(v);
        if (!a || !b || !cond) {
            fprintf(stderr, "bench_binary: setup failed: %s\n", wf_last_error_message());
            exit(1);
        }
        printf("%-10s %5zu", wf_dtype_name(order[d]), wf_dtype_size(order[d]));
        for (int k = 0; k < 4; k++)
            printf(" %10.3f", time_op(ops[k], cond, a, b, repeats));
        printf("\n");
        wf_release(a);
        wf_release(b);
        wf_release(cond);
    }
}

int main(int argc, char **argv)
{
    int repeats = (int)bench_int_arg(argc, argv, 1, 5, 1, 1000000, "repeats");
    if (repeats < 1)
        repeats = 1;
    const wf_dtype dtypes[2] = {WF_DTYPE_F32, WF_DTYPE_F16};
    const int64_t full_shape[2] = {ROWS, COLS}, row_shape[2] = {1, COLS};
    double figures[2][2][OP_COUNT]; /* dtype, layout (contiguous, row), op */
    wf_key key = wf_random_key(42);
    for (int d = 0; d < 2; d++) {
        wf_array *a = evaluated(wf_random_uniform(full_shape, 2, dtypes[d], 0.5, 2, &key));
        wf_array *b = evaluated(wf_random_uniform(full_shape, 2, dtypes[d], 0.5, 2, &key));
        wf_array *row = evaluated(wf_random_uniform(row_shape, 2, dtypes[d], 0.5, 2, &key));
        wf_array *cond = NULL;
        if (a && b) {
            wf_array *half = wf_scalar(1.25, dtypes[d]);
            cond = evaluated(wf_greater(a, half));
            wf_release(half);
        }
        if (!a || !b || !row || !cond) {
            fprintf(stderr, "bench_binary: setup failed: %s\n", wf_last_error_message());
            return 1;
        }
        for (int op = 0; op < OP_COUNT; op++) {
            figures[d][0][op] = time_op((enum op)op, cond, a, b, repeats);
            figures[d][1][op] = time_op((enum op)op, cond, a, row, repeats);
        }
        wf_release(a);
        wf_release(b);
        wf_release(row);
        wf_release(cond);
    }
    print_every_dtype(repeats, &key);
    printf("bench_binary: %d x %d elements, best of %d, ns/element\n", ROWS, COLS, repeats);
    printf("%-10s %12s %12s %12s %12s %10s\n", "op", "f32", "f32 row", "f16", "f16 row",
           "f16/f32");
    for (int op = 0; op < OP_COUNT; op++)
        printf("%-10s %12.3f %12.3f %12.3f %12.3f %10.2f\n", op_names[op], figures[0][0][op],
               figures[0][1][op], figures[1][0][op], figures[1][1][op],
               figures[1][0][op] / figures[0][0][op]);
    return 0;
}
