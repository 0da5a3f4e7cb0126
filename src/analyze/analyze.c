/* analyze.c - per-node rule matching, model-level checks and the partition estimate (see analyze.h). */
#include "analyze/analyze.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"

/* What the graph knows about one value. */
typedef struct vinfo {
    int32_t dtype;            /* 0: unknown */
    int rank;                 /* -1: unknown */
    const char *dynamic_dim;  /* first symbolic/unknown dim ("?" when unnamed), NULL when all known or rank unknown */
} vinfo;

static vinfo value_info(const wm_graph *g, const char *name) {
    vinfo vi = {0, -1, NULL};
    const wm_value *v = name && name[0] ? wm_graph_find_value(g, name) : NULL;
    if (!v) return vi;
    const wm_onnx_type_tensor *tt = v->type ? v->type->tensor_type : NULL;
    if (tt) {
        vi.dtype = tt->elem_type;
        if (tt->shape) {
            vi.rank = (int)tt->shape->n_dim;
            for (size_t d = 0; d < tt->shape->n_dim; d++) {
                const wm_onnx_dim *dim = tt->shape->dim[d];
                int known = !dim->dim_param && ((dim->pb.has & 1) || dim->dim_value) && dim->dim_value >= 0;
                if (!known) {
                    vi.dynamic_dim = dim->dim_param ? dim->dim_param : "?";
                    break;
                }
            }
        }
        return vi;
    }
    const wm_onnx_tensor *t = v->init ? v->init : wm_graph_constant(g, name);
    if (t) {
        vi.dtype = t->data_type;
        vi.rank = (int)t->n_dims;
    }
    return vi;
}

