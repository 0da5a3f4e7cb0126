/*
 * arch_tables.c - the data behind arch.h: naming schemes, model families,
 * classification heads, activations, and config keys whose non-default
 * values change the math in ways the graph does not model.
 *
 * Adding a checkpoint family whose tensors follow a known scheme is one
 * row in wm_families[]; a new naming scheme is one modpat table.
 */
#include "builder/arch_impl.h"

#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------- schemes */

#define MP(m, k, o, i, p) {WM_M_##m, WM_MK_##k, D_##o, D_##i, p}

/* GPT-2: Conv1D weights stored [in, out], fused c_attn (q, k, v columns), learned positions. */
static const wm_modpat gpt2_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$wte"),
    MP(G_POS, EMBED, P, E, "$wpe"),
    MP(L_ATTN_NORM, NORM, H, H, "$h.%d.ln_1"),
    MP(L_QKV, CONV1D, QKV, H, "$h.%d.attn.c_attn"),
    MP(L_O, CONV1D, H, Q, "$h.%d.attn.c_proj"),
    MP(L_MLP_NORM, NORM, H, H, "$h.%d.ln_2"),
    MP(L_UP, CONV1D, I, H, "$h.%d.mlp.c_fc"),
    MP(L_DOWN, CONV1D, H, I, "$h.%d.mlp.c_proj"),
    MP(G_FINAL_NORM, NORM, H, H, "$ln_f"),
    MP(G_LM_HEAD, LINEAR, V, H, "lm_head"),
};

/* Llama style (llama, mistral, qwen2, qwen3, phi3 ...): rotary positions, pre-norm, gated MLP. */
#define LLAMA_MODS \
    MP(G_EMBED, EMBED, V, E, "$embed_tokens"), \
    MP(L_ATTN_NORM, NORM, H, H, "$layers.%d.input_layernorm"), \
    MP(L_Q, LINEAR, Q, H, "$layers.%d.self_attn.q_proj"), \
    MP(L_K, LINEAR, KV, H, "$layers.%d.self_attn.k_proj"), \
    MP(L_V, LINEAR, KV, H, "$layers.%d.self_attn.v_proj"), \
    MP(L_QKV, LINEAR, QKV, H, "$layers.%d.self_attn.qkv_proj"), \
    MP(L_O, LINEAR, H, Q, "$layers.%d.self_attn.o_proj"), \
    MP(L_Q_NORM, NORM, HD, HD, "$layers.%d.self_attn.q_norm"), \
    MP(L_K_NORM, NORM, HD, HD, "$layers.%d.self_attn.k_norm"), \
    MP(L_MLP_NORM, NORM, H, H, "$layers.%d.post_attention_layernorm"), \
    MP(L_GATE, LINEAR, I, H, "$layers.%d.mlp.gate_proj"), \
    MP(L_UP, LINEAR, I, H, "$layers.%d.mlp.up_proj"), \
    MP(L_GATE_UP, LINEAR, I2, H, "$layers.%d.mlp.gate_up_proj"), \
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.down_proj"), \
    MP(G_FINAL_NORM, NORM, H, H, "$norm"), \
    MP(G_LM_HEAD, LINEAR, V, H, "lm_head"),

static const wm_modpat llama_mods[] = {LLAMA_MODS};

/* Mixtral: Llama's layers with a mixture of experts as the MLP: router block_sparse_moe.gate [experts, hidden],
   experts w1 (gate) / w3 (up) / w2 (down) (wm_scheme.experts) */
static const wm_modpat mixtral_mods[] = {
    LLAMA_MODS
    MP(L_ROUTER, LINEAR, NEXP, H, "$layers.%d.block_sparse_moe.gate"),
};

/* GraniteMoE: Llama's layers with the router block_sparse_moe.router.layer and the experts stacked:
   block_sparse_moe.input_linear [E, 2I, H] (gate rows, then up rows) and output_linear [E, H, I] */
static const wm_modpat granitemoe_mods[] = {
    LLAMA_MODS
    MP(L_ROUTER, LINEAR, NEXP, H, "$layers.%d.block_sparse_moe.router.layer"),
};

/* GraniteMoeShared: GraniteMoE's plus a shared expert shared_mlp.input_linear [2 SI, H] (gate rows, then up rows)
   and output_linear [H, SI], without a gate of its own */
static const wm_modpat granitemoeshared_mods[] = {
    LLAMA_MODS
    MP(L_ROUTER, LINEAR, NEXP, H, "$layers.%d.block_sparse_moe.router.layer"),
    MP(L_SH_GATE_UP, LINEAR, SHI2, H, "$layers.%d.shared_mlp.input_linear"),
    MP(L_SH_DOWN, LINEAR, H, SHI, "$layers.%d.shared_mlp.output_linear"),
};

/* Qwen2-MoE / Qwen3-MoE: the router mlp.gate, experts mlp.experts.%e.{gate,up,down}_proj, Qwen2-MoE's shared
   expert (mlp.shared_expert.*) with its sigmoid gate [1, hidden]; dense layers keep Llama's mlp.*_proj */
static const wm_modpat qwen_moe_mods[] = {
    LLAMA_MODS
    MP(L_ROUTER, LINEAR, NEXP, H, "$layers.%d.mlp.gate"),
    MP(L_SH_GATE, LINEAR, SHI, H, "$layers.%d.mlp.shared_expert.gate_proj"),
    MP(L_SH_UP, LINEAR, SHI, H, "$layers.%d.mlp.shared_expert.up_proj"),
    MP(L_SH_DOWN, LINEAR, H, SHI, "$layers.%d.mlp.shared_expert.down_proj"),
    MP(L_SH_ROUTER, LINEAR, 1, H, "$layers.%d.mlp.shared_expert_gate"),
};

/*
 * Gemma 2 / 3: Llama's names, but "post_attention_layernorm" normalizes the attention output before its
 * residual add (Llama's is the MLP's pre-norm), and the MLP has a pre and a post norm of its own.
 */
