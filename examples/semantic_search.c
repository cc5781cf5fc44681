/*
 * semantic_search: ranks a small corpus for a few queries with the
 * pretrained sentence-embedding model all-MiniLM-L6-v2, served by
 * embed_server.h. The corpus is embedded in one call (its sentences share
 * batched forward passes); each query is embedded, and the corpus ranked by
 * cosine similarity (a dot product: embeddings are unit length). Every query
 * paraphrases one corpus sentence with different words; the program checks
 * that sentence ranks first and exits non-zero otherwise.
 *
 * Needs the model (see embed_find_model); without it, says how to install
 * it and exits 0.
 */
#include "embed_server.h"

static const char *const corpus[] = {
    "A man is eating a piece of bread.",
    "The new movie is awesome and the actors were great.",
    "A cheetah is running behind its prey on the savanna.",
    "The central bank raised interest rates by half a point.",
    "Two kids are playing football in the park.",
    "She is learning to play the violin.",
    "Heavy rain and strong winds are expected tomorrow.",
    "The patient was prescribed antibiotics for the infection.",
    "Python is a popular programming language for data science.",
    "The astronauts docked with the space station.",
    "Fresh vegetables are sold at the farmers market every Saturday.",
    "The train to Berlin was delayed by two hours.",
};
enum { NCORPUS = sizeof corpus / sizeof corpus[0] };

static const struct {
    const char *text;
    int expected; /* index in corpus of the sentence it paraphrases */
} queries[] = {
    {"Someone is having food.", 0},
    {"A wild animal chases another animal.", 2},
    {"Monetary policy got tighter.", 3},
    {"What will the weather be like?", 6},
    {"Which language do people use for machine learning?", 8},
    {"My railway journey started late.", 11},
};
/* Sanitizer builds ask fewer queries. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { NQUERIES = 2 };
#else
enum { NQUERIES = sizeof queries / sizeof queries[0] };
#endif

static char source_root[PATH_MAX];

int main(void)
{
    snprintf(source_root, sizeof source_root, "%s", __FILE__);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(source_root, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(source_root, sizeof source_root, ".");
    }
    char model_dir[PATH_MAX];
    if (!embed_find_model(source_root, model_dir, sizeof model_dir)) {
        printf("semantic_search: skipped: ");
        embed_print_install_hint(stdout);
        return 0;
    }
    embed_server *server = embed_server_start(model_dir, WF_DTYPE_F32, 16);
    if (!server)
        return 1;
    int64_t hidden = server->hidden;
    float *corpus_vectors = malloc(NCORPUS * (size_t)hidden * sizeof(float));
    float *query_vector = malloc((size_t)hidden * sizeof(float));
    int wrong = 0;
    if (embed_server_embed_many(server, corpus, NCORPUS, corpus_vectors) != WF_OK) {
        fprintf(stderr, "semantic_search: %s\n", wf_last_error_message());
        wrong = -1;
    }
    for (int q = 0; q < NQUERIES && wrong >= 0; q++) {
        if (embed_server_embed(server, queries[q].text, query_vector) != WF_OK) {
            wrong = -1;
            break;
        }
        int order[NCORPUS];
        double score[NCORPUS];
        for (int i = 0; i < NCORPUS; i++) {
            order[i] = i;
            score[i] = embed_dot(query_vector, corpus_vectors + (size_t)i * (size_t)hidden, hidden);
        }
        for (int i = 1; i < NCORPUS; i++) /* insertion sort, best first */
            for (int j = i; j > 0 && score[order[j]] > score[order[j - 1]]; j--) {
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        printf("query: %s\n", queries[q].text);
        for (int r = 0; r < 3; r++)
            printf("  %d. %.3f  %s\n", r + 1, score[order[r]], corpus[order[r]]);
        if (order[0] != queries[q].expected) {
            printf("  expected first: %s\n", corpus[queries[q].expected]);
            wrong++;
        }
    }
    embed_server_stop(server);
    free(corpus_vectors);
    free(query_vector);
    if (wrong != 0) {
        printf("semantic_search: FAILED (%d)\n", wrong);
        return 1;
    }
    printf("semantic_search: every query found the sentence it paraphrases\n");
    return 0;
}
