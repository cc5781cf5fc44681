/* Multi-head attention over a fused projection (heads.h). */
#include "nn/heads.h"

#include <math.h>

wf_array *wf__nn_attend_heads(wf_array *qkv, int64_t heads, wf_array *mask, bool causal)
{
    if (!qkv)
        return NULL;
    int64_t batch = wf_array_dim(qkv, 0), seq = wf_array_dim(qkv, 1);
    int64_t dim = wf_array_dim(qkv, 2) / 3, head_dim = dim / heads;
    wf_array *split = wf_reshape(qkv, (int64_t[]){batch, seq, 3, heads, head_dim}, 5);
    wf_array *qkvt = wf_transpose(split, (int[]){2, 0, 3, 1, 4}, 5); /* (3, B, H, T, Dh) */
    wf_array *parts[3];
    for (int i = 0; i < 3; i++) {
        int64_t starts[5] = {i, 0, 0, 0, 0}, stops[5] = {i + 1, batch, heads, seq, head_dim};
        int64_t steps[5] = {1, 1, 1, 1, 1};
        parts[i] = wf_squeeze(wf_slice(qkvt, starts, stops, steps), (int[]){0}, 1);
    }
    wf_array *att = wf_scaled_dot_product_attention(parts[0], parts[1], parts[2],
                                                    1.0 / sqrt((double)head_dim), mask, causal);
    return wf_reshape(wf_transpose(att, (int[]){0, 2, 1, 3}, 4),
                      (int64_t[]){batch, seq, dim}, 3);
}
