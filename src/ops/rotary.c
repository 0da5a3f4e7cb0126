/*
 * rotary.c - rotary position embeddings: ONNX RotaryEmbedding (23) and
 * com.microsoft RotaryEmbedding (onnxruntime contrib).
 *
 * Both rotate the first rot dims of every head vector by the angle of the
 * token's position: halves (x[i], x[i + rot/2]) or interleaved pairs
 * (x[2i], x[2i+1]) become (c x1 - s x2, s x1 + c x2) with c, s from row
 * `pos` of cos_cache / sin_cache; dims past rot are copied.
 *   ONNX:  X (B, H, S, d) or (B, S, H*d) with num_heads; cos/sin (P, rot/2)
 *          indexed by position_ids (B, S), or (B, S, rot/2) without them.
 *   contrib: input (B, S, hidden) or (B, N, S, H); position_ids (B, S), or
 *          (1) = the position of token 0 (token s at p + s); cos/sin (P, rot/2);
 *          num_heads 0 = heads of rot dims.
 * Float types compute in float32 rows; threads take whole tokens.
 */
#include <string.h>

#include "ops/rope.h"
#include "ops/rows.h"

void wm_rope_rotate(float *x, int64_t rot, const float *c, const float *s, int interleaved) {
    int64_t half = rot / 2;
    if (interleaved) {
        for (int64_t i = 0; i < half; i++) {
            float x1 = x[2 * i], x2 = x[2 * i + 1];
            x[2 * i] = c[i] * x1 - s[i] * x2;
            x[2 * i + 1] = s[i] * x1 + c[i] * x2;
        }
    } else {
        for (int64_t i = 0; i < half; i++) {
            float x1 = x[i], x2 = x[i + half];
            x[i] = c[i] * x1 - s[i] * x2;
            x[i + half] = s[i] * x1 + c[i] * x2;
        }
    }
}

typedef struct rshape {
    int rank4;
    int64_t B, H, S, d, rot;
    int contrib;
} rshape;

static int is_contrib(const wm_node *n) { return n->proto->domain && !strcmp(n->proto->domain, "com.microsoft"); }

/* input indices of cos, sin, position_ids */
static void rope_io(const wm_node *n, int *ci, int *si, int *pi) {
    if (is_contrib(n)) *pi = 1, *ci = 2, *si = 3;
    else *ci = 1, *si = 2, *pi = 3;
}

static wm_status rope_init(wm_node *n, wm_error *err) {
    int ci, si, pi;
    rope_io(n, &ci, &si, &pi);
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_same_type(n, 0, ci, err);
    if (!st) st = wm_check_same_type(n, 0, si, err);
    if (st) return st;
    if (wm_has_in(n, pi) && n->in_dtype[pi] != WM_DT_INT64)
        return wm_node_err(n, err, WM_ERR_INPUT, "position_ids must be int64, not %s", wm_dtype_name(n->in_dtype[pi]));
    if (is_contrib(n) && !wm_has_in(n, pi)) return wm_node_err(n, err, WM_ERR_INPUT, "position_ids is required");
    if (is_contrib(n) && wm_attr_int(n, "is_packed_batching", 0))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "is_packed_batching=1 (ragged batches) is not supported");
    n->out_dtype[0] = n->in_dtype[0];
    return WM_OK;
}

static wm_status rope_shape(const wm_node *n, wm_tensor *const *in, rshape *r, wm_error *err) {
    memset(r, 0, sizeof *r);
    int ci, si, pi;
    rope_io(n, &ci, &si, &pi);
    const wm_tensor *x = in[0], *c = in[ci], *s = in[si], *p = wm_has_in(n, pi) ? in[pi] : NULL;
    r->contrib = is_contrib(n);
    int64_t nh = wm_attr_int(n, "num_heads", 0), rd = wm_attr_int(n, "rotary_embedding_dim", 0);
    if (x->rank != 3 && x->rank != 4) return wm_node_err(n, err, WM_ERR_INPUT, "input must be 3-D or 4-D");
    if (c->rank < 2 || c->rank != s->rank) return wm_node_err(n, err, WM_ERR_INPUT, "cos_cache/sin_cache ranks");
    for (int d = 0; d < c->rank; d++)
        if (c->dims[d] != s->dims[d]) return wm_node_err(n, err, WM_ERR_INPUT, "cos_cache and sin_cache shapes differ");
    int64_t half = c->dims[c->rank - 1];
    r->B = x->dims[0];
    if (x->rank == 4) {
        r->rank4 = 1, r->H = x->dims[1], r->S = x->dims[2], r->d = x->dims[3];
    } else {
        r->S = x->dims[1];
        if (nh <= 0 && r->contrib) nh = half > 0 && rd == 0 ? x->dims[2] / (2 * half) : 0;
        if (nh <= 0 || x->dims[2] % nh) return wm_node_err(n, err, WM_ERR_INPUT, "3-D input needs num_heads dividing the hidden size");
        r->H = nh, r->d = x->dims[2] / nh;
    }
    r->rot = rd > 0 ? rd : (r->contrib && !rd ? 2 * half : r->d);
    if (r->rot > r->d || r->rot % 2) return wm_node_err(n, err, WM_ERR_INPUT, "rotary dim %lld does not fit head size %lld", (long long)r->rot, (long long)r->d);
    if (half != r->rot / 2)
        return wm_node_err(n, err, WM_ERR_INPUT, "cos_cache last dim %lld is not rotary dim / 2 (%lld)", (long long)half, (long long)(r->rot / 2));
    if (p) {
        if (c->rank != 2) return wm_node_err(n, err, WM_ERR_INPUT, "with position_ids cos_cache must be 2-D");
        int ok = (p->rank == 2 && p->dims[0] == r->B && p->dims[1] == r->S) ||
                 (r->contrib && p->rank <= 1 && wm_tensor_numel(p) == 1);
        if (!ok) return wm_node_err(n, err, WM_ERR_INPUT, "position_ids must be (batch, sequence)%s", r->contrib ? " or (1)" : "");
    } else if (c->rank != 3 || c->dims[0] != r->B || c->dims[1] != r->S) {
        return wm_node_err(n, err, WM_ERR_INPUT, "without position_ids cos_cache must be (batch, sequence, rot/2)");
    }
    return WM_OK;
}

