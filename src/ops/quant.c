/*
 * quant.c - QuantizeLinear, DequantizeLinear (opsets 10..25; com.microsoft's
 * contrib pair, opset 1, alike) and DynamicQuantizeLinear (11).
 *
 * Granularity from the scale's shape: one element = per tensor; 1-D without
 * block_size = per axis (`axis`, default 1); block_size > 0 = blocked along
 * `axis` (the scale has the input's shape with that dim ceil(D / block)).
 * Quantized types: int8, uint8, int16, uint16 (saturating, round half to
 * even) and the float8 types (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz; `saturate`
 * clamps to the largest finite value). Sub-byte types (int4, uint4, int2,
 * uint2, float4e2m1) and float8e8m0 scales are refused at session creation:
 * the engine has no sub-byte tensors. x / scale is computed in the scale's
 * precision (float32; float16/bfloat16 quotients rounded to the scale type
 * when x has that type too, as numpy does); dequantization in float32.
 * Threads take runs of elements that share a scale.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ops/quant.h"
#include "ops/rows.h"

/* ---------------------------------------------------------------- float8 */

typedef struct f8fmt {
    int mbits, bias, uz; /* uz: NaN is 0x80, no negative zero, no inf */
    int has_inf;         /* e5m2: inf is exponent all ones, mantissa 0 */
    uint8_t max_code;    /* largest finite magnitude */
} f8fmt;

static const f8fmt *f8_of(int32_t dt) {
    static const f8fmt e4m3fn = {3, 7, 0, 0, 0x7E}, e4m3fnuz = {3, 8, 1, 0, 0x7F}, e5m2 = {2, 15, 0, 1, 0x7B},
                       e5m2fnuz = {2, 16, 1, 0, 0x7F};
    switch (dt) {
    case WM_DT_FLOAT8E4M3FN: return &e4m3fn;
    case WM_DT_FLOAT8E4M3FNUZ: return &e4m3fnuz;
    case WM_DT_FLOAT8E5M2: return &e5m2;
    case WM_DT_FLOAT8E5M2FNUZ: return &e5m2fnuz;
    default: return NULL;
    }
}

float wm_f8_to_f32(int32_t dt, uint8_t v) {
    const f8fmt *f = f8_of(dt);
    int sign = v >> 7, ebits = 7 - f->mbits;
    int e = (v >> f->mbits) & ((1 << ebits) - 1), m = v & ((1 << f->mbits) - 1);
    if (f->uz && v == 0x80) return NAN;
    if (!f->uz && !f->has_inf && (v & 0x7F) == 0x7F) return NAN;            /* e4m3fn */
    if (f->has_inf && e == (1 << ebits) - 1) return m ? NAN : (sign ? -INFINITY : INFINITY);
    float r = e ? ldexpf((float)((1 << f->mbits) + m), e - f->bias - f->mbits) : ldexpf((float)m, 1 - f->bias - f->mbits);
    return sign ? -r : r;
}

uint8_t wm_f32_to_f8(int32_t dt, float x, int saturate) {
    const f8fmt *f = f8_of(dt);
    uint8_t nan = f->uz ? 0x80 : f->has_inf ? 0x7F : 0x7F;
    if (isnan(x)) return nan;
    int sign = signbit(x) != 0;
    float a = fabsf(x), maxv = wm_f8_to_f32(dt, f->max_code);
    uint8_t s8 = (uint8_t)(sign << 7);
    if (isinf(a) && !saturate) return f->has_inf ? (uint8_t)(s8 | 0x7C) : nan;
    if (saturate && a > maxv) a = maxv;
    uint32_t code;
    if (a == 0) {
        code = 0;
    } else {
        int e;
        frexpf(a, &e); /* a = m 2^e, m in [0.5, 1): exponent of the leading bit is e - 1 */
        int lead = e - 1, emin = 1 - f->bias;
        if (lead < emin) lead = emin;                              /* subnormal: fixed quantum */
        float q = nearbyintf(ldexpf(a, f->mbits - lead));          /* significand in quanta, round half even */
        uint32_t qi = (uint32_t)q;
        if (qi >= (2u << f->mbits)) qi >>= 1, lead++;             /* rounded up to the next binade */
        if (qi < (1u << f->mbits)) code = qi;                      /* subnormal */
        else code = ((uint32_t)(lead + f->bias) << f->mbits) | (qi - (1u << f->mbits));
    }
    if (code > f->max_code) {
        if (saturate) code = f->max_code;
        else return f->has_inf ? (uint8_t)(s8 | 0x7C) : nan;
    }
    if (f->uz && code == 0) return 0;
    return (uint8_t)(s8 | code);
}

