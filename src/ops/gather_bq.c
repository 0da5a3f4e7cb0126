/*
 * gather_bq.c - com.microsoft GatherBlockQuantized: Gather over a
 * block-quantized table, dequantized on the way out. An int4 build's token
 * embedding (the tied lm_head's MatMulNBits codes, reshaped, or its own).
 *
 * Inputs: data, indices (int32/int64), scales (float32/float16/bfloat16),
 * zero_points (optional, data's type). Attributes gather_axis (0),
 * quantize_axis (1), block_size (128; a power of two >= 16), bits (4).
 *   data uint8: bits 2, 4 or 8 codes packed low bits first along the last
 *       axis, which must be quantize_axis (gather_axis 0); the logical last
 *       dim is 8/bits times the stored one. Zero points are packed the same
 *       way along the scales' last axis; absent, they are 2^(bits-1).
 *   data int4/uint4: any two distinct axes; zero points shaped like the
 *       scales; absent, 0.
 * scales: data's logical shape with quantize_axis divided by block_size
 * (rounded up). y = (float)(q - zp) * scale, in the scales' type.
 * Output: data.shape[:g] + indices.shape + data.shape[g+1:] (logical).
 * An index outside [-dim, dim) is an input error (onnxruntime writes zeros).
 */
#include <string.h>

#include "ops/cast_narrow.h"
#include "ops/op.h"

typedef struct gbq {
    int gaxis, qaxis;  /* normalized at infer (rank known then) */
    int64_t bs;
    int bits, per;     /* per: codes per stored element (uint8: 8/bits, else 1) */
} gbq;

static const int32_t data_types[] = {WM_DT_UINT8, WM_DT_INT4, WM_DT_UINT4, 0};
static const int32_t scale_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, 0};

static wm_status gbq_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, data_types, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    if (!st) st = wm_check_type(n, 2, scale_types, err);
    if (st) return st;
    if (wm_has_in(n, 3) && n->in_dtype[3] != n->in_dtype[0])
        return wm_node_err(n, err, WM_ERR_INPUT, "zero_points are %s, data %s: they must share a type",
                           wm_dtype_name(n->in_dtype[3]), wm_dtype_name(n->in_dtype[0]));
    gbq *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->bs = wm_attr_int(n, "block_size", 128);
    int64_t bits = wm_attr_int(n, "bits", 4);
    if (s->bs < 16 || s->bs > (1 << 30) || (s->bs & (s->bs - 1)))
        return wm_node_err(n, err, WM_ERR_INPUT, "block_size %lld: must be a power of two in [16, 2^30]",
                           (long long)s->bs);
    if (n->in_dtype[0] == WM_DT_UINT8 ? bits != 2 && bits != 4 && bits != 8 : bits != 4)
        return wm_node_err(n, err, WM_ERR_INPUT, "bits %lld with %s data (uint8: 2, 4 or 8; int4/uint4: 4)",
                           (long long)bits, wm_dtype_name(n->in_dtype[0]));
    s->bits = (int)bits;
    s->per = n->in_dtype[0] == WM_DT_UINT8 ? 8 / s->bits : 1;
    n->state = s;
    n->out_dtype[0] = n->in_dtype[2];
    return WM_OK;
}

