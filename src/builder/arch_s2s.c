/*
 * arch_s2s.c - encoder-decoder checkpoints (BART, Marian, T5, Whisper) resolved from one
 * family table and one naming table: an encoder stack and a decoder stack
 * whose layers add cross-attention over the encoder's output, shared token
 * embeddings, learned (with an offset) or sinusoidal positions, an optional
 * LayerNorm after the embeddings, post-norm or pre-norm layers (pre-norm
 * stacks end in a final norm), logits + final_logits_bias. T5 rows: relative
 * position buckets, RMSNorm, gated MLPs, d_kv heads. Speech rows (Whisper) add
 * a log-mel conv stem in place of the encoder's token embedding, stored
 * position tables per stack and a k_proj without bias. What differs by family
 * is a row of s2s_families[]; model_type appears nowhere else.
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
#include "builder/export.h"

#include <cjson/cJSON.h>
#include "core/error.h"
#include "core/json.h"

/* Per-layer modules; %s = "encoder" / "decoder", %d = the layer within its stack. */
typedef struct s2s_pat {
    int mod, kind;
    int stack; /* 0 both stacks, 1 decoder layers only, 2 encoder layers only */
    int ffn;   /* 0 always, 1 only with a gated MLP, 2 only without */
    const char *pat;
} s2s_pat;

/* A family's spelling of its config keys and tensor names. NULL key: the family has no such setting. */
typedef struct s2s_names {
    const char *scheme; /* the naming scheme's name (messages) */
    const char *enc_layers, *dec_layers, *enc_heads, *dec_heads, *enc_ffn, *dec_ffn;
    const char *positions; /* max positions (learned or sinusoidal tables; the decoder's when enc_positions is set) */
    const char *enc_positions; /* the encoder's own stored position rows (Whisper's max_source_positions), or NULL */
    const char *head_dim;  /* the head size when the config names it (T5's d_kv, d_model / heads otherwise) */
    const char *eps;       /* the norm epsilon (the family's eps when NULL) */
    const char *act;       /* the activation: a name, or "gated-NAME" for a gated MLP (T5's feed_forward_proj) */
    const char *act_default;
    const char *emb_norm_key; /* the config's switch of the embedding norm (TrOCR's layernorm_embedding), or NULL */
    int dec_layers_default; /* dec_layers absent: as many as enc_layers (T5's num_decoder_layers) */
    const char *shared, *pos[2], *emb_norm[2], *final_norm[2], *rel_bias[2], *lm_head, *logits_bias;
    const char *layer_prefix; /* before every layer pattern (a composite's "decoder."), or NULL */
    const s2s_pat *layers;
    size_t n_layers;
    const char *const *known_unused; /* tied copies of the shared embedding some exporters save */
} s2s_names;

static const s2s_pat bart_pats[] = {
    {WM_M_L_Q, WM_MK_LINEAR, 0, 0, "model.%s.layers.%d.self_attn.q_proj"},
    {WM_M_L_K, WM_MK_LINEAR, 0, 0, "model.%s.layers.%d.self_attn.k_proj"},
    {WM_M_L_V, WM_MK_LINEAR, 0, 0, "model.%s.layers.%d.self_attn.v_proj"},
    {WM_M_L_O, WM_MK_LINEAR, 0, 0, "model.%s.layers.%d.self_attn.out_proj"},
    {WM_M_L_ATTN_NORM, WM_MK_NORM, 0, 0, "model.%s.layers.%d.self_attn_layer_norm"},
    {WM_M_L_XQ, WM_MK_LINEAR, 1, 0, "model.%s.layers.%d.encoder_attn.q_proj"},
    {WM_M_L_XK, WM_MK_LINEAR, 1, 0, "model.%s.layers.%d.encoder_attn.k_proj"},
    {WM_M_L_XV, WM_MK_LINEAR, 1, 0, "model.%s.layers.%d.encoder_attn.v_proj"},
    {WM_M_L_XO, WM_MK_LINEAR, 1, 0, "model.%s.layers.%d.encoder_attn.out_proj"},
    {WM_M_L_XATTN_NORM, WM_MK_NORM, 1, 0, "model.%s.layers.%d.encoder_attn_layer_norm"},
    {WM_M_L_UP, WM_MK_LINEAR, 0, 0, "model.%s.layers.%d.fc1"},
    {WM_M_L_DOWN, WM_MK_LINEAR, 0, 0, "model.%s.layers.%d.fc2"},
    {WM_M_L_MLP_NORM, WM_MK_NORM, 0, 0, "model.%s.layers.%d.final_layer_norm"},
};
static const char *const bart_unused[] = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                                          NULL};
static const s2s_names bart_names = {
    "bart",
    "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
    "decoder_ffn_dim", "max_position_embeddings", NULL, NULL, NULL, "activation_function", "gelu", NULL, 0,
    "model.shared",
    {"model.encoder.embed_positions", "model.decoder.embed_positions"},
    {"model.encoder.layernorm_embedding", "model.decoder.layernorm_embedding"}, {NULL, NULL}, {NULL, NULL},
    "lm_head", "final_logits_bias", NULL, bart_pats, sizeof bart_pats / sizeof bart_pats[0], bart_unused};

/* Whisper: BART's layer names, the decoder's token embedding shared, stored position tables of their own sizes,
   final LayerNorms, proj_out as the head */
static const char *const whisper_unused[] = {NULL};
static const s2s_names whisper_names = {
    "whisper",
    "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
    "decoder_ffn_dim", "max_target_positions", "max_source_positions", NULL, NULL, "activation_function", "gelu", NULL,
    0,
    "model.decoder.embed_tokens", {"model.encoder.embed_positions", "model.decoder.embed_positions"}, {NULL, NULL},
    {"model.encoder.layer_norm", "model.decoder.layer_norm"}, {NULL, NULL}, "proj_out", NULL, NULL, bart_pats,
    sizeof bart_pats / sizeof bart_pats[0], whisper_unused};

