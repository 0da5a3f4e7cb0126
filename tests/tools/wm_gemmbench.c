/*
 * wm_gemmbench - times the kernels for bench/bench_gemm.py and bench/bench_membw.py.
 *
 *   wm_gemmbench peak  [--threads T]                 FMA throughput loop on T threads: GFLOP/s
 *   wm_gemmbench membw [--threads T] [--mb MB]       streaming sum over an MB buffer: GB/s
 *   wm_gemmbench sgemm M K N [--threads T] [--packed [--kc KC] [--cold-mb MB]] [--transb] [--batch B]   (--kc: B's k-block)
 *        [--epi bias|relu|gelu|gelu_tanh|quick_gelu|res_gelu]   (an epilogue: a bias, then the activation; res_gelu:
 *        a residual before GELU, as a convolution's Z)
 *   wm_gemmbench gemv TYPE K N [--threads T] [--block BS] [--cold-mb MB] [--rows M]
 *        TYPE: f32 (prepacked), f32t ([N,K]), f16 ([K,N]), f16t ([N,K]), q8 / q4 (MatMulNBits
 *        8 / 4 bit, fp32 activations), q8a / q4a (accuracy_level 4: int8 activations), q8i / q4i (accuracy_level 2:
 *        15-bit activations below 8 rows); --zpf: float zero points (a carried GGUF's Q4_1 / Q4_K);
 *        --cold-mb cycles over enough weight copies to exceed MB (DRAM, not cache); --rows M: M rows of
 *        activations (q types only: prefill-sized MatMulNBits)
 *   wm_gemmbench igemm M K N [--threads T] [--packed] [--bdist uniform|normal|7bit]    (u8 x s8 MatMulInteger)
 *        --bdist: B's bytes uniform in [-128, 127] (default: the most pairs vpmaddubsw must split), normal
 *        (Gaussian weights quantized per column to max |b| = 127, like a symmetric int8 build) or 7bit ([-64, 63]);
 *        --float: a float output with a scale per column (DynamicQuantizeMatMul's), not int32
 * Common: --generic (generic table), --plain (f16 and q types: the weights as stored, not packed as a session does;
 *        q8a: float32 scales only, where a session also keeps halves for the kernel), --min-ms MS (default 300), --reps R (min runs, default 5).
 * Prints one JSON line: median_ms (wall), gflops, gbps (weight bytes / time), cpu_ms (median of the
 * slowest share's thread CPU time: what the run costs without preemption by other processes),
 * gflops_cpu, gbps_cpu, min_ms (the fastest run: the least disturbed), gflops_min, gbps_min, runs.
 * Exit codes: 0 ok, 2 usage error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "core/half.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/probe.h"
#include "runtime/pool.h"

typedef struct opts {
    int threads, packed, transb, generic, reps, block, rows, plain, bdist, zpf, fout;
    const char *epi;
    int64_t kc;
    int64_t batch;
    double min_ms, cold_mb, mb;
} opts;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void *xmalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) {
        fprintf(stderr, "wm_gemmbench: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    memset(p, 0, n ? n : 64);
    return p;
}

/* ------------------------------------------------------------ job plumbing */

typedef struct job {
    const wm_kernels *K;
    int kind; /* 0 sgemm, 1 batch, 2 hgemm, 3 nbits, 4 igemm, 5 fma, 6 sum */
    wm_sgemm_args s;
    wm_gemm_batch b;
    wm_hgemm_args h;
    wm_nbits_args q;
    wm_igemm_args i;
    int64_t iters;
    const float *buf;
    int64_t n;
    volatile float sink;
    double cpu_ms[256]; /* CPU time of each share in the last run (contention-free estimate) */
} job;

