/*
 * resize.c - Resize (10, 11+: nearest with every nearest_mode, linear and
 * cubic with cubic_coeff_a and exclude_outside, every
 * coordinate_transformation_mode, scales or sizes, antialias,
 * keep_aspect_ratio_policy, axes) and Upsample (7-9).
 *
 * Semantics follow the ONNX reference: each resized axis maps output
 * position y to a source coordinate x (the coordinate mode; with scales
 * the given scale is used, with sizes out / in), and takes taps p near x
 * with weights K(|p - x| * s) (K: the linear or cubic kernel; s = 1, or
 * min(scale, 1) with antialias, which normalizes the weights); indices
 * outside the input clamp to the edge (exclude_outside drops them and
 * renormalizes). Axes are resized one after another (separable) in double;
 * nearest gathers directly; float32 tensors resized on their last two axes
 * only (images) run per plane in float32 on the threads. Opset 10 and Upsample use asymmetric
 * coordinates and floor (ceil when downsampling) for nearest; opset 11-12
 * also has tf_half_pixel_for_nn (x = (y + 0.5) / scale).
 */
#include <math.h>
#include <string.h>

#include "ops/cnn.h"
#include "ops/cnn_kern.h"

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_CROP, CT_TF_HALF_PIXEL_NN };
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };
enum { KA_STRETCH, KA_NOT_LARGER, KA_NOT_SMALLER };

typedef struct rs_state {
    int mode, ctm, nearest, keep, antialias, exclude, legacy, upsample;
    double cubic_a, extrap;
    int n_axes;
    int64_t axes[WM_MAX_RANK];
    int n_attr_scales; /* Upsample 7-8: scales attribute */
    double attr_scales[WM_MAX_RANK];
} rs_state;

typedef struct named {
    const char *name;
    int v;
} named;

static int lookup(const named *t, const char *s) {
    for (; t->name; t++)
        if (!strcmp(t->name, s)) return t->v;
    return -1;
}

static const named modes[] = {{"nearest", RS_NEAREST}, {"linear", RS_LINEAR}, {"bilinear", RS_LINEAR},
                              {"cubic", RS_CUBIC}, {"trilinear", RS_LINEAR}, {NULL, 0}};
static const named ctms[] = {{"half_pixel", CT_HALF_PIXEL}, {"half_pixel_symmetric", CT_HALF_PIXEL_SYM},
                             {"pytorch_half_pixel", CT_PYTORCH_HALF_PIXEL}, {"align_corners", CT_ALIGN_CORNERS},
                             {"asymmetric", CT_ASYMMETRIC}, {"tf_crop_and_resize", CT_TF_CROP},
                             {"tf_half_pixel_for_nn", CT_TF_HALF_PIXEL_NN}, {NULL, 0}};
static const named nms[] = {{"round_prefer_floor", NM_ROUND_FLOOR}, {"round_prefer_ceil", NM_ROUND_CEIL},
                            {"floor", NM_FLOOR}, {"ceil", NM_CEIL}, {NULL, 0}};
static const named kas[] = {{"stretch", KA_STRETCH}, {"not_larger", KA_NOT_LARGER}, {"not_smaller", KA_NOT_SMALLER}, {NULL, 0}};

static const int32_t rs_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, WM_DT_INT8, WM_DT_UINT8,
                                   WM_DT_INT16, WM_DT_UINT16, WM_DT_INT32, WM_DT_INT64, 0};

