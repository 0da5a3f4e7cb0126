/*
 * softmax.c - Softmax, LogSoftmax, Hardmax. Opsets before 13 flatten the
 * input to 2-D at `axis` (default 1) and normalize each row; from 13 one
 * axis (default -1) is normalized. Rows compute in float32 (float64 in
 * double; float16 / bfloat16 rows converted whole, a Softmax by the float32
 * rows' vector kernel); threads take whole rows.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ops/rows.h"

enum { SM_SOFTMAX, SM_LOG, SM_HARD };

static wm_status sm_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    return wm_check_type(n, 0, wm_types_float, err);
}

static wm_status sm_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank;
    int64_t axis = wm_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
    if (axis < -r || axis >= (r ? r : 1)) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld out of range", (long long)axis);
    wm_set_shape(out[0], r, in[0]->dims);
    return WM_OK;
}

typedef struct sm_ctx {
    int kind;
    int32_t dt;
    const void *src;
    void *dst;
    uint64_t outer, len, inner; /* rows = outer * inner, each len long with stride inner */
    float *ws;                  /* per thread: len floats */
} sm_ctx;

static void sm_row_f32(int kind, float *v, uint64_t len) {
    float m = -INFINITY;
    for (uint64_t i = 0; i < len; i++) m = v[i] > m ? v[i] : m;
    if (kind == SM_HARD) {
        uint64_t best = 0;
        for (uint64_t i = 0; i < len; i++)
            if (v[i] == m) { best = i; break; }
        for (uint64_t i = 0; i < len; i++) v[i] = i == best ? 1.0f : 0.0f;
        return;
    }
    if (isinf(m) && m < 0) { /* every value -inf */
        for (uint64_t i = 0; i < len; i++) v[i] = kind == SM_LOG ? -INFINITY : NAN;
        return;
    }
    double sum = 0;
    if (kind == SM_LOG) {
        for (uint64_t i = 0; i < len; i++) sum += exp((double)(v[i] - m));
        float ls = (float)log(sum);
        for (uint64_t i = 0; i < len; i++) v[i] = v[i] - m - ls;
        return;
    }
    for (uint64_t i = 0; i < len; i++) {
        v[i] = expf(v[i] - m);
        sum += v[i];
    }
    float inv = (float)(1.0 / sum);
    for (uint64_t i = 0; i < len; i++) v[i] *= inv;
}

static void sm_part(void *arg, int ith, int nth) {
    const sm_ctx *c = arg;
    uint64_t rows = c->outer * c->inner;
    long lo, hi;
    wm_split((long)rows, ith, nth, &lo, &hi);
    float *buf = c->ws + (size_t)ith * c->len;
    for (long r = lo; r < hi; r++) {
        uint64_t o = (uint64_t)r / c->inner, i = (uint64_t)r % c->inner, base = o * c->len * c->inner + i;
        if (c->inner == 1 && c->dt == WM_DT_FLOAT) {
            float *d = (float *)c->dst + base;
            const float *sp = (const float *)c->src + base;
            if (c->kind == SM_SOFTMAX) {
                wm_kernels_get()->softmax_row((int64_t)c->len, d, sp, 1.0f, NULL);
                continue;
            }
            if (sp != d) memcpy(d, sp, c->len * 4);
            sm_row_f32(c->kind, d, c->len);
            continue;
        }
        if (c->dt == WM_DT_DOUBLE) { /* double rows keep double precision */
            const double *s = c->src;
            double *d = c->dst, m = -INFINITY, sum = 0;
            for (uint64_t k = 0; k < c->len; k++) m = fmax(m, s[base + k * c->inner]);
            if (c->kind == SM_HARD) {
                uint64_t best = 0;
                for (uint64_t k = 0; k < c->len; k++)
                    if (s[base + k * c->inner] == m) { best = k; break; }
                for (uint64_t k = 0; k < c->len; k++) d[base + k * c->inner] = k == best;
                continue;
            }
            for (uint64_t k = 0; k < c->len; k++) sum += exp(s[base + k * c->inner] - m);
            for (uint64_t k = 0; k < c->len; k++) {
                double v = s[base + k * c->inner] - m;
                d[base + k * c->inner] = c->kind == SM_LOG ? v - log(sum) : exp(v) / sum;
            }
            continue;
        }
        if (c->inner == 1) { /* a contiguous half row: converted whole, then the float32 rows' kernel */
            wm_row_load(c->dt, c->src, base, buf, (int64_t)c->len);
            if (c->kind == SM_SOFTMAX) wm_kernels_get()->softmax_row((int64_t)c->len, buf, buf, 1.0f, NULL);
            else sm_row_f32(c->kind, buf, c->len);
            wm_row_store(c->dt, c->dst, base, buf, (int64_t)c->len);
            continue;
        }
        for (uint64_t k = 0; k < c->len; k++) wm_row_load(c->dt, c->src, base + k * c->inner, buf + k, 1);
        sm_row_f32(c->kind, buf, c->len);
        for (uint64_t k = 0; k < c->len; k++) wm_row_store(c->dt, c->dst, base + k * c->inner, buf + k, 1);
    }
}

static void sm_dims(const wm_node *n, const wm_tensor *t, uint64_t *outer, uint64_t *len, uint64_t *inner) {
    int r = t->rank;
    int64_t axis = wm_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += r;
    *outer = *len = *inner = 1;
    for (int d = 0; d < r; d++) {
        if (d < axis) *outer *= (uint64_t)t->dims[d];
        else if (d == axis || n->opset < 13) *len *= (uint64_t)t->dims[d];
        else *inner *= (uint64_t)t->dims[d];
    }
}

static size_t sm_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    uint64_t o, l, i;
    sm_dims(n, in[0], &o, &l, &i);
    return (size_t)nth * (size_t)l * sizeof(float);
}

static wm_status sm_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const char *name = n->proto->op_type;
    sm_ctx c = {.kind = !strcmp(name, "LogSoftmax") ? SM_LOG : !strcmp(name, "Hardmax") ? SM_HARD : SM_SOFTMAX,
                .dt = in[0]->dtype, .src = in[0]->data, .dst = out[0]->data, .ws = x->ws};
    sm_dims(n, in[0], &c.outer, &c.len, &c.inner);
    uint64_t rows = c.outer * c.inner;
    if (!rows || !c.len) return WM_OK;
    int nth = rows * c.len >= 16384 ? x->nth : 1;
    if ((uint64_t)nth > rows) nth = (int)rows;
    wm_pool_run(x->pool, sm_part, &c, nth);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "Softmax", 1, 0, sm_init, sm_infer, sm_run, sm_workspace, WM_OP_INPLACE, 0},
    {"", "LogSoftmax", 1, 0, sm_init, sm_infer, sm_run, sm_workspace, WM_OP_INPLACE, 0},
    {"", "Hardmax", 1, 0, sm_init, sm_infer, sm_run, sm_workspace, 0, 0},
};

const wm_op_table wm_ops_nn = {ops, sizeof ops / sizeof ops[0]};
