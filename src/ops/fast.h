/*
 * Internal pieces of the fused ("fast") ops that transforms reuse.
 * Internal.
 */
#ifndef WEFT_OPS_FAST_H
#define WEFT_OPS_FAST_H

#include <stdint.h>

#include "core/array.h"

/* scaled_dot_product_attention built from basic ops (matmul, softmax,
 * where): what a backward pass needs (the attention weights) stays in the
 * graph. `mask` is NULL or already broadcast to (lead..., Lq, Lk), of
 * `mask_kind` (enum wf_sdpa_mask_kind). The same values as the fused
 * primitive, rows with every key masked included (zeros). Inputs are
 * assumed valid (the primitive's inference checked them). An internal
 * builder: the new reference is registered with no scope. */
wf_array *wf__sdpa_composed(wf_array *q, wf_array *k, wf_array *v, wf_array *mask,
                            int mask_kind, double scale, bool causal);

/* Times this thread's wf_scaled_dot_product_attention took the training
 * path (a test counter: a thread that is not inside a grad transform never
 * does, whatever other threads do). */
uint64_t wf__sdpa_training_path_calls(void);

#endif
