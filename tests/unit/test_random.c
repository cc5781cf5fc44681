/*
 * Random numbers: wf_random_key / split / seed and the samplers.
 *
 * A reference Threefry-2x32-20 written here from the published algorithm
 * (checked against the Random123 known-answer vectors) gives the exact bits
 * every sampler must use (the layout in src/prim/random.h), so results are
 * compared bit for bit with a single-threaded reference on arrays large
 * enough to be split over the intra-op pool: they cannot depend on the pool
 * size. Statistical checks use bounds of 5-6 standard deviations of the
 * estimate with fixed keys (deterministic, so never flaky). Threads drawing
 * with NULL keys get distinct streams and never race (TSan). Every bad input
 * gives NULL / a status with a message naming the op.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/dtype.h"
#include "harness.h"
#include "settle.h"
#include "conformance.h"
#include "runtime/pool.h"

/* ---------------------------------------------------------------- reference */

static uint32_t ref_rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* Threefry-2x32, 20 rounds: key schedule k0, k1, k0^k1^0x1BD11BDA; a key
 * injection before round 0 and after every 4 rounds, the i-th adding
 * ks[i % 3], ks[(i + 1) % 3] + i. */
static void ref_threefry(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t out[2])
{
    static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
    uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
    for (int r = 0; r < 20; r++) {
        x0 += x1;
        x1 = ref_rotl(x1, rot[r % 8]) ^ x0;
        if (r % 4 == 3) {
            const uint32_t s = (uint32_t)(r / 4 + 1);
            x0 += ks[s % 3];
            x1 += ks[(s + 1) % 3] + s;
        }
    }
    out[0] = x0;
    out[1] = x1;
}

static uint32_t ref_bits32(wf_key k, int64_t i)
{
    uint32_t o[2];
    const uint64_t j = (uint64_t)i >> 1;
    ref_threefry(k.words[0], k.words[1], (uint32_t)(j >> 32), (uint32_t)j, o);
    return o[i & 1];
}

static uint64_t ref_bits64(wf_key k, int64_t i)
{
    uint32_t o[2];
    ref_threefry(k.words[0], k.words[1], (uint32_t)((uint64_t)i >> 32), (uint32_t)i, o);
    return (uint64_t)o[0] << 32 | o[1];
}

__extension__ typedef unsigned __int128 ref_u128;

static double ref_u24(uint32_t w) { return (double)(w >> 8) * 0x1p-24; }
static double ref_u53(uint64_t w) { return (double)(w >> 11) * 0x1p-53; }

static bool key_equal(wf_key a, wf_key b)
{
    return a.words[0] == b.words[0] && a.words[1] == b.words[1];
}

