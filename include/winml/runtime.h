/*
 * runtime.h - the CPU inference engine: sessions over ONNX models.
 *
 * A session loads a model (weights stay mmap'd), resolves every node to a
 * kernel of the op table, infers element types and checks that every op
 * and type is supported (errors name the node, op and type at creation,
 * never at run time), folds constant subgraphs and prepacks weights. Each
 * distinct set of input shapes gets a plan, made once: shapes of every
 * value (symbolic dims bound from the inputs), shape arithmetic evaluated
 * ahead, and activation buffers assigned from liveness into one arena, so
 * a run performs no allocation. Runs execute nodes in order on the
 * session's thread pool; the same inputs and thread count give
 * bit-identical outputs.
 */
#ifndef WINML_RUNTIME_H
#define WINML_RUNTIME_H

#include "winml/onnx.h"
#include "winml/winml.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WM_MAX_RANK 8

/* A dense, contiguous, row-major tensor. dtype is an ONNX TensorProto.DataType. */
typedef struct wm_tensor {
    int32_t dtype;
    int32_t rank;
    int64_t dims[WM_MAX_RANK];
    void *data; /* not owned */
} wm_tensor;

uint64_t wm_tensor_numel(const wm_tensor *t);
uint64_t wm_tensor_nbytes(const wm_tensor *t);

typedef struct wm_session wm_session;

typedef struct wm_session_opts {
    int threads;         /* 0: all online CPUs */
    int no_fold;         /* 1: do not fold constant subgraphs at creation */
    int max_plans;       /* plans kept for distinct input shapes (0: 8) */
    int keep_values;     /* 1: no activation memory is reused, so every value can be read after a run
                            (wm_session_value_of; for per-layer comparisons, not for speed); also keeps
                            the graph as written (no optimization) so its values keep their names */
    int no_optimize;     /* 1: run the graph as written; by default the session first fuses it for its
                            kernels (LayerNorm, GELU, SkipLayerNorm, bias and activation into the MatMul,
                            ...: see src/opt/opt.h, wm_opt_config_engine) */
    uint64_t max_memory; /* bytes the session may hold for what the model's shapes size: activation arena and
                            workspace, the buffers of data-dependent runs and of Loop/Scan bodies, folded
                            constants. 0: $WM_MAX_MEMORY (e.g. "4G"), else the memory available to the process
                            when the session is made (MemAvailable, cgroup limit, RLIMIT_AS). A plan or value
                            over it fails before allocating, naming the node, value, shape and size. */
    int64_t max_loop_iterations; /* iterations one execution of a Loop or Scan may run; 0:
                            $WM_MAX_LOOP_ITERATIONS, else 10^7 */
    double timeout_s;    /* seconds one wm_session_run may take, checked between nodes and loop iterations (one
                            slow kernel is not interrupted); 0: $WM_TIMEOUT, else no limit */
    int f16_weights;     /* how constant float16 weights of MatMul / Gemm (2-D) are held: WM_F16_AUTO (0:
                            $WM_F16_WEIGHTS = auto|half|float, else auto), WM_F16_HALF or WM_F16_FLOAT (below) */
} wm_session_opts;

/*
 * The float16 weight policy (wm_session_opts.f16_weights). WM_F16_HALF: kept as half in the half-weight GEMM's
 * panels and widened as they are read (small M: a GEMV reading half the bytes; large M: panels widened per call).
 * WM_F16_FLOAT: widened once at creation and packed for the float32 GEMM, as onnxruntime's CPU session holds
 * them: twice the bytes of the half panels (the half pages of the file are released), no per-call conversion.
 * WM_F16_AUTO: float when the graph is not autoregressive (no graph input named with "past" and no output named
 * with "present": an encoder, a vision or text classifier, products of many rows), half otherwise (decoders read
 * their weights once per token: half the bytes). WM_F16_FLOAT and AUTO widen a weight only while its float32 copy
 * fits the session's memory budget (max_memory), which it then counts; past it, half. Values are unchanged (the
 * widening is exact); the sums of a product may run in another order (k-blocks), float32 rounding apart.
 */
enum { WM_F16_AUTO = 0, WM_F16_HALF = 1, WM_F16_FLOAT = 2 };

/* Description of a graph input or output. dims[i] < 0 is symbolic (dim_names[i], may be NULL). */
typedef struct wm_io_info {
    const char *name;
    int32_t dtype;
    int32_t rank; /* -1: unknown rank */
    int64_t dims[WM_MAX_RANK];
    const char *dim_names[WM_MAX_RANK];
} wm_io_info;

/*
 * Creates a session for the ONNX file at path. *out owns the model, its
 * mappings, the thread pool and every buffer; free with wm_session_free.
 * opts may be NULL (defaults).
 */
wm_status wm_session_new(const char *path, const wm_session_opts *opts, wm_session **out, wm_error *err);

/* As wm_session_new, taking ownership of an already loaded model m (freed on error too). */
wm_status wm_session_new_model(wm_onnx_model *m, const wm_session_opts *opts, wm_session **out, wm_error *err);

void wm_session_free(wm_session *s);

