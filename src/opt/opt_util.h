/*
 * opt_util.h - helpers the optimizer and quantizer passes share (internal):
 * decoded constant tensors (wm_ct), half-precision conversion, node and
 * attribute queries, and edits that build new nodes and initializers.
 *
 * A wm_ct owns a malloc'ed, aligned copy of a tensor's elements (bool as
 * one byte); it is the working form of constant folding and of weight
 * transforms. New initializers take a copy of the bytes in the model arena,
 * so they live as long as the model.
 */
#ifndef WM_OPT_UTIL_H
#define WM_OPT_UTIL_H

#include <stdint.h>

#include "onnx/graph.h"
#include "ops/op.h"

#define WM_CT_MAX_RANK 8

typedef struct wm_ct {
    int32_t dtype; /* wm_dtype */
    int32_t rank;
    int64_t dims[WM_CT_MAX_RANK];
    uint64_t n;    /* elements */
    void *data;    /* malloc'ed (NULL when n == 0); owned */
} wm_ct;

/* Bytes per element in a wm_ct (bool 1, fp16 2 ...); 0 for types a wm_ct cannot hold (string, sub-byte). */
size_t wm_ct_elem_size(int32_t dtype);

/*
 * Decodes t into *out (a fresh copy); WM_ERR_UNSUPPORTED when t has more
 * than max_bytes of elements (0: no cap), an unsupported dtype, rank > 8,
 * or no readable data. Caller frees with wm_ct_free.
 */
wm_status wm_ct_from_tensor(const wm_onnx_tensor *t, uint64_t max_bytes, wm_ct *out, wm_error *err);

/* Allocates a zeroed wm_ct of dtype and dims (caller frees); WM_ERR_NOMEM / WM_ERR_UNSUPPORTED. */
wm_status wm_ct_alloc(wm_ct *c, int32_t dtype, const int64_t *dims, int32_t rank, wm_error *err);
void wm_ct_free(wm_ct *c);

/* Element i as double / int64 (bool and every numeric type; fp16 and bf16 decoded). */
double wm_ct_getf(const wm_ct *c, uint64_t i);
int64_t wm_ct_geti(const wm_ct *c, uint64_t i);
/* Stores v into element i, converting to c's dtype (round to nearest even for halves; ints truncate). */
void wm_ct_set(wm_ct *c, uint64_t i, double v);
void wm_ct_seti(wm_ct *c, uint64_t i, int64_t v);

/* IEEE half / bfloat16 conversions (round to nearest even; overflow to inf): the engine's, from ops/op.h. */

/*
 * Adds c as an initializer named name (bytes copied into the model arena;
 * c stays the caller's). WM_ERR_INPUT when the name is taken.
 */
wm_status wm_opt_add_ct(wm_graph *g, const char *name, const wm_ct *c, wm_error *err);

/* Adds a scalar or 1-D initializer under a fresh name made from prefix; returns the name (arena) or NULL. */
const char *wm_opt_const_f32(wm_graph *g, const char *prefix, const float *v, size_t n, int scalar, wm_error *err);
const char *wm_opt_const_i64(wm_graph *g, const char *prefix, const int64_t *v, size_t n, int scalar,
                             wm_error *err);
/* The same for an arbitrary dtype and shape from raw little-endian bytes (copied). */
const char *wm_opt_const_raw(wm_graph *g, const char *prefix, int32_t dtype, const int64_t *dims, size_t rank,
                             const void *bytes, size_t nbytes, wm_error *err);

/* ---------------------------------------------------------------- node queries */

/* 1 when n is op in the default domain ("", "ai.onnx"). */
int wm_opt_is(const wm_onnx_node *n, const char *op);
/* 1 when n is op in domain com.microsoft. */
int wm_opt_is_ms(const wm_onnx_node *n, const char *op);
/* 1 when n's domain is the default one. */
int wm_opt_default_domain(const wm_onnx_node *n);

/* Input / output slot i of n, or NULL when absent or "". */
const char *wm_opt_in(const wm_onnx_node *n, size_t i);
const char *wm_opt_out(const wm_onnx_node *n, size_t i);

/* The producer of input slot i of n when it is op (default domain), else NULL. */
wm_onnx_node *wm_opt_src(const wm_graph *g, const wm_onnx_node *n, size_t i, const char *op);

