/*
 * Tables keyed by names from files (a parameter list's index, GGUF
 * metadata, a WordPiece vocabulary) hash them with a keyed hash
 * (util/hash.h, util/name_index.h), so that a file's author cannot pile
 * its names into one chain of the table and make the load quadratic. The names here are chosen as such an author would have
 * chosen them against FNV-1a (the tables' hash before): all with the same
 * low 13 bits, so that they shared one chain in any table of up to 8,192
 * slots. Under the keyed hash they must spread as random names do, and the
 * tables must still find every one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util/hash.h"
#include "weft.h"
#include "weft_nn.h"

enum { NAMES = 512, LOW_BITS = 13, NAME_BYTES = 24 };

static char names[NAMES][NAME_BYTES];

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* NAMES names whose FNV-1a hashes share their low LOW_BITS bits. */
static void craft_names(void)
{
    const uint64_t mask = (1u << LOW_BITS) - 1;
    int found = 0;
    for (uint64_t i = 0; found < NAMES; i++) {
        char candidate[NAME_BYTES];
        snprintf(candidate, sizeof candidate, "layer.%llu.weight", (unsigned long long)i);
        if ((fnv1a(candidate) & mask) == 0)
            memcpy(names[found++], candidate, sizeof candidate);
    }
}

/* Distinct values of the low LOW_BITS bits of each name's hash. */
static int distinct_buckets(uint64_t (*hash)(const char *))
{
    static unsigned char seen[1u << LOW_BITS];
    memset(seen, 0, sizeof seen);
    int distinct = 0;
    for (int i = 0; i < NAMES; i++) {
        const uint64_t b = hash(names[i]) & ((1u << LOW_BITS) - 1);
        distinct += !seen[b];
        seen[b] = 1;
    }
    return distinct;
}

static uint64_t keyed(const char *s) { return wf__hash_bytes(s, strlen(s)); }

static void test_crafted_names_spread(void)
{
    CHECK_EQ_INT(distinct_buckets(fnv1a), 1); /* the attack works on FNV-1a */
    /* 512 random values in 8,192 buckets: about 496 distinct (sd ~4) */
    const int distinct = distinct_buckets(keyed);
    if (!CHECK(distinct >= 470))
        printf("    %d distinct buckets of %d names\n", distinct, NAMES);
}

static void test_keyed_hash_is_a_function_of_the_bytes(void)
{
    const char text[] = "embeddings.word_embeddings.weight";
    const size_t n = sizeof text - 1;
    CHECK(wf__hash_bytes(text, n) == wf__hash_bytes(text, n));
    char copy[sizeof text];
    memcpy(copy, text, sizeof text);
    CHECK(wf__hash_bytes(copy, n) == wf__hash_bytes(text, n));
    /* every length from 0 through 2 words, and a prefix differs from the whole */
    for (size_t len = 1; len <= 16; len++)
        CHECK(wf__hash_bytes(text, len) != wf__hash_bytes(text, len - 1));
}

static void test_params_find_every_crafted_name(void)
{
    wf_nn_params *p = wf_nn_params_new();
    if (!CHECK_NOT_NULL(p))
        return;
    wf_array *one = wf_scalar(1.0, WF_DTYPE_F32);
    for (int i = 0; i < NAMES; i++)
        CHECK_OK(wf_nn_params_add(p, names[i], one));
    CHECK_EQ_INT(wf_nn_params_count(p), NAMES);
    int wrong = 0;
    for (int i = 0; i < NAMES; i++)
        wrong += wf_nn_params_find(p, names[i]) != i;
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(wf_nn_params_find(p, "layer.weight"), -1);
    CHECK(wf_nn_params_add(p, names[7], one) == WF_ERR_INVALID_ARGUMENT); /* a repeat */
    wf_clear_error();
    wf_release(one);
    wf_nn_params_release(p);
}

static void test_wordpiece_finds_every_crafted_token(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/weft_hostile_vocab_%d.txt",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!CHECK_NOT_NULL(f))
        return;
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", f);
    for (int i = 0; i < NAMES; i++)
        fprintf(f, "%s\n", names[i]);
    fclose(f);
    wf_nn_wordpiece *t = wf_nn_wordpiece_load(path);
    remove(path);
    if (!CHECK_NOT_NULL(t))
        return;
    int wrong = 0;
    for (int i = 0; i < NAMES; i++)
        wrong += wf_nn_wordpiece_token_id(t, names[i]) != 4 + i;
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(wf_nn_wordpiece_token_id(t, "layer.weight"), -1);
    wf_nn_wordpiece_free(t);
}

/* GGUF metadata with the crafted keys and many more: the duplicate check
 * of each entry read was a scan of every earlier key (a file of a few MB
 * could hold millions), now an index lookup. Written, read back, every key
 * found in file order; a repeated key is still refused. */
static void test_gguf_metadata_many_keys(void)
{
    enum { MORE = 20000 };
    wf_nn_gguf_meta *meta = wf_nn_gguf_meta_new();
    wf_nn_params *params = wf_nn_params_new();
    if (!CHECK_NOT_NULL(meta) || !CHECK_NOT_NULL(params))
        return;
    wf_array *one = wf_scalar(1.0, WF_DTYPE_F32);
    CHECK_OK(wf_nn_params_add(params, "w", one));
    for (int i = 0; i < NAMES; i++)
        CHECK_OK(wf_nn_gguf_meta_add_array(meta, names[i], one));
    char key[32];
    for (int i = 0; i < MORE; i++) {
        snprintf(key, sizeof key, "general.k%d", i);
        const char *value = key;
        CHECK_OK(wf_nn_gguf_meta_add_strings(meta, key, &value, 1, false));
    }
    CHECK(wf_nn_gguf_meta_add_array(meta, names[3], one) == WF_ERR_INVALID_ARGUMENT);
    const char *value = "x";
    CHECK(wf_nn_gguf_meta_add_strings(meta, "general.k7", &value, 1, false) ==
          WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    CHECK_EQ_INT((int64_t)wf_nn_gguf_meta_count(meta), NAMES + MORE);
    char path[256];
    snprintf(path, sizeof path, "%s/weft_hostile_meta_%d.gguf",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    CHECK_OK(wf_nn_save_gguf(params, meta, path));
    wf_nn_gguf_meta *back = NULL;
    wf_nn_params *loaded = wf_nn_load_gguf(path, &back);
    remove(path);
    if (CHECK_NOT_NULL(loaded) && CHECK_NOT_NULL(back)) {
        CHECK_EQ_INT((int64_t)wf_nn_gguf_meta_count(back), NAMES + MORE);
        int wrong = 0;
        for (size_t i = 0; i < wf_nn_gguf_meta_count(back); i++) {
            const char *want = key;
            if (i < NAMES)
                want = names[i];
            else
                snprintf(key, sizeof key, "general.k%d", (int)(i - NAMES));
            wrong += strcmp(wf_nn_gguf_meta_key(back, i), want) != 0;
        }
        CHECK_EQ_INT(wrong, 0);
    }
    wf_nn_gguf_meta_release(back);
    wf_nn_params_release(loaded);
    wf_release(one);
    wf_nn_gguf_meta_release(meta);
    wf_nn_params_release(params);
}

int main(void)
{
    craft_names();
    RUN_TEST(test_crafted_names_spread);
    RUN_TEST(test_keyed_hash_is_a_function_of_the_bytes);
    RUN_TEST(test_params_find_every_crafted_name);
    RUN_TEST(test_wordpiece_finds_every_crafted_token);
    RUN_TEST(test_gguf_metadata_many_keys);
    return TEST_SUMMARY();
}
