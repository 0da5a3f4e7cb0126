/*
 * Unit tests of SGEMM (plain, transposed, prepacked, batched, fused epilogue)
 * and fp16-weight GEMM against the naive references in kernels_ref.c, on the
 * generic and the AVX2 table, with awkward shapes, padded leading dimensions,
 * alpha/beta variants and every share count; plus determinism across nth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels_test_util.h"
#include "core/cpu.h"
#include "kernels/kernels_impl.h"

/* |C - R| <= (K + 4) * eps * (|alpha| sum|a||b| + |beta c|) + tiny, elementwise (a float accumulation bound). */
static void check_close(const float *C, const float *R, const double *bound, int64_t M, int64_t N, int64_t ldc,
                        const char *what) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double d = fabs((double)C[m * ldc + n] - R[m * ldc + n]);
            if (!(d <= bound[m * N + n])) {
                fail_msg("%s: C[%lld,%lld] = %.9g, reference %.9g, bound %.3g", what, (long long)m, (long long)n,
                         C[m * ldc + n], R[m * ldc + n], bound[m * N + n]);
            }
        }
}

typedef struct sg_case {
    int64_t M, N, K;
    int ta, tb, packed, pad;
    float alpha, beta;
    int epi; /* 0 none, 1 bias + gelu_erf, 2 bias_m + relu + residual, 3 bias + silu, 4 clip,
              * 5 bias + residual before a relu (a convolution's Z), 6 bias + relu, 7 bias + quick_gelu (1.702),
              * 8 bias + residual before gelu_erf, 9 bias + gelu_erf + residual after (not fused: the separate
              * pass), 10 bias + gelu_tanh */
} sg_case;

