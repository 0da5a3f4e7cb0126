/*
 * conv_f32.c - the float32 convolution kernel (see conv_impl.h).
 *
 * GEMM form, tiled over output positions: for each image n, group g and
 * tile of Pt (256) output positions [p0, p1):
 *   T[Pt, Mg] = col^T[Pt, K] x W_g^T[K, Mg],  Y[n, g*Mg + m, p0 + i] = T[i, m] + b
 * with K = C/g * kernel size. col^T is built straight from the input (one
 * row of K taps per position; a 1x1 stride-1 unpadded conv transposes the
 * input tile) and is the GEMM's A, read in place by the kernel table's
 * sgemm; W_g^T is its B, packed once at session creation (wm_conv_pack);
 * the NCHW store is an 8x8-block transpose that adds the bias. This
 * orientation keeps the kernel on its fast path (packed B, A in place)
 * for the small output-channel counts of CNNs, where W x col with the
 * activations as the packed B ran 2-3x slower. Threads take whole tiles
 * (their own scratch, one-share GEMMs) when there are enough of them;
 * otherwise tiles run one after another with col^T, the GEMM and the store
 * split over the threads. Every output element is one GEMM reduction in a
 * fixed order: results do not depend on the thread count.
 * Depthwise convolutions (one input channel per group) run a direct loop
 * per output plane (vector axpy over output rows).
 */
#include <math.h>
#include <string.h>

#include "ops/cnn_kern.h"
#include "ops/conv_impl.h"
#include "ops/gemm.h"

/* ---------------------------------------------------------------- GEMM on the kernel table */

void wm_conv_gemm(wm_exec *x, const wm_sgemm_args *a) {
    wm_sgemm_pool(x, a, x->nth, wm_sgemm_workspace_size(a, 1));
}

size_t wm_conv_gemm_ws(int64_t M, int64_t N, int64_t K, int nth) {
    wm_sgemm_args a = {.M = M, .N = N, .K = K};
    return wm_sgemm_workspace_size(&a, nth) + 64;
}

/* ---------------------------------------------------------------- im2col */

/*
 * Rows [q0, q1) of the transposed im2col tile of positions [p0, p1) of one
 * image and group: row i (position p0 + i) holds the K = C * kernel values
 * ((c * kz + z) * ky + y) * kx + x under the taps of that position (0 in the
 * padding), K floats apart. Positions whose x window lies inside the input
 * copy each kernel row straight.
 */
static void im2colT_tile(const float *x, const wm_win *w, int64_t Cg, float *colT, int64_t p0, int64_t q0, int64_t q1) {
    int64_t inP = wm_win_prod(w->in), K = Cg * wm_win_prod(w->k), k2 = w->k[2], d2 = w->d[2], in2 = w->in[2];
    int64_t o12 = w->out[1] * w->out[2], p = p0 + q0;
    int64_t oz = p / o12, oy = (p / w->out[2]) % w->out[1], ox = p % w->out[2];
    for (int64_t q = q0; q < q1; q++) {
        float *d = colT + q * K, *dend = d + K;
        int64_t xs = ox * w->s[2] - w->pb[2];
        int inside = xs >= 0 && xs + (k2 - 1) * d2 < in2;
        int wide = inside && d2 == 1 && k2 <= 8 && xs + 8 <= in2; /* 8-float copies: within the input row */
        for (int64_t c = 0; c < Cg; c++) {
            const float *pl = x + c * inP;
            for (int64_t kz = 0; kz < w->k[0]; kz++) {
                int64_t iz = oz * w->s[0] + kz * w->d[0] - w->pb[0];
                for (int64_t ky = 0; ky < w->k[1]; ky++, d += k2) {
                    int64_t iy = oy * w->s[1] + ky * w->d[1] - w->pb[1];
                    if (iz < 0 || iz >= w->in[0] || iy < 0 || iy >= w->in[1]) {
                        for (int64_t kx = 0; kx < k2; kx++) d[kx] = 0;
                        continue;
                    }
                    const float *r = pl + (iz * w->in[1] + iy) * in2 + xs;
                    if (wide && d + 8 <= dend) /* the extra floats land on this position's next taps, rewritten next */
                        memcpy(d, r, 8 * sizeof *d);
                    else if (inside && d2 == 1)
                        for (int64_t kx = 0; kx < k2; kx++) d[kx] = r[kx];
                    else if (inside)
                        for (int64_t kx = 0; kx < k2; kx++) d[kx] = r[kx * d2];
                    else
                        for (int64_t kx = 0; kx < k2; kx++) {
                            int64_t ix = xs + kx * d2;
                            d[kx] = ix >= 0 && ix < in2 ? r[kx * d2] : 0.0f;
                        }
                }
            }
        }
        if (++ox == w->out[2]) {
            ox = 0;
            if (++oy == w->out[1]) oy = 0, oz++;
        }
    }
}