static const wm_modpat gemma2_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embed_tokens"),
    MP(L_ATTN_NORM, NORM, H, H, "$layers.%d.input_layernorm"),
    MP(L_Q, LINEAR, Q, H, "$layers.%d.self_attn.q_proj"),
    MP(L_K, LINEAR, KV, H, "$layers.%d.self_attn.k_proj"),
    MP(L_V, LINEAR, KV, H, "$layers.%d.self_attn.v_proj"),
    MP(L_O, LINEAR, H, Q, "$layers.%d.self_attn.o_proj"),
    MP(L_Q_NORM, NORM, HD, HD, "$layers.%d.self_attn.q_norm"),
    MP(L_K_NORM, NORM, HD, HD, "$layers.%d.self_attn.k_norm"),
    MP(L_ATTN_OUT_NORM, NORM, H, H, "$layers.%d.post_attention_layernorm"),
    MP(L_MLP_NORM, NORM, H, H, "$layers.%d.pre_feedforward_layernorm"),
    MP(L_GATE, LINEAR, I, H, "$layers.%d.mlp.gate_proj"),
    MP(L_UP, LINEAR, I, H, "$layers.%d.mlp.up_proj"),
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.down_proj"),
    MP(L_MLP_OUT_NORM, NORM, H, H, "$layers.%d.post_feedforward_layernorm"),
    MP(G_FINAL_NORM, NORM, H, H, "$norm"),
    MP(G_LM_HEAD, LINEAR, V, H, "lm_head"),
};

/* Phi (1.5 / 2): one LayerNorm feeding attention and MLP in parallel, an output projection named dense, a plain
   fc1 / fc2 MLP, a final LayerNorm. */
static const wm_modpat phi_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embed_tokens"),
    MP(L_ATTN_NORM, NORM, H, H, "$layers.%d.input_layernorm"),
    MP(L_Q, LINEAR, Q, H, "$layers.%d.self_attn.q_proj"),
    MP(L_K, LINEAR, KV, H, "$layers.%d.self_attn.k_proj"),
    MP(L_V, LINEAR, KV, H, "$layers.%d.self_attn.v_proj"),
    MP(L_O, LINEAR, H, Q, "$layers.%d.self_attn.dense"),
    MP(L_UP, LINEAR, I, H, "$layers.%d.mlp.fc1"),
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.fc2"),
    MP(G_FINAL_NORM, NORM, H, H, "$final_layernorm"),
    MP(G_LM_HEAD, LINEAR, V, H, "lm_head"),
};

/* GPT-NeoX (Pythia): fused query_key_value laid out per head, a norm per sublayer, embed_in / embed_out. */
static const wm_modpat neox_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embed_in"),
    MP(L_ATTN_NORM, NORM, H, H, "$layers.%d.input_layernorm"),
    MP(L_QKV, LINEAR, QKV, H, "$layers.%d.attention.query_key_value"),
    MP(L_O, LINEAR, H, Q, "$layers.%d.attention.dense"),
    MP(L_MLP_NORM, NORM, H, H, "$layers.%d.post_attention_layernorm"),
    MP(L_UP, LINEAR, I, H, "$layers.%d.mlp.dense_h_to_4h"),
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.dense_4h_to_h"),
    MP(G_FINAL_NORM, NORM, H, H, "$final_layer_norm"),
    MP(G_LM_HEAD, LINEAR, V, H, "embed_out"),
};

/* OLMo 2: Llama's names without pre-norms: post_attention_layernorm / post_feedforward_layernorm normalize each
   sublayer's output before its residual add; q_norm / k_norm span the whole projected q / k (all heads). */
static const wm_modpat olmo2_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embed_tokens"),
    MP(L_Q, LINEAR, Q, H, "$layers.%d.self_attn.q_proj"),
    MP(L_K, LINEAR, KV, H, "$layers.%d.self_attn.k_proj"),
    MP(L_V, LINEAR, KV, H, "$layers.%d.self_attn.v_proj"),
    MP(L_O, LINEAR, H, Q, "$layers.%d.self_attn.o_proj"),
    MP(L_Q_NORM, NORM, Q, Q, "$layers.%d.self_attn.q_norm"),
    MP(L_K_NORM, NORM, KV, KV, "$layers.%d.self_attn.k_norm"),
    MP(L_ATTN_OUT_NORM, NORM, H, H, "$layers.%d.post_attention_layernorm"),
    MP(L_GATE, LINEAR, I, H, "$layers.%d.mlp.gate_proj"),
    MP(L_UP, LINEAR, I, H, "$layers.%d.mlp.up_proj"),
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.down_proj"),
    MP(L_MLP_OUT_NORM, NORM, H, H, "$layers.%d.post_feedforward_layernorm"),
    MP(G_FINAL_NORM, NORM, H, H, "$norm"),
    MP(G_LM_HEAD, LINEAR, V, H, "lm_head"),
};

/* StarCoder2: Llama's attention names, a plain c_fc / c_proj MLP. */
static const wm_modpat starcoder2_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embed_tokens"),
    MP(L_ATTN_NORM, NORM, H, H, "$layers.%d.input_layernorm"),
    MP(L_Q, LINEAR, Q, H, "$layers.%d.self_attn.q_proj"),
    MP(L_K, LINEAR, KV, H, "$layers.%d.self_attn.k_proj"),
    MP(L_V, LINEAR, KV, H, "$layers.%d.self_attn.v_proj"),
    MP(L_O, LINEAR, H, Q, "$layers.%d.self_attn.o_proj"),
    MP(L_MLP_NORM, NORM, H, H, "$layers.%d.post_attention_layernorm"),
    MP(L_UP, LINEAR, I, H, "$layers.%d.mlp.c_fc"),
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.c_proj"),
    MP(G_FINAL_NORM, NORM, H, H, "$norm"),
    MP(G_LM_HEAD, LINEAR, V, H, "lm_head"),
};

