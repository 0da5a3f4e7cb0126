/* arch_impl.h - the table types behind arch.h (internal to src/builder). */
#ifndef WM_BUILDER_ARCH_IMPL_H
#define WM_BUILDER_ARCH_IMPL_H

#include "builder/arch.h"

/* symbolic dims of module shapes */
enum { D_0, D_V, D_H, D_E, D_I, D_I2, D_Q, D_KV, D_QKV, D_P, D_T, D_HD, D_L, D_2, D_1, D_2H, D_PIN, D_NPOS, D_REG,
       D_PROJ, D_3H, D_RB, D_NH, D_2SPAN, D_CONV, D_NEXP, D_SHI, D_SHI2,
       D_HNP, D_PART };

typedef struct wm_modpat {
    uint8_t mod, kind, d_out, d_in; /* wm_mod, wm_mod_kind, D_* */
    const char *pat;                /* '$' = model prefix, %d = layer; + ".weight" / ".bias" */
} wm_modpat;

typedef struct wm_scheme {
    const char *name;
    wm_family_kind kind;
    wm_norm_kind norm;
    int post_norm;
    wm_pos_kind pos;
    int gated;                  /* MLP gated by default (no weights to tell) */
    const char *prefixes[5];    /* candidates, tried after the family's own */
    const wm_modpat *mods;
    size_t n_mods;
    const char *default_family; /* defaults for a model_type the family table does not list */
    /* mixture of experts: the gate, up and down projection of expert %e in layer %d, one 2-D tensor each; or, when
       the names hold no %e, the layer's experts stacked in 3-D tensors: experts[0] [E, 2I, H] (every expert's gate
       rows, then its up rows), experts[1] NULL, experts[2] [E, H, I] */
    const char *experts[3];
} wm_scheme;

/* WM_HEAD_POOLER_ACT: a pooler at the top level whose activation is the config's pooler_hidden_act (DeBERTa) */
/* WM_HEAD_DENSE_ACT_NORM: dense + activation (the family's head_act_key) + LayerNorm, then the classifier */
enum { WM_HEAD_NONE = -1, WM_HEAD_POOLER_TANH, WM_HEAD_DENSE_TANH, WM_HEAD_DENSE_GELU, WM_HEAD_PRE_RELU,
       WM_HEAD_POOLER_ACT, WM_HEAD_DENSE_ACT_NORM };

/* Masked-LM heads (fill-mask): dense + activation + LayerNorm on every token, then the tied word embedding
   (logits = h E^T) plus the output bias. act WM_ACT_NONE: the model's own activation. */
enum { WM_MLM_NONE, WM_MLM_BERT, WM_MLM_ROBERTA, WM_MLM_DISTILBERT, WM_MLM_HEAD };
typedef struct wm_mlm_def {
    const char *dense, *norm, *bias; /* '$' = the model prefix */
    wm_act act;
} wm_mlm_def;
extern const wm_mlm_def wm_mlm_heads[];

typedef struct wm_head_def {
    const char *first;
    wm_act act;
    const char *second;
    const char *norm; /* a LayerNorm after the activation (NULL: none) */
} wm_head_def;

/* Config keys whose meaning depends on the family (how each family's transformers code treats them). */
/* config keys a family may model (keys[]): soft-capping; Granite's embedding / residual / attention / logits
   multipliers; use_parallel_residual (attention and MLP both read the layer input); Cohere's logit_scale; SmolLM3's
   no_rope_layers (with no_rope_layer_interval) */
enum { WM_FK_NONE, WM_FK_ATTN_SOFTCAP, WM_FK_FINAL_SOFTCAP, WM_FK_MULTIPLIERS, WM_FK_PARALLEL, WM_FK_LOGIT_SCALE,
       WM_FK_NOPE, WM_FK_MOE, WM_FK_COUNT };
/* WM_KEY_DENY: not modeled, a set value is refused; USED: modeled; IGNORED: transformers never reads it */
enum { WM_KEY_DENY, WM_KEY_USED, WM_KEY_IGNORED };

