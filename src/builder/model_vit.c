/*
 * model_vit.c - image transformers and CLIP: the patch embedding (Conv
 * with kernel = stride = patch), CLS (+ distillation) token, learned
 * positions, register tokens, pre-norm layers (shared attention and MLP
 * blocks of model_attn.c, with layer scale), the pooler, the heads; CLIP's
 * text tower (causal + padding mask, EOS pooling) and the two towers with
 * cosine logits. What a tower does comes from the arch's features.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "builder/model_impl.h"
#include "builder/weights.h"
#include "core/error.h"
#include "onnx/dtype.h"

static const char *root(const wm_model_ctx *c) { return c->root ? c->root : "/model"; }

static const char *norm(wm_gb *b, const wm_model_ctx *c, const char *x, int layer, int m, const char *name) {
    char sc[160];
    if (layer >= 0) snprintf(sc, sizeof sc, "%s/layers.%d/%s", root(c), layer, name);
    else snprintf(sc, sizeof sc, "%s/%s", root(c), name);
    return gb_norm(b, x, wm_arch_mod(c->a, layer, m), wm_arch_norm(c->a), sc);
}

/* Param module m (of any stored shape) as an initializer of dims. */
static const char *param(wm_gb *b, const wm_module *m, const int64_t *dims, size_t nd, int kind) {
    return gb_weight(b, ".weight", m->wt, dims, nd, 0, kind);
}

/* x[:, i] of [B, S, H] -> [B, H] */
static const char *token(wm_gb *b, const char *x, int64_t i) {
    const char *y = gb_op(b, "Gather", 2, x, gb_i64s(b, i));
    gb_attr_i(b, "axis", 1);
    return y;
}

/* [1, n, H] parameter expanded to the batch of pixels: [B, n, H]. */
static const char *batched(wm_gb *b, const char *p, const char *pixels, int64_t n, int64_t H) {
    const char *bs = gb_slice(b, gb_op(b, "Shape", 1, pixels), 0, 1, 0);
    int64_t rest[2] = {n, H};
    const char *shape = gb_op(b, "Concat", 2, bs, gb_i64(b, rest, 2));
    gb_attr_i(b, "axis", 0);
    return gb_op(b, "Expand", 2, p, shape);
}

/* SigLIP's attention pooling: a learned probe attends over x through nn.MultiheadAttention's fused in_proj
   ([3H, H]: query, key, value rows), out_proj, then out + MLP(LayerNorm(out)); the probe's row: [B, H]. */
