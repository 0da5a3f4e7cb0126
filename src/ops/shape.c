/*
 * shape.c - ops that only move or describe shapes: Shape, Size, Reshape,
 * Flatten, Squeeze, Unsqueeze (views of their input, no copy), Expand,
 * ConstantOfShape, Constant, Range.
 */
#include <math.h>
#include <string.h>

#include "onnx/onnx_model.h"
#include "ops/op.h"
#include "ops/scalar.h"

static wm_status copy_view(wm_tensor *const *in, wm_tensor *const *out) {
    if (out[0]->data != in[0]->data) memcpy(out[0]->data, in[0]->data, (size_t)wm_tensor_nbytes(out[0]));
    return WM_OK;
}

static wm_status view_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    return copy_view(in, out);
}

static wm_status same_type_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

/* Reshape, Expand: the shape input is required */
static wm_status shaped_init(wm_node *n, wm_error *err) {
    wm_status st = wm_need_inputs(n, 2, err);
    return st ? st : same_type_init(n, err);
}

/* Reads the int64 values of a 1-D shape/axes tensor; WM_NEED_DATA when not known ahead. */
static wm_status read_ints(const wm_node *n, const wm_tensor *t, int64_t *v, int max, int *count, wm_error *err) {
    if (!t->data && wm_tensor_numel(t)) return WM_NEED_DATA;
    uint64_t cnt = wm_tensor_numel(t);
    if (t->rank > 1) return wm_node_err(n, err, WM_ERR_INPUT, "shape/axes input must be 1-D");
    if (cnt > (uint64_t)max) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "more than %d values in a shape/axes input", max);
    for (uint64_t i = 0; i < cnt; i++) v[i] = wm_tensor_get_int(t, i);
    *count = (int)cnt;
    return WM_OK;
}

/* ---------------------------------------------------------------- Shape, Size */

static wm_status shape_init(wm_node *n, wm_error *err) {
    (void)err;
    n->out_dtype[0] = WM_DT_INT64;
    return WM_OK;
}

static void shape_range(const wm_node *n, int rank, int *b, int *e) {
    int64_t start = wm_attr_int(n, "start", 0), end = wm_attr_int(n, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    *b = (int)(start < 0 ? 0 : start > rank ? rank : start);
    *e = (int)(end < 0 ? 0 : end > rank ? rank : end);
    if (*e < *b) *e = *b;
}

static wm_status shape_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)err;
    int b, e;
    shape_range(n, in[0]->rank, &b, &e);
    out[0]->rank = 1;
    out[0]->dims[0] = e - b;
    return WM_OK;
}

static wm_status shape_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    int b, e;
    shape_range(n, in[0]->rank, &b, &e);
    for (int i = b; i < e; i++) ((int64_t *)out[0]->data)[i - b] = in[0]->dims[i];
    return WM_OK;
}

static wm_status size_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)n, (void)in, (void)err;
    out[0]->rank = 0;
    return WM_OK;
}

static wm_status size_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    *(int64_t *)out[0]->data = (int64_t)wm_tensor_numel(in[0]);
    return WM_OK;
}

/* ---------------------------------------------------------------- Reshape */