static void run_sgemm(const wm_kernels *T, const sg_case *c, int nth, uint32_t seed, float **out, int64_t *ldc_out,
                      int verify) {
    int64_t M = c->M, N = c->N, K = c->K, pad = c->pad;
    int64_t lda = (c->ta ? M : K) + pad, ldb = (c->tb ? K : N) + pad, ldc = N + pad;
    size_t sa = c->ta ? kt_span(K, M, lda) : kt_span(M, K, lda);
    size_t sb = c->tb ? kt_span(N, K, ldb) : kt_span(K, N, ldb);
    float *A = kt_alloc(sa * 4), *B = kt_alloc(sb * 4);
    size_t sc = (size_t)(M * ldc);
    float *C = kt_alloc(sc * 4 + 4), *R = kt_alloc(sc * 4 + 4), *C0 = kt_alloc(sc * 4 + 4);
    float *bias = kt_alloc((size_t)N * 4 + 4), *bias_m = kt_alloc((size_t)M * 4 + 4), *res = kt_alloc(sc * 4 + 4);
    uint32_t s = seed;
    kt_fill(A, (int64_t)sa, &s);
    kt_fill(B, (int64_t)sb, &s);
    kt_fill(C0, (int64_t)sc, &s);
    kt_fill(bias, N, &s);
    kt_fill(bias_m, M, &s);
    kt_fill(res, (int64_t)sc, &s);
    if (c->beta == 0.0f) /* write-only C: garbage (NaN) must not leak */
        for (size_t i = 0; i < sc; i++) C0[i] = NAN;
    for (int64_t m = 0; m < M; m++) /* padding sentinel */
        for (int64_t n = N; n < ldc; n++) C0[m * ldc + n] = 12345.0f;
    memcpy(C, C0, sc * 4);
    memcpy(R, C0, sc * 4);

    wm_sgemm_args a = {0};
    a.M = M;
    a.N = N;
    a.K = K;
    a.alpha = c->alpha;
    a.beta = c->beta;
    a.A = A;
    a.lda = lda;
    a.trans_a = c->ta;
    a.B = B;
    a.ldb = ldb;
    a.trans_b = c->tb;
    a.C = C;
    a.ldc = ldc;
    if (c->epi == 1) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_GELU_ERF;
    } else if (c->epi == 2) {
        a.ep.bias_m = bias_m;
        a.ep.act = WM_ACT_RELU;
        a.ep.residual = res;
        a.ep.ld_residual = ldc;
    } else if (c->epi == 3) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_SILU;
    } else if (c->epi == 4) {
        a.ep.act = WM_ACT_CLIP;
        a.ep.act_a = -0.5f;
        a.ep.act_b = 0.25f;
    } else if (c->epi == 5) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_RELU;
        a.ep.residual = res;
        a.ep.ld_residual = ldc;
        a.ep.residual_first = 1;
    } else if (c->epi == 6) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_RELU;
    } else if (c->epi == 7) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_QUICK_GELU;
        a.ep.act_a = 1.702f;
    } else if (c->epi == 8 || c->epi == 9) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_GELU_ERF;
        a.ep.residual = res;
        a.ep.ld_residual = ldc;
        a.ep.residual_first = c->epi == 8;
    } else if (c->epi == 10) {
        a.ep.bias = bias;
        a.ep.act = WM_ACT_GELU_TANH;
    }
    float *P = NULL;
    if (c->packed) { /* 2: one whole-K k-block (kc = K); 3: k-blocks of 40 */
        P = kt_alloc(wm_sgemm_pack_b_size(K, N));
        a.kc = c->packed == 2 ? K : c->packed == 3 ? 40 : 0;
        wm_sgemm_pack_b_kc(c->tb, K, N, B, ldb, a.kc, P);
        a.packed_b = P;
    }
    size_t ws = wm_sgemm_workspace_size(&a, nth), ws1 = wm_sgemm_workspace_size(&a, 1);
    a.work = ws ? kt_alloc(ws) : NULL;
    void *own = ws1 ? kt_alloc(ws1) : NULL;
    for (int i = 0; i < nth; i++) { /* odd shares in a scratch of their own (work_own), as wm_sgemm_pool runs them */
        wm_sgemm_args ai = a;
        if (i & 1) ai.work = own, ai.work_own = 1;
        T->sgemm(&ai, i, nth);
    }
    free(own);

    if (!verify) goto done;
    /* reference and its error bound */
    wm_sgemm_args r = a;
    r.C = R;
    r.packed_b = NULL;
    wm_ref_sgemm(&r);
    /* entries are in [-1, 1), so sum_k |a||b| <= K: a float accumulation error bound per element */
    double *bound = kt_alloc((size_t)(M * N) * sizeof(double) + 8);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double v = fabs(c->alpha) * (double)K + (c->beta != 0.0f ? fabs(c->beta * C0[m * ldc + n]) : 0.0);
            if (c->epi == 1 || c->epi == 3 || c->epi == 7 || c->epi == 10) v += fabs(bias[n]) + 2.0;
            if (c->epi == 2) v += fabs(bias_m[m]) + fabs(res[m * ldc + n]);
            if (c->epi == 5) v += fabs(bias[n]) + fabs(res[m * ldc + n]);
            if (c->epi == 8 || c->epi == 9) v += fabs(bias[n]) + fabs(res[m * ldc + n]) + 2.0;
            if (c->epi == 6) v += fabs(bias[n]);
            bound[m * N + n] = (double)(K + 8) * 1.2e-7 * v + 1e-6;
        }
    char what[200];
    snprintf(what, sizeof what, "%s sgemm M=%lld N=%lld K=%lld ta=%d tb=%d packed=%d pad=%lld a=%g b=%g epi=%d nth=%d",
             T->name, (long long)M, (long long)N, (long long)K, c->ta, c->tb, c->packed, (long long)pad, c->alpha,
             c->beta, c->epi, nth);
    check_close(C, R, bound, M, N, ldc, what);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = N; n < ldc; n++)
            if (C[m * ldc + n] != 12345.0f) fail_msg("%s: padding of C row %lld overwritten", what, (long long)m);
    free(bound);
done:
    free(A);
    free(B);
    free(R);
    free(C0);
    free(bias);
    free(bias_m);
    free(res);
    free(P);
    free(a.work);
    if (out) {
        *out = C;
        *ldc_out = ldc;
    } else {
        free(C);
    }
}

