/*
 * graph.c - the graph IR: a value index (open-addressing hash map from
 * names to wm_value records) over a GraphProto, edits that keep proto and
 * index in step, topological sort and SSA checks.
 *
 * Records and use lists live in the index arena g->idx, freed as a whole
 * by a reindex; records are never removed one by one: a value that loses
 * all its references stays in the map as a dead record (find_value skips
 * it), which keeps incremental edits simple.
 */
#include "onnx/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"

enum { RES_NAME = 1, RES_SUBGRAPH = 2 };     /* wm_value.reserved */
enum { DUP_DEF = 1, DUP_LIST = 2 };          /* wm_value.dup */
#define NONE SIZE_MAX

/* ---------------------------------------------------------------- string map */

typedef struct map_slot {
    const char *key; /* NULL: empty */
    void *val;
} map_slot;

typedef struct strmap {
    map_slot *slot; /* malloc'ed; cap is 0 or a power of two */
    size_t cap, n;
} strmap;

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot holding key, or the empty slot where it would go (cap > 0). */
static map_slot *map_find(const strmap *m, const char *key) {
    size_t mask = m->cap - 1, i = (size_t)str_hash(key) & mask;
    while (m->slot[i].key && strcmp(m->slot[i].key, key) != 0) i = (i + 1) & mask;
    return &m->slot[i];
}

static void *map_get(const strmap *m, const char *key) { return m->cap ? map_find(m, key)->val : NULL; }

static int map_grow(strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64, old_cap = m->cap;
    map_slot *old = m->slot, *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return -1;
    m->slot = fresh;
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) *map_find(m, old[i].key) = old[i];
    free(old);
    return 0;
}

/* Maps key (which must outlive the map) to val != NULL. 0, or -1 on OOM. */
static int map_put(strmap *m, const char *key, void *val) {
    if ((m->n + 1) * 4 > m->cap * 3 && map_grow(m)) return -1;
    map_slot *s = map_find(m, key);
    if (!s->key) m->n++;
    s->key = key;
    s->val = val;
    return 0;
}

static void map_free(strmap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- the handle */

struct wm_graph {
    wm_onnx_model *model;
    wm_onnx_graph *proto;
    wm_arena idx;                   /* value records and use lists */
    strmap values;                  /* name -> wm_value * */
    wm_value **vals; size_t n_vals; /* by id, in idx */
    size_t next_name;               /* wm_graph_unique_name counter; survives reindex */
};

static int is_name(const char *s) { return s && *s; }
static int name_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static const char *gname(const wm_graph *g) { return g->proto->name ? g->proto->name : ""; }
static wm_status nomem(wm_error *err) { return wm_err(err, WM_ERR_NOMEM, "out of memory editing a graph"); }

/* "node 'name' (Op)" or "unnamed Op node", into buf. */
static const char *node_label(const wm_onnx_node *n, char *buf, size_t len) {
    const char *op = n->op_type ? n->op_type : "?";
    if (is_name(n->name)) snprintf(buf, len, "node '%s' (%s)", n->name, op);
    else snprintf(buf, len, "unnamed %s node", op);
    return buf;
}

/* Subgraphs of a node: the non-NULL g and graphs[] of its attributes. */
static size_t n_subgraphs(const wm_onnx_node *n) {
    size_t c = 0;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const wm_onnx_attr *a = n->attribute[i];
        c += a->g != NULL;
        for (size_t k = 0; k < a->n_graphs; k++) c += a->graphs[k] != NULL;
    }
    return c;
}

static wm_onnx_graph *subgraph(const wm_onnx_node *n, size_t want) {
    for (size_t i = 0; i < n->n_attribute; i++) {
        const wm_onnx_attr *a = n->attribute[i];
        if (a->g && want-- == 0) return a->g;
        for (size_t k = 0; k < a->n_graphs; k++)
            if (a->graphs[k] && want-- == 0) return a->graphs[k];
    }
    return NULL;
}

/* ---------------------------------------------------------------- value records */

/* The record of name, created when missing; name must outlive the index. NULL on OOM. */
static wm_value *val_intern(wm_graph *g, char *name) {
    wm_value *v = map_get(&g->values, name);
    if (v) return v;
    v = wm_arena_alloc(&g->idx, sizeof *v);
    wm_value **slot = v ? wm_vec_push(&g->idx, &g->vals, &g->n_vals, sizeof *slot) : NULL;
    if (!slot) return NULL;
    if (map_put(&g->values, name, v)) {
        g->n_vals--;
        return NULL;
    }
    v->name = name;
    v->id = g->n_vals - 1;
    *slot = v;
    return v;
}

/* Like val_intern for a caller's string, copied into the model arena when new. */
static wm_value *val_intern_copy(wm_graph *g, const char *name) {
    wm_value *v = map_get(&g->values, name);
    if (v) return v;
    char *s = wm_arena_strdup(&g->model->arena, name);
    return s ? val_intern(g, s) : NULL;
}

static int reserve(wm_graph *g, char *name, uint8_t why) {
    if (!is_name(name)) return 0;
    wm_value *v = val_intern(g, name);
    if (!v) return -1;
    v->reserved |= why;
    return 0;
}

static int val_defined(const wm_value *v) { return v->producer || v->input || v->init || v->sparse_init; }

static int val_live(const wm_value *v) {
    return val_defined(v) || v->n_producers || v->n_uses || v->output || v->info;
}

static wm_onnx_type *val_type(const wm_value *v) {
    if (v->input && v->input->type) return v->input->type;
    if (v->output && v->output->type) return v->output->type;
    return v->info ? v->info->type : NULL;
}

static int use_has(const wm_value *v, const wm_onnx_node *n, int32_t slot) {
    for (size_t i = 0; i < v->n_uses; i++)
        if (v->uses[i].node == n && v->uses[i].slot == slot) return 1;
    return 0;
}

static int use_add(wm_graph *g, wm_value *v, wm_onnx_node *n, int32_t slot) {
    wm_use *u = wm_vec_push(&g->idx, &v->uses, &v->n_uses, sizeof *u);
    if (!u) return -1;
    u->node = n;
    u->slot = slot;
    return 0;
}

/* Removes every use (n, slot) of v. */
static void use_drop(wm_value *v, const wm_onnx_node *n, int32_t slot) {
    for (size_t i = v->n_uses; i-- > 0;)
        if (v->uses[i].node == n && v->uses[i].slot == slot) wm_vec_remove(&v->uses, &v->n_uses, sizeof *v->uses, i);
}

/* ---------------------------------------------------------------- subgraph scopes */

/* The names one subgraph defines, chained to the enclosing subgraphs. */
typedef struct scope {
    strmap defs;
    const struct scope *up;
} scope;

/* Collects the outer-scope names the subgraphs of one top-level node use. */
typedef struct walker {
    wm_graph *g;
    wm_onnx_node *node;
    strmap seen; /* names already recorded for node */
} walker;

