/*
 * model_resnet.c - Hugging Face ResNet (ResNetModel /
 * ResNetForImageClassification): the stem (Conv 7x7 stride 2 + BatchNorm +
 * ReLU + MaxPool 3x3 stride 2), stages of basic (two 3x3) or bottleneck
 * (1x1, 3x3, 1x1 at a quarter of the width) residual blocks with 1x1
 * Conv + BatchNorm shortcuts where the shape changes, global average pool,
 * classifier. Every BatchNorm is folded into its convolution at export:
 * W' = W * g / sqrt(v + eps), b' = beta - m * g / sqrt(v + eps).
 *
 * One list of units (wm_resnet_units) drives the resolver's checks, the
 * parameter count, the used-tensor list and the graph.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "builder/model_impl.h"
#include "core/error.h"
#include "onnx/dtype.h"

static const char *const bn_parts[4] = {".normalization.weight", ".normalization.bias", ".normalization.running_mean",
                                        ".normalization.running_var"};

size_t wm_resnet_units(const wm_arch *a, wm_cnn_unit *out, size_t cap) {
    if (a->graph != WM_GRAPH_RESNET) return 0;
    size_t n = 0;
#define PUT(...)                                                                                                     \
    do {                                                                                                             \
        wm_cnn_unit u_ = {__VA_ARGS__};                                                                              \
        if (n < cap) out[n] = u_;                                                                                    \
        n++;                                                                                                         \
    } while (0)
#define NAME(buf, fmt, ...) snprintf(buf, sizeof buf, fmt, __VA_ARGS__)
    char nm[160];
    NAME(nm, "%sembedder.embedder", a->prefix);
    PUT(.out = a->E, .in = a->C, .k = 7, .stride = 2, .relu = 1, .role = WM_CNN_STEM, .block = -1);
    if (n <= cap) snprintf(out[n - 1].name, sizeof out[n - 1].name, "%s", nm);
    int64_t in = a->E, block = 0;
    for (int64_t s = 0; s < a->n_stages; s++) {
        int64_t oc = a->hidden_sizes[s], stride = s == 0 ? (a->down_first ? 2 : 1) : 2;
        for (int64_t l = 0; l < a->depths[s]; l++, block++) {
            int64_t st = l == 0 ? stride : 1, ci = l == 0 ? in : oc;
            char base[128];
            snprintf(base, sizeof base, "%sencoder.stages.%lld.layers.%lld", a->prefix, (long long)s, (long long)l);
            if (a->bottleneck) {
                int64_t r = oc / 4, s0 = a->down_in_bottleneck ? st : 1, s1 = a->down_in_bottleneck ? 1 : st;
                PUT(.out = r, .in = ci, .k = 1, .stride = s0, .relu = 1, .role = WM_CNN_MAIN, .block = block);
                if (n <= cap) NAME(out[n - 1].name, "%s.layer.0", base);
                PUT(.out = r, .in = r, .k = 3, .stride = s1, .relu = 1, .role = WM_CNN_MAIN, .block = block);
                if (n <= cap) NAME(out[n - 1].name, "%s.layer.1", base);
                PUT(.out = oc, .in = r, .k = 1, .stride = 1, .relu = 0, .role = WM_CNN_MAIN, .block = block);
                if (n <= cap) NAME(out[n - 1].name, "%s.layer.2", base);
            } else {
                PUT(.out = oc, .in = ci, .k = 3, .stride = st, .relu = 1, .role = WM_CNN_MAIN, .block = block);
                if (n <= cap) NAME(out[n - 1].name, "%s.layer.0", base);
                PUT(.out = oc, .in = oc, .k = 3, .stride = 1, .relu = 0, .role = WM_CNN_MAIN, .block = block);
                if (n <= cap) NAME(out[n - 1].name, "%s.layer.1", base);
            }
            if (ci != oc || st != 1) {
                PUT(.out = oc, .in = ci, .k = 1, .stride = st, .relu = 0, .role = WM_CNN_SHORTCUT, .block = block);
                if (n <= cap) NAME(out[n - 1].name, "%s.shortcut", base);
            }
        }
        in = oc;
    }
#undef PUT
#undef NAME
    return n;
}

/* The units in a malloc'ed array (*n of them); NULL with *n 0 for other graphs or out of memory. */
static wm_cnn_unit *units(const wm_arch *a, size_t *n) {
    *n = wm_resnet_units(a, NULL, 0);
    wm_cnn_unit *u = *n ? calloc(*n, sizeof *u) : NULL;
    if (!u) *n = 0;
    else wm_resnet_units(a, u, *n);
    return u;
}

