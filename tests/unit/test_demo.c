/* Runs the demo program (built beside the tests) with tiny settings: it
 * trains, serves from threads, saves weights and curves and exits 0; bad
 * flags give a message and a non-zero exit; --help describes the flags. */
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

static void test_tiny_run(void)
{
    char dir[] = "/tmp/weft-demo-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char log[4200], weights[4200], curves[4200];
    snprintf(log, sizeof log, "%s/stdout.txt", dir);
    snprintf(weights, sizeof weights, "%s/weights.safetensors", dir);
    snprintf(curves, sizeof curves, "%s/curves.svg", dir);
    char *args[] = {demo_path, "--steps", "6", "--threads", "2", "--dim", "16", "--layers", "1",
                    "--heads", "2", "--batch", "8", "--eval-every", "3", "--out", dir, NULL};
    CHECK_EQ_INT(run_demo(args, log), 0);
    char *out = slurp(log);
    CHECK(out != NULL);
    if (out) {
        CHECK_STR_CONTAINS(out, "held-out exact-match accuracy");
        CHECK_STR_CONTAINS(out, "compile cache");
        CHECK_STR_CONTAINS(out, "requests from");
    }
    free(out);
    struct stat st;
    CHECK(stat(weights, &st) == 0 && st.st_size > 8);
    CHECK(stat(curves, &st) == 0 && st.st_size > 100);
    unlink(log);
    unlink(weights);
    unlink(curves);
    rmdir(dir);
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
    return TEST_SUMMARY();
}
