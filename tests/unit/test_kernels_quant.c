/*
 * Unit tests of the quantized kernels against the naive references: MatMulNBits
 * (2/4/8 bit, every block size 16..256, K not a multiple of the block, packed,
 * float and default zero points, fp32 and int8 activation paths, GEMV and GEMM
 * sizes) and MatMulInteger (u8/s8 x u8/s8, scalar / per-row / per-column zero
 * points, packed B, int32 and float outputs); both tables; nth determinism.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/half.h"
#include "kernels_test_util.h"
#include "kernels/kernels_impl.h"
#include "kernels/igemm_impl.h"
#include "kernels/nbits_impl.h"
#include "ops/quant.h"

typedef struct nb_case {
    int64_t M, N, K;
    int bits, bs, acc, zp; /* zp: 0 default, 1 packed uint8, 2 float */
} nb_case;

static void run_nbits(const wm_kernels *T, const nb_case *c, int nth, uint32_t seed, float **out) {
    int64_t kb = (c->K + c->bs - 1) / c->bs, blob = (int64_t)c->bs * c->bits / 8;
    int64_t lda = c->K + 3, ldc = c->N + 2;
    size_t nb = (size_t)(c->N * kb * blob), nzp = (size_t)(c->N * ((kb * c->bits + 7) / 8));
    uint8_t *B = kt_alloc(nb), *zp = kt_alloc(nzp);
    float *A = kt_alloc(kt_span(c->M, c->K, lda) * 4 + 4), *sc = kt_alloc((size_t)(c->N * kb) * 4);
    float *zf = kt_alloc((size_t)(c->N * kb) * 4), *bias = kt_alloc((size_t)c->N * 4 + 4);
    float *C = kt_alloc((size_t)(c->M * ldc) * 4 + 4), *R = kt_alloc((size_t)(c->M * ldc) * 4 + 4);
    memset(C, 0, (size_t)(c->M * ldc) * 4 + 4);
    uint32_t s = seed;
    for (size_t i = 0; i < nb; i++) B[i] = (uint8_t)kt_next(&s);
    for (size_t i = 0; i < nzp; i++) zp[i] = (uint8_t)kt_next(&s);
    kt_fill(A, (int64_t)kt_span(c->M, c->K, lda), &s);
    for (int64_t i = 0; i < c->N * kb; i++) {
        sc[i] = 0.02f * (1.0f + kt_uniform(&s));
        zf[i] = (float)(1 << (c->bits - 1)) + 2.5f * kt_uniform(&s);
    }
    kt_fill(bias, c->N, &s);
    wm_nbits_args a = {0};
    a.M = c->M;
    a.N = c->N;
    a.K = c->K;
    a.bits = c->bits;
    a.block_size = c->bs;
    a.accuracy_level = c->acc;
    a.A = A;
    a.lda = lda;
    a.B = B;
    a.scales = sc;
    uint16_t *sh = NULL;
    if (T->nbits_half_scales && ((c->M + c->N) & 1)) { /* on some shapes: scales that are exact halves, given both ways */
        sh = kt_alloc((size_t)(c->N * kb) * 2 + 2);
        for (int64_t i = 0; i < c->N * kb; i++) sc[i] = wm_f16_to_f32(sh[i] = wm_f32_to_f16(sc[i]));
        a.scales_h = sh;
    }
    a.zero_points = c->zp == 1 ? zp : NULL;
    a.zero_points_f = c->zp == 2 ? zf : NULL;
    a.C = C;
    a.ldc = ldc;
    a.ep.bias = bias;
    size_t ws = wm_nbits_workspace_size(&a, nth);
    a.work = ws ? kt_alloc(ws) : NULL;
    for (int i = 0; i < nth; i++) T->nbits_gemm(&a, i, nth);
    size_t pks = T->nbits_pack_size ? T->nbits_pack_size(&a) : 0;
    if (pks) { /* the packed layout gives the same bits as the plain one, and reads neither B nor the scales */
        uint8_t *pk = aligned_alloc(64, (pks + 63) / 64 * 64);
        float *C2 = kt_alloc((size_t)(c->M * ldc) * 4 + 4);
        if (!pk) abort();
        memcpy(C2, C, (size_t)(c->M * ldc) * 4 + 4);
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t n = 0; n < c->N; n++) C2[m * ldc + n] = -1.0f;
        for (int i = nth - 1; i >= 0; i--) T->nbits_pack(&a, pk, i, nth); /* shares in any order */
        wm_nbits_args p = a;
        p.packed = pk, p.B = NULL, p.scales = NULL, p.C = C2;
        for (int i = 0; i < nth; i++) T->nbits_gemm(&p, i, nth);
        if (memcmp(C, C2, (size_t)(c->M * ldc) * 4 + 4) != 0)
            fail_msg("%s nbits packed M=%lld N=%lld K=%lld bs=%d nth=%d: differs from the plain layout", T->name,
                     (long long)c->M, (long long)c->N, (long long)c->K, c->bs, nth);
        if (c->M > 0 && (c->M <= 4 || T->nbits_q8(&a))) { /* and with A prepared once, in two row ranges */
            for (int64_t m = 0; m < c->M; m++)
                for (int64_t n = 0; n < c->N; n++) C2[m * ldc + n] = -1.0f;
            size_t ws1 = wm_nbits_workspace_size(&a, 1);
            void *w1 = kt_alloc(ws1 ? ws1 : 1);
            memset(w1, 0xff, ws1);
            p.work = w1, p.shared_prep = 1;
            p.prep_m0 = c->M / 2, p.prep_m1 = c->M;
            T->nbits_gemm(&p, -1, nth + 1);
            p.prep_m0 = 0, p.prep_m1 = c->M / 2;
            if (p.prep_m1 > 0) T->nbits_gemm(&p, -1, nth + 1);
            for (int i = nth; i >= 0; i--) T->nbits_gemm(&p, i, nth + 1);
            if (memcmp(C, C2, (size_t)(c->M * ldc) * 4 + 4) != 0)
                fail_msg("%s nbits packed shared_prep M=%lld N=%lld K=%lld bs=%d: differs from the plain layout",
                         T->name, (long long)c->M, (long long)c->N, (long long)c->K, c->bs);
            free(w1);
        }
        free(pk);
        free(C2);
    }
    if (c->M > 0 && ws && (c->M <= 4 || T->nbits_q8(&a))) { /* A prepared once by ith = -1 for every share (decode,
                                                                and prefill on int8 activations): the same bits */
        float *C3 = kt_alloc((size_t)(c->M * ldc) * 4 + 4);
        memcpy(C3, C, (size_t)(c->M * ldc) * 4 + 4);
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t n = 0; n < c->N; n++) C3[m * ldc + n] = -1.0f;
        memset(a.work, 0xff, ws); /* nothing left from the runs above */
        wm_nbits_args p = a;
        p.C = C3, p.shared_prep = 1;
        T->nbits_gemm(&p, -1, nth + 2);
        for (int i = nth + 1; i >= 0; i--) T->nbits_gemm(&p, i, nth + 2); /* more shares, any order */
        if (memcmp(C, C3, (size_t)(c->M * ldc) * 4 + 4) != 0)
            fail_msg("%s nbits shared_prep M=%lld N=%lld K=%lld bs=%d nth=%d: differs from per-share preparation",
                     T->name, (long long)c->M, (long long)c->N, (long long)c->K, c->bs, nth + 2);
        /* the same preparation in row ranges (prefill: the threads each take some rows), last range first, into a
           workspace of one slice (what shared_prep needs) */
        size_t ws1 = wm_nbits_workspace_size(&a, 1);
        void *w1 = kt_alloc(ws1 ? ws1 : 1);
        memset(w1, 0xff, ws1);
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t n = 0; n < c->N; n++) C3[m * ldc + n] = -1.0f;
        p.work = w1;
        int64_t cut = c->M / 3;
        p.prep_m0 = cut, p.prep_m1 = c->M;
        T->nbits_gemm(&p, -1, nth + 2);
        if (cut > 0) {
            p.prep_m0 = 0, p.prep_m1 = cut;
            T->nbits_gemm(&p, -1, nth + 2);
        }
        for (int i = 0; i < nth + 2; i++) T->nbits_gemm(&p, i, nth + 2);
        if (memcmp(C, C3, (size_t)(c->M * ldc) * 4 + 4) != 0)
            fail_msg("%s nbits shared_prep by rows M=%lld N=%lld K=%lld bs=%d: differs from per-share preparation",
                     T->name, (long long)c->M, (long long)c->N, (long long)c->K, c->bs);
        free(w1);
        free(C3);
    }
    wm_nbits_args r = a;
    r.C = R;
    int q8 = T->nbits_q8(&a); /* accuracy_level 4: int8 activations where the table's kernel uses them */
    if (c->acc == 4 && c->M < WM_NBITS_Q8_MAX_M && !q8) /* every zero point kind, float ones too (llama.cpp's Q4_1) */
        fail_msg("%s nbits M=%lld acc=4 zp=%d: not the int8 path", T->name, (long long)c->M, c->zp);
    int i15 = !q8 && wm_nbits_use_i15(&a); /* other levels, small M: 15-bit activations (every table) */
    if (((c->acc == 2 || c->acc == 3) && c->M < WM_NBITS_BIG_M && c->bs <= 256 &&
         (c->bits == 8 || (c->bits == 4 && c->bs % 32 == 0))) != i15)
        fail_msg("%s nbits M=%lld bits=%d bs=%d acc=%d: i15 %d", T->name, (long long)c->M, c->bits, c->bs, c->acc, i15);
    if (q8) wm_ref_nbits_q8(&r);
    else if (i15) wm_ref_nbits_i15(&r);
    else wm_ref_nbits(&r);
    float *D = NULL; /* i15: the fp32 semantics too, in double */
    if (i15) {
        D = kt_alloc((size_t)(c->M * ldc) * 4 + 4);
        wm_nbits_args d = a;
        d.C = D;
        wm_ref_nbits(&d);
    }
    /* bound: |x| < 1, |w| <= 255 * 0.04 * 2; float accumulation over K */
    double wmax = (double)(1 << c->bits) * 0.04 + 0.1;
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            double d = fabs((double)C[m * ldc + n] - R[m * ldc + n]);
            double bound = (double)(c->K + 8) * 2.4e-7 * wmax * (double)c->K * (q8 ? 2 : 1) / 4 + 1e-5;
            if (!(d <= bound))
                fail_msg("%s nbits M=%lld N=%lld K=%lld bits=%d bs=%d acc=%d zp=%d nth=%d: C[%lld,%lld] %.7g ref %.7g",
                         T->name, (long long)c->M, (long long)c->N, (long long)c->K, c->bits, c->bs, c->acc, c->zp, nth,
                         (long long)m, (long long)n, C[m * ldc + n], R[m * ldc + n]);
            /* against float activations: each |x - v s| <= s / 2 = amax / 32766 (|x| < 1), times |w|, over K
             * (int8's rounding would be 129 times this) */
            if (D && !(fabs((double)C[m * ldc + n] - D[m * ldc + n]) <= bound + (double)c->K * wmax / 32766.0))
                fail_msg("%s nbits i15 M=%lld N=%lld K=%lld bits=%d bs=%d zp=%d: C[%lld,%lld] %.7g fp32 ref %.7g", T->name,
                         (long long)c->M, (long long)c->N, (long long)c->K, c->bits, c->bs, c->zp, (long long)m,
                         (long long)n, C[m * ldc + n], D[m * ldc + n]);
        }
    free(D);
    free(sh);
    free(B);
    free(zp);
    free(A);
    free(sc);
    free(zf);
    free(bias);
    free(R);
    free(a.work);
    if (out) *out = C;
    else free(C);
}