static wm_status gbq_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    gbq *s = n->state;
    const wm_tensor *d = in[0], *ix = in[1], *sc = in[2];
    int r = d->rank;
    s->gaxis = wm_axis(wm_attr_int(n, "gather_axis", 0), r);
    s->qaxis = wm_axis(wm_attr_int(n, "quantize_axis", 1), r);
    if (s->gaxis < 0 || s->qaxis < 0 || s->gaxis == s->qaxis)
        return wm_node_err(n, err, WM_ERR_INPUT, "gather_axis and quantize_axis must be distinct axes of the rank-%d data", r);
    if (d->dtype == WM_DT_UINT8 && (s->gaxis != 0 || s->qaxis != r - 1))
        return wm_node_err(n, err, WM_ERR_INPUT, "uint8 data needs gather_axis 0 and quantize_axis the last axis");
    if (r - 1 + ix->rank > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output rank over %d", WM_MAX_RANK);
    if (sc->rank != r) return wm_node_err(n, err, WM_ERR_INPUT, "scales rank %d, data rank %d: they must match", sc->rank, r);
    for (int a = 0; a < r; a++) {
        int64_t want = a == s->qaxis ? (d->dims[a] * s->per + s->bs - 1) / s->bs : d->dims[a];
        if (sc->dims[a] != want)
            return wm_node_err(n, err, WM_ERR_INPUT, "scales dim %d is %lld, expected %lld", a, (long long)sc->dims[a],
                               (long long)want);
    }
    if (wm_has_in(n, 3)) {
        const wm_tensor *z = in[3];
        if (z->rank != r) return wm_node_err(n, err, WM_ERR_INPUT, "zero_points rank %d, scales rank %d", z->rank, r);
        for (int a = 0; a < r; a++) {
            int64_t want = a == s->qaxis ? (sc->dims[a] + s->per - 1) / s->per : sc->dims[a];
            if (z->dims[a] != want)
                return wm_node_err(n, err, WM_ERR_INPUT, "zero_points dim %d is %lld, expected %lld", a,
                                   (long long)z->dims[a], (long long)want);
        }
    }
    int k = 0;
    for (int a = 0; a < s->gaxis; a++) out[0]->dims[k++] = d->dims[a];
    for (int a = 0; a < ix->rank; a++) out[0]->dims[k++] = ix->dims[a];
    for (int a = s->gaxis + 1; a < r; a++) out[0]->dims[k++] = d->dims[a];
    out[0]->rank = k;
    if (s->per > 1) out[0]->dims[k - 1] *= s->per; /* uint8: the quantized (last) axis holds per codes a byte */
    return WM_OK;
}

/* Code i of the logical data (uint8 packed per codes a byte, low bits first; int4 sign-extended). */
static inline int code_at(int32_t dt, int bits, const uint8_t *p, int64_t i) {
    if (dt == WM_DT_UINT8) {
        if (bits == 8) return p[i];
        int per = 8 / bits;
        return (p[i / per] >> (bits * (int)(i % per))) & ((1 << bits) - 1);
    }
    int c = wm_narrow_get(dt, p, (uint64_t)i);
    return dt == WM_DT_INT4 && c >= 8 ? c - 16 : c;
}

static inline void put(int32_t dt, void *y, int64_t i, float v) {
    if (dt == WM_DT_FLOAT) ((float *)y)[i] = v;
    else if (dt == WM_DT_FLOAT16) ((uint16_t *)y)[i] = wm_f32_to_f16(v);
    else ((uint16_t *)y)[i] = wm_f32_to_bf16(v);
}

static inline float scale_at(int32_t dt, const void *p, int64_t i) {
    if (dt == WM_DT_FLOAT) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == WM_DT_FLOAT16 ? wm_f16_to_f32(h) : wm_bf16_to_f32(h);
}

typedef struct gbq_run_args {
    const wm_node *n;
    wm_tensor *const *in;
    wm_tensor *out;
    int64_t M, G, blk, nidx;  /* data as [M, G (gather axis), blk], logical */
    int64_t QD, QN;           /* data as [., QD (quantize axis), QN], logical */
    int64_t nsb;              /* scale blocks along the quantize axis */
} gbq_run_args;

