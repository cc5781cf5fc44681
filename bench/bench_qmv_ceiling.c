/*
 * bench_qmv_ceiling: how much of the machine's read bandwidth a 4-bit
 * matrix-vector product with float32 activations can read here, by weight
 * layout, by the order its streams are read and by sum order, in one run
 * (issue 28 asks for 70%):
 *  - weft: wf_quantized_matmul, exact (wf_matmul's bits on the dequantized
 *    matrix: a code costs an AND, two fmas and an add): reading MLX's layout
 *    (each row's codes, scales and biases in order; 16 rows at a time go
 *    through 16 x 16 transposes), then its interleaved copies (made at a
 *    weight's second product: backend/cpu/quantized.c), then with int8
 *    activations (wf_set_quantized_matvec_int8);
 *  - rows interleaved, exact: the same operations a code on weights
 *    repacked so that one 64-byte line holds a word of each of 16 rows (no
 *    transposes), what keeping a repacked copy would give; two fma chains
 *    side by side, either two halves of K of one block of rows (as weft's
 *    kernel sums two K blocks) or two blocks of rows;
 *  - rows interleaved, factored: each group's s * sum(q x) + b * sum(x)
 *    (the order of MLX's Metal kernels; not wf_matmul's bits), an AND, a
 *    subtraction and one fma a code, two blocks of rows side by side.
 * The interleaved kernels exist only here (AVX-512), are checked against a
 * float64 reference on every row of the first matrix (the program fails if
 * one is off by more than 1e-5 of the sum of |terms|), and run on as many
 * threads as weft's pool, each thread its rows of every matrix in turn (no
 * dispatch per product, which flatters them by a few microseconds a
 * product). Figures: GB/s of codes + scales + biases over a rotation set of
 * matrices 4x the last-level cache, and the share of the best read loop
 * (memory_bench.h), measured before and after, the higher kept, and of
 * the sustained read bandwidth (the median of 5 s of reads after them).
 *
 *   build/release/bench_qmv_ceiling [rotation_MiB]
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/quantized.h"
#include "runtime/pool.h"
#include "bench_args.h"
#include "memory_bench.h"
#include "weft.h"

enum { OUT = 4096, IN = 4096, GROUP = 64, LANES = 16, REPEATS = 3 };
enum { WORDS = IN / 8, GROUPS = IN / GROUP, BLOCKS = OUT / LANES };

/* One weight matrix in both layouts: weft's arrays (MLX's) and the
 * interleaved copy (words[block][word][lane], factors[block][group][lane]). */
typedef struct weight {
    wf_array *codes, *scales, *biases;
    uint32_t *words;
    float *lane_scales, *lane_biases;
} weight;

static void *aligned_or_die(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_qmv_ceiling: out of memory\n");
        exit(1);
    }
    return p;
}

static weight random_weight(void)
{
    uint32_t *c = aligned_or_die((size_t)OUT * WORDS * 4);
    float *s = aligned_or_die((size_t)OUT * GROUPS * 4);
    float *b = aligned_or_die((size_t)OUT * GROUPS * 4);
    for (int64_t i = 0; i < (int64_t)OUT * WORDS; i++)
        c[i] = (uint32_t)next_random();
    for (int64_t i = 0; i < (int64_t)OUT * GROUPS; i++) {
        s[i] = 0.01f + (float)(next_random() % 100) * 1e-4f;
        b[i] = -8.0f * s[i];
    }
    weight w = {.words = aligned_or_die((size_t)OUT * WORDS * 4),
                .lane_scales = aligned_or_die((size_t)OUT * GROUPS * 4),
                .lane_biases = aligned_or_die((size_t)OUT * GROUPS * 4)};
    for (int64_t n = 0; n < OUT; n++) {
        const int64_t block = n / LANES, lane = n % LANES;
        for (int64_t j = 0; j < WORDS; j++)
            w.words[(block * WORDS + j) * LANES + lane] = c[n * WORDS + j];
        for (int64_t g = 0; g < GROUPS; g++) {
            w.lane_scales[(block * GROUPS + g) * LANES + lane] = s[n * GROUPS + g];
            w.lane_biases[(block * GROUPS + g) * LANES + lane] = b[n * GROUPS + g];
        }
    }
    const int64_t cs[2] = {OUT, WORDS}, ss[2] = {OUT, GROUPS};
    w.codes = wf_array_from_data(c, cs, 2, WF_DTYPE_U32);
    w.scales = wf_array_from_data(s, ss, 2, WF_DTYPE_F32);
    w.biases = wf_array_from_data(b, ss, 2, WF_DTYPE_F32);
    free(c), free(s), free(b);
    return w;
}

