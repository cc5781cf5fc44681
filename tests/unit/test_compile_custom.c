/*
 * test_compile_custom: compiled transforms of custom functions and
 * checkpoints (issue 23, item 3). wf_compile(wf_grad(f)) and
 * wf_grad(wf_compile(f)), jvp and vmap too, where f goes through
 * wf_custom_function or wf_checkpoint: the cached tape shares the custom
 * function's rules, so the function really is compiled (one trace, no
 * inline call, cache hits after) and the user's rules still decide the
 * derivatives. On generated graphs with a custom function (or a
 * checkpoint) at a random node, shapeless (the vjp of a shapeless compiled
 * function), and from 8 threads at once.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"

/* ---------------------------------------------------------------- the custom op */

/* sin, with rules of its own: vjp ct cos x, jvp t cos x, vmap sin of the
 * batch. Each counts its calls, so a test can tell the rule ran. */
static atomic_int vjp_rule_calls, jvp_rule_calls, vmap_rule_calls;

static wf_status sin_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_sin(in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* (x, ct, y) -> ct cos x */
static wf_status sin_vjp(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    (void)payload;
    (void)n;
    atomic_fetch_add(&vjp_rule_calls, 1);
    wf_scope_begin();
    out[0] = wf_keep(wf_multiply(in[1], wf_cos(in[0])));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* (x, t) -> t cos x */
static wf_status sin_jvp(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    (void)payload;
    (void)n;
    atomic_fetch_add(&jvp_rule_calls, 1);
    wf_scope_begin();
    out[0] = wf_keep(wf_multiply(in[1], wf_cos(in[0])));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status sin_vmap(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    atomic_fetch_add(&vmap_rule_calls, 1);
    return sin_body(payload, in, n, out, nout);
}

static wf_fn *custom_sin, *checkpointed_sin;

static void custom_ops_make(void)
{
    wf_fn *body = wf_fn_new(sin_body, NULL, NULL), *vjp = wf_fn_new(sin_vjp, NULL, NULL);
    wf_fn *jvp = wf_fn_new(sin_jvp, NULL, NULL), *vmap = wf_fn_new(sin_vmap, NULL, NULL);
    custom_sin = wf_custom_function(body, vjp, jvp, vmap);
    checkpointed_sin = wf_checkpoint(body);
    wf_fn_release(body);
    wf_fn_release(vjp);
    wf_fn_release(jvp);
    wf_fn_release(vmap);
}

static wf_array *call_op(wf_fn *op, wf_array *x)
{
    wf_array *y = NULL;
    size_t n = 1;
    return wf_fn_call(op, &x, 1, &y, &n) == WF_OK ? y : NULL;
}

/* ---------------------------------------------------------------- helpers */

static wf_compile_stats stats_of(wf_fn *f)
{
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(f, &s));
    return s;
}

/* The compiled function was traced once, called twice, never inline. */
static void check_compiled(wf_fn *compiled, const char *what)
{
    const wf_compile_stats s = stats_of(compiled);
    if (s.traces != 1 || s.hits != 1 || s.inline_calls != 0)
        wf_test_fail(__FILE__, __LINE__, "%s: %llu traces, %llu hits, %llu inline calls", what,
                     (unsigned long long)s.traces, (unsigned long long)s.hits,
                     (unsigned long long)s.inline_calls);
}

static double max_relative_difference(wf_array *want, wf_array *got)
{
    wf_scope_begin();
    wf_array *scale = wf_add(wf_abs(want), wf_scalar(1.0, WF_DTYPE_F32));
    wf_array *m = wf_max(wf_divide(wf_abs(wf_subtract(want, got)), scale), NULL, 0, false);
    double worst = INFINITY;
    if (!m || wf_array_item(m, &worst) != WF_OK)
        worst = INFINITY;
    wf_scope_end();
    return worst;
}

static void check_same(wf_array *const *want, size_t nwant, wf_array *const *got, size_t ngot,
                       const char *what, uint64_t seed)
{
    if (!CHECK_EQ_SIZE(ngot, nwant))
        return;
    for (size_t i = 0; i < nwant; i++) {
        const double d = max_relative_difference(want[i], got[i]);
        if (!(d <= 1e-5))
            wf_test_fail(__FILE__, __LINE__, "%s, seed %llu, result %zu: relative difference %g",
                         what, (unsigned long long)seed, i, d);
    }
}

static void release_all(wf_array **a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wf_release(a[i]);
}

/* ---------------------------------------------------------------- generated graphs */

static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* A generated loss of x (a, b) and y (b): element-wise, broadcast and
 * reduction steps chosen by the seed, one of them the custom sin (odd
 * seeds) or the checkpointed sin (even seeds) of a random earlier value. */
static wf_status generated_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)n;
    const uint64_t seed = *(const uint64_t *)payload;
    uint64_t s = seed;
    wf_scope_begin();
    wf_array *values[24];
    int count = 0;
    values[count++] = in[0];
    values[count++] = wf_multiply(in[0], in[1]);
    const int steps = 5 + (int)(next_random(&s) % 10);
    const int custom_at = (int)(next_random(&s) % (uint64_t)steps);
    for (int k = 0; k < steps && count < 24; k++) {
        wf_array *a = values[next_random(&s) % (uint64_t)count];
        wf_array *b = values[next_random(&s) % (uint64_t)count];
        wf_array *r = NULL;
        if (k == custom_at) {
            r = call_op(seed % 2 ? custom_sin : checkpointed_sin, a);
            wf_array *published = r ? wf_add(r, wf_scalar(0, WF_DTYPE_F32)) : NULL;
            wf_release(r); /* call_op's reference; the scope holds the sum */
            r = published;
        } else {
            switch (next_random(&s) % 8) {
            case 0: r = wf_add(a, b); break;
            case 1: r = wf_subtract(a, b); break;
            case 2: r = wf_multiply(a, b); break;
            case 3: r = wf_tanh(a); break;
            case 4: r = wf_multiply(a, wf_scalar(1.25, WF_DTYPE_F32)); break;
            case 5: r = wf_add(a, wf_mean(b, (int[]){0}, 1, true)); break;
            case 6: r = wf_exp(wf_negative(wf_square(a))); break;
            default: r = wf_maximum(a, wf_scalar(0.1, WF_DTYPE_F32)); break;
            }
        }
        if (r)
            values[count++] = r;
    }
    wf_array *loss = wf_keep(wf_add(wf_sum(values[count - 1], NULL, 0, false),
                                    wf_sum(values[count / 2], NULL, 0, false)));
    wf_scope_end();
    out[0] = loss;
    *nout = 1;
    return loss ? WF_OK : wf_last_error();
}