/* Output rows [r0, r1) of [M * nidx] rows of blk values; indices already checked. */
static void gbq_rows(const gbq_run_args *a, int64_t r0, int64_t r1) {
    const gbq *s = a->n->state;
    const wm_tensor *d = a->in[0], *ix = a->in[1], *sc = a->in[2];
    const wm_tensor *z = wm_has_in(a->n, 3) ? a->in[3] : NULL;
    int32_t dt = d->dtype, st = sc->dtype;
    int zdef = dt == WM_DT_UINT8 ? 1 << (s->bits - 1) : 0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t m = r / a->nidx, j = wm_tensor_get_int(ix, (uint64_t)(r % a->nidx));
        if (j < 0) j += a->G;
        int64_t base = (m * a->G + j) * a->blk;
        if (a->QN == 1 && !z) { /* quantize axis last (every uint8 table): runs of bs codes share a scale */
            for (int64_t e0 = 0; e0 < a->blk; e0 += a->QD) {
                int64_t srow = (base + e0) / a->QD * a->nsb;
                for (int64_t b = 0; b < a->nsb; b++) {
                    float scale = scale_at(st, sc->data, srow + b);
                    int64_t y0 = b * s->bs, y1 = y0 + s->bs < a->QD ? y0 + s->bs : a->QD;
                    for (int64_t y = y0; y < y1; y++)
                        put(st, a->out->data, r * a->blk + e0 + y,
                            (float)(code_at(dt, s->bits, d->data, base + e0 + y) - zdef) * scale);
                }
            }
            continue;
        }
        for (int64_t e = 0; e < a->blk; e++) {
            int64_t di = base + e; /* logical data index -> (x, y, zq) over [., QD, QN] */
            int64_t x = di / (a->QD * a->QN), y = di / a->QN % a->QD, zq = di % a->QN;
            int64_t si = (x * a->nsb + y / s->bs) * a->QN + zq;
            int zp = zdef;
            if (z) {
                if (dt != WM_DT_UINT8) zp = code_at(dt, 4, z->data, si);
                else if (s->per == 1) zp = ((const uint8_t *)z->data)[si];
                else { /* packed along the scales' last (quantize) axis: rows of ceil(nsb / per) bytes */
                    int64_t row = si / a->nsb, q = si % a->nsb, zc = (a->nsb + s->per - 1) / s->per;
                    zp = code_at(WM_DT_UINT8, s->bits, (const uint8_t *)z->data + row * zc, q);
                }
            }
            put(st, a->out->data, r * a->blk + e, (float)(code_at(dt, s->bits, d->data, di) - zp) * scale_at(st, sc->data, si));
        }
    }
}

static void gbq_part(void *arg, int ith, int nth) {
    const gbq_run_args *a = arg;
    int64_t rows = a->M * a->nidx, r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    gbq_rows(a, r0, r1);
}

static wm_status gbq_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const gbq *s = n->state;
    const wm_tensor *d = in[0];
    int r = d->rank;
    int64_t dims[WM_MAX_RANK];
    for (int a = 0; a < r; a++) dims[a] = d->dims[a];
    dims[s->qaxis] *= s->per;
    gbq_run_args a = {n, in, out[0], 1, dims[s->gaxis], 1, (int64_t)wm_tensor_numel(in[1]), dims[s->qaxis], 1, 0};
    for (int k = 0; k < s->gaxis; k++) a.M *= dims[k];
    for (int k = s->gaxis + 1; k < r; k++) a.blk *= dims[k];
    for (int k = s->qaxis + 1; k < r; k++) a.QN *= dims[k];
    a.nsb = (a.QD + s->bs - 1) / s->bs;
    for (int64_t i = 0; i < a.nidx; i++) {
        int64_t j = wm_tensor_get_int(in[1], (uint64_t)i);
        if (j < -a.G || j >= a.G)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "index %lld out of range [-%lld, %lld)", (long long)j,
                               (long long)a.G, (long long)a.G);
    }
    int64_t rows = a.M * a.nidx;
    if (!rows || !a.blk) return WM_OK;
    wm_pool_run(x->pool, gbq_part, &a, rows * a.blk >= (1 << 16) ? 0 : 1);
    return WM_OK;
}

static const wm_op ops[] = {
    {"com.microsoft", "GatherBlockQuantized", 1, 0, gbq_init, gbq_infer, gbq_run, NULL, 0, 0},
};

const wm_op_table wm_ops_gather_bq = {ops, sizeof ops / sizeof ops[0]};
