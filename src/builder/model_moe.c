/*
 * model_moe.c - a sparse layer's MLP as onnxruntime's com.microsoft MoE: router logits = x R^T, then MoE over the
 * rows [B*S, H] with the experts stacked into two new initializers, fc1 [E, 2I, H] (each expert's gate and up rows
 * interleaved: gate_0, up_0, gate_1, up_1 ..., what activation_type swiglu with swiglu_fusion 1 reads) and fc2
 * [E, H, I] (the down projections as stored); top-k over the router's softmax, renormalized per the family / config.
 * A shared expert is a dense SwiGLU MLP (its gate and up projections apart, Qwen2-MoE, or fused gate rows then up
 * rows, GraniteMoeShared) added times sigmoid(shared_expert_gate x) (Qwen2-MoE) or as it is (a->shared_gated 0).
 *
 * The stacked tensors are assembled one layer at a time (fc1, then fc2) from the checkpoint's per-expert matrices
 * (or its stacked [E, 2I, H] gate-then-up and [E, H, I] tensors: wm_moe_stacked) read as float32, so a build holds
 * at most one layer's fc1 in memory besides the sink's buffers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/model_impl.h"
#include "core/error.h"

static const char *oom(wm_gb *b) {
    if (!b->st) b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory stacking the experts");
    return "<error>";
}

/* The checkpoint tensor of expert e's projection which in layer (checked by wm_moe_check). */
static const wm_st_tensor *expert(const wm_model_ctx *c, int layer, int64_t e, int which) {
    char name[160];
    if (!wm_moe_expert_name(c->a, layer, e, which, name, sizeof name)) return NULL;
    return wm_st_find(c->st, name);
}

/*
 * fc1 [E, 2I, H]: row 2r of expert e is its gate row r, row 2r + 1 its up row r (swiglu_fusion 1), in the current
 * scope as <scope>.fc1; random values in random mode.
 */
static const char *stack_fc1(wm_gb *b, const wm_model_ctx *c, int layer) {
    const wm_arch *a = c->a;
    int64_t E = a->n_experts, I = a->moe_I, H = a->H, dims[3] = {E, 2 * I, H};
    if (!c->st) return gb_weight(b, ".fc1", NULL, dims, 3, 0, GB_W_MATRIX);
    int stacked = wm_moe_stacked(a);
    size_t per = (size_t)(I * H);
    /* g: one expert's gate rows then its up rows (stacked: read into vals as stored, then copied out expert by
       expert and interleaved in place) */
    float *vals = malloc((size_t)E * 2 * per * sizeof *vals), *g = malloc(2 * per * sizeof *g);
    if (!vals || !g) {
        free(vals);
        free(g);
        return oom(b);
    }
    const char *w = "<error>";
    if (stacked) {
        const wm_st_tensor *t = expert(c, layer, 0, 0);
        if (!t) goto vanished;
        wm_st_read_f32(t, vals);
        wm_wsink_release(b->sink, t);
    }
    for (int64_t e = 0; e < E; e++) {
        float *dst = vals + (size_t)e * 2 * per;
        if (stacked) {
            memcpy(g, dst, 2 * per * sizeof *g);
        } else {
            const wm_st_tensor *tg = expert(c, layer, e, 0), *tu = expert(c, layer, e, 1);
            if (!tg || !tu) goto vanished;
            wm_st_read_f32(tg, g);
            wm_st_read_f32(tu, g + per);
            wm_wsink_release(b->sink, tg);
            wm_wsink_release(b->sink, tu);
        }
        const float *u = g + per;
        for (int64_t r = 0; r < I; r++) {
            memcpy(dst + (size_t)(2 * r) * (size_t)H, g + (size_t)(r * H), (size_t)H * sizeof *g);
            memcpy(dst + (size_t)(2 * r + 1) * (size_t)H, u + (size_t)(r * H), (size_t)H * sizeof *u);
        }
    }
    w = gb_weight_experts(b, ".fc1", vals, dims, 3, 1, layer);
    goto done;
vanished:
    if (!b->st) b->st = wm_err(b->err, WM_ERR_INTERNAL, "the experts of layer %d vanished", layer);
done:
    free(vals);
    free(g);
    return w;
}

