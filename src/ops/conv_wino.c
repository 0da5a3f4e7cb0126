/*
 * conv_wino.c - Winograd F(m x m, 3 x 3) for NhwcConv (conv_nhwc.c): a
 * channels-last 3x3, stride 1, dilation 1 convolution of group 1, any pads,
 * in m x m output tiles (m = 2 or 4; Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2015).
 *
 * Each tile's a x a input patch (a = m + 2) becomes V = B^T d B per channel;
 * the weights, U = G g G^T per (output, input) channel pair, are transformed
 * and packed once at session creation; then for each of the a x a points p
 * one GEMM Mo_p[tiles, M] = V_p[tiles, C] x U_p[C, M], and each tile's
 * output is A^T Mo A plus the bias and the residual Z, clamped (none, ReLU,
 * Clip). Multiplications per output fall from 9 C to a^2 C / m^2: 4 C for
 * F(2, 3), 2.25 C for F(4, 3), at the price of the transforms and of
 * rounding error a few times that of the direct sum (F(4, 3) most).
 *
 * Many tiles: each thread takes blocks of tiles and runs all three stages
 * on them in its own scratch (sized to stay in L2). Few tiles (a small
 * image on many threads): the stages run one after another over all tiles,
 * the a x a GEMMs shared out between the threads. Every output is computed
 * the same way in both, so results do not depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cnn_kern.h"
#include "ops/conv_impl.h"

/* a stride (floats) not a multiple of 4 KiB, and whose 64-byte line count is odd: the a x a streams of a
   transform, one stride apart, then fall into different L1 sets */
static int64_t wino_ld(int64_t n) {
    int64_t l = (n + 15) / 16 * 16;
    return (l / 16) % 2 ? l : l + 16;
}

