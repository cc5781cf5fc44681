/*
 * Transforms from many threads (DESIGN C1, C4, C6): 8 threads computing
 * gradients of different functions, and 8 sharing one grad(f), give the
 * single-threaded results; tracing state is per thread; a wf_fn released by
 * another thread during a call lives until the call ends; a payload
 * destructor may call weft; failing bodies leak nothing.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "core/array.h"
#include "core/graph_mode.h"
#include "transforms_util.h"

enum { THREADS = 8, ROUNDS = 12, N = 64 };

typedef wf_array *(*unary_fn)(wf_array *x);

static wf_array *log1p_square(wf_array *x)
{
    wf_array *s = wf_square(x);
    wf_array *y = wf_log1p(s);
    wf_release(s);
    return y;
}

static const unary_fn ops[THREADS] = {wf_tanh, wf_sin, wf_exp, wf_sigmoid,
                                      wf_square, log1p_square, wf_cos, wf_arctan};

typedef struct fn_payload {
    unary_fn op;
} fn_payload;

/* sum(op(x * w)) over (x, w): a function per op. */
static wf_status model_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const fn_payload *p = payload;
    wf_array *xw = wf_multiply(in[0], in[1]);
    wf_array *y = p->op(xw);
    out[0] = wf_sum(y, NULL, 0, false);
    wf_release(xw);
    wf_release(y);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static fn_payload payloads[THREADS];
static wf_array *inputs[2];
static double *reference[THREADS][2];

/* The gradients (of x and w) of function k, as doubles. */
static bool gradients(wf_fn *g, double **out)
{
    wf_array *grads[2] = {NULL, NULL};
    size_t n = 2;
    bool ok = wf_fn_call(g, inputs, 2, grads, &n) == WF_OK && n == 2;
    out[0] = ok ? tu_read(grads[0]) : NULL;
    out[1] = ok ? tu_read(grads[1]) : NULL;
    wf_release(grads[0]);
    wf_release(grads[1]);
    return ok && out[0] && out[1];
}

static wf_fn *grad_fn(int k)
{
    payloads[k].op = ops[k];
    wf_fn *f = wf_fn_new(model_call, &payloads[k], NULL);
    const int argnums[2] = {0, 1};
    wf_fn *g = wf_grad(f, argnums, 2);
    wf_fn_release(f);
    return g;
}

static bool same(const double *a, const double *b)
{
    for (int i = 0; i < N; i++)
        if (!(a[i] == b[i] || fabs(a[i] - b[i]) <= 1e-12 * (1 + fabs(b[i]))))
            return false;
    return true;
}

static void setup(void)
{
    const int64_t shape[1] = {N};
    inputs[0] = tu_input(shape, 1, -1, 1, 1, false);
    inputs[1] = tu_input(shape, 1, -1, 1, 2, false);
    for (int k = 0; k < THREADS; k++) {
        wf_fn *g = grad_fn(k);
        CHECK(gradients(g, reference[k]));
        wf_fn_release(g);
    }
}

static void teardown(void)
{
    for (int k = 0; k < THREADS; k++) {
        free(reference[k][0]);
        free(reference[k][1]);
    }
    wf_release(inputs[0]);
    wf_release(inputs[1]);
}

/* ---------------------------------------------------------------- different functions */

static atomic_int matches;
static pthread_barrier_t start;

static void *different_worker(void *arg)
{
    const int k = (int)(intptr_t)arg;
    wf_fn *g = grad_fn(k);
    pthread_barrier_wait(&start);
    for (int r = 0; r < ROUNDS; r++) {
        double *got[2];
        if (gradients(g, got) && same(got[0], reference[k][0]) && same(got[1], reference[k][1]))
            atomic_fetch_add(&matches, 1);
        free(got[0]);
        free(got[1]);
    }
    wf_fn_release(g);
    return NULL;
}

static void test_different_functions(void)
{
    atomic_store(&matches, 0);
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t t[THREADS];
    for (int k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, different_worker, (void *)(intptr_t)k);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    pthread_barrier_destroy(&start);
    CHECK_EQ_INT(atomic_load(&matches), THREADS * ROUNDS);
}

/* ---------------------------------------------------------------- one shared grad(f) */

static wf_fn *shared;

