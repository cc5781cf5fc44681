/*
 * wf_fn: the refcounted function handle every transform takes and returns.
 *
 * A handle is immutable after creation, so calls from many threads share it
 * without locks. A call holds a reference for its duration: the handle (and
 * its payload) outlives a release made by another thread mid-call, and the
 * payload destructor then runs on the calling thread once the call is done,
 * with no weft lock held.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/scope.h"
#include "transforms/transforms.h"
#include "util/lock.h"
#include "util/fault.h"

struct wf_fn {
    atomic_int_fast64_t refcount;
    wf_fn_callback callback;
    void *payload;
    void (*payload_free)(void *payload);
};

wf_fn *wf__fn_make(wf_fn_callback callback, void *payload, void (*payload_free)(void *payload))
{
    wf_fn *fn = wf__malloc(sizeof *fn);
    if (!fn) {
        if (payload_free)
            payload_free(payload);
        wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory creating a function");
        return NULL;
    }
    atomic_init(&fn->refcount, 1);
    fn->callback = callback;
    fn->payload = payload;
    fn->payload_free = payload_free;
    return fn;
}

wf_fn *wf_fn_new(wf_fn_callback callback, void *payload, void (*payload_free)(void *payload))
{
    if (!callback) {
        if (payload_free)
            payload_free(payload);
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_fn_new: callback is NULL");
        return NULL;
    }
    return wf__fn_make(callback, payload, payload_free);
}

wf_fn *wf_fn_retain(wf_fn *fn)
{
    if (fn)
        atomic_fetch_add_explicit(&fn->refcount, 1, memory_order_relaxed);
    return fn;
}

void wf_fn_release(wf_fn *fn)
{
    if (!fn || atomic_fetch_sub_explicit(&fn->refcount, 1, memory_order_acq_rel) != 1)
        return;
    wf__assert_no_locks_held("a function's payload destructor");
    if (fn->payload_free)
        fn->payload_free(fn->payload);
    free(fn);
}

static wf_status check_call(wf_fn *fn, wf_array *const *inputs, size_t ninputs,
                            wf_array **outputs, size_t *noutputs)
{
    if (!fn)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_fn_call: fn is NULL");
    if (!noutputs)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_fn_call: noutputs is NULL");
    if (!outputs && *noutputs > 0)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_fn_call: outputs is NULL with capacity %zu",
                         *noutputs);
    if (!inputs && ninputs > 0)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_fn_call: inputs is NULL with %zu inputs",
                         ninputs);
    for (size_t i = 0; i < ninputs; i++)
        if (!wf__array_check(inputs[i], "wf_fn_call", "an input"))
            return wf_last_error();
    return WF_OK;
}

/* The body said it failed: make sure the message is about this failure. */
static wf_status body_failed(wf_status status)
{
    if (wf_last_error() != status)
        wf__error(status, "wf_fn_call: the function failed (%s)", wf_status_name(status));
    return status;
}

/* The body said it succeeded: check what it handed back. */
static wf_status check_outputs(wf_array **outputs, size_t capacity, size_t count)
{
    if (count > capacity) {
        for (size_t i = 0; i < capacity; i++)
            wf_release(outputs[i]);
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_fn_call: the function returned %zu outputs, room was %zu", count,
                         capacity);
    }
    for (size_t i = 0; i < count; i++) {
        if (outputs[i] && wf__array_check(outputs[i], "wf_fn_call", "an output"))
            continue;
        for (size_t j = 0; j < count; j++)
            if (j != i && outputs[j] && atomic_load(&outputs[j]->refcount) > 0)
                wf_release(outputs[j]);
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_fn_call: the function returned a %s output %zu",
                         outputs[i] ? "released" : "NULL", i);
    }
    return WF_OK;
}

/* Hands the body's outputs to this thread's innermost scope, if one is
 * open; on failure releases them all. */
static wf_status adopt_outputs(wf_array **outputs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (!outputs[i])
            continue;
        wf_status status = wf__scope_adopt(outputs[i]);
        if (status != WF_OK) {
            for (size_t j = i; j < count; j++)
                wf_release(outputs[j]);
            return status;
        }
    }
    return WF_OK;
}

wf_status wf_fn_call(wf_fn *fn, wf_array *const *inputs, size_t ninputs, wf_array **outputs,
                     size_t *noutputs)
{
    wf_status status = check_call(fn, inputs, ninputs, outputs, noutputs);
    if (status != WF_OK)
        return status;
    const size_t capacity = *noutputs;
    for (size_t i = 0; i < capacity; i++)
        outputs[i] = NULL;
    wf_error_state before;
    wf__error_save(&before);
    wf_clear_error(); /* so a failure's message is the body's own */
    wf_fn_retain(fn); /* the call's own reference */
    size_t count = capacity;
    wf__assert_no_locks_held("a function body");
    /* The body runs with this thread's scopes hidden (a transform's own
     * scope among them): what it makes is its own, and a reference it keeps
     * and releases itself (a binding's object per array) never takes a
     * reference the caller's scope holds. Scopes it leaves open are closed.
     * Its outputs are then handed to the caller's scope, as op results are. */
    void *scopes = wf__scope_suspend();
    status = fn->callback(fn->payload, inputs, ninputs, outputs, &count);
    wf__scope_resume(scopes);
    wf_fn_release(fn);
    if (status != WF_OK) {
        for (size_t i = 0; i < capacity; i++)
            outputs[i] = NULL;
        *noutputs = 0;
        return body_failed(status);
    }
    status = check_outputs(outputs, capacity, count);
    if (status == WF_OK)
        status = adopt_outputs(outputs, count);
    if (status != WF_OK) {
        for (size_t i = 0; i < capacity; i++)
            outputs[i] = NULL;
        *noutputs = 0;
        return status;
    }
    *noutputs = count;
    wf__error_restore(&before);
    return WF_OK;
}

void *wf__fn_payload_of(const wf_fn *fn, wf_fn_callback callback)
{
    return fn && fn->callback == callback ? fn->payload : NULL;
}

wf_status wf__fn_call_owned(wf_fn *fn, wf_array *const *inputs, size_t ninputs,
                            wf_array **outputs, size_t *noutputs)
{
    *noutputs = WF_FN_MAX_OUTPUTS;
    wf_status status = wf_fn_call(fn, inputs, ninputs, outputs, noutputs);
    if (status != WF_OK)
        return status;
    for (size_t i = 0; i < *noutputs; i++)
        wf__scope_forget(outputs[i]);
    return WF_OK;
}

void wf__release_owned(wf_array **arrays, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (arrays[i])
            wf__array_decref(arrays[i]);
        arrays[i] = NULL;
    }
}

wf_status wf__export(wf_array *const *arrays, size_t n, wf_array **out)
{
    for (size_t i = 0; i < n; i++) {
        wf_array *r = wf_retain(arrays[i]);
        if (r && !wf_keep(r)) {
            wf_release(r);
            r = NULL;
        }
        if (!r) {
            for (size_t j = 0; j < i; j++) {
                wf_release(out[j]);
                out[j] = NULL;
            }
            return wf_last_error();
        }
        out[i] = r;
    }
    return WF_OK;
}
