/* Unit tests for the buffer allocator (src/core/allocator.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/buffer.h"
#include "harness.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static wf_memory_stats stats_now(void)
{
    wf_memory_stats s = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&s));
    return s;
}

/* Every test starts from an empty cache and an unlimited allocator. */
static wf_memory_stats start_clean(void)
{
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    wf_clear_cache();
    wf_clear_error();
    wf_memory_stats s = stats_now();
    CHECK_EQ_SIZE(s.cached_bytes, 0);
    return s;
}

static void finish(void)
{
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    wf_clear_cache();
}

static void test_reuse(void)
{
    wf_memory_stats base = start_clean();
    wf_buffer *a = wf__buffer_alloc(1000);
    CHECK_NOT_NULL(a);
    if (!a)
        return;
    void *data = a->data;
    CHECK_EQ_SIZE(a->bytes, 1000);
    CHECK_EQ_SIZE(a->capacity, 1024);
    memset(a->data, 0xab, a->bytes);
    wf__buffer_release(a);
    CHECK_EQ_SIZE(stats_now().cached_bytes, base.cached_bytes + 1024);

    /* Same class (1000 and 1001 both round to 1024): the hot block comes back. */
    wf_buffer *b = wf__buffer_alloc(1001);
    CHECK_NOT_NULL(b);
    if (b) {
        CHECK(b->data == data);
        CHECK_EQ_SIZE(b->bytes, 1001);
        CHECK_EQ_SIZE(b->capacity, 1024);
        CHECK_EQ_INT(atomic_load(&b->refcount), 1);
    }
    CHECK_EQ_SIZE(stats_now().cached_bytes, base.cached_bytes);
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes + 1024);
    wf__buffer_release(b);

    /* LIFO: of two cached blocks of a class, the last freed is reused first. */
    wf_buffer *x = wf__buffer_alloc(4000), *y = wf__buffer_alloc(4000);
    CHECK(x && y);
    if (x && y) {
        void *yd = y->data;
        wf__buffer_release(x);
        wf__buffer_release(y);
        wf_buffer *z = wf__buffer_alloc(4000);
        CHECK(z && z->data == yd);
        wf__buffer_release(z);
    }

    /* Large (mmap'ed) buffers are reused too. */
    wf_buffer *l = wf__buffer_alloc(3 * MIB);
    CHECK_NOT_NULL(l);
    if (l) {
        void *ld = l->data;
        CHECK_EQ_SIZE(l->capacity, 4 * MIB);
        memset(l->data, 1, l->bytes);
        wf__buffer_release(l);
        CHECK_EQ_SIZE(stats_now().cached_bytes, base.cached_bytes + 1024 + 2 * 4096 + 4 * MIB);
        wf_buffer *m = wf__buffer_alloc(4 * MIB);
        CHECK(m && m->data == ld);
        wf__buffer_release(m);
    }
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes);
    finish();
}

static size_t capacity_of(size_t n)
{
    wf_buffer *b = wf__buffer_alloc(n);
    CHECK_NOT_NULL(b);
    if (!b)
        return 0;
    size_t c = b->capacity;
    CHECK_EQ_SIZE(b->bytes, n);
    wf__buffer_release(b);
    return c;
}

