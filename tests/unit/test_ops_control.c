/*
 * test_ops_control.c - If, Loop and Scan with bodies built here, against
 * naive loops: trip count and condition exits, zero iterations (declared
 * scan shape), outer-scope values used by a body and by an If nested in a
 * body, Scan axes and reverse directions, repeated runs, the eager plan
 * for graphs with control flow, and errors naming the node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test_util.h"

/* An empty subgraph of u's model, opened for edits in *g. */
static wm_onnx_graph *sub_graph(ut_model *u, const char *name, wm_graph **g) {
    wm_onnx_graph *sg = wm_pb_new(&u->m->arena, &wm_onnx_graph_desc);
    sg->name = wm_arena_strdup(&u->m->arena, name);
    wm_error e = {0};
    assert_int_equal(wm_graph_open(u->m, sg, g, &e), WM_OK);
    return sg;
}

static wm_onnx_node *add(wm_graph *g, const char *op, const char *const *in, size_t n_in, const char *out) {
    wm_error e = {0};
    wm_onnx_node *n = wm_graph_add_node(g, op, NULL, out, in, n_in, &out, 1, &e);
    if (!n) fail_msg("%s: %s", op, e.msg);
    return n;
}

static void io(wm_graph *g, int input, const char *name, int32_t dt, const int64_t *dims, size_t nd) {
    wm_error e = {0};
    wm_status st = input ? wm_graph_add_input(g, name, dt, dims, nd, &e) : wm_graph_add_output(g, name, dt, dims, nd, &e);
    if (st) fail_msg("%s: %s", name, e.msg);
}

/*
 * Loop(M, cond, x) over body(i, c, v): v2 = v + w (w outer), s = v2 * float(i) (scan output),
 * c_out = float(i) < lim (lim outer). With nested_if, v2 = If(c, then: v + w, else: v - w) instead.
 */
static void build_loop(ut_model *u, int nested_if) {
    ut_begin(u, 17);
    ut_input(u, "M", WM_DT_INT64, 0);
    ut_input(u, "cond", WM_DT_BOOL, 0);
    ut_input(u, "x", WM_DT_FLOAT, 1);
    ut_input(u, "w", WM_DT_FLOAT, 1);
    ut_input(u, "lim", WM_DT_FLOAT, 0);
    wm_graph *bg;
    wm_onnx_graph *body = sub_graph(u, "body", &bg);
    int64_t d3 = 3;
    io(bg, 1, "i", WM_DT_INT64, NULL, 0);
    io(bg, 1, "c", WM_DT_BOOL, NULL, 0);
    io(bg, 1, "v", WM_DT_FLOAT, &d3, 1);
    wm_error e = {0};
    wm_onnx_node *cast = add(bg, "Cast", (const char *[]){"i"}, 1, "fi");
    assert_int_equal(wm_graph_set_attr_int(bg, cast, "to", WM_DT_FLOAT, &e), WM_OK);
    if (nested_if) {
        wm_graph *tg, *eg;
        wm_onnx_graph *tb = sub_graph(u, "then", &tg), *eb = sub_graph(u, "else", &eg);
        add(tg, "Add", (const char *[]){"v", "w"}, 2, "t_out"); /* v: the body's, w: the main graph's */
        io(tg, 0, "t_out", WM_DT_FLOAT, &d3, 1);
        add(eg, "Sub", (const char *[]){"v", "w"}, 2, "e_out");
        io(eg, 0, "e_out", WM_DT_FLOAT, &d3, 1);
        wm_graph_free(tg);
        wm_graph_free(eg);
        add(bg, "Less", (const char *[]){"fi", "lim"}, 2, "odd"); /* then while i < lim */
        wm_onnx_node *iff = add(bg, "If", (const char *[]){"odd"}, 1, "v2");
        assert_int_equal(wm_graph_set_attr_graph(bg, iff, "then_branch", tb, &e), WM_OK);
        assert_int_equal(wm_graph_set_attr_graph(bg, iff, "else_branch", eb, &e), WM_OK);
        add(bg, "Identity", (const char *[]){"c"}, 1, "c_out"); /* the node passes no cond: ignored */
    } else {
        add(bg, "Add", (const char *[]){"v", "w"}, 2, "v2");
        add(bg, "Less", (const char *[]){"fi", "lim"}, 2, "c_out");
    }
    add(bg, "Mul", (const char *[]){"v2", "fi"}, 2, "s");
    io(bg, 0, "c_out", WM_DT_BOOL, NULL, 0);
    io(bg, 0, "v2", WM_DT_FLOAT, &d3, 1);
    io(bg, 0, "s", WM_DT_FLOAT, &d3, 1);
    wm_graph_free(bg);
    ut_node(u, "Loop", (const char *[]){"M", nested_if ? "" : "cond", "x"}, 3, (const char *[]){"y", "scan"}, 2);
    assert_int_equal(wm_graph_set_attr_graph(u->g, u->node, "body", body, &e), WM_OK);
}

