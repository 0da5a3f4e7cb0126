/*
 * Unit tests of carried GGUF blocks: src/gguf/gguf_carry.c (each quantized type's blocks as MatMulNBits codes,
 * scales and zero points, against the reference dequantizer on hand-made blocks, scale-0 blocks included) and
 * the quantizer's carry mode (src/opt: WM_QUANT_CARRY writes those blocks into MatMulNBits /
 * GatherBlockQuantized, shares a tied table's codes, keeps a float-zero-point table float, and refuses blocks
 * that do not reproduce the graph's float values).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "opt/opt_util.h"
#include "opt/quant.h"

#define NAMES(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* A finite half in +-[1e-4, 2). */
static uint16_t rhalf(void) {
    float v = (float)(rnd() % 20000 + 1) * 1e-4f * (rnd() % 2 ? -1.0f : 1.0f);
    return wm_f32_to_f16(v);
}

static void put_half(uint8_t *p, uint16_t h) { memcpy(p, &h, 2); }

/* nb random blocks of type with finite scales: the scale fields set as the layout says (gguf_dequant.c). */
static void random_blocks(uint32_t type, uint8_t *b, size_t nb) {
    uint32_t by = wm_ggml_block_bytes(type);
    for (size_t i = 0; i < nb * by; i++) b[i] = (uint8_t)rnd();
    for (size_t i = 0; i < nb; i++) {
        uint8_t *p = b + i * by;
        switch (type) {
        case WM_GGML_Q4_0: case WM_GGML_Q5_0: case WM_GGML_Q8_0: put_half(p, rhalf()); break;
        case WM_GGML_Q4_1: case WM_GGML_Q5_1: case WM_GGML_Q4_K: case WM_GGML_Q5_K:
            put_half(p, rhalf()), put_half(p + 2, rhalf());
            break;
        case WM_GGML_Q6_K: put_half(p + 208, rhalf()); break;
        default: break;
        }
    }
}

/* (code - zp) * scale of every element equals the dequantizer's value: exactly for integer zero points, within the
 * rounding of the offset for float ones; codes fit the bits. */
static void check_row(uint32_t type, const uint8_t *row, size_t nb) {
    wm_ggml_carry f;
    assert_true(wm_ggml_carry_form(type, &f));
    size_t n = nb * wm_ggml_block_elems(type), nblk = n / f.block;
    float *want = malloc(n * sizeof *want), *sc = malloc(nblk * sizeof *sc), *zp = malloc(nblk * sizeof *zp);
    uint8_t *codes = malloc(n);
    wm_ggml_dequant_blocks(type, row, nb, want);
    wm_ggml_carry_row(type, row, n, codes, sc, zp);
    for (size_t i = 0; i < n; i++) {
        size_t b = i / f.block;
        assert_true(codes[i] < (1u << f.bits));
        if (f.zp != WM_CARRY_ZP_FLOAT) assert_true(zp[b] == floorf(zp[b]) && zp[b] >= 0 && zp[b] < (1 << f.bits));
        if (f.zp == WM_CARRY_ZP_NONE) assert_true(zp[b] == (float)(1 << (f.bits - 1)));
        float got = ((float)codes[i] - zp[b]) * sc[b];
        if (f.zp != WM_CARRY_ZP_FLOAT) {
            if (got != want[i]) fail_msg("%s element %zu: %.9g, dequantized %.9g", wm_ggml_type_name(type), i,
                                         (double)got, (double)want[i]);
        } else {
            float tol = 4.0f * FLT_EPSILON * (fabsf(sc[b]) * (float)((1 << f.bits) - 1) + fabsf(sc[b] * zp[b]));
            if (!(fabsf(got - want[i]) <= tol))
                fail_msg("%s element %zu: %.9g, dequantized %.9g (tolerance %.3g)", wm_ggml_type_name(type), i,
                         (double)got, (double)want[i], (double)tol);
        }
    }
    free(want);
    free(sc);
    free(zp);
    free(codes);
}

static const uint32_t TYPES[] = {WM_GGML_Q4_0, WM_GGML_Q4_1, WM_GGML_Q5_0, WM_GGML_Q5_1,
                                 WM_GGML_Q8_0, WM_GGML_Q4_K, WM_GGML_Q5_K, WM_GGML_Q6_K};

