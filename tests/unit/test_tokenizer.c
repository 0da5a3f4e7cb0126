/*
 * Unit tests of the tokenizers on tiny tokenizer.json files whose results
 * follow from the definitions (BPE merge order, Unigram best path, WordPiece
 * longest match, added-token splitting), and invariants over a byte-level
 * BPE with every byte: offsets on character boundaries, lossless decode,
 * streaming decode, truncation, padding, batches, folders of vocab files.
 * The exact agreement with Python `tokenizers` is tests/oracle's job.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer.h"
#include "hf/tokenizer_unicode.h"
#include "unit_tmpdir.h"

static wm_tokenizer *load(const char *json) {
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    if (wm_tokenizer_load_json(json, strlen(json), "t.json", &t, &e)) fail_msg("load: %s", e.msg);
    return t;
}

static void encode(const wm_tokenizer *t, const char *s, const char *pair, const wm_encode_opts *o, wm_encoding *e) {
    wm_error err = {0};
    if (wm_tokenizer_encode(t, s, strlen(s), pair, pair ? strlen(pair) : 0, o, e, &err)) fail_msg("encode: %s", err.msg);
}

static void expect_ids(const wm_encoding *e, const int32_t *ids, size_t n) {
    assert_int_equal(e->n, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(e->ids[i], ids[i]);
}

static void test_bpe_merge_order(void **state) {
    (void)state;
    /* merges apply lowest rank first: "b c" (rank 0) before "a b" (rank 1) */
    wm_tokenizer *t = load("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4,\"abc\":5},"
                           "\"merges\":[\"b c\",\"a b\",\"a bc\"]}}");
    wm_encoding e;
    wm_encoding_init(&e);
    encode(t, "abc", NULL, NULL, &e);
    expect_ids(&e, (int32_t[]){5}, 1); /* b c -> bc, then a bc -> abc */
    encode(t, "abab", NULL, NULL, &e);
    expect_ids(&e, (int32_t[]){3, 3}, 2);
    assert_int_equal(e.offsets[1].start, 2);
    assert_int_equal(e.offsets[1].end, 4);
    encode(t, "cab", NULL, NULL, &e); /* the cache must not change results */
    expect_ids(&e, (int32_t[]){2, 3}, 2);
    encode(t, "cab", NULL, NULL, &e);
    expect_ids(&e, (int32_t[]){2, 3}, 2);
    size_t n;
    const char *s = wm_encoding_token(&e, 1, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(s, "ab", 2);
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

static void test_bpe_unk_and_byte_fallback(void **state) {
    (void)state;
    wm_tokenizer *t = load("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0,\"a\":1,\"<0xC3>\":2,\"<0xA9>\":3},"
                           "\"merges\":[],\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true}}");
    wm_encoding e;
    wm_encoding_init(&e);
    encode(t, "a\xc3\xa9" "a", NULL, NULL, &e); /* é has both bytes: two byte tokens */
    expect_ids(&e, (int32_t[]){1, 2, 3, 1}, 4);
    encode(t, "xya", NULL, NULL, &e); /* unknown, no byte tokens: one fused <unk> */
    expect_ids(&e, (int32_t[]){0, 1}, 2);
    assert_int_equal(e.offsets[0].end, 2);
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

static void test_unigram_best_path(void **state) {
    (void)state;
    /* "ab" as one piece scores -1.5, as two pieces -2.0: the best path is one piece */
    wm_tokenizer *t = load("{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0.0],[\"a\",-1.0],"
                           "[\"b\",-1.0],[\"ab\",-1.5],[\"c\",-3.0]]}}");
    wm_encoding e;
    wm_encoding_init(&e);
    encode(t, "abc", NULL, NULL, &e);
    expect_ids(&e, (int32_t[]){3, 4}, 2);
    encode(t, "xyab", NULL, NULL, &e); /* unknown characters fuse into one <unk> piece */
    expect_ids(&e, (int32_t[]){0, 3}, 2);
    size_t n;
    const char *s = wm_encoding_token(&e, 0, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(s, "xy", 2);
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

static void test_wordpiece_and_bert_pipeline(void **state) {
    (void)state;
    wm_tokenizer *t = load(
        "{\"added_tokens\":[{\"id\":2,\"content\":\"[CLS]\",\"special\":true},"
        "{\"id\":3,\"content\":\"[SEP]\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},"
        "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
        "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
        "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
        "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"max_input_chars_per_word\":10,"
        "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"un\":4,\"##aff\":5,\"##able\":6,\"!\":7,\"x\":8}}}");
    wm_encoding e;
    wm_encoding_init(&e);
    encode(t, "UnAffable! Xyz", "x", NULL, &e);
    /* [CLS] un ##aff ##able ! [UNK] [SEP] x [SEP] */
    expect_ids(&e, (int32_t[]){2, 4, 5, 6, 7, 1, 3, 8, 3}, 9);
    assert_int_equal(e.type_ids[6], 0);
    assert_int_equal(e.type_ids[7], 1);
    assert_int_equal(e.type_ids[8], 1);
    assert_int_equal(e.special_mask[0], 1);
    assert_int_equal(e.special_mask[1], 0);
    assert_int_equal(e.offsets[5].start, 11); /* "Xyz" is unknown as a whole word */
    assert_int_equal(e.offsets[5].end, 14);
    wm_tok_buf out = {0};
    wm_error err = {0};
    assert_int_equal(wm_tokenizer_decode(t, e.ids, e.n, 1, &out, &err), WM_OK);
    assert_string_equal(out.p, "unaffable! [UNK] x"); /* specials skipped, "##" joined, " !" cleaned */
    wm_tok_buf_free(&out);
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

static void test_added_tokens(void **state) {
    (void)state;
    wm_tokenizer *t = load("{\"added_tokens\":[{\"id\":9,\"content\":\"<x>\",\"special\":true,\"normalized\":false},"
                           "{\"id\":10,\"content\":\"<y>\",\"special\":false,\"lstrip\":true,\"rstrip\":true,"
                           "\"normalized\":false}],"
                           "\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},"
                           "\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"?\",\"vocab\":{\"?\":0,\"a\":1,\"b\":2}}}");
    wm_encoding e;
    wm_encoding_init(&e);
    encode(t, "a<x>b  <y>  a", NULL, NULL, &e);
    /* ids of added tokens not in the vocabulary follow it: <x> = 3, <y> = 4 (the file's ids are advisory) */
    expect_ids(&e, (int32_t[]){1, 3, 2, 4, 1}, 5);
    assert_int_equal(e.offsets[3].start, 5); /* lstrip / rstrip take the spaces around <y> */
    assert_int_equal(e.offsets[3].end, 12);
    assert_int_equal(wm_tokenizer_token_to_id(t, "<x>", 3), 3);
    assert_true(wm_tokenizer_is_special(t, 3));
    assert_false(wm_tokenizer_is_special(t, 4));
    wm_tok_buf out = {0};
    wm_error err = {0};
    assert_int_equal(wm_tokenizer_decode(t, e.ids, e.n, 1, &out, &err), WM_OK);
    assert_string_equal(out.p, "a b <y> a"); /* no decoder: tokens joined by spaces, <x> skipped */
    wm_tok_buf_free(&out);
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

/* A byte-level BPE knowing every byte (no merges), written as tokenizer.json. */
static wm_tokenizer *bytelevel_tokenizer(void) {
    size_t cap = 1 << 16, n = 0;
    char *j = malloc(cap);
    assert_non_null(j);
    n += (size_t)snprintf(j + n, cap - n,
                          "{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
                          "\"decoder\":{\"type\":\"ByteLevel\"},\"post_processor\":{\"type\":\"ByteLevel\","
                          "\"trim_offsets\":true},\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        char u[8];
        size_t k = wm_u8_put(wm_bytelevel_cp[b], u);
        u[k] = 0;
        const char *esc = (u[0] == '"' || u[0] == '\\') ? "\\" : "";
        n += (size_t)snprintf(j + n, cap - n, "%s\"%s%s\":%d", b ? "," : "", esc, u, b);
    }
    snprintf(j + n, cap - n, "}}}");
    wm_tokenizer *t = load(j);
    free(j);
    return t;
}

static void test_bytelevel_invariants(void **state) {
    (void)state;
    wm_tokenizer *t = bytelevel_tokenizer();
    const char *texts[] = {"", " ", "Hello, world!  ", "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac",
                           "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 x\ty\r\n", "a\xcc\x81\xcc\xa3  b   ",
                           "\xe3\x80\x80\xc2\xa0tab\there"};
    wm_encoding e;
    wm_encoding_init(&e);
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        const char *s = texts[k];
        size_t len = strlen(s);
        encode(t, s, NULL, NULL, &e);
        size_t bytes = 0;
        for (size_t i = 0; i < e.n; i++) {
            assert_true(e.offsets[i].start <= e.offsets[i].end);
            assert_true(e.offsets[i].end <= len);
            assert_true(e.offsets[i].start == len || ((uint8_t)s[e.offsets[i].start] & 0xC0) != 0x80);
            assert_true(e.offsets[i].end == len || ((uint8_t)s[e.offsets[i].end] & 0xC0) != 0x80);
            assert_true(e.ids[i] >= 0 && e.ids[i] < 256);
            bytes++;
        }
        assert_int_equal(bytes, len); /* no merges: one token per byte */
        wm_tok_buf out = {0}, chunk = {0};
        wm_error err = {0};
        assert_int_equal(wm_tokenizer_decode(t, e.ids, e.n, 0, &out, &err), WM_OK);
        assert_int_equal(out.n, len);
        if (len) assert_memory_equal(out.p, s, len);
        wm_tok_stream ds;
        wm_tok_stream_init(&ds, t, 0);
        for (size_t i = 0; i < e.n; i++) {
            int emitted;
            assert_int_equal(wm_tok_stream_step(&ds, e.ids[i], &chunk, &emitted, &err), WM_OK);
            /* a chunk never ends inside a character */
            if (emitted) assert_true(wm_u8_valid(chunk.p, chunk.n));
        }
        assert_int_equal(chunk.n, len);
        if (len) assert_memory_equal(chunk.p, s, len);
        wm_tok_stream_free(&ds);
        wm_tok_buf_free(&out);
        wm_tok_buf_free(&chunk);
    }
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

static void test_truncation_padding_batch(void **state) {
    (void)state;
    wm_tokenizer *t = bytelevel_tokenizer();
    wm_encode_opts o = wm_encode_opts_default();
    o.use_defaults = 0;
    o.truncation = (wm_tok_truncation){.enabled = 1, .max_length = 5};
    wm_encoding e;
    wm_encoding_init(&e);
    encode(t, "abcdefgh", "xyz", &o, &e); /* longest first: 8 + 3 -> 3 + 2 */
    expect_ids(&e, (int32_t[]){'a', 'b', 'c', 'x', 'y'}, 5); /* the id of byte b is b */
    o.truncation.left = 1;
    encode(t, "abcdefgh", NULL, &o, &e);
    assert_int_equal(e.n, 5);
    assert_int_equal(e.ids[0], 'd');
    o.truncation.enabled = 0;
    o.padding = (wm_tok_padding){.enabled = 1, .length = 6, .pad_id = 255, .left = 1};
    snprintf(o.padding.pad_token, sizeof o.padding.pad_token, "<pad>");
    encode(t, "ab", NULL, &o, &e);
    expect_ids(&e, (int32_t[]){255, 255, 255, 255, 'a', 'b'}, 6);
    assert_int_equal(e.attention_mask[3], 0);
    assert_int_equal(e.attention_mask[4], 1);
    size_t n;
    assert_memory_equal(wm_encoding_token(&e, 0, &n), "<pad>", 5);
    /* a batch pads to its longest member */
    o.padding.length = 0;
    o.padding.left = 0;
    const char *texts[] = {"a", "abcd", "ab"};
    size_t lens[] = {1, 4, 2};
    wm_encoding outs[3];
    for (int i = 0; i < 3; i++) wm_encoding_init(&outs[i]);
    wm_error err = {0};
    assert_int_equal(wm_tokenizer_encode_batch(t, texts, lens, NULL, NULL, 3, &o, outs, &err), WM_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(outs[i].n, 4);
        assert_int_equal(outs[i].attention_mask[3], i == 1);
        wm_encoding_free(&outs[i]);
    }
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
}

static void write_file(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_load_dir(void **state) {
    (void)state;
    char dir[128];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "tok"), 0);
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    assert_int_equal(wm_tokenizer_load_dir(dir, &t, &e), WM_ERR_INPUT); /* nothing to load */
    assert_non_null(strstr(e.msg, "vocab.txt"));
    write_file(dir, "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\n,\n");
    write_file(dir, "tokenizer_config.json", "{\"do_lower_case\": true}");
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_tokenizer_load_dir(dir, &t, &e), WM_OK);
    wm_encoding enc;
    wm_encoding_init(&enc);
    encode(t, "HELLOs, World", NULL, NULL, &enc);
    expect_ids(&enc, (int32_t[]){2, 5, 6, 7, 1, 3}, 6);
    assert_int_equal(wm_tokenizer_special_id(t, WM_TOK_CLS), 2);
    assert_int_equal(wm_tokenizer_special_id(t, WM_TOK_PAD), 0);
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
    /* vocab.json + merges.txt: byte-level BPE */
    write_file(dir, "vocab.json", "{\"h\": 0, \"i\": 1, \"hi\": 2, \"\\u0120\": 3, \"\\u0120hi\": 4}");
    write_file(dir, "merges.txt", "#version: 0.2\nh i\n\xc4\xa0 hi\n");
    t = NULL;
    assert_int_equal(wm_tokenizer_load_dir(dir, &t, &e), WM_OK);
    wm_encoding_init(&enc);
    encode(t, "hi hi", NULL, NULL, &enc);
    expect_ids(&enc, (int32_t[]){2, 4}, 2);
    wm_encoding_free(&enc);
    wm_tokenizer_free(t);
    write_file(dir, "merges.txt", "h i x\n");
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_tokenizer_load_dir(dir, &t, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "merges.txt: line 1"));
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_merge_order),       cmocka_unit_test(test_bpe_unk_and_byte_fallback),
        cmocka_unit_test(test_unigram_best_path),     cmocka_unit_test(test_wordpiece_and_bert_pipeline),
        cmocka_unit_test(test_added_tokens),          cmocka_unit_test(test_bytelevel_invariants),
        cmocka_unit_test(test_truncation_padding_batch), cmocka_unit_test(test_load_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
