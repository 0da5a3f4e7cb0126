/*
 * test_ops_signal.c - DFT against a naive O(n^2) transform for lengths with
 * every kind of factor (1, primes, powers of 2, 400 = 2^4 5^2, 7^2 ...):
 * forward, inverse, onesided forward, onesided inverse (real inverse of a
 * Hermitian spectrum, cropped or zero-padded to dft_length / 2 + 1 bins),
 * zero-padding / truncation by dft_length, thread counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test_util.h"

static uint64_t rng = 0x1234567887654321ull;
static double rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng % 20001) / 10000.0 - 1.0;
}

/* x: [B, L, C] double; DFT along axis 1 with length N. */
static void dft_case(int64_t B, int64_t L, int C, int64_t N, int inverse, int onesided, int threads) {
    double *x = malloc((size_t)(B * L * C) * sizeof *x);
    for (int64_t i = 0; i < B * L * C; i++) x[i] = rnd();
    ut_model u;
    ut_begin(&u, 20);
    ut_input(&u, "x", WM_DT_DOUBLE, 3);
    int64_t one = 1;
    ut_const(&u, "n", WM_DT_INT64, &one, 0, &N);
    int64_t axis = 1;
    ut_const(&u, "a", WM_DT_INT64, &one, 0, &axis);
    ut_node(&u, "DFT", (const char *[]){"x", "n", "a"}, 3, (const char *[]){"y"}, 1);
    ut_attr_int(&u, "inverse", inverse);
    ut_attr_int(&u, "onesided", onesided);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, threads, &e), WM_OK);
    int64_t dims[3] = {B, L, C};
    wm_tensor in = ut_tensor(WM_DT_DOUBLE, dims, 3, x), out;
    if (wm_session_run(u.s, &in, 1, &out, 1, &e)) fail_msg("%s", e.msg);
    int64_t nout = onesided && !inverse ? N / 2 + 1 : N, cout = inverse && onesided ? 1 : 2;
    assert_int_equal(out.dims[1], nout);
    assert_int_equal(out.dims[2], cout);
    const double *y = out.data;
    for (int64_t b = 0; b < B; b++) {
        /* the spectrum / signal the naive transform sees, length N */
        double *re = calloc((size_t)N, sizeof *re), *im = calloc((size_t)N, sizeof *im);
        if (inverse && onesided) {
            int64_t nb = N / 2 + 1 < L ? N / 2 + 1 : L;
            for (int64_t k = 0; k < nb; k++) {
                re[k] = x[(b * L + k) * C];
                im[k] = C == 2 && k != 0 && 2 * k != N ? x[(b * L + k) * C + 1] : 0;
                if (k) re[N - k] = re[k], im[N - k] = -im[k];
            }
        } else
            for (int64_t k = 0; k < L && k < N; k++) re[k] = x[(b * L + k) * C], im[k] = C == 2 ? x[(b * L + k) * C + 1] : 0;
        double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / (double)N : 1;
        long double *cs = malloc((size_t)N * sizeof *cs), *sn = malloc((size_t)N * sizeof *sn);
        for (int64_t t = 0; t < N; t++) {
            long double a = sign * 2.0L * 3.14159265358979323846264338327950288L * (long double)t / (long double)N;
            cs[t] = cosl(a), sn[t] = sinl(a);
        }
        for (int64_t k = 0; k < nout; k++) {
            long double sr = 0, si = 0;
            for (int64_t t = 0; t < N; t++) {
                int64_t w = (t * k) % N;
                sr += re[t] * cs[w] - im[t] * sn[w];
                si += re[t] * sn[w] + im[t] * cs[w];
            }
            double gr = y[(b * nout + k) * cout], tol = 1e-9 * (double)N;
            if (fabs(gr - (double)(sr * scale)) > tol) fail_msg("N=%lld inv=%d one=%d bin %lld: re %.12g want %.12g", (long long)N, inverse, onesided, (long long)k, gr, (double)(sr * scale));
            if (cout == 2 && fabs(y[(b * nout + k) * cout + 1] - (double)(si * scale)) > tol)
                fail_msg("N=%lld bin %lld: im %.12g want %.12g", (long long)N, (long long)k, y[(b * nout + k) * cout + 1], (double)(si * scale));
        }
        free(re);
        free(im);
        free(cs);
        free(sn);
    }
    ut_free(&u);
    free(x);
}

static void test_dft_lengths(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 30, 49, 64, 97, 121, 128, 400};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t N = ns[i];
        dft_case(2, N, 1, N, 0, 0, 1);
        dft_case(2, N, 2, N, 0, 0, 1);
        dft_case(2, N, 2, N, 1, 0, 1);
        dft_case(2, N, 1, N, 0, 1, 1);
        dft_case(2, N / 2 + 1, 2, N, 1, 1, 1);
    }
}

static void test_dft_length_input(void **state) {
    (void)state;
    dft_case(3, 10, 1, 16, 0, 0, 1); /* zero-padded */
    dft_case(3, 20, 2, 12, 0, 0, 1); /* truncated */
    dft_case(3, 4, 2, 14, 1, 1, 1);  /* fewer bins than 14 / 2 + 1 */
    dft_case(3, 12, 2, 9, 1, 1, 1);  /* more bins than 9 / 2 + 1 (odd length) */
    dft_case(40, 256, 2, 256, 0, 0, 2);
    dft_case(40, 129, 2, 256, 1, 1, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dft_lengths),
        cmocka_unit_test(test_dft_length_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
