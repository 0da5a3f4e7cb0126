/*
 * Unit tests of the GGUF reader (src/gguf): tiny files written here, every
 * metadata type, tensor infos and data, split sets and folders, the
 * reference dequantizer on hand-made blocks, the checkpoint view (config
 * keys, HF names, the llama Q/K row permutation, Gemma norms) and the
 * hostile headers: truncated at every byte, huge counts, string lengths past
 * the end, overlapping / misaligned / out-of-bounds tensors, dims that
 * overflow, unknown value and tensor types, arrays of arrays, duplicate keys
 * and names, bad alignment, versions and UTF-8. Each bad file must give
 * WM_ERR_INPUT (or WM_ERR_UNSUPPORTED for a known but unhandled type) and a
 * message naming the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_tmpdir.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_hf.h"
#include "hf/tokenizer.h"

static char dir[64];

static int setup(void **s) {
    (void)s;
    return wm_test_tmpdir_make(dir, sizeof dir, "gguf");
}

static int teardown(void **s) {
    (void)s;
    return wm_test_tmpdir_remove(dir);
}

/* ------------------------------------------------------------------ a tiny GGUF writer */

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
} gb;

static void put(gb *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void u8(gb *b, uint8_t v) { put(b, &v, 1); }
static void u16(gb *b, uint16_t v) { put(b, &v, 2); }
static void u32(gb *b, uint32_t v) { put(b, &v, 4); }
static void u64(gb *b, uint64_t v) { put(b, &v, 8); }
static void f32(gb *b, float v) { put(b, &v, 4); }
static void str(gb *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(gb *b, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    u32(b, 3);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(gb *b, const char *k, uint32_t v) {
    str(b, k);
    u32(b, WM_GGUF_U32);
    u32(b, v);
}
static void kv_f32(gb *b, const char *k, float v) {
    str(b, k);
    u32(b, WM_GGUF_F32);
    f32(b, v);
}
static void kv_str(gb *b, const char *k, const char *v) {
    str(b, k);
    u32(b, WM_GGUF_STRING);
    str(b, v);
}
static void kv_bool(gb *b, const char *k, int v) {
    str(b, k);
    u32(b, WM_GGUF_BOOL);
    u8(b, (uint8_t)v);
}
static void kv_strs(gb *b, const char *k, const char *const *v, size_t n) {
    str(b, k);
    u32(b, WM_GGUF_ARRAY);
    u32(b, WM_GGUF_STRING);
    u64(b, n);
    for (size_t i = 0; i < n; i++) str(b, v[i]);
}
static void kv_i32s(gb *b, const char *k, const int32_t *v, size_t n) {
    str(b, k);
    u32(b, WM_GGUF_ARRAY);
    u32(b, WM_GGUF_I32);
    u64(b, n);
    put(b, v, 4 * n);
}
static void kv_f32s(gb *b, const char *k, const float *v, size_t n) {
    str(b, k);
    u32(b, WM_GGUF_ARRAY);
    u32(b, WM_GGUF_F32);
    u64(b, n);
    put(b, v, 4 * n);
}
static void tinfo(gb *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    str(b, name);
    u32(b, nd);
    for (uint32_t i = 0; i < nd; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}
static void pad(gb *b, size_t align) {
    while (b->n % align) u8(b, 0);
}

static wm_status open_buf(const gb *b, wm_gguf_file **f, wm_error *err) {
    memset(err, 0, sizeof *err);
    return wm_gguf_open_buffer(b->p, b->n, "t.gguf", f, err);
}

/* Opens b and expects failure with status st and msg containing needle. */
static void expect_bad(const gb *b, wm_status st, const char *needle) {
    wm_gguf_file *f = (wm_gguf_file *)1;
    wm_error err;
    wm_status s = open_buf(b, &f, &err);
    if (s != st || !strstr(err.msg, needle)) fail_msg("status %d, message '%s' (wanted %d, '%s')", s, err.msg, st, needle);
    assert_null(f);
}

static uint16_t h(float v) { /* exact halves only (values used here) */
    if (v == 0) return 0;
    uint32_t x;
    memcpy(&x, &v, 4);
    uint32_t sign = (x >> 16) & 0x8000, e = ((x >> 23) & 0xff) - 127 + 15, m = (x >> 13) & 0x3ff;
    return (uint16_t)(sign | e << 10 | m);
}

/* ------------------------------------------------------------------ a valid file */

/* Every metadata type, three tensors (F32 [4,2], Q8_0 [32,2], F16 [3]); *data_at receives the data offset. */
static gb valid_file(void) {
    gb b = {0};
    header(&b, 3, 16);
    str(&b, "k.u8"), u32(&b, WM_GGUF_U8), u8(&b, 200);
    str(&b, "k.i8"), u32(&b, WM_GGUF_I8), u8(&b, (uint8_t)-5);
    str(&b, "k.u16"), u32(&b, WM_GGUF_U16), u16(&b, 60000);
    str(&b, "k.i16"), u32(&b, WM_GGUF_I16), u16(&b, (uint16_t)-300);
    kv_u32(&b, "k.u32", 4000000000u);
    str(&b, "k.i32"), u32(&b, WM_GGUF_I32), u32(&b, (uint32_t)-70000);
    kv_f32(&b, "k.f32", 0.25f);
    kv_bool(&b, "k.bool", 1);
    kv_str(&b, "k.str", "héllo");
    str(&b, "k.u64"), u32(&b, WM_GGUF_U64), u64(&b, 1ull << 40);
    str(&b, "k.i64"), u32(&b, WM_GGUF_I64), u64(&b, (uint64_t)-(1ll << 40));
    str(&b, "k.f64"), u32(&b, WM_GGUF_F64);
    double d = -1.5;
    put(&b, &d, 8);
    const int32_t ai[3] = {1, -2, 3};
    kv_i32s(&b, "k.ai32", ai, 3);
    const char *as[2] = {"a", "bc"};
    kv_strs(&b, "k.astr", as, 2);
    str(&b, "k.aempty"), u32(&b, WM_GGUF_ARRAY), u32(&b, WM_GGUF_STRING), u64(&b, 0);
    kv_u32(&b, "general.alignment", 32);
    uint64_t ne_a[2] = {4, 2}, ne_b[2] = {32, 2}, ne_c[1] = {3};
    tinfo(&b, "a", 2, ne_a, WM_GGML_F32, 0);
    tinfo(&b, "b", 2, ne_b, WM_GGML_Q8_0, 32);
    tinfo(&b, "c", 1, ne_c, WM_GGML_F16, 128);
    pad(&b, 32);
    for (int i = 0; i < 8; i++) f32(&b, (float)i);
    pad(&b, 32);
    for (int r = 0; r < 2; r++) { /* Q8_0: d = 0.5 (row 0) / 2 (row 1), q = -16 .. 15 */
        u16(&b, h(r ? 2.0f : 0.5f));
        for (int q = -16; q < 16; q++) u8(&b, (uint8_t)(int8_t)q);
    }
    pad(&b, 32);
    u16(&b, h(1.0f)), u16(&b, h(-0.5f)), u16(&b, h(2.0f));
    return b;
}

static void test_valid(void **s) {
    (void)s;
    gb b = valid_file();
    wm_gguf_file *f;
    wm_error err;
    assert_int_equal(open_buf(&b, &f, &err), WM_OK);
    assert_int_equal(wm_gguf_version(f), 3);
    assert_int_equal(wm_gguf_alignment(f), 32);
    assert_int_equal(wm_gguf_kv_count(f), 16);
    assert_string_equal(wm_gguf_kv_at(f, 0)->key, "k.u8"); /* file order */
    int64_t v;
    int there;
    static const struct {
        const char *k;
        int64_t v;
    } ints[] = {{"k.u8", 200}, {"k.i8", -5}, {"k.u16", 60000}, {"k.i16", -300}, {"k.u32", 4000000000ll},
                {"k.i32", -70000}, {"k.u64", 1ll << 40}, {"k.i64", -(1ll << 40)}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        assert_int_equal(wm_gguf_get_int(f, ints[i].k, INT64_MIN, INT64_MAX, &v, &there, &err), WM_OK);
        assert_true(there);
        assert_int_equal(v, ints[i].v);
    }
    assert_int_equal(wm_gguf_get_int(f, "k.u8", 0, 100, &v, NULL, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "out of range"));
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_gguf_get_int(f, "k.f32", 0, 100, &v, NULL, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "FLOAT32"));
    double dv;
    assert_int_equal(wm_gguf_get_num(f, "k.f32", &dv, NULL, &err), WM_OK);
    assert_true(dv == 0.25);
    assert_int_equal(wm_gguf_get_num(f, "k.f64", &dv, NULL, &err), WM_OK);
    assert_true(dv == -1.5);
    assert_int_equal(wm_gguf_get_num(f, "k.i16", &dv, NULL, &err), WM_OK); /* integers read as numbers */
    assert_true(dv == -300);
    int bv = 0;
    assert_int_equal(wm_gguf_get_bool(f, "k.bool", &bv, NULL, &err), WM_OK);
    assert_int_equal(bv, 1);
    wm_gguf_str sv;
    assert_int_equal(wm_gguf_get_str(f, "k.str", &sv, &there, &err), WM_OK);
    assert_int_equal(sv.n, strlen("héllo"));
    assert_memory_equal(sv.p, "héllo", sv.n);
    assert_int_equal(wm_gguf_get_str(f, "absent", &sv, &there, &err), WM_OK);
    assert_false(there);
    const wm_gguf_kv *ai = wm_gguf_find(f, "k.ai32");
    assert_int_equal(ai->type, WM_GGUF_ARRAY);
    assert_int_equal(ai->elem, WM_GGUF_I32);
    assert_int_equal(ai->n, 3);
    assert_int_equal(wm_gguf_arr_int(ai, 1), -2);
    assert_int_equal(wm_gguf_check_array(f, ai, 0, &err), WM_OK);
    assert_int_equal(wm_gguf_check_array(f, ai, 1, &err), WM_ERR_INPUT);
    const wm_gguf_kv *as = wm_gguf_find(f, "k.astr");
    wm_gguf_str e1 = wm_gguf_arr_str(as, 1);
    assert_int_equal(e1.n, 2);
    assert_memory_equal(e1.p, "bc", 2);
    assert_int_equal(wm_gguf_find(f, "k.aempty")->n, 0);
    /* tensors */
    assert_int_equal(wm_gguf_tensor_count(f), 3);
    const wm_gguf_tensor *ta = wm_gguf_find_tensor(f, "a"), *tb = wm_gguf_find_tensor(f, "b"),
                         *tc = wm_gguf_find_tensor(f, "c");
    assert_non_null(ta), assert_non_null(tb), assert_non_null(tc);
    assert_null(wm_gguf_find_tensor(f, "d"));
    assert_int_equal(ta->numel, 8);
    assert_int_equal(ta->nbytes, 32);
    assert_int_equal(tb->row_bytes, 34);
    assert_int_equal(tb->nbytes, 68);
    assert_int_equal(tc->n_dims, 1);
    assert_int_equal(tc->ne[1], 1);
    float out[64];
    assert_int_equal(wm_gguf_dequant(ta, 0, 8, out, &err), WM_OK);
    for (int i = 0; i < 8; i++) assert_true(out[i] == (float)i);
    assert_int_equal(wm_gguf_dequant(tb, 0, 64, out, &err), WM_OK);
    for (int i = 0; i < 64; i++) assert_true(out[i] == (float)(i % 32 - 16) * (i < 32 ? 0.5f : 2.0f));
    assert_int_equal(wm_gguf_dequant(tb, 30, 5, out, &err), WM_OK); /* across a row and block boundary */
    assert_true(out[0] == 7.0f && out[1] == 7.5f && out[2] == -32.0f && out[4] == -28.0f);
    assert_int_equal(wm_gguf_dequant(tc, 0, 3, out, &err), WM_OK);
    assert_true(out[0] == 1.0f && out[1] == -0.5f && out[2] == 2.0f);
    assert_ptr_equal(wm_gguf_row(tb, 1), tb->data + 34);
    assert_null(wm_gguf_row(tb, 2));
    wm_gguf_close(f);
    free(b.p);
}

/* Every prefix of the valid file is refused cleanly. */
static void test_truncated_everywhere(void **s) {
    (void)s;
    gb b = valid_file();
    for (size_t n = 0; n < b.n; n++) {
        wm_gguf_file *f = NULL;
        wm_error err = {0};
        wm_status st = wm_gguf_open_buffer(b.p, n, "t.gguf", &f, &err);
        if (st != WM_ERR_INPUT) fail_msg("prefix of %zu bytes: status %d (%s)", n, st, err.msg);
        assert_null(f);
        assert_non_null(strstr(err.msg, "t.gguf"));
    }
    free(b.p);
}

/* ------------------------------------------------------------------ hostile headers */

static void test_header_errors(void **s) {
    (void)s;
    gb b = {0};
    put(&b, "GGUX", 4), u32(&b, 3), u64(&b, 0), u64(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "not a GGUF file");
    b.n = 0, put(&b, "GGUF", 4), u32(&b, 1), u64(&b, 0), u64(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "version 1 is not supported");
    b.n = 0, put(&b, "GGUF", 4), u32(&b, 4), u64(&b, 0), u64(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "version 4 is not supported");
    b.n = 0, put(&b, "GGUF", 4), u32(&b, 3u << 24), u64(&b, 0), u64(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "big-endian");
    b.n = 0, header(&b, 0, 1ull << 60);
    expect_bad(&b, WM_ERR_INPUT, "metadata count 1152921504606846976 cannot fit");
    b.n = 0, header(&b, 1ull << 62, 0);
    expect_bad(&b, WM_ERR_INPUT, "tensor count 4611686018427387904 cannot fit");
    /* a key length past the end */
    b.n = 0, header(&b, 0, 1), u64(&b, 1ull << 50), put(&b, "abcdefghijklmnop", 16);
    expect_bad(&b, WM_ERR_INPUT, "runs past the end");
    /* a string value length past the end */
    b.n = 0, header(&b, 0, 1), str(&b, "k"), u32(&b, WM_GGUF_STRING), u64(&b, UINT64_MAX), put(&b, "x", 1);
    expect_bad(&b, WM_ERR_INPUT, "key 'k'");
    /* an array count past the end, numeric and strings */
    b.n = 0, header(&b, 0, 1), str(&b, "k"), u32(&b, WM_GGUF_ARRAY), u32(&b, WM_GGUF_U64), u64(&b, 1ull << 61);
    expect_bad(&b, WM_ERR_INPUT, "runs past the end");
    b.n = 0, header(&b, 0, 1), str(&b, "k"), u32(&b, WM_GGUF_ARRAY), u32(&b, WM_GGUF_STRING), u64(&b, 1ull << 40);
    expect_bad(&b, WM_ERR_INPUT, "cannot fit");
    /* unknown value types, arrays of arrays */
    b.n = 0, header(&b, 0, 1), str(&b, "k"), u32(&b, 13), u32(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "unknown value type 13");
    b.n = 0, header(&b, 0, 1), str(&b, "k"), u32(&b, WM_GGUF_ARRAY), u32(&b, 77), u64(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "array of unknown value type 77");
    b.n = 0, header(&b, 0, 1), str(&b, "k"), u32(&b, WM_GGUF_ARRAY), u32(&b, WM_GGUF_ARRAY), u64(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "array of arrays");
    /* duplicate, empty and non-UTF-8 keys; a BOOL of 2 */
    b.n = 0, header(&b, 0, 2), kv_u32(&b, "a.b", 1), kv_u32(&b, "a.b", 2);
    expect_bad(&b, WM_ERR_INPUT, "key 'a.b' is listed twice");
    b.n = 0, header(&b, 0, 1), kv_u32(&b, "", 1);
    expect_bad(&b, WM_ERR_INPUT, "empty key");
    b.n = 0, header(&b, 0, 1), kv_u32(&b, "a\xff", 1);
    expect_bad(&b, WM_ERR_INPUT, "not valid UTF-8");
    b.n = 0, header(&b, 0, 1), kv_bool(&b, "k", 2);
    expect_bad(&b, WM_ERR_INPUT, "BOOL holds 2");
    /* alignment */
    b.n = 0, header(&b, 0, 1), kv_u32(&b, "general.alignment", 48);
    expect_bad(&b, WM_ERR_INPUT, "not a power of two");
    b.n = 0, header(&b, 0, 1), kv_f32(&b, "general.alignment", 32);
    expect_bad(&b, WM_ERR_INPUT, "UINT32 expected");
    free(b.p);
}

/* One tensor info (plus data of `data` bytes) after an empty metadata section. */
static gb one_tensor(const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off, size_t data) {
    gb b = {0};
    header(&b, 1, 0);
    tinfo(&b, name, nd, ne, type, off);
    pad(&b, 32);
    for (size_t i = 0; i < data; i++) u8(&b, 0);
    return b;
}

static void test_tensor_errors(void **s) {
    (void)s;
    uint64_t ne[5] = {8, 2, 1, 1, 1};
    gb b = one_tensor("t", 2, ne, 99, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "tensor 't': unknown tensor type 99");
    free(b.p);
    b = one_tensor("t", 2, ne, 4, 0, 64); /* Q4_2: removed from ggml */
    expect_bad(&b, WM_ERR_INPUT, "unknown tensor type 4");
    free(b.p);
    uint64_t big[2] = {1ull << 40, 1ull << 40};
    b = one_tensor("t", 2, big, WM_GGML_F32, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "dimensions overflow");
    free(b.p);
    uint64_t neg[1] = {1ull << 63};
    b = one_tensor("t", 1, neg, WM_GGML_F32, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "dimensions overflow");
    free(b.p);
    uint64_t zero_row[3] = {0, 1ull << 62, 1ull << 62}; /* no elements, yet rows overflow */
    b = one_tensor("t", 3, zero_row, WM_GGML_F32, 0, 0);
    expect_bad(&b, WM_ERR_INPUT, "overflow");
    free(b.p);
    b = one_tensor("t", 0, ne, WM_GGML_F32, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "0 dimensions");
    free(b.p);
    b = one_tensor("t", 5, ne, WM_GGML_F32, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "5 dimensions");
    free(b.p);
    uint64_t half[1] = {16};
    b = one_tensor("t", 1, half, WM_GGML_Q8_0, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "not a whole number of Q8_0 blocks");
    free(b.p);
    b = one_tensor("t", 2, ne, WM_GGML_F32, 4, 64);
    expect_bad(&b, WM_ERR_INPUT, "offset 4 is not a multiple of the alignment 32");
    free(b.p);
    b = one_tensor("t", 2, ne, WM_GGML_F32, 32, 64); /* 64 bytes at 32 in a 64-byte section */
    expect_bad(&b, WM_ERR_INPUT, "run past its end");
    free(b.p);
    b = one_tensor("t", 2, ne, WM_GGML_F32, UINT64_MAX - 31, 64);
    expect_bad(&b, WM_ERR_INPUT, "run past its end");
    free(b.p);
    b = one_tensor("", 2, ne, WM_GGML_F32, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "name of 0 bytes");
    free(b.p);
    char longname[80];
    memset(longname, 'x', 65);
    longname[65] = 0;
    b = one_tensor(longname, 2, ne, WM_GGML_F32, 0, 64);
    expect_bad(&b, WM_ERR_INPUT, "name of 65 bytes");
    free(b.p);
    b = one_tensor("t\xc0\x80", 2, ne, WM_GGML_F32, 0, 64); /* an overlong NUL */
    expect_bad(&b, WM_ERR_INPUT, "not valid UTF-8");
    free(b.p);
    /* two tensors: overlapping, duplicate names */
    b = (gb){0};
    header(&b, 2, 0);
    tinfo(&b, "a", 2, ne, WM_GGML_F32, 0);
    tinfo(&b, "b", 2, ne, WM_GGML_F32, 32);
    pad(&b, 32);
    for (int i = 0; i < 128; i++) u8(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "tensors 'a' and 'b' overlap");
    b.n = 0;
    header(&b, 2, 0);
    tinfo(&b, "a", 2, ne, WM_GGML_F32, 0);
    tinfo(&b, "a", 2, ne, WM_GGML_F32, 64);
    pad(&b, 32);
    for (int i = 0; i < 128; i++) u8(&b, 0);
    expect_bad(&b, WM_ERR_INPUT, "tensor 'a' is listed twice");
    /* a known type the dequantizer does not handle: the file opens, dequantizing is refused by name */
    b.n = 0;
    uint64_t iq[1] = {256};
    header(&b, 1, 0);
    tinfo(&b, "q", 1, iq, WM_GGML_IQ2_XXS, 0);
    pad(&b, 32);
    for (int i = 0; i < 66; i++) u8(&b, 0);
    wm_gguf_file *f;
    wm_error err;
    assert_int_equal(open_buf(&b, &f, &err), WM_OK);
    float out[256];
    assert_int_equal(wm_gguf_dequant(wm_gguf_find_tensor(f, "q"), 0, 256, out, &err), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "type IQ2_XXS is not supported"));
    wm_gguf_close(f);
    free(b.p);
}

/* ------------------------------------------------------------------ the dequantizer on hand-made blocks */

static void test_dequant_blocks(void **s) {
    (void)s;
    float y[256];
    uint8_t blk[256];
    /* Q4_0: d = 2, nibbles 0..15 -> (q - 8) * 2 */
    memset(blk, 0, sizeof blk);
    uint16_t d = h(2.0f), m = h(-1.0f);
    memcpy(blk, &d, 2);
    for (int j = 0; j < 16; j++) blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
    wm_ggml_dequant_blocks(WM_GGML_Q4_0, blk, 1, y);
    for (int j = 0; j < 16; j++) assert_true(y[j] == (float)(j - 8) * 2 && y[j + 16] == (float)(7 - j) * 2);
    /* Q4_1: d = 2, m = -1 */
    memcpy(blk, &d, 2), memcpy(blk + 2, &m, 2);
    for (int j = 0; j < 16; j++) blk[4 + j] = (uint8_t)(j | (15 - j) << 4);
    wm_ggml_dequant_blocks(WM_GGML_Q4_1, blk, 1, y);
    for (int j = 0; j < 16; j++) assert_true(y[j] == (float)j * 2 - 1 && y[j + 16] == (float)(15 - j) * 2 - 1);
    /* Q5_0: fifth bits from qh: element j bit j, element j + 16 bit j + 16 */
    memcpy(blk, &d, 2);
    uint32_t qh = 0x0001ffffu; /* elements 0..15 and 16 have the high bit */
    memcpy(blk + 2, &qh, 4);
    for (int j = 0; j < 16; j++) blk[6 + j] = (uint8_t)(j | j << 4);
    wm_ggml_dequant_blocks(WM_GGML_Q5_0, blk, 1, y);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)((j | 16) - 16) * 2);
        assert_true(y[j + 16] == (float)((j | (j == 0 ? 16 : 0)) - 16) * 2);
    }
    /* Q5_1 */
    memcpy(blk, &d, 2), memcpy(blk + 2, &m, 2), memcpy(blk + 4, &qh, 4);
    for (int j = 0; j < 16; j++) blk[8 + j] = (uint8_t)(j | j << 4);
    wm_ggml_dequant_blocks(WM_GGML_Q5_1, blk, 1, y);
    for (int j = 0; j < 16; j++) assert_true(y[j] == (float)(j | 16) * 2 - 1);
    /* Q6_K: d = 1, scales 1..16, every 6-bit value 33 -> 1 * scale */
    memset(blk, 0, sizeof blk);
    for (int j = 0; j < 128; j++) blk[j] = 0x11; /* low nibbles 1 */
    for (int j = 0; j < 64; j++) blk[128 + j] = 0xaa; /* high bits 2 -> 32 + 1 = 33 */
    for (int j = 0; j < 16; j++) blk[192 + j] = (uint8_t)(j + 1);
    uint16_t one = h(1.0f);
    memcpy(blk + 208, &one, 2);
    wm_ggml_dequant_blocks(WM_GGML_Q6_K, blk, 1, y);
    for (int i = 0; i < 256; i++) assert_true(y[i] == (float)(i / 16 + 1));
    /* Q4_K: d = 1, dmin = 1; sub-block j: scale j + 1, min j (6-bit packing), nibbles 3 */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &one, 2), memcpy(blk + 2, &one, 2);
    uint8_t *sc = blk + 4;
    for (int j = 0; j < 4; j++) sc[j] = (uint8_t)(j + 1), sc[j + 4] = (uint8_t)j;
    for (int j = 4; j < 8; j++) sc[j + 4] = (uint8_t)(((j + 1) & 0xf) | (j & 0xf) << 4); /* high bits 0 */
    for (int j = 0; j < 128; j++) blk[16 + j] = 0x33;
    wm_ggml_dequant_blocks(WM_GGML_Q4_K, blk, 1, y);
    for (int i = 0; i < 256; i++) assert_true(y[i] == (float)(i / 32 + 1) * 3 - (float)(i / 32));
    /* partial ranges agree with whole blocks */
    float part[300];
    wm_ggml_dequant_range(WM_GGML_Q4_K, blk, 37, 100, part);
    assert_memory_equal(part, y + 37, 100 * sizeof(float));
}

