/*
 * opt.h - the graph optimizer: cleanup passes and fusions into ONNX Runtime
 * contrib ops, run by level like ONNX Runtime's (basic, extended, all),
 * with passes switched on or off by name, and a report of node counts and
 * op histograms before -> after each pass.
 *
 * Passes edit the graph in place through the graph IR (onnx/graph.h); the
 * model can be saved with wm_onnx_save afterwards. Fused graphs import the
 * com.microsoft domain (version 1) for the contrib ops they use.
 *
 * Levels:
 *   basic     constant folding, shape arithmetic, dead nodes, common
 *             subexpressions, identity/cast/reshape chains, initializer dedup
 *   extended  + fusions that keep the graph's semantics exactly: LayerNorm,
 *             RMSNorm, SkipLayerNorm (+bias), Gelu/FastGelu/BiasGelu,
 *             QuickGelu/SiLU, MatMul+Add -> Gemm, RotaryEmbedding,
 *             MultiHeadAttention
 *   all       + GroupQueryAttention for decoders (its mask is derived from the
 *             2-D attention mask: right-padded or unpadded batches only)
 *   engine    (by name only) MatMul + bias + activation -> ai.winml MatMulBias;
 *             Conv + residual + activation -> com.microsoft FusedConv
 *
 * The engine optimizes every graph it opens (wm_opt_config_engine): the
 * extended fusions without initializer dedup (it would read every weight),
 * plus the engine passes.
 */
#ifndef WM_OPT_OPT_H
#define WM_OPT_OPT_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "onnx/graph.h"

/* WM_OPT_ENGINE marks passes into winml's own engine ops (domain ai.winml): never selected by a level, only
 * by name (the engine's sessions enable them; see wm_opt_config_engine). */
typedef enum wm_opt_level {
    WM_OPT_NONE = 0,
    WM_OPT_BASIC = 1,
    WM_OPT_EXTENDED = 2,
    WM_OPT_ALL = 3,
    WM_OPT_ENGINE = 4
} wm_opt_level;

#define WM_OPT_MAX_SWITCHES 64

typedef struct wm_opt_config {
    wm_opt_level level;
    const char *enable[WM_OPT_MAX_SWITCHES];  /* pass names forced on */
    size_t n_enable;
    const char *disable[WM_OPT_MAX_SWITCHES]; /* pass names forced off */
    size_t n_disable;
    uint64_t fold_max_bytes;                  /* constant-folding output cap (0: default 16 MiB) */
    int max_rounds;                           /* fixed-point rounds of the whole pipeline (0: default 3) */
} wm_opt_config;

/* An op histogram: (op type, count) pairs, or signed deltas; items malloc'ed. */
typedef struct wm_opt_hist_item {
    char op[64];
    int64_t n;
} wm_opt_hist_item;

typedef struct wm_opt_hist {
    wm_opt_hist_item *items;
    size_t n;
} wm_opt_hist;

typedef struct wm_opt_pass_report {
    const char *name;     /* static */
    size_t nodes_before, nodes_after;
    size_t fired;         /* rewrites the pass made (fusions, folded nodes, removed nodes...) */
    double ms;
    wm_opt_hist delta;    /* op count changes the pass made, over all rounds */
} wm_opt_pass_report;

typedef struct wm_opt_report {
    size_t nodes_before, nodes_after;
    size_t inits_before, inits_after;
    wm_opt_pass_report *passes; /* malloc'ed, one entry per selected pass (totals over rounds) */
    size_t n_passes;
    wm_opt_hist before, after;  /* op histograms of the whole graph */
} wm_opt_report;

/* The op histogram of g (sorted by count, then name) into *h; WM_ERR_NOMEM. Free with wm_opt_hist_free. */
wm_status wm_opt_hist_of(const wm_onnx_graph *g, wm_opt_hist *h, wm_error *err);
void wm_opt_hist_free(wm_opt_hist *h);

typedef struct wm_opt_pass_info {
    const char *name;
    wm_opt_level level;
    const char *summary;
} wm_opt_pass_info;

/* Defaults: level all, no switches. */
void wm_opt_config_default(wm_opt_config *c);
/* What the engine runs on the graphs it opens (see above). */
void wm_opt_config_engine(wm_opt_config *c);

/* The pass table (in run order) and its size. */
size_t wm_opt_pass_count(void);
const wm_opt_pass_info *wm_opt_pass_get(size_t i);
/* The pass named name, or NULL. */
const wm_opt_pass_info *wm_opt_pass_find(const char *name);

/*
 * Runs the passes c selects on g. r (may be NULL) receives the report;
 * release it with wm_opt_report_free. Unknown pass names in c: WM_ERR_USAGE.
 * On error the graph may be partly optimized but stays valid.
 */
wm_status wm_opt_run(wm_graph *g, const wm_opt_config *c, wm_opt_report *r, wm_error *err);

void wm_opt_report_free(wm_opt_report *r);

/* Writes the report as a JSON object named key (NULL inside an array). */
void wm_opt_report_json(const wm_opt_report *r, wm_json *j, const char *key);

/*
 * Turns the default-domain SimplifiedLayerNormalization nodes of a float32
 * graph back into standard ops (for models below opset 23, where only ONNX
 * Runtime knows the op).
 */
wm_status wm_opt_expand_rmsnorm(wm_graph *g, wm_error *err);

/* Runs one pass by name (tests, the build pipeline); *fired receives its count. */
wm_status wm_opt_run_pass(wm_graph *g, const char *name, const wm_opt_config *c, size_t *fired, wm_error *err);

#endif
