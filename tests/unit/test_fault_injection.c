/*
 * Allocation-failure loops (issue 30; util/fault.h, docs/FAULTS.md).
 *
 * Each scenario is a small weft program that checks its own result against
 * a reference computed here with plain loops. The driver first runs it with
 * the fault countdown armed but out of reach, to count its fallible
 * operations T (allocations, thread creations, mmaps, kernels), then runs it
 * again with the Nth operation failing, for N = 1, 2, ... until a run
 * completes without reaching the fault. After every run:
 *   - the scenario either succeeded with the right values (a fault that was
 *     absorbed, e.g. a scratch buffer with a fallback) or failed with a
 *     status and a non-empty message, never a wrong value, a crash or abort;
 *   - live array nodes, active buffer bytes, live streams and the process's
 *     threads are back at their baseline (LeakSanitizer checks the rest at
 *     exit in the ASan build);
 *   - the same scenario, run again without a fault, gives the right values
 *     (nothing cached a failure or was left half-built).
 * A concurrent variant injects while 4 threads keep evaluating, and the
 * fork scenario runs each injection in a child process (stream workers and
 * the intra-op pool are recreated there, so thread creation fails too).
 *
 * `make test` samples N (the first few, then evenly up to T);
 * WEFT_FAULTS_FULL=1 (`make faults`) runs every N.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "harness.h"
#include "settle.h"
#include "util/fault.h"
#include "weft_nn.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* Runs per scenario after the first FIRST_RUNS, and rounds of the
 * concurrent test, in `make test` (WEFT_FAULTS_FULL=1: every N, 400 rounds). */
#if defined(__SANITIZE_THREAD__)
enum { SAMPLED_RUNS = 12, CONCURRENT_ROUNDS = 8 };
#elif defined(__SANITIZE_ADDRESS__)
enum { SAMPLED_RUNS = 24, CONCURRENT_ROUNDS = 20 };
#else
enum { SAMPLED_RUNS = 60, CONCURRENT_ROUNDS = 40 };
#endif
enum { FIRST_RUNS = 8, CONCURRENT_THREADS = 4 };

/* ------------------------------------------------------------ outcome of one run */

static _Thread_local struct {
    bool failed, wrong;
    wf_status status;
    char message[256];
    char where[192];
} g_run;

static void run_reset(void) { memset(&g_run, 0, sizeof g_run); }

/* Records the first failing call of the run, before cleanup can clear it. */
static void note_failure(const char *what, int line)
{
    if (g_run.failed)
        return;
    g_run.failed = true;
    g_run.status = wf_last_error();
    snprintf(g_run.message, sizeof g_run.message, "%s", wf_last_error_message());
    snprintf(g_run.where, sizeof g_run.where, "line %d: %s", line, what);
}

static void note_wrong(const char *what, int line)
{
    if (g_run.wrong)
        return;
    g_run.wrong = true;
    snprintf(g_run.where, sizeof g_run.where, "line %d: wrong value: %s", line, what);
}

#define NEED(x)                                                                                    \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            note_failure(#x, __LINE__);                                                            \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)
#define NEED_OK(x) NEED((x) == WF_OK)
#define EXPECT(x)                                                                                  \
    do {                                                                                           \
        if (!(x))                                                                                  \
            note_wrong(#x, __LINE__);                                                              \
    } while (0)

/* Reads a float32 array (evaluating it) and compares with want[]. */
#define EXPECT_F32(arr, want, n, tol)                                                              \
    do {                                                                                           \
        const void *data_;                                                                         \
        NEED_OK(wf_array_data((arr), &data_));                                                     \
        if (!close_f32((const float *)data_, (want), (n), (tol)))                                  \
            note_wrong(#arr, __LINE__);                                                            \
    } while (0)

static bool close_f32(const float *got, const float *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - (double)want[i]) <= tol * (1.0 + fabs((double)want[i]))))
            return false;
    return true;
}

/* ------------------------------------------------------------ scenarios */

static const int64_t SHAPE_8x8[] = {8, 8};

/* Element-wise chain, a row reduction and a 4 MiB array (mmap'ed, reduced
 * by the intra-op pool). */
static void scenario_elementwise_reduce(void)
{
    float want_rows[8], x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)i * 0.25f - 3.0f;
    for (int r = 0; r < 8; r++) {
        double acc = 0;
        for (int c = 0; c < 8; c++) {
            double v = x[r * 8 + c];
            acc += exp(v * 0.1) * v + 1.0;
        }
        want_rows[r] = (float)acc;
    }
    NEED_OK(wf_scope_begin());
    wf_array *a, *e, *t, *u, *s, *big, *bigsum;
    NEED(a = wf_array_from_data(x, SHAPE_8x8, 2, WF_DTYPE_F32));
    NEED(e = wf_exp(wf_multiply(a, wf_scalar(0.1, WF_DTYPE_F32))));
    NEED(t = wf_multiply(e, a));
    NEED(u = wf_add(t, wf_scalar(1.0, WF_DTYPE_F32)));
    NEED(s = wf_sum(u, (const int[]){1}, 1, false));
    const int64_t big_shape[] = {1024, 1024};
    NEED(big = wf_full(big_shape, 2, 0.5, WF_DTYPE_F32));
    NEED(bigsum = wf_sum(wf_add(big, big), NULL, 0, false));
    wf_array *both[] = {s, bigsum};
    NEED_OK(wf_eval(both, 2));
    EXPECT_F32(s, want_rows, 8, 1e-5);
    EXPECT_F32(bigsum, (const float[]){1024.0f * 1024.0f}, 1, 1e-6);