static wm_status rs_init(wm_node *n, wm_error *err) {
    rs_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->upsample = !strcmp(n->proto->op_type, "Upsample");
    s->legacy = s->upsample || n->opset < 11;
    char buf[64];
    const char *m = wm_attr_string(n, "mode", "nearest", buf, sizeof buf);
    if ((s->mode = lookup(modes, m)) < 0 || (s->legacy && s->mode == RS_CUBIC))
        return wm_node_err(n, err, WM_ERR_INPUT, "mode '%s' is not supported", m);
    s->ctm = CT_ASYMMETRIC;
    s->nearest = NM_SIMPLE;
    s->keep = KA_STRETCH;
    if (!s->legacy) {
        const char *c = wm_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf);
        if ((s->ctm = lookup(ctms, c)) < 0) return wm_node_err(n, err, WM_ERR_INPUT, "coordinate_transformation_mode '%s' is unknown", c);
        c = wm_attr_string(n, "nearest_mode", "round_prefer_floor", buf, sizeof buf);
        if ((s->nearest = lookup(nms, c)) < 0) return wm_node_err(n, err, WM_ERR_INPUT, "nearest_mode '%s' is unknown", c);
        c = wm_attr_string(n, "keep_aspect_ratio_policy", "stretch", buf, sizeof buf);
        if ((s->keep = lookup(kas, c)) < 0) return wm_node_err(n, err, WM_ERR_INPUT, "keep_aspect_ratio_policy '%s' is unknown", c);
        s->cubic_a = wm_attr_float(n, "cubic_coeff_a", -0.75f);
        s->exclude = wm_attr_int(n, "exclude_outside", 0) != 0;
        s->extrap = wm_attr_float(n, "extrapolation_value", 0.0f);
        s->antialias = wm_attr_int(n, "antialias", 0) != 0 && s->mode != RS_NEAREST;
        size_t k;
        const int64_t *ax = wm_attr_ints(n, "axes", &k);
        if (k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_INPUT, "axes has %zu values", k);
        for (size_t i = 0; i < k; i++) s->axes[i] = ax[i];
        s->n_axes = ax ? (int)k : -1;
    } else
        s->n_axes = -1;
    if (s->upsample && n->opset < 9) {
        size_t k;
        const float *sc = wm_attr_floats(n, "scales", &k);
        if (!sc || k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_INPUT, "attribute scales is required");
        for (size_t i = 0; i < k; i++) s->attr_scales[i] = sc[i];
        s->n_attr_scales = (int)k;
    }
    n->out_dtype[0] = n->in_dtype[0];
    return wm_check_type(n, 0, rs_types, err);
}

/* Reads float scales of an input tensor into v (numel into *count). */
static wm_status read_scales(const wm_node *n, const wm_tensor *t, double *v, int *count, wm_error *err) {
    uint64_t cnt = wm_tensor_numel(t);
    if (!t->data && cnt) return WM_NEED_DATA;
    if (cnt > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_INPUT, "scales has %llu values", (unsigned long long)cnt);
    if (t->dtype != WM_DT_FLOAT && t->dtype != WM_DT_DOUBLE && t->dtype != WM_DT_FLOAT16)
        return wm_node_err(n, err, WM_ERR_INPUT, "scales must be float");
    for (uint64_t i = 0; i < cnt; i++) v[i] = wm_ld(t->dtype, t->data, i);
    *count = (int)cnt;
    return WM_OK;
}

