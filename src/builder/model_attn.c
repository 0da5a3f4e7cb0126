/*
 * model_attn.c - the attention and MLP blocks, shared by decoders and
 * encoders; what a layer does is decided by the arch's features (fused
 * projections, biases, q/k norms, rotary positions, grouped KV heads, KV
 * cache, gated MLP), never by the model type.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/model_impl.h"
#include "core/error.h"
#include "onnx/dtype.h"

/* x [B, n, S, hd] -> rotated by cos/sin [B, 1, S, rot] on the first rot dims: pairs (i, i + rot/2) (rotate_half)
   or, interleaved, (2i, 2i + 1). */
static const char *rope(wm_gb *b, const wm_arch *a, int64_t rot, const char *cos, const char *sin, const char *x) {
    int64_t half = rot / 2;
    const char *xr = x, *xp = NULL;
    if (rot < a->hd) {
        xr = gb_slice(b, x, 0, rot, -1);
        xp = gb_slice(b, x, rot, a->hd, -1);
    }
    const char *rh;
    if (a->rope_interleaved) { /* [..., rot] -> [..., rot/2, 2]: (x0, x1) -> (-x1, x0) per pair */
        int64_t pairs[5] = {0, 0, 0, half, 2}, flat[4] = {0, 0, 0, rot};
        const char *p = gb_reshape(b, xr, pairs, 5);
        const char *x1 = gb_slice(b, p, 0, 1, -1), *x2 = gb_slice(b, p, 1, 2, -1);
        rh = gb_op(b, "Concat", 2, gb_op(b, "Neg", 1, x2), x1);
        gb_attr_i(b, "axis", -1);
        rh = gb_reshape(b, rh, flat, 4);
    } else {
        const char *x1 = gb_slice(b, xr, 0, half, -1), *x2 = gb_slice(b, xr, half, rot, -1);
        rh = gb_op(b, "Concat", 2, gb_op(b, "Neg", 1, x2), x1);
        gb_attr_i(b, "axis", -1);
    }
    const char *y = gb_op(b, "Add", 2, gb_op(b, "Mul", 2, xr, cos), gb_op(b, "Mul", 2, rh, sin));
    if (xp) {
        y = gb_op(b, "Concat", 2, y, xp);
        gb_attr_i(b, "axis", -1);
    }
    return y;
}

/* A projection of the relative embeddings [1, 2 span, H] -> [1, heads, hd, 2 span]: the layer's own (own) or, with
   share_att_key, the content projection shared (its weights reused). */
static const char *pos_proj(wm_gb *b, const wm_model_ctx *c, int layer, const char *sc, int own, int shared,
                            const char *name, const char *shared_name) {
    const wm_arch *a = c->a;
    char sub[192];
    const char *p;
    if (a->dis_share_key) {
        snprintf(sub, sizeof sub, "%s/%s", sc, shared_name);
        p = gb_linear_again(b, c->rel_emb, wm_arch_mod(a, layer, shared), sub);
    } else {
        snprintf(sub, sizeof sub, "%s/%s", sc, name);
        p = gb_linear(b, c->rel_emb, wm_arch_mod(a, layer, own), sub);
    }
    gb_scope(b, "%s/%s", sc, name);
    static const int64_t hd_span[] = {0, 2, 3, 1};
    int64_t shp[4] = {1, -1, a->nh, a->hd};
    return gb_transpose(b, gb_reshape(b, p, shp, 4), hd_span, 4); /* [1, heads, hd, 2 span] */
}

/* DeBERTa's c2p + p2c score terms [B, h, S, S] (unscaled) for q [B, h, S, hd], keys k4 [B, S, h, hd]; s: the
   content scores (their shape). c2p[i, j] = q_i . pos_k[idx[i, j]], p2c[i, j] = k_j . pos_q[idx[i, j]]. */
