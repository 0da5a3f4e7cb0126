/*
 * arch.h - what a checkpoint is, resolved from tables: config keys and
 * tensor names map onto canonical modules and features (no per-model code).
 *
 * Two tables drive everything (arch.c):
 *  - naming schemes: for each canonical module (embed_tokens, q_proj,
 *    attn_norm, ...) the tensor-name pattern a family of checkpoints uses
 *    (GPT-2 `h.N.attn.c_attn` with Conv1D [in, out] weights, BERT
 *    `encoder.layer.N.attention.self.query`, DistilBERT `q_lin`, Llama-style
 *    `layers.N.self_attn.q_proj`, fused `qkv_proj` / `gate_up_proj` ...),
 *    its shape in symbolic dims, and structural defaults of the scheme
 *    (pre/post norm, norm kind, learned or rotary positions);
 *  - families: model_type -> scheme, tensor prefix, and the defaults a
 *    config leaves implicit (biases, q/k norms, fused projections,
 *    activation, eps, classification head).
 * model_type appears only in the family table. With weights, presence and
 * shapes of tensors decide (biases, q/k norms, fused projections, lm_head);
 * without (inspect, --random-weights) the family defaults and config flags
 * decide. Unknown config semantics, missing tensors, wrong shapes and
 * tensors no table understands are errors naming the key or tensor.
 */
#ifndef WM_BUILDER_ARCH_H
#define WM_BUILDER_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "hf/config.h"
#include "hf/safetensors.h"

typedef enum wm_task {
    WM_TASK_TEXT_GENERATION,
    WM_TASK_TEXT_CLASSIFICATION,
    WM_TASK_FEATURE_EXTRACTION,
    WM_TASK_TOKEN_CLASSIFICATION,
    WM_TASK_QUESTION_ANSWERING,
    WM_TASK_FILL_MASK,          /* masked-LM head: logits over the vocabulary per token */
    WM_TASK_IMAGE_CLASSIFICATION,
    WM_TASK_IMAGE_FEATURE_EXTRACTION,
    WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION,
    WM_TASK_TEXT2TEXT_GENERATION, /* encoder-decoder: an encoder graph and a decoder graph with caches */
    WM_TASK_AUDIO_CLASSIFICATION, /* input_values -> logits [batch, labels] (mean pooled over the valid frames) */
    WM_TASK_ASR,                  /* automatic-speech-recognition by CTC: logits [batch, frames, vocab] */
    WM_TASK_IMAGE_TO_TEXT,        /* an image encoder + a text decoder with cross-attention (VisionEncoderDecoder) */
    WM_TASK_KEYPOINT_DETECTION,   /* pixel_values of one person's box -> heatmaps [batch, keypoints, h, w] (VitPose) */
    WM_TASK_COUNT
} wm_task;

const char *wm_task_name(int task);
/* 1 for the tasks whose input is an image (pixel_values). */
int wm_task_is_image(int task);
/* 1 for the tasks whose input is audio (input_values). */
int wm_task_is_audio(int task);
/* -1 when unknown. */
int wm_task_from_name(const char *s);

/* WM_ENCDEC: an encoder and a decoder with cross-attention (graph WM_GRAPH_S2S, arch_s2s.c) */
typedef enum { WM_DECODER, WM_ENCODER, WM_ENCDEC } wm_family_kind;
/* Which graph a family builds: the text ones (by kind), a patch transformer (ViT, DeiT, DINOv2, CLIP's image
   tower), CLIP's text tower, CLIP's two towers, or a ResNet. */
/* WM_GRAPH_AUDIO: wav2vec2-style speech encoders (convolutional feature encoder, positional convolution, transformer
   stack; arch_audio.c, model_w2v.c). WM_GRAPH_S2S: encoder-decoders (arch_s2s.c, model_s2s.c). */
