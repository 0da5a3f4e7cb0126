/* igemm_impl.h - MatMulInteger pieces shared by igemm.c and igemm_avx2.c. */
#ifndef WM_KERNELS_IGEMM_IMPL_H
#define WM_KERNELS_IGEMM_IMPL_H

#include "kernels/kernels_impl.h"

#define WM_IKC 512 /* k per block (even): B micro-panel 512 x 16 bytes = 8 KiB */

/* k per block for a of M rows: WM_IKC, or all of K for one tile of rows (a decode step), whose A panel is small
   and whose B then streams from memory as one run per thread instead of a jump every 8 KiB */
static inline int64_t wm_igemm_kc(const wm_igemm_args *a) {
    if (a->M <= WM_MR || a->K < WM_IKC) return WM_ALIGN_UP(a->K > 0 ? a->K : 1, 2);
    return WM_IKC;
}
#define WM_INC 256 /* columns per block: the int32 accumulators MC x INC stay in L2 */

/*
 * A faster way with a block of more than WM_MR rows (prefill, k blocks of at most WM_IKC), for uint8 A and int8 B,
 * or with all_signs every signedness (signed A read as a + 128, unsigned B as b - 128: the panel then gives
 * sum_k (a - za) (b - 128) for unsigned B, and the driver takes B's zero point as zb - 128): pack_a packs rows
 * [m0, m0+mc) x k [k0, k0+kc) of A its own way into dst (up to WM_IGEMM_APACK bytes) and adds each row's sum of
 * (a - za) to asum; panel multiplies one 16-column panel of B (the pair layout of wm_igemm_pack_b_block, kc rows)
 * by that pack into acc (ld; first: store, else add), giving sum_k (a - za) * b, B's zero point left to the
 * driver; scratch holds (kc + 4) * 32 bytes.
 */
typedef struct wm_igemm_wide {
    void (*pack_a)(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, uint8_t *dst,
                   int32_t *asum);
    void (*panel)(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t kc, const uint8_t *apack,
                  const uint8_t *bpanel, uint8_t *scratch, int32_t *acc, int64_t ld, int first);
    int all_signs;
    /* NULL, or panel for a prepacked signed B panel whose pairs are all safe (wm_igemm_packed_safe): read as it
       is, no regrouping per call; colsum: the panel's 16 column sums over all of K (wm_igemm_packed_colsum),
       taken off with A's zero points where first (the first k-block), so the blocks' sums add to
       sum_k (a - za) b */
    void (*panel_safe)(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t kc, const uint8_t *apack,
                       const uint8_t *bpanel, const int32_t *colsum, int32_t *acc, int64_t ld, int first);
} wm_igemm_wide;
extern const wm_igemm_wide wm_igemm_ubs_avx2; /* vpmaddubsw, exact (igemm_ubs_avx2.c) */
#define WM_IGEMM_APACK(mc, kc) ((size_t)WM_ALIGN_UP((mc), WM_MR) * (size_t)((kc) + 8) * 2) /* bytes, either pack */

/* The AVX2 driver (igemm_avx2.c); wide, when not NULL, takes the blocks it can (igemm_avx512.c). */
void wm_igemm_drive(const wm_igemm_args *a, int ith, int nth, const wm_igemm_wide *wide);

int32_t wm_igemm_a_at(const void *A, int a_signed, int64_t lda, int64_t m, int64_t k);
int32_t wm_igemm_b_at(const void *B, int b_signed, int64_t ldb, int64_t k, int64_t n);
void wm_igemm_pack_b_block(const void *B, int64_t ldb, int64_t K, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                           uint8_t *dst, int64_t pstride);
/* the int32 zero point per column (16 per panel) that follows the panels of a wm_igemm_pack_b buffer */
const int32_t *wm_igemm_packed_zp(const void *packed, int64_t K, int64_t N);
/* after them: B's column sums as int8 (int32, 16 per panel), then per panel 1 when all its pairs are
   wm_igemm_pair_safe (as int8): what the AVX2 decode rows need (see igemm.c) */
const int32_t *wm_igemm_packed_colsum(const void *packed, int64_t K, int64_t N);
const uint8_t *wm_igemm_packed_safe(const void *packed, int64_t K, int64_t N);
int wm_igemm_pair_safe(int8_t b0, int8_t b1);
/* Rows 0..R-1 (R <= WM_MR) of uint8 A, given as aq (row r at aq + r * aqs: its bytes, zero padded to a multiple
   of 4 past K), times one packed panel bp of signed B whose pairs are all safe (K2 pairs): acc (ld) = sum_k a b
   - za[r] * colsum, i.e. sum_k (a - za) b, exact (vpmaddubsw; igemm_ubs_avx2.c). */
void wm_igemm_ubs_rows_avx2(int R, int64_t K2, const uint8_t *aq, int64_t aqs, const int32_t *za, const uint8_t *bp,
                            const int32_t *colsum, int32_t *acc, int64_t ld);
void wm_igemm_store(const wm_igemm_args *a, const wm_gemm_ukr *u, const int32_t *acc, int64_t ld, int64_t m0,
                    int64_t m1, int64_t n0, int64_t n1);

#endif
