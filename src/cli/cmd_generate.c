/*
 * cmd_generate.c - `winml generate`: text generation with a KV cache on a
 * causal LM artifact (a build folder or a decoder .onnx).
 */
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_limits.h"
#include "core/error.h"
#include "core/file.h"
#include "hf/tokenizer.h"
#include "llm/chat.h"
#include "llm/folder_cfg.h"
#include "llm/generate.h"

static void help(void) {
    printf("usage: winml generate -m BUILD_DIR|MODEL.onnx (--prompt TEXT [--chat] [--system TEXT] | --ids ID,...)\n"
           "                      [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p M]\n"
           "                      [--repetition-penalty R] [--seed S] [--eos ID,...] [--stop STRING]...\n"
           "                      [--no-thinking] [--max-length N] [--threads N] [--ep auto|cpu] [-d auto|cpu] [-f table|json]\n"
           "                      [--max-memory SIZE] [--max-loop-iterations N] [--timeout S]\n\n"
           "Prefills the prompt and decodes one token per step with the KV cache, greedy unless a sampling\n"
           "flag is given (temperature, top-k, top-p, min-p; the seed makes sampling repeat). The prompt is\n"
           "encoded with the tokenizer in the model's folder; --chat first applies its chat template\n"
           "(tokenizer_config.json) to one user turn (after --system when given). Text streams to stdout as\n"
           "it is decoded (whole UTF-8 characters). Stops after --max-new-tokens (default 32), at an end id\n"
           "(--eos, else generation_config.json / config.json, else the tokenizer's eos) or at a --stop\n"
           "string (not printed). -f json prints the text, ids and speed as one object instead.\n"
           "The model's context (genai_config.json context_length, else config.json max_position_embeddings)\n"
           "bounds prompt + new tokens: a longer prompt is refused (exit 2); generation that reaches it stops\n"
           "there (\"stop\": \"context\", with a note).\n\n"
           WM_CLI_TARGET_HELP WM_CLI_LIMITS_HELP);
}

typedef struct stream_ctx {
    const wm_tokenizer *tok;
    wm_tok_stream ts;
    wm_tok_buf text;            /* everything decoded so far */
    size_t printed;             /* bytes of text written to stdout */
    const char *const *stops;
    size_t n_stops;
    int print;                  /* stream to stdout */
    int stopped;                /* a stop string was seen */
    size_t cut;                 /* text length up to the stop string */
    wm_error err;
} stream_ctx;

/* Holds back enough bytes to catch a stop string split across tokens. */
static size_t hold_back(const stream_ctx *c) {
    size_t h = 0;
    for (size_t i = 0; i < c->n_stops; i++) {
        size_t k = strlen(c->stops[i]);
        if (k > h) h = k;
    }
    return h ? h - 1 : 0;
}

static int on_token(void *arg, int32_t id) {
    stream_ctx *c = arg;
    if (!c->tok) return 0;
    wm_tok_buf chunk = {0};
    int emitted = 0;
    if (wm_tok_stream_step(&c->ts, id, &chunk, &emitted, &c->err)) {
        wm_tok_buf_free(&chunk);
        return 1;
    }
    if (emitted && chunk.n) {
        if (c->text.n + chunk.n + 1 > c->text.cap) {
            size_t cap = (c->text.n + chunk.n + 1) * 2;
            char *np = realloc(c->text.p, cap);
            if (!np) {
                wm_tok_buf_free(&chunk);
                return 1;
            }
            c->text.p = np, c->text.cap = cap;
        }
        memcpy(c->text.p + c->text.n, chunk.p, chunk.n);
        c->text.n += chunk.n;
        c->text.p[c->text.n] = 0;
    }
    wm_tok_buf_free(&chunk);
    for (size_t i = 0; i < c->n_stops && !c->stopped; i++) {
        const char *hit = c->text.n ? strstr(c->text.p, c->stops[i]) : NULL;
        if (hit) c->stopped = 1, c->cut = (size_t)(hit - c->text.p);
    }
    size_t upto = c->stopped ? c->cut : (c->text.n > hold_back(c) ? c->text.n - hold_back(c) : 0);
    if (c->print && upto > c->printed) {
        fwrite(c->text.p + c->printed, 1, upto - c->printed, stdout);
        fflush(stdout);
        c->printed = upto;
    }
    return c->stopped;
}

/* --ids / --eos: token ids in [0, INT32_MAX] (wm_cli_list_arg) into a new int32 array (the caller frees *out);
   0, or an exit code (message printed) with *out untouched. */
