/*
 * fold.c - the constant-folding evaluator. Values are computed in double
 * (floats) or int64 (integers) and stored in the output dtype; this serves
 * shape arithmetic, masks and small parameter preparation, not bulk math.
 * Integer arithmetic and float -> integer conversion are the engine's own
 * definitions (ops/int_math.h: wrap-around, x / 0 = 0, MIN / -1 = MIN, Cast
 * as onnxruntime on x86), so a folded value equals what the engine computes.
 */
#include "opt/fold.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "ops/int_math.h"

static int is_float(int32_t dt) {
    return dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16;
}

static int is_unsigned(int32_t dt) {
    return dt == WM_DT_UINT8 || dt == WM_DT_UINT16 || dt == WM_DT_UINT32 || dt == WM_DT_UINT64;
}

static wm_status unsupported(const wm_onnx_node *n, const char *why, wm_error *err) {
    return wm_err(err, WM_ERR_UNSUPPORTED, "fold %s: %s", n->op_type, why);
}

static wm_status alloc_capped(wm_ct *o, int32_t dt, const int64_t *dims, int32_t rank, uint64_t cap,
                              const wm_onnx_node *n, wm_error *err) {
    uint64_t numel = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) return unsupported(n, "negative dim", err);
        if (!wm_mul_u64(numel, (uint64_t)dims[i], &numel)) return unsupported(n, "too large", err);
    }
    size_t es = wm_ct_elem_size(dt);
    if (!es) return unsupported(n, "dtype", err);
    if (cap && numel * es > cap) return unsupported(n, "output over the folding cap", err);
    return wm_ct_alloc(o, dt, dims, rank, err);
}

/* ---------------------------------------------------------------- broadcasting */

typedef struct bc {
    int32_t rank;
    int64_t dims[WM_CT_MAX_RANK];
} bc;

static int broadcast(bc *o, const wm_ct *const *t, size_t k) {
    o->rank = 0;
    for (size_t i = 0; i < k; i++)
        if (t[i]->rank > o->rank) o->rank = t[i]->rank;
    for (int32_t d = 0; d < o->rank; d++) {
        int64_t v = 1;
        for (size_t i = 0; i < k; i++) {
            int32_t id = d - (o->rank - t[i]->rank);
            int64_t x = id >= 0 ? t[i]->dims[id] : 1;
            if (x == 1) continue;
            if (v != 1 && v != x) return -1;
            v = x;
        }
        o->dims[d] = v;
    }
    return 0;
}

/* Offset into t of output element idx (row-major over o). */
static uint64_t bc_offset(const bc *o, const wm_ct *t, uint64_t idx) {
    uint64_t off = 0, stride = 1;
    for (int32_t d = o->rank - 1; d >= 0; d--) {
        int64_t od = o->dims[d], coord = od ? (int64_t)(idx % (uint64_t)od) : 0;
        idx = od ? idx / (uint64_t)od : 0;
        int32_t id = d - (o->rank - t->rank);
        if (id < 0) continue;
        if (t->dims[id] != 1) off += (uint64_t)coord * stride;
        stride *= (uint64_t)t->dims[id];
    }
    return off;
}

