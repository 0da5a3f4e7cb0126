/*
 * norm_nn.c - normalizations of vision models: BatchNormalization
 * (inference form), InstanceNormalization, GroupNormalization (18: scale
 * and bias per group, 21: per channel), LpNormalization, LRN,
 * MeanVarianceNormalization.
 *
 * Statistics accumulate in double; BatchNormalization float32 runs
 * y = x * a[c] + b[c] with a, b folded per channel. Threads take whole
 * planes or groups.
 */
#include <math.h>
#include <string.h>

#include "ops/cnn.h"
#include "ops/cnn_kern.h"

/* ---------------------------------------------------------------- BatchNormalization */

typedef struct bn_state {
    float eps;
} bn_state;

static wm_status bn_init(wm_node *n, wm_error *err) {
    bn_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->eps = wm_attr_float(n, "epsilon", 1e-5f);
    if (wm_attr_int(n, "training_mode", 0) != 0)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "training_mode = 1 (batch statistics, running-mean updates) is not supported; inference form only");
    if (n->opset < 9 && wm_attr_int(n, "spatial", 1) == 0)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "spatial = 0 (per-activation statistics) is not supported");
    for (int k = 1; k < n->n_out; k++)
        if (n->proto->output[k] && *n->proto->output[k])
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output %d (training statistics) is not supported; inference form only", k);
    if (n->n_in < 5) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X, scale, B, input_mean, input_var");
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    for (int i = 1; i < 5 && !st; i++) st = wm_check_type(n, i, wm_types_float, err);
    n->out_dtype[0] = n->in_dtype[0];
    for (int k = 1; k < n->n_out; k++) n->out_dtype[k] = n->in_dtype[0];
    return st;
}

static wm_status bn_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (in[0]->rank < 2) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C, ...)", in[0]->rank);
    int64_t C = in[0]->dims[1];
    for (int i = 1; i < 5; i++)
        if (wm_tensor_numel(in[i]) != (uint64_t)C)
            return wm_node_err(n, err, WM_ERR_INPUT, "input %d has %llu values for %lld channels", i,
                               (unsigned long long)wm_tensor_numel(in[i]), (long long)C);
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

typedef struct bn_job {
    const wm_tensor *x;
    wm_tensor *y;
    const double *a, *b;
    int64_t C, planes, len;
} bn_job;

static void bn_part(void *arg, int ith, int nth) {
    const bn_job *j = arg;
    long lo, hi;
    wm_split((long)j->planes, ith, nth, &lo, &hi);
    int32_t dt = j->x->dtype;
    for (long q = lo; q < hi; q++) {
        int64_t c = q % j->C;
        uint64_t base = (uint64_t)(q * j->len);
        if (dt == WM_DT_FLOAT) {
            wm_cnn_affine((float *)j->y->data + base, (const float *)j->x->data + base, (float)j->a[c], (float)j->b[c], j->len);
        } else
            for (int64_t i = 0; i < j->len; i++)
                wm_st(dt, j->y->data, base + (uint64_t)i, wm_ld(dt, j->x->data, base + (uint64_t)i) * j->a[c] + j->b[c]);
    }
}

static size_t bn_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)out, (void)nth;
    return (size_t)(2 * in[0]->dims[1]) * sizeof(double) + 64;
}