/* Output dims and per-axis scales (1 for axes left alone) of a Resize/Upsample node. */
static wm_status rs_params(const wm_node *n, wm_tensor *const *in, int64_t *od, double *sc, wm_error *err) {
    const rs_state *s = n->state;
    const wm_tensor *X = in[0];
    int r = X->rank, axes[WM_MAX_RANK], na = r;
    for (int i = 0; i < r; i++) axes[i] = i, od[i] = X->dims[i], sc[i] = 1.0;
    if (s->n_axes >= 0) {
        na = s->n_axes;
        int seen[WM_MAX_RANK] = {0};
        for (int i = 0; i < na; i++) {
            int a = wm_axis(s->axes[i], r);
            if (a < 0 || seen[a]) return wm_node_err(n, err, WM_ERR_INPUT, "axes[%d] = %lld is out of range or repeated", i, (long long)s->axes[i]);
            seen[a] = 1;
            axes[i] = a;
        }
    }
    double v[WM_MAX_RANK];
    int64_t sz[WM_MAX_RANK];
    int nv = 0, nsz = 0;
    wm_status st;
    if (s->upsample && n->opset < 9) {
        nv = s->n_attr_scales;
        memcpy(v, s->attr_scales, sizeof v);
    } else if (s->legacy) {
        if (n->n_in < 2 || !in[1]) return wm_node_err(n, err, WM_ERR_INPUT, "input scales is required");
        if ((st = read_scales(n, in[1], v, &nv, err))) return st;
    } else {
        if (n->n_in > 2 && in[2] && wm_tensor_numel(in[2]) && (st = read_scales(n, in[2], v, &nv, err))) return st;
        if (n->n_in > 3 && in[3] && wm_tensor_numel(in[3]) && (st = wm_cnn_read_ints(n, in[3], sz, WM_MAX_RANK, &nsz, err)))
            return st;
        if ((nv > 0) == (nsz > 0)) return wm_node_err(n, err, WM_ERR_INPUT, "exactly one of scales and sizes must be given");
    }
    if (nv) {
        if (nv != na) return wm_node_err(n, err, WM_ERR_INPUT, "scales has %d values for %d axes", nv, na);
        for (int i = 0; i < na; i++) {
            if (!(v[i] > 0) || !isfinite(v[i])) return wm_node_err(n, err, WM_ERR_INPUT, "scales[%d] = %g (must be > 0)", i, v[i]);
            sc[axes[i]] = v[i];
            double o = floor((double)(float)v[i] * (double)X->dims[axes[i]]);
            if (o > (double)((int64_t)1 << 40)) return wm_node_err(n, err, WM_ERR_INPUT, "scales[%d] makes the output too large", i);
            od[axes[i]] = (int64_t)o;
        }
        return WM_OK;
    }
    if (nsz != na) return wm_node_err(n, err, WM_ERR_INPUT, "sizes has %d values for %d axes", nsz, na);
    for (int i = 0; i < na; i++) {
        if (sz[i] < 0 || sz[i] > ((int64_t)1 << 40)) return wm_node_err(n, err, WM_ERR_INPUT, "sizes[%d] = %lld", i, (long long)sz[i]);
        int64_t d = X->dims[axes[i]];
        sc[axes[i]] = d ? (double)sz[i] / (double)d : 1.0;
        od[axes[i]] = sz[i];
    }
    if (s->keep != KA_STRETCH) {
        double k = sc[axes[0]];
        for (int i = 1; i < na; i++) k = s->keep == KA_NOT_LARGER ? fmin(k, sc[axes[i]]) : fmax(k, sc[axes[i]]);
        for (int i = 0; i < na; i++) {
            sc[axes[i]] = k;
            od[axes[i]] = (int64_t)(k * (double)X->dims[axes[i]] + 0.5);
        }
    }
    return WM_OK;
}

static wm_status rs_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t od[WM_MAX_RANK];
    double sc[WM_MAX_RANK];
    wm_status st = rs_params(n, in, od, sc, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, od);
    return WM_OK;
}

/* ---------------------------------------------------------------- taps */

