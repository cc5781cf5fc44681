/*
 * WordPiece tokenizer of weft_nn.h: BERT's basic tokenizer (text cleanup,
 * CJK isolation, accent stripping, lowercasing, whitespace and punctuation
 * split) followed by greedy longest-match WordPiece over a vocab.txt.
 * The Unicode tables come from scripts/gen_bert_unicode.py.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert_unicode.h"
#include "nn/loaders.h"
#include "weft.h"
#include "weft_nn.h"
#include "util/fault.h"
#include "util/hash.h"

enum {
    MAX_VOCAB_BYTES = 64 << 20, /* a vocab.txt larger than this is refused */
    MAX_TOKEN_BYTES = 1024,     /* longest vocab entry accepted */
    MAX_VOCAB_LINES = 1 << 22,  /* most lines (ids) accepted */
    MAX_WORD_CHARS = 100,       /* longer words become [UNK], as BERT does */
};

struct vocab_entry {
    uint32_t offset; /* into the string pool */
    uint32_t length;
    int32_t id;
};

struct wf_nn_wordpiece {
    char *pool;                  /* every token's bytes, back to back */
    struct vocab_entry *entries; /* open-addressing hash table */
    size_t capacity;             /* power of two, > twice the vocab */
    size_t count;
    int32_t unk, cls, sep, pad;
};

/* ------------------------------------------------------------ vocab */

static int32_t vocab_find(const wf_nn_wordpiece *t, const char *s, size_t n)
{
    size_t mask = t->capacity - 1;
    for (size_t i = (size_t)wf__hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        const struct vocab_entry *e = &t->entries[i];
        if (e->id < 0)
            return -1;
        if (e->length == n && memcmp(t->pool + e->offset, s, n) == 0)
            return e->id;
    }
}

/* Adds pool[offset, offset+n) as `id`; a repeated token keeps its first id
 * (as the reference tokenizers do). */
static void vocab_insert(wf_nn_wordpiece *t, uint32_t offset, uint32_t n, int32_t id)
{
    size_t mask = t->capacity - 1;
    for (size_t i = (size_t)wf__hash_bytes(t->pool + offset, n) & mask;; i = (i + 1) & mask) {
        struct vocab_entry *e = &t->entries[i];
        if (e->id < 0) {
            *e = (struct vocab_entry){offset, n, id};
            t->count++;
            return;
        }
        if (e->length == n && memcmp(t->pool + e->offset, t->pool + offset, n) == 0)
            return;
    }
}

static char *read_small_file(const char *path, size_t limit, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        wf_set_error(WF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char *data = wf__malloc(limit + 1);
    size_t n = data ? fread(data, 1, limit + 1, f) : 0;
    bool failed = data && ferror(f);
    fclose(f);
    if (!data) {
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
        return NULL;
    }
    if (failed || n > limit) {
        free(data);
        wf_set_error(WF_ERR_IO, "%s: %s", path,
                     failed ? "read error" : "file too large");
        return NULL;
    }
    data[n] = 0;
    *size = n;
    return data;
}

wf_nn_wordpiece *wf_nn_wordpiece_load(const char *vocab_path)
{
    if (!vocab_path) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_wordpiece_load: vocab_path is NULL");
        return NULL;
    }
    size_t size;
    char *pool = read_small_file(vocab_path, MAX_VOCAB_BYTES, &size);
    return pool ? wf__nn_wordpiece_parse(pool, size, vocab_path) : NULL;
}

