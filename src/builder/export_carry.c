/*
 * export_carry.c - where the export's weights came from, as the quant stage's carry table (-p gguf: the GGUF blocks
 * carried into MatMulNBits / GatherBlockQuantized / QMoE without requantizing; see export.h).
 */
#include <stdlib.h>

#include "builder/export.h"
#include "core/error.h"
#include "gguf/gguf_hf.h"

/* wm_quant_carry.row over a GGUF view tensor (ctx). */
static void carry_row(const void *ctx, int64_t r, uint8_t *codes, float *scales, float *zp) {
    wm_gguf_st_carry_row(ctx, (uint64_t)r, codes, scales, zp);
}

/* A MoE's stacked experts (model_moe.c) as carry rows over the checkpoint's expert tensors. */
typedef struct moe_rows {
    const wm_arch *a;
    const wm_st_file *st;
    int layer, fc;
} moe_rows;

static const wm_st_tensor *moe_tensor(const moe_rows *m, int64_t e, int which) {
    char name[160];
    return wm_moe_expert_name(m->a, m->layer, e, which, name, sizeof name) ? wm_st_find(m->st, name) : NULL;
}

/* Row n of fc1 [E * 2I rows]: expert n / 2I's gate row (n % 2I) / 2 when n is even, else its up row; of fc2
   [E * H rows]: row n % H of expert n / H's down projection. Stacked checkpoints: input_linear holds each expert's
   gate rows then its up rows, output_linear the fc2 rows as they are. */
static void moe_row(const void *ctx, int64_t n, uint8_t *codes, float *scales, float *zp) {
    const moe_rows *m = ctx;
    int64_t I = m->a->moe_I, H = m->a->H;
    if (m->fc == 2) {
        if (wm_moe_stacked(m->a)) carry_row(moe_tensor(m, 0, 2), n, codes, scales, zp);
        else carry_row(moe_tensor(m, n / H, 2), n % H, codes, scales, zp);
        return;
    }
    int64_t e = n / (2 * I), w = n % (2 * I);
    if (wm_moe_stacked(m->a)) carry_row(moe_tensor(m, 0, 0), e * 2 * I + (w % 2) * I + w / 2, codes, scales, zp);
    else carry_row(moe_tensor(m, e, (int)(w % 2)), w / 2, codes, scales, zp);
}

/* The carry entry of a MoE's stacked fc (rec->moe_fc): the experts' one block form, or why there is none. 0: no
   GGUF expert tensors (nothing to say). */
static int moe_entry(const wm_arch *a, const wm_st_file *st, const wm_wsrc_rec *rec, moe_rows *m, wm_quant_carry *c) {
    *m = (moe_rows){a, st, rec->moe_layer, rec->moe_fc};
    int stacked = wm_moe_stacked(a);
    int64_t E = a->n_experts, I = a->moe_I, H = a->H;
    wm_ggml_carry form = {0}, f;
    const wm_gguf_tensor *first = NULL;
    int ok = 1;
    for (int64_t e = 0; e < (stacked ? 1 : E); e++)
        for (int w = 0; w < 3; w++) {
            if ((rec->moe_fc == 2) != (w == 2) || (stacked && w == 1)) continue;
            const wm_st_tensor *t = moe_tensor(m, e, w);
            const wm_gguf_tensor *g = wm_gguf_st_origin(t);
            if (!g) return 0;
            if (!first) first = g;
            if (!wm_gguf_st_carry(t, &f) || g->type != first->type) ok = 0;
            else form = f;
        }
    if (!first) return 0;
    *c = (wm_quant_carry){rec->name, wm_ggml_type_name(first->type), rec->moe_fc == 1 ? E * 2 * I : E * H,
                          rec->moe_fc == 1 ? H : I, 0, 0, 0, 0, 0, NULL, moe_row, m};
    if (!ok)
        c->reason = wm_ggml_block_elems(first->type) == 1 ? "float tensors in the GGUF: experts kept float32"
                                                           : "its experts' GGUF tensors differ in type or are moved "
                                                             "on the way: kept float32 (dequantized)";
    else
        c->bits = form.bits, c->block = form.block, c->zp = form.zp;
    return 1;
}

wm_status wm_export_carry_table(const wm_export_result *ex, const wm_arch *a, const wm_st_file *st,
                                wm_quant_carry **out, size_t *n_out, void **ctx, wm_error *err) {
    *out = NULL, *n_out = 0, *ctx = NULL;
    if (!ex->n_srcs) return WM_OK;
    wm_quant_carry *v = calloc(ex->n_srcs, sizeof *v);
    moe_rows *m = calloc(ex->n_srcs, sizeof *m);
    if (!v || !m) {
        free(v);
        free(m);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < ex->n_srcs; i++) {
        const wm_wsrc_rec *rec = &ex->srcs[i];
        if (rec->moe_fc) {
            n += (size_t)moe_entry(a, st, rec, &m[i], &v[n]);
            continue;
        }
        const wm_gguf_tensor *g = wm_gguf_st_origin(rec->t);
        if (!g || rec->t->rank != 2) continue;
        wm_ggml_carry form;
        wm_quant_carry *c = &v[n++];
        *c = (wm_quant_carry){rec->name, wm_ggml_type_name(g->type), rec->t->shape[0], rec->t->shape[1],
                              rec->transpose, 0, 0, 0, 0, NULL, carry_row, rec->t};
        if (!wm_gguf_st_carry(rec->t, &form))
            c->reason = wm_ggml_block_elems(g->type) == 1 ? "a float tensor in the GGUF: kept float32"
                                                          : "its values change on the way: kept float32";
        else if (form.bits == 8 && form.zp == WM_CARRY_ZP_FLOAT) {
            c->requant_bits = 8;
            c->reason = "onnxruntime's CPU MatMulNBits refuses float zero points at 8 bits: requantized to 8 bits "
                        "from the dequantized values";
        } else
            c->bits = form.bits, c->block = form.block, c->zp = form.zp;
    }
    *out = v, *n_out = n, *ctx = m;
    return WM_OK;
}