static double cubic_k(double x, double A) {
    x = fabs(x);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* Source coordinate of output position y; *ext set when tf_crop_and_resize falls outside the input. */
static double src_coord(const rs_state *s, int64_t y, double scale, int64_t in, int64_t out, double r0, double r1, int *ext) {
    double ow = scale * (double)in, x;
    *ext = 0;
    switch (s->ctm) {
    case CT_ALIGN_CORNERS: x = ow == 1 ? 0 : (double)y * (double)(in - 1) / (ow - 1); break;
    case CT_ASYMMETRIC: x = (double)y / scale; break;
    case CT_TF_HALF_PIXEL_NN: x = ((double)y + 0.5) / scale; break; /* opset 11-12 */
    case CT_TF_CROP:
        x = ow == 1 ? (r1 - r0) * (double)(in - 1) / 2 : (double)y * (r1 - r0) * (double)(in - 1) / (ow - 1);
        x += r0 * (double)(in - 1);
        *ext = x < 0 || x > (double)(in - 1);
        break;
    case CT_PYTORCH_HALF_PIXEL: x = ow == 1 ? -0.5 : ((double)y + 0.5) / scale - 0.5; break;
    case CT_HALF_PIXEL_SYM: {
        double adj = (double)out / ow, off = (double)in / 2 * (1 - adj);
        x = off + ((double)y + 0.5) / scale - 0.5;
        break;
    }
    default: x = ((double)y + 0.5) / scale - 0.5; break;
    }
    return x;
}

static int64_t nearest_of(const rs_state *s, double x, double scale) {
    double f = floor(x), r = x - f;
    switch (s->nearest) {
    case NM_ROUND_FLOOR: return (int64_t)(r <= 0.5 ? f : f + 1);
    case NM_ROUND_CEIL: return (int64_t)(r < 0.5 ? f : f + 1);
    case NM_FLOOR: return (int64_t)f;
    case NM_CEIL: return (int64_t)ceil(x);
    default: return (int64_t)(scale < 1 ? ceil(x) : f); /* opset 10, Upsample */
    }
}

/*
 * Taps per output position of an axis (dims in, out; scale 0: the bound for
 * any scale). With antialias the kernel widens by 1 / min(scale, 1); every
 * scale that gives `out` is at least (out - 1) / in, or 0.5 / in for out = 1
 * (scales: out <= scale * in; keep_aspect_ratio_policy rounds half up),
 * which bounds the width.
 */
static int n_taps(const rs_state *s, double scale, int64_t in, int64_t out) {
    if (s->mode == RS_NEAREST) return 1;
    double sup = s->mode == RS_LINEAR ? 1 : 2;
    if (!s->antialias || scale >= 1) return (int)(2 * sup);
    double se = out > 1 ? (double)(out - 1) / (double)in : 0.5 / (double)(in > 0 ? in : 1);
    return 2 * (int)ceil(sup / se) + 2;
}

typedef struct axis_taps {
    int n;          /* taps per position (0: axis not resized) */
    int64_t *idx;   /* [out][n] clamped source indices */
    double *w;      /* [out][n] */
    uint8_t *ext;   /* [out] extrapolated (tf_crop_and_resize) */
} axis_taps;

static void make_taps(const rs_state *s, axis_taps *t, double scale, int64_t in, int64_t out, double r0, double r1) {
    double se = s->antialias && scale < 1 ? scale : 1, sup = s->mode == RS_LINEAR ? 1 : 2;
    int half = (int)ceil(sup / se);
    for (int64_t y = 0; y < out; y++) {
        int e;
        double x = src_coord(s, y, scale, in, out, r0, r1, &e);
        /* an roi of NaN or 1e300 (tf_crop_and_resize) or a tiny scale: bounded before the integer conversions below
         * (the index is clamped to [0, in) anyway); NaN reads as extrapolated */
        if (x != x) e = 1, x = 0;
        x = x < -1e15 ? -1e15 : x > 1e15 ? 1e15 : x;
        t->ext[y] = (uint8_t)e;
        int64_t *ix = t->idx + y * t->n;
        double *w = t->w + y * t->n;
        if (s->mode == RS_NEAREST) {
            int64_t p = nearest_of(s, x, scale);
            ix[0] = p < 0 ? 0 : p >= in ? in - 1 : p;
            w[0] = 1;
            continue;
        }
        double f = floor(x), sum = 0;
        for (int k = 0; k < t->n; k++) {
            int64_t p = (int64_t)f - half + 1 + k;
            double d = ((double)p - x) * se, wt = k < 2 * half ? (s->mode == RS_LINEAR ? fmax(0, 1 - fabs(d)) : cubic_k(d, s->cubic_a)) : 0;
            if (s->exclude && (p < 0 || p >= in)) wt = 0;
            ix[k] = p < 0 ? 0 : p >= in ? in - 1 : p;
            w[k] = wt;
            sum += wt;
        }
        if ((s->antialias || s->exclude) && sum != 0)
            for (int k = 0; k < t->n; k++) w[k] /= sum;
    }
}

/* ---------------------------------------------------------------- run */

static int axis_identity(const rs_state *s, double scale, int64_t in, int64_t out, double r0, double r1) {
    return fabs(scale - 1) < 1e-9 && in == out && (s->ctm != CT_TF_CROP || (fabs(r0) < 1e-9 && fabs(r1 - 1) < 1e-9));
}

static size_t rs_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    const rs_state *s = n->state;
    int r = in[0]->rank;
    uint64_t b = 256, cur = wm_tensor_numel(in[0]), mx = cur > wm_tensor_numel(out[0]) ? cur : wm_tensor_numel(out[0]);
    for (int a = 0; a < r; a++) {
        int64_t i = in[0]->dims[a], o = out[0]->dims[a];
        int nt = n_taps(s, 0, i, o);
        b += (uint64_t)o * ((uint64_t)nt * 16 + 1) + 128;
        if (i) cur = cur / (uint64_t)i * (uint64_t)o;
        if (cur > mx) mx = cur;
    }
    if (s->mode != RS_NEAREST) b += 2 * mx * sizeof(double) + 128;
    if (r >= 2) /* float32 planes: width weights, a row per thread */
        b += (uint64_t)out[0]->dims[r - 1] * (uint64_t)n_taps(s, 0, in[0]->dims[r - 1], out[0]->dims[r - 1]) * sizeof(float) +
             (uint64_t)nth * (uint64_t)((in[0]->dims[r - 1] + 15) & ~(int64_t)15) * sizeof(float) + 128;
    return (size_t)b;
}