static void weight_free(weight *w)
{
    wf_release(w->codes), wf_release(w->scales), wf_release(w->biases);
    free(w->words), free(w->lane_scales), free(w->lane_biases);
}

/* x, x * 2^-4i (i < 4: a code at bit 4i of a 16-bit half is read as q
 * 2^4i), and each group's sum of x (in k order). */
typedef struct activations {
    float x[IN], scaled[4][IN], group_sums[GROUPS];
} activations;

static void activations_fill(activations *a)
{
    for (int k = 0; k < IN; k++) {
        a->x[k] = (float)(next_random() % 2001) / 1000.0f - 1.0f;
        for (int i = 0; i < 4; i++)
            a->scaled[i][k] = a->x[k] / (float)(1 << (4 * i));
    }
    for (int g = 0; g < GROUPS; g++) {
        float sum = 0;
        for (int k = 0; k < GROUP; k++)
            sum += a->x[g * GROUP + k];
        a->group_sums[g] = sum;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_KERNELS 1
#define ATTR_512 __attribute__((target("avx512f")))
#define INLINE_512 ATTR_512 __attribute__((always_inline)) static inline

/* Lines asked for ahead of the one read (per stream), tuned by hand. */
enum { EXACT_AHEAD = 64, FACTORED_AHEAD = 128 };

/* A 16-bit half of each lane's word under the exponent of 2^23 (as in
 * quantized_avx512.c): masked to the code at bit p, it is 2^23 + q 2^p. */
INLINE_512 __m512i half_float(__m512i word, bool high)
{
    const __m512i exponent = _mm512_set1_epi32(150 << 23);
    __m512i h = high ? _mm512_or_si512(_mm512_srli_epi32(word, 16), exponent)
                     : _mm512_ternarylogic_epi32(word, _mm512_set1_epi32(0xFFFF), exponent, 0xEA);
    __asm__("" : "+v"(h)); /* kept whole, as in quantized_avx512.c */
    return h;
}

INLINE_512 __m512 code_in_place(__m512i half, int p)
{
    return _mm512_castsi512_ps(
        _mm512_and_si512(half, _mm512_set1_epi32((int32_t)(0x7F800000u | 0xFu << p))));
}

INLINE_512 void ask_ahead(const __m512i *line, int ahead)
{
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        _mm_prefetch((const char *)(line + ahead + i), _MM_HINT_T0);
}

/* *x * w + acc, *x broadcast by the fma itself (GCC would share one
 * vbroadcastss between the two blocks' fmas, and on Zen 4 that takes a
 * vector pipe; weft's kernel gets the same code with vf_own_x). */
INLINE_512 __m512 fma_broadcast(const float *x, __m512 w, __m512 acc)
{
    __asm__("vfmadd231ps %[x]%{1to16%}, %[w], %[acc]" : [acc] "+v"(acc) : [w] "v"(w), [x] "m"(*x));
    return acc;
}

/* Exact arithmetic: w = q * s rounded (one fma with s' = 2^-p s and
 * c = -2^23 s', as weft's kernel), then + b rounded; acc += x w. */
INLINE_512 void exact_code(__m512i half, int i, const __m512 *s, const __m512 *c, __m512 b,
                           const float *x, __m512 *acc)
{
    const __m512 w = _mm512_add_ps(_mm512_fmadd_ps(code_in_place(half, 4 * i), s[i], c[i]), b);
    *acc = fma_broadcast(x, w, *acc);
}

/* Two fma chains side by side, each a stream of lines: two halves of K
 * of one block of rows (as weft's kernel sums two K blocks), or all of K
 * of two blocks of rows (`pair`). */
INLINE_512 void exact_units(const weight *w, const activations *a, int64_t b0, int64_t b1,
                            float *out, bool pair)
{
    const int groups = pair ? GROUPS : GROUPS / 2; /* a unit's */
    for (int64_t block = b0; block < b1; block += pair ? 2 : 1) {
        const __m512i *lines[2];
        const float *s[2], *b[2];
        int first[2]; /* the unit's first group */
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 2
        for (int u = 0; u < 2; u++) {
            const int64_t rows = block + (pair ? u : 0);
            lines[u] = (const __m512i *)(w->words + rows * WORDS * LANES);
            s[u] = w->lane_scales + rows * GROUPS * LANES;
            b[u] = w->lane_biases + rows * GROUPS * LANES;
            first[u] = pair ? 0 : u * GROUPS / 2;
        }
        for (int g = 0; g < groups; g++) {
            __m512 gs[2][4], gc[2][4], gb[2];
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const int group = first[u] + g;
                const __m512 scale = _mm512_load_ps(s[u] + group * LANES);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    gs[u][i] = _mm512_mul_ps(scale, _mm512_set1_ps(1.0f / (float)(1 << 4 * i)));
                    gc[u][i] = _mm512_mul_ps(gs[u][i], _mm512_set1_ps(-0x1p23f));
                }
                gb[u] = _mm512_load_ps(b[u] + group * LANES);
                ask_ahead(lines[u] + group * 8, EXACT_AHEAD);
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const int group = first[u] + g, k = group * GROUP + j * 8;
                    const __m512i word = _mm512_load_si512(lines[u] + group * 8 + j);
                    const __m512i low = half_float(word, false), high = half_float(word, true);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++)
                        exact_code(low, i, gs[u], gc[u], gb[u], &a->x[k + i], &acc[u]);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++)
                        exact_code(high, i, gs[u], gc[u], gb[u], &a->x[k + 4 + i], &acc[u]);
                }
        }
        if (pair) {
            _mm512_storeu_ps(out + block * LANES, acc[0]);
            _mm512_storeu_ps(out + (block + 1) * LANES, acc[1]);
        } else {
            _mm512_storeu_ps(out + block * LANES, _mm512_add_ps(acc[0], acc[1]));
        }
    }
}

