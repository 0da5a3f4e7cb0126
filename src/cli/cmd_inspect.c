/* cmd_inspect.c - `winml inspect -m model.onnx [-f json] [-o FILE]`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/arch.h"
#include "builder/inspect_hf.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "hf/config.h"
#include "onnx/onnx_info.h"

static void help(void) {
    printf("usage: winml inspect -m MODEL.onnx [-f table|json] [-o FILE] [-q]\n"
           "       winml inspect -m CHECKPOINT_DIR|MODEL.gguf [-t TASK] [--list-tasks] [-f table|json] [-o FILE]\n\n"
           "Describes an ONNX model without reading its weights: IR version, producer,\n"
           "opset imports per domain, inputs and outputs (dtype, shape with symbolic\n"
           "dims), node count, op histogram, initializers, parameter count and bytes per\n"
           "dtype, external data files, metadata.\n\n"
           "For a Hugging Face checkpoint folder (config.json + safetensors): model type, architectures,\n"
           "the resolved task and inference class, family, naming scheme and the features the builder\n"
           "will use, inputs/outputs with dtypes and shapes, parameter count, size per precision and\n"
           "whether external data is needed (format \"hf\"); reads config.json and safetensors headers\n"
           "only. --list-tasks lists the tasks the checkpoint supports.\n\n"
           "For a GGUF (a .gguf file, a split set NAME-00001-of-0000N.gguf, or a folder holding one; format\n"
           "\"gguf\"): version, alignment, the metadata (arrays and long strings summarized), the tensor table\n"
           "(name, ggml type, dims innermost first, bytes, the Hugging Face name it maps to), parameters and\n"
           "bytes per type, and the checkpoint the builder makes of it as above (or checkpoint_error: why not).\n");
}

int wm_cmd_inspect(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml inspect");
    enum { O_LIST_TASKS = 1000 };
    static const struct option longs[] = {WM_CLI_COMMON_LONG, {"task", required_argument, 0, 't'},
                                          {"list-tasks", no_argument, 0, O_LIST_TASKS}, {0, 0, 0, 0}};
    int opt, task = -1, list_tasks = 0;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "t:", longs, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return WM_EXIT_OK;
        }
        if (opt == 't') {
            if ((task = wm_task_from_name(optarg)) < 0) return wm_cli_usage_error(&c, "-t: unknown task '%s'", optarg);
            continue;
        }
        if (opt == O_LIST_TASKS) {
            list_tasks = 1;
            continue;
        }
        int rc = wm_cli_other_opt(&c, opt, optarg, argv);
        if (rc) return rc;
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");

    wm_error err = {0};
    if (wm_gguf_is_path(c.model)) { /* a .gguf file, split set or folder holding one */
        wm_json j;
        wm_json_init(&j);
        int rc = wm_gguf_inspect(c.model, task, list_tasks, &j, &err) ? wm_cli_fail(&c, &err) : wm_cli_emit(&c, c.model, &j);
        wm_json_free(&j);
        return rc;
    }
    struct stat mst;
    /* a checkpoint folder, or ORG/NAME[@REV] (no such path) resolved through the Hugging Face cache */
    if (wm_hf_is_checkpoint_dir(c.model) || (stat(c.model, &mst) != 0 && strchr(c.model, '/') &&
                                             !strstr(c.model, ".onnx"))) {
        wm_json j;
        wm_json_init(&j);
        int rc = wm_hf_inspect(c.model, task, list_tasks, &j, &err) ? wm_cli_fail(&c, &err) : wm_cli_emit(&c, c.model, &j);
        wm_json_free(&j);
        return rc;
    }
    if (task >= 0 || list_tasks) return wm_cli_usage_error(&c, "-t and --list-tasks apply to checkpoint folders");
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
