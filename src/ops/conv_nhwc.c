/*
 * conv_nhwc.c - winml's channels-last engine ops (domain ai.winml), which
 * the engine's nhwc_layout pass (src/opt/fuse_engine.c) puts in place of
 * chains of 2-D Conv / FusedConv / MaxPool (float32, group 1):
 *
 *   NhwcConv(X [N, H, W, C], W [M, C, kh, kw], B [M]?, Z [N, OH, OW, M]?) -> Y [N, OH, OW, M]
 *     Conv's attributes (kernel_shape, strides, dilations, pads, auto_pad),
 *     FusedConv's activation / activation_params, and winograd (the output
 *     tile, 2 or 4, of a 3x3 stride-1 layer the pass found large enough:
 *     run by conv_wino.c when the activation is none, Relu or Clip);
 *     Y = act(conv(X, W) + B + Z)
 *   NhwcMaxPool(X [N, H, W, C]) -> Y [N, OH, OW, C], MaxPool's attributes
 *     (no Indices output).
 *
 * Channels last, a convolution is one GEMM per tile of output positions
 * with nothing to transpose: Y_tile[Pt, M] = A[Pt, K] x Wr^T[K, M], K =
 * kh * kw * C in (ky, kx, c) order. A is X itself for a 1x1 stride-1
 * unpadded convolution (rows of C channels, read in place). Otherwise, with
 * 16 channels or more, A is indirect (an implicit GEMM): each tap of a patch
 * is a run of C channels in X, and the tile's table holds one pointer per
 * (tap, position), to X or to a zero run for the padding, which the GEMM
 * kernel reads in place. With fewer channels (a stem: 3), the runs are whole
 * kernel rows (kw * C values) of a copy of X padded in width, made once per
 * run. Otherwise (a dilated row of few channels, or neighbouring positions'
 * runs a multiple of 4 KiB apart) the tile's patches are copied row by row,
 * at a row stride that is not a multiple of 4 KiB (X itself is copied so when
 * C is a multiple of 1024, unless the GEMM packs such rows itself). Wr^T is packed once at session creation; the GEMM
 * writes Y directly and its epilogue adds the bias and the residual Z and
 * applies the activation to each tile while it is in cache. Threads take whole tiles
 * when there are at least two per thread, else each tile's GEMM is split
 * over them (where A is read in place, a whole image is then one tile);
 * either way every output is one reduction in a fixed order, so results do
 * not depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cnn_kern.h"
#include "ops/conv_impl.h"

/* ---------------------------------------------------------------- NhwcConv */

typedef struct nhwc_state {
    wm_win_attr a;
    const float *b32;    /* constant bias as float32, or NULL (then B is read per run) */
    const float *wpack;  /* Wr^T packed for the GEMM */
    int64_t kc;          /* its k-block (wm_sgemm_args.kc): K for a kernel larger than 1x1, else 0 (the default) */
    int64_t M, C, kh, kw;
    wm_conv_post post;   /* act, a, b */
    wm_wino wino;        /* wino.m > 0: a 3x3 convolution run as Winograd F(m x m, 3 x 3) (conv_wino.c) */
    float lo, hi;        /* then the activation as a clamp */
} nhwc_state;

/* The node's winograd attribute (the output tile m: 2 or 4; set by the nhwc_layout pass where the image is large
   enough) where the convolution allows it: 3x3, strides and dilations 1 (and, checked by the caller, an activation
   the output transform applies as a clamp: none, Relu or Clip). */
static int nc_wino_tile(const wm_node *n, const nhwc_state *s) {
    int64_t m = wm_attr_int(n, "winograd", 0);
    if ((m != 2 && m != 4) || s->kh != 3 || s->kw != 3) return 0;
    for (int i = 0; i < s->a.n_strides; i++)
        if (s->a.strides[i] != 1) return 0;
    for (int i = 0; i < s->a.n_dil; i++)
        if (s->a.dil[i] != 1) return 0;
    return (int)m;
}

static const int32_t f32_only[] = {WM_DT_FLOAT, 0};

