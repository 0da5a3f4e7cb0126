/*
 * arch_s2s.c - encoder-decoder checkpoints (BART, Marian) resolved from one
 * family table and one naming table: an encoder stack and a decoder stack
 * whose layers add cross-attention over the encoder's output, shared token
 * embeddings, learned (with an offset) or sinusoidal positions, an optional
 * LayerNorm after the embeddings, post-norm or pre-norm layers (pre-norm
 * stacks end in a final norm), logits + final_logits_bias. Speech rows
 * (Whisper) add a log-mel conv stem in place of the encoder's token
 * embedding, stored position tables per stack and a k_proj without bias.
 * What differs by family is a row of s2s_families[]; model_type appears
 * nowhere else.
 *
 * The module slots: layer -1 the globals, layers 0..enc_L-1 the encoder's,
 * enc_L..enc_L+dec_L-1 the decoder's (the tensor names use the stack's own
 * layer index).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"

#include <cjson/cJSON.h>
#include "core/error.h"
#include "core/json.h"

typedef struct s2s_family {
    const char *model_type, *class_stem;
    int sinusoidal;     /* positions computed (Marian) instead of a learned table */
    int64_t pos_offset; /* learned table rows = max_position_embeddings + offset (BART's 2) */
    int emb_norm;       /* layernorm_embedding in both stacks */
    double eps;         /* nn.LayerNorm's default */
    /* speech encoder-decoders (Whisper); zero / NULL in the text rows above */
    const char *embed;    /* the token embedding (NULL: model.shared) */
    const char *lm_head;  /* the output projection's name (NULL: lm_head) */
    const char *pos_key;  /* config key of the decoder's position rows (NULL: max_position_embeddings) */
    const char *enc_pos_key; /* the encoder's own stored position table rows (mel_stem) */
    int pre_norm;         /* pre-norm layers; each stack ends in model.{encoder,decoder}.layer_norm */
    int k_nobias;         /* attention k_proj has no bias */
    int mel_stem;         /* log-mel input through conv1 / conv2 (num_mel_bins), no encoder padding mask */
    int task;             /* the one task it builds for (0: text2text-generation) */
} s2s_family;

static const s2s_family s2s_families[] = {
    {"bart", "Bart", 0, 2, 1, 1e-5},
    {"marian", "Marian", 1, 0, 0, 1e-5},
    {"whisper", "Whisper", 0, 0, 0, 1e-5, .embed = "model.decoder.embed_tokens", .lm_head = "proj_out",
     .pos_key = "max_target_positions", .enc_pos_key = "max_source_positions", .pre_norm = 1, .k_nobias = 1,
     .mel_stem = 1, .task = WM_TASK_ASR},
};
#define N_FAM (sizeof s2s_families / sizeof s2s_families[0])

/* Per-layer modules; %s = "encoder" / "decoder", %d = the layer within its stack. */
typedef struct s2s_pat {
    int mod, kind, cross; /* cross: decoder layers only */
    const char *pat;
} s2s_pat;

static const s2s_pat layer_pats[] = {
    {WM_M_L_Q, WM_MK_LINEAR, 0, "model.%s.layers.%d.self_attn.q_proj"},
    {WM_M_L_K, WM_MK_LINEAR, 0, "model.%s.layers.%d.self_attn.k_proj"},
    {WM_M_L_V, WM_MK_LINEAR, 0, "model.%s.layers.%d.self_attn.v_proj"},
    {WM_M_L_O, WM_MK_LINEAR, 0, "model.%s.layers.%d.self_attn.out_proj"},
    {WM_M_L_ATTN_NORM, WM_MK_NORM, 0, "model.%s.layers.%d.self_attn_layer_norm"},
    {WM_M_L_XQ, WM_MK_LINEAR, 1, "model.%s.layers.%d.encoder_attn.q_proj"},
    {WM_M_L_XK, WM_MK_LINEAR, 1, "model.%s.layers.%d.encoder_attn.k_proj"},
    {WM_M_L_XV, WM_MK_LINEAR, 1, "model.%s.layers.%d.encoder_attn.v_proj"},
    {WM_M_L_XO, WM_MK_LINEAR, 1, "model.%s.layers.%d.encoder_attn.out_proj"},
    {WM_M_L_XATTN_NORM, WM_MK_NORM, 1, "model.%s.layers.%d.encoder_attn_layer_norm"},
    {WM_M_L_UP, WM_MK_LINEAR, 0, "model.%s.layers.%d.fc1"},
    {WM_M_L_DOWN, WM_MK_LINEAR, 0, "model.%s.layers.%d.fc2"},
    {WM_M_L_MLP_NORM, WM_MK_NORM, 0, "model.%s.layers.%d.final_layer_norm"},
};

