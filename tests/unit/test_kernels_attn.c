/*
 * Unit tests of the few-row attention kernels (attn_qk, attn_pv, and their
 * float16 key/value forms attn_qk_h, attn_pv_h) of every table against double-precision naive references, on awkward shapes: any
 * number of query rows (odd, past a block), key counts around the 4- and
 * 8-row blocks, head sizes off the 8/16/64-float tiles, padded strides, and
 * n == 0; and the scores against packed keys (attn_qk_packed) and their
 * unnormalized online softmax over key blocks (attn_exp_rows), the key panels themselves (attn_pack_k) on encoder sequence lengths and head sizes. Buffers are exact-size so ASan sees any read or write past them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels_test_util.h"

static const int64_t g_m[] = {1, 2, 3, 6, 7, 8, 9, 12, 13};
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

typedef void (*case_fn)(const wm_kernels *k, int64_t m, int64_t n, int64_t d, int odd, uint32_t *seed, int h);

/* Calls fn (h: float16 keys/values) for every table and every (m, n, d) of the grids above. */
static void each_shape(case_fn fn, int h, uint32_t seed) {
    const wm_kernels *tab[3];
    int nt = kt_tables(tab);
    for (int t = 0; t < nt; t++)
        for (size_t a = 0; a < sizeof g_m / sizeof *g_m; a++)
            for (size_t b = 0; b < sizeof g_n / sizeof *g_n; b++)
                for (size_t c = 0; c < sizeof g_d / sizeof *g_d; c++)
                    fn(tab[t], g_m[a], g_n[b], g_d[c], (int)(c % 2), &seed, h);
}

/* Scores of m query rows against n key rows, float32 keys or (h) float16 ones; strides differ between the two
   so that both kinds meet padded and unpadded rows. */
static void qk_run(const wm_kernels *K, int64_t m, int64_t n, int64_t d, int odd, uint32_t *seed, int h) {
    int64_t ldq = d + (h ? 1 : 3), ldk = d + (odd ? 0 : h ? 3 : 5), lds = n + (h ? 1 : 2);
    size_t nk = kt_span(n, d, ldk);
    float *q = kt_alloc(kt_span(m, d, ldq) * sizeof(float)), *k = kt_alloc(nk * sizeof(float));
    float *s = kt_alloc(kt_span(m, n, lds) * sizeof(float));
    kt_fill(q, (int64_t)kt_span(m, d, ldq), seed);
    kt_fill(k, (int64_t)nk, seed);
    uint16_t *kh = h ? kt_halves(k, nk) : NULL; /* k now holds the values the halves hold */
    const void *pf = odd ? NULL : h ? (const void *)kh : (const void *)k; /* a prefetch must not change a score */
    if (h) K->attn_qk_h(m, n, d, q, ldq, kh, ldk, 0.37f, s, lds, pf, ldk, d);
    else K->attn_qk(m, n, d, q, ldq, k, ldk, 0.37f, s, lds, pf, ldk, d);
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < d; i++) {
                ref += (double)q[r * ldq + i] * k[j * ldk + i];
                mag += fabs((double)q[r * ldq + i] * k[j * ldk + i]);
            }
            check(s[r * lds + j], 0.37 * ref, 0.37 * mag, K->name, m, n, d);
        }
    free(q), free(k), free(s), free(kh);
}

/* Probability-weighted sums of n value rows for m query rows, float32 or (h) float16 values. */
static void pv_run(const wm_kernels *K, int64_t m, int64_t n, int64_t d, int odd, uint32_t *seed, int h) {
    int64_t ldp = n + (h ? 2 : 1), ldv = d + (odd ? (h ? 2 : 4) : 0), ldo = d + (h ? 1 : 2);
    size_t nv = kt_span(n, d, ldv), no = kt_span(m, d, ldo);
    float *p = kt_alloc(kt_span(m, n, ldp) * sizeof(float)), *v = kt_alloc(nv * sizeof(float));
    float *o = kt_alloc(no * sizeof(float));
    kt_fill(p, (int64_t)kt_span(m, n, ldp), seed);
    kt_fill(v, (int64_t)nv, seed);
    uint16_t *vh = h ? kt_halves(v, nv) : NULL;
    for (size_t i = 0; i < no; i++) o[i] = NAN; /* written, never read */
    if (h) K->attn_pv_h(m, n, d, p, ldp, vh, ldv, o, ldo);
    else K->attn_pv(m, n, d, p, ldp, v, ldv, o, ldo);
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < d; i++) {
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < n; j++) {
                ref += (double)p[r * ldp + j] * v[j * ldv + i];
                mag += fabs((double)p[r * ldp + j] * v[j * ldv + i]);
            }
            check(o[r * ldo + i], ref, mag, K->name, m, n, d);
        }
    free(p), free(v), free(o), free(vh);
}

