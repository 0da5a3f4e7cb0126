/*
 * qmatmul.c - quantized matrix products: MatMulInteger (10), QLinearMatMul
 * (10, 21), com.microsoft DynamicQuantizeMatMul and MatMulNBits.
 *
 * MatMulInteger / QLinearMatMul follow numpy matmul (batch dims broadcast);
 * zero points and scales are per tensor (one element), per row of A (a 1-D
 * vector of M, or (..., M, 1)) and per column of B ((N) or (..., 1, N)),
 * broadcast over the batch. Products are exact int32 sums of
 * (a - a_zp)(b - b_zp); QLinearMatMul requantizes with
 * round(acc * (a_scale * b_scale / y_scale)) + y_zp (the multiplier in the
 * scale type, the product in double, like the reference), saturating.
 *
 * MatMulNBits: see nbits.h. A float32 or float16, scales of A's type, zero
 * points packed uint8 or float, g_idx only when it is the trivial k / block
 * (constant), optional bias; accuracy_level 4 lets small-M products
 * quantize the activations to int8 per block as onnxruntime does, other
 * levels compute in float32.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/int_math.h"
#include "ops/nbits.h"
#include "ops/quant.h"
#include "ops/rows.h"

/* ---------------------------------------------------------------- batch shapes */

typedef struct qshape {
    int64_t M, N, K, batch;
    int ra, rb, nb;
    int64_t bdims[WM_MAX_RANK];
} qshape;

static wm_status qshape_of(const wm_node *n, const wm_tensor *a, const wm_tensor *b, qshape *s, wm_error *err) {
    memset(s, 0, sizeof *s);
    s->ra = a->rank, s->rb = b->rank;
    if (s->ra < 1 || s->rb < 1) return wm_node_err(n, err, WM_ERR_INPUT, "operands must have rank >= 1");
    int64_t ak = a->dims[s->ra - 1], bk = s->rb == 1 ? b->dims[0] : b->dims[s->rb - 2];
    if (ak != bk) return wm_node_err(n, err, WM_ERR_INPUT, "inner dims differ (%lld vs %lld)", (long long)ak, (long long)bk);
    s->M = s->ra == 1 ? 1 : a->dims[s->ra - 2], s->K = ak, s->N = s->rb == 1 ? 1 : b->dims[s->rb - 1];
    int na = s->ra > 2 ? s->ra - 2 : 0, nbb = s->rb > 2 ? s->rb - 2 : 0;
    s->nb = na > nbb ? na : nbb;
    s->batch = 1;
    for (int i = 0; i < s->nb; i++) {
        int ia = i - (s->nb - na), ib = i - (s->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return wm_node_err(n, err, WM_ERR_INPUT, "batch dims do not broadcast");
        s->bdims[i] = da == 1 ? db : da;
        s->batch *= s->bdims[i];
    }
    return WM_OK;
}

static void qshape_out(const qshape *s, wm_tensor *out) {
    int r = 0;
    for (int i = 0; i < s->nb; i++) out->dims[r++] = s->bdims[i];
    if (s->ra > 1) out->dims[r++] = s->M;
    if (s->rb > 1) out->dims[r++] = s->N;
    out->rank = r;
}

/*
 * Element offset of (batch q, row i, col j) in t, t right-aligned against (bdims..., R, C) with dims of 1
 * broadcast; a 1-D t of length R != C with per_row set is indexed by the row (per-row vectors of A).
 */
static int64_t bc_off(const wm_tensor *t, const qshape *s, int64_t q, int64_t i, int64_t j, int per_row, int64_t R) {
    if (!t || wm_tensor_numel(t) == 1) return 0;
    if (per_row && t->rank == 1 && t->dims[0] == R) return i;
    int64_t idx[WM_MAX_RANK + 2];
    int full = s->nb + 2;
    for (int d = s->nb - 1; d >= 0; d--) idx[d] = q % s->bdims[d], q /= s->bdims[d];
    idx[s->nb] = i, idx[s->nb + 1] = j;
    int64_t off = 0, stride = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        int fd = full - t->rank + d;
        int64_t v = fd >= 0 ? idx[fd] : 0;
        if (t->dims[d] != 1) off += v * stride;
        stride *= t->dims[d];
    }
    return off;
}

/* checks that a zero point / scale of an operand broadcasts (per tensor, per row of A, per column of B) */
static wm_status check_qparam(const wm_node *n, const wm_tensor *t, const qshape *s, int of_a, const char *what,
                              wm_error *err) {
    if (!t || wm_tensor_numel(t) == 1) return WM_OK;
    if (of_a && t->rank == 1 && t->dims[0] == s->M) return WM_OK;
    int full = s->nb + 2;
    if (t->rank > full) return wm_node_err(n, err, WM_ERR_INPUT, "%s has rank %d", what, t->rank);
    for (int d = 0; d < t->rank; d++) {
        int fd = full - t->rank + d;
        int64_t want = fd < s->nb ? s->bdims[fd] : fd == s->nb ? (of_a ? s->M : 1) : (of_a ? 1 : s->N);
        if (t->dims[d] != 1 && t->dims[d] != want)
            return wm_node_err(n, err, WM_ERR_INPUT, "%s does not broadcast per %s", what, of_a ? "row of A" : "column of B");
    }
    return WM_OK;
}

