/*
 * fuse_norm.c - normalization fusions: LayerNormalization from its
 * decomposition, RMSNorm -> SimplifiedLayerNormalization, and a residual
 * Add in front of either -> Skip(Simplified)LayerNormalization (com.microsoft)
 * with a projection bias folded in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"
#include "opt/opt.h"

int wm_m_reduces_last_axis(const wm_pass_ctx *c, const wm_onnx_node *r) {
    if (!wm_opt_is(r, "ReduceMean") || wm_opt_attr_i(r, "keepdims", 1) != 1) return 0;
    int rank = wm_shapes_rank(c->sh, wm_opt_in(r, 0));
    int64_t ax[4];
    size_t na = 0;
    if (wm_opt_in(r, 1)) {
        wm_ct t;
        if (!wm_opt_const(c->g, r->input[1], 4, &t)) return 0;
        na = (size_t)t.n;
        for (size_t i = 0; i < na; i++) ax[i] = wm_ct_geti(&t, i);
        wm_ct_free(&t);
    } else {
        const int64_t *a = wm_opt_attr_ints(r, "axes", &na);
        if (!a || na > 4) return 0;
        for (size_t i = 0; i < na; i++) ax[i] = a[i];
    }
    if (na != 1) return 0;
    return ax[0] == -1 || (rank > 0 && ax[0] == rank - 1);
}

wm_onnx_node *wm_m_consumer(const wm_graph *g, const char *name, const char *op) {
    size_t n;
    const wm_use *u = wm_graph_consumers(g, name, &n);
    for (size_t i = 0; i < n; i++)
        if (u[i].slot >= 0 && wm_opt_is(u[i].node, op)) return u[i].node;
    return NULL;
}

int wm_m_vec_const(const wm_graph *g, const char *name, int64_t n) {
    const wm_onnx_tensor *t = name ? wm_graph_constant(g, name) : NULL;
    if (!t || !t->n_dims) return 0;
    for (size_t i = 0; i + 1 < t->n_dims; i++)
        if (t->dims[i] != 1) return 0;
    return t->dims[t->n_dims - 1] == n || (n < 0 && t->dims[t->n_dims - 1] > 0);
}

/* The name of a 1-D [h] copy of constant name (name itself when already 1-D); NULL with err on failure. */
static const char *as_vector(wm_pass_ctx *c, const char *name, int64_t h) {
    const wm_onnx_tensor *t = wm_graph_constant(c->g, name);
    if (t->n_dims == 1) return name;
    wm_ct v;
    if (wm_ct_from_tensor(t, 0, &v, c->err)) return NULL;
    v.rank = 1;
    v.dims[0] = h;
    const char *nm = wm_opt_name(c->g, name);
    wm_status s = nm ? wm_opt_add_ct(c->g, nm, &v, c->err) : wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    wm_ct_free(&v);
    return s ? NULL : nm;
}

/* A constant vector of h elements, all v, of dtype dt; returns its name. */
static const char *fill_vector(wm_pass_ctx *c, int32_t dt, int64_t h, double v) {
    wm_ct t;
    if (wm_ct_alloc(&t, dt, &h, 1, c->err)) return NULL;
    for (int64_t i = 0; i < h; i++) wm_ct_set(&t, (uint64_t)i, v);
    const char *nm = wm_opt_name(c->g, v == 0 ? "zeros" : "ones");
    wm_status s = nm ? wm_opt_add_ct(c->g, nm, &t, c->err) : wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    wm_ct_free(&t);
    return s ? NULL : nm;
}

/* x*x or Pow(x, 2): returns x. */
static const char *square_of(const wm_graph *g, const char *name) {
    wm_onnx_node *p = wm_graph_producer(g, name);
    if (wm_opt_is(p, "Pow") && wm_opt_const_is(g, wm_opt_in(p, 1), 2.0, 0)) return wm_opt_in(p, 0);
    if (wm_opt_is(p, "Mul") && p->n_input == 2 && p->input[0] && !strcmp(p->input[0], p->input[1])) return p->input[0];
    return NULL;
}

/*
 * The normalizing product around the statistics: returns the node whose
 * output is `x / sqrt(var + eps)` given the Sqrt node s and the numerator
 * name num (Div(num, s), Mul(num, Reciprocal(s)), Mul(num, Div(1, s))).
 */