static const char *map_head(wm_gb *b, wm_model_ctx *c, const char *x, const char *pixels) {
    const wm_arch *a = c->a;
    char sc[160];
    snprintf(sc, sizeof sc, "%s/map", root(c));
    gb_scope(b, "%s/probe", sc);
    int64_t tok[3] = {1, 1, a->H}, w3[2] = {3 * a->H, a->H}, b3 = 3 * a->H;
    const char *probe = batched(b, param(b, wm_arch_mod(a, -1, WM_M_G_PROBE), tok, 3, GB_W_MATRIX), pixels, 1, a->H);
    gb_scope(b, "%s/in_proj", sc);
    static const int64_t t2[] = {1, 0}, bshd[] = {0, 2, 1, 3}, bhds[] = {0, 2, 3, 1};
    const char *wt = gb_transpose(b, param(b, wm_arch_mod(a, -1, WM_M_G_MAP_QKV), w3, 2, GB_W_MATRIX), t2, 2);
    const char *bias = gb_weight(b, ".bias", wm_arch_mod(a, -1, WM_M_G_MAP_QKV_B)->wt, &b3, 1, 0, GB_W_ZEROS);
    const char *qa = gb_op(b, "Add", 2, gb_op(b, "MatMul", 2, probe, wt), bias);
    const char *kva = gb_op(b, "Add", 2, gb_op(b, "MatMul", 2, x, wt), bias);
    gb_scope(b, "%s/sdpa", sc);
    int64_t hs[4] = {0, 0, a->nh, a->hd}, os[3] = {0, 0, a->H};
    const char *q = gb_transpose(b, gb_reshape(b, gb_slice(b, qa, 0, a->H, -1), hs, 4), bshd, 4);
    const char *k = gb_transpose(b, gb_reshape(b, gb_slice(b, kva, a->H, 2 * a->H, -1), hs, 4), bhds, 4);
    const char *v = gb_transpose(b, gb_reshape(b, gb_slice(b, kva, 2 * a->H, 3 * a->H, -1), hs, 4), bshd, 4);
    const char *s = gb_op(b, "Mul", 2, gb_op(b, "MatMul", 2, q, k), gb_f32s(b, (float)(1.0 / sqrt((double)a->hd))));
    const char *p = gb_op(b, "Softmax", 1, s);
    gb_attr_i(b, "axis", -1);
    const char *o = gb_reshape(b, gb_transpose(b, gb_op(b, "MatMul", 2, p, v), bshd, 4), os, 3);
    char sub[192];
    snprintf(sub, sizeof sub, "%s/out_proj", sc);
    o = gb_linear(b, o, wm_arch_mod(a, -1, WM_M_G_MAP_O), sub);
    snprintf(sub, sizeof sub, "%s/norm", sc);
    const char *h = gb_norm(b, o, wm_arch_mod(a, -1, WM_M_G_MAP_NORM), wm_arch_norm(a), sub);
    snprintf(sub, sizeof sub, "%s/mlp/up_proj", sc);
    h = gb_linear(b, h, wm_arch_mod(a, -1, WM_M_G_MAP_UP), sub);
    gb_scope(b, "%s/mlp/act", sc);
    h = gb_act(b, h, a->act);
    snprintf(sub, sizeof sub, "%s/mlp/down_proj", sc);
    h = gb_linear(b, h, wm_arch_mod(a, -1, WM_M_G_MAP_DOWN), sub);
    gb_scope(b, "%s", sc);
    return token(b, gb_op(b, "Add", 2, o, h), 0);
}

/* Pre-norm layers (with layer scale when the arch has it). */
static const char *layers(wm_gb *b, wm_model_ctx *c, const char *x) {
    const wm_arch *a = c->a;
    for (int64_t i = 0; i < a->L && !b->st; i++) {
        int l = (int)i;
        const char *h = wm_model_attention(b, c, l, norm(b, c, x, l, WM_M_L_ATTN_NORM, "attn_norm"));
        gb_scope(b, "%s/layers.%d", root(c), l);
        if (a->layer_scale) {
            gb_scope(b, "%s/layers.%d/layer_scale1", root(c), l);
            h = gb_op(b, "Mul", 2, h, param(b, wm_arch_mod(a, l, WM_M_L_LS1), &a->H, 1, GB_W_ONES));
            gb_scope(b, "%s/layers.%d", root(c), l);
        }
        x = gb_op(b, "Add", 2, x, h);
        h = wm_model_mlp(b, c, l, norm(b, c, x, l, WM_M_L_MLP_NORM, "mlp_norm"));
        if (a->layer_scale) {
            gb_scope(b, "%s/layers.%d/layer_scale2", root(c), l);
            h = gb_op(b, "Mul", 2, h, param(b, wm_arch_mod(a, l, WM_M_L_LS2), &a->H, 1, GB_W_ONES));
        }
        gb_scope(b, "%s/layers.%d", root(c), l);
        x = gb_op(b, "Add", 2, x, h);
    }
    return x;
}

