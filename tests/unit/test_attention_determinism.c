/*
 * test_attention_determinism: wf_scaled_dot_product_attention built inside a
 * larger graph (projections, a mask computed with a row mean, intermediates
 * released) gives the same bytes whatever the intra-op thread count and
 * however many threads evaluate it (issue 23, item 5).
 *
 * Key counts sit on both sides of every internal block: the kernel's key
 * block (128), the accumulators' width (8), GEMM's K and N blocks (256,
 * 512); query counts pick each query block size (14, 28, 42, 84 rows: a
 * function of the shape). With and without a mask, causal too.
 *  - WEFT_NUM_THREADS = 1, 2 and 8: this program runs itself as children;
 *  - 1, 2 and 8 evaluating threads, each on its own graph or all on one.
 * The mask's producer is where thread timing once leaked in: its input
 * laid out transposed was donated or not depending on whether another
 * consumer still held it, and its row mean summed in memory order;
 * test_donation_keeps_the_layout checks that shape deterministically.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

enum { DIM = 8, HEADS = 2, MAX_CASES = 64, LINE = 96 };

typedef struct att_case {
    int64_t lq, lk;
    bool masked, causal;
} att_case;

static att_case cases[MAX_CASES];
static int ncases;

static void cases_make(void)
{
    /* 2 heads: query blocks of 5 (all the queries) and 14 rows over every key
     * count; 28, 42 and 84 rows around the key block and the GEMM's blocks */
    static const int64_t keys[] = {1, 8, 9, 127, 128, 129, 256, 257, 512, 513, 1031};
    static const int64_t queries[] = {5, 300};
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            cases[ncases++] = (att_case){queries[q], keys[k], (k + q) % 2 == 0, k % 5 == 3};
    cases[ncases++] = (att_case){600, 9, true, false};
    cases[ncases++] = (att_case){600, 257, true, true};
    cases[ncases++] = (att_case){600, 513, false, false};
    cases[ncases++] = (att_case){700, 127, true, false};
    cases[ncases++] = (att_case){700, 129, true, true};
    cases[ncases++] = (att_case){1400, 129, true, false};
}

/* ---------------------------------------------------------------- the graph */

static wf_array *wave(int64_t rows, int64_t cols, double phase)
{
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = (float)(sin(phase + 0.37 * (double)i) + 0.25 * cos(0.011 * (double)i));
    const int64_t shape[2] = {rows, cols};
    wf_array *a = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    free(v);
    return a;
}

/* (HEADS, rows, DIM): x (rows, HEADS * DIM) split into heads. */
static wf_array *heads_of(wf_array *x, int64_t rows)
{
    const int64_t shape[3] = {rows, HEADS, DIM};
    const int perm[3] = {1, 0, 2};
    return wf_transpose(wf_reshape(x, shape, 3), perm, 3);
}

/* mask = (u - mean(u, last axis)) + side, u = t + r, t = 0.1 exp(m^T),
 * side = 1e-3 max(t): t is laid out transposed (exp over a transposed
 * view), r is not, and the mean reads u in memory order. Whether side was
 * computed before u (t then has no other holder) depends on who evaluates
 * what first: *side is returned as a root of its own. */
static wf_array *mask_of(const att_case *c, wf_array **side)
{
    wf_array *m = wave(c->lk, c->lq, 0.3), *r = wave(c->lq, c->lk, 1.1);
    wf_array *t = wf_multiply(wf_exp(wf_transpose(m, NULL, 0)), wf_scalar(0.1, WF_DTYPE_F32));
    wf_array *u = wf_add(t, r);
    const int last = -1;
    wf_array *centered = wf_subtract(u, wf_mean(u, &last, 1, true));
    *side = wf_multiply(wf_max(t, NULL, 0, false), wf_scalar(1e-3, WF_DTYPE_F32));
    return wf_add(centered, *side);
}

/* attention(q, k, v) of one case, in a scope; the result kept, and the
 * mask's side root (NULL without a mask). */
