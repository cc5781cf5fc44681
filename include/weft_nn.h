/*
 * weft_nn.h - a small neural-network layer built only on weft.h.
 *
 * Layers are plain functions of arrays (inputs borrowed, a new reference
 * returned, NULL + last error on bad input), so they trace, differentiate
 * and compile like any other weft code. Parameters are a flat list of named
 * arrays, saved and loaded in the safetensors format. Optimizers are
 * functional: a step takes parameters, gradients and state and returns new
 * arrays, so a whole training step can be one compiled function.
 *
 * Thread notes: layer and optimizer functions may be called from any
 * thread. A wf_nn_params list is a plain container: build it on one thread,
 * then share it read-only (or publish whole parameter sets through wf_slot).
 */
#ifndef WEFT_NN_H
#define WEFT_NN_H

#include "weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- parameters */

/* A list of (name, array) pairs, in insertion order. Owns one reference to
 * each array. */
typedef struct wf_nn_params wf_nn_params;

/* An empty list (NULL + last error when memory is short). */
wf_nn_params *wf_nn_params_new(void);
/* Frees the list and drops its references (NULL is a no-op). */
void wf_nn_params_release(wf_nn_params *params);
/* Appends `value` (retained) under `name` (copied; at most 255 bytes, unique
 * in the list, else WF_ERR_INVALID_ARGUMENT). */
wf_status wf_nn_params_add(wf_nn_params *params, const char *name, wf_array *value);
/* Number of entries (0 for NULL). */
size_t wf_nn_params_count(const wf_nn_params *params);
/* Name and array of entry i (borrowed: valid until the entry is replaced or
 * the list released); NULL + WF_ERR_INVALID_ARGUMENT when out of range. */
const char *wf_nn_params_name(const wf_nn_params *params, size_t i);
wf_array *wf_nn_params_get(const wf_nn_params *params, size_t i);
/* The index of `name`, or -1 (constant time: the list indexes its names). */
long wf_nn_params_find(const wf_nn_params *params, const char *name);
/* Replaces entry i's array (retains the new one, releases the old one); the
 * shape and dtype must match (WF_ERR_SHAPE / WF_ERR_DTYPE otherwise). */
wf_status wf_nn_params_set(wf_nn_params *params, size_t i, wf_array *value);

/* A list of file metadata (key, value) entries: GGUF's, whose functions are
 * below; safetensors files use its string entries. */
typedef struct wf_nn_gguf_meta wf_nn_gguf_meta;

/* Writes every entry to `path` in the safetensors format (evaluates them).
 * Names are the tensor names; dtypes map to F32, F64, F16, BF16, I8, I16,
 * I32, I64, U8, U16, U32, U64, BOOL and C64. "__metadata__" is
 * {"format": "weft"}. */
wf_status wf_nn_save_safetensors(const wf_nn_params *params, const char *path);
/* The same with "__metadata__" holding exactly metadata's entries, each of
 * which must be one string (WF_GGUF_STRING; the format maps strings to
 * strings): WF_ERR_INVALID_ARGUMENT naming the first other one. The list
 * type is GGUF's (see below); metadata NULL is wf_nn_save_safetensors. */
wf_status wf_nn_save_safetensors_with_metadata(const wf_nn_params *params,
                                               const wf_nn_gguf_meta *metadata, const char *path);
/* Reads a safetensors file into a new list (tensors in file order of their
 * data offsets). NULL + last error: WF_ERR_IO for a missing or short file,
 * WF_ERR_INVALID_ARGUMENT for a malformed header, WF_ERR_DTYPE for an
 * unsupported dtype. F8_E4M3 tensors load as uint8 (their bytes; as MLX
 * loads them: wf_from_fp8 converts). */
wf_nn_params *wf_nn_load_safetensors(const char *path);
/* The same, with "__metadata__"'s string entries in file order as a new
 * list in *metadata when it is not NULL (values that are not strings are
 * skipped). */
wf_nn_params *wf_nn_load_safetensors_with_metadata(const char *path, wf_nn_gguf_meta **metadata);

/* ---------------------------------------------------------------- NumPy files
 *
 * .npy and .npz (NumPy's formats; NumPy and MLX read and write them).
 * Loaders treat the file as hostile: every size, offset and count is
 * checked against the file, and a truncated or corrupt file gives
 * WF_ERR_IO with a message (never a crash or a huge allocation). Aligned
 * little-endian data is mapped (mmap), not copied: the arrays keep the
 * mapping alive. dtypes: bool, int8..int64, uint8..uint64, float16/32/64,
 * complex64 (NumPy has no bfloat16: saving one is WF_ERR_DTYPE). */