static void test_sgemm_shapes(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    /* both ways of reading A rows 4 KiB apart: copied (an L1 with fewer ways than a tile has rows) or in place; the
       second pass with a 64 KiB L2, whose a_outer column blocks (32 KiB of B: 32 columns at kc 256) split every N
       past 32 */
    for (int ways = 0; ways <= 64; ways += 64) {
        wm_gemm_set_l1d_ways(ways);
        wm_gemm_set_l2_bytes(ways ? 64 * 1024 : 0);
        static const int64_t dims[][3] = {{0, 5, 7},   {5, 0, 7},    {5, 7, 0},    {1, 1, 1},    {1, 17, 3},
                                          {2, 33, 19}, {3, 16, 16},  {6, 16, 256}, {7, 17, 257}, {13, 31, 29},
                                          {1, 100, 513}, {2, 64, 300}, {37, 23, 270}, {150, 9, 40}, {145, 20, 260},
                                          {25, 47, 1024} /* rows 4 KiB apart: AVX-512 packs A */,
                                          {37, 40, 1021} /* with pad 3 too, a shorter last k-block (253 at kc
                                                            256, 509 at the AVX2 table's 768) */,
                                          {9, 70, 1700} /* 3 k-blocks at the AVX2 table's kc, odd rows */,
                                          {14, 33, 70} /* a 2-row tail */, {26, 48, 1024}, {17, 40, 300} /* 5 */,
                                          {18, 33, 64} /* 6 */};
        uint32_t seed = 1;
        for (int t = 0; t < nt; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (int v = 0; v < 8; v++) {
                    if (dims[d][0] * dims[d][1] * dims[d][2] > 200000 && v % 3) continue; /* keep the ASan run short */
                    sg_case c = {dims[d][0], dims[d][1], dims[d][2], v & 1, (v >> 1) & 1, (v >> 2) & 1, 0,
                                 1.0f,       0.0f,       0};
                    c.pad = (v % 3) * 3;
                    for (int nth = 1; nth <= 3; nth += 2) run_sgemm(T[t], &c, nth, seed++, NULL, NULL, 1);
                    if (c.packed && dims[d][2] >= 1000) { /* B in one k-block: the 4 KiB-strided rows' copy is padded */
                        c.packed = 2;
                        run_sgemm(T[t], &c, 3, seed++, NULL, NULL, 1);
                    }
                }
    }
    wm_cpu_info ci;
    wm_cpu_detect(&ci);
    wm_gemm_set_l1d_ways(ci.l1d_ways);
    wm_gemm_set_l2_bytes(ci.l2_bytes);
}

static void test_sgemm_alpha_beta_epilogue(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const float ab[][2] = {{1, 1}, {0.5f, 2}, {-1, 0.25f}, {2, 0}, {0, 1}, {0, 0}};
    uint32_t seed = 100;
    for (int t = 0; t < nt; t++)
        for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++)
            for (int epi = 0; epi <= 10; epi++)
                for (int packed = 0; packed < 4; packed++) { /* packed B; 2, 3: with a k-block of K, 40 */
                    sg_case c = {19, 37, 70, 0, epi & 1, packed, 2, ab[i][0], ab[i][1], epi};
                    run_sgemm(T[t], &c, 2, seed++, NULL, NULL, 1);
                    sg_case g = {1, 70, 41, 0, epi & 1, packed, 1, ab[i][0], ab[i][1], epi}; /* GEMV path */
                    run_sgemm(T[t], &g, 3, seed++, NULL, NULL, 1);
                }
}

/*
 * Tall GEMMs whose rows of A and columns of C do not stay in the L2 (a 16 KiB one set here: 301 rows of a 16-column
 * block exceed it): the a_outer driver prefetches the next row tile's A rows and every k-block's C tiles (the next row tile's first one too). Prefetches
 * change no value: the naive reference's bound with bias + residual fused in the last k-block's store or GELU after
 * it, packed B or not, a last row tile of 1 row and an m-block edge (264), and the same bits for 1 and 3 shares.
 */
