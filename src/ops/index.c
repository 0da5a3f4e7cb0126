/*
 * index.c - ops that select elements by value or position: TopK (1..),
 * NonZero (9..), Unique (11), Compress (9..), OneHot (9..),
 * ReverseSequence (10).
 *
 * Ordering (TopK, Unique) compares values in their own class (double for
 * float types with NaN greater than everything and equal to itself, int64,
 * uint64), ties broken by position, so results do not depend on the sort
 * algorithm or the thread count. NonZero, Unique, Compress and a TopK with
 * a computed k have data-dependent output shapes: the plan runs eagerly
 * for them unless the data is known ahead.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/scalar.h"
#include "ops/sort.h"
#include "runtime/budget.h"

/* Row-major strides (wrapping: only used to address a tensor with elements, whose size the plan bounds). */
static void strides_of(const wm_tensor *t, int64_t *st) {
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        st[d] = s;
        s = wm_i64_mul(s, t->dims[d]);
    }
}

/* ---------------------------------------------------------------- keys: ordered values */

/* Element i of t as an 8-byte key of its class (see keys_cmp). */
static uint64_t key_of(const wm_tensor *t, int cls, uint64_t i) {
    union { double d; int64_t s; uint64_t u; } k;
    if (cls == WM_CLS_FLOAT) k.d = wm_tensor_get_f64(t, i);
    else if (cls == WM_CLS_UINT64) k.u = ((const uint64_t *)t->data)[i];
    else k.s = wm_tensor_get_int(t, i);
    return k.u;
}

/* -1, 0, 1 for a < b, a == b, a > b in class cls; NaN is above +inf and equal to NaN. */
static int key_cmp(int cls, uint64_t a, uint64_t b) {
    union { uint64_t u; double d; int64_t s; } x = {.u = a}, y = {.u = b};
    if (cls == WM_CLS_FLOAT) {
        int na = isnan(x.d), nb = isnan(y.d);
        if (na || nb) return na - nb;
        return (x.d > y.d) - (x.d < y.d);
    }
    if (cls == WM_CLS_UINT64) return (a > b) - (a < b);
    return (x.s > y.s) - (x.s < y.s);
}

/* ---------------------------------------------------------------- TopK */

static wm_status topk_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_numeric, err);
    if (!st && n->opset >= 10) st = wm_check_type(n, 1, (const int32_t[]){WM_DT_INT64, 0}, err);
    n->out_dtype[0] = n->in_dtype[0];
    if (n->n_out > 1) n->out_dtype[1] = WM_DT_INT64;
    return st;
}

/* k and the axis; WM_NEED_DATA when k is an input not known yet. */
static wm_status topk_args(const wm_node *n, wm_tensor *const *in, int64_t *k, int *axis, wm_error *err) {
    int r = in[0]->rank;
    *axis = wm_axis(wm_attr_int(n, "axis", -1), r);
    if (*axis < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld out of range for rank %d",
                                      (long long)wm_attr_int(n, "axis", -1), r);
    if (n->opset < 10) {
        *k = wm_attr_int(n, "k", -1);
    } else {
        if (!in[1]->data) return WM_NEED_DATA;
        if (wm_tensor_numel(in[1]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "K must hold one value");
        *k = wm_tensor_get_int(in[1], 0);
    }
    if (*k < 0 || *k > in[0]->dims[*axis])
        return wm_node_err(n, err, WM_ERR_INPUT, "k = %lld is outside [0, %lld] (the axis length)", (long long)*k,
                           (long long)in[0]->dims[*axis]);
    return WM_OK;
}

static wm_status topk_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t k;
    int a;
    wm_status st = topk_args(n, in, &k, &a, err);
    if (st) return st;
    for (int o = 0; o < 2 && o < n->n_out; o++) {
        if (!out[o]) continue;
        wm_set_shape(out[o], in[0]->rank, in[0]->dims);
        out[o]->dims[a] = k;
    }
    return WM_OK;
}

static size_t topk_ws_per(const wm_tensor *x, int a) { return (size_t)x->dims[a] * 24 + 64; }

static size_t topk_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    int a = wm_axis(wm_attr_int(n, "axis", -1), in[0]->rank);
    return a < 0 ? 0 : (size_t)nth * topk_ws_per(in[0], a);
}

typedef struct topk_ctx {
    const wm_tensor *x;
    wm_tensor *vals, *idx;
    int cls, largest;
    int64_t k, len;
    uint64_t outer, inner;
    uint8_t *ws;
    size_t ws_per;
    const uint64_t *keys; /* per call of the comparator: the thread's keys */
} topk_ctx;

