/*
 * Binary and ternary element-wise ops through the public API against plain
 * references computed here with loops over doubles: every op over every
 * dtype, promotion between dtypes, broadcasting, non-contiguous inputs,
 * 0-d and empty arrays, NaN / inf and the integer edge cases (division by
 * zero, the minimum divided by -1, wraparound, negative exponents), long
 * arrays (parallel and blocked half paths); the half <-> float32 converters
 * against the reference ones; and every op's bad inputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/binary.h"
#include "backend/cpu/vmath.h"
#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"

/* ---------------------------------------------------------------- ops and references */

enum op_id {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAX, OP_MIN, OP_FLOORDIV, OP_REM,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_LAND, OP_LOR, OP_LOGADDEXP, OP_ATAN2,
    OP_BAND, OP_BOR, OP_BXOR, OP_SHL, OP_SHR,
    OP_COUNT
};

/* How an op picks its compute dtype and its output dtype. */
enum kind {
    K_SAME,    /* promoted dtype in and out */
    K_NO_BOOL, /* the same, bool rejected */
    K_FLOAT,   /* promoted dtype if float, else float32 */
    K_CMP,     /* promoted dtype in, bool out */
    K_LOGICAL, /* bool in, bool out */
    K_INTEGER  /* promoted dtype in and out, bool or an integer only */
};

typedef wf_array *(*binary_fn)(wf_array *, wf_array *);

static const struct op_case {
    const char *name;
    binary_fn fn;
    enum kind kind;
} ops[OP_COUNT] = {
    [OP_ADD] = {"wf_add", wf_add, K_SAME},
    [OP_SUB] = {"wf_subtract", wf_subtract, K_NO_BOOL},
    [OP_MUL] = {"wf_multiply", wf_multiply, K_SAME},
    [OP_DIV] = {"wf_divide", wf_divide, K_FLOAT},
    [OP_POW] = {"wf_power", wf_power, K_SAME},
    [OP_MAX] = {"wf_maximum", wf_maximum, K_SAME},
    [OP_MIN] = {"wf_minimum", wf_minimum, K_SAME},
    [OP_FLOORDIV] = {"wf_floor_divide", wf_floor_divide, K_SAME},
    [OP_REM] = {"wf_remainder", wf_remainder, K_SAME},
    [OP_EQ] = {"wf_equal", wf_equal, K_CMP},
    [OP_NE] = {"wf_not_equal", wf_not_equal, K_CMP},
    [OP_LT] = {"wf_less", wf_less, K_CMP},
    [OP_LE] = {"wf_less_equal", wf_less_equal, K_CMP},
    [OP_GT] = {"wf_greater", wf_greater, K_CMP},
    [OP_GE] = {"wf_greater_equal", wf_greater_equal, K_CMP},
    [OP_LAND] = {"wf_logical_and", wf_logical_and, K_LOGICAL},
    [OP_LOR] = {"wf_logical_or", wf_logical_or, K_LOGICAL},
    [OP_LOGADDEXP] = {"wf_logaddexp", wf_logaddexp, K_FLOAT},
    [OP_ATAN2] = {"wf_arctan2", wf_arctan2, K_FLOAT},
    [OP_BAND] = {"wf_bitwise_and", wf_bitwise_and, K_INTEGER},
    [OP_BOR] = {"wf_bitwise_or", wf_bitwise_or, K_INTEGER},
    [OP_BXOR] = {"wf_bitwise_xor", wf_bitwise_xor, K_INTEGER},
    [OP_SHL] = {"wf_left_shift", wf_left_shift, K_INTEGER},
    [OP_SHR] = {"wf_right_shift", wf_right_shift, K_INTEGER},
};

static bool is_float(wf_dtype d) { return wf__dtype_is_float(d); }

static wf_dtype compute_dtype(enum op_id op, wf_dtype a, wf_dtype b)
{
    wf_dtype d = wf_promote_types(a, b);
    switch (ops[op].kind) {
    case K_FLOAT: return is_float(d) ? d : WF_DTYPE_F32;
    case K_LOGICAL: return WF_DTYPE_BOOL;
    default: return d;
    }
}

static wf_dtype output_dtype(enum op_id op, wf_dtype compute)
{
    return ops[op].kind == K_CMP || ops[op].kind == K_LOGICAL ? WF_DTYPE_BOOL : compute;
}

static bool is_int(wf_dtype d) { return wf__dtype_is_integer(d); }
static bool is_unsigned(wf_dtype d) { return wf__dtype_is_unsigned_int(d); }

/* Wraps an exact integer result (within int64) into `d`: its low bits, read
 * as two's complement for signed types. */
static double wrap_to(double v, wf_dtype d)
{
    if (d == WF_DTYPE_BOOL)
        return v != 0;
    if (!is_int(d))
        return v;
    const int bits = 8 * (int)wf_dtype_size(d);
    uint64_t u = (uint64_t)(int64_t)v;
    if (bits < 64)
        u &= (UINT64_C(1) << bits) - 1;
    if (is_unsigned(d))
        return (double)u;
    if (bits == 64)
        return (double)(int64_t)u;
    return (u >> (bits - 1)) ? (double)u - ldexp(1, bits) : (double)u;
}

/* x << y and x >> y as NumPy defines them (see wf_left_shift). */
static double ref_shift(bool left, double x, double y, wf_dtype d)
{
    if (d == WF_DTYPE_BOOL)
        return left ? x != 0 : (x != 0 && y == 0);
    const int bits = 8 * (int)wf_dtype_size(d);
    if (y < 0 || y >= bits)
        return left ? 0 : (x < 0 ? -1 : 0);
    if (left) /* the low bits of x * 2^y */
        return wrap_to((double)(int64_t)((uint64_t)(int64_t)x << (int)y), d);
    return floor(x / ldexp(1, (int)y));
}

/* x & y, x | y, x ^ y on the two's complement bits. */
static double ref_bitwise(enum op_id op, double x, double y, wf_dtype d)
{
    const int64_t a = (int64_t)x, b = (int64_t)y;
    const int64_t r = op == OP_BAND ? (a & b) : op == OP_BOR ? (a | b) : (a ^ b);
    return d == WF_DTYPE_BOOL ? r != 0 : wrap_to((double)r, d);
}

/* The reference: x and y are already values of the compute dtype `d`. */
static double ref_op(enum op_id op, double x, double y, wf_dtype d)
{
    const bool f = is_float(d), b = d == WF_DTYPE_BOOL;
    switch (op) {
    case OP_ADD: return b ? (x != 0 || y != 0) : f ? x + y : wrap_to(x + y, d);
    case OP_SUB: return f ? x - y : wrap_to(x - y, d);
    case OP_MUL: return b ? (x != 0 && y != 0) : f ? x * y : wrap_to(x * y, d);
    case OP_DIV: return x / y;
    case OP_POW:
        if (f)
            return pow(x, y);
        if (b)
            return x != 0 || y == 0;
        if (y < 0) /* MLX's rule: 0 for every base */
            return 0;
        {
            double r = 1;
            for (int i = 0; i < (int)y; i++)
                r *= x;
            return wrap_to(r, d);
        }
    case OP_MAX:
        if (isnan(x) || isnan(y))
            return NAN;
        return x > y ? x : y;
    case OP_MIN:
        if (isnan(x) || isnan(y))
            return NAN;
        return x < y ? x : y;
    case OP_FLOORDIV:
        if (b)
            return x != 0 && y != 0;
        if (y == 0)
            return f ? x / y : 0;
        return floor(x / y);
    case OP_REM: {
        if (b)
            return 0;
        if (y == 0)
            return f ? NAN : 0;
        if (!f)
            return x - y * floor(x / y);
        double m = fmod(x, y);
        if (m != 0 && (m < 0) != (y < 0))
            m += y;
        return m == 0 ? copysign(0, y) : m;
    }
    case OP_EQ: return x == y;
    case OP_NE: return x != y;
    case OP_LT: return x < y;
    case OP_LE: return x <= y;
    case OP_GT: return x > y;
    case OP_GE: return x >= y;
    case OP_LAND: return x != 0 && y != 0;
    case OP_LOR: return x != 0 || y != 0;
    case OP_LOGADDEXP: return log(exp(x) + exp(y));
    case OP_ATAN2: return atan2(x, y);
    case OP_BAND:
    case OP_BOR:
    case OP_BXOR: return ref_bitwise(op, x, y, d);
    case OP_SHL: return ref_shift(true, x, y, d);
    case OP_SHR: return ref_shift(false, x, y, d);
    default: return NAN;
    }
}

