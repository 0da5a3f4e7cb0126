/*
 * cmd_config.c - `winml config -m CHECKPOINT [-t TASK] [-p PREC] [--ep EP] [--device D] [-o FILE]` writes a
 * default recipe; `winml config -c RECIPE [-m CHECKPOINT] [--check] [-f json]` validates one (ours or the
 * reference's) and says whether the builder can build it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "builder/arch.h"
#include "builder/recipe.h"
#include "cli/cli.h"
#include "gguf/gguf_hf.h"
#include "core/error.h"
#include "core/output.h"
#include "hf/config.h"
#include "hf/safetensors.h"

static void help(void) {
    printf("usage: winml config -m CHECKPOINT [-t TASK] [-p auto|fp32|fp16|int8|w8a8|w8a16|int16|int4|int8-rtn|int8-dynamic|gguf] [--ep EP] [-d auto|cpu|gpu|npu]\n"
           "                    [-o FILE] [-f json]\n\n"
           WM_CLI_BUILD_TARGET_HELP
           "Writes a build recipe (loader, export with input tensors, optim, quant, compile, eval) with the\n"
           "defaults for the checkpoint: batch 1; encoders int32 ids with a static sequence of\n"
           "min(max_position_embeddings - offset, 512); decoders symbolic batch, sequence and past lengths\n"
           "with the ONNX Runtime GenAI names. With -o the recipe goes to FILE, otherwise to stdout.\n"
           "Reads config.json (and safetensors headers when present), never the weights.\n\n"
           "usage: winml config -c RECIPE [-m CHECKPOINT] [--check] [-f json]\n\n"
           "Validates a recipe (ours or the reference's: its bookkeeping fields are read and listed as\n"
           "kept) and says whether the builder serves its loader.model_type and loader.task; with -m also\n"
           "checks it against the checkpoint (inputs, outputs, task). Exit 0 when valid, 2 with the file,\n"
           "field and reason otherwise. --check prints nothing but errors.\n");
}

/* config -c: the recipe's validity, what the builder makes of it, and the reference fields it keeps. */
static int check_recipe(wm_cli *c, const char *path, int quiet_ok) {
    wm_error err = {0};
    wm_recipe r;
    if (wm_recipe_load(path, &r, &err)) return wm_cli_fail(c, &err);
    wm_error se = {0};
    wm_status sup = wm_recipe_supported(&r, path, &se);
    int rc = WM_EXIT_OK;
    wm_hf_checkpoint ck;
    wm_st_file *st = NULL;
    wm_arch a;
    memset(&a, 0, sizeof a);
    int have_ck = 0, have_arch = 0;
    if (c->model && !sup) {
        int gguf = wm_gguf_is_path(c->model);
        if (gguf ? wm_gguf_open_checkpoint(c->model, &ck, &st, &err) : wm_hf_open_checkpoint(c->model, &ck, &err))
            rc = wm_cli_fail(c, &err);
        else {
            have_ck = 1;
            if ((!gguf && ck.weights[0] && wm_st_open(ck.dir, NULL, &st, &err)) ||
                wm_arch_resolve_as(&ck, st, r.served_task, r.model_type[0] ? r.model_type : NULL, &a, &err))
                rc = wm_cli_fail(c, &err);
            else {
                have_arch = 1;
                if (wm_recipe_fit_image(&r, &a, path, &err) || wm_recipe_check(&r, &a, path, &err))
                    rc = wm_cli_fail(c, &err);
            }
        }
    }
    if (!rc && c->json) {
        wm_json j;
        wm_json_init(&j);
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "recipe", path);
        wm_json_bool(&j, "valid", 1);
        wm_json_str(&j, "task", r.task);
        wm_json_str(&j, "served_task", r.served_task >= 0 ? wm_task_name(r.served_task) : NULL);
        wm_json_str(&j, "model_type", r.model_type[0] ? r.model_type : NULL);
        wm_json_str(&j, "quant_mode", r.has_quant ? r.quant_mode : NULL);
        wm_json_str(&j, "file_precision", wm_recipe_name_precision(path)); /* informational: quant decides */
        wm_json_bool(&j, "buildable", sup == WM_OK);
        wm_json_str(&j, "not_buildable_reason", sup ? se.msg : NULL);
        if (have_arch) wm_json_bool(&j, "checked_against_model", 1);
        wm_recipe_kept_json(&r, &j, "reference_fields_kept");
        wm_json_obj_end(&j);
        if (j.oom) rc = wm_cli_usage_error(c, "out of memory");
        else fputs(wm_json_text(&j), stdout);
        wm_json_free(&j);
    } else if (!rc && !quiet_ok && !c->quiet) {
        printf("%s: valid recipe: task %s", path, r.task);
        if (r.served_task >= 0 && strcmp(r.task, wm_task_name(r.served_task)))
            printf(" (built as %s)", wm_task_name(r.served_task));
        printf(", model_type %s, quant %s\n", r.model_type[0] ? r.model_type : "(any)", r.has_quant ? r.quant_mode : "none");
        const char *named = wm_recipe_name_precision(path);
        if (named && strcmp(named, "fp32") && !r.has_quant)
            printf("the file name says %s, but the quant section is null: float32 weights (build -p %s)\n", named,
                   named);
        if (sup) printf("not buildable here: %s\n", se.msg);
        else printf("buildable%s\n", have_arch ? " (checked against the model)" : "");
        if (r.n_kept) printf("reference fields kept, not acted on (%zu):\n", r.n_kept);
        for (size_t i = 0; i < r.n_kept; i++) printf("  %-40s %s\n", r.kept[i].field, r.kept[i].why);
    }
    if (!rc && fflush(stdout) != 0) rc = WM_EXIT_ERROR;
    wm_arch_free(&a);
    wm_st_close(st);
    if (have_ck) wm_hf_checkpoint_free(&ck);
    wm_recipe_free(&r);
    return rc;
}