/* torch's bicubic convolution (A = -0.75) weights of the 4 taps around fraction t. */
static void cubic_weights(float t, float w[4]) {
    const float A = -0.75f;
    float x1 = t + 1.0f, x2 = 1.0f - t, x3 = 2.0f - t;
    w[0] = ((A * x1 - 5.0f * A) * x1 + 8.0f * A) * x1 - 4.0f * A;
    w[1] = ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    w[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    w[3] = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
}

/* torch's antialiased bicubic filter (a = -0.5, as PIL's). */
static float aa_cubic(float x) {
    const float A = -0.5f;
    x = fabsf(x);
    return x < 1.0f ? ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f
         : x < 2.0f ? ((A * x - 5.0f * A) * x + 8.0f * A) * x - 4.0f * A
                    : 0.0f;
}

/*
 * One axis of torch's interpolate(mode="bicubic", antialias=True, align_corners=False) in float32: out[o] = sum_j
 * w[o][j] in[lo + j], the filter widened by the scale on a downscale and normalized, as upsample_bicubic2d_aa.
 * src holds n_in positions of len floats, stride apart; dst n_out of them.
 */
static int aa_axis(const float *src, int64_t n_in, float *dst, int64_t n_out, int64_t stride, int64_t len) {
    float scale = (float)n_in / (float)n_out, support = scale >= 1.0f ? 2.0f * scale : 2.0f;
    float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f, *w = malloc(((size_t)(2.0f * support) + 3) * sizeof *w);
    if (!w) return -1;
    for (int64_t o = 0; o < n_out; o++) {
        float center = scale * ((float)o + 0.5f), total = 0.0f;
        int64_t lo = (int64_t)(center - support + 0.5f), hi = (int64_t)(center + support + 0.5f);
        if (lo < 0) lo = 0;
        if (hi > n_in) hi = n_in;
        int64_t n = hi - lo;
        for (int64_t j = 0; j < n; j++) total += w[j] = aa_cubic(((float)(j + lo) - center + 0.5f) * invscale);
        for (int64_t j = 0; total != 0.0f && j < n; j++) w[j] /= total;
        float *d = dst + o * stride;
        for (int64_t k = 0; k < len; k++) {
            float t = 0.0f;
            for (int64_t j = 0; j < n; j++) t += src[(lo + j) * stride + k] * w[j];
            d[k] = t;
        }
    }
    free(w);
    return 0;
}

/* The n x n grid src of H-vectors resized to side x side into dst by torch's bicubic (align_corners=False, source
   index scale * (i + 0.5) - 0.5, taps clamped to the border), in float32. */
static void bicubic_grid(const float *src, int64_t n, float *dst, int64_t side, int64_t H) {
    const float scale = (float)n / (float)side;
    for (int64_t oy = 0; oy < side; oy++) {
        float ry = scale * ((float)oy + 0.5f) - 0.5f, wy[4];
        int64_t iy = (int64_t)floorf(ry);
        cubic_weights(ry - (float)iy, wy);
        for (int64_t ox = 0; ox < side; ox++) {
            float rx = scale * ((float)ox + 0.5f) - 0.5f, wx[4];
            int64_t ix = (int64_t)floorf(rx);
            cubic_weights(rx - (float)ix, wx);
            const float *row[4][4];
            for (int j = 0; j < 4; j++)
                for (int i = 0; i < 4; i++) {
                    int64_t yy = iy - 1 + j, xx = ix - 1 + i;
                    yy = yy < 0 ? 0 : yy >= n ? n - 1 : yy;
                    xx = xx < 0 ? 0 : xx >= n ? n - 1 : xx;
                    row[j][i] = src + (yy * n + xx) * H;
                }
            float *o = dst + (oy * side + ox) * H;
            for (int64_t h = 0; h < H; h++) {
                float v[4];
                for (int j = 0; j < 4; j++)
                    v[j] = row[j][0][h] * wx[0] + row[j][1][h] * wx[1] + row[j][2][h] * wx[2] + row[j][3][h] * wx[3];
                o[h] = v[0] * wy[0] + v[1] * wy[1] + v[2] * wy[2] + v[3] * wy[3];
            }
        }
    }
}

/* The same with antialias (torch's antialias=True): width first, then height, as its separable kernel; -1 when
   out of memory. */
static int aa_grid(const float *src, int64_t n, float *dst, int64_t side, int64_t H) {
    float *tmp = malloc((size_t)(n * side * H) * sizeof *tmp);
    int bad = !tmp;
    for (int64_t y = 0; !bad && y < n; y++) bad |= aa_axis(src + y * n * H, n, tmp + y * side * H, side, H, H);
    if (!bad) bad |= aa_axis(tmp, n, dst, side, side * H, side * H);
    free(tmp);
    return bad ? -1 : 0;
}

/*
 * The checkpoint's position table [extra + n*n, H] with its patch grid (side n = a->pos_side) resized to the
 * graph's side, as transformers' interpolate_pos_encoding: bicubic_grid, or aa_grid where the family says so; the
 * leading CLS / distillation rows as they are.
 */
static const char *interp_positions(wm_gb *b, const wm_arch *a, const wm_module *m) {
    int64_t n = a->pos_side, side = a->image / a->patch, extra = m->out - n * n, H = a->H;
    if (extra < 0 || extra != a->n_pos - side * side) {
        b->st = wm_err(b->err, WM_ERR_INPUT, "position table '%s': %lld rows is not %lld patches + %lld", m->w,
                       (long long)m->out, (long long)(n * n), (long long)(a->n_pos - side * side));
        return "<error>";
    }
    float *src = malloc((size_t)m->out * (size_t)H * sizeof *src),
          *dst = malloc((size_t)a->n_pos * (size_t)H * sizeof *dst);
    const char *out = "<error>";
    int bad = !src || !dst;
    if (!bad) {
        wm_st_read_f32(m->wt, src);
        memcpy(dst, src, (size_t)(extra * H) * sizeof *dst);
        if (a->pos_antialias) bad = aa_grid(src + extra * H, n, dst + extra * H, side, H);
        else bicubic_grid(src + extra * H, n, dst + extra * H, side, H);
    }
    int64_t pd[3] = {1, a->n_pos, H};
    if (bad) b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
    else out = gb_weight_vals(b, ".weight", dst, pd, 3);
    free(src);
    free(dst);
    return out;
}

/* An image tower on pixels: *last = last_hidden_state, *pooled = pooler_output (NULL when the arch has none). */
static void image_tower(wm_gb *b, wm_model_ctx *c, const char *pixels, const char **last, const char **pooled) {
    const wm_arch *a = c->a;
    const wm_module *pm = wm_arch_mod(a, -1, WM_M_G_PATCH);
    gb_scope(b, "%s/patch_embed", root(c));
    int64_t wd[4] = {a->H, a->C, a->patch, a->patch}, ks[2] = {a->patch, a->patch};
    const char *w = gb_weight(b, ".weight", pm->wt, wd, 4, 0, GB_W_MATRIX);
    const char *bias = pm->has_bias ? gb_weight(b, ".bias", pm->bt, &a->H, 1, 0, GB_W_ZEROS) : NULL;
    const char *x = gb_op(b, "Conv", bias ? 3 : 2, pixels, w, bias);
    gb_attr_ints(b, "kernel_shape", ks, 2);
    gb_attr_ints(b, "strides", ks, 2);
    if (a->patch_pad) {
        int64_t pads[4] = {a->patch_pad, a->patch_pad, a->patch_pad, a->patch_pad};
        gb_attr_ints(b, "pads", pads, 4);
    }
    int64_t flat[3] = {0, a->H, -1}, perm[3] = {0, 2, 1};
    x = gb_transpose(b, gb_reshape(b, x, flat, 3), perm, 3); /* [B, patches, H] */
    int64_t tok[3] = {1, 1, a->H};
    const char *parts[3];
    int np = 0;
    const wm_module *cm = wm_arch_mod(a, -1, WM_M_G_CLS);
    if (cm->present) {
        gb_scope(b, "%s/cls_token", root(c));
        parts[np++] = batched(b, param(b, cm, tok, 3, GB_W_MATRIX), pixels, 1, a->H);
    }
    const wm_module *dm = wm_arch_mod(a, -1, WM_M_G_DIST);
    if (dm->present) {
        gb_scope(b, "%s/dist_token", root(c));
        parts[np++] = batched(b, param(b, dm, tok, 3, GB_W_MATRIX), pixels, 1, a->H);
    }
    parts[np++] = x;
    gb_scope(b, "%s/embed_positions", root(c));
    if (np > 1) {
        x = gb_opv(b, "Concat", NULL, np, parts);
        gb_attr_i(b, "axis", 1);
    }
    int64_t pd[3] = {1, a->n_pos, a->H};
    const wm_module *pos = wm_arch_mod(a, -1, WM_M_G_POS);
    if (a->pos_fold) { /* x + pos[:, 1:] + pos[:, :1], in transformers' order */
        const char *p = param(b, pos, pd, 3, GB_W_MATRIX);
        x = gb_op(b, "Add", 2, gb_op(b, "Add", 2, x, gb_slice(b, p, 1, INT64_MAX, 1)), gb_slice(b, p, 0, 1, 1));
    } else {
        x = gb_op(b, "Add", 2, x,
                  a->pos_side && pos->wt ? interp_positions(b, a, pos) : param(b, pos, pd, 3, GB_W_MATRIX));
    }
    if (a->n_reg) { /* after CLS, without positions */
        gb_scope(b, "%s/register_tokens", root(c));
        int64_t rd[3] = {1, a->n_reg, a->H};
        const char *reg = batched(b, param(b, wm_arch_mod(a, -1, WM_M_G_REG), rd, 3, GB_W_ZEROS), pixels, a->n_reg, a->H);
        x = gb_op(b, "Concat", 3, gb_slice(b, x, 0, 1, 1), reg, gb_slice(b, x, 1, INT64_MAX, 1));
        gb_attr_i(b, "axis", 1);
    }
    if (wm_arch_mod(a, -1, WM_M_G_PRE_NORM)->present) x = norm(b, c, x, -1, WM_M_G_PRE_NORM, "pre_norm");
    x = layers(b, c, x);
    *pooled = NULL;
    if (a->vpool == WM_VPOOL_NORM_CLS) { /* CLIP: the sequence as it is, the final norm on CLS only */
        *last = x;
        gb_scope(b, "%s/pooler", root(c));
        *pooled = norm(b, c, token(b, x, 0), -1, WM_M_G_FINAL_NORM, "norm");
        return;
    }
    x = norm(b, c, x, -1, WM_M_G_FINAL_NORM, "norm");
    *last = x;
    gb_scope(b, "%s/pooler", root(c));
    if (a->vpool == WM_VPOOL_CLS) *pooled = token(b, x, 0);
    else if (a->vpool == WM_VPOOL_MAP) *pooled = map_head(b, c, x, pixels);
    else if (a->vpool == WM_VPOOL_DENSE_TANH) {
        char sc[160];
        snprintf(sc, sizeof sc, "%s/pooler/dense", root(c));
        *pooled = gb_op(b, "Tanh", 1, gb_head_gemm(b, token(b, x, 0), wm_arch_mod(a, -1, WM_M_G_POOL), sc));
    }
}

/* CLIP's text tower: *last = final-normed states, *pooled = the EOS token's. */
static void text_tower(wm_gb *b, wm_model_ctx *c, const char **last, const char **pooled) {
    const wm_arch *a = c->a;
    gb_scope(b, "%s/embed_tokens", root(c));
    int64_t d[2] = {a->V, a->H};
    const char *x = gb_op(b, "Gather", 2, gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_EMBED)->wt, d, 2, 0,
                                                   GB_W_MATRIX), "input_ids");
    gb_scope(b, "%s/embed_positions", root(c));
    const char *S = gb_squeeze(b, gb_slice(b, gb_op(b, "Shape", 1, "input_ids"), 1, 2, 0), NULL, 0);
    const char *r = gb_op(b, "Range", 3, gb_i64s(b, 0), S, gb_i64s(b, 1));
    d[0] = a->P;
    x = gb_op(b, "Add", 2, x, gb_op(b, "Gather", 2, gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_POS)->wt, d, 2, 0,
                                                              GB_W_MATRIX), r));
    /* causal and padding: key j is seen by query i when j <= i and the mask keeps j */
    gb_scope(b, "%s/attn_mask", root(c));
    static const int64_t ax0[] = {0}, ax1[] = {1}, ax12[] = {1, 2};
    const char *keep = gb_unsqueeze(b, gb_cast(b, "attention_mask", WM_DT_BOOL), ax12, 2);
    if (a->causal)
        keep = gb_op(b, "And", 2, keep, gb_op(b, "LessOrEqual", 2, gb_unsqueeze(b, r, ax0, 1), gb_unsqueeze(b, r, ax1, 1)));
    c->bias_full = gb_op(b, "Where", 3, keep, gb_f32s(b, 0.0f), gb_f32s(b, -FLT_MAX));
    x = layers(b, c, x);
    x = norm(b, c, x, -1, WM_M_G_FINAL_NORM, "norm");
    *last = x;
    gb_scope(b, "%s/pooler", root(c));
    if (a->vpool == WM_VPOOL_LAST_HEAD) { /* SigLIP: the last position, whatever the mask */
        char sc[160];
        snprintf(sc, sizeof sc, "%s/pooler/head", root(c));
        *pooled = gb_head_gemm(b, token(b, x, -1), wm_arch_mod(a, -1, WM_M_G_POOL), sc);
        return;
    }
    const char *idx;
    if (a->eos_id < 0) idx = gb_cast(b, "input_ids", WM_DT_INT32); /* the highest id (eos_token_id 2 configs) */
    else idx = gb_cast(b, gb_op(b, "Equal", 2, "input_ids", gb_int_as(b, a->eos_id, c->ids_dtype)), WM_DT_INT32);
    idx = gb_op(b, "ArgMax", 1, idx); /* the first maximum, as torch's argmax */
    gb_attr_i(b, "axis", -1);
    gb_attr_i(b, "keepdims", 1);
    const char *bs = gb_slice(b, gb_op(b, "Shape", 1, x), 0, 1, 0);
    int64_t tail[2] = {1, a->H};
    const char *shape = gb_op(b, "Concat", 2, bs, gb_i64(b, tail, 2));
    gb_attr_i(b, "axis", 0);
    static const int64_t ax2[] = {2};
    idx = gb_op(b, "Expand", 2, gb_unsqueeze(b, idx, ax2, 1), shape); /* [B, 1] -> [B, 1, H] */
    const char *g = gb_op(b, "GatherElements", 2, x, idx);
    gb_attr_i(b, "axis", 1);
    *pooled = gb_squeeze(b, g, ax1, 1);
}

