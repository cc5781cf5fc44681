/*
 * Random ops: keys, splitting, the per-thread default key, and the sampling
 * op constructors (see prim/random.h for how bits follow from keys).
 *
 * Keys: wf_random_key(seed) is (hi32(seed), lo32(seed)), as JAX's PRNGKey.
 * Child i of wf_random_split(key) is threefry2x32(key, (hi32(i), lo32(i))).
 *
 * Default key: each thread has its own (_Thread_local, nothing to free at
 * thread exit). It starts, on the thread's first use, as child n of a fixed
 * root key, where n is a process-wide counter taken once per thread, so
 * threads draw different streams (the first thread to use it gets n = 0,
 * so a single-threaded program is reproducible). wf_random_seed(s) sets
 * this thread's default key to wf_random_key(s). An op given key NULL
 * replaces the default key k by split(k)[0] and samples with split(k)[1].
 *
 * Inside a compiled function's trace such a draw must not bake the tracing
 * thread's key into the cached trace: compile records it (wf_random_draws),
 * the draw takes its key as an input, and each call of the trace feeds the
 * keys it draws from the calling thread's default key, in the same order.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_state.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "prim/random.h"
#include "util/fault.h"

/* ---------------------------------------------------------------- keys */

wf_key wf_random_key(uint64_t seed)
{
    wf_key k = {{(uint32_t)(seed >> 32), (uint32_t)seed}};
    return k;
}

static wf_key key_child(wf_key key, uint64_t i)
{
    wf_key c;
    wf__threefry2x32(key.words[0], key.words[1], (uint32_t)(i >> 32), (uint32_t)i,
                     &c.words[0], &c.words[1]);
    return c;
}

wf_status wf_random_split(wf_key key, int count, wf_key *out)
{
    if (count < 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_random_split: count %d is negative",
                         count);
    if (count > 0 && out == NULL)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_random_split: out is NULL (count %d)",
                         count);
    for (int i = 0; i < count; i++)
        out[i] = key_child(key, (uint64_t)i);
    return WF_OK;
}

/* The root of the threads' initial default keys ("WEFT", "RNG!"). */
static const wf_key default_root = {{0x57454654u, 0x524e4721u}};

static atomic_uint_fast64_t thread_streams;

struct default_key {
    bool ready;
    wf_key key;
    wf_random_draws *draws; /* recording while this thread traces, else NULL */
};

static _Thread_local struct default_key default_key;

/* Kernels and payload destructors run on whichever thread runs them with
 * the key of a thread that never drew (core/thread_state.h): they neither
 * see nor advance that thread's own key, nor record into its trace. */
static void default_key_suspend(void *saved)
{
    memcpy(saved, &default_key, sizeof default_key);
    default_key = (struct default_key){0};
}

static void default_key_resume(const void *saved) { memcpy(&default_key, saved, sizeof default_key); }

static const wf_thread_state_hook default_key_hook = {default_key_suspend, default_key_resume};
static pthread_once_t default_key_hook_once = PTHREAD_ONCE_INIT;

static void register_default_key_hook(void) { wf__thread_state_register(&default_key_hook); }

/* Called before this thread's default key is first touched. */
static void default_key_use(void)
{
    _Static_assert(sizeof(struct default_key) <= WF_THREAD_STATE_BYTES, "saved key too big");
    pthread_once(&default_key_hook_once, register_default_key_hook);
}

static void record_event(wf_random_draws *d, bool seed, wf_key key);

void wf_random_seed(uint64_t seed)
{
    default_key_use();
    default_key.key = wf_random_key(seed);
    default_key.ready = true;
    if (default_key.draws)
        record_event(default_key.draws, true, default_key.key);
}

/* The next key of this thread's stream (the key k becomes split(k)[0], the
 * draw uses split(k)[1]). */
