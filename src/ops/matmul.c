/*
 * matmul.c - MatMul (numpy semantics: batch dims broadcast, 1-D operands
 * promoted), Gemm, com.microsoft FusedMatMul (transposes + alpha), and
 * winml's own ai.winml MatMulBias (float32 MatMul by a constant 2-D weight,
 * then + bias[N] and an activation, applied by the GEMM epilogue; made by
 * the engine's matmul_epilogue pass).
 * float32 runs on the GEMM kernel; float16 constant weights are widened
 * once to float32 where the session's policy says so (wm_node_f16_float:
 * graphs that are not autoregressive), else they, and a computed
 * float16 B (a decoder's cache; MatMul / FusedMatMul without transA or
 * alpha), are read as is by the half-weight GEMM (wm_hgemm), other
 * float16/bfloat16 operands are widened to float32 (alpha A B + beta C
 * summed in float32, rounded to the half type once); float64 and integer
 * types go through a float64/int64 reference loop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/int_math.h"
#include "ops/op.h"
#include "ops/rows.h"

/* ---------------------------------------------------------------- reference loop for other types */

/* v * s for an integer Gemm's alpha or beta: exact and wrapping (ops/int_math.h) when s is a whole number, else in
 * double converted as Cast converts. */
static int64_t int_scale(int64_t v, double s) {
    if (s == 1) return v;
    if (s == floor(s) && s >= -9223372036854775808.0 && s < 9223372036854775808.0) return wm_i64_mul(v, (int64_t)s);
    return wm_f64_to_i64((double)v * s);
}

static void gemm_generic(int32_t dt, int64_t M, int64_t N, int64_t K, const void *A, int ta, const void *B, int tb,
                         void *C, double alpha) {
    int fl = dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16;
    wm_tensor ta_ = {.dtype = dt, .data = (void *)A}, tb_ = {.dtype = dt, .data = (void *)B};
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            int64_t iacc = 0;
            for (int64_t k = 0; k < K; k++) {
                uint64_t ia = (uint64_t)(ta ? k * M + i : i * K + k), ib = (uint64_t)(tb ? j * K + k : k * N + j);
                if (fl) acc += wm_tensor_get_f64(&ta_, ia) * wm_tensor_get_f64(&tb_, ib);
                else iacc = wm_i64_add(iacc, wm_i64_mul(wm_tensor_get_int(&ta_, ia), wm_tensor_get_int(&tb_, ib)));
            }
            uint64_t o = (uint64_t)(i * N + j);
            if (!fl) iacc = int_scale(iacc, alpha); /* integers wrap, as integer Mul and Add do */
            switch (dt) {
            case WM_DT_DOUBLE: ((double *)C)[o] = acc * alpha; break;
            case WM_DT_FLOAT: ((float *)C)[o] = (float)(acc * alpha); break;
            case WM_DT_FLOAT16: ((uint16_t *)C)[o] = wm_f32_to_f16((float)(acc * alpha)); break;
            case WM_DT_BFLOAT16: ((uint16_t *)C)[o] = wm_f32_to_bf16((float)(acc * alpha)); break;
            case WM_DT_INT32: case WM_DT_UINT32: ((int32_t *)C)[o] = (int32_t)iacc; break;
            default: ((int64_t *)C)[o] = iacc; break;
            }
        }
}

/* ---------------------------------------------------------------- MatMul / FusedMatMul */

static const int32_t mm_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, WM_DT_INT32,
                                   WM_DT_INT64, WM_DT_UINT32, WM_DT_UINT64, 0};

static int is_half(int32_t dt) { return dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16; }

/*
 * Constant weights are prepared once: a 2-D B (float32, float16 or bfloat16) is packed for the GEMM
 * kernel (float16: widened when the session holds float16 weights as float32, wm_node_f16_float, else in the
 * half GEMM's panels); a batched float16/bfloat16 B is widened to float32 (half types compute in float32).
 */
