/*
 * fuse_rope.c - rotate-half rotary embeddings -> RotaryEmbedding (com.microsoft).
 *
 * Matches  y = x * cos + concat(-x[..., h:], x[..., :h]) * sin  on a 4-D
 * x [B, N, S, H] with h = H/2 and cos/sin broadcast over heads ([B|1, 1, S, H]
 * or [B|1, S, H]). Whatever computed cos and sin (any RoPE scaling, with
 * its attention factor) is kept: the caches given to RotaryEmbedding are the
 * first halves of the graph's own cos/sin rows, flattened to [rows, H/2],
 * and position_ids index those rows - the scalar offset 0 when cos has one
 * batch row, else b*S + s built once from cos's shape. The result equals
 * the decomposition exactly (the halves of cat(freqs, freqs) are equal; the
 * pass checks cos and sin come from Cos/Sin of such a Concat).
 * Partial rotary (phi, gpt_neox, stablelm: the first rot of d dims rotated)
 * is  concat(rope(x[..., :rot]), x[..., rot:]) ; when the rotated slice's
 * only use is such a Concat, the whole becomes one RotaryEmbedding of x with
 * rotary_embedding_dim = rot (num_heads = x's axis 1, as onnxruntime asks),
 * which copies the dims past rot, so attention fusion still sees the heads.
 */
#include <stdio.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"

/* Slice(x, [start], [end], [axis]) on the last axis with step 1: 1 and the bounds; else 0. */
static int last_axis_slice(const wm_pass_ctx *c, const wm_onnx_node *s, int rank, int64_t *st, int64_t *en) {
    if (!wm_opt_is(s, "Slice") || s->n_input < 3) return 0;
    wm_ct a, b, ax, sp;
    int ok = wm_opt_const(c->g, s->input[1], 1, &a) && wm_opt_const(c->g, s->input[2], 1, &b);
    if (ok) {
        *st = wm_ct_geti(&a, 0);
        *en = wm_ct_geti(&b, 0);
    }
    wm_ct_free(&a);
    wm_ct_free(&b);
    if (!ok) return 0;
    if (wm_opt_in(s, 3)) {
        if (!wm_opt_const(c->g, s->input[3], 1, &ax)) return 0;
        int64_t v = wm_ct_geti(&ax, 0);
        wm_ct_free(&ax);
        if (v != -1 && v != rank - 1) return 0;
    } else if (rank != 1) return 0;
    if (wm_opt_in(s, 4)) {
        if (!wm_opt_const(c->g, s->input[4], 1, &sp)) return 0;
        int64_t v = wm_ct_geti(&sp, 0);
        wm_ct_free(&sp);
        if (v != 1) return 0;
    }
    return 1;
}

/* Concat(Neg(x[..., h:]), x[..., :h]) on the last axis: 1 when name is the rotate-half of x. */
static int is_rotate_half(const wm_pass_ctx *c, const char *name, const char *x, int64_t H) {
    wm_onnx_node *cat = wm_m_prod(c->g, name, "Concat");
    if (!cat || cat->n_input != 2) return 0;
    int64_t ax = wm_opt_attr_i(cat, "axis", 0);
    if (ax != -1 && ax != 3) return 0;
    wm_onnx_node *neg = wm_m_prod(c->g, cat->input[0], "Neg");
    wm_onnx_node *hi = neg ? wm_m_prod(c->g, wm_opt_in(neg, 0), "Slice") : NULL;
    wm_onnx_node *lo = wm_m_prod(c->g, cat->input[1], "Slice");
    int64_t s1, e1, s2, e2;
    if (!hi || !lo || strcmp(hi->input[0], x) || strcmp(lo->input[0], x)) return 0;
    if (!last_axis_slice(c, hi, 4, &s1, &e1) || !last_axis_slice(c, lo, 4, &s2, &e2)) return 0;
    return s1 == H / 2 && e1 >= H && s2 == 0 && e2 == H / 2;
}

/*
 * angles = positions[..., 1] * freqs[H] with freqs a constant whose halves
 * are equal (inv_freq stored already duplicated, as winml's export does):
 * then every row of the angles has equal halves too.
 */