ATTR_512 static void exact_k_halves(const weight *w, const activations *a, int64_t b0, int64_t b1,
                                    float *out)
{
    exact_units(w, a, b0, b1, out, false);
}

ATTR_512 static void exact_block_pairs(const weight *w, const activations *a, int64_t b0,
                                       int64_t b1, float *out)
{
    exact_units(w, a, b0, b1, out, true);
}

/* Factored: per group, q 2^p * x 2^-p (exact products) in two chains a
 * block, then total += s * their sum, total += b * the group's sum of x;
 * two blocks of rows side by side. */
INLINE_512 void factored_code(__m512i half, int i, const float *scaled_x, __m512 *chain)
{
    const __m512 q = _mm512_sub_ps(code_in_place(half, 4 * i), _mm512_set1_ps(0x1p23f));
    *chain = fma_broadcast(scaled_x, q, *chain); /* q 2^4i * x 2^-4i */
}

ATTR_512 static void factored_block_pairs(const weight *w, const activations *a, int64_t b0,
                                          int64_t b1, float *out)
{
    for (int64_t block = b0; block < b1; block += 2) {
        const __m512i *lines[2];
        const float *s[2], *b[2];
        __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 2
        for (int u = 0; u < 2; u++) {
            lines[u] = (const __m512i *)(w->words + (block + u) * WORDS * LANES);
            s[u] = w->lane_scales + (block + u) * GROUPS * LANES;
            b[u] = w->lane_biases + (block + u) * GROUPS * LANES;
        }
        for (int g = 0; g < GROUPS; g++) {
            __m512 chain[2][2];
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                chain[u][0] = chain[u][1] = _mm512_setzero_ps();
                ask_ahead(lines[u] + g * 8, FACTORED_AHEAD);
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                const int k = g * GROUP + j * 8;
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const __m512i word = _mm512_load_si512(lines[u] + g * 8 + j);
                    const __m512i low = half_float(word, false), high = half_float(word, true);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++)
                        factored_code(low, i, &a->scaled[i][k + i], &chain[u][i & 1]);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++)
                        factored_code(high, i, &a->scaled[i][k + 4 + i], &chain[u][i & 1]);
                }
            }
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const __m512 sum = _mm512_add_ps(chain[u][0], chain[u][1]);
                total[u] = _mm512_fmadd_ps(_mm512_load_ps(s[u] + g * LANES), sum, total[u]);
                total[u] = _mm512_fmadd_ps(_mm512_load_ps(b[u] + g * LANES),
                                           _mm512_set1_ps(a->group_sums[g]), total[u]);
            }
        }
        _mm512_storeu_ps(out + block * LANES, total[0]);
        _mm512_storeu_ps(out + (block + 1) * LANES, total[1]);
    }
}
#else
#define HAVE_KERNELS 0
#endif

