/*
 * Unit tests of the vision ops' index arithmetic against naive references
 * written here from the ONNX definitions: Conv (1-D/2-D/3-D, strides,
 * dilations, asymmetric pads larger than the kernel, auto_pad, groups,
 * depthwise with a multiplier, pointwise, several GEMM tiles, constant
 * (prepacked) and runtime weights), ConvTranspose (output_padding, groups,
 * dilations), MaxPool (indices, storage_order, dilations, ceil_mode),
 * AveragePool (count_include_pad), LpPool; zero-size batches; results
 * identical for 1 and 2 threads; bad shapes rejected with an error.
 * The ops run through their op-table entries (init, infer, workspace, run)
 * on hand-made nodes, exactly as a session drives them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "ops/op.h"
#include "runtime/pool.h"

/* ---------------------------------------------------------------- a node by hand */

typedef struct tnode {
    wm_arena arena;
    wm_onnx_node proto;
    wm_onnx_attr attr[8];
    wm_onnx_attr *attrp[8];
    int64_t ints[8][12];
    char *ins[4], *outs[2];
    wm_node n;
} tnode;

static void tn_init(tnode *t, const char *op, int n_in, int n_out) {
    memset(t, 0, sizeof *t);
    wm_arena_init(&t->arena);
    static char *names[] = {"x", "w", "b", "z"}, *onames[] = {"y", "i"};
    for (int i = 0; i < n_in; i++) t->ins[i] = names[i];
    for (int i = 0; i < n_out; i++) t->outs[i] = onames[i];
    t->proto.op_type = (char *)op;
    t->proto.input = t->ins;
    t->proto.n_input = (size_t)n_in;
    t->proto.output = t->outs;
    t->proto.n_output = (size_t)n_out;
    t->proto.attribute = t->attrp;
}

static void tn_ints(tnode *t, const char *name, const int64_t *v, int n) {
    size_t k = t->proto.n_attribute++;
    wm_onnx_attr *a = &t->attr[k];
    memcpy(t->ints[k], v, (size_t)n * sizeof *v);
    a->name = (char *)name;
    a->type = WM_ATTR_INTS;
    a->ints = t->ints[k];
    a->n_ints = (size_t)n;
    t->attrp[k] = a;
}

static void tn_int(tnode *t, const char *name, int64_t v) {
    size_t k = t->proto.n_attribute++;
    t->attr[k].name = (char *)name;
    t->attr[k].type = WM_ATTR_INT;
    t->attr[k].i = v;
    t->attrp[k] = &t->attr[k];
}

static void tn_str(tnode *t, const char *name, const char *v) {
    size_t k = t->proto.n_attribute++;
    t->attr[k].name = (char *)name;
    t->attr[k].type = WM_ATTR_STRING;
    t->attr[k].s.p = (const uint8_t *)v;
    t->attr[k].s.n = strlen(v);
    t->attrp[k] = &t->attr[k];
}

/*
 * Runs the node: inputs in[0..n_in) (const_mask bit i: input i is a constant,
 * as an initializer would be), outputs allocated here (caller frees
 * out[k].data). Returns the status of the first failing step.
 */
static wm_status tn_run(tnode *t, int opset, wm_tensor *in, int n_in, unsigned const_mask, wm_tensor *out, int n_out,
                        wm_pool *pool) {
    wm_node *n = &t->n;
    wm_error err = {0};
    n->proto = &t->proto;
    n->opset = opset;
    n->arena = &t->arena;
    n->n_in = n_in;
    n->n_out = n_out;
    n->op = wm_op_find("", t->proto.op_type, opset, NULL);
    assert_non_null(n->op);
    for (int i = 0; i < n_in; i++) {
        n->in_dtype[i] = in[i].dtype;
        n->in_const[i] = (const_mask >> i) & 1 ? &in[i] : NULL;
    }
    wm_status st = n->op->init(n, &err);
    if (st) return st;
    wm_tensor *ip[4], *op[2];
    for (int i = 0; i < n_in; i++) ip[i] = &in[i];
    for (int k = 0; k < n_out; k++) {
        memset(&out[k], 0, sizeof out[k]);
        out[k].dtype = n->out_dtype[k];
        op[k] = &out[k];
    }
    if ((st = n->op->infer(n, ip, op, &err))) return st;
    for (int k = 0; k < n_out; k++) out[k].data = calloc(1, (size_t)wm_tensor_nbytes(&out[k]) + 16);
    int nth = wm_pool_size(pool);
    size_t ws = n->op->workspace ? n->op->workspace(n, ip, op, nth) : 0;
    void *w = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
    wm_exec x = {.pool = pool, .nth = nth, .ws = w, .ws_size = ws, .err = &err};
    st = n->op->run(n, ip, op, &x);
    free(w);
    return st;
}

