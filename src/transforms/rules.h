/*
 * Per-primitive transform rules. Internal.
 *
 * The rules live in a side table keyed by the primitive (wf__rules_find),
 * not in wf_prim_def: primitives stay pure semantics, transforms add
 * behaviour on top. Rules build their results with the public ops, inside
 * the engine's scope: whatever they return or build is owned by that scope
 * (they never release anything). A rule returns WF_OK, or the error of the
 * op that failed.
 *
 * Every rule gets the traced node itself: its primitive, params, inputs
 * (the values of the primal computation), shape and dtype.
 */
#ifndef WEFT_TRANSFORMS_RULES_H
#define WEFT_TRANSFORMS_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* Reverse: given the node's output cotangent `ct` (node's shape and dtype),
 * sets input_cts[i] (pre-set to NULL, meaning zero) for each i with
 * wanted[i] (float inputs the output depends on). The engine casts to the
 * input's dtype. */
typedef wf_status (*wf_vjp_rule)(wf_array *node, wf_array *ct, const bool *wanted,
                                 wf_array **input_cts);

/* Forward: given the inputs' tangents (NULL = zero; at least one is not),
 * sets *out to the output's tangent (NULL = zero). */
typedef wf_status (*wf_jvp_rule)(wf_array *node, wf_array *const *tangents, wf_array **out);

/* Batching: inputs[i] is the batched value of input i with its batch on
 * axes[i], or the node's own (unbatched) input with axes[i] ==
 * WF_VMAP_NOT_MAPPED; at least one is batched, all with `batch` examples.
 * Sets *out and its batch axis *out_axis (or WF_VMAP_NOT_MAPPED). The rule
 * computes the whole batch with the primitive itself, never a loop. */
typedef wf_status (*wf_vmap_rule)(wf_array *node, wf_array *const *inputs, const int *axes,
                                  int64_t batch, wf_array **out, int *out_axis);

/* What a primitive is to the transforms. */
typedef enum wf_rule_kind {
    /* Differentiable: real vjp, jvp and vmap rules. */
    WF_RULES_DIFFERENTIABLE = 0,
    /* Float output whose derivative is zero wherever it exists (floor,
     * sign, floor_divide): zero vjp / jvp, as MLX. */
    WF_RULES_ZERO_GRADIENT,
    /* Output never float (comparisons, argmax, bool tests, bernoulli,
     * categorical): no cotangent or tangent ever reaches it; zero rules. */
    WF_RULES_NON_FLOAT_OUTPUT,
    /* No inputs (creation, uniform/normal/randint): always a constant of a
     * trace, so no rule ever applies. */
    WF_RULES_CONSTANT,
    /* Opaque to weft (wf_custom kernels): every rule answers
     * WF_ERR_UNSUPPORTED naming the primitive. */
    WF_RULES_UNSUPPORTED
} wf_rule_kind;

typedef struct wf_prim_rules {
    const wf_prim_def *prim;
    wf_rule_kind kind;
    wf_vjp_rule vjp;
    wf_jvp_rule jvp;
    wf_vmap_rule vmap;
    /* The vjp and jvp rules build, for a node of a shapeless trace, only
     * nodes that follow the call's shapes: ops on the node, its inputs and
     * the cotangent or tangents, with shapes taken through the
     * shape-following helpers below, never sizes or axes read off the traced
     * shapes. Other rules run with the traced-shape mark raised
     * (wf__rule_begin), so a shapeless compiled gradient refuses them. */
    bool follows_shapes;
} wf_prim_rules;

/* Brackets a vjp or jvp rule of `rules` for `node`: raises the traced-shape
 * mark (core/graph_mode.h) when the node belongs to a shapeless trace and
 * the rules do not follow shapes. Returns what wf__rule_end takes. */
bool wf__rule_begin(const wf_prim_rules *rules, const wf_array *node);
void wf__rule_end(bool marked);

/* The rules of `prim`, or NULL if it has none. */
const wf_prim_rules *wf__rules_find(const wf_prim_def *prim);
/* Every entry of the table (the coverage test walks them). */
const wf_prim_rules *const *wf__rules_all(size_t *count);

/* Table fragments, one per family of primitives (transforms/rules_*.c). */
extern const wf_prim_rules wf__rules_elementwise[];
extern const size_t wf__rules_elementwise_count;
extern const wf_prim_rules wf__rules_reduce[];
extern const size_t wf__rules_reduce_count;
extern const wf_prim_rules wf__rules_shape[];
extern const size_t wf__rules_shape_count;
extern const wf_prim_rules wf__rules_index[];
extern const size_t wf__rules_index_count;
extern const wf_prim_rules wf__rules_linalg[];
extern const size_t wf__rules_linalg_count;
extern const wf_prim_rules wf__rules_linalg_factor[];
extern const size_t wf__rules_linalg_factor_count;
extern const wf_prim_rules wf__rules_fast[];
extern const size_t wf__rules_fast_count;
extern const wf_prim_rules wf__rules_other[];
extern const size_t wf__rules_other_count;
extern const wf_prim_rules wf__rules_custom_function[];
extern const size_t wf__rules_custom_function_count;
extern const wf_prim_rules wf__rules_scatter[];
extern const size_t wf__rules_scatter_count;
extern const wf_prim_rules wf__rules_sort[];
extern const size_t wf__rules_sort_count;
extern const wf_prim_rules wf__rules_fft[];
extern const size_t wf__rules_fft_count;
extern const wf_prim_rules wf__rules_conv[];
extern const size_t wf__rules_conv_count;
extern const wf_prim_rules wf__rules_distributed[];
extern const size_t wf__rules_distributed_count;
extern const wf_prim_rules wf__rules_quantized[];
extern const size_t wf__rules_quantized_count;
extern const wf_prim_rules wf__rules_matmul_family[];
extern const size_t wf__rules_matmul_family_count;

