/* Ops that build temporaries (casts, broadcasts, reshapes, index arrays)
 * build them with the internal builders of ops/ops.h: inside a scope the op
 * hands exactly its result to the scope, and after the result is released
 * no array of the op is left. Before the internal builders, every
 * temporary went through the scope too (adopted, then forgotten). */
#include "core/array.h"
#include "core/scope.h"
#include "harness.h"
#include "settle.h"

struct inputs {
    wf_array *i32_3;  /* int32 (3,) */
    wf_array *f32_23; /* float32 (2, 3) */
    wf_array *f16_3;  /* float16 (3,) */
    wf_array *f32_3;  /* float32 (3,) */
    wf_array *mask;   /* bool (3, 3) */
    wf_array *idx;    /* int32 (2,) */
    wf_array *f32_2;  /* float32 (2,) */
    wf_array *idx_12; /* int32 (1, 2) */
};

static struct inputs make_inputs(void)
{
    const int32_t iv[3] = {0, 1, 2};
    const float fv[6] = {1, 2, 3, 4, 5, 6};
    const uint8_t mv[9] = {1, 0, 1, 1, 1, 0, 0, 1, 1};
    const int32_t idx[2] = {2, 0};
    const int64_t s3[1] = {3}, s23[2] = {2, 3}, s33[2] = {3, 3}, s2[1] = {2};
    struct inputs in;
    in.i32_3 = wf_array_from_data(iv, s3, 1, WF_DTYPE_I32);
    in.f32_23 = wf_array_from_data(fv, s23, 2, WF_DTYPE_F32);
    in.f32_3 = wf_array_from_data(fv, s3, 1, WF_DTYPE_F32);
    in.f16_3 = wf_astype(in.f32_3, WF_DTYPE_F16);
    in.mask = wf_array_from_data(mv, s33, 2, WF_DTYPE_BOOL);
    in.idx = wf_array_from_data(idx, s2, 1, WF_DTYPE_I32);
    in.f32_2 = wf_array_from_data(fv, s2, 1, WF_DTYPE_F32);
    const int64_t s12[2] = {1, 2};
    in.idx_12 = wf_array_from_data(idx, s12, 2, WF_DTYPE_I32);
    return in;
}

static void release_inputs(struct inputs *in)
{
    wf_release(in->i32_3);
    wf_release(in->f32_23);
    wf_release(in->f16_3);
    wf_release(in->f32_3);
    wf_release(in->mask);
    wf_release(in->idx);
    wf_release(in->f32_2);
    wf_release(in->idx_12);
}

enum { CASES = 16 };

/* Case k: one op call that builds temporaries. */
static wf_array *op_case(int k, const struct inputs *in)
{
    const int64_t rep2[2] = {2, 2}, one[1] = {1}, four[1] = {4}, s23[2] = {2, 3};
    switch (k) {
    case 0: return wf_exp(in->i32_3);                     /* cast */
    case 1: return wf_add(in->i32_3, in->f32_23);         /* cast + broadcast */
    case 2: return wf_where(in->mask, in->f32_3, in->i32_3);
    case 3: return wf_addmm(in->f32_2, in->f32_23, in->f32_3, 1.0, 1.0); /* reshapes */
    case 4: return wf_tile(in->f32_23, rep2, 2);          /* reshape, broadcast, reshape */
    case 5: return wf_repeat(in->f32_3, 2, 0);            /* index array + take */
    case 6: return wf_stack((wf_array *const[]){in->f32_3, in->f16_3}, 2, 0);
    case 7: /* the mask broadcast to (Lq, Lk) */
        return wf_scaled_dot_product_attention(in->f32_23, in->f32_23, in->f32_23, 0.5,
                                               in->f32_2, false);
    case 8: return wf_silu(in->i32_3);
    case 9: return wf_slice_update(in->f32_3, in->idx, one, four, one);
    case 10: return wf_take_along_axis(in->f32_23, in->idx_12, 1);
    case 11: return wf_scatter_add(in->f32_3, in->idx, in->idx, 0);
    case 12: return wf_concatenate((wf_array *const[]){in->f32_3, in->i32_3}, 2, 0);
    case 13: return wf_random_bernoulli(in->f16_3, s23, 2, NULL);
    case 14: return wf_clip(in->i32_3, in->f32_3, in->f16_3);
    case 15: return wf_random_categorical(in->f16_3, 0, NULL);
    }
    return NULL;
}