/* Tied copies of the shared embedding some exporters save, and sinusoidal tables saved as buffers: known, unused. */
static const char *const s2s_known_unused[] = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                                               NULL};

const void *wm_s2s_find(const char *model_type) {
    for (size_t i = 0; model_type && i < N_FAM; i++)
        if (!strcmp(s2s_families[i].model_type, model_type)) return &s2s_families[i];
    return NULL;
}

/* Config keys whose set values change the math in ways these graphs do not model. */
static wm_status check_denied(const wm_arch *a, wm_error *err) {
    static const struct {
        const char *key;
        int bad; /* the value refused: 1 true, 0 false */
    } keys[] = {{"normalize_before", 1}, {"add_final_layer_norm", 1}, {"static_position_embeddings", 1},
                {"share_encoder_decoder_embeddings", 0}, {"normalize_embedding", 0}, {"add_bias_logits", 1}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, keys[i].key);
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsBool(v))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", a->cfg->file, keys[i].key);
        if (cJSON_IsTrue(v) == keys[i].bad)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': %s is not modeled for model_type '%s'",
                          a->cfg->file, keys[i].key, keys[i].bad ? "true" : "false", a->model_type);
    }
    return WM_OK;
}

static int cfg_flag(const wm_arch *a, const char *key, int def, wm_error *err, wm_status *s) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) *s = wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", a->cfg->file, key);
    return cJSON_IsTrue(v);
}

static wm_status sizes(wm_arch *a, const s2s_family *f, wm_error *err) {
    const int64_t big = 1 << 20;
    const char *pos_key = f->pos_key ? f->pos_key : "max_position_embeddings";
    if (!arch_cfg_int(a, "d_model", -1, 1, big, &a->H, err) ||
        !arch_cfg_int(a, "vocab_size", -1, 1, 1 << 24, &a->V, err) ||
        !arch_cfg_int(a, "encoder_layers", -1, 1, 4096, &a->enc_L, err) ||
        !arch_cfg_int(a, "decoder_layers", -1, 1, 4096, &a->dec_L, err) ||
        !arch_cfg_int(a, "encoder_attention_heads", -1, 1, 4096, &a->enc_nh, err) ||
        !arch_cfg_int(a, "decoder_attention_heads", -1, 1, 4096, &a->dec_nh, err) ||
        !arch_cfg_int(a, "encoder_ffn_dim", -1, 1, big, &a->enc_I, err) ||
        !arch_cfg_int(a, "decoder_ffn_dim", -1, 1, big, &a->dec_I, err) ||
        !arch_cfg_int(a, pos_key, -1, 1, big, &a->P, err))
        return err->status;
    if (f->mel_stem && (!arch_cfg_int(a, "num_mel_bins", -1, 1, 1024, &a->n_mels, err) ||
                        !arch_cfg_int(a, f->enc_pos_key, -1, 1, big, &a->enc_P, err)))
        return err->status;
    const char *const keys[] = {"d_model", "vocab_size", "encoder_layers", "decoder_layers",
                                       "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
                                       "decoder_ffn_dim", pos_key, "num_mel_bins", f->enc_pos_key};
    const int64_t vals[] = {a->H, a->V, a->enc_L, a->dec_L, a->enc_nh, a->dec_nh, a->enc_I, a->dec_I, a->P,
                            f->mel_stem ? a->n_mels : 1, f->mel_stem ? a->enc_P : 1};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        if (vals[i] <= 0)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': missing (needed to build the graph)", a->cfg->file,
                          keys[i]);
    if (a->H % a->enc_nh)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'encoder_attention_heads': d_model %lld is not divisible by %lld "
                      "heads", a->cfg->file, (long long)a->H, (long long)a->enc_nh);
    if (a->H % a->dec_nh)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'decoder_attention_heads': d_model %lld is not divisible by %lld "
                      "heads", a->cfg->file, (long long)a->H, (long long)a->dec_nh);
    int64_t dv;
    if (!arch_cfg_int(a, "decoder_vocab_size", a->V, 1, 1 << 24, &dv, err)) return err->status;
    if (dv != a->V)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'decoder_vocab_size': %lld differs from vocab_size %lld "
                      "(separate decoder vocabularies are not modeled)", a->cfg->file, (long long)dv, (long long)a->V);
    a->L = a->enc_L + a->dec_L;
    a->E = a->H;
    a->nh = a->kvh = a->enc_nh;
    a->hd = a->H / a->enc_nh;
    a->I = a->enc_I;
    return WM_OK;
}