/* Number of uses of name (node inputs and subgraph references), plus 1 when it is a graph output. */
size_t wm_opt_nuses(const wm_graph *g, const char *name);
/* 1 when name is a graph output. */
int wm_opt_is_graph_output(const wm_graph *g, const char *name);
/* The only consumer of name when it has exactly one use and is no graph output, else NULL. */
wm_onnx_node *wm_opt_sole_consumer(const wm_graph *g, const char *name);

/* Attribute values with defaults. */
int64_t wm_opt_attr_i(const wm_onnx_node *n, const char *name, int64_t dflt);
float wm_opt_attr_f(const wm_onnx_node *n, const char *name, float dflt);
/* INTS attribute: *n_out values (pointer into the node), NULL when absent. */
const int64_t *wm_opt_attr_ints(const wm_onnx_node *n, const char *name, size_t *n_out);

/*
 * The constant tensor holding name (see wm_graph_constant), decoded into
 * *out when it has at most max_elems elements; 0 when not constant or too big.
 */
int wm_opt_const(const wm_graph *g, const char *name, uint64_t max_elems, wm_ct *out);

/* 1 when name is a constant whose every element equals v within tol (a scalar or any broadcast shape). */
int wm_opt_const_is(const wm_graph *g, const char *name, double v, double tol);
/* When name is a constant holding one value (any shape), *v gets it and 1 is returned. */
int wm_opt_const_scalar(const wm_graph *g, const char *name, double *v);

/* ---------------------------------------------------------------- edits */

/*
 * Adds a node (see wm_graph_add_node) in domain dom (NULL default,
 * "com.microsoft"), named after prefix. NULL with err set on failure.
 */
wm_onnx_node *wm_opt_add(wm_graph *g, const char *op, const char *dom, const char *prefix,
                         const char *const *in, size_t n_in, const char *const *out, size_t n_out, wm_error *err);

/*
 * Replaces node old by a new node op/dom whose outputs take old's output
 * names; the inputs are given. old is removed first. Returns the new node
 * or NULL with err set.
 */
wm_onnx_node *wm_opt_replace(wm_graph *g, wm_onnx_node *old, const char *op, const char *dom,
                             const char *const *in, size_t n_in, const char *const *out, size_t n_out,
                             wm_error *err);

/* Adds a one-output node op/dom on inputs in; returns the fresh output name (arena) or NULL with err set. */
const char *wm_opt_emit(wm_graph *g, const char *op, const char *dom, const char *const *in, size_t n_in,
                        wm_error *err);
/* The same, returning the node too (for attributes). */
wm_onnx_node *wm_opt_emit_node(wm_graph *g, const char *op, const char *dom, const char *const *in, size_t n_in,
                               const char **out, wm_error *err);

/* A malloc'ed copy of g's node list (caller frees) so a pass can edit while walking; NULL with err on OOM. */
wm_onnx_node **wm_opt_snapshot(wm_graph *g, size_t *n, wm_error *err);

/* Makes sure the model imports domain at version >= v (adds or raises the entry). */
wm_status wm_opt_need_opset(wm_graph *g, const char *domain, int64_t v, wm_error *err);

/* A fresh value name from prefix (arena-owned), or NULL on OOM. */
const char *wm_opt_name(wm_graph *g, const char *prefix);
/* wanted itself when no value has that name, else a fresh name from it (arena-owned); NULL on OOM. */
const char *wm_opt_name_exact(wm_graph *g, const char *wanted);

/* A set of pointers (open addressing); zero-initialize, free with wm_ptrset_free. */
typedef struct wm_ptrset {
    const void **slot;
    size_t cap, n;
} wm_ptrset;
/* Adds p; 1 when newly added, 0 when present, -1 on OOM. */
int wm_ptrset_add(wm_ptrset *s, const void *p);
int wm_ptrset_has(const wm_ptrset *s, const void *p);
void wm_ptrset_free(wm_ptrset *s);

/* Counts of nodes per op type: fills a JSON object (op -> count) sorted by count. */
struct wm_json;
void wm_opt_histogram_json(const wm_onnx_graph *g, struct wm_json *j, const char *key);

/* Drops the whole pages of [p, p+n) from this process when they belong to one of m's file mappings (they stay in
 * the page cache and come back on the next read): reading a weight once then costs no lasting resident memory. */
void wm_opt_release(const wm_onnx_model *m, const void *p, size_t n);

#endif
