/*
 * Tapes: recording a traced graph, copying, and replaying it.
 *
 * Recording reads the inputs only of nodes built from a placeholder (core
 * flags them when they are built): such nodes were made by the tracing
 * thread during the trace and cannot be evaluated, so nobody else detaches
 * their inputs. Every other node reached is a constant and is captured as it
 * is, without looking behind it.
 */
#include "compile/tape.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/shape.h"
#include "ops/ops.h"
#include "prim/fused.h"
#include "prim/prims.h"
#include "prim/random.h"
#include "prim/sibling.h"
#include "util/ptr_map.h"
#include "util/fault.h"

/* ------------------------------------------------------------ params */

bool wf__tape_params_copyable(const wf_prim_def *prim)
{
    return !prim->params_release || prim->params_retain;
}

void *wf__tape_params_copy(const wf_prim_def *prim, const void *params)
{
    if (!prim->params_size)
        return NULL;
    void *copy = wf__malloc(prim->params_size);
    if (!copy)
        return NULL;
    memcpy(copy, params, prim->params_size);
    if (prim->params_retain)
        prim->params_retain(copy);
    return copy;
}

void wf__tape_params_free(const wf_prim_def *prim, void *params)
{
    if (params && prim->params_release)
        prim->params_release(params);
    free(params);
}

/* ------------------------------------------------------------ clear, copy */

void wf__tape_clear(wf_tape *t)
{
    for (int i = 0; i < t->nnodes; i++) {
        wf__tape_params_free(t->nodes[i].prim, t->nodes[i].params);
        free(t->nodes[i].inputs);
    }
    free(t->nodes);
    for (int i = 0; i < t->nconsts; i++)
        wf__array_decref(t->consts[i]);
    free(t->consts);
    free(t->outputs);
    *t = (wf_tape){0};
}

static wf_status out_of_memory(void)
{
    return wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory building a tape");
}

static wf_status node_copy(wf_tape_node *dst, const wf_tape_node *src)
{
    *dst = *src;
    dst->params = NULL;
    dst->inputs = wf__malloc((size_t)(src->ninputs ? src->ninputs : 1) * sizeof *dst->inputs);
    if (src->prim->params_size)
        dst->params = wf__tape_params_copy(src->prim, src->params);
    if (!dst->inputs || (src->prim->params_size && !dst->params)) {
        free(dst->inputs);
        wf__tape_params_free(src->prim, dst->params);
        dst->inputs = NULL;
        dst->params = NULL;
        return out_of_memory();
    }
    memcpy(dst->inputs, src->inputs, (size_t)src->ninputs * sizeof *dst->inputs);
    return WF_OK;
}

wf_status wf__tape_copy(wf_tape *dst, const wf_tape *src)
{
    *dst = (wf_tape){.ninputs = src->ninputs};
    dst->consts = wf__malloc((size_t)(src->nconsts + 1) * sizeof *dst->consts);
    dst->nodes = wf__calloc((size_t)src->nnodes + 1, sizeof *dst->nodes);
    dst->outputs = wf__malloc((size_t)(src->noutputs + 1) * sizeof *dst->outputs);
    if (!dst->consts || !dst->nodes || !dst->outputs) {
        wf__tape_clear(dst);
        return out_of_memory();
    }
    for (int i = 0; i < src->nconsts; i++)
        dst->consts[dst->nconsts++] = wf__array_incref(src->consts[i]);
    for (int i = 0; i < src->nnodes; i++) {
        if (node_copy(&dst->nodes[i], &src->nodes[i]) != WF_OK) {
            wf__tape_clear(dst);
            return wf_last_error();
        }
        dst->nnodes++;
    }
    memcpy(dst->outputs, src->outputs, (size_t)src->noutputs * sizeof *dst->outputs);
    dst->noutputs = src->noutputs;
    return WF_OK;
}

/* ------------------------------------------------------------ recording */

/* Primitives whose parameters hold no shape: a shapeless replay re-infers
 * their output from the inputs. Element-wise primitives qualify by flag;
 * a draw keyed by an input qualifies when its kind's primitive does. */
/* Whether a reshape derives its shape from its input's (expand_dims,
 * squeeze, flatten, unflatten: prims.h). */
static bool reshape_is_derived(const wf_reshape_params *p) { return p->follows_input; }