static double fmod_py(double a, double b) {
    double r = fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static wm_status elementwise_run(const wm_onnx_node *n, const wm_ct *in, size_t n_in, wm_ct *o, uint64_t cap,
                                 wm_error *err);

/* Evaluates an elementwise op; o is left empty on error. */
static wm_status elementwise(const wm_onnx_node *n, const wm_ct *in, size_t n_in, wm_ct *o, uint64_t cap,
                             wm_error *err) {
    wm_status s = elementwise_run(n, in, n_in, o, cap, err);
    if (s) wm_ct_free(o);
    return s;
}

static wm_status elementwise_run(const wm_onnx_node *n, const wm_ct *in, size_t n_in, wm_ct *o, uint64_t cap,
                                 wm_error *err) {
    const char *op = n->op_type;
    const wm_ct *t[3] = {&in[0], n_in > 1 ? &in[1] : NULL, n_in > 2 ? &in[2] : NULL};
    size_t k = n_in > 3 ? 3 : n_in;
    bc b;
    if (broadcast(&b, t, k)) return wm_err(err, WM_ERR_INPUT, "fold %s: shapes do not broadcast", op);
    int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") ||
              !strcmp(op, "LessOrEqual") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") ||
              !strcmp(op, "Or") || !strcmp(op, "Xor") || !strcmp(op, "Not") || !strcmp(op, "IsNaN");
    int where = !strcmp(op, "Where");
    if (!where && n_in > 2) return unsupported(n, "more than two inputs", err); /* variadic Max/Min: not folded */
    int32_t dt = cmp ? WM_DT_BOOL : where ? in[1].dtype : in[0].dtype;
    wm_status s = alloc_capped(o, dt, b.dims, b.rank, cap, n, err);
    if (s) return s;
    int fl = is_float(where ? in[1].dtype : in[0].dtype);
    for (uint64_t i = 0; i < o->n; i++) {
        uint64_t ia = bc_offset(&b, t[0], i), ib = k > 1 ? bc_offset(&b, t[1], i) : 0;
        if (where) {
            uint64_t ic = bc_offset(&b, t[2], i);
            int c = wm_ct_geti(t[0], ia) != 0;
            if (fl) wm_ct_set(o, i, c ? wm_ct_getf(t[1], ib) : wm_ct_getf(t[2], ic));
            else wm_ct_seti(o, i, c ? wm_ct_geti(t[1], ib) : wm_ct_geti(t[2], ic));
            continue;
        }
        if (fl) {
            double x = wm_ct_getf(t[0], ia), y = k > 1 ? wm_ct_getf(t[1], ib) : 0, r;
            if (!strcmp(op, "Add")) r = x + y;
            else if (!strcmp(op, "Sub")) r = x - y;
            else if (!strcmp(op, "Mul")) r = x * y;
            else if (!strcmp(op, "Div")) r = x / y;
            else if (!strcmp(op, "Pow")) r = pow(x, y);
            else if (!strcmp(op, "Max")) r = x > y || y != y ? (x != x ? x : (x > y ? x : y)) : y;
            else if (!strcmp(op, "Min")) r = x < y || y != y ? (x != x ? x : (x < y ? x : y)) : y;
            else if (!strcmp(op, "Mod")) r = wm_opt_attr_i(n, "fmod", 0) ? fmod(x, y) : fmod_py(x, y);
            else if (!strcmp(op, "Equal")) r = x == y;
            else if (!strcmp(op, "Less")) r = x < y;
            else if (!strcmp(op, "Greater")) r = x > y;
            else if (!strcmp(op, "LessOrEqual")) r = x <= y;
            else if (!strcmp(op, "GreaterOrEqual")) r = x >= y;
            else if (!strcmp(op, "Neg")) r = -x;
            else if (!strcmp(op, "Abs")) r = fabs(x);
            else if (!strcmp(op, "Sqrt")) r = sqrt(x);
            else if (!strcmp(op, "Reciprocal")) r = 1.0 / x;
            else if (!strcmp(op, "Exp")) r = exp(x);
            else if (!strcmp(op, "Log")) r = log(x);
            else if (!strcmp(op, "Cos")) r = cos(x);
            else if (!strcmp(op, "Sin")) r = sin(x);
            else if (!strcmp(op, "Floor")) r = floor(x);
            else if (!strcmp(op, "Ceil")) r = ceil(x);
            else if (!strcmp(op, "Erf")) r = erf(x);
            else if (!strcmp(op, "Tanh")) r = tanh(x);
            else if (!strcmp(op, "Sigmoid")) r = 1.0 / (1.0 + exp(-x));
            else if (!strcmp(op, "Relu")) r = x > 0 ? x : 0;
            else if (!strcmp(op, "IsNaN")) r = x != x;
            else if (!strcmp(op, "Identity")) r = x;
            else return unsupported(n, "float op", err);
            if (dt == WM_DT_BOOL) wm_ct_seti(o, i, r != 0);
            else wm_ct_set(o, i, r);
        } else {
            int64_t x = wm_ct_geti(t[0], ia), y = k > 1 ? wm_ct_geti(t[1], ib) : 0, r;
            int u = in[0].dtype == WM_DT_UINT64; /* its values are bits: compared and divided unsigned */
            uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
            int lt = u ? ux < uy : x < y, gt = u ? ux > uy : x > y;
            if (!strcmp(op, "Add")) r = wm_i64_add(x, y);
            else if (!strcmp(op, "Sub")) r = wm_i64_sub(x, y);
            else if (!strcmp(op, "Mul")) r = wm_i64_mul(x, y);
            else if (!strcmp(op, "Div")) r = u ? (int64_t)wm_u64_div(ux, uy) : wm_i64_div(x, y);
            else if (!strcmp(op, "Mod")) r = u ? (int64_t)wm_u64_mod(ux, uy) : wm_i64_mod(x, y, (int)wm_opt_attr_i(n, "fmod", 0));
            else if (!strcmp(op, "Pow")) {
                int32_t te = in[1].dtype;
                r = is_float(te) ? wm_f64_to_int(dt, pow(wm_ct_getf(t[0], ia), wm_ct_getf(t[1], ib)))
                                 : wm_int_pow(x, is_unsigned(dt), y, is_unsigned(te));
            } else if (!strcmp(op, "Max")) r = gt ? x : y;
            else if (!strcmp(op, "Min")) r = lt ? x : y;
            else if (!strcmp(op, "Equal")) r = x == y;
            else if (!strcmp(op, "Less")) r = lt;
            else if (!strcmp(op, "Greater")) r = gt;
            else if (!strcmp(op, "LessOrEqual")) r = !gt;
            else if (!strcmp(op, "GreaterOrEqual")) r = !lt;
            else if (!strcmp(op, "And")) r = x && y;
            else if (!strcmp(op, "Or")) r = x || y;
            else if (!strcmp(op, "Xor")) r = !x != !y;
            else if (!strcmp(op, "Not")) r = !x;
            else if (!strcmp(op, "Neg")) r = wm_i64_neg(x);
            else if (!strcmp(op, "Abs")) r = u ? x : wm_i64_abs(x);
            else if (!strcmp(op, "Identity")) r = x;
            else if (!strcmp(op, "Relu")) r = u || x > 0 ? x : 0;
            else return unsupported(n, "integer op", err);
            wm_ct_seti(o, i, r);
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- layout ops */

static void strides(const wm_ct *t, uint64_t *st) {
    uint64_t s = 1;
    for (int32_t d = t->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= (uint64_t)t->dims[d];
    }
}

static void copy_elem(wm_ct *o, uint64_t i, const wm_ct *a, uint64_t j) {
    size_t es = wm_ct_elem_size(a->dtype);
    memcpy((char *)o->data + i * es, (const char *)a->data + j * es, es);
}

static int ints_of(const wm_ct *t, int64_t *v, int max) {
    if (t->n > (uint64_t)max) return -1;
    for (uint64_t i = 0; i < t->n; i++) v[i] = wm_ct_geti(t, i);
    return (int)t->n;
}

/* Axes from an attribute (old opsets) or input slot; count or -1. */
static int axes_arg(const wm_onnx_node *n, int64_t opset, int64_t from, const wm_ct *in, size_t n_in, size_t slot,
                    int64_t *v) {
    if (opset >= from) return n_in > slot && in[slot].dtype ? ints_of(&in[slot], v, WM_CT_MAX_RANK) : 0;
    size_t k;
    const int64_t *a = wm_opt_attr_ints(n, "axes", &k);
    if (!a) return 0;
    if (k > WM_CT_MAX_RANK) return -1;
    memcpy(v, a, k * sizeof *v);
    return (int)k;
}

static wm_status reshape_to(const wm_onnx_node *n, const wm_ct *a, const int64_t *dims, int32_t rank, wm_ct *o,
                            uint64_t cap, wm_error *err) {
    wm_status s = alloc_capped(o, a->dtype, dims, rank, cap, n, err);
    if (s) return s;
    if (o->n != a->n) {
        wm_ct_free(o);
        return wm_err(err, WM_ERR_INPUT, "fold %s: element count changes (%llu -> %llu)", n->op_type,
                      (unsigned long long)a->n, (unsigned long long)o->n);
    }
    if (a->n) memcpy(o->data, a->data, (size_t)a->n * wm_ct_elem_size(a->dtype));
    return WM_OK;
}

static wm_status f_reshape(const wm_onnx_node *n, const wm_ct *in, wm_ct *o, uint64_t cap, wm_error *err) {
    int64_t sh[WM_CT_MAX_RANK];
    int r = ints_of(&in[1], sh, WM_CT_MAX_RANK), minus = -1;
    if (r < 0) return unsupported(n, "rank", err);
    uint64_t known = 1;
    for (int i = 0; i < r; i++) {
        if (sh[i] == 0 && !wm_opt_attr_i(n, "allowzero", 0)) sh[i] = i < in[0].rank ? in[0].dims[i] : 0;
        if (sh[i] == -1) {
            if (minus >= 0) return wm_err(err, WM_ERR_INPUT, "fold Reshape: two -1 dims");
            minus = i;
        } else if (sh[i] < 0) return wm_err(err, WM_ERR_INPUT, "fold Reshape: bad dim");
        else known *= (uint64_t)sh[i];
    }
    if (minus >= 0) {
        if (!known || in[0].n % known) return wm_err(err, WM_ERR_INPUT, "fold Reshape: cannot infer -1");
        sh[minus] = (int64_t)(in[0].n / known);
    }
    return reshape_to(n, &in[0], sh, r, o, cap, err);
}

static wm_status f_unsqueeze(const wm_onnx_node *n, int64_t opset, const wm_ct *in, size_t n_in, wm_ct *o,
                             uint64_t cap, wm_error *err) {
    int64_t ax[WM_CT_MAX_RANK], dims[WM_CT_MAX_RANK];
    int na = axes_arg(n, opset, 13, in, n_in, 1, ax), r = in[0].rank + na;
    if (na < 0 || r > WM_CT_MAX_RANK) return unsupported(n, "rank", err);
    uint8_t is_new[WM_CT_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int64_t k = ax[i] < 0 ? ax[i] + r : ax[i];
        if (k < 0 || k >= r) return wm_err(err, WM_ERR_INPUT, "fold Unsqueeze: axis out of range");
        is_new[k] = 1;
    }
    for (int i = 0, j = 0; i < r; i++) dims[i] = is_new[i] ? 1 : in[0].dims[j++];
    return reshape_to(n, &in[0], dims, r, o, cap, err);
}

static wm_status f_squeeze(const wm_onnx_node *n, int64_t opset, const wm_ct *in, size_t n_in, wm_ct *o,
                           uint64_t cap, wm_error *err) {
    int64_t ax[WM_CT_MAX_RANK], dims[WM_CT_MAX_RANK];
    int na = axes_arg(n, opset, 13, in, n_in, 1, ax), r = 0;
    if (na < 0) return unsupported(n, "rank", err);
    uint8_t drop[WM_CT_MAX_RANK] = {0};
    for (int i = 0; i < in[0].rank; i++) drop[i] = na == 0 && in[0].dims[i] == 1;
    for (int i = 0; i < na; i++) {
        int64_t k = ax[i] < 0 ? ax[i] + in[0].rank : ax[i];
        if (k < 0 || k >= in[0].rank || in[0].dims[k] != 1)
            return wm_err(err, WM_ERR_INPUT, "fold Squeeze: bad axis");
        drop[k] = 1;
    }
    for (int i = 0; i < in[0].rank; i++)
        if (!drop[i]) dims[r++] = in[0].dims[i];
    return reshape_to(n, &in[0], dims, r, o, cap, err);
}

static wm_status f_concat(const wm_onnx_node *n, const wm_ct *in, size_t n_in, wm_ct *o, uint64_t cap,
                          wm_error *err) {
    int32_t r = in[0].rank;
    int64_t ax = wm_opt_attr_i(n, "axis", 0);
    if (ax < 0) ax += r;
    if (ax < 0 || ax >= r) return wm_err(err, WM_ERR_INPUT, "fold Concat: bad axis");
    int64_t dims[WM_CT_MAX_RANK];
    memcpy(dims, in[0].dims, sizeof dims);
    dims[ax] = 0;
    for (size_t i = 0; i < n_in; i++) {
        if (in[i].rank != r || in[i].dtype != in[0].dtype) return wm_err(err, WM_ERR_INPUT, "fold Concat: mismatch");
        for (int32_t d = 0; d < r; d++)
            if (d != ax && in[i].dims[d] != dims[d]) return wm_err(err, WM_ERR_INPUT, "fold Concat: mismatch");
        dims[ax] += in[i].dims[ax];
    }
    wm_status s = alloc_capped(o, in[0].dtype, dims, r, cap, n, err);
    if (s) return s;
    uint64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < ax; d++) outer *= (uint64_t)dims[d];
    for (int32_t d = (int32_t)ax + 1; d < r; d++) inner *= (uint64_t)dims[d];
    size_t es = wm_ct_elem_size(o->dtype);
    char *dst = o->data;
    for (uint64_t p = 0; p < outer; p++)
        for (size_t i = 0; i < n_in; i++) {
            size_t len = (size_t)((uint64_t)in[i].dims[ax] * inner) * es;
            if (len) memcpy(dst, (const char *)in[i].data + p * len, len);
            dst += len;
        }
    return WM_OK;
}

static wm_status f_gather(const wm_onnx_node *n, const wm_ct *in, wm_ct *o, uint64_t cap, wm_error *err) {
    const wm_ct *a = &in[0], *ix = &in[1];
    int64_t ax = wm_opt_attr_i(n, "axis", 0);
    if (ax < 0) ax += a->rank;
    if (ax < 0 || ax >= a->rank || a->rank - 1 + ix->rank > WM_CT_MAX_RANK)
        return wm_err(err, WM_ERR_INPUT, "fold Gather: bad axis");
    int64_t dims[WM_CT_MAX_RANK];
    int32_t r = 0;
    for (int32_t d = 0; d < ax; d++) dims[r++] = a->dims[d];
    for (int32_t d = 0; d < ix->rank; d++) dims[r++] = ix->dims[d];
    for (int32_t d = (int32_t)ax + 1; d < a->rank; d++) dims[r++] = a->dims[d];
    wm_status s = alloc_capped(o, a->dtype, dims, r, cap, n, err);
    if (s) return s;
    uint64_t outer = 1, inner = 1, axn = (uint64_t)a->dims[ax];
    for (int32_t d = 0; d < ax; d++) outer *= (uint64_t)a->dims[d];
    for (int32_t d = (int32_t)ax + 1; d < a->rank; d++) inner *= (uint64_t)a->dims[d];
    uint64_t k = 0;
    for (uint64_t p = 0; p < outer; p++)
        for (uint64_t j = 0; j < ix->n; j++) {
            int64_t v = wm_ct_geti(ix, j);
            if (v < 0) v += (int64_t)axn;
            if (v < 0 || (uint64_t)v >= axn) {
                wm_ct_free(o);
                return wm_err(err, WM_ERR_INPUT, "fold Gather: index out of range");
            }
            for (uint64_t q = 0; q < inner; q++) copy_elem(o, k++, a, (p * axn + (uint64_t)v) * inner + q);
        }
    return WM_OK;
}

static wm_status f_slice(const wm_onnx_node *n, int64_t opset, const wm_ct *in, size_t n_in, wm_ct *o,
                         uint64_t cap, wm_error *err) {
    const wm_ct *a = &in[0];
    int32_t r = a->rank;
    int64_t st[WM_CT_MAX_RANK], en[WM_CT_MAX_RANK], ax[WM_CT_MAX_RANK], sp[WM_CT_MAX_RANK];
    int k;
    if (opset < 10) return unsupported(n, "attribute form", err);
    k = ints_of(&in[1], st, WM_CT_MAX_RANK);
    if (k < 0 || ints_of(&in[2], en, WM_CT_MAX_RANK) != k) return wm_err(err, WM_ERR_INPUT, "fold Slice: args");
    for (int i = 0; i < k; i++) {
        ax[i] = i;
        sp[i] = 1;
    }
    if (n_in > 3 && in[3].dtype && ints_of(&in[3], ax, WM_CT_MAX_RANK) != k)
        return wm_err(err, WM_ERR_INPUT, "fold Slice: axes");
    if (n_in > 4 && in[4].dtype && ints_of(&in[4], sp, WM_CT_MAX_RANK) != k)
        return wm_err(err, WM_ERR_INPUT, "fold Slice: steps");
    int64_t start[WM_CT_MAX_RANK], step[WM_CT_MAX_RANK], dims[WM_CT_MAX_RANK];
    for (int32_t d = 0; d < r; d++) {
        start[d] = 0;
        step[d] = 1;
        dims[d] = a->dims[d];
    }
    for (int i = 0; i < k; i++) {
        int64_t d = ax[i] < 0 ? ax[i] + r : ax[i];
        if (d < 0 || d >= r || !sp[i]) return wm_err(err, WM_ERR_INPUT, "fold Slice: bad axis or step");
        dims[d] = wm_slice_axis(a->dims[d], st[i], en[i], sp[i], &start[d]); /* as the engine's Slice */
        step[d] = sp[i];
    }
    wm_status s = alloc_capped(o, a->dtype, dims, r, cap, n, err);
    if (s) return s;
    uint64_t ast[WM_CT_MAX_RANK];
    strides(a, ast);
    for (uint64_t i = 0; i < o->n; i++) {
        uint64_t rem = i, off = 0;
        for (int32_t d = r - 1; d >= 0; d--) {
            uint64_t c = rem % (uint64_t)dims[d];
            rem /= (uint64_t)dims[d];
            off += (uint64_t)(start[d] + (int64_t)c * step[d]) * ast[d];
        }
        copy_elem(o, i, a, off);
    }
    return WM_OK;
}

static wm_status f_transpose(const wm_onnx_node *n, const wm_ct *a, wm_ct *o, uint64_t cap, wm_error *err) {
    size_t np;
    const int64_t *p = wm_opt_attr_ints(n, "perm", &np);
    int64_t perm[WM_CT_MAX_RANK], dims[WM_CT_MAX_RANK];
    if (p && (int32_t)np != a->rank) return wm_err(err, WM_ERR_INPUT, "fold Transpose: perm");
    for (int32_t d = 0; d < a->rank; d++) {
        perm[d] = p ? p[d] : a->rank - 1 - d;
        if (perm[d] < 0 || perm[d] >= a->rank) return wm_err(err, WM_ERR_INPUT, "fold Transpose: perm");
        dims[d] = a->dims[perm[d]];
    }
    wm_status s = alloc_capped(o, a->dtype, dims, a->rank, cap, n, err);
    if (s) return s;
    uint64_t ast[WM_CT_MAX_RANK];
    strides(a, ast);
    for (uint64_t i = 0; i < o->n; i++) {
        uint64_t rem = i, off = 0;
        for (int32_t d = a->rank - 1; d >= 0; d--) {
            uint64_t c = rem % (uint64_t)dims[d];
            rem /= (uint64_t)dims[d];
            off += c * ast[perm[d]];
        }
        copy_elem(o, i, a, off);
    }
    return WM_OK;
}

static wm_status f_expand(const wm_onnx_node *n, const wm_ct *in, wm_ct *o, uint64_t cap, wm_error *err) {
    wm_ct shp;
    int64_t sh[WM_CT_MAX_RANK];
    int r = ints_of(&in[1], sh, WM_CT_MAX_RANK);
    if (r < 0) return unsupported(n, "rank", err);
    memset(&shp, 0, sizeof shp);
    shp.rank = r;
    memcpy(shp.dims, sh, (size_t)r * sizeof *sh);
    const wm_ct *t[2] = {&in[0], &shp};
    bc b;
    if (broadcast(&b, t, 2)) return wm_err(err, WM_ERR_INPUT, "fold Expand: shapes do not broadcast");
    wm_status s = alloc_capped(o, in[0].dtype, b.dims, b.rank, cap, n, err);
    for (uint64_t i = 0; !s && i < o->n; i++) copy_elem(o, i, &in[0], bc_offset(&b, &in[0], i));
    return s;
}

static wm_status f_range(const wm_onnx_node *n, const wm_ct *in, wm_ct *o, uint64_t cap, wm_error *err) {
    if (in[0].n != 1 || in[1].n != 1 || in[2].n != 1) return wm_err(err, WM_ERR_INPUT, "fold Range: scalars");
    double a = wm_ct_getf(&in[0], 0), b = wm_ct_getf(&in[1], 0), d = wm_ct_getf(&in[2], 0);
    int fl = is_float(in[0].dtype);
    int64_t ia = wm_ct_geti(&in[0], 0), id = wm_ct_geti(&in[2], 0);
    uint64_t cnt = 0; /* counted as the engine's Range counts (ops/int_math.h); 2^40: its bound too */
    if (fl ? !wm_range_count_f64(a, b, d, 1ull << 40, &cnt)
           : !wm_range_count_int(ia, wm_ct_geti(&in[1], 0), id, in[0].dtype == WM_DT_UINT64, 1ull << 40, &cnt))
        return wm_err(err, WM_ERR_INPUT, "fold Range: delta 0 or too many elements");
    int64_t len = (int64_t)cnt;
    wm_status s = alloc_capped(o, in[0].dtype, &len, 1, cap, n, err);
    for (int64_t i = 0; !s && i < len; i++) {
        if (fl) wm_ct_set(o, (uint64_t)i, a + (double)i * d);
        else wm_ct_seti(o, (uint64_t)i, wm_i64_add(ia, wm_i64_mul(i, id)));
    }
    return s;
}

static wm_status f_constant_of_shape(const wm_onnx_node *n, const wm_ct *in, wm_ct *o, uint64_t cap,
                                     wm_error *err) {
    int64_t sh[WM_CT_MAX_RANK];
    int r = ints_of(&in[0], sh, WM_CT_MAX_RANK);
    if (r < 0) return unsupported(n, "rank", err);
    const wm_onnx_attr *a = wm_graph_node_attr(n, "value");
    wm_ct v;
    memset(&v, 0, sizeof v);
    if (a && a->t && wm_ct_from_tensor(a->t, 64, &v, err)) return unsupported(n, "value", err);
    int32_t dt = a && a->t ? v.dtype : WM_DT_FLOAT;
    wm_status s = alloc_capped(o, dt, sh, r, cap, n, err);
    for (uint64_t i = 0; !s && v.n && i < o->n; i++) copy_elem(o, i, &v, 0);
    wm_ct_free(&v);
    return s;
}

static wm_status f_cast(const wm_onnx_node *n, const wm_ct *a, int32_t to, wm_ct *o, uint64_t cap, wm_error *err) {
    wm_status s = alloc_capped(o, to, a->dims, a->rank, cap, n, err);
    int from_f = is_float(a->dtype), to_f = is_float(to);
    for (uint64_t i = 0; !s && i < a->n; i++) {
        if (to_f) wm_ct_set(o, i, wm_ct_getf(a, i));
        else if (from_f) wm_ct_seti(o, i, wm_f64_to_int(to, wm_ct_getf(a, i))); /* as the engine's Cast */
        else wm_ct_seti(o, i, wm_ct_geti(a, i));
    }
    return s;
}

static wm_status f_flatten(const wm_onnx_node *n, const wm_ct *a, wm_ct *o, uint64_t cap, wm_error *err) {
    int64_t ax = wm_opt_attr_i(n, "axis", 1);
    if (ax < 0) ax += a->rank;
    int64_t d[2] = {1, 1};
    for (int32_t i = 0; i < a->rank; i++) d[i < ax ? 0 : 1] *= a->dims[i];
    return reshape_to(n, a, d, 2, o, cap, err);
}

static wm_status f_reduce(const wm_onnx_node *n, int64_t opset, const wm_ct *in, size_t n_in, wm_ct *o,
                          uint64_t cap, wm_error *err) {
    const char *op = n->op_type;
    const wm_ct *a = &in[0];
    int64_t ax[WM_CT_MAX_RANK], dims[WM_CT_MAX_RANK];
    int na = axes_arg(n, opset, !strcmp(op, "ReduceSum") ? 13 : 18, in, n_in, 1, ax);
    if (na < 0) return unsupported(n, "axes", err);
    uint8_t red[WM_CT_MAX_RANK] = {0};
    if (!na && !wm_opt_attr_i(n, "noop_with_empty_axes", 0)) memset(red, 1, sizeof red);
    for (int i = 0; i < na; i++) {
        int64_t k = ax[i] < 0 ? ax[i] + a->rank : ax[i];
        if (k < 0 || k >= a->rank) return wm_err(err, WM_ERR_INPUT, "fold %s: bad axis", op);
        red[k] = 1;
    }
    for (int32_t d = 0; d < a->rank; d++) dims[d] = red[d] ? 1 : a->dims[d];
    wm_status s = alloc_capped(o, a->dtype, dims, a->rank, cap, n, err);
    if (s) return s;
    uint64_t cnt = 1;
    for (int32_t d = 0; d < a->rank; d++)
        if (red[d]) cnt *= (uint64_t)a->dims[d];
    double *acc = calloc(o->n ? (size_t)o->n : 1, sizeof *acc);
    int64_t *iacc = calloc(o->n ? (size_t)o->n : 1, sizeof *iacc);
    uint8_t *seen = calloc(o->n ? (size_t)o->n : 1, 1);
    if (!acc || !iacc || !seen) {
        free(acc), free(iacc), free(seen);
        wm_ct_free(o);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    int mx = !strcmp(op, "ReduceMax"), mn = !strcmp(op, "ReduceMin"), pr = !strcmp(op, "ReduceProd");
    int mean = !strcmp(op, "ReduceMean"), ok = mx || mn || pr || mean || !strcmp(op, "ReduceSum");
    int fl = is_float(a->dtype), u = a->dtype == WM_DT_UINT64; /* integers exactly, as the engine's reduce.c */
    for (uint64_t i = 0; i < o->n; i++) acc[i] = mx ? -INFINITY : mn ? INFINITY : pr ? 1 : 0, iacc[i] = pr;
    bc b = {a->rank, {0}};
    memcpy(b.dims, a->dims, sizeof b.dims);
    for (uint64_t i = 0; ok && i < a->n; i++) {
        uint64_t j = bc_offset(&b, o, i);
        if (!fl) {
            int64_t v = wm_ct_geti(a, i), w = iacc[j];
            int gt = u ? (uint64_t)v > (uint64_t)w : v > w, lt = u ? (uint64_t)v < (uint64_t)w : v < w;
            if (mx) iacc[j] = !seen[j] || gt ? v : w;
            else if (mn) iacc[j] = !seen[j] || lt ? v : w;
            else iacc[j] = pr ? wm_i64_mul(w, v) : wm_i64_add(w, v);
            seen[j] = 1;
            continue;
        }
        double v = wm_ct_getf(a, i);
        if (mx) acc[j] = v > acc[j] ? v : acc[j];
        else if (mn) acc[j] = v < acc[j] ? v : acc[j];
        else if (pr) acc[j] *= v;
        else acc[j] += v;
    }
    for (uint64_t i = 0; ok && i < o->n; i++) {
        if (fl) wm_ct_set(o, i, mean ? acc[i] / (double)(cnt ? cnt : 1) : acc[i]);
        else if (!mean) wm_ct_seti(o, i, iacc[i]);
        else wm_ct_seti(o, i, u ? (int64_t)wm_u64_div((uint64_t)iacc[i], cnt) : wm_i64_div(iacc[i], (int64_t)cnt));
    }
    free(acc), free(iacc), free(seen);
    if (!ok) {
        wm_ct_free(o);
        return unsupported(n, "reduction", err);
    }
    if (!wm_opt_attr_i(n, "keepdims", 1)) {
        int32_t r = 0;
        for (int32_t d = 0; d < a->rank; d++)
            if (!red[d]) o->dims[r++] = a->dims[d];
        o->rank = r;
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- dispatch */

static const char *const SUPPORTED[] = {
    "Identity", "Cast", "Reshape", "Unsqueeze", "Squeeze", "Concat", "Gather", "Slice", "Transpose", "Expand",
    "Range", "ConstantOfShape", "Flatten", "Where", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod",
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Neg", "Abs", "Sqrt",
    "Reciprocal", "Exp", "Log", "Cos", "Sin", "Floor", "Ceil", "Erf", "Tanh", "Sigmoid", "Relu", "IsNaN",
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"};

int wm_fold_supported(const char *op) {
    if (!op) return 0;
    for (size_t i = 0; i < sizeof SUPPORTED / sizeof *SUPPORTED; i++)
        if (!strcmp(op, SUPPORTED[i])) return 1;
    return 0;
}

wm_status wm_fold_eval(const wm_onnx_node *n, int64_t opset, const wm_ct *in, size_t n_in, wm_ct *out,
                       size_t n_out, uint64_t cap, wm_error *err) {
    const char *op = n->op_type;
    for (size_t i = 0; i < n_out; i++) memset(&out[i], 0, sizeof out[i]);
    if (!op || !wm_opt_default_domain(n) || !wm_fold_supported(op)) return unsupported(n, "op", err);
    if (n_out != 1) return unsupported(n, "outputs", err);
    if (!n_in || !in[0].dtype) return unsupported(n, "inputs", err);
    if (!strcmp(op, "Reshape")) return n_in >= 2 ? f_reshape(n, in, out, cap, err) : unsupported(n, "args", err);
    if (!strcmp(op, "Unsqueeze")) return f_unsqueeze(n, opset, in, n_in, out, cap, err);
    if (!strcmp(op, "Squeeze")) return f_squeeze(n, opset, in, n_in, out, cap, err);
    if (!strcmp(op, "Concat")) return f_concat(n, in, n_in, out, cap, err);
    if (!strcmp(op, "Gather")) return n_in >= 2 ? f_gather(n, in, out, cap, err) : unsupported(n, "args", err);
    if (!strcmp(op, "Slice")) return n_in >= 3 ? f_slice(n, opset, in, n_in, out, cap, err) : unsupported(n, "args", err);
    if (!strcmp(op, "Transpose")) return f_transpose(n, &in[0], out, cap, err);
    if (!strcmp(op, "Expand")) return n_in >= 2 ? f_expand(n, in, out, cap, err) : unsupported(n, "args", err);
    if (!strcmp(op, "Range")) return n_in >= 3 ? f_range(n, in, out, cap, err) : unsupported(n, "args", err);
    if (!strcmp(op, "ConstantOfShape")) return f_constant_of_shape(n, in, out, cap, err);
    if (!strcmp(op, "Flatten")) return f_flatten(n, &in[0], out, cap, err);
    if (!strcmp(op, "Cast")) return f_cast(n, &in[0], (int32_t)wm_opt_attr_i(n, "to", 0), out, cap, err);
    if (!strncmp(op, "Reduce", 6)) return f_reduce(n, opset, in, n_in, out, cap, err);
    if (!strcmp(op, "Where") && n_in != 3) return unsupported(n, "args", err);
    for (size_t i = 0; i < n_in; i++)
        if (!in[i].dtype) return unsupported(n, "missing input", err);
    return elementwise(n, in, n_in, out, cap, err);
}
