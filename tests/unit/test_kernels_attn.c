/*
 * Unit tests of the few-row attention kernels (attn_qk, attn_pv) of both
 * tables against double-precision naive references, on awkward shapes: any
 * number of query rows (odd, past a block), key counts around the 4- and
 * 8-row blocks, head sizes off the 8/16/64-float tiles, padded strides, and
 * n == 0. Buffers are exact-size so ASan sees any read or write past them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels_test_util.h"

static const int64_t g_m[] = {1, 2, 3, 7, 8, 9};
static const int64_t g_n[] = {0, 1, 3, 4, 5, 8, 9, 63, 130};
static const int64_t g_d[] = {1, 7, 8, 15, 16, 64, 72, 128, 136};

/* |err| <= tol * (sum of |terms|) + tiny: float accumulation in any order */
static void check(double got, double ref, double mag, const char *what, int64_t m, int64_t n, int64_t d) {
    double tol = 2e-6 * mag * (double)(d > n ? d : n > 0 ? n : 1) / 8.0 + 1e-30;
    if (fabs(got - ref) > tol) {
        fprintf(stderr, "%s m=%lld n=%lld d=%lld: %.9g vs %.9g (tol %.3g)\n", what, (long long)m, (long long)n,
                (long long)d, got, ref, tol);
        fail();
    }
}

static void test_qk(void **state) {
    (void)state;
    const wm_kernels *tab[2];
    int nt = kt_tables(tab);
    uint32_t seed = 12345;
    for (int t = 0; t < nt; t++)
        for (size_t a = 0; a < sizeof g_m / sizeof *g_m; a++)
            for (size_t b = 0; b < sizeof g_n / sizeof *g_n; b++)
                for (size_t c = 0; c < sizeof g_d / sizeof *g_d; c++) {
                    int64_t m = g_m[a], n = g_n[b], d = g_d[c], ldq = d + 3, ldk = d + (c % 2 ? 0 : 5), lds = n + 2;
                    float *q = kt_alloc(kt_span(m, d, ldq) * sizeof(float)), *k = kt_alloc(kt_span(n, d, ldk) * sizeof(float));
                    float *s = kt_alloc(kt_span(m, n, lds) * sizeof(float));
                    kt_fill(q, (int64_t)kt_span(m, d, ldq), &seed);
                    kt_fill(k, (int64_t)kt_span(n, d, ldk), &seed);
                    tab[t]->attn_qk(m, n, d, q, ldq, k, ldk, 0.37f, s, lds);
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t j = 0; j < n; j++) {
                            double ref = 0, mag = 0;
                            for (int64_t i = 0; i < d; i++) {
                                ref += (double)q[r * ldq + i] * k[j * ldk + i];
                                mag += fabs((double)q[r * ldq + i] * k[j * ldk + i]);
                            }
                            check(s[r * lds + j], 0.37 * ref, 0.37 * mag, tab[t]->name, m, n, d);
                        }
                    free(q), free(k), free(s);
                }
}

static void test_pv(void **state) {
    (void)state;
    const wm_kernels *tab[2];
    int nt = kt_tables(tab);
    uint32_t seed = 777;
    for (int t = 0; t < nt; t++)
        for (size_t a = 0; a < sizeof g_m / sizeof *g_m; a++)
            for (size_t b = 0; b < sizeof g_n / sizeof *g_n; b++)
                for (size_t c = 0; c < sizeof g_d / sizeof *g_d; c++) {
                    int64_t m = g_m[a], n = g_n[b], d = g_d[c], ldp = n + 1, ldv = d + (c % 2 ? 4 : 0), ldo = d + 2;
                    float *p = kt_alloc(kt_span(m, n, ldp) * sizeof(float)), *v = kt_alloc(kt_span(n, d, ldv) * sizeof(float));
                    size_t no = kt_span(m, d, ldo);
                    float *o = kt_alloc(no * sizeof(float));
                    kt_fill(p, (int64_t)kt_span(m, n, ldp), &seed);
                    kt_fill(v, (int64_t)kt_span(n, d, ldv), &seed);
                    for (size_t i = 0; i < no; i++) o[i] = NAN; /* written, never read */
                    tab[t]->attn_pv(m, n, d, p, ldp, v, ldv, o, ldo);
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t i = 0; i < d; i++) {
                            double ref = 0, mag = 0;
                            for (int64_t j = 0; j < n; j++) {
                                ref += (double)p[r * ldp + j] * v[j * ldv + i];
                                mag += fabs((double)p[r * ldp + j] * v[j * ldv + i]);
                            }
                            check(o[r * ldo + i], ref, mag, tab[t]->name, m, n, d);
                        }
                    free(p), free(v), free(o);
                }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qk),
        cmocka_unit_test(test_pv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