/* Raw bytes of an evaluated array (caller frees). */
static void *raw_bytes(wf_array *a)
{
    size_t n = wf_array_nbytes(a);
    void *buf = malloc(n + 8);
    if (wf_array_copy_to(a, buf, n) != WF_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static bool same_bytes(wf_array *a, wf_array *b)
{
    if (wf_array_nbytes(a) != wf_array_nbytes(b))
        return false;
    void *x = raw_bytes(a), *y = raw_bytes(b);
    bool same = x && y && memcmp(x, y, wf_array_nbytes(a)) == 0;
    free(x);
    free(y);
    return same;
}

static const wf_dtype float_dtypes[] = {WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32,
                                        WF_DTYPE_F64};

/* ---------------------------------------------------------------- keys */

static void test_threefry_known_answers(void)
{
    /* Random123 kat_vectors, threefry2x32_20: counter, key -> result. */
    static const uint32_t kat[3][6] = {
        {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u, 0x6b200159u, 0x99ba4efeu},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x1cb996fcu, 0xbb002be7u},
        {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xc4923a9cu, 0x483df7a0u},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t o[2];
        ref_threefry(kat[t][2], kat[t][3], kat[t][0], kat[t][1], o);
        CHECK_EQ_INT(o[0], kat[t][4]);
        CHECK_EQ_INT(o[1], kat[t][5]);
        /* wf_random_split's child i is threefry(key, (0, i)): child 0 of
         * the key (k0, k1) encrypts counter (0, 0). */
        if (kat[t][0] == 0 && kat[t][1] == 0) {
            wf_key k = {{kat[t][2], kat[t][3]}}, c;
            CHECK_OK(wf_random_split(k, 1, &c));
            CHECK_EQ_INT(c.words[0], kat[t][4]);
            CHECK_EQ_INT(c.words[1], kat[t][5]);
        }
    }
}

static void test_key_and_split(void)
{
    wf_key k = wf_random_key(0x0123456789abcdefull);
    CHECK_EQ_INT(k.words[0], 0x01234567u);
    CHECK_EQ_INT(k.words[1], 0x89abcdefu);
    wf_key a[6], b[6];
    CHECK_OK(wf_random_split(k, 6, a));
    CHECK_OK(wf_random_split(k, 6, b));
    for (int i = 0; i < 6; i++) {
        uint32_t o[2];
        ref_threefry(k.words[0], k.words[1], 0, (uint32_t)i, o);
        CHECK_EQ_INT(a[i].words[0], o[0]);
        CHECK_EQ_INT(a[i].words[1], o[1]);
        CHECK(key_equal(a[i], b[i])); /* deterministic */
        CHECK(!key_equal(a[i], k));
        for (int j = 0; j < i; j++)
            CHECK(!key_equal(a[i], a[j]));
    }
    /* A prefix of a longer split is the shorter split. */
    wf_key c[2];
    CHECK_OK(wf_random_split(k, 2, c));
    CHECK(key_equal(c[0], a[0]) && key_equal(c[1], a[1]));
    CHECK_OK(wf_random_split(k, 0, NULL));
    CHECK(!key_equal(wf_random_key(1), wf_random_key(2)));
}

static void test_split_bad_inputs(void)
{
    wf_key out[2];
    CHECK_STATUS(wf_random_split(wf_random_key(1), -1, out), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_random_split");
    wf_clear_error();
    CHECK_STATUS(wf_random_split(wf_random_key(1), 2, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_random_split");
    wf_clear_error();
}

/* ---------------------------------------------------------------- exact bits */

/* Uniform of every float dtype, compared bit for bit with the reference on
 * an array large enough to be split over the pool (odd size: a half pair). */
static void test_uniform_exact(void)
{
    const wf_key key = wf_random_key(42);
    const int64_t n = (1 << 18) + 3;
    const double low = -1.5, high = 2.25;
    const uint64_t helped = wf__pool_chunks_helped();
    /* The largest value of each dtype below 2.25 (order of float_dtypes). */
    const double below_high[4] = {2.25 - 0x1p-9, 2.25 - 0x1p-6, 2.25 - 0x1p-22,
                                  2.25 - 0x1p-51};
    for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
        const wf_dtype dt = float_dtypes[t];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t i = 0; i < n; i++) {
            double u = dt == WF_DTYPE_F64 ? ref_u53(ref_bits64(key, i))
                                          : ref_u24(ref_bits32(key, i));
            double v = low + (high - low) * u;
            if (dt != WF_DTYPE_F64)
                v = (float)v;
            want[i] = conf_round_to(v, dt);
            if (want[i] >= high) /* rounding up to high is clamped below it */
                want[i] = below_high[t];
        }
        wf_array *a = wf_random_uniform(&n, 1, dt, low, high, &key);
        CHECK(conf_check(a, dt, &n, 1, want, 0));
        free(want);
    }
    if (wf__pool_size() > 1)
        CHECK(wf__pool_chunks_helped() > helped); /* the pool did take part */
}

static void test_normal_exact(void)
{
    const wf_key key = wf_random_key(7);
    const int64_t n = (1 << 17) + 1;
    const double loc = 0.5, scale = 2.0;
    for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
        const wf_dtype dt = float_dtypes[t];
        double *want = malloc((size_t)(n + 1) * sizeof *want);
        for (int64_t q = 0; 2 * q < n; q++) {
            double z0, z1;
            if (dt == WF_DTYPE_F64) {
                double u1 = 1.0 - ref_u53(ref_bits64(key, 2 * q));
                double u2 = ref_u53(ref_bits64(key, 2 * q + 1));
                double r = sqrt(-2.0 * log(u1)), th = 2 * M_PI * u2;
                z0 = r * cos(th);
                z1 = r * sin(th);
            } else {
                double u1 = 1.0 - ref_u24(ref_bits32(key, 2 * q));
                double u2 = ref_u24(ref_bits32(key, 2 * q + 1));
                double r = sqrt(-2.0 * log(u1)), th = 2 * M_PI * u2;
                z0 = r * cos(th);
                z1 = r * sin(th);
            }
            want[2 * q] = loc + scale * z0;
            want[2 * q + 1] = loc + scale * z1;
        }
        /* The kernel computes f32 and halves in float32: compare with a
         * tolerance of float rounding of r, cos and sin (absolute, as the
         * values are O(1)). */
        double tol = dt == WF_DTYPE_F64 ? 1e-12 : dt == WF_DTYPE_F32 ? 2e-5
                                                 : conf_tolerance(dt) * 8;
        wf_array *a = wf_random_normal(&n, 1, dt, loc, scale, &key);
        CHECK(conf_check(a, dt, &n, 1, want, tol));
        free(want);
    }
}

/* ---------------------------------------------------------------- statistics */

static void moments(const double *v, int64_t n, double *mean, double *var)
{
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++)
        s2 += (v[i] - *mean) * (v[i] - *mean);
    *var = s2 / (double)(n - 1);
}

