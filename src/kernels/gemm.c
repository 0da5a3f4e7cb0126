/*
 * gemm.c - the ISA-independent SGEMM driver (GotoBLAS/BLIS blocking), B
 * packing, workspace sizes, the (ith, nth) split and the generic 6x16
 * micro-kernel in plain C.
 *
 * Blocking: for each share's region [m0,m1) x [n0,n1) of C:
 *   for n-block (NC, or the whole region with prepacked B)
 *     for k-block (KC)                  B block packed (unless prepacked)
 *       for m-block (MC)                A read in place (A^T: packed into MR-row panels;
 *                                       rows 4 KiB apart: copied to a kc stride)
 *         for each B slab (one tile wide; stays in L1)
 *           for each row tile of A (from L2): micro-kernel
 *         or, with a table's a_outer (AVX-512, AVX2), the other way round: each
 *         row tile's A stays in L1 while the block's B slabs stream from L2
 *         (the n-block then at most half the L2: wm_gemm_set_l2_bytes)
 *       last k-block: epilogue on the finished rows (in the kernel's store when
 *       the table fuses it and it is bias / residual / ReLU: wm_tile_epi)
 * Packed B layout (prepacked and on the fly alike): K is cut into blocks of
 * wm_sgemm_kc(K) rows (<= the selected table's sgemm_kc, balanced so the last block is not tiny; the last
 * one may be shorter); block b (rows k0 = b*kc, kc of them) starts
 * at k0 * Np (Np = N rounded up to 16) and holds the 16-column panels one after
 * the other, panel p at + p*kc*16, row k of it at + k*16. Every micro-kernel
 * call reads one contiguous kc x 16 slab and the slabs of one k-block follow
 * each other, so the whole of B streams sequentially (prefetcher friendly).
 * Zero padded past N.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"

/* ------------------------------------------------------------ helpers */

void wm_split_units(int64_t n, int64_t unit, int ith, int nth, int64_t *b, int64_t *e) {
    int64_t units = (n + unit - 1) / unit;
    int64_t q = units / nth, r = units % nth;
    int64_t ub = ith * q + (ith < r ? ith : r);
    int64_t ue = ub + q + (ith < r);
    *b = ub * unit < n ? ub * unit : n;
    *e = ue * unit < n ? ue * unit : n;
}

void *wm_work_slice(void *work, size_t per, int ith) {
    uintptr_t p = (uintptr_t)work + per * (size_t)ith;
    return (void *)((p + 63) & ~(uintptr_t)63);
}

/* bias, a residual before the activation, and none / ReLU: what wm_vepi and the kernels' fused store apply */
static int epi_simple(const wm_epilogue *ep) {
    return !ep->bias_m && (ep->act == WM_ACT_NONE || ep->act == WM_ACT_RELU) &&
           (!ep->residual || ep->residual_first || ep->act == WM_ACT_NONE);
}

/* bias, a residual before the activation, and an activation that is not ReLU: what a table with fused_act applies
   in its store (wm_tile_epi.act), the same values as wm_epilogue_apply's passes. GELU (erf) after a 2056 x 384 x
   1536 GEMM as a pass over each finished row block cost ~25% of the GEMM (DINOv2-S b8's fc1: 29.8 -> 37.0 ms CPU,
   OpenVINO's 30.5 -> 33.9); on the tile still in L1, see the commit for the figures. */
static int epi_act(const wm_epilogue *ep) {
    return !ep->bias_m && ep->act != WM_ACT_NONE && ep->act != WM_ACT_RELU && (!ep->residual || ep->residual_first);
}

void wm_epilogue_apply(const wm_epilogue *ep, const wm_gemm_ukr *u, float *C, int64_t ldc, int64_t m0, int64_t m1,
                       int64_t n0, int64_t n1) {
    if (!ep->bias && !ep->bias_m && ep->act == WM_ACT_NONE && !ep->residual) return;
    int64_t n = n1 - n0;
    /* one pass over each row */
    if (u->vepi && epi_simple(ep)) {
        float lo = ep->act == WM_ACT_RELU ? 0.0f : -INFINITY;
        for (int64_t m = m0; m < m1; m++)
            u->vepi(n, C + m * ldc + n0, ep->bias ? ep->bias + n0 : NULL,
                    ep->residual ? ep->residual + m * ep->ld_residual + n0 : NULL, lo);
        return;
    }
    for (int64_t m = m0; m < m1; m++) {
        float *c = C + m * ldc + n0;
        if (ep->bias) u->vadd(n, c, ep->bias + n0);
        if (ep->bias_m) {
            float bm = ep->bias_m[m];
            for (int64_t j = 0; j < n; j++) c[j] += bm;
        }
        const float *r = ep->residual ? ep->residual + m * ep->ld_residual + n0 : NULL;
        if (r && ep->residual_first) u->vadd(n, c, r);
        if (ep->act != WM_ACT_NONE) u->vact(n, c, c, ep->act, ep->act_a, ep->act_b);
        if (r && !ep->residual_first) u->vadd(n, c, r);
    }
}

