/* Random numbers inside compiled functions: a draw from the thread's default
 * key is implicit state of each call (read and advanced on the calling
 * thread), so compiled code gives fresh numbers per call and the very bits
 * uncompiled code gives for the same key sequence, whichever thread traced;
 * with shapeless replay, CSE, nesting, grad and vmap. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/array.h"
#include "harness.h"
#include "prim/random.h"
#include "weft.h"

/* ------------------------------------------------------------ helpers */

static wf_array *ramp(int64_t n, double scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(scale * (double)(i % 89) / 89.0 + 0.1);
    wf_array *a = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    free(v);
    return a;
}

/* Bit-for-bit equality of two arrays of the same dtype and shape. */
static bool same_bits(wf_array *a, wf_array *b)
{
    if (!a || !b || wf_array_dtype(a) != wf_array_dtype(b) ||
        wf_array_nbytes(a) != wf_array_nbytes(b))
        return false;
    size_t n = wf_array_nbytes(a);
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    bool same = wf_array_copy_to(a, x, n) == WF_OK && wf_array_copy_to(b, y, n) == WF_OK &&
                memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

static wf_array *call1(wf_fn *f, wf_array *x)
{
    wf_array *out[1];
    size_t n = 1;
    if (wf_fn_call(f, &x, 1, out, &n) != WF_OK)
        return NULL;
    return out[0];
}

static wf_compile_stats stats_of(wf_fn *f)
{
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(f, &s));
    return s;
}

/* The next number of this thread's default key stream (advances it). */
static double next_default_draw(void)
{
    wf_array *u = wf_random_uniform(NULL, 0, WF_DTYPE_F64, 0.0, 1.0, NULL);
    double v = -1;
    CHECK_OK(wf_array_item(u, &v));
    wf_release(u);
    return v;
}

/* ------------------------------------------------------------ functions */

/* Dropout with keep probability 0.75 drawn on an array derived from x (so
 * it replays shapeless), then normal noise of x's shape: two draws. */
static wf_status dropout_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *keep = wf_add(wf_multiply(in[0], wf_scalar(0.0, WF_DTYPE_F32)),
                            wf_scalar(0.75, WF_DTYPE_F32));
    wf_array *mask = wf_random_bernoulli(keep, NULL, 0, NULL);
    wf_array *y = wf_keep(wf_divide(wf_multiply(in[0], wf_astype(mask, WF_DTYPE_F32)),
                                    wf_scalar(0.75, WF_DTYPE_F32)));
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

/* (dropout(x), uniform noise of x's shape, the same noise drawn again):
 * three draws, the last two with equal parameters (CSE must keep both). */
static wf_status noisy_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)payload;
    wf_status st = dropout_body(NULL, in, n, out, nout);
    if (st != WF_OK)
        return st;
    out[1] = wf_random_uniform(wf_array_shape(in[0]), wf_array_ndim(in[0]), WF_DTYPE_F32, -1.0,
                               1.0, NULL);
    out[2] = wf_random_uniform(wf_array_shape(in[0]), wf_array_ndim(in[0]), WF_DTYPE_F32, -1.0,
                               1.0, NULL);
    *nout = 3;
    return out[1] && out[2] ? WF_OK : wf_last_error();
}

static void call3(wf_fn *f, wf_array *x, wf_array **out)
{
    size_t n = 3;
    out[0] = out[1] = out[2] = NULL;
    CHECK_OK(wf_fn_call(f, &x, 1, out, &n));
}

static void release3(wf_array **a)
{
    for (int i = 0; i < 3; i++)
        wf_release(a[i]);
}

/* ------------------------------------------------------------ tests */

/* Fresh numbers every call, the same as uncompiled for the same seed, and
 * the thread's default key left where uncompiled calls leave it (the
 * tracing call included). Two equal draws stay two draws. */
