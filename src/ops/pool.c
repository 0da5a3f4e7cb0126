/*
 * pool.c - MaxPool (Indices output, storage_order, dilations, ceil_mode),
 * AveragePool (count_include_pad, ceil_mode, dilations), LpPool,
 * GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool.
 *
 * Windows follow ONNX / ONNX Runtime: window o of a dim starts at
 * o * stride - pad_head and takes kernel taps `dilation` apart; taps outside
 * the input are skipped. AveragePool divides by the taps inside the input,
 * or with count_include_pad by the taps inside the padded input
 * [-pad_head, in + pad_tail) (taps of the extra ceil_mode area never count).
 * A window with no tap inside the input gives 0 (index -1).
 * float32 planes are pooled in place; other types (float16, bfloat16,
 * float64, int8, uint8) through a double copy of each plane. Threads take
 * whole planes (N * C).
 */
#include <math.h>
#include <string.h>

#include "ops/cnn.h"
#include "ops/cnn_kern.h"
#include "ops/pool_impl.h"

/* ---------------------------------------------------------------- kernels */

/* taps k in [*lo, *hi) of a window starting at `start` that fall in [lim0, lim1) */
static inline void taps(int64_t start, int64_t k, int64_t d, int64_t lim0, int64_t lim1, int64_t *lo, int64_t *hi) {
    int64_t a = start >= lim0 ? 0 : (lim0 - start + d - 1) / d;
    int64_t b = lim1 - start <= 0 ? 0 : (lim1 - start + d - 1) / d;
    if (b > k) b = k;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

size_t wm_pool_tab_size(const wm_win *w) {
    return (size_t)(w->out[0] + w->out[1] + w->out[2]) * 3 * sizeof(int64_t) + 64;
}

void wm_pool_tab_make(const wm_win *w, void *mem, wm_pool_tab *t) {
    int64_t *p = mem;
    for (int j = 0; j < WM_CNN_ND; j++) {
        t->lo[j] = p, t->hi[j] = p + w->out[j], t->cnt[j] = p + 2 * w->out[j];
        for (int64_t o = 0; o < w->out[j]; o++) {
            int64_t st = o * w->s[j] - w->pb[j], c0, c1;
            taps(st, w->k[j], w->d[j], 0, w->in[j], &t->lo[j][o], &t->hi[j][o]);
            taps(st, w->k[j], w->d[j], -w->pb[j], w->in[j] + w->pe[j], &c0, &c1);
            t->cnt[j][o] = c1 - c0;
        }
        p += 3 * w->out[j];
    }
}

#define POOL_PLANE(name, T)                                                                                          \
    void name(const T *x, T *y, int64_t *ind, int64_t ind_base, const wm_win *w, const wm_pool_tab *t, int kind,     \
              int include_pad, double p, int col_major) {                                                            \
        for (int64_t oz = 0; oz < w->out[0]; oz++) {                                                                 \
            int64_t zs = oz * w->s[0] - w->pb[0], z0 = t->lo[0][oz], z1 = t->hi[0][oz];                              \
            for (int64_t oy = 0; oy < w->out[1]; oy++) {                                                             \
                int64_t ys = oy * w->s[1] - w->pb[1], y0 = t->lo[1][oy], y1 = t->hi[1][oy];                          \
                int64_t orow = (oz * w->out[1] + oy) * w->out[2];                                                    \
                for (int64_t ox = 0; ox < w->out[2]; ox++) {                                                         \
                    int64_t xs = ox * w->s[2] - w->pb[2], x0 = t->lo[2][ox], x1 = t->hi[2][ox];                      \
                    int64_t cnt = (z1 - z0) * (y1 - y0) * (x1 - x0);                                                 \
                    if (cnt <= 0) {                                                                                  \
                        y[orow + ox] = 0;                                                                            \
                        if (ind) ind[orow + ox] = -1;                                                                \
                        continue;                                                                                    \
                    }                                                                                                \
                    if (kind == WM_POOL_MAX) {                                                                       \
                        T best = 0;                                                                                  \
                        int64_t bi = -1;                                                                             \
                        for (int64_t kz = z0; kz < z1; kz++)                                                         \
                            for (int64_t ky = y0; ky < y1; ky++) {                                                   \
                                int64_t iz = zs + kz * w->d[0], iy = ys + ky * w->d[1];                              \
                                const T *row = x + (iz * w->in[1] + iy) * w->in[2];                                  \
                                for (int64_t kx = x0; kx < x1; kx++) {                                               \
                                    int64_t ix = xs + kx * w->d[2];                                                  \
                                    if (bi < 0 || row[ix] > best) {                                                  \
                                        best = row[ix];                                                              \
                                        bi = col_major ? iz + iy * w->in[0] + ix * w->in[0] * w->in[1]               \
                                                       : (iz * w->in[1] + iy) * w->in[2] + ix;                       \
                                    }                                                                                \
                                }                                                                                    \
                            }                                                                                        \
                        y[orow + ox] = best;                                                                         \
                        if (ind) ind[orow + ox] = ind_base + bi;                                                     \
                        continue;                                                                                    \
                    }                                                                                                \
                    double acc = 0;                                                                                  \
                    for (int64_t kz = z0; kz < z1; kz++)                                                             \
                        for (int64_t ky = y0; ky < y1; ky++) {                                                       \
                            int64_t iz = zs + kz * w->d[0], iy = ys + ky * w->d[1];                                  \
                            const T *row = x + (iz * w->in[1] + iy) * w->in[2] + xs;                                 \
                            int64_t dd = w->d[2];                                                                    \
                            if (kind == WM_POOL_AVG)                                                                 \
                                for (int64_t kx = x0; kx < x1; kx++) acc += row[kx * dd];                            \
                            else if (p == 1)                                                                         \
                                for (int64_t kx = x0; kx < x1; kx++) acc += fabs((double)row[kx * dd]);              \
                            else if (p == 2)                                                                         \
                                for (int64_t kx = x0; kx < x1; kx++) acc += (double)row[kx * dd] * row[kx * dd];     \
                            else                                                                                     \
                                for (int64_t kx = x0; kx < x1; kx++) acc += pow(fabs((double)row[kx * dd]), p);      \
                        }                                                                                            \
                    if (kind == WM_POOL_AVG) {                                                                       \
                        int64_t div = include_pad ? t->cnt[0][oz] * t->cnt[1][oy] * t->cnt[2][ox] : cnt;             \
                        y[orow + ox] = (T)(acc / (double)div);                                                       \
                    } else                                                                                           \
                        y[orow + ox] = (T)(p == 1 ? acc : p == 2 ? sqrt(acc) : pow(acc, 1.0 / p));                   \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
    }

POOL_PLANE(wm_pool_plane_f32, float)
POOL_PLANE(wm_pool_plane_f64, double)

/* The fast plane: 2-D (or 1-D) float32 max / average without dilation: rows reduced first, then columns. */
int wm_pool_fast_ok(const wm_win *w, int kind) {
    return (kind == WM_POOL_MAX || kind == WM_POOL_AVG) && w->out[0] == 1 && w->k[0] == 1 && w->in[0] == 1 &&
           w->d[1] == 1 && w->d[2] == 1;
}

size_t wm_pool_fast_ws(const wm_win *w) { return (size_t)((w->out[2] - 1) * w->s[2] + w->k[2] + 16) * sizeof(float) + 64; }

void wm_pool_plane_fast(const float *x, float *y, const wm_win *w, const wm_pool_tab *t, int kind, int include_pad,
                        float *buf) {
    int64_t wp = (w->out[2] - 1) * w->s[2] + w->k[2], pb = w->pb[2], in2 = w->in[2];
    int64_t c0 = pb < wp ? pb : wp, c1 = pb + in2 < wp ? pb + in2 : wp; /* the input's part of the padded row */
    float init = kind == WM_POOL_MAX ? -INFINITY : 0.0f;
    for (int64_t oy = 0; oy < w->out[1]; oy++) {
        int64_t ys = oy * w->s[1] - w->pb[1], y0 = t->lo[1][oy], y1 = t->hi[1][oy];
        float *yr = y + oy * w->out[2];
        for (int64_t i = 0; i < c0; i++) buf[i] = init; /* the pads; the first row is copied, the others reduced */
        for (int64_t i = c1; i < wp; i++) buf[i] = init;
        for (int64_t ky = y0; ky < y1 && c1 > c0; ky++) {
            const float *row = x + (ys + ky) * in2 + (c0 - pb);
            if (ky == y0) memcpy(buf + c0, row, (size_t)(c1 - c0) * sizeof *buf);
            else if (kind == WM_POOL_MAX) wm_cnn_vmax(buf + c0, row, c1 - c0);
            else wm_cnn_vadd(buf + c0, row, c1 - c0);
        }
        if (y1 <= y0)
            for (int64_t i = c0; i < c1; i++) buf[i] = init;
        /* outputs whose window lies inside the row: one vector pass; the others below */
        int64_t xa = 0, xb = w->out[2];
        while (xa < xb && (t->lo[2][xa] != 0 || t->hi[2][xa] != w->k[2])) xa++;
        while (xb > xa && (t->lo[2][xb - 1] != 0 || t->hi[2][xb - 1] != w->k[2])) xb--;
        if (xb > xa && y1 > y0) {
            int64_t div = include_pad ? t->cnt[1][oy] * w->k[2] : (y1 - y0) * w->k[2];
            wm_cnn_hpool(yr + xa, buf + xa * w->s[2], xb - xa, w->s[2], w->k[2], kind == WM_POOL_MAX, 1.0f / (float)div);
        } else
            xa = xb = 0;
        for (int64_t ox = 0; ox < w->out[2]; ox++) {
            if (ox == xa && xb > xa) ox = xb;
            if (ox >= w->out[2]) break;
            int64_t x0 = t->lo[2][ox], x1 = t->hi[2][ox], cnt = (y1 - y0) * (x1 - x0);
            const float *b = buf + ox * w->s[2];
            if (cnt <= 0) {
                yr[ox] = 0;
                continue;
            }
            if (kind == WM_POOL_MAX) {
                float m = b[x0];
                for (int64_t k = x0 + 1; k < x1; k++) m = b[k] > m ? b[k] : m;
                yr[ox] = m;
            } else {
                float s = 0;
                for (int64_t k = x0; k < x1; k++) s += b[k];
                yr[ox] = s / (float)(include_pad ? t->cnt[1][oy] * t->cnt[2][ox] : cnt);
            }
        }
    }
}

/* ---------------------------------------------------------------- MaxPool, AveragePool, LpPool */

typedef struct pool_state {
    wm_win_attr a;
    int kind, include_pad, col_major;
    double p;
} pool_state;

static const int32_t max_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, WM_DT_INT8, WM_DT_UINT8, 0};

static wm_status pool_init(wm_node *n, wm_error *err) {
    pool_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    const char *op = n->proto->op_type;
    s->kind = !strcmp(op, "MaxPool") ? WM_POOL_MAX : !strcmp(op, "AveragePool") ? WM_POOL_AVG : WM_POOL_LP;
    wm_status st = wm_win_attr_read(n, &s->a, 1, 0, err);
    if (st) return st;
    if (s->a.n_kernel < 1) return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape is required");
    s->include_pad = s->kind == WM_POOL_AVG && wm_attr_int(n, "count_include_pad", 0) != 0;
    int64_t so = s->kind == WM_POOL_MAX ? wm_attr_int(n, "storage_order", 0) : 0;
    if (so != 0 && so != 1) return wm_node_err(n, err, WM_ERR_INPUT, "storage_order = %lld (must be 0 or 1)", (long long)so);
    s->col_major = (int)so;
    if (s->kind == WM_POOL_LP) {
        const wm_onnx_attr *pa = wm_attr(n, "p");
        s->p = !pa ? 2.0 : n->opset < 2 ? (double)pa->f : (double)pa->i;
        if (!(s->p > 0) || !isfinite(s->p)) return wm_node_err(n, err, WM_ERR_INPUT, "p = %g (must be > 0)", s->p);
    }
    if ((st = wm_check_type(n, 0, s->kind == WM_POOL_MAX ? max_types : wm_types_float, err))) return st;
    n->out_dtype[0] = n->in_dtype[0];
    if (n->n_out > 1) {
        if (s->kind != WM_POOL_MAX || n->opset < 8) return wm_node_err(n, err, WM_ERR_INPUT, "only MaxPool (8+) has a second output");
        n->out_dtype[1] = WM_DT_INT64;
    }
    return WM_OK;
}

static wm_status pool_geom(const wm_node *n, const wm_tensor *X, wm_win *w, wm_error *err) {
    const pool_state *s = n->state;
    if (X->rank < 3) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C and spatial dims)", X->rank);
    return wm_win_make(n, &s->a, X->rank - 2, X->dims + 2, NULL, w, err);
}

static wm_status pool_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    wm_win w;
    wm_status st = pool_geom(n, in[0], &w, err);
    if (st) return st;
    int64_t d[WM_MAX_RANK] = {in[0]->dims[0], in[0]->dims[1]};
    for (int i = 0; i < w.nd; i++) d[2 + i] = w.out[WM_CNN_ND - w.nd + i];
    wm_set_shape(out[0], w.nd + 2, d);
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], w.nd + 2, d);
    return WM_OK;
}

