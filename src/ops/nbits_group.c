/*
 * nbits_group.c - winml's engine op (domain ai.winml) for MatMulNBits nodes
 * that read the same input, which the engine's matmul_group pass
 * (src/opt/fuse_engine.c) puts in their place (a decoder's q/k/v
 * projections, its gate and up projections):
 *
 *   MatMulNBitsGroup(A, B_1, scales_1, ..., B_P, scales_P) -> Y_1, ..., Y_P
 *     attributes K, bits, block_size, accuracy_level as MatMulNBits, Ns (the
 *     P values of N); no zero points, g_idx or bias; constant B_i and scales_i.
 *     Y_i = MatMulNBits(A, B_i, scales_i).
 *
 * The parts' weights are laid one after the other at session creation (in
 * the kernel table's packed layout when it has one) and run as one product
 * of N = sum N_i columns, whose slices are then copied to the outputs: in
 * decode one weight stream, one preparation of A and one pool job instead
 * of P. Every column's value is that of its own MatMulNBits (a column's
 * arithmetic does not depend on the others).
 */
#include <stdlib.h>
#include <string.h>

#include "ops/nbits.h"
#include "ops/op.h"

#define WM_NBG_MAX 8 /* parts at most */

typedef struct nbg_state {
    wm_nbits_w w; /* the concatenation: N = sum of Ns */
    int parts;
    int64_t n[WM_NBG_MAX];
} nbg_state;

/* The parts' codes one after the other into b. */
static void nbg_codes(wm_node *n, const nbg_state *s, uint8_t *b) {
    int64_t col = 0, row = s->w.k_blocks * s->w.blob;
    for (int i = 0; i < s->parts; col += s->n[i], i++)
        memcpy(b + col * row, n->in_const[1 + 2 * i]->data, (size_t)(s->n[i] * row));
}

/* The parts' scales one after the other into sc, as float32. */
static void nbg_scales(wm_node *n, const nbg_state *s, float *sc) {
    int64_t col = 0;
    for (int i = 0; i < s->parts; col += s->n[i], i++) {
        const wm_tensor *t = n->in_const[2 + 2 * i];
        wm_convert(t->dtype, t->data, WM_DT_FLOAT, sc + col * s->w.k_blocks, (uint64_t)(s->n[i] * s->w.k_blocks));
    }
}

