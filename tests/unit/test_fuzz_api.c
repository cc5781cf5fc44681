/*
 * A deterministic pseudo-random fuzz test of the whole public API.
 *
 * A pool of live arrays (every dtype, ranks 0..5, empty and size-1 dims,
 * transposed / sliced / broadcast views, failed arrays) is kept; each step
 * picks an entry point of weft.h and calls it with arguments drawn from the
 * pool and from a seeded xorshift generator, often invalid ones (NULL
 * pointers, out-of-range or repeated axes, wild shapes, INT64_MIN/MAX
 * starts and steps, bad dtypes, released handles, unbalanced streams and
 * scopes). Every call must either succeed or fail cleanly: NULL (or a
 * negative status) with a valid code and a message, never a crash, UB, a
 * hang or a leak. Results are sometimes evaluated and read back, then join
 * the pool. At the end everything is released, no array node is left alive,
 * every custom payload was freed once, and the library still computes.
 *
 * WEFT_FUZZ_SEED and WEFT_FUZZ_STEPS override the seed and the step count;
 * WEFT_FUZZ_TRACE=1 prints every step (to find the step a crash happens at).
 *
 * fuzz/fuzz_api.c includes this file with WEFT_FUZZ_TARGET defined: there
 * every decision is read from the fuzzer's input bytes instead of the
 * generator (fuzz_program_from_bytes), so the input is a small program of
 * weft calls, and a failed check aborts.
 */
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "settle.h"

#if defined(__SANITIZE_THREAD__)
enum { DEFAULT_STEPS = 16000 };
#elif defined(__SANITIZE_ADDRESS__)
enum { DEFAULT_STEPS = 40000 };
#else
enum { DEFAULT_STEPS = 50000 };
#endif

enum {
    POOL_CAP = 40,     /* live arrays kept */
    SMALL_SIZE = 512,  /* largest array kept or evaluated */
    OUT_CAP = 64,      /* room for split outputs */
    BUF_CAP = 64,      /* room for shapes, axes, starts, ... */
    DATA_CAP = 1024,   /* elements of the from_data buffer */
    MAX_FAILURES = 20, /* stop after this many failed checks */
    NUM_STREAMS = 2
};

/* ---------------------------------------------------------------- state */

static uint64_t g_seed, g_rng;
static long g_step;
static const char *g_op = "setup";
static bool g_trace;
static char g_where[160]; /* "seed S step N op O", for the crash handler */

static wf_array *g_pool[POOL_CAP];
static int g_pool_n;
/* Results taken out of a scope with wf_keep; they join the pool after
 * wf_scope_end. (No pool array is released while a scope is open: if the
 * scope also holds a reference to it - wf_retain, or an op that returned
 * its input - wf_release would take the scope's record away instead of
 * dropping the pool's reference, and the array would leak.) */
static wf_array *g_kept[16];
static int g_nkept;

static wf_stream *g_streams[NUM_STREAMS];
static int g_push_depth;
static int g_scope_depth;

static atomic_long g_payloads_made, g_payloads_freed;
static long g_ok, g_err, g_evals, g_eval_errs;

/* ---------------------------------------------------------------- random */

/* The fuzz target's input: two bytes per decision, spread over 64 bits
 * (so wide draws get wide values); 0 once it runs out. */
static const uint8_t *g_input;
static size_t g_input_len, g_input_pos;

