/*
 * Bitwise reproducibility of reductions, scans, softmax and norms
 * (docs/THREADING.md, "Reproducible results"):
 *  - the same bytes for WEFT_NUM_THREADS = 1, 2, 3, 5 and 8: the test
 *    re-executes itself (/proc/self/exe) once per thread count with
 *    WEFT_DET_CHILD set; the child evaluates every case and prints one hash
 *    of the result bytes per case; the parent compares the lists. Every
 *    other ISA variant the CPU runs (forced with WEFT_ISA) gives the same
 *    bytes;
 *  - the same bytes in this process as in the 1-thread child, and when 8
 *    threads evaluate the cases at once (their own graphs and one shared set
 *    of graphs; default stream and private streams; wf_eval and
 *    wf_async_eval);
 *  - batch invariance: row i of softmax, logsumexp, layer_norm and rms_norm
 *    over a batch of 64 rows has the bytes of the same row in a batch of 7
 *    and of 1, and of the same row taken from a transposed layout.
 * Sizes split across threads in every build (smaller under sanitizers).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/vmath.h"
#include "child_process.h"
#include "harness.h"

#if defined(__SANITIZE_THREAD__)
enum { ROWS = 512, COLS = 256, FLAT = 1 << 17 };
#elif defined(WF_TEST_SLOW_BUILD) /* ASan, coverage */
enum { ROWS = 1024, COLS = 512, FLAT = 1 << 20 };
#else
enum { ROWS = 4096, COLS = 1024, FLAT = 1 << 24 };
#endif

enum { MAX_CASES = 96, MAX_LINE = 128, CONCURRENT_THREADS = 8 };

/* ---------------------------------------------------------------- inputs */

/* Values in [-2, 2) from a fixed xorshift sequence. */
static float *det_values(int64_t n, uint32_t seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    uint32_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v[i] = (float)(s >> 8) * 0x1p-22f - 2.0f;
    }
    return v;
}

typedef struct det_inputs {
    wf_array *x;      /* ROWS x COLS float32 */
    wf_array *xt;     /* its transposed view */
    wf_array *near1;  /* 1 + x / 4096: products that stay finite */
    wf_array *x16;    /* x as float16 */
    wf_array *xi;     /* int32 */
    wf_array *flat;   /* FLAT float32 */
    wf_array *flat1;  /* 1 + flat / 2^20 */
    wf_array *tall;   /* flat as (FLAT / 4) x 4 */
    wf_array *odd;    /* flat[5 : 3 FLAT / 4 + 77]: a length of no power of 2 */
    wf_array *inner;  /* x[1 : ROWS - 2, 2 : COLS - 3]: a strided view */
    wf_array *w, *b;  /* COLS */
} det_inputs;

static wf_array *from_values(int64_t rows, int64_t cols, uint32_t seed)
{
    float *v = det_values(cols > 0 ? rows * cols : rows, seed);
    const int64_t shape[2] = {rows, cols};
    wf_array *a = wf_array_from_data(v, shape, cols > 0 ? 2 : 1, WF_DTYPE_F32);
    free(v);
    return a;
}

/* near = 1 + a * scale */
static wf_array *near_one(wf_array *a, double scale)
{
    wf_array *s = wf_scalar(scale, WF_DTYPE_F32), *one = wf_scalar(1.0, WF_DTYPE_F32);
    wf_array *m = wf_multiply(a, s);
    wf_array *r = wf_add(m, one);
    wf_release(s);
    wf_release(one);
    wf_release(m);
    return r;
}

static void inputs_make(det_inputs *in)
{
    in->x = from_values(ROWS, COLS, 11);
    in->xt = wf_transpose(in->x, NULL, 0);
    in->near1 = near_one(in->x, 1.0 / 4096);
    in->x16 = wf_astype(in->x, WF_DTYPE_F16);
    wf_array *scaled = near_one(in->x, 1000.0);
    in->xi = wf_astype(scaled, WF_DTYPE_I32);
    wf_release(scaled);
    in->flat = from_values(FLAT, 0, 23);
    in->flat1 = near_one(in->flat, 1.0 / (1 << 20));
    const int64_t tall[2] = {FLAT / 4, 4};
    in->tall = wf_reshape(in->flat, tall, 2);
    const int64_t o0[1] = {5}, o1[1] = {3 * (int64_t)FLAT / 4 + 77}, step1[2] = {1, 1};
    in->odd = wf_slice(in->flat, o0, o1, step1);
    const int64_t i0[2] = {1, 2}, i1[2] = {ROWS - 2, COLS - 3};
    in->inner = wf_slice(in->x, i0, i1, step1);
    in->w = from_values(COLS, 0, 31);
    in->b = from_values(COLS, 0, 37);
    wf_array *all[] = {in->x,    in->xt,    in->near1, in->x16, in->xi,  in->flat,
                       in->flat1, in->tall, in->odd,   in->inner, in->w, in->b};
    CHECK_OK(wf_eval(all, sizeof all / sizeof all[0]));
}

