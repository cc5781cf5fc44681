/*
 * Fusing a tape (DESIGN section 5, step 4): a group of float32 element-wise
 * nodes whose intermediate values are read only inside the group becomes one
 * fused node, run by the blocked executor. Broadcasts of the group's leaves
 * are absorbed (the fused kernel broadcasts its inputs), and float32 scalar
 * constants become immediates of the program.
 *
 * Groups grow from a root (walking the tape backwards) towards its
 * operands: an operand joins when every use of it is inside the group, so a
 * group is convex (no path leaves it and comes back) and its intermediates
 * are never needed elsewhere.
 */
#include <stdlib.h>
#include <string.h>

#include "compile/tape.h"
#include "core/error.h"
#include "prim/binary.h"
#include "prim/fused.h"
#include "prim/prims.h"
#include "prim/unary.h"

enum { MAX_GROUP_INSTR = 64 };

static wf_status out_of_memory(void)
{
    return wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory fusing a trace");
}

static int opcode_of(const wf_prim_def *prim)
{
    static const struct {
        const wf_prim_def *prim;
        int opcode;
    } table[] = {
        {&wf__prim_add, WF_FUSED_ADD},           {&wf__prim_subtract, WF_FUSED_SUBTRACT},
        {&wf__prim_multiply, WF_FUSED_MULTIPLY}, {&wf__prim_divide, WF_FUSED_DIVIDE},
        {&wf__prim_maximum, WF_FUSED_MAXIMUM},   {&wf__prim_minimum, WF_FUSED_MINIMUM},
        {&wf__prim_negative, WF_FUSED_NEGATIVE}, {&wf__prim_abs, WF_FUSED_ABS},
        {&wf__prim_square, WF_FUSED_SQUARE},     {&wf__prim_sqrt, WF_FUSED_SQRT},
        {&wf__prim_rsqrt, WF_FUSED_RSQRT},       {&wf__prim_reciprocal, WF_FUSED_RECIPROCAL},
        {&wf__prim_exp, WF_FUSED_EXP},           {&wf__prim_expm1, WF_FUSED_EXPM1},
        {&wf__prim_log, WF_FUSED_LOG},           {&wf__prim_log1p, WF_FUSED_LOG1P},
        {&wf__prim_tanh, WF_FUSED_TANH},         {&wf__prim_sigmoid, WF_FUSED_SIGMOID},
        {&wf__prim_erf, WF_FUSED_ERF},           {&wf__prim_sin, WF_FUSED_SIN},
        {&wf__prim_cos, WF_FUSED_COS},           {&wf__prim_floor, WF_FUSED_FLOOR},
        {&wf__prim_ceil, WF_FUSED_CEIL},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].prim == prim)
            return table[i].opcode;
    return -1;
}

static bool is_f32_compute(const wf_tape_node *n)
{
    return n->dtype == WF_DTYPE_F32 && opcode_of(n->prim) >= 0;
}

/* A broadcast of a float32 leaf to the group's shape. */
static bool is_leaf_broadcast(const wf_tape_node *n, const wf_tape_node *root)
{
    return n->prim == &wf__prim_broadcast_to && n->dtype == WF_DTYPE_F32 &&
           wf__shape_equal(n->shape, n->ndim, root->shape, root->ndim);
}

struct fuser {
    wf_tape *t;
    int *uses;        /* per node: operand uses by nodes and outputs */
    int *group;       /* per node: group id, -1 none */
    int *group_uses;  /* per node: uses from members of group_of_count */
    int *group_of_count;
    int *members;     /* scratch: the current group's members */
};

/* Grows group `g` from `root`; returns the member count (members in
 * f->members, in no particular order). */
