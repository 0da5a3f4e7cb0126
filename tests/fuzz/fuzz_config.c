/*
 * libFuzzer target for the checkpoint configuration parsers: arbitrary
 * bytes as config.json (then resolved into an architecture and a default
 * recipe, as inspect does without weights), generation_config.json,
 * tokenizer_config.json and a build recipe (text and image models). Everything must fail cleanly
 * or succeed; resolved sizes must be positive.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch.h"
#include "builder/recipe.h"
#include "hf/config.h"

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
                           (a.graph == WM_GRAPH_VIT ? a.n_patch > 0 && a.n_pos > a.n_patch : a.V > 0);
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
    if (!wm_recipe_parse(t, size, NULL, &r, &err)) wm_recipe_free(&r);
    return 0;
}
