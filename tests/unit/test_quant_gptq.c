/* Unit tests of GPTQ (opt/quant_gptq.c): RTN when H is the identity (or diagonal, act-order), a lower output error
 * than RTN on correlated inputs (in order and act-order), RTN again as the damping grows, dead inputs, NaN / infinity
 * refused with the element named, H not positive definite, bad shapes. The comparison with a numpy reference of the
 * same algorithm is tests/oracle/test_gptq.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* roughly N(0, 1): the sum of 4 uniforms, centred */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)(rng >> 40) / (float)(1ull << 24);
    }
    return (s - 2.0f) * 1.7f;
}

typedef struct qout {
    uint8_t *q, *zp;
    float *sc;
} qout;

static qout alloc_out(int64_t K, int64_t N, int64_t bs, int bits) {
    int64_t nblk = (K + bs - 1) / bs;
    qout o = {calloc((size_t)(N * nblk * bs * bits / 8), 1), calloc((size_t)(N * ((nblk * bits + 7) / 8)), 1),
              calloc((size_t)(N * nblk), sizeof(float))};
    assert_non_null(o.q), assert_non_null(o.zp), assert_non_null(o.sc);
    return o;
}

static void free_out(qout *o) { free(o->q), free(o->zp), free(o->sc); }

/* The dequantized weight [K, N] of o (MatMulNBits layout; zp NULL: symmetric). */
static void dequant(const qout *o, int64_t K, int64_t N, int64_t bs, int bits, int sym, float *wd) {
    int64_t nblk = (K + bs - 1) / bs, blob = bs * bits / 8, zc = (nblk * bits + 7) / 8;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            int64_t kb = k / bs, r = k % bs;
            const uint8_t *b = o->q + (n * nblk + kb) * blob;
            int c = bits == 8 ? b[r] : (r % 2 ? b[r / 2] >> 4 : b[r / 2] & 15);
            int z = 1 << (bits - 1);
            if (!sym) {
                uint8_t zb = o->zp[n * zc + kb * bits / 8];
                z = bits == 8 ? zb : (kb % 2 ? zb >> 4 : zb & 15);
            }
            wd[k * N + n] = o->sc[n * nblk + kb] * (float)(c - z);
        }
}

/* ||X (W - Wd)||^2 over the rows of X [T, K]. */
static double out_err(const float *X, int64_t T, const float *W, const float *Wd, int64_t K, int64_t N) {
    double e = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double d = 0;
            for (int64_t k = 0; k < K; k++) d += (double)X[t * K + k] * ((double)W[k * N + n] - Wd[k * N + n]);
            e += d * d;
        }
    return e;
}

static double *gram(const float *X, int64_t T, int64_t K) {
    double *H = calloc((size_t)(K * K), sizeof *H);
    assert_non_null(H);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++) H[i * K + j] += (double)X[t * K + i] * X[t * K + j];
    return H;
}

/* H = c I: no error moves (U diagonal), so GPTQ's codes, scales and zero points are RTN's, bit for bit; the
 * padding rows of a last partial block hold the zero point as RTN's do. */
static void test_identity_is_rtn(void **s) {
    (void)s;
    const int64_t K = 72, N = 9, bs = 32; /* 3 blocks, the last partial */
    float *w = malloc(K * N * sizeof *w);
    double *H = calloc(K * K, sizeof *H);
    for (int64_t i = 0; i < K * N; i++) w[i] = frand();
    /* ao 1, act-order: a diagonal H of unequal entries (the rows out of order), still RTN */
    for (int ao = 0; ao < 2; ao++)
        for (int bits = 4; bits <= 8; bits += 4)
            for (int sym = 0; sym < 2; sym++) {
            for (int64_t k = 0; k < K; k++) H[k * K + k] = ao ? 1.0 + (double)(k * 37 % 11) : 3.5;
            qout a = alloc_out(K, N, bs, bits), b = alloc_out(K, N, bs, bits);
            wm_error err = {0};
            assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, ao, bs, bits, sym, WM_DT_FLOAT, a.q, a.sc,
                                           sym ? NULL : a.zp, &err), WM_OK);
            wm_quant_blocks(w, K, N, bs, bits, sym, b.q, b.sc, sym ? NULL : b.zp);
            int64_t nblk = (K + bs - 1) / bs;
            assert_memory_equal(a.q, b.q, (size_t)(N * nblk * bs * bits / 8));
            assert_memory_equal(a.sc, b.sc, (size_t)(N * nblk) * sizeof(float));
            if (!sym) assert_memory_equal(a.zp, b.zp, (size_t)(N * ((nblk * bits + 7) / 8)));
            free_out(&a), free_out(&b);
            }
    free(w), free(H);
}

