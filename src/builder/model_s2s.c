/*
 * model_s2s.c - the encoder-decoder graphs, in Optimum's seq2seq layout
 * (what onnxruntime and Optimum's ORTModelForSeq2SeqLM load):
 *
 *  - encoder_model.onnx: input_ids, attention_mask [batch, encoder_sequence_length] -> last_hidden_state;
 *  - decoder_model.onnx (the first step): input_ids [batch, decoder_sequence_length], encoder_attention_mask,
 *    encoder_hidden_states -> logits, present.N.decoder.key/value (self-attention) and present.N.encoder.key/value
 *    (cross-attention K/V, computed here once from the encoder output);
 *  - decoder_with_past_model.onnx (every later step): input_ids, encoder_attention_mask,
 *    past_key_values.N.decoder.key/value, past_key_values.N.encoder.key/value -> logits, present.N.decoder.key/value
 *    (the self-attention cache with this step appended; the cross-attention cache is reused as it is).
 *
 * Caches are [batch, heads, length, head_dim]. Positions of the decoder are past_length + 0..S-1. What a layer
 * does comes from the arch (positions learned, sinusoidal or relative buckets, pre- or post-norm, LayerNorm or
 * RMSNorm, embedding norm and scale, plain or gated MLP, scaled or unscaled scores, head size), never from the
 * model type. A log-mel conv front end (a->mel_stem, Whisper) replaces the encoder's embedding step: the
 * encoder then reads input_features [batch, num_mel_bins, feature_sequence_length] (no attention_mask: the
 * features are a fixed window) and the decoders take no encoder_attention_mask, as Optimum's Whisper export.
 * An image encoder (a->vis_enc, VisionEncoderDecoder) is the image tower of model_vit.c on pixel_values
 * [batch, channels, image, image]; its decoders take no encoder_attention_mask either, and the first decoder
 * projects encoder_hidden_states by enc_to_dec_proj (when the widths differ) before the cross-attention K/V,
 * as Optimum's VisionEncoderDecoder export (the projection is part of the decoder there too).
 * A sequence classifier (a->s2s_part WM_S2S_PART_CLS) is one graph, model.onnx: the encoder and the decoder over
 * the whole shifted sequence without cache, then the eos-pooled classification head (seq_classifier below).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "builder/model_impl.h"
#include "core/error.h"
#include "onnx/dtype.h"

#define MASK_MIN (-FLT_MAX)

static const char *const part_files[WM_S2S_PARTS] = {"encoder_model.onnx", "decoder_model.onnx",
                                                      "decoder_with_past_model.onnx"};

const char *wm_s2s_part_file(int part) { return part >= 0 && part < WM_S2S_PARTS ? part_files[part] : NULL; }

static wm_io_dim dv(int64_t v) {
    wm_io_dim d = {v, ""};
    return d;
}
static wm_io_dim dn(const char *name) {
    wm_io_dim d = {-1, ""};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}
static wm_io_spec spec(const char *name, int32_t dt, size_t rank, const wm_io_dim *d) {
    wm_io_spec s = wm_float_spec(name, rank, d);
    s.dtype = dt;
    return s;
}

size_t wm_s2s_io(const wm_arch *a, int part, int outputs, wm_io_spec *out, size_t cap) {
    size_t n = 0;
    wm_io_dim B = dn("batch_size"), Se = dn("encoder_sequence_length"), Sd = dn("decoder_sequence_length");
    wm_io_dim nh = dv(a->dec_nh), hd = dv(a->dec_hd), H = dv(a->H), EH = dv(a->enc_H ? a->enc_H : a->H);
#define PUT(...) do { wm_io_spec s_ = spec(__VA_ARGS__); if (n < cap) out[n] = s_; n++; } while (0)
    if (part == WM_S2S_ENCODER && a->vis_enc) { /* the image tower: pixel_values -> last_hidden_state */
        const wm_arch *t = a->tower[1];
        wm_io_dim px[4] = {B, dv(t->C), dv(t->image), dv(t->image)}, d3[3] = {B, dv(t->n_pos), EH};
        if (!outputs) PUT("pixel_values", WM_DT_FLOAT, 4, px);
        else PUT("last_hidden_state", WM_DT_FLOAT, 3, d3);
        return n;
    }
    if (part == WM_S2S_ENCODER) {
        wm_io_dim d2[2] = {B, Se}, d3[3] = {B, Se, H};
        wm_io_dim fd[3] = {B, dv(a->n_mels), dn("feature_sequence_length")};
        if (!outputs && a->mel_stem) PUT("input_features", WM_DT_FLOAT, 3, fd);
        else if (!outputs) {
            PUT("input_ids", WM_DT_INT64, 2, d2);
            PUT("attention_mask", WM_DT_INT64, 2, d2);
        } else PUT("last_hidden_state", WM_DT_FLOAT, 3, d3);
        return n;
    }
    int past = part == WM_S2S_DECODER_PAST;
    char nm[96];
    if (!outputs) {
        wm_io_dim ids[2] = {B, Sd}, em[2] = {B, Se}, eh[3] = {B, Se, EH};
        PUT("input_ids", WM_DT_INT64, 2, ids);
        if (!a->mel_stem && !a->vis_enc) PUT("encoder_attention_mask", WM_DT_INT64, 2, em);
        if (!past) PUT("encoder_hidden_states", WM_DT_FLOAT, 3, eh);
        wm_io_dim sk[4] = {B, nh, dn("past_decoder_sequence_length"), hd}, ck[4] = {B, nh, Se, hd};
        for (int64_t i = 0; past && i < a->dec_L; i++) {
            static const char *const kv[2] = {"key", "value"};
            for (int k = 0; k < 2; k++) {
                snprintf(nm, sizeof nm, "past_key_values.%lld.decoder.%s", (long long)i, kv[k]);
                PUT(nm, WM_DT_FLOAT, 4, sk);
            }
            for (int k = 0; k < 2; k++) {
                snprintf(nm, sizeof nm, "past_key_values.%lld.encoder.%s", (long long)i, kv[k]);
                PUT(nm, WM_DT_FLOAT, 4, ck);
            }
        }
        return n;
    }
    wm_io_dim lg[3] = {B, Sd, dv(a->V)};
    wm_io_dim sk[4] = {B, nh, dn(past ? "past_decoder_sequence_length + 1" : "decoder_sequence_length"), hd};
    wm_io_dim ck[4] = {B, nh, Se, hd};
    PUT("logits", WM_DT_FLOAT, 3, lg);
    for (int64_t i = 0; i < a->dec_L; i++) {
        static const char *const kv[2] = {"key", "value"};
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "present.%lld.decoder.%s", (long long)i, kv[k]);
            PUT(nm, WM_DT_FLOAT, 4, sk);
        }
        for (int k = 0; k < 2 && !past; k++) {
            snprintf(nm, sizeof nm, "present.%lld.encoder.%s", (long long)i, kv[k]);
            PUT(nm, WM_DT_FLOAT, 4, ck);
        }
    }
