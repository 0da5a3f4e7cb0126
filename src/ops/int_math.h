/*
 * int_math.h - the one definition of integer arithmetic at its edges and of
 * float -> integer conversion, shared by the engine's ops (src/ops) and the
 * optimizer's evaluators (constant folding in src/opt/fold.c, shape values in
 * src/opt/shape.c), so that a value folded ahead equals the one the engine
 * computes at run time. Nothing here is undefined behaviour in C or traps.
 *
 * Values of a signed element type travel as int64_t, of an unsigned type as
 * uint64_t; a result is stored into its element type by keeping its low bits
 * (wm_store_int in ops/scalar.h, a C cast to the narrow type). Each operation
 * below is defined so that computing it in 64 bits and keeping the low bits
 * gives exactly the narrow type's result: one function serves every width.
 *
 * onnxruntime's own results at these edges are C++ undefined behaviour (x86
 * traps on MIN / -1 and on x / 0, SIGFPE). The definitions chosen:
 *  - Add, Sub, Mul, Neg, Abs, Pow wrap around (two's complement, computed in
 *    uint64): Abs(MIN) = Neg(MIN) = MIN, as onnxruntime gives on x86.
 *  - Div truncates toward zero (ONNX, C); MIN / -1 = MIN (the wrapped
 *    quotient, 2^(w-1) kept to w bits).
 *  - Mod: fmod = 0 takes the divisor's sign (Python, numpy), fmod = 1 the
 *    dividend's (C); MIN % -1 = 0 either way.
 *  - Integer division or modulo by zero gives 0 (numpy's result; the engine's
 *    before this header too). Not a run-time error, on purpose: a Div over a
 *    tensor computes every lane, like float division (inf/NaN, no failure), so
 *    one zero lane (a masked or padded position) must not fail the whole run,
 *    and a folded subgraph that is never taken (an If branch) must not make
 *    `winml optimize` fail. The folder gives the same 0.
 *  - Pow with a negative exponent: 1^y = 1, (-1)^y = +-1 by parity, else 0
 *    (the truncated real result 1/x^|y|; 0^negative is 0, as x / 0).
 *  - BitShift by a count >= the type's width (or a negative count) gives 0;
 *    a RIGHT shift of a signed type (outside ONNX, which has only unsigned
 *    types) is arithmetic, the count clamped to width - 1. onnxruntime also
 *    gives 0 for counts >= the width.
 *  - Float -> integer (Cast, and every op that stores a computed double into
 *    an integer tensor): onnxruntime's x86 results, which are the hardware's
 *    truncating conversions (cvttss2si / cvttsd2si): see wm_f64_to_int.
 */
#ifndef WM_OPS_INT_MATH_H
#define WM_OPS_INT_MATH_H

#include <stdint.h>

#include "onnx/dtype.h"

/* ---------------------------------------------------------------- wrap-around arithmetic (any width) */

static inline int64_t wm_i64_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wm_i64_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t wm_i64_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t wm_i64_neg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
static inline int64_t wm_i64_abs(int64_t a) { return a < 0 ? wm_i64_neg(a) : a; }

/* ---------------------------------------------------------------- division, modulo */

/* Signed truncating division: x / 0 = 0, MIN / -1 = MIN (wrapped). */
static inline int64_t wm_i64_div(int64_t x, int64_t y) {
    if (y == 0) return 0;
    if (y == -1) return wm_i64_neg(x);
    return x / y;
}

/* Signed remainder: fmod = 1 has the dividend's sign (C), fmod = 0 the divisor's (Python); x % 0 = 0, x % -1 = 0. */
static inline int64_t wm_i64_mod(int64_t x, int64_t y, int fmod) {
    if (y == 0 || y == -1) return 0;
    int64_t r = x % y;
    if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y; /* |r| < |y| and opposite signs: no overflow */
    return r;
}

static inline uint64_t wm_u64_div(uint64_t x, uint64_t y) { return y ? x / y : 0; }
static inline uint64_t wm_u64_mod(uint64_t x, uint64_t y) { return y ? x % y : 0; }