static wm_status reshape_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t v[WM_MAX_RANK];
    int cnt;
    wm_status st = read_ints(n, in[1], v, WM_MAX_RANK, &cnt, err);
    if (st) return st;
    int allowzero = (int)wm_attr_int(n, "allowzero", 0);
    uint64_t total = wm_tensor_numel(in[0]), known = 1;
    int infer_at = -1;
    for (int i = 0; i < cnt; i++) {
        if (v[i] == 0 && !allowzero) {
            if (i >= in[0]->rank) return wm_node_err(n, err, WM_ERR_INPUT, "shape value 0 at %d copies a missing dim", i);
            v[i] = in[0]->dims[i];
        }
        if (v[i] == -1) {
            if (infer_at >= 0) return wm_node_err(n, err, WM_ERR_INPUT, "shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (v[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "shape value %lld is invalid", (long long)v[i]);
        known *= (uint64_t)v[i];
    }
    if (infer_at >= 0) {
        if (known == 0 || total % known)
            return wm_node_err(n, err, WM_ERR_INPUT, "cannot reshape %llu elements with -1 and %llu", (unsigned long long)total,
                               (unsigned long long)known);
        v[infer_at] = (int64_t)(total / known);
    } else if (known != total)
        return wm_node_err(n, err, WM_ERR_INPUT, "cannot reshape %llu elements into %llu", (unsigned long long)total,
                           (unsigned long long)known);
    wm_set_shape(out[0], cnt, v);
    return WM_OK;
}

/* ---------------------------------------------------------------- Flatten */

static wm_status flatten_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank;
    int64_t axis = wm_attr_int(n, "axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
    int64_t a = 1, b = 1;
    for (int i = 0; i < r; i++) *(i < axis ? &a : &b) *= in[0]->dims[i];
    int64_t d[2] = {a, b};
    wm_set_shape(out[0], 2, d);
    return WM_OK;
}

/* ---------------------------------------------------------------- Squeeze, Unsqueeze */

static wm_status get_axes(const wm_node *n, wm_tensor *const *in, int64_t *axes, int *cnt, wm_error *err) {
    *cnt = 0;
    if (n->opset >= 13) {
        if (n->n_in > 1 && in[1]) return read_ints(n, in[1], axes, WM_MAX_RANK, cnt, err);
        return WM_OK;
    }
    size_t k;
    const int64_t *a = wm_attr_ints(n, "axes", &k);
    if (k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "too many axes");
    for (size_t i = 0; i < k; i++) axes[i] = a[i];
    *cnt = (int)k;
    return WM_OK;
}

static wm_status squeeze_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t axes[WM_MAX_RANK];
    int cnt, r = in[0]->rank;
    wm_status st = get_axes(n, in, axes, &cnt, err);
    if (st) return st;
    int drop[WM_MAX_RANK] = {0};
    if (cnt == 0)
        for (int i = 0; i < r; i++) drop[i] = in[0]->dims[i] == 1;
    for (int i = 0; i < cnt; i++) {
        int a = wm_axis(axes[i], r);
        if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld out of range", (long long)axes[i]);
        if (in[0]->dims[a] != 1) return wm_node_err(n, err, WM_ERR_INPUT, "cannot squeeze dim %d of size %lld", a, (long long)in[0]->dims[a]);
        drop[a] = 1;
    }
    int k = 0;
    for (int i = 0; i < r; i++)
        if (!drop[i]) out[0]->dims[k++] = in[0]->dims[i];
    out[0]->rank = k;
    return WM_OK;
}

static wm_status unsqueeze_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t axes[WM_MAX_RANK];
    int cnt;
    wm_status st = get_axes(n, in, axes, &cnt, err);
    if (st) return st;
    int r = in[0]->rank + cnt;
    if (r > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "rank over %d", WM_MAX_RANK);
    int ins[WM_MAX_RANK] = {0};
    for (int i = 0; i < cnt; i++) {
        int a = wm_axis(axes[i], r);
        if (a < 0 || ins[a]) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld invalid or repeated", (long long)axes[i]);
        ins[a] = 1;
    }
    for (int i = 0, k = 0; i < r; i++) out[0]->dims[i] = ins[i] ? 1 : in[0]->dims[k++];
    out[0]->rank = r;
    return WM_OK;
}

/* ---------------------------------------------------------------- Expand */

static wm_status expand_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t v[WM_MAX_RANK];
    int cnt;
    wm_status st = read_ints(n, in[1], v, WM_MAX_RANK, &cnt, err);
    if (st) return st;
    int r = cnt > in[0]->rank ? cnt : in[0]->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - in[0]->rank), ib = i - (r - cnt);
        int64_t a = ia >= 0 ? in[0]->dims[ia] : 1, b = ib >= 0 ? v[ib] : 1;
        if (a != b && a != 1 && b != 1)
            return wm_node_err(n, err, WM_ERR_INPUT, "cannot expand dim %lld to %lld", (long long)a, (long long)b);
        out[0]->dims[i] = a == 1 ? b : a;
    }
    out[0]->rank = r;
    return WM_OK;
}

