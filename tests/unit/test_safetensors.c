/*
 * Unit tests of the safetensors reader and writer: round trips over every
 * dtype family, scalars and zero-size dims, metadata, sharded checkpoints,
 * and the adversarial headers of untrusted-input.md items 10-13 (each must
 * give WM_ERR_INPUT with a message naming the reason).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "unit_tmpdir.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "hf/safetensors.h"

static char dir[64];

static int setup(void **s) {
    (void)s;
    return wm_test_tmpdir_make(dir, sizeof dir, "st");
}

static int teardown(void **s) {
    (void)s;
    return wm_test_tmpdir_remove(dir);
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void put_file(const char *name, const void *data, size_t n) {
    char p[256];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* 8-byte length N (given), then hdr (hlen bytes), then data_len bytes 0..; malloc'ed. */
static uint8_t *image_n(uint64_t n, const char *hdr, size_t hlen, size_t data_len, size_t *size) {
    *size = 8 + hlen + data_len;
    uint8_t *b = malloc(*size + 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    for (size_t i = 0; i < data_len; i++) b[8 + hlen + i] = (uint8_t)i;
    return b;
}

static uint8_t *image(const char *hdr, size_t data_len, size_t *size) {
    return image_n(strlen(hdr), hdr, strlen(hdr), data_len, size);
}

/* Opening buf must fail with WM_ERR_INPUT and a message containing word. */
static void expect_bad_buf(const uint8_t *buf, size_t size, const char *word) {
    wm_error e = {0};
    wm_st_file *f = (wm_st_file *)1;
    wm_status s = wm_st_open_buffer(buf, size, "t.safetensors", &f, &e);
    if (s != WM_ERR_INPUT || !strstr(e.msg, word))
        print_error("status %d, message \"%s\", expected the word \"%s\"\n", s, e.msg, word);
    assert_int_equal(s, WM_ERR_INPUT);
    assert_null(f);
    assert_non_null(strstr(e.msg, word));
    assert_non_null(strstr(e.msg, "t.safetensors: "));
}

static void expect_bad_hdr(const char *hdr, size_t data_len, const char *word) {
    size_t n;
    uint8_t *b = image(hdr, data_len, &n);
    expect_bad_buf(b, n, word);
    free(b);
}

static wm_st_file *open_ok_buf(const uint8_t *b, size_t n) {
    wm_error e = {0};
    wm_st_file *f = NULL;
    wm_status s = wm_st_open_buffer(b, n, "ok", &f, &e);
    if (s) print_error("%s\n", e.msg);
    assert_int_equal(s, WM_OK);
    return f;
}

/* ---- round trips ---- */

typedef struct spec {
    const char *name;
    wm_st_dtype dt;
    size_t rank;
    int64_t shape[4];
    size_t nbytes;
} spec;

static const spec specs[] = {
    {"w.f32", WM_ST_F32, 2, {2, 3}, 24},
    {"w.f16", WM_ST_F16, 1, {5}, 10},
    {"w.bf16", WM_ST_BF16, 2, {1, 2}, 4},
    {"scalar.i64", WM_ST_I64, 0, {0}, 8},
    {"empty.u8", WM_ST_U8, 1, {0}, 0},
    {"empty.f64", WM_ST_F64, 3, {2, 0, 5}, 0},
    {"mask", WM_ST_BOOL, 1, {3}, 3},
    {"q.i8", WM_ST_I8, 1, {7}, 7},
    {"q.f8", WM_ST_F8_E4M3, 1, {3}, 3},
    {"q.f8e5", WM_ST_F8_E5M2, 2, {1, 1}, 1},
    {"scale.e8m0", WM_ST_F8_E8M0, 1, {2}, 2},
    {"mx.f4", WM_ST_F4, 2, {2, 3}, 3},
    {"mx.f6", WM_ST_F6_E2M3, 1, {4}, 3},
    {"u16", WM_ST_U16, 1, {3}, 6},
    {"u32", WM_ST_U32, 1, {1}, 4},
    {"u64", WM_ST_U64, 2, {1, 2}, 16},
    {"c64", WM_ST_C64, 1, {2}, 16},
    {"i32", WM_ST_I32, 1, {3}, 12},
    {"name with \"quotes\", \\ and \xc3\xa9\n", WM_ST_I16, 1, {1}, 2},
};
#define N_SPECS (sizeof specs / sizeof specs[0])

static void make_tensors(wm_st_tensor *t, uint8_t (*data)[64]) {
    for (size_t i = 0; i < N_SPECS; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].name = specs[i].name;
        t[i].dtype = specs[i].dt;
        t[i].rank = specs[i].rank;
        t[i].shape = specs[i].rank ? specs[i].shape : NULL;
        for (size_t k = 0; k < specs[i].nbytes; k++) data[i][k] = (uint8_t)(i * 31 + k * 7 + 1);
        t[i].data = specs[i].nbytes ? data[i] : NULL;
    }
}

