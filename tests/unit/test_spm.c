/*
 * Unit tests of the SentencePiece ModelProto reader (src/hf/spm_model.c) on hand-made protobuf images: fields
 * and their defaults, unknown fields skipped by wire type, and refusals naming the field (truncation, a length
 * past the end, a bad wire type, ids outside the pieces, a second UNKNOWN piece, WORD models).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "hf/spm_model.h"

typedef struct buf {
    uint8_t b[4096];
    size_t n;
} buf;

static void put(buf *o, const void *p, size_t n) {
    assert_true(o->n + n <= sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void varint(buf *o, uint64_t v) {
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        put(o, &c, 1);
    } while (v);
}
static void tag(buf *o, uint32_t field, int wt) { varint(o, (uint64_t)field << 3 | (uint64_t)wt); }
static void bytes(buf *o, uint32_t field, const void *p, size_t n) {
    tag(o, field, 2);
    varint(o, n);
    put(o, p, n);
}
static void piece(buf *o, const char *s, float score, int type) {
    buf p = {.n = 0};
    bytes(&p, 1, s, strlen(s));
    tag(&p, 2, 5);
    put(&p, &score, 4); /* little-endian hosts */
    tag(&p, 3, 0);
    varint(&p, (uint64_t)type);
    bytes(o, 1, p.b, p.n);
}
static void base(buf *o) {
    piece(o, "<unk>", 0.0f, WM_SPM_UNKNOWN);
    piece(o, "<s>", 0.0f, WM_SPM_CONTROL);
    piece(o, "</s>", 0.0f, WM_SPM_CONTROL);
    piece(o, "\xe2\x96\x81" "a", -1.5f, WM_SPM_NORMAL);
    piece(o, "b", -2.0f, WM_SPM_NORMAL);
}

static void test_fields(void **state) {
    (void)state;
    buf o = {.n = 0};
    base(&o);
    buf tr = {.n = 0};
    tag(&tr, 3, 0), varint(&tr, WM_SPM_BPE);
    tag(&tr, 35, 0), varint(&tr, 1);
    tag(&tr, 43, 0), varint(&tr, 4);
    tag(&tr, 99, 5), put(&tr, "\0\0\0\0", 4); /* unknown fields of every wire type are skipped */
    tag(&tr, 98, 1), put(&tr, "\0\0\0\0\0\0\0\0", 8);
    bytes(&tr, 97, "xyz", 3);
    tag(&tr, 96, 0), varint(&tr, UINT64_MAX);
    bytes(&o, 2, tr.b, tr.n);
    buf nz = {.n = 0};
    bytes(&nz, 1, "nmt_nfkc", 8);
    bytes(&nz, 2, "\x01\x02\x00\x03", 4);
    tag(&nz, 3, 0), varint(&nz, 0);
    bytes(&o, 3, nz.b, nz.n);
    bytes(&o, 4, "\x0a\x00", 2); /* self_test_data: skipped */
    wm_spm_model m;
    wm_error e = {0};
    assert_int_equal(wm_spm_parse(o.b, o.n, "t.model", &m, &e), WM_OK);
    assert_int_equal(m.n, 5);
    assert_string_equal(m.pieces[3].s, "\xe2\x96\x81" "a");
    assert_true(m.pieces[3].score == -1.5f && m.pieces[4].score == -2.0f);
    assert_int_equal(m.pieces[1].type, WM_SPM_CONTROL);
    assert_int_equal(m.model_type, WM_SPM_BPE);
    assert_true(m.byte_fallback);
    assert_int_equal(m.unk_id, 0);
    assert_int_equal(m.eos_id, 2);
    assert_int_equal(m.pad_id, 4);
    assert_true(m.split_by_whitespace && !m.treat_whitespace_as_suffix);
    assert_string_equal(m.norm_name, "nmt_nfkc");
    assert_int_equal(m.charsmap_len, 4);
    assert_memory_equal(m.charsmap, "\x01\x02\x00\x03", 4);
    assert_true(!m.add_dummy_prefix && m.remove_extra_whitespaces && m.escape_whitespaces);
    assert_string_equal(m.unk_surface, " \xe2\x81\x87 ");
    wm_spm_free(&m);
}

static void refused(const buf *o, const char *needle) {
    wm_spm_model m;
    wm_error e = {0};
    wm_status st = wm_spm_parse(o->b, o->n, "bad.model", &m, &e);
    assert_int_not_equal(st, WM_OK);
    assert_null(m.pieces);
    assert_non_null(strstr(e.msg, "bad.model"));
    if (!strstr(e.msg, needle)) fail_msg("'%s' does not name '%s'", e.msg, needle);
}

static void test_refusals(void **state) {
    (void)state;
    buf o = {.n = 0};
    base(&o);
    buf t = o;
    t.n -= 3;
    refused(&t, "pieces"); /* truncated inside the last piece */
    t = o;
    tag(&t, 1, 2), varint(&t, 1u << 30);
    refused(&t, "runs past the end");
    t = o;
    tag(&t, 7, 3);
    refused(&t, "wire type 3");
    t = o;
    tag(&t, 1, 5), put(&t, "abcd", 4);
    refused(&t, "pieces: wire type 5");
    buf tr = {.n = 0};
    tag(&tr, 40, 0), varint(&tr, 9);
    t = o;
    bytes(&t, 2, tr.b, tr.n);
    refused(&t, "trainer_spec.unk_id");
    tr.n = 0;
    tag(&tr, 42, 0), varint(&tr, (uint64_t)-5);
    t = o;
    bytes(&t, 2, tr.b, tr.n);
    refused(&t, "trainer_spec.eos_id");
    tr.n = 0;
    tag(&tr, 3, 0), varint(&tr, WM_SPM_WORD);
    t = o;
    bytes(&t, 2, tr.b, tr.n);
    refused(&t, "WORD");
    t = o;
    piece(&t, "<unk2>", 0.0f, WM_SPM_UNKNOWN);
    refused(&t, "second piece of type UNKNOWN");
    t = o;
    piece(&t, "\xff", 0.0f, WM_SPM_NORMAL);
    refused(&t, "UTF-8");
    t = o;
    piece(&t, "c", 0.0f, 9);
    refused(&t, "type");
    t.n = 0;
    refused(&t, "empty");
    t = o;
    tag(&t, 5, 0);
    put(&t, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    refused(&t, "varint");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fields), cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
