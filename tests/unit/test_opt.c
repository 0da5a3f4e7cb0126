/* Unit tests of the optimizer: shape inference with symbolic values, the folding evaluator, basic passes, fusions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "opt/fold.h"
#include "opt/opt.h"
#include "opt/opt_util.h"
#include "opt/shape.h"

#define NAMES(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)

static void add_opset(wm_onnx_model *m, const char *domain, int64_t version) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = version;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

static wm_onnx_model *new_model(wm_graph **g, int64_t opset) {
    wm_onnx_model *m = wm_onnx_model_new();
    assert_non_null(m);
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    m->proto->graph->name = wm_arena_strdup(&m->arena, "main");
    add_opset(m, "", opset);
    wm_error e = {0};
    assert_int_equal(wm_graph_open(m, m->proto->graph, g, &e), WM_OK);
    return m;
}

static wm_onnx_node *node(wm_graph *g, const char *op, const char *const *in, size_t n_in, const char *const *out,
                          size_t n_out) {
    wm_error e = {0};
    wm_onnx_node *n = wm_graph_add_node(g, op, NULL, NULL, in, n_in, out, n_out, &e);
    if (!n) fail_msg("add %s: %s", op, e.msg);
    return n;
}

static void i64_init(wm_graph *g, const char *name, const int64_t *v, size_t n, int scalar) {
    wm_error e = {0};
    int64_t d = (int64_t)n;
    int64_t *copy = wm_arena_alloc(&wm_graph_model(g)->arena, n * 8 + 8);
    memcpy(copy, v, n * 8);
    assert_int_equal(wm_graph_add_initializer(g, name, WM_DT_INT64, &d, scalar ? 0 : 1,
                                              (wm_bytes){(const uint8_t *)copy, n * 8}, NULL, &e),
                     WM_OK);
}

static void f32_init(wm_graph *g, const char *name, const float *v, const int64_t *dims, size_t rank) {
    wm_error e = {0};
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *copy = wm_arena_alloc(&wm_graph_model(g)->arena, n * 4 + 4);
    memcpy(copy, v, n * 4);
    assert_int_equal(wm_graph_add_initializer(g, name, WM_DT_FLOAT, dims, rank, (wm_bytes){(const uint8_t *)copy, n * 4},
                                              NULL, &e),
                     WM_OK);
}

/* Input x [dims] with dim_params for negative entries (-1 -> "b", -2 -> "s"). */
static void sym_input(wm_graph *g, const char *name, const int64_t *dims, size_t rank) {
    wm_error e = {0};
    assert_int_equal(wm_graph_add_input(g, name, WM_DT_FLOAT, dims, rank, &e), WM_OK);
    wm_onnx_model *m = wm_graph_model(g);
    wm_onnx_value_info *vi = wm_graph_find_value(g, name)->input;
    for (size_t i = 0; i < rank; i++)
        if (dims[i] < 0) vi->type->tensor_type->shape->dim[i]->dim_param = wm_arena_strdup(&m->arena, dims[i] == -1 ? "b" : "s");
}

static const char *symbol_of(const wm_shapes *s, wm_sdim d) {
    return d.k == WM_SD_SYM ? wm_shapes_symbol_name(s, d.v) : NULL;
}

/* ---------------------------------------------------------------- shape inference */