/* Scores of m query rows against n keys packed by wm_attn_pack_k (odd sequence lengths, head sizes of the
   encoders); the packed buffer is exact-size. */
static void test_qk_packed(void **state) {
    (void)state;
    static const int64_t ms[] = {1, 5, 6, 7, 12, 13}, ns[] = {1, 7, 16, 17, 50, 197, 257}, ds[] = {1, 7, 32, 64, 80};
    const wm_kernels *tab[3];
    int nt = kt_tables(tab);
    uint32_t seed = 31337;
    for (int t = 0; t < nt; t++)
        for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
            for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
                for (size_t c = 0; c < sizeof ds / sizeof *ds; c++) {
                    int64_t m = ms[a], n = ns[b], d = ds[c], ldq = d + (int64_t)(c % 3);
                    int64_t ldk = d + 2 * (int64_t)(b % 2), lds = n + (int64_t)(a % 2);
                    float *q = kt_alloc(kt_span(m, d, ldq) * sizeof(float));
                    float *k = kt_alloc(kt_span(n, d, ldk) * sizeof(float));
                    float *kp = kt_alloc(wm_attn_pack_k_floats(n, d) * sizeof(float));
                    float *s = kt_alloc(kt_span(m, n, lds) * sizeof(float));
                    kt_fill(q, (int64_t)kt_span(m, d, ldq), &seed);
                    kt_fill(k, (int64_t)kt_span(n, d, ldk), &seed);
                    wm_attn_pack_k(n, d, k, ldk, kp);
                    tab[t]->attn_qk_packed(m, n, d, q, ldq, kp, 0.37f, s, lds);
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t j = 0; j < n; j++) {
                            double ref = 0, mag = 0;
                            for (int64_t i = 0; i < d; i++) {
                                ref += (double)q[r * ldq + i] * k[j * ldk + i];
                                mag += fabs((double)q[r * ldq + i] * k[j * ldk + i]);
                            }
                            check(s[r * lds + j], 0.37 * ref, 0.37 * mag, tab[t]->name, m, n, d);
                        }
                    free(q), free(k), free(kp), free(s);
                }
}

/* Every table's attn_pack_k against the layout wm_attn_pack_k promises (key i of panel p, element c at
   p d 16 + c 16 + i; 0 past n in the last panel), exactly: full and short panels, head sizes on and off the 8-float
   transposes, padded key rows; the packed buffer exact-size, its floats NaN before the call. */
static void test_pack_k(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 50, 197, 257}, ds[] = {1, 7, 8, 16, 63, 64, 72, 80};
    const wm_kernels *tab[3];
    int nt = kt_tables(tab);
    uint32_t seed = 4242;
    for (int t = 0; t < nt; t++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t c = 0; c < sizeof ds / sizeof *ds; c++) {
                int64_t n = ns[b], d = ds[c], ldk = d + 3 * (int64_t)(b % 2), np = wm_attn_pack_k_floats(n, d);
                float *k = kt_alloc(kt_span(n, d, ldk) * sizeof(float)), *kp = kt_alloc((size_t)np * sizeof(float));
                kt_fill(k, (int64_t)kt_span(n, d, ldk), &seed);
                for (int64_t i = 0; i < np; i++) kp[i] = NAN;
                tab[t]->attn_pack_k(n, d, k, ldk, kp);
                for (int64_t j = 0; j < (n + WM_ATTN_KPANEL - 1) / WM_ATTN_KPANEL * WM_ATTN_KPANEL; j++)
                    for (int64_t e = 0; e < d; e++) {
                        float want = j < n ? k[j * ldk + e] : 0.0f;
                        float got = kp[(j / WM_ATTN_KPANEL) * d * WM_ATTN_KPANEL + e * WM_ATTN_KPANEL + j % WM_ATTN_KPANEL];
                        if (memcmp(&got, &want, sizeof got) != 0) {
                            fprintf(stderr, "%s pack_k n=%lld d=%lld key %lld elem %lld: %g vs %g\n", tab[t]->name,
                                    (long long)n, (long long)d, (long long)j, (long long)e, got, want);
                            fail();
                        }
                    }
                free(k), free(kp);
            }
}

/* The online softmax of score rows over blocks of keys (attn_exp_rows as attn_core's tiles call it: each block's
   terms, the earlier ones times alpha, then / sum) against double precision, for one block and for uneven blocks;
   scores spread wide (so some terms fall below the kernel's cut-off), a -inf score giving exactly 0, a NaN score a
   NaN row, a row whose first block is all -inf (alpha 0), and a row of -inf a NaN row (0 / 0, as softmax_row). */
