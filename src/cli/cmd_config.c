/* cmd_config.c - `winml config -m CHECKPOINT [-t TASK] [-p PREC] [--ep EP] [--device D] [-o FILE]`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "builder/arch.h"
#include "builder/recipe.h"
#include "cli/cli.h"
#include "gguf/gguf_hf.h"
#include "core/error.h"
#include "core/output.h"
#include "hf/config.h"
#include "hf/safetensors.h"

static void help(void) {
    printf("usage: winml config -m CHECKPOINT [-t TASK] [-p fp32|fp16|int8|int4|gguf] [--ep cpu] [--device cpu]\n"
           "                    [-o FILE] [-f json]\n\n"
           "Writes a build recipe (loader, export with input tensors, optim, quant, compile, eval) with the\n"
           "defaults for the checkpoint: batch 1; encoders int32 ids with a static sequence of\n"
           "min(max_position_embeddings - offset, 512); decoders symbolic batch, sequence and past lengths\n"
           "with the ONNX Runtime GenAI names. With -o the recipe goes to FILE, otherwise to stdout.\n"
           "Reads config.json (and safetensors headers when present), never the weights.\n");
}

int wm_cmd_config(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml config");
    enum { O_EP = 1000, O_DEVICE };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"task", required_argument, 0, 't'},
                                          {"precision", required_argument, 0, 'p'},
                                          {"ep", required_argument, 0, O_EP},
                                          {"device", required_argument, 0, O_DEVICE},
                                          {0, 0, 0, 0}};
    const char *ep = "cpu", *device = "cpu";
    int task = -1, prec = -1, opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "t:p:d:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case 't':
            if ((task = wm_task_from_name(optarg)) < 0) return wm_cli_usage_error(&c, "-t: unknown task '%s'", optarg);
            break;
        case 'p':
            if ((prec = wm_precision_from_name(optarg)) < 0)
                return wm_cli_usage_error(&c, "-p: unknown precision '%s' (%s)", optarg,
                                          wm_precision_list());
            break;
        case O_EP: ep = optarg; break;
        case 'd': case O_DEVICE: device = optarg; break;
        default: {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m CHECKPOINT is required");
    if (strcmp(ep, "cpu")) return wm_cli_usage_error(&c, "--ep: only 'cpu' is available");
    if (strcmp(device, "cpu")) return wm_cli_usage_error(&c, "--device: only 'cpu' is available");

    wm_error err = {0};
    wm_hf_checkpoint ck;
    wm_st_file *st = NULL;
    wm_arch a;
    wm_recipe r;
    memset(&a, 0, sizeof a);
    memset(&r, 0, sizeof r);
    int rc = WM_EXIT_OK;
    int gguf = wm_gguf_is_path(c.model);
    if (gguf ? wm_gguf_open_checkpoint(c.model, &ck, &st, &err) : wm_hf_open_checkpoint(c.model, &ck, &err))
        return wm_cli_fail(&c, &err);
    if (prec < 0) prec = (int)wm_precision_default(ck.format);
    if (wm_precision_check(prec, ck.format, &err) ||
        (!gguf && ck.weights[0] && wm_st_open(ck.dir, NULL, &st, &err)) || wm_arch_resolve(&ck, st, task, &a, &err) ||
        wm_recipe_default(&a, (wm_precision)prec, ep, device, &r, &err)) {
        rc = wm_cli_fail(&c, &err);
    } else {
        wm_json j;
        wm_json_init(&j);
        wm_recipe_json(&r, &j);
        if (j.oom) rc = wm_cli_usage_error(&c, "out of memory");
        else if (c.out) {
            if (wm_write_json_atomic(c.out, wm_json_text(&j), &err)) rc = wm_cli_fail(&c, &err);
            else if (c.json) fputs(wm_json_text(&j), stdout);
            else if (!c.quiet) fprintf(stderr, "winml config: wrote %s\n", c.out);
        } else fputs(wm_json_text(&j), stdout);
        if (!rc && fflush(stdout) != 0) rc = WM_EXIT_ERROR;
        wm_json_free(&j);
    }
    wm_recipe_free(&r);
    wm_arch_free(&a);
    wm_st_close(st);
    wm_hf_checkpoint_free(&ck);
    return rc;
}