/* T5: block.N.layer.0 self-attention, (decoder) layer.1 cross-attention, the MLP last (layer.1 / layer.2);
   the position bias lives in block 0 of each stack */
static const s2s_pat t5_pats[] = {
    {WM_M_L_Q, WM_MK_LINEAR, 0, 0, "%s.block.%d.layer.0.SelfAttention.q"},
    {WM_M_L_K, WM_MK_LINEAR, 0, 0, "%s.block.%d.layer.0.SelfAttention.k"},
    {WM_M_L_V, WM_MK_LINEAR, 0, 0, "%s.block.%d.layer.0.SelfAttention.v"},
    {WM_M_L_O, WM_MK_LINEAR, 0, 0, "%s.block.%d.layer.0.SelfAttention.o"},
    {WM_M_L_ATTN_NORM, WM_MK_NORM, 0, 0, "%s.block.%d.layer.0.layer_norm"},
    {WM_M_L_XQ, WM_MK_LINEAR, 1, 0, "%s.block.%d.layer.1.EncDecAttention.q"},
    {WM_M_L_XK, WM_MK_LINEAR, 1, 0, "%s.block.%d.layer.1.EncDecAttention.k"},
    {WM_M_L_XV, WM_MK_LINEAR, 1, 0, "%s.block.%d.layer.1.EncDecAttention.v"},
    {WM_M_L_XO, WM_MK_LINEAR, 1, 0, "%s.block.%d.layer.1.EncDecAttention.o"},
    {WM_M_L_XATTN_NORM, WM_MK_NORM, 1, 0, "%s.block.%d.layer.1.layer_norm"},
    {WM_M_L_UP, WM_MK_LINEAR, 2, 2, "%s.block.%d.layer.1.DenseReluDense.wi"},
    {WM_M_L_GATE, WM_MK_LINEAR, 2, 1, "%s.block.%d.layer.1.DenseReluDense.wi_0"},
    {WM_M_L_UP, WM_MK_LINEAR, 2, 1, "%s.block.%d.layer.1.DenseReluDense.wi_1"},
    {WM_M_L_DOWN, WM_MK_LINEAR, 2, 0, "%s.block.%d.layer.1.DenseReluDense.wo"},
    {WM_M_L_MLP_NORM, WM_MK_NORM, 2, 0, "%s.block.%d.layer.1.layer_norm"},
    {WM_M_L_UP, WM_MK_LINEAR, 1, 2, "%s.block.%d.layer.2.DenseReluDense.wi"},
    {WM_M_L_GATE, WM_MK_LINEAR, 1, 1, "%s.block.%d.layer.2.DenseReluDense.wi_0"},
    {WM_M_L_UP, WM_MK_LINEAR, 1, 1, "%s.block.%d.layer.2.DenseReluDense.wi_1"},
    {WM_M_L_DOWN, WM_MK_LINEAR, 1, 0, "%s.block.%d.layer.2.DenseReluDense.wo"},
    {WM_M_L_MLP_NORM, WM_MK_NORM, 1, 0, "%s.block.%d.layer.2.layer_norm"},
};
static const char *const t5_unused[] = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", NULL};
static const s2s_names t5_names = {
    "t5",
    "num_layers", "num_decoder_layers", "num_heads", "num_heads", "d_ff", "d_ff", NULL, NULL, "d_kv",
    "layer_norm_epsilon", "feed_forward_proj", "relu", NULL, 1, "shared", {NULL, NULL}, {NULL, NULL},
    {"encoder.final_layer_norm", "decoder.final_layer_norm"},
    {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias",
     "decoder.block.0.layer.0.SelfAttention.relative_attention_bias"},
    "lm_head", NULL, NULL, t5_pats, sizeof t5_pats / sizeof t5_pats[0], t5_unused};

/* TrOCR (TrOCRForCausalLM as a VisionEncoderDecoder's decoder): BART's decoder layers under "decoder.", learned
   positions with offset 2, layernorm_embedding switched by the config, output_projection as the head; no encoder
   stack of its own (the composite's image encoder), so no encoder keys. */
static const char *const trocr_unused[] = {NULL};
static const s2s_names trocr_names = {
    "trocr",
    NULL, "decoder_layers", NULL, "decoder_attention_heads", NULL, "decoder_ffn_dim", "max_position_embeddings", NULL,
    NULL, NULL, "activation_function", "gelu", "layernorm_embedding", 0, "decoder.model.decoder.embed_tokens",
    {NULL, "decoder.model.decoder.embed_positions"}, {NULL, "decoder.model.decoder.layernorm_embedding"},
    {NULL, NULL}, {NULL, NULL}, "decoder.output_projection", NULL, "decoder.", bart_pats,
    sizeof bart_pats / sizeof bart_pats[0], trocr_unused};

/* Task heads over the whole-sequence encoder-decoder (one graph, WM_S2S_PART_CLS, model_s2s.c): the task, the
   inference class's suffix, the head's tensors (dense + tanh, then out_proj to the labels) read at each row's last
   eos_token_id of the decoder's output (transformers' BartForSequenceClassification). A family row serves one by
   pointing at it. */
typedef struct s2s_head {
    int task;
    const char *class_suffix, *dense, *out;
} s2s_head;

static const s2s_head s2s_heads[] = {
    {WM_TASK_TEXT_CLASSIFICATION, "ForSequenceClassification", "classification_head.dense",
     "classification_head.out_proj"},
};

