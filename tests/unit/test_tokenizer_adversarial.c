/*
 * Hostile tokenizer.json files (untrusted-input item 14 and friends): each
 * must be refused with WM_ERR_INPUT / WM_ERR_UNSUPPORTED and a message that
 * names the file and the field, never crash (this runs under ASan/UBSan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hf/tokenizer.h"

static wm_status load(const char *json, wm_error *e) {
    wm_tokenizer *t = NULL;
    memset(e, 0, sizeof *e);
    wm_status st = wm_tokenizer_load_json(json, strlen(json), "t.json", &t, e);
    if (st) assert_null(t);
    wm_tokenizer_free(t);
    return st;
}

/* Refused with status s and a message containing every needle. */
static void refused(const char *json, wm_status s, const char *n1, const char *n2) {
    wm_error e;
    wm_status st = load(json, &e);
    if (st != s || !strstr(e.msg, "t.json") || (n1 && !strstr(e.msg, n1)) || (n2 && !strstr(e.msg, n2)))
        fail_msg("expected status %d with '%s' '%s', got %d: %s\nfor %.200s", s, n1 ? n1 : "", n2 ? n2 : "", st, e.msg,
                 json);
}

#define BPE_HEAD "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":"

static void test_deep_nesting(void **state) {
    (void)state;
    size_t depth = 100000;
    char *s = malloc(2 * depth + 64);
    assert_non_null(s);
    size_t n = (size_t)sprintf(s, "{\"model\":");
    for (size_t i = 0; i < depth; i++) s[n++] = '[';
    for (size_t i = 0; i < depth; i++) s[n++] = ']';
    s[n++] = '}';
    s[n] = 0;
    refused(s, WM_ERR_INPUT, "nested deeper", NULL);
    /* 100,000 nested objects inside a string value are only text */
    n = (size_t)sprintf(s, "{\"x\":\"");
    for (size_t i = 0; i < depth; i++) s[n++] = '[';
    n += (size_t)sprintf(s + n, "\"}");
    refused(s, WM_ERR_INPUT, "model", NULL);
    free(s);
}

static void test_bad_merges(void **state) {
    (void)state;
    /* a merge whose result is longer than every vocabulary entry */
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", WM_ERR_INPUT, "merges[0]",
            "not in the vocabulary");
    refused(BPE_HEAD "[\"a b\",\"ab abababababababababababababababababababab\"]}}", WM_ERR_INPUT, "merges[1]", NULL);
    refused(BPE_HEAD "[\"a b c\"]}}", WM_ERR_INPUT, "merges[0]", NULL);
    refused(BPE_HEAD "[\"ab\"]}}", WM_ERR_INPUT, "merges[0]", NULL);
    refused(BPE_HEAD "[[\"a\"]]}}", WM_ERR_INPUT, "merges[0]", NULL);
    refused(BPE_HEAD "[[\"a\",\"zz\"]]}}", WM_ERR_INPUT, "merges[0]", "zz");
    refused(BPE_HEAD "{}}}", WM_ERR_INPUT, "merges", NULL);
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"continuing_subword_prefix\":\"####\","
            "\"unk_token\":5}}",
            WM_ERR_INPUT, "unk_token", NULL);
}

static void test_bad_ids(void **state) {
    (void)state;
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", WM_ERR_INPUT, "vocab", "id");
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":4294967296},\"merges\":[]}}", WM_ERR_INPUT, "id", NULL);
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1e300},\"merges\":[]}}", WM_ERR_INPUT, "id", NULL);
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5},\"merges\":[]}}", WM_ERR_INPUT, "id", NULL);
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"},\"merges\":[]}}", WM_ERR_INPUT, "id", NULL);
    refused("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":2147483648}}}", WM_ERR_INPUT, "id", NULL);
    refused("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1.0]],\"unk_id\":7}}", WM_ERR_INPUT, "unk_id", NULL);
    refused("{\"model\":{\"type\":\"Unigram\",\"vocab\":[],\"unk_id\":0}}", WM_ERR_INPUT, "vocab", NULL);
    refused("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",\"x\"]]}}", WM_ERR_INPUT, "vocab[0]", NULL);
    refused("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\"]]}}", WM_ERR_INPUT, "vocab[0]", NULL);
    refused("{\"added_tokens\":[{\"id\":-5,\"content\":\"x\"}],\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}",
            WM_ERR_INPUT, "added_tokens[0]", NULL);
    /* sparse huge ids load without allocating for the id range */
    wm_error e;
    assert_int_equal(load("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":2147483647},\"merges\":[]}}", &e), WM_OK);
}

