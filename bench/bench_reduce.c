/*
 * bench_reduce: what reproducible reductions cost (docs/THREADING.md,
 * "Reproducible results"), in one run. The program re-executes itself with
 * WEFT_NUM_THREADS=1 and =2 and prints, side by side, ns per input element
 * (best of `repeats`, wall clock) for a 4096 x 4096 float32 array and its
 * transposed view:
 *  - sum, max and logsumexp over axis 1, axis 0 and all axes through weft
 *    (the split follows from the shape only: bitwise the same for any
 *    thread count), and where the split matters (a reduced extent shared
 *    by threads) the fastest non-reproducible form, written here: the
 *    reduced extent cut into one contiguous part per thread, each reduced
 *    with weft's own loops into private partials combined in part order;
 *  - softmax over the last axis, axis 0, and the transposed view;
 *  - a plain one-thread C loop summing the memory, as the yardstick;
 *  - x + 0 against x.T + 0 at n = 4000, 4096, 4104 (element-wise work over a
 *    transposed view: the shared walk's 2-d tiles).
 * Columns: the 1- and 2-thread figures of weft, the speedup, and the ratio
 * weft / thread-count split at 2 threads (above 1: reproducibility costs).
 *
 *   build/release/bench_reduce [n=4096] [repeats=5]
 *
 * Short rows (one thread, process CPU time): sum, mean, max, logsumexp,
 * softmax and var over the last axis of about 360K float32 cut into rows of
 * 3, 11, 64 and 200, beside a plain sequential C loop over the same data
 * (one row after another, each folded in order; libm expf):
 *
 *   build/release/bench_reduce --short [repeats=30]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "runtime/pool.h"
#include "bench_args.h"
#include "weft.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU time of the whole process (all its threads): on a machine shared with
 * other work it still measures the work done, where wall time does not. */
static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best wall and CPU times of the runs so far. */
typedef struct best_times {
    double wall, cpu;
} best_times;

static void keep_best(best_times *b, double wall0, double cpu0)
{
    const double wall = now_seconds() - wall0, cpu = cpu_seconds() - cpu0;
    b->wall = wall < b->wall ? wall : b->wall;
    b->cpu = cpu < b->cpu ? cpu : b->cpu;
}

/* ---------------------------------------------------------------- the thread-count split */

typedef struct split {
    int k;          /* WF_CPU_KOP_SUM or MAX, or -1: sum of exp(x - shift) */
    const float *x; /* rows x cols, contiguous */
    int64_t rows, cols;
    int64_t parts;
    float shift;     /* for k = -1 */
    const float *sh; /* per column shifts (columns form), or NULL */
    float *partial;  /* parts values (flat) or parts x cols (columns) */
} split;

/* Flat: part p reduces elements [n p / parts, n (p + 1) / parts). */
static void flat_part(void *arg, int64_t begin, int64_t end)
{
    split *s = arg;
    const int64_t n = s->rows * s->cols;
    for (int64_t p = begin; p < end; p++) {
        const int64_t lo = n * p / s->parts, hi = n * (p + 1) / s->parts;
        wf_cpu_row r = {s->k < 0 ? WF_CPU_KOP_SUM : (wf_cpu_kop)s->k,
                        WF_DTYPE_F32,
                        (const char *)(s->x + lo),
                        1,
                        WF_DTYPE_F32,
                        s->k < 0 ? WF_CPU_ROW_EXP : WF_CPU_ROW_PLAIN,
                        s->shift,
                        NULL,
                        0};
        s->partial[p] = wf__cpu_row_reduce(&r, hi - lo).f32;
    }
}

static float flat_reduce(int k, const float *x, int64_t n, float shift)
{
    const int64_t parts = wf__pool_size();
    float partial[256];
    split s = {k, x, 1, n, parts, shift, NULL, partial};
    wf__parallel_for(parts, 1, flat_part, &s);
    float v = partial[0];
    for (int64_t p = 1; p < parts; p++)
        v = k == WF_CPU_KOP_MAX ? fmaxf(v, partial[p]) : v + partial[p];
    return v;
}

