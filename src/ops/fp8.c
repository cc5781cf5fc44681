/* fp8 e4m3 conversions (wf_to_fp8, wf_from_fp8) with MLX's semantics.
 *
 * e4m3 here: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits, no
 * infinities; all 256 codes are finite (0x7f and 0xff read as +-480, as in
 * MLX). Encoding rounds |x| (as float32) to nearest, ties to even: below
 * 2^-6 to a multiple of 2^-9 (the subnormal codes 0..8), else to 3 mantissa
 * bits; |x| >= 464 (halfway between 448 and 480), infinities and NaN
 * saturate to the code of 448 (0x7e) with x's sign.
 *
 * Both are compositions of element-wise integer and float ops (no kernel of
 * their own), so vmap, compile and every ISA variant come with them; their
 * results are integers or exact, so gradients are zero as in MLX. */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"

enum { FP8_TEMPS = 48 }; /* more than either conversion makes */

/* The intermediate arrays of one conversion, released together; a step
 * after a failed one is skipped (its inputs are NULL) so the first error is
 * the one reported. */
typedef struct temps {
    wf_array *list[FP8_TEMPS];
    int count;
    bool failed;
} temps;

static wf_array *keep(temps *t, wf_array *a)
{
    if (a != NULL && t->count == FP8_TEMPS) { /* cannot happen: FP8_TEMPS is fixed above need */
        wf__array_release(a);
        wf__error(WF_ERR_INTERNAL, "fp8: too many intermediate arrays");
        a = NULL;
    }
    if (a == NULL)
        t->failed = true;
    else
        t->list[t->count++] = a;
    return a;
}

static void release_all(temps *t)
{
    for (int i = 0; i < t->count; i++)
        wf__array_release(t->list[i]);
}

static wf_array *u32(temps *t, double v) { return keep(t, wf__op_full(NULL, 0, v, WF_DTYPE_U32)); }

typedef wf_array *(*binary_fn)(wf_array *, wf_array *);

static wf_array *bin(temps *t, binary_fn f, wf_array *a, wf_array *b)
{
    return t->failed ? NULL : keep(t, f(a, b));
}

static wf_array *un(temps *t, wf_array *(*f)(wf_array *), wf_array *a)
{
    return t->failed ? NULL : keep(t, f(a));
}

static wf_array *cast(temps *t, wf_array *a, wf_dtype d)
{
    return t->failed ? NULL : keep(t, wf__op_astype(a, d));
}

static wf_array *view(temps *t, wf_array *a, wf_dtype d)
{
    return t->failed ? NULL : keep(t, wf__op_view(a, d));
}

static wf_array *select3(temps *t, wf_array *c, wf_array *a, wf_array *b)
{
    return t->failed ? NULL : keep(t, wf__op_where(c, a, b));
}

wf_array *wf__op_to_fp8(wf_array *a)
{
    if (!wf__array_check(a, "wf_to_fp8", "a"))
        return NULL;
    if (!wf__dtype_is_float(a->dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_to_fp8: input dtype %s is not a real float type",
                  wf_dtype_name(a->dtype));
        return NULL;
    }
    temps t = {.count = 0, .failed = false};
    wf_array *bits = view(&t, cast(&t, a, WF_DTYPE_F32), WF_DTYPE_U32);
    wf_array *sign = bin(&t, wf__op_bitwise_and, bits, u32(&t, 0x80000000u));
    wf_array *mag = bin(&t, wf__op_bitwise_xor, bits, sign); /* |x| as bits */
    /* below 2^-6: round(|x| * 512), the subnormal code (exact scaling) */
    wf_array *scaled = bin(&t, wf__op_multiply, view(&t, mag, WF_DTYPE_F32),
                           keep(&t, wf__op_full(NULL, 0, 512.0, WF_DTYPE_F32)));
    wf_array *low = cast(&t, un(&t, wf__op_round, scaled), WF_DTYPE_U32);
    /* else: rebias the exponent (-120 << 23, wrapping), round the mantissa
     * to 3 bits to nearest even (add 0x7ffff plus the lowest kept bit) */
    wf_array *odd = bin(&t, wf__op_bitwise_and, bin(&t, wf__op_right_shift, mag, u32(&t, 20)),
                        u32(&t, 1));
    wf_array *biased = bin(&t, wf__op_add, mag, u32(&t, 0xC4000000u + 0x7FFFFu));
    wf_array *high = bin(&t, wf__op_right_shift, bin(&t, wf__op_add, biased, odd), u32(&t, 20));
    wf_array *is_low = bin(&t, wf__op_less, mag, u32(&t, 121u << 23));
    wf_array *saturated = bin(&t, wf__op_greater_equal, mag, u32(&t, 543u << 21));
    wf_array *code = select3(&t, saturated, u32(&t, 0x7E),
                             select3(&t, is_low, low, high));
    wf_array *sign8 = bin(&t, wf__op_right_shift, sign, u32(&t, 24));
    wf_array *out = cast(&t, bin(&t, wf__op_bitwise_or, code, sign8), WF_DTYPE_U8);
    if (out)
        wf__array_incref(out);
    release_all(&t);
    return out;
}

wf_array *wf__op_from_fp8(wf_array *a, wf_dtype dtype)
{
    if (!wf__array_check(a, "wf_from_fp8", "a"))
        return NULL;
    if (a->dtype != WF_DTYPE_U8) {
        wf__error(WF_ERR_DTYPE, "wf_from_fp8: input dtype %s is not uint8",
                  wf_dtype_name(a->dtype));
        return NULL;
    }
    if (!wf__dtype_valid(dtype) || !wf__dtype_is_float(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_from_fp8: dtype %s is not a real float type",
                  wf_dtype_name(dtype));
        return NULL;
    }
    temps t = {.count = 0, .failed = false};
    wf_array *c = cast(&t, a, WF_DTYPE_U32);
    wf_array *e = bin(&t, wf__op_bitwise_and, bin(&t, wf__op_right_shift, c, u32(&t, 3)),
                      u32(&t, 15));
    wf_array *m = bin(&t, wf__op_bitwise_and, c, u32(&t, 7));
    /* normal: 2^(e - 7) (1 + m/8) as float32 bits; subnormal (e = 0): m 2^-9 */
    wf_array *normal_bits = bin(&t, wf__op_bitwise_or,
                                bin(&t, wf__op_left_shift, bin(&t, wf__op_add, e, u32(&t, 120)),
                                    u32(&t, 23)),
                                bin(&t, wf__op_left_shift, m, u32(&t, 20)));
    wf_array *sub = bin(&t, wf__op_multiply, cast(&t, m, WF_DTYPE_F32),
                        keep(&t, wf__op_full(NULL, 0, 0x1p-9, WF_DTYPE_F32)));
    wf_array *value = select3(&t, bin(&t, wf__op_equal, e, u32(&t, 0)), sub,
                              view(&t, normal_bits, WF_DTYPE_F32));
    wf_array *negative = bin(&t, wf__op_greater_equal, c, u32(&t, 128));
    wf_array *signed_value = select3(&t, negative, un(&t, wf__op_negative, value), value);
    wf_array *out = cast(&t, signed_value, dtype);
    if (out)
        wf__array_incref(out);
    release_all(&t);
    return out;
}

wf_array *wf_to_fp8(wf_array *a) { return wf__array_publish(wf__op_to_fp8(a)); }
wf_array *wf_from_fp8(wf_array *a, wf_dtype dtype)
{
    return wf__array_publish(wf__op_from_fp8(a, dtype));
}