static int64_t batch_off(const qshape *s, const wm_tensor *t, int64_t q, int64_t mat) {
    int nt = t->rank > 2 ? t->rank - 2 : 0;
    int64_t off = 0, stride = mat;
    for (int i = s->nb - 1; i >= 0; i--) {
        int64_t idx = q % s->bdims[i];
        q /= s->bdims[i];
        int it = i - (s->nb - nt);
        if (it < 0) continue;
        if (t->dims[it] != 1) off += idx * stride;
        stride *= t->dims[it];
    }
    return off;
}

static inline int32_t q8(const void *p, int sgn, int64_t i) {
    return sgn ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* acc (M, N) int32 of batch q: sum_k (A - azp)(B - bzp) */
static void int_gemm(const qshape *s, wm_tensor *const *in, int ia_zp, int ib_zp, int ib, int64_t q, int32_t *acc) {
    const wm_tensor *a = in[0], *b = in[ib], *az = ia_zp >= 0 ? in[ia_zp] : NULL, *bz = ib_zp >= 0 ? in[ib_zp] : NULL;
    int as = a->dtype == WM_DT_INT8, bs = b->dtype == WM_DT_INT8;
    const uint8_t *A = (const uint8_t *)a->data + batch_off(s, a, q, s->M * s->K);
    const uint8_t *B = (const uint8_t *)b->data + batch_off(s, b, q, s->K * s->N);
    for (int64_t i = 0; i < s->M; i++) {
        int32_t za = az ? q8(az->data, as, bc_off(az, s, q, i, 0, 1, s->M)) : 0;
        int32_t *c = acc + i * s->N;
        memset(c, 0, (size_t)s->N * sizeof *c);
        for (int64_t k = 0; k < s->K; k++) {
            int32_t av = q8(A, as, i * s->K + k) - za;
            if (!av) continue;
            for (int64_t j = 0; j < s->N; j++) /* int32 sums wrap (MLAS's SIMD adds do), never overflow in C */
                c[j] = (int32_t)wm_i64_add(c[j], av * (q8(B, bs, k * s->N + j) - (bz ? q8(bz->data, bs, bc_off(bz, s, q, 0, j, 0, 0)) : 0)));
        }
    }
}

/* ---------------------------------------------------------------- MatMulInteger */

/* 64-byte aligned bytes carved from a workspace cursor */
static float *take(uint8_t **p, size_t bytes) {
    float *r = (float *)(((uintptr_t)*p + 63) & ~(uintptr_t)63);
    *p = (uint8_t *)r + bytes;
    return r;
}

static const int32_t i8_types[] = {WM_DT_INT8, WM_DT_UINT8, 0};

/* A constant 2-D B (and its zero points) packed once for the kernel table's integer GEMM, or NULL. */
typedef struct mistate {
    const void *packed;
    int64_t K, N;
} mistate;

/* Packs input 1 (B) with its zero point, input 3, into n->state when both are constant, B 2-D and the zero
   point one value or one per column; else leaves n->state NULL. */
static wm_status mi_pack(wm_node *n, wm_error *err) {
    const wm_tensor *b = n->in_const[1], *bz = wm_has_in(n, 3) ? n->in_const[3] : NULL;
    if (!b || b->rank != 2 || (wm_has_in(n, 3) && !bz)) return WM_OK;
    int64_t K = b->dims[0], N = b->dims[1];
    uint64_t nz = bz ? wm_tensor_numel(bz) : 0;
    if (K <= 0 || N <= 0 || (bz && nz != 1 && !(bz->rank == 1 && nz == (uint64_t)N))) return WM_OK;
    mistate *ms = wm_node_alloc(n, sizeof *ms);
    int32_t *zps = nz > 1 ? malloc((size_t)N * sizeof *zps) : NULL;
    void *pk = ms ? wm_node_alloc(n, wm_igemm_pack_b_size(K, N)) : NULL;
    if (!ms || !pk || (nz > 1 && !zps)) {
        free(zps);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    for (uint64_t j = 0; zps && j < nz; j++) zps[j] = (int32_t)wm_tensor_get_int(bz, j);
    wm_igemm_pack_b(K, N, b->data, N, nz == 1 ? (int32_t)wm_tensor_get_int(bz, 0) : 0, zps, pk);
    free(zps);
    ms->packed = pk, ms->K = K, ms->N = N;
    n->state = ms;
    n->packed_bytes += wm_igemm_pack_b_size(K, N);
    wm_node_release_const(n, 1);
    return WM_OK;
}

static wm_status mi_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, i8_types, err);
    if (!st) st = wm_check_type(n, 1, i8_types, err);
    if (!st && wm_has_in(n, 2) && n->in_dtype[2] != n->in_dtype[0]) st = wm_node_err(n, err, WM_ERR_INPUT, "a_zero_point type differs from A");
    if (!st && wm_has_in(n, 3) && n->in_dtype[3] != n->in_dtype[1]) st = wm_node_err(n, err, WM_ERR_INPUT, "b_zero_point type differs from B");
    n->out_dtype[0] = WM_DT_INT32;
    return st ? st : mi_pack(n, err);
}