static void test_normal_statistics(void)
{
    const int64_t n = 1 << 20;
    for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
        const wf_dtype dt = float_dtypes[t];
        const double loc = 3.0, scale = 2.0;
        wf_key key = wf_random_key(100 + t);
        wf_array *a = wf_random_normal(&n, 1, dt, loc, scale, &key);
        double *v = conf_read(a);
        if (!CHECK_NOT_NULL(v)) {
            wf_release(a);
            continue;
        }
        double mean, var;
        moments(v, n, &mean, &var);
        /* bf16 rounding (8 bits) adds variance ~ (ulp^2 / 12): allow for it. */
        const double rounding = dt == WF_DTYPE_BF16 ? 0.02 : dt == WF_DTYPE_F16 ? 0.002 : 0;
        CHECK_NEAR(mean, loc, 5 * scale / sqrt((double)n) + rounding);
        CHECK_NEAR(var, scale * scale,
                   5 * scale * scale * sqrt(2.0 / (double)n) + rounding * scale * 4);
        /* Tails exist and are sane: about 4.55% beyond 2 sigma. */
        int64_t beyond = 0;
        double maxabs = 0;
        for (int64_t i = 0; i < n; i++) {
            double z = fabs(v[i] - loc) / scale;
            beyond += z > 2;
            maxabs = z > maxabs ? z : maxabs;
            if (!isfinite(v[i])) {
                CHECK(isfinite(v[i]));
                break;
            }
        }
        const double p2 = 0.0455002638963584;
        CHECK_NEAR((double)beyond / (double)n, p2,
                   6 * sqrt(p2 * (1 - p2) / (double)n) + rounding);
        CHECK(maxabs > 4.0 && maxabs < 9.0);
        free(v);
        wf_release(a);
    }
}

static void test_uniform_statistics(void)
{
    const int64_t n = 1 << 20;
    enum { BINS = 100 };
    for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
        const wf_dtype dt = float_dtypes[t];
        const double low = -2.0, high = 6.0;
        wf_key key = wf_random_key(200 + t);
        wf_array *a = wf_random_uniform(&n, 1, dt, low, high, &key);
        double *v = conf_read(a);
        if (!CHECK_NOT_NULL(v)) {
            wf_release(a);
            continue;
        }
        int64_t count[BINS] = {0};
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
            int b = (int)((v[i] - low) / (high - low) * BINS);
            count[b < 0 ? 0 : b >= BINS ? BINS - 1 : b]++;
        }
        CHECK(lo >= low);
        CHECK(hi < high);
        CHECK(hi > high - 0.1);
        CHECK(lo < low + 0.1);
        double mean, var;
        moments(v, n, &mean, &var);
        CHECK_NEAR(mean, 2.0, 5 * sqrt(64.0 / 12 / (double)n) + (dt == WF_DTYPE_BF16 ? 0.01 : 0));
        if (dt == WF_DTYPE_F32 || dt == WF_DTYPE_F64) {
            /* Chi-square with 99 degrees of freedom: mean 99, sd 14. */
            double chi2 = 0, e = (double)n / BINS;
            for (int b = 0; b < BINS; b++)
                chi2 += ((double)count[b] - e) * ((double)count[b] - e) / e;
            CHECK(chi2 < 99 + 6 * 14.07);
            CHECK(chi2 > 99 - 5 * 14.07);
        }
        free(v);
        wf_release(a);
    }
}

/* [0, 1) in the halves: float32 values near 1 round up to 1.0; they must be
 * clamped to the largest value below 1. Also ranges beyond a dtype's max. */
