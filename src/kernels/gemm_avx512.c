/*
 * gemm_avx512.c - AVX-512 SGEMM micro-kernel for the shared driver in gemm.c:
 * tiles of 12 rows x 32 columns (two 16-column B panels) in 24 zmm
 * accumulators. Each k reads two B vectors and broadcasts 12 scalars of A,
 * each used twice: 24 FMAs per 14 loads, against 12 per 8 for the AVX2 6x16
 * tile. A is read in place (rows 4 KiB apart from the driver's row copy), or
 * from 12-row panels ([k][12]) when the driver packs A^T. Tails (rows rounded up to 4, or 2 for 1-2 rows; one
 * panel) run the same code with fewer accumulators. ukr_ind_12x32 is the
 * same tile with indirect A (a convolution's taps read in place). The small-M GEMV paths
 * and the B packer are the AVX2 ones. Compiled with -mavx512f; reached only
 * through the AVX-512 table.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/kernels_impl.h"

#define MR 12

/* c (mode as in row_out of gemm_avx2.c: 0 first with beta 0, 1 first, 2 accumulate) for one row of nv <= 16,
   then the fused epilogue (wm_tile_epi; hb: bias at bias, hr: the residual row at res, relu): the operations of
   wm_vepi_avx2, in its order, so that the values are those of the separate pass */
static inline __attribute__((always_inline)) void row_store(__m512 acc, float *c, __mmask16 m, __m512 alpha,
                                                            __m512 beta, const int mode, const int one, const int hb,
                                                            const float *bias, const int hr, const float *res,
                                                            const int relu) {
    __m512 r;
    if (mode == 0) r = one ? acc : _mm512_mul_ps(alpha, acc); /* 1 * x is x, bit for bit (NaN too) */
    else if (mode == 1) r = _mm512_fmadd_ps(alpha, acc, _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(m, c)));
    else r = _mm512_fmadd_ps(alpha, acc, _mm512_maskz_loadu_ps(m, c));
    if (hb) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, bias));
    if (hr) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, res));
    if (relu) { /* max with 0, NaN kept */
        __m512 mx = _mm512_max_ps(r, _mm512_setzero_ps());
        r = _mm512_mask_mov_ps(mx, _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q), r);
    }
    _mm512_mask_storeu_ps(c, m, r);
}

/* The finished tile's rows (below mv) to c. Every decision is made once per tile, not per row: with the
   epilogue's fields read per row (e->bias, e->res, e->lo), the store of a 12 x 32 tile was ~480 instructions, and
   in a K = 64 GEMM 18% of the samples fell outside the k loop (store, tile set-up and driver together). */
static inline __attribute__((always_inline)) void store_rows(const int rows, const int np, __m512 (*acc)[2], float *c,
                                                             int64_t ldc, int mv, int nv, float alpha, float beta,
                                                             const int mode, const int one, const int hb,
                                                             const float *bias, const int hr, const float *res,
                                                             int64_t ldr, const int relu) {
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 m0 = nv >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nv) - 1u);
    __mmask16 m1 = nv >= 32 ? (__mmask16)0xFFFF : nv > 16 ? (__mmask16)((1u << (nv - 16)) - 1u) : 0;
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        if (r >= mv) break;
        const float *rr = hr ? res + r * ldr : NULL;
        row_store(acc[r][0], c + r * ldc, m0, va, vb, mode, one, hb, bias, hr, rr, relu);
        if (np > 1 && m1)
            row_store(acc[r][1], c + r * ldc + 16, m1, va, vb, mode, one, hb, hb ? bias + 16 : NULL, hr,
                      hr ? rr + 16 : NULL, relu);
    }
}

/* store_rows with its decisions as constants: the full 12 x 32 tile in the common cases (alpha 1, beta 0 or
   accumulating; any of bias, residual, ReLU) gets straight-line code, other tiles the general form */
