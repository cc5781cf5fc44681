/* Buffer donation (issue 11, item 4; runtime/eval.c): an element-wise
 * kernel's output takes over the buffer of an input nobody else can reach.
 * A chain of element-wise ops then needs one intermediate buffer, not one
 * per op; and an input anyone may still read (a user handle, a view, a
 * slot, another thread, a transform's saved value, external memory, a
 * broadcast) is never written. Each must-not case checks the held array's
 * values after the evaluation that could have clobbered them. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/array.h"
#include "core/error.h"
#include "harness.h"
#include "prim/kernel.h"
#include "prim/sibling.h"
#include "settle.h"

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
enum { CHAIN_N = 1 << 20 }; /* sanitizers: the same shape of test, smaller */
#else
enum { CHAIN_N = 1 << 24 }; /* 16M floats: 64 MB per buffer */
#endif

static float *float_data(wf_array *a)
{
    const void *p = NULL;
    if (!CHECK_OK(wf_array_data(a, &p)))
        return NULL;
    return (float *)p;
}

static wf_array *ramp(int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i % 1000) / 1000.0f;
    const int64_t shape[1] = {n};
    wf_array *a = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    free(v);
    return a;
}

/* Swaps *t for op's result, releasing the old intermediate (never x). */
static void step(wf_array **t, wf_array *x, wf_array *next)
{
    if (*t != x)
        wf_release(*t);
    *t = next;
}

struct scalars {
    wf_array *two, *one, *half;
};

/* Eight element-wise ops, each consuming the previous result only: the
 * last one reads its input twice (t * t). */
static wf_array *chain8(wf_array *x, const struct scalars *s)
{
    wf_array *t = x;
    step(&t, x, wf_multiply(t, s->two));
    step(&t, x, wf_add(t, s->one));
    step(&t, x, wf_negative(t));
    step(&t, x, wf_abs(t));
    step(&t, x, wf_subtract(t, s->half));
    step(&t, x, wf_sqrt(t));
    step(&t, x, wf_maximum(t, s->one));
    step(&t, x, wf_multiply(t, t));
    return t;
}

static float chain8_expected(float v)
{
    float t = fabsf(-(v * 2.0f + 1.0f)) - 0.5f;
    t = sqrtf(t);
    t = t > 1.0f ? t : 1.0f;
    return t * t;
}

static struct scalars make_scalars(void)
{
    struct scalars s = {wf_scalar(2, WF_DTYPE_F32), wf_scalar(1, WF_DTYPE_F32),
                        wf_scalar(0.5, WF_DTYPE_F32)};
    return s;
}

static void release_scalars(struct scalars *s)
{
    wf_release(s->two);
    wf_release(s->one);
    wf_release(s->half);
}

/* Peak bytes above what is live before the evaluation, for one chain. */
static size_t chain_peak(wf_array *x, const struct scalars *s, uint64_t *donated)
{
    wf_memory_stats before = wf_memory_stats_default(), after = wf_memory_stats_default();
    wf_array *r = chain8(x, s);
    wf_reset_peak_memory();
    CHECK_OK(wf_memory_stats_get(&before));
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&r, 1));
    CHECK_OK(wf_memory_stats_get(&after));
    *donated = wf__buffers_donated() - d0;
    const float *xv = float_data(x), *rv = float_data(r);
    int bad = 0;
    for (int64_t i = 0; xv && rv && i < CHAIN_N && bad < 5; i++)
        if (!CHECK_NEAR(rv[i], chain8_expected(xv[i]), 1e-5))
            bad++;
    wf_release(r);
    return after.peak_bytes - before.active_bytes;
}

static void test_chain_uses_one_intermediate_buffer(void)
{
    const size_t bytes = (size_t)CHAIN_N * sizeof(float);
    wf_array *x = ramp(CHAIN_N);
    struct scalars s = make_scalars();
    uint64_t donated_on = 0, donated_off = 0;
    const size_t peak_on = chain_peak(x, &s, &donated_on);
    wf__donation_enable(false);
    const size_t peak_off = chain_peak(x, &s, &donated_off);
    wf__donation_enable(true);
    printf("    %d floats: peak above the input %.1f buffers with donation, %.1f without\n",
           CHAIN_N, (double)peak_on / (double)bytes, (double)peak_off / (double)bytes);
    /* The first op's fresh buffer serves the other seven. */
    CHECK_EQ_INT((int64_t)donated_on, 7);
    CHECK_EQ_INT((int64_t)donated_off, 0);
    CHECK(peak_on < bytes + bytes / 2);
    CHECK(peak_off >= 2 * bytes);
    /* The input, held by the caller, is never written. */
    const float *xv = float_data(x);
    for (int64_t i = 0; xv && i < CHAIN_N; i += 997)
        CHECK_NEAR(xv[i], (float)(i % 1000) / 1000.0f, 0);
    release_scalars(&s);
    wf_release(x);
}

