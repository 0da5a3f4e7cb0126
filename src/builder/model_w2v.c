/*
 * model_w2v.c - wav2vec2-style speech encoders (WM_GRAPH_AUDIO) as
 * transformers computes them: input_values [B, samples] through the
 * convolutional feature encoder (Conv1d + GroupNorm on the first conv as
 * InstanceNormalization, or LayerNorm over channels on every conv, then
 * the activation), the feature projection (LayerNorm + Linear), padded
 * frames zeroed, the positional convolution (grouped Conv1d whose weight
 * norm is folded at export, SamePad, activation) added, then post-norm
 * (encoder.layer_norm first) or pre-norm (encoder.layer_norm last) layers
 * and the head: CTC logits per frame, or projector + mean over the valid
 * frames + classifier.
 *
 * With an attention_mask input (the "layer" variant, as the feature
 * extractor's return_attention_mask) the valid frames are those below
 * the conv output length of the mask's sum (floor((L - k) / s) + 1 per
 * conv, in int64).
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

static const char *w_root(const wm_model_ctx *c) { return c->root ? c->root : "/model"; }

/* Conv layer i of the feature encoder on x [B, C, T]. */
static const char *conv_layer(wm_gb *b, const wm_model_ctx *c, int64_t i, const char *x) {
    const wm_arch *a = c->a;
    char name[256];
    gb_scope(b, "%s/feature_extractor/conv_layers.%lld/conv", w_root(c), (long long)i);
    int64_t wd[3] = {a->conv_dim[i], i ? a->conv_dim[i - 1] : 1, a->conv_kernel[i]};
    snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.%lld.conv.weight", a->prefix, (long long)i);
    const char *w = gb_weight(b, ".weight", c->st ? arch_st_find(c->st, name) : NULL, wd, 3, 0, GB_W_MATRIX);
    const char *bias = NULL;
    if (a->conv_bias) {
        snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.%lld.conv.bias", a->prefix, (long long)i);
        bias = gb_weight(b, ".bias", c->st ? arch_st_find(c->st, name) : NULL, wd, 1, 0, GB_W_ZEROS);
    }
    const char *y = gb_op(b, "Conv", bias ? 3 : 2, x, w, bias);
    gb_attr_ints(b, "kernel_shape", &a->conv_kernel[i], 1);
    gb_attr_ints(b, "strides", &a->conv_stride[i], 1);
    if (a->feat_layer_norm || i == 0) {
        gb_scope(b, "%s/feature_extractor/conv_layers.%lld/layer_norm", w_root(c), (long long)i);
        const wm_st_tensor *t[2] = {NULL, NULL};
        for (int p = 0; p < 2 && c->st; p++) {
            snprintf(name, sizeof name, "%sfeature_extractor.conv_layers.%lld.layer_norm.%s", a->prefix, (long long)i,
                     p ? "bias" : "weight");
            t[p] = arch_st_find(c->st, name);
        }
        const char *g = gb_weight(b, ".weight", t[0], wd, 1, 0, GB_W_ONES);
        const char *beta = gb_weight(b, ".bias", t[1], wd, 1, 0, GB_W_ZEROS);
        if (a->feat_layer_norm) { /* nn.LayerNorm over the channels: [B, T, C] and back */
            static const int64_t perm[] = {0, 2, 1};
            y = gb_op(b, "LayerNormalization", 3, gb_transpose(b, y, perm, 3), g, beta);
            gb_attr_i(b, "axis", -1);
            gb_attr_f(b, "epsilon", 1e-5f);
            y = gb_transpose(b, y, perm, 3);
        } else { /* nn.GroupNorm(out, out): each channel normalized over time = InstanceNormalization */
            y = gb_op(b, "InstanceNormalization", 3, y, g, beta);
            gb_attr_f(b, "epsilon", 1e-5f);
        }
    }
    gb_scope(b, "%s/feature_extractor/conv_layers.%lld/act", w_root(c), (long long)i);
    return gb_act(b, y, a->feat_act);
}

/* The positional convolution's weight [H, H / groups, k]: g * v / ||v|| per kernel tap (weight norm over dim 2),
   from the checkpoint's (g, v) or its plain weight; random values without weights. */
