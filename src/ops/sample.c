/*
 * sample.c - ops that sample feature maps at computed coordinates:
 * RoiAlign (avg / max, half_pixel or output_half_pixel), GridSample
 * (nearest / linear / cubic, zeros / border / reflection padding,
 * align_corners, 1-3 spatial dims) and AffineGrid (2-D and 3-D).
 * Semantics follow the ONNX reference implementations (which follow
 * PyTorch); arithmetic in double except GridSample's coordinate
 * denormalization, which is float32 like the reference.
 */
#include <math.h>
#include <string.h>

#include "ops/cnn.h"

/* ---------------------------------------------------------------- RoiAlign */

typedef struct roi_state {
    int max_mode, half_pixel;
    int64_t oh, ow, sampling;
    double scale;
} roi_state;

static wm_status roi_init(wm_node *n, wm_error *err) {
    roi_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    char buf[32];
    const char *m = wm_attr_string(n, "mode", "avg", buf, sizeof buf);
    if (strcmp(m, "avg") && strcmp(m, "max")) return wm_node_err(n, err, WM_ERR_INPUT, "mode '%s' is not avg or max", m);
    s->max_mode = !strcmp(m, "max");
    const char *c = wm_attr_string(n, "coordinate_transformation_mode", n->opset < 16 ? "output_half_pixel" : "half_pixel", buf,
                                   sizeof buf);
    if (strcmp(c, "half_pixel") && strcmp(c, "output_half_pixel"))
        return wm_node_err(n, err, WM_ERR_INPUT, "coordinate_transformation_mode '%s' is unknown", c);
    s->half_pixel = !strcmp(c, "half_pixel");
    s->oh = wm_attr_int(n, "output_height", 1);
    s->ow = wm_attr_int(n, "output_width", 1);
    s->sampling = wm_attr_int(n, "sampling_ratio", 0);
    s->scale = wm_attr_float(n, "spatial_scale", 1.0f);
    if (s->oh < 1 || s->ow < 1 || s->sampling < 0)
        return wm_node_err(n, err, WM_ERR_INPUT, "output_height/output_width must be >= 1 and sampling_ratio >= 0");
    if (n->n_in < 3) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X, rois, batch_indices");
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_same_type(n, 0, 1, err);
    if (!st) st = wm_check_type(n, 2, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status roi_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const roi_state *s = n->state;
    if (in[0]->rank != 4) return wm_node_err(n, err, WM_ERR_INPUT, "X must be 4-D (rank %d)", in[0]->rank);
    if (in[1]->rank != 2 || in[1]->dims[1] != 4) return wm_node_err(n, err, WM_ERR_INPUT, "rois must be (num_rois, 4)");
    if (in[2]->rank != 1 || in[2]->dims[0] != in[1]->dims[0])
        return wm_node_err(n, err, WM_ERR_INPUT, "batch_indices must be 1-D with one value per roi");
    int64_t d[4] = {in[1]->dims[0], in[0]->dims[1], s->oh, s->ow};
    wm_set_shape(out[0], 4, d);
    return WM_OK;
}

static size_t roi_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)out, (void)nth;
    return (size_t)in[0]->dims[1] * sizeof(double) + 64; /* one bin of every channel */
}