int wm_is_f8(int32_t dt) { return f8_of(dt) != NULL; }

/* ---------------------------------------------------------------- granularity */

typedef struct qgrain {
    int64_t outer, len, inner; /* x as (outer, len along axis, inner) */
    int kind;                  /* 0 per tensor, 1 per axis, 2 blocked */
    int64_t block, nblk;
} qgrain;

static const int32_t q_types[] = {WM_DT_INT8, WM_DT_UINT8, WM_DT_INT16, WM_DT_UINT16, WM_DT_FLOAT8E4M3FN,
                                  WM_DT_FLOAT8E4M3FNUZ, WM_DT_FLOAT8E5M2, WM_DT_FLOAT8E5M2FNUZ, 0};
static const int32_t dq_types[] = {WM_DT_INT8, WM_DT_UINT8, WM_DT_INT16, WM_DT_UINT16, WM_DT_INT32, WM_DT_FLOAT8E4M3FN,
                                   WM_DT_FLOAT8E4M3FNUZ, WM_DT_FLOAT8E5M2, WM_DT_FLOAT8E5M2FNUZ, 0};
static const int32_t scale_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, 0};

static int in_list(int32_t dt, const int32_t *l) {
    for (; *l; l++)
        if (*l == dt) return 1;
    return 0;
}

static wm_status grain_of(const wm_node *n, const wm_tensor *x, const wm_tensor *s, const wm_tensor *zp, qgrain *g,
                          wm_error *err) {
    memset(g, 0, sizeof *g);
    int r = x->rank;
    int64_t block = wm_attr_int(n, "block_size", 0);
    if (zp && !(wm_tensor_numel(zp) == 1 && wm_tensor_numel(s) == 1)) { /* a scalar may be [] or [1] */
        if (zp->rank != s->rank) return wm_node_err(n, err, WM_ERR_INPUT, "zero point and scale shapes differ");
        for (int d = 0; d < s->rank; d++)
            if (zp->dims[d] != s->dims[d]) return wm_node_err(n, err, WM_ERR_INPUT, "zero point and scale shapes differ");
    }
    g->outer = 1, g->len = 1, g->inner = wm_tensor_numel(x);
    if (wm_tensor_numel(s) == 1) {
        g->kind = 0;
        return WM_OK;
    }
    int a = wm_axis(wm_attr_int(n, "axis", 1), r);
    if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range for rank %d", r);
    g->outer = 1, g->inner = 1, g->len = x->dims[a];
    for (int d = 0; d < a; d++) g->outer *= x->dims[d];
    for (int d = a + 1; d < r; d++) g->inner *= x->dims[d];
    if (block <= 0) {
        if (s->rank != 1 || s->dims[0] != x->dims[a])
            return wm_node_err(n, err, WM_ERR_INPUT, "per-axis scale must be 1-D of length %lld", (long long)x->dims[a]);
        g->kind = 1;
        return WM_OK;
    }
    g->kind = 2, g->block = block, g->nblk = (x->dims[a] + block - 1) / block;
    if (s->rank != r) return wm_node_err(n, err, WM_ERR_INPUT, "blocked scale must have the input's rank");
    for (int d = 0; d < r; d++)
        if (d == a ? s->dims[d] != g->nblk : s->dims[d] != x->dims[d])
            return wm_node_err(n, err, WM_ERR_INPUT, "blocked scale dim %d is %lld, expected %lld", d, (long long)s->dims[d],
                               (long long)(d == a ? g->nblk : x->dims[d]));
    return WM_OK;
}

/* index of the scale of run (o, l) and its step along inner (0 or 1) */
static int64_t scale_at(const qgrain *g, int64_t o, int64_t l, int64_t *step) {
    switch (g->kind) {
    case 0: *step = 0; return 0;
    case 1: *step = 0; return l;
    default: *step = 1; return (o * g->nblk + l / g->block) * g->inner;
    }
}

/* ---------------------------------------------------------------- QuantizeLinear */