typedef enum {
    WM_GRAPH_TEXT, WM_GRAPH_VIT, WM_GRAPH_CLIP_TEXT, WM_GRAPH_DUAL, WM_GRAPH_RESNET, WM_GRAPH_S2S, WM_GRAPH_AUDIO
} wm_graph_kind;
/* What a vision tower's pooler_output is: none, tanh(dense(CLS)), the CLS of the normed sequence, or the final
   norm applied to the CLS only (CLIP's post_layernorm), or (CLIP text) the EOS token's state;
   SigLIP: attention pooling by a learned probe (MAP head) over the normed sequence; the last token through a
   head linear (text). */
typedef enum {
    WM_VPOOL_NONE, WM_VPOOL_DENSE_TANH, WM_VPOOL_CLS, WM_VPOOL_NORM_CLS, WM_VPOOL_EOS, WM_VPOOL_MAP, WM_VPOOL_LAST_HEAD
} wm_vpool;
/* Image-classification heads: a linear on CLS; the mean of two linears on CLS and the distillation token
   (DeiT with teacher); a linear on [CLS, mean of the patch tokens] (DINOv2). */
typedef enum { WM_VHEAD_CLS, WM_VHEAD_CLS_DIST_AVG, WM_VHEAD_CLS_MEAN } wm_vhead;
/* A keypoint-detection head on the patch grid: none, ReLU + bilinear upsampling + Conv 3x3 (use_simple_decoder), or
   two ConvTranspose 4x4 stride 2 + BatchNorm + ReLU then Conv 1x1 (the classic decoder). */
typedef enum { WM_POSE_NONE, WM_POSE_SIMPLE, WM_POSE_CLASSIC } wm_pose_head;

#define WM_RESNET_MAX_STAGES 8
#define WM_AUDIO_MAX_CONV 16
typedef enum { WM_NORM_LAYER, WM_NORM_RMS } wm_norm_kind;
typedef enum { WM_ACT_NONE, WM_ACT_GELU, WM_ACT_GELU_TANH, WM_ACT_SILU, WM_ACT_RELU, WM_ACT_QUICK_GELU, WM_ACT_TANH } wm_act;
typedef enum { WM_POS_LEARNED, WM_POS_ROPE } wm_pos_kind;
/* how position ids come about: a graph input (decoders), 0..S-1, or fairseq's padding-aware cumsum */
typedef enum { WM_POSID_INPUT, WM_POSID_ARANGE, WM_POSID_PADDING } wm_posid_kind;

const char *wm_act_name(wm_act a);

