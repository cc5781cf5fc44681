/*
 * bench_sort: the sort family, scatter and gather against NumPy in one run.
 * Prints, per case, weft's best wall time over `repeats` with
 * WEFT_NUM_THREADS=1 and 2 (the scaling from one to two threads), and NumPy's
 * (np.sort, np.argsort(kind="stable"), np.argpartition + a sort of the k,
 * np.add.at, fancy indexing) when a Python with NumPy is found
 * ($WEFT_PY_VENV/bin/python, else build/py-venv/bin/python, else python3):
 *  - sort / argsort of 16M float32 (one row) and of 4096 rows of 4096;
 *  - topk(k = 50) over 4096 x 50,000 float32 logits (values and indices);
 *  - scatter_add of 1M rows of 256 float32 into a 65,536 x 256 table and
 *    the gather of the same rows, beside a memcpy of the bytes they move
 *    (the updates / the gathered rows: 1 GiB) split over the same number
 *    of threads; the goal is within 2x of it.
 * Inputs are uniform in [0, 1) (NumPy: its default generator).
 *
 *   build/release/bench_sort [scale=1] [repeats=3]   (scale < 1 shrinks every size)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "weft.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static wf_array *uniform(int64_t rows, int64_t cols)
{
    const int64_t shape[2] = {rows, cols};
    wf_key key = wf_random_key((uint64_t)(rows * 31 + cols));
    wf_array *a = wf_random_uniform(shape, 2, WF_DTYPE_F32, 0, 1, &key);
    wf_eval(&a, 1);
    return a;
}

typedef wf_array *(*bench_op)(wf_array *x, wf_array *y, wf_array *z);

static int64_t g_k;
static wf_array *op_sort(wf_array *x, wf_array *y, wf_array *z) { (void)y; (void)z; return wf_sort(x, 1); }
static wf_array *op_argsort(wf_array *x, wf_array *y, wf_array *z) { (void)y; (void)z; return wf_argsort(x, 1); }
static wf_array *op_topk(wf_array *x, wf_array *y, wf_array *z) { (void)y; (void)z; return wf_topk(x, g_k, 1); }
static wf_array *op_argtopk(wf_array *x, wf_array *y, wf_array *z) { (void)y; (void)z; return wf_argtopk(x, g_k, 1); }
static wf_array *op_scatter_add(wf_array *x, wf_array *y, wf_array *z)
{
    const int axis = 0;
    return wf_scatter(x, &y, 1, z, &axis, WF_SCATTER_ADD);
}
static wf_array *op_gather(wf_array *x, wf_array *y, wf_array *z)
{
    (void)z;
    const int axis = 0;
    const int64_t sizes[2] = {1, wf_array_dim(x, 1)};
    return wf_gather(x, &y, 1, &axis, sizes);
}

static double best_of(bench_op op, wf_array *x, wf_array *y, wf_array *z, int repeats)
{
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_seconds();
        wf_array *out = op(x, y, z);
        if (wf_eval(&out, 1) != WF_OK) {
            printf("failed: %s\n", wf_last_error_message());
            exit(1);
        }
        const double t = now_seconds() - t0;
        best = t < best ? t : best;
        wf_release(out);
    }
    return best;
}

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t bytes;
} copy_part;

static void *copy_thread(void *arg)
{
    copy_part *c = arg;
    memcpy(c->dst, c->src, c->bytes);
    return NULL;
}

/* Best time of a memcpy of `bytes` split over `threads` threads. */
static double best_memcpy(char *dst, const char *src, size_t bytes, int threads, int repeats)
{
    enum { MAX_COPY_THREADS = 64 };
    threads = threads > MAX_COPY_THREADS ? MAX_COPY_THREADS : threads;
    copy_part parts[MAX_COPY_THREADS];
    pthread_t ids[MAX_COPY_THREADS];
    const size_t share = bytes / (size_t)threads;
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_seconds();
        for (int i = 0; i < threads; i++) {
            const size_t off = (size_t)i * share;
            parts[i] = (copy_part){dst + off, src + off, i + 1 == threads ? bytes - off : share};
            if (i > 0)
                pthread_create(&ids[i], NULL, copy_thread, &parts[i]);
        }
        copy_thread(&parts[0]);
        for (int i = 1; i < threads; i++)
            pthread_join(ids[i], NULL);
        const double t = now_seconds() - t0;
        best = t < best ? t : best;
    }
    return best + (double)dst[bytes / 2] * 0;
}