/* For each roi and bin: sample points on a grid of the bin, bilinear weights, averaged (or the max of weighted taps). */
static wm_status roi_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const roi_state *s = n->state;
    const wm_tensor *X = in[0], *R = in[1];
    int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3], nr = R->dims[0];
    int32_t dt = X->dtype;
    double *acc = x->ws;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = wm_tensor_get_int(in[2], (uint64_t)r);
        if (b < 0 || b >= N)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "batch_indices[%lld] = %lld is out of range", (long long)r, (long long)b);
        double off = s->half_pixel ? 0.5 : 0.0;
        double x0 = wm_ld(dt, R->data, (uint64_t)(r * 4)) * s->scale - off, y0 = wm_ld(dt, R->data, (uint64_t)(r * 4 + 1)) * s->scale - off;
        double x1 = wm_ld(dt, R->data, (uint64_t)(r * 4 + 2)) * s->scale - off, y1 = wm_ld(dt, R->data, (uint64_t)(r * 4 + 3)) * s->scale - off;
        double rw = x1 - x0, rh = y1 - y0;
        if (!s->half_pixel) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        double bh = rh / (double)s->oh, bw = rw / (double)s->ow;
        double ghd = s->sampling ? (double)s->sampling : ceil(rh / (double)s->oh);
        double gwd = s->sampling ? (double)s->sampling : ceil(rw / (double)s->ow);
        if (!(ghd >= 0) || !(gwd >= 0) || ghd * gwd > 1e9)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "roi %lld gives a sampling grid of %g x %g", (long long)r, ghd, gwd);
        int64_t gh = (int64_t)ghd, gw = (int64_t)gwd;
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t ph = 0; ph < s->oh; ph++)
            for (int64_t pw = 0; pw < s->ow; pw++) {
                for (int64_t c = 0; c < C; c++) acc[c] = 0;
                int first = 1;
                for (int64_t iy = 0; iy < gh; iy++) {
                    double yy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        double xx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                        int64_t pos[4] = {0, 0, 0, 0};
                        double w[4] = {0, 0, 0, 0};
                        if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
                            double y = fmax(yy, 0), xv = fmax(xx, 0);
                            int64_t yl = (int64_t)y, xl = (int64_t)xv, yh, xh;
                            if (yl >= H - 1) yh = yl = H - 1, y = (double)yl;
                            else yh = yl + 1;
                            if (xl >= W - 1) xh = xl = W - 1, xv = (double)xl;
                            else xh = xl + 1;
                            double ly = y - (double)yl, lx = xv - (double)xl, hy = 1 - ly, hx = 1 - lx;
                            pos[0] = yl * W + xl, pos[1] = yl * W + xh, pos[2] = yh * W + xl, pos[3] = yh * W + xh;
                            w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
                        }
                        for (int64_t c = 0; c < C; c++) {
                            uint64_t xb = (uint64_t)((b * C + c) * H * W);
                            double t[4];
                            for (int i = 0; i < 4; i++) t[i] = w[i] * wm_ld(dt, X->data, xb + (uint64_t)pos[i]);
                            if (!s->max_mode) acc[c] += t[0] + t[1] + t[2] + t[3];
                            else {
                                double m = fmax(fmax(t[0], t[1]), fmax(t[2], t[3]));
                                acc[c] = first ? m : fmax(acc[c], m);
                            }
                        }
                        first = 0;
                    }
                }
                for (int64_t c = 0; c < C; c++)
                    wm_st(dt, out[0]->data, (uint64_t)(((r * C + c) * s->oh + ph) * s->ow + pw), s->max_mode ? acc[c] : acc[c] / count);
            }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- GridSample */

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GP_ZEROS, GP_BORDER, GP_REFLECTION };

typedef struct gs_state {
    int mode, pad, align;
} gs_state;