/* Whether a shapeless trace may record node `n`: its parameters say nothing
 * of the shape (an axis, flags, pad amounts), its reshape follows the
 * input's shape, or it names a shape the caller asked for through the
 * public API (a literal reshape, broadcast_to, slice, slice_update, gather:
 * WF_NODE_FLAG_USER_SHAPE), which replay keeps as recorded, as MLX's
 * shapeless compile does, failing with a shape error where it no longer
 * fits. The same ops built inside weft (gradient rules) are refused. */
static bool replays_shapeless(const wf_array *n)
{
    static const char *const names[] = {
        "sum",     "prod",    "max",       "min",       "all",        "any",     "mean",
        "var",     "std",     "logsumexp", "argmax",    "argmin",     "softmax", "cumsum",
        "cumprod", "matmul",  "addmm",     "transpose", "layer_norm", "rms_norm", "rope",
        "scaled_dot_product_attention", "silu", "gelu", "gelu_tanh", "stop_gradient",
        "custom_function", "random_bernoulli", "random_categorical",
        /* sort family and scans whose params are an axis and flags */
        "sort", "argsort", "cummax", "cummin", "logcumsumexp", "scatter",
        /* axes, kind, norm (a real inverse's output length is checked on replay) */
        "fft",
        /* an axis, pad amounts, a diagonal offset, a dtype */
        "take", "take_along_axis", "scatter_add", "concatenate", "pad", "tri", "view",
        /* strides, padding, dilations, groups; group sizes and bits; a group */
        "conv_general", "quantize", "dequantize", "quantized_matmul", "gather_qmm", "gather_mm",
        "all_sum", "all_max", "all_min", "all_gather", "sum_scatter", "send",
        /* the shape of its input (wf_*_like of a traced array), or of
         * another input (the shape-following primitives of gradients) */
        "full_like", "broadcast_like", "unbroadcast_like", "reshape_like", "size_ratio",
        "crop_like", "pad_like"};
    static const char *const user_shaped[] = {"reshape", "broadcast_to", "slice",
                                              "slice_update", "gather"};
    const wf_prim_def *prim = n->prim;
    if (prim == &wf__prim_random_keyed)
        prim = wf__random_prim_of_kind(((const wf_random_params *)n->params)->kind);
    if (!prim)
        return false;
    if (prim->flags & WF_PRIM_ELEMENTWISE)
        return true;
    if (prim == &wf__prim_reshape && reshape_is_derived(n->params))
        return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(prim->name, names[i]) == 0)
            return true;
    if (n->node_flags & WF_NODE_FLAG_USER_SHAPE)
        for (size_t i = 0; i < sizeof user_shaped / sizeof user_shaped[0]; i++)
            if (strcmp(prim->name, user_shaped[i]) == 0)
                return true;
    return false;
}

struct recorder {
    wf_tape *tape;
    wf_ptr_map refs; /* node -> encoded ref: kind * 2^28 + index */
    int nodes_capacity, consts_capacity;
    bool shapeless;
};

enum { REF_SHIFT = 28 };

static int encode(wf_tape_ref r) { return (r.kind << REF_SHIFT) | r.index; }
static wf_tape_ref decode(int v) { return (wf_tape_ref){v >> REF_SHIFT, v & ((1 << REF_SHIFT) - 1)}; }

static bool depends_on_placeholder(const wf_array *n)
{
    return (n->node_flags & WF_NODE_FLAG_ON_PLACEHOLDER) != 0;
}

static wf_status add_const(struct recorder *r, wf_array *a, wf_tape_ref *out)
{
    wf_tape *t = r->tape;
    if (t->nconsts == r->consts_capacity) {
        int grown = r->consts_capacity ? r->consts_capacity * 2 : 16;
        wf_array **consts = wf__realloc(t->consts, (size_t)grown * sizeof *consts);
        if (!consts)
            return out_of_memory();
        t->consts = consts;
        r->consts_capacity = grown;
    }
    t->consts[t->nconsts] = wf__array_incref(a);
    *out = (wf_tape_ref){WF_TAPE_CONST, t->nconsts++};
    return wf__ptr_map_put(&r->refs, a, encode(*out)) ? WF_OK : out_of_memory();
}

