/*
 * bench_random: ns per element of the random samplers on 16M elements
 * (uniform and normal float32 first; others for comparison). Best of
 * `repeats` runs of build + evaluate. Run with WEFT_NUM_THREADS=1 for the
 * single-thread figure.
 *
 *   build/release/bench_random [log2 elements=24] [repeats=5]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/pool.h"
#include "bench_args.h"
#include "weft.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum kind { UNIFORM, NORMAL, RANDINT, BERNOULLI, CATEGORICAL };

static wf_array *make(enum kind k, wf_dtype dtype, int64_t n, const wf_key *key,
                      wf_array *aux)
{
    switch (k) {
    case UNIFORM: return wf_random_uniform(&n, 1, dtype, 0, 1, key);
    case NORMAL: return wf_random_normal(&n, 1, dtype, 0, 1, key);
    case RANDINT: return wf_random_randint(0, 1000, &n, 1, dtype, key);
    case BERNOULLI: return wf_random_bernoulli(aux, &n, 1, key);
    default: return wf_random_categorical(aux, -1, key);
    }
}

static void run(const char *name, enum kind k, wf_dtype dtype, int64_t n, int repeats,
                wf_array *aux, int64_t elements)
{
    double best = 1e30;
    wf_key key = wf_random_key(1);
    for (int r = 0; r < repeats; r++) {
        double t0 = now_seconds();
        wf_array *a = make(k, dtype, n, &key, aux);
        if (!a || wf_eval(&a, 1) != WF_OK) {
            fprintf(stderr, "bench_random: %s: %s\n", name, wf_last_error_message());
            wf_release(a);
            return;
        }
        double t = now_seconds() - t0;
        wf_release(a);
        best = t < best ? t : best;
    }
    printf("%-28s %10.3f ms  %7.3f ns/element\n", name, best * 1e3,
           best * 1e9 / (double)elements);
}

int main(int argc, char **argv)
{
    const int log2n = (int)bench_int_arg(argc, argv, 1, 24, 4, 30, "log2 elements");
    const int repeats = (int)bench_int_arg(argc, argv, 2, 5, 1, 1000000, "repeats");
    const int64_t n = (int64_t)1 << log2n;
    printf("bench_random: %lld elements, %d threads per kernel, best of %d\n", (long long)n,
           wf__pool_size(), repeats);
    run("uniform float32", UNIFORM, WF_DTYPE_F32, n, repeats, NULL, n);
    run("normal float32", NORMAL, WF_DTYPE_F32, n, repeats, NULL, n);
    run("uniform float64", UNIFORM, WF_DTYPE_F64, n, repeats, NULL, n);
    run("normal float64", NORMAL, WF_DTYPE_F64, n, repeats, NULL, n);
    run("uniform bfloat16", UNIFORM, WF_DTYPE_BF16, n, repeats, NULL, n);
    run("randint int32", RANDINT, WF_DTYPE_I32, n, repeats, NULL, n);
    wf_array *p = wf_scalar(0.3, WF_DTYPE_F32);
    run("bernoulli (p scalar)", BERNOULLI, WF_DTYPE_BOOL, n, repeats, p, n);
    wf_release(p);
    const int64_t shape[2] = {n / 64, 64};
    wf_array *logits = wf_zeros(shape, 2, WF_DTYPE_F32);
    wf_eval(&logits, 1);
    run("categorical (rows of 64)", CATEGORICAL, WF_DTYPE_I32, n, repeats, logits, n);
    wf_release(logits);
    return 0;
}
