/*
 * The blocked executor for fused element-wise programs (DESIGN section 5).
 *
 * The outputs are laid out as element-wise results are (layout.c: like
 * inputs that share a transposed layout, else row-major) and walked in
 * their memory order in tiles of TILE floats. For each
 * tile every instruction runs one loop over the tile, reading its operands'
 * tile values and writing its own: values live in a few scratch tiles that
 * stay in L1 (a tile is reused once its last reader has run), inputs read
 * in place when their layout matches the output's, and each output's
 * instruction writes straight into that output (later instructions read it
 * back from there while it is in L1). The loops below are compiled for AVX-512,
 * AVX2+FMA and the x86-64 baseline; a run reads the active variant once and
 * uses it for every tile.
 */
#include "backend/cpu/fused.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"
#include "core/error.h"
#include "prim/fused.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* 512 floats (2 KB) a tile: a program's live tiles stay in L1 (1,024 was
 * 20-25% slower on the 8-op chain of 16M floats; 256 no faster). */
enum { TILE = 512, CHUNK = 32 * TILE };

/* ------------------------------------------------------------ tile loops
 *
 * The loop bodies are written once (always inlined) and compiled into one
 * wrapper per instruction-set variant; the variant is vmath's (the best the
 * CPU runs, or the one WEFT_ISA / tests force). Not target_clones: an ifunc
 * resolver runs before the sanitizers' runtimes start. */

static inline __attribute__((always_inline)) void binary_body(int opcode, int64_t n, const float *restrict a, const float *restrict b,
                        float *restrict y)
{
    switch (opcode) {
    case WF_FUSED_ADD:
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] + b[i];
        break;
    case WF_FUSED_SUBTRACT:
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] - b[i];
        break;
    case WF_FUSED_MULTIPLY:
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] * b[i];
        break;
    case WF_FUSED_DIVIDE:
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] / b[i];
        break;
    case WF_FUSED_MAXIMUM: /* NaN wins, as in the maximum kernel */
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] > b[i] || a[i] != a[i] ? a[i] : b[i];
        break;
    case WF_FUSED_MINIMUM:
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] < b[i] || a[i] != a[i] ? a[i] : b[i];
        break;
    default:
        break;
    }
}

static inline __attribute__((always_inline)) void simple_unary_body(int opcode, int64_t n, const float *restrict x, float *restrict y)
{
    switch (opcode) {
    case WF_FUSED_NEGATIVE:
        for (int64_t i = 0; i < n; i++)
            y[i] = -x[i];
        break;
    case WF_FUSED_ABS:
        for (int64_t i = 0; i < n; i++)
            y[i] = fabsf(x[i]);
        break;
    case WF_FUSED_SQUARE:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * x[i];
        break;
    case WF_FUSED_SQRT:
        for (int64_t i = 0; i < n; i++)
            y[i] = sqrtf(x[i]);
        break;
    case WF_FUSED_RSQRT:
        for (int64_t i = 0; i < n; i++)
            y[i] = 1.0f / sqrtf(x[i]);
        break;
    case WF_FUSED_RECIPROCAL:
        for (int64_t i = 0; i < n; i++)
            y[i] = 1.0f / x[i];
        break;
    case WF_FUSED_FLOOR:
        for (int64_t i = 0; i < n; i++)
            y[i] = floorf(x[i]);
        break;
    case WF_FUSED_CEIL:
        for (int64_t i = 0; i < n; i++)
            y[i] = ceilf(x[i]);
        break;
    default:
        break;
    }
}

#define WF_FUSED_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#define WF_FUSED_AVX2 __attribute__((target("avx2,fma")))

WF_FUSED_AVX512 static void binary_avx512(int op, int64_t n, const float *restrict a,
                                          const float *restrict b, float *restrict y)
{
    binary_body(op, n, a, b, y);
}
WF_FUSED_AVX2 static void binary_avx2(int op, int64_t n, const float *restrict a,
                                      const float *restrict b, float *restrict y)
{
    binary_body(op, n, a, b, y);
}
static void binary_baseline(int op, int64_t n, const float *restrict a, const float *restrict b,
                            float *restrict y)
{
    binary_body(op, n, a, b, y);
}
WF_FUSED_AVX512 static void simple_unary_avx512(int op, int64_t n, const float *restrict x,
                                                float *restrict y)
{
    simple_unary_body(op, n, x, y);
}
WF_FUSED_AVX2 static void simple_unary_avx2(int op, int64_t n, const float *restrict x,
                                            float *restrict y)
{
    simple_unary_body(op, n, x, y);
}
static void simple_unary_baseline(int op, int64_t n, const float *restrict x, float *restrict y)
{
    simple_unary_body(op, n, x, y);
}

