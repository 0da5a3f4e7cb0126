/* match.h - small pattern-matching helpers for the fusion passes (internal). */
#ifndef WM_OPT_MATCH_H
#define WM_OPT_MATCH_H

#include <stdlib.h>
#include <string.h>

#include "opt/passes.h"

/* The input of binary node n that is not name (NULL when n does not take name). */
static inline const char *wm_m_other(const wm_onnx_node *n, const char *name) {
    if (!n || n->n_input != 2 || !name) return NULL;
    if (n->input[0] && !strcmp(n->input[0], name)) return n->input[1];
    if (n->input[1] && !strcmp(n->input[1], name)) return n->input[0];
    return NULL;
}

/* The producer of name when it is op (default domain), else NULL. */
static inline wm_onnx_node *wm_m_prod(const wm_graph *g, const char *name, const char *op) {
    wm_onnx_node *p = name ? wm_graph_producer(g, name) : NULL;
    return p && wm_opt_is(p, op) ? p : NULL;
}

/* Binary node n (op) with one constant input equal to v (within tol): returns the other input, else NULL. */
static inline const char *wm_m_const_operand(const wm_graph *g, const wm_onnx_node *n, const char *op, double v,
                                             double tol) {
    if (!wm_opt_is(n, op) || n->n_input != 2) return NULL;
    if (wm_opt_const_is(g, n->input[1], v, tol)) return n->input[0];
    if (wm_opt_const_is(g, n->input[0], v, tol)) return n->input[1];
    return NULL;
}

/* 1 when the reduction node r reduces exactly the last axis of a rank-`rank` tensor and keeps dims. */
int wm_m_reduces_last_axis(const wm_pass_ctx *c, const wm_onnx_node *r);

/* The only consumer of name with op (default domain) when name has exactly one use; else NULL. */
static inline wm_onnx_node *wm_m_sole(const wm_graph *g, const char *name, const char *op) {
    wm_onnx_node *n = name ? wm_opt_sole_consumer(g, name) : NULL;
    return n && wm_opt_is(n, op) ? n : NULL;
}

/* A consumer of name with op (default domain), the first; NULL when none. */
wm_onnx_node *wm_m_consumer(const wm_graph *g, const char *name, const char *op);

/* A 1-D constant (after squeezing leading 1s) of exactly n elements: 1 and its name stays usable. */
int wm_m_vec_const(const wm_graph *g, const char *name, int64_t n);

#endif