static void check_tensors(const wm_st_file *f, uint8_t (*data)[64]) {
    assert_int_equal(wm_st_count(f), N_SPECS);
    for (size_t i = 0; i < N_SPECS; i++) {
        const wm_st_tensor *t = wm_st_find(f, specs[i].name);
        assert_non_null(t);
        assert_string_equal(t->name, specs[i].name);
        assert_int_equal(t->dtype, specs[i].dt);
        assert_int_equal(t->rank, specs[i].rank);
        if (specs[i].rank == 0) assert_null(t->shape);
        for (size_t k = 0; k < specs[i].rank; k++) assert_int_equal(t->shape[k], specs[i].shape[k]);
        assert_int_equal(t->nbytes, specs[i].nbytes);
        if (specs[i].nbytes) assert_memory_equal(t->data, data[i], specs[i].nbytes);
    }
    for (size_t i = 1; i < wm_st_count(f); i++) /* iteration is sorted by name */
        assert_true(strcmp(wm_st_get(f, i - 1)->name, wm_st_get(f, i)->name) < 0);
    assert_null(wm_st_get(f, N_SPECS));
    assert_null(wm_st_find(f, "absent"));
}

static void test_roundtrip(void **s) {
    (void)s;
    wm_st_tensor t[N_SPECS];
    static uint8_t data[N_SPECS][64];
    make_tensors(t, data);
    const wm_st_kv meta[] = {{"format", "pt"}, {"note", "h\xc3\xa9llo \"quoted\"\n\ttab"}, {"", "empty key"}};
    char p[256];
    path_of(p, sizeof p, "rt.safetensors");
    wm_error e = {0};
    assert_int_equal(wm_st_write(p, t, N_SPECS, meta, 3, &e), WM_OK);

    wm_st_file *f = NULL;
    wm_status st = wm_st_open(p, NULL, &f, &e);
    if (st) print_error("%s\n", e.msg);
    assert_int_equal(st, WM_OK);
    check_tensors(f, data);
    assert_int_equal(wm_st_meta_count(f), 3);
    assert_string_equal(wm_st_meta_at(f, 0)->key, "format");
    assert_string_equal(wm_st_meta_get(f, "format"), "pt");
    assert_string_equal(wm_st_meta_get(f, "note"), meta[1].value);
    assert_string_equal(wm_st_meta_get(f, ""), "empty key");
    assert_null(wm_st_meta_get(f, "nope"));
    assert_int_equal(wm_st_shard_count(f), 1);
    assert_string_equal(wm_st_shard_path(f, 0), p);
    /* our layout (8-aligned header, tensors by descending alignment) keeps every pointer aligned */
    for (size_t i = 0; i < wm_st_count(f); i++) assert_true(wm_st_is_aligned(wm_st_get(f, i)));
    wm_st_close(f);

    /* the header is space-padded to a multiple of 8; the buffer writer gives the same bytes */
    uint8_t *buf;
    size_t n;
    assert_int_equal(wm_st_write_buffer(t, N_SPECS, meta, 3, &buf, &n, &e), WM_OK);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | buf[i];
    assert_int_equal(hl % 8, 0);
    assert_true(buf[8 + hl - 1] == ' ' || buf[8 + hl - 1] == '}');
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    uint8_t *disk = malloc(n + 1);
    assert_int_equal(fread(disk, 1, n + 1, fp), n);
    fclose(fp);
    assert_memory_equal(disk, buf, n);
    free(disk);
    f = open_ok_buf(buf, n);
    check_tensors(f, data);
    wm_st_close(f);
    free(buf);

    /* no tensors, no metadata: "{}" padded */
    assert_int_equal(wm_st_write_buffer(NULL, 0, NULL, 0, &buf, &n, &e), WM_OK);
    assert_int_equal(n, 16);
    f = open_ok_buf(buf, n);
    assert_int_equal(wm_st_count(f), 0);
    assert_int_equal(wm_st_meta_count(f), 0);
    wm_st_close(f);
    free(buf);
}