/* canonical modules; G_ = once per model, L_ = per layer, H_ = task head */
#define WM_MOD_LIST(X)                                                           \
    X(G_EMBED, "embed_tokens") X(G_POS, "embed_positions") X(G_TYPE, "embed_token_types") \
    X(G_EMB_NORM, "embed_norm") X(G_EMB_PROJ, "embed_proj") X(G_FINAL_NORM, "norm")      \
    X(G_LM_HEAD, "lm_head") X(H_0, "head.0") X(H_1, "head.1") X(H_NORM, "head.norm")     \
    X(H_BIAS, "head.bias")                                                                \
    X(G_PATCH, "patch_embed") X(G_CLS, "cls_token") X(G_DIST, "dist_token")              \
    X(G_REG, "register_tokens") X(G_PRE_NORM, "pre_norm") X(G_POOL, "pooler")            \
    X(G_PROJ, "projection") X(G_SCALE, "logit_scale") X(G_BIAS, "logit_bias")              \
    X(G_PROBE, "map_probe") X(G_MAP_QKV, "map_qkv") X(G_MAP_QKV_B, "map_qkv_bias")         \
    X(G_MAP_O, "map_o_proj") X(G_MAP_NORM, "map_norm") X(G_MAP_UP, "map_up")                \
    X(G_MAP_DOWN, "map_down") X(G_REL_BIAS, "rel_attn_bias") X(G_REL_EMB, "rel_embeddings")   \
    X(G_REL_NORM, "rel_norm") X(G_DEC_POS, "dec_embed_positions")                            \
    X(G_DEC_EMB_NORM, "dec_embed_norm") X(G_DEC_FINAL_NORM, "dec_norm")                      \
    X(G_DEC_REL_BIAS, "dec_rel_attn_bias")                                                    \
    X(L_ATTN_NORM, "attn_norm") X(L_Q, "q_proj") X(L_K, "k_proj") X(L_V, "v_proj")       \
    X(L_QKV, "qkv_proj") X(L_O, "o_proj") X(L_Q_NORM, "q_norm") X(L_K_NORM, "k_norm")    \
    X(L_MLP_NORM, "mlp_norm") X(L_GATE, "gate_proj") X(L_UP, "up_proj")                   \
    X(L_GATE_UP, "gate_up_proj") X(L_DOWN, "down_proj") X(L_ATTN_OUT_NORM, "attn_out_norm")      \
    X(L_MLP_OUT_NORM, "mlp_out_norm") X(L_LS1, "layer_scale1") X(L_LS2, "layer_scale2")     \
    X(L_POS_K, "pos_k_proj") X(L_POS_Q, "pos_q_proj")                                      \
    X(L_XATTN_NORM, "xattn_norm") X(L_XQ, "xq_proj")                                         \
    X(L_XK, "xk_proj") X(L_XV, "xv_proj") X(L_XO, "xo_proj")                                 \
    X(L_ROUTER, "router") X(L_SH_GATE, "shared_gate_proj") X(L_SH_UP, "shared_up_proj")        \
    X(L_SH_DOWN, "shared_down_proj") X(L_SH_ROUTER, "shared_expert_gate")          \
    X(L_SH_GATE_UP, "shared_gate_up_proj") X(L_DOWN_PART, "down_part_proj")

typedef enum wm_mod {
#define X(e, n) WM_M_##e,
    WM_MOD_LIST(X)
#undef X
    WM_M_COUNT
} wm_mod;
#define WM_M_FIRST_LAYER WM_M_L_ATTN_NORM

const char *wm_mod_name(int m);

/* VECTOR: one rank-1 tensor of length out, named by the pattern itself (a masked-LM head's output bias).
   CONV: a Conv2d weight [out, C, k, k] (in = C * k * k); PARAM: a raw parameter of out x in values in any
   shape with leading 1s (cls tokens [1, 1, H], layer scales [H], logit_scale []), named as it is (no ".weight") */
typedef enum { WM_MK_EMBED, WM_MK_NORM, WM_MK_LINEAR, WM_MK_CONV1D, WM_MK_VECTOR, WM_MK_CONV, WM_MK_PARAM } wm_mod_kind;

/* One module of the checkpoint: a weight and an optional bias. */
typedef struct wm_module {
    uint8_t present, has_bias, kind; /* kind: wm_mod_kind */
    int64_t out, in;                 /* LINEAR/CONV1D: out and in features; EMBED: rows, cols; NORM: in = size */
    char w[192], b[192];             /* checkpoint tensor names ("" when absent) */
    const wm_st_tensor *wt, *bt;     /* with weights: the tensors; NULL in random mode */
} wm_module;

typedef struct wm_rope {
    int64_t rot_dim;          /* rotated dims per head (even), <= head_dim */
    float *inv_freq;          /* rot_dim/2 values; malloc'ed */
    float *inv_freq_long;     /* longrope only: the set used past orig_max; NULL otherwise */
    int64_t orig_max;         /* longrope switch point */
    double scale;             /* cos/sin multiplier (yarn/longrope attention factor), 1 otherwise */
    double theta;
    const char *type;
} wm_rope;

/* A norm: its kind, epsilon and the offset its weight is stored with (Gemma's (1 + w) RMSNorm: 1). */
typedef struct wm_norm_spec {
    wm_norm_kind kind;
    double eps;
    float w_offset;
} wm_norm_spec;