/* The array of a .npy file (any byte order; Fortran order as a
 * transposed view). New reference; NULL + last error. */
wf_array *wf_nn_load_npy(const char *path);
/* Writes `a` (evaluated) to a .npy file (version 1.0, row-major). */
wf_status wf_nn_save_npy(wf_array *a, const char *path);
/* The arrays of a .npz archive, named as their members without ".npy"
 * (stored or deflated members; zip64 sizes read). New list. */
wf_nn_params *wf_nn_load_npz(const char *path);
/* Writes every entry as NAME.npy into a .npz archive, deflated when
 * `compressed` (as numpy.savez_compressed). Members of 4 GiB or more are
 * WF_ERR_UNSUPPORTED (no zip64 writing). */
wf_status wf_nn_save_npz(const wf_nn_params *params, const char *path, bool compressed);

/* ---------------------------------------------------------------- GGUF files
 *
 * llama.cpp's GGUF (versions 2 and 3): metadata then tensors. Tensors of
 * type F32, F16, BF16, F64, I8, I16, I32, I64 load as arrays of that dtype
 * (mapped in place when aligned); Q4_0, Q4_1 and Q8_0 load in weft's
 * quantized layout as MLX does: "NAME" holds the uint32 codes (4 or 8
 * bits, group size 32) and "PREFIX.scales", "PREFIX.biases" (float16; PREFIX
 * is NAME without a ".weight" suffix) the groups' scales and biases, so
 * wf_dequantize(codes, scales, biases, 32, bits) gives the tensor's values
 * (Q4_0: d * (q - 8); Q4_1: d * q + m; Q8_0: d * q). Other ggml types are
 * WF_ERR_UNSUPPORTED naming the type. Shapes are NumPy's (the reverse of
 * ggml's ne). The file is hostile input: counts, lengths, offsets and
 * sizes are checked against it; a bad file is WF_ERR_IO. */

/* Metadata: (key, value) entries in file order (wf_nn_gguf_meta, declared
 * with the safetensors functions above). A value is numbers (a 0-d array
 * for one, a 1-d array for a GGUF array of numbers; bool as bool), one
 * string, or a list of strings. */
typedef enum wf_nn_gguf_kind {
    WF_GGUF_NUMBERS = 0, /* wf_nn_gguf_meta_array */
    WF_GGUF_STRING,      /* wf_nn_gguf_meta_strings gives 1 */
    WF_GGUF_STRINGS      /* a GGUF array of strings */
} wf_nn_gguf_kind;

/* An empty list (NULL + last error when memory is short). */
wf_nn_gguf_meta *wf_nn_gguf_meta_new(void);
/* Frees the list and its arrays (NULL is a no-op). */
void wf_nn_gguf_meta_release(wf_nn_gguf_meta *meta);
/* Number of entries; key, kind of entry i (borrowed; i < count). */
size_t wf_nn_gguf_meta_count(const wf_nn_gguf_meta *meta);
const char *wf_nn_gguf_meta_key(const wf_nn_gguf_meta *meta, size_t i);
wf_nn_gguf_kind wf_nn_gguf_meta_kind(const wf_nn_gguf_meta *meta, size_t i);
/* The numbers of entry i (borrowed), NULL for a string entry. */
wf_array *wf_nn_gguf_meta_array(const wf_nn_gguf_meta *meta, size_t i);
/* The strings of entry i (borrowed, NUL-terminated) and their count (0 for
 * a numbers entry). */
size_t wf_nn_gguf_meta_strings(const wf_nn_gguf_meta *meta, size_t i, const char *const **out);
/* Appends numbers (`value` retained: 0-d or 1-d; bool, (u)int8..64,
 * float32/64) or strings (`count` of them; as_list: a GGUF array even for
 * one). Keys are unique (WF_ERR_INVALID_ARGUMENT otherwise). */
wf_status wf_nn_gguf_meta_add_array(wf_nn_gguf_meta *meta, const char *key, wf_array *value);
wf_status wf_nn_gguf_meta_add_strings(wf_nn_gguf_meta *meta, const char *key,
                                      const char *const *strings, size_t count, bool as_list);

/* The tensors of a GGUF file (see above), and its metadata into *metadata
 * when it is not NULL (a new list). NULL + last error. */
wf_nn_params *wf_nn_load_gguf(const char *path, wf_nn_gguf_meta **metadata);
/* Writes a GGUF (version 3) file: every entry as a tensor (F32, F16, BF16,
 * F64, I8, I16, I32, I64; others WF_ERR_DTYPE), metadata may be NULL. As
 * MLX's save_gguf: tensors are written as they are (no quantized types). */
