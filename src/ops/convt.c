/*
 * convt.c - ConvTranspose (groups, dilations, strides, pads, output_padding,
 * output_shape, auto_pad) and Col2Im.
 *
 * ConvTranspose float32 (float16/bfloat16 through float32 buffers): per
 * image and group one GEMM col[M/g * kernel, P_in] = W_g^T x X_g on the
 * kernel table's sgemm, then a col2im scatter-add into the output planes, threads
 * taking whole output channels (fixed order: deterministic). float64 runs
 * the same in double with a direct product.
 */
#include <string.h>

#include "ops/conv_impl.h"
#include "ops/int_math.h"

/* ---------------------------------------------------------------- col2im */

#define COL2IM(name, T)                                                                                          \
    static void name(const T *col, T *y, const wm_win *w, int64_t c0, int64_t c1) {                            \
        int64_t L = wm_win_prod(w->in), kp = wm_win_prod(w->k), IP = wm_win_prod(w->out);                       \
        for (int64_t c = c0; c < c1; c++)                                                                       \
            for (int64_t q = 0; q < kp; q++) {                                                                  \
                int64_t kx = q % w->k[2], ky = (q / w->k[2]) % w->k[1], kz = q / (w->k[2] * w->k[1]);          \
                const T *cr = col + (c * kp + q) * L;                                                           \
                int64_t offx = kx * w->d[2] - w->pb[2], x0, x1;                                                 \
                wm_win_range(w->in[2], w->out[2], w->s[2], offx, &x0, &x1);                                     \
                if (x0 >= x1) continue;                                                                         \
                for (int64_t gz = 0; gz < w->in[0]; gz++) {                                                     \
                    int64_t iz = gz * w->s[0] + kz * w->d[0] - w->pb[0];                                        \
                    if (iz < 0 || iz >= w->out[0]) continue;                                                    \
                    for (int64_t gy = 0; gy < w->in[1]; gy++) {                                                 \
                        int64_t iy = gy * w->s[1] + ky * w->d[1] - w->pb[1];                                    \
                        if (iy < 0 || iy >= w->out[1]) continue;                                                \
                        T *dst = y + c * IP + (iz * w->out[1] + iy) * w->out[2] + offx;                         \
                        const T *src = cr + (gz * w->in[1] + gy) * w->in[2];                                    \
                        for (int64_t gx = x0; gx < x1; gx++) dst[gx * w->s[2]] += src[gx];                      \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
    }

COL2IM(col2im_f32, float)
COL2IM(col2im_f64, double)

void wm_col2im_f32(const float *col, float *y, const wm_win *w, int64_t c0, int64_t c1) { col2im_f32(col, y, w, c0, c1); }

/* ---------------------------------------------------------------- ConvTranspose */

typedef struct convt_state {
    wm_win_attr a;
    int64_t group;
    int n_outpad, n_outshape;
    int64_t outpad[WM_CNN_ND], outshape[WM_CNN_ND + 2];
    const float *w32, *b32; /* prepacked float32 weights/bias (NULL: use the input) */
} convt_state;

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

static wm_status convt_init(wm_node *n, wm_error *err) {
    convt_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    wm_status st = wm_win_attr_read(n, &s->a, 0, 0, err);
    if (st) return st;
    s->group = wm_attr_int(n, "group", 1);
    if (s->group < 1) return wm_node_err(n, err, WM_ERR_INPUT, "group = %lld (must be >= 1)", (long long)s->group);
    size_t k;
    const int64_t *v = wm_attr_ints(n, "output_padding", &k);
    if (k > WM_CNN_ND) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output_padding has %zu values (at most %d spatial dims)", k, WM_CNN_ND);
    for (size_t i = 0; i < k; i++) {
        if (v[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output_padding[%zu] is negative", i);
        s->outpad[i] = v[i];
    }
    s->n_outpad = (int)k;
    v = wm_attr_ints(n, "output_shape", &k);
    if (k > WM_CNN_ND + 2) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output_shape has %zu values", k);
    for (size_t i = 0; i < k; i++) {
        if (v[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output_shape[%zu] is negative", i);
        s->outshape[i] = v[i];
    }
    s->n_outshape = (int)k;
    if (n->n_in < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs X and W");
    if ((st = wm_check_type(n, 0, wm_types_float, err)) || (st = wm_check_same_type(n, 0, 1, err))) return st;
    if (wm_has_in(n, 2) && (st = wm_check_same_type(n, 0, 2, err))) return st;
    n->out_dtype[0] = n->in_dtype[0];
    if (n->in_dtype[0] != WM_DT_DOUBLE) {
        if (n->in_const[1] && !(s->w32 = wm_conv_const_f32(n, n->in_const[1]))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (wm_has_in(n, 2) && n->in_const[2] && !(s->b32 = wm_conv_const_f32(n, n->in_const[2])))
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    return WM_OK;
}

/* Window of a ConvTranspose: in = input spatial dims (the block grid), out = output spatial dims, pb = head pads. */
static wm_status convt_geom(const wm_node *n, wm_tensor *const *in, wm_win *w, int64_t *M, wm_error *err) {
    const convt_state *s = n->state;
    const wm_win_attr *a = &s->a;
    const wm_tensor *X = in[0], *W = in[1];
    if (X->rank < 3) return wm_node_err(n, err, WM_ERR_INPUT, "X has rank %d (needs N, C and spatial dims)", X->rank);
    if (W->rank != X->rank) return wm_node_err(n, err, WM_ERR_INPUT, "W has rank %d, X rank %d", W->rank, X->rank);
    int nd = X->rank - 2;
    if (nd > WM_CNN_ND) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "%d spatial dims (at most %d)", nd, WM_CNN_ND);
    if (W->dims[0] != X->dims[1] || X->dims[1] % s->group)
        return wm_node_err(n, err, WM_ERR_INPUT, "W has %lld input channels, X %lld (group %lld)", (long long)W->dims[0],
                           (long long)X->dims[1], (long long)s->group);
    if (!wm_mul_i64_ok(W->dims[1], s->group, M)) /* an empty X takes any group */
        return wm_node_err(n, err, WM_ERR_INPUT, "group %lld is too large", (long long)s->group);
    if (n->n_in > 2 && in[2] && (in[2]->rank != 1 || in[2]->dims[0] != *M))
        return wm_node_err(n, err, WM_ERR_INPUT, "B must be 1-D with %lld values", (long long)*M);
    if ((a->n_kernel && a->n_kernel != nd) || (a->n_strides && a->n_strides != nd) || (a->n_dil && a->n_dil != nd) ||
        (a->n_pads && a->n_pads != 2 * nd) || (s->n_outpad && s->n_outpad != nd) ||
        (s->n_outshape && s->n_outshape != nd && s->n_outshape != nd + 2))
        return wm_node_err(n, err, WM_ERR_INPUT, "an attribute does not match %d spatial dims", nd);
    memset(w, 0, sizeof *w);
    w->nd = nd;
    for (int i = 0; i < WM_CNN_ND; i++) w->in[i] = w->out[i] = w->k[i] = w->s[i] = w->d[i] = 1;
    for (int i = 0; i < nd; i++) {
        int j = WM_CNN_ND - nd + i;
        int64_t k = W->dims[2 + i], st = a->n_strides ? a->strides[i] : 1, d = a->n_dil ? a->dil[i] : 1;
        if (a->n_kernel && a->kernel[i] != k)
            return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape[%d] = %lld but W has %lld", i, (long long)a->kernel[i],
                               (long long)k);
        int64_t op = s->n_outpad ? s->outpad[i] : 0, ext, span, xin = X->dims[2 + i], out, pb, pe;
        if (op >= st && op >= d)
            return wm_node_err(n, err, WM_ERR_INPUT, "output_padding[%d] = %lld must be smaller than the stride or dilation", i,
                               (long long)op);
        /* span = st * (xin - 1) + op + ext, checked: strides and dilations reach 2^40, dims 2^46 */
        if (!wm_mul_i64_ok(k - 1, d, &ext) || !wm_add_i64_ok(ext, 1, &ext) || !wm_mul_i64_ok(st, xin - 1, &span) ||
            !wm_add_i64_ok(span, op, &span) || !wm_add_i64_ok(span, ext, &span))
            return wm_node_err(n, err, WM_ERR_INPUT, "output spatial dim %d is too large", i);
        if (s->n_outshape || a->auto_pad == WM_AUTOPAD_SAME_UPPER || a->auto_pad == WM_AUTOPAD_SAME_LOWER) {
            if (!s->n_outshape && !wm_mul_i64_ok(xin, st, &out))
                return wm_node_err(n, err, WM_ERR_INPUT, "output spatial dim %d is too large", i);
            if (s->n_outshape) out = s->outshape[s->n_outshape - nd + i];
            int64_t total = span - out;
            pb = a->auto_pad == WM_AUTOPAD_SAME_UPPER ? floor_div2(total) : total - floor_div2(total);
            pe = total - pb;
        } else {
            pb = a->auto_pad == WM_AUTOPAD_VALID || !a->n_pads ? 0 : a->pads[i];
            pe = a->auto_pad == WM_AUTOPAD_VALID || !a->n_pads ? 0 : a->pads[nd + i];
            out = span - pb - pe; /* pads within 2^40 */
        }
        if (out < 0 || xin < 0)
            return wm_node_err(n, err, WM_ERR_INPUT, "output spatial dim %d would be %lld", i, (long long)out);
        w->in[j] = xin, w->out[j] = out, w->k[j] = k, w->s[j] = st, w->d[j] = d, w->pb[j] = pb, w->pe[j] = pe;
    }
    return WM_OK;
}

static wm_status convt_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    wm_win w;
    int64_t M;
    wm_status st = convt_geom(n, in, &w, &M, err);
    if (st) return st;
    int64_t d[WM_MAX_RANK] = {in[0]->dims[0], M};
    for (int i = 0; i < w.nd; i++) d[2 + i] = w.out[WM_CNN_ND - w.nd + i];
    wm_set_shape(out[0], w.nd + 2, d);
    return WM_OK;
}

static size_t convt_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    const convt_state *s = n->state;
    wm_win w;
    int64_t M;
    if (convt_geom(n, in, &w, &M, NULL)) return 0;
    uint64_t colf = (uint64_t)(M / s->group) * (uint64_t)wm_win_prod(w.k) * (uint64_t)wm_win_prod(w.in);
    if (in[0]->dtype == WM_DT_DOUBLE) return (size_t)colf * sizeof(double) + 64;
    uint64_t b = colf * sizeof(float) + 64 +
                 wm_conv_gemm_ws((M / s->group) * wm_win_prod(w.k), wm_win_prod(w.in), in[0]->dims[1] / s->group, nth);
    if (in[0]->dtype != WM_DT_FLOAT) {
        b += (wm_tensor_numel(in[0]) + wm_tensor_numel(out[0])) * sizeof(float) + 128;
        if (!s->w32) b += wm_tensor_numel(in[1]) * sizeof(float) + 64;
        if (!s->b32) b += (uint64_t)M * sizeof(float) + 64;
    }
    return (size_t)b;
}

typedef struct convt_job {
    const wm_win *w;
    const float *b; /* group's bias or NULL */
    const float *col;
    float *y;       /* group's output planes */
    int64_t Mg;
} convt_job;

static void convt_scatter_part(void *arg, int ith, int nth) {
    const convt_job *j = arg;
    long lo, hi;
    wm_split((long)j->Mg, ith, nth, &lo, &hi);
    int64_t IP = wm_win_prod(j->w->out);
    for (long m = lo; m < hi; m++) {
        float *p = j->y + m * IP, v = j->b ? j->b[m] : 0.0f;
        for (int64_t i = 0; i < IP; i++) p[i] = v;
    }
    col2im_f32(j->col, j->y, j->w, lo, hi);
}

/* col and the GEMM's scratch come from ws (wm_conv_ws_take order: col first). */
static void convt_f32(wm_exec *x, const wm_win *w, const float *X, const float *W, const float *B, float *Y, int64_t N,
                      int64_t C, int64_t M, int64_t G, uint8_t *ws) {
    int64_t Cg = C / G, Mg = M / G, kp = wm_win_prod(w->k), inP = wm_win_prod(w->in), IP = wm_win_prod(w->out);
    float *col = wm_conv_ws_take(&ws, (uint64_t)(Mg * kp * inP));
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            wm_sgemm_args ga = {.M = Mg * kp, .N = inP, .K = Cg, .alpha = 1.0f, .A = W + g * Cg * Mg * kp, .lda = Mg * kp,
                                .trans_a = 1, .B = X + (n * C + g * Cg) * inP, .ldb = inP, .C = col, .ldc = inP, .work = ws};
            wm_conv_gemm(x, &ga);
            convt_job j = {w, B ? B + g * Mg : NULL, col, Y + (n * M + g * Mg) * IP, Mg};
            int nth = (uint64_t)(Mg * kp * inP) >= 32768 ? x->nth : 1;
            if (nth > Mg) nth = (int)(Mg ? Mg : 1);
            wm_pool_run(x->pool, convt_scatter_part, &j, nth);
        }
}

static void convt_f64(const wm_win *w, const double *X, const double *W, const double *B, double *Y, int64_t N,
                      int64_t C, int64_t M, int64_t G, double *col) {
    int64_t Cg = C / G, Mg = M / G, kp = wm_win_prod(w->k), inP = wm_win_prod(w->in), IP = wm_win_prod(w->out);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const double *xg = X + (n * C + g * Cg) * inP, *wg = W + g * Cg * Mg * kp;
            for (int64_t r = 0; r < Mg * kp; r++)
                for (int64_t p = 0; p < inP; p++) {
                    double acc = 0;
                    for (int64_t c = 0; c < Cg; c++) acc += wg[c * Mg * kp + r] * xg[c * inP + p];
                    col[r * inP + p] = acc;
                }
            double *yg = Y + (n * M + g * Mg) * IP;
            for (int64_t m = 0; m < Mg; m++)
                for (int64_t i = 0; i < IP; i++) yg[m * IP + i] = B ? B[g * Mg + m] : 0.0;
            col2im_f64(col, yg, w, 0, Mg);
        }
}

static wm_status convt_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const convt_state *s = n->state;
    wm_win w;
    int64_t M;
    wm_status st = convt_geom(n, in, &w, &M, x->err);
    if (st) return st;
    const wm_tensor *B = n->n_in > 2 ? in[2] : NULL;
    int64_t N = in[0]->dims[0], C = in[0]->dims[1];
    int32_t dt = in[0]->dtype;
    uint8_t *cur = x->ws;
    if (dt == WM_DT_DOUBLE) {
        convt_f64(&w, in[0]->data, in[1]->data, B ? B->data : NULL, out[0]->data, N, C, M, s->group, x->ws);
        return WM_OK;
    }
    if (dt == WM_DT_FLOAT) {
        convt_f32(x, &w, in[0]->data, s->w32 ? s->w32 : in[1]->data, s->b32 ? s->b32 : B ? B->data : NULL, out[0]->data,
                  N, C, M, s->group, cur);
        return WM_OK;
    }
    uint8_t *gws = cur;
    cur += (M / s->group) * wm_win_prod(w.k) * wm_win_prod(w.in) * (int64_t)sizeof(float) + 64 +
           (int64_t)wm_conv_gemm_ws((M / s->group) * wm_win_prod(w.k), wm_win_prod(w.in), C / s->group, x->nth);
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
    convt_f32(x, &w, xf, wf, bf, yf, N, C, M, s->group, gws);
    wm_convert(WM_DT_FLOAT, yf, dt, out[0]->data, wm_tensor_numel(out[0]));
    return WM_OK;
}

/* ---------------------------------------------------------------- Col2Im */

static wm_status c2i_init(wm_node *n, wm_error *err) {
    wm_win_attr *a = wm_node_alloc(n, sizeof *a);
    if (!a) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = a;
    wm_status st = wm_win_attr_read(n, a, 0, 0, err);
    if (st) return st;
    if (n->n_in < 3) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs input, image_shape and block_shape");
    if ((st = wm_check_type(n, 0, wm_types_float, err)) || (st = wm_check_type(n, 1, wm_types_index, err)) ||
        (st = wm_check_type(n, 2, wm_types_index, err)))
        return st;
    n->out_dtype[0] = n->in_dtype[0];
    return WM_OK;
}

static wm_status c2i_geom(const wm_node *n, wm_tensor *const *in, wm_win *w, int64_t *C, wm_error *err) {
    const wm_win_attr *a = n->state;
    int64_t img[WM_CNN_ND + 1], blk[WM_CNN_ND + 1];
    int ni, nb;
    wm_status st = wm_cnn_read_ints(n, in[1], img, WM_CNN_ND + 1, &ni, err);
    if (!st) st = wm_cnn_read_ints(n, in[2], blk, WM_CNN_ND + 1, &nb, err);
    if (st) return st;
    if (ni != nb || ni < 1) return wm_node_err(n, err, WM_ERR_INPUT, "image_shape and block_shape differ in length");
    if (ni > WM_CNN_ND) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "%d spatial dims (at most %d)", ni, WM_CNN_ND);
    if (in[0]->rank != 3) return wm_node_err(n, err, WM_ERR_INPUT, "input must be 3-D (N, C * block, L)");
    for (int i = 0; i < ni; i++)
        if (blk[i] < 1) return wm_node_err(n, err, WM_ERR_INPUT, "block_shape[%d] = %lld", i, (long long)blk[i]);
    wm_win_attr a2 = *a;
    a2.n_kernel = 0;
    st = wm_win_make(n, &a2, ni, img, blk, w, err); /* w->out: the block grid over the image */
    if (st) return st;
    int64_t kp = wm_win_prod(w->k), L = wm_win_prod(w->out);
    if (in[0]->dims[1] % kp || in[0]->dims[2] != L)
        return wm_node_err(n, err, WM_ERR_INPUT, "input dims (%lld, %lld) do not match block size %lld and %lld blocks",
                           (long long)in[0]->dims[1], (long long)in[0]->dims[2], (long long)kp, (long long)L);
    *C = in[0]->dims[1] / kp;
    for (int i = 0; i < WM_CNN_ND; i++) { /* turn around: in = block grid, out = image */
        int64_t t = w->in[i];
        w->in[i] = w->out[i];
        w->out[i] = t;
    }
    return WM_OK;
}

static wm_status c2i_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    wm_win w;
    int64_t C;
    wm_status st = c2i_geom(n, in, &w, &C, err);
    if (st) return st;
    int64_t d[WM_MAX_RANK] = {in[0]->dims[0], C};
    for (int i = 0; i < w.nd; i++) d[2 + i] = w.out[WM_CNN_ND - w.nd + i];
    wm_set_shape(out[0], w.nd + 2, d);
    return WM_OK;
}

static size_t c2i_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)n, (void)nth;
    if (in[0]->dtype == WM_DT_FLOAT || in[0]->dtype == WM_DT_DOUBLE) return 0;
    return (size_t)(wm_tensor_numel(in[0]) + wm_tensor_numel(out[0])) * sizeof(float) + 128;
}