typedef struct wm_family {
    wm_family_kind kind;
    const char *model_type, *class_stem, *lm_suffix, *scheme, *prefix, *act;
    const char *act_key; /* the one config key the family's activation comes from (NULL: any alias) */
    int gelu_is_tanh;    /* "gelu" there means the tanh approximation (a legacy spelling the family converts) */
    double eps;
    int64_t inter_mult;  /* intermediate = mult * hidden when the config omits it (0: required) */
    int tied, qkv_bias, o_bias, mlp_bias, qk_norm, fused_qkv, fused_gate_up;
    int sliding;         /* honours sliding_window / use_sliding_window / layer_types */
    int sliding_pattern; /* without layer_types: every Nth layer full attention, the others sliding (0: none) */
    int pattern_key;     /* sliding_window_pattern in the config overrides sliding_pattern */
    int nope_full;       /* full-attention layers take no rotary positions (only the sliding ones do: Cohere 2) */
    int64_t window_default; /* sliding window when the config omits sliding_window (0: required) */
    int norm_offset;     /* RMSNorm scales by (1 + weight) */
    int embed_scale;     /* token embeddings scaled by sqrt(hidden_size) */
    double query_scalar; /* honours query_pre_attn_scalar (this value when absent); 0: head_dim */
    double rope_theta;   /* RoPE base when the config gives none (0: 10000) */
    double local_rope_theta; /* sliding layers have their own RoPE, this base by default (0: they share it) */
    uint8_t keys[WM_FK_COUNT];         /* WM_KEY_* per WM_FK_ key */
    double attn_softcap, final_softcap; /* caps when the config omits the key (0: none) */
    wm_posid_kind posid;
    int64_t type_vocab;  /* default type_vocab_size */
    int cls_head;        /* WM_HEAD_* */
    int mlm_head;        /* WM_MLM_* (WM_MLM_NONE: no masked-LM head here) */
    int pad_fixed;       /* position ids pad with padding_idx, fixed by the family's code (not pad_token_id) */
    int64_t padding_idx;
    int rel_buckets;     /* relative position bias: buckets computed (rows from relative_attention_num_buckets, */
    int rel_max_distance; /* this many by default), distances from rel_max_distance on in the last bucket */
    int disentangled;    /* DeBERTa's disentangled attention from relative_attention, pos_att_type, share_att_key,
                            position_buckets, max_relative_positions, norm_rel_ebd, position_biased_input */
    int mask_rows;       /* a 2-D attention mask (padded query rows too) and padded embeddings zeroed */
    int no_first_attn_norm; /* pre-norm encoder whose layer 0 takes the normed embeddings as they are */
    const char *half_window_key; /* bidirectional sliding window: this key is the whole window, |i - j| <= half */
    const char *pattern_every_key; /* without layer_types: layers 0, N, 2N ... full attention, N from this key
                                      (sliding_pattern when absent), the others sliding */
    int head_transform;  /* every task head starts with the cls head's first linear + activation + norm, per token
                            (or on the pooled state): the task's own linear follows */
    const char *head_act_key; /* the config key of that head activation (gelu when absent) */
    const char *pool_key;     /* classification pools by this key's value: "cls" (first token) or "mean" */
    /* decoder layer shapes */
    int parallel;        /* attention and MLP both read the layer input, summed into one residual add (the default
                            of use_parallel_residual when keys[WM_FK_PARALLEL] is USED) */
    int shared_norm;     /* parallel layers: the MLP reads the attention's pre-norm (no MLP norm of its own) */
    int qkv_per_head;    /* the fused qkv projection's rows go per head: [heads, 3 (q, k, v), head_dim] */
    double rotary_factor; /* partial_rotary_factor when the config gives none (0: 1) */
    const char *partial_key, *theta_key; /* the family's own spellings of those two (GPT-NeoX's rotary_pct,
                                            rotary_emb_base), read when the standard keys are absent */
    int lm_bias;         /* lm_head has a bias (random weights; with weights the tensor decides) */
    const char *qkv_bias_key, *bias_key; /* config keys switching the q/k/v biases, or every linear's bias */
    int no_norm_bias;    /* LayerNorms without a bias (random weights; with weights the tensors decide) */
    double logit_scale;  /* logits multiplied by this when the config omits logit_scale (keys[WM_FK_LOGIT_SCALE]) */
    int rope_interleaved; /* rotary pairs are adjacent dims (2i, 2i + 1), not the two halves */
    /* mixture of experts (keys[WM_FK_MOE] USED): defaults of the expert count (num_local_experts / num_experts)
       and num_experts_per_tok; the key of the experts' width (NULL: intermediate_size) and its default; the key of
       the shared expert's width (NULL: none); the key of the top-k renormalization (NULL: always renormalized)
       and its default; sparse_keys: decoder_sparse_step and mlp_only_layers pick the sparse layers (else all);
       shared_ungated: the shared expert is added as it is (GraniteMoeShared), not scaled by a sigmoid gate */
    int64_t moe_experts, moe_top_k, moe_inter_def, moe_shared_def;
    const char *moe_inter_key, *moe_shared_key, *moe_norm_key;
    int moe_norm_def, moe_sparse_keys, moe_shared_ungated;
} wm_family;

