/* igemm_impl.h - MatMulInteger pieces shared by igemm.c and igemm_avx2.c. */
#ifndef WM_KERNELS_IGEMM_IMPL_H
#define WM_KERNELS_IGEMM_IMPL_H

#include "kernels/kernels_impl.h"

#define WM_IKC 512 /* k per block (even): B micro-panel 512 x 16 int16 = 16 KiB */
#define WM_INC 256 /* columns per block: the int32 accumulators MC x INC stay in L2 */

int32_t wm_igemm_a_at(const void *A, int a_signed, int64_t lda, int64_t m, int64_t k);
int32_t wm_igemm_b_at(const void *B, int b_signed, int64_t ldb, int64_t k, int64_t n);
void wm_igemm_pack_b_block(int b_signed, const void *B, int64_t ldb, int64_t K, int32_t zp, const int32_t *zps,
                           int64_t k0, int64_t kc, int64_t n0, int64_t nc, int16_t *dst, int64_t pstride);
void wm_igemm_store(const wm_igemm_args *a, const wm_gemm_ukr *u, const int32_t *acc, int64_t ld, int64_t m0,
                    int64_t m1, int64_t n0, int64_t n1);

#endif
