/* The .npy, .npz and GGUF readers over a mapping (mapped.h) instead of a
 * path (and the vocab and config readers over bytes, below): the public
 * loaders map the file and call them; the fuzz targets
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

/* The text readers behind wf_nn_wordpiece_load and wf_nn_bert_config_load,
 * over bytes already read (fuzz/fuzz_wordpiece.c, fuzz_bert_config.c):
 * - wordpiece: `text` is a vocab.txt of `size` bytes, malloc'd with a NUL
 *   at text[size]; the tokenizer takes it over (freed on failure too);
 * - bert config: `n` bytes of config.json at `text` (no NUL needed).
 * Results and errors as the public loaders'. */
wf_nn_wordpiece *wf__nn_wordpiece_parse(char *text, size_t size, const char *path);
wf_status wf__nn_bert_config_parse(const char *text, size_t n, const char *path,
                                   wf_nn_bert_config *out);

#endif