typedef struct topk_cmp_ctx {
    const uint64_t *keys;
    int cls, largest;
} topk_cmp_ctx;

/* Order of the output: best value first, ties by lower position. */
static int topk_cmp(const void *ctx, int64_t a, int64_t b) {
    const topk_cmp_ctx *c = ctx;
    int r = key_cmp(c->cls, c->keys[a], c->keys[b]);
    if (c->largest) r = -r;
    return r ? r : (a > b) - (a < b);
}

/* Max-heap on "worse first" so the root is the worst of the kept k. */
static void heap_down(int64_t *h, int64_t n, int64_t i, const topk_cmp_ctx *c) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && topk_cmp(c, h[l], h[w]) > 0) w = l;
        if (r < n && topk_cmp(c, h[r], h[w]) > 0) w = r;
        if (w == i) return;
        int64_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void topk_part(void *arg, int ith, int nth) {
    const topk_ctx *c = arg;
    long lo, hi;
    wm_split((long)(c->outer * c->inner), ith, nth, &lo, &hi);
    uint64_t *keys = (uint64_t *)(c->ws + (size_t)ith * c->ws_per);
    int64_t *ix = (int64_t *)(keys + c->len), *tmp = ix + c->len;
    topk_cmp_ctx cc = {keys, c->cls, c->largest};
    size_t es = wm_dtype_size(c->x->dtype);
    int64_t len = c->len, k = c->k;
    for (long s = lo; s < hi; s++) {
        uint64_t o = (uint64_t)s / c->inner, i = (uint64_t)s % c->inner;
        uint64_t base = o * (uint64_t)len * c->inner + i;
        for (int64_t j = 0; j < len; j++) keys[j] = key_of(c->x, c->cls, base + (uint64_t)j * c->inner);
        if (k * 8 < len) { /* keep the best k in a heap whose root is the worst kept */
            for (int64_t j = 0; j < k; j++) ix[j] = j;
            for (int64_t j = k / 2 - 1; j >= 0; j--) heap_down(ix, k, j, &cc);
            for (int64_t j = k; j < len; j++)
                if (k && topk_cmp(&cc, j, ix[0]) < 0) {
                    ix[0] = j;
                    heap_down(ix, k, 0, &cc);
                }
            wm_sort_idx(ix, tmp, k, topk_cmp, &cc);
        } else {
            for (int64_t j = 0; j < len; j++) ix[j] = j;
            wm_sort_idx(ix, tmp, len, topk_cmp, &cc);
        }
        uint64_t ob = o * (uint64_t)k * c->inner + i;
        for (int64_t j = 0; j < k; j++) {
            uint64_t d = ob + (uint64_t)j * c->inner;
            if (c->vals)
                memcpy((uint8_t *)c->vals->data + d * es, (const uint8_t *)c->x->data + (base + (uint64_t)ix[j] * c->inner) * es, es);
            if (c->idx) ((int64_t *)c->idx->data)[d] = ix[j];
        }
    }
}

static wm_status topk_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t k;
    int a;
    wm_status st = topk_args(n, in, &k, &a, x->err);
    if (st) return st;
    topk_ctx c = {.x = in[0], .vals = out[0], .idx = n->n_out > 1 ? out[1] : NULL, .cls = wm_dtype_class(in[0]->dtype),
                  .largest = n->opset >= 11 ? (int)wm_attr_int(n, "largest", 1) : 1, .k = k, .len = in[0]->dims[a],
                  .outer = 1, .inner = 1, .ws = x->ws, .ws_per = topk_ws_per(in[0], a)};
    for (int d = 0; d < a; d++) c.outer *= (uint64_t)in[0]->dims[d];
    for (int d = a + 1; d < in[0]->rank; d++) c.inner *= (uint64_t)in[0]->dims[d];
    uint64_t slices = c.outer * c.inner;
    if (!slices || !k) return WM_OK;
    int nth = slices * (uint64_t)c.len >= 16384 ? x->nth : 1;
    if ((uint64_t)nth > slices) nth = (int)slices;
    wm_pool_run(x->pool, topk_part, &c, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- NonZero */

static wm_status nonzero_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = WM_DT_INT64;
    return wm_check_type(n, 0, wm_types_all, err);
}

static int is_nonzero(const wm_tensor *t, int cls, uint64_t i) {
    if (cls == WM_CLS_FLOAT) return wm_tensor_get_f64(t, i) != 0;
    return wm_tensor_get_int(t, i) != 0;
}