wf_nn_wordpiece *wf__nn_wordpiece_parse(char *pool, size_t size, const char *vocab_path)
{
    if (size > MAX_VOCAB_BYTES) {
        free(pool);
        wf_set_error(WF_ERR_IO, "%s: file too large", vocab_path);
        return NULL;
    }
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += pool[i] == '\n';
    if (lines > MAX_VOCAB_LINES) {
        free(pool);
        wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: more than %d lines", vocab_path,
                     MAX_VOCAB_LINES);
        return NULL;
    }
    wf_nn_wordpiece *t = wf__calloc(1, sizeof *t);
    size_t capacity = 16;
    while (capacity < 2 * lines)
        capacity *= 2;
    struct vocab_entry *entries = t ? wf__malloc(capacity * sizeof *entries) : NULL;
    if (!entries) {
        free(t);
        free(pool);
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_wordpiece_load: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < capacity; i++)
        entries[i].id = -1;
    *t = (wf_nn_wordpiece){.pool = pool, .entries = entries, .capacity = capacity};
    int32_t id = 0;
    for (size_t start = 0; start < size;) {
        size_t end = start;
        while (end < size && pool[end] != '\n')
            end++;
        size_t n = end - start;
        if (n && pool[start + n - 1] == '\r')
            n--;
        if (n > MAX_TOKEN_BYTES) {
            wf_nn_wordpiece_free(t);
            wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: line %d is longer than %d bytes",
                         vocab_path, (int)id + 1, MAX_TOKEN_BYTES);
            return NULL;
        }
        if (n) /* an empty line (the file's last) is no token */
            vocab_insert(t, (uint32_t)start, (uint32_t)n, id);
        id++;
        start = end + 1;
    }
    t->unk = vocab_find(t, "[UNK]", 5);
    t->cls = vocab_find(t, "[CLS]", 5);
    t->sep = vocab_find(t, "[SEP]", 5);
    t->pad = vocab_find(t, "[PAD]", 5);
    if (t->unk < 0 || t->cls < 0 || t->sep < 0 || t->pad < 0) {
        wf_nn_wordpiece_free(t);
        wf_set_error(WF_ERR_INVALID_ARGUMENT,
                     "%s: the vocab lacks one of [UNK], [CLS], [SEP], [PAD]", vocab_path);
        return NULL;
    }
    return t;
}

void wf_nn_wordpiece_free(wf_nn_wordpiece *t)
{
    if (!t)
        return;
    free(t->pool);
    free(t->entries);
    free(t);
}

int32_t wf_nn_wordpiece_token_id(const wf_nn_wordpiece *t, const char *token)
{
    return t && token ? vocab_find(t, token, strlen(token)) : -1;
}

int32_t wf_nn_wordpiece_pad_id(const wf_nn_wordpiece *t) { return t ? t->pad : -1; }

/* ------------------------------------------------------------ Unicode */

/* Next code point of s[*pos, n); an invalid or overlong sequence, a
 * surrogate or a value past U+10FFFF consumes one byte and gives U+FFFD. */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *pos)
{
    size_t i = *pos;
    unsigned char c = s[i];
    int extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
                         : (c & 0xF8) == 0xF0     ? 3 : -1;
    static const uint32_t min_value[4] = {0, 0x80, 0x800, 0x10000};
    if (extra == 0) {
        *pos = i + 1;
        return c;
    }
    if (extra < 0 || n - i <= (size_t)extra) {
        *pos = i + 1;
        return 0xFFFD;
    }
    uint32_t cp = c & (0x3F >> extra);
    for (int k = 1; k <= extra; k++) {
        if ((s[i + k] & 0xC0) != 0x80) {
            *pos = i + 1;
            return 0xFFFD;
        }
        cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if (cp < min_value[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        *pos = i + 1;
        return 0xFFFD;
    }
    *pos = i + 1 + (size_t)extra;
    return cp;
}

static size_t utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool in_ranges(const wf__uni_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].first)
            hi = mid;
        else if (cp > r[mid].last)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool is_space(uint32_t cp)
{
    /* Unicode White_Space; \v, \f and U+0085 never get here (dropped as Cc). */
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* The ideograph blocks BERT isolates as words of their own. */
static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static bool is_punct(uint32_t cp) { return in_ranges(wf__uni_punct, COUNT_OF(wf__uni_punct), cp); }

/* Accent stripping and lowercasing of one code point: writes 0-3 code
 * points to out and returns how many. */
static int strip_and_lower(uint32_t cp, uint32_t out[3])
{
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T) jamo */
        uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / (21 * 28);
        out[1] = 0x1161 + s % (21 * 28) / 28;
        out[2] = 0x11A7 + s % 28;
        return s % 28 ? 3 : 2;
    }
    size_t lo = 0, hi = COUNT_OF(wf__uni_maps);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < wf__uni_maps[mid].from)
            hi = mid;
        else if (cp > wf__uni_maps[mid].from)
            lo = mid + 1;
        else {
            for (int k = 0; k < wf__uni_maps[mid].length; k++)
                out[k] = wf__uni_maps[mid].to[k];
            return wf__uni_maps[mid].length;
        }
    }
    out[0] = cp;
    return 1;
}

/* The normalized text as code points, with ' ' for every separator:
 * returns the count written to `out` (room for 3 per input byte). */