/* The tower's projection, when it has one (SigLIP's embeddings are the pooled states). */
static const char *project(wm_gb *b, const wm_model_ctx *c, const char *x) {
    char sc[160];
    if (!wm_arch_mod(c->a, -1, WM_M_G_PROJ)->present) return x;
    snprintf(sc, sizeof sc, "%s/projection", root(c));
    return gb_linear(b, x, wm_arch_mod(c->a, -1, WM_M_G_PROJ), sc);
}

/* x / ||x|| over the last axis (transformers: no epsilon). */
static const char *l2n(wm_gb *b, const char *x) {
    static const int64_t last[] = {-1};
    return gb_op(b, "Div", 2, x, gb_reduce(b, "ReduceL2", x, last, 1, 1));
}

static void image_head(wm_gb *b, wm_model_ctx *c, const char *last) {
    const wm_arch *a = c->a;
    const wm_module *m0 = wm_arch_mod(a, -1, WM_M_H_0), *m1 = wm_arch_mod(a, -1, WM_M_H_1);
    gb_scope(b, "/classifier");
    const char *cls = token(b, last, 0), *y;
    if (a->vhead == WM_VHEAD_CLS_MEAN) {
        static const int64_t ax1[] = {1};
        const char *mean = gb_reduce(b, "ReduceMean", gb_slice(b, last, 1 + a->n_reg, INT64_MAX, 1), ax1, 1, 0);
        const char *in = gb_op(b, "Concat", 2, cls, mean);
        gb_attr_i(b, "axis", -1);
        y = gb_head_gemm(b, in, m0, "/classifier");
    } else if (a->vhead == WM_VHEAD_CLS_DIST_AVG) {
        const char *d = token(b, last, 1);
        const char *y0 = gb_head_gemm(b, cls, m0, "/cls_classifier"), *y1 = gb_head_gemm(b, d, m1, "/distillation_classifier");
        gb_scope(b, "/classifier");
        y = gb_op(b, "Mul", 2, gb_op(b, "Add", 2, y0, y1), gb_f32s(b, 0.5f));
    } else {
        y = gb_head_gemm(b, cls, m0, "/classifier");
    }
    gb_rename(b, y, "logits");
}

