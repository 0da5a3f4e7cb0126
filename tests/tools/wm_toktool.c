/*
 * wm_toktool - drives libwinml's tokenizers for the oracle tests and the
 * benchmark.
 *
 *   wm_toktool encode MODEL FILE [--pairs] [--no-special]
 *       FILE: one JSON string per line (with --pairs a JSON [text, pair]);
 *       prints one JSON object per line: ids, type_ids, tokens, offsets
 *       (byte offsets), special (special_tokens_mask), attention, words.
 *   wm_toktool decode MODEL FILE [--keep-special]
 *       FILE: one JSON array of ids per line; prints one JSON string per line.
 *   wm_toktool stream MODEL FILE [--keep-special]
 *       as decode, through the streaming decoder; prints the chunks joined.
 *   wm_toktool bench MODEL FILE [--repeat N] [--whole]
 *       encodes every raw line of FILE (no trailing newline) N times (default
 *       1) in one thread; prints {"bytes","lines","tokens","seconds","peak_rss"}.
 *       With --whole the whole file is one text (for peak memory and long
 *       texts). peak_rss: the process's peak resident memory in bytes (Linux
 *       VmHWM, which starts afresh at exec, unlike getrusage's ru_maxrss that
 *       keeps the forking parent's peak), -1 where it cannot be read.
 *   wm_toktool normalize MODEL FILE
 *       FILE: one JSON string per line; prints the normalizer's output (JSON string per line).
 *   wm_toktool pretok MODEL FILE
 *       prints the pre-tokenizer's pieces of each line (no normalizer, as
 *       PreTokenizer.pre_tokenize_str): [[text, [start, end]], ...], byte offsets.
 *   wm_toktool info MODEL
 * MODEL: a folder or a tokenizer.json. Exit codes: 0 ok, 2 error.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/file.h"
#include "hf/tokenizer.h"
#include "hf/tokenizer_impl.h"

static int fail(const wm_error *e) {
    fprintf(stderr, "wm_toktool: error: %s\n", e->msg);
    return 2;
}

/* The peak resident memory of this process image in bytes (VmHWM), -1 when unknown. */
static long long peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atoll(line + 6);
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static void put_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void print_encoding(FILE *f, const wm_encoding *e) {
    fputs("{\"ids\":[", f);
    for (size_t i = 0; i < e->n; i++) fprintf(f, "%s%d", i ? "," : "", e->ids[i]);
    fputs("],\"type_ids\":[", f);
    for (size_t i = 0; i < e->n; i++) fprintf(f, "%s%d", i ? "," : "", e->type_ids[i]);
    fputs("],\"tokens\":[", f);
    for (size_t i = 0; i < e->n; i++) {
        size_t n;
        const char *s = wm_encoding_token(e, i, &n);
        if (i) fputc(',', f);
        put_str(f, s, n);
    }
    fputs("],\"offsets\":[", f);
    for (size_t i = 0; i < e->n; i++) fprintf(f, "%s[%u,%u]", i ? "," : "", e->offsets[i].start, e->offsets[i].end);
    fputs("],\"special\":[", f);
    for (size_t i = 0; i < e->n; i++) fprintf(f, "%s%d", i ? "," : "", e->special_mask[i]);
    fputs("],\"attention\":[", f);
    for (size_t i = 0; i < e->n; i++) fprintf(f, "%s%d", i ? "," : "", e->attention_mask[i]);
    fputs("],\"words\":[", f);
    for (size_t i = 0; i < e->n; i++) fprintf(f, "%s%d", i ? "," : "", e->word_ids[i]);
    fputs("]}\n", f);
}

/* Calls fn on every line of the file (without the newline). */
typedef int (*line_fn)(const char *s, size_t n, void *ctx);
static int each_line(const char *path, line_fn fn, void *ctx) {
    wm_map m;
    wm_error e = {0};
    if (wm_map_file(path, 0, &m, &e)) return fail(&e);
    const char *s = m.data ? (const char *)m.data : "", *end = s + m.size;
    int rc = 0;
    while (s < end && !rc) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        rc = fn(s, (size_t)(le - s), ctx);
        s = nl ? nl + 1 : end;
    }
    wm_unmap(&m);
    return rc;
}

typedef struct ctx {
    wm_tokenizer *t;
    wm_encoding enc;
    wm_encode_opts o;
    int pairs, skip_special, stream;
    size_t lines, bytes, tokens;
} ctx;