/* The kernel's arguments when B is packed and A's zero point is one value: A as [rows, K], C as [rows, N]. */
/* What MatMulInteger and DynamicQuantizeMatMul give the kernel alike: A [rows, K] at A, the packed constant B. */
static void mi_base(const wm_node *n, const wm_tensor *a, const void *A, wm_igemm_args *g) {
    const mistate *ms = n->state;
    memset(g, 0, sizeof *g);
    g->M = (int64_t)(wm_tensor_numel(a) / (uint64_t)ms->K), g->N = ms->N, g->K = ms->K;
    g->A = A, g->lda = ms->K;
    g->b_signed = n->in_dtype[1] == WM_DT_INT8, g->packed_b = ms->packed, g->ldb = ms->N;
}

static int mi_args(const wm_node *n, wm_tensor *const *in, wm_igemm_args *g) {
    const mistate *ms = n->state;
    const wm_tensor *a = in[0], *az = wm_has_in(n, 2) ? in[2] : NULL;
    if (!ms || a->rank < 2 || a->dims[a->rank - 1] != ms->K || (az && wm_tensor_numel(az) != 1)) return 0;
    mi_base(n, a, a->data, g);
    g->a_signed = a->dtype == WM_DT_INT8;
    g->a_zero_point = az && az->data ? (int32_t)wm_tensor_get_int(az, 0) : 0; /* no data when sizing at plan time */
    g->ldc = ms->N;
    return 1;
}

static size_t mi_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    wm_igemm_args g;
    return mi_args(n, in, &g) ? wm_igemm_workspace_size(&g, nth) : 0;
}

static void mi_part(void *arg, int ith, int nth) { wm_kernels_get()->igemm(arg, ith, nth); }

static wm_status mi_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    qshape s;
    wm_status st = qshape_of(n, in[0], in[1], &s, err);
    if (!st) st = check_qparam(n, wm_has_in(n, 2) ? in[2] : NULL, &s, 1, "a_zero_point", err);
    if (!st) st = check_qparam(n, wm_has_in(n, 3) ? in[3] : NULL, &s, 0, "b_zero_point", err);
    if (!st) qshape_out(&s, out[0]);
    return st;
}

static wm_status mi_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    qshape s;
    wm_status st = qshape_of(n, in[0], in[1], &s, x->err);
    if (st) return st;
    wm_igemm_args g;
    if (mi_args(n, in, &g)) { /* packed constant B: the kernel table's integer GEMM over the pool */
        g.C = out[0]->data, g.work = x->ws;
        if (g.M) wm_pool_run(x->pool, mi_part, &g, g.M * g.N * g.K >= (1 << 16) ? 0 : 1);
        return WM_OK;
    }
    for (int64_t q = 0; q < s.batch; q++)
        int_gemm(&s, in, wm_has_in(n, 2) ? 2 : -1, wm_has_in(n, 3) ? 3 : -1, 1, q, (int32_t *)out[0]->data + q * s.M * s.N);
    return WM_OK;
}

/* ---------------------------------------------------------------- DynamicQuantizeMatMul */

/*
 * com.microsoft DynamicQuantizeMatMul(A float [..., K], B int8/uint8 [K, N] constant, b_scale [1] or [N],
 * b_zero_point (B's type, [1] or [N], constant) optional, bias [N] optional) = (DynamicQuantizeLinear(A) x B)
 * as float: A to uint8 with one scale and zero point (DynamicQuantizeLinear's rule), the exact int32 product,
 * times a_scale * b_scale[n], plus bias. The engine fuses DynamicQuantizeLinear -> MatMulInteger -> Cast ->
 * Mul [-> Add] into it (an int8 build's products, onnxruntime's quantize_dynamic's), bit for bit the same.
 */
static wm_status dqmm_init(wm_node *n, wm_error *err) {
    static const int32_t f32[] = {WM_DT_FLOAT, 0};
    wm_status st = wm_check_type(n, 0, f32, err);
    if (!st) st = wm_check_type(n, 1, i8_types, err);
    if (!st) st = wm_check_type(n, 2, f32, err);
    if (!st && wm_has_in(n, 3) && n->in_dtype[3] != n->in_dtype[1]) st = wm_node_err(n, err, WM_ERR_INPUT, "b_zero_point type differs from B");
    if (!st && wm_has_in(n, 4)) st = wm_check_type(n, 4, f32, err);
    n->out_dtype[0] = WM_DT_FLOAT;
    if (!st) st = mi_pack(n, err);
    if (!st && !n->state)
        st = wm_node_err(n, err, WM_ERR_UNSUPPORTED, "B must be a constant 2-D tensor, its zero point constant with 1 or N values");
    return st;
}

