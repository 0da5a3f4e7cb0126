/*
 * sbert.c - sentence-transformers' modules.json, sentence_bert_config.json
 * and Pooling config (see sbert.h).
 */
#include "hf/sbert.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "hf/config.h"

static const char *const MODE_KEYS[WM_SBERT_N_MODES] = {
    "pooling_mode_cls_token",          "pooling_mode_max_tokens",          "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};

const char *wm_sbert_mode_key(int i) { return i >= 0 && i < WM_SBERT_N_MODES ? MODE_KEYS[i] : NULL; }

/* obj's member key (NULL when absent); a key listed twice is ambiguous. */
static wm_status member(const cJSON *obj, const char *key, const char *file, const cJSON **out, wm_error *err) {
    *out = NULL;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj) {
        if (!c->string || strcmp(c->string, key)) continue;
        if (*out) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': listed twice (ambiguous)", file, key);
        *out = c;
    }
    return WM_OK;
}

/* A boolean field: absent or null leaves *v as it is. */
static wm_status get_bool(const cJSON *obj, const char *key, const char *file, int *v, wm_error *err) {
    const cJSON *c;
    wm_status s = member(obj, key, file, &c, err);
    if (s || !c || cJSON_IsNull(c)) return s;
    if (!cJSON_IsBool(c)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': not true or false", file, key);
    *v = cJSON_IsTrue(c);
    return WM_OK;
}

/* An integer field in [lo, hi]: absent or null leaves *v as it is. */
static wm_status get_int(const cJSON *obj, const char *key, const char *file, int64_t lo, int64_t hi, int64_t *v,
                         wm_error *err) {
    const cJSON *c;
    wm_status s = member(obj, key, file, &c, err);
    if (s || !c || cJSON_IsNull(c)) return s;
    double d = cJSON_IsNumber(c) ? c->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': must be an integer in [%lld, %lld]", file, key,
                      (long long)lo, (long long)hi);
    *v = (int64_t)d;
    return WM_OK;
}

/* Loads dir/name when it exists: *root NULL when it does not. */
static wm_status load_opt(const char *dir, const char *name, int object, char *path, size_t n, cJSON **root,
                          wm_error *err) {
    *root = NULL;
    snprintf(path, n, "%s/%s", dir, name);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return WM_OK;
        return wm_err(err, WM_ERR_IO, "%s: %s", path, strerror(errno));
    }
    return object ? wm_hf_json_load(path, WM_SBERT_MAX_BYTES, root, err)
                  : wm_hf_json_load_value(path, WM_SBERT_MAX_BYTES, root, err);
}

/* The module's class ("Pooling") when type is "sentence_transformers.[...].Class", else NULL. */
static const char *st_class(const char *type) {
    static const char prefix[] = "sentence_transformers.";
    if (strncmp(type, prefix, sizeof prefix - 1)) return NULL;
    const char *dot = strrchr(type, '.');
    return dot + 1;
}

/* One plain folder name: [A-Za-z0-9_.-], not empty, no leading dot (so neither ".." nor a hidden name). */
static int plain_name(const char *s) {
    size_t n = strlen(s);
    if (!n || n >= WM_SBERT_PATH_MAX || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return 0;
    }
    return 1;
}

