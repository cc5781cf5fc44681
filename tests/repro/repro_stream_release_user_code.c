/*
 * repro_stream_release_user_code: the last reference to a stream is dropped
 * by a thread that holds a lock of the user's, while the stream's worker runs
 * a deleter that takes that lock (a binding's interpreter lock is this case:
 * a Python array's release drops a private stream whose worker runs a Python
 * destructor). Joining the worker there would wait for the deleter, which
 * waits for the releasing thread: the release must not wait for user code.
 * Each round has a deadline; exit 0 pass, 1 hung or wrong, 2 the worker was
 * not inside the deleter when the stream was released.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repro_common.h"
#include "weft.h"

enum { ROUNDS = 20, ROUND_SECONDS = 10, DELETER_WAIT_MS = 5000 };

struct round_state {
    pthread_mutex_t user_lock; /* error-checking: a deleter run by its holder is seen */
    atomic_int deleter_started, deleter_calls, deleter_on_holder;
    atomic_int reached, wrong;
    float data[8];
};

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void locking_deleter(void *data, void *ctx)
{
    (void)data;
    struct round_state *r = ctx;
    atomic_store(&r->deleter_started, 1);
    if (pthread_mutex_lock(&r->user_lock) != 0) { /* EDEADLK: run by the lock's holder */
        atomic_store(&r->deleter_on_holder, 1);
        atomic_fetch_add(&r->deleter_calls, 1);
        return;
    }
    pthread_mutex_unlock(&r->user_lock);
    atomic_fetch_add(&r->deleter_calls, 1); /* last touch: the round frees `r` after it */
}

static bool wait_for(atomic_int *flag, int ms)
{
    for (int waited = 0; !atomic_load(flag) && waited < ms; waited++)
        sleep_ms(1);
    return atomic_load(flag) != 0;
}

/* One round: result = x + 1 on a new stream, x external with the locking
 * deleter; evaluated asynchronously while this thread holds the lock. */
static void *one_round(void *arg)
{
    struct round_state *r = arg;
    wf_stream *s = wf_stream_new();
    if (!s || wf_stream_push(s) != WF_OK) {
        atomic_store(&r->wrong, 1);
        return NULL;
    }
    int64_t n = 8;
    wf_array *x = wf_array_from_external(r->data, &n, 1, WF_DTYPE_F32, NULL, locking_deleter, r);
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *y = wf_add(x, one);
    wf_release(x);
    wf_release(one);
    wf_stream_pop();
    pthread_mutex_lock(&r->user_lock);
    if (!y || wf_async_eval(&y, 1) != WF_OK) {
        atomic_store(&r->wrong, 1);
    } else if (wait_for(&r->deleter_started, DELETER_WAIT_MS)) {
        sleep_ms(1); /* let the deleter block on the lock */
        atomic_store(&r->reached, atomic_load(&r->deleter_calls) == 0);
    }
    wf_release(y);        /* y's node held the stream */
    wf_stream_release(s); /* the last reference: must not wait for the deleter */
    pthread_mutex_unlock(&r->user_lock);
    if (!wait_for(&r->deleter_calls, DELETER_WAIT_MS) || atomic_load(&r->deleter_on_holder))
        atomic_store(&r->wrong, 1);
    return NULL;
}

int main(void)
{
    wf_stream_release(wf_default_stream()); /* starts the runtime: counted from here on */
    size_t streams_before = wf_stream_count();
    int reached = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct round_state *r = calloc(1, sizeof *r);
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
        pthread_mutex_init(&r->user_lock, &attr);
        pthread_mutexattr_destroy(&attr);
        if (!repro_run_with_deadline(one_round, r, ROUND_SECONDS)) {
            printf("round %d: hung: releasing the stream waited for its worker's deleter\n",
                   round);
            fflush(stdout);
            _exit(REPRO_FAIL);
        }
        if (atomic_load(&r->wrong)) {
            printf("round %d: wrong: deleter calls %d, run by the lock holder %d\n", round,
                   atomic_load(&r->deleter_calls), atomic_load(&r->deleter_on_holder));
            return REPRO_FAIL;
        }
        reached += atomic_load(&r->reached);
        pthread_mutex_destroy(&r->user_lock);
        free(r);
    }
    if (wf_stream_count() != streams_before) {
        printf("streams left behind: %zu before, %zu after\n", streams_before, wf_stream_count());
        return REPRO_FAIL;
    }
    printf("%d of %d rounds released the stream while its worker was in the deleter\n", reached,
           ROUNDS);
    return reached > 0 ? REPRO_PASS : REPRO_NOT_REACHED;
}