typedef void (*blocks_fn)(const weight *, const activations *, int64_t, int64_t, float *);

typedef struct interleaved_kernel {
    const char *name;
    blocks_fn fn;
    double rate, error;
} interleaved_kernel;

typedef struct thread_share {
    blocks_fn kernel;
    const weight *w;
    int64_t count, b0, b1;
    const activations *a;
    float *out;
} thread_share;

static void *run_share(void *arg)
{
    const thread_share *t = arg;
    for (int64_t i = 0; i < t->count; i++)
        t->kernel(&t->w[i], t->a, t->b0, t->b1, t->out);
    return NULL;
}

/* GB/s of `kernel` over the rotation set, on `threads` threads. */
static double kernel_rate(blocks_fn kernel, const weight *w, int64_t count, const activations *a,
                          int threads, float *out, int64_t bytes_each)
{
    double best = 0;
    for (int r = 0; r < REPEATS; r++) {
        pthread_t tid[64];
        thread_share shares[64];
        const double t0 = bench_now();
        for (int t = 0; t < threads; t++) {
            /* whole pairs of blocks: the pair kernels take two at a time */
            shares[t] = (thread_share){kernel, w, count, BLOCKS / 2 * t / threads * 2,
                                       BLOCKS / 2 * (t + 1) / threads * 2, a, out};
            pthread_create(&tid[t], NULL, run_share, &shares[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        const double gbs = (double)(bytes_each * count) / (bench_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* Largest |y - reference| / sum |terms| over the first matrix's rows. */
static double kernel_error(blocks_fn kernel, const weight *w, const activations *a, float *out)
{
    kernel(w, a, 0, BLOCKS, out);
    const void *cv, *sv, *bv;
    if (wf_array_data(w->codes, &cv) != WF_OK || wf_array_data(w->scales, &sv) != WF_OK ||
        wf_array_data(w->biases, &bv) != WF_OK)
        return INFINITY;
    const uint32_t *codes = cv;
    const float *s = sv, *b = bv;
    double worst = 0;
    for (int64_t n = 0; n < OUT; n++) {
        double y = 0, size = 0;
        for (int64_t k = 0; k < IN; k++) {
            const uint32_t q = codes[n * WORDS + k / 8] >> (4 * (k % 8)) & 15;
            const int64_t g = n * GROUPS + k / GROUP;
            const double term = ((double)q * s[g] + b[g]) * a->x[k];
            y += term;
            size += fabs(term);
        }
        const double e = fabs(out[n] - y) / (size > 0 ? size : 1);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* GB/s of wf_quantized_matmul over the rotation set (one thread pool). */
static double weft_rate(const weight *w, int64_t count, const activations *a, int64_t bytes_each)
{
    const int64_t xs[2] = {1, IN};
    wf_array *x = wf_array_from_data(a->x, xs, 2, WF_DTYPE_F32);
    double best = 0;
    /* two rounds untimed: the interleaved copies are made at the second */
    for (int r = -2; r < REPEATS; r++) {
        const double t0 = bench_now();
        for (int64_t i = 0; i < count; i++) {
            wf_array *y = wf_quantized_matmul(x, w[i].codes, w[i].scales, w[i].biases, true,
                                              GROUP, 4);
            if (!y || wf_eval(&y, 1) != WF_OK) {
                fprintf(stderr, "bench_qmv_ceiling: %s\n", wf_last_error_message());
                exit(1);
            }
            wf_release(y);
        }
        const double gbs = (double)(bytes_each * count) / (bench_now() - t0) / 1e9;
        best = r >= 0 && gbs > best ? gbs : best;
    }
    wf_release(x);
    return best;
}

int main(int argc, char **argv)
{
    const int64_t rotation =
        argc > 1 ? bench_int_arg(argc, argv, 1, 0, 1, 1 << 20, "rotation MiB") << 20
                 : 4 * llc_bytes();
    const int threads = wf__pool_size() < 64 ? wf__pool_size() : 64;
    const int64_t bytes_each = (int64_t)OUT * IN / 2 + (int64_t)OUT * GROUPS * 8;
    int64_t count = (rotation + bytes_each - 1) / bytes_each;
    count = count < 2 ? 2 : count;
    printf("# bench_qmv_ceiling: 4-bit %d x %d, group %d, %lld matrices (%lld MiB), %d threads\n",
           OUT, IN, GROUP, (long long)count, (long long)(bytes_each * count >> 20), threads);
    print_load();
    weight *w = malloc((size_t)count * sizeof *w);
    activations *a = aligned_or_die(sizeof *a);
    float *out = aligned_or_die(OUT * sizeof(float));
    if (!w)
        return 1;
    for (int64_t i = 0; i < count; i++)
        w[i] = random_weight();
    activations_fill(a);

    const double before = read_bandwidth(rotation, threads, "before the products");
    const bool int8_was = wf_quantized_matvec_int8();
    wf_set_quantized_matvec_int8(false);
    wf__qmv_set_interleave(false);
    const double direct = weft_rate(w, count, a, bytes_each);
    wf__qmv_set_interleave(true); /* the copies are made at the second round */
    const double exact = weft_rate(w, count, a, bytes_each);
    const size_t copies = wf__qmv_interleaved_bytes();
    const bool int8_runs = wf_set_quantized_matvec_int8(true);
    const double int8 = weft_rate(w, count, a, bytes_each);
    wf_set_quantized_matvec_int8(int8_was);
    interleaved_kernel kernels[] = {
#if HAVE_KERNELS
        {"rows interleaved, exact, two K halves side by side", exact_k_halves, 0, 0},
        {"rows interleaved, exact, two row blocks side by side", exact_block_pairs, 0, 0},
        {"rows interleaved, factored, two row blocks", factored_block_pairs, 0, 0},
#endif
        {NULL, NULL, 0, 0},
    };
    const bool avx512 = HAVE_KERNELS && __builtin_cpu_supports("avx512f");
    bool wrong = false;
    for (interleaved_kernel *k = kernels; avx512 && k->name; k++) {
        k->error = kernel_error(k->fn, &w[0], a, out);
        k->rate = kernel_rate(k->fn, w, count, a, threads, out, bytes_each);
        wrong |= !(k->error <= 1e-5);
    }
    const double after = read_bandwidth(rotation, threads, "after them");
    const double sustained = sustained_read_bandwidth(rotation, threads, 5.0);
    const double bw = before > after ? before : after;
    printf("read bandwidth (%d threads, the best read loop): %.2f GB/s; sustained (the median "
           "of 5 s of reads): %.2f GB/s; shares of both\n",
           threads, bw, sustained);
    printf("%-54s %7.2f GB/s  %5.1f%%  %5.1f%%\n", "weft, exact, reading MLX's layout", direct,
           100 * direct / bw, 100 * direct / sustained);
    printf("%-54s %7.2f GB/s  %5.1f%%  %5.1f%%  (%zu MiB of copies)\n",
           "weft, exact, its interleaved copies (the default)", exact, 100 * exact / bw,
           100 * exact / sustained, copies >> 20);
    if (int8_runs)
        printf("%-54s %7.2f GB/s  %5.1f%%  %5.1f%%\n", "weft, int8 activations", int8,
               100 * int8 / bw, 100 * int8 / sustained);
    for (const interleaved_kernel *k = kernels; avx512 && k->name; k++)
        printf("%-54s %7.2f GB/s  %5.1f%%  %5.1f%%  (largest error %.1e of the sum of |terms|)\n",
               k->name, k->rate, 100 * k->rate / bw, 100 * k->rate / sustained, k->error);
    if (!avx512)
        printf("(the interleaved kernels need AVX-512)\n");
    print_load();
    for (int64_t i = 0; i < count; i++)
        weight_free(&w[i]);
    free(w), free(a), free(out);
    /* a kernel that computes something else has no figure worth printing */
    return wrong ? 1 : 0;
}