static uint8_t *take(uint8_t **cur, uint64_t bytes) {
    uint8_t *p = *cur;
    *cur += (bytes + 63) & ~(uint64_t)63;
    return p;
}

static void store_val(int32_t dt, void *p, uint64_t i, double v) {
    switch (dt) {
    case WM_DT_FLOAT: case WM_DT_DOUBLE: case WM_DT_FLOAT16: case WM_DT_BFLOAT16: wm_st(dt, p, i, v); break;
    default: {
        double lo = 0, hi = 0;
        switch (dt) {
        case WM_DT_INT8: lo = -128, hi = 127; break;
        case WM_DT_UINT8: lo = 0, hi = 255; break;
        case WM_DT_INT16: lo = -32768, hi = 32767; break;
        case WM_DT_UINT16: lo = 0, hi = 65535; break;
        case WM_DT_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
        default: lo = -9.2e18, hi = 9.2e18; break;
        }
        v = nearbyint(v);
        v = v < lo ? lo : v > hi ? hi : v;
        switch (dt) {
        case WM_DT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
        case WM_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
        case WM_DT_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
        case WM_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
        case WM_DT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
        default: ((int64_t *)p)[i] = (int64_t)v; break;
        }
    }
    }
}

static double load_val(const wm_tensor *t, uint64_t i) {
    switch (t->dtype) {
    case WM_DT_FLOAT: case WM_DT_DOUBLE: case WM_DT_FLOAT16: case WM_DT_BFLOAT16: return wm_ld(t->dtype, t->data, i);
    default: return (double)wm_tensor_get_int(t, i);
    }
}

/* ---------------------------------------------------------------- float32 planes (the last two axes resized) */

typedef struct plane_job {
    const rs_state *s;
    const axis_taps *th, *tw; /* taps of the height and width axes (n = 0: the axis is kept) */
    const float *x;
    float *y;
    int64_t planes, ih, iw, oh, ow;
    float *rows;     /* per thread: iw floats */
    const float *ww; /* the width taps' weights in float32 */
} plane_job;

