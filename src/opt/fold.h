/*
 * fold.h - a small evaluator for constant folding (internal): the ops that
 * shape arithmetic and constant preparation use (Shape-free ones: shapes are
 * resolved through shape.h), on decoded constants.
 */
#ifndef WM_OPT_FOLD_H
#define WM_OPT_FOLD_H

#include "opt/opt_util.h"

/*
 * Evaluates node n on constant inputs in[0..n_in) (an absent optional input
 * has dtype 0). out[0..n_out) receive new tensors the caller frees.
 * opset: the default-domain version (attribute-vs-input forms).
 * WM_ERR_UNSUPPORTED when the op (or this use of it) is not implemented or
 * an output would exceed max_bytes; WM_ERR_INPUT on inconsistent inputs.
 */
wm_status wm_fold_eval(const wm_onnx_node *n, int64_t opset, const wm_ct *in, size_t n_in, wm_ct *out,
                       size_t n_out, uint64_t max_bytes, wm_error *err);

/* 1 when wm_fold_eval implements op (default domain). */
int wm_fold_supported(const char *op);

#endif