/* Input values for op (which = 0: left, 1: right) in `dtype`: integers for
 * integer dtypes (including zeros, and negative ones for signed types),
 * fractional values for floats, ranges kept where every op is defined. */
static double *gen_values(enum op_id op, int which, wf_dtype dtype, int64_t n, uint32_t seed)
{
    double lo = -4, hi = 4;
    if (op == OP_POW) {
        if (is_float(dtype)) {
            lo = which ? -3 : 0.25;
            hi = 3;
        } else {
            lo = which ? -2 : -4;
            hi = which ? 6.99 : 4.99;
        }
    } else if (!is_float(dtype)) {
        lo = -12;
        hi = 12.99;
        if ((op == OP_SHL || op == OP_SHR) && which) /* past the width of int8 too */
            lo = -2;
    }
    if (is_unsigned(dtype)) {
        lo = 0;
        if (op == OP_POW)
            hi = which ? 4.99 : 4.99;
    }
    double *v = conf_values(n, lo, hi, seed);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == WF_DTYPE_BOOL)
            v[i] = (double)((int64_t)floor(v[i] * 7) & 1);
        else if (!is_float(dtype))
            v[i] = floor(v[i]);
    }
    return v;
}

/* Expected result of op over a (shape sa) and b (shape sb) broadcast to
 * shape so; values given row-major in their own dtypes. */
static double *expected(enum op_id op, const double *va, wf_dtype da, const int64_t *sa,
                        int na, const double *vb, wf_dtype db, const int64_t *sb, int nb,
                        const int64_t *so, int no)
{
    const wf_dtype cd = compute_dtype(op, da, db), od = output_dtype(op, cd);
    int64_t n = conf_size(so, no);
    double *w = malloc(((size_t)n + 1) * sizeof *w);
    for (int64_t i = 0; i < n; i++) {
        /* Unravel i over so and map into a and b (size-1 dims broadcast). */
        int64_t ia = 0, ib = 0, stride_a = 1, stride_b = 1, r = i;
        for (int d = no - 1; d >= 0; d--) {
            int64_t idx = r % so[d];
            r /= so[d];
            int dA = d - (no - na), dB = d - (no - nb);
            if (dA >= 0) {
                if (sa[dA] != 1)
                    ia += idx * stride_a;
                stride_a *= sa[dA];
            }
            if (dB >= 0) {
                if (sb[dB] != 1)
                    ib += idx * stride_b;
                stride_b *= sb[dB];
            }
        }
        double x = conf_round_to(conf_round_to(va[ia], da), cd);
        double y = conf_round_to(conf_round_to(vb[ib], db), cd);
        w[i] = conf_round_to(ref_op(op, x, y, cd), od);
    }
    return w;
}

static double tol_for(enum op_id op, wf_dtype od)
{
    double t = conf_tolerance(od);
    /* libm float32 results (powf, atan2f, log1pf) within a few ulp. */
    if (od == WF_DTYPE_F32 && (op == OP_POW || op == OP_LOGADDEXP || op == OP_ATAN2))
        t = 1e-5;
    return t;
}

/* Runs op on arrays built from va / vb (strided views when asked) and
 * checks against the reference. */
static void check_op(enum op_id op, const double *va, wf_dtype da, const int64_t *sa, int na,
                     bool strided_a, const double *vb, wf_dtype db, const int64_t *sb, int nb,
                     bool strided_b)
{
    int64_t so[WF_MAX_NDIM];
    int no = na > nb ? na : nb;
    for (int d = 0; d < no; d++) {
        int64_t x = d - (no - na) >= 0 ? sa[d - (no - na)] : 1;
        int64_t y = d - (no - nb) >= 0 ? sb[d - (no - nb)] : 1;
        so[d] = x == 1 ? y : x;
    }
    wf_array *a = strided_a ? conf_strided(va, sa, na, da) : conf_array(va, sa, na, da);
    wf_array *b = strided_b ? conf_strided(vb, sb, nb, db) : conf_array(vb, sb, nb, db);
    const wf_dtype od = output_dtype(op, compute_dtype(op, da, db));
    double *w = expected(op, va, da, sa, na, vb, db, sb, nb, so, no);
    if (!conf_check(ops[op].fn(a, b), od, so, no, w, tol_for(op, od)))
        printf("    (%s: %s x %s%s%s)\n", ops[op].name, wf_dtype_name(da), wf_dtype_name(db),
               strided_a ? ", a strided" : "", strided_b ? ", b strided" : "");
    free(w);
    wf_release(a);
    wf_release(b);
}

/* complex64 has no element-wise kernels yet: test_errors checks its error. */
static bool op_accepts(enum op_id op, wf_dtype a, wf_dtype b)
{
    const wf_dtype p = wf_promote_types(a, b);
    if (p == WF_DTYPE_C64)
        return false;
    if (ops[op].kind == K_INTEGER)
        return p == WF_DTYPE_BOOL || is_int(p);
    return !(ops[op].kind == K_NO_BOOL && p == WF_DTYPE_BOOL);
}

/* ---------------------------------------------------------------- every op, every dtype */

static void test_every_op_every_dtype(void)
{
    const int64_t s34[2] = {3, 4}, s4[1] = {4}, s31[2] = {3, 1}, s14[2] = {1, 4};
    wf_scope_begin();
    for (int op = 0; op < OP_COUNT; op++) {
        for (int d = 0; d < WF_DTYPE_COUNT; d++) {
            const wf_dtype dt = (wf_dtype)d;
            if (!op_accepts((enum op_id)op, dt, dt))
                continue;
            double *va = gen_values((enum op_id)op, 0, dt, 12, 11u + (uint32_t)op);
            double *vb = gen_values((enum op_id)op, 1, dt, 12, 97u + (uint32_t)op);
            /* same shape, contiguous and strided */
            check_op((enum op_id)op, va, dt, s34, 2, false, vb, dt, s34, 2, false);
            check_op((enum op_id)op, va, dt, s34, 2, true, vb, dt, s34, 2, true);
            /* a row broadcast on either side, a column against a row */
            check_op((enum op_id)op, va, dt, s34, 2, false, vb, dt, s4, 1, false);
            check_op((enum op_id)op, vb, dt, s4, 1, true, va, dt, s34, 2, true);
            check_op((enum op_id)op, va, dt, s31, 2, false, vb, dt, s14, 2, false);
            /* 0-d with an array, 0-d with 0-d */
            check_op((enum op_id)op, va, dt, NULL, 0, false, vb, dt, s34, 2, true);
            check_op((enum op_id)op, va, dt, s34, 2, true, vb, dt, NULL, 0, false);
            check_op((enum op_id)op, va, dt, NULL, 0, true, vb, dt, NULL, 0, false);
            free(va);
            free(vb);
        }
    }
    wf_scope_end();
}

