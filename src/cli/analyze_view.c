/*
 * analyze_view.c - the console view of `winml analyze` (the table format; -f json
 * is the documented JSON instead): one summary line per EP/device, model-level
 * issues, then per target the op table (count, level, reason), the component
 * summary and the partition estimate. Colour only when c->color (a TTY and
 * no NO_COLOR).
 */
#include "cli/analyze_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct pal {
    const char *bold, *dim, *off, *lv[4];
} pal;

static pal palette(const wm_cli *c) {
    pal p = {"", "", "", {"", "", "", ""}};
    if (!c->color) return p;
    p.bold = "\033[1m";
    p.dim = "\033[2m";
    p.off = "\033[0m";
    p.lv[WM_LEVEL_SUPPORTED] = "\033[32m";
    p.lv[WM_LEVEL_PARTIAL] = "\033[33m";
    p.lv[WM_LEVEL_UNKNOWN] = "\033[35m";
    p.lv[WM_LEVEL_UNSUPPORTED] = "\033[31m";
    return p;
}

/* A level padded to w columns, coloured (padding outside the escape codes). */
static void put_level(const pal *p, wm_level l, int w) {
    const char *s = wm_level_name(l);
    printf("%s%s%s%*s", p->lv[l], s, p->off, w > (int)strlen(s) ? w - (int)strlen(s) : 0, "");
}

static void summary_table(const pal *p, const wm_analysis *const *as, size_t n) {
    printf("%s%-15s %-12s %9s %7s %11s %7s %9s %9s %8s%s\n", p->bold, "ep/device", "verdict", "supported", "partial",
           "unsupported", "unknown", "subgraphs", "cpu nodes", "crossing", p->off);
    for (size_t t = 0; t < n; t++) {
        const wm_analysis *a = as[t];
        char name[64];
        snprintf(name, sizeof name, "%s/%s", a->rules->ep, wm_device_name(a->device));
        printf("%-15s ", name);
        put_level(p, a->verdict, 12);
        printf(" %9zu %7zu %11zu %7zu %9zu %9zu %8zu\n", a->counts[WM_LEVEL_SUPPORTED], a->counts[WM_LEVEL_PARTIAL],
               a->counts[WM_LEVEL_UNSUPPORTED], a->counts[WM_LEVEL_UNKNOWN], a->ep_subgraphs, a->cpu_nodes,
               a->crossing_tensors);
    }
}

static wm_status target_detail(const wm_cli *c, const pal *p, const wm_graph *g, const wm_analysis *a, wm_error *err) {
    wm_opstat *ops = NULL;
    wm_component *cs = NULL;
    size_t nops = 0, ncs = 0;
    wm_status s = wm_op_stats(g, a, &ops, &nops, err);
    if (!s) s = wm_components(g, a, &cs, &ncs, err);
    if (s) goto done;
    printf("\n%s%s/%s%s: ", p->bold, a->rules->ep, wm_device_name(a->device), p->off);
    put_level(p, a->verdict, 0);
    printf("  %srules %s%s\n", p->dim, a->rules->path ? a->rules->path : "", p->off);
    for (size_t i = 0; i < a->n_issues; i++)
        printf("  %smodel check%s %s%s: %s\n", a->issues[i].blocking ? p->lv[WM_LEVEL_UNSUPPORTED] : p->dim,
               p->off, a->issues[i].check, a->issues[i].blocking ? " (blocking)" : "", a->issues[i].message);
    printf("  %s%-40s %6s  %-12s %s%s\n", p->bold, "op", "count", "level", "reason", p->off);
    for (size_t k = 0; k < nops; k++) {
        const wm_opstat *o = &ops[k];
        char name[160];
        const char *dom = !strcmp(o->domain, "com.microsoft") ? "ms" : o->domain;
        snprintf(name, sizeof name, "%s%s%s%s", o->op, dom[0] ? " [" : "", dom, dom[0] ? "]" : "");
        printf("  %-40s %6zu  ", name, o->count);
        int why = o->level != WM_LEVEL_SUPPORTED && o->n_reasons;
        put_level(p, o->level, why ? 12 : 0);
        printf("%s%s\n", why ? " " : "", why ? o->reasons[0] : "");
        if (c->verbose)
            for (size_t r = 1; r < o->n_reasons; r++) printf("  %-40s %6s  %-12s %s\n", "", "", "", o->reasons[r]);
    }
    printf("  %s%-40s %6s  %-12s %s%s\n", p->bold, "component", "nodes", "level", "because of", p->off);
    for (size_t k = 0; k < ncs; k++) {
        const wm_component *m = &cs[k];
        printf("  %-40s %6zu  ", m->name, m->nodes);
        put_level(p, m->level, m->n_because ? 12 : 0);
        for (size_t b = 0; b < m->n_because; b++) printf("%s%s", b ? ", " : " ", m->because[b]);
        if (m->not_supported) printf(" %s(%zu node%s)%s", p->dim, m->not_supported, m->not_supported == 1 ? "" : "s", p->off);
        printf("\n");
    }
    printf("  partitions (linear node order): %zu EP subgraph%s with %zu node%s, %zu node%s on CPU, %zu crossing tensor%s",
           a->ep_subgraphs, a->ep_subgraphs == 1 ? "" : "s", a->ep_nodes, a->ep_nodes == 1 ? "" : "s", a->cpu_nodes,
           a->cpu_nodes == 1 ? "" : "s", a->crossing_tensors, a->crossing_tensors == 1 ? "" : "s");
    if (a->subgraph_nodes) printf(", %zu node(s) inside control-flow bodies not analyzed", a->subgraph_nodes);
    printf("\n");
    if (c->verbose) {
        const wm_onnx_graph *pg = wm_graph_proto(g);
        for (size_t i = 0; i < pg->n_node; i++) {
            if (a->level[i] == WM_LEVEL_SUPPORTED) continue;
            printf("  node %s (%s): ", pg->node[i]->name ? pg->node[i]->name : "", pg->node[i]->op_type);
            put_level(p, a->level[i], 0);
            printf(" %s\n", a->reason[i] ? a->reason[i] : "");
        }
    }
done:
    free(ops);
    free(cs);
    return s;
}

wm_status wm_analyze_view(const wm_cli *c, const char *model, const wm_graph *g, const wm_analysis *const *as, size_t n,
                          wm_error *err) {
    pal p = palette(c);
    const wm_onnx_graph *pg = wm_graph_proto(g);
    printf("%s%s%s  %zu nodes, opset %lld\n", c->color ? "\033[1;36m" : "", model, p.off, pg->n_node,
           (long long)wm_graph_opset(g, ""));
    summary_table(&p, as, n);
    if (c->quiet) return WM_OK;
    for (size_t t = 0; t < n; t++)
        if (target_detail(c, &p, g, as[t], err)) return WM_ERR_NOMEM;
    printf("\n%sexit 1 unless every target is supported; -v lists every node that is not, -f json gives all of it%s\n",
           p.dim, p.off);
    return WM_OK;
}