static wm_onnx_node *divide_by(const wm_graph *g, wm_onnx_node *sq, const char **num) {
    const char *so = wm_opt_out(sq, 0);
    size_t nu;
    const wm_use *u = wm_graph_consumers(g, so, &nu);
    for (size_t i = 0; i < nu; i++) {
        wm_onnx_node *d = u[i].node;
        if (wm_opt_is(d, "Div") && u[i].slot == 1) {
            if (wm_opt_const_is(g, wm_opt_in(d, 0), 1.0, 0)) { /* 1/sqrt then Mul */
                wm_onnx_node *m = wm_m_consumer(g, wm_opt_out(d, 0), "Mul");
                if (m) {
                    *num = wm_m_other(m, d->output[0]);
                    return m;
                }
                continue;
            }
            *num = wm_opt_in(d, 0);
            return d;
        }
        if (wm_opt_is(d, "Reciprocal")) {
            wm_onnx_node *m = wm_m_consumer(g, wm_opt_out(d, 0), "Mul");
            if (m) {
                *num = wm_m_other(m, d->output[0]);
                return m;
            }
        }
    }
    return NULL;
}

/* The scale Mul after the normalized value (either operand order): its output and the weight name. */
static wm_onnx_node *scale_after(const wm_graph *g, const char *normed, int64_t h, const char **w) {
    wm_onnx_node *m = wm_m_sole(g, normed, "Mul");
    const char *o = m ? wm_m_other(m, normed) : NULL;
    if (!o || !wm_m_vec_const(g, o, h)) return NULL;
    *w = o;
    return m;
}

/* ---------------------------------------------------------------- LayerNorm */