static uint64_t input_draw(void)
{
    if (g_input_pos + 2 > g_input_len) {
        g_input_pos = g_input_len;
        return 0;
    }
    uint64_t z = (uint64_t)g_input[g_input_pos] | (uint64_t)g_input[g_input_pos + 1] << 8;
    g_input_pos += 2;
    z = (z + 0x9E3779B97F4A7C15ULL) * 0xBF58476D1CE4E5B9ULL; /* splitmix64's finalizer */
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

#ifdef WEFT_FUZZ_TARGET
static bool input_exhausted(void) { return g_input && g_input_pos >= g_input_len; }
#endif

static uint64_t rnd(void)
{
    if (g_input)
        return input_draw();
    uint64_t x = g_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return g_rng = x;
}

/* Uniform in [lo, hi] (inclusive, hi - lo small). */
static int64_t rnd_range(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static bool one_in(int n) { return rnd() % (uint64_t)n == 0; }

static int64_t wild_i64(void)
{
    static const int64_t v[] = {0, 1, -1, 2, -2, 3, -3, 5, -5, 7, 100, -100, INT32_MAX,
                                INT32_MIN, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 40,
                                -((int64_t)1 << 40), (int64_t)1 << 62, INT64_MAX, INT64_MIN,
                                INT64_MAX - 1, INT64_MIN + 1};
    return v[rnd() % (sizeof v / sizeof v[0])];
}

/* Mostly small, sometimes extreme. */
static int64_t some_i64(void) { return one_in(6) ? wild_i64() : rnd_range(-5, 5); }

static int wild_int(void)
{
    static const int v[] = {INT_MIN, INT_MAX, INT_MIN + 1, 32, 33, -33, 64, -64, 1000, -1000};
    return v[rnd() % (sizeof v / sizeof v[0])];
}

static int some_int(int lo, int hi) { return one_in(10) ? wild_int() : (int)rnd_range(lo, hi); }

static double some_double(void)
{
    static const double v[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e308, -1e308, 1e-310,
                               1e20, -1e20, 9.3e18, 1.0, -1.0, 0.5};
    if (one_in(5))
        return v[rnd() % (sizeof v / sizeof v[0])];
    return ((double)(rnd() % 60001) - 30000.0) / 10000.0;
}

static wf_dtype some_dtype(void)
{
    static const int bad[] = {WF_DTYPE_COUNT, 99, -1, INT_MAX, INT_MIN};
    if (one_in(15))
        return (wf_dtype)bad[rnd() % (sizeof bad / sizeof bad[0])];
    return (wf_dtype)rnd_range(0, WF_DTYPE_COUNT - 1);
}

static wf_dtype float_dtype(void)
{
    static const wf_dtype f[] = {WF_DTYPE_F32, WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16,
                                 WF_DTYPE_BF16};
    return f[rnd() % 5];
}

/* A shape into dims (BUF_CAP room): usually rank 0..4 of dims 0..4, sometimes
 * a wild rank, wild dims, or a NULL pointer. Returns the pointer to pass. */
static const int64_t *some_shape(int64_t *dims, int *ndim)
{
    static const int bad_ndim[] = {-1, -2, 33, 34, 40, 64, INT_MAX, INT_MIN};
    *ndim = one_in(12) ? bad_ndim[rnd() % 8] : (int)rnd_range(0, one_in(5) ? 5 : 3);
    for (int d = 0; d < BUF_CAP; d++)
        dims[d] = one_in(15) ? wild_i64() : rnd_range(one_in(8) ? 0 : 1, 4);
    if (one_in(30) || (*ndim == 0 && one_in(3)))
        return NULL;
    return dims;
}

/* ---------------------------------------------------------------- reporting */

static void where_update(void)
{
    snprintf(g_where, sizeof g_where, "fuzz seed %llu, step %ld, op %s\n",
             (unsigned long long)g_seed, g_step, g_op);
    if (g_trace) {
        fputs(g_where, stdout);
        fflush(stdout);
    }
}

static void set_op(const char *op)
{
    g_op = op;
    where_update();
}

#ifndef WEFT_FUZZ_TARGET
static void crash_handler(int sig)
{
    ssize_t unused = write(2, "\ncrashed at ", 12);
    unused = write(2, g_where, strlen(g_where));
    (void)unused;
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

static bool where_fail(void)
{
    printf("      at %s", g_where);
    fflush(stdout);
    return false;
}

static bool too_many_failures(void)
{
    return atomic_load(&wf_test_state()->checks_failed) >= MAX_FAILURES;
}

static bool fcheck(bool ok) { return ok || where_fail(); }
#define FCHECK(cond) fcheck(CHECK(cond))

static bool valid_error_code(wf_status s) { return s < WF_OK && s > WF_ERR_INTERNAL; }

/* The last error after a failed call: a valid code (not INTERNAL) and a
 * non-empty message. Clears it. */
static void expect_error(void)
{
    wf_status e = wf_last_error();
    const char *msg = wf_last_error_message();
    if (!valid_error_code(e) || !msg[0]) {
        printf("    failed call: %s (%d) \"%s\"\n", wf_status_name(e), (int)e, msg);
        FCHECK(valid_error_code(e));
        FCHECK(msg[0] != '\0');
    }
    g_err++;
    if (g_trace)
        printf("      -> %s: %s\n", wf_status_name(e), msg);
    wf_clear_error();
}

static void check_status(wf_status s)
{
    if (s == WF_OK)
        return;
    FCHECK(wf_last_error() == s);
    expect_error();
}

/* ---------------------------------------------------------------- arrays */

static bool shape_ok(wf_array *a)
{
    int nd = wf_array_ndim(a);
    if (nd < 0 || nd > WF_MAX_NDIM || !wf__dtype_valid(wf_array_dtype(a)))
        return false;
    const int64_t *s = wf_array_shape(a);
    if (nd > 0 && !s)
        return false;
    int64_t n = 1;
    bool overflow = false;
    for (int d = 0; d < nd; d++) {
        if (s[d] < 0)
            return false;
        if (s[d] && n > INT64_MAX / s[d])
            overflow = true;
        n *= overflow ? 1 : s[d];
    }
    int64_t size = wf_array_size(a);
    return size >= 0 && (overflow || size == n);
}

static void pool_add(wf_array *a)
{
    if (g_pool_n < POOL_CAP) {
        g_pool[g_pool_n++] = a;
        return;
    }
    int i = (int)(rnd() % POOL_CAP);
    wf_release(g_pool[i]);
    g_pool[i] = a;
}

/* A pool array; sometimes NULL. */
static wf_array *pick(void)
{
    if (one_in(40))
        return NULL;
    return g_pool[rnd() % (uint64_t)g_pool_n];
}

static wf_array *pick_nonnull(void) { return g_pool[rnd() % (uint64_t)g_pool_n]; }

/* A pool array that broadcasts with `a` (itself if none found). */
static wf_array *pick_compatible(wf_array *a)
{
    if (!a || one_in(3))
        return pick();
    int na = wf_array_ndim(a);
    const int64_t *sa = wf_array_shape(a);
    int start = (int)(rnd() % (uint64_t)g_pool_n);
    for (int k = 0; k < g_pool_n; k++) {
        wf_array *b = g_pool[(start + k) % g_pool_n];
        int nb = wf_array_ndim(b);
        const int64_t *sb = wf_array_shape(b);
        bool ok = true;
        for (int i = 1; i <= na && i <= nb && ok; i++) {
            int64_t x = sa[na - i], y = sb[nb - i];
            ok = x == y || x == 1 || y == 1;
        }
        if (ok)
            return b;
    }
    return a;
}

/* Evaluates `a` (sometimes through wf_async_eval first) and reads it back. */
static void eval_check(wf_array *a)
{
    g_evals++;
    wf_status s = WF_OK;
    if (one_in(4))
        s = wf_async_eval(&a, 1);
    if (s == WF_OK)
        s = wf_eval(&a, 1);
    if (s != WF_OK) {
        g_eval_errs++;
        check_status(s);
        FCHECK(wf_array_is_evaluated(a));
        return;
    }
    FCHECK(wf_array_is_evaluated(a));
    size_t nbytes = wf_array_nbytes(a);
    FCHECK(nbytes == (size_t)wf_array_size(a) * wf_dtype_size(wf_array_dtype(a)));
    if (one_in(2)) {
        const void *p = NULL;
        s = wf_array_data(a, &p);
        if (FCHECK(s == WF_OK) && nbytes) {
            unsigned char sum = 0;
            for (size_t i = 0; i < nbytes; i++)
                sum ^= ((const unsigned char *)p)[i];
            (void)sum;
        } else if (s != WF_OK) {
            expect_error();
        }
    }
    if (one_in(3)) {
        unsigned char *buf = malloc(nbytes + 1);
        size_t give = nbytes;
        if (nbytes && one_in(3))
            give = nbytes - 1 - (size_t)(rnd() % nbytes);
        s = wf_array_copy_to(a, buf, give);
        if (give < nbytes)
            FCHECK(s != WF_OK);
        else
            FCHECK(s == WF_OK);
        check_status(s);
        free(buf);
    }
    if (one_in(3)) {
        double v;
        s = wf_array_item(a, &v);
        FCHECK((s == WF_OK) == (wf_array_size(a) == 1));
        check_status(s);
    }
}

/* Handles an op's result: NULL must come with a clean error; otherwise the
 * result is checked, maybe evaluated, and kept in the pool (or, inside a
 * scope, left to the scope or taken out with wf_keep). */
static void take(wf_array *r)
{
    if (!r) {
        expect_error();
        return;
    }
    g_ok++;
    if (!FCHECK(shape_ok(r)))
        printf("      bad result metadata: ndim %d size %lld\n", wf_array_ndim(r),
               (long long)wf_array_size(r));
    bool small = wf_array_size(r) <= SMALL_SIZE;
    if (small && one_in(3))
        eval_check(r);
    if (g_scope_depth > 0) {
        if (g_scope_depth == 1 && small && g_nkept < 16 && one_in(2)) {
            wf_array *k = wf_keep(r);
            FCHECK(k == r);
            if (k == r)
                g_kept[g_nkept++] = r;
            else
                expect_error();
        }
        return; /* the scope releases it */
    }
    if (small)
        pool_add(r);
    else
        wf_release(r);
}

/* Stores `v` as element i of a `dtype` buffer (exact for 64-bit ints). */
static void store(void *buf, wf_dtype dtype, int64_t i, int64_t iv, double fv)
{
    switch (dtype) {
    case WF_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)iv; break;
    case WF_DTYPE_I64: ((int64_t *)buf)[i] = iv; break;
    case WF_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)iv; break;
    case WF_DTYPE_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(iv & 1); break;
    default: wf__store_from_double(buf, dtype, i, fv); break;
    }
}

/* A fresh READY array of `dtype` and `shape` (size <= DATA_CAP) with
 * assorted values: small, sometimes extreme (INT_MIN, NaN, inf). */
static wf_array *fresh(const int64_t *shape, int ndim, wf_dtype dtype, bool small_ints)
{
    static int64_t buf[DATA_CAP];
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n && i < DATA_CAP; i++) {
        int64_t iv = small_ints || !one_in(8) ? rnd_range(-5, 5) : wild_i64();
        double fv = one_in(12) ? some_double() : (double)rnd_range(-300, 300) / 100.0;
        if (dtype == WF_DTYPE_I32 && !small_ints && one_in(10))
            iv = one_in(2) ? INT32_MIN : -1;
        store(buf, dtype, i, iv, fv);
    }
    return wf_array_from_data(buf, shape, ndim, dtype);
}

/* A new pool array: assorted dtype and rank, sometimes a view. */
static wf_array *make_array(void)
{
    int64_t shape[6];
    int ndim = (int)rnd_range(0, one_in(6) ? 5 : 3);
    for (int d = 0; d < ndim; d++)
        shape[d] = one_in(10) ? 0 : rnd_range(1, ndim > 3 ? 2 : 4);
    wf_dtype dtype = (wf_dtype)rnd_range(0, WF_DTYPE_COUNT - 1);
    if (one_in(2))
        dtype = float_dtype();
    wf_array *a = fresh(shape, ndim, dtype, false);
    if (!a)
        return NULL;
    int kind = (int)rnd_range(0, 5);
    wf_array *v = NULL;
    if (kind == 0 && ndim >= 2) { /* transposed view */
        v = wf_transpose(a, NULL, 0);
    } else if (kind == 1 && ndim >= 1) { /* reversed or stride-2 slice */
        int64_t starts[6], stops[6], steps[6];
        for (int d = 0; d < ndim; d++) {
            bool rev = one_in(2);
            starts[d] = rev ? -1 : 0;
            stops[d] = rev ? INT64_MIN : INT64_MAX;
            steps[d] = rev ? -1 : (one_in(2) ? 2 : 1);
        }
        v = wf_slice(a, starts, stops, steps);
    } else if (kind == 2 && ndim <= 3) { /* broadcast view */
        int64_t bshape[6] = {2};
        memcpy(bshape + 1, shape, (size_t)ndim * sizeof *shape);
        v = wf_broadcast_to(a, bshape, ndim + 1);
    }
    if (!v)
        return a;
    wf_release(a);
    return v;
}