#undef PUT
    return n;
}

size_t wm_s2s_part_outputs(const wm_arch *a, const wm_recipe *r, wm_io_spec *out, size_t cap) {
    size_t n = 0;
    char nm[96];
#define PUT(...) do { wm_io_spec s_ = spec(__VA_ARGS__); if (n < cap) out[n] = s_; n++; } while (0)
    if (a->s2s_part == WM_S2S_PART_CLS) { /* logits [batch, labels] */
        const wm_io_spec *in = wm_recipe_input(r, "input_ids");
        wm_io_dim d2[2] = {in ? in->dims[0] : dv(1), dv(a->labels)};
        PUT("logits", WM_DT_FLOAT, 2, d2);
        return n;
    }
    if (a->s2s_part == WM_S2S_PART_ENCODER) {
        const wm_io_spec *in = wm_recipe_input(r, a->vis_enc ? "pixel_values" : "input_ids");
        wm_io_dim B = in ? in->dims[0] : dv(1), Se = a->vis_enc ? dv(a->tower[1]->n_pos) : in ? in->dims[1] : dv(1);
        wm_io_dim d3[3] = {B, Se, dv(a->enc_H ? a->enc_H : a->H)};
        PUT(r->n_outputs ? r->outputs[0] : "last_hidden_state", WM_DT_FLOAT, 3, d3);
        return n;
    }
    const wm_io_spec *ids = wm_recipe_input(r, "decoder_input_ids"), *dm = wm_recipe_input(r, "decoder_attention_mask");
    wm_io_dim B = ids ? ids->dims[0] : dv(1), S = ids ? ids->dims[1] : dv(1), T = dm ? dm->dims[1] : dv(1);
    wm_io_dim lg[3] = {B, S, dv(a->V)}, kv[4] = {B, dv(a->dec_nh), T, dv(a->dec_hd)};
    PUT("logits", WM_DT_FLOAT, 3, lg);
    for (int64_t i = 0; i < a->dec_L; i++)
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, wm_s2s_part_kv(1, k), (long long)i);
            PUT(nm, WM_DT_FLOAT, 4, kv);
        }
#undef PUT
    return n;
}

/* Additive mask [B, 1, 1, T] from a [B, T] 0/1 mask: 0 where attended, the float32 minimum elsewhere. */
static const char *pad_bias(wm_gb *b, const char *mask) {
    static const int64_t ax12[] = {1, 2};
    const char *m = gb_unsqueeze(b, gb_cast(b, mask, WM_DT_BOOL), ax12, 2);
    return gb_op(b, "Where", 3, m, gb_f32s(b, 0.0f), gb_f32s(b, MASK_MIN));
}

/* [B, T, H] -> [B, heads, T, hd] */
static const char *split_heads(wm_gb *b, const char *x, int64_t nh, int64_t hd) {
    static const int64_t bhsd[] = {0, 2, 1, 3};
    int64_t shp[4] = {0, 0, nh, hd};
    return gb_transpose(b, gb_reshape(b, x, shp, 4), bhsd, 4);
}

/* softmax(q k^T / sqrt(hd) + bias) v for q [B, h, S, hd], k, v [B, h, T, hd] -> [B, S, h * hd], in scope sc/sdpa;
   the scores unscaled where the arch says (T5). */