static void test_forms(void **s) {
    (void)s;
    static const struct {
        uint32_t type;
        int bits;
        uint32_t block;
        int zp;
    } want[] = {{WM_GGML_Q4_0, 4, 32, WM_CARRY_ZP_NONE},  {WM_GGML_Q4_1, 4, 32, WM_CARRY_ZP_FLOAT},
                {WM_GGML_Q5_0, 8, 32, WM_CARRY_ZP_U8},    {WM_GGML_Q5_1, 8, 32, WM_CARRY_ZP_FLOAT},
                {WM_GGML_Q8_0, 8, 32, WM_CARRY_ZP_NONE},  {WM_GGML_Q4_K, 4, 32, WM_CARRY_ZP_FLOAT},
                {WM_GGML_Q5_K, 8, 32, WM_CARRY_ZP_FLOAT}, {WM_GGML_Q6_K, 8, 16, WM_CARRY_ZP_U8}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        wm_ggml_carry f;
        assert_true(wm_ggml_carry_form(want[i].type, &f));
        assert_int_equal(f.bits, want[i].bits);
        assert_int_equal(f.block, want[i].block);
        assert_int_equal(f.zp, want[i].zp);
    }
    static const uint32_t none[] = {WM_GGML_F32, WM_GGML_F16, WM_GGML_BF16, WM_GGML_Q2_K, WM_GGML_IQ4_NL, 4, 999};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) assert_false(wm_ggml_carry_form(none[i], NULL));
}

static void test_random_blocks(void **s) {
    (void)s;
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        uint8_t b[8 * 292];
        for (int rep = 0; rep < 50; rep++) {
            random_blocks(TYPES[t], b, 8);
            check_row(TYPES[t], b, 8);
        }
    }
}

/* Blocks whose scale is 0: with a minimum they are a constant (float forms: codes 0, scale 1, zero point -value),
 * without one zeros; a negative Q6_K sub-scale and the extreme codes. */
static void test_edge_blocks(void **s) {
    (void)s;
    uint8_t b[292];
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        uint32_t type = TYPES[t];
        random_blocks(type, b, 1);
        switch (type) {
        case WM_GGML_Q4_0: case WM_GGML_Q5_0: case WM_GGML_Q8_0: put_half(b, 0); break;
        case WM_GGML_Q4_1: case WM_GGML_Q5_1: put_half(b, 0), put_half(b + 2, wm_f32_to_f16(-0.75f)); break;
        case WM_GGML_Q4_K: case WM_GGML_Q5_K:
            put_half(b, wm_f32_to_f16(0.5f)), put_half(b + 2, wm_f32_to_f16(0.25f));
            b[4] &= 0xc0; /* sub-block 0: scale 0, min 5: the constant -dmin * 5 */
            b[8] = (uint8_t)((b[8] & 0xc0) | 5);
            b[5] = 0xc0;  /* sub-block 1: scale 0 ... */
            b[9] = 0x00;  /* ... and min 0 (high bits in b[5] >> 6 belong to sub-block 5's scale) */
            break;
        case WM_GGML_Q6_K: b[192] = 0x80, b[193] = 0x7f, b[194] = 0; break; /* -128, 127, 0 */
        default: break;
        }
        check_row(type, b, 1);
        wm_ggml_carry f;
        wm_ggml_carry_form(type, &f);
        uint8_t codes[256];
        float sc[16], zp[16], want[256];
        wm_ggml_carry_row(type, b, wm_ggml_block_elems(type), codes, sc, zp);
        wm_ggml_dequant_blocks(type, b, 1, want);
        if (type == WM_GGML_Q4_1 || type == WM_GGML_Q5_1 || type == WM_GGML_Q4_K || type == WM_GGML_Q5_K) {
            assert_true(sc[0] == 1.0f); /* the constant block */
            for (int i = 0; i < 32; i++) assert_int_equal(codes[i], 0);
            assert_true(want[0] != 0.0f && -zp[0] == want[0]);
        }
        if (type == WM_GGML_Q6_K) assert_true(sc[0] < 0 && sc[1] > 0 && sc[2] == 0);
    }
}

/* ---------------------------------------------------------------- the carry mode of the quantizer */

static void add_opset(wm_onnx_model *m, const char *domain, int64_t version) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = version;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

/* rows of K values of one GGUF type, as a carry source */
typedef struct src {
    uint32_t type;
    int64_t N, K;
    uint8_t *blocks; /* N rows of K / block_elems blocks */
} src;