static inline __attribute__((always_inline)) void store_tile(const int rows, const int np, __m512 (*acc)[2], float *c,
                                                             int64_t ldc, int mv, int nv, float alpha, float beta,
                                                             int first, const wm_tile_epi *e) {
    const int mode = first ? (beta == 0.0f ? 0 : 1) : 2, one = alpha == 1.0f;
    const float *bias = e ? e->bias : NULL, *res = e ? e->res : NULL;
    const int64_t ldr = e ? e->ld_res : 0;
    const int hb = bias != NULL, hr = res != NULL, relu = e && e->lo != -INFINITY;
#define ST(md, b, r, l) store_rows(12, 2, acc, c, ldc, mv, nv, alpha, beta, md, 1, b, bias, r, res, ldr, l)
    if (rows == 12 && np == 2 && one && mode != 1) {
        switch ((mode == 2) << 3 | hb << 2 | hr << 1 | relu) {
        case 0: ST(0, 0, 0, 0); return;
        case 1: ST(0, 0, 0, 1); return;
        case 2: ST(0, 0, 1, 0); return;
        case 3: ST(0, 0, 1, 1); return;
        case 4: ST(0, 1, 0, 0); return;
        case 5: ST(0, 1, 0, 1); return;
        case 6: ST(0, 1, 1, 0); return;
        case 7: ST(0, 1, 1, 1); return;
        case 8: ST(2, 0, 0, 0); return;
        case 9: ST(2, 0, 0, 1); return;
        case 10: ST(2, 0, 1, 0); return;
        case 11: ST(2, 0, 1, 1); return;
        case 12: ST(2, 1, 0, 0); return;
        case 13: ST(2, 1, 0, 1); return;
        case 14: ST(2, 1, 1, 0); return;
        default: ST(2, 1, 1, 1); return;
        }
    }
#undef ST
    store_rows(rows, np, acc, c, ldc, mv, nv, alpha, beta, mode, one, hb, bias, hr, res, ldr, relu);
}

/* B rows a few k ahead into L1, in both panels: with the row tiles outermost (a_outer), each tile reads the block's
   B panels from L2 (Intel Xeon, 2 threads, with the tile order, old/new alternated 3 times: bert-base 97-105 ->
   93-96 ms, GPT-2 139-145 -> 126-131 ms) */
#define B_AHEAD 256 /* bytes: 4 rows of a panel */
static inline __attribute__((always_inline)) void b_ahead(const float *b0, const float *b1, const int np) {
    _mm_prefetch((const char *)b0 + B_AHEAD, _MM_HINT_T0);
    if (np > 1) _mm_prefetch((const char *)b1 + B_AHEAD, _MM_HINT_T0);
}

/* the far prefetch (wm_tile_epi.pf): into L2 every 4 k, spread over the loop, at pf and half a step on (no line
   skipped with steps up to 128 bytes: a short M, as in a 7x7 layer's 49 rows, leaves few tiles to spread a block
   over) */
/* the far prefetch's start and step from e; with none, B's first row (in cache), stepping 0 */
static inline __attribute__((always_inline)) const char *far_start(const wm_tile_epi *e, const float *b,
                                                                   int64_t *pfs) {
    *pfs = e && e->pf ? e->pf_step : 0;
    return e && e->pf ? e->pf : (const char *)b;
}

static inline __attribute__((always_inline)) void far_ahead(const char **pf, int64_t pfs, int64_t k) {
    if ((k & 3) == 3) {
        _mm_prefetch(*pf, _MM_HINT_T1);
        _mm_prefetch(*pf + pfs / 2, _MM_HINT_T1);
        *pf += pfs;
    }
}

/*
 * The full 12 x 32 tile with A rows in place, as assembly: kc rows of B (two panels, pstride floats apart) against
 * 12 rows of A (lda floats apart), the 24 sums to acc ([12][32]). In C, GCC ran out of general registers for the 12
 * row pointers and parked them on the stack and in vector registers, and the vmovq back from those took FMA port
 * cycles (96 other instructions per 96 FMAs). Here the rows are four bases and lda, and k is unrolled by 4.
 * Rows r of the tile: a + (r / 3) * 3 lda + (r % 3) lda, as [base], [base + lb], [base + 2 lb]. Each unrolled step
 * also issues e's far prefetch (far_ahead).
 */
#define K12_ROW(BASE, IDX, AO, Z0, Z1)                                                                                 \
    "vbroadcastss " AO "(" BASE IDX "), %%zmm26\n\t"                                                                   \
    "vfmadd231ps %%zmm24, %%zmm26, %%zmm" Z0 "\n\t"                                                                    \
    "vfmadd231ps %%zmm25, %%zmm26, %%zmm" Z1 "\n\t"
