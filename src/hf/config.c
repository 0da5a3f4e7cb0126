/*
 * config.c - config.json / generation_config.json / tokenizer_config.json
 * parsing (see config.h).
 */
#define _GNU_SOURCE
#include "hf/config.h"
#include "hf/hub.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"

/* ------------------------------------------------------------------ JSON */

/* Where the scan is: one level per open object or list (the key or index being read). */
typedef struct scan_level {
    int is_list;
    size_t index;           /* lists: the element */
    const char *key;        /* objects: the current key as written (escapes kept), key_n bytes */
    size_t key_n;
} scan_level;

/* The dotted path of the value being scanned ("rope_scaling.factor", "long_factor[3]"), one line. */
static void scan_path(const scan_level *lv, int depth, char *out, size_t n) {
    size_t o = 0;
    out[0] = 0;
    for (int d = 0; d < depth && o + 1 < n; d++) {
        int k;
        if (lv[d].is_list) k = snprintf(out + o, n - o, "[%zu]", lv[d].index);
        else {
            if (o && o + 1 < n) out[o++] = '.';
            out[o] = 0;
            size_t kn = lv[d].key_n < 64 ? lv[d].key_n : 64;
            k = 0;
            for (size_t i = 0; i < kn && o + (size_t)k + 1 < n; i++, k++) {
                unsigned char ch = (unsigned char)lv[d].key[i];
                out[o + (size_t)k] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
            }
            out[o + (size_t)k] = 0;
        }
        if (k < 0) break;
        o += (size_t)k;
        if (o >= n) o = n - 1;
    }
}

/*
 * The scan before cJSON (which recurses and turns 1e999 into inf): the
 * nesting depth, NUL bytes, and every number literal, which must be finite
 * as a double - "FILE: field 'rope_theta': 1e999 is not a finite number".
 * Strings are skipped (escapes honoured).
 */
static wm_status scan_json(const char *t, size_t n, const char *label, wm_error *err) {
    scan_level lv[WM_HF_JSON_MAX_DEPTH + 1];
    int depth = 0, in_str = 0, want_key = 0;
    size_t str_start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (!c) return wm_err(err, WM_ERR_INPUT, "%s: NUL byte at offset %zu", label, i);
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') {
                in_str = 0;
                if (want_key && depth > 0 && !lv[depth - 1].is_list) {
                    lv[depth - 1].key = t + str_start;
                    lv[depth - 1].key_n = i - str_start;
                    want_key = 0;
                }
            }
            continue;
        }
        if (c == '"') {
            in_str = 1;
            str_start = i + 1;
        } else if (c == '{' || c == '[') {
            if (++depth > WM_HF_JSON_MAX_DEPTH)
                return wm_err(err, WM_ERR_INPUT, "%s: JSON nested deeper than %d levels (offset %zu)", label,
                              WM_HF_JSON_MAX_DEPTH, i);
            lv[depth - 1] = (scan_level){.is_list = c == '[', .key = "", .key_n = 0};
            want_key = c == '{';
        } else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
            want_key = 0;
        } else if (c == ',') {
            if (depth > 0 && lv[depth - 1].is_list) lv[depth - 1].index++;
            want_key = depth > 0 && !lv[depth - 1].is_list;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            int exp = 0;
            while (j < n && strchr("+-.0123456789eE", t[j]) && t[j]) exp |= t[j] == 'e' || t[j] == 'E', j++;
            if (exp || j - i > 300) { /* only an exponent or 300+ digits can overflow a double */
                char num[400];
                size_t k = j - i < sizeof num - 1 ? j - i : sizeof num - 1;
                memcpy(num, t + i, k);
                num[k] = 0;
                if (!isfinite(strtod(num, NULL))) {
                    char path[256];
                    scan_path(lv, depth, path, sizeof path);
                    return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %.40s%s is not a finite number (beyond the range "
                                  "of a double, about 1.8e308)", label, path[0] ? path : "(top level)", num,
                                  k > 40 ? "..." : "");
                }
            }
            i = j - 1;
        }
    }
    return WM_OK;
}

wm_status wm_hf_json_parse_value(const char *text, size_t n, size_t max_bytes, const char *label, cJSON **out,
                                 wm_error *err) {
    *out = NULL;
    if (!label) label = "<json>";
    if (n > max_bytes)
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes, over the %zu-byte limit for this file", label, n, max_bytes);
    wm_status s = scan_json(text, n, label, err);
    if (s) return s;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!root) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        return wm_err(err, WM_ERR_INPUT, "%s: not valid JSON (near offset %zu)", label, off);
    }
    for (const char *p = end; p && p < text + n; p++)
        if (!strchr(" \t\r\n", *p)) {
            cJSON_Delete(root);
            return wm_err(err, WM_ERR_INPUT, "%s: trailing bytes after the JSON value (offset %zu)", label,
                          (size_t)(p - text));
        }
    *out = root;
    return WM_OK;
}

wm_status wm_hf_json_parse(const char *text, size_t n, size_t max_bytes, const char *label, cJSON **out,
                           wm_error *err) {
    wm_status s = wm_hf_json_parse_value(text, n, max_bytes, label, out, err);
    if (!s && !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return wm_err(err, WM_ERR_INPUT, "%s: the top level is not a JSON object", label ? label : "<json>");
    }
    return s;
}

static wm_status json_load(const char *path, size_t max_bytes, int object, cJSON **out, wm_error *err) {
    *out = NULL;
    wm_map m;
    wm_status s = wm_map_file(path, 0, &m, err);
    if (s) return s;
    const char *text = m.data ? (const char *)m.data : "";
    s = object ? wm_hf_json_parse(text, m.size, max_bytes, path, out, err)
               : wm_hf_json_parse_value(text, m.size, max_bytes, path, out, err);
    wm_unmap(&m);
    return s;
}

wm_status wm_hf_json_load(const char *path, size_t max_bytes, cJSON **out, wm_error *err) {
    return json_load(path, max_bytes, 1, out, err);
}

wm_status wm_hf_json_load_value(const char *path, size_t max_bytes, cJSON **out, wm_error *err) {
    return json_load(path, max_bytes, 0, out, err);
}