/* ------------------------------------------------------------------ split sets and folders */

static void write_file(const char *name, const gb *b) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b->p, 1, b->n, f), b->n);
    fclose(f);
}

static gb split_part(int no, int count, int total_tensors, const char *tname, int extra_kv) {
    gb b = {0};
    header(&b, 1, 3 + (uint64_t)extra_kv);
    str(&b, "split.no"), u32(&b, WM_GGUF_U16), u16(&b, (uint16_t)no);
    str(&b, "split.count"), u32(&b, WM_GGUF_U16), u16(&b, (uint16_t)count);
    str(&b, "split.tensors.count"), u32(&b, WM_GGUF_I32), u32(&b, (uint32_t)total_tensors);
    if (extra_kv) kv_str(&b, "general.architecture", "llama");
    uint64_t ne[1] = {8};
    tinfo(&b, tname, 1, ne, WM_GGML_F32, 0);
    pad(&b, 32);
    for (int i = 0; i < 8; i++) f32(&b, (float)(no * 10 + i));
    return b;
}

static void test_split_sets(void **s) {
    (void)s;
    gb p1 = split_part(0, 2, 2, "x", 1), p2 = split_part(1, 2, 2, "y", 0);
    write_file("m-00001-of-00002.gguf", &p1);
    write_file("m-00002-of-00002.gguf", &p2);
    char path[256];
    wm_gguf_file *f;
    wm_error err = {0};
    for (int k = 0; k < 3; k++) { /* first file, second file, folder */
        if (k == 2) snprintf(path, sizeof path, "%s", dir);
        else snprintf(path, sizeof path, "%s/m-0000%d-of-00002.gguf", dir, k + 1);
        assert_true(wm_gguf_is_path(path));
        if (wm_gguf_open(path, &f, &err)) fail_msg("%s: %s", path, err.msg);
        assert_int_equal(wm_gguf_shard_count(f), 2);
        assert_int_equal(wm_gguf_tensor_count(f), 2);
        assert_non_null(wm_gguf_find(f, "general.architecture"));
        const wm_gguf_tensor *y = wm_gguf_find_tensor(f, "y");
        assert_non_null(y);
        assert_int_equal(y->shard, 1);
        float v[8];
        assert_int_equal(wm_gguf_dequant(y, 0, 8, v, &err), WM_OK);
        assert_true(v[3] == 13.0f);
        wm_gguf_close(f);
    }
    /* the same tensor in both files */
    gb p2b = split_part(1, 2, 2, "x", 0);
    write_file("m-00002-of-00002.gguf", &p2b);
    snprintf(path, sizeof path, "%s/m-00001-of-00002.gguf", dir);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_gguf_open(path, &f, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "tensor 'x' is in both"));
    /* split.no disagreeing with the name */
    gb p2c = split_part(0, 2, 2, "y", 0);
    write_file("m-00002-of-00002.gguf", &p2c);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_gguf_open(path, &f, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "the name says 2 of 2"));
    /* a missing file of the set */
    snprintf(path, sizeof path, "%s/m-00002-of-00002.gguf", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/m-00001-of-00002.gguf", dir);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_gguf_open(path, &f, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "file 2 of the split set"));
    /* a folder with two unrelated files */
    gb one = valid_file();
    write_file("other.gguf", &one);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_gguf_open(dir, &f, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "name the file with -m"));
    /* a lone file whose metadata says it is split */
    gb lone = split_part(0, 3, 3, "x", 0);
    write_file("lone.gguf", &lone);
    snprintf(path, sizeof path, "%s/lone.gguf", dir);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_gguf_open(path, &f, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "split into 3 files"));
    free(p1.p), free(p2.p), free(p2b.p), free(p2c.p), free(one.p), free(lone.p);
}