/* Columns: part p folds rows [rows p / parts, ...) into its own row. */
static void column_part(void *arg, int64_t begin, int64_t end)
{
    split *s = arg;
    const wf_cpu_red_isa *isa = wf__cpu_red_isa();
    float *t = malloc((size_t)s->cols * sizeof *t), *e = malloc((size_t)s->cols * sizeof *e);
    for (int64_t p = begin; p < end; p++) {
        float *acc = s->partial + p * s->cols;
        const int kop = s->k < 0 ? WF_CPU_KOP_SUM : s->k;
        wf__cpu_kop_fill((wf_cpu_kop)kop, WF_DTYPE_F32, acc, s->cols);
        const int64_t r0 = s->rows * p / s->parts, r1 = s->rows * (p + 1) / s->parts;
        if (s->k >= 0) { /* weft's fastest loop for a row of accumulators */
            isa->accum_rows_f32(kop, r1 - r0, s->cols, acc, s->x + r0 * s->cols, s->cols);
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            const float *row = s->x + r * s->cols;
            if (s->k < 0) {
                for (int64_t c = 0; c < s->cols; c++)
                    t[c] = row[c] - s->sh[c];
                wf__cpu_exp_f32(s->cols, t, e);
                row = e;
            }
            isa->accum_f32(kop, s->cols, acc, row);
        }
    }
    free(t);
    free(e);
}

static void column_reduce(int k, const float *x, int64_t rows, int64_t cols, const float *sh,
                          float *out)
{
    const int64_t parts = wf__pool_size();
    float *partial = malloc((size_t)(parts * cols) * sizeof *partial);
    split s = {k, x, rows, cols, parts, 0, sh, partial};
    wf__parallel_for(parts, 1, column_part, &s);
    memcpy(out, partial, (size_t)cols * sizeof *out);
    for (int64_t p = 1; p < parts; p++)
        wf__cpu_red_isa()->accum_f32(k < 0 ? WF_CPU_KOP_SUM : k, cols, out,
                                     partial + p * cols);
    free(partial);
}

/* op 0 sum, 1 max, 2 logsumexp; axis 0 (columns) or -1 (all). */
static void split_op(int op, const float *x, int64_t n, int axis, float *out)
{
    if (axis < 0) {
        if (op < 2) {
            out[0] = flat_reduce(op == 0 ? WF_CPU_KOP_SUM : WF_CPU_KOP_MAX, x, n * n, 0);
        } else {
            const float m = flat_reduce(WF_CPU_KOP_MAX, x, n * n, 0);
            out[0] = m + logf(flat_reduce(-1, x, n * n, m));
        }
        return;
    }
    if (op < 2) {
        column_reduce(op == 0 ? WF_CPU_KOP_SUM : WF_CPU_KOP_MAX, x, n, n, NULL, out);
        return;
    }
    float *m = malloc((size_t)n * sizeof *m);
    column_reduce(WF_CPU_KOP_MAX, x, n, n, NULL, m);
    column_reduce(-1, x, n, n, m, out);
    for (int64_t c = 0; c < n; c++)
        out[c] = m[c] + logf(out[c]);
    free(m);
}

/* ---------------------------------------------------------------- weft */

enum { OP_SUM, OP_MAX, OP_LSE, OP_SOFTMAX, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"sum", "max", "logsumexp", "softmax"};

static wf_array *build(int op, wf_array *a, int axis)
{
    const int ax[1] = {axis};
    const int *axes = axis < 0 ? NULL : ax;
    const int naxes = axis < 0 ? 0 : 1;
    switch (op) {
    case OP_SUM: return wf_sum(a, axes, naxes, false);
    case OP_MAX: return wf_max(a, axes, naxes, false);
    case OP_LSE: return wf_logsumexp(a, axes, naxes, false);
    default: return wf_softmax(a, axes, naxes);
    }
}

/* Best of `repeats`, ns per input element (wall and CPU). */
static best_times time_weft(int op, wf_array *a, int axis, int repeats)
{
    best_times b = {1e30, 1e30};
    for (int r = 0; r < repeats; r++) {
        const double w0 = now_seconds(), c0 = cpu_seconds();
        wf_array *out = build(op, a, axis);
        const bool ok = out != NULL && wf_eval(&out, 1) == WF_OK;
        if (ok)
            keep_best(&b, w0, c0);
        else
            fprintf(stderr, "bench_reduce: %s failed: %s\n", op_names[op],
                    wf_last_error_message());
        wf_release(out);
    }
    const double per = 1e9 / (double)wf_array_size(a);
    return (best_times){b.wall * per, b.cpu * per};
}

static best_times time_split(int op, const float *x, int64_t n, int axis, int repeats)
{
    float *out = malloc((size_t)n * sizeof *out);
    best_times b = {1e30, 1e30};
    for (int r = 0; r < repeats; r++) {
        const double w0 = now_seconds(), c0 = cpu_seconds();
        split_op(op, x, n, axis, out);
        keep_best(&b, w0, c0);
    }
    free(out);
    const double per = 1e9 / (double)(n * n);
    return (best_times){b.wall * per, b.cpu * per};
}

