/* Unit tests of ONNX load/save: external data decisions, path rules, tensor checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "unit_tmpdir.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"

static char dir[64];

static int setup(void **s) {
    (void)s;
    return wm_test_tmpdir_make(dir, sizeof dir, "io");
}

static int teardown(void **s) {
    (void)s;
    return wm_test_tmpdir_remove(dir);
}

/* A model with one float initializer of n elements named W (values i*0.5). */
static wm_onnx_model *model_with_tensor(size_t n, float **keep) {
    wm_onnx_model *m = wm_onnx_model_new();
    wm_arena *a = &m->arena;
    wm_onnx_graph *g = m->proto->graph = wm_pb_new(a, &wm_onnx_graph_desc);
    float *data = wm_arena_alloc(a, n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) data[i] = (float)i * 0.5f;
    wm_onnx_tensor *t = wm_pb_new(a, &wm_onnx_tensor_desc);
    t->name = wm_arena_strdup(a, "W");
    t->data_type = WM_DT_FLOAT;
    *(int64_t *)wm_vec_push(a, &t->dims, &t->n_dims, sizeof(int64_t)) = (int64_t)n;
    t->raw_data = (wm_bytes){(const uint8_t *)data, n * sizeof(float)};
    *(wm_onnx_tensor **)wm_vec_push(a, &g->initializer, &g->n_initializer, sizeof(void *)) = t;
    if (keep) *keep = data;
    return m;
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void test_relative_path_rules(void **s) {
    (void)s;
    const char *bad[] = {"", "/etc/hosts", "\\\\host\\x", "C:\\Windows\\win.ini", "c:x", "../x", "a/../../x",
                         "a\\..\\x", "./x", "a//b", "a/./b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wm_error e = {0};
        assert_int_equal(wm_path_check_relative(bad[i], &e), WM_ERR_INPUT);
        assert_true(e.msg[0] != 0);
    }
    const char *good[] = {"w.bin", "sub/w.bin", "model.onnx.data", "..x", "x.."};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        wm_error e = {0};
        assert_int_equal(wm_path_check_relative(good[i], &e), WM_OK);
    }
}

static void test_symlink_escape(void **s) {
    (void)s;
    char p[256], out[4096];
    path_of(p, sizeof p, "inside.bin");
    FILE *f = fopen(p, "wb");
    fputs("data", f);
    fclose(f);
    path_of(p, sizeof p, "link_in");
    assert_int_equal(symlink("inside.bin", p), 0);
    path_of(p, sizeof p, "link_out");
    assert_int_equal(symlink("/etc/hostname", p), 0);
    wm_error e = {0};
    assert_int_equal(wm_path_resolve_inside(dir, "link_in", 1, out, sizeof out, &e), WM_OK);
    assert_non_null(strstr(out, "inside.bin"));
    assert_int_equal(wm_path_resolve_inside(dir, "link_out", 1, out, sizeof out, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "outside"));
}

static void test_inline_and_external_round_trip(void **s) {
    (void)s;
    wm_onnx_save_opts o;
    wm_onnx_save_opts_default(&o);
    char p[256], d[300];
    float *src;
    wm_onnx_model *m = model_with_tensor(5000, &src);
    wm_error e = {0};
    /* AUTO below the threshold: one file */
    path_of(p, sizeof p, "small.onnx");
    assert_int_equal(wm_onnx_save(m, p, &o, &e), WM_OK);
    snprintf(d, sizeof d, "%s.data", p);
    assert_true(access(d, F_OK) != 0);
    /* AUTO with a threshold the model passes: external, 4 KiB aligned */
    o.threshold_bytes = 1000;
    path_of(p, sizeof p, "ext.onnx");
    assert_int_equal(wm_onnx_save(m, p, &o, &e), WM_OK);
    snprintf(d, sizeof d, "%s.data", p);
    assert_int_equal(wm_file_size(d), 20000);
    assert_true(wm_file_size(p) < 1000);
    /* the in-memory model is unchanged by the save */
    assert_int_equal(m->proto->graph->initializer[0]->data_location, 0);
    assert_int_equal(m->proto->graph->initializer[0]->n_external_data, 0);
    wm_onnx_model *back;
    assert_int_equal(wm_onnx_load(p, &back, &e), WM_OK);
    wm_onnx_tensor *t = back->proto->graph->initializer[0];
    assert_int_equal(t->data_location, WM_ONNX_DATA_EXTERNAL);
    wm_bytes b = wm_onnx_tensor_bytes(t);
    assert_int_equal(b.n, 20000);
    assert_memory_equal(b.p, src, 20000);
    /* re-save the external model inline (NEVER): raw data comes from the mapping */
    o.external = WM_EXTDATA_NEVER;
    path_of(p, sizeof p, "inline.onnx");
    assert_int_equal(wm_onnx_save(back, p, &o, &e), WM_OK);
    wm_onnx_model *again;
    assert_int_equal(wm_onnx_load(p, &again, &e), WM_OK);
    t = again->proto->graph->initializer[0];
    assert_int_equal(t->data_location, 0);
    assert_int_equal(t->n_external_data, 0);
    assert_memory_equal(t->raw_data.p, src, 20000);
    wm_onnx_free(again);
    wm_onnx_free(back);
    wm_onnx_free(m);
}

