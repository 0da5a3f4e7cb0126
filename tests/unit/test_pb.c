/* Unit tests of the table-driven protobuf codec on the ONNX schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/onnx_proto.h"

static wm_arena A;
static int setup(void **s) { (void)s; wm_arena_init(&A); return 0; }
static int teardown(void **s) { (void)s; wm_arena_free(&A); return 0; }

static void test_scalars_and_strings(void **s) {
    (void)s;
    /* OperatorSetIdProto{domain:"ai", version:300} written by hand */
    const uint8_t buf[] = {0x0a, 0x02, 'a', 'i', 0x10, 0xac, 0x02};
    wm_error e = {0};
    wm_onnx_opset *o;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, buf, sizeof buf, (void **)&o, &e), WM_OK);
    assert_string_equal(o->domain, "ai");
    assert_int_equal(o->version, 300);
    size_t n;
    uint8_t *out = wm_pb_encode_alloc(&wm_onnx_opset_desc, o, &n);
    assert_int_equal(n, sizeof buf);
    assert_memory_equal(out, buf, n);
    free(out);
}

static void test_negative_int32_is_ten_bytes(void **s) {
    (void)s;
    wm_onnx_type_tensor *t = wm_pb_new(&A, &wm_onnx_type_tensor_desc);
    t->elem_type = -1;
    assert_int_equal(wm_pb_size(&wm_onnx_type_tensor_desc, t), 11);
    size_t n;
    uint8_t *out = wm_pb_encode_alloc(&wm_onnx_type_tensor_desc, t, &n);
    wm_onnx_type_tensor *back;
    wm_error e = {0};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_type_tensor_desc, out, n, (void **)&back, &e), WM_OK);
    assert_int_equal(back->elem_type, -1);
    free(out);
}

static void test_presence_of_zero(void **s) {
    (void)s;
    /* Dimension{dim_value: 0} must survive: presence, not value, decides */
    const uint8_t buf[] = {0x08, 0x00};
    wm_error e = {0};
    wm_onnx_dim *d;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_dim_desc, buf, sizeof buf, (void **)&d, &e), WM_OK);
    assert_int_equal(wm_pb_size(&wm_onnx_dim_desc, d), 2);
    wm_onnx_dim *d2 = wm_pb_new(&A, &wm_onnx_dim_desc);
    assert_int_equal(wm_pb_size(&wm_onnx_dim_desc, d2), 0);
}

static void test_packed_and_unpacked_ints(void **s) {
    (void)s;
    /* TensorProto.dims (field 1) unpacked 3, 4 then packed [5, 300] */
    const uint8_t buf[] = {0x08, 0x03, 0x08, 0x04, 0x0a, 0x03, 0x05, 0xac, 0x02};
    wm_error e = {0};
    wm_onnx_tensor *t;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_tensor_desc, buf, sizeof buf, (void **)&t, &e), WM_OK);
    assert_int_equal(t->n_dims, 4);
    assert_int_equal(t->dims[0], 3);
    assert_int_equal(t->dims[3], 300);
    /* float_data packed: 2 floats */
    float f[2] = {1.5f, -2.0f};
    uint8_t fb[2 + 8] = {0x22, 0x08};
    memcpy(fb + 2, f, 8);
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_tensor_desc, fb, sizeof fb, (void **)&t, &e), WM_OK);
    assert_int_equal(t->n_float_data, 2);
    assert_true(t->float_data[1] == -2.0f);
    /* a packed float run whose length is not a multiple of 4 is an error */
    fb[1] = 0x07;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_tensor_desc, fb, 9, (void **)&t, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "float_data"));
}

