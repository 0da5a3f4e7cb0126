/*
 * elementwise.c - unary math and activations, binary arithmetic,
 * comparisons and logic with broadcasting, Where, Cast, Clip.
 *
 * Float ops compute float32 and float64 natively (tgmath picks the
 * precision) and float16 / bfloat16 through float32 in short chunks.
 * Integer arithmetic is generated per integer type by macro.
 */
#include <math.h>
#include <string.h>
#include <tgmath.h>

/* the per-type loops below compare unsigned values with 0 too */
#pragma GCC diagnostic ignored "-Wtype-limits"

#include "kernels/kernels.h"
#include "ops/bcast.h"
#include "ops/cast_narrow.h"
#include "ops/int_math.h"
#include "ops/op.h"

#define CHUNK 256

/* ================================================================ unary float ops */

typedef struct uparams {
    float alpha, beta, gamma;
    int approx; /* Gelu: tanh form */
} uparams;

#define UNARY_FLOAT_OPS(X)                                                                              \
    X(Exp, exp(x))                                                                                      \
    X(Log, log(x))                                                                                      \
    X(Sqrt, sqrt(x))                                                                                    \
    X(Reciprocal, (T)1 / x)                                                                             \
    X(Sin, sin(x))                                                                                      \
    X(Cos, cos(x))                                                                                      \
    X(Tan, tan(x))                                                                                      \
    X(Asin, asin(x))                                                                                    \
    X(Acos, acos(x))                                                                                    \
    X(Atan, atan(x))                                                                                    \
    X(Sinh, sinh(x))                                                                                    \
    X(Cosh, cosh(x))                                                                                    \
    X(Asinh, asinh(x))                                                                                  \
    X(Acosh, acosh(x))                                                                                  \
    X(Atanh, atanh(x))                                                                                  \
    X(Erf, erf(x))                                                                                      \
    X(Tanh, tanh(x))                                                                                    \
    X(Sigmoid, x >= 0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x)))                             \
    X(Softplus, x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))                                             \
    X(Softsign, x / ((T)1 + fabs(x)))                                                                   \
    X(Floor, floor(x))                                                                                  \
    X(Ceil, ceil(x))                                                                                    \
    X(Round, nearbyint(x))                                                                              \
    X(Elu, x >= 0 ? x : (T)p->alpha * (exp(x) - (T)1))                                                  \
    X(Celu, (x > 0 ? x : (T)0) + fmin((T)0, (T)p->alpha * (exp(x / (T)p->alpha) - (T)1)))               \
    X(Selu, (T)p->gamma * (x > 0 ? x : (T)p->alpha * (exp(x) - (T)1)))                                  \
    X(LeakyRelu, x >= 0 ? x : (T)p->alpha * x)                                                          \
    X(ThresholdedRelu, x > (T)p->alpha ? x : (T)0)                                                      \
    X(HardSigmoid, fmax((T)0, fmin((T)1, (T)p->alpha * x + (T)p->beta)))                                \
    X(HardSwish, x * fmax((T)0, fmin((T)1, x / (T)6 + (T)0.5)))                                         \
    X(Mish, x * tanh(x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))))                                       \
    X(Gelu, p->approx ? (T)0.5 * x * ((T)1 + tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x))) \
                      : (T)0.5 * x * ((T)1 + erf(x * (T)0.7071067811865476)))                         \
    X(QuickGelu, x / ((T)1 + exp(-(T)p->alpha * x)))                                                    \
    X(FastGelu, (T)0.5 * x * ((T)1 + tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x))))

enum {
#define X(name, expr) UOP_##name,
    UNARY_FLOAT_OPS(X)
#undef X
    UOP_COUNT
};

#define X(name, expr)                                                                          \
    static void u_##name##_f32(const float *in, float *out, int64_t n, const uparams *p) {     \
        typedef float T;                                                                       \
        (void)p;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T x = in[i];                                                                       \
            out[i] = expr;                                                                     \
        }                                                                                      \
    }                                                                                          \
    static void u_##name##_f64(const double *in, double *out, int64_t n, const uparams *p) {   \
        typedef double T;                                                                      \
        (void)p;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T x = in[i];                                                                       \
            out[i] = expr;                                                                     \
        }                                                                                      \
    }
UNARY_FLOAT_OPS(X)
#undef X

typedef void (*ufn32)(const float *, float *, int64_t, const uparams *);
typedef void (*ufn64)(const double *, double *, int64_t, const uparams *);
static const ufn32 ufns32[] = {
#define X(name, expr) u_##name##_f32,
    UNARY_FLOAT_OPS(X)
#undef X
};
static const ufn64 ufns64[] = {
#define X(name, expr) u_##name##_f64,
    UNARY_FLOAT_OPS(X)
#undef X
};
static const char *const unames[] = {
#define X(name, expr) #name,
    UNARY_FLOAT_OPS(X)
#undef X
};

typedef struct ustate {
    int op;
    uparams p;
} ustate;

/* float16 / bfloat16 arrays through float32 in chunks */
static void load_f32(int32_t dt, const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    if (dt == WM_DT_FLOAT16)
        wm_kernels_get()->f16_to_f32(n, dst, s);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = wm_bf16_to_f32(s[i]);
}
static void store_f32(int32_t dt, const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    if (dt == WM_DT_FLOAT16)
        wm_kernels_get()->f32_to_f16(n, d, src);
    else
        for (int64_t i = 0; i < n; i++) d[i] = wm_f32_to_bf16(src[i]);
}

typedef struct uctx {
    const ustate *s;
    int32_t dt;
    const void *in;
    void *out;
    int64_t n;
} uctx;

/* y = op(x) on n floats: the table's vector kernels for the hot activations, else the scalar functions */
static void unary_f32(const ustate *s, const float *x, float *y, long n) {
    const uparams *p = &s->p;
    const wm_kernels *k = wm_kernels_get();
    switch (s->op) {
    case UOP_Exp: k->vexp(n, y, x); break;
    case UOP_Tanh: k->vtanh(n, y, x); break;
    case UOP_Erf: k->verf(n, y, x); break;
    case UOP_Sigmoid: k->vsigmoid(n, y, x); break;
    case UOP_Gelu: (p->approx ? k->vgelu_tanh : k->vgelu_erf)(n, y, x); break;
    case UOP_FastGelu: k->vgelu_tanh(n, y, x); break;
    case UOP_QuickGelu: /* x * sigmoid(alpha x): SiLU when alpha is 1 (how fused SwiGLU MLPs use it) */
        if (p->alpha == 1.0f) {
            k->vsilu(n, y, x);
            break;
        }
        k->vact(n, y, x, WM_ACT_QUICK_GELU, (float)p->alpha, 0.0f);
        break;
    default: ufns32[s->op](x, y, n, p); break;
    }
}

