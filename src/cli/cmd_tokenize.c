/*
 * cmd_tokenize.c - `winml tokenize -m MODEL --text T [--pair T2] [--decode IDS] [-f json]`:
 * ids, tokens and byte offsets of a text (or a pair) with a checkpoint's
 * tokenizer, or the text of a list of ids.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "hf/tokenizer.h"

/* --max-length and --pad-to: 2^20 tokens, past any model's context */
#define TOK_MAX_TOKENS (1L << 20)

static void help(void) {
    printf("usage: winml tokenize -m MODEL (--text TEXT [--pair TEXT2] | --decode IDS) [options]\n\n"
           "Encodes TEXT (and TEXT2 as the second sequence of a pair, as cross-encoders take it)\n"
           "with the tokenizer of MODEL, or decodes IDS back to text, exactly as the Hugging Face\n"
           "`tokenizers` library does.\n\n"
           "MODEL: a folder with tokenizer.json (or vocab.json + merges.txt, or vocab.txt), or a\n"
           "tokenizer.json file.\n\n"
           "options:\n"
           "  --text TEXT        text to encode ('-' reads standard input)\n"
           "  --pair TEXT2       second sequence of a pair ('-' reads standard input)\n"
           "  --decode IDS       ids separated by commas or spaces, e.g. \"9707,1879\"\n"
           "  --no-special       do not add the post-processor's special tokens ([CLS], <s> ...)\n"
           "  --keep-special     keep special tokens when decoding (skipped by default)\n"
           "  --max-length N     truncate to N tokens (longest first for pairs; N up to 1048576)\n"
           "  --pad-to N         pad to N tokens with the tokenizer's padding token (N up to 1048576)\n"
           "  -f table|json      output format; -o FILE also writes the JSON\n\n"
           "Offsets are byte offsets into the text (the pair's into the pair text); special\n"
           "tokens and padding have [0, 0].\n");
}

static char *read_stdin(size_t *len) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = cap < (1u << 30) ? realloc(b, cap * 2) : NULL;
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* Parses "1,2 3" into *ids (malloc'ed); 0 on a bad id. */
static int parse_ids(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return 0;
    while (*s) {
        while (*s == ',' || *s == ' ' || *s == '\t' || *s == '\n' || *s == '[' || *s == ']') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX) return 0;
        if (*n >= cap) {
            int32_t *nb = realloc(*ids, cap * 2 * sizeof **ids);
            if (!nb) return 0;
            *ids = nb;
            cap *= 2;
        }
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
    }
    return 1;
}