/* Correlated inputs (each a mix of a few shared factors plus noise, some channels 10x larger): GPTQ's output
 * error on those inputs is well below RTN's, at 4 and at 8 bits; with dead inputs (columns of X all zero) too. */
static void test_lower_output_error_than_rtn(void **s) {
    (void)s;
    const int64_t T = 384, K = 200, N = 24, bs = 16; /* K past a lazy batch of 128 rows */
    float *X = malloc(T * K * sizeof *X), *w = malloc(K * N * sizeof *w), *wd = malloc(K * N * sizeof *wd);
    for (int dead = 0; dead < 2; dead++) {
        for (int64_t t = 0; t < T; t++) {
            float f[4] = {frand(), frand(), frand(), frand()};
            for (int64_t k = 0; k < K; k++) {
                float v = f[k % 4] + 0.3f * f[(k + 1) % 4] + 0.2f * frand();
                X[t * K + k] = dead && k % 7 == 3 ? 0.0f : k % 13 == 0 ? 10.0f * v : v;
            }
        }
        for (int64_t i = 0; i < K * N; i++) w[i] = frand() * 0.1f;
        double *H = gram(X, T, K);
        for (int bits = 4, ao = 0; bits <= 8; bits += 4 * ao, ao = !ao) { /* 4 and 8 bits, in order and act-order */
            qout a = alloc_out(K, N, bs, bits), b = alloc_out(K, N, bs, bits);
            wm_error err = {0};
            assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, ao, bs, bits, 0, WM_DT_FLOAT, a.q, a.sc, a.zp, &err), WM_OK);
            wm_quant_blocks(w, K, N, bs, bits, 0, b.q, b.sc, b.zp);
            dequant(&a, K, N, bs, bits, 0, wd);
            for (int64_t i = 0; i < K * N; i++) assert_true(isfinite(wd[i]));
            double eg = out_err(X, T, w, wd, K, N);
            dequant(&b, K, N, bs, bits, 0, wd);
            double er = out_err(X, T, w, wd, K, N);
            print_message("dead %d bits %d act-order %d: output error GPTQ %.4g, RTN %.4g\n", dead, bits, ao, eg, er);
            assert_true(eg < 0.7 * er);
            free_out(&a), free_out(&b);
        }
        free(H);
    }
    free(X), free(w), free(wd);
}

/* wm_quant_gptq_given: the scales and zero points given (here a search's, scaled by 1.1 so they are not RTN's) are
 * kept as they are; with H = c I the codes are the nearest for them (RTN's rounding with those parameters); on
 * correlated inputs the output error is below that rounding's, in order and act-order. */
