/*
 * Vectorized float32 math (the CPU backend's transcendental functions), and
 * the unary element-wise kernels built on them. Internal.
 *
 * Each function maps n contiguous floats x to y (which must not overlap). They are written as
 * branch-free straight-line code (range reduction + polynomial, special
 * values by selects) in loops of fixed-size blocks, which GCC -O2
 * auto-vectorizes. Every function is compiled three times: for the x86-64
 * baseline (SSE2), for AVX2 and for AVX-512; the best one the CPU supports
 * is chosen once at run time (no -march=native needed). FMA contraction is
 * off (-std=c11), so the three variants give bit-identical results.
 *
 * Maximum errors against the correctly rounded result, measured over >= 1e6
 * points of the whole domain by tests/unit/test_vmath.c (which asserts the
 * bounds stated there):
 *   exp, expm1, log, log1p, log2, sigmoid   <= 3 ulp
 *   sin, cos (|x| <= 4096; libm beyond)     <= 3 ulp
 *   tanh, erf                               <= 4 ulp
 *   tan (|x| <= 4096; libm beyond)          <= 5 ulp
 * Special values follow libm: NaN in gives NaN, exp/expm1 overflow to inf
 * and underflow to 0 (gradually, through subnormals), log of a negative is
 * NaN and log(0) is -inf, tanh/erf(+-inf) = +-1, sigmoid(-inf) = 0,
 * sin/cos/tan(+-inf) = NaN, signed zeros are kept where libm keeps them.
 */
#ifndef WEFT_BACKEND_CPU_VMATH_H
#define WEFT_BACKEND_CPU_VMATH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

typedef void (*wf_vm_fn)(int64_t n, const float *restrict x, float *restrict y);

/* The instruction-set variants. */
enum wf_vm_isa { WF_VM_ISA_BASELINE = 0, WF_VM_ISA_AVX2, WF_VM_ISA_AVX512, WF_VM_ISA_COUNT };

typedef struct wf_vm_table {
    wf_vm_fn exp, expm1, log, log1p, log2, tanh, sigmoid, erf, sin, cos, tan;
} wf_vm_table;

/* The best variant this CPU runs (detected once). */
int wf__vm_isa_best(void);
/* The variant every dispatched loop uses (vector math, reductions, norms):
 * the one the environment variable WEFT_ISA names ("baseline", "avx2",
 * "avx512"; read once) if the CPU runs it, else the best. */
int wf__vm_isa_active(void);
/* Makes `isa` the active variant; false (nothing changed) if the CPU cannot
 * run it. For tests that exercise every variant in one process: call it
 * while no kernel runs. */
bool wf__vm_isa_force(int isa);
/* The table of variant `isa`; NULL if the CPU cannot run it. */
const wf_vm_table *wf__vm_table(int isa);
/* "baseline", "avx2", "avx512". */
const char *wf__vm_isa_name(int isa);

/* The dispatched functions (best variant). */
void wf__vm_exp_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_expm1_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_log_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_log1p_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_log2_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_tanh_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_sigmoid_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_erf_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_sin_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_cos_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_tan_f32(int64_t n, const float *restrict x, float *restrict y);

/* erfinv (scalar: Giles' approximation refined by Newton steps on libm
 * erf, relative error < 1e-6 for float, < 1e-12 for double). */
double wf__vm_erfinv(double x, int newton_steps);

/* ---------------------------------------------------------------- kernels
 * One CPU kernel per unary primitive (src/prim/unary.c). */
#define WF_VM_DECLARE_KERNEL(name)                                                          \
    wf_status wf__cpu_##name(wf_array *out, wf_array *const *inputs, int ninputs,           \
                             const void *params);
WF_VM_DECLARE_KERNEL(negative)
WF_VM_DECLARE_KERNEL(abs)
WF_VM_DECLARE_KERNEL(sign)
WF_VM_DECLARE_KERNEL(expm1)
WF_VM_DECLARE_KERNEL(log)
WF_VM_DECLARE_KERNEL(log1p)
WF_VM_DECLARE_KERNEL(log2)
WF_VM_DECLARE_KERNEL(sqrt)
WF_VM_DECLARE_KERNEL(rsqrt)
WF_VM_DECLARE_KERNEL(square)
WF_VM_DECLARE_KERNEL(reciprocal)
WF_VM_DECLARE_KERNEL(sin)
WF_VM_DECLARE_KERNEL(cos)
WF_VM_DECLARE_KERNEL(tan)
WF_VM_DECLARE_KERNEL(tanh)
WF_VM_DECLARE_KERNEL(sinh)
WF_VM_DECLARE_KERNEL(cosh)
WF_VM_DECLARE_KERNEL(arcsin)
WF_VM_DECLARE_KERNEL(arccos)
WF_VM_DECLARE_KERNEL(arctan)
WF_VM_DECLARE_KERNEL(sigmoid)
WF_VM_DECLARE_KERNEL(erf)
WF_VM_DECLARE_KERNEL(erfinv)
WF_VM_DECLARE_KERNEL(floor)
WF_VM_DECLARE_KERNEL(ceil)
WF_VM_DECLARE_KERNEL(round)
WF_VM_DECLARE_KERNEL(logical_not)
WF_VM_DECLARE_KERNEL(isnan)
WF_VM_DECLARE_KERNEL(isinf)
WF_VM_DECLARE_KERNEL(isfinite)
WF_VM_DECLARE_KERNEL(stop_gradient)

#endif
