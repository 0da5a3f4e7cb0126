/*
 * quant_carry.c - WM_QUANT_CARRY's job: a weight's ready blocks (wm_quant_carry, a GGUF's) written in
 * MatMulNBits' layout without requantizing, then checked against the weight's float values.
 *
 * Codes [N, nblk, block * bits / 8] packed low bits first (4 bits: element 2i in the low nibble), scales
 * [N, nblk] float32, zero points uint8 packed like the codes along the blocks [N, ceil(nblk * bits / 8)], or
 * float32 [N, nblk]. K is a whole number of blocks (a GGUF row is whole blocks).
 *
 * The check: every value (code - zp) * scale must equal the float the graph holds for it (the source's own
 * dequantization, possibly moved by the passes that ran before) within the rounding of a float zero point, or
 * the build stops naming the weight and the first value that differs: a carried weight is the same weight or
 * it is not written.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

const wm_quant_carry *wm_quant_carry_find(const wm_quant_config *c, const char *w) {
    for (size_t i = 0; w && i < c->n_carry; i++)
        if (c->carry[i].weight && !strcmp(c->carry[i].weight, w)) return &c->carry[i];
    return NULL;
}

void wm_qjob_carry_sizes(const wm_qjob *j, uint64_t *sz) {
    uint64_t nblk = (uint64_t)(j->K / j->bs), N = (uint64_t)j->N;
    sz[0] = N * nblk * (uint64_t)(j->bs * j->bits / 8);
    sz[1] = N * nblk * 4;
    sz[2] = j->carry->zp == 1 ? N * ((nblk * (uint64_t)j->bits + 7) / 8) : j->carry->zp == 2 ? N * nblk * 4 : 0;
}

/* Row n's value k from the written outputs. */
static float value_at(const wm_qjob *j, uint8_t *const *out, int64_t n, int64_t k, float *scale, float *zero) {
    int64_t nblk = j->K / j->bs, kb = k / j->bs, blob = j->bs * j->bits / 8, i = k % j->bs;
    const uint8_t *q = out[0] + (n * nblk + kb) * blob;
    int code = j->bits == 8 ? q[i] : (q[i / 2] >> (4 * (i % 2))) & 15;
    float s, z = (float)(1 << (j->bits - 1));
    memcpy(&s, out[1] + (n * nblk + kb) * 4, 4);
    if (j->carry->zp == 2) memcpy(&z, out[2] + (n * nblk + kb) * 4, 4);
    else if (j->carry->zp == 1) {
        int64_t row = (nblk * j->bits + 7) / 8, bit = kb * j->bits;
        z = (float)((out[2][n * row + bit / 8] >> (bit % 8)) & ((1 << j->bits) - 1));
    }
    *scale = s, *zero = z;
    return ((float)code - z) * s;
}

/* 1 when the carried value v is the graph's w: equal (integer zero points: the same product of the same factors),
 * both NaN, or with float zero points within the rounding of the offset (a few ulps of the block's range). */
static int same_value(float v, float w, float s, float z, int float_zp) {
    if (v == w || (isnan(v) && isnan(w))) return 1;
    if (!float_zp) return 0;
    float tol = 8.0f * FLT_EPSILON * fabsf(s) * (255.0f + fabsf(z));
    return fabsf(v - w) <= tol;
}

static wm_status check(const wm_qjob *j, uint8_t *const *out, int release, wm_error *err) {
    const wm_onnx_tensor *t = j->src;
    wm_bytes b = wm_onnx_tensor_bytes(t);
    int64_t K = j->K, N = j->N;
    if (t->data_type != WM_DT_FLOAT || !b.p || b.n < (uint64_t)(K * N) * 4)
        return wm_err(err, WM_ERR_INTERNAL, "tensor '%s': carried blocks need its float32 values to check against",
                      t->name ? t->name : "");
    for (int64_t a = 0; a < (j->trans ? N : K); a++) { /* the stored rows in order: [N, K] or [K, N] */
        int64_t len = j->trans ? K : N;
        const uint8_t *row = b.p + (size_t)(a * len) * 4;
        for (int64_t e = 0; e < len; e++) {
            int64_t n = j->trans ? a : e, k = j->trans ? e : a;
            float w, s, z, v = value_at(j, out, n, k, &s, &z);
            memcpy(&w, row + e * 4, 4);
            if (!same_value(v, w, s, z, j->carry->zp == 2))
                return wm_err(err, WM_ERR_INTERNAL, "tensor '%s' (%s): its carried blocks give %.9g at row %lld, "
                              "element %lld, where its float value is %.9g: not carried",
                              t->name ? t->name : "", j->carry->source, (double)v, (long long)n, (long long)k,
                              (double)w);
        }
        if (release) wm_opt_release(j->m, row, (size_t)len * 4);
    }
    return WM_OK;
}

wm_status wm_qjob_carry_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err) {
    const wm_quant_carry *c = j->carry;
    int64_t K = j->K, N = j->N, bs = j->bs, nblk = K / bs, blob = bs * j->bits / 8, zrow = (nblk * j->bits + 7) / 8;
    uint8_t *codes = malloc((size_t)K);
    float *sc = malloc((size_t)nblk * sizeof *sc), *zp = malloc((size_t)nblk * sizeof *zp);
    if (!codes || !sc || !zp) {
        free(codes);
        free(sc);
        free(zp);
        return wm_err(err, WM_ERR_NOMEM, "out of memory carrying '%s'", c->weight);
    }
    for (int64_t n = 0; n < N; n++) {
        c->row(c->ctx, n, codes, sc, zp);
        uint8_t *q = out[0] + n * nblk * blob;
        if (j->bits == 8) memcpy(q, codes, (size_t)K);
        else
            for (int64_t i = 0; i < K / 2; i++) q[i] = (uint8_t)((codes[2 * i] & 15) | (codes[2 * i + 1] << 4));
        memcpy(out[1] + n * nblk * 4, sc, (size_t)nblk * 4);
        if (c->zp == 2) memcpy(out[2] + n * nblk * 4, zp, (size_t)nblk * 4);
        else if (c->zp == 1)
            for (int64_t kb = 0; kb < nblk; kb++) {
                uint8_t *z = &out[2][n * zrow + kb * j->bits / 8], v = (uint8_t)zp[kb];
                *z = j->bits == 8 ? v : kb % 2 ? (uint8_t)((*z & 0x0f) | (v << 4)) : (uint8_t)((*z & 0xf0) | v);
            }
    }
    free(codes);
    free(sc);
    free(zp);
    return check(j, out, release, err);
}
