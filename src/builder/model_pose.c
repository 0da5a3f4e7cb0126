/*
 * model_pose.c - the keypoint-detection heads of a patch transformer
 * (VitPoseForPoseEstimation): the final-normed patch tokens as a feature map
 * [B, H, image / patch, image_w / patch], then either the simple decoder
 * (ReLU, bilinear upsampling by scale_factor with align_corners=False, Conv
 * 3x3 pad 1) or the classic one (twice ConvTranspose 4x4 stride 2 pad 1 without
 * bias + BatchNorm + ReLU at 256 channels, then Conv 1x1); the output is
 * "heatmaps" [B, keypoints, h, w]. BatchNorm is folded into the transposed
 * convolution at export: W'[i, o] = W[i, o] * g[o] / sqrt(v[o] + eps),
 * b'[o] = beta[o] - m[o] * g[o] / sqrt(v[o] + eps).
 *
 * One list of units (pose_units) drives the resolver's tensor checks, the
 * parameter count and the graph. The head's tensors live under "head."
 * (a known head prefix: arch_check_unused lets them through); ViTPose++'s
 * experts other than expert 0 are named by wm_pose_names.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "builder/model_impl.h"
#include "core/error.h"

#define POSE_CH 256 /* the classic decoder's width (fixed in transformers' VitPoseClassicDecoder) */
#define POSE_MAX_UNITS 3

typedef struct pose_unit {
    const char *conv, *bn; /* tensor stems: conv + ".weight" (+ ".bias" when bn is NULL), bn + ".weight" ... */
    int transposed;        /* ConvTranspose: weight [in, out, k, k] */
    int64_t in, out, k, stride, pad;
    int relu;
} pose_unit;

static const char *const bn_parts[4] = {".weight", ".bias", ".running_mean", ".running_var"};

static size_t pose_units(const wm_arch *a, pose_unit *u) {
    if (a->pose_head == WM_POSE_SIMPLE) {
        u[0] = (pose_unit){"head.conv", NULL, 0, a->H, a->labels, 3, 1, 1, 0};
        return 1;
    }
    if (a->pose_head != WM_POSE_CLASSIC) return 0;
    u[0] = (pose_unit){"head.deconv1", "head.batchnorm1", 1, a->H, POSE_CH, 4, 2, 1, 1};
    u[1] = (pose_unit){"head.deconv2", "head.batchnorm2", 1, POSE_CH, POSE_CH, 4, 2, 1, 1};
    u[2] = (pose_unit){"head.conv", NULL, 0, POSE_CH, a->labels, 1, 1, 0, 0};
    return 3;
}

wm_status wm_pose_resolve(wm_arch *a, const wm_hf_config *top, wm_error *err) {
    int simple;
    wm_status s;
    if ((s = arch_key_bool(top, "use_simple_decoder", 1, &simple, err)) ||
        (s = arch_key_int(top, "scale_factor", 4, 1, 64, &a->pose_scale, err)))
        return s;
    a->pose_head = simple ? WM_POSE_SIMPLE : WM_POSE_CLASSIC;
    a->labels = top->num_labels > 0 ? top->num_labels : 2;
    return WM_OK;
}

#define HEAD_WHY "keypoint-detection head"
#define HEAD_FROM "config.json (hidden_size, num_labels)"

wm_status wm_pose_check(const wm_arch *a, const wm_st_file *st, wm_error *err) {
    pose_unit u[POSE_MAX_UNITS];
    size_t n = pose_units(a, u);
    wm_status s = WM_OK;
    char name[200];
    for (size_t i = 0; i < n && !s; i++) {
        int64_t w[4] = {u[i].transposed ? u[i].in : u[i].out, u[i].transposed ? u[i].out : u[i].in, u[i].k, u[i].k};
        snprintf(name, sizeof name, "%s.weight", u[i].conv);
        s = arch_check_tensor(st, name, w, 4, HEAD_WHY, HEAD_FROM, err);
        if (!s && !u[i].bn) {
            snprintf(name, sizeof name, "%s.bias", u[i].conv);
            s = arch_check_tensor(st, name, &u[i].out, 1, HEAD_WHY, HEAD_FROM, err);
        }
        for (int p = 0; p < 4 && u[i].bn && !s; p++) {
            snprintf(name, sizeof name, "%s%s", u[i].bn, bn_parts[p]);
            s = arch_check_tensor(st, name, &u[i].out, 1, HEAD_WHY, HEAD_FROM, err);
        }
    }
    /* the experts beyond the one built must still have expert 0's shape (a checkpoint that is what it says) */
    for (int64_t l = 0; l < a->L && !s; l++)
        for (int64_t e = 1; e < a->n_part_experts && !s; e++) {
            int64_t w[2] = {a->part, a->I};
            snprintf(name, sizeof name, "%sencoder.layer.%lld.mlp.experts.%lld.weight", a->prefix, (long long)l,
                     (long long)e);
            s = arch_check_tensor(st, name, w, 2, HEAD_WHY, HEAD_FROM, err);
        }
    return s;
}