static wm_status nc_init(wm_node *n, wm_error *err) {
    nhwc_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    wm_status st = wm_win_attr_read(n, &s->a, 0, 0, err);
    if (st) return st;
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X and W");
    for (int i = 0; i < n->n_in && i < 4; i++)
        if (wm_has_in(n, i) && (st = wm_check_type(n, i, f32_only, err))) return st;
    if ((st = wm_conv_act_read(n, &s->post, err))) return st;
    if (s->post.hard_sigmoid) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "activation HardSigmoid");
    const wm_tensor *W = n->in_const[1];
    if (!W || W->rank != 4) return wm_node_err(n, err, WM_ERR_INPUT, "W must be a constant [M, C, kh, kw]");
    if (wm_attr_int(n, "group", 1) != 1) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "group != 1");
    s->M = W->dims[0], s->C = W->dims[1], s->kh = W->dims[2], s->kw = W->dims[3];
    if (wm_has_in(n, 2) && n->in_const[2]) s->b32 = n->in_const[2]->data;
    int tile = nc_wino_tile(n, s);
    if (tile && wm_conv_post_clamp(&s->post, &s->lo, &s->hi)) { /* the activation as the output transform's clamp */
        n->out_dtype[0] = WM_DT_FLOAT;
        return wm_wino_init(n, W->data, s->M, s->C, tile, &s->wino, err);
    }
    /* Wr [M, kh, kw, C] from W [M, C, kh, kw], then its transpose packed as the GEMM's B */
    int64_t K = s->C * s->kh * s->kw, taps = s->kh * s->kw;
    float *wr = malloc((size_t)(s->M * K) * sizeof *wr + 1);
    size_t sz = wm_conv_pack_size(K, s->M, 1);
    float *pk = wm_node_alloc(n, sz);
    if (!wr || !pk) {
        free(wr);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    const float *w = W->data;
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t c = 0; c < s->C; c++)
            for (int64_t t = 0; t < taps; t++) wr[(m * taps + t) * s->C + c] = w[(m * s->C + c) * taps + t];
    /* a kernel of several taps over 16 channels or more (the indirect GEMM): B in one k-block, so that each tile
       runs its whole reduction and stores once, instead of a load and a store of C per k-block (ResNet-50's 3x3
       layers 2-7% faster per node) */
    s->kc = taps > 1 && s->C >= 16 ? K : 0;
    wm_sgemm_pack_b_kc(1, K, s->M, wr, K, s->kc, pk);
    free(wr);
    s->wpack = pk;
    n->packed_bytes += sz;
    n->out_dtype[0] = WM_DT_FLOAT;
    return WM_OK;
}

static wm_status nc_geom(const wm_node *n, wm_tensor *const *in, wm_win *w, wm_error *err) {
    const nhwc_state *s = n->state;
    const wm_tensor *X = in[0];
    if (X->rank != 4) return wm_node_err(n, err, WM_ERR_INPUT, "X must be [N, H, W, C]");
    if (X->dims[3] != s->C)
        return wm_node_err(n, err, WM_ERR_INPUT, "X has %lld channels, W takes %lld", (long long)X->dims[3],
                           (long long)s->C);
    if (n->n_in > 2 && in[2] && (in[2]->rank != 1 || in[2]->dims[0] != s->M))
        return wm_node_err(n, err, WM_ERR_INPUT, "B must be 1-D with %lld values", (long long)s->M);
    int64_t sp[2] = {X->dims[1], X->dims[2]}, k[2] = {s->kh, s->kw};
    return wm_win_make(n, &s->a, 2, sp, k, w, err);
}

static wm_status nc_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const nhwc_state *s = n->state;
    wm_win w;
    wm_status st = nc_geom(n, in, &w, err);
    if (st) return st;
    int64_t d[4] = {in[0]->dims[0], w.out[1], w.out[2], s->M};
    wm_set_shape(out[0], 4, d);
    if (n->n_in > 3 && in[3]) {
        int same = in[3]->rank == 4;
        for (int i = 0; same && i < 4; i++) same = in[3]->dims[i] == d[i];
        if (!same) return wm_node_err(n, err, WM_ERR_INPUT, "Z must have the output's shape");
    }
    return WM_OK;
}

enum { NC_PATCHES = 0, NC_TAPS = 1, NC_ROWS = 2 };

