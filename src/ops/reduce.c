/*
 * reduce.c - ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare,
 * ArgMax, ArgMin. Axes come from the attribute (older opsets) or the
 * second input (ReduceSum from 13, the others from 18). Accumulation in
 * double for floats, exactly in int64 for integers (wrapping as integer Add
 * and Mul do, ops/int_math.h; uint64 compared unsigned); a fixed order per
 * output element.
 */
#include <math.h>
#include <string.h>

#include "ops/scalar.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ, R_ARGMAX, R_ARGMIN };

static const struct { const char *name; int kind; int axes_input_since; } rops[] = {
    {"ReduceSum", R_SUM, 13},      {"ReduceMean", R_MEAN, 18},     {"ReduceMax", R_MAX, 18},
    {"ReduceMin", R_MIN, 18},      {"ReduceProd", R_PROD, 18},     {"ReduceL1", R_L1, 18},
    {"ReduceL2", R_L2, 18},        {"ReduceLogSum", R_LOGSUM, 18}, {"ReduceLogSumExp", R_LOGSUMEXP, 18},
    {"ReduceSumSquare", R_SUMSQ, 18}, {"ArgMax", R_ARGMAX, 0},     {"ArgMin", R_ARGMIN, 0},
};

typedef struct rstate {
    int kind, axes_input;
} rstate;

static wm_status reduce_init(wm_node *n, wm_error *err) {
    rstate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < sizeof rops / sizeof rops[0]; i++)
        if (!strcmp(rops[i].name, n->proto->op_type)) {
            s->kind = rops[i].kind;
            s->axes_input = rops[i].axes_input_since && n->opset >= rops[i].axes_input_since;
        }
    n->state = s;
    wm_status st = wm_check_type(n, 0, s->kind == R_MAX || s->kind == R_MIN ? wm_types_all : wm_types_numeric, err);
    n->out_dtype[0] = s->kind >= R_ARGMAX ? WM_DT_INT64 : n->in_dtype[0];
    return st;
}

/* Which dims are reduced; WM_NEED_DATA when the axes input is not known ahead. */
static wm_status reduce_axes(const wm_node *n, wm_tensor *const *in, int *red, wm_error *err) {
    const rstate *s = n->state;
    int r = in[0]->rank;
    memset(red, 0, sizeof(int) * WM_MAX_RANK);
    if (s->kind >= R_ARGMAX) {
        int a = wm_axis(wm_attr_int(n, "axis", 0), r);
        if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
        red[a] = 1;
        return WM_OK;
    }
    int64_t axes[WM_MAX_RANK];
    int cnt = 0;
    if (s->axes_input) {
        if (n->n_in > 1 && in[1]) {
            if (!in[1]->data && wm_tensor_numel(in[1])) return WM_NEED_DATA;
            uint64_t k = wm_tensor_numel(in[1]);
            if (k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_INPUT, "too many axes");
            for (uint64_t i = 0; i < k; i++) axes[i] = wm_tensor_get_int(in[1], i);
            cnt = (int)k;
        }
    } else {
        size_t k;
        const int64_t *a = wm_attr_ints(n, "axes", &k);
        if (k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_INPUT, "too many axes");
        for (size_t i = 0; i < k; i++) axes[i] = a[i];
        cnt = (int)k;
    }
    if (cnt == 0) {
        if (wm_attr_int(n, "noop_with_empty_axes", 0)) return WM_OK;
        for (int d = 0; d < r; d++) red[d] = 1;
        return WM_OK;
    }
    for (int i = 0; i < cnt; i++) {
        int a = wm_axis(axes[i], r);
        if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld out of range", (long long)axes[i]);
        red[a] = 1;
    }
    return WM_OK;
}

static wm_status reduce_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int red[WM_MAX_RANK];
    wm_status st = reduce_axes(n, in, red, err);
    if (st) return st;
    int keep = (int)wm_attr_int(n, "keepdims", 1), k = 0;
    for (int d = 0; d < in[0]->rank; d++) {
        if (red[d] && in[0]->dims[d] == 0 && ((const rstate *)n->state)->kind >= R_ARGMAX)
            return wm_node_err(n, err, WM_ERR_INPUT, "arg reduction over an empty dim");
        if (!red[d]) out[0]->dims[k++] = in[0]->dims[d];
        else if (keep) out[0]->dims[k++] = 1;
    }
    out[0]->rank = k;
    return WM_OK;
}