static void test_nbits(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int bss[] = {16, 32, 64, 128, 256};
    static const int64_t mk[][3] = {{1, 37, 100}, {2, 19, 300}, {3, 17, 64}, {5, 33, 257}, {9, 21, 130}, {1, 16, 16}, {40, 29, 150}, {37, 11, 700}, {1, 13, 896}, {6, 10, 1056}};
    uint32_t seed = 1;
    for (int t = 0; t < nt; t++)
        for (int bits = 2; bits <= 8; bits *= 2)
            for (size_t b = 0; b < sizeof bss / sizeof bss[0]; b++)
                for (size_t d = 0; d < sizeof mk / sizeof mk[0]; d++)
                    for (int v = 0; v < 6; v++) {
                        /* accuracy_level 4, else 0 or 2 (15-bit activations) by pairs of shapes */
                        nb_case c = {mk[d][0], mk[d][1], mk[d][2], bits, bss[b], (v & 1) ? 4 : (d / 2) % 2 ? 2 : 0, v >> 1};
                        if (bits == 2 && v > 1) continue;
                        if (t == 0 && (v + (int)d) % 2) continue; /* the generic table: half the grid */
                        run_nbits(T[t], &c, 1 + (int)(d % 3), seed++, NULL);
                    }
}

static void test_nbits_edges_and_determinism(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    for (int t = 0; t < nt; t++) {
        nb_case z[] = {{0, 5, 32, 4, 32, 0, 0}, {3, 0, 32, 4, 32, 4, 0}, {2, 3, 1, 4, 16, 4, 1}, {1, 3, 1, 8, 16, 0, 1}};
        for (size_t i = 0; i < sizeof z / sizeof z[0]; i++) run_nbits(T[t], &z[i], 2, 5, NULL);
        nb_case c[] = {{1, 301, 200, 4, 32, 0, 1}, {1, 301, 200, 4, 32, 4, 1}, {2, 97, 96, 8, 16, 4, 0}, {20, 50, 100, 4, 64, 4, 1}};
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
            float *r1, *r;
            run_nbits(T[t], &c[i], 1, 9, &r1);
            for (int nth = 2; nth <= 5; nth += 3) {
                run_nbits(T[t], &c[i], nth, 9, &r);
                if (memcmp(r, r1, (size_t)(c[i].M * (c[i].N + 2)) * 4) != 0) fail_msg("%s nbits case %zu: nth=%d differs from nth=1", T[t]->name, i, nth);
                free(r);
            }
            free(r1);
        }
    }
}