/* Appends initializer name (n floats, values i + base) to m's graph (bytes in m's arena). */
static void add_tensor(wm_onnx_model *m, const char *name, size_t n, float base) {
    wm_arena *a = &m->arena;
    float *data = wm_arena_alloc(a, n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) data[i] = (float)i + base;
    wm_onnx_tensor *t = wm_pb_new(a, &wm_onnx_tensor_desc);
    t->name = wm_arena_strdup(a, name);
    t->data_type = WM_DT_FLOAT;
    *(int64_t *)wm_vec_push(a, &t->dims, &t->n_dims, sizeof(int64_t)) = (int64_t)n;
    t->raw_data = (wm_bytes){(const uint8_t *)data, n * sizeof(float)};
    wm_onnx_graph *g = m->proto->graph;
    *(wm_onnx_tensor **)wm_vec_push(a, &g->initializer, &g->n_initializer, sizeof(void *)) = t;
}

/* keep_data: a model saved over itself keeps its data file (same inode, old bytes in place) and appends the new
 * tensor; once more than 1/8 of the file would be unreferenced, the file is rewritten instead. */
static void test_keep_data_appends(void **s) {
    (void)s;
    wm_onnx_save_opts o;
    wm_onnx_save_opts_default(&o);
    o.threshold_bytes = 1000;
    char p[256], d[300];
    path_of(p, sizeof p, "keep.onnx");
    snprintf(d, sizeof d, "%s.data", p);
    wm_onnx_model *m = model_with_tensor(5000, NULL);
    add_tensor(m, "V", 3000, 7.0f);
    wm_error e = {0};
    assert_int_equal(wm_onnx_save(m, p, &o, &e), WM_OK);
    wm_onnx_free(m);
    struct stat st0, st1;
    assert_int_equal(stat(d, &st0), 0);
    assert_int_equal(st0.st_size, 20480 + 12000); /* W at 0, V at the next 4 KiB boundary */
    wm_onnx_model *back;
    assert_int_equal(wm_onnx_load(p, &back, &e), WM_OK);
    add_tensor(back, "N", 2000, 3.0f);
    o.keep_data = 1;
    assert_int_equal(wm_onnx_save(back, p, &o, &e), WM_OK);
    wm_onnx_free(back);
    assert_int_equal(stat(d, &st1), 0);
    assert_true(st1.st_ino == st0.st_ino);             /* appended, not rewritten */
    assert_int_equal(st1.st_size, 32768 + 8000);      /* N after V, aligned */
    assert_int_equal(wm_onnx_load(p, &back, &e), WM_OK);
    wm_onnx_graph *g = back->proto->graph;
    assert_int_equal(g->n_initializer, 3);
    for (size_t i = 0; i < 3; i++) {
        wm_bytes b = wm_onnx_tensor_bytes(g->initializer[i]);
        const float *f = (const float *)b.p;
        const char *nm = g->initializer[i]->name;
        float base = !strcmp(nm, "W") ? 0 : !strcmp(nm, "V") ? 7.0f : 3.0f;
        float step = !strcmp(nm, "W") ? 0.5f : 1.0f;
        assert_int_equal(b.n, (!strcmp(nm, "W") ? 5000 : !strcmp(nm, "V") ? 3000 : 2000) * 4);
        for (size_t k = 0; k < b.n / 4; k++) assert_true(f[k] == (float)k * step + base);
    }
    /* drop W (20000 of the file's 40768 bytes): too much dead space, so a full rewrite (a new file) */
    g->initializer[0] = g->initializer[2];
    g->n_initializer = 2;
    assert_int_equal(wm_onnx_save(back, p, &o, &e), WM_OK);
    wm_onnx_free(back);
    assert_int_equal(stat(d, &st1), 0);
    assert_true(st1.st_ino != st0.st_ino);
    assert_int_equal(st1.st_size, 8192 + 12000); /* N (now first) at 0, V at 8192 */
    assert_int_equal(wm_onnx_load(p, &back, &e), WM_OK);
    assert_int_equal(back->proto->graph->n_initializer, 2);
    wm_onnx_free(back);
}

static void test_small_tensors_stay_inline(void **s) {
    (void)s;
    wm_onnx_save_opts o;
    wm_onnx_save_opts_default(&o);
    o.external = WM_EXTDATA_ALWAYS;
    wm_onnx_model *m = model_with_tensor(10, NULL); /* 40 bytes < 1 KiB */
    char p[256], d[300];
    path_of(p, sizeof p, "tiny.onnx");
    wm_error e = {0};
    assert_int_equal(wm_onnx_save(m, p, &o, &e), WM_OK);
    wm_onnx_model *back;
    assert_int_equal(wm_onnx_load(p, &back, &e), WM_OK);
    assert_int_equal(back->proto->graph->initializer[0]->data_location, 0);
    snprintf(d, sizeof d, "%s.data", p);
    assert_true(access(d, F_OK) != 0); /* nothing moved out: no data file */
    wm_onnx_free(back);
    wm_onnx_free(m);
}

