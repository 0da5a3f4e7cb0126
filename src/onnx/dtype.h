/* dtype.h - ONNX TensorProto.DataType: names, sizes, byte counts. */
#ifndef WM_ONNX_DTYPE_H
#define WM_ONNX_DTYPE_H

#include <stdint.h>

/* X(enum, value, name, bits per element; 0 = variable (string)) */
#define WM_DTYPE_LIST(X)                 \
    X(UNDEFINED, 0, "undefined", 0)      \
    X(FLOAT, 1, "float32", 32)           \
    X(UINT8, 2, "uint8", 8)              \
    X(INT8, 3, "int8", 8)                \
    X(UINT16, 4, "uint16", 16)           \
    X(INT16, 5, "int16", 16)             \
    X(INT32, 6, "int32", 32)             \
    X(INT64, 7, "int64", 64)             \
    X(STRING, 8, "string", 0)            \
    X(BOOL, 9, "bool", 8)                \
    X(FLOAT16, 10, "float16", 16)        \
    X(DOUBLE, 11, "float64", 64)         \
    X(UINT32, 12, "uint32", 32)          \
    X(UINT64, 13, "uint64", 64)          \
    X(COMPLEX64, 14, "complex64", 64)    \
    X(COMPLEX128, 15, "complex128", 128) \
    X(BFLOAT16, 16, "bfloat16", 16)      \
    X(FLOAT8E4M3FN, 17, "float8e4m3fn", 8) \
    X(FLOAT8E4M3FNUZ, 18, "float8e4m3fnuz", 8) \
    X(FLOAT8E5M2, 19, "float8e5m2", 8)   \
    X(FLOAT8E5M2FNUZ, 20, "float8e5m2fnuz", 8) \
    X(UINT4, 21, "uint4", 4)             \
    X(INT4, 22, "int4", 4)               \
    X(FLOAT4E2M1, 23, "float4e2m1", 4)   \
    X(FLOAT8E8M0, 24, "float8e8m0", 8)   \
    X(UINT2, 25, "uint2", 2)             \
    X(INT2, 26, "int2", 2)

typedef enum wm_dtype {
#define X(e, v, n, b) WM_DT_##e = v,
    WM_DTYPE_LIST(X)
#undef X
    WM_DT_COUNT
} wm_dtype;

/* "float32" ...; "dtype(N)" style names are not produced: unknown -> "unknown". */
const char *wm_dtype_name(int32_t dt);
/* Bits per element, 0 for string/undefined/unknown. */
int wm_dtype_bits(int32_t dt);
/* 1 when dt is a known value. */
int wm_dtype_valid(int32_t dt);
/*
 * Bytes that numel elements of dt take in raw_data (sub-byte types packed,
 * rounded up). Returns 0 on overflow or for string, 1 with *out set.
 */
int wm_dtype_nbytes(int32_t dt, uint64_t numel, uint64_t *out);

#endif