typedef struct wm_arch {
    const wm_hf_config *cfg;
    const void *fam, *sch;    /* table rows (arch.c) */
    const char *model_type;   /* from the config, or the family when detected by tensors */
    const char *scheme;       /* naming scheme name */
    char prefix[32];          /* tensor prefix in use ("model.", "roberta." ...) */
    char inference_class[128];
    wm_task task;
    wm_family_kind kind;
    int detected;             /* model_type not in the family table: scheme detected from tensor names */
    int random;               /* no weights: shapes and presence from config + defaults */
    /* sizes */
    int64_t V, H, E, I, L, nh, kvh, hd, P, T, labels;
    int64_t pad_id;           /* padding_idx for WM_POSID_PADDING */
    /* relative position bias (T5-style buckets, bidirectional): one [rel_rows, nh] table (G_REL_BIAS) shared by
       every layer, added to the attention scores; rel_buckets 0: none */
    int64_t rel_buckets;      /* buckets the bucketing computes (both directions together) */
    int64_t rel_max_dist;     /* distances from this on share the last (log-spaced) bucket */
    int64_t rel_rows;         /* the table's rows (config relative_attention_num_buckets), >= rel_buckets */
    /* disentangled attention (DeBERTa v2/v3): relative position embeddings G_REL_EMB [2 * dis_span, H] (optionally
       normed, G_REL_NORM) projected per layer by the key (c2p) and query (p2c) projections (share_att_key) or their
       own (L_POS_K / L_POS_Q); scores += q . pos_k[idx] + k . pos_q[idx], idx = clamp(bucket(i - j) + span) */
    int dis_c2p, dis_p2c, dis_share_key;
    int64_t dis_span;         /* attention span: position_buckets, or max_relative_positions without buckets */
    int64_t dis_buckets;      /* position_buckets (log buckets); 0: exact distances */
    int64_t dis_max_rel;      /* max_relative_positions */
    int dis_rel_norm;         /* the relative embeddings are LayerNorm'ed (norm_rel_ebd layer_norm) */
    int dis_scale;            /* 1 + terms: the scores are scaled by (head_dim * dis_scale)^-1/2 */
    int abs_pos;              /* learned absolute positions added to the embeddings (G_POS) */
    int mask_rows;            /* padded query rows masked too, padded embeddings zeroed (DeBERTa's 2-D mask) */
    /* structure */
    wm_norm_kind norm;
    double eps;
    float norm_offset;        /* RMSNorm scales by (offset + weight): the export stores offset + weight */
    double embed_scale;       /* token embeddings are multiplied by this (1: not scaled) */
    int sub_norms;            /* the attention and MLP outputs are normalized before their residual add */
    int pre_norms;            /* the sublayers' inputs are normalized (0: only their outputs, OLMo 2) */
    int parallel;             /* x + attention(norm(x)) + MLP(norm'(x)): one residual add per layer */
    int mlp_norm_shared;      /* parallel: the MLP reads the attention's pre-norm output */
    int qkv_per_head;         /* fused qkv rows [heads, 3, head_dim] (GPT-NeoX) instead of [q | k | v] */
    int qk_norm_whole;        /* q/k norms over the whole projected q / k (heads x head_dim), not per head */
    int rope_interleaved;     /* rotary pairs (2i, 2i + 1) instead of (i, i + rot/2) */
    uint8_t *nope;            /* per layer: 1 = no rotary positions there (SmolLM3); NULL: rotary everywhere */
    double logits_mul;        /* logits are multiplied by this (Cohere's logit_scale; 1: none) */
    wm_act act, head_act;     /* MLP activation; activation between the two head linears */
    int gated, post_norm, fused_qkv, fused_gate_up, qk_norm, tied, conv1d;
    int qkv_bias, o_bias, mlp_bias;
    wm_pos_kind pos;
    wm_posid_kind posid;
    wm_rope rope;             /* every layer, or the full-attention ones when local_rope */
    wm_rope rope_local;       /* the sliding-window layers' own RoPE (local_rope) */
    int local_rope;
    int scale_attn;           /* scale scores by 1/sqrt(head_dim) (or query_scalar) */
    double query_scalar;      /* scores scaled by query_scalar^-1/2 instead of head_dim^-1/2; 0: head_dim */
    double attn_softcap;      /* scores = cap * tanh(scores / cap) before the mask; 0: none */
    double final_softcap;     /* the same on the logits */
    double attn_scale;        /* the score scale itself (Granite's attention_multiplier); 0: as above */
    double resid_scale;       /* each sublayer's output is multiplied by this before the residual add (1: none) */
    double logits_div;        /* logits are divided by this (Granite's logits_scaling; 1: none) */
    int scale_by_layer;       /* GPT-2 scale_attn_by_inverse_layer_idx */
    uint8_t *sliding;         /* per layer: 1 uses the sliding window; malloc'ed */
    int64_t window;           /* sliding window size, 0 when none (an encoder's is bidirectional: |i - j| <= window) */
    int n_head_mods;          /* 0, 1 or 2 head linears (H_0, H_1) */
    int head_pool_first;      /* classification: pool the first token */
    int head_pool_mean;       /* classification: pool the mean of the unpadded tokens instead */
    int head_transform;       /* every task head starts with H_0 + head_act + H_NORM (ModernBERT's prediction head);
                                 the task's linear is H_1, fill-mask's the tied decoder + H_BIAS */
    /* vision (graph != WM_GRAPH_TEXT) */
    wm_graph_kind graph;
    int64_t image, patch, C;  /* image_size, patch_size, num_channels */
    int64_t image_w;          /* the image's width (image is its height; the same unless image_size is [h, w]) */
    int64_t patch_pad;        /* zero padding of the patch Conv on each side (VitPose: 2; < patch / 2) */
    int pos_fold;             /* the position table's first row (a CLS slot with no CLS token) is added to every
                                 patch with the patch's own row (VitPose) */
    int64_t part;             /* ViTPose++: the MLP's last part outputs come from one dataset's expert (L_DOWN_PART,
                                 expert 0: dataset_index 0 fixed), the first H - part from L_DOWN; 0: none */
    int64_t n_part_experts;   /* the checkpoint's experts (only expert 0 is built) */
    int pose_head;            /* keypoint-detection heatmap head (model_pose.c): WM_POSE_* */
    int64_t pose_scale;       /* the simple head's upsampling factor (scale_factor) */
    int64_t n_patch;          /* (image / patch) * (image_w / patch) */
    int64_t n_pos;            /* position table rows: patches + CLS (+ distillation token) */
    int64_t pos_side;         /* the checkpoint's patch grid side when the graph's differs (positions interpolated
                                 bicubically at export, as transformers' interpolate_pos_encoding); 0: the same */
    int pos_antialias;        /* that interpolation antialiased (torch's antialias=True) */
    int64_t n_reg;            /* register tokens (after CLS, no positions) */
    int64_t proj;             /* projection_dim of CLIP's towers (0: no projection) */
    int layer_scale;          /* DINOv2 lambda1 / lambda2 */
    int causal;               /* CLIP text: causal mask */
    int64_t eos_id;           /* CLIP text pooling: first eos_id token; -1: argmax of the ids (eos_token_id 2); an
                                 encoder-decoder classifier: the last one (below) */
    wm_vpool vpool;
    wm_vhead vhead;
    int64_t n_stages;         /* ResNet */
    int64_t hidden_sizes[WM_RESNET_MAX_STAGES], depths[WM_RESNET_MAX_STAGES];
    int bottleneck, down_first, down_in_bottleneck;
    /* audio (WM_GRAPH_AUDIO): the convolutional feature encoder (conv_dim / conv_kernel / conv_stride), its norm
       ("group": GroupNorm on the first conv only; "layer": LayerNorm over channels after every conv), the positional
       convolution (num_conv_pos_embeddings, num_conv_pos_embedding_groups; weight-normed in the checkpoint, folded
       at export) and the encoder's norm order (do_stable_layer_norm: pre-norm, encoder.layer_norm last) */
    int64_t n_conv, conv_dim[WM_AUDIO_MAX_CONV], conv_kernel[WM_AUDIO_MAX_CONV], conv_stride[WM_AUDIO_MAX_CONV];
    int conv_bias, feat_layer_norm, stable, feat_proj_norm;
    wm_act feat_act;
    int64_t pos_k, pos_groups;
    int pos_wn;               /* the positional conv weight's spelling: 0 parametrizations (g, v), 1 weight_g / weight_v,
                                 2 a plain weight */
    int64_t sample_rate;      /* the feature extractor's (16000 unless a preprocessor says otherwise) */
    int tower_of;             /* one tower of a two-tower checkpoint: 1 text, 2 image (the other's tensors unused) */
    struct wm_arch *tower[2]; /* WM_GRAPH_DUAL: the text and the image tower (owned) */
    struct wm_hf_config *tower_cfg[2]; /* their configs, parsed from text_config / vision_config (owned) */
    /* encoder-decoder (graph WM_GRAPH_S2S, arch_s2s.c): mods layers 0..enc_L-1 are the encoder's, enc_L..L-1 the
       decoder's (L = enc_L + dec_L); H is d_model, P max_position_embeddings */
    int64_t enc_L, dec_L, enc_nh, dec_nh, enc_I, dec_I;
    int64_t pos_offset;       /* learned position tables: row = position + pos_offset (BART: 2) */
    int pos_sinusoidal;       /* positions computed, not learned: sin in the first half, cos in the second */
    int emb_norm;             /* a LayerNorm after the embeddings of both stacks (BART's layernorm_embedding) */
    int logits_bias;          /* logits + final_logits_bias */
    /* speech encoder-decoders (Whisper; zero elsewhere): the encoder reads log-mel features [B, n_mels, frames]
       through two Conv1d (k3 p1, then k3 s2 p1) + exact GELU and adds its own stored position table (enc_P rows);
       there is no padding mask (the features are a fixed window). Each stack ends in a final LayerNorm when
       post_norm is 0 (pre-norm layers). */
    int mel_stem;
    int64_t n_mels, enc_P;
    /* image encoder-decoders (VisionEncoderDecoder; zero elsewhere): the encoder is the image tower tower[1]
       (enc_L 0: every layer slot is the decoder's), reading pixel_values; encoder_hidden_states are enc_H wide,
       projected to H by G_PROJ (enc_to_dec_proj) when present, and the cross-attention k/v read x_in values. There
       is no encoder padding mask. */
    int vis_enc;
    int64_t enc_H, x_in;
    /* an image tower inside a composite checkpoint: its tensors live under sub_prefix ("encoder."), no pooler */
    const char *sub_prefix;
    int s2s_part;             /* a part recipe's one graph (WM_S2S_PART_*, export.h; set by the build from the
                                 recipe, wm_recipe_s2s_part, or WM_S2S_PART_CLS by the arch for a sequence
                                 classifier); 0: the three graphs */
    /* an encoder-decoder sequence classifier (task text-classification, WM_S2S_PART_CLS): the decoder reads the
       input_ids shifted right behind dec_start (decoder_start_token_id); H_0 (dense, tanh) and H_1 (out_proj, labels)
       read its state at each row's last eos_id (eos_token_id) */
    int64_t dec_start;
    int64_t dec_hd;           /* the decoder's head size (hd is the encoder's): d_model / heads, or T5's d_kv */
    /* relative position buckets of an encoder-decoder (rel_buckets > 0 with graph WM_GRAPH_S2S): G_REL_BIAS
       [rel_rows, enc_nh] bidirectional in the encoder, G_DEC_REL_BIAS [rel_rows, dec_nh] unidirectional in the
       decoder (wm_rel_bucket_causal); computed once per stack and added to every layer's self-attention scores */
    /* mixture of experts (arch_moe.c): moe_layer[i] 1 where layer i's MLP is n_experts gated experts (SwiGLU,
       moe_I wide) of which a softmax router (L_ROUTER) picks top_k per token, their weights renormalized to sum 1
       when moe_norm; plus a shared expert shared_I wide (L_SH_GATE / L_SH_UP, or their rows fused gate then up in
       L_SH_GATE_UP; L_SH_DOWN) when shared_I > 0, scaled by sigmoid(L_SH_ROUTER x) when shared_gated.
       Layers with moe_layer[i] 0 keep the dense MLP. NULL / 0: no experts. */
    int64_t n_experts, top_k, moe_I, shared_I, n_moe_layers;
    int moe_norm, shared_gated;
    uint8_t *moe_layer;
    /* modules: mods[(layer + 1) * WM_M_COUNT + m], layer -1 for the global ones */
    wm_module *mods;
    uint64_t n_params;        /* parameters the export stores */
    size_t n_unused;          /* checkpoint tensors understood but not used by this task */
} wm_arch;

