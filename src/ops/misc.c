/*
 * misc.c - EyeLike (9..), CumProd (26), Shrink (9), Swish (24), Det (11..),
 * BitCast (26), CenterCropPad (18).
 */
#include <string.h>

#include "ops/rows.h"
#include "ops/scalar.h"

static wm_status same_shape_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)n, (void)err;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static int in_list(int32_t dt, const int32_t *l) {
    for (; *l; l++)
        if (*l == dt) return 1;
    return 0;
}

/* ---------------------------------------------------------------- EyeLike */

static wm_status eyelike_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (st) return st;
    int32_t to = (int32_t)wm_attr_int(n, "dtype", n->in_dtype[0]);
    if (!in_list(to, wm_types_all))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "dtype %s is not supported", wm_dtype_name(to));
    n->out_dtype[0] = to;
    return WM_OK;
}

static wm_status eyelike_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (in[0]->rank != 2) return wm_node_err(n, err, WM_ERR_INPUT, "input must be 2-D (rank %d given)", in[0]->rank);
    wm_set_shape(out[0], 2, in[0]->dims);
    return WM_OK;
}

static wm_status eyelike_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)in, (void)x;
    int64_t k = wm_attr_int(n, "k", 0), R = out[0]->dims[0], C = out[0]->dims[1];
    memset(out[0]->data, 0, wm_tensor_nbytes(out[0]));
    for (int64_t i = 0; i < R; i++)
        if (k >= -i && k < C - i) wm_store_f64(out[0]->dtype, out[0]->data, (uint64_t)(i * C + i + k), 1.0); /* k: any int64 */
    return WM_OK;
}

/* ---------------------------------------------------------------- CumProd */

static const int32_t cumprod_types[] = {WM_DT_FLOAT,  WM_DT_DOUBLE, WM_DT_FLOAT16, WM_DT_BFLOAT16,
                                        WM_DT_INT32,  WM_DT_INT64,  WM_DT_UINT32,  WM_DT_UINT64, 0};

static wm_status cumprod_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, cumprod_types, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status cumprod_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (wm_tensor_numel(in[1]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "axis must hold one value");
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static wm_status cumprod_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int r = in[0]->rank, a = wm_axis(wm_tensor_get_int(in[1], 0), r);
    if (a < 0) return wm_node_err(n, x->err, WM_ERR_INPUT, "axis %lld out of range for rank %d", (long long)wm_tensor_get_int(in[1], 0), r);
    int excl = (int)wm_attr_int(n, "exclusive", 0), rev = (int)wm_attr_int(n, "reverse", 0);
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= (uint64_t)in[0]->dims[d];
    for (int d = a + 1; d < r; d++) inner *= (uint64_t)in[0]->dims[d];
    int64_t len = in[0]->dims[a];
    int32_t dt = in[0]->dtype;
    int cls = wm_dtype_class(dt);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            uint64_t prev = 0; /* offset holding the running product (already rounded to the type) */
            for (int64_t s = 0; s < len; s++) {
                int64_t t = rev ? len - 1 - s : s;
                uint64_t off = (o * (uint64_t)len + (uint64_t)t) * inner + i;
                int64_t ts = rev ? t + 1 : t - 1; /* the element before in scan order */
                uint64_t src = (o * (uint64_t)len + (uint64_t)ts) * inner + i;
                if (s == 0) {
                    if (excl) wm_store_f64(dt, out[0]->data, off, 1.0);
                    else memcpy((uint8_t *)out[0]->data + off * wm_dtype_size(dt), (const uint8_t *)in[0]->data + off * wm_dtype_size(dt), wm_dtype_size(dt));
                } else {
                    uint64_t xo = excl ? src : off; /* input factor: the previous element when exclusive */
                    wm_tensor to = {.dtype = dt, .data = out[0]->data};
                    if (cls == WM_CLS_FLOAT) wm_store_f64(dt, out[0]->data, off, wm_tensor_get_f64(&to, prev) * wm_tensor_get_f64(in[0], xo));
                    else if (cls == WM_CLS_UINT64)
                        ((uint64_t *)out[0]->data)[off] = ((uint64_t *)out[0]->data)[prev] * ((const uint64_t *)in[0]->data)[xo];
                    else wm_store_int(dt, out[0]->data, off, (int64_t)((uint64_t)wm_tensor_get_int(&to, prev) * (uint64_t)wm_tensor_get_int(in[0], xo)));
                }
                prev = off;
            }
        }
    return WM_OK;
}

