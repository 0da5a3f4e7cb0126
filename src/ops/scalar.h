/*
 * scalar.h - element access of any numeric tensor type by value class,
 * for the index, misc, signal and loss op families: a value is read as
 * double (float types), int64 (signed and narrower unsigned types) or
 * uint64, and stored back with the type's own rounding or wrap-around.
 * Reading float32/float16/bfloat16 into double and rounding back after
 * one add, mul, min or max equals the native operation.
 */
#ifndef WM_OPS_SCALAR_H
#define WM_OPS_SCALAR_H

#include <math.h>
#include <string.h>

#include "ops/int_math.h"
#include "ops/op.h"

enum { WM_CLS_FLOAT = 0, WM_CLS_INT, WM_CLS_UINT64 };

static inline int wm_dtype_is_float(int32_t dt) {
    return dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16;
}

/* Value class of a numeric or bool element type. */
static inline int wm_dtype_class(int32_t dt) {
    if (wm_dtype_is_float(dt)) return WM_CLS_FLOAT;
    return dt == WM_DT_UINT64 ? WM_CLS_UINT64 : WM_CLS_INT;
}

static inline void wm_store_f64(int32_t dt, void *p, uint64_t i, double v);

/* Stores the integer v as element i of an integer (or bool) type dt, wrapping like a C cast. */
static inline void wm_store_int(int32_t dt, void *p, uint64_t i, int64_t v) {
    switch (dt) {
    case WM_DT_INT8: case WM_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; return;
    case WM_DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case WM_DT_INT16: case WM_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; return;
    case WM_DT_INT32: case WM_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; return;
    case WM_DT_INT64: case WM_DT_UINT64: ((int64_t *)p)[i] = v; return;
    default: if (wm_dtype_is_float(dt)) wm_store_f64(dt, p, i, (double)v); return;
    }
}

/* Stores v (a double) as element i of type dt: floats round; integers convert as Cast does (truncation toward zero,
 * NaN and out-of-range values as onnxruntime on x86: ops/int_math.h, wm_f64_to_int), then keep their low bits. */
static inline void wm_store_f64(int32_t dt, void *p, uint64_t i, double v) {
    switch (dt) {
    case WM_DT_FLOAT: ((float *)p)[i] = (float)v; return;
    case WM_DT_DOUBLE: ((double *)p)[i] = v; return;
    case WM_DT_FLOAT16: ((uint16_t *)p)[i] = wm_f32_to_f16((float)v); return;
    case WM_DT_BFLOAT16: ((uint16_t *)p)[i] = wm_f32_to_bf16((float)v); return;
    default: wm_store_int(dt, p, i, wm_f64_to_int(dt, v)); return;
    }
}

/* Element i of t as double (uint64 read unsigned). */
static inline double wm_get_f64(const wm_tensor *t, uint64_t i) {
    if (t->dtype == WM_DT_UINT64) return (double)((const uint64_t *)t->data)[i];
    return wm_tensor_get_f64(t, i);
}

#endif