static void test_dtype_table(void **s) {
    (void)s;
    assert_int_equal(wm_st_dtype_from_name("BF16", 4), WM_ST_BF16);
    assert_int_equal(wm_st_dtype_from_name("F8_E4M3FNUZ", 11), WM_ST_F8_E4M3FNUZ);
    assert_int_equal(wm_st_dtype_from_name("F3", 2), WM_ST_INVALID);
    assert_int_equal(wm_st_dtype_from_name("F32x", 3), WM_ST_F32);
    assert_int_equal(wm_st_dtype_bits(WM_ST_F4), 4);
    assert_int_equal(wm_st_dtype_bits(WM_ST_F6_E3M2), 6);
    assert_int_equal(wm_st_dtype_bits(WM_ST_C64), 64);
    assert_int_equal(wm_st_dtype_onnx(WM_ST_F32), WM_DT_FLOAT);
    assert_int_equal(wm_st_dtype_onnx(WM_ST_BF16), WM_DT_BFLOAT16);
    assert_int_equal(wm_st_dtype_onnx(WM_ST_F8_E4M3), WM_DT_FLOAT8E4M3FN);
    assert_int_equal(wm_st_dtype_onnx(WM_ST_F4), WM_DT_FLOAT4E2M1);
    assert_int_equal(wm_st_dtype_onnx(WM_ST_F6_E2M3), WM_DT_UNDEFINED);
    assert_int_equal(wm_st_dtype_align(WM_ST_F64), 8);
    assert_string_equal(wm_st_dtype_name(WM_ST_DTYPE_COUNT), "invalid");
    for (int i = 1; i < WM_ST_DTYPE_COUNT; i++) { /* names round trip; ONNX bits agree where mapped */
        const char *n = wm_st_dtype_name((wm_st_dtype)i);
        assert_int_equal(wm_st_dtype_from_name(n, strlen(n)), i);
        int32_t o = wm_st_dtype_onnx((wm_st_dtype)i);
        if (o != WM_DT_UNDEFINED && i != WM_ST_C64) assert_int_equal(wm_dtype_bits(o), wm_st_dtype_bits((wm_st_dtype)i));
    }
}

/* Headers as other writers produce them: any order, padding, null metadata, shared zero-size offsets. */
static void test_foreign_layouts(void **s) {
    (void)s;
    size_t n;
    uint8_t *b = image("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}, "
                       "\"__metadata__\":null,\n\"z\":{\"shape\":[0,3],\"data_offsets\":[4,4],\"dtype\":\"I64\"},"
                       "\"a\":{\"data_offsets\":[0,4],\"dtype\":\"U8\",\"shape\":[2,2]},"
                       "\"y\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[0,0]}}      \t\r\n",
                       8, &n);
    wm_st_file *f = open_ok_buf(b, n);
    assert_int_equal(wm_st_count(f), 4);
    assert_int_equal(wm_st_meta_count(f), 0);
    const wm_st_tensor *t = wm_st_find(f, "b");
    assert_int_equal(t->offset, 4);
    assert_ptr_equal(t->data, b + n - 4);
    assert_int_equal(t->numel, 1);
    t = wm_st_find(f, "z");
    assert_int_equal(t->numel, 0);
    assert_int_equal(t->nbytes, 0);
    assert_string_equal(wm_st_get(f, 0)->name, "a");
    wm_st_close(f);
    free(b);

    /* an unaligned F32: the helper says so (the pointer is still usable byte-wise) */
    b = image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1,5]}}",
              5, &n);
    void *alv = NULL;
    assert_int_equal(posix_memalign(&alv, 64, n), 0);
    uint8_t *al = alv;
    memcpy(al, b, n);
    size_t hl = n - 5;
    f = open_ok_buf(al, n);
    int want = ((8 + hl + 1) % 4) == 0;
    assert_int_equal(wm_st_is_aligned(wm_st_find(f, "b")), want);
    wm_st_close(f);
    free(al);
    free(b);

    /* escapes decode; a surrogate pair gives one 4-byte character */
    b = image("{\"\\u00e9\\ud83d\\ude00\\/\\t\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, &n);
    f = open_ok_buf(b, n);
    assert_non_null(wm_st_find(f, "\xc3\xa9\xf0\x9f\x98\x80/\t"));
    wm_st_close(f);
    free(b);
}

/* ---- adversarial headers ---- */

#define T1(name, extra) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" extra "}"