/* Numbers equal to +-DBL_MAX (what wm_hf_json_load_py writes for +-Infinity) become +-inf, through the tree. */
static void py_infinities(cJSON *v) {
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v) && fabs(v->valuedouble) == DBL_MAX) cJSON_SetNumberValue(v, v->valuedouble * 2);
        py_infinities(v->child);
    }
}

wm_status wm_hf_json_load_py(const char *path, size_t max_bytes, cJSON **out, wm_error *err) {
    *out = NULL;
    wm_map m;
    wm_status s = wm_map_file(path, 0, &m, err);
    if (s) return s;
    const char *text = m.data ? (const char *)m.data : "";
    if (m.size > max_bytes) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes, over the %zu-byte limit for this file", path, m.size,
                      max_bytes);
    }
    /* outside strings: Infinity -> DBL_MAX (the strict scan refuses non-finite numbers; made inf after the
       parse), NaN -> null */
    static const char big[] = "1.7976931348623157e308";
    char *t = malloc(m.size * 3 + 1);
    if (!t) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    int in_str = 0;
    for (size_t i = 0; i < m.size; i++) {
        char c = text[i];
        if (in_str) {
            t[n++] = c;
            if (c == '\\' && i + 1 < m.size) t[n++] = text[++i];
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
            t[n++] = c;
        } else if (m.size - i >= 8 && !memcmp(text + i, "Infinity", 8)) {
            memcpy(t + n, big, sizeof big - 1), n += sizeof big - 1, i += 7;
        } else if (m.size - i >= 3 && !memcmp(text + i, "NaN", 3)) {
            memcpy(t + n, "null", 4), n += 4, i += 2;
        } else
            t[n++] = c;
    }
    wm_unmap(&m);
    s = wm_hf_json_parse_value(t, n, max_bytes * 3, path, out, err);
    free(t);
    if (!s) py_infinities(*out);
    return s;
}

/* ------------------------------------------------------------ typed access */

static const char *kind_name(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

/* The member key of obj, NULL when absent; WM_ERR_INPUT when it is listed twice. */
static wm_status member(const cJSON *obj, const char *key, const char *label, const char *where, cJSON **out,
                        wm_error *err) {
    *out = NULL;
    cJSON *c;
    cJSON_ArrayForEach(c, obj) {
        if (!c->string || strcmp(c->string, key)) continue;
        if (*out)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': listed twice (ambiguous)", label, where, key);
        *out = c;
    }
    return WM_OK;
}

/* An integer JSON number in [lo, hi]; null -> *v untouched (absent). */
static wm_status as_int(const cJSON *c, const char *label, const char *where, const char *key, int64_t lo,
                        int64_t hi, int64_t *v, wm_error *err) {
    if (!c || cJSON_IsNull(c)) return WM_OK;
    double d = c->valuedouble;
    if (!cJSON_IsNumber(c) || !isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0 || d < (double)lo ||
        d > (double)hi) {
        if (cJSON_IsNumber(c) && !isfinite(d))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': %g is not a finite number", label, where, key, d);
        if (cJSON_IsNumber(c))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': expected an integer in [%lld, %lld], got %.17g", label,
                          where, key, (long long)lo, (long long)hi, d);
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': expected an integer, got %s", label, where, key,
                      kind_name(c));
    }
    *v = (int64_t)d;
    return WM_OK;
}

/* What a numeric field may hold (its meaning, not only its JSON type). */
typedef enum num_range {
    R_ANY,     /* any finite number */
    R_POS,     /* > 0: a scale, a base, a factor that divides or multiplies */
    R_NONNEG,  /* >= 0 */
    R_UNIT,    /* (0, 1]: a fraction of something */
    R_PROB,    /* [0, 1]: a probability */
} num_range;

static const char *const range_text[] = {"a finite number", "> 0", ">= 0", "in (0, 1]", "in [0, 1]"};

static int in_range(double d, num_range r) {
    switch (r) {
    case R_POS: return d > 0;
    case R_NONNEG: return d >= 0;
    case R_UNIT: return d > 0 && d <= 1;
    case R_PROB: return d >= 0 && d <= 1;
    default: return 1;
    }
}

/* A finite JSON number within range r; null -> *v untouched (absent). */
static wm_status as_num_r(const cJSON *c, const char *label, const char *where, const char *key, num_range r,
                          double *v, wm_error *err) {
    if (!c || cJSON_IsNull(c)) return WM_OK;
    if (!cJSON_IsNumber(c))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': expected a number, got %s", label, where, key,
                      kind_name(c));
    double d = c->valuedouble;
    if (!isfinite(d)) /* the scan refuses such literals first; a tree built elsewhere may still hold one */
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': %g is not a finite number", label, where, key, d);
    if (!in_range(d, r))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': %.17g is out of range (it must be %s)", label, where, key,
                      d, range_text[r]);
    *v = d;
    return WM_OK;
}

static wm_status as_num(const cJSON *c, const char *label, const char *where, const char *key, double *v,
                        wm_error *err) {
    return as_num_r(c, label, where, key, R_ANY, v, err);
}

static wm_status as_bool(const cJSON *c, const char *label, const char *where, const char *key, int *v,
                         wm_error *err) {
    if (!c || cJSON_IsNull(c)) return WM_OK;
    if (!cJSON_IsBool(c))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': expected true or false, got %s", label, where, key,
                      kind_name(c));
    *v = cJSON_IsTrue(c) ? 1 : 0;
    return WM_OK;
}

static wm_status as_str(const cJSON *c, const char *label, const char *where, const char *key, const char **v,
                        wm_error *err) {
    if (!c || cJSON_IsNull(c)) return WM_OK;
    if (!cJSON_IsString(c) || !c->valuestring)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': expected a string, got %s", label, where, key,
                      kind_name(c));
    *v = c->valuestring;
    return WM_OK;
}