/* Index arrays: integers in [-6, 6] (sometimes another dtype). */
static wf_array *make_indices(void)
{
    int64_t shape[3];
    int ndim = (int)rnd_range(0, 2);
    for (int d = 0; d < ndim; d++)
        shape[d] = rnd_range(0, 3);
    wf_dtype dt = one_in(8) ? some_dtype() : (one_in(2) ? WF_DTYPE_I32 : WF_DTYPE_I64);
    if (!wf__dtype_valid(dt))
        dt = WF_DTYPE_F32;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    static int64_t buf[DATA_CAP];
    for (int64_t i = 0; i < n; i++)
        store(buf, dt, i, rnd_range(one_in(4) ? -6 : 0, one_in(6) ? 6 : 2), (double)rnd_range(-3, 3));
    return wf_array_from_data(buf, shape, ndim, dt);
}

/* ---------------------------------------------------------------- custom */

struct payload {
    wf_status status; /* what the kernel returns */
    bool eval_inside; /* the kernel tries wf_eval on its input */
    wf_array *probe;  /* an array to evaluate inside (borrowed from the inputs) */
};

static void payload_free(void *p)
{
    atomic_fetch_add(&g_payloads_freed, 1);
    free(p);
}

static wf_status fill_kernel(void *payload, const wf_custom_call *call)
{
    const struct payload *p = payload;
    int64_t n = 1;
    for (int d = 0; d < call->output_ndim; d++)
        n *= call->output_shape[d];
    memset(call->output, 0, (size_t)n * wf_dtype_size(call->output_dtype));
    for (int i = 0; i < call->ninputs; i++) { /* touch every input byte */
        int64_t m = 1;
        for (int d = 0; d < call->input_ndims[i]; d++)
            m *= call->input_shapes[i][d];
        unsigned char acc = 0;
        const unsigned char *in = call->inputs[i];
        for (int64_t j = 0; j < m * (int64_t)wf_dtype_size(call->input_dtypes[i]); j++)
            acc ^= in[j];
        (void)acc;
    }
    if (p && p->eval_inside && p->probe) {
        wf_array *probe = p->probe;
        wf_status s = wf_eval(&probe, 1);
        if (s != WF_ERR_MISUSE)
            return WF_ERR_INTERNAL; /* shows up as a failure in the test */
        wf_clear_error();
    }
    return p ? p->status : WF_OK;
}

static void op_custom(void)
{
    set_op("wf_custom");
    wf_array *inputs[4];
    int count = (int)rnd_range(0, 4);
    for (int i = 0; i < count; i++)
        inputs[i] = pick();
    int64_t dims[BUF_CAP];
    int ndim;
    const int64_t *shape = some_shape(dims, &ndim);
    struct payload *p = NULL;
    if (!one_in(5)) {
        static const wf_status st[] = {WF_ERR_KERNEL, WF_ERR_SHAPE, (wf_status)5,
                                       (wf_status)-100};
        p = calloc(1, sizeof *p);
        p->status = one_in(4) ? st[rnd() % 4] : WF_OK; /* failures spread to dependents */
        p->eval_inside = count > 0 && inputs[0] && one_in(4);
        p->probe = count > 0 ? inputs[0] : NULL;
        atomic_fetch_add(&g_payloads_made, 1);
    }
    static const char *names[] = {NULL, "k", "a_custom_kernel_name_longer_than_31_chars"};
    const char *name = names[rnd() % 3];
    wf_custom_kernel kernel = one_in(8) ? NULL : fill_kernel;
    /* a shape with an over-large size is never evaluated by take() */
    take(wf_custom(name, kernel, p, p ? payload_free : NULL, one_in(15) ? NULL : inputs, count,
                   shape, ndim, some_dtype()));
}

/* ---------------------------------------------------------------- op groups */

static void op_creation(void)
{
    int64_t dims[BUF_CAP];
    int ndim;
    const int64_t *shape = some_shape(dims, &ndim);
    wf_dtype dt = some_dtype();
    switch (rnd() % 10) {
    case 0: {
        set_op("wf_array_from_data");
        static int64_t data[DATA_CAP];
        memset(data, 0, sizeof data);
        /* pass the buffer only where reading `size` elements stays inside it
         * (or the shape is invalid); otherwise NULL */
        int64_t n = 1;
        bool valid = shape && ndim >= 0 && ndim <= WF_MAX_NDIM;
        for (int d = 0; valid && d < ndim; d++) {
            if (dims[d] < 0 || (dims[d] && n > INT64_MAX / dims[d]))
                valid = false;
            else
                n *= dims[d];
        }
        bool fits = valid && n <= DATA_CAP;
        take(wf_array_from_data((fits || !valid) && !one_in(10) ? data : NULL, shape, ndim, dt));
        break;
    }
    case 1: set_op("wf_scalar"); take(wf_scalar(some_double(), dt)); break;
    case 2: set_op("wf_full"); take(wf_full(shape, ndim, some_double(), dt)); break;
    case 3: set_op("wf_zeros"); take(wf_zeros(shape, ndim, dt)); break;
    case 4: set_op("wf_ones"); take(wf_ones(shape, ndim, dt)); break;
    case 5:
        set_op("wf_arange");
        if (one_in(3))
            take(wf_arange(some_double(), some_double(), some_double(), dt));
        else
            take(wf_arange((double)rnd_range(-5, 5), (double)rnd_range(-5, 20),
                           (double)rnd_range(-3, 3) / (one_in(2) ? 1 : 2), dt));
        break;
    case 6: {
        set_op("wf_full_like");
        wf_array *a = pick();
        int k = (int)(rnd() % 3);
        take(k == 0 ? wf_full_like(a, some_double()) : k == 1 ? wf_zeros_like(a) : wf_ones_like(a));
        break;
    }
    case 7:
        set_op("wf_linspace");
        take(wf_linspace(some_double(), some_double(), one_in(4) ? wild_i64() : rnd_range(-2, 9),
                         dt));
        break;
    case 8:
        set_op("wf_eye");
        take(wf_eye(one_in(6) ? wild_i64() : rnd_range(-1, 5),
                    one_in(6) ? wild_i64() : rnd_range(-1, 5), some_i64(), dt));
        break;
    default:
        set_op("make_array");
        take(one_in(3) ? make_indices() : make_array());
        break;
    }
}

static void op_random(void)
{
    int64_t dims[BUF_CAP];
    int ndim;
    const int64_t *shape = some_shape(dims, &ndim);
    wf_key key = wf_random_key(rnd());
    const wf_key *kp = one_in(3) ? NULL : &key;
    switch (rnd() % 7) {
    case 0: {
        set_op("wf_random_split");
        wf_key out[20];
        int count = some_int(-2, 16);
        bool fits = count <= 20;
        wf_status s = wf_random_split(key, count, fits && !one_in(10) ? out : NULL);
        check_status(s);
        if (one_in(4))
            wf_random_seed(rnd());
        break;
    }
    case 1:
        set_op("wf_random_normal");
        take(wf_random_normal(shape, ndim, some_dtype(), some_double(), some_double(), kp));
        break;
    case 2:
        set_op("wf_random_uniform");
        take(wf_random_uniform(shape, ndim, some_dtype(), some_double(), some_double(), kp));
        break;
    case 3:
        set_op("wf_random_bernoulli");
        if (one_in(2))
            take(wf_random_bernoulli(pick(), one_in(3) ? shape : NULL, one_in(3) ? ndim : 0, kp));
        else
            take(wf_random_bernoulli(pick(), shape, ndim, kp));
        break;
    case 4:
        set_op("wf_random_randint");
        take(wf_random_randint(some_i64(), some_i64(), shape, ndim, some_dtype(), kp));
        break;
    case 5:
        set_op("wf_random_categorical");
        take(wf_random_categorical(pick(), some_int(-3, 3), kp));
        break;
    default:
        set_op("wf_random_seed");
        wf_random_seed(rnd());
        break;
    }
}

typedef wf_array *(*unary_fn)(wf_array *);
typedef wf_array *(*binary_fn)(wf_array *, wf_array *);