/* The 15-bit activations' error on a decoder-like product (K 576, activations uniform or with a few 40x channels,
 * Q4_1-like float zero points, Q8_0-like 8-bit codes), relative RMS against double-precision float math: 1e-5 to
 * 1e-4, about 1/100 of the int8 path's (accuracy_level 4; 127 / 16383 in theory). */
static void test_nbits_i15_error(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    enum { M = 1, N = 96, K = 576, BS = 32, KB = K / BS };
    uint32_t s = 77;
    float *A = kt_alloc(K * 4), *sc = kt_alloc(N * KB * 4), *zf = kt_alloc(N * KB * 4);
    float *C = kt_alloc(N * 4), *D = kt_alloc(N * 4);
    uint8_t *B = kt_alloc(N * K);
    for (int i = 0; i < N * K; i++) B[i] = (uint8_t)kt_next(&s);
    for (int i = 0; i < N * KB; i++) {
        sc[i] = 0.01f * (1.0f + 0.5f * kt_uniform(&s));
        zf[i] = 8.0f + 3.0f * kt_uniform(&s);
    }
    for (int outl = 0; outl < 2; outl++) /* accuracy_level 2 (15 bits), 4 (int8), 0 (float32) */
    for (int bits = 4; bits <= 8; bits += 4)
        for (int t = 0; t < nt; t++) {
            kt_fill(A, K, &s);
            if (outl)
                for (int k = 0; k < K; k += 97) A[k] *= 40.0f; /* outlier channels: their blocks' values coarser */
            double err[3];
            for (int acc = 0; acc <= 4; acc += 2) {
                wm_nbits_args a = {0};
                a.M = M, a.N = N, a.K = K, a.bits = bits, a.block_size = BS, a.accuracy_level = acc;
                a.A = A, a.lda = K, a.B = B, a.scales = sc, a.zero_points_f = bits == 4 ? zf : NULL;
                a.C = C, a.ldc = N;
                a.work = kt_alloc(wm_nbits_workspace_size(&a, 1));
                assert_true(wm_nbits_use_i15(&a) == (acc == 2));
                T[t]->nbits_gemm(&a, 0, 1);
                wm_nbits_args d = a;
                d.C = D;
                wm_ref_nbits(&d);
                double e2 = 0, r2 = 0;
                for (int n = 0; n < N; n++) {
                    e2 += ((double)C[n] - D[n]) * ((double)C[n] - D[n]);
                    r2 += (double)D[n] * D[n];
                }
                err[acc / 2] = sqrt(e2 / r2);
                free(a.work);
            }
            print_message("%s nbits %d-bit K=%d%s: relative RMS error vs double: 15-bit %.2e, int8 %.2e, float32 %.2e\n",
                          T[t]->name, bits, K, outl ? " (outliers)" : "", err[1], err[2], err[0]);
            if (!(err[1] < (outl ? 2e-4 : 5e-5) && err[1] * 60 < err[2] && err[0] < 1e-6))
                fail_msg("%s nbits %d-bit: 15-bit error %.3g (int8 %.3g, float32 %.3g)", T[t]->name, bits, err[1], err[2], err[0]);
        }
    free(A);
    free(sc);
    free(zf);
    free(C);
    free(D);
    free(B);
}

