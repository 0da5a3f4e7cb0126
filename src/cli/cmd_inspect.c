/* cmd_inspect.c - `winml inspect -m model.onnx [-f json] [-o FILE]`. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "onnx/onnx_info.h"

static void help(void) {
    printf("usage: winml inspect -m MODEL.onnx [-f table|json] [-o FILE] [-q]\n\n"
           "Describes an ONNX model without reading its weights: IR version, producer,\n"
           "opset imports per domain, inputs and outputs (dtype, shape with symbolic\n"
           "dims), node count, op histogram, initializers, parameter count and bytes per\n"
           "dtype, external data files, metadata.\n");
}

int wm_cmd_inspect(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml inspect");
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
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");

    wm_error err = {0};
    wm_onnx_model *m = NULL;
    if (wm_onnx_load(c.model, &m, &err)) return wm_cli_fail(&c, &err);
    wm_json j;
    wm_json_init(&j);
    int rc;
    if (wm_onnx_info_json(m, &j, &err)) rc = wm_cli_fail(&c, &err);
    else rc = wm_cli_emit(&c, c.model, &j);
    wm_json_free(&j);
    wm_onnx_free(m);
    return rc;
}