/*
 * Rows [r0, r1) of the im2col tile of positions [p0, p1) of one image and
 * group: row r = ((c * kz + z) * ky + y) * kx + x holds, for each position,
 * the input under tap (z, y, x) of channel c (0 in the padding); rows are
 * ld floats apart. Runs along x are copied whole.
 */
static void im2col_tile(const float *x, const wm_win *w, float *col, int64_t ld, int64_t r0, int64_t r1, int64_t p0,
                        int64_t p1) {
    int64_t inP = wm_win_prod(w->in), kp = wm_win_prod(w->k), o12 = w->out[1] * w->out[2];
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r / kp, q = r % kp;
        int64_t kx = q % w->k[2], ky = (q / w->k[2]) % w->k[1], kz = q / (w->k[2] * w->k[1]);
        const float *plane = x + c * inP;
        float *dst = col + r * ld;
        int64_t offx = kx * w->d[2] - w->pb[2], x0, x1;
        wm_win_range(w->out[2], w->in[2], w->s[2], offx, &x0, &x1);
        int64_t p = p0, oz = p0 / o12, oy = (p0 / w->out[2]) % w->out[1], ox = p0 % w->out[2];
        while (p < p1) {
            int64_t run = w->out[2] - ox < p1 - p ? w->out[2] - ox : p1 - p, e = ox + run;
            int64_t iz = oz * w->s[0] + kz * w->d[0] - w->pb[0], iy = oy * w->s[1] + ky * w->d[1] - w->pb[1];
            float *d = dst + (p - p0) - ox; /* indexed by ox */
            if (iz < 0 || iz >= w->in[0] || iy < 0 || iy >= w->in[1]) {
                memset(d + ox, 0, (size_t)run * sizeof *d);
            } else {
                const float *src = plane + (iz * w->in[1] + iy) * w->in[2] + offx;
                int64_t a = x0 > ox ? x0 : ox, b = x1 < e ? x1 : e; /* the taps inside the input */
                if (a >= b) {
                    memset(d + ox, 0, (size_t)run * sizeof *d);
                } else {
                    if (a > ox) memset(d + ox, 0, (size_t)(a - ox) * sizeof *d);
                    if (w->s[2] == 1) memcpy(d + a, src + a, (size_t)(b - a) * sizeof *d);
                    else
                        for (int64_t i = a; i < b; i++) d[i] = src[i * w->s[2]];
                    if (b < e) memset(d + b, 0, (size_t)(e - b) * sizeof *d);
                }
            }
            p += run;
            ox = 0;
            if (++oy == w->out[1]) oy = 0, oz++;
        }
    }
}

/* ---------------------------------------------------------------- depthwise */

/* Length of the zero-padded input row a depthwise output row reads. */
static int64_t padded_row(const wm_win *w) { return (w->out[2] - 1) * w->s[2] + (w->k[2] - 1) * w->d[2] + 1; }
/* Rows of the zero-padded input plane the windows of a 2-D depthwise conv read. */
static int64_t padded_rows(const wm_win *w) { return (w->out[1] - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] + 1; }

/* Other 2-D convolutions whose padded plane is at most 4 MiB pad the whole plane once; others pad row by row. */
static int whole_plane(const wm_win *w) {
    return w->out[0] == 1 && w->k[0] == 1 && w->in[0] == 1 && padded_rows(w) * padded_row(w) <= (1 << 20);
}

size_t wm_conv_plane_ws(const wm_win *w) {
    int64_t n = whole_plane(w) ? padded_rows(w) * padded_row(w) : padded_row(w);
    return ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
}