#define FN(f) {#f, f}
static const struct { const char *name; unary_fn fn; } k_unary[] = {
    FN(wf_exp), FN(wf_negative), FN(wf_abs), FN(wf_sign), FN(wf_expm1), FN(wf_log),
    FN(wf_log1p), FN(wf_log2), FN(wf_sqrt), FN(wf_rsqrt), FN(wf_square), FN(wf_reciprocal),
    FN(wf_sin), FN(wf_cos), FN(wf_tan), FN(wf_tanh), FN(wf_sinh), FN(wf_cosh), FN(wf_arcsin),
    FN(wf_arccos), FN(wf_arctan), FN(wf_sigmoid), FN(wf_erf), FN(wf_erfinv), FN(wf_floor),
    FN(wf_ceil), FN(wf_round), FN(wf_logical_not), FN(wf_isnan), FN(wf_isinf),
    FN(wf_isfinite), FN(wf_stop_gradient), FN(wf_silu), FN(wf_gelu), FN(wf_gelu_tanh)};
static const struct { const char *name; binary_fn fn; } k_binary[] = {
    FN(wf_add), FN(wf_multiply), FN(wf_subtract), FN(wf_divide), FN(wf_power),
    FN(wf_maximum), FN(wf_minimum), FN(wf_floor_divide), FN(wf_remainder), FN(wf_equal),
    FN(wf_not_equal), FN(wf_less), FN(wf_less_equal), FN(wf_greater), FN(wf_greater_equal),
    FN(wf_logical_and), FN(wf_logical_or), FN(wf_logaddexp), FN(wf_arctan2), FN(wf_matmul)};
#define COUNT_OF(x) ((int)(sizeof(x) / sizeof((x)[0])))

static void op_unary(void)
{
    if (one_in(8)) {
        set_op("wf_astype");
        take(wf_astype(pick(), some_dtype()));
        return;
    }
    int i = (int)(rnd() % (uint64_t)COUNT_OF(k_unary));
    set_op(k_unary[i].name);
    take(k_unary[i].fn(pick()));
}

static void op_binary(void)
{
    int i = (int)(rnd() % (uint64_t)COUNT_OF(k_binary));
    set_op(k_binary[i].name);
    wf_array *a = pick(), *made = NULL;
    wf_array *b = one_in(6) ? (made = wf_scalar(some_double(), some_dtype())) : pick_compatible(a);
    if (!b)
        wf_clear_error(); /* a bad scalar dtype; b is then just NULL */
    take(one_in(2) ? k_binary[i].fn(b, a) : k_binary[i].fn(a, b));
    wf_release(made);
}

static void op_ternary(void)
{
    wf_array *a = pick();
    if (one_in(2)) {
        set_op("wf_where");
        take(wf_where(pick_compatible(a), a, pick_compatible(a)));
    } else {
        set_op("wf_clip");
        wf_array *lo = one_in(3) ? NULL : pick_compatible(a);
        wf_array *hi = one_in(3) ? NULL : pick_compatible(a);
        take(wf_clip(a, lo, hi));
    }
}

typedef wf_array *(*reduce_fn)(wf_array *, const int *, int, bool);
static const struct { const char *name; reduce_fn fn; } k_reduce[] = {
    FN(wf_sum), FN(wf_mean), FN(wf_prod), FN(wf_max), FN(wf_min), FN(wf_all), FN(wf_any),
    FN(wf_logsumexp)};

/* An axes list for rank `ndim`: usually distinct valid axes, sometimes
 * repeated, out of range, negative or wild; *n may be wild too. */
static const int *some_axes(int ndim, int *axes, int *n)
{
    *n = (int)rnd_range(0, ndim > 0 ? ndim : 1);
    for (int i = 0; i < BUF_CAP; i++)
        axes[i] = some_int(-ndim - 1, ndim);
    if (!one_in(4)) { /* distinct valid axes */
        int perm[BUF_CAP];
        for (int d = 0; d < ndim && d < BUF_CAP; d++)
            perm[d] = d;
        for (int d = ndim - 1; d > 0; d--) {
            int j = (int)(rnd() % (uint64_t)(d + 1)), t = perm[d];
            perm[d] = perm[j];
            perm[j] = t;
        }
        if (*n > ndim)
            *n = ndim;
        for (int i = 0; i < *n; i++)
            axes[i] = one_in(2) ? perm[i] : perm[i] - ndim;
    }
    if (one_in(20))
        *n = one_in(2) ? -1 : (int)rnd_range(33, BUF_CAP);
    if (one_in(25))
        return NULL;
    return axes;
}

static void op_reduce(void)
{
    wf_array *a = pick();
    int nd = wf_array_ndim(a);
    int axes[BUF_CAP], n;
    const int *ax = some_axes(nd, axes, &n);
    bool keep = one_in(2);
    int k = (int)(rnd() % 6);
    if (k <= 1) {
        int i = (int)(rnd() % (uint64_t)COUNT_OF(k_reduce));
        set_op(k_reduce[i].name);
        take(k_reduce[i].fn(a, ax, n, keep));
    } else if (k == 2) {
        set_op(one_in(2) ? "wf_var" : "wf_std");
        int ddof = some_int(-2, 4);
        take(g_op[3] == 'v' ? wf_var(a, ax, n, keep, ddof) : wf_std(a, ax, n, keep, ddof));
    } else if (k == 3) {
        set_op(one_in(2) ? "wf_argmax" : "wf_argmin");
        int axis = some_int(-nd - 1, nd);
        take(g_op[6] == 'a' ? wf_argmax(a, axis, keep) : wf_argmin(a, axis, keep));
    } else if (k == 4) {
        set_op("wf_softmax");
        take(wf_softmax(a, ax, n));
    } else {
        set_op(one_in(2) ? "wf_cumsum" : "wf_cumprod");
        int axis = some_int(-nd - 1, nd);
        bool rev = one_in(2), incl = one_in(2);
        take(g_op[6] == 's' ? wf_cumsum(a, axis, rev, incl) : wf_cumprod(a, axis, rev, incl));
    }
}

/* starts/stops/steps for rank nd: usually sensible, sometimes extreme. */
static void some_slice(int nd, int64_t *starts, int64_t *stops, int64_t *steps)
{
    for (int d = 0; d < BUF_CAP; d++) {
        starts[d] = one_in(5) ? wild_i64() : rnd_range(-4, 4);
        stops[d] = one_in(5) ? wild_i64() : rnd_range(-4, 5);
        steps[d] = one_in(8) ? wild_i64() : one_in(12) ? 0 : rnd_range(-3, 3);
        if (steps[d] == 0 && !one_in(3))
            steps[d] = 1;
    }
    (void)nd;
}