static int dup_freqs(const wm_pass_ctx *c, const char *angles) {
    wm_onnx_node *m = angles ? wm_m_prod(c->g, angles, "Mul") : NULL;
    for (int k = 0; m && m->n_input == 2 && k < 2; k++) {
        const char *f = m->input[k], *x = m->input[1 - k];
        wm_ct t;
        if (!wm_opt_const(c->g, f, 1u << 16, &t)) continue;
        int ok = t.rank >= 1 && t.dims[t.rank - 1] % 2 == 0 && wm_shapes_dim(c->sh, x, -1) == 1;
        for (int d = 0; d < t.rank - 1; d++) ok = ok && t.dims[d] == 1;
        int64_t h = ok ? t.dims[t.rank - 1] / 2 : 0;
        for (int64_t i = 0; ok && i < h; i++) ok = wm_ct_getf(&t, (uint64_t)i) == wm_ct_getf(&t, (uint64_t)(i + h));
        wm_ct_free(&t);
        if (ok) return 1;
    }
    return 0;
}

/*
 * cos (or sin) as used by the product: the value itself [B|1, 1, S, H] or
 * [B|1, S, H]; checks it is Cos/Sin of Concat(f, f) (possibly scaled and
 * unsqueezed) so both halves are equal. Returns 1 when usable.
 */
static int halves_equal(const wm_pass_ctx *c, const char *name, const char *trig) {
    const char *v = name;
    for (int depth = 0; depth < 6; depth++) {
        wm_onnx_node *p = v ? wm_graph_producer(c->g, v) : NULL;
        if (!p) return 0;
        if (wm_opt_is(p, trig)) {
            wm_onnx_node *cat = wm_m_prod(c->g, wm_opt_in(p, 0), "Concat");
            if (cat)
                return cat->n_input == 2 && !strcmp(cat->input[0], cat->input[1]) &&
                       (wm_opt_attr_i(cat, "axis", 0) == -1 ||
                        wm_opt_attr_i(cat, "axis", 0) == wm_shapes_rank(c->sh, cat->input[0]) - 1);
            return dup_freqs(c, wm_opt_in(p, 0));
        }
        if (wm_opt_is(p, "Unsqueeze") || wm_opt_is(p, "Cast") || wm_opt_is(p, "Identity")) v = wm_opt_in(p, 0);
        else if (wm_opt_is(p, "Mul")) { /* attention scaling by a scalar */
            double s;
            if (wm_opt_const_scalar(c->g, wm_opt_in(p, 1), &s)) v = wm_opt_in(p, 0);
            else if (wm_opt_const_scalar(c->g, wm_opt_in(p, 0), &s)) v = wm_opt_in(p, 1);
            else return 0;
        } else return 0;
    }
    return 0;
}

/* Caches and position ids made for one cos/sin pair, reused by every site using them. */
typedef struct rope_inputs {
    const char *cos, *sin; /* the graph's tensors */
    const char *cos_cache, *sin_cache, *pos;
} rope_inputs;

typedef struct rope_state {
    rope_inputs v[32];
    size_t n;
} rope_state;

static const char *cache_of(wm_pass_ctx *c, const char *trig, int64_t H) {
    wm_graph *g = c->g;
    int64_t st = 0, en = H / 2, ax = -1, shp[2] = {-1, H / 2};
    const char *s0 = wm_opt_const_i64(g, "rope_start", &st, 1, 0, c->err);
    const char *s1 = wm_opt_const_i64(g, "rope_half", &en, 1, 0, c->err);
    const char *s2 = wm_opt_const_i64(g, "rope_axis", &ax, 1, 0, c->err);
    const char *s3 = wm_opt_const_i64(g, "rope_cache_shape", shp, 2, 0, c->err);
    if (!s0 || !s1 || !s2 || !s3) return NULL;
    const char *sl_in[4] = {trig, s0, s1, s2};
    const char *half = wm_opt_emit(g, "Slice", NULL, sl_in, 4, c->err);
    const char *rs_in[2] = {half, s3};
    return half ? wm_opt_emit(g, "Reshape", NULL, rs_in, 2, c->err) : NULL;
}