/* 8-bit codes from WM_NBITS_BIG_M rows on (float activations: dequantized panels + the SGEMM micro-kernel): the
 * same bits as the table's own SGEMM over the reference's dequantized weights (the same two roundings per weight,
 * (code - zp) * s, and the same panels), so a single wrong weight of the AVX2 packer (8 columns x 8 k through a
 * transpose; panel edges, k-blocks across code blocks, K tails) shows. Every zero-point kind, blocks 16..256, one
 * to three shares. The AVX-512 table runs its B panels through the AVX2 micro-kernel, not its own SGEMM's: the
 * reference bound of test_nbits covers it. */
static void test_nbits_b8_big_exact(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t mnk[][3] = {{8, 16, 64}, {40, 37, 100}, {70, 60, 520}, {9, 21, 1000}, {64, 8, 48}};
    static const int bss[] = {16, 32, 64, 128, 256};
    uint32_t s = 1234;
    for (int t = 0; t < nt; t++) {
        if (strcmp(T[t]->name, "generic") && strcmp(T[t]->name, "avx2")) continue;
        for (size_t d = 0; d < sizeof mnk / sizeof mnk[0]; d++)
            for (size_t b = 0; b < sizeof bss / sizeof bss[0]; b++) {
                int64_t M = mnk[d][0], N = mnk[d][1], K = mnk[d][2], bs = bss[b], kb = (K + bs - 1) / bs;
                int zmode = (int)((d + b) % 3), nth = 1 + (int)((d + b) % 3);
                uint8_t *B = kt_alloc((size_t)(N * kb * bs)), *zp = kt_alloc((size_t)(N * kb));
                float *A = kt_alloc((size_t)(M * K) * 4), *sc = kt_alloc((size_t)(N * kb) * 4), *zf = kt_alloc((size_t)(N * kb) * 4);
                float *W = kt_alloc((size_t)(K * N) * 4), *C = kt_alloc((size_t)(M * N) * 4), *R = kt_alloc((size_t)(M * N) * 4);
                for (int64_t i = 0; i < N * kb * bs; i++) B[i] = (uint8_t)kt_next(&s);
                for (int64_t i = 0; i < N * kb; i++) {
                    zp[i] = (uint8_t)kt_next(&s);
                    sc[i] = 0.01f * (1.0f + kt_uniform(&s));
                    zf[i] = 128.0f + 3.3f * kt_uniform(&s);
                }
                kt_fill(A, M * K, &s);
                wm_nbits_args a = {0};
                a.M = M, a.N = N, a.K = K, a.bits = 8, a.block_size = (int)bs, a.A = A, a.lda = K, a.B = B, a.scales = sc;
                a.zero_points = zmode == 1 ? zp : NULL;
                a.zero_points_f = zmode == 2 ? zf : NULL;
                a.C = C, a.ldc = N;
                a.work = kt_alloc(wm_nbits_workspace_size(&a, nth));
                for (int i = nth - 1; i >= 0; i--) T[t]->nbits_gemm(&a, i, nth);
                wm_ref_nbits_dequant(&a, W);
                wm_sgemm_args g = {0};
                g.M = M, g.N = N, g.K = K, g.alpha = 1.0f, g.A = A, g.lda = K, g.B = W, g.ldb = N, g.C = R, g.ldc = N;
                g.work = kt_alloc(wm_sgemm_workspace_size(&g, nth));
                for (int i = 0; i < nth; i++) T[t]->sgemm(&g, i, nth);
                for (int64_t i = 0; i < M * N; i++)
                    if (memcmp(&C[i], &R[i], 4))
                        fail_msg("%s nbits 8-bit M=%lld N=%lld K=%lld bs=%lld zp=%d nth=%d: C[%lld,%lld] %.9g, SGEMM on the "
                                 "reference's weights %.9g", T[t]->name, (long long)M, (long long)N, (long long)K,
                                 (long long)bs, zmode, nth, (long long)(i / N), (long long)(i % N), C[i], R[i]);
                free(B), free(zp), free(A), free(sc), free(zf), free(W), free(C), free(R), free(a.work), free(g.work);
            }
    }
}

/* 8-bit codes at accuracy_level 4 with the scales also given as halves (all exact: the session keeps them so for
 * the tables that read them, wm_nbits_half_kernel; int8 activations below WM_NBITS_Q8_MAX_M rows read the halves,
 * 2 bytes a block): the same bits as without them, at decode and prefill row counts on either side of
 * WM_NBITS_BIG_M and WM_NBITS_Q8_MAX_M, odd N and K tails, every zero-point kind, blocks 32 and 64; and within the
 * int8 reference's bound (float reference from 32 rows on). */