static void test_length_prefix(void **s) {
    (void)s;
    size_t n;
    uint8_t small[5] = {1, 0, 0, 0, 0};
    expect_bad_buf(small, sizeof small, "too small");
    expect_bad_buf(NULL, 0, "too small");
    const char *h = "{}";
    uint8_t *b = image_n(UINT64_MAX, h, 2, 0, &n); /* N = 2^64-1 */
    expect_bad_buf(b, n, "exceeds the limit");
    free(b);
    b = image_n(100000001, h, 2, 0, &n);
    expect_bad_buf(b, n, "exceeds the limit");
    free(b);
    b = image_n(64, h, 2, 10, &n); /* N past the end of the file */
    expect_bad_buf(b, n, "past the end of the file");
    free(b);
    b = image_n(0, h, 0, 0, &n);
    expect_bad_buf(b, n, "empty");
    free(b);

    /* the same through real files: the message names the file */
    char p[256];
    put_file("tiny.safetensors", small, sizeof small);
    path_of(p, sizeof p, "tiny.safetensors");
    wm_error e = {0};
    wm_st_file *f = NULL;
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "tiny.safetensors: file too small"));
    put_file("empty.safetensors", "", 0);
    path_of(p, sizeof p, "empty.safetensors");
    wm_err_clear(&e);
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "too small"));
    path_of(p, sizeof p, "missing.safetensors");
    wm_err_clear(&e);
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_ERR_INPUT);
    assert_null(f);
}

static void test_header_bytes(void **s) {
    (void)s;
    size_t n;
    const char good[] = "{" T1("a", "[0,4]") "}";
    /* NUL padding (instead of spaces) */
    char nul[sizeof good + 4];
    memcpy(nul, good, sizeof good - 1);
    memset(nul + sizeof good - 1, 0, 5);
    uint8_t *b = image_n(sizeof good + 3, nul, sizeof good + 3, 4, &n);
    expect_bad_buf(b, n, "NUL");
    free(b);
    expect_bad_hdr(" {" T1("a", "[0,4]") "}", 4, "does not start with '{'");
    expect_bad_hdr("[]", 0, "does not start with '{'");
    expect_bad_hdr("\xef\xbb\xbf{}", 0, "does not start with '{'");
    /* invalid UTF-8: a stray byte, an overlong '/', an encoded surrogate, a truncated sequence */
    expect_bad_hdr("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "UTF-8");
    expect_bad_hdr("{\"\xc0\xaf\":{}}", 0, "UTF-8");
    expect_bad_hdr("{\"\xed\xa0\x80\":{}}", 0, "UTF-8");
    expect_bad_hdr("{\"\xe2\x82\":{}}", 0, "UTF-8");
    expect_bad_hdr("{\"\xf4\x90\x80\x80\":{}}", 0, "UTF-8");
    /* in strings: control bytes, \u0000, lone surrogates, bad escapes */
    expect_bad_hdr("{\"a\x01\":{}}", 0, "control byte");
    expect_bad_hdr("{\"a\\u0000b\":{}}", 0, "NUL");
    expect_bad_hdr("{\"\\ud800\":{}}", 0, "surrogate");
    expect_bad_hdr("{\"\\udc00x\":{}}", 0, "surrogate");
    expect_bad_hdr("{\"\\x\":{}}", 0, "invalid escape");
    expect_bad_hdr("{\"\\u12\":{}}", 0, "\\u escape");
    expect_bad_hdr("{\"abc", 0, "unterminated");
    expect_bad_hdr("{\"abc\\", 0, "unterminated");
    /* structure */
    expect_bad_hdr("{" T1("a", "[0,4]") "} x", 4, "after the header's closing");
    expect_bad_hdr("{" T1("a", "[0,4]") "}}", 4, "after the header's closing");
    expect_bad_hdr("{" T1("a", "[0,4]"), 4, "expected");
    expect_bad_hdr("{" T1("a", "[0,4]") ",}", 4, "expected a tensor name");
    expect_bad_hdr("{\"a\" 1}", 0, "expected ':'");
    expect_bad_hdr("{\"a\":[]}", 0, "expected an object");
    expect_bad_hdr("{\"a\":1}", 0, "expected an object");
    expect_bad_hdr("{\x01}", 0, "byte 0x01");
}

static void test_tensor_entries(void **s) {
    (void)s;
    expect_bad_hdr("{\"a\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F7'");
    expect_bad_hdr("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype");
    expect_bad_hdr("{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "expected a dtype string");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': shape[0] is negative");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "not an integer");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4, "not an integer");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "not an integer");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "leading zero");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, "expected an integer");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}", 4, "expected an integer");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "expected an array");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, "data_offsets[1] is negative");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.0,4]}}", 4, "not an integer");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, "data_offsets has more than 2");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4, "data_offsets must be [begin, end]");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "end before they begin");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 2, "past the end of the data section");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 4, "too large");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "unknown key 'x'");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "duplicate key 'dtype'");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "missing key 'shape'");
    expect_bad_hdr("{\"a\":{}}", 0, "missing key 'dtype'");
    /* sizes: the example message; a product that overflows; dims beyond int64; sub-byte leftovers */
    expect_bad_hdr("{\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12,
                   "t.safetensors: tensor 'lm_head.weight': data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 needs 24");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,4]}}", 4, "overflow");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,2],\"data_offsets\":[0,0]}}", 0, "overflow");
    expect_bad_hdr("{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808,0],\"data_offsets\":[0,0]}}", 0, "too large");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "not a whole number of bytes");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F6_E3M2\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "not a whole number");
    /* a huge dim over no data is fine when another dim is 0 */
    size_t n;
    uint8_t *b = image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1099511627776,0],\"data_offsets\":[0,0]}}", 0, &n);
    wm_st_file *f = open_ok_buf(b, n);
    assert_int_equal(wm_st_find(f, "a")->shape[0], 1099511627776ll);
    wm_st_close(f);
    free(b);
    /* rank cap */
    char h[512] = "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1],\"shape\":[1";
    for (int i = 0; i < WM_ST_MAX_RANK; i++) strcat(h, ",1");
    strcat(h, "]}}");
    expect_bad_hdr(h, 1, "more than 64");
}