static wf_key take_default_key(void)
{
    default_key_use();
    if (!default_key.ready) {
        uint64_t n = atomic_fetch_add_explicit(&thread_streams, 1, memory_order_relaxed);
        default_key.key = key_child(default_root, n);
        default_key.ready = true;
    }
    wf_key next = key_child(default_key.key, 0), use = key_child(default_key.key, 1);
    default_key.key = next;
    return use;
}

void wf__random_replay(const wf_random_event *events, int nevents, wf_key *draw_keys)
{
    for (int i = 0; i < nevents; i++) {
        if (events[i].seed) {
            default_key_use();
            default_key.key = events[i].key;
            default_key.ready = true;
        } else {
            *draw_keys++ = take_default_key();
        }
    }
}

wf_array *wf__random_key_array(wf_key key)
{
    const int64_t packed = wf__random_key_pack(key.words);
    return wf__array_from_data(&packed, NULL, 0, WF_DTYPE_I64);
}

/* ---------------------------------------------------------------- recording draws */

wf_random_draws *wf__random_draws_begin(wf_random_draws *draws)
{
    default_key_use();
    wf_random_draws *previous = default_key.draws;
    default_key.draws = draws;
    return previous;
}

void wf__random_draws_end(wf_random_draws *previous) { default_key.draws = previous; }

void wf__random_draws_free(wf_random_draws *draws)
{
    for (int i = 0; i < draws->ndraws; i++)
        wf__array_release(draws->placeholders[i]);
    free(draws->placeholders);
    free(draws->events);
    *draws = (wf_random_draws){0};
}

/* Appends an event; a failure marks the recording (a seed cannot fail). */
static void record_event(wf_random_draws *d, bool seed, wf_key key)
{
    if (d->nevents == d->events_capacity) {
        int grown = d->events_capacity ? d->events_capacity * 2 : 8;
        wf_random_event *events = wf__realloc(d->events, (size_t)grown * sizeof *events);
        if (!events) {
            d->out_of_memory = true;
            return;
        }
        d->events = events;
        d->events_capacity = grown;
    }
    d->events[d->nevents++] = (wf_random_event){seed, key};
}

/* Records a draw of `key`; returns its placeholder (borrowed). On failure
 * the recording is marked, so the trace fails whatever the function does
 * with the NULL. */
static wf_array *record_draw(wf_random_draws *d, wf_key key)
{
    if (d->ndraws == d->draws_capacity) {
        int grown = d->draws_capacity ? d->draws_capacity * 2 : 8;
        wf_array **placeholders = wf__realloc(d->placeholders, (size_t)grown * sizeof *placeholders);
        if (!placeholders) {
            d->out_of_memory = true;
            wf__error(WF_ERR_OUT_OF_MEMORY, "random: out of memory recording a draw");
            return NULL;
        }
        d->placeholders = placeholders;
        d->draws_capacity = grown;
    }
    wf_array *placeholder = wf__array_new_placeholder(WF_DTYPE_I64, NULL, 0, false);
    if (!placeholder) { /* the key moved on: this trace cannot stand for a call */
        d->out_of_memory = true;
        return NULL;
    }
    record_event(d, false, key);
    if (d->out_of_memory) {
        wf__array_release(placeholder);
        wf__error(WF_ERR_OUT_OF_MEMORY, "random: out of memory recording a draw");
        return NULL;
    }
    d->placeholders[d->ndraws++] = placeholder;
    return placeholder;
}

/* ---------------------------------------------------------------- draws */

static void params_init(wf_random_params *p, int kind)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
}

/* The node of a draw of `prim` (at most one input): the key, *key or the
 * next of this thread's default key, goes into the params; but a default-key
 * draw while this thread traces a compiled function becomes random_keyed on
 * a recorded key placeholder, so every call of the trace feeds a fresh key. */
