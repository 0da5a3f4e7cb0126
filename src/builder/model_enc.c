/*
 * model_enc.c - the encoder graph: word + position (+ token type)
 * embeddings, embedding norm (+ projection), post-norm layers (or pre-norm
 * ones with rotary positions, bidirectional sliding windows and a final
 * norm), and the task
 * head (sequence / token classification, question answering, masked-LM
 * logits, hidden states with optional mean pooling + L2 normalization).
 */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "builder/model_impl.h"
#include "core/error.h"
#include "onnx/dtype.h"

static const char *positions(wm_gb *b, const wm_model_ctx *c) {
    const wm_arch *a = c->a;
    if (a->posid == WM_POSID_PADDING) {
        /* fairseq: cumsum(ids != pad) * (ids != pad) + pad */
        const char *pad = gb_int_as(b, a->pad_id, c->ids_dtype);
        const char *ne = gb_op(b, "Not", 1, gb_op(b, "Equal", 2, "input_ids", pad));
        const char *m = gb_cast(b, ne, c->ids_dtype);
        const char *cs = gb_op(b, "CumSum", 2, m, gb_i64s(b, 1));
        return gb_op(b, "Add", 2, gb_op(b, "Mul", 2, cs, m), pad);
    }
    const char *s1 = gb_op(b, "Shape", 1, "input_ids");
    gb_attr_i(b, "start", 1);
    gb_attr_i(b, "end", 2);
    return gb_op(b, "Range", 3, gb_i64s(b, 0), gb_squeeze(b, s1, NULL, 0), gb_i64s(b, 1));
}

static const char *embeddings(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    gb_scope(b, "/model/embed_tokens");
    int64_t d[2] = {a->V, a->E};
    const char *w = gb_weight(b, ".weight", wm_arch_mod(a, -1, WM_M_G_EMBED)->wt, d, 2, 0, GB_W_MATRIX);
    c->embed_weight = w; /* a masked-LM head's decoder (tied) */
    const char *x = gb_op(b, "Gather", 2, w, "input_ids");
    const wm_module *pm = wm_arch_mod(a, -1, WM_M_G_POS);
    if (pm->present) {
        gb_scope(b, "/model/embed_positions");
        const char *pid = positions(b, c);
        d[0] = a->P;
        w = gb_weight(b, ".weight", pm->wt, d, 2, 0, GB_W_MATRIX);
        x = gb_op(b, "Add", 2, x, gb_op(b, "Gather", 2, w, pid));
    }
    const wm_module *tm = wm_arch_mod(a, -1, WM_M_G_TYPE);
    if (tm->present) {
        gb_scope(b, "/model/embed_token_types");
        d[0] = a->T;
        w = gb_weight(b, ".weight", tm->wt, d, 2, 0, GB_W_MATRIX);
        /* without a token_type_ids input every token has type 0 */
        const char *ids = wm_recipe_input(c->r, "token_type_ids") ? "token_type_ids" : gb_i64s(b, 0);
        x = gb_op(b, "Add", 2, x, gb_op(b, "Gather", 2, w, ids));
    }
    x = gb_norm(b, x, wm_arch_mod(a, -1, WM_M_G_EMB_NORM), wm_arch_norm(a), "/model/embed_norm");
    const wm_module *pj = wm_arch_mod(a, -1, WM_M_G_EMB_PROJ);
    if (pj->present) x = gb_linear(b, x, pj, "/model/embed_proj");
    if (a->mask_rows) { /* padded tokens' embeddings zeroed */
        gb_scope(b, "/model/embed_mask");
        static const int64_t last[] = {-1};
        x = gb_op(b, "Mul", 2, x, gb_cast(b, gb_unsqueeze(b, "attention_mask", last, 1), WM_DT_FLOAT));
    }
    return x;
}

