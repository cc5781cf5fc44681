/*
 * Error returns of public functions that no other test reached (the list
 * `make coverage` prints, docs/FAULTS.md): bad arguments, and allocation
 * failures injected with wf__fault_arm (src/util/fault.h). Each call must
 * return NULL / an error status with the right code and a message naming
 * the function, leave nothing behind (live arrays back at their baseline),
 * and weft must work afterwards.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "distributed/group.h"
#include "settle.h"
#include "util/fault.h"
#include "weft.h"
#include "weft_nn.h"

/* The failed call's status and message: NULL result, `want`, `needle`. */
static void expect_null(const void *p, wf_status want, const char *needle)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wf_last_error_message());
    CHECK(p == NULL);
    CHECK_STATUS(wf_last_error(), want);
    CHECK_STR_CONTAINS(msg, needle);
    wf_clear_error();
}

/* Arms the nth fallible operation from now to fail. */
static void arm(int64_t nth) { wf__fault_arm(nth); }

/* Disarms; the armed failure must have been injected. */
static void disarm_fired(void)
{
    CHECK(wf__fault_fired());
    wf__fault_arm(0);
}

static void run_on_fresh_thread(void *(*fn)(void *))
{
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, fn, NULL), 0);
    pthread_join(t, NULL);
}

static wf_array *ramp(int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i * 0.25f - 1.0f;
    wf_array *a = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    free(v);
    return a;
}

/* ------------------------------------------------------------ arrays */

static atomic_int external_deleted;
static void count_delete(void *data, void *ctx)
{
    (void)data;
    (void)ctx;
    atomic_fetch_add(&external_deleted, 1);
}