static wm_status gs_init(wm_node *n, wm_error *err) {
    gs_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    char buf[32];
    const char *m = wm_attr_string(n, "mode", n->opset < 20 ? "bilinear" : "linear", buf, sizeof buf);
    if (!strcmp(m, "bilinear") || !strcmp(m, "linear")) s->mode = GS_LINEAR;
    else if (!strcmp(m, "bicubic") || !strcmp(m, "cubic")) s->mode = GS_CUBIC;
    else if (!strcmp(m, "nearest")) s->mode = GS_NEAREST;
    else return wm_node_err(n, err, WM_ERR_INPUT, "mode '%s' is unknown", m);
    const char *p = wm_attr_string(n, "padding_mode", "zeros", buf, sizeof buf);
    if (!strcmp(p, "zeros")) s->pad = GP_ZEROS;
    else if (!strcmp(p, "border")) s->pad = GP_BORDER;
    else if (!strcmp(p, "reflection")) s->pad = GP_REFLECTION;
    else return wm_node_err(n, err, WM_ERR_INPUT, "padding_mode '%s' is unknown", p);
    s->align = wm_attr_int(n, "align_corners", 0) != 0;
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X and grid");
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_type(n, 1, wm_types_float, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status gs_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const wm_tensor *X = in[0], *G = in[1];
    int nd = X->rank - 2;
    if (nd < 1 || nd > WM_CNN_ND) return wm_node_err(n, err, nd < 1 ? WM_ERR_INPUT : WM_ERR_UNSUPPORTED, "X has %d spatial dims (1 to %d supported)", nd, WM_CNN_ND);
    if (G->rank != X->rank || G->dims[0] != X->dims[0] || G->dims[G->rank - 1] != nd)
        return wm_node_err(n, err, WM_ERR_INPUT, "grid must be (N, out spatial..., %d)", nd);
    int64_t d[WM_MAX_RANK] = {X->dims[0], X->dims[1]};
    for (int i = 0; i < nd; i++) d[2 + i] = G->dims[1 + i];
    wm_set_shape(out[0], X->rank, d);
    return WM_OK;
}

static double gs_reflect(double x, double lo, double hi) {
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        double dx = lo - x;
        int64_t k = (int64_t)(dx / rng);
        double r = dx - (double)k * rng;
        return k % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        int64_t k = (int64_t)(dx / rng);
        double r = dx - (double)k * rng;
        return k % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

/* index i of a dim of length len after the padding mode; -1: a zero pixel */
static int64_t gs_pixel(const gs_state *s, int64_t i, int64_t len, double lo, double hi) {
    if (s->pad == GP_ZEROS) return i >= 0 && i < len ? i : -1;
    if (s->pad == GP_BORDER) return i < 0 ? 0 : i >= len ? len - 1 : i;
    int64_t r = (int64_t)gs_reflect((double)i, lo, hi);
    return r < 0 ? 0 : r >= len ? len - 1 : r;
}

static void cubic4(double t, double *c) {
    const double A = -0.75;
    t = fabs(t);
    c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
    c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

static wm_status gs_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    const gs_state *s = n->state;
    const wm_tensor *X = in[0], *G = in[1];
    int nd = X->rank - 2, o3 = WM_CNN_ND - nd;
    int64_t N = X->dims[0], C = X->dims[1], idim[WM_CNN_ND] = {1, 1, 1}, P = 1, inP = 1;
    for (int i = 0; i < nd; i++) idim[o3 + i] = X->dims[2 + i], inP *= X->dims[2 + i], P *= G->dims[1 + i];
    int32_t dt = X->dtype;
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < P; p++) {
            /* per slot: taps (index or -1) and weights */
            int64_t ti[WM_CNN_ND][4];
            double tw[WM_CNN_ND][4];
            int nt[WM_CNN_ND];
            for (int j = 0; j < WM_CNN_ND; j++) {
                nt[j] = 1, ti[j][0] = 0, tw[j][0] = 1;
                if (j < o3) continue;
                int i = j - o3;
                int64_t len = idim[j];
                float g = (float)wm_ld(G->dtype, G->data, (uint64_t)((b * P + p) * nd + (nd - 1 - i))); /* grid is (x, y, z) */
                float xf = s->align ? (g + 1.0f) / 2.0f * (float)(len - 1) : ((g + 1.0f) * (float)len - 1.0f) / 2.0f;
                double xv = xf, lo = s->align ? 0 : -0.5, hi = s->align ? (double)(len - 1) : (double)len - 0.5;
                if (s->mode == GS_NEAREST) xv = (double)nearbyintf(xf);
                if (xv < lo || xv > hi) {
                    if (s->pad == GP_BORDER) xv = xv < 0 ? 0 : xv > (double)(len - 1) ? (double)(len - 1) : xv;
                    else if (s->pad == GP_REFLECTION) xv = gs_reflect(xv, lo, hi);
                }
                if (s->mode == GS_NEAREST) {
                    ti[j][0] = gs_pixel(s, (int64_t)xv, len, lo, hi);
                    continue;
                }
                double f = floor(xv), t = xv - f;
                if (s->mode == GS_LINEAR) {
                    nt[j] = 2;
                    tw[j][0] = 1 - t, tw[j][1] = t;
                    for (int k = 0; k < 2; k++) ti[j][k] = gs_pixel(s, (int64_t)f + k, len, lo, hi);
                } else {
                    nt[j] = 4;
                    cubic4(t, tw[j]);
                    for (int k = 0; k < 4; k++) ti[j][k] = gs_pixel(s, (int64_t)f - 1 + k, len, lo, hi);
                }
            }
            for (int64_t c = 0; c < C; c++) {
                uint64_t xb = (uint64_t)((b * C + c) * inP);
                double v = 0;
                for (int a = 0; a < nt[0]; a++)
                    for (int bb = 0; bb < nt[1]; bb++)
                        for (int k = 0; k < nt[2]; k++) {
                            if (ti[0][a] < 0 || ti[1][bb] < 0 || ti[2][k] < 0) continue;
                            double w = tw[0][a] * tw[1][bb] * tw[2][k];
                            v += w * wm_ld(dt, X->data, xb + (uint64_t)((ti[0][a] * idim[1] + ti[1][bb]) * idim[2] + ti[2][k]));
                        }
                wm_st(dt, out[0]->data, (uint64_t)((b * C + c) * P + p), v);
            }
        }
    return WM_OK;
}

/* ---------------------------------------------------------------- AffineGrid */

static wm_status ag_init(wm_node *n, wm_error *err) {
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs theta and size");
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status ag_size(const wm_node *n, wm_tensor *const *in, int64_t *sz, int *cnt, wm_error *err) {
    wm_status st = wm_cnn_read_ints(n, in[1], sz, 5, cnt, err);
    if (st) return st;
    if (*cnt != 4 && *cnt != 5) return wm_node_err(n, err, WM_ERR_INPUT, "size must have 4 (2-D) or 5 (3-D) values");
    int nd = *cnt - 2;
    for (int i = 0; i < *cnt; i++)
        if (sz[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "size[%d] is negative", i);
    const wm_tensor *T = in[0];
    if (T->rank != 3 || T->dims[0] != sz[0] || T->dims[1] != nd || T->dims[2] != nd + 1)
        return wm_node_err(n, err, WM_ERR_INPUT, "theta must be (N, %d, %d)", nd, nd + 1);
    return WM_OK;
}

static wm_status ag_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t sz[5];
    int cnt;
    wm_status st = ag_size(n, in, sz, &cnt, err);
    if (st) return st;
    int64_t d[5] = {sz[0]};
    for (int i = 2; i < cnt; i++) d[i - 1] = sz[i];
    d[cnt - 1] = cnt - 2;
    wm_set_shape(out[0], cnt, d);
    return WM_OK;
}

static double ag_base(int64_t i, int64_t len, int align) {
    if (align) return len > 1 ? -1.0 + 2.0 * (double)i / (double)(len - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)len;
}

static wm_status ag_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t sz[5];
    int cnt;
    wm_status st = ag_size(n, in, sz, &cnt, x->err);
    if (st) return st;
    int align = wm_attr_int(n, "align_corners", 0) != 0, nd = cnt - 2;
    int64_t D = nd == 3 ? sz[2] : 1, H = sz[cnt - 2], W = sz[cnt - 1];
    const wm_tensor *T = in[0];
    uint64_t o = 0;
    for (int64_t b = 0; b < sz[0]; b++)
        for (int64_t z = 0; z < D; z++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t xx = 0; xx < W; xx++) {
                    double h[4] = {ag_base(xx, W, align), ag_base(y, H, align), nd == 3 ? ag_base(z, D, align) : 1.0, 1.0};
                    for (int r = 0; r < nd; r++) {
                        double v = 0;
                        for (int k = 0; k <= nd; k++)
                            v += wm_ld(T->dtype, T->data, (uint64_t)((b * nd + r) * (nd + 1) + k)) * h[k];
                        wm_st(out[0]->dtype, out[0]->data, o++, v);
                    }
                }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "RoiAlign", 10, 0, roi_init, roi_infer, roi_run, roi_workspace, 0, 0},
    {"", "GridSample", 16, 0, gs_init, gs_infer, gs_run, NULL, 0, 0},
    {"", "AffineGrid", 20, 0, ag_init, ag_infer, ag_run, NULL, 0, 1u << 1},
};

const wm_op_table wm_ops_sample = {ops, sizeof ops / sizeof ops[0]};