/* ------------------------------------------------------------ packing */

size_t wm_sgemm_pack_b_size(int64_t K, int64_t N) {
    int64_t panels = (N + WM_NR - 1) / WM_NR;
    return (size_t)panels * (size_t)(K > 0 ? K : 0) * WM_NR * sizeof(float);
}

/* Packs op(B)[k0:k0+kc, n0:n0+nc] into panels of kc x 16 (stride pstride floats between panels). */
static void pack_b_block(int trans_b, const float *B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                         float *dst, int64_t pstride) {
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t j0 = n0 + p * WM_NR, nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        if (!trans_b) {
            for (int64_t k = 0; k < kc; k++) {
                const float *s = B + (k0 + k) * ldb + j0;
                float *o = d + k * WM_NR;
                int64_t j = 0;
                for (; j < nv; j++) o[j] = s[j];
                for (; j < WM_NR; j++) o[j] = 0.0f;
            }
        } else {
            if (nv < WM_NR) memset(d, 0, (size_t)kc * WM_NR * sizeof(float));
            for (int64_t j = 0; j < nv; j++) {
                const float *s = B + (j0 + j) * ldb + k0;
                for (int64_t k = 0; k < kc; k++) d[k * WM_NR + j] = s[k];
            }
        }
    }
}

int64_t wm_packed_np(int64_t N) { return (N + WM_NR - 1) / WM_NR * WM_NR; }

int64_t wm_sgemm_kc(int64_t K) {
    const int64_t kmax = wm_kernels_get()->sgemm_kc;
    if (K <= kmax) return K > 0 ? K : 1;
    int64_t nb = (K + kmax - 1) / kmax, kc = (K + nb - 1) / nb;
    return WM_ALIGN_UP(kc, 8) < kmax ? WM_ALIGN_UP(kc, 8) : kmax;
}

int64_t wm_sgemm_args_kc(const wm_sgemm_args *a) { return a->kc > 0 ? a->kc : wm_sgemm_kc(a->K); }

/* row stride of the A block's row copy (and floats per row of its buffer): kc, unless that is a multiple of 4 KiB
   (a whole-K k-block of 1024 or 3072), which the copy is there to avoid */
static int64_t rowcopy_ld(int64_t kc) { return kc % 1024 ? kc : kc + 16; }

/* bytes of the A block of mc rows: mr-row panels of A^T, or the copy of rows 4 KiB apart (lda a multiple of 1024,
   which an lda left 0 counts as); none for other plain A, read in place, or for indirect A, which every table's
   kernel_ind reads in place */
static size_t ablock_bytes(const wm_sgemm_args *a, int64_t mc, int64_t kc) {
    if (a->ind || (!a->trans_a && a->lda % 1024 != 0)) return 0;
    return WM_ALIGN_UP((size_t)(mc * rowcopy_ld(kc)) * sizeof(float), 64);
}

void wm_sgemm_pack_b(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed) {
    wm_sgemm_pack_b_kc(trans_b, K, N, B, ldb, 0, packed);
}

void wm_sgemm_pack_b_kc(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, int64_t kcb, float *packed) {
    if (K <= 0 || N <= 0) return;
    if (kcb <= 0) kcb = wm_sgemm_kc(K);
    for (int64_t k0 = 0; k0 < K; k0 += kcb) {
        int64_t kc = K - k0 < kcb ? K - k0 : kcb;
        pack_b_block(trans_b, B, ldb, k0, kc, 0, N, packed + k0 * wm_packed_np(N), kc * WM_NR);
    }
}

void wm_bsrc_pack_f32(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    pack_b_block(s->trans, s->p, s->ld, k0, kc, n0, nc, dst, pstride);
}

void wm_bsrc_pack_f16(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const uint16_t *B = s->p;
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t j0 = n0 + p * WM_NR, nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        for (int64_t k = 0; k < kc; k++)
            for (int64_t j = 0; j < WM_NR; j++)
                d[k * WM_NR + j] = j >= nv ? 0.0f
                                   : s->trans ? wm_half_to_float(B[(j0 + j) * s->ld + k0 + k])
                                              : wm_half_to_float(B[(k0 + k) * s->ld + j0 + j]);
    }
}

void wm_sgemm_pack_b_f16(int trans_b, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, float *packed) {
    if (K <= 0 || N <= 0) return;
    wm_bsrc s = {wm_bsrc_pack_f16, B, ldb, trans_b, NULL};
    const int64_t kcb = wm_sgemm_kc(K);
    for (int64_t k0 = 0; k0 < K; k0 += kcb) {
        int64_t kc = K - k0 < kcb ? K - k0 : kcb;
        wm_bsrc_pack_f16(&s, k0, kc, 0, N, packed + k0 * wm_packed_np(N), kc * WM_NR);
    }
}

