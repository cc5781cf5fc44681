/*
 * bench_strided: element-wise work, copies, conversions and norms over
 * transposed and permuted float32 views beside their contiguous twins, in
 * one run (issue 11, section 3: each within 1.5x of its twin). For n = 4000,
 * 4096 and 4104 (x is n x n; the 3-d cases use 16 x n/4 x n/4):
 *   x.T + 0, x.T + y, x.T + y.T        twin x + 0, x + y, x + y
 *   x3.permute(0,2,1) + 0, (2,0,1) + 0  twin x3 + 0
 *   exp(x.T), astype(x.T, f16)          twin exp(x), astype(x, f16)
 *   layer_norm(x.T), rms_norm(x.T)      twin the norm of x (last axis)
 *   softmax(x.T) (last axis)            twin softmax(x)
 *   copy_to(x.T)                        twin copy_to(x): a transposed copy into
 *                                       host memory (a memcpy for the twin)
 *   data(x.T + 0)                       twin data(x + 0): the op, then its
 *                                       values row-major (wf_array_data)
 *   cf(x.T, y.T), cf(x.T, y)            twin cf(x, y): cf a compiled
 *                                       x * 2 + y + 1 (one fused kernel)
 * Element-wise results keep the layout of their inputs (x.T + 0 is laid out
 * like x.T), so the transposing is paid where row-major data is asked for:
 * the last two rows show what that costs.
 * Each figure is ns per element, the best of `repeats` (building the node
 * included), strided and contiguous runs interleaved. The program re-runs
 * itself with WEFT_NUM_THREADS=1 (CPU time is the figure: it stays right
 * when other work shares the machine) and with the default thread count
 * (wall time is the figure).
 *
 *   build/release/bench_strided [repeats=5] [n ...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

static double clock_seconds(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct best_times {
    double wall, cpu;
} best_times;

enum kase {
    K_ADD_ZERO,
    K_ADD_Y,
    K_ADD_YT,
    K_PERM_021,
    K_PERM_201,
    K_EXP,
    K_ASTYPE,
    K_LAYER_NORM,
    K_RMS_NORM,
    K_SOFTMAX,
    K_COPY_TO,
    K_DATA,
    K_COMPILED_SAME,
    K_COMPILED_MIXED,
    K_COUNT
};
static const char *const kase_names[K_COUNT] = {
    "x.T + 0", "x.T + y", "x.T + y.T", "x3.p(0,2,1) + 0", "x3.p(2,0,1) + 0",
    "exp(x.T)", "astype(x.T,f16)", "layer_norm(x.T)", "rms_norm(x.T)", "softmax(x.T)",
    "copy_to(x.T)",
    "data(x.T + 0)", "cf(x.T, y.T)", "cf(x.T, y)"};

typedef struct operands {
    wf_array *x, *y, *xt, *yt, *x3, *p021, *p201, *zero, *w, *b;
    float *host; /* room for x's elements (copy_to) */
    wf_fn *compiled; /* x * 2 + y + 1 */
} operands;

static wf_status chain_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *two = wf_scalar(2, WF_DTYPE_F32), *one = wf_scalar(1, WF_DTYPE_F32);
    out[0] = wf_keep(wf_add(wf_add(wf_multiply(in[0], two), in[1]), one));
    wf_scope_end();
    *nout = 1;
    return out[0] != NULL ? WF_OK : wf_last_error();
}

/* The compiled chain on (a, b), or NULL. */
static wf_array *call_compiled(const operands *o, wf_array *a, wf_array *b)
{
    wf_array *in[2] = {a, b}, *out[1] = {NULL};
    size_t n = 1;
    return wf_fn_call(o->compiled, in, 2, out, &n) == WF_OK ? out[0] : NULL;
}

/* The node of case k, strided or its contiguous twin (a new reference). */
static wf_array *build(const operands *o, enum kase k, int strided)
{
    wf_array *x = strided ? o->xt : o->x;
    static const int last_axis = 1;
    switch (k) {
    case K_ADD_ZERO: return wf_add(x, o->zero);
    case K_ADD_Y: return wf_add(x, o->y);
    case K_ADD_YT: return wf_add(x, strided ? o->yt : o->y);
    case K_PERM_021: return wf_add(strided ? o->p021 : o->x3, o->zero);
    case K_PERM_201: return wf_add(strided ? o->p201 : o->x3, o->zero);
    case K_EXP: return wf_exp(x);
    case K_ASTYPE: return wf_astype(x, WF_DTYPE_F16);
    case K_LAYER_NORM: return wf_layer_norm(x, o->w, o->b, 1e-5);
    case K_RMS_NORM: return wf_rms_norm(x, o->w, 1e-5);
    case K_SOFTMAX: return wf_softmax(x, &last_axis, 1);
    case K_COPY_TO: return wf_retain(x);
    case K_DATA: return wf_add(x, o->zero);
    case K_COMPILED_SAME: return call_compiled(o, x, strided ? o->yt : o->y);
    case K_COMPILED_MIXED: return call_compiled(o, x, o->y);
    default: return NULL;
    }
}

static wf_array *random_array(const int64_t *shape, int ndim, uint32_t seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *data = malloc((size_t)n * sizeof *data);
    if (data == NULL)
        return NULL;
    uint32_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        data[i] = (float)(s % 100000u) / 25000.0f - 2.0f;
    }
    wf_array *a = wf_array_from_data(data, shape, ndim, WF_DTYPE_F32);
    free(data);
    return a;
}