static const char *sdpa(wm_gb *b, const wm_arch *a, const char *sc, const char *q, const char *k, const char *v,
                        const char *bias, int64_t nh, int64_t hd) {
    static const int64_t kt[] = {0, 1, 3, 2}, bhsd[] = {0, 2, 1, 3};
    gb_scope(b, "%s/sdpa", sc);
    const char *s = gb_op(b, "MatMul", 2, q, gb_transpose(b, k, kt, 4));
    if (a->scale_attn) s = gb_op(b, "Mul", 2, s, gb_f32s(b, (float)(1.0 / sqrt((double)hd))));
    if (bias) s = gb_op(b, "Add", 2, s, bias);
    const char *p = gb_op(b, "Softmax", 1, s);
    gb_attr_i(b, "axis", -1);
    const char *o = gb_transpose(b, gb_op(b, "MatMul", 2, p, v), bhsd, 4);
    int64_t os[3] = {0, 0, nh * hd};
    return gb_reshape(b, o, os, 3);
}

static const char *lin(wm_gb *b, const wm_arch *a, int slot, int mod, const char *x, const char *sc, const char *n) {
    char sub[224];
    snprintf(sub, sizeof sub, "%s/%s", sc, n);
    return gb_linear(b, x, wm_arch_mod(a, slot, mod), sub);
}

/* A sublayer's input: norm(x) with the slot's norm mod (pre-norm, scope sc/name), or x itself (post-norm). */
static const char *pre_norm(wm_gb *b, const wm_arch *a, int slot, int mod, const char *x, const char *sc,
                            const char *name) {
    if (a->post_norm) return x;
    char sub[224];
    snprintf(sub, sizeof sub, "%s/%s", sc, name);
    return gb_norm(b, x, wm_arch_mod(a, slot, mod), wm_arch_norm(a), sub);
}

/* A sublayer's residual: x + h (pre-norm), or norm(x + h) with the slot's norm mod (post-norm), in scope sc. */
static const char *add_norm(wm_gb *b, const wm_arch *a, int slot, int mod, const char *x, const char *h,
                            const char *sc, const char *name) {
    gb_scope(b, "%s", sc);
    const char *y = gb_op(b, "Add", 2, x, h);
    if (!a->post_norm) return y;
    char sub[224];
    snprintf(sub, sizeof sub, "%s/%s", sc, name);
    return gb_norm(b, y, wm_arch_mod(a, slot, mod), wm_arch_norm(a), sub);
}

/* The MLP sublayer: down(act(up(x))), or down(act(gate(x)) * up(x)) when gated. */
static const char *ffn(wm_gb *b, const wm_arch *a, int slot, const char *x, const char *sc) {
    const char *in = pre_norm(b, a, slot, WM_M_L_MLP_NORM, x, sc, "final_layer_norm");
    const char *h = lin(b, a, slot, a->gated ? WM_M_L_GATE : WM_M_L_UP, in, sc, a->gated ? "gate" : "fc1");
    gb_scope(b, "%s/act", sc);
    h = gb_act(b, h, a->act);
    if (a->gated) {
        const char *u = lin(b, a, slot, WM_M_L_UP, in, sc, "fc1");
        gb_scope(b, "%s/act", sc);
        h = gb_op(b, "Mul", 2, h, u);
    }
    h = lin(b, a, slot, WM_M_L_DOWN, h, sc, "fc2");
    return add_norm(b, a, slot, WM_M_L_MLP_NORM, x, h, sc, "final_layer_norm");
}

/* A pre-norm stack's final norm (G_FINAL_NORM / G_DEC_FINAL_NORM); x itself when post-norm. */
static const char *final_norm(wm_gb *b, const wm_arch *a, int dec, const char *x) {
    if (a->post_norm) return x;
    char sc[96];
    snprintf(sc, sizeof sc, "/model/%s/final_layer_norm", dec ? "decoder" : "encoder");
    return gb_norm(b, x, wm_arch_mod(a, -1, dec ? WM_M_G_DEC_FINAL_NORM : WM_M_G_FINAL_NORM), wm_arch_norm(a), sc);
}

/* The relative position bias [1, heads, S, T] of stack dec for query positions qpos [S] and key positions kpos
   [T]: rel = k - q clipped to +-rel_max_dist (every distance from there on shares the last bucket) looked up in a
   table of the 2 * rel_max_dist + 1 buckets computed here (bidirectional in the encoder, unidirectional in the
   decoder), then in the stack's [buckets, heads] weights. */