static void tile_binary(int isa, int opcode, int64_t n, const float *a, const float *b,
                        float *y)
{
    if (isa >= WF_VM_ISA_AVX512)
        binary_avx512(opcode, n, a, b, y);
    else if (isa == WF_VM_ISA_AVX2)
        binary_avx2(opcode, n, a, b, y);
    else
        binary_baseline(opcode, n, a, b, y);
}

static void tile_simple_unary(int isa, int opcode, int64_t n, const float *x, float *y)
{
    if (isa >= WF_VM_ISA_AVX512)
        simple_unary_avx512(opcode, n, x, y);
    else if (isa == WF_VM_ISA_AVX2)
        simple_unary_avx2(opcode, n, x, y);
    else
        simple_unary_baseline(opcode, n, x, y);
}

static void tile_unary(int isa, int opcode, int64_t n, const float *x, float *y)
{
    const wf_vm_table *vm = wf__vm_table(isa);
    switch (opcode) {
    case WF_FUSED_EXP: vm->exp(n, x, y); break;
    case WF_FUSED_EXPM1: vm->expm1(n, x, y); break;
    case WF_FUSED_LOG: vm->log(n, x, y); break;
    case WF_FUSED_LOG1P: vm->log1p(n, x, y); break;
    case WF_FUSED_TANH: vm->tanh(n, x, y); break;
    case WF_FUSED_SIGMOID: vm->sigmoid(n, x, y); break;
    case WF_FUSED_ERF: vm->erf(n, x, y); break;
    case WF_FUSED_SIN: vm->sin(n, x, y); break;
    case WF_FUSED_COS: vm->cos(n, x, y); break;
    default: tile_simple_unary(isa, opcode, n, x, y); break;
    }
}

/* ------------------------------------------------------------ operands */

enum input_layout { LAYOUT_LINEAR, LAYOUT_SCALAR, LAYOUT_STRIDED };

struct fused_input {
    enum input_layout layout;
    const float *base;
    int64_t strides[WF_MAX_NDIM]; /* in the walk's index space (0: broadcast) */
    wf_buffer *copy;              /* a strided input copied in walk order, or NULL */
};

/* The walk goes through the outputs in their memory order: `shape` is the
 * outputs' shape with its dims ordered by decreasing stride (row-major
 * outputs: as they are; outputs laid out like transposed inputs: their
 * order), and every input's strides are seen in that order. */
struct fused_run {
    const wf_fused_program *program;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
    float *out[WF_FUSED_MAX_OUTPUTS];
    /* An output is an input's storage (a donated buffer): its tile is
     * computed into scratch and copied out once every instruction of the
     * tile has read its inputs (restrict loops never see aliased pointers). */
    bool out_aliased[WF_FUSED_MAX_OUTPUTS];
    struct fused_input inputs[];
};

/* Strides of `in` seen through the output's shape (right-aligned; 0 where
 * the input is broadcast), in the walk's dim order `order`, and how it can
 * be read. */
static void describe_input(struct fused_input *fi, const wf_array *in, const wf_array *out,
                           const int *order)
{
    fi->base = wf__array_data_ptr(in);
    fi->copy = NULL;
    int64_t strides[WF_MAX_NDIM];
    wf__cpu_broadcast_strides(out, in, strides);
    for (int k = 0; k < out->ndim; k++)
        fi->strides[k] = strides[order[k]];
    bool linear = true, scalar = true;
    int64_t expected = 1;
    for (int k = out->ndim - 1; k >= 0; k--) {
        if (out->shape[order[k]] != 1) {
            linear = linear && fi->strides[k] == expected;
            scalar = scalar && fi->strides[k] == 0;
        }
        expected *= out->shape[order[k]];
    }
    fi->layout = scalar ? LAYOUT_SCALAR : linear ? LAYOUT_LINEAR : LAYOUT_STRIDED;
}

/* A strided input whose elements along the walk's innermost dim are apart
 * in memory (x.T beside a row-major y) would be gathered one cache line per
 * element: it is copied once, in walk order, by the tiled copies (iter.c),
 * and then read in place. Inputs with broadcast dims stay gathered (a copy
 * would expand them); so does an input whose copy finds no memory. */
