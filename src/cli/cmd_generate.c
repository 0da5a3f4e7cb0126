/*
 * cmd_generate.c - `winml generate`: text generation with a KV cache on a
 * causal LM artifact (a build folder or a decoder .onnx).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "llm/generate.h"

static void help(void) {
    printf("usage: winml generate -m BUILD_DIR|MODEL.onnx --ids ID,ID,... [--max-new-tokens N]\n"
           "                      [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--repetition-penalty R]\n"
           "                      [--seed S] [--eos ID,...] [--max-length N] [--threads N] [-f table|json]\n\n"
           "Prefills the prompt and decodes one token per step with the KV cache, greedy unless a sampling\n"
           "flag is given (temperature, top-k, top-p, min-p; the seed makes sampling repeat). Stops after\n"
           "--max-new-tokens (default 32) or at an --eos id. Prints the new ids and the speed (time to first\n"
           "token, prefill and decode tokens/s). --prompt TEXT and --chat need the tokenizer module (issue 4).\n");
}

/* Parses "1,2,3" into a new array (*n items). Returns 0 or -1. */
static int parse_ids(const char *s, int32_t **out, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *nv);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        s = *end ? end + 1 : end;
    }
    *out = v;
    *n = k;
    return k ? 0 : -1;
}

int wm_cmd_generate(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml generate");
    enum { O_IDS = 256, O_PROMPT, O_CHAT, O_MAXNEW, O_TEMP, O_TOPK, O_TOPP, O_MINP, O_REP, O_SEED, O_EOS, O_MAXLEN, O_THREADS };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"ids", required_argument, 0, O_IDS},          {"prompt", required_argument, 0, O_PROMPT},
        {"chat", no_argument, 0, O_CHAT},               {"max-new-tokens", required_argument, 0, O_MAXNEW},
        {"temperature", required_argument, 0, O_TEMP},  {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP},        {"min-p", required_argument, 0, O_MINP},
        {"repetition-penalty", required_argument, 0, O_REP}, {"seed", required_argument, 0, O_SEED},
        {"eos", required_argument, 0, O_EOS},           {"max-length", required_argument, 0, O_MAXLEN},
        {"threads", required_argument, 0, O_THREADS},  {0, 0, 0, 0}};
    wm_gen_opts go = {.max_new_tokens = 32};
    wm_sampling_default(&go.sampling);
    int32_t *ids = NULL, *eos = NULL;
    size_t n_ids = 0, n_eos = 0;
    long max_len = 0, threads = 0;
    int opt, rc = WM_EXIT_ERROR;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        char *end = NULL;
        double d = 0;
        long l = 0;
        if (opt >= O_MAXNEW && opt <= O_THREADS && opt != O_EOS) {
            d = strtod(optarg, &end);
            l = (long)d;
            if (!*optarg || *end || d < 0) {
                rc = wm_cli_usage_error(&c, "%s: '%s' is not a non-negative number", argv[optind - 1], optarg);
                goto out;
            }
        }
        switch (opt) {
        case 'h': help(); rc = WM_EXIT_OK; goto out;
        case O_IDS:
            free(ids);
            if (parse_ids(optarg, &ids, &n_ids)) {
                rc = wm_cli_usage_error(&c, "--ids: expected comma-separated token ids, got '%s'", optarg);
                goto out;
            }
            break;
        case O_EOS:
            free(eos);
            if (parse_ids(optarg, &eos, &n_eos)) {
                rc = wm_cli_usage_error(&c, "--eos: expected comma-separated token ids, got '%s'", optarg);
                goto out;
            }
            break;
        case O_PROMPT: case O_CHAT:
            rc = wm_cli_usage_error(&c, "--prompt/--chat need the tokenizer module (issue 4), not in this build: give --ids");
            goto out;
        case O_MAXNEW: go.max_new_tokens = (size_t)l; break;
        case O_TEMP: go.sampling.temperature = (float)d, go.sampling.greedy = 0; break;
        case O_TOPK: go.sampling.top_k = (int)l, go.sampling.greedy = 0; break;
        case O_TOPP: go.sampling.top_p = (float)d, go.sampling.greedy = 0; break;
        case O_MINP: go.sampling.min_p = (float)d, go.sampling.greedy = 0; break;
        case O_REP: go.sampling.repetition_penalty = (float)d; break;
        case O_SEED: go.sampling.seed = (uint64_t)l; break;
        case O_MAXLEN: max_len = l; break;
        case O_THREADS: threads = l; break;
        default:
            if ((rc = wm_cli_other_opt(&c, opt, optarg, argv))) goto out;
        }
    }
    if (optind < argc) {
        rc = wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (!c.model || !ids) {
        rc = wm_cli_usage_error(&c, "-m MODEL and --ids are required");
        goto out;
    }
    go.eos = eos;
    go.n_eos = n_eos;
    wm_error err = {0};
    wm_clm *m = NULL;
    wm_clm_opts co = {.threads = (int)threads, .max_length = max_len ? max_len : (long)(n_ids + go.max_new_tokens)};
    if (wm_clm_open(c.model, &co, &m, &err)) {
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    int32_t *gen = malloc((go.max_new_tokens + 1) * sizeof *gen);
    size_t n_gen = 0;
    wm_gen_stats gs;
    if (!gen || wm_generate(m, ids, n_ids, &go, gen, &n_gen, &gs, &err)) {
        if (!gen) err.status = WM_ERR_NOMEM;
        rc = wm_cli_fail(&c, &err);
        free(gen);
        wm_clm_free(m);
        goto out;
    }
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_uint(&j, "prompt_tokens", gs.prompt_tokens);
    wm_json_arr(&j, "ids");
    for (size_t i = 0; i < n_gen; i++) wm_json_int(&j, NULL, gen[i]);
    wm_json_arr_end(&j);
    wm_json_str(&j, "stop", gs.stopped_by_eos ? "eos" : "length");
    wm_json_obj(&j, "speed");
    wm_json_num(&j, "ttft_ms", gs.ttft_ms);
    wm_json_num(&j, "prefill_tokens_per_sec", gs.prefill_ms > 0 ? gs.prompt_tokens * 1e3 / gs.prefill_ms : 0.0);
    wm_json_num(&j, "decode_tokens_per_sec", gs.decode_ms > 0 ? (double)(n_gen - 1) * 1e3 / gs.decode_ms : 0.0);
    wm_json_num(&j, "tpot_ms", n_gen > 1 ? gs.decode_ms / (double)(n_gen - 1) : 0.0);
    wm_json_obj_end(&j);
    wm_json_obj_end(&j);
    rc = wm_cli_emit(&c, c.model, &j);
    wm_json_free(&j);
    free(gen);
    wm_clm_free(m);
out:
    free(ids);
    free(eos);
    return rc;
}
