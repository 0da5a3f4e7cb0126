/*
 * quant.c - the quantization driver: configuration defaults, mode names,
 * node selection, deferred jobs (submit now or later), and wm_quant_run.
 */
#include "opt/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

void wm_quant_config_default(wm_quant_config *c, wm_quant_mode mode) {
    memset(c, 0, sizeof *c);
    c->mode = mode;
    /* int8 weights symmetric; int4 and w16a16's uint16 asymmetric unless asked (the reference's recipe values) */
    c->symmetric = mode != WM_QUANT_INT4 && mode != WM_QUANT_W16A16;
    c->weight_type = mode == WM_QUANT_W16A16 ? WM_DT_UINT16 : WM_DT_INT8;
    c->activation_type = mode == WM_QUANT_W8A16 || mode == WM_QUANT_W16A16 ? WM_DT_UINT16 : WM_DT_UINT8;
    c->bits = 4;
    c->block_size = 32;
    c->reduce_range = -1; /* where integer kernels read the weights: see wm_quant_config.reduce_range */
    c->keep_io_types = 1; /* fp16: float32 graph inputs/outputs stay float32 (the reference's fp16_keep_io_types) */
}

static const struct {
    const char *name;
    wm_quant_mode mode;
} MODES[] = {{"fp16", WM_QUANT_FP16},         {"float16", WM_QUANT_FP16},       {"int8", WM_QUANT_INT8_STATIC},
             {"int8-dynamic", WM_QUANT_INT8_DYNAMIC}, {"dynamic", WM_QUANT_INT8_DYNAMIC},
             {"int8-static", WM_QUANT_INT8_STATIC}, {"w8a8", WM_QUANT_INT8_STATIC}, {"static", WM_QUANT_INT8_STATIC}, {"qdq", WM_QUANT_INT8_STATIC},
             {"w8a16", WM_QUANT_W8A16},       {"int16", WM_QUANT_W16A16},       {"w16a16", WM_QUANT_W16A16},
             {"int4", WM_QUANT_INT4},           {"rtn", WM_QUANT_INT4},
             {"gguf", WM_QUANT_CARRY}};

wm_quant_mode wm_quant_mode_parse(const char *s) {
    for (size_t i = 0; s && i < sizeof MODES / sizeof *MODES; i++)
        if (!strcmp(s, MODES[i].name)) return MODES[i].mode;
    return 0;
}

const char *wm_quant_mode_name(wm_quant_mode m) {
    switch (m) {
    case WM_QUANT_FP16: return "fp16";
    case WM_QUANT_INT8_DYNAMIC: return "int8-dynamic";
    case WM_QUANT_INT8_STATIC: return "int8-static";
    case WM_QUANT_W8A16: return "w8a16";
    case WM_QUANT_W16A16: return "w16a16";
    case WM_QUANT_INT4: return "int4";
    case WM_QUANT_CARRY: return "gguf";
    }
    return "unknown";
}

wm_status wm_quant_check_op_types(wm_quant_mode mode, const char *const *ops, size_t n, const char *where,
                                  wm_error *err) {
    static const char *const NBITS[] = {"MatMul", "Gemm", "Gather", "Attention"}, *const INT8[] = {"MatMul", "Gemm",
                                                                                                  "Attention"};
    const int nbits = mode == WM_QUANT_INT4 || mode == WM_QUANT_CARRY;
    const char *const *ok = nbits ? NBITS : INT8;
    const size_t n_ok = nbits ? sizeof NBITS / sizeof *NBITS : sizeof INT8 / sizeof *INT8;
    const char *list = nbits ? "MatMul, Gemm, Gather, Attention" : "MatMul, Gemm, Attention";
    if (n && mode == WM_QUANT_FP16)
        return wm_err(err, WM_ERR_USAGE, "%s: fp16 converts every op type but those of its op block list; the op types "
                      "to quantize apply to the int8 and int4 modes", where);
    for (size_t i = 0; i < n; i++) {
        if (!ops[i] || !*ops[i]) return wm_err(err, WM_ERR_USAGE, "%s: an empty op type name", where);
        if (!wm_quant_listed(ok, n_ok, ops[i]))
            return wm_err(err, WM_ERR_USAGE, "%s: '%s' is not an op type %s quantizes (%s; names as ONNX spells "
                          "them)", where, ops[i], wm_quant_mode_name(mode), list);
    }
    return WM_OK;
}

int wm_quant_mode_static(wm_quant_mode m) {
    return m == WM_QUANT_INT8_STATIC || m == WM_QUANT_W8A16 || m == WM_QUANT_W16A16;
}

int wm_quant_listed(const char *const *v, size_t n, const char *name) {
    for (size_t i = 0; name && i < n; i++)
        if (v[i] && !strcmp(v[i], name)) return 1;
    return 0;
}