/* "/classifier/out_proj" from a checkpoint module name ("classifier.out_proj.weight"), prefix dropped. */
static void head_scope(const wm_arch *a, const wm_module *m, char *out, size_t n) {
    const char *w = m->w;
    size_t pl = strlen(a->prefix);
    if (pl && !strncmp(w, a->prefix, pl)) w += pl;
    size_t k = 0;
    out[k++] = '/';
    for (; *w && k + 1 < n; w++) out[k++] = *w == '.' ? '/' : *w;
    out[k] = 0;
    char *dot = strstr(out, "/weight");
    if (dot) *dot = 0;
}

static void pooled(wm_gb *b, const wm_model_ctx *c, const char *x) {
    gb_scope(b, "/pooling");
    static const int64_t last[] = {-1}, ax1[] = {1};
    const char *emb;
    if (c->r->pooling == WM_POOL_CLS) {
        emb = gb_op(b, "Gather", 2, x, gb_i64s(b, 0));
        gb_attr_i(b, "axis", 1);
    } else {
        const char *m = gb_cast(b, gb_unsqueeze(b, "attention_mask", last, 1), WM_DT_FLOAT);
        const char *sum = gb_reduce(b, "ReduceSum", gb_op(b, "Mul", 2, x, m), ax1, 1, 0);
        const char *cnt = gb_op(b, "Max", 2, gb_reduce(b, "ReduceSum", m, ax1, 1, 0), gb_f32s(b, 1e-9f));
        emb = gb_op(b, "Div", 2, sum, cnt);
    }
    if (c->r->normalize) {
        const char *n = gb_op(b, "Max", 2, gb_reduce(b, "ReduceL2", emb, last, 1, 1), gb_f32s(b, 1e-12f));
        emb = gb_op(b, "Div", 2, emb, n);
    }
    gb_rename(b, emb, "sentence_embedding");
}

/* The mean over the unpadded tokens: x [B, S, H] -> [B, H] (the attention_mask's ones). */
static const char *masked_mean(wm_gb *b, const char *x) {
    static const int64_t last[] = {-1}, ax1[] = {1};
    const char *m = gb_cast(b, gb_unsqueeze(b, "attention_mask", last, 1), WM_DT_FLOAT);
    const char *sum = gb_reduce(b, "ReduceSum", gb_op(b, "Mul", 2, x, m), ax1, 1, 0);
    return gb_op(b, "Div", 2, sum, gb_reduce(b, "ReduceSum", m, ax1, 1, 0));
}

/* A head transform (a->head_transform): norm(act(H_0 x)) on [B, H] (2-D) or every token [B, S, H]. */
static const char *transform(wm_gb *b, const wm_arch *a, const char *x, int two_d) {
    char sc[256];
    const wm_module *m0 = wm_arch_mod(a, -1, WM_M_H_0), *mn = wm_arch_mod(a, -1, WM_M_H_NORM);
    head_scope(a, m0, sc, sizeof sc);
    const char *h = gb_act(b, two_d ? gb_head_gemm(b, x, m0, sc) : gb_linear(b, x, m0, sc), a->head_act);
    head_scope(a, mn, sc, sizeof sc);
    return gb_norm(b, h, mn, wm_arch_norm(a), sc);
}

