/*
 * quant_fp16.c - float32 -> float16 conversion of weights and compute.
 *
 * Every node that is not blocked (op type in the block list, or name
 * excluded) computes in float16: its float inputs are float16, its float
 * outputs become float16, and float-typed attributes (Cast to, ConstantOfShape
 * value, Constant value) follow. Blocked nodes keep float32. A Cast is
 * inserted only where a value crosses between the two, one per value and
 * direction. Float32 initializers used in float16 get a float16 copy
 * (saturated at +-65504 so large negative mask constants stay finite).
 * Graph inputs and outputs become float16 unless keep_io_types.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/*
 * Ops kept in float32 by default: onnxruntime's float16 converter list
 * (classical ML ops, index/range ops whose float16 forms are missing or
 * lossy) plus the reductions of decomposed normalizations, whose sums of
 * squares overflow float16 for hidden states above 256.
 */
static const char *const FP16_BLOCK_DEFAULT[] = {
    "ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer", "FeatureVectorizer",
    "Imputer", "LabelEncoder", "LinearClassifier", "LinearRegressor", "Normalizer", "OneHotEncoder",
    "RandomUniformLike", "SVMClassifier", "SVMRegressor", "Scaler", "TreeEnsembleClassifier",
    "TreeEnsembleRegressor", "ZipMap", "NonMaxSuppression", "TopK", "RoiAlign", "Range", "CumSum", "Min", "Max",
    "Upsample", "Pow", "ReduceMean", "ReduceSumSquare", "ReduceL2", "ReduceLogSumExp", "QuantizeLinear",
    "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger"};

typedef struct cast_entry {
    const char *from;
    int32_t to;
    const char *name;
} cast_entry;

typedef struct fp16 {
    wm_graph *g;
    const wm_quant_config *c;
    wm_quant_report *r;
    wm_quant_plan *plan;
    wm_shapes *sh;
    wm_ptrset converted; /* nodes computing in float16 */
    cast_entry *casts;
    size_t n_casts, cap_casts;
    wm_error *err;
} fp16;

static int blocked(const fp16 *f, const wm_onnx_node *n) {
    const wm_quant_config *c = f->c;
    if (n->name && wm_quant_listed(c->exclude, c->n_exclude, n->name)) return 1;
    if (!c->op_block_given && wm_quant_listed(FP16_BLOCK_DEFAULT, sizeof FP16_BLOCK_DEFAULT / sizeof *FP16_BLOCK_DEFAULT,
                                              n->op_type))
        return 1;
    return wm_quant_listed(c->op_block, c->n_op_block, n->op_type);
}

static int is_f32(const fp16 *f, const char *v) { return v && wm_shapes_dtype(f->sh, v) == WM_DT_FLOAT; }

/* The precision a float value has in the converted graph: 16 or 32. */
static int home(const fp16 *f, const char *v) {
    const wm_value *val = wm_graph_find_value(f->g, v);
    if (!val) return 32;
    if (val->input) return f->c->keep_io_types ? 32 : 16;
    if (val->init || val->sparse_init) return 32; /* copies made on demand */
    return val->producer && wm_ptrset_has(&f->converted, val->producer) ? 16 : 32;
}

/* Inputs a float16 node still takes in float32 (Resize roi/scales). */
static int stays_f32(const wm_onnx_node *n, size_t slot) { return wm_opt_is(n, "Resize") && (slot == 1 || slot == 2); }

