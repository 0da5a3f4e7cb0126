/*
 * scatter.c - ScatterElements (11..), Scatter (9..11, the old name of
 * ScatterElements without reduction) and ScatterND (11..).
 *
 * The output starts as a copy of data (or is data itself when data dies
 * here); updates are applied one by one in index order, so duplicate
 * indices give a defined result: the last update wins without reduction,
 * and add/mul/max/min accumulate in the order of the indices. Each step is
 * computed in the element's class and stored back with the type's rounding
 * (equal to the native operation).
 */
#include <string.h>

#include "ops/scalar.h"

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

typedef struct sc_state {
    int red;
} sc_state;

static wm_status scatter_init(wm_node *n, wm_error *err) {
    const int nd = !strcmp(n->proto->op_type, "ScatterND");
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_type(n, 1, nd ? (const int32_t[]){WM_DT_INT64, 0} : wm_types_index, err);
    if (!st) st = wm_check_same_type(n, 0, 2, err);
    if (st) return st;
    n->out_dtype[0] = n->in_dtype[0];
    sc_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    char buf[16];
    const char *r = wm_attr_string(n, "reduction", "none", buf, sizeof buf);
    if (!strcmp(r, "none")) s->red = RED_NONE;
    else if (!strcmp(r, "add") && n->opset >= 16) s->red = RED_ADD;
    else if (!strcmp(r, "mul") && n->opset >= 16) s->red = RED_MUL;
    else if (!strcmp(r, "max") && n->opset >= 18) s->red = RED_MAX;
    else if (!strcmp(r, "min") && n->opset >= 18) s->red = RED_MIN;
    else return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "reduction '%s' is not defined at opset %d", r, n->opset);
    return WM_OK;
}

/* out[o] = red(out[o], upd[u]) for one element of es bytes. */
static void apply(int red, int32_t dt, void *out, uint64_t o, const void *upd, uint64_t u, size_t es) {
    if (red == RED_NONE) {
        memcpy((uint8_t *)out + o * es, (const uint8_t *)upd + u * es, es);
        return;
    }
    wm_tensor to = {.dtype = dt, .data = out}, tu = {.dtype = dt, .data = (void *)upd};
    int cls = wm_dtype_class(dt);
    if (cls == WM_CLS_FLOAT) {
        double a = wm_tensor_get_f64(&to, o), b = wm_tensor_get_f64(&tu, u), v;
        switch (red) {
        case RED_ADD: v = a + b; break;
        case RED_MUL: v = a * b; break;
        case RED_MAX: v = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
        default: v = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
        }
        wm_store_f64(dt, out, o, v);
    } else if (cls == WM_CLS_UINT64) {
        uint64_t a = ((uint64_t *)out)[o], b = ((const uint64_t *)upd)[u];
        ((uint64_t *)out)[o] = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
    } else {
        int64_t a = wm_tensor_get_int(&to, o), b = wm_tensor_get_int(&tu, u), v;
        switch (red) {
        case RED_ADD: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case RED_MUL: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case RED_MAX: v = a > b ? a : b; break;
        default: v = a < b ? a : b; break;
        }
        wm_store_int(dt, out, o, v);
    }
}

static void copy_data(const wm_tensor *data, wm_tensor *out) {
    if (out->data != data->data) memcpy(out->data, data->data, wm_tensor_nbytes(data));
}

/* ---------------------------------------------------------------- ScatterElements, Scatter */

static wm_status scatter_el_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank;
    if (r < 1) return wm_node_err(n, err, WM_ERR_INPUT, "data must have rank >= 1");
    int a = wm_axis(wm_attr_int(n, "axis", 0), r);
    if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range for rank %d", r);
    if (in[1]->rank != r || in[2]->rank != r)
        return wm_node_err(n, err, WM_ERR_INPUT, "indices and updates must have the rank of data (%d)", r);
    for (int d = 0; d < r; d++) {
        if (in[1]->dims[d] != in[2]->dims[d])
            return wm_node_err(n, err, WM_ERR_INPUT, "indices and updates differ in dim %d", d);
        if (d != a && in[1]->dims[d] > in[0]->dims[d])
            return wm_node_err(n, err, WM_ERR_INPUT, "indices dim %d (%lld) exceeds data's (%lld)", d,
                               (long long)in[1]->dims[d], (long long)in[0]->dims[d]);
    }
    wm_set_shape(out[0], r, in[0]->dims);
    return WM_OK;
}