/* position_ids: [0] when cos has a single batch row, else Range(0, Bc*S) reshaped [Bc, S]. */
static const char *positions_of(wm_pass_ctx *c, const char *cos) {
    wm_graph *g = c->g;
    int rank = wm_shapes_rank(c->sh, cos);
    if (wm_shapes_dim(c->sh, cos, 0) == 1) {
        int64_t zero = 0;
        return wm_opt_const_i64(g, "rope_offset", &zero, 1, 0, c->err);
    }
    int64_t i0 = 0, is = rank - 2, zero = 0, one = 1;
    const char *k0 = wm_opt_const_i64(g, "rope_dim", &i0, 1, 0, c->err);
    const char *ks = wm_opt_const_i64(g, "rope_dim", &is, 1, 0, c->err);
    const char *z = wm_opt_const_i64(g, "rope_zero", &zero, 1, 1, c->err);
    const char *o = wm_opt_const_i64(g, "rope_one", &one, 1, 1, c->err);
    if (!k0 || !ks || !z || !o) return NULL;
    const char *in1[1] = {cos};
    const char *shp = wm_opt_emit(g, "Shape", NULL, in1, 1, c->err);
    if (!shp) return NULL;
    const char *g0[2] = {shp, k0}, *gs[2] = {shp, ks};
    const char *b = wm_opt_emit(g, "Gather", NULL, g0, 2, c->err), *s = wm_opt_emit(g, "Gather", NULL, gs, 2, c->err);
    if (!b || !s) return NULL;
    const char *bs_in[2] = {b, s}, *dims_in[2] = {b, s};
    const char *bs = wm_opt_emit(g, "Mul", NULL, bs_in, 2, c->err);
    const char *dims = wm_opt_emit(g, "Concat", NULL, dims_in, 2, c->err);
    wm_onnx_node *cat = dims ? wm_graph_producer(g, dims) : NULL;
    if (!bs || !cat || wm_graph_set_attr_int(g, cat, "axis", 0, c->err)) return NULL;
    const char *sq_in[1] = {bs};
    const char *n = wm_opt_emit(g, "Squeeze", NULL, sq_in, 1, c->err); /* [1] -> scalar for Range */
    const char *r_in[3] = {z, n, o};
    const char *rng = n ? wm_opt_emit(g, "Range", NULL, r_in, 3, c->err) : NULL;
    const char *rs_in[2] = {rng, dims};
    return rng ? wm_opt_emit(g, "Reshape", NULL, rs_in, 2, c->err) : NULL;
}

static rope_inputs *inputs_for(wm_pass_ctx *c, rope_state *st, const char *cos, const char *sin, int64_t H) {
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->v[i].cos, cos) && !strcmp(st->v[i].sin, sin)) return &st->v[i];
    if (st->n == sizeof st->v / sizeof st->v[0]) return NULL;
    rope_inputs *r = &st->v[st->n];
    r->cos = cos;
    r->sin = sin;
    if (!(r->cos_cache = cache_of(c, cos, H)) || !(r->sin_cache = cache_of(c, sin, H)) || !(r->pos = positions_of(c, cos)))
        return NULL;
    st->n++;
    return r;
}

/* cos/sin usable with a 4-D x: rank 4 [B|1, 1, S, H] or rank 3 [B|1, S, H]. */
static int broadcast_ok(const wm_pass_ctx *c, const char *t, int64_t H) {
    int r = wm_shapes_rank(c->sh, t);
    if (wm_shapes_dim(c->sh, t, -1) != H) return 0;
    return r == 3 || (r == 4 && wm_shapes_dim(c->sh, t, 1) == 1);
}

/*
 * Partial rotary around the rotated slice x = Slice(xf, 0, H): the Concat(out, Slice(xf, H, >= D)) on the last
 * axis that is out's only use, with xf [B, N, S, D], D > H. Returns that Concat (and xf), else NULL.
 */