static void test_offsets_and_names(void **s) {
    (void)s;
    expect_bad_hdr("{" T1("a", "[0,4]") "," T1("b", "[2,6]") "}", 6, "overlap");
    expect_bad_hdr("{" T1("a", "[0,4]") "," T1("b", "[0,4]") "}", 4, "overlap");
    expect_bad_hdr("{" T1("a", "[0,4]") "," T1("b", "[8,12]") "}", 12, "gap of 4 bytes after tensor 'a'");
    expect_bad_hdr("{" T1("a", "[4,8]") "}", 8, "gap of 4 bytes after the start");
    expect_bad_hdr("{" T1("a", "[0,4]") "}", 8, "4 trailing bytes");
    expect_bad_hdr("{}", 1, "trailing bytes");
    expect_bad_hdr("{" T1("a", "[0,4]") "," T1("a", "[4,8]") "}", 8, "duplicate tensor name 'a'");
    expect_bad_hdr("{" T1("a", "[0,4]") "," T1("\\u0061", "[4,8]") "}", 8, "duplicate tensor name 'a'");
    /* __metadata__ */
    expect_bad_hdr("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__: the value of 'k' must be a string");
    expect_bad_hdr("{\"__metadata__\":{\"k\":null}}", 0, "must be a string");
    expect_bad_hdr("{\"__metadata__\":[\"k\"]}", 0, "__metadata__: must be an object of string to string");
    expect_bad_hdr("{\"__metadata__\":\"x\"}", 0, "__metadata__: must be an object");
    expect_bad_hdr("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, "nested deeper");
    expect_bad_hdr("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "__metadata__: duplicate key 'k'");
    expect_bad_hdr("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key '__metadata__'");
}

static void test_deep_nesting(void **s) {
    (void)s;
    const size_t depth = 100000;
    const char *pre[] = {"{\"a\":", "{\"__metadata__\":", "{\"a\":{\"shape\":", "{\"a\":{\"dtype\":"};
    const char *word[] = {"expected an object", "nested deeper", "nested deeper", "nested deeper"};
    for (int k = 0; k < 4; k++) {
        size_t pl = strlen(pre[k]);
        char *h = malloc(pl + 2 * depth + 1);
        memcpy(h, pre[k], pl);
        memset(h + pl, k == 1 ? '{' : '[', depth);
        memset(h + pl + depth, k == 1 ? '}' : ']', depth);
        h[pl + 2 * depth] = 0;
        expect_bad_hdr(h, 0, word[k]);
        free(h);
    }
    expect_bad_hdr("{\"a\":{\"shape\":[[1]],\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "nested deeper");
}

/* Every truncation of a valid file, and every single-byte corruption of its header, fails cleanly. */
static void test_truncations(void **s) {
    (void)s;
    wm_st_tensor t[N_SPECS];
    static uint8_t data[N_SPECS][64];
    make_tensors(t, data);
    const wm_st_kv meta[] = {{"format", "pt"}};
    uint8_t *buf;
    size_t n;
    wm_error e = {0};
    assert_int_equal(wm_st_write_buffer(t, N_SPECS, meta, 1, &buf, &n, &e), WM_OK);
    for (size_t k = 0; k < n; k++) {
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, buf, k);
        wm_st_file *f = NULL;
        wm_err_clear(&e);
        assert_int_equal(wm_st_open_buffer(c, k, NULL, &f, &e), WM_ERR_INPUT);
        assert_true(e.msg[0] != 0);
        free(c);
    }
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | buf[i];
    for (size_t k = 8; k < 8 + hl; k++) { /* flip bytes: any outcome but a crash (checked under ASan) */
        uint8_t save = buf[k];
        const uint8_t subs[] = {0, '"', '}', '1', 0xff};
        for (size_t j = 0; j < sizeof subs; j++) {
            buf[k] = subs[j];
            wm_st_file *f = NULL;
            wm_err_clear(&e);
            if (wm_st_open_buffer(buf, n, NULL, &f, &e) == WM_OK) wm_st_close(f);
            else assert_true(e.msg[0] != 0);
        }
        buf[k] = save;
    }
    free(buf);
}

/* ---- writer errors: clear message, nothing left behind ---- */

static int dir_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void test_writer_errors(void **s) {
    (void)s;
    char p[256];
    path_of(p, sizeof p, "w.safetensors");
    int before = dir_entries();
    float vf[4] = {1, 2, 3, 4};
    const uint8_t *v = (const uint8_t *)vf;
    int64_t sh2[] = {2}, shneg[] = {-1}, sh3[] = {3};
    struct {
        wm_st_tensor t[2];
        size_t n;
        wm_st_kv meta[2];
        size_t n_meta;
        const char *word;
    } cases[] = {
        {{{.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v},
          {.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v}}, 2, {{0}}, 0, "duplicate tensor name"},
        {{{.name = "__metadata__", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v}}, 1, {{0}}, 0, "reserved"},
        {{{.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = shneg, .data = v}}, 1, {{0}}, 0, "negative"},
        {{{.name = "a", .dtype = WM_ST_F4, .rank = 1, .shape = sh3, .data = v}}, 1, {{0}}, 0, "whole number of bytes"},
        {{{.name = "a\xff", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v}}, 1, {{0}}, 0, "UTF-8"},
        {{{.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = NULL}}, 1, {{0}}, 0, "no data"},
        {{{.name = "a", .dtype = (wm_st_dtype)99, .rank = 1, .shape = sh2, .data = v}}, 1, {{0}}, 0, "invalid dtype"},
        {{{.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v}}, 1, {{"k", "1"}, {"k", "2"}}, 2, "duplicate key"},
        {{{.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v}}, 1, {{"k", NULL}}, 1, "__metadata__"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wm_error e = {0};
        assert_int_equal(wm_st_write(p, cases[i].t, cases[i].n, cases[i].meta, cases[i].n_meta, &e), WM_ERR_INPUT);
        if (!strstr(e.msg, cases[i].word)) print_error("case %zu: %s\n", i, e.msg);
        assert_non_null(strstr(e.msg, cases[i].word));
        assert_int_equal(access(p, F_OK), -1);
        assert_int_equal(dir_entries(), before);
    }
    /* an unwritable folder: an I/O error, nothing left */
    wm_error e = {0};
    wm_st_tensor ok = {.name = "a", .dtype = WM_ST_F32, .rank = 1, .shape = sh2, .data = v};
    assert_int_equal(wm_st_write("/nonexistent-dir/x.safetensors", &ok, 1, NULL, 0, &e), WM_ERR_IO);
    /* overwriting an existing file replaces it whole */
    assert_int_equal(wm_st_write(p, &ok, 1, NULL, 0, &e), WM_OK);
    ok.shape = sh3;
    assert_int_equal(wm_st_write(p, &ok, 1, NULL, 0, &e), WM_OK);
    wm_st_file *f = NULL;
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_OK);
    assert_int_equal(wm_st_find(f, "a")->shape[0], 3);
    wm_st_close(f);
    assert_int_equal(dir_entries(), before + 1);
    unlink(p);
}

/* ---- sharded checkpoints ---- */

static void write_shard(const char *sub, const char *name, const char *const *names, size_t n, const char *fmt) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s/%s", dir, sub, name);
    static float vals[16];
    for (int i = 0; i < 16; i++) vals[i] = (float)i;
    static const int64_t sh[] = {2, 2};
    wm_st_tensor t[8];
    for (size_t i = 0; i < n; i++)
        t[i] = (wm_st_tensor){.name = names[i], .dtype = WM_ST_F32, .rank = 2, .shape = sh, .data = (const uint8_t *)(vals + i)};
    wm_st_kv meta[] = {{"format", fmt}, {"shard", name}};
    wm_error e = {0};
    assert_int_equal(wm_st_write(p, t, n, meta, 2, &e), WM_OK);
}

static void write_index(const char *sub, const char *json) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s/model.safetensors.index.json", dir, sub);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
}