static void test_exp_rows(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 7, 8, 9, 50, 197, 257, 1500};
    const wm_kernels *tab[3];
    int nt = kt_tables(tab);
    uint32_t seed = 2718;
    enum { M = 6 };
    for (int t = 0; t < nt; t++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (int split = 0; split < 2; split++) {
                int64_t n = ns[b], lds = n + 3, bl[4] = {n, 0, 0, 0}, nbl = 1;
                if (split && n > 2) /* three uneven blocks: first a tenth, then two of what remains */
                    bl[0] = n / 10 > 0 ? n / 10 : 1, bl[1] = (n - bl[0]) / 2, bl[2] = n - bl[0] - bl[1], nbl = 3;
                float *s = kt_alloc(kt_span(M, n, lds) * sizeof(float)), *x = kt_alloc(kt_span(M, n, lds) * sizeof(float));
                double *w = malloc((size_t)(M * n) * sizeof *w);
                float mx[M], sum[M], alpha[M];
                kt_fill(s, (int64_t)kt_span(M, n, lds), &seed);
                for (int64_t i = 0; i < (int64_t)kt_span(M, n, lds); i++) s[i] *= (i % 3 == 0 ? 60.0f : 8.0f);
                s[2 * lds + n / 2] = -INFINITY;
                if (n > 1) s[4 * lds + n - 1] = NAN;
                for (int64_t j = 0; j < bl[0] && nbl > 1; j++) s[3 * lds + j] = -INFINITY;
                for (int64_t j = 0; j < n; j++) s[5 * lds + j] = -INFINITY;
                memcpy(x, s, kt_span(M, n, lds) * sizeof(float));
                for (int r = 0; r < M; r++) mx[r] = -INFINITY, sum[r] = 0.0f;
                for (int64_t k = 0, j0 = 0; k < nbl; j0 += bl[k], k++) {
                    tab[t]->attn_exp_rows(M, bl[k], s + j0, lds, mx, sum, alpha);
                    for (int r = 0; r < M; r++) {
                        for (int64_t j = 0; j < j0; j++) w[r * n + j] *= alpha[r];
                        for (int64_t j = j0; j < j0 + bl[k]; j++) w[r * n + j] = s[r * lds + j];
                    }
                }
                for (int64_t r = 0; r < M; r++) {
                    const float *xr = x + r * lds;
                    double xmax = -INFINITY, tot = 0;
                    for (int64_t j = 0; j < n; j++) xmax = xr[j] > xmax ? xr[j] : xmax;
                    for (int64_t j = 0; j < n; j++) tot += exp((double)xr[j] - xmax);
                    for (int64_t j = 0; j < n; j++) {
                        double want = exp((double)xr[j] - xmax) / tot, got = w[r * n + j] / sum[r];
                        if ((r == 4 && n > 1) || r == 5 || (r == 2 && n == 1)) {
                            if (got == got)
                                fail_msg("%s n=%lld row %lld: gave %g, want NaN", tab[t]->name, (long long)n,
                                         (long long)r, got);
                        } else if ((r == 2 && j == n / 2) || (r == 3 && j < bl[0] && nbl > 1)) {
                            if (got != 0.0) fail_msg("%s n=%lld: -inf score gave %g", tab[t]->name, (long long)n, got);
                        } else if (fabs(got - want) > want * (3e-6 + 3.6e-7 * fabs(xr[j] - xmax)) + 1e-30) {
                            /* x - max is rounded to float: relative error up to |x - max| 2^-24 after exp, for the
                               term and for each alpha */
                            fail_msg("%s n=%lld split %d row %lld key %lld: %.9g vs %.9g", tab[t]->name,
                                     (long long)n, split, (long long)r, (long long)j, got, want);
                        }
                    }
                }
                free(s), free(x), free(w);
            }
}

static void test_qk(void **state) {
    (void)state;
    each_shape(qk_run, 0, 12345);
}

static void test_pv(void **state) {
    (void)state;
    each_shape(pv_run, 0, 777);
}

static void test_qk_h(void **state) {
    (void)state;
    each_shape(qk_run, 1, 4242);
}

static void test_pv_h(void **state) {
    (void)state;
    each_shape(pv_run, 1, 999);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qk),
        cmocka_unit_test(test_pv),
        cmocka_unit_test(test_qk_h),
        cmocka_unit_test(test_pv_h),
        cmocka_unit_test(test_pack_k),
        cmocka_unit_test(test_qk_packed),
        cmocka_unit_test(test_exp_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