/* ------------------------------------------------------------------ the checkpoint view */

/* A one-layer llama (H 8, 2 heads, 1 kv head, head 4, I 16, V 6) with a gpt2-style vocabulary. */
static gb tiny_llama(const char *arch, const char *extra_tensor, const char *tokmodel) {
    static const char *const leaves[] = {"token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight",
                                         "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                                         "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
                                         "blk.0.ffn_up.weight", "blk.0.ffn_down.weight", NULL};
    static const uint64_t dims[][2] = {{8, 6}, {8, 1}, {8, 1}, {8, 8}, {8, 4}, {8, 4}, {8, 8}, {8, 1}, {8, 16}, {8, 16}, {16, 8}};
    size_t nt = 11 + (extra_tensor != NULL);
    gb b = {0};
    char k[64];
    int gemma = !strcmp(arch, "gemma3");
    header(&b, nt, 16 + (uint64_t)gemma);
    kv_str(&b, "general.architecture", arch);
    snprintf(k, sizeof k, "%s.block_count", arch), kv_u32(&b, k, 1);
    snprintf(k, sizeof k, "%s.context_length", arch), kv_u32(&b, k, 64);
    snprintf(k, sizeof k, "%s.embedding_length", arch), kv_u32(&b, k, 8);
    snprintf(k, sizeof k, "%s.feed_forward_length", arch), kv_u32(&b, k, 16);
    snprintf(k, sizeof k, "%s.attention.head_count", arch), kv_u32(&b, k, 2);
    snprintf(k, sizeof k, "%s.attention.head_count_kv", arch), kv_u32(&b, k, 1);
    snprintf(k, sizeof k, "%s.rope.freq_base", arch), kv_f32(&b, k, 10000.0f);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch), kv_f32(&b, k, 1e-5f);
    if (gemma) snprintf(k, sizeof k, "%s.attention.sliding_window", arch), kv_u32(&b, k, 16);
    const char *toks[6] = {"<s>", "</s>", "a", "b", "ab", "\xc4\xa0"};
    const int32_t types[6] = {3, 3, 1, 1, 1, 1};
    const float scores[6] = {0, 0, -1, -2, -0.5f, -3};
    const char *merges[1] = {"a b"};
    kv_str(&b, "tokenizer.ggml.model", tokmodel);
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 6);
    kv_i32s(&b, "tokenizer.ggml.token_type", types, 6);
    kv_f32s(&b, "tokenizer.ggml.scores", scores, 6);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 0);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 1);
    uint64_t off = 0, offs[12];
    for (size_t i = 0; i < nt; i++) {
        const char *nm = i < 11 ? leaves[i] : extra_tensor;
        uint64_t ne[2] = {dims[i < 11 ? i : 1][0], dims[i < 11 ? i : 1][1]};
        uint32_t nd = ne[1] == 1 ? 1 : 2;
        offs[i] = off;
        tinfo(&b, nm, nd, ne, WM_GGML_F32, off);
        off += (ne[0] * ne[1] * 4 + 31) / 32 * 32;
    }
    pad(&b, 32);
    size_t base = b.n;
    for (size_t i = 0; i < nt; i++) {
        uint64_t ne0 = dims[i < 11 ? i : 1][0], ne1 = dims[i < 11 ? i : 1][1];
        while (b.n < base + offs[i]) u8(&b, 0);
        for (uint64_t r = 0; r < ne1; r++)
            for (uint64_t c = 0; c < ne0; c++) f32(&b, (float)(100 * r + c)); /* value = 100 * row + column */
    }
    pad(&b, 32);
    return b;
}