/* Packs A^T's op(A)[m0:m0+mc, k0:k0+kc] (A stored [K, M]) into mr-row panels: panel i holds [k][r] at
   i*kc*mr + k*mr + r (zero rows past mc). */
static void pack_a_trans(const float *A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int mr,
                         float *dst) {
    for (int64_t i = 0; i < mc; i += mr) {
        float *d = dst + i * kc;
        int64_t mv = mc - i < mr ? mc - i : mr;
        for (int64_t k = 0; k < kc; k++) {
            const float *s = A + (k0 + k) * lda + m0 + i;
            for (int r = 0; r < mr; r++) d[k * mr + r] = r < mv ? s[r] : 0.0f;
        }
    }
}

/* ------------------------------------------------------------ split */

/*
 * Chooses pm x pn = nth shares over (M, N) minimizing the largest share's work: its tiles (rows rounded up to
 * the kernel's mr, columns to 16) times K, plus reading its rows of A, plus its columns of B: packed on the
 * fly, or streamed from a prepacked B (every share with the same columns reads them again, so splitting M
 * alone makes each share read all of B).
 */
static void plan_split(int64_t M, int64_t N, int64_t K, int nth, int prepacked, int mr, int *pm, int *pn) {
    double best = -1;
    *pm = 1;
    *pn = nth;
    int64_t mt = (M + mr - 1) / mr, nt = (N + WM_NR - 1) / WM_NR;
    for (int a = 1; a <= nth; a++) {
        if (nth % a) continue;
        int b = nth / a;
        if (a > mt && a > 1) continue;
        if (b > nt && b > 1) continue;
        double rows = (double)((mt + a - 1) / a) * mr, cols = (double)((nt + b - 1) / b) * WM_NR;
        double cost = rows * cols * (double)K + 4.0 * rows * (double)K + (prepacked ? 2.0 : 4.0) * cols * (double)K;
        if (best < 0 || cost < best) {
            best = cost;
            *pm = a;
            *pn = b;
        }
    }
}

size_t wm_sgemm_workspace_size(const wm_sgemm_args *a, int nth) {
    if (nth < 1) nth = 1;
    int64_t kc = wm_sgemm_args_kc(a);
    int64_t mc = a->M < WM_MC ? WM_ALIGN_UP(a->M > 0 ? a->M : 1, WM_MR_MAX) : WM_MC;
    int64_t nc = a->N < WM_NC ? WM_ALIGN_UP(a->N > 0 ? a->N : 1, WM_NR) : WM_NC;
    size_t per = ablock_bytes(a, mc, kc) + 64;
    if (!a->packed_b) per += (size_t)(kc * nc) * sizeof(float) + 64;
    per = WM_ALIGN_UP(per + 64, 64);
    return per * (size_t)nth;
}

int wm_sgemm_tasks(int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0) return 1;
    double flops = 2.0 * (double)M * (double)N * (double)(K > 0 ? K : 1);
    double t = flops / (double)(1 << 18); /* ~5 us of work per share at least */
    int64_t tiles = ((M + WM_MR - 1) / WM_MR) * ((N + WM_NR - 1) / WM_NR);
    if (M <= 4) tiles = (N + 63) / 64; /* GEMV: 64-column strips */
    if (t > (double)tiles) t = (double)tiles;
    if (t > 64) t = 64;
    return t < 1 ? 1 : (int)t;
}

/* ------------------------------------------------------------ driver */

/* Ways of the L1 data cache (wm_gemm_set_l1d_ways; 0: unknown). With row tiles outermost (a_outer), a tile's mr
   rows 4 KiB apart share one L1 set per line of k and stay there when the set has mr ways or more: then they are
   read in place, not copied (Intel Xeon, 12 ways, 2 threads: 197x3072x768 330 -> 340 GFLOP/s, 196x1024x256
   334 -> 349; 1 thread 197x3072x768 168 -> 182). With fewer ways (8 on Zen 4) they would evict each other. */
static int g_l1d_ways;

void wm_gemm_set_l1d_ways(int ways) { g_l1d_ways = ways; }

/* One core's L2 (wm_gemm_set_l2_bytes; 0: unknown). In the a_outer order every row tile streams the whole B block
   from L2 while the rows of A and C also pass through it, so a block is kept to half of it: on a Zen 2 core (512
   KiB) a 512 KiB block left every B panel to come from L3 (197 x 768 x 3072, one thread, packed B from DRAM: 256
   columns instead of 512 in the same run, best of 8 by thread CPU time, 79 -> 84 GFLOP/s). */
static int64_t g_l2_bytes;

void wm_gemm_set_l2_bytes(int64_t bytes) { g_l2_bytes = bytes; }

