/*
 * gb.h - emitting an ONNX graph by hand, readably (internal to the builder).
 *
 * Nodes are named by component scope ("/model/layers.3/attn/q_proj/MatMul";
 * a repeat in the same scope gets "_1", "_2" ...), outputs after their node
 * ("<node>_output_0"), weights after the scope with dots
 * ("model.layers.3.attn.q_proj.weight"). Errors are sticky: after the first
 * failure every call is a no-op returning a placeholder, and gb->st / err
 * hold the first reason, so graph code reads top to bottom and checks once.
 * Small constants are shared (one initializer per distinct value).
 */
#ifndef WM_BUILDER_GB_H
#define WM_BUILDER_GB_H

#include <stdarg.h>

#include "builder/arch.h"
#include "builder/weights.h"
#include "onnx/graph.h"

typedef struct gb_nameset {
    const char **slot;
    size_t cap, n;
} gb_nameset;

typedef struct wm_gb {
    wm_onnx_model *m;
    wm_graph *g;
    wm_wsink *sink;
    wm_error *err;
    wm_status st;
    int opset;
    char scope[256];
    gb_nameset names;       /* node names in use */
    gb_nameset consts;      /* constant initializer names (value-keyed) */
    wm_onnx_node *last;     /* last node added */
    uint64_t seed;          /* random weights */
    int random;
} wm_gb;

/* Starts a builder over an existing model/graph; weights go through sink. */
void gb_init(wm_gb *b, wm_onnx_model *m, wm_graph *g, wm_wsink *sink, int opset, wm_error *err);
void gb_free(wm_gb *b);

/* Sets the current scope (printf style), e.g. "/model/layers.%d/attn". */
void gb_scope(wm_gb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Adds a node op with n_in inputs (NULL = omitted) in the current scope.
 * out_name: the name of output 0 (NULL: derived from the node name).
 * Returns output 0's name.
 */
const char *gb_opv(wm_gb *b, const char *op, const char *out_name, int n_in, const char *const *in);
const char *gb_op(wm_gb *b, const char *op, int n_in, ...);
const char *gb_op_named(wm_gb *b, const char *op, const char *out_name, int n_in, ...);
/* A com.microsoft node (the model then imports that domain, version 1); returns output 0's name. */
const char *gb_op_ms(wm_gb *b, const char *op, int n_in, const char *const *in);
/* A node with n_out outputs; outs receives their names. */
void gb_op_multi(wm_gb *b, const char *op, int n_in, const char *const *in, int n_out, const char **outs);

/* Renames value from (a node output) to `to` (a graph output name); returns to. */
const char *gb_rename(wm_gb *b, const char *from, const char *to);

/* Attributes of the last node. */
void gb_attr_i(wm_gb *b, const char *name, int64_t v);
void gb_attr_f(wm_gb *b, const char *name, float v);
void gb_attr_ints(wm_gb *b, const char *name, const int64_t *v, size_t n);
void gb_attr_s(wm_gb *b, const char *name, const char *v);

/* Shared constants: 1-D int64 (n values), int64 / int32 / float scalars, 1-D float. */
const char *gb_i64(wm_gb *b, const int64_t *v, size_t n);
const char *gb_i64s(wm_gb *b, int64_t v);    /* scalar */
const char *gb_i64_1(wm_gb *b, int64_t v);   /* [v] */
const char *gb_int_as(wm_gb *b, int64_t v, int32_t dtype); /* scalar of int32 or int64 */
const char *gb_f32s(wm_gb *b, float v);      /* scalar */
const char *gb_f32(wm_gb *b, const float *v, size_t n, const char *name); /* named 1-D float constant */
const char *gb_i64_named(wm_gb *b, const int64_t *v, size_t n, const char *name); /* named 1-D int64 (tables) */

/* Opset-aware reductions (axes as attribute before opset 18, as input from 18; ReduceSum from 13). */
const char *gb_reduce(wm_gb *b, const char *op, const char *x, const int64_t *axes, size_t n_axes, int keepdims);
const char *gb_unsqueeze(wm_gb *b, const char *x, const int64_t *axes, size_t n);
const char *gb_squeeze(wm_gb *b, const char *x, const int64_t *axes, size_t n);
const char *gb_slice(wm_gb *b, const char *x, int64_t start, int64_t end, int64_t axis);
const char *gb_reshape(wm_gb *b, const char *x, const int64_t *shape, size_t n);
const char *gb_transpose(wm_gb *b, const char *x, const int64_t *perm, size_t n);
const char *gb_cast(wm_gb *b, const char *x, int32_t to);

/*
 * A weight initializer named after the current scope + suffix
 * ("model.layers.0.attn.q_proj" + ".weight") from checkpoint tensor t (or
 * random values when the builder is random), stored with dims (transposed
 * from t when transpose). kind picks the random init (norm weights are 1,
 * biases 0, matrices uniform).
 */
enum { GB_W_MATRIX, GB_W_ONES, GB_W_ZEROS };
const char *gb_weight(wm_gb *b, const char *suffix, const wm_st_tensor *t, const int64_t *dims, size_t nd,
                      int transpose, int kind);
/* The same, untransposed, with add added to every checkpoint value (random values are not offset). */
const char *gb_weight_add(wm_gb *b, const char *suffix, const wm_st_tensor *t, const int64_t *dims, size_t nd,
                          int kind, float add);

/* The weight an earlier gb_weight of the current scope + suffix added (a projection applied twice). */
const char *gb_weight_existing(wm_gb *b, const char *suffix);

/* The same from values computed at export (vals: the product of dims floats, copied). */
const char *gb_weight_vals(wm_gb *b, const char *suffix, const float *vals, const int64_t *dims, size_t nd);
/* The same for the experts of layer's MoE stacked as its fc (1 or 2), recorded so that the quant stage can find
   their checkpoint tensors (wm_wsrc_rec.moe_fc). */
const char *gb_weight_experts(wm_gb *b, const char *suffix, const float *vals, const int64_t *dims, size_t nd, int fc,
                              int layer);

/* Blocks of the architectures (gb_blocks.c). */
const char *gb_linear(wm_gb *b, const char *x, const wm_module *m, const char *scope);
/* gb_linear on another input with the weights an earlier gb_linear of the same module and scope added. */
const char *gb_linear_again(wm_gb *b, const char *x, const wm_module *m, const char *scope);
const char *gb_head_gemm(wm_gb *b, const char *x, const wm_module *m, const char *scope);
const char *gb_norm(wm_gb *b, const char *x, const wm_module *m, wm_norm_spec ns, const char *scope);
const char *gb_act(wm_gb *b, const char *x, wm_act act);

#endif
