/* The CPU backend's kernels, attached to their primitives (DESIGN section
 * 2: primitives hold semantics; a backend adds kernels). Every primitive of
 * wf__prim_registry gets one here; test_prim_registry checks it. */
#include "backend/cpu/register.h"

#include <assert.h>

#include "backend/cpu/binary.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/fused.h"
#include "backend/cpu/index.h"
#include "backend/cpu/linalg.h"
#include "backend/cpu/matmul_family.h"
#include "backend/cpu/quantized.h"
#include "backend/cpu/random.h"
#include "backend/cpu/reduce.h"
#include "backend/cpu/scatter.h"
#include "backend/cpu/search.h"
#include "backend/cpu/vmath.h"
#include "prim/binary.h"
#include "prim/conv.h"
#include "prim/custom.h"
#include "prim/fused.h"
#include "prim/kernel.h"
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

/* Fails only for a primitive without kernel slots: a programming error. */
static void attach(const wf_prim_def *prim, wf_kernel_fn kernel)
{
    wf_status st = wf__kernel_register(prim, WF_DEVICE_KIND_CPU, kernel);
    assert(st == WF_OK);
    (void)st;
}

#define WF__CPU_ATTACH_BINARY(name) attach(&wf__prim_##name, wf__cpu_##name);
#define WF__CPU_ATTACH_UNARY(name, kind, flags) attach(&wf__prim_##name, wf__cpu_##name);

