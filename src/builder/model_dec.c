/*
 * model_dec.c - the decoder graph (text-generation with KV cache):
 * embeddings (+ learned positions), the causal / padding / sliding-window
 * mask, rotary cos/sin, the layers (pre-norm, output-normed or parallel
 * attention + MLP), final norm, lm_head.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/model_impl.h"
#include "core/error.h"
#include "onnx/dtype.h"

#define MASK_MIN (-FLT_MAX) /* transformers' finfo(float32).min: finite, so fully masked rows stay finite */

/* Additive masks [B, 1, S, T]: causal over absolute positions (past + i), padding, and the sliding window. */
static void causal_masks(wm_gb *b, wm_model_ctx *c) {
    gb_scope(b, "/model/attn_mask");
    const char *s1 = gb_op(b, "Shape", 1, "input_ids");
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    const char *t1 = gb_op(b, "Shape", 1, "attention_mask");
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    const char *T = gb_squeeze(b, t1, NULL, 0);
    const char *P = gb_squeeze(b, gb_op(b, "Sub", 2, t1, s1), NULL, 0);
    const char *one = gb_i64s(b, 1);
    const char *kpos = gb_op(b, "Range", 3, gb_i64s(b, 0), T, one);
    static const int64_t ax1[] = {1}, ax12[] = {1, 2};
    const char *qcol = gb_unsqueeze(b, gb_op(b, "Range", 3, P, T, one), ax1, 1);
    const char *causal = gb_op(b, "LessOrEqual", 2, kpos, qcol);
    const char *pad = gb_unsqueeze(b, gb_cast(b, "attention_mask", WM_DT_BOOL), ax12, 2);
    const char *allowed = gb_op(b, "And", 2, pad, causal);
    const char *zero = gb_f32s(b, 0.0f), *neg = gb_f32s(b, MASK_MIN);
    c->bias_full = gb_op(b, "Where", 3, allowed, zero, neg);
    if (c->a->window) {
        const char *lo = gb_op(b, "Sub", 2, qcol, gb_i64s(b, c->a->window));
        const char *win = gb_op(b, "And", 2, allowed, gb_op(b, "Greater", 2, kpos, lo));
        c->bias_sliding = gb_op(b, "Where", 3, win, zero, neg);
    }
}

/*
 * cos / sin [B, 1, S, rot] of rope r from the position ids pos_ids [B, S], computed as transformers does (float32
 * pos x inv_freq), in scope /model/<name> with constants model.<name>.inv_freq[_long]; il_pairs: each frequency on
 * the adjacent dims 2i, 2i + 1 (interleaved rotary) instead of i and i + rot/2.
 */
void wm_model_rotary(wm_gb *b, const wm_rope *r, int il_pairs, const char *name, const char *pos_ids,
                     const char **cos_out, const char **sin_out) {
    gb_scope(b, "/model/%s", name);
    int64_t half = r->rot_dim / 2;
    float *dup = malloc((size_t)r->rot_dim * sizeof *dup);
    if (!dup) {
        wm_err(b->err, WM_ERR_NOMEM, "out of memory");
        b->st = WM_ERR_NOMEM;
        return;
    }
    char cname[96];
    /* each frequency twice: for the two halves, or (interleaved) for the pair 2i, 2i + 1 */
    int il = il_pairs;
    for (int64_t i = 0; i < half; i++) dup[il ? 2 * i : i] = dup[il ? 2 * i + 1 : i + half] = r->inv_freq[i];
    snprintf(cname, sizeof cname, "model.%s.inv_freq", name);
    const char *inv = gb_f32(b, dup, (size_t)r->rot_dim, cname);
    if (r->inv_freq_long) {
        for (int64_t i = 0; i < half; i++) dup[il ? 2 * i : i] = dup[il ? 2 * i + 1 : i + half] = r->inv_freq_long[i];
        snprintf(cname, sizeof cname, "model.%s.inv_freq_long", name);
        const char *inv_long = gb_f32(b, dup, (size_t)r->rot_dim, cname);
        /* longrope: the long factors once the sequence passes original_max_position_embeddings */
        const char *mx = gb_reduce(b, "ReduceMax", pos_ids, NULL, 0, 0);
        const char *len = gb_op(b, "Add", 2, mx, gb_i64s(b, 1));
        const char *is_long = gb_op(b, "Greater", 2, len, gb_i64s(b, r->orig_max));
        inv = gb_op(b, "Where", 3, is_long, inv_long, inv);
    }
    free(dup);
    static const int64_t last[] = {-1}, ax1[] = {1};
    const char *pos = gb_unsqueeze(b, gb_cast(b, pos_ids, WM_DT_FLOAT), last, 1);
    const char *freqs = gb_op(b, "Mul", 2, pos, inv);
    const char *cs = gb_op(b, "Cos", 1, freqs), *sn = gb_op(b, "Sin", 1, freqs);
    if (r->scale != 1.0) {
        cs = gb_op(b, "Mul", 2, cs, gb_f32s(b, (float)r->scale));
        sn = gb_op(b, "Mul", 2, sn, gb_f32s(b, (float)r->scale));
    }
    *cos_out = gb_unsqueeze(b, cs, ax1, 1);
    *sin_out = gb_unsqueeze(b, sn, ax1, 1);
}