static int scope_has(const scope *sc, const char *name) {
    for (; sc; sc = sc->up)
        if (map_get(&sc->defs, name)) return 1;
    return 0;
}

static int scope_add(walker *w, scope *sc, char *name) {
    if (!is_name(name)) return 0;
    return map_put(&sc->defs, name, name) || reserve(w->g, name, RES_SUBGRAPH);
}

/* Fills sc with what s defines (reserving those names in the index). */
static int scope_define(walker *w, scope *sc, const wm_onnx_graph *s) {
    int rc = 0;
    for (size_t i = 0; !rc && i < s->n_input; i++) rc = scope_add(w, sc, s->input[i]->name);
    for (size_t i = 0; !rc && i < s->n_initializer; i++) rc = scope_add(w, sc, s->initializer[i]->name);
    for (size_t i = 0; !rc && i < s->n_sparse_initializer; i++) {
        const wm_onnx_tensor *t = s->sparse_initializer[i]->values;
        rc = t ? scope_add(w, sc, t->name) : 0;
    }
    for (size_t i = 0; !rc && i < s->n_node; i++) {
        const wm_onnx_node *n = s->node[i];
        for (size_t k = 0; !rc && k < n->n_output; k++) rc = scope_add(w, sc, n->output[k]);
        if (!rc) rc = reserve(w->g, n->name, RES_NAME);
    }
    return rc;
}

/* A name used at scope sc: recorded as a subgraph use of w->node when no enclosing subgraph defines it. */
static int walk_ref(walker *w, const scope *sc, char *name) {
    if (!is_name(name) || scope_has(sc, name) || map_get(&w->seen, name)) return 0;
    wm_value *v = val_intern(w->g, name);
    if (!v || map_put(&w->seen, name, v)) return -1;
    return use_has(v, w->node, WM_USE_SUBGRAPH) ? 0 : use_add(w->g, v, w->node, WM_USE_SUBGRAPH);
}

static int walk_graph(walker *w, const wm_onnx_graph *s, const scope *up) {
    scope sc = {{NULL, 0, 0}, up};
    int rc = scope_define(w, &sc, s);
    for (size_t i = 0; !rc && i < s->n_node; i++) {
        const wm_onnx_node *n = s->node[i];
        for (size_t k = 0; !rc && k < n->n_input; k++) rc = walk_ref(w, &sc, n->input[k]);
        for (size_t k = 0, ns = n_subgraphs(n); !rc && k < ns; k++) rc = walk_graph(w, subgraph(n, k), &sc);
    }
    for (size_t i = 0; !rc && i < s->n_output; i++) rc = walk_ref(w, &sc, s->output[i]->name);
    map_free(&sc.defs);
    return rc;
}

static int index_subgraph_uses(wm_graph *g, wm_onnx_node *n) {
    size_t ns = n_subgraphs(n);
    walker w = {g, n, {NULL, 0, 0}};
    int rc = 0;
    for (size_t k = 0; !rc && k < ns; k++) rc = walk_graph(&w, subgraph(n, k), NULL);
    map_free(&w.seen);
    return rc;
}

static void drop_subgraph_uses(wm_graph *g, const wm_onnx_node *n) {
    for (size_t i = 0; i < g->n_vals; i++) use_drop(g->vals[i], n, WM_USE_SUBGRAPH);
}

/* 1 when s itself defines name (an input, initializer or node output of s). */
static int graph_defines(const wm_onnx_graph *s, const char *name) {
    for (size_t i = 0; i < s->n_input; i++)
        if (name_eq(s->input[i]->name, name)) return 1;
    for (size_t i = 0; i < s->n_initializer; i++)
        if (name_eq(s->initializer[i]->name, name)) return 1;
    for (size_t i = 0; i < s->n_sparse_initializer; i++) {
        const wm_onnx_tensor *t = s->sparse_initializer[i]->values;
        if (t && name_eq(t->name, name)) return 1;
    }
    for (size_t i = 0; i < s->n_node; i++)
        for (size_t k = 0; k < s->node[i]->n_output; k++)
            if (name_eq(s->node[i]->output[k], name)) return 1;
    return 0;
}

static void node_rename_refs(wm_onnx_node *n, const char *from, char *to);

