/*
 * conv.c - Conv (1-D/2-D/3-D, groups, dilations, strides, pads, auto_pad)
 * and ConvInteger.
 *
 * float32 (and float16/bfloat16 through float32 buffers): per image and
 * group one GEMM Y_g[M/g, P] = W_g[M/g, K] x col[K, P] with K = C/g * kernel
 * size and P the output positions, on the kernel table's sgemm (W read in
 * place as A, col packed by the kernel, the bias as its per-row epilogue);
 * col is the im2col matrix, built by the threads (a 1x1 stride-1 unpadded
 * conv uses the input as col directly). Convolutions with one input channel
 * per group (depthwise) run a direct loop over output rows instead, threads
 * taking whole planes.
 * float64 and ConvInteger run a direct loop in double / int32.
 * com.microsoft FusedConv (ONNX Runtime's fusion target: Conv + optional
 * residual Z + activation) shares Conv's kernel, the residual add and the
 * activation applied to each output tile while it is in cache.
 */
#include <string.h>

#include "ops/conv_impl.h"

/* ---------------------------------------------------------------- direct loops (float64, integers) */

/* SUM: the accumulator (int64 for the int32 form: ConvInteger's sums wrap to int32 on the store, never overflow) */
#define DIRECT_CONV(name, T, ACC, SUM)                                                                                 \
    static void name(const T *x, const T *wt, const T *b, T *y, const wm_win *w, int64_t N, int64_t C, int64_t M,   \
                     int64_t G, ACC xz, const ACC *wz) {                                                             \
        int64_t Cg = C / G, Mg = M / G, P = wm_win_prod(w->out), inP = wm_win_prod(w->in), kp = wm_win_prod(w->k); \
        for (int64_t n = 0; n < N; n++)                                                                              \
            for (int64_t m = 0; m < M; m++) {                                                                        \
                int64_t g = m / Mg;                                                                                  \
                ACC wzm = wz ? wz[m] : 0;                                                                            \
                for (int64_t oz = 0; oz < w->out[0]; oz++)                                                           \
                    for (int64_t oy = 0; oy < w->out[1]; oy++)                                                       \
                        for (int64_t ox = 0; ox < w->out[2]; ox++) {                                                 \
                            SUM acc = b ? (SUM)b[m] : 0;                                                             \
                            for (int64_t c = 0; c < Cg; c++) {                                                       \
                                const T *pl = x + (n * C + g * Cg + c) * inP;                                        \
                                const T *wk = wt + (m * Cg + c) * kp;                                                \
                                for (int64_t kz = 0; kz < w->k[0]; kz++) {                                           \
                                    int64_t iz = oz * w->s[0] + kz * w->d[0] - w->pb[0];                             \
                                    if (iz < 0 || iz >= w->in[0]) continue;                                          \
                                    for (int64_t ky = 0; ky < w->k[1]; ky++) {                                       \
                                        int64_t iy = oy * w->s[1] + ky * w->d[1] - w->pb[1];                         \
                                        if (iy < 0 || iy >= w->in[1]) continue;                                      \
                                        for (int64_t kx = 0; kx < w->k[2]; kx++) {                                   \
                                            int64_t ix = ox * w->s[2] + kx * w->d[2] - w->pb[2];                     \
                                            if (ix < 0 || ix >= w->in[2]) continue;                                  \
                                            ACC xv = (ACC)pl[(iz * w->in[1] + iy) * w->in[2] + ix] - xz;             \
                                            ACC wv = (ACC)wk[(kz * w->k[1] + ky) * w->k[2] + kx] - wzm;              \
                                            acc += (SUM)xv * (SUM)wv;                                                \
                                        }                                                                            \
                                    }                                                                                \
                                }                                                                                    \
                            }                                                                                        \
                            y[(n * M + m) * P + (oz * w->out[1] + oy) * w->out[2] + ox] = (T)acc;                    \
                        }                                                                                            \
            }                                                                                                        \
    }

DIRECT_CONV(conv_direct_f64, double, double, double)
DIRECT_CONV(conv_direct_i32, int32_t, int32_t, int64_t)

/* ---------------------------------------------------------------- Conv */

typedef struct conv_state {
    wm_win_attr a;
    int64_t group;
    const float *w32; /* constant weights as float32 (the initializer's own data when it is float32), else NULL */
    const float *b32;
    const void *wpack; /* constant weights packed for the GEMM (wm_conv_pack), else NULL */
    int fused;         /* com.microsoft FusedConv: activation and Z */
    wm_conv_post post;
} conv_state;

