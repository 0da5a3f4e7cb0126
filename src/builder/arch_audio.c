/*
 * arch_audio.c - resolving wav2vec2-style speech encoders (the rows of
 * arch_vtables.c with graph WM_GRAPH_AUDIO: wav2vec2, HuBERT) into a
 * wm_arch: the convolutional feature encoder from the config's lists
 * (conv_dim / conv_kernel / conv_stride, feat_extract_norm, conv_bias,
 * feat_extract_activation), the weight-normed positional convolution
 * (num_conv_pos_embeddings, num_conv_pos_embedding_groups), the encoder's
 * norm order (do_stable_layer_norm) and the heads' sizes, typed and
 * range-checked; with weights, every feature-encoder tensor checked for
 * presence and shape. The transformer modules come from the scheme
 * (arch_vision.c's fill). Features transformers has that are not modeled
 * (use_weighted_layer_sum, add_adapter, conv_pos_batch_norm) are refused
 * by name.
 */
#include "builder/arch_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static const char *const pos_g[3] = {"encoder.pos_conv_embed.conv.parametrizations.weight.original0",
                                     "encoder.pos_conv_embed.conv.weight_g", NULL};
static const char *const pos_v[3] = {"encoder.pos_conv_embed.conv.parametrizations.weight.original1",
                                     "encoder.pos_conv_embed.conv.weight_v", "encoder.pos_conv_embed.conv.weight"};

/* WM_ERR_UNSUPPORTED naming key when it is true (why: what transformers does with it), WM_ERR_INPUT when it is not
   a bool; WM_OK when absent, null or false. */
static wm_status refuse_true(const wm_hf_config *c, const char *key, const char *why, wm_error *err) {
    int v = 0;
    wm_status s = arch_key_bool(c, key, 0, &v, err);
    if (s) return s;
    if (v) return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': true is not supported (%s)", c->file, key, why);
    return WM_OK;
}

static wm_status act_of(const wm_hf_config *c, const char *key, const char *def, wm_act *out, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    const char *name = cJSON_IsString(v) ? v->valuestring : def;
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an activation name", c->file, key);
    for (const wm_act_name_row *r = wm_act_names; r->name; r++)
        if (!strcmp(r->name, name)) {
            *out = r->act;
            return WM_OK;
        }
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': activation '%s' is not supported", c->file, key, name);
}

/* A conv list key, or transformers' Wav2Vec2Config default (def, 7 values) when absent or null. */
static wm_status conv_list(const wm_hf_config *c, const char *key, int64_t hi, const int64_t *def, int64_t *out,
                           int64_t *n, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (v && !cJSON_IsNull(v)) return arch_key_list(c, key, hi, WM_AUDIO_MAX_CONV, out, n, err);
    memcpy(out, def, 7 * sizeof *out);
    *n = 7;
    return WM_OK;
}

static wm_status conv_lists(wm_arch *a, wm_error *err) {
    static const int64_t ddim[7] = {512, 512, 512, 512, 512, 512, 512}, dk[7] = {10, 3, 3, 3, 3, 2, 2},
                         ds[7] = {5, 2, 2, 2, 2, 2, 2};
    const wm_hf_config *c = a->cfg;
    int64_t nk = 0, ns = 0;
    wm_status s;
    if ((s = conv_list(c, "conv_dim", 1 << 16, ddim, a->conv_dim, &a->n_conv, err)) ||
        (s = conv_list(c, "conv_kernel", 1 << 12, dk, a->conv_kernel, &nk, err)) ||
        (s = conv_list(c, "conv_stride", 1 << 12, ds, a->conv_stride, &ns, err)))
        return s;
    if (nk != a->n_conv || ns != a->n_conv)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %lld entries, conv_dim has %lld (one per convolution)", c->file,
                      nk != a->n_conv ? "conv_kernel" : "conv_stride", (long long)(nk != a->n_conv ? nk : ns),
                      (long long)a->n_conv);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c->root, "feat_extract_norm");
    const char *norm = cJSON_IsString(fn) ? fn->valuestring : fn && !cJSON_IsNull(fn) ? "?" : "group";
    if (strcmp(norm, "group") && strcmp(norm, "layer"))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'feat_extract_norm': '%s', expected \"group\" or \"layer\"", c->file,
                      norm);
    a->feat_layer_norm = !strcmp(norm, "layer");
    return WM_OK;
}

/* The prefix under which the first convolution exists (the family's own first, then none). */
static wm_status find_prefix(wm_arch *a, const wm_vis_family *f, const wm_st_file *st, wm_error *err) {
    const char *cands[2] = {f->prefix, ""};
    for (int i = 0; i < 2; i++) {
        char name[256];
        snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.0.conv.weight", cands[i]);
        if (arch_st_find(st, name)) {
            snprintf(a->prefix, sizeof a->prefix, "%s", cands[i]);
            return WM_OK;
        }
    }
    return wm_err(err, WM_ERR_INPUT, "missing tensor '%sfeature_extractor.conv_layers.0.conv.weight' (the feature "
                  "encoder of naming scheme '%s')", f->prefix, f->scheme);
}