/* ---------------------------------------------------------------- helpers
 * (transforms/rules_util.c). Results belong to the current scope. */

/* Turns a NULL result into the recorded error. */
static inline wf_status wf__rule_result(wf_array *a) { return a ? WF_OK : wf_last_error(); }

/* A node of `prim` on `inputs`, registered with the current (the engine's)
 * scope; NULL with the first error kept if an input is NULL. */
wf_array *wf__rule_node(const wf_prim_def *prim, const void *params, wf_array *const *inputs,
                        int ninputs);
/* A new node with a's value (a view), registered with the current scope.
 * Its shape is a's traced one, except for a node of a shapeless trace,
 * whose shape follows a's. */
wf_array *wf__rule_same(wf_array *a);
/* A 0-d array of `like`'s dtype holding v (rules keep their arithmetic in
 * the operand's dtype: a float32 scalar would promote float16 math). */
wf_array *wf__rule_scalar(const wf_array *like, double v);
/* The node rebuilt with other inputs (same primitive and params). */
wf_array *wf__rule_rebuild(wf_array *node, wf_array *const *inputs);
/* Sums x down to like's shape (the inverse of broadcasting like to x's);
 * for a shapeless trace, an unbroadcast_like node that re-derives the
 * summed axes from each call's shapes. */
wf_array *wf__rule_unbroadcast(wf_array *x, wf_array *like);
/* x reshaped to like's shape (reshape_like for a shapeless trace). */
wf_array *wf__rule_reshape_like(wf_array *x, wf_array *like);
/* Shape of a reduction's output with keepdims for the axes in `mask`. */
void wf__rule_keepdims_shape(const wf_array *in, uint64_t mask, int64_t *shape);
/* y (a reduction of `in` over `mask`, keepdims or not) reshaped to keepdims
 * form and broadcast to in's shape (expand_dims and broadcast_like for a
 * shapeless trace). */
wf_array *wf__rule_expand_reduced(wf_array *y, wf_array *in, uint64_t mask);
/* A 0-d array of y's dtype: the number of elements of `in` that a reduction
 * into y combined into each of y's, counted at each call (size_ratio: for
 * a shapeless trace, where wf__rule_reduced_count's traced count is stale). */
wf_array *wf__rule_reduced_count_of(wf_array *in, wf_array *y);
/* Whether any of a, b belongs to a shapeless trace (NULLs allowed). */
bool wf__rule_shapeless(const wf_array *a, const wf_array *b);
/* Number of elements reduced by `mask` in `in`. */
int64_t wf__rule_reduced_count(const wf_array *in, uint64_t mask);

/* Whether this thread runs the vmap rule of a node of a shapeless trace
 * (transforms/vmap.c): a batch it names from the traced batch size is
 * marked so that a shapeless compiled trace refuses it. */
bool wf__vmap_batching_shapeless(void);
/* vmap helpers. x with its batch axis moved to 0 (NOT_MAPPED: x as is). */
wf_array *wf__vmap_to_front(wf_array *x, int axis);
/* x batched on axis 0 whatever it was: unbatched x is broadcast (a view). */
wf_array *wf__vmap_materialize(wf_array *x, int axis, int64_t batch);
/* x (unbatched, rank r) as rank r + 1 with a size-1 axis 0 (broadcasts
 * against a batch), or batched x moved to axis 0. */
wf_array *wf__vmap_front_or_one(wf_array *x, int axis);
/* x with rank raised to `rank` by size-1 axes inserted right after axis 0
 * (x already has its batch, or a size-1 stand-in, at axis 0). */
wf_array *wf__vmap_pad_rank(wf_array *x, int rank);

/* A zero-gradient vjp / jvp (ZERO_GRADIENT and NON_FLOAT_OUTPUT kinds). */
wf_status wf__rule_vjp_zero(wf_array *node, wf_array *ct, const bool *wanted,
                            wf_array **input_cts);
wf_status wf__rule_jvp_zero(wf_array *node, wf_array *const *tangents, wf_array **out);
/* vmap of an element-wise primitive (inputs and output of one shape). */
wf_status wf__rule_vmap_elementwise(wf_array *node, wf_array *const *inputs, const int *axes,
                                    int64_t batch, wf_array **out, int *out_axis);
/* jvp of a primitive linear in its inputs: the node rebuilt on the tangents
 * (zeros where an input has none). Only for primitives whose params do not
 * add a constant (pad's value is handled by its own rule). */
wf_status wf__rule_jvp_linear(wf_array *node, wf_array *const *tangents, wf_array **out);

#endif