typedef struct mm_state {
    float *packed; /* packed op(B) [K, N] of a constant 2-D B */
    float *b32;    /* a constant batched half B in float32 */
    int h16;       /* a constant 2-D float16 B, read by the half-weight GEMM (half the bytes) ... */
    const uint16_t *hpacked; /* ... from its panels (wm_hgemm_prepack) */
    const float *bias; /* MatMulBias: [N] or NULL */
    wm_act act;        /* MatMulBias: activation after the bias */
    float act_a;       /* its parameter (QuickGelu's alpha) */
} mm_state;

/* MatMulBias (float32 or float16 A, constant 2-D B of A's type checked by the caller): optional bias a constant
 * [N] of A's type (float16: kept widened), activation by name. */
static wm_status mmb_init(wm_node *n, mm_state *ms, wm_error *err) {
    const wm_tensor *b = n->in_const[1], *c = n->n_in > 2 ? n->in_const[2] : NULL;
    int32_t dt = n->in_dtype[0];
    if (wm_has_in(n, 2) && (!c || c->dtype != dt || c->rank != 1 || c->dims[0] != b->dims[1]))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "bias must be a constant %s [%lld]", wm_dtype_name(dt),
                           (long long)b->dims[1]);
    ms->bias = c ? c->data : NULL;
    if (c && dt == WM_DT_FLOAT16) {
        float *b32 = wm_node_alloc(n, (size_t)c->dims[0] * sizeof(float));
        if (!b32) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        wm_convert(dt, c->data, WM_DT_FLOAT, b32, (uint64_t)c->dims[0]);
        ms->bias = b32;
    }
    char buf[32];
    const char *a = wm_attr_string(n, "activation", "", buf, sizeof buf);
    static const struct { const char *name; wm_act act; } acts[] = {
        {"", WM_ACT_NONE},         {"Gelu", WM_ACT_GELU_ERF}, {"FastGelu", WM_ACT_GELU_TANH},
        {"Relu", WM_ACT_RELU},     {"Sigmoid", WM_ACT_SIGMOID}, {"Tanh", WM_ACT_TANH},
        {"QuickGelu", WM_ACT_QUICK_GELU}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (!strcmp(a, acts[i].name)) {
            ms->act = acts[i].act;
            if (ms->act == WM_ACT_QUICK_GELU) { /* activation_params [alpha], as fuse_engine writes it */
                size_t np = 0;
                const float *pv = wm_attr_floats(n, "activation_params", &np);
                ms->act_a = np > 0 ? pv[0] : 1.702f;
            }
            return WM_OK;
        }
    return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "activation '%s' is not supported", a);
}

