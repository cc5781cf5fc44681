/*
 * Internal builders: every op of src/ops as a function that returns a new
 * reference registered with no scope and touches the last error only when
 * it fails. Ops build their temporaries with these (never with the public
 * functions), so a scope, and later a tape, records only what the user
 * built; transforms and compile build graphs with them too. The public op
 * wf_<name> is wf__array_publish(wf__op_<name>(...)). Arguments and results
 * follow the public functions' documentation in weft.h. Internal.
 */
#ifndef WEFT_OPS_OPS_H
#define WEFT_OPS_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* A new array node with a's value (a view): what an op returns when its
 * result equals its input, so every op result is a node of its own (a scope
 * never mistakes a caller's older reference to `a` for the op's). */
wf_array *wf__same_value(wf_array *a);

/* creation.c */
wf_array *wf__op_full(const int64_t *shape, int ndim, double value, wf_dtype dtype);
wf_array *wf__op_zeros(const int64_t *shape, int ndim, wf_dtype dtype);
wf_array *wf__op_ones(const int64_t *shape, int ndim, wf_dtype dtype);
wf_array *wf__op_arange(double start, double stop, double step, wf_dtype dtype);
wf_array *wf__op_full_like(wf_array *a, double value);
wf_array *wf__op_zeros_like(wf_array *a);
wf_array *wf__op_ones_like(wf_array *a);
wf_array *wf__op_linspace(double start, double stop, int64_t num, wf_dtype dtype);
wf_array *wf__op_eye(int64_t n, int64_t m, int64_t k, wf_dtype dtype);

/* elementwise.c */
wf_array *wf__op_astype(wf_array *a, wf_dtype dtype);
wf_array *wf__op_add(wf_array *a, wf_array *b);
wf_array *wf__op_multiply(wf_array *a, wf_array *b);
wf_array *wf__op_subtract(wf_array *a, wf_array *b);
wf_array *wf__op_divide(wf_array *a, wf_array *b);
wf_array *wf__op_power(wf_array *a, wf_array *b);
wf_array *wf__op_maximum(wf_array *a, wf_array *b);
wf_array *wf__op_minimum(wf_array *a, wf_array *b);
wf_array *wf__op_floor_divide(wf_array *a, wf_array *b);
wf_array *wf__op_remainder(wf_array *a, wf_array *b);
wf_array *wf__op_equal(wf_array *a, wf_array *b);
wf_array *wf__op_not_equal(wf_array *a, wf_array *b);
wf_array *wf__op_less(wf_array *a, wf_array *b);
wf_array *wf__op_less_equal(wf_array *a, wf_array *b);
wf_array *wf__op_greater(wf_array *a, wf_array *b);
wf_array *wf__op_greater_equal(wf_array *a, wf_array *b);
wf_array *wf__op_logical_and(wf_array *a, wf_array *b);
wf_array *wf__op_logical_or(wf_array *a, wf_array *b);
wf_array *wf__op_logaddexp(wf_array *a, wf_array *b);
wf_array *wf__op_arctan2(wf_array *a, wf_array *b);
wf_array *wf__op_complex(wf_array *re, wf_array *im);
wf_array *wf__op_real(wf_array *a);
wf_array *wf__op_imag(wf_array *a);
wf_array *wf__op_conjugate(wf_array *a);
wf_array *wf__op_bitwise_and(wf_array *a, wf_array *b);
wf_array *wf__op_bitwise_or(wf_array *a, wf_array *b);
wf_array *wf__op_bitwise_xor(wf_array *a, wf_array *b);
wf_array *wf__op_bitwise_invert(wf_array *a);
wf_array *wf__op_left_shift(wf_array *a, wf_array *b);
wf_array *wf__op_right_shift(wf_array *a, wf_array *b);
wf_array *wf__op_where(wf_array *cond, wf_array *a, wf_array *b);
wf_array *wf__op_clip(wf_array *a, wf_array *low, wf_array *high);
wf_array *wf__op_exp(wf_array *a);