/* ---------------------------------------------------------------- power */

/* x^y for y >= 0 by squaring, wrapping (exact in the low bits for every width). */
static inline uint64_t wm_u64_pow(uint64_t x, uint64_t y) {
    uint64_t r = 1;
    while (y) {
        if (y & 1) r *= x;
        x *= x;
        y >>= 1;
    }
    return r;
}

/* Signed x^y: wraps; a negative y gives 1 for x = 1, +-1 for x = -1 (by parity), else 0. */
static inline int64_t wm_i64_pow(int64_t x, int64_t y) {
    if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    return (int64_t)wm_u64_pow((uint64_t)x, (uint64_t)y);
}

/* x^y for integers of any two types, as loaded (signed sign-extended, unsigned as bits; *_uns: the type is unsigned):
 * Pow of an integer base with an integer exponent of another type means the same as with one type. */
static inline int64_t wm_int_pow(int64_t x, int x_uns, int64_t y, int y_uns) {
    if (!y_uns && y < 0) return x_uns ? x == 1 : wm_i64_pow(x, y);
    return (int64_t)wm_u64_pow((uint64_t)x, (uint64_t)y);
}

/* ---------------------------------------------------------------- shifts (bits: the element type's width) */

static inline uint64_t wm_u64_shl(uint64_t x, uint64_t y, int bits) { return y >= (uint64_t)bits ? 0 : x << y; }
static inline uint64_t wm_u64_shr(uint64_t x, uint64_t y, int bits) { return y >= (uint64_t)bits ? 0 : x >> y; }
/* Arithmetic right shift of a signed value (x already sign-extended from its width): count clamped to bits - 1. */
static inline int64_t wm_i64_sar(int64_t x, uint64_t y, int bits) {
    uint64_t k = y >= (uint64_t)bits ? (uint64_t)bits - 1 : y;
    return x < 0 ? ~(~x >> k) : x >> k; /* >> of a negative value is implementation-defined: shift its complement */
}

/* ---------------------------------------------------------------- float -> integer */

/*
 * onnxruntime's Cast (and Pow's int result) on x86 is the hardware's truncating
 * conversion, which for NaN, +-inf and values out of range gives the "integer
 * indefinite" value (the type's minimum) instead of trapping. Reproduced here
 * without C's undefined out-of-range conversion:
 *   int8, int16, uint8, uint16, int32: the 32-bit conversion (NaN, inf, out of
 *     int32 range -> INT32_MIN), then the low bits (so 300.7 -> int8 44,
 *     -1.0 -> uint8 255, NaN -> int8 0);
 *   int64: NaN, inf, out of int64 range -> INT64_MIN;
 *   uint32, uint64: x >= 2^(w-1) ? conv(x - 2^(w-1)) ^ 2^(w-1) : conv(x), with
 *     conv the signed w-bit conversion above (NaN -> 2^(w-1), +inf -> 0,
 *     -inf -> 2^(w-1), -1.0 -> the all-ones value, 3e9 -> uint32 3000000000).
 *   bool: x != 0 (NaN -> true).
 * These match onnxruntime 1.32 on x86 for float32 and float64 sources. From a
 * float16 source, onnxruntime converts to uint32 through int64, so there NaN
 * and -inf give 0 where this gives 2^31 (the one difference; every finite
 * float16 agrees).
 */
static inline int32_t wm_f64_to_i32(double x) { return x > -2147483649.0 && x < 2147483648.0 ? (int32_t)x : INT32_MIN; }
static inline int64_t wm_f64_to_i64(double x) {
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? (int64_t)x : INT64_MIN;
}
static inline uint32_t wm_f64_to_u32(double x) {
    return x >= 2147483648.0 ? (uint32_t)wm_f64_to_i32(x - 2147483648.0) ^ 0x80000000u : (uint32_t)wm_f64_to_i32(x);
}
static inline uint64_t wm_f64_to_u64(double x) {
    return x >= 9223372036854775808.0 ? (uint64_t)wm_f64_to_i64(x - 9223372036854775808.0) ^ 0x8000000000000000u
                                      : (uint64_t)wm_f64_to_i64(x);
}

