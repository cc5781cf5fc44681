/* The .npy, .npz and GGUF readers over a mapping (mapped.h) instead of a
 * path: the public loaders map the file and call them; the fuzz targets
 * (fuzz/fuzz_npy.c, fuzz_npz.c, fuzz_gguf.c) and tests hand them memory
 * through wf__nn_mapping_borrow. The bytes are hostile input. `path` only
 * names the source in error messages; the caller keeps its reference to m
 * (arrays made over it take their own). */
#ifndef WEFT_NN_LOADERS_H
#define WEFT_NN_LOADERS_H

#include "nn/mapped.h"
#include "weft_nn.h"

wf_array *wf__nn_npy_parse(wf_nn_mapping *m, const char *path);
wf_nn_params *wf__nn_npz_parse(wf_nn_mapping *m, const char *path);
wf_nn_params *wf__nn_gguf_parse(wf_nn_mapping *m, const char *path, wf_nn_gguf_meta **metadata);

#endif