static const char *disentangled(wm_gb *b, const wm_model_ctx *c, int layer, const char *sc, const char *q,
                                const char *k4, const char *s) {
    const wm_arch *a = c->a;
    static const int64_t bhsd[] = {0, 2, 1, 3}, swap[] = {1, 0}, last2[] = {0, 1, 3, 2};
    const char *terms = NULL;
    gb_scope(b, "%s/rel", sc);
    const char *shape = gb_op(b, "Shape", 1, s);
    if (a->dis_c2p) {
        const char *pk = pos_proj(b, c, layer, sc, WM_M_L_POS_K, WM_M_L_K, "pos_k_proj", "k_proj");
        gb_scope(b, "%s/c2p", sc);
        const char *all = gb_op(b, "MatMul", 2, q, pk); /* [B, h, S, 2 span] */
        terms = gb_op(b, "GatherElements", 2, all, gb_op(b, "Expand", 2, c->rel_idx, shape));
        gb_attr_i(b, "axis", 3);
    }
    if (a->dis_p2c) {
        const char *pq = pos_proj(b, c, layer, sc, WM_M_L_POS_Q, WM_M_L_Q, "pos_q_proj", "q_proj");
        gb_scope(b, "%s/p2c", sc);
        const char *all = gb_op(b, "MatMul", 2, gb_transpose(b, k4, bhsd, 4), pq); /* [B, h, S_k, 2 span] */
        const char *idx_t = gb_op(b, "Expand", 2, gb_transpose(b, c->rel_idx, swap, 2), shape);
        const char *g = gb_op(b, "GatherElements", 2, all, idx_t);
        gb_attr_i(b, "axis", 3);
        g = gb_transpose(b, g, last2, 4);
        terms = terms ? gb_op(b, "Add", 2, terms, g) : g;
    }
    return terms;
}

void wm_model_rel_embeddings(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    gb_scope(b, "/model/rel_embeddings");
    int64_t d[2] = {2 * a->dis_span, a->H};
    const char *w = gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_REL_EMB)->wt, d, 2, 0, GB_W_MATRIX);
    if (a->dis_rel_norm) w = gb_norm(b, w, wm_arch_mod(a, -1, WM_M_G_REL_NORM), wm_arch_norm(a), "/model/rel_norm");
    /* [1, 2 span, H]: a 3-D MatMul per projection (a 2-D one of constants becomes a Gemm that onnxruntime's
       constant folding cannot fold in fp16, and its full optimization level then crashes) */
    static const int64_t ax0_[] = {0};
    gb_scope(b, "/model/rel_embeddings");
    c->rel_emb = gb_unsqueeze(b, w, ax0_, 1);
    /* idx[i][j] = clamp(bucket(i - j) + span, 0, 2 span - 1) from a table over i - j in [-D, D], D past the point
       where both ends are clamped (farther distances clipped to it) */
    gb_scope(b, "/model/rel_embeddings");
    int64_t span = a->dis_span, D = (a->dis_max_rel > span ? a->dis_max_rel : span) + 1, n = 2 * D + 1;
    int64_t *tab = malloc((size_t)n * sizeof *tab);
    if (!tab) {
        if (!b->st) b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t v = wm_log_bucket(k - D, a->dis_buckets, a->dis_max_rel) + span;
        tab[k] = v < 0 ? 0 : v > 2 * span - 1 ? 2 * span - 1 : v;
    }
    int saturated = tab[0] == 0 && tab[n - 1] == 2 * span - 1;
    const char *table = gb_i64_named(b, tab, (size_t)n, "model.rel_embeddings.index");
    free(tab);
    if (!saturated) {
        if (!b->st) b->st = wm_err(b->err, WM_ERR_UNSUPPORTED, "relative positions: position_buckets %lld with "
                                   "max_relative_positions %lld do not saturate (not modeled)",
                                   (long long)a->dis_buckets, (long long)a->dis_max_rel);
        return;
    }
    const char *s1 = gb_op(b, "Shape", 1, "input_ids");
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    const char *pos = gb_op(b, "Range", 3, gb_i64s(b, 0), gb_squeeze(b, s1, NULL, 0), gb_i64s(b, 1));
    static const int64_t ax0[] = {0}, ax1[] = {1};
    const char *rel = gb_op(b, "Sub", 2, gb_unsqueeze(b, pos, ax1, 1), gb_unsqueeze(b, pos, ax0, 1));
    rel = gb_op(b, "Add", 2, gb_op(b, "Clip", 3, rel, gb_i64s(b, -D), gb_i64s(b, D)), gb_i64s(b, D));
    c->rel_idx = gb_op(b, "Gather", 2, table, rel);
}