static void test_given_parameters(void **s) {
    (void)s;
    const int64_t T = 256, K = 96, N = 8, bs = 32, nblk = 3;
    float *X = malloc(T * K * sizeof *X), *w = malloc(K * N * sizeof *w), *wd = malloc(K * N * sizeof *wd);
    for (int64_t t = 0; t < T; t++) {
        float f[3] = {frand(), frand(), frand()};
        for (int64_t k = 0; k < K; k++) X[t * K + k] = f[k % 3] + 0.5f * f[(k + 1) % 3] + 0.2f * frand();
    }
    for (int64_t i = 0; i < K * N; i++) w[i] = frand();
    double *H = gram(X, T, K), *I = calloc(K * K, sizeof *I);
    for (int64_t k = 0; k < K; k++) I[k * K + k] = 2.0;
    qout p = alloc_out(K, N, bs, 4);
    wm_quant_blocks_search(w, K, N, bs, 4, 0, p.q, p.sc, p.zp);
    for (int64_t i = 0; i < N * nblk; i++) p.sc[i] *= 1.1f;
    /* the nearest codes for the given parameters, clamped: the reference for H = c I */
    qout r = alloc_out(K, N, bs, 4);
    memcpy(r.sc, p.sc, (size_t)(N * nblk) * sizeof(float)), memcpy(r.zp, p.zp, (size_t)(N * ((nblk * 4 + 7) / 8)));
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            int64_t kb = k / bs;
            uint8_t zb = p.zp[n * ((nblk * 4 + 7) / 8) + kb / 2];
            int z = kb % 2 ? zb >> 4 : zb & 15, c = (int)lrintf(w[k * N + n] / p.sc[n * nblk + kb]) + z;
            c = c < 0 ? 0 : c > 15 ? 15 : c;
            uint8_t *b = r.q + (n * nblk + kb) * (bs / 2) + (k % bs) / 2;
            *b = (uint8_t)(k % 2 ? (*b & 15) | (c << 4) : (*b & 0xf0) | c);
        }
    dequant(&r, K, N, bs, 4, 0, wd);
    double er = out_err(X, T, w, wd, K, N);
    for (int ao = 0; ao < 2; ao++) {
        qout a = alloc_out(K, N, bs, 4);
        wm_error err = {0};
        assert_int_equal(wm_quant_gptq_given(w, K, N, I, 0.01, ao, bs, 4, a.q, p.sc, p.zp, &err), WM_OK);
        assert_memory_equal(a.q, r.q, (size_t)(N * nblk * bs / 2));
        assert_int_equal(wm_quant_gptq_given(w, K, N, H, 0.01, ao, bs, 4, a.q, p.sc, p.zp, &err), WM_OK);
        memcpy(a.sc, p.sc, (size_t)(N * nblk) * sizeof(float)), memcpy(a.zp, p.zp, (size_t)(N * ((nblk * 4 + 7) / 8)));
        dequant(&a, K, N, bs, 4, 0, wd);
        double eg = out_err(X, T, w, wd, K, N);
        print_message("given parameters, act-order %d: output error GPTQ %.4g, nearest codes %.4g\n", ao, eg, er);
        assert_true(eg < 0.7 * er);
        free_out(&a);
    }
    free_out(&p), free_out(&r);
    free(X), free(w), free(wd), free(H), free(I);
}

/* Damping -> large on correlated inputs (issue 31's check on real SmolLM2 matrices, here in small): the updates
 * vanish and GPTQ is RTN again: at damping 1e6 at least 99.9% of the codes equal RTN's and the output error is
 * within 1% of RTN's, in order and act-order; at damping 1 the output error is between GPTQ's at 0.01 and RTN's. */
static void test_large_damping_is_rtn(void **s) {
    (void)s;
    const int64_t T = 256, K = 160, N = 16, bs = 32, nblk = 5;
    float *X = malloc(T * K * sizeof *X), *w = malloc(K * N * sizeof *w), *wd = malloc(K * N * sizeof *wd);
    for (int64_t t = 0; t < T; t++) {
        float f[3] = {frand(), frand(), frand()};
        for (int64_t k = 0; k < K; k++)
            X[t * K + k] = (k % 11 == 0 ? 8.0f : 1.0f) * (f[k % 3] + 0.4f * f[(k + 1) % 3] + 0.2f * frand());
    }
    for (int64_t i = 0; i < K * N; i++) w[i] = frand() * 0.1f;
    double *H = gram(X, T, K);
    qout r = alloc_out(K, N, bs, 4);
    wm_quant_blocks(w, K, N, bs, 4, 0, r.q, r.sc, r.zp);
    dequant(&r, K, N, bs, 4, 0, wd);
    double er = out_err(X, T, w, wd, K, N);
    for (int ao = 0; ao < 2; ao++) {
        double e[3];
        const double damps[3] = {1e6, 1.0, 0.01};
        for (int d = 0; d < 3; d++) {
            qout a = alloc_out(K, N, bs, 4);
            wm_error err = {0};
            assert_int_equal(wm_quant_gptq(w, K, N, H, damps[d], ao, bs, 4, 0, WM_DT_FLOAT, a.q, a.sc, a.zp, &err),
                             WM_OK);
            dequant(&a, K, N, bs, 4, 0, wd);
            e[d] = out_err(X, T, w, wd, K, N);
            if (d == 0) {
                int64_t same = 0;
                for (int64_t i = 0; i < N * nblk * bs / 2; i++) same += (a.q[i] & 15) == (r.q[i] & 15);
                for (int64_t i = 0; i < N * nblk * bs / 2; i++) same += (a.q[i] >> 4) == (r.q[i] >> 4);
                print_message("damping 1e6, act-order %d: %lld of %lld codes RTN's\n", ao, (long long)same,
                              (long long)(N * nblk * bs));
                assert_true(same >= N * nblk * bs * 999 / 1000);
                for (int64_t i = 0; i < N * nblk; i++) assert_float_equal(a.sc[i], r.sc[i], 1e-5f * fabsf(r.sc[i]));
            }
            free_out(&a);
        }
        print_message("act-order %d: output error RTN %.4g, GPTQ damping 1e6 %.4g, 1 %.4g, 0.01 %.4g\n", ao, er, e[0],
                      e[1], e[2]);
        assert_true(fabs(e[0] / er - 1.0) < 0.01);
        assert_true(e[2] < e[1] && e[1] < er);
    }
    free_out(&r);
    free(X), free(w), free(wd), free(H);
}