/* unary.c */
wf_array *wf__op_negative(wf_array *a);
wf_array *wf__op_abs(wf_array *a);
wf_array *wf__op_sign(wf_array *a);
wf_array *wf__op_square(wf_array *a);
wf_array *wf__op_floor(wf_array *a);
wf_array *wf__op_ceil(wf_array *a);
wf_array *wf__op_round(wf_array *a);
wf_array *wf__op_logical_not(wf_array *a);
wf_array *wf__op_isnan(wf_array *a);
wf_array *wf__op_isinf(wf_array *a);
wf_array *wf__op_isfinite(wf_array *a);
wf_array *wf__op_stop_gradient(wf_array *a);
wf_array *wf__op_expm1(wf_array *a);
wf_array *wf__op_log(wf_array *a);
wf_array *wf__op_log1p(wf_array *a);
wf_array *wf__op_log2(wf_array *a);
wf_array *wf__op_sqrt(wf_array *a);
wf_array *wf__op_rsqrt(wf_array *a);
wf_array *wf__op_reciprocal(wf_array *a);
wf_array *wf__op_sin(wf_array *a);
wf_array *wf__op_cos(wf_array *a);
wf_array *wf__op_tan(wf_array *a);
wf_array *wf__op_tanh(wf_array *a);
wf_array *wf__op_sinh(wf_array *a);
wf_array *wf__op_cosh(wf_array *a);
wf_array *wf__op_arcsin(wf_array *a);
wf_array *wf__op_arccos(wf_array *a);
wf_array *wf__op_arctan(wf_array *a);
wf_array *wf__op_sigmoid(wf_array *a);
wf_array *wf__op_erf(wf_array *a);
wf_array *wf__op_erfinv(wf_array *a);