#define K12_STEP(AO, BO, PO)                                                                                           \
    "prefetcht0 " PO "(%[b])\n\t"                                                                                      \
    "prefetcht0 " PO "(%[b],%[bs])\n\t"                                                                                \
    "vmovups " BO "(%[b]), %%zmm24\n\t"                                                                                \
    "vmovups " BO "(%[b],%[bs]), %%zmm25\n\t"                                                                          \
    K12_ROW("%[a]", "", AO, "0", "1") K12_ROW("%[a]", ",%[lb],1", AO, "2", "3")                                        \
    K12_ROW("%[a]", ",%[lb],2", AO, "4", "5") K12_ROW("%%r8", "", AO, "6", "7")                                        \
    K12_ROW("%%r8", ",%[lb],1", AO, "8", "9") K12_ROW("%%r8", ",%[lb],2", AO, "10", "11")                              \
    K12_ROW("%%r9", "", AO, "12", "13") K12_ROW("%%r9", ",%[lb],1", AO, "14", "15")                                    \
    K12_ROW("%%r9", ",%[lb],2", AO, "16", "17") K12_ROW("%%r10", "", AO, "18", "19")                                   \
    K12_ROW("%%r10", ",%[lb],1", AO, "20", "21") K12_ROW("%%r10", ",%[lb],2", AO, "22", "23")
#define K12_ZERO(Z) "vpxord %%zmm" Z ", %%zmm" Z ", %%zmm" Z "\n\t"
#define K12_SAVE(Z, OFF) "vmovups %%zmm" Z ", " OFF "(%[acc])\n\t"