typedef struct s2s_family {
    const char *model_type, *class_stem, *class_suffix; /* inference class = stem + suffix */
    const s2s_names *names;
    int positions;      /* 0: no absolute positions (relative buckets), 1 learned, 2 sinusoidal (Marian) */
    int64_t pos_offset; /* learned table rows = max_position_embeddings + offset (BART's 2) */
    int emb_norm;       /* layernorm_embedding in both stacks */
    double eps;         /* the norm epsilon when the config has no key for it (nn.LayerNorm's default) */
    wm_norm_kind norm;  /* LayerNorm with bias, or RMS without bias or mean subtraction (T5LayerNorm) */
    int pre_norm;       /* x + f(norm(x)) with a final norm per stack, instead of norm(x + f(x)) */
    int bias;           /* the linears carry biases */
    int scale_attn;     /* scores scaled by head_dim^-1/2 (T5: not scaled) */
    int rel_bias;       /* relative position buckets (relative_attention_num_buckets / _max_distance) */
    int tied_scale;     /* a tied lm_head reads the output scaled by d_model^-1/2 (T5's scale_decoder_outputs) */
    int64_t seq;        /* no positions key: the sequence length P stands for (the recipe's; T5's n_positions) */
    /* speech encoder-decoders (Whisper); zero in the text rows */
    int k_nobias;       /* attention k_proj has no bias */
    int mel_stem;       /* log-mel input through conv1 / conv2 (num_mel_bins), no encoder padding mask */
    int task;           /* the one task it builds for (0: text2text-generation) */
    int dec_only;       /* a decoder row only: built as the decoder of a composite (s2s_composites[]) */
    const s2s_head *cls; /* the sequence-classification head it also serves (a row of s2s_heads[]), or NULL */
} s2s_family;

static const s2s_family s2s_families[] = {
    {"bart", "Bart", "ForConditionalGeneration", &bart_names, 1, 2, 1, 1e-5, WM_NORM_LAYER, 0, 1, 1, 0, 0, 0,
     .cls = &s2s_heads[0]},
    {"marian", "Marian", "MTModel", &bart_names, 2, 0, 0, 1e-5, WM_NORM_LAYER, 0, 1, 1, 0, 0, 0},
    {"t5", "T5", "ForConditionalGeneration", &t5_names, 0, 0, 0, 1e-6, WM_NORM_RMS, 1, 0, 0, 1, 1, 512},
    {"whisper", "Whisper", "ForConditionalGeneration", &whisper_names, 1, 0, 0, 1e-5, WM_NORM_LAYER, 1, 1, 1, 0, 0, 0,
     .k_nobias = 1, .mel_stem = 1, .task = WM_TASK_ASR},
    {"trocr", "TrOCR", "ForCausalLM", &trocr_names, 1, 2, 1, 1e-5, WM_NORM_LAYER, 0, 1, 1, 0, 0, 0,
     .task = WM_TASK_IMAGE_TO_TEXT, .dec_only = 1},
};
#define N_FAM (sizeof s2s_families / sizeof s2s_families[0])

/* Composite checkpoints: the encoder from another table (an image tower of arch_vtables.c) and the decoder from a
   dec_only row above, each from its own sub-config, their tensors under enc_prefix / the row's layer_prefix. */
typedef struct s2s_composite {
    const char *model_type, *enc_key, *dec_key, *enc_prefix, *inference_class;
    const char *proj; /* the encoder -> decoder width projection when the widths differ (and no cross size is set) */
    const char *cross_key; /* the decoder config's cross-attention input width key */
    const char *enc_unused; /* under enc_prefix: the encoder's tensors the composite does not use (its pooler) */
    int task;
    const char *tiny_enc, *tiny_dec; /* the sub-config model_types of a tiny config (wm_sweep_tiny_config) */
} s2s_composite;

static const s2s_composite s2s_composites[] = {
    {"vision-encoder-decoder", "encoder", "decoder", "encoder.", "VisionEncoderDecoderModel", "enc_to_dec_proj",
     "cross_attention_hidden_size", "pooler.", WM_TASK_IMAGE_TO_TEXT, "vit", "trocr"},
};
#define N_COMP (sizeof s2s_composites / sizeof s2s_composites[0])

const char *wm_s2s_type(size_t i) {
    if (i < N_COMP) return s2s_composites[i].model_type;
    for (size_t k = 0; k < N_FAM; k++) /* the dec_only rows build inside a composite only: not listed */
        if (!s2s_families[k].dec_only && i-- == N_COMP) return s2s_families[k].model_type;
    return NULL;
}

static const s2s_composite *find_composite(const char *model_type) {
    for (size_t i = 0; model_type && i < N_COMP; i++)
        if (!strcmp(s2s_composites[i].model_type, model_type)) return &s2s_composites[i];
    return NULL;
}

static const s2s_family *find_family(const char *model_type) {
    for (size_t i = 0; model_type && i < N_FAM; i++)
        if (!strcmp(s2s_families[i].model_type, model_type)) return &s2s_families[i];
    return NULL;
}

int wm_s2s_composite_keys(const char *model_type, const char **enc_key, const char **dec_key, const char **enc_type,
                          const char **dec_type) {
    const s2s_composite *c = find_composite(model_type);
    if (!c) return 0;
    *enc_key = c->enc_key, *dec_key = c->dec_key, *enc_type = c->tiny_enc, *dec_type = c->tiny_dec;
    return 1;
}

const void *wm_s2s_find(const char *model_type) {
    const s2s_composite *c = find_composite(model_type);
    return c ? (const void *)c : (const void *)find_family(model_type);
}

/* Config keys whose set values change the math in ways these graphs do not model. Two describe the family
 * itself where it already computes that way, and then pass: static_position_embeddings true with sinusoidal
 * positions, normalize_embedding false without an embedding norm (Marian's published configs carry both). */