static wm_status mm_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, mm_types, err);
    if (!st) st = wm_check_same_type(n, 0, 1, err);
    n->out_dtype[0] = n->in_dtype[0];
    const wm_tensor *b = n->in_const[1];
    int32_t dt = n->in_dtype[0];
    int bias_op = !strcmp(n->proto->op_type, "MatMulBias");
    if (!st && bias_op && (!b || b->rank != 2 || (dt != WM_DT_FLOAT && dt != WM_DT_FLOAT16)))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "needs float32 or float16 A and a constant 2-D B of its type");
    if (st || !b || !(dt == WM_DT_FLOAT || is_half(dt))) return st;
    mm_state *ms = wm_node_alloc(n, sizeof *ms);
    if (!ms) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = ms;
    if (bias_op && (st = mmb_init(n, ms, err))) return st;
    int tb = !strcmp(n->proto->op_type, "FusedMatMul") ? (int)wm_attr_int(n, "transB", 0) : 0;
    if (b->rank == 2 && dt == WM_DT_FLOAT16 &&
        wm_node_f16_float(n, wm_gemm_pack_size(b->dims[tb ? 1 : 0], b->dims[tb ? 0 : 1]))) {
        if (!(ms->packed = wm_gemm_prepack_f16(n, 1, tb))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    } else if (b->rank == 2 && dt == WM_DT_FLOAT16 && wm_attr_float(n, "alpha", 1.0f) == 1.0f &&
               !wm_attr_int(n, "transA", 0)) {
        ms->h16 = 1;
        if (!(ms->hpacked = wm_hgemm_prepack(n, 1, tb))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    } else if (b->rank == 2) {
        int64_t K = b->dims[tb ? 1 : 0], N = b->dims[tb ? 0 : 1];
        size_t sz = wm_gemm_pack_size(K, N);
        if (!(ms->packed = wm_node_alloc(n, sz))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (dt == WM_DT_FLOAT) wm_gemm_pack(tb, K, N, b->data, b->dims[1], ms->packed);
        else {
            float *tmp = malloc((size_t)(K * N) * sizeof(float) + 1);
            if (!tmp) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            wm_convert(dt, b->data, WM_DT_FLOAT, tmp, (uint64_t)(K * N));
            wm_gemm_pack(tb, K, N, tmp, b->dims[1], ms->packed);
            free(tmp);
        }
        n->packed_bytes += sz;
    } else if (is_half(dt)) {
        uint64_t nb = wm_tensor_numel(b);
        if (!(ms->b32 = wm_node_alloc(n, nb * sizeof(float) + 1))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        wm_convert(dt, b->data, WM_DT_FLOAT, ms->b32, nb);
        n->packed_bytes += nb * sizeof(float);
    }
    return WM_OK;
}

typedef struct mm_shape {
    int64_t M, N, K, batch;
    int ra, rb, ro;
    int64_t bdims[WM_MAX_RANK]; /* broadcast batch dims */
    int nb;
    int ta, tb;
} mm_shape;

static wm_status mm_shape_of(const wm_node *n, const wm_tensor *a, const wm_tensor *b, mm_shape *s, wm_error *err) {
    memset(s, 0, sizeof *s);
    int fused = !strcmp(n->proto->op_type, "FusedMatMul");
    s->ta = fused ? (int)wm_attr_int(n, "transA", 0) : 0;
    s->tb = fused ? (int)wm_attr_int(n, "transB", 0) : 0;
    s->ra = a->rank, s->rb = b->rank;
    if (s->ra < 1 || s->rb < 1) return wm_node_err(n, err, WM_ERR_INPUT, "operands must have rank >= 1");
    int64_t am = s->ra == 1 ? 1 : a->dims[s->ra - 2], ak = a->dims[s->ra - 1];
    if (s->ta && s->ra >= 2) { int64_t t = am; am = ak; ak = t; }
    int64_t bk = s->rb == 1 ? b->dims[0] : b->dims[s->rb - 2], bn = s->rb == 1 ? 1 : b->dims[s->rb - 1];
    if (s->tb && s->rb >= 2) { int64_t t = bk; bk = bn; bn = t; }
    if (ak != bk)
        return wm_node_err(n, err, WM_ERR_INPUT, "inner dims differ (%lld vs %lld)", (long long)ak, (long long)bk);
    s->M = am, s->K = ak, s->N = bn;
    int na = s->ra > 2 ? s->ra - 2 : 0, nbb = s->rb > 2 ? s->rb - 2 : 0;
    s->nb = na > nbb ? na : nbb;
    s->batch = 1;
    for (int i = 0; i < s->nb; i++) {
        int ia = i - (s->nb - na), ib = i - (s->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return wm_node_err(n, err, WM_ERR_INPUT, "batch dims do not broadcast (%lld vs %lld)", (long long)da, (long long)db);
        s->bdims[i] = da == 1 ? db : da;
        s->batch *= s->bdims[i];
    }
    return WM_OK;
}

static wm_status mm_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    mm_shape s;
    wm_status st = mm_shape_of(n, in[0], in[1], &s, err);
    if (st) return st;
    int r = 0;
    for (int i = 0; i < s.nb; i++) out[0]->dims[r++] = s.bdims[i];
    if (s.ra > 1) out[0]->dims[r++] = s.M;
    if (s.rb > 1) out[0]->dims[r++] = s.N;
    out[0]->rank = r;
    return WM_OK;
}

/* offset of batch index q of an operand with its own batch dims (right-aligned, broadcast) */
static int64_t batch_off(const mm_shape *s, const wm_tensor *t, int64_t q, int64_t mat) {
    int nt = t->rank > 2 ? t->rank - 2 : 0;
    int64_t off = 0, stride = mat;
    for (int i = s->nb - 1; i >= 0; i--) {
        int64_t idx = q % s->bdims[i];
        q /= s->bdims[i];
        int it = i - (s->nb - nt);
        if (it < 0) continue;
        int64_t d = t->dims[it];
        if (d != 1) off += idx * stride;
        stride *= d;
    }
    return off;
}

/* float32 product of A (dims of a) and B (dims of b) into C, batch dims broadcast */
static void mm_f32(const mm_shape *s, const wm_tensor *a, const float *A, const wm_tensor *b, const float *B, float *C,
                   float alpha, const float *packed, const mm_state *ms, wm_exec *x) {
    int64_t ma = s->M * s->K, mb = s->K * s->N, mo = s->M * s->N;
    if (s->rb <= 2 && !s->ta) { /* A's batch folds into M when B has no batch dims (MatMulBias: always) */
        wm_gemm_args g = {s->batch * s->M, s->N, s->K, A, s->K, 0, B, s->tb ? s->K : s->N, s->tb, C, s->N, alpha, 0,
                          packed, ms ? ms->bias : NULL, ms ? ms->act : WM_ACT_NONE, ms ? ms->act_a : 0.0f};
        wm_sgemm(x, &g);
        return;
    }
    for (int64_t q = 0; q < s->batch; q++) {
        wm_gemm_args g = {s->M, s->N, s->K, A + batch_off(s, a, q, ma), s->ta ? s->M : s->K, s->ta,
                          B + batch_off(s, b, q, mb), s->tb ? s->K : s->N, s->tb, C + q * mo, s->N, alpha, 0};
        wm_sgemm(x, &g);
    }
}

/* A float16 product whose B is computed (not a constant: those are prepared at init) runs on the half GEMM
 * with B read as it is, head by head: no float32 copy of B (a decoder's key / value cache, every step). */
static int h16_direct(const wm_node *n, int32_t dt) {
    return dt == WM_DT_FLOAT16 && !n->state && !wm_attr_int(n, "transA", 0) && wm_attr_float(n, "alpha", 1.0f) == 1.0f;
}

static size_t mm_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)nth;
    if (!is_half(in[0]->dtype)) return 0;
    const mm_state *ms = n->state;
    int b_ready = h16_direct(n, in[0]->dtype) || /* else B is widened into the workspace */
                  (ms && (ms->b32 || ms->h16 || (ms->packed && !wm_attr_int(n, "transA", 0))));
    uint64_t f = wm_tensor_numel(in[0]) + wm_tensor_numel(out[0]) + (b_ready ? 0 : wm_tensor_numel(in[1]));
    return (size_t)f * sizeof(float) + 128;
}

static wm_status mm_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    mm_shape s;
    wm_status st = mm_shape_of(n, in[0], in[1], &s, x->err);
    if (st) return st;
    float alpha = !strcmp(n->proto->op_type, "FusedMatMul") ? wm_attr_float(n, "alpha", 1.0f) : 1.0f;
    int32_t dt = in[0]->dtype;
    const mm_state *ms = n->state;
    const float *packed = ms && s.rb <= 2 && !s.ta ? ms->packed : NULL;
    if (dt == WM_DT_FLOAT) {
        mm_f32(&s, in[0], in[0]->data, in[1], in[1]->data, out[0]->data, alpha, packed, ms, x);
        return WM_OK;
    }
    if (is_half(dt)) {
        uint64_t na = wm_tensor_numel(in[0]), nc = wm_tensor_numel(out[0]);
        float *A = x->ws, *C = A + na, *B = ms && ms->b32 ? ms->b32 : C + nc;
        wm_convert(dt, in[0]->data, WM_DT_FLOAT, A, na);
        if (ms && ms->h16 && s.rb <= 2 && !s.ta) { /* A's batch folds into M */
            wm_epilogue ep = {.bias = ms->bias, .act = ms->act, .act_a = ms->act_a}; /* MatMulBias's, else none */
            wm_hgemm_ep(x, s.batch * s.M, s.N, s.K, A, in[1]->data, s.tb, ms->hpacked, C, &ep);
            wm_convert(WM_DT_FLOAT, C, dt, out[0]->data, nc);
            return WM_OK;
        }
        if (h16_direct(n, dt)) {
            const uint16_t *B16 = in[1]->data;
            if (s.rb <= 2) wm_hgemm(x, s.batch * s.M, s.N, s.K, A, B16, s.tb, NULL, C, NULL);
            else
                for (int64_t q = 0; q < s.batch; q++)
                    wm_hgemm(x, s.M, s.N, s.K, A + batch_off(&s, in[0], q, s.M * s.K),
                             B16 + batch_off(&s, in[1], q, s.K * s.N), s.tb, NULL, C + q * s.M * s.N, NULL);
            wm_convert(WM_DT_FLOAT, C, dt, out[0]->data, nc);
            return WM_OK;
        }
        if (!packed && !(ms && ms->b32)) wm_convert(dt, in[1]->data, WM_DT_FLOAT, B, wm_tensor_numel(in[1]));
        mm_f32(&s, in[0], A, in[1], B, C, alpha, packed, ms, x);
        wm_convert(WM_DT_FLOAT, C, dt, out[0]->data, nc);
        return WM_OK;
    }
    int64_t ma = s.M * s.K, mb = s.K * s.N, mo = s.M * s.N;
    size_t es = wm_dtype_size(dt);
    for (int64_t q = 0; q < s.batch; q++)
        gemm_generic(dt, s.M, s.N, s.K, (const uint8_t *)in[0]->data + batch_off(&s, in[0], q, ma) * (int64_t)es, s.ta,
                     (const uint8_t *)in[1]->data + batch_off(&s, in[1], q, mb) * (int64_t)es, s.tb,
                     (uint8_t *)out[0]->data + q * mo * (int64_t)es, alpha);
    return WM_OK;
}

