/*
 * s2s_settings.c - the generation settings of an encoder-decoder build (seq2seq.h): transformers' defaults, and
 * generation_config.json / config.json read over them with every field checked.
 */
#include "llm/seq2seq.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"

void wm_s2s_gen_default(wm_s2s_gen *g) {
    memset(g, 0, sizeof *g);
    g->max_length = 20;
    g->num_beams = 1;
    g->length_penalty = 1.0;
    g->top_p = 1.0;
    g->decoder_start_token_id = g->forced_bos_token_id = g->forced_eos_token_id = g->pad_token_id = -1;
    g->lang_slot = -1;
    g->no_timestamps = g->ts_begin = g->max_initial_ts = -1;
}

/* ---------------------------------------------------------------- settings */

wm_status wm_s2s_json_int(const cJSON *root, const char *file, const char *key, int64_t lo, int64_t *out, int *set,
                          wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *set = 0;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > 1e9)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an integer from %lld to 1000000000", file, key,
                      (long long)lo);
    *out = (int64_t)v->valuedouble;
    *set = 1;
    return WM_OK;
}

/* A list of token ids (or null) at key into out[cap]; *n its length. */
static wm_status id_list(const cJSON *r, const char *file, const char *key, int64_t *out, size_t cap, size_t *n,
                         wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, key), *it;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsArray(v) || (size_t)cJSON_GetArraySize(v) > cap)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a list of at most %zu token ids", file, key, cap);
    size_t k = 0;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble > 1e9)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': entry %zu is not a token id", file, key, k);
        out[k++] = (int64_t)it->valuedouble;
    }
    *n = k;
    return WM_OK;
}

/* The keys of one file over g (only those present). */
static wm_status read_keys(const cJSON *r, const char *file, wm_s2s_gen *g, wm_error *err) {
    int set;
    int64_t v;
    wm_status s;
    if ((s = wm_s2s_json_int(r, file, "max_length", 1, &g->max_length, &set, err))) return s;
    if ((s = wm_s2s_json_int(r, file, "num_beams", 1, &v, &set, err))) return s;
    if (set) g->num_beams = (int)(v > 64 ? 65 : v); /* refused by generate with its range */
    if ((s = wm_s2s_json_int(r, file, "no_repeat_ngram_size", 0, &g->no_repeat_ngram_size, &set, err)) ||
        (s = wm_s2s_json_int(r, file, "decoder_start_token_id", 0, &g->decoder_start_token_id, &set, err)) ||
        (s = wm_s2s_json_int(r, file, "forced_bos_token_id", 0, &g->forced_bos_token_id, &set, err)) ||
        (s = wm_s2s_json_int(r, file, "forced_eos_token_id", 0, &g->forced_eos_token_id, &set, err)) ||
        (s = wm_s2s_json_int(r, file, "pad_token_id", 0, &g->pad_token_id, &set, err)))
        return s;
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(r, "length_penalty");
    if (lp && !cJSON_IsNull(lp)) {
        if (!cJSON_IsNumber(lp) || !isfinite(lp->valuedouble) || fabs(lp->valuedouble) > 100)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'length_penalty': expected a number from -100 to 100", file);
        g->length_penalty = lp->valuedouble;
    }
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(r, "early_stopping");
    if (es && !cJSON_IsNull(es)) {
        if (cJSON_IsBool(es)) g->early_stopping = cJSON_IsTrue(es);
        else if (cJSON_IsString(es) && !strcmp(es->valuestring, "never")) g->early_stopping = 2;
        else return wm_err(err, WM_ERR_INPUT, "%s: field 'early_stopping': expected true, false or \"never\"", file);
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "eos_token_id");
    if (e && !cJSON_IsNull(e)) {
        const cJSON *it = cJSON_IsArray(e) ? e->child : e;
        size_t n = 0;
        for (; it; it = cJSON_IsArray(e) ? it->next : NULL) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
                it->valuedouble > 1e9 || n == WM_S2S_MAX_EOS)
                return wm_err(err, WM_ERR_INPUT, "%s: field 'eos_token_id': expected a token id or a list of at most "
                              "%d", file, WM_S2S_MAX_EOS);
            g->eos[n++] = (int64_t)it->valuedouble;
        }
        g->n_eos = n;
    }
    wm_status s2 = id_list(r, file, "suppress_tokens", g->suppress, WM_S2S_MAX_SUPPRESS, &g->n_suppress, err);
    if (!s2) s2 = id_list(r, file, "begin_suppress_tokens", g->begin_suppress, WM_S2S_MAX_SUPPRESS,
                          &g->n_begin_suppress, err);
    return s2;
}

wm_status wm_s2s_gen_from_folder(const char *dir, wm_s2s_gen *g, wm_error *err) {
    /* config.json first, generation_config.json over it (what transformers' GenerationConfig.from_model_config
       and the saved generation config give) */
    static const char *const files[2] = {"config.json", "generation_config.json"};
    for (int f = 0; f < 2; f++) {
        char p[4200];
        int present, k = snprintf(p, sizeof p, "%s/%s", dir, files[f]);
        if (k < 0 || (size_t)k >= sizeof p) return wm_err(err, WM_ERR_INPUT, "%s: path too long", dir);
        wm_status s = wm_input_present(p, &present, err);
        if (s) return s;
        if (!present) continue;
        cJSON *root = NULL;
        if ((s = wm_hf_json_load(p, WM_HF_CONFIG_MAX_BYTES, &root, err))) return s;
        s = read_keys(root, p, g, err);
        cJSON_Delete(root);
        if (s) return s;
    }
    return WM_OK;
}
