/* The fused element-wise primitive: programs, their checks and hashes, and
 * shape inference (the broadcast of the inputs). */
#include "prim/fused.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "prim/prims.h"
#include "util/fault.h"

static const char *const opcode_names[WF_FUSED_OPCODE_COUNT] = {
    [WF_FUSED_INPUT] = "input",       [WF_FUSED_CONST] = "const",
    [WF_FUSED_NEGATIVE] = "negative", [WF_FUSED_ABS] = "abs",
    [WF_FUSED_SQUARE] = "square",     [WF_FUSED_SQRT] = "sqrt",
    [WF_FUSED_RSQRT] = "rsqrt",       [WF_FUSED_RECIPROCAL] = "reciprocal",
    [WF_FUSED_EXP] = "exp",           [WF_FUSED_EXPM1] = "expm1",
    [WF_FUSED_LOG] = "log",           [WF_FUSED_LOG1P] = "log1p",
    [WF_FUSED_TANH] = "tanh",         [WF_FUSED_SIGMOID] = "sigmoid",
    [WF_FUSED_ERF] = "erf",           [WF_FUSED_SIN] = "sin",
    [WF_FUSED_COS] = "cos",           [WF_FUSED_FLOOR] = "floor",
    [WF_FUSED_CEIL] = "ceil",         [WF_FUSED_ADD] = "add",
    [WF_FUSED_SUBTRACT] = "subtract", [WF_FUSED_MULTIPLY] = "multiply",
    [WF_FUSED_DIVIDE] = "divide",     [WF_FUSED_MAXIMUM] = "maximum",
    [WF_FUSED_MINIMUM] = "minimum",
};

const char *wf__fused_opcode_name(int opcode)
{
    if (opcode < 0 || opcode >= WF_FUSED_OPCODE_COUNT)
        return "?";
    return opcode_names[opcode];
}

bool wf__fused_opcode_is_unary(int opcode)
{
    return opcode >= WF_FUSED_NEGATIVE && opcode < WF_FUSED_ADD;
}

wf_fused_program *wf__fused_program_new(int ninstr)
{
    wf_fused_program *p = wf__calloc(1, sizeof *p + (size_t)ninstr * sizeof(wf_fused_instr));
    if (!p) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "fused: out of memory building a program");
        return NULL;
    }
    atomic_init(&p->refcount, 1);
    p->ninstr = ninstr;
    return p;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3u; }

wf_status wf__fused_program_seal(wf_fused_program *p)
{
    if (p->ninstr < 1 || p->noutputs < 1 || p->noutputs > WF_FUSED_MAX_OUTPUTS)
        return wf__error(WF_ERR_INTERNAL, "fused: program has no valid output");
    uint64_t h = mix(0xcbf29ce484222325u, (uint64_t)p->ninputs);
    for (int k = 0; k < p->noutputs; k++) {
        if (p->outputs[k] < 0 || p->outputs[k] >= p->ninstr)
            return wf__error(WF_ERR_INTERNAL, "fused: output %d is not an instruction", k);
        for (int j = 0; j < k; j++)
            if (p->outputs[j] == p->outputs[k])
                return wf__error(WF_ERR_INTERNAL, "fused: outputs %d and %d coincide", j, k);
        h = mix(h, (uint64_t)p->outputs[k]);
    }
    for (int i = 0; i < p->ninstr; i++) {
        const wf_fused_instr *in = &p->instr[i];
        if (in->opcode < 0 || in->opcode >= WF_FUSED_OPCODE_COUNT)
            return wf__error(WF_ERR_INTERNAL, "fused: bad opcode %d", in->opcode);
        bool input = in->opcode == WF_FUSED_INPUT, constant = in->opcode == WF_FUSED_CONST;
        bool unary = wf__fused_opcode_is_unary(in->opcode);
        if (input && (in->a < 0 || in->a >= p->ninputs))
            return wf__error(WF_ERR_INTERNAL, "fused: input %d out of range", in->a);
        if (!input && !constant && (in->a < 0 || in->a >= i))
            return wf__error(WF_ERR_INTERNAL, "fused: operand of %d is not earlier", i);
        if (!input && !constant && !unary && (in->b < 0 || in->b >= i))
            return wf__error(WF_ERR_INTERNAL, "fused: operand of %d is not earlier", i);
        uint32_t bits;
        memcpy(&bits, &in->constant, sizeof bits);
        h = mix(mix(mix(mix(h, (uint64_t)in->opcode), (uint64_t)in->a), (uint64_t)in->b), bits);
    }
    p->hash = mix(h, (uint64_t)p->noutputs);
    return WF_OK;
}

wf_fused_program *wf__fused_program_retain(wf_fused_program *p)
{
    atomic_fetch_add_explicit(&p->refcount, 1, memory_order_relaxed);
    return p;
}

void wf__fused_program_release(wf_fused_program *p)
{
    if (p && atomic_fetch_sub_explicit(&p->refcount, 1, memory_order_acq_rel) == 1)
        free(p);
}