static size_t normalize(const unsigned char *text, size_t n, uint32_t *out)
{
    size_t count = 0;
    for (size_t pos = 0; pos < n;) {
        uint32_t cp = utf8_next(text, n, &pos);
        if (in_ranges(wf__uni_dropped, COUNT_OF(wf__uni_dropped), cp))
            continue;
        if (is_space(cp)) {
            out[count++] = ' ';
        } else if (is_cjk(cp)) {
            out[count++] = ' ';
            out[count++] = cp;
            out[count++] = ' ';
        } else {
            count += (size_t)strip_and_lower(cp, out + count);
        }
    }
    return count;
}

/* ------------------------------------------------------------ WordPiece */

struct encoder {
    const wf_nn_wordpiece *t;
    int32_t *ids;
    size_t count, limit; /* pieces written, most pieces wanted */
    char *scratch;       /* "##" + a word's UTF-8 */
};

static void emit(struct encoder *e, int32_t id)
{
    if (e->count < e->limit)
        e->ids[e->count++] = id;
}

/* Greedy longest-match pieces of one word (code points w[0, n)). */
static void encode_word(struct encoder *e, const uint32_t *w, size_t n)
{
    if (n > MAX_WORD_CHARS) {
        emit(e, e->t->unk);
        return;
    }
    size_t offsets[MAX_WORD_CHARS + 1]; /* byte offset of each code point */
    char *bytes = e->scratch + 2;
    offsets[0] = 0;
    for (size_t i = 0; i < n; i++)
        offsets[i + 1] = offsets[i] + utf8_put(w[i], bytes + offsets[i]);
    int32_t pieces[MAX_WORD_CHARS];
    size_t npieces = 0;
    for (size_t start = 0; start < n;) {
        int32_t id = -1;
        size_t end = n;
        for (; end > start; end--) {
            const char *s = start ? bytes + offsets[start] - 2 : bytes;
            size_t len = offsets[end] - offsets[start] + (start ? 2 : 0);
            char saved[2];
            if (start) { /* write the "##" prefix in place, restore after */
                memcpy(saved, bytes + offsets[start] - 2, 2);
                memcpy(bytes + offsets[start] - 2, "##", 2);
            }
            id = vocab_find(e->t, s, len);
            if (start)
                memcpy(bytes + offsets[start] - 2, saved, 2);
            if (id >= 0)
                break;
        }
        if (id < 0) {
            emit(e, e->t->unk);
            return;
        }
        pieces[npieces++] = id;
        start = end;
    }
    for (size_t i = 0; i < npieces; i++)
        emit(e, pieces[i]);
}

int64_t wf_nn_wordpiece_encode(const wf_nn_wordpiece *t, const char *text, size_t length,
                               int32_t *ids, size_t max_ids)
{
    if (!t || (!text && length) || !ids) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_wordpiece_encode: %s is NULL",
                     !t ? "tokenizer" : !ids ? "ids" : "text");
        return -1;
    }
    if (max_ids < 2) {
        wf_set_error(WF_ERR_INVALID_ARGUMENT,
                     "wf_nn_wordpiece_encode: max_ids %zu leaves no room for [CLS] and [SEP]",
                     max_ids);
        return -1;
    }
    if (length > SIZE_MAX / (3 * sizeof(uint32_t)) - 1) {
        wf_set_error(WF_ERR_INVALID_ARGUMENT, "wf_nn_wordpiece_encode: text too long");
        return -1;
    }
    uint32_t *cps = wf__malloc((3 * length + 1) * sizeof *cps);
    char *scratch = wf__malloc(2 + 4 * MAX_WORD_CHARS + 4);
    if (!cps || !scratch) {
        free(cps);
        free(scratch);
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_wordpiece_encode: out of memory");
        return -1;
    }
    size_t n = normalize((const unsigned char *)text, length, cps);
    struct encoder e = {t, ids + 1, 0, max_ids - 2, scratch};
    for (size_t i = 0; i < n && e.count < e.limit;) {
        if (cps[i] == ' ') {
            i++;
        } else if (is_punct(cps[i])) {
            encode_word(&e, cps + i, 1);
            i++;
        } else {
            size_t end = i;
            while (end < n && cps[end] != ' ' && !is_punct(cps[end]))
                end++;
            encode_word(&e, cps + i, end - i);
            i = end;
        }
    }
    free(cps);
    free(scratch);
    ids[0] = t->cls;
    ids[e.count + 1] = t->sep;
    return (int64_t)e.count + 2;
}
