/*
 * arch.c - resolving a checkpoint into a wm_arch from the tables in
 * arch_tables.c (see arch.h).
 */
#include "builder/arch_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"

static const char *const task_names[WM_TASK_COUNT] = {
    [WM_TASK_TEXT_GENERATION] = "text-generation",
    [WM_TASK_TEXT_CLASSIFICATION] = "text-classification",
    [WM_TASK_FEATURE_EXTRACTION] = "feature-extraction",
    [WM_TASK_TOKEN_CLASSIFICATION] = "token-classification",
    [WM_TASK_QUESTION_ANSWERING] = "question-answering",
    [WM_TASK_FILL_MASK] = "fill-mask",
    [WM_TASK_IMAGE_CLASSIFICATION] = "image-classification",
    [WM_TASK_IMAGE_FEATURE_EXTRACTION] = "image-feature-extraction",
    [WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION] = "zero-shot-image-classification",
    [WM_TASK_TEXT2TEXT_GENERATION] = "text2text-generation",
    [WM_TASK_AUDIO_CLASSIFICATION] = "audio-classification",
    [WM_TASK_ASR] = "automatic-speech-recognition",
    [WM_TASK_IMAGE_TO_TEXT] = "image-to-text",
    [WM_TASK_KEYPOINT_DETECTION] = "keypoint-detection",
};

const char *wm_task_name(int t) { return t >= 0 && t < WM_TASK_COUNT ? task_names[t] : "unknown"; }

int wm_task_is_image(int t) {
    return t == WM_TASK_IMAGE_CLASSIFICATION || t == WM_TASK_IMAGE_FEATURE_EXTRACTION ||
           t == WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION || t == WM_TASK_IMAGE_TO_TEXT || t == WM_TASK_KEYPOINT_DETECTION;
}

int wm_task_is_audio(int t) { return t == WM_TASK_AUDIO_CLASSIFICATION || t == WM_TASK_ASR; }

int wm_task_from_name(const char *s) {
    for (int t = 0; s && t < WM_TASK_COUNT; t++)
        if (!strcmp(s, task_names[t])) return t;
    return -1;
}

static const char *const mod_names[WM_M_COUNT] = {
#define X(e, n) n,
    WM_MOD_LIST(X)
#undef X
};

const char *wm_mod_name(int m) { return m >= 0 && m < WM_M_COUNT ? mod_names[m] : "?"; }

const char *wm_act_name(wm_act a) {
    static const char *const n[] = {"none", "gelu", "gelu_tanh", "silu", "relu", "quick_gelu", "tanh"};
    return (unsigned)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

wm_module *arch_mod_mut(const wm_arch *a, int layer, int m) { return &a->mods[(size_t)(layer + 1) * WM_M_COUNT + m]; }

const wm_module *wm_arch_mod(const wm_arch *a, int layer, int m) { return arch_mod_mut(a, layer, m); }

wm_norm_spec wm_arch_norm(const wm_arch *a) { return (wm_norm_spec){a->norm, a->eps, a->norm_offset}; }

void wm_arch_free(wm_arch *a) {
    if (!a) return;
    for (int t = 0; t < 2; t++) {
        if (a->tower[t]) wm_arch_free(a->tower[t]);
        free(a->tower[t]);
        if (a->tower_cfg[t]) wm_hf_config_free(a->tower_cfg[t]);
        free(a->tower_cfg[t]);
    }
    free(a->mods);
    free(a->sliding);
    free(a->nope);
    free(a->moe_layer);
    free(a->rope.inv_freq);
    free(a->rope.inv_freq_long);
    free(a->rope_local.inv_freq);
    free(a->rope_local.inv_freq_long);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------- lookups */

static const wm_family *find_family(const char *mt) {
    for (size_t i = 0; mt && i < wm_n_families; i++)
        if (!strcmp(wm_families[i].model_type, mt)) return &wm_families[i];
    return NULL;
}

const wm_scheme *arch_find_scheme(const char *name) {
    for (size_t i = 0; i < wm_n_schemes; i++)
        if (!strcmp(wm_schemes[i].name, name)) return &wm_schemes[i];
    return NULL;
}

int wm_arch_family_kind(const char *model_type) {
    for (const wm_denied_type *d = wm_denied_types; model_type && d->model_type; d++)
        if (!strcmp(d->model_type, model_type)) return -1;
    if (wm_vis_find(model_type)) return WM_ENCODER; /* image models and CLIP's towers: encoders */
    const wm_family *f = find_family(model_type);
    const wm_scheme *s = f ? arch_find_scheme(f->scheme) : NULL;
    return s ? (int)s->kind : -1;
}

/* The tasks a text family of kind can serve: decoders text-generation, encoders the other text tasks. */
static int text_kind_serves(int kind, int task) {
    if (kind == WM_DECODER) return task == WM_TASK_TEXT_GENERATION;
    return task >= 0 && task < WM_TASK_COUNT && task != WM_TASK_TEXT_GENERATION && !wm_task_is_image(task) &&
           task != WM_TASK_TEXT2TEXT_GENERATION && !wm_task_is_audio(task);
}

int wm_arch_family_serves(const char *model_type, int task) {
    const wm_vis_family *v = wm_vis_find(model_type);
    if (v) {
        wm_arch a = {.fam = v};
        int tasks[WM_TASK_COUNT];
        size_t n = wm_vis_tasks(&a, tasks);
        for (size_t i = 0; i < n; i++)
            if (tasks[i] == task) return 1;
        return 0;
    }
    int kind = wm_arch_family_kind(model_type);
    return kind >= 0 && text_kind_serves(kind, task);
}

const char *wm_arch_tower_parent(const char *model_type) {
    for (size_t i = 0; model_type && i < wm_n_vis_families; i++)
        for (int t = 0; t < 2; t++)
            if (wm_vis_families[i].towers[t] && !strcmp(wm_vis_families[i].towers[t], model_type))
                return wm_vis_families[i].model_type;
    return NULL;
}

void wm_arch_family_names(char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < wm_n_families && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", wm_families[i].model_type);
    for (size_t i = 0; i < wm_n_vis_families && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, ", %s", wm_vis_families[i].model_type);
    for (size_t i = 0; wm_s2s_type(i) && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, ", %s", wm_s2s_type(i));
}

static const wm_modpat *scheme_pat(const wm_scheme *s, int m) {
    for (size_t i = 0; i < s->n_mods; i++)
        if (s->mods[i].mod == m) return &s->mods[i];
    return NULL;
}

/* Expands pat ('$' -> prefix, %d -> layer) + suffix into out; 0 when it does not fit. */
int arch_expand(const char *pat, const char *prefix, int layer, const char *suffix, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = pat; *p; p++) {
        char buf[32];
        const char *piece = buf;
        if (*p == '$') piece = prefix;
        else if (p[0] == '%' && p[1] == 'd') {
            snprintf(buf, sizeof buf, "%d", layer);
            p++;
        } else {
            buf[0] = *p;
            buf[1] = 0;
        }
        size_t L = strlen(piece);
        if (k + L >= n) return 0;
        memcpy(out + k, piece, L);
        k += L;
    }
    size_t L = strlen(suffix);
    if (k + L >= n) return 0;
    memcpy(out + k, suffix, L + 1);
    return 1;
}

const wm_st_tensor *arch_st_find(const wm_st_file *st, const char *name) { return st ? wm_st_find(st, name) : NULL; }

wm_status arch_check_tensor(const wm_st_file *st, const char *name, const int64_t *shape, size_t rank,
                            const char *missing_why, const char *shape_from, wm_error *err) {
    const wm_st_tensor *t = arch_st_find(st, name);
    if (!t) return wm_err(err, WM_ERR_INPUT, "missing tensor '%s' (%s)", name, missing_why);
    int same = t->rank == rank;
    for (size_t i = 0; same && i < rank; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[96];
        size_t u = 0;
        for (size_t i = 0; i < rank && u < sizeof want; i++)
            u += (size_t)snprintf(want + u, sizeof want - u, "%s%lld", i ? ", " : "", (long long)shape[i]);
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': expected shape [%s] from %s", name, want, shape_from);
    }
    int32_t dt = wm_st_dtype_onnx(t->dtype);
    if (dt != 1 && dt != 10 && dt != 16 && dt != 11)
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, F16, BF16, F64)", name,
                      wm_st_dtype_name(t->dtype));
    return WM_OK;
}