static inline __attribute__((always_inline)) void k12x32_inplace(int64_t kc, const float *a, int64_t lda,
                                                                 const float *b, int64_t pstride, float *acc,
                                                                 const wm_tile_epi *e) {
    int64_t lb = lda * (int64_t)sizeof(float), bs = pstride * (int64_t)sizeof(float);
    int64_t pfs;
    const char *pf = far_start(e, b, &pfs);
    __asm__ volatile(
        K12_ZERO("0") K12_ZERO("1") K12_ZERO("2") K12_ZERO("3") K12_ZERO("4") K12_ZERO("5") K12_ZERO("6")
        K12_ZERO("7") K12_ZERO("8") K12_ZERO("9") K12_ZERO("10") K12_ZERO("11") K12_ZERO("12") K12_ZERO("13")
        K12_ZERO("14") K12_ZERO("15") K12_ZERO("16") K12_ZERO("17") K12_ZERO("18") K12_ZERO("19") K12_ZERO("20")
        K12_ZERO("21") K12_ZERO("22") K12_ZERO("23")
        "lea (%[lb],%[lb],2), %%r11\n\t" /* 3 rows */
        "lea (%[a],%%r11), %%r8\n\t"
        "lea (%%r8,%%r11), %%r9\n\t"
        "lea (%%r9,%%r11), %%r10\n\t"
        "mov %[k], %%rcx\n\t"
        "shr $2, %%rcx\n\t"
        "jz 2f\n\t"
        "1:\n\t"
        K12_STEP("0", "0", "256") K12_STEP("4", "64", "320") K12_STEP("8", "128", "384") K12_STEP("12", "192", "448")
        "add $16, %[a]\n\t"
        "add $16, %%r8\n\t"
        "add $16, %%r9\n\t"
        "add $16, %%r10\n\t"
        "add $256, %[b]\n\t"
        "prefetcht1 (%[pf])\n\t"
        "prefetcht1 (%[pf],%[pfh])\n\t"
        "add %[pfs], %[pf]\n\t"
        "dec %%rcx\n\t"
        "jnz 1b\n\t"
        "2:\n\t"
        "mov %[k], %%rcx\n\t"
        "and $3, %%rcx\n\t"
        "jz 4f\n\t"
        "3:\n\t"
        K12_STEP("0", "0", "256")
        "add $4, %[a]\n\t"
        "add $4, %%r8\n\t"
        "add $4, %%r9\n\t"
        "add $4, %%r10\n\t"
        "add $64, %[b]\n\t"
        "dec %%rcx\n\t"
        "jnz 3b\n\t"
        "4:\n\t"
        K12_SAVE("0", "0") K12_SAVE("1", "64") K12_SAVE("2", "128") K12_SAVE("3", "192") K12_SAVE("4", "256")
        K12_SAVE("5", "320") K12_SAVE("6", "384") K12_SAVE("7", "448") K12_SAVE("8", "512") K12_SAVE("9", "576")
        K12_SAVE("10", "640") K12_SAVE("11", "704") K12_SAVE("12", "768") K12_SAVE("13", "832")
        K12_SAVE("14", "896") K12_SAVE("15", "960") K12_SAVE("16", "1024") K12_SAVE("17", "1088")
        K12_SAVE("18", "1152") K12_SAVE("19", "1216") K12_SAVE("20", "1280") K12_SAVE("21", "1344")
        K12_SAVE("22", "1408") K12_SAVE("23", "1472")
        : [a] "+r"(a), [b] "+r"(b), [pf] "+r"(pf)
        : [pfs] "r"(pfs), [pfh] "r"(pfs / 2), [lb] "r"(lb), [bs] "r"(bs), [k] "r"(kc), [acc] "r"(acc)
        : "rcx", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
          "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "cc", "memory");
}

/* rows x (np * 16) tile; A packed (lda 0: stride MR floats per k) or rows in place; rows past mv are not stored */
static inline __attribute__((always_inline)) void tile(const int rows, const int np, int64_t kc, const float *ap,
                                                       int64_t lda, const float *bp, int64_t pstride, float *c,
                                                       int64_t ldc, int mv, int nv, float alpha, float beta,
                                                       int first, const wm_tile_epi *e) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    const float *b1p = bp + (np > 1 ? pstride : 0);
    int64_t pfs;
    const char *pf = far_start(e, bp, &pfs);
    if (lda == 0) {
#pragma GCC unroll 4
        for (int64_t k = 0; k < kc; k++) {
            far_ahead(&pf, pfs, k);
            b_ahead(bp + k * WM_NR, b1p + k * WM_NR, np);
            __m512 b0 = _mm512_loadu_ps(bp + k * WM_NR);
            __m512 b1 = np > 1 ? _mm512_loadu_ps(b1p + k * WM_NR) : b0;
            const float *a = ap + k * MR;
#pragma GCC unroll 12
            for (int r = 0; r < rows; r++) {
                __m512 x = _mm512_set1_ps(a[r]);
                acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
                if (np > 1) acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
            }
        }
    } else if (rows == MR && np == 2 && mv >= MR) {
        float sums[MR][32] __attribute__((aligned(64)));
        k12x32_inplace(kc, ap, lda, bp, pstride, &sums[0][0], e);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            acc[r][0] = _mm512_load_ps(sums[r]);
            acc[r][1] = _mm512_load_ps(sums[r] + 16);
        }
    } else { /* rows in place; rows past mv alias row 0 (read, never stored) */
        const float *ar[MR];
#pragma GCC unroll 12
        for (int r = 0; r < rows; r++) ar[r] = r < mv ? ap + r * lda : ap;
#pragma GCC unroll 4
        for (int64_t k = 0; k < kc; k++) {
            far_ahead(&pf, pfs, k);
            b_ahead(bp + k * WM_NR, b1p + k * WM_NR, np);
            __m512 b0 = _mm512_loadu_ps(bp + k * WM_NR);
            __m512 b1 = np > 1 ? _mm512_loadu_ps(b1p + k * WM_NR) : b0;
#pragma GCC unroll 12
            for (int r = 0; r < rows; r++) {
                __m512 x = _mm512_set1_ps(ar[r][k]);
                acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
                if (np > 1) acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
            }
        }
    }
    store_tile(rows, np, acc, c, ldc, mv, nv, alpha, beta, first, e);
}

/* Where a finished indirect tile goes. Passed by address so that none of it is live in registers across the k
   loop: with 24 accumulators, 12 row pointers and the segment state, GCC would park it in vector registers and
   then spill the B vectors instead. */
typedef struct tile_out {
    float *c;
    int64_t ldc;
    int mv, nv, first;
    float alpha, beta;
    const wm_tile_epi *e;
} tile_out;