static wm_status resolve_task(wm_arch *a, const s2s_family *f, int task, wm_error *err) {
    int own = f->task ? f->task : WM_TASK_TEXT2TEXT_GENERATION;
    if (task >= 0 && task != own)
        return wm_err(err, WM_ERR_UNSUPPORTED, "model_type '%s': task '%s' is not supported (this encoder-decoder "
                      "builds for %s)", a->model_type, wm_task_name(task), wm_task_name(own));
    a->task = own;
    const char *arch0 = a->cfg->n_architectures ? a->cfg->architectures[0] : NULL;
    if (arch0 && strstr(arch0, "ForSequenceClassification"))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'architectures': '%s': the sequence-classification head of "
                      "an encoder-decoder is not modeled (text2text-generation only)", a->cfg->file, arch0);
    snprintf(a->inference_class, sizeof a->inference_class, "%s%s", f->class_stem,
             !strcmp(f->model_type, "marian") ? "MTModel" : "ForConditionalGeneration");
    return WM_OK;
}

/* The module mod of slot (-1: global) named name, out x in; opt: a checkpoint may lack it (a named PARAM). */
static wm_status want(wm_arch *a, const wm_st_file *st, int slot, int mod, int kind, const char *name, int64_t out,
                      int64_t in, int opt, wm_error *err) {
    if (opt && st && !wm_st_find(st, name)) return WM_OK; /* absent: not part of this checkpoint */
    arch_want w = {.mod = mod, .layer = slot, .pat = name, .kind = (uint8_t)kind, .required = 1, .bias = 1};
    wm_status s = arch_fill_module(a, st, &w, err);
    if (s) return s;
    wm_module *m = arch_mod_mut(a, slot, mod);
    m->out = out;
    m->in = in;
    return arch_check_shape(a, m, err);
}

/* The conv stem of a mel_stem family: conv1 [H, n_mels, 3], conv2 [H, H, 3], each with a bias [H]. */
static const char *const mel_stem_tensors[4] = {"model.encoder.conv1.weight", "model.encoder.conv1.bias",
                                                "model.encoder.conv2.weight", "model.encoder.conv2.bias"};

const char *wm_s2s_mel_stem_tensor(int i) { return i >= 0 && i < 4 ? mel_stem_tensors[i] : NULL; }

static wm_status mel_stem_check(const wm_arch *a, const wm_st_file *st, wm_error *err) {
    if (!st) return WM_OK;
    for (int i = 0; i < 4; i++) {
        const wm_st_tensor *t = arch_st_find(st, mel_stem_tensors[i]);
        int64_t want_[3] = {a->H, i < 2 ? a->n_mels : a->H, 3};
        size_t rank = i % 2 ? 1 : 3;
        if (!t) return wm_err(err, WM_ERR_INPUT, "missing tensor '%s' (the log-mel conv stem)", mel_stem_tensors[i]);
        int same = t->rank == rank;
        for (size_t k = 0; same && k < rank; k++) same = t->shape[k] == want_[k];
        if (!same)
            return wm_err(err, WM_ERR_INPUT, "tensor '%s': expected shape [%lld%s] (d_model, num_mel_bins %lld)",
                          mel_stem_tensors[i], (long long)a->H,
                          rank == 1 ? "" : i < 2 ? ", num_mel_bins, 3" : ", d_model, 3", (long long)a->n_mels);
        int32_t dt = wm_st_dtype_onnx(t->dtype);
        if (dt != 1 && dt != 10 && dt != 16 && dt != 11)
            return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': dtype is not supported (F32, F16, BF16, F64)",
                          mel_stem_tensors[i]);
    }
    return WM_OK;
}