static int64_t dim_value(const wm_arch *a, int d) {
    switch (d) {
    case D_V: return a->V;
    case D_H: return a->H;
    case D_E: return a->E;
    case D_I: return a->I;
    case D_I2: return 2 * a->I;
    case D_Q: return a->nh * a->hd;
    case D_KV: return a->kvh * a->hd;
    case D_QKV: return (a->nh + 2 * a->kvh) * a->hd;
    case D_P: return a->P;
    case D_T: return a->T;
    case D_HD: return a->hd;
    case D_L: return a->labels;
    case D_2: return 2;
    case D_1: return 1;
    case D_2H: return 2 * a->H;
    case D_PIN: return a->C * a->patch * a->patch;
    case D_NPOS: return a->n_pos;
    case D_REG: return a->n_reg;
    case D_PROJ: return a->proj;
    case D_3H: return 3 * a->H;
    case D_RB: return a->rel_rows;
    case D_NH: return a->nh;
    case D_2SPAN: return 2 * a->dis_span;
    case D_CONV: return a->n_conv ? a->conv_dim[a->n_conv - 1] : 0;
    case D_NEXP: return a->n_experts;
    case D_SHI: return a->shared_I;
    case D_SHI2: return 2 * a->shared_I;
    case D_HNP: return a->H - a->part;
    case D_PART: return a->part;
    default: return 0;
    }
}

/* ------------------------------------------------------------- checks */

static wm_status check_keys(const wm_arch *a, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    const wm_family *f = a->fam;
    for (const wm_denied_key *d = wm_denied_keys; d->key; d++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, d->key);
        if (!v || cJSON_IsNull(v) || d->how == WM_DENY_NONE) continue;
        if (d->fk && f->keys[d->fk] != WM_KEY_DENY) continue; /* the family models it, or never reads it */
        int bad = 0;
        switch (d->how) {
        case WM_DENY_TRUE: bad = cJSON_IsTrue(v); break;
        case WM_DENY_TRUE_ENCODER: bad = cJSON_IsTrue(v) && a->kind == WM_ENCODER; break;
        case WM_DENY_SET:
            bad = !cJSON_IsFalse(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0) &&
                  !(cJSON_IsString(v) && !*v->valuestring);
            break;
        case WM_DENY_NOT_ABSOLUTE: bad = !cJSON_IsString(v) || strcmp(v->valuestring, "absolute"); break;
        }
        if (bad)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': this setting changes the math in a way the "
                          "builder does not model (not supported)", c->file, d->key);
    }
    return WM_OK;
}

/* The activation: from the family's own key when it reads one (config.c checked every alias is a string). */
wm_status arch_resolve_act(wm_arch *a, const wm_family *f, wm_error *err) {
    const char *name = a->cfg->activation, *key = a->cfg->key_act;
    if (f->act_key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, f->act_key);
        name = cJSON_IsString(v) ? v->valuestring : NULL;
        key = f->act_key;
    }
    if (!name) name = f->act;
    for (const wm_act_name_row *r = wm_act_names; r->name; r++)
        if (!strcmp(r->name, name)) {
            a->act = r->act == WM_ACT_GELU && f->gelu_is_tanh ? WM_ACT_GELU_TANH : r->act;
            return WM_OK;
        }
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': activation '%s' is not supported (gelu, gelu_new, "
                  "gelu_pytorch_tanh, gelu_fast, silu, swish, relu, quick_gelu, tanh)", a->cfg->file,
                  key ? key : "hidden_act", name);
}

static wm_status need(const wm_arch *a, int64_t v, const char *key, wm_error *err) {
    if (v > 0) return WM_OK;
    return wm_err(err, WM_ERR_INPUT, "%s: field '%s': missing (needed to build the graph)", a->cfg->file, key);
}

/* The relative position bias table's rows: relative_attention_num_buckets, at least the buckets computed. */
static wm_status resolve_rel_bias(wm_arch *a, const wm_family *f, wm_error *err) {
    if (!f->rel_buckets) return WM_OK;
    const char *key = "relative_attention_num_buckets";
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    int64_t rows = f->rel_buckets;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
            v->valuedouble > 1e6)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an integer from 1 to 1000000", a->cfg->file,
                          key);
        rows = (int64_t)v->valuedouble;
    }
    if (rows < f->rel_buckets)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %lld rows, fewer than the %d buckets model_type '%s' "
                      "computes", a->cfg->file, key, (long long)rows, f->rel_buckets, a->model_type);
    a->rel_buckets = f->rel_buckets;
    a->rel_max_dist = f->rel_max_distance;
    a->rel_rows = rows;
    return WM_OK;
}

/* An integer config key (def when absent or null); 0 and an error when it is no integer in [lo, hi]. */
int arch_cfg_int(const wm_arch *a, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out,
                   wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return 1;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an integer from %lld to %lld", a->cfg->file, key,
               (long long)lo, (long long)hi);
        return 0;
    }
    *out = (int64_t)v->valuedouble;
    return 1;
}

/* A boolean config key (def when absent or null); -1 when it is no boolean. */
static int cfg_bool(const wm_arch *a, const char *key, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    if (!v || cJSON_IsNull(v)) return def;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

/* Whether the '|'-separated list (string) or array v names item; -1 when v holds anything but known names. */
static int list_has(const cJSON *v, const char *item, const char *const *known) {
    char buf[128];
    int found = 0;
    const cJSON *e = cJSON_IsArray(v) ? v->child : NULL;
    const char *str = cJSON_IsString(v) ? v->valuestring : NULL;
    if (!str && !cJSON_IsArray(v)) return -1;
    for (;;) {
        const char *w;
        if (str) {
            while (*str == '|' || *str == ' ') str++;
            if (!*str) break;
            size_t n = strcspn(str, "|");
            if (n >= sizeof buf) return -1;
            memcpy(buf, str, n);
            buf[n] = 0;
            while (n && buf[n - 1] == ' ') buf[--n] = 0;
            for (char *c = buf; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            str += n;
            w = buf;
        } else {
            if (!e) break;
            if (!cJSON_IsString(e)) return -1;
            w = e->valuestring;
            e = e->next;
        }
        int ok = 0;
        for (const char *const *k = known; *k; k++) ok |= !strcmp(*k, w);
        if (!ok) return -1;
        found |= !strcmp(w, item);
    }
    return found;
}

/* DeBERTa's disentangled attention and absolute positions from its config keys. */
static wm_status resolve_disentangled(wm_arch *a, const wm_family *f, wm_error *err) {
    a->abs_pos = 1;
    if (!f->disentangled) return WM_OK;
    const char *file = a->cfg->file;
    int rel = cfg_bool(a, "relative_attention", 0), share = cfg_bool(a, "share_att_key", 0);
    a->abs_pos = cfg_bool(a, "position_biased_input", 1);
    const char *bad = rel < 0 ? "relative_attention" : share < 0 ? "share_att_key"
                      : a->abs_pos < 0 ? "position_biased_input" : NULL;
    if (bad) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", file, bad);
    static const char *const att_known[] = {"c2p", "p2c", NULL}, *const norm_known[] = {"layer_norm", "none", NULL};
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(a->cfg->root, "pos_att_type");
    if (pt && !cJSON_IsNull(pt)) {
        int c2p = list_has(pt, "c2p", att_known), p2c = list_has(pt, "p2c", att_known);
        if (c2p < 0 || p2c < 0)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'pos_att_type': only c2p and p2c are modeled (a list "
                          "or a '|'-separated string)", file);
        a->dis_c2p = c2p;
        a->dis_p2c = p2c;
    }
    a->dis_scale = 1 + a->dis_c2p + a->dis_p2c; /* transformers scales by these whether relative_attention or not */
    int64_t P = a->P;
    if (!arch_cfg_int(a, "max_relative_positions", -1, INT32_MIN, 1 << 20, &a->dis_max_rel, err) ||
        !arch_cfg_int(a, "position_buckets", -1, INT32_MIN, 1 << 20, &a->dis_buckets, err))
        return err->status;
    if (a->dis_max_rel < 1) a->dis_max_rel = P;
    if (a->dis_buckets < 0) a->dis_buckets = 0;
    if (rel && a->dis_buckets > 0 && (a->dis_buckets < 2 || a->dis_max_rel - 1 <= a->dis_buckets / 2))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'position_buckets': %lld buckets need at least 2 and "
                      "max_relative_positions (%lld) above half of them + 1", file, (long long)a->dis_buckets,
                      (long long)a->dis_max_rel);
    a->dis_span = a->dis_buckets > 0 ? a->dis_buckets : a->dis_max_rel;
    if (!rel) {
        a->dis_c2p = a->dis_p2c = 0; /* no relative terms; the scale stays */
        a->dis_span = 0;
    } else if (a->dis_span < 1)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'max_relative_positions': relative_attention needs it or "
                      "max_position_embeddings", file);
    const cJSON *nr = cJSON_GetObjectItemCaseSensitive(a->cfg->root, "norm_rel_ebd");
    int rel_norm = 0;
    if (nr && !cJSON_IsNull(nr) && (rel_norm = list_has(nr, "layer_norm", norm_known)) < 0)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'norm_rel_ebd': only 'layer_norm' and 'none' are modeled",
                      file);
    a->dis_share_key = share;
    a->dis_rel_norm = rel && rel_norm;
    int64_t hs;
    if (!arch_cfg_int(a, "attention_head_size", a->hd, 1, 1 << 20, &hs, err)) return err->status;
    if (hs != a->hd)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'attention_head_size': %lld differs from hidden_size / "
                      "num_attention_heads (%lld): not modeled", file, (long long)hs, (long long)a->hd);
    return WM_OK;
}