static void tn_free(tnode *t) { wm_arena_free(&t->arena); }

/* ---------------------------------------------------------------- data */

static uint32_t rng = 12345u;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static wm_tensor tensor(int rank, const int64_t *dims) {
    wm_tensor t = {.dtype = WM_DT_FLOAT, .rank = rank};
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    uint64_t n = wm_tensor_numel(&t);
    float *p = malloc((size_t)n * sizeof *p + 16);
    for (uint64_t i = 0; i < n; i++) p[i] = frand();
    t.data = p;
    return t;
}

/* ---------------------------------------------------------------- naive references (from the ONNX text) */

typedef struct geo {
    int nd;
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
} geo;

/* output size of a conv/pool dim with explicit pads; ceil mode drops a last window starting in the tail pad */
static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int ceil_mode) {
    int64_t ext = d * (k - 1) + 1;
    double v = (double)(in + pb + pe - ext) / (double)s + 1.0;
    int64_t o = ceil_mode ? (int64_t)ceil(v) : (int64_t)floor(v);
    if (ceil_mode && (o - 1) * s >= in + pb) o--;
    return o;
}

/* flat spatial index of coordinates c (nd dims of sizes dims) */
static int64_t flat(const int64_t *c, const int64_t *dims, int nd) {
    int64_t f = 0;
    for (int i = 0; i < nd; i++) f = f * dims[i] + c[i];
    return f;
}

/* advances coordinates c over dims; 0 when wrapped around */
static int next(int64_t *c, const int64_t *dims, int nd) {
    for (int i = nd - 1; i >= 0; i--) {
        if (++c[i] < dims[i]) return 1;
        c[i] = 0;
    }
    return 0;
}

static void ref_conv(const geo *g, const float *x, const float *w, const float *b, float *y, int64_t N, int64_t C,
                     int64_t M, int64_t G) {
    int nd = g->nd;
    int64_t Cg = C / G, Mg = M / G, inP = 1, outP = 1, kP = 1;
    for (int i = 0; i < nd; i++) inP *= g->in[i], outP *= g->out[i], kP *= g->k[i];
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t o[3] = {0, 0, 0};
            if (outP == 0) continue;
            do {
                double acc = b ? b[m] : 0;
                for (int64_t c = 0; c < Cg; c++) {
                    int64_t kk[3] = {0, 0, 0};
                    do {
                        int64_t ic[3];
                        int inside = 1;
                        for (int i = 0; i < nd; i++) {
                            ic[i] = o[i] * g->s[i] + kk[i] * g->d[i] - g->pb[i];
                            inside &= ic[i] >= 0 && ic[i] < g->in[i];
                        }
                        if (inside)
                            acc += (double)x[(n * C + (m / Mg) * Cg + c) * inP + flat(ic, g->in, nd)] *
                                   w[(m * Cg + c) * kP + flat(kk, g->k, nd)];
                    } while (next(kk, g->k, nd));
                }
                y[(n * M + m) * outP + flat(o, g->out, nd)] = (float)acc;
            } while (next(o, g->out, nd));
        }
}