size_t wm_pose_names(const wm_arch *a, char (*names)[160], size_t cap) {
    size_t k = 0;
    for (int64_t l = 0; l < a->L; l++)
        for (int64_t e = 1; e < a->n_part_experts; e++)
            for (int p = 0; p < 2; p++, k++)
                if (k < cap)
                    snprintf(names[k], 160, "%.100sencoder.layer.%lld.mlp.experts.%lld.%s", a->prefix, (long long)l,
                             (long long)e, p ? "bias" : "weight");
    return k;
}

uint64_t wm_pose_params(const wm_arch *a) {
    pose_unit u[POSE_MAX_UNITS];
    size_t n = pose_units(a, u);
    uint64_t p = 0;
    for (size_t i = 0; i < n; i++) p += (uint64_t)(u[i].in * u[i].out * u[i].k * u[i].k + u[i].out);
    return p;
}

void wm_pose_heatmap_side(const wm_arch *a, int64_t *h, int64_t *w) {
    int64_t f = a->pose_head == WM_POSE_SIMPLE ? a->pose_scale : 4; /* classic: two stride-2 deconvolutions */
    *h = a->image / a->patch * f;
    *w = a->image_w / a->patch * f;
}

void wm_pose_features(const wm_arch *a, wm_json *j) {
    char b[256];
    int64_t h, w;
    wm_pose_heatmap_side(a, &h, &w);
    if (a->pose_head == WM_POSE_SIMPLE)
        snprintf(b, sizeof b, "keypoint-detection head (simple): ReLU, bilinear upsampling x%lld, Conv 3x3 to %lld "
                 "heatmaps of %lldx%lld", (long long)a->pose_scale, (long long)a->labels, (long long)h, (long long)w);
    else
        snprintf(b, sizeof b, "keypoint-detection head (classic): 2 x (ConvTranspose 4x4 stride 2 + BatchNorm folded + "
                 "ReLU) at %d channels, Conv 1x1 to %lld heatmaps of %lldx%lld", POSE_CH, (long long)a->labels,
                 (long long)h, (long long)w);
    wm_json_str(j, NULL, b);
}

/* The weight and bias of unit u: the checkpoint's (BatchNorm folded into a transposed convolution) or random. */
static void unit_weights(wm_gb *b, const wm_model_ctx *c, const pose_unit *u, const char **w, const char **bias) {
    int64_t wd[4] = {u->transposed ? u->in : u->out, u->transposed ? u->out : u->in, u->k, u->k};
    char name[200];
    if (c->a->random || !u->bn) {
        snprintf(name, sizeof name, "%s.weight", u->conv);
        *w = gb_weight(b, ".weight", c->a->random ? NULL : arch_st_find(c->st, name), wd, 4, 0, GB_W_MATRIX);
        snprintf(name, sizeof name, "%s.bias", u->conv);
        *bias = gb_weight(b, ".bias", c->a->random || u->bn ? NULL : arch_st_find(c->st, name), &u->out, 1, 0,
                          GB_W_ZEROS);
        return;
    }
    snprintf(name, sizeof name, "%s.weight", u->conv);
    wm_model_conv_bn(b, c->st, name, u->bn, bn_parts, wd, u->transposed, 1e-5 /* nn.BatchNorm2d's eps */, w, bias);
}

const char *wm_model_pose_head(wm_gb *b, wm_model_ctx *c, const char *last) {
    const wm_arch *a = c->a;
    pose_unit u[POSE_MAX_UNITS];
    size_t n = pose_units(a, u);
    gb_scope(b, "/head/feature_map");
    int64_t perm[3] = {0, 2, 1}, shape[4] = {0, a->H, a->image / a->patch, a->image_w / a->patch};
    const char *x = gb_reshape(b, gb_transpose(b, last, perm, 3), shape, 4);
    if (a->pose_head == WM_POSE_SIMPLE) {
        gb_scope(b, "/head/upsampling");
        x = gb_op(b, "Relu", 1, x);
        float sc[4] = {1.0f, 1.0f, (float)a->pose_scale, (float)a->pose_scale};
        x = gb_op(b, "Resize", 3, x, "", gb_f32(b, sc, 4, "head_upsampling_scales"));
        gb_attr_s(b, "mode", "linear");
        gb_attr_s(b, "coordinate_transformation_mode", "pytorch_half_pixel");
    }
    for (size_t i = 0; i < n && !b->st; i++) {
        char sc[200];
        snprintf(sc, sizeof sc, "/%s", u[i].conv);
        for (char *p = sc; *p; p++)
            if (*p == '.') *p = '/';
        gb_scope(b, "%s", sc);
        const char *w, *bias;
        unit_weights(b, c, &u[i], &w, &bias);
        x = gb_op(b, u[i].transposed ? "ConvTranspose" : "Conv", 3, x, w, bias);
        int64_t ks[2] = {u[i].k, u[i].k}, st[2] = {u[i].stride, u[i].stride},
                pads[4] = {u[i].pad, u[i].pad, u[i].pad, u[i].pad};
        gb_attr_ints(b, "kernel_shape", ks, 2);
        gb_attr_ints(b, "strides", st, 2);
        gb_attr_ints(b, "pads", pads, 4);
        if (u[i].relu) x = gb_op(b, "Relu", 1, x);
    }
    return x;
}
