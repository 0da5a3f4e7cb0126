/* gemm.c - the float32 GEMM entry point (see gemm.h); a plain reference kernel until src/kernels lands. */
#include "ops/gemm.h"

#include <string.h>

/* ---------------------------------------------------------------- float32 GEMM */

/* C = alpha * op(A) op(B) + beta * C for rows [m0, m1): i-k-j order, contiguous inner loops. */
static void gemm_rows(const wm_gemm_args *g, int64_t m0, int64_t m1) {
    for (int64_t i = m0; i < m1; i++) {
        float *c = g->C + i * g->ldc;
        if (g->beta == 0) memset(c, 0, (size_t)g->N * sizeof *c);
        else if (g->beta != 1)
            for (int64_t j = 0; j < g->N; j++) c[j] *= g->beta;
        if (!g->tb) {
            for (int64_t k = 0; k < g->K; k++) {
                float a = g->alpha * (g->ta ? g->A[k * g->lda + i] : g->A[i * g->lda + k]);
                const float *b = g->B + k * g->ldb;
                for (int64_t j = 0; j < g->N; j++) c[j] += a * b[j];
            }
        } else {
            for (int64_t j = 0; j < g->N; j++) {
                const float *b = g->B + j * g->ldb;
                float acc = 0;
                for (int64_t k = 0; k < g->K; k++) acc += (g->ta ? g->A[k * g->lda + i] : g->A[i * g->lda + k]) * b[k];
                c[j] += g->alpha * acc;
            }
        }
    }
}

static void gemm_part(void *arg, int ith, int nth) {
    const wm_gemm_args *g = arg;
    long lo, hi;
    wm_split((long)g->M, ith, nth, &lo, &hi);
    gemm_rows(g, lo, hi);
}

void wm_sgemm(wm_exec *x, const wm_gemm_args *g) {
    if (g->M == 0 || g->N == 0) return;
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    int nth = flops >= 2e5 && x ? x->nth : 1;
    if (nth > g->M) nth = (int)g->M;
    wm_pool_run(x ? x->pool : NULL, gemm_part, (void *)g, nth);
}

void wm_sgemm_st(const wm_gemm_args *g) {
    if (g->M && g->N) gemm_rows(g, 0, g->M);
}
