/*
 * Fusing a tape (DESIGN section 5, step 4): a group of float32 element-wise
 * nodes whose intermediate values are read only inside the group becomes one
 * fused node, run by the blocked executor. Broadcasts of the group's leaves
 * are absorbed (the fused kernel broadcasts its inputs), and float32 scalar
 * constants become immediates of the program.
 *
 * Groups grow from a root (walking the tape backwards) towards its
 * operands. An operand joins when every use of it by a node at or before
 * the root is inside the group; a member also read after the root (or
 * returned by the function) becomes an extra output of the fused node, up to
 * WF_FUSED_MAX_OUTPUTS outputs in all. The fused node takes the root's place
 * in the tape, so every reader of an output comes after it and every leaf
 * before it: the rewritten tape stays in dependency order, and no path can
 * leave a group and come back (a group is convex). A node with several
 * outputs is a multi-output primary followed by one sibling per output.
 */
#include <stdlib.h>
#include <string.h>

#include "compile/tape.h"
#include "core/error.h"
#include "prim/binary.h"
#include "prim/fused.h"
#include "prim/prims.h"
#include "prim/sibling.h"
#include "prim/unary.h"
#include "util/fault.h"

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
    int *user_start;  /* per node: its users are users[user_start[i] .. user_start[i + 1]) */
    int *users;       /* reading nodes, ascending (one entry per use) */
    int *early_uses;  /* per node: uses by nodes up to the current root */
    int exposed[WF_FUSED_MAX_OUTPUTS - 1]; /* the current group's members read outside it */
    int nexposed, max_exposed;
    int *group;       /* per node: group id, -1 none */
    int *group_uses;  /* per node: uses from members of group_of_count */
    int *group_of_count;
    int *members;     /* scratch: the current group's members */
};

static int uses_up_to(const struct fuser *f, int p, int root)
{
    int count = 0;
    for (int u = f->user_start[p]; u < f->user_start[p + 1] && f->users[u] <= root; u++)
        count++;
    return count;
}

/* Whether operand `p` of the group rooted at `root` joins it now that
 * f->group_uses[p] of its uses are members' (it is joinable). A member read
 * after the root becomes an output while there is room for one. */
static bool joins(struct fuser *f, int p, bool compute)
{
    if (!compute) /* a broadcast leaf: absorbed only when the group alone reads it */
        return f->group_uses[p] == f->uses[p];
    if (f->group_uses[p] != f->early_uses[p])
        return false;
    if (f->group_uses[p] == f->uses[p])
        return true;
    if (f->nexposed == f->max_exposed)
        return false;
    f->exposed[f->nexposed++] = p;
    return true;
}

/* Grows group `g` from `root` with at most `max_exposed` members read
 * outside it (in f->exposed); returns the member count (members in
 * f->members, in no particular order). */
static int grow_group(struct fuser *f, int g, int root, int max_exposed)
{
    const wf_tape_node *root_node = &f->t->nodes[root];
    int count = 0;
    f->nexposed = 0;
    f->max_exposed = max_exposed;
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
                f->early_uses[p] = uses_up_to(f, p, root);
            }
            f->group_uses[p]++;
            const wf_tape_node *pn = &f->t->nodes[p];
            bool compute = is_f32_compute(pn) &&
                           wf__shape_equal(pn->shape, pn->ndim, root_node->shape, root_node->ndim);
            bool joinable = compute || is_leaf_broadcast(pn, root_node);
            if (joinable && count < MAX_GROUP_INSTR && joins(f, p, compute)) {
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

/* Output k of the group: the root first, then its exposed members in the
 * order they joined; -1 for other members. */
static int output_index(const struct fuser *f, int node, int root)
{
    if (node == root)
        return 0;
    for (int k = 0; k < f->nexposed; k++)
        if (f->exposed[k] == node)
            return k + 1;
    return -1;
}

/* Builds the group's program and its leaves. */
static wf_status build_program(const struct fuser *f, const int *sorted, int count, int root,
                               struct program_builder *b)
{
    const wf_tape *t = f->t;
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
        int k = output_index(f, sorted[m], root);
        if (k >= 0)
            b->program->outputs[k] = b->value_of_member[m];
    }
    b->program->noutputs = 1 + f->nexposed;
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

/* In a shapeless tape an output's shape at a call is the broadcast of the
 * leaves it reads (the fused node broadcasts all of them): every output
 * must read every leaf to have the node's shape at every call. Leaves are
 * at most MAX_GROUP_INSTR (64), one bit each. */
static bool outputs_read_every_leaf(const wf_fused_program *p)
{
    uint64_t reads[3 * MAX_GROUP_INSTR + 2];
    uint64_t all = p->ninputs >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << p->ninputs) - 1;
    for (int i = 0; i < p->ninstr; i++) {
        const wf_fused_instr *in = &p->instr[i];
        if (in->opcode == WF_FUSED_INPUT)
            reads[i] = (uint64_t)1 << in->a;
        else if (in->opcode == WF_FUSED_CONST)
            reads[i] = 0;
        else
            reads[i] = reads[in->a] | (wf__fused_opcode_is_unary(in->opcode) ? 0 : reads[in->b]);
    }
    for (int k = 0; k < p->noutputs; k++)
        if (reads[p->outputs[k]] != all)
            return false;
    return true;
}