/*
 * Prefetch of prepacked B (weights, usually not in cache: a model's weights pass through once per run): while the
 * tiles of one strip of B run, the strip read next is brought into L2, a slice per tile, so that the first tile
 * of each strip does not wait on memory. The next strip is the following one of this k-block, or after the last,
 * the first of the next k-block when no other row block reads this one again.
 */
typedef struct b_prefetch {
    const char *p, *end;
    int64_t step; /* bytes per tile, whole lines */
} b_prefetch;

static void b_prefetch_plan(const wm_sgemm_args *a, int64_t j, int64_t tw, int64_t nb, int64_t nc, int64_t kb,
                            int64_t kc, int64_t kcb, int64_t pstride, int last_mb, int64_t tiles, b_prefetch *pf) {
    const float *bp = a->packed_b + kb * wm_packed_np(a->N) + (nb / WM_NR) * kc * WM_NR;
    int64_t w, panel;
    pf->p = NULL;
    if (j + tw < nc) {
        pf->p = (const char *)(bp + ((j + tw) / WM_NR) * pstride);
        w = nc - j - tw < tw ? nc - j - tw : tw;
        panel = pstride;
    } else if (last_mb && kb + kc < a->K) {
        int64_t kc2 = a->K - kb - kc < kcb ? a->K - kb - kc : kcb;
        pf->p = (const char *)(a->packed_b + (kb + kc) * wm_packed_np(a->N) + (nb / WM_NR) * kc2 * WM_NR);
        w = nc < tw ? nc : tw;
        panel = kc2 * WM_NR;
    } else {
        return;
    }
    int64_t bytes = (w + WM_NR - 1) / WM_NR * panel * (int64_t)sizeof(float);
    pf->end = pf->p + bytes;
    pf->step = ((bytes + tiles - 1) / tiles + 63) & ~(int64_t)63;
}

/*
 * The a_outer order's prefetch: the B block this share reads next (the next k-block of these columns, or after the
 * last, the first of the next column block; contiguous in the packed layout), brought into L2 a slice per tile of
 * the current block, and within a tile a line per 4 k by the kernel (wm_tile_epi.pf). In the a_outer order every row
 * tile but the first reads the block from L2; the first waited on memory for all of it (from DRAM, twice as long as
 * the other row tiles). Issued from the driver as a burst per tile, the prefetches held the L1's fill buffers for a
 * memory latency and starved the kernel's B stream from L2: slower than none (197x3072x768, 1 thread, weights from
 * DRAM: 5.3-5.6 -> 5.7-5.9 ms); spread over the k loop: 5.3-5.6 -> 5.0-5.3.
 */
static void b_prefetch_next(const wm_sgemm_args *a, int64_t nb, int64_t nc, int64_t n1, int64_t nstep, int64_t kb,
                            int64_t kc, int64_t kcb, int64_t tiles, b_prefetch *pf) {
    int64_t k2 = kb + kc, nb2 = nb;
    pf->p = NULL;
    if (k2 >= a->K) {
        k2 = 0;
        nb2 = nb + nstep;
        if (nb2 >= n1) return;
        nc = n1 - nb2 < nstep ? n1 - nb2 : nstep;
    }
    int64_t kc2 = a->K - k2 < kcb ? a->K - k2 : kcb;
    pf->p = (const char *)(a->packed_b + k2 * wm_packed_np(a->N) + (nb2 / WM_NR) * kc2 * WM_NR);
    int64_t bytes = (nc + WM_NR - 1) / WM_NR * kc2 * WM_NR * (int64_t)sizeof(float);
    pf->end = pf->p + bytes;
    pf->step = (bytes + tiles - 1) / tiles;
}

/* one prefetch per 128-byte pair of lines (the L2's adjacent-line prefetch brings the other): with one per line,
   the bursts filled the miss queue and the prefetch instructions themselves stalled (1.7% of ResNet-50's samples) */
static inline void b_prefetch_step(b_prefetch *pf) {
    if (!pf->p) return;
    for (const char *q = pf->p; q < pf->p + pf->step && q < pf->end; q += 128) __builtin_prefetch(q, 0, 2);
    pf->p += pf->step;
}

/* A prefetch into L2 as asm: GCC deleted c_prefetch's loops of __builtin_prefetch as having no effect (the
   object had none of them), while b_prefetch_step's were kept. */
#if defined(__x86_64__) || defined(__i386__)
static inline void pf_l2(const float *p) { __asm__ volatile("prefetcht1 %0" : : "m"(*(const char *)p)); }
#else
static inline void pf_l2(const float *p) { __builtin_prefetch(p, 0, 2); }
#endif

/* The rows of the next micro-tile's C (and of the residual its fused store reads), brought into L2 while this one
   runs: a fresh output, or an earlier layer's residual, is not in cache, and with a short K the store's misses were
   not hidden behind the k loop. L2, not L1: a tile's 12 rows are often 4 KiB apart (1024 channels) and would evict
   each other, and the B panel, from their L1 set. A 1x1 conv at 2 threads (cold weights and residual, A written by
   both threads; the variants alternated in one process): 784 x 128 x 512 with a residual 0.94 -> 0.66 ms, without
   0.68 -> 0.61; 196 x 256 x 1024 with a residual 0.75 -> 0.63. K >= 1024: unchanged within 1%. */
