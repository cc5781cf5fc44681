/*
 * wf_compile (DESIGN section 5): a compiled function is a wf_fn whose body
 * looks its call up in the shared cache, traces on a miss (with no lock
 * held), and replays the cached tape on the caller's current stream.
 *
 * A call on a thread that is tracing a compiled function runs the function
 * inline (it becomes part of the outer trace and never waits on the cache).
 * A call under a transform (grad, vmap, ...) replays the simplified but
 * unfused tape, so the transform sees ordinary primitives; every other call
 * replays the fused tape. What a trace records depends on whether its
 * thread is inside a transform (and a gradient one), so that context is
 * part of the key: a trace made inside one thread's grad never serves
 * another thread's plain call, nor the reverse (see thread_context).
 *
 * Random draws from the thread's default key are implicit state of a call:
 * the trace records them as extra tape inputs (ops/random.c), and every call
 * feeds them keys drawn from the calling thread's default key in the order
 * the function drew them (redoing its wf_random_seed calls in between), so
 * it gets the numbers an uncompiled call would and leaves the key where an
 * uncompiled call leaves it. The tracing call is a call too: it replays
 * with the keys its trace drew.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/cache.h"
#include "compile/tape.h"
#include "core/error.h"
#include "core/graph_mode.h"
#include "ops/ops.h"
#include "prim/fused.h"
#include "runtime/eval.h"
#include "transforms/transforms.h"
#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

/* ------------------------------------------------------------ process-wide settings */

static atomic_int compile_mode = -1; /* -1: not read from the environment yet */
static atomic_uint_fast64_t next_function_id = 1;


wf_compile_mode wf_get_compile_mode(void)
{
    int mode = atomic_load(&compile_mode);
    if (mode >= 0)
        return (wf_compile_mode)mode;
    const char *env = getenv("WEFT_DISABLE_COMPILE");
    int initial = env && env[0] && strcmp(env, "0") != 0 ? WF_COMPILE_DISABLED : WF_COMPILE_ENABLED;
    int expected = -1;
    atomic_compare_exchange_strong(&compile_mode, &expected, initial);
    return (wf_compile_mode)atomic_load(&compile_mode);
}

wf_status wf_set_compile_mode(wf_compile_mode mode)
{
    if (mode < WF_COMPILE_DISABLED || mode > WF_COMPILE_ENABLED)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_set_compile_mode: invalid mode %d",
                         (int)mode);
    atomic_store(&compile_mode, (int)mode);
    return WF_OK;
}

/* The log callback: pointer and context published together under a leaf
 * lock, read under it, called with no lock held. */
static struct {
    wf_mutex lock;
    wf_compile_log_fn fn;
    void *ctx;
} log_sink = {.lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_LEAF}};

void wf_compile_set_log(wf_compile_log_fn fn, void *ctx)
{
    wf__mutex_lock(&log_sink.lock);
    log_sink.fn = fn;
    log_sink.ctx = ctx;
    wf__mutex_unlock(&log_sink.lock);
}

/* fork(): the sink is held across it so the child never sees a pointer
 * without its context (util/fork.h). */
static void log_sink_fork_prepare(void) { wf__mutex_lock_for_fork(&log_sink.lock); }
static void log_sink_fork_release(void) { wf__mutex_unlock_for_fork(&log_sink.lock); }

static const wf_fork_hooks log_sink_fork_hooks = {.level = WF_LOCK_LEAF,
                                                  .prepare = log_sink_fork_prepare,
                                                  .parent = log_sink_fork_release,
                                                  .child = log_sink_fork_release};

static void register_log_sink_fork_hooks(void) __attribute__((constructor));
static void register_log_sink_fork_hooks(void) { wf__fork_hooks_register(&log_sink_fork_hooks); }

static void compile_log(wf_compile_log_level level, const char *message)
{
    wf__mutex_lock(&log_sink.lock);
    wf_compile_log_fn fn = log_sink.fn;
    void *ctx = log_sink.ctx;
    wf__mutex_unlock(&log_sink.lock);
    if (fn)
        fn(ctx, level, message);
    else if (level == WF_COMPILE_LOG_WARNING)
        fprintf(stderr, "weft: %s\n", message);
}

/* ------------------------------------------------------------ compiled functions */