static int grow_group(struct fuser *f, int g, int root)
{
    const wf_tape_node *root_node = &f->t->nodes[root];
    int count = 0;
    f->group[root] = g;
    f->members[count++] = root;
    for (int m = 0; m < count && count < MAX_GROUP_INSTR; m++) {
        const wf_tape_node *member = &f->t->nodes[f->members[m]];
        if (member->prim == &wf__prim_broadcast_to)
            continue; /* its operand is a leaf */
        for (int k = 0; k < member->ninputs; k++) {
            wf_tape_ref r = member->inputs[k];
            if (r.kind != WF_TAPE_NODE || f->group[r.index] >= 0)
                continue;
            int p = r.index;
            if (f->group_of_count[p] != g) {
                f->group_of_count[p] = g;
                f->group_uses[p] = 0;
            }
            f->group_uses[p]++;
            const wf_tape_node *pn = &f->t->nodes[p];
            bool joinable = (is_f32_compute(pn) &&
                             wf__shape_equal(pn->shape, pn->ndim, root_node->shape,
                                             root_node->ndim)) ||
                            is_leaf_broadcast(pn, root_node);
            if (joinable && f->group_uses[p] == f->uses[p] && count < MAX_GROUP_INSTR) {
                f->group[p] = g;
                f->members[count++] = p;
            }
        }
    }
    return count;
}

static int compare_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The float32 value of a scalar constant, if the operand is one (directly or
 * broadcast). */
static bool scalar_constant(const wf_tape *t, wf_tape_ref r, float *value)
{
    if (r.kind == WF_TAPE_NODE && t->nodes[r.index].prim == &wf__prim_broadcast_to)
        r = t->nodes[r.index].inputs[0];
    if (r.kind != WF_TAPE_CONST)
        return false;
    const wf_array *a = t->consts[r.index];
    if (a->ndim != 0 || a->dtype != WF_DTYPE_F32 || wf__array_state(a) != WF_NODE_READY)
        return false;
    *value = *(const float *)wf__array_data_ptr(a);
    return true;
}

struct program_builder {
    wf_fused_program *program;
    int ninstr;
    wf_tape_ref leaves[MAX_GROUP_INSTR];
    int nleaves;
    int value_of_member[MAX_GROUP_INSTR]; /* by position in the sorted member list */
};

static int leaf_instruction(struct program_builder *b, wf_tape_ref leaf)
{
    for (int i = 0; i < b->ninstr; i++) {
        const wf_fused_instr *in = &b->program->instr[i];
        if (in->opcode == WF_FUSED_INPUT && b->leaves[in->a].kind == leaf.kind &&
            b->leaves[in->a].index == leaf.index)
            return i;
    }
    b->leaves[b->nleaves] = leaf;
    b->program->instr[b->ninstr] = (wf_fused_instr){WF_FUSED_INPUT, b->nleaves++, 0, 0.0f};
    return b->ninstr++;
}

/* The instruction computing operand `r` of a member. */
static int operand_instruction(struct program_builder *b, const wf_tape *t, const int *sorted,
                               int count, wf_tape_ref r)
{
    float value;
    if (scalar_constant(t, r, &value)) {
        b->program->instr[b->ninstr] = (wf_fused_instr){WF_FUSED_CONST, 0, 0, value};
        return b->ninstr++;
    }
    if (r.kind == WF_TAPE_NODE) {
        for (int m = 0; m < count; m++) {
            if (sorted[m] != r.index)
                continue;
            const wf_tape_node *n = &t->nodes[r.index];
            if (n->prim == &wf__prim_broadcast_to) /* absorbed: read its leaf */
                return leaf_instruction(b, n->inputs[0]);
            return b->value_of_member[m];
        }
    }
    return leaf_instruction(b, r);
}

/* Builds the group's program and its leaves; false if not worth fusing. */
static wf_status build_program(const wf_tape *t, const int *sorted, int count, int root,
                               struct program_builder *b)
{
    b->program = wf__fused_program_new(3 * count + 2);
    if (!b->program)
        return wf_last_error();
    b->ninstr = b->nleaves = 0;
    for (int m = 0; m < count; m++) {
        const wf_tape_node *n = &t->nodes[sorted[m]];
        if (n->prim == &wf__prim_broadcast_to)
            continue;
        int opcode = opcode_of(n->prim);
        int a = operand_instruction(b, t, sorted, count, n->inputs[0]);
        int c = wf__fused_opcode_is_unary(opcode) ? 0
                                                   : operand_instruction(b, t, sorted, count, n->inputs[1]);
        b->program->instr[b->ninstr] = (wf_fused_instr){opcode, a, c, 0.0f};
        b->value_of_member[m] = b->ninstr++;
        if (sorted[m] == root)
            b->program->output = b->value_of_member[m];
    }
    b->program->ninstr = b->ninstr;
    b->program->ninputs = b->nleaves;
    return wf__fused_program_seal(b->program);
}