static void test_from_external_out_of_memory(void)
{
    const int64_t live = live_arrays();
    float data[4] = {1, 2, 3, 4};
    const int64_t n = 4;
    const int deleted = atomic_load(&external_deleted);
    for (int nth = 1; nth <= 2; nth++) { /* the buffer, then the node */
        arm(nth);
        wf_array *a = wf_array_from_external(data, &n, 1, WF_DTYPE_F32, NULL, count_delete, NULL);
        disarm_fired();
        expect_null(a, WF_ERR_OUT_OF_MEMORY, "");
        CHECK_EQ_INT(atomic_load(&external_deleted), deleted); /* not called on failure */
    }
    wf_array *a = wf_array_from_external(data, &n, 1, WF_DTYPE_F32, NULL, count_delete, NULL);
    double v = 0;
    wf_array *s = wf_sum(a, NULL, 0, false);
    CHECK_OK(wf_array_item(s, &v));
    CHECK_NEAR(v, 10.0, 0);
    wf_release(s);
    wf_release(a);
    CHECK_EQ_INT(atomic_load(&external_deleted), deleted + 1);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_retain_null(void)
{
    expect_null(wf_retain(NULL), WF_ERR_NULL_ARGUMENT, "wf_retain");
    expect_null(wf_retain_unscoped(NULL), WF_ERR_NULL_ARGUMENT, "wf_retain_unscoped");
}

/* A released handle is refused in one atomic step (never revived). */
static void test_retain_released(void)
{
    const int64_t live = live_arrays();
    wf_array *x = ramp(3);
    wf_release(x);
    expect_null(wf_retain(x), WF_ERR_MISUSE, "wf_retain: the array was already released");
    expect_null(wf_retain_unscoped(x), WF_ERR_MISUSE,
                "wf_retain_unscoped: the array was already released");
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_slot_new_out_of_memory(void)
{
    const int64_t live = live_arrays();
    wf_array *x = ramp(3);
    arm(1);
    wf_slot *s = wf_slot_new(x);
    disarm_fired();
    expect_null(s, WF_ERR_OUT_OF_MEMORY, "wf_slot");
    s = wf_slot_new(x);
    CHECK_NOT_NULL(s);
    wf_slot_release(s);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live);
}

/* wf_keep into an outer scope whose table cannot grow: the array stays in
 * the inner scope, which frees it. */
static void test_keep_out_of_memory(void)
{
    const int64_t live = live_arrays();
    CHECK_OK(wf_scope_begin());
    CHECK_OK(wf_scope_begin());
    wf_array *x = ramp(5);
    arm(1);
    wf_array *kept = wf_keep(x);
    disarm_fired();
    expect_null(kept, WF_ERR_OUT_OF_MEMORY, "");
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(live_arrays(), live); /* freed with the inner scope */
    CHECK_OK(wf_scope_end());
}

/* ------------------------------------------------------------ streams */

static void *push_fails(void *arg)
{
    (void)arg;
    wf_stream *s = wf_stream_new();
    for (int nth = 1; nth <= 2; nth++) { /* the thread's stack, then its items */
        arm(nth);
        wf_status st = wf_stream_push(s);
        disarm_fired();
        CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_stream_push");
    }
    CHECK_OK(wf_stream_push(s));
    wf_stream *cur = wf_current_stream();
    CHECK(cur == s);
    wf_stream_release(cur);
    CHECK_OK(wf_stream_pop());
    wf_stream_release(s);
    return NULL;
}

static void test_stream_push_out_of_memory(void) { run_on_fresh_thread(push_fails); }

/* ------------------------------------------------------------ transforms */

static wf_status square_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)nin;
    out[0] = wf_multiply(in[0], in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_compile_bad_state_and_out_of_memory(void)
{
    const int64_t live = live_arrays();
    wf_fn *f = wf_fn_new(square_body, NULL, NULL);
    wf_compile_options o = wf_compile_options_default();
    o.nstate = 1;
    expect_null(wf_compile(f, &o), WF_ERR_NULL_ARGUMENT, "options->state");
    wf_slot *none = NULL;
    o.state = &none;
    expect_null(wf_compile(f, &o), WF_ERR_NULL_ARGUMENT, "state slot 0");
    wf_array *zero = wf_scalar(0, WF_DTYPE_F32);
    wf_slot *slot = wf_slot_new(zero);
    wf_release(zero);
    o.state = &slot;
    for (int nth = 1; nth <= 2; nth++) { /* the function, then its state list */
        arm(nth);
        wf_fn *c = wf_compile(f, &o);
        disarm_fired();
        expect_null(c, WF_ERR_OUT_OF_MEMORY, "wf_compile");
    }
    wf_slot_release(slot);
    wf_fn *c = wf_compile(f, NULL);
    wf_array *x = ramp(4);
    wf_array *y = NULL;
    size_t n = 1;
    CHECK_OK(wf_fn_call(c, &x, 1, &y, &n));
    double v = 0;
    wf_array *s = wf_sum(y, NULL, 0, false);
    CHECK_OK(wf_array_item(s, &v));
    CHECK_NEAR(v, 1.0 + 0.5625 + 0.25 + 0.0625, 1e-6); /* (-1)^2 + (-0.75)^2 + ... */
    wf_release(s);
    wf_release(y);
    wf_release(x);
    wf_fn_release(c);
    wf_fn_release(f);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_vjp_too_many_cotangents(void)
{
    wf_fn *f = wf_fn_new(square_body, NULL, NULL);
    wf_array *x = ramp(2);
    wf_array *cot[1] = {x};
    wf_array *out[1], *grad[1];
    CHECK_ERROR(wf_vjp(f, &x, 1, cot, (size_t)WF_FN_MAX_OUTPUTS + 1, out, grad),
                  WF_ERR_INVALID_ARGUMENT, "cotangents");
    wf_release(x);
    wf_fn_release(f);
}

static void test_vmap_too_many_axes_and_out_of_memory(void)
{
    wf_fn *f = wf_fn_new(square_body, NULL, NULL);
    const int axes[1] = {0};
    expect_null(wf_vmap(f, axes, ((size_t)1 << 20) + 1, axes, 1), WF_ERR_INVALID_ARGUMENT,
                "too many");
    arm(1);
    wf_fn *v = wf_vmap(f, axes, 1, axes, 1);
    disarm_fired();
    expect_null(v, WF_ERR_OUT_OF_MEMORY, "wf_vmap");
    v = wf_vmap(f, axes, 1, axes, 1);
    CHECK_NOT_NULL(v);
    wf_fn_release(v);
    wf_fn_release(f);
}

/* ------------------------------------------------------------ nn */

/* Each nn layer opens a scope first; on a thread without one yet, that
 * scope's stack is the first allocation. */
static void *nn_layers_fail(void *arg)
{
    (void)arg;
    const int64_t xs[3] = {1, 2, 4}, ws[2] = {4, 12}, wos[2] = {4, 4}, w1s[2] = {4, 4};
    const int64_t ls[2] = {2, 3}, ts[1] = {2};
    wf_array *x = wf_ones(xs, 3, WF_DTYPE_F32), *wqkv = wf_ones(ws, 2, WF_DTYPE_F32);
    wf_array *wo = wf_ones(wos, 2, WF_DTYPE_F32), *w1 = wf_ones(w1s, 2, WF_DTYPE_F32);
    wf_array *logits = wf_ones(ls, 2, WF_DTYPE_F32), *targets = wf_zeros(ts, 1, WF_DTYPE_I32);
    arm(1);
    wf_array *att = wf_nn_causal_self_attention(x, wqkv, wo, 2);
    disarm_fired();
    expect_null(att, WF_ERR_OUT_OF_MEMORY, "wf_scope_begin");
    arm(1);
    wf_array *mlp = wf_nn_mlp(x, w1, NULL, w1, NULL);
    disarm_fired();
    expect_null(mlp, WF_ERR_OUT_OF_MEMORY, "wf_scope_begin");
    arm(1);
    wf_array *ce = wf_nn_cross_entropy(logits, targets, NULL);
    disarm_fired();
    expect_null(ce, WF_ERR_OUT_OF_MEMORY, "wf_scope_begin");
    /* and then they work: cross entropy of equal logits is log(classes) */
    ce = wf_nn_cross_entropy(logits, targets, NULL);
    double v = 0;
    CHECK_OK(wf_array_item(ce, &v));
    CHECK_NEAR(v, 1.0986122886681098, 1e-6);
    wf_release(ce);
    wf_release(x), wf_release(wqkv), wf_release(wo), wf_release(w1);
    wf_release(logits), wf_release(targets);
    return NULL;
}

static void test_nn_layers_out_of_memory(void)
{
    const int64_t live = live_arrays();
    run_on_fresh_thread(nn_layers_fail);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_params_bad_arguments(void)
{
    const int64_t live = live_arrays();
    wf_nn_params *p = wf_nn_params_new();
    wf_array *x = ramp(3);
    CHECK_OK(wf_nn_params_add(p, "w", x));
    CHECK_EQ_INT(wf_nn_params_find(NULL, "w"), -1);
    CHECK_EQ_INT(wf_nn_params_find(p, NULL), -1);
    CHECK_EQ_INT(wf_nn_params_find(p, "w"), 0);
    CHECK_ERROR(wf_nn_params_set(p, 1, x), WF_ERR_INVALID_ARGUMENT, "out of range");
    CHECK_ERROR(wf_nn_params_set(p, 0, NULL), WF_ERR_NULL_ARGUMENT, "value is NULL");
    wf_nn_params_release(p);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live);
}

/* wf_nn_params_add refuses bad names, duplicates and released values and
 * survives each of its allocations failing; nothing is added then. */
static void test_params_add_refusals(void)
{
    const int64_t live = live_arrays();
    wf_nn_params *p = wf_nn_params_new();
    wf_array *x = ramp(3), *gone = ramp(2);
    wf_release(gone);
    CHECK_ERROR(wf_nn_params_add(NULL, "w", x), WF_ERR_NULL_ARGUMENT, "params is NULL");
    CHECK_ERROR(wf_nn_params_add(p, NULL, x), WF_ERR_NULL_ARGUMENT, "name is NULL");
    CHECK_ERROR(wf_nn_params_add(p, "w", NULL), WF_ERR_NULL_ARGUMENT, "value is NULL");
    CHECK_ERROR(wf_nn_params_add(p, "", x), WF_ERR_INVALID_ARGUMENT, "1 to 255 bytes (got 0)");
    char long_name[257];
    memset(long_name, 'n', 256);
    long_name[256] = 0;
    CHECK_ERROR(wf_nn_params_add(p, long_name, x), WF_ERR_INVALID_ARGUMENT,
                  "1 to 255 bytes (got 256)");
    long_name[255] = 0; /* 255 bytes: the longest name */
    CHECK_OK(wf_nn_params_add(p, long_name, x));
    CHECK_ERROR(wf_nn_params_add(p, long_name, x), WF_ERR_INVALID_ARGUMENT, "is already there");
    CHECK_ERROR(wf_nn_params_add(p, "gone", gone), WF_ERR_MISUSE, "already released");
    CHECK_EQ_SIZE(wf_nn_params_count(p), 1);
    wf_nn_params_release(p);
    /* an empty list allocates its name table, its array table, its name
     * index, the name */
    for (int nth = 1; nth <= 4; nth++) {
        p = wf_nn_params_new();
        arm(nth);
        wf_status st = wf_nn_params_add(p, "w", x);
        disarm_fired();
        CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_nn_params_add: out of memory");
        CHECK_EQ_SIZE(wf_nn_params_count(p), 0);
        CHECK_OK(wf_nn_params_add(p, "w", x)); /* and then it works */
        CHECK(wf_nn_params_get(p, 0) == x);
        wf_nn_params_release(p);
    }
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live);
}

/* The 17th entry grows the tables and the name index at once (16 entries,
 * index of 32 slots kept at most half full): each allocation failing in
 * turn adds nothing (a table grown before the failure stays grown) and
 * every entry is still found; then the add goes through. */
static void test_params_index_growth_out_of_memory(void)
{
    const int64_t live = live_arrays();
    wf_nn_params *p = wf_nn_params_new();
    wf_array *x = ramp(3);
    char name[16];
    for (int i = 0; i < 16; i++) {
        snprintf(name, sizeof name, "w%d", i);
        CHECK_OK(wf_nn_params_add(p, name, x));
    }
    int failures = 0;
    wf_status st = WF_OK;
    for (int64_t nth = 1; nth < 100; nth++) {
        arm(nth);
        st = wf_nn_params_add(p, "w16", x);
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        if (!fired)
            break;
        CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_nn_params_add: out of memory");
        CHECK_EQ_SIZE(wf_nn_params_count(p), 16);
        CHECK_EQ_INT(wf_nn_params_find(p, "w16"), -1);
        failures++;
    }
    CHECK_OK(st);
    CHECK(failures >= 3); /* names, arrays, then the index */
    for (int i = 0; i <= 16; i++) {
        snprintf(name, sizeof name, "w%d", i);
        CHECK_EQ_INT(wf_nn_params_find(p, name), i);
    }
    wf_nn_params_release(p);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live);
}

