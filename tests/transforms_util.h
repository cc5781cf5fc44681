/*
 * transforms_util.h - helpers for the transform tests: functions made from
 * op builders, finite differences, and the vjp / jvp / vmap checks every
 * differentiable op goes through. Header-only; include after conformance.h.
 *
 * A case is an op builder over float64 inputs of given shapes, with the
 * domain its inputs are drawn from (so finite differences stay away from
 * kinks). Constant operands (indices, masks) live inside the builder.
 */
#ifndef WEFT_TESTS_TRANSFORMS_UTIL_H
#define WEFT_TESTS_TRANSFORMS_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "harness.h"

enum { TU_MAX_IN = 4 };

typedef wf_array *(*tu_build)(wf_array *const *in);

typedef struct tu_case {
    const char *name;
    tu_build build; /* a new reference, or NULL with the error recorded */
    int nin;
    int ndims[TU_MAX_IN];
    int64_t shapes[TU_MAX_IN][6];
    double lo, hi; /* inputs are drawn from [lo, hi) */
} tu_case;

static wf_status tu_case_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)n;
    const tu_case *c = payload;
    out[0] = c->build(in);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static inline wf_fn *tu_case_fn(const tu_case *c)
{
    return wf_fn_new(tu_case_call, (void *)c, NULL);
}

/* A float64 array of `shape` with values in [lo, hi); strided: a
 * non-contiguous view of the same values. */
static inline wf_array *tu_input(const int64_t *shape, int ndim, double lo, double hi,
                                 uint32_t seed, bool strided)
{
    int64_t n = conf_size(shape, ndim);
    double *v = conf_values(n, lo, hi, seed);
    wf_array *a = strided ? conf_strided(v, shape, ndim, WF_DTYPE_F64)
                          : conf_array(v, shape, ndim, WF_DTYPE_F64);
    free(v);
    return a;
}

/* Elements of `a` as doubles (caller frees); NULL on error. */
static inline double *tu_read(wf_array *a) { return a ? conf_read(a) : NULL; }

/* Relative closeness with an absolute floor of tol. */
static inline bool tu_close(double got, double want, double tol)
{
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1) ||
           (isnan(got) && isnan(want));
}

/* Checks got[0..n) against want, naming `what`; prints the first misses. */
static inline bool tu_check_values(const char *name, const char *what, const double *got,
                                   const double *want, int64_t n, double tol)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tu_close(got[i], want[i], tol))
            continue;
        if (bad++ < 4)
            wf_test_fail(__FILE__, __LINE__, "%s: %s[%lld] = %.12g, want %.12g", name, what,
                         (long long)i, got[i], want[i]);
    }
    return bad == 0;
}

/* f(inputs) as doubles (caller frees), evaluated directly. */
static inline double *tu_eval_case(const tu_case *c, wf_array *const *in)
{
    wf_array *y = c->build(in);
    double *v = tu_read(y);
    wf_release(y);
    return v;
}

/* in with element k of input i moved by delta (a new array; caller frees). */
static inline wf_array *tu_perturbed(wf_array *x, int64_t k, double delta)
{
    double *v = tu_read(x);
    v[k] += delta;
    wf_array *p = conf_array(v, wf_array_shape(x), wf_array_ndim(x), WF_DTYPE_F64);
    free(v);
    return p;
}

/* x + s * dir (float64). */
static inline wf_array *tu_axpy(wf_array *x, double s, wf_array *dir)
{
    wf_array *sc = wf_scalar(s, WF_DTYPE_F64);
    wf_array *m = wf_multiply(dir, sc);
    wf_array *r = wf_add(x, m);
    wf_release(sc);
    wf_release(m);
    return r;
}

static inline double tu_dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static const double TU_EPS = 1e-6;

/* The vjp of case c at `in` with cotangent u, against central differences
 * of <u, f(x)>; grads_out (optional) receives the gradients (caller frees
 * each). */
static inline bool tu_check_vjp(const tu_case *c, wf_array *const *in, wf_array *u, double tol,
                                double **grads_out)
{
    wf_fn *fn = tu_case_fn(c);
    wf_array *g[TU_MAX_IN] = {NULL};
    wf_array *y = NULL;
    bool ok = CHECK_OK(wf_vjp(fn, in, (size_t)c->nin, &u, 1, &y, g));
    wf_fn_release(fn);
    double *uv = tu_read(u);
    const int64_t m = wf_array_size(u);
    double *yv = ok ? tu_read(y) : NULL;
    double *direct = ok ? tu_eval_case(c, in) : NULL;
    if (ok)
        ok = CHECK(yv && direct) && tu_check_values(c->name, "vjp output", yv, direct, m, 1e-12);
    for (int i = 0; ok && i < c->nin; i++) {
        const int64_t n = wf_array_size(in[i]);
        double *gv = tu_read(g[i]);
        double *fd = malloc(((size_t)n + 1) * sizeof *fd);
        ok = CHECK(gv != NULL) && CHECK_EQ_INT(wf_array_ndim(g[i]), wf_array_ndim(in[i]));
        for (int64_t k = 0; ok && k < n; k++) {
            wf_array *moved[TU_MAX_IN];
            double l[2];
            for (int s = 0; s < 2; s++) {
                for (int j = 0; j < c->nin; j++)
                    moved[j] = j == i ? tu_perturbed(in[j], k, s ? -TU_EPS : TU_EPS) : in[j];
                double *fv = tu_eval_case(c, moved);
                l[s] = fv ? tu_dot(uv, fv, m) : NAN;
                free(fv);
                wf_release(moved[i]);
            }
            fd[k] = (l[0] - l[1]) / (2 * TU_EPS);
        }
        char what[32];
        snprintf(what, sizeof what, "grad %d", i);
        if (ok)
            ok = tu_check_values(c->name, what, gv, fd, n, tol);
        if (grads_out)
            grads_out[i] = gv;
        else
            free(gv);
        free(fd);
    }
    for (int i = 0; i < c->nin; i++)
        wf_release(g[i]);
    wf_release(y);
    free(uv);
    free(yv);
    free(direct);
    return ok;
}