static void unary_part(void *arg, int ith, int nth) {
    const uctx *c = arg;
    long lo, hi;
    wm_split((long)c->n, ith, nth, &lo, &hi);
    switch (c->dt) {
    case WM_DT_FLOAT: unary_f32(c->s, (const float *)c->in + lo, (float *)c->out + lo, hi - lo); break;
    case WM_DT_DOUBLE: ufns64[c->s->op]((const double *)c->in + lo, (double *)c->out + lo, hi - lo, &c->s->p); break;
    default: { /* half types: computed in float32, a chunk at a time */
        float buf[CHUNK];
        for (long i = lo; i < hi; i += CHUNK) {
            int64_t k = hi - i < CHUNK ? hi - i : CHUNK;
            load_f32(c->dt, (const uint16_t *)c->in + i, buf, k);
            unary_f32(c->s, buf, buf, (long)k);
            store_f32(c->dt, buf, (uint16_t *)c->out + i, k);
        }
    }
    }
}

static int par_threads(const wm_exec *x, uint64_t n, uint64_t grain) { return n >= grain ? x->nth : 1; }

static wm_status unary_float_init(wm_node *n, wm_error *err) {
    const char *name = n->proto->op_type;
    ustate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->op = -1;
    for (int i = 0; i < UOP_COUNT; i++)
        if (!strcmp(unames[i], name)) s->op = i;
    if (s->op < 0) return wm_node_err(n, err, WM_ERR_INTERNAL, "no kernel");
    s->p.alpha = wm_attr_float(n, "alpha", !strcmp(name, "Selu") ? 1.67326319217681884765625f
                                           : !strcmp(name, "LeakyRelu") ? 0.01f
                                           : !strcmp(name, "HardSigmoid") ? 0.2f
                                           : !strcmp(name, "QuickGelu") ? 1.702f : 1.0f);
    s->p.beta = wm_attr_float(n, "beta", 0.5f);
    s->p.gamma = wm_attr_float(n, "gamma", 1.05070102214813232421875f);
    char buf[16];
    s->p.approx = !strcmp(wm_attr_string(n, "approximate", "none", buf, sizeof buf), "tanh");
    n->state = s;
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (st) return st;
    if (!strcmp(name, "FastGelu") && wm_has_in(n, 1)) { /* FastGelu(X, bias): handled as bias + gelu below */
        if ((st = wm_check_same_type(n, 0, 1, err))) return st;
    }
    n->out_dtype[0] = n->in_dtype[0];
    return WM_OK;
}

static wm_status same_shape_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)n, (void)err;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static wm_status unary_float_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const ustate *s = n->state;
    uint64_t cnt = wm_tensor_numel(out[0]);
    const void *src = in[0]->data;
    if (n->n_in > 1 && wm_has_in(n, 1)) { /* FastGelu bias: out = x + bias first (bias broadcast over rows) */
        uint64_t nb = wm_tensor_numel(in[1]);
        if (nb == 0 || cnt % nb) return wm_node_err(n, x->err, WM_ERR_INPUT, "bias size does not divide the input");
        for (uint64_t i = 0; i < cnt; i++) {
            double v = wm_tensor_get_f64(in[0], i) + wm_tensor_get_f64(in[1], i % nb);
            switch (in[0]->dtype) {
            case WM_DT_FLOAT: ((float *)out[0]->data)[i] = (float)v; break;
            case WM_DT_DOUBLE: ((double *)out[0]->data)[i] = v; break;
            case WM_DT_FLOAT16: ((uint16_t *)out[0]->data)[i] = wm_f32_to_f16((float)v); break;
            default: ((uint16_t *)out[0]->data)[i] = wm_f32_to_bf16((float)v); break;
            }
        }
        src = out[0]->data;
    }
    uctx c = {s, in[0]->dtype, src, out[0]->data, (int64_t)cnt};
    wm_pool_run(x->pool, unary_part, &c, par_threads(x, cnt, 16384));
    return WM_OK;
}

/* ================================================================ unary numeric ops (float and integer) */

enum { NOP_ABS, NOP_NEG, NOP_SIGN, NOP_RELU, NOP_IDENTITY, NOP_NOT, NOP_ISNAN, NOP_ISINF, NOP_BITNOT };

typedef struct nstate {
    int op;
    int detect_pos, detect_neg;
    int dropout; /* Dropout: input 2 is training_mode */
} nstate;

/* Abs and Neg wrap (Abs(MIN) = Neg(MIN) = MIN): ops/int_math.h */
#define INT_UNARY(T, suffix)                                                                            \
    static void nu_##suffix(int op, const T *a, T *o, int64_t n) {                                      \
        switch (op) {                                                                                   \
        case NOP_ABS: for (int64_t i = 0; i < n; i++) o[i] = a[i] < 0 ? (T)wm_i64_abs(a[i]) : a[i]; break; \
        case NOP_NEG: for (int64_t i = 0; i < n; i++) o[i] = (T)wm_i64_neg((int64_t)a[i]); break;         \
        case NOP_SIGN: for (int64_t i = 0; i < n; i++) o[i] = (T)((a[i] > 0) - (a[i] < 0)); break;       \
        case NOP_RELU: for (int64_t i = 0; i < n; i++) o[i] = a[i] > 0 ? a[i] : (T)0; break;             \
        case NOP_BITNOT: for (int64_t i = 0; i < n; i++) o[i] = (T)~a[i]; break;                         \
        default: break;                                                                                 \
        }                                                                                               \
    }