/* rows x (np * 16) tile with indirect A: one run of A pointers per segment of the k-block (wm_ukr_ind_fn) */
static inline __attribute__((always_inline)) void tile_ind(const int rows, const int np, int64_t kc,
                                                           const float *const *ind, int64_t ldi, int64_t k0,
                                                           int64_t seg, const float *bp, int64_t pstride,
                                                           const tile_out *o) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    const float *const *row = ind + (k0 / seg) * ldi;
    int64_t c0 = k0 % seg, k = 0;
    int64_t pfs;
    const char *pf = far_start(o->e, bp, &pfs);
    while (kc > 0) {
        int64_t len = seg - c0 < kc ? seg - c0 : kc;
        int mv = o->mv;
        /* row r at address base + d[r]: one moving base and fixed distances, so that the 12 rows, both B panels
           and the loop fit the general registers (the frame pointer takes one). The rows may lie in different
           objects (X, the zero run): integer addresses, not pointer differences. */
        uintptr_t base = (uintptr_t)(row[0] + c0), d[MR];
#pragma GCC unroll 12
        for (int r = 0; r < rows; r++) d[r] = (uintptr_t)((r < mv ? row[r] : row[0]) + c0) - base;
        const float *b1p = bp + (np > 1 ? pstride : 0), *be = bp + len * WM_NR;
#pragma GCC unroll 4
        for (const float *b = bp; b < be; b += WM_NR, base += sizeof(float), k++) {
            far_ahead(&pf, pfs, k);
            b_ahead(b, b1p + (b - bp), np);
            __m512 b0 = _mm512_loadu_ps(b);
            __m512 b1 = np > 1 ? _mm512_loadu_ps(b1p + (b - bp)) : b0;
#pragma GCC unroll 12
            for (int r = 0; r < rows; r++) {
                __m512 x = _mm512_set1_ps(*(const float *)(base + d[r]));
                acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
                if (np > 1) acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
            }
        }
        bp += len * WM_NR;
        kc -= len;
        row += ldi;
        c0 = 0;
    }
    store_tile(rows, np, acc, o->c, o->ldc, o->mv, o->nv, o->alpha, o->beta, o->first, o->e);
}

static void ukr_ind_12x32(int64_t kc, const float *const *ind, int64_t ldi, int64_t k0, int64_t seg, const float *bp,
                          int64_t pstride, float *c, int64_t ldc, int mv, int nv, float alpha, float beta, int first,
                          const wm_tile_epi *e) {
    tile_out o = {c, ldc, mv, nv, first, alpha, beta, e};
#define IND_ARGS kc, ind, ldi, k0, seg, bp, pstride, &o
    if (nv > 16) {
        if (mv > 8) tile_ind(12, 2, IND_ARGS);
        else if (mv > 4) tile_ind(8, 2, IND_ARGS);
        else if (mv > 2) tile_ind(4, 2, IND_ARGS);
        else tile_ind(2, 2, IND_ARGS);
    } else {
        if (mv > 8) tile_ind(12, 1, IND_ARGS);
        else if (mv > 4) tile_ind(8, 1, IND_ARGS);
        else if (mv > 2) tile_ind(4, 1, IND_ARGS);
        else tile_ind(2, 1, IND_ARGS);
    }
#undef IND_ARGS
}

static void ukr_12x32(int64_t kc, const float *ap, int64_t lda, const float *bp, int64_t pstride, float *c,
                      int64_t ldc, int mv, int nv, float alpha, float beta, int first, const wm_tile_epi *e) {
    if (nv > 16) {
        if (mv > 8) tile(12, 2, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
        else if (mv > 4) tile(8, 2, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
        else if (mv > 2) tile(4, 2, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
        else tile(2, 2, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
    } else {
        if (mv > 8) tile(12, 1, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
        else if (mv > 4) tile(8, 1, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
        else if (mv > 2) tile(4, 1, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
        else tile(2, 1, kc, ap, lda, bp, pstride, c, ldc, mv, nv, alpha, beta, first, e);
    }
}

/* the AVX-512 table's activations; the AVX2 table's GEMV and B packer behind this kernel */
static void vact_fwd(int64_t n, float *y, const float *x, wm_act act, float p, float q) {
    wm_vact_avx512(n, y, x, act, p, q);
}
static int small_m_fwd(const wm_sgemm_args *a, int ith, int nth) { return wm_gemm_ukr_avx2.small_m(a, ith, nth); }
static void pack_fwd(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    wm_gemm_ukr_avx2.pack_f32(s, k0, kc, n0, nc, dst, pstride);
}

const wm_gemm_ukr wm_gemm_ukr_avx512 = {ukr_12x32, MR, 2, 1, vact_fwd, small_m_fwd, pack_fwd, wm_vadd_avx2_fwd,
                                       wm_vepi_avx2, ukr_ind_12x32, 1, 1};

void wm_sgemm_avx512(const wm_sgemm_args *a, int ith, int nth) { wm_sgemm_drive(&wm_gemm_ukr_avx512, a, ith, nth); }

void wm_sgemm_batch_avx512(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth) {
    wm_sgemm_batch_drive(&wm_gemm_ukr_avx512, a, b, ith, nth);
}