static wm_status nonzero_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)n, (void)err;
    if (!in[0]->data) return WM_NEED_DATA;
    uint64_t total = wm_tensor_numel(in[0]), nz = 0;
    int cls = wm_dtype_class(in[0]->dtype);
    for (uint64_t i = 0; i < total; i++) nz += (uint64_t)is_nonzero(in[0], cls, i);
    out[0]->rank = 2;
    out[0]->dims[0] = in[0]->rank ? in[0]->rank : 1; /* a scalar counts as one dim of one element */
    out[0]->dims[1] = (int64_t)nz;
    return WM_OK;
}

static wm_status nonzero_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    int r = in[0]->rank, cls = wm_dtype_class(in[0]->dtype);
    uint64_t total = wm_tensor_numel(in[0]), nz = (uint64_t)out[0]->dims[1], q = 0;
    int64_t idx[WM_MAX_RANK] = {0};
    int64_t *o = out[0]->data;
    for (uint64_t i = 0; i < total; i++) {
        if (is_nonzero(in[0], cls, i)) {
            if (q >= nz) return wm_node_err(n, x->err, WM_ERR_INTERNAL, "input changed after its shape was inferred");
            if (r == 0) o[q] = 0;
            for (int d = 0; d < r; d++) o[(uint64_t)d * nz + q] = idx[d];
            q++;
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < in[0]->dims[d]) break;
            idx[d] = 0;
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Unique */

/* Slices of x along axis (or single elements when there is no axis) compared in order. */
typedef struct uq_cmp_ctx {
    const wm_tensor *x;
    int cls;
    uint64_t outer, len, inner; /* slice j: elements (o * len + j) * inner + i */
} uq_cmp_ctx;

static int uq_equal_cmp(const void *ctx, int64_t a, int64_t b) {
    const uq_cmp_ctx *c = ctx;
    for (uint64_t o = 0; o < c->outer; o++)
        for (uint64_t i = 0; i < c->inner; i++) {
            uint64_t pa = (o * c->len + (uint64_t)a) * c->inner + i, pb = (o * c->len + (uint64_t)b) * c->inner + i;
            int r = key_cmp(c->cls, key_of(c->x, c->cls, pa), key_of(c->x, c->cls, pb));
            if (r) return r;
        }
    return 0;
}

static int uq_cmp(const void *ctx, int64_t a, int64_t b) {
    int r = uq_equal_cmp(ctx, a, b);
    return r ? r : (a > b) - (a < b);
}

static wm_status unique_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    for (int k = 1; k < n->n_out; k++) n->out_dtype[k] = WM_DT_INT64;
    int64_t s = wm_attr_int(n, "sorted", 1);
    if (s != 0 && s != 1) return wm_node_err(n, err, WM_ERR_INPUT, "sorted must be 0 or 1");
    return wm_check_type(n, 0, wm_types_all, err);
}

static wm_status uq_setup(const wm_node *n, const wm_tensor *x, uq_cmp_ctx *c, int *axis, wm_error *err) {
    c->x = x;
    c->cls = wm_dtype_class(x->dtype);
    c->outer = c->inner = 1;
    *axis = -1;
    if (wm_attr(n, "axis")) {
        *axis = wm_axis(wm_attr_int(n, "axis", 0), x->rank);
        if (*axis < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range for rank %d", x->rank);
        for (int d = 0; d < *axis; d++) c->outer *= (uint64_t)x->dims[d];
        for (int d = *axis + 1; d < x->rank; d++) c->inner *= (uint64_t)x->dims[d];
        c->len = (uint64_t)x->dims[*axis]; /* empty slices (outer or inner 0) compare equal */
    } else {
        c->len = wm_tensor_numel(x);
    }
    return WM_OK;
}

/* Sorts the slice indices into idx (with tmp) and returns the number of distinct slices. */
static int64_t uq_sort(const uq_cmp_ctx *c, int64_t *idx, int64_t *tmp) {
    int64_t len = (int64_t)c->len, nu = 0;
    for (int64_t j = 0; j < len; j++) idx[j] = j;
    wm_sort_idx(idx, tmp, len, uq_cmp, c);
    for (int64_t j = 0; j < len; j++)
        if (j == 0 || uq_equal_cmp(c, idx[j - 1], idx[j])) nu++;
    return nu;
}

static wm_status unique_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (!in[0]->data) return WM_NEED_DATA;
    uq_cmp_ctx c;
    int axis;
    wm_status st = uq_setup(n, in[0], &c, &axis, err);
    if (st) return st;
    int64_t nu = 0;
    if (c.len) {
        /* the count needs a sort; infer runs per eager run (the shape depends on data) and has no workspace: its
           buffer (16 bytes an element) is taken from the session's memory budget while it lives */
        uint64_t nb = 2 * (uint64_t)c.len * sizeof(int64_t);
        if (n->scope && (st = wm_budget_take(n->scope, n, 0, nb, "a sort buffer", err))) return st;
        int64_t *idx = nb <= SIZE_MAX ? malloc((size_t)nb) : NULL;
        if (idx) nu = uq_sort(&c, idx, idx + c.len);
        free(idx);
        if (n->scope) wm_budget_give(n->scope, nb);
        if (!idx) return wm_node_err(n, err, WM_ERR_NOMEM, "out of memory");
    }
    if (axis < 0) {
        out[0]->rank = 1;
        out[0]->dims[0] = nu;
    } else {
        wm_set_shape(out[0], in[0]->rank, in[0]->dims);
        out[0]->dims[axis] = nu;
    }
    for (int k = 1; k < n->n_out; k++) {
        if (!out[k]) continue;
        out[k]->rank = 1;
        out[k]->dims[0] = k == 2 ? (int64_t)c.len : nu;
    }
    return WM_OK;
}

