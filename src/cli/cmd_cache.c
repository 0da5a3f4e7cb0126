/*
 * cmd_cache.c - `winml cache [list|path]`: the Hugging Face cache folder and
 * the models it holds (repo, refs, commit, files, size, path).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "hf/hub.h"

static void help(void) {
    printf("usage: winml cache [list|path] [-f table|json] [-o FILE] [-q]\n\n"
           "  list   every cached model revision: repo, revision (the refs naming it), commit,\n"
           "         file count, size on disk, snapshot folder; then the cache's total size (each\n"
           "         blob counted once), partial downloads, and warnings about entries that break\n"
           "         the layout (bad refs, links leaving their model folder) - the default\n"
           "  path   the cache folder ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)\n");
}

int wm_cmd_cache(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml cache");
    static const struct option longs[] = {WM_CLI_COMMON_LONG, {0, 0, 0, 0}};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return WM_EXIT_OK;
        }
        int rc = wm_cli_other_opt(&c, opt, optarg, argv);
        if (rc) return rc;
    }
    const char *sub = optind < argc ? argv[optind++] : "list";
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (strcmp(sub, "list") && strcmp(sub, "path")) return wm_cli_usage_error(&c, "unknown action '%s' (list or path)", sub);
    wm_error err = {0};
    wm_json j;
    wm_json_init(&j);
    int rc;
    if (!strcmp(sub, "path")) {
        char dir[4096];
        if (wm_hf_cache_dir(dir, sizeof dir, &err)) {
            wm_json_free(&j);
            return wm_cli_fail(&c, &err);
        }
        if (!c.json && !c.out) {
            printf("%s\n", dir);
            wm_json_free(&j);
            return WM_EXIT_OK;
        }
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "cache_dir", dir);
        wm_json_obj_end(&j);
        rc = wm_cli_emit(&c, NULL, &j);
    } else if (wm_hf_cache_list_json(NULL, &j, &err)) {
        rc = wm_cli_fail(&c, &err);
    } else {
        rc = wm_cli_emit(&c, "Hugging Face cache", &j);
    }
    wm_json_free(&j);
    return rc;
}