static void open_ckpt(const gb *b, const char *name, wm_hf_checkpoint *ck, wm_st_file **st, wm_status want,
                      const char *needle) {
    write_file(name, b);
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    wm_error err = {0};
    wm_status s = wm_gguf_open_checkpoint(p, ck, st, &err);
    if (s != want || (needle && !strstr(err.msg, needle))) fail_msg("status %d '%s' (wanted %d '%s')", s, err.msg, want, needle);
}

static void test_checkpoint_llama(void **s) {
    (void)s;
    gb b = tiny_llama("llama", NULL, "gpt2");
    wm_hf_checkpoint ck;
    wm_st_file *st;
    open_ckpt(&b, "llama.gguf", &ck, &st, WM_OK, NULL);
    const wm_hf_config *c = &ck.config;
    assert_string_equal(c->model_type, "llama");
    assert_int_equal(c->hidden_size, 8);
    assert_int_equal(c->num_layers, 1);
    assert_int_equal(c->num_heads, 2);
    assert_int_equal(c->num_kv_heads, 1);
    assert_int_equal(c->intermediate_size, 16);
    assert_int_equal(c->max_positions, 64);
    assert_int_equal(c->vocab_size, 6);
    assert_true(c->norm_eps == (double)1e-5f);
    assert_true(c->rope.theta == 10000.0);
    assert_int_equal(c->tie_word_embeddings, 1); /* no output.weight */
    assert_int_equal(c->bos.v[0], 0);
    assert_int_equal(c->eos.v[0], 1);
    assert_string_equal(ck.format, "gguf");
    /* HF names and shapes */
    const wm_st_tensor *q = wm_st_find(st, "model.layers.0.self_attn.q_proj.weight");
    const wm_st_tensor *k = wm_st_find(st, "model.layers.0.self_attn.k_proj.weight");
    const wm_st_tensor *dn = wm_st_find(st, "model.layers.0.mlp.down_proj.weight");
    assert_non_null(q), assert_non_null(k), assert_non_null(dn);
    assert_non_null(wm_st_find(st, "model.layers.0.post_attention_layernorm.weight"));
    assert_int_equal(dn->shape[0], 8), assert_int_equal(dn->shape[1], 16);
    /* Q: 2 heads of 4 rows; llama.cpp stored HF row (h, i, j) at h*4 + 2j + i: HF rows 0,1,2,3 <- GGUF 0,2,1,3 */
    float v[64];
    q->src->read(q->src->ctx, 0, 64, v);
    static const int want_q[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int r = 0; r < 8; r++)
        for (int col = 0; col < 8; col++) assert_true(v[r * 8 + col] == (float)(100 * want_q[r] + col));
    k->src->read(k->src->ctx, 10, 12, v); /* a range across rows: elements 10..21 */
    for (int i = 0; i < 12; i++) {
        int e = 10 + i, r = e / 8, col = e % 8;
        assert_true(v[i] == (float)(100 * want_q[r] + col));
    }
    assert_string_equal(wm_gguf_st_conversion(q), "Q/K rows un-permuted");
    const wm_st_tensor *vv = wm_st_find(st, "model.layers.0.self_attn.v_proj.weight");
    vv->src->read(vv->src->ctx, 0, 32, v);
    for (int i = 0; i < 32; i++) assert_true(v[i] == (float)(100 * (i / 8) + i % 8)); /* V is not permuted */
    /* the made tokenizer loads and encodes */
    const wm_hf_made_file *tj = NULL;
    for (size_t i = 0; i < ck.n_made; i++)
        if (!strcmp(ck.made[i].name, "tokenizer.json")) tj = &ck.made[i];
    assert_non_null(tj);
    wm_tokenizer *tok;
    wm_error err = {0};
    if (wm_tokenizer_load_json(tj->text, tj->len, "tokenizer.json", &tok, &err)) fail_msg("%s", err.msg);
    wm_encoding e;
    wm_encoding_init(&e);
    assert_int_equal(wm_tokenizer_encode(tok, "ab</s>", 6, NULL, 0, NULL, &e, &err), WM_OK);
    assert_int_equal(e.n, 2);
    assert_int_equal(e.ids[0], 4);
    assert_int_equal(e.ids[1], 1);
    wm_encoding_free(&e);
    wm_tokenizer_free(tok);
    assert_true(ck.has_tok);
    assert_string_equal(ck.tok.bos_token, "<s>");
    wm_st_close(st);
    wm_hf_checkpoint_free(&ck);
    free(b.p);
}