static wm_status scatter_el_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const sc_state *s = n->state;
    int r = in[0]->rank, a = wm_axis(wm_attr_int(n, "axis", 0), r);
    copy_data(in[0], out[0]);
    int64_t dst[WM_MAX_RANK], idx[WM_MAX_RANK] = {0};
    for (int64_t st = 1, d = r - 1; d >= 0; d--) {
        dst[d] = st;
        st *= in[0]->dims[d];
    }
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t total = wm_tensor_numel(in[1]);
    int64_t dim = in[0]->dims[a];
    for (uint64_t i = 0; i < total; i++) {
        int64_t j = wm_tensor_get_int(in[1], i);
        if (j < -dim || j >= dim)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "index %lld out of range [-%lld, %lld)", (long long)j,
                               (long long)dim, (long long)dim);
        if (j < 0) j += dim;
        uint64_t off = 0;
        for (int d = 0; d < r; d++) off += (uint64_t)((d == a ? j : idx[d]) * dst[d]);
        apply(s->red, in[0]->dtype, out[0]->data, off, in[2]->data, i, es);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < in[1]->dims[d]) break;
            idx[d] = 0;
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- ScatterND */

static wm_status scatter_nd_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank, q = in[1]->rank;
    if (r < 1 || q < 1) return wm_node_err(n, err, WM_ERR_INPUT, "data and indices must have rank >= 1");
    int64_t k = in[1]->dims[q - 1];
    if (k < 1 || k > r) return wm_node_err(n, err, WM_ERR_INPUT, "indices' last dim (%lld) must be in [1, %d]", (long long)k, r);
    int ur = q - 1 + r - (int)k;
    int ok = in[2]->rank == ur;
    for (int d = 0; ok && d < q - 1; d++) ok = in[2]->dims[d] == in[1]->dims[d];
    for (int d = 0; ok && d < r - (int)k; d++) ok = in[2]->dims[q - 1 + d] == in[0]->dims[k + d];
    if (!ok) return wm_node_err(n, err, WM_ERR_INPUT, "updates must have shape indices.shape[:-1] + data.shape[%lld:]", (long long)k);
    wm_set_shape(out[0], r, in[0]->dims);
    return WM_OK;
}

static wm_status scatter_nd_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const sc_state *s = n->state;
    int r = in[0]->rank, q = in[1]->rank;
    int64_t k = in[1]->dims[q - 1];
    copy_data(in[0], out[0]);
    int64_t dst[WM_MAX_RANK];
    for (int64_t st = 1, d = r - 1; d >= 0; d--) {
        dst[d] = st;
        st *= in[0]->dims[d];
    }
    uint64_t slice = 1;
    for (int d = (int)k; d < r; d++) slice *= (uint64_t)in[0]->dims[d];
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t nq = wm_tensor_numel(in[1]) / (uint64_t)k;
    const int64_t *ix = in[1]->data;
    for (uint64_t i = 0; i < nq; i++) {
        uint64_t off = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t v = ix[i * (uint64_t)k + (uint64_t)j], dim = in[0]->dims[j];
            if (v < -dim || v >= dim)
                return wm_node_err(n, x->err, WM_ERR_INPUT, "index %lld out of range [-%lld, %lld) in dim %lld",
                                   (long long)v, (long long)dim, (long long)dim, (long long)j);
            off += (uint64_t)((v < 0 ? v + dim : v) * dst[j]);
        }
        if (s->red == RED_NONE) {
            memcpy((uint8_t *)out[0]->data + off * es, (const uint8_t *)in[2]->data + i * slice * es, slice * es);
            continue;
        }
        for (uint64_t e = 0; e < slice; e++) apply(s->red, in[0]->dtype, out[0]->data, off + e, in[2]->data, i * slice + e, es);
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "ScatterElements", 11, 0, scatter_init, scatter_el_infer, scatter_el_run, NULL, WM_OP_INPLACE, 0},
    {"", "Scatter", 9, 11, scatter_init, scatter_el_infer, scatter_el_run, NULL, WM_OP_INPLACE, 0},
    {"", "ScatterND", 11, 0, scatter_init, scatter_nd_infer, scatter_nd_run, NULL, WM_OP_INPLACE, 0},
};

const wm_op_table wm_ops_scatter = {ops, sizeof ops / sizeof ops[0]};