done:
    wf_scope_end();
}

/* matmul of a transposed slice, softmax, cumsum, sort and take. */
static void scenario_linalg_index(void)
{
    float x[64], want_mm[16], want_sorted[8], want_take[8];
    for (int i = 0; i < 64; i++)
        x[i] = (float)((i * 37) % 17) - 8.0f;
    /* m = x[0:4, 0:8] (4x8); mm = m @ m^T (4x4) */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 8; k++)
                acc += (double)x[i * 8 + k] * x[j * 8 + k];
            want_mm[i * 4 + j] = (float)acc;
        }
    /* sorted first row, then row 0 taken at indices 7..0 */
    memcpy(want_sorted, x, sizeof want_sorted);
    for (int i = 1; i < 8; i++)
        for (int j = i; j > 0 && want_sorted[j - 1] > want_sorted[j]; j--) {
            float tmp = want_sorted[j];
            want_sorted[j] = want_sorted[j - 1];
            want_sorted[j - 1] = tmp;
        }
    for (int i = 0; i < 8; i++)
        want_take[i] = x[7 - i];
    NEED_OK(wf_scope_begin());
    wf_array *a, *m, *mm, *row, *sorted, *idx, *taken, *sm, *smsum;
    NEED(a = wf_array_from_data(x, SHAPE_8x8, 2, WF_DTYPE_F32));
    NEED(m = wf_slice(a, (const int64_t[]){0, 0}, (const int64_t[]){4, 8}, (const int64_t[]){1, 1}));
    NEED(mm = wf_matmul(m, wf_transpose(m, NULL, 0)));
    NEED(row = wf_reshape(wf_slice(a, (const int64_t[]){0, 0}, (const int64_t[]){1, 8}, (const int64_t[]){1, 1}),
                          (const int64_t[]){8}, 1));
    NEED(sorted = wf_sort(row, 0));
    NEED(idx = wf_arange(7, -1, -1, WF_DTYPE_I32));
    NEED(taken = wf_take(row, idx, 0));
    NEED(sm = wf_softmax(a, (const int[]){1}, 1));
    NEED(smsum = wf_sum(sm, (const int[]){1}, 1, false));
    wf_array *all[] = {mm, sorted, taken, smsum};
    NEED_OK(wf_eval(all, 4));
    EXPECT_F32(mm, want_mm, 16, 1e-6);
    EXPECT_F32(sorted, want_sorted, 8, 0);
    EXPECT_F32(taken, want_take, 8, 0);
    const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_F32(smsum, ones, 8, 1e-5);
done:
    wf_scope_end();
}

/* scatter_add with repeated indices, concatenate, cumsum, argmax,
 * layer_norm, attention with one key (its output is v), and a sort large
 * enough for the radix path's scratch. */
static void scenario_op_families(void)
{
    enum { SORT_N = 5000 };
    static float big[SORT_N], want_sorted[SORT_N];
    for (int i = 0; i < SORT_N; i++)
        big[i] = want_sorted[i] = (float)((i * 7919) % SORT_N);
    for (int i = 0; i < SORT_N; i++) /* a permutation of 0..SORT_N-1 (7919 is prime) */
        want_sorted[i] = (float)i;
    const float base[4] = {1, 2, 3, 4}, upd[3] = {10, 20, 30};
    const int32_t at[3] = {2, 0, 2};
    const float want_scatter[4] = {21, 2, 43, 4};
    float want_cat[7], want_cum[7];
    for (int i = 0; i < 7; i++)
        want_cat[i] = i < 4 ? base[i] : upd[i - 4];
    for (int i = 0; i < 7; i++)
        want_cum[i] = want_cat[i] + (i ? want_cum[i - 1] : 0);
    float want_norm[4];
    double mean = 2.5, var = 1.25;
    for (int i = 0; i < 4; i++)
        want_norm[i] = (float)((base[i] - mean) / sqrt(var + 1e-5));
    NEED_OK(wf_scope_begin());
    wf_array *a, *u, *idx, *sc, *cat, *cum, *am, *ln, *q, *k, *v, *att, *b, *sorted;
    NEED(a = wf_array_from_data(base, (const int64_t[]){4}, 1, WF_DTYPE_F32));
    NEED(u = wf_array_from_data(upd, (const int64_t[]){3}, 1, WF_DTYPE_F32));
    NEED(idx = wf_array_from_data(at, (const int64_t[]){3}, 1, WF_DTYPE_I32));
    NEED(sc = wf_scatter_add(a, idx, u, 0));
    NEED(cat = wf_concatenate((wf_array *[]){a, u}, 2, 0));
    NEED(cum = wf_cumsum(cat, 0, false, true));
    NEED(am = wf_argmax(cat, 0, false));
    NEED(ln = wf_layer_norm(a, NULL, NULL, 1e-5));
    NEED(q = wf_reshape(a, (const int64_t[]){1, 4}, 2));
    NEED(k = wf_reshape(a, (const int64_t[]){1, 4}, 2));
    NEED(v = wf_reshape(u, (const int64_t[]){1, 3}, 2));
    NEED(att = wf_scaled_dot_product_attention(q, k, v, 0.5, NULL, false));
    NEED(b = wf_array_from_data(big, (const int64_t[]){SORT_N}, 1, WF_DTYPE_F32));
    NEED(sorted = wf_sort(b, 0));
    wf_array *all[] = {sc, cum, am, ln, att, sorted};
    NEED_OK(wf_eval(all, 6));
    EXPECT_F32(sc, want_scatter, 4, 0);
    EXPECT_F32(cum, want_cum, 7, 0);
    double amax = -1;
    NEED_OK(wf_array_item(am, &amax));
    EXPECT(amax == 6);
    EXPECT_F32(ln, want_norm, 4, 1e-4);
    EXPECT_F32(att, upd, 3, 1e-6);
    EXPECT_F32(sorted, want_sorted, SORT_N, 0);
done:
    wf_scope_end();
}