typedef struct wm_denied_type {
    const char *model_type, *why;
} wm_denied_type;

enum { WM_DENY_NONE, WM_DENY_TRUE, WM_DENY_SET, WM_DENY_NOT_ABSOLUTE, WM_DENY_TRUE_ENCODER };
typedef struct wm_denied_key {
    const char *key;
    int how;
    int fk; /* WM_FK_*: the family's keys[] decides (a family that models or ignores it lets it through) */
} wm_denied_key;

typedef struct wm_act_name_row {
    const char *name;
    wm_act act;
} wm_act_name_row;

typedef struct wm_arch_suffix {
    const char *suffix;
    wm_task task;
} wm_arch_suffix;

/* A module the resolver looks up (real weights) or decides (random). */
typedef struct arch_want {
    int mod, layer;
    const char *pat; /* overrides the scheme (heads) */
    uint8_t kind, d_out, d_in;
    int required;    /* missing weight is an error */
    int bias;        /* random mode: has a bias */
} arch_want;

/* Shared by arch.c and the vision resolver (arch_vision.c). */
const wm_scheme *arch_find_scheme(const char *name);
/* Expands pat ('$' -> prefix, %d -> layer) + suffix into out; 0 when it does not fit. */
int arch_expand(const char *pat, const char *prefix, int layer, const char *suffix, char *out, size_t n);
const wm_st_tensor *arch_st_find(const wm_st_file *st, const char *name);
/* A tensor that must exist with exactly shape[rank] and a float dtype (F32, F16, BF16, F64). Missing: "missing
   tensor 'NAME' (missing_why)"; another shape: "tensor 'NAME': expected shape [...] from shape_from". */
wm_status arch_check_tensor(const wm_st_file *st, const char *name, const int64_t *shape, size_t rank,
                            const char *missing_why, const char *shape_from, wm_error *err);
wm_module *arch_mod_mut(const wm_arch *a, int layer, int m);
wm_status arch_fill_module(wm_arch *a, const wm_st_file *st, const arch_want *w, wm_error *err);
wm_status arch_check_shape(const wm_arch *a, const wm_module *m, wm_error *err);
/* CONV / PARAM modules: [out, C, k, k] / out * in values with leading 1s (arch_vision.c). */
wm_status arch_check_shape_nd(const wm_arch *a, const wm_module *m, wm_error *err);
/* Every checkpoint tensor is used (by a, its towers or its ResNet units), a known head or a buffer. */
wm_status arch_check_unused(wm_arch *a, const wm_st_file *st, wm_error *err);
void arch_count_params(wm_arch *a);