/* row[0, wp) = input row src placed at pb (zeros around it) */
static void pad_row(float *row, const float *src, int64_t wp, int64_t pb, int64_t n) {
    int64_t c0 = pb < wp ? pb : wp, c1 = pb + n < wp ? pb + n : wp; /* where the input lands in the row */
    if (c0 < 0) c0 = 0;
    if (c1 < c0) c1 = c0;
    if (c0 > 0) memset(row, 0, (size_t)c0 * sizeof *row);
    if (c1 > c0) memcpy(row + c0, src + (c0 - pb), (size_t)(c1 - c0) * sizeof *row);
    if (c1 < wp) memset(row + c1, 0, (size_t)(wp - c1) * sizeof *row);
}

/* d[ox] += sum_kx wr[kx] * row[ox * s + kx * dil] */
static void conv_row(float *d, const float *row, const float *wr, const wm_win *w) {
    if (w->s[2] == 1) {
        wm_cnn_dwrow(d, row, wr, w->k[2], w->d[2], w->out[2]);
        return;
    }
    for (int64_t kx = 0; kx < w->k[2]; kx++)
        for (int64_t ox = 0; ox < w->out[2]; ox++) d[ox] += wr[kx] * row[ox * w->s[2] + kx * w->d[2]];
}

/*
 * 2-D, stride 1 along x, kernels up to 16 x 3: interior outputs (every tap
 * inside the row) in one vector pass per output row straight from the
 * input, the border outputs one by one. No padding copy. (Wider kernels
 * have too many border taps: they read a padded plane instead.)
 */
static int direct_rows(const wm_win *w) {
    return w->out[0] == 1 && w->k[0] == 1 && w->in[0] == 1 && w->s[2] == 1 && w->k[1] <= 16 && w->k[2] <= 3;
}

static void plane_direct(const float *x, const float *wk, float b, float *y, const wm_win *w) {
    int64_t in1 = w->in[1], in2 = w->in[2], out2 = w->out[2], k1 = w->k[1], k2 = w->k[2], d2 = w->d[2], pb2 = w->pb[2];
    int64_t xl = pb2 < out2 ? pb2 : out2, xh = in2 + pb2 - (k2 - 1) * d2; /* interior outputs [xl, xh) */
    if (xh > out2) xh = out2;
    if (xh < xl) xh = xl;
    const float *rows[16];
    for (int64_t oy = 0; oy < w->out[1]; oy++) {
        float *yr = y + oy * out2;
        for (int64_t ky = 0; ky < k1; ky++) {
            int64_t iy = oy * w->s[1] + ky * w->d[1] - w->pb[1];
            rows[ky] = iy >= 0 && iy < in1 ? x + iy * in2 + (xl - pb2) : NULL;
        }
        if (xh > xl) wm_cnn_dwconv_row(yr + xl, rows, (int)k1, wk, k2, d2, b, xh - xl);
        for (int64_t ox = 0; ox < out2; ox++) {
            if (ox == xl && xh > xl) ox = xh;
            if (ox >= out2) break;
            float a = b;
            for (int64_t ky = 0; ky < k1; ky++) {
                if (!rows[ky]) continue;
                const float *r = rows[ky] - (xl - pb2); /* the input row */
                for (int64_t kx = 0; kx < k2; kx++) {
                    int64_t ix = ox - pb2 + kx * d2;
                    if (ix >= 0 && ix < in2) a += wk[ky * k2 + kx] * r[ix];
                }
            }
            yr[ox] = a;
        }
    }
}