static void mk_sub(const char *sub) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    assert_int_equal(mkdir(p, 0755), 0);
}

static const char *const s1[] = {"model.embed", "model.layers.0.w"};
static const char *const s2[] = {"lm_head.weight"};
#define SH1 "model-00001-of-00002.safetensors"
#define SH2 "model-00002-of-00002.safetensors"

static void test_sharded(void **s) {
    (void)s;
    mk_sub("ck");
    write_shard("ck", SH1, s1, 2, "pt");
    write_shard("ck", SH2, s2, 1, "pt");
    write_index("ck", "{\n  \"metadata\": {\"total_size\": 48, \"nested\": {\"a\": [1, 2.5e3, true, null, \"x\"]}},\n"
                      "  \"weight_map\": {\n    \"lm_head.weight\": \"" SH2 "\",\n"
                      "    \"model.embed\": \"" SH1 "\",\n    \"model.layers.0.w\": \"" SH1 "\"\n  }\n}\n");
    char p[256];
    snprintf(p, sizeof p, "%s/ck", dir);
    const char *opens[2] = {p, NULL};
    char ip[256];
    snprintf(ip, sizeof ip, "%s/ck/model.safetensors.index.json", dir);
    opens[1] = ip;
    for (int k = 0; k < 2; k++) {
        wm_error e = {0};
        wm_st_file *f = NULL;
        wm_status st = wm_st_open(opens[k], NULL, &f, &e);
        if (st) print_error("%s\n", e.msg);
        assert_int_equal(st, WM_OK);
        assert_int_equal(wm_st_count(f), 3);
        assert_int_equal(wm_st_shard_count(f), 2);
        const wm_st_tensor *t = wm_st_find(f, "lm_head.weight");
        assert_non_null(t);
        assert_non_null(strstr(wm_st_shard_path(f, t->shard), SH2));
        assert_true(((const float *)t->data)[3] == 3.0f);
        t = wm_st_find(f, "model.layers.0.w");
        assert_non_null(strstr(wm_st_shard_path(f, t->shard), SH1));
        assert_true(((const float *)t->data)[0] == 1.0f);
        /* metadata: union, first shard's value wins */
        assert_int_equal(wm_st_meta_count(f), 2);
        assert_string_equal(wm_st_meta_get(f, "format"), "pt");
        assert_string_equal(wm_st_meta_get(f, "shard"), SH1);
        wm_st_close(f);
    }
    /* a folder with a single model.safetensors */
    mk_sub("single");
    write_shard("single", "model.safetensors", s2, 1, "np");
    snprintf(p, sizeof p, "%s/single", dir);
    wm_error e = {0};
    wm_st_file *f = NULL;
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_OK);
    assert_int_equal(wm_st_count(f), 1);
    wm_st_close(f);
    mk_sub("nothing");
    snprintf(p, sizeof p, "%s/nothing", dir);
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "neither"));
}

