/*
 * cmd_sweep.c - `winml sweep -c RECIPES_DIR|LIST -o RESULTS [--random-weights] [--shard I/N] [--resume]`:
 * flags, progress lines and the summary table; the sweep itself is src/tasks/sweep*.c.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/sysmem.h"
#include "tasks/sweep.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static void help(void) {
    printf("usage: winml sweep -c RECIPES_DIR|LIST -o RESULTS [--random-weights] [--shard I/N] [--resume]\n"
           "                   [--limit N] [--timeout S] [--max-memory SIZE] [--iterations N] [--samples N]\n"
           "                   [--date YYYY-MM-DD] [-f json] [-q]\n\n"
           "Builds, analyzes (--ep cpu), times (perf) and compares (eval --mode compare against the plain\n"
           "float32 export of the same weights) every recipe of RECIPES_DIR (the reference's layout\n"
           "<org>_<name>/[<ep>/<device>/]<task>_<precision>_config[_<part>].json) or of LIST (one recipe path a\n"
           "line), each stage in its own winml process killed after --timeout S (default 600) and limited to\n"
           "--max-memory SIZE of address space (default 8G; 0: no limit). --random-weights builds each recipe\n"
           "from a tiny config of its model_type (offline); without it the checkpoint is ORG/NAME from the\n"
           "Hugging Face cache. Writes RESULTS/eval_results/<date>/environment.json, models/<key>/eval_result.json\n"
           "(key <org>__<name>__<task>__<precision>[__<part>][__<ep>-<device>]) in the reference's shape and\n"
           "failure classes (EXPORT_FAIL, ANALYZER_BLOCK, OPT_FAIL, COMPILE_FAIL, RUNTIME_FAIL, ENVIRONMENT,\n"
           "TIMEOUT, UNKNOWN), and summary.json; files are renamed into place when complete, and a file the\n"
           "sweep did not write is never replaced. --resume continues the latest sweep folder (or --date),\n"
           "skipping recipes whose eval_result.json is complete. --shard I/N runs the recipes whose index in\n"
           "key order is I modulo N (e.g. --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT, or\n"
           "$JOB_COMPLETION_INDEX of a Kubernetes indexed Job), each slice into its own RESULTS; the union of\n"
           "the slices' models/ folders is the whole sweep. --limit N stops after N recipes (resume later).\n"
           "Progress on a terminal; -f json prints the summary JSON. Exit 0 when every selected recipe has a\n"
           "result (passed or classified), 2 on bad flags or an unreadable recipe (nothing run).\n");
}

static void progress(void *ctx, const wm_sweep_event *e) {
    (void)ctx;
    /* a terminal only: the running recipe's line is replaced by its outcome */
    if (e->done == 0) fprintf(stderr, "[%zu/%zu] %s ...", e->index, e->total, e->key);
    else if (e->done == 2) fprintf(stderr, "[%zu/%zu] %s: complete, skipped (--resume)\n", e->index, e->total, e->key);
    else
        fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s%s%s (%.1f s)\n", e->index, e->total, e->key, e->status,
                e->failure ? " " : "", e->failure ? e->failure : "", e->elapsed_s);
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "-";
}

static void table(const wm_cli *c, const char *text) {
    cJSON *d = cJSON_Parse(text);
    if (!d) return;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(d, "results"), *r;
    if (!c->quiet) {
        printf("%-72s %-8s %-14s %10s\n", "recipe", "status", "class", "mean ms");
        cJSON_ArrayForEach(r, rows) {
            const cJSON *lat = cJSON_GetObjectItemCaseSensitive(r, "latency_ms_mean");
            char ms[32] = "-";
            if (cJSON_IsNumber(lat)) snprintf(ms, sizeof ms, "%.3f", lat->valuedouble);
            printf("%-72s %-8s %-14s %10s\n", str(r, "key"), str(r, "status"), str(r, "failure_classification"), ms);
        }
    }
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(d, "failure_classes"), *e;
    printf("passed %d, failed %d, not run %d of %d (shard %s)", cJSON_GetObjectItemCaseSensitive(d, "passed")->valueint,
           cJSON_GetObjectItemCaseSensitive(d, "failed")->valueint,
           cJSON_GetObjectItemCaseSensitive(d, "not_run")->valueint,
           cJSON_GetObjectItemCaseSensitive(d, "selected")->valueint, str(d, "shard"));
    int first = 1;
    cJSON_ArrayForEach(e, cl) if (e->valueint) printf("%s%s %d", first ? ": " : ", ", e->string, e->valueint), first = 0;
    printf("\nresults: %s\n", str(d, "results_dir"));
    cJSON_Delete(d);
}