/* The name holding v converted to precision want (16/32): a cached Cast or a float16 initializer copy. */
static const char *convert(fp16 *f, const char *v, int want) {
    int32_t to = want == 16 ? WM_DT_FLOAT16 : WM_DT_FLOAT;
    for (size_t i = 0; i < f->n_casts; i++)
        if (f->casts[i].to == to && !strcmp(f->casts[i].from, v)) return f->casts[i].name;
    if (f->n_casts == f->cap_casts) {
        size_t cap = f->cap_casts ? f->cap_casts * 2 : 64;
        cast_entry *p = realloc(f->casts, cap * sizeof *p);
        if (!p) {
            wm_err(f->err, WM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        f->casts = p;
        f->cap_casts = cap;
    }
    const char *name = NULL;
    const wm_onnx_tensor *t = wm_graph_initializer(f->g, v);
    const wm_value *val = wm_graph_find_value(f->g, v);
    if (t && want == 16 && !(val && val->input) && t->n_dims <= 4) { /* a float16 copy of the weight */
        char buf[300];
        snprintf(buf, sizeof buf, "%s_fp16", v);
        wm_qjob j = {WM_QJOB_TO_F16, wm_graph_model(f->g), t, {NULL}, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        wm_qout o = {wm_opt_name_exact(f->g, buf), WM_DT_FLOAT16, {0}, t->n_dims};
        if (!o.name) {
            wm_err(f->err, WM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        if (t->n_dims) memcpy(o.dims, t->dims, t->n_dims * sizeof *t->dims);
        if (wm_qjob_submit(f->g, f->plan, &j, &o, f->err)) return NULL;
        name = o.name;
    } else {
        const char *in[1] = {v};
        wm_onnx_node *cn = wm_opt_emit_node(f->g, "Cast", NULL, in, 1, &name, f->err);
        if (!cn || wm_graph_set_attr_int(f->g, cn, "to", to, f->err)) return NULL;
        f->r->casts++;
    }
    f->casts[f->n_casts++] = (cast_entry){v, to, name};
    return name;
}

/* A float16 copy of a tensor attribute (Constant value, ConstantOfShape value); the old one stays in the arena. */
static wm_status retype_tensor_attr(fp16 *f, wm_onnx_node *n, const char *attr) {
    wm_onnx_attr *a = wm_graph_node_attr(n, attr);
    if (!a || !a->t || a->t->data_type != WM_DT_FLOAT) return WM_OK;
    wm_ct ct;
    wm_status s = wm_ct_from_tensor(a->t, 0, &ct, f->err);
    if (s) return s;
    uint16_t *h = wm_arena_alloc(&wm_graph_model(f->g)->arena, (size_t)(ct.n ? ct.n : 1) * 2);
    if (!h) s = wm_err(f->err, WM_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; !s && i < ct.n; i++) {
        float v = (float)wm_ct_getf(&ct, i);
        h[i] = wm_f32_to_f16(v > 65504.f ? 65504.f : v < -65504.f ? -65504.f : v);
    }
    wm_onnx_tensor *t = s ? NULL : wm_graph_make_tensor(f->g, a->t->name, WM_DT_FLOAT16, ct.dims, (size_t)ct.rank,
                                                        (wm_bytes){(const uint8_t *)h, (size_t)ct.n * 2}, f->err);
    wm_ct_free(&ct);
    if (!t) return f->err->status ? f->err->status : WM_ERR_NOMEM;
    return wm_graph_set_attr_tensor(f->g, n, attr, t, f->err);
}

/* Attributes that name a float type follow the node into float16. */
static wm_status retype_attrs(fp16 *f, wm_onnx_node *n) {
    wm_graph *g = f->g;
    if (wm_opt_is(n, "Cast") && wm_opt_attr_i(n, "to", 0) == WM_DT_FLOAT)
        return wm_graph_set_attr_int(g, n, "to", WM_DT_FLOAT16, f->err);
    if (wm_opt_is(n, "ConstantOfShape") || wm_opt_is(n, "Constant")) return retype_tensor_attr(f, n, "value");
    const wm_onnx_attr *d = wm_graph_node_attr(n, "dtype");
    if (d && d->i == WM_DT_FLOAT) return wm_graph_set_attr_int(g, n, "dtype", WM_DT_FLOAT16, f->err);
    return WM_OK;
}

/* 1 when n touches float32 (an input or output): only such nodes are worth converting. */
static int touches_float(const fp16 *f, const wm_onnx_node *n) {
    for (size_t i = 0; i < n->n_input; i++)
        if (is_f32(f, wm_opt_in(n, i))) return 1;
    for (size_t i = 0; i < n->n_output; i++)
        if (is_f32(f, wm_opt_out(n, i))) return 1;
    return 0;
}

static void set_elem_type(wm_onnx_value_info *vi, int32_t dt) {
    if (vi && vi->type && vi->type->tensor_type) vi->type->tensor_type->elem_type = dt;
}

/* Graph outputs: float16 unless keep_io_types; a Cast where the producer's precision differs. */
static wm_status fix_outputs(fp16 *f) {
    wm_onnx_graph *p = wm_graph_proto(f->g);
    wm_status s = WM_OK;
    for (size_t i = 0; i < p->n_output && !s; i++) {
        wm_onnx_value_info *vi = p->output[i];
        const char *v = vi->name;
        if (!is_f32(f, v)) continue;
        int have = home(f, v), want = f->c->keep_io_types ? 32 : 16;
        if (want == 16) set_elem_type(vi, WM_DT_FLOAT16);
        if (have == want) continue;
        const wm_value *val = wm_graph_find_value(f->g, v);
        if (!val || !val->producer || val->input) continue; /* an input passed through: keeps its own type */
        char buf[300];
        snprintf(buf, sizeof buf, "%s_%s", v, have == 16 ? "fp16" : "fp32");
        const char *inner = wm_opt_name_exact(f->g, buf);
        char *outer = vi->name;
        if (!inner || (s = wm_graph_rename_value(f->g, v, inner, f->err))) break;
        vi->name = outer; /* the graph output keeps its name; the Cast produces it */
        if ((s = wm_graph_reindex(f->g, f->err))) break;
        const char *in[1] = {inner}, *out[1] = {outer};
        wm_onnx_node *cn = wm_opt_add(f->g, "Cast", NULL, "Cast", in, 1, out, 1, f->err);
        if (!cn || (s = wm_graph_set_attr_int(f->g, cn, "to", want == 16 ? WM_DT_FLOAT16 : WM_DT_FLOAT, f->err)))
            s = s ? s : f->err->status;
        f->r->casts++;
    }
    return s;
}

wm_status wm_quant_fp16(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                        wm_error *err) {
    fp16 f;
    memset(&f, 0, sizeof f);
    f.g = g;
    f.c = c;
    f.r = r;
    f.plan = plan;
    f.err = err;
    wm_status s = wm_shapes_infer(g, &f.sh, err);
    wm_onnx_graph *p = wm_graph_proto(g);
    size_t n = p->n_node;
    wm_onnx_node **v = s ? NULL : malloc((n ? n : 1) * sizeof *v);
    if (!s && !v) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (s) goto done;
    if (n) memcpy(v, p->node, n * sizeof *v);
    for (size_t i = 0; i < n && !s; i++) {
        if (!touches_float(&f, v[i]) || blocked(&f, v[i])) continue;
        if (wm_ptrset_add(&f.converted, v[i]) < 0) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        r->quantized++;
    }
    for (size_t i = 0; i < n && !s; i++) {
        wm_onnx_node *nd = v[i];
        int conv = wm_ptrset_has(&f.converted, nd);
        for (size_t k = 0; k < nd->n_input && !s; k++) {
            const char *in = wm_opt_in(nd, k);
            if (!is_f32(&f, in)) continue;
            int want = conv && !stays_f32(nd, k) ? 16 : 32;
            if (home(&f, in) == want) continue;
            const char *nm = convert(&f, in, want);
            s = nm ? wm_graph_set_input(g, nd, k, nm, err) : err->status;
        }
        if (!s && conv) s = retype_attrs(&f, nd);
    }
    if (!s && !c->keep_io_types)
        for (size_t i = 0; i < p->n_input; i++)
            if (is_f32(&f, p->input[i]->name)) set_elem_type(p->input[i], WM_DT_FLOAT16);
    if (!s) s = fix_outputs(&f);
done:
    free(v);
    free(f.casts);
    wm_ptrset_free(&f.converted);
    wm_shapes_free(f.sh);
    return s;
}