/* Vision families (arch_vision.c, tables in arch_vtables.c). */
typedef struct wm_vis_family {
    const char *model_type, *class_stem;
    wm_graph_kind graph;
    const char *scheme, *scheme_alt; /* alt: the fused SwiGLU naming (DINOv2 weights_in / weights_out) */
    const char *prefix;              /* tried first, then "" */
    const char *act;
    double eps;
    int dist;                        /* a distillation token after CLS (DeiT) */
    int registers;                   /* honours num_register_tokens */
    int layer_scale;                 /* lambda1 per sublayer */
    int swiglu;                      /* honours use_swiglu_ffn */
    int mlp_ratio;                   /* intermediate = mlp_ratio * hidden (no intermediate_size key) */
    int causal;                      /* causal text mask */
    int classify;                    /* has an image-classification head */
    wm_vpool pool;                   /* the base model's pooler_output */
    wm_vhead head;
    const char *towers[2];           /* DUAL: the text and image towers' model_types */
    int no_cls;                      /* no CLS token: positions for the patches only (SigLIP) */
    int logit_bias;                  /* DUAL: logits + logit_bias (SigLIP) */
    int pos_antialias;               /* positions resized to another grid with antialias (DINOv2 with registers) */
    int feat_proj_key;               /* audio: honours feat_proj_layer_norm (HuBERT; wav2vec2 always norms) */
    const char *backbone_key;        /* the transformer's keys live in this sub-config (VitPose: backbone_config) */
    const char *backbone_type;       /* its model_type */
    int patch_pad;                   /* the patch Conv's padding (VitPose: 2) */
    int pos_fold;                    /* positions: row 0 added to every patch's own row, no CLS token (VitPose) */
    int part_experts;                /* honours num_experts / part_features (ViTPose++'s per-dataset MLP parts) */
    int pose;                        /* keypoint-detection: a heatmap head (use_simple_decoder picks which) */
} wm_vis_family;

extern const wm_vis_family wm_vis_families[];
extern const size_t wm_n_vis_families;
extern const wm_scheme wm_vis_schemes[];
extern const size_t wm_n_vis_schemes;

const wm_vis_family *wm_vis_find(const char *model_type);
/* Resolves a vision checkpoint (config c) into a; the same contract as wm_arch_resolve. */
wm_status wm_vis_resolve(const wm_hf_config *c, const wm_st_file *st, int task, wm_arch *a, wm_error *err);
/* Tower t (0 text, 1 image) of the two-tower config c, alone, with its projection. */
wm_status wm_vis_resolve_tower_of(const wm_hf_config *c, const wm_st_file *st, int task, int t, wm_arch *a,
                                  wm_error *err);
size_t wm_vis_tasks(const wm_arch *a, int *out);
/* The width of a tower's text_embeds / image_embeds (projection, head or hidden size). */
int64_t wm_vis_embed_dim(const wm_arch *a);
/* Appends the feature strings of a vision arch to the open array j. */
void wm_vis_features(const wm_arch *a, wm_json *j);

/* ResNet (model_resnet.c): the convolution + BatchNorm units, from the config's stages. */
typedef enum { WM_CNN_STEM, WM_CNN_MAIN, WM_CNN_SHORTCUT } wm_cnn_role;
typedef struct wm_cnn_unit {
    char name[160];          /* tensor-name stem: + ".convolution.weight", ".normalization.weight" ... */
    int64_t out, in, k, stride;
    int relu;                /* ReLU after the BatchNorm */
    int role;                /* wm_cnn_role */
    int64_t block;           /* residual block index (-1: the stem) */
} wm_cnn_unit;
/* The units of a's ResNet into out (cap entries); returns the count (0 for other graphs). */
size_t wm_resnet_units(const wm_arch *a, wm_cnn_unit *out, size_t cap);
/* Tensor names the units use (5 per unit) into names (cap entries); returns the count (0 for other graphs). */
size_t wm_resnet_names(const wm_arch *a, char (*names)[160], size_t cap);
/* Parameters the folded units store (conv weight + bias). */
uint64_t wm_resnet_params(const wm_arch *a);
/* Checks every unit's tensors exist with their shapes (real weights). */
wm_status wm_resnet_check(const wm_arch *a, const wm_st_file *st, wm_error *err);

/* An integer config key (def when absent or null); 0 and an error naming the key when it is no integer in
   [lo, hi] (arch.c). */
int arch_cfg_int(const wm_arch *a, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out,
                 wm_error *err);

/* key's object of config c parsed as a config of its own into a->tower_cfg[t] (owned by a); its model_type must be
   model_type unless that is NULL (arch_vision.c). */
wm_status arch_sub_config(wm_arch *a, const wm_hf_config *c, const char *key, const char *model_type, int t,
                          wm_error *err);
/* The image encoder of a composite checkpoint (VisionEncoderDecoder) from its sub-config c: a ViT-graph family,
   tensors under prefix, no pooler, last_hidden_state its output (arch_vision.c). Errors name c's file and field. */
wm_status wm_vis_resolve_encoder(const wm_hf_config *c, const wm_st_file *st, const char *prefix, wm_arch *a,
                                 wm_error *err);