static wm_status check_denied(const wm_arch *a, wm_error *err) {
    static const struct {
        const char *key;
        int bad; /* the value refused: 1 true, 0 false */
    } keys[] = {{"normalize_before", 1}, {"add_final_layer_norm", 1}, {"static_position_embeddings", 1},
                {"share_encoder_decoder_embeddings", 0}, {"normalize_embedding", 0}, {"add_bias_logits", 1},
                {"use_learned_position_embeddings", 0}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, keys[i].key);
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsBool(v))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", a->cfg->file, keys[i].key);
        int as_family = (a->pos_sinusoidal && !strcmp(keys[i].key, "static_position_embeddings")) ||
                        (!a->emb_norm && !strcmp(keys[i].key, "normalize_embedding"));
        if (cJSON_IsTrue(v) == keys[i].bad && !as_family)
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
    const s2s_names *nm = f->names;
    const int64_t big = 1 << 20;
    if (!arch_cfg_int(a, "d_model", -1, 1, big, &a->H, err) ||
        !arch_cfg_int(a, "vocab_size", -1, 1, 1 << 24, &a->V, err) ||
        (nm->enc_layers && !arch_cfg_int(a, nm->enc_layers, -1, 1, 4096, &a->enc_L, err)) ||
        !arch_cfg_int(a, nm->dec_layers, -1, 1, 4096, &a->dec_L, err) ||
        (nm->enc_heads && !arch_cfg_int(a, nm->enc_heads, -1, 1, 4096, &a->enc_nh, err)) ||
        !arch_cfg_int(a, nm->dec_heads, -1, 1, 4096, &a->dec_nh, err) ||
        (nm->enc_ffn && !arch_cfg_int(a, nm->enc_ffn, -1, 1, big, &a->enc_I, err)) ||
        !arch_cfg_int(a, nm->dec_ffn, -1, 1, big, &a->dec_I, err) ||
        (nm->positions && !arch_cfg_int(a, nm->positions, -1, 1, big, &a->P, err)) ||
        (nm->head_dim && !arch_cfg_int(a, nm->head_dim, -1, 1, 1 << 16, &a->hd, err)))
        return err->status;
    if (f->mel_stem && (!arch_cfg_int(a, "num_mel_bins", -1, 1, 1024, &a->n_mels, err) ||
                        !arch_cfg_int(a, nm->enc_positions, -1, 1, big, &a->enc_P, err)))
        return err->status;
    if (!nm->positions) a->P = f->seq;
    if (!nm->enc_layers) /* no encoder stack here (a composite's): the decoder's sizes stand in */
        a->enc_L = 0, a->enc_nh = a->dec_nh, a->enc_I = a->dec_I;
    if (a->dec_L < 0 && nm->dec_layers_default) a->dec_L = a->enc_L; /* T5's num_decoder_layers: num_layers */
    const char *keys[] = {"d_model", "vocab_size", nm->enc_layers, nm->dec_layers, nm->enc_heads, nm->dec_heads,
                          nm->enc_ffn, nm->dec_ffn, nm->positions, nm->head_dim,
                          f->mel_stem ? "num_mel_bins" : NULL, f->mel_stem ? nm->enc_positions : NULL};
    const int64_t vals[] = {a->H, a->V, a->enc_L, a->dec_L, a->enc_nh, a->dec_nh, a->enc_I, a->dec_I, a->P, a->hd,
                            a->n_mels, a->enc_P};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        if (keys[i] && vals[i] <= 0)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': missing (needed to build the graph)", a->cfg->file,
                          keys[i]);
    if (!nm->head_dim) {
        const char *hk[2] = {nm->enc_heads ? nm->enc_heads : nm->dec_heads, nm->dec_heads};
        const int64_t hn[2] = {a->enc_nh, a->dec_nh};
        for (int k = 0; k < 2; k++)
            if (a->H % hn[k])
                return wm_err(err, WM_ERR_INPUT, "%s: field '%s': d_model %lld is not divisible by %lld heads",
                              a->cfg->file, hk[k], (long long)a->H, (long long)hn[k]);
        a->hd = a->H / a->enc_nh;
        a->dec_hd = a->H / a->dec_nh;
    } else {
        a->dec_hd = a->hd;
        if (a->hd * a->enc_nh > big || a->hd * a->dec_nh > big)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %lld x %lld heads is over %lld", a->cfg->file,
                          nm->head_dim, (long long)a->hd, (long long)(a->enc_nh > a->dec_nh ? a->enc_nh : a->dec_nh),
                          (long long)big);
    }
    int64_t dv;
    if (!arch_cfg_int(a, "decoder_vocab_size", a->V, 1, 1 << 24, &dv, err)) return err->status;
    if (dv != a->V)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'decoder_vocab_size': %lld differs from vocab_size %lld "
                      "(separate decoder vocabularies are not modeled)", a->cfg->file, (long long)dv, (long long)a->V);
    a->L = a->enc_L + a->dec_L;
    a->E = a->H;
    a->nh = a->kvh = a->enc_nh;
    a->I = a->enc_I;
    return WM_OK;
}

/* Relative position buckets: relative_attention_num_buckets (default 32) and relative_attention_max_distance
   (default 128), as T5Config. The bucketing needs buckets >= 4 (a quarter of them exact in the encoder) and a
   max_distance past the decoder's buckets / 2 exact distances; the lookup table of 2 * max_distance + 1 entries
   is bounded by the range. */
static wm_status rel_bias(wm_arch *a, wm_error *err) {
    const char *kb = "relative_attention_num_buckets", *km = "relative_attention_max_distance";
    if (!arch_cfg_int(a, kb, 32, 4, 4096, &a->rel_buckets, err) ||
        !arch_cfg_int(a, km, 128, 3, 1 << 16, &a->rel_max_dist, err))
        return err->status;
    if (a->rel_max_dist <= a->rel_buckets / 2)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %lld is not past the %lld exact distances of %lld buckets",
                      a->cfg->file, km, (long long)a->rel_max_dist, (long long)(a->rel_buckets / 2),
                      (long long)a->rel_buckets);
    a->rel_rows = a->rel_buckets;
    return WM_OK;
}

