/* quant.h - float8 conversions of quant.c, for the ops that read or write float8 values. */
#ifndef WM_OPS_QUANT_H
#define WM_OPS_QUANT_H

#include "ops/op.h"

/* 1 when dt is one of the four float8 types (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz). */
int wm_is_f8(int32_t dt);
/* Decodes a float8 value of type dt. */
float wm_f8_to_f32(int32_t dt, uint8_t v);
/* Encodes x as float8 type dt, round half to even; saturate clamps to the largest finite value
 * (else out of range becomes inf (e5m2) or NaN (the types without inf)). */
uint8_t wm_f32_to_f8(int32_t dt, float x, int saturate);

#endif