INT_UNARY(int8_t, i8)
INT_UNARY(uint8_t, u8)
INT_UNARY(int16_t, i16)
INT_UNARY(uint16_t, u16)
INT_UNARY(int32_t, i32)
INT_UNARY(uint32_t, u32)
INT_UNARY(int64_t, i64)
INT_UNARY(uint64_t, u64)
#undef INT_UNARY

typedef struct relu_ctx {
    const float *a;
    float *o;
    int64_t n;
} relu_ctx;

static void relu_part(void *arg, int ith, int nth) {
    const relu_ctx *c = arg;
    long lo, hi;
    wm_split((long)c->n, ith, nth, &lo, &hi);
    if (hi > lo) wm_kernels_get()->vact(hi - lo, c->o + lo, c->a + lo, WM_ACT_RELU, 0, 0);
}

static void float_unary_numeric(int op, double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double a = v[i];
        switch (op) {
        case NOP_ABS: v[i] = fabs(a); break;
        case NOP_NEG: v[i] = -a; break;
        case NOP_SIGN: v[i] = isnan(a) ? a : (double)((a > 0) - (a < 0)); break;
        case NOP_RELU: v[i] = a > 0 ? a : 0.0; break;
        default: break;
        }
    }
}

static wm_status numeric_unary_init(wm_node *n, wm_error *err) {
    static const struct { const char *name; int op; } ops[] = {
        {"Abs", NOP_ABS},   {"Neg", NOP_NEG},     {"Sign", NOP_SIGN},   {"Relu", NOP_RELU},         {"Identity", NOP_IDENTITY},
        {"Not", NOP_NOT},   {"IsNaN", NOP_ISNAN}, {"IsInf", NOP_ISINF}, {"BitwiseNot", NOP_BITNOT}, {"Dropout", NOP_IDENTITY},
    };
    nstate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i].name, n->proto->op_type)) s->op = ops[i].op;
    s->detect_pos = (int)wm_attr_int(n, "detect_positive", 1);
    s->detect_neg = (int)wm_attr_int(n, "detect_negative", 1);
    n->state = s;
    wm_status st;
    switch (s->op) {
    case NOP_IDENTITY: st = wm_check_type(n, 0, wm_types_all, err); break;
    case NOP_NOT: {
        static const int32_t b[] = {WM_DT_BOOL, 0};
        st = wm_check_type(n, 0, b, err);
        break;
    }
    case NOP_ISNAN: case NOP_ISINF: st = wm_check_type(n, 0, wm_types_float, err); break;
    case NOP_BITNOT: st = wm_check_type(n, 0, wm_types_int, err); break;
    default: st = wm_check_type(n, 0, wm_types_numeric, err); break;
    }
    if (st) return st;
    n->out_dtype[0] = (s->op == NOP_ISNAN || s->op == NOP_ISINF) ? WM_DT_BOOL : n->in_dtype[0];
    if (!strcmp(n->proto->op_type, "Dropout")) {
        s->dropout = 1;
        if (n->n_out > 1) n->out_dtype[1] = WM_DT_BOOL;
        /* inference only: training_mode (input 2, opset 12+) must be false */
        if (wm_has_in(n, 2) && n->in_const[2] && wm_tensor_numel(n->in_const[2]) && wm_tensor_get_int(n->in_const[2], 0))
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "training_mode = true (random dropout) is not supported");
    }
    return WM_OK;
}

static wm_status dropout_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    same_shape_infer(n, in, out, err);
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static wm_status numeric_unary_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const nstate *s = n->state;
    int64_t cnt = (int64_t)wm_tensor_numel(out[0]);
    const void *a = in[0]->data;
    void *o = out[0]->data;
    if (s->dropout && wm_has_in(n, 2) && wm_tensor_numel(in[2]) && wm_tensor_get_int(in[2], 0))
        return wm_node_err(n, x->err, WM_ERR_UNSUPPORTED, "training_mode = true (random dropout) is not supported");
    if (s->dropout && n->n_out > 1 && out[1]) memset(out[1]->data, 1, (size_t)cnt); /* Dropout mask: all kept */
    if (s->op == NOP_IDENTITY) {
        if (o != a) memcpy(o, a, (size_t)wm_tensor_nbytes(out[0]));
        return WM_OK;
    }
    if (s->op == NOP_NOT) {
        for (int64_t i = 0; i < cnt; i++) ((uint8_t *)o)[i] = !((const uint8_t *)a)[i];
        return WM_OK;
    }
    if (s->op == NOP_ISNAN && in[0]->dtype == WM_DT_FLOAT) {
        const float *f = a;
        for (int64_t i = 0; i < cnt; i++) ((uint8_t *)o)[i] = f[i] != f[i];
        return WM_OK;
    }
    if (s->op == NOP_ISNAN || s->op == NOP_ISINF) {
        for (int64_t i = 0; i < cnt; i++) {
            double v = wm_tensor_get_f64(in[0], (uint64_t)i);
            ((uint8_t *)o)[i] = s->op == NOP_ISNAN ? isnan(v) != 0
                                                   : (isinf(v) && ((v > 0 && s->detect_pos) || (v < 0 && s->detect_neg)));
        }
        return WM_OK;
    }
    switch (in[0]->dtype) {
    case WM_DT_INT8: nu_i8(s->op, a, o, cnt); return WM_OK;
    case WM_DT_UINT8: nu_u8(s->op, a, o, cnt); return WM_OK;
    case WM_DT_INT16: nu_i16(s->op, a, o, cnt); return WM_OK;
    case WM_DT_UINT16: nu_u16(s->op, a, o, cnt); return WM_OK;
    case WM_DT_INT32: nu_i32(s->op, a, o, cnt); return WM_OK;
    case WM_DT_UINT32: nu_u32(s->op, a, o, cnt); return WM_OK;
    case WM_DT_INT64: nu_i64(s->op, a, o, cnt); return WM_OK;
    case WM_DT_UINT64: nu_u64(s->op, a, o, cnt); return WM_OK;
    case WM_DT_FLOAT:
        if (s->op == NOP_RELU) { /* the table's vector activation (y may equal x); NaN gives 0 as below */
            relu_ctx rc = {a, o, cnt};
            wm_pool_run(x->pool, relu_part, &rc, cnt >= 65536 ? x->nth : 1);
            return WM_OK;
        }
        for (int64_t i = 0; i < cnt; i++) {
            float v = ((const float *)a)[i];
            switch (s->op) {
            case NOP_ABS: v = fabsf(v); break;
            case NOP_NEG: v = -v; break;
            case NOP_SIGN: v = isnan(v) ? v : (float)((v > 0) - (v < 0)); break;
            case NOP_RELU: v = v > 0 ? v : 0.0f; break;
            default: break;
            }
            ((float *)o)[i] = v;
        }
        return WM_OK;
    case WM_DT_DOUBLE: memmove(o, a, (size_t)cnt * 8); float_unary_numeric(s->op, o, cnt); return WM_OK;
    default: { /* float16 / bfloat16 */
        double buf[CHUNK];
        float fb[CHUNK];
        for (int64_t i = 0; i < cnt; i += CHUNK) {
            int64_t k = cnt - i < CHUNK ? cnt - i : CHUNK;
            load_f32(in[0]->dtype, (const uint16_t *)a + i, fb, k);
            for (int64_t j = 0; j < k; j++) buf[j] = fb[j];
            float_unary_numeric(s->op, buf, k);
            for (int64_t j = 0; j < k; j++) fb[j] = (float)buf[j];
            store_f32(in[0]->dtype, fb, (uint16_t *)o + i, k);
        }
        return WM_OK;
    }
    }
}