typedef struct nc_plan {
    int64_t N, P, K, Pt, ntiles, units;
    int split;     /* few tiles for the threads: each tile's GEMM is split over them (one col^T or table) */
    int64_t lda;   /* A's row stride: C (X itself) or that of the col^T tile, never a multiple of 4 KiB */
    int direct;    /* 1x1 stride 1 unpadded: A is X itself, unless its rows are 4 KiB apart (then copied) */
    int indirect;  /* A read where it lies, through a table of runs per position: NC_TAPS, one run of C channels
                      of X per tap; NC_ROWS, one run of kw x C values per kernel row of the width-padded copy */
    int64_t runs, seg; /* runs per position (taps or kernel rows) and their length */
    int64_t Wp;    /* NC_ROWS: the padded copy's width */
    size_t gemm1;  /* GEMM scratch of one share */
    size_t colt;   /* one col^T tile, or one tile's indirection table */
    size_t xpad;   /* NC_ROWS: bytes of the padded copy */
    /* workspace: the zero run, the padded copy at xpad_at, then from tiles_at a col^T (or table) per thread for
       claimed tiles, or one for a tile split over the threads, and after them the GEMM slices: what every run
       writes comes first, the GEMM's scratch (often unwritten with a prepacked B and A read in place) last */
    size_t xpad_at, tiles_at, gemm_at, bytes;
} nc_plan;

static void nc_make_plan(const nhwc_state *s, const wm_win *w, int64_t N, int nth, nc_plan *p) {
    memset(p, 0, sizeof *p);
    p->N = N, p->P = w->out[1] * w->out[2], p->K = s->C * s->kh * s->kw;
    p->direct = s->kh == 1 && s->kw == 1 && w->s[1] == 1 && w->s[2] == 1 && w->pb[1] == 0 && w->pb[2] == 0 &&
                w->pe[1] == 0 && w->pe[2] == 0;
    int64_t pt = wm_conv_tile_rows(p->P, N, nth); /* a small image is one tile: its GEMM is split over the threads */
    p->split = nth > 1 && N * ((p->P + pt - 1) / pt) < 2 * (int64_t)nth;
    /* rows a multiple of 4 KiB apart would share L1 sets: a direct A is left to the GEMM when it packs such rows
       into panels itself (block by block, while they are in cache), else copied once per tile to a padded
       stride, like the patches of such rows */
    p->lda = p->K;
    if (p->lda % 1024 == 0 && !(p->direct && wm_kernels_get()->sgemm_packs_aliased)) p->lda += 16, p->direct = 0;
    /* a patch's taps are runs of C channels in X: with runs of 16 and more, the GEMM reads them in place
       (no col^T copy); when neighbouring positions' runs are a multiple of 4 KiB apart (stride x C floats)
       they would share L1 sets, and those are copied as above */
    if (!p->direct && s->C >= 16 && (w->s[2] * s->C) % 1024 != 0)
        p->indirect = NC_TAPS, p->runs = s->kh * s->kw, p->seg = s->C;
    /* fewer channels (a stem: 3): a kernel row's kw x C values are one run in a copy of X padded in width, made
       once per run (as large as X) instead of every tile's patches (kh x kw x C values per position) */
    else if (!p->direct && w->d[2] == 1 && s->kw * s->C >= 8 && (w->s[2] * s->C) % 1024 != 0) {
        p->indirect = NC_ROWS, p->runs = s->kh, p->seg = s->kw * s->C;
        p->Wp = w->in[2] + w->pb[2] + w->pe[2];
        p->xpad = wm_conv_up64((size_t)(N * w->in[1] * p->Wp * s->C) * sizeof(float));
    }
    /* too few tiles to give each thread two: where A is read in place (X itself, or through a table), a whole
       image is one GEMM, which the GEMM splits over the threads in rows and columns (wm_sgemm_drive), not tile
       after tile, each split over all of them (13 jobs of 256 x 64 at 16 threads for a 56 x 56 x 64 layer:
       ResNet-50 on the 16-core device, stop 22: 16 threads 11.66 -> 9.37 ms, 8 threads 17.30 -> 15.70) */
    if (p->split && (p->direct || p->indirect)) pt = p->P;
    p->Pt = pt, p->ntiles = (p->P + pt - 1) / pt, p->units = N * p->ntiles;
    /* GEMM scratch (its A block only where the GEMM copies A: see wm_sgemm_workspace_size) */
    wm_sgemm_args a = {.M = pt, .N = s->M, .K = p->K, .packed_b = (const float *)1, .kc = s->kc,
                       .lda = p->direct ? s->C : p->lda, .ind = p->indirect ? (const float *const *)1 : NULL};
    p->gemm1 = wm_conv_up64(wm_sgemm_workspace_size(&a, 1));
    p->colt = p->direct     ? 0
              : p->indirect ? wm_conv_up64((size_t)(p->runs * pt) * sizeof(const float *))
                            : wm_conv_up64((size_t)(pt * p->lda) * sizeof(float));
    /* claimed tiles: GEMM scratch and col^T per thread; one tile split over the threads: nth GEMM slices, one col^T */
    size_t shared = wm_conv_up64(wm_sgemm_workspace_size(&a, nth)), tiles = (size_t)nth * p->gemm1;
    p->xpad_at = wm_conv_up64((size_t)(p->seg + 1) * sizeof(float));
    p->tiles_at = p->xpad_at + p->xpad;
    p->gemm_at = p->tiles_at + (size_t)(p->split ? 1 : nth) * p->colt;
    p->bytes = p->gemm_at + (shared > tiles ? shared : tiles) + 64;
}