static void *shared_worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    for (int r = 0; r < ROUNDS; r++) {
        double *got[2];
        if (gradients(shared, got) && same(got[0], reference[0][0]) &&
            same(got[1], reference[0][1]))
            atomic_fetch_add(&matches, 1);
        free(got[0]);
        free(got[1]);
    }
    return NULL;
}

static void test_shared_grad_fn(void)
{
    atomic_store(&matches, 0);
    shared = grad_fn(0);
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t t[THREADS];
    for (int k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, shared_worker, NULL);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    pthread_barrier_destroy(&start);
    CHECK_EQ_INT(atomic_load(&matches), THREADS * ROUNDS);
    wf_fn_release(shared);
}

/* ---------------------------------------------------------------- per-thread state */

static atomic_int phase; /* 1: A is inside its trace; 2: B has checked */
static atomic_int a_grad_depth, b_grad_depth, b_keeps_graph;

static wf_status blocking_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    (void)n;
    atomic_store(&a_grad_depth, wf__graph_grad_depth());
    atomic_store(&phase, 1);
    while (atomic_load(&phase) != 2) /* B looks while A is tracing */
        sched_yield();
    out[0] = wf_sum(in[0], NULL, 0, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void *tracing_thread(void *arg)
{
    (void)arg;
    wf_fn *f = wf_fn_new(blocking_body, NULL, NULL), *g = wf_grad(f, NULL, 0);
    wf_array *dx = NULL;
    size_t n = 1;
    if (wf_fn_call(g, inputs, 1, &dx, &n) == WF_OK)
        wf_release(dx);
    wf_fn_release(g);
    wf_fn_release(f);
    return NULL;
}

static void *observer_thread(void *arg)
{
    (void)arg;
    while (atomic_load(&phase) != 1)
        sched_yield();
    atomic_store(&b_grad_depth, wf__graph_grad_depth());
    wf_array *y = wf_exp(inputs[0]);
    atomic_store(&b_keeps_graph, y->keep_graph);
    wf_release(y);
    atomic_store(&phase, 2);
    return NULL;
}

static void test_tracing_state_is_per_thread(void)
{
    atomic_store(&phase, 0);
    atomic_store(&b_keeps_graph, -1);
    pthread_t a, b;
    pthread_create(&a, NULL, tracing_thread, NULL);
    pthread_create(&b, NULL, observer_thread, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ_INT(atomic_load(&a_grad_depth), 1);
    CHECK_EQ_INT(atomic_load(&b_grad_depth), 0);
    CHECK_EQ_INT(atomic_load(&b_keeps_graph), 0);
    CHECK_EQ_INT(wf__graph_keep_depth(), 0);
}

/* ---------------------------------------------------------------- release mid-call */

static atomic_int entered, released, destructor_runs;
static pthread_t destructor_thread;

static void note_destructor(void *p)
{
    (void)p;
    destructor_thread = pthread_self();
    atomic_fetch_add(&destructor_runs, 1);
}

static wf_status waiting_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    atomic_store(&entered, 1);
    while (!atomic_load(&released))
        sched_yield();
    out[0] = wf_sum(wf_sin(in[0]), NULL, 0, false); /* the sin goes with the caller's scope */
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

typedef struct mid_call {
    wf_fn *g;
    wf_status status;
    double first;
} mid_call;

static void *caller_thread(void *arg)
{
    mid_call *m = arg;
    wf_scope_begin();
    wf_array *dx = NULL;
    size_t n = 1;
    m->status = wf_fn_call(m->g, inputs, 1, &dx, &n);
    double *d = m->status == WF_OK ? tu_read(dx) : NULL;
    m->first = d ? d[0] : NAN;
    free(d);
    wf_scope_end();
    return NULL;
}

static void test_release_during_call(void)
{
    atomic_store(&entered, 0);
    atomic_store(&released, 0);
    atomic_store(&destructor_runs, 0);
    wf_fn *f = wf_fn_new(waiting_body, NULL, note_destructor);
    mid_call m = {wf_grad(f, NULL, 0), WF_ERR_INTERNAL, NAN};
    wf_fn_release(f); /* the grad function holds f */
    pthread_t t;
    pthread_create(&t, NULL, caller_thread, &m);
    while (!atomic_load(&entered))
        sched_yield();
    wf_fn_release(m.g); /* the last user reference, while the call runs */
    CHECK_EQ_INT(atomic_load(&destructor_runs), 0);
    atomic_store(&released, 1);
    pthread_join(t, NULL);
    CHECK_OK(m.status);
    double x0;
    double *xv = tu_read(inputs[0]);
    x0 = xv[0];
    free(xv);
    CHECK_NEAR(m.first, cos(x0), 1e-14);
    CHECK_EQ_INT(atomic_load(&destructor_runs), 1);
    CHECK(pthread_equal(destructor_thread, t)); /* run when the call let go */
}

/* ---------------------------------------------------------------- destructor calling weft */

static atomic_int destructor_ok;

/* A payload whose destructor uses weft: evaluates exp(a) and releases a. */
typedef struct weft_payload {
    fn_payload fn; /* first: model_call reads it */
    wf_array *a;
} weft_payload;

static void weft_destructor(void *p)
{
    weft_payload *w = p;
    wf_scope_begin();
    wf_array *y = wf_sum(wf_exp(w->a), NULL, 0, false);
    double v = 0;
    if (y && wf_array_item(y, &v) == WF_OK && v > 0)
        atomic_store(&destructor_ok, 1);
    wf_scope_end();
    wf_release(w->a);
    free(w);
}

static void *release_on_thread(void *arg)
{
    wf_fn_release(arg);
    return NULL;
}

static void test_destructor_calls_weft(void)
{
    atomic_store(&destructor_ok, 0);
    const int64_t live = wf__arrays_live();
    weft_payload *w = malloc(sizeof *w);
    w->fn.op = wf_tanh;
    w->a = wf_retain(inputs[0]);
    wf_fn *f = wf_fn_new(model_call, w, weft_destructor);
    const int argnums[2] = {0, 1};
    wf_fn *g = wf_grad(f, argnums, 2);
    wf_fn_release(f);
    double *got[2];
    CHECK(gradients(g, got) && same(got[0], reference[0][0]));
    free(got[0]);
    free(got[1]);
    pthread_t t; /* the last release, and so the destructor, on another thread */
    pthread_create(&t, NULL, release_on_thread, g);
    pthread_join(t, NULL);
    CHECK_EQ_INT(atomic_load(&destructor_ok), 1);
    CHECK_EQ_INT(wf__arrays_live(), live);
}

/* ---------------------------------------------------------------- failures */

static wf_status flaky_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const int *round = payload;
    if (*round % 2) { /* a real error from an op */
        wf_array *bad = wf_reshape(in[0], (const int64_t[]){7}, 1);
        return bad ? WF_OK : wf_last_error();
    }
    out[0] = wf_sum(in[0], NULL, 0, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static atomic_int failures_seen, successes_seen;

static void *flaky_worker(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        int round = r;
        wf_fn *f = wf_fn_new(flaky_body, &round, NULL), *g = wf_value_and_grad(f, NULL, 0);
        wf_array *outs[2] = {NULL, NULL};
        size_t n = 2;
        wf_status st = wf_fn_call(g, inputs, 1, outs, &n);
        if (st == WF_ERR_SHAPE && strstr(wf_last_error_message(), "wf_reshape"))
            atomic_fetch_add(&failures_seen, 1);
        else if (st == WF_OK && n == 2)
            atomic_fetch_add(&successes_seen, 1);
        wf_release(outs[0]);
        wf_release(outs[1]);
        wf_fn_release(g);
        wf_fn_release(f);
    }
    return NULL;
}

static void test_failing_bodies(void)
{
    atomic_store(&failures_seen, 0);
    atomic_store(&successes_seen, 0);
    const int64_t live = wf__arrays_live();
    pthread_t t[THREADS];
    for (int k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, flaky_worker, NULL);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    CHECK_EQ_INT(atomic_load(&failures_seen), THREADS * ROUNDS / 2);
    CHECK_EQ_INT(atomic_load(&successes_seen), THREADS * ROUNDS / 2);
    CHECK_EQ_INT(wf__arrays_live(), live);
}

int main(void)
{
    setup();
    RUN_TEST(test_different_functions);
    RUN_TEST(test_shared_grad_fn);
    RUN_TEST(test_tracing_state_is_per_thread);
    RUN_TEST(test_release_during_call);
    RUN_TEST(test_destructor_calls_weft);
    RUN_TEST(test_failing_bodies);
    teardown();
    return TEST_SUMMARY();
}