static wm_status expand_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    const wm_tensor *a = in[0];
    wm_tensor *o = out[0];
    size_t es = wm_dtype_size(o->dtype);
    uint64_t total = wm_tensor_numel(o);
    if (!total) return WM_OK;
    int r = o->rank, off = r - a->rank;
    int64_t st[WM_MAX_RANK];
    int64_t s = 1;
    for (int d = r - 1; d >= 0; d--) {
        int64_t dim = d >= off ? a->dims[d - off] : 1;
        st[d] = dim == 1 ? 0 : s;
        s *= dim;
    }
    /* innermost run: contiguous copy when the input is not broadcast along the last dim */
    int64_t inner = o->dims[r - 1 < 0 ? 0 : r - 1];
    if (r == 0) inner = 1;
    uint64_t outer = total / (uint64_t)inner;
    const uint8_t *src = a->data;
    uint8_t *dst = o->data;
    for (uint64_t q = 0; q < outer; q++) {
        uint64_t rem = q;
        int64_t so = 0;
        for (int d = r - 2; d >= 0; d--) {
            so += (int64_t)(rem % (uint64_t)o->dims[d]) * st[d];
            rem /= (uint64_t)o->dims[d];
        }
        uint8_t *dp = dst + q * (uint64_t)inner * es;
        if (r == 0 || st[r - 1]) memcpy(dp, src + (size_t)so * es, (size_t)inner * es);
        else
            for (int64_t i = 0; i < inner; i++) memcpy(dp + (size_t)i * es, src + (size_t)so * es, es);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- ConstantOfShape, Constant */

static wm_status cos_init(wm_node *n, wm_error *err) {
    const wm_onnx_attr *a = wm_attr(n, "value");
    n->out_dtype[0] = a && a->t ? a->t->data_type : WM_DT_FLOAT;
    if (!wm_dtype_size(n->out_dtype[0])) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "value type not supported");
    static const int32_t i64[] = {WM_DT_INT64, 0};
    return wm_check_type(n, 0, i64, err);
}

static wm_status cos_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t v[WM_MAX_RANK];
    int cnt;
    wm_status st = read_ints(n, in[0], v, WM_MAX_RANK, &cnt, err);
    if (st) return st;
    for (int i = 0; i < cnt; i++)
        if (v[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "negative dim");
    wm_set_shape(out[0], cnt, v);
    return WM_OK;
}

static wm_status cos_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)in, (void)x;
    const wm_onnx_attr *a = wm_attr(n, "value");
    size_t es = wm_dtype_size(out[0]->dtype);
    uint8_t val[16] = {0};
    if (a && a->t) {
        wm_bytes b = wm_onnx_tensor_bytes(a->t);
        if (b.p && b.n >= es) memcpy(val, b.p, es);
        else if (a->t->n_float_data) memcpy(val, a->t->float_data, 4);
        else if (a->t->n_int64_data) memcpy(val, a->t->int64_data, 8);
        else if (a->t->n_int32_data) {
            int32_t v = a->t->int32_data[0];
            if (es == 1) val[0] = (uint8_t)v;
            else if (es == 2) { uint16_t h = (uint16_t)v; memcpy(val, &h, 2); }
            else memcpy(val, &v, 4);
        } else if (a->t->n_double_data) memcpy(val, a->t->double_data, 8);
    }
    uint64_t cnt = wm_tensor_numel(out[0]);
    uint8_t *o = out[0]->data;
    for (uint64_t i = 0; i < cnt; i++) memcpy(o + i * es, val, es);
    return WM_OK;
}

typedef struct cstate {
    wm_tensor t;
} cstate;