/* Renames the references to outer value from inside subgraph s (unless s shadows it). */
static void sub_rename_refs(wm_onnx_graph *s, const char *from, char *to) {
    if (graph_defines(s, from)) return;
    for (size_t i = 0; i < s->n_node; i++) {
        wm_onnx_node *n = s->node[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (name_eq(n->input[k], from)) n->input[k] = to;
        node_rename_refs(n, from, to);
    }
    for (size_t i = 0; i < s->n_output; i++)
        if (name_eq(s->output[i]->name, from)) s->output[i]->name = to;
}

/* Renames the outer references to from inside the subgraphs of n. */
static void node_rename_refs(wm_onnx_node *n, const char *from, char *to) {
    for (size_t k = 0, ns = n_subgraphs(n); k < ns; k++) sub_rename_refs(subgraph(n, k), from, to);
}

/* ---------------------------------------------------------------- building the index */

static int index_node(wm_graph *g, wm_onnx_node *n) {
    for (size_t k = 0; k < n->n_input; k++) {
        if (!is_name(n->input[k])) continue;
        wm_value *v = val_intern(g, n->input[k]);
        if (!v || use_add(g, v, n, (int32_t)k)) return -1;
    }
    for (size_t k = 0; k < n->n_output; k++) {
        if (!is_name(n->output[k])) continue;
        wm_value *v = val_intern(g, n->output[k]);
        if (!v) return -1;
        if (!v->producer) v->producer = n;
        v->n_producers++;
    }
    if (reserve(g, n->name, RES_NAME)) return -1;
    return index_subgraph_uses(g, n);
}

/* The first node of the graph other than skip with output name, or NULL. */
static wm_onnx_node *find_producer(const wm_graph *g, const char *name, const wm_onnx_node *skip) {
    for (size_t i = 0; i < g->proto->n_node; i++) {
        wm_onnx_node *n = g->proto->node[i];
        for (size_t k = 0; n != skip && k < n->n_output; k++)
            if (name_eq(n->output[k], name)) return n;
    }
    return NULL;
}

static void unindex_node(wm_graph *g, wm_onnx_node *n) {
    for (size_t k = 0; k < n->n_input; k++) {
        wm_value *v = is_name(n->input[k]) ? map_get(&g->values, n->input[k]) : NULL;
        if (v) use_drop(v, n, (int32_t)k);
    }
    for (size_t k = 0; k < n->n_output; k++) {
        wm_value *v = is_name(n->output[k]) ? map_get(&g->values, n->output[k]) : NULL;
        if (!v || !v->n_producers) continue;
        v->n_producers--;
        if (v->producer == n) v->producer = v->n_producers ? find_producer(g, v->name, n) : NULL;
    }
    if (n_subgraphs(n)) drop_subgraph_uses(g, n);
}

/* The record of a listed name into *v (NULL when the entry has no name). -1 on OOM. */
static int list_val(wm_graph *g, char *name, wm_value **v) {
    *v = is_name(name) ? val_intern(g, name) : NULL;
    return is_name(name) && !*v ? -1 : 0;
}

/* Graph inputs and initializers; a name listed twice is flagged DUP_DEF. */
static int index_defs(wm_graph *g) {
    wm_onnx_graph *p = g->proto;
    wm_value *v;
    for (size_t i = 0; i < p->n_input; i++) {
        if (list_val(g, p->input[i]->name, &v)) return -1;
        if (v && v->input) v->dup |= DUP_DEF;
        else if (v) v->input = p->input[i];
    }
    for (size_t i = 0; i < p->n_initializer; i++) {
        if (list_val(g, p->initializer[i]->name, &v)) return -1;
        if (v && v->init) v->dup |= DUP_DEF;
        else if (v) v->init = p->initializer[i];
    }
    for (size_t i = 0; i < p->n_sparse_initializer; i++) {
        wm_onnx_tensor *t = p->sparse_initializer[i]->values;
        if (list_val(g, t ? t->name : NULL, &v)) return -1;
        if (v && (v->init || v->sparse_init)) v->dup |= DUP_DEF;
        else if (v) v->sparse_init = p->sparse_initializer[i];
    }
    return 0;
}

/* Graph outputs and value_info; a name listed twice is flagged DUP_LIST. */
static int index_lists(wm_graph *g) {
    wm_onnx_graph *p = g->proto;
    wm_value *v;
    for (size_t i = 0; i < p->n_output; i++) {
        if (list_val(g, p->output[i]->name, &v)) return -1;
        if (v && v->output) v->dup |= DUP_LIST;
        else if (v) v->output = p->output[i];
    }
    for (size_t i = 0; i < p->n_value_info; i++) {
        if (list_val(g, p->value_info[i]->name, &v)) return -1;
        if (v && v->info) v->dup |= DUP_LIST;
        else if (v) v->info = p->value_info[i];
    }
    return 0;
}

static int index_build(wm_graph *g) {
    if (index_defs(g)) return -1;
    for (size_t i = 0; i < g->proto->n_node; i++)
        if (index_node(g, g->proto->node[i])) return -1;
    if (index_lists(g)) return -1;
    for (size_t i = 0; i < g->n_vals; i++) g->vals[i]->type = val_type(g->vals[i]);
    return 0;
}

static void index_reset(wm_graph *g) {
    wm_arena_free(&g->idx);
    map_free(&g->values);
    g->vals = NULL;
    g->n_vals = 0;
}

/* ---------------------------------------------------------------- lifecycle */

wm_status wm_graph_reindex(wm_graph *g, wm_error *err) {
    index_reset(g);
    if (index_build(g)) {
        index_reset(g);
        return nomem(err);
    }
    return WM_OK;
}

/*
 * Allocates the handle (malloc) and its index; borrows m and gp. *out is
 * NULL on error; the caller frees the handle with wm_graph_free.
 */
wm_status wm_graph_open(wm_onnx_model *m, wm_onnx_graph *gp, wm_graph **out, wm_error *err) {
    *out = NULL;
    if (!m || !gp) return wm_err(err, WM_ERR_INPUT, "graph open: the model has no graph");
    wm_graph *g = calloc(1, sizeof *g);
    if (!g) return nomem(err);
    g->model = m;
    g->proto = gp;
    wm_arena_init(&g->idx);
    wm_status s = wm_graph_reindex(g, err);
    if (s) {
        wm_graph_free(g);
        return s;
    }
    *out = g;
    return WM_OK;
}

void wm_graph_free(wm_graph *g) {
    if (!g) return;
    index_reset(g);
    free(g);
}

wm_onnx_graph *wm_graph_proto(const wm_graph *g) { return g->proto; }
wm_onnx_model *wm_graph_model(const wm_graph *g) { return g->model; }

/* ---------------------------------------------------------------- queries */

wm_value *wm_graph_find_value(const wm_graph *g, const char *name) {
    wm_value *v = is_name(name) ? map_get(&g->values, name) : NULL;
    return v && val_live(v) ? v : NULL;
}

wm_onnx_node *wm_graph_producer(const wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    return v ? v->producer : NULL;
}

const wm_use *wm_graph_consumers(const wm_graph *g, const char *name, size_t *n) {
    const wm_value *v = wm_graph_find_value(g, name);
    *n = v ? v->n_uses : 0;
    return v && v->n_uses ? v->uses : NULL;
}

wm_onnx_tensor *wm_graph_initializer(const wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    return v ? v->init : NULL;
}

static int is_default_domain(const char *d) { return !is_name(d) || strcmp(d, "ai.onnx") == 0; }

wm_onnx_attr *wm_graph_node_attr(const wm_onnx_node *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (name_eq(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

const wm_onnx_tensor *wm_graph_constant(const wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    if (!v || v->input) return NULL;
    if (v->init) return v->init;
    const wm_onnx_node *n = v->producer;
    if (!n || v->n_producers != 1 || !name_eq(n->op_type, "Constant") || !is_default_domain(n->domain)) return NULL;
    const wm_onnx_attr *a = wm_graph_node_attr(n, "value");
    return a ? a->t : NULL;
}

int64_t wm_graph_opset(const wm_graph *g, const char *domain) {
    const wm_onnx_modelproto *mp = g->model->proto;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        int same = is_default_domain(domain) ? is_default_domain(d) : name_eq(d, domain);
        if (same) return mp->opset_import[i]->version;
    }
    return -1;
}

/* ---------------------------------------------------------------- adding nodes */

/* *dst = copy of s in a, NULL for NULL or "". -1 on OOM. */
static int copy_opt(wm_arena *a, char **dst, const char *s) {
    *dst = is_name(s) ? wm_arena_strdup(a, s) : NULL;
    return is_name(s) && !*dst ? -1 : 0;
}

/* Appends copies of names[0..k) (NULL as "") to the string array *arr. -1 on OOM. */
static int push_names(wm_arena *a, char ***arr, size_t *n, const char *const *names, size_t k) {
    for (size_t i = 0; i < k; i++) {
        char **slot = wm_vec_push(a, arr, n, sizeof *slot);
        if (!slot || !(*slot = wm_arena_strdup(a, names[i] ? names[i] : ""))) return -1;
    }
    return 0;
}

/* Returns the node, owned by the model arena and listed in the graph; NULL with err set. */
wm_onnx_node *wm_graph_add_node(wm_graph *g, const char *op_type, const char *domain, const char *name,
                                const char *const *inputs, size_t n_in, const char *const *outputs, size_t n_out,
                                wm_error *err) {
    if (!is_name(op_type) || (n_in && !inputs) || (n_out && !outputs)) {
        wm_err(err, WM_ERR_INPUT, "graph '%s': add node: missing op_type, inputs or outputs", gname(g));
        return NULL;
    }
    wm_arena *a = &g->model->arena;
    wm_onnx_node *n = wm_pb_new(a, &wm_onnx_node_desc), **slot = NULL;
    if (!n || !(n->op_type = wm_arena_strdup(a, op_type)) || copy_opt(a, &n->domain, domain) ||
        copy_opt(a, &n->name, name) || push_names(a, &n->input, &n->n_input, inputs, n_in) ||
        push_names(a, &n->output, &n->n_output, outputs, n_out) ||
        !(slot = wm_vec_push(a, &g->proto->node, &g->proto->n_node, sizeof *slot))) {
        nomem(err);
        return NULL;
    }
    *slot = n;
    if (index_node(g, n)) {
        nomem(err);
        return NULL;
    }
    return n;
}

wm_status wm_graph_remove_node(wm_graph *g, wm_onnx_node *n, wm_error *err) {
    wm_onnx_graph *p = g->proto;
    size_t i = 0;
    while (i < p->n_node && p->node[i] != n) i++;
    if (!n || i == p->n_node) return wm_err(err, WM_ERR_INPUT, "graph '%s': remove node: not in the graph", gname(g));
    wm_vec_remove(&p->node, &p->n_node, sizeof *p->node, i);
    unindex_node(g, n);
    return WM_OK;
}

/* ---------------------------------------------------------------- attributes */

/*
 * A fresh attribute `name` of type on n (in the model arena), replacing one
 * of the same name; subgraph uses are re-derived when a graph attribute
 * goes. NULL on OOM.
 */
static wm_onnx_attr *attr_new(wm_graph *g, wm_onnx_node *n, const char *name, int32_t type) {
    wm_arena *a = &g->model->arena;
    wm_onnx_attr *at = wm_pb_new(a, &wm_onnx_attr_desc);
    if (!at || !(at->name = wm_arena_strdup(a, name))) return NULL;
    at->type = type;
    wm_onnx_attr *old = wm_graph_node_attr(n, name);
    if (!old) {
        wm_onnx_attr **slot = wm_vec_push(a, &n->attribute, &n->n_attribute, sizeof *slot);
        if (!slot) return NULL;
        *slot = at;
        return at;
    }
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] == old) n->attribute[i] = at;
    if (old->g || old->n_graphs) {
        drop_subgraph_uses(g, n);
        if (index_subgraph_uses(g, n)) return NULL;
    }
    return at;
}

static wm_status attr_args(const wm_graph *g, const wm_onnx_node *n, const char *name, wm_error *err) {
    if (n && is_name(name)) return WM_OK;
    return wm_err(err, WM_ERR_INPUT, "graph '%s': set attribute: missing node or attribute name", gname(g));
}

wm_status wm_graph_set_attr_int(wm_graph *g, wm_onnx_node *n, const char *name, int64_t v, wm_error *err) {
    wm_status s = attr_args(g, n, name, err);
    if (s) return s;
    wm_onnx_attr *a = attr_new(g, n, name, WM_ATTR_INT);
    if (!a) return nomem(err);
    a->i = v;
    wm_pb_set_has(&wm_onnx_attr_desc, a, 3); /* written even when 0 */
    return WM_OK;
}

wm_status wm_graph_set_attr_float(wm_graph *g, wm_onnx_node *n, const char *name, float v, wm_error *err) {
    wm_status s = attr_args(g, n, name, err);
    if (s) return s;
    wm_onnx_attr *a = attr_new(g, n, name, WM_ATTR_FLOAT);
    if (!a) return nomem(err);
    a->f = v;
    wm_pb_set_has(&wm_onnx_attr_desc, a, 2);
    return WM_OK;
}

/* Appends copies of src[0..k) (elem bytes each) to the wm_vec *arr. -1 on OOM. */
static int vec_append(wm_arena *a, void *arr, size_t *n, size_t elem, const void *src, size_t k) {
    for (size_t i = 0; i < k; i++) {
        void *slot = wm_vec_push(a, arr, n, elem);
        if (!slot) return -1;
        memcpy(slot, (const unsigned char *)src + i * elem, elem);
    }
    return 0;
}

/* An INTS or FLOATS attribute: nv values of elem bytes from v */
static wm_status set_attr_array(wm_graph *g, wm_onnx_node *n, const char *name, int32_t type, const void *v, size_t nv,
                                size_t elem, wm_error *err) {
    wm_status s = attr_args(g, n, name, err);
    if (s) return s;
    if (nv && !v) return wm_err(err, WM_ERR_INPUT, "graph '%s': attribute '%s': no values", gname(g), name);
    wm_onnx_attr *a = attr_new(g, n, name, type);
    if (!a) return nomem(err);
    int fail = type == WM_ATTR_INTS ? vec_append(&g->model->arena, &a->ints, &a->n_ints, elem, v, nv)
                                    : vec_append(&g->model->arena, &a->floats, &a->n_floats, elem, v, nv);
    return fail ? nomem(err) : WM_OK;
}

wm_status wm_graph_set_attr_ints(wm_graph *g, wm_onnx_node *n, const char *name, const int64_t *v, size_t nv,
                                 wm_error *err) {
    return set_attr_array(g, n, name, WM_ATTR_INTS, v, nv, sizeof *v, err);
}

wm_status wm_graph_set_attr_floats(wm_graph *g, wm_onnx_node *n, const char *name, const float *v, size_t nv,
                                   wm_error *err) {
    return set_attr_array(g, n, name, WM_ATTR_FLOATS, v, nv, sizeof *v, err);
}

wm_status wm_graph_copy_attrs(wm_graph *g, wm_onnx_node *dst, const wm_onnx_node *src, wm_error *err) {
    if (!dst || !src) return wm_err(err, WM_ERR_INPUT, "graph '%s': copy attributes: missing node", gname(g));
    for (size_t i = 0; i < src->n_attribute; i++) {
        const wm_onnx_attr *at = src->attribute[i];
        if (!at || at->g || at->n_graphs)
            return wm_err(err, WM_ERR_UNSUPPORTED, "graph '%s': copy attributes: graph attributes are not copied",
                          gname(g));
        wm_onnx_attr *old = wm_graph_node_attr(dst, at->name);
        if (old) {
            for (size_t k = 0; k < dst->n_attribute; k++)
                if (dst->attribute[k] == old) dst->attribute[k] = (wm_onnx_attr *)at;
            continue;
        }
        wm_onnx_attr **slot = wm_vec_push(&g->model->arena, &dst->attribute, &dst->n_attribute, sizeof *slot);
        if (!slot) return nomem(err);
        *slot = (wm_onnx_attr *)at; /* the arena keeps src's attributes alive (removed nodes stay in it) */
    }
    return WM_OK;
}

wm_status wm_graph_set_attr_string(wm_graph *g, wm_onnx_node *n, const char *name, const char *v, wm_error *err) {
    wm_status s = attr_args(g, n, name, err);
    if (s) return s;
    if (!v) return wm_err(err, WM_ERR_INPUT, "graph '%s': attribute '%s': NULL string", gname(g), name);
    wm_onnx_attr *a = attr_new(g, n, name, WM_ATTR_STRING);
    char *copy = a ? wm_arena_strdup(&g->model->arena, v) : NULL;
    if (!copy) return nomem(err);
    a->s = (wm_bytes){(const uint8_t *)copy, strlen(copy)};
    return WM_OK;
}

wm_status wm_graph_set_attr_tensor(wm_graph *g, wm_onnx_node *n, const char *name, wm_onnx_tensor *t,
                                   wm_error *err) {
    wm_status s = attr_args(g, n, name, err);
    if (s) return s;
    if (!t) return wm_err(err, WM_ERR_INPUT, "graph '%s': attribute '%s': NULL tensor", gname(g), name);
    wm_onnx_attr *a = attr_new(g, n, name, WM_ATTR_TENSOR);
    if (!a) return nomem(err);
    a->t = t;
    return WM_OK;
}

wm_status wm_graph_set_attr_graph(wm_graph *g, wm_onnx_node *n, const char *name, wm_onnx_graph *sub,
                                  wm_error *err) {
    wm_status s = attr_args(g, n, name, err);
    if (s) return s;
    if (!sub) return wm_err(err, WM_ERR_INPUT, "graph '%s': attribute '%s': NULL graph", gname(g), name);
    wm_onnx_attr *a = attr_new(g, n, name, WM_ATTR_GRAPH);
    if (!a) return nomem(err);
    a->g = sub;
    drop_subgraph_uses(g, n);
    return index_subgraph_uses(g, n) ? nomem(err) : WM_OK;
}

/* ---------------------------------------------------------------- tensors, inputs, outputs */

static wm_status check_raw(const char *name, int32_t dtype, const int64_t *dims, size_t n_dims, wm_bytes raw,
                           wm_error *err) {
    name = name ? name : "";
    if (dtype == WM_DT_UNDEFINED || dtype == WM_DT_STRING || !wm_dtype_valid(dtype))
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': dtype %d cannot be given as raw bytes", name, (int)dtype);
    if ((n_dims && !dims) || (raw.n && !raw.p))
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': missing dims or data", name);
    uint64_t numel = 1, nbytes = 0;
    for (size_t i = 0; i < n_dims; i++)
        if (dims[i] < 0 || !wm_mul_u64(numel, (uint64_t)dims[i], &numel))
            return wm_err(err, WM_ERR_INPUT, "tensor '%s': bad dim %lld", name, (long long)dims[i]);
    if (!wm_dtype_nbytes(dtype, numel, &nbytes) || nbytes != raw.n)
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': %zu bytes given, %s x %llu elements take %llu", name,
                      raw.n, wm_dtype_name(dtype), (unsigned long long)numel, (unsigned long long)nbytes);
    return WM_OK;
}