int wm_quant_selected(const wm_quant_config *c, const wm_onnx_node *n, const char *const *dflt, size_t n_dflt) {
    if (!n->op_type || !wm_opt_default_domain(n)) return 0;
    int op = c->n_op_types ? wm_quant_listed(c->op_types, c->n_op_types, n->op_type)
                           : wm_quant_listed(dflt, n_dflt, n->op_type);
    return op && !(n->name && wm_quant_listed(c->exclude, c->n_exclude, n->name));
}

/* ---------------------------------------------------------------- jobs */

void wm_qjob_nbits_sizes(const wm_qjob *j, uint64_t *sz);
wm_status wm_qjob_nbits_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err);
void wm_qjob_int8_sizes(const wm_qjob *j, uint64_t *sz);
void wm_qjob_carry_sizes(const wm_qjob *j, uint64_t *sz);
wm_status wm_qjob_carry_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err);
wm_status wm_qjob_int8_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err);

static uint64_t numel_of(const wm_onnx_tensor *t) {
    uint64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) n *= (uint64_t)(t->dims[i] > 0 ? t->dims[i] : 0);
    return n;
}

void wm_qjob_sizes(const wm_qjob *j, uint64_t *sz) {
    sz[0] = sz[1] = sz[2] = 0;
    if (j->kind == WM_QJOB_NBITS) wm_qjob_nbits_sizes(j, sz);
    else if (j->kind == WM_QJOB_INT8W) wm_qjob_int8_sizes(j, sz);
    else if (j->kind == WM_QJOB_CARRY) wm_qjob_carry_sizes(j, sz);
    else sz[0] = numel_of(j->src) * 2;
}

/* float -> float16 with saturation at the largest finite half (a constant overflowing to inf would poison a graph). */
static uint16_t to_half_sat(float f) {
    if (f > 65504.0f) f = 65504.0f;
    else if (f < -65504.0f) f = -65504.0f;
    return wm_f32_to_f16(f);
}

static wm_status f16_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err) {
    wm_bytes b = wm_onnx_tensor_bytes(j->src);
    uint64_t n = numel_of(j->src);
    size_t es = wm_ct_elem_size(j->src->data_type);
    if (!b.p || b.n < n * es) {
        wm_ct ct; /* typed fields (float_data ...) */
        wm_status s = wm_ct_from_tensor(j->src, 0, &ct, err);
        if (s) return s;
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h = to_half_sat((float)wm_ct_getf(&ct, i));
            memcpy(out[0] + i * 2, &h, 2);
        }
        wm_ct_free(&ct);
        return WM_OK;
    }
    const uint64_t chunk = 1 << 20;
    for (uint64_t i0 = 0; i0 < n; i0 += chunk) {
        uint64_t k = n - i0 < chunk ? n - i0 : chunk;
        for (uint64_t i = 0; i < k; i++) {
            float f;
            if (j->src->data_type == WM_DT_FLOAT) memcpy(&f, b.p + (i0 + i) * 4, 4);
            else {
                double d;
                memcpy(&d, b.p + (i0 + i) * 8, 8);
                f = (float)d;
            }
            uint16_t h = to_half_sat(f);
            memcpy(out[0] + (i0 + i) * 2, &h, 2);
        }
        if (release) wm_opt_release(j->m, b.p + i0 * es, (size_t)(k * es));
    }
    return WM_OK;
}

wm_status wm_qjob_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err) {
    uint64_t sz[3];
    wm_qjob_sizes(j, sz);
    for (size_t i = 0; i < 3; i++) out[i] = NULL;
    for (size_t i = 0; i < j->n_dst; i++)
        if (!(out[i] = calloc(sz[i] ? (size_t)sz[i] : 1, 1))) {
            for (size_t k = 0; k < i; k++) free(out[k]);
            return wm_err(err, WM_ERR_NOMEM, "out of memory quantizing '%s'", j->src->name ? j->src->name : "");
        }
    wm_status s = j->kind == WM_QJOB_NBITS   ? wm_qjob_nbits_run(j, out, release, err)
                  : j->kind == WM_QJOB_INT8W ? wm_qjob_int8_run(j, out, release, err)
                  : j->kind == WM_QJOB_CARRY ? wm_qjob_carry_run(j, out, release, err)
                                             : f16_run(j, out, release, err);
    if (s)
        for (size_t i = 0; i < j->n_dst; i++) {
            free(out[i]);
            out[i] = NULL;
        }
    return s;
}