static inline void c_prefetch(const float *c, int64_t ldc, const float *res, int64_t ldr, int rows, int nv) {
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < nv; q += 16) {
            pf_l2(c + r * ldc + q);
            if (res) pf_l2(res + r * ldr + q);
        }
}

/* One k-block of one m-block, as the tiles see it. */
typedef struct tile_blk {
    const wm_gemm_ukr *u;
    const wm_sgemm_args *a;
    int64_t kb, nb, mb, kc;
    int first, fuse, ind;
    const float *bp; /* the block's B panels */
    int64_t pstride, ald;
    const float *arows; /* A^T panels, or row-major A (in place or the row copy) */
    const wm_epilogue *ep;
    wm_tile_epi te;
    int strip; /* arows holds only the current row tile's rows (the a_outer row copy) */
    int64_t pf_step; /* the far prefetch's bytes per 4 k (b_prefetch_next) */
} tile_blk;

/* the micro-kernel on the tile at rows i, columns j of the block (mv x nv of it stored); pf: the far prefetch's
   slice for this tile, or NULL */
static inline void run_tile(const tile_blk *t, int64_t i, int64_t j, int mv, int nv, const char *pf) {
    const wm_sgemm_args *a = t->a;
    const wm_epilogue *ep = t->ep;
    const float *bj = t->bp + (j / WM_NR) * t->pstride;
    float *ci = a->C + (t->mb + i) * a->ldc + t->nb + j;
    wm_tile_epi te = t->te;
    if (t->fuse) {
        te.bias = ep->bias ? ep->bias + t->nb + j : NULL;
        te.res = ep->residual ? ep->residual + (t->mb + i) * ep->ld_residual + t->nb + j : NULL;
    }
    te.pf = pf;
    te.pf_step = t->pf_step;
    const wm_tile_epi *e = t->fuse || pf ? &te : NULL;
    if (t->kc && t->ind) {
        t->u->kernel_ind(t->kc, a->ind + t->mb + i, a->ldi, t->kb, a->seg, bj, t->pstride, ci, a->ldc, mv, nv,
                         a->alpha, a->beta, t->first, e);
        return;
    }
    const int panels = a->trans_a;
    const float *ai = !t->kc ? NULL : panels ? t->arows + i * t->kc : t->strip ? t->arows : t->arows + i * t->ald;
    t->u->kernel(t->kc, ai, !t->kc || panels ? 0 : t->ald, bj, t->pstride, ci, a->ldc, mv, nv, a->alpha, a->beta,
                 t->first, e);
}

