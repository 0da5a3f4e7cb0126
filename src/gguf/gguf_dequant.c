/*
 * gguf_dequant.c - ggml block formats to float32: the reference conversion,
 * one plain loop per type (no SIMD; a vector version would live in a
 * gguf_dequant_<isa>.c of its own and be checked against these).
 *
 * Every value is computed in float32 with ggml's order of operations
 * (scale * sub-scale first, then * q, then - min), so the results are the
 * ones of ggml and gguf-py bit for bit. Block layouts (little-endian,
 * f16 = IEEE half):
 *   Q4_0 {f16 d; u8 qs[16]}                  x = (nibble - 8) * d
 *   Q4_1 {f16 d, m; u8 qs[16]}               x = nibble * d + m
 *   Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}        x = (nibble | high bit << 4) - 16) * d
 *   Q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}     x = (nibble | high bit << 4) * d + m
 *   Q8_0 {f16 d; i8 qs[32]}                  x = q * d
 *   Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}            8 sub-blocks of 32, 6-bit scale and min each
 *   Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}  the same with a fifth bit from qh
 *   Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}       16 sub-blocks of 16, 6-bit values - 32
 * In the 32-element formats element j < 16 is the low nibble of qs[j] and
 * element j + 16 its high nibble.
 */
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"

static float h16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return wm_f16_to_f32(h);
}

static void q4_0(const uint8_t *b, float *y) {
    float d = h16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0xf) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void q4_1(const uint8_t *b, float *y) {
    float d = h16(b), m = h16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0xf) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void q5_0(const uint8_t *b, float *y) {
    float d = h16(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

static void q5_1(const uint8_t *b, float *y) {
    float d = h16(b), m = h16(b + 2);
    uint32_t qh;
    memcpy(&qh, b + 4, 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = (float)lo * d + m;
        y[j + 16] = (float)hi * d + m;
    }
}

static void q8_0(const uint8_t *b, float *y) {
    float d = h16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Sub-block j's 6-bit scale and min of a Q4_K / Q5_K block (j < 8). */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void q4_k(const uint8_t *b, float *y) {
    float d = h16(b), dmin = h16(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int j = 0; j < 8; j += 2) { /* two sub-blocks share 32 bytes: low nibbles, then high */
        int sc, m;
        scale_min_k4(j, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(j + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[l] = d1 * (float)(q[l] & 0xf) - m1;
        for (int l = 0; l < 32; l++) y[32 + l] = d2 * (float)(q[l] >> 4) - m2;
        q += 32;
        y += 64;
    }
}

static void q5_k(const uint8_t *b, float *y) {
    float d = h16(b), dmin = h16(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
    for (int j = 0; j < 8; j += 2) { /* sub-block j takes bit j of qh[l] as its fifth bit */
        int sc, m;
        scale_min_k4(j, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(j + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[l] = d1 * (float)((ql[l] & 0xf) | (((qh[l] >> j) & 1) << 4)) - m1;
        for (int l = 0; l < 32; l++) y[32 + l] = d2 * (float)((ql[l] >> 4) | (((qh[l] >> (j + 1)) & 1) << 4)) - m2;
        ql += 32;
        y += 64;
    }
}

static void q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = h16(b + 208);
    for (int half = 0; half < 2; half++) { /* 128 elements: 64 bytes of ql, 32 of qh, 8 scales */
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is + 0] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

void wm_ggml_dequant_blocks(uint32_t type, const uint8_t *src, size_t nb, float *dst) {
    uint32_t be = wm_ggml_block_elems(type), by = wm_ggml_block_bytes(type);
    switch (type) {
    case WM_GGML_F32: memcpy(dst, src, nb * 4); return;
    case WM_GGML_F16:
        for (size_t i = 0; i < nb; i++) dst[i] = h16(src + 2 * i);
        return;
    case WM_GGML_BF16:
        for (size_t i = 0; i < nb; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = wm_bf16_to_f32(h);
        }
        return;
    default: break;
    }
    void (*fn)(const uint8_t *, float *) = NULL;
    switch (type) {
    case WM_GGML_Q4_0: fn = q4_0; break;
    case WM_GGML_Q4_1: fn = q4_1; break;
    case WM_GGML_Q5_0: fn = q5_0; break;
    case WM_GGML_Q5_1: fn = q5_1; break;
    case WM_GGML_Q8_0: fn = q8_0; break;
    case WM_GGML_Q4_K: fn = q4_k; break;
    case WM_GGML_Q5_K: fn = q5_k; break;
    case WM_GGML_Q6_K: fn = q6_k; break;
    default: memset(dst, 0, nb * be * sizeof *dst); return; /* callers check wm_ggml_type_supported first */
    }
    for (size_t i = 0; i < nb; i++) fn(src + i * by, dst + i * be);
}

void wm_ggml_dequant_range(uint32_t type, const uint8_t *row, uint64_t c0, size_t n, float *dst) {
    uint32_t be = wm_ggml_block_elems(type), by = wm_ggml_block_bytes(type);
    if (!be || !n) return;
    uint64_t b = c0 / be;
    size_t skip = (size_t)(c0 % be);
    float tmp[256];
    if (skip) { /* the tail of a first partial block */
        wm_ggml_dequant_blocks(type, row + b * by, 1, tmp);
        size_t k = be - skip < n ? be - skip : n;
        memcpy(dst, tmp + skip, k * sizeof *dst);
        dst += k, n -= k, b++;
    }
    size_t whole = n / be;
    if (whole) {
        wm_ggml_dequant_blocks(type, row + b * by, whole, dst);
        dst += whole * be, n -= whole * be, b += whole;
    }
    if (n) { /* the head of a last partial block */
        wm_ggml_dequant_blocks(type, row + b * by, 1, tmp);
        memcpy(dst, tmp, n * sizeof *dst);
    }
}

const uint8_t *wm_gguf_row(const wm_gguf_tensor *t, uint64_t r) {
    if (!t->ne[0] || r >= t->numel / t->ne[0]) return NULL;
    return t->data + r * t->row_bytes;
}

wm_status wm_gguf_dequant(const wm_gguf_tensor *t, uint64_t first, size_t n, float *dst, wm_error *err) {
    if (!wm_ggml_type_supported(t->type))
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': type %s is not supported (%s)", t->name,
                      wm_ggml_type_name(t->type), wm_ggml_supported_list());
    uint64_t end;
    if (!wm_add_u64(first, n, &end) || end > t->numel)
        return wm_err(err, WM_ERR_INTERNAL, "tensor '%s': elements [%llu, %llu) out of %llu", t->name,
                      (unsigned long long)first, (unsigned long long)first + n, (unsigned long long)t->numel);
    while (n) {
        uint64_t r = first / t->ne[0], c = first % t->ne[0];
        size_t k = t->ne[0] - c < n ? (size_t)(t->ne[0] - c) : n;
        wm_ggml_dequant_range(t->type, t->data + r * t->row_bytes, c, k, dst);
        first += k, dst += k, n -= k;
    }
    return WM_OK;
}