static wm_status c2i_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    wm_win w;
    int64_t C;
    wm_status st = c2i_geom(n, in, &w, &C, x->err);
    if (st) return st;
    int64_t N = in[0]->dims[0], IP = wm_win_prod(w.out), CL = in[0]->dims[1] * in[0]->dims[2];
    int32_t dt = in[0]->dtype;
    if (dt == WM_DT_DOUBLE) {
        double *y = out[0]->data;
        memset(y, 0, (size_t)wm_tensor_nbytes(out[0]));
        for (int64_t b = 0; b < N; b++) col2im_f64((const double *)in[0]->data + b * CL, y + b * C * IP, &w, 0, C);
        return WM_OK;
    }
    uint8_t *cur = x->ws;
    const float *col = in[0]->data;
    float *y = out[0]->data;
    if (dt != WM_DT_FLOAT) {
        float *t = wm_conv_ws_take(&cur, wm_tensor_numel(in[0]));
        wm_convert(dt, in[0]->data, WM_DT_FLOAT, t, wm_tensor_numel(in[0]));
        col = t;
        y = wm_conv_ws_take(&cur, wm_tensor_numel(out[0]));
    }
    memset(y, 0, (size_t)wm_tensor_numel(out[0]) * sizeof *y);
    for (int64_t b = 0; b < N; b++) col2im_f32(col + b * CL, y + b * C * IP, &w, 0, C);
    if (dt != WM_DT_FLOAT) wm_convert(WM_DT_FLOAT, y, dt, out[0]->data, wm_tensor_numel(out[0]));
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "ConvTranspose", 1, 0, convt_init, convt_infer, convt_run, convt_workspace, 0, 0},
    {"", "Col2Im", 18, 0, c2i_init, c2i_infer, c2i_run, c2i_workspace, 0, (1u << 1) | (1u << 2)},
};

const wm_op_table wm_ops_convt = {ops, sizeof ops / sizeof ops[0]};