/* Per node: its operand uses (function outputs count n + 1 each, so an
 * output is never absorbed silently) and the nodes reading it, ascending. */
static wf_status count_uses(struct fuser *f)
{
    const wf_tape *t = f->t;
    int n = t->nnodes, total = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < t->nodes[i].ninputs; k++)
            if (t->nodes[i].inputs[k].kind == WF_TAPE_NODE) {
                f->uses[t->nodes[i].inputs[k].index]++;
                total++;
            }
    f->users = wf__malloc(((size_t)total + 1) * sizeof(int));
    if (!f->users)
        return out_of_memory();
    for (int i = 0; i < n; i++)
        f->user_start[i + 1] = f->user_start[i] + f->uses[i];
    int *fill = f->early_uses; /* scratch until grouping starts */
    memcpy(fill, f->user_start, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < t->nodes[i].ninputs; k++)
            if (t->nodes[i].inputs[k].kind == WF_TAPE_NODE)
                f->users[fill[t->nodes[i].inputs[k].index]++] = i;
    for (int i = 0; i < t->noutputs; i++)
        if (t->outputs[i].kind == WF_TAPE_NODE)
            f->uses[t->outputs[i].index] += n + 1;
    return WF_OK;
}

/* What pass 1 decided for a fused group, kept at its root. */
struct fused_group {
    wf_fused_program *program;
    int nleaves;
    wf_tape_ref leaves[MAX_GROUP_INSTR];
    int outputs[WF_FUSED_MAX_OUTPUTS]; /* members: the root, then the exposed ones */
};

/* Pass 1: groups, from the last node backwards. A group that is not worth
 * fusing (one compute node) gives its members back. */