static void expect_bad_index(const char *sub, const char *json, const char *word) {
    write_index(sub, json);
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    wm_error e = {0};
    wm_st_file *f = (wm_st_file *)1;
    wm_status s = wm_st_open(p, NULL, &f, &e);
    if (s != WM_ERR_INPUT || !strstr(e.msg, word)) print_error("status %d: \"%s\", expected \"%s\"\n", s, e.msg, word);
    assert_int_equal(s, WM_ERR_INPUT);
    assert_null(f);
    assert_non_null(strstr(e.msg, word));
}

#define WM1 "\"model.embed\":\"" SH1 "\",\"model.layers.0.w\":\"" SH1 "\""

static void test_index_errors(void **s) {
    (void)s;
    mk_sub("bad");
    write_shard("bad", SH1, s1, 2, "pt");
    write_shard("bad", SH2, s2, 1, "pt");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"../" SH2 "\"}}", "'..'");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"/etc/hosts\"}}", "absolute");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"C:\\\\x\"}}", "absolute");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"sub/" SH2 "\"}}", "not a plain file name");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"..\"}}", "'..'");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"\"}}", "empty");
    /* listed in the index, missing in its shard */
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"" SH2 "\",\"ghost\":\"" SH2 "\"}}",
                     "weight_map: tensor 'ghost' is missing from its shard");
    /* mapped to the wrong shard */
    expect_bad_index("bad", "{\"weight_map\":{\"model.embed\":\"" SH2 "\",\"model.layers.0.w\":\"" SH1
                            "\",\"lm_head.weight\":\"" SH2 "\"}}",
                     "(it is in '" SH1 "')");
    /* a shard holds a tensor the index does not list */
    expect_bad_index("bad", "{\"weight_map\":{\"model.embed\":\"" SH1 "\",\"lm_head.weight\":\"" SH2 "\"}}",
                     "which the weight_map does not list");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"" SH2 "\",\"lm_head.weight\":\"" SH2 "\"}}",
                     "listed twice");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"model-3.safetensors\"}}", "model-3");
    expect_bad_index("bad", "{\"metadata\":{}}", "no \"weight_map\"");
    expect_bad_index("bad", "{\"weight_map\":{}}", "empty");
    expect_bad_index("bad", "{\"weight_map\":[]}", "expected an object");
    expect_bad_index("bad", "{\"weight_map\":{\"a\":1}}", "expected a shard file name string");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 "},\"weight_map\":{}}", "duplicate key 'weight_map'");
    expect_bad_index("bad", "{\"weight_map\":{" WM1 "}} x", "unexpected data");
    expect_bad_index("bad", "\xef\xbb\xbf{\"weight_map\":{" WM1 "}}", "expected '{'");
    expect_bad_index("bad", "{\"weight_map\":{\"\xff\":\"x\"}}", "UTF-8");
    expect_bad_index("bad", "", "index is 0 bytes");
    expect_bad_index("bad", "{\"metadata\":{\"total_size\":01},\"weight_map\":{" WM1 "}}", "malformed number");
    /* deep nesting in the free-form metadata */
    size_t depth = 100000;
    char *j = malloc(2 * depth + 64);
    strcpy(j, "{\"metadata\":");
    size_t k = strlen(j);
    memset(j + k, '[', depth);
    memset(j + k + depth, ']', depth);
    strcpy(j + k + 2 * depth, "}");
    expect_bad_index("bad", j, "deeper than 64");
    free(j);
    /* a tensor present in two shards */
    mk_sub("two");
    write_shard("two", SH1, s1, 2, "pt");
    write_shard("two", SH2, s1, 1, "pt");
    write_index("two", "{\"weight_map\":{" WM1 "}}"); /* SH2 is not listed: never opened */
    char tp[256];
    snprintf(tp, sizeof tp, "%s/two", dir);
    wm_error e = {0};
    wm_st_file *f = NULL;
    assert_int_equal(wm_st_open(tp, NULL, &f, &e), WM_OK);
    assert_int_equal(wm_st_shard_count(f), 1);
    wm_st_close(f);
    expect_bad_index("two", "{\"weight_map\":{\"model.embed\":\"" SH2 "\",\"model.layers.0.w\":\"" SH1 "\"}}",
                     "in two shards");
    /* a shard in the index that is broken names itself */
    mk_sub("broken");
    write_shard("broken", SH1, s1, 2, "pt");
    char p[256];
    snprintf(p, sizeof p, "%s/broken/%s", dir, SH2);
    FILE *fp = fopen(p, "wb");
    fputs("xyz", fp);
    fclose(fp);
    expect_bad_index("broken", "{\"weight_map\":{" WM1 ",\"lm_head.weight\":\"" SH2 "\"}}", SH2 ": file too small");
}

