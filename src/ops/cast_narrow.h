/*
 * cast_narrow.h - Cast and CastLike for the narrow element types (see
 * cast_narrow.c): the 8-bit floats float8e4m3fn, float8e4m3fnuz,
 * float8e5m2, float8e5m2fnuz, float8e8m0, and the packed sub-byte types
 * int4, uint4, int2, uint2, float4e2m1. Scalar conversions are exported
 * for other ops (quantization).
 */
#ifndef WM_OPS_CAST_NARROW_H
#define WM_OPS_CAST_NARROW_H

#include "ops/op.h"

enum { WM_ROUND_UP = 0, WM_ROUND_DOWN, WM_ROUND_NEAREST }; /* float8e8m0 rounding */

/* 1 for the 8-bit float types and the sub-byte types. */
int wm_narrow_type(int32_t dt);
/* Value of code v of type dt (exact; sub-byte codes in the low bits). */
float wm_narrow_decode(int32_t dt, uint8_t v);
/* Code of type dt for x: floats round to nearest even (e8m0: round_mode) with the ONNX saturate
 * rules; integers truncate toward zero and keep the low bits (NaN -> 0). */
uint8_t wm_narrow_encode(int32_t dt, double x, int saturate, int round_mode);

/* Element i of a packed sub-byte (or 8-bit) array of type dt, as its code. */
static inline uint8_t wm_narrow_get(int32_t dt, const void *p, uint64_t i) {
    const uint8_t *b = p;
    switch (dt) {
    case WM_DT_INT4: case WM_DT_UINT4: case WM_DT_FLOAT4E2M1: return (uint8_t)((b[i >> 1] >> (4 * (i & 1))) & 0xF);
    case WM_DT_INT2: case WM_DT_UINT2: return (uint8_t)((b[i >> 2] >> (2 * (i & 3))) & 0x3);
    default: return b[i];
    }
}

/* Stores code c as element i (sub-byte: the other elements of the byte are kept). */
static inline void wm_narrow_set(int32_t dt, void *p, uint64_t i, uint8_t c) {
    uint8_t *b = p;
    switch (dt) {
    case WM_DT_INT4: case WM_DT_UINT4: case WM_DT_FLOAT4E2M1: {
        int s = 4 * (int)(i & 1);
        b[i >> 1] = (uint8_t)((b[i >> 1] & ~(0xF << s)) | ((c & 0xF) << s));
        return;
    }
    case WM_DT_INT2: case WM_DT_UINT2: {
        int s = 2 * (int)(i & 3);
        b[i >> 2] = (uint8_t)((b[i >> 2] & ~(0x3 << s)) | ((c & 0x3) << s));
        return;
    }
    default: b[i] = c; return;
    }
}

/* Cast / CastLike init when the input type or `to` is narrow: reads saturate and round_mode. */
wm_status wm_cast_narrow_init(wm_node *n, int32_t to, wm_error *err);
/* Run of a node wm_cast_narrow_init accepted. */
wm_status wm_cast_narrow_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x);

#endif
