/*
 * fuse_engine.c - fusions into winml's own engine ops (domain ai.winml),
 * run by the engine on the graphs it opens (session creation), never by
 * `winml optimize` unless asked: no other runtime knows these ops.
 *
 * matmul_epilogue: a float32 MatMul by a constant 2-D weight whose product
 * is used once, by
 *   BiasGelu(y, b) / FastGelu(y, b)          -> MatMulBias(A, W, b) activation Gelu / FastGelu
 *   Add(y, b), b a constant [N]              -> MatMulBias(A, W, b), then the Add's sole
 *                                               Gelu / FastGelu / Relu / Sigmoid / Tanh too
 *   Gelu / FastGelu / Relu / Sigmoid / Tanh  -> MatMulBias(A, W) with that activation
 * The GEMM kernel applies bias and activation to each tile as it finishes
 * (wm_epilogue), so the product is written once instead of two or three
 * times.
 *
 * conv_activation: a float32 Conv whose output is used once, by
 *   Relu / Sigmoid / Tanh / LeakyRelu         -> com.microsoft FusedConv with that activation
 *   Add(y, r), r of y's very shape (residual) -> FusedConv(X, W, B, Z = r), then the Add's sole
 *                                                Relu / Sigmoid / Tanh / LeakyRelu too
 * FusedConv adds Z and applies the activation to each output tile while it
 * is in cache (ONNX Runtime's CPU provider runs the same op).
 */
#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"

/* The activation name MatMulBias takes for node a applied to x alone (no extra input), or NULL. */
static const char *act_of(const wm_onnx_node *a) {
    if (!a || a->n_input < 1) return NULL;
    if ((wm_opt_is(a, "Gelu") && !wm_graph_node_attr(a, "approximate")) || (wm_opt_is_ms(a, "Gelu"))) return "Gelu";
    if (wm_opt_is_ms(a, "FastGelu") && !wm_opt_in(a, 1)) return "FastGelu";
    if (wm_opt_is(a, "Relu")) return "Relu";
    if (wm_opt_is(a, "Sigmoid")) return "Sigmoid";
    if (wm_opt_is(a, "Tanh")) return "Tanh";
    return NULL;
}

/* A constant float32 vector of exactly n elements (rank 1) named b. */
static int bias_vec(const wm_graph *g, const char *b, int64_t n) {
    const wm_onnx_tensor *t = b ? wm_graph_constant(g, b) : NULL;
    return t && t->data_type == WM_DT_FLOAT && t->n_dims == 1 && t->dims[0] == n;
}