static const char *pos_weight(wm_gb *b, const wm_model_ctx *c) {
    const wm_arch *a = c->a;
    int64_t wd[3] = {a->H, a->H / a->pos_groups, a->pos_k};
    if (!c->st) return gb_weight(b, ".weight", NULL, wd, 3, 0, GB_W_MATRIX);
    static const char *const gname[2] = {"encoder.pos_conv_embed.conv.parametrizations.weight.original0",
                                         "encoder.pos_conv_embed.conv.weight_g"};
    static const char *const vname[3] = {"encoder.pos_conv_embed.conv.parametrizations.weight.original1",
                                         "encoder.pos_conv_embed.conv.weight_v", "encoder.pos_conv_embed.conv.weight"};
    char name[256];
    snprintf(name, sizeof name, "%s%s", a->prefix, vname[a->pos_wn]);
    const wm_st_tensor *vt = arch_st_find(c->st, name);
    if (a->pos_wn == 2) return gb_weight(b, ".weight", vt, wd, 3, 0, GB_W_MATRIX);
    snprintf(name, sizeof name, "%s%s", a->prefix, gname[a->pos_wn]);
    const wm_st_tensor *gt = arch_st_find(c->st, name);
    size_t n = (size_t)(wd[0] * wd[1] * wd[2]), k = (size_t)a->pos_k;
    float *v = malloc(n * sizeof *v), *g = malloc(k * sizeof *g);
    double *ss = calloc(k, sizeof *ss);
    const char *w = "<error>";
    if (v && g && ss && vt && gt) {
        wm_st_read_f32(vt, v);
        wm_st_read_f32(gt, g);
        for (size_t i = 0; i < n; i++) ss[i % k] += (double)v[i] * v[i];
        for (size_t i = 0; i < n; i++) v[i] = (float)((double)g[i % k] * v[i] / sqrt(ss[i % k]));
        w = gb_weight_vals(b, ".weight", v, wd, 3);
    } else if (!b->st) {
        b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
    }
    free(v);
    free(g);
    free(ss);
    return w;
}

static const char *pos_conv(wm_gb *b, const wm_model_ctx *c, const char *x) {
    const wm_arch *a = c->a;
    static const int64_t perm[] = {0, 2, 1};
    gb_scope(b, "%s/encoder/pos_conv_embed/conv", w_root(c));
    const char *xt = gb_transpose(b, x, perm, 3);
    const char *w = pos_weight(b, c);
    char name[256];
    snprintf(name, sizeof name, "%sencoder.pos_conv_embed.conv.bias", a->prefix);
    const char *bias = gb_weight(b, ".bias", c->st ? arch_st_find(c->st, name) : NULL, &a->H, 1, 0, GB_W_ZEROS);
    const char *y = gb_op(b, "Conv", 3, xt, w, bias);
    int64_t p = a->pos_k / 2, pads[2] = {p, p};
    gb_attr_ints(b, "kernel_shape", &a->pos_k, 1);
    gb_attr_ints(b, "pads", pads, 2);
    gb_attr_i(b, "group", a->pos_groups);
    if (a->pos_k % 2 == 0) { /* SamePad: an even kernel gives one frame too many */
        gb_scope(b, "%s/encoder/pos_conv_embed/padding", w_root(c));
        y = gb_slice(b, y, 0, -1, 2);
    }
    gb_scope(b, "%s/encoder/pos_conv_embed/act", w_root(c));
    y = gb_transpose(b, gb_act(b, y, a->feat_act), perm, 3);
    gb_scope(b, "%s/encoder/pos_conv_embed", w_root(c));
    return gb_op(b, "Add", 2, x, y);
}

/* valid frames [B, T] (bool) of the feature sequence x [B, T, H] from the attention_mask over the samples: frame t
   is valid below the conv output length of the mask's sum, floor((L - k) / s) + 1 per conv in int64 as torch's
   floor division (exact: (d - Mod(d, s)) / s, Mod taking the divisor's sign). */
static const char *frame_mask(wm_gb *b, const wm_model_ctx *c, const char *x) {
    const wm_arch *a = c->a;
    static const int64_t ax1[] = {1}, ax0[] = {0};
    gb_scope(b, "%s/frame_mask", w_root(c));
    const char *len = gb_reduce(b, "ReduceSum", gb_cast(b, "attention_mask", WM_DT_INT64), ax1, 1, 0); /* [B] */
    for (int64_t i = 0; i < a->n_conv; i++) {
        const char *d = gb_op(b, "Sub", 2, len, gb_int_as(b, a->conv_kernel[i], WM_DT_INT64));
        const char *s = gb_int_as(b, a->conv_stride[i], WM_DT_INT64);
        d = gb_op(b, "Div", 2, gb_op(b, "Sub", 2, d, gb_op(b, "Mod", 2, d, s)), s);
        len = gb_op(b, "Add", 2, d, gb_int_as(b, 1, WM_DT_INT64));
    }
    const char *T = gb_squeeze(b, gb_slice(b, gb_op(b, "Shape", 1, x), 1, 2, 0), NULL, 0);
    const char *r = gb_op(b, "Range", 3, gb_i64s(b, 0), T, gb_i64s(b, 1));
    return gb_op(b, "Less", 2, gb_unsqueeze(b, r, ax0, 1), gb_unsqueeze(b, len, ax1, 1));
}

static const char *norm(wm_gb *b, const wm_model_ctx *c, const char *x, int layer, int m, const char *name) {
    char sc[160];
    if (layer >= 0) snprintf(sc, sizeof sc, "%s/layers.%d/%s", w_root(c), layer, name);
    else snprintf(sc, sizeof sc, "%s/%s", w_root(c), name);
    return gb_norm(b, x, wm_arch_mod(c->a, layer, m), wm_arch_norm(c->a), sc);
}

