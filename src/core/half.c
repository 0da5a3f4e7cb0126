/* half.c - IEEE binary16 and bfloat16 scalar conversions (see half.h). */
#include "core/half.h"

#include <math.h>

float wm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
    else if (exp) u = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) u = sign;
    else { /* subnormal: normalize */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    union { uint32_t u; float f; } v = {.u = u};
    return v.f;
}

uint16_t wm_f32_to_f16(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    uint32_t u = v.u, sign = (u >> 16) & 0x8000;
    int32_t exp = (int32_t)((u >> 23) & 0xff);
    uint32_t man = u & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero in half */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into the exponent: correct */
    return (uint16_t)half;
}

uint16_t wm_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    if (isnan(f)) return (uint16_t)((v.u >> 16) | 0x40);
    uint32_t r = 0x7fff + ((v.u >> 16) & 1);
    return (uint16_t)((v.u + r) >> 16);
}
