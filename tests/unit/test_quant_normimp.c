/* Unit tests of the data-free norm importance (opt/quant_normimp.c): which MatMul inputs get an entry (a fused or
 * unfused RMS norm's output, a LayerNormalization's with its bias as the mean; not a graph input, not a Relu's, one
 * entry for an input two MatMuls share), its values (gamma^2, checked against the initializers), and the int4 pass
 * with it: W1's codes those of the importance-weighted search, whose gamma^2-weighted error (a naive dequantization
 * here) is below RTN's and the plain search's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "opt/quant.h"
#include "opt/quant_hessian.h"

#define NAMES(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)

enum { K = 64 };

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* roughly N(0, 1) */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)(rng >> 40) / (float)(1ull << 24);
    }
    return (s - 2.0f) * 1.7f;
}

static void add_opset(wm_onnx_model *m, const char *domain, int64_t version) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = version;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

static float *init(wm_onnx_model *m, wm_graph *g, const char *name, int64_t d0, int64_t d1, float lo, float spread) {
    int64_t n = d0 * (d1 ? d1 : 1);
    float *v = wm_arena_alloc(&m->arena, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++) v[i] = lo + (spread > 0 ? expf(spread * frand()) : frand() * 0.05f);
    wm_error e = {0};
    int64_t dims[2] = {d0, d1};
    assert_int_equal(wm_graph_add_initializer(g, name, WM_DT_FLOAT, dims, d1 ? 2 : 1,
                                              (wm_bytes){(const uint8_t *)v, (size_t)n * 4}, NULL, &e), WM_OK);
    return v;
}

/* x -> SimplifiedLayerNormalization(gamma) -> xn -> MatMul W1, MatMul W6; x * gamma2 -> MatMul W2;
 * LayerNormalization(gamma3, beta3) -> MatMul W3; x -> MatMul W4; Relu(xn) -> MatMul W5. */
static wm_onnx_model *net(wm_graph **g, float **gamma, float **gamma2, float **gamma3, float **beta3, float **w1) {
    wm_onnx_model *m = wm_onnx_model_new();
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    m->proto->graph->name = wm_arena_strdup(&m->arena, "normimp");
    add_opset(m, "", 17);
    add_opset(m, "com.microsoft", 1);
    wm_error e = {0};
    assert_int_equal(wm_graph_open(m, m->proto->graph, g, &e), WM_OK);
    assert_int_equal(wm_graph_add_input(*g, "x", WM_DT_FLOAT, (int64_t[]){2, K}, 2, &e), WM_OK);
    *gamma = init(m, *g, "gamma", K, 0, 0.0f, 1.5f);
    *gamma2 = init(m, *g, "gamma2", K, 0, 0.0f, 1.0f);
    *gamma3 = init(m, *g, "gamma3", K, 0, 0.0f, 1.0f);
    *beta3 = init(m, *g, "beta3", K, 0, 0.5f, 0.0f);
    *w1 = init(m, *g, "W1", K, 32, 0.0f, 0.0f);
    static const char *const ws[] = {"W2", "W3", "W4", "W5", "W6"};
    for (int i = 0; i < 5; i++) init(m, *g, ws[i], K, 8, 0.0f, 0.0f);
    assert_non_null(wm_graph_add_node(*g, "SimplifiedLayerNormalization", NULL, "sln", NAMES("x", "gamma"),
                                      NAMES("xn"), &e));
    assert_non_null(wm_graph_add_node(*g, "Mul", NULL, "mul", NAMES("x", "gamma2"), NAMES("xm"), &e));
    assert_non_null(wm_graph_add_node(*g, "LayerNormalization", NULL, "ln", NAMES("x", "gamma3", "beta3"),
                                      NAMES("xl"), &e));
    assert_non_null(wm_graph_add_node(*g, "Relu", NULL, "relu", NAMES("xn"), NAMES("xr"), &e));
    static const char *const a[] = {"xn", "xm", "xl", "x", "xr", "xn"}, *const w[] = {"W1", "W2", "W3", "W4", "W5", "W6"};
    for (int i = 0; i < 6; i++) {
        char y[8];
        snprintf(y, sizeof y, "y%d", i);
        const char *in[2] = {a[i], w[i]}, *out[1] = {y};
        assert_non_null(wm_graph_add_node(*g, "MatMul", NULL, w[i], in, 2, out, 1, &e));
        assert_int_equal(wm_graph_add_output(*g, y, WM_DT_FLOAT, (int64_t[]){2, i ? 8 : 32}, 2, &e), WM_OK);
    }
    return m;
}

static const wm_quant_hessian *entry(const wm_quant_hessians *h, const char *value) {
    for (size_t i = 0; i < h->n; i++)
        if (!strcmp(h->v[i].value, value)) return &h->v[i];
    return NULL;
}