/* fc2 [E, H, I]: the down projections [H, I] one after another (or the stacked tensor as stored), as <scope>.fc2. */
static const char *stack_fc2(wm_gb *b, const wm_model_ctx *c, int layer) {
    const wm_arch *a = c->a;
    int64_t E = a->n_experts, I = a->moe_I, H = a->H, dims[3] = {E, H, I};
    if (!c->st) return gb_weight(b, ".fc2", NULL, dims, 3, 0, GB_W_MATRIX);
    size_t per = (size_t)(H * I);
    float *vals = malloc((size_t)E * per * sizeof *vals);
    if (!vals) return oom(b);
    int stacked = wm_moe_stacked(a);
    for (int64_t e = 0; e < (stacked ? 1 : E); e++) {
        const wm_st_tensor *t = expert(c, layer, e, 2);
        if (!t) {
            free(vals);
            if (!b->st) b->st = wm_err(b->err, WM_ERR_INTERNAL, "expert %lld of layer %d vanished", (long long)e, layer);
            return "<error>";
        }
        wm_st_read_f32(t, vals + (size_t)e * per); /* stacked: all E experts at once */
        wm_wsink_release(b->sink, t);
    }
    const char *w = gb_weight_experts(b, ".fc2", vals, dims, 3, 2, layer);
    free(vals);
    return w;
}

const char *wm_model_moe(wm_gb *b, const wm_model_ctx *c, int layer, const char *h) {
    const wm_arch *a = c->a;
    char sc[160], sub[192];
    snprintf(sc, sizeof sc, "%s/layers.%d/moe", c->root ? c->root : "/model", layer);
    gb_scope(b, "%s", sc);
    int64_t flat[2] = {-1, a->H};
    const char *x = gb_reshape(b, h, flat, 2);
    snprintf(sub, sizeof sub, "%s/router", sc);
    const char *logits = gb_linear(b, x, wm_arch_mod(a, layer, WM_M_L_ROUTER), sub);
    gb_scope(b, "%s/experts", sc);
    const char *fc1 = stack_fc1(b, c, layer);
    const char *fc2 = stack_fc2(b, c, layer);
    const char *in[5] = {x, logits, fc1, "", fc2};
    const char *y = gb_op_ms(b, "MoE", 5, in);
    gb_attr_i(b, "k", a->top_k);
    gb_attr_s(b, "activation_type", "swiglu");
    gb_attr_i(b, "swiglu_fusion", 1);
    gb_attr_i(b, "normalize_routing_weights", a->moe_norm);
    if (a->shared_I > 0) {
        char ssc[200];
        snprintf(ssc, sizeof ssc, "%s/shared_expert", sc);
        const char *m = wm_model_gated_product(b, a, layer, x, ssc,
                                               wm_arch_mod(a, layer, WM_M_L_SH_GATE_UP)->present ? WM_M_L_SH_GATE_UP : -1,
                                               WM_M_L_SH_GATE, WM_M_L_SH_UP, a->shared_I);
        snprintf(sub, sizeof sub, "%s/shared_expert/down_proj", sc);
        const char *d = gb_linear(b, m, wm_arch_mod(a, layer, WM_M_L_SH_DOWN), sub);
        if (a->shared_gated) {
            snprintf(sub, sizeof sub, "%s/shared_expert_gate", sc);
            const char *sg = gb_linear(b, x, wm_arch_mod(a, layer, WM_M_L_SH_ROUTER), sub);
            gb_scope(b, "%s", sc);
            d = gb_op(b, "Mul", 2, d, gb_op(b, "Sigmoid", 1, sg));
        }
        gb_scope(b, "%s", sc);
        y = gb_op(b, "Add", 2, y, d);
    }
    gb_scope(b, "%s", sc);
    return gb_op(b, "Reshape", 2, y, gb_op(b, "Shape", 1, h));
}