static void test_size_classes(void)
{
    start_clean();
    static const struct {
        size_t n, cap;
    } cases[] = {
        {1, 64},
        {63, 64},
        {64, 64},
        {65, 128},
        {129, 192},
        {256, 256},
        {257, 320},
        {320, 320},
        {321, 384},
        {511, 512},
        {512, 512},
        {513, 640},
        {1000, 1024},
        {1025, 1280},
        {100000, 114688}, /* (65536, 131072]: step 16384 */
        {2 * MIB - 1, 2 * MIB},
        {2 * MIB, 2 * MIB},
        {2 * MIB + 1, 4 * MIB},
        {5 * MIB, 6 * MIB},
        {8 * MIB, 8 * MIB},
        {9 * MIB, 10 * MIB},
        {17 * MIB, 20 * MIB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_EQ_SIZE(capacity_of(cases[i].n), cases[i].cap);

    /* Waste bound: < 64 bytes up to 256, < n/4 below 2 MiB; capacity is a
     * multiple of 64, and of 2 MiB from 2 MiB on. */
    for (size_t n = 1; n < 2 * MIB; n += (n < 4096 ? 1 : n / 7 + 1)) {
        size_t c = capacity_of(n);
        CHECK(c >= n);
        CHECK(c % 64 == 0);
        if (n <= 256)
            CHECK(c - n < 64);
        else
            CHECK(c - n < n / 4);
        wf_clear_cache();
    }
    for (size_t n = 2 * MIB; n < 40 * MIB; n += MIB + 12345) {
        size_t c = capacity_of(n);
        CHECK(c >= n);
        CHECK(c % (2 * MIB) == 0);
        CHECK(c - n < (n / 4 > 2 * MIB ? n / 4 : 2 * MIB));
        wf_clear_cache();
    }
    finish();
}

static void test_alignment(void)
{
    start_clean();
    static const size_t sizes[] = {1, 3, 17, 64, 100, 255, 257, 1000, 4097, 65537, 1000000,
                                   2 * MIB - 7, 2 * MIB, 3 * MIB + 5};
    wf_buffer *bufs[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        bufs[i] = wf__buffer_alloc(sizes[i]);
        CHECK_NOT_NULL(bufs[i]);
        if (!bufs[i])
            continue;
        CHECK(((uintptr_t)bufs[i]->data & 63) == 0);
        CHECK(bufs[i]->capacity >= sizes[i]);
        /* The whole capacity is usable (ASan would flag an overrun). */
        memset(bufs[i]->data, (int)i, bufs[i]->capacity);
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        wf__buffer_release(bufs[i]);
    finish();
}

static void test_zero_bytes(void)
{
    wf_memory_stats base = start_clean();
    wf_buffer *a = wf__buffer_alloc(0), *b = wf__buffer_alloc(0);
    CHECK_NOT_NULL(a);
    CHECK_NOT_NULL(b);
    if (a && b) {
        CHECK_NOT_NULL(a->data);
        CHECK(((uintptr_t)a->data & 63) == 0);
        CHECK_EQ_SIZE(a->bytes, 0);
        CHECK_EQ_SIZE(a->capacity, 0);
        CHECK(a != b);
        wf_memory_stats s = stats_now();
        CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
        CHECK_EQ_SIZE(s.cached_bytes, 0);
        CHECK(wf__buffer_retain(a) == a);
        wf__buffer_release(a);
    }
    wf__buffer_release(a);
    wf__buffer_release(b);
    /* Empty buffers take no counted memory, so even a limit of 0 allows them. */
    CHECK_OK(wf_set_memory_limit(0));
    wf_buffer *c = wf__buffer_alloc(0);
    CHECK_NOT_NULL(c);
    if (c)
        CHECK_NOT_NULL(c->data);
    wf__buffer_release(c);
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    finish();
}

static void test_stats(void)
{
    wf_memory_stats base = start_clean();
    wf_reset_peak_memory();
    CHECK_EQ_SIZE(stats_now().peak_bytes, base.active_bytes);
    CHECK_EQ_SIZE(stats_now().limit_bytes, SIZE_MAX);

    wf_buffer *a = wf__buffer_alloc(100);  /* 128 */
    wf_buffer *b = wf__buffer_alloc(3000); /* 3072 */
    CHECK(a && b);
    wf_memory_stats s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes + 128 + 3072);
    CHECK_EQ_SIZE(s.peak_bytes, base.active_bytes + 128 + 3072);
    CHECK_EQ_SIZE(s.cached_bytes, 0);

    /* Retain/release pairs change nothing; the last release caches. */
    wf__buffer_retain(a);
    wf__buffer_release(a);
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes + 128 + 3072);
    wf__buffer_release(a);
    s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes + 3072);
    CHECK_EQ_SIZE(s.peak_bytes, base.active_bytes + 128 + 3072);
    CHECK_EQ_SIZE(s.cached_bytes, 128);

    wf_reset_peak_memory();
    CHECK_EQ_SIZE(stats_now().peak_bytes, base.active_bytes + 3072);

    wf_buffer *c = wf__buffer_alloc(128); /* a cache hit still counts as active */
    s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes + 3072 + 128);
    CHECK_EQ_SIZE(s.peak_bytes, base.active_bytes + 3072 + 128);
    CHECK_EQ_SIZE(s.cached_bytes, 0);

    wf__buffer_release(b);
    wf__buffer_release(c);
    s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
    CHECK_EQ_SIZE(s.cached_bytes, 3072 + 128);
    CHECK_EQ_SIZE(s.peak_bytes, base.active_bytes + 3072 + 128);
    wf_reset_peak_memory();
    CHECK_EQ_SIZE(stats_now().peak_bytes, base.active_bytes);

    CHECK_STATUS(wf_memory_stats_get(NULL), WF_ERR_NULL_ARGUMENT);
    finish();
}