int wm_cmd_config(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml config");
    enum { O_EP = 1000, O_DEVICE, O_CHECK };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"task", required_argument, 0, 't'},
                                          {"precision", required_argument, 0, 'p'},
                                          {"ep", required_argument, 0, O_EP},
                                          {"device", required_argument, 0, O_DEVICE},
                                          {"config", required_argument, 0, 'c'},
                                          {"recipe", required_argument, 0, 'c'},
                                          {"check", no_argument, 0, O_CHECK},
                                          {0, 0, 0, 0}};
    const char *recipe = NULL;
    int check = 0;
    const char *ep = NULL, *device = NULL;
    int task = -1, prec = -1, opt;
    const char *p_given = NULL; /* the -p seen first: a different second one is refused */
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "c:t:p:d:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case 't':
            if ((task = wm_task_from_name(optarg)) < 0) return wm_cli_usage_error(&c, "-t: unknown task '%s'", optarg);
            break;
        case 'p':
            if (wm_cli_precision_arg(&c, optarg, &p_given, &prec)) return WM_EXIT_ERROR;
            break;
        case O_EP:
            if (wm_cli_ep_arg(&c, optarg, 0, &ep)) return WM_EXIT_ERROR;
            break;
        case 'c': recipe = optarg; break;
        case O_CHECK: check = 1; break;
        case 'd': case O_DEVICE:
            device = NULL; /* auto: the EP's default device (wm_cli_build_target) */
            if (strcasecmp(optarg, "auto") && wm_cli_device_arg(&c, optarg, 0, &device)) return WM_EXIT_ERROR;
            break;
        default: {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (check && !recipe) return wm_cli_usage_error(&c, "--check needs -c RECIPE");
    if (recipe) {
        if (c.out) return wm_cli_usage_error(&c, "-o: config -c validates a recipe and writes nothing");
        if (task >= 0 || prec >= 0)
            return wm_cli_usage_error(&c, "-t/-p: config -c takes the task and precision from the recipe");
        return check_recipe(&c, recipe, check);
    }
    if (!c.model) return wm_cli_usage_error(&c, "-m CHECKPOINT is required");
    if (wm_cli_build_target(&c, &ep, &device)) return WM_EXIT_ERROR;

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
    if (prec < 0) prec = (int)wm_precision_auto(ck.format, device);
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
            if (wm_json_out_check(c.out, c.model, &err) || wm_write_json_atomic(c.out, wm_json_text(&j), &err))
                rc = wm_cli_fail(&c, &err);
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