wm_status wm_model_vision(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    const char *last, *pooled;
    if (a->graph == WM_GRAPH_RESNET) return wm_model_resnet(b, c);
    if (a->graph == WM_GRAPH_AUDIO) return wm_model_audio(b, c);
    if (a->graph == WM_GRAPH_DUAL) {
        wm_model_ctx tc = *c, vc = *c;
        const char *tl, *tp, *vl, *vp;
        tc.a = a->tower[0];
        tc.root = "/text_model";
        vc.a = a->tower[1];
        vc.root = "/vision_model";
        text_tower(b, &tc, &tl, &tp);
        image_tower(b, &vc, "pixel_values", &vl, &vp);
        const char *te = l2n(b, project(b, &tc, tp)), *ie = l2n(b, project(b, &vc, vp));
        gb_scope(b, "/logit_scale");
        const char *scale = gb_op(b, "Exp", 1, param(b, wm_arch_mod(a, -1, WM_M_G_SCALE), NULL, 0, GB_W_MATRIX));
        gb_scope(b, "/logits");
        static const int64_t t2[] = {1, 0};
        const char *lt = gb_op(b, "Mul", 2, gb_op(b, "MatMul", 2, te, gb_transpose(b, ie, t2, 2)), scale);
        const wm_module *lb = wm_arch_mod(a, -1, WM_M_G_BIAS);
        if (lb->present) {
            gb_scope(b, "/logit_bias");
            const char *bias = param(b, lb, NULL, 0, GB_W_MATRIX);
            gb_scope(b, "/logits");
            lt = gb_op(b, "Add", 2, lt, bias);
        }
        gb_rename(b, lt, "logits_per_text");
        gb_op_named(b, "Transpose", "logits_per_image", 1, "logits_per_text");
        gb_attr_ints(b, "perm", t2, 2);
        gb_rename(b, te, "text_embeds");
        gb_rename(b, ie, "image_embeds");
        return b->st;
    }
    if (a->graph == WM_GRAPH_CLIP_TEXT) {
        text_tower(b, c, &last, &pooled);
        gb_rename(b, last, "last_hidden_state");
        if (wm_arch_mod(a, -1, WM_M_G_PROJ)->present) gb_rename(b, project(b, c, pooled), "text_embeds");
        gb_rename(b, pooled, "pooler_output");
        return b->st;
    }
    image_tower(b, c, "pixel_values", &last, &pooled);
    if (a->task == WM_TASK_KEYPOINT_DETECTION) {
        gb_rename(b, wm_model_pose_head(b, c, last), "heatmaps");
        return b->st;
    }
    if (a->task == WM_TASK_IMAGE_CLASSIFICATION) {
        image_head(b, c, last);
        return b->st;
    }
    gb_rename(b, last, "last_hidden_state");
    if (pooled) {
        if (wm_arch_mod(a, -1, WM_M_G_PROJ)->present) gb_rename(b, project(b, c, pooled), "image_embeds");
        gb_rename(b, pooled, "pooler_output");
    }
    return b->st;
}