static void copy_strided_input(const struct fused_run *run, struct fused_input *fi)
{
    const int last = run->ndim - 1;
    if (fi->layout != LAYOUT_STRIDED || fi->strides[last] == 1)
        return;
    int64_t size = 1;
    for (int k = 0; k < run->ndim; k++) {
        if (run->shape[k] != 1 && fi->strides[k] == 0)
            return;
        size *= run->shape[k];
    }
    fi->copy = wf__buffer_alloc((size_t)size * sizeof(float));
    if (fi->copy == NULL)
        return;
    wf__cpu_copy_strided(run->ndim, run->shape, sizeof(float), fi->base, fi->strides,
                         fi->copy->data);
    fi->base = fi->copy->data;
    fi->layout = LAYOUT_LINEAR;
}

/* Copies elements [start, start + n) of a strided input, in the walk's
 * order, into dst. */
static void gather(const struct fused_run *run, const struct fused_input *fi, int64_t start,
                   int64_t n, float *dst)
{
    int ndim = run->ndim;
    int64_t index[WF_MAX_NDIM];
    int64_t rest = start, offset = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        index[d] = rest % run->shape[d];
        rest /= run->shape[d];
        offset += index[d] * fi->strides[d];
    }
    int last = ndim - 1;
    int64_t inner_stride = fi->strides[last];
    while (n > 0) {
        int64_t run_length = run->shape[last] - index[last];
        if (run_length > n)
            run_length = n;
        const float *src = fi->base + offset;
        for (int64_t i = 0; i < run_length; i++)
            dst[i] = src[i * inner_stride];
        dst += run_length;
        n -= run_length;
        offset += run_length * inner_stride;
        index[last] += run_length;
        for (int d = last; d > 0 && index[d] == run->shape[d]; d--) {
            offset -= index[d] * fi->strides[d];
            index[d] = 0;
            index[d - 1]++;
            offset += fi->strides[d - 1];
        }
    }
}

/* ------------------------------------------------------------ chunks */

/* The output is cut into `nchunks` contiguous pieces (at most a few per pool
 * thread); each piece has its own scratch, allocated up front by the kernel
 * so that no piece can fail on its own. */
struct fused_plan {
    const struct fused_run *run;
    const int *last_use; /* per value: the last instruction reading it */
    const int *output_of; /* per value: the output it is, or -1 */
    int64_t nchunks, per_chunk, total;
    char *scratch;       /* nchunks areas of area_bytes */
    size_t area_bytes;
    int isa;             /* the variant every tile of this run uses */
    /* Outputs this large are computed into scratch tiles and streamed to
     * memory past the caches: a plain store first reads each line (a
     * third more memory traffic), and nothing reads them back soon. */
    bool stream_out;
};

enum { STREAM_OUTPUT_BYTES = 1 << 24 };

/* Whether output k's tiles are computed in scratch and copied out. */
static bool output_staged(const struct fused_plan *plan, int k)
{
    return plan->stream_out || plan->run->out_aliased[k];
}

static atomic_uint_fast64_t runs_by_isa[WF_VM_ISA_COUNT];

uint64_t wf__cpu_fused_runs(int isa)
{
    return isa >= 0 && isa < WF_VM_ISA_COUNT ? atomic_load(&runs_by_isa[isa]) : 0;
}

static size_t chunk_area_bytes(int ninstr)
{
    size_t book = (size_t)ninstr * (sizeof(int) * 3 + sizeof(const float *));
    book = (book + 63) & ~(size_t)63;
    return book + (size_t)ninstr * TILE * sizeof(float);
}

/* True for values that are filled once per chunk: constants and broadcast
 * scalar inputs. */
static bool is_pinned(const struct fused_run *run, const wf_fused_instr *in)
{
    return in->opcode == WF_FUSED_CONST ||
           (in->opcode == WF_FUSED_INPUT && run->inputs[in->a].layout == LAYOUT_SCALAR);
}

static void give_back_operands(const wf_fused_instr *in, int i, const int *last_use, int *slot,
                               const char *pinned, int *free_tiles, int *nfree)
{
    if (in->opcode == WF_FUSED_INPUT || in->opcode == WF_FUSED_CONST)
        return;
    int a = in->a, b = wf__fused_opcode_is_unary(in->opcode) ? -1 : in->b;
    if (last_use[a] == i && slot[a] >= 0 && !pinned[a]) {
        free_tiles[(*nfree)++] = slot[a];
        slot[a] = -1;
    }
    if (b >= 0 && b != a && last_use[b] == i && slot[b] >= 0 && !pinned[b]) {
        free_tiles[(*nfree)++] = slot[b];
        slot[b] = -1;
    }
}

