/*
 * fuse_act.c - activation and projection fusions: GELU (erf form) -> Gelu,
 * GELU (tanh form) -> FastGelu, bias Add + Gelu/FastGelu -> BiasGelu /
 * FastGelu(x, bias), x*Sigmoid(a*x) -> QuickGelu (SiLU: a = 1), and 2-D
 * MatMul + bias Add -> Gemm.
 */
#include <math.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"

static int is_x(const char *a, const char *x) { return a && x && !strcmp(a, x); }

/*
 * Given t = (1 + f(x)) (output of the Add after Erf/Tanh), finds the node
 * computing 0.5 * x * t in any association: Mul(Mul(x, 0.5), t),
 * Mul(x, Mul(0.5, t)), Mul(Mul(x, t), 0.5). Returns that last Mul.
 */
static wm_onnx_node *half_x_times(const wm_graph *g, const char *t, const char *x) {
    wm_onnx_node *m = wm_m_sole(g, t, "Mul");
    const char *o = m ? wm_m_other(m, t) : NULL;
    if (!o) return NULL;
    if (is_x(o, x)) { /* x * t, then * 0.5 */
        wm_onnx_node *h = wm_m_sole(g, m->output[0], "Mul");
        return h && wm_m_const_operand(g, h, "Mul", 0.5, 1e-6) ? h : NULL;
    }
    if (wm_opt_const_is(g, o, 0.5, 1e-6)) { /* 0.5 * t, then * x */
        wm_onnx_node *h = wm_m_sole(g, m->output[0], "Mul");
        return h && is_x(wm_m_other(h, m->output[0]), x) ? h : NULL;
    }
    wm_onnx_node *hx = wm_m_prod(g, o, "Mul"); /* (0.5 * x) * t */
    const char *xx = hx ? wm_m_const_operand(g, hx, "Mul", 0.5, 1e-6) : NULL;
    return is_x(xx, x) ? m : NULL;
}

/* x / sqrt(2) or x * (1/sqrt(2)): returns x. */
static const char *over_sqrt2(const wm_graph *g, const char *name) {
    wm_onnx_node *p = wm_graph_producer(g, name);
    if (wm_opt_is(p, "Div") && wm_opt_const_is(g, wm_opt_in(p, 1), M_SQRT2, 1e-4)) return wm_opt_in(p, 0);
    if (wm_opt_is(p, "Mul")) return wm_m_const_operand(g, p, "Mul", M_SQRT1_2, 1e-4);
    return NULL;
}