wm_status wm_conv_act_read(wm_node *n, wm_conv_post *post, wm_error *err) {
    char buf[32];
    const char *a = wm_attr_string(n, "activation", "", buf, sizeof buf);
    size_t np;
    const float *pv = wm_attr_floats(n, "activation_params", &np);
    post->act = WM_ACT_NONE;
    if (!*a) return WM_OK;
    if (!strcmp(a, "Relu")) post->act = WM_ACT_RELU;
    else if (!strcmp(a, "Tanh")) post->act = WM_ACT_TANH;
    else if (!strcmp(a, "Sigmoid")) post->act = WM_ACT_SIGMOID;
    else if (!strcmp(a, "LeakyRelu")) post->act = WM_ACT_LEAKY_RELU, post->a = np > 0 ? pv[0] : 0.01f;
    else if (!strcmp(a, "Clip")) {
        if (np < 2) return wm_node_err(n, err, WM_ERR_INPUT, "activation Clip needs activation_params (min, max)");
        post->act = WM_ACT_CLIP, post->a = pv[0], post->b = pv[1];
    } else if (!strcmp(a, "HardSigmoid")) {
        post->hard_sigmoid = 1;
        post->a = np > 0 ? pv[0] : 0.2f, post->b = np > 1 ? pv[1] : 0.5f;
    } else
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "activation '%s' is not supported", a);
    return WM_OK;
}

/* float32 copy of a constant float tensor (its own data when already float32); NULL on OOM. */
const float *wm_conv_const_f32(wm_node *n, const wm_tensor *t) {
    if (t->dtype == WM_DT_FLOAT) return t->data;
    uint64_t cnt = wm_tensor_numel(t);
    float *p = wm_node_alloc(n, (size_t)cnt * sizeof *p + 1);
    if (!p) return NULL;
    wm_convert(t->dtype, t->data, WM_DT_FLOAT, p, cnt);
    n->packed_bytes += cnt * sizeof *p;
    return p;
}

static wm_status conv_init(wm_node *n, wm_error *err) {
    conv_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    wm_status st = wm_win_attr_read(n, &s->a, 0, 0, err);
    if (st) return st;
    s->group = wm_attr_int(n, "group", 1);
    if (s->group < 1) return wm_node_err(n, err, WM_ERR_INPUT, "group = %lld (must be >= 1)", (long long)s->group);
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X and W");
    if ((st = wm_check_type(n, 0, wm_types_float, err)) || (st = wm_check_same_type(n, 0, 1, err))) return st;
    if (wm_has_in(n, 2) && (st = wm_check_same_type(n, 0, 2, err))) return st;
    n->out_dtype[0] = n->in_dtype[0];
    s->fused = !strcmp(n->proto->op_type, "FusedConv");
    if (s->fused) {
        if (n->in_dtype[0] != WM_DT_FLOAT) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "FusedConv runs on float32 only");
        if (wm_has_in(n, 3) && (st = wm_check_same_type(n, 0, 3, err))) return st;
        if ((st = wm_conv_act_read(n, &s->post, err))) return st;
    }
    if (n->in_dtype[0] != WM_DT_DOUBLE) {
        if (n->in_const[1] && !(s->w32 = wm_conv_const_f32(n, n->in_const[1]))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (wm_has_in(n, 2) && n->in_const[2] && !(s->b32 = wm_conv_const_f32(n, n->in_const[2])))
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        const wm_tensor *W = n->in_const[1];
        if (s->w32 && W->rank >= 3 && W->dims[0] % s->group == 0 && !(W->dims[1] == 1 && s->group > 1)) {
            int64_t K = 1, Mg = W->dims[0] / s->group; /* prepack W_g^T for the GEMM (depthwise runs direct) */
            for (int i = 1; i < W->rank; i++) K *= W->dims[i];
            size_t sz = wm_conv_pack_size(K, Mg, s->group);
            void *p = wm_node_alloc(n, sz);
            if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            wm_conv_pack(s->w32, K, Mg, s->group, p);
            s->wpack = p;
            n->packed_bytes += sz;
        }
    }
    return WM_OK;
}

/* Checks X, W, B of a Conv-like node and makes its window; *M gets the output channels. */
static wm_status conv_geom(const wm_node *n, const wm_win_attr *a, int64_t group, wm_tensor *const *in, int has_bias,
                           wm_win *w, int64_t *M, wm_error *err) {
    const wm_tensor *X = in[0], *W = in[1];
    if (X->rank < 3) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C and spatial dims)", X->rank);
    if (W->rank != X->rank) return wm_node_err(n, err, WM_ERR_INPUT, "W has rank %d, X rank %d", W->rank, X->rank);
    if (X->dims[1] % group || X->dims[1] / group != W->dims[1]) /* not W * group: an empty X allows any group */
        return wm_node_err(n, err, WM_ERR_INPUT, "X has %lld channels; W takes %lld per group with group = %lld",
                           (long long)X->dims[1], (long long)W->dims[1], (long long)group);
    if (W->dims[0] % group)
        return wm_node_err(n, err, WM_ERR_INPUT, "W has %lld output channels, not a multiple of group = %lld",
                           (long long)W->dims[0], (long long)group);
    *M = W->dims[0];
    if (has_bias && n->n_in > 2 && in[2] && (in[2]->rank != 1 || in[2]->dims[0] != *M))
        return wm_node_err(n, err, WM_ERR_INPUT, "B must be 1-D with %lld values", (long long)*M);
    return wm_win_make(n, a, X->rank - 2, X->dims + 2, W->dims + 2, w, err);
}

