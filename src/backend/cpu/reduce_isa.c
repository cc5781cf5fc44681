/* The reduction family's hot loops (lanes of sums, products, maxima and
 * minima; element-wise accumulation; the softmax and norm row passes),
 * compiled once per instruction-set variant from reduce_isa.inc: x86-64
 * baseline, AVX2+FMA and AVX-512, chosen by wf__vm_isa_active() (the
 * variant vmath.c dispatches on, WEFT_ISA forces one).
 *
 * The loops use 64-byte GCC vector types, so every variant performs the
 * same operations on the same values in the same order (no FMA contraction
 * under -std=c11): the variants give identical bits and differ in speed. */
#include "backend/cpu/reduce.h"

#include <math.h>

#include "backend/cpu/vmath.h"

typedef float v16f __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64)));
typedef double v8d_u __attribute__((vector_size(64), aligned(8), may_alias));
typedef int64_t v8l __attribute__((vector_size(64)));
/* Halves and quarters, for the last steps of a pairwise combination. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef double v2d __attribute__((vector_size(16)));
typedef int64_t v2l __attribute__((vector_size(16)));

#define ISA(name) name##_baseline
#include "backend/cpu/reduce_isa.inc"
#undef ISA

#if defined(__x86_64__) && defined(__GNUC__)
#define REDUCE_HAVE_X86 1
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define ISA(name) name##_avx2
#include "backend/cpu/reduce_isa.inc"
#undef ISA
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
#endif
#define ISA(name) name##_avx512
#include "backend/cpu/reduce_isa.inc"
#undef ISA
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
#define REDUCE_HAVE_X86 0
#endif

const wf_cpu_red_isa *wf__cpu_red_isa(void)
{
#if REDUCE_HAVE_X86
    switch (wf__vm_isa_active()) {
    case WF_VM_ISA_AVX2: return &table_avx2;
    case WF_VM_ISA_AVX512: return &table_avx512;
    default: break;
    }
#endif
    return &table_baseline;
}