const char *wm_model_attention(wm_gb *b, const wm_model_ctx *c, int layer, const char *h) {
    const wm_arch *a = c->a;
    char sc[160], sub[192];
    snprintf(sc, sizeof sc, "%s/layers.%d/attn", c->root ? c->root : "/model", layer);
    const char *q, *k, *v;
    if (a->fused_qkv) {
        snprintf(sub, sizeof sub, "%s/qkv_proj", sc);
        const char *qkv = gb_linear(b, h, wm_arch_mod(a, layer, WM_M_L_QKV), sub);
        gb_scope(b, "%s", sc);
        int64_t sizes[3] = {a->nh * a->hd, a->kvh * a->hd, a->kvh * a->hd};
        if (a->qkv_per_head) { /* [B, S, heads, 3 hd]: q, k, v of each head side by side (heads == kv heads) */
            int64_t ph[4] = {0, 0, a->nh, 3 * a->hd};
            qkv = gb_reshape(b, qkv, ph, 4);
            sizes[0] = sizes[1] = sizes[2] = a->hd;
        }
        const char *in[2] = {qkv, gb_i64(b, sizes, 3)}, *out[3];
        gb_op_multi(b, "Split", 2, in, 3, out);
        gb_attr_i(b, "axis", -1);
        q = out[0];
        k = out[1];
        v = out[2];
        if (a->qkv_per_head) { /* each back to [B, S, heads hd], the layout attention fusion reads heads from */
            int64_t flat[3] = {0, 0, a->nh * a->hd};
            q = gb_reshape(b, q, flat, 3);
            k = gb_reshape(b, k, flat, 3);
            v = gb_reshape(b, v, flat, 3);
        }
    } else {
        snprintf(sub, sizeof sub, "%s/q_proj", sc);
        q = gb_linear(b, h, wm_arch_mod(a, layer, WM_M_L_Q), sub);
        snprintf(sub, sizeof sub, "%s/k_proj", sc);
        k = gb_linear(b, h, wm_arch_mod(a, layer, WM_M_L_K), sub);
        snprintf(sub, sizeof sub, "%s/v_proj", sc);
        v = gb_linear(b, h, wm_arch_mod(a, layer, WM_M_L_V), sub);
    }
    gb_scope(b, "%s", sc);
    int64_t qs[4] = {0, 0, a->nh, a->hd}, ks[4] = {0, 0, a->kvh, a->hd};
    static const int64_t bhsd[] = {0, 2, 1, 3}, bhds[] = {0, 2, 3, 1}, kt[] = {0, 1, 3, 2};
    if (a->qk_norm && a->qk_norm_whole) { /* over all heads at once, before the split into heads */
        wm_norm_spec ns = wm_arch_norm(a);
        snprintf(sub, sizeof sub, "%s/q_norm", sc);
        q = gb_norm(b, q, wm_arch_mod(a, layer, WM_M_L_Q_NORM), ns, sub);
        snprintf(sub, sizeof sub, "%s/k_norm", sc);
        k = gb_norm(b, k, wm_arch_mod(a, layer, WM_M_L_K_NORM), ns, sub);
        gb_scope(b, "%s", sc);
    }
    q = gb_reshape(b, q, qs, 4);
    k = gb_reshape(b, k, ks, 4);
    v = gb_reshape(b, v, ks, 4);
    const char *k4 = k; /* [B, S, kvh, hd] */
    if (a->qk_norm && !a->qk_norm_whole) {
        wm_norm_spec ns = wm_arch_norm(a);
        ns.kind = WM_NORM_RMS;
        snprintf(sub, sizeof sub, "%s/q_norm", sc);
        q = gb_norm(b, q, wm_arch_mod(a, layer, WM_M_L_Q_NORM), ns, sub);
        snprintf(sub, sizeof sub, "%s/k_norm", sc);
        k = gb_norm(b, k, wm_arch_mod(a, layer, WM_M_L_K_NORM), ns, sub);
        gb_scope(b, "%s", sc);
    }
    int cache = a->kind == WM_DECODER;
    q = gb_transpose(b, q, bhsd, 4);
    v = gb_transpose(b, v, bhsd, 4);
    /* an encoder's keys go straight to [B, h, hd, S]; a decoder's stay [B, h, S, hd] for the cache */
    k = gb_transpose(b, k, cache || a->pos == WM_POS_ROPE ? bhsd : bhds, 4);
    int sliding = a->sliding && a->sliding[layer];
    if (a->pos == WM_POS_ROPE && !(a->nope && a->nope[layer])) {
        int local = sliding && a->local_rope; /* the sliding layers' own RoPE */
        int64_t rot = local ? a->rope_local.rot_dim : a->rope.rot_dim;
        const char *cs = local ? c->cos_local : c->cos, *sn = local ? c->sin_local : c->sin;
        gb_scope(b, "%s/q_rotary", sc);
        q = rope(b, a, rot, cs, sn, q);
        gb_scope(b, "%s/k_rotary", sc);
        k = rope(b, a, rot, cs, sn, k);
        gb_scope(b, "%s", sc);
    }
    if (cache) {
        char name[96], past[96];
        snprintf(name, sizeof name, "present.%d.key", layer);
        snprintf(past, sizeof past, "past_key_values.%d.key", layer);
        gb_scope(b, "%s/k_cache", sc);
        k = gb_op_named(b, "Concat", name, 2, past, k);
        gb_attr_i(b, "axis", 2);
        snprintf(name, sizeof name, "present.%d.value", layer);
        snprintf(past, sizeof past, "past_key_values.%d.value", layer);
        gb_scope(b, "%s/v_cache", sc);
        v = gb_op_named(b, "Concat", name, 2, past, v);
        gb_attr_i(b, "axis", 2);
    }
    /* Grouped KV heads: query heads go 5-D [B, kvh, nh/kvh, S, hd] and meet keys / values [B, kvh, 1, T, hd]
     * through MatMul's batch broadcast, so the KV cache is never copied nh/kvh times (repeat_kv) per step. */
    int grouped = cache && a->kvh != a->nh;
    static const int64_t ax2[] = {2}, ax1[] = {1}, kt5[] = {0, 1, 2, 4, 3};
    const char *bias = sliding ? c->bias_sliding : c->bias_full;
    gb_scope(b, "%s/sdpa", sc);
    if (grouped) {
        int64_t q5[5] = {0, a->kvh, a->nh / a->kvh, -1, a->hd};
        q = gb_reshape(b, q, q5, 5);
        k = gb_transpose(b, gb_unsqueeze(b, k, ax2, 1), kt5, 5);
        v = gb_unsqueeze(b, v, ax2, 1);
        bias = gb_unsqueeze(b, bias, ax1, 1); /* [B, 1, S, T] -> [B, 1, 1, S, T] */
    } else if (cache || a->pos == WM_POS_ROPE) {
        k = gb_transpose(b, k, kt, 4);
    }
    const char *s = gb_op(b, "MatMul", 2, q, k);
    if (a->dis_c2p || a->dis_p2c) {
        s = gb_op(b, "Add", 2, s, disentangled(b, c, layer, sc, q, k4, s));
        gb_scope(b, "%s/sdpa", sc);
    }
    double scale = !a->scale_attn ? 1.0
                   : a->attn_scale > 0   ? a->attn_scale
                   : a->query_scalar > 0 ? pow(a->query_scalar, -0.5)
                                         : 1.0 / sqrt((double)a->hd * (a->dis_scale > 1 ? a->dis_scale : 1));
    if (a->scale_by_layer) scale /= (double)(layer + 1);
    if (scale != 1.0) s = gb_op(b, "Mul", 2, s, gb_f32s(b, (float)scale));
    if (a->attn_softcap > 0) s = wm_model_softcap(b, s, a->attn_softcap);
    if (bias) s = gb_op(b, "Add", 2, s, bias); /* image towers attend everywhere: no mask */
    const char *p = gb_op(b, "Softmax", 1, s);
    gb_attr_i(b, "axis", -1);
    const char *o = gb_op(b, "MatMul", 2, p, v);
    if (grouped) {
        int64_t o4[4] = {0, a->nh, -1, a->hd};
        o = gb_reshape(b, o, o4, 4);
    }
    o = gb_transpose(b, o, bhsd, 4);
    int64_t os[3] = {0, 0, a->nh * a->hd};
    o = gb_reshape(b, o, os, 3);
    snprintf(sub, sizeof sub, "%s/o_proj", sc);
    return gb_linear(b, o, wm_arch_mod(a, layer, WM_M_L_O), sub);
}