static wm_io_dim dv(int64_t v) {
    wm_io_dim d = {v, ""};
    return d;
}

size_t wm_vis_output_specs(const wm_arch *a, const wm_recipe *r, wm_io_spec *out, size_t cap) {
    const wm_io_spec *px = r ? wm_recipe_input(r, "pixel_values") : NULL, *ids = r ? wm_recipe_input(r, "input_ids") : NULL;
    wm_io_dim IB = px ? px->dims[0] : dv(1), TB = ids ? ids->dims[0] : dv(1), S = ids ? ids->dims[1] : dv(1);
    size_t n = 0;
#define PUT(...) do { wm_io_spec s_ = wm_float_spec(__VA_ARGS__); if (n < cap) out[n] = s_; n++; } while (0)
    if (a->graph == WM_GRAPH_AUDIO) { /* frames fixed when the samples are */
        const wm_io_spec *iv = r ? wm_recipe_input(r, "input_values") : NULL;
        wm_io_dim AB = iv ? iv->dims[0] : dv(1), F = {-1, "frames"};
        if (iv && iv->dims[1].v > 0) F = dv(wm_audio_frames(a, iv->dims[1].v));
        wm_io_dim ctc[3] = {AB, F, dv(a->V)}, cls[2] = {AB, dv(a->labels)};
        if (a->task == WM_TASK_ASR) PUT("logits", 3, ctc);
        else PUT("logits", 2, cls);
    } else if (a->graph == WM_GRAPH_DUAL) {
        wm_io_dim li[2] = {IB, TB}, lt[2] = {TB, IB}, te[2] = {TB, dv(a->proj)}, ie[2] = {IB, dv(a->proj)};
        PUT("logits_per_image", 2, li);
        PUT("logits_per_text", 2, lt);
        PUT("text_embeds", 2, te);
        PUT("image_embeds", 2, ie);
    } else if (a->task == WM_TASK_IMAGE_CLASSIFICATION) {
        wm_io_dim d[2] = {IB, dv(a->labels)};
        PUT("logits", 2, d);
    } else if (a->task == WM_TASK_KEYPOINT_DETECTION) {
        int64_t h, w;
        wm_pose_heatmap_side(a, &h, &w);
        wm_io_dim d[4] = {IB, dv(a->labels), dv(h), dv(w)};
        PUT("heatmaps", 4, d);
    } else if (a->graph == WM_GRAPH_RESNET) {
        int64_t side = wm_resnet_side(a);
        wm_io_dim l[4] = {IB, dv(a->H), dv(side), dv(side)}, p[4] = {IB, dv(a->H), dv(1), dv(1)};
        PUT("last_hidden_state", 4, l);
        PUT("pooler_output", 4, p);
    } else if (a->graph == WM_GRAPH_CLIP_TEXT) {
        int proj = wm_arch_mod(a, -1, WM_M_G_PROJ)->present;
        wm_io_dim l[3] = {TB, S, dv(a->H)}, p[2] = {TB, dv(proj ? a->H : wm_vis_embed_dim(a))}, e[2] = {TB, dv(a->proj)};
        PUT("last_hidden_state", 3, l);
        PUT("pooler_output", 2, p);
        if (proj) PUT("text_embeds", 2, e);
    } else {
        wm_io_dim l[3] = {IB, dv(a->n_pos + a->n_reg), dv(a->H)}, p[2] = {IB, dv(a->H)}, e[2] = {IB, dv(a->proj)};
        PUT("last_hidden_state", 3, l);
        if (a->vpool != WM_VPOOL_NONE) {
            PUT("pooler_output", 2, p);
            if (wm_arch_mod(a, -1, WM_M_G_PROJ)->present) PUT("image_embeds", 2, e);
        }
    }
#undef PUT
    return n;
}