/* The activation named by the family's key ("gated-NAME": a gated MLP; "gated-gelu" is gelu_new, as T5Config). */
static wm_status activation(wm_arch *a, const s2s_family *f, wm_error *err) {
    const char *key = f->names->act;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    const char *act = f->names->act_default;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a string", a->cfg->file, key);
        act = v->valuestring;
    }
    a->gated = !strncmp(act, "gated-", 6);
    const char *name = a->gated ? act + 6 : act;
    if (a->gated && !strcmp(name, "gelu")) name = "gelu_new";
    a->act = WM_ACT_NONE;
    for (const wm_act_name_row *r = wm_act_names; r->name; r++)
        if (!strcmp(r->name, name)) a->act = r->act;
    if (a->act == WM_ACT_NONE)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': activation '%s' is not supported", a->cfg->file, key,
                      act);
    return WM_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The task: the row's own (generation), or its head's (f->cls) when asked for or, with no task given, when
   architectures[0] names the head's class; a head builds one graph (a->s2s_part WM_S2S_PART_CLS). */
static wm_status resolve_task(wm_arch *a, const s2s_family *f, int task, wm_error *err) {
    int own = f->task ? f->task : WM_TASK_TEXT2TEXT_GENERATION;
    const char *arch0 = a->cfg->n_architectures ? a->cfg->architectures[0] : NULL;
    if (f->cls && (task == f->cls->task || (task < 0 && arch0 && ends_with(arch0, f->cls->class_suffix)))) {
        a->task = f->cls->task;
        a->s2s_part = WM_S2S_PART_CLS;
        snprintf(a->inference_class, sizeof a->inference_class, "%s%s", f->class_stem, f->cls->class_suffix);
        return WM_OK;
    }
    if (task >= 0 && task != own)
        return wm_err(err, WM_ERR_UNSUPPORTED, "model_type '%s': task '%s' is not supported (this encoder-decoder "
                      "builds for %s%s%s)", a->model_type, wm_task_name(task), wm_task_name(own),
                      f->cls ? " and " : "", f->cls ? wm_task_name(f->cls->task) : "");
    a->task = own;
    if (arch0 && strstr(arch0, "ForSequenceClassification"))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'architectures': '%s': %s", a->cfg->file, arch0,
                      f->cls ? "a sequence classifier builds for task text-classification, not generation"
                             : "the sequence-classification head of this encoder-decoder is not modeled "
                               "(text2text-generation only)");
    snprintf(a->inference_class, sizeof a->inference_class, "%s%s", f->class_stem, f->class_suffix);
    return WM_OK;
}

/* A sequence classifier's config: the labels (num_labels or id2label), eos_token_id (one id, where each row is read)
   and decoder_start_token_id (the shifted decoder input's first token), each in range; missing: refused, as
   transformers cannot run the head without them. */
static wm_status cls_config(wm_arch *a, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    if (c->num_labels <= 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_labels': missing (the classification head needs num_labels "
                      "or id2label)", c->file);
    a->labels = c->num_labels;
    if (!c->eos.n)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'eos_token_id': missing (the classifier reads the decoder at each "
                      "row's last eos token)", c->file);
    if (c->eos.n > 1)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'eos_token_id': a list of %zu ids; the classifier reads one "
                      "eos token", c->file, (size_t)c->eos.n);
    a->eos_id = c->eos.v[0];
    if (a->eos_id < 0 || a->eos_id >= a->V)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'eos_token_id': %lld is outside the vocabulary (vocab_size %lld)",
                      c->file, (long long)a->eos_id, (long long)a->V);
    if (!arch_cfg_int(a, "decoder_start_token_id", -1, 0, a->V - 1, &a->dec_start, err)) return err->status;
    if (a->dec_start < 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'decoder_start_token_id': missing (the decoder reads input_ids "
                      "shifted right behind it)", c->file);
    return WM_OK;
}

/* The module mod of slot (-1: global) named name, out x in; opt: a checkpoint may lack it (a named PARAM). */
static wm_status want(wm_arch *a, const wm_st_file *st, int slot, int mod, int kind, const char *name, int64_t out,
                      int64_t in, int opt, wm_error *err) {
    if (opt && st && !wm_st_find(st, name)) return WM_OK; /* absent: not part of this checkpoint */
    arch_want w = {.mod = mod, .layer = slot, .pat = name, .kind = (uint8_t)kind, .required = 1,
                   .bias = a->mlp_bias};
    wm_status s = arch_fill_module(a, st, &w, err);
    if (s) return s;
    wm_module *m = arch_mod_mut(a, slot, mod);
    m->out = out;
    m->in = in;
    return arch_check_shape(a, m, err);
}

