/*
 * libFuzzer target: the WordPiece tokenizer of weft_nn.h on hostile bytes.
 * The input up to its first NUL byte is a vocab.txt (read as
 * wf_nn_wordpiece_load reads one, through wf__nn_wordpiece_parse); the
 * bytes after it are a text to encode (without a NUL, the whole input is
 * both), max_ids taken from the text's first byte. A server tokenizes what
 * its clients send, so the text is as hostile as the file.
 * Checks: a refused vocab carries a status and a message; an encoding is
 * [CLS], pieces, [SEP], at most max_ids ids, each id a line of the vocab;
 * a shorter max_ids gives the longer encoding's first pieces (then
 * [SEP]); the same text gives the same ids twice; max_ids < 2 is refused
 * with a message. ASan sees any read outside the text or the vocab.
 */
#define WEFT_FUZZ_NAME "fuzz_wordpiece"
#include <string.h>

#include "loader_checks.h"
#include "nn/loaders.h"

enum { MAX_IDS = 512 };

/* Encodes text with max_ids; checks the shape of the result. */
static int64_t encode_checked(const wf_nn_wordpiece *t, const char *text, size_t size,
                              size_t max_ids, size_t lines, int32_t *ids)
{
    const int64_t n = wf_nn_wordpiece_encode(t, text, size, ids, max_ids);
    if (n < 2 || (size_t)n > max_ids)
        loader_fail("an encoding's length is out of range");
    if (ids[0] != wf_nn_wordpiece_token_id(t, "[CLS]") ||
        ids[n - 1] != wf_nn_wordpiece_token_id(t, "[SEP]"))
        loader_fail("an encoding is not [CLS] ... [SEP]");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= lines)
            loader_fail("an id is not a line of the vocab");
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wf_clear_error();
    const uint8_t *nul = memchr(data, 0, size);
    const size_t vocab_size = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : (const char *)data;
    const size_t text_size = nul ? size - vocab_size - 1 : size;
    char *vocab = malloc(vocab_size + 1);
    if (!vocab)
        return 0;
    memcpy(vocab, data, vocab_size);
    vocab[vocab_size] = 0;
    size_t lines = 1;
    for (size_t i = 0; i < vocab_size; i++)
        lines += vocab[i] == '\n';
    wf_nn_wordpiece *t = wf__nn_wordpiece_parse(vocab, vocab_size, "fuzz vocab");
    if (!t) {
        loader_check_failure();
        return 0;
    }
    static int32_t full[MAX_IDS], cut[MAX_IDS], again[MAX_IDS];
    const int64_t n = encode_checked(t, text, text_size, MAX_IDS, lines, full);
    const size_t max_ids = 2 + (text_size ? (unsigned char)text[0] : 0) % (MAX_IDS - 1);
    const int64_t m = encode_checked(t, text, text_size, max_ids, lines, cut);
    if (m != (n < (int64_t)max_ids ? n : (int64_t)max_ids) ||
        memcmp(cut, full, (size_t)(m - 1) * sizeof *cut) != 0)
        loader_fail("a truncated encoding is not the full one's first pieces");
    if (encode_checked(t, text, text_size, MAX_IDS, lines, again) != n ||
        memcmp(again, full, (size_t)n * sizeof *full) != 0)
        loader_fail("the same text gave other ids");
    wf_clear_error();
    if (wf_nn_wordpiece_encode(t, text, text_size, again, 1) != -1)
        loader_fail("max_ids 1 was accepted");
    loader_check_failure();
    wf_nn_wordpiece_free(t);
    return 0;
}