static void test_empty(void)
{
    const int64_t s04[2] = {0, 4}, s4[1] = {4}, s0[1] = {0};
    const double v[4] = {1, 2, 3, 4};
    wf_scope_begin();
    for (int op = 0; op < OP_COUNT; op++) {
        for (int d = 0; d < WF_DTYPE_COUNT; d++) {
            if (!op_accepts((enum op_id)op, (wf_dtype)d, (wf_dtype)d))
                continue;
            check_op((enum op_id)op, v, (wf_dtype)d, s04, 2, false, v, (wf_dtype)d, s4, 1,
                     false);
            check_op((enum op_id)op, v, (wf_dtype)d, NULL, 0, false, v, (wf_dtype)d, s0, 1,
                     false);
        }
    }
    wf_scope_end();
}

/* ---------------------------------------------------------------- promotion */

static void test_promotion(void)
{
    const int64_t s23[2] = {2, 3}, s3[1] = {3};
    const enum op_id some[] = {OP_ADD, OP_SUB,  OP_MUL, OP_DIV,  OP_MAX,       OP_FLOORDIV,
                               OP_REM, OP_LT,   OP_NE,  OP_LAND, OP_LOGADDEXP, OP_BXOR,
                               OP_SHL};
    wf_scope_begin();
    for (size_t k = 0; k < sizeof some / sizeof some[0]; k++) {
        for (int da = 0; da < WF_DTYPE_COUNT; da++) {
            for (int db = 0; db < WF_DTYPE_COUNT; db++) {
                if (da == db || !op_accepts(some[k], (wf_dtype)da, (wf_dtype)db))
                    continue;
                /* Values every dtype holds (small non-negative integers on the
                 * right so nothing divides by zero except where intended). */
                const double va[6] = {0, 1, 2, 3, 4, 5};
                const double vb[3] = {1, 2, 3};
                const double vbool[3] = {1, 0, 1}, vabool[6] = {1, 0, 1, 1, 0, 0};
                check_op(some[k], da == WF_DTYPE_BOOL ? vabool : va, (wf_dtype)da, s23, 2,
                         false, db == WF_DTYPE_BOOL ? vbool : vb, (wf_dtype)db, s3, 1, false);
            }
        }
    }
    /* A few results by name: integer true division gives float32, f16 with
     * bf16 gives float32, an integer with a half gives the half. */
    wf_array *i = wf_scalar(7, WF_DTYPE_I32), *j = wf_scalar(2, WF_DTYPE_I64);
    wf_array *h = wf_scalar(1.5, WF_DTYPE_F16), *g = wf_scalar(0.5, WF_DTYPE_BF16);
    double w = 3.5;
    conf_check(wf_divide(i, j), WF_DTYPE_F32, NULL, 0, &w, 0);
    w = 2;
    conf_check(wf_add(h, g), WF_DTYPE_F32, NULL, 0, &w, 0);
    w = 8.5;
    conf_check(wf_add(i, h), WF_DTYPE_F16, NULL, 0, &w, 0);
    w = 3;
    conf_check(wf_floor_divide(i, j), WF_DTYPE_I64, NULL, 0, &w, 0);
    wf_scope_end();
}

/* ---------------------------------------------------------------- edge cases */

static void check_scalar_op(binary_fn fn, double x, wf_dtype dx, double y, wf_dtype dy,
                            wf_dtype want_dtype, double want, const char *what)
{
    wf_array *a = wf_scalar(x, dx), *b = wf_scalar(y, dy);
    if (!conf_check(fn(a, b), want_dtype, NULL, 0, &want, conf_tolerance(want_dtype)))
        printf("    (%s(%g, %g) in %s)\n", what, x, y, wf_dtype_name(dx));
    wf_release(a);
    wf_release(b);
}

/* Integer results that need exact 64-bit values: built from data. */
static void check_i64(binary_fn fn, int64_t x, int64_t y, int64_t want, const char *what)
{
    wf_array *a = wf_array_from_data(&x, NULL, 0, WF_DTYPE_I64);
    wf_array *b = wf_array_from_data(&y, NULL, 0, WF_DTYPE_I64);
    wf_array *r = fn(a, b);
    int64_t got = 0;
    if (CHECK_NOT_NULL(r) && CHECK_OK(wf_array_copy_to(r, &got, sizeof got)) &&
        !CHECK_EQ_INT(got, want))
        printf("    (%s(%lld, %lld))\n", what, (long long)x, (long long)y);
    wf_release(r);
    wf_release(a);
    wf_release(b);
}

static void check_i32(binary_fn fn, int32_t x, int32_t y, int32_t want, const char *what)
{
    wf_array *a = wf_array_from_data(&x, NULL, 0, WF_DTYPE_I32);
    wf_array *b = wf_array_from_data(&y, NULL, 0, WF_DTYPE_I32);
    wf_array *r = fn(a, b);
    int32_t got = 0;
    if (CHECK_NOT_NULL(r) && CHECK_OK(wf_array_copy_to(r, &got, sizeof got)) &&
        !CHECK_EQ_INT(got, want))
        printf("    (%s(%d, %d))\n", what, x, y);
    wf_release(r);
    wf_release(a);
    wf_release(b);
}

static void test_integer_edges(void)
{
    const wf_dtype I32 = WF_DTYPE_I32, U8 = WF_DTYPE_U8;
    /* Python floor division and remainder: the divisor's sign. */
    const int32_t fd[][4] = {{7, 2, 3, 1},   {-7, 2, -4, 1}, {7, -2, -4, -1},
                             {-7, -2, 3, -1}, {6, -3, -2, 0}, {0, -5, 0, 0},
                             {5, 0, 0, 0},    {-5, 0, 0, 0}};
    for (size_t k = 0; k < sizeof fd / sizeof fd[0]; k++) {
        check_i32(wf_floor_divide, fd[k][0], fd[k][1], fd[k][2], "floor_divide");
        check_i32(wf_remainder, fd[k][0], fd[k][1], fd[k][3], "remainder");
        check_i64(wf_floor_divide, fd[k][0], fd[k][1], fd[k][2], "floor_divide");
        check_i64(wf_remainder, fd[k][0], fd[k][1], fd[k][3], "remainder");
    }
    /* The minimum divided by -1 wraps (no trap); remainder 0. */
    check_i32(wf_floor_divide, INT32_MIN, -1, INT32_MIN, "floor_divide");
    check_i32(wf_remainder, INT32_MIN, -1, 0, "remainder");
    check_i64(wf_floor_divide, INT64_MIN, -1, INT64_MIN, "floor_divide");
    check_i64(wf_remainder, INT64_MIN, -1, 0, "remainder");
    check_i64(wf_floor_divide, INT64_MIN, 0, 0, "floor_divide");
    /* Wraparound. */
    check_i32(wf_subtract, INT32_MIN, 1, INT32_MAX, "subtract");
    check_i32(wf_multiply, INT32_MAX, 2, -2, "multiply");
    check_i64(wf_subtract, INT64_MIN, 1, INT64_MAX, "subtract");
    check_i64(wf_add, INT64_MAX, 1, INT64_MIN, "add");
    check_scalar_op(wf_subtract, 0, U8, 1, U8, U8, 255, "subtract");
    check_scalar_op(wf_floor_divide, 200, U8, 0, U8, U8, 0, "floor_divide");
    check_scalar_op(wf_remainder, 200, U8, 7, U8, U8, 4, "remainder");
    /* Integer power: repeated squaring, wraps; a negative exponent gives 0
     * for every base (MLX's rule), bases 1 and -1 included. */
    check_i64(wf_power, 3, 39, 4052555153018976267LL, "power");
    check_i64(wf_power, 2, 64, 0, "power");
    check_i64(wf_power, -2, 63, INT64_MIN, "power");
    check_i32(wf_power, 2, 31, INT32_MIN, "power");
    check_i32(wf_power, 7, 0, 1, "power");
    check_i32(wf_power, 0, 0, 1, "power");
    check_i32(wf_power, 2, -1, 0, "power");
    check_i32(wf_power, 0, -3, 0, "power");
    check_i32(wf_power, 1, -7, 0, "power");
    check_i32(wf_power, -1, -7, 0, "power");
    check_i32(wf_power, -1, -8, 0, "power");
    check_i64(wf_power, -1, INT64_MIN, 0, "power");
    check_scalar_op(wf_power, 3, U8, 5, U8, U8, 243, "power");
    check_scalar_op(wf_power, 2, U8, 9, U8, U8, 0, "power");
    check_scalar_op(wf_maximum, -3, I32, 2, I32, I32, 2, "maximum");
    check_scalar_op(wf_minimum, -3, I32, 2, I32, I32, -3, "minimum");
    /* i64 comparisons beyond float precision. */
    int64_t big = (1LL << 53) + 1, big2 = 1LL << 53;
    wf_array *a = wf_array_from_data(&big, NULL, 0, WF_DTYPE_I64);
    wf_array *b = wf_array_from_data(&big2, NULL, 0, WF_DTYPE_I64);
    double w = 1;
    conf_check(wf_greater(a, b), WF_DTYPE_BOOL, NULL, 0, &w, 0);
    w = 0;
    conf_check(wf_equal(a, b), WF_DTYPE_BOOL, NULL, 0, &w, 0);
    wf_release(a);
    wf_release(b);
}

