/*
 * tok_json.c - tokenizer.json pieces shared by the made tokenizers (tok_json.h).
 */
#include "hf/tok_json.h"

#include <string.h>

void wm_tokjson_replace(wm_json *j, const char *kind, const char *pattern, const char *content) {
    wm_json_obj(j, NULL);
    wm_json_str(j, "type", "Replace");
    wm_json_obj(j, "pattern");
    wm_json_str(j, kind, pattern);
    wm_json_obj_end(j);
    wm_json_str(j, "content", content);
    wm_json_obj_end(j);
}

/* bos, the sequence seq, eos as TemplateProcessing pieces */
static void template_seq(wm_json *j, const char *bos, const char *seq, const char *eos, int type_id) {
    for (int k = 0; k < 3; k++) {
        const char *sp = k == 0 ? bos : k == 2 ? eos : NULL;
        if (k != 1 && !sp) continue;
        wm_json_obj(j, NULL);
        wm_json_obj(j, k == 1 ? "Sequence" : "SpecialToken");
        wm_json_str(j, "id", k == 1 ? seq : sp);
        wm_json_int(j, "type_id", type_id);
        wm_json_obj_end(j);
        wm_json_obj_end(j);
    }
}

static void special(wm_json *j, const char *tok, int64_t id) {
    wm_json_obj(j, tok);
    wm_json_str(j, "id", tok);
    wm_json_arr(j, "ids");
    wm_json_int(j, NULL, id);
    wm_json_arr_end(j);
    wm_json_arr(j, "tokens");
    wm_json_str(j, NULL, tok);
    wm_json_arr_end(j);
    wm_json_obj_end(j);
}

void wm_tokjson_post(wm_json *j, const char *bos, int64_t bos_id, const char *eos, int64_t eos_id, int pair_type) {
    wm_json_obj(j, "post_processor");
    wm_json_str(j, "type", "TemplateProcessing");
    wm_json_arr(j, "single");
    template_seq(j, bos, "A", eos, 0);
    wm_json_arr_end(j);
    wm_json_arr(j, "pair");
    template_seq(j, bos, "A", eos, 0);
    template_seq(j, bos, "B", eos, pair_type);
    wm_json_arr_end(j);
    wm_json_obj(j, "special_tokens");
    if (bos) special(j, bos, bos_id);
    if (eos && (!bos || strcmp(eos, bos))) special(j, eos, eos_id);
    wm_json_obj_end(j);
    wm_json_obj_end(j);
}