static int32_t q_out_type(const wm_node *n) {
    if (wm_has_in(n, 2)) return n->in_dtype[2];
    int64_t od = wm_attr_int(n, "output_dtype", 0);
    return od ? (int32_t)od : WM_DT_UINT8;
}

static wm_status q_init(wm_node *n, wm_error *err) {
    static const int32_t x_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_INT32, 0};
    static const int32_t qs_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_INT32, 0};
    wm_status st = wm_check_type(n, 0, x_types, err);
    if (!st) st = wm_check_type(n, 1, qs_types, err);
    if (st) return st;
    int32_t ot = q_out_type(n);
    int64_t od = wm_attr_int(n, "output_dtype", 0);
    if (od && wm_has_in(n, 2) && od != n->in_dtype[2])
        return wm_node_err(n, err, WM_ERR_INPUT, "output_dtype %s differs from the zero point type %s",
                           wm_dtype_name((int32_t)od), wm_dtype_name(n->in_dtype[2]));
    if (!in_list(ot, q_types))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "quantized type %s is not supported (%s)", wm_dtype_name(ot),
                           wm_dtype_bits(ot) < 8 ? "the engine has no sub-byte tensors" : "not a quantized type");
    n->out_dtype[0] = ot;
    return WM_OK;
}

static wm_status q_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    qgrain g;
    wm_status st = grain_of(n, in[0], in[1], wm_has_in(n, 2) ? in[2] : NULL, &g, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

typedef struct qctx {
    const wm_node *n;
    qgrain g;
    wm_tensor *const *in;
    wm_tensor *out;
    int saturate, round_scale; /* round_scale: x / s is rounded to the scale type */
    float *ws;                 /* per thread: 2 * 256 floats */
} qctx;

#define QCHUNK 256

static void load_f(const wm_tensor *t, uint64_t off, float *d, int64_t n) {
    if (t->dtype == WM_DT_INT32) {
        for (int64_t i = 0; i < n; i++) d[i] = (float)((const int32_t *)t->data)[off + (uint64_t)i];
    } else {
        wm_row_load(t->dtype, t->data, off, d, n);
    }
}

static void q_store(int32_t ot, void *dst, uint64_t off, const float *v, const int32_t *zp, int64_t zstep, int64_t n,
                    int saturate) {
    for (int64_t i = 0; i < n; i++) {
        if (wm_is_f8(ot)) {
            ((uint8_t *)dst)[off + (uint64_t)i] = wm_f32_to_f8(ot, v[i], saturate);
            continue;
        }
        float r = nearbyintf(v[i]);
        double q = (double)r + (double)zp[i * zstep];
        if (isnan(r)) q = 0;
        switch (ot) {
        case WM_DT_INT8: ((int8_t *)dst)[off + (uint64_t)i] = (int8_t)(q < -128 ? -128 : q > 127 ? 127 : q); break;
        case WM_DT_UINT8: ((uint8_t *)dst)[off + (uint64_t)i] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q); break;
        case WM_DT_INT16: ((int16_t *)dst)[off + (uint64_t)i] = (int16_t)(q < -32768 ? -32768 : q > 32767 ? 32767 : q); break;
        default: ((uint16_t *)dst)[off + (uint64_t)i] = (uint16_t)(q < 0 ? 0 : q > 65535 ? 65535 : q); break;
        }
    }
}

static void q_part(void *arg, int ith, int nth) {
    const qctx *c = arg;
    const qgrain *g = &c->g;
    const wm_tensor *x = c->in[0], *s = c->in[1], *z = wm_has_in(c->n, 2) ? c->in[2] : NULL;
    int32_t ot = c->out->dtype;
    float *xv = c->ws + (size_t)ith * 2 * QCHUNK, *sv = xv + QCHUNK;
    int32_t zv[QCHUNK];
    long lo, hi;
    wm_split((long)(g->outer * g->len), ith, nth, &lo, &hi);
    for (long r = lo; r < hi; r++) {
        int64_t o = r / g->len, l = r % g->len, step;
        int64_t si = scale_at(g, o, l, &step);
        uint64_t base = (uint64_t)((o * g->len + l) * g->inner);
        for (int64_t i0 = 0; i0 < g->inner; i0 += QCHUNK) {
            int64_t k = g->inner - i0 < QCHUNK ? g->inner - i0 : QCHUNK, kn = step ? k : 1;
            load_f(x, base + (uint64_t)i0, xv, k);
            load_f(s, (uint64_t)(si + step * i0), sv, kn);
            for (int64_t j = 0; j < kn; j++) zv[j] = z && !wm_is_f8(ot) ? (int32_t)wm_tensor_get_int(z, (uint64_t)(si + step * i0 + j)) : 0;
            for (int64_t j = 0; j < k; j++) {
                float q = xv[j] / sv[j * step];
                if (c->round_scale == WM_DT_FLOAT16) q = wm_f16_to_f32(wm_f32_to_f16(q));
                else if (c->round_scale == WM_DT_BFLOAT16) q = wm_bf16_to_f32(wm_f32_to_bf16(q));
                xv[j] = q;
            }
            q_store(ot, c->out->data, base + (uint64_t)i0, xv, zv, step, k, c->saturate);
        }
    }
}