static wf_array *draw_node(const wf_prim_def *prim, wf_random_params *p, const wf_key *key,
                           wf_array *const *inputs, int ninputs)
{
    wf_key k = key ? *key : take_default_key();
    wf_random_draws *recording = key ? NULL : default_key.draws;
    if (!recording) {
        p->key[0] = k.words[0];
        p->key[1] = k.words[1];
        return wf__node_new(prim, p, inputs, ninputs);
    }
    wf_array *args[2] = {record_draw(recording, k), ninputs ? inputs[0] : NULL};
    if (!args[0])
        return NULL;
    return wf__node_new(&wf__prim_random_keyed, p, args, ninputs + 1);
}

/* Checks the dtype (float) and shape of a float generator. */
static wf_status check_float_gen(const char *op, const int64_t *shape, int ndim, wf_dtype dtype)
{
    if (!wf__dtype_valid(dtype))
        return wf__error(WF_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
    if (!wf__dtype_is_float(dtype))
        return wf__error(WF_ERR_DTYPE, "%s: dtype %s is not a float type", op,
                         wf_dtype_name(dtype));
    return wf__check_shape(op, shape, ndim);
}

/* ---------------------------------------------------------------- uniform */

static double dtype_max(wf_dtype dtype)
{
    switch (dtype) {
    case WF_DTYPE_F16: return 65504.0;
    case WF_DTYPE_BF16: return 0x1.fep127; /* 0x7F7F */
    case WF_DTYPE_F32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

/* `v` (|v| <= dtype_max) rounded to dtype. */
static double round_to(double v, wf_dtype dtype)
{
    switch (dtype) {
    case WF_DTYPE_F16: return wf__f16_to_f32(wf__f32_to_f16((float)v));
    case WF_DTYPE_BF16: return wf__bf16_to_f32(wf__f32_to_bf16((float)v));
    case WF_DTYPE_F32: return (float)v;
    default: return v;
    }
}

/* The neighbour of dtype value `v` (finite, not the largest in direction
 * `up`) towards +inf (up) or -inf. */
static double step(double v, wf_dtype dtype, bool up)
{
    if (dtype == WF_DTYPE_F64)
        return nextafter(v, up ? INFINITY : -INFINITY);
    if (dtype == WF_DTYPE_F32)
        return nextafterf((float)v, up ? INFINITY : -INFINITY);
    const bool half = dtype == WF_DTYPE_F16;
    uint16_t h = half ? wf__f32_to_f16((float)v) : wf__f32_to_bf16((float)v);
    if ((h & 0x7fffu) == 0) /* +-0 */
        h = up ? 0x0001u : 0x8001u;
    else if (((h & 0x8000u) == 0) == up) /* away from zero */
        h = (uint16_t)(h + 1u);
    else
        h = (uint16_t)(h - 1u);
    return half ? wf__f16_to_f32(h) : wf__bf16_to_f32(h);
}

/* The smallest and largest values of dtype in [low, high); false if none. */
static bool dtype_bounds(double low, double high, wf_dtype dtype, double *lo, double *hi)
{
    const double max = dtype_max(dtype);
    if (low > max || high <= -max)
        return false;
    if (low < -max) {
        *lo = -max;
    } else {
        *lo = round_to(low, dtype);
        if (*lo < low)
            *lo = step(*lo, dtype, true);
    }
    if (high > max) {
        *hi = max;
    } else {
        *hi = round_to(high, dtype);
        if (*hi >= high)
            *hi = step(*hi, dtype, false);
    }
    return *lo <= *hi;
}

wf_array *wf__op_random_uniform(const int64_t *shape, int ndim, wf_dtype dtype, double low,
                                double high, const wf_key *key)
{
    const char *op = "wf_random_uniform";
    if (check_float_gen(op, shape, ndim, dtype) != WF_OK)
        return NULL;
    if (!isfinite(low) || !isfinite(high)) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: low %g and high %g must be finite", op, low,
                  high);
        return NULL;
    }
    if (!(low < high)) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: high %g <= low %g (empty range)", op, high,
                  low);
        return NULL;
    }
    double lo, hi;
    if (!dtype_bounds(low, high, dtype, &lo, &hi)) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: no %s value lies in [%g, %g)", op,
                  wf_dtype_name(dtype), low, high);
        return NULL;
    }
    wf_random_params p;
    params_init(&p, WF_RANDOM_UNIFORM);
    p.lo = lo;
    p.hi = hi;
    p.dtype = dtype;
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    p.a = low;
    p.b = high;
    return draw_node(&wf__prim_random_uniform, &p, key, NULL, 0);
}