/* Work on a new stream, evaluated asynchronously, then on the default
 * stream depending on it. */
static void scenario_streams_async(void)
{
    wf_stream *s = NULL;
    bool pushed = false, scoped = false;
    float want[64];
    for (int i = 0; i < 64; i++)
        want[i] = (float)(2 * i + 1);
    NEED_OK(wf_scope_begin());
    scoped = true;
    NEED(s = wf_stream_new());
    NEED_OK(wf_stream_push(s));
    pushed = true;
    wf_array *a, *b, *c;
    NEED(a = wf_arange(0, 64, 1, WF_DTYPE_F32));
    NEED(b = wf_add(a, a));
    NEED_OK(wf_async_eval(&b, 1));
    NEED_OK(wf_stream_pop());
    pushed = false;
    NEED(c = wf_add(b, wf_scalar(1.0, WF_DTYPE_F32)));
    NEED_OK(wf_async_eval(&c, 1));
    NEED_OK(wf_stream_synchronize(s));
    EXPECT_F32(c, want, 64, 0);
done:
    if (pushed)
        wf_stream_pop();
    if (scoped)
        wf_scope_end();
    if (s)
        wf_stream_synchronize(s);
    wf_stream_release(s);
    settle_default_stream();
}

/* f(x, y) = sum(x * x * y) */
static wf_status body_sum_xxy(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_array *xx = wf_multiply(in[0], in[0]);
    wf_array *xxy = wf_multiply(xx, in[1]);
    wf_array *s = wf_sum(xxy, NULL, 0, false);
    wf_release(xx);
    wf_release(xxy);
    if (!s)
        return wf_last_error();
    out[0] = s;
    *nout = 1;
    return WF_OK;
}

/* grad, vjp and vmap of f. */
static void scenario_transforms(void)
{
    float x[6] = {1, -2, 3, 0.5f, 4, -1}, y[6] = {2, 1, -1, 3, 0.25f, 5};
    float want_grad[6], want_vjp_y[6], want_vmap[2];
    for (int i = 0; i < 6; i++) {
        want_grad[i] = 2 * x[i] * y[i];
        want_vjp_y[i] = 3.0f * x[i] * x[i];
    }
    for (int r = 0; r < 2; r++) {
        double acc = 0;
        for (int c = 0; c < 3; c++)
            acc += (double)x[r * 3 + c] * x[r * 3 + c] * y[r * 3 + c];
        want_vmap[r] = (float)acc;
    }
    wf_fn *f = NULL, *g = NULL, *vf = NULL;
    bool scoped = false;
    wf_array *outs[2] = {NULL, NULL}, *cots[2] = {NULL, NULL}, *vout = NULL;
    NEED_OK(wf_scope_begin());
    scoped = true;
    wf_array *xa, *ya, *xv, *yv;
    NEED(xa = wf_array_from_data(x, (const int64_t[]){6}, 1, WF_DTYPE_F32));
    NEED(ya = wf_array_from_data(y, (const int64_t[]){6}, 1, WF_DTYPE_F32));
    NEED(f = wf_fn_new(body_sum_xxy, NULL, NULL));
    NEED(g = wf_grad(f, NULL, 0));
    size_t n = 2;
    wf_array *args[] = {xa, ya};
    NEED_OK(wf_fn_call(g, args, 2, outs, &n));
    EXPECT_F32(outs[0], want_grad, 6, 1e-6);
    wf_array *three;
    NEED(three = wf_scalar(3.0, WF_DTYPE_F32));
    NEED_OK(wf_vjp(f, args, 2, &three, 1, NULL, cots));
    EXPECT_F32(cots[1], want_vjp_y, 6, 1e-6);
    NEED(xv = wf_reshape(xa, (const int64_t[]){2, 3}, 2));
    NEED(yv = wf_reshape(ya, (const int64_t[]){2, 3}, 2));
    NEED(vf = wf_vmap(f, NULL, 0, NULL, 0));
    n = 1;
    NEED_OK(wf_fn_call(vf, (wf_array *[]){xv, yv}, 2, &vout, &n));
    EXPECT_F32(vout, want_vmap, 2, 1e-6);
done:
    if (scoped)
        wf_scope_end();
    wf_fn_release(vf);
    wf_fn_release(g);
    wf_fn_release(f);
}