static void check_close(const float *got, const float *want, uint64_t n, double tol, const char *what) {
    for (uint64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= tol * (1 + fabs(want[i]))))
            fail_msg("%s: element %llu is %.8g, reference %.8g", what, (unsigned long long)i, got[i], want[i]);
    }
}

/* ---------------------------------------------------------------- Conv */

typedef struct conv_case {
    int nd;
    int64_t N, C, M, G;
    int64_t in[3], k[3], s[3], d[3], pads[6];
    const char *auto_pad; /* NULL: explicit pads */
    int bias;
} conv_case;

static void conv_check(const conv_case *cc, wm_pool *p1, wm_pool *p2) {
    int nd = cc->nd;
    int64_t xd[5] = {cc->N, cc->C}, wd[5] = {cc->M, cc->C / cc->G}, bd[1] = {cc->M};
    for (int i = 0; i < nd; i++) xd[2 + i] = cc->in[i], wd[2 + i] = cc->k[i];
    wm_tensor in[3] = {tensor(nd + 2, xd), tensor(nd + 2, wd), tensor(1, bd)};
    geo g = {.nd = nd};
    for (int i = 0; i < nd; i++) {
        g.in[i] = cc->in[i], g.k[i] = cc->k[i], g.s[i] = cc->s[i], g.d[i] = cc->d[i];
        int64_t ext = cc->d[i] * (cc->k[i] - 1) + 1;
        if (cc->auto_pad && strcmp(cc->auto_pad, "VALID")) { /* SAME: out = ceil(in / s) */
            g.out[i] = (cc->in[i] + cc->s[i] - 1) / cc->s[i];
            int64_t tot = (g.out[i] - 1) * cc->s[i] + ext - cc->in[i];
            if (tot < 0) tot = 0;
            g.pb[i] = !strcmp(cc->auto_pad, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
            g.pe[i] = tot - g.pb[i];
        } else {
            g.pb[i] = cc->auto_pad ? 0 : cc->pads[i];
            g.pe[i] = cc->auto_pad ? 0 : cc->pads[nd + i];
            g.out[i] = out_dim(cc->in[i], cc->k[i], cc->s[i], cc->d[i], g.pb[i], g.pe[i], 0);
        }
    }
    int64_t yd[5] = {cc->N, cc->M};
    uint64_t ny = (uint64_t)(cc->N * cc->M);
    for (int i = 0; i < nd; i++) yd[2 + i] = g.out[i], ny *= (uint64_t)g.out[i];
    float *ref = malloc((size_t)ny * sizeof *ref + 16);
    ref_conv(&g, in[0].data, in[1].data, cc->bias ? in[2].data : NULL, ref, cc->N, cc->C, cc->M, cc->G);
    float *first = NULL;
    for (int variant = 0; variant < 4; variant++) { /* {runtime, constant} weights x {1, 2} threads */
        tnode t;
        tn_init(&t, "Conv", cc->bias ? 3 : 2, 1);
        int64_t kv[3], sv[3], dv[3];
        for (int i = 0; i < nd; i++) kv[i] = cc->k[i], sv[i] = cc->s[i], dv[i] = cc->d[i];
        tn_ints(&t, "kernel_shape", kv, nd);
        tn_ints(&t, "strides", sv, nd);
        tn_ints(&t, "dilations", dv, nd);
        if (cc->auto_pad) tn_str(&t, "auto_pad", cc->auto_pad);
        else tn_ints(&t, "pads", cc->pads, 2 * nd);
        tn_int(&t, "group", cc->G);
        wm_tensor out;
        wm_status st = tn_run(&t, 22, in, cc->bias ? 3 : 2, (variant & 1) ? 6u : 0u, &out, 1, (variant & 2) ? p2 : p1);
        assert_int_equal(st, WM_OK);
        assert_int_equal(out.rank, nd + 2);
        for (int i = 0; i < nd + 2; i++) assert_int_equal(out.dims[i], yd[i]);
        check_close(out.data, ref, ny, 2e-5, "Conv");
        if (!first) first = out.data;
        else {
            assert_memory_equal(first, out.data, (size_t)ny * sizeof(float)); /* thread counts and packing agree */
            free(out.data);
        }
        tn_free(&t);
    }
    free(first);
    free(ref);
    for (int i = 0; i < 3; i++) free(in[i].data);
}

static wm_pool *pool1, *pool2;

static int setup(void **state) {
    (void)state;
    wm_error e = {0};
    return wm_pool_new(1, &pool1, &e) || wm_pool_new(2, &pool2, &e);
}

static int teardown(void **state) {
    (void)state;
    wm_pool_free(pool1);
    wm_pool_free(pool2);
    return 0;
}

static void test_conv_2d_awkward(void **state) {
    (void)state;
    static const conv_case cases[] = {
        /* odd sizes, stride 2x3, dilation 2x1, asymmetric pads, one larger than the kernel */
        {2, 2, 3, 5, 1, {11, 9}, {3, 2}, {2, 3}, {2, 1}, {1, 0, 4, 2}, NULL, 1},
        /* groups: 2 groups of 3 channels -> 2 x 2 outputs */
        {2, 1, 6, 4, 2, {7, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
        /* depthwise with a channel multiplier of 2, stride 2, dilation 2 */
        {2, 2, 4, 8, 4, {13, 10}, {3, 3}, {2, 2}, {2, 2}, {2, 1, 3, 2}, NULL, 1},
        /* depthwise 3x3 stride 1 (direct rows): dilation 2, asymmetric pads, 21 outputs per row (16 + overlapped 8) */
        {2, 1, 4, 4, 4, {9, 21}, {3, 3}, {1, 1}, {2, 2}, {2, 1, 0, 3}, NULL, 1},
        /* depthwise with rows narrower than a vector, pads on one side */
        {2, 2, 2, 2, 2, {5, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 0, 1, 1}, NULL, 1},
        /* depthwise 7x7 stride 1, pads 3 */
        {2, 1, 3, 3, 3, {9, 12}, {7, 7}, {1, 1}, {1, 1}, {3, 3, 3, 3}, NULL, 0},
        /* pointwise over several GEMM tiles (P = 23 * 29 = 667 > 2 * 256) */
        {2, 2, 5, 7, 1, {23, 29}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, NULL, 1},
        /* 3x3 over several tiles, no bias */
        {2, 1, 3, 17, 1, {19, 31}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0},
        /* many input channels: direct col^T (few kernel rows) vs im2col + transpose paths */
        {2, 1, 20, 9, 1, {6, 7}, {2, 3}, {1, 2}, {1, 1}, {0, 1, 1, 0}, NULL, 1},
        /* 1x1 kernel with stride and pads (not the pointwise path) */
        {2, 1, 4, 3, 1, {5, 6}, {1, 1}, {2, 2}, {1, 1}, {1, 2, 2, 1}, NULL, 1},
        /* kernel as large as the padded input: one output */
        {2, 1, 2, 2, 1, {3, 2}, {5, 4}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
        /* auto_pad */
        {2, 1, 3, 4, 1, {8, 7}, {3, 4}, {2, 3}, {1, 1}, {0}, "SAME_UPPER", 1},
        {2, 1, 3, 4, 1, {8, 7}, {3, 4}, {2, 3}, {1, 2}, {0}, "SAME_LOWER", 1},
        {2, 1, 3, 4, 1, {8, 7}, {3, 4}, {2, 3}, {1, 1}, {0}, "VALID", 0},
        /* zero-size batch */
        {2, 0, 3, 4, 1, {8, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_check(&cases[i], pool1, pool2);
}

static void test_conv_1d_3d(void **state) {
    (void)state;
    static const conv_case cases[] = {
        {1, 2, 3, 4, 1, {17}, {4}, {3}, {2}, {2, 5}, NULL, 1},
        {1, 1, 4, 4, 4, {9}, {3}, {1}, {1}, {1, 1}, NULL, 1}, /* depthwise 1-D */
        {3, 1, 2, 3, 1, {5, 6, 7}, {3, 2, 3}, {2, 1, 2}, {1, 2, 1}, {1, 0, 2, 1, 1, 0}, NULL, 1},
        {3, 2, 4, 4, 2, {4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {0, 1, 1, 1, 1, 0}, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_check(&cases[i], pool1, pool2);
}

static void test_conv_errors(void **state) {
    (void)state;
    int64_t xd[4] = {1, 3, 5, 5}, wd[4] = {4, 2, 3, 3}, wd4[6] = {1, 1, 1, 1, 1, 1}, xd6[6] = {1, 1, 2, 2, 2, 2};
    wm_tensor in[2] = {tensor(4, xd), tensor(4, wd)}, out;
    tnode t;
    tn_init(&t, "Conv", 2, 1); /* W takes 2 channels, X has 3, group 1 */
    assert_int_equal(tn_run(&t, 22, in, 2, 0, &out, 1, pool1), WM_ERR_INPUT);
    tn_free(&t);
    free(in[1].data);
    int64_t wd2[4] = {4, 3, 9, 3};
    in[1] = tensor(4, wd2); /* kernel 9 over 5 + no pads */
    tn_init(&t, "Conv", 2, 1);
    assert_int_equal(tn_run(&t, 22, in, 2, 0, &out, 1, pool1), WM_ERR_INPUT);
    tn_free(&t);
    for (int i = 0; i < 2; i++) free(in[i].data);
    wm_tensor in4[2] = {tensor(6, xd6), tensor(6, wd4)}; /* 4 spatial dims */
    tn_init(&t, "Conv", 2, 1);
    assert_int_equal(tn_run(&t, 22, in4, 2, 0, &out, 1, pool1), WM_ERR_UNSUPPORTED);
    tn_free(&t);
    for (int i = 0; i < 2; i++) free(in4[i].data);
}

/* ---------------------------------------------------------------- ConvTranspose */

static void test_conv_transpose(void **state) {
    (void)state;
    struct {
        int64_t N, C, M, G, in[2], k[2], s[2], d[2], pads[4], op[2];
    } cases[] = {
        {2, 4, 6, 2, {5, 4}, {3, 2}, {2, 3}, {1, 2}, {1, 0, 2, 1}, {1, 2}},
        {1, 3, 2, 1, {3, 3}, {3, 3}, {1, 1}, {2, 1}, {0, 0, 0, 0}, {0, 0}},
        {1, 2, 2, 2, {4, 1}, {1, 3}, {3, 2}, {1, 1}, {0, 1, 0, 0}, {2, 1}},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        int64_t N = cases[ci].N, C = cases[ci].C, M = cases[ci].M, G = cases[ci].G, Mg = M / G, Cg = C / G;
        int64_t xd[4] = {N, C, cases[ci].in[0], cases[ci].in[1]}, wd[4] = {C, Mg, cases[ci].k[0], cases[ci].k[1]}, bd[1] = {M};
        wm_tensor in[3] = {tensor(4, xd), tensor(4, wd), tensor(1, bd)}, out;
        int64_t od[2];
        for (int i = 0; i < 2; i++)
            od[i] = cases[ci].s[i] * (cases[ci].in[i] - 1) + cases[ci].op[i] + (cases[ci].k[i] - 1) * cases[ci].d[i] + 1 -
                    cases[ci].pads[i] - cases[ci].pads[2 + i];
        uint64_t ny = (uint64_t)(N * M * od[0] * od[1]);
        double *acc = calloc((size_t)ny + 1, sizeof *acc);
        const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
        /* y[n, g*Mg+m, i*s + k*d - pb] += x[n, g*Cg+c, i] * w[g*Cg+c, m, k] */
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t m = 0; m < Mg; m++)
                    for (int64_t iy = 0; iy < xd[2]; iy++)
                        for (int64_t ix = 0; ix < xd[3]; ix++)
                            for (int64_t ky = 0; ky < wd[2]; ky++)
                                for (int64_t kx = 0; kx < wd[3]; kx++) {
                                    int64_t oy = iy * cases[ci].s[0] + ky * cases[ci].d[0] - cases[ci].pads[0];
                                    int64_t ox = ix * cases[ci].s[1] + kx * cases[ci].d[1] - cases[ci].pads[1];
                                    if (oy < 0 || oy >= od[0] || ox < 0 || ox >= od[1]) continue;
                                    int64_t oc = (c / Cg) * Mg + m;
                                    acc[((n * M + oc) * od[0] + oy) * od[1] + ox] +=
                                        (double)x[((n * C + c) * xd[2] + iy) * xd[3] + ix] * w[((c * Mg + m) * wd[2] + ky) * wd[3] + kx];
                                }
        float *ref = malloc((size_t)ny * sizeof *ref + 4);
        for (uint64_t i = 0; i < ny; i++) ref[i] = (float)(acc[i] + b[(i / (uint64_t)(od[0] * od[1])) % (uint64_t)M]);
        for (int th = 0; th < 2; th++) {
            tnode t;
            tn_init(&t, "ConvTranspose", 3, 1);
            tn_ints(&t, "strides", cases[ci].s, 2);
            tn_ints(&t, "dilations", cases[ci].d, 2);
            tn_ints(&t, "pads", cases[ci].pads, 4);
            tn_ints(&t, "output_padding", cases[ci].op, 2);
            tn_int(&t, "group", G);
            assert_int_equal(tn_run(&t, 22, in, 3, th ? 6u : 0u, &out, 1, th ? pool2 : pool1), WM_OK);
            assert_int_equal(out.dims[2], od[0]);
            assert_int_equal(out.dims[3], od[1]);
            check_close(out.data, ref, ny, 2e-5, "ConvTranspose");
            free(out.data);
            tn_free(&t);
        }
        free(acc);
        free(ref);
        for (int i = 0; i < 3; i++) free(in[i].data);
    }
}

/* ---------------------------------------------------------------- pools */

enum { P_MAX, P_AVG, P_LP };

typedef struct pool_case {
    int kind, nd;
    int64_t N, C, in[3], k[3], s[3], d[3], pads[6];
    int ceil_mode, include_pad, storage_order, indices, p;
} pool_case;

/* window values by the definition: taps start + k * d inside [0, in); include_pad counts taps inside [-pb, in + pe) */
static void ref_pool(const pool_case *pc, const geo *g, const float *x, float *y, int64_t *ind) {
    int nd = pc->nd;
    int64_t inP = 1, outP = 1;
    for (int i = 0; i < nd; i++) inP *= g->in[i], outP *= g->out[i];
    for (int64_t q = 0; q < pc->N * pc->C; q++) {
        int64_t o[3] = {0, 0, 0};
        if (!outP) continue;
        do {
            double acc = 0, best = 0;
            int64_t cnt = 0, cnt_pad = 0, bi = -1, kk[3] = {0, 0, 0};
            do {
                int64_t ic[3];
                int inside = 1, in_pad = 1;
                for (int i = 0; i < nd; i++) {
                    ic[i] = o[i] * g->s[i] + kk[i] * g->d[i] - g->pb[i];
                    inside &= ic[i] >= 0 && ic[i] < g->in[i];
                    in_pad &= ic[i] >= -g->pb[i] && ic[i] < g->in[i] + g->pe[i];
                }
                cnt_pad += in_pad;
                if (!inside) continue;
                double v = x[q * inP + flat(ic, g->in, nd)];
                cnt++;
                if (pc->kind == P_MAX) {
                    if (bi < 0 || v > best) {
                        best = v;
                        if (pc->storage_order) { /* column-major over the spatial dims */
                            int64_t f = 0;
                            for (int i = nd - 1; i >= 0; i--) f = f * g->in[i] + ic[i];
                            bi = f;
                        } else
                            bi = flat(ic, g->in, nd);
                    }
                } else
                    acc += pc->kind == P_AVG ? v : pow(fabs(v), pc->p);
            } while (next(kk, g->k, nd));
            int64_t oi = q * outP + flat(o, g->out, nd);
            double r = 0;
            if (cnt) r = pc->kind == P_MAX ? best : pc->kind == P_AVG ? acc / (double)(pc->include_pad ? cnt_pad : cnt)
                                                                        : pow(acc, 1.0 / pc->p);
            y[oi] = (float)r;
            if (ind) ind[oi] = cnt ? q * inP + bi : -1;
        } while (next(o, g->out, nd));
    }
}

static void pool_check(const pool_case *pc) {
    int nd = pc->nd;
    geo g = {.nd = nd};
    int64_t xd[5] = {pc->N, pc->C};
    for (int i = 0; i < nd; i++) {
        g.in[i] = pc->in[i], g.k[i] = pc->k[i], g.s[i] = pc->s[i], g.d[i] = pc->d[i];
        g.pb[i] = pc->pads[i], g.pe[i] = pc->pads[nd + i];
        g.out[i] = out_dim(g.in[i], g.k[i], g.s[i], g.d[i], g.pb[i], g.pe[i], pc->ceil_mode);
        xd[2 + i] = pc->in[i];
    }
    wm_tensor in = tensor(nd + 2, xd);
    uint64_t ny = (uint64_t)(pc->N * pc->C);
    for (int i = 0; i < nd; i++) ny *= (uint64_t)g.out[i];
    float *ref = malloc((size_t)ny * sizeof *ref + 4);
    int64_t *rind = malloc((size_t)ny * sizeof *rind + 8);
    ref_pool(pc, &g, in.data, ref, rind);
    static const char *names[] = {"MaxPool", "AveragePool", "LpPool"};
    for (int th = 0; th < 2; th++) {
        tnode t;
        int n_out = pc->indices ? 2 : 1;
        tn_init(&t, names[pc->kind], 1, n_out);
        tn_ints(&t, "kernel_shape", pc->k, nd);
        tn_ints(&t, "strides", pc->s, nd);
        tn_ints(&t, "dilations", pc->d, nd);
        tn_ints(&t, "pads", pc->pads, 2 * nd);
        tn_int(&t, "ceil_mode", pc->ceil_mode);
        if (pc->kind == P_AVG) tn_int(&t, "count_include_pad", pc->include_pad);
        if (pc->kind == P_MAX) tn_int(&t, "storage_order", pc->storage_order);
        if (pc->kind == P_LP) tn_int(&t, "p", pc->p);
        wm_tensor out[2];
        assert_int_equal(tn_run(&t, 22, &in, 1, 0, out, n_out, th ? pool2 : pool1), WM_OK);
        for (int i = 0; i < nd; i++) assert_int_equal(out[0].dims[2 + i], g.out[i]);
        check_close(out[0].data, ref, ny, 1e-5, names[pc->kind]);
        if (pc->indices) {
            assert_int_equal(out[1].dtype, WM_DT_INT64);
            assert_memory_equal(out[1].data, rind, (size_t)ny * sizeof *rind);
            free(out[1].data);
        }
        free(out[0].data);
        tn_free(&t);
    }
    free(ref);
    free(rind);
    free(in.data);
}

static void test_pools(void **state) {
    (void)state;
    static const pool_case cases[] = {
        /* max: odd sizes, stride 2, pads, ceil mode, indices */
        {P_MAX, 2, 2, 3, {11, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0, 0, 1, 0},
        /* max: dilation 2 with pads larger than the kernel (windows entirely in the pad: 0, index -1) */
        {P_MAX, 2, 1, 2, {6, 5}, {2, 2}, {1, 2}, {2, 3}, {3, 0, 4, 2}, 0, 0, 0, 1, 0},
        /* max: storage_order 1 (column-major indices), rectangular kernel */
        {P_MAX, 2, 1, 3, {7, 10}, {2, 3}, {2, 1}, {1, 1}, {0, 1, 1, 0}, 0, 0, 1, 1, 0},
        /* max 1-D and 3-D with ceil mode */
        {P_MAX, 1, 2, 2, {13}, {4}, {3}, {1}, {1, 2}, 1, 0, 0, 1, 0},
        {P_MAX, 3, 1, 2, {5, 6, 7}, {2, 3, 2}, {2, 2, 3}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, 1, 0, 0, 1, 0},
        /* the ResNet stem pool (fast 2-D path) on an odd input */
        {P_MAX, 2, 2, 4, {15, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, 0, 0, 0},
        /* wide rows: the vector column pass (stride 2 max, stride 1 and 2 averages) */
        {P_MAX, 2, 1, 3, {9, 41}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, 0, 0, 0},
        {P_AVG, 2, 1, 2, {6, 37}, {2, 3}, {1, 1}, {1, 1}, {0, 1, 1, 1}, 0, 1, 0, 0, 0},
        {P_AVG, 2, 1, 2, {7, 50}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0, 0, 0, 0},
        /* average: with and without count_include_pad, ceil mode, asymmetric pads */
        {P_AVG, 2, 2, 3, {10, 7}, {3, 2}, {2, 2}, {1, 1}, {1, 0, 2, 1}, 1, 1, 0, 0, 0},
        {P_AVG, 2, 2, 3, {10, 7}, {3, 2}, {2, 2}, {1, 1}, {1, 0, 2, 1}, 1, 0, 0, 0, 0},
        {P_AVG, 2, 1, 2, {9, 9}, {3, 3}, {3, 3}, {2, 2}, {2, 2, 2, 2}, 1, 1, 0, 0, 0}, /* dilated: generic path */
        {P_AVG, 3, 1, 1, {6, 5, 4}, {3, 2, 2}, {2, 1, 2}, {1, 1, 1}, {1, 1, 0, 1, 0, 1}, 0, 1, 0, 0, 0},
        /* Lp, p = 3 and p = 1 */
        {P_LP, 2, 1, 2, {7, 6}, {2, 3}, {1, 2}, {1, 1}, {0, 1, 1, 1}, 0, 0, 0, 0, 3},
        {P_LP, 1, 2, 2, {9}, {3}, {2}, {2}, {1, 1}, 0, 0, 0, 0, 1},
        /* zero-size batch */
        {P_MAX, 2, 0, 3, {5, 5}, {2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) pool_check(&cases[i]);
}

static void test_pool_errors(void **state) {
    (void)state;
    int64_t xd[4] = {1, 2, 3, 3};
    wm_tensor in = tensor(4, xd), out[1];
    tnode t;
    int64_t k[2] = {5, 5};
    tn_init(&t, "MaxPool", 1, 1); /* window larger than the unpadded input */
    tn_ints(&t, "kernel_shape", k, 2);
    assert_int_equal(tn_run(&t, 22, &in, 1, 0, out, 1, pool1), WM_ERR_INPUT);
    tn_free(&t);
    tn_init(&t, "AveragePool", 1, 1); /* kernel_shape missing */
    assert_int_equal(tn_run(&t, 22, &in, 1, 0, out, 1, pool1), WM_ERR_INPUT);
    tn_free(&t);
    int64_t s0[2] = {0, 1}, k2[2] = {2, 2};
    tn_init(&t, "MaxPool", 1, 1); /* stride 0 */
    tn_ints(&t, "kernel_shape", k2, 2);
    tn_ints(&t, "strides", s0, 2);
    assert_int_equal(tn_run(&t, 22, &in, 1, 0, out, 1, pool1), WM_ERR_INPUT);
    tn_free(&t);
    free(in.data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_2d_awkward), cmocka_unit_test(test_conv_1d_3d), cmocka_unit_test(test_conv_errors),
        cmocka_unit_test(test_conv_transpose),  cmocka_unit_test(test_pools),      cmocka_unit_test(test_pool_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