static const char *rel_bias(wm_gb *b, const wm_arch *a, int dec, const char *qpos, const char *kpos) {
    const char *st = dec ? "decoder" : "encoder";
    gb_scope(b, "/model/%s/rel_attn_bias", st);
    int64_t d[2] = {a->rel_rows, dec ? a->dec_nh : a->enc_nh}, R = a->rel_max_dist, n = 2 * R + 1;
    const char *w = gb_weight(b, ".weight", wm_arch_mod(a, -1, dec ? WM_M_G_DEC_REL_BIAS : WM_M_G_REL_BIAS)->wt, d,
                              2, 0, GB_W_MATRIX);
    int64_t *tab = malloc((size_t)n * sizeof *tab);
    if (!tab) {
        if (!b->st) b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
        return w;
    }
    for (int64_t k = 0; k < n; k++)
        tab[k] = dec ? wm_rel_bucket_causal(k - R, a->rel_buckets, R) : wm_rel_bucket(k - R, a->rel_buckets, R);
    char name[96];
    snprintf(name, sizeof name, "model.%s.rel_attn_bias.buckets", st);
    const char *buckets = gb_i64_named(b, tab, (size_t)n, name);
    free(tab);
    static const int64_t ax0[] = {0}, ax1[] = {1}, hst[] = {2, 0, 1};
    const char *rel = gb_op(b, "Sub", 2, gb_unsqueeze(b, kpos, ax0, 1), gb_unsqueeze(b, qpos, ax1, 1));
    rel = gb_op(b, "Add", 2, gb_op(b, "Clip", 3, rel, gb_i64s(b, -R), gb_i64s(b, R)), gb_i64s(b, R));
    const char *v = gb_op(b, "Gather", 2, w, gb_op(b, "Gather", 2, buckets, rel)); /* [S, T, heads] */
    return gb_unsqueeze(b, gb_transpose(b, v, hst, 3), ax0, 1);
}

/* Marian's table: position p, feature j < H/2: sin(p / 10000^(2j/H)), j >= H/2: cos of the same angle for
   j - H/2 (computed in double, stored float32, as transformers builds it with numpy). */
static float *sinusoid_table(int64_t P, int64_t H) {
    float *t = malloc((size_t)P * (size_t)H * sizeof *t);
    if (!t) return NULL;
    int64_t half = (H + 1) / 2;
    for (int64_t p = 0; p < P; p++)
        for (int64_t j = 0; j < H; j++) {
            int64_t col = j < half ? 2 * j : 2 * (j - half) + 1; /* the numpy column: even for sin, odd for cos */
            double ang = (double)p / pow(10000.0, 2.0 * (double)(col / 2) / (double)H);
            t[p * H + j] = (float)(j < half ? sin(ang) : cos(ang));
        }
    return t;
}

/* Token embeddings (scaled) + positions past..past+S-1 (+ the embedding norm) of stack st ("encoder"/"decoder");
   reuse: the shared table is already in the graph (the encoder's, in one graph with the decoder). */
static const char *embed(wm_gb *b, const wm_arch *a, const char *ids, const char *past, int dec, int reuse,
                         const char **E) {
    const char *st = dec ? "decoder" : "encoder";
    gb_scope(b, "/model/shared");
    int64_t ed[2] = {a->V, a->H};
    *E = reuse ? gb_weight_existing(b, ".weight")
               : gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_EMBED)->wt, ed, 2, 0, GB_W_MATRIX);
    gb_scope(b, "/model/%s/embed_tokens", st);
    const char *x = gb_op(b, "Gather", 2, *E, ids);
    if (a->embed_scale != 1.0) x = gb_op(b, "Mul", 2, x, gb_f32s(b, (float)a->embed_scale));
    if (!a->abs_pos) return x; /* relative positions only (T5): no position table, no embedding norm */
    gb_scope(b, "/model/%s/embed_positions", st);
    const char *pw;
    int64_t rows = a->P + a->pos_offset, pd[2] = {rows, a->H};
    if (a->pos_sinusoidal) {
        float *t = sinusoid_table(a->P, a->H);
        if (!t) {
            if (!b->st) b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
            return x;
        }
        pw = gb_weight_vals(b, ".weight", t, pd, 2);
        free(t);
    } else {
        pw = gb_weight(b, ".weight", wm_arch_mod(a, -1, dec ? WM_M_G_DEC_POS : WM_M_G_POS)->wt, pd, 2, 0,
                       GB_W_MATRIX);
    }
    gb_scope(b, "/model/%s/embed_positions", st);
    const char *s1 = gb_op(b, "Shape", 1, ids);
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    const char *S = gb_squeeze(b, s1, NULL, 0);
    const char *start = past ? past : gb_i64s(b, 0);
    const char *pos = gb_op(b, "Range", 3, start, gb_op(b, "Add", 2, start, S), gb_i64s(b, 1));
    if (a->pos_offset) pos = gb_op(b, "Add", 2, pos, gb_i64s(b, a->pos_offset));
    x = gb_op(b, "Add", 2, x, gb_op(b, "Gather", 2, pw, pos));
    if (a->emb_norm) {
        char sc[96];
        snprintf(sc, sizeof sc, "/model/%s/layernorm_embedding", st);
        x = gb_norm(b, x, wm_arch_mod(a, -1, dec ? WM_M_G_DEC_EMB_NORM : WM_M_G_EMB_NORM), wm_arch_norm(a), sc);
    }
    return x;
}