static size_t nc_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    const nhwc_state *s = n->state;
    wm_win w;
    if (nc_geom(n, in, &w, NULL)) return 0;
    if (s->wino.m) return wm_wino_ws(&s->wino, &w, in[0]->dims[0], nth);
    nc_plan pl;
    nc_make_plan(s, &w, in[0]->dims[0], nth, &pl);
    return pl.bytes;
}

typedef struct nc_job {
    const nhwc_state *s;
    const nc_plan *pl;
    const wm_win *w;
    const float *x, *b, *z, *zero; /* zero: a run of zeros, the padding of an indirect A */
    float *xp;                     /* NC_ROWS: X padded in width */
    float *y;
    uint8_t *ws;
    /* shared mode: the tile at hand and its col^T */
    int64_t n, p0, p1;
    float *col;
    const wm_pool *pool;
} nc_job;

/* Rows [q0, q1) of the col^T tile of positions [p0, p1) of image n: row i = the kh x kw x C patch of position
   p0 + i in (ky, kx, c) order, zeros in the padding. */
static void nc_patches(const nc_job *j, int64_t n, int64_t p0, int64_t q0, int64_t q1, float *col) {
    const nhwc_state *s = j->s;
    const wm_win *w = j->w;
    int64_t H = w->in[1], W = w->in[2], OW = w->out[2], C = s->C, ld = j->pl->lda, run = s->kw * C;
    for (int64_t i = q0; i < q1; i++) {
        int64_t p = p0 + i, oy = p / OW, ox = p % OW;
        float *row = col + i * ld;
        int64_t ix0 = ox * w->s[2] - w->pb[2];
        int whole_x = w->d[2] == 1 && ix0 >= 0 && ix0 + s->kw <= W;
        for (int64_t ky = 0; ky < s->kh; ky++) {
            int64_t iy = oy * w->s[1] - w->pb[1] + ky * w->d[1];
            float *dst = row + ky * run;
            if (iy < 0 || iy >= H) {
                memset(dst, 0, (size_t)run * sizeof *dst);
                continue;
            }
            const float *src = j->x + ((n * H + iy) * W) * C;
            if (whole_x) {
                memcpy(dst, src + ix0 * C, (size_t)run * sizeof *dst);
                continue;
            }
            for (int64_t kx = 0; kx < s->kw; kx++) {
                int64_t ix = ix0 + kx * w->d[2];
                if (ix < 0 || ix >= W) memset(dst + kx * C, 0, (size_t)C * sizeof *dst);
                else memcpy(dst + kx * C, src + ix * C, (size_t)C * sizeof *dst);
            }
        }
    }
}

/* Rows [lo, hi) of the width-padded copy (NC_ROWS): each X row between zeros for the left and right padding. */
static void nc_pad_part(void *arg, int ith, int nth) {
    const nc_job *j = arg;
    const wm_win *w = j->w;
    int64_t W = w->in[2], C = j->s->C, Wp = j->pl->Wp, l = w->pb[2] * C, r = w->pe[2] * C;
    long lo, hi;
    wm_split((long)(j->pl->N * w->in[1]), ith, nth, &lo, &hi);
    for (long row = lo; row < hi; row++) {
        float *d = j->xp + row * Wp * C;
        memset(d, 0, (size_t)l * sizeof *d);
        memcpy(d + l, j->x + row * W * C, (size_t)(W * C) * sizeof *d);
        memset(d + l + W * C, 0, (size_t)r * sizeof *d);
    }
}