/* ---------------------------------------------------------------- must not donate */

enum { SMALL_N = 5000 };

/* a = x * 2 (an intermediate); checks that a still holds x * 2. */
static void check_doubled(wf_array *a, wf_array *x, int64_t n)
{
    const float *av = float_data(a), *xv = float_data(x);
    int bad = 0;
    for (int64_t i = 0; av && xv && i < n && bad < 5; i++)
        if (!CHECK_NEAR(av[i], xv[i] * 2.0f, 0))
            bad++;
}

/* b = a + 1 with a = x * 2. */
static void check_doubled_plus_one(wf_array *b, wf_array *x, int64_t n)
{
    const float *bv = float_data(b), *xv = float_data(x);
    int bad = 0;
    for (int64_t i = 0; bv && xv && i < n && bad < 5; i++)
        if (!CHECK_NEAR(bv[i], xv[i] * 2.0f + 1.0f, 0))
            bad++;
}

static void test_user_handle_is_never_donated(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    struct scalars s = make_scalars();
    wf_array *a = wf_multiply(x, s.two);
    wf_array *b = wf_add(a, s.one);
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&b, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
    check_doubled(a, x, SMALL_N);
    check_doubled_plus_one(b, x, SMALL_N);
    wf_release(a);
    wf_release(b);
    release_scalars(&s);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* A live view shares the buffer: the node may be dead, its storage is not. */
static void test_view_keeps_the_buffer(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    struct scalars s = make_scalars();
    for (int evaluated_first = 0; evaluated_first < 2; evaluated_first++) {
        wf_array *a = wf_multiply(x, s.two);
        const int64_t shape2[2] = {50, SMALL_N / 50}, start[1] = {10}, stop[1] = {SMALL_N},
                      one[1] = {1};
        wf_array *views[2] = {wf_reshape(a, shape2, 2), wf_slice(a, start, stop, one)};
        wf_array *b = wf_add(a, s.one);
        wf_release(a); /* only b and the views hold it now */
        if (evaluated_first)
            CHECK_OK(wf_eval(views, 2)); /* the views hold the buffer, not the node */
        const uint64_t d0 = wf__buffers_donated();
        CHECK_OK(wf_eval(&b, 1));
        CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
        check_doubled_plus_one(b, x, SMALL_N);
        check_doubled(views[0], x, SMALL_N);
        const float *sv = float_data(views[1]), *xv = float_data(x);
        for (int64_t i = 0; sv && xv && i < SMALL_N - 10; i += 7)
            CHECK_NEAR(sv[i], xv[i + 10] * 2.0f, 0);
        wf_release(views[0]);
        wf_release(views[1]);
        wf_release(b);
    }
    release_scalars(&s);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* A dead transposed view owns its buffer alone (the node it viewed is
 * freed), with the output's shape and bytes. Its elements fill the buffer
 * in another order, so it is donated with its layout: each op of the chain
 * writes its result where the view's elements were, laid out as they were
 * (element-wise results keep their inputs' layout, backend/cpu/layout.c),
 * never over an element not yet read. */
static void test_transposed_view_donates_in_its_layout(void)
{
    enum { SIDE = 96 };
    const int64_t live0 = live_arrays();
    wf_array *flat = ramp(SIDE * SIDE);
    const int64_t shape[2] = {SIDE, SIDE};
    wf_array *x = wf_reshape(flat, shape, 2);
    struct scalars s = make_scalars();
    wf_array *a = wf_multiply(x, s.two);
    wf_array *t = wf_transpose(a, NULL, 0);
    wf_release(a);
    CHECK_OK(wf_eval(&t, 1)); /* a is freed: t alone holds the buffer */
    wf_array *b = wf_add(t, s.one);
    wf_release(t);
    wf_array *c = wf_exp(b);
    wf_release(b);
    wf_array *d = wf_multiply(c, s.two);
    wf_release(c);
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&d, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 3);
    CHECK(!d->row_contiguous); /* the transposed layout went down the chain */
    const float *dv = float_data(d), *xv = float_data(x);
    int bad = 0;
    for (int64_t i = 0; dv && xv && i < SIDE && bad < 5; i++)
        for (int64_t j = 0; j < SIDE && bad < 5; j++)
            if (!CHECK_NEAR(dv[i * SIDE + j], expf(xv[j * SIDE + i] * 2.0f + 1.0f) * 2.0f,
                            1e-6 * fabs(dv[i * SIDE + j])))
                bad++;
    wf_release(d);
    release_scalars(&s);
    wf_release(x);
    wf_release(flat);
    CHECK_EQ_INT(live_arrays(), live0);
}

static void test_external_memory_is_never_written(void)
{
    const int64_t live0 = live_arrays();
    float *mem = malloc(SMALL_N * sizeof *mem);
    for (int i = 0; i < SMALL_N; i++)
        mem[i] = (float)i;
    const int64_t shape[1] = {SMALL_N};
    struct scalars s = make_scalars();
    wf_array *e = wf_array_from_external(mem, shape, 1, WF_DTYPE_F32, NULL, NULL, NULL);
    wf_array *b = wf_add(e, s.one);
    wf_release(e); /* b holds the only reference */
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&b, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
    const float *bv = float_data(b);
    for (int i = 0; bv && i < SMALL_N; i += 13)
        CHECK_NEAR(bv[i], (float)i + 1.0f, 0);
    for (int i = 0; i < SMALL_N; i++)
        if (!CHECK_NEAR(mem[i], (float)i, 0))
            break;
    wf_release(b);
    release_scalars(&s);
    CHECK_EQ_INT(live_arrays(), live0);
    free(mem);
}

/* A broadcast input (a stride-0 view, smaller storage) is never a donor;
 * the full-size operand may be. */
static void test_broadcast_input_is_never_donated(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    const float row[4] = {1, 2, 3, 4};
    const int64_t rshape[2] = {1, 4}, shape[2] = {SMALL_N / 4, 4};
    wf_array *r = wf_array_from_data(row, rshape, 2, WF_DTYPE_F32);
    wf_array *x2 = wf_reshape(x, shape, 2);
    wf_array *rr = wf_negative(r); /* an intermediate that only the add holds */
    wf_array *b = wf_add(rr, x2);
    wf_release(rr);
    CHECK_OK(wf_eval(&b, 1));
    const float *bv = float_data(b), *xv = float_data(x), *rv = float_data(r);
    int bad = 0;
    for (int64_t i = 0; bv && xv && rv && i < SMALL_N && bad < 5; i++)
        if (!CHECK_NEAR(bv[i], xv[i] - rv[i % 4], 0))
            bad++;
    wf_release(b);
    wf_release(x2);
    wf_release(r);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

static void test_slot_value_is_never_donated(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    struct scalars s = make_scalars();
    wf_array *a = wf_multiply(x, s.two);
    wf_slot *slot = wf_slot_new(a);
    wf_array *b = wf_add(a, s.one);
    wf_release(a); /* the slot and b hold it */
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&b, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
    check_doubled_plus_one(b, x, SMALL_N);
    wf_array *held = wf_slot_load(slot);
    check_doubled(held, x, SMALL_N);
    wf_release(held);
    wf_slot_release(slot);
    wf_release(b);
    release_scalars(&s);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* Another thread holds a reference and reads the array after this thread
 * evaluated a consumer of it. */
struct holder {
    wf_array *a, *x;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool go;
};

static void *hold_then_read(void *arg)
{
    struct holder *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->go)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
    check_doubled(h->a, h->x, SMALL_N);
    wf_release(h->a);
    return NULL;
}

static void test_other_thread_handle_is_never_donated(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    struct scalars s = make_scalars();
    wf_array *a = wf_multiply(x, s.two);
    struct holder h = {.a = wf_retain_unscoped(a), .x = x, .go = false};
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.cond, NULL);
    pthread_t t;
    pthread_create(&t, NULL, hold_then_read, &h);
    wf_array *b = wf_add(a, s.one);
    wf_release(a); /* this thread's handle: b and the other thread hold it */
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&b, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
    check_doubled_plus_one(b, x, SMALL_N);
    pthread_mutex_lock(&h.lock);
    h.go = true;
    pthread_cond_signal(&h.cond);
    pthread_mutex_unlock(&h.lock);
    pthread_join(t, NULL);
    pthread_cond_destroy(&h.cond);
    pthread_mutex_destroy(&h.lock);
    wf_release(b);
    release_scalars(&s);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* f(x) = tanh(x * 2) * 3 + 1: its vjp reads tanh's output, which a donated
 * "* 3" would overwrite. With a non-NULL payload the body evaluates its
 * result before returning: the forward graph then runs under the trace and
 * the transform walks it afterwards (nodes that keep their graph). */
static wf_status tanh_chain(void *payload, wf_array *const *inputs, size_t ninputs,
                            wf_array **outputs, size_t *noutputs)
{
    (void)ninputs;
    wf_array *two = wf_scalar(2, WF_DTYPE_F32), *three = wf_scalar(3, WF_DTYPE_F32),
             *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *t = wf_multiply(inputs[0], two);
    wf_array *u = wf_tanh(t);
    wf_release(t);
    wf_array *v = wf_multiply(u, three);
    wf_release(u);
    outputs[0] = wf_add(v, one);
    wf_release(v);
    wf_release(two);
    wf_release(three);
    wf_release(one);
    *noutputs = 1;
    if (outputs[0] && payload && wf_eval(outputs, 1) != WF_OK) {
        wf_release(outputs[0]);
        return wf_last_error();
    }
    return outputs[0] ? WF_OK : wf_last_error();
}

static void test_values_kept_for_the_backward_pass(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    static int eval_inside;
    const int64_t shape[1] = {SMALL_N};
    wf_array *ones = wf_full(shape, 1, 1.0, WF_DTYPE_F32);
    for (int mode = 0; mode < 3; mode++) {
        const int together = mode == 1;
        wf_fn *fn = wf_fn_new(tanh_chain, mode == 2 ? &eval_inside : NULL, NULL);
        wf_array *out = NULL, *grad = NULL;
        CHECK_OK(wf_vjp(fn, &x, 1, &ones, 1, &out, &grad));
        if (together) {
            wf_array *both[2] = {out, grad};
            CHECK_OK(wf_eval(both, 2));
        } else {
            CHECK_OK(wf_eval(&out, 1)); /* the forward first, then the backward */
            CHECK_OK(wf_eval(&grad, 1));
        }
        const float *ov = float_data(out), *gv = float_data(grad), *xv = float_data(x);
        int bad = 0;
        for (int64_t i = 0; ov && gv && xv && i < SMALL_N && bad < 5; i++) {
            const double th = tanh(2.0 * xv[i]);
            if (!CHECK_NEAR(ov[i], 3.0 * th + 1.0, 1e-5) ||
                !CHECK_NEAR(gv[i], 6.0 * (1.0 - th * th), 1e-5))
                bad++;
        }
        wf_release(out);
        wf_release(grad);
        wf_fn_release(fn);
    }
    wf_release(ones);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* ---------------------------------------------------------------- kernels in place */

typedef wf_array *(*unary_op)(wf_array *);

static wf_array *op_gelu(wf_array *a) { return wf_gelu(a); }
static wf_array *op_silu(wf_array *a) { return wf_silu(a); }

/* Every in-place kernel kind against its out-of-place result, bit for bit,
 * on an intermediate only the op holds. Sizes cover a partial staging piece
 * and (70000) the parallel split. */
static wf_array *in_place_case(int k, wf_array *x, wf_array *y, wf_array *cond)
{
    static const unary_op unaries[] = {wf_exp,     wf_negative, wf_abs,   wf_sqrt, wf_tanh,
                                       wf_sigmoid, wf_square,   op_silu, op_gelu, wf_logical_not};
    enum { NUNARY = sizeof unaries / sizeof unaries[0] };
    wf_array *t = wf_abs(x); /* the intermediate to donate */
    wf_array *r = NULL;
    if (k < NUNARY)
        r = unaries[k](t);
    else if (k == NUNARY)
        r = wf_add(t, y);
    else if (k == NUNARY + 1)
        r = wf_subtract(y, t); /* donor in the second position */
    else if (k == NUNARY + 2)
        r = wf_where(cond, y, t);
    else if (k == NUNARY + 3)
        r = wf_clip(t, y, y);
    else if (k == NUNARY + 4)
        r = wf_astype(t, WF_DTYPE_I32); /* in place from float32 only */
    else if (k == NUNARY + 5)
        r = wf_astype(t, WF_DTYPE_BF16); /* in place from float16 only */
    wf_release(t);
    return r;
}

enum { IN_PLACE_CASES = 16 };

static void test_kernels_in_place_match(void)
{
    const int64_t live0 = live_arrays();
    const int64_t sizes[2] = {3001, 70000};
    const wf_dtype dtypes[3] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16};
    for (int si = 0; si < 2; si++) {
        const int64_t n = sizes[si];
        wf_array *base = ramp(n);
        wf_array *half = wf_scalar(0.5, WF_DTYPE_F32);
        wf_array *cond = wf_greater(base, half);
        for (int di = 0; di < 3; di++) {
            wf_array *x = wf_astype(base, dtypes[di]);
            wf_array *y = wf_multiply(x, x);
            CHECK_OK(wf_eval(&y, 1));
            for (int k = 0; k < IN_PLACE_CASES; k++) {
                wf__donation_enable(false);
                wf_array *want = in_place_case(k, x, y, cond);
                CHECK_OK(wf_eval(&want, 1));
                wf__donation_enable(true);
                wf_array *got = in_place_case(k, x, y, cond);
                const uint64_t d0 = wf__buffers_donated();
                CHECK_OK(wf_eval(&got, 1));
                const bool donated = wf__buffers_donated() - d0 >= 1;
                const bool same_size = wf_array_nbytes(got) == wf_array_nbytes(x);
                if (!CHECK(donated == same_size))
                    printf("    case %d dtype %d n %lld\n", k, di, (long long)n);
                const void *pw = NULL, *pg = NULL;
                CHECK_OK(wf_array_data(want, &pw));
                CHECK_OK(wf_array_data(got, &pg));
                if (pw && pg && !CHECK(memcmp(pw, pg, wf_array_nbytes(got)) == 0))
                    printf("    case %d dtype %d n %lld differs in place\n", k, di,
                           (long long)n);
                wf_release(want);
                wf_release(got);
            }
            wf_release(y);
            wf_release(x);
        }
        wf_release(cond);
        wf_release(half);
        wf_release(base);
    }
    CHECK_EQ_INT(live_arrays(), live0);
}

/* A compiled (fused) function called on an intermediate: the fused kernel
 * writes over its dead input; the caller's input stays intact. */
static wf_status fused_body(void *payload, wf_array *const *inputs, size_t ninputs,
                            wf_array **outputs, size_t *noutputs)
{
    (void)payload;
    (void)ninputs;
    wf_array *t = wf_multiply(inputs[0], inputs[0]);
    wf_array *u = wf_exp(t);
    wf_release(t);
    outputs[0] = wf_subtract(u, inputs[0]);
    wf_release(u);
    *noutputs = 1;
    return outputs[0] ? WF_OK : wf_last_error();
}

static void test_compiled_replay_donates_only_dead_inputs(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    wf_fn *body = wf_fn_new(fused_body, NULL, NULL);
    wf_fn *compiled = wf_compile(body, NULL);
    for (int round = 0; round < 3; round++) {
        wf_array *a = wf_negative(x); /* dead once the call holds it */
        wf_array *outs[2] = {NULL, NULL};
        size_t nout = 1;
        CHECK_OK(wf_fn_call(compiled, &a, 1, outs, &nout));
        wf_release(a);
        nout = 1;
        CHECK_OK(wf_fn_call(compiled, &x, 1, outs + 1, &nout)); /* x is the caller's */
        const uint64_t d0 = wf__buffers_donated();
        CHECK_OK(wf_eval(outs, 2));
        if (round > 0) /* the first call traces (plain ops), later ones replay fused */
            CHECK(wf__buffers_donated() - d0 >= 1);
        const float *r0 = float_data(outs[0]), *r1 = float_data(outs[1]), *xv = float_data(x);
        int bad = 0;
        for (int64_t i = 0; r0 && r1 && xv && i < SMALL_N && bad < 5; i++) {
            const double v = xv[i];
            if (!CHECK_NEAR(r0[i], exp(v * v) + v, 1e-5) ||
                !CHECK_NEAR(r1[i], exp(v * v) - v, 1e-5) ||
                !CHECK_NEAR(xv[i], (float)(i % 1000) / 1000.0f, 0))
                bad++;
        }
        wf_release(outs[0]);
        wf_release(outs[1]);
    }
    wf_fn_release(compiled);
    wf_fn_release(body);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* A compiled function called on a dead transposed result: the fused kernel
 * takes its buffer and writes the output in its (transposed) layout; with
 * a live row-major second input, that input is read in the same order. */
static void test_compiled_replay_donates_a_transposed_input(void)
{
    enum { SIDE = 80 };
    const int64_t live0 = live_arrays();
    const int64_t shape[2] = {SIDE, SIDE};
    wf_array *flat = ramp(SIDE * SIDE);
    wf_array *x = wf_reshape(flat, shape, 2);
    wf_fn *body = wf_fn_new(fused_body, NULL, NULL);
    wf_fn *compiled = wf_compile(body, NULL);
    for (int round = 0; round < 3; round++) {
        wf_array *n = wf_negative(x);
        wf_array *t = wf_transpose(n, NULL, 0);
        wf_release(n);
        CHECK_OK(wf_eval(&t, 1)); /* n is freed: t alone holds the buffer */
        wf_array *out = NULL;
        size_t nout = 1;
        CHECK_OK(wf_fn_call(compiled, &t, 1, &out, &nout));
        wf_release(t);
        const uint64_t d0 = wf__buffers_donated();
        CHECK_OK(wf_eval(&out, 1));
        if (round > 0) { /* the first call traces (plain ops), later ones replay fused */
            CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 1);
            CHECK(out->strides[0] == 1 && out->strides[1] == SIDE);
        }
        const float *r = float_data(out), *xv = float_data(x);
        int bad = 0;
        for (int64_t i = 0; r && xv && i < SIDE && bad < 5; i++)
            for (int64_t j = 0; j < SIDE && bad < 5; j++) {
                const double v = -xv[j * SIDE + i];
                if (!CHECK_NEAR(r[i * SIDE + j], exp(v * v) - v, 1e-5 * exp(v * v)))
                    bad++;
            }
        wf_release(out);
    }
    wf_fn_release(compiled);
    wf_fn_release(body);
    wf_release(x);
    wf_release(flat);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* ---------------------------------------------------------------- siblings */

/* A two-output primitive of the test's own: x + 1 and x * 2 (float32, x's
 * shape). Its siblings are views of the hidden primary's outputs. */
static wf_status infer_pair(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *outputs)
{
    (void)params;
    if (ninputs != 1 || inputs[0].dtype != WF_DTYPE_F32)
        return wf__error(WF_ERR_DTYPE, "test_pair: needs one float32 input");
    for (int k = 0; k < 2; k++) {
        outputs[k].dtype = WF_DTYPE_F32;
        outputs[k].ndim = inputs[0].ndim;
        memcpy(outputs[k].shape, inputs[0].shape, (size_t)inputs[0].ndim * sizeof(int64_t));
    }
    return WF_OK;
}

static wf_status kernel_pair(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    (void)params;
    wf_array *plus = wf__node_output(out, 0), *twice = wf__node_output(out, 1);
    if (wf__array_alloc_output(plus) != WF_OK || wf__array_alloc_output(twice) != WF_OK)
        return wf_last_error();
    const float *x = wf__array_data_ptr(inputs[0]); /* contiguous: made by ramp */
    float *p = wf__array_data_ptr(plus), *t = wf__array_data_ptr(twice);
    for (int64_t i = 0; i < out->size; i++) {
        p[i] = x[i] + 1.0f;
        t[i] = x[i] * 2.0f;
    }
    return WF_OK;
}

static const wf_prim_def prim_pair = {
    .name = "test_pair",
    .noutputs = 2,
    .infer = infer_pair,
    .kernels = &(wf_kernel_slots){{0}},
};

/* The user keeps sibling 0 and adds it to sibling 1: sibling 1 is dead once
 * the add holds it (its buffer may be reused), sibling 0 is not. */
static void test_siblings_of_a_multi_output_node(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    for (int round = 0; round < 2; round++) {
        wf_array *pair[2];
        if (!CHECK_OK(wf__node_new_multi(&prim_pair, NULL, &x, 1, pair, 2)))
            break;
        if (round == 1)
            CHECK_OK(wf_eval(pair, 2)); /* the primary is gone before the add runs */
        wf_array *sum = wf_add(pair[0], pair[1]);
        wf__array_decref(pair[1]);
        CHECK_OK(wf_eval(&sum, 1));
        const float *sv = float_data(sum), *p0 = float_data(pair[0]), *xv = float_data(x);
        int bad = 0;
        for (int64_t i = 0; sv && p0 && xv && i < SMALL_N && bad < 5; i++)
            if (!CHECK_NEAR(p0[i], xv[i] + 1.0f, 0) || !CHECK_NEAR(sv[i], 3.0f * xv[i] + 1.0f, 1e-6))
                bad++;
        wf__array_decref(pair[0]);
        wf_release(sum);
    }
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* Asynchronous evaluation: the stream's worker runs the chain and donates
 * the same way. */
static void test_async_chain_donates(void)
{
    const int64_t live0 = live_arrays();
    wf_array *x = ramp(SMALL_N);
    struct scalars s = make_scalars();
    wf_array *r = chain8(x, &s);
    const uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_async_eval(&r, 1));
    settle_default_stream();
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 7);
    const float *xv = float_data(x), *rv = float_data(r);
    int bad = 0;
    for (int64_t i = 0; xv && rv && i < SMALL_N && bad < 5; i++)
        if (!CHECK_NEAR(rv[i], chain8_expected(xv[i]), 1e-5))
            bad++;
    wf_release(r);
    release_scalars(&s);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* ---------------------------------------------------------------- threads */

enum { THREADS = 4, ROUNDS = 12, SHARED_N = 20000 };

struct sharer {
    wf_array *shared; /* this thread's reference */
    wf_array *x;
    int id;
    pthread_barrier_t *start;
    int failures;
};

/* Each thread: its own chain over the shared intermediate, evaluated at the
 * same time as the others'. */
static void *evaluate_own_graph(void *arg)
{
    struct sharer *s = arg;
    wf_array *k = wf_scalar(s->id + 1, WF_DTYPE_F32);
    wf_array *t = wf_multiply(s->shared, k);
    step(&t, NULL, wf_add(t, k));
    step(&t, NULL, wf_negative(t));
    step(&t, NULL, wf_abs(t));
    wf_release(s->shared);
    pthread_barrier_wait(s->start);
    if (wf_eval(&t, 1) != WF_OK)
        s->failures++;
    const float *tv = float_data(t), *xv = float_data(s->x);
    for (int64_t i = 0; tv && xv && i < SHARED_N; i++) {
        const float sh = xv[i] * 2.0f + 1.0f, want = fabsf(-(sh * (float)(s->id + 1) + (float)(s->id + 1)));
        if (tv[i] != want) {
            s->failures++;
            break;
        }
    }
    wf_release(t);
    wf_release(k);
    return NULL;
}

static void run_sharers(bool main_keeps_shared)
{
    wf_array *x = ramp(SHARED_N);
    struct scalars sc = make_scalars();
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    for (int round = 0; round < ROUNDS; round++) {
        wf_array *a = wf_multiply(x, sc.two);
        wf_array *shared = wf_add(a, sc.one); /* lazy, shared by every thread's graph */
        wf_release(a);
        struct sharer s[THREADS];
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++) {
            s[i] = (struct sharer){wf_retain_unscoped(shared), x, i, &start, 0};
            pthread_create(&t[i], NULL, evaluate_own_graph, &s[i]);
        }
        if (!main_keeps_shared)
            wf_release(shared); /* the last reader may then take it over */
        for (int i = 0; i < THREADS; i++) {
            pthread_join(t[i], NULL);
            CHECK_EQ_INT(s[i].failures, 0);
        }
        if (main_keeps_shared) {
            check_doubled_plus_one(shared, x, SHARED_N);
            wf_release(shared);
        }
    }
    pthread_barrier_destroy(&start);
    release_scalars(&sc);
    wf_release(x);
}

static void test_shared_intermediate_under_threads(void)
{
    const int64_t live0 = live_arrays();
    const uint64_t d0 = wf__buffers_donated();
    run_sharers(true);
    run_sharers(false);
    /* Each thread's own chain donates (mul -> add -> negative -> abs). */
    CHECK(wf__buffers_donated() - d0 >= (uint64_t)(2 * ROUNDS * THREADS));
    CHECK_EQ_INT(live_arrays(), live0);
}

/* ---------------------------------------------------------------- scatter */

/* ramp(SMALL_N)'s values with `add` added at positions 3 (twice) and 7. */
static void check_scattered(wf_array *r, float add)
{
    const float *v = float_data(r);
    int bad = 0;
    for (int64_t i = 0; v && i < SMALL_N && bad < 5; i++) {
        const float want = (float)(i % 1000) / 1000.0f + (i == 3 ? 2 * add : i == 7 ? add : 0);
        bad += !CHECK_NEAR(v[i], want, 1e-6);
    }
}

static wf_array *scatter_positions(void)
{
    const int32_t idx[3] = {3, 7, 3};
    const int64_t shape[1] = {3};
    return wf_array_from_data(idx, shape, 1, WF_DTYPE_I32);
}

/* A scatter or slice update (WF_PRIM_INPLACE_FIRST) updates a table
 * nobody else holds where it lies; a held table is copied and left as it was; a table that
 * is also the updates is never donated (the updates would be overwritten
 * while read); a masked scatter donates likewise. */
static void test_scatter_updates_a_dead_table_in_place(void)
{
    const int64_t live0 = live_arrays();
    wf_array *idx = scatter_positions();
    wf_array *upd = wf_full((const int64_t[1]){3}, 1, 0.5, WF_DTYPE_F32);
    wf_array *table = ramp(SMALL_N);
    wf_array *r = wf_scatter_add(table, idx, upd, 0);
    wf_release(table);
    uint64_t d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&r, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 1);
    check_scattered(r, 0.5f);
    wf_release(r);

    table = ramp(SMALL_N); /* held: copied, unchanged */
    r = wf_scatter_add(table, idx, upd, 0);
    d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&r, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
    check_scattered(r, 0.5f);
    check_scattered(table, 0.0f);
    wf_release(r);

    /* a chain of updates (wf_scatter_add and the general wf_scatter in turn),
     * each consuming the last table: all but the first in place */
    wf_array *upd_slices = wf_reshape(upd, (const int64_t[2]){3, 1}, 2);
    wf_array *t = table;
    for (int step_no = 0; step_no < 8; step_no++) {
        wf_array *next = step_no % 2 ? wf_scatter(t, &idx, 1, upd_slices, (const int[1]){0},
                                                  WF_SCATTER_ADD)
                                     : wf_scatter_add(t, idx, upd, 0);
        if (t != table)
            wf_release(t);
        t = next;
    }
    d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&t, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 7);
    check_scattered(t, 8 * 0.5f);
    check_scattered(table, 0.0f);
    wf_release(t);
    wf_release(table);
    wf_release(upd_slices);

    /* the table as its own updates: t[p] += t[perm[p]] reads every t[perm[p]] unchanged */
    int32_t *perm = malloc(SMALL_N * sizeof *perm);
    for (int64_t i = 0; i < SMALL_N; i++)
        perm[i] = (int32_t)(SMALL_N - 1 - i);
    wf_array *reversed = wf_array_from_data(perm, (const int64_t[1]){SMALL_N}, 1, WF_DTYPE_I32);
    free(perm);
    table = ramp(SMALL_N);
    r = wf_scatter_add(table, reversed, table, 0);
    wf_release(table);
    d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&r, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 0);
    const float *v = float_data(r);
    for (int64_t i = 0; v && i < SMALL_N; i++)
        if (!CHECK_NEAR(v[i], (float)(i % 1000) / 1000.0f +
                                  (float)((SMALL_N - 1 - i) % 1000) / 1000.0f, 1e-6))
            break;
    wf_release(r);
    wf_release(reversed);

    /* slice update: positions 3 and 7 set to their value + 1 and + 0.5 */
    table = ramp(SMALL_N);
    wf_array *pair = wf_array_from_data((const float[2]){3 / 1000.0f + 1.0f, 7 / 1000.0f + 0.5f},
                                        (const int64_t[1]){2}, 1, WF_DTYPE_F32);
    r = wf_slice_update(table, pair, (const int64_t[1]){3}, (const int64_t[1]){8},
                        (const int64_t[1]){4});
    wf_release(table);
    d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&r, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 1);
    check_scattered(r, 0.5f);
    wf_release(r);
    wf_release(pair);

    /* masked scatter: every third element set to -1 */
    bool *mask_v = malloc(SMALL_N * sizeof *mask_v);
    for (int64_t i = 0; i < SMALL_N; i++)
        mask_v[i] = i % 3 == 0;
    wf_array *mask = wf_array_from_data(mask_v, (const int64_t[1]){SMALL_N}, 1, WF_DTYPE_BOOL);
    free(mask_v);
    wf_array *minus = wf_scalar(-1, WF_DTYPE_F32);
    table = ramp(SMALL_N);
    r = wf_masked_scatter(table, mask, minus);
    wf_release(table);
    d0 = wf__buffers_donated();
    CHECK_OK(wf_eval(&r, 1));
    CHECK_EQ_INT((int64_t)(wf__buffers_donated() - d0), 1);
    v = float_data(r);
    for (int64_t i = 0; v && i < SMALL_N; i++)
        if (!CHECK_NEAR(v[i], i % 3 == 0 ? -1.0f : (float)(i % 1000) / 1000.0f, 0))
            break;
    wf_release(r);
    wf_release(minus);
    wf_release(mask);
    wf_release(upd);
    wf_release(idx);
    CHECK_EQ_INT(live_arrays(), live0);
}

int main(void)
{
    if (wf__kernel_register(&prim_pair, WF_DEVICE_KIND_CPU, kernel_pair) != WF_OK)
        return 1;
    RUN_TEST(test_chain_uses_one_intermediate_buffer);
    RUN_TEST(test_user_handle_is_never_donated);
    RUN_TEST(test_view_keeps_the_buffer);
    RUN_TEST(test_transposed_view_donates_in_its_layout);
    RUN_TEST(test_external_memory_is_never_written);
    RUN_TEST(test_broadcast_input_is_never_donated);
    RUN_TEST(test_slot_value_is_never_donated);
    RUN_TEST(test_other_thread_handle_is_never_donated);
    RUN_TEST(test_values_kept_for_the_backward_pass);
    RUN_TEST(test_kernels_in_place_match);
    RUN_TEST(test_compiled_replay_donates_only_dead_inputs);
    RUN_TEST(test_compiled_replay_donates_a_transposed_input);
    RUN_TEST(test_siblings_of_a_multi_output_node);
    RUN_TEST(test_async_chain_donates);
    RUN_TEST(test_shared_intermediate_under_threads);
    RUN_TEST(test_scatter_updates_a_dead_table_in_place);
    return TEST_SUMMARY();
}
