/*
 * The sort family (wf_sort, wf_argsort, wf_partition, wf_argpartition,
 * wf_topk, wf_argtopk) and the scans wf_cummax, wf_cummin,
 * wf_logcumsumexp against references written here: a stable comparison
 * sort of doubles with NumPy's order (NaNs last; -0 before +0), and plain
 * loops for the scans. Every dtype, every axis of a 3-d array,
 * transposed / strided inputs, rows long enough for the radix and select
 * paths, NaNs, ties, k = 0 and k = n, empty arrays, errors; vjp / jvp in
 * float64 against finite differences, vmap against per-example results.
 * The AVX2 and AVX-512 sorts and selects of 32-bit keys (sort_avx2.c,
 * sort_avx512.c) and the portable radix paths are each forced
 * (wf__vm_isa_force) over rows at the sizes where the vectorized code
 * switches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "conformance.h"
#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "transforms_util.h"

/* Every real dtype (complex64 has no order). */
static const wf_dtype all_dtypes[] = {
    WF_DTYPE_BOOL, WF_DTYPE_I8,  WF_DTYPE_U8,   WF_DTYPE_I16, WF_DTYPE_U16,
    WF_DTYPE_I32,  WF_DTYPE_U32, WF_DTYPE_I64,  WF_DTYPE_U64, WF_DTYPE_F16,
    WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64};
#define NDTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* ---------------------------------------------------------------- reference order */

/* NumPy's order: NaNs last (equal among themselves), -0 before +0. */
static int order(double x, double y)
{
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    if (x != y)
        return x < y ? -1 : 1;
    return signbit(y) - signbit(x);
}

static const double *sort_row_values;

static int by_value_then_index(const void *pa, const void *pb)
{
    const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    const int c = order(sort_row_values[a], sort_row_values[b]);
    return c ? c : (a > b) - (a < b);
}

/* Descending values, ties by index (topk). */
static int by_value_desc_then_index(const void *pa, const void *pb)
{
    const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    const int c = order(sort_row_values[b], sort_row_values[a]);
    return c ? c : (a > b) - (a < b);
}

/* Values with ties, NaNs (floats) and signed zeros, as `dtype` stores them. */
static double *test_values(int64_t n, wf_dtype d, uint32_t seed)
{
    double *v = conf_integer_values(n, d, seed);
    for (int64_t i = 0; i < n; i++) {
        v[i] = conf_round_to(fmod(v[i], 9), d); /* many ties */
        if (wf__dtype_is_float(d)) {
            if (i % 17 == 3)
                v[i] = NAN;
            if (i % 13 == 5)
                v[i] = -0.0;
            if (i % 11 == 1)
                v[i] = conf_round_to(v[i] + 0.25, d);
        }
    }
    return v;
}

/* Row `r` of axis `axis` of a row-major `shape`: flat index of element i. */
static int64_t flat_at(const int64_t *shape, int ndim, int axis, int64_t r, int64_t i)
{
    int64_t c[WF_MAX_NDIM];
    int64_t rest = r;
    for (int d = ndim - 1; d >= 0; d--) {
        if (d == axis)
            continue;
        c[d] = rest % shape[d];
        rest /= shape[d];
    }
    c[axis] = i;
    return conf_ravel(c, shape, ndim);
}

enum { SORT, ARGSORT, PARTITION, ARGPARTITION, TOPK, ARGTOPK };

/* Checks one op over every row of `got` (already read) against the
 * reference order of row values of v. */