size_t wm_resnet_names(const wm_arch *a, char (*names)[160], size_t cap) {
    size_t n, k = 0;
    if (!cap) return 5 * wm_resnet_units(a, NULL, 0);
    wm_cnn_unit *u = units(a, &n);
    for (size_t i = 0; i < n; i++) {
        if (k < cap) snprintf(names[k], 160, "%.130s.convolution.weight", u[i].name);
        k++;
        for (int p = 0; p < 4; p++, k++)
            if (k < cap) snprintf(names[k], 160, "%.130s%s", u[i].name, bn_parts[p]);
    }
    free(u);
    return k;
}

uint64_t wm_resnet_params(const wm_arch *a) {
    size_t n;
    uint64_t p = 0;
    wm_cnn_unit *u = units(a, &n);
    for (size_t i = 0; i < n; i++) p += (uint64_t)u[i].out * (uint64_t)u[i].in * (uint64_t)(u[i].k * u[i].k) + (uint64_t)u[i].out;
    free(u);
    return p;
}

#define CFG "config.json"

wm_status wm_resnet_check(const wm_arch *a, const wm_st_file *st, wm_error *err) {
    size_t n;
    wm_cnn_unit *u = units(a, &n);
    if (!u) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        char name[200];
        int64_t w[4] = {u[i].out, u[i].in, u[i].k, u[i].k};
        snprintf(name, sizeof name, "%s.convolution.weight", u[i].name);
        s = arch_check_tensor(st, name, w, 4, "ResNet unit", CFG, err);
        for (int p = 0; p < 4 && !s; p++) {
            snprintf(name, sizeof name, "%s%s", u[i].name, bn_parts[p]);
            s = arch_check_tensor(st, name, &u[i].out, 1, "ResNet unit", CFG, err);
        }
    }
    free(u);
    return s;
}

int64_t wm_resnet_side(const wm_arch *a) {
    size_t n;
    int64_t h = a->image;
    wm_cnn_unit *u = units(a, &n);
    h = (h + 6 - 7) / 2 + 1; /* stem conv */
    h = (h + 2 - 3) / 2 + 1; /* max pool */
    for (size_t i = 0; i < n; i++)
        if (u[i].role == WM_CNN_MAIN && u[i].stride > 1) h = (h + 2 * (u[i].k / 2) - u[i].k) / u[i].stride + 1;
    free(u);
    return h;
}

void wm_model_conv_bn(wm_gb *b, const wm_st_file *st, const char *conv_weight, const char *bn_prefix,
                      const char *const parts[4], const int64_t wd[4], int transposed, double eps, const char **w,
                      const char **bias) {
    int64_t out = wd[transposed ? 1 : 0], in = wd[transposed ? 0 : 1];
    size_t kk = (size_t)(wd[2] * wd[3]);
    float *W = malloc((size_t)(in * out) * kk * sizeof *W), *bn = malloc(5 * (size_t)out * sizeof *bn);
    *w = *bias = "<error>";
    if (!W || !bn) {
        free(W);
        free(bn);
        b->st = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
        return;
    }
    char name[256];
    wm_st_read_f32(arch_st_find(st, conv_weight), W);
    for (int p = 0; p < 4; p++) {
        snprintf(name, sizeof name, "%s%s", bn_prefix, parts[p]);
        wm_st_read_f32(arch_st_find(st, name), bn + p * out);
    }
    const float *g = bn, *beta = bn + out, *mean = bn + 2 * out, *var = bn + 3 * out;
    float *fb = bn + 4 * out;
    for (int64_t o = 0; o < out; o++) {
        double sc = (double)g[o] / sqrt((double)var[o] + eps);
        for (int64_t i = 0; i < in; i++) {
            float *row = W + (size_t)(transposed ? i * out + o : o * in + i) * kk;
            for (size_t t = 0; t < kk; t++) row[t] = (float)(row[t] * sc);
        }
        fb[o] = (float)(beta[o] - mean[o] * sc);
    }
    *w = gb_weight_vals(b, ".weight", W, wd, 4);
    *bias = gb_weight_vals(b, ".bias", fb, &out, 1);
    free(W);
    free(bn);
}

