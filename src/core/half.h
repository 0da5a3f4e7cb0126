/* half.h - IEEE binary16 (float16) and bfloat16 scalar conversions, round to nearest even; NaN stays NaN. */
#ifndef WM_CORE_HALF_H
#define WM_CORE_HALF_H

#include <stdint.h>

float wm_f16_to_f32(uint16_t h);
uint16_t wm_f32_to_f16(float f);
static inline float wm_bf16_to_f32(uint16_t b) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)b << 16};
    return v.f;
}
uint16_t wm_f32_to_bf16(float f);

#endif
