/* Arrays: creation, metadata, data access, errors, scopes and misuse. */
#include <float.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/array.h"
#include "harness.h"
#include "settle.h"

static void test_from_data_and_metadata(void)
{
    float values[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    wf_array *a = wf_array_from_data(values, shape, 2, WF_DTYPE_F32);
    if (!CHECK_NOT_NULL(a))
        return;
    CHECK_EQ_INT(wf_array_ndim(a), 2);
    CHECK_EQ_INT(wf_array_shape(a)[0], 2);
    CHECK_EQ_INT(wf_array_shape(a)[1], 3);
    CHECK_EQ_INT(wf_array_dim(a, -1), 3);
    CHECK_EQ_INT(wf_array_dim(a, 2), -1);
    CHECK_EQ_INT(wf_array_size(a), 6);
    CHECK_EQ_INT(wf_array_dtype(a), WF_DTYPE_F32);
    CHECK_EQ_SIZE(wf_array_nbytes(a), 24);
    CHECK(wf_array_is_evaluated(a));
    values[0] = 100; /* the array holds a copy */
    const float *data;
    CHECK_OK(wf_array_data(a, (const void **)&data));
    CHECK_NEAR(data[0], 1, 0);
    CHECK_NEAR(data[5], 6, 0);
    float out[6];
    CHECK_OK(wf_array_copy_to(a, out, sizeof out));
    CHECK_NEAR(out[3], 4, 0);
    CHECK_STATUS(wf_array_copy_to(a, out, 8), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "needs 24");
    double item;
    CHECK_STATUS(wf_array_item(a, &item), WF_ERR_SHAPE);
    wf_release(a);
}

static void test_every_dtype_scalar(void)
{
    /* one value each that only its dtype holds exactly (complex: the real part) */
    const double expected[WF_DTYPE_COUNT] = {
        [WF_DTYPE_BOOL] = 1,     [WF_DTYPE_U8] = 200,    [WF_DTYPE_I32] = -7,
        [WF_DTYPE_I64] = -9000000000.0, [WF_DTYPE_F16] = 1.5, [WF_DTYPE_BF16] = 2.5,
        [WF_DTYPE_F32] = 0.25,   [WF_DTYPE_F64] = 1e300, [WF_DTYPE_I8] = -100,
        [WF_DTYPE_I16] = -30000, [WF_DTYPE_U16] = 60000, [WF_DTYPE_U32] = 4000000000.0,
        [WF_DTYPE_U64] = 18000000000000000000.0, [WF_DTYPE_C64] = 0.75};
    for (int d = 0; d < WF_DTYPE_COUNT; d++) {
        wf_array *s = wf_scalar(expected[d], (wf_dtype)d);
        if (!CHECK_NOT_NULL(s))
            continue;
        CHECK_EQ_INT(wf_array_ndim(s), 0);
        CHECK(wf_array_shape(s) == NULL);
        CHECK_EQ_INT(wf_array_size(s), 1);
        CHECK_EQ_SIZE(wf_array_nbytes(s), wf_dtype_size((wf_dtype)d));
        double v;
        CHECK_OK(wf_array_item(s, &v));
        CHECK_NEAR(v, expected[d], 0);
        wf_release(s);
    }
}

static void test_dtype_table(void)
{
    CHECK_EQ_SIZE(wf_dtype_size(WF_DTYPE_BF16), 2);
    CHECK_EQ_SIZE(wf_dtype_size((wf_dtype)99), 0);
    CHECK(strcmp(wf_dtype_name(WF_DTYPE_F16), "float16") == 0);
    CHECK(strcmp(wf_dtype_name((wf_dtype)-1), "invalid") == 0);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_BOOL, WF_DTYPE_U8), WF_DTYPE_U8);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_I32, WF_DTYPE_I64), WF_DTYPE_I64);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_I64, WF_DTYPE_F16), WF_DTYPE_F16);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_F16, WF_DTYPE_BF16), WF_DTYPE_F32);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_BF16, WF_DTYPE_F64), WF_DTYPE_F64);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_F32, WF_DTYPE_F32), WF_DTYPE_F32);
    CHECK_EQ_INT(wf_promote_types((wf_dtype)42, WF_DTYPE_F32), WF_DTYPE_COUNT);
}

