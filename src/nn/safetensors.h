/* The safetensors reader without the file: for wf_nn_load_safetensors and
 * the fuzz target (fuzz/fuzz_safetensors.c). */
#ifndef WEFT_NN_SAFETENSORS_H
#define WEFT_NN_SAFETENSORS_H

#include <stddef.h>

#include "weft_nn.h"

/* Parses `size` bytes of a safetensors file (hostile input: every length
 * and offset is checked). `path` names the source in error messages.
 * metadata (may be NULL) receives "__metadata__"'s string entries. */
wf_nn_params *wf__nn_safetensors_parse(const unsigned char *file, size_t size, const char *path,
                                       wf_nn_gguf_meta *metadata);

#endif