/* A token id or a list of them (each in [0, 2^31)). */
static wm_status as_ids(const cJSON *c, const char *label, const char *key, wm_hf_ids *ids, wm_error *err) {
    if (!c || cJSON_IsNull(c)) return WM_OK;
    ids->n = 0;
    if (cJSON_IsArray(c)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, c) {
            if (ids->n == WM_HF_MAX_IDS)
                return wm_err(err, WM_ERR_INPUT, "%s: field '%s': more than %d token ids", label, key, WM_HF_MAX_IDS);
            int64_t v = -1;
            wm_status s = as_int(e, label, "", key, 0, INT32_MAX, &v, err);
            if (s) return s;
            if (v < 0) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': null inside the id list", label, key);
            ids->v[ids->n++] = v;
        }
        return WM_OK;
    }
    int64_t v = -1;
    wm_status s = as_int(c, label, "", key, 0, INT32_MAX, &v, err);
    if (s) return s;
    ids->v[ids->n++] = v;
    return WM_OK;
}

/* ------------------------------------------------------------ config.json */

/* Aliases: the keys different families use for one quantity, first found wins (a conflict is an error). */
typedef struct int_alias {
    size_t off;          /* offset of the int64_t field in wm_hf_config */
    size_t key_off;      /* offset of the const char * recording the key, or 0 */
    int64_t lo, hi;
    const char *keys[5];
} int_alias;

#define CF(f) offsetof(wm_hf_config, f)
static const int_alias int_aliases[] = {
    {CF(vocab_size), 0, 1, INT32_MAX, {"vocab_size", "n_vocab"}},
    {CF(hidden_size), CF(key_hidden), 1, 1 << 20, {"hidden_size", "n_embd", "d_model", "dim"}},
    {CF(intermediate_size), CF(key_intermediate), 1, 1 << 22, {"intermediate_size", "n_inner", "hidden_dim", "ffn_dim"}},
    {CF(num_layers), CF(key_layers), 1, 4096, {"num_hidden_layers", "n_layer", "n_layers", "num_layers"}},
    {CF(num_heads), CF(key_heads), 1, 1 << 16, {"num_attention_heads", "n_head", "n_heads"}},
    {CF(num_kv_heads), 0, 1, 1 << 16, {"num_key_value_heads", "num_kv_heads", "n_head_kv"}},
    {CF(head_dim), 0, 1, 1 << 16, {"head_dim"}},
    {CF(max_positions), CF(key_positions), 1, INT32_MAX, {"max_position_embeddings", "n_positions"}},
    {CF(type_vocab_size), 0, 0, INT32_MAX, {"type_vocab_size"}},
    {CF(embedding_size), 0, 1, 1 << 20, {"embedding_size"}},
    /* 0: no window (transformers' Qwen2-MoE writes sliding_window 0 when use_sliding_window is false) */
    {CF(sliding_window), 0, 0, INT32_MAX, {"sliding_window"}},
    {CF(max_window_layers), 0, 0, 4096, {"max_window_layers"}},
};

typedef struct flag_key {
    size_t off;
    const char *key;
} flag_key;

static const flag_key flag_keys[] = {
    {CF(tie_word_embeddings), "tie_word_embeddings"},
    {CF(attention_bias), "attention_bias"},
    {CF(mlp_bias), "mlp_bias"},
    {CF(use_sliding_window), "use_sliding_window"},
    {CF(scale_attn_weights), "scale_attn_weights"},
    {CF(scale_attn_by_inverse_layer_idx), "scale_attn_by_inverse_layer_idx"},
    {CF(is_decoder), "is_decoder"},
};

static const char *const eps_keys[] = {"layer_norm_eps", "rms_norm_eps", "layer_norm_epsilon", "norm_eps"};
static const char *const act_keys[] = {"hidden_act", "activation_function", "activation", "hidden_activation"};
static const char *const dtype_keys[] = {"torch_dtype", "dtype"};

static wm_status parse_float_list(const cJSON *c, const char *label, const char *where, const char *key,
                                  num_range r, double **out, size_t *n, wm_error *err) {
    if (!c || cJSON_IsNull(c)) return WM_OK;
    if (!cJSON_IsArray(c))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': expected a list of numbers, got %s", label, where, key,
                      kind_name(c));
    int k = cJSON_GetArraySize(c);
    if (k > 65536) return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': %d entries, too many", label, where, key, k);
    free(*out);
    *out = calloc((size_t)k + 1, sizeof **out);
    if (!*out) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    *n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, c) {
        double v = NAN;
        char item[96];
        snprintf(item, sizeof item, "%s[%zu]", key, *n);
        wm_status s = as_num_r(e, label, where, item, r, &v, err);
        if (s) return s;
        if (isnan(v)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s': null inside the list", label, where, item);
        (*out)[(*n)++] = v;
    }
    return WM_OK;
}

/* Reads the RoPE keys of one object (top level, rope_parameters or rope_scaling) into r. */
static wm_status parse_rope_obj(const cJSON *o, const char *label, const char *where, int top, wm_hf_rope *r,
                                int *any, wm_error *err) {
    /* ranges by meaning: theta is a base raised to powers, the factors scale or divide frequencies and
       lengths, the betas count rotations (log of them is taken), mscale 0 means "none" */
    static const struct {
        const char *key;
        size_t off;
        num_range r;
    } nums[] = {
        {"rope_theta", offsetof(wm_hf_rope, theta), R_POS},
        {"factor", offsetof(wm_hf_rope, factor), R_POS},
        {"low_freq_factor", offsetof(wm_hf_rope, low_freq_factor), R_POS},
        {"high_freq_factor", offsetof(wm_hf_rope, high_freq_factor), R_POS},
        {"beta_fast", offsetof(wm_hf_rope, beta_fast), R_POS},
        {"beta_slow", offsetof(wm_hf_rope, beta_slow), R_POS},
        {"attention_factor", offsetof(wm_hf_rope, attention_factor), R_POS},
        {"mscale", offsetof(wm_hf_rope, mscale), R_NONNEG},
        {"mscale_all_dim", offsetof(wm_hf_rope, mscale_all_dim), R_NONNEG},
        {"partial_rotary_factor", offsetof(wm_hf_rope, partial_rotary_factor), R_UNIT},
    };
    wm_status s;
    cJSON *c;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        /* at the top level only the keys that live there in real configs (theta, partial factor) */
        if (top && strcmp(nums[i].key, "rope_theta") && strcmp(nums[i].key, "partial_rotary_factor")) continue;
        if ((s = member(o, nums[i].key, label, where, &c, err))) return s;
        if (!c || cJSON_IsNull(c)) continue;
        *any = 1;
        if ((s = as_num_r(c, label, where, nums[i].key, nums[i].r, (double *)((char *)r + nums[i].off), err))) return s;
    }
    const char *type = NULL;
    for (int k = 0; k < 2 && !top; k++) {
        const char *key = k ? "rope_type" : "type";
        if ((s = member(o, key, label, where, &c, err))) return s;
        const char *t = NULL;
        if ((s = as_str(c, label, where, key, &t, err))) return s;
        if (t && type && strcmp(t, type))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%stype' ('%s') and '%srope_type' ('%s') disagree", label,
                          where, type, where, t);
        if (t) type = t;
    }
    if (type) {
        r->type = type;
        *any = 1;
    }
    if ((s = member(o, "original_max_position_embeddings", label, where, &c, err))) return s;
    if ((s = as_int(c, label, where, "original_max_position_embeddings", 1, INT32_MAX, &r->original_max_pos, err)))
        return s;
    if (top) return WM_OK;
    if ((s = member(o, "truncate", label, where, &c, err))) return s;
    if ((s = as_bool(c, label, where, "truncate", &r->truncate, err))) return s;
    if ((s = member(o, "short_factor", label, where, &c, err))) return s;
    if ((s = parse_float_list(c, label, where, "short_factor", R_POS, &r->short_factor, &r->n_short, err))) return s;
    if ((s = member(o, "long_factor", label, where, &c, err))) return s;
    if ((s = parse_float_list(c, label, where, "long_factor", R_POS, &r->long_factor, &r->n_long, err))) return s;
    return WM_OK;
}

