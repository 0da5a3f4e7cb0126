/*
 * Unit tests of the vector math, row kernels, conversions and BLAS-1 helpers of
 * both tables against double-precision references (libm in double), with the
 * documented error bounds in ulp; special values; tails of every length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels_test_util.h"

/* error of y against the exact r in units of the last place of r (as a float) */
static double ulp_err(float y, double r) {
    if (isnan(r)) return isnan(y) ? 0 : 1e30;
    if (isinf((float)r)) return (isinf(y) && (y > 0) == (r > 0)) ? 0 : 1e30; /* rounds to +-inf */
    double ar = fabs(r);
    int e;
    frexp(ar, &e); /* ar = f 2^e, f in [0.5, 1) */
    double ulp = ldexp(1.0, e - 24);
    if (ulp < ldexp(1.0, -149)) ulp = ldexp(1.0, -149);
    return fabs((double)y - r) / ulp;
}

static double r_gelu_erf(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double r_gelu_tanh(double x) { return x / (1.0 + exp(-2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_silu(double x) { return x / (1.0 + exp(-x)); }

typedef struct fn_case {
    const char *name;
    size_t off; /* offset of the function pointer in wm_kernels */
    double (*ref)(double);
    double lo, hi;   /* input range of the sweep */
    double max_ulp;  /* bound for the AVX2 table (generic: 2 ulp) */
    double abs_from; /* below this x (AVX2): ulp bound 3 + 2.5 |2u| (gelu_tanh tail; 0: none) */
} fn_case;

#define OFF(f) offsetof(wm_kernels, f)

static const fn_case g_fns[] = {
    {"exp", OFF(vexp), exp, -110, 90, 2, 0},
    {"log", OFF(vlog), log, 0, 3e38, 2, 0},
    {"tanh", OFF(vtanh), tanh, -12, 12, 2, 0},
    {"erf", OFF(verf), erf, -5, 5, 3, 0},
    {"sigmoid", OFF(vsigmoid), r_sigmoid, -100, 100, 2.5, 0},
    {"silu", OFF(vsilu), r_silu, -80, 80, 3, 0},
    {"gelu_erf", OFF(vgelu_erf), r_gelu_erf, -13, 13, 4, 0},
    {"gelu_tanh", OFF(vgelu_tanh), r_gelu_tanh, -10, 10, 3, -1e-30 /* all x < 0 */},
};

typedef void (*vfn)(int64_t, float *, const float *);

/* inputs: a dense uniform sweep of [lo, hi], a log sweep near 0 of both signs, specials */
static int64_t make_inputs(const fn_case *c, float *x, int64_t cap) {
    int64_t n = 0;
    const int64_t nu = 150000;
    for (int64_t i = 0; i < nu && n < cap; i++) x[n++] = (float)(c->lo + (c->hi - c->lo) * (double)i / (nu - 1));
    for (int e = -149; e <= 20 && n + 40 < cap; e++)
        for (int k = 0; k < 20; k++) {
            float v = (float)ldexp(1.0 + k / 20.0, e);
            if (v >= c->lo && v <= c->hi) x[n++] = v;
            if (-v >= c->lo && -v <= c->hi) x[n++] = -v;
        }
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 1.17549435e-38f, 3.4028235e38f, -3.4028235e38f};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0] && n < cap; i++) x[n++] = sp[i];
    return n;
}

static void test_elementwise(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    const int64_t cap = 200000;
    float *x = kt_alloc((size_t)cap * 4), *y = kt_alloc((size_t)cap * 4);
    for (int t = 0; t < nt; t++)
        for (size_t f = 0; f < sizeof g_fns / sizeof g_fns[0]; f++) {
            const fn_case *c = &g_fns[f];
            vfn fn = *(const vfn *)((const char *)T[t] + c->off);
            int64_t n = make_inputs(c, x, cap);
            fn(n, y, x);
            double worst = 0, worst_abs = 0;
            float at = 0;
            for (int64_t i = 0; i < n; i++) {
                double r = c->ref((double)x[i]);
                if (c->name[0] == 'l' && x[i] < 0) r = NAN;
                if (c->abs_from != 0 && x[i] < c->abs_from && strcmp(T[t]->name, "generic") != 0) {
                    /* gelu_tanh tail: the rounding of 2u = x (c1 + c2 x^2) is amplified |2u| times */
                    double u2 = fabs(1.5957691216057308 * (x[i] + 0.044715 * (double)x[i] * x[i] * x[i]));
                    double u = ulp_err(y[i], r), lim = 3 + 2.5 * u2;
                    if (!(u <= lim)) fail_msg("%s %s(%g) = %g, reference %g: %.1f ulp > %.1f", T[t]->name, c->name, x[i], y[i], r, u, lim);
                    worst_abs = fabs((double)y[i] - r) > worst_abs ? fabs((double)y[i] - r) : worst_abs;
                    continue;
                }
                double u = ulp_err(y[i], r);
                if (u > worst) {
                    worst = u;
                    at = x[i];
                }
            }
            double bound = strcmp(T[t]->name, "generic") == 0 ? 2 : c->max_ulp;
            printf("    %-8s %-10s max %.2f ulp (at %g)", T[t]->name, c->name, worst, at);
            if (worst_abs > 0) printf("; below x = %g max abs error %.2g", c->abs_from, worst_abs);
            printf("\n");
            if (!(worst <= bound))
                fail_msg("%s %s: %.2f ulp at x = %.9g (bound %.1f)", T[t]->name, c->name, worst, at, bound);
            /* in place, and every tail length gives the same values as the long run */
            for (int64_t len = 0; len <= 17; len++) {
                float buf[17];
                memcpy(buf, x + 1000, (size_t)len * 4);
                fn(len, buf, buf);
                for (int64_t i = 0; i < len; i++)
                    if (memcmp(&buf[i], &y[1000 + i], 4) != 0 && !(isnan(buf[i]) && isnan(y[1000 + i])))
                        fail_msg("%s %s: length %lld element %lld differs from the long run", T[t]->name, c->name,
                                 (long long)len, (long long)i);
            }
        }
    free(x);
    free(y);
}

/* vmath_simd.h at 16 lanes gives the 8-lane values bit for bit: every input of every sweep, and every activation */
static void test_avx512_matches_avx2(void **state) {
    (void)state;
    const wm_kernels *a2 = wm_kernels_avx2(), *a5 = wm_kernels_avx512();
    if (!a2 || !a5) skip(); /* no AVX-512 table on this CPU: reported as skipped */
    const int64_t cap = 200000;
    float *x = kt_alloc((size_t)cap * 4), *y2 = kt_alloc((size_t)cap * 4), *y5 = kt_alloc((size_t)cap * 4);
    for (size_t f = 0; f < sizeof g_fns / sizeof g_fns[0]; f++) {
        const fn_case *c = &g_fns[f];
        int64_t n = make_inputs(c, x, cap);
        (*(const vfn *)((const char *)a2 + c->off))(n, y2, x);
        (*(const vfn *)((const char *)a5 + c->off))(n, y5, x);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&y2[i], &y5[i], 4) != 0 && !(isnan(y2[i]) && isnan(y5[i])))
                fail_msg("%s(%.9g): avx512 %.9g, avx2 %.9g", c->name, x[i], y5[i], y2[i]);
    }
    static const wm_act acts[] = {WM_ACT_RELU, WM_ACT_GELU_ERF, WM_ACT_GELU_TANH, WM_ACT_SILU, WM_ACT_SIGMOID,
                                  WM_ACT_TANH, WM_ACT_QUICK_GELU};
    int64_t n = make_inputs(&g_fns[0], x, cap);
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
        a2->vact(n, y2, x, acts[k], 1.702f, 0);
        a5->vact(n, y5, x, acts[k], 1.702f, 0);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&y2[i], &y5[i], 4) != 0 && !(isnan(y2[i]) && isnan(y5[i])))
                fail_msg("act %d (%.9g): avx512 %.9g, avx2 %.9g", (int)acts[k], x[i], y5[i], y2[i]);
    }
    free(x);
    free(y2);
    free(y5);
}