static void test_nbits_b8_half_scales(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t ms[] = {1, 7, 8, 31, 32, 70};
    static const int64_t nk[][2] = {{37, 100}, {21, 1000}, {16, 256}};
    uint32_t s = 4321;
    int ran = 0;
    for (int t = 0; t < nt; t++) {
        if (!T[t]->nbits_half_scales) continue;
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (size_t d = 0; d < sizeof nk / sizeof nk[0]; d++)
                for (int bs = 32; bs <= 64; bs *= 2) {
                    int64_t M = ms[mi], N = nk[d][0], K = nk[d][1], kb = (K + bs - 1) / bs;
                    int zmode = (int)((mi + d + (size_t)bs / 32) % 3), nth = 1 + (int)((mi + d) % 3);
                    uint8_t *B = kt_alloc((size_t)(N * kb * bs)), *zp = kt_alloc((size_t)(N * kb));
                    float *A = kt_alloc((size_t)(M * K) * 4), *sc = kt_alloc((size_t)(N * kb) * 4);
                    float *zf = kt_alloc((size_t)(N * kb) * 4), *C0 = kt_alloc((size_t)(M * N) * 4);
                    float *C1 = kt_alloc((size_t)(M * N) * 4), *R = kt_alloc((size_t)(M * N) * 4);
                    uint16_t *sh = kt_alloc((size_t)(N * kb) * 2);
                    for (int64_t i = 0; i < N * kb * bs; i++) B[i] = (uint8_t)kt_next(&s);
                    for (int64_t i = 0; i < N * kb; i++) {
                        zp[i] = (uint8_t)kt_next(&s);
                        sc[i] = wm_f16_to_f32(sh[i] = wm_f32_to_f16(0.01f * (1.0f + kt_uniform(&s))));
                        zf[i] = 128.0f + 3.3f * kt_uniform(&s);
                    }
                    kt_fill(A, M * K, &s);
                    wm_nbits_args a = {0};
                    a.M = M, a.N = N, a.K = K, a.bits = 8, a.block_size = bs, a.accuracy_level = 4;
                    a.A = A, a.lda = K, a.B = B, a.scales = sc, a.ldc = N;
                    a.zero_points = zmode == 1 ? zp : NULL;
                    a.zero_points_f = zmode == 2 ? zf : NULL;
                    a.work = kt_alloc(wm_nbits_workspace_size(&a, nth));
                    a.C = C0;
                    for (int i = nth - 1; i >= 0; i--) T[t]->nbits_gemm(&a, i, nth);
                    a.C = C1, a.scales_h = sh;
                    for (int i = 0; i < nth; i++) T[t]->nbits_gemm(&a, i, nth);
                    wm_nbits_args r = a;
                    r.C = R;
                    int q8 = T[t]->nbits_q8(&a);
                    if (q8 != (M < WM_NBITS_Q8_MAX_M)) fail_msg("%s nbits 8-bit M=%lld: int8 path %d", T[t]->name, (long long)M, q8);
                    if (q8) wm_ref_nbits_q8(&r);
                    else wm_ref_nbits(&r);
                    double wmax = 256 * 0.04 + 0.1, bound = (double)(K + 8) * 2.4e-7 * wmax * (double)K * (q8 ? 2 : 1) / 4 + 1e-5;
                    for (int64_t i = 0; i < M * N; i++) {
                        if (memcmp(&C0[i], &C1[i], 4))
                            fail_msg("%s nbits 8-bit M=%lld N=%lld K=%lld bs=%d zp=%d: C[%lld,%lld] %.9g with halves, %.9g "
                                     "without", T[t]->name, (long long)M, (long long)N, (long long)K, bs, zmode,
                                     (long long)(i / N), (long long)(i % N), C1[i], C0[i]);
                        if (!(fabs((double)C1[i] - R[i]) <= bound))
                            fail_msg("%s nbits 8-bit M=%lld N=%lld K=%lld bs=%d zp=%d: C[%lld,%lld] %.7g ref %.7g", T[t]->name,
                                     (long long)M, (long long)N, (long long)K, bs, zmode, (long long)(i / N),
                                     (long long)(i % N), C1[i], R[i]);
                    }
                    ran++;
                    free(B), free(zp), free(A), free(sc), free(zf), free(C0), free(C1), free(R), free(sh), free(a.work);
                }
    }
    if (wm_kernels_get()->nbits_half_scales && !ran) fail_msg("no table that reads halves ran");
}

/* The dequantization convention itself, by hand: nibble order, zero-point packing, default zero point. */
static void test_nbits_layout(void **state) {
    (void)state;
    uint8_t B[2 * 1 * 8] = {0x21, 0x43, 0, 0, 0, 0, 0, 0xf0, /* column 0: codes 1,2,3,4,0...,0,15 */
                            0x10, 0, 0, 0, 0, 0, 0, 0};       /* column 1: codes 0,1,0... */
    float sc[2] = {0.5f, 2.0f};
    uint8_t zp[2] = {0x03, 0x0f}; /* column 0 zp 3, column 1 zp 15 */
    wm_nbits_args a = {0};
    a.N = 2;
    a.K = 16;
    a.bits = 4;
    a.block_size = 16;
    a.B = B;
    a.scales = sc;
    a.zero_points = zp;
    float W[16 * 2];
    wm_ref_nbits_dequant(&a, W);
    assert_true(W[0 * 2 + 0] == (1 - 3) * 0.5f);
    assert_true(W[1 * 2 + 0] == (2 - 3) * 0.5f);
    assert_true(W[3 * 2 + 0] == (4 - 3) * 0.5f);
    assert_true(W[15 * 2 + 0] == (15 - 3) * 0.5f);
    assert_true(W[14 * 2 + 0] == (0 - 3) * 0.5f);
    assert_true(W[1 * 2 + 1] == (1 - 15) * 2.0f);
    a.zero_points = NULL;
    wm_ref_nbits_dequant(&a, W);
    assert_true(W[0] == (1 - 8) * 0.5f);
}

/* The packed block-32 layout read back by its description (nbits_impl.h), independently of the packers: every code
 * nibble and scale of the plain layout where the description puts it, zeros in the padding columns; the portable
 * packer (the AVX2 table's) writes the same bytes as the AVX-512 table's, whose full super-groups go through permutes. */