/* A growable reason string: "a; b; c". */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) WM_PRINTF(2, 3);
static void sb_add(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    size_t len = (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1;
    size_t need = b->n + len + 3;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 128;
        while (cap < need) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (b->n) {
        memcpy(b->p + b->n, "; ", 2);
        b->n += 2;
    }
    memcpy(b->p + b->n, tmp, len);
    b->n += len;
    b->p[b->n] = 0;
}

static wm_level worse(wm_level a, wm_level b) { return a > b ? a : b; }

static int is_control_flow(const wm_onnx_node *n) {
    return (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx")) &&
           (!strcmp(n->op_type, "If") || !strcmp(n->op_type, "Loop") || !strcmp(n->op_type, "Scan"));
}

static int is_constant_node(const wm_onnx_node *n) {
    return (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx")) && !strcmp(n->op_type, "Constant");
}

static size_t count_subgraph_nodes(const wm_onnx_graph *g) {
    size_t c = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const wm_onnx_node *n = g->node[i];
        for (size_t a = 0; a < n->n_attribute; a++) {
            const wm_onnx_attr *at = n->attribute[a];
            if (at->g) c += at->g->n_node + count_subgraph_nodes(at->g);
            for (size_t k = 0; k < at->n_graphs; k++) c += at->graphs[k]->n_node + count_subgraph_nodes(at->graphs[k]);
        }
    }
    return c;
}

static int attr_allowed(const wm_rule_attr *ra, const wm_onnx_attr *at, char *got, size_t n) {
    if (at->type == WM_ATTR_STRING || (at->s.n && !at->n_ints)) {
        snprintf(got, n, "'%.*s'", (int)(at->s.n < 64 ? at->s.n : 64), (const char *)at->s.p);
        for (size_t k = 0; k < ra->n_strs; k++)
            if (strlen(ra->strs[k]) == at->s.n && !memcmp(ra->strs[k], at->s.p, at->s.n)) return 1;
        return 0;
    }
    if (at->type == WM_ATTR_INTS || at->n_ints) {
        snprintf(got, n, "[");
        int ok = 1;
        for (size_t i = 0; i < at->n_ints; i++) {
            size_t l = strlen(got);
            snprintf(got + l, n - l, "%s%lld", i ? "," : "", (long long)at->ints[i]);
            int one = 0;
            for (size_t k = 0; k < ra->n_ints; k++) one |= ra->ints[k] == at->ints[i];
            ok &= one;
        }
        size_t l = strlen(got);
        snprintf(got + l, n - l, "]");
        return ok;
    }
    snprintf(got, n, "%lld", (long long)at->i);
    for (size_t k = 0; k < ra->n_ints; k++)
        if (ra->ints[k] == at->i) return 1;
    return 0;
}

/* Judges one node; returns its level and appends reasons to b. */
static wm_level judge(const wm_graph *g, const wm_ep_rules *r, unsigned device, const wm_ep_checks *ck,
                      const wm_onnx_node *n, sbuf *b) {
    if (is_constant_node(n)) return WM_LEVEL_SUPPORTED;
    const char *dom = n->domain ? n->domain : "";
    int64_t ver = wm_graph_opset(g, dom);
    int known = 0;
    const wm_rule *ru = wm_ep_rules_find(r, dom, n->op_type, ver, device, &known);
    int is_cpu_ep = !strcmp(r->ep, "cpu");
    if (!ru) {
        if (known) {
            sb_add(b, "%s%s%s: no rule covers model opset %lld (the rules list other opset versions only)", dom, dom[0] ? "::" : "",
                   n->op_type, (long long)ver);
            return WM_LEVEL_UNSUPPORTED;
        }
        if (is_cpu_ep) {
            sb_add(b, "no CPU kernel for %s%s%s", dom[0] ? dom : "", dom[0] ? "::" : "", n->op_type);
            return WM_LEVEL_UNSUPPORTED;
        }
        sb_add(b, "no rule for %s%s%s in %s rules", dom[0] ? dom : "", dom[0] ? "::" : "", n->op_type, r->ep);
        return WM_LEVEL_UNKNOWN;
    }
    wm_level lv = ru->level;
    if (ru->level != WM_LEVEL_SUPPORTED && ru->reason[0]) sb_add(b, "%s", ru->reason);
    if (ru->level == WM_LEVEL_UNSUPPORTED) return lv;

    for (size_t k = 0; k < ru->n_dtypes; k++) {
        const wm_rule_dtypes *d = &ru->dtypes[k];
        if ((size_t)d->input >= n->n_input || !n->input[d->input][0]) continue;
        vinfo vi = value_info(g, n->input[d->input]);
        if (!vi.dtype) {
            sb_add(b, "dtype of input %d unknown (not checked)", d->input);
            continue;
        }
        int ok = 0;
        for (size_t i = 0; i < d->n; i++) ok |= d->dtypes[i] == vi.dtype;
        if (ok) continue;
        if (vi.dtype == WM_DT_FLOAT16 && ck->float16 == WM_POLICY_CAST) {
            sb_add(b, "input %d dtype float16 has no kernel: Casts to float32 are inserted", d->input);
            lv = worse(lv, WM_LEVEL_PARTIAL);
        } else {
            sb_add(b, "input %d dtype %s not supported", d->input, wm_dtype_name(vi.dtype));
            lv = WM_LEVEL_UNSUPPORTED;
        }
    }
    if (ru->max_rank >= 0) {
        for (size_t i = 0; i < n->n_input + n->n_output; i++) {
            const char *nm = i < n->n_input ? n->input[i] : n->output[i - n->n_input];
            vinfo vi = value_info(g, nm);
            if (vi.rank > ru->max_rank) {
                sb_add(b, "rank %d of '%s' exceeds max_rank %d", vi.rank, nm, (int)ru->max_rank);
                lv = WM_LEVEL_UNSUPPORTED;
                break;
            }
        }
    }
    if (ru->static_shapes) {
        for (size_t i = 0; i < n->n_input + n->n_output; i++) {
            const char *nm = i < n->n_input ? n->input[i] : n->output[i - n->n_input];
            if (!nm[0]) continue;
            vinfo vi = value_info(g, nm);
            if (vi.dynamic_dim) {
                sb_add(b, "needs static shapes: '%s' has dynamic dim '%s'", nm, vi.dynamic_dim);
                lv = WM_LEVEL_UNSUPPORTED;
                break;
            }
        }
    }
    for (size_t k = 0; k < ru->n_const_inputs; k++) {
        int32_t idx = ru->const_inputs[k];
        if ((size_t)idx >= n->n_input || !n->input[idx][0]) continue;
        if (!wm_graph_constant(g, n->input[idx])) {
            sb_add(b, "input %d ('%s') must be constant but is computed at run time", idx, n->input[idx]);
            lv = WM_LEVEL_UNSUPPORTED;
        }
    }
    for (size_t k = 0; k < ru->n_attrs; k++) {
        const wm_rule_attr *ra = &ru->attrs[k];
        const wm_onnx_attr *at = wm_graph_node_attr(n, ra->name);
        if (!at) continue; /* the default is assumed allowed */
        char got[160];
        if (!attr_allowed(ra, at, got, sizeof got)) {
            sb_add(b, "attribute %s=%s not allowed", ra->name, got);
            lv = WM_LEVEL_UNSUPPORTED;
        }
    }
    if (ck->int64 == WM_POLICY_UNSUPPORTED) {
        for (size_t i = 0; i < n->n_input + n->n_output; i++) {
            const char *nm = i < n->n_input ? n->input[i] : n->output[i - n->n_input];
            if (nm[0] && value_info(g, nm).dtype == WM_DT_INT64) {
                sb_add(b, "int64 tensor '%s' not supported on %s", nm, wm_device_name(device));
                lv = WM_LEVEL_UNSUPPORTED;
                break;
            }
        }
    }
    return lv;
}

static void add_issue(wm_analysis *a, const char *check, int blocking, const char *fmt, ...) WM_PRINTF(4, 5);
static void add_issue(wm_analysis *a, const char *check, int blocking, const char *fmt, ...) {
    if (a->n_issues >= sizeof a->issues / sizeof a->issues[0]) return;
    wm_model_issue *is = &a->issues[a->n_issues++];
    is->check = check;
    is->blocking = blocking;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(is->message, sizeof is->message, fmt, ap);
    va_end(ap);
}

static void model_checks(const wm_graph *g, const wm_ep_checks *ck, wm_analysis *a) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    if (ck->static_shapes) {
        size_t dyn = 0;
        const char *first = NULL, *dim = NULL;
        for (size_t i = 0; i < pg->n_input; i++) {
            vinfo vi = value_info(g, pg->input[i]->name);
            if (vi.dynamic_dim || vi.rank < 0) {
                if (!first) first = pg->input[i]->name, dim = vi.dynamic_dim ? vi.dynamic_dim : "(unknown rank)";
                dyn++;
            }
        }
        if (dyn)
            add_issue(a, "static_shapes", 1,
                      "%zu graph input(s) have symbolic or unknown dims (first: '%s' dim '%s'); the EP needs static shapes: "
                      "fix the dims before compiling",
                      dyn, first, dim);
    }
    if (ck->int64 != WM_POLICY_NATIVE) {
        size_t n64 = 0;
        for (size_t i = 0; i < pg->n_input; i++) n64 += value_info(g, pg->input[i]->name).dtype == WM_DT_INT64;
        for (size_t i = 0; i < pg->n_output; i++) n64 += value_info(g, pg->output[i]->name).dtype == WM_DT_INT64;
        for (size_t i = 0; i < pg->n_value_info; i++) n64 += value_info(g, pg->value_info[i]->name).dtype == WM_DT_INT64;
        for (size_t i = 0; i < pg->n_initializer; i++) n64 += pg->initializer[i]->data_type == WM_DT_INT64;
        if (n64)
            add_issue(a, "int64", ck->int64 == WM_POLICY_UNSUPPORTED, "%zu int64 tensor(s) with known types: %s", n64,
                      ck->int64 == WM_POLICY_CAST ? "the EP casts them to int32 (values beyond 2^31 break)" : "not supported");
    }
    if (!ck->control_flow) {
        size_t cf = 0;
        for (size_t i = 0; i < pg->n_node; i++) cf += is_control_flow(pg->node[i]);
        if (cf) add_issue(a, "control_flow", 1, "%zu control-flow node(s) (If/Loop/Scan): not supported by the EP", cf);
    }
    int64_t ver = wm_graph_opset(g, "");
    if (ck->max_opset > 0 && ver > ck->max_opset)
        add_issue(a, "max_opset", 1, "model opset %lld is newer than the EP's max_opset %lld", (long long)ver,
                  (long long)ck->max_opset);
}

/* ---- partitions: an open-addressing map from node pointer to its side (1 EP, 2 CPU) */

typedef struct side_map {
    const wm_onnx_node **key;
    unsigned char *side;
    size_t cap;
} side_map;

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static void side_put(side_map *m, const wm_onnx_node *n, unsigned char s) {
    size_t i = ptr_hash(n, m->cap);
    while (m->key[i] && m->key[i] != n) i = (i + 1) & (m->cap - 1);
    m->key[i] = n;
    m->side[i] = s;
}

static unsigned char side_get(const side_map *m, const wm_onnx_node *n) {
    size_t i = ptr_hash(n, m->cap);
    while (m->key[i]) {
        if (m->key[i] == n) return m->side[i];
        i = (i + 1) & (m->cap - 1);
    }
    return 0;
}

static wm_status partitions(const wm_graph *g, wm_analysis *a, wm_error *err) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    side_map m = {0};
    m.cap = 16;
    while (m.cap < pg->n_node * 2 + 2) m.cap *= 2;
    m.key = calloc(m.cap, sizeof *m.key);
    m.side = calloc(m.cap, 1);
    if (!m.key || !m.side) {
        free(m.key);
        free(m.side);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    int in_run = 0;
    for (size_t i = 0; i < pg->n_node; i++) {
        const wm_onnx_node *n = pg->node[i];
        if (is_constant_node(n)) continue;
        int ep = a->level[i] <= WM_LEVEL_PARTIAL;
        side_put(&m, n, ep ? 1 : 2);
        if (ep) {
            a->ep_nodes++;
            if (!in_run) a->ep_subgraphs++;
            in_run = 1;
        } else {
            a->cpu_nodes++;
            in_run = 0;
        }
    }
    for (size_t i = 0; i < pg->n_node; i++) {
        const wm_onnx_node *n = pg->node[i];
        unsigned char s = side_get(&m, n);
        if (!s) continue;
        for (size_t o = 0; o < n->n_output; o++) {
            if (!n->output[o][0]) continue;
            size_t nu = 0;
            const wm_use *u = wm_graph_consumers(g, n->output[o], &nu);
            for (size_t k = 0; k < nu; k++) {
                unsigned char t = side_get(&m, u[k].node);
                if (t && t != s) {
                    a->crossing_tensors++;
                    break;
                }
            }
        }
    }
    free(m.key);
    free(m.side);
    return WM_OK;
}

wm_status wm_analyze_graph(const wm_graph *g, const wm_ep_rules *r, unsigned device, wm_analysis *a, wm_error *err) {
    memset(a, 0, sizeof *a);
    a->rules = r;
    a->device = device;
    const wm_onnx_graph *pg = wm_graph_proto(g);
    a->n_nodes = pg->n_node;
    a->level = calloc(pg->n_node ? pg->n_node : 1, sizeof *a->level);
    a->reason = calloc(pg->n_node ? pg->n_node : 1, sizeof *a->reason);
    if (!a->level || !a->reason) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    const wm_ep_checks *ck = wm_ep_rules_checks(r, device);
    for (size_t i = 0; i < pg->n_node; i++) {
        sbuf b = {0};
        wm_level lv = judge(g, r, device, ck, pg->node[i], &b);
        if (b.oom) {
            free(b.p);
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        a->level[i] = lv;
        a->reason[i] = b.p;
        a->counts[lv]++;
        a->verdict = worse(a->verdict, lv);
    }
    a->subgraph_nodes = count_subgraph_nodes(pg);
    model_checks(g, ck, a);
    for (size_t i = 0; i < a->n_issues; i++)
        if (a->issues[i].blocking) a->verdict = worse(a->verdict, WM_LEVEL_PARTIAL);
    return partitions(g, a, err);
}

void wm_analysis_free(wm_analysis *a) {
    if (!a) return;
    if (a->reason)
        for (size_t i = 0; i < a->n_nodes; i++) free(a->reason[i]);
    free(a->reason);
    free(a->level);
    memset(a, 0, sizeof *a);
}
