/* main.c - `winml`: dispatch to the command table. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/output.h"

static const wm_cmd commands[] = {
    {"inspect", "describe a model: IO, opsets, op histogram, parameters, external data", wm_cmd_inspect},
    {"analyze", "static EP compatibility (CPU, QNN, OpenVINO, VitisAI, DML) per node, op and component", wm_cmd_analyze},
    {"optimize", "graph cleanup and fusions (LayerNorm, Gelu, attention, ...), nodes before -> after", wm_cmd_optimize},
    {"quantize", "fp16, int8 (dynamic, QDQ), int4 weight-only (MatMulNBits), w8a16", wm_cmd_quantize},
    {"eval", "numerics of a candidate model against a reference (compare mode), with gates", wm_cmd_eval},
    {"generate", "text generation with a KV cache on a causal LM artifact", wm_cmd_generate},
    {"run", "an encoder build on text: labels, reranker scores or embeddings", wm_cmd_run},
    {"perf", "latency, throughput and memory of a model on the CPU engine", wm_cmd_perf},
    {"download", "fetch a Hugging Face model (ORG/NAME[@REV]) into the hub cache, resumable and verified", wm_cmd_download},
    {"cache", "the Hugging Face cache: its folder and the models it holds", wm_cmd_cache},
    {"tokenize", "ids, tokens and offsets of a text with a checkpoint's tokenizer, or decode ids", wm_cmd_tokenize},
    {"config", "emit a build recipe (JSON) for a Hugging Face checkpoint", wm_cmd_config},
    {"export", "checkpoint -> plain float32 ONNX, built straight from the safetensors weights", wm_cmd_export},
    {"build", "checkpoint -> one output folder: model.onnx, recipe, manifest, tokenizer, genai_config", wm_cmd_build},
    {"sweep", "build, analyze, perf and compare every recipe of a folder, each in its own process; resumable, shardable",
     wm_cmd_sweep},
    {"catalog", "the models this build has verified (from the sweep results checked in under data/catalog)", wm_cmd_catalog},
    {"sys", "this machine: CPU, ISA features, memory, compiled-in kernels, version", wm_cmd_sys},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "winml %s - build, run and analyze ONNX models on the CPU, natively\n\n"
            "usage: winml [--help] [--version] <command> [options]\n\ncommands:\n",
            WM_VERSION_STRING);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\ncommon options: -m MODEL, -f table|json, -o FILE (JSON result), -v, -q, --help\n"
            "exit codes: 0 ok, 1 a check did not pass, 2 usage or input error\n"
            "run 'winml <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
    wm_cleanup_install(); /* Ctrl-C, SIGTERM, a closed pipe: the temporaries of an unfinished write go with us */
    if (argc < 2) {
        usage(stderr);
        return WM_EXIT_ERROR;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return WM_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("winml %s\n", wm_version());
        return WM_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "winml: error: unknown command '%s' (see winml --help)\n", cmd);
    return WM_EXIT_ERROR;
}
