/*
 * cmd_run.c - `winml run`: an encoder artifact on text. Classification gives
 * labels with softmax scores; a single-logit head (a reranker) gives one
 * score per (query, passage) pair, ranked; feature extraction gives the
 * embedding (pooled as the folder's sentence-transformers files say, else
 * mean-pooled and L2-normalized; --no-normalize keeps the norm). Every
 * --text gives its own result, in the order given.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/recipe.h"
#include "cli/cli.h"
#include "cli/cli_limits.h"
#include "tasks/encoder.h"

#define WM_RUN_MAX_TEXTS 256

static void help(void) {
    printf("usage: winml run -m BUILD_DIR|BUILD_DIR/MODEL.onnx --text TEXT... [--pair TEXT]... [--no-normalize]\n"
           "                 [--threads N] [-f table|json] [--max-memory SIZE] [--max-loop-iterations N] [--timeout S]\n\n"
           "Runs an encoder build (text-classification, reranker, feature-extraction) on text. Each --text (up to\n"
           "%d) gives one entry of \"results\", in order. With --pair passages the one --text is the query and every\n"
           "(query, passage) pair is scored and ranked.\n"
           "Classification: labels (config.json id2label) with softmax scores; one logit: the raw score.\n"
           "Feature extraction: the embedding. A folder with sentence-transformers' files (modules.json,\n"
           "sentence_bert_config.json, 1_Pooling/config.json: winml build carries them) truncates to max_seq_length\n"
           "and pools as its Pooling config says, L2-normalized when modules.json lists Normalize; otherwise the\n"
           "mean over the attention mask, L2-normalized. --no-normalize: no normalization.\n"
           "Decoders: use winml generate.\n\n" WM_CLI_LIMITS_HELP, WM_RUN_MAX_TEXTS);
}

typedef struct ranked {
    size_t i;
    double s;
} ranked;

static int by_score(const void *a, const void *b) {
    double x = ((const ranked *)a)->s, y = ((const ranked *)b)->s;
    return (x < y) - (x > y);
}

int wm_cmd_run(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml run");
    enum { O_TEXT = 256, O_PAIR, O_NONORM, O_THREADS };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"text", required_argument, 0, O_TEXT},
                                          {"pair", required_argument, 0, O_PAIR},
                                          {"no-normalize", no_argument, 0, O_NONORM},
                                          {"threads", required_argument, 0, O_THREADS},
                                          WM_CLI_LIMITS_LONG,
                                          {0, 0, 0, 0}};
    const char *texts[WM_RUN_MAX_TEXTS], *pairs[256];
    size_t n_texts = 0, n_pairs = 0;
    int normalize = 1, threads = 0, opt;
    wm_session_opts so = {0};
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_TEXT:
            if (n_texts == WM_RUN_MAX_TEXTS) return wm_cli_usage_error(&c, "--text: at most %d texts", WM_RUN_MAX_TEXTS);
            texts[n_texts++] = optarg;
            break;
        case O_PAIR:
            if (n_pairs == 256) return wm_cli_usage_error(&c, "--pair: at most 256 passages");
            pairs[n_pairs++] = optarg;
            break;
        case O_NONORM: normalize = 0; break;
        case O_THREADS: {
            long v;
            if (wm_cli_int_arg(&c, "--threads", optarg, 0, 256, &v)) return WM_EXIT_ERROR;
            threads = (int)v;
            break;
        }
        default: {
            int lr = wm_cli_limits_opt(&c, opt, optarg, &so);
            if (lr < 0) return WM_EXIT_ERROR;
            if (lr) break;
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model || !n_texts) return wm_cli_usage_error(&c, "-m BUILD_DIR and --text are required");
    if (n_pairs && n_texts > 1)
        return wm_cli_usage_error(&c, "--pair scores passages against one query: give one --text (got %zu)", n_texts);
    wm_error err = {0};
    wm_encoder *e = NULL;
    so.threads = threads;
    if (wm_encoder_open(c.model, &so, &e, &err)) return wm_cli_fail(&c, &err);
    const char *task = wm_encoder_task(e);
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "task", *task ? task : NULL);
    int rc = WM_EXIT_OK;
    size_t runs = n_pairs ? n_pairs : n_texts;
    ranked *rk = calloc(runs, sizeof *rk);
    int single = 0;
    if (!rk) {
        err.status = WM_ERR_NOMEM;
        goto fail;
    }
    wm_json_arr(&j, "results");
    for (size_t r = 0; r < runs; r++) {
        const float *y;
        size_t n;
        int pooled;
        const char *text = n_pairs ? texts[0] : texts[r];
        if (wm_encoder_run(e, text, n_pairs ? pairs[r] : NULL, normalize, &y, &n, &pooled, &err)) goto fail;
        int embedding = pooled || wm_recipe_task_served(task, NULL) == WM_TASK_FEATURE_EXTRACTION;
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "text", text);
        if (n_pairs) wm_json_str(&j, "pair", pairs[r]);
        if (embedding) {
            wm_json_uint(&j, "dims", n);
            wm_json_arr(&j, "embedding");
            for (size_t i = 0; i < n; i++) wm_json_num(&j, NULL, y[i]);
            wm_json_arr_end(&j);
        } else if (n == 1) {
            single = 1;
            rk[r].i = r, rk[r].s = y[0];
            wm_json_num(&j, "score", y[0]);
        } else {
            double m = y[0], sum = 0;
            for (size_t i = 1; i < n; i++) m = y[i] > m ? y[i] : m;
            for (size_t i = 0; i < n; i++) sum += exp(y[i] - m);
            size_t best = 0;
            for (size_t i = 1; i < n; i++) best = y[i] > y[best] ? i : best;
            const char *bl = wm_encoder_label(e, best);
            char lb[32];
            snprintf(lb, sizeof lb, "LABEL_%zu", best);
            wm_json_str(&j, "label", bl ? bl : lb);
            wm_json_arr(&j, "scores");
            for (size_t i = 0; i < n; i++) {
                const char *l = wm_encoder_label(e, i);
                snprintf(lb, sizeof lb, "LABEL_%zu", i);
                wm_json_obj(&j, NULL);
                wm_json_str(&j, "label", l ? l : lb);
                wm_json_num(&j, "score", exp(y[i] - m) / sum);
                wm_json_num(&j, "logit", y[i]);
                wm_json_obj_end(&j);
            }
            wm_json_arr_end(&j);
        }
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    if (single && n_pairs > 1) { /* a reranker: passages by score */
        qsort(rk, runs, sizeof *rk, by_score);
        wm_json_arr(&j, "ranking");
        for (size_t r = 0; r < runs; r++) wm_json_int(&j, NULL, (int64_t)rk[r].i);
        wm_json_arr_end(&j);
    }
    wm_json_obj_end(&j);
    rc = wm_cli_emit(&c, c.model, &j);
    goto done;
fail:
    rc = wm_cli_fail(&c, &err);
done:
    free(rk);
    wm_json_free(&j);
    wm_encoder_free(e);
    return rc;
}