/* x + 0 against x.T + 0 (the shared walk's 2-d tiles) at sizes around 4096,
 * as lines "add n contiguous transposed". */
static void time_transposed_add(int repeats)
{
    static const int64_t sizes[3] = {4000, 4096, 4104};
    for (int k = 0; k < 3; k++) {
        const int64_t n = sizes[k], shape[2] = {n, n};
        wf_array *a = wf_full(shape, 2, 1.5, WF_DTYPE_F32);
        wf_array *t = wf_transpose(a, NULL, 0), *zero = wf_scalar(0, WF_DTYPE_F32);
        best_times best[2] = {{1e30, 1e30}, {1e30, 1e30}};
        for (int r = 0; r < repeats && wf_eval(&t, 1) == WF_OK; r++)
            for (int layout = 0; layout < 2; layout++) {
                const double w0 = now_seconds(), c0 = cpu_seconds();
                wf_array *y = wf_add(layout ? t : a, zero);
                if (y != NULL && wf_eval(&y, 1) == WF_OK)
                    keep_best(&best[layout], w0, c0);
                wf_release(y);
            }
        const double per = 1e9 / (double)(n * n);
        printf("add %lld %.4f %.4f %.4f %.4f\n", (long long)n, best[0].wall * per,
               best[1].wall * per, best[0].cpu * per, best[1].cpu * per);
        wf_release(zero);
        wf_release(t);
        wf_release(a);
    }
}

/* The measurements of one process, as lines "key value". */
static int child_main(int64_t n, int repeats)
{
    float *data = malloc((size_t)(n * n) * sizeof *data);
    uint32_t s = 12345;
    for (int64_t i = 0; i < n * n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        data[i] = (float)(s % 100000u) / 25000.0f - 2.0f;
    }
    const int64_t shape[2] = {n, n};
    wf_array *a = wf_array_from_data(data, shape, 2, WF_DTYPE_F32);
    wf_array *t = wf_transpose(a, NULL, 0);
    const void *mem = NULL;
    if (a == NULL || t == NULL || wf_eval(&t, 1) != WF_OK || wf_array_data(a, &mem) != WF_OK) {
        fprintf(stderr, "bench_reduce: setup failed: %s\n", wf_last_error_message());
        return 1;
    }
    double best = 1e30, sink = 0;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_seconds();
        float acc[8] = {0};
        for (int64_t i = 0; i + 8 <= n * n; i += 8)
            for (int j = 0; j < 8; j++)
                acc[j] += data[i + j];
        for (int j = 0; j < 8; j++)
            sink += acc[j];
        const double el = now_seconds() - t0;
        best = el < best ? el : best;
    }
    printf("loop %.4f %.1f\n", best * 1e9 / (double)(n * n), sink);
    static const int axes[3] = {1, 0, -1};
    for (int op = 0; op < OP_COUNT; op++)
        for (int layout = 0; layout < 2; layout++)
            for (int k = 0; k < 3; k++) {
                if (op == OP_SOFTMAX && k == 2)
                    continue;
                const best_times w = time_weft(op, layout ? t : a, axes[k], repeats);
                printf("%d %d %d weft %.4f %.4f\n", op, layout, k, w.wall, w.cpu);
                /* Where threads share a reduced extent in memory: the
                 * columns of the array (axis 0; axis 1 of the view) and all. */
                const int mem_axis = layout ? (k == 1 ? -2 : k == 0 ? 0 : -1)
                                            : (k == 0 ? -2 : k == 1 ? 0 : -1);
                if (op != OP_SOFTMAX && mem_axis != -2) {
                    const best_times sp = time_split(op, mem, n, mem_axis == 0 ? 0 : -1, repeats);
                    printf("%d %d %d split %.4f %.4f\n", op, layout, k, sp.wall, sp.cpu);
                }
            }
    wf_release(t);
    wf_release(a);
    free(data);
    time_transposed_add(repeats);
    return 0;
}

/* ---------------------------------------------------------------- short rows */

enum { SHORT_TOTAL = 360000 };
enum { SH_SUM, SH_MEAN, SH_MAX, SH_LSE, SH_SOFTMAX, SH_VAR, SH_COUNT };
static const char *const short_names[SH_COUNT] = {"sum", "mean", "max",
                                                  "logsumexp", "softmax", "var"};

static wf_array *build_short(int op, wf_array *a)
{
    const int axis[1] = {1};
    switch (op) {
    case SH_SUM: return wf_sum(a, axis, 1, false);
    case SH_MEAN: return wf_mean(a, axis, 1, false);
    case SH_MAX: return wf_max(a, axis, 1, false);
    case SH_LSE: return wf_logsumexp(a, axis, 1, false);
    case SH_SOFTMAX: return wf_softmax(a, axis, 1);
    default: return wf_var(a, axis, 1, false, 0);
    }
}