/* conv i (0: conv1 k3 p1, 1: conv2 k3 s2 p1) + exact GELU of the mel stem on x [B, C, T]. */
static const char *stem_conv(wm_gb *b, const wm_model_ctx *c, int i, const char *x) {
    const wm_arch *a = c->a;
    gb_scope(b, "/model/encoder/conv%d", i + 1);
    int64_t wd[3] = {a->H, i ? a->H : a->n_mels, 3}, k = 3, st = i ? 2 : 1, pads[2] = {1, 1};
    const wm_st_tensor *wt = c->st ? arch_st_find(c->st, wm_s2s_mel_stem_tensor(2 * i)) : NULL;
    const wm_st_tensor *bt = c->st ? arch_st_find(c->st, wm_s2s_mel_stem_tensor(2 * i + 1)) : NULL;
    const char *w = gb_weight(b, ".weight", wt, wd, 3, 0, GB_W_MATRIX);
    const char *bias = gb_weight(b, ".bias", bt, wd, 1, 0, GB_W_ZEROS);
    const char *y = gb_op(b, "Conv", 3, x, w, bias);
    gb_attr_ints(b, "kernel_shape", &k, 1);
    gb_attr_ints(b, "strides", &st, 1);
    gb_attr_ints(b, "pads", pads, 2);
    return gb_act(b, y, WM_ACT_GELU); /* the stem's GELU is exact whatever activation_function says */
}

/* The mel stem: two convs, [B, H, T] -> [B, T, H], + the stored positions 0..T-1. */
static const char *mel_stem(wm_gb *b, const wm_model_ctx *c) {
    const wm_arch *a = c->a;
    static const int64_t bth[] = {0, 2, 1};
    const char *x = stem_conv(b, c, 1, stem_conv(b, c, 0, "input_features"));
    gb_scope(b, "/model/encoder/embed_positions");
    x = gb_transpose(b, x, bth, 3);
    int64_t pd[2] = {a->enc_P, a->H};
    const char *pw = gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_POS)->wt, pd, 2, 0, GB_W_MATRIX);
    const char *s1 = gb_op(b, "Shape", 1, x);
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    const char *pos = gb_op(b, "Range", 3, gb_i64s(b, 0), gb_squeeze(b, s1, NULL, 0), gb_i64s(b, 1));
    return gb_op(b, "Add", 2, x, gb_op(b, "Gather", 2, pw, pos));
}

static wm_status encoder(wm_gb *b, const wm_model_ctx *c) {
    const wm_arch *a = c->a;
    if (a->vis_enc) { /* the image tower's last_hidden_state (model_vit.c) */
        wm_model_ctx vc = *c;
        vc.a = a->tower[1];
        vc.root = "/encoder";
        return wm_model_vision(b, &vc);
    }
    const char *E, *x, *bias = NULL;
    if (a->mel_stem) x = mel_stem(b, c);
    else {
        x = embed(b, a, "input_ids", NULL, 0, 0, &E);
        gb_scope(b, "/model/encoder/attn_mask");
        bias = pad_bias(b, "attention_mask");
    }
    if (a->rel_buckets) { /* one bias for every layer: positions + padding */
        gb_scope(b, "/model/encoder/rel_attn_bias");
        const char *s1 = gb_op(b, "Shape", 1, "input_ids");
        gb_attr_i(b, "start", 1);
        gb_attr_i(b, "end", 2);
        const char *pos = gb_op(b, "Range", 3, gb_i64s(b, 0), gb_squeeze(b, s1, NULL, 0), gb_i64s(b, 1));
        const char *rb = rel_bias(b, a, 0, pos, pos);
        gb_scope(b, "/model/encoder/attn_mask");
        bias = bias ? gb_op(b, "Add", 2, bias, rb) : rb;
    }
    int64_t nh = a->enc_nh, hd = a->hd;
    for (int64_t i = 0; i < a->enc_L && !b->st; i++) {
        char sc[96], at[128];
        snprintf(sc, sizeof sc, "/model/encoder/layers.%lld", (long long)i);
        snprintf(at, sizeof at, "%s/self_attn", sc);
        int slot = (int)i;
        const char *h = pre_norm(b, a, slot, WM_M_L_ATTN_NORM, x, sc, "self_attn_layer_norm");
        const char *q = split_heads(b, lin(b, a, slot, WM_M_L_Q, h, at, "q_proj"), nh, hd);
        const char *k = split_heads(b, lin(b, a, slot, WM_M_L_K, h, at, "k_proj"), nh, hd);
        const char *v = split_heads(b, lin(b, a, slot, WM_M_L_V, h, at, "v_proj"), nh, hd);
        const char *o = lin(b, a, slot, WM_M_L_O, sdpa(b, a, at, q, k, v, bias, nh, hd), at, "out_proj");
        x = add_norm(b, a, slot, WM_M_L_ATTN_NORM, x, o, sc, "self_attn_layer_norm");
        x = ffn(b, a, slot, x, sc);
    }
    x = final_norm(b, a, 0, x);
    gb_scope(b, "/model/encoder");
    gb_op_named(b, "Identity", "last_hidden_state", 1, x);
    return b->st;
}

/* What one decoder graph reads and writes: Optimum's first step, its step with the caches, the reference's part
   recipe over a static self-attention cache, or the whole sequence inside the classifier's graph (no cache). */
enum { DEC_FIRST, DEC_PAST, DEC_STATIC, DEC_WHOLE };

static const char *const part_kv[2][2] = {{"past_%lld_key", "past_%lld_value"},
                                          {"present_%lld_key", "present_%lld_value"}};

const char *wm_s2s_part_kv(int present, int value) { return part_kv[present != 0][value != 0]; }

