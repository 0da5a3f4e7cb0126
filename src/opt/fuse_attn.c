/*
 * fuse_attn.c - scaled dot-product attention -> MultiHeadAttention (encoders,
 * and decoders whose K/V heads equal the query heads) or GroupQueryAttention
 * (decoders with a KV cache, at level all).
 *
 * The matcher starts at a Softmax over the last axis and walks:
 *   scores = MatMul(Qh * sq, Kt * sk) [* s | / d] [soft-cap] [+ mask] -> Softmax
 *            [-> Where(IsNaN(p), 0, p)] -> MatMul(., Vh) -> Transpose(0,2,1,3) -> Reshape
 * where Qh = Transpose(Reshape(q3, [B,S,N,H]), 0,2,1,3), possibly rotated by a
 * RotaryEmbedding; Kt is Kh transposed in any of the exporters' spellings;
 * Kh/Vh are the same form as Qh, or Concat(past, new) for a KV cache, behind
 * an Unsqueeze/Expand/Reshape repeat when K/V heads are grouped. The fused
 * node takes the 3-D projections (rotary applied in the 3-D layout), the
 * mask as attention_bias (expanded over query rows when it broadcasts), the
 * past as past_key/past_value, and gives present_key/present_value the
 * names the graph's Concats produced. A soft-cap (c * tanh(x / c), Gemma 2) goes to GroupQueryAttention's
 * softcap (MultiHeadAttention has none: such attention stays as it is at level extended). GroupQueryAttention
 * makes its own causal mask from the lengths, so the graph's mask must be causal + padding, or that and a
 * sliding window the matcher reads (keys > query - W: local_window_size W); any other offset comparison in
 * the mask leaves the attention unfused.
 */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"

typedef struct head_src {
    const char *x3;           /* [B, S, heads*H] projection */
    wm_onnx_node *rope;       /* RotaryEmbedding on the 4-D form, or NULL */
    const char *norm4;        /* per-head norm output [B, S, heads, H] (Qwen3's q/k norm) the 3-D input is
                                 remade from, or NULL */
    const char *past;         /* past cache graph input (Concat form), or NULL */
    const char *present;      /* the Concat output, or NULL */
    int64_t heads;
} head_src;

typedef struct attn_match {
    wm_onnx_node *softmax, *out_reshape[4]; /* every reader of the transposed output (all Reshapes) */
    size_t n_reshape;
    const char *out4;          /* the Transpose output the Reshape reads */
    head_src q, k, v;
    int64_t H, N, kvN;
    double scale;
    const char *mask;          /* additive mask, or NULL */
    int nan_guard;             /* the probabilities pass Where(IsNaN(p), 0, p): fully masked rows are not NaN */
    double softcap;            /* scores soft-capped at this value (c * tanh(x / c)); 0: none */
} attn_match;

static double const_value(const wm_graph *g, const char *name, int *ok) {
    double v = 0;
    *ok = name && wm_opt_const_scalar(g, name, &v);
    return v;
}

static int perm_is(const wm_onnx_node *t, const int64_t *p, size_t n) {
    size_t k;
    const int64_t *v = wm_opt_attr_ints(t, "perm", &k);
    if (!v || k != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] != p[i]) return 0;
    return 1;
}

/* y when x = Unsqueeze(y, [2]) with y 4-D (the grouped-heads form's extra axis); else NULL. */
static const char *squeeze_group_axis(const wm_pass_ctx *c, const char *x) {
    wm_onnx_node *u = x ? wm_m_prod(c->g, x, "Unsqueeze") : NULL;
    const char *y = u ? wm_opt_in(u, 0) : NULL;
    if (!y || wm_shapes_rank(c->sh, y) != 4 || wm_shapes_rank(c->sh, x) != 5) return NULL;
    const wm_tinfo *ty = wm_shapes_get(c->sh, y), *tx = wm_shapes_get(c->sh, x);
    if (!(tx->dim[2].k == WM_SD_CONST && tx->dim[2].v == 1)) return NULL;
    for (int i = 0; i < 4; i++)
        if (!wm_sdim_eq(ty->dim[i], tx->dim[i < 2 ? i : i + 1])) return NULL;
    return y;
}

/* x = y * c (c a scalar constant): returns y and multiplies *scale by c; else x itself. */
static const char *unscale(const wm_graph *g, const char *x, double *scale) {
    wm_onnx_node *m = wm_m_prod(g, x, "Mul");
    for (int k = 0; m && k < 2; k++) {
        int ok;
        double c = const_value(g, wm_opt_in(m, (size_t)k), &ok);
        if (ok) {
            *scale *= c;
            return wm_opt_in(m, (size_t)(1 - k));
        }
    }
    return x;
}

/* x = c * tanh(y / c) (or tanh(y * (1/c))), the inner values used only there: returns y and sets *cap; else x. */
static const char *unsoftcap(const wm_graph *g, const char *x, double *cap) {
    wm_onnx_node *m = wm_m_prod(g, x, "Mul");
    for (int k = 0; m && k < 2; k++) {
        int ok;
        double c = const_value(g, wm_opt_in(m, (size_t)k), &ok);
        const char *t = wm_opt_in(m, (size_t)(1 - k));
        wm_onnx_node *th = ok && c > 0 ? wm_m_prod(g, t, "Tanh") : NULL;
        if (!th || wm_opt_nuses(g, t) != 1 || wm_opt_nuses(g, th->input[0]) != 1) continue;
        wm_onnx_node *d = wm_m_prod(g, th->input[0], "Div"), *inv = wm_m_prod(g, th->input[0], "Mul");
        const char *y = d && d->n_input == 2 && wm_opt_const_is(g, d->input[1], c, 1e-6 * c) ? d->input[0] : NULL;
        if (!y && inv) y = wm_m_const_operand(g, inv, "Mul", 1.0 / c, 1e-6 / c);
        if (!y) continue;
        *cap = c;
        return y;
    }
    return x;
}

