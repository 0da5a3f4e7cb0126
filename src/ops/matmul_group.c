/*
 * matmul_group.c - winml's engine op (domain ai.winml) for float16 MatMul
 * nodes by constant weights that read the same input, which the engine's
 * matmul_group pass (src/opt/fuse_engine.c) puts in their place (an fp16
 * decoder's q/k/v projections, its gate and up projections):
 *
 *   MatMulGroup(A, B_1, ..., B_P) -> Y_1, ..., Y_P
 *     A float16 (..., K); B_i constant float16 (K, N_i); Y_i = MatMul(A, B_i).
 *
 * The weights are laid side by side ([K, sum N_i]) in the half GEMM's panels
 * at session creation (each part straight into its panels when the parts
 * before it fill whole panels) and run as one product (wm_hgemm), whose column slices
 * are then converted into the outputs: in decode one weight stream and one
 * pool job instead of P. Every column's arithmetic is the one its own MatMul
 * gives (wm_hgemm's sums do not depend on the other columns).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ops/gemm.h"
#include "ops/op.h"

#define WM_MMG_MAX 8 /* parts at most */

typedef struct mmg_state {
    int64_t K, N; /* N: sum of the parts' */
    int parts;
    int64_t n[WM_MMG_MAX];
    const uint16_t *packed; /* [K, N] in wm_hgemm_pack_b panels */
} mmg_state;

static wm_status mmg_init(wm_node *n, wm_error *err) {
    static const int32_t half[] = {WM_DT_FLOAT16, 0};
    wm_status st = wm_check_type(n, 0, half, err);
    if (st) return st;
    int parts = n->n_in - 1;
    if (parts < 1 || parts > WM_MMG_MAX || n->n_out != parts)
        return wm_node_err(n, err, WM_ERR_INPUT, "needs A and 1..%d weights, one output each", WM_MMG_MAX);
    mmg_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->parts = parts;
    for (int i = 0; i < parts; i++) {
        const wm_tensor *b = n->in_const[1 + i];
        if ((st = wm_check_type(n, 1 + i, half, err))) return st;
        if (!b || b->rank != 2 || (i && b->dims[0] != s->K))
            return wm_node_err(n, err, WM_ERR_INPUT, "weight %d must be a constant [K, N] with the others' K", i);
        s->K = b->dims[0], s->n[i] = b->dims[1], s->N += b->dims[1];
    }
    size_t size = wm_hgemm_pack_b_size(s->K, s->N);
    uint16_t *p = wm_node_alloc(n, size ? size : 1);
    if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    /* parts of whole panels (all but the last: N_i a multiple of the panel width) are packed in place, at their
       first column's panel: the panels of [K, sum N_i] without a copy of the weights side by side */
    int whole = 1;
    for (int i = 0; i + 1 < parts; i++) whole &= wm_hgemm_pack_b_size(s->K, s->n[i]) == (size_t)(s->K * s->n[i]) * 2;
    if (whole) {
        int64_t col = 0;
        for (int i = 0; i < parts; col += s->n[i], i++)
            wm_hgemm_pack_pool(n, 0, s->K, s->n[i], n->in_const[1 + i]->data, s->n[i],
                               p + wm_hgemm_pack_b_size(s->K, col) / 2);
    } else {
        uint16_t *cat = malloc((size_t)(s->K * s->N) * sizeof *cat + 1); /* [K, N]: the weights side by side */
        if (!cat) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        for (int64_t k = 0, col = 0; k < s->K; k++, col = 0)
            for (int i = 0; i < parts; i++) {
                memcpy(cat + k * s->N + col, (const uint16_t *)n->in_const[1 + i]->data + k * s->n[i],
                       (size_t)s->n[i] * sizeof *cat);
                col += s->n[i];
            }
        wm_hgemm_pack_pool(n, 0, s->K, s->N, cat, s->N, p);
        free(cat);
    }
    s->packed = p;
    n->packed_bytes += size;
    for (int i = 1; i < n->n_in; i++) wm_node_release_const(n, i); /* the parts' mapped pages: copied */
    for (int i = 0; i < parts; i++) n->out_dtype[i] = WM_DT_FLOAT16;
    return WM_OK;
}

static wm_status mmg_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const mmg_state *s = n->state;
    const wm_tensor *a = in[0];
    if (a->rank < 1 || a->dims[a->rank - 1] != s->K)
        return wm_node_err(n, err, WM_ERR_INPUT, "A's last dim must be K=%lld", (long long)s->K);
    for (int i = 0; i < s->parts; i++) {
        wm_set_shape(out[i], a->rank, a->dims);
        out[i]->dims[a->rank - 1] = s->n[i];
    }
    return WM_OK;
}

static size_t mmg_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out, (void)nth;
    const mmg_state *s = n->state;
    uint64_t M = wm_tensor_numel(in[0]) / (uint64_t)s->K;
    return (size_t)(M * (uint64_t)(s->K + s->N)) * sizeof(float) + 128;
}

static wm_status mmg_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const mmg_state *s = n->state;
    int64_t M = (int64_t)(wm_tensor_numel(in[0]) / (uint64_t)s->K);
    float *A = (float *)(((uintptr_t)x->ws + 63) & ~(uintptr_t)63), *C = A + M * s->K;
    wm_convert(WM_DT_FLOAT16, in[0]->data, WM_DT_FLOAT, A, (uint64_t)(M * s->K));
    wm_hgemm(x, M, s->N, s->K, A, NULL, 0, s->packed, C, NULL);
    int64_t col = 0;
    for (int i = 0; i < s->parts; col += s->n[i], i++)
        for (int64_t m = 0; m < M; m++)
            wm_convert(WM_DT_FLOAT, C + m * s->N + col, WM_DT_FLOAT16, (uint16_t *)out[i]->data + m * s->n[i],
                       (uint64_t)s->n[i]);
    return WM_OK;
}

static const wm_op ops[] = {
    {"ai.winml", "MatMulGroup", 1, 0, mmg_init, mmg_infer, mmg_run, mmg_workspace, 0, 0},
};

const wm_op_table wm_ops_matmul_group = {ops, sizeof ops / sizeof ops[0]};
