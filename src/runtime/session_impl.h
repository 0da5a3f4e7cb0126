/*
 * session_impl.h - what a session holds (internal to src/runtime).
 *
 * Values are numbered; each is a constant (initializer, Constant node or a
 * node folded at creation), a graph input, or a node output. A plan holds,
 * for one set of input shapes, the dims of every value, the values it
 * evaluated ahead (shape arithmetic), the nodes left to run, and where each
 * value's bytes live: the shared activation arena (offset), a constant, or
 * a caller's input buffer.
 */
#ifndef WM_RUNTIME_SESSION_IMPL_H
#define WM_RUNTIME_SESSION_IMPL_H

#include "onnx/graph.h"
#include "ops/op.h"
#include "runtime/budget.h"
#include "winml/runtime.h"

enum { WM_VAL_NODE = 0, WM_VAL_CONST, WM_VAL_INPUT };

typedef struct wm_val {
    const char *name;
    int kind;        /* WM_VAL_* */
    int32_t dtype;
    int producer;    /* node index, -1 for constants and inputs */
    int input_index; /* WM_VAL_INPUT: graph input number */
    int output_index;/* graph output number, -1 when not an output */
    wm_tensor c;     /* WM_VAL_CONST: dims and data */
} wm_val;

enum { WM_LOC_NONE = 0, WM_LOC_ARENA, WM_LOC_FIXED, WM_LOC_INPUT, WM_LOC_STEADY };

typedef struct wm_loc {
    uint8_t kind;    /* WM_LOC_* */
    int32_t input;   /* WM_LOC_INPUT: graph input number; WM_LOC_STEADY: the value whose kept buffer it is */
    uint64_t off;    /* WM_LOC_ARENA: byte offset */
    void *ptr;       /* WM_LOC_FIXED: constant or ahead-evaluated data */
} wm_loc;

typedef struct wm_plan {
    int64_t *key;        /* per input: rank, then dims */
    size_t key_len;
    uint64_t stamp;      /* for LRU eviction */
    int eager;           /* shapes depend on data: every run infers and allocates */
    wm_tensor *t;        /* per value: dtype, dims, data (bound per run) */
    wm_loc *loc;         /* per value */
    int *root;           /* per value: the value whose arena block it uses (views, in-place), -1 if none */
    int *run;            /* node indices to execute */
    int n_run;
    wm_tensor **io;      /* per run node: n_in then n_out tensor pointers (NULL: omitted) */
    size_t *io_off;      /* per run node: start of its pointers in io */
    uint64_t arena_bytes, naive_bytes, ws_bytes;
    int ws_node;         /* the run node with the largest workspace, -1 when none has one */
    void **ahead;        /* malloc'ed buffers of ahead-evaluated values */
    size_t n_ahead;
    uint8_t *kept;       /* per run node: 1 when its outputs are kept values of steady inputs (steady.c) */
    int n_kept;
} wm_plan;