/* zip's 16-bit member count: 65534 arrays are written and read back,
 * 65535 are refused with a message (building such a list was quadratic,
 * 8 s, before the name index). */
static void test_save_npz_too_many_arrays(void)
{
    const int64_t live = live_arrays();
    char path[] = "/tmp/weft-err-npzmany-XXXXXX";
    const int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return;
    close(fd);
    wf_nn_params *p = wf_nn_params_new();
    const float one = 1.0f;
    wf_array *x = wf_array_from_data(&one, NULL, 0, WF_DTYPE_F32);
    char name[16];
    for (int i = 0; i < 65534; i++) {
        snprintf(name, sizeof name, "%05d", i);
        if (!CHECK_OK(wf_nn_params_add(p, name, x)))
            break;
    }
    CHECK_EQ_INT(wf_nn_params_find(p, "12345"), 12345);
    CHECK_EQ_INT(wf_nn_params_find(p, "65534"), -1);
    CHECK_OK(wf_nn_save_npz(p, path, false));
    wf_nn_params *back = wf_nn_load_npz(path);
    if (CHECK_NOT_NULL(back)) {
        CHECK_EQ_SIZE(wf_nn_params_count(back), 65534);
        CHECK_EQ_INT(wf_nn_params_find(back, "65533"), 65533);
    }
    wf_nn_params_release(back);
    CHECK_OK(wf_nn_params_add(p, "65534", x));
    CHECK_ERROR(wf_nn_save_npz(p, path, false), WF_ERR_UNSUPPORTED, "more than 65534 arrays");
    unlink(path);
    wf_nn_params_release(p);
    wf_release(x);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* An array whose .npy image would be 4 GiB or more (a zip entry without
 * zip64): refused from its metadata, before any copy (the 4 GiB broadcast
 * view here is never materialized); a smaller one beside it is not the
 * cause, and nothing is left allocated. */
static void test_save_npz_zip64_refused(void)
{
    const int64_t live = live_arrays();
    char path[] = "/tmp/weft-err-npz64-XXXXXX";
    const int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return;
    close(fd);
    wf_array *one = wf_scalar(1.0, WF_DTYPE_U8), *small = ramp(3);
    const int64_t huge[1] = {(int64_t)1 << 32};
    wf_array *big = wf_broadcast_to(one, huge, 1);
    wf_nn_params *p = wf_nn_params_new();
    CHECK_OK(wf_nn_params_add(p, "small", small));
    CHECK_OK(wf_nn_params_add(p, "big", big));
    wf_memory_stats stats = wf_memory_stats_default();
    wf_reset_peak_memory();
    CHECK_OK(wf_memory_stats_get(&stats));
    const size_t before = stats.peak_bytes;
    for (int compressed = 0; compressed < 2; compressed++)
        CHECK_ERROR(wf_nn_save_npz(p, path, compressed), WF_ERR_UNSUPPORTED,
                    "arrays of 4 GiB or more (zip64) are not written");
    CHECK_OK(wf_memory_stats_get(&stats));
    CHECK(stats.peak_bytes <= before + 4096); /* the view was never evaluated */
    unlink(path);
    wf_nn_params_release(p);
    wf_release(one), wf_release(small), wf_release(big);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* wf_nn_params_set refuses a released value as released, and a value of
 * another dtype or shape; the entry keeps its array and nothing leaks. */
static void test_params_set_refusals(void)
{
    const int64_t live = live_arrays();
    const int64_t two = 2, shape[2] = {1, 3};
    wf_nn_params *p = wf_nn_params_new();
    wf_array *x = ramp(3), *gone = ramp(3);
    wf_release(gone);
    CHECK_OK(wf_nn_params_add(p, "w", x));
    CHECK_ERROR(wf_nn_params_set(p, 0, gone), WF_ERR_MISUSE, "already released");
    wf_array *ints = wf_zeros(&two, 1, WF_DTYPE_I32);
    CHECK_ERROR(wf_nn_params_set(p, 0, ints), WF_ERR_DTYPE, "'w' is float32, the new value int32");
    wf_array *fewer = ramp(2), *matrix = wf_ones(shape, 2, WF_DTYPE_F32);
    CHECK_ERROR(wf_nn_params_set(p, 0, fewer), WF_ERR_SHAPE, "'w' changes shape");
    CHECK_ERROR(wf_nn_params_set(p, 0, matrix), WF_ERR_SHAPE, "'w' changes shape");
    CHECK(wf_nn_params_get(p, 0) == x);
    wf_release(ints), wf_release(fewer), wf_release(matrix);
    wf_array *y = wf_negative(x);
    CHECK_OK(wf_nn_params_set(p, 0, y));
    wf_release(y);
    wf_release(x);
    float got[3] = {0};
    CHECK_OK(wf_array_copy_to(wf_nn_params_get(p, 0), got, sizeof got));
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(got[i], 1.0f - (float)i * 0.25f, 0);
    wf_nn_params_release(p);
    CHECK_EQ_INT(live_arrays(), live);
}

/* The file writers' and loaders' argument checks (the file is never made). */
static void test_file_functions_bad_arguments(void)
{
    const int64_t live = live_arrays();
    const char *missing = "/nonexistent-dir/never-there.bin";
    expect_null(wf_nn_load_npz(missing), WF_ERR_IO, "wf_nn_load_npz");
    wf_nn_gguf_meta *meta = (wf_nn_gguf_meta *)&meta;
    expect_null(wf_nn_load_gguf(missing, &meta), WF_ERR_IO, "wf_nn_load_gguf");
    CHECK(meta == NULL);
    CHECK_ERROR(wf_nn_save_npz(NULL, missing, false), WF_ERR_NULL_ARGUMENT, "params is NULL");
    wf_nn_params *p = wf_nn_params_new();
    wf_array *x = ramp(4);
    wf_array *half = wf_astype(x, WF_DTYPE_BF16); /* NumPy has no bfloat16 */
    CHECK_OK(wf_nn_params_add(p, "h", half));
    CHECK_ERROR(wf_nn_save_npz(p, missing, true), WF_ERR_DTYPE, "NumPy files have no");

    arm(1);
    wf_nn_gguf_meta *m = wf_nn_gguf_meta_new();
    disarm_fired();
    expect_null(m, WF_ERR_OUT_OF_MEMORY, "wf_nn_gguf_meta_new");
    m = wf_nn_gguf_meta_new();
    const int64_t two[2] = {2, 2};
    wf_array *matrix = wf_ones(two, 2, WF_DTYPE_F32);
    CHECK_ERROR(wf_nn_gguf_meta_add_array(m, "k", NULL), WF_ERR_NULL_ARGUMENT,
                  "wf_nn_gguf_meta_add_array: value is NULL");
    CHECK_ERROR(wf_nn_gguf_meta_add_array(m, "k", matrix), WF_ERR_INVALID_ARGUMENT,
                  "0-d or 1-d");
    CHECK_ERROR(wf_nn_gguf_meta_add_array(m, "h", half), WF_ERR_INVALID_ARGUMENT, "'h'");
    const char *strings[2] = {"a", NULL};
    CHECK_ERROR(wf_nn_gguf_meta_add_strings(m, "s", NULL, 1, true), WF_ERR_INVALID_ARGUMENT,
                  "one string, or a list");
    CHECK_ERROR(wf_nn_gguf_meta_add_strings(m, "s", strings, 2, false),
                  WF_ERR_INVALID_ARGUMENT, "one string, or a list");
    CHECK_ERROR(wf_nn_gguf_meta_add_strings(m, "s", strings, 2, true), WF_ERR_NULL_ARGUMENT,
                  "string 1 is NULL");
    CHECK_OK(wf_nn_gguf_meta_add_strings(m, "s", strings, 1, false));
    CHECK_ERROR(wf_nn_gguf_meta_add_strings(m, "s", strings, 1, true),
                  WF_ERR_INVALID_ARGUMENT, "duplicate key 's'");
    /* each allocation of an add in turn (the copies, the key, the index's
     * growth): a failed add leaves the list and its index as they were */
    for (int64_t nth = 1;; nth++) {
        arm(nth);
        const wf_status st = wf_nn_gguf_meta_add_strings(m, "t", strings, 1, true);
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        if (!fired) {
            CHECK_OK(st);
            CHECK_EQ_SIZE(wf_nn_gguf_meta_count(m), 2);
            break;
        }
        CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_nn_gguf_meta_add_strings");
        CHECK_EQ_SIZE(wf_nn_gguf_meta_count(m), 1); /* only "s" */
        CHECK(strcmp(wf_nn_gguf_meta_key(m, 0), "s") == 0);
        CHECK_ERROR(wf_nn_gguf_meta_add_strings(m, "s", strings, 1, true),
                      WF_ERR_INVALID_ARGUMENT, "duplicate key 's'");
        if (!CHECK(nth < 10))
            break;
    }
    CHECK(strcmp(wf_nn_gguf_meta_key(m, 1), "t") == 0);
    wf_nn_gguf_meta_release(m);
    wf_release(matrix);
    wf_nn_params_release(p);
    wf_release(half);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live);
}

/* ------------------------------------------------------------ evaluation */

/* An array whose evaluation fails (six elements selected, three given). */
static wf_array *failing_array(void)
{
    const int64_t shape[2] = {2, 3}, three = 3;
    wf_array *a = wf_zeros(shape, 2, WF_DTYPE_F32), *mask = wf_ones(shape, 2, WF_DTYPE_BOOL);
    wf_array *src = wf_ones(&three, 1, WF_DTYPE_F32);
    wf_array *out = wf_masked_scatter(a, mask, src);
    wf_release(src);
    wf_release(mask);
    wf_release(a);
    return out;
}

static void test_data_strided_failed_evaluation(void)
{
    const int64_t live = live_arrays();
    wf_array *bad = failing_array();
    const void *data = &data;
    int64_t strides[2] = {-7, -7};
    CHECK_ERROR(wf_array_data_strided(bad, NULL, strides), WF_ERR_NULL_ARGUMENT,
                  "out or strides is NULL");
    CHECK_ERROR(wf_array_data_strided(bad, &data, strides), WF_ERR_INVALID_ARGUMENT,
                  "selects 6 elements but the source has only 3");
    CHECK(data == NULL);
    CHECK_EQ_INT(strides[0], -7); /* untouched on failure */
    wf_release(bad);
    /* a good one: a transposed view keeps its strides */
    const int64_t shape[2] = {2, 3};
    const float v[6] = {0, 1, 2, 3, 4, 5};
    wf_array *x = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    wf_array *t = wf_transpose(x, NULL, 0);
    if (CHECK_OK(wf_array_data_strided(t, &data, strides))) {
        const float *f = data;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                CHECK_NEAR(f[i * strides[0] + j * strides[1]], v[j * 3 + i], 0);
    }
    wf_release(t);
    wf_release(x);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* ------------------------------------------------------------ quantize */

static void test_quantize_null_outputs(void)
{
    const int64_t shape[2] = {2, 32};
    wf_array *w = wf_ones(shape, 2, WF_DTYPE_F32), *q = w, *s = w, *b = w;
    CHECK_ERROR(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, NULL, &s, &b), WF_ERR_NULL_ARGUMENT,
                  "wf_quantize: NULL output pointer");
    CHECK_ERROR(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, NULL), WF_ERR_NULL_ARGUMENT,
                  "wf_quantize: NULL output pointer");
    CHECK_ERROR(wf_quantize(NULL, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_NULL_ARGUMENT,
                  "wf_quantize");
    CHECK(q == NULL && s == NULL && b == NULL); /* cleared before the checks */
    CHECK_ERROR(wf_quantize(w, 32, 7, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_INVALID_ARGUMENT,
                  "wf_quantize");
    CHECK(q == NULL && s == NULL && b == NULL);
    for (int nth = 1; nth <= 3; nth++) { /* each of the three nodes */
        arm(nth);
        wf_status st = wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b);
        disarm_fired();
        CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "");
        CHECK(q == NULL && s == NULL && b == NULL);
    }
    if (CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b))) {
        wf_array *d = wf_dequantize(q, s, b, 32, 4, WF_QUANT_AFFINE);
        wf_array *m = wf_max(wf_abs(wf_subtract(d, w)), NULL, 0, false);
        double e = 1;
        CHECK_OK(wf_array_item(m, &e));
        CHECK_NEAR(e, 0, 0); /* a constant group is exact */
        wf_release(m), wf_release(d), wf_release(q), wf_release(s), wf_release(b);
    }
    wf_release(w);
}

