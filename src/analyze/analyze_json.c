/* analyze_json.c - the JSON of one analysis target (documented in data/ep_rules/SCHEMA.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "core/error.h"

static int by_count(const void *x, const void *y) {
    const wm_opstat *a = x, *b = y;
    if (a->count != b->count) return a->count < b->count ? 1 : -1;
    int c = strcmp(a->op, b->op);
    return c ? c : strcmp(a->domain, b->domain);
}

wm_status wm_op_stats(const wm_graph *g, const wm_analysis *a, wm_opstat **out, size_t *n_out, wm_error *err) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    *out = NULL;
    *n_out = 0;
    wm_opstat *st = calloc(pg->n_node ? pg->n_node : 1, sizeof *st);
    if (!st) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t ns = 0;
    for (size_t i = 0; i < pg->n_node; i++) {
        const wm_onnx_node *n = pg->node[i];
        const char *dom = n->domain ? n->domain : "";
        wm_opstat *s = NULL;
        for (size_t k = 0; k < ns && !s; k++)
            if (!strcmp(st[k].op, n->op_type) && !strcmp(st[k].domain, dom)) s = &st[k];
        if (!s) {
            s = &st[ns++];
            s->op = n->op_type;
            s->domain = dom;
        }
        s->count++;
        if (a->level[i] > s->level) s->level = a->level[i];
        const char *r = a->reason[i];
        if (r && s->n_reasons < WM_OPSTAT_REASONS) {
            int dup = 0;
            for (size_t k = 0; k < s->n_reasons; k++) dup |= !strcmp(s->reasons[k], r);
            if (!dup) s->reasons[s->n_reasons++] = r;
        }
    }
    qsort(st, ns, sizeof *st, by_count);
    *out = st;
    *n_out = ns;
    return WM_OK;
}

static void ops_json(const wm_graph *g, const wm_analysis *a, wm_json *j) {
    wm_opstat *st = NULL;
    size_t ns = 0;
    wm_error err = {0};
    wm_json_arr(j, "ops");
    if (wm_op_stats(g, a, &st, &ns, &err)) j->oom = 1;
    for (size_t k = 0; k < ns; k++) {
        wm_json_obj(j, NULL);
        wm_json_str(j, "op", st[k].op);
        wm_json_str(j, "domain", st[k].domain);
        wm_json_uint(j, "count", st[k].count);
        wm_json_str(j, "level", wm_level_name(st[k].level));
        wm_json_arr(j, "reasons");
        for (size_t r = 0; r < st[k].n_reasons; r++) wm_json_str(j, NULL, st[k].reasons[r]);
        wm_json_arr_end(j);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    free(st);
}

void wm_analysis_json(const wm_graph *g, const wm_analysis *a, wm_json *j, const char *key) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    wm_json_obj(j, key);
    wm_json_str(j, "ep", a->rules->ep);
    wm_json_str(j, "device", wm_device_name(a->device));
    wm_json_str(j, "verdict", wm_level_name(a->verdict));
    wm_json_obj(j, "counts");
    for (int l = 0; l < 4; l++) wm_json_uint(j, wm_level_name((wm_level)l), a->counts[l]);
    wm_json_obj_end(j);
    wm_json_arr(j, "model_checks");
    for (size_t i = 0; i < a->n_issues; i++) {
        wm_json_obj(j, NULL);
        wm_json_str(j, "check", a->issues[i].check);
        wm_json_bool(j, "blocking", a->issues[i].blocking);
        wm_json_str(j, "message", a->issues[i].message);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_obj(j, "partitions");
    wm_json_str(j, "method", "linear node order");
    wm_json_uint(j, "ep_subgraphs", a->ep_subgraphs);
    wm_json_uint(j, "ep_nodes", a->ep_nodes);
    wm_json_uint(j, "cpu_fallback_nodes", a->cpu_nodes);
    wm_json_uint(j, "crossing_tensors", a->crossing_tensors);
    wm_json_uint(j, "subgraph_nodes_not_analyzed", a->subgraph_nodes);
    wm_json_obj_end(j);
    ops_json(g, a, j);
    wm_analysis_components_json(g, a, j);
    wm_json_arr(j, "nodes");
    for (size_t i = 0; i < pg->n_node; i++) {
        if (a->level[i] == WM_LEVEL_SUPPORTED) continue;
        const wm_onnx_node *n = pg->node[i];
        wm_json_obj(j, NULL);
        wm_json_str(j, "name", n->name ? n->name : "");
        wm_json_str(j, "op", n->op_type);
        wm_json_str(j, "level", wm_level_name(a->level[i]));
        wm_json_str(j, "reason", a->reason[i] ? a->reason[i] : "");
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_str(j, "source", a->rules->source);
    wm_json_obj_end(j);
}
