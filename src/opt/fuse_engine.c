/*
 * fuse_engine.c - fusions into winml's own engine ops (domain ai.winml),
 * run by the engine on the graphs it opens (session creation), never by
 * `winml optimize` unless asked: no other runtime knows these ops.
 *
 * matmul_epilogue: a float32 or float16 MatMul by a constant 2-D weight of
 * its type whose product is used once, by
 *   BiasGelu(y, b) / FastGelu(y, b)          -> MatMulBias(A, W, b) activation Gelu / FastGelu
 *   Add(y, b), b a constant [N]              -> MatMulBias(A, W, b), then the Add's sole
 *                                               Gelu / FastGelu / Relu / Sigmoid / Tanh / QuickGelu too
 *   Gelu / FastGelu / Relu / Sigmoid / Tanh  -> MatMulBias(A, W) with that activation
 *   (and com.microsoft QuickGelu in each place: activation QuickGelu, activation_params [alpha])
 * The GEMM kernel applies bias and activation to each tile as it finishes
 * (wm_epilogue), so the product is written once instead of two or three
 * times (float16: in float32, rounded to half once, where the separate
 * activation read the product rounded to half; float16 MatMuls that
 * matmul_group joins stay as they are).
 *
 * conv_activation: a float32 Conv whose output is used once, by
 *   Relu / Sigmoid / Tanh / LeakyRelu         -> com.microsoft FusedConv with that activation
 *   Add(y, r), r of y's very shape (residual) -> FusedConv(X, W, B, Z = r), then the Add's sole
 *                                                Relu / Sigmoid / Tanh / LeakyRelu too
 * FusedConv adds Z and applies the activation to each output tile while it
 * is in cache (ONNX Runtime's CPU provider runs the same op).
 *
 * matmul_group: nodes that read the same input with weights of the same kind
 * (a decoder's q/k/v projections, its gate and up projections)
 *   com.microsoft MatMulNBits, same K, bits, block_size and accuracy_level,
 *   constant B and scales and nothing else -> one ai.winml MatMulNBitsGroup
 *   (src/ops/nbits_group.c) with their outputs
 *   float16 MatMul by a constant 2-D float16 weight of the same K -> one
 *   ai.winml MatMulGroup (src/ops/matmul_group.c)
 * One weight stream and one preparation of A per step of decode instead of
 * one per projection.
 *
 * nhwc_layout: chains of float32 2-D Conv / FusedConv (group 1, constant
 * weights, activation other than HardSigmoid) and MaxPool (no Indices) run
 * channels-last as ai.winml NhwcConv / NhwcMaxPool (src/ops/conv_nhwc.c):
 * a convolution then needs no transposes in or out of its GEMM. A node
 * converts when it is linked to another convertible node (its X or Z made
 * by one, or its output read by one), so a lone Conv keeps NCHW. Tensors
 * cross the layout boundary once each through a Transpose: NCHW values
 * into the chain (perm 0,2,3,1), chain values any other node or a graph
 * output reads (perm 0,3,1,2, under the value's own name). A 3x3
 * convolution with a static output of 7 x 7 or more gets the winograd
 * attribute (its tile: see nhwc_wino_tile).
 *
 * matmul_transpose: a float32 or float16 MatMul whose B is a Transpose of a
 * computed value (not a constant: those fold) that swaps its last two axes
 * and keeps the others -> com.microsoft FusedMatMul(A, X) with transB 1 (the
 * GEMM reads B transposed as it packs it; float16 at few rows: the half GEMV
 * reads X's rows as dot products). Attention as exported reads a key cache
 * [B, H, S, D] through such a Transpose every decoder step: on whisper-tiny's
 * cross-attention (1500 positions) those copies were half of a step's time
 * (in an fp16 build, a float16 Transpose, 52% of a step).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"

/* The activation name MatMulBias takes for node a applied to x alone (no extra input), or NULL; QuickGelu's alpha
 * in *alpha. */
static const char *act_of(const wm_onnx_node *a, float *alpha) {
    if (!a || a->n_input < 1) return NULL;
    if (wm_opt_is_ms(a, "QuickGelu") && a->n_input == 1) {
        *alpha = wm_opt_attr_f(a, "alpha", 1.702f);
        return "QuickGelu";
    }
    if ((wm_opt_is(a, "Gelu") && !wm_graph_node_attr(a, "approximate")) || (wm_opt_is_ms(a, "Gelu"))) return "Gelu";
    if (wm_opt_is_ms(a, "FastGelu") && !wm_opt_in(a, 1)) return "FastGelu";
    if (wm_opt_is(a, "Relu")) return "Relu";
    if (wm_opt_is(a, "Sigmoid")) return "Sigmoid";
    if (wm_opt_is(a, "Tanh")) return "Tanh";
    return NULL;
}

