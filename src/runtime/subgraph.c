/* subgraph.c - nested sessions for If/Loop/Scan bodies (see subgraph.h). */
#include "runtime/subgraph.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/session_impl.h"

struct wm_subgraph {
    wm_session *s;
    const wm_node *node;
    size_t n_formal;
    int *src;           /* per session input: >= 0 formal index, else -(node input index) - 1 */
    wm_tensor *in;      /* session inputs of one run */
    void *buf[WM_SUBGRAPH_BUFS];
    size_t cap[WM_SUBGRAPH_BUFS];
};

/* ---------------------------------------------------------------- free names */

typedef struct nameset {
    const char **keys;
    size_t cap, n;
    const char **order; /* insertion order */
} nameset;

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static int ns_has(const nameset *ns, const char *k) {
    if (!ns->cap) return 0;
    for (size_t i = hash_name(k) & (ns->cap - 1); ns->keys[i]; i = (i + 1) & (ns->cap - 1))
        if (!strcmp(ns->keys[i], k)) return 1;
    return 0;
}

/* Adds k (not copied); 1 when new, 0 when present, -1 on OOM. */
static int ns_add(nameset *ns, const char *k) {
    if (!k || !*k || ns_has(ns, k)) return 0;
    if (2 * (ns->n + 1) > ns->cap) {
        size_t cap = ns->cap ? 2 * ns->cap : 64;
        const char **keys = calloc(cap, sizeof *keys), **order = realloc(ns->order, cap * sizeof *order);
        if (!keys || !order) {
            free(keys);
            if (order) ns->order = order;
            return -1;
        }
        ns->order = order;
        for (size_t i = 0; i < ns->cap; i++)
            if (ns->keys[i]) {
                size_t j = hash_name(ns->keys[i]) & (cap - 1);
                while (keys[j]) j = (j + 1) & (cap - 1);
                keys[j] = ns->keys[i];
            }
        free(ns->keys);
        ns->keys = keys;
        ns->cap = cap;
    }
    size_t j = hash_name(k) & (ns->cap - 1);
    while (ns->keys[j]) j = (j + 1) & (ns->cap - 1);
    ns->keys[j] = k;
    ns->order[ns->n++] = k;
    return 1;
}

static void ns_free(nameset *ns) {
    free(ns->keys);
    free(ns->order);
    memset(ns, 0, sizeof *ns);
}

static wm_status collect_free(const wm_onnx_graph *g, nameset *out, int depth);

/* The names node p's subgraphs use without defining them, added to out. */
static wm_status node_free(const wm_onnx_node *p, nameset *out, int depth) {
    for (size_t a = 0; a < p->n_attribute; a++) {
        const wm_onnx_attr *at = p->attribute[a];
        wm_status st;
        if (at->g && (st = collect_free(at->g, out, depth + 1))) return st;
        for (size_t k = 0; k < at->n_graphs; k++)
            if ((st = collect_free(at->graphs[k], out, depth + 1))) return st;
    }
    return WM_OK;
}

/* Names g (and its nested graphs) use that g does not define, added to out in first-use order. */
static wm_status collect_free(const wm_onnx_graph *g, nameset *out, int depth) {
    if (depth > 32) return WM_ERR_UNSUPPORTED;
    nameset def = {0}, used = {0};
    wm_status st = WM_OK;
    int oom = 0;
    for (size_t i = 0; i < g->n_input; i++) oom |= ns_add(&def, g->input[i]->name) < 0;
    for (size_t i = 0; i < g->n_initializer; i++) oom |= ns_add(&def, g->initializer[i]->name) < 0;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++) oom |= ns_add(&def, g->node[i]->output[k]) < 0;
    for (size_t i = 0; i < g->n_node && !st && !oom; i++) {
        const wm_onnx_node *p = g->node[i];
        for (size_t k = 0; k < p->n_input; k++) oom |= ns_add(&used, p->input[k]) < 0;
        st = node_free(p, &used, depth);
    }
    for (size_t i = 0; i < g->n_output; i++) oom |= ns_add(&used, g->output[i]->name) < 0;
    for (size_t i = 0; i < used.n && !oom && !st; i++)
        if (!ns_has(&def, used.order[i])) oom |= ns_add(out, used.order[i]) < 0;
    ns_free(&def);
    ns_free(&used);
    return oom ? WM_ERR_NOMEM : st;
}