wf_status wf_nn_save_gguf(const wf_nn_params *params, const wf_nn_gguf_meta *metadata,
                          const char *path);

/* ---------------------------------------------------------------- layers */

/* x @ w (+ b): x (..., in), w (in, out), b (out) or NULL. */
wf_array *wf_nn_linear(wf_array *x, wf_array *w, wf_array *b);
/* Rows of `table` (vocab, dim) picked by integer `ids` (any shape): the
 * result has shape ids.shape + (dim). */
wf_array *wf_nn_embedding(wf_array *table, wf_array *ids);
/* Multi-head causal self-attention over x (batch, seq, dim): one fused
 * projection wqkv (dim, 3 dim) into queries, keys and values, `heads`
 * heads through wf_scaled_dot_product_attention (causal), and an output
 * projection wo (dim, dim). dim must be a multiple of heads. */
wf_array *wf_nn_causal_self_attention(wf_array *x, wf_array *wqkv, wf_array *wo, int heads);
/* gelu(x @ w1 + b1) @ w2 + b2 (biases may be NULL). */
wf_array *wf_nn_mlp(wf_array *x, wf_array *w1, wf_array *b1, wf_array *w2, wf_array *b2);
/* Mean cross-entropy of `logits` (n, classes) against integer `targets`
 * (n), weighted by `weights` (n floats, NULL = all 1): sum(w * nll) /
 * max(sum(w), 1). A scalar of the logits' dtype (promoted with float32 when
 * weights are given: float64 logits give a float64 loss). */
wf_array *wf_nn_cross_entropy(wf_array *logits, wf_array *targets, wf_array *weights);

/* ---------------------------------------------------------------- WordPiece tokenizer
 *
 * BERT's uncased tokenizer: text cleanup (NUL, U+FFFD and control/format/
 * unassigned characters dropped, whitespace made spaces), CJK ideographs
 * split apart, accents stripped (canonical decomposition, nonspacing marks
 * dropped), lowercasing, a split at whitespace and around every punctuation
 * character, then greedy longest-match WordPiece ("##" continuation pieces;
 * a word with no match or over 100 characters becomes [UNK]). Invalid UTF-8
 * bytes are dropped. A loaded tokenizer is read-only: any thread may encode
 * with it at the same time. */
typedef struct wf_nn_wordpiece wf_nn_wordpiece;

/* Reads a vocab.txt (one token per line; the id is the line number; at
 * most 64 MiB and 4,194,304 lines of at most 1024 bytes). It must hold [UNK], [CLS],
 * [SEP] and [PAD]. NULL + last error (WF_ERR_IO, WF_ERR_INVALID_ARGUMENT). */
wf_nn_wordpiece *wf_nn_wordpiece_load(const char *vocab_path);
/* Frees the tokenizer (NULL is a no-op). */
void wf_nn_wordpiece_free(wf_nn_wordpiece *tokenizer);
/* Tokenizes `length` bytes of UTF-8 `text` into ids: [CLS], the pieces,
 * [SEP], truncated to `max_ids` (>= 2) ids in all (the pieces cut, [SEP]
 * kept, as BERT's truncation does). Returns the count written to `ids`, or
 * -1 + last error (NULL argument, max_ids < 2, out of memory). */
int64_t wf_nn_wordpiece_encode(const wf_nn_wordpiece *tokenizer, const char *text,
                               size_t length, int32_t *ids, size_t max_ids);
/* The id of an exact vocab entry (e.g. "[MASK]"), or -1. */
int32_t wf_nn_wordpiece_token_id(const wf_nn_wordpiece *tokenizer, const char *token);
/* The id of [PAD] (-1 for NULL). */
int32_t wf_nn_wordpiece_pad_id(const wf_nn_wordpiece *tokenizer);

/* ---------------------------------------------------------------- BERT encoder
 *
 * A BERT encoder loaded from a Hugging Face checkpoint directory
 * (config.json and model.safetensors, e.g. sentence-transformers'
 * all-MiniLM-L6-v2): embeddings (word + absolute position + token type 0),
 * LayerNorm, then post-LayerNorm layers of self-attention (padding masked)
 * and an exact-GELU feed-forward block. A loaded model is read-only: any
 * thread may run it at the same time, and its functions trace and compile
 * like other weft code (the weights are constants of a trace). */
typedef struct wf_nn_bert wf_nn_bert;

/* The sizes read from config.json. */
typedef struct wf_nn_bert_config {
    int64_t vocab_size, hidden_size, num_layers, num_heads, intermediate_size;
    int64_t max_positions;   /* max_position_embeddings */
    int64_t type_vocab_size; /* 2 when absent */
    double layer_norm_eps;   /* 1e-12 when absent */
} wf_nn_bert_config;

