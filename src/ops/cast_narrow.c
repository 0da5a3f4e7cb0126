/*
 * cast_narrow.c - Cast and CastLike to and from the narrow types: the
 * 8-bit floats float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz
 * (opset 19..), float8e8m0 (24..), and the packed sub-byte types int4,
 * uint4 (21..), float4e2m1 (23..), int2, uint2 (25..). elementwise.c hands
 * a Cast/CastLike node here (wm_cast_narrow_init / wm_cast_narrow_run)
 * when either side is one of them.
 *
 * Sub-byte tensors are packed, element 0 in the lowest bits of byte 0
 * (two 4-bit or four 2-bit elements per byte). Integers convert like the
 * other integer casts: truncation toward zero, then the low bits (200 ->
 * int4 -8 + ...); float4e2m1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6) rounds to
 * nearest even and saturates to +-6; NaN becomes -0 (0x8), as the ONNX
 * test data has it (the type has no NaN).
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

#include "ops/cast_narrow.h"
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

static int sub_byte(int32_t dt) {
    return dt == WM_DT_INT4 || dt == WM_DT_UINT4 || dt == WM_DT_INT2 || dt == WM_DT_UINT2 || dt == WM_DT_FLOAT4E2M1;
}

int wm_narrow_type(int32_t dt) { return fmt_of(dt) != NULL || dt == WM_DT_FLOAT8E8M0 || sub_byte(dt); }

static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float wm_narrow_decode(int32_t dt, uint8_t v) {
    switch (dt) {
    case WM_DT_FLOAT8E8M0: return v == 0xFF ? NAN : ldexpf(1.0f, (int)v - 127);
    case WM_DT_INT4: return (float)((v & 0xF) >= 8 ? (v & 0xF) - 16 : (v & 0xF));
    case WM_DT_UINT4: return (float)(v & 0xF);
    case WM_DT_INT2: return (float)((v & 3) >= 2 ? (v & 3) - 4 : (v & 3));
    case WM_DT_UINT2: return (float)(v & 3);
    case WM_DT_FLOAT4E2M1: return v & 8 ? -e2m1[v & 7] : e2m1[v & 7];
    default: break;
    }
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

uint8_t wm_narrow_encode(int32_t dt, double x, int saturate, int round_mode) {
    if (dt == WM_DT_INT4 || dt == WM_DT_UINT4 || dt == WM_DT_INT2 || dt == WM_DT_UINT2) {
        int64_t v = isnan(x) ? 0 : x >= 9.2e18 ? INT64_MAX : x <= -9.2e18 ? INT64_MIN : (int64_t)x;
        return (uint8_t)((uint64_t)v & (dt == WM_DT_INT4 || dt == WM_DT_UINT4 ? 0xF : 0x3));
    }
    if (dt == WM_DT_FLOAT4E2M1) {
        if (isnan(x)) return 0x8;
        double a = fabs(x);
        uint8_t best = 7; /* beyond 6: saturate */
        for (uint8_t c = 0; c < 7; c++) { /* the first code whose upper midpoint is not below a (ties: even code) */
            double mid = 0.5 * (e2m1[c] + e2m1[c + 1]);
            if (a < mid || (a == mid && (c & 1) == 0)) {
                best = c;
                break;
            }
        }
        return (uint8_t)(best | (signbit(x) ? 8 : 0));
    }
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
    double a = fabs(x), maxv = wm_narrow_decode(dt, f->max);
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

typedef struct narrow_state {
    int saturate, round_mode;
} narrow_state;

wm_status wm_cast_narrow_init(wm_node *n, int32_t to, wm_error *err) {
    int32_t from = n->in_dtype[0];
    if (!wm_narrow_type(from) && !wm_narrow_type(to)) return WM_ERR_INTERNAL;
    if (!wm_narrow_type(from) && wm_check_type(n, 0, wm_types_all, err)) return WM_ERR_UNSUPPORTED;
    int ok = wm_narrow_type(to);
    for (const int32_t *p = wm_types_all; *p && !ok; p++) ok = *p == to;
    if (!ok) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "cast to %s is not supported", wm_dtype_name(to));
    narrow_state *s = wm_node_alloc(n, sizeof *s);
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

wm_status wm_cast_narrow_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    const narrow_state *s = n->state;
    int32_t from = in[0]->dtype, to = out[0]->dtype;
    uint64_t total = wm_tensor_numel(out[0]);
    int from_n = wm_narrow_type(from);
    if (sub_byte(to)) memset(out[0]->data, 0, wm_tensor_nbytes(out[0])); /* a padding element stays 0 */
    for (uint64_t i = 0; i < total; i++) {
        double v = from_n ? (double)wm_narrow_decode(from, wm_narrow_get(from, in[0]->data, i)) : wm_get_f64(in[0], i);
        if (wm_narrow_type(to)) wm_narrow_set(to, out[0]->data, i, wm_narrow_encode(to, v, s->saturate, s->round_mode));
        else if (wm_dtype_is_float(to) || to == WM_DT_BOOL) wm_store_f64(to, out[0]->data, i, v);
        else if (to == WM_DT_UINT64) ((uint64_t *)out[0]->data)[i] = isnan(v) || v <= 0 ? 0 : (uint64_t)v;
        else wm_store_int(to, out[0]->data, i, isnan(v) ? 0 : (int64_t)v);
    }
    return WM_OK;
}