static wm_status emit_unary(wm_pass_ctx *c, wm_onnx_node *last, const char *op, const char *dom, const char *x) {
    const char *in[1] = {x}, *out[1] = {last->output[0]};
    wm_onnx_node *f = wm_opt_replace(c->g, last, op, dom, in, 1, out, 1, c->err);
    if (!f || (dom && wm_opt_need_opset(c->g, dom, 1, c->err))) return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

static wm_status gelu_one(wm_pass_ctx *c, wm_onnx_node *erf) {
    wm_graph *g = c->g;
    const char *x = over_sqrt2(g, wm_opt_in(erf, 0));
    wm_onnx_node *add = wm_m_sole(g, erf->output[0], "Add");
    if (!x || !add || !wm_m_const_operand(g, add, "Add", 1.0, 1e-6)) return WM_OK;
    wm_onnx_node *last = half_x_times(g, add->output[0], x);
    if (!last) return WM_OK;
    int std = wm_graph_opset(g, "") >= 20;
    return emit_unary(c, last, "Gelu", std ? NULL : "com.microsoft", x);
}

wm_status wm_pass_gelu(wm_pass_ctx *c) { return wm_opt_each_op(c, "Erf", gelu_one); }

/* x + 0.044715 * x^3 (x^3 as Pow(x,3) or x*x*x): returns x. */
static const char *cubic_inner(const wm_graph *g, const char *name) {
    wm_onnx_node *a = wm_m_prod(g, name, "Add");
    for (int k = 0; a && k < 2; k++) {
        const char *x = wm_opt_in(a, (size_t)k);
        wm_onnx_node *m = wm_m_prod(g, wm_opt_in(a, (size_t)(1 - k)), "Mul");
        const char *cube = m ? wm_m_const_operand(g, m, "Mul", 0.044715, 1e-5) : NULL;
        wm_onnx_node *p = cube ? wm_graph_producer(g, cube) : NULL;
        if (wm_opt_is(p, "Pow") && is_x(wm_opt_in(p, 0), x) && wm_opt_const_is(g, wm_opt_in(p, 1), 3.0, 0)) return x;
        if (wm_opt_is(p, "Mul")) { /* x * (x * x) or (x * x) * x */
            const char *o = wm_m_other(p, x);
            wm_onnx_node *sq = o ? wm_m_prod(g, o, "Mul") : NULL;
            if (sq && is_x(sq->input[0], x) && is_x(sq->input[1], x)) return x;
        }
    }
    return NULL;
}

static wm_status fastgelu_one(wm_pass_ctx *c, wm_onnx_node *th) {
    wm_graph *g = c->g;
    wm_onnx_node *m = wm_opt_src(g, th, 0, "Mul");
    const char *inner = m ? wm_m_const_operand(g, m, "Mul", sqrt(2.0 / M_PI), 1e-4) : NULL;
    const char *x = inner ? cubic_inner(g, inner) : NULL;
    wm_onnx_node *add = wm_m_sole(g, th->output[0], "Add");
    if (!x || !add || !wm_m_const_operand(g, add, "Add", 1.0, 1e-6)) return WM_OK;
    wm_onnx_node *last = half_x_times(g, add->output[0], x);
    return last ? emit_unary(c, last, "FastGelu", "com.microsoft", x) : WM_OK;
}

wm_status wm_pass_fastgelu(wm_pass_ctx *c) { return wm_opt_each_op(c, "Tanh", fastgelu_one); }

/* ---------------------------------------------------------------- bias + gelu */

static wm_status biasgelu_one(wm_pass_ctx *c, wm_onnx_node *ge) {
    wm_graph *g = c->g;
    int fast = wm_opt_is_ms(ge, "FastGelu");
    if (!fast && !wm_opt_is_ms(ge, "Gelu") && !wm_opt_is(ge, "Gelu")) return WM_OK;
    if (fast && wm_opt_in(ge, 1)) return WM_OK;
    if (wm_opt_is(ge, "Gelu") && wm_graph_node_attr(ge, "approximate")) return WM_OK;
    const char *x = wm_opt_in(ge, 0);
    wm_onnx_node *add = wm_m_prod(g, x, "Add");
    if (!add || wm_opt_nuses(g, x) != 1) return WM_OK;
    int64_t h = wm_shapes_dim(c->sh, x, -1);
    for (int k = 0; k < 2; k++) {
        const char *b = wm_opt_in(add, (size_t)k), *a = wm_opt_in(add, (size_t)(1 - k));
        const wm_onnx_tensor *bt = b ? wm_graph_constant(g, b) : NULL;
        if (!bt || bt->n_dims != 1 || h <= 0 || bt->dims[0] != h || wm_graph_constant(g, a)) continue;
        if (wm_shapes_rank(c->sh, a) < 1 || wm_shapes_dim(c->sh, a, -1) != h) continue;
        const char *in[2] = {a, b}, *out[1] = {ge->output[0]};
        wm_onnx_node *f = wm_opt_replace(g, ge, fast ? "FastGelu" : "BiasGelu", "com.microsoft", in, 2, out, 1, c->err);
        if (!f || wm_opt_need_opset(g, "com.microsoft", 1, c->err)) return c->err->status ? c->err->status : WM_ERR_NOMEM;
        c->fired++;
        return WM_OK;
    }
    return WM_OK;
}

wm_status wm_pass_biasgelu(wm_pass_ctx *c) {
    size_t n;
    wm_onnx_node **v = wm_opt_snapshot(c->g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) s = biasgelu_one(c, v[i]);
    free(v);
    return s;
}

/* ---------------------------------------------------------------- QuickGelu / SiLU */

static wm_status quickgelu_one(wm_pass_ctx *c, wm_onnx_node *sg) {
    wm_graph *g = c->g;
    const char *in = wm_opt_in(sg, 0), *cx[2];
    double ca[2], a;
    int nc = 0;
    wm_onnx_node *pre = wm_m_prod(g, in, "Mul");
    for (int k = 0; pre && k < 2 && !nc; k++)
        if (wm_opt_const_scalar(g, wm_opt_in(pre, (size_t)k), &a)) {
            cx[nc] = wm_opt_in(pre, (size_t)(1 - k));
            ca[nc++] = a;
        }
    cx[nc] = in; /* SiLU: x * Sigmoid(x) */
    ca[nc++] = 1.0;
    wm_onnx_node *m = wm_m_sole(g, sg->output[0], "Mul");
    for (int i = 0; m && i < nc; i++) {
        if (!is_x(wm_m_other(m, sg->output[0]), cx[i])) continue;
        const char *ins[1] = {cx[i]}, *out[1] = {m->output[0]};
        wm_onnx_node *f = wm_opt_replace(g, m, "QuickGelu", "com.microsoft", ins, 1, out, 1, c->err);
        if (!f || wm_graph_set_attr_float(g, f, "alpha", (float)ca[i], c->err) ||
            wm_opt_need_opset(g, "com.microsoft", 1, c->err))
            return c->err->status ? c->err->status : WM_ERR_NOMEM;
        c->fired++;
        return WM_OK;
    }
    return WM_OK;
}

wm_status wm_pass_quickgelu(wm_pass_ctx *c) { return wm_opt_each_op(c, "Sigmoid", quickgelu_one); }

/* ---------------------------------------------------------------- MatMul + Add -> Gemm */

static wm_status gemm_one(wm_pass_ctx *c, wm_onnx_node *mm) {
    wm_graph *g = c->g;
    const char *a = wm_opt_in(mm, 0), *w = wm_opt_in(mm, 1), *y = wm_opt_out(mm, 0);
    const wm_onnx_tensor *wt = w ? wm_graph_constant(g, w) : NULL;
    if (!a || !wt || wt->n_dims != 2 || wm_shapes_rank(c->sh, a) != 2) return WM_OK;
    int32_t dt = wm_shapes_dtype(c->sh, a);
    if (dt != WM_DT_FLOAT && dt != WM_DT_FLOAT16 && dt != WM_DT_DOUBLE && dt != WM_DT_BFLOAT16) return WM_OK;
    wm_onnx_node *add = wm_m_sole(g, y, "Add");
    const char *b = add ? wm_m_other(add, y) : NULL;
    const wm_onnx_tensor *bt = b ? wm_graph_constant(g, b) : NULL;
    if (!bt || bt->n_dims > 2 || bt->data_type != dt) return WM_OK;
    if (bt->n_dims >= 1 && bt->dims[bt->n_dims - 1] != wt->dims[1] && bt->dims[bt->n_dims - 1] != 1) return WM_OK;
    if (bt->n_dims == 2 && bt->dims[0] != 1) return WM_OK;
    const char *in[3] = {a, w, b}, *out[1] = {add->output[0]};
    wm_onnx_node *f = wm_opt_replace(g, add, "Gemm", NULL, in, 3, out, 1, c->err);
    if (!f) return c->err->status;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_gemm(wm_pass_ctx *c) { return wm_opt_each_op(c, "MatMul", gemm_one); }

/* ---------------------------------------------------------------- Reshape + 2-D Gemm + Reshape -> MatMul + Add */

/* dims of a equal dims of b except the last (both known ranks, every dim symbolically equal). */
static int same_leading(const wm_shapes *sh, const char *a, const char *b) {
    const wm_tinfo *x = wm_shapes_get(sh, a), *y = wm_shapes_get(sh, b);
    if (!x || !y || x->rank < 2 || x->rank != y->rank) return 0;
    for (int i = 0; i + 1 < x->rank; i++)
        if (!wm_sdim_eq(x->dim[i], y->dim[i])) return 0;
    return 1;
}

static wm_status gemm3d_one(wm_pass_ctx *c, wm_onnx_node *gm) {
    wm_graph *g = c->g;
    if (wm_opt_attr_i(gm, "transA", 0) || wm_opt_attr_i(gm, "transB", 0) || wm_opt_attr_f(gm, "alpha", 1) != 1.0f ||
        wm_opt_attr_f(gm, "beta", 1) != 1.0f)
        return WM_OK;
    wm_onnx_node *r1 = wm_opt_src(g, gm, 0, "Reshape");
    wm_onnx_node *r2 = wm_m_sole(g, gm->output[0], "Reshape");
    const char *x = r1 ? wm_opt_in(r1, 0) : NULL, *w = wm_opt_in(gm, 1), *b = wm_opt_in(gm, 2);
    if (!r2 || !x || !w || wm_shapes_rank(c->sh, x) < 3 || !same_leading(c->sh, x, r2->output[0])) return WM_OK;
    const wm_onnx_tensor *wt = wm_graph_constant(g, w);
    if (!wt || wt->n_dims != 2 || wm_shapes_dim(c->sh, r2->output[0], -1) != wt->dims[1] ||
        wm_shapes_dim(c->sh, x, -1) != wt->dims[0])
        return WM_OK;
    const wm_onnx_tensor *bt = b ? wm_graph_constant(g, b) : NULL;
    if (b && (!bt || bt->n_dims != 1 || bt->dims[0] != wt->dims[1])) return WM_OK;
    const char *mi[2] = {x, w}, *mm = wm_opt_emit(g, "MatMul", NULL, mi, 2, c->err);
    if (!mm) return c->err->status;
    const char *ai[2] = {mm, b}, *out[1] = {r2->output[0]};
    if (!wm_opt_replace(g, r2, b ? "Add" : "Identity", NULL, ai, b ? 2 : 1, out, 1, c->err)) return c->err->status;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_gemm3d(wm_pass_ctx *c) { return wm_opt_each_op(c, "Gemm", gemm3d_one); }