static wm_status resolve_sizes(wm_arch *a, const wm_family *f, const wm_scheme *s, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    wm_status st;
    a->V = c->vocab_size;
    a->H = c->hidden_size;
    a->L = c->num_layers;
    a->nh = c->num_heads;
    if ((st = need(a, a->V, "vocab_size", err)) || (st = need(a, a->H, "hidden_size", err)) ||
        (st = need(a, a->L, "num_hidden_layers", err)) || (st = need(a, a->nh, "num_attention_heads", err)))
        return st;
    a->kvh = c->num_kv_heads > 0 ? c->num_kv_heads : a->nh;
    if (a->nh % a->kvh)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_key_value_heads': %lld does not divide num_attention_heads "
                      "%lld", c->file, (long long)a->kvh, (long long)a->nh);
    if (c->head_dim > 0) a->hd = c->head_dim;
    else if (a->H % a->nh)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_attention_heads': %lld does not divide hidden_size %lld and "
                      "there is no head_dim", c->file, (long long)a->nh, (long long)a->H);
    else a->hd = a->H / a->nh;
    a->I = c->intermediate_size > 0 ? c->intermediate_size : f->inter_mult * a->H;
    if ((st = need(a, a->I, "intermediate_size", err))) return st;
    a->E = c->embedding_size > 0 ? c->embedding_size : a->H;
    a->P = c->max_positions;
    if (s->pos == WM_POS_LEARNED && (st = need(a, a->P, c->key_positions ? c->key_positions : "max_position_embeddings", err)))
        return st;
    a->T = c->type_vocab_size >= 0 ? c->type_vocab_size : f->type_vocab;
    a->labels = c->num_labels > 0 ? c->num_labels : 2;
    a->eps = !isnan(c->norm_eps) ? c->norm_eps : f->eps;
    a->pad_id = f->pad_fixed ? f->padding_idx : c->pad.n ? c->pad.v[0] : 1;
    if ((st = resolve_rel_bias(a, f, err)) || (st = resolve_disentangled(a, f, err))) return st;
    if (a->E != a->H && !scheme_pat(s, WM_M_G_EMB_PROJ))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'embedding_size': %lld differs from hidden_size %lld; "
                      "naming scheme '%s' has no embedding projection here", c->file, (long long)a->E,
                      (long long)a->H, s->name);
    /* keep products far from overflow: every dim <= 2^31, layers <= 4096 */
    uint64_t p;
    if (!wm_mul_u64((uint64_t)a->V, (uint64_t)a->E, &p) || p > (1ull << 40))
        return wm_err(err, WM_ERR_INPUT, "%s: vocab_size x hidden_size is over 2^40 parameters", c->file);
    return WM_OK;
}

static wm_status resolve_task(wm_arch *a, const wm_family *f, int task, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    const char *arch0 = c->n_architectures ? c->architectures[0] : NULL;
    const char *stem_end = NULL;
    int own = -1;
    for (const wm_arch_suffix *x = wm_arch_suffixes; arch0 && x->suffix; x++) {
        size_t L = strlen(arch0), k = strlen(x->suffix);
        if (L > k && !strcmp(arch0 + L - k, x->suffix)) {
            own = (int)x->task;
            stem_end = arch0 + L - k;
            break;
        }
    }
    if (own < 0) own = a->kind == WM_DECODER ? WM_TASK_TEXT_GENERATION : WM_TASK_FEATURE_EXTRACTION;
    if (task < 0) task = own;
    int ok = a->kind == WM_DECODER ? task == WM_TASK_TEXT_GENERATION : task != WM_TASK_TEXT_GENERATION;
    if (!ok)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: task '%s' is not supported for model_type '%s' (%s: %s)", c->file,
                      wm_task_name(task), a->model_type, a->kind == WM_DECODER ? "a decoder" : "an encoder",
                      a->kind == WM_DECODER ? "text-generation"
                                            : "text-classification, feature-extraction, token-classification, "
                                              "question-answering, fill-mask");
    a->task = (wm_task)task;
    char stem[96];
    if (stem_end) snprintf(stem, sizeof stem, "%.*s", (int)(stem_end - arch0), arch0);
    else snprintf(stem, sizeof stem, "%s", f->class_stem);
    const char *suf = task == WM_TASK_TEXT_GENERATION && f->lm_suffix ? f->lm_suffix : wm_task_class_suffix[task];
    snprintf(a->inference_class, sizeof a->inference_class, "%s%s", stem, suf);
    return WM_OK;
}

/* The prefix whose embedding tensor exists (family's own first). */
static int find_prefix(wm_arch *a, const wm_family *f, const wm_scheme *s, const wm_st_file *st) {
    const wm_modpat *e = scheme_pat(s, WM_M_G_EMBED);
    const char *cands[8] = {f->prefix};
    size_t n = 1;
    for (size_t i = 0; i < 5 && s->prefixes[i]; i++) cands[n++] = s->prefixes[i];
    if (!s->prefixes[0] || strcmp(s->prefixes[0], "")) cands[n++] = ""; /* always try none last */
    for (size_t i = 0; i < n; i++) {
        char name[256];
        if (arch_expand(e->pat, cands[i], 0, ".weight", name, sizeof name) && arch_st_find(st, name)) {
            snprintf(a->prefix, sizeof a->prefix, "%s", cands[i]);
            return 1;
        }
    }
    return 0;
}

