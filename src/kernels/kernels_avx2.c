/* placeholder: AVX2 entries forward to generic until their kernels land */
#include "kernels/kernels_impl.h"
void wm_igemm_avx2(const wm_igemm_args *a, int ith, int nth) { wm_igemm_generic(a, ith, nth); }

