/* quant.h - float8 conversions and dynamic uint8 quantization of quant.c, for the ops that use them. */
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

/* DynamicQuantizeLinear of v[0..cnt) into y: uint8, scale and zero point from the range of v and 0 (ONNX's
 * rule, round half to even), for the op and for the products that quantize their input the same way. */
void wm_dyn_quantize_u8(const float *v, uint64_t cnt, uint8_t *y, float *scale, uint8_t *zp);
/* its AVX2 parts (quant_avx2.c): the min and max of v and 0 (NaN skipped); the bytes of the first cnt rounded down
   to 32 values (returns that count), as the scalar loop makes them */
void wm_dyn_range_avx2(const float *v, uint64_t cnt, float *mn, float *mx);
uint64_t wm_dyn_quantize_avx2(const float *v, uint64_t cnt, uint8_t *y, float scale, float zp);

#endif
