/*
 * gemm.h - the float32 GEMM every op uses (MatMul, Gemm, Conv via im2col,
 * attention): C = act(alpha * op(A) op(B) + beta * C + bias), row-major,
 * on the session's pool, running the kernel table of src/kernels (AVX2/FMA
 * when the CPU has it). Constant weights are packed once at session
 * creation (wm_gemm_pack) and passed as packed_b. Scratch comes from the
 * session's GEMM workspace in x (one slice per thread): no allocation.
 */
#ifndef WM_OPS_GEMM_H
#define WM_OPS_GEMM_H

#include "kernels/kernels.h"
#include "ops/op.h"

typedef struct wm_gemm_args {
    int64_t M, N, K;
    const float *A; int64_t lda; int ta;
    const float *B; int64_t ldb; int tb;
    float *C; int64_t ldc;
    float alpha, beta;
    const float *packed_b; /* wm_gemm_pack of op(B), or NULL */
    const float *bias;     /* [N] added to every row, or NULL */
    wm_act act;            /* activation after the bias */
    float act_a;           /* its parameter (QUICK_GELU's alpha) */
} wm_gemm_args;

/*
 * Shares for a weight-streaming GEMV (decode: memory bound, each core draws only part of the bandwidth): one per
 * share_bytes of weights, at most `units` (the kernel's column groups) and at most per_thread per thread, claimed
 * through wm_pool_run_shares so that a thread held up by another process leaves its unclaimed shares to the
 * others instead of the whole step waiting for it. At least 1.
 */
static inline int wm_stream_shares(int64_t weight_bytes, int64_t units, int threads, int64_t share_bytes,
                                   int per_thread) {
    int64_t s = weight_bytes / share_bytes;
    if (s > units) s = units;
    if (s > (int64_t)threads * per_thread) s = (int64_t)threads * per_thread;
    return s < 1 ? 1 : (int)s;
}

/* Runs g on x's pool (threads split the output tiles). */
void wm_sgemm(wm_exec *x, const wm_gemm_args *g);
/* Runs a on x's pool over up to nth shares (fewer for a small GEMM: wm_sgemm_tasks); a->work holds x->nth slices of
   ws_per bytes (>= wm_sgemm_workspace_size(a, 1)), one per thread. With prepacked weights on all the threads, more
   shares than threads (WM_GEMM_SHARES each), claimed as threads come free. */
void wm_sgemm_pool(wm_exec *x, const wm_sgemm_args *a, int nth, size_t ws_per);

/* C[M,N] = A (float32) @ op(B) + bias with B in IEEE half, read directly (no float32 copy of the
 * weights): the fp16 MatMul / Gemm path. packed: op(B) from wm_hgemm_prepack (then B is not read), or NULL.
 * Runs on x's pool with the session's GEMM scratch. */
void wm_hgemm(wm_exec *x, int64_t M, int64_t N, int64_t K, const float *A, const uint16_t *B, int tb,
              const uint16_t *packed, float *C, const float *bias);

/* The same with a whole epilogue (bias, activation; ep read during the call only). */
void wm_hgemm_ep(wm_exec *x, int64_t M, int64_t N, int64_t K, const float *A, const uint16_t *B, int tb,
                 const uint16_t *packed, float *C, const wm_epilogue *ep);

/* op(B) of node n's constant 2-D float16 input k (tb: stored [N, K]) in the half GEMM's panels
 * (wm_hgemm_pack_b), in the session's memory; the input's mapped pages are released. NULL on OOM. */
uint16_t *wm_hgemm_prepack(wm_node *n, int k, int tb);
/* op(B) of node n's constant 2-D float16 input k (tb: stored [N, K]) widened to float32 and packed for the float32
 * GEMM (wm_gemm_pack's layout: the values exact), in the session's memory; the input's mapped pages are released.
 * For a session that holds its float16 weights as float32 (wm_node_f16_float). NULL on OOM. */
float *wm_gemm_prepack_f16(wm_node *n, int k, int tb);
/* wm_hgemm_pack_b of op(B) (B [K, N] row stride ldb, or with tb [N, K]) into P, the panels split over n's pool. */
void wm_hgemm_pack_pool(wm_node *n, int tb, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, uint16_t *P);

/* Single-threaded, for callers that parallelize themselves (per batch/head): ith picks the scratch slice. */
void wm_sgemm_st(wm_exec *x, int ith, const wm_gemm_args *g);

/* Bytes of packed op(B) [K, N]; packs it (tb: B is stored [N, K]). */
size_t wm_gemm_pack_size(int64_t K, int64_t N);
void wm_gemm_pack(int tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed);

/* Per-thread scratch the session provides in wm_exec.gemm_ws. */
size_t wm_gemm_scratch_per_thread(void);

#endif