static void test_quantize_released_input(void)
{
    const int64_t shape[2] = {2, 32};
    wf_array *w = wf_ones(shape, 2, WF_DTYPE_F32), *q = w, *s = w, *b = w;
    wf_release(w);
    CHECK_ERROR(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b), WF_ERR_MISUSE,
                  "wf_quantize: w was already released");
    CHECK(q == NULL && s == NULL && b == NULL);
}

/* ------------------------------------------------------------ several outputs */

/* Ops with several outputs hand them out all or nothing: with each fallible
 * operation failing in turn inside a fresh scope (whose table the first
 * output allocates, so a publication fails too), the call returns
 * out-of-memory with every output NULL, and leaves nothing behind. */
static void test_multi_output_all_or_nothing(void)
{
    const int64_t live = live_arrays();
    const int64_t shape[2] = {2, 32};
    const float am[4] = {4, 1, 2, 3};
    const int64_t two[2] = {2, 2};
    wf_array *w = wf_ones(shape, 2, WF_DTYPE_F32), *a = wf_array_from_data(am, two, 2, WF_DTYPE_F32);
    for (int op = 0; op < 2; op++) {
        int failures = 0;
        wf_status st = WF_OK;
        for (int64_t nth = 1; nth < 200; nth++) {
            CHECK_OK(wf_scope_begin());
            wf_array *o[3] = {w, w, w};
            arm(nth);
            st = op == 0 ? wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &o[0], &o[1], &o[2])
                         : wf_linalg_qr(a, &o[0], &o[1]);
            const bool fired = wf__fault_fired();
            wf__fault_arm(0);
            if (fired) {
                failures++;
                CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "");
                CHECK(o[0] == NULL && o[1] == NULL && (op == 1 || o[2] == NULL));
            } else if (CHECK_OK(st)) {
                /* qr: q r == a; quantize: a constant group dequantizes exactly */
                wf_array *back = op == 0 ? wf_dequantize(o[0], o[1], o[2], 32, 4, WF_QUANT_AFFINE)
                                         : wf_matmul(o[0], o[1]);
                wf_array *m = wf_max(wf_abs(wf_subtract(back, op == 0 ? w : a)), NULL, 0, false);
                double e = 1;
                CHECK_OK(wf_array_item(m, &e));
                CHECK_NEAR(e, 0, 1e-5);
            }
            CHECK_OK(wf_scope_end());
            if (!fired)
                break;
        }
        CHECK_OK(st);
        CHECK(failures >= 2); /* a node, and the publication */
        CHECK_EQ_INT(settle_live_arrays(live + 2), live + 2);
    }
    wf_array *u = w, *sv = w;
    CHECK_ERROR(wf_linalg_svd(a, &u, &sv, NULL), WF_ERR_INVALID_ARGUMENT,
                  "wf_linalg_svd: u and vt are both given or both NULL");
    CHECK(u == NULL && sv == NULL);
    wf_release(w), wf_release(a);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* ------------------------------------------------------------ distributed */

