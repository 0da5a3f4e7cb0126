/*
 * analyze_ref.c - the reference's analyze result shape (docs/json/analyze.md): analysis_timestamp, metadata
 * (operator histogram, detected patterns per EP) and results[] (one per EP/device: classification of every
 * op pattern, information on the ones not supported). Patterns are operators here: "OP/<domain>/<op_type>",
 * the default domain written "ai.onnx", as the reference's ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "analyze/analyze.h"
#include "core/ep.h"
#include "core/error.h"
#include "winml/onnx.h"

void wm_pattern_id(const char *domain, const char *op, char *out, size_t n) {
    snprintf(out, n, "OP/%s/%s", domain && domain[0] ? domain : "ai.onnx", op);
}

static void metadata(const wm_onnx_modelproto *m, const wm_graph *g, const char *path, const wm_analysis *const *as,
                     size_t n, wm_json *j) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    wm_opstat *st = NULL;
    size_t ns = 0;
    wm_error e = {0};
    if (n && wm_op_stats(g, as[0], &st, &ns, &e)) j->oom = 1;
    wm_json_obj(j, "metadata");
    wm_json_str(j, "model_path", path);
    wm_json_int(j, "opset_version", wm_graph_opset(g, ""));
    wm_json_str(j, "producer_name", m->producer_name ? m->producer_name : "");
    wm_json_str(j, "producer_version", m->producer_version ? m->producer_version : "");
    wm_json_uint(j, "total_operators", pg->n_node);
    wm_json_obj(j, "operator_counts"); /* by op type (the same type in two domains: counted together) */
    size_t uniq = 0;
    for (size_t k = 0; k < ns; k++) {
        int seen = 0;
        for (size_t q = 0; q < k && !seen; q++) seen = !strcmp(st[q].op, st[k].op);
        if (seen) continue;
        size_t c = 0;
        for (size_t q = k; q < ns; q++)
            if (!strcmp(st[q].op, st[k].op)) c += st[q].count;
        wm_json_uint(j, st[k].op, c);
        uniq++;
    }
    wm_json_obj_end(j);
    wm_json_uint(j, "unique_operator_types", uniq);
    wm_json_obj(j, "detected_pattern_count");
    for (size_t t = 0; t < n; t++) {
        const char *full, *ihv;
        wm_ep_identity(as[t]->rules->ep, &full, &ihv);
        int dup = 0; /* one entry per EP: its devices see the same patterns */
        for (size_t q = 0; q < t && !dup; q++) dup = !strcmp(as[q]->rules->ep, as[t]->rules->ep);
        if (dup) continue;
        wm_json_obj(j, full);
        char id[256];
        for (size_t k = 0; k < ns; k++) {
            wm_pattern_id(st[k].domain, st[k].op, id, sizeof id);
            wm_json_uint(j, id, st[k].count);
        }
        wm_json_obj_end(j);
    }
    wm_json_obj_end(j);
    wm_json_obj_end(j);
    free(st);
}

static const char *const class_key[4] = {"supported", "partial", "unknown", "unsupported"}; /* by wm_level */

static void result(const wm_graph *g, const wm_analysis *a, wm_json *j) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    wm_opstat *st = NULL;
    size_t ns = 0;
    wm_error e = {0};
    if (wm_op_stats(g, a, &st, &ns, &e)) j->oom = 1;
    const char *full, *ihv;
    wm_ep_identity(a->rules->ep, &full, &ihv);
    char dev[8];
    snprintf(dev, sizeof dev, "%s", wm_device_name(a->device));
    for (char *p = dev; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    wm_json_obj(j, NULL);
    wm_json_str(j, "ihv_type", ihv);
    wm_json_str(j, "ep_type", full);
    wm_json_str(j, "device_type", dev);
    /* a pattern's level is its worst node's; a blocking model check makes the verdict partial at least */
    wm_json_bool(j, "runtime_support", a->verdict == WM_LEVEL_SUPPORTED);
    wm_json_bool(j, "has_errors", a->counts[WM_LEVEL_UNSUPPORTED] > 0);
    wm_json_bool(j, "has_warnings", a->counts[WM_LEVEL_PARTIAL] > 0);
    char id[256];
    wm_json_obj(j, "classification");
    static const wm_level order[4] = {WM_LEVEL_SUPPORTED, WM_LEVEL_PARTIAL, WM_LEVEL_UNSUPPORTED, WM_LEVEL_UNKNOWN};
    for (int o = 0; o < 4; o++) {
        wm_json_arr(j, class_key[order[o]]);
        for (size_t k = 0; k < ns; k++)
            if (st[k].level == order[o]) {
                wm_pattern_id(st[k].domain, st[k].op, id, sizeof id);
                wm_json_str(j, NULL, id);
            }
        wm_json_arr_end(j);
    }
    wm_json_obj_end(j);
    wm_json_arr(j, "information");
    for (size_t k = 0; k < ns; k++) {
        if (st[k].level == WM_LEVEL_SUPPORTED) continue;
        wm_pattern_id(st[k].domain, st[k].op, id, sizeof id);
        char why[1024] = "";
        for (size_t r = 0; r < st[k].n_reasons; r++) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, "%s%s", r ? "; " : "", st[k].reasons[r]);
        }
        wm_json_obj(j, NULL);
        wm_json_str(j, "Information_id", id);
        wm_json_arr(j, "actions"); /* no rewrite actions: the rules only classify */
        wm_json_arr_end(j);
        wm_json_str(j, "explanation", why);
        wm_json_str(j, "pattern_id", id);
        wm_json_bool(j, "enabled", 1);
        wm_json_str(j, "status", class_key[st[k].level]);
        wm_json_arr(j, "pattern_node_list");
        for (size_t i = 0; i < pg->n_node; i++) {
            const wm_onnx_node *nd = pg->node[i];
            const char *dom = nd->domain ? nd->domain : "";
            if (a->level[i] != WM_LEVEL_SUPPORTED && !strcmp(nd->op_type, st[k].op) && !strcmp(dom, st[k].domain))
                wm_json_str(j, NULL, nd->name ? nd->name : "");
        }
        wm_json_arr_end(j);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_obj_end(j);
    free(st);
}