void wm_conv_plane_f32(const float *x, const float *wk, float b, float *y, const wm_win *w, float *buf) {
    if (direct_rows(w)) {
        plane_direct(x, wk, b, y, w);
        return;
    }
    int64_t P = wm_win_prod(w->out), wp = padded_row(w), in2 = w->in[2];
    for (int64_t i = 0; i < P; i++) y[i] = b;
    if (whole_plane(w)) {
        int64_t hp = padded_rows(w);
        for (int64_t r = 0; r < hp; r++) {
            int64_t iy = r - w->pb[1];
            if (iy >= 0 && iy < w->in[1]) pad_row(buf + r * wp, x + iy * in2, wp, w->pb[2], in2);
            else memset(buf + r * wp, 0, (size_t)wp * sizeof *buf);
        }
        for (int64_t oy = 0; oy < w->out[1]; oy++) {
            if (w->s[2] == 1 && w->k[1] <= 16) { /* every kernel row at once, from the padded rows */
                const float *rows[16];
                for (int64_t ky = 0; ky < w->k[1]; ky++) rows[ky] = buf + (oy * w->s[1] + ky * w->d[1]) * wp;
                wm_cnn_dwconv_row(y + oy * w->out[2], rows, (int)w->k[1], wk, w->k[2], w->d[2], b, w->out[2]);
                continue;
            }
            for (int64_t ky = 0; ky < w->k[1]; ky++)
                conv_row(y + oy * w->out[2], buf + (oy * w->s[1] + ky * w->d[1]) * wp, wk + ky * w->k[2], w);
        }
        return;
    }
    for (int64_t oz = 0; oz < w->out[0]; oz++)
        for (int64_t oy = 0; oy < w->out[1]; oy++) {
            float *d = y + (oz * w->out[1] + oy) * w->out[2];
            for (int64_t kz = 0; kz < w->k[0]; kz++) {
                int64_t iz = oz * w->s[0] + kz * w->d[0] - w->pb[0];
                if (iz < 0 || iz >= w->in[0]) continue;
                for (int64_t ky = 0; ky < w->k[1]; ky++) {
                    int64_t iy = oy * w->s[1] + ky * w->d[1] - w->pb[1];
                    if (iy < 0 || iy >= w->in[1]) continue;
                    pad_row(buf, x + (iz * w->in[1] + iy) * in2, wp, w->pb[2], in2);
                    conv_row(d, buf, wk + (kz * w->k[1] + ky) * w->k[2], w);
                }
            }
        }
}

/* ---------------------------------------------------------------- driver */

size_t wm_conv_pack_size(int64_t K, int64_t Mg, int64_t G) {
    return (size_t)G * ((wm_sgemm_pack_b_size(K, Mg) + 63) & ~(size_t)63);
}

void wm_conv_pack(const float *wt, int64_t K, int64_t Mg, int64_t G, float *packed) {
    size_t per = (wm_sgemm_pack_b_size(K, Mg) + 63) & ~(size_t)63;
    for (int64_t g = 0; g < G; g++) /* op(B) = W_g^T: W_g stored [Mg, K] */
        wm_sgemm_pack_b(1, K, Mg, wt + g * Mg * K, K, (float *)((uint8_t *)packed + (size_t)g * per));
}

typedef struct conv_plan {
    int direct_colT;             /* col^T built per position (few kernel rows) rather than im2col + transpose */
    int64_t N, Cg, Mg, K, P, inP, kp, Pt, ntiles, units;
    int pointwise;               /* the input is the col matrix */
    size_t gper, colt, tt;       /* per share: GEMM scratch, col^T tile, GEMM output tile (bytes) */
    size_t gstride, pack;        /* packed weights: bytes per group; bytes to pack this run (0: prepacked) */
} conv_plan;

int64_t wm_conv_tile_rows(int64_t P, int64_t images, int nth) {
    int64_t pt = P <= 320 ? (P > 0 ? P : 1) : 256; /* a whole small image when it is at most 1.25 tiles */
    int64_t nt = (P + pt - 1) / pt;
    if (nth > 1 && nt > 1 && images * nt >= 2 * nth) {
        /* near-equal tiles (<= 256 rows, a multiple of 8 for the 8x8 transposes), as many as make the
         * shares' tile counts match: 3136 positions were 12 x 256 + 64, split 7 | 6 tiles */
        while ((images * nt) % nth) nt++;
        int64_t t = ((P + nt - 1) / nt + 7) / 8 * 8;
        if (t >= 16 && t <= pt) pt = t;
    }
    return pt;
}

