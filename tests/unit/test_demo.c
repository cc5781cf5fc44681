/* Runs the demo program (built beside the tests) with tiny settings: it
 * trains, serves from threads (every one answers, none fails), saves
 * weights weft loads back and curves, and exits 0; a fixed seed trains the
 * same weights with or without server threads; bad flags give a message and
 * a non-zero exit; --help describes the flags. */
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"
#include "weft_nn.h"

extern char **environ;

static char demo_path[4096];

static int run_demo(char *const *args, const char *out_file)
{
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (out_file) {
        posix_spawn_file_actions_addopen(&actions, 1, out_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, demo_path, &actions, NULL, args, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
        return -1;
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* A tiny run's output directory and files. */
struct run_files {
    char dir[64], log[128], weights[128], curves[128];
};

/* Corpus sentences the tiny run embeds with the pretrained model (its part
 * two); the sanitizer builds leave it to the examples' shorter runs. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRETRAINED "0"
#else
#define PRETRAINED "16"
#endif

/* Runs the demo at tiny settings with `threads` servers, `seed`, and
 * `pretrained` corpus sentences for the pretrained model. */
static int run_tiny(struct run_files *f, const char *threads, const char *seed,
                    const char *pretrained)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/weft-demo-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->log, sizeof f->log, "%s/stdout.txt", f->dir);
    snprintf(f->weights, sizeof f->weights, "%s/weights.safetensors", f->dir);
    snprintf(f->curves, sizeof f->curves, "%s/curves.svg", f->dir);
    char *args[] = {demo_path,
                    "--steps", "6",
                    "--threads", (char *)threads,
                    "--dim", "16",
                    "--layers", "1",
                    "--heads", "2",
                    "--batch", "8",
                    "--eval-every", "3",
                    "--seed", (char *)seed,
                    "--request-pause", "1",
                    "--out", f->dir,
                    "--pretrained", (char *)pretrained,
                    NULL};
    return run_demo(args, f->log);
}

static void remove_run(const struct run_files *f)
{
    unlink(f->log);
    unlink(f->weights);
    unlink(f->curves);
    rmdir(f->dir);
}

/* The weights are the demo's named parameters, in its layout. */
static void check_weights(const char *path)
{
    wf_nn_params *p = wf_nn_load_safetensors(path);
    if (!CHECK_NOT_NULL(p))
        return;
    CHECK_EQ_SIZE(wf_nn_params_count(p), 2 + 8 + 2); /* embeddings, one block, output */
    long tok = wf_nn_params_find(p, "tok_emb"), w1 = wf_nn_params_find(p, "block0.w1");
    if (CHECK(tok >= 0 && w1 >= 0)) {
        wf_array *t = wf_nn_params_get(p, (size_t)tok), *w = wf_nn_params_get(p, (size_t)w1);
        CHECK_EQ_INT(wf_array_dtype(t), WF_DTYPE_F32);
        CHECK_EQ_INT(wf_array_dim(t, 0), 12); /* digits, '+', '=' */
        CHECK_EQ_INT(wf_array_dim(t, 1), 16);
        CHECK_EQ_INT(wf_array_dim(w, 1), 64);
    }
    wf_nn_params_release(p);
}

static void test_tiny_run(void)
{
    struct run_files f;
    CHECK_EQ_INT(run_tiny(&f, "2", "1", PRETRAINED), 0);
    char *out = slurp(f.log);
    if (CHECK(out != NULL)) {
        CHECK_STR_CONTAINS(out, "held-out exact-match accuracy");
        CHECK_STR_CONTAINS(out, "compile cache");
        CHECK_STR_CONTAINS(out, "peak memory");
        /* Two servers alive at a time, each answers at least one request. */
        const char *line = strstr(out, "servers: ");
        long served = -1, failed = -1, threads = -1;
        if (CHECK(line != NULL))
            CHECK_EQ_INT(sscanf(line, "servers: %ld requests answered (%ld failed) by %ld",
                                &served, &failed, &threads),
                         3);
        CHECK_EQ_INT(failed, 0);
        CHECK(threads >= 2);
        CHECK(served >= threads);
        /* Part two: the pretrained model embeds the corpus and answers queries
         * (or says it is not installed: test_bert fails then). */
        if (strcmp(PRETRAINED, "0") != 0 && !strstr(out, "pretrained model: skipped")) {
            CHECK_STR_CONTAINS(out, "embedded " PRETRAINED " sentences");
            CHECK_STR_CONTAINS(out, "query: Who fixed a boat?");
        }
    }
    free(out);
    struct stat st;
    CHECK(stat(f.curves, &st) == 0 && st.st_size > 100);
    check_weights(f.weights);
    remove_run(&f);
}

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* Servers read the published weights and never touch training: the same
 * seed gives the same weights, byte for byte, with 0 or 3 servers. */
static void test_training_is_deterministic(void)
{
    struct run_files alone, served, other_seed;
    CHECK_EQ_INT(run_tiny(&alone, "0", "5", "0"), 0);
    CHECK_EQ_INT(run_tiny(&served, "3", "5", "0"), 0);
    CHECK_EQ_INT(run_tiny(&other_seed, "0", "6", "0"), 0);
    CHECK(same_file(alone.weights, served.weights));
    CHECK(!same_file(alone.weights, other_seed.weights));
    remove_run(&alone);
    remove_run(&served);
    remove_run(&other_seed);
}

static void test_flags(void)
{
    char *help[] = {demo_path, "--help", NULL};
    CHECK_EQ_INT(run_demo(help, "/dev/null"), 0);
    char *bad[] = {demo_path, "--steps", "zero", NULL};
    CHECK_EQ_INT(run_demo(bad, "/dev/null"), 2);
    char *unknown[] = {demo_path, "--frobnicate", "1", NULL};
    CHECK_EQ_INT(run_demo(unknown, "/dev/null"), 2);
    char *heads[] = {demo_path, "--dim", "10", "--heads", "3", NULL};
    CHECK_EQ_INT(run_demo(heads, "/dev/null"), 2);
    char *layers[] = {demo_path, "--layers", "8", NULL}; /* more than a compiled fn returns */
    CHECK_EQ_INT(run_demo(layers, "/dev/null"), 2);
    char *pause[] = {demo_path, "--request-pause", "-1", NULL};
    CHECK_EQ_INT(run_demo(pause, "/dev/null"), 2);
    char *pretrained[] = {demo_path, "--pretrained", "-3", NULL};
    CHECK_EQ_INT(run_demo(pretrained, "/dev/null"), 2);
    char *missing[] = {demo_path, "--steps", NULL};
    CHECK_EQ_INT(run_demo(missing, "/dev/null"), 2);
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(demo_path, sizeof demo_path, "%s/demo", dirname(self));
    if (access(demo_path, X_OK) != 0) {
        fprintf(stderr, "test_demo: %s was not built\n", demo_path);
        return 1;
    }
    RUN_TEST(test_flags);
    RUN_TEST(test_tiny_run);
    RUN_TEST(test_training_is_deterministic);
    return TEST_SUMMARY();
}