/* The static decoder's query positions (cache_position, as a scalar int64) and the attention bias [B, 1, S, T] over
   the T cache slots: slot t is seen from position p when t <= p and decoder_attention_mask[t] is 1. *wr: the slot
   the step writes, [1, 1, T, 1] bool (slot == cache_position). */
static const char *static_mask(wm_gb *b, const wm_model_ctx *c, const char **pos, const char **qpos,
                               const char **slots, const char **wr) {
    const wm_io_spec *dm = wm_recipe_input(c->r, "decoder_attention_mask");
    const wm_io_spec *cp = wm_recipe_input(c->r, "cache_position");
    int64_t T = dm ? dm->dims[1].v : 1;
    gb_scope(b, "/model/decoder/cache_position");
    const char *p = "cache_position";
    if (cp && cp->dtype != WM_DT_INT64) p = gb_cast(b, p, WM_DT_INT64);
    *pos = gb_squeeze(b, p, NULL, 0);
    gb_scope(b, "/model/decoder/attn_mask");
    const char *one = gb_i64s(b, 1);
    *slots = gb_op(b, "Range", 3, gb_i64s(b, 0), gb_i64s(b, T), one);
    const char *s1 = gb_op(b, "Shape", 1, "decoder_input_ids");
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    *qpos = gb_op(b, "Range", 3, *pos, gb_op(b, "Add", 2, *pos, gb_squeeze(b, s1, NULL, 0)), one);
    static const int64_t ax1[] = {1}, ax12[] = {1, 2}, col[] = {1, 1, -1, 1};
    const char *causal = gb_op(b, "LessOrEqual", 2, *slots, gb_unsqueeze(b, *qpos, ax1, 1)); /* [S, T] */
    const char *dmask = gb_unsqueeze(b, gb_cast(b, "decoder_attention_mask", WM_DT_BOOL), ax12, 2);
    *wr = gb_reshape(b, gb_op(b, "Equal", 2, *slots, *pos), col, 4);
    return gb_op(b, "Where", 3, gb_op(b, "And", 2, causal, dmask), gb_f32s(b, 0.0f), gb_f32s(b, MASK_MIN));
}

/* A decoder graph (mode DEC_*). DEC_STATIC: decoder_input_ids [B, 1] at cache_position; the step's self-attention
   K/V are written into slot cache_position of past_N_key/value [B, heads, T, hd] by a masked blend (Where over the
   slot == cache_position mask: what StaticCache's index_copy_ does for one token), the result is present_N_* and
   the attention reads all T slots under static_mask's bias; the cross-attention K/V are computed from
   encoder_hidden_states in the graph every step (the part has no cross cache), under the encoder's attention_mask
   when the recipe gives one. DEC_WHOLE: the tensors named by *whole (the decoder's ids, the encoder's output and
   its 0/1 mask) in, causal self-attention without cache outputs, and the last hidden state back in whole->out
   (no lm_head). */
typedef struct dec_whole {
    const char *ids, *ehs, *mask, *out;
} dec_whole;

