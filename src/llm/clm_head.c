/*
 * clm_head.c - the last-position head of a causal LM graph (see clm_head.h).
 *
 * Recognized heads (what our builder, Optimum and torch.onnx exports write, before
 * or after quantization):
 *   X [B, S, H] -> Reshape [-1, H] -> HEAD -> Reshape [B, S, V] -> logits
 *   X [B, S, H] -> HEAD -> logits
 * either possibly followed by a Cast (fp16 builds keep float32 logits), with HEAD possibly followed by
 * a soft-cap (x / c, Tanh, x * c with c a constant scalar: row by row, so it may stay where it is), where HEAD
 * is MatMul, MatMulNBits, Gemm (2-D form only) or a dynamically quantized product
 * (int8 builds): DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scale)
 * [-> Add(bias)]. That one's activation scale then comes from the last position
 * alone, as in every decode step, instead of from the whole prompt.
 * The rewrite slices X to its last position (Slice axis 1, -1:) before the head;
 * in the first form the trailing Reshape (whose shape is computed from S) becomes
 * an Unsqueeze of axis 1. Anything else is left as it is.
 */
#include "llm/clm_head.h"

#include <stdint.h>
#include <string.h>

#include "opt/opt_util.h"

static int only_use(const wm_graph *g, const char *name) {
    size_t n = 0;
    wm_graph_consumers(g, name, &n);
    const wm_value *v = wm_graph_find_value(g, name);
    return n == 1 && v && !v->output;
}

static wm_onnx_node *sole_producer(const wm_graph *g, const char *v) {
    return v && *v && only_use(g, v) ? wm_graph_producer(g, v) : NULL;
}

/* The node of head t that reads the head's input: t itself, or the DynamicQuantizeLinear of a quantized head
   ending in t; NULL when t ends no head. */
static wm_onnx_node *head_entry(const wm_graph *g, wm_onnx_node *t) {
    if (wm_opt_is(t, "MatMul") || wm_opt_is(t, "Gemm") || wm_opt_is_ms(t, "MatMulNBits")) return t;
    if (wm_opt_is(t, "Add")) /* the bias */
        t = wm_graph_constant(g, wm_opt_in(t, 1) ? wm_opt_in(t, 1) : "") ? sole_producer(g, wm_opt_in(t, 0)) : NULL;
    if (!t || !wm_opt_is(t, "Mul")) return NULL;
    wm_onnx_node *c = sole_producer(g, wm_opt_in(t, 0)), *mi = c && wm_opt_is(c, "Cast") ? sole_producer(g, wm_opt_in(c, 0)) : NULL;
    wm_onnx_node *dq = mi && wm_opt_is(mi, "MatMulInteger") ? sole_producer(g, wm_opt_in(mi, 0)) : NULL;
    if (!dq || !wm_opt_is(dq, "DynamicQuantizeLinear") || dq->n_output < 3) return NULL;
    /* its zero point and scale feed only this product and its scale */
    const char *zp = wm_opt_in(mi, 2), *sc = wm_opt_out(dq, 1), *ts = wm_opt_in(t, 1);
    size_t n = 0;
    wm_graph_consumers(g, sc ? sc : "", &n);
    wm_onnx_node *sm = ts ? wm_graph_producer(g, ts) : NULL;
    if (!zp || strcmp(zp, wm_opt_out(dq, 2) ? wm_opt_out(dq, 2) : "") || !only_use(g, zp) || n != 1 || !sm ||
        !wm_opt_is(sm, "Mul") || !only_use(g, ts) || !wm_opt_in(sm, 0) || !wm_opt_in(sm, 1) ||
        (strcmp(wm_opt_in(sm, 0), sc) && strcmp(wm_opt_in(sm, 1), sc)))
        return NULL;
    return dq;
}

/* Back over a row-wise soft-cap above the head (Div or Mul by a constant scalar, Tanh; each value used only
   by the next): the first node below it, or t itself when t is not such a node. */
static wm_onnx_node *below_softcap(const wm_graph *g, wm_onnx_node *t) {
    for (int steps = 0; t && steps < 8; steps++) {
        const char *in = NULL;
        double v;
        int binary = wm_opt_is(t, "Mul") || wm_opt_is(t, "Div");
        if (wm_opt_is(t, "Tanh")) in = wm_opt_in(t, 0);
        else if (binary && wm_opt_in(t, 1) && wm_opt_const_scalar(g, wm_opt_in(t, 1), &v)) in = wm_opt_in(t, 0);
        else if (wm_opt_is(t, "Mul") && wm_opt_in(t, 0) && wm_opt_const_scalar(g, wm_opt_in(t, 0), &v)) in = wm_opt_in(t, 1);
        wm_onnx_node *p = in ? sole_producer(g, in) : NULL;
        if (!p) return t;
        t = p;
    }
    return t;
}