static void test_default_key_draws_match_uncompiled(void)
{
    wf_array *x = ramp(1000, 2.0);
    wf_fn *f = wf_fn_new(noisy_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    enum { CALLS = 3 };
    wf_array *want[CALLS][3], *got[CALLS][3];
    wf_random_seed(1234);
    for (int c = 0; c < CALLS; c++)
        call3(f, x, want[c]);
    const double after_plain = next_default_draw();
    wf_random_seed(1234);
    for (int c = 0; c < CALLS; c++)
        call3(cf, x, got[c]); /* the first call traces */
    const double after_compiled = next_default_draw();
    CHECK(after_plain == after_compiled);
    for (int c = 0; c < CALLS; c++)
        for (int k = 0; k < 3; k++)
            if (!CHECK(same_bits(want[c][k], got[c][k])))
                fprintf(stderr, "    call %d output %d differs\n", c, k);
    CHECK(!same_bits(got[0][0], got[1][0])); /* a fresh mask per call */
    CHECK(!same_bits(got[1][1], got[2][1]));
    CHECK(!same_bits(got[0][1], got[0][2])); /* equal draws are not merged */
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, CALLS - 1);
    CHECK_EQ_INT(s.inline_calls, 0);
    for (int c = 0; c < CALLS; c++) {
        release3(want[c]);
        release3(got[c]);
    }
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(x);
}

/* An explicit key is a parameter as before: same numbers on every call. */
static wf_status keyed_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const wf_key *key = payload;
    wf_array *r = wf_random_normal(wf_array_shape(in[0]), wf_array_ndim(in[0]), WF_DTYPE_F32,
                                   0.0, 1.0, key);
    out[0] = wf_add(in[0], r);
    wf_release(r);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_explicit_key_is_a_parameter(void)
{
    wf_key key = wf_random_key(42);
    wf_fn *f = wf_fn_new(keyed_body, &key, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *x = ramp(64, 1.0);
    wf_random_seed(5);
    const double before = next_default_draw();
    wf_random_seed(5);
    wf_array *a = call1(cf, x), *b = call1(cf, x), *c = call1(f, x);
    CHECK(same_bits(a, b) && same_bits(a, c));
    CHECK(next_default_draw() == before); /* the default key was not touched */
    wf_release(a);
    wf_release(b);
    wf_release(c);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(x);
}

/* Another thread traces (with its own key); this thread's calls draw from
 * this thread's key and match its uncompiled calls. */
struct tracer {
    wf_fn *cf;
    wf_array *x;
    wf_array *out[3];
};

static void *trace_on_other_thread(void *arg)
{
    struct tracer *t = arg;
    wf_random_seed(999);
    call3(t->cf, t->x, t->out);
    wf_eval(t->out, 3);
    return NULL;
}

static void test_other_thread_traced(void)
{
    wf_array *x = ramp(300, 1.0);
    wf_fn *f = wf_fn_new(noisy_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    struct tracer t = {.cf = cf, .x = x};
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, trace_on_other_thread, &t), 0);
    pthread_join(th, NULL);
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_array *want[2][3], *got[2][3];
    wf_random_seed(77);
    call3(f, x, want[0]);
    call3(f, x, want[1]);
    wf_random_seed(77);
    call3(cf, x, got[0]);
    call3(cf, x, got[1]);
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    CHECK_EQ_INT(stats_of(cf).hits, 2);
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 3; k++)
            CHECK(same_bits(want[c][k], got[c][k]));
    /* The tracer got its own thread's numbers, not this thread's. */
    wf_random_seed(999);
    wf_array *theirs[3];
    call3(f, x, theirs);
    for (int k = 0; k < 3; k++)
        CHECK(same_bits(theirs[k], t.out[k]) && !same_bits(theirs[k], got[0][k]));
    release3(theirs);
    release3(t.out);
    for (int c = 0; c < 2; c++) {
        release3(want[c]);
        release3(got[c]);
    }
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(x);
}

/* A waiter that gives up on a stuck trace traces for itself: each of the
 * two tracing calls replays its own trace (the draws it made on its own
 * thread), and later calls replay the kept one with their own keys. */