static void test_float_specials(void)
{
    const double inf = INFINITY, nan = NAN;
    const wf_dtype fl[4] = {WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64};
    for (int k = 0; k < 4; k++) {
        const wf_dtype d = fl[k];
        /* floor_divide / remainder: Python semantics, IEEE division by 0. */
        check_scalar_op(wf_floor_divide, 7, d, -2, d, d, -4, "floor_divide");
        check_scalar_op(wf_floor_divide, -7, d, 2, d, d, -4, "floor_divide");
        check_scalar_op(wf_floor_divide, 1, d, 0, d, d, inf, "floor_divide");
        check_scalar_op(wf_floor_divide, -1, d, 0, d, d, -inf, "floor_divide");
        check_scalar_op(wf_floor_divide, 0, d, 0, d, d, nan, "floor_divide");
        check_scalar_op(wf_floor_divide, inf, d, 1, d, d, nan, "floor_divide");
        check_scalar_op(wf_floor_divide, -1, d, inf, d, d, -1, "floor_divide");
        check_scalar_op(wf_remainder, -7, d, 2, d, d, 1, "remainder");
        check_scalar_op(wf_remainder, 7, d, -2, d, d, -1, "remainder");
        check_scalar_op(wf_remainder, 5.5, d, -2, d, d, -0.5, "remainder");
        check_scalar_op(wf_remainder, 1, d, 0, d, d, nan, "remainder");
        check_scalar_op(wf_remainder, inf, d, 2, d, d, nan, "remainder");
        check_scalar_op(wf_remainder, -1, d, inf, d, d, inf, "remainder");
        check_scalar_op(wf_remainder, 3, d, inf, d, d, 3, "remainder");
        /* maximum / minimum propagate NaN from either side. */
        check_scalar_op(wf_maximum, nan, d, 1, d, d, nan, "maximum");
        check_scalar_op(wf_maximum, 1, d, nan, d, d, nan, "maximum");
        check_scalar_op(wf_minimum, nan, d, 1, d, d, nan, "minimum");
        check_scalar_op(wf_minimum, 1, d, nan, d, d, nan, "minimum");
        check_scalar_op(wf_maximum, -inf, d, 3, d, d, 3, "maximum");
        /* logaddexp: stable and exact at infinities. */
        check_scalar_op(wf_logaddexp, -inf, d, -inf, d, d, -inf, "logaddexp");
        check_scalar_op(wf_logaddexp, inf, d, inf, d, d, inf, "logaddexp");
        check_scalar_op(wf_logaddexp, -inf, d, 2, d, d, 2, "logaddexp");
        check_scalar_op(wf_logaddexp, inf, d, -inf, d, d, inf, "logaddexp");
        check_scalar_op(wf_logaddexp, nan, d, 1, d, d, nan, "logaddexp");
        check_scalar_op(wf_logaddexp, 1, d, nan, d, d, nan, "logaddexp");
        /* arctan2 quadrants and zeros. */
        check_scalar_op(wf_arctan2, 1, d, -1, d, d, conf_round_to(3 * M_PI / 4, d), "arctan2");
        check_scalar_op(wf_arctan2, 0, d, -1, d, d, conf_round_to(M_PI, d), "arctan2");
        check_scalar_op(wf_arctan2, -1, d, 0, d, d, conf_round_to(-M_PI / 2, d), "arctan2");
        /* Comparisons with NaN. */
        check_scalar_op(wf_equal, nan, d, nan, d, WF_DTYPE_BOOL, 0, "equal");
        check_scalar_op(wf_not_equal, nan, d, nan, d, WF_DTYPE_BOOL, 1, "not_equal");
        check_scalar_op(wf_less_equal, nan, d, 1, d, WF_DTYPE_BOOL, 0, "less_equal");
        check_scalar_op(wf_greater, inf, d, 1, d, WF_DTYPE_BOOL, 1, "greater");
        check_scalar_op(wf_logical_and, nan, d, 1, d, WF_DTYPE_BOOL, 1, "logical_and");
        check_scalar_op(wf_logical_or, 0, d, -0.0, d, WF_DTYPE_BOOL, 0, "logical_or");
        /* Power. */
        check_scalar_op(wf_power, -2, d, 3, d, d, -8, "power");
        check_scalar_op(wf_power, 0, d, -1, d, d, inf, "power");
        check_scalar_op(wf_divide, 1, d, 0, d, d, inf, "divide");
        check_scalar_op(wf_divide, 0, d, 0, d, d, nan, "divide");
    }
    /* Python: 1.0 // 0.1 == 9.0 and 1.0 % 0.1 == 0.09999999999999995. */
    check_scalar_op(wf_floor_divide, 1, WF_DTYPE_F64, 0.1, WF_DTYPE_F64, WF_DTYPE_F64, 9,
                    "floor_divide");
    check_scalar_op(wf_remainder, 1, WF_DTYPE_F64, 0.1, WF_DTYPE_F64, WF_DTYPE_F64,
                    0.09999999999999995, "remainder");
    /* Large logaddexp arguments do not overflow. */
    check_scalar_op(wf_logaddexp, 1000, WF_DTYPE_F64, 1000, WF_DTYPE_F64, WF_DTYPE_F64,
                    1000 + log(2), "logaddexp");
    check_scalar_op(wf_logaddexp, 100, WF_DTYPE_F32, 99, WF_DTYPE_F32, WF_DTYPE_F32,
                    (double)(100.0f + log1pf(expf(-1))), "logaddexp");
    /* Half results round once: 2049 + 0 is not representable in f16. */
    check_scalar_op(wf_add, 2048, WF_DTYPE_F16, 1, WF_DTYPE_F16, WF_DTYPE_F16, 2048, "add");
    check_scalar_op(wf_add, 60000, WF_DTYPE_F16, 10000, WF_DTYPE_F16, WF_DTYPE_F16, inf,
                    "add");
}

/* ---------------------------------------------------------------- long arrays */

/* Long rows exercise the parallel walk and the blocked half paths (tails,
 * broadcast and strided blocks). */