static int encode_line(const char *s, size_t n, void *p) {
    ctx *c = p;
    if (!n) return 0;
    cJSON *j = cJSON_ParseWithLength(s, n);
    const cJSON *a = j, *b = NULL;
    if (c->pairs && cJSON_IsArray(j)) {
        a = cJSON_GetArrayItem(j, 0);
        b = cJSON_GetArrayItem(j, 1);
    }
    if (!cJSON_IsString(a) || (c->pairs && !cJSON_IsString(b))) {
        fprintf(stderr, "wm_toktool: error: line %zu: expected a JSON string%s\n", c->lines + 1,
                c->pairs ? " pair" : "");
        cJSON_Delete(j);
        return 2;
    }
    wm_error e = {0};
    wm_status st = wm_tokenizer_encode(c->t, a->valuestring, strlen(a->valuestring), b ? b->valuestring : NULL,
                                       b ? strlen(b->valuestring) : 0, &c->o, &c->enc, &e);
    cJSON_Delete(j);
    c->lines++;
    if (st) {
        /* one error object per line so the caller can compare failures too */
        printf("{\"error\":");
        put_str(stdout, e.msg, strlen(e.msg));
        printf("}\n");
        return 0;
    }
    print_encoding(stdout, &c->enc);
    return 0;
}

static int decode_line(const char *s, size_t n, void *p) {
    ctx *c = p;
    if (!n) return 0;
    cJSON *j = cJSON_ParseWithLength(s, n);
    if (!cJSON_IsArray(j)) {
        cJSON_Delete(j);
        fprintf(stderr, "wm_toktool: error: expected a JSON array of ids\n");
        return 2;
    }
    size_t k = (size_t)cJSON_GetArraySize(j), i = 0;
    int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
    const cJSON *v;
    cJSON_ArrayForEach(v, j) ids[i++] = (int32_t)v->valuedouble;
    cJSON_Delete(j);
    wm_error e = {0};
    wm_tok_buf out = {0};
    wm_status st = WM_OK;
    if (c->stream) {
        wm_tok_stream ds;
        wm_tok_stream_init(&ds, c->t, c->skip_special);
        for (i = 0; i < k && !st; i++) {
            int emitted;
            st = wm_tok_stream_step(&ds, ids[i], &out, &emitted, &e);
        }
        wm_tok_stream_free(&ds);
    } else
        st = wm_tokenizer_decode(c->t, ids, k, c->skip_special, &out, &e);
    free(ids);
    if (st) {
        printf("{\"error\":");
        put_str(stdout, e.msg, strlen(e.msg));
        printf("}\n");
    } else {
        put_str(stdout, out.p ? out.p : "", out.n);
        fputc('\n', stdout);
    }
    wm_tok_buf_free(&out);
    return 0;
}

/* pretok's sink: one [text, [start, end]] per piece, into a memory stream (printed when the line succeeds) */
typedef struct piece_out {
    FILE *f;
    int first;
} piece_out;
static wm_status print_piece(void *arg, wm_tok_scratch *sc, const wm_piece *q, wm_error *err) {
    piece_out *o = arg;
    (void)err;
    fputs(o->first ? "[" : ",[", o->f);
    o->first = 0;
    put_str(o->f, sc->txt + q->off, q->len);
    fprintf(o->f, ",[%u,%u]]", q->shift, q->shift + q->olen);
    return WM_OK;
}

/* normalize / pretok: the components alone, through the library's internals */
static int component_line(const char *s, size_t n, void *p) {
    ctx *c = p;
    if (!n) return 0;
    cJSON *j = cJSON_ParseWithLength(s, n);
    if (!cJSON_IsString(j)) {
        cJSON_Delete(j);
        fprintf(stderr, "wm_toktool: error: expected a JSON string per line\n");
        return 2;
    }
    if (!c->enc.scratch) c->enc.scratch = wm_tscratch_new();
    wm_tok_scratch *sc = c->enc.scratch;
    wm_error e = {0};
    wm_piece p0;
    wm_status st = wm_ts_begin(sc, j->valuestring, strlen(j->valuestring), 0, &p0, &e);
    if (c->stream) { /* pretok */
        char *buf = NULL;
        size_t blen = 0;
        piece_out o = {open_memstream(&buf, &blen), 1};
        if (!o.f) st = WM_ERR_NOMEM;
        if (!st) st = c->t->n_pre_steps ? wm_tpre_stream(c->t, sc, &p0, print_piece, &o, &e) : print_piece(&o, sc, &p0, &e);
        if (o.f) fclose(o.f);
        if (!st) printf("[%s]\n", buf ? buf : "");
        free(buf);
    } else {
        if (!st && c->t->norm) st = wm_tnorm_apply(c->t->norm, sc, &p0, &e);
        if (!st) {
            put_str(stdout, sc->txt + p0.off, p0.len);
            fputc('\n', stdout);
        }
    }
    cJSON_Delete(j);
    if (st) {
        printf("{\"error\":");
        put_str(stdout, e.msg, strlen(e.msg));
        printf("}\n");
    }
    return 0;
}