/* conv_transpose1d, stride 2, padding 1, output_padding 1: run phase by
 * phase, and its weight's cotangent (the input seen batch-contiguous) on
 * the weight cotangent's path, phase by phase. */
enum { CT_N = 3, CT_L = 5, CT_CIN = 2, CT_COUT = 2, CT_K = 3, CT_OUT = 10 };

static wf_status body_conv_transpose(void *payload, wf_array *const *in, size_t nin,
                                     wf_array **out, size_t *nout)
{
    (void)payload;
    (void)nin;
    out[0] = wf_conv_transpose1d(in[0], in[1], 2, 1, 1, 1, 1);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void scenario_conv_transpose(void)
{
    float x[CT_N][CT_L][CT_CIN], w[CT_COUT][CT_K][CT_CIN], c[CT_N][CT_OUT][CT_COUT];
    float want_y[CT_N][CT_OUT][CT_COUT] = {{{0}}}, want_dx[CT_N][CT_L][CT_CIN] = {{{0}}};
    float want_dw[CT_COUT][CT_K][CT_CIN] = {{{0}}};
    for (int i = 0; i < CT_N * CT_L * CT_CIN; i++)
        (&x[0][0][0])[i] = (float)((i * 7) % 11) - 5;
    for (int i = 0; i < CT_COUT * CT_K * CT_CIN; i++)
        (&w[0][0][0])[i] = (float)((i * 5) % 7) - 3;
    for (int i = 0; i < CT_N * CT_OUT * CT_COUT; i++)
        (&c[0][0][0])[i] = (float)((i * 3) % 5) - 2;
    /* y[n][i * 2 - 1 + k][co] += x[n][i][ci] w[co][k][ci] (small integers: exact) */
    for (int n = 0; n < CT_N; n++)
        for (int i = 0; i < CT_L; i++)
            for (int k = 0; k < CT_K; k++) {
                const int o = i * 2 - 1 + k;
                if (o < 0 || o >= CT_OUT)
                    continue;
                for (int co = 0; co < CT_COUT; co++)
                    for (int ci = 0; ci < CT_CIN; ci++) {
                        want_y[n][o][co] += x[n][i][ci] * w[co][k][ci];
                        want_dx[n][i][ci] += w[co][k][ci] * c[n][o][co];
                        want_dw[co][k][ci] += x[n][i][ci] * c[n][o][co];
                    }
            }
    wf_fn *f = NULL;
    bool scoped = false;
    wf_array *y = NULL, *cots[2] = {NULL, NULL};
    NEED_OK(wf_scope_begin());
    scoped = true;
    wf_array *xa, *wa, *ca;
    NEED(xa = wf_array_from_data(x, (const int64_t[]){CT_N, CT_L, CT_CIN}, 3, WF_DTYPE_F32));
    NEED(wa = wf_array_from_data(w, (const int64_t[]){CT_COUT, CT_K, CT_CIN}, 3, WF_DTYPE_F32));
    NEED(ca = wf_array_from_data(c, (const int64_t[]){CT_N, CT_OUT, CT_COUT}, 3, WF_DTYPE_F32));
    NEED(f = wf_fn_new(body_conv_transpose, NULL, NULL));
    NEED_OK(wf_vjp(f, (wf_array *[]){xa, wa}, 2, &ca, 1, &y, cots));
    EXPECT_F32(y, &want_y[0][0][0], CT_N * CT_OUT * CT_COUT, 0);
    EXPECT_F32(cots[0], &want_dx[0][0][0], CT_N * CT_L * CT_CIN, 0);
    EXPECT_F32(cots[1], &want_dw[0][0][0], CT_COUT * CT_K * CT_CIN, 0);
done:
    if (scoped)
        wf_scope_end();
    wf_fn_release(f);
}

/* A compiled function: traced on the first call, replayed on the second
 * with new values, then its gradient compiled. */
static void scenario_compile_replay(void)
{
    float x[8], y[8], want1, want2, want_grad[8];
    double acc1 = 0, acc2 = 0;
    for (int i = 0; i < 8; i++) {
        x[i] = (float)i - 3.5f;
        y[i] = (float)(i % 3) + 0.5f;
        acc1 += (double)x[i] * x[i] * y[i];
        acc2 += (double)y[i] * y[i] * x[i];
        want_grad[i] = 2 * x[i] * y[i];
    }
    want1 = (float)acc1;
    want2 = (float)acc2;
    wf_fn *f = NULL, *cf = NULL, *g = NULL, *cg = NULL;
    bool scoped = false;
    NEED_OK(wf_scope_begin());
    scoped = true;
    wf_array *xa, *ya, *out = NULL;
    NEED(xa = wf_array_from_data(x, (const int64_t[]){8}, 1, WF_DTYPE_F32));
    NEED(ya = wf_array_from_data(y, (const int64_t[]){8}, 1, WF_DTYPE_F32));
    NEED(f = wf_fn_new(body_sum_xxy, NULL, NULL));
    NEED(cf = wf_compile(f, NULL));
    size_t n = 1;
    NEED_OK(wf_fn_call(cf, (wf_array *[]){xa, ya}, 2, &out, &n));
    EXPECT_F32(out, &want1, 1, 1e-6);
    n = 1;
    NEED_OK(wf_fn_call(cf, (wf_array *[]){ya, xa}, 2, &out, &n));
    EXPECT_F32(out, &want2, 1, 1e-6);
    NEED(g = wf_grad(cf, NULL, 0));
    NEED(cg = wf_compile(g, NULL));
    n = 1;
    NEED_OK(wf_fn_call(cg, (wf_array *[]){xa, ya}, 2, &out, &n));
    EXPECT_F32(out, want_grad, 8, 1e-6);
done:
    if (scoped)
        wf_scope_end();
    wf_fn_release(cg);
    wf_fn_release(g);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* ---- nn: one SGD step of a linear classifier, loss and grads by value_and_grad */

enum { NN_B = 4, NN_IN = 3, NN_OUT = 5 };
static const float NN_X[NN_B * NN_IN] = {0.5f, -1, 2, 1, 0, -0.5f, -2, 1.5f, 0.25f, 0, 0, 1};
static const float NN_W[NN_OUT * NN_IN] = {0.1f, -0.2f, 0.3f, 0.0f, 0.5f, -0.1f, 0.2f, 0.2f,
                                           -0.3f, -0.4f, 0.1f, 0.0f, 0.3f, -0.3f, 0.1f};
static const int32_t NN_T[NN_B] = {1, 4, 0, 2};

/* loss(w, x, t) = cross_entropy(x w^T, t), mean over the batch */
static wf_status body_nn_loss(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_array *wt = wf_transpose(in[0], NULL, 0);
    wf_array *logits = wt ? wf_nn_linear(in[1], wt, NULL) : NULL;
    wf_release(wt);
    wf_array *loss = logits ? wf_nn_cross_entropy(logits, in[2], NULL) : NULL;
    wf_release(logits);
    if (!loss)
        return wf_last_error();
    out[0] = loss;
    *nout = 1;
    return WF_OK;
}

/* The reference: the new weights after one SGD step (lr 0.5). */
static void nn_reference(float *new_w)
{
    double grad[NN_OUT * NN_IN] = {0};
    for (int b = 0; b < NN_B; b++) {
        double logits[NN_OUT], mx = -1e300, z = 0;
        for (int o = 0; o < NN_OUT; o++) {
            logits[o] = 0;
            for (int i = 0; i < NN_IN; i++)
                logits[o] += (double)NN_X[b * NN_IN + i] * NN_W[o * NN_IN + i];
            mx = fmax(mx, logits[o]);
        }
        for (int o = 0; o < NN_OUT; o++)
            z += exp(logits[o] - mx);
        for (int o = 0; o < NN_OUT; o++) {
            double d = (exp(logits[o] - mx) / z - (o == NN_T[b])) / NN_B;
            for (int i = 0; i < NN_IN; i++)
                grad[o * NN_IN + i] += d * NN_X[b * NN_IN + i];
        }
    }
    for (int k = 0; k < NN_OUT * NN_IN; k++)
        new_w[k] = (float)(NN_W[k] - 0.5 * grad[k]);
}

static void scenario_nn_step(void)
{
    float want_w[NN_OUT * NN_IN];
    nn_reference(want_w);
    wf_fn *loss = NULL, *vg = NULL;
    wf_array *outs[2] = {NULL, NULL}, *new_w = NULL;
    bool scoped = false;
    NEED_OK(wf_scope_begin());
    scoped = true;
    wf_array *w, *x, *t, *lr;
    NEED(w = wf_array_from_data(NN_W, (const int64_t[]){NN_OUT, NN_IN}, 2, WF_DTYPE_F32));
    NEED(x = wf_array_from_data(NN_X, (const int64_t[]){NN_B, NN_IN}, 2, WF_DTYPE_F32));
    NEED(t = wf_array_from_data(NN_T, (const int64_t[]){NN_B}, 1, WF_DTYPE_I32));
    NEED(lr = wf_scalar(0.5, WF_DTYPE_F32));
    NEED(loss = wf_fn_new(body_nn_loss, NULL, NULL));
    NEED(vg = wf_value_and_grad(loss, NULL, 0));
    size_t n = 2;
    NEED_OK(wf_fn_call(vg, (wf_array *[]){w, x, t}, 3, outs, &n));
    NEED_OK(wf_nn_sgd_step(0.0, 0.0, 1, &w, &outs[1], NULL, lr, &new_w, NULL));
    EXPECT_F32(new_w, want_w, NN_OUT * NN_IN, 1e-5);
done:
    if (scoped)
        wf_scope_end();
    wf_fn_release(vg);
    wf_fn_release(loss);
}

/* ---- safetensors: save two tensors, load them back */

static char g_st_path[64];

static void scenario_safetensors(void)
{
    const float w[6] = {1, 2, 3, 4, 5, 6};
    const int32_t ids[3] = {7, -8, 9};
    wf_nn_params *p = NULL, *q = NULL;
    bool scoped = false;
    NEED_OK(wf_scope_begin());
    scoped = true;
    NEED(p = wf_nn_params_new());
    NEED_OK(wf_nn_params_add(p, "layer.weight",
                             wf_array_from_data(w, (const int64_t[]){2, 3}, 2, WF_DTYPE_F32)));
    NEED_OK(wf_nn_params_add(p, "ids", wf_array_from_data(ids, (const int64_t[]){3}, 1, WF_DTYPE_I32)));
    NEED_OK(wf_nn_save_safetensors(p, g_st_path));
    NEED(q = wf_nn_load_safetensors(g_st_path));
    long wi = wf_nn_params_find(q, "layer.weight"), ii = wf_nn_params_find(q, "ids");
    EXPECT(wf_nn_params_count(q) == 2 && wi >= 0 && ii >= 0);
    if (wi >= 0)
        EXPECT_F32(wf_nn_params_get(q, (size_t)wi), w, 6, 0);
    if (ii >= 0) {
        int32_t got[3] = {0};
        NEED_OK(wf_array_copy_to(wf_nn_params_get(q, (size_t)ii), got, sizeof got));
        EXPECT(memcmp(got, ids, sizeof got) == 0);
    }
done:
    wf_nn_params_release(q);
    wf_nn_params_release(p);
    if (scoped)
        wf_scope_end();
}

/* ------------------------------------------------------------ the driver */

typedef struct scenario {
    const char *name;
    void (*run)(void);
} scenario;

static const scenario SCENARIOS[] = {
    {"elementwise_reduce", scenario_elementwise_reduce},
    {"linalg_index", scenario_linalg_index},
    {"op_families", scenario_op_families},
    {"streams_async", scenario_streams_async},
    {"transforms", scenario_transforms},
    {"conv_transpose", scenario_conv_transpose},
    {"compile_replay", scenario_compile_replay},
    {"nn_step", scenario_nn_step},
    {"safetensors", scenario_safetensors},
};

typedef struct baseline {
    int64_t arrays;
    size_t active_bytes, streams;
    int threads;
} baseline;

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static baseline take_baseline(void)
{
    wf_memory_stats m = {.struct_size = sizeof m};
    wf_memory_stats_get(&m);
    return (baseline){live_arrays(), m.active_bytes, wf_stream_count(), thread_count()};
}

static bool full_loop(void)
{
    const char *env = getenv("WEFT_FAULTS_FULL");
    return env && *env && strcmp(env, "0") != 0;
}

/* The next N to inject at: every N when full, else the first few and then
 * about SAMPLED_RUNS evenly spread up to the count of operations. */
static int64_t next_n(int64_t n, int64_t total)
{
    if (full_loop() || n < FIRST_RUNS)
        return n + 1;
    int64_t stride = total / SAMPLED_RUNS;
    return n + (stride > 1 ? stride : 1);
}

struct loop_stats {
    long runs, errors, absorbed;
};
static struct loop_stats g_totals;

/* wf_stream_release detaches a worker that is in user code or dropped the
 * stream's last reference itself, instead of joining it (runtime/stream.c,
 * stream_destroy: joining could wait on a lock the releasing thread
 * holds); that thread exits on its own just after. So a thread count above
 * the baseline is polled back here (bounded), not taken as a leak. */
static baseline settled_baseline(baseline before)
{
    baseline after = take_baseline();
    for (int i = 0; i < 500 && after.threads > before.threads; i++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        after = take_baseline();
    }
    return after;
}

static bool same_as_baseline(const char *tag, const char *when, baseline before)
{
    baseline after = settled_baseline(before);
    if (after.arrays == before.arrays && after.active_bytes == before.active_bytes &&
        after.streams == before.streams && after.threads <= before.threads)
        return true; /* fewer threads: a worker detached by an earlier run (above) exited */
    return wf_test_fail(__FILE__, __LINE__,
                        "%s (%s): left behind: arrays %lld->%lld, bytes %zu->%zu, streams "
                        "%zu->%zu, threads %d->%d",
                        tag, when, (long long)before.arrays, (long long)after.arrays,
                        before.active_bytes, after.active_bytes, before.streams, after.streams,
                        before.threads, after.threads);
}

/* With WEFT_FAULTS_LEAK_EACH=1 in the ASan build, LeakSanitizer checks after
 * every run (slow), so a leak names its scenario and N; otherwise it checks
 * once at exit. */
static bool leaked_since_last_check(void)
{
#if defined(__SANITIZE_ADDRESS__)
    const char *env = getenv("WEFT_FAULTS_LEAK_EACH");
    if (env && *env && strcmp(env, "0") != 0)
        return __lsan_do_recoverable_leak_check() != 0;
#endif
    return false;
}

/* Checks one run's outcome, the baseline and a clean rerun; false stops the loop. */
static bool check_run(const scenario *sc, int64_t nth, bool fired, baseline before)
{
    char tag[96];
    snprintf(tag, sizeof tag, "%s N=%lld", sc->name, (long long)nth);
    bool ok = true;
    if (g_run.wrong)
        ok = wf_test_fail(__FILE__, __LINE__, "%s: %s", tag, g_run.where);
    if (g_run.failed) {
        if (!fired)
            ok = wf_test_fail(__FILE__, __LINE__, "%s: failed with no fault: %s: %s", tag,
                              g_run.where, g_run.message);
        else if (g_run.status == WF_OK || g_run.message[0] == '\0')
            ok = wf_test_fail(__FILE__, __LINE__, "%s: failed without a status/message at %s", tag,
                              g_run.where);
    }
    ok &= same_as_baseline(tag, g_run.failed ? g_run.where : "succeeded", before);
    wf_clear_error();
    run_reset();
    sc->run();
    if (g_run.failed || g_run.wrong)
        ok = wf_test_fail(__FILE__, __LINE__, "%s: the clean rerun failed: %s %s", tag, g_run.where,
                          g_run.message);
    ok &= same_as_baseline(tag, "the clean rerun", before);
    if (leaked_since_last_check())
        ok = wf_test_fail(__FILE__, __LINE__, "%s: LeakSanitizer found a leak", tag);
    run_reset();
    return ok;
}

static void run_fault_loop(const scenario *sc)
{
    run_reset();
    sc->run(); /* warm up: lazily started threads, the default stream, caches */
    if (g_run.failed || g_run.wrong) {
        wf_test_fail(__FILE__, __LINE__, "%s fails without a fault: %s %s", sc->name, g_run.where,
                     g_run.message);
        return;
    }
    wf_clear_cache(); /* buffers come from the system, so its failures are reached too */
    wf__fault_arm(INT64_MAX);
    run_reset();
    sc->run();
    const int64_t total = wf__fault_ops_seen();
    wf__fault_arm(0);
    long runs = 0, errors = 0, absorbed = 0;
    for (int64_t nth = 1;; nth = next_n(nth, total)) {
        baseline before = take_baseline();
        run_reset();
        wf_clear_cache();
        wf__fault_arm(nth);
        sc->run();
        bool fired = wf__fault_fired();
        wf__fault_arm(0);
        runs++;
        errors += g_run.failed;
        absorbed += fired && !g_run.failed;
        if (!check_run(sc, nth, fired, before))
            break;
        if (!fired)
            break; /* the scenario completed before reaching the fault */
    }
    printf("    %-20s %lld fallible ops, %ld runs: %ld errors, %ld absorbed\n", sc->name,
           (long long)total, runs, errors, absorbed);
    g_totals.runs += runs;
    g_totals.errors += errors;
    g_totals.absorbed += absorbed;
}

/* WEFT_FAULTS_SCENARIO=name runs only that one (with WEFT_FAULT_TRACE=1
 * each injected fault prints its call stack). */
static void test_scenarios_under_faults(void)
{
    const char *only = getenv("WEFT_FAULTS_SCENARIO");
    for (size_t i = 0; i < sizeof SCENARIOS / sizeof *SCENARIOS; i++)
        if (!only || !*only || strcmp(only, SCENARIOS[i].name) == 0)
            run_fault_loop(&SCENARIOS[i]);
}

/* Regression (found by the fault loop under LeakSanitizer): a replay whose
 * fused node could not be made released the node's params through the
 * tape's own struct, clearing its program: the tape leaked the program
 * and its next replay had none. One compiled function is kept across the
 * injected failures of its replays and must stay right. */
static void test_failed_replay_keeps_the_trace(void)
{
    float x[8], y[8];
    double want = 0;
    for (int i = 0; i < 8; i++) {
        x[i] = (float)i * 0.5f - 1.0f;
        y[i] = (float)(i % 3) - 0.5f;
        want += (double)x[i] * x[i] * y[i];
    }
    const int64_t shape[] = {8};
    wf_array *xa = wf_array_from_data(x, shape, 1, WF_DTYPE_F32);
    wf_array *ya = wf_array_from_data(y, shape, 1, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(body_sum_xxy, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *args[] = {xa, ya};
    int failures = 0;
    for (int64_t nth = 0; nth < 200; nth++) { /* nth 0: the trace, no fault */
        wf_array *out = NULL;
        size_t n = 1;
        wf__fault_arm(nth);
        wf_status st = wf_fn_call(cf, args, 2, &out, &n);
        double got = 0;
        if (st == WF_OK)
            st = wf_array_item(out, &got);
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        wf_release(out);
        if (st != WF_OK) {
            failures++;
            CHECK(fired && wf_last_error_message()[0]);
        } else {
            CHECK_NEAR(got, want, 1e-4);
        }
        out = NULL; /* the same compiled function, cleanly */
        n = 1;
        CHECK_OK(wf_fn_call(cf, args, 2, &out, &n));
        got = 0;
        if (out)
            CHECK_OK(wf_array_item(out, &got));
        CHECK_NEAR(got, want, 1e-4);
        wf_release(out);
        if (nth > 0 && !fired)
            break;
    }
    CHECK(failures > 0);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_release(xa);
    wf_release(ya);
}

/* ---- concurrent: 4 threads evaluate while the fault hits one of them (or main) */

static atomic_bool g_stop;
static atomic_long g_background_failures, g_background_wrong;

static void *background_worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        run_reset();
        scenario_linalg_index();
        if (g_run.wrong)
            atomic_fetch_add(&g_background_wrong, 1);
        if (g_run.failed && (g_run.status == WF_OK || !g_run.message[0]))
            atomic_fetch_add(&g_background_wrong, 1);
        if (g_run.failed)
            atomic_fetch_add(&g_background_failures, 1);
    }
    return NULL;
}

static void test_fault_while_others_evaluate(void)
{
    scenario_elementwise_reduce(); /* warm */
    baseline before = take_baseline();
    atomic_store(&g_stop, false);
    pthread_t threads[CONCURRENT_THREADS];
    for (int i = 0; i < CONCURRENT_THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, background_worker, NULL) == 0);
    const int64_t rounds = full_loop() ? 400 : CONCURRENT_ROUNDS;
    long main_errors = 0;
    for (int64_t r = 1; r <= rounds; r++) {
        run_reset();
        wf__fault_arm(1 + (r * 7) % 97);
        scenario_elementwise_reduce();
        wf__fault_arm(0);
        main_errors += g_run.failed;
        CHECK(!g_run.wrong);
        if (g_run.failed)
            CHECK(g_run.status != WF_OK && g_run.message[0]);
    }
    atomic_store(&g_stop, true);
    for (int i = 0; i < CONCURRENT_THREADS; i++)
        pthread_join(threads[i], NULL);
    CHECK_EQ_INT(atomic_load(&g_background_wrong), 0);
    printf("    %lld rounds: %ld errors on the injecting thread, %ld in the others\n",
           (long long)rounds, main_errors, atomic_load(&g_background_failures));
    baseline after = settled_baseline(before);
    CHECK_EQ_INT(after.arrays, before.arrays);
    CHECK_EQ_SIZE(after.active_bytes, before.active_bytes);
    CHECK_EQ_SIZE(after.streams, before.streams);
    CHECK_EQ_INT(after.threads, before.threads);
    run_reset();
    scenario_elementwise_reduce();
    CHECK(!g_run.failed && !g_run.wrong);
}

/* ---- fork: in the child the stream workers and the pool are recreated */

/* In the child: async eval on the default stream and a new one, and a big
 * reduction (the pool), with the nth operation failing. Exit code 0: right
 * values, 1: a clean error, 2: the fault was not reached, 3: wrong. */
static void fork_child(int64_t nth)
{
    wf__fault_arm(nth);
    run_reset();
    scenario_streams_async();
    if (!g_run.failed && !g_run.wrong) {
        run_reset();
        scenario_elementwise_reduce();
    }
    bool fired = wf__fault_fired();
    wf__fault_arm(0);
    if (g_run.wrong || (g_run.failed && (g_run.status == WF_OK || !g_run.message[0]))) {
        printf("    fork child N=%lld: %s %s\n", (long long)nth, g_run.where, g_run.message);
        fflush(stdout);
        _exit(3);
    }
    bool failed = g_run.failed;
    run_reset(); /* the child still computes */
    scenario_streams_async();
    if (g_run.failed || g_run.wrong) {
        printf("    fork child N=%lld rerun: %s %s\n", (long long)nth, g_run.where, g_run.message);
        fflush(stdout);
        _exit(3);
    }
    _exit(failed ? 1 : fired ? 0 : 2);
}

static void test_fork_under_faults(void)
{
#if defined(__SANITIZE_THREAD__)
    return; /* TSan does not support threads started in a fork child */
#endif
    scenario_streams_async(); /* the parent has its workers and pool running */
    scenario_elementwise_reduce();
    long runs = 0, errors = 0;
    const int64_t limit = full_loop() ? 100000 : 40;
    for (int64_t nth = 1; nth <= limit; nth = full_loop() || nth < FIRST_RUNS ? nth + 1 : nth + 3) {
        fflush(stdout);
        pid_t pid = fork();
        if (!CHECK(pid >= 0))
            return;
        if (pid == 0)
            fork_child(nth);
        int status = 0;
        waitpid(pid, &status, 0);
        runs++;
        if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) <= 2)) {
            printf("    fork N=%lld: status %d\n", (long long)nth, status);
            break;
        }
        errors += WEXITSTATUS(status) == 1;
        if (WEXITSTATUS(status) == 2)
            break;
    }
    printf("    fork: %ld runs, %ld errors\n", runs, errors);
}

int main(void)
{
    snprintf(g_st_path, sizeof g_st_path, "/tmp/weft_fault_%d.safetensors", (int)getpid());
    RUN_TEST(test_scenarios_under_faults);
    RUN_TEST(test_failed_replay_keeps_the_trace);
    RUN_TEST(test_fault_while_others_evaluate);
    RUN_TEST(test_fork_under_faults);
    printf("  fault loop: %ld runs, %ld errors, %ld absorbed\n", g_totals.runs, g_totals.errors,
           g_totals.absorbed);
    unlink(g_st_path);
    return TEST_SUMMARY();
}