static void test_checkpoint_gemma_and_errors(void **s) {
    (void)s;
    wm_hf_checkpoint ck;
    wm_st_file *st;
    /* gemma3: norms - 1, extra norms mapped, sliding pattern of llama.cpp, SentencePiece-style tokenizer */
    gb b = tiny_llama("gemma3", "blk.0.post_ffw_norm.weight", "llama");
    open_ckpt(&b, "gemma.gguf", &ck, &st, WM_OK, NULL);
    assert_string_equal(ck.config.model_type, "gemma3_text");
    assert_int_equal(ck.config.sliding_window, 16);
    assert_int_equal(ck.config.n_layer_types, 1);
    const wm_st_tensor *n = wm_st_find(st, "model.layers.0.pre_feedforward_layernorm.weight");
    const wm_st_tensor *p = wm_st_find(st, "model.layers.0.post_feedforward_layernorm.weight");
    const wm_st_tensor *q = wm_st_find(st, "model.layers.0.self_attn.q_proj.weight");
    assert_non_null(n), assert_non_null(p), assert_non_null(q);
    float v[64];
    n->src->read(n->src->ctx, 0, 8, v);
    for (int i = 0; i < 8; i++) assert_true(v[i] == (float)i - 1.0f);
    q->src->read(q->src->ctx, 0, 64, v); /* no Q/K permutation outside llama */
    for (int i = 0; i < 64; i++) assert_true(v[i] == (float)(100 * (i / 8) + i % 8));
    wm_st_close(st);
    wm_hf_checkpoint_free(&ck);
    free(b.p);
    /* an architecture without a table, a tensor no table names, an unknown tokenizer model */
    b = tiny_llama("bloom", NULL, "gpt2");
    open_ckpt(&b, "bloom.gguf", &ck, &st, WM_ERR_UNSUPPORTED, "'bloom' is not supported");
    free(b.p);
    b = tiny_llama("llama", "rope_freqs.weight", "gpt2");
    open_ckpt(&b, "rf.gguf", &ck, &st, WM_ERR_UNSUPPORTED, "tensor 'rope_freqs.weight' has no role");
    free(b.p);
    b = tiny_llama("llama", "blk.3.attn_q.weight", "gpt2");
    open_ckpt(&b, "layer.gguf", &ck, &st, WM_ERR_INPUT, "layer 3, but block_count is 1");
    free(b.p);
    b = tiny_llama("llama", NULL, "bert");
    open_ckpt(&b, "bert.gguf", &ck, &st, WM_ERR_UNSUPPORTED, "tokenizer 'bert' is not supported");
    free(b.p);
}