/* Each output row: the height taps combine input rows into a row (vector FMAs), then the width taps gather from it. */
static void plane_part(void *arg, int ith, int nth) {
    const plane_job *j = arg;
    long lo, hi;
    wm_split((long)j->planes, ith, nth, &lo, &hi);
    float *row = j->rows + (size_t)ith * (size_t)((j->iw + 15) & ~(int64_t)15);
    float ev = (float)j->s->extrap;
    for (long q = lo; q < hi; q++) {
        const float *xp = j->x + q * j->ih * j->iw;
        float *yp = j->y + q * j->oh * j->ow;
        for (int64_t oy = 0; oy < j->oh; oy++) {
            float *yr = yp + oy * j->ow;
            if (j->th->n && j->th->ext[oy]) {
                for (int64_t ox = 0; ox < j->ow; ox++) yr[ox] = ev;
                continue;
            }
            const float *src = row;
            if (!j->th->n) src = xp + oy * j->iw;
            else {
                for (int64_t i = 0; i < j->iw; i++) row[i] = 0;
                for (int k = 0; k < j->th->n; k++) {
                    float wk = (float)j->th->w[oy * j->th->n + k];
                    if (wk != 0) wm_cnn_axpy(row, xp + j->th->idx[oy * j->th->n + k] * j->iw, wk, j->iw);
                }
            }
            if (!j->tw->n) {
                memcpy(yr, src, (size_t)j->ow * sizeof *yr);
                continue;
            }
            int nt = j->tw->n;
            if (nt == 1)
                for (int64_t ox = 0; ox < j->ow; ox++) yr[ox] = src[j->tw->idx[ox]];
            else if (nt == 2)
                for (int64_t ox = 0; ox < j->ow; ox++)
                    yr[ox] = j->ww[2 * ox] * src[j->tw->idx[2 * ox]] + j->ww[2 * ox + 1] * src[j->tw->idx[2 * ox + 1]];
            else
                for (int64_t ox = 0; ox < j->ow; ox++) {
                    const int64_t *ix = j->tw->idx + ox * nt;
                    const float *w = j->ww + ox * nt;
                    float v = 0;
                    for (int k = 0; k < nt; k++) v += w[k] * src[ix[k]];
                    yr[ox] = v;
                }
            for (int64_t ox = 0; ox < j->ow; ox++)
                if (j->tw->ext[ox]) yr[ox] = ev;
        }
    }
}