static void emit_encoding(wm_json *j, const wm_encoding *e) {
    wm_json_int(j, "count", (int64_t)e->n);
    wm_json_arr(j, "ids");
    for (size_t i = 0; i < e->n; i++) wm_json_int(j, NULL, e->ids[i]);
    wm_json_arr_end(j);
    wm_json_arr(j, "tokens");
    for (size_t i = 0; i < e->n; i++) {
        size_t n;
        const char *s = wm_encoding_token(e, i, &n);
        wm_json_obj(j, NULL);
        wm_json_int(j, "id", e->ids[i]);
        wm_json_strn(j, "token", s, n);
        wm_json_arr(j, "offsets");
        wm_json_uint(j, NULL, e->offsets[i].start);
        wm_json_uint(j, NULL, e->offsets[i].end);
        wm_json_arr_end(j);
        wm_json_int(j, "type_id", e->type_ids[i]);
        wm_json_bool(j, "special", e->special_mask[i]);
        wm_json_bool(j, "attention", e->attention_mask[i]);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
}

int wm_cmd_tokenize(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml tokenize");
    enum { O_TEXT = 1000, O_PAIR, O_DECODE, O_NOSPECIAL, O_KEEP, O_MAXLEN, O_PAD };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"text", required_argument, 0, O_TEXT},
                                          {"pair", required_argument, 0, O_PAIR},
                                          {"decode", required_argument, 0, O_DECODE},
                                          {"no-special", no_argument, 0, O_NOSPECIAL},
                                          {"keep-special", no_argument, 0, O_KEEP},
                                          {"max-length", required_argument, 0, O_MAXLEN},
                                          {"pad-to", required_argument, 0, O_PAD},
                                          {0, 0, 0, 0}};
    const char *text = NULL, *pair = NULL, *decode = NULL;
    int keep = 0;
    size_t maxlen = 0, padto = 0;
    wm_encode_opts o = wm_encode_opts_default();
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_TEXT: /* one input per run: a second one is not silently dropped */
            if (text) return wm_cli_usage_error(&c, "--text given twice: tokenize takes one text per run");
            text = optarg;
            break;
        case O_PAIR:
            if (pair) return wm_cli_usage_error(&c, "--pair given twice: tokenize takes one pair per run");
            pair = optarg;
            break;
        case O_DECODE:
            if (decode) return wm_cli_usage_error(&c, "--decode given twice: tokenize takes one id list per run");
            decode = optarg;
            break;
        case O_NOSPECIAL: o.add_special_tokens = 0; break;
        case O_KEEP: keep = 1; break;
        case O_MAXLEN:
        case O_PAD: { /* each padded token is printed: 2^31 of them ran out of memory, 10^8 ran for minutes */
            long v;
            if (wm_cli_int_arg(&c, opt == O_PAD ? "--pad-to" : "--max-length", optarg, 0, TOK_MAX_TOKENS, &v))
                return WM_EXIT_ERROR;
            *(opt == O_PAD ? &padto : &maxlen) = (size_t)v;
            break;
        }
        default: {
            int r = wm_cli_other_opt(&c, opt, optarg, argv);
            if (r) return r;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");
    if (!text && !decode) return wm_cli_usage_error(&c, "give --text TEXT or --decode IDS");
    if (text && decode) return wm_cli_usage_error(&c, "--text and --decode do not go together");
    if (pair && !text) return wm_cli_usage_error(&c, "--pair needs --text");
    if (text && pair && !strcmp(text, "-") && !strcmp(pair, "-"))
        return wm_cli_usage_error(&c, "only one of --text and --pair can read standard input");

    wm_error e = {0};
    wm_tokenizer *t = NULL;
    if (wm_tokenizer_load(c.model, &t, &e)) return wm_cli_fail(&c, &e);
    int rc = WM_EXIT_OK;
    char *in = NULL;
    int32_t *ids = NULL;
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "model", c.model);
    wm_json_str(&j, "tokenizer", wm_tokenizer_describe(t));
    if (decode) {
        size_t n;
        if (!parse_ids(decode, &ids, &n)) {
            rc = wm_cli_usage_error(&c, "--decode: expected ids (integers in [0, 2^31)) separated by commas or spaces");
            goto done;
        }
        wm_tok_buf out = {0};
        if (wm_tokenizer_decode(t, ids, n, !keep, &out, &e)) {
            rc = wm_cli_fail(&c, &e);
            goto done;
        }
        wm_json_arr(&j, "ids");
        for (size_t i = 0; i < n; i++) wm_json_int(&j, NULL, ids[i]);
        wm_json_arr_end(&j);
        wm_json_strn(&j, "text", out.p ? out.p : "", out.n);
        wm_tok_buf_free(&out);
    } else {
        size_t tl = strlen(text), pl = pair ? strlen(pair) : 0;
        if (!strcmp(text, "-") || (pair && !strcmp(pair, "-"))) {
            size_t n;
            if (!(in = read_stdin(&n))) {
                fprintf(stderr, "winml tokenize: error: cannot read standard input\n");
                rc = WM_EXIT_ERROR;
                goto done;
            }
            if (!strcmp(text, "-")) text = in, tl = n;
            else pair = in, pl = n;
        }
        if (maxlen || padto) {
            o.use_defaults = 0;
            o.truncation = (wm_tok_truncation){.enabled = maxlen > 0, .max_length = maxlen};
            o.padding = (wm_tok_padding){.enabled = padto > 0, .length = padto};
            int32_t pad = wm_tokenizer_special_id(t, WM_TOK_PAD);
            o.padding.pad_id = pad >= 0 ? pad : 0;
            size_t pn = 0;
            const char *ps = pad >= 0 ? wm_tokenizer_id_to_token(t, pad, &pn) : "[PAD]";
            if (!ps) ps = "[PAD]", pn = 5;
            snprintf(o.padding.pad_token, sizeof o.padding.pad_token, "%.*s", (int)pn, ps);
        }
        wm_encoding enc;
        wm_encoding_init(&enc);
        if (wm_tokenizer_encode(t, text, tl, pair, pl, &o, &enc, &e)) {
            wm_encoding_free(&enc);
            rc = wm_cli_fail(&c, &e);
            goto done;
        }
        wm_json_strn(&j, "text", text, tl);
        if (pair) wm_json_strn(&j, "pair", pair, pl);
        emit_encoding(&j, &enc);
        wm_encoding_free(&enc);
    }
    wm_json_obj_end(&j);
    rc = wm_cli_emit(&c, "winml tokenize", &j);
done:
    wm_json_free(&j);
    free(in);
    free(ids);
    wm_tokenizer_free(t);
    return rc;
}
