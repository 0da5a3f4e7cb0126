/*
 * gb_blocks.c - the building blocks every architecture shares: linear
 * layers, normalizations and activations, in standard ONNX ops.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "builder/gb.h"

typedef struct saved_scope {
    char s[256];
} saved_scope;

/* Switches the scope to sc, keeping the caller's in *sv (restore with leave). */
static void enter(wm_gb *b, const char *sc, saved_scope *sv) {
    memcpy(sv->s, b->scope, sizeof sv->s);
    snprintf(b->scope, sizeof b->scope, "%s", sc);
}
static void leave(wm_gb *b, const saved_scope *sv) { memcpy(b->scope, sv->s, sizeof b->scope); }

/*
 * y = x W + b over the last axis, W stored [in, out] (Linear weights are
 * transposed on the way, Conv1D ones are already [in, out]).
 */
const char *gb_linear(wm_gb *b, const char *x, const wm_module *m, const char *scope) {
    saved_scope sv;
    enter(b, scope, &sv);
    int64_t d[2] = {m->in, m->out};
    const char *w = gb_weight(b, ".weight", m->wt, d, 2, m->kind == WM_MK_LINEAR, GB_W_MATRIX);
    const char *y = gb_op(b, "MatMul", 2, x, w);
    if (m->has_bias) y = gb_op(b, "Add", 2, y, gb_weight(b, ".bias", m->bt, &m->out, 1, 0, GB_W_ZEROS));
    leave(b, &sv);
    return y;
}

const char *gb_linear_again(wm_gb *b, const char *x, const wm_module *m, const char *scope) {
    saved_scope sv;
    enter(b, scope, &sv);
    const char *y = gb_op(b, "MatMul", 2, x, gb_weight_existing(b, ".weight"));
    if (m->has_bias) y = gb_op(b, "Add", 2, y, gb_weight_existing(b, ".bias"));
    leave(b, &sv);
    return y;
}

/* A head linear on [B, K] as Gemm(x, W[out, in], b, transB=1): the checkpoint layout as it is (leaves the scope
   set to scope). */
const char *gb_head_gemm(wm_gb *b, const char *x, const wm_module *m, const char *scope) {
    gb_scope(b, "%s", scope);
    int64_t d[2] = {m->out, m->in};
    const char *w = gb_weight(b, ".weight", m->wt, d, 2, 0, GB_W_MATRIX);
    const char *bias = m->has_bias ? gb_weight(b, ".bias", m->bt, &m->out, 1, 0, GB_W_ZEROS) : NULL;
    const char *y = gb_op(b, "Gemm", bias ? 3 : 2, x, w, bias);
    gb_attr_i(b, "transB", 1);
    return y;
}

/*
 * LayerNormalization (opset 17) over the last axis, or RMSNorm decomposed
 * as transformers computes it: x / sqrt(mean(x^2) + eps) * w. A weight
 * offset (Gemma's x * (1 + w)) is folded into the stored weight, so the
 * graph is a plain RMSNorm that the optimizer fuses as any other.
 */
const char *gb_norm(wm_gb *b, const char *x, const wm_module *m, wm_norm_spec ns, const char *scope) {
    const char *y = NULL;
    double eps = ns.eps;
    saved_scope sv;
    enter(b, scope, &sv);
    {
        const char *w = gb_weight_add(b, ".weight", m->wt, &m->in, 1, GB_W_ONES, ns.w_offset);
        if (ns.kind == WM_NORM_LAYER) {
            const char *bias = m->has_bias ? gb_weight(b, ".bias", m->bt, &m->in, 1, 0, GB_W_ZEROS) : NULL;
            y = gb_op(b, "LayerNormalization", bias ? 3 : 2, x, w, bias);
            gb_attr_i(b, "axis", -1);
            gb_attr_f(b, "epsilon", (float)eps);
        } else {
            static const int64_t last[] = {-1};
            const char *sq = gb_op(b, "Pow", 2, x, gb_f32s(b, 2.0f));
            const char *var = gb_reduce(b, "ReduceMean", sq, last, 1, 1);
            const char *den = gb_op(b, "Sqrt", 1, gb_op(b, "Add", 2, var, gb_f32s(b, (float)eps)));
            y = gb_op(b, "Mul", 2, gb_op(b, "Div", 2, x, den), w);
        }
    }
    leave(b, &sv);
    return y;
}

const char *gb_act(wm_gb *b, const char *x, wm_act act) {
    switch (act) {
    case WM_ACT_GELU: { /* 0.5 x (1 + erf(x / sqrt 2)) */
        const char *e = gb_op(b, "Erf", 1, gb_op(b, "Div", 2, x, gb_f32s(b, (float)M_SQRT2)));
        return gb_op(b, "Mul", 2, gb_op(b, "Mul", 2, x, gb_op(b, "Add", 2, e, gb_f32s(b, 1.0f))), gb_f32s(b, 0.5f));
    }
    case WM_ACT_GELU_TANH: { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const char *c = gb_op(b, "Mul", 2, gb_op(b, "Pow", 2, x, gb_f32s(b, 3.0f)), gb_f32s(b, 0.044715f));
        const char *in = gb_op(b, "Mul", 2, gb_op(b, "Add", 2, x, c), gb_f32s(b, (float)sqrt(2.0 / M_PI)));
        const char *t = gb_op(b, "Add", 2, gb_op(b, "Tanh", 1, in), gb_f32s(b, 1.0f));
        return gb_op(b, "Mul", 2, gb_op(b, "Mul", 2, x, t), gb_f32s(b, 0.5f));
    }
    case WM_ACT_SILU: return gb_op(b, "Mul", 2, x, gb_op(b, "Sigmoid", 1, x));
    case WM_ACT_QUICK_GELU:
        return gb_op(b, "Mul", 2, x, gb_op(b, "Sigmoid", 1, gb_op(b, "Mul", 2, x, gb_f32s(b, 1.702f))));
    case WM_ACT_RELU: return gb_op(b, "Relu", 1, x);
    case WM_ACT_TANH: return gb_op(b, "Tanh", 1, x);
    case WM_ACT_NONE: return x;
    }
    return x;
}