static void test_undefined_specials(void **state) {
    (void)state;
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"TemplateProcessing\","
            "\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
            "\"pair\":[],\"special_tokens\":{}}}",
            WM_ERR_INPUT, "single[0]", "[CLS]");
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"TemplateProcessing\","
            "\"single\":[],\"pair\":[],\"special_tokens\":{\"x\":{\"id\":\"x\",\"ids\":[1,2],\"tokens\":[\"x\"]}}}}",
            WM_ERR_INPUT, "special_tokens", NULL);
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"BertProcessing\","
            "\"sep\":[\"[SEP]\",-1],\"cls\":[\"[CLS]\",1]}}",
            WM_ERR_INPUT, "sep", NULL);
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"BertProcessing\","
            "\"sep\":\"[SEP]\",\"cls\":[\"[CLS]\",1]}}",
            WM_ERR_INPUT, "sep", NULL);
}

static void test_bad_components(void **state) {
    (void)state;
    const char *m = "\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}}";
    char buf[1024];
    snprintf(buf, sizeof buf, "{%s,\"normalizer\":{\"type\":\"Precompiled2\"}}", m);
    refused(buf, WM_ERR_UNSUPPORTED, "normalizer", "Precompiled2");
    snprintf(buf, sizeof buf, "{%s,\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                              "\"behavior\":\"Isolated\",\"invert\":false}}", m);
    refused(buf, WM_ERR_INPUT, "pre_tokenizer.pattern", "regex");
    snprintf(buf, sizeof buf, "{%s,\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
                              "\"behavior\":\"Sideways\",\"invert\":false}}", m);
    refused(buf, WM_ERR_INPUT, "behavior", "Sideways");
    snprintf(buf, sizeof buf, "{%s,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}}", m);
    refused(buf, WM_ERR_INPUT, "replacement", NULL);
    snprintf(buf, sizeof buf, "{%s,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Nope\"}]}}", m);
    refused(buf, WM_ERR_UNSUPPORTED, "decoder.decoders[0]", "Nope");
    snprintf(buf, sizeof buf, "{%s,\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"no_type\":1}]}}", m);
    refused(buf, WM_ERR_INPUT, "normalizer.normalizers[0]", NULL);
    snprintf(buf, sizeof buf, "{%s,\"truncation\":{\"max_length\":-3}}", m);
    refused(buf, WM_ERR_INPUT, "truncation.max_length", NULL);
    snprintf(buf, sizeof buf, "{%s,\"padding\":{\"strategy\":\"Sometimes\"}}", m);
    refused(buf, WM_ERR_INPUT, "padding.strategy", NULL);
    snprintf(buf, sizeof buf, "{%s,\"version\":\"9.9\"}", m);
    refused(buf, WM_ERR_UNSUPPORTED, "version", NULL);
    refused("{\"model\":{\"type\":\"Transformer\"}}", WM_ERR_UNSUPPORTED, "model.type", NULL);
    /* 40 nested Sequence normalizers: within the JSON depth limit, past the component one */
    char deep[4096];
    size_t k = (size_t)snprintf(deep, sizeof deep, "{%s,\"normalizer\":", m);
    for (int i = 0; i < 40; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"type\":\"Sequence\",\"normalizers\":[");
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"type\":\"NFC\"}");
    for (int i = 0; i < 40; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "]}");
    snprintf(deep + k, sizeof deep - k, "}");
    refused(deep, WM_ERR_INPUT, "nested deeper than 32", NULL);
}