/*
 * Resolves ck for task (-1: the checkpoint's own task). st: the opened
 * weights, or NULL to decide from the config alone (inspect, random
 * weights). a owns its arrays: wm_arch_free. Errors name the config key
 * or tensor: WM_ERR_UNSUPPORTED (unknown model_type / feature / task),
 * WM_ERR_INPUT (missing or ill-shaped tensor, inconsistent config).
 * On error a is left empty (nothing to free).
 */
wm_status wm_arch_resolve(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, wm_arch *a, wm_error *err);
/* The longest token sequence one input row may hold: max_position_embeddings, less the padding offset of models
 * whose position ids count from pad_token_id + 1 (RoBERTa); 0 when the config sets no limit. */
int64_t wm_arch_max_tokens(const wm_arch *a);
/*
 * The same, resolved as model_type as_type when that is a tower of the checkpoint's model (a recipe's
 * loader.model_type clip_text_model / clip_vision_model on a CLIP checkpoint builds that tower alone); other
 * as_type values resolve the checkpoint as it is (wm_recipe_check then names the mismatch).
 */
wm_status wm_arch_resolve_as(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, const char *as_type,
                             wm_arch *a, wm_error *err);
void wm_arch_free(wm_arch *a);

/* The norm every RMS/Layer norm of a uses (kind, eps, weight offset). */
wm_norm_spec wm_arch_norm(const wm_arch *a);