static void test_uniform_clamping(void)
{
    const int64_t n = 1 << 16;
    struct {
        wf_dtype dt;
        double low, high, want_max_le, want_min_ge;
    } cases[] = {
        {WF_DTYPE_BF16, 0, 1, 1 - 0x1p-8, 0},
        {WF_DTYPE_F16, 0, 1, 1 - 0x1p-11, 0},
        {WF_DTYPE_F16, -1e6, 1e6, 65504, -65504},
        {WF_DTYPE_F32, -1e300, 1e300, 3.4028234663852886e38, -3.4028234663852886e38},
        {WF_DTYPE_F64, -1.5e308, 1.7e308, 1.7e308, -1.5e308},
        {WF_DTYPE_F32, 1.0, 1.0 + 1e-9, 1.0, 1.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        wf_key key = wf_random_key(300 + c);
        wf_array *a = wf_random_uniform(&n, 1, cases[c].dt, cases[c].low, cases[c].high, &key);
        double *v = conf_read(a);
        if (CHECK_NOT_NULL(v)) {
            for (int64_t i = 0; i < n; i++) {
                if (!(v[i] >= cases[c].want_min_ge && v[i] <= cases[c].want_max_le &&
                      v[i] < cases[c].high && v[i] >= cases[c].low)) {
                    CHECK_NEAR(v[i], cases[c].want_max_le, 0);
                    printf("      case %zu index %lld\n", c, (long long)i);
                    break;
                }
            }
        }
        free(v);
        wf_release(a);
    }
}

/* ---------------------------------------------------------------- randint */

static void test_randint(void)
{
    const int64_t n = 100000;
    /* Exact bits, each integer dtype. */
    const wf_key key = wf_random_key(5);
    struct {
        wf_dtype dt;
        int64_t low, high;
    } cases[] = {
        {WF_DTYPE_I32, -3, 5},
        {WF_DTYPE_U8, 0, 256},
        {WF_DTYPE_I64, -1000000000000ll, 7},
        {WF_DTYPE_I32, INT32_MIN, INT32_MAX},
        {WF_DTYPE_I64, INT64_MIN, INT64_MAX},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const uint64_t range = (uint64_t)cases[c].high - (uint64_t)cases[c].low;
        wf_array *a = wf_random_randint(cases[c].low, cases[c].high, &n, 1, cases[c].dt, &key);
        if (!CHECK_NOT_NULL(a))
            continue;
        CHECK_EQ_INT(wf_array_dtype(a), cases[c].dt);
        void *raw = raw_bytes(a);
        int bad = 0;
        for (int64_t i = 0; raw && i < n && bad < 3; i++) {
            const uint64_t w = ref_bits64(key, i);
            const uint64_t off = (uint64_t)(((ref_u128)w * range) >> 64);
            const uint64_t want_u = (uint64_t)cases[c].low + off;
            int64_t got;
            switch (cases[c].dt) {
            case WF_DTYPE_U8: got = ((uint8_t *)raw)[i]; break;
            case WF_DTYPE_I32: got = ((int32_t *)raw)[i]; break;
            default: got = ((int64_t *)raw)[i]; break;
            }
            int64_t want;
            memcpy(&want, &want_u, sizeof want);
            if (!CHECK_EQ_INT(got, want))
                bad++;
            if (!CHECK(got >= cases[c].low && got < cases[c].high))
                bad++;
        }
        free(raw);
        wf_release(a);
    }
    /* Coverage and frequencies: [-3, 5) and all of u8. */
    wf_key k2 = wf_random_key(6);
    const int64_t m = 1 << 20;
    wf_array *a = wf_random_randint(-3, 5, &m, 1, WF_DTYPE_I32, &k2);
    wf_array *b = wf_random_randint(0, 256, &m, 1, WF_DTYPE_U8, &k2);
    int32_t *x = a ? raw_bytes(a) : NULL;
    uint8_t *y = b ? raw_bytes(b) : NULL;
    if (CHECK_NOT_NULL(x) && CHECK_NOT_NULL(y)) {
        int64_t cx[8] = {0}, cy[256] = {0};
        for (int64_t i = 0; i < m; i++) {
            if (x[i] < -3 || x[i] >= 5) {
                CHECK(x[i] >= -3 && x[i] < 5);
                break;
            }
            cx[x[i] + 3]++;
            cy[y[i]]++;
        }
        for (int v = 0; v < 8; v++)
            CHECK_NEAR((double)cx[v], m / 8.0, 6 * sqrt(m / 8.0));
        for (int v = 0; v < 256; v++)
            CHECK_NEAR((double)cy[v], m / 256.0, 6 * sqrt(m / 256.0));
    }
    free(x);
    free(y);
    wf_release(a);
    wf_release(b);
}

/* ---------------------------------------------------------------- bernoulli */

static void test_bernoulli(void)
{
    const wf_key key = wf_random_key(9);
    /* Exact: p scalar 0.3 broadcast to a shape. */
    const int64_t shape[2] = {301, 257};
    const int64_t n = shape[0] * shape[1];
    wf_array *p = wf_scalar(0.3, WF_DTYPE_F32);
    wf_array *a = wf_random_bernoulli(p, shape, 2, &key);
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = ref_u24(ref_bits32(key, i)) < (double)0.3f;
    CHECK(conf_check(a, WF_DTYPE_BOOL, shape, 2, want, 0));
    double freq = 0;
    for (int64_t i = 0; i < n; i++)
        freq += want[i];
    CHECK_NEAR(freq / (double)n, 0.3, 5 * sqrt(0.21 / (double)n));
    free(want);
    wf_release(p);

    /* p of (3,) broadcast over rows: column 0 never, 2 always, 1 ~ 0.25. */
    const double pv[3] = {0, 0.25, 1};
    const int64_t p_shape = 3, big[2] = {40000, 3};
    for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
        wf_array *pa = conf_array(pv, &p_shape, 1, float_dtypes[t]);
        wf_array *b = wf_random_bernoulli(pa, big, 2, NULL);
        uint8_t *r = b ? raw_bytes(b) : NULL;
        if (CHECK_NOT_NULL(r)) {
            int64_t c[3] = {0};
            for (int64_t i = 0; i < big[0] * 3; i++)
                c[i % 3] += r[i];
            CHECK_EQ_INT(c[0], 0);
            CHECK_EQ_INT(c[2], big[0]);
            CHECK_NEAR((double)c[1] / (double)big[0], 0.25, 5 * sqrt(0.1875 / (double)big[0]));
        }
        free(r);
        wf_release(b);
        wf_release(pa);
    }

    /* Integer and bool p: 0 never, 1 always; shape NULL takes p's shape. */
    const double iv[4] = {0, 1, 1, 0};
    const int64_t ishape[2] = {2, 2};
    const wf_dtype idt[3] = {WF_DTYPE_BOOL, WF_DTYPE_U8, WF_DTYPE_I32};
    for (int t = 0; t < 3; t++) {
        wf_array *pa = conf_array(iv, ishape, 2, idt[t]);
        CHECK(conf_check(wf_random_bernoulli(pa, NULL, 0, NULL), WF_DTYPE_BOOL, ishape, 2, iv,
                         0));
        wf_release(pa);
    }

    /* Non-contiguous p (transposed view) gives the same as contiguous p. */
    const int64_t sshape[2] = {64, 33};
    double *vals = conf_values(64 * 33, 0, 1, 3);
    wf_array *pc = conf_array(vals, sshape, 2, WF_DTYPE_F32);
    wf_array *ps = conf_strided(vals, sshape, 2, WF_DTYPE_F32);
    wf_array *bc = wf_random_bernoulli(pc, NULL, 0, &key);
    wf_array *bs = wf_random_bernoulli(ps, NULL, 0, &key);
    CHECK(same_bytes(bc, bs));
    /* f64 p uses 53-bit draws: p = 0.5 exact. */
    wf_array *ph = wf_scalar(0.5, WF_DTYPE_F64);
    const int64_t m = 1000;
    wf_array *bh = wf_random_bernoulli(ph, &m, 1, &key);
    double *wh = malloc((size_t)m * sizeof *wh);
    for (int64_t i = 0; i < m; i++)
        wh[i] = ref_u53(ref_bits64(key, i)) < 0.5;
    CHECK(conf_check(bh, WF_DTYPE_BOOL, &m, 1, wh, 0));
    free(wh);
    free(vals);
    wf_release(pc);
    wf_release(ps);
    wf_release(bc);
    wf_release(bs);
    wf_release(ph);
}