static void op_shape(void)
{
    wf_array *a = pick();
    int nd = wf_array_ndim(a);
    int64_t dims[BUF_CAP];
    int ndim;
    int ints[BUF_CAP], n;
    switch (rnd() % 19) {
    case 0: {
        set_op("wf_reshape");
        const int64_t *shape = some_shape(dims, &ndim);
        if (a && one_in(2)) { /* a valid factorization, maybe with -1 */
            int64_t size = wf_array_size(a);
            ndim = (int)rnd_range(0, 3);
            int64_t rest = size;
            for (int d = 0; d < ndim; d++) {
                int64_t f = d == ndim - 1 ? rest : (rest % 2 == 0 && rest ? 2 : 1);
                dims[d] = f;
                rest = f ? rest / f : rest;
            }
            if (ndim > 0 && one_in(3))
                dims[rnd() % (uint64_t)ndim] = -1;
            shape = dims;
        }
        take(wf_reshape(a, shape, ndim));
        break;
    }
    case 1: {
        set_op("wf_transpose");
        int perm[BUF_CAP];
        for (int d = 0; d < BUF_CAP; d++)
            perm[d] = d < nd ? d : some_int(-3, 5);
        for (int d = nd - 1; d > 0; d--) {
            int j = (int)(rnd() % (uint64_t)(d + 1)), t = perm[d];
            perm[d] = perm[j];
            perm[j] = t;
        }
        if (one_in(6))
            perm[rnd() % BUF_CAP] = some_int(-nd - 1, nd);
        int np = one_in(8) ? some_int(-1, nd + 1) : nd;
        if (np > BUF_CAP)
            np = -1;
        take(wf_transpose(a, one_in(5) ? NULL : perm, np));
        break;
    }
    case 2:
        set_op("wf_swapaxes");
        take(wf_swapaxes(a, some_int(-nd - 1, nd), some_int(-nd - 1, nd)));
        break;
    case 3:
        set_op("wf_moveaxis");
        take(wf_moveaxis(a, some_int(-nd - 1, nd), some_int(-nd - 1, nd)));
        break;
    case 4: {
        set_op("wf_expand_dims");
        const int *ax = some_axes(nd + 2, ints, &n);
        take(wf_expand_dims(a, ax, n));
        break;
    }
    case 5: {
        set_op("wf_squeeze");
        const int *ax = some_axes(nd, ints, &n);
        take(one_in(3) ? wf_squeeze(a, NULL, 0) : wf_squeeze(a, ax, n));
        break;
    }
    case 6:
        set_op("wf_flatten");
        take(wf_flatten(a, some_int(-nd - 1, nd), some_int(-nd - 1, nd)));
        break;
    case 7: {
        set_op("wf_broadcast_to");
        const int64_t *shape = some_shape(dims, &ndim);
        if (a && one_in(2) && nd < 4) { /* a valid target: prepend a dim */
            const int64_t *s = wf_array_shape(a);
            dims[0] = rnd_range(0, 3);
            for (int d = 0; d < nd; d++)
                dims[d + 1] = s[d] == 1 ? rnd_range(0, 3) : s[d];
            ndim = nd + 1;
            shape = dims;
        }
        take(wf_broadcast_to(a, shape, ndim));
        break;
    }
    case 8:
    case 9: {
        int64_t starts[BUF_CAP], stops[BUF_CAP], steps[BUF_CAP];
        some_slice(nd, starts, stops, steps);
        const int64_t *sp = one_in(20) ? NULL : starts, *tp = one_in(20) ? NULL : stops,
                      *pp = one_in(20) ? NULL : steps;
        if (rnd() % 2) {
            set_op("wf_slice");
            take(wf_slice(a, sp, tp, pp));
        } else {
            set_op("wf_slice_update");
            wf_array *made = one_in(3) ? wf_scalar(some_double(), WF_DTYPE_F32) : NULL;
            take(wf_slice_update(a, made ? made : pick(), sp, tp, pp));
            wf_release(made);
        }
        break;
    }
    case 10:
    case 11: {
        wf_array *list[8];
        int count = some_int(0, 5);
        for (int i = 0; i < 8; i++)
            list[i] = one_in(2) ? a : pick_compatible(a);
        if (count > 8)
            count = -1;
        if (rnd() % 2) {
            set_op("wf_concatenate");
            take(wf_concatenate(one_in(20) ? NULL : list, count, some_int(-nd - 1, nd)));
        } else {
            set_op("wf_stack");
            take(wf_stack(one_in(20) ? NULL : list, count, some_int(-nd - 1, nd + 1)));
        }
        break;
    }
    case 12: {
        wf_array *out[OUT_CAP + 1];
        int axis = some_int(-nd - 1, nd);
        int count;
        wf_status s;
        if (one_in(2)) {
            set_op("wf_split");
            count = some_int(-1, 4);
            if (a && nd > 0 && one_in(2)) { /* a count that divides the axis */
                int ax = (int)rnd_range(0, nd - 1);
                int64_t dim = wf_array_shape(a)[ax];
                axis = ax;
                count = dim > 0 && dim <= OUT_CAP ? (int)dim : 1;
            }
            /* out must have room for `sections` entries even when the call
             * fails (they are set to NULL), so the count stays within it */
            if (count > OUT_CAP)
                count = OUT_CAP + 1;
            s = wf_split(a, count, axis, one_in(20) ? NULL : out);
        } else {
            set_op("wf_split_at");
            int64_t idx[BUF_CAP];
            for (int i = 0; i < BUF_CAP; i++)
                idx[i] = one_in(6) ? wild_i64() : rnd_range(-2, 5);
            if (one_in(2)) /* ascending */
                for (int i = 1; i < BUF_CAP; i++)
                    if (idx[i] < idx[i - 1])
                        idx[i] = idx[i - 1];
            count = some_int(-1, 4);
            if (count >= OUT_CAP)
                count = -1;
            s = wf_split_at(a, one_in(20) ? NULL : idx, count, axis, one_in(20) ? NULL : out);
            count += 1;
        }
        if (s != WF_OK) {
            check_status(s);
        } else {
            for (int i = 0; i < count; i++)
                take(out[i]);
        }
        break;
    }
    case 13: {
        set_op("wf_pad");
        int64_t lo[BUF_CAP], hi[BUF_CAP];
        for (int d = 0; d < BUF_CAP; d++) {
            lo[d] = one_in(12) ? wild_i64() : rnd_range(0, 2);
            hi[d] = one_in(12) ? wild_i64() : rnd_range(one_in(10) ? -1 : 0, 2);
        }
        take(wf_pad(a, one_in(20) ? NULL : lo, one_in(20) ? NULL : hi, some_double()));
        break;
    }
    case 14: set_op("wf_tril"); take(wf_tril(a, some_i64())); break;
    case 15: set_op("wf_triu"); take(wf_triu(a, some_i64())); break;
    case 16:
        set_op("wf_repeat");
        take(wf_repeat(a, one_in(6) ? wild_i64() : rnd_range(-1, 3), some_int(-nd - 1, nd)));
        break;
    case 17: {
        set_op("wf_tile");
        int64_t reps[BUF_CAP];
        for (int d = 0; d < BUF_CAP; d++)
            reps[d] = one_in(10) ? wild_i64() : rnd_range(0, 3);
        int nr = some_int(0, 4);
        if (nr > BUF_CAP)
            nr = -1;
        take(wf_tile(a, one_in(20) ? NULL : reps, nr));
        break;
    }
    default: {
        set_op("wf_retain/release");
        wf_array *r = wf_retain(a);
        FCHECK(r == a);
        if (g_scope_depth == 0)
            wf_release(r);
        break;
    }
    }
}

/* Releases arrays a step made for its arguments (inside a scope too:
 * wf_release takes them out of it). */
static void release_made(wf_array **made, int n)
{
    for (int i = 0; i < n; i++)
        wf_release(made[i]);
}

/* Integer indices of `shape` in [lo, hi] (i32 or i64). */
static wf_array *indices_of(const int64_t *shape, int ndim, int64_t lo, int64_t hi)
{
    static int64_t buf[DATA_CAP];
    wf_dtype dt = one_in(2) ? WF_DTYPE_I32 : WF_DTYPE_I64;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n && i < DATA_CAP; i++)
        store(buf, dt, i, rnd_range(lo, hi), 0);
    return n <= DATA_CAP ? wf_array_from_data(buf, shape, ndim, dt) : NULL;
}

static void op_index(void)
{
    wf_array *a = pick();
    int nd = wf_array_ndim(a);
    wf_array *made[2] = {0};
    wf_array *idx = one_in(5) ? pick() : (made[0] = make_indices());
    int axis = some_int(-nd - 1, nd);
    /* matching index (and update) shapes half of the time */
    bool fit = a && nd > 0 && nd <= 6 && !one_in(2);
    int ax = fit ? (int)rnd_range(0, nd - 1) : 0;
    int64_t dim = fit ? wf_array_shape(a)[ax] : 0;
    int64_t shape[8];
    if (fit) {
        memcpy(shape, wf_array_shape(a), (size_t)nd * sizeof *shape);
        axis = one_in(2) ? ax : ax - nd;
    }
    switch (rnd() % 3) {
    case 0: set_op("wf_take"); take(wf_take(a, idx, axis)); break;
    case 1:
        set_op("wf_take_along_axis");
        if (fit) {
            shape[ax] = rnd_range(0, 3);
            if (one_in(3))
                shape[(ax + 1) % nd] = 1; /* broadcasts */
            wf_release(made[0]);
            idx = made[0] = indices_of(shape, nd, one_in(4) ? -dim - 1 : 0,
                                       one_in(4) ? dim : (dim > 0 ? dim - 1 : 0));
        }
        take(wf_take_along_axis(a, idx, axis));
        break;
    default: {
        set_op("wf_scatter_add");
        wf_array *upd = NULL;
        if (fit) {
            int64_t k = rnd_range(0, 3);
            wf_release(made[0]);
            idx = made[0] = indices_of(&k, 1, one_in(4) ? -dim - 1 : 0,
                                       one_in(4) ? dim : (dim > 0 ? dim - 1 : 0));
            shape[ax] = k;
            upd = made[1] = fresh(shape, nd, wf_array_dtype(a), true);
        } else {
            upd = one_in(3) ? pick() : (made[1] = wf_ones_like(a));
        }
        take(wf_scatter_add(a, idx, upd, axis));
        break;
    }
    }
    release_made(made, 2);
}