static wm_status modules(wm_arch *a, const s2s_family *f, const wm_st_file *st, wm_error *err) {
    a->mods = calloc((size_t)(a->L + 1) * WM_M_COUNT, sizeof *a->mods);
    if (!a->mods) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s = want(a, st, -1, WM_M_G_EMBED, WM_MK_EMBED, f->embed ? f->embed : "model.shared", a->V, a->H, 0, err);
    if (!s && !f->sinusoidal)
        s = want(a, st, -1, WM_M_G_POS, WM_MK_EMBED, "model.encoder.embed_positions",
                 f->mel_stem ? a->enc_P : a->P + f->pos_offset, a->H, 0, err);
    if (!s && f->pre_norm)
        s = want(a, st, -1, WM_M_G_FINAL_NORM, WM_MK_NORM, "model.encoder.layer_norm", a->H, a->H, 0, err);
    if (!s && f->pre_norm)
        s = want(a, st, -1, WM_M_G_DEC_FINAL_NORM, WM_MK_NORM, "model.decoder.layer_norm", a->H, a->H, 0, err);
    if (!s && f->mel_stem) s = mel_stem_check(a, st, err);
    if (!s && !f->sinusoidal)
        s = want(a, st, -1, WM_M_G_DEC_POS, WM_MK_EMBED, "model.decoder.embed_positions", a->P + f->pos_offset, a->H,
                 0, err);
    if (!s && f->emb_norm)
        s = want(a, st, -1, WM_M_G_EMB_NORM, WM_MK_NORM, "model.encoder.layernorm_embedding", a->H, a->H, 0, err);
    if (!s && f->emb_norm)
        s = want(a, st, -1, WM_M_G_DEC_EMB_NORM, WM_MK_NORM, "model.decoder.layernorm_embedding", a->H, a->H, 0, err);
    if (!s && !a->tied)
        s = want(a, st, -1, WM_M_G_LM_HEAD, WM_MK_LINEAR, f->lm_head ? f->lm_head : "lm_head", a->V, a->H, 0, err);
    if (!s && !a->tied) arch_mod_mut(a, -1, WM_M_G_LM_HEAD)->has_bias = 0;
    if (!s) s = want(a, st, -1, WM_M_H_BIAS, WM_MK_PARAM, "final_logits_bias", a->V, 1, 1, err);
    for (int64_t slot = 0; slot < a->L && !s; slot++) {
        int dec = slot >= a->enc_L;
        int64_t layer = dec ? slot - a->enc_L : slot, I = dec ? a->dec_I : a->enc_I;
        for (size_t i = 0; i < sizeof layer_pats / sizeof layer_pats[0] && !s; i++) {
            const s2s_pat *p = &layer_pats[i];
            if (p->cross && !dec) continue;
            char name[192];
            snprintf(name, sizeof name, p->pat, dec ? "decoder" : "encoder", (int)layer);
            int64_t out = p->mod == WM_M_L_UP ? I : a->H, in = p->mod == WM_M_L_DOWN ? I : a->H;
            s = want(a, st, (int)slot, p->mod, p->kind, name, out, in, 0, err);
            if (!s && f->k_nobias && (p->mod == WM_M_L_K || p->mod == WM_M_L_XK)) {
                wm_module *m = arch_mod_mut(a, (int)slot, p->mod);
                if (m->has_bias)
                    return wm_err(err, WM_ERR_INPUT, "tensor '%s': model_type '%s' has no k_proj bias", m->b,
                                  a->model_type);
                m->has_bias = 0, m->b[0] = 0; /* random weights: none either */
            }
        }
    }
    if (s) return s;
    a->logits_bias = wm_arch_mod(a, -1, WM_M_H_BIAS)->present;
    return WM_OK;
}

/* Every checkpoint tensor is a module, a tied copy, or a known unused one. */
static wm_status check_unused(wm_arch *a, const s2s_family *f, const wm_st_file *st, wm_error *err) {
    char head[96];
    snprintf(head, sizeof head, "%s.weight", f->lm_head ? f->lm_head : "lm_head");
    for (size_t i = 0; i < wm_st_count(st); i++) {
        const char *name = wm_st_get(st, i)->name;
        int ok = 0;
        for (size_t k = 0; s2s_known_unused[k] && !ok; k++) ok = !strcmp(name, s2s_known_unused[k]);
        for (size_t k = 0; a->mel_stem && k < 4 && !ok; k++) ok = !strcmp(name, mel_stem_tensors[k]);
        ok |= a->tied && !strcmp(name, head);
        ok |= a->pos_sinusoidal && (!strcmp(name, "model.encoder.embed_positions.weight") ||
                                    !strcmp(name, "model.decoder.embed_positions.weight"));
        for (size_t m = 0; !ok && m < (size_t)(a->L + 1) * WM_M_COUNT; m++) {
            const wm_module *md = &a->mods[m];
            ok = md->present && (!strcmp(md->w, name) || (md->has_bias && !strcmp(md->b, name)));
        }
        if (ok) continue;
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s' is not understood by the encoder-decoder tables "
                      "(model_type '%s')", name, a->model_type);
    }
    return WM_OK;
}

