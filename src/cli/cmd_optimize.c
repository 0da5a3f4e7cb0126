/*
 * cmd_optimize.c - `winml optimize -m IN.onnx -o OUT.onnx [--level L]
 * [--enable-PASS] [--disable-PASS] [--list-passes] [-f json] [--report F]`:
 * graph cleanup and fusions, node count and op histogram before -> after.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/sysmem.h"
#include "core/error.h"
#include "core/output.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_out.h"
#include "opt/opt.h"
#include "opt/quant.h"

static void help(void) {
    printf("usage: winml optimize -m IN.onnx [-o OUT.onnx] [--level basic|extended|all]\n"
           "                      [--enable-PASS ...] [--disable-PASS ...] [-l|--list-passes]\n"
           "                      [--fold-max-bytes N] [--external-threshold BYTES] [--overwrite]\n"
           "                      [-f table|json] [--report FILE] [-q]\n\n"
           "Cleans up and fuses the graph for ONNX Runtime and winml's engine: constant folding,\n"
           "shape arithmetic, dead nodes, common subexpressions, identity chains, initializer\n"
           "dedup (basic); LayerNorm, RMSNorm, SkipLayerNorm, Gelu/FastGelu/BiasGelu, QuickGelu,\n"
           "Gemm, RotaryEmbedding, MultiHeadAttention (extended); GroupQueryAttention (all,\n"
           "the default). Prints the node count and op histogram before -> after and what each\n"
           "pass did. -o names the optimized model (weights go to OUT.onnx.data from 100 MiB or\n"
           "--external-threshold);\n"
           "--report FILE writes the JSON report. --list-passes shows the passes and levels.\n"
           "An existing OUT.onnx is replaced (with its data file, in one step) only when winml wrote\n"
           "it; --overwrite replaces another program's file too. Without -o the output is IN_opt.onnx beside\n"
           "the input (the reference's default), under the same rule.\n");
}

/* Writes j to c->out (when set) through a temporary file renamed on success; returns an exit code. */
int wm_cli_opt_write_json(const wm_cli *c, const wm_json *j) {
    if (!c->out) return WM_EXIT_OK;
    if (j->oom) {
        fprintf(stderr, "%s: error: out of memory building the result\n", c->prog);
        return WM_EXIT_ERROR;
    }
    wm_error e = {0};
    if (wm_json_out_check(c->out, c->model, &e) || wm_write_json_atomic(c->out, wm_json_text(j), &e)) {
        fprintf(stderr, "%s: error: %s\n", c->prog, e.msg);
        return WM_EXIT_ERROR;
    }
    return WM_EXIT_OK;
}

static int list_passes(const wm_cli *c) {
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_arr(&j, "passes");
    static const char *lv[] = {"none", "basic", "extended", "all", "engine"};
    for (size_t i = 0; i < wm_opt_pass_count(); i++) {
        const wm_opt_pass_info *p = wm_opt_pass_get(i);
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "name", p->name);
        wm_json_str(&j, "level", lv[p->level]);
        wm_json_str(&j, "summary", p->summary);
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    int rc = wm_cli_emit(c, "optimizer passes", &j);
    wm_json_free(&j);
    return rc;
}

static int parse_level(const char *s, wm_opt_level *l) {
    if (!strcmp(s, "basic")) *l = WM_OPT_BASIC;
    else if (!strcmp(s, "extended")) *l = WM_OPT_EXTENDED;
    else if (!strcmp(s, "all")) *l = WM_OPT_ALL;
    else if (!strcmp(s, "none") || !strcmp(s, "disabled")) *l = WM_OPT_NONE;
    else return -1;
    return 0;
}

/* Takes --enable-X / --disable-X out of argv (getopt cannot match prefixes); returns the new argc or -1. */
static int take_switches(const wm_cli *c, int argc, char **argv, wm_opt_config *cfg) {
    int k = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int en = !strncmp(a, "--enable-", 9), dis = !strncmp(a, "--disable-", 10);
        if (!strcmp(a, "--")) {
            while (i < argc) argv[k++] = argv[i++];
            break;
        }
        if (!en && !dis) {
            argv[k++] = argv[i];
            continue;
        }
        const char *name = a + (en ? 9 : 10);
        if (!wm_opt_pass_find(name)) {
            wm_cli_usage_error(c, "%s: no such pass (see --list-passes)", a);
            return -1;
        }
        if (en && cfg->n_enable < WM_OPT_MAX_SWITCHES) cfg->enable[cfg->n_enable++] = name;
        if (dis && cfg->n_disable < WM_OPT_MAX_SWITCHES) cfg->disable[cfg->n_disable++] = name;
    }
    argv[k] = NULL;
    return k;
}

static void print_table(const wm_cli *c, const char *in, const char *out, const wm_opt_report *r) {
    if (c->quiet) return;
    printf("%s -> %s\n", in, out);
    printf("nodes: %zu -> %zu   initializers: %zu -> %zu\n", r->nodes_before, r->nodes_after, r->inits_before,
           r->inits_after);
    printf("%-22s %6s %8s %8s\n", "pass", "fired", "before", "after");
    for (size_t i = 0; i < r->n_passes; i++) {
        const wm_opt_pass_report *p = &r->passes[i];
        printf("%-22s %6zu %8zu %8zu", p->name, p->fired, p->nodes_before, p->nodes_after);
        for (size_t k = 0; k < p->delta.n && k < 6; k++)
            printf("  %s%+lld", p->delta.items[k].op, (long long)p->delta.items[k].n);
        printf("\n");
    }
    printf("ops after (%zu types):", r->after.n);
    for (size_t i = 0; i < r->after.n; i++) printf(" %s %lld", r->after.items[i].op, (long long)r->after.items[i].n);
    printf("\n");
}