/* An operand of shape (batch..., rows, cols) for matmul-like ops. */
static wf_array *operand(int nbatch, int64_t b0, int64_t rows, int64_t cols, bool vec)
{
    int64_t shape[5];
    int nd = 0;
    for (int i = 0; i < nbatch; i++)
        shape[nd++] = i == 0 ? b0 : 1;
    if (!vec)
        shape[nd++] = rows;
    shape[nd++] = cols;
    wf_dtype dt = one_in(5) ? (wf_dtype)rnd_range(0, WF_DTYPE_COUNT - 1) : float_dtype();
    return fresh(shape, nd, dt, true);
}

static void op_linalg(void)
{
    wf_array *made[3] = {0};
    int64_t m = rnd_range(0, 4), k = rnd_range(0, 4), n = rnd_range(0, 4);
    int nb = (int)rnd_range(0, 2);
    wf_array *a, *b;
    if (one_in(3)) {
        a = pick();
        b = pick();
    } else {
        a = made[0] = operand(nb, rnd_range(1, 2), m, k, one_in(6));
        b = made[1] = operand((int)rnd_range(0, 2), one_in(2) ? 1 : 2, one_in(8) ? k + 1 : k, n,
                              one_in(6));
        wf_clear_error();
    }
    if (one_in(2)) {
        set_op("wf_matmul");
        take(wf_matmul(a, b));
    } else {
        set_op("wf_addmm");
        wf_array *c = one_in(3) ? pick() : (made[2] = operand(0, 1, m, n, one_in(3)));
        wf_clear_error();
        take(wf_addmm(c, a, b, some_double(), some_double()));
    }
    release_made(made, 3);
}

static void op_fast(void)
{
    wf_array *made[5] = {0};
    wf_array *x = pick();
    int nd = wf_array_ndim(x);
    int64_t last = nd > 0 ? wf_array_shape(x)[nd - 1] : 1;
    switch (rnd() % 4) {
    case 0: {
        set_op("wf_layer_norm");
        int64_t wshape[1] = {one_in(6) ? last + 1 : last};
        wf_array *w = one_in(3) ? NULL : one_in(4) ? pick() : (made[0] = fresh(wshape, 1, float_dtype(), true));
        wf_array *b = one_in(3) ? NULL : one_in(4) ? pick() : (made[1] = fresh(wshape, 1, float_dtype(), true));
        wf_clear_error();
        take(wf_layer_norm(x, w, b, some_double()));
        break;
    }
    case 1: {
        set_op("wf_rms_norm");
        int64_t wshape[1] = {one_in(6) ? last + 1 : last};
        wf_array *w = one_in(3) ? NULL : one_in(4) ? pick() : (made[0] = fresh(wshape, 1, float_dtype(), true));
        wf_clear_error();
        take(wf_rms_norm(x, w, some_double()));
        break;
    }
    case 2:
        set_op("wf_rope");
        take(wf_rope(x, some_int(-2, (int)(last < 8 ? last : 8) + 1), one_in(2), some_double(),
                     some_double(), some_i64()));
        break;
    default: {
        set_op("wf_scaled_dot_product_attention");
        wf_array *q, *k, *v, *mask = NULL;
        int64_t lq = rnd_range(0, 3), lk = rnd_range(0, 3), d = rnd_range(0, 4),
                dv = rnd_range(0, 3), bsz = rnd_range(1, 2);
        int nb = (int)rnd_range(0, 2);
        if (one_in(4)) {
            q = pick();
            k = pick();
            v = pick();
        } else {
            q = made[0] = operand(nb, bsz, lq, d, false);
            k = made[1] = operand(nb, one_in(2) ? 1 : bsz, lk, one_in(10) ? d + 1 : d, false);
            v = made[2] = operand(nb, bsz, one_in(10) ? lk + 1 : lk, dv, one_in(10));
        }
        if (one_in(3)) {
            mask = pick();
        } else if (one_in(2)) {
            int64_t ms[2] = {one_in(8) ? lq + 1 : lq, lk};
            mask = made[3] = fresh(ms, 2, one_in(2) ? WF_DTYPE_BOOL : float_dtype(), true);
        }
        wf_clear_error();
        take(wf_scaled_dot_product_attention(q, k, v, some_double(), mask, one_in(2)));
        break;
    }
    }
    release_made(made, 5);
}

/* wf_eval / data access / metadata with bad arguments. */
static void op_eval(void)
{
    wf_array *a = pick_nonnull();
    switch (rnd() % 7) {
    case 0: {
        set_op("wf_eval(list)");
        wf_array *list[6];
        int n = (int)rnd_range(0, 6);
        for (int i = 0; i < n; i++)
            list[i] = one_in(10) ? NULL : pick_nonnull();
        wf_status s = one_in(2) ? wf_eval(one_in(10) ? NULL : list, (size_t)n)
                                : wf_async_eval(one_in(10) ? NULL : list, (size_t)n);
        check_status(s);
        break;
    }
    case 1: {
        set_op("wf_array_data(bad)");
        const void *p;
        check_status(wf_array_data(NULL, &p));
        check_status(wf_array_data(a, NULL));
        check_status(wf_array_copy_to(NULL, &p, sizeof p));
        check_status(wf_array_copy_to(a, NULL, 0));
        double v;
        check_status(wf_array_item(NULL, &v));
        check_status(wf_array_item(a, NULL));
        break;
    }
    case 2: {
        set_op("metadata");
        FCHECK(wf_array_ndim(NULL) == 0);
        FCHECK(wf_array_shape(NULL) == NULL);
        FCHECK(wf_array_size(NULL) == 0);
        FCHECK(wf_array_dtype(NULL) == WF_DTYPE_COUNT);
        FCHECK(wf_array_nbytes(NULL) == 0);
        FCHECK(!wf_array_is_evaluated(NULL));
        (void)wf_array_dim(NULL, 0);
        int nd = wf_array_ndim(a);
        int axis = some_int(-nd - 2, nd + 1);
        int64_t dim = wf_array_dim(a, axis);
        if (axis < -nd || axis >= nd)
            FCHECK(dim == -1);
        else
            FCHECK(dim == wf_array_shape(a)[axis < 0 ? axis + nd : axis]);
        FCHECK(shape_ok(a));
        wf_clear_error();
        break;
    }
    case 3: {
        set_op("dtype helpers");
        wf_dtype d = some_dtype(), e = some_dtype();
        size_t sz = wf_dtype_size(d);
        const char *name = wf_dtype_name(d);
        FCHECK(name && name[0]);
        FCHECK((sz == 0) == !wf__dtype_valid(d));
        wf_dtype p = wf_promote_types(d, e);
        FCHECK(p == WF_DTYPE_COUNT || wf__dtype_valid(p));
        FCHECK((p == WF_DTYPE_COUNT) == (!wf__dtype_valid(d) || !wf__dtype_valid(e)));
        const char *sn = wf_status_name((wf_status)some_int(-12, 1));
        FCHECK(sn && sn[0]);
        break;
    }
    case 4: {
        set_op("memory");
        wf_memory_stats st = wf_memory_stats_default();
        check_status(wf_memory_stats_get(one_in(3) ? NULL : &st));
        if (one_in(4))
            wf_reset_peak_memory();
        if (one_in(20))
            wf_clear_cache();
        break;
    }
    case 5: {
        /* A released handle: every use is WF_ERR_MISUSE, never UB. */
        set_op("released handle");
        if (g_scope_depth > 0)
            break;
        wf_array *dead = wf_scalar(1.0, WF_DTYPE_F32);
        wf_release(dead);
        wf_clear_error();
        int i = (int)(rnd() % (uint64_t)COUNT_OF(k_unary));
        wf_array *r = one_in(2) ? k_unary[i].fn(dead) : wf_add(a, dead);
        FCHECK(r == NULL && wf_last_error() == WF_ERR_MISUSE);
        expect_error();
        FCHECK(wf_eval(&dead, 1) == WF_ERR_MISUSE);
        expect_error();
        wf_release(dead);
        FCHECK(wf_last_error() == WF_ERR_MISUSE);
        wf_clear_error();
        break;
    }
    default: {
        /* Huge arrays: views evaluate, but dense copies hit the memory limit. */
        set_op("huge");
        int64_t shape[3] = {(int64_t)1 << 20, (int64_t)1 << 12, rnd_range(1, 64)};
        wf_array *h = one_in(2) ? wf_full(shape, 3, 1.0, WF_DTYPE_F32)
                                : wf_random_uniform(shape, 3, WF_DTYPE_F32, 0, 1, NULL);
        if (!FCHECK(h != NULL)) {
            expect_error();
            break;
        }
        wf_status s = wf_eval(&h, 1);
        FCHECK(s == WF_ERR_OUT_OF_MEMORY);
        check_status(s);
        wf_release(h);
        wf_array *one = wf_scalar(2.0, WF_DTYPE_F32);
        wf_array *view = wf_broadcast_to(one, shape, 3);
        FCHECK(view != NULL);
        if (view) {
            const void *p;
            s = wf_array_data(view, &p);
            FCHECK(s == WF_ERR_OUT_OF_MEMORY);
            check_status(s);
        }
        wf_release(view);
        wf_release(one);
        break;
    }
    }
}