/* ================================================================ binary ops with broadcasting */

enum {
    BOP_ADD, BOP_SUB, BOP_MUL, BOP_DIV, BOP_POW, BOP_MOD, BOP_FMOD, BOP_MAX, BOP_MIN, BOP_PRELU,
    BOP_EQ, BOP_LT, BOP_GT, BOP_LE, BOP_GE, BOP_AND, BOP_OR, BOP_XOR,
    BOP_BAND, BOP_BOR, BOP_BXOR, BOP_SHL, BOP_SHR
};

typedef struct bstate {
    int op;
    int cmp; /* output is bool */
} bstate;

static inline double fmod_py(double a, double b) {
    double r = fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

/* float32: the hot path */
static void bin_f32(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n) {
    int op = ((const bstate *)ctx)->op;
    const float *a = in[0], *b = in[1];
    int64_t sa = step[0], sb = step[1];
    if (((const bstate *)ctx)->cmp) {
        uint8_t *o = out;
        for (int64_t i = 0; i < n; i++) {
            float x = a[i * sa], y = b[i * sb];
            o[i] = op == BOP_EQ ? x == y : op == BOP_LT ? x < y : op == BOP_GT ? x > y : op == BOP_LE ? x <= y : x >= y;
        }
        return;
    }
    float *o = out;
    if (sa && sb && op <= BOP_DIV) { /* both contiguous: vectorized kernels */
        const wm_kernels *k = wm_kernels_get();
        (op == BOP_ADD ? k->add : op == BOP_SUB ? k->sub : op == BOP_MUL ? k->mul : k->div)(n, o, a, b);
        return;
    }
#define LOOP(expr)                                                                   \
    if (sa && sb)                                                                    \
        for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[i]; o[i] = expr; }   \
    else if (sa)                                                                     \
        for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[0]; o[i] = expr; }   \
    else if (sb)                                                                     \
        for (int64_t i = 0; i < n; i++) { float x = a[0], y = b[i]; o[i] = expr; }   \
    else                                                                             \
        for (int64_t i = 0; i < n; i++) { float x = a[0], y = b[0]; o[i] = expr; }
    switch (op) {
    case BOP_ADD: LOOP(x + y); break;
    case BOP_SUB: LOOP(x - y); break;
    case BOP_MUL: LOOP(x * y); break;
    case BOP_DIV: LOOP(x / y); break;
    case BOP_POW:
        if (sa && !sb && (b[0] == 2.0f || b[0] == 3.0f)) { /* a constant square or cube (gelu_new's x^3): products,
                                                              which vectorize; within an ulp of powf as in onnxruntime */
            if (b[0] == 2.0f)
                for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i];
            else
                for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i] * a[i];
            break;
        }
        LOOP(y == 2.0f ? x * x : y == 0.5f ? sqrtf(x) : powf(x, y));
        break;
    case BOP_MOD: LOOP((float)fmod_py(x, y)); break;
    case BOP_FMOD: LOOP(fmodf(x, y)); break;
    case BOP_MAX: LOOP(isnan(x) || isnan(y) ? NAN : (x > y ? x : y)); break;
    case BOP_MIN: LOOP(isnan(x) || isnan(y) ? NAN : (x < y ? x : y)); break;
    case BOP_PRELU: LOOP(x < 0 ? x * y : x); break;
    default: break;
    }
#undef LOOP
}

/* other float types through double (float64 exact; float16/bfloat16 rounded once on store) */
typedef struct fctx {
    const bstate *s;
    int32_t ta, tb, to;
} fctx;

static double bin_f64_one(int op, double x, double y) {
    switch (op) {
    case BOP_ADD: return x + y;
    case BOP_SUB: return x - y;
    case BOP_MUL: return x * y;
    case BOP_DIV: return x / y;
    case BOP_POW: return pow(x, y);
    case BOP_MOD: return fmod_py(x, y);
    case BOP_FMOD: return fmod(x, y);
    case BOP_MAX: return isnan(x) || isnan(y) ? NAN : (x > y ? x : y);
    case BOP_MIN: return isnan(x) || isnan(y) ? NAN : (x < y ? x : y);
    case BOP_PRELU: return x < 0 ? x * y : x;
    case BOP_EQ: return x == y;
    case BOP_LT: return x < y;
    case BOP_GT: return x > y;
    case BOP_LE: return x <= y;
    case BOP_GE: return x >= y;
    default: return 0;
    }
}