const char *wm_model_rel_bias(wm_gb *b, const wm_model_ctx *c, const char *ids) {
    const wm_arch *a = c->a;
    const wm_module *m = wm_arch_mod(a, -1, WM_M_G_REL_BIAS);
    gb_scope(b, "%s/rel_attn_bias", c->root ? c->root : "/model");
    int64_t d[2] = {a->rel_rows, a->nh};
    const char *w = gb_weight(b, ".weight", m->wt, d, 2, 0, GB_W_MATRIX);
    /* rel[i][j] = j - i over 0..S-1; distances past rel_max_dist share the last bucket, so they are clipped to
       it and looked up in a table of the 2 * rel_max_dist + 1 buckets computed here */
    int64_t R = a->rel_max_dist, n = 2 * R + 1;
    int64_t *tab = malloc((size_t)n * sizeof *tab);
    if (!tab) {
        if (!b->st) b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
        return w;
    }
    for (int64_t k = 0; k < n; k++) tab[k] = wm_rel_bucket(k - R, a->rel_buckets, R);
    char name[96];
    snprintf(name, sizeof name, "%s.rel_attn_bias.buckets", c->root ? c->root + 1 : "model");
    const char *buckets = gb_i64_named(b, tab, (size_t)n, name);
    free(tab);
    const char *s1 = gb_op(b, "Shape", 1, ids);
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    const char *pos = gb_op(b, "Range", 3, gb_i64s(b, 0), gb_squeeze(b, s1, NULL, 0), gb_i64s(b, 1));
    static const int64_t ax0[] = {0}, ax1[] = {1}, hss[] = {2, 0, 1};
    const char *rel = gb_op(b, "Sub", 2, gb_unsqueeze(b, pos, ax0, 1), gb_unsqueeze(b, pos, ax1, 1));
    rel = gb_op(b, "Add", 2, gb_op(b, "Clip", 3, rel, gb_i64s(b, -R), gb_i64s(b, R)), gb_i64s(b, R));
    const char *v = gb_op(b, "Gather", 2, w, gb_op(b, "Gather", 2, buckets, rel)); /* [S, S, heads] */
    return gb_unsqueeze(b, gb_transpose(b, v, hss, 3), ax0, 1);
}