/* Reshape(x3, [B, S, heads, H]) -> x3 when it splits the last axis into (heads, H). */
static const char *split_heads(const attn_match *a, const wm_pass_ctx *c, const char *x4, int64_t *heads) {
    wm_onnx_node *r = wm_m_prod(c->g, x4, "Reshape");
    const char *x3 = r ? wm_opt_in(r, 0) : NULL;
    if (!x3 || wm_shapes_rank(c->sh, x3) != 3 || wm_shapes_rank(c->sh, x4) != 4) return NULL;
    int64_t n = wm_shapes_dim(c->sh, x4, 2), h = wm_shapes_dim(c->sh, x4, 3), d = wm_shapes_dim(c->sh, x3, 2);
    const wm_tinfo *t3 = wm_shapes_get(c->sh, x3), *t4 = wm_shapes_get(c->sh, x4);
    if (n <= 0 || h != a->H || d != n * h) return NULL;
    if (!wm_sdim_eq(t3->dim[0], t4->dim[0]) || !wm_sdim_eq(t3->dim[1], t4->dim[1])) return NULL;
    *heads = n;
    return x3;
}

/* Qh-like value [B, heads, S, H]: Transpose(Reshape(x3)) [rotated]; fills hs (no cache). */
static int heads_of(const attn_match *a, const wm_pass_ctx *c, const char *x, head_src *hs) {
    static const int64_t p0213[4] = {0, 2, 1, 3};
    wm_onnx_node *p = x ? wm_graph_producer(c->g, x) : NULL;
    if (wm_opt_is_ms(p, "RotaryEmbedding") && !wm_opt_attr_i(p, "interleaved", 0)) { /* partial: rope_3d keeps it */
        hs->rope = p;
        x = wm_opt_in(p, 0);
        p = x ? wm_graph_producer(c->g, x) : NULL;
    }
    if (!wm_opt_is(p, "Transpose") || !perm_is(p, p0213, 4)) return 0;
    const char *x4 = wm_opt_in(p, 0);
    wm_onnx_node *nm = x4 ? wm_m_prod(c->g, x4, "SimplifiedLayerNormalization") : NULL;
    if (nm && (wm_opt_attr_i(nm, "axis", -1) == -1 || wm_opt_attr_i(nm, "axis", -1) == 3) && wm_opt_nuses(c->g, x4) == 1) {
        hs->norm4 = x4; /* RMSNorm over each head: the fused node reads Reshape(norm output) */
        x4 = wm_opt_in(nm, 0);
    }
    hs->x3 = split_heads(a, c, x4, &hs->heads);
    return hs->x3 != NULL;
}

/* A KV value: heads_of, or Concat(past graph input, heads_of) on the sequence axis. */
static int kv_of(const attn_match *a, const wm_pass_ctx *c, const char *x, head_src *hs) {
    wm_onnx_node *cat = wm_m_prod(c->g, x, "Concat");
    if (!cat) return heads_of(a, c, x, hs);
    int64_t ax = wm_opt_attr_i(cat, "axis", 0);
    const wm_value *pv = cat->n_input == 2 ? wm_graph_find_value(c->g, cat->input[0]) : NULL;
    if ((ax != 2 && ax != -2) || !pv || !pv->input || pv->init) return 0;
    if (wm_shapes_rank(c->sh, cat->input[0]) != 4) return 0;
    hs->past = cat->input[0];
    hs->present = cat->output[0];
    return heads_of(a, c, cat->input[1], hs);
}

/* Undoes repeat_kv: Reshape(Expand(Unsqueeze(kv, 2), [B, kvN, rep, T, H]), [B, N, T, H]) -> kv. */
static const char *unrepeat(const wm_pass_ctx *c, const char *x) {
    wm_onnx_node *r = wm_m_prod(c->g, x, "Reshape");
    wm_onnx_node *e = r ? wm_m_prod(c->g, wm_opt_in(r, 0), "Expand") : NULL;
    wm_onnx_node *u = e ? wm_m_prod(c->g, wm_opt_in(e, 0), "Unsqueeze") : NULL;
    if (!u || wm_shapes_rank(c->sh, wm_opt_in(u, 0)) != 4 || wm_shapes_rank(c->sh, wm_opt_in(e, 0)) != 5) return x;
    const wm_tinfo *ti = wm_shapes_get(c->sh, wm_opt_in(u, 0)), *te = wm_shapes_get(c->sh, wm_opt_in(e, 0));
    if (!(te->dim[2].k == WM_SD_CONST && te->dim[2].v == 1) || !wm_sdim_eq(ti->dim[1], te->dim[1])) return x;
    return wm_opt_in(u, 0);
}

