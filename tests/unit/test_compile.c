/* wf_compile: traces, cache hits, retrace reasons, shapeless, modes,
 * simplification, fusion, failures and bad input. */
#include <math.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/fused.h"
#include "backend/cpu/vmath.h"
#include "core/array.h"
#include "harness.h"
#include "prim/fused.h"
#include "weft.h"

/* ------------------------------------------------------------ functions */

/* y = (sqrt(max((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5 */
static wf_array *chain8(wf_array *x)
{
    wf_scope_begin();
    wf_array *s15 = wf_scalar(1.5, WF_DTYPE_F32), *s025 = wf_scalar(0.25, WF_DTYPE_F32);
    wf_array *s05 = wf_scalar(0.5, WF_DTYPE_F32), *zero = wf_scalar(0.0, WF_DTYPE_F32);
    wf_array *a = wf_add(wf_multiply(x, s15), s025);
    wf_array *b = wf_subtract(wf_multiply(a, x), s05);
    wf_array *c = wf_add(wf_sqrt(wf_maximum(b, zero)), x);
    wf_array *y = wf_keep(wf_multiply(c, s05));
    wf_scope_end();
    return y;
}

static wf_status chain8_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *y = chain8(in[0]);
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static atomic_int body_runs;

/* x * y + exp(x) + exp(x): the two exps are one after simplification. */
static wf_status cse_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)payload;
    (void)n;
    atomic_fetch_add(&body_runs, 1);
    wf_scope_begin();
    wf_array *y = wf_keep(wf_add(wf_add(wf_multiply(in[0], in[1]), wf_exp(in[0])), wf_exp(in[0])));
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static wf_array *ramp(int64_t n, double scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(scale * (double)(i % 97) / 97.0 - 0.3);
    wf_array *a = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    free(v);
    return a;
}

static double max_abs_diff(wf_array *a, wf_array *b)
{
    wf_array *d = wf_max(wf_abs(wf_subtract(a, b)), NULL, 0, false);
    double v = -1;
    wf_array_item(d, &v);
    wf_release(d);
    return v;
}

static wf_array *call1(wf_fn *f, wf_array *x)
{
    wf_array *out[1];
    size_t n = 1;
    if (wf_fn_call(f, &x, 1, out, &n) != WF_OK)
        return NULL;
    return out[0];
}

static wf_array *call2(wf_fn *f, wf_array *x, wf_array *y)
{
    wf_array *in[2] = {x, y}, *out[1];
    size_t n = 1;
    if (wf_fn_call(f, in, 2, out, &n) != WF_OK)
        return NULL;
    return out[0];
}

static wf_compile_stats stats_of(wf_fn *f)
{
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(f, &s));
    return s;
}

/* ------------------------------------------------------------ tests */

static void test_chain_compiles_fuses_and_matches(void)
{
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    CHECK_NOT_NULL(cf);
    wf_array *x = ramp(100003, 4.0);
    uint64_t fused_before = wf__fused_kernels_run();
    wf_array *want = chain8(x);
    wf_array *got = call1(cf, x);
    CHECK_NOT_NULL(got);
    CHECK(max_abs_diff(want, got) <= 1e-6);
    CHECK_EQ_INT(wf__fused_kernels_run() - fused_before, 1); /* one kernel for the chain */
    wf_array *again = call1(cf, x);
    CHECK(max_abs_diff(want, again) == 0.0);
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.calls, 2);
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, 1);
    CHECK_EQ_INT(s.entries, 1);
    wf_release(x);
    wf_release(want);
    wf_release(got);
    wf_release(again);
    wf_fn_release(cf);
    wf_fn_release(f);
}

