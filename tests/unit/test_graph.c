/* Unit tests of the graph IR: index, queries, edits, topological sort, checks, save/reload, real models. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "unit_tmpdir.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"

#define NAMES(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)
#define NONE_ NULL, 0
#define TESTDATA "/usr/share/libonnx-testdata/data/node/"

static char dir[64];
static const float w_data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const float b_data[3] = {0.5f, -0.5f, 0.25f};

static int setup(void **s) {
    (void)s;
    return wm_test_tmpdir_make(dir, sizeof dir, "graph");
}

static int teardown(void **s) {
    (void)s;
    return wm_test_tmpdir_remove(dir);
}

#define OK(call)                                                         \
    do {                                                                 \
        wm_error e_ = {0};                                               \
        wm_status s_ = (call);                                           \
        if (s_ != WM_OK) fail_msg("%s: %s (%d)", #call, e_.msg, (int)s_); \
    } while (0)

static void add_opset(wm_onnx_model *m, const char *domain, int64_t version) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = version;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

/* An empty model with a graph named "main", opset 17 and com.microsoft 1; *g opened over it. */
static wm_onnx_model *new_model(wm_graph **g) {
    wm_onnx_model *m = wm_onnx_model_new();
    assert_non_null(m);
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    m->proto->graph->name = wm_arena_strdup(&m->arena, "main");
    add_opset(m, "", 17);
    add_opset(m, "com.microsoft", 1);
    wm_error e = {0};
    assert_int_equal(wm_graph_open(m, m->proto->graph, g, &e), WM_OK);
    return m;
}

static wm_onnx_node *add(wm_graph *g, const char *op, const char *name, const char *const *in, size_t n_in,
                         const char *const *out, size_t n_out) {
    wm_error e = {0};
    wm_onnx_node *n = wm_graph_add_node(g, op, NULL, name, in, n_in, out, n_out, &e);
    if (!n) fail_msg("add %s: %s", op, e.msg);
    return n;
}

/* X[1,4] -> MatMul(W[4,3]) -> XW -> Add(B[3]) -> XWB -> Relu -> Y[1,3] */
static wm_onnx_model *mlp(wm_graph **g) {
    wm_onnx_model *m = new_model(g);
    wm_error e = {0};
    assert_int_equal(wm_graph_add_input(*g, "X", WM_DT_FLOAT, (int64_t[]){1, 4}, 2, &e), WM_OK);
    assert_int_equal(wm_graph_add_initializer(*g, "W", WM_DT_FLOAT, (int64_t[]){4, 3}, 2,
                                              (wm_bytes){(const uint8_t *)w_data, sizeof w_data}, NULL, &e),
                     WM_OK);
    assert_int_equal(wm_graph_add_initializer(*g, "B", WM_DT_FLOAT, (int64_t[]){3}, 1,
                                              (wm_bytes){(const uint8_t *)b_data, sizeof b_data}, NULL, &e),
                     WM_OK);
    add(*g, "MatMul", "mm", NAMES("X", "W"), NAMES("XW"));
    add(*g, "Add", "add", NAMES("XW", "B"), NAMES("XWB"));
    add(*g, "Relu", "relu", NAMES("XWB"), NAMES("Y"));
    assert_int_equal(wm_graph_add_output(*g, "Y", WM_DT_FLOAT, (int64_t[]){1, -1}, 2, &e), WM_OK);
    return m;
}

/* "a,b,c": the node names in graph order. */
static const char *order(const wm_graph *g) {
    static char buf[512];
    const wm_onnx_graph *p = wm_graph_proto(g);
    buf[0] = 0;
    for (size_t i = 0; i < p->n_node; i++) {
        if (i) strcat(buf, ",");
        strcat(buf, p->node[i]->name ? p->node[i]->name : "?");
    }
    return buf;
}

static wm_onnx_node *node_named(const wm_graph *g, const char *name) {
    const wm_onnx_graph *p = wm_graph_proto(g);
    for (size_t i = 0; i < p->n_node; i++)
        if (p->node[i]->name && strcmp(p->node[i]->name, name) == 0) return p->node[i];
    fail_msg("no node %s", name);
    return NULL;
}

/* 1 when singular field num of message m (type d) was present on the wire. */
static int was_present(const wm_pb_msg *d, const void *m, uint32_t num) {
    for (size_t i = 0; i < d->nfields; i++)
        if (d->fields[i].num == num) return (int)(((const wm_pb_base *)m)->has >> i & 1);
    fail_msg("%s has no field %u", d->name, (unsigned)num);
    return 0;
}

static void reverse_nodes(wm_graph *g) {
    wm_onnx_graph *p = wm_graph_proto(g);
    for (size_t i = 0; i < p->n_node / 2; i++) {
        wm_onnx_node *t = p->node[i];
        p->node[i] = p->node[p->n_node - 1 - i];
        p->node[p->n_node - 1 - i] = t;
    }
}

/* ---------------------------------------------------------------- tests */