static wm_status rope_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    rshape r;
    wm_status st = rope_shape(n, in, &r, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

typedef struct rctx {
    const wm_node *n;
    rshape r;
    const wm_tensor *x, *c, *s, *p;
    wm_tensor *y;
    float *ws; /* per thread: d + rot floats */
    int interleaved;
} rctx;

/* position of token t = b * S + s (checked before the run) */
static int64_t rope_pos(const rctx *c, int64_t t) {
    const int64_t *p = c->p->data;
    return wm_tensor_numel(c->p) == 1 && c->r.contrib ? p[0] + t % c->r.S : p[t];
}

static void rope_part(void *arg, int ith, int nth) {
    rctx *c = arg;
    const rshape *r = &c->r;
    long lo, hi;
    wm_split((long)(r->B * r->S), ith, nth, &lo, &hi);
    float *row = c->ws + (size_t)ith * (size_t)(r->d + r->rot), *cs = row + r->d, *sn = cs + r->rot / 2;
    int64_t half = r->rot / 2;
    for (long t = lo; t < hi; t++) {
        int64_t b = t / r->S, s = t % r->S, crow;
        crow = c->p ? rope_pos(c, t) : t;
        wm_row_load(c->c->dtype, c->c->data, (uint64_t)(crow * half), cs, half);
        wm_row_load(c->s->dtype, c->s->data, (uint64_t)(crow * half), sn, half);
        for (int64_t h = 0; h < r->H; h++) {
            uint64_t off = (uint64_t)(r->rank4 ? ((b * r->H + h) * r->S + s) * r->d : ((b * r->S + s) * r->H + h) * r->d);
            wm_row_load(c->x->dtype, c->x->data, off, row, r->d);
            wm_rope_rotate(row, r->rot, cs, sn, c->interleaved);
            wm_row_store(c->y->dtype, c->y->data, off, row, r->d);
        }
    }
}

static size_t rope_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    rshape r;
    wm_error e = {0};
    if (rope_shape(n, in, &r, &e)) return 0;
    return (size_t)nth * (size_t)(r.d + r.rot) * sizeof(float);
}

static wm_status rope_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int ci, si, pi;
    rope_io(n, &ci, &si, &pi);
    rctx c = {.n = n, .x = in[0], .c = in[ci], .s = in[si], .p = wm_has_in(n, pi) ? in[pi] : NULL, .y = out[0],
              .ws = x->ws, .interleaved = wm_attr_int(n, "interleaved", 0) != 0};
    wm_status st = rope_shape(n, in, &c.r, x->err);
    if (st) return st;
    int64_t tokens = c.r.B * c.r.S;
    for (int64_t t = 0; c.p && t < tokens; t++) {
        int64_t pos = rope_pos(&c, t);
        if (pos < 0 || pos >= c.c->dims[0])
            return wm_node_err(n, x->err, WM_ERR_INPUT, "position %lld of token %lld is outside the cos/sin cache (%lld rows)",
                               (long long)pos, (long long)t, (long long)c.c->dims[0]);
    }
    if (!tokens || !c.r.H || !c.r.d) return WM_OK;
    int nth = tokens * c.r.H * c.r.d >= 16384 ? x->nth : 1;
    if (nth > tokens) nth = (int)tokens;
    wm_pool_run(x->pool, rope_part, &c, nth);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "RotaryEmbedding", 23, 0, rope_init, rope_infer, rope_run, rope_workspace, WM_OP_INPLACE, 0},
    {"com.microsoft", "RotaryEmbedding", 1, 0, rope_init, rope_infer, rope_run, rope_workspace, WM_OP_INPLACE, 0},
};

const wm_op_table wm_ops_rotary = {ops, sizeof ops / sizeof ops[0]};