/* Per-thread scratch: a double copy of a plane and its output (types other than float32/64), the fast plane's row. */
static size_t pool_per_thread(const wm_tensor *X, const wm_tensor *Y, const wm_win *w) {
    uint64_t planes = (uint64_t)X->dims[0] * (uint64_t)X->dims[1];
    size_t b = wm_pool_fast_ws(w);
    if (planes && X->dtype != WM_DT_FLOAT && X->dtype != WM_DT_DOUBLE)
        b += (size_t)(wm_tensor_numel(X) / planes + wm_tensor_numel(Y) / planes) * sizeof(double);
    return (b + 63) & ~(size_t)63;
}

static size_t pool_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    wm_win w;
    if (pool_geom(n, in[0], &w, NULL)) return 0;
    return wm_pool_tab_size(&w) + (size_t)nth * pool_per_thread(in[0], out[0], &w) + 64;
}

typedef struct pool_job {
    const pool_state *s;
    const wm_win *w;
    const wm_pool_tab *t;
    int fast;
    size_t per; /* per-thread scratch bytes */
    const wm_tensor *x;
    wm_tensor *y, *ind;
    int64_t planes, inP, P;
    double *ws;
} pool_job;

static void pool_part(void *arg, int ith, int nth) {
    const pool_job *j = arg;
    long lo, hi;
    wm_split((long)j->planes, ith, nth, &lo, &hi);
    int32_t dt = j->x->dtype;
    uint8_t *mine = (uint8_t *)j->ws + (size_t)ith * j->per;
    double *xb = (double *)mine, *yb = xb + j->inP;
    for (long q = lo; q < hi; q++) {
        int64_t *ind = j->ind ? (int64_t *)j->ind->data + q * j->P : NULL;
        if (dt == WM_DT_FLOAT && j->fast && !ind) {
            wm_pool_plane_fast((const float *)j->x->data + q * j->inP, (float *)j->y->data + q * j->P, j->w, j->t,
                               j->s->kind, j->s->include_pad, (float *)mine);
            continue;
        }
        if (dt == WM_DT_FLOAT) {
            wm_pool_plane_f32((const float *)j->x->data + q * j->inP, (float *)j->y->data + q * j->P, ind, q * j->inP, j->w,
                              j->t, j->s->kind, j->s->include_pad, j->s->p, j->s->col_major);
            continue;
        }
        if (dt == WM_DT_DOUBLE) {
            wm_pool_plane_f64((const double *)j->x->data + q * j->inP, (double *)j->y->data + q * j->P, ind, q * j->inP,
                              j->w, j->t, j->s->kind, j->s->include_pad, j->s->p, j->s->col_major);
            continue;
        }
        for (int64_t i = 0; i < j->inP; i++)
            xb[i] = dt == WM_DT_UINT8 || dt == WM_DT_INT8 ? (double)wm_tensor_get_int(j->x, (uint64_t)(q * j->inP + i))
                                                          : wm_ld(dt, j->x->data, (uint64_t)(q * j->inP + i));
        wm_pool_plane_f64(xb, yb, ind, q * j->inP, j->w, j->t, j->s->kind, j->s->include_pad, j->s->p, j->s->col_major);
        for (int64_t i = 0; i < j->P; i++) {
            uint64_t o = (uint64_t)(q * j->P + i);
            if (dt == WM_DT_UINT8) ((uint8_t *)j->y->data)[o] = (uint8_t)yb[i];
            else if (dt == WM_DT_INT8) ((int8_t *)j->y->data)[o] = (int8_t)yb[i];
            else wm_st(dt, j->y->data, o, yb[i]);
        }
    }
}