/* Kt = Kh transposed on the last two axes, in the spellings exporters use; returns Kh (or a [B,T,N,H] view). */
static const char *untranspose_k(const wm_pass_ctx *c, const char *kt, int *bsnh) {
    static const int64_t p0132[4] = {0, 1, 3, 2}, p0231[4] = {0, 2, 3, 1}, p021[3] = {0, 2, 1};
    *bsnh = 0;
    wm_onnx_node *t = wm_m_prod(c->g, kt, "Transpose");
    if (t && perm_is(t, p0132, 4)) return wm_opt_in(t, 0);
    if (t && perm_is(t, p0231, 4)) {
        *bsnh = 1;
        return wm_opt_in(t, 0);
    }
    /* sdpa: Reshape(Transpose(Reshape(Kh, [-1, T, H]), 0,2,1), [B, N, H, T]) */
    wm_onnx_node *r2 = wm_m_prod(c->g, kt, "Reshape");
    wm_onnx_node *t3 = r2 ? wm_m_prod(c->g, wm_opt_in(r2, 0), "Transpose") : NULL;
    wm_onnx_node *r1 = t3 && perm_is(t3, p021, 3) ? wm_m_prod(c->g, wm_opt_in(t3, 0), "Reshape") : NULL;
    const char *kh = r1 ? wm_opt_in(r1, 0) : NULL;
    if (!kh || wm_shapes_rank(c->sh, kh) != 4 || wm_shapes_rank(c->sh, kt) != 4) return NULL;
    const wm_tinfo *a = wm_shapes_get(c->sh, kh), *b = wm_shapes_get(c->sh, kt);
    for (int i = 0; i < 2; i++)
        if (!wm_sdim_eq(a->dim[i], b->dim[i])) return NULL;
    if (!wm_sdim_eq(a->dim[2], b->dim[3]) || !wm_sdim_eq(a->dim[3], b->dim[2])) return NULL;
    return kh;
}

/* The key side from Kt: fills a->k (heads, cache, rope) and a->kvN. */
static int key_of(attn_match *a, const wm_pass_ctx *c, const char *kt, double *scale, int grouped) {
    int bsnh = 0;
    const char *kh;
    if (grouped) { /* Transpose(Unsqueeze(Kh, 2), 0,1,2,4,3) */
        static const int64_t p01243[5] = {0, 1, 2, 4, 3};
        wm_onnx_node *t = wm_m_prod(c->g, unscale(c->g, kt, scale), "Transpose");
        kh = t && perm_is(t, p01243, 5) ? squeeze_group_axis(c, wm_opt_in(t, 0)) : NULL;
    } else kh = untranspose_k(c, unscale(c->g, kt, scale), &bsnh);
    if (!kh) return 0;
    if (bsnh) { /* Transpose(Reshape(k3, [B,T,N,H]), 0,2,3,1): no cache, no rope */
        a->k.x3 = split_heads(a, c, kh, &a->k.heads);
        return a->k.x3 != NULL;
    }
    kh = unscale(c->g, kh, scale);
    return kv_of(a, c, unrepeat(c, kh), &a->k);
}