struct wm_session {
    wm_onnx_model *model;
    wm_graph *graph;
    wm_arena arena;          /* node states, packed weights, converted constants */
    wm_pool *pool;
    wm_session_opts opts;
    wm_val *vals;
    size_t n_vals;
    wm_node *nodes;          /* topological order */
    size_t n_nodes;
    uint8_t *folded;         /* per node: evaluated at creation */
    size_t n_folded;
    wm_io_info *inputs, *outputs;
    int *in_val, *out_val;   /* value ids of graph inputs / outputs */
    size_t n_inputs, n_outputs;
    struct {                 /* name -> value id */
        const char **keys;
        int *ids;
        size_t cap;
    } map;
    wm_plan **plans;
    size_t n_plans, n_plans_made;
    uint64_t clock;
    wm_plan *last;
    uint8_t *mem;            /* activation arena + workspace, shared by plans (one run at a time) */
    size_t mem_size;
    void **eager_bufs;       /* eager plans: the buffers of the allocations of a run, in order; the next run's */
    uint64_t *eager_size;    /* k-th allocation reuses the k-th buffer when it is large enough (sizes here) */
    size_t n_eager_bufs, cap_eager_bufs, eager_next;
    uint64_t run_allocs;
    uint64_t packed_bytes;
    double *prof_ms;         /* WM_PROFILE=1: time per node, summed over runs (printed at free) */
    uint64_t prof_runs;
    void *gemm_ws;           /* GEMM scratch, one slice per pool thread */
    size_t gemm_ws_per;
    wm_session *parent;      /* a subgraph's session: model, pool and GEMM scratch are the parent's */
    struct wm_subgraph **subs; /* subgraphs of this session's nodes, freed with it */
    size_t n_subs;
    wm_budget budget;        /* limits and bytes held (used in the root session only: see budget.h) */
    int f16_float;           /* constant float16 MatMul / Gemm weights widened to float32 at creation (the
                                resolved wm_session_opts.f16_weights policy; a subgraph's is its root's) */
    struct {                 /* steady inputs and the values kept from them (steady.c) */
        uint8_t *in;         /* per graph input: marked steady */
        size_t n_in;         /* inputs marked */
        void **buf;          /* per value: its kept data (a WM_LOC_STEADY value's own), or NULL */
        uint64_t *cap;       /* bytes at buf */
        int valid;           /* the kept values are those of the steady inputs as fed (fed below) */
        const void **fed;    /* per graph input: the data the kept values were computed from */
        int64_t *fed_dims;   /* per graph input: rank, then WM_MAX_RANK dims */
        size_t skipped;      /* nodes the last run skipped */
    } steady;
};

/*
 * A session over subgraph g of parent's model (If/Loop/Scan bodies): its
 * inputs are g's inputs (formal_dtypes[i] != 0 types an input g leaves
 * untyped; a declared type must agree), then n_outer outer-scope values
 * (names and types as the parent sees them, any shape). Nodes of g must be
 * in topological order. *out is freed with wm_session_free (before parent).
 */
wm_status wm_session_new_sub(wm_session *parent, wm_onnx_graph *g, const int32_t *formal_dtypes, size_t n_formal,
                             const char *const *outer_names, const int32_t *outer_dtypes, size_t n_outer,
                             wm_session **out, wm_error *err);

/* Value id of name, -1 when unknown. */
int wm_session_value(const wm_session *s, const char *name);

/* Makes (or finds) the plan for these inputs. */
wm_status wm_plan_get(wm_session *s, const wm_tensor *inputs, wm_plan **out, wm_error *err);
void wm_plan_free(wm_plan *p);

/*
 * Steady inputs (steady.c). wm_steady_kept: at planning, 1 when node n (in/out pointing into the plan's tensors t)
 * computes from steady values (vsteady, per value) and constants alone and writes no graph output: its outputs
 * become steady in vsteady and are kept. wm_steady_bind: before a run of p, points the kept values at their buffers
 * (allocated or grown here, charged to the budget); *run_kept 1 when they are stale and the kept nodes must run.
 * wm_steady_done: after a run that computed them, records the inputs they came from. wm_steady_free: at
 * session free.
 */
int wm_steady_kept(const wm_session *s, const wm_node *n, wm_tensor *const *in, wm_tensor *const *out,
                   const wm_tensor *t, uint8_t *vsteady);
wm_status wm_steady_bind(wm_session *s, wm_plan *p, const wm_tensor *inputs, int *run_kept, wm_error *err);
void wm_steady_done(wm_session *s, const wm_tensor *inputs);
void wm_steady_free(wm_session *s);

/* Runs node i with in/out tensors (shapes known, data bound). */
wm_status wm_node_exec(wm_session *s, int i, wm_tensor *const *in, wm_tensor *const *out, void *ws, size_t ws_size,
                       wm_error *err);
/* Workspace bytes node i needs for these shapes. */
size_t wm_node_workspace(wm_session *s, int i, wm_tensor *const *in, wm_tensor *const *out);

#endif