/* A scheme whose embedding and layer-0 attention output tensors exist (unknown model_type with weights). */
static const wm_family *detect_by_tensors(wm_arch *a, const wm_st_file *st, const wm_scheme **sch) {
    for (size_t i = 0; i < wm_n_schemes; i++) {
        const wm_scheme *s = &wm_schemes[i];
        const wm_family *f = find_family(s->default_family);
        if (!f || !find_prefix(a, f, s, st)) continue;
        char name[256];
        const wm_modpat *o = scheme_pat(s, WM_M_L_O);
        if (o && arch_expand(o->pat, a->prefix, 0, ".weight", name, sizeof name) && arch_st_find(st, name)) {
            *sch = s;
            return f;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------- modules */


/* Looks up (real) or decides (random) one module. */
wm_status arch_fill_module(wm_arch *a, const wm_st_file *st, const arch_want *w, wm_error *err) {
    wm_module *m = arch_mod_mut(a, w->layer, w->mod);
    m->kind = w->kind;
    m->out = dim_value(a, w->d_out);
    m->in = dim_value(a, w->d_in);
    static const char *const wsuf[] = {".weight", ".gamma"}, *const bsuf[] = {".bias", ".beta"}, *const none[] = {""};
    /* VECTOR and PARAM patterns name the tensor itself */
    int alts = w->kind == WM_MK_NORM ? 2 : 1, param = w->kind == WM_MK_PARAM || w->kind == WM_MK_VECTOR;
    for (int k = 0; k < alts; k++) {
        if (!arch_expand(w->pat, a->prefix, w->layer, (param ? none : wsuf)[k], m->w, sizeof m->w) ||
            !arch_expand(w->pat, a->prefix, w->layer, (param ? none : bsuf)[k], m->b, sizeof m->b))
            return wm_err(err, WM_ERR_INPUT, "tensor name of module '%s' too long", wm_mod_name(w->mod));
        if (a->random) break;
        if ((m->wt = arch_st_find(st, m->w))) break;
    }
    if (!m->wt) { /* name the usual spelling in messages */
        arch_expand(w->pat, a->prefix, w->layer, param ? "" : ".weight", m->w, sizeof m->w);
        arch_expand(w->pat, a->prefix, w->layer, ".bias", m->b, sizeof m->b);
    }
    int bias_ok = w->kind != WM_MK_EMBED && !param && !(w->kind == WM_MK_NORM && a->norm == WM_NORM_RMS);
    if (!w->required && w->mod == WM_M_G_LM_HEAD && a->tied && a->task == WM_TASK_TEXT_GENERATION && m->wt) {
        /* a tied LM head the checkpoint still carries: transformers loads it into the tied matrix and refuses
           another shape; unused here, but a different shape says the checkpoint is not what config.json says */
        wm_module chk = *m;
        chk.present = 1, chk.has_bias = 0;
        wm_status s = arch_check_shape(a, &chk, err);
        if (s) return s;
    }
    if (!w->required) {
        m->present = m->has_bias = 0; /* not part of this structure: a tensor of that name stays unused */
        m->wt = NULL;
    } else if (a->random) {
        m->present = 1;
        m->has_bias = (uint8_t)(w->bias && bias_ok);
    } else {
        m->bt = bias_ok ? arch_st_find(st, m->b) : NULL;
        m->present = m->wt != NULL;
        m->has_bias = m->bt != NULL;
        if (!m->present)
            return wm_err(err, WM_ERR_INPUT, "missing tensor '%s' (module %s of naming scheme '%s')", m->w,
                          wm_mod_name(w->mod), a->scheme);
    }
    if (!m->present) m->w[0] = m->b[0] = 0;
    if (!m->has_bias) m->b[0] = 0;
    return WM_OK;
}

wm_status arch_check_shape(const wm_arch *a, const wm_module *m, wm_error *err) {
    if (a->random || !m->present) return WM_OK;
    if (m->kind == WM_MK_CONV || m->kind == WM_MK_PARAM) return arch_check_shape_nd(a, m, err);
    const wm_st_tensor *ts[2] = {m->wt, m->has_bias ? m->bt : NULL};
    for (int k = 0; k < 2; k++) {
        const wm_st_tensor *t = ts[k];
        if (!t) continue;
        int64_t exp[2];
        size_t rank;
        if (k == 1 || m->kind == WM_MK_NORM || m->kind == WM_MK_VECTOR) {
            rank = 1;
            exp[0] = m->kind == WM_MK_NORM ? m->in : m->out;
        } else if (m->kind == WM_MK_CONV1D) {
            rank = 2;
            exp[0] = m->in;
            exp[1] = m->out;
        } else {
            rank = 2;
            exp[0] = m->out;
            exp[1] = m->in;
        }
        int same = t->rank == rank;
        for (size_t i = 0; same && i < rank; i++) same = t->shape[i] == exp[i];
        if (!same) {
            char got[96] = "", want_s[64];
            size_t used = 0;
            for (size_t i = 0; i < t->rank && used < sizeof got; i++)
                used += (size_t)snprintf(got + used, sizeof got - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
            if (rank == 1) snprintf(want_s, sizeof want_s, "%lld", (long long)exp[0]);
            else snprintf(want_s, sizeof want_s, "%lld, %lld", (long long)exp[0], (long long)exp[1]);
            return wm_err(err, WM_ERR_INPUT, "tensor '%s': shape [%s], expected [%s] from %s", t->name, got, want_s,
                          a->cfg->file);
        }
        int32_t dt = wm_st_dtype_onnx(t->dtype);
        if (dt != 1 && dt != 10 && dt != 16 && dt != 11)
            return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, F16, BF16, F64)",
                          t->name, wm_st_dtype_name(t->dtype));
    }
    return WM_OK;
}

/* Adds the wanted modules of one layer (or the globals for layer -1) to list. */
static size_t layer_wants(const wm_arch *a, const wm_family *f, const wm_scheme *s, int layer, arch_want *list) {
    size_t n = 0;
    int qb = a->qkv_bias, ob = a->o_bias, mb = a->mlp_bias; /* defaults (resolve_layout); tensors decide */
    /* LayerNorm(bias=norm_bias) where the config says so (ModernBERT), else the family's default */
    int norm_b = s->norm == WM_NORM_LAYER && !f->no_norm_bias && cfg_bool(a, "norm_bias", 1) != 0;
    for (size_t i = 0; i < s->n_mods; i++) {
        const wm_modpat *p = &s->mods[i];
        int is_layer = p->mod >= WM_M_FIRST_LAYER;
        if (is_layer != (layer >= 0)) continue;
        arch_want w = {p->mod, layer, p->pat, p->kind, p->d_out, p->d_in, 1, 1};
        switch (p->mod) {
        case WM_M_G_TYPE: w.required = a->T > 0; w.bias = 0; break;
        case WM_M_G_EMB_PROJ: w.required = a->E != a->H; break;
        case WM_M_G_LM_HEAD: w.required = !a->tied && a->task == WM_TASK_TEXT_GENERATION; w.bias = f->lm_bias; break;
        case WM_M_L_MLP_NORM: w.required = !a->mlp_norm_shared; break;
        case WM_M_G_EMBED: w.bias = 0; break;
        case WM_M_G_POS: w.required = a->abs_pos; w.bias = 0; break;
        case WM_M_G_REL_EMB: w.required = a->dis_span > 0; w.bias = 0; break;
        case WM_M_G_REL_NORM: w.required = a->dis_rel_norm; break;
        case WM_M_L_POS_K: w.required = a->dis_c2p && !a->dis_share_key; w.bias = 1; break;
        case WM_M_L_POS_Q: w.required = a->dis_p2c && !a->dis_share_key; w.bias = 1; break;
        case WM_M_G_REL_BIAS: w.required = a->rel_buckets > 0; w.bias = 0; break;
        case WM_M_L_Q: case WM_M_L_K: case WM_M_L_V: w.required = !a->fused_qkv; w.bias = qb; break;
        case WM_M_L_QKV: w.required = a->fused_qkv; w.bias = qb; break;
        case WM_M_L_O: w.bias = ob; break;
        case WM_M_L_Q_NORM: case WM_M_L_K_NORM: w.required = a->qk_norm; w.bias = 0; break;
        case WM_M_L_GATE: w.required = a->gated && !a->fused_gate_up; w.bias = mb; break;
        case WM_M_L_UP: w.required = !a->gated || !a->fused_gate_up; w.bias = mb; break;
        case WM_M_L_GATE_UP: w.required = a->gated && a->fused_gate_up; w.bias = mb; break;
        case WM_M_L_DOWN: w.bias = mb; break;
        case WM_M_L_ATTN_NORM: w.required = !(f->no_first_attn_norm && layer == 0); break;
        case WM_M_L_ROUTER: w.bias = 0; break;
        case WM_M_L_SH_GATE: case WM_M_L_SH_UP: case WM_M_L_SH_GATE_UP: case WM_M_L_SH_DOWN: case WM_M_L_SH_ROUTER:
            w.required = a->shared_I > 0 && (p->mod != WM_M_L_SH_ROUTER || a->shared_gated);
            w.bias = 0;
            break;
        default: break;
        }
        /* a sparse layer's MLP is its experts (router, shared expert); a dense layer's the usual projections */
        int sparse = a->moe_layer && layer >= 0 && a->moe_layer[layer];
        switch (p->mod) {
        case WM_M_L_GATE: case WM_M_L_UP: case WM_M_L_GATE_UP: case WM_M_L_DOWN: w.required &= !sparse; break;
        case WM_M_L_ROUTER: case WM_M_L_SH_GATE: case WM_M_L_SH_UP: case WM_M_L_SH_GATE_UP: case WM_M_L_SH_DOWN:
        case WM_M_L_SH_ROUTER:
            w.required &= sparse;
            break;
        default: break;
        }
        if (p->kind == WM_MK_NORM) w.bias = norm_b;
        list[n++] = w;
    }
    return n;
}

/* A boolean config key into *out (def when absent); an error naming it when it is no boolean. */
static wm_status bool_key(const wm_arch *a, const char *key, int def, int *out, wm_error *err) {
    int v = cfg_bool(a, key, def);
    if (v < 0) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", a->cfg->file, key);
    *out = v;
    return WM_OK;
}

/* Which layers have no rotary positions: no_rope_layers[i] 0, or without the list every
   no_rope_layer_interval-th layer (transformers' SmolLM3 default). */
static wm_status resolve_nope(wm_arch *a, const wm_family *f, wm_error *err) {
    if (f->keys[WM_FK_NOPE] != WM_KEY_USED) return WM_OK;
    const char *file = a->cfg->file;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, "no_rope_layers");
    int64_t every;
    if (!arch_cfg_int(a, "no_rope_layer_interval", 4, 1, 1 << 20, &every, err)) return err->status;
    a->nope = calloc((size_t)a->L, 1);
    if (!a->nope) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!v || cJSON_IsNull(v)) {
        for (int64_t i = 0; i < a->L; i++) a->nope[i] = (i + 1) % every == 0;
        return WM_OK;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != a->L)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'no_rope_layers': expected a list of %lld entries (0 or 1), one "
                      "per layer", file, (long long)a->L);
    int64_t i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || (e->valuedouble != 0 && e->valuedouble != 1))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'no_rope_layers': entry %lld is not 0 or 1", file,
                          (long long)i);
        a->nope[i] = e->valuedouble == 0;
    }
    return WM_OK;
}

/* Layer shape from the family and its config keys: parallel attention + MLP, pre-norms, fused qkv layout, q/k
   norm width, bias defaults, logit scale. */