/* A vocabulary whose rebuilt merges would grow with the square of its size is refused, quickly. */
static void test_hostile_vocab(void **s) {
    (void)s;
    enum { M = 1600 };
    gb b = {0};
    header(&b, 0, 6);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "llama.block_count", 1);
    kv_u32(&b, "llama.embedding_length", 8);
    kv_u32(&b, "llama.attention.head_count", 2);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    str(&b, "tokenizer.ggml.tokens"), u32(&b, WM_GGUF_ARRAY), u32(&b, WM_GGUF_STRING), u64(&b, M);
    char *a = malloc(M + 1);
    memset(a, 'a', M);
    for (int i = 1; i <= M; i++) u64(&b, (uint64_t)i), put(&b, a, (size_t)i); /* a, aa, aaa, ... */
    free(a);
    b.p[4 + 4 + 8] = 7; /* 7 pairs: add the scores */
    float *sc = calloc(M, sizeof *sc);
    kv_f32s(&b, "tokenizer.ggml.scores", sc, M);
    free(sc);
    wm_hf_checkpoint ck;
    open_ckpt(&b, "hostile_vocab.gguf", &ck, NULL, WM_ERR_INPUT, "hostile vocabulary");
    free(b.p);
}

/* A vocabulary without token types or special ids: no added tokens at all, merges rebuilt from the scores. */
static void test_plain_vocab(void **s) {
    (void)s;
    gb b = {0};
    header(&b, 0, 6);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "llama.block_count", 1);
    kv_u32(&b, "llama.embedding_length", 8);
    kv_u32(&b, "llama.attention.head_count", 2);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    const char *toks[5] = {"a", "b", "ab", "\xe2\x96\x81", ("\xe2\x96\x81" "ab")};
    const float sc[5] = {-1, -2, -0.5f, -3, -0.25f};
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 5);
    b.p[4 + 4 + 8] = 7;
    kv_f32s(&b, "tokenizer.ggml.scores", sc, 5);
    wm_hf_checkpoint ck;
    open_ckpt(&b, "plain.gguf", &ck, NULL, WM_OK, NULL);
    const wm_hf_made_file *tj = NULL;
    for (size_t i = 0; i < ck.n_made; i++)
        if (!strcmp(ck.made[i].name, "tokenizer.json")) tj = &ck.made[i];
    assert_non_null(tj);
    assert_non_null(strstr(tj->text, "\"added_tokens\": []"));
    wm_tokenizer *tok;
    wm_error err = {0};
    if (wm_tokenizer_load_json(tj->text, tj->len, "tokenizer.json", &tok, &err)) fail_msg("%s", err.msg);
    wm_encoding e;
    wm_encoding_init(&e);
    assert_int_equal(wm_tokenizer_encode(tok, "ab", 2, NULL, 0, NULL, &e, &err), WM_OK);
    assert_int_equal(e.n, 1);
    assert_int_equal(e.ids[0], 4); /* "▁ab": Metaspace, then the rebuilt merges a+b, ▁+ab */
    wm_encoding_free(&e);
    wm_tokenizer_free(tok);
    wm_hf_checkpoint_free(&ck);
    free(b.p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),          cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_header_errors),  cmocka_unit_test(test_tensor_errors),
        cmocka_unit_test(test_dequant_blocks), cmocka_unit_test(test_split_sets),
        cmocka_unit_test(test_checkpoint_llama), cmocka_unit_test(test_checkpoint_gemma_and_errors),
        cmocka_unit_test(test_hostile_vocab),    cmocka_unit_test(test_plain_vocab),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