/* Columns [q0, q1) of the indirection table of the tile of positions [p0, p0 + ld) of image n: ind[t * ld + i] =
   the run that tap t = ky * kw + kx (NC_TAPS: C channels of X) or kernel row t = ky (NC_ROWS: kw x C values of
   the padded copy) of position p0 + i reads, or the zero run in the padding. */
static void nc_indirect(const nc_job *j, int64_t n, int64_t p0, int64_t q0, int64_t q1, int64_t ld,
                        const float **ind) {
    const nhwc_state *s = j->s;
    const wm_win *w = j->w;
    int64_t H = w->in[1], W = w->in[2], OW = w->out[2], C = s->C;
    int64_t oy = (p0 + q0) / OW, ox = (p0 + q0) % OW; /* then stepped: no division per position */
    const int rows = j->pl->indirect == NC_ROWS;
    const float *img = rows ? j->xp + n * H * j->pl->Wp * C : j->x + n * H * W * C;
    const int64_t ldrow = (rows ? j->pl->Wp : W) * C;
    for (int64_t i = q0; i < q1; i++) {
        int64_t iy0 = oy * w->s[1] - w->pb[1], ix0 = ox * w->s[2] - w->pb[2];
        for (int64_t ky = 0; ky < s->kh; ky++) {
            int64_t iy = iy0 + ky * w->d[1];
            int in_y = iy >= 0 && iy < H;
            const float **t = ind + ky * (rows ? 1 : s->kw) * ld + i;
            if (!in_y) { /* a padding row: every tap of it reads zeros */
                for (int64_t kx = 0; kx < (rows ? 1 : s->kw); kx++) t[kx * ld] = j->zero;
                continue;
            }
            const float *row = img + iy * ldrow;
            if (rows) {
                t[0] = row + ox * w->s[2] * C;
                continue;
            }
            for (int64_t kx = 0; kx < s->kw; kx++) {
                int64_t ix = ix0 + kx * w->d[2];
                t[kx * ld] = ix >= 0 && ix < W ? row + ix * C : j->zero;
            }
        }
        if (++ox == OW) ox = 0, oy++;
    }
}

/* The GEMM of tile (n, p0..p1): Y rows = A x Wr^T + Z, then bias and activation (a->work set by the caller). */
static void nc_args(const nc_job *j, int64_t n, int64_t p0, int64_t p1, const float *col, wm_sgemm_args *a) {
    const nhwc_state *s = j->s;
    const nc_plan *pl = j->pl;
    memset(a, 0, sizeof *a);
    a->M = p1 - p0, a->N = s->M, a->K = pl->K, a->alpha = 1.0f;
    if (pl->direct) a->A = j->x + (n * pl->P + p0) * s->C, a->lda = s->C;
    else if (pl->indirect) a->ind = (const float *const *)col, a->ldi = p1 - p0, a->seg = pl->seg;
    else a->A = col, a->lda = pl->lda;
    a->packed_b = s->wpack;
    a->kc = s->kc;
    a->C = j->y + (n * pl->P + p0) * s->M, a->ldc = s->M;
    a->ep.bias = j->b;
    a->ep.act = s->post.act, a->ep.act_a = s->post.a, a->ep.act_b = s->post.b;
    if (j->z == j->y) a->beta = 1.0f; /* Z in place: accumulated into it */
    else if (j->z) {                  /* added by the epilogue before the activation */
        a->ep.residual = j->z + (n * pl->P + p0) * s->M, a->ep.ld_residual = s->M;
        a->ep.residual_first = 1;
    }
}