static bool check_rows(int op, const double *v, const int64_t *shape, int ndim, int axis,
                       int64_t k, const double *got, wf_dtype d)
{
    const int64_t n = shape[axis], rows = n ? conf_size(shape, ndim) / n : 0;
    int64_t oshape[WF_MAX_NDIM];
    memcpy(oshape, shape, (size_t)ndim * sizeof *shape);
    if (op == TOPK || op == ARGTOPK)
        oshape[axis] = k;
    const int64_t m = oshape[axis];
    int64_t *perm = malloc((size_t)(n + 1) * sizeof *perm);
    double *row = malloc((size_t)(n + 1) * sizeof *row);
    bool ok = true;
    for (int64_t r = 0; r < rows && ok; r++) {
        for (int64_t i = 0; i < n; i++) {
            row[i] = v[flat_at(shape, ndim, axis, r, i)];
            perm[i] = i;
        }
        sort_row_values = row;
        const bool desc = op == TOPK || op == ARGTOPK;
        qsort(perm, (size_t)n, sizeof *perm, desc ? by_value_desc_then_index : by_value_then_index);
        for (int64_t i = 0; i < m && ok; i++) {
            const double g = got[flat_at(oshape, ndim, axis, r, i)];
            switch (op) {
            case SORT:
            case TOPK: {
                const double w = row[perm[i]];
                ok = isnan(w) ? isnan(g) : g == w && signbit(g) == signbit(w);
                break;
            }
            case ARGSORT:
            case ARGTOPK: ok = g == (double)perm[i]; break;
            case PARTITION: {
                const double pivot = row[perm[k]];
                ok = i < k ? order(g, pivot) <= 0 : i > k ? order(g, pivot) >= 0
                                                          : order(g, pivot) == 0;
                break;
            }
            default: { /* ARGPARTITION: an index whose value sits right of kth */
                const double pivot = row[perm[k]];
                ok = g >= 0 && g < (double)n;
                if (ok) {
                    const double x = row[(int64_t)g];
                    ok = i < k ? order(x, pivot) <= 0 : i > k ? order(x, pivot) >= 0
                                                              : order(x, pivot) == 0;
                }
                break;
            }
            }
            if (!ok)
                wf_test_fail(__FILE__, __LINE__, "op %d (%s) axis %d k %lld: row %lld pos %lld got %g",
                             op, wf_dtype_name(d), axis, (long long)k, (long long)r, (long long)i, g);
        }
    }
    free(perm);
    free(row);
    return ok;
}

static wf_array *run_op(int op, wf_array *a, int64_t k, int axis)
{
    switch (op) {
    case SORT: return wf_sort(a, axis);
    case ARGSORT: return wf_argsort(a, axis);
    case PARTITION: return wf_partition(a, k, axis);
    case ARGPARTITION: return wf_argpartition(a, k, axis);
    case TOPK: return wf_topk(a, k, axis);
    default: return wf_argtopk(a, k, axis);
    }
}

static void check_op(int op, wf_array *a, const double *v, const int64_t *shape, int ndim,
                     int axis, int64_t k, wf_dtype d)
{
    wf_array *r = run_op(op, a, k, axis);
    if (!CHECK_NOT_NULL(r))
        return;
    const bool idx = op == ARGSORT || op == ARGPARTITION || op == ARGTOPK;
    CHECK_EQ_INT(wf_array_dtype(r), idx ? WF_DTYPE_U32 : d);
    double *got = conf_read(r);
    if (CHECK_NOT_NULL(got))
        check_rows(op, v, shape, ndim, axis, k, got, d);
    free(got);
    wf_release(r);
}

static void test_every_dtype_and_axis(void)
{
    const int64_t shape[3] = {3, 5, 70}; /* rows of 70: radix and select paths */
    for (int t = 0; t < NDTYPES; t++) {
        wf_scope_begin();
        const wf_dtype d = all_dtypes[t];
        double *v = test_values(3 * 5 * 70, d, 5 + t);
        wf_array *a = conf_array(v, shape, 3, d), *s = conf_strided(v, shape, 3, d);
        for (int axis = 0; axis < 3; axis++)
            for (int op = SORT; op <= ARGTOPK; op++) {
                const int64_t n = shape[axis];
                const int64_t k = op >= TOPK ? (axis == 2 ? 9 : n) : (axis + 1) % n;
                check_op(op, (op + axis) % 2 ? s : a, v, shape, 3, axis, k, d);
            }
        free(v);
        wf_scope_end();
    }
}