static void test_limit(void)
{
    wf_memory_stats base = start_clean();
    size_t limit = base.active_bytes + 1 * MIB;
    CHECK_OK(wf_set_memory_limit(limit));
    CHECK_EQ_SIZE(stats_now().limit_bytes, limit);

    /* Over the limit: NULL, WF_ERR_OUT_OF_MEMORY and a message naming it. */
    wf_clear_error();
    CHECK(wf__buffer_alloc(2 * MIB) == NULL);
    CHECK_STATUS(wf_last_error(), WF_ERR_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(wf_last_error_message(), "limit");
    CHECK_STR_CONTAINS(wf_last_error_message(), "requested 2097152 bytes");
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes);

    /* Fill the cache, then ask for more than fits beside it: the cache is
     * dropped first and the allocation succeeds. */
    wf_buffer *a = wf__buffer_alloc(512 * KIB);
    CHECK_NOT_NULL(a);
    wf__buffer_release(a);
    CHECK_EQ_SIZE(stats_now().cached_bytes, 512 * KIB);
    wf_clear_error();
    wf_buffer *b = wf__buffer_alloc(768 * KIB);
    CHECK_NOT_NULL(b);
    CHECK_STATUS(wf_last_error(), WF_OK);
    wf_memory_stats s = stats_now();
    CHECK_EQ_SIZE(s.cached_bytes, 0);
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes + 768 * KIB);
    CHECK(s.active_bytes + s.cached_bytes <= limit);

    /* Nothing left to drop: a second one fails and changes nothing. */
    wf_clear_error();
    CHECK(wf__buffer_alloc(768 * KIB) == NULL);
    CHECK_STATUS(wf_last_error(), WF_ERR_OUT_OF_MEMORY);
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes + 768 * KIB);
    wf__buffer_release(b);
    s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
    CHECK(s.active_bytes + s.cached_bytes <= limit);

    /* Raising the limit makes it work again. */
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    wf_buffer *c = wf__buffer_alloc(2 * MIB);
    CHECK_NOT_NULL(c);
    wf__buffer_release(c);

    /* Lowering the limit trims the cache at once. */
    CHECK(stats_now().cached_bytes >= 2 * MIB);
    CHECK_OK(wf_set_memory_limit(base.active_bytes + 64 * KIB));
    s = stats_now();
    CHECK(s.active_bytes + s.cached_bytes <= base.active_bytes + 64 * KIB);

    /* Limit 0: every non-empty allocation fails. */
    CHECK_OK(wf_set_memory_limit(0));
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    wf_clear_error();
    CHECK(wf__buffer_alloc(1) == NULL);
    CHECK_STATUS(wf_last_error(), WF_ERR_OUT_OF_MEMORY);
    finish();
}

static void test_limit_with_live_buffers(void)
{
    wf_memory_stats base = start_clean();
    wf_buffer *live = wf__buffer_alloc(256 * KIB);
    CHECK_NOT_NULL(live);
    /* Limit below what is live: new allocations fail, live ones are untouched,
     * and the buffer released later is freed rather than cached. */
    CHECK_OK(wf_set_memory_limit(base.active_bytes + 128 * KIB));
    wf_clear_error();
    CHECK(wf__buffer_alloc(64) == NULL);
    CHECK_STATUS(wf_last_error(), WF_ERR_OUT_OF_MEMORY);
    if (live)
        memset(live->data, 7, live->bytes);
    wf__buffer_release(live);
    wf_memory_stats s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
    CHECK_EQ_SIZE(s.cached_bytes, 0);
    finish();
}

static void test_cache_cap_evicts_oldest(void)
{
    wf_memory_stats base = start_clean();
    /* Limit base + 4 MiB: the cache holds at most half of it, 2 MiB. */
    CHECK_OK(wf_set_memory_limit(base.active_bytes + 4 * MIB));
    wf_buffer *b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = wf__buffer_alloc(MIB);
        CHECK_NOT_NULL(b[i]);
        if (b[i])
            CHECK_EQ_SIZE(b[i]->capacity, MIB);
    }
    if (!b[0] || !b[1] || !b[2]) {
        finish();
        return;
    }
    void *d1 = b[1]->data, *d2 = b[2]->data;
    for (int i = 0; i < 3; i++)
        wf__buffer_release(b[i]);
    /* The oldest (b[0]) was evicted; b[2] then b[1] come back, LIFO. */
    CHECK(stats_now().cached_bytes <= 2 * MIB);
    CHECK_EQ_SIZE(stats_now().cached_bytes, 2 * MIB);
    wf_buffer *x = wf__buffer_alloc(MIB), *y = wf__buffer_alloc(MIB);
    CHECK(x && x->data == d2);
    CHECK(y && y->data == d1);
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    wf__buffer_release(x);
    wf__buffer_release(y);
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes);
    finish();
}