/* The jvp of case c at `in` along tangents t, against central differences
 * of f along t; tangent_out (optional) receives the output tangent. */
static inline bool tu_check_jvp(const tu_case *c, wf_array *const *in, wf_array *const *t,
                                double tol, double **tangent_out)
{
    wf_fn *fn = tu_case_fn(c);
    wf_array *y = NULL, *ty = NULL;
    size_t nout = 1;
    bool ok = CHECK_OK(wf_jvp(fn, in, (size_t)c->nin, t, &y, &ty, &nout)) &&
              CHECK_EQ_INT(nout, 1);
    wf_fn_release(fn);
    double *tv = ok ? tu_read(ty) : NULL;
    const int64_t m = wf_array_size(ty);
    double *fd = NULL;
    if (ok && CHECK(tv != NULL)) {
        wf_array *plus[TU_MAX_IN], *minus[TU_MAX_IN];
        for (int j = 0; j < c->nin; j++) {
            plus[j] = tu_axpy(in[j], TU_EPS, t[j]);
            minus[j] = tu_axpy(in[j], -TU_EPS, t[j]);
        }
        double *fp = tu_eval_case(c, plus), *fm = tu_eval_case(c, minus);
        fd = malloc(((size_t)m + 1) * sizeof *fd);
        for (int64_t k = 0; k < m; k++)
            fd[k] = fp && fm ? (fp[k] - fm[k]) / (2 * TU_EPS) : NAN;
        ok = tu_check_values(c->name, "jvp", tv, fd, m, tol);
        for (int j = 0; j < c->nin; j++) {
            wf_release(plus[j]);
            wf_release(minus[j]);
        }
        free(fp);
        free(fm);
    } else {
        ok = false;
    }
    free(fd);
    if (tangent_out)
        *tangent_out = tv;
    else
        free(tv);
    wf_release(y);
    wf_release(ty);
    return ok;
}


/* vmap of case c over `batch` examples with in_axes (one per input, or
 * WF_VMAP_NOT_MAPPED) against building the op per example and stacking the
 * results on axis 0. */
static inline bool tu_check_vmap(const tu_case *c, const int *in_axes, int64_t batch,
                                 uint32_t seed)
{
    enum { MAXB = 8 };
    wf_array *ex[MAXB][TU_MAX_IN] = {{NULL}};
    wf_array *batched[TU_MAX_IN] = {NULL};
    wf_array *ys[MAXB] = {NULL};
    bool ok = true;
    for (int64_t b = 0; b < batch; b++)
        for (int i = 0; i < c->nin; i++) {
            const bool mapped = in_axes[i] != WF_VMAP_NOT_MAPPED;
            ex[b][i] = mapped || b == 0
                           ? tu_input(c->shapes[i], c->ndims[i], c->lo, c->hi,
                                      seed + (uint32_t)(b * 31 + i), false)
                           : wf_retain(ex[0][i]);
        }
    for (int i = 0; i < c->nin; i++) {
        wf_array *col[MAXB];
        for (int64_t b = 0; b < batch; b++)
            col[b] = ex[b][i];
        batched[i] = in_axes[i] == WF_VMAP_NOT_MAPPED ? wf_retain(ex[0][i])
                                                     : wf_stack(col, (int)batch, in_axes[i]);
        ok = ok && CHECK_NOT_NULL(batched[i]);
    }
    for (int64_t b = 0; ok && b < batch; b++)
        ok = CHECK_NOT_NULL(ys[b] = c->build(ex[b]));
    wf_array *want = ok ? wf_stack(ys, (int)batch, 0) : NULL;
    wf_fn *fn = tu_case_fn(c);
    wf_fn *vf = wf_vmap(fn, in_axes, (size_t)c->nin, NULL, 0);
    wf_array *got = NULL;
    size_t nout = 1;
    if (ok)
        ok = CHECK_OK(wf_fn_call(vf, batched, (size_t)c->nin, &got, &nout)) &&
             CHECK_EQ_INT(nout, 1) && CHECK_EQ_INT(wf_array_ndim(got), wf_array_ndim(want));
    for (int d = 0; ok && d < wf_array_ndim(want); d++)
        ok = CHECK_EQ_INT(wf_array_shape(got)[d], wf_array_shape(want)[d]);
    if (ok) {
        double *gv = tu_read(got), *wv = tu_read(want);
        ok = CHECK(gv && wv) &&
             tu_check_values(c->name, "vmap", gv, wv, wf_array_size(want), 1e-12);
        free(gv);
        free(wv);
    }
    if (!ok)
        printf("      (%s: vmap with in_axes %d %d %d %d)\n", c->name, in_axes[0],
               c->nin > 1 ? in_axes[1] : 0, c->nin > 2 ? in_axes[2] : 0,
               c->nin > 3 ? in_axes[3] : 0);
    wf_release(got);
    wf_release(want);
    wf_fn_release(vf);
    wf_fn_release(fn);
    for (int64_t b = 0; b < batch; b++) {
        wf_release(ys[b]);
        for (int i = 0; i < c->nin; i++)
            wf_release(ex[b][i]);
    }
    for (int i = 0; i < c->nin; i++)
        wf_release(batched[i]);
    return ok;
}