static void test_act_dispatch(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    float x[37], y[37];
    uint32_t s = 3;
    for (int i = 0; i < 37; i++) x[i] = 6 * kt_uniform(&s);
    for (int t = 0; t < nt; t++)
        for (int a = 0; a < WM_ACT_COUNT; a++) {
            T[t]->vact(37, y, x, (wm_act)a, -0.5f, 0.75f);
            for (int i = 0; i < 37; i++) {
                double r = wm_ref_act(x[i], (wm_act)a, -0.5f, 0.75f);
                if (fabs(y[i] - r) > 1e-6 * (fabs(r) + 1e-3)) fail_msg("%s act %d x=%g: %g vs %g", T[t]->name, a, x[i], y[i], r);
            }
        }
}

static void test_rows(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t ns[] = {1, 2, 7, 8, 9, 31, 33, 128, 333, 512};
    float x[512], y[512], g[512], b[512], mask[512];
    uint32_t s = 11;
    for (int t = 0; t < nt; t++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            int64_t n = ns[k];
            for (int64_t i = 0; i < n; i++) {
                x[i] = 8 * kt_uniform(&s) + 3;
                g[i] = kt_uniform(&s);
                b[i] = kt_uniform(&s);
                mask[i] = (i % 5 == 3) ? -INFINITY : kt_uniform(&s);
            }
            if (n > 1) mask[0] = 0; /* at least one live entry */
            /* softmax with scale and mask */
            T[t]->softmax_row(n, y, x, 0.125f, mask);
            double mx = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, x[i] * 0.125 + mask[i]);
            for (int64_t i = 0; i < n; i++) sum += exp(x[i] * 0.125 + mask[i] - mx);
            for (int64_t i = 0; i < n; i++) {
                double r = exp(x[i] * 0.125 + mask[i] - mx) / sum;
                if (fabs(y[i] - r) > 4e-7 * r + 1e-9) fail_msg("%s softmax n=%lld [%lld] %g vs %g", T[t]->name, (long long)n, (long long)i, y[i], r);
            }
            T[t]->softmax_row(n, y, x, 1.0f, NULL);
            /* log-softmax */
            T[t]->log_softmax_row(n, y, x);
            mx = -INFINITY;
            sum = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, x[i]);
            for (int64_t i = 0; i < n; i++) sum += exp(x[i] - mx);
            for (int64_t i = 0; i < n; i++) {
                double r = x[i] - mx - log(sum);
                if (fabs(y[i] - r) > 1e-6 * (fabs(r) + 1)) fail_msg("%s log_softmax n=%lld: %g vs %g", T[t]->name, (long long)n, y[i], r);
            }
            /* layernorm with mean / inv_std out, and without gamma/beta */
            float mean, inv;
            T[t]->layernorm_row(n, y, x, g, b, 1e-5f, &mean, &inv);
            double dm = 0, dv = 0;
            for (int64_t i = 0; i < n; i++) dm += x[i];
            dm /= n;
            for (int64_t i = 0; i < n; i++) dv += (x[i] - dm) * (x[i] - dm);
            dv /= n;
            double di = 1 / sqrt(dv + 1e-5);
            if (fabs(mean - dm) > 1e-6 * (fabs(dm) + 1) || fabs(inv - di) > 2e-6 * di)
                fail_msg("%s layernorm n=%lld: mean %g/%g inv_std %g/%g", T[t]->name, (long long)n, mean, dm, inv, di);
            for (int64_t i = 0; i < n; i++) {
                double r = (x[i] - dm) * di * g[i] + b[i];
                if (fabs(y[i] - r) > 2e-5 * (fabs(r) + 1)) fail_msg("%s layernorm n=%lld [%lld]: %g vs %g", T[t]->name, (long long)n, (long long)i, y[i], r);
            }
            T[t]->layernorm_row(n, y, x, NULL, NULL, 1e-5f, NULL, NULL);
            for (int64_t i = 0; i < n; i++)
                if (fabs(y[i] - (x[i] - dm) * di) > 2e-5 * (fabs((x[i] - dm) * di) + 1)) fail_msg("%s layernorm plain", T[t]->name);
            /* rmsnorm */
            T[t]->rmsnorm_row(n, y, x, g, 1e-6f);
            double ss = 0;
            for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
            double ri = 1 / sqrt(ss / n + 1e-6);
            for (int64_t i = 0; i < n; i++) {
                double r = x[i] * ri * g[i];
                if (fabs(y[i] - r) > 2e-6 * (fabs(r) + 1e-3)) fail_msg("%s rmsnorm n=%lld: %g vs %g", T[t]->name, (long long)n, y[i], r);
            }
            /* reductions and BLAS-1 */
            double dd = 0, sx = 0, mxx = -INFINITY;
            for (int64_t i = 0; i < n; i++) {
                dd += (double)x[i] * g[i];
                sx += x[i];
                mxx = fmax(mxx, x[i]);
            }
            double sa = 0, sg = 0;
            for (int64_t i = 0; i < n; i++) {
                sa += fabs(x[i]) * fabs(g[i]);
                sg += fabs(x[i]);
            }
            if (fabs(T[t]->dot(n, x, g) - dd) > 2e-7 * n * sa + 1e-7) fail_msg("%s dot n=%lld", T[t]->name, (long long)n);
            if (fabs(T[t]->reduce_sum(n, x) - sx) > 2e-7 * n * sg + 1e-7) fail_msg("%s sum n=%lld", T[t]->name, (long long)n);
            if (T[t]->reduce_max(n, x) != (float)mxx) fail_msg("%s max n=%lld", T[t]->name, (long long)n);
            memcpy(y, b, (size_t)n * 4);
            T[t]->axpy(n, 0.5f, x, y);
            for (int64_t i = 0; i < n; i++)
                if (fabs(y[i] - (b[i] + 0.5 * x[i])) > 1e-6 * (fabs(x[i]) + 1)) fail_msg("%s axpy", T[t]->name);
            T[t]->scale(n, y, x, -3.0f);
            for (int64_t i = 0; i < n; i++) assert_true(y[i] == -3.0f * x[i]);
            T[t]->add(n, y, x, g);
            for (int64_t i = 0; i < n; i++) assert_true(y[i] == x[i] + g[i]);
            T[t]->sub(n, y, x, g);
            for (int64_t i = 0; i < n; i++) assert_true(y[i] == x[i] - g[i]);
            T[t]->mul(n, y, x, g);
            for (int64_t i = 0; i < n; i++) assert_true(y[i] == x[i] * g[i]);
            T[t]->div(n, y, x, g);
            for (int64_t i = 0; i < n; i++) assert_true(y[i] == x[i] / g[i]);
        }
    /* n == 0 edge cases */
    for (int t = 0; t < nt; t++) {
        assert_true(T[t]->reduce_max(0, x) == -INFINITY);
        assert_true(T[t]->reduce_sum(0, x) == 0.0f);
        assert_true(T[t]->dot(0, x, x) == 0.0f);
        T[t]->softmax_row(0, y, x, 1.0f, NULL);
        float m = 1, iv = 1;
        T[t]->layernorm_row(0, y, x, NULL, NULL, 1e-5f, &m, &iv);
    }
}