static void test_long_arrays(void)
{
    const int64_t rows = 37, cols = 2051, n = rows * cols;
    const int64_t s[2] = {rows, cols}, srow[2] = {1, cols}, scol[2] = {rows, 1};
    const wf_dtype dts[4] = {WF_DTYPE_F16, WF_DTYPE_F32, WF_DTYPE_BF16, WF_DTYPE_I32};
#ifdef __SANITIZE_THREAD__
    const int dtype_count = 2; /* the threads split every dtype alike: a 2- and a 4-byte one */
#else
    const int dtype_count = 4;
#endif
    const enum op_id some[] = {OP_ADD, OP_MUL, OP_SUB, OP_DIV, OP_MAX, OP_LT, OP_REM};
    wf_scope_begin();
    for (int k = 0; k < dtype_count; k++) {
        double *va = gen_values(OP_ADD, 0, dts[k], n, 5);
        double *vb = gen_values(OP_ADD, 1, dts[k], n, 6);
        for (int64_t i = 0; i < n; i++)
            if (vb[i] == 0)
                vb[i] = 3;
        for (size_t o = 0; o < sizeof some / sizeof some[0]; o++) {
            check_op(some[o], va, dts[k], s, 2, false, vb, dts[k], s, 2, false);
            check_op(some[o], va, dts[k], s, 2, false, vb, dts[k], srow, 2, false);
            check_op(some[o], vb, dts[k], scol, 2, false, va, dts[k], s, 2, true);
        }
        free(va);
        free(vb);
    }
    wf_scope_end();
}

/* Transposed operands over outputs big enough (over 16 MB) that the tiled
 * walk computes tiles in a buffer and streams them out; partial tiles at
 * the edges; float32 and float16 (2-byte tiles), a bool result. */
static void test_transposed_streamed_outputs(void)
{
    const int64_t rows = 2100, cols = 2050, n = rows * cols;
    const int64_t sx[2] = {cols, rows}, sy[2] = {rows, cols};
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) * 0.25f;
        y[i] = (float)(i % 777) - 300.0f;
    }
    wf_scope_begin();
    wf_array *xa = wf_array_from_data(x, sx, 2, WF_DTYPE_F32);
    wf_array *ya = wf_array_from_data(y, sy, 2, WF_DTYPE_F32);
    wf_array *xt = wf_transpose(xa, NULL, 0); /* rows x cols, x[j][i] */
    wf_array *sum = wf_add(xt, ya), *both = wf_multiply(xt, xt), *less = wf_less(xt, ya);
    wf_array *h = wf_astype(xt, WF_DTYPE_F16);
    wf_array *hsum = wf_add(h, wf_astype(ya, WF_DTYPE_F16));
    wf_array *all[4] = {sum, both, less, hsum};
    CHECK_OK(wf_eval(all, 4));
    const void *ps = NULL, *pb = NULL, *pl = NULL, *ph = NULL;
    CHECK_OK(wf_array_data(sum, &ps));
    CHECK_OK(wf_array_data(both, &pb));
    CHECK_OK(wf_array_data(less, &pl));
    CHECK_OK(wf_array_data(hsum, &ph));
    int64_t bad = 0;
    for (int64_t i = 0; ps && pb && pl && ph && i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            const float a = x[j * rows + i], b = y[i * cols + j];
            const int64_t o = i * cols + j;
            const uint16_t half = wf__cpu_f32_to_f16(wf__cpu_f16_to_f32(wf__cpu_f32_to_f16(a)) +
                                                     wf__cpu_f16_to_f32(wf__cpu_f32_to_f16(b)));
            bad += ((const float *)ps)[o] != a + b;
            bad += ((const float *)pb)[o] != a * a;
            bad += ((const uint8_t *)pl)[o] != (a < b);
            bad += ((const uint16_t *)ph)[o] != half;
        }
    CHECK_EQ_INT(bad, 0);
    wf_scope_end();
    free(x);
    free(y);
}

/* Both inputs transposed (or permuted) and the output contiguous: both
 * inputs go through the tiled walk's transposing buffers; outputs over 16 MB
 * (streamed out) with output rows on and off cache lines, float32 and
 * float64 (4- and 8-byte blocks), partial tiles at the edges, a small
 * output, a 3-d permute. Under every ISA variant this CPU runs. */
static int64_t check_both_transposed(int64_t rows, int64_t cols, wf_dtype dt)
{
    const int64_t n = rows * cols, shape[2] = {cols, rows};
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (double)(i % 1001) * 0.5;
        y[i] = (double)(i % 613) - 200.0;
    }
    wf_scope_begin();
    wf_array *xa = wf_astype(wf_array_from_data(x, shape, 2, WF_DTYPE_F64), dt);
    wf_array *ya = wf_astype(wf_array_from_data(y, shape, 2, WF_DTYPE_F64), dt);
    wf_array *sum = wf_add(wf_transpose(xa, NULL, 0), wf_transpose(ya, NULL, 0));
    const void *p = NULL;
    int64_t bad = 0;
    CHECK_OK(wf_eval(&sum, 1));
    CHECK_OK(wf_array_data(sum, &p));
    for (int64_t i = 0; p && i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            const double want = x[j * rows + i] + y[j * rows + i];
            const double got = dt == WF_DTYPE_F32 ? ((const float *)p)[i * cols + j]
                                                  : ((const double *)p)[i * cols + j];
            bad += got != want;
        }
    wf_scope_end();
    free(x);
    free(y);
    return bad;
}

static int64_t check_both_permuted(void)
{
    const int64_t shape[3] = {40, 70, 6}, n = 40 * 70 * 6; /* viewed as (6, 40, 70) */
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i % 997);
    wf_scope_begin();
    const int perm[3] = {2, 0, 1};
    wf_array *xa = wf_array_from_data(x, shape, 3, WF_DTYPE_F32);
    wf_array *xp = wf_transpose(xa, perm, 3);
    wf_array *prod = wf_multiply(xp, xp);
    const void *p = NULL;
    int64_t bad = 0;
    CHECK_OK(wf_eval(&prod, 1));
    CHECK_OK(wf_array_data(prod, &p));
    for (int64_t c = 0; p && c < 6; c++)
        for (int64_t a = 0; a < 40; a++)
            for (int64_t b = 0; b < 70; b++) {
                const float v = x[(a * 70 + b) * 6 + c];
                bad += ((const float *)p)[(c * 40 + a) * 70 + b] != v * v;
            }
    wf_scope_end();
    free(x);
    return bad;
}

static void check_both_operands_transposed(void)
{
    CHECK_EQ_INT(check_both_transposed(2048, 2064, WF_DTYPE_F32), 0); /* 16.9 MB */
    CHECK_EQ_INT(check_both_transposed(2100, 2050, WF_DTYPE_F32), 0); /* rows off lines */
    CHECK_EQ_INT(check_both_transposed(2050, 1040, WF_DTYPE_F64), 0); /* 17 MB, 8-byte blocks */
    CHECK_EQ_INT(check_both_transposed(300, 170, WF_DTYPE_F32), 0);   /* in the caches */
    CHECK_EQ_INT(check_both_permuted(), 0);
}

static void test_both_operands_transposed(void)
{
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++)
        if (wf_test_runs_isa(isa, wf__vm_isa_best()) && wf__vm_isa_force(isa) == WF_OK)
            check_both_operands_transposed();
    CHECK_OK(wf__vm_isa_force(-1));
}

/* ---------------------------------------------------------------- half converters */

static bool same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static bool same_half(uint16_t a, uint16_t b, bool bf)
{
    const bool na = bf ? (a & 0x7fffu) > 0x7f80u : (a & 0x7fffu) > 0x7c00u;
    const bool nb = bf ? (b & 0x7fffu) > 0x7f80u : (b & 0x7fffu) > 0x7c00u;
    return (na && nb && (a & 0x8000u) == (b & 0x8000u)) || a == b;
}

