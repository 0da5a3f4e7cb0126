/*
 * arch_vtables.c - the data behind the vision and speech families (arch_impl.h):
 * naming schemes of ViT-style image transformers, CLIP's towers and wav2vec2, and
 * the family rows keyed by model_type. A new family whose tensors follow
 * one of these schemes is one row; what differs between families (tokens
 * before the patches, layer scale, SwiGLU, pooling, heads) is a column.
 */
#include "builder/arch_impl.h"

#define MP(m, k, o, i, p) {WM_M_##m, WM_MK_##k, D_##o, D_##i, p}

/* ViT / DeiT: patch Conv, CLS (+ distillation) token, learned positions [1, n_pos, H], pre-norm layers. */
static const wm_modpat vit_mods[] = {
    MP(G_PATCH, CONV, H, PIN, "$embeddings.patch_embeddings.projection"),
    MP(G_CLS, PARAM, 1, H, "$embeddings.cls_token"),
    MP(G_DIST, PARAM, 1, H, "$embeddings.distillation_token"),
    MP(G_POS, PARAM, NPOS, H, "$embeddings.position_embeddings"),
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layer.%d.layernorm_before"),
    MP(L_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.attention.query"),
    MP(L_K, LINEAR, KV, H, "$encoder.layer.%d.attention.attention.key"),
    MP(L_V, LINEAR, KV, H, "$encoder.layer.%d.attention.attention.value"),
    MP(L_O, LINEAR, H, Q, "$encoder.layer.%d.attention.output.dense"),
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layer.%d.layernorm_after"),
    MP(L_UP, LINEAR, I, H, "$encoder.layer.%d.intermediate.dense"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layer.%d.output.dense"),
    MP(G_FINAL_NORM, NORM, H, H, "$layernorm"),
    MP(G_POOL, LINEAR, H, H, "$pooler.dense"),
};

/* VitPose's backbone: ViT's names without CLS or pooler, mlp.fc1 / mlp.fc2; ViTPose++ narrows fc2 to H - part_features
   outputs and adds per-dataset experts (mlp.experts.%e, the last part_features outputs; expert 0 is built). */
static const wm_modpat vitpose_mods[] = {
    MP(G_PATCH, CONV, H, PIN, "$embeddings.patch_embeddings.projection"),
    MP(G_POS, PARAM, NPOS, H, "$embeddings.position_embeddings"),
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layer.%d.layernorm_before"),
    MP(L_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.attention.query"),
    MP(L_K, LINEAR, KV, H, "$encoder.layer.%d.attention.attention.key"),
    MP(L_V, LINEAR, KV, H, "$encoder.layer.%d.attention.attention.value"),
    MP(L_O, LINEAR, H, Q, "$encoder.layer.%d.attention.output.dense"),
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layer.%d.layernorm_after"),
    MP(L_UP, LINEAR, I, H, "$encoder.layer.%d.mlp.fc1"),
    MP(L_DOWN, LINEAR, HNP, I, "$encoder.layer.%d.mlp.fc2"),
    MP(L_DOWN_PART, LINEAR, PART, I, "$encoder.layer.%d.mlp.experts.0"),
    MP(G_FINAL_NORM, NORM, H, H, "$layernorm"),
};

/* DINOv2: ViT's attention names, norm1 / norm2, layer scale, fc1 / fc2, register tokens. */
#define DINO_COMMON                                                                 \
    MP(G_PATCH, CONV, H, PIN, "$embeddings.patch_embeddings.projection"),           \
    MP(G_CLS, PARAM, 1, H, "$embeddings.cls_token"),                                \
    MP(G_REG, PARAM, REG, H, "$embeddings.register_tokens"),                        \
    MP(G_POS, PARAM, NPOS, H, "$embeddings.position_embeddings"),                   \
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layer.%d.norm1"),                         \
    MP(L_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.attention.query"),           \
    MP(L_K, LINEAR, KV, H, "$encoder.layer.%d.attention.attention.key"),            \
    MP(L_V, LINEAR, KV, H, "$encoder.layer.%d.attention.attention.value"),          \
    MP(L_O, LINEAR, H, Q, "$encoder.layer.%d.attention.output.dense"),              \
    MP(L_LS1, PARAM, 1, H, "$encoder.layer.%d.layer_scale1.lambda1"),               \
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layer.%d.norm2"),                          \
    MP(L_LS2, PARAM, 1, H, "$encoder.layer.%d.layer_scale2.lambda1"),               \
    MP(G_FINAL_NORM, NORM, H, H, "$layernorm")
static const wm_modpat dinov2_mods[] = {
    DINO_COMMON,
    MP(L_UP, LINEAR, I, H, "$encoder.layer.%d.mlp.fc1"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layer.%d.mlp.fc2"),
};
/* use_swiglu_ffn: the SwiGLU MLP as transformers saves it, gate and up fused in weights_in [2 I, H] */
static const wm_modpat dinov2_swiglu_mods[] = {
    DINO_COMMON,
    MP(L_GATE_UP, LINEAR, I2, H, "$encoder.layer.%d.mlp.weights_in"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layer.%d.mlp.weights_out"),
};

#define CLIP_LAYERS                                                         \
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layers.%d.layer_norm1"),          \
    MP(L_Q, LINEAR, Q, H, "$encoder.layers.%d.self_attn.q_proj"),           \
    MP(L_K, LINEAR, KV, H, "$encoder.layers.%d.self_attn.k_proj"),          \
    MP(L_V, LINEAR, KV, H, "$encoder.layers.%d.self_attn.v_proj"),          \
    MP(L_O, LINEAR, H, Q, "$encoder.layers.%d.self_attn.out_proj"),         \
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layers.%d.layer_norm2"),           \
    MP(L_UP, LINEAR, I, H, "$encoder.layers.%d.mlp.fc1"),                   \
    MP(L_DOWN, LINEAR, H, I, "$encoder.layers.%d.mlp.fc2")

/* CLIP's image tower: bias-free patch Conv, class_embedding [H], position table [n_pos, H], pre_layrnorm,
   post_layernorm on the pooled CLS, visual_projection (outside the tower's prefix). */
static const wm_modpat clip_vision_mods[] = {
    MP(G_PATCH, CONV, H, PIN, "$embeddings.patch_embedding"),
    MP(G_CLS, PARAM, 1, H, "$embeddings.class_embedding"),
    MP(G_POS, EMBED, NPOS, H, "$embeddings.position_embedding"),
    MP(G_PRE_NORM, NORM, H, H, "$pre_layrnorm"),
    CLIP_LAYERS,
    MP(G_FINAL_NORM, NORM, H, H, "$post_layernorm"),
    MP(G_PROJ, LINEAR, PROJ, H, "visual_projection"),
};

/* CLIP's text tower: token and position tables, causal pre-norm layers, final_layer_norm, text_projection. */
static const wm_modpat clip_text_mods[] = {
    MP(G_EMBED, EMBED, V, H, "$embeddings.token_embedding"),
    MP(G_POS, EMBED, P, H, "$embeddings.position_embedding"),
    CLIP_LAYERS,
    MP(G_FINAL_NORM, NORM, H, H, "$final_layer_norm"),
    MP(G_PROJ, LINEAR, PROJ, H, "text_projection"),
};

/* The two-tower model's own parameters. */
static const wm_modpat clip_dual_mods[] = {
    MP(G_SCALE, PARAM, 1, 1, "logit_scale"),
    MP(G_BIAS, PARAM, 1, 1, "logit_bias"),
};

/* SigLIP's image tower: patch Conv with bias, positions for the patches only (no CLS), CLIP's layer names,
   post_layernorm on every token, the attention-pooling head (a probe attending over the tokens through
   nn.MultiheadAttention's fused in_proj, then LayerNorm + MLP with a residual). */
static const wm_modpat siglip_vision_mods[] = {
    MP(G_PATCH, CONV, H, PIN, "$embeddings.patch_embedding"),
    MP(G_POS, EMBED, NPOS, H, "$embeddings.position_embedding"),
    CLIP_LAYERS,
    MP(G_FINAL_NORM, NORM, H, H, "$post_layernorm"),
    MP(G_PROBE, PARAM, 1, H, "$head.probe"),
    MP(G_MAP_QKV, PARAM, 3H, H, "$head.attention.in_proj_weight"),
    MP(G_MAP_QKV_B, PARAM, 1, 3H, "$head.attention.in_proj_bias"),
    MP(G_MAP_O, LINEAR, H, H, "$head.attention.out_proj"),
    MP(G_MAP_NORM, NORM, H, H, "$head.layernorm"),
    MP(G_MAP_UP, LINEAR, I, H, "$head.mlp.fc1"),
    MP(G_MAP_DOWN, LINEAR, H, I, "$head.mlp.fc2"),
};

/* SigLIP's text tower: CLIP's names, no causal mask, the last token through a head linear. */
static const wm_modpat siglip_text_mods[] = {
    MP(G_EMBED, EMBED, V, H, "$embeddings.token_embedding"),
    MP(G_POS, EMBED, P, H, "$embeddings.position_embedding"),
    CLIP_LAYERS,
    MP(G_FINAL_NORM, NORM, H, H, "$final_layer_norm"),
    MP(G_POOL, LINEAR, PROJ, H, "$head"),
};

/* ResNet: no transformer modules; the convolution units come from the stages (model_resnet.c). */
static const wm_modpat resnet_mods[] = {
    MP(G_FINAL_NORM, NORM, H, H, "$unused"), /* placeholder row: never wanted (see arch_vision.c) */
};

/* wav2vec2 / HuBERT: the feature projection (LayerNorm over the last conv's channels + Linear), the encoder's
   LayerNorm (before the stack in the post-norm variant, after it with do_stable_layer_norm), post- or pre-norm
   layers under one set of names. The convolutional feature encoder and the weight-normed positional convolution
   come from the config's lists (arch_audio.c). */
static const wm_modpat wav2vec2_mods[] = {
    MP(G_EMB_NORM, NORM, CONV, CONV, "$feature_projection.layer_norm"),
    MP(G_EMB_PROJ, LINEAR, H, CONV, "$feature_projection.projection"),
    MP(G_FINAL_NORM, NORM, H, H, "$encoder.layer_norm"),
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layers.%d.layer_norm"),
    MP(L_Q, LINEAR, Q, H, "$encoder.layers.%d.attention.q_proj"),
    MP(L_K, LINEAR, KV, H, "$encoder.layers.%d.attention.k_proj"),
    MP(L_V, LINEAR, KV, H, "$encoder.layers.%d.attention.v_proj"),
    MP(L_O, LINEAR, H, Q, "$encoder.layers.%d.attention.out_proj"),
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layers.%d.final_layer_norm"),
    MP(L_UP, LINEAR, I, H, "$encoder.layers.%d.feed_forward.intermediate_dense"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layers.%d.feed_forward.output_dense"),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define VS(name, mods) {name, WM_ENCODER, WM_NORM_LAYER, 0, WM_POS_LEARNED, 0, {""}, mods, N(mods), NULL}
const wm_scheme wm_vis_schemes[] = {
    VS("vit", vit_mods),
    VS("vitpose", vitpose_mods),
    VS("dinov2", dinov2_mods),
    VS("dinov2_swiglu", dinov2_swiglu_mods),
    VS("clip_vision", clip_vision_mods),
    VS("clip_text", clip_text_mods),
    VS("clip", clip_dual_mods),
    VS("siglip_vision", siglip_vision_mods),
    VS("siglip_text", siglip_text_mods),
    VS("resnet", resnet_mods),
    VS("wav2vec2", wav2vec2_mods),
};
const size_t wm_n_vis_schemes = N(wm_vis_schemes);

/* a patch transformer; .head 0 is WM_VHEAD_CLS */
#define VIT(...) {.graph = WM_GRAPH_VIT, __VA_ARGS__}

const wm_vis_family wm_vis_families[] = {
    VIT(.model_type = "vit", .act = "gelu", .classify = 1, .class_stem = "ViT", .scheme = "vit", .prefix = "vit.", .eps = 1e-12,
        .pool = WM_VPOOL_DENSE_TANH),
    VIT(.model_type = "deit", .act = "gelu", .classify = 1, .class_stem = "DeiT", .scheme = "vit", .prefix = "deit.", .eps = 1e-12, .dist = 1,
        .pool = WM_VPOOL_DENSE_TANH),
    VIT(.model_type = "dinov2", .act = "gelu", .classify = 1, .class_stem = "Dinov2", .scheme = "dinov2", .scheme_alt = "dinov2_swiglu",
        .prefix = "dinov2.", .eps = 1e-6, .layer_scale = 1, .swiglu = 1, .mlp_ratio = 1, .pool = WM_VPOOL_CLS,
        .head = WM_VHEAD_CLS_MEAN),
    VIT(.model_type = "dinov2_with_registers", .act = "gelu", .classify = 1, .class_stem = "Dinov2WithRegisters", .scheme = "dinov2",
        .scheme_alt = "dinov2_swiglu", .prefix = "dinov2_with_registers.", .eps = 1e-6, .registers = 1,
        .layer_scale = 1, .swiglu = 1, .mlp_ratio = 1, .pool = WM_VPOOL_CLS, .head = WM_VHEAD_CLS_MEAN,
        .pos_antialias = 1),
    VIT(.model_type = "vitpose", .act = "gelu", .class_stem = "VitPose", .scheme = "vitpose", .prefix = "backbone.",
        .eps = 1e-12, .mlp_ratio = 1, .backbone_key = "backbone_config", .backbone_type = "vitpose_backbone",
        .patch_pad = 2, .pos_fold = 1, .part_experts = 1, .pose = 1),
    VIT(.model_type = "clip_vision_model", .class_stem = "CLIPVision", .scheme = "clip_vision",
        .prefix = "vision_model.", .act = "quick_gelu", .eps = 1e-5, .pool = WM_VPOOL_NORM_CLS),
    {.model_type = "clip_text_model", .class_stem = "CLIPText", .graph = WM_GRAPH_CLIP_TEXT, .scheme = "clip_text",
     .prefix = "text_model.", .act = "quick_gelu", .eps = 1e-5, .causal = 1, .pool = WM_VPOOL_EOS},
    {.model_type = "clip", .class_stem = "CLIP", .graph = WM_GRAPH_DUAL, .scheme = "clip", .prefix = "",
     .act = "quick_gelu", .eps = 1e-5, .towers = {"clip_text_model", "clip_vision_model"}},
    VIT(.model_type = "siglip_vision_model", .class_stem = "SiglipVision", .scheme = "siglip_vision",
        .prefix = "vision_model.", .act = "gelu_pytorch_tanh", .eps = 1e-6, .no_cls = 1, .pool = WM_VPOOL_MAP),
    {.model_type = "siglip_text_model", .class_stem = "SiglipText", .graph = WM_GRAPH_CLIP_TEXT,
     .scheme = "siglip_text", .prefix = "text_model.", .act = "gelu_pytorch_tanh", .eps = 1e-6,
     .pool = WM_VPOOL_LAST_HEAD},
    {.model_type = "siglip", .class_stem = "Siglip", .graph = WM_GRAPH_DUAL, .scheme = "clip", .prefix = "",
     .act = "gelu_pytorch_tanh", .eps = 1e-6, .towers = {"siglip_text_model", "siglip_vision_model"},
     .logit_bias = 1},
    {.model_type = "resnet", .class_stem = "ResNet", .graph = WM_GRAPH_RESNET, .scheme = "resnet",
     .prefix = "resnet.", .act = "relu", .eps = 1e-5, .classify = 1},
    {.model_type = "wav2vec2", .class_stem = "Wav2Vec2", .graph = WM_GRAPH_AUDIO, .scheme = "wav2vec2",
     .prefix = "wav2vec2.", .act = "gelu", .eps = 1e-5, .classify = 1},
    {.model_type = "hubert", .class_stem = "Hubert", .graph = WM_GRAPH_AUDIO, .scheme = "wav2vec2",
     .prefix = "hubert.", .act = "gelu", .eps = 1e-5, .classify = 1, .feat_proj_key = 1},
};
const size_t wm_n_vis_families = N(wm_vis_families);