/* BERT style (bert, roberta, xlm-roberta, electra): post-norm encoder, learned absolute positions. */
static const wm_modpat bert_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embeddings.word_embeddings"),
    MP(G_POS, EMBED, P, E, "$embeddings.position_embeddings"),
    MP(G_TYPE, EMBED, T, E, "$embeddings.token_type_embeddings"),
    MP(G_EMB_NORM, NORM, E, E, "$embeddings.LayerNorm"),
    MP(G_EMB_PROJ, LINEAR, H, E, "$embeddings_project"),
    MP(L_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.self.query"),
    MP(L_K, LINEAR, KV, H, "$encoder.layer.%d.attention.self.key"),
    MP(L_V, LINEAR, KV, H, "$encoder.layer.%d.attention.self.value"),
    MP(L_O, LINEAR, H, Q, "$encoder.layer.%d.attention.output.dense"),
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layer.%d.attention.output.LayerNorm"),
    MP(L_UP, LINEAR, I, H, "$encoder.layer.%d.intermediate.dense"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layer.%d.output.dense"),
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layer.%d.output.LayerNorm"),
};

/* MPNet: BERT's post-norm layers under other names, no token types, and one relative position bias table
   [buckets, heads] for all layers. */
static const wm_modpat mpnet_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embeddings.word_embeddings"),
    MP(G_POS, EMBED, P, E, "$embeddings.position_embeddings"),
    MP(G_EMB_NORM, NORM, E, E, "$embeddings.LayerNorm"),
    MP(G_REL_BIAS, EMBED, RB, NH, "$encoder.relative_attention_bias"),
    MP(L_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.attn.q"),
    MP(L_K, LINEAR, KV, H, "$encoder.layer.%d.attention.attn.k"),
    MP(L_V, LINEAR, KV, H, "$encoder.layer.%d.attention.attn.v"),
    MP(L_O, LINEAR, H, Q, "$encoder.layer.%d.attention.attn.o"),
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layer.%d.attention.LayerNorm"),
    MP(L_UP, LINEAR, I, H, "$encoder.layer.%d.intermediate.dense"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layer.%d.output.dense"),
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layer.%d.output.LayerNorm"),
};

/* DeBERTa v2/v3: post-norm encoder; absolute positions only with position_biased_input, relative position
   embeddings (+ their LayerNorm) shared by all layers, per-layer position projections unless share_att_key. */
static const wm_modpat deberta_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embeddings.word_embeddings"),
    MP(G_POS, EMBED, P, E, "$embeddings.position_embeddings"),
    MP(G_TYPE, EMBED, T, E, "$embeddings.token_type_embeddings"),
    MP(G_EMB_NORM, NORM, E, E, "$embeddings.LayerNorm"),
    MP(G_REL_EMB, EMBED, 2SPAN, H, "$encoder.rel_embeddings"),
    MP(G_REL_NORM, NORM, H, H, "$encoder.LayerNorm"),
    MP(L_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.self.query_proj"),
    MP(L_K, LINEAR, KV, H, "$encoder.layer.%d.attention.self.key_proj"),
    MP(L_V, LINEAR, KV, H, "$encoder.layer.%d.attention.self.value_proj"),
    MP(L_POS_K, LINEAR, KV, H, "$encoder.layer.%d.attention.self.pos_key_proj"),
    MP(L_POS_Q, LINEAR, Q, H, "$encoder.layer.%d.attention.self.pos_query_proj"),
    MP(L_O, LINEAR, H, Q, "$encoder.layer.%d.attention.output.dense"),
    MP(L_ATTN_NORM, NORM, H, H, "$encoder.layer.%d.attention.output.LayerNorm"),
    MP(L_UP, LINEAR, I, H, "$encoder.layer.%d.intermediate.dense"),
    MP(L_DOWN, LINEAR, H, I, "$encoder.layer.%d.output.dense"),
    MP(L_MLP_NORM, NORM, H, H, "$encoder.layer.%d.output.LayerNorm"),
};

/* ModernBERT: a pre-norm encoder with rotary positions, fused Wqkv and a fused GeGLU Wi (input half activated,
   gate half multiplying), no attention norm on layer 0 (the embeddings' norm serves), a final norm. */
static const wm_modpat modernbert_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embeddings.tok_embeddings"),
    MP(G_EMB_NORM, NORM, E, E, "$embeddings.norm"),
    MP(L_ATTN_NORM, NORM, H, H, "$layers.%d.attn_norm"),
    MP(L_QKV, LINEAR, QKV, H, "$layers.%d.attn.Wqkv"),
    MP(L_O, LINEAR, H, Q, "$layers.%d.attn.Wo"),
    MP(L_MLP_NORM, NORM, H, H, "$layers.%d.mlp_norm"),
    MP(L_GATE_UP, LINEAR, I2, H, "$layers.%d.mlp.Wi"),
    MP(L_DOWN, LINEAR, H, I, "$layers.%d.mlp.Wo"),
    MP(G_FINAL_NORM, NORM, H, H, "$final_norm"),
};

/* DistilBERT: post-norm encoder, no token types. */
static const wm_modpat distil_mods[] = {
    MP(G_EMBED, EMBED, V, E, "$embeddings.word_embeddings"),
    MP(G_POS, EMBED, P, E, "$embeddings.position_embeddings"),
    MP(G_EMB_NORM, NORM, E, E, "$embeddings.LayerNorm"),
    MP(L_Q, LINEAR, Q, H, "$transformer.layer.%d.attention.q_lin"),
    MP(L_K, LINEAR, KV, H, "$transformer.layer.%d.attention.k_lin"),
    MP(L_V, LINEAR, KV, H, "$transformer.layer.%d.attention.v_lin"),
    MP(L_O, LINEAR, H, Q, "$transformer.layer.%d.attention.out_lin"),
    MP(L_ATTN_NORM, NORM, H, H, "$transformer.layer.%d.sa_layer_norm"),
    MP(L_UP, LINEAR, I, H, "$transformer.layer.%d.ffn.lin1"),
    MP(L_DOWN, LINEAR, H, I, "$transformer.layer.%d.ffn.lin2"),
    MP(L_MLP_NORM, NORM, H, H, "$transformer.layer.%d.output_layer_norm"),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
const wm_scheme wm_schemes[] = {
    {"gpt2", WM_DECODER, WM_NORM_LAYER, 0, WM_POS_LEARNED, 0, {"transformer.", ""}, gpt2_mods, N(gpt2_mods), "gpt2"},
    {"llama", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, llama_mods, N(llama_mods), "llama"},
    {"gemma2", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, gemma2_mods, N(gemma2_mods), "gemma2"},
    /* Llama's names with LayerNorms (StableLM, Cohere) */
    {"llama-layernorm", WM_DECODER, WM_NORM_LAYER, 0, WM_POS_ROPE, 1, {"model.", ""}, llama_mods, N(llama_mods),
     "stablelm"},
    {"phi", WM_DECODER, WM_NORM_LAYER, 0, WM_POS_ROPE, 0, {"model.", ""}, phi_mods, N(phi_mods), "phi"},
    {"gpt_neox", WM_DECODER, WM_NORM_LAYER, 0, WM_POS_ROPE, 0, {"gpt_neox.", ""}, neox_mods, N(neox_mods),
     "gpt_neox"},
    {"olmo2", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, olmo2_mods, N(olmo2_mods), "olmo2"},
    {"starcoder2", WM_DECODER, WM_NORM_LAYER, 0, WM_POS_ROPE, 0, {"model.", ""}, starcoder2_mods,
     N(starcoder2_mods), "starcoder2"},
    {"mixtral", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, mixtral_mods, N(mixtral_mods), "mixtral",
     {"$layers.%d.block_sparse_moe.experts.%e.w1", "$layers.%d.block_sparse_moe.experts.%e.w3",
      "$layers.%d.block_sparse_moe.experts.%e.w2"}},
    {"granitemoe", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, granitemoe_mods,
     N(granitemoe_mods), "granitemoe",
     {"$layers.%d.block_sparse_moe.input_linear", NULL, "$layers.%d.block_sparse_moe.output_linear"}},
    {"granitemoeshared", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, granitemoeshared_mods,
     N(granitemoeshared_mods), "granitemoeshared",
     {"$layers.%d.block_sparse_moe.input_linear", NULL, "$layers.%d.block_sparse_moe.output_linear"}},
    {"qwen2_moe", WM_DECODER, WM_NORM_RMS, 0, WM_POS_ROPE, 1, {"model.", ""}, qwen_moe_mods, N(qwen_moe_mods),
     "qwen2_moe", {"$layers.%d.mlp.experts.%e.gate_proj", "$layers.%d.mlp.experts.%e.up_proj",
                   "$layers.%d.mlp.experts.%e.down_proj"}},
    {"bert", WM_ENCODER, WM_NORM_LAYER, 1, WM_POS_LEARNED, 0, {"bert.", "roberta.", "electra.", ""}, bert_mods,
     N(bert_mods), "bert"},
    {"distilbert", WM_ENCODER, WM_NORM_LAYER, 1, WM_POS_LEARNED, 0, {"distilbert.", ""}, distil_mods,
     N(distil_mods), "distilbert"},
    {"mpnet", WM_ENCODER, WM_NORM_LAYER, 1, WM_POS_LEARNED, 0, {"mpnet.", ""}, mpnet_mods, N(mpnet_mods), "mpnet"},
    {"deberta-v2", WM_ENCODER, WM_NORM_LAYER, 1, WM_POS_LEARNED, 0, {"deberta.", ""}, deberta_mods, N(deberta_mods),
     "deberta-v2"},
    {"modernbert", WM_ENCODER, WM_NORM_LAYER, 0, WM_POS_ROPE, 1, {"model.", ""}, modernbert_mods, N(modernbert_mods),
     "modernbert"},
};
const size_t wm_n_schemes = N(wm_schemes);

/* ----------------------------------------------------- classification heads */

/* Sequence-classification heads: (first linear, its activation, second linear) on the first token. */
const wm_head_def wm_cls_heads[] = {
    [WM_HEAD_POOLER_TANH] = {"$pooler.dense", WM_ACT_TANH, "classifier"},
    [WM_HEAD_DENSE_TANH] = {"classifier.dense", WM_ACT_TANH, "classifier.out_proj"},
    [WM_HEAD_DENSE_GELU] = {"classifier.dense", WM_ACT_GELU, "classifier.out_proj"},
    [WM_HEAD_PRE_RELU] = {"pre_classifier", WM_ACT_RELU, "classifier"},
    [WM_HEAD_POOLER_ACT] = {"pooler.dense", WM_ACT_NONE, "classifier"},
    [WM_HEAD_DENSE_ACT_NORM] = {"head.dense", WM_ACT_NONE, "classifier", "head.norm"},
};

/* Masked-LM heads, as transformers' BertForMaskedLM, RobertaForMaskedLM (GELU whatever hidden_act says) and
   DistilBertForMaskedLM name them. */
const wm_mlm_def wm_mlm_heads[] = {
    [WM_MLM_BERT] = {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias",
                     WM_ACT_NONE},
    [WM_MLM_ROBERTA] = {"lm_head.dense", "lm_head.layer_norm", "lm_head.bias", WM_ACT_GELU},
    [WM_MLM_DISTILBERT] = {"vocab_transform", "vocab_layer_norm", "vocab_projector.bias", WM_ACT_NONE},
    /* ModernBERT: its prediction head, then the tied decoder (activation: the family's head_act_key) */
    [WM_MLM_HEAD] = {"head.dense", "head.norm", "decoder.bias", WM_ACT_NONE},
};

/* Tensor-name prefixes of heads a task may leave unused ('$' = the model prefix). */
const char *const wm_head_prefixes[] = {
    "classifier.", "pre_classifier.", "qa_outputs.", "cls.", "lm_head.", "vocab_transform.", "vocab_layer_norm.",
    "vocab_projector.", "discriminator_predictions.", "generator_predictions.", "generator_lm_head.", "score.",
    "$pooler.", "pooler.", "cls_classifier.", "distillation_classifier.", "head.", "decoder.bias",
    /* DeBERTa without position_biased_input: transformers ignores a saved position table (not built here) */
    "$embeddings.position_embeddings.", NULL};

/* Buffers some exporters save that carry no parameters (name suffixes); a ViT / DINOv2 mask_token only
   replaces masked patches in masked-image-modeling training, never at inference. */
const char *const wm_buffer_suffixes[] = {".inv_freq", ".attn.bias", ".attn.masked_bias", ".attention.bias",
                                          ".attention.masked_bias", "position_ids",
                                          "token_type_ids", ".num_batches_tracked", "embeddings.mask_token",
                                          "masked_spec_embed", NULL}; /* wav2vec2: SpecAugment training only */

/* ------------------------------------------------------------- families */

#define DEC(...) {.kind = WM_DECODER, .posid = WM_POSID_INPUT, .cls_head = WM_HEAD_NONE, __VA_ARGS__}
#define ENC(...)                                                                                            \
    {.kind = WM_ENCODER, .act = "gelu", .qkv_bias = 1, .o_bias = 1, .mlp_bias = 1, .tied = 1,       \
     __VA_ARGS__}

const wm_family wm_families[] = {
    DEC(.model_type = "gpt2", .class_stem = "GPT2", .lm_suffix = "LMHeadModel", .scheme = "gpt2",
        .prefix = "transformer.", .act = "gelu_new", .eps = 1e-5, .inter_mult = 4, .tied = 1, .qkv_bias = 1,
        .o_bias = 1, .mlp_bias = 1, .fused_qkv = 1),
    DEC(.model_type = "llama", .class_stem = "Llama", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-6),
    DEC(.model_type = "mistral", .class_stem = "Mistral", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-6, .sliding = 1),
    DEC(.model_type = "qwen2", .class_stem = "Qwen2", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-6, .qkv_bias = 1, .sliding = 1),
    DEC(.model_type = "qwen3", .class_stem = "Qwen3", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-6, .qk_norm = 1, .sliding = 1),
    DEC(.model_type = "phi3", .class_stem = "Phi3", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-5, .fused_qkv = 1, .fused_gate_up = 1, .sliding = 1),
    /* Gemma: (1 + w) RMSNorm, embeddings scaled by sqrt(hidden), GELU-tanh ("gelu" is its legacy spelling) */
    DEC(.model_type = "gemma", .class_stem = "Gemma", .scheme = "llama", .prefix = "model.", .act = "gelu_pytorch_tanh",
        .act_key = "hidden_act", .gelu_is_tanh = 1, .eps = 1e-6, .tied = 1, .norm_offset = 1, .embed_scale = 1),
    /* Gemma 2: + post-sublayer norms, query_pre_attn_scalar, attention and final logit soft-capping (on by
       default), every other layer sliding */
    DEC(.model_type = "gemma2", .class_stem = "Gemma2", .scheme = "gemma2", .prefix = "model.",
        .act = "gelu_pytorch_tanh", .act_key = "hidden_activation", .eps = 1e-6, .tied = 1, .norm_offset = 1,
        .embed_scale = 1, .sliding = 1, .sliding_pattern = 2, .window_default = 4096, .query_scalar = 256,
        .keys = {[WM_FK_ATTN_SOFTCAP] = WM_KEY_USED, [WM_FK_FINAL_SOFTCAP] = WM_KEY_USED}, .attn_softcap = 50.0,
        .final_softcap = 30.0),
    /* Gemma 3 text: + q/k norms, sliding layers with their own RoPE base (5 of every 6 layers), no attention
       soft-capping (transformers never reads the key) */
    DEC(.model_type = "gemma3_text", .class_stem = "Gemma3", .scheme = "gemma2", .prefix = "model.",
        .act = "gelu_pytorch_tanh", .act_key = "hidden_activation", .eps = 1e-6, .tied = 1, .norm_offset = 1,
        .embed_scale = 1, .qk_norm = 1, .sliding = 1, .sliding_pattern = 6, .pattern_key = 1, .window_default = 4096,
        .query_scalar = 256, .rope_theta = 1e6, .local_rope_theta = 1e4,
        .keys = {[WM_FK_ATTN_SOFTCAP] = WM_KEY_IGNORED, [WM_FK_FINAL_SOFTCAP] = WM_KEY_USED}),
    /* Granite: Llama's blocks with four multipliers from the config (embeddings, residual branches, attention
       scores, logits) */
    DEC(.model_type = "granite", .class_stem = "Granite", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-6, .keys = {[WM_FK_MULTIPLIERS] = WM_KEY_USED}),
    /* GraniteMoE: Granite's multipliers with a mixture of experts in every layer (8 experts, top 2 by default; the
       router's top-k logits go through a softmax, i.e. the top-k weights renormalized) */
    DEC(.model_type = "granitemoe", .class_stem = "GraniteMoe", .scheme = "granitemoe", .prefix = "model.",
        .act = "silu", .eps = 1e-6, .keys = {[WM_FK_MULTIPLIERS] = WM_KEY_USED, [WM_FK_MOE] = WM_KEY_USED},
        .moe_experts = 8, .moe_top_k = 2),
    /* GraniteMoeShared: GraniteMoE with a shared expert of shared_intermediate_size (0 by default: none) added to
       the experts' output without a gate */
    DEC(.model_type = "granitemoeshared", .class_stem = "GraniteMoeShared", .scheme = "granitemoeshared",
        .prefix = "model.", .act = "silu", .eps = 1e-6,
        .keys = {[WM_FK_MULTIPLIERS] = WM_KEY_USED, [WM_FK_MOE] = WM_KEY_USED}, .moe_experts = 8, .moe_top_k = 2,
        .moe_shared_key = "shared_intermediate_size", .moe_shared_def = 0, .moe_shared_ungated = 1),
    /* Phi 1.5 / 2: parallel attention + MLP on one LayerNorm, partial rotary (0.5 by default), biases everywhere
       (lm_head's too) */
    DEC(.model_type = "phi", .class_stem = "Phi", .scheme = "phi", .prefix = "model.", .act = "gelu_new",
        .eps = 1e-5, .qkv_bias = 1, .o_bias = 1, .mlp_bias = 1, .lm_bias = 1, .parallel = 1, .shared_norm = 1,
        .rotary_factor = 0.5),
    /* GPT-NeoX / Pythia: use_parallel_residual (on by default) with a norm per sublayer, rotary on 25% of the head
       by default, fused qkv per head, attention_bias on the attention linears */
    DEC(.model_type = "gpt_neox", .class_stem = "GPTNeoX", .scheme = "gpt_neox", .prefix = "gpt_neox.",
        .act = "gelu", .eps = 1e-5, .qkv_bias = 1, .o_bias = 1, .mlp_bias = 1, .fused_qkv = 1, .qkv_per_head = 1,
        .parallel = 1, .rotary_factor = 0.25, .partial_key = "rotary_pct", .theta_key = "rotary_emb_base",
        .keys = {[WM_FK_PARALLEL] = WM_KEY_USED}),
    /* StableLM: Llama's blocks with LayerNorms, rotary on 25% of the head by default, use_qkv_bias, and
       use_parallel_residual (off by default; the MLP then shares the input norm) */
    DEC(.model_type = "stablelm", .class_stem = "StableLm", .scheme = "llama-layernorm", .prefix = "model.",
        .act = "silu", .eps = 1e-5, .qkv_bias_key = "use_qkv_bias", .shared_norm = 1, .rotary_factor = 0.25,
        .keys = {[WM_FK_PARALLEL] = WM_KEY_USED}),
    /* OLMo 2: output norms instead of pre-norms, q/k RMSNorms over all heads */
    DEC(.model_type = "olmo2", .class_stem = "Olmo2", .scheme = "olmo2", .prefix = "model.", .act = "silu",
        .eps = 1e-5, .qk_norm = 1),
    /* SmolLM3: Llama with no rotary positions on every no_rope_layer_interval-th layer (or as no_rope_layers) */
    DEC(.model_type = "smollm3", .class_stem = "SmolLM3", .scheme = "llama", .prefix = "model.", .act = "silu",
        .eps = 1e-6, .tied = 1, .sliding = 1, .keys = {[WM_FK_NOPE] = WM_KEY_USED}),
    /* StarCoder2: LayerNorms, a plain GELU-tanh MLP, use_bias on every linear */
    DEC(.model_type = "starcoder2", .class_stem = "Starcoder2", .scheme = "starcoder2", .prefix = "model.",
        .act = "gelu_pytorch_tanh", .eps = 1e-5, .tied = 1, .qkv_bias = 1, .o_bias = 1, .mlp_bias = 1,
        .bias_key = "use_bias", .sliding = 1),
    /* Cohere (Command-R): parallel attention + MLP on one LayerNorm without bias, interleaved rotary pairs, logits
       multiplied by logit_scale */
    DEC(.model_type = "cohere", .class_stem = "Cohere", .scheme = "llama-layernorm", .prefix = "model.",
        .act = "silu", .eps = 1e-5, .tied = 1, .no_norm_bias = 1, .parallel = 1, .shared_norm = 1,
        .rope_interleaved = 1, .logit_scale = 0.0625, .keys = {[WM_FK_LOGIT_SCALE] = WM_KEY_USED}),
    /* Cohere 2 (Command R7B): Cohere's layers, every sliding_window_pattern-th (4th) layer full attention without
       rotary positions, the others sliding with them (or as layer_types says) */
    DEC(.model_type = "cohere2", .class_stem = "Cohere2", .scheme = "llama-layernorm", .prefix = "model.",
        .act = "silu", .eps = 1e-5, .tied = 1, .no_norm_bias = 1, .parallel = 1, .shared_norm = 1,
        .rope_interleaved = 1, .logit_scale = 0.0625, .keys = {[WM_FK_LOGIT_SCALE] = WM_KEY_USED}, .sliding = 1,
        .sliding_pattern = 4, .pattern_key = 1, .window_default = 4096, .nope_full = 1),
    /* Mixtral: Mistral with a mixture of experts in every layer (8 experts, top 2 by default), top-k weights always
       renormalized */
    DEC(.model_type = "mixtral", .class_stem = "Mixtral", .scheme = "mixtral", .prefix = "model.", .act = "silu",
        .eps = 1e-5, .sliding = 1, .keys = {[WM_FK_MOE] = WM_KEY_USED}, .moe_experts = 8, .moe_top_k = 2),
    /* Qwen2-MoE: Qwen2 (q/k/v biases by qkv_bias) with experts of moe_intermediate_size on the layers
       decoder_sparse_step / mlp_only_layers pick, a shared expert, norm_topk_prob (off by default) */
    DEC(.model_type = "qwen2_moe", .class_stem = "Qwen2Moe", .scheme = "qwen2_moe", .prefix = "model.",
        .act = "silu", .eps = 1e-6, .qkv_bias = 1, .qkv_bias_key = "qkv_bias", .sliding = 1,
        .keys = {[WM_FK_MOE] = WM_KEY_USED}, .moe_experts = 60, .moe_top_k = 4, .moe_inter_def = 1408,
        .moe_inter_key = "moe_intermediate_size", .moe_shared_key = "shared_expert_intermediate_size",
        .moe_shared_def = 5632, .moe_norm_key = "norm_topk_prob", .moe_sparse_keys = 1),
    /* Qwen3-MoE: Qwen3 (q/k norms) with Qwen2-MoE's experts and no shared expert */
    DEC(.model_type = "qwen3_moe", .class_stem = "Qwen3Moe", .scheme = "qwen2_moe", .prefix = "model.",
        .act = "silu", .eps = 1e-6, .qk_norm = 1, .sliding = 1, .keys = {[WM_FK_MOE] = WM_KEY_USED},
        .moe_experts = 128, .moe_top_k = 8, .moe_inter_def = 768, .moe_inter_key = "moe_intermediate_size",
        .moe_norm_key = "norm_topk_prob", .moe_sparse_keys = 1),
    ENC(.model_type = "bert", .eps = 1e-12, .class_stem = "Bert", .scheme = "bert", .prefix = "bert.",
        .posid = WM_POSID_ARANGE, .type_vocab = 2, .cls_head = WM_HEAD_POOLER_TANH, .mlm_head = WM_MLM_BERT),
    ENC(.model_type = "roberta", .eps = 1e-12, .class_stem = "Roberta", .scheme = "bert", .prefix = "roberta.",
        .posid = WM_POSID_PADDING, .type_vocab = 1, .cls_head = WM_HEAD_DENSE_TANH, .mlm_head = WM_MLM_ROBERTA),
    ENC(.model_type = "xlm-roberta", .eps = 1e-12, .class_stem = "XLMRoberta", .scheme = "bert",
        .prefix = "roberta.",
        .posid = WM_POSID_PADDING, .type_vocab = 1, .cls_head = WM_HEAD_DENSE_TANH, .mlm_head = WM_MLM_ROBERTA),
    ENC(.model_type = "electra", .eps = 1e-12, .class_stem = "Electra", .scheme = "bert", .prefix = "electra.",
        .posid = WM_POSID_ARANGE, .type_vocab = 2, .cls_head = WM_HEAD_DENSE_GELU),
    ENC(.model_type = "distilbert", .eps = 1e-12, .class_stem = "DistilBert", .scheme = "distilbert",
        .prefix = "distilbert.",
        .posid = WM_POSID_ARANGE, .type_vocab = 0, .cls_head = WM_HEAD_PRE_RELU, .mlm_head = WM_MLM_DISTILBERT),
    /* MPNet: RoBERTa's padding-aware positions (padding_idx 1 in its code, whatever pad_token_id says) and
       heads, plus a relative position bias of 32 buckets up to distance 128 (its code's constants) */
    ENC(.model_type = "mpnet", .eps = 1e-12, .class_stem = "MPNet", .scheme = "mpnet", .prefix = "mpnet.",
        .posid = WM_POSID_PADDING, .pad_fixed = 1, .padding_idx = 1, .type_vocab = 0, .cls_head = WM_HEAD_DENSE_TANH,
        .mlm_head = WM_MLM_ROBERTA, .rel_buckets = 32, .rel_max_distance = 128),
    /* DeBERTa v2/v3: disentangled attention, a 2-D mask, a pooler with pooler_hidden_act before the classifier (no
       masked-LM head here: the enhanced mask decoder is not built) */
    ENC(.model_type = "deberta-v2", .class_stem = "DebertaV2", .scheme = "deberta-v2", .prefix = "deberta.",
        .eps = 1e-7, .posid = WM_POSID_ARANGE, .type_vocab = 0, .cls_head = WM_HEAD_POOLER_ACT, .disentangled = 1,
        .mask_rows = 1),
    /* ModernBERT: pre-norm layers with RoPE (theta 160000; sliding layers their own, 10000), every
       global_attn_every_n_layers-th layer (from 0) full attention, the others a bidirectional window of
       local_attention; LayerNorms without bias (norm_bias); heads through its prediction head (dense, classifier_activation,
       norm), classification pooled by classifier_pooling */
    {.kind = WM_ENCODER, .tied = 1, .act = "gelu", .model_type = "modernbert", .class_stem = "ModernBert",
        .scheme = "modernbert", .prefix = "model.", .act_key = "hidden_activation", .eps = 1e-5, .fused_qkv = 1,
        .fused_gate_up = 1, .posid = WM_POSID_ARANGE, .type_vocab = 0, .cls_head = WM_HEAD_DENSE_ACT_NORM,
        .mlm_head = WM_MLM_HEAD, .sliding = 1, .sliding_pattern = 3, .pattern_every_key = "global_attn_every_n_layers",
        .half_window_key = "local_attention", .window_default = 128, .rope_theta = 160000.0,
        .local_rope_theta = 10000.0, .no_first_attn_norm = 1, .head_transform = 1,
        .head_act_key = "classifier_activation", .pool_key = "classifier_pooling"},
};
const size_t wm_n_families = N(wm_families);

/*
 * model_types whose tensors look like a known scheme but whose math differs
 * in ways the names do not reveal: refused rather than built wrong.
 */
const wm_denied_type wm_denied_types[] = {
    {"gemma3", "the multimodal Gemma 3 (vision tower, text_config nested); its text model is gemma3_text"},
    {"minicpm", "embedding and residual scaling"},
    {"olmo", "non-parametric LayerNorm"},
    {"nemotron", "LayerNorm1P and squared-ReLU MLP"},
    {"granitemoehybrid", "Granite 4.0 hybrid: its Mamba-2 layers (layer_types 'mamba') are not modeled"},
    /* image models the vision tables do not cover (arch_vtables.c has vit, deit, dinov2, clip, resnet) */
    /* speech models the audio tables do not cover (arch_vtables.c has wav2vec2, hubert) */
    {"wavlm", "WavLM: gated relative position bias in every attention layer is not modeled"},
    {"siglip2", "SigLIP 2: variable-resolution (NaFlex) patches are not modeled"},
    {"convnext", "ConvNeXt: depthwise convolutions with channel LayerNorm and layer scale are not modeled"},
    {"convnextv2", "ConvNeXt V2: depthwise convolutions with global response norm are not modeled"},
    {"swin", "Swin: shifted-window attention with relative position bias is not modeled"},
    {"swinv2", "Swin V2: shifted-window cosine attention with a continuous position bias is not modeled"},
    {"beit", "BEiT: per-layer relative position bias is not modeled"},
    {"data2vec-vision", "Data2Vec vision: BEiT's relative position bias is not modeled"},
    {"vit_mae", "ViT-MAE: random patch masking in the forward pass is not modeled"},
    {"vit_hybrid", "ViT hybrid: the BiT convolutional backbone is not modeled"},
    {"mobilevit", "MobileViT: inverted residual blocks mixed with transformers are not modeled"},
    {"efficientnet", "EfficientNet: depthwise convolutions and squeeze-excitation are not modeled"},
    {"regnet", "RegNet: grouped convolutions and squeeze-excitation are not modeled"},
    {"blip", "BLIP: image-text cross-attention is not modeled"},
    {"blip-2", "BLIP-2: the Q-Former and language model are not modeled"},
    {"owlvit", "OWL-ViT: the detection heads are not modeled"},
    {"owlv2", "OWLv2: the detection heads are not modeled"},
    {"chinese_clip", "Chinese-CLIP: a BERT text tower with CLIP's vision tower is not modeled"},
    {"clipseg", "CLIPSeg: the segmentation decoder is not modeled"},
    {"detr", "DETR: the detection transformer is not modeled"},
    {NULL, NULL},
};

/* ---------------------------------------------------------- config keys */

/*
 * Config keys that change the math when set to something other than their
 * neutral value; the graph does not model them, so such a value is refused.
 */
const wm_denied_key wm_denied_keys[] = {
    {"use_parallel_residual", WM_DENY_TRUE, WM_FK_PARALLEL},
    {"parallel_attn", WM_DENY_TRUE},
    {"add_cross_attention", WM_DENY_TRUE},
    {"attn_logit_softcapping", WM_DENY_SET, WM_FK_ATTN_SOFTCAP},
    {"final_logit_softcapping", WM_DENY_SET, WM_FK_FINAL_SOFTCAP},
    {"logit_scale", WM_DENY_SET, WM_FK_LOGIT_SCALE},
    {"no_rope_layers", WM_DENY_SET, WM_FK_NOPE},
    {"use_qk_norm", WM_DENY_TRUE}, /* Cohere's per-head LayerNorms on q / k */
    {"embedding_multiplier", WM_DENY_SET, WM_FK_MULTIPLIERS},
    {"residual_multiplier", WM_DENY_SET, WM_FK_MULTIPLIERS},
    {"attention_multiplier", WM_DENY_SET, WM_FK_MULTIPLIERS},
    {"logits_scaling", WM_DENY_SET, WM_FK_MULTIPLIERS},
    {"qk_layernorm", WM_DENY_TRUE},
    {"num_local_experts", WM_DENY_SET, WM_FK_MOE},
    {"num_experts", WM_DENY_SET, WM_FK_MOE},
    {"n_routed_experts", WM_DENY_SET},
    {"use_alibi", WM_DENY_TRUE},
    {"conv_kernel_size", WM_DENY_SET}, /* DeBERTa-v2 (x)xlarge's convolution after the first layer */
    {"alibi", WM_DENY_TRUE},
    {"position_embedding_type", WM_DENY_NOT_ABSOLUTE},
    {"is_decoder", WM_DENY_TRUE_ENCODER},
    {"use_bidirectional_attention", WM_DENY_TRUE},
    {"reorder_and_upcast_attn", WM_DENY_NONE}, /* fp32 graph: the same math */
    {NULL, 0, 0},
};

/* ---------------------------------------------------------- activations */

const wm_act_name_row wm_act_names[] = {
    {"gelu", WM_ACT_GELU},           {"gelu_python", WM_ACT_GELU},      {"gelu_new", WM_ACT_GELU_TANH},
    {"gelu_pytorch_tanh", WM_ACT_GELU_TANH}, {"gelu_fast", WM_ACT_GELU_TANH}, {"silu", WM_ACT_SILU},
    {"swish", WM_ACT_SILU},          {"relu", WM_ACT_RELU},             {"quick_gelu", WM_ACT_QUICK_GELU},
    {"tanh", WM_ACT_TANH},           {NULL, WM_ACT_NONE},
};

/* ----------------------------------------------------- architecture names */

/* Class-name suffixes -> task (first match wins; "Model" must come last). */
const wm_arch_suffix wm_arch_suffixes[] = {
    {"ForCausalLM", WM_TASK_TEXT_GENERATION},
    {"LMHeadModel", WM_TASK_TEXT_GENERATION},
    {"ForSequenceClassification", WM_TASK_TEXT_CLASSIFICATION},
    {"ForTokenClassification", WM_TASK_TOKEN_CLASSIFICATION},
    {"ForQuestionAnswering", WM_TASK_QUESTION_ANSWERING},
    {"ForMaskedLM", WM_TASK_FEATURE_EXTRACTION},
    {"ForPreTraining", WM_TASK_FEATURE_EXTRACTION},
    {"Model", WM_TASK_FEATURE_EXTRACTION},
    {NULL, 0},
};

/* HF class suffix per task (decoders take the family's lm suffix for text-generation). */
const char *const wm_task_class_suffix[WM_TASK_COUNT] = {
    [WM_TASK_TEXT_GENERATION] = "ForCausalLM",
    [WM_TASK_TEXT_CLASSIFICATION] = "ForSequenceClassification",
    [WM_TASK_FEATURE_EXTRACTION] = "Model",
    [WM_TASK_TOKEN_CLASSIFICATION] = "ForTokenClassification",
    [WM_TASK_QUESTION_ANSWERING] = "ForQuestionAnswering",
    [WM_TASK_FILL_MASK] = "ForMaskedLM",
    [WM_TASK_IMAGE_CLASSIFICATION] = "ForImageClassification",
    [WM_TASK_IMAGE_FEATURE_EXTRACTION] = "Model",
    [WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION] = "Model",
    [WM_TASK_TEXT2TEXT_GENERATION] = "ForConditionalGeneration",
    [WM_TASK_AUDIO_CLASSIFICATION] = "ForAudioClassification", /* the Auto class; the model's is ...ForSequence... */
    [WM_TASK_ASR] = "ForCTC",
    [WM_TASK_IMAGE_TO_TEXT] = "Model", /* VisionEncoderDecoderModel */
    [WM_TASK_KEYPOINT_DETECTION] = "ForPoseEstimation",
};