static wf_array *random_array(uint64_t *s, const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((int)(next_random(s) % 2001) - 1000) / 700.0f;
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
    free(v);
    return a;
}

/* Calls f twice on (x, y); the second call's results. */
static size_t call_twice(wf_fn *f, wf_array *x, wf_array *y, wf_array **out)
{
    wf_array *in[2] = {x, y}, *first[4];
    size_t n = 4;
    if (!CHECK_OK(wf_fn_call(f, in, 2, first, &n)))
        return 0;
    release_all(first, n);
    n = 4;
    if (!CHECK_OK(wf_fn_call(f, in, 2, out, &n)))
        return 0;
    return n;
}

static void test_generated_graphs(void)
{
    const int argnums[2] = {0, 1};
    int rule_seeds = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 104729;
        const int64_t a = 1 + (int64_t)(next_random(&s) % 12), b = 1 + (int64_t)(next_random(&s) % 40);
        wf_array *x = random_array(&s, (int64_t[]){a, b}, 2), *y = random_array(&s, &b, 1);
        wf_fn *loss = wf_fn_new(generated_loss, &seed, NULL);
        wf_fn *grad = wf_value_and_grad(loss, argnums, 2);
        wf_fn *compiled_grad = wf_compile(grad, NULL); /* compile of vjp */
        wf_fn *compiled_loss = wf_compile(loss, NULL);
        wf_fn *grad_of_compiled = wf_value_and_grad(compiled_loss, argnums, 2); /* vjp of compile */
        wf_array *want[4], *got[4];
        const int rules_before = atomic_load(&vjp_rule_calls);
        const size_t nwant = call_twice(grad, x, y, want);
        rule_seeds += seed % 2 && atomic_load(&vjp_rule_calls) > rules_before;
        size_t ngot = call_twice(compiled_grad, x, y, got);
        check_same(want, nwant, got, ngot, "compile(value_and_grad(f))", seed);
        check_compiled(compiled_grad, "compile(value_and_grad(f))");
        release_all(got, ngot);
        ngot = call_twice(grad_of_compiled, x, y, got);
        check_same(want, nwant, got, ngot, "value_and_grad(compile(f))", seed);
        check_compiled(compiled_loss, "value_and_grad(compile(f))");
        release_all(got, ngot);
        release_all(want, nwant);
        wf_fn *fns[] = {grad_of_compiled, compiled_loss, compiled_grad, grad, loss};
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
            wf_fn_release(fns[i]);
        wf_release(x);
        wf_release(y);
    }
    CHECK(rule_seeds >= 10); /* odd seeds whose loss reaches the custom sin ran its rule */
}