static void rope_clear(wm_hf_rope *r) {
    r->theta = r->factor = r->low_freq_factor = r->high_freq_factor = NAN;
    r->beta_fast = r->beta_slow = r->attention_factor = r->mscale = r->mscale_all_dim = NAN;
    r->partial_rotary_factor = NAN;
    r->original_max_pos = -1;
    r->truncate = -1;
}

/*
 * rope_parameters keyed by layer type (transformers 5 for models whose sliding layers have their own RoPE):
 * {"full_attention": {...}, "sliding_attention": {...}}; 1 when c has that form. Any other key beside them is
 * an error: the flat keys would be ambiguous.
 */
static int rope_per_type(const cJSON *c) {
    return cJSON_GetObjectItemCaseSensitive(c, "full_attention") ||
           cJSON_GetObjectItemCaseSensitive(c, "sliding_attention");
}

static wm_status parse_rope_types(wm_hf_config *cfg, const cJSON *c, int *any, int *any_local, wm_error *err) {
    static const char *const types[] = {"full_attention", "sliding_attention"};
    const cJSON *e;
    cJSON_ArrayForEach(e, c) {
        if (!e->string || (strcmp(e->string, types[0]) && strcmp(e->string, types[1])))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'rope_parameters.%s': unexpected beside the per-layer-type "
                          "entries (full_attention, sliding_attention)", cfg->file, e->string ? e->string : "");
    }
    cfg->rope_per_type = 1;
    for (int k = 0; k < 2; k++) {
        cJSON *sub;
        wm_status s = member(c, types[k], cfg->file, "rope_parameters.", &sub, err);
        if (s) return s;
        if (!sub || cJSON_IsNull(sub)) continue;
        if (!cJSON_IsObject(sub))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'rope_parameters.%s': expected an object, got %s", cfg->file,
                          types[k], kind_name(sub));
        wm_hf_rope *r = k ? &cfg->rope_local : &cfg->rope;
        static const char *const where[] = {"rope_parameters.full_attention.", "rope_parameters.sliding_attention."};
        const char *before = r->type;
        int got = 0;
        if ((s = parse_rope_obj(sub, cfg->file, where[k], 0, r, &got, err))) return s;
        if (r->type != before) r->source = k ? "rope_parameters.sliding_attention" : "rope_parameters.full_attention";
        *(k ? any_local : any) |= got;
    }
    return WM_OK;
}

static wm_status parse_rope(wm_hf_config *cfg, wm_error *err) {
    wm_hf_rope *r = &cfg->rope, *l = &cfg->rope_local;
    rope_clear(r);
    rope_clear(l);
    int any = 0, any_local = 0;
    wm_status s = parse_rope_obj(cfg->root, cfg->file, "", 1, r, &any, err);
    if (s) return s;
    cJSON *c;
    /* the sliding layers' base (Gemma 3 before transformers 5) */
    if ((s = member(cfg->root, "rope_local_base_freq", cfg->file, "", &c, err)) ||
        (s = as_num_r(c, cfg->file, "", "rope_local_base_freq", R_POS, &l->theta, err)))
        return s;
    if (!isnan(l->theta)) {
        any_local = 1;
        l->source = "rope_local_base_freq";
    }
    /* ModernBERT before transformers 5: global_rope_theta (the full-attention layers) and local_rope_theta (the
       sliding ones); rope_theta / rope_local_base_freq beside them would be ambiguous */
    static const char *const alias[] = {"global_rope_theta", "local_rope_theta"};
    for (int k = 0; k < 2; k++) {
        wm_hf_rope *t = k ? l : r;
        double v = NAN;
        if ((s = member(cfg->root, alias[k], cfg->file, "", &c, err)) ||
            (s = as_num_r(c, cfg->file, "", alias[k], R_POS, &v, err)))
            return s;
        if (isnan(v)) continue;
        if (!isnan(t->theta))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': given beside '%s'", cfg->file, alias[k],
                          k ? "rope_local_base_freq" : "rope_theta");
        t->theta = v;
        t->source = alias[k];
        *(k ? &any_local : &any) = 1;
    }
    static const char *const subs[] = {"rope_scaling", "rope_parameters"};
    for (int i = 0; i < 2; i++) {
        if ((s = member(cfg->root, subs[i], cfg->file, "", &c, err))) return s;
        if (!c || cJSON_IsNull(c)) continue;
        if (!cJSON_IsObject(c))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an object, got %s", cfg->file, subs[i],
                          kind_name(c));
        if (i == 1 && rope_per_type(c)) {
            if ((s = parse_rope_types(cfg, c, &any, &any_local, err))) return s;
            continue;
        }
        char where[32];
        snprintf(where, sizeof where, "%s.", subs[i]);
        const char *before = r->type;
        if ((s = parse_rope_obj(c, cfg->file, where, 0, r, &any, err))) return s;
        if (r->type != before) r->source = subs[i];
    }
    cfg->has_rope = any || any_local;
    cfg->has_rope_local = any_local;
    if (any && !r->type) {
        r->type = "default";
        if (!r->source) r->source = "default"; /* global_rope_theta keeps its name (messages) */
    }
    if (any_local && !l->type) l->type = "default";
    if (any_local && !l->source) l->source = "rope_parameters.sliding_attention";
    return WM_OK;
}

