/* placeholder: AVX2 entries forward to generic until their kernels land */
#include "kernels/kernels_impl.h"
void wm_hgemm_avx2(const wm_hgemm_args *a, int ith, int nth) { wm_hgemm_generic(a, ith, nth); }
void wm_nbits_avx2(const wm_nbits_args *a, int ith, int nth) { wm_nbits_generic(a, ith, nth); }
void wm_igemm_avx2(const wm_igemm_args *a, int ith, int nth) { wm_igemm_generic(a, ith, nth); }
void wm_vmath_fill_avx2(wm_kernels *k) { (void)k; }