static size_t unique_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)nth, (void)out;
    uint64_t len = wm_tensor_numel(in[0]);
    if (wm_attr(n, "axis")) {
        int a = wm_axis(wm_attr_int(n, "axis", 0), in[0]->rank);
        len = a < 0 ? 0 : (uint64_t)in[0]->dims[a];
    }
    return (size_t)len * 4 * sizeof(int64_t) + 64;
}

static wm_status unique_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    uq_cmp_ctx c;
    int axis;
    wm_status st = uq_setup(n, in[0], &c, &axis, x->err);
    if (st) return st;
    int64_t len = (int64_t)c.len;
    int64_t *idx = x->ws, *tmp = idx + len, *grp = tmp + len, *first = grp + len;
    int64_t nu = uq_sort(&c, idx, tmp), gi = -1;
    for (int64_t j = 0; j < len; j++) { /* grp[slice] = its group in sorted order */
        if (j == 0 || uq_equal_cmp(&c, idx[j - 1], idx[j])) gi++;
        grp[idx[j]] = gi;
    }
    if (nu != out[0]->dims[axis < 0 ? 0 : axis])
        return wm_node_err(n, x->err, WM_ERR_INTERNAL, "input changed after its shape was inferred");
    /* first[g]: lowest slice of group g (the stable sort put it first) */
    for (int64_t j = 0; j < nu; j++) first[j] = -1;
    for (int64_t j = 0; j < len; j++)
        if (first[grp[j]] < 0) first[grp[j]] = j;
    /* output order of the groups: sorted, or by first occurrence; tmp[g] = output position of group g */
    int sorted = (int)wm_attr_int(n, "sorted", 1);
    if (sorted)
        for (int64_t g = 0; g < nu; g++) tmp[g] = g;
    else {
        int64_t q = 0;
        for (int64_t j = 0; j < len; j++)
            if (first[grp[j]] == j) tmp[grp[j]] = q++;
    }
    /* idx[p] = first slice of the group at output position p */
    for (int64_t g = 0; g < nu; g++) idx[tmp[g]] = first[g];
    size_t es = wm_dtype_size(in[0]->dtype);
    const uint8_t *src = in[0]->data;
    uint8_t *dst = out[0]->data;
    if (axis < 0)
        for (int64_t p = 0; p < nu; p++) memcpy(dst + (size_t)p * es, src + (size_t)idx[p] * es, es);
    else {
        uint64_t outer = 1, inner = 1;
        for (int d = 0; d < axis; d++) outer *= (uint64_t)in[0]->dims[d];
        for (int d = axis + 1; d < in[0]->rank; d++) inner *= (uint64_t)in[0]->dims[d];
        size_t row = (size_t)inner * es;
        for (uint64_t o = 0; o < outer && row; o++)
            for (int64_t p = 0; p < nu; p++)
                memcpy(dst + (o * (uint64_t)nu + (uint64_t)p) * row, src + (o * (uint64_t)len + (uint64_t)idx[p]) * row, row);
    }
    if (n->n_out > 1 && out[1])
        for (int64_t p = 0; p < nu; p++) ((int64_t *)out[1]->data)[p] = idx[p];
    if (n->n_out > 2 && out[2])
        for (int64_t j = 0; j < len; j++) ((int64_t *)out[2]->data)[j] = tmp[grp[j]];
    if (n->n_out > 3 && out[3]) {
        int64_t *cnt = out[3]->data;
        for (int64_t p = 0; p < nu; p++) cnt[p] = 0;
        for (int64_t j = 0; j < len; j++) cnt[tmp[grp[j]]]++;
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Compress */

static wm_status compress_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_type(n, 1, (const int32_t[]){WM_DT_BOOL, 0}, err);
    return st;
}

