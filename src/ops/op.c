/* op.c - helpers every op uses: attributes, type checks, element access, fp16. */
#include "ops/op.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/int_math.h"

const int32_t wm_types_float[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, 0};
const int32_t wm_types_int[] = {WM_DT_INT8,  WM_DT_UINT8,  WM_DT_INT16,  WM_DT_UINT16,
                                WM_DT_INT32, WM_DT_UINT32, WM_DT_INT64, WM_DT_UINT64, 0};
const int32_t wm_types_numeric[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, WM_DT_INT8,
                                    WM_DT_UINT8, WM_DT_INT16,   WM_DT_UINT16,   WM_DT_INT32,  WM_DT_UINT32,
                                    WM_DT_INT64, WM_DT_UINT64,  0};
const int32_t wm_types_all[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, WM_DT_INT8,
                                WM_DT_UINT8, WM_DT_INT16,   WM_DT_UINT16,   WM_DT_INT32,  WM_DT_UINT32,
                                WM_DT_INT64, WM_DT_UINT64,  WM_DT_BOOL,     0};
const int32_t wm_types_index[] = {WM_DT_INT32, WM_DT_INT64, 0};

uint64_t wm_tensor_numel(const wm_tensor *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (uint64_t)t->dims[i];
    return n;
}

size_t wm_dtype_size(int32_t dt) {
    int b = wm_dtype_bits(dt);
    return b >= 8 ? (size_t)b / 8 : 0;
}

/* Sub-byte types are packed (two int4 or four int2 per byte), rounded up to whole bytes. */
uint64_t wm_tensor_nbytes(const wm_tensor *t) {
    uint64_t n = 0;
    return wm_dtype_nbytes(t->dtype, wm_tensor_numel(t), &n) ? n : 0;
}

void *wm_node_alloc(wm_node *n, size_t size) {
    uint8_t *p = wm_arena_alloc(n->arena, size + 64);
    if (!p) return NULL;
    return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

const char *wm_node_label(const wm_node *n) {
    const wm_onnx_node *p = n->proto;
    if (p->name && *p->name) return p->name;
    if (p->n_output && p->output[0] && *p->output[0]) return p->output[0];
    return p->op_type ? p->op_type : "?";
}

wm_status wm_node_err(const wm_node *n, wm_error *err, wm_status s, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *dom = n->proto->domain && *n->proto->domain ? n->proto->domain : NULL;
    return wm_err(err, s, "node '%s' (%s%s%s): %s", wm_node_label(n), dom ? dom : "", dom ? "." : "",
                  n->proto->op_type, msg);
}

const wm_onnx_attr *wm_attr(const wm_node *n, const char *name) {
    for (size_t i = 0; i < n->proto->n_attribute; i++) {
        const wm_onnx_attr *a = n->proto->attribute[i];
        if (a->name && !strcmp(a->name, name)) return a;
    }
    return NULL;
}

int64_t wm_attr_int(const wm_node *n, const char *name, int64_t def) {
    const wm_onnx_attr *a = wm_attr(n, name);
    return a ? a->i : def;
}

float wm_attr_float(const wm_node *n, const char *name, float def) {
    const wm_onnx_attr *a = wm_attr(n, name);
    return a ? a->f : def;
}

const int64_t *wm_attr_ints(const wm_node *n, const char *name, size_t *count) {
    const wm_onnx_attr *a = wm_attr(n, name);
    *count = a ? a->n_ints : 0;
    return a ? a->ints : NULL;
}

const float *wm_attr_floats(const wm_node *n, const char *name, size_t *count) {
    const wm_onnx_attr *a = wm_attr(n, name);
    *count = a ? a->n_floats : 0;
    return a ? a->floats : NULL;
}

const char *wm_attr_string(const wm_node *n, const char *name, const char *def, char *buf, size_t bufsize) {
    const wm_onnx_attr *a = wm_attr(n, name);
    if (!a) return def;
    size_t k = a->s.n < bufsize - 1 ? a->s.n : bufsize - 1;
    if (k) memcpy(buf, a->s.p, k);
    buf[k] = 0;
    return buf;
}

wm_status wm_check_type(const wm_node *n, int i, const int32_t *allowed, wm_error *err) {
    int32_t dt = n->in_dtype[i];
    for (const int32_t *p = allowed; *p; p++)
        if (*p == dt) return WM_OK;
    if (!dt || i >= n->n_in) return wm_node_err(n, err, WM_ERR_INPUT, "input %d is missing", i); /* a required one */
    return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "input %d ('%s') has element type %s, which this op does not support",
                       i, n->proto->input[i], wm_dtype_name(dt));
}

wm_status wm_need_inputs(const wm_node *n, int k, wm_error *err) {
    for (int i = 0; i < k; i++)
        if (!wm_has_in(n, i))
            return wm_node_err(n, err, WM_ERR_INPUT, "input %d is missing (the op takes at least %d)", i, k);
    return WM_OK;
}

wm_status wm_check_same_type(const wm_node *n, int a, int b, wm_error *err) {
    if (n->in_dtype[a] == n->in_dtype[b]) return WM_OK;
    return wm_node_err(n, err, WM_ERR_INPUT, "inputs %d and %d have different element types (%s, %s)", a, b,
                       wm_dtype_name(n->in_dtype[a]), wm_dtype_name(n->in_dtype[b]));
}

int64_t wm_tensor_get_int(const wm_tensor *t, uint64_t i) { return wm_dt_get_int(t->dtype, t->data, i); }

int64_t wm_dt_get_int(int32_t dt, const void *d, uint64_t i) {
    switch (dt) {
    case WM_DT_INT8: return ((const int8_t *)d)[i];
    case WM_DT_UINT8: case WM_DT_BOOL: return ((const uint8_t *)d)[i];
    case WM_DT_INT16: return ((const int16_t *)d)[i];
    case WM_DT_UINT16: return ((const uint16_t *)d)[i];
    case WM_DT_INT32: return ((const int32_t *)d)[i];
    case WM_DT_UINT32: return ((const uint32_t *)d)[i];
    case WM_DT_INT64: return ((const int64_t *)d)[i];
    case WM_DT_UINT64: return (int64_t)((const uint64_t *)d)[i];
    case WM_DT_FLOAT: return wm_f64_to_i64(((const float *)d)[i]); /* NaN, out of range: INT64_MIN, no UB */
    case WM_DT_DOUBLE: return wm_f64_to_i64(((const double *)d)[i]);
    default: return 0;
    }
}

double wm_tensor_get_f64(const wm_tensor *t, uint64_t i) {
    const void *d = t->data;
    switch (t->dtype) {
    case WM_DT_FLOAT: return ((const float *)d)[i];
    case WM_DT_DOUBLE: return ((const double *)d)[i];
    case WM_DT_FLOAT16: return wm_f16_to_f32(((const uint16_t *)d)[i]);
    case WM_DT_BFLOAT16: return wm_bf16_to_f32(((const uint16_t *)d)[i]);
    default: return (double)wm_tensor_get_int(t, i);
    }
}