static int bench_line(const char *s, size_t n, void *p) {
    ctx *c = p;
    wm_error e = {0};
    if (wm_tokenizer_encode(c->t, s, n, NULL, 0, &c->o, &c->enc, &e)) return fail(&e);
    c->lines++;
    c->bytes += n;
    c->tokens += c->enc.n;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: wm_toktool encode|decode|stream|bench|info MODEL [FILE] [options]\n");
        return 2;
    }
    const char *mode = argv[1];
    ctx c;
    memset(&c, 0, sizeof c);
    c.o = wm_encode_opts_default();
    c.skip_special = 1;
    int repeat = 1, whole = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--pairs")) c.pairs = 1;
        else if (!strcmp(argv[i], "--no-special")) c.o.add_special_tokens = 0;
        else if (!strcmp(argv[i], "--keep-special")) c.skip_special = 0;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--whole")) whole = 1;
        else {
            fprintf(stderr, "wm_toktool: error: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    wm_error e = {0};
    if (wm_tokenizer_load(argv[2], &c.t, &e)) return fail(&e);
    wm_encoding_init(&c.enc);
    int rc = 0;
    if (!strcmp(mode, "info")) {
        printf("{\"describe\":");
        const char *d = wm_tokenizer_describe(c.t);
        put_str(stdout, d, strlen(d));
        printf(",\"vocab_size\":%zu,\"bos\":%d,\"eos\":%d,\"pad\":%d,\"unk\":%d,\"cls\":%d,\"sep\":%d,\"mask\":%d}\n",
               wm_tokenizer_vocab_size(c.t), wm_tokenizer_special_id(c.t, WM_TOK_BOS),
               wm_tokenizer_special_id(c.t, WM_TOK_EOS), wm_tokenizer_special_id(c.t, WM_TOK_PAD),
               wm_tokenizer_special_id(c.t, WM_TOK_UNK), wm_tokenizer_special_id(c.t, WM_TOK_CLS),
               wm_tokenizer_special_id(c.t, WM_TOK_SEP), wm_tokenizer_special_id(c.t, WM_TOK_MASK));
    } else if (argc < 4) {
        fprintf(stderr, "wm_toktool: error: %s needs a FILE\n", mode);
        rc = 2;
    } else if (!strcmp(mode, "encode"))
        rc = each_line(argv[3], encode_line, &c);
    else if (!strcmp(mode, "normalize") || !strcmp(mode, "pretok")) {
        c.stream = mode[0] == 'p';
        rc = each_line(argv[3], component_line, &c);
    } else if (!strcmp(mode, "decode") || !strcmp(mode, "stream")) {
        c.stream = mode[0] == 's';
        rc = each_line(argv[3], decode_line, &c);
    } else if (!strcmp(mode, "bench")) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        wm_map m = {0};
        if (whole && wm_map_file(argv[3], 0, &m, &e)) return fail(&e);
        for (int r = 0; r < repeat && !rc; r++)
            rc = whole ? bench_line(m.data ? (const char *)m.data : "", m.size, &c) : each_line(argv[3], bench_line, &c);
        if (whole) wm_unmap(&m);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
        if (!rc)
            printf("{\"bytes\":%zu,\"lines\":%zu,\"tokens\":%zu,\"seconds\":%.6f,\"peak_rss\":%lld}\n", c.bytes,
                   c.lines, c.tokens, secs, peak_rss());
    } else {
        fprintf(stderr, "wm_toktool: error: unknown mode '%s'\n", mode);
        rc = 2;
    }
    wm_encoding_free(&c.enc);
    wm_tokenizer_free(c.t);
    return rc;
}