/* ---------------------------------------------------------------- Gemm */

/* Gemm with a constant B: float32 packs it once; float16 widens and packs it when the session holds float16
 * weights as float32 (wm_node_f16_float), else reads it as is (wm_hgemm) when alpha is 1 and A is not
 * transposed, else widens and packs it; bfloat16 widens and packs. A constant C of N values (times beta)
 * becomes a float32 bias. Half types compute in float32. */
typedef struct gemm_state {
    float *packed;
    float *bias;
    int h16;
    const uint16_t *hpacked; /* h16: B in the half GEMM's panels */
} gemm_state;

static wm_status gemm_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, mm_types, err);
    if (!st) st = wm_check_same_type(n, 0, 1, err);
    if (!st && wm_has_in(n, 2)) st = wm_check_same_type(n, 0, 2, err);
    int32_t dt = n->in_dtype[0];
    n->out_dtype[0] = dt;
    if (st || !(dt == WM_DT_FLOAT || is_half(dt))) return st;
    gemm_state *gs = wm_node_alloc(n, sizeof *gs);
    if (!gs) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = gs;
    const wm_tensor *b = n->in_const[1], *c = wm_has_in(n, 2) ? n->in_const[2] : NULL;
    int tb = (int)wm_attr_int(n, "transB", 0);
    if (b && b->rank == 2 && dt == WM_DT_FLOAT16 &&
        wm_node_f16_float(n, wm_gemm_pack_size(b->dims[tb ? 1 : 0], b->dims[tb ? 0 : 1]))) {
        if (!(gs->packed = wm_gemm_prepack_f16(n, 1, tb))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    } else if (b && b->rank == 2 && dt == WM_DT_FLOAT16 && wm_attr_float(n, "alpha", 1.0f) == 1.0f &&
               !wm_attr_int(n, "transA", 0)) {
        gs->h16 = 1;
        if (!(gs->hpacked = wm_hgemm_prepack(n, 1, tb))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    } else if (b && b->rank == 2) {
        int64_t K = b->dims[tb ? 1 : 0], N = b->dims[tb ? 0 : 1];
        size_t sz = wm_gemm_pack_size(K, N);
        if (!(gs->packed = wm_node_alloc(n, sz))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (dt == WM_DT_FLOAT) {
            wm_gemm_pack(tb, K, N, b->data, b->dims[1], gs->packed);
        } else {
            float *tmp = malloc((size_t)(K * N) * sizeof(float) + 1);
            if (!tmp) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            wm_convert(dt, b->data, WM_DT_FLOAT, tmp, (uint64_t)(K * N));
            wm_gemm_pack(tb, K, N, tmp, b->dims[1], gs->packed);
            free(tmp);
        }
        n->packed_bytes += sz;
    }
    float beta = wm_attr_float(n, "beta", 1.0f);
    if (c && (c->rank == 1 || (c->rank == 2 && c->dims[0] == 1)) && c->dims[c->rank - 1] > 1) {
        int64_t N = c->dims[c->rank - 1];
        if (!(gs->bias = wm_node_alloc(n, (size_t)N * sizeof(float)))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        wm_convert(dt, c->data, WM_DT_FLOAT, gs->bias, (uint64_t)N);
        for (int64_t j = 0; j < N; j++) gs->bias[j] *= beta;
    }
    return WM_OK;
}

static wm_status gemm_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (in[0]->rank != 2 || in[1]->rank != 2) return wm_node_err(n, err, WM_ERR_INPUT, "A and B must be 2-D");
    int ta = (int)wm_attr_int(n, "transA", 0), tb = (int)wm_attr_int(n, "transB", 0);
    int64_t M = in[0]->dims[ta ? 1 : 0], K = in[0]->dims[ta ? 0 : 1];
    int64_t K2 = in[1]->dims[tb ? 1 : 0], N = in[1]->dims[tb ? 0 : 1];
    if (K != K2) return wm_node_err(n, err, WM_ERR_INPUT, "inner dims differ (%lld vs %lld)", (long long)K, (long long)K2);
    if (n->n_in > 2 && in[2]) {
        const wm_tensor *c = in[2];
        if (c->rank > 2) return wm_node_err(n, err, WM_ERR_INPUT, "C has rank > 2");
        int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        if ((cm != 1 && cm != M) || (cn != 1 && cn != N)) return wm_node_err(n, err, WM_ERR_INPUT, "C does not broadcast to (M, N)");
    }
    int64_t d[2] = {M, N};
    wm_set_shape(out[0], 2, d);
    return WM_OK;
}

/* float16 / bfloat16 Gemm in float32: A widened into the workspace, then C (a bias, or broadcast and added
 * after the product), then narrowed into the output. */
static wm_status gemm_run_half(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int ta = (int)wm_attr_int(n, "transA", 0), tb = (int)wm_attr_int(n, "transB", 0);
    float alpha = wm_attr_float(n, "alpha", 1.0f), beta = wm_attr_float(n, "beta", 1.0f);
    int64_t M = out[0]->dims[0], N = out[0]->dims[1], K = in[0]->dims[ta ? 0 : 1];
    const wm_tensor *c = n->n_in > 2 ? in[2] : NULL;
    const gemm_state *gs = n->state;
    int32_t dt = out[0]->dtype;
    float *A = x->ws, *O = A + M * K;
    wm_convert(dt, in[0]->data, WM_DT_FLOAT, A, (uint64_t)(M * K));
    if (gs->h16) {
        wm_hgemm(x, M, N, K, A, in[1]->data, tb, gs->hpacked, O, gs->bias);
    } else {
        float *B = O + M * N;
        if (!gs->packed) wm_convert(dt, in[1]->data, WM_DT_FLOAT, B, (uint64_t)(K * N));
        wm_gemm_args g = {M, N, K, A, ta ? M : K, ta, gs->packed ? NULL : B, tb ? K : N, tb, O, N, alpha, 0,
                          gs->packed, gs->bias, WM_ACT_NONE};
        wm_sgemm(x, &g);
    }
    if (c && beta != 0 && !gs->bias) {
        int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                O[i * N + j] += beta * (float)wm_tensor_get_f64(c, (uint64_t)((cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)));
    }
    wm_convert(WM_DT_FLOAT, O, dt, out[0]->data, (uint64_t)(M * N));
    return WM_OK;
}

static size_t gemm_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)nth;
    if (!is_half(out[0]->dtype)) return 0;
    const gemm_state *gs = n->state;
    uint64_t f = wm_tensor_numel(in[0]) + wm_tensor_numel(out[0]) + (gs && (gs->h16 || gs->packed) ? 0 : wm_tensor_numel(in[1]));
    return (size_t)f * sizeof(float) + 128;
}