static wf_status check_replayable(const struct recorder *r, const wf_array *n)
{
    int state = wf__array_state(n);
    if (state != WF_NODE_PENDING || !n->prim)
        return wf__error(WF_ERR_MISUSE,
                         "compile: the traced function evaluated a value that depends on its "
                         "inputs (%s); a compiled function cannot read traced values",
                         n->prim ? n->prim->name : "array");
    if (!wf__tape_params_copyable(n->prim))
        return wf__error(WF_ERR_UNSUPPORTED,
                         "compile: primitive '%s' cannot be compiled (its parameters own data "
                         "that a cached trace cannot share)",
                         n->prim->name);
    if (r->shapeless && (n->node_flags & WF_NODE_FLAG_TRACED_SHAPE))
        return wf__error(WF_ERR_UNSUPPORTED,
                         "compile: a transform rule built '%s' from the traced shapes (the "
                         "gradient of prod, cumprod, sort, a slice weft built, general gather "
                         "or scatter, convolution or linear algebra, or vmap batching an "
                         "unbatched operand to the traced batch size); it cannot be replayed "
                         "shapeless (compile without shapeless)",
                         n->prim->name);
    if (r->shapeless && !replays_shapeless(n) &&
        n->prim == &wf__prim_random_keyed)
        return wf__error(WF_ERR_UNSUPPORTED,
                         "compile: a draw of a fixed shape from the default key "
                         "(wf_random_uniform, _normal, _randint) cannot be replayed shapeless; "
                         "draw with wf_random_bernoulli / _categorical on arrays derived from "
                         "the inputs, pass a key, or compile without shapeless");
    if (r->shapeless && !replays_shapeless(n))
        return wf__error(WF_ERR_UNSUPPORTED,
                         "compile: primitive '%s' fixes a shape in its parameters and cannot "
                         "be replayed shapeless (compile without shapeless)",
                         n->prim->name);
    return WF_OK;
}

/* What a broadcast an op inserted (NumPy broadcasting) was made from. */
static wf_array *broadcast_source(wf_array *a)
{
    while (a->prim == &wf__prim_broadcast_to && (a->node_flags & WF_NODE_FLAG_IMPLICIT_BROADCAST) &&
           a->ninputs == 1)
        a = a->inputs[0];
    return a;
}

/* In a shapeless recording an element-wise node reads the sources of its
 * implicit broadcasts instead of the broadcasts, which name the traced
 * shape; replay broadcasts them to the call's shapes (wf__tape_replay, or
 * the fused kernel). Only when the sources still broadcast to the node's
 * own shape, so the node means the same at the traced shape. Those
 * broadcasts were made for this node alone and are pending (it depends on
 * a placeholder), so no other thread reads or detaches them. */
static bool reads_broadcast_sources(const struct recorder *r, wf_array *n)
{
    if (!r->shapeless || !(n->prim->flags & WF_PRIM_ELEMENTWISE) || wf__prim_is_fused(n->prim) ||
        n->ninputs < 2)
        return false;
    bool any = false;
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    for (int i = 0; i < n->ninputs; i++) {
        wf_array *src = broadcast_source(n->inputs[i]);
        any |= src != n->inputs[i];
        int64_t joined[WF_MAX_NDIM];
        int njoined;
        if (wf__broadcast_shapes(n->prim->name, shape, ndim, src->shape, src->ndim, joined,
                                 &njoined) != WF_OK)
            return false; /* cannot happen: each source broadcasts to n's shape */
        wf__shape_copy(shape, joined, njoined);
        ndim = njoined;
    }
    return any && wf__shape_equal(shape, ndim, n->shape, n->ndim);
}

static wf_array *recorded_input(wf_array *n, int i, bool sources)
{
    return sources ? broadcast_source(n->inputs[i]) : n->inputs[i];
}

static wf_status add_node(struct recorder *r, wf_array *n, bool sources, wf_tape_ref *out)
{
    wf_status status = check_replayable(r, n);
    if (status != WF_OK)
        return status;
    wf_tape *t = r->tape;
    if (t->nnodes == r->nodes_capacity) {
        int grown = r->nodes_capacity ? r->nodes_capacity * 2 : 32;
        wf_tape_node *nodes = wf__realloc(t->nodes, (size_t)grown * sizeof *nodes);
        if (!nodes)
            return out_of_memory();
        t->nodes = nodes;
        r->nodes_capacity = grown;
    }
    wf_tape_node *tn = &t->nodes[t->nnodes];
    *tn = (wf_tape_node){.prim = n->prim, .ninputs = n->ninputs, .dtype = n->dtype,
                         .ndim = n->ndim};
    if (n->ndim)
        memcpy(tn->shape, n->shape, (size_t)n->ndim * sizeof *tn->shape);
    tn->inputs = wf__malloc((size_t)(n->ninputs ? n->ninputs : 1) * sizeof *tn->inputs);
    tn->params = n->prim->params_size ? wf__tape_params_copy(n->prim, n->params) : NULL;
    if (!tn->inputs || (n->prim->params_size && !tn->params)) {
        free(tn->inputs);
        wf__tape_params_free(n->prim, tn->params);
        return out_of_memory();
    }
    for (int i = 0; i < n->ninputs; i++) {
        int v = 0;
        wf__ptr_map_get(&r->refs, recorded_input(n, i, sources), &v); /* visited before n */
        tn->inputs[i] = decode(v);
    }
    *out = (wf_tape_ref){WF_TAPE_NODE, t->nnodes++};
    return wf__ptr_map_put(&r->refs, n, encode(*out)) ? WF_OK : out_of_memory();
}