static double thread_cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void run_share(void *ctx, int ith, int nth) {
    job *j = ctx;
    double c0 = thread_cpu_ms();
    switch (j->kind) {
    case 0: j->K->sgemm(&j->s, ith, nth); break;
    case 1: j->K->sgemm_batch(&j->s, &j->b, ith, nth); break;
    case 2: j->K->hgemm(&j->h, ith, nth); break;
    case 3: j->K->nbits_gemm(&j->q, ith, nth); break;
    case 4: j->K->igemm(&j->i, ith, nth); break;
    case 5: j->sink = wm_probe_fma_avx2(j->iters); break;
    case 6: {
        long b, e;
        wm_split(j->n / 64, ith, nth, &b, &e);
        j->sink = wm_probe_sum_avx2(j->buf + b * 64, (e - b) * 64);
        break;
    }
    }
    if (ith < 256) j->cpu_ms[ith] = thread_cpu_ms() - c0;
}

/* Runs the job until min_ms and reps are reached; cb (may be NULL) rotates weight copies. */
static double g_cpu_median, g_min;

static double time_job(wm_pool *pool, job *j, const opts *o, int nth, void (*cb)(job *, int), int *runs) {
    static double t[4096], tc[4096];
    int n = 0;
    wm_pool_run(pool, run_share, j, nth); /* warm-up */
    double start = now_ms();
    while (n < 4096 && (n < o->reps || now_ms() - start < o->min_ms)) {
        if (cb) cb(j, n);
        double t0 = now_ms();
        wm_pool_run(pool, run_share, j, nth);
        t[n] = now_ms() - t0;
        double mx = 0;
        for (int i = 0; i < nth && i < 256; i++) mx = j->cpu_ms[i] > mx ? j->cpu_ms[i] : mx;
        tc[n++] = mx;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    qsort(tc, (size_t)n, sizeof *tc, cmp_d);
    g_cpu_median = tc[n / 2];
    g_min = t[0];
    *runs = n;
    return t[n / 2];
}

/* ------------------------------------------------------------ gemv weight copies */

/* A packed weight copy: 2 MiB aligned and advised as huge pages, as the session's arena holds packed weights. */
static void *huge_alloc(size_t n) {
    size_t len = WM_ALIGN_UP(n, (size_t)1 << 21);
    void *p = aligned_alloc((size_t)1 << 21, len);
    if (!p) {
        fprintf(stderr, "wm_gemmbench: out of memory\n");
        exit(1);
    }
    madvise(p, len, MADV_HUGEPAGE);
    return p;
}

static void **g_copies;
static int g_ncopies;

static void rotate(job *j, int run) {
    void *w = g_copies[run % g_ncopies];
    switch (j->kind) {
    case 0: j->s.packed_b ? (j->s.packed_b = w) : (j->s.B = w); break;
    case 2: j->h.packed_b ? (j->h.packed_b = w) : (j->h.B = w); break;
    case 3: j->q.packed ? (j->q.packed = w) : (j->q.B = w); break;
    default: break;
    }
}

static int usage(void) {
    fprintf(stderr, "usage: wm_gemmbench peak|membw|sgemm M K N|gemv TYPE K N|igemm M K N [options]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    opts o = {.threads = 1, .reps = 5, .min_ms = 300, .block = 32, .mb = 1024, .batch = 1};
    const char *cmd = argv[1];
    int64_t dims[4] = {0};
    const char *type = NULL;
    int nd = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--threads") && i + 1 < argc) o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--packed")) o.packed = 1;
        else if (!strcmp(a, "--kc") && i + 1 < argc) o.kc = atoll(argv[++i]);
        else if (!strcmp(a, "--transb")) o.transb = 1;
        else if (!strcmp(a, "--generic")) o.generic = 1;
        else if (!strcmp(a, "--plain")) o.plain = 1;
        else if (!strcmp(a, "--bdist") && i + 1 < argc) {
            const char *d = argv[++i];
            o.bdist = !strcmp(d, "uniform") ? 0 : !strcmp(d, "normal") ? 1 : !strcmp(d, "7bit") ? 2 : -1;
            if (o.bdist < 0) return usage();
        }
        else if (!strcmp(a, "--zpf")) o.zpf = 1;
        else if (!strcmp(a, "--float")) o.fout = 1;
        else if (!strcmp(a, "--epi") && i + 1 < argc) o.epi = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) o.reps = atoi(argv[++i]);
        else if (!strcmp(a, "--min-ms") && i + 1 < argc) o.min_ms = atof(argv[++i]);
        else if (!strcmp(a, "--block") && i + 1 < argc) o.block = atoi(argv[++i]);
        else if (!strcmp(a, "--rows") && i + 1 < argc) o.rows = atoi(argv[++i]);
        else if (!strcmp(a, "--batch") && i + 1 < argc) o.batch = atoll(argv[++i]);
        else if (!strcmp(a, "--cold-mb") && i + 1 < argc) o.cold_mb = atof(argv[++i]);
        else if (!strcmp(a, "--mb") && i + 1 < argc) o.mb = atof(argv[++i]);
        else if (!type && !strcmp(cmd, "gemv") && a[0] != '-') type = a;
        else if (nd < 4 && a[0] != '-') dims[nd++] = atoll(a);
        else return usage();
    }
    if (o.threads < 1 || o.reps < 1) return usage();
    const wm_kernels *K = o.generic ? wm_kernels_generic() : wm_kernels_get();
    wm_pool *pool = NULL;
    wm_error err = {0};
    if (wm_pool_new(o.threads, &pool, &err) != WM_OK) {
        fprintf(stderr, "wm_gemmbench: %s\n", err.msg);
        return 2;
    }
    job *j = xmalloc(sizeof *j);
    j->K = K;
    unsigned seed = 12345;
    int runs = 0;
    double ms = 0, flops = 0, bytes = 0;
    int nth = o.threads;

    if (!strcmp(cmd, "peak")) {
        if (!wm_kernels_avx2()) return usage();
        j->kind = 5;
        j->iters = 20 * 1000 * 1000;
        ms = time_job(pool, j, &o, nth, NULL, &runs);
        flops = (double)j->iters * 10 * 16 * nth;
    } else if (!strcmp(cmd, "membw")) {
        if (!wm_kernels_avx2()) return usage();
        j->kind = 6;
        j->n = (int64_t)(o.mb * 1024 * 1024 / 4) / 64 * 64;
        float *x = xmalloc((size_t)j->n * 4);
        for (int64_t i = 0; i < j->n; i++) x[i] = 1.0f;
        j->buf = x;
        ms = time_job(pool, j, &o, nth, NULL, &runs);
        bytes = (double)j->n * 4;
    } else if (!strcmp(cmd, "sgemm")) {
        if (nd != 3) return usage();
        int64_t M = dims[0], Kd = dims[1], N = dims[2], B = o.batch;
        float *A = xmalloc((size_t)(B * M * Kd) * 4), *Bm = xmalloc((size_t)(B * Kd * N) * 4),
              *C = xmalloc((size_t)(B * M * N) * 4);
        for (int64_t i = 0; i < B * M * Kd; i++) A[i] = frand(&seed);
        for (int64_t i = 0; i < B * Kd * N; i++) Bm[i] = frand(&seed);
        wm_sgemm_args *s = &j->s;
        s->M = M;
        s->N = N;
        s->K = Kd;
        s->alpha = 1;
        s->A = A;
        s->lda = Kd;
        s->B = Bm;
        s->trans_b = o.transb;
        s->ldb = o.transb ? Kd : N;
        s->C = C;
        s->ldc = N;
        if (o.packed && B == 1) {
            float *P = xmalloc(wm_sgemm_pack_b_size(Kd, N));
            s->kc = o.kc > 0 ? o.kc : 0;
            wm_sgemm_pack_b_kc(o.transb, Kd, N, Bm, s->ldb, s->kc, P);
            s->packed_b = P;
            if (o.cold_mb > 0) { /* copies of the packed B, one per run in turn: B comes from DRAM, as in a model */
                size_t pb = wm_sgemm_pack_b_size(Kd, N);
                g_ncopies = (int)ceil(o.cold_mb * 1024 * 1024 / (double)pb);
                g_copies = xmalloc((size_t)g_ncopies * sizeof *g_copies);
                for (int c = 0; c < g_ncopies; c++) g_copies[c] = memcpy(huge_alloc(pb), P, pb);
            }
        }
        if (o.epi) {
            static const char *const names[] = {"bias", "relu", "gelu", "gelu_tanh", "quick_gelu", "res_gelu"};
            static const wm_act acts[] = {WM_ACT_NONE,      WM_ACT_RELU,       WM_ACT_GELU_ERF,
                                          WM_ACT_GELU_TANH, WM_ACT_QUICK_GELU, WM_ACT_GELU_ERF};
            int e = -1;
            for (int q = 0; q < 6; q++)
                if (!strcmp(o.epi, names[q])) e = q;
            if (e < 0 || B > 1) return usage();
            float *bias = xmalloc((size_t)N * 4);
            for (int64_t q = 0; q < N; q++) bias[q] = frand(&seed);
            s->ep.bias = bias;
            s->ep.act = acts[e];
            s->ep.act_a = 1.702f;
            if (e == 5) {
                float *r = xmalloc((size_t)(M * N) * 4);
                for (int64_t q = 0; q < M * N; q++) r[q] = frand(&seed);
                s->ep.residual = r;
                s->ep.ld_residual = N;
                s->ep.residual_first = 1;
            }
        }
        s->work = xmalloc(wm_sgemm_workspace_size(s, nth));
        j->kind = B > 1 ? 1 : 0;
        j->b.count[0] = B;
        j->b.count[1] = 1;
        j->b.stride_a[0] = M * Kd;
        j->b.stride_b[0] = Kd * N;
        j->b.stride_c[0] = M * N;
        ms = time_job(pool, j, &o, nth, g_ncopies > 1 ? rotate : NULL, &runs);
        flops = 2.0 * B * M * N * Kd;
        bytes = (double)B * Kd * N * 4;
    } else if (!strcmp(cmd, "gemv")) {
        if (nd != 2 || !type) return usage();
        int64_t Kd = dims[0], N = dims[1];
        int64_t rows = o.rows > 1 ? o.rows : 1;
        float *A = xmalloc((size_t)(rows * Kd) * 4), *C = xmalloc((size_t)(rows * N) * 4);
        for (int64_t i = 0; i < rows * Kd; i++) A[i] = frand(&seed);
        size_t wbytes = 0;
        int64_t kb = (Kd + o.block - 1) / o.block;
        if (!strcmp(type, "f32") || !strcmp(type, "f32t")) {
            j->kind = 0;
            wbytes = !strcmp(type, "f32") ? wm_sgemm_pack_b_size(Kd, N) : (size_t)(Kd * N) * 4;
        } else if (!strcmp(type, "f16") || !strcmp(type, "f16t")) {
            j->kind = 2;
            wbytes = (size_t)(Kd * N) * 2;
        } else if (!strcmp(type, "q4") || !strcmp(type, "q4a") || !strcmp(type, "q8") || !strcmp(type, "q8a") ||
                   !strcmp(type, "q4i") || !strcmp(type, "q8i")) {
            j->kind = 3;
            wbytes = (size_t)(N * kb * o.block * (type[1] - '0') / 8);
        } else {
            return usage();
        }
        g_ncopies = o.cold_mb > 0 ? (int)ceil(o.cold_mb * 1024 * 1024 / (double)wbytes) : 1;
        g_copies = xmalloc(sizeof(void *) * (size_t)g_ncopies);
        for (int c = 0; c < g_ncopies; c++) {
            unsigned char *w = xmalloc(wbytes);
            if (j->kind == 0) {
                float *f = (float *)w;
                for (size_t i = 0; i < wbytes / 4; i++) f[i] = frand(&seed);
            } else if (j->kind == 2) {
                uint16_t *h = (uint16_t *)w;
                for (size_t i = 0; i < wbytes / 2; i++) h[i] = (uint16_t)(0x3000 + ((seed = seed * 1664525u + 1013904223u) >> 22));
            } else {
                for (size_t i = 0; i < wbytes; i++) w[i] = (unsigned char)((seed = seed * 1664525u + 1013904223u) >> 24);
            }
            g_copies[c] = w;
        }
        if (j->kind == 0) {
            wm_sgemm_args *s = &j->s;
            s->M = 1;
            s->N = N;
            s->K = Kd;
            s->alpha = 1;
            s->A = A;
            s->lda = Kd;
            s->C = C;
            s->ldc = N;
            if (!strcmp(type, "f32")) s->packed_b = g_copies[0];
            else {
                s->B = g_copies[0];
                s->trans_b = 1;
                s->ldb = Kd;
            }
            s->work = xmalloc(wm_sgemm_workspace_size(s, nth));
        } else if (j->kind == 2) {
            wm_hgemm_args *h = &j->h;
            h->M = 1;
            h->N = N;
            h->K = Kd;
            h->A = A;
            h->lda = Kd;
            h->B = g_copies[0];
            h->trans_b = !strcmp(type, "f16t");
            h->ldb = h->trans_b ? Kd : N;
            h->C = C;
            h->ldc = N;
            h->work = xmalloc(wm_hgemm_workspace_size(h, nth));
            if (!o.plain) { /* as a session does: each weight copy in the half GEMM's panels */
                size_t ps = wm_hgemm_pack_b_size(Kd, N);
                for (int c = 0; c < g_ncopies; c++) {
                    uint16_t *pk = huge_alloc(ps);
                    wm_hgemm_pack_b(h->trans_b, Kd, N, g_copies[c], h->ldb, pk);
                    free(g_copies[c]);
                    g_copies[c] = pk;
                }
                h->B = NULL;
                h->packed_b = g_copies[0];
            }
        } else {
            wm_nbits_args *q = &j->q;
            q->M = rows;
            q->N = N;
            q->K = Kd;
            q->bits = type[1] - '0';
            q->block_size = o.block;
            q->accuracy_level = type[2] == 'a' ? 4 : type[2] == 'i' ? 2 : 0;
            q->A = A;
            q->lda = Kd;
            q->B = g_copies[0];
            float *sc = xmalloc((size_t)(N * kb) * 4);
            for (int64_t i = 0; i < N * kb; i++) sc[i] = 0.01f;
            q->scales = sc;
            if (o.zpf) {
                float *zf = xmalloc((size_t)(N * kb) * 4);
                for (int64_t i = 0; i < N * kb; i++) zf[i] = 7.5f;
                q->zero_points_f = zf;
                q->has_zero_points = 2;
            }
            q->C = C;
            q->ldc = N;
            q->work = xmalloc(wm_nbits_workspace_size(q, nth));
            size_t pks = K->nbits_pack_size && !o.plain ? K->nbits_pack_size(q) : 0;
            if (pks) { /* as a session does: halves for scales, each weight copy repacked once */
                uint16_t *sh = xmalloc((size_t)(N * kb) * 2);
                for (int64_t i = 0; i < N * kb; i++) sc[i] = wm_f16_to_f32(sh[i] = wm_f32_to_f16(sc[i]));
                q->scales_h = sh;
                for (int c = 0; c < g_ncopies; c++) {
                    uint8_t *pk = huge_alloc(pks);
                    q->B = g_copies[c];
                    K->nbits_pack(q, pk, 0, 1);
                    free(g_copies[c]);
                    g_copies[c] = pk;
                }
                q->B = NULL;
                q->packed = g_copies[0];
            } else if (!o.plain && K->nbits_half_scales && q->bits == 8 && q->accuracy_level == 4) {
                /* as a session does (wm_nbits_half_kernel): the scales also as halves, which the kernel reads */
                uint16_t *sh = xmalloc((size_t)(N * kb) * 2);
                for (int64_t i = 0; i < N * kb; i++) sc[i] = wm_f16_to_f32(sh[i] = wm_f32_to_f16(sc[i]));
                q->scales_h = sh;
            }
        }
        ms = time_job(pool, j, &o, nth, g_ncopies > 1 ? rotate : NULL, &runs);
        flops = 2.0 * N * Kd * (j->kind == 3 ? (double)rows : 1.0);
        bytes = (double)wbytes;
    } else if (!strcmp(cmd, "igemm")) {
        if (nd != 3) return usage();
        int64_t M = dims[0], Kd = dims[1], N = dims[2];
        uint8_t *A = xmalloc((size_t)(M * Kd));
        int8_t *Bm = xmalloc((size_t)(Kd * N));
        int32_t *C = xmalloc((size_t)(M * N) * 4);
        for (int64_t i = 0; i < M * Kd; i++) A[i] = (uint8_t)((seed = seed * 1664525u + 1013904223u) >> 24);
        for (int64_t i = 0; i < Kd * N; i++) Bm[i] = (int8_t)((seed = seed * 1664525u + 1013904223u) >> 24);
        if (o.bdist == 2)
            for (int64_t i = 0; i < Kd * N; i++) Bm[i] = (int8_t)(Bm[i] >> 1);
        if (o.bdist == 1) { /* sum of 4 uniforms ~ Gaussian, scaled per column to max |b| = 127 */
            float *w = xmalloc((size_t)(Kd * N) * sizeof(float));
            for (int64_t i = 0; i < Kd * N; i++) w[i] = frand(&seed) + frand(&seed) + frand(&seed) + frand(&seed);
            for (int64_t n = 0; n < N; n++) {
                float mx = 1e-9f;
                for (int64_t k = 0; k < Kd; k++) mx = fmaxf(mx, fabsf(w[k * N + n]));
                for (int64_t k = 0; k < Kd; k++) Bm[k * N + n] = (int8_t)lrintf(w[k * N + n] * 127.0f / mx);
            }
            free(w);
        }
        wm_igemm_args *g = &j->i;
        g->M = M;
        g->N = N;
        g->K = Kd;
        g->A = A;
        g->lda = Kd;
        g->B = Bm;
        g->ldb = N;
        g->b_signed = 1;
        g->a_zero_point = 128;
        g->C = C;
        g->ldc = N;
        if (o.fout) { /* the float output in C's place (as large), scales 1/64 .. 2/64 per column */
            float *bsc = xmalloc((size_t)N * sizeof(float));
            for (int64_t n = 0; n < N; n++) bsc[n] = (1.0f + (float)(n % 64) / 64.0f) / 64.0f;
            g->C = NULL;
            g->Cf = (float *)C;
            g->ldcf = N;
            g->a_scale = 0.01f;
            g->b_scale = bsc;
            g->b_scale_count = N;
        }
        if (o.packed) {
            void *P = xmalloc(wm_igemm_pack_b_size(Kd, N));
            wm_igemm_pack_b(Kd, N, Bm, N, 0, NULL, P);
            g->packed_b = P;
        }
        g->work = xmalloc(wm_igemm_workspace_size(g, nth));
        j->kind = 4;
        ms = time_job(pool, j, &o, nth, NULL, &runs);
        flops = 2.0 * M * N * Kd;
        bytes = (double)Kd * N;
    } else {
        return usage();
    }
    printf("{\"cmd\": \"%s\", \"kernels\": \"%s\", \"threads\": %d, \"median_ms\": %.6f, \"gflops\": %.3f, "
           "\"gbps\": %.3f, \"cpu_ms\": %.6f, \"gflops_cpu\": %.3f, \"gbps_cpu\": %.3f, \"min_ms\": %.6f, "
           "\"gflops_min\": %.3f, \"gbps_min\": %.3f, \"runs\": %d}\n",
           cmd, K->name, nth, ms, flops / ms / 1e6, bytes / ms / 1e6, g_cpu_median, flops / g_cpu_median / 1e6,
           bytes / g_cpu_median / 1e6, g_min, flops / g_min / 1e6, bytes / g_min / 1e6, runs);
    wm_pool_free(pool);
    return 0;
}