static wm_status nbg_init(wm_node *n, wm_error *err) {
    static const int32_t a_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, 0}, u8[] = {WM_DT_UINT8, 0};
    wm_status st = wm_check_type(n, 0, a_types, err);
    if (st) return st;
    size_t np = 0;
    const int64_t *ns = wm_attr_ints(n, "Ns", &np);
    if (!ns || np < 1 || np > WM_NBG_MAX || n->n_in != 1 + 2 * (int)np || n->n_out != (int)np)
        return wm_node_err(n, err, WM_ERR_INPUT, "needs A, then B and scales for each of the 1..%d parts in Ns",
                           WM_NBG_MAX);
    nbg_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->parts = (int)np;
    s->w.K = wm_attr_int(n, "K", 0);
    s->w.bits = (int)wm_attr_int(n, "bits", 4), s->w.block = wm_attr_int(n, "block_size", 0);
    s->w.accuracy = (int)wm_attr_int(n, "accuracy_level", 0);
    if (s->w.K <= 0 || (s->w.bits != 2 && s->w.bits != 4 && s->w.bits != 8) || s->w.block < 16 ||
        (s->w.block & (s->w.block - 1)))
        return wm_node_err(n, err, WM_ERR_INPUT, "K, bits or block_size out of range");
    s->w.k_blocks = (s->w.K + s->w.block - 1) / s->w.block;
    s->w.blob = s->w.block * s->w.bits / 8;
    for (int i = 0; i < s->parts; i++) {
        const wm_tensor *bt = n->in_const[1 + 2 * i], *sc = n->in_const[2 + 2 * i];
        if ((st = wm_check_type(n, 1 + 2 * i, u8, err)) || (st = wm_check_same_type(n, 0, 2 + 2 * i, err))) return st;
        s->n[i] = ns[i];
        if (ns[i] <= 0 || !bt || !sc || wm_tensor_nbytes(bt) != (uint64_t)(ns[i] * s->w.k_blocks * s->w.blob) ||
            wm_tensor_numel(sc) != (uint64_t)(ns[i] * s->w.k_blocks))
            return wm_node_err(n, err, WM_ERR_INPUT, "part %d: B and scales must be constants of N=%lld columns", i,
                               (long long)ns[i]);
        s->w.N += ns[i];
    }
    size_t nb = (size_t)(s->w.N * s->w.k_blocks * s->w.blob), nsc = (size_t)(s->w.N * s->w.k_blocks);
    float *sc = malloc(nsc * sizeof *sc + 1);
    uint16_t *h = malloc(nsc * sizeof *h + 1);
    if (!sc || !h) {
        free(sc), free(h);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    nbg_scales(n, s, sc);
    /* scales that are all exact halves go as halves to a kernel that reads them, as MatMulNBits does */
    int halves = wm_nbits_half_kernel(&s->w) && wm_nbits_exact_halves(sc, nsc, h);
    s->w.scales = sc, s->w.scales_h = halves ? h : NULL;
    if (wm_nbits_packed_size(&s->w)) { /* the table's own layout, made from the codes side by side */
        uint8_t *b = malloc(nb + 1);
        if (b) {
            nbg_codes(n, s, b);
            s->w.b = b;
            st = wm_nbits_prepack(n, &s->w, &s->w.packed, err);
        } else {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        free(b);
        s->w.b = NULL, s->w.scales = NULL, s->w.scales_h = NULL; /* the packed layout holds them */
    } else { /* the codes side by side in n's memory, read by the unpacked kernels, and the scales kept */
        uint8_t *b = wm_node_alloc(n, nb);
        float *ks = wm_node_alloc(n, nsc * sizeof *ks);
        uint16_t *kh = halves ? wm_node_alloc(n, nsc * sizeof *kh) : NULL;
        if (b && ks && (!halves || kh)) {
            nbg_codes(n, s, b);
            memcpy(ks, sc, nsc * sizeof *ks);
            if (kh) memcpy(kh, h, nsc * sizeof *kh);
            s->w.b = b, s->w.scales = ks, s->w.scales_h = kh;
            n->packed_bytes += nb + nsc * sizeof *ks + (kh ? nsc * sizeof *kh : 0);
        } else {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
    }
    free(sc), free(h);
    if (st) return st;
    for (int q = 1; q < n->n_in; q++) wm_node_release_const(n, q); /* the parts' mapped pages: copied */
    for (int q = 0; q < n->n_out; q++) n->out_dtype[q] = n->in_dtype[0];
    return WM_OK;
}

static wm_status nbg_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const nbg_state *s = n->state;
    const wm_tensor *a = in[0];
    if (a->rank < 1 || a->dims[a->rank - 1] != s->w.K)
        return wm_node_err(n, err, WM_ERR_INPUT, "A's last dim must be K=%lld", (long long)s->w.K);
    for (int i = 0; i < s->parts; i++) {
        wm_set_shape(out[i], a->rank, a->dims);
        out[i]->dims[a->rank - 1] = s->n[i];
    }
    return WM_OK;
}

static uint8_t *at64(uint8_t *p) { return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

static size_t nbg_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    const nbg_state *s = n->state;
    uint64_t M = wm_tensor_numel(in[0]) / (uint64_t)s->w.K;
    size_t b = wm_nbits_workspace(&s->w, (int64_t)M, nth) + 64 * 4 + (size_t)(M * (uint64_t)s->w.N) * sizeof(float);
    if (in[0]->dtype != WM_DT_FLOAT) b += (size_t)(M * (uint64_t)s->w.K) * sizeof(float);
    return b;
}

static wm_status nbg_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const nbg_state *s = n->state;
    int64_t M = (int64_t)(wm_tensor_numel(in[0]) / (uint64_t)s->w.K), N = s->w.N;
    uint8_t *p = at64(x->ws);
    float *C = (float *)p; /* the product of all parts, then copied out */
    p = at64(p + (size_t)(M * N) * sizeof(float));
    const float *A = in[0]->data;
    if (in[0]->dtype != WM_DT_FLOAT) {
        float *a = (float *)p;
        wm_convert(in[0]->dtype, in[0]->data, WM_DT_FLOAT, a, (uint64_t)(M * s->w.K));
        A = a;
        p = at64(p + (size_t)(M * s->w.K) * sizeof(float));
    }
    wm_nbits_matmul(&s->w, M, A, s->w.K, C, N, NULL, x, p);
    int64_t col = 0;
    for (int i = 0; i < s->parts; i++) {
        size_t es = wm_dtype_size(out[i]->dtype);
        for (int64_t m = 0; m < M; m++) {
            uint8_t *dst = (uint8_t *)out[i]->data + (size_t)(m * s->n[i]) * es;
            if (out[i]->dtype == WM_DT_FLOAT) memcpy(dst, C + m * N + col, (size_t)s->n[i] * sizeof(float));
            else wm_convert(WM_DT_FLOAT, C + m * N + col, out[i]->dtype, dst, (uint64_t)s->n[i]);
        }
        col += s->n[i];
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"ai.winml", "MatMulNBitsGroup", 1, 0, nbg_init, nbg_infer, nbg_run, nbg_workspace, 0, 0},
};

const wm_op_table wm_ops_nbits_group = {ops, sizeof ops / sizeof ops[0]};