/* ---------------------------------------------------------------- categorical */

static int32_t ref_categorical_row(wf_key key, const double *logits, int64_t K, int64_t row,
                                   bool f64)
{
    int32_t best_k = 0;
    double best = -INFINITY;
    for (int64_t k = 0; k < K; k++) {
        double v;
        if (f64) {
            double u = ((double)(ref_bits64(key, row * K + k) >> 11) + 0.5) * 0x1p-53;
            v = logits[k] - log(-log(u));
        } else {
            float u = ((float)(ref_bits32(key, row * K + k) >> 8) + 0.5f) * 0x1p-24f;
            v = (float)logits[k] - logf(-logf(u));
        }
        if (v > best) {
            best = v;
            best_k = (int32_t)k;
        }
    }
    return best_k;
}

static void test_categorical(void)
{
    const wf_key key = wf_random_key(11);
    const double probs[4] = {0.1, 0.2, 0.3, 0.4};
    const int64_t rows = 100000, K = 4;
    double *logits = malloc((size_t)(rows * K) * sizeof *logits);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < K; k++)
            logits[r * K + k] = log(probs[k]) + 1.5; /* unnormalized */
    const int64_t shape[2] = {rows, K};
    for (int f = 0; f < 2; f++) {
        const wf_dtype dt = f ? WF_DTYPE_F64 : WF_DTYPE_F32;
        wf_array *l = conf_array(logits, shape, 2, dt);
        wf_array *c = wf_random_categorical(l, -1, &key);
        int32_t *r = c ? raw_bytes(c) : NULL;
        if (CHECK_NOT_NULL(r)) {
            CHECK_EQ_INT(wf_array_ndim(c), 1);
            CHECK_EQ_INT(wf_array_dim(c, 0), rows);
            CHECK_EQ_INT(wf_array_dtype(c), WF_DTYPE_I32);
            int64_t cnt[4] = {0};
            int bad = 0;
            for (int64_t i = 0; i < rows; i++) {
                if (r[i] < 0 || r[i] >= K) {
                    CHECK(r[i] >= 0 && r[i] < K);
                    break;
                }
                cnt[r[i]]++;
                if (i < 2000 && bad < 3 &&
                    !CHECK_EQ_INT(r[i], ref_categorical_row(key, logits + i * K, K, i, f)))
                    bad++;
            }
            for (int k = 0; k < 4; k++)
                CHECK_NEAR((double)cnt[k] / (double)rows, probs[k],
                           5 * sqrt(probs[k] * (1 - probs[k]) / (double)rows));
        }
        free(r);
        wf_release(c);
        wf_release(l);
    }
    free(logits);

    /* Axis 0 of a transposed (strided) array equals axis -1 of the
     * contiguous array with the axes swapped: same rows, same bits. */
    const int64_t s2[2] = {5, 37}, s2t[2] = {37, 5};
    double *v = conf_values(5 * 37, -2, 2, 4), *vt = malloc(5 * 37 * sizeof *vt);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 37; j++)
            vt[j * 5 + i] = v[i * 37 + j];
    wf_array *lc = conf_array(vt, s2t, 2, WF_DTYPE_F32);   /* (37, 5): rows of 5 */
    wf_array *ls = conf_strided(v, s2, 2, WF_DTYPE_F32);   /* (5, 37) strided */
    wf_array *ca = wf_random_categorical(lc, 1, &key);
    wf_array *cb = wf_random_categorical(ls, 0, &key);
    CHECK_EQ_INT(wf_array_dim(cb, 0), 37);
    CHECK(same_bytes(ca, cb));
    wf_release(lc);
    wf_release(ls);
    wf_release(ca);
    wf_release(cb);

    /* Halves and integers go through float32; -inf never chosen; a 3-d
     * array sampled along the middle axis. */
    const int64_t s3[3] = {2, 3, 4};
    double *v3 = conf_values(24, -1, 1, 8);
    for (int i = 0; i < 24; i += 3)
        v3[i] = -INFINITY;
    const wf_dtype dts[4] = {WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64};
    for (int t = 0; t < 4; t++) {
        wf_array *l = conf_array(v3, s3, 3, dts[t]);
        for (int rep = 0; rep < 50; rep++) {
            wf_array *c = wf_random_categorical(l, 1, NULL);
            int32_t *r = c ? raw_bytes(c) : NULL;
            if (CHECK_NOT_NULL(r) && CHECK_EQ_INT(wf_array_ndim(c), 2)) {
                CHECK_EQ_INT(wf_array_dim(c, 0), 2);
                CHECK_EQ_INT(wf_array_dim(c, 1), 4);
                for (int i = 0; i < 8; i++) {
                    int a0 = i / 4, a2 = i % 4;
                    CHECK(r[i] >= 0 && r[i] < 3);
                    CHECK(!isinf(v3[a0 * 12 + r[i] * 4 + a2]));
                }
            }
            free(r);
            wf_release(c);
        }
        wf_release(l);
    }
    wf_array *li = wf_array_from_data((int32_t[]){0, 0, 100}, (int64_t[]){3}, 1, WF_DTYPE_I32);
    double cv = -1;
    wf_array *ci = wf_random_categorical(li, 0, NULL);
    CHECK_OK(wf_array_item(ci, &cv));
    CHECK_NEAR(cv, 2, 0); /* e^100 dominates */
    CHECK_EQ_INT(wf_array_ndim(ci), 0);
    wf_release(ci);
    wf_release(li);
    free(v3);
    free(v);
    free(vt);
}