static int ids_arg(const wm_cli *c, const char *flag, const char *v, int32_t **out, size_t *n) {
    long *l;
    size_t k;
    int rc = wm_cli_list_arg(c, flag, v, 0, INT32_MAX, 0, &l, &k);
    if (rc) return rc;
    int32_t *a = malloc(k * sizeof *a);
    if (!a) {
        free(l);
        return wm_cli_usage_error(c, "%s: out of memory", flag);
    }
    for (size_t i = 0; i < k; i++) a[i] = (int32_t)l[i];
    free(l);
    *out = a;
    *n = k;
    return 0;
}

int wm_cmd_generate(int argc, char **argv) {
    if (wm_generate_is_s2s(argc, argv)) return wm_cmd_generate_s2s(argc, argv);
    wm_cli c;
    wm_cli_init(&c, "winml generate");
    enum { O_IDS = 256, O_PROMPT, O_CHAT, O_SYSTEM, O_STOP, O_NOTHINK, O_MAXNEW, O_TEMP, O_TOPK, O_TOPP, O_MINP, O_REP,
           O_SEED, O_EOS, O_MAXLEN, O_THREADS };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"ids", required_argument, 0, O_IDS},          {"prompt", required_argument, 0, O_PROMPT},
        {"chat", no_argument, 0, O_CHAT},               {"max-new-tokens", required_argument, 0, O_MAXNEW},
        {"system", required_argument, 0, O_SYSTEM},     {"stop", required_argument, 0, O_STOP},
        {"no-thinking", no_argument, 0, O_NOTHINK},
        {"temperature", required_argument, 0, O_TEMP},  {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP},        {"min-p", required_argument, 0, O_MINP},
        {"repetition-penalty", required_argument, 0, O_REP}, {"seed", required_argument, 0, O_SEED},
        {"eos", required_argument, 0, O_EOS},           {"max-length", required_argument, 0, O_MAXLEN},
        {"threads", required_argument, 0, O_THREADS},  WM_CLI_LIMITS_LONG, WM_CLI_TARGET_LONG, {0, 0, 0, 0}};
    wm_gen_opts go = {.max_new_tokens = 32};
    wm_sampling_default(&go.sampling);
    int32_t *ids = NULL, *eos = NULL;
    size_t n_ids = 0, n_eos = 0;
    long max_len = 0, threads = 0;
    int opt, rc = WM_EXIT_ERROR, chat = 0, no_think = 0;
    wm_session_opts so = {0};
    const char *prompt = NULL, *system = NULL, *stops[16];
    size_t n_stops = 0;
    wm_tokenizer *tok = NULL;
    stream_ctx sc = {0};
    char *rendered = NULL;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT WM_CLI_TARGET_SHORT, longs, NULL)) != -1) {
        double d = 0;
        long l = 0;
        char flag[40];
        snprintf(flag, sizeof flag, "--%s", wm_cli_long_name(longs, opt));
        int bad = 0;
        switch (opt) { /* numeric values: integers or finite numbers in the range each one means */
        case O_MAXNEW: case O_TOPK: bad = wm_cli_int_arg(&c, flag, optarg, 0, INT32_MAX, &l); break;
        case O_MAXLEN: bad = wm_cli_int_arg(&c, flag, optarg, 1, LONG_MAX, &l); break;
        case O_SEED: bad = wm_cli_int_arg(&c, flag, optarg, 0, LONG_MAX, &l); break;
        case O_THREADS: bad = wm_cli_int_arg(&c, flag, optarg, 0, 256, &l); break;
        case O_TEMP: bad = wm_cli_num_arg(&c, flag, optarg, 0, 0, 1e6, &d); break;
        case O_TOPP: case O_MINP: bad = wm_cli_num_arg(&c, flag, optarg, 0, 0, 1, &d); break;
        case O_REP: bad = wm_cli_num_arg(&c, flag, optarg, 0, 1, 1e6, &d); break;
        default: break;
        }
        if (bad) {
            rc = bad;
            goto out;
        }
        switch (opt) {
        case 'h': help(); rc = WM_EXIT_OK; goto out;
        case O_IDS: /* one prompt per run, as --prompt: a second list is not silently dropped */
        case O_EOS:
            if (opt == O_IDS ? ids != NULL : eos != NULL) {
                rc = wm_cli_usage_error(&c, "%s given twice: list the ids in one comma-separated value", flag);
                goto out;
            }
            if ((rc = ids_arg(&c, flag, optarg, opt == O_IDS ? &ids : &eos, opt == O_IDS ? &n_ids : &n_eos)))
                goto out;
            rc = WM_EXIT_ERROR;
            break;
        case O_PROMPT: /* one prompt per run: a second one is not silently dropped */
            if (prompt) {
                rc = wm_cli_usage_error(&c, "--prompt given twice: generate takes one prompt per run");
                goto out;
            }
            prompt = optarg;
            break;
        case O_CHAT: chat = 1; break;
        case O_SYSTEM: system = optarg; break;
        case O_NOTHINK: no_think = 1; break;
        case O_STOP:
            if (n_stops == 16 || !*optarg) {
                rc = wm_cli_usage_error(&c, "--stop: at most 16 non-empty strings");
                goto out;
            }
            stops[n_stops++] = optarg;
            break;
        case O_MAXNEW: go.max_new_tokens = (size_t)l; break;
        case O_TEMP: go.sampling.temperature = (float)d, go.sampling.greedy = 0; break;
        case O_TOPK: go.sampling.top_k = (int)l, go.sampling.greedy = 0; break;
        case O_TOPP: go.sampling.top_p = (float)d, go.sampling.greedy = 0; break;
        case O_MINP: go.sampling.min_p = (float)d, go.sampling.greedy = 0; break;
        case O_REP: go.sampling.repetition_penalty = (float)d; break;
        case O_SEED: go.sampling.seed = (uint64_t)l; break; /* an integer flag: its value is in l */
        case O_MAXLEN: max_len = l; break;
        case O_THREADS: threads = l; break;
        default: {
            int lr = wm_cli_limits_opt(&c, opt, optarg, &so);
            if (lr < 0) {
                rc = WM_EXIT_ERROR;
                goto out;
            }
            if (!lr && (rc = wm_cli_other_opt(&c, opt, optarg, argv))) goto out;
        }
        }
    }
    if (optind < argc) {
        rc = wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (ids && prompt) {
        rc = wm_cli_usage_error(&c, "--prompt and --ids: give one of them");
        goto out;
    }
    if (!c.model || !!ids == !!prompt) {
        rc = wm_cli_usage_error(&c, "-m MODEL and one of --prompt or --ids are required");
        goto out;
    }
    if ((chat || system) && !prompt) {
        rc = wm_cli_usage_error(&c, "--chat and --system need --prompt");
        goto out;
    }
    wm_error err = {0};
    char file[4096], folder[4096];
    if (wm_model_path(c.model, "a build folder with model.onnx, or an .onnx file in one", file, sizeof file, folder,
                      sizeof folder, &err)) {
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    if (prompt) {
        if (wm_tokenizer_load_dir(folder, &tok, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        const char *text = prompt;
        wm_encode_opts eo = wm_encode_opts_default();
        if (chat || system) {
            wm_chat_template t = {0};
            if (wm_chat_template_load(folder, NULL, 0, &t, &err)) {
                rc = wm_cli_fail(&c, &err);
                goto out;
            }
            wm_chat_vars v;
            wm_chat_vars_init(&v);
            wm_chat_vars_from_template(&v, &t);
            if (no_think) v.enable_thinking = 0;
            wm_chat_message msgs[2];
            size_t nm = 0;
            if (system) msgs[nm].role = "system", msgs[nm].content = system, msgs[nm++].reasoning_content = NULL;
            msgs[nm].role = "user", msgs[nm].content = prompt, msgs[nm++].reasoning_content = NULL;
            wm_status st = wm_chat_apply(t.source, msgs, nm, 1, &v, &rendered, &err);
            wm_chat_template_free(&t);
            if (st) {
                rc = wm_cli_fail(&c, &err);
                goto out;
            }
            text = rendered;
            eo.add_special_tokens = 0; /* the template wrote them, as apply_chat_template(tokenize=True) */
        }
        wm_encoding enc;
        wm_encoding_init(&enc);
        if (wm_tokenizer_encode(tok, text, strlen(text), NULL, 0, &eo, &enc, &err)) {
            wm_encoding_free(&enc);
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        n_ids = enc.n;
        ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
        if (ids) memcpy(ids, enc.ids, n_ids * sizeof *ids);
        wm_encoding_free(&enc);
        if (!ids || !n_ids) {
            rc = wm_cli_usage_error(&c, "--prompt: the text encodes to no tokens");
            goto out;
        }
    }
    if (!eos) { /* the model's own end ids */
        int32_t found[16];
        size_t nf = 0;
        if (wm_llm_folder_eos(folder, found, 16, &nf, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        if (!nf && tok && wm_tokenizer_special_id(tok, WM_TOK_EOS) >= 0) found[nf++] = wm_tokenizer_special_id(tok, WM_TOK_EOS);
        if (nf && (eos = malloc(nf * sizeof *eos))) memcpy(eos, found, nf * sizeof *eos), n_eos = nf;
    }
    go.eos = eos;
    go.n_eos = n_eos;
    if (tok) {
        sc.tok = tok;
        wm_tok_stream_init(&sc.ts, tok, 1);
        sc.stops = stops;
        sc.n_stops = n_stops;
        sc.print = !c.json;
        go.on_token = on_token;
        go.ctx = &sc;
    }
    const char *ctx_src = NULL;
    if (wm_llm_folder_context(folder, &go.context, &ctx_src, &err)) {
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    if (go.context && n_ids > go.context) {
        wm_err(&err, WM_ERR_INPUT, "the prompt has %zu tokens, more than the model's context of %zu tokens (%s): "
                                   "shorten the prompt",
               n_ids, go.context, ctx_src);
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    size_t want_new = go.max_new_tokens; /* as asked: the note says when the context cut it */
    size_t cap_new = go.context && go.max_new_tokens > go.context - n_ids ? go.context - n_ids : go.max_new_tokens;
    wm_clm *m = NULL;
    wm_clm_opts co = {.threads = (int)threads,
                      .max_length = max_len ? max_len : (int64_t)(n_ids + (cap_new ? cap_new : 1)), .session = &so};
    if (wm_clm_open(file, &co, &m, &err)) {
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    int32_t *gen = malloc((cap_new + 1) * sizeof *gen);
    size_t n_gen = 0;
    wm_gen_stats gs;
    if (!gen || wm_generate(m, ids, n_ids, &go, gen, &n_gen, &gs, &err)) {
        if (!gen) err.status = WM_ERR_NOMEM;
        rc = wm_cli_fail(&c, &err);
        free(gen);
        wm_clm_free(m);
        goto out;
    }
    if (sc.err.status) {
        rc = wm_cli_fail(&c, &sc.err);
        free(gen);
        wm_clm_free(m);
        goto out;
    }
    if (tok && !c.json) { /* the text went to stdout as it came: finish it, speed to stderr */
        size_t end = sc.stopped ? sc.cut : sc.text.n;
        if (end > sc.printed) fwrite(sc.text.p + sc.printed, 1, end - sc.printed, stdout);
        fputc('\n', stdout);
        fflush(stdout); /* the text before the figures when both go to one file or pipe */
        if (!c.quiet)
            fprintf(stderr, "%zu prompt tokens, %zu new (%s); ttft %.1f ms, decode %.1f tokens/s\n", gs.prompt_tokens,
                    n_gen,
                    sc.stopped             ? "stop string"
                    : gs.stopped_by_eos    ? "eos"
                    : gs.stopped_by_context ? "context"
                                           : "length",
                    gs.ttft_ms, gs.decode_ms > 0 ? (double)(n_gen - 1) * 1e3 / gs.decode_ms : 0.0);
        if (gs.stopped_by_context && !sc.stopped)
            fprintf(stderr, "winml generate: note: stopped at the model's context of %zu tokens (%s): %zu prompt + %zu "
                            "new, of the %zu --max-new-tokens asked\n",
                    go.context, ctx_src, n_ids, n_gen, want_new);
        free(gen);
        wm_clm_free(m);
        rc = WM_EXIT_OK;
        goto out;
    }
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    if (tok) wm_json_strn(&j, "text", sc.text.p ? sc.text.p : "", sc.stopped ? sc.cut : sc.text.n);
    wm_json_uint(&j, "prompt_tokens", gs.prompt_tokens);
    wm_json_arr(&j, "ids");
    for (size_t i = 0; i < n_gen; i++) wm_json_int(&j, NULL, gen[i]);
    wm_json_arr_end(&j);
    wm_json_str(&j, "stop", sc.stopped ? "stop_string" : gs.stopped_by_eos ? "eos" : gs.stopped_by_context ? "context" : "length");
    if (go.context) wm_json_uint(&j, "context", go.context);
    if (gs.stopped_by_context && !sc.stopped) {
        char note[400];
        snprintf(note, sizeof note, "stopped at the model's context of %zu tokens (%s): %zu prompt + %zu new, of the %zu "
                 "--max-new-tokens asked", go.context, ctx_src, n_ids, n_gen, want_new);
        wm_json_str(&j, "note", note);
    }
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
    free(rendered);
    if (sc.tok) wm_tok_stream_free(&sc.ts);
    wm_tok_buf_free(&sc.text);
    wm_tokenizer_free(tok);
    return rc;
}