/* act(gate x) * (up x) under scope prefix sc: gate and up as two linears (modules gate, up), or as one fused linear
   (module gate_up >= 0: gate rows then up rows, width each) split in two. Node names <sc>/gate_up_proj or
   <sc>/gate_proj + <sc>/up_proj, then <sc>/act. */
const char *wm_model_gated_product(wm_gb *b, const wm_arch *a, int layer, const char *x, const char *sc, int gate_up,
                                   int gate, int up, int64_t width) {
    char sub[224];
    const char *g, *u;
    if (gate_up >= 0) {
        snprintf(sub, sizeof sub, "%s/gate_up_proj", sc);
        const char *gu = gb_linear(b, x, wm_arch_mod(a, layer, gate_up), sub);
        gb_scope(b, "%s", sc);
        int64_t sizes[2] = {width, width};
        const char *in[2] = {gu, gb_i64(b, sizes, 2)}, *out[2];
        gb_op_multi(b, "Split", 2, in, 2, out);
        gb_attr_i(b, "axis", -1);
        g = out[0];
        u = out[1];
    } else {
        snprintf(sub, sizeof sub, "%s/gate_proj", sc);
        g = gb_linear(b, x, wm_arch_mod(a, layer, gate), sub);
        snprintf(sub, sizeof sub, "%s/up_proj", sc);
        u = gb_linear(b, x, wm_arch_mod(a, layer, up), sub);
    }
    gb_scope(b, "%s/act", sc);
    return gb_op(b, "Mul", 2, gb_act(b, g, a->act), u);
}