static void gemm_region(const wm_gemm_ukr *u, const wm_sgemm_args *a, const wm_bsrc *src, int64_t m0, int64_t m1,
                        int64_t n0, int64_t n1, float *apack, float *bpack) {
    const int64_t K = a->K;
    const int zero_k = K == 0 || a->alpha == 0.0f;
    const int mr = u->mr;
    const int ind = a->ind != NULL;
    /* A^T goes into mr-row panels ([k][mr]); indirect A is read in place by the table's kernel_ind */
    const int panels = a->trans_a;
    /* rows of plain A a multiple of 4 KiB apart share L1 sets (a tall tile's rows would evict each other): the
       block's rows are copied whole, one after the other, to a stride of kc (<= KC, not a multiple of 4 KiB), and
       read in place from there. Row after row, the copy itself is not hit by the aliasing, where a transposing pack
       gathers from all 12 rows at once (8.7% of a 204 x 1024 x 128 GEMM). */
    const int rowcopy = !ind && !a->trans_a && u->pack_aliased && a->lda % 1024 == 0 &&
                        !(u->a_outer && g_l1d_ways >= mr);
    const int64_t tw = (int64_t)u->np * WM_NR; /* tile width */
    const int64_t kcb = wm_sgemm_args_kc(a);
    int64_t nstep = a->packed_b ? WM_NC_PACKED : WM_NC;
    /* with a_outer, every row tile reads the whole B block from L2: a B packed in one deep k-block (a 3x3 conv's whole
       K, 4608 at 512 channels) gets narrower column blocks, so that the block stays within WM_L2_BLOCK, and any B
       within half the L2 where its size is known */
    if (u->a_outer) {
        int64_t cap = a->packed_b ? WM_L2_BLOCK : INT64_MAX;
        if (g_l2_bytes > 0 && g_l2_bytes / 2 < cap) cap = g_l2_bytes / 2;
        while (nstep > tw && kcb * nstep * (int64_t)sizeof(float) > cap) nstep /= 2;
    }
    for (int64_t nb = n0; nb < n1; nb += nstep) {
        int64_t nc = n1 - nb < nstep ? n1 - nb : nstep;
        for (int64_t kb = 0; kb < (zero_k ? 1 : K); kb += kcb) {
            int64_t kc = zero_k ? 0 : (K - kb < kcb ? K - kb : kcb);
            int first = kb == 0, last = zero_k || kb + kc >= K;
            const float *bp;
            int64_t pstride;
            if (a->packed_b) {
                bp = a->packed_b + kb * wm_packed_np(a->N) + (nb / WM_NR) * kc * WM_NR;
                pstride = kc * WM_NR;
            } else {
                if (kc) src->pack(src, kb, kc, nb, nc, bpack, kc * WM_NR);
                bp = bpack;
                pstride = kc * WM_NR;
            }
            /* the kernels apply a simple epilogue as they store the last k-block (wm_tile_epi) */
            const wm_epilogue *ep = &a->ep;
            const int fuse = last && u->fused_epi && (epi_simple(ep) || (u->fused_act && epi_act(ep)));
            wm_tile_epi te = {NULL, NULL, ep->ld_residual, fuse && ep->act == WM_ACT_RELU ? 0.0f : -INFINITY, NULL, 0,
                              fuse && !epi_simple(ep) ? ep->act : WM_ACT_NONE, ep->act_a, ep->act_b};
            for (int64_t mb = m0; mb < m1; mb += WM_MC) {
                int64_t mc = m1 - mb < WM_MC ? m1 - mb : WM_MC;
                if (kc && rowcopy && !u->a_outer)
                    for (int64_t r = 0; r < mc; r++)
                        memcpy(apack + r * rowcopy_ld(kc), a->A + (mb + r) * a->lda + kb, (size_t)kc * sizeof(float));
                else if (kc && panels) pack_a_trans(a->A, a->lda, mb, mc, kb, kc, mr, apack);
                /* row-major A of this block: in place, or the row copy */
                const float *arows = !kc || ind ? NULL : rowcopy ? apack : a->A + mb * a->lda + kb;
                const int64_t ald = rowcopy ? rowcopy_ld(kc) : a->lda;
                b_prefetch pf = {NULL, NULL, 0};
                const int64_t tiles = ((mc + mr - 1) / mr) * ((nc + tw - 1) / tw);
                if (u->a_outer && a->packed_b && kc && mb + WM_MC >= m1)
                    b_prefetch_next(a, nb, nc, n1, nstep, kb, kc, kcb, tiles, &pf);
                const tile_blk tb = {u,   a,  kb,      nb,  mb,  kc, first, fuse, ind, bp, pstride, ald,
                                     panels ? apack : arows, ep, te, rowcopy && u->a_outer,
                                     pf.step / (kc >= 4 ? kc / 4 : 1)};
                /* Tall GEMMs (DINOv2 at batch 8: 2056 rows) keep neither A's rows of a k-block nor C's columns of a
                   block in L2 from one pass to the next; their misses stalled the tile at its start (A) and store (C).
                   So, spread over the tiles: the next row tile's A rows (a_pf: A read in place, the region's rows of
                   the k-block over the L2), and C's next tile at every k-block, the next row tile's first one too
                   (c_pf: the last k-block, or the region's C columns over the L2). One thread on Zen 3, GFLOP/s
                   by thread CPU time, old / new alternating, mean of 4: 2056 x 384 x 1152 79 -> 86, 2056 x 1536 x 384
                   78 -> 81, 2056 x 768 x 3072 83 -> 86; 197 x 3072 x 768 and 257 x 1536 x 384 (neither on) equal;
                   DINOv2-S batch 8 run 1303-1334 -> 1248-1269 ms CPU. Prefetches only: the same values. */
                /* rows of A read in place that the L2 does not keep for the next column block: the next row tile's
                   brought in while this one runs */
                const int a_pf = kc && !rowcopy && !panels && !ind &&
                                 (m1 - m0) * kc * (int64_t)sizeof(float) > (g_l2_bytes > 0 ? g_l2_bytes : 512 * 1024);
                /* C's tiles before the kernel reads or writes them: at the last k-block (the output), and at every
                   one when the region's C columns of this block do not stay in the L2 from one to the next */
                const int c_pf = last || (m1 - m0) * nc * (int64_t)sizeof(float) >
                                             (g_l2_bytes > 0 ? g_l2_bytes : 512 * 1024);
                if (u->a_outer) { /* each row tile's A stays in L1 while the block's B panels stream from L2 */
                    for (int64_t i = 0; i < mc; i += mr) {
                        int mv = (int)(mc - i < mr ? mc - i : mr);
                        if (kc && rowcopy) /* the row copy a tile at a time, just before its tiles read it (the
                                              block's whole copy up front cost 7% at K = 3072) */
                            for (int64_t r = 0; r < mv; r++)
                                memcpy(apack + r * ald, a->A + (mb + i + r) * a->lda + kb, (size_t)kc * sizeof(float));
                        /* the next row tile's rows of A for this k-block, into L2 a share per column tile */
                        const float *an = a_pf && i + mr < mc ? arows + (i + mr) * ald : NULL;
                        const int64_t an_rows = mc - i - mr < mr ? mc - i - mr : mr, an_lines = (kc * 4 + 63) / 64;
                        const int64_t an_per = (an_rows * an_lines + (nc + tw - 1) / tw - 1) / ((nc + tw - 1) / tw);
                        int64_t an_at = 0;
                        for (int64_t j = 0; j < nc; j += tw) {
                            int nv = (int)(nc - j < tw ? nc - j : tw);
                            for (int64_t q = 0; an && q < an_per && an_at < an_rows * an_lines; q++, an_at++)
                                pf_l2(an + (an_at / an_lines) * ald + (an_at % an_lines) * 16);
                            if (c_pf && j + tw < nc) /* the next tile's C: the same rows, the next columns */
                                c_prefetch(a->C + (mb + i) * a->ldc + nb + j + tw, a->ldc,
                                           fuse && ep->residual
                                               ? ep->residual + (mb + i) * ep->ld_residual + nb + j + tw
                                               : NULL,
                                           ep->ld_residual, mv, (int)(nc - j - tw < tw ? nc - j - tw : tw));
                            else if (c_pf && i + mr < mc) /* the next row tile's first C tile */
                                c_prefetch(a->C + (mb + i + mr) * a->ldc + nb, a->ldc,
                                           fuse && ep->residual ? ep->residual + (mb + i + mr) * ep->ld_residual + nb
                                                                : NULL,
                                           ep->ld_residual, (int)(mc - i - mr < mr ? mc - i - mr : mr),
                                           (int)(nc < tw ? nc : tw));
                            run_tile(&tb, i, j, mv, nv, pf.p && pf.p < pf.end ? pf.p : NULL);
                            pf.p = pf.p ? pf.p + pf.step : NULL;
                        }
                    }
                } else { /* each B slab stays in L1 while the row tiles' A streams from L2 */
                    for (int64_t j = 0; j < nc; j += tw) {
                        int nv = (int)(nc - j < tw ? nc - j : tw);
                        pf = (b_prefetch){NULL, NULL, 0};
                        if (a->packed_b && kc)
                            b_prefetch_plan(a, j, tw, nb, nc, kb, kc, kcb, pstride, mb + WM_MC >= m1,
                                            (mc + mr - 1) / mr, &pf);
                        for (int64_t i = 0; i < mc; i += mr) {
                            int mv = (int)(mc - i < mr ? mc - i : mr);
                            b_prefetch_step(&pf);
                            if (last && i + mr < mc) { /* the next tile's C: the next rows, the same columns */
                                int mv2 = (int)(mc - i - mr < mr ? mc - i - mr : mr);
                                c_prefetch(a->C + (mb + i + mr) * a->ldc + nb + j, a->ldc,
                                           fuse && ep->residual
                                               ? ep->residual + (mb + i + mr) * ep->ld_residual + nb + j
                                               : NULL,
                                           ep->ld_residual, mv2, nv);
                            }
                            run_tile(&tb, i, j, mv, nv, NULL);
                        }
                    }
                }
                if (last && !fuse) wm_epilogue_apply(&a->ep, u, a->C, a->ldc, mb, mb + mc, nb, nb + nc);
            }
        }
    }
}

