/*
 * Vectorized math (the CPU backend's transcendental functions), and the
 * unary element-wise kernels built on them. Internal.
 *
 * Each function maps n contiguous elements x to y (which must not overlap;
 * the two-input ones read a and b, which may overlap each other). They are
 * written as branch-free straight-line code (range reduction + polynomial,
 * special values by selects) in loops of fixed-size blocks, which GCC -O2
 * auto-vectorizes. Every function is compiled three times: for the x86-64
 * baseline (SSE2), for AVX2+FMA and for AVX-512; the best one the CPU
 * supports is chosen at run time (no -march=native needed), unless the
 * environment variable WEFT_ISA (baseline, avx2, avx512; read once) or
 * wf__vm_isa_force picks another. FMA contraction is off (-std=c11), so the
 * variants give bit-identical results (but see the baseline's libm
 * functions below). float32 gelu's AVX2 variant is written with
 * intrinsics, the same operations in the same order (two vectors side by
 * side), so it keeps those bits (checked over all 2^32 inputs when it was
 * written; test_vmath compares the variants).
 *
 * Maximum errors against the exact result, measured over >= 1e6 points of
 * the whole domain by tests/unit/test_vmath.c (which asserts the bounds
 * stated there; measured maxima in its header):
 *   float32
 *   exp, expm1, log, log1p, power, logaddexp <= 2 ulp
 *   log2, tanh, sigmoid, sinh, cosh          <= 3 ulp
 *   arcsin, arccos, arctan, arctan2          <= 3 ulp
 *   sin, cos (|x| <= 4096; libm beyond)      <= 3 ulp
 *   erf, silu, gelu, gelu_tanh               <= 4 ulp (tails included,
 *                                               down to the subnormals)
 *   tan (|x| <= 4096; libm beyond)           <= 5 ulp
 *   float64
 *   exp, expm1, log, log1p, log2             <= 2 ulp
 *   tanh, sigmoid, sinh, cosh                <= 3 ulp
 *   silu, gelu_tanh                          <= 4 ulp
 *   logaddexp                                <= 2 ulp of max(|a|, |b|)
 *   power, arctan, arctan2, arcsin, arccos   <= 4 ulp
 *   sin, cos, tan (|x| <= 2^20; libm beyond) <= 4 ulp
 *   erf                                      <= 4 ulp
 * float64 power carries log|x| and y log|x| as double-doubles; float64
 * power, trigonometry, erf and the arctan family use explicit fma (AVX2 and
 * AVX-512 both have it, so those two still agree bit for bit).
 * float32 power and logaddexp compute in double. GCC vectorizes the
 * float64 functions (and float32 power, logaddexp) only for AVX2 and
 * AVX-512; the baseline calls libm for those (float64 silu and gelu_tanh
 * excepted), so their baseline results may differ from the AVX2/AVX-512
 * ones by an ulp. Everything else agrees bit for bit in all variants.
 * Special values follow libm: NaN in gives NaN, exp/expm1 overflow to inf
 * and underflow to 0 (gradually, through subnormals), log of a negative is
 * NaN and log(0) is -inf, tanh/erf(+-inf) = +-1, sigmoid(-inf) = 0,
 * sin/cos/tan(+-inf) = NaN, signed zeros are kept where libm keeps them,
 * power follows C99 pow (pow(x, 0) = pow(1, y) = 1 even for NaN, ...),
 * arctan2 C99 atan2 (signed zeros and infinities), silu, gelu, gelu_tanh
 * of -inf give -0.
 */
#ifndef WEFT_BACKEND_CPU_VMATH_H
#define WEFT_BACKEND_CPU_VMATH_H

#include <stdint.h>

#include "core/array.h"
#include "weft.h"

typedef void (*wf_vm_fn)(int64_t n, const float *restrict x, float *restrict y);
typedef void (*wf_vm_fn2)(int64_t n, const float *a, const float *b, float *restrict y);
typedef void (*wf_vm_fn_f64)(int64_t n, const double *restrict x, double *restrict y);
typedef void (*wf_vm_fn2_f64)(int64_t n, const double *a, const double *b,
                              double *restrict y);