static wm_status constant_init(wm_node *n, wm_error *err) {
    cstate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    const wm_onnx_attr *a;
    if ((a = wm_attr(n, "value")) && a->t) {
        const wm_onnx_tensor *t = a->t;
        size_t es = wm_dtype_size(t->data_type);
        if (!es) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "value of type %s", wm_dtype_name(t->data_type));
        if (t->n_dims > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "rank over %d", WM_MAX_RANK);
        uint64_t numel;
        if (wm_onnx_tensor_numel(t, &numel, err)) return err->status;
        s->t.dtype = t->data_type;
        s->t.rank = (int32_t)t->n_dims;
        for (size_t i = 0; i < t->n_dims; i++) s->t.dims[i] = t->dims[i];
        void *d = wm_node_alloc(n, numel * es + 1);
        if (!d) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        wm_bytes b = wm_onnx_tensor_bytes(t);
        if (b.p && b.n == numel * es) memcpy(d, b.p, b.n);
        else if (numel && t->n_int32_data == numel)
            for (uint64_t i = 0; i < numel; i++) {
                int32_t v = t->int32_data[i];
                if (es == 1) ((uint8_t *)d)[i] = (uint8_t)v;
                else if (es == 2) ((uint16_t *)d)[i] = (uint16_t)v;
                else ((int32_t *)d)[i] = v;
            }
        else if (numel && t->n_uint64_data == numel && es == 4)
            for (uint64_t i = 0; i < numel; i++) ((uint32_t *)d)[i] = (uint32_t)t->uint64_data[i];
        else if (numel) return wm_node_err(n, err, WM_ERR_INPUT, "value data does not match its shape");
        s->t.data = d;
    } else if ((a = wm_attr(n, "value_float"))) {
        s->t.dtype = WM_DT_FLOAT;
        float *d = wm_node_alloc(n, 4);
        if (!d) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        *d = a->f;
        s->t.data = d;
    } else if ((a = wm_attr(n, "value_int"))) {
        s->t.dtype = WM_DT_INT64;
        int64_t *d = wm_node_alloc(n, 8);
        if (!d) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        *d = a->i;
        s->t.data = d;
    } else if ((a = wm_attr(n, "value_floats")) || (a = wm_attr(n, "value_ints"))) {
        int fl = !strcmp(a->name, "value_floats");
        size_t k = fl ? a->n_floats : a->n_ints;
        s->t.dtype = fl ? WM_DT_FLOAT : WM_DT_INT64;
        s->t.rank = 1;
        s->t.dims[0] = (int64_t)k;
        void *d = wm_node_alloc(n, k * (fl ? 4 : 8) + 1);
        if (!d) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (k) memcpy(d, fl ? (void *)a->floats : (void *)a->ints, k * (fl ? 4 : 8));
        s->t.data = d;
    } else
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "only tensor, float(s) and int(s) values are supported");
    n->out_dtype[0] = s->t.dtype;
    return WM_OK;
}

static wm_status constant_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)in, (void)err;
    const cstate *s = n->state;
    wm_set_shape(out[0], s->t.rank, s->t.dims);
    return WM_OK;
}

static wm_status constant_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)in, (void)x;
    const cstate *s = n->state;
    memcpy(out[0]->data, s->t.data, (size_t)wm_tensor_nbytes(out[0]));
    return WM_OK;
}

/* ---------------------------------------------------------------- Range */