void wm_gemm_drive(const wm_gemm_ukr *u, const wm_sgemm_args *a, const wm_bsrc *src, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    int pm, pn, mr = u->mr;
    plan_split(a->M, a->N, a->K, nth, a->packed_b != NULL, mr, &pm, &pn);
    int64_t m0, m1, n0, n1;
    wm_split_units(a->M, mr, ith / pn, pm, &m0, &m1);
    wm_split_units(a->N, WM_NR, ith % pn, pn, &n0, &n1);
    if (m0 >= m1 || n0 >= n1) return;
    size_t per = wm_sgemm_workspace_size(a, 1);
    char *w = wm_work_slice(a->work, per, a->work_own ? 0 : ith);
    int64_t kc = wm_sgemm_args_kc(a);
    int64_t mc = a->M < WM_MC ? WM_ALIGN_UP(a->M, WM_MR_MAX) : WM_MC;
    float *apack = (float *)w;
    float *bpack = (float *)(w + ablock_bytes(a, mc, kc));
    gemm_region(u, a, src, m0, m1, n0, n1, apack, bpack);
}

void wm_sgemm_drive(const wm_gemm_ukr *u, const wm_sgemm_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    if (!a->ind && u->small_m && u->small_m(a, ith, nth)) return;
    wm_bsrc src = {u->pack_f32 ? u->pack_f32 : wm_bsrc_pack_f32, a->B, a->ldb, a->trans_b, NULL};
    wm_gemm_drive(u, a, &src, ith, nth);
}