static atomic_int stuck_trace_may_finish;
static _Thread_local bool traces_stuck;

static wf_status stuck_noisy_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    while (traces_stuck && !atomic_load(&stuck_trace_may_finish))
        usleep(1000);
    return noisy_body(payload, in, n, out, nout);
}

static void *stuck_tracer(void *arg)
{
    struct tracer *t = arg;
    traces_stuck = true;
    wf_random_seed(999);
    call3(t->cf, t->x, t->out);
    wf_eval(t->out, 3);
    return NULL;
}

static void test_timed_out_waiter_draws_match_uncompiled(void)
{
    double bound = wf_compile_get_wait_timeout();
    CHECK_OK(wf_compile_set_wait_timeout(0.05));
    atomic_store(&stuck_trace_may_finish, 0);
    wf_array *x = ramp(300, 1.0);
    wf_fn *f = wf_fn_new(noisy_body, NULL, NULL);
    wf_fn *stuck = wf_fn_new(stuck_noisy_body, NULL, NULL);
    wf_fn *cf = wf_compile(stuck, NULL);
    struct tracer t = {.cf = cf, .x = x};
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, stuck_tracer, &t), 0);
    while (stats_of(cf).misses == 0) /* the other thread is tracing */
        usleep(1000);
    wf_array *got[2][3], *want[2][3], *theirs[3];
    wf_random_seed(77);
    call3(cf, x, got[0]); /* waits 50 ms, traces, stores its trace */
    atomic_store(&stuck_trace_may_finish, 1);
    pthread_join(th, NULL); /* the stuck trace finishes; its call replays it */
    call3(cf, x, got[1]);   /* the kept trace */
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.traces, 2);
    CHECK_EQ_INT(s.timeout_traces, 1);
    CHECK_EQ_INT(s.hits, 1);
    CHECK_EQ_INT(s.entries, 1);
    wf_random_seed(77);
    call3(f, x, want[0]);
    call3(f, x, want[1]);
    wf_random_seed(999);
    call3(f, x, theirs);
    for (int k = 0; k < 3; k++) {
        CHECK(same_bits(want[0][k], got[0][k]));
        CHECK(same_bits(want[1][k], got[1][k]));
        CHECK(same_bits(theirs[k], t.out[k]));
    }
    release3(theirs);
    release3(t.out);
    for (int c = 0; c < 2; c++) {
        release3(want[c]);
        release3(got[c]);
    }
    wf_fn_release(cf);
    wf_fn_release(stuck);
    wf_fn_release(f);
    wf_release(x);
    CHECK_OK(wf_compile_set_wait_timeout(bound));
}

/* Threads released together call one cold compiled function, each with its
 * own seed: one trace, and every thread gets its own uncompiled numbers. */
enum { RACERS = 4 };

struct racer {
    wf_fn *f, *cf;
    wf_array *x;
    pthread_barrier_t *start;
    uint64_t seed;
    bool same;
};

static void *race_cold_call(void *arg)
{
    struct racer *r = arg;
    wf_array *got[2][3], *want[2][3];
    wf_random_seed(r->seed);
    pthread_barrier_wait(r->start);
    call3(r->cf, r->x, got[0]);
    call3(r->cf, r->x, got[1]);
    wf_random_seed(r->seed);
    call3(r->f, r->x, want[0]);
    call3(r->f, r->x, want[1]);
    r->same = true;
    for (int c = 0; c < 2; c++) {
        for (int k = 0; k < 3; k++)
            r->same = r->same && same_bits(want[c][k], got[c][k]);
        release3(got[c]);
        release3(want[c]);
    }
    return NULL;
}