static double load_f(int32_t dt, const void *p, int64_t i) {
    switch (dt) {
    case WM_DT_FLOAT: return ((const float *)p)[i];
    case WM_DT_DOUBLE: return ((const double *)p)[i];
    case WM_DT_FLOAT16: return wm_f16_to_f32(((const uint16_t *)p)[i]);
    case WM_DT_BFLOAT16: return wm_bf16_to_f32(((const uint16_t *)p)[i]);
    case WM_DT_INT8: return ((const int8_t *)p)[i];
    case WM_DT_UINT8: return ((const uint8_t *)p)[i];
    case WM_DT_INT16: return ((const int16_t *)p)[i];
    case WM_DT_UINT16: return ((const uint16_t *)p)[i];
    case WM_DT_INT32: return ((const int32_t *)p)[i];
    case WM_DT_UINT32: return ((const uint32_t *)p)[i];
    case WM_DT_INT64: return (double)((const int64_t *)p)[i];
    case WM_DT_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

static void store_f(int32_t dt, void *p, int64_t i, double v) {
    switch (dt) {
    case WM_DT_FLOAT: ((float *)p)[i] = (float)v; break;
    case WM_DT_DOUBLE: ((double *)p)[i] = v; break;
    case WM_DT_FLOAT16: ((uint16_t *)p)[i] = wm_f32_to_f16((float)v); break;
    case WM_DT_BFLOAT16: ((uint16_t *)p)[i] = wm_f32_to_bf16((float)v); break;
    case WM_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

static void bin_fgen(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n) {
    const fctx *c = ctx;
    int op = c->s->op;
    if (c->ta == WM_DT_FLOAT16 && c->tb == WM_DT_FLOAT16 && c->to == WM_DT_FLOAT16 && !c->s->cmp &&
        (op == BOP_ADD || op == BOP_SUB || op == BOP_MUL || op == BOP_DIV ||
         (op == BOP_POW && !step[1] && wm_f16_to_f32(((const uint16_t *)in[1])[0]) == 2.0f)) &&
        step[0] <= 1 && step[1] <= 1) {
        /* float16 + - * and x^2: exact in float32 for half inputs (products exactly, sums to within float32's
         * rounding, far below half's), so widening, the float32 kernel and one rounding give the same halves;
         * division is float32's quotient rounded to half, as onnxruntime computes it */
        float xa[256], xb[256], xo[256];
        const uint16_t *a = in[0], *b = in[1];
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
            int64_t m = n - i0 < 256 ? n - i0 : 256;
            if (step[0]) wm_convert(WM_DT_FLOAT16, a + i0, WM_DT_FLOAT, xa, (uint64_t)m);
            else xa[0] = wm_f16_to_f32(a[0]);
            if (step[1]) wm_convert(WM_DT_FLOAT16, b + i0, WM_DT_FLOAT, xb, (uint64_t)m);
            else xb[0] = wm_f16_to_f32(b[0]);
            const void *const fin[2] = {xa, xb};
            bin_f32((void *)c->s, xo, fin, step, m);
            wm_convert(WM_DT_FLOAT, xo, WM_DT_FLOAT16, (uint16_t *)out + i0, (uint64_t)m);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++)
        store_f(c->to, out, i, bin_f64_one(c->s->op, load_f(c->ta, in[0], i * step[0]), load_f(c->tb, in[1], i * step[1])));
}

/* One integer element: the definitions of ops/int_math.h (wrap-around, x / 0 = 0, MIN / -1 = MIN, ...), shared with
 * the optimizer's folding. Signed types travel as int64, unsigned as uint64; the caller keeps the low bits. */
static inline int64_t int_one_s(int op, int64_t x, int64_t y, int bits) {
    switch (op) {
    case BOP_ADD: return wm_i64_add(x, y);
    case BOP_SUB: return wm_i64_sub(x, y);
    case BOP_MUL: return wm_i64_mul(x, y);
    case BOP_DIV: return wm_i64_div(x, y);
    case BOP_MOD: return wm_i64_mod(x, y, 0);
    case BOP_FMOD: return wm_i64_mod(x, y, 1);
    case BOP_MAX: return x > y ? x : y;
    case BOP_MIN: return x < y ? x : y;
    case BOP_PRELU: return x < 0 ? wm_i64_mul(x, y) : x;
    case BOP_POW: return wm_i64_pow(x, y);
    case BOP_BAND: return x & y;
    case BOP_BOR: return x | y;
    case BOP_BXOR: return x ^ y;
    case BOP_SHL: return (int64_t)wm_u64_shl((uint64_t)x, (uint64_t)y, bits);
    case BOP_SHR: return wm_i64_sar(x, (uint64_t)y, bits);
    default: return 0;
    }
}

static inline uint64_t int_one_u(int op, uint64_t x, uint64_t y, int bits) {
    switch (op) {
    case BOP_ADD: return x + y;
    case BOP_SUB: return x - y;
    case BOP_MUL: return x * y;
    case BOP_DIV: return wm_u64_div(x, y);
    case BOP_MOD: case BOP_FMOD: return wm_u64_mod(x, y);
    case BOP_MAX: return x > y ? x : y;
    case BOP_MIN: return x < y ? x : y;
    case BOP_PRELU: return x;
    case BOP_POW: return wm_u64_pow(x, y);
    case BOP_BAND: return x & y;
    case BOP_BOR: return x | y;
    case BOP_BXOR: return x ^ y;
    case BOP_SHL: return wm_u64_shl(x, y, bits);
    case BOP_SHR: return wm_u64_shr(x, y, bits);
    default: return 0;
    }
}

/* integer types: one loop per type by macro */
#define INT_BINARY(T, suffix, is_signed)                                                                   \
    static void bin_##suffix(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n) { \
        const bstate *s = ctx;                                                                             \
        const T *a = in[0], *b = in[1];                                                                    \
        int64_t sa = step[0], sb = step[1];                                                                \
        if (s->cmp) {                                                                                      \
            uint8_t *o = out;                                                                              \
            for (int64_t i = 0; i < n; i++) {                                                              \
                T x = a[i * sa], y = b[i * sb];                                                            \
                o[i] = s->op == BOP_EQ ? x == y : s->op == BOP_LT ? x < y : s->op == BOP_GT ? x > y         \
                     : s->op == BOP_LE ? x <= y : x >= y;                                                  \
            }                                                                                              \
            return;                                                                                        \
        }                                                                                                  \
        T *o = out;                                                                                        \
        const int op = s->op, bits = (int)sizeof(T) * 8;                                                   \
        for (int64_t i = 0; i < n; i++) {                                                                  \
            T x = a[i * sa], y = b[i * sb];                                                                \
            o[i] = is_signed ? (T)int_one_s(op, (int64_t)x, (int64_t)y, bits)                              \
                             : (T)int_one_u(op, (uint64_t)x, (uint64_t)y, bits);                           \
        }                                                                                                  \
    }
INT_BINARY(int8_t, i8, 1)
INT_BINARY(uint8_t, u8, 0)
INT_BINARY(int16_t, i16, 1)
INT_BINARY(uint16_t, u16, 0)
INT_BINARY(int32_t, i32, 1)
INT_BINARY(uint32_t, u32, 0)
INT_BINARY(int64_t, i64, 1)
INT_BINARY(uint64_t, u64, 0)
#undef INT_BINARY

static void bin_bool(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n) {
    const bstate *s = ctx;
    const uint8_t *a = in[0], *b = in[1];
    uint8_t *o = out;
    for (int64_t i = 0; i < n; i++) {
        int x = a[i * step[0]] != 0, y = b[i * step[1]] != 0;
        o[i] = s->op == BOP_AND ? x && y : s->op == BOP_OR ? x || y : s->op == BOP_XOR ? x != y
             : s->op == BOP_EQ ? x == y : 0;
    }
}

static wm_bcast_fn int_fn(int32_t dt) {
    switch (dt) {
    case WM_DT_INT8: return bin_i8;
    case WM_DT_UINT8: return bin_u8;
    case WM_DT_INT16: return bin_i16;
    case WM_DT_UINT16: return bin_u16;
    case WM_DT_INT32: return bin_i32;
    case WM_DT_UINT32: return bin_u32;
    case WM_DT_INT64: return bin_i64;
    case WM_DT_UINT64: return bin_u64;
    default: return NULL;
    }
}

static const struct { const char *name; int op; int cmp; } bops[] = {
    {"Add", BOP_ADD, 0},          {"Sub", BOP_SUB, 0},        {"Mul", BOP_MUL, 0},        {"Div", BOP_DIV, 0},
    {"Pow", BOP_POW, 0},          {"Mod", BOP_MOD, 0},        {"Max", BOP_MAX, 0},        {"Min", BOP_MIN, 0},
    {"Sum", BOP_ADD, 0},          {"Mean", BOP_ADD, 0},       {"PRelu", BOP_PRELU, 0},    {"Equal", BOP_EQ, 1},
    {"Less", BOP_LT, 1},          {"Greater", BOP_GT, 1},     {"LessOrEqual", BOP_LE, 1}, {"GreaterOrEqual", BOP_GE, 1},
    {"And", BOP_AND, 1},          {"Or", BOP_OR, 1},          {"Xor", BOP_XOR, 1},        {"BitwiseAnd", BOP_BAND, 0},
    {"BitwiseOr", BOP_BOR, 0},    {"BitwiseXor", BOP_BXOR, 0}, {"BitShift", BOP_SHL, 0},  {"BiasGelu", BOP_ADD, 0},
};

static wm_status binary_init(wm_node *n, wm_error *err) {
    bstate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    const char *name = n->proto->op_type;
    for (size_t i = 0; i < sizeof bops / sizeof bops[0]; i++)
        if (!strcmp(bops[i].name, name)) s->op = bops[i].op, s->cmp = bops[i].cmp;
    char buf[16];
    if (s->op == BOP_MOD && wm_attr_int(n, "fmod", 0)) s->op = BOP_FMOD;
    if (s->op == BOP_SHL && !strcmp(wm_attr_string(n, "direction", "LEFT", buf, sizeof buf), "RIGHT")) s->op = BOP_SHR;
    n->state = s;
    if (n->n_in < 1 || !wm_has_in(n, 0)) return wm_node_err(n, err, WM_ERR_INPUT, "needs an input");
    static const int32_t boolt[] = {WM_DT_BOOL, 0};
    wm_status st;
    if (s->op == BOP_AND || s->op == BOP_OR || s->op == BOP_XOR) st = wm_check_type(n, 0, boolt, err);
    else if (s->op >= BOP_BAND) st = wm_check_type(n, 0, wm_types_int, err);
    else if (!strcmp(name, "Mean")) st = wm_check_type(n, 0, wm_types_float, err); /* the division is a float one */
    else if (s->op == BOP_EQ) st = wm_check_type(n, 0, wm_types_all, err);
    else st = wm_check_type(n, 0, wm_types_numeric, err);
    if (st) return st;
    for (int i = 1; i < n->n_in; i++) {
        if (!wm_has_in(n, i)) return wm_node_err(n, err, WM_ERR_INPUT, "input %d is missing", i);
        if (s->op == BOP_POW) { /* the exponent may be of another numeric type */
            if ((st = wm_check_type(n, i, wm_types_numeric, err))) return st;
        } else if ((st = wm_check_same_type(n, 0, i, err)))
            return st;
    }
    n->out_dtype[0] = s->cmp ? WM_DT_BOOL : n->in_dtype[0];
    return WM_OK;
}

static wm_status binary_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    return wm_bcast_shape(n, in, n->n_in, out[0], err);
}

static wm_bcast_fn pick_fn(const bstate *s, int32_t ta, int32_t tb, fctx *fc, int32_t to) {
    if (ta == WM_DT_BOOL) return bin_bool;
    if (ta == WM_DT_FLOAT && tb == WM_DT_FLOAT) return bin_f32;
    wm_bcast_fn f = int_fn(ta);
    if (f && ta == tb) return f;
    fc->s = s, fc->ta = ta, fc->tb = tb, fc->to = to;
    if (f && s->op == BOP_POW) return NULL; /* integer base, other exponent type: see binary_run */
    return bin_fgen;
}

static int is_float_t(int32_t dt);
static int is_unsigned_t(int32_t dt) {
    return dt == WM_DT_UINT8 || dt == WM_DT_UINT16 || dt == WM_DT_UINT32 || dt == WM_DT_UINT64;
}
static void store_int(int32_t dt, void *p, int64_t i, int64_t v);

/*
 * Pow of an integer base with an exponent of another type: an integer exponent gives the exact wrapped power
 * (as when both types agree); a float exponent the double power converted as Cast converts (onnxruntime's
 * static_cast of std::pow on x86: NaN and out-of-range values give the type's indefinite value).
 */
static void pow_int_any(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n) {
    const fctx *c = ctx;
    int uns_exp = is_unsigned_t(c->tb), uns_base = is_unsigned_t(c->ta);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (is_float_t(c->tb))
            v = wm_f64_to_int(c->to, pow(load_f(c->ta, in[0], i * step[0]), load_f(c->tb, in[1], i * step[1])));
        else {
            v = wm_int_pow(wm_dt_get_int(c->ta, in[0], (uint64_t)(i * step[0])), uns_base,
                           wm_dt_get_int(c->tb, in[1], (uint64_t)(i * step[1])), uns_exp);
        }
        store_int(c->to, out, i, v);
    }
}

static wm_status binary_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const bstate *s = n->state;
    fctx fc;
    if (n->n_in == 1) { /* Sum/Max/Min/Mean of one input */
        if (out[0]->data != in[0]->data) memcpy(out[0]->data, in[0]->data, (size_t)wm_tensor_nbytes(out[0]));
        return WM_OK;
    }
    /* variadic ops fold left into the output: out = in0 op in1, then out = out op in_k, each broadcast to out */
    for (int k = 1; k < n->n_in; k++) {
        wm_tensor *args[2] = {k == 1 ? in[0] : out[0], in[k]};
        wm_bcast b;
        wm_bcast_init(&b, args, 2, out[0]);
        wm_bcast_fn f = pick_fn(s, args[0]->dtype, args[1]->dtype, &fc, out[0]->dtype);
        if (!f) f = pow_int_any;
        wm_bcast_run(&b, args, out[0], f, f == bin_fgen || f == pow_int_any ? (void *)&fc : (void *)s, x);
    }
    if (!strcmp(n->proto->op_type, "Mean")) {
        uint64_t cnt = wm_tensor_numel(out[0]);
        for (uint64_t i = 0; i < cnt; i++)
            store_f(out[0]->dtype, out[0]->data, (int64_t)i, load_f(out[0]->dtype, out[0]->data, (int64_t)i) / n->n_in);
    }
    if (!strcmp(n->proto->op_type, "BiasGelu")) {
        ustate us = {UOP_Gelu, {0}};
        uctx c = {&us, out[0]->dtype, out[0]->data, out[0]->data, (int64_t)wm_tensor_numel(out[0])};
        wm_pool_run(x->pool, unary_part, &c, par_threads(x, (uint64_t)c.n, 16384));
    }
    return WM_OK;
}