/* wf_set_cache_limit: a cap below the default one, the previous cap
 * returned, trimming at once, 0 keeping nothing, and SIZE_MAX giving the
 * default back. */
static void test_cache_limit(void)
{
    wf_memory_stats base = start_clean();
    const size_t default_cap = (size_t)1 << 30; /* unlimited memory: 1 GiB */
    CHECK_EQ_SIZE(stats_now().cache_limit_bytes, default_cap);
    CHECK_EQ_SIZE(wf_set_cache_limit(3 * MIB), default_cap);
    CHECK_EQ_SIZE(stats_now().cache_limit_bytes, 3 * MIB);
    wf_buffer *b[4];
    for (int i = 0; i < 4; i++)
        b[i] = wf__buffer_alloc(MIB);
    for (int i = 0; i < 4; i++)
        wf__buffer_release(b[i]);
    CHECK_EQ_SIZE(stats_now().cached_bytes, 3 * MIB); /* the oldest was freed */
    CHECK_EQ_SIZE(wf_set_cache_limit(MIB), 3 * MIB);  /* trims at once */
    CHECK_EQ_SIZE(stats_now().cached_bytes, MIB);
    CHECK_EQ_SIZE(wf_set_cache_limit(0), MIB);
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    wf__buffer_release(wf__buffer_alloc(100)); /* kept nowhere */
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    /* The memory limit's own cap still applies below a larger request. */
    CHECK_EQ_SIZE(wf_set_cache_limit(SIZE_MAX), 0);
    CHECK_OK(wf_set_memory_limit(base.active_bytes + 4 * MIB));
    CHECK_EQ_SIZE(stats_now().cache_limit_bytes, (base.active_bytes + 4 * MIB) / 2);
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    CHECK_EQ_SIZE(stats_now().cache_limit_bytes, default_cap);
    CHECK_EQ_SIZE(stats_now().active_bytes, base.active_bytes);
    finish();
}

static void test_clear_cache(void)
{
    wf_memory_stats base = start_clean();
    wf_buffer *b[6];
    size_t sizes[6] = {10, 300, 5000, 70000, 1500000, 5 * MIB};
    for (int i = 0; i < 6; i++)
        b[i] = wf__buffer_alloc(sizes[i]);
    for (int i = 0; i < 6; i++)
        wf__buffer_release(b[i]);
    wf_memory_stats s = stats_now();
    CHECK(s.cached_bytes > 5 * MIB);
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
    wf_clear_cache();
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    wf_clear_cache(); /* twice is fine */
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    /* Still usable afterwards. */
    wf_buffer *c = wf__buffer_alloc(5000);
    CHECK_NOT_NULL(c);
    wf__buffer_release(c);
    finish();
}

static void check_fails_cleanly(size_t n)
{
    wf_memory_stats before = stats_now();
    wf_clear_error();
    CHECK(wf__buffer_alloc(n) == NULL);
    wf_status st = wf_last_error();
    CHECK(st == WF_ERR_OUT_OF_MEMORY || st == WF_ERR_OVERFLOW);
    CHECK(wf_last_error_message()[0] != '\0');
    wf_memory_stats after = stats_now();
    CHECK_EQ_SIZE(after.active_bytes, before.active_bytes);
    CHECK_EQ_SIZE(after.peak_bytes, before.peak_bytes);
}

static void test_huge_request(void)
{
    start_clean();
    check_fails_cleanly(SIZE_MAX / 2);
    CHECK_STATUS(wf_last_error(), WF_ERR_OUT_OF_MEMORY);
    check_fails_cleanly(SIZE_MAX);
    check_fails_cleanly(SIZE_MAX - 63);
    check_fails_cleanly(SIZE_MAX / 4 + 1);
    /* Within the size arithmetic but beyond any address space: the system
     * refuses and the reservation is undone. */
    check_fails_cleanly((size_t)1 << (sizeof(size_t) * 8 - 3));
    /* Also under a limit. */
    CHECK_OK(wf_set_memory_limit(MIB));
    check_fails_cleanly(SIZE_MAX / 2);
    check_fails_cleanly(SIZE_MAX);
    finish();
}