static wm_status resolve_layout(wm_arch *a, const wm_family *f, const wm_scheme *s, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    wm_status st;
    a->parallel = f->parallel;
    if (f->keys[WM_FK_PARALLEL] == WM_KEY_USED && (st = bool_key(a, "use_parallel_residual", f->parallel,
                                                                 &a->parallel, err)))
        return st;
    a->mlp_norm_shared = a->parallel && (f->shared_norm || !scheme_pat(s, WM_M_L_MLP_NORM));
    a->pre_norms = scheme_pat(s, WM_M_L_ATTN_NORM) != NULL;
    a->qkv_per_head = f->qkv_per_head;
    if (a->qkv_per_head && a->kvh != a->nh)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'num_key_value_heads': %lld kv heads for %lld query heads: "
                      "model_type '%s' fuses q, k and v per head (one of each), grouped KV heads are not modeled",
                      c->file, (long long)a->kvh, (long long)a->nh, a->model_type);
    const wm_modpat *qn = scheme_pat(s, WM_M_L_Q_NORM);
    a->qk_norm_whole = qn && qn->d_in == D_Q;
    a->rope_interleaved = f->rope_interleaved;
    a->qkv_bias = c->attention_bias >= 0 ? c->attention_bias : f->qkv_bias;
    a->o_bias = c->attention_bias >= 0 ? c->attention_bias : f->o_bias;
    a->mlp_bias = c->mlp_bias >= 0 ? c->mlp_bias : f->mlp_bias;
    if (f->bias_key) {
        int v = 0;
        if ((st = bool_key(a, f->bias_key, a->qkv_bias, &v, err))) return st;
        a->qkv_bias = a->o_bias = a->mlp_bias = v;
    }
    if (f->qkv_bias_key && (st = bool_key(a, f->qkv_bias_key, a->qkv_bias, &a->qkv_bias, err))) return st;
    a->logits_mul = 1.0;
    if (f->keys[WM_FK_LOGIT_SCALE] == WM_KEY_USED) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, "logit_scale");
        a->logits_mul = f->logit_scale;
        if (v && !cJSON_IsNull(v)) {
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble == 0 || fabs(v->valuedouble) > 1e6)
                return wm_err(err, WM_ERR_INPUT, "%s: field 'logit_scale': expected a nonzero number within 1e6",
                              c->file);
            a->logits_mul = v->valuedouble;
        }
    }
    return resolve_nope(a, f, err);
}

/* Structure choices: from layer 0's tensors with weights, from the family without. */
static void decide_structure(wm_arch *a, const wm_family *f, const wm_scheme *s, const wm_st_file *st) {
    const wm_hf_config *c = a->cfg;
    a->tied = c->tie_word_embeddings >= 0 ? c->tie_word_embeddings : f->tied;
    a->gated = s->gated;
    a->fused_qkv = scheme_pat(s, WM_M_L_QKV) && (f->fused_qkv || !scheme_pat(s, WM_M_L_Q));
    a->fused_gate_up = f->fused_gate_up;
    a->qk_norm = f->qk_norm;
    a->sub_norms = scheme_pat(s, WM_M_L_ATTN_OUT_NORM) != NULL;
    if (!st) return;
    char name[256];
#define HAS(m) (scheme_pat(s, m) && arch_expand(scheme_pat(s, m)->pat, a->prefix, 0, ".weight", name, sizeof name) && \
                arch_st_find(st, name))
    if (scheme_pat(s, WM_M_L_QKV) && scheme_pat(s, WM_M_L_Q)) a->fused_qkv = HAS(WM_M_L_QKV) && !HAS(WM_M_L_Q);
    if (scheme_pat(s, WM_M_L_GATE_UP)) a->fused_gate_up = HAS(WM_M_L_GATE_UP);
    /* (layer 0 may be sparse: a mixture-of-experts family's dense layers keep the scheme's gated MLP) */
    if (!a->moe_layer && (scheme_pat(s, WM_M_L_GATE) || scheme_pat(s, WM_M_L_GATE_UP)))
        a->gated = HAS(WM_M_L_GATE) || HAS(WM_M_L_GATE_UP);
    a->qk_norm = HAS(WM_M_L_Q_NORM);
    if (scheme_pat(s, WM_M_G_TYPE) && !HAS(WM_M_G_TYPE)) a->T = 0;
#undef HAS
}

static wm_status head_wants(const wm_arch *a, const wm_family *f, arch_want *list, size_t *n) {
    *n = 0;
    int cb = cfg_bool(a, "classifier_bias", 0) == 1;
    if (f->head_transform && a->task != WM_TASK_FEATURE_EXTRACTION) {
        /* dense (+ classifier_bias) + activation + norm on every token or the pooled state, then the task's
           linear: "classifier" for classification, token classification and question answering (2 outputs) */
        const wm_head_def *h = &wm_cls_heads[f->cls_head];
        list[(*n)++] = (arch_want){WM_M_H_0, -1, h->first, WM_MK_LINEAR, D_H, D_H, 1, cb};
        list[(*n)++] = (arch_want){WM_M_H_NORM, -1, h->norm, WM_MK_NORM, D_H, D_H, 1, 1};
        if (a->task == WM_TASK_FILL_MASK)
            list[(*n)++] = (arch_want){WM_M_H_BIAS, -1, wm_mlm_heads[f->mlm_head].bias, WM_MK_VECTOR, D_V, D_1,
                                       cfg_bool(a, "decoder_bias", 1) != 0, 0};
        else
            list[(*n)++] = (arch_want){WM_M_H_1, -1, h->second, WM_MK_LINEAR,
                                       a->task == WM_TASK_QUESTION_ANSWERING ? D_2 : D_L, D_H, 1, 1};
        return WM_OK;
    }
    if (a->task == WM_TASK_TEXT_CLASSIFICATION) {
        if (f->cls_head < 0) return WM_OK;
        const wm_head_def *h = &wm_cls_heads[f->cls_head];
        list[(*n)++] = (arch_want){WM_M_H_0, -1, h->first, WM_MK_LINEAR, D_H, D_H, 1, 1};
        list[(*n)++] = (arch_want){WM_M_H_1, -1, h->second, WM_MK_LINEAR, D_L, D_H, 1, 1};
    } else if (a->task == WM_TASK_TOKEN_CLASSIFICATION) {
        list[(*n)++] = (arch_want){WM_M_H_0, -1, "classifier", WM_MK_LINEAR, D_L, D_H, 1, 1};
    } else if (a->task == WM_TASK_QUESTION_ANSWERING) {
        list[(*n)++] = (arch_want){WM_M_H_0, -1, "qa_outputs", WM_MK_LINEAR, D_2, D_H, 1, 1};
    } else if (a->task == WM_TASK_FILL_MASK && f->mlm_head != WM_MLM_NONE) {
        const wm_mlm_def *h = &wm_mlm_heads[f->mlm_head];
        list[(*n)++] = (arch_want){WM_M_H_0, -1, h->dense, WM_MK_LINEAR, D_H, D_H, 1, 1};
        list[(*n)++] = (arch_want){WM_M_H_NORM, -1, h->norm, WM_MK_NORM, D_H, D_H, 1, 1};
        list[(*n)++] = (arch_want){WM_M_H_BIAS, -1, h->bias, WM_MK_VECTOR, D_V, D_1, 1, 0};
    }
    return WM_OK;
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static int ends(const char *s, const char *p) {
    size_t L = strlen(s), k = strlen(p);
    return L >= k && !strcmp(s + L - k, p);
}

/* Every checkpoint tensor must be used, a known head, or a parameter-free buffer. */
static size_t mods_of(const wm_arch *a) { return (size_t)(a->L + 1) * WM_M_COUNT; }

wm_status arch_check_unused(wm_arch *a, const wm_st_file *st, wm_error *err) {
    const wm_arch *parts[3] = {a, a->tower[0], a->tower[1]};
    size_t n_used = 0, cap = 0, n_res = wm_resnet_names(a, NULL, 0), n_aud = wm_audio_names(a, NULL, 0);
    size_t n_pose = wm_pose_names(a, NULL, 0), n_extra = n_res + n_aud + n_pose + wm_moe_names(a, NULL, 0);
    for (int p = 0; p < 3; p++) cap += parts[p] ? mods_of(parts[p]) * 2 : 0;
    const char **used = malloc((cap + n_extra + 1) * sizeof *used);
    if (!used) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int p = 0; p < 3; p++)
        for (size_t i = 0; parts[p] && i < mods_of(parts[p]); i++) {
            const wm_module *m = &parts[p]->mods[i];
            if (!m->present) continue;
            used[n_used++] = m->w;
            if (m->has_bias) used[n_used++] = m->b;
        }
    char(*extra)[160] = n_extra ? calloc(n_extra, sizeof *extra) : NULL;
    if (n_extra && !extra) {
        free(used);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    if (extra) {
        wm_resnet_names(a, extra, n_res);
        wm_audio_names(a, extra + n_res, n_aud);
        wm_pose_names(a, extra + n_res + n_aud, n_pose);
        wm_moe_names(a, extra + n_res + n_aud + n_pose, n_extra - n_res - n_aud - n_pose);
    }
    for (size_t i = 0; i < n_extra; i++) used[n_used++] = extra[i];
    qsort(used, n_used, sizeof *used, cmp_str);
    wm_status s = WM_OK;
    a->n_unused = 0;
    for (size_t i = 0; i < wm_st_count(st) && !s; i++) {
        const char *name = wm_st_get(st, i)->name;
        if (bsearch(&name, used, n_used, sizeof *used, cmp_str)) continue;
        int ok = 0;
        for (size_t k = 0; wm_buffer_suffixes[k] && !ok; k++) ok = ends(name, wm_buffer_suffixes[k]);
        for (size_t k = 0; wm_head_prefixes[k] && !ok; k++) {
            char pre[128];
            arch_expand(wm_head_prefixes[k], a->prefix, 0, "", pre, sizeof pre);
            ok = starts(name, pre);
        }
        if (!ok && a->tower_of) /* the two-tower checkpoint's other tower and shared parameters */
            ok = starts(name, a->tower_of == 1 ? "vision_model." : "text_model.") || !strcmp(name, "logit_scale") ||
                 !strcmp(name, "logit_bias") ||
                 starts(name, a->tower_of == 1 ? "visual_projection." : "text_projection.");
        if (ok) a->n_unused++;
        else
            s = wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s' is not understood by naming scheme '%s' (model_type "
                       "'%s')", name, a->scheme, a->model_type);
    }
    free(used);
    free(extra);
    return s;
}

