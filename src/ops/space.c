/*
 * space.c - ops that rearrange or pad spatial data: Pad (constant, reflect,
 * edge, wrap; negative pads crop; pads as attribute before opset 11, as
 * input from 11, axes input from 18), DepthToSpace (DCR, CRD),
 * SpaceToDepth. Elements move as bytes, so every element type is served.
 */
#include <string.h>

#include "ops/cnn.h"
#include "ops/int_math.h"

/* ---------------------------------------------------------------- Pad */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

typedef struct pad_state {
    int mode;
    int n_attr;                         /* opsets < 11: pads from the attribute */
    int64_t attr_pads[2 * WM_MAX_RANK];
    double attr_value;
} pad_state;

static wm_status pad_init(wm_node *n, wm_error *err) {
    pad_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    char buf[32];
    const char *m = wm_attr_string(n, "mode", "constant", buf, sizeof buf);
    if (!strcmp(m, "constant")) s->mode = PAD_CONSTANT;
    else if (!strcmp(m, "reflect")) s->mode = PAD_REFLECT;
    else if (!strcmp(m, "edge")) s->mode = PAD_EDGE;
    else if (!strcmp(m, "wrap")) s->mode = PAD_WRAP;
    else return wm_node_err(n, err, WM_ERR_INPUT, "mode '%s' is not constant, reflect, edge or wrap", m);
    if (n->opset < 11) {
        size_t k;
        const int64_t *p = wm_attr_ints(n, n->opset < 2 ? "paddings" : "pads", &k);
        if (!p) return wm_node_err(n, err, WM_ERR_INPUT, "attribute pads is required");
        if (k > 2 * WM_MAX_RANK || k % 2) return wm_node_err(n, err, WM_ERR_INPUT, "attribute pads has %zu values", k);
        memcpy(s->attr_pads, p, k * sizeof *p);
        s->n_attr = (int)k;
        s->attr_value = wm_attr_float(n, "value", 0.0f);
    }
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st && n->opset >= 11) {
        if (n->n_in < 2 || !wm_has_in(n, 1)) return wm_node_err(n, err, WM_ERR_INPUT, "input pads is required");
        if (!st && wm_has_in(n, 1)) st = wm_check_type(n, 1, wm_types_index, err);
        if (!st && wm_has_in(n, 2)) st = wm_check_same_type(n, 0, 2, err);
        if (!st && wm_has_in(n, 3)) st = wm_check_type(n, 3, wm_types_index, err);
    }
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

/* Per-axis head and tail pads (negative: crop) for input X. */
static wm_status pad_amounts(const wm_node *n, wm_tensor *const *in, int64_t *pb, int64_t *pe, wm_error *err) {
    const pad_state *s = n->state;
    int r = in[0]->rank;
    int64_t raw[2 * WM_MAX_RANK], axes[WM_MAX_RANK];
    int np, na = r;
    if (n->opset < 11) {
        np = s->n_attr;
        memcpy(raw, s->attr_pads, sizeof raw);
    } else {
        wm_status st = wm_cnn_read_ints(n, in[1], raw, 2 * WM_MAX_RANK, &np, err);
        if (st) return st;
    }
    if (n->opset >= 18 && n->n_in > 3 && in[3]) {
        wm_status st = wm_cnn_read_ints(n, in[3], axes, WM_MAX_RANK, &na, err);
        if (st) return st;
        for (int i = 0; i < na; i++) {
            int a = wm_axis(axes[i], r);
            if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axes[%d] = %lld out of range", i, (long long)axes[i]);
            axes[i] = a;
        }
    } else
        for (int i = 0; i < r; i++) axes[i] = i;
    if (np != 2 * na) return wm_node_err(n, err, WM_ERR_INPUT, "%d pads for %d axes", np, na);
    for (int i = 0; i < r; i++) pb[i] = pe[i] = 0;
    for (int i = 0; i < na; i++) {
        pb[axes[i]] = raw[i];
        pe[axes[i]] = raw[na + i];
    }
    for (int i = 0; i < r; i++) {
        /* a negative pad crops at most the whole axis (so positions minus pads stay in range); sums checked */
        int64_t d = in[0]->dims[i], o;
        if (pb[i] < -d || pe[i] < -d)
            return wm_node_err(n, err, WM_ERR_INPUT, "pads %lld, %lld on axis %d crop more than its %lld elements",
                               (long long)pb[i], (long long)pe[i], i, (long long)d);
        if (!wm_add_i64_ok(d, pb[i], &o) || !wm_add_i64_ok(o, pe[i], &o))
            return wm_node_err(n, err, WM_ERR_INPUT, "pads %lld, %lld make axis %d too large", (long long)pb[i],
                                   (long long)pe[i], i);
        if (o < 0) return wm_node_err(n, err, WM_ERR_INPUT, "pads make axis %d negative (%lld)", i, (long long)o);
        if (s->mode != PAD_CONSTANT && d == 0 && o > 0)
            return wm_node_err(n, err, WM_ERR_INPUT, "cannot pad the empty axis %d in this mode", i);
    }
    return WM_OK;
}