static void test_sgemm_tall_prefetch(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    wm_gemm_set_l2_bytes(16 * 1024);
    static const int64_t dims[][3] = {{301, 40, 300}, {270, 20, 520}};
    uint32_t seed = 500;
    for (int t = 0; t < nt; t++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int v = 0; v < 4; v++) {
                sg_case c = {dims[d][0], dims[d][1], dims[d][2], 0, 0, v & 1, v & 2 ? 3 : 0, 1.0f, 0.0f,
                             v & 2 ? 1 : 5};
                float *ref = NULL, *C = NULL;
                int64_t ldc;
                run_sgemm(T[t], &c, 1, seed, &ref, &ldc, 1);
                run_sgemm(T[t], &c, 3, seed++, &C, &ldc, 1);
                if (memcmp(C, ref, (size_t)(c.M * ldc) * 4) != 0)
                    fail_msg("%s: tall M=%lld N=%lld K=%lld differs between nth=1 and nth=3", T[t]->name,
                             (long long)c.M, (long long)c.N, (long long)c.K);
                free(C);
                free(ref);
            }
    wm_cpu_info ci;
    wm_cpu_detect(&ci);
    wm_gemm_set_l2_bytes(ci.l2_bytes);
}

/*
 * An activation the table's store applies to the tile (wm_gemm_ukr.fused_act: GELU, QuickGelu, ... after the bias and
 * a residual_first residual) gives the bits of the separate pass: the same GEMM with no epilogue, then the table's
 * add and vact on each row. Partial tiles (odd M and N), several k-blocks, packed B or not, 1 and 3 shares.
 */