static atomic_uint_fast64_t fused_runs;

uint64_t wf__fused_kernels_run(void) { return atomic_load(&fused_runs); }
void wf__fused_count_run(void) { atomic_fetch_add_explicit(&fused_runs, 1, memory_order_relaxed); }

/* ------------------------------------------------------------ the primitive */

static wf_status infer_fused(const void *params, const wf_desc *inputs, int ninputs,
                             wf_out_desc *out)
{
    const wf_fused_params *fp = params;
    if (ninputs != fp->program->ninputs)
        return wf__error(WF_ERR_INTERNAL, "fused: expected %d inputs, got %d",
                         fp->program->ninputs, ninputs);
    out->ndim = 0;
    for (int i = 0; i < ninputs; i++) {
        if (inputs[i].dtype != WF_DTYPE_F32)
            return wf__error(WF_ERR_DTYPE, "fused: input %d is %s, not float32", i,
                             wf_dtype_name(inputs[i].dtype));
        int64_t joined[WF_MAX_NDIM];
        int n;
        wf_status st = wf__broadcast_shapes("fused", out->shape, out->ndim, inputs[i].shape,
                                            inputs[i].ndim, joined, &n);
        if (st != WF_OK)
            return st;
        wf__shape_copy(out->shape, joined, n);
        out->ndim = n;
    }
    out->dtype = WF_DTYPE_F32;
    for (int k = 1; k < fp->program->noutputs; k++)
        out[k] = out[0]; /* every output has the node's shape */
    return WF_OK;
}

static bool fused_params_equal(const void *a, const void *b)
{
    const wf_fused_program *pa = ((const wf_fused_params *)a)->program;
    const wf_fused_program *pb = ((const wf_fused_params *)b)->program;
    if (pa == pb)
        return true;
    return pa->hash == pb->hash && pa->ninputs == pb->ninputs && pa->ninstr == pb->ninstr &&
           pa->noutputs == pb->noutputs &&
           memcmp(pa->outputs, pb->outputs, sizeof pa->outputs) == 0 &&
           memcmp(pa->instr, pb->instr, (size_t)pa->ninstr * sizeof(wf_fused_instr)) == 0;
}

static uint64_t fused_params_hash(const void *params)
{
    return ((const wf_fused_params *)params)->program->hash;
}

static void fused_params_release(void *params)
{
    wf_fused_params *fp = params;
    wf__fused_program_release(fp->program);
    fp->program = NULL;
}

static void fused_params_retain(void *params)
{
    wf__fused_program_retain(((wf_fused_params *)params)->program);
}

const wf_prim_def wf__prim_fused = {
    .name = "fused",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = sizeof(wf_fused_params),
    .infer = infer_fused,
    .params_equal = fused_params_equal,
    .params_hash = fused_params_hash,
    .params_release = fused_params_release,
    .params_retain = fused_params_retain,
    .kernels = &(wf_kernel_slots){{0}},
};

/* Multi-output primaries: element-wise in each output, never given an
 * input's buffer (runtime/eval.c donates to no primary). */
const wf_prim_def wf__prim_fused2 = {
    .name = "fused2", .flags = WF_PRIM_ELEMENTWISE, .noutputs = 2,
    .params_size = sizeof(wf_fused_params), .infer = infer_fused,
    .params_equal = fused_params_equal, .params_hash = fused_params_hash,
    .params_release = fused_params_release, .params_retain = fused_params_retain,
    .kernels = &(wf_kernel_slots){{0}},
};
const wf_prim_def wf__prim_fused3 = {
    .name = "fused3", .flags = WF_PRIM_ELEMENTWISE, .noutputs = 3,
    .params_size = sizeof(wf_fused_params), .infer = infer_fused,
    .params_equal = fused_params_equal, .params_hash = fused_params_hash,
    .params_release = fused_params_release, .params_retain = fused_params_retain,
    .kernels = &(wf_kernel_slots){{0}},
};
const wf_prim_def wf__prim_fused4 = {
    .name = "fused4", .flags = WF_PRIM_ELEMENTWISE, .noutputs = 4,
    .params_size = sizeof(wf_fused_params), .infer = infer_fused,
    .params_equal = fused_params_equal, .params_hash = fused_params_hash,
    .params_release = fused_params_release, .params_retain = fused_params_retain,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def *wf__prim_fused_for(int noutputs)
{
    static const wf_prim_def *const by_count[WF_FUSED_MAX_OUTPUTS + 1] = {
        NULL, &wf__prim_fused, &wf__prim_fused2, &wf__prim_fused3, &wf__prim_fused4};
    return noutputs >= 1 && noutputs <= WF_FUSED_MAX_OUTPUTS ? by_count[noutputs] : NULL;
}

bool wf__prim_is_fused(const wf_prim_def *prim)
{
    return prim && wf__prim_fused_for(prim->noutputs > 1 ? prim->noutputs : 1) == prim;
}