static wm_status resolve_sliding(wm_arch *a, const wm_family *f, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    a->sliding = calloc((size_t)a->L, 1);
    if (!a->sliding) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!f->sliding) return WM_OK;
    int any = 0;
    if (c->n_layer_types) {
        if ((int64_t)c->n_layer_types != a->L)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'layer_types': %zu entries for %lld layers", c->file,
                          c->n_layer_types, (long long)a->L);
        for (int64_t i = 0; i < a->L; i++) any |= a->sliding[i] = c->layer_sliding[i];
    } else if (f->pattern_every_key) { /* layers 0, N, 2N ... full attention */
        int64_t n;
        if (!arch_cfg_int(a, f->pattern_every_key, f->sliding_pattern, 1, 4096, &n, err)) return err->status;
        for (int64_t i = 0; i < a->L; i++) any |= a->sliding[i] = i % n != 0;
    } else if (f->sliding_pattern > 0) { /* every Nth layer full attention */
        int64_t n = f->pattern_key && c->sliding_window_pattern > 0 ? c->sliding_window_pattern : f->sliding_pattern;
        for (int64_t i = 0; i < a->L; i++) any |= a->sliding[i] = (i + 1) % n != 0;
    } else if (c->use_sliding_window == 0) {
        return WM_OK;
    } else if (c->use_sliding_window == 1) {
        int64_t from = c->max_window_layers > 0 ? c->max_window_layers : 0;
        for (int64_t i = from; i < a->L; i++) any = a->sliding[i] = 1;
    } else if (c->sliding_window > 0) {
        for (int64_t i = 0; i < a->L; i++) any = a->sliding[i] = 1;
    }
    int64_t w = c->sliding_window > 0 ? c->sliding_window : f->window_default;
    if (f->half_window_key) { /* the whole window: a token sees |i - j| <= half of it (bidirectional) */
        if (!arch_cfg_int(a, f->half_window_key, f->window_default, 2, 1 << 30, &w, err)) return err->status;
        w /= 2;
    }
    if (any && w <= 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'sliding_window': missing but sliding attention is enabled",
                      c->file);
    /* an explicit 0 where layers slide: transformers masks every key (no window is 0 wide); not the default */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(c->root, "sliding_window");
    if (any && !f->half_window_key && cJSON_IsNumber(sw) && sw->valuedouble == 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'sliding_window': 0, but layers use sliding attention (a window "
                      "of 0 keys masks everything); expected a window of at least 1 token", c->file);
    a->window = any ? w : 0;
    return WM_OK;
}

/* Families whose full-attention layers take no rotary positions: those layers into a->nope. */
static wm_status resolve_nope_full(wm_arch *a, const wm_family *f, wm_error *err) {
    if (!f->nope_full) return WM_OK;
    if (!a->nope && !(a->nope = calloc((size_t)a->L, 1))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < a->L; i++) a->nope[i] |= !a->sliding[i];
    return WM_OK;
}

/* RoPE for every layer, and the sliding layers' own when the family gives them one. */
static wm_status resolve_rope(wm_arch *a, const wm_family *f, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    if (c->rope_per_type && !f->local_rope_theta)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'rope_parameters': RoPE per layer type is not modeled for "
                      "model_type '%s'", c->file, a->model_type);
    if (a->pos != WM_POS_ROPE) return WM_OK;
    double prf = f->rotary_factor > 0 ? f->rotary_factor : 1.0, theta = f->rope_theta > 0 ? f->rope_theta : 10000.0;
    const char *keys[2] = {f->partial_key, f->theta_key};
    double *vals[2] = {&prf, &theta};
    for (int k = 0; k < 2; k++) { /* the family's legacy spelling, under the standard key's range check */
        const cJSON *v = keys[k] ? cJSON_GetObjectItemCaseSensitive(c->root, keys[k]) : NULL;
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a number", c->file, keys[k]);
        *vals[k] = v->valuedouble;
    }
    if (keys[0] && !(prf > 0 && prf <= 1))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %g is not in (0, 1]", c->file, keys[0], prf);
    wm_status s = wm_arch_rope_init(a, &c->rope, theta, prf, &a->rope, err);
    if (s || !f->local_rope_theta || !a->window) return s;
    a->local_rope = 1;
    return wm_arch_rope_init(a, &c->rope_local, f->local_rope_theta, prf, &a->rope_local, err);
}

/* Norm weight offset, embedding scale, score scale and soft-capping: family features, values from the config. */
static void resolve_scales(wm_arch *a, const wm_family *f) {
    const wm_hf_config *c = a->cfg;
    a->norm_offset = f->norm_offset ? 1.0f : 0.0f;
    a->embed_scale = f->embed_scale ? (double)(float)sqrt((double)a->H) : 1.0; /* a float32 tensor, as transformers */
    if (f->query_scalar > 0) a->query_scalar = !isnan(c->query_pre_attn_scalar) ? c->query_pre_attn_scalar : f->query_scalar;
    if (f->keys[WM_FK_ATTN_SOFTCAP] == WM_KEY_USED) a->attn_softcap = !isnan(c->attn_softcap) ? c->attn_softcap : f->attn_softcap;
    if (f->keys[WM_FK_FINAL_SOFTCAP] == WM_KEY_USED)
        a->final_softcap = !isnan(c->final_softcap) ? c->final_softcap : f->final_softcap;
    a->resid_scale = a->logits_div = 1.0;
    if (f->keys[WM_FK_MULTIPLIERS] == WM_KEY_USED) {
        if (!isnan(c->embedding_multiplier)) a->embed_scale = c->embedding_multiplier;
        if (!isnan(c->residual_multiplier)) a->resid_scale = c->residual_multiplier;
        if (!isnan(c->attention_multiplier)) a->attn_scale = c->attention_multiplier;
        if (!isnan(c->logits_scaling)) a->logits_div = c->logits_scaling;
    }
}

/* Saturates at UINT64_MAX: a config of absurd sizes is refused by the space and size checks, never wrapped. */
void arch_count_params(wm_arch *a) {
    uint64_t n = wm_resnet_params(a);
    if (!wm_add_u64(n, wm_audio_params(a), &n) || !wm_add_u64(n, wm_moe_params(a), &n) ||
        !wm_add_u64(n, wm_pose_params(a), &n))
        n = UINT64_MAX;
    for (int t = 0; t < 2; t++)
        if (a->tower[t] && !wm_add_u64(n, a->tower[t]->n_params, &n)) n = UINT64_MAX;
    for (size_t i = 0; i < (size_t)(a->L + 1) * WM_M_COUNT; i++) {
        const wm_module *m = &a->mods[i];
        if (!m->present) continue;
        uint64_t w = (uint64_t)m->in;
        if (m->kind != WM_MK_NORM && !wm_mul_u64((uint64_t)m->out, (uint64_t)m->in, &w)) w = UINT64_MAX;
        if (!wm_add_u64(n, w, &n)) n = UINT64_MAX;
        if (m->has_bias && !wm_add_u64(n, (uint64_t)(m->kind == WM_MK_NORM ? m->in : m->out), &n)) n = UINT64_MAX;
    }
    a->n_params = n;
}

static wm_status resolve(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, wm_arch *a, wm_error *err);

/* The head's activation from config key (pooler_hidden_act, classifier_activation; gelu when absent). */
static wm_status head_act_of(wm_arch *a, const char *key, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    const char *name = cJSON_IsString(v) ? v->valuestring : v && !cJSON_IsNull(v) ? "?" : "gelu";
    for (const wm_act_name_row *r = wm_act_names; r->name; r++)
        if (!strcmp(r->name, name)) {
            a->head_act = r->act;
            return WM_OK;
        }
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': activation '%s' is not supported", a->cfg->file, key,
                  name);
}

const char *wm_arch_backbone_key(const char *model_type, const char **backbone_type) {
    const wm_vis_family *f = wm_vis_find(model_type);
    if (!f || !f->backbone_key) return NULL;
    if (backbone_type) *backbone_type = f->backbone_type;
    return f->backbone_key;
}

