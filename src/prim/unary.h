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

enum wf_unary_kind { WF_UNARY_FLOAT, WF_UNARY_NUMBER, WF_UNARY_ANY, WF_UNARY_BOOL };

/* X(name, kind, extra flags): every unary primitive but exp (which is in
 * src/prim/elementwise.c). All are WF_PRIM_ELEMENTWISE; all but the view
 * stop_gradient may compute in place (WF_PRIM_INPLACE, core/array.h). */
#define WF_UNARY_PRIMS(X)                                                                   \
    X(negative, WF_UNARY_NUMBER, WF_PRIM_INPLACE)                                              \
    X(abs, WF_UNARY_ANY, WF_PRIM_INPLACE)                                                      \
    X(sign, WF_UNARY_ANY, WF_PRIM_INPLACE)                                                     \
    X(expm1, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                  \
    X(log, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                    \
    X(log1p, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                  \
    X(log2, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                   \
    X(sqrt, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                   \
    X(rsqrt, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                  \
    X(square, WF_UNARY_ANY, WF_PRIM_INPLACE)                                                   \
    X(reciprocal, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                             \
    X(sin, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                    \
    X(cos, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                    \
    X(tan, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                    \
    X(tanh, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                   \
    X(sinh, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                   \
    X(cosh, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                   \
    X(arcsin, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                 \
    X(arccos, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                 \
    X(arctan, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                 \
    X(sigmoid, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                \
    X(erf, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                    \
    X(erfinv, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                 \
    X(floor, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                  \
    X(ceil, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                   \
    X(round, WF_UNARY_FLOAT, WF_PRIM_INPLACE)                                                  \
    X(logical_not, WF_UNARY_BOOL, WF_PRIM_INPLACE)                                             \
    X(isnan, WF_UNARY_BOOL, WF_PRIM_INPLACE)                                                   \
    X(isinf, WF_UNARY_BOOL, WF_PRIM_INPLACE)                                                   \
    X(isfinite, WF_UNARY_BOOL, WF_PRIM_INPLACE)                                                \
    X(stop_gradient, WF_UNARY_ANY, WF_PRIM_VIEW)

#define WF_UNARY_DECLARE_PRIM(name, kind, flags) extern const wf_prim_def wf__prim_##name;
WF_UNARY_PRIMS(WF_UNARY_DECLARE_PRIM)
#undef WF_UNARY_DECLARE_PRIM

#endif