wm_status wm_qjob_submit(wm_graph *g, wm_quant_plan *plan, wm_qjob *j, const wm_qout *outs, wm_error *err) {
    uint64_t sz[3];
    wm_qjob_sizes(j, sz);
    uint8_t *bufs[3] = {NULL, NULL, NULL};
    wm_status s = WM_OK;
    if (!plan && (s = wm_qjob_run(j, bufs, 0, err))) return s;
    static const uint8_t placeholder[1];
    wm_arena *a = &wm_graph_model(g)->arena;
    for (size_t i = 0; i < j->n_dst && !s; i++) {
        const uint8_t *bytes = placeholder;
        if (!plan) {
            uint8_t *copy = wm_arena_alloc(a, sz[i] ? (size_t)sz[i] : 1);
            if (!copy) {
                s = wm_err(err, WM_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(copy, bufs[i], (size_t)sz[i]);
            bytes = copy;
        }
        wm_onnx_tensor *t;
        s = wm_graph_add_initializer(g, outs[i].name, outs[i].dtype, outs[i].dims, outs[i].rank,
                                     (wm_bytes){bytes, (size_t)sz[i]}, &t, err);
        if (s) break;
        j->dst[i] = t;
        if (plan) { /* no bytes until wm_quant_save computes them: readers see "no data" */
            t->raw_data = (wm_bytes){NULL, 0};
            t->data_location = WM_ONNX_DATA_EXTERNAL;
            t->ext = (wm_bytes){NULL, 0};
        }
    }
    for (size_t i = 0; i < 3; i++) free(bufs[i]);
    if (s || !plan) return s;
    if (plan->n == plan->cap) {
        size_t cap = plan->cap ? plan->cap * 2 : 64;
        wm_qjob *p = realloc(plan->jobs, cap * sizeof *p);
        if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        plan->jobs = p;
        plan->cap = cap;
    }
    plan->jobs[plan->n++] = *j;
    return WM_OK;
}

void wm_quant_plan_free(wm_quant_plan *p) {
    if (!p) return;
    free(p->jobs);
    free(p);
}

/* ---------------------------------------------------------------- run */

static uint64_t weight_bytes(const wm_onnx_graph *p) {
    uint64_t total = 0;
    for (size_t i = 0; i < p->n_initializer; i++) {
        const wm_onnx_tensor *t = p->initializer[i];
        uint64_t nb = 0;
        if (wm_dtype_nbytes(t->data_type, numel_of(t), &nb)) total += nb;
    }
    return total;
}

static wm_status quant_run(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan **plan,
                                     wm_error *err);

wm_status wm_quant_run(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan **plan,
                       wm_error *err) {
    wm_quant_report local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    wm_status s = quant_run(g, c, r, plan, err);
    if (r == &local) wm_quant_report_free(&local);
    return s;
}

void wm_quant_report_free(wm_quant_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_tables; i++) free(r->tables[i].tensor);
    free(r->tables);
    r->tables = NULL;
    r->n_tables = 0;
    for (size_t i = 0; i < r->n_carried; i++) free(r->carried[i].tensor);
    free(r->carried);
    r->carried = NULL;
    r->n_carried = 0;
    for (size_t i = 0; i < r->n_sensitive8; i++) free(r->sensitive8[i]);
    free(r->sensitive8);
    r->sensitive8 = NULL;
    r->n_sensitive8 = 0;
}

static wm_status quant_run(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan **plan,
                                     wm_error *err) {
    wm_onnx_graph *p = wm_graph_proto(g);
    r->nodes_before = p->n_node;
    r->weight_bytes_before = weight_bytes(p);
    wm_quant_plan *pl = NULL;
    if (plan) {
        *plan = NULL;
        if (!(pl = calloc(1, sizeof *pl))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    size_t unpacked = 0;
    wm_status s = wm_quant_unpack_attention(g, c, &unpacked, err);
    r->attention_unpacked += unpacked;
    if (!s) s = wm_graph_topo_sort(g, err);
    if (!s) switch (c->mode) {
        case WM_QUANT_FP16: s = wm_quant_fp16(g, c, r, pl, err); break;
        case WM_QUANT_INT8_DYNAMIC:
        case WM_QUANT_INT8_STATIC:
        case WM_QUANT_W8A16:
        case WM_QUANT_W16A16: s = wm_quant_int8(g, c, r, pl, err); break;
        case WM_QUANT_INT4: s = wm_quant_nbits(g, c, r, pl, err);
            if (!s) s = wm_quant_moe(g, c, r, err);
            break;
        case WM_QUANT_CARRY: s = wm_quant_nbits(g, c, r, pl, err);
            if (!s) s = wm_quant_moe_carry(g, c, r, err);
            break;
        default: s = wm_err(err, WM_ERR_USAGE, "unknown quantization mode %d", (int)c->mode);
        }
    if (!s) {
        wm_graph_remove_unused_initializers(g);
        s = wm_graph_topo_sort(g, err);
    }
    if (!s) {
        /* value_info entries describe the old types; drop the ones of values the pass retyped or removed */
        p->n_value_info = 0;
        s = wm_graph_reindex(g, err);
    }
    r->nodes_after = p->n_node;
    uint64_t deferred = 0;
    for (size_t i = 0; pl && i < pl->n; i++) {
        uint64_t sz[3];
        wm_qjob_sizes(&pl->jobs[i], sz);
        deferred += sz[0] + sz[1] + sz[2];
    }
    r->weight_bytes_after = weight_bytes(p);
    (void)deferred;
    if (s) {
        wm_quant_plan_free(pl);
        return s;
    }
    if (plan) *plan = pl;
    return WM_OK;
}