/* *out = a new tensor in the model arena (raw borrowed); NULL on error. */
static wm_status make_tensor(wm_graph *g, const char *name, int32_t dtype, const int64_t *dims, size_t n_dims,
                             wm_bytes raw, wm_onnx_tensor **out, wm_error *err) {
    *out = NULL;
    wm_status s = check_raw(name, dtype, dims, n_dims, raw, err);
    if (s) return s;
    wm_arena *a = &g->model->arena;
    wm_onnx_tensor *t = wm_pb_new(a, &wm_onnx_tensor_desc);
    if (!t || copy_opt(a, &t->name, name) || vec_append(a, &t->dims, &t->n_dims, sizeof *dims, dims, n_dims))
        return nomem(err);
    t->data_type = dtype;
    t->raw_data = raw;
    *out = t;
    return WM_OK;
}

/* Returns a tensor owned by the model arena (raw borrowed), or NULL with err set. */
wm_onnx_tensor *wm_graph_make_tensor(wm_graph *g, const char *name, int32_t dtype, const int64_t *dims,
                                     size_t n_dims, wm_bytes raw, wm_error *err) {
    wm_onnx_tensor *t;
    make_tensor(g, name, dtype, dims, n_dims, raw, &t, err);
    return t;
}

wm_status wm_graph_add_initializer(wm_graph *g, const char *name, int32_t dtype, const int64_t *dims, size_t n_dims,
                                   wm_bytes raw, wm_onnx_tensor **out, wm_error *err) {
    if (out) *out = NULL;
    if (!is_name(name)) return wm_err(err, WM_ERR_INPUT, "graph '%s': initializer without a name", gname(g));
    const wm_value *old = wm_graph_find_value(g, name);
    if (old && (old->init || old->sparse_init || old->producer))
        return wm_err(err, WM_ERR_INPUT, "graph '%s': initializer '%s': the value is already defined", gname(g), name);
    wm_onnx_tensor *t, **slot = NULL;
    wm_status s = make_tensor(g, name, dtype, dims, n_dims, raw, &t, err);
    if (s) return s;
    wm_value *v = val_intern(g, t->name);
    if (!v || !(slot = wm_vec_push(&g->model->arena, &g->proto->initializer, &g->proto->n_initializer, sizeof *slot)))
        return nomem(err);
    *slot = v->init = t;
    if (out) *out = t;
    return WM_OK;
}

