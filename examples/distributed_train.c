/*
 * Data-parallel training over processes (issue 29): a small MLP fit by
 * gradient descent, each rank taking its share of every global batch.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np 2 build/release/distributed_train
 *   build/release/distributed_train            (a group of one: all the batch here)
 *   ... distributed_train --bench              (step time, communication overlapped or not)
 *
 * Every step, rank r computes the gradient of its B rows' share of the loss
 * (sum of squared errors / global batch), the gradients are summed over the
 * ranks with wf_all_sum (rank order: ((g0 + g1) + g2) + ...), and every rank
 * applies the same update. Rank 0 then replays the run in this one process
 * with the global batch of size * B rows taken as size micro-batches whose
 * gradients are added in rank order: that curve must equal the distributed
 * one bit for bit (checked; the exit status says). One process computing
 * the whole batch in a single matmul adds the rows in another order, so it
 * agrees only to rounding (the largest relative difference is printed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"

enum { PARAMS = 4 };

struct config {
    int64_t features, hidden, batch; /* batch: rows per rank */
    int steps;
    float learning_rate;
};

/* loss(W1, b1, W2, b2, X, Y) = sum((tanh(X W1 + b1) W2 + b2 - Y)^2) * scale */
static wf_status loss_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                           size_t *nout)
{
    (void)nin;
    const double scale = *(const double *)payload;
    wf_scope_begin();
    wf_array *hidden = wf_tanh(wf_add(wf_matmul(in[4], in[0]), in[1]));
    wf_array *error = wf_subtract(wf_add(wf_matmul(hidden, in[2]), in[3]), in[5]);
    wf_array *loss = wf_multiply(wf_sum(wf_square(error), NULL, 0, false),
                                 wf_scalar(scale, WF_DTYPE_F32));
    wf_status status = loss && wf_keep(loss) ? WF_OK : wf_last_error();
    wf_scope_end();
    out[0] = loss;
    *nout = 1;
    return status;
}

/* The global batch of step `step` (every rank makes the same one): rows of
 * normal features, targets sin of a fixed projection. */
static void global_batch(const struct config *c, int ranks, int step, wf_array **x,
                         wf_array **y)
{
    const int64_t shape[2] = {c->batch * ranks, c->features};
    const wf_key key = wf_random_key(1000 + (uint64_t)step);
    *x = wf_random_normal(shape, 2, WF_DTYPE_F32, 0.0, 1.0, &key);
    const int64_t wshape[2] = {c->features, 1};
    const wf_key wkey = wf_random_key(7);
    *y = wf_sin(wf_matmul(*x, wf_random_normal(wshape, 2, WF_DTYPE_F32, 0.0, 0.5, &wkey)));
}

static wf_array *rows(wf_array *a, int64_t first, int64_t count)
{
    const int64_t starts[2] = {first, 0}, stops[2] = {first + count, wf_array_shape(a)[1]},
                  steps[2] = {1, 1};
    return wf_slice(a, starts, stops, steps);
}

static void init_params(const struct config *c, wf_array **p)
{
    const int64_t s1[2] = {c->features, c->hidden}, s2[1] = {c->hidden},
                  s3[2] = {c->hidden, 1}, s4[1] = {1};
    const wf_key k1 = wf_random_key(1), k2 = wf_random_key(2);
    p[0] = wf_random_normal(s1, 2, WF_DTYPE_F32, 0.0, 1.0 / sqrt((double)c->features), &k1);
    p[1] = wf_full(s2, 1, 0.0, WF_DTYPE_F32);
    p[2] = wf_random_normal(s3, 2, WF_DTYPE_F32, 0.0, 1.0 / sqrt((double)c->hidden), &k2);
    p[3] = wf_full(s4, 1, 0.0, WF_DTYPE_F32);
    for (int i = 0; i < PARAMS; i++)
        wf_keep(p[i]);
}