/* NaN or infinity in the weight or in H: WM_ERR_INPUT naming the element; nothing else is assumed of outputs. */
static void test_refuses_nan_inf(void **s) {
    (void)s;
    const int64_t K = 32, N = 4, bs = 16;
    float w[32 * 4];
    double H[32 * 32] = {0};
    for (int i = 0; i < K * N; i++) w[i] = frand();
    for (int k = 0; k < K; k++) H[k * K + k] = 1.0;
    qout o = alloc_out(K, N, bs, 4);
    wm_error err = {0};
    w[5 * N + 2] = NAN;
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, 0, bs, 4, 0, WM_DT_FLOAT, o.q, o.sc, o.zp, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "[5, 2] is NaN"));
    w[5 * N + 2] = -INFINITY;
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, 0, bs, 4, 0, WM_DT_FLOAT, o.q, o.sc, o.zp, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "[5, 2] is infinite"));
    w[5 * N + 2] = 0.5f;
    H[3 * K + 7] = INFINITY;
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, 0, bs, 4, 0, WM_DT_FLOAT, o.q, o.sc, o.zp, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "[3, 7] are not finite"));
    free_out(&o);
}

/* H not positive definite: a rank-one H (all ones) without damping, and a negative diagonal, are refused naming
 * the damping; the same rank-one H with damping 0.01 is fine. Bad shapes and damping are usage errors. */
static void test_not_positive_definite_and_shapes(void **s) {
    (void)s;
    const int64_t K = 16, N = 3, bs = 16;
    float w[16 * 3];
    double H[16 * 16];
    for (int i = 0; i < K * N; i++) w[i] = frand();
    for (int i = 0; i < K * K; i++) H[i] = 1.0;
    qout o = alloc_out(K, N, bs, 4);
    wm_error err = {0};
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.0, 0, bs, 4, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "not positive definite"));
    assert_non_null(strstr(err.msg, "raise the damping"));
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, 0, bs, 4, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_OK);
    for (int i = 0; i < K * K; i++) H[i] = i % (K + 1) ? 0.0 : -2.0;
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, 0, bs, 4, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, "not positive definite"));
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, -1.0, 0, bs, 4, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_ERR_USAGE);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, NAN, 0, bs, 4, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_ERR_USAGE);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, K, N, H, 0.01, 0, bs, 3, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_ERR_USAGE);
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_gptq(w, 0, N, H, 0.01, 0, bs, 4, 1, WM_DT_FLOAT, o.q, o.sc, NULL, &err), WM_ERR_USAGE);
    free_out(&o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_is_rtn),
        cmocka_unit_test(test_lower_output_error_than_rtn),
        cmocka_unit_test(test_given_parameters),
        cmocka_unit_test(test_large_damping_is_rtn),
        cmocka_unit_test(test_refuses_nan_inf),
        cmocka_unit_test(test_not_positive_definite_and_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
