/*
 * shape_ms.c - type/shape rules of the com.microsoft contrib ops the
 * optimizer and quantizer produce (attention, normalization, MatMulNBits,
 * quantization ops), so passes after a fusion still see shapes.
 */
#include <string.h>

#include "onnx/dtype.h"
#include "ops/int_math.h"
#include "opt/shape_impl.h"

/* Output i of a contrib attention op: [B, S, hidden] like the query, present KV [B, N, ?, H]. */
static void r_attention_like(const ctx *c, int is_gqa) {
    const wm_tinfo *q = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (o) {
        same(o, q);
        if (q->rank == 3 && HAS(c, 2)) {
            const wm_tinfo *v = IN(c, 2);
            if (!is_gqa && v->rank == 3) o->dim[2] = v->dim[2];
        }
        if (is_gqa && q->rank == 3 && !HAS(c, 1)) {
            int64_t nh = wm_opt_attr_i(c->n, "num_heads", 0), kv = wm_opt_attr_i(c->n, "kv_num_heads", 0);
            int64_t heads, hd;
            if (q->dim[2].k == WM_SD_CONST && nh > 0 && kv >= 0 && nh <= (1 << 20) && kv <= (1 << 20) &&
                (heads = nh + 2 * kv) > 0 && wm_mul_i64_ok(q->dim[2].v / heads, nh, &hd))
                o->dim[2] = sd_c(hd);
        }
    }
    size_t past = is_gqa ? 3 : 6;
    for (size_t i = 1; i < 3; i++) {
        wm_tinfo *p = OUT(c, i);
        if (!p) continue;
        const wm_tinfo *pk = IN(c, past + i - 1);
        p->dtype = q->dtype;
        if (pk->rank == 4) {
            same(p, pk);
            p->dim[2] = sh_fresh(c->s);
        }
    }
}

void sh_microsoft(const ctx *c) {
    const char *op = c->n->op_type;
    wm_tinfo *o;
    if (!strcmp(op, "MultiHeadAttention") || !strcmp(op, "Attention")) r_attention_like(c, 0);
    else if (!strcmp(op, "GroupQueryAttention")) r_attention_like(c, 1);
    else if (!strcmp(op, "MatMulNBits")) {
        const wm_tinfo *a = IN(c, 0);
        if (!(o = OUT(c, 0))) return;
        same(o, a);
        if (a->rank >= 1) o->dim[a->rank - 1] = sd_c(wm_opt_attr_i(c->n, "N", 0));
    } else if (!strcmp(op, "GatherBlockQuantized")) { /* Gather's shape; uint8 tables hold 8/bits codes a byte */
        if (!(o = OUT(c, 0))) return;
        o->dtype = IN(c, 2)->dtype;
        if (!sh_gather_dims(c, o, "gather_axis")) return;
        int64_t bits = wm_opt_attr_i(c->n, "bits", 4), r = o->rank;
        if (IN(c, 0)->dtype == WM_DT_UINT8 && bits > 0 && bits < 8 && r > 0)
            o->dim[r - 1] = o->dim[r - 1].k == WM_SD_CONST ? sd_c(o->dim[r - 1].v * (8 / bits)) : sd_u();
    } else if (!strcmp(op, "SkipLayerNormalization") || !strcmp(op, "SkipSimplifiedLayerNormalization")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0));
        for (size_t i = 1; i < 3; i++)
            if ((o = OUT(c, i))) o->dtype = WM_DT_FLOAT;
        if ((o = OUT(c, 3))) same(o, IN(c, 0));
    } else if (!strcmp(op, "DynamicQuantizeMatMul") || !strcmp(op, "MatMulIntegerToFloat")) {
        sh_matmul(c, WM_DT_FLOAT);
    } else if (!strcmp(op, "QuantizeLinear")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0)), o->dtype = HAS(c, 2) ? IN(c, 2)->dtype : WM_DT_UINT8;
    } else if (!strcmp(op, "DequantizeLinear")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0)), o->dtype = IN(c, 1)->dtype;
    } else if (!strcmp(op, "FusedConv")) { /* Conv's window, then its activation and residual */
        sh_window(c, 1, 0);
    } else if (c->n->n_input) { /* Gelu, FastGelu, BiasGelu, QuickGelu, RotaryEmbedding, ...: like input 0 */
        if ((o = OUT(c, 0))) same(o, IN(c, 0));
    }
}