void wf__cpu_register_kernels(void)
{
    /* creation */
    attach(&wf__prim_full, wf__cpu_full);
    attach(&wf__prim_full_like, wf__cpu_full_like);
    /* compile's fused element-wise programs */
    attach(&wf__prim_fused, wf__cpu_fused);
    attach(&wf__prim_fused2, wf__cpu_fused);
    attach(&wf__prim_fused3, wf__cpu_fused);
    attach(&wf__prim_fused4, wf__cpu_fused);
    attach(&wf__prim_arange, wf__cpu_arange);
    attach(&wf__prim_linspace, wf__cpu_linspace);
    attach(&wf__prim_eye, wf__cpu_eye);
    /* element-wise */
    attach(&wf__prim_astype, wf__cpu_astype);
    attach(&wf__prim_exp, wf__cpu_exp);
    attach(&wf__prim_add, wf__cpu_add);
    attach(&wf__prim_multiply, wf__cpu_multiply);
    WF__CPU_BINARY_KERNELS(WF__CPU_ATTACH_BINARY)
    attach(&wf__prim_complex, wf__cpu_complex);
    attach(&wf__prim_real, wf__cpu_real);
    attach(&wf__prim_imag, wf__cpu_imag);
    attach(&wf__prim_conjugate, wf__cpu_conjugate);
    attach(&wf__prim_where, wf__cpu_where);
    attach(&wf__prim_clip, wf__cpu_clip);
    WF_UNARY_PRIMS(WF__CPU_ATTACH_UNARY)
    /* reductions, arg-reductions, softmax, scans */
    attach(&wf__prim_sum, wf__cpu_sum);
    attach(&wf__prim_prod, wf__cpu_reduce);
    attach(&wf__prim_max, wf__cpu_reduce);
    attach(&wf__prim_min, wf__cpu_reduce);
    attach(&wf__prim_all, wf__cpu_reduce);
    attach(&wf__prim_any, wf__cpu_reduce);
    attach(&wf__prim_mean, wf__cpu_reduce);
    attach(&wf__prim_var, wf__cpu_reduce);
    attach(&wf__prim_std, wf__cpu_reduce);
    attach(&wf__prim_logsumexp, wf__cpu_reduce);
    attach(&wf__prim_argmax, wf__cpu_arg_reduce);
    attach(&wf__prim_argmin, wf__cpu_arg_reduce);
    attach(&wf__prim_softmax, wf__cpu_softmax);
    attach(&wf__prim_cumsum, wf__cpu_scan);
    attach(&wf__prim_cumprod, wf__cpu_scan);
    /* shape and layout */
    attach(&wf__prim_reshape, wf__cpu_reshape);
    attach(&wf__prim_transpose, wf__cpu_transpose);
    attach(&wf__prim_broadcast_to, wf__cpu_broadcast_to);
    attach(&wf__prim_broadcast_like, wf__cpu_broadcast_to);
    attach(&wf__prim_unbroadcast_like, wf__cpu_unbroadcast_like);
    attach(&wf__prim_reshape_like, wf__cpu_reshape);
    attach(&wf__prim_size_ratio, wf__cpu_size_ratio);
    attach(&wf__prim_crop_like, wf__cpu_crop_like);
    attach(&wf__prim_pad_like, wf__cpu_pad_like);
    attach(&wf__prim_slice, wf__cpu_slice);
    attach(&wf__prim_slice_update, wf__cpu_slice_update);
    attach(&wf__prim_concatenate, wf__cpu_concatenate);
    attach(&wf__prim_pad, wf__cpu_pad);
    attach(&wf__prim_tri, wf__cpu_tri);
    attach(&wf__prim_view, wf__cpu_view);
    /* indexing */
    attach(&wf__prim_take, wf__cpu_take);
    attach(&wf__prim_take_along_axis, wf__cpu_take_along_axis);
    attach(&wf__prim_scatter_add, wf__cpu_scatter_add);
    /* linear algebra and fused ops */
    attach(&wf__prim_matmul, wf__cpu_matmul);
    for (int kind = 0; kind < WF_FACTOR_KIND_COUNT; kind++)
        attach(wf__factor_prim(kind), wf__cpu_linalg_factor);
    attach(&wf__prim_addmm, wf__cpu_addmm);
    attach(&wf__prim_layer_norm, wf__cpu_layer_norm);
    attach(&wf__prim_rms_norm, wf__cpu_rms_norm);
    attach(&wf__prim_rope, wf__cpu_rope);
    attach(&wf__prim_sdpa, wf__cpu_sdpa);
    attach(&wf__prim_silu, wf__cpu_silu);
    attach(&wf__prim_gelu, wf__cpu_gelu);
    attach(&wf__prim_gelu_tanh, wf__cpu_gelu_tanh);
    /* random */
    attach(&wf__prim_random_uniform, wf__cpu_random_uniform);
    attach(&wf__prim_random_normal, wf__cpu_random_normal);
    attach(&wf__prim_random_randint, wf__cpu_random_randint);
    attach(&wf__prim_random_bernoulli, wf__cpu_random_bernoulli);
    attach(&wf__prim_random_categorical, wf__cpu_random_categorical);
    attach(&wf__prim_random_keyed, wf__cpu_random_keyed);
    /* user kernels, multi-output siblings */
    attach(&wf__prim_custom, wf__cpu_custom);
    attach(&wf__prim_sibling, wf__cpu_sibling);
    /* general gather / scatter */
    attach(&wf__prim_gather, wf__cpu_gather);
    attach(&wf__prim_scatter, wf__cpu_scatter);
    attach(&wf__prim_masked_scatter, wf__cpu_masked_scatter);
    attach(&wf__prim_gather_mm, wf__cpu_gather_mm);
    attach(&wf__prim_segmented_mm, wf__cpu_segmented_mm);
    /* sort family and the extra scans */
    attach(&wf__prim_sort, wf__cpu_sort);
    attach(&wf__prim_argsort, wf__cpu_sort);
    attach(&wf__prim_partition, wf__cpu_sort);
    attach(&wf__prim_argpartition, wf__cpu_sort);
    attach(&wf__prim_topk, wf__cpu_sort);
    attach(&wf__prim_argtopk, wf__cpu_sort);
    /* quantization */
    attach(&wf__prim_quantize, wf__cpu_quantize);
    attach(&wf__prim_dequantize, wf__cpu_dequantize);
    attach(&wf__prim_quantized_matmul, wf__cpu_quantized_matmul);
    attach(&wf__prim_gather_qmm, wf__cpu_gather_qmm);
    attach(&wf__prim_cummax, wf__cpu_scan_extra);
    attach(&wf__prim_cummin, wf__cpu_scan_extra);
    attach(&wf__prim_logcumsumexp, wf__cpu_scan_extra);
    attach(&wf__prim_searchsorted, wf__cpu_searchsorted);
    /* convolution */
    attach(&wf__prim_conv_general, wf__cpu_conv_general);
    /* discrete Fourier transforms */
    attach(&wf__prim_fft, wf__cpu_fft);
    wf__cpu_register_collectives();
}