size_t wm_graph_remove_unused_initializers(wm_graph *g) {
    wm_onnx_graph *p = g->proto;
    size_t kept = 0, n = p->n_initializer;
    for (size_t i = 0; i < n; i++) {
        wm_onnx_tensor *t = p->initializer[i];
        wm_value *v = is_name(t->name) ? map_get(&g->values, t->name) : NULL;
        if (v && !v->n_uses && !v->input && !v->output) {
            if (v->init == t) v->init = NULL;
            continue;
        }
        p->initializer[kept++] = t;
    }
    p->n_initializer = kept;
    return n - kept;
}

/* A ValueInfoProto of tensor type in a (see wm_graph_add_input); NULL on OOM. */
static wm_onnx_value_info *tensor_info(wm_arena *a, const char *name, int32_t elem, const int64_t *dims,
                                       size_t n_dims) {
    wm_onnx_value_info *vi = wm_pb_new(a, &wm_onnx_value_info_desc);
    wm_onnx_type *ty = wm_pb_new(a, &wm_onnx_type_desc);
    wm_onnx_type_tensor *tt = wm_pb_new(a, &wm_onnx_type_tensor_desc);
    if (!vi || !ty || !tt || !(vi->name = wm_arena_strdup(a, name))) return NULL;
    vi->type = ty;
    ty->tensor_type = tt;
    tt->elem_type = elem;
    if (!dims) return vi;
    if (!(tt->shape = wm_pb_new(a, &wm_onnx_shape_desc))) return NULL;
    for (size_t i = 0; i < n_dims; i++) {
        wm_onnx_dim *d = wm_pb_new(a, &wm_onnx_dim_desc);
        wm_onnx_dim **slot = d ? wm_vec_push(a, &tt->shape->dim, &tt->shape->n_dim, sizeof *slot) : NULL;
        if (!slot) return NULL;
        *slot = d;
        if (dims[i] < 0) continue;
        d->dim_value = dims[i];
        wm_pb_set_has(&wm_onnx_dim_desc, d, 1);
    }
    return vi;
}