static void test_bad_json_text(void **state) {
    (void)state;
    refused("[1,2,3]", WM_ERR_INPUT, "object", NULL);
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[", WM_ERR_INPUT, "JSON", NULL);
    refused("", WM_ERR_INPUT, "JSON", NULL);
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\\u0000b\":0}}}", WM_ERR_UNSUPPORTED, "u0000", NULL);
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"\xff\xfe\":0}}}", WM_ERR_INPUT, "UTF-8", NULL);
    refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\tb\":0}}}", WM_ERR_INPUT, "control character", NULL);
    char nul[] = "{\"model\":{}}\0garbage";
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    assert_int_equal(wm_tokenizer_load_json(nul, sizeof nul - 1, "t.json", &t, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "NUL"));
}

/* A text that is not UTF-8 is refused; a pathological regex match ends with an error, not a hang. */
static void test_bad_text_and_runaway_regex(void **state) {
    (void)state;
    const char *json = "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0},\"unk_token\":\"a\"},"
                       "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a|aa)*b\"},"
                       "\"behavior\":\"Isolated\",\"invert\":false}}";
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    assert_int_equal(wm_tokenizer_load_json(json, strlen(json), "t.json", &t, &e), WM_OK);
    wm_encoding enc;
    wm_encoding_init(&enc);
    assert_int_equal(wm_tokenizer_encode(t, "a\xc3", 2, NULL, 0, NULL, &enc, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "UTF-8"));
    char s[200];
    memset(s, 'a', sizeof s);
    memset(&e, 0, sizeof e);
    wm_status st = wm_tokenizer_encode(t, s, sizeof s, NULL, 0, NULL, &enc, &e);
    assert_true(st == WM_OK || (st == WM_ERR_INPUT && strstr(e.msg, "regex")));
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
}


static double cpu_seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* A growing string for building large files. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;
static void sb_add(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        assert_true(k >= 0);
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
}

#define WL_HEAD "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0,\"b\":1,\"[UNK]\":2,\"[CLS]\":3},\"unk_token\":\"[UNK]\"},"

/* TemplateProcessing special_tokens {"X": {ids: n ids, tokens: n strings}} used once by single; returns the json. */
static char *template_json(size_t n_ids, size_t n_pieces) {
    sbuf b = {0};
    sb_add(&b, WL_HEAD "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[");
    for (size_t i = 0; i < n_pieces; i++) sb_add(&b, "{\"SpecialToken\":{\"id\":\"X\",\"type_id\":0}},");
    sb_add(&b, "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
               "{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{\"X\":{\"id\":\"X\",\"ids\":[");
    for (size_t i = 0; i < n_ids; i++) sb_add(&b, i ? ",3" : "3");
    sb_add(&b, "],\"tokens\":[");
    for (size_t i = 0; i < n_ids; i++) sb_add(&b, i ? ",\"[CLS]\"" : "\"[CLS]\"");
    sb_add(&b, "]}}}}");
    return b.p;
}

/* 100,000 ids in one TemplateProcessing special token load in linear time (they took minutes, each id found
 * by walking the list from its head), and encode; a template that would add more than 2^20 tokens to every
 * encoding is refused at load. */
static void test_template_special_tokens_bounded(void **state) {
    (void)state;
    char *json = template_json(100000, 1);
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    double t0 = cpu_seconds();
    assert_int_equal(wm_tokenizer_load_json(json, strlen(json), "t.json", &t, &e), WM_OK);
    double dt = cpu_seconds() - t0;
    if (dt > 20) fail_msg("loading 100000 template ids took %.1f s of CPU", dt);
    wm_encoding enc;
    wm_encoding_init(&enc);
    assert_int_equal(wm_tokenizer_encode(t, "a", 1, NULL, 0, NULL, &enc, &e), WM_OK);
    assert_int_equal(enc.n, 100000 + 1);
    assert_int_equal(enc.ids[0], 3);
    assert_int_equal(enc.ids[100000], 0);
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
    free(json);
    /* 1000 pieces x 1100 ids: 1.1 million tokens on every encoding */
    json = template_json(1100, 1000);
    refused(json, WM_ERR_INPUT, "single", "WM_TOK_MAX_TEMPLATE_TOKENS");
    free(json);
}