/* ================================================================ Where */

static wm_status where_init(wm_node *n, wm_error *err) {
    static const int32_t boolt[] = {WM_DT_BOOL, 0};
    wm_status st;
    if (n->n_in != 3) return wm_node_err(n, err, WM_ERR_INPUT, "takes 3 inputs");
    if ((st = wm_check_type(n, 0, boolt, err)) || (st = wm_check_type(n, 1, wm_types_all, err)) ||
        (st = wm_check_same_type(n, 1, 2, err)))
        return st;
    n->out_dtype[0] = n->in_dtype[1];
    return WM_OK;
}

static void where_fn(void *ctx, void *out, const void *const *in, const int64_t *step, int64_t n) {
    size_t es = *(const size_t *)ctx;
    const uint8_t *c = in[0], *a = in[1], *b = in[2];
    uint8_t *o = out;
    if (es == 4) {
        const uint32_t *a4 = in[1], *b4 = in[2];
        uint32_t *o4 = out;
        for (int64_t i = 0; i < n; i++) o4[i] = c[i * step[0]] ? a4[i * step[1]] : b4[i * step[2]];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(o + (size_t)i * es, c[i * step[0]] ? a + (size_t)(i * step[1]) * es : b + (size_t)(i * step[2]) * es, es);
}

static wm_status where_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    return wm_bcast_shape(n, in, 3, out[0], err);
}