/* One line per case: name and seconds, for this process's thread count. */
static void run_cases(double scale, int repeats)
{
    const int64_t flat = (int64_t)(16777216 * scale), side = (int64_t)(4096 * scale);
    const int64_t vocab = (int64_t)(50000 * scale), table_rows = (int64_t)(65536 * scale);
    const int64_t updates = (int64_t)(1048576 * scale);
    wf_array *row = uniform(1, flat), *sq = uniform(side, side), *logits = uniform(side, vocab);
    g_k = 50;
    printf("sort_16M %.6f\n", best_of(op_sort, row, NULL, NULL, repeats));
    printf("argsort_16M %.6f\n", best_of(op_argsort, row, NULL, NULL, repeats));
    printf("sort_4096x4096 %.6f\n", best_of(op_sort, sq, NULL, NULL, repeats));
    printf("argsort_4096x4096 %.6f\n", best_of(op_argsort, sq, NULL, NULL, repeats));
    printf("topk50_4096x50000 %.6f\n", best_of(op_topk, logits, NULL, NULL, repeats));
    printf("argtopk50_4096x50000 %.6f\n", best_of(op_argtopk, logits, NULL, NULL, repeats));
    wf_release(row);
    wf_release(sq);
    wf_release(logits);
    wf_array *table = uniform(table_rows, 256);
    const int64_t ushape[3] = {updates, 1, 256};
    wf_array *u2 = uniform(updates, 256), *upd = wf_reshape(u2, ushape, 3);
    wf_key key = wf_random_key(5);
    wf_array *idx = wf_random_randint(0, table_rows, &updates, 1, WF_DTYPE_I32, &key);
    wf_eval(&idx, 1);
    printf("scatter_add_1Mx256 %.6f\n", best_of(op_scatter_add, table, idx, upd, repeats));
    printf("gather_1Mx256 %.6f\n", best_of(op_gather, table, idx, NULL, repeats));
    /* the yardstick: a memcpy of the gathered bytes, on as many threads */
    const size_t bytes = (size_t)updates * 256 * sizeof(float);
    char *src = malloc(bytes), *dst = malloc(bytes);
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    const char *env = getenv("WEFT_NUM_THREADS");
    const int threads = env && atoi(env) > 0 ? atoi(env) : 1;
    printf("memcpy_1Mx256 %.6f\n", best_memcpy(dst, src, bytes, threads, repeats));
    free(src);
    free(dst);
    wf_release(idx);
    wf_release(upd);
    wf_release(u2);
    wf_release(table);
}

static const char *numpy_script =
    "import sys, time, numpy as np\n"
    "s = float(sys.argv[1]); reps = int(sys.argv[2]); rng = np.random.default_rng(0)\n"
    "def best(f):\n"
    "    b = 1e30\n"
    "    for _ in range(reps):\n"
    "        t = time.perf_counter(); f(); b = min(b, time.perf_counter() - t)\n"
    "    return b\n"
    "flat = int(16777216 * s); side = int(4096 * s); vocab = int(50000 * s)\n"
    "row = rng.random(flat, dtype=np.float32); sq = rng.random((side, side), dtype=np.float32)\n"
    "lg = rng.random((side, vocab), dtype=np.float32); k = 50\n"
    "def topk(x):\n"
    "    i = np.argpartition(-x, k - 1, axis=1)[:, :k]; v = np.take_along_axis(x, i, 1)\n"
    "    o = np.argsort(-v, axis=1, kind='stable'); return np.take_along_axis(v, o, 1)\n"
    "print('sort_16M', best(lambda: np.sort(row)))\n"
    "print('argsort_16M', best(lambda: np.argsort(row, kind='stable')))\n"
    "print('sort_4096x4096', best(lambda: np.sort(sq, axis=1)))\n"
    "print('argsort_4096x4096', best(lambda: np.argsort(sq, axis=1, kind='stable')))\n"
    "print('topk50_4096x50000', best(lambda: topk(lg)))\n"
    "print('argtopk50_4096x50000', best(lambda: np.argpartition(-lg, k - 1, axis=1)[:, :k]))\n"
    "tr = int(65536 * s); n = int(1048576 * s)\n"
    "table = rng.random((tr, 256), dtype=np.float32); upd = rng.random((n, 256), dtype=np.float32)\n"
    "idx = rng.integers(0, tr, n).astype(np.int32)\n"
    "def sa():\n"
    "    t = table.copy(); np.add.at(t, idx, upd); return t\n"
    "print('scatter_add_1Mx256', best(sa))\n"
    "print('gather_1Mx256', best(lambda: table[idx]))\n";