/* dim 1 of graph output name becomes the fixed 1 */
static void fix_dim1(wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    wm_onnx_value_info *vi = v ? v->output : NULL;
    if (!vi || !vi->type || !vi->type->tensor_type || !vi->type->tensor_type->shape) return;
    wm_onnx_shape *sh = vi->type->tensor_type->shape;
    if (sh->n_dim != 3) return;
    sh->dim[1]->dim_param = NULL;
    sh->dim[1]->dim_value = 1;
    wm_pb_set_has(&wm_onnx_dim_desc, sh->dim[1], 1);
}

int wm_clm_narrow_head(wm_graph *g, const char *logits, wm_error *err) {
    wm_onnx_node *tail = wm_graph_producer(g, logits);
    if (tail && wm_opt_is(tail, "Cast")) { /* look through a trailing Cast used only here */
        const char *ci = wm_opt_in(tail, 0);
        tail = ci && only_use(g, ci) ? wm_graph_producer(g, ci) : NULL;
    }
    if (!tail) return 0;
    wm_onnx_node *head = tail, *r2 = NULL, *r1 = NULL;
    if (wm_opt_is(tail, "Reshape")) {
        r2 = tail;
        head = wm_graph_producer(g, wm_opt_in(r2, 0) ? wm_opt_in(r2, 0) : "");
        if (!head || !only_use(g, wm_opt_in(r2, 0))) return 0;
    }
    if (!(head = head_entry(g, below_softcap(g, head))) || !wm_opt_in(head, 0)) return 0;
    const char *a = wm_opt_in(head, 0), *x = a;
    if (r2) { /* the 2-D form: the head's input is X flattened by a Reshape used only here */
        r1 = wm_graph_producer(g, a);
        if (!r1 || !wm_opt_is(r1, "Reshape") || !only_use(g, a) || !wm_opt_in(r1, 0)) return 0;
        x = wm_opt_in(r1, 0);
    } else if (wm_opt_is(head, "Gemm")) {
        return 0; /* a 2-D Gemm straight to logits: no sequence axis to slice */
    }
    const wm_value *xv = wm_graph_find_value(g, x);
    const wm_onnx_type *xt = xv ? xv->type : NULL;
    if (xt && xt->tensor_type && xt->tensor_type->shape && xt->tensor_type->shape->n_dim != 3) return 0;
    /* the slice */
    int64_t st = -1, en = INT64_MAX, ax = 1;
    const char *c_st = wm_opt_const_i64(g, "clm_last_start", &st, 1, 0, err);
    const char *c_en = c_st ? wm_opt_const_i64(g, "clm_last_end", &en, 1, 0, err) : NULL;
    const char *c_ax = c_en ? wm_opt_const_i64(g, "clm_last_axis", &ax, 1, 0, err) : NULL;
    const char *xs = c_ax ? wm_graph_unique_name(g, "clm_last_hidden") : NULL;
    if (!xs) return -1;
    const char *sin[] = {x, c_st, c_en, c_ax};
    if (!wm_graph_add_node(g, "Slice", NULL, wm_graph_unique_name(g, "/clm_head/Slice"), sin, 4, &xs, 1, err)) return -1;
    if (wm_graph_set_input(g, r1 ? r1 : head, 0, xs, err)) return -1;
    if (r2) { /* [B, V] -> [B, 1, V] */
        const char *hout = wm_opt_in(r2, 0), *rout = wm_opt_out(r2, 0); /* arena strings outlive the node */
        if (!rout || wm_graph_remove_node(g, r2, err)) return -1;
        int64_t one = 1;
        const char *uin[2] = {hout, NULL};
        size_t nin = 1;
        if (wm_graph_opset(g, "") >= 13) {
            if (!(uin[1] = wm_opt_const_i64(g, "clm_last_axes", &one, 1, 0, err))) return -1;
            nin = 2;
        }
        wm_onnx_node *u = wm_graph_add_node(g, "Unsqueeze", NULL, wm_graph_unique_name(g, "/clm_head/Unsqueeze"), uin,
                                            nin, &rout, 1, err);
        if (!u) return -1;
        if (nin == 1 && wm_graph_set_attr_ints(g, u, "axes", &one, 1, err)) return -1;
    }
    fix_dim1(g, logits);
    if (wm_graph_topo_sort(g, err)) return -1;
    return 1;
}
