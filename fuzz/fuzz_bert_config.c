/*
 * libFuzzer target: the BERT config.json reader of weft_nn.h
 * (wf_nn_bert_config_load, through wf__nn_bert_config_parse) on hostile
 * bytes, parsed where they lie (no NUL at the end: ASan sees a read past
 * the input). Checks: a refused file carries a status and a message and
 * leaves *out alone; an accepted one has every size in the documented
 * range (num_attention_heads dividing hidden_size, layer_norm_eps > 0).
 */
#define WEFT_FUZZ_NAME "fuzz_bert_config"
#include <math.h>
#include <string.h>

#include "loader_checks.h"
#include "nn/loaders.h"

static bool in_range(int64_t v, int64_t hi) { return v >= 1 && v <= hi; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wf_clear_error();
    wf_nn_bert_config c, untouched;
    memset(&c, 0xA5, sizeof c);
    untouched = c;
    const wf_status st = wf__nn_bert_config_parse((const char *)data, size, "fuzz config", &c);
    if (st != WF_OK) {
        if (st != wf_last_error())
            loader_fail("the status returned is not the one recorded");
        loader_check_failure();
        if (memcmp(&c, &untouched, sizeof c) != 0)
            loader_fail("a refused config wrote its output");
        return 0;
    }
    const int64_t limit = (int64_t)1 << 24;
    if (!in_range(c.vocab_size, limit) || !in_range(c.hidden_size, limit) ||
        !in_range(c.num_layers, 1024) || !in_range(c.num_heads, c.hidden_size) ||
        c.hidden_size % c.num_heads != 0 || !in_range(c.intermediate_size, limit) ||
        !in_range(c.max_positions, limit) || !in_range(c.type_vocab_size, limit) ||
        !(c.layer_norm_eps > 0) || !isfinite(c.layer_norm_eps))
        loader_fail("an accepted config has a size out of range");
    return 0;
}
