/*
 * The rules table: every fragment (transforms/rules_*.c) indexed by
 * primitive once, in a small open-addressing table built on first use.
 */
#include <pthread.h>
#include <stdint.h>

#include "transforms/rules.h"

enum { TABLE_SLOTS = 512 }; /* a power of two, well above the primitive count */

static const struct {
    const wf_prim_rules *rules;
    const size_t *count;
} fragments[] = {
    {wf__rules_elementwise, &wf__rules_elementwise_count},
    {wf__rules_reduce, &wf__rules_reduce_count},
    {wf__rules_shape, &wf__rules_shape_count},
    {wf__rules_index, &wf__rules_index_count},
    {wf__rules_linalg, &wf__rules_linalg_count},
    {wf__rules_linalg_factor, &wf__rules_linalg_factor_count},
    {wf__rules_other, &wf__rules_other_count},
    {wf__rules_fast, &wf__rules_fast_count},
    {wf__rules_custom_function, &wf__rules_custom_function_count},
    {wf__rules_scatter, &wf__rules_scatter_count},
    {wf__rules_sort, &wf__rules_sort_count},
    {wf__rules_fft, &wf__rules_fft_count},
    {wf__rules_conv, &wf__rules_conv_count},
    {wf__rules_distributed, &wf__rules_distributed_count},
    {wf__rules_quantized, &wf__rules_quantized_count},
    {wf__rules_matmul_family, &wf__rules_matmul_family_count},
};

static const wf_prim_rules *slots[TABLE_SLOTS];
static const wf_prim_rules *all_rules[TABLE_SLOTS];
static size_t nall;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static size_t slot_of(const wf_prim_def *prim)
{
    return (size_t)(((uintptr_t)prim >> 3) * 0x9E3779B97F4A7C15u >> 55) & (TABLE_SLOTS - 1);
}

static void build_table(void)
{
    for (size_t f = 0; f < sizeof fragments / sizeof fragments[0]; f++) {
        for (size_t i = 0; i < *fragments[f].count && nall < TABLE_SLOTS / 2; i++) {
            const wf_prim_rules *r = &fragments[f].rules[i];
            size_t s = slot_of(r->prim);
            while (slots[s])
                s = (s + 1) & (TABLE_SLOTS - 1);
            slots[s] = r;
            all_rules[nall++] = r;
        }
    }
}

const wf_prim_rules *wf__rules_find(const wf_prim_def *prim)
{
    pthread_once(&table_once, build_table);
    for (size_t s = slot_of(prim); slots[s]; s = (s + 1) & (TABLE_SLOTS - 1))
        if (slots[s]->prim == prim)
            return slots[s];
    return NULL;
}

const wf_prim_rules *const *wf__rules_all(size_t *count)
{
    pthread_once(&table_once, build_table);
    *count = nall;
    return all_rules;
}
