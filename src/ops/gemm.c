/* gemm.c - the float32 GEMM entry point (see gemm.h) over the kernel table. */
#include "ops/gemm.h"

#include <string.h>

static void to_kernel(const wm_gemm_args *g, void *work, wm_sgemm_args *a) {
    memset(a, 0, sizeof *a);
    a->M = g->M, a->N = g->N, a->K = g->K;
    a->alpha = g->alpha, a->beta = g->beta;
    a->A = g->A, a->lda = g->lda, a->trans_a = g->ta;
    a->B = g->B, a->ldb = g->ldb, a->trans_b = g->tb;
    a->packed_b = g->packed_b;
    a->C = g->C, a->ldc = g->ldc;
    a->ep.bias = g->bias;
    a->ep.act = g->act;
    a->work = work;
}

typedef struct gctx {
    const wm_kernels *k;
    wm_sgemm_args a;
} gctx;

static void gemm_part(void *arg, int ith, int nth) {
    const gctx *c = arg;
    c->k->sgemm(&c->a, ith, nth);
}

void wm_sgemm(wm_exec *x, const wm_gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return;
    gctx c = {wm_kernels_get(), {0}};
    to_kernel(g, x->gemm_ws, &c.a);
    int nth = wm_sgemm_tasks(g->M, g->N, g->K);
    if (nth > x->nth) nth = x->nth;
    wm_pool_run(x->pool, gemm_part, &c, nth);
}

void wm_sgemm_st(wm_exec *x, int ith, const wm_gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return;
    wm_sgemm_args a;
    to_kernel(g, (char *)x->gemm_ws + (size_t)ith * x->gemm_ws_per, &a);
    wm_kernels_get()->sgemm(&a, 0, 1);
}

size_t wm_gemm_pack_size(int64_t K, int64_t N) { return wm_sgemm_pack_b_size(K, N); }

void wm_gemm_pack(int tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed) {
    wm_sgemm_pack_b(tb, K, N, B, ldb, packed);
}

size_t wm_gemm_scratch_per_thread(void) {
    wm_sgemm_args big = {.M = 1 << 20, .N = 1 << 20, .K = 1 << 20};
    return (wm_sgemm_workspace_size(&big, 1) + 63) & ~(size_t)63;
}