/* nth > 1: tiles are cut so that whole-tile shares come out even (workspace sizes use nth 0: the largest tiles) */
static void make_plan(const wm_win *w, int64_t N, int64_t C, int64_t M, int64_t G, int need_pack, int nth,
                      conv_plan *p) {
    memset(p, 0, sizeof *p);
    p->N = N, p->Cg = C / G, p->Mg = M / G, p->kp = wm_win_prod(w->k), p->K = p->Cg * p->kp;
    p->P = wm_win_prod(w->out), p->inP = wm_win_prod(w->in);
    p->pointwise = 1;
    for (int i = 0; i < WM_CNN_ND; i++)
        p->pointwise &= w->k[i] == 1 && w->s[i] == 1 && w->pb[i] == 0 && w->pe[i] == 0;
    p->Pt = wm_conv_tile_rows(p->P, N * G, nth);
    p->ntiles = (p->P + p->Pt - 1) / p->Pt;
    p->units = N * G * p->ntiles;
    wm_sgemm_args a = {.M = p->Pt, .N = p->Mg, .K = p->K, .packed_b = (const float *)1};
    p->gper = wm_conv_up64(wm_sgemm_workspace_size(&a, 1));
    p->direct_colT = p->Cg * w->k[0] * w->k[1] <= 32;
    p->colt = (p->pointwise || p->direct_colT ? 1 : 2) * wm_conv_up64((size_t)(p->K * p->Pt) * sizeof(float));
    p->tt = wm_conv_up64((size_t)(p->Pt * p->Mg) * sizeof(float));
    p->gstride = wm_conv_pack_size(p->K, p->Mg, 1);
    p->pack = need_pack ? (size_t)G * p->gstride : 0;
}

typedef struct conv_job {
    const conv_plan *pl;
    const wm_win *w;
    const float *x, *wt, *b;
    const wm_conv_post *post;
    const uint8_t *wpack; /* packed W_g^T per group */
    float *y;
    int64_t C, M, G;
    uint8_t *shares; /* nth x (GEMM scratch, col tile, output tile); depthwise: nth padded rows */
    size_t share;
    /* shared mode: the tile at hand, its col and output tiles */
    int64_t n, g, p0, p1;
    float *col, *T;
} conv_job;

static void unit_geom(const conv_job *j, int64_t u, int64_t *n, int64_t *g, int64_t *p0, int64_t *p1) {
    const conv_plan *pl = j->pl;
    int64_t t = u % pl->ntiles;
    *g = (u / pl->ntiles) % j->G;
    *n = u / (pl->ntiles * j->G);
    *p0 = t * pl->Pt;
    *p1 = *p0 + pl->Pt < pl->P ? *p0 + pl->Pt : pl->P;
}

/*
 * col^T of tile (n, g, p0..p1) in the share's col area: the input tile
 * transposed (pointwise), col^T rows built per position (few kernel rows
 * per position), or im2col rows (K x Pt, after col^T) transposed by 8x8
 * blocks. Parts: positions [q0, q1) of the tile, or (im2col) rows [q0, q1)
 * of K; a share builds all of it with (0, whole). Returns col^T.
 */
static float *make_colT(const conv_job *j, int64_t n, int64_t g, int64_t p0, int64_t p1, int64_t q0, int64_t q1,
                        float *area) {
    const conv_plan *pl = j->pl;
    const float *xg = j->x + (n * j->C + g * pl->Cg) * pl->inP;
    if (pl->pointwise) wm_cnn_transpose(xg + q0 * pl->P + p0, pl->P, area + q0, pl->K, q1 - q0, p1 - p0, NULL);
    else if (pl->direct_colT) im2colT_tile(xg, j->w, pl->Cg, area, p0, q0, q1);
    else {
        float *col = (float *)((uint8_t *)area + pl->colt / 2);
        im2col_tile(xg, j->w, col, pl->Pt, q0, q1, p0, p1);
        wm_cnn_transpose(col + q0 * pl->Pt, pl->Pt, area + q0, pl->K, q1 - q0, p1 - p0, NULL);
    }
    return area;
}

/* the range make_colT splits over threads: positions (direct col^T) or rows of K */
static int64_t colT_parts(const conv_plan *pl, int64_t p0, int64_t p1) {
    return !pl->pointwise && pl->direct_colT ? p1 - p0 : pl->K;
}

/* T[p1 - p0, Mg] = col^T x W_g^T */
static void unit_args(const conv_job *j, int64_t g, int64_t p0, int64_t p1, const float *colT, float *T, void *work,
                      wm_sgemm_args *a) {
    const conv_plan *pl = j->pl;
    memset(a, 0, sizeof *a);
    a->M = p1 - p0, a->N = pl->Mg, a->K = pl->K, a->alpha = 1.0f;
    a->A = colT, a->lda = pl->K;
    a->packed_b = (const float *)(j->wpack + (size_t)g * pl->gstride);
    a->C = T, a->ldc = pl->Mg;
    a->work = work;
}