void wm_analyze_ref_json(const wm_onnx_modelproto *m, const wm_graph *g, const char *model_path,
                         const wm_analysis *const *as, size_t n, wm_json *j) {
    time_t t = time(NULL);
    struct tm tm;
    char ts[32];
    localtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    wm_json_str(j, "analysis_timestamp", ts);
    metadata(m, g, model_path, as, n, j);
    wm_json_arr(j, "results");
    for (size_t t2 = 0; t2 < n; t2++) result(g, as[t2], j);
    wm_json_arr_end(j);
}


/* The manifest's analyze_details of one analysis: lint (pattern ids by level) and autoconf (none here). */
static void details(const wm_graph *g, const wm_analysis *a, wm_json *d) {
    wm_opstat *st = NULL;
    size_t ns = 0, n_err = 0, n_warn = 0;
    wm_error e = {0};
    if (wm_op_stats(g, a, &st, &ns, &e)) d->oom = 1;
    for (size_t k = 0; k < ns; k++) {
        n_err += st[k].level == WM_LEVEL_UNSUPPORTED || st[k].level == WM_LEVEL_UNKNOWN;
        n_warn += st[k].level == WM_LEVEL_PARTIAL;
    }
    char id[256];
    wm_json_obj(d, NULL);
    wm_json_obj(d, "lint");
    wm_json_uint(d, "errors", n_err);
    wm_json_uint(d, "warnings", n_warn);
    wm_json_bool(d, "passed", n_err == 0);
    for (int w = 0; w < 2; w++) {
        wm_json_arr(d, w ? "warning_patterns" : "error_patterns");
        for (size_t k = 0; k < ns; k++) {
            int hit = w ? st[k].level == WM_LEVEL_PARTIAL
                        : st[k].level == WM_LEVEL_UNSUPPORTED || st[k].level == WM_LEVEL_UNKNOWN;
            if (!hit) continue;
            wm_pattern_id(st[k].domain, st[k].op, id, sizeof id);
            wm_json_str(d, NULL, id);
        }
        wm_json_arr_end(d);
    }
    wm_json_obj_end(d);
    wm_json_obj(d, "autoconf"); /* the reference's config flags an analysis pass turned on: none here */
    wm_json_obj_end(d);
    wm_json_bool(d, "autoconf_not_converged", 0);
    wm_json_obj_end(d);
    free(st);
}

wm_status wm_analyze_build(const char *path, const char *rules_path, unsigned device, wm_json *result,
                           wm_json *manifest_details, size_t *unsupported_nodes, wm_error *err) {
    wm_ep_rules *r = NULL;
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    wm_analysis a;
    memset(&a, 0, sizeof a);
    *unsupported_nodes = 0;
    wm_status s = wm_ep_rules_load(rules_path, &r, err);
    if (!s && !(r->devices & device))
        s = wm_err(err, WM_ERR_USAGE, "%s: EP '%s' has no rules for device %s", rules_path, r->ep,
                   wm_device_name(device));
    if (!s) s = wm_onnx_load(path, &m, err);
    if (!s && !m->proto->graph) s = wm_err(err, WM_ERR_INPUT, "%s: the model has no graph", path);
    if (!s) s = wm_graph_open(m, m->proto->graph, &g, err);
    if (!s) s = wm_analyze_graph(g, r, device, &a, err);
    if (!s) {
        const wm_analysis *as[1] = {&a};
        wm_json_obj(result, NULL);
        wm_analyze_ref_json(m->proto, g, path, as, 1, result);
        wm_json_obj_end(result);
        details(g, &a, manifest_details);
        *unsupported_nodes = a.counts[WM_LEVEL_UNSUPPORTED] + a.counts[WM_LEVEL_UNKNOWN];
        if (result->oom || manifest_details->oom) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    wm_analysis_free(&a);
    wm_graph_free(g);
    wm_onnx_free(m);
    wm_ep_rules_free(r);
    return s;
}