/* The fused node's output shape is the broadcast of its leaves: it must be
 * the root's (otherwise every leaf was broadcast and the kernel could not
 * tell the shape). */
static bool leaves_give_root_shape(const wf_tape *t, const struct program_builder *b,
                                   const wf_tape_node *root, const int64_t *const *input_shapes,
                                   const int *input_ndims)
{
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    for (int i = 0; i < b->nleaves; i++) {
        wf_tape_ref r = b->leaves[i];
        const int64_t *s;
        int n;
        if (r.kind == WF_TAPE_INPUT) {
            s = input_shapes[r.index];
            n = input_ndims[r.index];
        } else if (r.kind == WF_TAPE_CONST) {
            s = t->consts[r.index]->shape;
            n = t->consts[r.index]->ndim;
        } else {
            s = t->nodes[r.index].shape;
            n = t->nodes[r.index].ndim;
        }
        int64_t joined[WF_MAX_NDIM];
        int nj = n > ndim ? n : ndim;
        for (int d = 0; d < nj; d++) {
            int64_t x = d < nj - ndim ? 1 : shape[d - (nj - ndim)];
            int64_t y = d < nj - n ? 1 : s[d - (nj - n)];
            joined[d] = x == 1 ? y : x;
        }
        memcpy(shape, joined, sizeof(int64_t) * (size_t)nj);
        ndim = nj;
    }
    return wf__shape_equal(shape, ndim, root->shape, root->ndim);
}