/* one claimed share per tile; scratch per thread (wm_pool_thread) */
static void nc_tiles_part(void *arg, int ith, int nth) {
    const nc_job *j = arg;
    const nc_plan *pl = j->pl;
    long lo, hi;
    wm_split((long)pl->units, ith, nth, &lo, &hi);
    int t = wm_pool_thread(j->pool);
    float *col = (float *)(j->ws + pl->tiles_at + (size_t)t * pl->colt);
    uint8_t *mine = j->ws + pl->gemm_at + (size_t)t * pl->gemm1; /* GEMM scratch */
    const wm_kernels *kt = wm_kernels_get();
    for (long u = lo; u < hi; u++) {
        int64_t n = u / pl->ntiles, p0 = (u % pl->ntiles) * pl->Pt, p1 = p0 + pl->Pt < pl->P ? p0 + pl->Pt : pl->P;
        if (pl->indirect) nc_indirect(j, n, p0, 0, p1 - p0, p1 - p0, (const float **)col);
        else if (!pl->direct) nc_patches(j, n, p0, 0, p1 - p0, col);
        wm_sgemm_args a;
        nc_args(j, n, p0, p1, col, &a);
        a.work = mine;
        kt->sgemm(&a, 0, 1);
    }
}

/* shared mode: a slice of the tile's col^T, or of its indirection table */
static void nc_col_part(void *arg, int ith, int nth) {
    const nc_job *j = arg;
    long lo, hi;
    wm_split((long)(j->p1 - j->p0), ith, nth, &lo, &hi);
    if (j->pl->indirect) nc_indirect(j, j->n, j->p0, lo, hi, j->p1 - j->p0, (const float **)j->col);
    else nc_patches(j, j->n, j->p0, lo, hi, j->col);
}

static wm_status nc_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const nhwc_state *s = n->state;
    wm_win w;
    wm_status st = nc_geom(n, in, &w, x->err);
    if (st) return st;
    const float *b = s->b32 ? s->b32 : n->n_in > 2 && in[2] ? in[2]->data : NULL;
    const float *z = n->n_in > 3 && in[3] ? in[3]->data : NULL;
    if (s->wino.m) {
        wm_wino_run(x, &s->wino, &w, in[0]->dims[0], in[0]->data, b, z, s->lo, s->hi, out[0]->data);
        return WM_OK;
    }
    nc_plan pl;
    nc_make_plan(s, &w, in[0]->dims[0], x->nth, &pl);
    if (!pl.N || !pl.P || !s->M) return WM_OK;
    float *zero = (float *)x->ws;
    if (pl.indirect) memset(zero, 0, (size_t)pl.seg * sizeof *zero);
    float *xp = (float *)(x->ws + pl.xpad_at);
    nc_job j = {s, &pl, &w, in[0]->data, b, z, zero, xp, out[0]->data, x->ws, 0, 0, 0, NULL, x->pool};
    double flops = 2.0 * (double)pl.P * (double)s->M * (double)pl.K * (double)pl.N;
    int nth = flops >= 2e5 ? x->nth : 1;
    if (pl.indirect == NC_ROWS) {
        int64_t rows = pl.N * w.in[1];
        wm_pool_run(x->pool, nc_pad_part, &j, rows >= 64 && nth > 1 ? nth : 1);
    }
    if (!pl.split || nth == 1) {
        if (nth == 1) nc_tiles_part(&j, 0, 1);
        else wm_pool_run_shares(x->pool, nc_tiles_part, &j, (int)pl.units); /* a slowed thread leaves its tiles */
        return WM_OK;
    }
    /* few large tiles: each tile's patches and GEMM split over the threads */
    j.col = (float *)(x->ws + pl.tiles_at);
    uint8_t *gws = x->ws + pl.gemm_at; /* the plan's nth is x->nth, as here */
    for (int64_t u = 0; u < pl.units; u++) {
        j.n = u / pl.ntiles, j.p0 = (u % pl.ntiles) * pl.Pt, j.p1 = j.p0 + pl.Pt < pl.P ? j.p0 + pl.Pt : pl.P;
        if (!pl.direct) /* split when large: col^T copies K floats a position; the table computes `runs`
                           pointers a position, each counted as the work of copying 8 floats */
            wm_pool_run(x->pool, nc_col_part, &j,
                        (uint64_t)((pl.indirect ? 8 * pl.runs : pl.K) * (j.p1 - j.p0)) >= 32768 ? nth : 1);
        wm_sgemm_args a;
        nc_args(&j, j.n, j.p0, j.p1, j.col, &a);
        a.work = gws;
        wm_conv_gemm(x, &a);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- NhwcMaxPool */

typedef struct nmp_state {
    wm_win_attr a;
} nmp_state;

static wm_status mp_init(wm_node *n, wm_error *err) {
    nmp_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    wm_status st = wm_win_attr_read(n, &s->a, 1, 0, err);
    if (st) return st;
    if ((st = wm_check_type(n, 0, f32_only, err))) return st;
    if (n->n_out > 1) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "the Indices output");
    n->out_dtype[0] = WM_DT_FLOAT;
    return WM_OK;
}