static wm_status bn_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const bn_state *s = n->state;
    bn_job j = {in[0], out[0], x->ws, NULL, in[0]->dims[1], in[0]->dims[0] * in[0]->dims[1], 0};
    double *a = x->ws, *b = a + j.C;
    j.b = b;
    for (int64_t c = 0; c < j.C; c++) {
        double sc = wm_ld(in[1]->dtype, in[1]->data, (uint64_t)c), bi = wm_ld(in[2]->dtype, in[2]->data, (uint64_t)c);
        double m = wm_ld(in[3]->dtype, in[3]->data, (uint64_t)c), v = wm_ld(in[4]->dtype, in[4]->data, (uint64_t)c);
        a[c] = sc / sqrt(v + (double)s->eps);
        b[c] = bi - m * a[c];
    }
    if (!j.planes) return WM_OK;
    j.len = (int64_t)(wm_tensor_numel(in[0]) / (uint64_t)j.planes);
    int nth = (uint64_t)(j.planes * j.len) >= 65536 ? x->nth : 1;
    if (nth > j.planes) nth = (int)j.planes;
    wm_pool_run(x->pool, bn_part, &j, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- Instance / Group normalization */

typedef struct gn_state {
    float eps;
    int64_t groups; /* 0: InstanceNormalization (one group per channel) */
    int per_group;  /* GroupNormalization-18: scale and bias per group */
} gn_state;

static wm_status gn_init(wm_node *n, wm_error *err) {
    gn_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->eps = wm_attr_float(n, "epsilon", 1e-5f);
    if (!strcmp(n->proto->op_type, "GroupNormalization")) {
        s->groups = wm_attr_int(n, "num_groups", 0);
        if (s->groups < 1) return wm_node_err(n, err, WM_ERR_INPUT, "num_groups = %lld (must be >= 1)", (long long)s->groups);
        s->per_group = n->opset < 21;
    }
    if (n->n_in < 3) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X, scale, B");
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    for (int i = 1; i < 3 && !st; i++) st = wm_check_type(n, i, wm_types_float, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status gn_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const gn_state *s = n->state;
    if (in[0]->rank < 2) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C, ...)", in[0]->rank);
    int64_t C = in[0]->dims[1];
    if (s->groups && C % s->groups)
        return wm_node_err(n, err, WM_ERR_INPUT, "%lld channels do not split into %lld groups", (long long)C, (long long)s->groups);
    uint64_t want = (uint64_t)(s->per_group ? s->groups : C);
    for (int i = 1; i < 3; i++)
        if (wm_tensor_numel(in[i]) != want)
            return wm_node_err(n, err, WM_ERR_INPUT, "input %d has %llu values (expected %llu)", i,
                               (unsigned long long)wm_tensor_numel(in[i]), (unsigned long long)want);
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

typedef struct gn_job {
    const gn_state *s;
    wm_tensor *const *in;
    wm_tensor *y;
    int64_t C, G, n_units, cpg, len; /* units = N * groups; cpg channels per group; len per channel */
} gn_job;

static void gn_part(void *arg, int ith, int nth) {
    const gn_job *j = arg;
    long lo, hi;
    wm_split((long)j->n_units, ith, nth, &lo, &hi);
    const wm_tensor *X = j->in[0], *S = j->in[1], *B = j->in[2];
    int32_t dt = X->dtype;
    uint64_t ulen = (uint64_t)(j->cpg * j->len);
    for (long u = lo; u < hi; u++) {
        uint64_t base = (uint64_t)u * ulen;
        double mean = 0, var = 0;
        if (dt == WM_DT_FLOAT) {
            const float *x = (const float *)X->data + base;
            for (uint64_t i = 0; i < ulen; i++) mean += x[i];
            mean = ulen ? mean / (double)ulen : 0;
            for (uint64_t i = 0; i < ulen; i++) var += (x[i] - mean) * (x[i] - mean);
        } else {
            for (uint64_t i = 0; i < ulen; i++) mean += wm_ld(dt, X->data, base + i);
            mean = ulen ? mean / (double)ulen : 0;
            for (uint64_t i = 0; i < ulen; i++) {
                double d = wm_ld(dt, X->data, base + i) - mean;
                var += d * d;
            }
        }
        var = ulen ? var / (double)ulen : 0;
        double inv = 1.0 / sqrt(var + (double)j->s->eps);
        int64_t g = u % j->G;
        for (int64_t k = 0; k < j->cpg; k++) {
            int64_t c = g * j->cpg + k, si = j->s->per_group ? g : c;
            double a = wm_ld(S->dtype, S->data, (uint64_t)si) * inv, b = wm_ld(B->dtype, B->data, (uint64_t)si) - mean * a;
            uint64_t o = base + (uint64_t)(k * j->len);
            if (dt == WM_DT_FLOAT) {
                wm_cnn_affine((float *)j->y->data + o, (const float *)X->data + o, (float)a, (float)b, j->len);
            } else
                for (int64_t i = 0; i < j->len; i++)
                    wm_st(dt, j->y->data, o + (uint64_t)i, wm_ld(dt, X->data, o + (uint64_t)i) * a + b);
        }
    }
}

static wm_status gn_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const gn_state *s = n->state;
    int64_t N = in[0]->dims[0], C = in[0]->dims[1];
    gn_job j = {s, in, out[0], C, s->groups ? s->groups : C, 0, 0, 0};
    j.n_units = N * j.G;
    j.cpg = j.G ? C / j.G : 0;
    if (!j.n_units || !N || !C) return WM_OK;
    j.len = (int64_t)(wm_tensor_numel(in[0]) / (uint64_t)(N * C));
    int nth = wm_tensor_numel(in[0]) >= 65536 ? x->nth : 1;
    if (nth > j.n_units) nth = (int)j.n_units;
    wm_pool_run(x->pool, gn_part, &j, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- LpNormalization, MeanVarianceNormalization */

static wm_status f_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    if (!strcmp(n->proto->op_type, "LpNormalization")) {
        int64_t p = wm_attr_int(n, "p", 2);
        if (p != 1 && p != 2) return wm_node_err(n, err, WM_ERR_INPUT, "p = %lld (must be 1 or 2)", (long long)p);
    }
    if (!strcmp(n->proto->op_type, "LRN")) {
        int64_t size = wm_attr_int(n, "size", 0);
        if (size < 1) return wm_node_err(n, err, WM_ERR_INPUT, "size = %lld (must be >= 1)", (long long)size);
    }
    return wm_check_type(n, 0, wm_types_float, err);
}

static wm_status same_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const char *op = n->proto->op_type;
    int r = in[0]->rank;
    if (!strcmp(op, "LpNormalization") && wm_axis(wm_attr_int(n, "axis", -1), r) < 0)
        return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range for rank %d", r);
    if (!strcmp(op, "LRN") && r < 3) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C, spatial)", r);
    if (!strcmp(op, "MeanVarianceNormalization")) {
        size_t k;
        const int64_t *ax = wm_attr_ints(n, "axes", &k);
        for (size_t i = 0; i < k; i++)
            if (wm_axis(ax[i], r) < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axes[%zu] out of range for rank %d", i, r);
        if (!ax && r < 4) return wm_node_err(n, err, WM_ERR_INPUT, "default axes (0, 2, 3) need rank >= 4");
    }
    wm_set_shape(out[0], r, in[0]->dims);
    return WM_OK;
}

static wm_status lpn_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    const wm_tensor *X = in[0];
    int r = X->rank, a = wm_axis(wm_attr_int(n, "axis", -1), r);
    int64_t p = wm_attr_int(n, "p", 2), outer = 1, len = X->dims[a], inner = 1;
    for (int i = 0; i < a; i++) outer *= X->dims[i];
    for (int i = a + 1; i < r; i++) inner *= X->dims[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            uint64_t b = (uint64_t)(o * len * inner + i);
            double s = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = wm_ld(X->dtype, X->data, b + (uint64_t)(k * inner));
                s += p == 1 ? fabs(v) : v * v;
            }
            double norm = p == 1 ? s : sqrt(s);
            for (int64_t k = 0; k < len; k++) {
                uint64_t e = b + (uint64_t)(k * inner);
                wm_st(X->dtype, out[0]->data, e, norm == 0 ? 0.0 : wm_ld(X->dtype, X->data, e) / norm);
            }
        }
    return WM_OK;
}