static wm_status conv_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const conv_state *s = n->state;
    wm_win w;
    int64_t M;
    wm_status st = conv_geom(n, &s->a, s->group, in, 1, &w, &M, err);
    if (st) return st;
    int64_t d[WM_MAX_RANK] = {in[0]->dims[0], M};
    for (int i = 0; i < w.nd; i++) d[2 + i] = w.out[WM_CNN_ND - w.nd + i];
    wm_set_shape(out[0], w.nd + 2, d);
    if (s->fused && n->n_in > 3 && in[3]) { /* Z: the output's shape */
        int same = in[3]->rank == out[0]->rank;
        for (int i = 0; same && i < out[0]->rank; i++) same = in[3]->dims[i] == out[0]->dims[i];
        if (!same) return wm_node_err(n, err, WM_ERR_INPUT, "Z must have the output's shape");
    }
    return WM_OK;
}

static size_t conv_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    const conv_state *s = n->state;
    wm_win w;
    int64_t M = 0;
    if (in[0]->dtype == WM_DT_DOUBLE || conv_geom(n, &s->a, s->group, in, 1, &w, &M, NULL)) return 0;
    size_t b = wm_conv_f32_ws(&w, in[0]->dims[1], M, s->group, s->wpack != NULL, nth);
    if (in[0]->dtype != WM_DT_FLOAT) { /* float32 copies of X, Y and (when not prepacked) W, B */
        b += (size_t)(wm_tensor_numel(in[0]) + wm_tensor_numel(out[0])) * sizeof(float) + 128;
        if (!s->w32) b += (size_t)wm_tensor_numel(in[1]) * sizeof(float) + 64;
        if (!s->b32 && n->n_in > 2 && in[2]) b += (size_t)M * sizeof(float) + 64;
    }
    return b;
}

/* Carves n floats off a workspace cursor (64-byte steps). */
float *wm_conv_ws_take(uint8_t **cur, uint64_t n) {
    float *p = (float *)*cur;
    *cur += (n * sizeof(float) + 63) & ~(uint64_t)63;
    return p;
}

static wm_status conv_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const conv_state *s = n->state;
    wm_win w;
    int64_t M;
    wm_status st = conv_geom(n, &s->a, s->group, in, 1, &w, &M, x->err);
    if (st) return st;
    const wm_tensor *B = n->n_in > 2 ? in[2] : NULL;
    int64_t N = in[0]->dims[0], C = in[0]->dims[1];
    int32_t dt = in[0]->dtype;
    if (dt == WM_DT_DOUBLE) {
        conv_direct_f64(in[0]->data, in[1]->data, B ? B->data : NULL, out[0]->data, &w, N, C, M, s->group, 0, NULL);
        return WM_OK;
    }
    uint8_t *cur = x->ws;
    if (dt == WM_DT_FLOAT) {
        wm_conv_post post = s->post;
        post.z = s->fused && n->n_in > 3 && in[3] ? in[3]->data : NULL;
        wm_conv_f32(x, &w, in[0]->data, s->w32 ? s->w32 : in[1]->data, s->wpack, s->b32 ? s->b32 : B ? B->data : NULL,
                    s->fused ? &post : NULL, out[0]->data, N, C, M, s->group, cur);
        return WM_OK;
    }
    void *gws = cur;
    cur += wm_conv_f32_ws(&w, C, M, s->group, s->wpack != NULL, x->nth);
    float *xf = wm_conv_ws_take(&cur, wm_tensor_numel(in[0])), *yf = wm_conv_ws_take(&cur, wm_tensor_numel(out[0]));
    const float *wf = s->w32, *bf = s->b32;
    if (!wf) {
        float *t = wm_conv_ws_take(&cur, wm_tensor_numel(in[1]));
        wm_convert(dt, in[1]->data, WM_DT_FLOAT, t, wm_tensor_numel(in[1]));
        wf = t;
    }
    if (!bf && B) {
        float *t = wm_conv_ws_take(&cur, (uint64_t)M);
        wm_convert(dt, B->data, WM_DT_FLOAT, t, (uint64_t)M);
        bf = t;
    }
    wm_convert(dt, in[0]->data, WM_DT_FLOAT, xf, wm_tensor_numel(in[0]));
    wm_conv_f32(x, &w, xf, wf, s->wpack, bf, NULL, yf, N, C, M, s->group, gws);
    wm_convert(WM_DT_FLOAT, yf, dt, out[0]->data, wm_tensor_numel(out[0]));
    return WM_OK;
}