wf_status wf__tape_fuse(wf_tape *t, const int64_t *const *input_shapes, const int *input_ndims,
                        int *fused_nodes)
{
    *fused_nodes = 0;
    int n = t->nnodes;
    struct fuser f = {.t = t};
    f.uses = calloc((size_t)n + 1, sizeof(int));
    f.group = malloc(((size_t)n + 1) * sizeof(int));
    f.group_uses = calloc((size_t)n + 1, sizeof(int));
    f.group_of_count = malloc(((size_t)n + 1) * sizeof(int));
    f.members = malloc(((size_t)n + 1) * sizeof(int));
    wf_tape_node *rewritten = calloc((size_t)n + 1, sizeof *rewritten);
    wf_tape_ref *remap = malloc(((size_t)n + 1) * sizeof *remap);
    wf_status status = WF_OK;
    if (!f.uses || !f.group || !f.group_uses || !f.group_of_count || !f.members || !rewritten ||
        !remap) {
        status = out_of_memory();
        goto done;
    }
    for (int i = 0; i < n; i++) {
        f.group[i] = -1;
        f.group_of_count[i] = -1;
        for (int k = 0; k < t->nodes[i].ninputs; k++)
            if (t->nodes[i].inputs[k].kind == WF_TAPE_NODE)
                f.uses[t->nodes[i].inputs[k].index]++;
    }
    for (int i = 0; i < t->noutputs; i++)
        if (t->outputs[i].kind == WF_TAPE_NODE)
            f.uses[t->outputs[i].index] += n + 1; /* an output never joins a group below it */

    /* Pass 1: groups, from the last node backwards. A group that is not worth
     * fusing (one compute node) gives its members back. */
    int groups = 0;
    int *fused_root = calloc((size_t)n + 1, sizeof(int)); /* 1: root of a fused group */
    wf_fused_program **programs = calloc((size_t)n + 1, sizeof *programs);
    wf_tape_ref(*leaves)[MAX_GROUP_INSTR] = calloc((size_t)n + 1, sizeof *leaves);
    int *nleaves = calloc((size_t)n + 1, sizeof(int));
    if (!fused_root || !programs || !leaves || !nleaves) {
        free(fused_root);
        free(programs);
        free(leaves);
        free(nleaves);
        status = out_of_memory();
        goto done;
    }
    for (int root = n - 1; root >= 0 && status == WF_OK; root--) {
        if (f.group[root] >= 0 || !is_f32_compute(&t->nodes[root]))
            continue;
        int g = groups++;
        int count = grow_group(&f, g, root);
        int compute = 0;
        for (int m = 0; m < count; m++)
            compute += t->nodes[f.members[m]].prim != &wf__prim_broadcast_to;
        qsort(f.members, (size_t)count, sizeof(int), compare_int);
        struct program_builder b;
        bool fuse = compute >= 2;
        if (fuse) {
            status = build_program(t, f.members, count, root, &b);
            fuse = status == WF_OK &&
                   leaves_give_root_shape(t, &b, &t->nodes[root], input_shapes, input_ndims);
            if (!fuse)
                wf__fused_program_release(b.program);
        }
        if (!fuse) {
            for (int m = 0; m < count; m++)
                if (f.members[m] != root)
                    f.group[f.members[m]] = -2; /* left as is; may root a group later */
            f.group[root] = -2;
            continue;
        }
        fused_root[root] = 1;
        programs[root] = b.program;
        nleaves[root] = b.nleaves;
        memcpy(leaves[root], b.leaves, (size_t)b.nleaves * sizeof b.leaves[0]);
        (*fused_nodes)++;
    }

    /* Pass 2: rewrite. Members other than a fused root disappear; a fused
     * root becomes a fused node over its leaves. */
    int kept = 0;
    for (int i = 0; i < n && status == WF_OK; i++) {
        wf_tape_node *node = &t->nodes[i];
        if (f.group[i] >= 0 && !fused_root[i]) {
            remap[i] = (wf_tape_ref){WF_TAPE_NODE, -1}; /* read only inside its group */
            continue;
        }
        wf_tape_node out = *node;
        if (fused_root[i]) {
            wf_fused_params *params = malloc(sizeof *params);
            wf_tape_ref *inputs = malloc((size_t)(nleaves[i] ? nleaves[i] : 1) * sizeof *inputs);
            if (!params || !inputs) {
                free(params);
                free(inputs);
                status = out_of_memory();
                break;
            }
            params->program = programs[i];
            programs[i] = NULL;
            memcpy(inputs, leaves[i], (size_t)nleaves[i] * sizeof *inputs);
            out.prim = &wf__prim_fused;
            out.params = params;
            out.inputs = inputs;
            out.ninputs = nleaves[i];
        }
        for (int k = 0; k < out.ninputs; k++)
            if (out.inputs[k].kind == WF_TAPE_NODE)
                out.inputs[k] = remap[out.inputs[k].index];
        rewritten[kept] = out;
        remap[i] = (wf_tape_ref){WF_TAPE_NODE, kept++};
    }
    if (status == WF_OK) {
        for (int i = 0; i < n; i++) { /* free what the rewrite replaced or dropped */
            if (f.group[i] >= 0) {
                wf__tape_params_free(t->nodes[i].prim, t->nodes[i].params);
                free(t->nodes[i].inputs);
            }
        }
        free(t->nodes);
        t->nodes = rewritten;
        rewritten = NULL;
        t->nnodes = kept;
        for (int i = 0; i < t->noutputs; i++)
            if (t->outputs[i].kind == WF_TAPE_NODE)
                t->outputs[i] = remap[t->outputs[i].index];
    } else {
        for (int i = 0; i < kept; i++)
            if (rewritten[i].prim == &wf__prim_fused) {
                wf__tape_params_free(rewritten[i].prim, rewritten[i].params);
                free(rewritten[i].inputs);
            }
    }
    for (int i = 0; i < n; i++)
        wf__fused_program_release(programs[i]);
    free(fused_root);
    free(programs);
    free(leaves);
    free(nleaves);
done:
    free(f.uses);
    free(f.group);
    free(f.group_uses);
    free(f.group_of_count);
    free(f.members);
    free(rewritten);
    free(remap);
    return status;
}