static void test_symlinked_shard(void **s) {
    (void)s;
    /* ck2/snap/shard -> ../blobs/x: outside the index folder unless root allows it (HF cache layout) */
    mk_sub("hub");
    mk_sub("hub/blobs");
    mk_sub("hub/snap");
    write_shard("hub/blobs", "b1", s1, 2, "pt");
    char link[256];
    snprintf(link, sizeof link, "%s/hub/snap/%s", dir, SH1);
    assert_int_equal(symlink("../blobs/b1", link), 0);
    write_index("hub/snap", "{\"weight_map\":{" WM1 "}}");
    char p[256], root[256];
    snprintf(p, sizeof p, "%s/hub/snap", dir);
    snprintf(root, sizeof root, "%s/hub", dir);
    wm_error e = {0};
    wm_st_file *f = NULL;
    assert_int_equal(wm_st_open(p, NULL, &f, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "outside the folder"));
    wm_st_open_opts o = {.root = root};
    wm_err_clear(&e);
    assert_int_equal(wm_st_open(p, &o, &f, &e), WM_OK);
    assert_int_equal(wm_st_count(f), 2);
    wm_st_close(f);
    /* a root that does not contain the blob still refuses */
    o.root = p;
    wm_err_clear(&e);
    assert_int_equal(wm_st_open(p, &o, &f, &e), WM_ERR_INPUT);
    /* a single file through root */
    char blob[256];
    snprintf(blob, sizeof blob, "%s/hub/blobs/b1", dir);
    wm_err_clear(&e);
    assert_int_equal(wm_st_open(link, &o, &f, &e), WM_ERR_INPUT);
    o.root = root;
    wm_err_clear(&e);
    assert_int_equal(wm_st_open(link, &o, &f, &e), WM_OK);
    wm_st_close(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_foreign_layouts),  cmocka_unit_test(test_length_prefix),
        cmocka_unit_test(test_header_bytes),     cmocka_unit_test(test_tensor_entries),
        cmocka_unit_test(test_offsets_and_names), cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_truncations),      cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_sharded),          cmocka_unit_test(test_index_errors),
        cmocka_unit_test(test_symlinked_shard),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