/* ------------------------------------------------------------ concurrency */

enum { THREADS = 8, ITERATIONS = 4000, SLOTS = 16 };

/* Worker threads count problems here; the main thread checks them (the
 * harness counters are not meant to be bumped from several threads). */
static _Atomic size_t over_limit_seen;
static _Atomic size_t unexpected_failures;
static _Atomic size_t limit_failures;
static size_t concurrent_limit = SIZE_MAX;

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *churn(void *arg)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    wf_buffer *held[SLOTS] = {0};
    for (int i = 0; i < ITERATIONS; i++) {
        uint64_t r = next_random(&rng);
        unsigned slot = (unsigned)(r % SLOTS);
        /* Mostly small sizes, some medium, a few large (mmap). */
        size_t n;
        switch ((r >> 8) % 16) {
        case 0: n = 0; break;
        case 1: n = 2 * MIB + (size_t)((r >> 16) % (3 * MIB)); break;
        case 2: case 3: n = (size_t)((r >> 16) % (256 * KIB)) + 1; break;
        default: n = (size_t)((r >> 16) % 4096) + 1; break;
        }
        wf__buffer_release(held[slot]);
        held[slot] = wf__buffer_alloc(n);
        if (held[slot]) {
            unsigned char *p = held[slot]->data;
            if (n) {
                p[0] = (unsigned char)i;
                p[n - 1] = (unsigned char)i;
            }
            /* Share a reference for a moment, as views do. */
            wf__buffer_release(wf__buffer_retain(held[slot]));
        } else if (concurrent_limit == SIZE_MAX || wf_last_error() != WF_ERR_OUT_OF_MEMORY) {
            atomic_fetch_add(&unexpected_failures, 1);
        } else {
            atomic_fetch_add(&limit_failures, 1);
        }
        if (i % 64 == 0) {
            wf_memory_stats s = wf_memory_stats_default();
            wf_memory_stats_get(&s);
            if (s.active_bytes + s.cached_bytes > s.limit_bytes)
                atomic_fetch_add(&over_limit_seen, 1);
            if (i % 1024 == 0)
                wf_clear_cache();
        }
    }
    for (int k = 0; k < SLOTS; k++)
        wf__buffer_release(held[k]);
    return NULL;
}

static void run_churn(void)
{
    pthread_t t[THREADS];
    atomic_store(&unexpected_failures, 0);
    atomic_store(&over_limit_seen, 0);
    atomic_store(&limit_failures, 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK_EQ_INT(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_SIZE(atomic_load(&unexpected_failures), 0);
    CHECK_EQ_SIZE(atomic_load(&over_limit_seen), 0);
}

static void test_concurrent(void)
{
    wf_memory_stats base = start_clean();
    concurrent_limit = SIZE_MAX;
    run_churn();
    wf_memory_stats s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
    CHECK(s.peak_bytes > base.active_bytes);
    CHECK(s.cached_bytes <= ((size_t)1 << 30));
    wf_clear_cache();
    CHECK_EQ_SIZE(stats_now().cached_bytes, 0);
    finish();
}

static void test_concurrent_under_limit(void)
{
    wf_memory_stats base = start_clean();
    /* Tight enough that some allocations fail. */
    concurrent_limit = base.active_bytes + 24 * MIB;
    CHECK_OK(wf_set_memory_limit(concurrent_limit));
    run_churn();
    CHECK(atomic_load(&limit_failures) > 0); /* the limit was really hit */
    wf_memory_stats s = stats_now();
    CHECK_EQ_SIZE(s.active_bytes, base.active_bytes);
    CHECK(s.active_bytes + s.cached_bytes <= concurrent_limit);
    concurrent_limit = SIZE_MAX;
    finish();
}

int main(void)
{
    RUN_TEST(test_reuse);
    RUN_TEST(test_size_classes);
    RUN_TEST(test_alignment);
    RUN_TEST(test_zero_bytes);
    RUN_TEST(test_stats);
    RUN_TEST(test_limit);
    RUN_TEST(test_limit_with_live_buffers);
    RUN_TEST(test_cache_cap_evicts_oldest);
    RUN_TEST(test_cache_limit);
    RUN_TEST(test_clear_cache);
    RUN_TEST(test_huge_request);
    RUN_TEST(test_concurrent);
    RUN_TEST(test_concurrent_under_limit);
    return TEST_SUMMARY();
}
