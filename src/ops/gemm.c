/* gemm.c - the float32 GEMM entry point (see gemm.h) over the kernel table. */
#include "ops/gemm.h"

#include <stdlib.h>
#include <string.h>

#define WM_GEMM_SHARES 4 /* shares per thread of a GEMM over weights (wm_sgemm) */

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
    a->ep.act_a = g->act_a;
    a->work = work;
}

typedef struct gctx {
    const wm_kernels *k;
    wm_sgemm_args a;
    wm_pool *pool; /* with more shares than threads: */
    char *ws;      /* the threads' scratch slices, ws_per bytes each */
    size_t ws_per;
} gctx;

static void gemm_part(void *arg, int ith, int nth) {
    const gctx *c = arg;
    c->k->sgemm(&c->a, ith, nth);
}

/* one of more shares than threads, in the scratch slice of the thread that claimed it */
static void gemm_share(void *arg, int ith, int nth) {
    const gctx *c = arg;
    wm_sgemm_args a = c->a;
    a.work = c->ws + (size_t)wm_pool_thread(c->pool) * c->ws_per;
    a.work_own = 1;
    c->k->sgemm(&a, ith, nth);
}

void wm_sgemm_pool(wm_exec *x, const wm_sgemm_args *a, int nth, size_t ws_per) {
    if (a->M <= 0 || a->N <= 0) return;
    int tasks = wm_sgemm_tasks(a->M, a->N, a->K);
    if (nth > tasks) nth = tasks;
    gctx c = {wm_kernels_get(), *a, x->pool, a->work, ws_per};
    /* A GEMM over weights on all the threads runs as WM_GEMM_SHARES shares a thread, claimed as threads come free:
       split in halves, a thread that another process held up (a shared 2-vCPU machine) kept the other waiting for
       its half. The values do not depend on the split (each output's sum runs over the same k-blocks, in one tile).
       2 threads, alternated 6 times, 1 -> 4 shares a thread: bert-base 67-76 -> 68-73 ms (mean 71.5 -> 69.9),
       ViT-B/16 105-116 -> 101-117 (mean 111.9 -> 109.8) */
    int shares = nth > 1 && nth == x->nth && a->packed_b && a->M > 2 ? nth * WM_GEMM_SHARES : nth;
    if (shares > tasks) shares = tasks;
    /* each share whole 32-column tiles (384 columns in 8 shares would each end in a half tile) and 4 MFLOP at least
       (a share costs a claim and the driver's set-up: without these limits xlmr's mMiniLM, 384 wide, ran about 6%
       slower, 20.5 -> 21.7 ms in the mean of 4 alternations) */
    int64_t tiles32 = (a->N + 31) / 32;
    double flops = 2.0 * (double)a->M * (double)a->N * (double)a->K;
    while (shares > nth && (tiles32 % shares || flops / shares < (double)(1 << 22))) shares--;
    if (shares > nth) wm_pool_run_shares(x->pool, gemm_share, &c, shares);
    else wm_pool_run(x->pool, gemm_part, &c, nth);
}

/* Sessions give every exec a GEMM scratch; a bare exec (unit tests, tools) gets a temporary one. */
static void *scratch_of(const wm_exec *x, int nth, void **tmp) {
    *tmp = NULL;
    if (x->gemm_ws) return x->gemm_ws;
    return *tmp = aligned_alloc(64, wm_gemm_scratch_per_thread() * (size_t)(nth > 0 ? nth : 1));
}

void wm_sgemm(wm_exec *x, const wm_gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return;
    int nth = x->nth;
    void *tmp;
    wm_sgemm_args a;
    to_kernel(g, scratch_of(x, nth, &tmp), &a);
    wm_sgemm_pool(x, &a, nth, x->gemm_ws ? x->gemm_ws_per : wm_gemm_scratch_per_thread());
    free(tmp);
}

typedef struct hctx {
    const wm_kernels *k;
    wm_hgemm_args a;
} hctx;

static void hgemm_part(void *arg, int ith, int nth) {
    const hctx *c = arg;
    c->k->hgemm(&c->a, ith, nth);
}

typedef struct hpack_job {
    int tb;
    int64_t K, N, ldb;
    const uint16_t *B;
    uint16_t *P;
} hpack_job;

static void hpack_part(void *arg, int ith, int nth) {
    const hpack_job *j = arg;
    wm_hgemm_pack_b_share(j->tb, j->K, j->N, j->B, j->ldb, j->P, ith, nth);
}

void wm_hgemm_pack_pool(wm_node *n, int tb, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, uint16_t *P) {
    hpack_job j = {tb, K, N, ldb, B, P}; /* panels split over the pool: copying and first touch */
    wm_pool_run(wm_node_pool(n), hpack_part, &j, wm_hgemm_pack_b_size(K, N) >= (1u << 20) ? 0 : 1);
}