/* ---------------------------------------------------------------- Shrink */

static wm_status numeric_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    return wm_check_type(n, 0, wm_types_numeric, err);
}

static wm_status shrink_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    double l = wm_attr_float(n, "lambd", 0.5f), b = wm_attr_float(n, "bias", 0.0f);
    uint64_t total = wm_tensor_numel(in[0]);
    for (uint64_t i = 0; i < total; i++) {
        double v = wm_get_f64(in[0], i);
        wm_store_f64(out[0]->dtype, out[0]->data, i, v < -l ? v + b : v > l ? v - b : 0.0);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Swish */

static wm_status float_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    return wm_check_type(n, 0, wm_types_float, err);
}

typedef struct swish_ctx {
    const wm_tensor *in;
    wm_tensor *out;
    float alpha;
    uint64_t n;
    float *ws; /* per thread: 1024 floats */
} swish_ctx;

static void swish_part(void *arg, int ith, int nth) {
    const swish_ctx *c = arg;
    long lo, hi;
    wm_split((long)((c->n + 1023) / 1024), ith, nth, &lo, &hi);
    int32_t dt = c->in->dtype;
    float *buf = c->ws + (size_t)ith * 1024;
    for (uint64_t b = (uint64_t)lo * 1024; b < (uint64_t)hi * 1024 && b < c->n; b += 1024) {
        int64_t m = (int64_t)(c->n - b < 1024 ? c->n - b : 1024);
        if (dt == WM_DT_DOUBLE) {
            const double *s = (const double *)c->in->data + b;
            double *d = (double *)c->out->data + b;
            for (int64_t i = 0; i < m; i++) d[i] = s[i] / (1.0 + exp(-(double)c->alpha * s[i]));
            continue;
        }
        wm_row_load(dt, c->in->data, b, buf, m);
        for (int64_t i = 0; i < m; i++) buf[i] = buf[i] / (1.0f + expf(-c->alpha * buf[i]));
        wm_row_store(dt, c->out->data, b, buf, m);
    }
}

static size_t swish_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)in, (void)out;
    return (size_t)nth * 1024 * sizeof(float);
}

static wm_status swish_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    swish_ctx c = {in[0], out[0], wm_attr_float(n, "alpha", 1.0f), wm_tensor_numel(in[0]), x->ws};
    int nth = c.n >= 65536 ? x->nth : 1;
    wm_pool_run(x->pool, swish_part, &c, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- Det */

static wm_status det_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank;
    if (r < 2 || in[0]->dims[r - 1] != in[0]->dims[r - 2])
        return wm_node_err(n, err, WM_ERR_INPUT, "input must be [*, M, M]");
    wm_set_shape(out[0], r - 2, in[0]->dims);
    return WM_OK;
}

static size_t det_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)out, (void)nth;
    int r = in[0]->rank;
    return r < 2 ? 0 : (size_t)(in[0]->dims[r - 1] * in[0]->dims[r - 1]) * sizeof(double);
}

/* Determinant of the m x m matrix a (overwritten): LU with partial pivoting in double. */
static double det_lu(double *a, int64_t m) {
    double det = 1;
    for (int64_t c = 0; c < m; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > fabs(a[p * m + c])) p = r;
        if (a[p * m + c] == 0) return 0;
        if (p != c) {
            for (int64_t k = 0; k < m; k++) {
                double t = a[c * m + k];
                a[c * m + k] = a[p * m + k];
                a[p * m + k] = t;
            }
            det = -det;
        }
        double piv = a[c * m + c];
        det *= piv;
        for (int64_t r = c + 1; r < m; r++) {
            double f = a[r * m + c] / piv;
            if (f != 0)
                for (int64_t k = c + 1; k < m; k++) a[r * m + k] -= f * a[c * m + k];
        }
    }
    return det;
}