wm_status wm_arch_resolve_as(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, const char *as_type,
                             wm_arch *a, wm_error *err) {
    const wm_vis_family *f = wm_vis_find(ck->config.model_type);
    for (int t = 0; f && as_type && t < 2; t++)
        if (f->graph == WM_GRAPH_DUAL && !strcmp(f->towers[t], as_type)) {
            memset(a, 0, sizeof *a);
            wm_status s = wm_vis_resolve_tower_of(&ck->config, st, task, t, a, err);
            if (s) wm_arch_free(a);
            return s;
        }
    return wm_arch_resolve(ck, st, task, a, err);
}

int64_t wm_arch_max_tokens(const wm_arch *a) {
    int64_t n = a->P - (a->posid == WM_POSID_PADDING ? a->pad_id + 1 : 0);
    return a->P > 0 && n > 0 ? n : 0;
}

wm_status wm_arch_resolve(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, wm_arch *a, wm_error *err) {
    memset(a, 0, sizeof *a);
    wm_status s = resolve(ck, st, task, a, err);
    if (s) wm_arch_free(a); /* nothing to release after an error */
    return s;
}

static wm_status resolve(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, wm_arch *a, wm_error *err) {
    const wm_hf_config *c = &ck->config;
    a->cfg = c;
    a->random = st == NULL;
    wm_status s = WM_OK;
    if (!c->model_type) return wm_err(err, WM_ERR_INPUT, "%s: field 'model_type': missing", c->file);
    a->model_type = c->model_type;
    for (const wm_denied_type *d = wm_denied_types; d->model_type; d++)
        if (!strcmp(d->model_type, c->model_type))
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'model_type': '%s' is not supported (%s)", c->file,
                          c->model_type, d->why);
    if (wm_vis_find(c->model_type)) return wm_vis_resolve(c, st, task, a, err);
    if (wm_s2s_find(c->model_type)) return wm_s2s_resolve(c, st, task, a, err);
    const wm_family *f = find_family(c->model_type);
    const wm_scheme *sch = f ? arch_find_scheme(f->scheme) : NULL;
    if (!f && st && (f = detect_by_tensors(a, st, &sch))) a->detected = 1;
    if (!f) {
        char known[1024];
        wm_arch_family_names(known, sizeof known);
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'model_type': '%s' is not supported (known: %s%s)", c->file,
                      c->model_type, known, st ? "; its tensor names match no naming scheme" : "");
    }
    a->fam = f;
    a->sch = sch;
    a->scheme = sch->name;
    a->kind = sch->kind;
    a->norm = sch->norm;
    a->post_norm = sch->post_norm;
    a->pos = sch->pos;
    a->posid = f->posid;
    a->mask_rows = f->mask_rows;
    a->conv1d = scheme_pat(sch, WM_M_L_O)->kind == WM_MK_CONV1D;
    a->scale_attn = c->scale_attn_weights != 0;
    a->scale_by_layer = c->scale_attn_by_inverse_layer_idx == 1;
    if ((s = check_keys(a, err)) || (s = resolve_task(a, f, task, err)) || (s = resolve_sizes(a, f, sch, err)) ||
        (s = arch_resolve_act(a, f, err)) || (s = wm_moe_resolve(a, err)))
        return s;
    if (st) {
        if (!find_prefix(a, f, sch, st)) {
            char name[256];
            arch_expand(scheme_pat(sch, WM_M_G_EMBED)->pat, f->prefix, 0, ".weight", name, sizeof name);
            return wm_err(err, WM_ERR_INPUT, "missing tensor '%s' (the token embedding of naming scheme '%s')", name,
                          sch->name);
        }
    } else snprintf(a->prefix, sizeof a->prefix, "%s", f->prefix);
    if ((s = resolve_layout(a, f, sch, err))) return s;
    decide_structure(a, f, sch, st);
    if (a->task == WM_TASK_TEXT_CLASSIFICATION && f->cls_head < 0)
        return wm_err(err, WM_ERR_UNSUPPORTED, "model_type '%s' has no sequence-classification head", a->model_type);
    if (a->task == WM_TASK_FILL_MASK && (f->mlm_head == WM_MLM_NONE || !a->tied || a->E != a->H))
        return wm_err(err, WM_ERR_UNSUPPORTED, "model_type '%s': task 'fill-mask' is not supported (%s)", a->model_type,
                      f->mlm_head == WM_MLM_NONE ? "no masked-LM head for this family here"
                      : !a->tied ? "tie_word_embeddings is false: an untied masked-LM decoder is not built here"
                                 : "embedding_size differs from hidden_size");
    a->mods = calloc((size_t)(a->L + 1) * WM_M_COUNT, sizeof *a->mods);
    if (!a->mods) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    arch_want list[64];
    for (int64_t layer = -1; layer < a->L && !s; layer++) {
        size_t n = layer_wants(a, f, sch, (int)layer, list);
        if (layer < 0) {
            size_t k;
            head_wants(a, f, list + n, &k);
            n += k;
        }
        for (size_t i = 0; i < n && !s; i++)
            if (!(s = arch_fill_module(a, st, &list[i], err))) s = arch_check_shape(a, arch_mod_mut(a, (int)layer, list[i].mod), err);
    }
    if (s) return s;
    a->n_head_mods = wm_arch_mod(a, -1, WM_M_H_1)->present ? 2 : wm_arch_mod(a, -1, WM_M_H_0)->present ? 1 : 0;
    a->head_pool_first = a->task == WM_TASK_TEXT_CLASSIFICATION;
    a->head_act = a->n_head_mods == 2 ? wm_cls_heads[f->cls_head].act : WM_ACT_NONE;
    if (a->n_head_mods == 2 && a->head_act == WM_ACT_NONE && !f->head_act_key &&
        (s = head_act_of(a, "pooler_hidden_act", err)))
        return s;
    if (a->task == WM_TASK_FILL_MASK) /* the masked-LM transform's activation: the head's own, or the model's */
        a->head_act = wm_mlm_heads[f->mlm_head].act != WM_ACT_NONE ? wm_mlm_heads[f->mlm_head].act : a->act;
    a->head_transform = f->head_transform && wm_arch_mod(a, -1, WM_M_H_NORM)->present;
    if (a->head_transform && (s = head_act_of(a, f->head_act_key ? f->head_act_key : "hidden_act", err))) return s;
    if (a->task == WM_TASK_TEXT_CLASSIFICATION && f->pool_key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, f->pool_key);
        const char *p = cJSON_IsString(v) ? v->valuestring : v && !cJSON_IsNull(v) ? "?" : "cls";
        if (strcmp(p, "cls") && strcmp(p, "mean"))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': '%s' (cls or mean)", c->file, f->pool_key, p);
        a->head_pool_mean = !strcmp(p, "mean");
    }
    const wm_module *q0 = wm_arch_mod(a, 0, a->fused_qkv ? WM_M_L_QKV : WM_M_L_Q);
    a->qkv_bias = q0->has_bias;
    a->o_bias = wm_arch_mod(a, 0, WM_M_L_O)->has_bias;
    a->mlp_bias = wm_arch_mod(a, 0, WM_M_L_DOWN)->has_bias;
    if (st && ((s = wm_moe_check(a, st, err)) || (s = arch_check_unused(a, st, err)))) return s;
    if ((s = resolve_sliding(a, f, err)) || (s = resolve_nope_full(a, f, err)) || (s = resolve_rope(a, f, err)))
        return s;
    resolve_scales(a, f);
    arch_count_params(a);
    return WM_OK;
}

size_t wm_arch_tasks(const wm_arch *a, int *out) {
    if (a->graph == WM_GRAPH_S2S) {
        out[0] = a->task; /* the family row's one task */
        return 1;
    }
    if (a->graph != WM_GRAPH_TEXT) return wm_vis_tasks(a, out);
    size_t n = 0;
    const wm_family *f = a->fam;
    for (int t = 0; t < WM_TASK_COUNT; t++) {
        if (!text_kind_serves(a->kind, t)) continue;
        if (t == WM_TASK_TEXT_CLASSIFICATION && f->cls_head < 0) continue;
        if (t == WM_TASK_FILL_MASK && (f->mlm_head == WM_MLM_NONE || !a->tied || a->E != a->H)) continue;
        out[n++] = t;
    }
    return n;
}