static size_t q_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)in, (void)out;
    return (size_t)nth * 2 * QCHUNK * sizeof(float);
}

static int par_threads(wm_exec *x, uint64_t numel, int64_t runs) {
    int nth = numel >= 32768 ? x->nth : 1;
    return nth > runs ? (int)(runs > 0 ? runs : 1) : nth;
}

static wm_status q_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    qctx c = {.n = n, .in = in, .out = out[0], .saturate = wm_attr_int(n, "saturate", 1) != 0, .ws = x->ws};
    wm_status st = grain_of(n, in[0], in[1], wm_has_in(n, 2) ? in[2] : NULL, &c.g, x->err);
    if (st) return st;
    int64_t prec = wm_attr_int(n, "precision", 0);
    int32_t pt = prec ? (int32_t)prec : in[1]->dtype;
    if ((pt == WM_DT_FLOAT16 || pt == WM_DT_BFLOAT16) && (in[0]->dtype == pt || prec)) c.round_scale = pt;
    if (!wm_tensor_numel(in[0])) return WM_OK;
    wm_pool_run(x->pool, q_part, &c, par_threads(x, wm_tensor_numel(in[0]), c.g.outer * c.g.len));
    return WM_OK;
}

/* ---------------------------------------------------------------- DequantizeLinear */

static wm_status dq_init(wm_node *n, wm_error *err) {
    if (!in_list(n->in_dtype[0], dq_types))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "input type %s is not supported%s", wm_dtype_name(n->in_dtype[0]),
                           wm_dtype_bits(n->in_dtype[0]) < 8 ? " (the engine has no sub-byte tensors)" : "");
    wm_status st = wm_check_type(n, 1, scale_types, err);
    if (st) return st;
    if (wm_has_in(n, 2) && n->in_dtype[2] != n->in_dtype[0])
        return wm_node_err(n, err, WM_ERR_INPUT, "zero point type %s differs from the input type %s",
                           wm_dtype_name(n->in_dtype[2]), wm_dtype_name(n->in_dtype[0]));
    int64_t od = wm_attr_int(n, "output_dtype", 0);
    n->out_dtype[0] = od ? (int32_t)od : n->in_dtype[1];
    if (!in_list(n->out_dtype[0], scale_types))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output_dtype %s", wm_dtype_name(n->out_dtype[0]));
    return WM_OK;
}

static void dq_part(void *arg, int ith, int nth) {
    const qctx *c = arg;
    const qgrain *g = &c->g;
    const wm_tensor *x = c->in[0], *s = c->in[1], *z = wm_has_in(c->n, 2) ? c->in[2] : NULL;
    int f8 = wm_is_f8(x->dtype);
    float *yv = c->ws + (size_t)ith * 2 * QCHUNK, *sv = yv + QCHUNK;
    long lo, hi;
    wm_split((long)(g->outer * g->len), ith, nth, &lo, &hi);
    for (long r = lo; r < hi; r++) {
        int64_t o = r / g->len, l = r % g->len, step;
        int64_t si = scale_at(g, o, l, &step);
        uint64_t base = (uint64_t)((o * g->len + l) * g->inner);
        for (int64_t i0 = 0; i0 < g->inner; i0 += QCHUNK) {
            int64_t k = g->inner - i0 < QCHUNK ? g->inner - i0 : QCHUNK;
            load_f(s, (uint64_t)(si + step * i0), sv, step ? k : 1);
            for (int64_t j = 0; j < k; j++) {
                uint64_t xi = base + (uint64_t)(i0 + j), zi = (uint64_t)(si + step * (i0 + j));
                float v;
                if (f8) v = wm_f8_to_f32(x->dtype, ((const uint8_t *)x->data)[xi]);
                else v = (float)((double)wm_tensor_get_int(x, xi) - (z ? (double)wm_tensor_get_int(z, zi) : 0.0));
                yv[j] = v * sv[j * step];
            }
            wm_row_store(c->out->dtype, c->out->data, base + (uint64_t)i0, yv, k);
        }
    }
}