static void head(wm_gb *b, const wm_model_ctx *c, const char *x) {
    const wm_arch *a = c->a;
    char sc[256];
    switch (a->task) {
    case WM_TASK_TEXT_CLASSIFICATION: {
        const char *h;
        if (a->head_pool_mean) {
            gb_scope(b, "/model/pool_mean");
            h = masked_mean(b, x);
        } else {
            gb_scope(b, "/model/pool_first");
            h = gb_op(b, "Gather", 2, x, gb_i64s(b, 0));
            gb_attr_i(b, "axis", 1);
        }
        const wm_module *m0 = wm_arch_mod(a, -1, WM_M_H_0), *m1 = wm_arch_mod(a, -1, WM_M_H_1);
        if (a->head_transform) h = transform(b, a, h, 1);
        else {
            head_scope(a, m0, sc, sizeof sc);
            h = gb_act(b, gb_head_gemm(b, h, m0, sc), a->head_act);
        }
        head_scope(a, m1, sc, sizeof sc);
        gb_rename(b, gb_head_gemm(b, h, m1, sc), "logits");
        break;
    }
    case WM_TASK_TOKEN_CLASSIFICATION: {
        const wm_module *m = wm_arch_mod(a, -1, a->head_transform ? WM_M_H_1 : WM_M_H_0);
        if (a->head_transform) x = transform(b, a, x, 0);
        head_scope(a, m, sc, sizeof sc);
        gb_rename(b, gb_linear(b, x, m, sc), "logits");
        break;
    }
    case WM_TASK_FILL_MASK: { /* dense + activation + LayerNorm, then the tied embedding and the output bias */
        const wm_module *m0 = wm_arch_mod(a, -1, WM_M_H_0);
        head_scope(a, m0, sc, sizeof sc);
        const char *h = gb_act(b, gb_linear(b, x, m0, sc), a->head_act);
        head_scope(a, wm_arch_mod(a, -1, WM_M_H_NORM), sc, sizeof sc);
        h = gb_norm(b, h, wm_arch_mod(a, -1, WM_M_H_NORM), wm_arch_norm(a), sc);
        wm_model_lm_head(b, c, h);
        break;
    }
    case WM_TASK_QUESTION_ANSWERING: {
        const wm_module *m0 = wm_arch_mod(a, -1, a->head_transform ? WM_M_H_1 : WM_M_H_0);
        if (a->head_transform) x = transform(b, a, x, 0);
        head_scope(a, m0, sc, sizeof sc);
        const char *y = gb_linear(b, x, m0, sc);
        static const int64_t one_one[] = {1, 1}, last[] = {-1};
        const char *in[2] = {y, gb_i64(b, one_one, 2)}, *out[2];
        gb_op_multi(b, "Split", 2, in, 2, out);
        gb_attr_i(b, "axis", -1);
        gb_op_named(b, "Squeeze", "start_logits", 2, out[0], gb_i64(b, last, 1));
        gb_op_named(b, "Squeeze", "end_logits", 2, out[1], gb_i64(b, last, 1));
        break;
    }
    default:
        if (c->r->pooling != WM_POOL_NONE) {
            gb_scope(b, "/model");
            x = gb_op_named(b, "Identity", "last_hidden_state", 1, x);
            pooled(b, c, x);
        } else gb_rename(b, x, "last_hidden_state");
        break;
    }
}

/* Rotary cos / sin for positions 0..S-1 ([1, S] ids), and the sliding layers' own. */
static void rotary(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    gb_scope(b, "/model/position_ids");
    static const int64_t ax0[] = {0};
    const char *pid = gb_unsqueeze(b, positions(b, c), ax0, 1);
    wm_model_rotary(b, &a->rope, a->rope_interleaved, "rotary_emb", pid, &c->cos, &c->sin);
    if (a->local_rope)
        wm_model_rotary(b, &a->rope_local, a->rope_interleaved, "rotary_emb_local", pid, &c->cos_local, &c->sin_local);
}

/* The sliding layers' additive mask [B, 1, S, S]: keep [B, 1, 1, S] and |i - j| <= window. */
static const char *sliding_bias(wm_gb *b, wm_model_ctx *c, const char *keep) {
    const wm_arch *a = c->a;
    const char *pos = positions(b, c);
    static const int64_t ax0[] = {0}, ax1[] = {1};
    const char *d = gb_op(b, "Abs", 1, gb_op(b, "Sub", 2, gb_unsqueeze(b, pos, ax1, 1), gb_unsqueeze(b, pos, ax0, 1)));
    const char *near = gb_op(b, "LessOrEqual", 2, d, gb_i64s(b, a->window));
    return gb_op(b, "Where", 3, gb_op(b, "And", 2, keep, near), gb_f32s(b, 0.0f), gb_f32s(b, -FLT_MAX));
}

