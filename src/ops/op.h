/*
 * op.h - the op table interface (internal).
 *
 * Each ONNX op is one wm_op entry: (domain, name, opset range) plus
 *   init      at session creation: read attributes, check input element
 *             types (known by then), set output element types, prepack
 *             constant inputs. Errors here name the node, op and type.
 *   infer     per plan: output dims from input dims (and from input data
 *             when the op's shape depends on it; such data is available
 *             for constants and values the planner evaluated ahead; when
 *             it is not, return WM_NEED_DATA and the plan runs eagerly).
 *   run       per run: compute. Never allocates; scratch is x->ws, sized
 *             by the optional workspace() at plan time.
 * Families of ops live one file each under src/ops/ and export one table
 * (wm_ops_<family>); src/ops/registry.c lists the tables.
 */
#ifndef WM_OPS_OP_H
#define WM_OPS_OP_H

#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/half.h"
#include "onnx/dtype.h"
#include "onnx/onnx_proto.h"
#include "runtime/pool.h"
#include "winml/runtime.h"

#define WM_NEED_DATA ((wm_status)100) /* infer: shape depends on data not known ahead */
#define WM_MAX_IO 64                  /* inputs or outputs of one node */

typedef struct wm_node wm_node;

typedef struct wm_exec {
    wm_pool *pool;
    int nth;       /* threads of the pool */
    void *ws;      /* scratch of at least the node's workspace() bytes, 64-byte aligned */
    size_t ws_size;
    wm_error *err; /* for data-dependent failures (an index out of range): use wm_node_err */
    void *gemm_ws;      /* GEMM scratch: nth slices of gemm_ws_per bytes (see ops/gemm.h) */
    size_t gemm_ws_per;
} wm_exec;

enum {
    WM_OP_ALIAS = 1u << 0,   /* output 0 is a view of input 0 (same bytes, new dims): no copy */
    WM_OP_INPLACE = 1u << 1, /* output 0 may use input 0's buffer when input 0 dies here (same size) */
    WM_OP_NOFOLD = 1u << 2,  /* never evaluate ahead (random ops) */
    WM_OP_DIMS_ONLY = 1u << 3, /* run reads only the dims of its inputs (Shape, Size): evaluated ahead */
    WM_OP_KV_INPLACE = 1u << 4, /* outputs 1, 2 (present K/V) may share memory with inputs 3, 4 (past K/V):
                                   the run then appends in place (GroupQueryAttention's shared buffer) */
    WM_OP_INPLACE_IN3 = 1u << 5, /* as WM_OP_INPLACE with input 3 (a convolution's residual Z, accumulated into) */
    WM_OP_NO_INPUT0 = 1u << 6,   /* input 0 may be absent (Constant, the random generators, Loop's trip count,
                                    Scan-8's sequence_lens); every other op gets a node with input 0 and output 0
                                    present (the session refuses one without), and checks in init any further
                                    input it requires (wm_need_inputs) */
};

typedef struct wm_op {
    const char *domain; /* "" (ai.onnx) or "com.microsoft" */
    const char *name;
    int since, until;   /* opset versions served, until 0 = open */
    wm_status (*init)(wm_node *n, wm_error *err);
    wm_status (*infer)(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err);
    wm_status (*run)(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x);
    size_t (*workspace)(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth); /* optional */
    unsigned flags;
    uint32_t data_inputs; /* bit i: infer reads input i's data (shape tensors, axes, sizes) */
} wm_op;

struct wm_node {
    const wm_onnx_node *proto;
    const wm_op *op;
    int opset;                /* of the node's domain */
    int n_in, n_out;
    int32_t in_dtype[WM_MAX_IO];  /* 0 for an omitted optional input */
    int32_t out_dtype[WM_MAX_IO]; /* set by init */
    const wm_tensor *in_const[WM_MAX_IO]; /* constant inputs (initializers, folded), else NULL */
    void *state;              /* op-private, from wm_node_alloc */
    wm_arena *arena;          /* the session's */
    uint64_t packed_bytes;    /* prepacked weight bytes (statistics) */
    int n_in_proto;           /* inputs the NodeProto lists; inputs from here on are the outer-scope values
                                 its subgraphs use (If/Loop/Scan, see runtime/subgraph.h) */
    void *scope;              /* the session building the node (subgraphs are made in it) */
};

/* A table of ops of one family. */
typedef struct wm_op_table {
    const wm_op *ops;
    size_t n;
} wm_op_table;

/* Finds the op serving (domain, name) at opset; NULL when none. *near gets an entry of another opset when one exists. */
const wm_op *wm_op_find(const char *domain, const char *name, int opset, const wm_op **near);
/* The i-th entry of the registry (every family's table in turn), NULL past the last: for tools that enumerate the
 * ops (the engine-op fuzz target). */
