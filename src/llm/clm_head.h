/*
 * clm_head.h - narrows a causal LM graph's logits to the last position, for
 * the runner's steps that need only the next-token distribution (prompt
 * prefill, decode): the head (a [hidden x vocab] product, the largest matrix
 * of small models) then runs on one row instead of the prompt's length.
 */
#ifndef WM_LLM_CLM_HEAD_H
#define WM_LLM_CLM_HEAD_H

#include "onnx/graph.h"

/*
 * Rewrites g in place so that output `logits` [B, S, V] becomes [B, 1, V], the
 * last position of S (see clm_head.c for the heads recognized). Returns 1 when
 * rewritten, 0 when the head is not recognized (g unchanged), -1 with err set
 * when an edit failed (g must then be dropped).
 */
int wm_clm_narrow_head(wm_graph *g, const char *logits, wm_error *err);

#endif