static wm_status modules(const char *dir, wm_sbert *o, wm_error *err) {
    char path[4200];
    cJSON *root;
    wm_status s = load_opt(dir, "modules.json", 0, path, sizeof path, &root, err);
    if (s || !root) return s;
    o->has_modules = 1;
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return wm_err(err, WM_ERR_INPUT, "%s: the top level is not a JSON array of modules", path);
    }
    int i = 0, stage = 0; /* 0: before the Transformer, 1: after it, 2: after the Pooling, 3: after Normalize */
    const cJSON *m;
    cJSON_ArrayForEach(m, root) {
        const cJSON *type = NULL, *mp = NULL;
        if (!cJSON_IsObject(m)) {
            s = wm_err(err, WM_ERR_INPUT, "%s: module %d: not an object", path, i);
            break;
        }
        if ((s = member(m, "type", path, &type, err)) || (s = member(m, "path", path, &mp, err))) break;
        if (!cJSON_IsString(type) || !cJSON_IsString(mp)) {
            s = wm_err(err, WM_ERR_INPUT, "%s: module %d: fields 'type' and 'path' must be strings", path, i);
            break;
        }
        const char *cls = st_class(type->valuestring), *p = mp->valuestring;
        const char *want = stage == 0 ? "Transformer" : stage == 1 ? "Pooling" : stage == 2 ? "Normalize" : NULL;
        if (!cls || !want || strcmp(cls, want)) {
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: module %d ('%.200s', path '%.100s'): winml runs the "
                       "sentence-transformers pipeline Transformer, Pooling[, Normalize] only; this module would "
                       "change the embedding", path, i, type->valuestring, p);
            break;
        }
        if (stage == 0 && p[0]) {
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: module %d: the Transformer lives in folder '%.100s'; winml "
                       "reads the model from the checkpoint's own folder (path \"\")", path, i, p);
            break;
        }
        if (stage == 1) {
            if (!plain_name(p)) {
                s = wm_err(err, WM_ERR_INPUT, "%s: module %d: path '%.100s' is not a plain folder name inside the "
                           "model's folder", path, i, p);
                break;
            }
            snprintf(o->pooling_dir, sizeof o->pooling_dir, "%s", p);
        }
        if (stage == 2) o->normalize = 1;
        stage++, i++;
    }
    cJSON_Delete(root);
    if (!s && stage < 2)
        s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: no %s module: its output would be token embeddings, not one "
                   "vector per text", path, stage == 0 ? "Transformer" : "Pooling");
    return s;
}

static wm_status pooling(const char *dir, wm_sbert *o, wm_error *err) {
    char sub[4200], path[4300];
    snprintf(sub, sizeof sub, "%s/%s", dir, o->pooling_dir);
    cJSON *root;
    wm_status s = load_opt(sub, "config.json", 1, path, sizeof path, &root, err);
    if (s) return s;
    if (!root) return wm_err(err, WM_ERR_INPUT, "%s: missing (modules.json lists the Pooling module there)", path);
    for (int i = 0; i < WM_SBERT_N_MODES && !s; i++) {
        int on = 0;
        s = get_bool(root, MODE_KEYS[i], path, &on, err);
        if (on) o->modes |= 1u << i;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, root) { /* a pooling this winml does not know, switched on: refused by name */
        int known = 0;
        for (int i = 0; i < WM_SBERT_N_MODES; i++) known |= c->string && !strcmp(c->string, MODE_KEYS[i]);
        if (!s && !known && c->string && !strncmp(c->string, "pooling_mode", 12) && !cJSON_IsFalse(c) &&
            !cJSON_IsNull(c))
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%.100s': a pooling winml does not run", path, c->string);
    }
    int include_prompt = 1;
    if (!s) s = get_bool(root, "include_prompt", path, &include_prompt, err);
    if (!s) s = get_int(root, "word_embedding_dimension", path, 1, 1 << 20, &o->dim, err);
    if (!s && !o->modes)
        s = wm_err(err, WM_ERR_INPUT, "%s: no pooling_mode_* field is true: the Pooling module pools nothing", path);
    cJSON_Delete(root);
    return s;
}

static wm_status st_config(const char *dir, wm_sbert *o, wm_error *err) {
    char path[4200];
    cJSON *root;
    wm_status s = load_opt(dir, "sentence_bert_config.json", 1, path, sizeof path, &root, err);
    if (s || !root) return s;
    o->has_config = 1;
    s = get_int(root, "max_seq_length", path, 1, 1 << 20, &o->max_seq_length, err);
    if (!s) s = get_bool(root, "do_lower_case", path, &o->do_lower_case, err);
    cJSON_Delete(root);
    return s;
}

wm_status wm_sbert_load(const char *dir, wm_sbert *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    wm_status s = st_config(dir, out, err);
    if (!s) s = modules(dir, out, err);
    if (!s && out->pooling_dir[0]) s = pooling(dir, out, err);
    return s;
}

wm_status wm_sbert_check_length(const wm_sbert *sb, const char *dir, int64_t max_positions, wm_error *err) {
    if (max_positions <= 0 || sb->max_seq_length <= max_positions) return WM_OK;
    return wm_err(err, WM_ERR_INPUT, "%s/sentence_bert_config.json: field 'max_seq_length': %lld tokens, but the "
                  "model has %lld positions (config.json max_position_embeddings)", dir, (long long)sb->max_seq_length,
                  (long long)max_positions);
}