static wf_status find_groups(struct fuser *f, struct fused_group **groups,
                             const int64_t *const *input_shapes, const int *input_ndims,
                             bool shapeless, int *fused_nodes)
{
    wf_tape *t = f->t;
    int ngroups = 0;
    for (int root = t->nnodes - 1; root >= 0; root--) {
        if (f->group[root] >= 0 || !is_f32_compute(&t->nodes[root]))
            continue;
        int max_exposed = WF_FUSED_MAX_OUTPUTS - 1;
        int count, compute;
        struct program_builder b;
        bool fuse;
        for (;;) {
            count = grow_group(f, ngroups++, root, max_exposed);
            compute = 0;
            for (int m = 0; m < count; m++)
                compute += t->nodes[f->members[m]].prim != &wf__prim_broadcast_to;
            qsort(f->members, (size_t)count, sizeof(int), compare_int);
            fuse = compute >= 2;
            if (!fuse)
                break;
            wf_status status = build_program(f, f->members, count, root, &b);
            if (status != WF_OK) {
                wf__fused_program_release(b.program);
                return status;
            }
            fuse = leaves_give_root_shape(t, &b, &t->nodes[root], input_shapes, input_ndims);
            if (fuse && shapeless && !outputs_read_every_leaf(b.program)) {
                wf__fused_program_release(b.program);
                for (int m = 0; m < count; m++)
                    f->group[f->members[m]] = -1;
                max_exposed = 0; /* grown again, as a chain with one output */
                continue;
            }
            if (!fuse)
                wf__fused_program_release(b.program);
            break;
        }
        if (!fuse) {
            for (int m = 0; m < count; m++)
                f->group[f->members[m]] = -2; /* left as is; may root a group later */
            continue;
        }
        struct fused_group *fg = wf__malloc(sizeof *fg);
        if (!fg) {
            wf__fused_program_release(b.program);
            return out_of_memory();
        }
        fg->program = b.program;
        fg->nleaves = b.nleaves;
        memcpy(fg->leaves, b.leaves, (size_t)b.nleaves * sizeof b.leaves[0]);
        fg->outputs[0] = root;
        memcpy(fg->outputs + 1, f->exposed, (size_t)f->nexposed * sizeof(int));
        groups[root] = fg;
        (*fused_nodes)++;
    }
    return WF_OK;
}

/* Frees what a rewritten node owns that the original tape did not. */
static void free_made_node(wf_tape_node *node)
{
    wf__tape_params_free(node->prim, node->params);
    free(node->inputs);
}

/* Appends the fused node of group `fg` (rooted at `root`) to `out`: one
 * node, or a multi-output primary and its siblings. Sets remap for the
 * group's outputs; returns the nodes appended, or -1 (error recorded). */
static int emit_group(const wf_tape_node *root, struct fused_group *fg, wf_tape_node *out,
                      int at, wf_tape_ref *remap)
{
    int noutputs = fg->program->noutputs;
    wf_fused_params *params = wf__malloc(sizeof *params);
    wf_tape_ref *inputs = wf__malloc((size_t)(fg->nleaves ? fg->nleaves : 1) * sizeof *inputs);
    if (!params || !inputs) {
        free(params);
        free(inputs);
        out_of_memory();
        return -1;
    }
    params->program = fg->program;
    fg->program = NULL;
    memcpy(inputs, fg->leaves, (size_t)fg->nleaves * sizeof *inputs);
    out[0] = *root;
    out[0].prim = wf__prim_fused_for(noutputs);
    out[0].params = params;
    out[0].inputs = inputs;
    out[0].ninputs = fg->nleaves;
    if (noutputs == 1) {
        remap[fg->outputs[0]] = (wf_tape_ref){WF_TAPE_NODE, at};
        return 1;
    }
    for (int k = 0; k < noutputs; k++) {
        wf_sibling_params *sp = wf__calloc(1, sizeof *sp);
        wf_tape_ref *primary = wf__malloc(sizeof *primary);
        if (!sp || !primary) {
            free(sp);
            free(primary);
            for (int j = 0; j <= k; j++)
                free_made_node(&out[j]);
            out_of_memory();
            return -1;
        }
        *sp = (wf_sibling_params){.index = k, .dtype = root->dtype, .ndim = root->ndim};
        wf__shape_copy(sp->shape, root->shape, root->ndim);
        *primary = (wf_tape_ref){WF_TAPE_NODE, at};
        out[1 + k] = *root;
        out[1 + k].prim = &wf__prim_sibling;
        out[1 + k].params = sp;
        out[1 + k].inputs = primary;
        out[1 + k].ninputs = 1;
        remap[fg->outputs[k]] = (wf_tape_ref){WF_TAPE_NODE, at + 1 + k};
    }
    return 1 + noutputs;
}

/* Pass 2: members other than a fused root disappear (their readers after
 * the root read its outputs); a fused root becomes the fused node over the
 * group's leaves. `made` marks the rewritten nodes this pass allocated. */