static void test_group_bad_arguments(void)
{
    const int64_t live = live_arrays();
    CHECK_EQ_INT(wf_group_rank(NULL), -1);
    CHECK_STATUS(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_group_rank: group is NULL");
    wf_clear_error();
    CHECK_EQ_INT(wf_group_size(NULL), -1);
    CHECK_STATUS(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_group_size: group is NULL");
    wf_clear_error();
    expect_null(wf_group_split(NULL, 0, -1), WF_ERR_NULL_ARGUMENT, "wf_group_split: group is NULL");
    wf_group *g = wf_group_init(false);
    if (!CHECK_NOT_NULL(g))
        return;
    const int64_t groups = wf__groups_live();
    expect_null(wf_group_split(g, -1, 0), WF_ERR_INVALID_ARGUMENT, "color -1 is negative");
    expect_null(wf_group_split(g, 0, -2), WF_ERR_INVALID_ARGUMENT, "key -2 is below -1");
    /* a stale error from before must not become the message */
    static const char *const why[3] = {"distributed: out of memory making a group",
                                       "wf_stream_new: out of memory",
                                       "wf_stream_new: cannot start a worker thread"};
    for (int nth = 1; nth <= 3; nth++) { /* the group, its stream, the stream's thread */
        wf_set_error(WF_ERR_SHAPE, "an earlier, unrelated error");
        arm(nth);
        wf_group *split = wf_group_split(g, 0, -1);
        disarm_fired();
        expect_null(split, WF_ERR_OUT_OF_MEMORY, why[nth - 1]);
    }
    CHECK_EQ_INT(wf__groups_live(), groups);
    wf_group *split = wf_group_split(g, 0, -1);
    if (CHECK_NOT_NULL(split)) {
        CHECK_EQ_INT(wf_group_rank(split), 0);
        CHECK_EQ_INT(wf_group_size(split), 1);
        expect_null(wf_all_gather(NULL, split), WF_ERR_NULL_ARGUMENT, "wf_all_gather");
        expect_null(wf_recv_like(NULL, 0, split), WF_ERR_NULL_ARGUMENT, "wf_recv_like");
        wf_array *x = ramp(3);
        expect_null(wf_recv_like(x, 0, split), WF_ERR_INVALID_ARGUMENT,
                    "rank 0 is not another rank of this group of 1 processes");
        wf_array *y = wf_all_gather(x, split); /* one process: a copy */
        double v = 0;
        wf_array *s = wf_sum(y, NULL, 0, false);
        CHECK_OK(wf_array_item(s, &v));
        CHECK_NEAR(v, -1.0 - 0.75 - 0.5, 0);
        wf_release(s), wf_release(y), wf_release(x);
        wf_group_release(split);
    }
    wf_group_release(g);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* wf_group_split waits for the group's stream, which a kernel may not do:
 * inside a custom kernel it fails with WF_ERR_MISUSE and makes no group. */
static wf_group *split_group;
static wf_group *split_inside;
static wf_status split_status_inside;
static char split_message_inside[256];

static wf_status splits_a_group(void *payload, const wf_custom_call *call)
{
    (void)payload;
    split_inside = wf_group_split(split_group, 0, -1);
    split_status_inside = wf_last_error();
    snprintf(split_message_inside, sizeof split_message_inside, "%s", wf_last_error_message());
    wf_clear_error();
    *(float *)call->output = 1;
    return WF_OK;
}

static void test_group_split_inside_a_kernel(void)
{
    const int64_t live = live_arrays();
    split_group = wf_group_init(false);
    if (!CHECK_NOT_NULL(split_group))
        return;
    const int64_t groups = wf__groups_live();
    wf_array *c = wf_custom("splitter", splits_a_group, NULL, NULL, NULL, 0, NULL, 0,
                            WF_DTYPE_F32);
    double v = 0;
    CHECK_OK(wf_array_item(c, &v));
    CHECK_NEAR(v, 1, 0);
    CHECK(split_inside == NULL);
    CHECK_STATUS(split_status_inside, WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(split_message_inside, "cannot wait for a stream inside a kernel");
    CHECK_EQ_INT(wf__groups_live(), groups);
    wf_release(c);
    wf_group_release(split_group);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* ------------------------------------------------------------ more nn files */

static void test_save_gguf_bad_inputs(void)
{
    const int64_t live = live_arrays();
    char path[] = "/tmp/weft-err-gguf-XXXXXX";
    const int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return;
    close(fd);
    CHECK_ERROR(wf_nn_save_gguf(NULL, NULL, path), WF_ERR_NULL_ARGUMENT, "params or path");
    wf_nn_params *p = wf_nn_params_new();
    CHECK_ERROR(wf_nn_save_gguf(p, NULL, NULL), WF_ERR_NULL_ARGUMENT, "params or path");
    const int64_t two = 2;
    wf_array *flags = wf_ones(&two, 1, WF_DTYPE_BOOL);
    CHECK_OK(wf_nn_params_add(p, "flags", flags));
    CHECK_ERROR(wf_nn_save_gguf(p, NULL, path), WF_ERR_DTYPE, "'flags' has dtype bool");
    wf_nn_params_release(p);
    p = wf_nn_params_new();
    wf_array *bad = failing_array(); /* its evaluation fails: nothing is written */
    CHECK_OK(wf_nn_params_add(p, "bad", bad));
    CHECK_ERROR(wf_nn_save_gguf(p, NULL, path), WF_ERR_INVALID_ARGUMENT,
                  "selects 6 elements but the source has only 3");
    wf_nn_params_release(p);
    p = wf_nn_params_new();
    wf_array *x = ramp(4);
    CHECK_OK(wf_nn_params_add(p, "x", x));
    CHECK_ERROR(wf_nn_save_gguf(p, NULL, "/nonexistent-dir/x.gguf"), WF_ERR_IO,
                  "cannot open '/nonexistent-dir/x.gguf'");
    /* and it writes: the loaded tensor has the same values */
    if (CHECK_OK(wf_nn_save_gguf(p, NULL, path))) {
        wf_nn_params *back = wf_nn_load_gguf(path, NULL);
        if (CHECK_NOT_NULL(back) && CHECK_EQ_SIZE(wf_nn_params_count(back), 1)) {
            float got[4] = {0};
            CHECK_OK(wf_array_copy_to(wf_nn_params_get(back, 0), got, sizeof got));
            for (int i = 0; i < 4; i++)
                CHECK_NEAR(got[i], (float)i * 0.25f - 1.0f, 0);
        }
        wf_nn_params_release(back);
    }
    unlink(path);
    wf_nn_params_release(p);
    wf_release(x), wf_release(bad), wf_release(flags);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* wf_nn_save_npz with each fallible operation failing in turn, compressed
 * and not: an out-of-memory error each time, then a file that loads back. */
static void test_save_npz_out_of_memory(void)
{
    const int64_t live = live_arrays();
    char path[] = "/tmp/weft-err-npz-XXXXXX";
    const int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return;
    close(fd);
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = ramp(5), *b = ramp(300);
    CHECK_OK(wf_nn_params_add(p, "a", a));
    CHECK_OK(wf_nn_params_add(p, "b", b));
    for (int compressed = 0; compressed < 2; compressed++) {
        int failures = 0;
        wf_status st = WF_OK;
        for (int64_t nth = 1; nth < 1000; nth++) {
            arm(nth);
            st = wf_nn_save_npz(p, path, compressed);
            const bool fired = wf__fault_fired();
            wf__fault_arm(0);
            if (!fired)
                break;
            if (st == WF_OK)
                continue; /* absorbed (zlib's own allocations are not counted) */
            CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_nn_save_npz");
            failures++;
        }
        CHECK_OK(st);
        CHECK(failures >= 3); /* the image, the archive, its directory */
        wf_nn_params *back = wf_nn_load_npz(path);
        if (CHECK_NOT_NULL(back) && CHECK_EQ_SIZE(wf_nn_params_count(back), 2)) {
            float got[5] = {0};
            CHECK_OK(wf_array_copy_to(wf_nn_params_get(back, 0), got, sizeof got));
            for (int i = 0; i < 5; i++)
                CHECK_NEAR(got[i], (float)i * 0.25f - 1.0f, 0);
        }
        wf_nn_params_release(back);
    }
    unlink(path);
    wf_nn_params_release(p);
    wf_release(a), wf_release(b);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* An archive whose entries end just short of the writer's first 4096-byte
 * block: the central directory needs the buffer to grow, and that growth
 * failing is an out-of-memory error too (then the file is written whole). */
static void test_save_npz_directory_out_of_memory(void)
{
    const int64_t live = live_arrays();
    char path[] = "/tmp/weft-err-npzdir-XXXXXX";
    const int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return;
    close(fd);
    /* 30 (local header) + 5 ("c.npy") + 128 (.npy header) + 3900 = 4063 bytes:
     * the 51-byte directory entry no longer fits in 4096 */
    const int64_t n = 3900;
    uint8_t *v = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 7);
    wf_array *c = wf_array_from_data(v, &n, 1, WF_DTYPE_U8);
    wf_nn_params *p = wf_nn_params_new();
    CHECK_OK(wf_nn_params_add(p, "c", c));
    int failures = 0;
    wf_status st = WF_OK;
    for (int64_t nth = 1; nth < 100; nth++) {
        arm(nth);
        st = wf_nn_save_npz(p, path, false);
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        if (!fired)
            break;
        CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_nn_save_npz: out of memory");
        failures++;
    }
    CHECK_OK(st);
    CHECK_EQ_INT(failures, 4); /* the image, the entry, the directory, its growth */
    wf_nn_params *back = wf_nn_load_npz(path);
    if (CHECK_NOT_NULL(back) && CHECK_EQ_SIZE(wf_nn_params_count(back), 1)) {
        CHECK_EQ_INT(wf_array_size(wf_nn_params_get(back, 0)), n);
        uint8_t *got = calloc((size_t)n, 1);
        CHECK_OK(wf_array_copy_to(wf_nn_params_get(back, 0), got, (size_t)n));
        CHECK(memcmp(got, v, (size_t)n) == 0);
        free(got);
    }
    wf_nn_params_release(back);
    unlink(path);
    wf_nn_params_release(p);
    wf_release(c);
    free(v);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* Loads `path` in the given format (0 npy, 1 npz, 2 gguf, 3 safetensors):
 * the number of entries, or -1 with the error recorded. */
static int load_count(int format, const char *path)
{
    if (format == 0) {
        wf_array *a = wf_nn_load_npy(path);
        wf_release(a);
        return a ? 1 : -1;
    }
    wf_nn_gguf_meta *meta = NULL;
    wf_nn_params *p = format == 1   ? wf_nn_load_npz(path)
                      : format == 2 ? wf_nn_load_gguf(path, &meta)
                                    : wf_nn_load_safetensors(path);
    const int n = p ? (int)wf_nn_params_count(p) : -1;
    if (format == 2 && p)
        CHECK_EQ_SIZE(wf_nn_gguf_meta_count(meta), 2);
    wf_nn_gguf_meta_release(meta);
    wf_nn_params_release(p);
    return n;
}

/* Every file loader with each of its fallible operations failing in turn:
 * NULL with WF_ERR_OUT_OF_MEMORY, or WF_ERR_IO when the file's mapping is
 * what failed, and then the file loads whole. */
static void test_file_loaders_out_of_memory(void)
{
    const int64_t live = live_arrays();
    char dirpath[] = "/tmp/weft-err-load-XXXXXX";
    if (!CHECK(mkdtemp(dirpath) != NULL))
        return;
    static const char *const names[4] = {"a.npy", "a.npz", "a.gguf", "a.safetensors"};
    char paths[4][96];
    for (int f = 0; f < 4; f++)
        snprintf(paths[f], sizeof paths[f], "%s/%s", dirpath, names[f]);
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = ramp(40), *b = wf_astype(a, WF_DTYPE_F16);
    CHECK_OK(wf_nn_params_add(p, "a", a));
    CHECK_OK(wf_nn_params_add(p, "b", b));
    wf_nn_gguf_meta *meta = wf_nn_gguf_meta_new();
    const char *words[2] = {"x", "yz"};
    CHECK_OK(wf_nn_gguf_meta_add_strings(meta, "general.words", words, 2, true));
    CHECK_OK(wf_nn_gguf_meta_add_array(meta, "general.scale", a));
    CHECK_OK(wf_nn_save_npy(a, paths[0]));
    CHECK_OK(wf_nn_save_npz(p, paths[1], true));
    CHECK_OK(wf_nn_save_gguf(p, meta, paths[2]));
    CHECK_OK(wf_nn_save_safetensors(p, paths[3]));
    for (int f = 0; f < 4; f++) {
        int failures = 0, n = -1;
        for (int64_t nth = 1; nth < 1000; nth++) {
            arm(nth);
            n = load_count(f, paths[f]);
            const bool fired = wf__fault_fired();
            wf__fault_arm(0);
            if (!fired)
                break;
            if (n >= 0)
                continue; /* absorbed */
            failures++;
            char msg[512];
            snprintf(msg, sizeof msg, "%s", wf_last_error_message());
            const wf_status st = wf_last_error();
            if (!CHECK(st == WF_ERR_OUT_OF_MEMORY || (st == WF_ERR_IO && strstr(msg, "cannot map"))))
                printf("    %s, failure %lld: %s \"%s\"\n", names[f], (long long)nth,
                       wf_status_name(st), msg);
            wf_clear_error();
        }
        CHECK_EQ_INT(n, f == 0 ? 1 : 2);
        CHECK(failures >= 2);
        unlink(paths[f]);
    }
    rmdir(dirpath);
    wf_nn_gguf_meta_release(meta);
    wf_nn_params_release(p);
    wf_release(a), wf_release(b);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* The writers with each fallible operation failing in turn: an
 * out-of-memory error naming the writer each time, then a file that loads. */
static void test_file_writers_out_of_memory(void)
{
    const int64_t live = live_arrays();
    char path[] = "/tmp/weft-err-write-XXXXXX";
    const int fd = mkstemp(path);
    if (!CHECK(fd >= 0))
        return;
    close(fd);
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = ramp(40), *b = wf_astype(a, WF_DTYPE_F16);
    CHECK_OK(wf_nn_params_add(p, "a", a));
    CHECK_OK(wf_nn_params_add(p, "b\"quoted", b));
    CHECK_OK(wf_eval(&b, 1)); /* an injected kernel failure would stay with b */
    wf_nn_gguf_meta *meta = wf_nn_gguf_meta_new();
    const char *words[2] = {"x", "yz"};
    CHECK_OK(wf_nn_gguf_meta_add_strings(meta, "general.words", words, 2, true));
    for (int w = 0; w < 3; w++) {
        int failures = 0;
        wf_status st = WF_OK;
        for (int64_t nth = 1; nth < 1000; nth++) {
            arm(nth);
            st = w == 0   ? wf_nn_save_npy(b, path)
                 : w == 1 ? wf_nn_save_gguf(p, meta, path)
                          : wf_nn_save_safetensors(p, path);
            const bool fired = wf__fault_fired();
            wf__fault_arm(0);
            if (!fired)
                break;
            if (st == WF_OK)
                continue; /* absorbed */
            failures++;
            CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "out of memory");
        }
        CHECK_OK(st);
        CHECK(failures >= (w == 1 ? 0 : 1)); /* the GGUF writer streams (stdio only) */
        wf_nn_params *back = w == 1 ? wf_nn_load_gguf(path, NULL)
                             : w == 2 ? wf_nn_load_safetensors(path) : NULL;
        if (w == 0) {
            wf_array *one = wf_nn_load_npy(path);
            CHECK_EQ_INT(wf_array_size(one), 40);
            wf_release(one);
        } else if (CHECK_NOT_NULL(back)) {
            CHECK_EQ_SIZE(wf_nn_params_count(back), 2);
            CHECK(wf_nn_params_find(back, "b\"quoted") == 1);
        }
        wf_nn_params_release(back);
    }
    unlink(path);
    wf_nn_gguf_meta_release(meta);
    wf_nn_params_release(p);
    wf_release(a), wf_release(b);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

/* ------------------------------------------------------------ gather_qmm */

static void test_gather_qmm_bad_arguments(void)
{
    const int64_t ws[3] = {2, 8, 32}, xs[3] = {2, 1, 32}, vec = 32, two = 2;
    wf_array *w = wf_ones(ws, 3, WF_DTYPE_F32), *x = wf_ones(xs, 3, WF_DTYPE_F32);
    wf_array *q = NULL, *s = NULL, *b = NULL, *fq = NULL, *fs = NULL, *fb = NULL;
    CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_AFFINE, &q, &s, &b));
    CHECK_OK(wf_quantize(w, 32, 4, WF_QUANT_MXFP4, &fq, &fs, &fb));
    wf_array *idx = wf_zeros(&two, 1, WF_DTYPE_I32), *x1 = wf_ones(&vec, 1, WF_DTYPE_F32);
    expect_null(wf_gather_qmm_mode(NULL, q, s, b, idx, idx, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_NULL_ARGUMENT, "wf_gather_qmm");
    expect_null(wf_gather_qmm_mode(x, q, NULL, b, idx, idx, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_NULL_ARGUMENT, "wf_gather_qmm");
    expect_null(wf_gather_qmm_mode(x, fq, fs, b, idx, idx, true, 32, 4, WF_QUANT_MXFP4),
                WF_ERR_INVALID_ARGUMENT, "biases must be NULL");
    expect_null(wf_gather_qmm_mode(x1, q, s, b, idx, idx, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_SHAPE, "x and w must be at least 2-d");
    /* the index batch and the matrix axes must fit in WF_MAX_NDIM */
    int64_t ones[WF_MAX_NDIM - 1];
    for (int d = 0; d < WF_MAX_NDIM - 1; d++)
        ones[d] = 1;
    wf_array *deep = wf_zeros(ones, WF_MAX_NDIM - 1, WF_DTYPE_I32);
    wf_array *single = wf_zeros(ones, 1, WF_DTYPE_I32);
    char why[96];
    snprintf(why, sizeof why, "wf_gather_qmm: the result would have more than %d dimensions",
             WF_MAX_NDIM);
    expect_null(wf_gather_qmm_mode(x, q, s, b, deep, single, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_SHAPE, why);
    wf_array *three = wf_zeros(&(int64_t){3}, 1, WF_DTYPE_I32);
    expect_null(wf_gather_qmm_mode(x, q, s, b, idx, three, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_SHAPE, "wf_gather_qmm: batch shapes (2,) and (3,) do not broadcast");
    wf_array *fidx = wf_zeros(&two, 1, WF_DTYPE_F32);
    expect_null(wf_gather_qmm_mode(x, q, s, b, fidx, idx, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_DTYPE, "wf_gather_qmm: indices must be integers, got float32");
    wf_release(deep), wf_release(single), wf_release(three), wf_release(fidx);
    /* Regression: a released index array was given a new reference (revived)
     * and read as indices; the result failed at evaluation with a wrong
     * "out of memory copying an operand" instead of a refusal. */
    const int64_t live = live_arrays();
    wf_array *gone = wf_zeros(&two, 1, WF_DTYPE_I32);
    wf_release(gone);
    expect_null(wf_gather_qmm_mode(x, q, s, b, gone, NULL, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_MISUSE, "wf_gather_qmm: lhs_indices was already released");
    expect_null(wf_gather_qmm_mode(x, q, s, b, idx, gone, true, 32, 4, WF_QUANT_AFFINE),
                WF_ERR_MISUSE, "wf_gather_qmm: rhs_indices was already released");
    CHECK_EQ_INT(live_arrays(), live);
    /* without indices: the plain product */
    wf_array *y = wf_gather_qmm_mode(x, q, s, b, NULL, NULL, true, 32, 4, WF_QUANT_AFFINE);
    wf_array *want = wf_quantized_matmul(x, q, s, b, true, 32, 4);
    wf_array *diff = wf_max(wf_abs(wf_subtract(y, want)), NULL, 0, false);
    double d = 1;
    CHECK_OK(wf_array_item(diff, &d));
    CHECK_NEAR(d, 0, 0);
    wf_release(diff), wf_release(want), wf_release(y);
    wf_release(idx), wf_release(x1);
    wf_release(q), wf_release(s), wf_release(b), wf_release(fq), wf_release(fs), wf_release(fb);
    wf_release(w), wf_release(x);
}

/* Regression: a node whose input had failed keeps a copy of the input's
 * message; when that copy ran out of memory the failure came back with an
 * empty message. Every fallible operation of evaluating exp(a), a failed,
 * fails in turn: the status is a's, the message a's or one saying it was
 * lost, never empty. */
static void test_failure_message_never_empty(void)
{
    const int64_t live = live_arrays(), n = 4;
    wf_array *a = NULL;
    for (int nth = 1; nth < 64 && !a; nth++) { /* fail a's own kernel */
        wf_array *tried = wf_ones(&n, 1, WF_DTYPE_F32);
        arm(nth);
        const wf_status st = wf_eval(&tried, 1);
        wf__fault_arm(0);
        wf_clear_error();
        if (st == WF_ERR_KERNEL)
            a = tried;
        else
            wf_release(tried);
    }
    if (!CHECK_NOT_NULL(a))
        return;
    bool fired = true;
    for (int nth = 1; fired; nth++) {
        wf_array *b = wf_exp(a);
        arm(nth);
        const wf_status st = b ? wf_eval(&b, 1) : wf_last_error();
        fired = wf__fault_fired();
        wf__fault_arm(0);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", wf_last_error_message());
        CHECK(st != WF_OK);
        if (!CHECK(msg[0] != '\0'))
            printf("    operation %d: %s with an empty message\n", nth, wf_status_name(st));
        if (st == WF_ERR_KERNEL && !strstr(msg, "injected kernel failure"))
            CHECK_STR_CONTAINS(msg, "its message was lost (out of memory)");
        wf_clear_error();
        wf_release(b);
    }
    wf_release(a);
    CHECK_EQ_INT(live_arrays(), live);
}

int main(void)
{
    RUN_TEST(test_from_external_out_of_memory);
    RUN_TEST(test_retain_null);
    RUN_TEST(test_retain_released);
    RUN_TEST(test_slot_new_out_of_memory);
    RUN_TEST(test_keep_out_of_memory);
    RUN_TEST(test_stream_push_out_of_memory);
    RUN_TEST(test_compile_bad_state_and_out_of_memory);
    RUN_TEST(test_vjp_too_many_cotangents);
    RUN_TEST(test_vmap_too_many_axes_and_out_of_memory);
    RUN_TEST(test_nn_layers_out_of_memory);
    RUN_TEST(test_params_bad_arguments);
    RUN_TEST(test_params_add_refusals);
    RUN_TEST(test_params_index_growth_out_of_memory);
    RUN_TEST(test_params_set_refusals);
    RUN_TEST(test_file_functions_bad_arguments);
    RUN_TEST(test_data_strided_failed_evaluation);
    RUN_TEST(test_quantize_null_outputs);
    RUN_TEST(test_quantize_released_input);
    RUN_TEST(test_multi_output_all_or_nothing);
    RUN_TEST(test_group_bad_arguments);
    RUN_TEST(test_group_split_inside_a_kernel);
    RUN_TEST(test_save_gguf_bad_inputs);
    RUN_TEST(test_save_npz_out_of_memory);
    RUN_TEST(test_save_npz_directory_out_of_memory);
    RUN_TEST(test_save_npz_too_many_arrays);
    RUN_TEST(test_save_npz_zip64_refused);
    RUN_TEST(test_file_loaders_out_of_memory);
    RUN_TEST(test_file_writers_out_of_memory);
    RUN_TEST(test_gather_qmm_bad_arguments);
    RUN_TEST(test_failure_message_never_empty);
    return TEST_SUMMARY();
}