static wm_status gemm_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int ta = (int)wm_attr_int(n, "transA", 0), tb = (int)wm_attr_int(n, "transB", 0);
    float alpha = wm_attr_float(n, "alpha", 1.0f), beta = wm_attr_float(n, "beta", 1.0f);
    int64_t M = out[0]->dims[0], N = out[0]->dims[1], K = in[0]->dims[ta ? 0 : 1];
    const wm_tensor *c = n->n_in > 2 ? in[2] : NULL;
    int32_t dt = out[0]->dtype;
    if (is_half(dt)) return gemm_run_half(n, in, out, x);
    if (dt != WM_DT_FLOAT) {
        gemm_generic(dt, M, N, K, in[0]->data, ta, in[1]->data, tb, out[0]->data, alpha);
        if (c && beta != 0) {
            int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    uint64_t o = (uint64_t)(i * N + j), ci = (uint64_t)((cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j));
                    if (dt == WM_DT_DOUBLE) {
                        ((double *)out[0]->data)[o] = wm_tensor_get_f64(out[0], o) + beta * wm_tensor_get_f64(c, ci);
                        continue;
                    }
                    int64_t v = wm_i64_add(wm_tensor_get_int(out[0], o), int_scale(wm_tensor_get_int(c, ci), beta));
                    if (dt == WM_DT_INT32 || dt == WM_DT_UINT32) ((int32_t *)out[0]->data)[o] = (int32_t)v;
                    else ((int64_t *)out[0]->data)[o] = v;
                }
        }
        return WM_OK;
    }
    const gemm_state *gs = n->state;
    float *o = out[0]->data;
    float b0 = 0;
    const float *bias = gs->bias;
    if (c && beta != 0 && !bias) { /* broadcast C into the output, then accumulate */
        int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        const float *cd = c->data;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) o[i * N + j] = beta * cd[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
        b0 = 1;
    }
    wm_gemm_args g = {M, N, K, in[0]->data, ta ? M : K, ta, in[1]->data, tb ? K : N, tb, o, N, alpha, b0,
                      gs->packed, bias, WM_ACT_NONE};
    wm_sgemm(x, &g);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "MatMul", 1, 0, mm_init, mm_infer, mm_run, mm_workspace, 0, 0},
    {"com.microsoft", "FusedMatMul", 1, 0, mm_init, mm_infer, mm_run, mm_workspace, 0, 0},
    {"ai.winml", "MatMulBias", 1, 0, mm_init, mm_infer, mm_run, mm_workspace, 0, 0},
    {"", "Gemm", 1, 0, gemm_init, gemm_infer, gemm_run, gemm_workspace, 0, 0},
};

const wm_op_table wm_ops_matmul = {ops, sizeof ops / sizeof ops[0]};