static wm_status dqmm_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const mistate *ms = n->state;
    const wm_tensor *a = in[0];
    if (a->rank < 1 || a->dims[a->rank - 1] != ms->K)
        return wm_node_err(n, err, WM_ERR_INPUT, "A's last dimension is not B's K (%lld)", (long long)ms->K);
    uint64_t ns = wm_tensor_numel(in[2]);
    if (ns != 1 && ns != (uint64_t)ms->N)
        return wm_node_err(n, err, WM_ERR_INPUT, "b_scale has %llu values, not 1 or N (%lld)", (unsigned long long)ns, (long long)ms->N);
    if (wm_has_in(n, 4) && wm_tensor_numel(in[4]) != (uint64_t)ms->N)
        return wm_node_err(n, err, WM_ERR_INPUT, "bias has %llu values, not N (%lld)", (unsigned long long)wm_tensor_numel(in[4]), (long long)ms->N);
    int64_t d[WM_MAX_RANK];
    memcpy(d, a->dims, (size_t)a->rank * sizeof *d);
    d[a->rank - 1] = ms->N;
    wm_set_shape(out[0], a->rank, d);
    return WM_OK;
}

/* the kernel's arguments but for A's bytes, scale and zero point; qa: where A's bytes go */
static void dqmm_args(const wm_node *n, wm_tensor *const *in, const uint8_t *qa, wm_igemm_args *g) {
    mi_base(n, in[0], qa, g);
    g->ldcf = g->N, g->b_scale = in[2]->data, g->b_scale_count = (int64_t)wm_tensor_numel(in[2]);
    g->ep.bias = wm_has_in(n, 4) ? in[4]->data : NULL;
}

static size_t dqmm_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    wm_igemm_args g;
    dqmm_args(n, in, NULL, &g);
    return (size_t)(g.M * g.K) + 128 + wm_igemm_workspace_size(&g, nth); /* A's bytes, the kernel's (take) */
}

static wm_status dqmm_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    wm_igemm_args g;
    uint8_t *p = x->ws, zp;
    dqmm_args(n, in, NULL, &g);
    if (!g.M) return WM_OK;
    uint8_t *qa = (uint8_t *)take(&p, (size_t)(g.M * g.K));
    wm_dyn_quantize_u8(in[0]->data, (uint64_t)(g.M * g.K), qa, &g.a_scale, &zp);
    g.A = qa, g.a_zero_point = zp;
    g.Cf = out[0]->data, g.work = take(&p, 0);
    wm_pool_run(x->pool, mi_part, &g, g.M * g.N * g.K >= (1 << 16) ? 0 : 1);
    return WM_OK;
}

/* ---------------------------------------------------------------- QLinearMatMul */

static const int32_t qs_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, 0};

static wm_status ql_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, i8_types, err);
    if (!st) st = wm_check_type(n, 3, i8_types, err);
    if (!st) st = wm_check_type(n, 1, qs_types, err);
    if (!st) st = wm_check_type(n, 4, qs_types, err);
    if (!st) st = wm_check_type(n, 6, qs_types, err);
    if (!st && (n->in_dtype[2] != n->in_dtype[0] || n->in_dtype[5] != n->in_dtype[3]))
        st = wm_node_err(n, err, WM_ERR_INPUT, "zero point types differ from their operands");
    if (!st && !wm_has_in(n, 7)) st = wm_node_err(n, err, WM_ERR_INPUT, "y_zero_point is required");
    if (!st) st = wm_check_type(n, 7, i8_types, err);
    n->out_dtype[0] = n->in_dtype[7];
    return st;
}

static wm_status ql_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    qshape s;
    wm_status st = qshape_of(n, in[0], in[3], &s, err);
    if (!st) st = check_qparam(n, in[1], &s, 1, "a_scale", err);
    if (!st) st = check_qparam(n, in[2], &s, 1, "a_zero_point", err);
    if (!st) st = check_qparam(n, in[4], &s, 0, "b_scale", err);
    if (!st) st = check_qparam(n, in[5], &s, 0, "b_zero_point", err);
    if (!st && (wm_tensor_numel(in[6]) != 1 || wm_tensor_numel(in[7]) != 1))
        st = wm_node_err(n, err, WM_ERR_INPUT, "y_scale and y_zero_point must be scalars");
    if (!st) qshape_out(&s, out[0]);
    return st;
}

static size_t ql_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)nth, (void)out;
    qshape s;
    wm_error e = {0};
    if (qshape_of(n, in[0], in[3], &s, &e)) return 0;
    return (size_t)(s.M * s.N) * sizeof(int32_t);
}

/* a value rounded to the scale type (float32 math for float32 scales) */
static float in_type(int32_t dt, float v) {
    if (dt == WM_DT_FLOAT16) return wm_f16_to_f32(wm_f32_to_f16(v));
    if (dt == WM_DT_BFLOAT16) return wm_bf16_to_f32(wm_f32_to_bf16(v));
    return v;
}

