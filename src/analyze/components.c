/* components.c - name-scope grouping of nodes ("layers 0-23 attn") with a verdict per group. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "core/error.h"

#define MAX_PARTS 16
#define MAX_LAYERS 4096

static int is_root(const char *p, size_t n) {
    static const char *const roots[] = {"model", "transformer", "bert", "roberta", "base_model", "module"};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++)
        if (strlen(roots[i]) == n && !memcmp(roots[i], p, n)) return 1;
    return 0;
}

/* "layers.3" / "h.0" / "3": the offset of the number, or -1. */
static long layer_number(const char *p, size_t n, size_t *num_at) {
    size_t j = n;
    while (j > 0 && isdigit((unsigned char)p[j - 1])) j--;
    if (j == n || n - j > 6) return -1;
    if (j > 0 && p[j - 1] != '.' && p[j - 1] != '_') return -1;
    *num_at = j;
    return strtol(p + j, NULL, 10);
}

void wm_scope_key(const char *name, char *out, size_t n, long *layer) {
    *layer = -1;
    snprintf(out, n, "(top level)");
    if (!name || !strchr(name, '/')) return;
    const char *part[MAX_PARTS];
    size_t len[MAX_PARTS], np = 0;
    for (const char *s = name; *s && np < MAX_PARTS;) {
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        if (e > s) part[np] = s, len[np] = (size_t)(e - s), np++;
        s = e;
    }
    if (np < 2) return;
    np--; /* the last part names the node itself */
    size_t first = 0;
    while (first + 1 < np && is_root(part[first], len[first])) first++;
    size_t o = 0;
    out[0] = 0;
    for (size_t i = first; i < np; i++) {
        size_t at = 0;
        long num = layer_number(part[i], len[i], &at);
        if (num >= 0) {
            o += (size_t)snprintf(out + o, o < n ? n - o : 0, "%s%.*s#", i > first ? "/" : "", (int)at, part[i]);
            *layer = num;
            if (i + 1 < np && o < n) snprintf(out + o, n - o, "/%.*s", (int)len[i + 1], part[i + 1]);
            return;
        }
        o += (size_t)snprintf(out + o, o < n ? n - o : 0, "%s%.*s", i > first ? "/" : "", (int)len[i], part[i]);
    }
    /* no layer number: the top module alone */
    snprintf(out, n, "%.*s", (int)len[first], part[first]);
}

typedef struct group {
    char key[128];
    long lo, hi;
    size_t n_layers;
    unsigned char *seen; /* MAX_LAYERS bits, lazily allocated */
    size_t nodes, bad;
    wm_level level;
    const char *because[WM_COMPONENT_BECAUSE]; size_t n_because;
} group;

/* "layers.#/attn" + 0..23 -> "layers 0-23 attn". */
static void display(const group *gr, char *out, size_t n) {
    char range[64];
    if (gr->lo < 0) range[0] = 0;
    else if (gr->lo == gr->hi) snprintf(range, sizeof range, "%ld", gr->lo);
    else if ((size_t)(gr->hi - gr->lo + 1) == gr->n_layers) snprintf(range, sizeof range, "%ld-%ld", gr->lo, gr->hi);
    else snprintf(range, sizeof range, "%ld-%ld (%zu of them)", gr->lo, gr->hi, gr->n_layers);
    size_t o = 0;
    for (const char *s = gr->key; *s && o + 1 < n; s++) {
        if ((*s == '.' || *s == '_') && s[1] == '#') {
            o += (size_t)snprintf(out + o, n - o, " %s", range);
            s++;
        } else if (*s == '#') {
            o += (size_t)snprintf(out + o, n - o, "%s", range);
        } else if (*s == '/') {
            out[o++] = ' ';
        } else {
            out[o++] = *s;
        }
        if (o >= n) o = n - 1;
    }
    out[o < n ? o : n - 1] = 0;
}

/* ---- node pointer -> index (open addressing) */