static wm_status rs_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const rs_state *s = n->state;
    const wm_tensor *X = in[0];
    int r = X->rank;
    int64_t od[WM_MAX_RANK];
    double sc[WM_MAX_RANK], roi[2 * WM_MAX_RANK];
    wm_status st = rs_params(n, in, od, sc, x->err);
    if (st) return st;
    uint64_t total = wm_tensor_numel(out[0]);
    if (!total) return WM_OK;
    for (int a = 0; a < r; a++) roi[a] = 0, roi[r + a] = 1;
    if (s->ctm == CT_TF_CROP && n->n_in > 1 && in[1] && wm_tensor_numel(in[1])) {
        int na = s->n_axes >= 0 ? s->n_axes : r;
        if (wm_tensor_numel(in[1]) != (uint64_t)(2 * na)) return wm_node_err(n, x->err, WM_ERR_INPUT, "roi must have 2 values per axis");
        for (int i = 0; i < na; i++) {
            int a = s->n_axes >= 0 ? wm_axis(s->axes[i], r) : i;
            roi[a] = wm_ld(in[1]->dtype, in[1]->data, (uint64_t)i);
            roi[r + a] = wm_ld(in[1]->dtype, in[1]->data, (uint64_t)(na + i));
        }
    }
    if (wm_tensor_numel(X) == 0) return wm_node_err(n, x->err, WM_ERR_INPUT, "cannot resize an empty input to a non-empty output");
    uint8_t *cur = x->ws;
    axis_taps t[WM_MAX_RANK];
    for (int a = 0; a < r; a++) {
        memset(&t[a], 0, sizeof t[a]);
        if (axis_identity(s, sc[a], X->dims[a], od[a], roi[a], roi[r + a])) continue;
        t[a].n = n_taps(s, sc[a], X->dims[a], od[a]);
        t[a].idx = (int64_t *)take(&cur, (uint64_t)od[a] * (uint64_t)t[a].n * 8);
        t[a].w = (double *)take(&cur, (uint64_t)od[a] * (uint64_t)t[a].n * 8);
        t[a].ext = take(&cur, (uint64_t)od[a]);
        make_taps(s, &t[a], sc[a], X->dims[a], od[a], roi[a], roi[r + a]);
    }
    int last2 = r >= 2 && X->dtype == WM_DT_FLOAT;
    for (int a = 0; a < r - 2 && last2; a++) last2 = !t[a].n;
    if (last2) {
        float *ww = (float *)take(&cur, (uint64_t)(od[r - 1] * t[r - 1].n) * sizeof(float));
        for (int64_t i = 0; i < od[r - 1] * t[r - 1].n; i++) ww[i] = (float)t[r - 1].w[i];
        plane_job j = {s, &t[r - 2], &t[r - 1], X->data, out[0]->data, 1, X->dims[r - 2], X->dims[r - 1], od[r - 2], od[r - 1],
                       (float *)take(&cur, 0), ww};
        for (int a = 0; a < r - 2; a++) j.planes *= X->dims[a];
        int nth = total >= 32768 ? x->nth : 1;
        if (nth > j.planes) nth = (int)j.planes;
        wm_pool_run(x->pool, plane_part, &j, nth);
        return WM_OK;
    }
    if (s->mode == RS_NEAREST) { /* direct gather */
        int64_t ist[WM_MAX_RANK], sst = 1;
        for (int a = r - 1; a >= 0; a--) ist[a] = sst, sst *= X->dims[a];
        size_t es = wm_dtype_size(X->dtype);
        uint8_t ev[16] = {0};
        store_val(X->dtype, ev, 0, s->extrap);
        for (uint64_t o = 0; o < total; o++) {
            uint64_t rem = o;
            int64_t off = 0;
            int ext = 0;
            for (int a = r - 1; a >= 0; a--) {
                int64_t y = (int64_t)(rem % (uint64_t)od[a]);
                rem /= (uint64_t)od[a];
                if (t[a].n) {
                    ext |= t[a].ext[y];
                    off += t[a].idx[y] * ist[a];
                } else
                    off += y * ist[a];
            }
            memcpy((uint8_t *)out[0]->data + o * es, ext ? ev : (const uint8_t *)X->data + (uint64_t)off * es, es);
        }
        return WM_OK;
    }
    /* separable passes in double: buffers A -> B per resized axis */
    uint64_t mx = wm_tensor_numel(X) > total ? wm_tensor_numel(X) : total, cn = wm_tensor_numel(X);
    int64_t cd[WM_MAX_RANK];
    for (int a = 0; a < r; a++) cd[a] = X->dims[a];
    for (int a = 0; a < r; a++) {
        if (!t[a].n) continue;
        uint64_t nn = cn / (uint64_t)cd[a] * (uint64_t)od[a];
        if (nn > mx) mx = nn;
        cn = nn, cd[a] = od[a];
    }
    double *A = (double *)take(&cur, mx * 8), *B = (double *)take(&cur, mx * 8);
    cn = wm_tensor_numel(X);
    for (uint64_t i = 0; i < cn; i++) A[i] = load_val(X, i);
    for (int a = 0; a < r; a++) cd[a] = X->dims[a];
    for (int a = 0; a < r; a++) {
        if (!t[a].n) continue;
        int64_t outer = 1, inner = 1, in_len = cd[a], out_len = od[a];
        for (int b = 0; b < a; b++) outer *= cd[b];
        for (int b = a + 1; b < r; b++) inner *= cd[b];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t y = 0; y < out_len; y++) {
                double *dst = B + (o * out_len + y) * inner;
                if (t[a].ext[y]) {
                    for (int64_t i = 0; i < inner; i++) dst[i] = s->extrap;
                    continue;
                }
                for (int64_t i = 0; i < inner; i++) dst[i] = 0;
                for (int k = 0; k < t[a].n; k++) {
                    double wk = t[a].w[y * t[a].n + k];
                    if (wk == 0) continue;
                    const double *src = A + (o * in_len + t[a].idx[y * t[a].n + k]) * inner;
                    for (int64_t i = 0; i < inner; i++) dst[i] += wk * src[i];
                }
            }
        cd[a] = out_len;
        double *tmp = A;
        A = B, B = tmp;
    }
    for (uint64_t i = 0; i < total; i++) store_val(X->dtype, out[0]->data, i, A[i]);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "Resize", 10, 10, rs_init, rs_infer, rs_run, rs_workspace, 0, 1u << 1},
    {"", "Resize", 11, 0, rs_init, rs_infer, rs_run, rs_workspace, 0, (1u << 2) | (1u << 3)},
    {"", "Upsample", 7, 8, rs_init, rs_infer, rs_run, rs_workspace, 0, 0},
    {"", "Upsample", 9, 9, rs_init, rs_infer, rs_run, rs_workspace, 0, 1u << 1},
};

const wm_op_table wm_ops_resize = {ops, sizeof ops / sizeof ops[0]};