static float row_max_plain(const float *x, int64_t len)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < len; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* The plain loop of op over rows x len floats: one row after another. */
static void plain_short(int op, const float *x, int64_t rows, int64_t len, float *out)
{
    for (int64_t r = 0; r < rows; r++, x += len) {
        float s = 0;
        switch (op) {
        case SH_SUM:
        case SH_MEAN:
            for (int64_t i = 0; i < len; i++)
                s += x[i];
            out[r] = op == SH_MEAN ? s / (float)len : s;
            break;
        case SH_MAX: out[r] = row_max_plain(x, len); break;
        case SH_LSE: {
            const float m = row_max_plain(x, len);
            for (int64_t i = 0; i < len; i++)
                s += expf(x[i] - m);
            out[r] = m + logf(s);
            break;
        }
        case SH_SOFTMAX: {
            const float m = row_max_plain(x, len);
            float *y = out + r * len;
            for (int64_t i = 0; i < len; i++) {
                y[i] = expf(x[i] - m);
                s += y[i];
            }
            const float inv = 1.0f / s;
            for (int64_t i = 0; i < len; i++)
                y[i] *= inv;
            break;
        }
        default: {
            for (int64_t i = 0; i < len; i++)
                s += x[i];
            const float mu = s / (float)len;
            float q = 0;
            for (int64_t i = 0; i < len; i++)
                q += (x[i] - mu) * (x[i] - mu);
            out[r] = q / (float)len;
            break;
        }
        }
    }
}

/* One thread (WEFT_NUM_THREADS=1 is set before weft starts its pool): per
 * row length and op, weft's and the plain loop's best CPU time in µs. */
static int short_main(int repeats)
{
    static const int64_t lens[4] = {3, 11, 64, 200};
    float *data = malloc(SHORT_TOTAL * sizeof *data), *out = malloc(SHORT_TOTAL * sizeof *out);
    uint32_t s = 777;
    for (int64_t i = 0; i < SHORT_TOTAL; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        data[i] = (float)(s % 100000u) / 25000.0f - 2.0f;
    }
    printf("bench_reduce --short: rows of a %d-float float32 array, last axis, 1 thread,\n"
           "best of %d, process CPU time in microseconds (weft includes building the op)\n\n",
           SHORT_TOTAL, repeats);
    printf("%-10s %5s %8s %10s %10s %8s\n", "op", "len", "rows", "weft us", "loop us",
           "ratio");
    for (int l = 0; l < 4; l++) {
        const int64_t len = lens[l], rows = SHORT_TOTAL / len, shape[2] = {rows, len};
        wf_array *a = wf_array_from_data(data, shape, 2, WF_DTYPE_F32);
        if (a == NULL || wf_eval(&a, 1) != WF_OK) {
            fprintf(stderr, "bench_reduce: setup failed: %s\n", wf_last_error_message());
            return 1;
        }
        for (int op = 0; op < SH_COUNT; op++) {
            double weft = 1e30, loop = 1e30;
            for (int r = 0; r < repeats; r++) {
                double c0 = cpu_seconds();
                wf_array *y = build_short(op, a);
                if (y == NULL || wf_eval(&y, 1) != WF_OK) {
                    fprintf(stderr, "bench_reduce: %s failed: %s\n", short_names[op],
                            wf_last_error_message());
                    return 1;
                }
                const double tw = cpu_seconds() - c0;
                wf_release(y);
                c0 = cpu_seconds();
                plain_short(op, data, rows, len, out);
                const double tl = cpu_seconds() - c0;
                weft = tw < weft ? tw : weft;
                loop = tl < loop ? tl : loop;
            }
            printf("%-10s %5lld %8lld %10.1f %10.1f %7.2fx\n", short_names[op], (long long)len,
                   (long long)rows, weft * 1e6, loop * 1e6, weft / loop);
        }
        wf_release(a);
    }
    free(out);
    free(data);
    return 0;
}

/* ---------------------------------------------------------------- the parent */

enum { OUT_CAP = 1 << 14 };

