/* probe.h - machine probes for the benchmarks (wm_gemmbench): FMA peak and read bandwidth. */
#ifndef WM_KERNELS_PROBE_H
#define WM_KERNELS_PROBE_H

#include <stdint.h>

/* Runs iters iterations of 10 independent 8-wide FMA chains (AVX2 table only); returns a value to keep. */
float wm_probe_fma_avx2(int64_t iters);
/* Sums n floats with AVX2 loads (a streaming read); returns the sum. */
float wm_probe_sum_avx2(const float *x, int64_t n);

#endif
