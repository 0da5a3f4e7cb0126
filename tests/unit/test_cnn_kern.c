/*
 * Unit tests of the convolution store (wm_cnn_transpose_epi): the 8x8-block
 * transpose that adds the bias and the residual and clamps on the way out,
 * against a naive loop, on shapes off the 8x8 blocks (edges in rows and
 * columns), with and without bias / residual, for no clamp, ReLU and Clip;
 * a NaN passes through the clamp. Buffers are exact-size so ASan sees any
 * access past them. The entry point runs with WM_KERNELS=generic (its
 * naive loop); the AVX2 kernel is called directly where the CPU has AVX2
 * (a line on stderr says when it is not run, as for the kernel tables).
 * Also the pool window maximum over a list of taps (wm_cnn_vmaxn).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "ops/cnn_kern.h"

static uint32_t rng = 2024;

static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

typedef void (*epi_fn)(const float *, int64_t, float *, int64_t, int64_t, int64_t, const wm_cnn_epi *);

static void one(epi_fn fn, int64_t rows, int64_t cols, int bias, int z, float lo, float hi) {
    int64_t lds = cols + 3, ldd = rows + 5;
    float *s = malloc((size_t)(rows * lds) * sizeof *s), *d = malloc((size_t)(cols * ldd) * sizeof *d);
    float *zb = malloc((size_t)(cols * ldd) * sizeof *zb), *b = malloc((size_t)cols * sizeof *b);
    for (int64_t i = 0; i < rows * lds; i++) s[i] = frand();
    for (int64_t i = 0; i < cols * ldd; i++) zb[i] = frand(), d[i] = 1234.0f;
    for (int64_t j = 0; j < cols; j++) b[j] = frand();
    if (rows > 3 && cols > 2) s[3 * lds + 2] = NAN;
    wm_cnn_epi e = {bias ? b : NULL, z ? zb : NULL, lo, hi};
    fn(s, lds, d, ldd, rows, cols, &e);
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < ldd; i++) {
            float got = d[j * ldd + i];
            if (i >= rows) { /* the gap between rows of d: untouched */
                assert_true(got == 1234.0f);
                continue;
            }
            float want = s[i * lds + j] + (bias ? b[j] : 0.0f) + (z ? zb[j * ldd + i] : 0.0f);
            if (isnan(want)) {
                assert_true(isnan(got));
                continue;
            }
            want = want < lo ? lo : want > hi ? hi : want;
            if (fabsf(got - want) > 1e-6f) fail_msg("rows %lld cols %lld (%lld, %lld): %g vs %g", (long long)rows,
                                                    (long long)cols, (long long)i, (long long)j, got, want);
        }
    free(s), free(d), free(zb), free(b);
}

static void sweep(epi_fn fn) {
    static const int64_t sizes[] = {1, 7, 8, 9, 16, 21};
    for (size_t a = 0; a < 6; a++)
        for (size_t c = 0; c < 6; c++)
            for (int mode = 0; mode < 4; mode++) {
                one(fn, sizes[a], sizes[c], mode & 1, mode >> 1, -INFINITY, INFINITY);
                one(fn, sizes[a], sizes[c], mode & 1, mode >> 1, 0.0f, INFINITY);
                one(fn, sizes[a], sizes[c], mode & 1, mode >> 1, -0.25f, 0.5f);
            }
}

/* the entry point (its generic loop, see main), then the AVX2 kernel where the CPU has it */
static void test_store(void **st) {
    (void)st;
    sweep(wm_cnn_transpose_epi);
    if (wm_kernels_avx2()) sweep(wm_cnn_transpose_epi_avx2);
    else fprintf(stderr, "no AVX2 on this CPU: the AVX2 store is not run\n");
}

typedef void (*maxn_fn)(float *, const float *const *, int, int64_t);

/* the window max: x[0], then the max with each further tap, against a naive loop of the same comparisons (a NaN
   after the first tap is not taken, one in the first stays until a larger value comes: wm_cnn_vmax's rule) */
static void maxn_sweep(maxn_fn fn) {
    static const int64_t lens[] = {1, 7, 8, 9, 31, 32, 33, 64, 70};
    for (size_t a = 0; a < sizeof lens / sizeof lens[0]; a++)
        for (int nx = 1; nx <= 9; nx += 4) {
            int64_t n = lens[a];
            float *x = malloc((size_t)(nx * n) * sizeof *x), *y = malloc((size_t)n * sizeof *y);
            const float *p[9];
            for (int s = 0; s < nx; s++) p[s] = x + s * n;
            for (int64_t i = 0; i < nx * n; i++) x[i] = frand();
            if (n > 5 && nx > 1) x[n + 5] = NAN;
            fn(y, p, nx, n);
            for (int64_t i = 0; i < n; i++) {
                float m = p[0][i];
                for (int s = 1; s < nx; s++) m = p[s][i] > m ? p[s][i] : m;
                if (!(y[i] == m || (isnan(y[i]) && isnan(m))))
                    fail_msg("n %lld taps %d [%lld]: %g vs %g", (long long)n, nx, (long long)i, y[i], m);
            }
            free(x), free(y);
        }
}

static void test_vmaxn(void **st) {
    (void)st;
    maxn_sweep(wm_cnn_vmaxn);
    if (wm_kernels_avx2()) maxn_sweep(wm_cnn_vmaxn_avx2);
}

int main(void) {
    setenv("WM_KERNELS", "generic", 1); /* the entry point dispatches to its generic loop */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store),
        cmocka_unit_test(test_vmaxn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