static wm_status mp_geom(const wm_node *n, wm_tensor *const *in, wm_win *w, wm_error *err) {
    const nmp_state *s = n->state;
    if (in[0]->rank != 4) return wm_node_err(n, err, WM_ERR_INPUT, "X must be [N, H, W, C]");
    if (s->a.n_kernel != 2) return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape must have 2 values");
    int64_t sp[2] = {in[0]->dims[1], in[0]->dims[2]};
    return wm_win_make(n, &s->a, 2, sp, NULL, w, err);
}

static wm_status mp_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    wm_win w;
    wm_status st = mp_geom(n, in, &w, err);
    if (st) return st;
    int64_t d[4] = {in[0]->dims[0], w.out[1], w.out[2], in[0]->dims[3]};
    wm_set_shape(out[0], 4, d);
    return WM_OK;
}

typedef struct mp_job {
    const wm_win *w;
    const float *x;
    float *y;
    int64_t N, C;
} mp_job;

/* output rows (image, oy) [lo, hi): each position the running max of its window's channel vectors */
static void mp_part(void *arg, int ith, int nth) {
    const mp_job *j = arg;
    const wm_win *w = j->w;
    int64_t H = w->in[1], W = w->in[2], OH = w->out[1], OW = w->out[2], C = j->C;
    long lo, hi;
    wm_split((long)(j->N * OH), ith, nth, &lo, &hi);
    for (long r = lo; r < hi; r++) {
        int64_t n = r / OH, oy = r % OH;
        for (int64_t ox = 0; ox < OW; ox++) {
            float *y = j->y + ((n * OH + oy) * OW + ox) * C;
            const float *taps[64]; /* the window's positions inside X, in (ky, kx) order */
            int nt = 0;
            for (int64_t ky = 0; ky < w->k[1]; ky++) {
                int64_t iy = oy * w->s[1] - w->pb[1] + ky * w->d[1];
                if (iy < 0 || iy >= H) continue;
                for (int64_t kx = 0; kx < w->k[2]; kx++) {
                    int64_t ix = ox * w->s[2] - w->pb[2] + kx * w->d[2];
                    if (ix < 0 || ix >= W) continue;
                    taps[nt++] = j->x + ((n * H + iy) * W + ix) * C;
                    if (nt == 64) { /* a large window: fold what is gathered into its first tap's place */
                        wm_cnn_vmaxn(y, taps, nt, C);
                        taps[0] = y, nt = 1;
                    }
                }
            }
            if (nt) wm_cnn_vmaxn(y, taps, nt, C);
            else
                for (int64_t c = 0; c < C; c++) y[c] = -INFINITY;
        }
    }
}

static wm_status mp_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    wm_win w;
    wm_status st = mp_geom(n, in, &w, x->err);
    if (st) return st;
    mp_job j = {&w, in[0]->data, out[0]->data, in[0]->dims[0], in[0]->dims[3]};
    int64_t rows = j.N * w.out[1];
    uint64_t work = (uint64_t)(rows * w.out[2] * j.C * w.k[1] * w.k[2]);
    int nth = work >= 65536 ? x->nth : 1;
    if (nth > rows) nth = rows > 0 ? (int)rows : 1;
    wm_pool_run(x->pool, mp_part, &j, nth);
    return WM_OK;
}

static const wm_op ops[] = {
    {"ai.winml", "NhwcConv", 1, 0, nc_init, nc_infer, nc_run, nc_workspace, WM_OP_INPLACE_IN3, 0},
    {"ai.winml", "NhwcMaxPool", 1, 0, mp_init, mp_infer, mp_run, NULL, 0, 0},
};

const wm_op_table wm_ops_conv_nhwc = {ops, sizeof ops / sizeof ops[0]};