/* The module m of layer (-1 for global and head modules); never NULL (check ->present). */
const wm_module *wm_arch_mod(const wm_arch *a, int layer, int m);

/* The kind (WM_ENCODER / WM_DECODER) of a model_type in the family table; -1 when not there or refused. */
int wm_arch_family_kind(const char *model_type);
/* An encoder-decoder composite (vision-encoder-decoder): its sub-config keys and the model_types a tiny config of
   it uses for them (arch_s2s.c); 0 when model_type is not one. */
int wm_s2s_composite_keys(const char *model_type, const char **enc_key, const char **dec_key, const char **enc_type,
                          const char **dec_type);
/* Whether model_type's family table row can serve task (a wm_task), decided from the tables alone: decoders
   text-generation, text encoders the other text tasks, image families their image tasks (CLIP's text tower
   feature-extraction). 0 for an unknown model_type. */
int wm_arch_family_serves(const char *model_type, int task);
/* The model_type of the checkpoint that holds model_type as one of its towers (a recipe's clip_text_model is built
   from a CLIP checkpoint: "clip"), NULL when model_type is no tower. */
const char *wm_arch_tower_parent(const char *model_type);
/* The sub-config key holding the transformer's keys of a backbone family (VitPose: "backbone_config") and, in
   *backbone_type when not NULL, its model_type; NULL for other model_types. */