static wm_status range_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_numeric, err);
    if (!st) st = wm_check_same_type(n, 0, 1, err);
    if (!st) st = wm_check_same_type(n, 0, 2, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static int is_float(int32_t dt) { return dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16; }

#define RANGE_MAX (1ull << 40) /* elements: the run's bound on one value (runtime/run.c) */

/* Element count of Range: ops/int_math.h (the folder counts the same way); one not finite or over RANGE_MAX (1e60
 * by 1e-60, inf, NaN) is an error naming the node. */
static wm_status range_count(const wm_node *n, wm_tensor *const *in, uint64_t *cnt, wm_error *err) {
    int32_t dt = in[0]->dtype;
    if (is_float(dt)) {
        double a = wm_tensor_get_f64(in[0], 0), b = wm_tensor_get_f64(in[1], 0), d = wm_tensor_get_f64(in[2], 0);
        if (d == 0) return wm_node_err(n, err, WM_ERR_INPUT, "delta is 0");
        if (!wm_range_count_f64(a, b, d, RANGE_MAX, cnt))
            return wm_node_err(n, err, WM_ERR_INPUT, "Range from %g to %g by %g has too many elements (at most %llu)", a,
                               b, d, (unsigned long long)RANGE_MAX);
        return WM_OK;
    }
    int64_t a = wm_tensor_get_int(in[0], 0), b = wm_tensor_get_int(in[1], 0), d = wm_tensor_get_int(in[2], 0);
    if (d == 0) return wm_node_err(n, err, WM_ERR_INPUT, "delta is 0");
    if (!wm_range_count_int(a, b, d, dt == WM_DT_UINT64, RANGE_MAX, cnt))
        return wm_node_err(n, err, WM_ERR_INPUT, "Range has %llu elements (at most %llu)", (unsigned long long)*cnt,
                           (unsigned long long)RANGE_MAX);
    return WM_OK;
}

static wm_status range_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (!in[0]->data || !in[1]->data || !in[2]->data) return WM_NEED_DATA;
    for (int i = 0; i < 3; i++)
        if (wm_tensor_numel(in[i]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "input %d is not a scalar", i);
    uint64_t cnt = 0;
    wm_status st = range_count(n, in, &cnt, err);
    if (st) return st;
    out[0]->rank = 1;
    out[0]->dims[0] = (int64_t)cnt;
    return WM_OK;
}

static wm_status range_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    int64_t cnt = out[0]->dims[0];
    void *o = out[0]->data;
    switch (out[0]->dtype) {
    case WM_DT_FLOAT: {
        float a = *(const float *)in[0]->data, d = *(const float *)in[2]->data;
        for (int64_t i = 0; i < cnt; i++) ((float *)o)[i] = a + (float)i * d;
        break;
    }
    case WM_DT_DOUBLE: {
        double a = *(const double *)in[0]->data, d = *(const double *)in[2]->data;
        for (int64_t i = 0; i < cnt; i++) ((double *)o)[i] = a + (double)i * d;
        break;
    }
    case WM_DT_FLOAT16: case WM_DT_BFLOAT16: {
        double a = wm_tensor_get_f64(in[0], 0), d = wm_tensor_get_f64(in[2], 0);
        for (int64_t i = 0; i < cnt; i++) {
            float v = (float)(a + (double)i * d);
            ((uint16_t *)o)[i] = out[0]->dtype == WM_DT_FLOAT16 ? wm_f32_to_f16(v) : wm_f32_to_bf16(v);
        }
        break;
    }
    default: { /* integers: start + i * delta, exact (every element lies between start and limit), computed wrapping */
        int64_t a = wm_tensor_get_int(in[0], 0), d = wm_tensor_get_int(in[2], 0);
        for (int64_t i = 0; i < cnt; i++) wm_store_int(out[0]->dtype, o, (uint64_t)i, wm_i64_add(a, wm_i64_mul(i, d)));
    }
    }
    return WM_OK;
}

#define VIEW(name, since, infer, data) {"", name, since, 0, same_type_init, infer, view_run, NULL, WM_OP_ALIAS, data}

static const wm_op ops[] = {
    {"", "Shape", 1, 0, shape_init, shape_infer, shape_run, NULL, WM_OP_DIMS_ONLY, 0},
    {"", "Size", 1, 0, shape_init, size_infer, size_run, NULL, WM_OP_DIMS_ONLY, 0},
    {"", "Reshape", 5, 0, shaped_init, reshape_infer, view_run, NULL, WM_OP_ALIAS, 1u << 1},
    VIEW("Flatten", 1, flatten_infer, 0),
    VIEW("Squeeze", 1, squeeze_infer, 1u << 1),
    VIEW("Unsqueeze", 1, unsqueeze_infer, 1u << 1),
    {"", "Expand", 8, 0, shaped_init, expand_infer, expand_run, NULL, 0, 1u << 1},
    {"", "ConstantOfShape", 9, 0, cos_init, cos_infer, cos_run, NULL, 0, 1u << 0},
    {"", "Constant", 1, 0, constant_init, constant_infer, constant_run, NULL, WM_OP_NO_INPUT0, 0},
    {"", "Range", 11, 0, range_init, range_infer, range_run, NULL, 0, 7u},
};

const wm_op_table wm_ops_shape = {ops, sizeof ops / sizeof ops[0]};