/* A Sequence of 25 RobertaProcessing tripled the pieces of an encoding at each step (3^25): now an error
 * naming the bound. */
static void test_post_processor_sequence_bounded(void **state) {
    (void)state;
    sbuf b = {0};
    sb_add(&b, WL_HEAD "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[");
    for (int i = 0; i < 25; i++)
        sb_add(&b, "%s{\"type\":\"RobertaProcessing\",\"sep\":[\"[CLS]\",3],\"cls\":[\"[CLS]\",3]}", i ? "," : "");
    sb_add(&b, "]}}");
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    assert_int_equal(wm_tokenizer_load_json(b.p, b.n, "t.json", &t, &e), WM_OK);
    wm_encoding enc;
    wm_encoding_init(&enc);
    assert_int_equal(wm_tokenizer_encode(t, "a", 1, NULL, 0, NULL, &enc, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "post-processor"));
    assert_non_null(strstr(e.msg, "WM_TOK_MAX_TEMPLATE_TOKENS"));
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
    free(b.p);
}

static wm_tokenizer *split_tokenizer(const char *regex_json) {
    sbuf b = {0};
    sb_add(&b, WL_HEAD "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\","
                       "\"invert\":false}}",
           regex_json);
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    if (wm_tokenizer_load_json(b.p, b.n, "t.json", &t, &e)) fail_msg("%s", e.msg);
    free(b.p);
    return t;
}

/* a*b|a rescans the rest of the text at every position: on 200,000 'a' that was quadratic (about 30 s);
 * now the regex work budget (linear in the text) ends it with an error naming the limit, while an ordinary
 * text of the same size with the same pattern encodes. */
static void test_regex_total_work_bounded(void **state) {
    (void)state;
    wm_tokenizer *t = split_tokenizer("a*b|a");
    size_t n = 200000;
    char *s = malloc(n);
    assert_non_null(s);
    memset(s, 'a', n);
    wm_encoding enc;
    wm_encoding_init(&enc);
    wm_error e = {0};
    double t0 = cpu_seconds();
    assert_int_equal(wm_tokenizer_encode(t, s, n, NULL, 0, NULL, &enc, &e), WM_ERR_INPUT);
    double dt = cpu_seconds() - t0;
    assert_non_null(strstr(e.msg, "budget"));
    assert_non_null(strstr(e.msg, "WM_TREGEX_BUDGET_PER_BYTE"));
    if (dt > 10) fail_msg("the runaway regex ran %.1f s of CPU", dt);
    for (size_t i = 1; i < n; i += 2) s[i] = 'b'; /* "abab...": every match is short */
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_tokenizer_encode(t, s, n, NULL, 0, NULL, &enc, &e), WM_OK);
    assert_int_equal(enc.n, n / 2);
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
    free(s);
}

/* Matches longer than the first window (a long word, a long run of spaces before a word, where \\s+(?!\\S)
 * looks past the run) come out as they do over the whole text. */
static void test_regex_long_matches(void **state) {
    (void)state;
    wm_tokenizer *t = split_tokenizer(" ?\\\\p{L}+|\\\\s+(?!\\\\S)|\\\\s+");
    size_t n = 30000;
    char *s = malloc(n + 16);
    assert_non_null(s);
    memset(s, 'a', 10000);          /* [0, 10000): a word */
    memset(s + 10000, ' ', 10000);  /* [10000, 19999) spaces, then " a..." */
    memset(s + 20000, 'b', n - 20000);
    wm_encoding enc;
    wm_encoding_init(&enc);
    wm_error e = {0};
    assert_int_equal(wm_tokenizer_encode(t, s, n, NULL, 0, NULL, &enc, &e), WM_OK);
    assert_int_equal(enc.n, 3);
    assert_int_equal(enc.offsets[0].start, 0);
    assert_int_equal(enc.offsets[0].end, 10000);
    assert_int_equal(enc.offsets[1].start, 10000);
    assert_int_equal(enc.offsets[1].end, 19999);
    assert_int_equal(enc.offsets[2].start, 19999);
    assert_int_equal(enc.offsets[2].end, n);
    /* the same with a run of spaces at the very end: \\s+(?!\\S) takes all of it */
    memset(s + 20000, ' ', n - 20000);
    assert_int_equal(wm_tokenizer_encode(t, s, n, NULL, 0, NULL, &enc, &e), WM_OK);
    assert_int_equal(enc.n, 2);
    assert_int_equal(enc.offsets[1].start, 10000);
    assert_int_equal(enc.offsets[1].end, n);
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
    free(s);
}

