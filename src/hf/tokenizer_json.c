/*
 * tokenizer_json.c - tokenizer.json loading: a nesting-depth pre-scan
 * before cJSON sees the text, typed field helpers with one-line errors,
 * the top-level object (version, truncation, padding, added_tokens and the
 * components), and the tokenizer's lifetime.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "hf/tokenizer_impl.h"

#define WM_TOK_MAX_FILE (2ull << 30)

/*
 * Checks what cJSON would mishandle or what could exhaust the stack: nesting
 * deeper than WM_TOK_MAX_JSON_DEPTH, raw control bytes in strings, and the
 * \u0000 escape (cJSON keeps strings NUL-terminated and would cut them).
 */
static wm_status json_prescan(const char *s, size_t n, const char *name, wm_error *err) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (in_str) {
            if (c == '\\') {
                if (i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
                    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: byte %zu: \\u0000 in a string is not supported", name, i);
                i++;
            } else if (c == '"')
                in_str = 0;
            else if (c < 0x20)
                return wm_err(err, WM_ERR_INPUT, "%s: byte %zu: control character inside a string", name, i);
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') {
            if (++depth > WM_TOK_MAX_JSON_DEPTH)
                return wm_err(err, WM_ERR_INPUT, "%s: byte %zu: JSON nested deeper than %d levels", name, i,
                              WM_TOK_MAX_JSON_DEPTH);
        } else if (c == ']' || c == '}')
            depth--;
        else if (c == 0)
            return wm_err(err, WM_ERR_INPUT, "%s: byte %zu: NUL byte", name, i);
    }
    return WM_OK;
}

const char *wm_tjson_type(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

wm_status wm_tjson_str(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, int required,
                       const char **out, size_t *len, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (len) *len = 0;
    if (!v || cJSON_IsNull(v)) {
        if (required) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: missing", t->name, path, key);
        return WM_OK;
    }
    if (!cJSON_IsString(v)) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected a string", t->name, path, key);
    size_t n = strlen(v->valuestring);
    if (!wm_u8_valid(v->valuestring, n))
        return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: not valid UTF-8", t->name, path, key);
    char *c = wm_arena_strndup(&t->arena, v->valuestring, n);
    if (!c) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", t->name);
    *out = c;
    if (len) *len = n;
    return WM_OK;
}

wm_status wm_tjson_bool(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, int def, int *out,
                        wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsBool(v)) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected true or false", t->name, path, key);
    *out = cJSON_IsTrue(v);
    return WM_OK;
}

static int int_value(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return 0;
    double d = v->valuedouble;
    if (d != floor(d) || d < -9.0e15 || d > 9.0e15) return 0;
    *out = (int64_t)d;
    return 1;
}

wm_status wm_tjson_int(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, int64_t def, int64_t lo,
                       int64_t hi, int64_t *out, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    int64_t x;
    if (!int_value(v, &x) || x < lo || x > hi)
        return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected an integer in [%lld, %lld]", t->name, path, key,
                      (long long)lo, (long long)hi);
    *out = x;
    return WM_OK;
}

wm_status wm_tjson_id(const wm_tokenizer *t, const cJSON *v, const char *what, int32_t *out, wm_error *err) {
    int64_t x;
    if (!int_value(v, &x) || x < 0 || x > INT32_MAX)
        return wm_err(err, WM_ERR_INPUT, "%s: %s: id must be an integer in [0, 2^31-1]", t->name, what);
    *out = (int32_t)x;
    return WM_OK;
}

/* ------------------------------------------------- truncation / padding */

static wm_status load_truncation(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    if (!j || cJSON_IsNull(j)) return WM_OK;
    if (!cJSON_IsObject(j)) return wm_err(err, WM_ERR_INPUT, "%s: truncation: expected an object or null", t->name);
    int64_t v;
    wm_status st;
    if ((st = wm_tjson_int(t, j, "max_length", "truncation", -1, 0, INT32_MAX, &v, err))) return st;
    if (v < 0) return wm_err(err, WM_ERR_INPUT, "%s: truncation.max_length: missing", t->name);
    t->trunc.max_length = (size_t)v;
    if ((st = wm_tjson_int(t, j, "stride", "truncation", 0, 0, INT32_MAX, &v, err))) return st;
    t->trunc.stride = (size_t)v;
    const char *s;
    if ((st = wm_tjson_str(t, j, "strategy", "truncation", 0, &s, NULL, err))) return st;
    if (!s || !strcmp(s, "LongestFirst")) t->trunc.strategy = WM_TOK_TRUNC_LONGEST_FIRST;
    else if (!strcmp(s, "OnlyFirst")) t->trunc.strategy = WM_TOK_TRUNC_ONLY_FIRST;
    else if (!strcmp(s, "OnlySecond")) t->trunc.strategy = WM_TOK_TRUNC_ONLY_SECOND;
    else return wm_err(err, WM_ERR_INPUT, "%s: truncation.strategy: unknown '%s'", t->name, s);
    if ((st = wm_tjson_str(t, j, "direction", "truncation", 0, &s, NULL, err))) return st;
    if (s && strcmp(s, "Left") && strcmp(s, "Right"))
        return wm_err(err, WM_ERR_INPUT, "%s: truncation.direction: unknown '%s'", t->name, s);
    t->trunc.left = s && !strcmp(s, "Left");
    t->trunc.enabled = 1;
    return WM_OK;
}