int wm_conv_post_clamp(const wm_conv_post *post, float *lo, float *hi) {
    *lo = -INFINITY, *hi = INFINITY;
    if (!post) return 1;
    if (post->hard_sigmoid) return 0;
    if (post->act == WM_ACT_RELU) *lo = 0.0f;
    else if (post->act == WM_ACT_CLIP) *lo = post->a, *hi = post->b;
    return post->act == WM_ACT_NONE || post->act == WM_ACT_RELU || post->act == WM_ACT_CLIP;
}

/* the post-ops the store can apply itself: a residual, then none / ReLU / Clip (bounds in *e) */
static int post_in_store(const wm_conv_post *post, wm_cnn_epi *e) {
    e->z = post ? post->z : NULL;
    return wm_conv_post_clamp(post, &e->lo, &e->hi);
}

/* y[n, g*Mg + m, p0 + i] = post(T[i, m] + bias[g*Mg + m]) for m in [m0, m1): the residual and a ReLU/Clip in the
   transposing store (one pass over y), other activations after it */
static void untile(const conv_job *j, int64_t n, int64_t g, int64_t p0, int64_t p1, const float *T, int64_t m0, int64_t m1) {
    const conv_plan *pl = j->pl;
    wm_cnn_epi e;
    uint64_t off0 = (uint64_t)((n * j->M + g * pl->Mg + m0) * pl->P + p0);
    if (post_in_store(j->post, &e)) {
        e.bias = j->b ? j->b + g * pl->Mg + m0 : NULL;
        if (e.z) e.z += off0;
        wm_cnn_transpose_epi(T + m0, pl->Mg, j->y + off0, pl->P, p1 - p0, m1 - m0, &e);
        return;
    }
    wm_cnn_transpose(T + m0, pl->Mg, j->y + off0, pl->P, p1 - p0, m1 - m0, j->b ? j->b + g * pl->Mg + m0 : NULL);
    if (j->post)
        for (int64_t m = m0; m < m1; m++) {
            uint64_t off = (uint64_t)((n * j->M + g * pl->Mg + m) * pl->P + p0);
            wm_conv_post_apply(j->post, j->y + off, off, p1 - p0);
        }
}

/* per-share mode: whole tiles, one-share GEMMs on this share's scratch */
static void tiles_part(void *arg, int ith, int nth) {
    const conv_job *j = arg;
    const conv_plan *pl = j->pl;
    long lo, hi;
    wm_split((long)pl->units, ith, nth, &lo, &hi);
    uint8_t *mine = j->shares + (size_t)ith * j->share;
    float *colT = (float *)(mine + pl->gper), *T = (float *)(mine + pl->gper + pl->colt);
    const wm_kernels *kt = wm_kernels_get();
    for (long u = lo; u < hi; u++) {
        int64_t n, g, p0, p1;
        unit_geom(j, u, &n, &g, &p0, &p1);
        make_colT(j, n, g, p0, p1, 0, colT_parts(pl, p0, p1), colT);
        wm_sgemm_args a;
        unit_args(j, g, p0, p1, colT, T, mine, &a);
        kt->sgemm(&a, 0, 1);
        untile(j, n, g, p0, p1, T, 0, pl->Mg);
    }
}

/* shared mode: a part of the tile's col^T */
static void col_part(void *arg, int ith, int nth) {
    const conv_job *j = arg;
    long lo, hi;
    wm_split((long)colT_parts(j->pl, j->p0, j->p1), ith, nth, &lo, &hi);
    make_colT(j, j->n, j->g, j->p0, j->p1, lo, hi, j->col);
}

/* shared mode: output channels of the tile at hand */
static void untile_part(void *arg, int ith, int nth) {
    const conv_job *j = arg;
    long lo, hi;
    wm_split((long)j->pl->Mg, ith, nth, &lo, &hi);
    untile(j, j->n, j->g, j->p0, j->p1, j->T, lo, hi);
}

static void dw_part(void *arg, int ith, int nth) {
    const conv_job *j = arg;
    const conv_plan *pl = j->pl;
    long lo, hi;
    wm_split((long)(pl->N * j->M), ith, nth, &lo, &hi);
    float *row = (float *)(j->shares + (size_t)ith * wm_conv_plane_ws(j->w));
    for (long q = lo; q < hi; q++) {
        int64_t n = q / j->M, oc = q % j->M, ic = oc / pl->Mg; /* one input channel per group */
        wm_conv_plane_f32(j->x + (n * j->C + ic) * pl->inP, j->wt + oc * pl->kp, j->b ? j->b[oc] : 0.0f,
                          j->y + q * pl->P, j->w, row);
        if (j->post) wm_conv_post_apply(j->post, j->y + q * pl->P, (uint64_t)(q * pl->P), pl->P);
    }
}