/* cap * tanh(x / cap), as transformers soft-caps scores and logits. */
const char *wm_model_softcap(wm_gb *b, const char *x, double cap) {
    const char *k = gb_f32s(b, (float)cap);
    return gb_op(b, "Mul", 2, gb_op(b, "Tanh", 1, gb_op(b, "Div", 2, x, k)), k);
}

/*
 * logits = x E^T as Gemm(x2d, E, transB=1) on the [V, H] matrix as the
 * checkpoint stores it: the tied embedding itself (no second copy), or
 * lm_head.weight streamed without a transposed copy of the largest matrix.
 * A masked-LM head's output bias (module H_BIAS) is the Gemm's bias.
 */
const char *wm_model_lm_head(wm_gb *b, const wm_model_ctx *c, const char *x) {
    const wm_arch *a = c->a;
    const wm_module *lm = wm_arch_mod(a, -1, WM_M_G_LM_HEAD), *hb = wm_arch_mod(a, -1, WM_M_H_BIAS);
    gb_scope(b, "/lm_head");
    const char *w = c->embed_weight, *bias = NULL;
    if (!a->tied) {
        int64_t d[2] = {a->V, a->H};
        w = gb_weight(b, ".weight", lm->wt, d, 2, 0, GB_W_MATRIX);
        if (lm->has_bias) bias = gb_weight(b, ".bias", lm->bt, &a->V, 1, 0, GB_W_ZEROS);
    } else if (hb->present)
        bias = gb_weight(b, ".bias", hb->wt, &a->V, 1, 0, GB_W_ZEROS);
    int64_t flat[2] = {-1, a->H};
    const char *x2 = gb_reshape(b, x, flat, 2);
    const char *y = gb_op(b, "Gemm", bias ? 3 : 2, x2, w, bias);
    gb_attr_i(b, "transB", 1);
    if (a->logits_div != 1.0) y = gb_op(b, "Div", 2, y, gb_f32s(b, (float)a->logits_div));
    if (a->logits_mul != 1.0 && a->logits_mul != 0) y = gb_op(b, "Mul", 2, y, gb_f32s(b, (float)a->logits_mul));
    if (a->final_softcap > 0) y = wm_model_softcap(b, y, a->final_softcap); /* per row: before the reshape */
    const char *bs = gb_op(b, "Shape", 1, x);
    gb_attr_i(b, "end", 2);
    const char *shape = gb_op(b, "Concat", 2, bs, gb_i64_1(b, a->V));
    gb_attr_i(b, "axis", 0);
    return gb_op_named(b, "Reshape", "logits", 2, y, shape);
}

/* norm(x) with module m of layer, scope /model/layers.<layer>/<name>; x itself when the layer has no such norm. */
static const char *layer_norm(wm_gb *b, const wm_arch *a, int layer, int m, const char *name, const char *x) {
    const wm_module *mod = wm_arch_mod(a, layer, m);
    if (!mod->present) return x;
    char sc[96];
    snprintf(sc, sizeof sc, "/model/layers.%d/%s", layer, name);
    return gb_norm(b, x, mod, wm_arch_norm(a), sc);
}