static wm_status pool_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    wm_win w;
    wm_status st = pool_geom(n, in[0], &w, x->err);
    if (st) return st;
    const pool_state *s = n->state;
    wm_pool_tab t;
    wm_pool_tab_make(&w, x->ws, &t);
    pool_job j = {s, &w, &t, wm_pool_fast_ok(&w, s->kind), pool_per_thread(in[0], out[0], &w), in[0], out[0],
                  n->n_out > 1 ? out[1] : NULL, in[0]->dims[0] * in[0]->dims[1], wm_win_prod(w.in), wm_win_prod(w.out),
                  (double *)((uint8_t *)x->ws + wm_pool_tab_size(&w))};
    if (!j.planes || !j.P) return WM_OK;
    uint64_t work = (uint64_t)(j.planes * j.P) * (uint64_t)wm_win_prod(w.k);
    int nth = work >= 32768 ? x->nth : 1;
    if (nth > j.planes) nth = (int)j.planes;
    wm_pool_run(x->pool, pool_part, &j, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- GlobalAveragePool, GlobalMaxPool, GlobalLpPool */

static wm_status gpool_init(wm_node *n, wm_error *err) {
    pool_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    const char *op = n->proto->op_type;
    s->kind = !strcmp(op, "GlobalMaxPool") ? WM_POOL_MAX : !strcmp(op, "GlobalAveragePool") ? WM_POOL_AVG : WM_POOL_LP;
    if (s->kind == WM_POOL_LP) {
        const wm_onnx_attr *pa = wm_attr(n, "p");
        s->p = !pa ? 2.0 : n->opset < 2 ? (double)pa->f : (double)pa->i;
        if (!(s->p > 0) || !isfinite(s->p)) return wm_node_err(n, err, WM_ERR_INPUT, "p = %g (must be > 0)", s->p);
    }
    n->out_dtype[0] = n->in_dtype[0];
    return wm_check_type(n, 0, wm_types_float, err);
}

static wm_status gpool_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (in[0]->rank < 2) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C, ...)", in[0]->rank);
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    for (int i = 2; i < in[0]->rank; i++) out[0]->dims[i] = 1;
    return WM_OK;
}

