/* per_example_gradients: the gradient of a tiny linear model's loss for each
 * example of a batch at once, with wf_vmap(wf_grad(loss)). */
#include <math.h>
#include <stdio.h>
#include <weft.h>

/* loss(w, x, y) = (x . w - y)^2 for one example x (3,) with target y (). */
static wf_status loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin(); /* temporaries go with the scope; the result is kept */
    wf_array *err = wf_subtract(wf_matmul(in[1], in[0]), in[2]);
    wf_array *loss = wf_square(err);
    out[0] = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

int main(void)
{
    const float w0[3] = {0.5f, -1.0f, 2.0f};
    const float xs[4 * 3] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
    const float ys[4] = {1, 2, 3, 4};
    wf_scope_begin();
    wf_array *w = wf_array_from_data(w0, (int64_t[]){3}, 1, WF_DTYPE_F32);
    wf_array *x = wf_array_from_data(xs, (int64_t[]){4, 3}, 2, WF_DTYPE_F32);
    wf_array *y = wf_array_from_data(ys, (int64_t[]){4}, 1, WF_DTYPE_F32);

    wf_fn *loss = wf_fn_new(loss_body, NULL, NULL);
    wf_fn *grad = wf_grad(loss, (int[]){0}, 1);           /* d loss / d w */
    const int in_axes[3] = {WF_VMAP_NOT_MAPPED, 0, 0};   /* w shared, x and y batched */
    wf_fn *per_example = wf_vmap(grad, in_axes, 3, NULL, 0);

    wf_array *grads = NULL; /* (4, 3): one gradient per example */
    size_t n = 1;
    wf_status st = wf_fn_call(per_example, (wf_array *[]){w, x, y}, 3, &grads, &n);
    float g[12];
    if (st == WF_OK)
        st = wf_array_copy_to(grads, g, sizeof g);
    wf_fn_release(per_example);
    wf_fn_release(grad);
    wf_fn_release(loss);
    wf_scope_end();
    if (st != WF_OK) {
        fprintf(stderr, "error: %s\n", wf_last_error_message());
        return 1;
    }
    /* example 3: x = (1, 1, 1), x . w - y = 1.5 - 4 = -2.5, gradient 2 * -2.5 * x */
    printf("per-example gradients:\n");
    for (int b = 0; b < 4; b++)
        printf("  %6.2f %6.2f %6.2f\n", g[3 * b], g[3 * b + 1], g[3 * b + 2]);
    return fabsf(g[9] + 5.0f) < 1e-6f && fabsf(g[0] + 1.0f) < 1e-6f ? 0 : 1;
}