/* query_pre_attn_scalar, the soft-capping values (null kept as 0: "no capping") and sliding_window_pattern. */
static wm_status parse_attn_variants(wm_hf_config *cfg, wm_error *err) {
    static const struct {
        const char *key;
        size_t off;
    } nums[] = {{"query_pre_attn_scalar", CF(query_pre_attn_scalar)},
                {"attn_logit_softcapping", CF(attn_softcap)},
                {"final_logit_softcapping", CF(final_softcap)},
                {"embedding_multiplier", CF(embedding_multiplier)},
                {"residual_multiplier", CF(residual_multiplier)},
                {"attention_multiplier", CF(attention_multiplier)},
                {"logits_scaling", CF(logits_scaling)}};
    cJSON *c;
    wm_status s;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        double *v = (double *)((char *)cfg + nums[i].off);
        if ((s = member(cfg->root, nums[i].key, cfg->file, "", &c, err))) return s;
        if ((s = as_num_r(c, cfg->file, "", nums[i].key, R_POS, v, err))) return s;
        if (c && cJSON_IsNull(c) && (i == 1 || i == 2)) *v = 0; /* an explicit null turns a family's default cap off */
    }
    if ((s = member(cfg->root, "sliding_window_pattern", cfg->file, "", &c, err))) return s;
    return as_int(c, cfg->file, "", "sliding_window_pattern", 1, 4096, &cfg->sliding_window_pattern, err);
}

static wm_status parse_labels(wm_hf_config *cfg, wm_error *err) {
    cJSON *c;
    wm_status s = member(cfg->root, "id2label", cfg->file, "", &c, err);
    if (s || !c || cJSON_IsNull(c)) return s;
    if (!cJSON_IsObject(c))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'id2label': expected an object, got %s", cfg->file, kind_name(c));
    int k = cJSON_GetArraySize(c);
    if (k > 1000000) return wm_err(err, WM_ERR_INPUT, "%s: field 'id2label': %d labels, too many", cfg->file, k);
    cfg->labels = calloc((size_t)k + 1, sizeof *cfg->labels);
    if (!cfg->labels) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, c) {
        char *end = NULL;
        long idx = strtol(e->string ? e->string : "", &end, 10);
        if (!e->string || !*e->string || *end || idx < 0 || idx >= k)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'id2label': key '%s' is not an index in [0, %d)", cfg->file,
                          e->string ? e->string : "", k);
        if (!cJSON_IsString(e))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'id2label.%s': expected a string, got %s", cfg->file, e->string,
                          kind_name(e));
        if (cfg->labels[idx])
            return wm_err(err, WM_ERR_INPUT, "%s: field 'id2label': index %ld listed twice", cfg->file, idx);
        cfg->labels[idx] = e->valuestring;
    }
    cfg->n_labels = (size_t)k;
    return WM_OK;
}

static wm_status parse_layer_types(wm_hf_config *cfg, wm_error *err) {
    cJSON *c;
    wm_status s = member(cfg->root, "layer_types", cfg->file, "", &c, err);
    if (s || !c || cJSON_IsNull(c)) return s;
    if (!cJSON_IsArray(c))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'layer_types': expected a list of strings, got %s", cfg->file,
                      kind_name(c));
    int k = cJSON_GetArraySize(c);
    if (k > 4096) return wm_err(err, WM_ERR_INPUT, "%s: field 'layer_types': %d entries, too many", cfg->file, k);
    cfg->layer_sliding = calloc((size_t)k + 1, 1);
    if (!cfg->layer_sliding) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    const cJSON *e;
    size_t i = 0;
    cJSON_ArrayForEach(e, c) {
        if (!cJSON_IsString(e))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'layer_types[%zu]': expected a string, got %s", cfg->file, i,
                          kind_name(e));
        if (!strcmp(e->valuestring, "full_attention")) cfg->layer_sliding[i] = 0;
        else if (!strcmp(e->valuestring, "sliding_attention")) cfg->layer_sliding[i] = 1;
        else
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'layer_types[%zu]': attention kind '%s' is not supported "
                          "(full_attention, sliding_attention)", cfg->file, i, e->valuestring);
        i++;
    }
    cfg->n_layer_types = i;
    return WM_OK;
}

/* One value from a list of alias keys; two different present values is an error. */
static wm_status alias_int(wm_hf_config *cfg, const int_alias *a, wm_error *err) {
    int64_t *dst = (int64_t *)((char *)cfg + a->off);
    const char *from = NULL;
    for (size_t k = 0; k < 5 && a->keys[k]; k++) {
        cJSON *c;
        wm_status s = member(cfg->root, a->keys[k], cfg->file, "", &c, err);
        if (s) return s;
        int64_t v = -1;
        if ((s = as_int(c, cfg->file, "", a->keys[k], a->lo, a->hi, &v, err))) return s;
        if (v < 0) continue;
        if (from && *dst != v)
            return wm_err(err, WM_ERR_INPUT, "%s: fields '%s' (%lld) and '%s' (%lld) disagree", cfg->file, from,
                          (long long)*dst, a->keys[k], (long long)v);
        if (!from) {
            *dst = v;
            from = a->keys[k];
        }
    }
    if (a->key_off && from) *(const char **)((char *)cfg + a->key_off) = from;
    return WM_OK;
}

static wm_status first_str(wm_hf_config *cfg, const char *const *keys, size_t nk, const char **out,
                           const char **key_out, wm_error *err) {
    for (size_t k = 0; k < nk; k++) {
        cJSON *c;
        wm_status s = member(cfg->root, keys[k], cfg->file, "", &c, err);
        if (s) return s;
        const char *v = NULL;
        if ((s = as_str(c, cfg->file, "", keys[k], &v, err))) return s;
        if (v && !*out) {
            *out = v;
            if (key_out) *key_out = keys[k];
        }
    }
    return WM_OK;
}

