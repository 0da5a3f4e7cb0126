/*
 * ops_test_util.h - one-node models for op unit tests: build a graph with
 * inputs, constant inputs and attributes, make a session of it and run it.
 * Include after cmocka.h. Everything lives in the model arena; the
 * session owns the model (ut_free releases both).
 */
#ifndef WM_TESTS_OPS_TEST_UTIL_H
#define WM_TESTS_OPS_TEST_UTIL_H

#include <string.h>

#include "core/arena.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "onnx/pb.h"
#include "winml/runtime.h"

typedef struct ut_model {
    wm_onnx_model *m;
    wm_graph *g;
    wm_onnx_node *node;
    wm_session *s;
} ut_model;

static inline void ut_opset(wm_onnx_model *m, const char *domain, int64_t version) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = version;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

/* A model at the given ai.onnx opset. */
static inline void ut_begin(ut_model *u, int64_t opset) {
    memset(u, 0, sizeof *u);
    u->m = wm_onnx_model_new();
    assert_non_null(u->m);
    u->m->proto->graph = wm_pb_new(&u->m->arena, &wm_onnx_graph_desc);
    u->m->proto->graph->name = wm_arena_strdup(&u->m->arena, "t");
    ut_opset(u->m, "", opset);
    wm_error e = {0};
    assert_int_equal(wm_graph_open(u->m, u->m->proto->graph, &u->g, &e), WM_OK);
}

/* A graph input with unknown dims of the given rank. */
static inline void ut_input(ut_model *u, const char *name, int32_t dt, int rank) {
    int64_t d[WM_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = -1;
    wm_error e = {0};
    if (wm_graph_add_input(u->g, name, dt, d, (size_t)rank, &e)) fail_msg("input %s: %s", name, e.msg);
}

/* A constant input (the bytes are copied into the model). */
static inline void ut_const(ut_model *u, const char *name, int32_t dt, const int64_t *dims, int rank, const void *data) {
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (uint64_t)dims[i];
    size_t nb = (size_t)n * (size_t)(wm_dtype_bits(dt) / 8);
    void *copy = wm_arena_alloc(&u->m->arena, nb ? nb : 1);
    if (nb) memcpy(copy, data, nb);
    wm_error e = {0};
    if (wm_graph_add_initializer(u->g, name, dt, dims, (size_t)rank, (wm_bytes){copy, nb}, NULL, &e))
        fail_msg("const %s: %s", name, e.msg);
}

static inline wm_onnx_node *ut_node(ut_model *u, const char *op, const char *const *in, size_t n_in,
                                    const char *const *out, size_t n_out) {
    wm_error e = {0};
    u->node = wm_graph_add_node(u->g, op, NULL, "n", in, n_in, out, n_out, &e);
    if (!u->node) fail_msg("node %s: %s", op, e.msg);
    for (size_t i = 0; i < n_out; i++)
        if (out[i] && *out[i] && wm_graph_add_output(u->g, out[i], WM_DT_FLOAT, NULL, 0, &e)) fail_msg("output: %s", e.msg);
    return u->node;
}

static inline void ut_attr_int(ut_model *u, const char *name, int64_t v) {
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_int(u->g, u->node, name, v, &e), WM_OK);
}

static inline void ut_attr_float(ut_model *u, const char *name, float v) {
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_float(u->g, u->node, name, v, &e), WM_OK);
}

static inline void ut_attr_ints(ut_model *u, const char *name, const int64_t *v, size_t n) {
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_ints(u->g, u->node, name, v, n, &e), WM_OK);
}

static inline void ut_attr_string(ut_model *u, const char *name, const char *v) {
    wm_error e = {0};
    assert_int_equal(wm_graph_set_attr_string(u->g, u->node, name, v, &e), WM_OK);
}

/* Creates the session (it takes the model); returns its status, err filled on failure. */
static inline wm_status ut_session(ut_model *u, int threads, wm_error *err) {
    wm_graph_free(u->g);
    u->g = NULL;
    wm_session_opts o = {.threads = threads};
    wm_onnx_model *m = u->m;
    u->m = NULL;
    return wm_session_new_model(m, &o, &u->s, err);
}

static inline void ut_free(ut_model *u) {
    wm_graph_free(u->g);
    wm_session_free(u->s);
    if (u->m) wm_onnx_free(u->m);
    memset(u, 0, sizeof *u);
}

static inline wm_tensor ut_tensor(int32_t dt, const int64_t *dims, int rank, const void *data) {
    wm_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    return t;
}

#endif