typedef struct gpool_job {
    const pool_state *s;
    const wm_tensor *x;
    wm_tensor *y;
    int64_t planes, len;
} gpool_job;

static void gpool_part(void *arg, int ith, int nth) {
    const gpool_job *j = arg;
    long lo, hi;
    wm_split((long)j->planes, ith, nth, &lo, &hi);
    int32_t dt = j->x->dtype;
    for (long q = lo; q < hi; q++) {
        uint64_t b = (uint64_t)(q * j->len);
        double r = 0;
        if (dt == WM_DT_FLOAT && j->s->kind != WM_POOL_LP) {
            const float *v = (const float *)j->x->data + b;
            if (j->s->kind == WM_POOL_MAX) {
                float m = j->len ? v[0] : 0.0f;
                for (int64_t i = 1; i < j->len; i++) m = v[i] > m ? v[i] : m;
                ((float *)j->y->data)[q] = m;
                continue;
            }
            for (int64_t i = 0; i < j->len; i++) r += v[i];
        } else if (j->s->kind == WM_POOL_MAX) {
            r = j->len ? wm_ld(dt, j->x->data, b) : 0;
            for (int64_t i = 1; i < j->len; i++) {
                double v = wm_ld(dt, j->x->data, b + (uint64_t)i);
                r = v > r ? v : r;
            }
        } else {
            for (int64_t i = 0; i < j->len; i++) {
                double v = wm_ld(dt, j->x->data, b + (uint64_t)i);
                r += j->s->kind == WM_POOL_AVG ? v : pow(fabs(v), j->s->p);
            }
        }
        if (j->s->kind == WM_POOL_AVG) r = j->len ? r / (double)j->len : 0;
        if (j->s->kind == WM_POOL_LP) r = pow(r, 1.0 / j->s->p);
        wm_st(dt, j->y->data, (uint64_t)q, r);
    }
}