static wm_status parse_config(wm_hf_config *cfg, wm_error *err) {
    const char *f = cfg->file;
    cJSON *c;
    wm_status s;
    if ((s = member(cfg->root, "auto_map", f, "", &c, err))) return s;
    if (c && !cJSON_IsNull(c))
        return wm_err(err, WM_ERR_UNSUPPORTED,
                      "%s: field 'auto_map': the checkpoint needs custom repository code, which is never executed "
                      "(not supported)", f);
    if ((s = member(cfg->root, "model_type", f, "", &c, err))) return s;
    if ((s = as_str(c, f, "", "model_type", &cfg->model_type, err))) return s;
    if ((s = member(cfg->root, "architectures", f, "", &c, err))) return s;
    if (c && !cJSON_IsNull(c)) {
        if (!cJSON_IsArray(c))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'architectures': expected a list of strings, got %s", f,
                          kind_name(c));
        const cJSON *e;
        cJSON_ArrayForEach(e, c) {
            if (!cJSON_IsString(e))
                return wm_err(err, WM_ERR_INPUT, "%s: field 'architectures': expected strings, got %s", f, kind_name(e));
            if (cfg->n_architectures < WM_HF_MAX_ARCHS) cfg->architectures[cfg->n_architectures++] = e->valuestring;
        }
    }
    for (size_t i = 0; i < sizeof int_aliases / sizeof int_aliases[0]; i++)
        if ((s = alias_int(cfg, &int_aliases[i], err))) return s;
    for (size_t i = 0; i < sizeof flag_keys / sizeof flag_keys[0]; i++) {
        if ((s = member(cfg->root, flag_keys[i].key, f, "", &c, err))) return s;
        if ((s = as_bool(c, f, "", flag_keys[i].key, (int *)((char *)cfg + flag_keys[i].off), err))) return s;
    }
    for (size_t k = 0; k < sizeof eps_keys / sizeof eps_keys[0]; k++) {
        if ((s = member(cfg->root, eps_keys[k], f, "", &c, err))) return s;
        double v = NAN;
        if ((s = as_num(c, f, "", eps_keys[k], &v, err))) return s;
        if (isnan(v)) continue;
        if (!(v > 0 && v < 1))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %.17g is out of range (it must be in (0, 1))", f,
                          eps_keys[k], v);
        if (!isnan(cfg->norm_eps) && cfg->norm_eps != v)
            return wm_err(err, WM_ERR_INPUT, "%s: fields '%s' and '%s' disagree", f, cfg->key_eps, eps_keys[k]);
        cfg->norm_eps = v;
        cfg->key_eps = eps_keys[k];
    }
    if ((s = first_str(cfg, act_keys, 4, &cfg->activation, &cfg->key_act, err))) return s;
    if ((s = first_str(cfg, dtype_keys, 2, &cfg->dtype, NULL, err))) return s;
    if ((s = member(cfg->root, "num_labels", f, "", &c, err))) return s;
    if ((s = as_int(c, f, "", "num_labels", 1, 1000000, &cfg->num_labels, err))) return s;
    static const struct {
        const char *key;
        size_t off;
    } ids[] = {{"pad_token_id", CF(pad)}, {"bos_token_id", CF(bos)}, {"eos_token_id", CF(eos)}};
    for (size_t i = 0; i < 3; i++) {
        if ((s = member(cfg->root, ids[i].key, f, "", &c, err))) return s;
        if ((s = as_ids(c, f, ids[i].key, (wm_hf_ids *)((char *)cfg + ids[i].off), err))) return s;
    }
    if ((s = parse_rope(cfg, err))) return s;
    if ((s = parse_attn_variants(cfg, err))) return s;
    if ((s = parse_labels(cfg, err))) return s;
    if ((s = parse_layer_types(cfg, err))) return s;
    if (cfg->num_labels < 0 && cfg->n_labels) cfg->num_labels = (int64_t)cfg->n_labels;
    if (cfg->num_labels >= 0 && cfg->n_labels && (size_t)cfg->num_labels != cfg->n_labels)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_labels' (%lld) and 'id2label' (%zu entries) disagree", f,
                      (long long)cfg->num_labels, cfg->n_labels);
    return WM_OK;
}

static void config_init(wm_hf_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int64_t *ints[] = {&cfg->vocab_size, &cfg->hidden_size, &cfg->intermediate_size, &cfg->num_layers,
                       &cfg->num_heads, &cfg->num_kv_heads, &cfg->head_dim, &cfg->max_positions,
                       &cfg->type_vocab_size, &cfg->embedding_size, &cfg->num_labels, &cfg->sliding_window,
                       &cfg->max_window_layers};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) *ints[i] = -1;
    int *flags[] = {&cfg->tie_word_embeddings, &cfg->attention_bias, &cfg->mlp_bias, &cfg->use_sliding_window,
                    &cfg->scale_attn_weights, &cfg->scale_attn_by_inverse_layer_idx, &cfg->is_decoder};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) *flags[i] = -1;
    cfg->norm_eps = NAN;
    cfg->query_pre_attn_scalar = cfg->attn_softcap = cfg->final_softcap = NAN;
    cfg->embedding_multiplier = cfg->residual_multiplier = cfg->attention_multiplier = cfg->logits_scaling = NAN;
    cfg->sliding_window_pattern = -1;
}

wm_status wm_hf_config_parse(const char *text, size_t n, const char *label, wm_hf_config *cfg, wm_error *err) {
    config_init(cfg);
    snprintf(cfg->file, sizeof cfg->file, "%s", label ? label : "config.json");
    wm_status s = wm_hf_json_parse(text, n, WM_HF_CONFIG_MAX_BYTES, cfg->file, &cfg->root, err);
    if (!s) s = parse_config(cfg, err);
    if (s) wm_hf_config_free(cfg);
    return s;
}

wm_status wm_hf_config_load(const char *path, wm_hf_config *cfg, wm_error *err) {
    config_init(cfg);
    wm_map m;
    wm_status s = wm_map_file(path, 0, &m, err);
    if (s) return s;
    s = wm_hf_config_parse(m.data ? (const char *)m.data : "", m.size, path, cfg, err);
    wm_unmap(&m);
    return s;
}