static void test_broadcast_and_strided_inputs_fuse(void)
{
    /* x (3, 5) transposed view, y (5,) broadcast row, plus scalars. */
    float xv[15], yv[5];
    for (int i = 0; i < 15; i++)
        xv[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 5; i++)
        yv[i] = (float)i + 0.5f;
    wf_array *base = wf_array_from_data(xv, (int64_t[]){5, 3}, 2, WF_DTYPE_F32);
    wf_array *xt = wf_transpose(base, NULL, 0);
    wf_array *y = wf_array_from_data(yv, (int64_t[]){5}, 1, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(cse_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *got = call2(cf, xt, y);
    wf_array *want = call2(f, xt, y);
    CHECK_NOT_NULL(got);
    CHECK(max_abs_diff(want, got) <= 1e-5);
    wf_release(base);
    wf_release(xt);
    wf_release(y);
    wf_release(got);
    wf_release(want);
    wf_fn_release(cf);
    wf_fn_release(f);
}

static void test_simplify_merges_equal_nodes(void)
{
    wf_set_compile_mode(WF_COMPILE_NO_FUSE);
    wf_fn *f = wf_fn_new(cse_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *x = ramp(64, 1.0), *y = ramp(64, 2.0);
    wf_array *warm = call2(cf, x, y); /* traces */
    wf_eval(&warm, 1);
    uint64_t before = wf__kernels_run();
    wf_array *got = call2(cf, x, y);
    wf_eval(&got, 1);
    /* multiply, exp, add, add: 4 kernels (5 uncompiled) */
    CHECK_EQ_INT(wf__kernels_run() - before, 4);
    wf_array *want = call2(f, x, y);
    CHECK(max_abs_diff(want, got) == 0.0);
    wf_set_compile_mode(WF_COMPILE_ENABLED);
    wf_release(x);
    wf_release(y);
    wf_release(warm);
    wf_release(got);
    wf_release(want);
    wf_fn_release(cf);
    wf_fn_release(f);
}

struct log_capture {
    int infos, warnings;
    char last[512];
};

static void capture_log(void *ctx, wf_compile_log_level level, const char *message)
{
    struct log_capture *c = ctx;
    if (level == WF_COMPILE_LOG_WARNING)
        c->warnings++;
    else
        c->infos++;
    snprintf(c->last, sizeof c->last, "%s", message);
}

static void test_retrace_reason_and_warning(void)
{
    struct log_capture log = {0};
    wf_compile_set_log(capture_log, &log);
    wf_compile_options o = wf_compile_options_default();
    o.retrace_warning = 2;
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    wf_array *a = ramp(4, 1.0), *b = ramp(8, 1.0), *c = ramp(9, 1.0);
    wf_array *r1 = call1(cf, a), *r2 = call1(cf, b);
    CHECK_EQ_INT(log.infos, 1);
    CHECK_STR_CONTAINS(log.last, "input 0: dimension 0 changed (4 -> 8)");
    wf_array *r3 = call1(cf, c);
    CHECK_EQ_INT(log.warnings, 1); /* 3 traces > 2 */
    CHECK_STR_CONTAINS(log.last, "traced 3 times");
    wf_array *r4 = call1(cf, a); /* cached: no message */
    CHECK_EQ_INT(log.infos, 2);
    CHECK_EQ_INT(stats_of(cf).traces, 3);
    wf_compile_set_log(NULL, NULL);
    wf_release(a);
    wf_release(b);
    wf_release(c);
    wf_release(r1);
    wf_release(r2);
    wf_release(r3);
    wf_release(r4);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* The sum of every input, however many. */
static wf_status sum_inputs_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    wf_array *acc = wf_sum(in[0], NULL, 0, false);
    for (size_t i = 1; acc && i < n; i++) {
        wf_array *s = wf_sum(in[i], NULL, 0, false), *next = wf_add(acc, s);
        wf_release(s), wf_release(acc);
        acc = next;
    }
    out[0] = acc;
    *nout = 1;
    return acc ? WF_OK : wf_last_error();
}

/* Each kind of input change names itself in the retrace message, and the
 * results stay those of the uncompiled function. */
static void test_retrace_reasons(void)
{
    struct log_capture log = {0};
    wf_compile_set_log(capture_log, &log);
    wf_fn *f = wf_fn_new(sum_inputs_body, NULL, NULL), *cf = wf_compile(f, NULL);
    wf_array *x = ramp(4, 1.0), *xd = wf_astype(x, WF_DTYPE_F64);
    const int64_t s22[2] = {2, 2};
    wf_array *x2 = wf_reshape(xd, s22, 2);
    struct {
        wf_array *in[2];
        size_t n;
        const char *why;
    } calls[4] = {
        {{x, NULL}, 1, NULL},
        {{xd, NULL}, 1, "input 0: dtype float32 -> float64"},
        {{x2, NULL}, 1, "input 0: rank 1 -> 2"},
        {{x2, x}, 2, "the number of inputs changed (1 -> 2)"},
    };
    for (int k = 0; k < 4; k++) {
        wf_array *got = NULL, *want = NULL;
        size_t n1 = 1, n2 = 1;
        log.last[0] = 0;
        if (CHECK_OK(wf_fn_call(cf, calls[k].in, calls[k].n, &got, &n1)) &&
            CHECK_OK(wf_fn_call(f, calls[k].in, calls[k].n, &want, &n2)))
            CHECK(max_abs_diff(want, got) <= 1e-6);
        if (calls[k].why)
            CHECK_STR_CONTAINS(log.last, calls[k].why);
        wf_release(got), wf_release(want);
    }
    CHECK_EQ_INT(log.infos, 3);
    wf_compile_set_log(NULL, NULL);
    wf_release(x), wf_release(xd), wf_release(x2);
    wf_fn_release(cf), wf_fn_release(f);
}

/* A compiled chain8 called on n elements gives n elements, as uncompiled. */
static void check_chain8_call(wf_fn *cf, int64_t n)
{
    wf_array *x = ramp(n, 3.0);
    wf_array *got = call1(cf, x), *want = chain8(x);
    CHECK_NOT_NULL(got);
    CHECK_EQ_INT(wf_array_dim(got, 0), n);
    CHECK(max_abs_diff(want, got) <= 1e-6);
    wf_release(x);
    wf_release(got);
    wf_release(want);
}

static void test_shapeless_one_trace_for_all_shapes(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    for (int64_t n = 1; n < 3000; n = n * 3 + 1)
        check_chain8_call(cf, n);
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* x * w + b: a scalar constant and a row of biases, broadcast implicitly. */
static wf_status affine_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *y = wf_keep(wf_add(wf_multiply(in[0], wf_scalar(1.5, WF_DTYPE_F32)), in[1]));
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static wf_array *ramp2(int64_t rows, int64_t cols)
{
    wf_array *flat = ramp(rows * cols, 2.0);
    wf_array *x = wf_reshape(flat, (int64_t[]){rows, cols}, 2);
    wf_release(flat);
    return x;
}

/* Implicit broadcasts (a scalar constant, a bias row) follow the call's
 * shapes, whichever shape traced first and in every compile mode. */
static void test_shapeless_implicit_broadcasts_follow_the_shapes(void)
{
    const wf_compile_mode modes[] = {WF_COMPILE_ENABLED, WF_COMPILE_NO_FUSE,
                                     WF_COMPILE_NO_SIMPLIFY};
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        CHECK_OK(wf_set_compile_mode(modes[m]));
        wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
        wf_fn *cf = wf_compile(f, &o);
        const int64_t sizes[] = {16, 33, 1, 1000, 16};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            check_chain8_call(cf, sizes[k]);
        CHECK_EQ_INT(stats_of(cf).traces, 1);
        wf_fn_release(cf);
        wf_fn_release(f);

        wf_fn *g = wf_fn_new(affine_body, NULL, NULL);
        wf_fn *cg = wf_compile(g, &o);
        const int64_t rows[] = {8, 3, 1, 50}, cols[] = {4, 4, 7, 1};
        for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
            wf_array *x = ramp2(rows[k], cols[k]);
            wf_array *b = ramp(cols[k], 1.0);
            wf_array *got = call2(cg, x, b);
            wf_array *want = wf_add(wf_multiply(x, wf_scalar(1.5, WF_DTYPE_F32)), b);
            CHECK_NOT_NULL(got);
            if (got) {
                CHECK_EQ_INT(wf_array_dim(got, 0), rows[k]);
                CHECK_EQ_INT(wf_array_dim(got, 1), cols[k]);
                CHECK(max_abs_diff(want, got) <= 1e-6);
            }
            wf_release(x);
            wf_release(b);
            wf_release(got);
            wf_release(want);
        }
        CHECK_EQ_INT(stats_of(cg).traces, 1);
        wf_fn_release(cg);
        wf_fn_release(g);
    }
    CHECK_OK(wf_set_compile_mode(WF_COMPILE_ENABLED));
}

static wf_status explicit_broadcast_body(void *payload, wf_array *const *in, size_t n,
                                         wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *y = wf_broadcast_to(in[0], (int64_t[]){3, 4}, 2);
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

/* A broadcast the function asks for keeps its shape at every call (MLX's
 * shapeless semantics): inputs that broadcast to it work, others fail with
 * a shape error and leave the function usable. */
static void test_shapeless_keeps_an_explicit_broadcast(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(explicit_broadcast_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    const int64_t sizes[] = {4, 1, 5, 4};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        wf_array *x = ramp(sizes[i], 1.0 + (double)i);
        wf_array *y = call1(cf, x);
        if (sizes[i] == 5) {
            CHECK(y == NULL);
            CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
            CHECK_STR_CONTAINS(wf_last_error_message(), "broadcast");
        } else if (CHECK_NOT_NULL(y)) {
            wf_array *want = call1(f, x);
            CHECK_EQ_INT(wf_array_dim(y, 0), 3);
            CHECK_EQ_INT(wf_array_dim(y, 1), 4);
            CHECK(max_abs_diff(want, y) == 0.0);
            wf_release(want);
        }
        wf_release(y);
        wf_release(x);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
}

static wf_status reshape_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    int64_t shape[1] = {-1};
    wf_array *t = wf_transpose(in[0], NULL, 0);
    wf_array *y = wf_reshape(t, shape, 1);
    wf_release(t);
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

/* reshape(transpose(x), -1): the -1 is inferred again at each call. */
static void test_shapeless_reshape_infers_each_call(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(reshape_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    const int64_t shapes[][2] = {{2, 3}, {4, 5}, {1, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        wf_array *x = ramp2(shapes[i][0], shapes[i][1]);
        wf_array *y = call1(cf, x), *want = call1(f, x);
        if (CHECK_NOT_NULL(y)) {
            CHECK_EQ_INT(wf_array_ndim(y), 1);
            CHECK_EQ_INT(wf_array_dim(y, 0), shapes[i][0] * shapes[i][1]);
            CHECK(max_abs_diff(want, y) == 0.0);
        }
        wf_release(y);
        wf_release(want);
        wf_release(x);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
}

static wf_status failing_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)in;
    (void)n;
    (void)out;
    (void)nout;
    return WF_ERR_KERNEL;
}

static wf_status evaluating_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *y = wf_exp(in[0]);
    wf_status st = wf_eval(&y, 1); /* reads a traced value: refused */
    wf_release(y);
    if (st != WF_OK)
        return st;
    out[0] = wf_exp(in[0]);
    *nout = 1;
    return WF_OK;
}

static void test_failures_leave_no_entry_and_allow_retry(void)
{
    wf_array *x = ramp(16, 1.0);
    wf_fn *f = wf_fn_new(failing_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    CHECK(call1(cf, x) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_KERNEL);
    CHECK(call1(cf, x) == NULL); /* retried: traced again */
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.traces, 2);
    CHECK_EQ_INT(s.entries, 0);
    wf_fn_release(cf);
    wf_fn_release(f);

    f = wf_fn_new(evaluating_body, NULL, NULL);
    cf = wf_compile(f, NULL);
    CHECK(call1(cf, x) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "placeholder");
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(x);
}

static void test_modes_are_part_of_the_key(void)
{
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *x = ramp(1000, 2.0);
    wf_array *want = chain8(x);
    wf_compile_mode modes[] = {WF_COMPILE_ENABLED, WF_COMPILE_NO_FUSE, WF_COMPILE_NO_SIMPLIFY,
                               WF_COMPILE_DISABLED, WF_COMPILE_ENABLED};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        CHECK_OK(wf_set_compile_mode(modes[i]));
        CHECK_EQ_INT(wf_get_compile_mode(), modes[i]);
        uint64_t fused = wf__fused_kernels_run();
        wf_array *got = call1(cf, x);
        wf_eval(&got, 1);
        CHECK(max_abs_diff(want, got) <= 1e-6);
        CHECK_EQ_INT(wf__fused_kernels_run() - fused, modes[i] == WF_COMPILE_ENABLED);
        wf_release(got);
    }
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.traces, 3);       /* enabled, no-fuse, no-simplify */
    CHECK_EQ_INT(s.inline_calls, 1); /* disabled */
    CHECK_EQ_INT(s.hits, 1);         /* enabled again */
    CHECK_STATUS(wf_set_compile_mode((wf_compile_mode)7), WF_ERR_INVALID_ARGUMENT);
    wf_release(x);
    wf_release(want);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* outer(x) = inner(x) * 2, with inner compiled: inlined while outer traces. */
struct nested {
    wf_fn *inner;
};

static wf_status outer_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    struct nested *p = payload;
    wf_array *y = call1(p->inner, in[0]);
    if (!y)
        return wf_last_error();
    wf_array *two = wf_scalar(2.0, WF_DTYPE_F32);
    out[0] = wf_multiply(y, two);
    wf_release(y);
    wf_release(two);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_nested_compiled_calls_are_inlined(void)
{
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    struct nested p = {wf_compile(f, NULL)};
    wf_fn *outer_plain = wf_fn_new(outer_body, &p, NULL);
    wf_fn *outer = wf_compile(outer_plain, NULL);
    wf_fn_release(outer_plain);
    wf_fn_release(f);
    wf_array *x = ramp(500, 2.0);
    wf_array *got = call1(outer, x);
    wf_scope_begin();
    wf_array *want = wf_keep(wf_multiply(chain8(x), wf_scalar(2.0, WF_DTYPE_F32)));
    wf_scope_end();
    CHECK(max_abs_diff(want, got) <= 1e-5);
    wf_compile_stats inner = stats_of(p.inner);
    CHECK_EQ_INT(inner.inline_calls, 1);
    CHECK_EQ_INT(inner.traces, 0);
    wf_release(x);
    wf_release(got);
    wf_release(want);
    wf_fn_release(outer);
    wf_fn_release(p.inner);
}

static void test_release_erases_and_limits_evict(void)
{
    wf_compile_stats g0 = wf_compile_stats_default();
    wf_compile_stats_get(NULL, &g0);
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    CHECK_OK(wf_compile_set_cache_limits(2, 0));
    for (int64_t n = 1; n <= 4; n++) {
        wf_array *x = ramp(n, 1.0), *y = call1(cf, x);
        CHECK_NOT_NULL(y);
        wf_release(x);
        wf_release(y);
    }
    wf_compile_stats s = stats_of(cf);
    CHECK_EQ_INT(s.entries, 2);
    CHECK_EQ_INT(s.evictions, 2);
    CHECK_OK(wf_compile_set_cache_limits(0, 0));
    wf_fn_release(cf);
    wf_compile_stats g1 = wf_compile_stats_default();
    wf_compile_stats_get(NULL, &g1);
    CHECK_EQ_INT(g1.erases - g0.erases, 2);
    CHECK_EQ_INT(g1.entries, g0.entries);
    wf_fn_release(f);
}

static void test_bad_input(void)
{
    CHECK_NULL_WITH(wf_compile(NULL, NULL), WF_ERR_NULL_ARGUMENT);
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_compile_options o = wf_compile_options_default();
    o.struct_size = 3;
    CHECK_NULL_WITH(wf_compile(f, &o), WF_ERR_INVALID_ARGUMENT);
    o = wf_compile_options_default();
    o.retrace_warning = -1;
    CHECK_NULL_WITH(wf_compile(f, &o), WF_ERR_INVALID_ARGUMENT);
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_STATUS(wf_compile_stats_get(f, &s), WF_ERR_INVALID_ARGUMENT); /* not compiled */
    CHECK_STATUS(wf_compile_stats_get(NULL, NULL), WF_ERR_NULL_ARGUMENT);
    s.struct_size = 1;
    CHECK_STATUS(wf_compile_stats_get(NULL, &s), WF_ERR_INVALID_ARGUMENT);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *out[1];
    size_t n = 1;
    CHECK_STATUS(wf_fn_call(cf, NULL, 1, out, &n), WF_ERR_NULL_ARGUMENT);
    wf_array *bad[1] = {NULL};
    n = 1;
    CHECK(wf_fn_call(cf, bad, 1, out, &n) != WF_OK);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* ------------------------------------------------------------ random keys */

static wf_status random_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)n;
    const wf_key *key = payload; /* NULL: the thread's default key */
    wf_array *r = wf_random_uniform(wf_array_shape(in[0]), wf_array_ndim(in[0]), WF_DTYPE_F32,
                                    0.0, 1.0, key);
    if (!r)
        return wf_last_error();
    out[0] = wf_add(in[0], r);
    wf_release(r);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* The default key is implicit state of each call: fresh numbers per call,
 * the same as uncompiled calls for the same seed (tests/unit/
 * test_compile_random.c covers threads, shapeless, grad and vmap). An
 * explicit key is a parameter: the same numbers every call. */
static void test_random_keys_when_compiled(void)
{
    wf_array *x = ramp(16, 1.0);
    wf_fn *f = wf_fn_new(random_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_random_seed(9);
    wf_array *p1 = call1(f, x), *p2 = call1(f, x);
    wf_random_seed(9);
    wf_array *c1 = call1(cf, x), *c2 = call1(cf, x);
    CHECK(p1 && p2 && c1 && c2);
    CHECK(max_abs_diff(p1, c1) == 0.0 && max_abs_diff(p2, c2) == 0.0);
    CHECK(max_abs_diff(c1, c2) > 0.0); /* not baked into the trace */
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    wf_release(p1);
    wf_release(p2);
    wf_release(c1);
    wf_release(c2);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_key key = wf_random_key(42);
    f = wf_fn_new(random_body, &key, NULL);
    cf = wf_compile(f, NULL);
    wf_array *a = call1(cf, x), *b = call1(f, x), *again = call1(cf, x);
    CHECK(a && b && max_abs_diff(a, b) == 0.0); /* same key, same numbers */
    CHECK(again && max_abs_diff(a, again) == 0.0);
    wf_release(a);
    wf_release(b);
    wf_release(again);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(x);
}

/* ------------------------------------------------------------ transforms */

/* sum(chain8(x) * y) */
static wf_status loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *l = wf_keep(wf_sum(wf_multiply(chain8(in[0]), in[1]), NULL, 0, false));
    wf_scope_end();
    if (!l)
        return wf_last_error();
    out[0] = l;
    *nout = 1;
    return WF_OK;
}

static void grads_of(wf_fn *g, wf_array *x, wf_array *y, wf_array **gx, wf_array **gy)
{
    wf_array *in[2] = {x, y}, *out[2] = {NULL, NULL};
    size_t n = 2;
    CHECK_OK(wf_fn_call(g, in, 2, out, &n));
    CHECK_EQ_SIZE(n, 2);
    *gx = out[0];
    *gy = out[1];
}

static void test_grad_of_compiled_and_compiled_grad(void)
{
    /* x in [1.2, 3.2]: the chain's sqrt stays away from 0 (finite gradients). */
    wf_array *r = ramp(4099, 2.0), *off = wf_scalar(1.5, WF_DTYPE_F32);
    wf_array *x = wf_add(r, off), *y = ramp(4099, -2.0);
    wf_release(r);
    wf_release(off);
    wf_fn *f = wf_fn_new(loss_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    int argnums[2] = {0, 1};
    wf_fn *g = wf_grad(f, argnums, 2), *gc = wf_grad(cf, argnums, 2);
    wf_fn *cg = wf_compile(g, NULL);
    wf_array *gx, *gy, *gcx, *gcy, *cgx, *cgy;
    grads_of(g, x, y, &gx, &gy);
    grads_of(gc, x, y, &gcx, &gcy); /* differentiates f's (unfused) trace */
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    CHECK(max_abs_diff(gx, gcx) <= 1e-5 && max_abs_diff(gy, gcy) <= 1e-5);
    uint64_t fused = wf__fused_kernels_run();
    grads_of(cg, x, y, &cgx, &cgy); /* traces and fuses the gradient computation */
    wf_eval(&cgx, 1);
    wf_eval(&cgy, 1);
    CHECK(wf__fused_kernels_run() > fused);
    CHECK(max_abs_diff(gx, cgx) <= 1e-5 && max_abs_diff(gy, cgy) <= 1e-5);
    wf_compile_stats s = stats_of(cg);
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.inline_calls, 0);
    wf_array *all[] = {gx, gy, gcx, gcy, cgx, cgy, x, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        wf_release(all[i]);
    wf_fn_release(cg);
    wf_fn_release(gc);
    wf_fn_release(g);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* ------------------------------------------------------------ several outputs */

/* y = exp(x * 2 + 1); returns (y, sum(y * 3 + x)): y is read by the second
 * chain and returned, so without several outputs the chain is cut at y
 * (two fused kernels). */
static wf_status two_output_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *two = wf_scalar(2.0, WF_DTYPE_F32), *one = wf_scalar(1.0, WF_DTYPE_F32);
    wf_array *three = wf_scalar(3.0, WF_DTYPE_F32);
    wf_array *y = wf_keep(wf_exp(wf_add(wf_multiply(in[0], two), one)));
    wf_array *s = wf_keep(wf_sum(wf_add(wf_multiply(y, three), in[0]), NULL, 0, false));
    wf_scope_end();
    if (!y || !s) {
        wf_release(y);
        wf_release(s);
        return wf_last_error();
    }
    out[0] = y;
    out[1] = s;
    *nout = 2;
    return WF_OK;
}

static void call_two_outputs(wf_fn *f, wf_array *x, wf_array **out)
{
    size_t n = 2;
    out[0] = out[1] = NULL;
    CHECK_OK(wf_fn_call(f, &x, 1, out, &n));
    CHECK_EQ_SIZE(n, 2);
    CHECK_OK(wf_eval(out, 2));
}

static void test_intermediate_outputs_fuse_into_one_kernel(void)
{
    wf_fn *f = wf_fn_new(two_output_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *x = ramp(70001, 1.5), *want[2], *got[2], *unfused[2];
    call_two_outputs(f, x, want);
    CHECK_OK(wf_set_compile_mode(WF_COMPILE_NO_FUSE));
    call_two_outputs(cf, x, unfused);
    CHECK_OK(wf_set_compile_mode(WF_COMPILE_ENABLED));
    uint64_t fused = wf__fused_kernels_run();
    call_two_outputs(cf, x, got); /* traces */
    CHECK_EQ_INT(wf__fused_kernels_run() - fused, 1);
    /* Element-wise ops are not reassociated: the same bits as op by op. */
    for (int k = 0; k < 2; k++) {
        CHECK(max_abs_diff(want[k], got[k]) == 0.0);
        CHECK(max_abs_diff(unfused[k], got[k]) == 0.0);
    }
    wf_array *again[2];
    fused = wf__fused_kernels_run();
    uint64_t kernels = wf__kernels_run();
    call_two_outputs(cf, x, again); /* a replay of the cached multi-output trace */
    /* One fused kernel writes y and y * 3 + x; then the two outputs' views
     * and the sum (a chain cut at y would run two fused kernels). */
    CHECK_EQ_INT(wf__fused_kernels_run() - fused, 1);
    CHECK_EQ_INT(wf__kernels_run() - kernels, 4);
    CHECK(max_abs_diff(want[0], again[0]) == 0.0 && max_abs_diff(want[1], again[1]) == 0.0);
    CHECK_EQ_INT(stats_of(cf).hits, 1);
    wf_array *all[] = {x, want[0], want[1], got[0], got[1], unfused[0], unfused[1],
                       again[0], again[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        wf_release(all[i]);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* Outputs of 16 MB and more are streamed past the caches from scratch
 * tiles: the same bits, one output or two, and a size that ends mid-line. */
static void test_large_outputs_stream_with_the_same_bits(void)
{
    const int64_t n = ((int64_t)1 << 22) + 37;
    wf_array *x = ramp(n, 2.0);
    wf_fn *f = wf_fn_new(chain8_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *want = chain8(x);
    uint64_t fused = wf__fused_kernels_run();
    wf_array *got = call1(cf, x);
    CHECK_NOT_NULL(got);
    CHECK(max_abs_diff(want, got) == 0.0); /* evaluates got: one fused kernel */
    CHECK_EQ_INT(wf__fused_kernels_run() - fused, 1);
    wf_release(got);
    wf_release(want);
    wf_fn_release(cf);
    wf_fn_release(f);

    wf_fn *g = wf_fn_new(two_output_body, NULL, NULL);
    wf_fn *cg = wf_compile(g, NULL);
    wf_array *want2[2], *got2[2];
    call_two_outputs(g, x, want2);
    call_two_outputs(cg, x, got2);
    for (int k = 0; k < 2; k++) {
        CHECK(max_abs_diff(want2[k], got2[k]) == 0.0);
        wf_release(want2[k]);
        wf_release(got2[k]);
    }
    wf_fn_release(cg);
    wf_fn_release(g);
    wf_release(x);
}

/* (x, b) -> every step of a six-step chain (b a row, implicitly broadcast):
 * more intermediates are read outside than one fused node has outputs. */
static wf_status ladder_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *step[6];
    step[0] = wf_multiply(in[0], in[1]);
    step[1] = wf_exp(step[0]);
    step[2] = wf_add(step[1], wf_scalar(1.0, WF_DTYPE_F32));
    step[3] = wf_tanh(step[2]);
    step[4] = wf_multiply(step[3], in[0]);
    step[5] = wf_subtract(step[4], in[1]);
    for (int k = 0; k < 6; k++)
        out[k] = wf_keep(step[k]);
    wf_scope_end();
    *nout = 6;
    for (int k = 0; k < 6; k++)
        if (!out[k]) {
            for (int j = 0; j < 6; j++)
                wf_release(out[j]);
            return wf_last_error();
        }
    return WF_OK;
}

/* Four outputs at most per fused node: the six steps take two fused
 * kernels (steps 6..3, then 2..1), at every shape with the same bits as op
 * by op. (Not shapeless: there step 3 reads one of its group's three
 * leaves, so that group keeps one output; see
 * test_shapeless_outputs_keep_their_shapes.) */
static void test_outputs_beyond_the_limit_start_another_group(void)
{
    wf_fn *f = wf_fn_new(ladder_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    const int64_t rows[] = {8, 3, 1, 50}, cols[] = {4, 4, 7, 1};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        wf_array *x = ramp2(rows[k], cols[k]), *b = ramp(cols[k], 1.0);
        wf_array *in[2] = {x, b}, *want[6], *got[6];
        size_t nw = 6, ng = 6;
        CHECK_OK(wf_fn_call(f, in, 2, want, &nw));
        uint64_t fused = wf__fused_kernels_run();
        CHECK_OK(wf_fn_call(cf, in, 2, got, &ng));
        CHECK_OK(wf_eval(got, ng));
        CHECK_EQ_INT(wf__fused_kernels_run() - fused, 2);
        for (size_t i = 0; i < 6 && nw == 6 && ng == 6; i++) {
            CHECK_EQ_INT(wf_array_dim(got[i], 0), rows[k]);
            CHECK_EQ_INT(wf_array_dim(got[i], 1), cols[k]);
            CHECK(max_abs_diff(want[i], got[i]) == 0.0);
        }
        for (size_t i = 0; i < nw; i++)
            wf_release(want[i]);
        for (size_t i = 0; i < ng; i++)
            wf_release(got[i]);
        wf_release(x);
        wf_release(b);
    }
    CHECK_EQ_INT(stats_of(cf).traces, 4);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* (x, w) -> (x * w, exp(x * w) + x) when *payload is 0, else
 * (exp(w), exp(w) + x): in the second, the returned intermediate reads w
 * only, so a shapeless call may give it a smaller shape than the sum's. */
static wf_status exposed_shape_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                    size_t *nout)
{
    (void)n;
    bool reads_w_only = *(const int *)payload != 0;
    wf_scope_begin();
    wf_array *e = reads_w_only ? wf_exp(in[1]) : wf_multiply(in[0], in[1]);
    out[0] = wf_keep(e);
    out[1] = wf_keep(wf_add(reads_w_only ? e : wf_exp(e), in[0]));
    wf_scope_end();
    *nout = 2;
    if (!out[0] || !out[1]) {
        wf_release(out[0]);
        wf_release(out[1]);
        return wf_last_error();
    }
    return WF_OK;
}

/* Shapeless: an intermediate output keeps its own shape at every call (it
 * is fused as an output only when it reads every leaf of the chain). */
static void test_shapeless_outputs_keep_their_shapes(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    for (int variant = 0; variant < 2; variant++) {
        wf_fn *f = wf_fn_new(exposed_shape_body, &variant, NULL);
        wf_fn *cf = wf_compile(f, &o);
        const int64_t xrows[] = {4, 3, 3, 1}, wrows[] = {4, 1, 3, 1};
        for (size_t k = 0; k < sizeof xrows / sizeof xrows[0]; k++) {
            wf_array *x = ramp2(xrows[k], 4), *w = ramp2(wrows[k], 4);
            wf_array *in[2] = {x, w}, *want[2], *got[2];
            size_t nw = 2, ng = 2;
            CHECK_OK(wf_fn_call(f, in, 2, want, &nw));
            uint64_t fused = wf__fused_kernels_run();
            CHECK_OK(wf_fn_call(cf, in, 2, got, &ng));
            CHECK_OK(wf_eval(got, ng));
            /* the first variant is one fused kernel; the second fuses nothing */
            CHECK_EQ_INT(wf__fused_kernels_run() - fused, variant == 0);
            for (size_t i = 0; i < 2 && nw == 2 && ng == 2; i++) {
                CHECK_EQ_INT(wf_array_dim(got[i], 0), wf_array_dim(want[i], 0));
                CHECK(max_abs_diff(want[i], got[i]) == 0.0);
            }
            for (size_t i = 0; i < nw; i++)
                wf_release(want[i]);
            for (size_t i = 0; i < ng; i++)
                wf_release(got[i]);
            wf_release(x);
            wf_release(w);
        }
        CHECK_EQ_INT(stats_of(cf).traces, 1);
        wf_fn_release(cf);
        wf_fn_release(f);
    }
}

/* ------------------------------------------------------------ differential */

/* A generated graph: a deterministic sequence of element-wise, broadcast,
 * reduction and shape ops over x (a, b) and y (b), chosen by the seed; x is
 * row-major, a transposed view or a result laid out like one (seed % 3). */
static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static wf_status generated_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)n;
    uint64_t s = *(const uint64_t *)payload;
    wf_scope_begin();
    wf_array *values[24];
    int count = 0;
    values[count++] = in[0];
    values[count++] = wf_broadcast_to(in[1], wf_array_shape(in[0]), 2);
    int steps = 6 + (int)(next_random(&s) % 12);
    for (int k = 0; k < steps && count < 24; k++) {
        wf_array *a = values[next_random(&s) % (uint64_t)count];
        wf_array *b = values[next_random(&s) % (uint64_t)count];
        wf_array *r = NULL;
        switch (next_random(&s) % 12) {
        case 0: r = wf_add(a, b); break;
        case 1: r = wf_subtract(a, b); break;
        case 2: r = wf_multiply(a, b); break;
        case 3: r = wf_maximum(a, b); break;
        case 4: r = wf_minimum(a, wf_scalar(0.5, WF_DTYPE_F32)); break;
        case 5: r = wf_tanh(a); break;
        case 6: r = wf_sin(a); break;
        case 7: r = wf_sqrt(wf_abs(a)); break;
        case 8: r = wf_multiply(a, wf_scalar(1.25, WF_DTYPE_F32)); break;
        case 9: r = wf_add(a, wf_sum(b, (int[]){0}, 1, true)); break;  /* reduce + broadcast */
        case 10: r = wf_exp(wf_negative(wf_square(a))); break;
        default: r = wf_add(wf_transpose(wf_transpose(a, NULL, 0), NULL, 0), b); break;
        }
        if (r)
            values[count++] = r;
    }
    wf_array *result = wf_keep(wf_add(values[count - 1], values[count / 2]));
    wf_array *second = wf_keep(wf_sum(values[count - 2], (int[]){1}, 1, false));
    /* An intermediate returned too: fused groups expose it as an output. */
    wf_array *third = wf_keep(values[2 + (int)(next_random(&s) % (uint64_t)(count - 3))]);
    wf_scope_end();
    if (!result || !second || !third) {
        wf_release(result);
        wf_release(second);
        wf_release(third);
        return wf_last_error();
    }
    out[0] = result;
    out[1] = second;
    out[2] = third;
    *nout = 3;
    return WF_OK;
}

static void test_generated_graphs_compiled_vs_not(void)
{
    int fused_graphs = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t s = seed * 7919;
        int64_t a = 1 + (int64_t)(next_random(&s) % 40), b = 1 + (int64_t)(next_random(&s) % 300);
        float *xv = malloc((size_t)(a * b) * sizeof *xv), *yv = malloc((size_t)b * sizeof *yv);
        for (int64_t i = 0; i < a * b; i++)
            xv[i] = (float)((int)(next_random(&s) % 2001) - 1000) / 500.0f;
        for (int64_t i = 0; i < b; i++)
            yv[i] = (float)((int)(next_random(&s) % 2001) - 1000) / 500.0f;
        /* x row-major, a transposed view, or a result laid out like one */
        const int layout = (int)(seed % 3);
        wf_array *x = wf_array_from_data(xv, layout ? (int64_t[]){b, a} : (int64_t[]){a, b}, 2,
                                         WF_DTYPE_F32);
        if (layout) {
            wf_array *view = wf_transpose(x, NULL, 0);
            wf_release(x);
            x = view;
        }
        if (layout == 2) {
            wf_array *zero = wf_scalar(0.0, WF_DTYPE_F32), *result = wf_add(x, zero);
            CHECK_OK(wf_eval(&result, 1));
            wf_release(zero);
            wf_release(x);
            x = result;
        }
        wf_array *y = wf_array_from_data(yv, &b, 1, WF_DTYPE_F32);
        free(xv);
        free(yv);
        wf_fn *f = wf_fn_new(generated_body, &seed, NULL);
        wf_fn *cf = wf_compile(f, NULL);
        wf_array *in[2] = {x, y}, *want[3], *got[3];
        size_t nw = 3, ng = 3;
        uint64_t fused = wf__fused_kernels_run();
        CHECK_OK(wf_fn_call(f, in, 2, want, &nw));
        CHECK_OK(wf_fn_call(cf, in, 2, got, &ng));
        CHECK_EQ_SIZE(ng, 3);
        for (int k = 0; k < 3 && nw == 3 && ng == 3; k++) {
            wf_array *scale = wf_add(wf_abs(want[k]), wf_scalar(1.0, WF_DTYPE_F32));
            wf_array *rel = wf_divide(wf_abs(wf_subtract(want[k], got[k])), scale);
            double worst = 1;
            wf_array *m = wf_max(rel, NULL, 0, false);
            CHECK_OK(wf_array_item(m, &worst));
            if (!CHECK(worst <= 1e-5))
                fprintf(stderr, "    seed %llu output %d: relative difference %g\n",
                        (unsigned long long)seed, k, worst);
            wf_release(m);
            wf_release(rel);
            wf_release(scale);
        }
        fused_graphs += wf__fused_kernels_run() > fused;
        for (size_t k = 0; k < nw; k++)
            wf_release(want[k]);
        for (size_t k = 0; k < ng; k++)
            wf_release(got[k]);
        wf_fn_release(cf);
        wf_fn_release(f);
        wf_release(x);
        wf_release(y);
    }
    CHECK(fused_graphs > 100); /* the comparison exercised fusion, not just replay */
}

/* Active bytes now, and peak bytes since the last reset. */
static size_t memory_active(void)
{
    wf_memory_stats m = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&m));
    return m.active_bytes;
}

static size_t memory_peak(void)
{
    wf_memory_stats m = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&m));
    return m.peak_bytes;
}

/* cf(a, b), evaluated, against `want` through one fused kernel; *extra
 * gets the peak bytes beyond what is active after the call (scratch). */
static wf_array *fused_call(wf_fn *cf, wf_array *a, wf_array *b, wf_array *want, size_t *extra)
{
    wf_reset_peak_memory();
    const uint64_t fused = wf__fused_kernels_run();
    wf_array *got = call2(cf, a, b);
    CHECK_OK(wf_eval(&got, 1));
    CHECK_EQ_INT(wf__fused_kernels_run() - fused, 1);
    *extra = memory_peak() - memory_active();
    CHECK(max_abs_diff(want, got) <= 1e-5);
    return got;
}

/* Inputs that share a transposed layout give a result laid out like them
 * (read in place, as uncompiled element-wise ops do); an input laid out
 * otherwise than the result (x.T beside a row-major y, either side) is
 * copied once in the result's order (the peak shows a copy the size of the
 * result), or gathered element by element when the memory limit leaves no
 * room for the copy. Multiple outputs share the layout. */
static void test_transposed_inputs_fuse(void)
{
    const int64_t rows = 67, cols = 131;
    wf_array *xb = ramp2(cols, rows), *yb = ramp2(cols, rows), *y = ramp2(rows, cols);
    wf_array *xt = wf_transpose(xb, NULL, 0), *yt = wf_transpose(yb, NULL, 0);
    CHECK_OK(wf_eval(&xt, 1));
    wf_fn *f = wf_fn_new(cse_body, NULL, NULL), *cf = wf_compile(f, NULL);
    size_t extra = 0;
    wf_array *want = call2(f, xt, yt);
    wf_array *r = fused_call(cf, xt, yt, want, &extra);
    CHECK(r->strides[0] == 1 && r->strides[1] == rows); /* like x.T */
    CHECK_EQ_SIZE(extra, 0);
    wf_release(r);
    wf_release(want);
    const size_t bytes = (size_t)(rows * cols) * sizeof(float);
    wf_array *mixed[2][2] = {{xt, y}, {y, xt}};
    for (int k = 0; k < 2; k++) {
        want = call2(f, mixed[k][0], mixed[k][1]);
        CHECK_OK(wf_eval(&want, 1));
        r = fused_call(cf, mixed[k][0], mixed[k][1], want, &extra);
        CHECK(r->row_contiguous);
        CHECK(extra >= bytes && extra < 2 * bytes); /* the copy of x.T */
        const size_t copy = extra;
        wf_release(r);
        wf_clear_cache();
        CHECK_OK(wf_set_memory_limit(memory_active() + copy + copy / 2)); /* the result only */
        r = fused_call(cf, mixed[k][0], mixed[k][1], want, &extra);
        CHECK_OK(wf_set_memory_limit(SIZE_MAX));
        CHECK(r->row_contiguous);
        CHECK_EQ_SIZE(extra, 0); /* gathered */
        wf_release(r);
        wf_release(want);
    }
    wf_fn *f2 = wf_fn_new(two_output_body, NULL, NULL), *cf2 = wf_compile(f2, NULL);
    wf_array *want2[2], *got2[2];
    call_two_outputs(f2, xt, want2);
    call_two_outputs(cf2, xt, got2);
    CHECK(got2[0]->strides[0] == 1 && got2[0]->strides[1] == rows);
    for (int k = 0; k < 2; k++) {
        CHECK(max_abs_diff(want2[k], got2[k]) == 0.0);
        wf_release(want2[k]);
        wf_release(got2[k]);
    }
    wf_array *all[] = {xb, yb, y, xt, yt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        wf_release(all[i]);
    wf_fn_release(cf2);
    wf_fn_release(f2);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* ------------------------------------------------------------ every ISA */

/* The fused-vs-uncompiled comparisons above, once per instruction-set
 * variant of the fused executor this CPU runs (forced as WEFT_ISA would),
 * checking that the fused kernels ran on that variant and no other. */
static void test_fused_on_every_isa(void)
{
    const int best = wf__vm_isa_best();
    for (int isa = WF_VM_ISA_BASELINE; isa <= best; isa++) {
        if (!wf_test_runs_isa(isa, best) || !CHECK_OK(wf__vm_isa_force(isa)))
            continue;
        printf("    fused executor: %s\n", wf__vm_isa_name(isa));
        uint64_t before[WF_VM_ISA_COUNT];
        for (int v = 0; v < WF_VM_ISA_COUNT; v++)
            before[v] = wf__cpu_fused_runs(v);
        test_chain_compiles_fuses_and_matches();
        test_broadcast_and_strided_inputs_fuse();
        test_transposed_inputs_fuse();
        test_intermediate_outputs_fuse_into_one_kernel();
        test_large_outputs_stream_with_the_same_bits();
        test_generated_graphs_compiled_vs_not();
        for (int v = 0; v < WF_VM_ISA_COUNT; v++) {
            const uint64_t runs = wf__cpu_fused_runs(v) - before[v];
            if (v == isa)
                CHECK(runs > 100); /* the chain, the broadcast case and >100 graphs */
            else
                CHECK_EQ_INT(runs, 0);
        }
    }
    CHECK_OK(wf__vm_isa_force(-1));
}

/* ------------------------------------------------------------ declared state */

/* (x, count) -> (x * count, count + 1): a step counter kept in a slot. */
static wf_status counter_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    if (n != 2)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT, "counter_body: %zu inputs", n);
    wf_array *one = wf_scalar(1.0, WF_DTYPE_F32);
    out[0] = wf_multiply(in[0], in[1]);
    out[1] = wf_add(in[1], one);
    wf_release(one);
    *nout = 2;
    return out[0] && out[1] ? WF_OK : wf_last_error();
}

static void test_declared_state_in_slots(void)
{
    wf_array *zero = wf_scalar(0.0, WF_DTYPE_F32);
    wf_slot *count = wf_slot_new(zero);
    wf_release(zero);
    wf_compile_options o = wf_compile_options_default();
    o.state = &count;
    o.nstate = 1;
    wf_fn *f = wf_fn_new(counter_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    wf_array *x = ramp(8, 1.0);
    for (int call = 0; call < 4; call++) {
        wf_array *y = call1(cf, x);
        CHECK_NOT_NULL(y);
        wf_array *k = wf_scalar((double)call, WF_DTYPE_F32);
        wf_array *want = wf_multiply(x, k);
        CHECK(y && max_abs_diff(want, y) == 0.0);
        wf_release(y);
        wf_release(want);
        wf_release(k);
    }
    wf_array *now = wf_slot_load(count);
    double v = -1;
    CHECK_OK(wf_array_item(now, &v));
    CHECK_NEAR(v, 4.0, 0);
    wf_release(now);
    CHECK_EQ_INT(stats_of(cf).traces, 1);
    /* Bad declarations. */
    o.state = NULL;
    CHECK_NULL_WITH(wf_compile(f, &o), WF_ERR_NULL_ARGUMENT);
    wf_slot *empty = wf_slot_new(NULL);
    o.state = &empty;
    wf_fn *ce = wf_compile(f, &o);
    CHECK(call1(ce, x) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    wf_fn_release(ce);
    wf_slot_release(empty);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_slot_release(count); /* the compiled function held its own reference */
    wf_release(x);
}

int main(void)
{
    RUN_TEST(test_intermediate_outputs_fuse_into_one_kernel);
    RUN_TEST(test_large_outputs_stream_with_the_same_bits);
    RUN_TEST(test_outputs_beyond_the_limit_start_another_group);
    RUN_TEST(test_shapeless_outputs_keep_their_shapes);
    RUN_TEST(test_fused_on_every_isa); /* chain, broadcast, outputs, generated graphs per ISA */
    RUN_TEST(test_simplify_merges_equal_nodes);
    RUN_TEST(test_retrace_reason_and_warning);
    RUN_TEST(test_retrace_reasons);
    RUN_TEST(test_shapeless_one_trace_for_all_shapes);
    RUN_TEST(test_shapeless_reshape_infers_each_call);
    RUN_TEST(test_shapeless_implicit_broadcasts_follow_the_shapes);
    RUN_TEST(test_shapeless_keeps_an_explicit_broadcast);
    RUN_TEST(test_failures_leave_no_entry_and_allow_retry);
    RUN_TEST(test_modes_are_part_of_the_key);
    RUN_TEST(test_nested_compiled_calls_are_inlined);
    RUN_TEST(test_release_erases_and_limits_evict);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_random_keys_when_compiled);
    RUN_TEST(test_grad_of_compiled_and_compiled_grad);
    RUN_TEST(test_declared_state_in_slots);
    return TEST_SUMMARY();
}