typedef struct idx_map {
    const wm_onnx_node **key;
    size_t *val;
    size_t cap;
} idx_map;

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static size_t idx_get(const idx_map *m, const wm_onnx_node *n) {
    if (!n) return SIZE_MAX;
    for (size_t i = ptr_hash(n, m->cap); m->key[i]; i = (i + 1) & (m->cap - 1))
        if (m->key[i] == n) return m->val[i];
    return SIZE_MAX;
}

typedef struct nscope {
    char key[128];
    long layer;
    int scoped; /* 0: no '/' scope (fused or unnamed node) */
} nscope;

/*
 * Scope of every node into sc[n_node]. A node without a scope (the fused nodes
 * optimizers name "SkipLayerNorm_3") takes the scope of its first scoped
 * consumer, else of its first scoped producer, so "layers 0-1 attn" keeps its
 * input norm after fusion. Returns 0 on out of memory.
 */
static int scopes(const wm_graph *g, nscope *sc) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    idx_map m = {0};
    m.cap = 16;
    while (m.cap < pg->n_node * 2 + 2) m.cap *= 2;
    m.key = calloc(m.cap, sizeof *m.key);
    m.val = calloc(m.cap, sizeof *m.val);
    if (!m.key || !m.val) {
        free(m.key);
        free(m.val);
        return 0;
    }
    for (size_t i = 0; i < pg->n_node; i++) {
        size_t h = ptr_hash(pg->node[i], m.cap);
        while (m.key[h]) h = (h + 1) & (m.cap - 1);
        m.key[h] = pg->node[i];
        m.val[h] = i;
        wm_scope_key(pg->node[i]->name, sc[i].key, sizeof sc[i].key, &sc[i].layer);
        sc[i].scoped = strcmp(sc[i].key, "(top level)") != 0;
    }
    /* consumers, last node first so chains of unscoped nodes resolve in one pass */
    for (size_t i = pg->n_node; i-- > 0;) {
        const wm_onnx_node *n = pg->node[i];
        for (size_t o = 0; o < n->n_output && !sc[i].scoped; o++) {
            if (!n->output[o][0]) continue;
            size_t nu = 0;
            const wm_use *u = wm_graph_consumers(g, n->output[o], &nu);
            for (size_t k = 0; k < nu; k++) {
                size_t j = idx_get(&m, u[k].node);
                if (j != SIZE_MAX && sc[j].scoped) {
                    memcpy(sc[i].key, sc[j].key, sizeof sc[i].key);
                    sc[i].layer = sc[j].layer;
                    sc[i].scoped = 1;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < pg->n_node; i++) {
        const wm_onnx_node *n = pg->node[i];
        for (size_t k = 0; k < n->n_input && !sc[i].scoped; k++) {
            size_t j = n->input[k][0] ? idx_get(&m, wm_graph_producer(g, n->input[k])) : SIZE_MAX;
            if (j != SIZE_MAX && sc[j].scoped) {
                memcpy(sc[i].key, sc[j].key, sizeof sc[i].key);
                sc[i].layer = sc[j].layer;
                sc[i].scoped = 1;
            }
        }
    }
    free(m.key);
    free(m.val);
    return 1;
}

wm_status wm_components(const wm_graph *g, const wm_analysis *a, wm_component **out, size_t *n_out, wm_error *err) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    *out = NULL;
    *n_out = 0;
    size_t cap = 16, ng = 0;
    group *gs = calloc(cap, sizeof *gs);
    nscope *sc = calloc(pg->n_node ? pg->n_node : 1, sizeof *sc);
    wm_component *res = NULL;
    if (!gs || !sc || !scopes(g, sc)) goto oom;
    for (size_t i = 0; i < pg->n_node; i++) {
        const wm_onnx_node *n = pg->node[i];
        const char *key = sc[i].key;
        long layer = sc[i].layer;
        group *gr = NULL;
        for (size_t k = ng; k-- > 0;)
            if (!strcmp(gs[k].key, key)) {
                gr = &gs[k];
                break;
            }
        if (!gr) {
            if (ng == cap) {
                group *q = realloc(gs, cap * 2 * sizeof *gs);
                if (!q) goto oom;
                gs = q;
                cap *= 2;
            }
            gr = &gs[ng++];
            memset(gr, 0, sizeof *gr);
            snprintf(gr->key, sizeof gr->key, "%s", key);
            gr->lo = gr->hi = -1;
        }
        gr->nodes++;
        if (layer >= 0) {
            if (gr->lo < 0 || layer < gr->lo) gr->lo = layer;
            if (layer > gr->hi) gr->hi = layer;
            if (!gr->seen && !(gr->seen = calloc(MAX_LAYERS / 8, 1))) goto oom;
            if (layer < MAX_LAYERS && !(gr->seen[layer / 8] & (1u << (layer % 8)))) {
                gr->seen[layer / 8] |= (unsigned char)(1u << (layer % 8));
                gr->n_layers++;
            }
        }
        wm_level lv = a->level[i];
        if (lv > gr->level) gr->level = lv;
        if (lv != WM_LEVEL_SUPPORTED) {
            gr->bad++;
            int dup = 0;
            for (size_t k = 0; k < gr->n_because; k++) dup |= !strcmp(gr->because[k], n->op_type);
            if (!dup && gr->n_because < WM_COMPONENT_BECAUSE) gr->because[gr->n_because++] = n->op_type;
        }
    }
    res = calloc(ng ? ng : 1, sizeof *res);
    if (!res) goto oom;
    for (size_t k = 0; k < ng; k++) {
        display(&gs[k], res[k].name, sizeof res[k].name);
        res[k].nodes = gs[k].nodes;
        res[k].not_supported = gs[k].bad;
        res[k].level = gs[k].level;
        res[k].n_because = gs[k].n_because;
        for (size_t b = 0; b < gs[k].n_because; b++) res[k].because[b] = gs[k].because[b];
    }
    *out = res;
    *n_out = ng;
    for (size_t k = 0; k < ng; k++) free(gs[k].seen);
    free(gs);
    free(sc);
    return WM_OK;
oom:
    if (gs)
        for (size_t k = 0; k < ng; k++) free(gs[k].seen);
    free(gs);
    free(sc);
    free(res);
    return wm_err(err, WM_ERR_NOMEM, "out of memory");
}

void wm_component_summary(const wm_analysis *a, const wm_component *c, char *line, size_t n) {
    size_t o = (size_t)snprintf(line, n, "%s: %s on %s/%s", c->name, wm_level_name(c->level), a->rules->ep,
                                wm_device_name(a->device));
    for (size_t b = 0; b < c->n_because && o < n; b++)
        o += (size_t)snprintf(line + o, n - o, "%s%s", b ? ", " : " because of ", c->because[b]);
}

void wm_analysis_components_json(const wm_graph *g, const wm_analysis *a, wm_json *j) {
    wm_component *cs = NULL;
    size_t nc = 0;
    wm_error err = {0};
    wm_json_arr(j, "components");
    if (wm_components(g, a, &cs, &nc, &err)) j->oom = 1;
    for (size_t k = 0; k < nc; k++) {
        const wm_component *c = &cs[k];
        char line[512];
        wm_json_obj(j, NULL);
        wm_json_str(j, "component", c->name);
        wm_json_uint(j, "nodes", c->nodes);
        wm_json_str(j, "level", wm_level_name(c->level));
        wm_json_uint(j, "not_supported_nodes", c->not_supported);
        wm_json_arr(j, "because");
        for (size_t b = 0; b < c->n_because; b++) wm_json_str(j, NULL, c->because[b]);
        wm_json_arr_end(j);
        wm_component_summary(a, c, line, sizeof line);
        wm_json_str(j, "summary", line);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    free(cs);
}