void wm_hf_config_free(wm_hf_config *cfg) {
    if (!cfg) return;
    cJSON_Delete(cfg->root);
    free(cfg->rope.short_factor);
    free(cfg->rope.long_factor);
    free(cfg->rope_local.short_factor);
    free(cfg->rope_local.long_factor);
    free(cfg->layer_sliding);
    free(cfg->labels);
    char file[PATH_MAX];
    memcpy(file, cfg->file, sizeof file);
    config_init(cfg);
    memcpy(cfg->file, file, sizeof file);
}

/* ------------------------------------------------------ generation config */

wm_status wm_hf_gen_config_parse(const char *text, size_t n, const char *label, wm_hf_gen_config *g, wm_error *err) {
    memset(g, 0, sizeof *g);
    g->temperature = g->top_p = g->repetition_penalty = NAN;
    g->top_k = g->max_length = g->max_new_tokens = -1;
    g->do_sample = -1;
    if (!label) label = "generation_config.json";
    wm_status s = wm_hf_json_parse(text, n, WM_HF_CONFIG_MAX_BYTES, label, &g->root, err);
    if (s) return s;
    cJSON *c;
    static const struct {
        const char *key;
        size_t off;
    } ids[] = {{"pad_token_id", offsetof(wm_hf_gen_config, pad)},
               {"bos_token_id", offsetof(wm_hf_gen_config, bos)},
               {"eos_token_id", offsetof(wm_hf_gen_config, eos)}};
    for (size_t i = 0; i < 3 && !s; i++)
        if (!(s = member(g->root, ids[i].key, label, "", &c, err)))
            s = as_ids(c, label, ids[i].key, (wm_hf_ids *)((char *)g + ids[i].off), err);
    static const struct {
        const char *key;
        size_t off;
        num_range r;
    } nums[] = {{"temperature", offsetof(wm_hf_gen_config, temperature), R_NONNEG},
                {"top_p", offsetof(wm_hf_gen_config, top_p), R_PROB},
                {"repetition_penalty", offsetof(wm_hf_gen_config, repetition_penalty), R_POS}};
    for (size_t i = 0; i < 3 && !s; i++)
        if (!(s = member(g->root, nums[i].key, label, "", &c, err)))
            s = as_num_r(c, label, "", nums[i].key, nums[i].r, (double *)((char *)g + nums[i].off), err);
    static const struct {
        const char *key;
        size_t off;
    } ints[] = {{"top_k", offsetof(wm_hf_gen_config, top_k)},
                {"max_length", offsetof(wm_hf_gen_config, max_length)},
                {"max_new_tokens", offsetof(wm_hf_gen_config, max_new_tokens)}};
    for (size_t i = 0; i < 3 && !s; i++)
        if (!(s = member(g->root, ints[i].key, label, "", &c, err)))
            s = as_int(c, label, "", ints[i].key, 0, INT32_MAX, (int64_t *)((char *)g + ints[i].off), err);
    if (!s && !(s = member(g->root, "do_sample", label, "", &c, err))) s = as_bool(c, label, "", "do_sample", &g->do_sample, err);
    if (s) wm_hf_gen_config_free(g);
    return s;
}

void wm_hf_gen_config_free(wm_hf_gen_config *g) {
    if (!g) return;
    cJSON_Delete(g->root);
    g->root = NULL;
}

/* ------------------------------------------------------- tokenizer config */

/* A special token: "text" or {"content": "text", ...}. */
static wm_status special_token(const cJSON *o, const char *label, const char *key, const char **out, wm_error *err) {
    cJSON *c;
    wm_status s = member(o, key, label, "", &c, err);
    if (s || !c || cJSON_IsNull(c)) return s;
    if (cJSON_IsObject(c)) {
        cJSON *content;
        char where[64];
        snprintf(where, sizeof where, "%s.", key);
        if ((s = member(c, "content", label, where, &content, err))) return s;
        if (!content)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': an object without 'content'", label, key);
        return as_str(content, label, where, "content", out, err);
    }
    return as_str(c, label, "", key, out, err);
}

wm_status wm_hf_tok_config_parse(const char *text, size_t n, const char *label, wm_hf_tok_config *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    t->model_max_length = NAN;
    if (!label) label = "tokenizer_config.json";
    wm_status s = wm_hf_json_parse(text, n, WM_HF_TOKCONFIG_MAX_BYTES, label, &t->root, err);
    if (s) return s;
    static const struct {
        const char *key;
        size_t off;
    } toks[] = {{"bos_token", offsetof(wm_hf_tok_config, bos_token)},
                {"eos_token", offsetof(wm_hf_tok_config, eos_token)},
                {"pad_token", offsetof(wm_hf_tok_config, pad_token)},
                {"unk_token", offsetof(wm_hf_tok_config, unk_token)}};
    for (size_t i = 0; i < 4 && !s; i++)
        s = special_token(t->root, label, toks[i].key, (const char **)((char *)t + toks[i].off), err);
    cJSON *c = NULL;
    if (!s && !(s = member(t->root, "chat_template", label, "", &c, err)) && c && !cJSON_IsNull(c)) {
        if (cJSON_IsString(c)) {
            t->chat_template = c->valuestring;
            t->n_chat_templates = 1;
        } else if (cJSON_IsArray(c)) {
            const cJSON *e;
            size_t i = 0;
            cJSON_ArrayForEach(e, c) {
                cJSON *name = NULL, *tmpl = NULL;
                if (!cJSON_IsObject(e)) {
                    s = wm_err(err, WM_ERR_INPUT, "%s: field 'chat_template[%zu]': expected {name, template}, got %s",
                               label, i, kind_name(e));
                    break;
                }
                const char *nm = NULL, *tx = NULL;
                if ((s = member(e, "name", label, "chat_template[].", &name, err)) ||
                    (s = member(e, "template", label, "chat_template[].", &tmpl, err)) ||
                    (s = as_str(name, label, "chat_template[].", "name", &nm, err)) ||
                    (s = as_str(tmpl, label, "chat_template[].", "template", &tx, err)))
                    break;
                if (!nm || !tx) {
                    s = wm_err(err, WM_ERR_INPUT, "%s: field 'chat_template[%zu]': needs both 'name' and 'template'",
                               label, i);
                    break;
                }
                if (!t->chat_template || !strcmp(nm, "default")) t->chat_template = tx;
                i++;
            }
            t->n_chat_templates = i;
        } else {
            s = wm_err(err, WM_ERR_INPUT, "%s: field 'chat_template': expected a string or a list, got %s", label,
                       kind_name(c));
        }
    }
    if (!s && !(s = member(t->root, "model_max_length", label, "", &c, err)))
        s = as_num_r(c, label, "", "model_max_length", R_POS, &t->model_max_length, err);
    if (!s && !(s = member(t->root, "tokenizer_class", label, "", &c, err)))
        s = as_str(c, label, "", "tokenizer_class", &t->tokenizer_class, err);
    if (s) wm_hf_tok_config_free(t);
    return s;
}