const char *wm_model_mlp(wm_gb *b, const wm_model_ctx *c, int layer, const char *h) {
    const wm_arch *a = c->a;
    if (a->moe_layer && a->moe_layer[layer]) return wm_model_moe(b, c, layer, h);
    char sc[160], sub[192];
    snprintf(sc, sizeof sc, "%s/layers.%d/mlp", c->root ? c->root : "/model", layer);
    const char *m;
    if (a->gated) {
        m = wm_model_gated_product(b, a, layer, h, sc, a->fused_gate_up ? WM_M_L_GATE_UP : -1, WM_M_L_GATE, WM_M_L_UP,
                                   a->I);
    } else {
        snprintf(sub, sizeof sub, "%s/up_proj", sc);
        m = gb_linear(b, h, wm_arch_mod(a, layer, WM_M_L_UP), sub);
        gb_scope(b, "%s/act", sc);
        m = gb_act(b, m, a->act);
    }
    snprintf(sub, sizeof sub, "%s/down_proj", sc);
    const char *y = gb_linear(b, m, wm_arch_mod(a, layer, WM_M_L_DOWN), sub);
    const wm_module *part = wm_arch_mod(a, layer, WM_M_L_DOWN_PART);
    if (!part->present) return y;
    /* the last outputs from one dataset's part (ViTPose++): [down(m), part(m)] */
    snprintf(sub, sizeof sub, "%s/down_part_proj", sc);
    const char *p = gb_linear(b, m, part, sub);
    gb_scope(b, "%s", sc);
    y = gb_op(b, "Concat", 2, y, p);
    gb_attr_i(b, "axis", -1);
    return y;
}

size_t wm_model_outputs(const wm_arch *a, const wm_recipe *r, char (*names)[96], size_t cap) {
    size_t n = 0;
    /* an encoder-decoder sequence classifier names its output as the text classifiers do */
    if (a->graph != WM_GRAPH_TEXT && !(a->graph == WM_GRAPH_S2S && a->task == WM_TASK_TEXT_CLASSIFICATION)) {
        wm_io_spec sp[8];
        size_t k = wm_vis_output_specs(a, r, sp, 8);
        for (size_t i = 0; i < k && i < cap; i++) snprintf(names[i], 96, "%s", sp[i].name);
        return k;
    }
#define PUSH(...) do { if (n < cap) snprintf(names[n], 96, __VA_ARGS__); n++; } while (0)
    switch (a->task) {
    case WM_TASK_TEXT_GENERATION:
        PUSH("logits");
        for (int64_t i = 0; i < a->L; i++) {
            PUSH("present.%lld.key", (long long)i);
            PUSH("present.%lld.value", (long long)i);
        }
        break;
    case WM_TASK_TEXT_CLASSIFICATION: case WM_TASK_TOKEN_CLASSIFICATION: case WM_TASK_FILL_MASK: PUSH("logits"); break;
    case WM_TASK_QUESTION_ANSWERING: PUSH("start_logits"); PUSH("end_logits"); break;
    case WM_TASK_FEATURE_EXTRACTION:
        PUSH("last_hidden_state");
        if (r && r->pooling != WM_POOL_NONE) PUSH("sentence_embedding");
        break;
    default: break;
    }
#undef PUSH
    return n;
}