typedef struct wf_compiled {
    uint64_t id;
    wf_fn *fn; /* the traced function (owned reference) */
    bool shapeless;
    int retrace_warning;
    wf_slot **state; /* declared state (owned references), nstate of them */
    size_t nstate;
    atomic_uint_fast64_t calls, hits, misses, traces, waits, inline_calls, timeout_traces, warned;
} wf_compiled;

/* The cached value: a tape simplified (replayed under transforms) and the
 * same tape fused (replayed otherwise). */
typedef struct wf_trace {
    wf_tape plain;
    wf_tape fused;
    int fused_nodes;
    /* What the function did with the thread's default key, in order (draws
     * and reseeds); the tapes' last ndraws inputs are the draws' keys. */
    wf_random_event *events;
    int nevents, ndraws;
} wf_trace;

static void trace_free(void *p)
{
    wf_trace *trace = p;
    wf__tape_clear(&trace->plain);
    wf__tape_clear(&trace->fused);
    free(trace->events);
    free(trace);
}

static void compiled_free(void *p)
{
    wf_compiled *c = p;
    wf__cache_erase_function(c->id);
    wf_fn_release(c->fn);
    for (size_t i = 0; i < c->nstate; i++)
        wf_slot_release(c->state[i]);
    free(c->state);
    free(c);
}

/* ------------------------------------------------------------ keys */

/* The words of a key before its per-input part. */
enum key_word { KEY_MODE, KEY_DEVICE, KEY_CONTEXT, KEY_SHAPELESS, KEY_NINPUTS, KEY_HEADER };

/* What of the calling thread's state decides what a trace records (C4: one
 * thread's state never decides another's results). Inside any transform a
 * custom function or checkpoint records its own node instead of running
 * inline (transforms/custom.c); inside a gradient transform attention takes
 * its training path (ops/fast.c). Everything else a trace reads of its
 * thread is neutral or recorded as an input: the default random key
 * (wf_random_draws), scopes (ownership only), the compile depth (never
 * reaches the cache). */
enum { CONTEXT_TRANSFORM = 1, CONTEXT_GRAD = 2 };

static uint64_t thread_context(void)
{
    uint64_t context = 0;
    if (wf__trace_depth() > 0)
        context |= CONTEXT_TRANSFORM;
    if (wf__graph_grad_depth() > 0)
        context |= CONTEXT_GRAD;
    return context;
}

/* The device of this thread's current stream: nodes a trace builds (its
 * constants among them) are placed on it. */
static wf_status current_device_id(uint64_t *out)
{
    wf_stream *s = wf_current_stream();
    if (!s)
        return wf_last_error();
    *out = wf_device_id(wf_stream_device(s));
    wf_stream_release(s);
    return WF_OK;
}

/* The key of a call: the mode (so switching never replays a trace made under
 * another), the device, the calling thread's context, and per input dtype,
 * rank and (unless shapeless) shape. 64-bit words; the function id seeds the
 * hash separately. */
static uint64_t *make_key(const wf_compiled *c, wf_compile_mode mode, wf_array *const *inputs,
                          size_t ninputs, size_t *words)
{
    uint64_t device = 0;
    if (current_device_id(&device) != WF_OK)
        return NULL;
    size_t n = KEY_HEADER;
    for (size_t i = 0; i < ninputs; i++)
        n += 2 + (c->shapeless ? 0 : (size_t)inputs[i]->ndim);
    uint64_t *key = wf__malloc(n * sizeof *key);
    if (!key) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory building a cache key");
        return NULL;
    }
    key[KEY_MODE] = (uint64_t)mode;
    key[KEY_DEVICE] = device;
    key[KEY_CONTEXT] = thread_context();
    key[KEY_SHAPELESS] = c->shapeless;
    key[KEY_NINPUTS] = ninputs;
    size_t k = KEY_HEADER;
    for (size_t i = 0; i < ninputs; i++) {
        key[k++] = (uint64_t)inputs[i]->dtype;
        key[k++] = (uint64_t)inputs[i]->ndim;
        if (!c->shapeless)
            for (int d = 0; d < inputs[i]->ndim; d++)
                key[k++] = (uint64_t)inputs[i]->shape[d];
    }
    *words = n;
    return key;
}

static const char *context_name(uint64_t context)
{
    if (context & CONTEXT_GRAD)
        return "inside a gradient transform";
    return context & CONTEXT_TRANSFORM ? "inside a transform" : "outside any transform";
}