static void test_producers_and_consumers(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    wm_onnx_node *mm = node_named(g, "mm"), *ad = node_named(g, "add"), *relu = node_named(g, "relu");
    assert_ptr_equal(wm_graph_producer(g, "XW"), mm);
    assert_ptr_equal(wm_graph_producer(g, "Y"), relu);
    assert_null(wm_graph_producer(g, "X"));
    assert_null(wm_graph_producer(g, "W"));
    size_t n;
    const wm_use *u = wm_graph_consumers(g, "XW", &n);
    assert_int_equal(n, 1);
    assert_ptr_equal(u[0].node, ad);
    assert_int_equal(u[0].slot, 0);
    u = wm_graph_consumers(g, "B", &n);
    assert_int_equal(n, 1);
    assert_int_equal(u[0].slot, 1);
    assert_null(wm_graph_consumers(g, "Y", &n));
    assert_int_equal(n, 0);
    const wm_value *x = wm_graph_find_value(g, "X"), *y = wm_graph_find_value(g, "Y");
    assert_non_null(x->input);
    assert_null(x->output);
    assert_int_equal(x->type->tensor_type->elem_type, WM_DT_FLOAT);
    assert_int_equal(x->type->tensor_type->shape->n_dim, 2);
    assert_non_null(y->output);
    assert_null(y->input);
    assert_int_equal(y->type->tensor_type->shape->dim[0]->dim_value, 1);
    assert_ptr_equal(wm_graph_initializer(g, "W"), wm_graph_proto(g)->initializer[0]);
    assert_null(wm_graph_initializer(g, "X"));
    assert_null(wm_graph_find_value(g, "nope"));
    assert_null(wm_graph_find_value(g, ""));
    /* an omitted optional input is not a value */
    wm_onnx_node *clip = add(g, "Clip", "clip", NAMES("Y", "", "B"), NAMES("Z"));
    assert_null(wm_graph_find_value(g, ""));
    u = wm_graph_consumers(g, "B", &n);
    assert_int_equal(n, 2);
    assert_ptr_equal(u[1].node, clip);
    assert_int_equal(u[1].slot, 2);
    OK(wm_graph_check(g, &e_));
    OK(wm_graph_topo_sort(g, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_topo_sort_restores_order(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    reverse_nodes(g);
    assert_string_equal(order(g), "relu,add,mm");
    OK(wm_graph_topo_sort(g, &e_));
    assert_string_equal(order(g), "mm,add,relu");
    /* stable: among ready nodes the earliest in the current order goes first */
    add(g, "Neg", "b1", NAMES("X"), NAMES("b1o"));
    add(g, "Neg", "a1", NAMES("X"), NAMES("a1o"));
    add(g, "Neg", "b2", NAMES("b1o"), NAMES("b2o"));
    add(g, "Neg", "a2", NAMES("a1o"), NAMES("a2o"));
    wm_onnx_graph *p = wm_graph_proto(g); /* -> b2,a2,b1,a1,mm,add,relu */
    wm_onnx_node *tmp[7] = {p->node[5], p->node[6], p->node[3], p->node[4], p->node[0], p->node[1], p->node[2]};
    memcpy(p->node, tmp, sizeof tmp);
    assert_string_equal(order(g), "b2,a2,b1,a1,mm,add,relu");
    OK(wm_graph_topo_sort(g, &e_));
    assert_string_equal(order(g), "b1,b2,a1,a2,mm,add,relu");
    OK(wm_graph_topo_sort(g, &e_)); /* already sorted: unchanged */
    assert_string_equal(order(g), "b1,b2,a1,a2,mm,add,relu");
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_cycle_and_undefined(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    /* downstream of a cycle: d waits on c, which is on the cycle a -> b -> c -> a */
    add(g, "Neg", "d", NAMES("c_out"), NAMES("d_out"));
    add(g, "Add", "a", NAMES("X", "c_out"), NAMES("a_out"));
    add(g, "Neg", "b", NAMES("a_out"), NAMES("b_out"));
    add(g, "Neg", "c", NAMES("b_out"), NAMES("c_out"));
    wm_error e = {0};
    assert_int_equal(wm_graph_topo_sort(g, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "cycle"));
    assert_null(strstr(e.msg, "'d'")); /* d is not on the cycle */
    assert_true(strstr(e.msg, "node 'a'") || strstr(e.msg, "node 'b'") || strstr(e.msg, "node 'c'"));
    assert_string_equal(order(g), "mm,add,relu,d,a,b,c"); /* unchanged on error */
    /* a self loop */
    OK(wm_graph_remove_node(g, node_named(g, "a"), &e_));
    add(g, "Add", "self", NAMES("X", "self_out"), NAMES("self_out"));
    OK(wm_graph_remove_node(g, node_named(g, "b"), &e_));
    OK(wm_graph_remove_node(g, node_named(g, "c"), &e_));
    OK(wm_graph_remove_node(g, node_named(g, "d"), &e_));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_topo_sort(g, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "node 'self' (Add)"));
    assert_non_null(strstr(e.msg, "'self_out'"));
    OK(wm_graph_remove_node(g, node_named(g, "self"), &e_));
    OK(wm_graph_topo_sort(g, &e_));
    /* an input nobody defines */
    add(g, "Neg", "lost", NAMES("ghost"), NAMES("lost_out"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_topo_sort(g, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "node 'lost' (Neg)"));
    assert_non_null(strstr(e.msg, "'ghost'"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_check(g, &e), WM_ERR_CHECK);
    assert_non_null(strstr(e.msg, "ghost"));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_check_ssa(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    OK(wm_graph_check(g, &e_));
    wm_onnx_node *dup = add(g, "Neg", "dup", NAMES("X"), NAMES("XW")); /* second producer of XW */
    wm_error e = {0};
    assert_int_equal(wm_graph_check(g, &e), WM_ERR_CHECK);
    assert_non_null(strstr(e.msg, "'XW'"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_topo_sort(g, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "'XW'"));
    /* removing the first producer leaves the second as the producer */
    OK(wm_graph_remove_node(g, node_named(g, "mm"), &e_));
    assert_ptr_equal(wm_graph_producer(g, "XW"), dup);
    assert_int_equal(wm_graph_find_value(g, "XW")->n_producers, 1);
    OK(wm_graph_check(g, &e_));
    /* a node output that is also an initializer */
    add(g, "Neg", "over", NAMES("X"), NAMES("W"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_check(g, &e), WM_ERR_CHECK);
    assert_non_null(strstr(e.msg, "'W'"));
    OK(wm_graph_remove_node(g, node_named(g, "over"), &e_));
    /* an undefined graph output */
    OK(wm_graph_add_output(g, "nowhere", WM_DT_FLOAT, NULL, 0, &e_));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_check(g, &e), WM_ERR_CHECK);
    assert_non_null(strstr(e.msg, "graph output 'nowhere'"));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_rename_everywhere(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    wm_onnx_graph *p = wm_graph_proto(g);
    /* a value_info and a quantization annotation for XW */
    wm_onnx_value_info *vi = wm_pb_new(&m->arena, &wm_onnx_value_info_desc);
    vi->name = wm_arena_strdup(&m->arena, "XW");
    *(wm_onnx_value_info **)wm_vec_push(&m->arena, &p->value_info, &p->n_value_info, sizeof vi) = vi;
    wm_onnx_tensor_annotation *qa = wm_pb_new(&m->arena, &wm_onnx_tensor_annotation_desc);
    qa->tensor_name = wm_arena_strdup(&m->arena, "XW");
    *(wm_onnx_tensor_annotation **)wm_vec_push(&m->arena, &p->quantization_annotation,
                                               &p->n_quantization_annotation, sizeof qa) = qa;
    OK(wm_graph_reindex(g, &e_));
    assert_ptr_equal(wm_graph_find_value(g, "XW")->info, vi);

    OK(wm_graph_rename_value(g, "XW", "hidden", &e_));
    wm_onnx_node *mm = node_named(g, "mm"), *ad = node_named(g, "add"), *relu = node_named(g, "relu");
    assert_string_equal(mm->output[0], "hidden");
    assert_string_equal(ad->input[0], "hidden");
    assert_string_equal(vi->name, "hidden");
    assert_string_equal(qa->tensor_name, "hidden");
    assert_null(wm_graph_find_value(g, "XW"));
    assert_ptr_equal(wm_graph_producer(g, "hidden"), mm);
    assert_ptr_equal(wm_graph_find_value(g, "hidden")->info, vi);
    size_t n;
    assert_ptr_equal(wm_graph_consumers(g, "hidden", &n)[0].node, ad);

    OK(wm_graph_rename_value(g, "X", "input0", &e_));
    assert_string_equal(p->input[0]->name, "input0");
    assert_string_equal(mm->input[0], "input0");
    assert_non_null(wm_graph_find_value(g, "input0")->input);

    OK(wm_graph_rename_value(g, "W", "weight", &e_));
    assert_string_equal(p->initializer[0]->name, "weight");
    assert_string_equal(mm->input[1], "weight");
    assert_ptr_equal(wm_graph_initializer(g, "weight"), p->initializer[0]);
    assert_null(wm_graph_initializer(g, "W"));

    OK(wm_graph_rename_value(g, "Y", "out", &e_));
    assert_string_equal(p->output[0]->name, "out");
    assert_string_equal(relu->output[0], "out");
    assert_int_equal(wm_graph_find_value(g, "out")->type->tensor_type->elem_type, WM_DT_FLOAT);

    wm_error e = {0};
    assert_int_equal(wm_graph_rename_value(g, "out", "weight", &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "already"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_rename_value(g, "missing", "x2", &e), WM_ERR_INPUT);
    /* the incremental index equals a rebuilt one */
    OK(wm_graph_check(g, &e_));
    OK(wm_graph_reindex(g, &e_));
    assert_ptr_equal(wm_graph_producer(g, "hidden"), mm);
    assert_ptr_equal(wm_graph_consumers(g, "weight", &n)[0].node, mm);
    OK(wm_graph_check(g, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_rename_non_ssa_value(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    add(g, "Neg", "dup", NAMES("X"), NAMES("XW"));
    OK(wm_graph_rename_value(g, "XW", "z", &e_)); /* two producers: the slow path renames both */
    assert_string_equal(node_named(g, "mm")->output[0], "z");
    assert_string_equal(node_named(g, "dup")->output[0], "z");
    assert_string_equal(node_named(g, "add")->input[0], "z");
    assert_int_equal(wm_graph_find_value(g, "z")->n_producers, 2);
    assert_null(wm_graph_find_value(g, "XW"));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_replace_uses_and_remove(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    /* X -> Identity -> I, used by a new Neg and by Relu's sibling */
    wm_onnx_node *id = add(g, "Identity", "id", NAMES("XWB"), NAMES("I"));
    wm_onnx_node *neg = add(g, "Neg", "neg", NAMES("I"), NAMES("N"));
    wm_onnx_node *mul = add(g, "Mul", "mul", NAMES("I", "I"), NAMES("M"));
    size_t n;
    wm_graph_consumers(g, "I", &n);
    assert_int_equal(n, 3);
    OK(wm_graph_replace_uses(g, "I", "XWB", &e_));
    assert_string_equal(neg->input[0], "XWB");
    assert_string_equal(mul->input[0], "XWB");
    assert_string_equal(mul->input[1], "XWB");
    assert_null(wm_graph_consumers(g, "I", &n));
    const wm_use *u = wm_graph_consumers(g, "XWB", &n);
    assert_int_equal(n, 5); /* relu, id, neg, mul x2 */
    int seen_mul1 = 0;
    for (size_t i = 0; i < n; i++) seen_mul1 |= u[i].node == mul && u[i].slot == 1;
    assert_true(seen_mul1);
    OK(wm_graph_remove_node(g, id, &e_));
    assert_null(wm_graph_find_value(g, "I"));
    assert_null(wm_graph_producer(g, "I"));
    wm_graph_consumers(g, "XWB", &n);
    assert_int_equal(n, 4);
    assert_int_equal(wm_graph_proto(g)->n_node, 5);
    OK(wm_graph_check(g, &e_));
    wm_error e = {0};
    assert_int_equal(wm_graph_remove_node(g, id, &e), WM_ERR_INPUT); /* already gone */
    /* removing a producer whose output is still used leaves a dangling use */
    OK(wm_graph_remove_node(g, node_named(g, "add"), &e_));
    assert_null(wm_graph_producer(g, "XWB"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_check(g, &e), WM_ERR_CHECK);
    assert_non_null(strstr(e.msg, "'XWB'"));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_unique_names(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    add(g, "Neg", "t_1", NAMES("X"), NAMES("t_2")); /* a node name and a value in the way */
    add(g, "Neg", "n3", NAMES("X"), NAMES("t_4"));
    const char *a = wm_graph_unique_name(g, NULL), *b = wm_graph_unique_name(g, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_not_equal(a, b);
    const char *taken[] = {"t_1", "t_2", "t_4", "X", "W", "mm"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        assert_string_not_equal(a, taken[i]);
        assert_string_not_equal(b, taken[i]);
    }
    assert_string_equal(a, "t_3");
    assert_int_equal(strncmp(b, "t_", 2), 0);
    /* names survive a reindex: later names still differ */
    OK(wm_graph_reindex(g, &e_));
    const char *c = wm_graph_unique_name(g, "t");
    assert_string_not_equal(c, a);
    assert_string_not_equal(c, b);
    const char *w = wm_graph_unique_name(g, "W");
    assert_int_equal(strncmp(w, "W_", 2), 0);
    assert_null(wm_graph_find_value(g, w)); /* reserved, but not a value yet */
    add(g, "Neg", NULL, NAMES("X"), &w, 1);
    assert_non_null(wm_graph_producer(g, w));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_opsets(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    assert_int_equal(wm_graph_opset(g, ""), 17);
    assert_int_equal(wm_graph_opset(g, NULL), 17);
    assert_int_equal(wm_graph_opset(g, "ai.onnx"), 17);
    assert_int_equal(wm_graph_opset(g, "com.microsoft"), 1);
    assert_int_equal(wm_graph_opset(g, "ai.onnx.ml"), -1);
    wm_graph_free(g);
    wm_onnx_free(m);
    /* the default domain spelled "ai.onnx" in the model */
    m = wm_onnx_model_new();
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    add_opset(m, "ai.onnx", 13);
    OK(wm_graph_open(m, m->proto->graph, &g, &e_));
    assert_int_equal(wm_graph_opset(g, ""), 13);
    assert_int_equal(wm_graph_opset(g, "com.microsoft"), -1);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_constants(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    wm_onnx_tensor *w = wm_graph_initializer(g, "W");
    assert_ptr_equal(wm_graph_constant(g, "W"), w);
    assert_null(wm_graph_constant(g, "X"));
    assert_null(wm_graph_constant(g, "XW"));
    /* an initializer that is also a graph input is a default, not a constant */
    OK(wm_graph_add_input(g, "B", WM_DT_FLOAT, (int64_t[]){3}, 1, &e_));
    assert_non_null(wm_graph_initializer(g, "B"));
    assert_null(wm_graph_constant(g, "B"));
    /* Constant nodes */
    static const int64_t shape_data[2] = {1, 3};
    wm_error e = {0};
    wm_onnx_tensor *t = wm_graph_make_tensor(g, NULL, WM_DT_INT64, (int64_t[]){2}, 1,
                                             (wm_bytes){(const uint8_t *)shape_data, sizeof shape_data}, &e);
    assert_non_null(t);
    wm_onnx_node *c = add(g, "Constant", "c", NONE_, NAMES("shape"));
    assert_null(wm_graph_constant(g, "shape")); /* no value yet */
    OK(wm_graph_set_attr_tensor(g, c, "value", t, &e_));
    assert_ptr_equal(wm_graph_constant(g, "shape"), t);
    wm_onnx_node *f = add(g, "Constant", "cf", NONE_, NAMES("scalar"));
    OK(wm_graph_set_attr_float(g, f, "value_float", 2.0f, &e_));
    assert_null(wm_graph_constant(g, "scalar"));
    wm_onnx_node *other = wm_graph_add_node(g, "Constant", "com.example", "co", NONE_, NAMES("alien"), &e);
    OK(wm_graph_set_attr_tensor(g, other, "value", t, &e_));
    assert_null(wm_graph_constant(g, "alien"));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_initializers(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    static const float one = 1.0f;
    wm_bytes b = {(const uint8_t *)&one, sizeof one};
    wm_error e = {0};
    assert_int_equal(wm_graph_add_initializer(g, "W", WM_DT_FLOAT, NULL, 0, b, NULL, &e), WM_ERR_INPUT);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_add_initializer(g, "XW", WM_DT_FLOAT, NULL, 0, b, NULL, &e), WM_ERR_INPUT);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_add_initializer(g, "bad", WM_DT_FLOAT, (int64_t[]){2}, 1, b, NULL, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "4 bytes given"));
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_add_initializer(g, "neg", WM_DT_FLOAT, (int64_t[]){-1}, 1, b, NULL, &e), WM_ERR_INPUT);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_add_initializer(g, "str", WM_DT_STRING, NULL, 0, b, NULL, &e), WM_ERR_INPUT);
    wm_onnx_tensor *u;
    OK(wm_graph_add_initializer(g, "unused", WM_DT_FLOAT, NULL, 0, b, &u, &e_));
    assert_ptr_equal(wm_graph_initializer(g, "unused"), u);
    OK(wm_graph_add_initializer(g, "as_output", WM_DT_FLOAT, NULL, 0, b, NULL, &e_));
    OK(wm_graph_add_output(g, "as_output", WM_DT_FLOAT, NULL, 0, &e_));
    OK(wm_graph_add_initializer(g, "as_input", WM_DT_FLOAT, NULL, 0, b, NULL, &e_));
    OK(wm_graph_add_input(g, "as_input", WM_DT_FLOAT, NULL, 0, &e_));
    assert_int_equal(wm_graph_proto(g)->n_initializer, 5);
    assert_int_equal(wm_graph_remove_unused_initializers(g), 1);
    assert_null(wm_graph_find_value(g, "unused"));
    assert_non_null(wm_graph_initializer(g, "W"));
    assert_non_null(wm_graph_initializer(g, "as_output"));
    assert_non_null(wm_graph_initializer(g, "as_input"));
    /* B becomes unused once Add is gone */
    OK(wm_graph_remove_node(g, node_named(g, "add"), &e_));
    assert_int_equal(wm_graph_remove_unused_initializers(g), 1);
    assert_null(wm_graph_initializer(g, "B"));
    assert_int_equal(wm_graph_proto(g)->n_initializer, 3);
    assert_int_equal(wm_graph_remove_unused_initializers(g), 0);
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_attributes(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    wm_onnx_node *mm = node_named(g, "mm");
    OK(wm_graph_set_attr_int(g, mm, "axis", 3, &e_));
    OK(wm_graph_set_attr_int(g, mm, "axis", 0, &e_)); /* replaced, not added */
    OK(wm_graph_set_attr_ints(g, mm, "perm", (int64_t[]){1, 0, 2}, 3, &e_));
    OK(wm_graph_set_attr_string(g, mm, "mode", "linear", &e_));
    OK(wm_graph_set_attr_float(g, mm, "alpha", 0.0f, &e_));
    assert_int_equal(mm->n_attribute, 4);
    const wm_onnx_attr *a = wm_graph_node_attr(mm, "axis");
    assert_int_equal(a->type, WM_ATTR_INT);
    assert_int_equal(a->i, 0);
    a = wm_graph_node_attr(mm, "perm");
    assert_int_equal(a->n_ints, 3);
    assert_int_equal(a->ints[2], 2);
    a = wm_graph_node_attr(mm, "mode");
    assert_int_equal(a->s.n, 6);
    assert_memory_equal(a->s.p, "linear", 6);
    assert_null(wm_graph_node_attr(mm, "nothing"));
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_int(g, mm, "", 1, &e), WM_ERR_INPUT);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/*
 * main: If(cond) -> res, Relu(X) -> h, Neg(X) -> k (in that order).
 * then: Identity(h) -> u_1; If(cond) { Add(u_1, k) -> i1 } { Identity(u_1) -> i2 } -> t_out
 * else: Add(X, sub_w) -> e_out
 */
static wm_onnx_graph *branch(wm_onnx_model *m, const char *name, void (*fill)(wm_graph *, wm_onnx_model *)) {
    wm_onnx_graph *sg = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    sg->name = wm_arena_strdup(&m->arena, name);
    wm_graph *sub;
    OK(wm_graph_open(m, sg, &sub, &e_));
    fill(sub, m);
    wm_graph_free(sub);
    return sg;
}

static void fill_inner_then(wm_graph *s, wm_onnx_model *m) {
    (void)m;
    add(s, "Add", "inner_add", NAMES("u_1", "k"), NAMES("i1"));
    OK(wm_graph_add_output(s, "i1", WM_DT_FLOAT, NULL, 0, &e_));
}

static void fill_inner_else(wm_graph *s, wm_onnx_model *m) {
    (void)m;
    add(s, "Identity", "inner_id", NAMES("u_1"), NAMES("i2"));
    OK(wm_graph_add_output(s, "i2", WM_DT_FLOAT, NULL, 0, &e_));
}

static void fill_then(wm_graph *s, wm_onnx_model *m) {
    add(s, "Identity", "then_id", NAMES("h"), NAMES("u_1"));
    wm_onnx_node *inner = add(s, "If", "inner_if", NAMES("cond"), NAMES("t_out"));
    OK(wm_graph_set_attr_graph(s, inner, "then_branch", branch(m, "inner_then", fill_inner_then), &e_));
    OK(wm_graph_set_attr_graph(s, inner, "else_branch", branch(m, "inner_else", fill_inner_else), &e_));
    OK(wm_graph_add_output(s, "t_out", WM_DT_FLOAT, NULL, 0, &e_));
}

static void fill_else(wm_graph *s, wm_onnx_model *m) {
    (void)m;
    add(s, "Add", "else_add", NAMES("X", "sub_w"), NAMES("e_out"));
    OK(wm_graph_add_output(s, "e_out", WM_DT_FLOAT, NULL, 0, &e_));
}

static wm_onnx_model *if_model(wm_graph **g) {
    wm_onnx_model *m = new_model(g);
    static const float one = 1.0f;
    OK(wm_graph_add_input(*g, "X", WM_DT_FLOAT, (int64_t[]){1}, 1, &e_));
    OK(wm_graph_add_input(*g, "cond", WM_DT_BOOL, (int64_t[]){0}, 0, &e_));
    OK(wm_graph_add_initializer(*g, "sub_w", WM_DT_FLOAT, (int64_t[]){1}, 1,
                                (wm_bytes){(const uint8_t *)&one, sizeof one}, NULL, &e_));
    wm_onnx_node *n = add(*g, "If", "if", NAMES("cond"), NAMES("res"));
    OK(wm_graph_set_attr_graph(*g, n, "then_branch", branch(m, "then", fill_then), &e_));
    OK(wm_graph_set_attr_graph(*g, n, "else_branch", branch(m, "else", fill_else), &e_));
    add(*g, "Relu", "relu", NAMES("X"), NAMES("h"));
    add(*g, "Neg", "neg", NAMES("X"), NAMES("k"));
    OK(wm_graph_add_output(*g, "res", WM_DT_FLOAT, NULL, 0, &e_));
    return m;
}

/* 1 when value name has a use (node, slot). */
static int has_use(const wm_graph *g, const char *name, const wm_onnx_node *n, int32_t slot) {
    size_t k;
    const wm_use *u = wm_graph_consumers(g, name, &k);
    for (size_t i = 0; i < k; i++)
        if (u[i].node == n && u[i].slot == slot) return 1;
    return 0;
}

static void test_subgraph_dependencies(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = if_model(&g);
    wm_onnx_node *ifn = node_named(g, "if");
    assert_true(has_use(g, "h", ifn, WM_USE_SUBGRAPH));
    assert_true(has_use(g, "k", ifn, WM_USE_SUBGRAPH)); /* two levels down */
    assert_true(has_use(g, "X", ifn, WM_USE_SUBGRAPH));
    assert_true(has_use(g, "cond", ifn, 0));
    assert_true(has_use(g, "cond", ifn, WM_USE_SUBGRAPH));
    assert_true(has_use(g, "sub_w", ifn, WM_USE_SUBGRAPH));
    assert_null(wm_graph_find_value(g, "u_1")); /* defined inside the branch */
    assert_null(wm_graph_find_value(g, "i1"));
    size_t n;
    wm_graph_consumers(g, "h", &n);
    assert_int_equal(n, 1);
    OK(wm_graph_check(g, &e_));
    OK(wm_graph_topo_sort(g, &e_));
    assert_string_equal(order(g), "relu,neg,if");
    /* the unused-initializer sweep keeps what only a subgraph uses */
    assert_int_equal(wm_graph_remove_unused_initializers(g), 0);
    /* subgraph names are taken */
    const char *nm = wm_graph_unique_name(g, "u");
    assert_string_not_equal(nm, "u_1");
    wm_error e = {0};
    assert_int_equal(wm_graph_rename_value(g, "h", "u_1", &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "subgraph"));
    /* renaming an outer value rewrites the references inside the branches */
    OK(wm_graph_rename_value(g, "k", "kk", &e_));
    wm_onnx_graph *then_g = wm_graph_node_attr(ifn, "then_branch")->g;
    wm_onnx_node *inner_if = then_g->node[1];
    wm_onnx_node *inner_add = wm_graph_node_attr(inner_if, "then_branch")->g->node[0];
    assert_string_equal(inner_add->input[0], "u_1"); /* local: untouched */
    assert_string_equal(inner_add->input[1], "kk");
    assert_true(has_use(g, "kk", ifn, WM_USE_SUBGRAPH));
    OK(wm_graph_replace_uses(g, "h", "X", &e_));
    assert_string_equal(then_g->node[0]->input[0], "X");
    assert_null(wm_graph_consumers(g, "h", &n));
    /* the If now depends on relu no more: after moving relu last, the sort keeps it there */
    wm_onnx_graph *p = wm_graph_proto(g);
    wm_onnx_node *t0 = p->node[0];
    memmove(p->node, p->node + 1, 2 * sizeof *p->node);
    p->node[2] = t0;
    assert_string_equal(order(g), "neg,if,relu");
    OK(wm_graph_topo_sort(g, &e_));
    assert_string_equal(order(g), "neg,if,relu");
    /* the incremental index agrees with a rebuild */
    OK(wm_graph_reindex(g, &e_));
    assert_true(has_use(g, "kk", ifn, WM_USE_SUBGRAPH));
    assert_true(has_use(g, "X", ifn, WM_USE_SUBGRAPH));
    assert_null(wm_graph_consumers(g, "h", &n));
    OK(wm_graph_check(g, &e_));
    /* removing the If drops its subgraph uses */
    OK(wm_graph_remove_node(g, ifn, &e_));
    assert_false(has_use(g, "X", ifn, WM_USE_SUBGRAPH));
    assert_null(wm_graph_consumers(g, "kk", &n));
    wm_graph_free(g);
    wm_onnx_free(m);
}

/*
 * main: If(cond) -> r1, r2; Relu(X) -> h; Neg(X) -> k; Sigmoid(X) -> z (in that order).
 * then: Constant -> k, Constant -> z (both shadow outer values); Identity(k) -> t_out; Identity(z) -> t2;
 *       outputs t_out, h (an outer value, directly)
 * else: Add(X, k) -> e_out (the outer k); outputs e_out, h
 */
static void fill_shadow_then(wm_graph *s, wm_onnx_model *m) {
    (void)m;
    add(s, "Constant", "local_k", NONE_, NAMES("k"));
    add(s, "Constant", "local_z", NONE_, NAMES("z"));
    add(s, "Identity", "use_k", NAMES("k"), NAMES("t_out"));
    add(s, "Identity", "use_z", NAMES("z"), NAMES("t2"));
    OK(wm_graph_add_output(s, "t_out", WM_DT_FLOAT, NULL, 0, &e_));
    OK(wm_graph_add_output(s, "h", WM_DT_FLOAT, NULL, 0, &e_));
}

static void fill_shadow_else(wm_graph *s, wm_onnx_model *m) {
    (void)m;
    add(s, "Add", "use_x", NAMES("X", "k"), NAMES("e_out"));
    OK(wm_graph_add_output(s, "e_out", WM_DT_FLOAT, NULL, 0, &e_));
    OK(wm_graph_add_output(s, "h", WM_DT_FLOAT, NULL, 0, &e_));
}

static void test_subgraph_scoping(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = new_model(&g);
    OK(wm_graph_add_input(g, "X", WM_DT_FLOAT, NULL, 0, &e_));
    OK(wm_graph_add_input(g, "cond", WM_DT_BOOL, NULL, 0, &e_));
    wm_onnx_node *ifn = add(g, "If", "if", NAMES("cond"), NAMES("r1", "r2"));
    wm_onnx_graph *then_g = branch(m, "then", fill_shadow_then), *else_g = branch(m, "else", fill_shadow_else);
    OK(wm_graph_set_attr_graph(g, ifn, "then_branch", then_g, &e_));
    OK(wm_graph_set_attr_graph(g, ifn, "else_branch", else_g, &e_));
    add(g, "Relu", "relu", NAMES("X"), NAMES("h"));
    add(g, "Neg", "neg", NAMES("X"), NAMES("k"));
    add(g, "Sigmoid", "sigmoid", NAMES("X"), NAMES("z"));
    assert_true(has_use(g, "h", ifn, WM_USE_SUBGRAPH)); /* a branch output naming an outer value */
    assert_true(has_use(g, "k", ifn, WM_USE_SUBGRAPH)); /* from the else branch */
    assert_false(has_use(g, "z", ifn, WM_USE_SUBGRAPH)); /* only the then branch's own z */
    /* the If waits for relu (h) and neg (k), not for sigmoid (z) */
    OK(wm_graph_topo_sort(g, &e_));
    assert_string_equal(order(g), "relu,neg,if,sigmoid");
    /* renaming the outer k reaches the else branch and leaves the shadowing k of the then branch alone */
    OK(wm_graph_rename_value(g, "k", "kk", &e_));
    assert_string_equal(else_g->node[0]->input[1], "kk");
    assert_string_equal(then_g->node[0]->output[0], "k");
    assert_string_equal(then_g->node[2]->input[0], "k");
    /* renaming h reaches the branch outputs */
    OK(wm_graph_rename_value(g, "h", "hh", &e_));
    assert_string_equal(then_g->output[1]->name, "hh");
    assert_string_equal(else_g->output[1]->name, "hh");
    /* moving the uses of hh to a name a branch defines would be captured by it */
    wm_error e = {0};
    assert_int_equal(wm_graph_replace_uses(g, "hh", "z", &e), WM_ERR_INPUT);
    assert_string_equal(then_g->output[1]->name, "hh");
    OK(wm_graph_replace_uses(g, "hh", "X", &e_));
    assert_string_equal(then_g->output[1]->name, "X");
    assert_true(has_use(g, "X", ifn, WM_USE_SUBGRAPH));
    OK(wm_graph_check(g, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_save_reload(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = mlp(&g);
    /* edits: rename, a node added then removed, attributes, a Constant, shuffled order */
    OK(wm_graph_rename_value(g, "XW", "hidden", &e_));
    add(g, "Identity", "id", NAMES("XWB"), NAMES("I"));
    OK(wm_graph_remove_node(g, node_named(g, "id"), &e_));
    wm_onnx_node *relu = node_named(g, "relu");
    OK(wm_graph_set_attr_int(g, relu, "zero", 0, &e_));
    OK(wm_graph_set_attr_float(g, relu, "fzero", 0.0f, &e_));
    OK(wm_graph_set_attr_ints(g, relu, "ints", (int64_t[]){-1, 5}, 2, &e_));
    OK(wm_graph_set_attr_string(g, relu, "str", "hello", &e_));
    static const int64_t shape_data[2] = {1, 3};
    wm_error e = {0};
    wm_onnx_tensor *t = wm_graph_make_tensor(g, NULL, WM_DT_INT64, (int64_t[]){2}, 1,
                                             (wm_bytes){(const uint8_t *)shape_data, sizeof shape_data}, &e);
    wm_onnx_node *c = add(g, "Constant", "c", NONE_, NAMES("shape"));
    OK(wm_graph_set_attr_tensor(g, c, "value", t, &e_));
    add(g, "Reshape", "reshape", NAMES("Y", "shape"), NAMES("Z"));
    OK(wm_graph_add_output(g, "Z", WM_DT_FLOAT, NULL, 0, &e_));
    OK(wm_graph_add_initializer(g, "dead", WM_DT_FLOAT, (int64_t[]){3}, 1,
                                (wm_bytes){(const uint8_t *)b_data, sizeof b_data}, NULL, &e_));
    assert_int_equal(wm_graph_remove_unused_initializers(g), 1);
    reverse_nodes(g); /* reshape,c,relu,add,mm: c and mm are ready first, c is earlier */
    OK(wm_graph_topo_sort(g, &e_));
    assert_string_equal(order(g), "c,mm,add,relu,reshape");
    OK(wm_graph_check(g, &e_));

    char path[128];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    wm_onnx_save_opts o;
    wm_onnx_save_opts_default(&o);
    OK(wm_onnx_save(m, path, &o, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);

    OK(wm_onnx_load(path, &m, &e_));
    OK(wm_graph_open(m, m->proto->graph, &g, &e_));
    assert_string_equal(order(g), "c,mm,add,relu,reshape");
    assert_ptr_equal(wm_graph_producer(g, "hidden"), node_named(g, "mm"));
    assert_null(wm_graph_find_value(g, "XW"));
    assert_null(wm_graph_find_value(g, "I"));
    assert_null(wm_graph_find_value(g, "dead"));
    assert_string_equal(node_named(g, "add")->input[0], "hidden");
    assert_string_equal(node_named(g, "relu")->input[0], "XWB");
    relu = node_named(g, "relu");
    const wm_onnx_attr *a = wm_graph_node_attr(relu, "zero");
    assert_non_null(a); /* int 0 still written */
    assert_int_equal(a->type, WM_ATTR_INT);
    assert_int_equal(a->i, 0);
    assert_true(was_present(&wm_onnx_attr_desc, a, 3)); /* i = 0 is on the wire, not left to the default */
    a = wm_graph_node_attr(relu, "fzero");
    assert_non_null(a);
    assert_int_equal(a->type, WM_ATTR_FLOAT);
    assert_true(was_present(&wm_onnx_attr_desc, a, 2));
    a = wm_graph_node_attr(relu, "ints");
    assert_int_equal(a->n_ints, 2);
    assert_int_equal(a->ints[0], -1);
    a = wm_graph_node_attr(relu, "str");
    assert_int_equal(a->s.n, 5);
    assert_memory_equal(a->s.p, "hello", 5);
    const wm_onnx_tensor *ct = wm_graph_constant(g, "shape");
    assert_non_null(ct);
    wm_bytes cb = wm_onnx_tensor_bytes(ct);
    assert_int_equal(cb.n, sizeof shape_data);
    assert_memory_equal(cb.p, shape_data, sizeof shape_data);
    const wm_onnx_tensor *w = wm_graph_constant(g, "W");
    assert_non_null(w);
    assert_int_equal(w->n_dims, 2);
    assert_int_equal(w->dims[1], 3);
    wm_bytes wb = wm_onnx_tensor_bytes(w);
    assert_int_equal(wb.n, sizeof w_data);
    assert_memory_equal(wb.p, w_data, sizeof w_data);
    const wm_value *y = wm_graph_find_value(g, "Y");
    assert_int_equal(y->type->tensor_type->shape->n_dim, 2);
    assert_int_equal(y->type->tensor_type->shape->dim[0]->dim_value, 1);
    assert_int_equal(y->type->tensor_type->shape->dim[1]->dim_value, 0); /* unknown: no value */
    assert_int_equal(wm_graph_opset(g, ""), 17);
    OK(wm_graph_check(g, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_save_reload_subgraphs(void **s) {
    (void)s;
    wm_graph *g;
    wm_onnx_model *m = if_model(&g);
    OK(wm_graph_topo_sort(g, &e_));
    OK(wm_graph_rename_value(g, "k", "kk", &e_));
    char path[128];
    snprintf(path, sizeof path, "%s/if.onnx", dir);
    wm_onnx_save_opts o;
    wm_onnx_save_opts_default(&o);
    OK(wm_onnx_save(m, path, &o, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);
    OK(wm_onnx_load(path, &m, &e_));
    OK(wm_graph_open(m, m->proto->graph, &g, &e_));
    assert_string_equal(order(g), "relu,neg,if");
    wm_onnx_node *ifn = node_named(g, "if");
    assert_true(has_use(g, "kk", ifn, WM_USE_SUBGRAPH));
    assert_true(has_use(g, "h", ifn, WM_USE_SUBGRAPH));
    assert_null(wm_graph_find_value(g, "k"));
    OK(wm_graph_check(g, &e_));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_real_models_with_subgraphs(void **s) {
    (void)s;
    const char *names[] = {"test_if", "test_loop11", "test_scan9_sum", "test_loop13_seq", "test_if_seq"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[256];
        snprintf(path, sizeof path, TESTDATA "%s/model.onnx", names[i]);
        if (access(path, R_OK) != 0) fail_msg("%s is missing: install the libonnx-testdata package", path);
        wm_onnx_model *m;
        wm_graph *g;
        OK(wm_onnx_load(path, &m, &e_));
        OK(wm_graph_open(m, m->proto->graph, &g, &e_));
        size_t n_node = m->proto->graph->n_node;
        assert_true(n_node > 0);
        OK(wm_graph_topo_sort(g, &e_));
        assert_int_equal(m->proto->graph->n_node, n_node);
        OK(wm_graph_check(g, &e_));
        assert_true(wm_graph_opset(g, "") > 0);
        /* every graph input and output is indexed; nothing inside a body leaks out */
        for (size_t k = 0; k < m->proto->graph->n_input; k++)
            assert_non_null(wm_graph_find_value(g, m->proto->graph->input[k]->name)->input);
        for (size_t k = 0; k < m->proto->graph->n_output; k++)
            assert_ptr_equal(wm_graph_producer(g, m->proto->graph->output[k]->name), m->proto->graph->node[0]);
        wm_graph_free(g);
        wm_onnx_free(m);
    }
    /* loop11: the body's own names are not values of the main graph */
    wm_onnx_model *m;
    wm_graph *g;
    OK(wm_onnx_load(TESTDATA "test_loop11/model.onnx", &m, &e_));
    OK(wm_graph_open(m, m->proto->graph, &g, &e_));
    assert_null(wm_graph_find_value(g, "slice_out"));
    assert_null(wm_graph_find_value(g, "iter_count"));
    const char *nm = wm_graph_unique_name(g, "slice");
    assert_non_null(nm);
    assert_non_null(wm_graph_producer(g, "res_y"));
    wm_graph_free(g);
    wm_onnx_free(m);
}

static void test_bad_arguments(void **s) {
    (void)s;
    wm_graph *g = (wm_graph *)1;
    wm_onnx_model *m = wm_onnx_model_new();
    wm_error e = {0};
    assert_int_equal(wm_graph_open(m, m->proto->graph, &g, &e), WM_ERR_INPUT); /* no graph */
    assert_null(g);
    wm_graph_free(NULL);
    wm_onnx_free(m);
    m = new_model(&g);
    memset(&e, 0, sizeof e);
    assert_null(wm_graph_add_node(g, "", NULL, NULL, NONE_, NONE_, &e));
    assert_int_equal(e.status, WM_ERR_INPUT);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_graph_replace_uses(g, "", "x", &e), WM_ERR_INPUT);
    OK(wm_graph_replace_uses(g, "nothing", "x", &e_));
    OK(wm_graph_topo_sort(g, &e_)); /* empty graph */
    OK(wm_graph_check(g, &e_));
    memset(&e, 0, sizeof e);
    OK(wm_graph_add_input(g, "in", WM_DT_FLOAT, NULL, 0, &e_));
    assert_int_equal(wm_graph_add_input(g, "in", WM_DT_FLOAT, NULL, 0, &e), WM_ERR_INPUT);
    wm_graph_free(g);
    wm_onnx_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_producers_and_consumers),
        cmocka_unit_test(test_topo_sort_restores_order),
        cmocka_unit_test(test_cycle_and_undefined),
        cmocka_unit_test(test_check_ssa),
        cmocka_unit_test(test_rename_everywhere),
        cmocka_unit_test(test_rename_non_ssa_value),
        cmocka_unit_test(test_replace_uses_and_remove),
        cmocka_unit_test(test_unique_names),
        cmocka_unit_test(test_opsets),
        cmocka_unit_test(test_constants),
        cmocka_unit_test(test_initializers),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_subgraph_dependencies),
        cmocka_unit_test(test_subgraph_scoping),
        cmocka_unit_test_setup_teardown(test_save_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_reload_subgraphs, setup, teardown),
        cmocka_unit_test(test_real_models_with_subgraphs),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