static wf_status rewrite(struct fuser *f, struct fused_group **groups, wf_tape_node *rewritten,
                         bool *made, wf_tape_ref *remap, int *kept)
{
    wf_tape *t = f->t;
    for (int i = 0; i < t->nnodes; i++) {
        if (f->group[i] >= 0 && !groups[i]) {
            remap[i] = (wf_tape_ref){WF_TAPE_NODE, -1}; /* set by its group's root */
            continue;
        }
        int emitted = 1;
        if (groups[i]) {
            emitted = emit_group(&t->nodes[i], groups[i], &rewritten[*kept], *kept, remap);
            if (emitted < 0)
                return wf_last_error();
            for (int k = 0; k < emitted; k++)
                made[*kept + k] = true;
        } else {
            rewritten[*kept] = t->nodes[i];
            remap[i] = (wf_tape_ref){WF_TAPE_NODE, *kept};
        }
        wf_tape_node *node = &rewritten[*kept]; /* the fused node's leaves too */
        for (int k = 0; k < node->ninputs; k++)
            if (node->inputs[k].kind == WF_TAPE_NODE)
                node->inputs[k] = remap[node->inputs[k].index];
        *kept += emitted;
    }
    return WF_OK;
}

wf_status wf__tape_fuse(wf_tape *t, const int64_t *const *input_shapes, const int *input_ndims,
                        bool shapeless, int *fused_nodes)
{
    *fused_nodes = 0;
    int n = t->nnodes;
    struct fuser f = {.t = t};
    f.uses = wf__calloc((size_t)n + 1, sizeof(int));
    f.user_start = wf__calloc((size_t)n + 2, sizeof(int));
    f.early_uses = wf__calloc((size_t)n + 1, sizeof(int));
    f.group = wf__malloc(((size_t)n + 1) * sizeof(int));
    f.group_uses = wf__calloc((size_t)n + 1, sizeof(int));
    f.group_of_count = wf__malloc(((size_t)n + 1) * sizeof(int));
    f.members = wf__malloc(((size_t)n + 1) * sizeof(int));
    struct fused_group **groups = wf__calloc((size_t)n + 1, sizeof *groups);
    /* Each multi-output group replaces k >= 2 members by k + 1 nodes. */
    wf_tape_node *rewritten = wf__calloc(2 * (size_t)n + 1, sizeof *rewritten);
    bool *made = wf__calloc(2 * (size_t)n + 1, sizeof *made);
    wf_tape_ref *remap = wf__malloc(((size_t)n + 1) * sizeof *remap);
    wf_status status = WF_OK;
    int kept = 0;
    if (!f.uses || !f.user_start || !f.early_uses || !f.group || !f.group_uses ||
        !f.group_of_count || !f.members || !groups || !rewritten || !made || !remap) {
        status = out_of_memory();
        goto done;
    }
    for (int i = 0; i < n; i++)
        f.group[i] = f.group_of_count[i] = -1;
    status = count_uses(&f);
    if (status == WF_OK)
        status = find_groups(&f, groups, input_shapes, input_ndims, shapeless, fused_nodes);
    if (status == WF_OK)
        status = rewrite(&f, groups, rewritten, made, remap, &kept);
    if (status == WF_OK) {
        for (int i = 0; i < n; i++) /* free what the rewrite replaced or dropped */
            if (f.group[i] >= 0)
                free_made_node(&t->nodes[i]);
        free(t->nodes);
        t->nodes = rewritten;
        rewritten = NULL;
        t->nnodes = kept;
        for (int i = 0; i < t->noutputs; i++)
            if (t->outputs[i].kind == WF_TAPE_NODE)
                t->outputs[i] = remap[t->outputs[i].index];
    } else {
        *fused_nodes = 0;
        for (int i = 0; i < kept; i++)
            if (made[i])
                free_made_node(&rewritten[i]);
    }
done:
    for (int i = 0; groups && i < n; i++)
        if (groups[i]) {
            wf__fused_program_release(groups[i]->program);
            free(groups[i]);
        }
    free(groups);
    free(f.uses);
    free(f.user_start);
    free(f.users);
    free(f.early_uses);
    free(f.group);
    free(f.group_uses);
    free(f.group_of_count);
    free(f.members);
    free(rewritten);
    free(made);
    free(remap);
    return status;
}
