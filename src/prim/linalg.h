/*
 * Primitives of linear algebra (addmm; matmul itself is declared in
 * prims.h) and of the fused ("fast") ops, with their parameter structs.
 * Internal. Params structs are zeroed (memset) before being filled.
 */
#ifndef WEFT_PRIM_LINALG_H
#define WEFT_PRIM_LINALG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* addmm: inputs a (..., m, k), b (..., k, n), c (the product's shape, any
 * strides). out = beta * c + alpha * (a @ b). */
typedef struct wf_addmm_params {
    double alpha;
    double beta;
} wf_addmm_params;

/* layer_norm / rms_norm: inputs x, then weight if has_weight, then bias if
 * has_bias (1-d, x's last dim). */
typedef struct wf_norm_params {
    double eps;
    bool has_weight;
    bool has_bias;
} wf_norm_params;

typedef struct wf_rope_params {
    double base;
    double scale;
    int64_t offset;
    int dims;
    bool traditional;
} wf_rope_params;

enum wf_sdpa_mask_kind { WF_SDPA_MASK_NONE = 0, WF_SDPA_MASK_ADD = 1, WF_SDPA_MASK_BOOL = 2 };

/* sdpa: inputs q (..., Lq, D), k (..., Lk, D), v (..., Lk, Dv), then the
 * mask already broadcast to (out lead..., Lq, Lk) unless mask_kind is NONE.
 * Leading axes broadcast; on the heads axis (the last leading one) k and v
 * may have a divisor of q's count ("grouped-query": kv head h / group). */
typedef struct wf_sdpa_params {
    double scale;
    int mask_kind; /* enum wf_sdpa_mask_kind */
    bool causal;
} wf_sdpa_params;

extern const wf_prim_def wf__prim_addmm;
extern const wf_prim_def wf__prim_layer_norm;
extern const wf_prim_def wf__prim_rms_norm;
extern const wf_prim_def wf__prim_rope;
extern const wf_prim_def wf__prim_sdpa;
extern const wf_prim_def wf__prim_silu;
extern const wf_prim_def wf__prim_gelu;
extern const wf_prim_def wf__prim_gelu_tanh;

/* Output leading ("batch") shape of sdpa from q, k, v leading shapes (all
 * but their last two dims), with grouped-query heads. Records WF_ERR_SHAPE
 * naming `op`. out has WF_MAX_NDIM room. */
wf_status wf__sdpa_lead_shape(const char *op, const wf_desc *q, const wf_desc *k,
                              const wf_desc *v, int64_t *out, int *nout);

#endif
