/*
 * conformance.h - helpers for op conformance tests (ops against plain
 * references computed in the test with loops over doubles), in the spirit of
 * ggml's backend-vs-reference tests. Header-only; include after harness.h.
 *
 *   wf_array *x = conf_array(values, shape, 2, WF_DTYPE_F16);   // exact input
 *   wf_array *xt = conf_transposed(values_t, shape, 2, dtype);   // same values, strided
 *   conf_check(wf_exp(x), WF_DTYPE_F16, shape, 2, want, conf_tolerance(WF_DTYPE_F16));
 */
#ifndef WEFT_TESTS_CONFORMANCE_H
#define WEFT_TESTS_CONFORMANCE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "harness.h"

static inline int64_t conf_size(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* A READY array of `dtype` holding `values` (row-major) converted. */
static inline wf_array *conf_array(const double *values, const int64_t *shape, int ndim,
                                   wf_dtype dtype)
{
    int64_t n = conf_size(shape, ndim);
    void *buf = calloc((size_t)n + 1, 8);
    for (int64_t i = 0; i < n; i++)
        wf__store_from_double(buf, dtype, i, values[i]);
    wf_array *a = wf_array_from_data(buf, shape, ndim, dtype);
    free(buf);
    return a;
}

/* The same logical array as conf_array(values, shape, ndim, dtype), but a
 * non-contiguous view: stored transposed (last two axes swapped) and viewed
 * back through wf_transpose. For ndim < 2 it is a stride-2 slice instead. */
static inline wf_array *conf_strided(const double *values, const int64_t *shape, int ndim,
                                     wf_dtype dtype)
{
    int64_t n = conf_size(shape, ndim);
    if (ndim < 2) { /* interleave with junk, then take every other element */
        int64_t len = ndim == 1 ? shape[0] : 1;
        double *wide = calloc((size_t)(2 * len + 1), sizeof *wide);
        for (int64_t i = 0; i < len; i++) {
            wide[2 * i] = values[i];
            wide[2 * i + 1] = -999;
        }
        int64_t wide_shape = 2 * len;
        wf_array *base = conf_array(wide, &wide_shape, 1, dtype);
        int64_t start = 0, stop = 2 * len, step = 2;
        wf_array *view = wf_slice(base, &start, &stop, &step);
        wf_release(base);
        free(wide);
        if (ndim == 0) {
            wf_array *scalar = wf_reshape(view, NULL, 0);
            wf_release(view);
            return scalar;
        }
        return view;
    }
    int64_t tshape[WF_MAX_NDIM];
    memcpy(tshape, shape, (size_t)ndim * sizeof *shape);
    tshape[ndim - 1] = shape[ndim - 2];
    tshape[ndim - 2] = shape[ndim - 1];
    int64_t rows = shape[ndim - 2], cols = shape[ndim - 1], plane = rows * cols;
    double *t = malloc(((size_t)n + 1) * sizeof *t);
    for (int64_t i = 0; i < n; i++) {
        int64_t p = i / (plane ? plane : 1), r = (i % plane) / cols, c = i % cols;
        t[p * plane + c * rows + r] = values[i];
    }
    wf_array *stored = conf_array(t, tshape, ndim, dtype);
    free(t);
    int perm[WF_MAX_NDIM];
    for (int d = 0; d < ndim; d++)
        perm[d] = d;
    perm[ndim - 1] = ndim - 2;
    perm[ndim - 2] = ndim - 1;
    wf_array *view = wf_transpose(stored, perm, ndim);
    wf_release(stored);
    return view;
}

/* Deterministic pseudo-random doubles in [lo, hi) (caller frees). */
static inline double *conf_values(int64_t n, double lo, double hi, uint32_t seed)
{
    double *v = malloc(((size_t)n + 1) * sizeof *v);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v[i] = lo + (hi - lo) * (double)(s % 1000000u) / 1e6;
    }
    return v;
}

/* The value `v` takes when stored in `dtype`. */
static inline double conf_round_to(double v, wf_dtype dtype)
{
    uint64_t cell = 0;
    wf__store_from_double(&cell, dtype, 0, v);
    return wf__load_as_double(&cell, dtype, 0);
}

/* A whole number v wrapped into an integer dtype of at most 32 bits as
 * two's complement arithmetic wraps it (other dtypes: v unchanged). */