/* Element i of the output: an integer result as its low bits, a double one converted as Cast converts. */
static void store(int32_t dt, void *p, uint64_t i, double v, int64_t iv, int is_int) {
    if (is_int) wm_store_int(dt, p, i, iv);
    else wm_store_f64(dt, p, i, v);
}

/* float32 fast path: reduce the last dims (contiguous rows) for sum/mean/max */
static int reduce_rows_f32(const rstate *s, const wm_tensor *in, const int *red, wm_tensor *out) {
    int r = in->rank, first = r;
    while (first > 0 && red[first - 1]) first--;
    for (int d = 0; d < first; d++)
        if (red[d]) return 0;
    if (first == r || in->dtype != WM_DT_FLOAT || (s->kind != R_SUM && s->kind != R_MEAN && s->kind != R_MAX)) return 0;
    uint64_t rows = 1, len = 1;
    for (int d = 0; d < first; d++) rows *= (uint64_t)in->dims[d];
    for (int d = first; d < r; d++) len *= (uint64_t)in->dims[d];
    if (!len) return 0;
    const float *a = in->data;
    float *o = out->data;
    for (uint64_t i = 0; i < rows; i++) {
        const float *row = a + i * len;
        if (s->kind == R_MAX) {
            float m = row[0];
            for (uint64_t j = 1; j < len; j++) m = row[j] > m || isnan(row[j]) ? row[j] : m;
            o[i] = m;
        } else {
            double acc = 0;
            for (uint64_t j = 0; j < len; j++) acc += row[j];
            o[i] = (float)(s->kind == R_MEAN ? acc / (double)len : acc);
        }
    }
    return 1;
}