static wm_status dq_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    qctx c = {.n = n, .in = in, .out = out[0], .ws = x->ws};
    wm_status st = grain_of(n, in[0], in[1], wm_has_in(n, 2) ? in[2] : NULL, &c.g, x->err);
    if (st) return st;
    if (!wm_tensor_numel(in[0])) return WM_OK;
    wm_pool_run(x->pool, dq_part, &c, par_threads(x, wm_tensor_numel(in[0]), c.g.outer * c.g.len));
    return WM_OK;
}

/* ---------------------------------------------------------------- DynamicQuantizeLinear */

static wm_status dyn_init(wm_node *n, wm_error *err) {
    static const int32_t f32[] = {WM_DT_FLOAT, 0};
    n->out_dtype[0] = WM_DT_UINT8;
    if (n->n_out > 1) n->out_dtype[1] = WM_DT_FLOAT;
    if (n->n_out > 2) n->out_dtype[2] = WM_DT_UINT8;
    return wm_check_type(n, 0, f32, err);
}

static wm_status dyn_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)err;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    for (int k = 1; k < n->n_out && k < 3; k++)
        if (out[k]) out[k]->rank = 0;
    return WM_OK;
}

static wm_status dyn_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    float scale;
    uint8_t zp;
    wm_dyn_quantize_u8(in[0]->data, wm_tensor_numel(in[0]), out[0]->data, &scale, &zp);
    if (n->n_out > 1 && out[1]) *(float *)out[1]->data = scale;
    if (n->n_out > 2 && out[2]) *(uint8_t *)out[2]->data = zp;
    return WM_OK;
}

void wm_dyn_quantize_u8(const float *v, uint64_t cnt, uint8_t *y, float *scale_out, uint8_t *zp_out) {
    float mx = 0, mn = 0;
    const int avx2 = wm_kernels_get()->isa >= 1; /* the AVX2 table or one built on it: quant_avx2.c, same bytes */
    if (avx2) wm_dyn_range_avx2(v, cnt, &mn, &mx);
    else
        for (uint64_t i = 0; i < cnt; i++) {
            if (v[i] > mx) mx = v[i];
            if (v[i] < mn) mn = v[i];
        }
    float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
    float izp = 0.0f - mn / scale;
    float zp = isnan(izp) ? 0.0f : nearbyintf(izp < 0 ? 0 : izp > 255 ? 255 : izp); /* NaN: infinite inputs */
    for (uint64_t i = avx2 ? wm_dyn_quantize_avx2(v, cnt, y, scale, zp) : 0; i < cnt; i++) {
        float q = nearbyintf(v[i] / scale) + zp;
        if (isnan(q)) q = zp; /* NaN input: the zero point */
        y[i] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
    }
    *scale_out = scale;
    *zp_out = (uint8_t)zp;
}

static const wm_op ops[] = {
    {"", "QuantizeLinear", 10, 0, q_init, q_infer, q_run, q_workspace, 0, 0},
    {"", "DequantizeLinear", 10, 0, dq_init, q_infer, dq_run, q_workspace, 0, 0},
    {"", "DynamicQuantizeLinear", 11, 0, dyn_init, dyn_infer, dyn_run, NULL, 0, 0},
    /* onnxruntime's contrib Q/DQ: the same arithmetic (axis default 1), 16-bit types below opset 21, which the
       static quantizer writes for w8a16 at opset < 21 */
    {"com.microsoft", "QuantizeLinear", 1, 0, q_init, q_infer, q_run, q_workspace, 0, 0},
    {"com.microsoft", "DequantizeLinear", 1, 0, dq_init, q_infer, dq_run, q_workspace, 0, 0},
};

const wm_op_table wm_ops_quant = {ops, sizeof ops / sizeof ops[0]};