/* Long rows (radix passes over every byte, deep selects) and short ones. */
static void test_long_and_short_rows(void)
{
    const wf_dtype ds[4] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_I64, WF_DTYPE_F16};
    for (int t = 0; t < 4; t++)
        for (int64_t n = 1; n <= 4097; n = n * 8 + 1) {
            wf_scope_begin();
            const wf_dtype d = ds[t];
            double *v = conf_values(2 * n, -1e4, 1e4, 3 + (uint32_t)n);
            for (int64_t i = 0; i < 2 * n; i++)
                v[i] = conf_round_to(i % 29 == 0 ? -v[i] * 1e3 : v[i], d);
            const int64_t shape[2] = {2, n};
            wf_array *a = conf_array(v, shape, 2, d);
            for (int op = SORT; op <= ARGTOPK; op++) {
                check_op(op, a, v, shape, 2, 1, op >= TOPK ? (n > 50 ? 50 : n) : n / 2, d);
                if (op >= PARTITION) /* kth and k at the ends */
                    check_op(op, a, v, shape, 2, 1, op >= TOPK ? 0 : n - 1, d);
            }
            free(v);
            wf_scope_end();
        }
}

/* ---------------------------------------------------------------- vectorized paths */

/* Runs test(): once per instruction-set variant that this CPU runs
 * (baseline: the portable radix sort and introselect; AVX2: the
 * vectorized quicksort and quickselect; AVX-512: the same with 16-lane
 * partitions and 256-key networks), then goes back to the default. */
static void for_each_sort_variant(void (*test)(void))
{
    for (int isa = WF_VM_ISA_BASELINE; isa < WF_VM_ISA_COUNT; isa++)
        if (wf__vm_isa_force(isa) == WF_OK)
            test();
    CHECK_OK(wf__vm_isa_force(-1));
}

/* Row lengths around the vectorized code's switches: one register (8
 * keys), the sorting networks (AVX2 up to 128 keys: 1, 2 and 4 registers
 * sorted lane-wise, 8 and 16 column-major; AVX-512 129 to 256 keys in 16
 * registers), the partitions' blocks (8 vectors of 8 or 4 of 16 set
 * aside at each end, then 16-key remainders), the wide pivot sample
 * (from 8192). */
static const int64_t switch_lengths[] = {1,   2,   7,   8,   9,   15,   16,   17,   31,  33,
                                         47,  48,  49,  63,  64,  65,   127,  128,  129, 130,
                                         200, 255, 256, 257, 263, 271,  272,  273,  383, 384,
                                         385, 511, 513, 1000, 8191, 8192, 8193};
#define NSWITCH ((int)(sizeof switch_lengths / sizeof switch_lengths[0]))
/* TSan checks threads, not these single-row kernels (release and ASan run
 * every length): there the 32-bit dtypes stop at 300 keys too. */
#if defined(__SANITIZE_THREAD__)
enum { WIDE32_MAX_LENGTH = 300 };
#else
enum { WIDE32_MAX_LENGTH = 1 << 30 };
#endif

enum { RANDOM, ALL_EQUAL, SORTED, REVERSED, FEW_DISTINCT, EXTREMES, NPATTERNS };

/* Values spanning `d`'s range: 32-bit integers over nearly all of theirs. */
static double spread_value(double unit, wf_dtype d)
{
    switch (d) {
    case WF_DTYPE_I32: return floor((unit - 0.5) * 4.2e9);
    case WF_DTYPE_U32: return floor(unit * 4.29e9);
    case WF_DTYPE_F32: return (unit - 0.5) * 1e6;
    case WF_DTYPE_BOOL: return unit > 0.5;
    default:
        if (wf__dtype_is_float(d))
            return (unit - 0.5) * 200;
        return floor(unit * 100) - (wf__dtype_is_signed_int(d) ? 50 : 0);
    }
}

/* Limits and special values of `d`, picked by i. */
static double extreme_value(int64_t i, double unit, wf_dtype d)
{
    if (wf__dtype_is_float(d)) {
        const double v[8] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1e30, -1e-40,
                             (unit - 0.5) * 8};
        return v[i % 8];
    }
    if (d == WF_DTYPE_I32) {
        const double v[6] = {-2147483648.0, 2147483647.0, 0, -1, 1, floor((unit - 0.5) * 4e9)};
        return v[i % 6];
    }
    if (d == WF_DTYPE_U32) {
        const double v[5] = {0, 4294967295.0, 2147483648.0, 2147483647.0, floor(unit * 4e9)};
        return v[i % 5];
    }
    return spread_value(i % 3 == 0 ? 0.0 : i % 3 == 1 ? 0.999 : unit, d);
}

