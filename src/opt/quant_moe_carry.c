/*
 * quant_moe_carry.c - WM_QUANT_CARRY for mixtures of experts: a com.microsoft MoE whose fc1 and fc2 float32
 * constants [E, N, K] have carry entries (a GGUF's expert stacks: the entry's rows are the E * N rows of K values
 * in the constant's order) becomes a com.microsoft QMoE on those blocks as they are, where QMoE holds them: one
 * block for fc1 and fc2, 4-bit codes whose zero point is QMoE's implicit 8 (Q4_0). QMoE takes no zero points here,
 * so the float-offset forms (Q4_1, Q4_K, Q5_1, Q5_K) stay MoE on the dequantized float32 values, and so do the
 * 8-bit forms (Q8_0, Q5_0, Q6_K): onnxruntime 1.32's CPU QMoE computes 8-bit blocked experts away from their values
 * (one node, blocks of 32: 0.26 off its own MoE on the numpy-dequantized experts at outputs of 17.7; row scales
 * and 4-bit blocks agree within 1e-6), and a carried artifact must mean the same in both runtimes. Experts of two
 * formats stay float too; each such weight is noted "float" with the reason (the manifest's "carried").
 *
 * Every carried value (code - 2^(bits - 1)) * scale is checked against the float constant it replaces, as
 * quant_carry.c checks MatMulNBits blocks: a carried expert is the same weight or the build stops naming it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/* Why entry cy cannot give QMoE blocks (NULL: it can). Static texts. */
static const char *why_not(const wm_quant_carry *cy) {
    if (!cy) return "the other expert weight of the node has no GGUF blocks: experts kept float32";
    if (!cy->bits) return cy->reason ? cy->reason : "its blocks do not carry: kept float32";
    if (cy->zp != 0)
        return "QMoE takes no zero points and these blocks have their own: experts kept float32 (dequantized)";
    if (cy->bits != 4)
        return "onnxruntime's CPU QMoE computes 8-bit blocked experts away from their values: experts kept float32 "
               "(dequantized)";
    if (cy->block < 16 || (cy->block & (cy->block - 1)))
        return "QMoE's block is a power of two >= 16: experts kept float32 (dequantized)";
    return NULL;
}

static int same(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

/*
 * The carried codes [E, N, K / block * blob] and scales [E, N, K / block] of float constant name (from cy's rows,
 * checked against its values) as new initializers *q and *s. WM_ERR_UNSUPPORTED (nothing added, no message) when
 * name is no float32 constant [E, N, K].
 */
static wm_status carry_experts(wm_graph *g, const wm_quant_carry *cy, const char *name, int64_t E, int64_t N,
                               int64_t K, const char **q, const char **s, uint64_t *bytes, wm_error *err) {
    const wm_onnx_tensor *t = wm_graph_constant(g, name);
    if (!t || t->data_type != WM_DT_FLOAT || t->n_dims != 3 || t->dims[0] != E || t->dims[1] != N || t->dims[2] != K ||
        cy->N != E * N || cy->K != K || K % cy->block)
        return WM_ERR_UNSUPPORTED;
    wm_bytes b = wm_onnx_tensor_bytes(t);
    if (!b.p || b.n != (size_t)(E * N * K) * sizeof(float)) return WM_ERR_UNSUPPORTED;
    int bits = cy->bits, mid = 1 << (bits - 1); /* QMoE's implicit zero point (why_not: the entry's too) */
    int64_t bs = cy->block, nblk = K / bs, blob = bs * bits / 8, rows = E * N;
    size_t nq = (size_t)(rows * nblk * blob), ns = (size_t)(rows * nblk);
    uint8_t *codes = calloc(nq, 1), *rc = malloc((size_t)K);
    float *scales = malloc(ns * sizeof *scales), *zp = malloc((size_t)nblk * sizeof *zp);
    wm_status st = WM_OK;
    if (!codes || !rc || !scales || !zp) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory carrying the experts of '%s'", name);
        goto done;
    }
    for (int64_t n = 0; n < rows && !st; n++) {
        cy->row(cy->ctx, n, rc, scales + n * nblk, zp);
        const uint8_t *src = b.p + (size_t)(n * K) * sizeof(float);
        uint8_t *dst = codes + n * nblk * blob;
        for (int64_t k = 0; k < K; k++) {
            int64_t kb = k / bs;
            int c = rc[k];
            float w, v = (float)(c - mid) * scales[n * nblk + kb];
            memcpy(&w, src + k * 4, 4);
            if (c < 0 || c >= 2 * mid || !same(v, w)) {
                st = wm_err(err, WM_ERR_INTERNAL, "tensor '%s' (%s): its carried blocks give %.9g at row %lld, element "
                            "%lld, where its float value is %.9g: not carried", name, cy->source, (double)v,
                            (long long)n, (long long)k, (double)w);
                break;
            }
            if (bits == 8) dst[k] = (uint8_t)c;
            else dst[k / 2] |= (uint8_t)(c << (4 * (k % 2)));
        }
        wm_opt_release(wm_graph_model(g), src, (size_t)K * sizeof(float));
    }
    if (st) goto done;
    st = wm_quant_moe_consts(g, name, bits, E, N, nblk * blob, nblk, 3, codes, nq, scales, ns, q, s, bytes, err);
done:
    free(codes);
    free(rc);
    free(scales);
    free(zp);
    return st;
}