/* A constant vector of element type dt and exactly n elements (rank 1) named b. */
static int bias_vec(const wm_graph *g, const char *b, int64_t n, int32_t dt) {
    const wm_onnx_tensor *t = b ? wm_graph_constant(g, b) : NULL;
    return t && t->data_type == dt && t->n_dims == 1 && t->dims[0] == n;
}

static int64_t mmg_k(const wm_pass_ctx *c, const wm_onnx_node *n);

/* 1 when float16 MatMul mm has a sibling matmul_group would join it with (another float16 MatMul by a constant of
 * the same K on the same A): those stay for the group (one weight stream and one A for q/k/v at decode). */
static int group_candidate(const wm_pass_ctx *c, const wm_onnx_node *mm) {
    int64_t k = mmg_k(c, mm);
    size_t nu = 0;
    const wm_use *u = k ? wm_graph_consumers(c->g, mm->input[0], &nu) : NULL;
    for (size_t i = 0; i < nu; i++)
        if (u[i].node != mm && mmg_k(c, u[i].node) == k) return 1;
    return 0;
}

static wm_status epilogue_one(wm_pass_ctx *c, wm_onnx_node *mm) {
    wm_graph *g = c->g;
    const char *a = wm_opt_in(mm, 0), *w = wm_opt_in(mm, 1), *y = wm_opt_out(mm, 0);
    const wm_onnx_tensor *wt = w ? wm_graph_constant(g, w) : NULL;
    int32_t dt = wt ? wt->data_type : 0;
    if (!a || !y || !wt || wt->n_dims != 2 || (dt != WM_DT_FLOAT && dt != WM_DT_FLOAT16)) return WM_OK;
    if (wm_shapes_dtype(c->sh, a) != dt || wm_shapes_rank(c->sh, a) < 1) return WM_OK;
    if (wm_opt_is_graph_output(g, y) || (dt == WM_DT_FLOAT16 && group_candidate(c, mm))) return WM_OK;
    int64_t n = wt->dims[1];
    wm_onnx_node *u = wm_opt_sole_consumer(g, y), *last = NULL;
    const char *bias = NULL, *act = NULL;
    float alpha = 0.0f;
    if (!u) return WM_OK;
    if ((wm_opt_is_ms(u, "BiasGelu") || wm_opt_is_ms(u, "FastGelu")) && u->n_input == 2 &&
        wm_opt_in(u, 0) && !strcmp(u->input[0], y) && bias_vec(g, wm_opt_in(u, 1), n, dt)) {
        bias = u->input[1];
        act = wm_opt_is_ms(u, "BiasGelu") ? "Gelu" : "FastGelu";
        last = u;
    } else if (wm_opt_is(u, "Add") && bias_vec(g, wm_m_other(u, y), n, dt)) {
        bias = wm_m_other(u, y);
        last = u;
        const char *z = wm_opt_out(u, 0);
        wm_onnx_node *v = z && !wm_opt_is_graph_output(g, z) ? wm_opt_sole_consumer(g, z) : NULL;
        if ((act = act_of(v, &alpha))) last = v;
    } else if ((act = act_of(u, &alpha))) {
        last = u;
    } else {
        return WM_OK;
    }
    const char *in[3] = {a, w, bias}, *out[1] = {last->output[0]};
    wm_onnx_node *f = wm_opt_replace(g, last, "MatMulBias", "ai.winml", in, bias ? 3 : 2, out, 1, c->err);
    if (!f || (act && wm_graph_set_attr_string(g, f, "activation", act, c->err)) ||
        (act && !strcmp(act, "QuickGelu") && wm_graph_set_attr_floats(g, f, "activation_params", &alpha, 1, c->err)) ||
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

/* ---------------------------------------------------------------- MatMul of a transposed B */

static wm_status transb_one(wm_pass_ctx *c, wm_onnx_node *mm) {
    wm_graph *g = c->g;
    const char *a = wm_opt_in(mm, 0), *y = wm_opt_out(mm, 0);
    wm_onnx_node *t = wm_opt_src(g, mm, 1, "Transpose");
    const char *x = t ? wm_opt_in(t, 0) : NULL;
    int32_t dt = a ? wm_shapes_dtype(c->sh, a) : 0;
    if (!a || !y || !x || wm_graph_constant(g, x) || !(dt == WM_DT_FLOAT || dt == WM_DT_FLOAT16) ||
        wm_shapes_dtype(c->sh, x) != dt)
        return WM_OK;
    size_t np = 0;
    const int64_t *perm = wm_opt_attr_ints(t, "perm", &np);
    int rank = wm_shapes_rank(c->sh, x);
    if (!perm || np < 2 || rank != (int)np || rank > WM_MAX_RANK || wm_shapes_rank(c->sh, a) < 2) return WM_OK;
    for (size_t i = 0; i + 2 < np; i++)
        if (perm[i] != (int64_t)i) return WM_OK;
    if (perm[np - 2] != (int64_t)np - 1 || perm[np - 1] != (int64_t)np - 2) return WM_OK;
    const char *in[2] = {a, x}, *out[1] = {y};
    wm_onnx_node *f = wm_opt_replace(g, mm, "FusedMatMul", "com.microsoft", in, 2, out, 1, c->err);
    if (!f || wm_graph_set_attr_int(g, f, "transB", 1, c->err) || wm_opt_need_opset(g, "com.microsoft", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++; /* the Transpose goes with the dead nodes when nothing else reads it */
    return WM_OK;
}

wm_status wm_pass_matmul_transpose(wm_pass_ctx *c) { return wm_opt_each_op(c, "MatMul", transb_one); }

/* ---------------------------------------------------------------- matmul_group */

#define NBG_MAX 8 /* parts of a group at most (the op's WM_NBG_MAX) */

/* A MatMulNBits with only A, constant uint8 B and constant float / float16 scales, and one output. */
static int nbg_candidate(const wm_graph *g, const wm_onnx_node *n) {
    if (!wm_opt_is_ms(n, "MatMulNBits") || !wm_opt_in(n, 0) || !wm_opt_out(n, 0) || n->n_output != 1) return 0;
    for (size_t i = 3; i < n->n_input; i++)
        if (wm_opt_in(n, i)) return 0;
    const wm_onnx_tensor *b = wm_opt_in(n, 1) ? wm_graph_constant(g, n->input[1]) : NULL;
    const wm_onnx_tensor *s = wm_opt_in(n, 2) ? wm_graph_constant(g, n->input[2]) : NULL;
    return b && s && b->data_type == WM_DT_UINT8 && (s->data_type == WM_DT_FLOAT || s->data_type == WM_DT_FLOAT16) &&
           wm_opt_attr_i(n, "N", 0) > 0;
}

static int nbg_same(const wm_onnx_node *a, const wm_onnx_node *b) {
    static const char *const attrs[] = {"K", "bits", "block_size"};
    for (size_t i = 0; i < 3; i++)
        if (wm_opt_attr_i(a, attrs[i], -1) != wm_opt_attr_i(b, attrs[i], -1)) return 0;
    return wm_opt_attr_i(a, "accuracy_level", 0) == wm_opt_attr_i(b, "accuracy_level", 0);
}

/* A float16 MatMul by a constant 2-D float16 weight: its K, else 0 */
static int64_t mmg_k(const wm_pass_ctx *c, const wm_onnx_node *n) {
    if (!wm_opt_is(n, "MatMul") || !wm_opt_in(n, 0) || !wm_opt_out(n, 0) || n->n_output != 1 ||
        wm_shapes_dtype(c->sh, n->input[0]) != WM_DT_FLOAT16)
        return 0;
    const wm_onnx_tensor *b = wm_opt_in(n, 1) ? wm_graph_constant(c->g, n->input[1]) : NULL;
    return b && b->data_type == WM_DT_FLOAT16 && b->n_dims == 2 && b->dims[1] > 0 ? b->dims[0] : 0;
}

/* v[i] and the unused nodes after it that join it (joins(c, v[i], v[j])) into part, marked used; how many */
static size_t siblings(wm_pass_ctx *c, wm_onnx_node **v, size_t nn, char *used, size_t i,
                       int (*joins)(wm_pass_ctx *, const wm_onnx_node *, const wm_onnx_node *), wm_onnx_node **part) {
    size_t np = 0;
    part[np++] = v[i];
    for (size_t j = i + 1; j < nn && np < NBG_MAX; j++)
        if (!used[j] && joins(c, v[i], v[j])) part[np++] = v[j], used[j] = 1;
    return np;
}

/* The parts' nodes replaced by one node op (domain ai.winml) on in, with the parts' outputs; NULL with c->err set */
static wm_onnx_node *replace_parts(wm_pass_ctx *c, wm_onnx_node **part, size_t np, const char *op,
                                   const char *const *in, size_t n_in) {
    const char *out[NBG_MAX];
    for (size_t k = 0; k < np; k++) out[k] = part[k]->output[0];
    for (size_t k = 0; k < np; k++)
        if (wm_graph_remove_node(c->g, part[k], c->err)) return NULL;
    wm_onnx_node *f = wm_opt_add(c->g, op, "ai.winml", op, in, n_in, out, np, c->err);
    return f && !wm_opt_need_opset(c->g, "ai.winml", 1, c->err) ? f : NULL;
}

/* the input names first: most nodes read another value, and are passed over without a constant or shape lookup */
static int same_input(const wm_onnx_node *a, const wm_onnx_node *b) {
    return wm_opt_in(b, 0) && !strcmp(a->input[0], b->input[0]);
}

static int mmg_joins(wm_pass_ctx *c, const wm_onnx_node *a, const wm_onnx_node *b) {
    return same_input(a, b) && mmg_k(c, b) == mmg_k(c, a);
}

static int nbg_joins(wm_pass_ctx *c, const wm_onnx_node *a, const wm_onnx_node *b) {
    return same_input(a, b) && nbg_candidate(c->g, b) && nbg_same(a, b);
}

/* float16 MatMul siblings of v[i] -> MatMulGroup (A, B_1, ..., B_P) */
static wm_status mmg_group(wm_pass_ctx *c, wm_onnx_node **v, size_t nn, char *used, size_t i) {
    wm_onnx_node *part[NBG_MAX];
    size_t np = siblings(c, v, nn, used, i, mmg_joins, part);
    if (np < 2) return WM_OK;
    const char *in[1 + NBG_MAX] = {v[i]->input[0]};
    for (size_t k = 0; k < np; k++) in[1 + k] = part[k]->input[1];
    if (!replace_parts(c, part, np, "MatMulGroup", in, 1 + np)) return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

/* MatMulNBits siblings of v[i] -> MatMulNBitsGroup (A, B_1, scales_1, ...) with the shared attributes and Ns */
static wm_status nbg_group(wm_pass_ctx *c, wm_onnx_node **v, size_t nn, char *used, size_t i) {
    wm_onnx_node *part[NBG_MAX];
    size_t np = siblings(c, v, nn, used, i, nbg_joins, part);
    if (np < 2) return WM_OK;
    static const char *const names[4] = {"K", "bits", "block_size", "accuracy_level"};
    const int64_t at[4] = {wm_opt_attr_i(v[i], "K", 0), wm_opt_attr_i(v[i], "bits", 4),
                           wm_opt_attr_i(v[i], "block_size", 0), wm_opt_attr_i(v[i], "accuracy_level", 0)};
    const char *in[1 + 2 * NBG_MAX] = {v[i]->input[0]};
    int64_t ns[NBG_MAX];
    for (size_t k = 0; k < np; k++) {
        in[1 + 2 * k] = part[k]->input[1], in[2 + 2 * k] = part[k]->input[2];
        ns[k] = wm_opt_attr_i(part[k], "N", 0);
    }
    wm_onnx_node *f = replace_parts(c, part, np, "MatMulNBitsGroup", in, 1 + 2 * np);
    wm_status st = f ? WM_OK : c->err->status ? c->err->status : WM_ERR_NOMEM;
    for (size_t k = 0; !st && k < 4; k++) st = wm_graph_set_attr_int(c->g, f, names[k], at[k], c->err);
    if (!st) st = wm_graph_set_attr_ints(c->g, f, "Ns", ns, np, c->err);
    if (!st) c->fired++;
    return st;
}

wm_status wm_pass_matmul_group(wm_pass_ctx *c) {
    size_t nn;
    wm_onnx_node **v = wm_opt_snapshot(c->g, &nn, c->err);
    if (!v) return WM_ERR_NOMEM;
    char *used = calloc(nn + 1, 1);
    wm_status st = used ? WM_OK : wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nn && !st; i++) {
        if (used[i]) continue;
        if (mmg_k(c, v[i])) st = mmg_group(c, v, nn, used, i);
        else if (nbg_candidate(c->g, v[i])) st = nbg_group(c, v, nn, used, i);
    }
    free(used);
    free(v);
    return st;
}

/* ---------------------------------------------------------------- nhwc_layout */

/* A float32 4-D activation value (the X or Z of a 2-D node). */
static int f32_4d(const wm_pass_ctx *c, const char *v) {
    return v && wm_shapes_dtype(c->sh, v) == WM_DT_FLOAT && wm_shapes_rank(c->sh, v) == 4;
}

static int nhwc_ok(const wm_pass_ctx *c, const wm_onnx_node *n) {
    const char *y = wm_opt_out(n, 0);
    if (!y || n->n_output != 1 || n->n_input > 4 || !f32_4d(c, wm_opt_in(n, 0))) return 0;
    if (wm_opt_is(n, "MaxPool")) {
        size_t nk;
        return wm_opt_attr_ints(n, "kernel_shape", &nk) && nk == 2 && !wm_opt_attr_i(n, "storage_order", 0);
    }
    if (!wm_opt_is(n, "Conv") && !wm_opt_is_ms(n, "FusedConv")) return 0;
    const wm_onnx_tensor *w = wm_opt_in(n, 1) ? wm_graph_constant(c->g, n->input[1]) : NULL;
    if (!w || w->data_type != WM_DT_FLOAT || w->n_dims != 4 || wm_opt_attr_i(n, "group", 1) != 1) return 0;
    const char *b = wm_opt_in(n, 2);
    if (b && wm_shapes_dtype(c->sh, b) != WM_DT_FLOAT) return 0;
    if (wm_opt_in(n, 3) && !f32_4d(c, n->input[3])) return 0;
    const wm_onnx_attr *a = wm_graph_node_attr(n, "activation");
    return !(a && a->s.n == 11 && !memcmp(a->s.p, "HardSigmoid", 11));
}

/* the activation inputs of a convertible node: X, and a FusedConv's Z */
static int nhwc_slot(const wm_onnx_node *n, int32_t slot) { return slot == 0 || (slot == 3 && !wm_opt_is(n, "MaxPool")); }

typedef struct nhwc_map {
    const char **from, **to; /* an NCHW name and its channels-last twin */
    size_t n, cap;
} nhwc_map;

static const char *map_get(const nhwc_map *m, const char *k) {
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->from[i], k)) return m->to[i];
    return NULL;
}

static int map_put(nhwc_map *m, const char *k, const char *v) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        const char **f = realloc(m->from, cap * sizeof *f), **t = f ? realloc(m->to, cap * sizeof *t) : NULL;
        if (f) m->from = f;
        if (!t) return -1;
        m->to = t, m->cap = cap;
    }
    m->from[m->n] = k, m->to[m->n++] = v;
    return 0;
}