static wm_status epilogue_one(wm_pass_ctx *c, wm_onnx_node *mm) {
    wm_graph *g = c->g;
    const char *a = wm_opt_in(mm, 0), *w = wm_opt_in(mm, 1), *y = wm_opt_out(mm, 0);
    const wm_onnx_tensor *wt = w ? wm_graph_constant(g, w) : NULL;
    if (!a || !y || !wt || wt->n_dims != 2 || wt->data_type != WM_DT_FLOAT) return WM_OK;
    if (wm_shapes_dtype(c->sh, a) != WM_DT_FLOAT || wm_shapes_rank(c->sh, a) < 1) return WM_OK;
    if (wm_opt_is_graph_output(g, y)) return WM_OK;
    int64_t n = wt->dims[1];
    wm_onnx_node *u = wm_opt_sole_consumer(g, y), *last = NULL;
    const char *bias = NULL, *act = NULL;
    if (!u) return WM_OK;
    if ((wm_opt_is_ms(u, "BiasGelu") || wm_opt_is_ms(u, "FastGelu")) && u->n_input == 2 &&
        wm_opt_in(u, 0) && !strcmp(u->input[0], y) && bias_vec(g, wm_opt_in(u, 1), n)) {
        bias = u->input[1];
        act = wm_opt_is_ms(u, "BiasGelu") ? "Gelu" : "FastGelu";
        last = u;
    } else if (wm_opt_is(u, "Add") && bias_vec(g, wm_m_other(u, y), n)) {
        bias = wm_m_other(u, y);
        last = u;
        const char *z = wm_opt_out(u, 0);
        wm_onnx_node *v = z && !wm_opt_is_graph_output(g, z) ? wm_opt_sole_consumer(g, z) : NULL;
        if ((act = act_of(v))) last = v;
    } else if ((act = act_of(u))) {
        last = u;
    } else {
        return WM_OK;
    }
    const char *in[3] = {a, w, bias}, *out[1] = {last->output[0]};
    wm_onnx_node *f = wm_opt_replace(g, last, "MatMulBias", "ai.winml", in, bias ? 3 : 2, out, 1, c->err);
    if (!f || (act && wm_graph_set_attr_string(g, f, "activation", act, c->err)) ||
        wm_opt_need_opset(g, "ai.winml", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_matmul_epilogue(wm_pass_ctx *c) { return wm_opt_each_op(c, "MatMul", epilogue_one); }

/* ---------------------------------------------------------------- Conv + residual + activation */

/* FusedConv's activation name for node a (a sole-input activation it supports), its alpha in *alpha */
static const char *conv_act_of(const wm_onnx_node *a, float *alpha) {
    if (!a || a->n_input != 1) return NULL;
    if (wm_opt_is(a, "Relu")) return "Relu";
    if (wm_opt_is(a, "Sigmoid")) return "Sigmoid";
    if (wm_opt_is(a, "Tanh")) return "Tanh";
    if (wm_opt_is(a, "LeakyRelu")) {
        *alpha = wm_opt_attr_f(a, "alpha", 0.01f);
        return "LeakyRelu";
    }
    return NULL;
}

static wm_status conv_one(wm_pass_ctx *c, wm_onnx_node *cv) {
    wm_graph *g = c->g;
    const char *x = wm_opt_in(cv, 0), *w = wm_opt_in(cv, 1), *y = wm_opt_out(cv, 0);
    if (!x || !w || !y || cv->n_input > 3 || wm_shapes_dtype(c->sh, x) != WM_DT_FLOAT) return WM_OK;
    if (!wm_graph_constant(g, w) || wm_opt_is_graph_output(g, y)) return WM_OK;
    wm_onnx_node *u = wm_opt_sole_consumer(g, y), *last = NULL;
    const char *z = NULL, *act = NULL;
    float alpha = 0;
    if (wm_opt_is(u, "Add")) {
        z = wm_m_other(u, y);
        if (!z || !strcmp(z, y) || wm_graph_constant(g, z) || !wm_shapes_same(c->sh, z, y) ||
            wm_shapes_dtype(c->sh, z) != WM_DT_FLOAT)
            return WM_OK;
        last = u;
        const char *s = wm_opt_out(u, 0);
        wm_onnx_node *v = s && !wm_opt_is_graph_output(g, s) ? wm_opt_sole_consumer(g, s) : NULL;
        if ((act = conv_act_of(v, &alpha))) last = v;
    } else if ((act = conv_act_of(u, &alpha))) {
        last = u;
    } else {
        return WM_OK;
    }
    const char *in[4] = {x, w, wm_opt_in(cv, 2) ? cv->input[2] : "", z}, *out[1] = {last->output[0]};
    wm_onnx_node *f = wm_opt_replace(g, last, "FusedConv", "com.microsoft", in, z ? 4 : (size_t)cv->n_input, out, 1,
                                     c->err);
    if (!f || wm_graph_copy_attrs(g, f, cv, c->err) ||
        (act && wm_graph_set_attr_string(g, f, "activation", act, c->err)) ||
        (act && !strcmp(act, "LeakyRelu") && wm_graph_set_attr_floats(g, f, "activation_params", &alpha, 1, c->err)) ||
        wm_opt_need_opset(g, "com.microsoft", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_conv_activation(wm_pass_ctx *c) { return wm_opt_each_op(c, "Conv", conv_one); }