/* ---------------------------------------------------------------- determinism */

static void test_determinism(void)
{
    const int64_t n = 4099;
    wf_key k1 = wf_random_key(1), k2 = wf_random_key(2), ks[2];
    CHECK_OK(wf_random_split(k1, 2, ks));
    wf_array *a = wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, &k1);
    wf_array *b = wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, &k1);
    wf_array *c = wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, &k2);
    wf_array *d = wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, &ks[0]);
    wf_array *e = wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, &ks[1]);
    CHECK(same_bytes(a, b));
    CHECK(!same_bytes(a, c));
    CHECK(!same_bytes(a, d));
    CHECK(!same_bytes(d, e));
    /* NULL keys: successive draws differ; wf_random_seed replays. */
    wf_random_seed(77);
    wf_array *f = wf_random_normal(&n, 1, WF_DTYPE_F32, 0, 1, NULL);
    wf_array *g = wf_random_normal(&n, 1, WF_DTYPE_F32, 0, 1, NULL);
    wf_random_seed(77);
    wf_array *h = wf_random_normal(&n, 1, WF_DTYPE_F32, 0, 1, NULL);
    wf_array *i = wf_random_normal(&n, 1, WF_DTYPE_F32, 0, 1, NULL);
    CHECK(!same_bytes(f, g));
    CHECK(same_bytes(f, h));
    CHECK(same_bytes(g, i));
    /* The default key advances as split(k)[0] and draws with split(k)[1]. */
    wf_key sk[2];
    CHECK_OK(wf_random_split(wf_random_key(77), 2, sk));
    wf_array *j = wf_random_normal(&n, 1, WF_DTYPE_F32, 0, 1, &sk[1]);
    CHECK(same_bytes(f, j));
    wf_array *arrays[] = {a, b, c, d, e, f, g, h, i, j};
    for (size_t t = 0; t < sizeof arrays / sizeof *arrays; t++)
        wf_release(arrays[t]);
}