static wm_status ql_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    qshape s;
    wm_status st = qshape_of(n, in[0], in[3], &s, x->err);
    if (st) return st;
    int32_t *acc = x->ws, dt = in[1]->dtype;
    float ys = (float)wm_tensor_get_f64(in[6], 0);
    double yz = (double)wm_tensor_get_int(in[7], 0);
    int ys8 = out[0]->dtype == WM_DT_INT8;
    for (int64_t q = 0; q < s.batch; q++) {
        int_gemm(&s, in, 2, 5, 3, q, acc);
        for (int64_t i = 0; i < s.M; i++) {
            float as = (float)wm_tensor_get_f64(in[1], (uint64_t)bc_off(in[1], &s, q, i, 0, 1, s.M));
            for (int64_t j = 0; j < s.N; j++) {
                float bs = (float)wm_tensor_get_f64(in[4], (uint64_t)bc_off(in[4], &s, q, 0, j, 0, 0));
                float mult = in_type(dt, in_type(dt, as * bs) / ys);
                double v = nearbyint((double)acc[i * s.N + j] * (double)mult + yz);
                if (isnan(v)) v = yz; /* a zero or NaN scale: no defined integer; the zero point */
                uint64_t o = (uint64_t)((q * s.M + i) * s.N + j);
                if (ys8) ((int8_t *)out[0]->data)[o] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
                else ((uint8_t *)out[0]->data)[o] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- MatMulNBits */

void wm_nbits_dequant(const wm_nbits_w *w, int64_t n0, int64_t n1, float *dst) {
    for (int64_t n = n0; n < n1; n++) {
        float *d = dst + (n - n0) * w->K;
        for (int64_t kb = 0; kb < w->k_blocks; kb++) {
            float sc = w->scales[n * w->k_blocks + kb], z = wm_nbits_zero(w, n, kb);
            int64_t k1 = (kb + 1) * w->block < w->K ? (kb + 1) * w->block : w->K;
            for (int64_t k = kb * w->block; k < k1; k++) d[k] = ((float)wm_nbits_code(w, n, k) - z) * sc;
        }
    }
}

/* The product runs on the kernel table's MatMulNBits GEMM/GEMV (src/kernels; AVX2 for 4 and 8 bits). */
static void nb_args(const wm_nbits_w *w, int64_t M, const float *A, int64_t lda, float *C, int64_t ldc,
                    const float *bias, void *ws, wm_nbits_args *a) {
    memset(a, 0, sizeof *a);
    a->M = M, a->N = w->N, a->K = w->K;
    a->bits = w->bits, a->block_size = (int)w->block, a->accuracy_level = w->accuracy;
    a->A = A, a->lda = lda, a->B = w->b, a->scales = w->scales, a->scales_h = w->scales_h;
    a->zero_points = w->zp, a->zero_points_f = w->zp ? NULL : w->zp_f;
    a->has_zero_points = w->zp_f && !w->zp ? 2 : w->zp ? 1 : w->has_zp;
    a->C = C, a->ldc = ldc, a->ep.bias = bias, a->work = ws, a->packed = w->packed;
}

#define WM_NB_SHARES 4             /* claimed shares per thread at most */
#define WM_NB_SHARE_BYTES (16 << 10) /* claimed shares: codes per share at least */
/*
 * Shares of a MatMulNBits call. Decode (M <= 4) streams the weights once: claimed stream shares (wm_stream_shares,
 * 16 columns at least), even for small weights. So is a larger M that the kernel runs on int8 activations (prefill with
 * accuracy_level 4): its shares read A as prepared once for all of them (shared_prep, the rows split over the
 * threads), so more shares cost nothing more. Otherwise (float activations, or the dequantize + SGEMM path with
 * its per-share workspace) larger M splits by work (wm_sgemm_tasks), one share per thread at most.
 */
static int nb_claimed(const wm_nbits_w *w, int64_t M, int threads) {
    if (threads < 2) return 0;
    if (M <= 4) return 1;
    wm_nbits_args a;
    nb_args(w, M, NULL, w->K, NULL, w->N, NULL, NULL, &a);
    return wm_kernels_get()->nbits_q8(&a);
}

static int nb_threads(const wm_nbits_w *w, int64_t M, int cap, int claimed) {
    if (claimed)
        return wm_stream_shares(w->N * w->k_blocks * w->blob, (w->N + 15) / 16, cap, WM_NB_SHARE_BYTES, WM_NB_SHARES);
    int nth = wm_sgemm_tasks(M, w->N, w->K);
    return nth < cap ? nth : cap;
}

size_t wm_nbits_workspace(const wm_nbits_w *w, int64_t M, int nth) {
    wm_nbits_args a;
    nb_args(w, M, NULL, w->K, NULL, w->N, NULL, NULL, &a);
    return wm_nbits_workspace_size(&a, nb_claimed(w, M, nth) ? 1 : nth) + 64; /* claimed: the one shared slice */
}

typedef struct nbctx {
    const wm_kernels *k;
    wm_nbits_args a;
} nbctx;

static void nb_part(void *arg, int ith, int nth) {
    const nbctx *c = arg;
    c->k->nbits_gemm(&c->a, ith, nth);
}

typedef struct nbprep {
    const nbctx *c;
    int shares; /* of the GEMM that follows */
} nbprep;

/* share ith of nth of the shared preparation: its rows of A */
static void nb_prep_part(void *arg, int ith, int nth) {
    const nbprep *p = arg;
    wm_nbits_args a = p->c->a;
    long m0, m1;
    wm_split((long)a.M, ith, nth, &m0, &m1);
    if (m0 >= m1) return;
    a.prep_m0 = m0, a.prep_m1 = m1;
    p->c->k->nbits_gemm(&a, -1, p->shares);
}

void wm_nbits_matmul(const wm_nbits_w *w, int64_t M, const float *A, int64_t lda, float *C, int64_t ldc,
                     const float *bias, wm_exec *x, void *ws) {
    if (!M || !w->N) return;
    nbctx c = {wm_kernels_get(), {0}};
    nb_args(w, M, A, lda, C, ldc, bias, ws, &c.a);
    int cap = x && x->pool ? x->nth : 1, claimed = nb_claimed(w, M, cap);
    int nth = nb_threads(w, M, cap, claimed);
    if (claimed) { /* A prepared once, not once per share */
        c.a.shared_prep = 1;
        if (M <= 4) c.k->nbits_gemm(&c.a, -1, nth);
        else { /* prefill: the rows split over the threads */
            nbprep p = {&c, nth};
            wm_pool_run(x->pool, nb_prep_part, &p, M < x->nth ? (int)M : 0);
        }
    }
    wm_pool_run_shares(x ? x->pool : NULL, nb_part, &c, nth);
}

typedef struct nbstate {
    wm_nbits_w w;          /* b/scales/zp pointers set when constant, else per run */
    const float *scales_c; /* constant scales converted to float32, or NULL */
    const uint16_t *scales_h; /* constant scales as halves, each exactly equal, when the kernel reads them */
    const float *zp_c;     /* constant float zero points converted, or NULL */
    const uint8_t *packed; /* constant B and scales in the kernel table's nbits_pack layout, or NULL */
} nbstate;

static const float *to_f32(wm_node *n, const wm_tensor *t) {
    if (t->dtype == WM_DT_FLOAT) return t->data;
    float *d = wm_node_alloc(n, wm_tensor_numel(t) * sizeof(float));
    if (d) {
        wm_convert(t->dtype, t->data, WM_DT_FLOAT, d, wm_tensor_numel(t));
        n->packed_bytes += wm_tensor_numel(t) * sizeof(float);
    }
    return d;
}

typedef struct nbpack_job {
    const wm_kernels *k;
    const wm_nbits_args *a;
    uint8_t *dst;
} nbpack_job;

static void nbpack_part(void *arg, int ith, int nth) {
    const nbpack_job *j = arg;
    j->k->nbits_pack(j->a, j->dst, ith, nth);
}

int wm_nbits_half_kernel(const wm_nbits_w *w) {
    return wm_kernels_get()->nbits_half_scales && w->accuracy == 4 &&
           ((w->bits == 4 && w->block >= 32) || (w->bits == 8 && w->block % 32 == 0));
}

int wm_nbits_exact_halves(const float *sc, uint64_t n, uint16_t *h) {
    uint64_t i = 0;
    for (; i < n && wm_f16_to_f32(h[i] = wm_f32_to_f16(sc[i])) == sc[i]; i++) {}
    return i == n;
}

/* the packing's arguments for w in *a, and the packed bytes (0: no packed layout) */
static size_t pack_args(const wm_nbits_w *w, wm_nbits_args *a) {
    const wm_kernels *k = wm_kernels_get();
    const char *env = getenv("WM_NBITS_PACK");
    if (!k->nbits_pack_size || (env && !strcmp(env, "0"))) return 0;
    nb_args(w, 1, NULL, w->K, NULL, w->N, NULL, NULL, a);
    return k->nbits_pack_size(a);
}

size_t wm_nbits_packed_size(const wm_nbits_w *w) {
    wm_nbits_args a;
    return pack_args(w, &a);
}

wm_status wm_nbits_prepack(wm_node *n, const wm_nbits_w *w, const uint8_t **out, wm_error *err) {
    *out = NULL;
    wm_nbits_args a;
    size_t size = pack_args(w, &a);
    if (!size) return WM_OK;
    uint8_t *p = wm_node_alloc(n, size);
    if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    nbpack_job j = {wm_kernels_get(), &a, p}; /* column quads split over the pool: copying and first touch */
    wm_pool_run(wm_node_pool(n), nbpack_part, &j, size >= (1u << 20) ? 0 : 1);
    n->packed_bytes += size;
    *out = p;
    return WM_OK;
}

/* Constant weights in the kernel's own layout when it has one (AVX-512 VNNI, block 32): made here once, the way
 * onnxruntime prepacks MatMulNBits (wm_nbits_prepack). */
static wm_status nb_pack(wm_node *n, nbstate *s, wm_error *err) {
    if (!n->in_const[1] || !n->in_const[2] || wm_has_in(n, 3)) return WM_OK;
    if (wm_tensor_nbytes(n->in_const[1]) != (uint64_t)(s->w.N * s->w.k_blocks * s->w.blob) ||
        wm_tensor_numel(n->in_const[2]) != (uint64_t)(s->w.N * s->w.k_blocks))
        return WM_OK; /* infer names the mismatch */
    wm_nbits_w w = s->w;
    w.b = n->in_const[1]->data;
    w.scales = s->scales_c;
    w.scales_h = s->scales_h;
    wm_status st = wm_nbits_prepack(n, &w, &s->packed, err);
    if (!st && s->packed) wm_node_release_const(n, 1);
    return st;
}

static wm_status nb_init(wm_node *n, wm_error *err) {
    static const int32_t a_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, 0}, u8[] = {WM_DT_UINT8, 0};
    wm_status st = wm_check_type(n, 0, a_types, err);
    if (!st) st = wm_check_type(n, 1, u8, err);
    if (!st) st = wm_check_same_type(n, 0, 2, err);
    if (st) return st;
    nbstate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->w.K = wm_attr_int(n, "K", 0), s->w.N = wm_attr_int(n, "N", 0);
    s->w.bits = (int)wm_attr_int(n, "bits", 4), s->w.block = wm_attr_int(n, "block_size", 0);
    if (s->w.K <= 0 || s->w.N <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "attributes K and N must be positive");
    if (s->w.bits != 2 && s->w.bits != 4 && s->w.bits != 8)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "bits=%d (2, 4 or 8 are supported)", s->w.bits);
    if (s->w.block < 16 || (s->w.block & (s->w.block - 1)))
        return wm_node_err(n, err, WM_ERR_INPUT, "block_size %lld is not a power of two >= 16", (long long)s->w.block);
    s->w.k_blocks = (s->w.K + s->w.block - 1) / s->w.block;
    s->w.blob = s->w.block * s->w.bits / 8;
    s->w.accuracy = (int)wm_attr_int(n, "accuracy_level", 0);
    s->w.has_zp = !wm_has_in(n, 3) ? 0 : n->in_dtype[3] == WM_DT_UINT8 ? 1 : 2;
    if (wm_has_in(n, 3) && n->in_dtype[3] != WM_DT_UINT8 && n->in_dtype[3] != n->in_dtype[0])
        return wm_node_err(n, err, WM_ERR_INPUT, "zero_points must be uint8 or the type of A");
    if (wm_has_in(n, 4)) { /* g_idx: only the trivial order k / block_size */
        const wm_tensor *g = n->in_const[4];
        if (!g || n->in_dtype[4] != WM_DT_INT32 || wm_tensor_numel(g) != (uint64_t)s->w.K)
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "g_idx (act-order) is supported only as a constant k / block_size");
        for (int64_t k = 0; k < s->w.K; k++)
            if (((const int32_t *)g->data)[k] != k / s->w.block)
                return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "g_idx is not k / block_size (act-order weights)");
    }
    if (wm_has_in(n, 5) && n->in_dtype[5] != n->in_dtype[0]) return wm_node_err(n, err, WM_ERR_INPUT, "bias must have A's type");
    /* the kernel that reads halves (AVX-512 VNNI: 4 bits, int8 activations, default zero point, block >= 32) */
    int half_kernel = n->in_const[2] && !wm_has_in(n, 3) && wm_nbits_half_kernel(&s->w);
    int f16_scales = n->in_const[2] && n->in_const[2]->dtype == WM_DT_FLOAT16;
    /* float32 scales now, unless the half kernel takes float16 ones as they are (then only when not packed, below) */
    if (n->in_const[2] && !(half_kernel && f16_scales) && !(s->scales_c = to_f32(n, n->in_const[2])))
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    uint16_t *h = NULL; /* float32 scales that are all exact halves (winml's quantizer writes them so), as halves */
    uint64_t ns = n->in_const[2] ? wm_tensor_numel(n->in_const[2]) : 0;
    if (half_kernel) {
        if (f16_scales) {
            s->scales_h = n->in_const[2]->data;
        } else {
            if (!(h = malloc(ns * sizeof *h + 1))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            if (wm_nbits_exact_halves(s->scales_c, ns, h)) s->scales_h = h;
        }
    }
    if (wm_has_in(n, 3) && n->in_dtype[3] != WM_DT_UINT8 && n->in_const[3] && !(s->zp_c = to_f32(n, n->in_const[3]))) {
        free(h);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    st = nb_pack(n, s, err);
    if (!st && !s->packed && n->in_const[2] && !s->scales_c && !(s->scales_c = to_f32(n, n->in_const[2])))
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!st && s->packed) { /* the packed layout holds the scales: the kernel reads neither them nor B */
        wm_node_release_const(n, 2);
        s->scales_h = NULL;
    } else if (!st && h && s->scales_h == h) { /* kept for the kernel: into the session's memory */
        uint16_t *keep = wm_node_alloc(n, ns * sizeof *h);
        if (keep) {
            memcpy(keep, h, ns * sizeof *h);
            n->packed_bytes += ns * sizeof *h;
        } else {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        s->scales_h = keep;
    }
    free(h);
    if (st) return st;
    n->out_dtype[0] = n->in_dtype[0];
    return WM_OK;
}

static wm_status nb_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const nbstate *s = n->state;
    const wm_nbits_w *w = &s->w;
    const wm_tensor *a = in[0];
    if (a->rank < 1 || a->dims[a->rank - 1] != w->K)
        return wm_node_err(n, err, WM_ERR_INPUT, "A's last dim must be K=%lld", (long long)w->K);
    if (wm_tensor_nbytes(in[1]) != (uint64_t)(w->N * w->k_blocks * w->blob))
        return wm_node_err(n, err, WM_ERR_INPUT, "B has %llu bytes, (N, k_blocks, blob) = %lld",
                           (unsigned long long)wm_tensor_nbytes(in[1]), (long long)(w->N * w->k_blocks * w->blob));
    if (wm_tensor_numel(in[2]) != (uint64_t)(w->N * w->k_blocks))
        return wm_node_err(n, err, WM_ERR_INPUT, "scales must have N * k_blocks elements");
    if (wm_has_in(n, 3)) {
        uint64_t want = in[3]->dtype == WM_DT_UINT8 ? (uint64_t)(w->N * ((w->k_blocks * w->bits + 7) / 8)) : (uint64_t)(w->N * w->k_blocks);
        if (wm_tensor_numel(in[3]) != want) return wm_node_err(n, err, WM_ERR_INPUT, "zero_points must have %llu elements", (unsigned long long)want);
    }
    if (wm_has_in(n, 5) && wm_tensor_numel(in[5]) != (uint64_t)w->N) return wm_node_err(n, err, WM_ERR_INPUT, "bias must have N elements");
    wm_set_shape(out[0], a->rank, a->dims);
    out[0]->dims[a->rank - 1] = w->N;
    return WM_OK;
}