int wm_cmd_optimize(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml optimize");
    wm_opt_config cfg;
    wm_opt_config_default(&cfg);
    const char *report_path = NULL;
    int list = 0;
    enum { O_LEVEL = 256, O_REPORT, O_FOLD, O_OVERWRITE, O_EXT };
    int overwrite = 0;
    uint64_t ext_threshold = 0;
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"level", required_argument, 0, O_LEVEL},
                                          {"report", required_argument, 0, O_REPORT},
                                          {"fold-max-bytes", required_argument, 0, O_FOLD},
                                          {"overwrite", no_argument, 0, O_OVERWRITE},
                                          {"external-threshold", required_argument, 0, O_EXT},
                                          {"list-passes", no_argument, 0, 'l'},
                                          {"list-capabilities", no_argument, 0, 'l'},
                                          {0, 0, 0, 0}};
    if ((argc = take_switches(&c, argc, argv, &cfg)) < 0) return WM_EXIT_ERROR;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "l", longs, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return WM_EXIT_OK;
        }
        if (opt == 'l') list = 1;
        else if (opt == O_LEVEL) {
            if (parse_level(optarg, &cfg.level))
                return wm_cli_usage_error(&c, "--level: unknown level '%s' (basic, extended, all)", optarg);
        } else if (opt == O_REPORT) report_path = optarg;
        else if (opt == O_OVERWRITE) overwrite = 1;
        else if (opt == O_EXT) {
            if (wm_parse_size(optarg, &ext_threshold))
                return wm_cli_usage_error(&c, "--external-threshold: '%s' is not a size in bytes (e.g. 1048576 or 1M)",
                                          optarg);
        }
        else if (opt == O_FOLD) {
            uint64_t v = 0; /* strtoull took "-1" (wrapped to 2^64-1) and clamped 2^64 without a word */
            if (strcmp(optarg, "0") && wm_parse_size(optarg, &v))
                return wm_cli_usage_error(&c, "--fold-max-bytes: '%s' is not a size in bytes (e.g. 16777216 or 16M; 0: "
                                          "the default, 16 MiB)", optarg);
            cfg.fold_max_bytes = v;
        } else {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (list) return list_passes(&c);
    const char *out = c.out;
    c.out = report_path; /* -o is the model here; the JSON goes to --report */
    if (!c.model) return wm_cli_usage_error(&c, "-m IN.onnx is required");
    char def_out[4096];
    if (!out) { /* the reference's default: IN_opt.onnx beside the input */
        if (wm_cli_default_out(&c, c.model, "_opt.onnx", def_out, sizeof def_out)) return WM_EXIT_ERROR;
        out = def_out;
    }
    if (wm_cli_report_check(&c, report_path, out)) return WM_EXIT_ERROR;

    wm_error err = {0};
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    wm_opt_report rep;
    memset(&rep, 0, sizeof rep);
    int rc = WM_EXIT_ERROR;
    wm_lockfile lock = WM_LOCKFILE_INIT;
    if (wm_onnx_load(c.model, &m, &err) || wm_graph_open(m, m->proto->graph, &g, &err)) goto fail;
    /* a large model is written tensor by tensor with its mapped pages released as they go (RSS stays small) */
    uint64_t bytes = m->file.size;
    for (size_t i = 0; i < m->n_ext; i++) bytes += m->ext[i].map.size;
    if (wm_onnx_out_begin(out, m, overwrite, bytes, &lock, &err)) goto fail;
    if (wm_opt_run(g, &cfg, &rep, &err)) goto fail;
    if (wm_graph_check(g, &err)) {
        err.status = WM_ERR_INTERNAL;
        goto fail;
    }
    if (wm_onnx_set_producer(m, &err)) goto fail;
    wm_onnx_save_opts so;
    wm_onnx_save_opts_default(&so);
    if (ext_threshold) so.threshold_bytes = ext_threshold;
    if (bytes > so.threshold_bytes ? wm_quant_save(g, NULL, out, NULL, &err) : wm_onnx_save(m, out, &so, &err)) goto fail;
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "model", c.model);
    wm_json_str(&j, "output", out);
    static const char *lv[] = {"none", "basic", "extended", "all"};
    wm_json_str(&j, "level", lv[cfg.level]);
    wm_opt_report_json(&rep, &j, "report");
    wm_json_obj_end(&j);
    if (c.json) rc = wm_cli_emit(&c, NULL, &j);
    else {
        rc = wm_cli_opt_write_json(&c, &j);
        if (rc == WM_EXIT_OK) print_table(&c, c.model, out, &rep);
    }
    wm_json_free(&j);
    goto done;
fail:
    rc = wm_cli_fail(&c, &err);
done:
    wm_unlock_output(&lock);
    wm_opt_report_free(&rep);
    wm_graph_free(g);
    wm_onnx_free(m);
    return rc;
}