/* Runs this program (threads = 0: the default count) or NumPy into out. */
static void run_child(char *const *argv, const char *threads, char *out, size_t cap)
{
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0)
        return;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (threads)
            setenv("WEFT_NUM_THREADS", threads, 1);
        setenv("WEFT_BENCH_SORT_CHILD", "1", 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t r;
    while (used + 1 < cap && (r = read(fds[0], out + used, cap - 1 - used)) > 0)
        used += (size_t)r;
    out[used] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
}

static double lookup(const char *text, const char *name)
{
    const size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ' ')
            return atof(p + len + 1);
    return 0;
}

int main(int argc, char **argv)
{
    const double scale = bench_double_arg(argc, argv, 1, 1, 1e-3, 16, "scale");
    const int repeats = (int)bench_int_arg(argc, argv, 2, 3, 1, 1000000, "repeats");
    if (getenv("WEFT_BENCH_SORT_CHILD")) {
        run_cases(scale, repeats);
        return 0;
    }
    static char one[4096], two[4096], np_out[4096];
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    char sc[32], rp[32];
    snprintf(sc, sizeof sc, "%g", scale);
    snprintf(rp, sizeof rp, "%d", repeats);
    char *const me[] = {self, sc, rp, NULL};
    run_child(me, "1", one, sizeof one);
    run_child(me, "2", two, sizeof two);
    char python[4200];
    const char *venv = getenv("WEFT_PY_VENV");
    snprintf(python, sizeof python, "%s/bin/python", venv ? venv : "build/py-venv");
    if (access(python, X_OK) != 0)
        snprintf(python, sizeof python, "python3");
    char *const py[] = {python, "-c", (char *)numpy_script, sc, rp, NULL};
    run_child(py, NULL, np_out, sizeof np_out);
    static const char *names[] = {"sort_16M",           "argsort_16M",        "sort_4096x4096",
                                  "argsort_4096x4096",  "topk50_4096x50000",  "argtopk50_4096x50000",
                                  "scatter_add_1Mx256", "gather_1Mx256",      "memcpy_1Mx256"};
    printf("%-22s %11s %11s %11s %12s %12s\n", "case (seconds)", "weft 1 thr", "weft 2 thr",
           "numpy", "numpy/weft1", "weft1/weft2");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const double a = lookup(one, names[i]), b = lookup(two, names[i]);
        const double c = lookup(np_out, names[i]);
        printf("%-22s %11.4f %11.4f %11.4f %12.2f %12.2f\n", names[i], a, b, c,
               a > 0 && c > 0 ? c / a : 0, a > 0 && b > 0 ? a / b : 0);
    }
    /* scatter_add and gather against the copy of the bytes they move */
    for (int t = 0; t < 2; t++) {
        const char *out = t == 0 ? one : two;
        const double copy = lookup(out, "memcpy_1Mx256");
        printf("%d thread%s: scatter_add / memcpy %.2f, gather / memcpy %.2f (goal <= 2)\n", t + 1,
               t ? "s" : "", copy > 0 ? lookup(out, "scatter_add_1Mx256") / copy : 0,
               copy > 0 ? lookup(out, "gather_1Mx256") / copy : 0);
    }
    return 0;
}