static size_t nb_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    const nbstate *s = n->state;
    uint64_t M = wm_tensor_numel(in[0]) / (uint64_t)s->w.K;
    size_t b = wm_nbits_workspace(&s->w, (int64_t)M, nth) + 64 * 6;
    if (in[0]->dtype != WM_DT_FLOAT) b += (size_t)(M * (uint64_t)(s->w.K + s->w.N)) * sizeof(float);
    if (!s->scales_c && !s->packed && in[2]->dtype != WM_DT_FLOAT) b += wm_tensor_numel(in[2]) * sizeof(float);
    if (wm_has_in(n, 3) && in[3]->dtype != WM_DT_UINT8 && !s->zp_c) b += wm_tensor_numel(in[3]) * sizeof(float);
    if (wm_has_in(n, 5) && in[5]->dtype != WM_DT_FLOAT) b += wm_tensor_numel(in[5]) * sizeof(float);
    return b;
}

static wm_status nb_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const nbstate *s = n->state;
    wm_nbits_w w = s->w;
    uint8_t *p = x->ws;
    int64_t M = (int64_t)(wm_tensor_numel(in[0]) / (uint64_t)w.K);
    w.b = in[1]->data;
    w.scales = s->scales_c ? s->scales_c : in[2]->dtype == WM_DT_FLOAT ? in[2]->data : NULL;
    w.scales_h = s->scales_h;
    w.packed = s->packed;
    if (!w.scales && !w.packed) { /* the packed layout holds its own scales */
        float *sc = take(&p, wm_tensor_numel(in[2]) * sizeof(float));
        wm_convert(in[2]->dtype, in[2]->data, WM_DT_FLOAT, sc, wm_tensor_numel(in[2]));
        w.scales = sc;
    }
    if (wm_has_in(n, 3)) {
        if (in[3]->dtype == WM_DT_UINT8) {
            w.zp = in[3]->data;
        } else if (s->zp_c) {
            w.zp_f = s->zp_c;
        } else {
            float *z = take(&p, wm_tensor_numel(in[3]) * sizeof(float));
            wm_convert(in[3]->dtype, in[3]->data, WM_DT_FLOAT, z, wm_tensor_numel(in[3]));
            w.zp_f = z;
        }
    }
    const float *bias = NULL;
    if (wm_has_in(n, 5)) {
        if (in[5]->dtype == WM_DT_FLOAT) {
            bias = in[5]->data;
        } else {
            float *bb = take(&p, (size_t)w.N * sizeof(float));
            wm_convert(in[5]->dtype, in[5]->data, WM_DT_FLOAT, bb, (uint64_t)w.N);
            bias = bb;
        }
    }
    const float *A = in[0]->data;
    float *C = out[0]->data;
    if (in[0]->dtype != WM_DT_FLOAT) {
        float *a = take(&p, (size_t)(M * w.K) * sizeof(float));
        wm_convert(in[0]->dtype, in[0]->data, WM_DT_FLOAT, a, (uint64_t)(M * w.K));
        A = a;
        C = take(&p, (size_t)(M * w.N) * sizeof(float));
    }
    wm_nbits_matmul(&w, M, A, w.K, C, w.N, bias, x, take(&p, 0));
    if (in[0]->dtype != WM_DT_FLOAT) wm_convert(WM_DT_FLOAT, C, out[0]->dtype, out[0]->data, (uint64_t)(M * w.N));
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "MatMulInteger", 10, 0, mi_init, mi_infer, mi_run, mi_workspace, 0, 0},
    {"", "QLinearMatMul", 10, 0, ql_init, ql_infer, ql_run, ql_workspace, 0, 0},
    {"com.microsoft", "MatMulNBits", 1, 0, nb_init, nb_infer, nb_run, nb_workspace, 0, 0},
    {"com.microsoft", "DynamicQuantizeMatMul", 1, 0, dqmm_init, dqmm_infer, dqmm_run, dqmm_workspace, 0, 0},
};

const wm_op_table wm_ops_qmatmul = {ops, sizeof ops / sizeof ops[0]};