/* Post-order walk from `root` over nodes built from placeholders. */
static wf_status visit(struct recorder *r, wf_array *root)
{
    struct frame {
        wf_array *node;
        int next;
        bool sources; /* reads_broadcast_sources, found when first expanded */
    };
    int capacity = 64, depth = 0;
    struct frame *stack = wf__malloc((size_t)capacity * sizeof *stack);
    if (!stack)
        return out_of_memory();
    stack[depth++] = (struct frame){root, 0, false};
    wf_status status = WF_OK;
    while (depth && status == WF_OK) {
        struct frame *f = &stack[depth - 1];
        int seen;
        if (f->next == 0 && wf__ptr_map_get(&r->refs, f->node, &seen)) {
            depth--;
            continue;
        }
        if (!depends_on_placeholder(f->node)) {
            wf_tape_ref ref;
            if (r->shapeless && (f->node->node_flags & WF_NODE_FLAG_TRACED_SHAPE))
                status = wf__error(WF_ERR_UNSUPPORTED,
                                   "compile: vmap broadcast a constant to the traced batch "
                                   "size ('%s'); it cannot be replayed shapeless (compile "
                                   "without shapeless)",
                                   f->node->prim->name);
            else if (f->node->node_flags & WF_NODE_FLAG_PLACEHOLDER)
                status = wf__error(WF_ERR_INVALID_ARGUMENT,
                                   "compile: the traced function used a placeholder of another "
                                   "trace");
            else
                status = add_const(r, f->node, &ref);
            depth--;
            continue;
        }
        if (f->next == 0)
            f->sources = reads_broadcast_sources(r, f->node);
        if (f->next < f->node->ninputs) {
            wf_array *in = recorded_input(f->node, f->next++, f->sources);
            if (depth == capacity) {
                capacity *= 2;
                struct frame *bigger = wf__realloc(stack, (size_t)capacity * sizeof *stack);
                if (!bigger) {
                    status = out_of_memory();
                    break;
                }
                stack = bigger;
            }
            stack[depth++] = (struct frame){in, 0, false};
            continue;
        }
        wf_tape_ref ref;
        status = add_node(r, f->node, f->sources, &ref);
        depth--;
    }
    free(stack);
    return status;
}

wf_status wf__tape_record(wf_tape *t, wf_array *const *placeholders, int nplaceholders,
                          wf_array *const *outputs, int noutputs, bool shapeless)
{
    *t = (wf_tape){.ninputs = nplaceholders};
    struct recorder r = {.tape = t, .shapeless = shapeless};
    wf__ptr_map_init(&r.refs);
    wf_status status = WF_OK;
    for (int i = 0; i < nplaceholders && status == WF_OK; i++)
        if (!wf__ptr_map_put(&r.refs, placeholders[i],
                             encode((wf_tape_ref){WF_TAPE_INPUT, i})))
            status = out_of_memory();
    t->outputs = wf__malloc((size_t)(noutputs ? noutputs : 1) * sizeof *t->outputs);
    if (!t->outputs && status == WF_OK)
        status = out_of_memory();
    for (int i = 0; i < noutputs && status == WF_OK; i++) {
        status = visit(&r, outputs[i]);
        int v = 0;
        if (status == WF_OK && wf__ptr_map_get(&r.refs, outputs[i], &v)) {
            t->outputs[i] = decode(v);
            t->noutputs = i + 1;
        }
    }
    wf__ptr_map_free(&r.refs);
    if (status != WF_OK)
        wf__tape_clear(t);
    return status;
}

/* ------------------------------------------------------------ replay */