/* The hardware prefetchers stop at 4 KB page boundaries, which an input
 * read in place crosses every other tile: ask for the next tile's lines
 * while this one is computed (they would otherwise arrive from memory one
 * miss at a time). */
static void prefetch_next_tile(const struct fused_run *run, int64_t next, int64_t end)
{
    if (next >= end)
        return;
    const int64_t n = end - next < TILE ? end - next : TILE;
    for (int i = 0; i < run->program->ninputs; i++) {
        if (run->inputs[i].layout != LAYOUT_LINEAR)
            continue;
        const char *p = (const char *)(run->inputs[i].base + next);
        for (int64_t b = 0; b < n * (int64_t)sizeof(float); b += 64)
            __builtin_prefetch(p + b, 0, 3);
    }
}

static void run_chunk(const struct fused_plan *plan, int64_t chunk)
{
    const struct fused_run *run = plan->run;
    const wf_fused_program *p = run->program;
    int ninstr = p->ninstr;
    char *area = plan->scratch + (size_t)chunk * plan->area_bytes;
    const float **value = (const float **)(void *)area; /* pointers first: aligned */
    int *slot = (int *)(void *)(value + ninstr);
    int *free_tiles = slot + ninstr;
    char *pinned = (char *)(free_tiles + ninstr);
    float *tiles = (float *)(void *)(area + plan->area_bytes - (size_t)ninstr * TILE * sizeof(float));
    int nfree = 0;
    for (int i = 0; i < ninstr; i++) {
        slot[i] = -1;
        free_tiles[nfree++] = ninstr - 1 - i;
        pinned[i] = is_pinned(run, &p->instr[i]);
    }
    for (int i = 0; i < ninstr; i++) {
        if (!pinned[i])
            continue;
        const wf_fused_instr *in = &p->instr[i];
        float fill = in->opcode == WF_FUSED_CONST ? in->constant : run->inputs[in->a].base[0];
        slot[i] = free_tiles[--nfree];
        float *t = tiles + (size_t)slot[i] * TILE;
        for (int k = 0; k < TILE; k++)
            t[k] = fill;
        value[i] = t;
    }
    int64_t begin = chunk * plan->per_chunk;
    int64_t end = begin + plan->per_chunk < plan->total ? begin + plan->per_chunk : plan->total;
    for (int64_t start = begin; start < end; start += TILE) {
        int64_t n = end - start < TILE ? end - start : TILE;
        prefetch_next_tile(run, start + TILE, end);
        for (int i = 0; i < ninstr; i++) {
            const wf_fused_instr *in = &p->instr[i];
            if (pinned[i] || plan->last_use[i] < 0)
                continue; /* filled once, or never read */
            if (in->opcode == WF_FUSED_INPUT && run->inputs[in->a].layout == LAYOUT_LINEAR) {
                value[i] = run->inputs[in->a].base + start;
                continue;
            }
            float *dst;
            int k = plan->output_of[i];
            if (k >= 0 && !output_staged(plan, k)) {
                dst = run->out[k] + start;
            } else {
                slot[i] = free_tiles[--nfree];
                dst = tiles + (size_t)slot[i] * TILE;
            }
            if (in->opcode == WF_FUSED_INPUT)
                gather(run, &run->inputs[in->a], start, n, dst);
            else if (wf__fused_opcode_is_unary(in->opcode))
                tile_unary(plan->isa, in->opcode, n, value[in->a], dst);
            else
                tile_binary(plan->isa, in->opcode, n, value[in->a], value[in->b], dst);
            value[i] = dst;
            give_back_operands(in, i, plan->last_use, slot, pinned, free_tiles, &nfree);
        }
        for (int k = 0; k < p->noutputs; k++) {
            int o = p->outputs[k];
            if (plan->stream_out)
                wf__cpu_stream_copy(run->out[k] + start, value[o], (size_t)n * sizeof(float));
            else if (value[o] != run->out[k] + start) /* an input, a constant or aliased */
                memcpy(run->out[k] + start, value[o], (size_t)n * sizeof(float));
            if (output_staged(plan, k) && slot[o] >= 0 && !pinned[o]) {
                free_tiles[nfree++] = slot[o]; /* the next tile takes it again */
                slot[o] = -1;
            }
        }
    }
}

static void run_chunks(void *ctx, int64_t begin, int64_t end)
{
    const struct fused_plan *plan = ctx;
    for (int64_t c = begin; c < end; c++)
        run_chunk(plan, c);
    if (plan->stream_out) /* before the pool hands the chunks back */
        wf__cpu_stream_fence();
}

