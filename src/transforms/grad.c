/* wf_grad and wf_value_and_grad: functions wrapping wf__vjp. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "transforms/transforms.h"
#include "util/fault.h"

typedef struct grad_payload {
    wf_fn *fn;
    bool with_value;
    size_t nargnums;
    int argnums[];
} grad_payload;

static void grad_payload_free(void *p)
{
    grad_payload *g = p;
    wf_fn_release(g->fn);
    free(g);
}

static const char *grad_name(const grad_payload *g)
{
    return g->with_value ? "wf_value_and_grad" : "wf_grad";
}

static wf_status grad_call(void *payload, wf_array *const *inputs, size_t ninputs,
                           wf_array **outputs, size_t *noutputs)
{
    const grad_payload *g = payload;
    const char *op = grad_name(g);
    for (size_t k = 0; k < g->nargnums; k++)
        if ((size_t)g->argnums[k] >= ninputs)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "%s: argnum %d is out of range for a call with %zu inputs", op,
                             g->argnums[k], ninputs);
    bool *traced = wf__calloc(ninputs + 1, sizeof *traced);
    wf_array **grads = wf__calloc(ninputs + 1, sizeof *grads);
    wf_status st =
        traced && grads ? WF_OK : wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    wf_array *values[WF_FN_MAX_OUTPUTS];
    size_t nvalues = WF_FN_MAX_OUTPUTS;
    if (st == WF_OK) {
        for (size_t k = 0; k < g->nargnums; k++)
            traced[g->argnums[k]] = true;
        st = wf__vjp(op, g->fn, inputs, ninputs, traced, NULL, 0,
                     g->with_value ? values : NULL, &nvalues, grads);
    }
    if (st == WF_OK) {
        const size_t nv = g->with_value ? nvalues : 0;
        if (nv + g->nargnums > *noutputs) {
            st = wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %zu outputs, room was given for %zu",
                           op, nv + g->nargnums, *noutputs);
            for (size_t j = 0; j < nv; j++)
                wf_release(values[j]);
            for (size_t i = 0; i < ninputs; i++)
                wf_release(grads[i]);
        } else {
            for (size_t j = 0; j < nv; j++)
                outputs[j] = values[j];
            for (size_t k = 0; k < g->nargnums; k++)
                outputs[nv + k] = grads[g->argnums[k]];
            *noutputs = nv + g->nargnums;
        }
    }
    free(traced);
    free(grads);
    return st;
}

static wf_fn *make_grad(const char *op, wf_fn *fn, const int *argnums, size_t nargnums,
                        bool with_value)
{
    if (!fn) {
        wf__error(WF_ERR_NULL_ARGUMENT, "%s: fn is NULL", op);
        return NULL;
    }
    if (!argnums && nargnums) {
        wf__error(WF_ERR_NULL_ARGUMENT, "%s: argnums is NULL with nargnums %zu", op, nargnums);
        return NULL;
    }
    static const int first = 0;
    if (nargnums == 0) {
        argnums = &first;
        nargnums = 1;
    }
    if (nargnums > WF_FN_MAX_OUTPUTS) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %zu argnums (at most %d)", op, nargnums,
                  WF_FN_MAX_OUTPUTS);
        return NULL;
    }
    for (size_t k = 0; k < nargnums; k++) {
        if (argnums[k] < 0) {
            wf__error(WF_ERR_INVALID_ARGUMENT, "%s: argnum %d is negative", op, argnums[k]);
            return NULL;
        }
        for (size_t j = 0; j < k; j++) {
            if (argnums[j] == argnums[k]) {
                wf__error(WF_ERR_INVALID_ARGUMENT, "%s: argnum %d repeated", op, argnums[k]);
                return NULL;
            }
        }
    }
    grad_payload *g = wf__malloc(sizeof *g + nargnums * sizeof(int));
    if (!g) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        return NULL;
    }
    g->fn = wf_fn_retain(fn);
    g->with_value = with_value;
    g->nargnums = nargnums;
    memcpy(g->argnums, argnums, nargnums * sizeof(int));
    return wf__fn_make(grad_call, g, grad_payload_free);
}

wf_fn *wf_grad(wf_fn *fn, const int *argnums, size_t nargnums)
{
    return make_grad("wf_grad", fn, argnums, nargnums, false);
}

wf_fn *wf_value_and_grad(wf_fn *fn, const int *argnums, size_t nargnums)
{
    return make_grad("wf_value_and_grad", fn, argnums, nargnums, true);
}