wm_status wm_subgraph_outer_inputs(wm_arena *a, const wm_onnx_node *p, const wm_onnx_node **out, wm_error *err) {
    *out = p;
    int any = 0;
    for (size_t i = 0; i < p->n_attribute; i++) any |= p->attribute[i]->g != NULL || p->attribute[i]->n_graphs > 0;
    if (!any) return WM_OK;
    nameset fr = {0};
    wm_status st = node_free(p, &fr, 0);
    if (st) {
        ns_free(&fr);
        return wm_err(err, st, st == WM_ERR_NOMEM ? "out of memory" : "subgraphs nested more than 32 deep");
    }
    wm_onnx_node *q = wm_arena_alloc(a, sizeof *q);
    char **in = wm_arena_alloc(a, (p->n_input + fr.n + 1) * sizeof *in);
    if (!q || !in) {
        ns_free(&fr);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    *q = *p;
    for (size_t i = 0; i < p->n_input; i++) in[i] = p->input[i];
    for (size_t i = 0; i < fr.n; i++) in[p->n_input + i] = (char *)fr.order[i];
    q->input = in;
    q->n_input = p->n_input + fr.n;
    ns_free(&fr);
    *out = q;
    return WM_OK;
}

/* ---------------------------------------------------------------- nested sessions */

wm_status wm_subgraph_new(wm_node *n, const char *attr, const int32_t *formal_dtypes, size_t n_formal,
                          wm_subgraph **out, wm_error *err) {
    *out = NULL;
    wm_session *parent = n->scope;
    const wm_onnx_attr *a = wm_attr(n, attr);
    if (!a || !a->g) return wm_node_err(n, err, WM_ERR_INPUT, "graph attribute '%s' missing", attr);
    wm_subgraph *g = calloc(1, sizeof *g);
    struct wm_subgraph **subs = realloc(parent->subs, (parent->n_subs + 1) * sizeof *subs);
    if (!g || !subs) {
        free(g);
        if (subs) parent->subs = subs;
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    parent->subs = subs;
    parent->subs[parent->n_subs++] = g; /* freed with the parent from here on */
    g->node = n;
    g->n_formal = n_formal;
    size_t n_outer = (size_t)(n->n_in - n->n_in_proto);
    const char *const *names = (const char *const *)n->proto->input + n->n_in_proto;
    wm_status st = wm_session_new_sub(parent, a->g, formal_dtypes, n_formal, names, n->in_dtype + n->n_in_proto, n_outer,
                                      &g->s, err);
    if (st) {
        wm_err_prefix(err, "node '%s' (%s) %s", wm_node_label(n), n->proto->op_type, attr);
        return st;
    }
    if (a->g->n_input != n_formal)
        return wm_node_err(n, err, WM_ERR_INPUT, "%s has %zu inputs, the op passes %zu", attr, a->g->n_input, n_formal);
    size_t ni = g->s->n_inputs;
    g->src = calloc(ni + 1, sizeof *g->src);
    g->in = calloc(ni + 1, sizeof *g->in);
    if (!g->src || !g->in) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ni; i++) {
        const char *nm = g->s->inputs[i].name;
        int found = 0;
        for (size_t f = 0; f < n_formal && !found; f++)
            if (!strcmp(a->g->input[f]->name, nm)) g->src[i] = (int)f, found = 1;
        for (int k = n->n_in_proto; k < n->n_in && !found; k++)
            if (!strcmp(n->proto->input[k], nm)) g->src[i] = -k - 1, found = 1;
        if (!found) return wm_node_err(n, err, WM_ERR_INTERNAL, "%s input '%s' has no source", attr, nm);
    }
    *out = g;
    return WM_OK;
}

void wm_subgraph_free(wm_subgraph *g) {
    if (!g) return;
    wm_session_free(g->s);
    for (int i = 0; i < WM_SUBGRAPH_BUFS; i++) free(g->buf[i]);
    free(g->src);
    free(g->in);
    free(g);
}

size_t wm_subgraph_n_formal(const wm_subgraph *g) { return g->n_formal; }
size_t wm_subgraph_n_outputs(const wm_subgraph *g) { return g->s->n_outputs; }
const wm_io_info *wm_subgraph_output(const wm_subgraph *g, size_t k) { return &g->s->outputs[k]; }

wm_status wm_subgraph_run(wm_subgraph *g, const wm_tensor *formal, wm_tensor *const *node_in, wm_tensor *out,
                          wm_error *err) {
    size_t ni = g->s->n_inputs;
    for (size_t i = 0; i < ni; i++) g->in[i] = g->src[i] >= 0 ? formal[g->src[i]] : *node_in[-g->src[i] - 1];
    return wm_session_run(g->s, g->in, ni, out, g->s->n_outputs, err);
}

wm_status wm_subgraph_buf(wm_subgraph *g, int slot, uint64_t bytes, void **out, wm_error *err) {
    *out = NULL;
    if (slot < 0 || slot >= WM_SUBGRAPH_BUFS) return wm_node_err(g->node, err, WM_ERR_INTERNAL, "buffer slot %d", slot);
    if (bytes > g->cap[slot] || !g->buf[slot]) {
        static const char what[] = "a buffer for its loop-carried or scan values";
        uint64_t old = g->cap[slot], cap = old ? 2 * old : 256;
        if (cap < bytes) cap = bytes;
        if (!wm_budget_fits(g->s, old, cap)) cap = bytes; /* no room to double: exactly what is asked */
        wm_status st = cap > SIZE_MAX ? wm_node_err(g->node, err, WM_ERR_INPUT, "a buffer over the address space")
                                      : wm_budget_take(g->s, g->node, old, cap, what, err);
        if (st) return st;
        void *p = realloc(g->buf[slot], (size_t)cap);
        if (!p) {
            wm_budget_take(g->s, NULL, cap, old, "", NULL); /* back as it was */
            return wm_node_err(g->node, err, WM_ERR_NOMEM, "out of memory");
        }
        g->buf[slot] = p;
        g->cap[slot] = (size_t)cap;
    }
    *out = g->buf[slot];
    return WM_OK;
}