/* Per value: the last instruction reading it, outputs last of all (read
 * when the tile is copied out), and which output it is. */
static void plan_values(const wf_fused_program *p, int *last_use, int *output_of)
{
    for (int i = 0; i < p->ninstr; i++)
        last_use[i] = output_of[i] = -1;
    for (int i = 0; i < p->ninstr; i++) {
        const wf_fused_instr *in = &p->instr[i];
        if (in->opcode == WF_FUSED_INPUT || in->opcode == WF_FUSED_CONST)
            continue;
        last_use[in->a] = i;
        if (!wf__fused_opcode_is_unary(in->opcode))
            last_use[in->b] = i;
    }
    for (int k = 0; k < p->noutputs; k++) {
        last_use[p->outputs[k]] = p->ninstr;
        output_of[p->outputs[k]] = k;
    }
}

wf_status wf__cpu_fused(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    const wf_fused_program *p = ((const wf_fused_params *)params)->program;
    /* The first output is laid out like inputs that share a transposed or
     * permuted layout (layout.c), or like the input whose buffer it was
     * donated (the runtime donates to single-output nodes only); the others
     * follow it. */
    wf_status status = wf__cpu_alloc_elementwise_output(out, inputs, ninputs);
    int order[WF_MAX_NDIM];
    if (status == WF_OK)
        wf__cpu_dims_by_stride(out->ndim, out->strides, order);
    for (int k = 1; k < p->noutputs && status == WF_OK; k++)
        status = wf__array_alloc_output_ordered(wf__node_output(out, k), order);
    if (status != WF_OK)
        return status; /* what was allocated goes with the nodes */
    wf__fused_count_run();
    if (out->size == 0)
        return WF_OK;
    int64_t max_chunks = 4 * (int64_t)wf__pool_size();
    int64_t nchunks = (out->size + CHUNK - 1) / CHUNK;
    if (nchunks > max_chunks)
        nchunks = max_chunks;
    int64_t per_chunk = (out->size + nchunks - 1) / nchunks;
    per_chunk = (per_chunk + TILE - 1) / TILE * TILE; /* whole tiles, aligned starts */
    nchunks = (out->size + per_chunk - 1) / per_chunk;
    struct fused_plan plan = {.nchunks = nchunks, .per_chunk = per_chunk, .total = out->size,
                              .area_bytes = chunk_area_bytes(p->ninstr),
                              .isa = wf__vm_isa_active(),
                              .stream_out = (uint64_t)out->size * sizeof(float) *
                                                (uint64_t)p->noutputs >=
                                            STREAM_OUTPUT_BYTES};
    struct fused_run *run = wf__malloc(sizeof *run + (size_t)ninputs * sizeof(struct fused_input));
    int *last_use = wf__malloc(2 * (size_t)p->ninstr * sizeof *last_use);
    plan.scratch = wf__aligned_alloc(64, (size_t)nchunks * plan.area_bytes);
    if (!run || !last_use || !plan.scratch) {
        free(run);
        free(last_use);
        free(plan.scratch);
        return wf__error(WF_ERR_OUT_OF_MEMORY, "fused: out of memory for scratch tiles");
    }
    run->program = p;
    run->ndim = out->ndim;
    for (int k = 0; k < out->ndim; k++)
        run->shape[k] = out->shape[order[k]];
    for (int k = 0; k < p->noutputs; k++) {
        const wf_array *o = wf__node_output(out, k);
        run->out[k] = wf__array_data_ptr(o);
        run->out_aliased[k] = false;
        for (int i = 0; i < ninputs; i++)
            run->out_aliased[k] |= inputs[i]->buffer == o->buffer;
    }
    for (int i = 0; i < ninputs; i++) {
        describe_input(&run->inputs[i], inputs[i], out, order);
        copy_strided_input(run, &run->inputs[i]);
    }
    plan_values(p, last_use, last_use + p->ninstr);
    plan.run = run;
    plan.last_use = last_use;
    plan.output_of = last_use + p->ninstr;
    atomic_fetch_add_explicit(&runs_by_isa[plan.isa], 1, memory_order_relaxed);
    wf__parallel_for(nchunks, 1, run_chunks, &plan);
    for (int i = 0; i < ninputs; i++)
        if (run->inputs[i].copy != NULL)
            wf__buffer_release(run->inputs[i].copy);
    free(plan.scratch);
    free(last_use);
    free(run);
    return WF_OK;
}