static void test_unknown_fields_kept(void **s) {
    (void)s;
    /* opset with unknown field 99 (varint 7) and unknown field 100 (bytes "xy") */
    const uint8_t buf[] = {0x10, 0x05, 0x98, 0x06, 0x07, 0xa2, 0x06, 0x02, 'x', 'y'};
    wm_error e = {0};
    wm_onnx_opset *o;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, buf, sizeof buf, (void **)&o, &e), WM_OK);
    assert_int_equal(o->pb.n_unknown, 2);
    size_t n;
    uint8_t *out = wm_pb_encode_alloc(&wm_onnx_opset_desc, o, &n);
    assert_int_equal(n, sizeof buf);
    assert_memory_equal(out, buf, n);
    free(out);
}

static void test_bad_wire_input(void **s) {
    (void)s;
    wm_error e = {0};
    void *m;
    const uint8_t trunc_varint[] = {0x10, 0x80};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, trunc_varint, 2, &m, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "truncated"));
    wm_err_clear(&e);
    const uint8_t long_varint[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, long_varint, sizeof long_varint, &m, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "10 bytes"));
    wm_err_clear(&e);
    const uint8_t too_long[] = {0x0a, 0x09, 'a'};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, too_long, sizeof too_long, &m, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "exceeds"));
    wm_err_clear(&e);
    const uint8_t group[] = {0x0b};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, group, 1, &m, &e), WM_ERR_INPUT);
    wm_err_clear(&e);
    const uint8_t field0[] = {0x00, 0x01};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, field0, 2, &m, &e), WM_ERR_INPUT);
    wm_err_clear(&e);
    const uint8_t nul[] = {0x0a, 0x02, 'a', 0};
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_opset_desc, nul, sizeof nul, &m, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "NUL"));
}

static void test_nesting_cap(void **s) {
    (void)s;
    /* TypeProto{sequence_type{elem_type{sequence_type{...}}}} 200 levels deep */
    enum { LEVELS = 200 };
    size_t cap = LEVELS * 8 + 16, n = 0;
    uint8_t *buf = malloc(cap), *tmp = malloc(cap);
    for (int i = 0; i < LEVELS; i++) {
        /* wrap: field 4 (sequence_type) { field 1 (elem_type) { buf } } */
        size_t inner = n;
        uint8_t hdr[8];
        size_t h = 0;
        hdr[h++] = 0x0a;
        hdr[h++] = (uint8_t)(inner < 128 ? inner : (inner & 0x7f) | 0x80);
        if (inner >= 128) hdr[h++] = (uint8_t)(inner >> 7);
        size_t mid = h + inner;
        uint8_t hdr2[8];
        size_t h2 = 0;
        hdr2[h2++] = 0x22;
        hdr2[h2++] = (uint8_t)(mid < 128 ? mid : (mid & 0x7f) | 0x80);
        if (mid >= 128) hdr2[h2++] = (uint8_t)(mid >> 7);
        memcpy(tmp, hdr2, h2);
        memcpy(tmp + h2, hdr, h);
        memcpy(tmp + h2 + h, buf, inner);
        n = h2 + h + inner;
        memcpy(buf, tmp, n);
    }
    wm_error e = {0};
    void *m;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_type_desc, buf, n, &m, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "nested"));
    free(buf);
    free(tmp);
}

static void test_repeated_singular_message_merges(void **s) {
    (void)s;
    /* ValueInfoProto.type given twice: tensor_type.elem_type=1, then denotation "d" */
    const uint8_t buf[] = {0x12, 0x04, 0x0a, 0x02, 0x08, 0x01, 0x12, 0x03, 0x32, 0x01, 'd'};
    wm_error e = {0};
    wm_onnx_value_info *v;
    assert_int_equal(wm_pb_decode(&A, &wm_onnx_value_info_desc, buf, sizeof buf, (void **)&v, &e), WM_OK);
    assert_non_null(v->type->tensor_type);
    assert_int_equal(v->type->tensor_type->elem_type, 1);
    assert_string_equal(v->type->denotation, "d");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scalars_and_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negative_int32_is_ten_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_presence_of_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_packed_and_unpacked_ints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_fields_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_wire_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nesting_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeated_singular_message_merges, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