uint16_t *wm_hgemm_prepack(wm_node *n, int k, int tb) {
    const wm_tensor *b = n->in_const[k];
    int64_t K = b->dims[tb ? 1 : 0], N = b->dims[tb ? 0 : 1];
    size_t size = wm_hgemm_pack_b_size(K, N);
    uint16_t *p = wm_node_alloc(n, size ? size : 1);
    if (!p) return NULL;
    wm_hgemm_pack_pool(n, tb, K, N, b->data, b->dims[1], p);
    n->packed_bytes += size;
    wm_node_release_const(n, k);
    return p;
}

float *wm_gemm_prepack_f16(wm_node *n, int k, int tb) {
    const wm_tensor *b = n->in_const[k];
    int64_t K = b->dims[tb ? 1 : 0], N = b->dims[tb ? 0 : 1];
    size_t size = wm_gemm_pack_size(K, N);
    float *p = wm_node_alloc(n, size ? size : 1);
    if (!p) return NULL;
    wm_sgemm_pack_b_f16(tb, K, N, b->data, b->dims[1], p);
    n->packed_bytes += size;
    wm_node_release_const(n, k);
    return p;
}

#define WM_HGEMV_SHARES 4              /* GEMV: claimed shares per thread at most */
#define WM_HGEMV_SHARE_BYTES (32 << 10) /* GEMV: weight bytes per share at least */
/* Shares of an fp16-weight GEMM: a GEMV (M < WM_HGEMM_BIG_M: decode) in claimed stream shares (wm_stream_shares,
   whole 64-column panels); larger M one share per thread at most, by work (wm_sgemm_tasks). */
static int hgemm_shares(int64_t M, int64_t N, int64_t K, int packed, int threads) {
    int nth = wm_sgemm_tasks(M, N, K);
    if (nth > threads) nth = threads;
    if (M >= WM_HGEMM_BIG_M || threads < 2 || nth < 2) return nth;
    int s = wm_stream_shares(N * K * 2, packed ? (N + 63) / 64 : (N + 15) / 16, threads, WM_HGEMV_SHARE_BYTES,
                             WM_HGEMV_SHARES);
    return s > nth ? s : nth;
}

void wm_hgemm(wm_exec *x, int64_t M, int64_t N, int64_t K, const float *A, const uint16_t *B, int tb,
              const uint16_t *packed, float *C, const float *bias) {
    wm_epilogue ep = {0};
    ep.bias = bias;
    ep.act = WM_ACT_NONE;
    wm_hgemm_ep(x, M, N, K, A, B, tb, packed, C, &ep);
}

void wm_hgemm_ep(wm_exec *x, int64_t M, int64_t N, int64_t K, const float *A, const uint16_t *B, int tb,
                 const uint16_t *packed, float *C, const wm_epilogue *ep) {
    if (M <= 0 || N <= 0) return;
    int nth = hgemm_shares(M, N, K, packed != NULL, x->nth);
    hctx c = {wm_kernels_get(), {0}};
    c.a.M = M, c.a.N = N, c.a.K = K;
    c.a.A = A, c.a.lda = K;
    c.a.B = B, c.a.trans_b = tb, c.a.ldb = tb ? K : N, c.a.packed_b = packed;
    c.a.C = C, c.a.ldc = N;
    c.a.ep = *ep;
    void *tmp = NULL;
    if (M < WM_HGEMM_BIG_M) c.a.work = NULL; /* the GEMV reads no workspace */
    else if (x->gemm_ws && wm_hgemm_workspace_size(&c.a, nth) <= x->gemm_ws_per * (size_t)nth) c.a.work = x->gemm_ws;
    else c.a.work = tmp = aligned_alloc(64, (wm_hgemm_workspace_size(&c.a, nth) + 63) & ~(size_t)63);
    wm_pool_run_shares(x->pool, hgemm_part, &c, nth);
    free(tmp);
}

void wm_sgemm_st(wm_exec *x, int ith, const wm_gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return;
    wm_sgemm_args a;
    void *tmp;
    char *w = scratch_of(x, 1, &tmp);
    to_kernel(g, tmp ? w : w + (size_t)ith * x->gemm_ws_per, &a);
    wm_kernels_get()->sgemm(&a, 0, 1);
    free(tmp);
}

size_t wm_gemm_pack_size(int64_t K, int64_t N) { return wm_sgemm_pack_b_size(K, N); }

void wm_gemm_pack(int tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed) {
    wm_sgemm_pack_b(tb, K, N, B, ldb, packed);
}

size_t wm_gemm_scratch_per_thread(void) {
    wm_sgemm_args big = {.M = 1 << 20, .N = 1 << 20, .K = 1 << 20};
    return (wm_sgemm_workspace_size(&big, 1) + 63) & ~(size_t)63;
}