static wm_status det_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n;
    int r = in[0]->rank;
    int64_t m = in[0]->dims[r - 1];
    uint64_t mats = wm_tensor_numel(out[0]), mm = (uint64_t)(m * m);
    double *a = x->ws;
    for (uint64_t q = 0; q < mats; q++) {
        for (uint64_t e = 0; e < mm; e++) a[e] = wm_tensor_get_f64(in[0], q * mm + e);
        wm_store_f64(out[0]->dtype, out[0]->data, q, det_lu(a, m));
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- BitCast */

static wm_status bitcast_init(wm_node *n, wm_error *err) {
    int32_t from = n->in_dtype[0], to = (int32_t)wm_attr_int(n, "to", 0);
    if (!wm_dtype_valid(to) || !wm_dtype_size(to) || to == WM_DT_STRING)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "bitcast to %s is not supported", wm_dtype_name(to));
    if (wm_dtype_size(from) != wm_dtype_size(to))
        return wm_node_err(n, err, WM_ERR_INPUT, "%s and %s differ in width", wm_dtype_name(from), wm_dtype_name(to));
    n->out_dtype[0] = to;
    return WM_OK;
}

static wm_status bitcast_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    if (out[0]->data != in[0]->data) memcpy(out[0]->data, in[0]->data, wm_tensor_nbytes(out[0]));
    return WM_OK;
}

/* ---------------------------------------------------------------- CenterCropPad */

static wm_status ccp_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status ccp_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank;
    size_t na;
    const int64_t *axes = wm_attr_ints(n, "axes", &na);
    if (!axes) na = (size_t)r;
    if (in[1]->rank != 1 || (size_t)in[1]->dims[0] != na)
        return wm_node_err(n, err, WM_ERR_INPUT, "shape must be 1-D with one entry per axis (%zu)", na);
    if (!in[1]->data) return WM_NEED_DATA;
    wm_set_shape(out[0], r, in[0]->dims);
    int seen[WM_MAX_RANK] = {0};
    for (size_t i = 0; i < na; i++) {
        int a = axes ? wm_axis(axes[i], r) : (int)i;
        if (a < 0 || seen[a]) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld invalid or repeated", (long long)(axes ? axes[i] : (int64_t)i));
        seen[a] = 1;
        int64_t s = wm_tensor_get_int(in[1], i);
        if (s < 0) return wm_node_err(n, err, WM_ERR_INPUT, "negative size %lld", (long long)s);
        out[0]->dims[a] = s;
    }
    return WM_OK;
}

static wm_status ccp_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    int r = in[0]->rank;
    size_t es = wm_dtype_size(in[0]->dtype);
    /* per dim: output index o reads input index o + shift when inside [0, in dim) */
    int64_t shift[WM_MAX_RANK], ist[WM_MAX_RANK], idx[WM_MAX_RANK] = {0};
    for (int64_t s = 1, d = r - 1; d >= 0; d--) {
        ist[d] = s;
        s *= in[0]->dims[d];
    }
    for (int d = 0; d < r; d++) {
        int64_t di = in[0]->dims[d], dout = out[0]->dims[d];
        shift[d] = di >= dout ? (di - dout) / 2 : -((dout - di) / 2);
    }
    uint64_t total = wm_tensor_numel(out[0]);
    uint8_t *dst = out[0]->data;
    for (uint64_t i = 0; i < total; i++) {
        int64_t off = 0;
        int inside = 1;
        for (int d = 0; d < r && inside; d++) {
            int64_t s = idx[d] + shift[d];
            inside = s >= 0 && s < in[0]->dims[d];
            off += s * ist[d];
        }
        if (inside) memcpy(dst + i * es, (const uint8_t *)in[0]->data + (size_t)off * es, es);
        else memset(dst + i * es, 0, es);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < out[0]->dims[d]) break;
            idx[d] = 0;
        }
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "EyeLike", 9, 0, eyelike_init, eyelike_infer, eyelike_run, NULL, WM_OP_DIMS_ONLY, 0},
    {"", "CumProd", 26, 0, cumprod_init, cumprod_infer, cumprod_run, NULL, 0, 0},
    {"", "Shrink", 9, 0, numeric_init, same_shape_infer, shrink_run, NULL, WM_OP_INPLACE, 0},
    {"", "Swish", 24, 0, float_init, same_shape_infer, swish_run, swish_workspace, WM_OP_INPLACE, 0},
    {"", "Det", 11, 0, float_init, det_infer, det_run, det_workspace, 0, 0},
    {"", "BitCast", 26, 0, bitcast_init, same_shape_infer, bitcast_run, NULL, WM_OP_ALIAS, 0},
    {"", "CenterCropPad", 18, 0, ccp_init, ccp_infer, ccp_run, NULL, 0, 1u << 1},
};

const wm_op_table wm_ops_misc = {ops, sizeof ops / sizeof ops[0]};
