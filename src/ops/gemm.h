/*
 * gemm.h - the float32 GEMM every op uses (MatMul, Gemm, Conv via im2col,
 * attention): C = alpha * op(A) op(B) + beta * C, row-major, on the
 * session's pool. The kernel behind it comes from src/kernels when that
 * dispatch table is present; this entry point stays.
 */
#ifndef WM_OPS_GEMM_H
#define WM_OPS_GEMM_H

#include "ops/op.h"

typedef struct wm_gemm_args {
    int64_t M, N, K;
    const float *A; int64_t lda; int ta;
    const float *B; int64_t ldb; int tb;
    float *C; int64_t ldc;
    float alpha, beta;
} wm_gemm_args;

/* Runs g on x's pool (x->pool may be NULL: single thread). */
void wm_sgemm(wm_exec *x, const wm_gemm_args *g);

/* Single-threaded, for callers that parallelize themselves (per batch/head). */
void wm_sgemm_st(const wm_gemm_args *g);

#endif
