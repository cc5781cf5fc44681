/* The CPU side of wf_custom: hand the user's kernel contiguous inputs and a
 * fresh output, with no lock held and evaluation barred while it runs. */
#include <stdlib.h>

#include <stdio.h>

#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "prim/custom.h"
#include "runtime/eval.h"

enum { MAX_CUSTOM_INPUTS = 64 };

/* Input i's data, row-major: its own buffer when contiguous, else a copy
 * that *copy holds. */
static wf_status contiguous_data(const wf_array *in, const void **data, wf_buffer **copy)
{
    *copy = NULL;
    if (in->row_contiguous) {
        *data = wf__array_data_ptr(in);
        return WF_OK;
    }
    *copy = wf__buffer_alloc((size_t)in->size * wf_dtype_size(in->dtype));
    if (!*copy)
        return wf_last_error();
    *data = (*copy)->data;
    return wf__cpu_copy_to_contiguous(in, (*copy)->data);
}

wf_status wf__cpu_custom(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    const wf_custom_params *p = params;
    const void *data[MAX_CUSTOM_INPUTS];
    wf_buffer *copies[MAX_CUSTOM_INPUTS] = {0};
    wf_dtype dtypes[MAX_CUSTOM_INPUTS];
    int ndims[MAX_CUSTOM_INPUTS];
    const int64_t *shapes[MAX_CUSTOM_INPUTS];
    wf_status status = wf__array_alloc_output(out);
    for (int i = 0; i < ninputs && status == WF_OK; i++) {
        status = contiguous_data(inputs[i], &data[i], &copies[i]);
        dtypes[i] = inputs[i]->dtype;
        ndims[i] = inputs[i]->ndim;
        shapes[i] = inputs[i]->shape;
    }
    if (status == WF_OK) {
        wf_custom_call call = {ninputs,     data,         dtypes,   ndims,   shapes,
                               out->buffer->data, out->dtype, out->ndim, out->shape};
        wf_clear_error(); /* so a message the kernel records is its own */
        wf__eval_user_code_begin();
        status = p->kernel(p->payload, &call);
        wf__eval_user_code_end();
        if (status != WF_OK) { /* a code that is not a weft error becomes WF_ERR_KERNEL */
            wf_status returned = status;
            status = status < WF_OK && status >= WF_ERR_INTERNAL ? status : WF_ERR_KERNEL;
            char said[384] = "";
            if (wf_last_error() != WF_OK) /* the kernel's wf_set_error says why */
                snprintf(said, sizeof said, "%s", wf_last_error_message());
            if (said[0] != '\0')
                wf__error(status, "wf_custom '%s': %s", p->name, said);
            else
                wf__error(status, "wf_custom '%s': the kernel returned %d (%s)", p->name,
                          (int)returned, wf_status_name(returned));
        }
    }
    for (int i = 0; i < ninputs; i++)
        if (copies[i])
            wf__buffer_release(copies[i]);
    return status;
}