/* Walks the pattern around softmax sm; 1 with *a filled when it matches. */
static int match(const wm_pass_ctx *c, wm_onnx_node *sm, attn_match *a) {
    static const int64_t p0213[4] = {0, 2, 1, 3};
    wm_graph *g = c->g;
    memset(a, 0, sizeof *a);
    a->softmax = sm;
    int64_t ax = wm_opt_attr_i(sm, "axis", -1);
    if (ax != -1 && ax != 3) return 0;
    /* forward: probabilities -> MatMul(P, Vh) -> Transpose -> Reshape */
    const char *p = sm->output[0];
    wm_onnx_node *w = wm_m_consumer(g, p, "Where");
    if (w && wm_opt_nuses(g, p) == 2) {
        wm_onnx_node *nan = wm_m_prod(g, wm_opt_in(w, 0), "IsNaN");
        if (!nan || strcmp(nan->input[0], p) || strcmp(wm_opt_in(w, 2), p) || !wm_opt_const_is(g, w->input[1], 0, 0))
            return 0;
        p = w->output[0];
        a->nan_guard = 1;
    }
    wm_onnx_node *pv = wm_m_sole(g, p, "MatMul");
    if (!pv || strcmp(pv->input[0], p)) return 0;
    /* grouped KV heads without repeat: [B, kvN, N/kvN, S, H] products, Reshape back to [B, N, S, H] */
    const char *pvo = pv->output[0];
    int grouped = wm_shapes_rank(c->sh, pvo) == 5;
    if (grouped) {
        wm_onnx_node *r = wm_m_sole(g, pvo, "Reshape");
        if (!r || wm_shapes_rank(c->sh, r->output[0]) != 4) return 0;
        pvo = r->output[0];
    }
    wm_onnx_node *tr = wm_m_sole(g, pvo, "Transpose");
    if (!tr || !perm_is(tr, p0213, 4) || wm_opt_is_graph_output(g, tr->output[0])) return 0;
    size_t nu;
    const wm_use *u = wm_graph_consumers(g, tr->output[0], &nu);
    if (!nu || nu > 4) return 0;
    for (size_t i = 0; i < nu; i++) {
        if (!wm_opt_is(u[i].node, "Reshape") || u[i].slot != 0) return 0;
        a->out_reshape[a->n_reshape++] = u[i].node;
    }
    a->out4 = tr->output[0];
    /* backward: [+ mask] [* s | / d] MatMul(Qh, Kt) */
    const char *x = sm->input[0];
    double scale = 1.0;
    wm_onnx_node *add = wm_m_prod(g, x, "Add");
    const char *qk = x;
    if (add) {
        for (int k = 0; k < 2 && qk == x; k++) {
            const char *s = wm_opt_in(add, (size_t)k);
            wm_onnx_node *sp = s ? wm_graph_producer(g, s) : NULL;
            if (wm_opt_is(sp, "MatMul") || wm_opt_is(sp, "Mul") || wm_opt_is(sp, "Div")) {
                qk = s;
                a->mask = wm_opt_in(add, (size_t)(1 - k));
            }
        }
        if (qk == x || !a->mask || wm_opt_nuses(g, qk) != 1) return 0;
    }
    qk = unsoftcap(g, qk, &a->softcap);
    wm_onnx_node *div = wm_m_prod(g, qk, "Div");
    int ok;
    if (div) {
        double d = const_value(g, wm_opt_in(div, 1), &ok);
        if (!ok || d == 0) return 0;
        scale /= d;
        qk = div->input[0];
    } else qk = unscale(g, qk, &scale);
    wm_onnx_node *mm = wm_m_prod(g, qk, "MatMul");
    if (!mm) return 0;
    const char *qh = unscale(g, mm->input[0], &scale), *q5 = NULL;
    if (grouped) { /* Reshape(Qh, [B, kvN, N/kvN, S, H]) */
        wm_onnx_node *r = wm_m_prod(g, qh, "Reshape");
        q5 = qh;
        qh = r ? unscale(g, wm_opt_in(r, 0), &scale) : NULL;
        if (!qh || wm_shapes_rank(c->sh, qh) != 4) return 0;
    }
    a->H = wm_shapes_dim(c->sh, qh, 3);
    if (a->H <= 0 || !heads_of(a, c, qh, &a->q) || !key_of(a, c, mm->input[1], &scale, grouped)) return 0;
    const char *vh = grouped ? squeeze_group_axis(c, pv->input[1]) : unrepeat(c, pv->input[1]);
    if (!vh || !kv_of(a, c, vh, &a->v)) return 0;
    a->N = a->q.heads;
    a->kvN = a->k.heads;
    a->scale = scale;
    if (a->v.heads != a->kvN || a->N % a->kvN || a->v.rope || a->v.norm4) return 0;
    if (grouped && (wm_shapes_dim(c->sh, q5, 1) != a->kvN || wm_shapes_dim(c->sh, q5, 2) != a->N / a->kvN ||
                    wm_shapes_dim(c->sh, q5, 4) != a->H || wm_shapes_dim(c->sh, pvo, 1) != a->N))
        return 0;
    if (grouped && a->mask && !(a->mask = squeeze_group_axis(c, a->mask))) return 0;
    if (!a->k.past != !a->v.past) return 0;
    if (a->k.rope && (!a->q.rope || strcmp(a->k.rope->input[2], a->q.rope->input[2]))) return 0;
    if (a->mask) {
        int mr = wm_shapes_rank(c->sh, a->mask);
        int32_t mt = wm_shapes_dtype(c->sh, a->mask), qt = wm_shapes_dtype(c->sh, a->q.x3);
        /* rank 2: sdpa's causal mask [S, T] (is_causal, CLIP's text tower), for every batch and head; its rows are
           the queries' (a row broadcast over them, [1, T], stays unfused) */
        if (mr == 2 && !(wm_shapes_dim(c->sh, a->mask, 0) > 1 && !a->k.past)) return 0;
        if ((mr != 4 && mr != 2) || !mt || mt != qt || (a->nan_guard && mt != WM_DT_FLOAT && mt != WM_DT_FLOAT16))
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- emission */

/* RotaryEmbedding on the 3-D projection: same caches and positions, num_heads given. */
static const char *rope_3d(wm_pass_ctx *c, const head_src *hs) {
    const char *x3 = hs->x3;
    if (hs->norm4) { /* the normalized heads back to [B, S, heads*H] */
        int64_t dims[3] = {0, 0, hs->heads * wm_shapes_dim(c->sh, hs->norm4, 3)};
        const char *shp = wm_opt_const_i64(c->g, "heads_merged", dims, 3, 0, c->err);
        const char *rin[2] = {hs->norm4, shp};
        if (!shp || !(x3 = wm_opt_emit(c->g, "Reshape", NULL, rin, 2, c->err))) return NULL;
    }
    if (!hs->rope) return x3;
    const char *in[4] = {x3, hs->rope->input[1], hs->rope->input[2], hs->rope->input[3]}, *out;
    wm_onnx_node *n = wm_opt_emit_node(c->g, "RotaryEmbedding", "com.microsoft", in, 4, &out, c->err);
    int64_t rd = wm_opt_attr_i(hs->rope, "rotary_embedding_dim", 0);
    if (!n || wm_graph_set_attr_int(c->g, n, "interleaved", 0, c->err) ||
        wm_graph_set_attr_int(c->g, n, "num_heads", hs->heads, c->err) ||
        (rd && wm_graph_set_attr_int(c->g, n, "rotary_embedding_dim", rd, c->err)))
        return NULL;
    return out;
}

/* The additive mask broadcast to [.., .., S, T] when its query axis is 1 (MultiHeadAttention needs S rows). */
/*
 * The mask with -inf raised to the lowest finite value, where the graph guarded its probabilities with
 * Where(IsNaN(p), 0, p) (torch's sdpa export: a boolean mask becomes -inf, and a row whose keys are all masked,
 * a left-padded position, gives NaN that the Where zeroes). The fused ops have no such guard: -inf would make
 * those rows NaN, and the NaN would reach every row of the next layer through its values (0 x NaN). With a
 * finite floor such a row averages its values instead of giving 0, and every other row is unchanged (its
 * masked keys still weigh exp(-huge) = 0). One Max per mask, shared by the layers.
 */
static const char *finite_mask(wm_pass_ctx *c, const char *mask) {
    size_t nu;
    const wm_use *u = wm_graph_consumers(c->g, mask, &nu);
    int32_t dt = wm_shapes_dtype(c->sh, mask);
    double lo = dt == WM_DT_FLOAT16 ? -65504.0 : -3.4028234663852886e38;
    for (size_t i = 0; i < nu; i++)
        if (wm_opt_is(u[i].node, "Max") && u[i].node->n_input == 2 && u[i].slot == 0 &&
            wm_opt_const_is(c->g, u[i].node->input[1], lo, 0))
            return u[i].node->output[0];
    uint16_t h = 0xfbff; /* -65504 */
    float f = (float)lo;
    const char *k = dt == WM_DT_FLOAT16 ? wm_opt_const_raw(c->g, "mask_floor", dt, NULL, 0, &h, 2, c->err)
                    : dt == WM_DT_FLOAT ? wm_opt_const_raw(c->g, "mask_floor", dt, NULL, 0, &f, 4, c->err)
                                        : NULL;
    const char *in[2] = {mask, k};
    return k ? wm_opt_emit(c->g, "Max", NULL, in, 2, c->err) : NULL;
}

static const char *full_rows(wm_pass_ctx *c, const attn_match *a, const char *q3) {
    const char *mask = a->nan_guard ? finite_mask(c, a->mask) : a->mask;
    if (mask && wm_shapes_rank(c->sh, a->mask) == 2) { /* [S, T] -> [1, 1, S, T]: Expand to ones broadcasts */
        static const int64_t ones[4] = {1, 1, 1, 1};
        const char *k4 = wm_opt_const_i64(c->g, "mha_ones", ones, 4, 0, c->err);
        const char *ei[2] = {mask, k4};
        return k4 ? wm_opt_emit(c->g, "Expand", NULL, ei, 2, c->err) : NULL;
    }
    if (!mask || wm_shapes_dim(c->sh, a->mask, 2) != 1) return mask;
    wm_graph *g = c->g;
    int64_t one = 1, idx = 1;
    const char *k1 = wm_opt_const_i64(g, "mha_one", &one, 1, 0, c->err), *ki = wm_opt_const_i64(g, "mha_seq", &idx, 1, 0, c->err);
    if (!k1 || !ki) return NULL;
    const char *in1[1] = {q3}; /* the query as the fused node reads it: no dead projection kept alive */
    const char *shp = wm_opt_emit(g, "Shape", NULL, in1, 1, c->err);
    const char *gi[2] = {shp, ki};
    const char *s = shp ? wm_opt_emit(g, "Gather", NULL, gi, 2, c->err) : NULL;
    const char *ci[4] = {k1, k1, s, k1}, *tgt;
    wm_onnx_node *cat = s ? wm_opt_emit_node(g, "Concat", NULL, ci, 4, &tgt, c->err) : NULL;
    if (!cat || wm_graph_set_attr_int(g, cat, "axis", 0, c->err)) return NULL;
    const char *ei[2] = {mask, tgt};
    return wm_opt_emit(g, "Expand", NULL, ei, 2, c->err);
}

/* Points the output Reshape at the fused [B, S, N*H] result (it still gives the graph's shape). */
static wm_status rewire_output(wm_pass_ctx *c, const attn_match *a, const char *o3) {
    wm_status s = WM_OK;
    for (size_t i = 0; i < a->n_reshape && !s; i++) s = wm_graph_set_input(c->g, a->out_reshape[i], 0, o3, c->err);
    return s;
}

/* The graph's present outputs take new names so the fused node can produce them; returns them. */
static wm_status free_present(wm_pass_ctx *c, const head_src *hs) {
    if (!hs->present) return WM_OK;
    wm_onnx_node *cat = wm_graph_producer(c->g, hs->present);
    return cat ? wm_graph_remove_node(c->g, cat, c->err) : WM_OK;
}

/* Splits x3 = Add(MatMul out, b[D]) (one use, no rotary): the MatMul output and b; 0 otherwise. */
static int proj_bias(const wm_pass_ctx *c, const head_src *hs, const char **mm, const char **b) {
    wm_onnx_node *add = hs->rope || hs->norm4 ? NULL : wm_m_prod(c->g, hs->x3, "Add");
    int64_t d = wm_shapes_dim(c->sh, hs->x3, -1);
    if (!add || wm_opt_nuses(c->g, hs->x3) != 1 || d <= 0) return 0;
    for (int k = 0; k < 2; k++) {
        const wm_onnx_tensor *t = wm_graph_constant(c->g, wm_opt_in(add, (size_t)k));
        wm_onnx_node *p = wm_graph_producer(c->g, wm_opt_in(add, (size_t)(1 - k)));
        if (!t || t->n_dims != 1 || t->dims[0] != d || !(wm_opt_is(p, "MatMul") || wm_opt_is_ms(p, "MatMulNBits")))
            continue;
        *b = add->input[k];
        *mm = add->input[1 - k];
        return 1;
    }
    return 0;
}

/* The three projection biases folded into MultiHeadAttention's bias input (D + D + Dv), when all have one. */
static const char *qkv_bias(wm_pass_ctx *c, const attn_match *a, const char **q, const char **k, const char **v) {
    const char *mq, *mk, *mv, *bq, *bk, *bv;
    if (!proj_bias(c, &a->q, &mq, &bq) || !proj_bias(c, &a->k, &mk, &bk) || !proj_bias(c, &a->v, &mv, &bv)) return "";
    const wm_onnx_tensor *t[3] = {wm_graph_constant(c->g, bq), wm_graph_constant(c->g, bk), wm_graph_constant(c->g, bv)};
    wm_ct parts[3], all;
    memset(parts, 0, sizeof parts);
    int64_t n = t[0]->dims[0] + t[1]->dims[0] + t[2]->dims[0];
    const char *name = NULL;
    if (t[0]->data_type != t[1]->data_type || t[0]->data_type != t[2]->data_type) return "";
    if (!wm_ct_alloc(&all, t[0]->data_type, &n, 1, c->err)) {
        size_t es = wm_ct_elem_size(all.dtype), off = 0;
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++) {
            ok = wm_ct_from_tensor(t[i], 0, &parts[i], c->err) == WM_OK;
            if (ok) memcpy((char *)all.data + off, parts[i].data, (size_t)parts[i].n * es);
            if (ok) off += (size_t)parts[i].n * es;
        }
        if (ok && (name = wm_opt_name(c->g, "qkv_bias")) && wm_opt_add_ct(c->g, name, &all, c->err)) name = NULL;
        for (int i = 0; i < 3; i++) wm_ct_free(&parts[i]);
        wm_ct_free(&all);
    }
    if (!name) return NULL;
    *q = mq;
    *k = mk;
    *v = mv;
    return name;
}

/* The MatMul computing name when it is MatMul(x, W const 2-D) read only here; NULL otherwise. */
static wm_onnx_node *const_matmul(const wm_pass_ctx *c, const char *name) {
    wm_onnx_node *m = wm_m_prod(c->g, name, "MatMul");
    const wm_onnx_tensor *w = m ? wm_graph_constant(c->g, wm_opt_in(m, 1)) : NULL;
    if (!w || w->n_dims != 2 || wm_opt_nuses(c->g, name) != 1) return NULL;
    return m;
}

/* Column-concatenation of the 2-D constants a, b, c ([D, n_i] each) as a new initializer; its name or NULL. */
static const char *concat_columns(wm_pass_ctx *c, const char *const *names) {
    wm_ct t[3], all;
    memset(t, 0, sizeof t);
    const char *out = NULL;
    int64_t D = 0, cols = 0;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        ok = wm_ct_from_tensor(wm_graph_constant(c->g, names[i]), 0, &t[i], c->err) == WM_OK &&
             (i == 0 || (t[i].dtype == t[0].dtype && t[i].dims[0] == t[0].dims[0]));
        if (ok) cols += t[i].dims[1];
    }
    D = ok ? t[0].dims[0] : 0;
    int64_t dims[2] = {D, cols};
    if (ok && !wm_ct_alloc(&all, t[0].dtype, dims, 2, c->err)) {
        size_t es = wm_ct_elem_size(all.dtype);
        for (int64_t r = 0; r < D; r++) {
            char *dst = (char *)all.data + (size_t)(r * cols) * es;
            for (int i = 0; i < 3; i++) {
                size_t n = (size_t)t[i].dims[1] * es;
                memcpy(dst, (const char *)t[i].data + (size_t)r * n, n);
                dst += n;
            }
        }
        if ((out = wm_opt_name(c->g, "qkv_weight")) && wm_opt_add_ct(c->g, out, &all, c->err)) out = NULL;
        wm_ct_free(&all);
    }
    for (int i = 0; i < 3; i++) wm_ct_free(&t[i]);
    return out;
}