static void test_sgemm_fused_act_bits(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t dims[][3] = {{19, 37, 70}, {7, 16, 300}, {13, 5, 1021}, {31, 48, 33}};
    static const int epis[] = {1, 3, 7, 8, 10};
    uint32_t seed = 900;
    for (int t = 0; t < nt; t++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (size_t q = 0; q < sizeof epis / sizeof epis[0]; q++)
                for (int v = 0; v < 4; v++) {
                    sg_case c = {dims[d][0], dims[d][1], dims[d][2], 0, v & 1, v >> 1, 0, 1.0f, 0.0f, 0};
                    int nth = v & 1 ? 3 : 1;
                    float *plain = NULL, *fused = NULL;
                    int64_t ldc;
                    run_sgemm(T[t], &c, nth, seed, &plain, &ldc, 0);
                    c.epi = epis[q];
                    run_sgemm(T[t], &c, nth, seed, &fused, &ldc, 0);
                    /* run_sgemm's bias and residual: its fills in order (A, B, C, bias, bias_m, residual) */
                    int64_t M = c.M, N = c.N, K = c.K;
                    size_t sa = kt_span(M, K, K), sb = c.tb ? kt_span(N, K, K) : kt_span(K, N, N), sc = (size_t)(M * ldc);
                    float *junk = kt_alloc((sa > sb ? sa : sb) * 4 + sc * 4 + 4), *bias = kt_alloc((size_t)N * 4 + 4);
                    float *res = kt_alloc(sc * 4 + 4);
                    uint32_t s = seed++;
                    kt_fill(junk, (int64_t)sa, &s);
                    kt_fill(junk, (int64_t)sb, &s);
                    kt_fill(junk, (int64_t)sc, &s);
                    kt_fill(bias, N, &s);
                    kt_fill(junk, M, &s);
                    kt_fill(res, (int64_t)sc, &s);
                    wm_act act = c.epi == 3 ? WM_ACT_SILU : c.epi == 7 ? WM_ACT_QUICK_GELU
                                                         : c.epi == 10 ? WM_ACT_GELU_TANH : WM_ACT_GELU_ERF;
                    for (int64_t m = 0; m < M; m++) {
                        float *row = plain + m * ldc;
                        T[t]->add(N, row, row, bias);
                        if (c.epi == 8) T[t]->add(N, row, row, res + m * ldc);
                        T[t]->vact(N, row, row, act, 1.702f, 0.0f);
                    }
                    if (memcmp(plain, fused, sc * 4) != 0)
                        fail_msg("%s: M=%lld N=%lld K=%lld epi=%d packed=%d nth=%d: the fused activation differs from "
                                 "the separate pass",
                                 T[t]->name, (long long)M, (long long)N, (long long)K, c.epi, c.packed, nth);
                    free(junk);
                    free(bias);
                    free(res);
                    free(plain);
                    free(fused);
                }
}

/* Same table, same inputs: bit-identical for nth = 1, 2, 3 and 5 (the split never cuts K). */
static void test_sgemm_deterministic(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t dims[][3] = {{150, 40, 300}, {1, 300, 70}, {2, 77, 513}, {31, 200, 17}};
    for (int t = 0; t < nt; t++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int packed = 0; packed < 2; packed++) {
                sg_case c = {dims[d][0], dims[d][1], dims[d][2], 0, 0, packed, 0, 1.0f, 0.0f, 1};
                float *ref = NULL, *C = NULL;
                int64_t ldc;
                run_sgemm(T[t], &c, 1, 7, &ref, &ldc, 1);
                static const int nths[] = {1, 2, 3, 5};
                for (size_t i = 0; i < 4; i++) {
                    run_sgemm(T[t], &c, nths[i], 7, &C, &ldc, 0);
                    if (memcmp(C, ref, (size_t)(c.M * ldc) * 4) != 0)
                        fail_msg("%s: M=%lld N=%lld K=%lld packed=%d differs between nth=1 and nth=%d", T[t]->name,
                                 (long long)c.M, (long long)c.N, (long long)c.K, packed, nths[i]);
                    free(C);
                }
                free(ref);
            }
}

/*
 * Indirect A (an implicit-GEMM convolution): a pool of seg-float runs, some zero (padding), some shared by
 * several rows, and a table ind[t * ldi + m] picking one per (segment, row). For every table and share count
 * the result equals the plain GEMM on the gathered A bit for bit (same arithmetic, same order), and the naive
 * reference within the float bound; seg values that cut k-blocks anywhere, K over several k-blocks, partial
 * tiles, and the convolution's epilogue (bias, residual, ReLU).
 */
static void test_sgemm_indirect(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t cases[][4] = {/* M, N, K, seg */
                                       {1, 16, 64, 64},   {13, 37, 90, 10},   {25, 64, 576, 64}, {40, 33, 1152, 128},
                                       {29, 80, 600, 24}, {12, 32, 768, 256}, {7, 5, 17, 17},    {50, 48, 301, 7}};
    uint32_t seed = 900;
    /* layout 0: each row's run drawn at random; 1: as in a convolution's row of positions, the rows of a segment
       3 floats apart in the pool (overlapping runs), and every third segment all the zero run (padding) */
    for (int layout = 0; layout < 2; layout++) {
        for (int t = 0; t < nt; t++)
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
                for (int packed = 0; packed < 4; packed++) { /* 2: one whole-K k-block (kc = K); 3: kc = 40 */
                    int64_t M = cases[ci][0], N = cases[ci][1], K = cases[ci][2], seg = cases[ci][3];
                    int64_t nseg = K / seg, ldi = M + 3, runs = M + 5;
                    float *pool = kt_alloc((size_t)(runs * seg) * 4), *B = kt_alloc((size_t)(K * N) * 4);
                    float *Ad = kt_alloc((size_t)(M * K) * 4 + 4), *bias = kt_alloc((size_t)N * 4);
                    float *res = kt_alloc((size_t)(M * N) * 4 + 4), *zero = calloc((size_t)seg, 4);
                    const float **ind = kt_alloc((size_t)(nseg * ldi) * sizeof *ind);
                    if (!zero) abort();
                    kt_fill(pool, runs * seg, &seed);
                    kt_fill(B, K * N, &seed);
                    kt_fill(bias, N, &seed);
                    kt_fill(res, M * N, &seed);
                    for (int64_t q = 0; q < nseg; q++)
                        for (int64_t m = 0; m < ldi; m++) {
                            uint32_t r = kt_next(&seed) % (uint32_t)(runs + 2);
                            const float *run = r >= (uint32_t)runs ? zero : pool + r * seg;
                            if (layout) run = q % 3 == 2 ? zero : pool + q * 5 + m * 3;
                            ind[q * ldi + m] = m < M ? run : NULL; /* entries past M are never read */
                            if (m < M) memcpy(Ad + m * K + q * seg, run, (size_t)seg * 4);
                        }
                    float *P = NULL;
                    wm_sgemm_args a = {0};
                    a.M = M, a.N = N, a.K = K, a.alpha = 1.0f, a.B = B, a.ldb = N, a.ldc = N;
                    a.ep.bias = bias, a.ep.residual = res, a.ep.ld_residual = N, a.ep.residual_first = 1;
                    a.ep.act = WM_ACT_RELU;
                    if (packed) {
                        P = kt_alloc(wm_sgemm_pack_b_size(K, N));
                        a.kc = packed == 2 ? K : packed == 3 ? 40 : 0;
                        wm_sgemm_pack_b_kc(0, K, N, B, N, a.kc, P);
                        a.packed_b = P;
                    }
                    wm_sgemm_args d = a; /* the plain GEMM on the gathered A */
                    d.A = Ad, d.lda = K;
                    float *Cd = kt_alloc((size_t)(M * N) * 4 + 4), *R = kt_alloc((size_t)(M * N) * 4 + 4);
                    d.C = Cd;
                    d.work = kt_alloc(wm_sgemm_workspace_size(&d, 1) + 1);
                    T[t]->sgemm(&d, 0, 1);
                    wm_sgemm_args r = d;
                    r.C = R, r.packed_b = NULL;
                    wm_ref_sgemm(&r);
                    a.ind = ind, a.ldi = ldi, a.seg = seg;
                    char what[160];
                    for (int nth = 1; nth <= 3; nth += 2) {
                        float *C = kt_alloc((size_t)(M * N) * 4 + 4);
                        a.C = C;
                        a.work = kt_alloc(wm_sgemm_workspace_size(&a, nth) + 1);
                        for (int i = nth - 1; i >= 0; i--) T[t]->sgemm(&a, i, nth);
                        snprintf(what, sizeof what,
                                 "%s indirect sgemm M=%lld N=%lld K=%lld seg=%lld packed=%d nth=%d layout=%d",
                                 T[t]->name, (long long)M, (long long)N, (long long)K, (long long)seg, packed, nth,
                                 layout);
                        /* the plain GEMM of M <= 2 rows is the GEMV path, one FMA chain per column: the same bits only
                           when B is one k-block */
                        const int same = M > 2 || !a.kc || a.kc >= K;
                        for (int64_t i = 0; i < M * N; i++) {
                            if (same && memcmp(&C[i], &Cd[i], 4) != 0)
                                fail_msg("%s: C[%lld] = %.9g, plain GEMM on the gathered A %.9g", what, (long long)i,
                                         C[i], Cd[i]);
                            double bound = (double)(K + 8) * 1.2e-7 * ((double)K + 2.0) + 1e-6;
                            if (!(fabs((double)C[i] - R[i]) <= bound))
                                fail_msg("%s: C[%lld] = %.9g, reference %.9g", what, (long long)i, C[i], R[i]);
                        }
                        free(C);
                        free(a.work);
                    }
                    free(pool), free(B), free(Ad), free(bias), free(res), free(zero), free(ind), free(P);
                    free(Cd), free(R), free(d.work);
                }
    }
}

/* attention-like batch: [2 batches][3 heads], A/C laid out [b][s][h][d] (strided heads), B = K^T per head */
static void test_sgemm_batch(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    const int64_t Bt = 2, H = 3, S = 13, D = 8;
    for (int t = 0; t < nt; t++)
        for (int nth = 1; nth <= 8; nth += 7) {
            uint32_t s = 42;
            int64_t n = Bt * S * H * D;
            float *Q = kt_alloc((size_t)n * 4), *Kx = kt_alloc((size_t)n * 4);
            float *C = kt_alloc((size_t)(Bt * H * S * S) * 4), *R = kt_alloc((size_t)(Bt * H * S * S) * 4);
            kt_fill(Q, n, &s);
            kt_fill(Kx, n, &s);
            wm_sgemm_args a = {0};
            a.M = S;
            a.N = S;
            a.K = D;
            a.alpha = 0.35f;
            a.A = Q;
            a.lda = H * D;
            a.B = Kx;
            a.ldb = H * D;
            a.trans_b = 1;
            a.C = C;
            a.ldc = S;
            wm_gemm_batch b = {{Bt, H}, {S * H * D, D}, {S * H * D, D}, {H * S * S, S * S}};
            a.work = kt_alloc(wm_sgemm_workspace_size(&a, nth));
            for (int i = 0; i < nth; i++) T[t]->sgemm_batch(&a, &b, i, nth);
            for (int64_t bi = 0; bi < Bt; bi++)
                for (int64_t h = 0; h < H; h++) {
                    wm_sgemm_args r = a;
                    r.A = Q + bi * S * H * D + h * D;
                    r.B = Kx + bi * S * H * D + h * D;
                    r.C = R + bi * H * S * S + h * S * S;
                    r.work = NULL;
                    wm_ref_sgemm(&r);
                }
            for (int64_t i = 0; i < Bt * H * S * S; i++)
                if (fabsf(C[i] - R[i]) > 1e-5f) fail_msg("%s batch nth=%d: C[%lld] %g vs %g", T[t]->name, nth, (long long)i, C[i], R[i]);
            free(a.work);
            free(Q);
            free(Kx);
            free(C);
            free(R);
        }
}

/* fp16 weights: GEMV (small M) and the packed path (large M), [K,N] and [N,K], vs the reference. */
static void test_hgemm(void **state) {
    (void)state;
    const wm_kernels *T[3];
    int nt = kt_tables(T);
    static const int64_t dims[][3] = {{1, 1, 1}, {1, 70, 33}, {2, 129, 300}, {3, 17, 16}, {9, 40, 70}, {20, 33, 260}, {1, 200, 77}, {0, 3, 3}, {4, 0, 5}, {4, 5, 0}};
    uint32_t s = 9;
    for (int t = 0; t < nt; t++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = dims[d][0], N = dims[d][1], K = dims[d][2], pad = 3;
                int64_t lda = K + pad, ldb = (tb ? K : N) + pad, ldc = N + 1;
                size_t sa = kt_span(M, K, lda), sb = tb ? kt_span(N, K, ldb) : kt_span(K, N, ldb);
                float *A = kt_alloc(sa * 4), *C = kt_alloc((size_t)(M * ldc) * 4 + 4), *R = kt_alloc((size_t)(M * ldc) * 4 + 4);
                float *bias = kt_alloc((size_t)N * 4 + 4);
                uint16_t *B = kt_alloc(sb * 2);
                kt_fill(A, (int64_t)sa, &s);
                kt_fill(bias, N, &s);
                float *tmp = kt_alloc(sb * 4 + 4);
                kt_fill(tmp, (int64_t)sb, &s);
                wm_kernels_generic()->f32_to_f16((int64_t)sb, B, tmp);
                wm_hgemm_args a = {0};
                a.M = M;
                a.N = N;
                a.K = K;
                a.A = A;
                a.lda = lda;
                a.B = B;
                a.ldb = ldb;
                a.trans_b = tb;
                a.C = C;
                a.ldc = ldc;
                a.ep.bias = bias;
                a.ep.act = WM_ACT_GELU_TANH;
                for (int nth = 1; nth <= 3; nth += 2) {
                    a.work = kt_alloc(wm_hgemm_workspace_size(&a, nth));
                    for (int i = 0; i < nth; i++) T[t]->hgemm(&a, i, nth);
                    wm_hgemm_args r = a;
                    r.C = R;
                    wm_ref_hgemm(&r);
                    float *C2 = NULL;
                    if (N > 0 && K > 0) { /* from panels, B itself unread: the same bits as B [K,N] as stored */
                        size_t ps = wm_hgemm_pack_b_size(K, N);
                        uint16_t *P = kt_alloc(ps);
                        C2 = kt_alloc((size_t)(M * ldc) * 4 + 4);
                        memcpy(C2, C, (size_t)(M * ldc) * 4 + 4);
                        for (int64_t m = 0; m < M; m++)
                            for (int64_t n = 0; n < N; n++) C2[m * ldc + n] = -7.0f;
                        for (int i = nth - 1; i >= 0; i--) wm_hgemm_pack_b_share(tb, K, N, B, ldb, P, i, nth);
                        wm_hgemm_args p = a;
                        p.packed_b = P, p.B = NULL, p.C = C2;
                        for (int i = 0; i < nth; i++) T[t]->hgemm(&p, i, nth);
                        if (!tb && memcmp(C, C2, (size_t)(M * ldc) * 4 + 4) != 0)
                            fail_msg("%s hgemm packed M=%lld N=%lld K=%lld nth=%d: differs from B as stored", T[t]->name,
                                     (long long)M, (long long)N, (long long)K, nth);
                        free(P);
                    }
                    for (int v = 0; v < 2; v++) {
                        const float *O = v ? C2 : C;
                        for (int64_t m = 0; O && m < M; m++)
                            for (int64_t n = 0; n < N; n++) {
                                double e = fabs((double)O[m * ldc + n] - R[m * ldc + n]);
                                if (e > 2e-6 * (K + 8) + 2e-6 * fabs(R[m * ldc + n]))
                                    fail_msg("%s hgemm%s M=%lld N=%lld K=%lld tb=%d nth=%d: C[%lld,%lld] %g vs %g", T[t]->name,
                                             v ? " packed" : "", (long long)M, (long long)N, (long long)K, tb, nth,
                                             (long long)m, (long long)n, O[m * ldc + n], R[m * ldc + n]);
                            }
                    }
                    free(C2);
                    free(a.work);
                }
                free(A);
                free(B);
                free(C);
                free(R);
                free(bias);
                free(tmp);
            }
}

/* Prepacked fp16 -> fp32 panels equal packing the converted matrix. */
static void test_pack_f16(void **state) {
    (void)state;
    int64_t K = 300, N = 37;
    uint32_t s = 5;
    float *f = kt_alloc((size_t)(K * N) * 4);
    uint16_t *h = kt_alloc((size_t)(K * N) * 2);
    kt_fill(f, K * N, &s);
    wm_kernels_generic()->f32_to_f16(K * N, h, f);
    wm_kernels_generic()->f16_to_f32(K * N, f, h);
    for (int tb = 0; tb < 2; tb++) {
        size_t ps = wm_sgemm_pack_b_size(K, N);
        float *p1 = kt_alloc(ps), *p2 = kt_alloc(ps);
        int64_t ld = tb ? K : N;
        wm_sgemm_pack_b(tb, K, N, f, ld, p1);
        wm_sgemm_pack_b_f16(tb, K, N, h, ld, p2);
        assert_memory_equal(p1, p2, ps);
        free(p1);
        free(p2);
    }
    free(f);
    free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_shapes),   cmocka_unit_test(test_sgemm_alpha_beta_epilogue),
        cmocka_unit_test(test_sgemm_deterministic), cmocka_unit_test(test_sgemm_batch),
        cmocka_unit_test(test_sgemm_indirect), cmocka_unit_test(test_sgemm_tall_prefetch),
        cmocka_unit_test(test_hgemm),          cmocka_unit_test(test_pack_f16),
        cmocka_unit_test(test_sgemm_fused_act_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