static void test_each_op_hands_only_its_result_to_the_scope(void)
{
    const int64_t live0 = live_arrays();
    struct inputs in = make_inputs();
    const int64_t live_inputs = live_arrays();
    for (int k = 0; k < CASES; k++) {
        CHECK_OK(wf_scope_begin());
        const uint64_t adopted0 = wf__scope_adoptions();
        wf_array *r = op_case(k, &in);
        if (!CHECK_NOT_NULL(r))
            printf("    case %d\n", k);
        if (!CHECK_EQ_INT(wf__scope_adoptions() - adopted0, 1))
            printf("    case %d\n", k);
        CHECK_OK(wf_eval(&r, 1));
        CHECK_OK(wf_scope_end());
        if (!CHECK_EQ_INT(live_arrays(), live_inputs))
            printf("    case %d left arrays behind\n", k);
    }
    /* matmul of 1-d by 2-d reshapes both operands and the product. */
    wf_array *t = wf_transpose(in.f32_23, NULL, 0);
    CHECK_OK(wf_scope_begin());
    const uint64_t adopted0 = wf__scope_adoptions();
    wf_array *mm = wf_matmul(in.f32_3, t);
    CHECK_EQ_INT(wf__scope_adoptions() - adopted0, 1);
    CHECK_EQ_INT(wf_array_ndim(mm), 1);
    CHECK_OK(wf_eval(&mm, 1));
    CHECK_OK(wf_scope_end());
    wf_release(t);
    CHECK_EQ_INT(live_arrays(), live_inputs);
    release_inputs(&in);
    CHECK_EQ_INT(live_arrays(), live0);
}

static void test_split_hands_each_part_to_the_scope(void)
{
    const int64_t live0 = live_arrays();
    struct inputs in = make_inputs();
    wf_array *parts[3];
    CHECK_OK(wf_scope_begin());
    const uint64_t adopted0 = wf__scope_adoptions();
    CHECK_OK(wf_split(in.f32_23, 3, 1, parts));
    CHECK_EQ_INT(wf__scope_adoptions() - adopted0, 3);
    const int64_t at[1] = {1};
    CHECK_OK(wf_split_at(in.f32_23, at, 1, 0, parts));
    CHECK_EQ_INT(wf__scope_adoptions() - adopted0, 5);
    CHECK_OK(wf_scope_end());
    release_inputs(&in);
    CHECK_EQ_INT(live_arrays(), live0);
}

/* Outside any scope an op's temporaries are freed with its result. */
static void test_no_scope_no_leak(void)
{
    const int64_t live0 = live_arrays();
    struct inputs in = make_inputs();
    const int64_t live_inputs = live_arrays();
    for (int k = 0; k < CASES; k++) {
        wf_array *r = op_case(k, &in);
        CHECK_OK(wf_eval(&r, 1));
        wf_release(r);
        if (!CHECK_EQ_INT(live_arrays(), live_inputs))
            printf("    case %d left arrays behind\n", k);
    }
    release_inputs(&in);
    CHECK_EQ_INT(live_arrays(), live0);
}

int main(void)
{
    RUN_TEST(test_each_op_hands_only_its_result_to_the_scope);
    RUN_TEST(test_split_hands_each_part_to_the_scope);
    RUN_TEST(test_no_scope_no_leak);
    return TEST_SUMMARY();
}