static void check_half_converters(void)
{
    /* Every half, through the inline converters and the block ones. */
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    float *f = malloc(N * sizeof *f);
    for (int i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    int bad = 0;
    for (int bf = 0; bf < 2; bf++) {
        const wf_dtype dt = bf ? WF_DTYPE_BF16 : WF_DTYPE_F16;
        wf__cpu_halves_to_f32(N - 3, h + 3, 1, dt, f + 3); /* unaligned start */
        wf__cpu_halves_to_f32(3, h, 1, dt, f);
        for (int i = 0; i < N && bad < 5; i++) {
            float want = bf ? wf__bf16_to_f32(h[i]) : wf__f16_to_f32(h[i]);
            float inl = bf ? wf__cpu_bf16_to_f32(h[i]) : wf__cpu_f16_to_f32(h[i]);
            if (!CHECK(same_float(f[i], want)) || !CHECK(same_float(inl, want))) {
                printf("    %s 0x%04x: %g / %g, want %g\n", wf_dtype_name(dt), i, (double)f[i],
                       (double)inl, (double)want);
                bad++;
            }
        }
        /* ... and back: exact round trip (NaNs stay NaNs). */
        wf__cpu_f32_to_halves(N, f, back, 1, dt);
        for (int i = 0; i < N && bad < 5; i++)
            if (!CHECK(same_half(back[i], h[i], bf))) {
                printf("    %s round trip 0x%04x -> 0x%04x\n", wf_dtype_name(dt), i, back[i]);
                bad++;
            }
    }
    /* Float32 -> half over a sweep of bit patterns, including every
     * rounding boundary near each half (halfway, +-1 ulp). */
    enum { M = 4096 };
    float *src = malloc(M * sizeof *src);
    uint16_t *got = malloc(M * sizeof *got);
    uint32_t pattern = 0;
    for (int round = 0; round < 300 && bad < 5; round++) {
        for (int i = 0; i < M; i++) {
            uint32_t u;
            if (i % 4 == 0) {
                u = pattern;
                pattern += 0x000f4243u;
            } else {
                /* a half's value shifted to f32, plus a rounding offset */
                uint32_t base = ((uint32_t)(round * M + i) & 0x7fffu) << 13;
                uint32_t off[3] = {0x1000u, 0x0fffu, 0x1001u};
                u = ((uint32_t)(round & 1) << 31) | (base + 0x38000000u + off[i % 4 - 1]);
                if (round >= 150) /* bf16 boundaries: low 16 bits */
                    u = ((uint32_t)(round * M + i) * 0x9e3779b9u & 0xffff0000u) |
                        (i % 4 == 1 ? 0x8000u : i % 4 == 2 ? 0x7fffu : 0x8001u);
            }
            memcpy(&src[i], &u, sizeof u);
        }
        for (int bf = 0; bf < 2; bf++) {
            const wf_dtype dt = bf ? WF_DTYPE_BF16 : WF_DTYPE_F16;
            wf__cpu_f32_to_halves(M, src, got, 1, dt);
            for (int i = 0; i < M && bad < 5; i++) {
                uint16_t want = bf ? wf__f32_to_bf16(src[i]) : wf__f32_to_f16(src[i]);
                uint16_t inl = bf ? wf__cpu_f32_to_bf16(src[i]) : wf__cpu_f32_to_f16(src[i]);
                if (!CHECK(got[i] == want) || !CHECK(inl == want)) {
                    uint32_t u;
                    memcpy(&u, &src[i], sizeof u);
                    printf("    %s of 0x%08x: block 0x%04x, inline 0x%04x, want 0x%04x\n",
                           wf_dtype_name(dt), u, got[i], inl, want);
                    bad++;
                }
            }
            /* strided destination */
            wf__cpu_f32_to_halves(M / 2, src, got, 2, dt);
            for (int i = 0; i < M / 2 && bad < 5; i++) {
                uint16_t want = bf ? wf__f32_to_bf16(src[i]) : wf__f32_to_f16(src[i]);
                if (!CHECK(got[2 * i] == want))
                    bad++;
            }
        }
    }
    free(src);
    free(got);
    free(h);
    free(back);
    free(f);
}

/* The block converters have hardware paths: check every variant this CPU
 * runs. */
static void test_half_converters(void)
{
    const int active = wf__vm_isa_active();
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++)
        if (wf_test_runs_isa(isa, wf__vm_isa_best()) && wf__vm_isa_force(isa) == WF_OK)
            check_half_converters();
    CHECK_OK(wf__vm_isa_force(-1));
    CHECK_EQ_INT(wf__vm_isa_active(), active);
}

/* ---------------------------------------------------------------- where */

static void test_where(void)
{
    const int64_t s34[2] = {3, 4}, s31[2] = {3, 1}, s14[2] = {1, 4}, s4[1] = {4};
    wf_scope_begin();
    for (int dc = 0; dc < WF_DTYPE_COUNT; dc++) {
        for (int d = 0; d < WF_DTYPE_COUNT; d++) {
            const wf_dtype dt = (wf_dtype)d;
            /* cond with zeros, NaN (true) and negative values */
            double vc[12] = {0, 1, 0, 2, -1, 0, 0, 3, NAN, 0, 1, 0};
            if (!is_float((wf_dtype)dc))
                vc[8] = 5;
            double *va = gen_values(OP_ADD, 0, dt, 12, 3);
            double *vb = gen_values(OP_ADD, 1, dt, 12, 4);
            for (int layout = 0; layout < 3; layout++) {
                /* 0: all (3, 4); 1: cond (3, 4) strided, a (3, 1), b 0-d;
                 * 2: cond (4,), a (1, 4) strided, b (3, 1) */
                const int64_t *sc = layout == 2 ? s4 : s34;
                const int nc = layout == 2 ? 1 : 2;
                const int64_t *sa = layout == 0 ? s34 : layout == 1 ? s31 : s14;
                const int64_t *sb = layout == 0 ? s34 : layout == 1 ? NULL : s31;
                const int nb = layout == 1 ? 0 : 2;
                wf_array *c = layout == 1 ? conf_strided(vc, sc, nc, (wf_dtype)dc)
                                          : conf_array(vc, sc, nc, (wf_dtype)dc);
                wf_array *a = layout == 2 ? conf_strided(va, sa, 2, dt) : conf_array(va, sa, 2, dt);
                wf_array *b = conf_array(vb, sb, nb, dt);
                double w[12];
                for (int i = 0; i < 12; i++) {
                    int r = i / 4, col = i % 4;
                    double cv = conf_round_to(vc[nc == 1 ? col : i], (wf_dtype)dc);
                    int ia = layout == 0 ? i : layout == 1 ? r : col;
                    int ib = layout == 0 ? i : layout == 1 ? 0 : r;
                    w[i] = conf_round_to(cv != 0 ? va[ia] : vb[ib], dt);
                }
                if (!conf_check(wf_where(c, a, b), dt, s34, 2, w, 0))
                    printf("    (where: cond %s, %s, layout %d)\n", wf_dtype_name((wf_dtype)dc),
                           wf_dtype_name(dt), layout);
            }
            free(va);
            free(vb);
        }
    }
    /* Promotion: a and b promote; a 0-d everything. */
    wf_array *t = wf_scalar(1, WF_DTYPE_BOOL), *i = wf_scalar(3, WF_DTYPE_I32);
    wf_array *h = wf_scalar(0.5, WF_DTYPE_F16);
    double w = 3;
    conf_check(wf_where(t, i, h), WF_DTYPE_F16, NULL, 0, &w, 0);
    w = 0.5;
    conf_check(wf_where(wf_scalar(0, WF_DTYPE_F32), i, h), WF_DTYPE_F16, NULL, 0, &w, 0);
    /* Empty. */
    const int64_t s03[2] = {0, 3};
    wf_array *e = wf_zeros(s03, 2, WF_DTYPE_BOOL);
    conf_check(wf_where(e, i, h), WF_DTYPE_F16, s03, 2, &w, 0);
    /* Long: every element size, a random condition, the row case. */
    const int64_t rows = 41, cols = 1999, n = rows * cols, s[2] = {rows, cols},
                  srow[2] = {1, cols};
    double *vc = conf_values(n, -1, 1, 8), *va = conf_values(n, -50, 50, 9);
    double *vb = conf_values(cols, -50, 50, 10), *want = malloc((size_t)n * sizeof *want);
    const wf_dtype dts[4] = {WF_DTYPE_U8, WF_DTYPE_F16, WF_DTYPE_F32, WF_DTYPE_F64};
    for (int64_t k = 0; k < n; k++)
        vc[k] = vc[k] > 0;
    wf_array *cond = conf_array(vc, s, 2, WF_DTYPE_BOOL);
    for (int k = 0; k < 4; k++) {
        wf_array *a = conf_array(va, s, 2, dts[k]), *b = conf_array(vb, srow, 2, dts[k]);
        for (int64_t j = 0; j < n; j++)
            want[j] = conf_round_to(vc[j] != 0 ? va[j] : vb[j % cols], dts[k]);
        conf_check(wf_where(cond, a, b), dts[k], s, 2, want, 0);
        for (int64_t j = 0; j < n; j++)
            want[j] = conf_round_to(vc[j] != 0 ? vb[j % cols] : va[j], dts[k]);
        conf_check(wf_where(cond, b, a), dts[k], s, 2, want, 0);
    }
    free(vc);
    free(va);
    free(vb);
    free(want);
    wf_scope_end();
}