/* v's channels-last twin: a converted node's output, or a Transpose of v made once */
static const char *nhwc_of(wm_pass_ctx *c, nhwc_map *m, const char *v) {
    const char *t = map_get(m, v);
    if (t) return t;
    static const int64_t perm[4] = {0, 2, 3, 1};
    wm_onnx_node *tr = wm_opt_emit_node(c->g, "Transpose", NULL, &v, 1, &t, c->err);
    if (!tr || wm_graph_set_attr_ints(c->g, tr, "perm", perm, 4, c->err) || map_put(m, v, t)) return NULL;
    return t;
}

/*
 * The Winograd output tile (the NhwcConv's winograd attribute, src/ops/conv_wino.c) for a 3x3 convolution n whose
 * output size is static: 4 from 12 x 12 up, 2 from 7 x 7, else 0 (direct), and 0 below 16 channels in or out.
 * F(4x4, 3x3) takes 2.25 multiplications per output and input channel where the direct sum takes 9, F(2x2, 3x3) 4;
 * smaller images give too few tiles (each a row of the GEMMs) to pay for the transforms. ResNet-50 on 2 threads, per
 * layer, several alternated runs (stop 23): 56 x 56 x 64 1.07 -> 0.63-0.83 ms, 28 x 28 x 128 1.06 -> 0.54-0.63 ms,
 * 7 x 7 x 512 (F(2x2, 3x3) on 16 tiles of an 8 x 8 cover) 1.26-1.31 -> 1.03-1.16 ms. WM_WINOGRAD=0 turns it off,
 * WM_WINOGRAD=2 or 4 takes that tile wherever it applies (for comparisons).
 */