static void op_stream(void)
{
    switch (rnd() % 6) {
    case 0:
        set_op("wf_stream_push");
        if (g_push_depth < 4) {
            wf_stream *s = one_in(8) ? NULL : g_streams[rnd() % NUM_STREAMS];
            wf_status st = wf_stream_push(s);
            if (s)
                g_push_depth += FCHECK(st == WF_OK);
            check_status(st);
        }
        break;
    case 1:
        set_op("wf_stream_pop");
        if (g_push_depth > 0) {
            FCHECK(wf_stream_pop() == WF_OK);
            g_push_depth--;
        } else {
            wf_status st = wf_stream_pop();
            FCHECK(st == WF_ERR_MISUSE);
            check_status(st);
        }
        break;
    case 2: {
        set_op("wf_stream_synchronize");
        wf_stream *s = one_in(4) ? NULL : g_streams[rnd() % NUM_STREAMS];
        check_status(wf_stream_synchronize(s));
        break;
    }
    case 3: {
        set_op("wf_current_stream");
        wf_stream *s = wf_current_stream();
        FCHECK(s != NULL);
        FCHECK(wf_stream_count() >= 1);
        wf_stream *r = wf_stream_retain(s);
        wf_stream_release(r);
        wf_stream_release(s);
        wf_stream_release(NULL);
        FCHECK(wf_stream_retain(NULL) == NULL);
        wf_clear_error();
        break;
    }
    case 4:
        if (one_in(10)) { /* a short-lived stream with work on it */
            set_op("wf_stream_new");
            wf_stream *s = wf_stream_new();
            if (FCHECK(s != NULL)) {
                FCHECK(wf_stream_push(s) == WF_OK);
                wf_array *a = wf_exp(pick_nonnull());
                FCHECK(wf_stream_pop() == WF_OK);
                wf_stream_release(s); /* freed once its work is done */
                take(a);
            }
        }
        break;
    default: {
        set_op("wf_default_stream");
        wf_stream *d = wf_default_stream();
        FCHECK(d != NULL);
        wf_stream_release(d);
        break;
    }
    }
}

/* ---- transforms and compile of small bodies */

/* sum(x * x): a scalar, for grad */
static wf_status body_square_sum(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    if (nin < 1 || *nout < 1)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT, "body_square_sum: no input or no room");
    wf_array *sq = wf_multiply(in[0], in[0]);
    out[0] = sq ? wf_sum(sq, NULL, 0, false) : NULL;
    wf_release(sq);
    *nout = out[0] ? 1 : 0;
    return out[0] ? WF_OK : wf_last_error();
}

/* (tanh(x) * y, x + y): element-wise with broadcasting, two outputs */
static wf_status body_two_outputs(void *payload, wf_array *const *in, size_t nin,
                                  wf_array **out, size_t *nout)
{
    (void)payload;
    if (nin < 2 || *nout < 2)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT, "body_two_outputs: needs two inputs, room for two");
    wf_array *t = wf_tanh(in[0]);
    wf_array *a = t ? wf_multiply(t, in[1]) : NULL;
    wf_array *b = a ? wf_add(in[0], in[1]) : NULL;
    wf_release(t);
    if (!b) {
        wf_release(a);
        return wf_last_error();
    }
    out[0] = a;
    out[1] = b;
    *nout = 2;
    return WF_OK;
}

/* matmul then softmax over the last axis */
static wf_status body_matmul_softmax(void *payload, wf_array *const *in, size_t nin,
                                     wf_array **out, size_t *nout)
{
    (void)payload;
    if (nin < 2 || *nout < 1)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                            "body_matmul_softmax: needs two inputs and room for one");
    wf_array *m = wf_matmul(in[0], in[1]);
    out[0] = m ? wf_softmax(m, (const int[]){-1}, 1) : NULL;
    wf_release(m);
    *nout = out[0] ? 1 : 0;
    return out[0] ? WF_OK : wf_last_error();
}

static const wf_fn_callback k_bodies[] = {body_square_sum, body_two_outputs,
                                          body_matmul_softmax};

/* Keeps (or releases) the `n` new references a call returned. */
static void take_all(wf_array **arrays, size_t n)
{
    for (size_t i = 0; i < n; i++)
        take(arrays[i]);
}

static void op_transform(void)
{
    wf_fn *f = wf_fn_new(k_bodies[rnd() % 3], NULL, NULL);
    if (!FCHECK(f != NULL))
        return;
    wf_array *args[3];
    size_t nargs = (size_t)rnd_range(0, 3);
    for (size_t i = 0; i < nargs; i++)
        args[i] = pick_compatible(i ? args[0] : NULL);
    wf_array *outs[WF_FN_MAX_OUTPUTS], *more[WF_FN_MAX_OUTPUTS];
    size_t nout = WF_FN_MAX_OUTPUTS;
    wf_fn *t = NULL;
    wf_status s;
    switch (rnd() % 8) {
    case 0: {
        set_op("wf_grad");
        int argnums[2] = {(int)rnd_range(-1, 2), (int)rnd_range(0, 2)};
        t = wf_grad(f, one_in(4) ? NULL : argnums, (size_t)rnd_range(0, 2));
        break;
    }
    case 1:
        set_op("wf_value_and_grad");
        t = wf_value_and_grad(f, NULL, 0);
        break;
    case 2: {
        set_op("wf_vmap");
        int in_axes[3] = {(int)rnd_range(-2, 2), one_in(3) ? WF_VMAP_NOT_MAPPED : 0, 0};
        int out_axes[2] = {(int)rnd_range(-1, 1), 0};
        t = one_in(3) ? wf_vmap(f, NULL, 0, NULL, 0)
                      : wf_vmap(f, in_axes, nargs, out_axes, (size_t)rnd_range(1, 2));
        break;
    }
    case 3: {
        set_op("wf_compile");
        wf_compile_options o = wf_compile_options_default();
        o.shapeless = one_in(3);
        t = wf_compile(f, &o);
        break;
    }
    case 4: {
        set_op("wf_compile(wf_grad)");
        wf_fn *g = wf_grad(f, NULL, 0);
        t = g ? wf_compile(g, NULL) : NULL;
        wf_fn_release(g);
        break;
    }
    case 5: {
        set_op("wf_vjp");
        wf_array *cot[2] = {pick(), pick()};
        size_t ncot = (size_t)rnd_range(0, 2);
        bool want_outputs = one_in(2);
        s = wf_vjp(f, args, nargs, cot, ncot, want_outputs ? outs : NULL, more);
        check_status(s);
        if (s == WF_OK) {
            take_all(outs, want_outputs ? ncot : 0);
            take_all(more, nargs);
        }
        wf_fn_release(f);
        return;
    }
    case 6: {
        set_op("wf_jvp");
        wf_array *tan[3] = {pick(), pick(), pick()};
        s = wf_jvp(f, args, nargs, tan, outs, more, &nout);
        check_status(s);
        if (s == WF_OK) {
            take_all(outs, nout);
            take_all(more, nout);
        }
        wf_fn_release(f);
        return;
    }
    default:
        set_op("wf_checkpoint");
        t = wf_checkpoint(f);
        break;
    }
    wf_fn_release(f);
    if (!t) {
        expect_error();
        return;
    }
    for (int call = (int)rnd_range(1, 2); call > 0; call--) { /* a compiled one replays */
        nout = one_in(10) ? 0 : WF_FN_MAX_OUTPUTS;
        s = wf_fn_call(t, args, nargs, outs, &nout);
        check_status(s);
        if (s == WF_OK)
            take_all(outs, nout);
    }
    wf_fn_release(t);
}