/* Which spelling of the positional convolution's weight the checkpoint has (0 parametrizations, 1 weight_g /
   weight_v, 2 a plain weight); -1 when none. */
static int pos_style(const wm_arch *a, const wm_st_file *st) {
    for (int k = 0; k < 3; k++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", a->prefix, pos_v[k]);
        if (arch_st_find(st, name)) return k;
    }
    return -1;
}

static wm_status check_weights(wm_arch *a, const wm_st_file *st, wm_error *err) {
    const char *file = a->cfg->file;
    char name[256], from[PATH_MAX + 8];
    snprintf(from, sizeof from, "from %s", file);
    wm_status s = WM_OK;
    for (int64_t i = 0; i < a->n_conv && !s; i++) {
        int64_t w[3] = {a->conv_dim[i], i ? a->conv_dim[i - 1] : 1, a->conv_kernel[i]};
        snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.%lld.conv.weight", a->prefix, (long long)i);
        s = arch_check_tensor(st, name, w, 3, from, file, err);
        snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.%lld.conv.bias", a->prefix, (long long)i);
        if (!s && a->conv_bias) s = arch_check_tensor(st, name, w, 1, from, file, err);
        for (int p = 0; p < 2 && !s && (a->feat_layer_norm || i == 0); p++) {
            snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.%lld.layer_norm.%s", a->prefix, (long long)i,
                     p ? "bias" : "weight");
            s = arch_check_tensor(st, name, w, 1, from, file, err);
        }
    }
    if (s) return s;
    int style = pos_style(a, st);
    if (style < 0)
        return wm_err(err, WM_ERR_INPUT, "missing tensor '%s%s' (the positional convolution; or weight_g / weight_v)",
                      a->prefix, pos_v[0]);
    a->pos_wn = style;
    int64_t v[3] = {a->H, a->H / a->pos_groups, a->pos_k}, g[3] = {1, 1, a->pos_k};
    snprintf(name, sizeof name, "%s%s", a->prefix, pos_v[style]);
    if ((s = arch_check_tensor(st, name, v, 3, from, file, err))) return s;
    if (pos_g[style]) {
        snprintf(name, sizeof name, "%s%s", a->prefix, pos_g[style]);
        if ((s = arch_check_tensor(st, name, g, 3, from, file, err))) return s;
    }
    snprintf(name, sizeof name, "%sencoder.pos_conv_embed.conv.bias", a->prefix);
    return arch_check_tensor(st, name, v, 1, from, file, err);
}

wm_status wm_audio_resolve(wm_arch *a, const wm_vis_family *f, const wm_st_file *st, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    wm_status s;
    a->H = c->hidden_size;
    a->L = c->num_layers;
    a->nh = c->num_heads;
    a->I = c->intermediate_size;
    if (a->H <= 0 || a->L <= 0 || a->nh <= 0 || a->I <= 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': missing (needed to build the graph)", c->file,
                      a->H <= 0 ? "hidden_size" : a->L <= 0 ? "num_hidden_layers" : a->nh <= 0 ? "num_attention_heads"
                                                                                     : "intermediate_size");
    if (a->H > (1 << 16) || a->L > 4096 || a->nh > a->H || a->H % a->nh || a->I > (1 << 20))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_attention_heads': %lld heads for hidden_size %lld (must divide "
                      "it; hidden_size <= 65536, layers <= 4096, intermediate_size <= 2^20)", c->file, (long long)a->nh,
                      (long long)a->H);
    a->kvh = a->nh;
    a->hd = a->H / a->nh;
    a->E = a->H;
    a->eps = !isnan(c->norm_eps) ? c->norm_eps : f->eps;
    a->norm = WM_NORM_LAYER;
    a->scale_attn = 1;
    a->labels = c->num_labels > 0 ? c->num_labels : 2;
    if ((s = conv_lists(a, err)) || (s = arch_key_bool(c, "conv_bias", 0, &a->conv_bias, err)) ||
        (s = act_of(c, "feat_extract_activation", "gelu", &a->feat_act, err)) ||
        (s = arch_key_int(c, "num_conv_pos_embeddings", 128, 1, 1 << 12, &a->pos_k, err)) ||
        (s = arch_key_int(c, "num_conv_pos_embedding_groups", 16, 1, 1 << 16, &a->pos_groups, err)) ||
        (s = arch_key_bool(c, "do_stable_layer_norm", 0, &a->stable, err)) ||
        (s = refuse_true(c, "use_weighted_layer_sum", "the softmax-weighted sum of every layer's states", err)) ||
        (s = refuse_true(c, "add_adapter", "the convolutional adapter after the encoder", err)) ||
        (s = refuse_true(c, "conv_pos_batch_norm", "BatchNorm before the positional convolution", err)))
        return s;
    if (a->H % a->pos_groups)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_conv_pos_embedding_groups': %lld does not divide hidden_size "
                      "%lld", c->file, (long long)a->pos_groups, (long long)a->H);
    a->feat_proj_norm = 1;
    if (f->feat_proj_key && (s = arch_key_bool(c, "feat_proj_layer_norm", 1, &a->feat_proj_norm, err))) return s;
    a->post_norm = !a->stable;
    if (a->task == WM_TASK_ASR) {
        if ((s = arch_key_int(c, "vocab_size", 32, 1, 1 << 20, &a->V, err))) return s;
    } else if ((s = arch_key_int(c, "classifier_proj_size", 256, 1, 1 << 16, &a->proj, err))) {
        return s;
    }
    if (st) {
        if ((s = find_prefix(a, f, st, err)) || (s = check_weights(a, st, err))) return s;
    } else {
        snprintf(a->prefix, sizeof a->prefix, "%s", f->prefix);
    }
    return WM_OK;
}

