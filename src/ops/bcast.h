/*
 * bcast.h - numpy-style broadcasting of up to three inputs to one output.
 *
 * wm_bcast_init right-aligns the input shapes, checks them and merges
 * adjacent dims that broadcast the same way, so the innermost run is as
 * long as possible. wm_bcast_run then calls fn for each innermost run of a
 * part of the output (threads split the outer index space), with element
 * pointers and per-input steps (0: a broadcast scalar in that run, 1: a
 * contiguous run).
 */
#ifndef WM_OPS_BCAST_H
#define WM_OPS_BCAST_H

#include "ops/op.h"

typedef struct wm_bcast {
    int n_in;
    int rank;                        /* merged rank, >= 1 */
    int64_t dims[WM_MAX_RANK];       /* merged output dims */
    int64_t strides[3][WM_MAX_RANK]; /* per input, in elements (0 = broadcast) */
    size_t esize[3], osize;          /* element sizes */
    int64_t out_dims[WM_MAX_RANK];   /* unmerged output shape */
    int out_rank;
} wm_bcast;

/* Output shape of broadcasting in[0..n); WM_ERR_INPUT naming the node when incompatible. */
wm_status wm_bcast_shape(const wm_node *n, wm_tensor *const *in, int n_in, wm_tensor *out, wm_error *err);

/* Prepares iteration of out over in[0..n_in) (shapes must broadcast to out). */
void wm_bcast_init(wm_bcast *b, wm_tensor *const *in, int n_in, const wm_tensor *out);

/* fn(ctx, out, in[3], step[3], n): one innermost run of n elements. */
typedef void (*wm_bcast_fn)(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n);

/* Runs fn over the whole output, on the pool when it is large. */
void wm_bcast_run(const wm_bcast *b, wm_tensor *const *in, wm_tensor *out, wm_bcast_fn fn, void *ctx, wm_exec *x);

#endif