/* 0-d and empty arrays of every sampler. */
static void test_shapes(void)
{
    wf_key key = wf_random_key(3);
    const int64_t empty[2] = {3, 0};
    for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
        wf_array *u = wf_random_uniform(NULL, 0, float_dtypes[t], 2, 3, &key);
        double v = 0;
        CHECK_OK(wf_array_item(u, &v));
        CHECK(v >= 2 && v < 3);
        CHECK_EQ_INT(wf_array_ndim(u), 0);
        wf_release(u);
        wf_array *z = wf_random_normal(NULL, 0, float_dtypes[t], 0, 1, &key);
        CHECK_OK(wf_array_item(z, &v));
        CHECK(isfinite(v));
        wf_release(z);
        wf_array *e1 = wf_random_uniform(empty, 2, float_dtypes[t], 0, 1, &key);
        wf_array *e2 = wf_random_normal(empty, 2, float_dtypes[t], 0, 1, &key);
        CHECK_OK(wf_eval((wf_array *const[]){e1, e2}, 2));
        CHECK_EQ_INT(wf_array_size(e1), 0);
        CHECK_EQ_INT(wf_array_size(e2), 0);
        wf_release(e1);
        wf_release(e2);
    }
    /* A scale of 0 gives loc. */
    wf_array *z0 = wf_random_normal(NULL, 0, WF_DTYPE_F32, 1.25, 0, &key);
    double v = 0;
    CHECK_OK(wf_array_item(z0, &v));
    CHECK_NEAR(v, 1.25, 0);
    wf_release(z0);
    wf_array *r = wf_random_randint(5, 6, NULL, 0, WF_DTYPE_I64, &key);
    CHECK_OK(wf_array_item(r, &v));
    CHECK_NEAR(v, 5, 0);
    wf_release(r);
    wf_array *re = wf_random_randint(0, 9, empty, 2, WF_DTYPE_I32, &key);
    CHECK_OK(wf_eval(&re, 1));
    wf_release(re);
    wf_array *p = wf_scalar(1, WF_DTYPE_F32);
    wf_array *b0 = wf_random_bernoulli(p, NULL, 0, &key);
    CHECK_OK(wf_array_item(b0, &v));
    CHECK_NEAR(v, 1, 0);
    wf_array *be = wf_random_bernoulli(p, empty, 2, &key);
    CHECK_OK(wf_eval(&be, 1));
    CHECK_EQ_INT(wf_array_size(be), 0);
    wf_release(b0);
    wf_release(be);
    wf_release(p);
    /* Categorical over an axis of an array that is empty elsewhere. */
    const int64_t le[2] = {0, 4};
    wf_array *l = wf_zeros(le, 2, WF_DTYPE_F32);
    wf_array *c = wf_random_categorical(l, 1, &key);
    CHECK_OK(wf_eval(&c, 1));
    CHECK_EQ_INT(wf_array_size(c), 0);
    wf_release(c);
    wf_release(l);
}

/* ---------------------------------------------------------------- threads */

enum { THREADS = 8, DRAWS = 4, PER_DRAW = 2048 };
static uint32_t thread_results[THREADS][DRAWS][PER_DRAW];

static void *draw_thread(void *arg)
{
    const int t = (int)(intptr_t)arg;
    const int64_t n = PER_DRAW;
    for (int d = 0; d < DRAWS; d++) {
        wf_scope_begin();
        wf_array *a = d % 2 ? wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, NULL)
                            : wf_random_randint(0, 1 << 30, &n, 1, WF_DTYPE_I32, NULL);
        if (a)
            wf_array_copy_to(a, thread_results[t][d], sizeof thread_results[t][d]);
        wf_scope_end();
    }
    return NULL;
}