/* x converted to integer (or bool) element type dt, as bits to keep the low part of (see above). */
static inline int64_t wm_f64_to_int(int32_t dt, double x) {
    switch (dt) {
    case WM_DT_BOOL: return x != 0;
    case WM_DT_UINT32: return (int64_t)wm_f64_to_u32(x);
    case WM_DT_INT64: return wm_f64_to_i64(x);
    case WM_DT_UINT64: return (int64_t)wm_f64_to_u64(x);
    default: return wm_f64_to_i32(x);
    }
}

/* ---------------------------------------------------------------- checked index arithmetic */

/* Checked a + b, a * b for sizes and offsets: 1 when *r is the exact result, 0 when it leaves int64 (as
 * core/arena.h's wm_mul_u64 for unsigned). */
static inline int wm_add_i64_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline int wm_mul_i64_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

/*
 * ONNX Slice on one axis of length dim (>= 0) with step != 0: start and end made non-negative (+dim) and clamped as
 * the spec says ([0, dim] for a positive step, [-1, dim - 1] for a negative one), for any int64 values (INT64_MIN,
 * INT64_MAX included). Returns the element count; *first gets the first index taken.
 */
static inline int64_t wm_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first) {
    int64_t b = start < 0 ? start + dim : start, e = end < 0 ? end + dim : end; /* no overflow: dim >= 0 */
    if (step > 0) {
        b = b < 0 ? 0 : b > dim ? dim : b;
        e = e < 0 ? 0 : e > dim ? dim : e;
        *first = b;
        return e > b ? (int64_t)((uint64_t)(e - b - 1) / (uint64_t)step + 1) : 0;
    }
    b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    *first = b;
    return b > e ? (int64_t)((uint64_t)(b - e - 1) / (0 - (uint64_t)step) + 1) : 0;
}

/*
 * Element count of ONNX Range(start, limit, delta) = max(ceil((limit - start) / delta), 0), without overflow:
 * integers (signed as int64; a uint64 range passes uns = 1 with the values' bits) as the distance in uint64 over
 * |delta|; floats in double. 1 when the count is finite and at most max, else 0 (delta 0, NaN, inf, 1e60 by 1).
 */
static inline int wm_range_count_int(int64_t start, int64_t limit, int64_t delta, int uns, uint64_t max, uint64_t *cnt) {
    uint64_t span, step;
    if (uns) {
        uint64_t a = (uint64_t)start, b = (uint64_t)limit;
        span = b > a ? b - a : 0, step = (uint64_t)delta;
    } else if (delta > 0)
        span = limit > start ? (uint64_t)limit - (uint64_t)start : 0, step = (uint64_t)delta;
    else
        span = start > limit ? (uint64_t)start - (uint64_t)limit : 0, step = 0 - (uint64_t)delta;
    if (!step) return 0;
    *cnt = span ? (span - 1) / step + 1 : 0;
    return *cnt <= max;
}

static inline int wm_range_count_f64(double start, double limit, double delta, uint64_t max, uint64_t *cnt) {
    double c = delta != 0 ? __builtin_ceil((limit - start) / delta) : __builtin_nan("");
    if (!(c <= (double)max)) return 0; /* NaN too */
    *cnt = c > 0 ? (uint64_t)c : 0;
    return 1;
}

/*
 * Whether a tensor of these dims may exist: every dim >= 0 and the product of the dims, a 0 counted as 1, at most
 * limit. Every stride and offset an op computes from such dims fits int64, for an empty tensor too (whose other
 * dims could otherwise be anything: [0, 2^62, 2^62]). 1: yes; 0: too large; -1: a negative dim.
 */
static inline int wm_dims_fit(const int64_t *dims, int rank, uint64_t limit) {
    uint64_t p = 1;
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0) return -1;
    for (int d = 0; d < rank; d++)
        if (dims[d] && (__builtin_mul_overflow(p, (uint64_t)dims[d], &p) || p > limit)) return 0;
    return 1;
}

#endif
