/* registry.c - every op table of src/ops, and the lookup by (domain, name, opset). */
#include <string.h>

#include "ops/op.h"

/* one line per op family file */
extern const wm_op_table wm_ops_elementwise, wm_ops_shape, wm_ops_tensor, wm_ops_reduce, wm_ops_nn,
    wm_ops_matmul, wm_ops_norm;
extern const wm_op_table wm_ops_conv, wm_ops_convt, wm_ops_pool, wm_ops_norm_nn,
    wm_ops_space, wm_ops_resize, wm_ops_sample; /* vision ops (ops-cnn) */
extern const wm_op_table wm_ops_conv_nhwc;   /* conv_nhwc.c: ai.winml NhwcConv, NhwcMaxPool (engine layout pass) */

extern const wm_op_table wm_ops_attention;    /* attention.c: ONNX Attention, TensorScatter */
extern const wm_op_table wm_ops_attention_ms; /* attention_ms.c: com.microsoft Attention, MultiHeadAttention */
extern const wm_op_table wm_ops_gqa;          /* gqa.c: com.microsoft GroupQueryAttention */
extern const wm_op_table wm_ops_rotary;       /* rotary.c: RotaryEmbedding (ONNX, com.microsoft) */
extern const wm_op_table wm_ops_quant;        /* quant.c: Quantize/Dequantize/DynamicQuantizeLinear */
extern const wm_op_table wm_ops_qmatmul;      /* qmatmul.c: MatMulInteger, QLinearMatMul, MatMulNBits */
extern const wm_op_table wm_ops_nbits_group;  /* nbits_group.c: ai.winml MatMulNBitsGroup (engine pass) */
extern const wm_op_table wm_ops_matmul_group; /* matmul_group.c: ai.winml MatMulGroup (engine pass) */
extern const wm_op_table wm_ops_gather_bq;     /* gather_bq.c: com.microsoft GatherBlockQuantized */
extern const wm_op_table wm_ops_moe;           /* moe.c: com.microsoft MoE, QMoE */

extern const wm_op_table wm_ops_index, wm_ops_scatter, wm_ops_misc, wm_ops_einsum, wm_ops_signal, wm_ops_loss, wm_ops_random, wm_ops_control;


static const wm_op_table *const tables[] = {
    &wm_ops_elementwise, &wm_ops_shape, &wm_ops_tensor, &wm_ops_reduce, &wm_ops_nn, &wm_ops_matmul, &wm_ops_norm,
    &wm_ops_conv, &wm_ops_convt, &wm_ops_pool, &wm_ops_norm_nn, &wm_ops_space, &wm_ops_resize,
    &wm_ops_sample, /* vision ops (ops-cnn) */
    &wm_ops_conv_nhwc,
    &wm_ops_attention,
    &wm_ops_attention_ms,
    &wm_ops_gqa,
    &wm_ops_rotary,
    &wm_ops_quant,
    &wm_ops_qmatmul,
    &wm_ops_nbits_group,
    &wm_ops_matmul_group,
    &wm_ops_gather_bq,
    &wm_ops_moe,
    &wm_ops_index, &wm_ops_scatter, &wm_ops_misc, &wm_ops_einsum, &wm_ops_signal, &wm_ops_loss, &wm_ops_random, &wm_ops_control,
};

static int same_domain(const char *a, const char *b) {
    if (!a || !strcmp(a, "ai.onnx")) a = "";
    if (!b || !strcmp(b, "ai.onnx")) b = "";
    return !strcmp(a, b);
}

const wm_op *wm_op_find(const char *domain, const char *name, int opset, const wm_op **near) {
    if (near) *near = NULL;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (size_t i = 0; i < tables[t]->n; i++) {
            const wm_op *op = &tables[t]->ops[i];
            if (strcmp(op->name, name) || !same_domain(op->domain, domain)) continue;
            if (opset >= op->since && (op->until == 0 || opset <= op->until)) return op;
            if (near) *near = op;
        }
    return NULL;
}

const wm_op *wm_op_at(size_t i) {
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        if (i < tables[t]->n) return &tables[t]->ops[i];
        i -= tables[t]->n;
    }
    return NULL;
}