const wm_op *wm_op_at(size_t i);

/* ---------------------------------------------------------------- helpers for ops */

/* Zeroed memory owned by the session (released with it); aligned to 64 bytes. NULL on OOM. */
void *wm_node_alloc(wm_node *n, size_t size);

/* The session's thread pool, for work at init that pays to split (weight packing); NULL outside a session. */
struct wm_pool *wm_node_pool(const wm_node *n);

/* Drops the resident pages of constant input k when they are mapped from the model's files: for weights the op
 * has copied into its own layout at init and will not read again (they stay readable: the file backs them). */
void wm_node_release_const(const wm_node *n, int k);

/* 1 when node n holds its constant float16 weight (bytes: its float32 packed copy) widened to float32: the
 * session's float16 weight policy (runtime.h, WM_F16_*) widens and the bytes fit its memory budget, which then
 * counts them; 0: keep it half. Called once per weight, at init. */
int wm_node_f16_float(const wm_node *n, uint64_t bytes);

/* Node name for messages: the node's name, else its first output, else its op type. */
const char *wm_node_label(const wm_node *n);

/* Sets err naming the node: "node 'x' (Op): <message>"; returns s. */
wm_status wm_node_err(const wm_node *n, wm_error *err, wm_status s, const char *fmt, ...) WM_PRINTF(4, 5);

/* Attributes (defaults when absent). */
const wm_onnx_attr *wm_attr(const wm_node *n, const char *name);
int64_t wm_attr_int(const wm_node *n, const char *name, int64_t def);
float wm_attr_float(const wm_node *n, const char *name, float def);
/* The ints of an INTS attribute (NULL, *count = 0 when absent). */
const int64_t *wm_attr_ints(const wm_node *n, const char *name, size_t *count);
const float *wm_attr_floats(const wm_node *n, const char *name, size_t *count);
/* A STRING attribute copied NUL-terminated into buf (def when absent). */
const char *wm_attr_string(const wm_node *n, const char *name, const char *def, char *buf, size_t bufsize);

/* 1 when input i is present (not omitted). */
static inline int wm_has_in(const wm_node *n, int i) { return i < n->n_in && n->in_dtype[i] != 0; }
static inline int wm_has_out(const wm_node *n, int i) { return i < n->n_out && n->out_dtype[i] != 0; }

/* Type checks for init: dtype in a 0-terminated list; returns an error naming input i otherwise. */
wm_status wm_check_type(const wm_node *n, int i, const int32_t *allowed, wm_error *err);
/* Requires inputs 0..k-1 present (not omitted): an error naming the node and the first missing one. Ops call it in
 * init for the inputs infer and run read unchecked. */
wm_status wm_need_inputs(const wm_node *n, int k, wm_error *err);
/* Requires inputs a and b to share an element type. */
wm_status wm_check_same_type(const wm_node *n, int a, int b, wm_error *err);

/* Common type sets (0-terminated). */
extern const int32_t wm_types_float[];   /* float32, float16, bfloat16, float64 */
extern const int32_t wm_types_numeric[]; /* floats + all integer types */
extern const int32_t wm_types_all[];     /* numeric + bool */
extern const int32_t wm_types_int[];     /* integer types */
extern const int32_t wm_types_index[];   /* int32, int64 */

/* Normalizes an axis in [-rank, rank) to [0, rank); -1 when out of range. */
static inline int wm_axis(int64_t axis, int rank) {
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

/* Reads element i of an integer tensor (int8..uint64, bool) as int64. */
int64_t wm_tensor_get_int(const wm_tensor *t, uint64_t i);
/* element i of the array d of type dt as wm_tensor_get_int reads a tensor's */
int64_t wm_dt_get_int(int32_t dt, const void *d, uint64_t i);
/* Reads element i of a numeric tensor as double. */
double wm_tensor_get_f64(const wm_tensor *t, uint64_t i);

/* Size in bytes of one element (0 for sub-byte and string types). */
size_t wm_dtype_size(int32_t dt);

/* Sets out's rank and dims. */
static inline void wm_set_shape(wm_tensor *t, int rank, const int64_t *dims) {
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
}


/* Shared by op families: converts n elements between element types (Cast semantics). */
void wm_convert(int32_t from, const void *src, int32_t to, void *dst, uint64_t n);
/* Transposes src (rank r, dims) by perm into dst (es-byte elements), on x's pool when large (x may be NULL). */
void wm_transpose(const void *src, void *dst, size_t es, int r, const int64_t *dims, const int64_t *perm, wm_exec *x);

#endif