static wm_status add_io(wm_graph *g, int is_input, const char *name, int32_t elem, const int64_t *dims,
                        size_t n_dims, wm_error *err) {
    const char *what = is_input ? "input" : "output";
    if (!is_name(name)) return wm_err(err, WM_ERR_INPUT, "graph '%s': %s without a name", gname(g), what);
    const wm_value *old = wm_graph_find_value(g, name);
    if (old && (is_input ? old->input : old->output))
        return wm_err(err, WM_ERR_INPUT, "graph '%s': '%s' is already a graph %s", gname(g), name, what);
    wm_arena *a = &g->model->arena;
    wm_onnx_graph *p = g->proto;
    wm_onnx_value_info *vi = tensor_info(a, name, elem, dims, n_dims), **slot = NULL;
    wm_value *v = vi ? val_intern(g, vi->name) : NULL;
    if (v) slot = is_input ? wm_vec_push(a, &p->input, &p->n_input, sizeof *slot)
                           : wm_vec_push(a, &p->output, &p->n_output, sizeof *slot);
    if (!slot) return nomem(err);
    *slot = vi;
    if (is_input) v->input = vi;
    else v->output = vi;
    v->type = val_type(v);
    return WM_OK;
}

wm_status wm_graph_add_input(wm_graph *g, const char *name, int32_t elem_type, const int64_t *dims, size_t n_dims,
                             wm_error *err) {
    return add_io(g, 1, name, elem_type, dims, n_dims, err);
}

wm_status wm_graph_add_output(wm_graph *g, const char *name, int32_t elem_type, const int64_t *dims,
                              size_t n_dims, wm_error *err) {
    return add_io(g, 0, name, elem_type, dims, n_dims, err);
}

/* ---------------------------------------------------------------- renaming */

/* Points use u of a value at the name to. */
static void use_rename(const wm_use *u, const char *from, char *to) {
    if (u->slot >= 0) u->node->input[u->slot] = to;
    else node_rename_refs(u->node, from, to);
}

static int has_subgraph_use(const wm_value *v) {
    for (size_t i = 0; i < v->n_uses; i++)
        if (v->uses[i].slot == WM_USE_SUBGRAPH) return 1;
    return 0;
}

/* An error when to is defined inside a subgraph: moving a reference there would be captured. */
static wm_status check_capture(const wm_graph *g, const char *to, wm_error *err) {
    const wm_value *w = map_get(&g->values, to);
    if (!w || !(w->reserved & RES_SUBGRAPH)) return WM_OK;
    return wm_err(err, WM_ERR_INPUT, "graph '%s': '%s' is defined inside a subgraph; pick another name", gname(g), to);
}

wm_status wm_graph_replace_uses(wm_graph *g, const char *from, const char *to, wm_error *err) {
    if (!is_name(from) || !is_name(to))
        return wm_err(err, WM_ERR_INPUT, "graph '%s': replace uses: empty value name", gname(g));
    wm_value *v = map_get(&g->values, from);
    if (!v || !v->n_uses || strcmp(from, to) == 0) return WM_OK;
    wm_status s = has_subgraph_use(v) ? check_capture(g, to, err) : WM_OK;
    if (s) return s;
    wm_value *w = val_intern_copy(g, to);
    if (!w) return nomem(err);
    for (size_t i = 0; i < v->n_uses; i++) {
        wm_use u = v->uses[i];
        use_rename(&u, v->name, w->name);
        if (u.slot == WM_USE_SUBGRAPH && use_has(w, u.node, u.slot)) continue;
        if (use_add(g, w, u.node, u.slot)) return nomem(err);
    }
    v->n_uses = 0;
    return WM_OK;
}