/* A sublayer's output on its way to the residual: its output norm (sub_norms), then the residual multiplier. */
static const char *branch_out(wm_gb *b, const wm_arch *a, int layer, int m, const char *name, const char *h) {
    if (a->sub_norms) h = layer_norm(b, a, layer, m, name, h);
    gb_scope(b, "/model/layers.%d", layer);
    if (a->resid_scale != 1.0) h = gb_op(b, "Mul", 2, h, gb_f32s(b, (float)a->resid_scale));
    return h;
}

/*
 * One layer: x + attn(norm(x)), then + mlp(norm(x)) in sequence, or both from x in parallel
 * (x + attn(norm(x)) + mlp(norm'(x)), norm' the same norm when the MLP has none of its own). Pre-norms only
 * where the layer has them (OLMo 2 normalizes the outputs only).
 */
static const char *decoder_layer(wm_gb *b, wm_model_ctx *c, int i, const char *x) {
    const wm_arch *a = c->a;
    const char *n = layer_norm(b, a, i, WM_M_L_ATTN_NORM, "attn_norm", x);
    const char *h = branch_out(b, a, i, WM_M_L_ATTN_OUT_NORM, "attn_out_norm", wm_model_attention(b, c, i, n));
    if (a->parallel) {
        const char *mn = a->mlp_norm_shared ? n : layer_norm(b, a, i, WM_M_L_MLP_NORM, "mlp_norm", x);
        const char *m = branch_out(b, a, i, WM_M_L_MLP_OUT_NORM, "mlp_out_norm", wm_model_mlp(b, c, i, mn));
        return gb_op(b, "Add", 2, x, gb_op(b, "Add", 2, h, m));
    }
    x = gb_op(b, "Add", 2, x, h);
    n = layer_norm(b, a, i, WM_M_L_MLP_NORM, "mlp_norm", x);
    h = branch_out(b, a, i, WM_M_L_MLP_OUT_NORM, "mlp_out_norm", wm_model_mlp(b, c, i, n));
    return gb_op(b, "Add", 2, x, h);
}

wm_status wm_model_decoder(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    const wm_module *emb = wm_arch_mod(a, -1, WM_M_G_EMBED);
    gb_scope(b, "/model/embed_tokens");
    int64_t ed[2] = {a->V, a->E};
    c->embed_weight = gb_weight(b, ".weight", emb->wt, ed, 2, 0, GB_W_MATRIX);
    const char *x = gb_op(b, "Gather", 2, c->embed_weight, "input_ids");
    if (a->embed_scale != 1.0) x = gb_op(b, "Mul", 2, x, gb_f32s(b, (float)a->embed_scale));
    if (a->pos == WM_POS_LEARNED) {
        const wm_module *pm = wm_arch_mod(a, -1, WM_M_G_POS);
        gb_scope(b, "/model/embed_positions");
        int64_t pd[2] = {a->P, a->E};
        const char *pw = gb_weight(b, ".weight", pm->wt, pd, 2, 0, GB_W_MATRIX);
        x = gb_op(b, "Add", 2, x, gb_op(b, "Gather", 2, pw, "position_ids"));
    }
    causal_masks(b, c);
    if (a->pos == WM_POS_ROPE)
        wm_model_rotary(b, &a->rope, a->rope_interleaved, "rotary_emb", "position_ids", &c->cos, &c->sin);
    if (a->local_rope)
        wm_model_rotary(b, &a->rope_local, a->rope_interleaved, "rotary_emb_local", "position_ids", &c->cos_local,
                        &c->sin_local);
    for (int64_t i = 0; i < a->L && !b->st; i++) {
        if (c->progress) fprintf(stderr, "\r  export: layer %lld/%lld", (long long)i + 1, (long long)a->L);
        x = decoder_layer(b, c, (int)i, x);
    }
    if (c->progress) fprintf(stderr, "\n");
    x = gb_norm(b, x, wm_arch_mod(a, -1, WM_M_G_FINAL_NORM), wm_arch_norm(a), "/model/norm");
    wm_model_lm_head(b, c, x);
    return b->st;
}