/* MVN: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (ONNX function body). */
static wm_status mvn_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    const wm_tensor *X = in[0];
    int r = X->rank, red[WM_MAX_RANK] = {0};
    size_t k;
    const int64_t *ax = wm_attr_ints(n, "axes", &k);
    static const int64_t def[3] = {0, 2, 3};
    if (!ax) ax = def, k = 3;
    for (size_t i = 0; i < k; i++) red[wm_axis(ax[i], r)] = 1;
    /* kept dims index the groups; reduced dims the members */
    int64_t keep_n = 1, red_n = 1;
    for (int i = 0; i < r; i++) *(red[i] ? &red_n : &keep_n) *= X->dims[i];
    if (!keep_n || !red_n) return WM_OK;
    int64_t st[WM_MAX_RANK], s = 1;
    for (int i = r - 1; i >= 0; i--) st[i] = s, s *= X->dims[i];
    for (int64_t g = 0; g < keep_n; g++) {
        int64_t base = 0, rem = g;
        for (int i = r - 1; i >= 0; i--)
            if (!red[i]) base += (rem % X->dims[i]) * st[i], rem /= X->dims[i];
        double s1 = 0, s2 = 0;
        for (int pass = 0; pass < 2; pass++) {
            double mean = s1 / (double)red_n, var = s2 / (double)red_n - mean * mean;
            double den = sqrt(var > 0 ? var : 0) + 1e-9;
            for (int64_t m = 0; m < red_n; m++) {
                int64_t off = base, rm = m;
                for (int i = r - 1; i >= 0; i--)
                    if (red[i]) off += (rm % X->dims[i]) * st[i], rm /= X->dims[i];
                double v = wm_ld(X->dtype, X->data, (uint64_t)off);
                if (!pass) s1 += v, s2 += v * v;
                else wm_st(X->dtype, out[0]->data, (uint64_t)off, (v - mean) / den);
            }
        }
    }
    return WM_OK;
}