static void loop_case(ut_model *u, int nested_if, int64_t M, float lim) {
    float x[3] = {1, -2, 0.5f}, w[3] = {0.25f, 1, -1};
    uint8_t cond = 1;
    int64_t d3 = 3;
    wm_tensor in[5] = {ut_tensor(WM_DT_INT64, NULL, 0, &M), ut_tensor(WM_DT_BOOL, NULL, 0, &cond), ut_tensor(WM_DT_FLOAT, &d3, 1, x),
                       ut_tensor(WM_DT_FLOAT, &d3, 1, w), ut_tensor(WM_DT_FLOAT, NULL, 0, &lim)};
    wm_tensor out[2];
    wm_error e = {0};
    if (wm_session_run(u->s, in, 5, out, 2, &e)) fail_msg("%s", e.msg);
    /* naive */
    float v[3], scan[64][3];
    memcpy(v, x, sizeof v);
    int64_t it = 0;
    for (int c = 1; it < M && c; it++) {
        for (int k = 0; k < 3; k++) {
            v[k] = nested_if ? ((float)it < lim ? v[k] + w[k] : v[k] - w[k]) : v[k] + w[k];
            scan[it][k] = v[k] * (float)it;
        }
        if (!nested_if) c = (float)it < lim;
    }
    assert_int_equal(out[0].rank, 1);
    for (int k = 0; k < 3; k++) assert_true(((float *)out[0].data)[k] == v[k]);
    assert_int_equal(out[1].rank, 2);
    assert_int_equal(out[1].dims[0], it);
    assert_int_equal(out[1].dims[1], 3); /* also for zero iterations: the body declares [3] */
    for (int64_t i = 0; i < it; i++)
        for (int k = 0; k < 3; k++) assert_true(((float *)out[1].data)[i * 3 + k] == scan[i][k]);
}

static void test_loop(void **state) {
    (void)state;
    for (int nested = 0; nested <= 1; nested++) {
        ut_model u;
        build_loop(&u, nested);
        wm_error e = {0};
        if (ut_session(&u, 1, &e)) fail_msg("%s", e.msg);
        loop_case(&u, nested, 5, 100.0f); /* the trip count ends it */
        loop_case(&u, nested, 50, 2.5f);  /* the condition ends it (nested: cond ignored, M ends it) */
        loop_case(&u, nested, 0, 1.0f);   /* no iteration */
        loop_case(&u, nested, 5, 100.0f); /* again: same results */
        wm_session_stats st;
        wm_session_get_stats(u.s, &st);
        assert_int_equal(st.eager, 1); /* control flow: data-dependent shapes */
        ut_free(&u);
    }
}