static wf_array *attention_of(const att_case *c, wf_array **side)
{
    *side = NULL;
    wf_scope_begin();
    wf_array *xq = wave(c->lq, HEADS * DIM, 0.1), *xk = wave(c->lk, HEADS * DIM, 0.5);
    wf_array *w = wave(HEADS * DIM, HEADS * DIM, 0.9);
    wf_array *q = heads_of(wf_matmul(xq, w), c->lq);
    wf_array *k = heads_of(wf_matmul(xk, w), c->lk);
    wf_array *v = heads_of(wf_tanh(xk), c->lk);
    wf_array *mask = c->masked ? mask_of(c, side) : NULL;
    wf_array *out =
        wf_keep(wf_scaled_dot_product_attention(q, k, v, 1.0 / sqrt(DIM), mask, c->causal));
    if (*side)
        wf_keep(*side);
    wf_scope_end(); /* the intermediates go: only the results hold them */
    return out;
}

static uint64_t bytes_hash(wf_array *a)
{
    const void *data = NULL;
    if (wf_array_data(a, &data) != WF_OK)
        return 0;
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < 4 * wf_array_size(a); i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void case_line(const att_case *c, wf_array *out, char *line)
{
    snprintf(line, LINE, "lq %lld lk %lld mask %d causal %d: %016llx\n", (long long)c->lq,
             (long long)c->lk, c->masked, c->causal, (unsigned long long)bytes_hash(out));
}

/* One line per case, each graph built and evaluated on this thread; with
 * side_first the mask's side root is evaluated before the result. */
static void all_lines(char (*lines)[LINE], bool side_first)
{
    for (int i = 0; i < ncases; i++) {
        wf_array *side, *out = attention_of(&cases[i], &side);
        if (side_first && side)
            CHECK_OK(wf_eval(&side, 1));
        case_line(&cases[i], out, lines[i]);
        wf_release(out);
        wf_release(side);
    }
}

static char reference[MAX_CASES][LINE];

/* Compares the lines filled in with the reference; returns how many. */
static int check_lines(char (*lines)[LINE], const char *what)
{
    int differ = 0, compared = 0;
    for (int i = 0; i < ncases; i++) {
        if (!lines[i][0])
            continue;
        compared++;
        if (strcmp(lines[i], reference[i]) != 0 && differ++ == 0)
            wf_test_fail(__FILE__, __LINE__, "%s: %.*s (want %.*s)", what,
                         (int)strcspn(lines[i], "\n"), lines[i],
                         (int)strcspn(reference[i], "\n"), reference[i]);
    }
    CHECK_EQ_INT(differ, 0);
    return compared;
}

/* ---------------------------------------------------------------- pool sizes */

static int child_main(void)
{
    char (*lines)[LINE] = calloc(MAX_CASES, LINE);
    all_lines(lines, false);
    for (int i = 0; i < ncases; i++)
        fputs(lines[i], stdout);
    free(lines);
    return 0;
}

/* This program as a child with WEFT_NUM_THREADS = threads; its lines. */
static bool run_child(int threads, char (*lines)[LINE])
{
    char threads_var[64];
    snprintf(threads_var, sizeof threads_var, "WEFT_NUM_THREADS=%d", threads);
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 3, sizeof *env);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "WEFT_NUM_THREADS=", 17) != 0)
            env[m++] = environ[i];
    env[m++] = threads_var;
    env[m++] = "WEFT_ATTENTION_CHILD=1";
    int fds[2];
    if (pipe(fds) != 0) {
        free(env);
        return false;
    }
    char *const argv[] = {"/proc/self/exe", NULL};
    const pid_t pid = fork();
    if (pid == 0) { /* only async-signal-safe calls until exec */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    int got = 0;
    while (in && got < ncases && fgets(lines[got], LINE, in))
        got++;
    if (in)
        fclose(in);
    free(env);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return false;
    return got == ncases && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_pool_sizes(void)
{
    static const int counts[] = {1, 2, 8};
    char (*lines)[LINE] = calloc(MAX_CASES, LINE);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (!CHECK(run_child(counts[i], i == 0 ? reference : lines)))
            break;
        char what[64];
        snprintf(what, sizeof what, "WEFT_NUM_THREADS=%d", counts[i]);
        if (i > 0)
            CHECK_EQ_INT(check_lines(lines, what), ncases);
    }
    free(lines);
}

/* ---------------------------------------------------------------- evaluating threads */

typedef struct evaluator {
    wf_array **shared, **shared_sides; /* every case's roots, evaluated by all; NULL: own */
    int first, step;                   /* own graphs: cases first, first + step, ... */
    bool side_first;                   /* evaluate the side roots first */
    pthread_barrier_t *start;
    char (*lines)[LINE];
} evaluator;

