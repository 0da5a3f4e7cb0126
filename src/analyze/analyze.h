/*
 * analyze.h - static EP compatibility of an ONNX graph (`winml analyze`).
 *
 * For one (rule set, device) target, every node of the main graph is matched
 * to a rule by (domain, op_type, the model's opset for that domain) and its
 * constraints are checked against what the graph knows statically: value
 * types (graph inputs/outputs, value_info, initializers, Constant nodes),
 * ranks, symbolic dims, constant inputs, attribute values. Unknown types do
 * not fail a check; the reason notes that it was not checked.
 *
 * Subgraph nodes (bodies of If/Loop/Scan) are not matched one by one: the
 * control-flow node itself is judged by its rule and by the control_flow
 * model check, and the count of nodes inside bodies is reported.
 * Constant nodes are treated as initializers (always supported, never a
 * partition boundary).
 *
 * Partitioning is a linear-order approximation: walking nodes in graph
 * order (ONNX requires topological order), a maximal run of EP nodes
 * (supported or partial) is one EP subgraph; unsupported/unknown nodes fall
 * back to CPU; a crossing tensor is a value produced on one side and used on
 * the other.
 */
#ifndef WM_ANALYZE_H
#define WM_ANALYZE_H

#include "analyze/ep_rules.h"
#include "core/ep.h"
#include "core/json.h"
#include "onnx/graph.h"

typedef struct wm_model_issue {
    const char *check;  /* "static_shapes", "int64", "control_flow", "max_opset" */
    int blocking;       /* 1: the EP would not take (part of) the model as is */
    char message[256];
} wm_model_issue;

typedef struct wm_analysis {
    const wm_ep_rules *rules;
    unsigned device;
    size_t n_nodes;             /* main-graph nodes */
    wm_level *level;            /* [n_nodes], malloc'ed */
    char **reason;              /* [n_nodes], malloc'ed strings or NULL */
    size_t counts[4];           /* per wm_level */
    wm_model_issue issues[8]; size_t n_issues;
    size_t ep_subgraphs, ep_nodes, cpu_nodes, crossing_tensors;
    size_t subgraph_nodes;      /* nodes inside control-flow bodies, not matched */
    wm_level verdict;           /* worst node level; partial at least when an issue is blocking */
} wm_analysis;

/*
 * Analyzes g (a model's main graph) for rules r on device (one WM_DEV_* bit
 * r lists). Fills *a, which the caller releases with wm_analysis_free (also
 * after an error). WM_ERR_NOMEM is the only failure.
 */
wm_status wm_analyze_graph(const wm_graph *g, const wm_ep_rules *r, unsigned device, wm_analysis *a, wm_error *err);

void wm_analysis_free(wm_analysis *a);

/*
 * Writes one target object (key may be NULL inside an array): ep, device,
 * source, verdict, counts, model_checks, ops, partitions, components,
 * nodes (the non-supported ones). Appends human summary lines to the
 * array `summary` when non-NULL (caller writes them).
 */
void wm_analysis_json(const wm_graph *g, const wm_analysis *a, wm_json *j, const char *key);

/*
 * The reference's analyze result (docs/json/analyze.md) into the open object j: analysis_timestamp (local time),
 * metadata (model_path, opset, producer, operator counts, detected patterns per EP) and results[] (one per
 * analysis in as[0..n): ihv_type, ep_type, device_type, runtime_support, has_errors, has_warnings,
 * classification{supported, partial, unsupported, unknown: ["OP/<domain>/<op>"]}, information[]).
 */
void wm_analyze_ref_json(const wm_onnx_modelproto *m, const wm_graph *g, const char *model_path,
                         const wm_analysis *const *as, size_t n, wm_json *j);

/* wm_ep_identity / wm_ep_alias: core/ep.h (the one EP name table). */

/*
 * `build`'s analysis of its final model (path) against the rule file rules_path for device (one WM_DEV_* bit):
 * result receives the reference's analyze_result.json object, manifest_details the manifest's analyze_details
 * object (lint{errors, warnings, passed, error_patterns, warning_patterns}, autoconf{}, autoconf_not_converged),
 * *unsupported_nodes the nodes the EP would not run (unsupported or unknown). Errors: the rule file's, the
 * model's, WM_ERR_USAGE when the EP has no rules for device.
 */
wm_status wm_analyze_build(const char *path, const char *rules_path, unsigned device, wm_json *result,
                           wm_json *manifest_details, size_t *unsupported_nodes, wm_error *err);

/* "OP/<domain>/<op_type>" into out[n], the default domain as "ai.onnx". */
void wm_pattern_id(const char *domain, const char *op, char *out, size_t n);

#define WM_OPSTAT_REASONS 3

/* One row of the op histogram: an op type, its node count, worst level and up to 3 distinct reasons. */
typedef struct wm_opstat {
    const char *op, *domain; /* borrowed from the graph */
    size_t count;
    wm_level level;
    const char *reasons[WM_OPSTAT_REASONS]; size_t n_reasons; /* borrowed from a */
} wm_opstat;

/*
 * The op histogram of analysis a of g, most frequent first: *out is a
 * malloc'ed array of *n the caller frees (free). WM_ERR_NOMEM only.
 */
wm_status wm_op_stats(const wm_graph *g, const wm_analysis *a, wm_opstat **out, size_t *n, wm_error *err);

#define WM_COMPONENT_BECAUSE 4

/* One name-scope group of nodes ("layers 0-23 attn") with its worst level. */
typedef struct wm_component {
    char name[192];
    size_t nodes, not_supported;
    wm_level level;
    const char *because[WM_COMPONENT_BECAUSE]; size_t n_because; /* op types of the not-supported nodes (borrowed from g) */
} wm_component;

/*
 * The components of analysis a of g, in first-node order: *out is a malloc'ed
 * array of *n the caller frees (free). Nodes without a '/' scope (fused nodes)
 * take the scope of a scoped consumer, else of a scoped producer.
 * WM_ERR_NOMEM is the only failure.
 */
wm_status wm_components(const wm_graph *g, const wm_analysis *a, wm_component **out, size_t *n, wm_error *err);

/* "layers 0-1 attn: partial on qnn/npu because of GroupQueryAttention" into line. */
void wm_component_summary(const wm_analysis *a, const wm_component *c, char *line, size_t n);

/* The component summary of a: wm_json array "components" (see components.c). */
void wm_analysis_components_json(const wm_graph *g, const wm_analysis *a, wm_json *j);

/*
 * The name scope of a node name with layer numbers replaced by '#':
 * "/model/layers.3/attn/q_proj/MatMul" -> "layers.#/attn", *layer = 3;
 * "/encoder/layer.0/attention/self/query/MatMul" -> "encoder/layer.#/attention".
 * No layer number: *layer = -1. Unscoped names give "(top level)".
 */
void wm_scope_key(const char *node_name, char *out, size_t n, long *layer);

#endif