void wm_sgemm_batch_drive(const wm_gemm_ukr *u, const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth) {
    int64_t c0 = b->count[0] > 0 ? b->count[0] : 1, c1 = b->count[1] > 0 ? b->count[1] : 1;
    int64_t total = c0 * c1;
    int64_t lo = 0, hi = total;
    int sub_ith = ith, sub_nth = nth;
    if (total >= nth) { /* whole matrices per share */
        wm_split_units(total, 1, ith, nth, &lo, &hi);
        sub_ith = 0;
        sub_nth = 1;
    }
    size_t per = wm_sgemm_workspace_size(a, 1);
    for (int64_t t = lo; t < hi; t++) {
        int64_t i = t / c1, j = t % c1;
        wm_sgemm_args m = *a;
        m.A = a->A + i * b->stride_a[0] + j * b->stride_a[1];
        if (a->packed_b) m.packed_b = a->packed_b + i * b->stride_b[0] + j * b->stride_b[1];
        else m.B = a->B + i * b->stride_b[0] + j * b->stride_b[1];
        m.C = a->C + i * b->stride_c[0] + j * b->stride_c[1];
        if (a->ep.residual) m.ep.residual = a->ep.residual + i * b->stride_c[0] + j * b->stride_c[1];
        if (sub_nth == 1) { /* this share's own slice, used as a one-share workspace */
            m.work = (char *)a->work + per * (size_t)ith;
            wm_sgemm_drive(u, &m, 0, 1);
        } else {
            wm_sgemm_drive(u, &m, sub_ith, sub_nth);
        }
    }
}

/* ------------------------------------------------------------ generic micro-kernel */

/* the generic tile's store: c = alpha * acc (+ beta * c, or + c after the first k-block) */
static void store_generic(float (*acc)[WM_NR], float *c, int64_t ldc, int mv, int nv, float alpha, float beta,
                          int first) {
    for (int i = 0; i < mv; i++) {
        float *ci = c + i * ldc;
        if (first && beta == 0.0f)
            for (int j = 0; j < nv; j++) ci[j] = alpha * acc[i][j];
        else if (first)
            for (int j = 0; j < nv; j++) ci[j] = alpha * acc[i][j] + beta * ci[j];
        else
            for (int j = 0; j < nv; j++) ci[j] = alpha * acc[i][j] + ci[j];
    }
}

static void ukr_generic(int64_t kc, const float *ap, int64_t lda, const float *bp, int64_t pstride, float *c,
                        int64_t ldc, int mv, int nv, float alpha, float beta, int first, const wm_tile_epi *e) {
    (void)pstride, (void)e; /* one panel per tile; no fused epilogue */
    float acc[WM_MR][WM_NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *bv = bp + k * WM_NR;
        for (int i = 0; i < mv; i++) {
            float x = lda ? ap[i * lda + k] : ap[k * WM_MR + i];
            for (int j = 0; j < WM_NR; j++) acc[i][j] += x * bv[j];
        }
    }
    store_generic(acc, c, ldc, mv, nv, alpha, beta, first);
}

/* ukr_generic with indirect A (wm_ukr_ind_fn): the same sums in the same order as on the gathered rows */
static void ukr_ind_generic(int64_t kc, const float *const *ind, int64_t ldi, int64_t k0, int64_t seg, const float *bp,
                            int64_t pstride, float *c, int64_t ldc, int mv, int nv, float alpha, float beta, int first,
                            const wm_tile_epi *e) {
    (void)pstride, (void)e;
    float acc[WM_MR][WM_NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *bv = bp + k * WM_NR;
        int64_t t = (k0 + k) / seg, o = (k0 + k) % seg;
        for (int i = 0; i < mv; i++) {
            float x = ind[t * ldi + i][o];
            for (int j = 0; j < WM_NR; j++) acc[i][j] += x * bv[j];
        }
    }
    store_generic(acc, c, ldc, mv, nv, alpha, beta, first);
}

static void vact_generic_fwd(int64_t n, float *y, const float *x, wm_act act, float p, float q) {
    wm_kernels_generic()->vact(n, y, x, act, p, q);
}
static void vadd_generic_fwd(int64_t n, float *y, const float *x) { wm_kernels_generic()->add(n, y, y, x); }

const wm_gemm_ukr wm_gemm_ukr_generic = {ukr_generic, WM_MR, 1, 0, vact_generic_fwd, NULL, NULL, vadd_generic_fwd, NULL,
                                        ukr_ind_generic, 0};

void wm_sgemm_generic(const wm_sgemm_args *a, int ith, int nth) { wm_sgemm_drive(&wm_gemm_ukr_generic, a, ith, nth); }

void wm_sgemm_batch_generic(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth) {
    wm_sgemm_batch_drive(&wm_gemm_ukr_generic, a, b, ith, nth);
}