/* reduce.c */
wf_array *wf__op_sum(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_mean(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_prod(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_max(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_min(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_all(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_any(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_logsumexp(wf_array *a, const int *axes, int naxes, bool keepdims);
wf_array *wf__op_var(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof);
wf_array *wf__op_std(wf_array *a, const int *axes, int naxes, bool keepdims, int ddof);
wf_array *wf__op_argmax(wf_array *a, int axis, bool keepdims);
wf_array *wf__op_argmin(wf_array *a, int axis, bool keepdims);
wf_array *wf__op_softmax(wf_array *a, const int *axes, int naxes);
wf_array *wf__op_cumsum(wf_array *a, int axis, bool reverse, bool inclusive);
wf_array *wf__op_cumprod(wf_array *a, int axis, bool reverse, bool inclusive);

/* fft.c */
wf_array *wf__op_fft(wf_array *a, const int *axes, int n_axes, const int64_t *sizes,
                     wf_fft_kind kind, wf_fft_norm norm);

/* shape.c */
wf_array *wf__op_reshape(wf_array *a, const int64_t *shape, int ndim);
wf_array *wf__op_transpose(wf_array *a, const int *perm, int nperm);
wf_array *wf__op_broadcast_to(wf_array *a, const int64_t *shape, int ndim);
/* An operator's implicit broadcast of `a` (a new, unpublished reference):
 * broadcast_to flagged WF_NODE_FLAG_IMPLICIT_BROADCAST, which a shapeless
 * replay re-derives from each call's shapes. */
wf_array *wf__op_implicit_broadcast(wf_array *a, const int64_t *shape, int ndim);
wf_array *wf__op_slice(wf_array *a, const int64_t *starts, const int64_t *stops,
                       const int64_t *steps);
wf_array *wf__op_swapaxes(wf_array *a, int axis1, int axis2);
wf_array *wf__op_moveaxis(wf_array *a, int source, int destination);
wf_array *wf__op_expand_dims(wf_array *a, const int *axes, int naxes);
wf_array *wf__op_squeeze(wf_array *a, const int *axes, int naxes);
wf_array *wf__op_flatten(wf_array *a, int start_axis, int end_axis);
wf_array *wf__op_unflatten(wf_array *a, int axis, const int64_t *shape, int n);
/* Rows [r0, r1) and columns [c0, c1) of every matrix of a (rank >= 2). */
wf_array *wf__op_matrix_block(wf_array *a, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
/* Marks `out` (a new node built from `in` by a public shape-naming op) as
 * asked for by the caller (WF_NODE_FLAG_USER_SHAPE); returns it. */
wf_array *wf__mark_user_shape(wf_array *out, const wf_array *in);
wf_array *wf__op_slice_update(wf_array *a, wf_array *update, const int64_t *starts,
                              const int64_t *stops, const int64_t *steps);
wf_array *wf__op_concatenate(wf_array *const *arrays, int count, int axis);
wf_array *wf__op_stack(wf_array *const *arrays, int count, int axis);
wf_status wf__op_split(wf_array *a, int sections, int axis, wf_array **out);
wf_status wf__op_split_at(wf_array *a, const int64_t *indices, int count, int axis, wf_array **out);
wf_array *wf__op_pad(wf_array *a, const int64_t *low, const int64_t *high, double value);
wf_array *wf__op_tril(wf_array *a, int64_t k);
wf_array *wf__op_triu(wf_array *a, int64_t k);
wf_array *wf__op_repeat(wf_array *a, int64_t repeats, int axis);
wf_array *wf__op_tile(wf_array *a, const int64_t *reps, int nreps);
wf_array *wf__op_view(wf_array *a, wf_dtype dtype);

/* fp8.c */
wf_array *wf__op_to_fp8(wf_array *a);
wf_array *wf__op_from_fp8(wf_array *a, wf_dtype dtype);

/* index.c */
wf_array *wf__op_take(wf_array *a, wf_array *indices, int axis);
wf_array *wf__op_take_along_axis(wf_array *a, wf_array *indices, int axis);
wf_array *wf__op_scatter_add(wf_array *a, wf_array *indices, wf_array *updates, int axis);

/* linalg.c */
wf_array *wf__op_matmul(wf_array *a, wf_array *b);
wf_array *wf__op_addmm(wf_array *c, wf_array *a, wf_array *b, double alpha, double beta);
/* conv.c */
wf_array *wf__op_conv_general(wf_array *x, wf_array *w, const int64_t *strides,
                              const int64_t *padding_lo, const int64_t *padding_hi,
                              const int64_t *kernel_dilation, const int64_t *input_dilation,
                              int64_t groups, bool flip);

/* fast.c */
wf_array *wf__op_layer_norm(wf_array *x, wf_array *weight, wf_array *bias, double eps);
wf_array *wf__op_rms_norm(wf_array *x, wf_array *weight, double eps);
wf_array *wf__op_rope(wf_array *x, int dims, bool traditional, double base, double scale,
                      int64_t offset);
wf_array *wf__op_scaled_dot_product_attention(wf_array *q, wf_array *k, wf_array *v, double scale,
                                              wf_array *mask, bool causal);
wf_array *wf__op_silu(wf_array *x);
wf_array *wf__op_gelu(wf_array *x);
wf_array *wf__op_gelu_tanh(wf_array *x);

/* random.c */
wf_array *wf__op_random_uniform(const int64_t *shape, int ndim, wf_dtype dtype, double low,
                                double high, const wf_key *key);
wf_array *wf__op_random_normal(const int64_t *shape, int ndim, wf_dtype dtype, double loc,
                               double scale, const wf_key *key);
wf_array *wf__op_random_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                                wf_dtype dtype, const wf_key *key);
wf_array *wf__op_random_bernoulli(wf_array *p, const int64_t *shape, int ndim, const wf_key *key);
wf_array *wf__op_random_categorical(wf_array *logits, int axis, const wf_key *key);

/* The default key inside a compiled function's trace (compile/compile.c).
 * While a recording is active on this thread, an op given key NULL still
 * advances this thread's default key as it always does, but builds a
 * random_keyed node whose key is a new int64 placeholder (a trace input)
 * instead of baking the key into params; wf_random_seed still sets the key.
 * The recording keeps both, in order, as events, so each call can redo them
 * on its own thread's key. Kernels and destructors run on this thread
 * meanwhile do not see the recording. */
typedef struct wf_random_event {
    bool seed;  /* a wf_random_seed (key: the key it set), else a draw (key: its key) */
    wf_key key;
} wf_random_event;

typedef struct wf_random_draws {
    int nevents, events_capacity;
    wf_random_event *events;
    int ndraws, draws_capacity;
    wf_array **placeholders; /* one per draw, in order (internal references) */
    bool out_of_memory;      /* an event could not be recorded */
} wf_random_draws;

/* Starts recording into *draws (zeroed by the caller); returns the
 * recording it replaces (NULL normally), to hand to wf__random_draws_end. */
wf_random_draws *wf__random_draws_begin(wf_random_draws *draws);
void wf__random_draws_end(wf_random_draws *previous);
/* Releases the placeholders and frees the arrays (the struct is the
 * caller's). */
void wf__random_draws_free(wf_random_draws *draws);
/* Redoes a recording's events on this thread's default key, as the traced
 * ops would: a seed event sets the key, a draw advances it and writes the
 * key it takes to draw_keys (one per draw, in order). */
void wf__random_replay(const wf_random_event *events, int nevents, wf_key *draw_keys);
/* `key` as the int64 scalar random_keyed takes (an internal builder). */
wf_array *wf__random_key_array(wf_key key);

/* custom.c */
wf_array *wf__op_custom(const char *name, wf_custom_kernel kernel, void *payload,
                        void (*payload_free)(void *payload), wf_array *const *inputs, int count,
                        const int64_t *shape, int ndim, wf_dtype dtype);

#endif