/* Rewrites every reference to from in the graph (slow path for non-SSA values). */
static void rename_scan(wm_graph *g, const char *from, char *to) {
    wm_onnx_graph *p = g->proto;
    for (size_t i = 0; i < p->n_node; i++) {
        wm_onnx_node *n = p->node[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (name_eq(n->input[k], from)) n->input[k] = to;
        for (size_t k = 0; k < n->n_output; k++)
            if (name_eq(n->output[k], from)) n->output[k] = to;
        node_rename_refs(n, from, to);
    }
    for (size_t i = 0; i < p->n_input; i++)
        if (name_eq(p->input[i]->name, from)) p->input[i]->name = to;
    for (size_t i = 0; i < p->n_output; i++)
        if (name_eq(p->output[i]->name, from)) p->output[i]->name = to;
    for (size_t i = 0; i < p->n_value_info; i++)
        if (name_eq(p->value_info[i]->name, from)) p->value_info[i]->name = to;
    for (size_t i = 0; i < p->n_initializer; i++)
        if (name_eq(p->initializer[i]->name, from)) p->initializer[i]->name = to;
    for (size_t i = 0; i < p->n_sparse_initializer; i++) {
        wm_onnx_tensor *t = p->sparse_initializer[i]->values;
        if (t && name_eq(t->name, from)) t->name = to;
    }
}

/* Rewrites the references v's record knows of (v is SSA and listed once). */
static void rename_refs(wm_value *v, char *to) {
    const char *from = v->name;
    wm_onnx_node *n = v->producer;
    for (size_t k = 0; n && k < n->n_output; k++)
        if (name_eq(n->output[k], from)) n->output[k] = to;
    for (size_t i = 0; i < v->n_uses; i++) use_rename(&v->uses[i], from, to);
    if (v->input) v->input->name = to;
    if (v->output) v->output->name = to;
    if (v->info) v->info->name = to;
    if (v->init) v->init->name = to;
    if (v->sparse_init && v->sparse_init->values) v->sparse_init->values->name = to;
}

static void rename_annotations(wm_onnx_graph *p, const char *from, char *to) {
    for (size_t i = 0; i < p->n_quantization_annotation; i++)
        if (name_eq(p->quantization_annotation[i]->tensor_name, from)) p->quantization_annotation[i]->tensor_name = to;
}

/* Moves everything v's record holds to w (a record with no references). */
static void val_move(wm_value *v, wm_value *w) {
    w->producer = v->producer;
    w->n_producers = v->n_producers;
    w->uses = v->uses;
    w->n_uses = v->n_uses;
    w->input = v->input;
    w->output = v->output;
    w->info = v->info;
    w->init = v->init;
    w->sparse_init = v->sparse_init;
    w->type = v->type;
    w->dup = v->dup;
    v->producer = NULL;
    v->n_producers = 0;
    v->uses = NULL;
    v->n_uses = 0;
    v->input = v->output = v->info = NULL;
    v->init = NULL;
    v->sparse_init = NULL;
    v->type = NULL;
    v->dup = 0;
}

wm_status wm_graph_rename_value(wm_graph *g, const char *from, const char *to, wm_error *err) {
    if (!is_name(from) || !is_name(to)) return wm_err(err, WM_ERR_INPUT, "graph '%s': rename: empty name", gname(g));
    wm_value *v = wm_graph_find_value(g, from);
    if (!v) return wm_err(err, WM_ERR_INPUT, "graph '%s': rename: no value '%s'", gname(g), from);
    if (strcmp(from, to) == 0) return WM_OK;
    if (wm_graph_find_value(g, to))
        return wm_err(err, WM_ERR_INPUT, "graph '%s': rename '%s': '%s' is already a value", gname(g), from, to);
    wm_status s = check_capture(g, to, err);
    if (s) return s;
    wm_value *w = val_intern_copy(g, to);
    if (!w) return nomem(err);
    rename_annotations(g->proto, v->name, w->name);
    if (v->dup || v->n_producers > 1) {
        rename_scan(g, v->name, w->name);
        return wm_graph_reindex(g, err);
    }
    rename_refs(v, w->name);
    val_move(v, w);
    return WM_OK;
}

/*
 * Returns a name in the model arena; NULL on OOM. The counter never repeats,
 * and "<p>_<digits>" strings with different digits never coincide, so no
 * two calls return the same name even across reindexes.
 */
const char *wm_graph_unique_name(wm_graph *g, const char *prefix) {
    prefix = prefix ? prefix : "t";
    size_t len = strlen(prefix) + 24;
    char *buf = malloc(len);
    if (!buf) return NULL;
    do snprintf(buf, len, "%s_%zu", prefix, ++g->next_name);
    while (map_get(&g->values, buf));
    char *s = wm_arena_strdup(&g->model->arena, buf);
    free(buf);
    return s;
}

/* ---------------------------------------------------------------- topological sort */

typedef struct node_ix {
    const wm_onnx_node *n;
    size_t i;
} node_ix;

static int cmp_node_ix(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const node_ix *)a)->n, y = (uintptr_t)((const node_ix *)b)->n;
    return (x > y) - (x < y);
}

/* A binary min-heap of node indices: the ready node first in the original order goes first. */
typedef struct heap {
    size_t *a, n;
} heap;

static void heap_push(heap *h, size_t x) {
    size_t i = h->n++;
    for (; i && h->a[(i - 1) / 2] > x; i = (i - 1) / 2) h->a[i] = h->a[(i - 1) / 2];
    h->a[i] = x;
}

static size_t heap_pop(heap *h) {
    size_t top = h->a[0], x = h->a[--h->n], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1] < h->a[c]) c++;
        if (h->a[c] >= x) break;
        h->a[i] = h->a[c];
        i = c;
    }
    h->a[i] = x;
    return top;
}

typedef struct topo {
    wm_graph *g;
    size_t n;            /* nodes */
    node_ix *ix;         /* sorted by node address */
    size_t *prod;        /* per value id: producer index, or NONE */
    size_t *indeg;       /* per node: dependencies not yet emitted */
    size_t *order;       /* emitted node indices */
    wm_onnx_node **sorted;
    unsigned char *mark; /* per node: 1 emitted, 2 visited by the cycle walk */
    heap ready;
} topo;

static size_t node_index(const topo *t, const wm_onnx_node *n) {
    node_ix key = {n, 0};
    const node_ix *hit = bsearch(&key, t->ix, t->n, sizeof key, cmp_node_ix);
    return hit ? hit->i : NONE;
}

/* Every used value defined, none produced twice: else WM_ERR_INPUT. */
static wm_status topo_validate(const wm_graph *g, wm_error *err) {
    char nb[256];
    for (size_t i = 0; i < g->n_vals; i++) {
        const wm_value *v = g->vals[i];
        if (v->n_producers > 1)
            return wm_err(err, WM_ERR_INPUT, "graph '%s': value '%s' is produced by %u nodes, first %s", gname(g),
                          v->name, (unsigned)v->n_producers, node_label(v->producer, nb, sizeof nb));
        if (!v->n_uses || val_defined(v)) continue;
        const wm_use *u = &v->uses[0];
        return wm_err(err, WM_ERR_INPUT,
                      "graph '%s': %s %s '%s', which no node produces and is no graph input or initializer", gname(g),
                      node_label(u->node, nb, sizeof nb), u->slot >= 0 ? "has input" : "has a subgraph using", v->name);
    }
    return WM_OK;
}

static int topo_alloc(topo *t) {
    t->ix = malloc((t->n ? t->n : 1) * sizeof *t->ix);
    t->prod = malloc((t->g->n_vals ? t->g->n_vals : 1) * sizeof *t->prod);
    t->indeg = calloc(t->n ? t->n : 1, sizeof *t->indeg);
    t->order = malloc((t->n ? t->n : 1) * sizeof *t->order);
    t->mark = calloc(t->n ? t->n : 1, 1);
    t->ready.a = malloc((t->n ? t->n : 1) * sizeof *t->ready.a);
    t->sorted = malloc((t->n ? t->n : 1) * sizeof *t->sorted);
    return t->ix && t->prod && t->indeg && t->order && t->mark && t->ready.a && t->sorted ? 0 : -1;
}

static void topo_free(topo *t) {
    free(t->ix);
    free(t->prod);
    free(t->indeg);
    free(t->order);
    free(t->mark);
    free(t->ready.a);
    free(t->sorted);
}

/* Fills ix, prod and indeg; WM_ERR_INTERNAL when a use names a node not in the graph. */
static wm_status topo_edges(topo *t, wm_error *err) {
    wm_graph *g = t->g;
    for (size_t i = 0; i < t->n; i++) t->ix[i] = (node_ix){g->proto->node[i], i};
    qsort(t->ix, t->n, sizeof *t->ix, cmp_node_ix);
    for (size_t i = 0; i < g->n_vals; i++) t->prod[i] = NONE;
    for (size_t i = 0; i < g->n_vals; i++) {
        const wm_value *v = g->vals[i];
        if (!v->producer) continue;
        size_t p = t->prod[i] = node_index(t, v->producer);
        for (size_t k = 0; k < v->n_uses; k++) {
            size_t j = node_index(t, v->uses[k].node);
            if (p == NONE || j == NONE)
                return wm_err(err, WM_ERR_INTERNAL, "graph '%s': stale index for value '%s'", gname(g), v->name);
            t->indeg[j]++;
        }
    }
    return WM_OK;
}