/* Says which input changed how between the previous key and this one. */
static void describe_retrace(const wf_compiled *c, const uint64_t *old, size_t old_words,
                             const uint64_t *now, size_t now_words, char *out, size_t cap)
{
    if (old_words < KEY_HEADER || old[KEY_MODE] != now[KEY_MODE]) {
        snprintf(out, cap, "the compile mode changed");
        return;
    }
    if (old[KEY_DEVICE] != now[KEY_DEVICE]) {
        snprintf(out, cap, "the current stream's device changed (%llu -> %llu)",
                 (unsigned long long)old[KEY_DEVICE], (unsigned long long)now[KEY_DEVICE]);
        return;
    }
    if (old[KEY_CONTEXT] != now[KEY_CONTEXT]) {
        snprintf(out, cap, "called %s (traced %s)", context_name(now[KEY_CONTEXT]),
                 context_name(old[KEY_CONTEXT]));
        return;
    }
    if (old[KEY_NINPUTS] != now[KEY_NINPUTS]) {
        snprintf(out, cap, "the number of inputs changed (%llu -> %llu)",
                 (unsigned long long)old[KEY_NINPUTS], (unsigned long long)now[KEY_NINPUTS]);
        return;
    }
    const uint64_t ninputs = now[KEY_NINPUTS];
    size_t i = KEY_HEADER, j = KEY_HEADER;
    for (uint64_t input = 0; input < ninputs && i + 1 < old_words && j + 1 < now_words; input++) {
        if (old[i] != now[j]) {
            snprintf(out, cap, "input %llu: dtype %s -> %s", (unsigned long long)input,
                     wf_dtype_name((wf_dtype)old[i]), wf_dtype_name((wf_dtype)now[j]));
            return;
        }
        if (old[i + 1] != now[j + 1]) {
            snprintf(out, cap, "input %llu: rank %llu -> %llu", (unsigned long long)input,
                     (unsigned long long)old[i + 1], (unsigned long long)now[j + 1]);
            return;
        }
        uint64_t ndim = now[j + 1];
        i += 2;
        j += 2;
        if (c->shapeless)
            continue;
        for (uint64_t d = 0; d < ndim; d++) {
            if (old[i + d] != now[j + d]) {
                snprintf(out, cap, "input %llu: dimension %llu changed (%llu -> %llu)",
                         (unsigned long long)input, (unsigned long long)d,
                         (unsigned long long)old[i + d], (unsigned long long)now[j + d]);
                return;
            }
        }
        i += ndim;
        j += ndim;
    }
    snprintf(out, cap, "a new input signature");
}

static void report_retrace(wf_compiled *c, const uint64_t *old, size_t old_bytes,
                           const uint64_t *now, size_t now_words)
{
    char why[256], message[512];
    describe_retrace(c, old, old_bytes / sizeof(uint64_t), now, now_words, why, sizeof why);
    uint64_t traces = atomic_load(&c->traces);
    snprintf(message, sizeof message, "compiled function %llu retraces (trace %llu): %s",
             (unsigned long long)c->id, (unsigned long long)traces, why);
    compile_log(WF_COMPILE_LOG_INFO, message);
    if (c->retrace_warning > 0 && traces > (uint64_t)c->retrace_warning &&
        atomic_exchange(&c->warned, 1) == 0) {
        snprintf(message, sizeof message,
                 "compiled function %llu traced %llu times (more than %d): its inputs keep "
                 "changing shape or dtype; consider shapeless compile (last reason: %s)",
                 (unsigned long long)c->id, (unsigned long long)traces, c->retrace_warning, why);
        compile_log(WF_COMPILE_LOG_WARNING, message);
    }
}

/* ------------------------------------------------------------ tracing */

/* The function's outputs: references handed out as a public call's are. */
static void release_outputs(wf_array **arrays, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wf_release(arrays[i]);
}

/* Records the function's graph from its inputs and its default-key draws
 * (the tape's inputs are the call's, then one key per draw), simplifies and
 * fuses it. */