static wm_status decoder(wm_gb *b, const wm_model_ctx *c, int mode, dec_whole *whole) {
    const wm_arch *a = c->a;
    int64_t nh = a->dec_nh, hd = a->dec_hd;
    int past = mode == DEC_PAST, stat = mode == DEC_STATIC, wh = mode == DEC_WHOLE;
    const char *plen = NULL, *ids = wh ? whole->ids : stat ? "decoder_input_ids" : "input_ids", *causal = NULL;
    const char *qpos = NULL, *kpos = NULL, *wr = NULL;
    if (past) {
        gb_scope(b, "/model/decoder/past_length");
        const char *s = gb_op(b, "Shape", 1, "past_key_values.0.decoder.key");
        gb_attr_i(b, "start", 2);
        gb_attr_i(b, "end", 3);
        plen = gb_squeeze(b, s, NULL, 0);
    }
    if (stat) causal = static_mask(b, c, &plen, &qpos, &kpos, &wr);
    const char *E;
    const char *x = embed(b, a, ids, plen, 1, wh, &E);
    gb_scope(b, "/model/decoder/attn_mask");
    if (!stat) { /* causal over absolute positions: query past + i sees keys 0..past + i */
        const char *s1 = gb_op(b, "Shape", 1, ids);
        gb_attr_i(b, "start", 1);
        gb_attr_i(b, "end", 2);
        const char *S = gb_squeeze(b, s1, NULL, 0), *P0 = plen ? plen : gb_i64s(b, 0);
        const char *T = gb_op(b, "Add", 2, P0, S), *one = gb_i64s(b, 1);
        static const int64_t ax1[] = {1};
        kpos = gb_op(b, "Range", 3, gb_i64s(b, 0), T, one);
        qpos = gb_op(b, "Range", 3, P0, T, one);
        const char *qcol = gb_unsqueeze(b, qpos, ax1, 1);
        causal = gb_op(b, "Where", 3, gb_op(b, "LessOrEqual", 2, kpos, qcol), gb_f32s(b, 0.0f), gb_f32s(b, MASK_MIN));
    }
    if (a->rel_buckets) { /* the rows of this step's positions (past + i) of the decoder's position bias */
        const char *rb = rel_bias(b, a, 1, qpos, kpos);
        gb_scope(b, "/model/decoder/attn_mask");
        causal = gb_op(b, "Add", 2, causal, rb);
    }
    const char *xbias = NULL, *ehs = wh ? whole->ehs : "encoder_hidden_states";
    if (wh || (stat ? wm_recipe_input(c->r, "attention_mask") != NULL : !a->mel_stem && !a->vis_enc)) {
        gb_scope(b, "/model/decoder/encoder_attn_mask");
        xbias = pad_bias(b, wh ? whole->mask : stat ? "attention_mask" : "encoder_attention_mask");
    }
    if (!past && wm_arch_mod(a, -1, WM_M_G_PROJ)->present) /* a composite's enc_to_dec_proj */
        ehs = gb_linear(b, ehs, wm_arch_mod(a, -1, WM_M_G_PROJ), "/enc_to_dec_proj");
    for (int64_t i = 0; i < a->dec_L && !b->st; i++) {
        char sc[96], at[128], nm[96], pk[96], xpast[2][96];
        int slot = (int)(a->enc_L + i);
        snprintf(sc, sizeof sc, "/model/decoder/layers.%lld", (long long)i);
        snprintf(at, sizeof at, "%s/self_attn", sc);
        const char *h = pre_norm(b, a, slot, WM_M_L_ATTN_NORM, x, sc, "self_attn_layer_norm");
        const char *q = split_heads(b, lin(b, a, slot, WM_M_L_Q, h, at, "q_proj"), nh, hd);
        const char *k = split_heads(b, lin(b, a, slot, WM_M_L_K, h, at, "k_proj"), nh, hd);
        const char *v = split_heads(b, lin(b, a, slot, WM_M_L_V, h, at, "v_proj"), nh, hd);
        static const char *const kvn[2] = {"key", "value"};
        const char *kv[2] = {k, v};
        for (int j = 0; j < 2 && !wh; j++) { /* the self-attention cache outputs */
            if (stat) snprintf(nm, sizeof nm, part_kv[1][j], (long long)i);
            else snprintf(nm, sizeof nm, "present.%lld.decoder.%s", (long long)i, kvn[j]);
            gb_scope(b, "%s/%s_cache", at, kvn[j]);
            if (stat) { /* the step's K/V in slot cache_position, the other slots as they were */
                snprintf(pk, sizeof pk, part_kv[0][j], (long long)i);
                kv[j] = gb_op_named(b, "Where", nm, 3, wr, kv[j], pk);
            } else if (past) {
                snprintf(pk, sizeof pk, "past_key_values.%lld.decoder.%s", (long long)i, kvn[j]);
                kv[j] = gb_op_named(b, "Concat", nm, 2, pk, kv[j]);
                gb_attr_i(b, "axis", 2);
            } else kv[j] = gb_op_named(b, "Identity", nm, 1, kv[j]);
        }
        const char *o = lin(b, a, slot, WM_M_L_O, sdpa(b, a, at, q, kv[0], kv[1], causal, nh, hd), at, "out_proj");
        x = add_norm(b, a, slot, WM_M_L_ATTN_NORM, x, o, sc, "self_attn_layer_norm");
        /* cross-attention: K/V of the encoder output, computed in the first step and passed back after (Optimum's
           layout) or computed every step (the static part) */
        snprintf(at, sizeof at, "%s/encoder_attn", sc);
        h = pre_norm(b, a, slot, WM_M_L_XATTN_NORM, x, sc, "encoder_attn_layer_norm");
        q = split_heads(b, lin(b, a, slot, WM_M_L_XQ, h, at, "q_proj"), nh, hd);
        static const int xm[2] = {WM_M_L_XK, WM_M_L_XV};
        static const char *const xproj[2] = {"k_proj", "v_proj"};
        for (int j = 0; j < 2; j++) {
            if (past) { /* the graph inputs themselves */
                snprintf(xpast[j], sizeof xpast[j], "past_key_values.%lld.encoder.%s", (long long)i, kvn[j]);
                kv[j] = xpast[j];
            } else {
                const char *t = split_heads(b, lin(b, a, slot, xm[j], ehs, at, xproj[j]), nh, hd);
                if (stat || wh) {
                    kv[j] = t;
                    continue;
                }
                snprintf(nm, sizeof nm, "present.%lld.encoder.%s", (long long)i, kvn[j]);
                gb_scope(b, "%s/%s_cache", at, kvn[j]);
                kv[j] = gb_op_named(b, "Identity", nm, 1, t);
            }
        }
        o = lin(b, a, slot, WM_M_L_XO, sdpa(b, a, at, q, kv[0], kv[1], xbias, nh, hd), at, "out_proj");
        x = add_norm(b, a, slot, WM_M_L_XATTN_NORM, x, o, sc, "encoder_attn_layer_norm");
        x = ffn(b, a, slot, x, sc);
    }
    x = final_norm(b, a, 1, x);
    if (wh) {
        whole->out = x;
        return b->st;
    }
    /* logits = (x logits_mul) shared^T (or lm_head) + final_logits_bias */
    gb_scope(b, "/lm_head");
    if (a->logits_mul != 1.0) x = gb_op(b, "Mul", 2, x, gb_f32s(b, (float)a->logits_mul));
    const char *w = E, *bias = NULL;
    if (!a->tied) {
        int64_t d[2] = {a->V, a->H};
        w = gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_LM_HEAD)->wt, d, 2, 0, GB_W_MATRIX);
    }
    if (a->logits_bias) bias = gb_weight(b, ".final_logits_bias", wm_arch_mod(a, -1, WM_M_H_BIAS)->wt, &a->V, 1, 0,
                                         GB_W_ZEROS);
    int64_t flat[2] = {-1, a->H};
    const char *y = gb_op(b, "Gemm", bias ? 3 : 2, gb_reshape(b, x, flat, 2), w, bias);
    gb_attr_i(b, "transB", 1);
    const char *bs = gb_op(b, "Shape", 1, x);
    gb_attr_i(b, "end", 2);
    const char *shape = gb_op(b, "Concat", 2, bs, gb_i64_1(b, a->V));
    gb_attr_i(b, "axis", 0);
    gb_op_named(b, "Reshape", "logits", 2, y, shape);
    return b->st;
}

