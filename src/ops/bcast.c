#include "ops/bcast.h"

#include <string.h>

wm_status wm_bcast_shape(const wm_node *n, wm_tensor *const *in, int n_in, wm_tensor *out, wm_error *err) {
    int rank = 0;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->rank > rank) rank = in[i]->rank;
    int64_t dims[WM_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = 1;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) continue;
        int off = rank - in[i]->rank;
        for (int d = 0; d < in[i]->rank; d++) {
            int64_t a = dims[off + d], b = in[i]->dims[d];
            if (a == b || b == 1) continue;
            if (a == 1) dims[off + d] = b;
            else
                return wm_node_err(n, err, WM_ERR_INPUT, "input shapes do not broadcast (dim %d: %lld vs %lld)",
                                   off + d, (long long)a, (long long)b);
        }
    }
    wm_set_shape(out, rank, dims);
    return WM_OK;
}

void wm_bcast_init(wm_bcast *b, wm_tensor *const *in, int n_in, const wm_tensor *out) {
    memset(b, 0, sizeof *b);
    b->n_in = n_in;
    b->out_rank = out->rank;
    memcpy(b->out_dims, out->dims, sizeof b->out_dims);
    b->osize = wm_dtype_size(out->dtype);
    int rank = out->rank;
    int64_t st[3][WM_MAX_RANK];
    for (int i = 0; i < n_in; i++) {
        b->esize[i] = wm_dtype_size(in[i]->dtype);
        int off = rank - in[i]->rank;
        int64_t s = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t dim = d >= off ? in[i]->dims[d - off] : 1;
            st[i][d] = dim == 1 ? 0 : s;
            s *= dim;
        }
    }
    /* merge dim d into the previous one when every input is contiguous across them or broadcast across both */
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (out->dims[d] == 1) continue;
        if (r > 0) {
            int ok = 1;
            for (int i = 0; i < n_in && ok; i++) {
                int64_t prev = b->strides[i][r - 1], cur = st[i][d];
                ok = (prev == 0 && cur == 0) || (prev != 0 && cur != 0 && prev == cur * out->dims[d]);
            }
            if (ok) {
                b->dims[r - 1] *= out->dims[d];
                for (int i = 0; i < n_in; i++) b->strides[i][r - 1] = st[i][d];
                continue;
            }
        }
        b->dims[r] = out->dims[d];
        for (int i = 0; i < n_in; i++) b->strides[i][r] = st[i][d];
        r++;
    }
    if (r == 0) { /* a scalar, or all dims 1 */
        b->dims[0] = 1;
        for (int i = 0; i < n_in; i++) b->strides[i][0] = 0;
        r = 1;
    }
    b->rank = r;
    for (int i = 0; i < n_in; i++)
        if (b->strides[i][r - 1] > 1) b->strides[i][r - 1] = 1; /* innermost: 0 or 1 */
}

typedef struct bctx {
    const wm_bcast *b;
    wm_tensor *const *in;
    wm_tensor *out;
    wm_bcast_fn fn;
    void *ctx;
    int64_t n_outer;
} bctx;

static void bcast_part(void *arg, int ith, int nth) {
    const bctx *c = arg;
    const wm_bcast *b = c->b;
    int r = b->rank;
    int64_t inner = b->dims[r - 1];
    long lo, hi;
    /* a single run (everything merged): split it; else split the outer runs */
    if (c->n_outer == 1) {
        wm_split((long)inner, ith, nth, &lo, &hi);
        if (lo >= hi) return;
        const void *ip[3];
        int64_t step[3];
        for (int i = 0; i < b->n_in; i++) {
            step[i] = b->strides[i][r - 1];
            ip[i] = (const uint8_t *)c->in[i]->data + (size_t)(lo * step[i]) * b->esize[i];
        }
        c->fn(c->ctx, (uint8_t *)c->out->data + (size_t)lo * b->osize, ip, step, hi - lo);
        return;
    }
    wm_split((long)c->n_outer, ith, nth, &lo, &hi);
    for (long o = lo; o < hi; o++) {
        int64_t rem = o, off[3] = {0, 0, 0};
        for (int d = r - 2; d >= 0; d--) {
            int64_t idx = rem % b->dims[d];
            rem /= b->dims[d];
            for (int i = 0; i < b->n_in; i++) off[i] += idx * b->strides[i][d];
        }
        const void *ip[3];
        int64_t step[3];
        for (int i = 0; i < b->n_in; i++) {
            step[i] = b->strides[i][r - 1];
            ip[i] = (const uint8_t *)c->in[i]->data + (size_t)off[i] * b->esize[i];
        }
        c->fn(c->ctx, (uint8_t *)c->out->data + (size_t)(o * inner) * b->osize, ip, step, inner);
    }
}

void wm_bcast_run(const wm_bcast *b, wm_tensor *const *in, wm_tensor *out, wm_bcast_fn fn, void *ctx, wm_exec *x) {
    uint64_t total = wm_tensor_numel(out);
    if (!total) return;
    bctx c = {b, in, out, fn, ctx, 1};
    for (int d = 0; d < b->rank - 1; d++) c.n_outer *= b->dims[d];
    int nth = total >= 32768 ? x->nth : 1;
    if (c.n_outer > 1 && c.n_outer < nth) nth = (int)c.n_outer;
    wm_pool_run(x->pool, bcast_part, &c, nth);
}
