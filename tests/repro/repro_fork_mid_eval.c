/*
 * fork() in the middle of concurrent evaluation (issue 8): what Python's
 * multiprocessing does to a library that embeds weft. Each round starts
 * threads whose evaluations (default stream, private streams, synchronous
 * and asynchronous), a compiled function's trace and an intra-op pool job
 * are held at a gate, plus threads reducing and using a slot freely, then
 * forks; the scenario is tests/fork_scenario.h.
 *
 * Exit 0: every round's child reported the fork error for each in-flight
 * array within its deadline and computed fresh work exactly, and the parent
 * finished everything right; 1: a child hung (killed at its deadline), died
 * or got a wrong answer, or the parent did, or a round missed its deadline;
 * 2: the gated work never reached the gate, so nothing was in flight.
 */
#include <stdlib.h>

#include "fork_scenario.h"
#include "repro_common.h"

enum { ROUNDS = 10, ROUND_SECONDS = 2 * FORK_CHILD_SECONDS };

static void *round_main(void *arg)
{
    *(int *)arg = fork_round();
    return NULL;
}

int main(void)
{
    for (int round = 0; round < ROUNDS; round++) {
        int outcome = FORK_FAIL;
        /* The round thread forks: the process has many threads by then. */
        if (!repro_run_with_deadline(round_main, &outcome, ROUND_SECONDS)) {
            fprintf(stderr, "repro_fork_mid_eval: round %d missed its deadline\n", round);
            return REPRO_FAIL;
        }
        if (outcome != FORK_PASS) {
            fprintf(stderr, "repro_fork_mid_eval: round %d: %s\n", round,
                    outcome == FORK_NOT_REACHED ? "the scenario was not reached" : "failed");
            return outcome == FORK_NOT_REACHED ? REPRO_NOT_REACHED : REPRO_FAIL;
        }
    }
    printf("repro_fork_mid_eval: %d rounds passed\n", ROUNDS);
    return REPRO_PASS;
}