static wm_onnx_node *partial_concat(const wm_pass_ctx *c, const char *x, const char *out, int64_t H, const char **xf) {
    wm_onnx_node *lo = wm_m_prod(c->g, x, "Slice"), *cat = wm_m_sole(c->g, out, "Concat");
    int64_t s0, e0, s1, e1;
    if (!lo || !cat || cat->n_input != 2 || strcmp(cat->input[0], out)) return NULL;
    int64_t ax = wm_opt_attr_i(cat, "axis", 0);
    const char *full = wm_opt_in(lo, 0);
    wm_onnx_node *hi = wm_m_prod(c->g, cat->input[1], "Slice");
    if ((ax != -1 && ax != 3) || !full || !hi || strcmp(wm_opt_in(hi, 0), full)) return NULL;
    int64_t D = wm_shapes_dim(c->sh, full, -1);
    if (wm_shapes_rank(c->sh, full) != 4 || D <= H || wm_shapes_dim(c->sh, full, 1) <= 0) return NULL;
    if (!last_axis_slice(c, lo, 4, &s0, &e0) || !last_axis_slice(c, hi, 4, &s1, &e1)) return NULL;
    if (s0 != 0 || e0 != H || s1 != H || e1 < D) return NULL;
    *xf = full;
    return cat;
}

static wm_status rotary_one(wm_pass_ctx *c, rope_state *st, wm_onnx_node *add) {
    wm_graph *g = c->g;
    if (add->n_input != 2) return WM_OK;
    for (int k = 0; k < 2; k++) {
        wm_onnx_node *m1 = wm_m_prod(g, add->input[k], "Mul"), *m2 = wm_m_prod(g, add->input[1 - k], "Mul");
        if (!m1 || !m2 || m1->n_input != 2 || m2->n_input != 2) continue;
        for (int a = 0; a < 2; a++) {
            const char *x = m1->input[a], *cosv = m1->input[1 - a];
            if (wm_shapes_rank(c->sh, x) != 4) continue;
            int64_t H = wm_shapes_dim(c->sh, x, -1);
            if (H <= 0 || H % 2) continue;
            for (int b = 0; b < 2; b++) {
                const char *rot = m2->input[b], *sinv = m2->input[1 - b];
                if (!is_rotate_half(c, rot, x, H)) continue;
                if (!broadcast_ok(c, cosv, H) || !broadcast_ok(c, sinv, H)) continue;
                if (!halves_equal(c, cosv, "Cos") || !halves_equal(c, sinv, "Sin")) continue;
                rope_inputs *ri = inputs_for(c, st, cosv, sinv, H);
                if (!ri) return c->err->status ? c->err->status : WM_OK;
                const char *xf = NULL;
                wm_onnx_node *cat = partial_concat(c, x, add->output[0], H, &xf), *site = cat ? cat : add;
                const char *in[4] = {cat ? xf : x, ri->pos, ri->cos_cache, ri->sin_cache}, *out[1] = {site->output[0]};
                wm_onnx_node *f = wm_opt_replace(g, site, "RotaryEmbedding", "com.microsoft", in, 4, out, 1, c->err);
                if (!f || wm_graph_set_attr_int(g, f, "interleaved", 0, c->err) ||
                    (cat && (wm_graph_set_attr_int(g, f, "rotary_embedding_dim", H, c->err) ||
                             wm_graph_set_attr_int(g, f, "num_heads", wm_shapes_dim(c->sh, xf, 1), c->err))) ||
                    wm_opt_need_opset(g, "com.microsoft", 1, c->err))
                    return c->err->status ? c->err->status : WM_ERR_NOMEM;
                c->fired++;
                return WM_OK;
            }
        }
    }
    return WM_OK;
}

wm_status wm_pass_rotary(wm_pass_ctx *c) {
    wm_onnx_graph *p = wm_graph_proto(c->g);
    size_t n = p->n_node;
    wm_onnx_node **v = malloc((n ? n : 1) * sizeof *v);
    rope_state *st = calloc(1, sizeof *st);
    if (!v || !st) {
        free(v);
        free(st);
        return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    }
    if (n) memcpy(v, p->node, n * sizeof *v);
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++)
        if (wm_opt_is(v[i], "Add")) s = rotary_one(c, st, v[i]);
    free(st);
    free(v);
    return s;
}