static wm_status where_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n;
    wm_bcast b;
    wm_bcast_init(&b, in, 3, out[0]);
    size_t es = wm_dtype_size(out[0]->dtype);
    wm_bcast_run(&b, in, out[0], where_fn, &es, x);
    return WM_OK;
}

/* ================================================================ Cast, Clip */

static wm_status cast_init(wm_node *n, wm_error *err) {
    int32_t to = (int32_t)wm_attr_int(n, "to", 0);
    if (wm_narrow_type(to) || wm_narrow_type(n->in_dtype[0])) return wm_cast_narrow_init(n, to, err); /* 8-bit floats: cast_narrow.c */
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (st) return st;
    int ok = 0;
    for (const int32_t *p = wm_types_all; *p; p++) ok |= *p == to;
    if (!ok) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "cast to %s is not supported", wm_dtype_name(to));
    n->out_dtype[0] = to;
    return WM_OK;
}

static int is_float_t(int32_t dt) {
    return dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16;
}

static void store_int(int32_t dt, void *p, int64_t i, int64_t v) {
    switch (dt) {
    case WM_DT_INT8: case WM_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case WM_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case WM_DT_INT16: case WM_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case WM_DT_INT32: case WM_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

/* Converts n elements of type from at src to type to at dst (used by Cast and CastLike). */
void wm_convert(int32_t from, const void *src, int32_t to, void *dst, uint64_t n) {
    if (from == to) {
        if (dst != src) memcpy(dst, src, n * wm_dtype_size(to));
        return;
    }
    if (from == WM_DT_FLOAT && to == WM_DT_FLOAT16) { /* the kernel table's (F16C when present): same rounding */
        wm_kernels_get()->f32_to_f16((int64_t)n, dst, src);
        return;
    }
    if (from == WM_DT_FLOAT16 && to == WM_DT_FLOAT) {
        wm_kernels_get()->f16_to_f32((int64_t)n, dst, src);
        return;
    }
    wm_tensor t = {.dtype = from, .data = (void *)src};
    for (uint64_t i = 0; i < n; i++) {
        if (is_float_t(from)) {
            double v = wm_tensor_get_f64(&t, i);
            if (is_float_t(to)) store_f(to, dst, (int64_t)i, v);
            else store_int(to, dst, (int64_t)i, wm_f64_to_int(to, v)); /* onnxruntime's x86 results: int_math.h */
        } else {
            int64_t v = wm_tensor_get_int(&t, i);
            if (is_float_t(to)) store_f(to, dst, (int64_t)i, from == WM_DT_UINT64 ? (double)(uint64_t)v : (double)v);
            else store_int(to, dst, (int64_t)i, v);
        }
    }
}

static wm_status cast_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    if (n->state) return wm_cast_narrow_run(n, in, out, x); /* set by wm_cast_narrow_init only */
    wm_convert(in[0]->dtype, in[0]->data, out[0]->dtype, out[0]->data, wm_tensor_numel(out[0]));
    return WM_OK;
}

static wm_status castlike_init(wm_node *n, wm_error *err) {
    if (wm_narrow_type(n->in_dtype[0]) || wm_narrow_type(n->in_dtype[1])) return wm_cast_narrow_init(n, n->in_dtype[1], err);
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_type(n, 1, wm_types_all, err);
    n->out_dtype[0] = n->in_dtype[1];
    return st;
}

static wm_status clip_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_numeric, err);
    for (int i = 1; i < n->n_in && !st; i++)
        if (wm_has_in(n, i)) st = wm_check_same_type(n, 0, i, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status clip_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    double lo = -INFINITY, hi = INFINITY;
    if (n->opset < 11) {
        lo = wm_attr_float(n, "min", -3.402823e38f);
        hi = wm_attr_float(n, "max", 3.402823e38f);
    } else {
        if (wm_has_in(n, 1) && wm_tensor_numel(in[1])) lo = wm_tensor_get_f64(in[1], 0);
        if (wm_has_in(n, 2) && wm_tensor_numel(in[2])) hi = wm_tensor_get_f64(in[2], 0);
    }
    uint64_t cnt = wm_tensor_numel(out[0]);
    int32_t dt = in[0]->dtype;
    if (dt == WM_DT_FLOAT) {
        const float *a = in[0]->data;
        float *o = out[0]->data, l = (float)lo, h = (float)hi;
        for (uint64_t i = 0; i < cnt; i++) {
            float v = a[i] < l ? l : a[i];
            o[i] = v > h ? h : v;
        }
        return WM_OK;
    }
    for (uint64_t i = 0; i < cnt; i++) {
        if (is_float_t(dt)) {
            double v = wm_tensor_get_f64(in[0], i);
            if (!isnan(v)) v = fmin(fmax(v, lo), hi); /* min first: min > max gives max */
            store_f(dt, out[0]->data, (int64_t)i, v);
        } else {
            int64_t v = wm_tensor_get_int(in[0], i);
            int64_t l = wm_has_in(n, 1) && n->opset >= 11 && wm_tensor_numel(in[1]) ? wm_tensor_get_int(in[1], 0) : INT64_MIN;
            int64_t h = wm_has_in(n, 2) && n->opset >= 11 && wm_tensor_numel(in[2]) ? wm_tensor_get_int(in[2], 0) : INT64_MAX;
            if (dt == WM_DT_UINT64) {
                uint64_t u = (uint64_t)v;
                if (wm_has_in(n, 1) && (uint64_t)l > u) u = (uint64_t)l;
                if (wm_has_in(n, 2) && (uint64_t)h < u) u = (uint64_t)h; /* min first: min > max gives max */
                ((uint64_t *)out[0]->data)[i] = u;
                continue;
            }
            v = v < l ? l : v;
            store_int(dt, out[0]->data, (int64_t)i, v > h ? h : v);
        }
    }
    return WM_OK;
}

