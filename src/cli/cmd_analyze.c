/*
 * cmd_analyze.c - `winml analyze -m model.onnx [--ep E] [--device D] [--rules DIR]`:
 * static execution-provider compatibility, per node, per op, per component.
 * Output JSON: data/ep_rules/SCHEMA.md ("analyze output").
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/analyze_view.h"
#include "cli/cli.h"
#include "core/error.h"

#define MAX_EPS 32

static void help(void) {
    printf("usage: winml analyze -m MODEL.onnx [--ep all|auto|NAME] [-d/--device auto|npu|gpu|cpu|all]\n"
           "                     [--rules DIR] [-f table|json] [-o FILE] [-q] [-v]\n\n"
           "Predicts, without reading weights, which nodes each execution provider would take on\n"
           "each device, from the rule files in DIR (default: $WM_DATA_DIR/ep_rules, else\n"
           "<winml dir>/../data/ep_rules): counts per level, per-op levels and reasons, model-level\n"
           "checks, a linear-order partition estimate and a per-component summary.\n"
           "The table view (default) colours levels on a terminal (not with NO_COLOR or when piped);\n"
           "-q keeps the summary lines only, -v adds every reason and every node not supported;\n"
           "-f json prints the JSON documented in data/ep_rules/SCHEMA.md, -o FILE writes it too.\n"
           "exit: 0 everything supported on every analyzed target, 1 something partial, unsupported\n"
           "or unknown, 2 usage, model or rule-file error.\n"
           "--ep NAME: an alias (qnn) or ONNX Runtime name (QNNExecutionProvider) in any case, or any rule file's\n"
           "name; auto: the EP available here (cpu). --device auto: every device the EP's rules cover.\n");
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The default rules folder into out; 0 when none exists. */
int wm_cli_rules_dir(char *out, size_t n) {
    const char *env = getenv("WM_DATA_DIR");
    if (env && env[0]) {
        snprintf(out, n, "%s/ep_rules", env);
        return is_dir(out);
    }
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return 0;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = 0;
    snprintf(out, n, "%s/../data/ep_rules", exe);
    if (is_dir(out)) return 1;
    snprintf(out, n, "%s/../share/winml/ep_rules", exe);
    return is_dir(out);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The EP names whose rule files are in dir (sorted), malloc'ed; returns the count. */
static size_t list_eps(const char *dir, char **names, size_t max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json") && e->d_name[0] != '.') {
            names[n] = strndup(e->d_name, l - 5);
            if (names[n]) n++;
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    return n;
}

typedef struct target {
    wm_ep_rules *rules; /* borrowed from the rule-set array */
    unsigned device;
    wm_analysis a;
} target;

int wm_cmd_analyze(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml analyze");
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"ep", required_argument, 0, 'E'},
                                          {"device", required_argument, 0, 'D'},
                                          {"rules", required_argument, 0, 'R'},
                                          {0, 0, 0, 0}};
    const char *ep = "all", *device = "all", *rules_dir = NULL;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "d:", longs, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return WM_EXIT_OK;
        }
        if (opt == 'E') { ep = optarg; continue; }
        if (opt == 'D' || opt == 'd') { device = optarg; continue; }
        if (opt == 'R') { rules_dir = optarg; continue; }
        int rc = wm_cli_other_opt(&c, opt, optarg, argv);
        if (rc) return rc;
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");
    /* --ep auto: the EP available here (cpu); a table name in any case -> its rule file's name. --device auto: every
     * device the EP's rules cover (analysis is static: nothing runs). */
    if (!strcasecmp(ep, "auto")) ep = "cpu";
    else if (strcasecmp(ep, "all")) ep = wm_ep_alias(ep);
    else ep = "all";
    if (!strcasecmp(device, "auto")) device = "all";
    unsigned dev_mask = WM_DEV_ALL;
    if (strcasecmp(device, "all")) {
        if (wm_cli_device_arg(&c, device, 0, &device)) return WM_EXIT_ERROR;
        dev_mask = wm_device_bit(device);
    } else device = "all";
    char dir[4096];
    if (rules_dir) snprintf(dir, sizeof dir, "%s", rules_dir);
    else if (!wm_cli_rules_dir(dir, sizeof dir))
        return wm_cli_usage_error(&c, "no rules folder found (pass --rules DIR or set WM_DATA_DIR)");
    if (!is_dir(dir)) return wm_cli_usage_error(&c, "--rules: '%s' is not a folder", dir);

    char *names[MAX_EPS];
    size_t n_names = 0;
    if (!strcmp(ep, "all")) {
        n_names = list_eps(dir, names, MAX_EPS);
        if (!n_names) return wm_cli_usage_error(&c, "no rule files (*.json) in '%s'", dir);
    } else {
        if (strchr(ep, '/') || !ep[0]) return wm_cli_usage_error(&c, "--ep: bad name '%s'", ep);
        names[n_names++] = strdup(ep);
    }

    int rc = WM_EXIT_ERROR;
    wm_error err = {0};
    wm_ep_rules *sets[MAX_EPS] = {0};
    target *tg = calloc(MAX_EPS * 3, sizeof *tg);
    size_t n_tg = 0;
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    wm_json j;
    wm_json_init(&j);
    if (!tg) {
        wm_err(&err, WM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_names; i++) {
        char path[4200];
        if (!names[i]) {
            wm_err(&err, WM_ERR_NOMEM, "out of memory");
            goto fail;
        }
        snprintf(path, sizeof path, "%s/%s.json", dir, names[i]);
        if (access(path, R_OK) != 0 && strcmp(ep, "all")) {
            rc = wm_cli_usage_error(&c, "--ep: no rule file '%s'", path);
            goto done;
        }
        if (wm_ep_rules_load(path, &sets[i], &err)) goto fail;
        for (unsigned b = WM_DEV_NPU; b; b >>= 1)
            if ((sets[i]->devices & b & dev_mask)) tg[n_tg++].rules = sets[i], tg[n_tg - 1].device = b;
    }
    if (!n_tg) {
        rc = wm_cli_usage_error(&c, "no analyzed EP supports --device %s", device);
        goto done;
    }
    if (wm_onnx_load(c.model, &m, &err)) goto fail;
    if (!m->proto->graph) {
        wm_err(&err, WM_ERR_INPUT, "%s: the model has no graph", c.model);
        goto fail;
    }
    if (wm_graph_open(m, m->proto->graph, &g, &err)) goto fail;
    wm_level worst = WM_LEVEL_SUPPORTED;
    for (size_t t = 0; t < n_tg; t++) {
        if (wm_analyze_graph(g, tg[t].rules, tg[t].device, &tg[t].a, &err)) goto fail;
        if (tg[t].a.verdict > worst) worst = tg[t].a.verdict;
    }

    const wm_analysis *as[MAX_EPS * 3];
    for (size_t t = 0; t < n_tg; t++) as[t] = &tg[t].a;
    wm_json_obj(&j, NULL);
    wm_analyze_ref_json(m->proto, g, c.model, as, n_tg, &j); /* the reference's keys; ours follow */
    wm_json_str(&j, "model", c.model);
    wm_json_uint(&j, "nodes", m->proto->graph->n_node);
    wm_json_int(&j, "opset", wm_graph_opset(g, ""));
    wm_json_str(&j, "rules_dir", dir);
    wm_json_str(&j, "verdict", wm_level_name(worst));
    wm_json_arr(&j, "summary");
    for (size_t t = 0; t < n_tg; t++) {
        const wm_analysis *a = &tg[t].a;
        char line[512];
        snprintf(line, sizeof line,
                 "%s/%s: %s - %zu supported, %zu partial, %zu unsupported, %zu unknown; %zu EP subgraph(s), "
                 "%zu node(s) on CPU, %zu crossing tensor(s)",
                 a->rules->ep, wm_device_name(a->device), wm_level_name(a->verdict), a->counts[WM_LEVEL_SUPPORTED],
                 a->counts[WM_LEVEL_PARTIAL], a->counts[WM_LEVEL_UNSUPPORTED], a->counts[WM_LEVEL_UNKNOWN],
                 a->ep_subgraphs, a->cpu_nodes, a->crossing_tensors);
        wm_json_str(&j, NULL, line);
        for (size_t i = 0; i < a->n_issues; i++)
            if (a->issues[i].blocking) {
                snprintf(line, sizeof line, "%s/%s: %s: %s", a->rules->ep, wm_device_name(a->device), a->issues[i].check,
                         a->issues[i].message);
                wm_json_str(&j, NULL, line);
            }
    }
    wm_json_arr_end(&j);
    wm_json_arr(&j, "targets");
    for (size_t t = 0; t < n_tg; t++) wm_analysis_json(g, &tg[t].a, &j, NULL);
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    if (j.oom) {
        wm_err(&err, WM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (c.json) {
        rc = wm_cli_emit(&c, c.model, &j);
    } else {
        rc = wm_cli_opt_write_json(&c, &j);
        if (rc == WM_EXIT_OK && wm_analyze_view(&c, c.model, g, as, n_tg, &err)) goto fail;
        if (rc == WM_EXIT_OK && fflush(stdout) != 0) rc = WM_EXIT_ERROR;
    }
    if (rc == WM_EXIT_OK && worst != WM_LEVEL_SUPPORTED) rc = WM_EXIT_CHECK;
    goto done;
fail:
    rc = wm_cli_fail(&c, &err);
done:
    wm_json_free(&j);
    if (tg)
        for (size_t t = 0; t < n_tg; t++) wm_analysis_free(&tg[t].a);
    free(tg);
    wm_graph_free(g);
    wm_onnx_free(m);
    for (size_t i = 0; i < n_names; i++) {
        wm_ep_rules_free(sets[i]);
        free(names[i]);
    }
    return rc;
}