/* ---------------------------------------------------------------- ConvInteger */

static const int32_t ci_types[] = {WM_DT_INT8, WM_DT_UINT8, 0};

static wm_status ci_init(wm_node *n, wm_error *err) {
    conv_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    wm_status st = wm_win_attr_read(n, &s->a, 0, 0, err);
    if (st) return st;
    s->group = wm_attr_int(n, "group", 1);
    if (s->group < 1) return wm_node_err(n, err, WM_ERR_INPUT, "group = %lld (must be >= 1)", (long long)s->group);
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs x and w");
    if ((st = wm_check_type(n, 0, ci_types, err)) || (st = wm_check_type(n, 1, ci_types, err))) return st;
    if (wm_has_in(n, 2) && (st = wm_check_same_type(n, 0, 2, err))) return st;
    if (wm_has_in(n, 3) && (st = wm_check_same_type(n, 1, 3, err))) return st;
    n->out_dtype[0] = WM_DT_INT32;
    return WM_OK;
}

static wm_status ci_geom(const wm_node *n, wm_tensor *const *in, wm_win *w, int64_t *M, wm_error *err) {
    const conv_state *s = n->state;
    wm_status st = conv_geom(n, &s->a, s->group, in, 0, w, M, err);
    if (st) return st;
    if (n->n_in > 2 && in[2] && wm_tensor_numel(in[2]) != 1)
        return wm_node_err(n, err, WM_ERR_INPUT, "x_zero_point must be a scalar");
    if (n->n_in > 3 && in[3] && wm_tensor_numel(in[3]) != 1 && wm_tensor_numel(in[3]) != (uint64_t)*M)
        return wm_node_err(n, err, WM_ERR_INPUT, "w_zero_point must be a scalar or have one value per output channel");
    return WM_OK;
}

static wm_status ci_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    wm_win w;
    int64_t M;
    wm_status st = ci_geom(n, in, &w, &M, err);
    if (st) return st;
    int64_t d[WM_MAX_RANK] = {in[0]->dims[0], M};
    for (int i = 0; i < w.nd; i++) d[2 + i] = w.out[WM_CNN_ND - w.nd + i];
    wm_set_shape(out[0], w.nd + 2, d);
    return WM_OK;
}

static size_t ci_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)out, (void)nth;
    return (size_t)(wm_tensor_numel(in[0]) + wm_tensor_numel(in[1]) + (uint64_t)in[1]->dims[0]) * sizeof(int32_t) + 256;
}

static wm_status ci_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const conv_state *s = n->state;
    wm_win w;
    int64_t M;
    wm_status st = ci_geom(n, in, &w, &M, x->err);
    if (st) return st;
    uint64_t nx = wm_tensor_numel(in[0]), nw = wm_tensor_numel(in[1]);
    int32_t *xi = x->ws, *wi = xi + nx, *wz = wi + nw;
    for (uint64_t i = 0; i < nx; i++) xi[i] = (int32_t)wm_tensor_get_int(in[0], i);
    for (uint64_t i = 0; i < nw; i++) wi[i] = (int32_t)wm_tensor_get_int(in[1], i);
    int32_t xz = n->n_in > 2 && in[2] ? (int32_t)wm_tensor_get_int(in[2], 0) : 0;
    const wm_tensor *wzt = n->n_in > 3 ? in[3] : NULL;
    for (int64_t m = 0; m < M; m++)
        wz[m] = wzt ? (int32_t)wm_tensor_get_int(wzt, wm_tensor_numel(wzt) == 1 ? 0 : (uint64_t)m) : 0;
    conv_direct_i32(xi, wi, NULL, out[0]->data, &w, in[0]->dims[0], in[0]->dims[1], M, s->group, xz, wz);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "Conv", 1, 0, conv_init, conv_infer, conv_run, conv_workspace, 0, 0},
    {"com.microsoft", "FusedConv", 1, 0, conv_init, conv_infer, conv_run, conv_workspace, 0, 0},
    {"", "ConvInteger", 10, 0, ci_init, ci_infer, ci_run, ci_workspace, 0, 0},
};

const wm_op_table wm_ops_conv = {ops, sizeof ops / sizeof ops[0]};