const char *wm_arch_backbone_key(const char *model_type, const char **backbone_type);
/* The graph's image side set to image (a recipe's pixel_values), the checkpoint's positions to be interpolated to
   its patch grid; WM_ERR_UNSUPPORTED where the graph has no position table (ResNet) or the patch does not divide
   image. label names the recipe in messages. */
wm_status wm_arch_set_image(wm_arch *a, int64_t image, const char *label, wm_error *err);
/* The family table's model_types, comma-separated, into buf (truncated to n). */
void wm_arch_family_names(char *buf, size_t n);

/*
 * The bucket of relative position rel (key position - query position) in a bidirectional bucketing of buckets
 * buckets (T5 / MPNet): half per direction, exact distances below a quarter of buckets, log-spaced up to
 * max_dist, the last bucket from there on; computed in float32 as transformers does (the same buckets).
 */
int64_t wm_rel_bucket(int64_t rel, int64_t buckets, int64_t max_dist);
/* The unidirectional (decoder) bucketing of the same: keys after the query (rel > 0) share bucket 0 with rel 0,
   exact distances below buckets / 2, log-spaced up to max_dist, buckets - 1 from there on (T5's
   bidirectional=False); buckets >= 2 and max_dist > buckets / 2. */
int64_t wm_rel_bucket_causal(int64_t rel, int64_t buckets, int64_t max_dist);
/* DeBERTa's log bucket of relative position rel: exact below buckets / 2, log-spaced up to max_pos, float32 as
   transformers' make_log_bucket_position (rel itself when buckets or max_pos <= 0). */
