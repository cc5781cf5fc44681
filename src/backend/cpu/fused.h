/* CPU kernel of the fused element-wise primitive (src/prim/fused.h). Internal. */
#ifndef WEFT_BACKEND_CPU_FUSED_H
#define WEFT_BACKEND_CPU_FUSED_H

#include "core/array.h"

/* Runs the node's program over tiles of the output that stay in L1: each
 * instruction is one tight loop over a tile, so the chain reads its inputs
 * and writes its output once. Tiles are split over the intra-op pool in
 * fixed-size chunks (element-wise: the bits never depend on the split). */
wf_status wf__cpu_fused(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);

/* Fused kernel runs (with a non-empty output) that used instruction-set
 * variant `isa` (enum wf_vm_isa), read once per run from
 * wf__vm_isa_active(): tests check each variant really ran. */
uint64_t wf__cpu_fused_runs(int isa);

#endif