/* out x in of layer module mod in a stack of nh heads of hd, MLP size I. */
static void layer_dims(const wm_arch *a, int mod, int64_t nh, int64_t hd, int64_t I, int64_t *out, int64_t *in) {
    *out = *in = a->H;
    switch (mod) {
    case WM_M_L_Q: case WM_M_L_K: case WM_M_L_V: case WM_M_L_XQ: case WM_M_L_XK: case WM_M_L_XV: *out = nh * hd; break;
    case WM_M_L_O: case WM_M_L_XO: *in = nh * hd; break;
    case WM_M_L_UP: case WM_M_L_GATE: *out = I; break;
    case WM_M_L_DOWN: *in = I; break;
    default: break;
    }
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

static wm_status modules(wm_arch *a, const s2s_family *f, const s2s_composite *cp, const wm_st_file *st,
                         wm_error *err) {
    const s2s_names *nm = f->names;
    a->mods = calloc((size_t)(a->L + 1) * WM_M_COUNT, sizeof *a->mods);
    if (!a->mods) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    static const int pos_m[2] = {WM_M_G_POS, WM_M_G_DEC_POS}, en_m[2] = {WM_M_G_EMB_NORM, WM_M_G_DEC_EMB_NORM},
                     fn_m[2] = {WM_M_G_FINAL_NORM, WM_M_G_DEC_FINAL_NORM},
                     rb_m[2] = {WM_M_G_REL_BIAS, WM_M_G_DEC_REL_BIAS};
    const int64_t heads[2] = {a->enc_nh, a->dec_nh};
    wm_status s = want(a, st, -1, WM_M_G_EMBED, WM_MK_EMBED, nm->shared, a->V, a->H, 0, err);
    for (int d = 0; d < 2 && !s; d++) {
        if (!nm->dec_layers || (!d && !nm->enc_layers)) continue; /* no such stack here */
        if (a->abs_pos && !a->pos_sinusoidal)
            s = want(a, st, -1, pos_m[d], WM_MK_EMBED, nm->pos[d], !d && nm->enc_positions ? a->enc_P
                                                                                           : a->P + f->pos_offset,
                     a->H, 0, err);
        if (!s && a->emb_norm) s = want(a, st, -1, en_m[d], WM_MK_NORM, nm->emb_norm[d], a->H, a->H, 0, err);
        if (!s && f->pre_norm) s = want(a, st, -1, fn_m[d], WM_MK_NORM, nm->final_norm[d], a->H, a->H, 0, err);
        if (!s && f->rel_bias)
            s = want(a, st, -1, rb_m[d], WM_MK_EMBED, nm->rel_bias[d], a->rel_rows, heads[d], 0, err);
    }
    if (!s && f->mel_stem) s = mel_stem_check(a, st, err);
    if (!s && a->vis_enc && a->x_in == a->H && a->enc_H != a->H) /* the composite's enc_to_dec_proj */
        s = want(a, st, -1, WM_M_G_PROJ, WM_MK_LINEAR, cp->proj, a->H, a->enc_H, 0, err);
    if (a->s2s_part == WM_S2S_PART_CLS) { /* the classification head in place of the lm_head */
        if (!s) s = want(a, st, -1, WM_M_H_0, WM_MK_LINEAR, f->cls->dense, a->H, a->H, 0, err);
        if (!s) s = want(a, st, -1, WM_M_H_1, WM_MK_LINEAR, f->cls->out, a->labels, a->H, 0, err);
    } else {
        if (!s && !a->tied) s = want(a, st, -1, WM_M_G_LM_HEAD, WM_MK_LINEAR, nm->lm_head, a->V, a->H, 0, err);
        if (!s && !a->tied) arch_mod_mut(a, -1, WM_M_G_LM_HEAD)->has_bias = 0;
        if (!s && nm->logits_bias) s = want(a, st, -1, WM_M_H_BIAS, WM_MK_PARAM, nm->logits_bias, a->V, 1, 1, err);
    }
    for (int64_t slot = 0; slot < a->L && !s; slot++) {
        int dec = slot >= a->enc_L;
        int64_t layer = dec ? slot - a->enc_L : slot, I = dec ? a->dec_I : a->enc_I;
        for (size_t i = 0; i < nm->n_layers && !s; i++) {
            const s2s_pat *p = &nm->layers[i];
            if ((p->stack == 1 && !dec) || (p->stack == 2 && dec) || (p->ffn == 1 && !a->gated) ||
                (p->ffn == 2 && a->gated))
                continue;
            char name[192];
            size_t np = (size_t)snprintf(name, sizeof name, "%s", nm->layer_prefix ? nm->layer_prefix : "");
            snprintf(name + np, sizeof name - np, p->pat, dec ? "decoder" : "encoder", (int)layer);
            int64_t out, in;
            layer_dims(a, p->mod, dec ? a->dec_nh : a->enc_nh, dec ? a->dec_hd : a->hd, I, &out, &in);
            if (a->x_in && (p->mod == WM_M_L_XK || p->mod == WM_M_L_XV)) in = a->x_in; /* cross_attention_hidden_size */
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
static wm_status check_unused(wm_arch *a, const s2s_family *f, const s2s_composite *cp, const wm_st_file *st,
                              wm_error *err) {
    const s2s_names *nm = f->names;
    char skip[96] = "";
    if (cp) snprintf(skip, sizeof skip, "%s%s", cp->enc_prefix, cp->enc_unused);
    char lm[200], pw[2][200];
    snprintf(lm, sizeof lm, "%s.weight", nm->lm_head);
    for (int d = 0; d < 2; d++) snprintf(pw[d], sizeof pw[d], "%s.weight", nm->pos[d] ? nm->pos[d] : "");
    for (size_t i = 0; i < wm_st_count(st); i++) {
        const char *name = wm_st_get(st, i)->name;
        int ok = 0;
        for (size_t k = 0; nm->known_unused[k] && !ok; k++) ok = !strcmp(name, nm->known_unused[k]);
        for (size_t k = 0; a->mel_stem && k < 4 && !ok; k++) ok = !strcmp(name, mel_stem_tensors[k]);
        ok |= a->tied && !strcmp(name, lm);
        ok |= skip[0] && !strncmp(name, skip, strlen(skip));
        /* sinusoidal tables saved as buffers */
        ok |= a->pos_sinusoidal && (!strcmp(name, pw[0]) || !strcmp(name, pw[1]));
        for (int t = 0; t < 2 && !ok; t++) { /* this arch's modules, then a composite's image encoder's */
            const wm_arch *x = t ? a->tower[1] : a;
            for (size_t m = 0; x && !ok && m < (size_t)(x->L + 1) * WM_M_COUNT; m++) {
                const wm_module *md = &x->mods[m];
                ok = md->present && (!strcmp(md->w, name) || (md->has_bias && !strcmp(md->b, name)));
            }
        }
        if (ok) continue;
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s' is not understood by the encoder-decoder tables "
                      "(model_type '%s')", name, a->model_type);
    }
    return WM_OK;
}

/* The norm epsilon: the family's key when it has one and the config sets it, else the family's value. */
static wm_status norm_eps(wm_arch *a, const s2s_family *f, wm_error *err) {
    a->eps = f->eps;
    const cJSON *e = f->names->eps ? cJSON_GetObjectItemCaseSensitive(a->cfg->root, f->names->eps) : NULL;
    if (!e || cJSON_IsNull(e)) return WM_OK;
    if (!cJSON_IsNumber(e) || !(e->valuedouble > 0) || e->valuedouble > 1)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a number above 0, at most 1", a->cfg->file,
                      f->names->eps);
    a->eps = e->valuedouble;
    return WM_OK;
}

/* A composite: the image encoder (a->tower[1]) from enc_key's sub-config, then the decoder row of dec_key's
   sub-config (a->tower_cfg[0], in a->cfg while it resolves: messages name "config.json: decoder"). */
static wm_status resolve_composite(const wm_hf_config *c, const s2s_composite *cp, const wm_st_file *st, int task,
                                   wm_arch *a, wm_error *err);

/* The row f's arch from a->cfg (the checkpoint's config, or a composite's decoder sub-config). */
static wm_status resolve_rows(const s2s_family *f, const s2s_composite *cp, const wm_st_file *st, int task,
                              wm_arch *a, wm_error *err);

wm_status wm_s2s_resolve(const wm_hf_config *c, const wm_st_file *st, int task, wm_arch *a, wm_error *err) {
    const s2s_composite *cp = find_composite(c->model_type);
    if (cp) return resolve_composite(c, cp, st, task, a, err);
    const s2s_family *f = find_family(c->model_type);
    if (f->dec_only)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'model_type': '%s' is a decoder built inside a composite "
                      "checkpoint only (model_type '%s' with a '%s' sub-config)", c->file, c->model_type,
                      s2s_composites[0].model_type, s2s_composites[0].dec_key);
    return resolve_rows(f, NULL, st, task, a, err);
}

static wm_status resolve_composite(const wm_hf_config *c, const s2s_composite *cp, const wm_st_file *st, int task,
                                   wm_arch *a, wm_error *err) {
    wm_status s;
    if (task >= 0 && task != cp->task)
        return wm_err(err, WM_ERR_UNSUPPORTED, "model_type '%s': task '%s' is not supported (it builds for %s)",
                      c->model_type, wm_task_name(task), wm_task_name(cp->task));
    if ((s = arch_sub_config(a, c, cp->enc_key, NULL, 1, err)) ||
        (s = arch_sub_config(a, c, cp->dec_key, NULL, 0, err)))
        return s;
    const wm_hf_config *dc = a->tower_cfg[0];
    const s2s_family *f = find_family(dc->model_type);
    if (!f || !f->dec_only) {
        char known[256] = "";
        for (size_t i = 0, u = 0; i < N_FAM && u < sizeof known; i++)
            if (s2s_families[i].dec_only)
                u += (size_t)snprintf(known + u, sizeof known - u, "%s%s", u ? ", " : "", s2s_families[i].model_type);
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'model_type': '%s' is not supported as the decoder of "
                      "model_type '%s' (%s)", dc->file, dc->model_type ? dc->model_type : "(missing)", c->model_type,
                      known);
    }
    if (!(a->tower[1] = calloc(1, sizeof *a->tower[1]))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if ((s = wm_vis_resolve_encoder(a->tower_cfg[1], st, cp->enc_prefix, a->tower[1], err))) return s;
    a->vis_enc = 1;
    a->enc_H = a->tower[1]->H;
    a->cfg = dc;
    s = resolve_rows(f, cp, st, task, a, err);
    a->cfg = c;
    a->model_type = c->model_type;
    return s;
}

/* The cross-attention's input width of a composite: cross_key when set (it must be the encoder's width, as
   transformers checks), else the decoder's own (enc_to_dec_proj maps the encoder's to it when they differ). */
static wm_status cross_width(wm_arch *a, const s2s_composite *cp, wm_error *err) {
    int64_t x;
    if (!arch_cfg_int(a, cp->cross_key, 0, 1, 1 << 20, &x, err)) return err->status;
    if (x && x != a->enc_H)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %lld differs from the encoder's hidden_size %lld",
                      a->cfg->file, cp->cross_key, (long long)x, (long long)a->enc_H);
    a->x_in = x ? x : a->H;
    return WM_OK;
}