static wm_status load_padding(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    if (!j || cJSON_IsNull(j)) return WM_OK;
    if (!cJSON_IsObject(j)) return wm_err(err, WM_ERR_INPUT, "%s: padding: expected an object or null", t->name);
    wm_status st;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "strategy");
    if (cJSON_IsObject(s) && cJSON_GetObjectItemCaseSensitive(s, "Fixed")) {
        int64_t v;
        if ((st = wm_tjson_int(t, s, "Fixed", "padding.strategy", 0, 0, INT32_MAX, &v, err))) return st;
        t->pad.length = (size_t)v;
    } else if (!(cJSON_IsString(s) && !strcmp(s->valuestring, "BatchLongest")))
        return wm_err(err, WM_ERR_INPUT, "%s: padding.strategy: expected \"BatchLongest\" or {\"Fixed\": N}", t->name);
    const char *d;
    if ((st = wm_tjson_str(t, j, "direction", "padding", 0, &d, NULL, err))) return st;
    t->pad.left = d && !strcmp(d, "Left");
    int64_t v;
    if ((st = wm_tjson_int(t, j, "pad_to_multiple_of", "padding", 0, 0, INT32_MAX, &v, err))) return st;
    t->pad.multiple = (size_t)v;
    if ((st = wm_tjson_int(t, j, "pad_id", "padding", 0, 0, INT32_MAX, &v, err))) return st;
    t->pad.pad_id = (int32_t)v;
    if ((st = wm_tjson_int(t, j, "pad_type_id", "padding", 0, 0, INT32_MAX, &v, err))) return st;
    t->pad.pad_type_id = (int32_t)v;
    const char *tok;
    size_t tl;
    if ((st = wm_tjson_str(t, j, "pad_token", "padding", 0, &tok, &tl, err))) return st;
    if (tok && tl >= sizeof t->pad.pad_token)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: padding.pad_token: longer than %zu bytes", t->name,
                      sizeof t->pad.pad_token - 1);
    snprintf(t->pad.pad_token, sizeof t->pad.pad_token, "%s", tok ? tok : "[PAD]");
    t->pad.enabled = 1;
    return WM_OK;
}

/* --------------------------------------------------------- added tokens */

static wm_status load_added(wm_tokenizer *t, const cJSON *arr, wm_error *err) {
    if (!arr || cJSON_IsNull(arr)) return WM_OK;
    if (!cJSON_IsArray(arr)) return wm_err(err, WM_ERR_INPUT, "%s: added_tokens: expected an array", t->name);
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    wm_tadded *toks = n ? calloc(n, sizeof *toks) : NULL;
    if (n && !toks) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", t->name);
    wm_status st = WM_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!cJSON_IsObject(e)) {
            st = wm_err(err, WM_ERR_INPUT, "%s: %s: expected an object", t->name, path);
            break;
        }
        wm_tadded *a = &toks[i++];
        int sw, ls, rs, no, sp;
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (idv && (st = wm_tjson_id(t, idv, path, &a->id, err))) break;
        if ((st = wm_tjson_str(t, e, "content", path, 1, &a->content, &a->len, err)) ||
            (st = wm_tjson_bool(t, e, "single_word", path, 0, &sw, err)) ||
            (st = wm_tjson_bool(t, e, "lstrip", path, 0, &ls, err)) ||
            (st = wm_tjson_bool(t, e, "rstrip", path, 0, &rs, err)) ||
            (st = wm_tjson_bool(t, e, "special", path, 0, &sp, err)) ||
            (st = wm_tjson_bool(t, e, "normalized", path, !sp, &no, err)))
            break;
        a->single_word = (uint8_t)sw;
        a->lstrip = (uint8_t)ls;
        a->rstrip = (uint8_t)rs;
        a->normalized = (uint8_t)no;
        a->special = (uint8_t)sp;
    }
    if (!st) st = wm_tadded_add_batch(t, toks, i, err);
    free(toks);
    return st;
}