/* A long token whose prefix repeats through a long text: the added-token matcher and the Unigram / WordPiece
 * prefix searches walked the token from every position (5000 x 400,000 steps, minutes); now each has a budget
 * linear in the text and ends with an error naming it. */
static void test_trie_walks_bounded(void **state) {
    (void)state;
    char *tok = malloc(5002);
    assert_non_null(tok);
    memset(tok, 'a', 5000);
    tok[5000] = 'b';
    tok[5001] = 0;
    const char *files[3][2] = {
        {WL_HEAD "\"added_tokens\":[{\"id\":9,\"content\":\"%s\",\"single_word\":false,\"lstrip\":false,"
                 "\"rstrip\":false,\"normalized\":false,\"special\":true}]}",
         "WM_TADDED_BUDGET_PER_BYTE"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":2,\"vocab\":[[\"%s\",-1.0],[\"a\",-2.0],[\"<unk>\",-10.0]]}}",
         "WM_TMODEL_BUDGET_PER_BYTE"},
        {"{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"max_input_chars_per_word\":100000000,"
         "\"continuing_subword_prefix\":\"\",\"vocab\":{\"%s\":0,\"a\":1,\"[UNK]\":2}}}",
         "WM_TMODEL_BUDGET_PER_BYTE"},
    };
    size_t n = 400000;
    char *text = malloc(n);
    assert_non_null(text);
    memset(text, 'a', n);
    for (int f = 0; f < 3; f++) {
        sbuf b = {0};
        sb_add(&b, files[f][0], tok);
        wm_tokenizer *t = NULL;
        wm_error e = {0};
        if (wm_tokenizer_load_json(b.p, b.n, "t.json", &t, &e)) fail_msg("%s", e.msg);
        wm_encoding enc;
        wm_encoding_init(&enc);
        double t0 = cpu_seconds();
        assert_int_equal(wm_tokenizer_encode(t, text, n, NULL, 0, NULL, &enc, &e), WM_ERR_INPUT);
        double dt = cpu_seconds() - t0;
        if (!strstr(e.msg, files[f][1])) fail_msg("file %d: %s", f, e.msg);
        if (dt > 10) fail_msg("file %d took %.1f s of CPU", f, dt);
        /* the same file on an ordinary text encodes */
        memset(&e, 0, sizeof e);
        assert_int_equal(wm_tokenizer_encode(t, "aaab", 4, NULL, 0, NULL, &enc, &e), WM_OK);
        wm_encoding_free(&enc);
        wm_tokenizer_free(t);
        free(b.p);
    }
    free(text);
    free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_nesting),     cmocka_unit_test(test_bad_merges),
        cmocka_unit_test(test_bad_ids),          cmocka_unit_test(test_undefined_specials),
        cmocka_unit_test(test_bad_components),   cmocka_unit_test(test_bad_json_text),
        cmocka_unit_test(test_bad_text_and_runaway_regex),
        cmocka_unit_test(test_template_special_tokens_bounded),
        cmocka_unit_test(test_post_processor_sequence_bounded),
        cmocka_unit_test(test_regex_total_work_bounded),
        cmocka_unit_test(test_regex_long_matches),
        cmocka_unit_test(test_trie_walks_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