/* Case c under the transforms: vjp and jvp against finite differences
 * (float64, when fd), and vmap over 3 examples for every mix of batched
 * and shared inputs (a batched input 1 on axis 1, the others on axis 0)
 * against per-example results. Inputs from seeds 40.., tangents 50..,
 * cotangent 60, examples 70 + the mix. */
static inline void tu_check_case(const tu_case *c, bool fd)
{
    wf_scope_begin();
    wf_array *in[TU_MAX_IN], *t[TU_MAX_IN];
    for (int i = 0; i < c->nin; i++) {
        in[i] = tu_input(c->shapes[i], c->ndims[i], c->lo, c->hi, 40 + (uint32_t)i, i == 0);
        t[i] = tu_input(c->shapes[i], c->ndims[i], -1, 1, 50 + (uint32_t)i, false);
    }
    wf_array *y = c->build(in);
    if (CHECK_NOT_NULL(y) && fd) {
        wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, 60, false);
        if (!tu_check_vjp(c, in, u, 1e-6, NULL) || !tu_check_jvp(c, in, t, 1e-6, NULL))
            printf("      (%s)\n", c->name);
    }
    for (int bits = 1; bits < (1 << c->nin); bits++) {
        int axes[TU_MAX_IN];
        for (int i = 0; i < c->nin; i++)
            axes[i] = (bits >> i) & 1 ? (i == 1 ? 1 : 0) : WF_VMAP_NOT_MAPPED;
        tu_check_vmap(c, axes, 3, 70 + (uint32_t)bits);
    }
    wf_scope_end();
}

/* Central differences of a function with one input and a scalar first
 * output, at x (caller frees). */
static inline double *tu_fd_grad_fn(wf_fn *fn, wf_array *x)
{
    const int64_t n = wf_array_size(x);
    double *fd = malloc(((size_t)n + 1) * sizeof *fd);
    for (int64_t k = 0; k < n; k++) {
        double l[2] = {NAN, NAN};
        for (int s = 0; s < 2; s++) {
            wf_array *moved = tu_perturbed(x, k, s ? -TU_EPS : TU_EPS);
            wf_array *out[WF_FN_MAX_OUTPUTS];
            size_t nout = WF_FN_MAX_OUTPUTS;
            if (wf_fn_call(fn, &moved, 1, out, &nout) == WF_OK) {
                wf_array_item(out[0], &l[s]);
                for (size_t j = 0; j < nout; j++)
                    wf_release(out[j]);
            }
            wf_release(moved);
        }
        fd[k] = (l[0] - l[1]) / (2 * TU_EPS);
    }
    return fd;
}

/* sum(w * fn(x)[0]): turns a vector-valued function into a scalar one, so
 * its gradient (a vector-Jacobian product with w) can be checked. */
typedef struct tu_weighted {
    wf_fn *fn;
    wf_array *w;
} tu_weighted;

static wf_status tu_weighted_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    const tu_weighted *p = payload;
    wf_array *ys[WF_FN_MAX_OUTPUTS];
    size_t ny = WF_FN_MAX_OUTPUTS;
    wf_status st = wf_fn_call(p->fn, in, n, ys, &ny);
    if (st != WF_OK)
        return st;
    wf_array *m = wf_multiply(ys[0], p->w);
    out[0] = wf_sum(m, NULL, 0, false);
    *nout = 1;
    wf_release(m);
    for (size_t j = 0; j < ny; j++)
        wf_release(ys[j]);
    return out[0] ? WF_OK : wf_last_error();
}

static void tu_weighted_free(void *payload)
{
    tu_weighted *p = payload;
    wf_fn_release(p->fn);
    wf_release(p->w);
    free(p);
}

/* A new function sum(w * fn(x)[0]); takes its own references. */
static inline wf_fn *tu_weighted_fn(wf_fn *fn, wf_array *w)
{
    tu_weighted *p = malloc(sizeof *p);
    p->fn = wf_fn_retain(fn);
    p->w = wf_retain(w);
    return wf_fn_new(tu_weighted_call, p, tu_weighted_free);
}

#endif