/* Conv + folded BatchNorm (+ ReLU) of unit u on x. */
static const char *conv_bn(wm_gb *b, const wm_model_ctx *c, const wm_cnn_unit *u, const char *x) {
    const wm_arch *a = c->a;
    char sc[200];
    snprintf(sc, sizeof sc, "/%s", u->name);
    for (char *p = sc; *p; p++)
        if (*p == '.') *p = '/';
    gb_scope(b, "%s", sc);
    int64_t wd[4] = {u->out, u->in, u->k, u->k};
    const char *w, *bias;
    if (a->random) {
        w = gb_weight(b, ".weight", NULL, wd, 4, 0, GB_W_MATRIX);
        bias = gb_weight(b, ".bias", NULL, &u->out, 1, 0, GB_W_ZEROS);
    } else {
        char name[200];
        snprintf(name, sizeof name, "%s.convolution.weight", u->name);
        wm_model_conv_bn(b, c->st, name, u->name, bn_parts, wd, 0, a->eps, &w, &bias);
    }
    const char *y = gb_op(b, "Conv", 3, x, w, bias);
    int64_t ks[2] = {u->k, u->k}, st[2] = {u->stride, u->stride}, p = u->k / 2, pads[4] = {p, p, p, p};
    gb_attr_ints(b, "kernel_shape", ks, 2);
    gb_attr_ints(b, "strides", st, 2);
    gb_attr_ints(b, "pads", pads, 4);
    return u->relu ? gb_op(b, "Relu", 1, y) : y;
}

wm_status wm_model_resnet(wm_gb *b, wm_model_ctx *c) {
    const wm_arch *a = c->a;
    size_t n;
    wm_cnn_unit *u = units(a, &n);
    if (!u) return b->st ? b->st : wm_err(b->err, WM_ERR_NOMEM, "out of memory");
    const char *x = "pixel_values", *res = NULL;
    for (size_t i = 0; i < n && !b->st; i++) {
        if (u[i].role == WM_CNN_STEM) {
            x = conv_bn(b, c, &u[i], x);
            gb_scope(b, "/%sembedder/pooler", a->prefix);
            x = gb_op(b, "MaxPool", 1, x);
            int64_t ks[2] = {3, 3}, st[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
            gb_attr_ints(b, "kernel_shape", ks, 2);
            gb_attr_ints(b, "strides", st, 2);
            gb_attr_ints(b, "pads", pads, 4);
            continue;
        }
        if (i == 0 || u[i - 1].block != u[i].block) res = x; /* the block's input */
        if (u[i].role == WM_CNN_SHORTCUT) res = conv_bn(b, c, &u[i], res);
        else x = conv_bn(b, c, &u[i], x);
        if (i + 1 == n || u[i + 1].block != u[i].block) {
            gb_scope(b, "/encoder/block.%lld", (long long)u[i].block);
            x = gb_op(b, "Relu", 1, gb_op(b, "Add", 2, x, res));
        }
    }
    free(u);
    gb_scope(b, "/pooler");
    const char *pooled = gb_op(b, "GlobalAveragePool", 1, x);
    if (a->task == WM_TASK_IMAGE_CLASSIFICATION) {
        gb_scope(b, "/classifier");
        const char *f = gb_op(b, "Flatten", 1, pooled);
        const wm_module *m = wm_arch_mod(a, -1, WM_M_H_0);
        gb_scope(b, "/classifier/1");
        int64_t d[2] = {m->out, m->in};
        const char *w = gb_weight(b, ".weight", m->wt, d, 2, 0, GB_W_MATRIX);
        const char *bias = gb_weight(b, ".bias", m->bt, &m->out, 1, 0, GB_W_ZEROS);
        gb_op_named(b, "Gemm", "logits", 3, f, w, bias);
        gb_attr_i(b, "transB", 1);
    } else {
        gb_rename(b, x, "last_hidden_state");
        gb_rename(b, pooled, "pooler_output");
    }
    return b->st;
}