static bool run_child(const char *self, int threads, const char *n, const char *repeats,
                      char *out)
{
    char var[32];
    snprintf(var, sizeof var, "%d", threads);
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        setenv("WEFT_NUM_THREADS", var, 1);
        setenv("WEFT_BENCH_CHILD", "1", 1);
        execl(self, self, n, repeats, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t r;
    while (pid > 0 && used + 1 < OUT_CAP && (r = read(fds[0], out + used, OUT_CAP - 1 - used)) > 0)
        used += (size_t)r;
    out[used] = '\0';
    close(fds[0]);
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* The figures (wall, CPU) for (op, layout, axis, kind) in a child's output;
 * -1 if none. */
static best_times figure(const char *out, int op, int layout, int k, const char *kind)
{
    char key[64];
    snprintf(key, sizeof key, "\n%d %d %d %s ", op, layout, k, kind);
    const char *p = strstr(out, key);
    best_times b = {-1, -1};
    if (p != NULL)
        sscanf(p + strlen(key), "%lf %lf", &b.wall, &b.cpu);
    return b;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--short") == 0) {
        setenv("WEFT_NUM_THREADS", "1", 1);
        return short_main((int)bench_int_arg(argc, argv, 2, 30, 1, 1000000, "repeats"));
    }
    const int64_t n = bench_int_arg(argc, argv, 1, 4096, 1, 32768, "n");
    const int repeats = (int)bench_int_arg(argc, argv, 2, 5, 1, 1000000, "repeats");
    if (getenv("WEFT_BENCH_CHILD") != NULL)
        return child_main(n, repeats);
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    char narg[32], rarg[32];
    snprintf(narg, sizeof narg, "%lld", (long long)n);
    snprintf(rarg, sizeof rarg, "%d", repeats);
    static char one[OUT_CAP], two[OUT_CAP];
    double load[2][3] = {{0}};
    getloadavg(load[0], 3);
    if (!run_child(self, 1, narg, rarg, one) || !run_child(self, 2, narg, rarg, two)) {
        fprintf(stderr, "bench_reduce: a measuring run failed\n");
        return 1;
    }
    printf("bench_reduce: %lld x %lld float32, best of %d, ns per input element (wall)\n",
           (long long)n, (long long)n, repeats);
    getloadavg(load[1], 3);
    printf("plain C loop sum, 1 thread: %.3f\n", atof(one + 5));
    printf("load average (1 min) before and after the runs: %.2f %.2f (the machine is shared:\n"
           "above the core count, wall figures and the 1->2 speedup mean little)\n\n",
           load[0][0], load[1][0]);
    printf("wall: 1 and 2 threads and the speedup; cpu: process CPU time (all threads) of\n"
           "weft and of the thread-count split at 2 threads, and their ratio (the cost of\n"
           "reproducibility; CPU time stays meaningful when other work shares the machine)\n\n");
    printf("%-10s %-10s %-7s %8s %8s %7s %9s %9s %8s %8s\n", "op", "layout", "axis", "wall 1t",
           "wall 2t", "1->2", "cpu weft", "cpu split", "ratio", "ratio 1t");
    static const char *const axis_names[3] = {"axis 1", "axis 0", "all"};
    for (int op = 0; op < OP_COUNT; op++)
        for (int layout = 0; layout < 2; layout++)
            for (int k = 0; k < 3; k++) {
                const best_times w1 = figure(one, op, layout, k, "weft");
                const best_times w2 = figure(two, op, layout, k, "weft");
                if (w1.wall < 0)
                    continue;
                const best_times s2 = figure(two, op, layout, k, "split");
                printf("%-10s %-10s %-7s %8.3f %8.3f %6.2fx %9.3f", op_names[op],
                       layout ? "transposed" : "contiguous", axis_names[k], w1.wall, w2.wall,
                       w1.wall / w2.wall, w2.cpu);
                const best_times s1 = figure(one, op, layout, k, "split");
                if (s2.cpu > 0)
                    printf(" %9.3f %7.2fx %7.2fx\n", s2.cpu, w2.cpu / s2.cpu, w1.cpu / s1.cpu);
                else
                    printf(" %9s %8s %8s\n", "-", "-", "-");
            }
    printf("\n'-': the reduced extent is one row per output; weft's split (rows in "
           "parallel) is the only one.\n\n");
    printf("x + 0 and x.T + 0, ns per element, 1 thread (cpu time; wall in brackets)\n");
    for (const char *p = strstr(one, "\nadd "); p != NULL; p = strstr(p + 1, "\nadd ")) {
        long long size = 0;
        double cw = 0, tw = 0, cc = 0, tc = 0;
        if (sscanf(p, " add %lld %lf %lf %lf %lf", &size, &cw, &tw, &cc, &tc) == 5)
            printf("n = %lld: contiguous %.3f (%.3f), transposed %.3f (%.3f): %.2fx\n", size,
                   cc, cw, tc, tw, tc / cc);
    }
    return 0;
}