/* ---------------------------------------------------------------- each transform */

/* loss(x) = sum(op(x) * x) with op the custom or the checkpointed sin
 * (payload): d/dx = cos x * x + sin x. */
static wf_status sin_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)n;
    wf_array *y = call_op(payload, in[0]);
    wf_array *p = y ? wf_multiply(y, in[0]) : NULL;
    out[0] = p ? wf_sum(p, NULL, 0, false) : NULL;
    wf_release(p);
    wf_release(y);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_array *ramp(int64_t n, double phase)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)sin(phase + 0.7 * (double)i);
    wf_array *a = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    free(v);
    return a;
}

/* cos x * x + sin x */
static wf_array *expected_grad(wf_array *x)
{
    wf_scope_begin();
    wf_array *g = wf_keep(wf_add(wf_multiply(wf_cos(x), x), wf_sin(x)));
    wf_scope_end();
    return g;
}

static void check_grad_value(wf_fn *g, wf_array *x, const char *what)
{
    wf_array *got = NULL, *want = expected_grad(x);
    size_t n = 1;
    if (CHECK_OK(wf_fn_call(g, &x, 1, &got, &n)))
        check_same(&want, 1, &got, n, what, 0);
    wf_release(got);
    wf_release(want);
}

static void test_compiled_grads_of_custom_and_checkpoint(void)
{
    wf_fn *ops[2] = {custom_sin, checkpointed_sin};
    for (int o = 0; o < 2; o++) {
        wf_fn *loss = wf_fn_new(sin_loss, ops[o], NULL);
        wf_fn *grad = wf_grad(loss, NULL, 0);
        /* Shapeless: the vjp of a compiled function (a shapeless compiled
         * gradient of a custom function is refused: its rules are the
         * user's, test_compile_shapeless covers the others). */
        wf_compile_options shapeless = wf_compile_options_default();
        shapeless.shapeless = true;
        wf_fn *cg = wf_compile(grad, NULL);
        wf_fn *cl = wf_compile(loss, &shapeless), *gc = wf_grad(cl, NULL, 0);
        const char *name = o ? "checkpoint" : "custom_function";
        for (int round = 0; round < 2; round++) {
            wf_array *x = ramp(64, 0.3);
            check_grad_value(cg, x, name);
            wf_release(x);
        }
        check_compiled(cg, "compile(grad(f))");
        for (int64_t len = 16; len <= 64; len *= 4) { /* shapeless: one trace, two shapes */
            wf_array *x = ramp(len, 0.9);
            check_grad_value(gc, x, name);
            wf_release(x);
        }
        check_compiled(cl, "grad(shapeless compile(f))");
        wf_fn *fns[] = {gc, cl, cg, grad, loss};
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
            wf_fn_release(fns[i]);
    }
}

/* jvp and vmap of a compiled function through the custom sin, and the
 * compiled jvp: the user's jvp and vmap rules run. */