wm_status wm_s2s_resolve(const wm_hf_config *c, const wm_st_file *st, int task, wm_arch *a, wm_error *err) {
    const s2s_family *f = wm_s2s_find(c->model_type);
    wm_status s = WM_OK;
    a->graph = WM_GRAPH_S2S;
    a->kind = WM_ENCDEC;
    a->scheme = "bart";
    a->norm = WM_NORM_LAYER;
    a->post_norm = !f->pre_norm;
    a->mel_stem = f->mel_stem;
    a->pos = WM_POS_LEARNED;
    a->pos_sinusoidal = f->sinusoidal;
    a->pos_offset = f->pos_offset;
    a->emb_norm = f->emb_norm;
    a->scale_attn = 1;
    a->qkv_bias = a->o_bias = a->mlp_bias = 1;
    a->resid_scale = a->logits_div = 1.0;
    snprintf(a->prefix, sizeof a->prefix, "model.");
    if ((s = check_denied(a, err)) || (s = resolve_task(a, f, task, err)) || (s = sizes(a, f, err))) return s;
    a->eps = f->eps;
    a->tied = cfg_flag(a, "tie_word_embeddings", 1, err, &s);
    int scale = cfg_flag(a, "scale_embedding", 0, err, &s);
    if (s) return s;
    a->embed_scale = scale ? sqrt((double)a->H) : 1.0;
    const char *act = c->activation ? c->activation : "gelu";
    a->act = WM_ACT_NONE;
    for (const wm_act_name_row *r = wm_act_names; r->name; r++)
        if (!strcmp(r->name, act)) a->act = r->act;
    if (a->act == WM_ACT_NONE)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'activation_function': activation '%s' is not supported",
                      c->file, act);
    if ((s = modules(a, f, st, err))) return s;
    if (st && (s = check_unused(a, f, st, err))) return s;
    arch_count_params(a);
    if (a->mel_stem) /* the conv stem's tensors are no modules: counted here */
        a->n_params += (uint64_t)(a->H * a->n_mels * 3 + a->H + a->H * a->H * 3 + a->H);
    return WM_OK;
}

void wm_s2s_features(const wm_arch *a, wm_json *j) {
    char b[256];
    snprintf(b, sizeof b, "encoder-decoder: %lld encoder layers (%lld heads, ffn %lld), %lld decoder layers (%lld "
             "heads, ffn %lld) with cross-attention", (long long)a->enc_L, (long long)a->enc_nh, (long long)a->enc_I,
             (long long)a->dec_L, (long long)a->dec_nh, (long long)a->dec_I);
    wm_json_str(j, NULL, b);
    if (a->mel_stem) {
        snprintf(b, sizeof b, "log-mel input (%lld bins): conv1 k3 + GELU, conv2 k3 stride 2 + GELU, stored encoder "
                 "positions (%lld)", (long long)a->n_mels, (long long)a->enc_P);
        wm_json_str(j, NULL, b);
    }
    if (a->pos_sinusoidal) snprintf(b, sizeof b, "sinusoidal positions (%lld)", (long long)a->P);
    else snprintf(b, sizeof b, "learned positions (%lld, offset %lld)", (long long)a->P, (long long)a->pos_offset);
    wm_json_str(j, NULL, b);
    if (a->emb_norm) wm_json_str(j, NULL, "LayerNorm after the embeddings");
    if (a->embed_scale != 1.0) wm_json_str(j, NULL, "token embeddings scaled by sqrt(d_model)");
    snprintf(b, sizeof b, "LayerNorm eps %g, %s; %s MLP with bias", a->eps,
             a->post_norm ? "post-norm" : "pre-norm, a final LayerNorm per stack", wm_act_name(a->act));
    wm_json_str(j, NULL, b);
    wm_json_str(j, NULL, a->tied ? "tied embeddings (lm_head = shared)" : "separate lm_head");
    if (a->logits_bias) wm_json_str(j, NULL, "logits + final_logits_bias");
}