static double pattern_value(int pattern, int64_t i, int64_t n, double unit, wf_dtype d)
{
    const double step = d == WF_DTYPE_BOOL ? 0 : 1;
    switch (pattern) {
    case RANDOM: return spread_value(unit, d);
    case ALL_EQUAL: return spread_value(0.75, d);
    case SORTED:
        return d == WF_DTYPE_BOOL ? i * 2 >= n : spread_value(0.3, d) + step * (double)(i % 100);
    case REVERSED:
        return d == WF_DTYPE_BOOL ? i * 2 < n
                                  : spread_value(0.3, d) + step * (double)((n - i) % 100);
    case FEW_DISTINCT: return spread_value((double)(i * 7 % 3) / 3, d);
    default: return extreme_value(i, unit, d);
    }
}

/* Every op over rows of each switch length, pattern and dtype (every
 * dtype up to 300 keys, the 32-bit ones at every length), in 2 rows,
 * contiguous or strided (alternating by pattern). */
static void check_switch_lengths(void)
{
    for (int t = 0; t < NDTYPES; t++) {
        const wf_dtype d = all_dtypes[t];
        const bool wide32 = d == WF_DTYPE_F32 || d == WF_DTYPE_I32 || d == WF_DTYPE_U32;
        for (int l = 0; l < NSWITCH; l++) {
            const int64_t n = switch_lengths[l];
            if (n > 300 && (!wide32 || n > WIDE32_MAX_LENGTH))
                continue;
            for (int pattern = 0; pattern < NPATTERNS; pattern++) {
                wf_scope_begin();
                const int64_t shape[2] = {2, n};
                double *v = conf_values(2 * n, 0, 1, (uint32_t)(n * 7 + pattern));
                for (int64_t i = 0; i < 2 * n; i++)
                    v[i] = conf_round_to(pattern_value(pattern, i % n + i / n, n, v[i], d), d);
                wf_array *a = pattern % 2 ? conf_strided(v, shape, 2, d)
                                          : conf_array(v, shape, 2, d);
                for (int op = SORT; op <= ARGTOPK; op++) {
                    const int64_t k = op >= TOPK ? (n > 50 ? 50 : n) : n / 2;
                    check_op(op, a, v, shape, 2, 1, k, d);
                    if (op >= TOPK) /* one, and every key */
                        check_op(op, a, v, shape, 2, 1, pattern % 2 ? 1 : n, d);
                }
                free(v);
                wf_scope_end();
            }
        }
    }
}

static void test_vectorized_switch_lengths(void) { for_each_sort_variant(check_switch_lengths); }

/* float32 bit patterns the key mapping must take apart: NaNs of either
 * sign, quiet and signalling, with payloads; infinities; signed zeros;
 * subnormals; the largest finite values. */
static const uint32_t special_f32_bits[] = {
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu,
    0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u,
    0x007fffffu, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u};
#define NSPECIAL ((int)(sizeof special_f32_bits / sizeof special_f32_bits[0]))

/* Sorts a row of those bits, contiguous (AVX2 maps it to keys by vector)
 * and strided (row 0 of a transposed N x 2 array), under each variant:
 * the same bits every time, in NumPy's order, every NaN the canonical NaN. */