int wm_cmd_sweep(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml sweep");
    enum { O_RANDOM = 1000, O_SHARD, O_RESUME, O_LIMIT, O_TIMEOUT, O_MAXMEM, O_ITER, O_SAMPLES, O_DATE };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"config", required_argument, 0, 'c'},
                                          {"recipes", required_argument, 0, 'c'},
                                          {"random-weights", no_argument, 0, O_RANDOM},
                                          {"shard", required_argument, 0, O_SHARD},
                                          {"resume", no_argument, 0, O_RESUME},
                                          {"limit", required_argument, 0, O_LIMIT},
                                          {"timeout", required_argument, 0, O_TIMEOUT},
                                          {"max-memory", required_argument, 0, O_MAXMEM},
                                          {"iterations", required_argument, 0, O_ITER},
                                          {"samples", required_argument, 0, O_SAMPLES},
                                          {"date", required_argument, 0, O_DATE},
                                          {0, 0, 0, 0}};
    wm_sweep_opts o;
    memset(&o, 0, sizeof o);
    o.shard_n = 1;
    o.timeout_s = 600;
    o.max_memory = SANITIZED ? 0 : 8ull << 30; /* a sanitizer's shadow memory needs the whole address space */
    o.iterations = 20;
    o.samples = 5;
    const char *results = NULL;
    wm_error err = {0};
    long v;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "c:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case 'c': o.recipes = optarg; break;
        case 'o': results = optarg; break; /* the results folder, not a JSON file */
        case O_RANDOM: o.random_weights = 1; break;
        case O_RESUME: o.resume = 1; break;
        case O_SHARD:
            if (wm_sweep_parse_shard(optarg, &o.shard_i, &o.shard_n, &err)) return wm_cli_usage_error(&c, "%s", err.msg);
            break;
        case O_LIMIT:
            if (wm_cli_int_arg(&c, "--limit", optarg, 1, WM_SWEEP_MAX_RECIPES, &v)) return WM_EXIT_ERROR;
            o.limit = v;
            break;
        case O_TIMEOUT:
            if (wm_cli_num_arg(&c, "--timeout", optarg, 0, 1, 86400 * 7, &o.timeout_s)) return WM_EXIT_ERROR;
            break;
        case O_MAXMEM:
            if (!strcmp(optarg, "0")) o.max_memory = 0;
            else if (wm_parse_size(optarg, &o.max_memory) || o.max_memory < (64u << 20))
                return wm_cli_usage_error(&c, "--max-memory: '%s' is not 0 or a size of at least 64M", optarg);
            break;
        case O_ITER:
            if (wm_cli_int_arg(&c, "--iterations", optarg, 1, 100000, &v)) return WM_EXIT_ERROR;
            o.iterations = (int)v;
            break;
        case O_SAMPLES:
            if (wm_cli_int_arg(&c, "--samples", optarg, 1, 100000, &v)) return WM_EXIT_ERROR;
            o.samples = (int)v;
            break;
        case O_DATE: {
            const char *d = optarg;
            int ok = strlen(d) == 10 && d[4] == '-' && d[7] == '-';
            for (int i = 0; ok && i < 10; i++) ok = i == 4 || i == 7 || (d[i] >= '0' && d[i] <= '9');
            if (!ok) return wm_cli_usage_error(&c, "--date: '%s' is not YYYY-MM-DD", d);
            o.date = d;
            break;
        }
        default: {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!o.recipes) return wm_cli_usage_error(&c, "-c RECIPES_DIR|LIST is required");
    if (!results) return wm_cli_usage_error(&c, "-o RESULTS is required");
    if (c.model) return wm_cli_usage_error(&c, "-m: sweep takes its models from the recipes");
    o.results = results;
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return wm_cli_usage_error(&c, "cannot find the winml binary (/proc/self/exe)");
    exe[n] = 0;
    o.exe = exe;
    if (!c.quiet && !c.json && isatty(STDERR_FILENO)) o.progress = progress;
    wm_json j;
    int rc;
    if (wm_sweep_run(&o, &j, &err)) rc = wm_cli_fail(&c, &err);
    else if (j.oom) rc = wm_cli_usage_error(&c, "out of memory");
    else if (c.json) {
        fputs(wm_json_text(&j), stdout);
        rc = fflush(stdout) == 0 ? WM_EXIT_OK : WM_EXIT_ERROR;
    } else {
        table(&c, wm_json_text(&j));
        rc = fflush(stdout) == 0 ? WM_EXIT_OK : WM_EXIT_ERROR;
    }
    wm_json_free(&j);
    return rc;
}