static void test_nbits_pack_sg32(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{37, 896}, {5, 300}, {16, 1056}, {3, 32}, {9, 520}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int halves = 0; halves < 2; halves++) {
            int64_t N = shapes[si][0], K = shapes[si][1], kb = (K + 31) / 32, es = halves ? 2 : 4;
            uint8_t *B = kt_alloc((size_t)(N * kb * 16));
            float *sc = kt_alloc((size_t)(N * kb) * 4);
            uint16_t *sh = kt_alloc((size_t)(N * kb) * 2 + 2);
            uint32_t s = (uint32_t)(7 + si * 2 + (size_t)halves);
            for (int64_t i = 0; i < N * kb * 16; i++) B[i] = (uint8_t)kt_next(&s);
            for (int64_t i = 0; i < N * kb; i++) sc[i] = wm_f16_to_f32(sh[i] = wm_f32_to_f16(0.01f + kt_uniform(&s)));
            wm_nbits_args a = {0};
            a.N = N, a.K = K, a.bits = 4, a.block_size = 32, a.accuracy_level = 4, a.B = B, a.scales = sc;
            a.scales_h = halves ? sh : NULL;
            size_t size = wm_nbits_pack_size_sg32(&a);
            assert_true(size == (size_t)(WM_NBITS_PK_HEAD + (N + 3) / 4 * wm_nbits_pk_qstride(kb, es)));
            uint8_t *pk = kt_alloc(size);
            memset(pk, 0xa5, size);
            for (int i = 2; i >= 0; i--) wm_nbits_pack_sg32(&a, pk, i, 3);
            assert_true(pk[0] == es);
            for (int64_t n = 0; n < (N + 3) / 4 * 4; n++)
                for (int64_t b = 0; b < kb; b++) {
                    int64_t g = b / 16, nb = kb - 16 * g < 16 ? kb - 16 * g : 16, l = b % 16, j = n % 4;
                    const uint8_t *q = pk + WM_NBITS_PK_HEAD + (n / 4) * wm_nbits_pk_qstride(kb, es) + g * 16 * (64 + 4 * es);
                    for (int e = 0; e < 32; e++) { /* element e: dword e / 8, byte (e % 8) / 2, nibble e % 2 */
                        int code = (q[(4 * j + e / 8) * 4 * nb + 4 * l + (e % 8) / 2] >> (4 * (e % 2))) & 15;
                        int want = n < N ? (B[(n * kb + b) * 16 + e / 2] >> (4 * (e % 2))) & 15 : 0;
                        if (code != want) fail_msg("N=%lld K=%lld column %lld block %lld element %d: code %d, want %d", (long long)N, (long long)K, (long long)n, (long long)b, e, code, want);
                    }
                    const uint8_t *sp = q + 64 * nb + j * es * nb + es * l;
                    float v;
                    if (es == 2) {
                        uint16_t h;
                        memcpy(&h, sp, 2);
                        v = wm_f16_to_f32(h);
                    } else {
                        memcpy(&v, sp, 4);
                    }
                    assert_true(v == (n < N ? sc[n * kb + b] : 0.0f));
                }
            const wm_kernels *x = wm_kernels_avx512();
            if (x && x->nbits_pack) {
                uint8_t *p2 = kt_alloc(size);
                memset(p2, 0x5a, size);
                for (int i = 0; i < 2; i++) x->nbits_pack(&a, p2, i, 2);
                if (memcmp(pk, p2, size) != 0) fail_msg("N=%lld K=%lld es=%lld: the AVX-512 packer's bytes differ", (long long)N, (long long)K, (long long)es);
                free(p2);
            }
            free(B), free(sc), free(sh), free(pk);
        }
}

/* ------------------------------------------------------------ MatMulInteger */

/* extreme: 0 random bytes; 1 A's bytes 0 or 255 and B's -128 or 127 (as unsigned: 0 or 255), pairs of one sign
   (every pair of B past vpmaddubsw's int16 range: AVX2 splits them all); 2 those extremes mixed with random bytes
   (some 4-k groups with a residual pass, some without) */