static void test_empty_and_zero_d(void)
{
    int64_t shape[3] = {2, 0, 5};
    wf_array *e = wf_array_from_data(NULL, shape, 3, WF_DTYPE_I64);
    if (!CHECK_NOT_NULL(e))
        return;
    CHECK_EQ_INT(wf_array_size(e), 0);
    CHECK_EQ_SIZE(wf_array_nbytes(e), 0);
    const void *p = NULL;
    CHECK_OK(wf_array_data(e, &p));
    CHECK_OK(wf_array_copy_to(e, NULL, 0));
    wf_release(e);
    int32_t v = 42;
    wf_array *z = wf_array_from_data(&v, NULL, 0, WF_DTYPE_I32);
    double item;
    CHECK_OK(wf_array_item(z, &item));
    CHECK_NEAR(item, 42, 0);
    wf_release(z);
}

static void test_bool_is_canonical(void)
{
    uint8_t raw[3] = {0, 7, 255};
    int64_t n = 3;
    wf_array *b = wf_array_from_data(raw, &n, 1, WF_DTYPE_BOOL);
    const uint8_t *data;
    CHECK_OK(wf_array_data(b, (const void **)&data));
    CHECK_EQ_INT(data[0], 0);
    CHECK_EQ_INT(data[1], 1);
    CHECK_EQ_INT(data[2], 1);
    wf_release(b);
}

static void test_bad_creation_input(void)
{
    float v[4] = {0};
    int64_t shape[2] = {2, 2};
    int64_t negative[2] = {2, -1};
    int64_t huge[3] = {1LL << 40, 1LL << 40, 1LL << 40};
    CHECK_NULL_WITH(wf_array_from_data(NULL, shape, 2, WF_DTYPE_F32), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_data(v, NULL, 2, WF_DTYPE_F32), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_data(v, negative, 2, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_data(v, shape, -1, WF_DTYPE_F32), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_data(v, shape, WF_MAX_NDIM + 1, WF_DTYPE_F32),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_data(v, shape, 2, (wf_dtype)77), WF_ERR_DTYPE);
    CHECK_NULL_WITH(wf_array_from_data(v, huge, 3, WF_DTYPE_F32), WF_ERR_OVERFLOW);
    /* Empty, but the other dims would overflow strides (signed overflow). */
    int64_t empty_huge[3] = {0, 1LL << 40, 1LL << 40};
    CHECK_NULL_WITH(wf_zeros(empty_huge, 3, WF_DTYPE_F32), WF_ERR_OVERFLOW);
    CHECK_NULL_WITH(wf_scalar(1, WF_DTYPE_COUNT), WF_ERR_DTYPE);
    /* Still usable afterwards. */
    wf_array *ok = wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    CHECK_NOT_NULL(ok);
    wf_release(ok);
}

static void test_creation_under_memory_limit(void)
{
    float v[1024] = {0};
    int64_t n = 1024;
    wf_clear_cache();
    wf_memory_stats stats = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&stats));
    CHECK_OK(wf_set_memory_limit(stats.active_bytes + 1024));
    CHECK_NULL_WITH(wf_array_from_data(v, &n, 1, WF_DTYPE_F32), WF_ERR_OUT_OF_MEMORY);
    wf_array *small = wf_array_from_data(v, &n, 1, WF_DTYPE_U8); /* 1 KiB fits */
    CHECK_NOT_NULL(small);
    wf_release(small);
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    wf_array *big = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    CHECK_NOT_NULL(big);
    wf_release(big);
    CHECK_STATUS(wf_memory_stats_get(NULL), WF_ERR_NULL_ARGUMENT);
}