static wm_status pad_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t pb[WM_MAX_RANK], pe[WM_MAX_RANK];
    wm_status st = pad_amounts(n, in, pb, pe, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    for (int i = 0; i < in[0]->rank; i++) out[0]->dims[i] += pb[i] + pe[i];
    return WM_OK;
}

/* Source index of position i (input coordinates, may be outside [0, d)) for a mode; -1: the constant. */
static int64_t pad_src(int mode, int64_t i, int64_t d) {
    if (i >= 0 && i < d) return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : d - 1;
    case PAD_WRAP: return ((i % d) + d) % d;
    case PAD_REFLECT: {
        if (d == 1) return 0;
        int64_t per = 2 * (d - 1), m = ((i % per) + per) % per;
        return m >= d ? per - m : m;
    }
    default: return -1;
    }
}

static wm_status pad_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const pad_state *s = n->state;
    int64_t pb[WM_MAX_RANK], pe[WM_MAX_RANK];
    wm_status st = pad_amounts(n, in, pb, pe, x->err);
    if (st) return st;
    const wm_tensor *X = in[0];
    int r = X->rank;
    size_t es = wm_dtype_size(X->dtype);
    uint8_t cval[16] = {0};
    if (n->opset >= 11 && n->n_in > 2 && in[2] && wm_tensor_numel(in[2]) >= 1) memcpy(cval, in[2]->data, es);
    else if (n->opset < 11 && s->attr_value != 0) wm_convert(WM_DT_DOUBLE, &s->attr_value, X->dtype, cval, 1);
    uint64_t total = wm_tensor_numel(out[0]);
    if (!total) return WM_OK;
    if (r == 0) {
        memcpy(out[0]->data, X->data, es);
        return WM_OK;
    }
    int64_t ist[WM_MAX_RANK], sst = 1;
    for (int i = r - 1; i >= 0; i--) ist[i] = sst, sst *= X->dims[i];
    int64_t ow = out[0]->dims[r - 1], iw = X->dims[r - 1], rows = (int64_t)(total / (uint64_t)ow);
    int64_t x0 = pb[r - 1] > 0 ? pb[r - 1] : 0, x1 = pb[r - 1] + iw < ow ? pb[r - 1] + iw : ow; /* copied span */
    if (x1 < x0) x1 = x0;
    const uint8_t *src = X->data;
    uint8_t *dst = out[0]->data;
    for (int64_t row = 0; row < rows; row++) {
        int64_t rem = row, off = 0, konst = 0;
        for (int i = r - 2; i >= 0; i--) {
            int64_t o = rem % out[0]->dims[i];
            rem /= out[0]->dims[i];
            int64_t si = pad_src(s->mode, o - pb[i], X->dims[i]);
            if (si < 0) konst = 1;
            else off += si * ist[i];
        }
        uint8_t *d = dst + (uint64_t)row * (uint64_t)ow * es;
        if (konst) {
            for (int64_t k = 0; k < ow; k++) memcpy(d + (uint64_t)k * es, cval, es);
            continue;
        }
        const uint8_t *srow = src + (uint64_t)off * es;
        for (int64_t k = 0; k < x0; k++) {
            int64_t si = pad_src(s->mode, k - pb[r - 1], iw);
            memcpy(d + (uint64_t)k * es, si < 0 ? cval : srow + (uint64_t)si * es, es);
        }
        if (x1 > x0) memcpy(d + (uint64_t)x0 * es, srow + (uint64_t)(x0 - pb[r - 1]) * es, (size_t)(x1 - x0) * es);
        for (int64_t k = x1; k < ow; k++) {
            int64_t si = pad_src(s->mode, k - pb[r - 1], iw);
            memcpy(d + (uint64_t)k * es, si < 0 ? cval : srow + (uint64_t)si * es, es);
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- DepthToSpace, SpaceToDepth */

static wm_status d2s_init(wm_node *n, wm_error *err) {
    int64_t b = wm_attr_int(n, "blocksize", 0);
    if (b < 1) return wm_node_err(n, err, WM_ERR_INPUT, "blocksize = %lld (must be >= 1)", (long long)b);
    char buf[8];
    const char *m = wm_attr_string(n, "mode", "DCR", buf, sizeof buf);
    if (strcmp(m, "DCR") && strcmp(m, "CRD")) return wm_node_err(n, err, WM_ERR_INPUT, "mode '%s' is not DCR or CRD", m);
    n->out_dtype[0] = n->in_dtype[0];
    return wm_check_type(n, 0, wm_types_all, err);
}

static wm_status d2s_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const wm_tensor *X = in[0];
    int64_t b = wm_attr_int(n, "blocksize", 1);
    if (X->rank != 4) return wm_node_err(n, err, WM_ERR_INPUT, "input must be 4-D (rank %d)", X->rank);
    int64_t d[4] = {X->dims[0], X->dims[1], X->dims[2], X->dims[3]}, bb;
    if (!wm_mul_i64_ok(b, b, &bb)) return wm_node_err(n, err, WM_ERR_INPUT, "blocksize %lld is too large", (long long)b);
    if (!strcmp(n->proto->op_type, "DepthToSpace")) {
        if (d[1] % bb) return wm_node_err(n, err, WM_ERR_INPUT, "%lld channels are not a multiple of blocksize^2", (long long)d[1]);
        d[1] /= bb;
        if (!wm_mul_i64_ok(d[2], b, &d[2]) || !wm_mul_i64_ok(d[3], b, &d[3]))
            return wm_node_err(n, err, WM_ERR_INPUT, "blocksize %lld makes the output too large", (long long)b);
    } else {
        if (d[2] % b || d[3] % b) return wm_node_err(n, err, WM_ERR_INPUT, "height and width must be multiples of blocksize");
        if (!wm_mul_i64_ok(d[1], bb, &d[1]))
            return wm_node_err(n, err, WM_ERR_INPUT, "blocksize %lld makes the output too large", (long long)b);
        d[2] /= b, d[3] /= b;
    }
    wm_set_shape(out[0], 4, d);
    return WM_OK;
}

static wm_status d2s_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const wm_tensor *X = in[0];
    int64_t b = wm_attr_int(n, "blocksize", 1), N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3];
    char buf[8];
    int crd = !strcmp(wm_attr_string(n, "mode", "DCR", buf, sizeof buf), "CRD");
    int64_t dims[6], perm[6];
    if (!strcmp(n->proto->op_type, "DepthToSpace")) {
        int64_t c = C / (b * b);
        if (crd) {
            int64_t d6[6] = {N, c, b, b, H, W}, p6[6] = {0, 1, 4, 2, 5, 3};
            memcpy(dims, d6, sizeof dims), memcpy(perm, p6, sizeof perm);
        } else {
            int64_t d6[6] = {N, b, b, c, H, W}, p6[6] = {0, 3, 4, 1, 5, 2};
            memcpy(dims, d6, sizeof dims), memcpy(perm, p6, sizeof perm);
        }
    } else {
        int64_t d6[6] = {N, C, H / b, b, W / b, b}, p6[6] = {0, 3, 5, 1, 2, 4};
        memcpy(dims, d6, sizeof dims), memcpy(perm, p6, sizeof perm);
    }
    wm_transpose(X->data, out[0]->data, wm_dtype_size(X->dtype), 6, dims, perm, x);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "Pad", 1, 0, pad_init, pad_infer, pad_run, NULL, 0, (1u << 1) | (1u << 3)},
    {"", "DepthToSpace", 1, 0, d2s_init, d2s_infer, d2s_run, NULL, 0, 0},
    {"", "SpaceToDepth", 1, 0, d2s_init, d2s_infer, d2s_run, NULL, 0, 0},
};

const wm_op_table wm_ops_space = {ops, sizeof ops / sizeof ops[0]};
