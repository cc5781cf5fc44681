/*
 * Primitive tables of the binary and ternary element-wise ops (besides add
 * and multiply, declared in prims.h). Internal.
 *
 * Their kernels take inputs of one shape (the op constructors insert
 * broadcast views) and one compute dtype (the constructors insert casts):
 *  - arithmetic (subtract ... arctan2): the output has the input dtype;
 *    subtract rejects bool, divide / logaddexp / arctan2 take float types;
 *  - comparisons: any dtype in, bool out;
 *  - logical_and / logical_or: bool in, bool out;
 *  - bitwise_and / _or / _xor, left_shift, right_shift: bool or integers,
 *    the input dtype out;
 *  - where: (bool cond, a, b), a and b of the output dtype;
 *  - clip: (a, low, high), all of the output dtype.
 * None has parameters.
 */
#ifndef WEFT_PRIM_BINARY_H
#define WEFT_PRIM_BINARY_H

#include "core/array.h"

extern const wf_prim_def wf__prim_subtract;
extern const wf_prim_def wf__prim_divide;
extern const wf_prim_def wf__prim_power;
extern const wf_prim_def wf__prim_maximum;
extern const wf_prim_def wf__prim_minimum;
extern const wf_prim_def wf__prim_floor_divide;
extern const wf_prim_def wf__prim_remainder;
extern const wf_prim_def wf__prim_equal;
extern const wf_prim_def wf__prim_not_equal;
extern const wf_prim_def wf__prim_less;
extern const wf_prim_def wf__prim_less_equal;
extern const wf_prim_def wf__prim_greater;
extern const wf_prim_def wf__prim_greater_equal;
extern const wf_prim_def wf__prim_logical_and;
extern const wf_prim_def wf__prim_logical_or;
extern const wf_prim_def wf__prim_logaddexp;
extern const wf_prim_def wf__prim_arctan2;
extern const wf_prim_def wf__prim_bitwise_and;
extern const wf_prim_def wf__prim_bitwise_or;
extern const wf_prim_def wf__prim_bitwise_xor;
extern const wf_prim_def wf__prim_left_shift;
extern const wf_prim_def wf__prim_right_shift;
/* complex64 parts: complex (float32 re, float32 im -> complex64), real and
 * imag (complex64 -> float32), conjugate (complex64 -> complex64). */
extern const wf_prim_def wf__prim_complex;
extern const wf_prim_def wf__prim_real;
extern const wf_prim_def wf__prim_imag;
extern const wf_prim_def wf__prim_conjugate;
extern const wf_prim_def wf__prim_where;
extern const wf_prim_def wf__prim_clip;

#endif