static void src_row(const void *ctx, int64_t r, uint8_t *codes, float *scales, float *zp) {
    const src *s = ctx;
    uint64_t rb = (uint64_t)(s->K / wm_ggml_block_elems(s->type)) * wm_ggml_block_bytes(s->type);
    wm_ggml_carry_row(s->type, s->blocks + (uint64_t)r * rb, (uint64_t)s->K, codes, scales, zp);
}

static void src_make(src *s, uint32_t type, int64_t N, int64_t K) {
    s->type = type, s->N = N, s->K = K;
    size_t nb = (size_t)(N * K / wm_ggml_block_elems(type));
    s->blocks = malloc(nb * wm_ggml_block_bytes(type));
    random_blocks(type, s->blocks, nb);
}

/* The source's values [N, K] (trans 0) or [K, N] (trans 1) in the arena, as the export writes them. */
static float *src_values(wm_onnx_model *m, const src *s, int trans) {
    float *rows = malloc((size_t)(s->N * s->K) * 4), *w = wm_arena_alloc(&m->arena, (size_t)(s->N * s->K) * 4);
    size_t nb = (size_t)(s->N * s->K / wm_ggml_block_elems(s->type));
    wm_ggml_dequant_blocks(s->type, s->blocks, nb, rows);
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t k = 0; k < s->K; k++) w[trans ? k * s->N + n : n * s->K + k] = rows[n * s->K + k];
    free(rows);
    return w;
}

static wm_quant_carry entry(const char *w, const src *s, int stored_t) {
    wm_ggml_carry f;
    assert_true(wm_ggml_carry_form(s->type, &f));
    return (wm_quant_carry){w, wm_ggml_type_name(s->type), s->N, s->K, stored_t, f.bits, f.block, f.zp, 0, NULL,
                            src_row, s};
}

static const wm_onnx_node *node_of(wm_graph *g, const char *op) {
    const wm_onnx_graph *p = wm_graph_proto(g);
    for (size_t i = 0; i < p->n_node; i++)
        if (!strcmp(p->node[i]->op_type, op)) return p->node[i];
    return NULL;
}

/*
 * ids -> Gather(E [V, H]) -> emb; x [3, H] -> Gemm(x, E, transB) -> logits; x -> MatMul(W [H, N]) -> y.
 * E from table_type blocks, W from w_type blocks; perturb: one value of W off by far more than rounding.
 */
static wm_onnx_model *graph(wm_graph **g, const src *e, const src *w, int perturb) {
    wm_onnx_model *m = wm_onnx_model_new();
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    m->proto->graph->name = wm_arena_strdup(&m->arena, "carry");
    add_opset(m, "", 17);
    wm_error err = {0};
    int64_t V = e->N, H = e->K;
    assert_int_equal(wm_graph_open(m, m->proto->graph, g, &err), WM_OK);
    assert_int_equal(wm_graph_add_input(*g, "ids", WM_DT_INT64, (int64_t[]){1, 3}, 2, &err), WM_OK);
    assert_int_equal(wm_graph_add_input(*g, "x", WM_DT_FLOAT, (int64_t[]){3, H}, 2, &err), WM_OK);
    float *ev = src_values(m, e, 0), *wv = src_values(m, w, 1);
    if (perturb) wv[5 * w->N + 3] += 1.0f;
    assert_int_equal(wm_graph_add_initializer(*g, "E", WM_DT_FLOAT, (int64_t[]){V, H}, 2,
                                              (wm_bytes){(const uint8_t *)ev, (size_t)(V * H) * 4}, NULL, &err),
                     WM_OK);
    assert_int_equal(wm_graph_add_initializer(*g, "W", WM_DT_FLOAT, (int64_t[]){H, w->N}, 2,
                                              (wm_bytes){(const uint8_t *)wv, (size_t)(H * w->N) * 4}, NULL, &err),
                     WM_OK);
    assert_non_null(wm_graph_add_node(*g, "Gather", NULL, "embed", NAMES("E", "ids"), NAMES("emb"), &err));
    wm_onnx_node *gm = wm_graph_add_node(*g, "Gemm", NULL, "lm_head", NAMES("x", "E"), NAMES("logits"), &err);
    assert_non_null(gm);
    assert_int_equal(wm_graph_set_attr_int(*g, gm, "transB", 1, &err), WM_OK);
    assert_non_null(wm_graph_add_node(*g, "MatMul", NULL, "proj", NAMES("x", "W"), NAMES("y"), &err));
    assert_int_equal(wm_graph_add_output(*g, "emb", WM_DT_FLOAT, (int64_t[]){1, 3, H}, 3, &err), WM_OK);
    assert_int_equal(wm_graph_add_output(*g, "logits", WM_DT_FLOAT, (int64_t[]){3, V}, 2, &err), WM_OK);
    assert_int_equal(wm_graph_add_output(*g, "y", WM_DT_FLOAT, (int64_t[]){3, w->N}, 2, &err), WM_OK);
    return m;
}