static inline double conf_wrap_to(double v, wf_dtype dtype)
{
    const size_t bytes = wf_dtype_size(dtype);
    const bool integer = wf__dtype_is_signed_int(dtype) || wf__dtype_is_unsigned_int(dtype);
    if (!integer || bytes > 4)
        return v;
    const double m = ldexp(1, 8 * (int)bytes);
    double r = fmod(fmod(v, m) + m, m);
    if (wf__dtype_is_signed_int(dtype) && r >= m / 2)
        r -= m;
    return r;
}

/* Deterministic whole numbers in [-50, 50) (non-negative for u8) as `dtype`
 * stores them (bool: 0/1) (caller frees). */
static inline double *conf_integer_values(int64_t n, wf_dtype dtype, uint32_t seed)
{
    double *v = conf_values(n, -50, 50, seed);
    for (int64_t i = 0; i < n; i++) {
        v[i] = floor(v[i]);
        if (dtype == WF_DTYPE_U8)
            v[i] = fabs(v[i]);
        v[i] = conf_round_to(v[i], dtype);
    }
    return v;
}

/* Row-major flat index <-> multi-index. */
static inline void conf_unravel(int64_t flat, const int64_t *shape, int ndim, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
}

static inline int64_t conf_ravel(const int64_t *idx, const int64_t *shape, int ndim)
{
    int64_t flat = 0;
    for (int d = 0; d < ndim; d++)
        flat = flat * shape[d] + idx[d];
    return flat;
}

/* Relative tolerance of a result in `dtype` (0: exact). */
static inline double conf_tolerance(wf_dtype d)
{
    switch (d) {
    case WF_DTYPE_F16: return 2e-3;
    case WF_DTYPE_BF16: return 1e-2;
    case WF_DTYPE_F32: return 2e-6;
    case WF_DTYPE_F64: return 1e-12;
    default: return 0;
    }
}

/* Evaluates `a` and reads its elements as doubles (caller frees). */
static inline double *conf_read(wf_array *a)
{
    int64_t n = wf_array_size(a);
    size_t bytes = wf_array_nbytes(a);
    void *raw = malloc(bytes + 8);
    double *out = malloc(((size_t)n + 1) * sizeof *out);
    if (wf_array_copy_to(a, raw, bytes) != WF_OK) {
        free(raw);
        free(out);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = wf__load_as_double(raw, wf_array_dtype(a), i);
    free(raw);
    return out;
}

/* Checks dtype, shape and values (relative tolerance `tol`, at least
 * absolute `tol` near 0; NaN equals NaN, infinities must match), then
 * releases `a`. Prints at most 5 mismatches. */
static inline bool conf_check(wf_array *a, wf_dtype dtype, const int64_t *shape, int ndim,
                              const double *want, double tol)
{
    if (!CHECK_NOT_NULL(a))
        return false;
    bool ok = CHECK_EQ_INT(wf_array_dtype(a), dtype) && CHECK_EQ_INT(wf_array_ndim(a), ndim);
    for (int d = 0; ok && d < ndim; d++)
        ok = CHECK_EQ_INT(wf_array_shape(a)[d], shape[d]);
    double *got = ok ? conf_read(a) : NULL;
    if (ok && !CHECK_NOT_NULL(got))
        ok = false;
    int bad = 0;
    for (int64_t i = 0; ok && i < conf_size(shape, ndim) && bad < 5; i++) {
        double t = tol * (fabs(want[i]) > 1 ? fabs(want[i]) : 1);
        if (!CHECK_NEAR(got[i], want[i], t)) {
            printf("      at flat index %lld\n", (long long)i);
            bad++;
        }
    }
    free(got);
    wf_release(a);
    return ok && bad == 0;
}

/* Checks that `result` is NULL with status `want` and a message naming
 * `op`, clears the error, and checks the library still computes. */
static inline void conf_check_error(const void *result, wf_status want, const char *op)
{
    CHECK(result == NULL);
    CHECK_EQ_INT(wf_last_error(), want);
    if (op)
        CHECK_STR_CONTAINS(wf_last_error_message(), op);
    wf_clear_error();
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *two = wf_add(one, one);
    double v = 0;
    CHECK_OK(wf_array_item(two, &v));
    CHECK_NEAR(v, 2, 0);
    wf_release(one);
    wf_release(two);
}

#endif