static wm_status reduce_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const rstate *s = n->state;
    int red[WM_MAX_RANK];
    wm_status st = reduce_axes(n, in, red, x->err);
    if (st) return st;
    if (reduce_rows_f32(s, in[0], red, out[0])) return WM_OK;
    int r = in[0]->rank;
    uint64_t nout = wm_tensor_numel(out[0]);
    /* kept dims and reduced dims, with input strides */
    int64_t kd[WM_MAX_RANK], ks[WM_MAX_RANK], rd[WM_MAX_RANK], rs[WM_MAX_RANK], st_[WM_MAX_RANK];
    int nk = 0, nr = 0;
    int64_t sacc = 1;
    for (int d = r - 1; d >= 0; d--) {
        st_[d] = sacc;
        sacc *= in[0]->dims[d];
    }
    uint64_t rcount = 1;
    for (int d = 0; d < r; d++) {
        if (red[d]) rd[nr] = in[0]->dims[d], rs[nr++] = st_[d], rcount *= (uint64_t)in[0]->dims[d];
        else kd[nk] = in[0]->dims[d], ks[nk++] = st_[d];
    }
    int32_t dt = in[0]->dtype;
    int is_int = !(dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16);
    int uns = dt == WM_DT_UINT64;
    int select_last = (int)wm_attr_int(n, "select_last_index", 0);
    for (uint64_t o = 0; o < nout; o++) {
        uint64_t rem = o;
        int64_t base = 0;
        for (int d = nk - 1; d >= 0; d--) {
            base += (int64_t)(rem % (uint64_t)kd[d]) * ks[d];
            rem /= (uint64_t)kd[d];
        }
        double acc = 0;
        int64_t iacc = 0, best_i = 0;
        int started = 0;
        if (s->kind == R_PROD) acc = 1, iacc = 1;
        if (s->kind == R_MAX || s->kind == R_MIN) acc = s->kind == R_MAX ? -INFINITY : INFINITY;
        double lse_max = -INFINITY;
        if (s->kind == R_LOGSUMEXP) /* max first, for a stable sum */
            for (uint64_t q = 0; q < rcount; q++) {
                uint64_t rr = q;
                int64_t off = base;
                for (int d = nr - 1; d >= 0; d--) off += (int64_t)(rr % (uint64_t)rd[d]) * rs[d], rr /= (uint64_t)rd[d];
                double v = wm_get_f64(in[0], (uint64_t)off);
                if (v > lse_max) lse_max = v;
            }
        for (uint64_t q = 0; q < rcount; q++) {
            uint64_t rr = q;
            int64_t off = base;
            for (int d = nr - 1; d >= 0; d--) off += (int64_t)(rr % (uint64_t)rd[d]) * rs[d], rr /= (uint64_t)rd[d];
            double v = wm_get_f64(in[0], (uint64_t)off);
            if (is_int) { /* integers exactly (compared unsigned for uint64), wrapping */
                int64_t iv = wm_tensor_get_int(in[0], (uint64_t)off);
                int gt = uns ? (uint64_t)iv > (uint64_t)iacc : iv > iacc, lt = uns ? (uint64_t)iv < (uint64_t)iacc : iv < iacc;
                int last = select_last && iv == iacc;
                switch (s->kind) {
                case R_SUM: case R_MEAN: iacc = wm_i64_add(iacc, iv); break;
                case R_PROD: iacc = wm_i64_mul(iacc, iv); break;
                case R_L1: iacc = wm_i64_add(iacc, uns ? iv : wm_i64_abs(iv)); break;
                case R_SUMSQ: iacc = wm_i64_add(iacc, wm_i64_mul(iv, iv)); break;
                case R_L2: acc += v * v; break;
                case R_LOGSUM: acc += v; break;
                case R_LOGSUMEXP: acc += exp(v - lse_max); break;
                case R_MAX: case R_ARGMAX:
                    if (!started || gt || (s->kind == R_ARGMAX && last)) iacc = iv, best_i = (int64_t)q;
                    break;
                case R_MIN: case R_ARGMIN:
                    if (!started || lt || (s->kind == R_ARGMIN && last)) iacc = iv, best_i = (int64_t)q;
                    break;
                }
                started = 1;
                continue;
            }
            switch (s->kind) {
            case R_SUM: case R_MEAN: acc += v; break;
            case R_PROD: acc *= v; break;
            case R_L1: acc += fabs(v); break;
            case R_L2: acc += v * v; break;
            case R_SUMSQ: acc += v * v; break;
            case R_LOGSUM: acc += v; break;
            case R_LOGSUMEXP: acc += exp(v - lse_max); break;
            case R_MAX:
                if (!started || v > acc || isnan(v)) acc = v;
                break;
            case R_MIN:
                if (!started || v < acc || isnan(v)) acc = v;
                break;
            case R_ARGMAX:
                if (!started || v > acc || (select_last && v == acc)) acc = v, best_i = (int64_t)q;
                break;
            case R_ARGMIN:
                if (!started || v < acc || (select_last && v == acc)) acc = v, best_i = (int64_t)q;
                break;
            }
            started = 1;
        }
        switch (s->kind) {
        case R_MEAN:
            acc = rcount ? acc / (double)rcount : NAN;
            iacc = uns ? (int64_t)wm_u64_div((uint64_t)iacc, rcount) : wm_i64_div(iacc, (int64_t)rcount); /* 0 when empty */
            break;
        case R_L2: acc = sqrt(acc); break;
        case R_LOGSUM: acc = log(acc); break;
        case R_LOGSUMEXP: acc = log(acc) + lse_max; break;
        default: break;
        }
        if (s->kind >= R_ARGMAX) ((int64_t *)out[0]->data)[o] = best_i;
        else store(out[0]->dtype, out[0]->data, o, acc, iacc, is_int && s->kind != R_L2 && s->kind != R_LOGSUM &&
                                                                  s->kind != R_LOGSUMEXP);
    }
    return WM_OK;
}

#define R(name) {"", name, 1, 0, reduce_init, reduce_infer, reduce_run, NULL, 0, 1u << 1}

static const wm_op ops[] = {
    R("ReduceSum"), R("ReduceMean"), R("ReduceMax"),    R("ReduceMin"),       R("ReduceProd"),      R("ReduceL1"),
    R("ReduceL2"),  R("ReduceLogSum"), R("ReduceLogSumExp"), R("ReduceSumSquare"), R("ArgMax"), R("ArgMin"),
};

const wm_op_table wm_ops_reduce = {ops, sizeof ops / sizeof ops[0]};