/* half / bfloat16: every half bit pattern round trips; float -> half rounds to nearest even like numpy's
 * float16 (ties checked at exact midpoints); bf16 likewise. Both tables must agree bit for bit. */
static void test_conversions(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    uint16_t *h = kt_alloc(65536 * 2), *h2 = kt_alloc(65536 * 2);
    float *f = kt_alloc(65536 * 4), *f0 = kt_alloc(65536 * 4);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int t = 0; t < nt; t++) {
        T[t]->f16_to_f32(65536, f, h);
        if (t == 0) memcpy(f0, f, 65536 * 4);
        for (int i = 0; i < 65536; i++) {
            int e = (i >> 10) & 31, m = i & 1023;
            double r = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
            if (i & 0x8000) r = -r;
            if (!(f[i] == r || (isnan(r) && isnan(f[i])))) fail_msg("%s half %04x -> %g (want %g)", T[t]->name, i, f[i], r);
        }
        T[t]->f32_to_f16(65536, h2, f);
        for (int i = 0; i < 65536; i++) {
            int nan = ((i >> 10) & 31) == 31 && (i & 1023);
            if (nan ? (((h2[i] >> 10) & 31) != 31 || !(h2[i] & 1023)) : h2[i] != i)
                fail_msg("%s half %04x round trip gives %04x", T[t]->name, i, h2[i]);
        }
        /* midpoints between neighbouring halves round to the even one; just above rounds up */
        for (int i = 0x0001; i < 0x7bff; i += 7) {
            double lo = f0[i], hi = f0[i + 1], mid = (lo + hi) / 2;
            float mf = (float)mid, above = nextafterf(mf, INFINITY);
            uint16_t r1, r2;
            T[t]->f32_to_f16(1, &r1, &mf);
            T[t]->f32_to_f16(1, &r2, &above);
            if ((double)mf == mid && r1 != ((i & 1) ? i + 1 : i)) fail_msg("%s half tie at %04x gave %04x", T[t]->name, i, r1);
            if (r2 != i + 1) fail_msg("%s half above-mid at %04x gave %04x", T[t]->name, i, r2);
        }
        float big[3] = {65520.0f, 65519.0f, -1e10f};
        uint16_t hb[3];
        T[t]->f32_to_f16(3, hb, big);
        assert_int_equal(hb[0], 0x7c00);
        assert_int_equal(hb[1], 0x7bff);
        assert_int_equal(hb[2], 0xfc00);
        /* bfloat16 */
        uint32_t s = 77;
        float v[1000];
        uint16_t bv[1000];
        float back[1000];
        for (int i = 0; i < 1000; i++) {
            uint32_t bits = kt_next(&s);
            if (i < 10) bits = (bits & 0xffff0000u) | 0x8000u; /* exact ties */
            memcpy(&v[i], &bits, 4);
        }
        T[t]->f32_to_bf16(1000, bv, v);
        T[t]->bf16_to_f32(1000, back, bv);
        for (int i = 0; i < 1000; i++) {
            uint32_t bits;
            memcpy(&bits, &v[i], 4);
            if (isnan(v[i])) {
                assert_true(isnan(back[i]));
                continue;
            }
            uint32_t up = (bits >> 16) + 1, dn = bits >> 16, rem = bits & 0xffff;
            uint32_t want = rem > 0x8000 ? up : rem < 0x8000 ? dn : ((dn & 1) ? up : dn);
            if (bv[i] != (uint16_t)want) fail_msg("%s bf16 of %08x gave %04x want %04x", T[t]->name, bits, bv[i], want);
        }
    }
    free(h);
    free(h2);
    free(f);
    free(f0);
}