static wm_quant_config carry_config(const wm_quant_carry *c, size_t n) {
    wm_quant_config q;
    wm_quant_config_default(&q, WM_QUANT_CARRY);
    static const char *const ops[] = {"MatMul", "Gemm", "Gather"};
    q.op_types = ops, q.n_op_types = 3;
    q.accuracy_level = 4;
    q.carry = c, q.n_carry = n;
    return q;
}

/* The node's weight dequantized from its initializers equals the source's values (row n, element k). */
static void check_node(wm_graph *g, const wm_onnx_node *nd, const src *s, int gather) {
    const wm_onnx_tensor *q = wm_graph_initializer(g, nd->input[gather ? 0 : 1]);
    const wm_onnx_tensor *sc = wm_graph_initializer(g, nd->input[2]);
    const wm_onnx_tensor *zp = nd->n_input > 3 && nd->input[3][0] ? wm_graph_initializer(g, nd->input[3]) : NULL;
    assert_non_null(q);
    assert_non_null(sc);
    wm_ggml_carry f;
    wm_ggml_carry_form(s->type, &f);
    assert_int_equal(wm_opt_attr_i(nd, "bits", 0), f.bits);
    assert_int_equal(wm_opt_attr_i(nd, "block_size", 0), f.block);
    assert_true(f.zp == WM_CARRY_ZP_NONE ? zp == NULL : zp != NULL);
    if (zp) assert_int_equal(zp->data_type, f.zp == WM_CARRY_ZP_FLOAT ? WM_DT_FLOAT : WM_DT_UINT8);
    int64_t K = s->K, nblk = K / f.block, blob = f.block * f.bits / 8;
    float *want = malloc((size_t)(s->N * K) * 4);
    wm_ggml_dequant_blocks(s->type, s->blocks, (size_t)(s->N * K / wm_ggml_block_elems(s->type)), want);
    const uint8_t *qb = wm_onnx_tensor_bytes(q).p, *sb = wm_onnx_tensor_bytes(sc).p;
    const uint8_t *zb = zp ? wm_onnx_tensor_bytes(zp).p : NULL;
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t k = 0; k < K; k++) {
            int64_t kb = k / f.block, i = k % f.block;
            const uint8_t *blk = qb + (n * nblk + kb) * blob;
            int code = f.bits == 8 ? blk[i] : (blk[i / 2] >> (4 * (i % 2))) & 15;
            float scale, z = (float)(1 << (f.bits - 1));
            memcpy(&scale, sb + (n * nblk + kb) * 4, 4);
            if (f.zp == WM_CARRY_ZP_FLOAT) memcpy(&z, zb + (n * nblk + kb) * 4, 4);
            else if (f.zp == WM_CARRY_ZP_U8) z = (float)zb[n * nblk + kb]; /* 8 bits: one byte a block */
            float got = ((float)code - z) * scale, w = want[n * K + k];
            assert_true(fabsf(got - w) <= 4.0f * FLT_EPSILON * fabsf(scale) * (255.0f + fabsf(z)));
        }
    free(want);
}