static wm_status resolve_rows(const s2s_family *f, const s2s_composite *cp, const wm_st_file *st, int task,
                              wm_arch *a, wm_error *err) {
    wm_status s = WM_OK;
    a->graph = WM_GRAPH_S2S;
    a->kind = WM_ENCDEC;
    a->scheme = f->names->scheme;
    a->norm = f->norm;
    a->post_norm = !f->pre_norm;
    a->mel_stem = f->mel_stem;
    a->pos = WM_POS_LEARNED;
    a->abs_pos = f->positions != 0;
    a->pos_sinusoidal = f->positions == 2;
    a->pos_offset = f->pos_offset;
    a->emb_norm = f->emb_norm;
    if (f->names->emb_norm_key) a->emb_norm = cfg_flag(a, f->names->emb_norm_key, 1, err, &s);
    if (s) return s;
    a->scale_attn = f->scale_attn;
    a->qkv_bias = a->o_bias = a->mlp_bias = f->bias;
    a->resid_scale = a->logits_div = a->logits_mul = 1.0;
    snprintf(a->prefix, sizeof a->prefix, "model.");
    if ((s = check_denied(a, err)) || (s = resolve_task(a, f, task, err)) || (s = sizes(a, f, err)) ||
        (a->s2s_part == WM_S2S_PART_CLS && (s = cls_config(a, err))) ||
        (cp && (s = cross_width(a, cp, err))) ||
        (f->rel_bias && (s = rel_bias(a, err))) || (s = norm_eps(a, f, err)))
        return s;
    a->tied = cfg_flag(a, "tie_word_embeddings", 1, err, &s);
    if (cp && st) { /* a composite's decoder: its own head when the checkpoint has one (a tied copy is the same) */
        char lm[200];
        snprintf(lm, sizeof lm, "%s.weight", f->names->lm_head);
        a->tied = !wm_st_find(st, lm);
    }
    int scale = cfg_flag(a, "scale_embedding", 0, err, &s);
    /* T5: a tied head reads the output scaled by d_model^-1/2 unless scale_decoder_outputs is false (transformers 5
       saves that key, with tie_word_embeddings always true; older configs: tie_word_embeddings false = unscaled) */
    int out_scale = f->tied_scale && cfg_flag(a, "scale_decoder_outputs", a->tied, err, &s);
    if (s) return s;
    a->embed_scale = scale ? sqrt((double)a->H) : 1.0;
    if (out_scale) a->logits_mul = 1.0 / sqrt((double)a->H);
    if ((s = activation(a, f, err)) || (s = modules(a, f, cp, st, err))) return s;
    if (cp) snprintf(a->inference_class, sizeof a->inference_class, "%s", cp->inference_class);
    if (st && (s = check_unused(a, f, cp, st, err))) return s;
    arch_count_params(a);
    if (a->mel_stem) /* the conv stem's tensors are no modules: counted here */
        a->n_params += (uint64_t)(a->H * a->n_mels * 3 + a->H + a->H * a->H * 3 + a->H);
    return WM_OK;
}