/* ---------------------------------------------------------------- normal */

wf_array *wf__op_random_normal(const int64_t *shape, int ndim, wf_dtype dtype, double loc,
                               double scale, const wf_key *key)
{
    const char *op = "wf_random_normal";
    if (check_float_gen(op, shape, ndim, dtype) != WF_OK)
        return NULL;
    if (!isfinite(loc) || !isfinite(scale) || scale < 0) {
        wf__error(WF_ERR_INVALID_ARGUMENT,
                  "%s: loc %g must be finite and scale %g finite and >= 0", op, loc, scale);
        return NULL;
    }
    wf_random_params p;
    params_init(&p, WF_RANDOM_NORMAL);
    p.dtype = dtype;
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    p.a = loc;
    p.b = scale;
    return draw_node(&wf__prim_random_normal, &p, key, NULL, 0);
}

/* ---------------------------------------------------------------- randint */

wf_array *wf__op_random_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                                wf_dtype dtype, const wf_key *key)
{
    const char *op = "wf_random_randint";
    int64_t min, max;
    switch (dtype) {
    case WF_DTYPE_U8: min = 0, max = UINT8_MAX; break;
    case WF_DTYPE_I32: min = INT32_MIN, max = INT32_MAX; break;
    case WF_DTYPE_I64: min = INT64_MIN, max = INT64_MAX; break;
    case WF_DTYPE_I8: min = INT8_MIN, max = INT8_MAX; break;
    case WF_DTYPE_I16: min = INT16_MIN, max = INT16_MAX; break;
    case WF_DTYPE_U16: min = 0, max = UINT16_MAX; break;
    case WF_DTYPE_U32: min = 0, max = UINT32_MAX; break;
    case WF_DTYPE_U64: min = 0, max = INT64_MAX; break; /* the bounds are int64 */
    default:
        if (wf__dtype_valid(dtype))
            wf__error(WF_ERR_DTYPE, "%s: dtype %s is not an integer type", op,
                      wf_dtype_name(dtype));
        else
            wf__error(WF_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
        return NULL;
    }
    if (wf__check_shape(op, shape, ndim) != WF_OK)
        return NULL;
    if (high <= low) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: high %lld <= low %lld (empty range)", op,
                  (long long)high, (long long)low);
        return NULL;
    }
    if (low < min || high - 1 > max) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: [%lld, %lld) does not fit %s", op,
                  (long long)low, (long long)high, wf_dtype_name(dtype));
        return NULL;
    }
    wf_random_params p;
    params_init(&p, WF_RANDOM_RANDINT);
    p.dtype = dtype;
    p.ndim = ndim;
    wf__shape_copy(p.shape, shape, ndim);
    p.ilow = low;
    p.ihigh = high;
    return draw_node(&wf__prim_random_randint, &p, key, NULL, 0);
}

/* ---------------------------------------------------------------- bernoulli */

/* `a` in the dtype a kernel takes: `a` itself when it has it (a same-dtype
 * cast would add a view whose params fix a shape: no shapeless replay). */
static wf_array *kernel_dtype(wf_array *a, wf_dtype dtype)
{
    return a->dtype == dtype ? wf__array_incref(a) : wf__op_astype(a, dtype);
}

