/*
 * When weft asks Linux for the AMX tile state (gemm_amx.c): only at the
 * first bfloat16 product of the AMX variant, never for programs that
 * multiply no bfloat16 (the permission enlarges every signal frame of the
 * process). Its own process: the question is asked once per process, and
 * the other GEMM tests ask it early. On a CPU without AMX it checks that
 * nothing is asked and bfloat16 products still run.
 */
#include <stdint.h>
#include <stdio.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backend/cpu/gemm.h"
#include "harness.h"

/* Whether this process may use the tile data state (Linux's answer). */
static bool tiles_permitted(void)
{
#if defined(__linux__) && defined(__x86_64__)
    unsigned long long features = 0;
    if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &features) != 0)
        return false;
    return (features >> 18 & 1u) != 0; /* XFEATURE_XTILEDATA */
#else
    return false;
#endif
}

static wf_array *product(wf_dtype dtype)
{
    const int64_t shape[2] = {48, 40};
    wf_key key = wf_random_key(5);
    wf_array *a = wf_astype(wf_random_normal(shape, 2, WF_DTYPE_F32, 0, 1, &key), dtype);
    wf_array *y = wf_matmul(a, wf_transpose(a, NULL, 0));
    CHECK_OK(wf_eval(&y, 1));
    return y;
}

static void test_asked_at_the_first_bfloat16_product(void)
{
    wf_scope_begin();
    CHECK(!tiles_permitted());
    product(WF_DTYPE_F32);
    product(WF_DTYPE_F64);
    CHECK(!tiles_permitted()); /* no bfloat16 yet: never asked */
    wf_array *y = product(WF_DTYPE_BF16);
    CHECK_EQ_INT(wf_array_dtype(y), WF_DTYPE_BF16);
    const bool amx = wf__gemm_isa() == WF_GEMM_ISA_AMX_BF16;
    if (!wf__gemm_amx_cpu())
        printf("    (no AMX on this CPU: bfloat16 ran on %s, nothing asked)\n",
               wf__gemm_isa_name(wf__gemm_isa()));
    CHECK(tiles_permitted() == (amx && wf__gemm_amx_available()));
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_asked_at_the_first_bfloat16_product);
    return TEST_SUMMARY();
}