static int64_t nhwc_wino_tile(const wm_pass_ctx *c, const wm_onnx_node *n) {
    const wm_onnx_tensor *w = wm_graph_constant(c->g, n->input[1]);
    if (!w || w->dims[2] != 3 || w->dims[3] != 3 || w->dims[0] < 16 || w->dims[1] < 16) return 0;
    int64_t oh = wm_shapes_dim(c->sh, n->output[0], 2), ow = wm_shapes_dim(c->sh, n->output[0], 3);
    if (oh < 7 || ow < 7) return 0;
    const char *env = getenv("WM_WINOGRAD");
    if (env && *env) return *env == '2' ? 2 : *env == '4' ? 4 : 0;
    return oh >= 12 && ow >= 12 ? 4 : 2;
}

wm_status wm_pass_nhwc_layout(wm_pass_ctx *c) {
    wm_graph *g = c->g;
    size_t nn;
    wm_status st = wm_graph_topo_sort(g, c->err); /* earlier passes append their nodes */
    if (st) return st;
    wm_onnx_node **v = wm_opt_snapshot(g, &nn, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_ptrset ok = {0}, keep = {0};
    nhwc_map m = {0};
    for (size_t i = 0; i < nn; i++)
        if (nhwc_ok(c, v[i]) && wm_ptrset_add(&ok, v[i]) < 0) st = wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nn && !st; i++) { /* linked to another convertible node */
        const wm_onnx_node *n = v[i];
        if (!wm_ptrset_has(&ok, n)) continue;
        int linked = 0;
        for (int32_t s = 0; s < 4 && !linked; s++)
            if (nhwc_slot(n, s) && wm_opt_in(n, (size_t)s)) {
                const wm_onnx_node *p = wm_graph_producer(g, n->input[s]);
                linked = p && wm_ptrset_has(&ok, p);
            }
        size_t nu;
        const wm_use *u = wm_graph_consumers(g, n->output[0], &nu);
        for (size_t k = 0; k < nu && !linked; k++) linked = wm_ptrset_has(&ok, u[k].node) && nhwc_slot(u[k].node, u[k].slot);
        if (linked && wm_ptrset_add(&keep, n) < 0) st = wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nn && !st; i++) { /* graph order: a node's converted producers come first */
        wm_onnx_node *n = v[i];
        if (!wm_ptrset_has(&keep, n)) continue;
        const char *y = n->output[0], *in[4] = {NULL, "", "", ""};
        size_t n_in = wm_opt_is(n, "MaxPool") ? 1 : n->n_input;
        for (size_t s = 0; s < n_in && !st; s++) {
            const char *x = wm_opt_in(n, s);
            in[s] = !x ? "" : nhwc_slot(n, (int32_t)s) ? nhwc_of(c, &m, x) : x;
            if (!in[s]) st = c->err->status ? c->err->status : WM_ERR_NOMEM;
        }
        if (st) break;
        /* readers that stay NCHW (or a graph output) get the value back under its own name */
        int back = wm_opt_is_graph_output(g, y);
        size_t nu;
        const wm_use *u = wm_graph_consumers(g, y, &nu);
        for (size_t k = 0; k < nu; k++) back |= !wm_ptrset_has(&keep, u[k].node) || !nhwc_slot(u[k].node, u[k].slot);
        const char *yn = wm_opt_name(g, "nhwc"), *op = wm_opt_is(n, "MaxPool") ? "NhwcMaxPool" : "NhwcConv";
        int64_t wino = wm_opt_is(n, "MaxPool") ? 0 : nhwc_wino_tile(c, n); /* before n goes */
        /* the node keeps its name (profiles and errors name what the user's graph calls it) */
        wm_onnx_node *f = yn && !wm_graph_remove_node(g, n, c->err)
                              ? wm_opt_add(g, op, "ai.winml", n->name && *n->name ? n->name : op, in, n_in, &yn, 1, c->err)
                              : NULL;
        if (!f || wm_graph_copy_attrs(g, f, n, c->err) || map_put(&m, y, yn) ||
            (wino && wm_graph_set_attr_int(g, f, "winograd", wino, c->err))) {
            st = c->err->status ? c->err->status : wm_err(c->err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        if (back) {
            static const int64_t perm[4] = {0, 3, 1, 2};
            wm_onnx_node *t = wm_opt_add(g, "Transpose", NULL, "Transpose", &yn, 1, &y, 1, c->err);
            if (!t || wm_graph_set_attr_ints(g, t, "perm", perm, 4, c->err)) {
                st = c->err->status ? c->err->status : WM_ERR_NOMEM;
                break;
            }
        }
        c->fired++;
    }
    if (!st && c->fired) st = wm_opt_need_opset(g, "ai.winml", 1, c->err);
    free(m.from), free(m.to), free(v);
    wm_ptrset_free(&ok), wm_ptrset_free(&keep);
    return st;
}
