/*
 * Unit tests of the convolution store (wm_cnn_transpose_epi): the 8x8-block
 * transpose that adds the bias and the residual and clamps on the way out,
 * against a naive loop, on shapes off the 8x8 blocks (edges in rows and
 * columns), with and without bias / residual, for no clamp, ReLU and Clip;
 * a NaN passes through the clamp. Buffers are exact-size so ASan sees any
 * access past them. The entry point runs with WM_KERNELS=generic (its
 * naive loop); the AVX2 kernel is called directly where the CPU has AVX2
 * (a line on stderr says when it is not run, as for the kernel tables).
 * Also the pool window maximum over a list of taps (wm_cnn_vmaxn), and the
 * Winograd F(2x2, 3x3) and F(4x4, 3x3) transforms (wm_cnn_wino_in / _out):
 * input transform, the product with G g G^T and the output transform
 * together must give the direct 3x3 correlation of the tile (computed in
 * double), with bias, residual and clamp, skipping NULL outputs.
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


typedef void (*wino_in_fn)(int, const float *const *, int64_t, int64_t, float *, int64_t);
typedef void (*wino_out_fn)(int, const float *, int64_t, int64_t, int64_t, float *const *, const float *const *,
                            const float *, float, float);

/* One tile of C channels, channels [c0, C) transformed (those below c0 must stay untouched): per channel, the
   input transform times U = G g G^T (G from the published matrices, in double), summed over nothing (a depthwise
   product: channel c with its own 3x3 g), then the output transform, must equal the direct 3x3 correlation of
   the tile plus bias and residual, clamped. One input position reads the zero run (padding). */
static void wino_one(wino_in_fn fin, wino_out_fn fout, int m, int64_t C, int64_t c0, int bias, int z, float lo,
                     float hi) {
    static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    static const double G4[6][3] = {{0.25, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
    const int a = m + 2, P = a * a, O = m * m;
    int64_t ldv = C + 3;
    float *x = malloc((size_t)(P * C) * sizeof *x), *zero = calloc((size_t)C, sizeof *zero);
    float *v = malloc((size_t)(P * ldv) * sizeof *v), *g = malloc((size_t)(9 * C) * sizeof *g);
    float *y = malloc((size_t)(O * C) * sizeof *y), *zb = malloc((size_t)(O * C) * sizeof *zb);
    float *b = malloc((size_t)C * sizeof *b);
    const float *d[36];
    float *yp[16];
    const float *zp[16];
    for (int64_t i = 0; i < P * C; i++) x[i] = frand();
    for (int64_t i = 0; i < 9 * C; i++) g[i] = frand();
    for (int64_t i = 0; i < O * C; i++) zb[i] = frand(), y[i] = 1234.0f;
    for (int64_t i = 0; i < C; i++) b[i] = frand();
    for (int64_t i = 0; i < P * ldv; i++) v[i] = -7.0f;
    for (int t = 0; t < P; t++) d[t] = t == 1 ? zero : x + t * C;
    for (int k = 0; k < O; k++) yp[k] = k == O - 1 ? NULL : y + k * C, zp[k] = zb + k * C;
    fin(m, d, c0, C, v, ldv);
    for (int t = 0; t < P; t++)
        for (int64_t c = 0; c < c0; c++) assert_true(v[t * ldv + c] == -7.0f);
    for (int64_t c = c0; c < C; c++) /* v *= U, channel by channel */
        for (int t = 0; t < P; t++) {
            const double *gi = m == 2 ? G2[t / a] : G4[t / a], *gj = m == 2 ? G2[t % a] : G4[t % a];
            double u = 0;
            for (int r = 0; r < 3; r++)
                for (int s = 0; s < 3; s++) u += gi[r] * g[c * 9 + r * 3 + s] * gj[s];
            v[t * ldv + c] = (float)(v[t * ldv + c] * u);
        }
    fout(m, v, ldv, c0, C, yp, z ? zp : NULL, bias ? b : NULL, lo, hi);
    for (int k = 0; k < O; k++)
        for (int64_t c = 0; c < C; c++) {
            float got = y[k * C + c];
            if (k == O - 1 || c < c0) {
                assert_true(got == 1234.0f);
                continue;
            }
            double want = (bias ? b[c] : 0.0) + (z ? zb[k * C + c] : 0.0), mag = 0;
            for (int r = 0; r < 3; r++)
                for (int s = 0; s < 3; s++) {
                    int t = (k / m + r) * a + k % m + s;
                    double p = (double)(t == 1 ? 0.0f : x[t * C + c]) * g[c * 9 + r * 3 + s];
                    want += p, mag += fabs(p);
                }
            want = want < lo ? lo : want > hi ? hi : want;
            if (fabs(got - want) > 1e-5 * (1 + mag))
                fail_msg("F(%d, 3) C %lld c0 %lld out %d channel %lld: %g vs %g", m, (long long)C, (long long)c0, k,
                         (long long)c, got, want);
        }
    free(x), free(zero), free(v), free(g), free(y), free(zb), free(b);
}

static void wino_sweep(wino_in_fn fin, wino_out_fn fout) {
    static const int64_t cs[] = {1, 7, 8, 9, 16, 21};
    for (int m = 2; m <= 4; m += 2)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
            for (int mode = 0; mode < 4; mode++) {
                wino_one(fin, fout, m, cs[i], 0, mode & 1, mode >> 1, -INFINITY, INFINITY);
                wino_one(fin, fout, m, cs[i], cs[i] / 3, mode & 1, mode >> 1, 0.0f, INFINITY);
                wino_one(fin, fout, m, cs[i], 0, mode & 1, mode >> 1, -0.25f, 0.5f);
            }
}

static void test_winograd(void **st) {
    (void)st;
    wino_sweep(wm_cnn_wino_in, wm_cnn_wino_out);
    if (wm_kernels_avx2()) wino_sweep(wm_cnn_wino_in_avx2, wm_cnn_wino_out_avx2);
}

int main(void) {
    setenv("WM_KERNELS", "generic", 1); /* the entry point dispatches to its generic loop */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store),
        cmocka_unit_test(test_vmaxn),
        cmocka_unit_test(test_winograd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