/* Parses a BERT config.json (at most 1 MiB; other keys are skipped) into
 * *out. WF_ERR_IO when unreadable, WF_ERR_INVALID_ARGUMENT for malformed
 * JSON, missing or out-of-range sizes, or an activation other than "gelu". */
wf_status wf_nn_bert_config_load(const char *path, wf_nn_bert_config *out);
/* Loads model_dir/config.json and model_dir/model.safetensors, the weights
 * cast to `dtype` (float32, bfloat16 or float16; activations follow it).
 * Every tensor's shape is checked against the config. NULL + last error. */
wf_nn_bert *wf_nn_bert_load(const char *model_dir, wf_dtype dtype);
/* Frees the model (NULL is a no-op); arrays it returned stay valid. */
void wf_nn_bert_free(wf_nn_bert *model);
/* The model's sizes (borrowed; NULL for NULL). */
const wf_nn_bert_config *wf_nn_bert_get_config(const wf_nn_bert *model);
/* The dtype the model computes in. */
wf_dtype wf_nn_bert_dtype(const wf_nn_bert *model);
/* Last hidden states (batch, seq, hidden) in the model's dtype for token
 * `ids` (batch, seq; int32 or int64) and `mask` (batch, seq; nonzero for
 * real tokens, 0 for padding: padded keys get no attention). seq must be at
 * most max_positions. A new reference; NULL + last error. */
wf_array *wf_nn_bert_encode(const wf_nn_bert *model, wf_array *ids, wf_array *mask);
/* Sentence embeddings (batch, hidden), float32: the hidden states averaged
 * over the tokens whose mask is 1, then divided by their L2 norm
 * (sentence-transformers' mean pooling + Normalize). `mask` holds 0 / 1. */
wf_array *wf_nn_bert_embed(const wf_nn_bert *model, wf_array *ids, wf_array *mask);
/* Sentence embeddings of several sentences packed into one run of tokens,
 * with no padding per sentence: token t is ids[t] at position positions[t]
 * of sentence segments[t]; tokens attend only to the tokens of their own
 * segment. ids, positions and segments are (tokens), int32 or int64;
 * positions must lie in [0, max_positions). Returns (sequences, hidden)
 * float32 as wf_nn_bert_embed does: row s pools the tokens whose segment
 * is s (zeros when none is); tokens with segments outside [0, sequences)
 * are filler (e.g. -1 to pad the run to a size the compile cache holds).
 * Attention costs tokens^2 however the run is split, so servers pack a
 * few hundred tokens a call. A new reference; NULL + last error. */
wf_array *wf_nn_bert_embed_packed(const wf_nn_bert *model, wf_array *ids, wf_array *positions,
                                  wf_array *segments, int64_t sequences);

/* ---------------------------------------------------------------- optimizers */

/* AdamW (decoupled weight decay). Start from wf_nn_adamw_options_default(). */
typedef struct wf_nn_adamw_options {
    size_t struct_size; /* sizeof(wf_nn_adamw_options) of the caller's header */
    double beta1, beta2, eps, weight_decay;
} wf_nn_adamw_options;
wf_nn_adamw_options wf_nn_adamw_options_default(void);

/* One AdamW step for n parameters: m' = b1 m + (1-b1) g, v' = b2 v + (1-b2)
 * g^2, p' = p - lr (m'/(1-b1^t) / (sqrt(v'/(1-b2^t)) + eps) + wd p).
 * `step` (t, >= 1) and `lr` are float32 scalar arrays (so a compiled step
 * takes them as inputs and never retraces). Writes n new references to each
 * of new_params, new_m, new_v. */
wf_status wf_nn_adamw_step(const wf_nn_adamw_options *options, size_t n,
                           wf_array *const *params, wf_array *const *grads,
                           wf_array *const *m, wf_array *const *v, wf_array *step,
                           wf_array *lr, wf_array **new_params, wf_array **new_m,
                           wf_array **new_v);

/* SGD with momentum and (coupled) weight decay: b' = mu b + g + wd p,
 * p' = p - lr b'. With momentum 0, `buffers` may be NULL and new_buffers is
 * left untouched. */
wf_status wf_nn_sgd_step(double momentum, double weight_decay, size_t n,
                         wf_array *const *params, wf_array *const *grads,
                         wf_array *const *buffers, wf_array *lr, wf_array **new_params,
                         wf_array **new_buffers);

/* Learning rate at `step` (0-based) of `total`: linear warm-up over `warmup`
 * steps to `peak`, then cosine decay to `floor`. */
double wf_nn_lr_cosine(long step, long total, long warmup, double peak, double floor);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_NN_H */