/* The instruction-set variants. */
enum wf_vm_isa { WF_VM_ISA_BASELINE = 0, WF_VM_ISA_AVX2, WF_VM_ISA_AVX512, WF_VM_ISA_COUNT };

/* One variant's functions. Fields ending in _f64 take doubles. */
typedef struct wf_vm_table {
    wf_vm_fn exp, expm1, log, log1p, log2, tanh, sigmoid, erf, sin, cos, tan;
    wf_vm_fn sinh, cosh, arcsin, arccos, arctan, silu, gelu, gelu_tanh;
    wf_vm_fn2 power, arctan2, logaddexp;
    wf_vm_fn_f64 exp_f64, expm1_f64, log_f64, log1p_f64, log2_f64, tanh_f64, sigmoid_f64;
    wf_vm_fn_f64 sinh_f64, cosh_f64, silu_f64, gelu_tanh_f64;
    wf_vm_fn2_f64 logaddexp_f64, power_f64, arctan2_f64;
    wf_vm_fn_f64 arctan_f64, arcsin_f64, arccos_f64, sin_f64, cos_f64, tan_f64, erf_f64;
} wf_vm_table;

/* The best variant this CPU runs (detected once). */
int wf__vm_isa_best(void);
/* The variant the dispatched functions use: the one forced by
 * wf__vm_isa_force, else WEFT_ISA's (when this CPU runs it), else the best. */
int wf__vm_isa_active(void);
/* Makes every dispatched function (and every kernel that has ISA variants
 * in this backend) use variant `isa` from now on, in all threads; -1 goes
 * back to the default. WF_ERR_UNSUPPORTED if this CPU cannot run it,
 * WF_ERR_INVALID_ARGUMENT for a value out of range. For tests and
 * benchmarks. */
wf_status wf__vm_isa_force(int isa);
/* The variant named by `name` ("baseline", "avx2", "avx512"); -1 if none. */
int wf__vm_isa_parse(const char *name);
/* The table of variant `isa`; NULL if the CPU cannot run it. */
const wf_vm_table *wf__vm_table(int isa);
/* "baseline", "avx2", "avx512". */
const char *wf__vm_isa_name(int isa);

/* The dispatched functions (active variant). */
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
void wf__vm_sinh_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_cosh_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_arcsin_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_arccos_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_arctan_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_silu_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_gelu_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_gelu_tanh_f32(int64_t n, const float *restrict x, float *restrict y);
void wf__vm_power_f32(int64_t n, const float *a, const float *b, float *restrict y);
void wf__vm_arctan2_f32(int64_t n, const float *a, const float *b, float *restrict y);
void wf__vm_logaddexp_f32(int64_t n, const float *a, const float *b, float *restrict y);
void wf__vm_exp_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_expm1_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_log_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_log1p_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_log2_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_tanh_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_sigmoid_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_sinh_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_cosh_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_silu_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_gelu_tanh_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_logaddexp_f64(int64_t n, const double *a, const double *b, double *restrict y);
void wf__vm_power_f64(int64_t n, const double *a, const double *b, double *restrict y);
void wf__vm_arctan2_f64(int64_t n, const double *a, const double *b, double *restrict y);
void wf__vm_arctan_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_arcsin_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_arccos_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_sin_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_cos_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_tan_f64(int64_t n, const double *restrict x, double *restrict y);
void wf__vm_erf_f64(int64_t n, const double *restrict x, double *restrict y);

/* gelu in float64 (scalar: libm erfc with the rounding of x / sqrt(2)
 * corrected, so the negative tail keeps full precision). */
double wf__vm_gelu_f64_scalar(double x);

/* erfinv (scalar): an initial approximation refined by Newton steps, on
 * erf(y) = x for |x| <= 1/2 and on log(erfc(y)) = log(1 - |x|) beyond
 * (which converges in a few steps up to |x| = 1 - 2^-53). At most
 * newton_steps steps; stops after one below 2^-40 |y|. */
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
