/* components.c - name-scope grouping of nodes ("layers 0-23 attn") with a verdict per group. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"

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
    const char *because[4]; size_t n_because;
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

void wm_analysis_components_json(const wm_graph *g, const wm_analysis *a, wm_json *j) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    size_t cap = 16, ng = 0;
    group *gs = calloc(cap, sizeof *gs);
    wm_json_arr(j, "components");
    if (!gs) {
        j->oom = 1;
        wm_json_arr_end(j);
        return;
    }
    for (size_t i = 0; i < pg->n_node; i++) {
        const wm_onnx_node *n = pg->node[i];
        char key[128];
        long layer;
        wm_scope_key(n->name, key, sizeof key, &layer);
        group *gr = NULL;
        for (size_t k = ng; k-- > 0;)
            if (!strcmp(gs[k].key, key)) {
                gr = &gs[k];
                break;
            }
        if (!gr) {
            if (ng == cap) {
                group *q = realloc(gs, cap * 2 * sizeof *gs);
                if (!q) {
                    j->oom = 1;
                    break;
                }
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
            if (!gr->seen) gr->seen = calloc(MAX_LAYERS / 8, 1);
            if (gr->seen && layer < MAX_LAYERS && !(gr->seen[layer / 8] & (1u << (layer % 8)))) {
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
            if (!dup && gr->n_because < 4) gr->because[gr->n_because++] = n->op_type;
        }
    }
    for (size_t k = 0; k < ng; k++) {
        group *gr = &gs[k];
        char name[192], line[512];
        display(gr, name, sizeof name);
        wm_json_obj(j, NULL);
        wm_json_str(j, "component", name);
        wm_json_uint(j, "nodes", gr->nodes);
        wm_json_str(j, "level", wm_level_name(gr->level));
        wm_json_uint(j, "not_supported_nodes", gr->bad);
        wm_json_arr(j, "because");
        for (size_t b = 0; b < gr->n_because; b++) wm_json_str(j, NULL, gr->because[b]);
        wm_json_arr_end(j);
        size_t o = (size_t)snprintf(line, sizeof line, "%s: %s on %s/%s", name, wm_level_name(gr->level), a->rules->ep,
                                    wm_device_name(a->device));
        for (size_t b = 0; b < gr->n_because && o < sizeof line; b++)
            o += (size_t)snprintf(line + o, sizeof line - o, "%s%s", b ? ", " : " because of ", gr->because[b]);
        wm_json_str(j, "summary", line);
        wm_json_obj_end(j);
        free(gr->seen);
    }
    wm_json_arr_end(j);
    free(gs);
}