static wf_status build_tapes(wf_trace *t, wf_compiled *c, wf_compile_mode mode,
                             wf_array *const *placeholders, size_t ninputs,
                             const wf_random_draws *draws, wf_array *const *outputs,
                             size_t noutputs)
{
    size_t total = ninputs + (size_t)draws->ndraws;
    wf_array **all = wf__calloc(total + 1, sizeof *all);
    const int64_t **shapes = wf__calloc(total + 1, sizeof *shapes);
    int *ndims = wf__calloc(total + 1, sizeof *ndims);
    wf_status status = WF_OK;
    if (!all || !shapes || !ndims)
        status = wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory recording a trace");
    for (size_t i = 0; i < total && status == WF_OK; i++) {
        all[i] = i < ninputs ? placeholders[i] : draws->placeholders[i - ninputs];
        shapes[i] = all[i]->shape;
        ndims[i] = all[i]->ndim;
    }
    if (status == WF_OK)
        status = wf__tape_record(&t->plain, all, (int)total, outputs, (int)noutputs,
                                 c->shapeless);
    if (status == WF_OK && mode != WF_COMPILE_NO_SIMPLIFY)
        status = wf__tape_simplify(&t->plain);
    if (status == WF_OK)
        status = wf__tape_copy(&t->fused, &t->plain);
    if (status == WF_OK && mode == WF_COMPILE_ENABLED)
        status = wf__tape_fuse(&t->fused, shapes, ndims, c->shapeless, &t->fused_nodes);
    free(all);
    free(shapes);
    free(ndims);
    return status;
}

/* Runs the function on placeholders, recording what it does with this
 * thread's default key, and builds its tapes. */
static wf_status trace(wf_compiled *c, wf_compile_mode mode, wf_array *const *inputs,
                       size_t ninputs, wf_trace **out)
{
    wf_trace *t = wf__calloc(1, sizeof *t);
    wf_array **placeholders = wf__calloc(ninputs + 1, sizeof *placeholders);
    wf_array *outputs[WF_FN_MAX_OUTPUTS];
    size_t noutputs = WF_FN_MAX_OUTPUTS;
    wf_random_draws draws = {0};
    wf_status status = WF_OK;
    if (!t || !placeholders) {
        status = wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory starting a trace");
        goto done;
    }
    for (size_t i = 0; i < ninputs && status == WF_OK; i++) {
        placeholders[i] = wf__array_new_placeholder(inputs[i]->dtype, inputs[i]->shape,
                                                    inputs[i]->ndim, c->shapeless);
        if (!placeholders[i])
            status = wf_last_error();
    }
    if (status != WF_OK)
        goto done;
    wf_random_draws *previous = wf__random_draws_begin(&draws);
    wf__graph_compile_enter();
    status = wf_fn_call(c->fn, placeholders, ninputs, outputs, &noutputs);
    wf__graph_compile_leave();
    wf__random_draws_end(previous);
    if (status != WF_OK)
        goto done;
    if (draws.out_of_memory)
        status = wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory recording random draws");
    else
        status = build_tapes(t, c, mode, placeholders, ninputs, &draws, outputs, noutputs);
    release_outputs(outputs, noutputs);
    if (status == WF_OK) { /* the trace's now */
        t->events = draws.events;
        t->nevents = draws.nevents;
        t->ndraws = draws.ndraws;
        draws.events = NULL;
    }
done:
    wf__random_draws_free(&draws);
    for (size_t i = 0; placeholders && i < ninputs; i++)
        wf__array_release(placeholders[i]); /* internal references */
    free(placeholders);
    if (status != WF_OK && t) {
        trace_free(t);
        t = NULL;
    }
    *out = t;
    return status;
}

/* ------------------------------------------------------------ calls */

static wf_status check_inputs(wf_array *const *inputs, size_t ninputs)
{
    if (!inputs && ninputs)
        return wf__error(WF_ERR_NULL_ARGUMENT, "compiled call: inputs is NULL");
    for (size_t i = 0; i < ninputs; i++)
        if (!wf__array_check(inputs[i], "compiled call", "an input"))
            return wf_last_error();
    return WF_OK;
}

/* The call's inputs followed by one key per draw of the trace. The call
 * that traced passes `traced`: its trace already did the draws, on this
 * thread, and recorded their keys; any other call redoes the trace's draws
 * and reseeds on this thread's default key now. */