/* ---------------------------------------------------------------- clip */

static double ref_clip(double x, double lo, double hi, bool has_lo, bool has_hi)
{
    if (isnan(x) || (has_lo && isnan(lo)) || (has_hi && isnan(hi)))
        return NAN;
    if (has_lo && x < lo)
        x = lo;
    if (has_hi && x > hi)
        x = hi;
    return x;
}

static void test_clip(void)
{
    const int64_t s34[2] = {3, 4}, s4[1] = {4}, s31[2] = {3, 1};
    wf_scope_begin();
    for (int d = 0; d < WF_DTYPE_COUNT; d++) {
        const wf_dtype dt = (wf_dtype)d;
        if (dt == WF_DTYPE_C64) /* no order: test_errors */
            continue;
        double *va = gen_values(OP_ADD, 0, dt, 12, 21);
        double vlo[4] = {-2, 0, 1, -9}, vhi[3] = {3, 0, 9};
        if (is_unsigned(dt)) {
            vlo[0] = 2;
            vlo[3] = 1;
        }
        if (dt == WF_DTYPE_BOOL) {
            vlo[0] = vlo[1] = vlo[3] = 0;
            vhi[0] = vhi[2] = 1;
        }
        if (is_float(dt)) {
            va[5] = NAN;
            va[6] = INFINITY;
            va[7] = -INFINITY;
        }
        for (int mode = 0; mode < 4; mode++) {
            /* 0: both bounds; 1: low only; 2: high only; 3: both, a strided */
            const bool has_lo = mode != 2, has_hi = mode != 1;
            wf_array *a = mode == 3 ? conf_strided(va, s34, 2, dt) : conf_array(va, s34, 2, dt);
            wf_array *lo = has_lo ? conf_array(vlo, s4, 1, dt) : NULL;
            wf_array *hi = has_hi ? conf_array(vhi, s31, 2, dt) : NULL;
            double w[12];
            for (int i = 0; i < 12; i++)
                w[i] = conf_round_to(ref_clip(conf_round_to(va[i], dt),
                                              conf_round_to(vlo[i % 4], dt),
                                              conf_round_to(vhi[i / 4], dt), has_lo, has_hi),
                                     dt);
            if (!conf_check(wf_clip(a, lo, hi), dt, s34, 2, w, 0))
                printf("    (clip %s mode %d)\n", wf_dtype_name(dt), mode);
        }
        free(va);
    }
    /* NaN bounds, promotion, scalar bounds, 0-d, empty, long rows. */
    double w = NAN;
    conf_check(wf_clip(wf_scalar(1, WF_DTYPE_F32), wf_scalar(NAN, WF_DTYPE_F32),
                       wf_scalar(2, WF_DTYPE_F32)),
               WF_DTYPE_F32, NULL, 0, &w, 0);
    w = 2.5;
    conf_check(wf_clip(wf_scalar(7, WF_DTYPE_I32), NULL, wf_scalar(2.5, WF_DTYPE_F32)),
               WF_DTYPE_F32, NULL, 0, &w, 0);
    w = 1.5;
    conf_check(wf_clip(wf_scalar(1, WF_DTYPE_I32), wf_scalar(1.5, WF_DTYPE_F16),
                       wf_scalar(4, WF_DTYPE_I64)),
               WF_DTYPE_F16, NULL, 0, &w, 0);
    const int64_t s02[2] = {0, 2};
    conf_check(wf_clip(wf_zeros(s02, 2, WF_DTYPE_F32), wf_scalar(0, WF_DTYPE_F32),
                       wf_scalar(1, WF_DTYPE_F32)),
               WF_DTYPE_F32, s02, 2, &w, 0);
    const int64_t n = 70001;
    double *v = conf_values(n, -3, 3, 12), *want = malloc((size_t)n * sizeof *want);
    const wf_dtype dts[3] = {WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < n; i++)
            want[i] = conf_round_to(ref_clip(conf_round_to(v[i], dts[k]), -1, 1.5, true, true),
                                    dts[k]);
        conf_check(wf_clip(conf_array(v, &n, 1, dts[k]), wf_scalar(-1, dts[k]),
                           wf_scalar(1.5, dts[k])),
                   dts[k], &n, 1, want, 0);
        conf_check(wf_clip(conf_strided(v, &n, 1, dts[k]), wf_full(&n, 1, -1, dts[k]),
                           wf_scalar(1.5, dts[k])),
                   dts[k], &n, 1, want, 0);
    }
    free(v);
    free(want);
    wf_scope_end();
}

/* where and clip over 19 elements of every dtype (two blocks of 8 and a
 * tail) in each layout the kernels special-case - every operand contiguous,
 * a or b (where) or both bounds (clip) a broadcast 0-d value - and a strided
 * one, against the reference computed here. */