static void test_carry_pass(void **s) {
    (void)s;
    static const struct {
        uint32_t table, w;
    } cases[] = {{WM_GGML_Q8_0, WM_GGML_Q4_K}, {WM_GGML_Q6_K, WM_GGML_Q4_1}, {WM_GGML_Q4_K, WM_GGML_Q5_0},
                 {WM_GGML_Q4_0, WM_GGML_Q6_K}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        src e, w;
        src_make(&e, cases[k].table, 8, 256);
        src_make(&w, cases[k].w, 24, 256);
        wm_graph *g;
        wm_onnx_model *m = graph(&g, &e, &w, 0);
        wm_quant_carry cv[2] = {entry("E", &e, 0), entry("W", &w, 1)};
        wm_quant_config c = carry_config(cv, 2);
        wm_quant_report r;
        wm_error err = {0};
        assert_int_equal(wm_quant_run(g, &c, &r, NULL, &err), WM_OK);
        assert_int_equal(wm_graph_check(g, &err), WM_OK);
        const wm_onnx_graph *p = wm_graph_proto(g);
        const wm_onnx_node *proj = NULL, *head = NULL;
        for (size_t i = 0; i < p->n_node; i++)
            if (!strcmp(p->node[i]->op_type, "MatMulNBits")) {
                if (!strcmp(p->node[i]->input[1], "W_Q4") || !strcmp(p->node[i]->input[1], "W_Q8")) proj = p->node[i];
                else head = p->node[i];
            }
        assert_non_null(proj);
        assert_non_null(head);
        check_node(g, proj, &w, 0);
        check_node(g, head, &e, 0);
        assert_int_equal(wm_opt_attr_i(proj, "accuracy_level", 0), 4);
        wm_ggml_carry tf;
        wm_ggml_carry_form(e.type, &tf);
        const wm_onnx_node *gq = node_of(g, "GatherBlockQuantized");
        assert_int_equal(r.n_carried, 3); /* the Gemm, the MatMul, the Gather */
        if (tf.zp == WM_CARRY_ZP_FLOAT) { /* onnxruntime's GatherBlockQuantized takes no float zero points */
            assert_null(gq);
            assert_non_null(node_of(g, "Gather"));
            assert_string_equal(r.carried[2].result, "float");
            assert_string_equal(r.carried[2].op, "Gather");
        } else { /* the tied table shares the Gemm's scales (one copy of the blocks) */
            assert_non_null(gq);
            assert_string_equal(gq->input[2], head->input[2]);
            assert_int_equal(wm_opt_attr_i(gq, "block_size", 0), tf.block);
            assert_string_equal(r.carried[2].result, "carried");
        }
        assert_string_equal(r.carried[0].result, "carried");
        assert_string_equal(r.carried[0].source, wm_ggml_type_name(e.type));
        wm_quant_report_free(&r);
        wm_graph_free(g);
        wm_onnx_free(m);
        free(e.blocks);
        free(w.blocks);
    }
}

/* Blocks that do not give the graph's values are not written: the run stops naming the weight. An entry that
 * asks for requantization gets RTN blocks; a weight without an entry stays float. */
static void test_carry_refusals(void **s) {
    (void)s;
    src e, w;
    src_make(&e, WM_GGML_Q8_0, 8, 256);
    src_make(&w, WM_GGML_Q5_0, 24, 256);
    wm_graph *g;
    wm_onnx_model *m = graph(&g, &e, &w, 1);
    wm_quant_carry cv[2] = {entry("E", &e, 0), entry("W", &w, 1)};
    wm_quant_config c = carry_config(cv, 2);
    wm_quant_report r;
    wm_error err = {0};
    assert_int_equal(wm_quant_run(g, &c, &r, NULL, &err), WM_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "tensor 'W' (Q5_0)"));
    assert_non_null(strstr(err.msg, "row 3, element 5"));
    wm_quant_report_free(&r);
    wm_graph_free(g);
    wm_onnx_free(m);

    m = graph(&g, &e, &w, 0);
    cv[1].bits = 0, cv[1].requant_bits = 8, cv[1].reason = "test: requantize";
    c = carry_config(cv, 1); /* E only: W has no entry */
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_quant_run(g, &c, &r, NULL, &err), WM_OK);
    assert_non_null(node_of(g, "MatMul")); /* W stays float */
    assert_int_equal(r.n_carried, 2);
    wm_quant_report_free(&r);
    wm_graph_free(g);
    wm_onnx_free(m);

    m = graph(&g, &e, &w, 0);
    c = carry_config(cv, 2);
    assert_int_equal(wm_quant_run(g, &c, &r, NULL, &err), WM_OK);
    assert_null(node_of(g, "MatMul"));
    int found = 0;
    for (size_t i = 0; i < r.n_carried; i++)
        if (!strcmp(r.carried[i].tensor, "W")) {
            found = 1;
            assert_string_equal(r.carried[i].result, "requantized");
            assert_int_equal(r.carried[i].bits, 8);
            assert_string_equal(r.carried[i].reason, "test: requantize");
        }
    assert_true(found);
    wm_quant_report_free(&r);
    wm_graph_free(g);
    wm_onnx_free(m);
    free(e.blocks);
    free(w.blocks);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),      cmocka_unit_test(test_random_blocks),  cmocka_unit_test(test_edge_blocks),
        cmocka_unit_test(test_carry_pass), cmocka_unit_test(test_carry_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
