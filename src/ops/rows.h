/*
 * rows.h - float rows of any float tensor: load a row of float32/float16/
 * bfloat16/float64 into a float buffer and store it back. Norms, softmax
 * and friends compute in float32 on such rows.
 */
#ifndef WM_OPS_ROWS_H
#define WM_OPS_ROWS_H

#include <string.h>

#include "kernels/kernels.h"
#include "ops/op.h"

static inline void wm_row_load(int32_t dt, const void *base, uint64_t off, float *dst, int64_t n) {
    switch (dt) {
    case WM_DT_FLOAT: {
        /* memmove, not an element loop: gcc -O2 leaves such a loop scalar (it may not version it for
           aliasing), which was most of a SkipLayerNormalization's own time */
        if (n > 0) memmove(dst, (const float *)base + off, (size_t)n * sizeof(float));
        break;
    }
    case WM_DT_DOUBLE: {
        const double *s = (const double *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)s[i];
        break;
    }
    case WM_DT_FLOAT16: {
        wm_kernels_get()->f16_to_f32(n, dst, (const uint16_t *)base + off); /* F16C when present */
        break;
    }
    default: {
        const uint16_t *s = (const uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = wm_bf16_to_f32(s[i]);
        break;
    }
    }
}

static inline void wm_row_store(int32_t dt, void *base, uint64_t off, const float *src, int64_t n) {
    switch (dt) {
    case WM_DT_FLOAT: {
        if (n > 0) memmove((float *)base + off, src, (size_t)n * sizeof(float));
        break;
    }
    case WM_DT_DOUBLE: {
        double *d = (double *)base + off;
        for (int64_t i = 0; i < n; i++) d[i] = src[i];
        break;
    }
    case WM_DT_FLOAT16: {
        wm_kernels_get()->f32_to_f16(n, (uint16_t *)base + off, src); /* same rounding as wm_f32_to_f16 */
        break;
    }
    default: {
        uint16_t *d = (uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++) d[i] = wm_f32_to_bf16(src[i]);
        break;
    }
    }
}

#endif
