/* registry.c - every op table of src/ops, and the lookup by (domain, name, opset). */
#include <string.h>

#include "ops/op.h"

/* one line per op family file */
extern const wm_op_table wm_ops_elementwise, wm_ops_shape, wm_ops_tensor, wm_ops_reduce, wm_ops_nn,
    wm_ops_matmul, wm_ops_norm;

static const wm_op_table *const tables[] = {
    &wm_ops_elementwise, &wm_ops_shape, &wm_ops_tensor, &wm_ops_reduce, &wm_ops_nn, &wm_ops_matmul, &wm_ops_norm,
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
