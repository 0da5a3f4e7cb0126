/* Unit tests of `winml analyze`: one test per rule kind on handmade graphs, rule-file validation, shipped rules. */
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
#include <unistd.h>

#include "analyze/analyze.h"
#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"

#define NAMES(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)

static char dir[64];
static wm_ep_rules *rules;
static const int64_t shape_data[2] = {2, 6};

static const char *rule_text =
    "{\"ep\": \"testep\", \"source\": \"unit test\", \"devices\": [\"npu\"],\n"
    " \"model_checks\": {\"static_shapes\": true, \"int64\": \"cast\", \"control_flow\": false, \"max_opset\": 22},\n"
    " \"rules\": [\n"
    "  {\"op_type\": \"MatMul\", \"since\": 1, \"level\": \"supported\", \"dtypes\": {\"0\": [\"float32\"]}},\n"
    "  {\"op_type\": \"Relu\", \"since\": 1, \"level\": \"supported\", \"max_rank\": 2},\n"
    "  {\"op_type\": \"Sigmoid\", \"since\": 1, \"level\": \"supported\", \"static_shapes\": true},\n"
    "  {\"op_type\": \"Shape\", \"since\": 1, \"level\": \"supported\"},\n"
    "  {\"op_type\": \"Reshape\", \"since\": 5, \"level\": \"supported\", \"const_inputs\": [1], \"reason\": \"shape must be constant\"},\n"
    "  {\"op_type\": \"Softmax\", \"since\": 1, \"level\": \"supported\", \"attrs\": {\"axis\": [-1]}},\n"
    "  {\"op_type\": \"Gelu\", \"since\": 20, \"until\": null, \"level\": \"supported\"},\n"
    "  {\"op_type\": \"GroupQueryAttention\", \"domain\": \"com.microsoft\", \"since\": 1, \"level\": \"unsupported\",\n"
    "   \"reason\": \"no op builder\"}\n"
    " ]}\n";

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **s) {
    (void)s;
    if (wm_test_tmpdir_make(dir, sizeof dir, "analyze")) return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/testep.json", dir);
    write_file(path, rule_text);
    wm_error e = {0};
    if (wm_ep_rules_load(path, &rules, &e)) {
        fprintf(stderr, "load: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **s) {
    (void)s;
    wm_ep_rules_free(rules);
    return wm_test_tmpdir_remove(dir);
}

static void add_opset(wm_onnx_model *m, const char *domain, int64_t version) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = version;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

static wm_onnx_model *new_model(wm_graph **g) {
    wm_onnx_model *m = wm_onnx_model_new();
    assert_non_null(m);
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    add_opset(m, "", 17);
    add_opset(m, "com.microsoft", 1);
    wm_error e = {0};
    assert_int_equal(wm_graph_open(m, m->proto->graph, g, &e), WM_OK);
    return m;
}

static wm_onnx_node *add(wm_graph *g, const char *op, const char *domain, const char *name, const char *const *in,
                         size_t n_in, const char *const *out, size_t n_out) {
    wm_error e = {0};
    wm_onnx_node *n = wm_graph_add_node(g, op, domain, name, in, n_in, out, n_out, &e);
    if (!n) fail_msg("add %s: %s", op, e.msg);
    return n;
}

static void input(wm_graph *g, const char *name, int32_t dt, const int64_t *dims, size_t nd) {
    wm_error e = {0};
    if (wm_graph_add_input(g, name, dt, dims, nd, &e)) fail_msg("input %s: %s", name, e.msg);
}

/* Analyzes g with the test rules; checks node i's level and that its reason contains want. */
static void expect(wm_graph *g, size_t i, wm_level level, const char *want) {
    wm_analysis a;
    wm_error e = {0};
    assert_int_equal(wm_analyze_graph(g, rules, WM_DEV_NPU, &a, &e), WM_OK);
    assert_true(i < a.n_nodes);
    if (a.level[i] != level)
        fail_msg("node %zu: level %s, want %s (%s)", i, wm_level_name(a.level[i]), wm_level_name(level),
                 a.reason[i] ? a.reason[i] : "");
    if (want && (!a.reason[i] || !strstr(a.reason[i], want)))
        fail_msg("node %zu: reason '%s' lacks '%s'", i, a.reason[i] ? a.reason[i] : "(none)", want);
    wm_analysis_free(&a);
}

static void test_dtype(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    input(g, "A", WM_DT_FLOAT16, (int64_t[]){2, 2}, 2);
    input(g, "B", WM_DT_FLOAT16, (int64_t[]){2, 2}, 2);
    input(g, "C", WM_DT_FLOAT, (int64_t[]){2, 2}, 2);
    add(g, "MatMul", NULL, "/m/fp16", NAMES("A", "B"), NAMES("Y"));
    add(g, "MatMul", NULL, "/m/fp32", NAMES("C", "C"), NAMES("Z"));
    add(g, "MatMul", NULL, "/m/untyped", NAMES("Y", "Z"), NAMES("W")); /* Y has no known type */
    expect(g, 0, WM_LEVEL_UNSUPPORTED, "dtype float16");
    expect(g, 1, WM_LEVEL_SUPPORTED, NULL);
    expect(g, 2, WM_LEVEL_SUPPORTED, "unknown (not checked)");
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_rank(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    input(g, "X3", WM_DT_FLOAT, (int64_t[]){1, 2, 3}, 3);
    input(g, "X2", WM_DT_FLOAT, (int64_t[]){2, 3}, 2);
    add(g, "Relu", NULL, NULL, NAMES("X3"), NAMES("Y3"));
    add(g, "Relu", NULL, NULL, NAMES("X2"), NAMES("Y2"));
    expect(g, 0, WM_LEVEL_UNSUPPORTED, "rank 3");
    expect(g, 1, WM_LEVEL_SUPPORTED, NULL);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_static_shape(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    input(g, "D", WM_DT_FLOAT, (int64_t[]){-1, 3}, 2);
    input(g, "S", WM_DT_FLOAT, (int64_t[]){4, 3}, 2);
    add(g, "Sigmoid", NULL, NULL, NAMES("D"), NAMES("Y"));
    add(g, "Sigmoid", NULL, NULL, NAMES("S"), NAMES("Z"));
    expect(g, 0, WM_LEVEL_UNSUPPORTED, "dynamic dim");
    /* Z has no recorded type, so it is not known to be dynamic */
    expect(g, 1, WM_LEVEL_SUPPORTED, NULL);
    /* and the model-level check reports the symbolic graph input */
    wm_analysis a;
    wm_error e = {0};
    assert_int_equal(wm_analyze_graph(g, rules, WM_DEV_NPU, &a, &e), WM_OK);
    assert_true(a.n_issues >= 1);
    assert_string_equal(a.issues[0].check, "static_shapes");
    assert_true(a.issues[0].blocking);
    wm_analysis_free(&a);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_const_input(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    wm_error e = {0};
    input(g, "X", WM_DT_FLOAT, (int64_t[]){3, 4}, 2);
    assert_int_equal(wm_graph_add_initializer(g, "shape", WM_DT_INT64, (int64_t[]){2}, 1,
                                              (wm_bytes){(const uint8_t *)shape_data, sizeof shape_data}, NULL, &e),
                     WM_OK);
    add(g, "Shape", NULL, NULL, NAMES("X"), NAMES("dyn_shape"));
    add(g, "Reshape", NULL, NULL, NAMES("X", "dyn_shape"), NAMES("Y"));
    add(g, "Reshape", NULL, NULL, NAMES("X", "shape"), NAMES("Z"));
    expect(g, 1, WM_LEVEL_UNSUPPORTED, "input 1 ('dyn_shape') must be constant");
    expect(g, 2, WM_LEVEL_SUPPORTED, NULL);
    wm_analysis a;
    assert_int_equal(wm_analyze_graph(g, rules, WM_DEV_NPU, &a, &e), WM_OK);
    /* Shape | Reshape(CPU) | Reshape: two EP runs, dyn_shape and X... cross into the CPU node */
    assert_int_equal(a.ep_subgraphs, 2);
    assert_int_equal(a.cpu_nodes, 1);
    assert_int_equal(a.crossing_tensors, 1); /* dyn_shape: Shape (EP) -> Reshape (CPU) */
    wm_analysis_free(&a);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_attr_value(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    wm_error e = {0};
    input(g, "X", WM_DT_FLOAT, (int64_t[]){3, 4}, 2);
    wm_onnx_node *a1 = add(g, "Softmax", NULL, NULL, NAMES("X"), NAMES("Y"));
    wm_onnx_node *a2 = add(g, "Softmax", NULL, NULL, NAMES("X"), NAMES("Z"));
    add(g, "Softmax", NULL, NULL, NAMES("X"), NAMES("W")); /* default axis */
    assert_int_equal(wm_graph_set_attr_int(g, a1, "axis", 0, &e), WM_OK);
    assert_int_equal(wm_graph_set_attr_int(g, a2, "axis", -1, &e), WM_OK);
    expect(g, 0, WM_LEVEL_UNSUPPORTED, "attribute axis=0 not allowed");
    expect(g, 1, WM_LEVEL_SUPPORTED, NULL);
    expect(g, 2, WM_LEVEL_SUPPORTED, NULL);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_opset_range(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g); /* ai.onnx 17: Gelu's rule starts at 20 */
    input(g, "X", WM_DT_FLOAT, (int64_t[]){3, 4}, 2);
    add(g, "Gelu", NULL, NULL, NAMES("X"), NAMES("Y"));
    expect(g, 0, WM_LEVEL_UNSUPPORTED, "model opset 17");
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_unknown_op_and_contrib(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    input(g, "X", WM_DT_FLOAT, (int64_t[]){3, 4}, 2);
    add(g, "FooBar", NULL, "/model/layers.0/attn/foo/FooBar", NAMES("X"), NAMES("Y"));
    add(g, "GroupQueryAttention", "com.microsoft", "/model/layers.1/attn/GroupQueryAttention", NAMES("X"), NAMES("Z"));
    add(g, "Relu", NULL, "/model/layers.1/mlp/act/Relu", NAMES("X"), NAMES("W"));
    expect(g, 0, WM_LEVEL_UNKNOWN, "no rule for FooBar");
    expect(g, 1, WM_LEVEL_UNSUPPORTED, "no op builder");
    /* component summary: layers 0-1 attn grouped, with the culprits named */
    wm_analysis a;
    wm_error e = {0};
    assert_int_equal(wm_analyze_graph(g, rules, WM_DEV_NPU, &a, &e), WM_OK);
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_analysis_components_json(g, &a, &j);
    wm_json_obj_end(&j);
    const char *t = wm_json_text(&j);
    if (!strstr(t, "layers 0-1 attn: unsupported on testep/npu because of FooBar, GroupQueryAttention"))
        fail_msg("components: %s", t);
    assert_non_null(strstr(t, "layers 1 mlp"));
    wm_json_free(&j);
    wm_analysis_free(&a);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* Fused nodes without a scope join their consumer's component, else their producer's. */
static void test_components_of_unscoped_nodes(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    input(g, "X", WM_DT_FLOAT, (int64_t[]){3, 4}, 2);
    add(g, "Relu", NULL, "SkipLayerNorm_1", NAMES("X"), NAMES("A"));        /* consumer is layer 2 attn */
    add(g, "Relu", NULL, "Norm_2", NAMES("A"), NAMES("B"));                 /* chain: consumer of a consumer */
    add(g, "MatMul", NULL, "/model/layers.2/attn/q_proj/MatMul", NAMES("B", "B"), NAMES("C"));
    add(g, "Relu", NULL, "Gelu_3", NAMES("C"), NAMES("D"));                 /* no consumer: its producer's */
    add(g, "Relu", NULL, "Lonely_4", NAMES("X"), NAMES("E"));               /* neither: top level */
    wm_analysis a;
    wm_error e = {0};
    assert_int_equal(wm_analyze_graph(g, rules, WM_DEV_NPU, &a, &e), WM_OK);
    wm_component *cs = NULL;
    size_t n = 0;
    assert_int_equal(wm_components(g, &a, &cs, &n, &e), WM_OK);
    assert_int_equal(n, 2);
    assert_string_equal(cs[0].name, "layers 2 attn");
    assert_int_equal(cs[0].nodes, 4);
    assert_string_equal(cs[1].name, "(top level)");
    assert_int_equal(cs[1].nodes, 1);
    free(cs);
    wm_analysis_free(&a);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_scope_keys(void **s) {
    (void)s;
    char k[128];
    long l;
    wm_scope_key("/model/layers.3/attn/q_proj/MatMul", k, sizeof k, &l);
    assert_string_equal(k, "layers.#/attn");
    assert_int_equal(l, 3);
    wm_scope_key("/encoder/layer.0/attention/self/query/MatMul", k, sizeof k, &l);
    assert_string_equal(k, "encoder/layer.#/attention");
    assert_int_equal(l, 0);
    wm_scope_key("/model/embed_tokens/Gather", k, sizeof k, &l);
    assert_string_equal(k, "embed_tokens");
    assert_int_equal(l, -1);
    wm_scope_key("MatMul_12", k, sizeof k, &l);
    assert_string_equal(k, "(top level)");
}

/* Loads text as a rule file; returns the error message (static) or NULL on success. */
static const char *load_bad(const char *text) {
    static wm_error e;
    memset(&e, 0, sizeof e);
    char path[128];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    write_file(path, text);
    wm_ep_rules *r = NULL;
    wm_status st = wm_ep_rules_load(path, &r, &e);
    wm_ep_rules_free(r);
    return st == WM_OK ? NULL : e.msg;
}

static void test_malformed_rules(void **s) {
    (void)s;
    const char *head = "{\"ep\": \"x\", \"source\": \"s\", \"devices\": [\"gpu\"], \"rules\": [";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s{\"op_type\": \"Add\", \"since\": 1, \"level\": \"supported\"},"
                              "{\"op_type\": \"Mul\", \"since\": 1, \"level\": \"maybe\"}]}", head);
    const char *msg = load_bad(buf);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "bad.json"));
    assert_non_null(strstr(msg, "rules[1] (Mul).level"));
    snprintf(buf, sizeof buf, "%s{\"op_type\": \"Add\", \"since\": 1, \"level\": \"supported\", \"dtypes\": {\"0\": [\"float33\"]}}]}", head);
    msg = load_bad(buf);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "rules[0] (Add).dtypes.0: unknown dtype 'float33'"));
    snprintf(buf, sizeof buf, "%s{\"op_type\": \"Add\", \"since\": 3, \"until\": 2, \"level\": \"supported\"}]}", head);
    assert_non_null(strstr(load_bad(buf), "rules[0] (Add).until"));
    snprintf(buf, sizeof buf, "%s{\"op_type\": \"Add\", \"since\": 1, \"level\": \"supported\", \"colour\": 1}]}", head);
    assert_non_null(strstr(load_bad(buf), "colour: unknown field"));
    snprintf(buf, sizeof buf, "%s{\"op_type\": \"Add\", \"since\": 1, \"level\": \"supported\", \"devices\": [\"npu\"]}]}", head);
    assert_non_null(strstr(load_bad(buf), "devices"));
    assert_non_null(strstr(load_bad("{\"ep\": \"x\", \"devices\": [\"gpu\"], \"rules\": []}"), "source"));
    assert_non_null(strstr(load_bad("{not json"), "not valid JSON"));
    assert_null(load_bad("{\"ep\": \"x\", \"source\": \"s\", \"devices\": [\"gpu\"], \"rules\": []}"));
}

static void test_shipped_rules_load(void **s) {
    (void)s;
    const char *src = getenv("WM_SOURCE_DIR");
    if (!src) fail_msg("WM_SOURCE_DIR is not set (ctest sets it to the source folder)");
    char d[1024];
    snprintf(d, sizeof d, "%s/data/ep_rules", src);
    DIR *dd = opendir(d);
    assert_non_null(dd);
    struct dirent *ent;
    int n = 0;
    while ((ent = readdir(dd))) {
        size_t l = strlen(ent->d_name);
        if (l < 6 || strcmp(ent->d_name + l - 5, ".json")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", d, ent->d_name);
        wm_ep_rules *r = NULL;
        wm_error e = {0};
        if (wm_ep_rules_load(path, &r, &e)) fail_msg("%s", e.msg);
        assert_true(r->n_rules > 10);
        assert_true(strlen(r->source) > 20);
        if (!strcmp(r->ep, "cpu")) {
            assert_non_null(wm_ep_rules_find(r, "", "MatMul", 17, WM_DEV_CPU, NULL));
            assert_non_null(wm_ep_rules_find(r, "com.microsoft", "GroupQueryAttention", 1, WM_DEV_CPU, NULL));
            assert_null(wm_ep_rules_find(r, "", "Gelu", 17, WM_DEV_CPU, NULL));
        }
        wm_ep_rules_free(r);
        n++;
    }
    closedir(dd);
    assert_int_equal(n, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype),          cmocka_unit_test(test_rank),
        cmocka_unit_test(test_static_shape),   cmocka_unit_test(test_const_input),
        cmocka_unit_test(test_attr_value),     cmocka_unit_test(test_opset_range),
        cmocka_unit_test(test_unknown_op_and_contrib), cmocka_unit_test(test_scope_keys),
        cmocka_unit_test(test_components_of_unscoped_nodes),
        cmocka_unit_test(test_malformed_rules), cmocka_unit_test(test_shipped_rules_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