wf_array *wf__op_random_bernoulli(wf_array *p, const int64_t *shape, int ndim, const wf_key *key)
{
    const char *op = "wf_random_bernoulli";
    if (!wf__array_check(p, op, "p"))
        return NULL;
    if (!wf__dtype_valid(p->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: p has an invalid dtype", op);
        return NULL;
    }
    if (shape == NULL && ndim == 0) {
        shape = p->shape;
        ndim = p->ndim;
    } else {
        if (wf__check_shape(op, shape, ndim) != WF_OK)
            return NULL;
        int64_t b[WF_MAX_NDIM];
        int nb = 0;
        if (wf__broadcast_shapes(op, p->shape, p->ndim, shape, ndim, b, &nb) != WF_OK)
            return NULL;
        if (!wf__shape_equal(b, nb, shape, ndim)) {
            char sp[256], ss[256];
            wf__error(WF_ERR_SHAPE, "%s: p of shape %s does not broadcast to shape %s", op,
                      wf__shape_str(p->shape, p->ndim, sp, sizeof sp),
                      wf__shape_str(shape, ndim, ss, sizeof ss));
            return NULL;
        }
    }
    const wf_dtype pt = p->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    wf_array *cast = kernel_dtype(p, pt);
    if (!cast)
        return NULL;
    wf_array *x = cast;
    if (!wf__shape_equal(x->shape, x->ndim, shape, ndim)) {
        x = wf__op_broadcast_to(cast, shape, ndim);
        wf__array_release(cast);
        if (!x)
            return NULL;
    }
    wf_random_params params;
    params_init(&params, WF_RANDOM_BERNOULLI);
    wf_array *out = draw_node(&wf__prim_random_bernoulli, &params, key, &x, 1);
    wf__array_release(x);
    return out;
}

/* ---------------------------------------------------------------- categorical */

wf_array *wf__op_random_categorical(wf_array *logits, int axis, const wf_key *key)
{
    const char *op = "wf_random_categorical";
    if (!wf__array_check(logits, op, "logits"))
        return NULL;
    if (!wf__dtype_valid(logits->dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: logits have an invalid dtype", op);
        return NULL;
    }
    int ax;
    if (wf__normalize_axis(op, axis, logits->ndim, &ax) != WF_OK)
        return NULL;
    if (logits->shape[ax] == 0) {
        wf__error(WF_ERR_SHAPE, "%s: axis %d has size 0 (no classes to sample from)", op,
                  axis);
        return NULL;
    }
    const wf_dtype lt = logits->dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32;
    wf_array *x = kernel_dtype(logits, lt);
    if (!x)
        return NULL;
    wf_random_params p;
    params_init(&p, WF_RANDOM_CATEGORICAL);
    p.axis = ax;
    wf_array *out = draw_node(&wf__prim_random_categorical, &p, key, &x, 1);
    wf__array_release(x);
    return out;
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_random_uniform(const int64_t *shape, int ndim, wf_dtype dtype, double low,
                            double high, const wf_key *key)
{
    return wf__array_publish(wf__op_random_uniform(shape, ndim, dtype, low, high, key));
}

wf_array *wf_random_normal(const int64_t *shape, int ndim, wf_dtype dtype, double loc,
                           double scale, const wf_key *key)
{
    return wf__array_publish(wf__op_random_normal(shape, ndim, dtype, loc, scale, key));
}

wf_array *wf_random_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                            wf_dtype dtype, const wf_key *key)
{
    return wf__array_publish(wf__op_random_randint(low, high, shape, ndim, dtype, key));
}

wf_array *wf_random_bernoulli(wf_array *p, const int64_t *shape, int ndim, const wf_key *key)
{
    return wf__array_publish(wf__op_random_bernoulli(p, shape, ndim, key));
}

wf_array *wf_random_categorical(wf_array *logits, int axis, const wf_key *key)
{
    return wf__array_publish(wf__op_random_categorical(logits, axis, key));
}