static void *evaluator_main(void *arg)
{
    evaluator *e = arg;
    wf_array *own[MAX_CASES], *own_sides[MAX_CASES];
    wf_array **outs = e->shared, **sides = e->shared_sides;
    if (!outs) {
        for (int i = e->first; i < ncases; i += e->step)
            own[i] = attention_of(&cases[i], &own_sides[i]);
        outs = own;
        sides = own_sides;
    }
    pthread_barrier_wait(e->start);
    for (int i = e->first; i < ncases; i += e->step) {
        if (e->side_first && sides[i])
            CHECK_OK(wf_eval(&sides[i], 1));
        case_line(&cases[i], outs[i], e->lines[i]);
    }
    if (!e->shared)
        for (int i = e->first; i < ncases; i += e->step) {
            wf_release(own[i]);
            wf_release(own_sides[i]);
        }
    return NULL;
}

/* Each thread evaluates its share of the cases on graphs of its own, or
 * every case of one shared graph; half of them the side roots first. */
static void run_evaluators(int threads, bool shared_graph)
{
    wf_array *shared[MAX_CASES], *sides[MAX_CASES];
    if (shared_graph)
        for (int i = 0; i < ncases; i++)
            shared[i] = attention_of(&cases[i], &sides[i]);
    evaluator e[8];
    pthread_t t[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        e[i] = (evaluator){shared_graph ? shared : NULL,
                           shared_graph ? sides : NULL,
                           shared_graph ? 0 : i,
                           shared_graph ? 1 : threads,
                           i % 2 == 1,
                           &start,
                           calloc(MAX_CASES, LINE)};
        pthread_create(&t[i], NULL, evaluator_main, &e[i]);
    }
    int compared = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        char what[96];
        snprintf(what, sizeof what, "%d evaluating threads, %s, thread %d", threads,
                 shared_graph ? "one shared graph" : "a graph each", i);
        compared += check_lines(e[i].lines, what);
        free(e[i].lines);
    }
    CHECK_EQ_INT(compared, shared_graph ? threads * ncases : ncases);
    pthread_barrier_destroy(&start);
    if (shared_graph)
        for (int i = 0; i < ncases; i++) {
            wf_release(shared[i]);
            wf_release(sides[i]);
        }
}

static void test_evaluating_threads(void)
{
    if (reference[0][0] == '\0') /* the children failed */
        return;
    char (*lines)[LINE] = calloc(MAX_CASES, LINE);
    all_lines(lines, false);
    CHECK_EQ_INT(check_lines(lines, "this process, one thread"), ncases);
    all_lines(lines, true);
    CHECK_EQ_INT(check_lines(lines, "this process, one thread, the mask's side root first"),
                 ncases);
    free(lines);
    run_evaluators(2, false);
    run_evaluators(8, false);
    run_evaluators(2, true);
    run_evaluators(8, true);
}

/* ---------------------------------------------------------------- donation */

/* u = exp(m^T) + r laid out like a fresh result whether or not exp(m^T)
 * was donated to it (it is when nothing else holds it), so the row sums of
 * u have the same bits either way. */
static void test_donation_keeps_the_layout(void)
{
    uint64_t hashes[2];
    for (int held = 0; held < 2; held++) {
        wf_array *m = wave(300, 200, 0.3), *r = wave(200, 300, 1.1);
        wf_array *view = wf_transpose(m, NULL, 0);
        wf_array *t = wf_exp(view);
        wf_array *u = wf_add(t, r);
        if (!held) {
            wf_release(t);
            t = NULL;
        }
        const int last = -1;
        wf_array *s = wf_sum(u, &last, 1, false);
        hashes[held] = bytes_hash(s);
        wf_array *all[] = {m, r, view, t, u, s};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            wf_release(all[i]);
    }
    CHECK(hashes[0] == hashes[1]);
}

int main(void)
{
    cases_make();
    if (getenv("WEFT_ATTENTION_CHILD"))
        return child_main();
    RUN_TEST(test_pool_sizes); /* children first: no threads of ours yet */
    RUN_TEST(test_evaluating_threads);
    RUN_TEST(test_donation_keeps_the_layout);
    return TEST_SUMMARY();
}
