/*
 * A main() for the fuzz targets where libFuzzer is not there (GCC builds:
 * `make test` runs them in release, ASan and TSan). It runs every file of
 * the seed corpus, fuzz/corpus/<target>/ (which keeps every input that
 * once failed, as a regression test), then mutates them at random for
 * WEFT_FUZZ_SECONDS seconds (default 2; seed WEFT_FUZZ_SEED): byte flips,
 * random bytes, insertions, deletions, splices of two inputs. A failing
 * input aborts inside the target; with WEFT_FUZZ_SAVE=dir each mutated
 * input is written to dir/current first, so the last one can be kept.
 * Usage: fuzz_<target> [corpus dir] (default: the source tree's).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_INPUTS = 512, MAX_SIZE = 1 << 16 };

struct input {
    uint8_t *data;
    size_t size;
};

static struct input g_inputs[MAX_INPUTS];
static int g_ninputs;
static uint64_t g_rng;

static uint64_t next_random(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_corpus(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "standalone fuzz: cannot open corpus %s\n", dir);
        exit(1);
    }
    char *names[MAX_INPUTS];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_INPUTS;)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        free(names[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc(MAX_SIZE);
        size_t len = fread(buf, 1, MAX_SIZE, f);
        fclose(f);
        uint8_t *exact = realloc(buf, len ? len : 1); /* ASan sees reads past the end */
        g_inputs[g_ninputs++] = (struct input){exact ? exact : buf, len};
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A mutated copy of a random corpus input into out; returns its size. */
static size_t mutate(uint8_t *out)
{
    const struct input *a = &g_inputs[next_random() % (uint64_t)g_ninputs];
    size_t n = a->size;
    memcpy(out, a->data, n);
    for (int k = (int)(next_random() % 4) + 1; k > 0; k--) {
        size_t at = n ? next_random() % n : 0;
        switch (next_random() % 5) {
        case 0: /* flip a bit */
            if (n)
                out[at] ^= (uint8_t)(1u << (next_random() % 8));
            break;
        case 1: /* a random byte */
            if (n)
                out[at] = (uint8_t)next_random();
            break;
        case 2: /* insert random bytes */
            if (n + 8 <= MAX_SIZE) {
                memmove(out + at + 8, out + at, n - at);
                for (int i = 0; i < 8; i++)
                    out[at + i] = (uint8_t)next_random();
                n += 8;
            }
            break;
        case 3: /* delete */
            if (n) {
                size_t len = 1 + next_random() % (n - at);
                memmove(out + at, out + at + len, n - at - len);
                n -= len;
            }
            break;
        default: { /* splice the tail of another input */
            const struct input *b = &g_inputs[next_random() % (uint64_t)g_ninputs];
            size_t from = b->size ? next_random() % b->size : 0;
            size_t len = b->size - from;
            if (at + len > MAX_SIZE)
                len = MAX_SIZE - at;
            memcpy(out + at, b->data + from, len);
            n = at + len;
            break;
        }
        }
    }
    return n;
}

static void save_current(const char *dir, const uint8_t *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/current", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, size, f);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    load_corpus(argc > 1 ? argv[1] : WEFT_FUZZ_CORPUS);
    if (g_ninputs == 0) {
        fprintf(stderr, "standalone fuzz: empty corpus\n");
        return 1;
    }
    const char *env = getenv("WEFT_FUZZ_SECONDS");
    double seconds = env ? atof(env) : 2.0;
    env = getenv("WEFT_FUZZ_SEED");
    g_rng = env ? strtoull(env, NULL, 0) * 0x9E3779B97F4A7C15ULL + 1 : 0x1234567ULL;
    const char *save = getenv("WEFT_FUZZ_SAVE");
    double start = now();
    for (int i = 0; i < g_ninputs; i++)
        LLVMFuzzerTestOneInput(g_inputs[i].data, g_inputs[i].size);
    double replayed = now();
    static uint8_t buf[MAX_SIZE];
    long runs = 0;
    while (now() - replayed < seconds) {
        size_t n = mutate(buf);
        if (save)
            save_current(save, buf, n);
        /* a heap copy of the exact size, so ASan sees reads past the end */
        uint8_t *exact = malloc(n ? n : 1);
        memcpy(exact, buf, n);
        LLVMFuzzerTestOneInput(exact, n);
        free(exact);
        runs++;
    }
    double spent = now() - replayed;
    printf("%d corpus inputs in %.2f s; %ld mutated inputs in %.2f s (%.0f/s)\n", g_ninputs,
           replayed - start, runs, spent, spent > 0 ? (double)runs / spent : 0.0);
    for (int i = 0; i < g_ninputs; i++)
        free(g_inputs[i].data);
    return 0;
}