/* transpose32 of every table against the element-by-element definition: sizes around the 8 x 8 blocks (0, 1, 7,
 * 8, 9, 17, 49 x 2048-like), strides wider than the rows, arbitrary bit patterns (NaN payloads kept), and the
 * destination's gaps between rows untouched. */
static void test_transpose32(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t sz[][2] = {{0, 5}, {5, 0}, {1, 1}, {7, 9}, {8, 8}, {9, 17}, {16, 24}, {49, 131}, {3, 64}};
    for (size_t c = 0; c < sizeof sz / sizeof sz[0]; c++) {
        int64_t rows = sz[c][0], cols = sz[c][1], lds = cols + 3, ldd = rows + 5;
        uint32_t *src = kt_alloc((size_t)(rows * lds + 1) * 4), *dst = kt_alloc((size_t)(cols * ldd + 1) * 4);
        uint32_t s = 1234 + (uint32_t)c;
        for (int64_t i = 0; i < rows * lds; i++) src[i] = kt_next(&s);
        for (int t = 0; t < nt; t++) {
            for (int64_t i = 0; i < cols * ldd; i++) dst[i] = 0xDEADBEEFu;
            T[t]->transpose32(rows, cols, src, lds, dst, ldd);
            for (int64_t j = 0; j < cols; j++)
                for (int64_t i = 0; i < ldd; i++) {
                    uint32_t want = i < rows ? src[i * lds + j] : 0xDEADBEEFu;
                    if (dst[j * ldd + i] != want)
                        fail_msg("%s transpose32 %lldx%lld: [%lld][%lld] %08x want %08x", T[t]->name, (long long)rows,
                                 (long long)cols, (long long)j, (long long)i, dst[j * ldd + i], want);
                }
        }
        free(src);
        free(dst);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose32),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_avx512_matches_avx2),
        cmocka_unit_test(test_act_dispatch),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