/* -------------------------------------------------------------- top level */

wm_status wm_tjson_tokenizer(wm_tokenizer *t, const cJSON *root, wm_error *err) {
    if (!cJSON_IsObject(root)) return wm_err(err, WM_ERR_INPUT, "%s: expected a JSON object", t->name);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (ver && !(cJSON_IsString(ver) && !strcmp(ver->valuestring, "1.0")))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: version: unknown tokenizer version (expected \"1.0\")", t->name);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return wm_err(err, WM_ERR_INPUT, "%s: model: missing or not an object", t->name);
    wm_status st;
    if ((st = wm_tjson_model(t, model, err))) return st;
    const cJSON *j;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "normalizer")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_normalizer(t, j, "normalizer", &t->norm, 0, err)))
        return st;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_pretok(t, j, "pre_tokenizer", &t->pre, 0, err)))
        return st;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "post_processor")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_post(t, j, "post_processor", &t->post, 0, err)))
        return st;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "decoder")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_decoder(t, j, "decoder", &t->dec, 0, err)))
        return st;
    if ((st = load_truncation(t, cJSON_GetObjectItemCaseSensitive(root, "truncation"), err))) return st;
    if ((st = load_padding(t, cJSON_GetObjectItemCaseSensitive(root, "padding"), err))) return st;
    if ((st = load_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err))) return st;
    return wm_tadded_finish(t, err);
}

wm_tokenizer *wm_tokenizer_new(const char *name) {
    wm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    wm_arena_init(&t->arena);
    snprintf(t->name, sizeof t->name, "%s", name ? name : "tokenizer");
    t->model.v.max_id = -1;
    t->model.unk_id = -1;
    for (int i = 0; i < 7; i++) t->roles[i] = -1;
    return t;
}

wm_status wm_tokenizer_load_json(const char *text, size_t len, const char *name, wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    wm_tokenizer *t = wm_tokenizer_new(name);
    if (!t) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer.json");
    wm_status st = json_prescan(text, len, t->name, err);
    cJSON *root = NULL;
    if (!st) {
        root = cJSON_ParseWithLength(text, len);
        if (!root) {
            const char *ep = cJSON_GetErrorPtr();
            size_t at = ep && ep >= text && ep <= text + len ? (size_t)(ep - text) : 0;
            st = wm_err(err, WM_ERR_INPUT, "%s: byte %zu: not valid JSON", t->name, at);
        }
    }
    if (!st) st = wm_tjson_tokenizer(t, root, err);
    cJSON_Delete(root);
    if (!st) wm_tokenizer_finish_roles(t);
    if (st) {
        wm_tokenizer_free(t);
        return st;
    }
    *out = t;
    return WM_OK;
}

wm_status wm_tokenizer_load_file(const char *path, wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    if (m.size > WM_TOK_MAX_FILE) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: larger than 2 GiB", path);
    }
    st = wm_tokenizer_load_json((const char *)(m.data ? m.data : (const uint8_t *)""), m.size, path, out, err);
    wm_unmap(&m);
    if (st) return st;
    char dir[4096];
    wm_path_dirname(path, dir, sizeof dir);
    wm_tokenizer_read_config(*out, dir);
    wm_tokenizer_finish_roles(*out);
    return WM_OK;
}

wm_status wm_tokenizer_load(const char *path, wm_tokenizer **out, wm_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return wm_err(err, WM_ERR_IO, "%s: no such file or folder", path);
    return S_ISDIR(sb.st_mode) ? wm_tokenizer_load_dir(path, out, err) : wm_tokenizer_load_file(path, out, err);
}

void wm_tokenizer_free(wm_tokenizer *t) {
    if (!t) return;
    wm_tmodel_free(&t->model);
    wm_tnorm_free(t->norm);
    wm_tpre_free(t->pre);
    wm_tpost_free(t->post);
    wm_tdec_free(t->dec);
    free(t->added);
    wm_tmap_free(&t->added_map);
    wm_u64map_free(&t->added_by_id);
    wm_tmap_free(&t->special_set);
    wm_ttrie_free(&t->trie_raw);
    wm_ttrie_free(&t->trie_norm);
    wm_arena_free(&t->arena);
    free(t);
}
