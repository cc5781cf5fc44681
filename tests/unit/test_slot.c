/*
 * Atomic slots (wf_slot): load/store/exchange/take/compare-exchange, bad
 * handles and values, scopes, and 16 threads hammering one slot with
 * counters that prove every loaded array is whole and was stored, every
 * array leaves the slot at most once, and nothing leaks.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/array.h"
#include "core/slot.h"
#include "harness.h"
#include "settle.h"

static wf_array *scalar(double v) { return wf_scalar(v, WF_DTYPE_I64); }

static double value_of(wf_array *a)
{
    double v = -1;
    if (wf_array_item(a, &v) != WF_OK)
        return -1;
    return v;
}

static void test_basic_operations(void)
{
    int64_t live = live_arrays();
    int64_t slots = wf__slots_live();
    wf_array *a = scalar(1), *b = scalar(2), *c = scalar(3);

    wf_slot *s = wf_slot_new(NULL);
    if (!CHECK_NOT_NULL(s))
        return;
    CHECK_EQ_INT(wf__slots_live(), slots + 1);
    wf_clear_error();
    CHECK(wf_slot_load(s) == NULL); /* empty ... */
    CHECK_EQ_INT(wf_last_error(), WF_OK); /* ... is not an error */

    CHECK_OK(wf_slot_store(s, a));
    wf_array *got = wf_slot_load(s);
    CHECK(got == a); /* the same array, a new reference */
    wf_release(got);

    wf_array *old = wf_slot_exchange(s, b);
    CHECK(old == a);
    wf_release(old);
    old = wf_slot_take(s);
    CHECK(old == b);
    wf_release(old);
    wf_clear_error();
    CHECK(wf_slot_take(s) == NULL);
    CHECK(wf_slot_exchange(s, a) == NULL); /* was empty */
    CHECK_EQ_INT(wf_last_error(), WF_OK);

    bool swapped = true;
    CHECK_OK(wf_slot_compare_exchange(s, b, c, &swapped)); /* holds a, not b */
    CHECK(!swapped);
    got = wf_slot_load(s);
    CHECK(got == a);
    wf_release(got);
    CHECK_OK(wf_slot_compare_exchange(s, a, c, &swapped));
    CHECK(swapped);
    CHECK_OK(wf_slot_compare_exchange(s, NULL, b, &swapped)); /* not empty */
    CHECK(!swapped);
    wf_release(wf_slot_take(s));
    CHECK_OK(wf_slot_compare_exchange(s, NULL, b, &swapped)); /* empty */
    CHECK(swapped);

    /* The slot holds its own reference: the caller's may go. */
    wf_release(a);
    wf_release(b);
    wf_release(c);
    got = wf_slot_load(s);
    CHECK_NEAR(value_of(got), 2.0, 0);
    wf_release(got);
    wf_slot_release(s);
    CHECK_EQ_INT(wf__slots_live(), slots);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_initial_value_and_refcount(void)
{
    int64_t live = live_arrays();
    wf_array *a = scalar(7);
    wf_slot *s = wf_slot_new(a);
    wf_release(a);
    CHECK(wf_slot_retain(s) == s);
    CHECK(wf_slot_retain(s) == s);
    wf_slot_release(s);
    wf_slot_release(s);
    wf_array *got = wf_slot_load(s); /* one reference left */
    CHECK_NEAR(value_of(got), 7.0, 0);
    wf_release(got);
    wf_slot_release(s); /* the last: drops the value */
    CHECK_EQ_INT(live_arrays(), live);
    CHECK(wf_slot_retain(NULL) == NULL);
    wf_slot_release(NULL);
}