static const char *layers(wm_gb *b, wm_model_ctx *c, const char *x) {
    const wm_arch *a = c->a;
    for (int64_t i = 0; i < a->L && !b->st; i++) {
        int l = (int)i;
        if (c->progress) fprintf(stderr, "\r  export: layer %lld/%lld", (long long)i + 1, (long long)a->L);
        if (a->stable) {
            const char *h = wm_model_attention(b, c, l, norm(b, c, x, l, WM_M_L_ATTN_NORM, "attn_norm"));
            gb_scope(b, "%s/layers.%d", w_root(c), l);
            x = gb_op(b, "Add", 2, x, h);
            h = wm_model_mlp(b, c, l, norm(b, c, x, l, WM_M_L_MLP_NORM, "mlp_norm"));
            gb_scope(b, "%s/layers.%d", w_root(c), l);
            x = gb_op(b, "Add", 2, x, h);
        } else {
            const char *h = wm_model_attention(b, c, l, x);
            gb_scope(b, "%s/layers.%d", w_root(c), l);
            x = norm(b, c, gb_op(b, "Add", 2, x, h), l, WM_M_L_ATTN_NORM, "attn_norm");
            h = wm_model_mlp(b, c, l, x);
            gb_scope(b, "%s/layers.%d", w_root(c), l);
            x = norm(b, c, gb_op(b, "Add", 2, x, h), l, WM_M_L_MLP_NORM, "mlp_norm");
        }
    }
    if (c->progress) fprintf(stderr, "\n");
    return x;
}

wm_status wm_model_audio(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    static const int64_t ax1[] = {1}, last[] = {-1}, perm[] = {0, 2, 1};
    int masked = wm_recipe_input(c->r, "attention_mask") != NULL;
    gb_scope(b, "%s/feature_extractor", w_root(c));
    const char *x = gb_unsqueeze(b, "input_values", ax1, 1); /* [B, 1, samples] */
    for (int64_t i = 0; i < a->n_conv && !b->st; i++) x = conv_layer(b, c, i, x);
    gb_scope(b, "%s/feature_extractor", w_root(c));
    x = gb_transpose(b, x, perm, 3); /* [B, T, C] */
    if (a->feat_proj_norm) x = norm(b, c, x, -1, WM_M_G_EMB_NORM, "feature_projection/layer_norm");
    char sc[160];
    snprintf(sc, sizeof sc, "%s/feature_projection/projection", w_root(c));
    x = gb_linear(b, x, wm_arch_mod(a, -1, WM_M_G_EMB_PROJ), sc);
    const char *valid = NULL, *validf = NULL;
    if (masked) { /* padded frames zeroed, and masked as keys */
        valid = frame_mask(b, c, x);
        validf = gb_unsqueeze(b, gb_cast(b, valid, WM_DT_FLOAT), last, 1); /* [B, T, 1] */
        x = gb_op(b, "Mul", 2, x, validf);
        static const int64_t ax12[] = {1, 2};
        gb_scope(b, "%s/attn_mask", w_root(c));
        c->bias_full = gb_op(b, "Where", 3, gb_unsqueeze(b, valid, ax12, 2), gb_f32s(b, 0.0f), gb_f32s(b, -FLT_MAX));
    }
    x = pos_conv(b, c, x);
    if (!a->stable) x = norm(b, c, x, -1, WM_M_G_FINAL_NORM, "encoder/layer_norm");
    x = layers(b, c, x);
    if (a->stable) x = norm(b, c, x, -1, WM_M_G_FINAL_NORM, "encoder/layer_norm");
    if (a->task == WM_TASK_ASR) {
        gb_rename(b, gb_linear(b, x, wm_arch_mod(a, -1, WM_M_H_0), "/lm_head"), "logits");
        return b->st;
    }
    const char *h = gb_linear(b, x, wm_arch_mod(a, -1, WM_M_H_0), "/projector");
    gb_scope(b, "/pooling");
    const char *pooled;
    if (validf) {
        const char *sum = gb_reduce(b, "ReduceSum", gb_op(b, "Mul", 2, h, validf), ax1, 1, 0);
        pooled = gb_op(b, "Div", 2, sum, gb_reduce(b, "ReduceSum", validf, ax1, 1, 0));
    } else {
        pooled = gb_reduce(b, "ReduceMean", h, ax1, 1, 0);
    }
    gb_rename(b, gb_head_gemm(b, pooled, wm_arch_mod(a, -1, WM_M_H_1), "/classifier"), "logits");
    return b->st;
}

int64_t wm_audio_frames(const wm_arch *a, int64_t samples) {
    for (int64_t i = 0; i < a->n_conv && samples > 0; i++)
        samples = samples < a->conv_kernel[i] ? 0 : (samples - a->conv_kernel[i]) / a->conv_stride[i] + 1;
    return samples;
}