/* Encoder-decoder families (arch_s2s.c): bart, marian, t5, whisper, and the composite vision-encoder-decoder with a
   trocr decoder. NULL / the same contract as wm_arch_resolve. */
const void *wm_s2s_find(const char *model_type);
/* The i-th encoder-decoder model_type of the table; NULL past the last. */
const char *wm_s2s_type(size_t i);
wm_status wm_s2s_resolve(const wm_hf_config *c, const wm_st_file *st, int task, wm_arch *a, wm_error *err);
/* Appends the feature strings of an encoder-decoder arch to the open array j. */
void wm_s2s_features(const wm_arch *a, wm_json *j);
/* The log-mel conv stem's tensors (mel_stem families): 0 conv1.weight, 1 conv1.bias, 2 conv2.weight, 3 conv2.bias. */
const char *wm_s2s_mel_stem_tensor(int i);
/* Typed config keys (arch_vision.c): an integer in [lo, hi], a number in [lo, hi], a bool, each def when absent or
   null; a list of 1..max whole numbers in [1, hi] (required). Errors name the file and key (WM_ERR_INPUT). */
wm_status arch_key_int(const wm_hf_config *c, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out,
                       wm_error *err);
wm_status arch_key_num(const wm_hf_config *c, const char *key, double def, double lo, double hi, double *out,
                       wm_error *err);
wm_status arch_key_bool(const wm_hf_config *c, const char *key, int def, int *out, wm_error *err);
wm_status arch_key_list(const wm_hf_config *c, const char *key, int64_t hi, int max, int64_t *out, int64_t *n,
                        wm_error *err);

/* wav2vec2-style audio (arch_audio.c): the config's feature-encoder keys into a, then the modules. */
wm_status wm_audio_resolve(wm_arch *a, const wm_vis_family *f, const wm_st_file *st, wm_error *err);
/* Tensor names of the convolutional feature encoder and the positional convolution (cap 0: the count). */
size_t wm_audio_names(const wm_arch *a, char (*names)[160], size_t cap);
/* Keypoint-detection heads (model_pose.c): the config keys of top (use_simple_decoder, scale_factor, num_labels) into
   a; the head's tensors and ViTPose++'s unbuilt experts checked against the weights (errors name the tensor); the
   unbuilt experts' tensor names (into names, cap entries; returns the count); the head's parameters; the heatmaps'
   height and width; the features inspect prints (into the open array j). */
wm_status wm_pose_resolve(wm_arch *a, const wm_hf_config *top, wm_error *err);
wm_status wm_pose_check(const wm_arch *a, const wm_st_file *st, wm_error *err);
size_t wm_pose_names(const wm_arch *a, char (*names)[160], size_t cap);
uint64_t wm_pose_params(const wm_arch *a);
void wm_pose_heatmap_side(const wm_arch *a, int64_t *h, int64_t *w);
void wm_pose_features(const wm_arch *a, wm_json *j);
/* Parameters the export stores for them (the positional convolution's weight norm folded). */
uint64_t wm_audio_params(const wm_arch *a);
/* Feature strings of an audio arch into the open array j. */
void wm_audio_features(const wm_arch *a, wm_json *j);

extern const wm_scheme wm_schemes[];
extern const size_t wm_n_schemes;
extern const wm_family wm_families[];
extern const size_t wm_n_families;
extern const wm_head_def wm_cls_heads[];
extern const char *const wm_head_prefixes[];
extern const char *const wm_buffer_suffixes[];
extern const wm_denied_type wm_denied_types[];
extern const wm_denied_key wm_denied_keys[];
extern const wm_act_name_row wm_act_names[];
extern const wm_arch_suffix wm_arch_suffixes[];
extern const char *const wm_task_class_suffix[WM_TASK_COUNT];

/*
 * RoPE inverse frequencies of r (the config's rope or rope_local) into out, theta_default when r has no
 * base, partial_default when it has no partial_rotary_factor (arch_rope.c). out owns its arrays (freed by wm_arch_free through a).
 */
wm_status wm_arch_rope_init(const wm_arch *a, const wm_hf_rope *r, double theta_default, double partial_default,
                            wm_rope *out, wm_error *err);

#endif
