/*
 * libFuzzer target for the checkpoint configuration parsers: arbitrary
 * bytes as config.json (then resolved into an architecture and a default
 * recipe, as inspect does without weights; text, image and speech models), generation_config.json,
 * tokenizer_config.json and a build recipe (ours or the reference's; text
 * and image models; checked as an encoder-decoder part recipe against a tiny marian too). Everything must fail cleanly or succeed; resolved sizes
 * must be positive; a parsed recipe's quant section gives the quantizer a
 * config, and our JSON of the recipe parses again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch.h"
#include "builder/recipe.h"
#include "core/json.h"
#include "hf/config.h"
#include "opt/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *t = (const char *)data;
    wm_error err = {0};
    wm_hf_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (!wm_hf_config_parse(t, size, "config.json", &ck.config, &err)) {
        wm_arch a;
        if (!wm_arch_resolve(&ck, NULL, -1, &a, &err)) {
            int ok = a.graph == WM_GRAPH_RESNET ? a.H > 0 && a.n_stages > 0 && a.image > 0
                     : a.graph == WM_GRAPH_DUAL ? a.tower[0] && a.tower[1] && a.proj > 0
                     : a.H > 0 && a.L > 0 && a.hd > 0 && !(a.nh % a.kvh) &&
                           (a.graph == WM_GRAPH_VIT     ? a.n_patch > 0 && a.n_pos > a.n_patch
                            : a.graph == WM_GRAPH_AUDIO ? a.n_conv > 0 && a.pos_k > 0 && (a.task != WM_TASK_ASR || a.V > 0)
                                                        : a.V > 0);
            /* a mixture of experts: at least one expert, top-k within them, a sparse flag per layer */
            if (a.moe_layer && !(a.n_experts > 0 && a.top_k > 0 && a.top_k <= a.n_experts && a.moe_I > 0 &&
                                 a.n_moe_layers <= a.L))
                ok = 0;
            if (!ok) abort();
            wm_recipe r;
            if (a.L <= 256 && !wm_recipe_default(&a, WM_PREC_INT4, "cpu", "cpu", &r, &err)) {
                if (wm_recipe_check(&r, &a, "recipe", &err)) abort(); /* our own defaults must pass our checks */
                wm_recipe_free(&r);
            }
            wm_arch_free(&a);
        }
        wm_hf_config_free(&ck.config);
    }
    wm_hf_gen_config g;
    if (!wm_hf_gen_config_parse(t, size, NULL, &g, &err)) wm_hf_gen_config_free(&g);
    wm_hf_tok_config k;
    if (!wm_hf_tok_config_parse(t, size, NULL, &k, &err)) wm_hf_tok_config_free(&k);
    wm_recipe r;
    wm_error re = {0};
    if (!wm_recipe_parse(t, size, NULL, &r, &re)) {
        /* what build and config -c do with a parsed recipe; our own JSON of it must parse again */
        wm_error e2 = {0};
        (void)wm_recipe_supported(&r, "recipe", &e2);
        /* an encoder-decoder part recipe against a tiny marian (2 decoder layers of 2 heads of 16) */
        static const char marian[] = "{\"model_type\": \"marian\", \"vocab_size\": 64, \"d_model\": 32, "
                                     "\"encoder_layers\": 1, \"decoder_layers\": 2, \"encoder_attention_heads\": 2, "
                                     "\"decoder_attention_heads\": 2, \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8, "
                                     "\"max_position_embeddings\": 64}";
        wm_hf_checkpoint mk;
        memset(&mk, 0, sizeof mk);
        if (!wm_hf_config_parse(marian, sizeof marian - 1, "config.json", &mk.config, &e2)) {
            wm_arch ma;
            if (!wm_arch_resolve(&mk, NULL, -1, &ma, &e2)) {
                if (!wm_recipe_s2s_part(&r, &ma, "recipe", &e2) && !ma.s2s_part) abort(); /* a part when it passes */
                wm_arch_free(&ma);
            }
            wm_hf_config_free(&mk.config);
        }
        wm_quant_config qc;
        if (r.has_quant && wm_recipe_quant_config(&r, &qc, &e2)) abort();
        wm_json j;
        wm_json_init(&j);
        wm_recipe_json(&r, &j);
        wm_recipe_kept_json(&r, &j, "kept");
        wm_recipe r2;
        wm_error e3 = {0};
        if (!j.oom) {
            wm_json_free(&j);
            wm_json_init(&j);
            wm_recipe_json(&r, &j);
            if (!j.oom && wm_recipe_parse(wm_json_text(&j), strlen(wm_json_text(&j)), "again", &r2, &e3)) abort();
            if (!j.oom) wm_recipe_free(&r2);
        }
        wm_json_free(&j);
        wm_recipe_free(&r);
    }
    return 0;
}