static void test_where_and_clip_in_blocks(void)
{
    enum { N = 19 };
    const int64_t n = N;
    wf_scope_begin();
    double vc[N], va[N], vb[N], vlo[N], vhi[N], w[N];
    for (int i = 0; i < N; i++)
        vc[i] = i % 3 != 0;
    for (int d = 0; d < WF_DTYPE_COUNT; d++) {
        const wf_dtype dt = (wf_dtype)d;
        if (dt == WF_DTYPE_C64) /* where moves its 8 bytes as where_8; clip has no order */
            continue;
        const bool boolean = dt == WF_DTYPE_BOOL, sign = !is_unsigned(dt) && !boolean;
        for (int i = 0; i < N; i++) {
            va[i] = boolean ? i % 2 : (i * 7) % 23 - (sign ? 8 : 0);
            vb[i] = boolean ? (i % 5 == 0) : (i * 5) % 17 - (sign ? 6 : 0) + 0.5 * is_float(dt);
            vlo[i] = boolean ? i % 4 == 0 : i % 5;
            vhi[i] = boolean ? 1 : 10 + i % 4;
        }
        wf_array *cond = conf_array(vc, &n, 1, WF_DTYPE_BOOL);
        for (int layout = 0; layout < 5; layout++) {
            /* 0: both contiguous; 1: b 0-d; 2: a 0-d; 3: both 0-d; 4: a strided */
            const bool a_scalar = layout == 2 || layout == 3, b_scalar = layout == 1 || layout == 3;
            wf_array *a = a_scalar     ? conf_array(va, NULL, 0, dt)
                          : layout == 4 ? conf_strided(va, &n, 1, dt)
                                        : conf_array(va, &n, 1, dt);
            wf_array *b = b_scalar ? conf_array(vb, NULL, 0, dt) : conf_array(vb, &n, 1, dt);
            for (int i = 0; i < N; i++)
                w[i] = conf_round_to(vc[i] != 0 ? va[a_scalar ? 0 : i] : vb[b_scalar ? 0 : i], dt);
            if (!conf_check(wf_where(cond, a, b), dt, &n, 1, w, 0))
                printf("    (where %s, layout %d)\n", wf_dtype_name(dt), layout);
        }
        for (int layout = 0; layout < 3; layout++) {
            /* 0: bounds contiguous; 1: bounds 0-d; 2: a strided, bounds contiguous */
            const bool scalar = layout == 1;
            wf_array *a = layout == 2 ? conf_strided(va, &n, 1, dt) : conf_array(va, &n, 1, dt);
            wf_array *lo = conf_array(vlo, scalar ? NULL : &n, scalar ? 0 : 1, dt);
            wf_array *hi = conf_array(vhi, scalar ? NULL : &n, scalar ? 0 : 1, dt);
            for (int i = 0; i < N; i++)
                w[i] = conf_round_to(ref_clip(conf_round_to(va[i], dt),
                                              conf_round_to(vlo[scalar ? 0 : i], dt),
                                              conf_round_to(vhi[scalar ? 0 : i], dt), true, true),
                                     dt);
            if (!conf_check(wf_clip(a, lo, hi), dt, &n, 1, w, 0))
                printf("    (clip %s, layout %d)\n", wf_dtype_name(dt), layout);
        }
    }
    wf_scope_end();
}

/* ---------------------------------------------------------------- errors */

/* `result` is NULL with WF_ERR_DTYPE, the message naming `op` (if not NULL)
 * and `needle`. */
static void check_dtype_error(wf_array *result, const char *op, const char *needle)
{
    CHECK(result == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    if (op)
        CHECK_STR_CONTAINS(wf_last_error_message(), op);
    CHECK_STR_CONTAINS(wf_last_error_message(), needle);
    wf_clear_error();
}

static void test_errors(void)
{
    wf_scope_begin();
    const int64_t s23[2] = {2, 3}, s4[1] = {4}, s2[1] = {2};
    wf_array *a = wf_zeros(s23, 2, WF_DTYPE_F32), *b = wf_zeros(s4, 1, WF_DTYPE_F32);
    wf_array *ia = wf_zeros(s23, 2, WF_DTYPE_I16), *ib = wf_zeros(s4, 1, WF_DTYPE_U32);
    for (int op = 0; op < OP_COUNT; op++) {
        const bool integer = ops[op].kind == K_INTEGER;
        conf_check_error(ops[op].fn(integer ? ia : a, integer ? ib : b), WF_ERR_SHAPE,
                         ops[op].name);
        conf_check_error(ops[op].fn(NULL, a), WF_ERR_NULL_ARGUMENT, ops[op].name);
        conf_check_error(ops[op].fn(a, NULL), WF_ERR_NULL_ARGUMENT, ops[op].name);
    }
    /* Bitwise ops: floats, and promotions to a float (uint64 with a signed
     * type gives float32), are WF_ERR_DTYPE with a message naming them. */
    const int64_t s1[1] = {1};
    wf_array *u64 = wf_zeros(s1, 1, WF_DTYPE_U64), *i8 = wf_zeros(s1, 1, WF_DTYPE_I8);
    for (int op = OP_BAND; op <= OP_SHR; op++) {
        conf_check_error(ops[op].fn(a, a), WF_ERR_DTYPE, ops[op].name);
        check_dtype_error(ops[op].fn(u64, i8), ops[op].name, "float32");
    }
    conf_check_error(wf_bitwise_invert(a), WF_ERR_DTYPE, "wf_bitwise_invert");
    conf_check_error(wf_bitwise_invert(NULL), WF_ERR_NULL_ARGUMENT, "wf_bitwise_invert");
    /* complex64: add, subtract, multiply, divide, power, maximum, minimum
     * and equality are defined (test_dtypes, test_complex_ops check them);
     * every other binary op is WF_ERR_DTYPE with the dtype in the message. */
    wf_array *z = wf_zeros(s1, 1, WF_DTYPE_C64);
    for (int op = 0; op < OP_COUNT; op++) {
        if (ops[op].kind == K_LOGICAL || op == OP_ADD || op == OP_SUB || op == OP_MUL ||
            op == OP_DIV || op == OP_EQ || op == OP_NE || op == OP_POW || op == OP_MAX ||
            op == OP_MIN || op == OP_LOGADDEXP) /* test_complex_ops */
            continue;
        check_dtype_error(ops[op].fn(z, z), ops[op].kind == K_INTEGER ? ops[op].name : NULL,
                          "complex64");
        check_dtype_error(ops[op].fn(z, a), NULL, "complex64");
    }
    conf_check_error(wf_clip(z, z, z), WF_ERR_DTYPE, "wf_clip");
    /* bool subtract, as in NumPy */
    wf_array *t = wf_ones(s23, 2, WF_DTYPE_BOOL);
    conf_check_error(wf_subtract(t, t), WF_ERR_DTYPE, "wf_subtract");
    conf_check_error(wf_subtract(t, wf_scalar(1, WF_DTYPE_BOOL)), WF_ERR_DTYPE, "wf_subtract");
    /* where */
    conf_check_error(wf_where(NULL, a, a), WF_ERR_NULL_ARGUMENT, "wf_where");
    conf_check_error(wf_where(t, NULL, a), WF_ERR_NULL_ARGUMENT, "wf_where");
    conf_check_error(wf_where(t, a, NULL), WF_ERR_NULL_ARGUMENT, "wf_where");
    conf_check_error(wf_where(t, a, b), WF_ERR_SHAPE, "wf_where");
    conf_check_error(wf_where(wf_zeros(s2, 1, WF_DTYPE_BOOL), a, a), WF_ERR_SHAPE, "wf_where");
    /* clip */
    conf_check_error(wf_clip(NULL, a, a), WF_ERR_NULL_ARGUMENT, "wf_clip");
    conf_check_error(wf_clip(a, NULL, NULL), WF_ERR_NULL_ARGUMENT, "wf_clip");
    conf_check_error(wf_clip(a, b, NULL), WF_ERR_SHAPE, "wf_clip");
    conf_check_error(wf_clip(a, NULL, b), WF_ERR_SHAPE, "wf_clip");
    conf_check_error(wf_clip(a, a, b), WF_ERR_SHAPE, "wf_clip");
    /* A chain reports the first error. */
    wf_array *chain = wf_maximum(wf_divide(wf_subtract(a, b), a), wf_where(t, a, a));
    CHECK(chain == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_subtract");
    wf_clear_error();
    /* Still working. */
    double w[6] = {1, 1, 1, 1, 1, 1};
    conf_check(wf_where(t, wf_ones(s23, 2, WF_DTYPE_I32), a), WF_DTYPE_F32, s23, 2, w, 0);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_half_converters);
    RUN_TEST(test_every_op_every_dtype);
    RUN_TEST(test_empty);
    RUN_TEST(test_promotion);
    RUN_TEST(test_integer_edges);
    RUN_TEST(test_float_specials);
    RUN_TEST(test_long_arrays);
    RUN_TEST(test_transposed_streamed_outputs);
    RUN_TEST(test_both_operands_transposed);
    RUN_TEST(test_where);
    RUN_TEST(test_clip);
    RUN_TEST(test_where_and_clip_in_blocks);
    RUN_TEST(test_errors);
    return TEST_SUMMARY();
}
