/*
 * harness.h - a tiny header-only test harness.
 *
 *   static void test_add(void) { CHECK_EQ_INT(1 + 1, 2); }
 *   int main(void) { RUN_TEST(test_add); return TEST_SUMMARY(); }
 *
 * A failed check prints file:line and both sides, marks the running test
 * failed and carries on. Every CHECK* is an expression that yields true when
 * the check passed, so `if (!CHECK_NOT_NULL(a)) return;` works. Checks may be
 * made from any thread; output goes to stdout, flushed after each line.
 */
#ifndef WEFT_TESTS_HARNESS_H
#define WEFT_TESTS_HARNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "weft.h"

struct wf_test_state {
    atomic_int checks_failed; /* failed checks in the running test */
    int passed, failed;       /* tests */
};

static inline struct wf_test_state *wf_test_state(void) {
    static struct wf_test_state state;
    return &state;
}

__attribute__((format(printf, 3, 4)))
static inline bool wf_test_fail(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("    %s:%d: %s\n", file, line, msg); /* one call: lines never interleave */
    fflush(stdout);
    atomic_fetch_add(&wf_test_state()->checks_failed, 1);
    return false;
}

static inline bool wf_test_check(const char *f, int l, const char *expr, bool ok) {
    return ok || wf_test_fail(f, l, "CHECK(%s) failed", expr);
}

static inline bool wf_test_eq_int(const char *f, int l, const char *ea, const char *eb,
                                  int64_t a, int64_t b) {
    return a == b || wf_test_fail(f, l, "CHECK_EQ_INT(%s, %s): %" PRId64 " != %" PRId64,
                                  ea, eb, a, b);
}

static inline bool wf_test_eq_size(const char *f, int l, const char *ea, const char *eb,
                                   size_t a, size_t b) {
    return a == b || wf_test_fail(f, l, "CHECK_EQ_SIZE(%s, %s): %zu != %zu", ea, eb, a, b);
}

static inline bool wf_test_near(const char *f, int l, const char *ea, const char *eb,
                                double a, double b, double tol) {
    if ((isnan(a) && isnan(b)) || a == b || fabs(a - b) <= tol) return true;
    return wf_test_fail(f, l, "CHECK_NEAR(%s, %s): %.17g vs %.17g (diff %.3g > tol %.3g)",
                        ea, eb, a, b, fabs(a - b), tol);
}

static inline bool wf_test_str_contains(const char *f, int l, const char *eh, const char *hay,
                                        const char *needle) {
    if (hay && needle && strstr(hay, needle)) return true;
    return wf_test_fail(f, l, "CHECK_STR_CONTAINS(%s): \"%s\" does not contain \"%s\"", eh,
                        hay ? hay : "(null)", needle ? needle : "(null)");
}

static inline bool wf_test_status(const char *f, int l, const char *expr, wf_status got,
                                  wf_status want) {
    if (got == want) return true;
    char msg[512]; /* copy first: the message is valid until the next weft call */
    snprintf(msg, sizeof msg, "%s", wf_last_error_message());
    return wf_test_fail(f, l, "%s returned %s (%d), expected %s (%d); last error: \"%s\"", expr,
                        wf_status_name(got), (int)got, wf_status_name(want), (int)want, msg);
}

/* The call failed with `want` and a message containing `needle`; the
 * error is cleared afterwards, so the next check starts clean. */
static inline bool wf_test_error(const char *f, int l, const char *expr, wf_status got,
                                 wf_status want, const char *needle) {
    char msg[512]; /* copy first: the message is valid until the next weft call */
    snprintf(msg, sizeof msg, "%s", wf_last_error_message());
    bool ok = wf_test_status(f, l, expr, got, want);
    ok = (strstr(msg, needle) != NULL ||
          wf_test_fail(f, l, "%s: message \"%s\" does not contain \"%s\"", expr, msg, needle)) &&
         ok;
    wf_clear_error();
    return ok;
}

static inline bool wf_test_not_null(const char *f, int l, const char *expr, const void *p) {
    if (p) return true;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wf_last_error_message());
    return wf_test_fail(f, l, "CHECK_NOT_NULL(%s): NULL; last error %s: \"%s\"", expr,
                        wf_status_name(wf_last_error()), msg);
}

