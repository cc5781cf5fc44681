/* The list of every built-in primitive (see prim/registry.h). A primitive
 * added anywhere in src/prim is added here too; test_prim_registry checks
 * that each has a name, a unique one, and a CPU kernel. */
#include "prim/registry.h"

#include "prim/binary.h"
#include "prim/conv.h"
#include "prim/custom.h"
#include "prim/distributed.h"
#include "prim/fused.h"
#include "prim/linalg.h"
#include "prim/matmul_family.h"
#include "prim/prims.h"
#include "prim/random.h"
#include "prim/reduce.h"
#include "prim/scatter.h"
#include "prim/shape.h"
#include "prim/quantized.h"
#include "prim/search.h"
#include "prim/fft.h"
#include "prim/linalg_factor.h"
#include "prim/sort.h"
#include "prim/sibling.h"
#include "prim/unary.h"

#define WF_UNARY_LIST_PRIM(name, kind, flags) &wf__prim_##name,

static const wf_prim_def *const all_prims[] = {
    /* creation */
    &wf__prim_full, &wf__prim_full_like, &wf__prim_arange, &wf__prim_linspace, &wf__prim_eye,
    /* element-wise */
    &wf__prim_astype, &wf__prim_exp, &wf__prim_add, &wf__prim_multiply, &wf__prim_subtract,
    &wf__prim_divide, &wf__prim_power, &wf__prim_maximum, &wf__prim_minimum,
    &wf__prim_floor_divide, &wf__prim_remainder, &wf__prim_equal, &wf__prim_not_equal,
    &wf__prim_less, &wf__prim_less_equal, &wf__prim_greater, &wf__prim_greater_equal,
    &wf__prim_logical_and, &wf__prim_logical_or, &wf__prim_logaddexp, &wf__prim_arctan2,
    &wf__prim_bitwise_and, &wf__prim_bitwise_or, &wf__prim_bitwise_xor, &wf__prim_left_shift,
    &wf__prim_right_shift, &wf__prim_complex, &wf__prim_real, &wf__prim_imag,
    &wf__prim_conjugate,
    &wf__prim_where, &wf__prim_clip,
    WF_UNARY_PRIMS(WF_UNARY_LIST_PRIM)
    /* reductions, arg-reductions, softmax, scans */
    &wf__prim_sum, &wf__prim_prod, &wf__prim_max, &wf__prim_min, &wf__prim_all, &wf__prim_any,
    &wf__prim_mean, &wf__prim_var, &wf__prim_std, &wf__prim_logsumexp, &wf__prim_argmax,
    &wf__prim_argmin, &wf__prim_softmax, &wf__prim_cumsum, &wf__prim_cumprod,
    /* shape and layout */
    &wf__prim_reshape, &wf__prim_transpose, &wf__prim_broadcast_to, &wf__prim_slice,
    &wf__prim_slice_update, &wf__prim_concatenate, &wf__prim_pad, &wf__prim_tri,
    &wf__prim_view, &wf__prim_broadcast_like, &wf__prim_unbroadcast_like,
    &wf__prim_reshape_like, &wf__prim_size_ratio, &wf__prim_crop_like, &wf__prim_pad_like,
    /* indexing */
    &wf__prim_take, &wf__prim_take_along_axis, &wf__prim_scatter_add,
    /* linear algebra and fused ops */
    &wf__prim_matmul, &wf__prim_addmm, &wf__prim_gather_mm, &wf__prim_segmented_mm,
    &wf__prim_layer_norm, &wf__prim_rms_norm,
    &wf__prim_rope, &wf__prim_sdpa, &wf__prim_silu, &wf__prim_gelu, &wf__prim_gelu_tanh,
    /* random */
    &wf__prim_random_uniform, &wf__prim_random_normal, &wf__prim_random_randint,
    &wf__prim_random_bernoulli, &wf__prim_random_categorical, &wf__prim_random_keyed,
    /* user kernels, multi-output siblings */
    &wf__prim_custom, &wf__prim_sibling, &wf__prim_fused, &wf__prim_fused2, &wf__prim_fused3,
    &wf__prim_fused4,
    /* general gather / scatter */
    &wf__prim_gather, &wf__prim_scatter, &wf__prim_masked_scatter,
    /* sort family and the extra scans */
    &wf__prim_sort, &wf__prim_argsort, &wf__prim_partition, &wf__prim_argpartition,
    &wf__prim_topk, &wf__prim_argtopk, &wf__prim_cummax, &wf__prim_cummin,
    &wf__prim_logcumsumexp, &wf__prim_searchsorted,
    /* convolution */
    &wf__prim_conv_general,
    /* discrete Fourier transforms */
    &wf__prim_fft,
    /* collectives */
    &wf__prim_all_sum, &wf__prim_all_max, &wf__prim_all_min, &wf__prim_all_gather,
    &wf__prim_sum_scatter, &wf__prim_send, &wf__prim_recv,
    /* quantization */
    &wf__prim_quantize, &wf__prim_dequantize, &wf__prim_quantized_matmul, &wf__prim_gather_qmm,
    /* matrix factorizations */
    &wf__prim_linalg_cholesky, &wf__prim_linalg_inv, &wf__prim_linalg_tri_inv,
    &wf__prim_linalg_lu, &wf__prim_linalg_qr, &wf__prim_linalg_eigh, &wf__prim_linalg_svd,
    &wf__prim_linalg_eig,
};

#undef WF_UNARY_LIST_PRIM

const wf_prim_def *const *wf__prim_registry(size_t *count)
{
    *count = sizeof all_prims / sizeof all_prims[0];
    return all_prims;
}