static void test_threads_distinct_streams(void)
{
    memset(thread_results, 0, sizeof thread_results);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK_EQ_INT(pthread_create(&th[t], NULL, draw_thread, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        for (int d = 0; d < DRAWS; d++) {
            bool nonzero = false;
            for (int i = 0; i < PER_DRAW; i++)
                nonzero |= thread_results[t][d][i] != 0;
            CHECK(nonzero);
            for (int u = 0; u < THREADS; u++)
                for (int e = 0; e < DRAWS; e++) {
                    if (u == t && e == d)
                        continue;
                    /* Not even the first 4 values agree. */
                    CHECK(memcmp(thread_results[t][d], thread_results[u][e], 16) != 0);
                }
        }
}

/* ---------------------------------------------------------------- bad inputs */

static void test_bad_inputs(void)
{
    wf_key key = wf_random_key(1);
    const int64_t shape[2] = {2, 3}, neg[2] = {2, -1};
    /* dtypes */
    conf_check_error(wf_random_normal(shape, 2, WF_DTYPE_I32, 0, 1, &key), WF_ERR_DTYPE,
                     "wf_random_normal");
    conf_check_error(wf_random_normal(shape, 2, WF_DTYPE_BOOL, 0, 1, NULL), WF_ERR_DTYPE,
                     "wf_random_normal");
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_I64, 0, 1, &key), WF_ERR_DTYPE,
                     "wf_random_uniform");
    conf_check_error(wf_random_uniform(shape, 2, (wf_dtype)99, 0, 1, &key), WF_ERR_DTYPE,
                     "wf_random_uniform");
    conf_check_error(wf_random_randint(0, 4, shape, 2, WF_DTYPE_F32, &key), WF_ERR_DTYPE,
                     "wf_random_randint");
    conf_check_error(wf_random_randint(0, 2, shape, 2, WF_DTYPE_BOOL, &key), WF_ERR_DTYPE,
                     "wf_random_randint");
    conf_check_error(wf_random_randint(0, 2, shape, 2, WF_DTYPE_COUNT, &key), WF_ERR_DTYPE,
                     "wf_random_randint");
    /* shapes */
    conf_check_error(wf_random_uniform(neg, 2, WF_DTYPE_F32, 0, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform");
    conf_check_error(wf_random_normal(neg, 2, WF_DTYPE_F32, 0, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_normal");
    conf_check_error(wf_random_randint(0, 3, neg, 2, WF_DTYPE_I32, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_randint");
    conf_check_error(wf_random_uniform(NULL, 2, WF_DTYPE_F32, 0, 1, &key), WF_ERR_NULL_ARGUMENT,
                     "wf_random_uniform");
    conf_check_error(wf_random_normal(shape, -1, WF_DTYPE_F32, 0, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_normal");
    conf_check_error(wf_random_normal(shape, WF_MAX_NDIM + 1, WF_DTYPE_F32, 0, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_normal");
    const int64_t huge[2] = {INT64_MAX / 2, 4};
    conf_check_error(wf_random_uniform(huge, 2, WF_DTYPE_F32, 0, 1, &key), WF_ERR_OVERFLOW,
                     "wf_random_uniform");
    /* values */
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_F32, 1, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform");
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_F32, 2, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform");
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_F32, NAN, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform");
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_F32, 0, INFINITY, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform");
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_F16, 1e5, 2e5, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform"); /* no f16 value */
    conf_check_error(wf_random_uniform(shape, 2, WF_DTYPE_F16, 1.0001, 1.0002, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_uniform");
    conf_check_error(wf_random_normal(shape, 2, WF_DTYPE_F32, 0, -1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_normal");
    conf_check_error(wf_random_normal(shape, 2, WF_DTYPE_F32, NAN, 1, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_normal");
    conf_check_error(wf_random_normal(shape, 2, WF_DTYPE_F32, 0, INFINITY, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_normal");
    conf_check_error(wf_random_randint(3, 3, shape, 2, WF_DTYPE_I32, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_randint");
    conf_check_error(wf_random_randint(5, -5, shape, 2, WF_DTYPE_I32, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_randint");
    conf_check_error(wf_random_randint(0, 300, shape, 2, WF_DTYPE_U8, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_randint");
    conf_check_error(wf_random_randint(-1, 3, shape, 2, WF_DTYPE_U8, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_randint");
    conf_check_error(wf_random_randint(0, (int64_t)INT32_MAX + 2, shape, 2, WF_DTYPE_I32, &key),
                     WF_ERR_INVALID_ARGUMENT, "wf_random_randint");
    /* bernoulli */
    conf_check_error(wf_random_bernoulli(NULL, shape, 2, &key), WF_ERR_NULL_ARGUMENT,
                     "wf_random_bernoulli");
    wf_array *p4 = wf_full((int64_t[]){4}, 1, 0.5, WF_DTYPE_F32);
    conf_check_error(wf_random_bernoulli(p4, shape, 2, &key), WF_ERR_SHAPE,
                     "wf_random_bernoulli");
    wf_release(p4);
    const int64_t one = 1;
    wf_array *p2 = wf_full(shape, 2, 0.5, WF_DTYPE_F32);
    conf_check_error(wf_random_bernoulli(p2, &one, 1, &key), WF_ERR_SHAPE,
                     "wf_random_bernoulli"); /* p larger than the shape */
    conf_check_error(wf_random_bernoulli(p2, neg, 2, &key), WF_ERR_INVALID_ARGUMENT,
                     "wf_random_bernoulli");
    wf_release(p2);
    /* A NULL in a chain keeps the first error. */
    wf_clear_error();
    wf_array *bad = wf_random_normal(shape, 2, WF_DTYPE_I32, 0, 1, &key);
    wf_array *chained = wf_random_bernoulli(bad, NULL, 0, &key);
    CHECK(chained == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_random_normal");
    wf_clear_error();
    /* categorical */
    conf_check_error(wf_random_categorical(NULL, 0, &key), WF_ERR_NULL_ARGUMENT,
                     "wf_random_categorical");
    wf_array *l = wf_zeros(shape, 2, WF_DTYPE_F32);
    conf_check_error(wf_random_categorical(l, 2, &key), WF_ERR_AXIS, "wf_random_categorical");
    conf_check_error(wf_random_categorical(l, -3, &key), WF_ERR_AXIS, "wf_random_categorical");
    wf_release(l);
    wf_array *s = wf_scalar(1, WF_DTYPE_F32);
    conf_check_error(wf_random_categorical(s, 0, &key), WF_ERR_AXIS, "wf_random_categorical");
    wf_release(s);
    const int64_t ez[2] = {3, 0};
    wf_array *le = wf_zeros(ez, 2, WF_DTYPE_F32);
    conf_check_error(wf_random_categorical(le, 1, &key), WF_ERR_SHAPE, "wf_random_categorical");
    wf_release(le);
}

static void test_no_leaks(void) { CHECK_EQ_INT(live_arrays(), 0); }

int main(void)
{
    RUN_TEST(test_threefry_known_answers);
    RUN_TEST(test_key_and_split);
    RUN_TEST(test_split_bad_inputs);
    RUN_TEST(test_uniform_exact);
    RUN_TEST(test_normal_exact);
    RUN_TEST(test_normal_statistics);
    RUN_TEST(test_uniform_statistics);
    RUN_TEST(test_uniform_clamping);
    RUN_TEST(test_randint);
    RUN_TEST(test_bernoulli);
    RUN_TEST(test_categorical);
    RUN_TEST(test_determinism);
    RUN_TEST(test_shapes);
    RUN_TEST(test_threads_distinct_streams);
    RUN_TEST(test_bad_inputs);
    RUN_TEST(test_no_leaks);
    return TEST_SUMMARY();
}
