/*
 * The embedding API's small pieces (issue 8): the run-time version, devices
 * as values with ids, and statistics structs that can grow (struct_size).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/array.h"
#include "harness.h"

/* ------------------------------------------------------------ version */

static void test_version_agrees_with_macros(void)
{
    char expected[64];
    snprintf(expected, sizeof expected, "%d.%d.%d", WF_VERSION_MAJOR, WF_VERSION_MINOR,
             WF_VERSION_PATCH);
    CHECK(strcmp(WF_VERSION_STRING, expected) == 0);
    const char *v = wf_version();
    if (CHECK_NOT_NULL(v))
        CHECK(strcmp(v, WF_VERSION_STRING) == 0);
    CHECK_EQ_INT(WF_VERSION_NUMBER,
                 WF_VERSION_MAJOR * 10000 + WF_VERSION_MINOR * 100 + WF_VERSION_PATCH);
    CHECK_EQ_INT(wf_version_number(), WF_VERSION_NUMBER);
    CHECK(wf_version() == wf_version()); /* a static string */
}

/* ------------------------------------------------------------ devices */

static void test_cpu_device(void)
{
    wf_device *cpu = wf_device_cpu();
    if (!CHECK_NOT_NULL(cpu))
        return;
    CHECK(wf_device_count() >= 1);
    CHECK(wf_device_get(0) == cpu);
    CHECK_EQ_INT(wf_device_kind(cpu), WF_DEVICE_TYPE_CPU);
    CHECK(strcmp(wf_device_name(cpu), "cpu") == 0);
    CHECK(wf_device_id(cpu) == 0);
    for (int i = 0; i < wf_device_count(); i++) { /* ids are the indices */
        wf_device *d = wf_device_get(i);
        if (CHECK_NOT_NULL(d))
            CHECK(wf_device_id(d) == (uint64_t)i);
    }
    CHECK_EQ_INT(wf_last_error(), WF_OK);
}