static void run_igemm_x(const wm_kernels *T, int64_t M, int64_t N, int64_t K, int as, int bs, int zmode, int packed,
                        int nth, uint32_t seed, int extreme, int32_t **out) {
    int64_t lda = K + 1, ldb = N + 2, ldc = N + 1;
    size_t sa = kt_span(M, K, lda), sb = kt_span(K, N, ldb);
    uint8_t *A = kt_alloc(sa), *B = kt_alloc(sb);
    int32_t *C = kt_alloc((size_t)(M * ldc) * 4 + 4), *R = kt_alloc((size_t)(M * ldc) * 4 + 4);
    float *Cf = kt_alloc((size_t)(M * ldc) * 4 + 4), *Rf = kt_alloc((size_t)(M * ldc) * 4 + 4);
    memset(C, 0, (size_t)(M * ldc) * 4 + 4);
    int32_t *zr = kt_alloc((size_t)M * 4 + 4), *zc = kt_alloc((size_t)N * 4 + 4);
    float *bsc = kt_alloc((size_t)N * 4 + 4), *bias = kt_alloc((size_t)N * 4 + 4);
    uint32_t s = seed;
    for (size_t i = 0; i < sa; i++) A[i] = (uint8_t)kt_next(&s);
    for (size_t i = 0; i < sb; i++) B[i] = (uint8_t)kt_next(&s);
    if (extreme >= 3) { /* signed B within vpmaddubsw's safe pairs, at their edges; 4: one unsafe pair */
        static const int8_t edge[][2] = {{64, 64}, {-64, -64}, {127, 1}, {1, 127}, {-128, 0}, {0, -128}, {127, -128}, {-1, -127}};
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) B[k * ldb + n] = (uint8_t)(int8_t)((int)(kt_next(&s) % 129) - 64);
        for (int64_t k = 0; k + 1 < K; k += 2)
            for (int64_t n = 0; n < N; n++)
                if (kt_next(&s) % 4 == 0) {
                    const int8_t *e = edge[kt_next(&s) % 8];
                    B[k * ldb + n] = (uint8_t)e[0], B[(k + 1) * ldb + n] = (uint8_t)e[1];
                }
        if (extreme == 4 && K >= 2) { /* (127, 2): 255 * 129 leaves int16; its panel takes the int16 path */
            int64_t k = 2 * (int64_t)(kt_next(&s) % (uint32_t)(K / 2)), n = kt_next(&s) % (uint32_t)N;
            B[k * ldb + n] = 127, B[(k + 1) * ldb + n] = 2;
        }
        for (size_t i = 0; i < sa; i++)
            if (kt_next(&s) % 2 == 0) A[i] = kt_next(&s) & 1 ? 0xff : 0;
    } else if (extreme) {
        uint8_t lo = bs ? 0x80 : 0, hi = bs ? 0x7f : 0xff; /* B's most negative / positive */
        for (size_t i = 0; i < sa; i++)
            if (extreme == 1 || kt_next(&s) % 3 == 0) A[i] = kt_next(&s) & 1 ? 0xff : 0;
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++)
                if (extreme == 1 || kt_next(&s) % 5 == 0) B[k * ldb + n] = ((k / 2 + n) & 1) ? hi : lo;
    }
    for (int64_t i = 0; i < M; i++) zr[i] = as ? (int8_t)kt_next(&s) : (uint8_t)kt_next(&s);
    for (int64_t i = 0; i < N; i++) {
        zc[i] = bs ? (int8_t)kt_next(&s) : (uint8_t)kt_next(&s);
        bsc[i] = 0.001f * (1 + kt_uniform(&s));
        bias[i] = kt_uniform(&s);
    }
    wm_igemm_args a = {0};
    a.M = M;
    a.N = N;
    a.K = K;
    a.A = A;
    a.lda = lda;
    a.a_signed = as;
    a.B = B;
    a.ldb = ldb;
    a.b_signed = bs;
    a.a_zero_point = zmode & 1 ? (as ? -7 : 131) : 0;
    a.b_zero_point = zmode & 1 ? (bs ? 5 : 128) : 0;
    a.a_zero_points = zmode & 2 ? zr : NULL;
    a.b_zero_points = zmode & 2 ? zc : NULL;
    a.C = C;
    a.ldc = ldc;
    a.Cf = Cf;
    a.ldcf = ldc;
    a.a_scale = 0.02f;
    a.b_scale = bsc;
    a.b_scale_count = seed & 1 ? 1 : N; /* one scale (a per-tensor weight) or one per column */
    a.ep.bias = bias;
    a.ep.act = WM_ACT_RELU;
    void *P = NULL;
    if (packed) {
        P = kt_alloc(wm_igemm_pack_b_size(K, N));
        wm_igemm_pack_b(K, N, B, ldb, a.b_zero_point, a.b_zero_points, P);
        a.packed_b = P;
    }
    size_t ws = wm_igemm_workspace_size(&a, nth);
    a.work = ws ? kt_alloc(ws) : NULL;
    for (int i = 0; i < nth; i++) T->igemm(&a, i, nth);
    wm_igemm_args r = a;
    r.C = R;
    r.Cf = Rf;
    r.packed_b = NULL;
    wm_ref_igemm(&r);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            if (C[m * ldc + n] != R[m * ldc + n])
                fail_msg("%s igemm M=%lld N=%lld K=%lld as=%d bs=%d z=%d packed=%d: C[%lld,%lld] %d ref %d", T->name,
                         (long long)M, (long long)N, (long long)K, as, bs, zmode, packed, (long long)m, (long long)n,
                         C[m * ldc + n], R[m * ldc + n]);
            if (fabsf(Cf[m * ldc + n] - Rf[m * ldc + n]) > 1e-6f * (fabsf(Rf[m * ldc + n]) + 1))
                fail_msg("%s igemm float output [%lld,%lld] %g ref %g", T->name, (long long)m, (long long)n, Cf[m * ldc + n], Rf[m * ldc + n]);
        }
    free(A);
    free(B);
    free(R);
    free(Cf);
    free(Rf);
    free(zr);
    free(zc);
    free(bsc);
    free(bias);
    free(P);
    free(a.work);
    if (out) *out = C;
    else free(C);
}

static void run_igemm(const wm_kernels *T, int64_t M, int64_t N, int64_t K, int as, int bs, int zmode, int packed,
                      int nth, uint32_t seed, int32_t **out) {
    run_igemm_x(T, M, N, K, as, bs, zmode, packed, nth, seed, 0, out);
}

/* The AVX2 prefill path (more than 6 rows: vpmaddubsw) at the bytes that saturate int16 pair sums: every row
   count 1..70 (tiles of 1..4 rows, 6-row panels, 4-k groups with K % 4 = 0..3), every signedness, zero point
   mode (none, per tensor, per row / column), packed or plain B, one or two shares. */
static void test_igemm_extremes(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t ks[] = {1, 2, 3, 5, 8, 37, 70, 515};
    uint32_t seed = 101;
    for (int t = 0; t < nt; t++)
        for (int64_t M = 1; M <= 70; M++) {
            int64_t K = ks[M % 8], N = 1 + (M * 7) % 40;
            for (int v = 0; v < 16; v++)
                run_igemm_x(T[t], M, N, K, v & 1, (v >> 1) & 1, (v >> 2) & 3, (int)(M & 1), 1 + (v & 1), seed++,
                            1 + (int)((M + v) & 1), NULL);
        }
}

/* Decode rows (1..6) of uint8 A x packed int8 B: the AVX2 vpmaddubsw rows take the panels whose pairs are all safe
   (B in [-64, 64] as 7-bit weights, with pairs at the safety edge, A at 0 / 255: a wrong edge saturates and
   shows), the int16 path a panel with one unsafe pair; every K parity and remainder mod 4, zero point modes, one
   to three shares, exact against the reference. The safety rule itself at its edges. */
static void test_igemm_decode_rows(void **state) {
    (void)state;
    assert_true(wm_igemm_pair_safe(64, 64) && wm_igemm_pair_safe(-64, -64) && wm_igemm_pair_safe(127, 1));
    assert_true(wm_igemm_pair_safe(-128, 0) && wm_igemm_pair_safe(127, -128) && wm_igemm_pair_safe(-1, -127));
    assert_true(!wm_igemm_pair_safe(65, 64) && !wm_igemm_pair_safe(127, 2) && !wm_igemm_pair_safe(-128, -1));
    assert_true(!wm_igemm_pair_safe(-65, -64));
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 37, 64, 515, 1100};
    static const int64_t ns[] = {1, 16, 17, 40, 70};
    uint32_t seed = 555;
    for (int t = 0; t < nt; t++)
        for (int64_t M = 1; M <= 6; M++)
            for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
                for (int v = 0; v < 4; v++) {
                    int64_t N = ns[(M + (int64_t)k + v) % 5];
                    run_igemm_x(T[t], M, N, ks[k], 0, 1, v, 1, 1 + (int)((k + v) % 3), seed++, 3 + (v >> 1), NULL);
                }
}