/*
 * Self-attention without cache or rotary whose Q, K and V are MatMuls of one input: the Attention
 * op (one packed QKV GEMM). Returns 1 when emitted, 0 when the form does not apply, -1 on error.
 */
static int emit_packed(wm_pass_ctx *c, const attn_match *a, const char *q, const char *k, const char *v,
                       const char *qkvb) {
    wm_graph *g = c->g;
    if (a->k.past || a->q.rope || a->k.rope || a->q.norm4 || a->k.norm4) return 0;
    wm_onnx_node *mq = const_matmul(c, q), *mk = const_matmul(c, k), *mv = const_matmul(c, v);
    if (!mq || !mk || !mv || strcmp(mq->input[0], mk->input[0]) || strcmp(mq->input[0], mv->input[0])) return 0;
    const char *x = mq->input[0];
    if (wm_shapes_rank(c->sh, x) != 3) return 0;
    const char *ws[3] = {mq->input[1], mk->input[1], mv->input[1]};
    const char *w = concat_columns(c, ws), *b = qkvb;
    if (!w) return c->err->status ? -1 : 0;
    const wm_onnx_tensor *wt = wm_graph_constant(g, w);
    if (!*b) { /* the op's bias input: zeros when the projections had none */
        wm_ct z;
        int64_t n = wt->dims[1];
        if (wm_ct_alloc(&z, wt->data_type, &n, 1, c->err)) return -1;
        b = wm_opt_name(g, "qkv_bias");
        wm_status st = b ? wm_opt_add_ct(g, b, &z, c->err) : WM_ERR_NOMEM;
        wm_ct_free(&z);
        if (st) return -1;
    }
    const char *bias = a->mask ? full_rows(c, a, x) : NULL, *o3 = wm_opt_name(g, "attn_out");
    if ((a->mask && !bias) || !o3) return -1;
    const char *in[6] = {x, w, b, "", "", bias ? bias : ""}, *out[1] = {o3};
    wm_onnx_node *f = wm_opt_add(g, "Attention", "com.microsoft", "Attention", in, bias ? 6 : 3, out, 1, c->err);
    if (!f || wm_graph_set_attr_int(g, f, "num_heads", a->N, c->err) ||
        wm_graph_set_attr_float(g, f, "scale", (float)a->scale, c->err) || rewire_output(c, a, o3) ||
        wm_opt_need_opset(g, "com.microsoft", 1, c->err))
        return -1;
    c->fired++;
    return 1;
}