static void test_shape_symbolic_reshape(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    sym_input(g, "x", (int64_t[]){-1, -2, 32}, 3);
    int64_t one = 1, zero = 0, ax0 = 0, minus1 = -1, eight = 8;
    i64_init(g, "i1", &one, 1, 1);
    i64_init(g, "i0", &zero, 1, 1);
    i64_init(g, "ax", &ax0, 1, 0);
    i64_init(g, "m1", &minus1, 1, 0);
    i64_init(g, "c8", &eight, 1, 0);
    node(g, "Shape", NAMES("x"), NAMES("sh"));
    node(g, "Gather", NAMES("sh", "i0"), NAMES("b"));
    node(g, "Gather", NAMES("sh", "i1"), NAMES("s"));
    node(g, "Unsqueeze", NAMES("b", "ax"), NAMES("bu"));
    node(g, "Unsqueeze", NAMES("s", "ax"), NAMES("su"));
    node(g, "Concat", NAMES("bu", "su", "m1", "c8"), NAMES("tgt"));
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_int(g, wm_graph_producer(g, "tgt"), "axis", 0, &e), WM_OK);
    node(g, "Reshape", NAMES("x", "tgt"), NAMES("x4"));
    node(g, "Transpose", NAMES("x4"), NAMES("xt"));
    int64_t perm[4] = {0, 2, 1, 3};
    assert_int_equal(wm_graph_set_attr_ints(g, wm_graph_producer(g, "xt"), "perm", perm, 4, &e), WM_OK);
    node(g, "MatMul", NAMES("xt", "xt"), NAMES("bad")); /* [b,4,s,8] x [b,4,s,8]: inner dims differ: still shaped */
    wm_shapes *s;
    assert_int_equal(wm_shapes_infer(g, &s, &e), WM_OK);
    const wm_tinfo *t = wm_shapes_get(s, "x4");
    assert_non_null(t);
    assert_int_equal(t->rank, 4);
    assert_string_equal(symbol_of(s, t->dim[0]), "b");
    assert_string_equal(symbol_of(s, t->dim[1]), "s");
    assert_int_equal(wm_shapes_dim(s, "x4", 2), 4); /* -1 = 32 / 8 */
    assert_int_equal(wm_shapes_dim(s, "x4", 3), 8);
    assert_int_equal(wm_shapes_dim(s, "xt", 1), 4);
    assert_string_equal(symbol_of(s, wm_shapes_get(s, "xt")->dim[2]), "s");
    const wm_tinfo *tg = wm_shapes_get(s, "tgt");
    assert_int_equal(tg->nval, 4);
    assert_string_equal(symbol_of(s, tg->val[0]), "b");
    assert_int_equal(tg->val[2].k, WM_SD_CONST);
    assert_int_equal(tg->val[2].v, -1);
    assert_int_equal(wm_shapes_dtype(s, "sh"), WM_DT_INT64);
    assert_false(wm_shapes_values_known(s, "tgt"));
    wm_shapes_free(s);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* Conv, FusedConv, pools: output spatial sizes from pads, strides, dilations, auto_pad, ceil_mode; symbolic batch kept */
