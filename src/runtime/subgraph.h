/*
 * subgraph.h - graphs inside nodes (If branches, Loop and Scan bodies).
 *
 * Design: a subgraph is compiled once, at session creation, into its own
 * nested session over the same model (wm_session_new_sub): values, folding,
 * plans per input shapes and an activation arena of its own; it shares the
 * parent's thread pool and GEMM scratch. Its inputs are the graph's formal
 * inputs followed by the outer-scope values its nodes (and nested
 * subgraphs) use. The node owning it lists those outer values as extra
 * inputs after its NodeProto inputs (wm_node.n_in_proto marks the split;
 * wm_subgraph_outer_inputs makes the extended NodeProto when the session
 * builds the node), so the parent's liveness, folding and ordering see
 * every value a subgraph reads. Control-flow ops run their subgraphs with
 * wm_subgraph_run, which is a wm_session_run of the nested session: a
 * body whose shapes repeat reuses its plan, so iterations do not allocate.
 * The control-flow ops themselves report data-dependent shapes, so a
 * graph holding them runs eagerly while a graph without them keeps its
 * allocation-free planned run loop.
 */
#ifndef WM_RUNTIME_SUBGRAPH_H
#define WM_RUNTIME_SUBGRAPH_H

#include "core/arena.h"
#include "ops/op.h"

typedef struct wm_subgraph wm_subgraph;

#define WM_SUBGRAPH_BUFS 200

/*
 * init_node's hook: *out = p when p has no GRAPH attribute, else a copy of
 * p (in arena a) whose inputs also list, once each, the names its
 * subgraphs use without defining them.
 */
wm_status wm_subgraph_outer_inputs(wm_arena *a, const wm_onnx_node *p, const wm_onnx_node **out, wm_error *err);

/*
 * For an op's init: compiles GRAPH attribute attr of node n. formal_dtypes
 * (n_formal entries, 0 = as declared) type the graph's inputs. The result
 * belongs to the session building n (freed with it).
 */
wm_status wm_subgraph_new(wm_node *n, const char *attr, const int32_t *formal_dtypes, size_t n_formal,
                          wm_subgraph **out, wm_error *err);
void wm_subgraph_free(wm_subgraph *g);

size_t wm_subgraph_n_formal(const wm_subgraph *g);
size_t wm_subgraph_n_outputs(const wm_subgraph *g);
/* Output k as the graph declares it (dtype inferred; dims < 0 or rank -1 where unknown). */
const wm_io_info *wm_subgraph_output(const wm_subgraph *g, size_t k);

/*
 * Runs g: formal[0..n_formal) feed its inputs, the outer values come from
 * node_in[n->n_in_proto..) of its node. out[k] receives output k; the data
 * stays valid until the next run of g.
 */
wm_status wm_subgraph_run(wm_subgraph *g, const wm_tensor *formal, wm_tensor *const *node_in, wm_tensor *out,
                          wm_error *err);

/*
 * *out: a growable scratch buffer of g (slot < WM_SUBGRAPH_BUFS) of at least bytes, kept between runs, freed with
 * g. Its capacity is taken from the session's memory budget (runtime/budget.h): over it, WM_ERR_INPUT naming the
 * node, the size and the limit.
 */
wm_status wm_subgraph_buf(wm_subgraph *g, int slot, uint64_t bytes, void **out, wm_error *err);

#endif