size_t wm_session_n_inputs(const wm_session *s);
size_t wm_session_n_outputs(const wm_session *s);
const wm_io_info *wm_session_input(const wm_session *s, size_t i);
const wm_io_info *wm_session_output(const wm_session *s, size_t i);
/* The index of the graph input / output named name, -1 when the model has none of that name. */
int wm_session_input_index(const wm_session *s, const char *name);
int wm_session_output_index(const wm_session *s, const char *name);
int wm_session_threads(const wm_session *s);
/* "fp32", "fp16", "bf16", "int8" or "int4": the dominant weight type (MatMulNBits means int4/int8). */
const char *wm_session_precision(const wm_session *s);

/*
 * Runs the model. inputs[i] feeds graph input i (wm_session_input order;
 * the caller keeps the data alive during the call). outputs[i] receives
 * graph output i: dtype, dims and a data pointer into session memory that
 * stays valid until the next run or wm_session_free. Input dtypes and
 * fixed dims are checked (WM_ERR_INPUT naming the input).
 */
wm_status wm_session_run(wm_session *s, const wm_tensor *inputs, size_t n_inputs, wm_tensor *outputs,
                         size_t n_outputs, wm_error *err);

/*
 * After a run of a session made with keep_values: the value named name as
 * the last run computed it (data owned by the session, valid until the next
 * run). WM_ERR_INPUT when no value has that name; WM_ERR_USAGE without
 * keep_values or before a run.
 */
wm_status wm_session_value_of(const wm_session *s, const char *name, wm_tensor *out, wm_error *err);

/*
 * 1 when graph output out may be bound to the very buffer that feeds graph
 * input in: in is read only by ops that update their past KV cache in
 * place (WM_OP_KV_INPLACE, at the past slot matching the present slot that
 * produces out). A causal LM then keeps one max-length cache and appends.
 */
int wm_session_kv_inplace(const wm_session *s, size_t in, size_t out);

/* Number of values and the name of value i, in creation order (graph inputs, initializers, node outputs in topological order). */
size_t wm_session_n_values(const wm_session *s);
const char *wm_session_value_name(const wm_session *s, size_t i);
/* The node producing value name (its name, else its first output) and its op type; NULL for inputs and initializers. */
const char *wm_session_value_producer(const wm_session *s, const char *name, const char **op_type);

/* Caller memory for one output (wm_session_run_bound). */
typedef struct wm_out_bind {
    void *data;        /* NULL: the output lives in session memory as usual */
    uint64_t capacity; /* bytes available at data */
} wm_out_bind;

/*
 * As wm_session_run, but output i is written straight into bind[i].data
 * when that is set (WM_ERR_USAGE, before anything runs, when the output
 * needs more than bind[i].capacity bytes). A bound output may be the very
 * buffer a later run reads as an input (a KV cache fed back); within one
 * run, a bound buffer must not also be one of this run's inputs unless the
 * op writing it allows that (a shared past/present cache).
 */
wm_status wm_session_run_bound(wm_session *s, const wm_tensor *inputs, size_t n_inputs, wm_tensor *outputs,
                               size_t n_outputs, const wm_out_bind *bind, wm_error *err);

/*
 * Takes bytes from s's memory budget (max_memory, see wm_session_opts) for a buffer the caller keeps for the
 * session's runs (a KV cache), held until the session is freed. WM_ERR_INPUT naming what, its size, what is held
 * and the limit (and how to raise it) when it does not fit: check before allocating.
 */
wm_status wm_session_reserve(wm_session *s, uint64_t bytes, const char *what, wm_error *err);

/*
 * Marks the graph inputs named names[0..n) steady: their contents stay the same over the runs that follow (a
 * decoder's cross-attention cache, fed back unchanged every step). The values computed from steady inputs and
 * constants alone (a Cast of that cache to the graph's float16) are then computed by the next run and kept in
 * memory the session owns (charged to its budget) for the runs after, which skip the nodes making them. A later
 * run recomputes them when a steady input arrives in another buffer or with other dims; one whose bytes change in
 * the same buffer must be declared again: every call (n = 0 included: nothing steady) drops what was kept.
 * WM_ERR_INPUT naming the name when it is no graph input; nothing changes then.
 */
wm_status wm_session_steady_inputs(wm_session *s, const char *const *names, size_t n, wm_error *err);

/* Statistics of the session, for perf and tests. */
typedef struct wm_session_stats {
    size_t n_nodes;        /* nodes in the graph */
    size_t n_folded;       /* nodes folded to constants at creation */
    size_t n_run_nodes;    /* nodes the last plan executes per run */
    size_t n_plans;        /* plans made so far */
    uint64_t arena_bytes;  /* activation arena of the last plan */
    uint64_t naive_bytes;  /* sum of its activations without reuse */
    uint64_t packed_bytes; /* prepacked weights */
    uint64_t run_allocs;   /* heap allocations made inside wm_session_run after planning (eager plans only) */
    int eager;             /* the last plan needed data-dependent shapes and ran eagerly */
    size_t n_steady_skipped; /* nodes the last run skipped: their values kept from an earlier run (steady inputs) */
} wm_session_stats;

void wm_session_get_stats(const wm_session *s, wm_session_stats *st);

#ifdef __cplusplus
}
#endif
#endif
