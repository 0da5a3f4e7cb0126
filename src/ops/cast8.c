/*
 * cast8.c - Cast and CastLike to and from the 8-bit float types:
 * float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz (opset 19..)
 * and float8e8m0 (opset 24..). elementwise.c hands a Cast/CastLike node
 * here (wm_cast8_init / wm_cast8_run) when either side is one of them.
 *
 * Decoding is exact (every value of these types is a float32). Encoding
 * rounds the double value to nearest even at the type's precision
 * (subnormals included) and applies the ONNX saturate rules: with
 * saturate = 1 (default) out-of-range values and infinities clamp to the
 * largest finite value; with saturate = 0 they become infinity (e5m2) or
 * NaN (the types without infinity). The fnuz types have one NaN (0x80)
 * and no negative zero. float8e8m0 holds only exponents (2^(v - 127),
 * 0xff NaN) and rounds per round_mode (up | down | nearest) on the float32
 * bits as the ONNX reference defines it.
 */
#include <math.h>
#include <string.h>

#include "ops/cast8.h"
#include "ops/scalar.h"

typedef struct f8fmt {
    int mbits, bias;
    int fnuz;    /* one NaN (0x80), no -0, no infinity */
    int has_inf; /* e5m2 */
    uint8_t max; /* code of the largest finite magnitude */
} f8fmt;

static const f8fmt *fmt_of(int32_t dt) {
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

int wm_cast8_type(int32_t dt) { return fmt_of(dt) != NULL || dt == WM_DT_FLOAT8E8M0; }

float wm_cast8_decode(int32_t dt, uint8_t v) {
    if (dt == WM_DT_FLOAT8E8M0) return v == 0xFF ? NAN : ldexpf(1.0f, (int)v - 127);
    const f8fmt *f = fmt_of(dt);
    int ebits = 7 - f->mbits, sign = v >> 7;
    int e = (v >> f->mbits) & ((1 << ebits) - 1), m = v & ((1 << f->mbits) - 1);
    if (f->fnuz && v == 0x80) return NAN;
    if (!f->fnuz && !f->has_inf && e == (1 << ebits) - 1 && m == (1 << f->mbits) - 1) return sign ? -NAN : NAN;
    if (f->has_inf && e == (1 << ebits) - 1) return m ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);
    float a = e ? ldexpf(1.0f + (float)m / (float)(1 << f->mbits), e - f->bias)
                : ldexpf((float)m, 1 - f->bias - f->mbits);
    return sign ? -a : a;
}

/* NaN of the type, keeping the sign where the type has signed NaNs. */
static uint8_t nan_code(const f8fmt *f, int sign) { return f->fnuz ? 0x80 : (uint8_t)(0x7F | (sign << 7)); }

uint8_t wm_cast8_encode(int32_t dt, double x, int saturate, int round_mode) {
    if (dt == WM_DT_FLOAT8E8M0) {
        union { float f; uint32_t u; } b = {.f = (float)x};
        uint32_t e = (b.u >> 23) & 0xFF;
        if (e == 0xFF) return 0xFF;
        int up = 0;
        if (round_mode == WM_ROUND_UP) up = (b.u & 0x7FFFFF) != 0;
        else if (round_mode == WM_ROUND_NEAREST) {
            int g = (b.u & 0x400000) != 0, r = (b.u & 0x200000) != 0, s = (b.u & 0x1FFFFF) != 0;
            up = g && (r || s || e > 0);
        }
        if (saturate && e == 0xFE) up = 0;
        return (uint8_t)(e + (uint32_t)up);
    }
    const f8fmt *f = fmt_of(dt);
    int sign = signbit(x) ? 1 : 0;
    if (isnan(x)) return nan_code(f, sign);
    double a = fabs(x), maxv = wm_cast8_decode(dt, f->max);
    uint8_t sbit = (uint8_t)(sign << 7);
    if (isinf(a)) {
        if (saturate) return (uint8_t)(f->max | sbit);
        return f->has_inf ? (uint8_t)(0x7C | sbit) : nan_code(f, sign);
    }
    int emin = 1 - f->bias; /* exponent of the smallest normal */
    int e;
    frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - f->mbits), r = nearbyint(a / q) * q; /* round half to even */
    if (r > maxv) {
        if (saturate) return (uint8_t)(f->max | sbit);
        return f->has_inf ? (uint8_t)(0x7C | sbit) : nan_code(f, sign);
    }
    if (r == 0) return f->fnuz ? 0 : sbit;
    frexp(r, &e);
    e -= 1;
    uint32_t code;
    if (e < emin) code = (uint32_t)(r / ldexp(1.0, emin - f->mbits)); /* subnormal */
    else code = (uint32_t)((e + f->bias) << f->mbits) | ((uint32_t)(r / ldexp(1.0, e - f->mbits)) & ((1u << f->mbits) - 1));
    return (uint8_t)(code | sbit);
}

/* ---------------------------------------------------------------- Cast / CastLike */

typedef struct cast8_state {
    int saturate, round_mode;
} cast8_state;

wm_status wm_cast8_init(wm_node *n, int32_t to, wm_error *err) {
    int32_t from = n->in_dtype[0];
    if (!wm_cast8_type(from) && !wm_cast8_type(to)) return WM_ERR_INTERNAL;
    if (!wm_cast8_type(from) && wm_check_type(n, 0, wm_types_all, err)) return WM_ERR_UNSUPPORTED;
    int ok = wm_cast8_type(to);
    for (const int32_t *p = wm_types_all; *p && !ok; p++) ok = *p == to;
    if (!ok) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "cast to %s is not supported", wm_dtype_name(to));
    cast8_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->saturate = (int)wm_attr_int(n, "saturate", 1);
    char buf[16];
    const char *rm = wm_attr_string(n, "round_mode", "up", buf, sizeof buf);
    if (!strcmp(rm, "up")) s->round_mode = WM_ROUND_UP;
    else if (!strcmp(rm, "down")) s->round_mode = WM_ROUND_DOWN;
    else if (!strcmp(rm, "nearest")) s->round_mode = WM_ROUND_NEAREST;
    else return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "round_mode '%s' is not up, down or nearest", rm);
    n->state = s;
    n->out_dtype[0] = to;
    return WM_OK;
}

wm_status wm_cast8_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    const cast8_state *s = n->state;
    int32_t from = in[0]->dtype, to = out[0]->dtype;
    uint64_t total = wm_tensor_numel(out[0]);
    const uint8_t *src8 = in[0]->data;
    uint8_t *dst8 = out[0]->data;
    int from8 = wm_cast8_type(from);
    for (uint64_t i = 0; i < total; i++) {
        double v = from8 ? (double)wm_cast8_decode(from, src8[i]) : wm_get_f64(in[0], i);
        if (wm_cast8_type(to)) dst8[i] = wm_cast8_encode(to, v, s->saturate, s->round_mode);
        else if (wm_dtype_is_float(to) || to == WM_DT_BOOL) wm_store_f64(to, out[0]->data, i, v);
        else if (to == WM_DT_UINT64) ((uint64_t *)out[0]->data)[i] = isnan(v) || v <= 0 ? 0 : (uint64_t)v;
        else wm_store_int(to, out[0]->data, i, isnan(v) ? 0 : (int64_t)v);
    }
    return WM_OK;
}
