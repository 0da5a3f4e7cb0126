/* cmd_catalog.c - `winml catalog [--ep EP] [-t TASK] [-f json] [-o FILE]`: flags and the table; the entries are
 * src/tasks/catalog.c over the table generated from the checked-in sweep results. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "builder/arch.h"
#include "cli/cli.h"
#include "core/output.h"
#include "tasks/catalog.h"

static void help(void) {
    printf("usage: winml catalog [--ep EP] [-d DEVICE] [-t TASK] [-f table|json] [-o FILE]\n\n"
           "The models this build has verified: every model and task with a recipe that passed `winml sweep`\n"
           "(build, analyze, perf, compare) in the sweep results checked in under data/catalog (the table is\n"
           "generated from them when winml is built). Per entry: the task, model_type, the EPs and devices it\n"
           "ran on (supported_eps), the precisions that passed, the parts that passed of a model exported as part\n"
           "recipes (parts: encoder, decoder ...), the recipes' own EP folders (recipe_targets),\n"
           "and the last result (time, mean latency, worst cosine similarity against the float32 export,\n"
           "whether the weights were random). --ep takes an alias (cpu, dml, qnn, openvino, vitisai, trtrtx,\n"
           "migraphx, cuda), an ONNX Runtime name, case-insensitively, or auto (= cpu); -d/--device auto (= cpu),\n"
           "cpu, gpu or npu. -f json (and -o FILE) gives the list.\n");
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "-";
}

static void join(const cJSON *arr, char *buf, size_t n) {
    const cJSON *e;
    size_t u = 0;
    buf[0] = 0;
    cJSON_ArrayForEach(e, arr) if (cJSON_IsString(e) && u < n) u += (size_t)snprintf(buf + u, n - u, "%s%s", u ? "," : "", e->valuestring);
}

int wm_cmd_catalog(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml catalog");
    enum { O_EP = 1000, O_DEVICE };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"ep", required_argument, 0, O_EP},
                                          {"device", required_argument, 0, O_DEVICE},
                                          {"task", required_argument, 0, 't'},
                                          {0, 0, 0, 0}};
    const char *ep = NULL, *task = NULL, *device = NULL;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "t:d:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_EP:
            if (wm_cli_ep_arg(&c, optarg, 0, &ep)) return WM_EXIT_ERROR;
            break;
        case 'd': case O_DEVICE:
            if (wm_cli_device_arg(&c, optarg, 0, &device)) return WM_EXIT_ERROR;
            break;
        case 't': /* a misspelt task listed nothing, exit 0 */
            if (wm_task_from_name(optarg) < 0) return wm_cli_usage_error(&c, "-t: unknown task '%s'", optarg);
            task = optarg;
            break;
        default: {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (c.model) return wm_cli_usage_error(&c, "-m: catalog lists the verified models and reads none");
    wm_json j;
    wm_json_init(&j);
    wm_error err = {0};
    int rc = WM_EXIT_OK;
    if (wm_catalog_json(ep, device, task, &j, &err)) rc = wm_cli_fail(&c, &err);
    cJSON *doc = rc ? NULL : cJSON_Parse(wm_json_text(&j));
    if (!rc && !doc) rc = wm_cli_usage_error(&c, "out of memory");
    if (!rc) {
        const char *text = wm_json_text(&j);
        if (c.out) {
            wm_error we = {0};
            if (wm_write_json_atomic(c.out, text, &we)) rc = wm_cli_fail(&c, &we);
        }
        if (!rc && c.json) fputs(text, stdout);
        else if (!rc) {
            printf("%-48s %-30s %-17s %-22s %-16s %-12s %s\n", "model", "task", "model_type", "precisions (built)", "parts",
                   "eps", "last result");
            const cJSON *e;
            cJSON_ArrayForEach(e, doc) {
                char prec[128], parts[64], eps[128] = "";
                join(cJSON_GetObjectItemCaseSensitive(e, "precisions"), prec, sizeof prec);
                join(cJSON_GetObjectItemCaseSensitive(e, "parts"), parts, sizeof parts);
                const cJSON *x, *lr = cJSON_GetObjectItemCaseSensitive(e, "last_result");
                size_t u = 0;
                cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(e, "supported_eps")) {
                    char d[64];
                    join(x, d, sizeof d);
                    if (u < sizeof eps) u += (size_t)snprintf(eps + u, sizeof eps - u, "%s%s:%s", u ? " " : "", x->string, d);
                }
                printf("%-48s %-30s %-17s %-22s %-16s %-12s %s %s\n", str(e, "model_id"), str(e, "task"),
                       str(e, "model_type"), prec, parts[0] ? parts : "-", eps, str(lr, "status"),
                       str(lr, "run_timestamp"));
            }
            printf("%d verified model(s)\n", cJSON_GetArraySize(doc));
        }
    }
    cJSON_Delete(doc);
    wm_json_free(&j);
    if (!rc && fflush(stdout) != 0) rc = WM_EXIT_ERROR;
    return rc;
}
