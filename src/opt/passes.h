/*
 * passes.h - the interface between the optimizer driver (opt.c) and the
 * passes (internal). A pass walks the graph, rewrites what it matches,
 * counts its rewrites in c->fired and leaves dead nodes for the driver's
 * dead-node sweep; nodes it adds may be out of order (the driver sorts).
 */
#ifndef WM_OPT_PASSES_H
#define WM_OPT_PASSES_H

#include "opt/opt.h"
#include "opt/opt_util.h"
#include "opt/shape.h"

typedef struct wm_pass_ctx {
    wm_graph *g;
    const wm_opt_config *cfg;
    wm_shapes *sh; /* inferred before the pass runs; stale for values the pass adds */
    uint64_t fold_cap;
    size_t fired;
    wm_error *err;
    void *state; /* a pass's own per-run state */
} wm_pass_ctx;

typedef wm_status (*wm_pass_fn)(wm_pass_ctx *c);

/* Calls fn on every default-domain node of type op (a snapshot of the node list, so fn may edit); stops at an error. */
wm_status wm_opt_each_op(wm_pass_ctx *c, const char *op, wm_status (*fn)(wm_pass_ctx *, wm_onnx_node *));

/* cleanup.c */
wm_status wm_pass_const_nodes(wm_pass_ctx *c);
wm_status wm_pass_fold(wm_pass_ctx *c);
wm_status wm_pass_shape_values(wm_pass_ctx *c);
wm_status wm_pass_identity(wm_pass_ctx *c);
wm_status wm_pass_cse(wm_pass_ctx *c);
wm_status wm_pass_dedup(wm_pass_ctx *c);
wm_status wm_pass_dce(wm_pass_ctx *c);

/* fuse_norm.c */
wm_status wm_pass_layernorm(wm_pass_ctx *c);
wm_status wm_pass_rmsnorm(wm_pass_ctx *c);
wm_status wm_pass_skipnorm(wm_pass_ctx *c);

/* fuse_act.c */
wm_status wm_pass_gelu(wm_pass_ctx *c);
wm_status wm_pass_fastgelu(wm_pass_ctx *c);
wm_status wm_pass_biasgelu(wm_pass_ctx *c);
wm_status wm_pass_quickgelu(wm_pass_ctx *c);
wm_status wm_pass_gemm(wm_pass_ctx *c);
wm_status wm_pass_gemm3d(wm_pass_ctx *c);

/* fuse_rope.c, fuse_attn.c */
wm_status wm_pass_rotary(wm_pass_ctx *c);
wm_status wm_pass_mha(wm_pass_ctx *c);
wm_status wm_pass_gqa(wm_pass_ctx *c);
/* fuse_attn_split.c */
wm_status wm_pass_attn_split(wm_pass_ctx *c);

/* fuse_quant.c */
wm_status wm_pass_dyn_quant_matmul(wm_pass_ctx *c);

/* fuse_engine.c */
wm_status wm_pass_matmul_epilogue(wm_pass_ctx *c);
wm_status wm_pass_conv_activation(wm_pass_ctx *c);
wm_status wm_pass_matmul_transpose(wm_pass_ctx *c);
wm_status wm_pass_matmul_group(wm_pass_ctx *c);
wm_status wm_pass_nhwc_layout(wm_pass_ctx *c);

/* Removes the value_info entries of values no longer in the graph; reindexes. */
wm_status wm_opt_prune_value_info(wm_graph *g, wm_error *err);

#endif