void wm_arch_features_json(const wm_arch *a, wm_json *j, const char *key) {
    char b[256];
    wm_json_arr(j, key);
    if (a->graph == WM_GRAPH_S2S) {
        wm_s2s_features(a, j);
        wm_json_arr_end(j);
        return;
    }
    if (a->graph != WM_GRAPH_TEXT) {
        wm_vis_features(a, j);
        wm_json_arr_end(j);
        return;
    }
    if (a->detected) {
        snprintf(b, sizeof b, "model_type '%s' not in the family table: built as naming scheme '%s' from its tensors",
                 a->model_type, a->scheme);
        wm_json_str(j, NULL, b);
    }
    if (!a->abs_pos) wm_json_str(j, NULL, "no absolute positions (position_biased_input false)");
    else if (a->pos == WM_POS_LEARNED) {
        snprintf(b, sizeof b, "learned positions (%lld)%s", (long long)a->P,
                 a->posid == WM_POSID_PADDING ? ", padding-aware position ids (from padding_idx)" : "");
        wm_json_str(j, NULL, b);
    } else {
        snprintf(b, sizeof b, "rotary positions (theta %g, %s%s, %lld of %lld dims%s)%s", a->rope.theta, a->rope.type,
                 a->rope.inv_freq_long ? " short/long" : "", (long long)a->rope.rot_dim, (long long)a->hd,
                 a->rope_interleaved ? ", interleaved pairs" : "", a->local_rope ? " on full-attention layers" : "");
        wm_json_str(j, NULL, b);
        size_t used = 0;
        for (int64_t i = 0; a->nope && i < a->L && used < sizeof b; i++)
            if (a->nope[i])
                used += (size_t)snprintf(b + used, sizeof b - used, "%s%lld", used ? ", " : "no rotary positions on "
                                         "layers ", (long long)i);
        if (used) wm_json_str(j, NULL, b);
        if (a->local_rope) {
            snprintf(b, sizeof b, "sliding-window layers: rotary positions (theta %g, %s, %lld of %lld dims)",
                     a->rope_local.theta, a->rope_local.type, (long long)a->rope_local.rot_dim, (long long)a->hd);
            wm_json_str(j, NULL, b);
        }
    }
    if (a->rel_buckets) {
        snprintf(b, sizeof b, "relative position bias (%lld buckets, max distance %lld; one table shared by all "
                 "layers, added to the attention scores)", (long long)a->rel_buckets, (long long)a->rel_max_dist);
        wm_json_str(j, NULL, b);
    }
    if (a->dis_span) {
        snprintf(b, sizeof b, "disentangled attention (%s%s%s; span %lld, %s%lld, relative embeddings%s, %s)",
                 a->dis_c2p ? "c2p" : "", a->dis_c2p && a->dis_p2c ? " + " : "", a->dis_p2c ? "p2c" : "",
                 (long long)a->dis_span, a->dis_buckets ? "log buckets up to " : "exact distances up to ",
                 (long long)a->dis_max_rel, a->dis_rel_norm ? " LayerNorm'ed" : "",
                 a->dis_share_key ? "shared with the content keys and queries" : "own position projections");
        wm_json_str(j, NULL, b);
    }
    if (a->dis_scale > 1) {
        snprintf(b, sizeof b, "attention scores scaled by (head_dim x %d)^-1/2", a->dis_scale);
        wm_json_str(j, NULL, b);
    }
    if (a->mask_rows) wm_json_str(j, NULL, "2-D attention mask (padded queries too), padded embeddings zeroed");
    snprintf(b, sizeof b, "%s%s eps %g, %s%s", a->norm == WM_NORM_RMS ? "RMSNorm" : "LayerNorm",
             a->norm_offset != 0 ? " (1 + weight)" : "", a->eps,
             a->post_norm ? "post-norm" : a->pre_norms ? "pre-norm" : "no pre-norms",
             a->sub_norms ? ", attention and MLP outputs normalized before the residual add" : "");
    wm_json_str(j, NULL, b);
    if (a->parallel)
        wm_json_str(j, NULL, a->mlp_norm_shared ? "parallel attention and MLP on one shared norm (x + attn + mlp)"
                                                : "parallel residual: attention and MLP on their own norms of x "
                                                  "(x + attn + mlp)");
    if (a->embed_scale != 1.0) {
        snprintf(b, sizeof b, "token embeddings scaled by %s (%.9g)",
                 ((const wm_family *)a->fam)->keys[WM_FK_MULTIPLIERS] ? "embedding_multiplier" : "sqrt(hidden_size)", a->embed_scale);
        wm_json_str(j, NULL, b);
    }
    if (a->resid_scale != 1.0 || a->attn_scale > 0 || a->logits_div != 1.0) {
        snprintf(b, sizeof b, "multipliers: residual %g, attention scores %g, logits divided by %g", a->resid_scale,
                 a->attn_scale > 0 ? a->attn_scale : 1.0 / sqrt((double)a->hd), a->logits_div);
        wm_json_str(j, NULL, b);
    }
    if (a->query_scalar > 0 && a->query_scalar != (double)a->hd) {
        snprintf(b, sizeof b, "attention scores scaled by query_pre_attn_scalar^-1/2 (%g)", a->query_scalar);
        wm_json_str(j, NULL, b);
    }
    if (a->attn_softcap > 0) {
        snprintf(b, sizeof b, "attention scores soft-capped at %g (cap * tanh(x / cap))", a->attn_softcap);
        wm_json_str(j, NULL, b);
    }
    if (a->final_softcap > 0) {
        snprintf(b, sizeof b, "logits soft-capped at %g", a->final_softcap);
        wm_json_str(j, NULL, b);
    }
    if (a->kvh != a->nh) {
        snprintf(b, sizeof b, "grouped KV heads (%lld query heads, %lld kv heads)", (long long)a->nh, (long long)a->kvh);
        wm_json_str(j, NULL, b);
    }
    if (a->hd * a->nh != a->H) {
        snprintf(b, sizeof b, "head_dim %lld (not hidden/heads)", (long long)a->hd);
        wm_json_str(j, NULL, b);
    }
    if (a->fused_qkv)
        wm_json_str(j, NULL, a->conv1d ? "fused qkv (Conv1D [in, out])"
                             : a->qkv_per_head ? "fused qkv per head ([heads, q k v, head_dim])" : "fused qkv_proj");
    if (a->qkv_bias) wm_json_str(j, NULL, "q/k/v bias");
    if (a->o_bias) wm_json_str(j, NULL, "output projection bias");
    if (a->qk_norm) wm_json_str(j, NULL, a->qk_norm_whole ? "q/k RMSNorm over all heads" : "q/k RMSNorm per head");
    if (a->n_moe_layers < a->L) {
        snprintf(b, sizeof b, "%s%s MLP (%s)%s", a->gated ? "gated" : "plain", a->fused_gate_up ? " fused gate_up" : "",
                 wm_act_name(a->act), a->mlp_bias ? " with bias" : "");
        wm_json_str(j, NULL, b);
    }
    wm_moe_features(a, j);
    if (a->kind == WM_DECODER)
        wm_json_str(j, NULL, a->tied ? "tied embeddings (lm_head = embed_tokens)"
                             : wm_arch_mod(a, -1, WM_M_G_LM_HEAD)->has_bias ? "separate lm_head with bias"
                                                                             : "separate lm_head");
    if (a->logits_mul != 1.0) {
        snprintf(b, sizeof b, "logits multiplied by logit_scale (%g)", a->logits_mul);
        wm_json_str(j, NULL, b);
    }
    if (a->T > 0 && wm_arch_mod(a, -1, WM_M_G_TYPE)->present) {
        snprintf(b, sizeof b, "token type embeddings (%lld)", (long long)a->T);
        wm_json_str(j, NULL, b);
    }
    if (wm_arch_mod(a, -1, WM_M_G_EMB_PROJ)->present) {
        snprintf(b, sizeof b, "embedding projection %lld -> %lld", (long long)a->E, (long long)a->H);
        wm_json_str(j, NULL, b);
    }
    if (a->window) {
        int64_t n = 0;
        for (int64_t i = 0; i < a->L; i++) n += a->sliding[i];
        if (a->kind == WM_ENCODER)
            snprintf(b, sizeof b, "bidirectional sliding window (|i - j| <= %lld) on %lld of %lld layers",
                     (long long)a->window, (long long)n, (long long)a->L);
        else
            snprintf(b, sizeof b, "sliding window %lld on %lld of %lld layers", (long long)a->window, (long long)n,
                     (long long)a->L);
        wm_json_str(j, NULL, b);
    }
    if (!a->scale_attn) wm_json_str(j, NULL, "unscaled attention scores");
    if (a->scale_by_layer) wm_json_str(j, NULL, "attention scaled by 1/(layer+1)");
    if (a->head_transform) {
        snprintf(b, sizeof b, "%s head: dense + %s + LayerNorm, then %s%s", wm_task_name(a->task),
                 wm_act_name(a->head_act), a->task == WM_TASK_FILL_MASK ? "the tied decoder" : "the task's linear",
                 a->task != WM_TASK_TEXT_CLASSIFICATION ? " (every token)"
                 : a->head_pool_mean ? " (on the mean of the unpadded tokens)" : " (on the first token)");
        wm_json_str(j, NULL, b);
    } else if (a->n_head_mods) {
        snprintf(b, sizeof b, "%s head: %d linear%s%s%s", wm_task_name(a->task), a->n_head_mods,
                 a->n_head_mods > 1 ? "s" : "", a->head_act != WM_ACT_NONE ? " with " : "",
                 a->head_act != WM_ACT_NONE ? wm_act_name(a->head_act) : "");
        wm_json_str(j, NULL, b);
    }
    wm_json_arr_end(j);
}