static int direct(const conv_plan *pl, int64_t G) { return pl->Cg == 1 && G > 1; }

void wm_conv_post_apply(const wm_conv_post *post, float *y, uint64_t off, int64_t n) {
    if (post->z) wm_cnn_vadd(y, post->z + off, n);
    if (post->hard_sigmoid)
        for (int64_t i = 0; i < n; i++) {
            float v = post->a * y[i] + post->b;
            y[i] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    else if (post->act != WM_ACT_NONE) wm_kernels_get()->vact(n, y, y, post->act, post->a, post->b);
}

void wm_conv_f32(wm_exec *x, const wm_win *w, const float *in, const float *wt, const void *wpack, const float *b,
                 const wm_conv_post *post, float *y, int64_t N, int64_t C, int64_t M, int64_t G, void *ws) {
    conv_plan pl;
    make_plan(w, N, C, M, G, wpack == NULL, x->nth, &pl);
    if (!N || !M || !pl.P) return;
    conv_job j = {&pl, w, in, wt, b, post, wpack, y, C, M, G, ws, 0, 0, 0, 0, 0, NULL, NULL};
    if (direct(&pl, G)) {
        int nth = (uint64_t)(N * M * pl.P * pl.kp) >= 65536 ? x->nth : 1;
        if (nth > N * M) nth = (int)(N * M);
        wm_pool_run(x->pool, dw_part, &j, nth);
        return;
    }
    uint8_t *cur = ws;
    if (!wpack) { /* weights that are not constant: pack them for this run */
        wm_conv_pack(wt, pl.K, pl.Mg, G, (float *)cur);
        j.wpack = cur;
        cur += pl.pack;
    }
    j.shares = cur;
    j.share = pl.gper + pl.colt + pl.tt;
    double flops = 2.0 * (double)pl.Mg * (double)pl.P * (double)pl.K * (double)(N * G);
    int nth = flops >= 2e5 ? x->nth : 1;
    if (pl.units >= 2 * (int64_t)nth || nth == 1) {
        wm_pool_run(x->pool, tiles_part, &j, nth > pl.units ? (int)pl.units : nth);
        return;
    }
    /* few large tiles: each split over the threads (the GEMM's scratch holds nth shares here) */
    wm_sgemm_args a0 = {.M = pl.Pt, .N = pl.Mg, .K = pl.K, .packed_b = (const float *)1};
    size_t gall = wm_conv_up64(wm_sgemm_workspace_size(&a0, nth));
    j.col = (float *)(cur + gall); /* col^T, after the GEMM's nth shares */
    j.T = (float *)(cur + gall + pl.colt);
    for (int64_t u = 0; u < pl.units; u++) {
        unit_geom(&j, u, &j.n, &j.g, &j.p0, &j.p1);
        wm_pool_run(x->pool, col_part, &j, (uint64_t)(pl.K * (j.p1 - j.p0)) >= 32768 ? nth : 1);
        wm_sgemm_args a;
        unit_args(&j, j.g, j.p0, j.p1, j.col, j.T, cur, &a);
        wm_conv_gemm(x, &a);
        wm_pool_run(x->pool, untile_part, &j, (uint64_t)(pl.Mg * (j.p1 - j.p0)) >= 65536 ? nth : 1);
    }
}

size_t wm_conv_f32_ws(const wm_win *w, int64_t C, int64_t M, int64_t G, int packed, int nth) {
    conv_plan pl;
    make_plan(w, 1, C, M, G, !packed, 0, &pl);
    if (direct(&pl, G)) return (size_t)nth * wm_conv_plane_ws(w) + 64;
    wm_sgemm_args a0 = {.M = pl.Pt, .N = pl.Mg, .K = pl.K, .packed_b = (const float *)1};
    size_t shared = wm_conv_up64(wm_sgemm_workspace_size(&a0, nth)) + pl.colt + pl.tt;
    size_t tiles = (size_t)nth * (pl.gper + pl.colt + pl.tt);
    return pl.pack + (shared > tiles ? shared : tiles) + 64;
}