static void inputs_release(det_inputs *in)
{
    wf_array *all[] = {in->x,    in->xt,    in->near1, in->x16, in->xi,  in->flat,
                       in->flat1, in->tall, in->odd,   in->inner, in->w, in->b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        wf_release(all[i]);
}

/* ---------------------------------------------------------------- cases */

typedef struct det_cases {
    int n;
    const char *name[MAX_CASES];
    wf_array *out[MAX_CASES];
} det_cases;

static void add(det_cases *c, const char *name, wf_array *a)
{
    if (c->n < MAX_CASES) {
        c->name[c->n] = name;
        c->out[c->n++] = a;
    } else {
        wf_release(a);
    }
}

/* Every reduction kind over `a` along axis 0, axis 1 and all axes. */
static void add_reductions(det_cases *c, wf_array *a, const char *const names[3][8])
{
    static const int ax[2][1] = {{0}, {1}};
    for (int k = 0; k < 3; k++) {
        const int *axes = k < 2 ? ax[k] : NULL;
        const int naxes = k < 2 ? 1 : 0;
        add(c, names[k][0], wf_sum(a, axes, naxes, false));
        add(c, names[k][1], wf_mean(a, axes, naxes, false));
        add(c, names[k][2], wf_max(a, axes, naxes, false));
        add(c, names[k][3], wf_min(a, axes, naxes, false));
        add(c, names[k][4], wf_var(a, axes, naxes, false, 0));
        add(c, names[k][5], wf_std(a, axes, naxes, false, 1));
        add(c, names[k][6], wf_logsumexp(a, axes, naxes, false));
    }
}

static const char *const x_names[3][8] = {
    {"x sum0", "x mean0", "x max0", "x min0", "x var0", "x std0", "x lse0"},
    {"x sum1", "x mean1", "x max1", "x min1", "x var1", "x std1", "x lse1"},
    {"x sum", "x mean", "x max", "x min", "x var", "x std", "x lse"}};
static const char *const xt_names[3][8] = {
    {"xt sum0", "xt mean0", "xt max0", "xt min0", "xt var0", "xt std0", "xt lse0"},
    {"xt sum1", "xt mean1", "xt max1", "xt min1", "xt var1", "xt std1", "xt lse1"},
    {"xt sum", "xt mean", "xt max", "xt min", "xt var", "xt std", "xt lse"}};

/* Builds every case (lazy) from the inputs. */
static void cases_build(det_cases *c, const det_inputs *in)
{
    memset(c, 0, sizeof *c);
    static const int ax0[1] = {0}, ax1[1] = {1};
    add_reductions(c, in->x, x_names);
    add_reductions(c, in->xt, xt_names);
    add(c, "near1 prod0", wf_prod(in->near1, ax0, 1, false));
    add(c, "near1 prod1", wf_prod(in->near1, ax1, 1, false));
    add(c, "near1 prod", wf_prod(in->near1, NULL, 0, false));
    add(c, "x argmax0", wf_argmax(in->x, 0, false));
    add(c, "x argmax1", wf_argmax(in->x, 1, false));
    add(c, "x argmin0", wf_argmin(in->x, 0, false));
    add(c, "xt argmin1", wf_argmin(in->xt, 1, false));
    add(c, "x softmax0", wf_softmax(in->x, ax0, 1));
    add(c, "x softmax1", wf_softmax(in->x, ax1, 1));
    add(c, "xt softmax0", wf_softmax(in->xt, ax0, 1));
    add(c, "xt softmax1", wf_softmax(in->xt, ax1, 1));
    add(c, "x softmax all", wf_softmax(in->x, (const int[]){0, 1}, 2));
    add(c, "x cumsum0", wf_cumsum(in->x, 0, false, true));
    add(c, "x cumsum1", wf_cumsum(in->x, 1, true, false));
    add(c, "xt cumsum1", wf_cumsum(in->xt, 1, false, true));
    add(c, "near1 cumprod0", wf_cumprod(in->near1, 0, false, true));
    add(c, "near1 cumprod1", wf_cumprod(in->near1, 1, false, true));
    add(c, "x layer_norm", wf_layer_norm(in->x, in->w, in->b, 1e-5));
    add(c, "x rms_norm", wf_rms_norm(in->x, in->w, 1e-5));
    add(c, "xt layer_norm", wf_layer_norm(in->xt, NULL, NULL, 1e-5));
    add(c, "x16 sum", wf_sum(in->x16, NULL, 0, false));
    add(c, "x16 mean0", wf_mean(in->x16, ax0, 1, false));
    add(c, "x16 softmax1", wf_softmax(in->x16, ax1, 1));
    add(c, "x16 softmax0", wf_softmax(in->x16, ax0, 1));
    add(c, "x16 rms_norm", wf_rms_norm(in->x16, NULL, 1e-5));
    add(c, "xi sum0", wf_sum(in->xi, ax0, 1, false));
    add(c, "xi sum", wf_sum(in->xi, NULL, 0, false));
    add(c, "flat sum", wf_sum(in->flat, NULL, 0, false));
    add(c, "flat mean", wf_mean(in->flat, NULL, 0, false));
    add(c, "flat max", wf_max(in->flat, NULL, 0, false));
    add(c, "flat var", wf_var(in->flat, NULL, 0, false, 0));
    add(c, "flat lse", wf_logsumexp(in->flat, NULL, 0, false));
    add(c, "flat softmax", wf_softmax(in->flat, NULL, 0));
    add(c, "flat cumsum", wf_cumsum(in->flat, 0, false, true));
    add(c, "flat argmax", wf_argmax(in->flat, 0, false));
    add(c, "flat1 prod", wf_prod(in->flat1, NULL, 0, false));
    add(c, "tall sum0", wf_sum(in->tall, ax0, 1, false));
    add(c, "tall var0", wf_var(in->tall, ax0, 1, false, 0));
    add(c, "tall lse0", wf_logsumexp(in->tall, ax0, 1, false));
    add(c, "tall softmax0", wf_softmax(in->tall, ax0, 1));
    add(c, "odd sum", wf_sum(in->odd, NULL, 0, false));
    add(c, "odd var", wf_var(in->odd, NULL, 0, false, 0));
    add(c, "odd lse", wf_logsumexp(in->odd, NULL, 0, false));
    add(c, "odd softmax", wf_softmax(in->odd, NULL, 0));
    add(c, "inner sum", wf_sum(in->inner, NULL, 0, false));
    add(c, "inner sum0", wf_sum(in->inner, ax0, 1, false));
    add(c, "inner mean1", wf_mean(in->inner, ax1, 1, false));
    add(c, "inner softmax0", wf_softmax(in->inner, ax0, 1));
    add(c, "inner lse1", wf_logsumexp(in->inner, ax1, 1, false));
}

static void cases_release(det_cases *c)
{
    for (int i = 0; i < c->n; i++)
        wf_release(c->out[i]);
    c->n = 0;
}

/* FNV-1a over the array's row-major bytes (0 on failure). */
static uint64_t bytes_hash(wf_array *a)
{
    const size_t n = wf_array_nbytes(a);
    unsigned char *buf = malloc(n + 1);
    uint64_t h = 0;
    if (buf != NULL && wf_array_copy_to(a, buf, n) == WF_OK) {
        h = 1469598103934665603ull;
        for (size_t i = 0; i < n; i++) {
            h ^= buf[i];
            h *= 1099511628211ull;
        }
    }
    free(buf);
    return h;
}

/* The hashes of cases first, first + step, ... as text lines "name
 * hash\n" (the other lines stay as they are). */
static void cases_hash(det_cases *c, char (*lines)[MAX_LINE], int first, int step)
{
    for (int i = first; i < c->n; i += step)
        snprintf(lines[i], MAX_LINE, "%s %016llx\n", c->name[i],
                 (unsigned long long)bytes_hash(c->out[i]));
}

/* ---------------------------------------------------------------- the child */

static int child_main(void)
{
    det_inputs in;
    inputs_make(&in);
    det_cases c;
    cases_build(&c, &in);
    char(*lines)[MAX_LINE] = calloc(MAX_CASES, MAX_LINE);
    cases_hash(&c, lines, 0, 1);
    for (int i = 0; i < c.n; i++)
        fputs(lines[i], stdout);
    free(lines);
    cases_release(&c);
    inputs_release(&in);
    fflush(stdout);
    return atomic_load(&wf_test_state()->checks_failed) == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------- the parent */

static char self_path[4096];

/* Runs this program as a child with WEFT_NUM_THREADS = threads and WEFT_ISA
 * = isa (NULL: unset); its output (at most `cap` bytes) goes to `out`.
 * Returns whether it exited 0. */
static bool run_child(int threads, const char *isa, char *out, size_t cap)
{
    char threads_var[64], isa_var[64];
    snprintf(threads_var, sizeof threads_var, "WEFT_NUM_THREADS=%d", threads);
    snprintf(isa_var, sizeof isa_var, "WEFT_ISA=%s", isa ? isa : "");
    const char *const changes[] = {threads_var, isa ? isa_var : "WEFT_ISA", "WEFT_DET_CHILD=1"};
    return wf_test_run_child(self_path, changes, 3, out, cap);
}

enum { OUT_CAP = MAX_CASES * MAX_LINE };
static char reference[OUT_CAP]; /* the 1-thread child's hashes, default variant */

/* Reports the first case whose line differs. */
static bool same_output(const char *want, const char *got, const char *what)
{
    if (strcmp(want, got) == 0)
        return true;
    const char *w = want, *g = got;
    while (*w && *w == *g) {
        w++;
        g++;
    }
    while (w > want && w[-1] != '\n')
        w--;
    const char *end = strchr(w, '\n');
    return wf_test_fail(__FILE__, __LINE__, "%s: differs from 1 thread at \"%.*s\"", what,
                        end ? (int)(end - w) : (int)strlen(w), w);
}

static void test_thread_counts(void)
{
    static const int counts[] = {1, 2, 3, 5, 8};
    static char got[OUT_CAP];
    if (!CHECK(run_child(1, NULL, reference, sizeof reference)))
        return;
    int lines = 0;
    for (const char *p = reference; *p; p++)
        lines += *p == '\n';
    CHECK(lines > 60); /* every case printed */
    CHECK(strstr(reference, " 0000000000000000") == NULL); /* none failed */
    for (size_t i = 1; i < sizeof counts / sizeof counts[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "WEFT_NUM_THREADS=%d", counts[i]);
        if (CHECK(run_child(counts[i], NULL, got, sizeof got)))
            same_output(reference, got, what);
    }
}

/* Each other ISA variant the CPU runs, forced, with 5 threads: the bytes of
 * the active variant with 1 thread (the variants do the same operations in
 * the same order; the active one is the thread-count test's). */
static void test_isa_variants(void)
{
    static char five[OUT_CAP];
    int ran = 0;
    for (int isa = 0; reference[0] != '\0' && isa < WF_VM_ISA_COUNT; isa++) {
        if (wf__vm_table(isa) == NULL || isa == wf__vm_isa_active())
            continue;
        const char *name = wf__vm_isa_name(isa);
        char what[64];
        snprintf(what, sizeof what, "WEFT_ISA=%s WEFT_NUM_THREADS=5", name);
        if (CHECK(run_child(5, name, five, sizeof five)))
            same_output(reference, five, what);
        ran++;
    }
    CHECK(ran >= (wf__vm_isa_best() > WF_VM_ISA_BASELINE ? 1 : 0));
}

/* This process (its own pool size) computes the child's bytes. */
static void test_in_process(void)
{
    if (reference[0] == '\0')
        return;
    det_inputs in;
    inputs_make(&in);
    det_cases c;
    cases_build(&c, &in);
    char(*lines)[MAX_LINE] = calloc(MAX_CASES, MAX_LINE);
    cases_hash(&c, lines, 0, 1);
    char *all = calloc(1, OUT_CAP);
    for (int i = 0; i < c.n; i++)
        strcat(all, lines[i]);
    same_output(reference, all, "in process");
    free(all);
    free(lines);
    cases_release(&c);
    inputs_release(&in);
}

/* ---------------------------------------------------------------- concurrency */

/* Each worker evaluates every STEP-th case (from its index mod STEP), so
 * that every case runs on several threads at once. */
enum { STEP = 4 };

typedef struct worker {
    const det_inputs *in;
    det_cases *shared; /* evaluate these (built by main) instead of own graphs */
    int first;         /* its first case */
    int mode;          /* bit 0: private stream; bit 1: wf_async_eval first */
    pthread_barrier_t *start;
    char (*lines)[MAX_LINE];
    int n;
    wf_status status;
} worker;

static void *worker_main(void *p)
{
    worker *w = p;
    wf_stream *s = NULL;
    if (w->mode & 1) {
        s = wf_stream_new();
        wf_stream_push(s);
    }
    det_cases own, *c = w->shared;
    if (c == NULL) {
        cases_build(&own, w->in);
        c = &own;
    }
    wf_array *mine[MAX_CASES];
    size_t n = 0;
    for (int i = w->first; i < c->n; i += STEP)
        mine[n++] = c->out[i];
    pthread_barrier_wait(w->start);
    w->status = (w->mode & 2) ? wf_async_eval(mine, n) : WF_OK;
    if (w->status == WF_OK)
        w->status = wf_eval(mine, n);
    cases_hash(c, w->lines, w->first, STEP);
    w->n = c->n;
    if (c == &own)
        cases_release(&own);
    if (s != NULL) {
        wf_stream_pop();
        wf_stream_synchronize(s);
        wf_stream_release(s);
    }
    return NULL;
}

static void run_workers(const det_inputs *in, det_cases *shared, const char *what)
{
    worker w[CONCURRENT_THREADS];
    pthread_t t[CONCURRENT_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, CONCURRENT_THREADS);
    for (int i = 0; i < CONCURRENT_THREADS; i++) {
        w[i] = (worker){in,     shared, i % STEP, (i / STEP) % 2 + 2 * (i % 2),
                        &start, calloc(MAX_CASES, MAX_LINE), 0, WF_OK};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < CONCURRENT_THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_OK(w[i].status);
        const char *ref = reference; /* its line k */
        int differ = 0;
        for (int k = 0; k < w[i].n; k++) {
            const char *end = strchr(ref, '\n');
            if (end == NULL)
                break;
            const size_t len = (size_t)(end - ref) + 1;
            if (k % STEP == w[i].first &&
                (strlen(w[i].lines[k]) != len || memcmp(ref, w[i].lines[k], len) != 0) &&
                differ++ == 0)
                wf_test_fail(__FILE__, __LINE__, "%s, thread %d (mode %d): first at %.*s", what,
                             i, w[i].mode, (int)len - 1, w[i].lines[k]);
            ref = end + 1;
        }
        CHECK_EQ_INT(differ, 0);
        free(w[i].lines);
    }
    pthread_barrier_destroy(&start);
}

static void test_concurrent_evaluation(void)
{
    if (reference[0] == '\0')
        return;
    det_inputs in;
    inputs_make(&in);
    run_workers(&in, NULL, "own graphs");
    det_cases shared;
    cases_build(&shared, &in);
    run_workers(&in, &shared, "shared graphs");
    cases_release(&shared);
    inputs_release(&in);
}

/* ---------------------------------------------------------------- batch invariance */

/* The bytes of a float32 result (NULL if it failed); the caller frees them.
 * Each result is copied out once: rows are compared in host memory. */
static unsigned char *result_bytes(wf_array *a)
{
    unsigned char *all = malloc(wf_array_nbytes(a));
    if (all != NULL && wf_array_copy_to(a, all, wf_array_nbytes(a)) != WF_OK) {
        free(all);
        return NULL;
    }
    return all;
}

enum { OP_SOFTMAX, OP_LSE, OP_LAYER_NORM, OP_RMS_NORM, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"softmax", "logsumexp", "layer_norm",
                                               "rms_norm"};

/* op over the last axis of a (rows x d) batch; logsumexp keeps the dim so
 * that every op's row is d or 1 values wide. */
static wf_array *row_op(int op, wf_array *x, wf_array *w, wf_array *b)
{
    const int last[1] = {1};
    switch (op) {
    case OP_SOFTMAX: return wf_softmax(x, last, 1);
    case OP_LSE: return wf_logsumexp(x, last, 1, true);
    case OP_LAYER_NORM: return wf_layer_norm(x, w, b, 1e-5);
    default: return wf_rms_norm(x, w, 1e-5);
    }
}

static void check_batches(int64_t d)
{
    enum { BIG = 64, MID = 7, ONE_ROW = 3 };
    float *v = det_values(BIG * d, (uint32_t)d);
    float *vt = malloc((size_t)(BIG * d) * sizeof *vt);
    for (int64_t r = 0; r < BIG; r++)
        for (int64_t k = 0; k < d; k++)
            vt[k * BIG + r] = v[r * d + k];
    const int64_t s64[2] = {BIG, d}, s7[2] = {MID, d}, s1[2] = {1, d}, st[2] = {d, BIG};
    wf_array *x64 = wf_array_from_data(v, s64, 2, WF_DTYPE_F32);
    wf_array *x7 = wf_array_from_data(v, s7, 2, WF_DTYPE_F32);
    wf_array *x1 = wf_array_from_data(v + ONE_ROW * d, s1, 2, WF_DTYPE_F32);
    wf_array *cols = wf_array_from_data(vt, st, 2, WF_DTYPE_F32);
    wf_array *xT = wf_transpose(cols, NULL, 0); /* x64's values, column-major */
    wf_array *w = from_values(d, 0, 41), *b = from_values(d, 0, 43);
    for (int op = 0; op < OP_COUNT; op++) {
        const int64_t width = op == OP_LSE ? 1 : d;
        const size_t row_size = (size_t)width * sizeof(float);
        wf_array *out[4] = {row_op(op, x64, w, b), row_op(op, x7, w, b), row_op(op, x1, w, b),
                            row_op(op, xT, w, b)};
        unsigned char *o64 = result_bytes(out[0]), *o7 = result_bytes(out[1]);
        unsigned char *o1 = result_bytes(out[2]), *oT = result_bytes(out[3]);
        if (CHECK(o64 && o7 && o1 && oT)) {
            for (int64_t r = 0; r < MID; r++)
                if (memcmp(o64 + r * row_size, o7 + r * row_size, row_size) != 0)
                    wf_test_fail(__FILE__, __LINE__, "%s d=%lld: row %lld differs, batch 64 vs 7",
                                 op_names[op], (long long)d, (long long)r);
            if (memcmp(o64 + ONE_ROW * row_size, o1, row_size) != 0)
                wf_test_fail(__FILE__, __LINE__, "%s d=%lld: batch 1 differs from batch 64",
                             op_names[op], (long long)d);
            for (int64_t r = 0; r < BIG; r += 9)
                if (memcmp(o64 + r * row_size, oT + r * row_size, row_size) != 0)
                    wf_test_fail(__FILE__, __LINE__, "%s d=%lld: row %lld of a transposed layout",
                                 op_names[op], (long long)d, (long long)r);
        }
        free(o64);
        free(o7);
        free(o1);
        free(oT);
        for (int i = 0; i < 4; i++)
            wf_release(out[i]);
    }
    wf_array *all[] = {x64, x7, x1, cols, xT, w, b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        wf_release(all[i]);
    free(v);
    free(vt);
}

/* Short rows, rows of one leaf, and rows of many leaves (computed in
 * parallel when alone). */
static void test_batch_invariance(void)
{
    check_batches(1000);
    check_batches(4096);
    check_batches(40000);
}

int main(void)
{
    if (getenv("WEFT_DET_CHILD") != NULL)
        return child_main();
    if (!wf_test_self_path(self_path, sizeof self_path)) {
        printf("cannot read /proc/self/exe\n");
        return 1;
    }
    RUN_TEST(test_thread_counts); /* children first: no threads of ours yet */
    RUN_TEST(test_isa_variants);
    RUN_TEST(test_in_process);
    RUN_TEST(test_concurrent_evaluation);
    RUN_TEST(test_batch_invariance);
    return TEST_SUMMARY();
}