/* Scan(s0, X, Y): body(s, x, y): s2 = s + x * y; outputs s2 (axis 0), x (axis 1, reversed). X scanned on axis 0, Y on axis 1 reversed. */
static void test_scan(void **state) {
    (void)state;
    ut_model u;
    ut_begin(&u, 16);
    ut_input(&u, "s0", WM_DT_FLOAT, 1);
    ut_input(&u, "X", WM_DT_FLOAT, 2);
    ut_input(&u, "Y", WM_DT_FLOAT, 2);
    wm_graph *bg;
    wm_onnx_graph *body = sub_graph(&u, "body", &bg);
    int64_t d2 = 2;
    io(bg, 1, "s", WM_DT_FLOAT, &d2, 1);
    io(bg, 1, "x", WM_DT_FLOAT, &d2, 1);
    io(bg, 1, "y", WM_DT_FLOAT, &d2, 1);
    add(bg, "Mul", (const char *[]){"x", "y"}, 2, "xy");
    add(bg, "Add", (const char *[]){"s", "xy"}, 2, "s2");
    add(bg, "Identity", (const char *[]){"x"}, 1, "xo");
    io(bg, 0, "s2", WM_DT_FLOAT, &d2, 1);
    io(bg, 0, "s2o", WM_DT_FLOAT, &d2, 1);
    io(bg, 0, "xo", WM_DT_FLOAT, &d2, 1);
    add(bg, "Identity", (const char *[]){"s2"}, 1, "s2o");
    wm_graph_free(bg);
    ut_node(&u, "Scan", (const char *[]){"s0", "X", "Y"}, 3, (const char *[]){"sf", "o1", "o2"}, 3);
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_graph(u.g, u.node, "body", body, &e), WM_OK);
    ut_attr_int(&u, "num_scan_inputs", 2);
    ut_attr_ints(&u, "scan_input_axes", (int64_t[]){0, -1}, 2);
    ut_attr_ints(&u, "scan_input_directions", (int64_t[]){0, 1}, 2);
    ut_attr_ints(&u, "scan_output_axes", (int64_t[]){0, 1}, 2);
    ut_attr_ints(&u, "scan_output_directions", (int64_t[]){0, 1}, 2);
    if (ut_session(&u, 1, &e)) fail_msg("%s", e.msg);
    float s0[2] = {1, 2}, X[4][2], Y[2][4];
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 2; k++) X[t][k] = (float)(t * 2 + k) * 0.5f, Y[k][t] = (float)(k - t);
    int64_t ds[1] = {2}, dx[2] = {4, 2}, dy[2] = {2, 4};
    wm_tensor in[3] = {ut_tensor(WM_DT_FLOAT, ds, 1, s0), ut_tensor(WM_DT_FLOAT, dx, 2, X), ut_tensor(WM_DT_FLOAT, dy, 2, Y)}, out[3];
    if (wm_session_run(u.s, in, 3, out, 3, &e)) fail_msg("%s", e.msg);
    float s[2] = {1, 2}, o1[4][2], o2[2][4];
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 2; k++) {
            s[k] += X[t][k] * Y[k][3 - t]; /* Y reversed along its axis 1 */
            o1[t][k] = s[k];
            o2[k][3 - t] = X[t][k]; /* output 2 reversed, stacked on axis 1 */
        }
    assert_int_equal(out[1].dims[0], 4);
    assert_int_equal(out[2].dims[0], 2);
    assert_int_equal(out[2].dims[1], 4);
    for (int k = 0; k < 2; k++) assert_true(((float *)out[0].data)[k] == s[k]);
    assert_memory_equal(out[1].data, o1, sizeof o1);
    assert_memory_equal(out[2].data, o2, sizeof o2);
    ut_free(&u);
}

static void test_if_errors(void **state) {
    (void)state;
    ut_model u;
    ut_begin(&u, 13);
    ut_input(&u, "c", WM_DT_BOOL, 0);
    ut_input(&u, "a", WM_DT_FLOAT, 1);
    wm_graph *tg, *eg;
    wm_onnx_graph *tb = sub_graph(&u, "then", &tg), *eb = sub_graph(&u, "else", &eg);
    add(tg, "Neg", (const char *[]){"a"}, 1, "t");
    io(tg, 0, "t", WM_DT_FLOAT, NULL, 0);
    add(eg, "Cast", (const char *[]){"a"}, 1, "f");
    wm_error e = {0};
    wm_onnx_node *cast = wm_graph_producer(eg, "f");
    assert_int_equal(wm_graph_set_attr_int(eg, cast, "to", WM_DT_INT32, &e), WM_OK);
    io(eg, 0, "f", WM_DT_INT32, NULL, 0);
    wm_graph_free(tg);
    wm_graph_free(eg);
    ut_node(&u, "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1);
    u.node->name = wm_arena_strdup(&u.m->arena, "branchy");
    assert_int_equal(wm_graph_set_attr_graph(u.g, u.node, "then_branch", tb, &e), WM_OK);
    assert_int_equal(wm_graph_set_attr_graph(u.g, u.node, "else_branch", eb, &e), WM_OK);
    assert_int_equal(ut_session(&u, 1, &e), WM_ERR_INPUT); /* float32 in one branch, int32 in the other */
    assert_non_null(strstr(e.msg, "branchy"));
    assert_non_null(strstr(e.msg, "else_branch"));
    ut_free(&u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_if_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
