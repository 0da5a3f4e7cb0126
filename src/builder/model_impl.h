/* model_impl.h - the decoder and encoder graphs (internal to the builder). */
#ifndef WM_BUILDER_MODEL_IMPL_H
#define WM_BUILDER_MODEL_IMPL_H

#include "builder/export.h"
#include "builder/gb.h"

/* What the layer code needs besides the architecture. */
typedef struct wm_model_ctx {
    const wm_arch *a;
    const wm_recipe *r;
    int32_t ids_dtype;             /* dtype of input_ids */
    const char *bias_full;         /* additive attention mask [B,1,S,T] (decoder) or [B,1,1,S] */
    const char *bias_sliding;      /* decoders with a sliding window */
    const char *cos, *sin;         /* [B,1,S,rot] */
    const char *cos_local, *sin_local; /* the sliding layers' own (arch local_rope) */
    const char *embed_weight;      /* for tied lm_head */
    int progress;
    const char *root;              /* scope of the tower ("/model" when NULL; CLIP: "/text_model", "/vision_model") */
    const wm_st_file *st;          /* the weights (NULL: random), for values computed at export */
    const char *rel_emb;           /* disentangled attention: the (normed) relative embeddings [2 span, H] */
    const char *rel_idx;           /* and the position index clamp(bucket(i - j) + span) [S, S] */
} wm_model_ctx;

wm_status wm_model_decoder(wm_gb *b, wm_model_ctx *c);
wm_status wm_model_encoder(wm_gb *b, wm_model_ctx *c);
/* Image transformers, CLIP's towers and both (model_vit.c); ResNet (model_resnet.c). */
wm_status wm_model_vision(wm_gb *b, wm_model_ctx *c);
wm_status wm_model_resnet(wm_gb *b, wm_model_ctx *c);
/* The keypoint-detection head (model_pose.c) on the final-normed patch tokens last [B, patches, H]: the heatmaps. */
const char *wm_model_pose_head(wm_gb *b, wm_model_ctx *c, const char *last);
/* Encoder-decoder graphs (model_s2s.c): part WM_S2S_* (export.h). */
wm_status wm_model_s2s(wm_gb *b, wm_model_ctx *c, int part);
/* The graph inputs (outputs 0) or outputs (1) of part into out (cap entries); returns the count. */
size_t wm_s2s_io(const wm_arch *a, int part, int outputs, wm_io_spec *out, size_t cap);
/* The graph outputs of part recipe a->s2s_part (WM_S2S_PART_*) for recipe r (dims follow its inputs); the count. */
size_t wm_s2s_part_outputs(const wm_arch *a, const wm_recipe *r, wm_io_spec *out, size_t cap);
/* The part recipes' cache names, a printf format of the layer (long long): past (present 0) or present (1) of the
   key (value 0) or the value (1): "past_%lld_key", ... */
const char *wm_s2s_part_kv(int present, int value);
/* wav2vec2-style speech encoders (model_w2v.c). */
wm_status wm_model_audio(wm_gb *b, wm_model_ctx *c);
/* Frames the feature encoder makes of samples (0 when too short). */
int64_t wm_audio_frames(const wm_arch *a, int64_t samples);
/* A float32 IO spec named name of rank dims (export.c). */
wm_io_spec wm_float_spec(const char *name, size_t rank, const wm_io_dim *d);
/* Output specs of a vision graph (dims from the recipe's inputs); returns the count. */
size_t wm_vis_output_specs(const wm_arch *a, const wm_recipe *r, wm_io_spec *out, size_t cap);
/* ResNet's final feature-map side for its image_size. */
int64_t wm_resnet_side(const wm_arch *a);
/* A convolution's weight and bias with its BatchNorm folded in: the checkpoint's conv_weight (dims wd: [out, in, k, k],
   or [in, out, k, k] when transposed, a ConvTranspose's) scaled per output channel by weight / sqrt(running_var + eps),
   the bias beta - running_mean * that scale; the BatchNorm's tensors are bn_prefix + parts[0..3] (weight, bias,
   running_mean, running_var). Added to b as ".weight" / ".bias" into *w / *bias ("<error>" and b->st on failure). */
void wm_model_conv_bn(wm_gb *b, const wm_st_file *st, const char *conv_weight, const char *bn_prefix,
                      const char *const parts[4], const int64_t wd[4], int transposed, double eps, const char **w,
                      const char **bias);

/* Shared by both (model_attn.c). */
const char *wm_model_attention(wm_gb *b, const wm_model_ctx *c, int layer, const char *h);
const char *wm_model_mlp(wm_gb *b, const wm_model_ctx *c, int layer, const char *h);
/* act(gate x) * (up x) of a gated MLP under scope sc (model_attn.c): fused gate_up module (>= 0) or gate + up */
const char *wm_model_gated_product(wm_gb *b, const wm_arch *a, int layer, const char *x, const char *sc, int gate_up,
                                   int gate, int up, int64_t width);
/* A sparse layer's MLP (a->moe_layer[layer]): router + com.microsoft MoE (+ shared expert) on h [B, S, H]
   (model_moe.c). */
const char *wm_model_moe(wm_gb *b, const wm_model_ctx *c, int layer, const char *h);
/* Disentangled attention's shared inputs into c (rel_emb, rel_idx), in scope /model/rel_embeddings. */
void wm_model_rel_embeddings(wm_gb *b, wm_model_ctx *c);
/* The relative position bias [1, heads, S, S] of a's G_REL_BIAS table for the sequence of ids [B, S] (buckets
   computed at export), in scope <root>/rel_attn_bias; added to the attention scores of every layer. */
const char *wm_model_rel_bias(wm_gb *b, const wm_model_ctx *c, const char *ids);
/* logits [B, S, V] = x E^T (+ bias) over the tied embedding c->embed_weight or lm_head (model_dec.c). */
const char *wm_model_lm_head(wm_gb *b, const wm_model_ctx *c, const char *x);
/* cos / sin [B, 1, S, rot] of rope r from the position ids pos_ids [B, S] (int64), computed as transformers does
   (float32 pos x inv_freq), in scope /model/<name> with constants model.<name>.inv_freq[_long]; il_pairs:
   interleaved rotary pairs (model_dec.c). */
void wm_model_rotary(wm_gb *b, const wm_rope *r, int il_pairs, const char *name, const char *pos_ids,
                     const char **cos_out, const char **sin_out);
/* cap * tanh(x / cap) in the current scope (model_dec.c). */
const char *wm_model_softcap(wm_gb *b, const char *x, double cap);
/* Output names by task (model_attn.c). */
size_t wm_model_outputs(const wm_arch *a, const wm_recipe *r, char (*names)[96], size_t cap);

#endif