static void test_entries(void **st) {
    (void)st;
    wm_graph *g;
    float *gm, *g2, *g3, *b3, *w1;
    wm_onnx_model *m = net(&g, &gm, &g2, &g3, &b3, &w1);
    wm_quant_hessians h;
    wm_error e = {0};
    assert_int_equal(wm_quant_norm_importance(g, &h, &e), WM_OK);
    assert_int_equal(h.n, 3); /* xn (W1 and W6 share it), xm, xl; not x (a graph input), not xr (a Relu's) */
    const wm_quant_hessian *en = entry(&h, "xn"), *em = entry(&h, "xm"), *el = entry(&h, "xl");
    assert_non_null(en), assert_non_null(em), assert_non_null(el);
    assert_null(entry(&h, "x")), assert_null(entry(&h, "xr"));
    for (int k = 0; k < K; k++) {
        assert_true(en->h[k] == (double)gm[k] * gm[k] && en->h[K + k] == 0.0);
        assert_true(em->h[k] == (double)g2[k] * g2[k] && em->h[K + k] == 0.0);
        assert_true(el->h[k] == (double)g3[k] * g3[k] && el->h[K + k] == (double)b3[k]);
    }
    assert_true(en->K == K && en->rows == 1);
    wm_quant_hessians_free(&h);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* sum_n sum_k gamma_k^2 (w - dequant)^2 over W1 [K, 32] in blocks of 32, asymmetric 4 bits (a naive dequantization
 * of MatMulNBits' layout). */
static double weighted_err(const float *w, const float *gm, const uint8_t *q, const float *sc, const uint8_t *zp) {
    const int64_t N = 32, bs = 32, nblk = K / bs;
    double e = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            int64_t kb = k / bs, r = k % bs;
            const uint8_t *b = q + (n * nblk + kb) * (bs / 2);
            int c = r % 2 ? b[r / 2] >> 4 : b[r / 2] & 15;
            uint8_t zb = zp[n * ((nblk + 1) / 2) + kb / 2];
            int z = kb % 2 ? zb >> 4 : zb & 15;
            double d = (double)w[k * N + n] - (double)sc[n * nblk + kb] * (c - z);
            e += (double)gm[k] * gm[k] * d * d;
        }
    return e;
}

static void test_pass_uses_it(void **st) {
    (void)st;
    wm_graph *g;
    float *gm, *g2, *g3, *b3, *w1;
    wm_onnx_model *m = net(&g, &gm, &g2, &g3, &b3, &w1);
    float w[K * 32];
    memcpy(w, w1, sizeof w);
    wm_quant_hessians h;
    wm_error e = {0};
    assert_int_equal(wm_quant_norm_importance(g, &h, &e), WM_OK);
    wm_quant_config c;
    wm_quant_config_default(&c, WM_QUANT_INT4);
    c.symmetric = 0, c.block_size = 32, c.half_scales = 0, c.importance = h.v, c.n_importance = h.n;
    wm_quant_report r;
    assert_int_equal(wm_quant_run(g, &c, &r, NULL, &e), WM_OK);
    const wm_onnx_tensor *tq = wm_graph_initializer(g, "W1_Q4"), *ts = wm_graph_initializer(g, "W1_scales"),
                         *tz = wm_graph_initializer(g, "W1_zero_points");
    assert_non_null(tq), assert_non_null(ts), assert_non_null(tz);
    /* the reference: the importance-weighted search on the same weights with gamma^2 (wm_nbits_importance), RTN,
       the plain search */
    uint8_t q[3][K * 16], z[3][32];
    float s[3][64];
    const wm_quant_hessian *en = entry(&h, "xn");
    float *imp = wm_nbits_importance(en->h, K, en->rows);
    assert_non_null(imp);
    wm_quant_blocks_imp(w, imp, imp + K, K, 32, 32, 4, 0, q[0], s[0], z[0]);
    wm_quant_blocks(w, K, 32, 32, 4, 0, q[1], s[1], z[1]);
    wm_quant_blocks_search(w, K, 32, 32, 4, 0, q[2], s[2], z[2]);
    assert_memory_equal(wm_onnx_tensor_bytes(tq).p, q[0], sizeof q[0]);
    assert_memory_equal(wm_onnx_tensor_bytes(ts).p, s[0], sizeof s[0]);
    assert_memory_equal(wm_onnx_tensor_bytes(tz).p, z[0], sizeof z[0]);
    double ei = weighted_err(w, gm, q[0], s[0], z[0]), er = weighted_err(w, gm, q[1], s[1], z[1]),
           es = weighted_err(w, gm, q[2], s[2], z[2]);
    print_message("gamma^2-weighted error: RTN %.4g, plain search %.4g, norm importance %.4g\n", er, es, ei);
    assert_true(ei < 0.9 * es && es <= er);
    free(imp);
    wm_quant_report_free(&r);
    wm_quant_hessians_free(&h);
    wm_graph_free(g);
    wm_onnx_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries),
        cmocka_unit_test(test_pass_uses_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
