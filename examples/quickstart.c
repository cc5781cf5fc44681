/* quickstart: build a small lazy graph, evaluate it, read the result. */
#include <stdio.h>
#include <weft.h>

int main(void)
{
    float xs[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    wf_scope_begin(); /* arrays made in the scope are released by wf_scope_end */
    wf_array *x = wf_array_from_data(xs, shape, 2, WF_DTYPE_F32);
    wf_array *w = wf_ones((int64_t[]){3, 2}, 2, WF_DTYPE_F32);
    wf_array *y = wf_exp(wf_multiply(wf_matmul(x, w), wf_scalar(0.1, WF_DTYPE_F32)));
    wf_array *total = wf_sum(y, NULL, 0, false); /* nothing has run yet */
    double value;
    if (wf_array_item(total, &value) != WF_OK) { /* evaluates the graph */
        fprintf(stderr, "error: %s\n", wf_last_error_message());
        wf_scope_end();
        return 1;
    }
    printf("sum(exp(0.1 * x @ w)) = %.4f\n", value); /* 12.6076 */
    wf_scope_end();
    return value > 12.607 && value < 12.608 ? 0 : 1;
}