/* ================================================================ table */

#define UNARY_F(name) {"", #name, 1, 0, unary_float_init, same_shape_infer, unary_float_run, NULL, WM_OP_INPLACE, 0}
#define BINARY(name) {"", #name, 1, 0, binary_init, binary_infer, binary_run, NULL, WM_OP_INPLACE, 0}
#define NUMERIC(name) {"", #name, 1, 0, numeric_unary_init, same_shape_infer, numeric_unary_run, NULL, WM_OP_INPLACE, 0}

static const wm_op ops[] = {
#define X(name, expr) UNARY_F(name),
    UNARY_FLOAT_OPS(X)
#undef X
    {"com.microsoft", "QuickGelu", 1, 0, unary_float_init, same_shape_infer, unary_float_run, NULL, WM_OP_INPLACE, 0},
    {"com.microsoft", "FastGelu", 1, 0, unary_float_init, same_shape_infer, unary_float_run, NULL, 0, 0},
    {"com.microsoft", "Gelu", 1, 0, unary_float_init, same_shape_infer, unary_float_run, NULL, WM_OP_INPLACE, 0},
    {"com.microsoft", "BiasGelu", 1, 0, binary_init, binary_infer, binary_run, NULL, WM_OP_INPLACE, 0},
    NUMERIC(Abs), NUMERIC(Neg), NUMERIC(Sign), NUMERIC(Relu), NUMERIC(Not), NUMERIC(IsNaN), NUMERIC(IsInf),
    NUMERIC(BitwiseNot),
    {"", "Identity", 1, 0, numeric_unary_init, same_shape_infer, numeric_unary_run, NULL, WM_OP_ALIAS, 0},
    {"", "Dropout", 1, 0, numeric_unary_init, dropout_infer, numeric_unary_run, NULL, WM_OP_ALIAS, 0},
    BINARY(Add), BINARY(Sub), BINARY(Mul), BINARY(Div), BINARY(Pow), BINARY(Mod), BINARY(Max), BINARY(Min),
    BINARY(Sum), BINARY(Mean), BINARY(PRelu), BINARY(Equal), BINARY(Less), BINARY(Greater), BINARY(LessOrEqual),
    BINARY(GreaterOrEqual), BINARY(And), BINARY(Or), BINARY(Xor), BINARY(BitwiseAnd), BINARY(BitwiseOr),
    BINARY(BitwiseXor), BINARY(BitShift),
    {"", "Where", 1, 0, where_init, where_infer, where_run, NULL, 0, 0},
    {"", "Cast", 1, 0, cast_init, same_shape_infer, cast_run, NULL, 0, 0},
    {"", "CastLike", 15, 0, castlike_init, same_shape_infer, cast_run, NULL, 0, 0},
    {"", "Clip", 1, 0, clip_init, same_shape_infer, clip_run, NULL, WM_OP_INPLACE, 0},
};

const wm_op_table wm_ops_elementwise = {ops, sizeof ops / sizeof ops[0]};