/* Axis (-1: flattened), the length of the selected dim and how many entries are selected. */
static wm_status compress_args(const wm_node *n, wm_tensor *const *in, int *axis, int64_t *count, wm_error *err) {
    if (in[1]->rank != 1) return wm_node_err(n, err, WM_ERR_INPUT, "condition must be 1-D");
    *axis = -1;
    int64_t dim = (int64_t)wm_tensor_numel(in[0]);
    if (wm_attr(n, "axis")) {
        *axis = wm_axis(wm_attr_int(n, "axis", 0), in[0]->rank);
        if (*axis < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range for rank %d", in[0]->rank);
        dim = in[0]->dims[*axis];
    }
    if (!in[1]->data) return WM_NEED_DATA;
    const uint8_t *c = in[1]->data;
    int64_t m = in[1]->dims[0], cnt = 0;
    for (int64_t j = 0; j < m; j++) {
        if (!c[j]) continue;
        if (j >= dim) return wm_node_err(n, err, WM_ERR_INPUT, "condition selects index %lld of a dim of %lld", (long long)j, (long long)dim);
        cnt++;
    }
    *count = cnt;
    return WM_OK;
}

static wm_status compress_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int a;
    int64_t cnt;
    wm_status st = compress_args(n, in, &a, &cnt, err);
    if (st) return st;
    if (a < 0) {
        out[0]->rank = 1;
        out[0]->dims[0] = cnt;
    } else {
        wm_set_shape(out[0], in[0]->rank, in[0]->dims);
        out[0]->dims[a] = cnt;
    }
    return WM_OK;
}

static wm_status compress_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int a;
    int64_t cnt;
    wm_status st = compress_args(n, in, &a, &cnt, x->err);
    if (st) return st;
    uint64_t outer = 1, inner = 1, len = wm_tensor_numel(in[0]);
    if (a >= 0) {
        for (int d = 0; d < a; d++) outer *= (uint64_t)in[0]->dims[d];
        for (int d = a + 1; d < in[0]->rank; d++) inner *= (uint64_t)in[0]->dims[d];
        len = (uint64_t)in[0]->dims[a];
    }
    size_t row = (size_t)inner * wm_dtype_size(in[0]->dtype);
    const uint8_t *c = in[1]->data, *src = in[0]->data;
    uint8_t *dst = out[0]->data;
    uint64_t m = (uint64_t)in[1]->dims[0] < len ? (uint64_t)in[1]->dims[0] : len;
    for (uint64_t o = 0; o < outer && row; o++)
        for (uint64_t j = 0; j < m; j++)
            if (c[j]) {
                memcpy(dst, src + (o * len + j) * row, row);
                dst += row;
            }
    return WM_OK;
}

/* ---------------------------------------------------------------- OneHot */

static wm_status onehot_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_numeric, err);
    if (!st) st = wm_check_type(n, 1, wm_types_numeric, err);
    if (!st) st = wm_check_type(n, 2, wm_types_all, err);
    n->out_dtype[0] = n->in_dtype[2];
    return st;
}

