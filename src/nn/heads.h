/* Multi-head attention over a fused projection, shared by the layers of
 * weft_nn.h (wf_nn_causal_self_attention, the BERT encoder). */
#ifndef WEFT_NN_HEADS_H
#define WEFT_NN_HEADS_H

#include <stdbool.h>

#include "weft.h"

/* qkv (batch, seq, 3 dim) split into `heads` heads of queries, keys and
 * values, attended through wf_scaled_dot_product_attention (mask and causal
 * as there) and merged back to (batch, seq, dim). Arrays it makes belong to
 * the caller's scope; NULL + last error on failure. */
wf_array *wf__nn_attend_heads(wf_array *qkv, int64_t heads, wf_array *mask, bool causal);

#endif