static void test_f32_key_mapping(void)
{
    enum { N = 3 * NSPECIAL + 5 };
    uint32_t bits[N], pairs[2 * N];
    for (int i = 0; i < N; i++)
        bits[i] = special_f32_bits[(i * 7) % NSPECIAL];
    for (int i = 0; i < N; i++) {
        pairs[2 * i] = bits[i];
        pairs[2 * i + 1] = bits[(i + 3) % N];
    }
    const int64_t row_shape[2] = {1, N}, tall_shape[2] = {N, 2};
    uint32_t first[2][N];
    for (int isa = WF_VM_ISA_BASELINE; isa < WF_VM_ISA_COUNT; isa++) {
        if (wf__vm_isa_force(isa) != WF_OK)
            continue;
        wf_scope_begin();
        wf_array *row = wf_array_from_data(bits, row_shape, 2, WF_DTYPE_F32);
        wf_array *tall = wf_array_from_data(pairs, tall_shape, 2, WF_DTYPE_F32);
        wf_array *outs[2] = {wf_sort(row, 1), wf_sort(wf_transpose(tall, NULL, 0), 1)};
        for (int o = 0; o < 2; o++) {
            uint32_t got[2 * N];
            if (!CHECK_OK(wf_array_copy_to(outs[o], got, (o ? 2 : 1) * N * sizeof *got)))
                continue;
            for (int i = 0; i < N; i++) {
                float x, y;
                memcpy(&x, &got[i], sizeof x);
                memcpy(&y, &got[i + 1 < N ? i + 1 : i], sizeof y);
                CHECK(order(x, y) <= 0);
                CHECK((got[i] & 0x7fffffffu) <= 0x7f800000u || got[i] == 0x7fc00000u);
            }
            if (isa == WF_VM_ISA_BASELINE)
                memcpy(first[o], got, sizeof first[o]);
            else
                CHECK(memcmp(first[o], got, sizeof first[o]) == 0);
        }
        wf_scope_end();
    }
    CHECK_OK(wf__vm_isa_force(-1));
}

/* One row long enough for the parallel sorts of a row (taken when the pool
 * has more threads than there are rows): the most-significant-digit pass,
 * argsort's parallel LSD passes over 32-bit keys, or (AVX2, 32-bit keys)
 * the split into parts sorted in parallel. */
static void check_one_long_row(void)
{
    const wf_dtype ds[4] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_I32};
    const int64_t n = (1 << 17) + 5;
    for (int t = 0; t < 4; t++) {
        wf_scope_begin();
        const wf_dtype d = ds[t];
        double *v = test_values(n, d, 21 + (uint32_t)t);
        for (int64_t i = 0; i < n; i += 7)
            v[i] = conf_round_to(v[i] * 1000 + (double)(i % 1000), d);
        const int64_t shape[2] = {1, n};
        wf_array *a = conf_array(v, shape, 2, d);
        check_op(SORT, a, v, shape, 2, 1, 0, d);
        check_op(ARGSORT, a, v, shape, 2, 1, 0, d);
        free(v);
        wf_scope_end();
    }
}

/* float32 rows long enough that the sort makes their keys in its first
 * partition and turns them back into floats in its leaves (sort.c,
 * FUSED_KEYS_MIN): several rows (each sorted alone, or one split over the
 * pool), rows read through a transpose (keys made by a pass, floats by the
 * leaves), and rows where the sampled pivot is the minimum (most keys
 * equal to it) or where every key is NaN. */
static void check_long_float32_rows(void)
{
    const int64_t n = 65536 + 3, rows = 3;
    for (int kind = 0; kind < 3; kind++) {
        wf_scope_begin();
        double *v = test_values(rows * n, WF_DTYPE_F32, 31 + (uint32_t)kind);
        for (int64_t i = 0; i < rows * n; i++) {
            if (kind == 1 && i % 10 != 0)
                v[i] = -5.0; /* the minimum, nine keys in ten */
            if (kind == 2)
                v[i] = NAN;
        }
        const int64_t shapes[2][2] = {{rows, n}, {1, rows * n}};
        for (int s = 0; s < 2; s++) {
            wf_array *a = conf_array(v, shapes[s], 2, WF_DTYPE_F32);
            check_op(SORT, a, v, shapes[s], 2, 1, 0, WF_DTYPE_F32);
        }
        double *vt = malloc((size_t)(rows * n) * sizeof *vt); /* (n, rows), transposed */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++)
                vt[i * rows + r] = v[r * n + i];
        const int64_t tall[2] = {n, rows};
        wf_array *t = wf_transpose(conf_array(vt, tall, 2, WF_DTYPE_F32), NULL, 0);
        check_op(SORT, t, v, shapes[0], 2, 1, 0, WF_DTYPE_F32);
        free(vt);
        free(v);
        wf_scope_end();
    }
}