/* BERT's post-norm layer: x = norm(x + attn(x)); x = norm(x + mlp(x)). */
static const char *post_norm_layer(wm_gb *b, wm_model_ctx *c, int64_t i, const char *x) {
    const wm_arch *a = c->a;
    char sc[96];
    const char *h = wm_model_attention(b, c, (int)i, x);
    gb_scope(b, "/model/layers.%lld", (long long)i);
    x = gb_op(b, "Add", 2, x, h);
    snprintf(sc, sizeof sc, "/model/layers.%lld/attn_norm", (long long)i);
    x = gb_norm(b, x, wm_arch_mod(a, (int)i, WM_M_L_ATTN_NORM), wm_arch_norm(a), sc);
    h = wm_model_mlp(b, c, (int)i, x);
    gb_scope(b, "/model/layers.%lld", (long long)i);
    x = gb_op(b, "Add", 2, x, h);
    snprintf(sc, sizeof sc, "/model/layers.%lld/mlp_norm", (long long)i);
    return gb_norm(b, x, wm_arch_mod(a, (int)i, WM_M_L_MLP_NORM), wm_arch_norm(a), sc);
}

/* A pre-norm layer: x += attn(norm(x)) (no norm where the layer has none: ModernBERT's first); x += mlp(norm(x)). */
static const char *pre_norm_layer(wm_gb *b, wm_model_ctx *c, int64_t i, const char *x) {
    const wm_arch *a = c->a;
    char sc[96];
    const wm_module *an = wm_arch_mod(a, (int)i, WM_M_L_ATTN_NORM);
    snprintf(sc, sizeof sc, "/model/layers.%lld/attn_norm", (long long)i);
    const char *h = an->present ? gb_norm(b, x, an, wm_arch_norm(a), sc) : x;
    h = wm_model_attention(b, c, (int)i, h);
    gb_scope(b, "/model/layers.%lld", (long long)i);
    x = gb_op(b, "Add", 2, x, h);
    snprintf(sc, sizeof sc, "/model/layers.%lld/mlp_norm", (long long)i);
    h = wm_model_mlp(b, c, (int)i, gb_norm(b, x, wm_arch_mod(a, (int)i, WM_M_L_MLP_NORM), wm_arch_norm(a), sc));
    gb_scope(b, "/model/layers.%lld", (long long)i);
    return gb_op(b, "Add", 2, x, h);
}

wm_status wm_model_encoder(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    const char *x = embeddings(b, c);
    gb_scope(b, "/model/attn_mask");
    static const int64_t ax12[] = {1, 2};
    const char *keep = gb_unsqueeze(b, gb_cast(b, "attention_mask", WM_DT_BOOL), ax12, 2);
    if (a->mask_rows) { /* [B, 1, S, S]: a padded query attends nowhere (uniform weights, as transformers) */
        static const int64_t ax13[] = {1, 3};
        keep = gb_op(b, "And", 2, keep, gb_unsqueeze(b, gb_cast(b, "attention_mask", WM_DT_BOOL), ax13, 2));
    }
    c->bias_full = gb_op(b, "Where", 3, keep, gb_f32s(b, 0.0f), gb_f32s(b, -FLT_MAX));
    if (a->window) c->bias_sliding = sliding_bias(b, c, keep);
    if (a->pos == WM_POS_ROPE) rotary(b, c);
    if (a->rel_buckets) { /* one score bias [B, heads, S, S] for every layer: positions + mask */
        const char *rb = wm_model_rel_bias(b, c, "input_ids");
        gb_scope(b, "/model/attn_mask");
        c->bias_full = gb_op(b, "Add", 2, rb, c->bias_full);
    }
    if (a->dis_span) wm_model_rel_embeddings(b, c);
    for (int64_t i = 0; i < a->L && !b->st; i++) {
        if (c->progress) fprintf(stderr, "\r  export: layer %lld/%lld", (long long)i + 1, (long long)a->L);
        x = a->post_norm ? post_norm_layer(b, c, i, x) : pre_norm_layer(b, c, i, x);
    }
    if (c->progress) fprintf(stderr, "\n");
    if (!a->post_norm) x = gb_norm(b, x, wm_arch_mod(a, -1, WM_M_G_FINAL_NORM), wm_arch_norm(a), "/model/final_norm");
    head(b, c, x);
    return b->st;
}