/* Kahn's algorithm; returns how many nodes were emitted into order. */
static size_t topo_run(topo *t) {
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!t->indeg[i]) heap_push(&t->ready, i);
    while (t->ready.n) {
        size_t i = heap_pop(&t->ready);
        const wm_onnx_node *n = t->g->proto->node[i];
        t->order[k++] = i;
        t->mark[i] = 1;
        for (size_t o = 0; o < n->n_output; o++) {
            const wm_value *v = is_name(n->output[o]) ? map_get(&t->g->values, n->output[o]) : NULL;
            for (size_t u = 0; v && u < v->n_uses; u++) {
                size_t j = node_index(t, v->uses[u].node);
                if (--t->indeg[j] == 0) heap_push(&t->ready, j);
            }
        }
    }
    return k;
}

/* A value node j waits for (its producer not emitted); *pj = that producer. NULL if none. */
static const wm_value *blocker(const topo *t, size_t j, size_t *pj) {
    const wm_onnx_node *n = t->g->proto->node[j];
    for (size_t k = 0; k < n->n_input; k++) {
        const wm_value *v = is_name(n->input[k]) ? map_get(&t->g->values, n->input[k]) : NULL;
        if (v && t->prod[v->id] != NONE && t->mark[t->prod[v->id]] != 1) {
            *pj = t->prod[v->id];
            return v;
        }
    }
    for (size_t i = 0; i < t->g->n_vals; i++) {
        const wm_value *v = t->g->vals[i];
        if (t->prod[i] != NONE && t->mark[t->prod[i]] != 1 && use_has(v, n, WM_USE_SUBGRAPH)) {
            *pj = t->prod[i];
            return v;
        }
    }
    return NULL;
}

/* Walks back from the first waiting node until a node repeats: that one is on a cycle. */
static wm_status cycle_error(topo *t, wm_error *err) {
    size_t j = 0, p = 0;
    while (t->mark[j]) j++;
    const wm_value *v = NULL;
    for (;;) {
        t->mark[j] = 2;
        if (!(v = blocker(t, j, &p)))
            return wm_err(err, WM_ERR_INTERNAL, "graph '%s': topological sort stalled", gname(t->g));
        if (t->mark[p] == 2) break;
        j = p;
    }
    v = blocker(t, p, &j);
    char nb[256];
    return wm_err(err, WM_ERR_INPUT, "graph '%s': cycle: %s depends on itself through input '%s'", gname(t->g),
                  node_label(t->g->proto->node[p], nb, sizeof nb), v->name);
}

wm_status wm_graph_topo_sort(wm_graph *g, wm_error *err) {
    wm_status s = topo_validate(g, err);
    if (s) return s;
    topo t;
    memset(&t, 0, sizeof t);
    t.g = g;
    t.n = g->proto->n_node;
    if (topo_alloc(&t)) s = nomem(err);
    if (!s) s = topo_edges(&t, err);
    if (!s && topo_run(&t) < t.n) s = cycle_error(&t, err);
    if (!s) {
        for (size_t i = 0; i < t.n; i++) t.sorted[i] = g->proto->node[t.order[i]];
        if (t.n) memcpy(g->proto->node, t.sorted, t.n * sizeof *t.sorted);
    }
    topo_free(&t);
    return s;
}

/* ---------------------------------------------------------------- check */

wm_status wm_graph_check(const wm_graph *g, wm_error *err) {
    char nb[256];
    for (size_t i = 0; i < g->n_vals; i++) {
        const wm_value *v = g->vals[i];
        const char *n = v->name;
        if (v->n_producers > 1)
            return wm_err(err, WM_ERR_CHECK, "graph '%s': value '%s' is produced by %u nodes (SSA)", gname(g), n,
                          (unsigned)v->n_producers);
        if (v->producer && (v->input || v->init || v->sparse_init))
            return wm_err(err, WM_ERR_CHECK,
                          "graph '%s': value '%s' is both the output of %s and a graph input or initializer", gname(g),
                          n, node_label(v->producer, nb, sizeof nb));
        if (v->dup & DUP_DEF)
            return wm_err(err, WM_ERR_CHECK, "graph '%s': value '%s' is listed twice as graph input or initializer",
                          gname(g), n);
        if (val_defined(v)) continue;
        if (v->n_uses)
            return wm_err(err, WM_ERR_CHECK, "graph '%s': %s uses undefined value '%s'", gname(g),
                          node_label(v->uses[0].node, nb, sizeof nb), n);
        if (v->output) return wm_err(err, WM_ERR_CHECK, "graph '%s': graph output '%s' is not defined", gname(g), n);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- additions (builder) */

wm_status wm_graph_add_initializer_tensor(wm_graph *g, wm_onnx_tensor *t, wm_error *err) {
    if (!t || !is_name(t->name)) return wm_err(err, WM_ERR_INPUT, "graph '%s': initializer without a name", gname(g));
    const wm_value *old = wm_graph_find_value(g, t->name);
    if (old && (old->init || old->sparse_init || old->producer))
        return wm_err(err, WM_ERR_INPUT, "graph '%s': initializer '%s': the value is already defined", gname(g),
                      t->name);
    wm_onnx_tensor **slot = NULL;
    wm_value *v = val_intern(g, t->name);
    if (!v || !(slot = wm_vec_push(&g->model->arena, &g->proto->initializer, &g->proto->n_initializer, sizeof *slot)))
        return nomem(err);
    *slot = v->init = t;
    return WM_OK;
}

/* ---------------------------------------------------------------- input rewiring (added for the optimizer) */

wm_status wm_graph_set_input(wm_graph *g, wm_onnx_node *n, size_t slot, const char *name, wm_error *err) {
    if (!n || slot > 4096) return wm_err(err, WM_ERR_INPUT, "graph '%s': set input: bad node or slot", gname(g));
    wm_arena *a = &g->model->arena;
    while (n->n_input <= slot) {
        char **s = wm_vec_push(a, &n->input, &n->n_input, sizeof *s);
        if (!s) return nomem(err);
        *s = (char *)"";
    }
    if (is_name(n->input[slot])) {
        wm_value *old = map_get(&g->values, n->input[slot]);
        if (old) use_drop(old, n, (int32_t)slot);
    }
    if (!is_name(name)) {
        n->input[slot] = (char *)"";
        return WM_OK;
    }
    wm_value *v = val_intern_copy(g, name);
    if (!v || use_add(g, v, n, (int32_t)slot)) return nomem(err);
    n->input[slot] = v->name;
    return WM_OK;
}