static bool setup(operands *o, int64_t n)
{
    const int64_t shape[2] = {n, n}, shape3[3] = {16, n / 4, n / 4}, vec[1] = {n};
    static const int p021[3] = {0, 2, 1}, p201[3] = {2, 0, 1};
    memset(o, 0, sizeof *o);
    o->x = random_array(shape, 2, 12345);
    o->y = random_array(shape, 2, 777);
    o->x3 = random_array(shape3, 3, 4242);
    o->w = random_array(vec, 1, 99);
    o->b = random_array(vec, 1, 98);
    o->zero = wf_scalar(0, WF_DTYPE_F32);
    o->host = malloc((size_t)(n * n) * sizeof(float));
    o->xt = wf_transpose(o->x, NULL, 0);
    o->yt = wf_transpose(o->y, NULL, 0);
    o->p021 = wf_transpose(o->x3, p021, 3);
    o->p201 = wf_transpose(o->x3, p201, 3);
    wf_fn *chain = wf_fn_new(chain_body, NULL, NULL);
    o->compiled = wf_compile(chain, NULL);
    wf_fn_release(chain);
    if (o->compiled == NULL)
        return false;
    wf_array *all[10] = {o->x, o->y, o->xt, o->yt, o->x3, o->p021, o->p201, o->zero, o->w, o->b};
    for (int k = 0; k < 10; k++)
        if (all[k] == NULL)
            return false;
    if (o->host == NULL)
        return false;
    return wf_eval(all, 10) == WF_OK;
}

static void teardown(operands *o)
{
    wf_array *all[10] = {o->x, o->y, o->xt, o->yt, o->x3, o->p021, o->p201, o->zero, o->w, o->b};
    for (int k = 0; k < 10; k++)
        wf_release(all[k]);
    wf_fn_release(o->compiled);
    free(o->host);
}

/* Evaluates case k's node y, then what the case does with its values. */
static bool run_case(const operands *o, enum kase k, wf_array *y)
{
    if (wf_eval(&y, 1) != WF_OK)
        return false;
    if (k == K_COPY_TO)
        return wf_array_copy_to(y, o->host, wf_array_nbytes(y)) == WF_OK;
    const void *data;
    return k != K_DATA || wf_array_data(y, &data) == WF_OK;
}

/* Best times per element of case k, [0] the twin, [1] strided. */
static bool time_case(const operands *o, enum kase k, int repeats, best_times *best)
{
    for (int s = 0; s < 2; s++)
        best[s] = (best_times){1e30, 1e30};
    for (int r = 0; r < repeats; r++)
        for (int s = 0; s < 2; s++) {
            const double w0 = clock_seconds(CLOCK_MONOTONIC);
            const double c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
            wf_array *y = build(o, k, s);
            if (y == NULL || !run_case(o, k, y)) {
                fprintf(stderr, "bench_strided: %s failed: %s\n", kase_names[k],
                        wf_last_error_message());
                wf_release(y);
                return false;
            }
            const double wall = clock_seconds(CLOCK_MONOTONIC) - w0;
            const double cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
            const double per = 1e9 / (double)wf_array_size(y);
            wf_release(y);
            best[s].wall = wall * per < best[s].wall ? wall * per : best[s].wall;
            best[s].cpu = cpu * per < best[s].cpu ? cpu * per : best[s].cpu;
        }
    return true;
}

static int child_main(int repeats, int nsizes, const int64_t *sizes)
{
    const char *threads = getenv("WEFT_NUM_THREADS");
    printf("\n%s threads: ns per element, best of %d; the ratio strided / contiguous\n",
           threads ? threads : "default", repeats);
    printf("%-17s %5s %9s %9s %7s   %9s %9s %7s\n", "case", "n", "cpu cont", "cpu strd",
           "ratio", "wall cont", "wall strd", "ratio");
    for (int i = 0; i < nsizes; i++) {
        operands o;
        if (!setup(&o, sizes[i])) {
            fprintf(stderr, "bench_strided: setup failed: %s\n", wf_last_error_message());
            teardown(&o);
            return 1;
        }
        for (int k = 0; k < K_COUNT; k++) {
            best_times b[2];
            if (!time_case(&o, (enum kase)k, repeats, b)) {
                teardown(&o);
                return 1;
            }
            printf("%-17s %5lld %9.3f %9.3f %6.2fx   %9.3f %9.3f %6.2fx\n", kase_names[k],
                   (long long)sizes[i], b[0].cpu, b[1].cpu, b[1].cpu / b[0].cpu, b[0].wall,
                   b[1].wall, b[1].wall / b[0].wall);
            fflush(stdout);
        }
        teardown(&o);
    }
    return 0;
}

/* Runs this program again with WEFT_NUM_THREADS set to `threads` (NULL:
 * unset) and the child marker. */
static bool run_child(char **argv, const char *threads)
{
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        if (threads != NULL)
            setenv("WEFT_NUM_THREADS", threads, 1);
        else
            unsetenv("WEFT_NUM_THREADS");
        setenv("WEFT_BENCH_CHILD", "1", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
    const int repeats = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 5;
    int64_t sizes[8] = {4000, 4096, 4104};
    int nsizes = 3;
    if (argc > 2) {
        nsizes = 0;
        for (int i = 2; i < argc && nsizes < 8; i++)
            if (atoll(argv[i]) >= 4)
                sizes[nsizes++] = atoll(argv[i]);
    }
    if (getenv("WEFT_BENCH_CHILD") != NULL)
        return child_main(repeats, nsizes, sizes);
    printf("bench_strided: float32, transposed/permuted views vs contiguous twins\n");
    const bool ok = run_child(argv, "1") && run_child(argv, NULL);
    if (!ok)
        fprintf(stderr, "bench_strided: a measuring run failed\n");
    return ok ? 0 : 1;
}