static void test_device_bad_handles(void)
{
    CHECK_NULL_WITH(wf_device_get(-1), WF_ERR_INVALID_ARGUMENT);
    wf_device *past = wf_device_get(wf_device_count());
    CHECK_STR_CONTAINS(wf_last_error_message(), "outside");
    CHECK_NULL_WITH(past, WF_ERR_INVALID_ARGUMENT);

    CHECK_EQ_INT(wf_device_kind(NULL), WF_DEVICE_TYPE_INVALID);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_device_name(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK(wf_device_id(NULL) == UINT64_MAX);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT);

    /* Something that is not a device: caught by comparing with the table. */
    uint64_t not_a_device[4] = {0};
    const wf_device *fake = (const wf_device *)not_a_device;
    wf_clear_error();
    CHECK_EQ_INT(wf_device_kind(fake), WF_DEVICE_TYPE_INVALID);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "not a weft device");
    CHECK_NULL_WITH(wf_device_name(fake), WF_ERR_INVALID_ARGUMENT);
    CHECK(wf_device_id(fake) == UINT64_MAX);
    CHECK_NULL_WITH(wf_device_default_stream((wf_device *)fake), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_stream_new_on((wf_device *)fake), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_device_default_stream(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_stream_new_on(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_stream_device(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_array_device(NULL), WF_ERR_NULL_ARGUMENT);
}

static void test_device_streams(void)
{
    wf_device *cpu = wf_device_cpu();
    wf_stream *def = wf_device_default_stream(cpu);
    wf_stream *def2 = wf_default_stream();
    CHECK(def && def == def2);
    CHECK(wf_stream_device(def) == cpu);
    wf_stream_release(def);
    wf_stream_release(def2);

    size_t streams = wf_stream_count(); /* the default stream exists now */
    wf_stream *s = wf_stream_new_on(cpu);
    if (!CHECK_NOT_NULL(s))
        return;
    CHECK_EQ_SIZE(wf_stream_count(), streams + 1);
    CHECK(wf_stream_device(s) == cpu);
    CHECK(wf_stream_device(s) != NULL && wf_device_id(wf_stream_device(s)) == 0);

    /* An array built on s is computed on s's device, before and after eval. */
    CHECK_OK(wf_stream_push(s));
    wf_array *x = wf_arange(0, 8, 1, WF_DTYPE_F32);
    wf_array *y = wf_exp(x);
    CHECK_OK(wf_stream_pop());
    CHECK(!wf_array_is_evaluated(y));
    CHECK(wf_array_device(y) == cpu);
    CHECK_OK(wf_eval(&y, 1));
    CHECK(wf_array_device(y) == cpu);
    double first = -1;
    wf_array *y0 = wf_slice(y, (int64_t[]){0}, (int64_t[]){1}, (int64_t[]){1});
    CHECK_OK(wf_array_item(y0, &first));
    CHECK_NEAR(first, 1.0, 1e-6);
    wf_release(y0);
    wf_release(y);
    wf_release(x);

    float v[2] = {1, 2};
    wf_array *data = wf_array_from_data(v, (int64_t[]){2}, 1, WF_DTYPE_F32);
    CHECK(wf_array_device(data) == cpu);
    wf_release(data);
    CHECK_NULL_WITH(wf_array_device(data), WF_ERR_MISUSE); /* released */
    wf_stream_release(s);
    CHECK_EQ_SIZE(wf_stream_count(), streams);
}

static void *device_id_on_thread(void *arg)
{
    uint64_t *id = arg;
    *id = wf_device_id(wf_device_get(0));
    return NULL;
}

static void test_device_id_same_on_every_thread(void)
{
    uint64_t ids[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, device_id_on_thread, &ids[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK(ids[i] == wf_device_id(wf_device_cpu()));
    }
}

/* ------------------------------------------------------------ structs that grow */

/* What a caller compiled against the first header with struct_size has. */
struct memory_stats_first {
    size_t struct_size;
    size_t active_bytes, peak_bytes, cached_bytes, limit_bytes;
};

static void test_memory_stats_default(void)
{
    wf_memory_stats s = wf_memory_stats_default();
    CHECK_EQ_SIZE(s.struct_size, sizeof(wf_memory_stats));
    CHECK_EQ_SIZE(s.active_bytes, 0);
    CHECK_OK(wf_memory_stats_get(&s));
    CHECK_EQ_SIZE(s.struct_size, sizeof(wf_memory_stats)); /* left alone */
    CHECK_EQ_SIZE(s.limit_bytes, SIZE_MAX);
}

static void test_memory_stats_first_version(void)
{
    CHECK_OK(wf_set_memory_limit((size_t)1 << 40));
    /* The first layout, with a guard where a newer field would go. */
    struct {
        struct memory_stats_first s;
        size_t guard[4];
    } old;
    memset(&old, 0xab, sizeof old);
    old.s.struct_size = sizeof old.s;
    size_t guard_value;
    memset(&guard_value, 0xab, sizeof guard_value);
    CHECK_OK(wf_memory_stats_get((wf_memory_stats *)&old.s));
    wf_memory_stats now = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&now));
    CHECK_EQ_SIZE(old.s.struct_size, sizeof old.s);
    CHECK_EQ_SIZE(old.s.limit_bytes, (size_t)1 << 40);
    CHECK_EQ_SIZE(old.s.active_bytes, now.active_bytes);
    CHECK_EQ_SIZE(old.s.cached_bytes, now.cached_bytes);
    CHECK_EQ_SIZE(old.s.peak_bytes, now.peak_bytes);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_SIZE(old.guard[i], guard_value);
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
}

static void test_memory_stats_newer_bigger_struct(void)
{
    /* A caller built against a later header with three more fields. */
    struct {
        wf_memory_stats s;
        size_t future[3];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.s.struct_size = sizeof newer;
    for (int i = 0; i < 3; i++)
        newer.future[i] = 1000 + (size_t)i;
    CHECK_OK(wf_memory_stats_get(&newer.s));
    CHECK_EQ_SIZE(newer.s.struct_size, sizeof newer);
    CHECK_EQ_SIZE(newer.s.limit_bytes, SIZE_MAX);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_SIZE(newer.future[i], 1000 + (size_t)i); /* never written */

    /* A size that is not a whole number of fields still copies only what fits. */
    newer.s.struct_size = sizeof(wf_memory_stats) + 4;
    newer.future[0] = 7;
    CHECK_OK(wf_memory_stats_get(&newer.s));
    CHECK_EQ_SIZE(newer.future[0], 7);
}

static void test_memory_stats_too_small(void)
{
    struct memory_stats_first s;
    memset(&s, 0x5a, sizeof s);
    size_t untouched = s.active_bytes;

    s.struct_size = 0; /* forgot to initialize */
    CHECK_STATUS(wf_memory_stats_get((wf_memory_stats *)&s), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "struct_size is 0");
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_memory_stats_default");
    CHECK_EQ_SIZE(s.active_bytes, untouched);

    s.struct_size = sizeof s - sizeof(size_t); /* older than the first version */
    CHECK_STATUS(wf_memory_stats_get((wf_memory_stats *)&s), WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_SIZE(s.active_bytes, untouched);
    CHECK_EQ_SIZE(s.struct_size, sizeof s - sizeof(size_t));

    s.struct_size = 1;
    CHECK_STATUS(wf_memory_stats_get((wf_memory_stats *)&s), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_memory_stats_get(NULL), WF_ERR_NULL_ARGUMENT);

    /* The library is still usable. */
    wf_memory_stats ok = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&ok));
}

int main(void)
{
    RUN_TEST(test_version_agrees_with_macros);
    RUN_TEST(test_cpu_device);
    RUN_TEST(test_device_bad_handles);
    RUN_TEST(test_device_streams);
    RUN_TEST(test_device_id_same_on_every_thread);
    RUN_TEST(test_memory_stats_default);
    RUN_TEST(test_memory_stats_first_version);
    RUN_TEST(test_memory_stats_newer_bigger_struct);
    RUN_TEST(test_memory_stats_too_small);
    return TEST_SUMMARY();
}