static wf_status sin_of(void *payload, wf_array *const *in, size_t n, wf_array **out,
                        size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = call_op(custom_sin, in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status jvp_of_sin(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    size_t k = 1;
    wf_status st = wf_jvp(payload, in, 1, in + 1, &out[0], &out[1], &k);
    *nout = st == WF_OK ? 2 : 0;
    return st;
}

static void test_compiled_jvp_and_vmap(void)
{
    wf_fn *f = wf_fn_new(sin_of, NULL, NULL), *cf = wf_compile(f, NULL);
    wf_fn *jf = wf_fn_new(jvp_of_sin, f, NULL), *cjf = wf_compile(jf, NULL);
    wf_array *x = ramp(32, 0.2), *t = ramp(32, 1.7);
    wf_scope_begin();
    wf_array *want_t = wf_multiply(t, wf_cos(x)), *want_y = wf_sin(x);
    for (int round = 0; round < 2; round++) {
        const int jvp_before = atomic_load(&jvp_rule_calls);
        wf_array *y = NULL, *ty = NULL;
        size_t k = 1;
        CHECK_OK(wf_jvp(cf, &x, 1, &t, &y, &ty, &k)); /* jvp of compile */
        CHECK(atomic_load(&jvp_rule_calls) > jvp_before);
        check_same(&want_t, 1, &ty, 1, "jvp(compile(f))", 0);
        wf_array *in[2] = {x, t}, *outs[2] = {NULL, NULL};
        k = 2;
        CHECK_OK(wf_fn_call(cjf, in, 2, outs, &k)); /* compile of jvp */
        check_same((wf_array *[]){want_y, want_t}, 2, outs, k, "compile(jvp(f))", 0);
        wf_release(y);
        wf_release(ty);
        release_all(outs, k);
    }
    check_compiled(cf, "jvp(compile(f))");
    check_compiled(cjf, "compile(jvp(f))");
    const int64_t shape[2] = {3, 32};
    float v[96];
    for (int i = 0; i < 96; i++)
        v[i] = (float)cos(0.3 * i);
    wf_array *xb = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    wf_fn *mapped = wf_vmap(cf, NULL, 0, NULL, 0), *cmapped = wf_compile(mapped, NULL);
    wf_array *want_b = wf_sin(xb);
    for (int round = 0; round < 2; round++) {
        const int vmap_before = atomic_load(&vmap_rule_calls);
        wf_array *got = call_op(mapped, xb), *cgot = call_op(cmapped, xb);
        CHECK(atomic_load(&vmap_rule_calls) > vmap_before);
        check_same(&want_b, 1, &got, got ? 1 : 0, "vmap(compile(f))", 0);
        check_same(&want_b, 1, &cgot, cgot ? 1 : 0, "compile(vmap(f))", 0);
        wf_release(got);
        wf_release(cgot);
    }
    check_compiled(cmapped, "compile(vmap(f))");
    wf_scope_end();
    wf_release(xb);
    wf_release(x);
    wf_release(t);
    wf_fn *fns[] = {cmapped, mapped, cjf, jf, cf, f};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        wf_fn_release(fns[i]);
}

/* ---------------------------------------------------------------- threads */

enum { THREADS = 8 };

typedef struct thread_call {
    wf_fn *fn;
    wf_array *x;
    pthread_barrier_t *start;
    wf_array *got;
} thread_call;

static void *call_thread(void *arg)
{
    thread_call *c = arg;
    pthread_barrier_wait(c->start);
    c->got = call_op(c->fn, c->x);
    return NULL;
}

/* 8 threads make the same cold call of compile(grad(f)) and of
 * grad(compile(f)): one trace each, every result right. */
static void test_threads_share_one_trace(void)
{
    wf_fn *ops[2] = {custom_sin, checkpointed_sin};
    for (int o = 0; o < 2; o++) {
        wf_fn *loss = wf_fn_new(sin_loss, ops[o], NULL);
        wf_fn *grad = wf_grad(loss, NULL, 0), *cg = wf_compile(grad, NULL);
        wf_fn *cl = wf_compile(loss, NULL), *gc = wf_grad(cl, NULL, 0);
        wf_array *x = ramp(48, 0.5), *want = expected_grad(x);
        wf_fn *targets[2] = {cg, gc};
        for (int w = 0; w < 2; w++) {
            pthread_barrier_t start;
            pthread_barrier_init(&start, NULL, THREADS);
            thread_call calls[THREADS];
            pthread_t t[THREADS];
            for (int i = 0; i < THREADS; i++) {
                calls[i] = (thread_call){targets[w], x, &start, NULL};
                pthread_create(&t[i], NULL, call_thread, &calls[i]);
            }
            for (int i = 0; i < THREADS; i++) {
                pthread_join(t[i], NULL);
                if (CHECK_NOT_NULL(calls[i].got))
                    check_same(&want, 1, &calls[i].got, 1,
                               w ? "grad(compile(f))" : "compile(grad(f))", 0);
                wf_release(calls[i].got);
            }
            pthread_barrier_destroy(&start);
        }
        CHECK_EQ_INT(stats_of(cg).traces, 1);
        CHECK_EQ_INT(stats_of(cl).traces, 1);
        CHECK_EQ_INT(stats_of(cg).inline_calls, 0);
        CHECK_EQ_INT(stats_of(cl).inline_calls, 0);
        wf_release(want);
        wf_release(x);
        wf_fn *fns[] = {gc, cl, cg, grad, loss};
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
            wf_fn_release(fns[i]);
    }
}

int main(void)
{
    custom_ops_make();
    RUN_TEST(test_compiled_grads_of_custom_and_checkpoint);
    RUN_TEST(test_compiled_jvp_and_vmap);
    RUN_TEST(test_generated_graphs);
    RUN_TEST(test_threads_share_one_trace);
    wf_fn_release(custom_sin);
    wf_fn_release(checkpointed_sin);
    return TEST_SUMMARY();
}