/* LRN: y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + ceil((size-1)/2)])^beta */
static wm_status lrn_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    const wm_tensor *X = in[0];
    double alpha = wm_attr_float(n, "alpha", 1e-4f), beta = wm_attr_float(n, "beta", 0.75f), bias = wm_attr_float(n, "bias", 1.0f);
    int64_t size = wm_attr_int(n, "size", 1), N = X->dims[0], C = X->dims[1];
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo, len = 1;
    for (int i = 2; i < X->rank; i++) len *= X->dims[i];
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < len; p++) {
                double sq = 0;
                for (int64_t k = c - lo < 0 ? 0 : c - lo; k <= c + hi && k < C; k++) {
                    double v = wm_ld(X->dtype, X->data, (uint64_t)((b * C + k) * len + p));
                    sq += v * v;
                }
                uint64_t e = (uint64_t)((b * C + c) * len + p);
                wm_st(X->dtype, out[0]->data, e, wm_ld(X->dtype, X->data, e) / pow(bias + alpha / (double)size * sq, beta));
            }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "BatchNormalization", 1, 0, bn_init, bn_infer, bn_run, bn_workspace, WM_OP_INPLACE, 0},
    {"", "InstanceNormalization", 1, 0, gn_init, gn_infer, gn_run, NULL, 0, 0},
    {"", "GroupNormalization", 18, 0, gn_init, gn_infer, gn_run, NULL, 0, 0},
    {"", "LpNormalization", 1, 0, f_init, same_infer, lpn_run, NULL, 0, 0},
    {"", "MeanVarianceNormalization", 9, 0, f_init, same_infer, mvn_run, NULL, 0, 0},
    {"", "LRN", 1, 0, f_init, same_infer, lrn_run, NULL, 0, 0},
};

const wm_op_table wm_ops_norm_nn = {ops, sizeof ops / sizeof ops[0]};