size_t wm_audio_names(const wm_arch *a, char (*names)[160], size_t cap) {
    if (a->graph != WM_GRAPH_AUDIO) return 0;
    size_t n = 0;
#define PUT(...)                                          \
    do {                                                  \
        if (n < cap) snprintf(names[n], 160, __VA_ARGS__); \
        n++;                                              \
    } while (0)
    for (int64_t i = 0; i < a->n_conv; i++) {
        PUT("%.60sfeature_extractor.conv_layers.%lld.conv.weight", a->prefix, (long long)i);
        if (a->conv_bias) PUT("%.60sfeature_extractor.conv_layers.%lld.conv.bias", a->prefix, (long long)i);
        if (a->feat_layer_norm || i == 0) {
            PUT("%.60sfeature_extractor.conv_layers.%lld.layer_norm.weight", a->prefix, (long long)i);
            PUT("%.60sfeature_extractor.conv_layers.%lld.layer_norm.bias", a->prefix, (long long)i);
        }
    }
    int style = a->pos_wn;
    PUT("%.60s%s", a->prefix, pos_v[style]);
    if (pos_g[style]) PUT("%.60s%s", a->prefix, pos_g[style]);
    PUT("%.60sencoder.pos_conv_embed.conv.bias", a->prefix);
#undef PUT
    return n;
}

uint64_t wm_audio_params(const wm_arch *a) {
    if (a->graph != WM_GRAPH_AUDIO) return 0;
    uint64_t p = 0;
    for (int64_t i = 0; i < a->n_conv; i++) {
        uint64_t out = (uint64_t)a->conv_dim[i], in = i ? (uint64_t)a->conv_dim[i - 1] : 1;
        p += out * in * (uint64_t)a->conv_kernel[i] + (a->conv_bias ? out : 0) +
             (a->feat_layer_norm || i == 0 ? 2 * out : 0);
    }
    return p + (uint64_t)a->H * (uint64_t)(a->H / a->pos_groups) * (uint64_t)a->pos_k + (uint64_t)a->H;
}

void wm_audio_features(const wm_arch *a, wm_json *j) {
    char b[320];
    size_t u = (size_t)snprintf(b, sizeof b, "feature encoder: %lld Conv1d (dim/kernel/stride:", (long long)a->n_conv);
    for (int64_t i = 0; i < a->n_conv && u < sizeof b; i++)
        u += (size_t)snprintf(b + u, sizeof b - u, " %lld/%lld/%lld", (long long)a->conv_dim[i],
                              (long long)a->conv_kernel[i], (long long)a->conv_stride[i]);
    if (u < sizeof b)
        snprintf(b + u, sizeof b - u, "), %s, %s%s", a->feat_layer_norm ? "LayerNorm over channels after every conv"
                 : "GroupNorm (one group per channel) after the first conv", wm_act_name(a->feat_act),
                 a->conv_bias ? ", conv bias" : "");
    wm_json_str(j, NULL, b);
    snprintf(b, sizeof b, "feature projection: %sLinear %lld -> %lld", a->feat_proj_norm ? "LayerNorm + " : "",
             (long long)a->conv_dim[a->n_conv - 1], (long long)a->H);
    wm_json_str(j, NULL, b);
    snprintf(b, sizeof b, "positional convolution: kernel %lld, %lld groups, weight norm folded at export%s, %s",
             (long long)a->pos_k, (long long)a->pos_groups, a->pos_k % 2 ? "" : ", last frame dropped (even kernel)",
             wm_act_name(a->feat_act));
    wm_json_str(j, NULL, b);
    snprintf(b, sizeof b, "LayerNorm eps %g, %s layers (encoder.layer_norm %s the stack), plain MLP (%s)", a->eps,
             a->stable ? "pre-norm" : "post-norm", a->stable ? "after" : "before", wm_act_name(a->act));
    wm_json_str(j, NULL, b);
    if (a->task == WM_TASK_ASR) snprintf(b, sizeof b, "CTC head: lm_head %lld -> %lld per frame", (long long)a->H,
                                         (long long)a->V);
    else snprintf(b, sizeof b, "audio-classification head: projector %lld -> %lld, mean over the valid frames, "
                  "classifier (%lld labels)", (long long)a->H, (long long)a->proj, (long long)a->labels);
    wm_json_str(j, NULL, b);
}
