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

int32_t wm_igemm_a_at(const void *A, int a_signed, int64_t lda, int64_t m, int64_t k);
int32_t wm_igemm_b_at(const void *B, int b_signed, int64_t ldb, int64_t k, int64_t n);
void wm_igemm_pack_b_block(const void *B, int64_t ldb, int64_t K, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                           uint8_t *dst, int64_t pstride);
/* the int32 zero point per column (16 per panel) that follows the panels of a wm_igemm_pack_b buffer */
const int32_t *wm_igemm_packed_zp(const void *packed, int64_t K, int64_t N);
void wm_igemm_store(const wm_igemm_args *a, const wm_gemm_ukr *u, const int32_t *acc, int64_t ld, int64_t m0,
                    int64_t m1, int64_t n0, int64_t n1);

#endif