static void test_one_long_row(void)
{
    for_each_sort_variant(check_one_long_row);
    for_each_sort_variant(check_long_float32_rows);
}

static void test_edges_and_errors(void)
{
    wf_scope_begin();
    /* empty rows and no rows */
    const int64_t e1[2] = {3, 0}, e2[2] = {0, 4};
    wf_array *z1 = wf_zeros(e1, 2, WF_DTYPE_F32), *z2 = wf_zeros(e2, 2, WF_DTYPE_F32);
    for (int op = SORT; op <= ARGSORT; op++) {
        wf_array *r = run_op(op, z1, 0, 1);
        CHECK(r && wf_array_size(r) == 0 && CHECK_OK(wf_eval(&r, 1)));
        r = run_op(op, z2, 0, 1);
        CHECK(r && wf_array_size(r) == 0 && CHECK_OK(wf_eval(&r, 1)));
    }
    wf_array *tk = wf_topk(z1, 0, 1);
    CHECK(tk && wf_array_dim(tk, 1) == 0 && CHECK_OK(wf_eval(&tk, 1)));
    /* negative kth counts from the end */
    const double v[5] = {4, 1, 3, 0, 2};
    const int64_t five = 5;
    wf_array *a = conf_array(v, &five, 1, WF_DTYPE_F32);
    wf_array *p = wf_partition(a, -1, 0);
    double last = 0;
    const int64_t s4 = 4, s5 = 5, one = 1;
    CHECK_OK(wf_array_item(wf_slice(p, &s4, &s5, &one), &last));
    CHECK_NEAR(last, 4, 0);
    /* errors */
    conf_check_error(wf_sort(a, 1), WF_ERR_AXIS, "wf_sort");
    conf_check_error(wf_partition(a, 5, 0), WF_ERR_INVALID_ARGUMENT, "wf_partition");
    conf_check_error(wf_partition(a, -6, 0), WF_ERR_INVALID_ARGUMENT, "wf_partition");
    conf_check_error(wf_topk(a, 6, 0), WF_ERR_INVALID_ARGUMENT, "wf_topk");
    conf_check_error(wf_argtopk(a, -1, 0), WF_ERR_INVALID_ARGUMENT, "wf_argtopk");
    wf_array *s = wf_scalar(1, WF_DTYPE_F32);
    conf_check_error(wf_argsort(s, 0), WF_ERR_AXIS, "wf_argsort");
    conf_check_error(wf_sort(NULL, 0), WF_ERR_NULL_ARGUMENT, "wf_sort");
    wf_scope_end();
}

/* ---------------------------------------------------------------- scans */

static double ref_identity(int op, wf_dtype d)
{
    if (op == 2 || wf__dtype_is_float(d))
        return op == 1 ? INFINITY : -INFINITY;
    switch (d) {
    case WF_DTYPE_BOOL: return op == 0 ? 0 : 1;
    case WF_DTYPE_U8: return op == 0 ? 0 : 255;
    case WF_DTYPE_I8: return op == 0 ? INT8_MIN : INT8_MAX;
    case WF_DTYPE_I16: return op == 0 ? INT16_MIN : INT16_MAX;
    case WF_DTYPE_U16: return op == 0 ? 0 : UINT16_MAX;
    case WF_DTYPE_I32: return op == 0 ? INT32_MIN : INT32_MAX;
    case WF_DTYPE_U32: return op == 0 ? 0 : UINT32_MAX;
    case WF_DTYPE_U64: return op == 0 ? 0 : (double)UINT64_MAX;
    default: return op == 0 ? (double)INT64_MIN : (double)INT64_MAX;
    }
}

static double ref_step(int op, double c, double x)
{
    if (isnan(c) || isnan(x))
        return NAN;
    if (op == 0)
        return x > c ? x : c;
    if (op == 1)
        return x < c ? x : c;
    if (c == -INFINITY)
        return x;
    const double m = c > x ? c : x;
    return m + log1p(exp(-fabs(c - x)));
}