static void test_threads_racing_a_cold_trace(void)
{
    wf_array *x = ramp(2000, 1.0);
    wf_fn *f = wf_fn_new(noisy_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    struct racer r[RACERS];
    pthread_t th[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){.f = f, .cf = cf, .x = x, .start = &start, .seed = 500 + (uint64_t)i};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, race_cold_call, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < RACERS; i++)
        if (!CHECK(r[i].same))
            fprintf(stderr, "    thread %d got other numbers than uncompiled\n", i);
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, 2 * RACERS - 1);
    pthread_barrier_destroy(&start);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(x);
}

/* x * bernoulli(sigmoid(x)): a draw whose shape follows the input, with no
 * scalar operand (a scalar broadcast to a traced shape is captured as a
 * constant of that shape, which shapeless replay cannot re-shape yet). */
static wf_status gate_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *mask = wf_random_bernoulli(wf_sigmoid(in[0]), NULL, 0, NULL);
    wf_array *y = wf_keep(wf_multiply(in[0], wf_astype(mask, WF_DTYPE_F32)));
    wf_scope_end();
    out[0] = y;
    *nout = 1;
    return y ? WF_OK : wf_last_error();
}

/* A shapeless trace of a draw replays for every shape; a fixed-shape draw
 * from the default key is refused at compile time. */
static wf_status fixed_shape_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    (void)payload;
    (void)n;
    const int64_t shape[1] = {4};
    wf_array *r = wf_random_uniform(shape, 1, WF_DTYPE_F32, 0.0, 1.0, NULL);
    out[0] = wf_add(in[0], r);
    wf_release(r);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_shapeless(void)
{
    wf_fn *f = wf_fn_new(gate_body, NULL, NULL);
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *cf = wf_compile(f, &o);
    const int64_t sizes[] = {16, 33, 1000, 7};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        wf_array *x = ramp(sizes[i], 3.0);
        wf_random_seed(100 + i);
        wf_array *want = call1(f, x);
        wf_random_seed(100 + i);
        wf_array *got = call1(cf, x);
        CHECK(same_bits(want, got));
        wf_release(want);
        wf_release(got);
        wf_release(x);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);

    f = wf_fn_new(fixed_shape_body, NULL, NULL);
    cf = wf_compile(f, &o);
    wf_array *x = ramp(4, 1.0);
    CHECK(call1(cf, x) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "shapeless");
    CHECK_EQ_INT(stats_of(cf).entries, 0);
    wf_fn_release(cf);
    cf = wf_compile(f, NULL); /* with shapes it compiles */
    wf_random_seed(3);
    wf_array *want = call1(f, x);
    wf_random_seed(3);
    wf_array *got = call1(cf, x);
    CHECK(same_bits(want, got));
    wf_release(want);
    wf_release(got);
    wf_release(x);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* The number of draws depends on the traced shape: each trace records its
 * own. Here: one uniform per element of the first dimension. */
static wf_status varying_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *acc = in[0];
    for (int64_t i = 0; i < wf_array_shape(in[0])[0]; i++)
        acc = wf_add(acc, wf_random_uniform(NULL, 0, WF_DTYPE_F32, 0.0, 1.0, NULL));
    wf_array *y = wf_keep(wf_multiply(acc, wf_scalar(1.0, WF_DTYPE_F32)));
    wf_scope_end();
    out[0] = y;
    *nout = 1;
    return y ? WF_OK : wf_last_error();
}