static wf_status gather_inputs(const wf_trace *t, wf_array *const *inputs, size_t ninputs,
                               bool traced, wf_array ***all)
{
    *all = wf__calloc(ninputs + (size_t)t->ndraws + 1, sizeof **all);
    wf_key *keys = wf__malloc(((size_t)t->ndraws + 1) * sizeof *keys);
    if (!*all || !keys) {
        free(*all);
        free(keys);
        *all = NULL;
        return wf__error(WF_ERR_OUT_OF_MEMORY, "compiled call: out of memory");
    }
    if (traced) {
        for (int i = 0, k = 0; i < t->nevents; i++)
            if (!t->events[i].seed)
                keys[k++] = t->events[i].key;
    } else {
        wf__random_replay(t->events, t->nevents, keys);
    }
    memcpy(*all, inputs, ninputs * sizeof **all);
    wf_status status = WF_OK;
    for (int i = 0; i < t->ndraws && status == WF_OK; i++) {
        (*all)[ninputs + (size_t)i] = wf__random_key_array(keys[i]);
        if (!(*all)[ninputs + (size_t)i])
            status = wf_last_error();
    }
    free(keys);
    return status;
}

static void release_keys(wf_array **all, size_t ninputs, int ndraws)
{
    for (int i = 0; all && i < ndraws; i++)
        wf__array_release(all[ninputs + (size_t)i]);
    free(all);
}

static wf_status replay(const wf_trace *t, wf_array *const *inputs, size_t ninputs, bool traced,
                        wf_array **outputs, size_t *noutputs)
{
    const wf_tape *tape = wf__graph_keep_depth() > 0 ? &t->plain : &t->fused;
    if ((size_t)tape->noutputs > *noutputs)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "compiled call: the function returns %d outputs, room for %zu",
                         tape->noutputs, *noutputs);
    if ((size_t)tape->ninputs != ninputs + (size_t)t->ndraws)
        return wf__error(WF_ERR_INTERNAL,
                         "compiled call: trace for %d inputs, called with %zu and %d keys",
                         tape->ninputs, ninputs, t->ndraws);
    wf_array **all = NULL;
    wf_status status = WF_OK;
    if (t->nevents)
        status = gather_inputs(t, inputs, ninputs, traced, &all);
    if (status == WF_OK)
        status = wf__tape_replay(tape, all ? all : inputs, outputs);
    release_keys(all, ninputs, t->ndraws);
    if (status != WF_OK)
        return status;
    /* Handed out like an op's results: into the caller's scope if one is open. */
    for (int i = 0; i < tape->noutputs; i++) {
        if (!wf__array_publish(outputs[i])) {
            status = wf_last_error();
            for (int j = i + 1; j < tape->noutputs; j++)
                wf__array_release(outputs[j]);
            for (int j = 0; j < i; j++)
                wf_release(outputs[j]);
            return status;
        }
    }
    *noutputs = (size_t)tape->noutputs;
    return WF_OK;
}

/* The call traces: it found no entry (WF_CACHE_TRACE), or waited the bound
 * for another thread's trace (WF_CACHE_TIMED_OUT). Publishes the trace;
 * *own is the trace when the entry kept another one (the call replays its
 * own and frees it), NULL when the entry holds it. */
static wf_status trace_and_publish(wf_compiled *c, wf_compile_mode mode,
                                   enum wf_cache_outcome outcome, wf_cache_entry *entry,
                                   wf_array *const *inputs, size_t ninputs, wf_trace **own)
{
    *own = NULL;
    wf_trace *t;
    wf_status status = trace(c, mode, inputs, ninputs, &t);
    if (status != WF_OK) {
        if (outcome == WF_CACHE_TRACE)
            wf__cache_fail(entry, status, wf_last_error_message());
        else /* the trace this call gave up on may still succeed */
            wf__cache_release(entry);
        return status;
    }
    if (!wf__cache_publish(entry, t, trace_free))
        *own = t;
    return WF_OK;
}