static void test_scans(void)
{
    const int64_t shape[3] = {4, 3, 6};
    for (int t = 0; t < NDTYPES; t++)
        for (int op = 0; op < 3; op++) {
            wf_scope_begin();
            const wf_dtype d = all_dtypes[t];
            double *v = test_values(72, d, 7 + t);
            if (op == 2)
                for (int i = 0; i < 72; i++)
                    v[i] = isnan(v[i]) && i != 3 ? 1 : v[i];
            wf_array *a = t % 2 ? conf_strided(v, shape, 3, d) : conf_array(v, shape, 3, d);
            const wf_dtype od = op == 2 && !wf__dtype_is_float(d) ? WF_DTYPE_F32 : d;
            for (int axis = 0; axis < 3; axis++)
                for (int flags = 0; flags < 4; flags++) {
                    const bool reverse = flags & 1, inclusive = flags & 2;
                    const int64_t n = shape[axis], rows = 72 / n;
                    double want[72];
                    for (int64_t r = 0; r < rows; r++) {
                        double c = ref_identity(op, d);
                        for (int64_t j = 0; j < n; j++) {
                            const int64_t i = reverse ? n - 1 - j : j;
                            const int64_t at = flat_at(shape, 3, axis, r, i);
                            const double x = conf_round_to(v[at], od);
                            if (!inclusive)
                                want[at] = conf_round_to(c, od);
                            c = j == 0 ? x : ref_step(op, c, x);
                            if (inclusive)
                                want[at] = conf_round_to(c, od);
                        }
                    }
                    wf_array *r = op == 0   ? wf_cummax(a, axis, reverse, inclusive)
                                  : op == 1 ? wf_cummin(a, axis, reverse, inclusive)
                                            : wf_logcumsumexp(a, axis, reverse, inclusive);
                    const double tol = op == 2 ? conf_tolerance(od) : 0;
                    if (!conf_check(r, od, shape, 3, want, tol))
                        printf("      (op %d, %s, axis %d, reverse %d, inclusive %d)\n", op,
                               wf_dtype_name(d), axis, reverse, inclusive);
                }
            free(v);
            wf_scope_end();
        }
}

/* ---------------------------------------------------------------- transforms */

static int case_op, case_axis;
static bool case_reverse, case_inclusive;

static wf_array *build_sorting(wf_array *const *in)
{
    switch (case_op) {
    case SORT: return wf_sort(in[0], case_axis);
    case PARTITION: return wf_partition(in[0], 2, case_axis);
    default: return wf_topk(in[0], 3, case_axis);
    }
}

/* An exclusive scan's first output is +-inf: replaced by 0 so finite
 * differences stay finite (that output has no gradient either way). */
static wf_array *build_scan(wf_array *const *in)
{
    wf_array *y = case_op == 0   ? wf_cummax(in[0], case_axis, case_reverse, case_inclusive)
                  : case_op == 1 ? wf_cummin(in[0], case_axis, case_reverse, case_inclusive)
                                 : wf_logcumsumexp(in[0], case_axis, case_reverse, case_inclusive);
    if (case_inclusive || !y)
        return y;
    wf_array *zero = wf_scalar(0, WF_DTYPE_F64), *inf = wf_isinf(y);
    wf_array *r = wf_where(inf, zero, y);
    wf_release(zero);
    wf_release(inf);
    wf_release(y);
    return r;
}

static wf_array *build_argsort_as_float(wf_array *const *in)
{
    return wf_astype(wf_argsort(in[0], case_axis), WF_DTYPE_F64);
}

