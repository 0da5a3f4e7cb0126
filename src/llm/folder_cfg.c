/*
 * folder_cfg.c - end ids and context length from the configs beside a causal LM (folder_cfg.h).
 */
#include "llm/folder_cfg.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/file.h"
#include "hf/config.h"

/* folder/name into p; WM_ERR_INPUT when the path does not fit */
static wm_status join(char *p, size_t cap, const char *folder, const char *name, wm_error *err) {
    int k = snprintf(p, cap, "%s/%s", folder, name);
    if (k < 0 || (size_t)k >= cap) return wm_err(err, WM_ERR_INPUT, "%s: path too long", folder);
    return WM_OK;
}

wm_status wm_llm_folder_eos(const char *folder, int32_t *ids, size_t cap, size_t *n, wm_error *err) {
    const char *files[] = {"generation_config.json", "config.json"};
    *n = 0;
    for (int f = 0; f < 2; f++) {
        char p[4200];
        int present;
        wm_status st = join(p, sizeof p, folder, files[f], err);
        if (!st) st = wm_input_present(p, &present, err);
        if (st) return st;
        if (!present) continue;
        if (f == 0) {
            wm_hf_gen_config g = {0};
            wm_map mp = {0};
            if ((st = wm_map_file(p, 0, &mp, err))) return st;
            st = wm_hf_gen_config_parse(mp.data ? (const char *)mp.data : "", mp.size, p, &g, err);
            wm_unmap(&mp);
            if (st) return st;
            for (size_t i = 0; i < g.eos.n && *n < cap; i++) ids[(*n)++] = (int32_t)g.eos.v[i];
            wm_hf_gen_config_free(&g);
        } else {
            wm_hf_config c = {0};
            if ((st = wm_hf_config_load(p, &c, err))) return st;
            for (size_t i = 0; i < c.eos.n && *n < cap; i++) ids[(*n)++] = (int32_t)c.eos.v[i];
            wm_hf_config_free(&c);
        }
        if (*n) return WM_OK;
    }
    return WM_OK;
}

wm_status wm_llm_folder_context(const char *folder, size_t *n, const char **src, wm_error *err) {
    char p[4200];
    int present;
    *n = 0, *src = NULL;
    wm_status st = join(p, sizeof p, folder, "genai_config.json", err);
    if (!st) st = wm_input_present(p, &present, err);
    if (st) return st;
    if (present) {
        cJSON *root = NULL;
        if ((st = wm_hf_json_load(p, WM_HF_CONFIG_MAX_BYTES, &root, err))) return st;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "context_length");
        if (c && !(cJSON_IsNumber(c) && c->valuedouble >= 1 && c->valuedouble <= INT32_MAX &&
                   c->valuedouble == (double)(int64_t)c->valuedouble))
            st = wm_err(err, WM_ERR_INPUT, "%s: model.context_length must be a whole number from 1 to %d", p,
                        INT32_MAX);
        else if (c)
            *n = (size_t)c->valuedouble, *src = "context_length in genai_config.json";
        cJSON_Delete(root);
        if (st || *n) return st;
    }
    if ((st = join(p, sizeof p, folder, "config.json", err)) || (st = wm_input_present(p, &present, err)))
        return st;
    if (!present) return WM_OK;
    wm_hf_config c = {0};
    if ((st = wm_hf_config_load(p, &c, err))) return st;
    if (c.max_positions > 0) {
        *n = (size_t)c.max_positions;
        *src = !c.key_positions                           ? "config.json"
               : strcmp(c.key_positions, "n_positions") ? "max_position_embeddings in config.json"
                                                          : "n_positions in config.json";
    }
    wm_hf_config_free(&c);
    return WM_OK;
}