/* The sequence classifier (WM_S2S_PART_CLS): the encoder over input_ids / attention_mask; the decoder over the same
   ids shifted right one place behind decoder_start_token_id (shift_tokens_right; no decoder padding mask, as
   transformers passes none); its state at the last position of each row whose token is eos_token_id (ArgMax with
   select_last_index over the row's eos flags: a row without one reads its last position, where transformers
   refuses; rows with different eos counts each read their own last, where transformers refuses too) -> the
   classification head (H_0 + tanh, H_1) -> logits [batch, labels]. */
static wm_status seq_classifier(wm_gb *b, const wm_model_ctx *c) {
    const wm_arch *a = c->a;
    wm_status s = encoder(b, c);
    if (s) return s;
    gb_scope(b, "/model/decoder/shift_tokens_right");
    const char *ids = c->ids_dtype == WM_DT_INT64 ? "input_ids" : gb_cast(b, "input_ids", WM_DT_INT64);
    const char *s1 = gb_op(b, "Shape", 1, ids);
    gb_attr_i(b, "start", 0);
    gb_attr_i(b, "end", 1);
    const char *col = gb_op(b, "Concat", 2, s1, gb_i64_1(b, 1)); /* [B, 1] */
    gb_attr_i(b, "axis", 0);
    const char *first = gb_op(b, "Expand", 2, gb_i64_1(b, a->dec_start), col);
    const char *dids = gb_op(b, "Concat", 2, first, gb_slice(b, ids, 0, -1, 1));
    gb_attr_i(b, "axis", 1);
    dec_whole w = {dids, "last_hidden_state", "attention_mask", NULL};
    if ((s = decoder(b, c, DEC_WHOLE, &w))) return s;
    gb_scope(b, "/eos_pool");
    const char *eos = gb_cast(b, gb_op(b, "Equal", 2, ids, gb_i64s(b, a->eos_id)), WM_DT_INT32);
    const char *last = gb_op(b, "ArgMax", 1, eos); /* [B, 1] */
    gb_attr_i(b, "axis", 1);
    gb_attr_i(b, "keepdims", 0);
    gb_attr_i(b, "select_last_index", 1);
    const char *sh = gb_op(b, "Shape", 1, ids);
    const char *B = gb_squeeze(b, gb_slice(b, sh, 0, 1, 0), NULL, 0), *S = gb_squeeze(b, gb_slice(b, sh, 1, 2, 0), NULL, 0);
    const char *rows = gb_op(b, "Mul", 2, gb_op(b, "Range", 3, gb_i64s(b, 0), B, gb_i64s(b, 1)), S);
    int64_t flat[2] = {-1, a->H};
    const char *h = gb_op(b, "Gather", 2, gb_reshape(b, w.out, flat, 2), gb_op(b, "Add", 2, rows, last)); /* [B, H] */
    const wm_module *m0 = wm_arch_mod(a, -1, WM_M_H_0), *m1 = wm_arch_mod(a, -1, WM_M_H_1);
    h = gb_head_gemm(b, h, m0, "/classification_head/dense");
    gb_scope(b, "/classification_head/dense");
    h = gb_act(b, h, WM_ACT_TANH);
    gb_rename(b, gb_head_gemm(b, h, m1, "/classification_head/out_proj"), "logits");
    return b->st;
}

wm_status wm_model_s2s(wm_gb *b, wm_model_ctx *c, int part) {
    if (part == WM_S2S_PART_ENCODER) { /* the encoder, its output under the recipe's name */
        wm_status s = encoder(b, c);
        const char *out = c->r->n_outputs ? c->r->outputs[0] : "last_hidden_state";
        if (!s && strcmp(out, "last_hidden_state")) {
            gb_scope(b, "/model/encoder");
            gb_op_named(b, "Identity", out, 1, "last_hidden_state");
        }
        return s ? s : b->st;
    }
    if (part == WM_S2S_PART_CLS) return seq_classifier(b, c);
    return part == WM_S2S_ENCODER ? encoder(b, c)
           : decoder(b, c, part == WM_S2S_PART_DECODER ? DEC_STATIC : part == WM_S2S_DECODER_PAST ? DEC_PAST : DEC_FIRST,
                     NULL);
}