static void check_case(const tu_case *c, bool grads)
{
    wf_scope_begin();
    wf_array *in = tu_input(c->shapes[0], c->ndims[0], c->lo, c->hi, 40, true);
    wf_array *t = tu_input(c->shapes[0], c->ndims[0], -1, 1, 50, false);
    wf_array *y = c->build(&in);
    if (CHECK_NOT_NULL(y)) {
        wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, 60, false);
        if (grads && (!tu_check_vjp(c, &in, u, 1e-6, NULL) || !tu_check_jvp(c, &in, &t, 1e-6, NULL)))
            printf("      (%s op %d axis %d reverse %d inclusive %d)\n", c->name, case_op,
                   case_axis, case_reverse, case_inclusive);
        const int ax0 = 0, ax1 = 1;
        tu_check_vmap(c, &ax0, 3, 70);
        tu_check_vmap(c, &ax1, 2, 71);
    }
    wf_scope_end();
}

static void test_transforms(void)
{
    for (case_op = SORT; case_op <= TOPK; case_op += 2)
        for (case_axis = 0; case_axis < 2; case_axis++) {
            const tu_case c = {"sorting", build_sorting, 1, {2}, {{4, 5}}, -3, 3};
            check_case(&c, true);
        }
    case_axis = 1;
    const tu_case as = {"argsort", build_argsort_as_float, 1, {2}, {{4, 5}}, -3, 3};
    check_case(&as, false);
    for (case_op = 0; case_op < 3; case_op++)
        for (int flags = 0; flags < 4; flags++) {
            case_reverse = flags & 1;
            case_inclusive = flags & 2;
            case_axis = flags % 2;
            const tu_case c = {"scan", build_scan, 1, {2}, {{5, 6}}, -3, 3};
            check_case(&c, true);
        }
}

/* ---------------------------------------------------------------- compile */

static wf_status sampler(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_topk(in[0], 3, -1);
    out[1] = wf_argsort(in[0], -1);
    out[2] = wf_cummax(in[0], -1, false, true);
    *nout = 3;
    return out[0] && out[1] && out[2] ? WF_OK : wf_last_error();
}

/* Traced once, replayed with other values: the uncompiled results. */
static void test_compiled(void)
{
    wf_scope_begin();
    wf_fn *f = wf_fn_new(sampler, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    const int64_t shape[2] = {4, 9};
    for (uint32_t seed = 1; seed <= 3; seed++) {
        wf_array *x = tu_input(shape, 2, -5, 5, seed, seed == 2), *got[3], *want[3];
        size_t ng = 3, nw = 3;
        if (!CHECK_OK(wf_fn_call(cf, &x, 1, got, &ng)) || !CHECK_OK(wf_fn_call(f, &x, 1, want, &nw)))
            break;
        for (int i = 0; i < 3; i++) {
            double *w = conf_read(want[i]);
            conf_check(got[i], wf_array_dtype(want[i]), wf_array_shape(want[i]),
                       wf_array_ndim(want[i]), w, 0);
            free(w);
        }
    }
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cf, &s));
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, 2);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_scope_end();
}

static wf_status sort_fn(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_logcumsumexp(wf_sort(in[0], 0), 0, true, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* Shapeless: one trace serves every length. */
static void test_compiled_shapeless(void)
{
    wf_scope_begin();
    wf_fn *f = wf_fn_new(sort_fn, NULL, NULL);
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *cf = wf_compile(f, &o);
    for (int64_t n = 3; n <= 40; n += 37) {
        wf_array *x = tu_input(&n, 1, -2, 2, (uint32_t)n, false), *got = NULL, *want = NULL;
        size_t one = 1;
        if (!CHECK_OK(wf_fn_call(cf, &x, 1, &got, &one)) || !CHECK_OK(wf_fn_call(f, &x, 1, &want, &one)))
            break;
        double *w = conf_read(want);
        conf_check(got, WF_DTYPE_F64, &n, 1, w, 1e-15);
        free(w);
    }
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cf, &s));
    CHECK_EQ_INT(s.traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_every_dtype_and_axis);
    RUN_TEST(test_long_and_short_rows);
    RUN_TEST(test_one_long_row);
    RUN_TEST(test_vectorized_switch_lengths);
    RUN_TEST(test_f32_key_mapping);
    RUN_TEST(test_edges_and_errors);
    RUN_TEST(test_scans);
    RUN_TEST(test_transforms);
    RUN_TEST(test_compiled);
    RUN_TEST(test_compiled_shapeless);
    return TEST_SUMMARY();
}