static wm_status gpool_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    gpool_job j = {n->state, in[0], out[0], in[0]->dims[0] * in[0]->dims[1], 0};
    if (!j.planes) return WM_OK;
    j.len = (int64_t)(wm_tensor_numel(in[0]) / (uint64_t)j.planes);
    int nth = (uint64_t)(j.planes * j.len) >= 65536 ? x->nth : 1;
    if (nth > j.planes) nth = (int)j.planes;
    wm_pool_run(x->pool, gpool_part, &j, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- MaxUnpool */

static wm_status unpool_init(wm_node *n, wm_error *err) {
    wm_win_attr *a = wm_node_alloc(n, sizeof *a);
    if (!a) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = a;
    wm_status st = wm_win_attr_read(n, a, 0, 0, err);
    if (st) return st;
    if (a->n_kernel < 1) return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape is required");
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X and I");
    if ((st = wm_check_type(n, 0, wm_types_numeric, err)) || (st = wm_check_type(n, 1, wm_types_index, err))) return st;
    if (wm_has_in(n, 2) && (st = wm_check_type(n, 2, wm_types_index, err))) return st;
    n->out_dtype[0] = n->in_dtype[0];
    return WM_OK;
}

/* The output dims MaxUnpool infers from X and the attributes (the unpooled tensor the indices refer to). */
static wm_status unpool_dims(const wm_node *n, const wm_tensor *X, int64_t *d, wm_error *err) {
    const wm_win_attr *a = n->state;
    int nd = X->rank - 2;
    if (nd < 1 || nd != a->n_kernel || (a->n_strides && a->n_strides != nd) || (a->n_pads && a->n_pads != 2 * nd))
        return wm_node_err(n, err, WM_ERR_INPUT, "X rank %d does not match kernel_shape/strides/pads", X->rank);
    d[0] = X->dims[0], d[1] = X->dims[1];
    for (int i = 0; i < nd; i++) {
        int64_t s = a->n_strides ? a->strides[i] : 1, pb = a->n_pads ? a->pads[i] : 0, pe = a->n_pads ? a->pads[nd + i] : 0;
        d[2 + i] = (X->dims[2 + i] - 1) * s + a->kernel[i] - pb - pe;
        if (d[2 + i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output dim %d would be negative", 2 + i);
    }
    return WM_OK;
}

static wm_status unpool_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const wm_tensor *X = in[0];
    int64_t d[WM_MAX_RANK];
    wm_status st = unpool_dims(n, X, d, err);
    if (st) return st;
    if (in[1]->rank != X->rank) return wm_node_err(n, err, WM_ERR_INPUT, "I must have the dims of X");
    for (int i = 0; i < X->rank; i++)
        if (in[1]->dims[i] != X->dims[i]) return wm_node_err(n, err, WM_ERR_INPUT, "I must have the dims of X");
    if (n->n_in > 2 && in[2]) {
        int cnt;
        if ((st = wm_cnn_read_ints(n, in[2], d, WM_MAX_RANK, &cnt, err))) return st;
        if (cnt != X->rank) return wm_node_err(n, err, WM_ERR_INPUT, "output_shape has %d values for rank %d", cnt, X->rank);
        for (int i = 0; i < cnt; i++)
            if (d[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output_shape[%d] is negative", i);
    }
    wm_set_shape(out[0], X->rank, d);
    return WM_OK;
}

/*
 * Y = 0, then X[i] goes to the flat index I[i] of the unpooled tensor the
 * attributes infer; when output_shape names other dims, that tensor sits at
 * the origin of Y (ONNX reference semantics).
 */
static wm_status unpool_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t d[WM_MAX_RANK];
    wm_status st = unpool_dims(n, in[0], d, x->err);
    if (st) return st;
    int r = in[0]->rank, same = 1;
    uint64_t inferred = 1;
    for (int i = 0; i < r; i++) {
        inferred *= (uint64_t)d[i];
        same &= d[i] == out[0]->dims[i];
    }
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t total = wm_tensor_numel(out[0]), cnt = wm_tensor_numel(in[0]);
    memset(out[0]->data, 0, (size_t)(total * es));
    for (uint64_t i = 0; i < cnt; i++) {
        int64_t k = wm_tensor_get_int(in[1], i);
        if (k < 0 || (uint64_t)k >= inferred)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "index %lld at %llu is outside the unpooled tensor (%llu elements)",
                               (long long)k, (unsigned long long)i, (unsigned long long)inferred);
        uint64_t o = (uint64_t)k;
        if (!same) { /* coordinates in the inferred dims, placed in Y's dims */
            uint64_t rest = (uint64_t)k, stride = 1;
            o = 0;
            for (int a = r - 1; a >= 0; a--) {
                uint64_t c = rest % (uint64_t)d[a];
                rest /= (uint64_t)d[a];
                if (c >= (uint64_t)out[0]->dims[a])
                    return wm_node_err(n, x->err, WM_ERR_INPUT, "index %lld falls outside output_shape", (long long)k);
                o += c * stride;
                stride *= (uint64_t)out[0]->dims[a];
            }
        }
        memcpy((uint8_t *)out[0]->data + o * es, (const uint8_t *)in[0]->data + i * es, es);
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "MaxPool", 1, 0, pool_init, pool_infer, pool_run, pool_workspace, 0, 0},
    {"", "AveragePool", 1, 0, pool_init, pool_infer, pool_run, pool_workspace, 0, 0},
    {"", "LpPool", 1, 0, pool_init, pool_infer, pool_run, pool_workspace, 0, 0},
    {"", "GlobalAveragePool", 1, 0, gpool_init, gpool_infer, gpool_run, NULL, 0, 0},
    {"", "GlobalMaxPool", 1, 0, gpool_init, gpool_infer, gpool_run, NULL, 0, 0},
    {"", "GlobalLpPool", 1, 0, gpool_init, gpool_infer, gpool_run, NULL, 0, 0},
    {"", "MaxUnpool", 9, 0, unpool_init, unpool_infer, unpool_run, NULL, 0, 1u << 2},
};

const wm_op_table wm_ops_pool = {ops, sizeof ops / sizeof ops[0]};