wm_status wm_wino_init(wm_node *n, const float *w, int64_t M, int64_t C, int m, wm_wino *g, wm_error *err) {
    static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    static const double G4[6][3] = {{0.25, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
    memset(g, 0, sizeof *g);
    g->m = m, g->a = m + 2, g->C = C, g->M = M;
    g->ldv = C % 1024 ? C : C + 16, g->ldm = M % 1024 ? M : M + 16;
    const int a = g->a, P = a * a;
    g->ustride = wm_conv_up64(wm_sgemm_pack_b_size(C, M));
    float *u = malloc((size_t)(C * M) * sizeof *u + 1), *pk = wm_node_alloc(n, (size_t)P * g->ustride);
    if (!u || !pk) {
        free(u);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    for (int p = 0; p < P; p++) {
        int i = p / a, j = p % a;
        const double *gi = m == 2 ? G2[i] : G4[i], *gj = m == 2 ? G2[j] : G4[j];
        for (int64_t c = 0; c < C; c++)
            for (int64_t o = 0; o < M; o++) { /* (G g G^T)[i][j] = sum_{r,s} G[i][r] g[r][s] G[j][s] */
                const float *k = w + (o * C + c) * 9;
                double v = 0;
                for (int r = 0; r < 3; r++)
                    for (int s = 0; s < 3; s++) v += gi[r] * (double)k[r * 3 + s] * gj[s];
                u[c * M + o] = (float)v;
            }
        wm_sgemm_pack_b(0, C, M, u, M, (float *)((uint8_t *)pk + (size_t)p * g->ustride));
    }
    free(u);
    g->u = pk;
    n->packed_bytes += (uint64_t)P * g->ustride;
    return WM_OK;
}

typedef struct wino_plan {
    int64_t th, tw, T, tiles; /* tiles down, across, per image, in all */
    int64_t tb, units;        /* tiles per block, blocks */
    int phases;               /* few tiles: stage after stage over all of them */
    int64_t pv, pm;           /* point strides of V and Mo: rows (tb, or all tiles) x ldv / ldm, see wino_ld */
    size_t gemm1;             /* one GEMM's scratch */
    size_t vb, mb;            /* bytes of V and of Mo (the point strides times a * a) */
    size_t v_at, share;       /* blocks: per thread V, Mo, GEMM scratch from v_at, `share` bytes each; phases:
                                 V, Mo, then nth GEMM scratches */
    size_t bytes;
} wino_plan;

static void wino_plan_make(const wm_wino *g, const wm_win *w, int64_t N, int nth, wino_plan *p) {
    memset(p, 0, sizeof *p);
    const int64_t P = (int64_t)g->a * g->a;
    p->th = (w->out[1] + g->m - 1) / g->m, p->tw = (w->out[2] + g->m - 1) / g->m;
    p->T = p->th * p->tw, p->tiles = N * p->T;
    /* blocks of V and Mo within about 512 KiB (L2), 16 tiles or more */
    int64_t per = P * (g->ldv + g->ldm) * (int64_t)sizeof(float), tb = (512 << 10) / (per > 0 ? per : 1);
    tb = tb < 16 ? 16 : tb > 256 ? 256 : tb;
    /* stage after stage where blocks of 32 tiles would not give each thread two, unless V and Mo of all tiles
       would pass 64 MiB */
    const int64_t nt = p->tiles > 0 ? p->tiles : 1; /* no tiles (an empty batch): a plan for one, never run */
    p->phases = nth > 1 && nt < 2 * (int64_t)nth * 32 && nt * per <= (64 << 20);
    if (p->phases) tb = nt;
    int64_t units = (nt + tb - 1) / tb;
    if (!p->phases && nth > 1 && units % nth) units += nth - units % nth; /* whole rounds of shares */
    p->tb = (nt + units - 1) / units, p->units = (nt + p->tb - 1) / p->tb;
    p->pv = wino_ld(p->tb * g->ldv), p->pm = wino_ld(p->tb * g->ldm);
    wm_sgemm_args a = {.M = p->tb, .N = g->M, .K = g->C, .packed_b = (const float *)1, .lda = g->ldv};
    p->gemm1 = wm_conv_up64(wm_sgemm_workspace_size(&a, 1));
    p->v_at = wm_conv_up64((size_t)g->C * sizeof(float) + 1);
    p->vb = wm_conv_up64((size_t)(P * p->pv) * sizeof(float));
    p->mb = wm_conv_up64((size_t)(P * p->pm) * sizeof(float));
    p->share = p->phases ? 0 : p->vb + p->mb + p->gemm1;
    p->bytes = p->v_at + (p->phases ? p->vb + p->mb + (size_t)nth * p->gemm1 : (size_t)nth * p->share) + 64;
}

size_t wm_wino_ws(const wm_wino *g, const wm_win *w, int64_t N, int nth) {
    wino_plan p;
    wino_plan_make(g, w, N, nth, &p);
    return p.bytes;
}

typedef struct wino_job {
    const wm_wino *g;
    const wino_plan *p;
    const wm_win *w;
    const float *x, *b, *z, *zero;
    float lo, hi;
    float *y;
    uint8_t *ws;
    float *v, *mo; /* phases */
    const wm_pool *pool;
} wino_job;

/* Input transform of tiles [t0, t1) into rows r0 .. of V (point stride pv). */
static void wino_in_tiles(const wino_job *j, int64_t t0, int64_t t1, float *v, int64_t r0) {
    const wm_wino *g = j->g;
    const wino_plan *p = j->p;
    const wm_win *w = j->w;
    const int a = g->a, m = g->m;
    const int64_t H = w->in[1], W = w->in[2], C = g->C;
    const float *d[36];
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / p->T, ty = (t % p->T) / p->tw, tx = (t % p->T) % p->tw;
        int64_t iy0 = ty * m - w->pb[1], ix0 = tx * m - w->pb[2];
        for (int i = 0; i < a; i++)
            for (int k = 0; k < a; k++) {
                int64_t iy = iy0 + i, ix = ix0 + k;
                d[i * a + k] = iy >= 0 && iy < H && ix >= 0 && ix < W ? j->x + ((n * H + iy) * W + ix) * C : j->zero;
            }
        wm_cnn_wino_in(m, d, 0, C, v + (r0 + t - t0) * g->ldv, p->pv);
    }
}

/* Output transform of tiles [t0, t1) from rows r0 .. of Mo, with bias, residual and clamp. */
static void wino_out_tiles(const wino_job *j, int64_t t0, int64_t t1, const float *mo, int64_t r0) {
    const wm_wino *g = j->g;
    const wino_plan *p = j->p;
    const wm_win *w = j->w;
    const int m = g->m;
    const int64_t OH = w->out[1], OW = w->out[2], M = g->M;
    float *y[16];
    const float *z[16];
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / p->T, ty = (t % p->T) / p->tw, tx = (t % p->T) % p->tw;
        for (int i = 0; i < m; i++)
            for (int k = 0; k < m; k++) {
                int64_t oy = ty * m + i, ox = tx * m + k, off = ((n * OH + oy) * OW + ox) * M;
                int in = oy < OH && ox < OW;
                y[i * m + k] = in ? j->y + off : NULL;
                z[i * m + k] = in && j->z ? j->z + off : NULL;
            }
        wm_cnn_wino_out(m, mo + (r0 + t - t0) * g->ldm, p->pm, 0, M, y, j->z ? z : NULL, j->b, j->lo, j->hi);
    }
}

/* the GEMM of point q over rows [r0, r1): Mo_q = V_q x U_q */
static void wino_gemm(const wino_job *j, int q, int64_t r0, int64_t r1, const float *v, float *mo, void *work) {
    const wm_wino *g = j->g;
    wm_sgemm_args a = {.M = r1 - r0, .N = g->M, .K = g->C, .alpha = 1.0f, .lda = g->ldv, .ldc = g->ldm};
    a.A = v + q * j->p->pv + r0 * g->ldv;
    a.packed_b = (const float *)((const uint8_t *)g->u + (size_t)q * g->ustride);
    a.C = mo + q * j->p->pm + r0 * g->ldm;
    a.work = work;
    wm_kernels_get()->sgemm(&a, 0, 1);
}

/* blocks: one claimed share per block of tiles, all three stages in the thread's scratch */
static void wino_blocks_part(void *arg, int ith, int nth) {
    const wino_job *j = arg;
    const wino_plan *p = j->p;
    const int P = j->g->a * j->g->a;
    long lo, hi;
    wm_split((long)p->units, ith, nth, &lo, &hi);
    uint8_t *mine = j->ws + p->v_at + (size_t)wm_pool_thread(j->pool) * p->share;
    float *v = (float *)mine, *mo = (float *)(mine + p->vb);
    void *work = mine + p->share - p->gemm1;
    for (long u = lo; u < hi; u++) {
        int64_t t0 = u * p->tb, t1 = t0 + p->tb < p->tiles ? t0 + p->tb : p->tiles;
        wino_in_tiles(j, t0, t1, v, 0);
        for (int q = 0; q < P; q++) wino_gemm(j, q, 0, t1 - t0, v, mo, work);
        wino_out_tiles(j, t0, t1, mo, 0);
    }
}

static void wino_in_part(void *arg, int ith, int nth) {
    const wino_job *j = arg;
    long lo, hi;
    wm_split((long)j->p->tiles, ith, nth, &lo, &hi);
    wino_in_tiles(j, lo, hi, j->v, lo);
}

static void wino_out_part(void *arg, int ith, int nth) {
    const wino_job *j = arg;
    long lo, hi;
    wm_split((long)j->p->tiles, ith, nth, &lo, &hi);
    wino_out_tiles(j, lo, hi, j->mo, lo);
}

/* phases: share s = (point, row chunk) */
static void wino_gemm_part(void *arg, int ith, int nth) {
    const wino_job *j = arg;
    const int P = j->g->a * j->g->a;
    int chunks = nth / P;
    long lo, hi;
    wm_split((long)j->p->tiles, ith % chunks, chunks, &lo, &hi);
    void *work = j->ws + j->p->v_at + j->p->vb + j->p->mb + (size_t)wm_pool_thread(j->pool) * j->p->gemm1;
    wino_gemm(j, ith / chunks, lo, hi, j->v, j->mo, work);
}

void wm_wino_run(wm_exec *x, const wm_wino *g, const wm_win *w, int64_t N, const float *X, const float *b,
                 const float *z, float lo, float hi, float *y) {
    wino_plan p;
    wino_plan_make(g, w, N, x->nth, &p);
    if (!p.tiles || !g->M) return;
    float *zero = (float *)x->ws;
    memset(zero, 0, (size_t)g->C * sizeof *zero);
    wino_job j = {g, &p, w, X, b, z, zero, lo, hi, y, x->ws, NULL, NULL, x->pool};
    if (!p.phases) {
        if (x->nth == 1 || p.units == 1) wino_blocks_part(&j, 0, 1);
        else wm_pool_run_shares(x->pool, wino_blocks_part, &j, (int)p.units);
        return;
    }
    const int P = g->a * g->a;
    j.v = (float *)(x->ws + p.v_at);
    j.mo = (float *)(x->ws + p.v_at + p.vb);
    int nt = p.tiles < x->nth ? (int)p.tiles : x->nth;
    wm_pool_run(x->pool, wino_in_part, &j, nt);
    /* four GEMM shares a thread or more (36 points on 16 threads: 72), each of 16 tiles or more (the weights of
       each point are read once per share) */
    int chunks = (4 * x->nth + P - 1) / P;
    if (chunks > p.tiles / 16) chunks = p.tiles >= 32 ? (int)(p.tiles / 16) : 1;
    wm_pool_run_shares(x->pool, wino_gemm_part, &j, P * chunks);
    wm_pool_run(x->pool, wino_out_part, &j, nt);
}