static void test_use_after_release_is_misuse(void)
{
    wf_array *a = scalar(1);
    wf_slot *s = wf_slot_new(a);
    wf_slot_release(s);

    CHECK_NULL_WITH(wf_slot_load(s), WF_ERR_MISUSE);
    wf_slot_load(s);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_slot_load: the slot was already released");
    CHECK_STATUS(wf_slot_store(s, a), WF_ERR_MISUSE);
    CHECK_NULL_WITH(wf_slot_exchange(s, a), WF_ERR_MISUSE);
    CHECK_NULL_WITH(wf_slot_take(s), WF_ERR_MISUSE);
    bool swapped = true;
    CHECK_STATUS(wf_slot_compare_exchange(s, NULL, a, &swapped), WF_ERR_MISUSE);
    CHECK(!swapped);
    CHECK_NULL_WITH(wf_slot_retain(s), WF_ERR_MISUSE);
    wf_clear_error();
    wf_slot_release(s); /* a second release is caught, not counted */
    CHECK_EQ_INT(wf_last_error(), WF_ERR_MISUSE);
    wf_release(a);
}

static void test_bad_arguments(void)
{
    int64_t live = live_arrays();
    wf_array *a = scalar(1);
    wf_slot *s = wf_slot_new(a);

    CHECK_NULL_WITH(wf_slot_load(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_slot_store(NULL, a), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_slot_store(s, NULL), WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    CHECK_NULL_WITH(wf_slot_exchange(s, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_slot_take(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_slot_compare_exchange(s, a, a, NULL), WF_ERR_NULL_ARGUMENT);
    bool swapped = true;
    CHECK_STATUS(wf_slot_compare_exchange(s, a, NULL, &swapped), WF_ERR_NULL_ARGUMENT);
    CHECK(!swapped);

    /* A failed op's NULL never empties the slot, and its error is kept. */
    wf_array *z2 = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_F32);
    wf_array *z3 = wf_zeros((int64_t[]){3}, 1, WF_DTYPE_F32);
    wf_array *bad = wf_add(z2, z3);
    CHECK(bad == NULL);
    wf_release(z2);
    wf_release(z3);
    CHECK_STATUS(wf_slot_store(s, bad), WF_ERR_SHAPE);
    wf_clear_error();
    wf_array *got = wf_slot_load(s);
    CHECK(got == a);
    wf_release(got);

    /* Released arrays are refused. */
    wf_array *gone = scalar(5);
    wf_release(gone);
    CHECK_STATUS(wf_slot_store(s, gone), WF_ERR_MISUSE);
    CHECK_NULL_WITH(wf_slot_exchange(s, gone), WF_ERR_MISUSE);
    CHECK_STATUS(wf_slot_compare_exchange(s, gone, a, &swapped), WF_ERR_MISUSE);
    CHECK_STATUS(wf_slot_compare_exchange(s, a, gone, &swapped), WF_ERR_MISUSE);
    CHECK_NULL_WITH(wf_slot_new(gone), WF_ERR_MISUSE);
    got = wf_slot_load(s);
    CHECK(got == a); /* unchanged by all of the above */
    wf_release(got);

    wf_slot_release(s);
    wf_release(a);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_loads_belong_to_scopes(void)
{
    int64_t live = live_arrays();
    wf_array *a = scalar(4);
    wf_slot *s = wf_slot_new(a);
    wf_release(a);
    CHECK_OK(wf_scope_begin());
    for (int i = 0; i < 10; i++)
        CHECK_NOT_NULL(wf_slot_load(s));
    CHECK_NOT_NULL(wf_slot_exchange(s, scalar(5))); /* the old value: the scope's */
    CHECK_OK(wf_scope_end());
    wf_array *got = wf_slot_load(s);
    CHECK_NEAR(value_of(got), 5.0, 0);
    wf_release(got);
    wf_slot_release(s);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_lazy_value(void)
{
    /* A slot may hold an unevaluated array; a reader evaluates it. */
    wf_array *x = wf_arange(0, 4, 1, WF_DTYPE_F32);
    wf_array *y = wf_sum(wf_multiply(x, x), NULL, 0, false);
    wf_slot *s = wf_slot_new(y);
    wf_release(x);
    wf_release(y);
    wf_array *got = wf_slot_load(s);
    double v = 0;
    CHECK_OK(wf_array_item(got, &v));
    CHECK_NEAR(v, 14.0, 0);
    wf_release(got);
    wf_slot_release(s);
}

/* ------------------------------------------------------------ 16 threads */

enum { THREADS = 16, ELEMS = 16, WRITES = 1000, MIXED_OPS = 600, CAS_INCREMENTS = 60 };

/* An array tagged with `id`: element i is id * 64 + i. */
static wf_array *tagged(int64_t id)
{
    int64_t v[ELEMS];
    for (int i = 0; i < ELEMS; i++)
        v[i] = id * 64 + i;
    return wf_array_from_data(v, (int64_t[]){ELEMS}, 1, WF_DTYPE_I64);
}

/* The id of a tagged array, or -1 if it is not whole. */
static int64_t tag_of(wf_array *a)
{
    const int64_t *v = NULL;
    if (wf_array_size(a) != ELEMS || wf_array_data(a, (const void **)&v) != WF_OK)
        return -1;
    int64_t id = v[0] / 64;
    for (int i = 0; i < ELEMS; i++)
        if (v[i] != id * 64 + i)
            return -1;
    return id;
}

struct hammer {
    wf_slot *slot;
    pthread_barrier_t start;
    atomic_bool writer_done;
    atomic_int_fast64_t next_id;  /* ids handed to new arrays */
    atomic_int_fast64_t loads, bad_loads, empty_loads, out_of_order, changes_seen;
    atomic_int_fast64_t exchanges, cas_tries, cas_wins;
    atomic_uchar *taken_out; /* per id: left the slot through exchange/take */
    atomic_int_fast64_t taken_twice;
};

static void count_load(struct hammer *h, wf_array *a, int64_t *last_seen)
{
    atomic_fetch_add(&h->loads, 1);
    if (!a) {
        atomic_fetch_add(&h->empty_loads, 1);
        return;
    }
    int64_t id = tag_of(a);
    if (id < 0 || id >= atomic_load(&h->next_id))
        atomic_fetch_add(&h->bad_loads, 1);
    if (last_seen) {
        if (id < *last_seen)
            atomic_fetch_add(&h->out_of_order, 1);
        if (id != *last_seen)
            atomic_fetch_add(&h->changes_seen, 1);
        *last_seen = id;
    }
    wf_release(a);
}

/* Phase 1: one writer stores ids 1..WRITES in order; readers must see whole
 * arrays with ids that never go back. */
static void *phase1_thread(void *arg)
{
    struct hammer *h = ((void **)arg)[0];
    int index = (int)(intptr_t)((void **)arg)[1];
    pthread_barrier_wait(&h->start);
    if (index == 0) {
        for (int i = 1; i <= WRITES; i++) {
            wf_array *a = tagged(atomic_fetch_add(&h->next_id, 1));
            int_fast64_t loads_before = atomic_load(&h->loads);
            if (wf_slot_store(h->slot, a) != WF_OK)
                atomic_fetch_add(&h->bad_loads, 1);
            wf_release(a); /* the slot's reference is the only one */
            /* Pace the writer so that readers run between stores even on
             * few cores (bounded: never a hang). */
            for (int spins = 0; spins < 1000 && atomic_load(&h->loads) == loads_before; spins++)
                sched_yield();
        }
        atomic_store(&h->writer_done, true);
        return NULL;
    }
    int64_t last = 0;
    for (int n = 1; !atomic_load(&h->writer_done); n++) {
        count_load(h, wf_slot_load(h->slot), &last);
        if (n % 32 == 0) /* 15 readers on few cores must leave the writer some time */
            sched_yield();
    }
    return NULL;
}

static void note_taken_out(struct hammer *h, wf_array *old)
{
    if (!old) {
        atomic_fetch_add(&h->empty_loads, 1);
        return;
    }
    int64_t id = tag_of(old);
    if (id < 0 || id >= atomic_load(&h->next_id))
        atomic_fetch_add(&h->bad_loads, 1);
    else if (atomic_exchange(&h->taken_out[id], 1))
        atomic_fetch_add(&h->taken_twice, 1);
    wf_release(old);
}

/* Phase 2: every thread loads, stores, exchanges and compare-exchanges. */
static void *phase2_thread(void *arg)
{
    struct hammer *h = ((void **)arg)[0];
    unsigned rng = (unsigned)(intptr_t)((void **)arg)[1] * 2654435761u + 1;
    pthread_barrier_wait(&h->start);
    for (int i = 0; i < MIXED_OPS; i++) {
        rng = rng * 1103515245u + 12345u;
        switch ((rng >> 16) % 4) {
        case 0:
            count_load(h, wf_slot_load(h->slot), NULL);
            break;
        case 1: {
            wf_array *a = tagged(atomic_fetch_add(&h->next_id, 1));
            wf_slot_store(h->slot, a);
            wf_release(a);
            break;
        }
        case 2: {
            wf_array *a = tagged(atomic_fetch_add(&h->next_id, 1));
            note_taken_out(h, wf_slot_exchange(h->slot, a));
            atomic_fetch_add(&h->exchanges, 1);
            wf_release(a);
            break;
        }
        default: {
            wf_array *cur = wf_slot_load(h->slot);
            wf_array *a = tagged(atomic_fetch_add(&h->next_id, 1));
            if (i % 2) /* half the time, let others change the slot in between */
                sched_yield();
            bool swapped = false;
            wf_slot_compare_exchange(h->slot, cur, a, &swapped);
            atomic_fetch_add(&h->cas_tries, 1);
            if (swapped)
                atomic_fetch_add(&h->cas_wins, 1);
            count_load(h, cur, NULL);
            wf_release(a);
        }
        }
    }
    return NULL;
}

/* Phase 3: a counter kept in the slot, incremented only by compare-exchange. */
static void *phase3_thread(void *arg)
{
    struct hammer *h = ((void **)arg)[0];
    pthread_barrier_wait(&h->start);
    for (int won = 0; won < CAS_INCREMENTS;) {
        wf_array *cur = wf_slot_load(h->slot);
        double v = value_of(cur);
        wf_array *next = scalar(v + 1);
        sched_yield(); /* let others change the slot in between */
        bool swapped = false;
        if (wf_slot_compare_exchange(h->slot, cur, next, &swapped) != WF_OK) {
            atomic_fetch_add(&h->bad_loads, 1);
            won = CAS_INCREMENTS;
        }
        atomic_fetch_add(&h->cas_tries, 1);
        if (swapped) {
            won++;
            atomic_fetch_add(&h->cas_wins, 1);
        }
        wf_release(cur);
        wf_release(next);
    }
    return NULL;
}

static void run_threads(struct hammer *h, void *(*fn)(void *))
{
    pthread_t threads[THREADS];
    void *args[THREADS][2];
    pthread_barrier_init(&h->start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        args[i][0] = h;
        args[i][1] = (void *)(intptr_t)i;
        pthread_create(&threads[i], NULL, fn, args[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&h->start);
}

static void reset_counters(struct hammer *h)
{
    atomic_store(&h->loads, 0);
    atomic_store(&h->bad_loads, 0);
    atomic_store(&h->empty_loads, 0);
    atomic_store(&h->out_of_order, 0);
    atomic_store(&h->exchanges, 0);
    atomic_store(&h->cas_tries, 0);
    atomic_store(&h->cas_wins, 0);
}

static void test_sixteen_threads(void)
{
    int64_t live = live_arrays();
    int64_t slots = wf__slots_live();
    static struct hammer h; /* zeroed */
    int64_t max_ids = 1 + WRITES + (int64_t)THREADS * MIXED_OPS;
    h.taken_out = calloc((size_t)max_ids, sizeof *h.taken_out);
    if (!CHECK_NOT_NULL(h.taken_out))
        return;
    atomic_store(&h.next_id, 1);
    wf_array *first = tagged(0);
    h.slot = wf_slot_new(first);
    wf_release(first);

    run_threads(&h, phase1_thread);
    printf("    phase 1: %lld loads saw %lld changes while %d stores\n",
           (long long)atomic_load(&h.loads), (long long)atomic_load(&h.changes_seen), WRITES);
    CHECK(atomic_load(&h.changes_seen) > 0); /* readers ran while the writer stored */
    CHECK_EQ_INT(atomic_load(&h.bad_loads), 0);
    CHECK_EQ_INT(atomic_load(&h.empty_loads), 0);
    CHECK_EQ_INT(atomic_load(&h.out_of_order), 0);
    wf_array *last = wf_slot_load(h.slot);
    CHECK_EQ_INT(tag_of(last), WRITES);
    wf_release(last);

    reset_counters(&h);
    run_threads(&h, phase2_thread);
    note_taken_out(&h, wf_slot_take(h.slot)); /* the last value leaves too */
    printf("    phase 2: %lld loads, %lld exchanges, %lld/%lld compare-exchanges won\n",
           (long long)atomic_load(&h.loads), (long long)atomic_load(&h.exchanges),
           (long long)atomic_load(&h.cas_wins), (long long)atomic_load(&h.cas_tries));
    CHECK_EQ_INT(atomic_load(&h.bad_loads), 0);
    CHECK_EQ_INT(atomic_load(&h.empty_loads), 0); /* never empty until the take */
    CHECK_EQ_INT(atomic_load(&h.taken_twice), 0);
    CHECK(atomic_load(&h.exchanges) > 0 && atomic_load(&h.cas_wins) > 0);
    CHECK(atomic_load(&h.next_id) <= max_ids);

    reset_counters(&h);
    wf_array *zero = scalar(0);
    CHECK_OK(wf_slot_store(h.slot, zero));
    wf_release(zero);
    run_threads(&h, phase3_thread);
    wf_array *final = wf_slot_load(h.slot);
    printf("    phase 3: %lld/%lld compare-exchanges won\n", (long long)atomic_load(&h.cas_wins),
           (long long)atomic_load(&h.cas_tries));
    CHECK_EQ_INT(atomic_load(&h.bad_loads), 0);
    CHECK_EQ_INT(atomic_load(&h.cas_wins), THREADS * CAS_INCREMENTS);
    CHECK(atomic_load(&h.cas_tries) > atomic_load(&h.cas_wins)); /* there was contention */
    CHECK_NEAR(value_of(final), THREADS * CAS_INCREMENTS, 0); /* no increment lost */
    wf_release(final);

    wf_slot_release(h.slot);
    free(h.taken_out);
    CHECK_EQ_INT(wf__slots_live(), slots);
    CHECK_EQ_INT(live_arrays(), live);
}

/* Slots come and go on many threads: the pool's counts return to baseline. */
static void *slot_churn(void *arg)
{
    wf_array *a = arg;
    for (int i = 0; i < 300; i++) {
        wf_slot *s = wf_slot_new(i % 2 ? a : NULL);
        wf_slot *t = wf_slot_retain(s);
        wf_slot_store(t, a);
        wf_slot_release(s);
        wf_release(wf_slot_load(t));
        wf_slot_release(t);
    }
    return NULL;
}

static void test_slot_churn(void)
{
    int64_t live = live_arrays();
    int64_t slots = wf__slots_live();
    wf_array *a = scalar(9);
    pthread_t threads[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&threads[i], NULL, slot_churn, a);
    for (int i = 0; i < 8; i++)
        pthread_join(threads[i], NULL);
    wf_release(a);
    CHECK_EQ_INT(wf__slots_live(), slots);
    CHECK_EQ_INT(live_arrays(), live);
}

int main(void)
{
    RUN_TEST(test_basic_operations);
    RUN_TEST(test_initial_value_and_refcount);
    RUN_TEST(test_use_after_release_is_misuse);
    RUN_TEST(test_bad_arguments);
    RUN_TEST(test_loads_belong_to_scopes);
    RUN_TEST(test_lazy_value);
    RUN_TEST(test_sixteen_threads);
    RUN_TEST(test_slot_churn);
    return TEST_SUMMARY();
}