/* One step's loss and gradients on rows [first, first + count) of (x, y). */
static wf_status local_step(wf_fn *value_and_grad, wf_array *const *params, wf_array *x,
                            wf_array *y, int64_t first, int64_t count, wf_array **outs)
{
    wf_array *in[6] = {params[0], params[1], params[2], params[3], rows(x, first, count),
                       rows(y, first, count)};
    size_t nout = 1 + PARAMS;
    return wf_fn_call(value_and_grad, in, 6, outs, &nout);
}

/* params -= lr * grads: the new parameters are evaluated and kept, the old
 * ones released. */
static wf_status apply_update(const struct config *c, wf_array **params, wf_array *const *grads,
                              wf_array *loss)
{
    wf_array *lr = wf_scalar(c->learning_rate, WF_DTYPE_F32);
    wf_array *next[1 + PARAMS] = {loss};
    for (int i = 0; i < PARAMS; i++)
        next[1 + i] = wf_subtract(params[i], wf_multiply(lr, grads[i]));
    wf_status status = wf_eval(next, 1 + PARAMS);
    for (int i = 0; status == WF_OK && i < PARAMS; i++) {
        wf_keep(next[1 + i]);
        wf_release(params[i]);
        params[i] = next[1 + i];
    }
    return status;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The distributed run: losses[step] (the global loss, summed over ranks).
 * `overlap` false evaluates the gradients before the collectives start. */
static wf_status train(const struct config *c, wf_group *g, wf_fn *vg, bool overlap,
                       float *losses, double *step_seconds)
{
    const int n = wf_group_size(g), r = wf_group_rank(g);
    wf_scope_begin();
    wf_array *params[PARAMS];
    init_params(c, params);
    wf_status status = wf_eval(params, PARAMS);
    double start = seconds_now();
    for (int step = 0; step < c->steps && status == WF_OK; step++) {
        wf_scope_begin();
        wf_array *x, *y, *outs[1 + PARAMS];
        global_batch(c, n, step, &x, &y);
        wf_eval(&x, 1);
        status = local_step(vg, params, x, y, r * c->batch, c->batch, outs);
        if (status != WF_OK) {
            wf_scope_end();
            break;
        }
        if (!overlap)
            wf_eval(outs, 1 + PARAMS);
        wf_array *summed[1 + PARAMS];
        for (int i = 0; i < 1 + PARAMS; i++)
            summed[i] = wf_all_sum(outs[i], g);
        status = apply_update(c, params, summed + 1, summed[0]);
        double loss = 0;
        wf_array_item(summed[0], &loss);
        losses[step] = (float)loss;
        wf_scope_end();
        if (step == 0)
            start = seconds_now(); /* the first step warms up */
    }
    if (step_seconds)
        *step_seconds = (seconds_now() - start) / (c->steps > 1 ? c->steps - 1 : 1);
    for (int i = 0; i < PARAMS; i++)
        wf_release(params[i]);
    wf_scope_end();
    return status;
}

/* The same run in this process: `ranks` micro-batches summed in rank order
 * (micro true) or the whole batch at once. */
static wf_status replay(const struct config *c, int ranks, wf_fn *vg, bool micro, float *losses)
{
    wf_scope_begin();
    wf_array *params[PARAMS];
    init_params(c, params);
    wf_status status = WF_OK;
    for (int step = 0; step < c->steps && status == WF_OK; step++) {
        wf_scope_begin();
        wf_array *x, *y, *sum[1 + PARAMS];
        global_batch(c, ranks, step, &x, &y);
        const int parts = micro ? ranks : 1;
        const int64_t rows_each = micro ? c->batch : c->batch * ranks;
        for (int part = 0; part < parts && status == WF_OK; part++) {
            wf_array *outs[1 + PARAMS];
            status = local_step(vg, params, x, y, part * rows_each, rows_each, outs);
            for (int i = 0; i < 1 + PARAMS && status == WF_OK; i++)
                sum[i] = part == 0 ? outs[i] : wf_add(sum[i], outs[i]);
        }
        if (status != WF_OK) {
            wf_scope_end();
            break;
        }
        status = apply_update(c, params, sum + 1, sum[0]);
        double loss = 0;
        wf_array_item(sum[0], &loss);
        losses[step] = (float)loss;
        wf_scope_end();
    }
    for (int i = 0; i < PARAMS; i++)
        wf_release(params[i]);
    wf_scope_end();
    return status;
}

static int run_bench(wf_group *g, wf_fn *vg, const struct config *c)
{
    float *losses = calloc((size_t)c->steps, sizeof(float));
    double overlapped = 0, sequential = 0;
    wf_status s1 = train(c, g, vg, false, losses, &sequential);
    wf_status s2 = train(c, g, vg, true, losses, &overlapped);
    if (wf_group_rank(g) == 0)
        printf("step time, %d ranks, MLP %lldx%lld, %lld rows per rank: communication "
               "after the gradients %.2f ms, overlapped with them %.2f ms (%.2fx)\n",
               wf_group_size(g), (long long)c->features, (long long)c->hidden,
               (long long)c->batch, sequential * 1e3, overlapped * 1e3, sequential / overlapped);
    free(losses);
    return s1 == WF_OK && s2 == WF_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    const bool bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    wf_group *g = wf_group_init(false);
    if (!g) {
        fprintf(stderr, "distributed_train: %s\n", wf_last_error_message());
        return 1;
    }
    const int n = wf_group_size(g), r = wf_group_rank(g);
    struct config c = {.features = 16, .hidden = 32, .batch = 8, .steps = 20,
                       .learning_rate = 0.05f};
    if (bench)
        c = (struct config){.features = 512, .hidden = 2048, .batch = 64, .steps = 12,
                            .learning_rate = 0.01f};
    double scale = 1.0 / (double)(c.batch * n); /* the loss is a mean over the global batch */
    wf_fn *loss = wf_fn_new(loss_body, &scale, NULL);
    const int argnums[PARAMS] = {0, 1, 2, 3};
    wf_fn *vg = wf_value_and_grad(loss, argnums, PARAMS);
    int exit_code = 0;
    if (bench) {
        exit_code = run_bench(g, vg, &c);
    } else {
        float *dist = calloc((size_t)c.steps, sizeof(float));
        float *micro = calloc((size_t)c.steps, sizeof(float));
        float *whole = calloc((size_t)c.steps, sizeof(float));
        wf_status status = train(&c, g, vg, true, dist, NULL);
        if (status != WF_OK) {
            fprintf(stderr, "rank %d: %s\n", r, wf_last_error_message());
            exit_code = 1;
        } else if (r == 0) {
            status = replay(&c, n, vg, true, micro);
            if (status == WF_OK)
                status = replay(&c, n, vg, false, whole);
            int same = 0;
            double worst = 0;
            for (int s = 0; s < c.steps; s++) {
                same += memcmp(&dist[s], &micro[s], sizeof(float)) == 0;
                worst = fmax(worst, fabs((double)dist[s] - whole[s]) / fabs((double)whole[s]));
                if (s % 5 == 0 || s == c.steps - 1)
                    printf("step %2d  loss %.7f  (one process, %d micro-batches: %.7f; whole "
                           "batch: %.7f)\n",
                           s, dist[s], n, micro[s], whole[s]);
            }
            printf("%d ranks x batch %lld: %d of %d steps bit-identical to one process with "
                   "batch %lld in %d micro-batches; whole-batch largest relative difference "
                   "%.2g\n",
                   n, (long long)c.batch, same, c.steps, (long long)(c.batch * n), n, worst);
            exit_code = status == WF_OK && same == c.steps && worst < 1e-4 ? 0 : 1;
        }
        free(dist);
        free(micro);
        free(whole);
    }
    wf_fn_release(vg);
    wf_fn_release(loss);
    wf_group_release(g);
    return exit_code;
}