static void fuzz_step(void);

static void op_scope(void)
{
    switch (rnd() % 3) {
    case 0: {
        set_op("wf_scope_end(unbalanced)");
        if (g_scope_depth == 0) {
            wf_status s = wf_scope_end();
            FCHECK(s == WF_ERR_MISUSE);
            check_status(s);
        }
        set_op("wf_keep(bad)");
        wf_array *a = pick();
        wf_array *k = wf_keep(a);
        /* pool arrays are never owned by a scope */
        FCHECK(k == NULL);
        if (!k)
            expect_error();
        break;
    }
    default:
        if (g_scope_depth >= 2)
            break;
        set_op("wf_scope_begin");
        FCHECK(wf_scope_begin() == WF_OK);
        g_scope_depth++;
        int n = (int)rnd_range(1, 4);
        for (int i = 0; i < n; i++)
            fuzz_step();
        set_op("wf_scope_end");
        FCHECK(wf_scope_end() == WF_OK);
        g_scope_depth--;
        if (g_scope_depth == 0) {
            for (int i = 0; i < g_nkept; i++)
                pool_add(g_kept[i]);
            g_nkept = 0;
        }
        break;
    }
}

static void fuzz_step(void)
{
    wf_clear_error();
    switch (rnd() % 34) {
    case 0: case 1: op_creation(); break;
    case 2: case 3: op_random(); break;
    case 4: case 5: case 6: case 7: op_unary(); break;
    case 8: case 9: case 10: case 11: op_binary(); break;
    case 12: op_ternary(); break;
    case 13: case 14: case 15: case 16: op_reduce(); break;
    case 17: case 18: case 19: case 20: case 21: op_shape(); break;
    case 22: case 23: op_index(); break;
    case 24: op_linalg(); break;
    case 25: op_fast(); break;
    case 26: op_custom(); break;
    case 27: op_eval(); break;
    case 28: op_stream(); break;
    case 29: op_scope(); break;
    case 30: case 31: op_transform(); break;
    default: /* evaluate a pool array (errors stored on it are checked) */
        set_op("eval pool");
        eval_check(pick_nonnull());
        break;
    }
}

/* ---------------------------------------------------------------- the test */

/* Setup: a memory limit, two streams, a pool of `initial` arrays. */
static wf_memory_stats g_stats0;
static int64_t g_live0;
static size_t g_streams0;

static void program_setup(int initial)
{
    g_stats0 = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&g_stats0));
    CHECK_OK(wf_set_memory_limit((size_t)256 << 20));
    g_live0 = live_arrays();
    wf_stream_release(wf_default_stream()); /* created once, lives on */
    g_streams0 = wf_stream_count();
    for (int i = 0; i < NUM_STREAMS; i++)
        g_streams[i] = wf_stream_new();
    while (g_pool_n < initial) {
        wf_array *a = make_array();
        if (CHECK_NOT_NULL(a))
            g_pool[g_pool_n++] = a;
    }
}

/* Teardown: everything released, no stream, node or payload left behind,
 * and weft still computes. */
static void program_teardown(void)
{
    set_op("teardown");
    while (g_push_depth > 0) {
        CHECK_OK(wf_stream_pop());
        g_push_depth--;
    }
    CHECK_EQ_INT(g_scope_depth, 0);
    for (int i = 0; i < g_pool_n; i++)
        wf_release(g_pool[i]);
    g_pool_n = 0;
    /* A synchronize may report a queued task's failure (once, with a
     * message); the next one finds nothing more to report. */
    for (int i = 0; i < NUM_STREAMS; i++) {
        check_status(wf_stream_synchronize(g_streams[i]));
        CHECK_OK(wf_stream_synchronize(g_streams[i]));
        wf_stream_release(g_streams[i]);
    }
    wf_stream *d = wf_default_stream();
    check_status(wf_stream_synchronize(d));
    CHECK_OK(wf_stream_synchronize(d));
    wf_stream_release(d);
    /* streams are freed by their workers once idle: wait a little */
    for (int i = 0; i < 500 && wf_stream_count() > g_streams0; i++)
        usleep(2000);
    CHECK_EQ_SIZE(wf_stream_count(), g_streams0);
    /* payload destructors a task deferred may still be running on a worker
     * (a live node at this check once stopped a long libFuzzer run) */
    CHECK_EQ_INT(settle_live_arrays(g_live0), g_live0);
    CHECK_EQ_INT(atomic_load(&g_payloads_freed), atomic_load(&g_payloads_made));
    CHECK_OK(wf_set_memory_limit(g_stats0.limit_bytes));
    wf_clear_error();

    /* still computes */
    float xs[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    wf_array *x = wf_array_from_data(xs, shape, 1, WF_DTYPE_F32);
    wf_array *y = wf_add(x, x);
    wf_array *s = wf_sum(y, NULL, 0, false);
    double v = 0;
    CHECK_OK(wf_array_item(s, &v));
    CHECK_NEAR(v, 12.0, 0);
    wf_release(s);
    wf_release(y);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), g_live0);
}

#ifdef WEFT_FUZZ_TARGET
/* Runs the program the bytes describe (at most max_steps steps); false if
 * a check failed. */
static bool fuzz_program_from_bytes(const uint8_t *data, size_t size, long max_steps)
{
    g_input = data;
    g_input_len = size;
    g_input_pos = 0;
    g_trace = getenv("WEFT_FUZZ_TRACE") != NULL; /* prints each step */
    program_setup(4);
    for (g_step = 0; g_step < max_steps && !input_exhausted() && !too_many_failures(); g_step++)
        fuzz_step();
    g_input_pos = g_input_len; /* teardown's draws (none expected) read 0 */
    program_teardown();
    return atomic_load(&wf_test_state()->checks_failed) == 0;
}
#else
static void test_fuzz_api(void)
{
    const char *env = getenv("WEFT_FUZZ_SEED");
    g_seed = env ? strtoull(env, NULL, 0) : 0x5eedf00dULL;
    env = getenv("WEFT_FUZZ_STEPS");
    long steps = env ? strtol(env, NULL, 0) : DEFAULT_STEPS;
    g_trace = getenv("WEFT_FUZZ_TRACE") != NULL;
    g_rng = g_seed * 0x9E3779B97F4A7C15ULL + 1;
    printf("    seed %llu, %ld steps\n", (unsigned long long)g_seed, steps);
    fflush(stdout);
    signal(SIGABRT, crash_handler); /* sanitizer reports end in abort() */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    signal(SIGSEGV, crash_handler);
    signal(SIGFPE, crash_handler);
    signal(SIGBUS, crash_handler);
#endif
    program_setup(POOL_CAP / 2);
    for (g_step = 0; g_step < steps && !too_many_failures(); g_step++)
        fuzz_step();
    program_teardown();
    printf("    %ld results, %ld clean errors, %ld evals (%ld failed)\n", g_ok, g_err, g_evals,
           g_eval_errs);
    if (atomic_load(&wf_test_state()->checks_failed))
        printf("    reproduce with WEFT_FUZZ_SEED=%llu (WEFT_FUZZ_TRACE=1 prints each step)\n",
               (unsigned long long)g_seed);
}

int main(void)
{
    RUN_TEST(test_fuzz_api);
    return TEST_SUMMARY();
}
#endif