static void test_draw_count_per_trace(void)
{
    wf_fn *f = wf_fn_new(varying_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *xs[3] = {ramp(1, 1.0), ramp(3, 1.0), ramp(2, 1.0)};
    wf_array *want[6], *got[6];
    wf_random_seed(8);
    for (int c = 0; c < 6; c++)
        want[c] = call1(f, xs[c % 3]);
    const double plain_next = next_default_draw();
    wf_random_seed(8);
    for (int c = 0; c < 6; c++)
        got[c] = call1(cf, xs[c % 3]);
    CHECK(next_default_draw() == plain_next);
    for (int c = 0; c < 6; c++) {
        CHECK(same_bits(want[c], got[c]));
        wf_release(want[c]);
        wf_release(got[c]);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 3);
    for (int i = 0; i < 3; i++)
        wf_release(xs[i]);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* wf_random_seed inside the function: each call reseeds this thread's key
 * between its draws, compiled or not. */
static wf_status reseeding_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *before = wf_random_normal(wf_array_shape(in[0]), 1, WF_DTYPE_F32, 0.0, 1.0, NULL);
    wf_random_seed(4242);
    wf_array *after = wf_random_normal(wf_array_shape(in[0]), 1, WF_DTYPE_F32, 0.0, 1.0, NULL);
    wf_array *y = wf_keep(wf_add(wf_add(in[0], before), wf_multiply(after, after)));
    wf_scope_end();
    out[0] = y;
    *nout = 1;
    return y ? WF_OK : wf_last_error();
}

static void test_reseeding_inside(void)
{
    wf_fn *f = wf_fn_new(reseeding_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *x = ramp(40, 1.0);
    wf_array *want[2], *got[2];
    wf_random_seed(1);
    want[0] = call1(f, x);
    want[1] = call1(f, x);
    const double plain_next = next_default_draw();
    wf_random_seed(1);
    got[0] = call1(cf, x);
    got[1] = call1(cf, x);
    CHECK(next_default_draw() == plain_next);
    for (int c = 0; c < 2; c++) {
        CHECK(same_bits(want[c], got[c]));
        wf_release(want[c]);
        wf_release(got[c]);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_release(x);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* A compiled dropout called twice from another compiled function: the inner
 * calls are inlined into the outer trace with their draws, in order. */
static wf_status outer_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    wf_fn *inner = payload;
    wf_array *a = call1(inner, in[0]);
    wf_array *b = a ? call1(inner, a) : NULL;
    wf_release(a);
    out[0] = b;
    *nout = 1;
    return b ? WF_OK : wf_last_error();
}

static void test_nested_compiled_draws(void)
{
    wf_fn *inner_plain = wf_fn_new(dropout_body, NULL, NULL);
    wf_fn *inner = wf_compile(inner_plain, NULL);
    wf_fn *outer_plain = wf_fn_new(outer_body, inner_plain, NULL);
    wf_fn *outer_f = wf_fn_new(outer_body, inner, NULL);
    wf_fn *outer = wf_compile(outer_f, NULL);
    wf_array *x = ramp(500, 1.0);
    wf_array *want[2], *got[2];
    wf_random_seed(21);
    want[0] = call1(outer_plain, x);
    want[1] = call1(outer_plain, x);
    wf_random_seed(21);
    got[0] = call1(outer, x);
    got[1] = call1(outer, x);
    for (int c = 0; c < 2; c++) {
        CHECK(same_bits(want[c], got[c]));
        wf_release(want[c]);
        wf_release(got[c]);
    }
    CHECK_EQ_INT(stats_of(outer).traces, 1);
    CHECK_EQ_INT(stats_of(inner).inline_calls, 2);
    wf_release(x);
    wf_fn_release(outer);
    wf_fn_release(outer_f);
    wf_fn_release(outer_plain);
    wf_fn_release(inner);
    wf_fn_release(inner_plain);
}

/* sum(dropout(x) * x): grad of the compiled function, and the compiled
 * gradient, give the uncompiled gradient for the same key sequence. */
static wf_status loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    wf_array *d[1];
    size_t nd = 1;
    wf_status st = dropout_body(NULL, in, n, d, &nd);
    if (st != WF_OK)
        return st;
    wf_array *prod = wf_multiply(d[0], in[0]);
    out[0] = wf_sum(prod, NULL, 0, false);
    wf_release(prod);
    wf_release(d[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_grad_with_dropout(void)
{
    wf_fn *f = wf_fn_new(loss_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    const int argnum = 0;
    wf_fn *g = wf_grad(f, &argnum, 1), *gc = wf_grad(cf, &argnum, 1);
    wf_fn *cg = wf_compile(g, NULL);
    wf_array *x = ramp(2000, 1.0);
    wf_array *want[2], *of_compiled[2], *compiled[2];
    wf_random_seed(55);
    want[0] = call1(g, x);
    want[1] = call1(g, x);
    const double plain_next = next_default_draw();
    wf_random_seed(55);
    of_compiled[0] = call1(gc, x);
    of_compiled[1] = call1(gc, x);
    CHECK(next_default_draw() == plain_next);
    uint64_t fused_before = stats_of(cg).fused_kernels_run;
    wf_random_seed(55);
    compiled[0] = call1(cg, x);
    compiled[1] = call1(cg, x);
    wf_eval(compiled, 2);
    CHECK(next_default_draw() == plain_next);
    CHECK(stats_of(cg).fused_kernels_run > fused_before); /* not a silent fallback */
    CHECK(!same_bits(want[0], want[1])); /* the masks differ between calls */
    for (int c = 0; c < 2; c++) {
        CHECK(same_bits(want[c], of_compiled[c]));
        CHECK(same_bits(want[c], compiled[c]));
        wf_release(want[c]);
        wf_release(of_compiled[c]);
        wf_release(compiled[c]);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    CHECK_EQ_INT(stats_of(cg).traces, 1);
    CHECK_EQ_INT(stats_of(cg).inline_calls, 0);
    /* Forward mode through the compiled function: the mask has no tangent. */
    wf_array *tangent = wf_ones_like(x), *outs[2][1], *tans[2][1];
    wf_fn *fns[2] = {f, cf};
    for (int k = 0; k < 2; k++) {
        size_t n = 1;
        wf_random_seed(56);
        CHECK_OK(wf_jvp(fns[k], &x, 1, &tangent, outs[k], tans[k], &n));
    }
    CHECK(same_bits(outs[0][0], outs[1][0]) && same_bits(tans[0][0], tans[1][0]));
    for (int k = 0; k < 2; k++) {
        wf_release(outs[k][0]);
        wf_release(tans[k][0]);
    }
    wf_release(tangent);
    wf_release(x);
    wf_fn_release(cg);
    wf_fn_release(gc);
    wf_fn_release(g);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* vmap of a compiled function with bernoulli and categorical draws: the
 * same bits as vmap of the uncompiled function. */
static wf_status sample_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *p = wf_sigmoid(in[0]);
    wf_array *mask = wf_keep(wf_random_bernoulli(p, NULL, 0, NULL));
    wf_array *pick = wf_keep(wf_random_categorical(in[0], -1, NULL));
    wf_scope_end();
    out[0] = mask;
    out[1] = pick;
    *nout = 2;
    return mask && pick ? WF_OK : wf_last_error();
}

static void test_vmap_of_compiled_draws(void)
{
    wf_fn *f = wf_fn_new(sample_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_fn *vf = wf_vmap(f, NULL, 0, NULL, 0), *vcf = wf_vmap(cf, NULL, 0, NULL, 0);
    wf_fn *cvf = wf_compile(vf, NULL);
    float v[6 * 5 * 4];
    for (int i = 0; i < 120; i++)
        v[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    wf_array *x = wf_array_from_data(v, (int64_t[]){6, 5, 4}, 3, WF_DTYPE_F32);
    wf_array *want[2], *got[2];
    size_t nw = 2, ng = 2;
    wf_random_seed(31);
    CHECK_OK(wf_fn_call(vf, &x, 1, want, &nw));
    wf_random_seed(31);
    CHECK_OK(wf_fn_call(vcf, &x, 1, got, &ng));
    CHECK_EQ_SIZE(ng, 2);
    for (size_t k = 0; k < nw && k < ng; k++) {
        CHECK(same_bits(want[k], got[k]));
        wf_release(got[k]);
    }
    for (int call = 0; call < 2; call++) { /* compile(vmap(f)): traced, then replayed */
        wf_random_seed(31);
        ng = 2;
        CHECK_OK(wf_fn_call(cvf, &x, 1, got, &ng));
        for (size_t k = 0; k < nw && k < ng; k++) {
            CHECK(same_bits(want[k], got[k]));
            wf_release(got[k]);
        }
    }
    for (size_t k = 0; k < nw; k++)
        wf_release(want[k]);
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    CHECK_EQ_INT(stats_of(cvf).traces, 1);
    wf_release(x);
    wf_fn_release(cvf);
    wf_fn_release(vcf);
    wf_fn_release(vf);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* Reading a drawn value while tracing is a clear error (a trace cannot hold
 * a value that differs per call); uncompiled, the same body runs. */
static wf_status reads_draw_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *u = wf_random_uniform(NULL, 0, WF_DTYPE_F32, 0.0, 1.0, NULL);
    double v = 0;
    wf_status st = wf_array_item(u, &v);
    wf_release(u);
    if (st != WF_OK)
        return st;
    wf_array *s = wf_scalar(v, WF_DTYPE_F32);
    out[0] = wf_add(in[0], s);
    wf_release(s);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_reading_a_draw_while_tracing(void)
{
    wf_fn *f = wf_fn_new(reads_draw_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *x = ramp(8, 1.0);
    CHECK(call1(cf, x) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_MISUSE);
    CHECK_EQ_INT(stats_of(cf).entries, 0);
    wf_array *plain = call1(f, x);
    CHECK_NOT_NULL(plain);
    wf_release(plain);
    wf_release(x);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* The keyed primitive checks what its kernel relies on: an int64 scalar
 * key first, a known kind, and the inputs of that kind. */
static void test_keyed_primitive_checks_its_inputs(void)
{
    wf_random_params p;
    memset(&p, 0, sizeof p);
    p.kind = WF_RANDOM_BERNOULLI;
    const int64_t packed = 7;
    wf_array *key = wf__array_from_data(&packed, NULL, 0, WF_DTYPE_I64);
    wf_array *prob = ramp(4, 0.5), *args[2] = {prob, key};
    CHECK_NULL_WITH(wf__node_new(&wf__prim_random_keyed, &p, args, 2), WF_ERR_INTERNAL);
    CHECK_NULL_WITH(wf__node_new(&wf__prim_random_keyed, &p, args, 0), WF_ERR_INTERNAL);
    args[0] = key;
    args[1] = prob;
    CHECK_NULL_WITH(wf__node_new(&wf__prim_random_keyed, &p, args, 1), WF_ERR_INTERNAL);
    p.kind = 99;
    CHECK_NULL_WITH(wf__node_new(&wf__prim_random_keyed, &p, args, 2), WF_ERR_INTERNAL);
    /* Well formed: the bits of bernoulli with that key. */
    p.kind = WF_RANDOM_BERNOULLI;
    wf_array *keyed = wf__node_new(&wf__prim_random_keyed, &p, args, 2);
    wf__random_key_unpack(packed, p.key);
    wf_array *plain = wf__node_new(&wf__prim_random_bernoulli, &p, &prob, 1);
    CHECK(same_bits(keyed, plain));
    wf__array_release(keyed);
    wf__array_release(plain);
    wf__array_release(key);
    wf_release(prob);
    wf_clear_error();
}

int main(void)
{
    RUN_TEST(test_default_key_draws_match_uncompiled);
    RUN_TEST(test_explicit_key_is_a_parameter);
    RUN_TEST(test_other_thread_traced);
    RUN_TEST(test_timed_out_waiter_draws_match_uncompiled);
    RUN_TEST(test_threads_racing_a_cold_trace);
    RUN_TEST(test_shapeless);
    RUN_TEST(test_draw_count_per_trace);
    RUN_TEST(test_reseeding_inside);
    RUN_TEST(test_nested_compiled_draws);
    RUN_TEST(test_grad_with_dropout);
    RUN_TEST(test_vmap_of_compiled_draws);
    RUN_TEST(test_reading_a_draw_while_tracing);
    RUN_TEST(test_keyed_primitive_checks_its_inputs);
    return TEST_SUMMARY();
}