int64_t wm_log_bucket(int64_t rel, int64_t buckets, int64_t max_pos);

/* Tasks the checkpoint supports (out[] of WM_TASK_COUNT); returns how many. */
size_t wm_arch_tasks(const wm_arch *a, int *out);

/* Writes the feature list as a JSON array named key ("features"). */
void wm_arch_features_json(const wm_arch *a, wm_json *j, const char *key);

/* Mixture of experts (arch_moe.c): the config's expert keys into a (nothing when the family has no experts; a owns
   moe_layer, freed by wm_arch_free). Errors name the key (WM_ERR_INPUT; WM_ERR_UNSUPPORTED for an activation the
   experts cannot take). */
wm_status wm_moe_resolve(wm_arch *a, wm_error *err);
/* Every expert tensor of every sparse layer of st: present, [I, H] / [I, H] / [H, I] (stacked: [E, 2I, H] /
   [E, H, I]), a float dtype; errors name the tensor (WM_ERR_INPUT, WM_ERR_UNSUPPORTED for the dtype). */
wm_status wm_moe_check(const wm_arch *a, const wm_st_file *st, wm_error *err);
/* The checkpoint name of expert e's projection which (0 gate, 1 up, 2 down; stacked: 0 every gate and up, 2 every
   down, 1 none) in layer into out; 0 when it does not fit or the scheme has no such tensor. */
int wm_moe_expert_name(const wm_arch *a, int layer, int64_t e, int which, char *out, size_t n);
/* 1 when the scheme stacks a layer's experts in 3-D tensors (wm_scheme.experts without %e; e is then ignored). */
int wm_moe_stacked(const wm_arch *a);
/* Expert tensor names (cap 0: the count) into names; the parameters they hold; the feature strings into j. */
size_t wm_moe_names(const wm_arch *a, char (*names)[160], size_t cap);
uint64_t wm_moe_params(const wm_arch *a);
void wm_moe_features(const wm_arch *a, wm_json *j);

#endif