static inline bool wf_test_null_with(const char *f, int l, const char *expr, const void *p,
                                     wf_status want) {
    wf_status got = wf_last_error();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wf_last_error_message());
    wf_clear_error();
    if (!p && got == want) return true;
    return wf_test_fail(f, l, "CHECK_NULL_WITH(%s): got %s with %s (\"%s\"), expected NULL with %s",
                        expr, p ? "non-NULL" : "NULL", wf_status_name(got), msg,
                        wf_status_name(want));
}

static inline void wf_test_run(const char *name, void (*fn)(void)) {
    struct wf_test_state *s = wf_test_state();
    atomic_store(&s->checks_failed, 0);
    wf_clear_error();
    struct timespec start, end;
    timespec_get(&start, TIME_UTC);
    fn();
    timespec_get(&end, TIME_UTC);
    bool ok = atomic_load(&s->checks_failed) == 0;
    if (ok) s->passed++; else s->failed++;
    /* The time lets a slow case be found in any build's log (CI time). */
    double seconds = (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9;
    printf("  %s %s (%.2fs)\n", ok ? "ok  " : "FAIL", name, seconds);
    fflush(stdout);
}

/* Exit status for main: 0 if every test passed (and at least one ran). */
static inline int wf_test_summary(const char *file) {
    struct wf_test_state *s = wf_test_state();
    const char *base = strrchr(file, '/');
    printf("%s: %d passed, %d failed\n", base ? base + 1 : file, s->passed, s->failed);
    if (s->passed + s->failed == 0) printf("no tests ran\n");
    fflush(stdout);
    return s->failed == 0 && s->passed > 0 ? 0 : 1;
}

/* Builds that run slowly, where heavy cases shrink as they do under the
 * sanitizers: also the coverage build (-O0, instrumented; scripts/coverage.sh
 * defines WEFT_COVERAGE), whose tests must finish within its time limit
 * for their counts to be written at exit. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(WEFT_COVERAGE)
#define WF_TEST_SLOW_BUILD 1
#endif

/* Whether a test that loops over a kernel's ISA variants runs variant `isa`
 * (`best` being the one the dispatcher picks). ThreadSanitizer builds run
 * only the best: the races TSan looks for come from how a kernel's work is
 * split between threads, which no variant changes, and each variant (the
 * scalar baseline most) costs tens of seconds there. Release and ASan builds
 * run every variant the CPU supports. */
static inline bool wf_test_runs_isa(int isa, int best) {
#ifdef __SANITIZE_THREAD__
    return isa == best;
#else
    (void)isa;
    (void)best;
    return true;
#endif
}

#define WF_TEST_AT_ __FILE__, __LINE__
#define CHECK(cond) wf_test_check(WF_TEST_AT_, #cond, (cond) ? true : false)
#define CHECK_EQ_INT(a, b) wf_test_eq_int(WF_TEST_AT_, #a, #b, (int64_t)(a), (int64_t)(b))
#define CHECK_EQ_SIZE(a, b) wf_test_eq_size(WF_TEST_AT_, #a, #b, (size_t)(a), (size_t)(b))
#define CHECK_NEAR(a, b, tol) \
    wf_test_near(WF_TEST_AT_, #a, #b, (double)(a), (double)(b), (double)(tol))
#define CHECK_STR_CONTAINS(hay, needle) wf_test_str_contains(WF_TEST_AT_, #hay, (hay), (needle))
#define CHECK_STATUS(expr, want) wf_test_status(WF_TEST_AT_, #expr, (expr), (want))
#define CHECK_OK(expr) CHECK_STATUS(expr, WF_OK)
#define CHECK_ERROR(expr, want, needle) \
    wf_test_error(WF_TEST_AT_, #expr, (expr), (want), (needle))
#define CHECK_NOT_NULL(p) wf_test_not_null(WF_TEST_AT_, #p, (const void *)(p))
#define CHECK_NULL_WITH(expr, want) \
    wf_test_null_with(WF_TEST_AT_, #expr, (const void *)(expr), (want))
#define RUN_TEST(fn) wf_test_run(#fn, fn)
/* RUN_TEST inside a scope: the temporaries of the test's expressions are
 * released when it ends. */
#define RUN_SCOPED(fn)    \
    do {                  \
        wf_scope_begin(); \
        RUN_TEST(fn);     \
        wf_scope_end();   \
    } while (0)
#define TEST_SUMMARY() wf_test_summary(__FILE__)

#endif /* WEFT_TESTS_HARNESS_H */