static wm_status layernorm_one(wm_pass_ctx *c, wm_onnx_node *sq) {
    wm_graph *g = c->g;
    wm_onnx_node *add_eps = wm_opt_src(g, sq, 0, "Add");
    double eps;
    if (!add_eps) return WM_OK;
    wm_onnx_node *var = NULL;
    for (int k = 0; k < 2 && !var; k++) {
        wm_onnx_node *r = wm_opt_src(g, add_eps, (size_t)k, "ReduceMean");
        if (r && wm_opt_const_scalar(g, wm_opt_in(add_eps, (size_t)(1 - k)), &eps)) var = r;
    }
    if (!var || !wm_m_reduces_last_axis(c, var)) return WM_OK;
    const char *d = square_of(g, wm_opt_in(var, 0));
    wm_onnx_node *sub = d ? wm_m_prod(g, d, "Sub") : NULL;
    wm_onnx_node *mean = sub ? wm_opt_src(g, sub, 1, "ReduceMean") : NULL;
    const char *x = sub ? wm_opt_in(sub, 0) : NULL;
    if (!mean || !wm_m_reduces_last_axis(c, mean) || strcmp(wm_opt_in(mean, 0), x) != 0) return WM_OK;
    const char *num = NULL;
    wm_onnx_node *norm = divide_by(g, sq, &num);
    if (!norm || !num || strcmp(num, d) != 0) return WM_OK;
    int64_t h = wm_shapes_dim(c->sh, x, -1);
    int32_t dt = wm_shapes_dtype(c->sh, x);
    const char *w = NULL, *b = NULL;
    wm_onnx_node *last = norm, *mul = scale_after(g, norm->output[0], h, &w);
    if (mul) {
        last = mul;
        if (h < 0) h = wm_graph_constant(g, w)->dims[wm_graph_constant(g, w)->n_dims - 1];
        wm_onnx_node *ab = wm_m_sole(g, mul->output[0], "Add");
        const char *bo = ab ? wm_m_other(ab, mul->output[0]) : NULL;
        if (bo && wm_m_vec_const(g, bo, h)) {
            b = bo;
            last = ab;
        }
    }
    if (h <= 0 || !dt) return WM_OK;
    if (w && !(w = as_vector(c, w, h))) return c->err->status;
    if (b && !(b = as_vector(c, b, h))) return c->err->status;
    if (!w && !(w = fill_vector(c, dt, h, 1.0))) return c->err->status;
    if (!b && !(b = fill_vector(c, dt, h, 0.0))) return c->err->status;
    const char *in[3] = {x, w, b}, *out[1] = {last->output[0]};
    wm_onnx_node *ln = wm_opt_replace(g, last, "LayerNormalization", NULL, in, 3, out, 1, c->err);
    if (!ln || wm_graph_set_attr_int(g, ln, "axis", -1, c->err) ||
        wm_graph_set_attr_float(g, ln, "epsilon", (float)eps, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_layernorm(wm_pass_ctx *c) { return wm_opt_each_op(c, "Sqrt", layernorm_one); }

/* ---------------------------------------------------------------- RMSNorm */

static wm_status rmsnorm_one(wm_pass_ctx *c, wm_onnx_node *sq) {
    wm_graph *g = c->g;
    wm_onnx_node *add_eps = wm_opt_src(g, sq, 0, "Add"), *ms = NULL;
    double eps;
    for (int k = 0; add_eps && k < 2 && !ms; k++) {
        wm_onnx_node *r = wm_opt_src(g, add_eps, (size_t)k, "ReduceMean");
        if (r && wm_opt_const_scalar(g, wm_opt_in(add_eps, (size_t)(1 - k)), &eps)) ms = r;
    }
    if (!ms || !wm_m_reduces_last_axis(c, ms)) return WM_OK;
    const char *x = square_of(g, wm_opt_in(ms, 0));
    if (!x || wm_m_prod(g, x, "Sub")) return WM_OK; /* a centered input is LayerNorm's */
    const char *num = NULL;
    wm_onnx_node *norm = divide_by(g, sq, &num);
    if (!norm || !num || strcmp(num, x) != 0) return WM_OK;
    int64_t h = wm_shapes_dim(c->sh, x, -1);
    int32_t dt = wm_shapes_dtype(c->sh, x);
    const char *w = NULL;
    wm_onnx_node *last = norm, *mul = scale_after(g, norm->output[0], h, &w);
    if (mul) {
        last = mul;
        if (h < 0) h = wm_graph_constant(g, w)->dims[wm_graph_constant(g, w)->n_dims - 1];
    }
    if (h <= 0 || !dt) return WM_OK;
    if (w && !(w = as_vector(c, w, h))) return c->err->status;
    if (!w && !(w = fill_vector(c, dt, h, 1.0))) return c->err->status;
    const char *in[2] = {x, w}, *out[1] = {last->output[0]};
    wm_onnx_node *ln = wm_opt_replace(g, last, "SimplifiedLayerNormalization", NULL, in, 2, out, 1, c->err);
    if (!ln || wm_graph_set_attr_int(g, ln, "axis", -1, c->err) ||
        wm_graph_set_attr_float(g, ln, "epsilon", (float)eps, c->err) ||
        wm_graph_set_attr_int(g, ln, "stash_type", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_rmsnorm(wm_pass_ctx *c) { return wm_opt_each_op(c, "Sqrt", rmsnorm_one); }

/* ---------------------------------------------------------------- SkipLayerNorm */

/* When name = Add(MatMul-ish output, bias[h]) with one use: the pre-bias value and the bias. */
static int split_bias(const wm_pass_ctx *c, const char *name, int64_t h, const char **pre, const char **bias) {
    wm_onnx_node *a = wm_m_prod(c->g, name, "Add");
    if (!a || wm_opt_nuses(c->g, name) != 1) return 0;
    for (int k = 0; k < 2; k++) {
        const char *b = wm_opt_in(a, (size_t)k), *o = wm_opt_in(a, (size_t)(1 - k));
        wm_onnx_node *mm = o ? wm_graph_producer(c->g, o) : NULL;
        if (!b || !o || !wm_m_vec_const(c->g, b, h) || wm_graph_constant(c->g, o)) continue;
        if (!mm || !(wm_opt_is(mm, "MatMul") || wm_opt_is_ms(mm, "MatMulNBits"))) continue;
        if (wm_graph_constant(c->g, b)->n_dims != 1) continue;
        *pre = o;
        *bias = b;
        return 1;
    }
    return 0;
}

static int same_dims(const wm_shapes *sh, const char *a, const char *b) {
    const wm_tinfo *x = wm_shapes_get(sh, a), *y = wm_shapes_get(sh, b);
    if (!x || !y || x->rank < 2 || x->rank > 3 || x->rank != y->rank) return 0;
    for (int i = 0; i < x->rank; i++)
        if (!wm_sdim_eq(x->dim[i], y->dim[i])) return 0;
    return 1;
}

static wm_status skipnorm_one(wm_pass_ctx *c, wm_onnx_node *ln) {
    wm_graph *g = c->g;
    int simplified = wm_opt_is(ln, "SimplifiedLayerNormalization");
    if ((!simplified && !wm_opt_is(ln, "LayerNormalization")) || !wm_opt_in(ln, 0)) return WM_OK;
    if (wm_opt_attr_i(ln, "axis", -1) != -1 && wm_opt_attr_i(ln, "axis", -1) != wm_shapes_rank(c->sh, ln->input[0]) - 1)
        return WM_OK;
    for (size_t i = 1; i < ln->n_output; i++)
        if (wm_opt_out(ln, i)) return WM_OK;
    wm_onnx_node *add = wm_opt_src(g, ln, 0, "Add");
    if (!add || add->n_input != 2) return WM_OK;
    const char *a = add->input[0], *b = add->input[1], *sum = add->output[0];
    if (!same_dims(c->sh, a, b) || wm_graph_constant(g, a) || wm_graph_constant(g, b)) return WM_OK;
    int64_t h = wm_shapes_dim(c->sh, a, -1);
    if (h <= 0) return WM_OK;
    const char *gamma = wm_opt_in(ln, 1), *beta = simplified ? NULL : wm_opt_in(ln, 2), *bias = NULL, *pre;
    if (!gamma || !wm_m_vec_const(g, gamma, h)) return WM_OK;
    if (split_bias(c, b, h, &pre, &bias)) b = pre;
    else if (split_bias(c, a, h, &pre, &bias)) {
        a = b;
        b = pre;
    }
    size_t uses = wm_opt_nuses(g, sum);
    const char *keep = uses > 1 ? sum : NULL;
    if (keep && wm_opt_is_graph_output(g, sum)) return WM_OK;
    const char *in[5], *out[4] = {ln->output[0], "", "", keep ? keep : ""};
    size_t ni = 0;
    in[ni++] = a;
    in[ni++] = b;
    in[ni++] = gamma;
    if (!simplified) in[ni++] = beta ? beta : "";
    if (bias) in[ni++] = bias;
    float eps = wm_opt_attr_f(ln, "epsilon", 1e-5f);
    if (keep && wm_graph_remove_node(g, add, c->err)) return c->err->status;
    wm_onnx_node *f = wm_opt_replace(g, ln, simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization",
                                     "com.microsoft", in, ni, out, keep ? 4 : 1, c->err);
    if (!f || wm_graph_set_attr_float(g, f, "epsilon", eps, c->err) ||
        wm_opt_need_opset(g, "com.microsoft", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_skipnorm(wm_pass_ctx *c) {
    wm_status s = wm_opt_each_op(c, "LayerNormalization", skipnorm_one);
    return s ? s : wm_opt_each_op(c, "SimplifiedLayerNormalization", skipnorm_one);
}

/* ---------------------------------------------------------------- RMSNorm back to standard ops */

/*
 * The default-domain SimplifiedLayerNormalization nodes left after fusion
 * (those no residual Add took into a com.microsoft SkipSimplifiedLayerNormalization)
 * become x / Sqrt(ReduceMean(x*x, -1) + eps) * w again: below opset 23 the
 * op is ONNX Runtime's alone and onnx.checker refuses it. Float32 graphs
 * (the build runs this before precision conversion).
 */
wm_status wm_opt_expand_rmsnorm(wm_graph *g, wm_error *err) {
    size_t n, count = 0;
    wm_onnx_node **v = wm_opt_snapshot(g, &n, err);
    if (!v) return WM_ERR_NOMEM;
    int64_t opset = wm_graph_opset(g, "");
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        wm_onnx_node *ln = v[i];
        if (!wm_opt_is(ln, "SimplifiedLayerNormalization") || ln->n_input < 2 || !wm_opt_out(ln, 0)) continue;
        int64_t axis = wm_opt_attr_i(ln, "axis", -1);
        float eps = wm_opt_attr_f(ln, "epsilon", 1e-5f);
        const char *x = ln->input[0], *w = ln->input[1], *y = ln->output[0];
        const char *sq_in[2] = {x, x};
        const char *sq = wm_opt_emit(g, "Mul", NULL, sq_in, 2, err), *ms = NULL;
        wm_onnx_node *rm = NULL;
        if (sq && opset >= 18) {
            const char *ax = wm_opt_const_i64(g, "rms_axes", &axis, 1, 0, err);
            const char *rin[2] = {sq, ax};
            rm = ax ? wm_opt_emit_node(g, "ReduceMean", NULL, rin, 2, &ms, err) : NULL;
        } else if (sq) {
            const char *rin[1] = {sq};
            rm = wm_opt_emit_node(g, "ReduceMean", NULL, rin, 1, &ms, err);
            if (rm && wm_graph_set_attr_ints(g, rm, "axes", &axis, 1, err)) rm = NULL;
        }
        const char *e = rm ? wm_opt_const_f32(g, "rms_eps", &eps, 1, 1, err) : NULL;
        const char *ain[2] = {ms, e};
        const char *sum = e ? wm_opt_emit(g, "Add", NULL, ain, 2, err) : NULL;
        const char *qin[1] = {sum};
        const char *rt = sum ? wm_opt_emit(g, "Sqrt", NULL, qin, 1, err) : NULL;
        const char *din[2] = {x, rt};
        const char *nx = rt ? wm_opt_emit(g, "Div", NULL, din, 2, err) : NULL;
        const char *min[2] = {nx, w}, *out[1] = {y};
        if (!nx || !wm_opt_replace(g, ln, "Mul", NULL, min, 2, out, 1, err)) s = err->status ? err->status : WM_ERR_NOMEM;
        else count++;
    }
    free(v);
    return s ? s : count ? wm_graph_topo_sort(g, err) : WM_OK;
}