static wf_array *value_of(wf_tape_ref ref, wf_array *const *inputs, wf_array *const *consts,
                          wf_array *const *values)
{
    switch (ref.kind) {
    case WF_TAPE_INPUT: return inputs[ref.index];
    case WF_TAPE_CONST: return consts[ref.index];
    default: return values[ref.index];
    }
}

/* An element-wise node of a shapeless tape may read operands of different
 * shapes (the sources of implicit broadcasts, see reads_broadcast_sources):
 * broadcasts them to their joint shape as the op would have. args[k] is
 * replaced by a new reference stored in owned[k] (NULL where none). */
static wf_status broadcast_operands(const wf_tape_node *tn, wf_array **args, wf_array **owned)
{
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    bool differ = false;
    for (int k = 0; k < tn->ninputs; k++) {
        owned[k] = NULL;
        int64_t joined[WF_MAX_NDIM];
        int njoined;
        if (wf__broadcast_shapes(tn->prim->name, shape, ndim, args[k]->shape, args[k]->ndim,
                                 joined, &njoined) != WF_OK)
            return wf_last_error();
        differ |= k > 0 && !wf__shape_equal(args[k]->shape, args[k]->ndim, args[0]->shape,
                                            args[0]->ndim);
        wf__shape_copy(shape, joined, njoined);
        ndim = njoined;
    }
    for (int k = 0; differ && k < tn->ninputs; k++) {
        if (wf__shape_equal(args[k]->shape, args[k]->ndim, shape, ndim))
            continue;
        owned[k] = wf__op_broadcast_to(args[k], shape, ndim);
        if (!owned[k])
            return wf_last_error();
        args[k] = owned[k];
    }
    return WF_OK;
}

/* A sibling describes its output in its parameters; a replay (shapeless or
 * not) takes the description from the replayed primary's output. */
static wf_array *replay_sibling(const wf_tape_node *tn, wf_array *primary)
{
    wf_sibling_params p;
    memset(&p, 0, sizeof p);
    p.index = ((const wf_sibling_params *)tn->params)->index;
    const wf_array *result = wf__node_output(primary, p.index);
    p.dtype = result->dtype;
    p.ndim = result->ndim;
    wf__shape_copy(p.shape, result->shape, result->ndim);
    return wf__node_new(&wf__prim_sibling, &p, &primary, 1);
}

static bool broadcasts_operands(const wf_tape_node *tn)
{
    return (tn->prim->flags & WF_PRIM_ELEMENTWISE) && !wf__prim_is_fused(tn->prim) &&
           tn->ninputs >= 2 && tn->ninputs <= 16;
}

wf_status wf__tape_replay(const wf_tape *t, wf_array *const *inputs, wf_array **outputs)
{
    wf_array **values = wf__calloc((size_t)t->nnodes + 1, sizeof *values);
    wf_array *args_local[16];
    if (!values)
        return out_of_memory();
    /* wf__node_new is an internal builder: the nodes belong to no scope, and
     * each output gets a reference of its own before the intermediates go. */
    wf_status status = WF_OK;
    for (int i = 0; i < t->nnodes && status == WF_OK; i++) {
        const wf_tape_node *tn = &t->nodes[i];
        wf_array **args = tn->ninputs <= 16 ? args_local : wf__malloc((size_t)tn->ninputs * sizeof *args);
        if (!args) {
            status = out_of_memory();
            break;
        }
        for (int k = 0; k < tn->ninputs; k++)
            args[k] = value_of(tn->inputs[k], inputs, t->consts, values);
        wf_array *owned[16] = {NULL};
        if (broadcasts_operands(tn))
            status = broadcast_operands(tn, args, owned);
        if (status == WF_OK && tn->prim->params_retain) /* the node will own a reference */
            tn->prim->params_retain(tn->params);
        if (status == WF_OK) {
            values[i] = tn->prim == &wf__prim_sibling
                            ? replay_sibling(tn, args[0])
                            : wf__node_new(tn->prim, tn->params, args, tn->ninputs);
            if (!values[i])
                status = wf_last_error();
        }
        for (int k = 0; k < 16; k++)
            wf__array_release(owned[k]);
        if (args != args_local)
            free(args);
    }
    if (status == WF_OK)
        for (int i = 0; i < t->noutputs; i++)
            outputs[i] = wf__array_incref(value_of(t->outputs[i], inputs, t->consts, values));
    for (int i = 0; i < t->nnodes; i++)
        wf__array_release(values[i]);
    free(values);
    return status;
}