static void test_shape_window_ops(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    wm_error e = {0};
    sym_input(g, "x", (int64_t[]){-1, 3, 224, 223}, 4);
    static float w[8 * 3 * 7 * 7];
    f32_init(g, "w", w, (int64_t[]){8, 3, 7, 7}, 4);
    wm_onnx_node *c1 = node(g, "Conv", NAMES("x", "w"), NAMES("c1"));
    assert_int_equal(wm_graph_set_attr_ints(g, c1, "strides", (int64_t[]){2, 2}, 2, &e), WM_OK);
    assert_int_equal(wm_graph_set_attr_ints(g, c1, "pads", (int64_t[]){3, 3, 3, 3}, 4, &e), WM_OK);
    wm_onnx_node *c2 = node(g, "Conv", NAMES("x", "w"), NAMES("c2"));
    assert_int_equal(wm_graph_set_attr_string(g, c2, "auto_pad", "SAME_UPPER", &e), WM_OK);
    assert_int_equal(wm_graph_set_attr_ints(g, c2, "strides", (int64_t[]){2, 3}, 2, &e), WM_OK);
    wm_onnx_node *c3 = node(g, "Conv", NAMES("x", "w"), NAMES("c3"));
    assert_int_equal(wm_graph_set_attr_ints(g, c3, "dilations", (int64_t[]){2, 2}, 2, &e), WM_OK);
    wm_onnx_node *p1 = node(g, "MaxPool", NAMES("c1"), NAMES("p1"));
    assert_int_equal(wm_graph_set_attr_ints(g, p1, "kernel_shape", (int64_t[]){3, 3}, 2, &e), WM_OK);
    assert_int_equal(wm_graph_set_attr_ints(g, p1, "strides", (int64_t[]){2, 2}, 2, &e), WM_OK);
    assert_int_equal(wm_graph_set_attr_int(g, p1, "ceil_mode", 1, &e), WM_OK);
    node(g, "GlobalAveragePool", NAMES("p1"), NAMES("gp"));
    /* com.microsoft FusedConv: Conv's window (it was once taken for an op shaped like its input) */
    const char *fin[] = {"x", "w"}, *fout[] = {"f1"};
    wm_onnx_node *f1 = wm_graph_add_node(g, "FusedConv", "com.microsoft", NULL, fin, 2, fout, 1, &e);
    assert_non_null(f1);
    assert_int_equal(wm_graph_set_attr_ints(g, f1, "pads", (int64_t[]){2, 1, 0, 2}, 4, &e), WM_OK);
    wm_shapes *s;
    assert_int_equal(wm_shapes_infer(g, &s, &e), WM_OK);
    assert_int_equal(wm_shapes_dim(s, "f1", 1), 8);
    assert_int_equal(wm_shapes_dim(s, "f1", 2), 220); /* 224 + 2 + 0 - 7 + 1 */
    assert_int_equal(wm_shapes_dim(s, "f1", 3), 220); /* 223 + 1 + 2 - 7 + 1 */
    assert_string_equal(symbol_of(s, wm_shapes_get(s, "c1")->dim[0]), "b");
    assert_int_equal(wm_shapes_dim(s, "c1", 1), 8);
    assert_int_equal(wm_shapes_dim(s, "c1", 2), 112); /* (224 + 6 - 7) / 2 + 1 */
    assert_int_equal(wm_shapes_dim(s, "c1", 3), 112); /* (223 + 6 - 7) / 2 + 1 */
    assert_int_equal(wm_shapes_dim(s, "c2", 2), 112); /* ceil(224 / 2) */
    assert_int_equal(wm_shapes_dim(s, "c2", 3), 75);  /* ceil(223 / 3) */
    assert_int_equal(wm_shapes_dim(s, "c3", 2), 212); /* 224 - 13 + 1 */
    assert_int_equal(wm_shapes_dim(s, "p1", 1), 8);
    assert_int_equal(wm_shapes_dim(s, "p1", 2), 56); /* ceil((112 - 3) / 2) + 1 */
    assert_int_equal(wm_shapes_dim(s, "gp", 3), 1);
    assert_int_equal(wm_shapes_dtype(s, "gp"), WM_DT_FLOAT);
    wm_shapes_free(s);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* com.microsoft GatherBlockQuantized: Gather's shape, a uint8 table's last dim times 8 / bits, the scales' type */
static void test_shape_gather_block_quantized(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    wm_error e = {0};
    assert_int_equal(wm_graph_add_input(g, "ids", WM_DT_INT64, (int64_t[]){2, 7}, 2, &e), WM_OK);
    static const uint8_t codes[10 * 16], scales[10 * 2 * 2];
    assert_int_equal(wm_graph_add_initializer(g, "data", WM_DT_UINT8, (int64_t[]){10, 16}, 2,
                                              (wm_bytes){codes, sizeof codes}, NULL, &e), WM_OK);
    assert_int_equal(wm_graph_add_initializer(g, "sc", WM_DT_FLOAT16, (int64_t[]){10, 2}, 2,
                                              (wm_bytes){scales, 10 * 2 * 2}, NULL, &e), WM_OK);
    const char *in[] = {"data", "ids", "sc"}, *out[] = {"y"};
    wm_onnx_node *n = wm_graph_add_node(g, "GatherBlockQuantized", "com.microsoft", NULL, in, 3, out, 1, &e);
    assert_non_null(n);
    assert_int_equal(wm_graph_set_attr_int(g, n, "block_size", 16, &e), WM_OK);
    wm_shapes *s;
    assert_int_equal(wm_shapes_infer(g, &s, &e), WM_OK);
    assert_int_equal(wm_shapes_get(s, "y")->rank, 3);
    assert_int_equal(wm_shapes_dim(s, "y", 0), 2);
    assert_int_equal(wm_shapes_dim(s, "y", 1), 7);
    assert_int_equal(wm_shapes_dim(s, "y", 2), 32); /* 16 bytes of two 4-bit codes */
    assert_int_equal(wm_shapes_dtype(s, "y"), WM_DT_FLOAT16);
    wm_shapes_free(s);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_shape_static_values_fold(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    wm_error e = {0};
    assert_int_equal(wm_graph_add_input(g, "x", WM_DT_FLOAT, (int64_t[]){3, 4, 5}, 3, &e), WM_OK);
    int64_t two = 2;
    i64_init(g, "i2", &two, 1, 1);
    node(g, "Shape", NAMES("x"), NAMES("sh"));
    node(g, "Gather", NAMES("sh", "i2"), NAMES("d2"));
    node(g, "Cast", NAMES("d2"), NAMES("d2f"));
    assert_int_equal(wm_graph_set_attr_int(g, wm_graph_producer(g, "d2f"), "to", WM_DT_FLOAT, &e), WM_OK);
    node(g, "Mul", NAMES("x", "d2f"), NAMES("y"));
    assert_int_equal(wm_graph_add_output(g, "y", WM_DT_FLOAT, NULL, 0, &e), WM_OK);
    size_t fired = 0;
    assert_int_equal(wm_opt_run_pass(g, "shape_arithmetic", NULL, &fired, &e), WM_OK);
    assert_int_equal(fired, 2); /* Shape(x) = [3, 4, 5] and Gather(., 2) = 5 */
    assert_null(wm_graph_producer(g, "d2"));
    const wm_onnx_tensor *c = wm_graph_constant(g, "d2");
    assert_non_null(c);
    wm_ct v;
    assert_int_equal(wm_ct_from_tensor(c, 0, &v, &e), WM_OK);
    assert_int_equal(wm_ct_geti(&v, 0), 5);
    wm_ct_free(&v);
    assert_int_equal(wm_opt_run_pass(g, "constant_folding", NULL, &fired, &e), WM_OK);
    assert_int_equal(fired, 1); /* the Cast */
    assert_int_equal(wm_graph_proto(g)->n_node, 1);
    assert_int_equal(wm_graph_check(g, &e), WM_OK);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* ---------------------------------------------------------------- folding evaluator */

static wm_ct ct_i64(const int64_t *v, const int64_t *dims, int rank) {
    wm_ct c;
    wm_error e = {0};
    assert_int_equal(wm_ct_alloc(&c, WM_DT_INT64, dims, rank, &e), WM_OK);
    memcpy(c.data, v, (size_t)c.n * 8);
    return c;
}

static void test_fold_ops(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    wm_error e = {0};
    wm_ct in[3], out;
    /* Concat([1,2],[3]) */
    wm_onnx_node *n = node(g, "Concat", NAMES("a", "b"), NAMES("c"));
    assert_int_equal(wm_graph_set_attr_int(g, n, "axis", 0, &e), WM_OK);
    in[0] = ct_i64((int64_t[]){1, 2}, (int64_t[]){2}, 1);
    in[1] = ct_i64((int64_t[]){3}, (int64_t[]){1}, 1);
    assert_int_equal(wm_fold_eval(n, 17, in, 2, &out, 1, 0, &e), WM_OK);
    assert_int_equal(out.n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(wm_ct_geti(&out, (uint64_t)i), i + 1);
    wm_ct_free(&out);
    wm_ct_free(&in[0]);
    wm_ct_free(&in[1]);
    /* Slice([0..9], [-3], [100]) = [7, 8, 9]; step -2 from the end: [9, 7, 5] */
    n = node(g, "Slice", NAMES("d", "s0", "s1"), NAMES("ds"));
    int64_t ten[10];
    for (int i = 0; i < 10; i++) ten[i] = i;
    in[0] = ct_i64(ten, (int64_t[]){10}, 1);
    in[1] = ct_i64((int64_t[]){-3}, (int64_t[]){1}, 1);
    in[2] = ct_i64((int64_t[]){100}, (int64_t[]){1}, 1);
    assert_int_equal(wm_fold_eval(n, 17, in, 3, &out, 1, 0, &e), WM_OK);
    assert_int_equal(out.n, 3);
    assert_int_equal(wm_ct_geti(&out, 0), 7);
    assert_int_equal(wm_ct_geti(&out, 2), 9);
    wm_ct_free(&out);
    wm_ct_free(&in[1]);
    wm_ct_free(&in[2]);
    /* Transpose a 2x3 */
    n = node(g, "Transpose", NAMES("t"), NAMES("tt"));
    wm_ct_free(&in[0]);
    in[0] = ct_i64((int64_t[]){1, 2, 3, 4, 5, 6}, (int64_t[]){2, 3}, 2);
    assert_int_equal(wm_fold_eval(n, 17, in, 1, &out, 1, 0, &e), WM_OK);
    assert_int_equal(out.dims[0], 3);
    assert_int_equal(wm_ct_geti(&out, 1), 4);
    assert_int_equal(wm_ct_geti(&out, 2), 2);
    wm_ct_free(&out);
    /* the size cap refuses a large output */
    n = node(g, "ConstantOfShape", NAMES("shp"), NAMES("big"));
    wm_ct_free(&in[0]);
    in[0] = ct_i64((int64_t[]){1000, 1000}, (int64_t[]){2}, 1);
    e.status = WM_OK;
    assert_int_equal(wm_fold_eval(n, 17, in, 1, &out, 1, 1024, &e), WM_ERR_UNSUPPORTED);
    wm_ct_free(&in[0]);
    /* integer division by zero folds to 0, as the engine's Div computes it (ops/int_math.h), not a crash */
    n = node(g, "Div", NAMES("p", "q"), NAMES("r"));
    in[0] = ct_i64((int64_t[]){5}, NULL, 0);
    in[1] = ct_i64((int64_t[]){0}, NULL, 0);
    e.status = WM_OK;
    assert_int_equal(wm_fold_eval(n, 17, in, 2, &out, 1, 0, &e), WM_OK);
    assert_int_equal(wm_ct_geti(&out, 0), 0);
    wm_ct_free(&out);
    wm_ct_free(&in[0]);
    wm_ct_free(&in[1]);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* ---------------------------------------------------------------- basic passes */

static void test_dce_cse_dedup_identity(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    wm_error e = {0};
    assert_int_equal(wm_graph_add_input(g, "x", WM_DT_FLOAT, (int64_t[]){2, 2}, 2, &e), WM_OK);
    float w[4] = {1, 2, 3, 4};
    f32_init(g, "w1", w, (int64_t[]){2, 2}, 2);
    f32_init(g, "w2", w, (int64_t[]){2, 2}, 2); /* same bytes: dedup */
    node(g, "Identity", NAMES("x"), NAMES("xi"));
    node(g, "MatMul", NAMES("xi", "w1"), NAMES("a"));
    node(g, "MatMul", NAMES("x", "w2"), NAMES("b")); /* equal to a after identity + dedup: CSE */
    node(g, "Add", NAMES("a", "b"), NAMES("y"));
    node(g, "Exp", NAMES("x"), NAMES("dead"));
    assert_int_equal(wm_graph_add_output(g, "y", WM_DT_FLOAT, NULL, 0, &e), WM_OK);
    wm_opt_config c;
    wm_opt_config_default(&c);
    c.level = WM_OPT_BASIC;
    wm_opt_report r;
    assert_int_equal(wm_opt_run(g, &c, &r, &e), WM_OK);
    assert_int_equal(r.nodes_before, 5);
    assert_int_equal(r.nodes_after, 2); /* one MatMul, one Add */
    assert_int_equal(r.inits_after, 1);
    wm_onnx_graph *p = wm_graph_proto(g);
    int matmuls = 0;
    for (size_t i = 0; i < p->n_node; i++) matmuls += !strcmp(p->node[i]->op_type, "MatMul");
    assert_int_equal(matmuls, 1);
    wm_onnx_node *add = wm_graph_producer(g, "y");
    assert_string_equal(add->input[0], add->input[1]);
    assert_int_equal(wm_graph_check(g, &e), WM_OK);
    wm_json j;
    wm_json_init(&j);
    wm_opt_report_json(&r, &j, NULL);
    assert_non_null(strstr(wm_json_text(&j), "\"dead_nodes\""));
    wm_json_free(&j);
    wm_opt_report_free(&r);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_unknown_pass_is_usage_error(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 17);
    wm_opt_config c;
    wm_opt_config_default(&c);
    c.disable[c.n_disable++] = "no_such_pass";
    wm_error e = {0};
    assert_int_equal(wm_opt_run(g, &c, NULL, &e), WM_ERR_USAGE);
    assert_non_null(strstr(e.msg, "no_such_pass"));
    assert_null(wm_opt_pass_find("no_such_pass"));
    assert_non_null(wm_opt_pass_find("gqa"));
    assert_int_equal(wm_opt_pass_find("gqa")->level, WM_OPT_ALL);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* ---------------------------------------------------------------- a fusion */

static void test_rmsnorm_fusion(void **st) {
    (void)st;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g, 18);
    wm_error e = {0};
    sym_input(g, "x", (int64_t[]){-1, 16}, 2);
    float two = 2, eps = 1e-6f, wv[16];
    for (int i = 0; i < 16; i++) wv[i] = 0.5f + (float)i;
    int64_t axes = -1;
    f32_init(g, "two", &two, NULL, 0);
    f32_init(g, "eps", &eps, NULL, 0);
    f32_init(g, "w", wv, (int64_t[]){16}, 1);
    i64_init(g, "axes", &axes, 1, 0);
    node(g, "Pow", NAMES("x", "two"), NAMES("x2"));
    node(g, "ReduceMean", NAMES("x2", "axes"), NAMES("ms"));
    node(g, "Add", NAMES("ms", "eps"), NAMES("me"));
    node(g, "Sqrt", NAMES("me"), NAMES("rt"));
    node(g, "Div", NAMES("x", "rt"), NAMES("n"));
    node(g, "Mul", NAMES("n", "w"), NAMES("y"));
    assert_int_equal(wm_graph_add_output(g, "y", WM_DT_FLOAT, NULL, 0, &e), WM_OK);
    size_t fired = 0;
    assert_int_equal(wm_opt_run_pass(g, "rmsnorm", NULL, &fired, &e), WM_OK);
    assert_int_equal(fired, 1);
    wm_onnx_graph *p = wm_graph_proto(g);
    assert_int_equal(p->n_node, 1);
    assert_string_equal(p->node[0]->op_type, "SimplifiedLayerNormalization");
    assert_string_equal(p->node[0]->input[1], "w");
    assert_true(wm_opt_attr_f(p->node[0], "epsilon", 0) == eps);
    /* a centered input is LayerNorm's, not RMSNorm's: the LayerNorm pass finds nothing here */
    assert_int_equal(wm_opt_run_pass(g, "layernorm", NULL, &fired, &e), WM_OK);
    assert_int_equal(fired, 0);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* ---------------------------------------------------------------- halves */

static void test_half_conversions(void **st) {
    (void)st;
    assert_int_equal(wm_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(wm_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(wm_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(wm_f32_to_f16(65520.0f), 0x7c00);         /* rounds up to infinity */
    assert_int_equal(wm_f32_to_f16(5.960464477539063e-08f), 1); /* 2^-24, the smallest subnormal */
    assert_int_equal(wm_f32_to_f16(2.9802322387695312e-08f), 0); /* 2^-25: a tie, to even (0) */
    assert_int_equal(wm_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie between 1 and next: even */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        assert_int_equal(wm_f32_to_f16(wm_f16_to_f32((uint16_t)h)), h);
    }
    assert_int_equal(wm_f32_to_bf16(1.0f), 0x3f80);
    assert_true(wm_bf16_to_f32(0x4049) > 3.14f && wm_bf16_to_f32(0x4049) < 3.15f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_symbolic_reshape), cmocka_unit_test(test_shape_window_ops),
        cmocka_unit_test(test_shape_gather_block_quantized),
        cmocka_unit_test(test_shape_static_values_fold),
        cmocka_unit_test(test_fold_ops),               cmocka_unit_test(test_dce_cse_dedup_identity),
        cmocka_unit_test(test_unknown_pass_is_usage_error), cmocka_unit_test(test_rmsnorm_fusion),
        cmocka_unit_test(test_half_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