/* A call without declared state: look up, trace if needed, replay. */
static wf_status call_traced(wf_compiled *c, wf_array *const *inputs, size_t ninputs,
                             wf_array **outputs, size_t *noutputs)
{
    wf_status status;
    wf_compile_mode mode = wf_get_compile_mode();
    if (mode == WF_COMPILE_DISABLED || wf__graph_compile_depth() > 0) {
        atomic_fetch_add_explicit(&c->inline_calls, 1, memory_order_relaxed);
        return wf_fn_call(c->fn, inputs, ninputs, outputs, noutputs);
    }
    size_t words;
    uint64_t *key = make_key(c, mode, inputs, ninputs, &words);
    if (!key)
        return wf_last_error();
    wf_cache_entry *entry;
    void *previous = NULL;
    size_t previous_bytes = 0;
    enum wf_cache_outcome outcome =
        wf__cache_acquire(c->id, key, words * sizeof *key, !wf__eval_in_user_code(), &entry,
                          &previous, &previous_bytes);
    bool traces_here = outcome == WF_CACHE_TRACE || outcome == WF_CACHE_TIMED_OUT;
    wf_trace *own = NULL;
    if (traces_here) {
        atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->traces, 1, memory_order_relaxed);
        if (outcome == WF_CACHE_TIMED_OUT) {
            atomic_fetch_add_explicit(&c->waits, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&c->timeout_traces, 1, memory_order_relaxed);
        }
        if (previous)
            report_retrace(c, previous, previous_bytes, key, words);
        status = trace_and_publish(c, mode, outcome, entry, inputs, ninputs, &own);
        if (status != WF_OK) {
            free(previous);
            free(key);
            return status;
        }
    } else if (outcome == WF_CACHE_HIT) {
        atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
    } else if (outcome == WF_CACHE_WAITED) {
        atomic_fetch_add_explicit(&c->waits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
    } else {
        free(previous);
        free(key);
        return wf_last_error();
    }
    free(previous);
    free(key);
    status = replay(own ? own : wf__cache_trace(entry), inputs, ninputs, traces_here, outputs,
                    noutputs);
    wf__cache_release(entry);
    if (own)
        trace_free(own);
    return status;
}

static void release_arrays(wf_array **arrays, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wf_release(arrays[i]);
}

/* With declared state: the slots' current arrays follow the inputs, and the
 * function's last nstate outputs are stored back into the slots. */
static wf_status call_with_state(wf_compiled *c, wf_array *const *inputs, size_t ninputs,
                                 wf_array **outputs, size_t *noutputs)
{
    size_t total = ninputs + c->nstate;
    wf_array **all = wf__calloc(total, sizeof *all);
    if (!all)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "compiled call: out of memory");
    memcpy(all, inputs, ninputs * sizeof *all);
    wf_status status = WF_OK;
    for (size_t i = 0; i < c->nstate && status == WF_OK; i++) {
        all[ninputs + i] = wf_slot_load(c->state[i]);
        if (!all[ninputs + i])
            status = wf__error(WF_ERR_INVALID_ARGUMENT,
                               "compiled call: state slot %zu is empty (store an array first)",
                               i);
    }
    wf_array *outs[WF_FN_MAX_OUTPUTS];
    size_t nout = WF_FN_MAX_OUTPUTS;
    if (status == WF_OK)
        status = call_traced(c, all, total, outs, &nout);
    release_arrays(all + ninputs, c->nstate);
    free(all);
    if (status != WF_OK)
        return status;
    if (nout < c->nstate || nout - c->nstate > *noutputs) {
        release_arrays(outs, nout);
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "compiled call: the function returned %zu outputs for %zu state slots "
                         "and room for %zu results",
                         nout, c->nstate, *noutputs);
    }
    size_t nresults = nout - c->nstate;
    for (size_t i = 0; i < c->nstate && status == WF_OK; i++)
        status = wf_slot_store(c->state[i], outs[nresults + i]);
    release_arrays(outs + nresults, c->nstate);
    if (status != WF_OK) {
        release_arrays(outs, nresults);
        return status;
    }
    memcpy(outputs, outs, nresults * sizeof *outputs);
    *noutputs = nresults;
    return WF_OK;
}

static wf_status compiled_call(void *payload, wf_array *const *inputs, size_t ninputs,
                               wf_array **outputs, size_t *noutputs)
{
    wf_compiled *c = payload;
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    wf_status status = check_inputs(inputs, ninputs);
    if (status != WF_OK)
        return status;
    if (c->nstate)
        return call_with_state(c, inputs, ninputs, outputs, noutputs);
    return call_traced(c, inputs, ninputs, outputs, noutputs);
}

/* ------------------------------------------------------------ public API */

wf_compile_options wf_compile_options_default(void)
{
    return (wf_compile_options){.struct_size = sizeof(wf_compile_options),
                                .shapeless = false,
                                .retrace_warning = 16};
}