void wm_hf_tok_config_free(wm_hf_tok_config *t) {
    if (!t) return;
    cJSON_Delete(t->root);
    t->root = NULL;
}

/* ------------------------------------------------------------- checkpoint */

/* *present: DIR/NAME is a regular file (1) or absent (0); an error when something else is there */
static wm_status is_file(const char *dir, const char *name, int *present, wm_error *err) {
    char p[PATH_MAX];
    *present = 0;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p)
        return wm_err(err, WM_ERR_INPUT, "%.200s/%s: path too long", dir, name);
    return wm_input_present(p, present, err);
}

int wm_hf_is_checkpoint_dir(const char *path) {
    struct stat st;
    char p[PATH_MAX];
    /* config.json of any kind: opening it then says what is wrong with it */
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
           (size_t)snprintf(p, sizeof p, "%s/config.json", path) < sizeof p && lstat(p, &st) == 0;
}

typedef wm_status (*parse_fn)(const char *, size_t, const char *, void *, wm_error *);

static wm_status load_optional(const char *dir, const char *name, parse_fn fn, void *out, int *has, wm_error *err) {
    *has = 0;
    int present;
    wm_status s = is_file(dir, name, &present, err);
    if (s || !present) return s;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    wm_map m;
    s = wm_map_file(p, 0, &m, err);
    if (s) return s;
    s = fn(m.data ? (const char *)m.data : "", m.size, p, out, err);
    wm_unmap(&m);
    if (!s) *has = 1;
    return s;
}

static wm_status gen_parse(const char *t, size_t n, const char *l, void *o, wm_error *e) {
    return wm_hf_gen_config_parse(t, n, l, o, e);
}
static wm_status tok_parse(const char *t, size_t n, const char *l, void *o, wm_error *e) {
    return wm_hf_tok_config_parse(t, n, l, o, e);
}

wm_status wm_hf_open_checkpoint(const char *spec, wm_hf_checkpoint *ck, wm_error *err) {
    memset(ck, 0, sizeof *ck);
    struct stat st;
    if (!spec || !*spec) return wm_err(err, WM_ERR_USAGE, "no model given (-m)");
    if (stat(spec, &st) != 0) {
        /* not a path: ORG/NAME[@REV] in the Hugging Face cache, downloaded on a miss (unless offline) */
        wm_hf_resolve_opts ro = {.need_set = 1, .need = WM_HF_NEED_CONFIG | WM_HF_NEED_TOKENIZER,
                                 .progress = isatty(2)};
        wm_status rs = wm_hf_resolve(spec, &ro, ck->dir, sizeof ck->dir, ck->root, sizeof ck->root, err);
        if (rs) return rs;
    } else {
        if (!S_ISDIR(st.st_mode)) return wm_err(err, WM_ERR_INPUT, "%s: not a checkpoint folder", spec);
        if ((size_t)snprintf(ck->dir, sizeof ck->dir, "%s", spec) >= sizeof ck->dir)
            return wm_err(err, WM_ERR_INPUT, "%s: path too long", spec);
    }
    size_t L = strlen(ck->dir);
    while (L > 1 && ck->dir[L - 1] == '/') ck->dir[--L] = 0;
    int r;
    wm_status s = is_file(ck->dir, "config.json", &r, err);
    if (s) return s;
    if (!r) return wm_err(err, WM_ERR_INPUT, "%s/config.json: missing (not a Hugging Face checkpoint folder)", ck->dir);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/config.json", ck->dir);
    s = wm_hf_config_load(p, &ck->config, err);
    if (s) return s;
    if ((s = load_optional(ck->dir, "generation_config.json", gen_parse, &ck->gen, &ck->has_gen, err)) ||
        (s = load_optional(ck->dir, "tokenizer_config.json", tok_parse, &ck->tok, &ck->has_tok, err))) {
        wm_hf_checkpoint_free(ck);
        return s;
    }
    static const char *const weights[] = {"model.safetensors.index.json", "model.safetensors"};
    for (size_t i = 0; i < 2 && !ck->weights[0]; i++) {
        if ((s = is_file(ck->dir, weights[i], &r, err))) {
            wm_hf_checkpoint_free(ck);
            return s;
        }
        if (r) snprintf(ck->weights, sizeof ck->weights, "%s/%s", ck->dir, weights[i]);
    }
    static const char *const pickles[] = {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth",
                                          "model.ckpt", "tf_model.h5", "flax_model.msgpack"};
    for (size_t i = 0; i < sizeof pickles / sizeof pickles[0] && !ck->pickle[0]; i++) {
        wm_error ignored = {0}; /* only named in a message when there are no safetensors */
        if (!is_file(ck->dir, pickles[i], &r, &ignored) && r) snprintf(ck->pickle, sizeof ck->pickle, "%s", pickles[i]);
    }
    return WM_OK;
}

void wm_hf_checkpoint_free(wm_hf_checkpoint *ck) {
    if (!ck) return;
    wm_hf_config_free(&ck->config);
    if (ck->has_gen) wm_hf_gen_config_free(&ck->gen);
    if (ck->has_tok) wm_hf_tok_config_free(&ck->tok);
    ck->has_gen = ck->has_tok = 0;
    for (size_t i = 0; i < ck->n_made; i++) free(ck->made[i].text);
    ck->n_made = 0;
}