void wm_s2s_features(const wm_arch *a, wm_json *j) {
    char b[256];
    if (a->vis_enc) {
        const wm_arch *t = a->tower[1];
        snprintf(b, sizeof b, "image encoder '%s': %lld layers (%lld heads of %lld, ffn %lld), hidden %lld, "
                 "last_hidden_state to the decoder", t->model_type, (long long)t->L, (long long)t->nh, (long long)t->hd,
                 (long long)t->I, (long long)t->H);
        wm_json_str(j, NULL, b);
        wm_vis_features(t, j);
        if (wm_arch_mod(a, -1, WM_M_G_PROJ)->present) {
            snprintf(b, sizeof b, "enc_to_dec_proj %lld -> %lld", (long long)a->enc_H, (long long)a->H);
            wm_json_str(j, NULL, b);
        }
        snprintf(b, sizeof b, "decoder: %lld layers (%lld heads of %lld, ffn %lld) with cross-attention over %lld "
                 "values", (long long)a->dec_L, (long long)a->dec_nh, (long long)a->dec_hd, (long long)a->dec_I,
                 (long long)a->x_in);
        wm_json_str(j, NULL, b);
    } else {
        snprintf(b, sizeof b, "encoder-decoder: %lld encoder layers (%lld heads of %lld, ffn %lld), %lld decoder "
                 "layers (%lld heads of %lld, ffn %lld) with cross-attention", (long long)a->enc_L,
                 (long long)a->enc_nh, (long long)a->hd, (long long)a->enc_I, (long long)a->dec_L,
                 (long long)a->dec_nh, (long long)a->dec_hd, (long long)a->dec_I);
        wm_json_str(j, NULL, b);
    }
    if (a->mel_stem) {
        snprintf(b, sizeof b, "log-mel input (%lld bins): conv1 k3 + GELU, conv2 k3 stride 2 + GELU, stored encoder "
                 "positions (%lld)", (long long)a->n_mels, (long long)a->enc_P);
        wm_json_str(j, NULL, b);
    }
    if (!a->abs_pos) snprintf(b, sizeof b, "no absolute positions");
    else if (a->pos_sinusoidal) snprintf(b, sizeof b, "sinusoidal positions (%lld)", (long long)a->P);
    else snprintf(b, sizeof b, "learned positions (%lld, offset %lld)", (long long)a->P, (long long)a->pos_offset);
    wm_json_str(j, NULL, b);
    if (a->rel_buckets) {
        snprintf(b, sizeof b, "relative position buckets (%lld, max distance %lld): bidirectional in the encoder, "
                 "unidirectional in the decoder, one table per stack shared by its layers", (long long)a->rel_buckets,
                 (long long)a->rel_max_dist);
        wm_json_str(j, NULL, b);
    }
    if (a->emb_norm) wm_json_str(j, NULL, "LayerNorm after the embeddings");
    if (a->embed_scale != 1.0) wm_json_str(j, NULL, "token embeddings scaled by sqrt(d_model)");
    snprintf(b, sizeof b, "%s eps %g, %s; %s%s MLP %s bias", a->norm == WM_NORM_RMS ? "RMSNorm" : "LayerNorm", a->eps,
             a->post_norm ? "post-norm" : "pre-norm with a final norm per stack", a->gated ? "gated " : "",
             wm_act_name(a->act), a->mlp_bias ? "with" : "without");
    wm_json_str(j, NULL, b);
    if (!a->scale_attn) wm_json_str(j, NULL, "attention scores not scaled by head_dim^-1/2");
    if (a->s2s_part == WM_S2S_PART_CLS) {
        snprintf(b, sizeof b, "sequence classification in one graph: the decoder reads input_ids shifted right behind "
                 "decoder_start_token_id %lld (no cache); its state at each row's last eos_token_id %lld (a row "
                 "without one: its last position) through dense + tanh + out_proj to %lld labels",
                 (long long)a->dec_start, (long long)a->eos_id, (long long)a->labels);
        wm_json_str(j, NULL, b);
        return;
    }
    wm_json_str(j, NULL, a->tied ? "tied embeddings (lm_head = shared)" : "separate lm_head");
    if (a->logits_mul != 1.0) wm_json_str(j, NULL, "the decoder output scaled by d_model^-1/2 before the lm_head");
    if (a->logits_bias) wm_json_str(j, NULL, "logits + final_logits_bias");
}