static wm_status onehot_args(const wm_node *n, wm_tensor *const *in, int64_t *depth, int *axis, wm_error *err) {
    int r = in[0]->rank;
    if (r + 1 > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output rank over %d", WM_MAX_RANK);
    *axis = wm_axis(wm_attr_int(n, "axis", -1), r + 1);
    if (*axis < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range for output rank %d", r + 1);
    if (wm_tensor_numel(in[2]) != 2) return wm_node_err(n, err, WM_ERR_INPUT, "values must hold [off_value, on_value]");
    if (wm_tensor_numel(in[1]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "depth must hold one value");
    if (!in[1]->data) return WM_NEED_DATA;
    double d = wm_get_f64(in[1], 0);
    if (!(d >= 1) || d > 1e15) return wm_node_err(n, err, WM_ERR_INPUT, "depth %g is not a positive count", d);
    *depth = (int64_t)d;
    return WM_OK;
}

static wm_status onehot_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t depth;
    int a;
    wm_status st = onehot_args(n, in, &depth, &a, err);
    if (st) return st;
    int r = in[0]->rank;
    out[0]->rank = r + 1;
    for (int d = 0, k = 0; d <= r; d++) out[0]->dims[d] = d == a ? depth : in[0]->dims[k++];
    return WM_OK;
}

static wm_status onehot_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t depth;
    int a;
    wm_status st = onehot_args(n, in, &depth, &a, x->err);
    if (st) return st;
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= (uint64_t)in[0]->dims[d];
    for (int d = a; d < in[0]->rank; d++) inner *= (uint64_t)in[0]->dims[d];
    size_t es = wm_dtype_size(out[0]->dtype);
    const uint8_t *off = in[2]->data, *on = off + es;
    uint8_t *dst = out[0]->data;
    int fl = wm_dtype_is_float(in[0]->dtype);
    for (uint64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < depth; j++)
            for (uint64_t i = 0; i < inner; i++) {
                uint64_t s = o * inner + i;
                int64_t v = fl ? wm_f64_to_i64(wm_tensor_get_f64(in[0], s)) : wm_tensor_get_int(in[0], s); /* NaN: off */
                if (in[0]->dtype == WM_DT_UINT64 && v < 0) v = depth; /* huge unsigned: out of range */
                if (v < 0) v += depth;
                memcpy(dst + ((o * (uint64_t)depth + (uint64_t)j) * inner + i) * es, v == j ? on : off, es);
            }
    return WM_OK;
}

/* ---------------------------------------------------------------- ReverseSequence */

static wm_status revseq_init(wm_node *n, wm_error *err) {
    n->out_dtype[0] = n->in_dtype[0];
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_type(n, 1, (const int32_t[]){WM_DT_INT64, 0}, err);
    int64_t ta = wm_attr_int(n, "time_axis", 0), ba = wm_attr_int(n, "batch_axis", 1);
    if (!st && !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
        st = wm_node_err(n, err, WM_ERR_INPUT, "time_axis and batch_axis must be 0 and 1 in some order (got %lld, %lld)",
                         (long long)ta, (long long)ba);
    return st;
}

static wm_status revseq_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int ba = (int)wm_attr_int(n, "batch_axis", 1);
    if (in[0]->rank < 2) return wm_node_err(n, err, WM_ERR_INPUT, "input must have rank >= 2");
    if (in[1]->rank != 1 || in[1]->dims[0] != in[0]->dims[ba])
        return wm_node_err(n, err, WM_ERR_INPUT, "sequence_lens must be 1-D with one length per batch entry");
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static wm_status revseq_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int ta = (int)wm_attr_int(n, "time_axis", 0), ba = 1 - ta;
    int64_t st[WM_MAX_RANK];
    strides_of(in[0], st);
    int64_t T = in[0]->dims[ta], B = in[0]->dims[ba], inner = st[1];
    size_t es = wm_dtype_size(in[0]->dtype), row = (size_t)inner * es;
    const uint8_t *src = in[0]->data;
    uint8_t *dst = out[0]->data;
    for (int64_t b = 0; b < B; b++) {
        int64_t L = wm_tensor_get_int(in[1], (uint64_t)b);
        if (L < 0 || L > T)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                               (long long)L, (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t s = t < L ? L - 1 - t : t;
            size_t od = (size_t)(t * st[ta] + b * st[ba]), sd = (size_t)(s * st[ta] + b * st[ba]);
            if (row) memcpy(dst + od * es, src + sd * es, row);
        }
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "TopK", 1, 0, topk_init, topk_infer, topk_run, topk_workspace, 0, 1u << 1},
    {"", "NonZero", 9, 0, nonzero_init, nonzero_infer, nonzero_run, NULL, 0, 1u << 0},
    {"", "Unique", 11, 0, unique_init, unique_infer, unique_run, unique_workspace, 0, 1u << 0},
    {"", "Compress", 9, 0, compress_init, compress_infer, compress_run, NULL, 0, 1u << 1},
    {"", "OneHot", 9, 0, onehot_init, onehot_infer, onehot_run, NULL, 0, 1u << 1},
    {"", "ReverseSequence", 10, 0, revseq_init, revseq_infer, revseq_run, NULL, 0, 0},
};

const wm_op_table wm_ops_index = {ops, sizeof ops / sizeof ops[0]};
