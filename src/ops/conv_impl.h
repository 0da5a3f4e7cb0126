/*
 * conv_impl.h - float32 convolution kernels shared by conv.c, convt.c and
 * the unit tests (internal).
 */
#ifndef WM_OPS_CONV_IMPL_H
#define WM_OPS_CONV_IMPL_H

#include "kernels/kernels.h"
#include "ops/cnn.h"

/* What follows the convolution of com.microsoft FusedConv: y = act(y + z), z with y's shape (or NULL). */
typedef struct wm_conv_post {
    wm_act act;        /* WM_ACT_NONE, RELU, SIGMOID, TANH, CLIP (a, b), LEAKY_RELU (a); or HardSigmoid below */
    int hard_sigmoid;  /* max(0, min(1, a * x + b)) */
    float a, b;
    const float *z;
} wm_conv_post;

/* FusedConv's activation / activation_params attributes (ONNX Runtime contrib op) into post (act, a, b,
   hard_sigmoid; z untouched). */
wm_status wm_conv_act_read(wm_node *n, wm_conv_post *post, wm_error *err);

/* Whether post's activation is a clamp a store can apply (none, Relu, Clip: 1, the bounds in *lo, *hi; NaN passes
   through), or not (0: any other activation or HardSigmoid). post may be NULL (none). */
int wm_conv_post_clamp(const wm_conv_post *post, float *lo, float *hi);

/* b rounded up to a multiple of 64 (workspace offsets) */
static inline size_t wm_conv_up64(size_t b) { return (b + 63) & ~(size_t)63; }

/* Applies post to n values of y at offset off of the output (z read at the same offset). */
void wm_conv_post_apply(const wm_conv_post *post, float *y, uint64_t off, int64_t n);

/*
 * y[N, M, out] = conv(in[N, C, in], wt[M, C/G, k]) + b (b may be NULL), then
 * post (NULL: none), for the window w, on x's pool. wpack: the weights packed by wm_conv_pack
 * (constant weights, packed at session creation), or NULL (packed into ws
 * per run). ws is scratch of wm_conv_f32_ws(w, C, M, G, wpack != NULL,
 * x->nth) bytes (64-byte aligned).
 */
void wm_conv_f32(wm_exec *x, const wm_win *w, const float *in, const float *wt, const void *wpack, const float *b,
                 const wm_conv_post *post, float *y, int64_t N, int64_t C, int64_t M, int64_t G, void *ws);
size_t wm_conv_f32_ws(const wm_win *w, int64_t C, int64_t M, int64_t G, int packed, int nth);

/* The GEMM B operand W_g^T of each group (K = C/G * kernel size, Mg = M/G), for wm_conv_f32. */
size_t wm_conv_pack_size(int64_t K, int64_t Mg, int64_t G);
void wm_conv_pack(const float *wt, int64_t K, int64_t Mg, int64_t G, float *packed);

/* Output positions per GEMM tile of an image of P positions, `images` (image x group) units, nth threads:
   the whole image up to 320, else up to 256, near-equal and a multiple of 8 so that whole-tile shares even out. */
int64_t wm_conv_tile_rows(int64_t P, int64_t images, int nth);

/* Runs a on x's pool with the kernel table's sgemm (a->work: wm_conv_gemm_ws(M, N, K, x->nth) bytes). */
void wm_conv_gemm(wm_exec *x, const wm_sgemm_args *a);
size_t wm_conv_gemm_ws(int64_t M, int64_t N, int64_t K, int nth);

/*
 * One output plane from one input plane (depthwise), single thread:
 * y = b + sum_k wk[k] * x; buf is scratch of wm_conv_plane_ws(w) bytes (the
 * zero-padded plane, or one padded row when that would be large or 3-D).
 */
void wm_conv_plane_f32(const float *x, const float *wk, float b, float *y, const wm_win *w, float *buf);
size_t wm_conv_plane_ws(const wm_win *w);

/*
 * Adds columns col[C * kprod(w->k), L] into images y[C, prod(w->out)] for
 * channels [c0, c1): column l is the block at grid position l of the grid
 * w->in (block origin = grid position * s - pb, taps at multiples of d).
 * This is Col2Im, and the scatter half of ConvTranspose.
 */
void wm_col2im_f32(const float *col, float *y, const wm_win *w, int64_t c0, int64_t c1);

/* float32 view of a constant float tensor, converted into session memory when not float32; NULL on OOM. */
const float *wm_conv_const_f32(wm_node *n, const wm_tensor *t);

/* Carves n floats off a workspace cursor (64-byte aligned steps). */
float *wm_conv_ws_take(uint8_t **cur, uint64_t n);

/* Winograd F(m x m, 3 x 3) of a channels-last 3x3 stride-1 dilation-1 convolution (conv_wino.c). */
typedef struct wm_wino {
    int m, a;           /* output tile m x m (2 or 4), input tile a x a (a = m + 2) */
    int64_t C, M;       /* input and output channels */
    int64_t ldv, ldm;   /* row strides of the transformed input and of the GEMM outputs */
    const float *u;     /* the a x a transformed weights U_p [C, M], each packed for the GEMM, ustride bytes apart */
    size_t ustride;
} wm_wino;

/* Transforms and packs w [M, C, 3, 3] into *g (its memory: the node's, wm_node_alloc). */
wm_status wm_wino_init(wm_node *n, const float *w, int64_t M, int64_t C, int m, wm_wino *g, wm_error *err);
/* Workspace bytes of wm_wino_run for window w, N images, nth threads (64-byte aligned). */
size_t wm_wino_ws(const wm_wino *g, const wm_win *w, int64_t N, int nth);
/* y [N, OH, OW, M] = min(max(conv(X [N, H, W, C]) + b + z, lo), hi), on x's pool (x->ws: wm_wino_ws bytes);
   b, z may be NULL; z may be y (accumulated into). */
void wm_wino_run(wm_exec *x, const wm_wino *g, const wm_win *w, int64_t N, const float *X, const float *b,
                 const float *z, float lo, float hi, float *y);

#endif