static void test_null_handles(void)
{
    wf_release(NULL);
    CHECK(wf_retain(NULL) == NULL);
    CHECK_EQ_INT(wf_array_ndim(NULL), 0);
    CHECK(wf_array_shape(NULL) == NULL);
    CHECK_EQ_INT(wf_array_size(NULL), 0);
    CHECK_EQ_INT(wf_array_dtype(NULL), WF_DTYPE_COUNT);
    CHECK(!wf_array_is_evaluated(NULL));
    const void *p;
    wf_clear_error();
    CHECK_STATUS(wf_array_data(NULL, &p), WF_ERR_NULL_ARGUMENT);
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    CHECK_STATUS(wf_array_data(one, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_array_item(one, NULL), WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    CHECK_STATUS(wf_eval(NULL, 1), WF_ERR_NULL_ARGUMENT);
    wf_array *arr[2] = {one, NULL};
    wf_clear_error();
    CHECK_STATUS(wf_eval(arr, 2), WF_ERR_NULL_ARGUMENT);
    CHECK_OK(wf_eval(NULL, 0));
    wf_release(one);
}

static void test_null_input_keeps_first_error(void)
{
    wf_clear_error();
    int64_t bad = -3;
    wf_array *a = wf_zeros(&bad, 1, WF_DTYPE_F32); /* fails: negative dim */
    CHECK(a == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *b = wf_add(a, one); /* NULL input: the first error is kept */
    wf_array *c = wf_exp(b);
    CHECK(c == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "negative");
    wf_clear_error();
    CHECK(wf_exp(NULL) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    CHECK_EQ_INT(wf_last_error(), WF_OK);
    CHECK(strcmp(wf_last_error_message(), "") == 0);
    wf_release(one);
}

static void test_released_array_is_misuse(void)
{
    wf_array *a = wf_scalar(3, WF_DTYPE_F32);
    wf_release(a);
    /* The node is quarantined, so this is a checked error, not a crash. */
    CHECK_STATUS(wf_eval(&a, 1), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "released");
    double v;
    CHECK_STATUS(wf_array_item(a, &v), WF_ERR_MISUSE);
    CHECK_NULL_WITH(wf_exp(a), WF_ERR_MISUSE);
    wf_release(a); /* a second release is ignored with an error */
    CHECK_EQ_INT(wf_last_error(), WF_ERR_MISUSE);
    CHECK_EQ_INT(wf_array_size(a), 0);
    wf_clear_error();
}

static void test_status_names(void)
{
    CHECK(strcmp(wf_status_name(WF_OK), "WF_OK") == 0);
    CHECK(strcmp(wf_status_name(WF_ERR_SHAPE), "WF_ERR_SHAPE") == 0);
    CHECK(strcmp(wf_status_name((wf_status)-1000), "WF_ERR_UNKNOWN") == 0);
}

static void test_scope_releases_chain(void)
{
    int64_t live = live_arrays();
    int64_t shape[1] = {4};
    CHECK_OK(wf_scope_begin());
    wf_array *x = wf_ones(shape, 1, WF_DTYPE_F32);
    wf_array *y = wf_exp(wf_add(x, wf_multiply(x, x)));
    wf_array *kept = wf_keep(y);
    CHECK(kept == y);
    CHECK_OK(wf_scope_end());
    /* Only the kept result (and its graph) survive. */
    double sum_value = 0;
    const float *data;
    CHECK_OK(wf_array_data(kept, (const void **)&data));
    for (int i = 0; i < 4; i++)
        sum_value += data[i];
    CHECK_NEAR(sum_value, 4 * exp(2.0), 1e-4);
    wf_release(kept);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_nested_scopes_and_manual_release(void)
{
    int64_t live = live_arrays();
    CHECK_OK(wf_scope_begin());
    wf_array *a = wf_scalar(1, WF_DTYPE_F32);
    CHECK_OK(wf_scope_begin());
    wf_array *b = wf_add(a, a);
    wf_array *c = wf_retain(b); /* a second reference, also owned by the scope */
    wf_release(c);              /* released by hand: the scope forgets it */
    CHECK(wf_keep(b) == b);     /* moves to the outer scope */
    CHECK_OK(wf_scope_end());
    double v;
    CHECK_OK(wf_array_item(b, &v));
    CHECK_NEAR(v, 2, 0);
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(live_arrays(), live);
}

/* An op whose result equals its input still returns a node of its own, so
 * releasing an older reference to the input inside a scope is not mistaken
 * for releasing the op's result. */
static void test_scope_with_older_reference(void)
{
    int64_t live = live_arrays();
    int64_t n = 3;
    wf_array *a = wf_ones(&n, 1, WF_DTYPE_I32);
    CHECK_OK(wf_scope_begin());
    wf_array *same = wf_astype(a, WF_DTYPE_I32);
    wf_array *rounded = wf_floor(a);
    CHECK(same != a && rounded != a);
    wf_release(a); /* the reference from before the scope */
    double total = 0;
    wf_array *s = wf_sum(rounded, NULL, 0, false);
    CHECK_OK(wf_array_item(s, &total));
    CHECK_NEAR(total, 3, 0);
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(live_arrays(), live);
    (void)same;
}

static void test_scope_misuse(void)
{
    CHECK_STATUS(wf_scope_end(), WF_ERR_MISUSE);
    wf_array *a = wf_scalar(1, WF_DTYPE_F32);
    CHECK_NULL_WITH(wf_keep(a), WF_ERR_MISUSE); /* no scope open */
    CHECK_OK(wf_scope_begin());
    CHECK_NULL_WITH(wf_keep(a), WF_ERR_MISUSE); /* not owned by the scope */
    CHECK_NULL_WITH(wf_keep(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_OK(wf_scope_end());
    wf_release(a);
}

static void *thread_leaves_scope_open(void *arg)
{
    (void)arg;
    wf_scope_begin();
    wf_array *a = wf_scalar(5, WF_DTYPE_F64);
    wf_array *b = wf_add(a, a);
    (void)b;
    return NULL; /* exits with the scope open: the thread-exit hook frees it */
}

static void test_thread_exit_closes_scopes(void)
{
    int64_t live = live_arrays();
    pthread_t t;
    pthread_create(&t, NULL, thread_leaves_scope_open, NULL);
    pthread_join(t, NULL);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_deep_chain_release_does_not_recurse(void)
{
    int64_t live = live_arrays();
    wf_array *x = wf_scalar(0, WF_DTYPE_F32);
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    for (int i = 0; i < 200000; i++) {
        wf_array *next = wf_add(x, one);
        wf_release(x);
        x = next;
    }
    wf_release(one);
    wf_release(x); /* frees 200,000 nodes iteratively */
    CHECK_EQ_INT(live_arrays(), live);
}

/* Nodes built by the same op with the same arguments have equal params and
 * hashes; other arguments differ (what CSE and cache keys will rely on). */
static void test_params_equality_and_hash(void)
{
    int64_t shape[2] = {2, 3};
    wf_array *x = wf_ones(shape, 2, WF_DTYPE_F32);
    int axes0[1] = {0}, axes1[1] = {1};
    wf_array *s0 = wf_sum(x, axes0, 1, false), *s0b = wf_sum(x, axes0, 1, false);
    wf_array *s1 = wf_sum(x, axes1, 1, false), *k0 = wf_sum(x, axes0, 1, true);
    const wf_prim_def *prim = s0->prim;
    CHECK(prim == s1->prim && prim == k0->prim);
    CHECK(wf__prim_params_equal(prim, s0->params, s0b->params));
    CHECK_EQ_INT(wf__prim_params_hash(prim, s0->params), wf__prim_params_hash(prim, s0b->params));
    CHECK(!wf__prim_params_equal(prim, s0->params, s1->params));
    CHECK(!wf__prim_params_equal(prim, s0->params, k0->params));
    CHECK(wf__prim_params_hash(prim, s0->params) != wf__prim_params_hash(prim, s1->params));
    wf_array *e1 = wf_exp(x), *e2 = wf_exp(x); /* no params at all */
    CHECK(wf__prim_params_equal(e1->prim, e1->params, e2->params));
    wf_release(s0);
    wf_release(s0b);
    wf_release(s1);
    wf_release(k0);
    wf_release(e1);
    wf_release(e2);
    wf_release(x);
}

int main(void)
{
    RUN_TEST(test_from_data_and_metadata);
    RUN_TEST(test_every_dtype_scalar);
    RUN_TEST(test_dtype_table);
    RUN_TEST(test_empty_and_zero_d);
    RUN_TEST(test_bool_is_canonical);
    RUN_TEST(test_bad_creation_input);
    RUN_TEST(test_creation_under_memory_limit);
    RUN_TEST(test_null_handles);
    RUN_TEST(test_null_input_keeps_first_error);
    RUN_TEST(test_released_array_is_misuse);
    RUN_TEST(test_status_names);
    RUN_TEST(test_scope_releases_chain);
    RUN_TEST(test_nested_scopes_and_manual_release);
    RUN_TEST(test_scope_with_older_reference);
    RUN_TEST(test_scope_misuse);
    RUN_TEST(test_thread_exit_closes_scopes);
    RUN_TEST(test_deep_chain_release_does_not_recurse);
    RUN_TEST(test_params_equality_and_hash);
    return TEST_SUMMARY();
}