static void test_raw_data_must_match_shape(void **s) {
    (void)s;
    wm_onnx_model *m = model_with_tensor(16, NULL);
    wm_onnx_tensor *t = m->proto->graph->initializer[0];
    t->dims[0] = 1ll << 40; /* claims 4 TiB, backed by 64 bytes */
    char p[256];
    path_of(p, sizeof p, "lie.onnx");
    wm_error e = {0};
    assert_int_equal(wm_onnx_save(m, p, NULL, &e), WM_OK);
    wm_onnx_model *back = NULL;
    assert_int_equal(wm_onnx_load(p, &back, &e), WM_ERR_INPUT);
    assert_null(back);
    assert_non_null(strstr(e.msg, "raw_data has 64 bytes"));
    assert_non_null(strstr(e.msg, "'W'"));
    wm_onnx_free(m);
}

static void test_external_keys_checked(void **s) {
    (void)s;
    /* write an external model, then break its keys in memory and save inline-refs verbatim */
    struct { const char *key, *value, *expect; } cases[] = {
        {"offset", "12abc", "unsigned decimal"}, {"offset", "-1", "unsigned decimal"},
        {"length", "99999999", "length"},        {"colour", "red", "unknown key"},
        {"location", "../x", "'..'"},            {"offset", "18446744073709547520", "offset"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wm_onnx_model *m = model_with_tensor(1024, NULL);
        wm_onnx_save_opts o;
        wm_onnx_save_opts_default(&o);
        o.external = WM_EXTDATA_ALWAYS;
        char p[256];
        path_of(p, sizeof p, "k.onnx");
        wm_error e = {0};
        assert_int_equal(wm_onnx_save(m, p, &o, &e), WM_OK);
        wm_onnx_model *ext;
        assert_int_equal(wm_onnx_load(p, &ext, &e), WM_OK);
        wm_onnx_tensor *t = ext->proto->graph->initializer[0];
        /* keep the model referring to the data file but edit one key */
        int found = 0;
        for (size_t k = 0; k < t->n_external_data; k++)
            if (!strcmp(t->external_data[k]->key, cases[i].key)) {
                t->external_data[k]->value = (char *)cases[i].value;
                found = 1;
            }
        if (!found) {
            wm_onnx_sse **kv = wm_vec_push(&ext->arena, &t->external_data, &t->n_external_data, sizeof *kv);
            *kv = wm_pb_new(&ext->arena, &wm_onnx_sse_desc);
            (*kv)->key = (char *)cases[i].key;
            (*kv)->value = (char *)cases[i].value;
        }
        size_t n;
        uint8_t *buf = wm_pb_encode_alloc(&wm_onnx_model_desc, ext->proto, &n);
        char q[256];
        path_of(q, sizeof q, "k2.onnx");
        FILE *f = fopen(q, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        free(buf);
        /* k2.onnx refers to location k.onnx.data (unless the case changed it) */
        wm_onnx_model *bad = NULL;
        wm_err_clear(&e);
        assert_int_equal(wm_onnx_load(q, &bad, &e), WM_ERR_INPUT);
        if (!strstr(e.msg, cases[i].expect)) fail_msg("case %zu: message '%s' lacks '%s'", i, e.msg, cases[i].expect);
        wm_onnx_free(ext);
        wm_onnx_free(m);
    }
}

static void test_over_limit_never_written(void **s) {
    (void)s;
    /* a tensor claiming 3 GiB: raw span over our own mapping of /dev/zero-like memory is not needed,
       the size check happens before writing */
    wm_onnx_model *m = model_with_tensor(4, NULL);
    wm_onnx_tensor *t = m->proto->graph->initializer[0];
    static const uint8_t byte;
    t->raw_data = (wm_bytes){&byte, 3ull << 30}; /* never read: the save must refuse before writing */
    t->dims[0] = (int64_t)(3ull << 30) / 4;
    wm_onnx_save_opts o;
    wm_onnx_save_opts_default(&o);
    o.external = WM_EXTDATA_NEVER;
    char p[256];
    path_of(p, sizeof p, "huge.onnx");
    wm_error e = {0};
    assert_int_equal(wm_onnx_save(m, p, &o, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "2^31-1"));
    assert_true(access(p, F_OK) != 0);
    wm_onnx_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative_path_rules),
        cmocka_unit_test_setup_teardown(test_symlink_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_and_external_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_data_appends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_tensors_stay_inline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_data_must_match_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_external_keys_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_over_limit_never_written, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