/* Notes fc1 and fc2 of a MoE node (those with entries) with one outcome. */
static wm_status note_pair(wm_quant_report *r, const char *const *w, const wm_quant_carry *const *cy,
                           const char *op, const char *result, const char *why, wm_error *err) {
    wm_status st = WM_OK;
    for (int i = 0; i < 2 && !st; i++)
        if (cy[i])
            st = wm_quant_carry_note_add(r, w[i], cy[i], op, result, why ? 0 : cy[i]->bits, why ? 0 : cy[i]->block,
                                         why ? 0 : cy[i]->zp, why, err);
    return st;
}

wm_status wm_quant_moe_carry(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_error *err) {
    size_t nn;
    wm_onnx_node **nodes = wm_opt_snapshot(g, &nn, err);
    if (!nodes) return err->status;
    wm_status st = WM_OK;
    for (size_t i = 0; i < nn && !st; i++) {
        wm_onnx_node *n = nodes[i];
        if (!wm_opt_is_ms(n, "MoE") || n->n_input < 5 || (n->n_input > 6 && n->input[6][0])) continue;
        const char *w[2] = {n->input[2], n->input[4]};
        const wm_quant_carry *cy[2] = {wm_quant_carry_find(c, w[0]), wm_quant_carry_find(c, w[1])};
        if (!cy[0] && !cy[1]) continue;
        const wm_onnx_tensor *w1 = wm_graph_constant(g, w[0]), *w2 = wm_graph_constant(g, w[1]);
        const char *why = why_not(cy[0]);
        if (!why) why = why_not(cy[1]);
        if (!why && (cy[0]->bits != cy[1]->bits || cy[0]->block != cy[1]->block))
            why = "fc1 and fc2 experts carry different block formats and QMoE takes one: experts kept float32";
        if (!why && (!w1 || !w2 || w1->n_dims != 3 || w2->n_dims != 3))
            why = "the node's experts are not 3-D constants: kept float32";
        if (why) {
            st = note_pair(r, w, cy, "MoE", "float", why, err);
            continue;
        }
        int64_t E = w1->dims[0], F1 = w1->dims[1], H = w1->dims[2], I = w2->dims[2];
        const char *q1, *s1, *q2, *s2;
        uint64_t bytes = 0;
        st = carry_experts(g, cy[0], w[0], E, F1, H, &q1, &s1, &bytes, err);
        if (!st) st = carry_experts(g, cy[1], w[1], E, H, I, &q2, &s2, &bytes, err);
        if (st == WM_ERR_UNSUPPORTED && !err->status) {
            st = note_pair(r, w, cy, "MoE", "float", "the experts' constants do not match their GGUF rows: kept "
                           "float32", err);
            continue;
        }
        if (st) break;
        const char *names[2] = {w[0], w[1]}; /* the node goes: keep the names for the notes */
        char n0[256], n1[256];
        snprintf(n0, sizeof n0, "%s", names[0]);
        snprintf(n1, sizeof n1, "%s", names[1]);
        const char *kept[2] = {n0, n1};
        if ((st = wm_quant_moe_replace(g, n, q1, s1, q2, s2, cy[0]->bits, cy[0]->block, c->accuracy_level, err)))
            break;
        st = note_pair(r, kept, cy, "QMoE", "carried", NULL, err);
        r->quantized++;
        r->n_qmoe++;
        r->qmoe_bytes += bytes;
    }
    free(nodes);
    return st;
}
