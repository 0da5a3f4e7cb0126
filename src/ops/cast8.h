/*
 * cast8.h - the 8-bit float types in Cast and CastLike (see cast8.c).
 * Scalar conversions are exported for other ops (quantization).
 */
#ifndef WM_OPS_CAST8_H
#define WM_OPS_CAST8_H

#include "ops/op.h"

enum { WM_ROUND_UP = 0, WM_ROUND_DOWN, WM_ROUND_NEAREST }; /* float8e8m0 rounding */

/* 1 for float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz and float8e8m0. */
int wm_cast8_type(int32_t dt);
/* Value of code v of type dt (exact). */
float wm_cast8_decode(int32_t dt, uint8_t v);
/* Code of type dt for x: round to nearest even (e8m0: round_mode), ONNX saturate rules. */
uint8_t wm_cast8_encode(int32_t dt, double x, int saturate, int round_mode);

/* Cast / CastLike init when the input type or `to` is an 8-bit float type: reads saturate and round_mode. */
wm_status wm_cast8_init(wm_node *n, int32_t to, wm_error *err);
/* Run of a node wm_cast8_init accepted. */
wm_status wm_cast8_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x);

#endif
