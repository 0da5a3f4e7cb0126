/*
 * kernels_test_util.h - shared helpers of the kernel unit tests: the tables to
 * test (generic, then AVX2 and AVX-512 when the CPU has them), deterministic random fills,
 * exact-size allocations (so ASan sees any read past a matrix) and running
 * every share of a threaded kernel in turn.
 */
#ifndef WM_KERNELS_TEST_UTIL_H
#define WM_KERNELS_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/kernels.h"
#include "kernels/kernels_ref.h"

/* generic, AVX2 and AVX-512 (F/BW/VL/VNNI) where this CPU has them; a line on stderr says when the AVX-512
 * table (its SGEMM and MatMulNBits kernels) is not run */
static inline int kt_tables(const wm_kernels *out[3]) {
    int n = 0;
    out[n++] = wm_kernels_generic();
    if (wm_kernels_avx2()) out[n++] = wm_kernels_avx2();
    if (wm_kernels_avx512()) out[n++] = wm_kernels_avx512();
    else fprintf(stderr, "kernel tests: no avx512 (F/BW/VL/VNNI) table on this CPU, its kernels are not run\n");
    return n;
}

static inline uint32_t kt_next(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* uniform in [-1, 1) */
static inline float kt_uniform(uint32_t *s) { return (float)(kt_next(s) >> 8) / 8388608.0f - 1.0f; }

static inline void kt_fill(float *x, int64_t n, uint32_t *s) {
    for (int64_t i = 0; i < n; i++) x[i] = kt_uniform(s);
}

/* rows x cols with leading dimension ld, allocated to exactly (rows-1)*ld + cols elements */
static inline size_t kt_span(int64_t rows, int64_t cols, int64_t ld) {
    return rows > 0 && cols > 0 ? (size_t)((rows - 1) * ld + cols) : 0;
}

static inline void *kt_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    return p;
}

/* A float16 copy of x (n values, caller frees); x is rounded to what the copy holds, so references read x. */
static inline uint16_t *kt_halves(float *x, size_t n) {
    uint16_t *h = kt_alloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) x[i] = wm_f16_to_f32(h[i] = wm_f32_to_f16(x[i]));
    return h;
}

#endif
