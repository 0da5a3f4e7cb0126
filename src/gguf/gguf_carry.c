/*
 * gguf_carry.c - ggml quantized blocks as MatMulNBits / GatherBlockQuantized
 * blocks without requantizing (see gguf.h, "carried blocks").
 *
 * Each form reads a block the way gguf_dequant.c does (the source of truth
 * for the layouts) and writes its codes, scale and zero point so that
 * (code - zero point) * scale is the dequantizer's value: bit for bit when
 * the zero point is an integer (the dequantizer's own product of the same
 * two factors), within the rounding of the offset's quotient and product
 * when it is a float (Q4_1 / Q4_K / Q5_1 / Q5_K, whose minimum m becomes
 * the zero point -m / d).
 */
#include <string.h>

#include "core/half.h"
#include "gguf/gguf.h"

static float h16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return wm_f16_to_f32(h);
}

int wm_ggml_carry_form(uint32_t type, wm_ggml_carry *form) {
    static const struct {
        uint32_t type;
        wm_ggml_carry f;
    } T[] = {
        {WM_GGML_Q4_0, {4, 32, WM_CARRY_ZP_NONE}},  {WM_GGML_Q4_1, {4, 32, WM_CARRY_ZP_FLOAT}},
        {WM_GGML_Q5_0, {8, 32, WM_CARRY_ZP_U8}},    {WM_GGML_Q5_1, {8, 32, WM_CARRY_ZP_FLOAT}},
        {WM_GGML_Q8_0, {8, 32, WM_CARRY_ZP_NONE}},  {WM_GGML_Q4_K, {4, 32, WM_CARRY_ZP_FLOAT}},
        {WM_GGML_Q5_K, {8, 32, WM_CARRY_ZP_FLOAT}}, {WM_GGML_Q6_K, {8, 16, WM_CARRY_ZP_U8}},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (T[i].type == type) {
            if (form) *form = T[i].f;
            return 1;
        }
    return 0;
}

/* One block of 32 with value = d * c - mn (c = code), as (c - z) * s: z = mn / d; a zero d is the constant -mn,
 * written as codes 0, scale 1, zero point mn. */
static void affine(uint8_t *c, float d, float mn, float *s, float *z) {
    if (d == 0.0f) {
        memset(c, 0, 32);
        *s = 1.0f, *z = mn;
        return;
    }
    *s = d, *z = mn / d;
}

/* Sub-block j's 6-bit scale and min of a Q4_K / Q5_K block (j < 8), as in gguf_dequant.c. */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One block of type at b: elements into c, scales and zero points into s, z (one per form block). */
static void carry_block(uint32_t type, const uint8_t *b, uint8_t *c, float *s, float *z) {
    switch (type) {
    case WM_GGML_Q4_0:
    case WM_GGML_Q4_1: {
        const uint8_t *qs = b + (type == WM_GGML_Q4_0 ? 2 : 4);
        for (int j = 0; j < 16; j++) c[j] = qs[j] & 0xf, c[j + 16] = qs[j] >> 4;
        if (type == WM_GGML_Q4_0) s[0] = h16(b), z[0] = 8.0f;
        else affine(c, h16(b), -h16(b + 2), s, z); /* x = q d + m */
        return;
    }
    case WM_GGML_Q5_0:
    case WM_GGML_Q5_1: {
        int one = type == WM_GGML_Q5_1;
        uint32_t qh;
        memcpy(&qh, b + (one ? 4 : 2), 4);
        const uint8_t *qs = b + (one ? 8 : 6);
        for (int j = 0; j < 16; j++) {
            c[j] = (uint8_t)((qs[j] & 0xf) | (((qh >> j) & 1) << 4));
            c[j + 16] = (uint8_t)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
        if (!one) s[0] = h16(b), z[0] = 16.0f;
        else affine(c, h16(b), -h16(b + 2), s, z);
        return;
    }
    case WM_GGML_Q8_0:
        for (int j = 0; j < 32; j++) c[j] = (uint8_t)((int)(int8_t)b[2 + j] + 128);
        s[0] = h16(b), z[0] = 128.0f;
        return;
    case WM_GGML_Q4_K:
    case WM_GGML_Q5_K: {
        int five = type == WM_GGML_Q5_K;
        float d = h16(b), dmin = h16(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
        for (int j = 0; j < 8; j++) { /* sub-block j: nibble j % 2 of bytes 32 * (j / 2) ..; Q5_K: bit j of qh */
            const uint8_t *ql = q + 32 * (j / 2);
            uint8_t *cj = c + 32 * j;
            for (int l = 0; l < 32; l++) {
                int v = j % 2 ? ql[l] >> 4 : ql[l] & 0xf;
                if (five) v |= ((qh[l] >> j) & 1) << 4;
                cj[l] = (uint8_t)v;
            }
            int sc, m;
            scale_min_k4(j, scales, &sc, &m);
            affine(cj, d * (float)sc, dmin * (float)m, &s[j], &z[j]); /* x = d1 q - m1 */
        }
        return;
    }
    case WM_GGML_Q6_K: {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = h16(b + 208);
        for (int half = 0; half < 2; half++) {
            uint8_t *y = c + 128 * half;
            for (int l = 0; l < 32; l++) {
                y[l] = (uint8_t)((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4));
                y[l + 32] = (uint8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4));
                y[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                y[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
            for (int j = 0; j < 8; j++) s[8 * half + j] = d * (float)sc[8 * half + j], z[8 * half + j] = 32.0f;
            ql += 64;
            qh += 32;
        }
        return;
    }
    default: break;
    }
}

void wm_ggml_carry_row(uint32_t type, const uint8_t *row, uint64_t n, uint8_t *codes, float *scales, float *zp) {
    wm_ggml_carry f;
    uint32_t be = wm_ggml_block_elems(type), by = wm_ggml_block_bytes(type);
    if (!wm_ggml_carry_form(type, &f) || !be) return;
    uint64_t per = be / f.block; /* form blocks per ggml block */
    for (uint64_t i = 0; i < n / be; i++)
        carry_block(type, row + i * by, codes + i * be, scales + i * per, zp + i * per);
}
