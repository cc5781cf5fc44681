/*
 * Unary element-wise primitives (src/prim/unary.c). Internal.
 *
 * None takes parameters. Each has its own table (so transforms can tell them
 * apart, e.g. "stop_gradient") and its own CPU kernel (backend/cpu/vmath.h).
 * What each accepts (the op constructors in src/ops/unary.c cast or reject
 * before building the node):
 *   FLOAT  float inputs only, same dtype out (integer inputs are cast to
 *          float32 by the op)
 *   NUMBER any dtype but bool, same dtype out (negative)
 *   ANY    any dtype, same dtype out (abs, sign, square; stop_gradient)
 *   BOOL   any dtype, bool out (logical_not, isnan, isinf, isfinite)
 */
#ifndef WEFT_PRIM_UNARY_H
#define WEFT_PRIM_UNARY_H

#include "core/array.h"

/* MAGNITUDE: any dtype, complex64 giving float32 (abs). FLOAT_COMPLEX: a
 * float type or complex64 (the functions MLX defines on complex: exp, log,
 * sqrt, the trigonometric and hyperbolic ones, ...). */
enum wf_unary_kind { WF_UNARY_FLOAT, WF_UNARY_NUMBER, WF_UNARY_ANY, WF_UNARY_BOOL,
                     WF_UNARY_MAGNITUDE, WF_UNARY_FLOAT_COMPLEX };

/* X(name, kind, extra flags): every unary primitive but exp (which is in
 * src/prim/elementwise.c). All are WF_PRIM_ELEMENTWISE; all but the view
 * stop_gradient may compute in place, keeping a donor's layout
 * (WF_UNARY_IN_PLACE: WF_PRIM_INPLACE and WF_PRIM_INPLACE_ANY_LAYOUT,
 * core/array.h). */
enum { WF_UNARY_IN_PLACE = WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT };
#define WF_UNARY_PRIMS(X)                                                                   \
    X(negative, WF_UNARY_NUMBER, WF_UNARY_IN_PLACE)                                            \
    X(abs, WF_UNARY_MAGNITUDE, WF_UNARY_IN_PLACE)                                              \
    X(sign, WF_UNARY_ANY, WF_UNARY_IN_PLACE)                                                   \
    X(expm1, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                                \
    X(log, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                          \
    X(log1p, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                                \
    X(log2, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                                 \
    X(sqrt, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                         \
    X(rsqrt, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                                \
    X(square, WF_UNARY_ANY, WF_UNARY_IN_PLACE)                                                 \
    X(reciprocal, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                           \
    X(sin, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                          \
    X(cos, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                          \
    X(tan, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                                  \
    X(tanh, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                         \
    X(sinh, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                                 \
    X(cosh, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                                 \
    X(arcsin, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                               \
    X(arccos, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                               \
    X(arctan, WF_UNARY_FLOAT_COMPLEX, WF_UNARY_IN_PLACE)                                               \
    X(sigmoid, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                              \
    X(erf, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                                  \
    X(erfinv, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                               \
    X(floor, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                                \
    X(ceil, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                                 \
    X(round, WF_UNARY_FLOAT, WF_UNARY_IN_PLACE)                                                \
    X(logical_not, WF_UNARY_BOOL, WF_UNARY_IN_PLACE)                                           \
    X(isnan, WF_UNARY_BOOL, WF_UNARY_IN_PLACE)                                                 \
    X(isinf, WF_UNARY_BOOL, WF_UNARY_IN_PLACE)                                                 \
    X(isfinite, WF_UNARY_BOOL, WF_UNARY_IN_PLACE)                                              \
    X(stop_gradient, WF_UNARY_ANY, WF_PRIM_VIEW)

#define WF_UNARY_DECLARE_PRIM(name, kind, flags) extern const wf_prim_def wf__prim_##name;
WF_UNARY_PRIMS(WF_UNARY_DECLARE_PRIM)
#undef WF_UNARY_DECLARE_PRIM

#endif