static wm_status emit_mha(wm_pass_ctx *c, const attn_match *a) {
    wm_graph *g = c->g;
    if (a->N != a->kvN || a->softcap > 0) return WM_OK; /* MultiHeadAttention and Attention have no soft-cap */
    if (!a->k.past && !a->q.rope) { /* an encoder's self-attention: one packed QKV projection when possible */
        const char *q0 = a->q.x3, *k0 = a->k.x3, *v0 = a->v.x3, *b0 = qkv_bias(c, a, &q0, &k0, &v0);
        if (!b0) return c->err->status ? c->err->status : WM_ERR_NOMEM;
        int r = emit_packed(c, a, q0, k0, v0, b0);
        if (r) return r < 0 ? (c->err->status ? c->err->status : WM_ERR_NOMEM) : WM_OK;
    }
    const char *q = rope_3d(c, &a->q), *k = q ? rope_3d(c, &a->k) : NULL, *v = a->v.x3;
    const char *qkvb = k ? qkv_bias(c, a, &q, &k, &v) : NULL;
    if (!qkvb) return c->err->status ? c->err->status : WM_ERR_NOMEM;
    const char *bias = k && a->mask ? full_rows(c, a, q) : NULL;
    if (!k || (a->mask && !bias)) return c->err->status ? c->err->status : WM_ERR_NOMEM;
    const char *o3 = wm_opt_name(g, "mha_out");
    if (!o3 || free_present(c, &a->k) || free_present(c, &a->v)) return c->err->status ? c->err->status : WM_ERR_NOMEM;
    const char *in[8] = {q, k, v, qkvb, "", bias ? bias : "", a->k.past ? a->k.past : "", a->v.past ? a->v.past : ""};
    const char *out[3] = {o3, a->k.present ? a->k.present : "", a->v.present ? a->v.present : ""};
    size_t n_in = a->k.past ? 8 : (bias ? 6 : *qkvb ? 4 : 3), n_out = a->k.present ? 3 : 1;
    wm_onnx_node *f = wm_opt_add(g, "MultiHeadAttention", "com.microsoft", "MultiHeadAttention", in, n_in, out, n_out, c->err);
    if (!f || wm_graph_set_attr_int(g, f, "num_heads", a->N, c->err) ||
        wm_graph_set_attr_float(g, f, "scale", (float)a->scale, c->err) || rewire_output(c, a, o3) ||
        wm_opt_need_opset(g, "com.microsoft", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

static wm_status each_softmax(wm_pass_ctx *c, wm_status (*emit)(wm_pass_ctx *, const attn_match *)) {
    size_t n;
    wm_onnx_node **v = wm_opt_snapshot(c->g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    attn_match a;
    for (size_t i = 0; i < n && !s; i++)
        if (wm_opt_is(v[i], "Softmax") && match(c, v[i], &a)) s = emit(c, &a);
    free(v);
    return s;
}

wm_status wm_pass_mha(wm_pass_ctx *c) { return each_softmax(c, emit_mha); }

/* ---------------------------------------------------------------- GroupQueryAttention */

/* The 2-D integer attention mask among the graph inputs the additive mask is computed from; NULL if none. */
static const char *mask_input(const wm_pass_ctx *c, const char *mask) {
    wm_onnx_graph *p = wm_graph_proto(c->g);
    for (size_t i = 0; i < p->n_input; i++) {
        const char *nm = p->input[i]->name;
        int32_t dt = wm_shapes_dtype(c->sh, nm);
        if (!nm || wm_shapes_rank(c->sh, nm) != 2 || (dt != WM_DT_INT64 && dt != WM_DT_INT32)) continue;
        if (wm_graph_initializer(c->g, nm)) continue;
        /* used by something other than Shape, and an ancestor of the mask */
        size_t nu;
        const wm_use *u = wm_graph_consumers(c->g, nm, &nu);
        int value_use = 0;
        for (size_t k = 0; k < nu; k++) value_use |= u[k].slot >= 0 && !wm_opt_is(u[k].node, "Shape");
        if (!value_use) continue;
        /* walk back from the mask (bounded) */
        const char *stack[256];
        size_t sp = 0, seen = 0;
        stack[sp++] = mask;
        wm_ptrset vis = {0};
        int found = 0;
        while (sp && !found && seen < 4096) {
            const char *v = stack[--sp];
            seen++;
            if (!strcmp(v, nm)) found = 1;
            wm_onnx_node *pr = wm_graph_producer(c->g, v);
            if (!pr || wm_opt_is(pr, "Shape") || wm_opt_is(pr, "Size") || wm_ptrset_add(&vis, pr) != 1) continue;
            for (size_t k = 0; k < pr->n_input && sp < 256; k++)
                if (wm_opt_in(pr, k)) stack[sp++] = pr->input[k];
        }
        wm_ptrset_free(&vis);
        if (found) return nm;
    }
    return NULL;
}

/*
 * The sliding window of an additive mask made from the attention mask: 0 when its ancestors compare no position
 * against an offset one (causal + padding), W when the one such comparison is keys > query - W
 * (Greater(k, Sub(q, W)) or Less(Sub(q, W), k), W a constant: keys within W positions, the query's own
 * included), -1 for anything else (GroupQueryAttention could not reproduce it).
 */
static int64_t mask_window(const wm_pass_ctx *c, const char *mask) {
    const char *stack[256];
    size_t sp = 0, seen = 0;
    stack[sp++] = mask;
    wm_ptrset vis = {0};
    int64_t w = 0;
    int lost = 0; /* an input not walked (stack full): the answer would be a guess */
    while (sp && seen < 4096 && w >= 0 && !lost) {
        const char *v = stack[--sp];
        seen++;
        wm_onnx_node *pr = wm_graph_producer(c->g, v);
        if (!pr || wm_opt_is(pr, "Shape") || wm_opt_is(pr, "Size") || wm_ptrset_add(&vis, pr) != 1) continue;
        int gt = wm_opt_is(pr, "Greater") || wm_opt_is(pr, "GreaterOrEqual");
        if ((gt || wm_opt_is(pr, "Less") || wm_opt_is(pr, "LessOrEqual")) && pr->n_input == 2) {
            for (int k = 0; k < 2; k++) {
                wm_onnx_node *off = wm_graph_producer(c->g, wm_opt_in(pr, (size_t)k) ? pr->input[k] : "");
                double d;
                int sub = wm_opt_is(off, "Sub"), add = wm_opt_is(off, "Add");
                if (!(sub || add) || off->n_input != 2) continue;
                int konst = wm_opt_const_scalar(c->g, off->input[1], &d) || (add && wm_opt_const_scalar(c->g, off->input[0], &d));
                if (!konst) continue;
                /* an offset position: only keys > query - W (strict, W a positive integer) is a window */
                int64_t cand = (int64_t)(sub ? d : -d);
                int strict_window = (gt ? k == 1 : k == 0) && !wm_opt_is(pr, "GreaterOrEqual") &&
                                    !wm_opt_is(pr, "LessOrEqual") && (double)cand == (sub ? d : -d) && cand > 0;
                w = !strict_window || (w > 0 && w != cand) ? -1 : cand;
            }
        }
        for (size_t k = 0; k < pr->n_input && !lost; k++)
            if (wm_opt_in(pr, k)) {
                if (sp == 256) lost = 1;
                else stack[sp++] = pr->input[k];
            }
    }
    if (sp || lost) w = -1; /* not walked to the end: unknown */
    wm_ptrset_free(&vis);
    return w;
}

typedef struct gqa_state {
    const char *mask_in, *seqlens, *total;
} gqa_state;

/* seqlens_k = ReduceSum(mask, 1) - 1 and total = Shape(mask)[1], both int32, made once. */
static int gqa_lengths(wm_pass_ctx *c, const char *mask_in) {
    gqa_state *g_state = c->state;
    if (g_state->mask_in) return !strcmp(g_state->mask_in, mask_in);
    wm_graph *g = c->g;
    int64_t one = 1, axis = 1;
    const char *ax = wm_opt_const_i64(g, "gqa_axis", &axis, 1, 0, c->err);
    const char *o = wm_opt_const_i64(g, "gqa_one", &one, 1, 1, c->err);
    if (!ax || !o) return 0;
    const char *rin[2] = {mask_in, ax}, *sum;
    wm_onnx_node *rs = wm_opt_emit_node(g, "ReduceSum", NULL, rin, 2, &sum, c->err);
    if (!rs || wm_graph_set_attr_int(g, rs, "keepdims", 0, c->err)) return 0;
    int32_t dt = wm_shapes_dtype(c->sh, mask_in);
    const char *one_t = o;
    if (dt == WM_DT_INT32) {
        int32_t one32 = 1;
        if (!(one_t = wm_opt_const_raw(g, "gqa_one", WM_DT_INT32, NULL, 0, &one32, 4, c->err))) return 0;
    }
    const char *sin[2] = {sum, one_t};
    const char *m1 = wm_opt_emit(g, "Sub", NULL, sin, 2, c->err);
    const char *cin[1] = {m1}, *sl;
    wm_onnx_node *cs = m1 ? wm_opt_emit_node(g, "Cast", NULL, cin, 1, &sl, c->err) : NULL;
    if (!cs || wm_graph_set_attr_int(g, cs, "to", WM_DT_INT32, c->err)) return 0;
    const char *shin[1] = {mask_in};
    const char *shp = wm_opt_emit(g, "Shape", NULL, shin, 1, c->err);
    const char *gin[2] = {shp, o}; /* scalar index 1 -> scalar */
    const char *t64 = shp ? wm_opt_emit(g, "Gather", NULL, gin, 2, c->err) : NULL;
    const char *tin[1] = {t64}, *t32;
    wm_onnx_node *ct = t64 ? wm_opt_emit_node(g, "Cast", NULL, tin, 1, &t32, c->err) : NULL;
    if (!ct || wm_graph_set_attr_int(g, ct, "to", WM_DT_INT32, c->err)) return 0;
    g_state->mask_in = mask_in;
    g_state->seqlens = sl;
    g_state->total = t32;
    return 1;
}

static wm_status emit_gqa(wm_pass_ctx *c, const attn_match *a) {
    wm_graph *g = c->g;
    if (!a->k.past || !a->k.present || !a->v.present || !a->mask || a->H % 8 || wm_shapes_rank(c->sh, a->mask) != 4)
        return WM_OK;
    const char *mi = mask_input(c, a->mask);
    int64_t window = mi ? mask_window(c, a->mask) : -1;
    if (!mi || window < 0) return WM_OK;
    if (!gqa_lengths(c, mi)) return c->err->status;
    const gqa_state *g_state = c->state;
    const char *q = rope_3d(c, &a->q), *k = q ? rope_3d(c, &a->k) : NULL;
    const char *o3 = k ? wm_opt_name(g, "gqa_out") : NULL;
    if (!o3 || free_present(c, &a->k) || free_present(c, &a->v)) return c->err->status ? c->err->status : WM_ERR_NOMEM;
    const char *in[7] = {q, k, a->v.x3, a->k.past, a->v.past, g_state->seqlens, g_state->total};
    const char *out[3] = {o3, a->k.present, a->v.present};
    wm_onnx_node *f = wm_opt_add(g, "GroupQueryAttention", "com.microsoft", "GroupQueryAttention", in, 7, out, 3, c->err);
    if (!f || wm_graph_set_attr_int(g, f, "num_heads", a->N, c->err) ||
        wm_graph_set_attr_int(g, f, "kv_num_heads", a->kvN, c->err) ||
        wm_graph_set_attr_float(g, f, "scale", (float)a->scale, c->err) ||
        (window > 0 && wm_graph_set_attr_int(g, f, "local_window_size", window, c->err)) ||
        (a->softcap > 0 && wm_graph_set_attr_float(g, f, "softcap", (float)a->softcap, c->err)) ||
        rewire_output(c, a, o3) ||
        wm_opt_need_opset(g, "com.microsoft", 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_gqa(wm_pass_ctx *c) {
    gqa_state st = {0};
    c->state = &st;
    wm_status s = each_softmax(c, emit_gqa);
    c->state = NULL;
    return s;
}