/* Prefill blocks (7..70 rows) on packed signed B whose panels' pairs are all safe: the AVX2 vpmaddubsw panels read
   as packed (panel_safe, no regrouping), with B's column sums over all of K taken off in the first k-block, so K
   past one k-block (515, 1030, 1100) and every remainder mod 4 must come out exact; A signed and unsigned (read
   flipped), every zero point mode, one to three shares; extreme 4 puts one unsafe pair in, so that its panel takes
   the regrouping path beside safe ones. B at the safety edges and A at 0 / 255: a wrong edge saturates and shows. */
static void test_igemm_prefill_safe(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 37, 64, 515, 1030, 1100};
    static const int64_t ns[] = {1, 16, 17, 40, 70};
    uint32_t seed = 909;
    for (int t = 0; t < nt; t++)
        for (int64_t M = 7; M <= 70; M += 9)
            for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
                for (int v = 0; v < 8; v++) {
                    int64_t N = ns[(M + (int64_t)k + v) % 5];
                    run_igemm_x(T[t], M, N, ks[k], v & 1, 1, v >> 1 & 3, 1, 1 + (int)((k + v) % 3), seed++,
                                3 + (int)((k + (size_t)v / 2) & 1), NULL);
                }
}

/* DynamicQuantizeLinear (AVX2 parts on this CPU) against ONNX's formula written out here: range of the values and
   0, scale = (max - min) / 255, zp = clamp(round(-min / scale)), y = clamp(round(x / scale) + zp), NaN -> zp;
   ties (x / scale = k + 0.5), NaN, infinities, every length 0..100 and a long one. */
static void test_dyn_quantize(void **state) {
    (void)state;
    uint32_t s = 77;
    float *v = kt_alloc(5000 * sizeof(float));
    uint8_t *y = kt_alloc(5000), *r = kt_alloc(5000);
    for (int t = 0; t < 110; t++) {
        uint64_t cnt = t <= 100 ? (uint64_t)t : 4000 + (uint64_t)t;
        for (uint64_t i = 0; i < cnt; i++) {
            uint32_t k = kt_next(&s) % 16;
            v[i] = k == 0 ? NAN : k == 1 && t > 105 ? INFINITY : k == 2 ? (float)((int)(kt_next(&s) % 64) - 20) * 0.5f
                                                                       : 7.0f * kt_uniform(&s);
        }
        float mx = 0, mn = 0;
        for (uint64_t i = 0; i < cnt; i++) mx = v[i] > mx ? v[i] : mx, mn = v[i] < mn ? v[i] : mn;
        float sc = (mx == mn ? 1.0f : mx - mn) / 255.0f, izp = -mn / sc;
        float zp = isnan(izp) ? 0.0f : rintf(fminf(fmaxf(izp, 0.0f), 255.0f));
        for (uint64_t i = 0; i < cnt; i++) {
            float q = rintf(v[i] / sc) + zp;
            r[i] = isnan(q) ? (uint8_t)zp : (uint8_t)fminf(fmaxf(q, 0.0f), 255.0f);
        }
        float scale;
        uint8_t z;
        wm_dyn_quantize_u8(v, cnt, y, &scale, &z);
        if (memcmp(&scale, &sc, sizeof sc) || z != (uint8_t)zp) fail_msg("cnt %llu: scale / zero point", (unsigned long long)cnt);
        for (uint64_t i = 0; i < cnt; i++)
            if (y[i] != r[i]) fail_msg("cnt %llu: y[%llu] = %d, ref %d (x %g)", (unsigned long long)cnt, (unsigned long long)i, y[i], r[i], v[i]);
    }
    free(v), free(y), free(r);
}

static void test_igemm(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t dims[][3] = {{1, 1, 1}, {1, 37, 64}, {2, 17, 33}, {7, 16, 512}, {13, 35, 515}, {3, 40, 1100}, {150, 20, 40}, {0, 3, 3}, {3, 0, 3}, {3, 3, 0}};
    uint32_t seed = 3;
    for (int t = 0; t < nt; t++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int v = 0; v < 16; v++) {
                if (dims[d][0] * dims[d][1] * dims[d][2] > 100000 && v % 5) continue; /* keep the ASan run short */
                run_igemm(T[t], dims[d][0], dims[d][1], dims[d][2], v & 1, (v >> 1) & 1, (v >> 2) & 3, (int)(d & 1) ^ (v & 1),
                          1 + (int)(d % 3), seed++, NULL);
            }
    /* determinism over nth */
    for (int t = 0; t < nt; t++) {
        int32_t *r1, *r;
        run_igemm(T[t], 40, 70, 600, 0, 1, 1, 1, 1, 17, &r1);
        run_igemm(T[t], 40, 70, 600, 0, 1, 1, 1, 3, 17, &r);
        assert_memory_equal(r, r1, (size_t)(40 * 71) * 4);
        free(r);
        free(r1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nbits_layout),
        cmocka_unit_test(test_nbits_pack_sg32),
        cmocka_unit_test(test_nbits),
        cmocka_unit_test(test_nbits_edges_and_determinism),
        cmocka_unit_test(test_nbits_b8_big_exact),
        cmocka_unit_test(test_nbits_b8_half_scales),
        cmocka_unit_test(test_nbits_i15_error),
        cmocka_unit_test(test_igemm),
        cmocka_unit_test(test_igemm_extremes),
        cmocka_unit_test(test_igemm_decode_rows),
        cmocka_unit_test(test_igemm_prefill_safe),
        cmocka_unit_test(test_dyn_quantize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