wf_fn *wf_compile(wf_fn *fn, const wf_compile_options *options)
{
    if (!fn) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_compile: fn is NULL");
        return NULL;
    }
    wf_compile_options o = wf_compile_options_default();
    if (options) {
        if (options->struct_size < offsetof(wf_compile_options, retrace_warning) + sizeof(int) ||
            options->struct_size > sizeof o) {
            wf__error(WF_ERR_INVALID_ARGUMENT,
                      "wf_compile: options->struct_size %zu is not a known size (set it with "
                      "wf_compile_options_default())",
                      options->struct_size);
            return NULL;
        }
        memcpy(&o, options, options->struct_size);
    }
    if (o.nstate && !o.state) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_compile: options->state is NULL with nstate %zu",
                  o.nstate);
        return NULL;
    }
    for (size_t i = 0; i < o.nstate; i++) {
        if (!o.state[i]) {
            wf__error(WF_ERR_NULL_ARGUMENT, "wf_compile: state slot %zu is NULL", i);
            return NULL;
        }
    }
    if (o.retrace_warning < 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_compile: retrace_warning %d is negative",
                  o.retrace_warning);
        return NULL;
    }
    wf_compiled *c = wf__calloc(1, sizeof *c);
    if (!c) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_compile: out of memory");
        return NULL;
    }
    c->id = atomic_fetch_add(&next_function_id, 1);
    c->fn = wf_fn_retain(fn);
    c->shapeless = o.shapeless;
    c->retrace_warning = o.retrace_warning;
    c->state = o.nstate ? wf__calloc(o.nstate, sizeof *c->state) : NULL;
    if (o.nstate && !c->state) {
        wf_fn_release(c->fn);
        free(c);
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_compile: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < o.nstate; i++)
        c->state[c->nstate++] = wf_slot_retain(o.state[i]);
    return wf_fn_new(compiled_call, c, compiled_free);
}

wf_compile_stats wf_compile_stats_default(void)
{
    return (wf_compile_stats){.struct_size = sizeof(wf_compile_stats)};
}

wf_status wf_compile_stats_get(wf_fn *compiled, wf_compile_stats *out)
{
    if (!out)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_compile_stats_get: out is NULL");
    if (out->struct_size < offsetof(wf_compile_stats, entries) + sizeof(uint64_t) ||
        out->struct_size > sizeof(wf_compile_stats))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_compile_stats_get: out->struct_size %zu is not a known size (set it "
                         "with wf_compile_stats_default())",
                         out->struct_size);
    wf_compile_stats s = {.struct_size = out->struct_size};
    if (!compiled) {
        wf_cache_counters counters;
        wf__cache_counters(&counters);
        s.hits = counters.hits;
        s.misses = counters.misses;
        s.traces = counters.traces;
        s.waits = counters.waits;
        s.evictions = counters.evictions;
        s.erases = counters.erases;
        s.entries = counters.entries;
        s.timeout_traces = counters.timeout_traces;
    } else {
        wf_compiled *c = wf__fn_payload_of(compiled, compiled_call);
        if (!c)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "wf_compile_stats_get: the function was not made by wf_compile");
        s.calls = atomic_load(&c->calls);
        s.hits = atomic_load(&c->hits);
        s.misses = atomic_load(&c->misses);
        s.traces = atomic_load(&c->traces);
        s.waits = atomic_load(&c->waits);
        s.inline_calls = atomic_load(&c->inline_calls);
        s.evictions = wf__cache_function_evictions(c->id);
        s.entries = wf__cache_function_entries(c->id);
        s.timeout_traces = atomic_load(&c->timeout_traces);
    }
    s.fused_kernels_run = wf__fused_kernels_run();
    memcpy(out, &s, out->struct_size);
    return WF_OK;
}

wf_status wf_compile_set_cache_limits(size_t per_function, size_t total)
{
    wf__cache_set_limits(per_function, total);
    return WF_OK;
}

wf_status wf_compile_set_wait_timeout(double seconds)
{
    if (!(seconds >= 0)) /* negative or NaN */
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_compile_set_wait_timeout: %g seconds (use >= 0, or INFINITY for "
                         "no bound)",
                         seconds);
    wf__cache_set_wait_timeout(seconds);
    return WF_OK;
}

double wf_compile_get_wait_timeout(void) { return wf__cache_get_wait_timeout(); }
