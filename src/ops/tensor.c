/*
 * tensor.c - ops that move data between layouts: Transpose, Concat, Split,
 * Slice, Gather, GatherElements, GatherND, Tile, Trilu, CumSum.
 * Element types are moved as bytes, so every type is served.
 */
#include <string.h>

#include "kernels/kernels.h"
#include "ops/int_math.h"
#include "ops/op.h"

static wm_status any_type_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    for (int k = 0; k < n->n_out; k++) n->out_dtype[k] = n->in_dtype[0];
    return st;
}

/* Slice (starts and ends as inputs from opset 10), Tile (repeats): the inputs infer reads are required */
static wm_status slice_init(wm_node *n, wm_error *err) {
    wm_status st = wm_need_inputs(n, n->opset >= 10 ? 3 : 1, err);
    return st ? st : any_type_init(n, err);
}

static wm_status tile_init(wm_node *n, wm_error *err) {
    wm_status st = wm_need_inputs(n, 2, err);
    return st ? st : any_type_init(n, err);
}

/* Row-major strides of t (computed wrapping: they are only used to address a tensor that has elements, whose
 * size the plan bounds; an empty one may have huge dims next to its 0). */
static void strides_of(const wm_tensor *t, int64_t *st) {
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        st[d] = s;
        s = wm_i64_mul(s, t->dims[d]);
    }
}

/* ---------------------------------------------------------------- Transpose */

typedef struct perm_state {
    int64_t perm[WM_MAX_RANK];
    int n;
} perm_state;

static void get_perm(const wm_node *n, int rank, int64_t *perm) {
    size_t k;
    const int64_t *p = wm_attr_ints(n, "perm", &k);
    for (int i = 0; i < rank; i++) perm[i] = (p && (int)k == rank) ? p[i] : rank - 1 - i;
}

static wm_status transpose_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank;
    size_t k;
    const int64_t *p = wm_attr_ints(n, "perm", &k);
    if (p && (int)k != r) return wm_node_err(n, err, WM_ERR_INPUT, "perm has %zu entries for rank %d", k, r);
    int64_t perm[WM_MAX_RANK];
    get_perm(n, r, perm);
    int seen[WM_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]) return wm_node_err(n, err, WM_ERR_INPUT, "perm is not a permutation");
        seen[perm[i]] = 1;
        out[0]->dims[i] = in[0]->dims[perm[i]];
    }
    out[0]->rank = r;
    return WM_OK;
}

typedef struct tr_ctx {
    const uint8_t *src;
    uint8_t *dst;
    size_t es;
    int r;
    int64_t odims[WM_MAX_RANK], sst[WM_MAX_RANK]; /* output dims, source strides in output order */
    int64_t outer, inner;                         /* inner: length of the last output dim */
    int chunks;                                   /* transpose_planes: row ranges per plane */
} tr_ctx;

static void transpose_part(void *arg, int ith, int nth) {
    const tr_ctx *c = arg;
    long lo, hi;
    wm_split((long)c->outer, ith, nth, &lo, &hi);
    int r = c->r;
    int64_t idx[WM_MAX_RANK] = {0};
    /* position of row lo */
    int64_t rem = lo, so = 0;
    for (int d = r - 2; d >= 0; d--) {
        idx[d] = rem % c->odims[d];
        rem /= c->odims[d];
        so += idx[d] * c->sst[d];
    }
    int64_t is = c->sst[r - 1], inner = c->inner;
    for (long q = lo; q < hi; q++) {
        uint8_t *dp = c->dst + (size_t)q * (size_t)inner * c->es;
        if (c->es == 4) {
            const uint32_t *s4 = (const uint32_t *)c->src + so;
            uint32_t *d4 = (uint32_t *)dp;
            for (int64_t i = 0; i < inner; i++) d4[i] = s4[i * is];
        } else if (c->es == 8) {
            const uint64_t *s8 = (const uint64_t *)c->src + so;
            uint64_t *d8 = (uint64_t *)dp;
            for (int64_t i = 0; i < inner; i++) d8[i] = s8[i * is];
        } else
            for (int64_t i = 0; i < inner; i++) memcpy(dp + (size_t)i * c->es, c->src + (size_t)(so + i * is) * c->es, c->es);
        for (int d = r - 2; d >= 0; d--) { /* next row */
            so += c->sst[d];
            if (++idx[d] < c->odims[d]) break;
            so -= c->sst[d] * c->odims[d];
            idx[d] = 0;
        }
    }
}

/*
 * Planes of 4-byte elements when the output's second-to-last dim is contiguous in the source (NCHW -> NHWC,
 * NHWC -> NCHW): each plane is a 2-D transpose (the kernel table's transpose32, in 8 x 8 blocks), instead of
 * `inner`-long rows of strided reads.
 */
static void transpose_planes(void *arg, int ith, int nth) {
    const tr_ctx *c = arg;
    int r = c->r;
    int64_t rows = c->odims[r - 2], inner = c->inner, is = c->sst[r - 1], planes = c->outer / rows;
    long lo, hi;
    wm_split((long)(planes * c->chunks), ith, nth, &lo, &hi); /* units: (plane, chunk of its rows) */
    for (long u = lo; u < hi; u++) {
        int64_t q = u / c->chunks, rem = q, so = 0;
        long j0, j1;
        wm_split((long)rows, (int)(u % c->chunks), c->chunks, &j0, &j1);
        for (int d = r - 3; d >= 0; d--) {
            so += (rem % c->odims[d]) * c->sst[d];
            rem /= c->odims[d];
        }
        const uint32_t *s4 = (const uint32_t *)c->src + so;
        uint32_t *d4 = (uint32_t *)c->dst + (size_t)q * (size_t)(rows * inner);
        wm_kernels_get()->transpose32(inner, j1 - j0, s4 + j0, is, d4 + j0 * inner, inner);
    }
}

/* Transposes src (rank r, dims) by perm into dst; elements of es bytes. */
void wm_transpose(const void *src, void *dst, size_t es, int r, const int64_t *dims, const int64_t *perm, wm_exec *x) {
    /* drop size-1 dims: they do not move anything */
    int64_t d2[WM_MAX_RANK] = {0}, p2[WM_MAX_RANK] = {0}, map[WM_MAX_RANK];
    int r2 = 0;
    for (int i = 0; i < r; i++) map[i] = dims[i] == 1 ? -1 : r2++;
    for (int i = 0, k = 0; i < r; i++)
        if (dims[perm[i]] != 1) p2[k++] = map[perm[i]];
    for (int i = 0, k = 0; i < r; i++)
        if (dims[i] != 1) d2[k++] = dims[i];
    /* merge runs of output dims that follow each other in the source too (HW of NHWC -> NCHW): one dim each */
    int64_t gd[WM_MAX_RANK], gs[WM_MAX_RANK];
    int ng = 0;
    for (int i = 0; i < r2; i++) {
        if (i > 0 && p2[i] == p2[i - 1] + 1) gd[ng - 1] *= d2[p2[i]];
        else gs[ng] = p2[i], gd[ng++] = d2[p2[i]];
    }
    for (int g = 0; g < ng; g++) { /* the group's place in source order */
        int rank = 0;
        for (int h = 0; h < ng; h++) rank += gs[h] < gs[g];
        p2[g] = rank, d2[rank] = gd[g];
    }
    r2 = ng;
    uint64_t total = 1;
    for (int i = 0; i < r2; i++) total *= (uint64_t)d2[i];
    if (total == 0) return;
    int identity = 1;
    for (int i = 0; i < r2; i++) identity &= p2[i] == i;
    if (identity || r2 <= 1) {
        if (dst != src) memcpy(dst, src, total * es);
        return;
    }
    wm_tensor t = {.rank = r2};
    memcpy(t.dims, d2, sizeof d2);
    int64_t st[WM_MAX_RANK];
    strides_of(&t, st);
    tr_ctx c = {.src = src, .dst = dst, .es = es, .r = r2};
    for (int i = 0; i < r2; i++) {
        c.odims[i] = d2[p2[i]];
        c.sst[i] = st[p2[i]];
    }
    c.inner = c.odims[r2 - 1];
    c.outer = (int64_t)(total / (uint64_t)c.inner);
    int nth = total >= 65536 && x ? x->nth : 1;
    if (es == 4 && r2 >= 2 && c.sst[r2 - 2] == 1) {
        int64_t planes = c.outer / c.odims[r2 - 2];
        c.chunks = planes >= nth ? 1 : nth; /* few planes: their rows split over the threads */
        wm_pool_run(x ? x->pool : NULL, transpose_planes, &c, nth);
        return;
    }
    if (c.outer < nth) nth = (int)c.outer;
    wm_pool_run(x ? x->pool : NULL, transpose_part, &c, nth);
}

static wm_status transpose_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t perm[WM_MAX_RANK];
    get_perm(n, in[0]->rank, perm);
    wm_transpose(in[0]->data, out[0]->data, wm_dtype_size(in[0]->dtype), in[0]->rank, in[0]->dims, perm, x);
    return WM_OK;
}

/* ---------------------------------------------------------------- Concat */

static wm_status concat_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    for (int i = 1; i < n->n_in && !st; i++) st = wm_check_same_type(n, 0, i, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status concat_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const wm_tensor *f = in[0];
    int r = f->rank;
    int a = wm_axis(wm_attr_int(n, "axis", 0), r);
    if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
    int64_t sum = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (in[i]->rank != r) return wm_node_err(n, err, WM_ERR_INPUT, "inputs have different ranks");
        for (int d = 0; d < r; d++)
            if (d != a && in[i]->dims[d] != f->dims[d])
                return wm_node_err(n, err, WM_ERR_INPUT, "input %d dim %d is %lld, input 0 has %lld", i, d,
                                   (long long)in[i]->dims[d], (long long)f->dims[d]);
        if (!wm_add_i64_ok(sum, in[i]->dims[a], &sum)) return wm_node_err(n, err, WM_ERR_INPUT, "the concatenated dim is too large");
    }
    wm_set_shape(out[0], r, f->dims);
    out[0]->dims[a] = sum;
    return WM_OK;
}

static wm_status concat_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    int r = out[0]->rank, a = wm_axis(wm_attr_int(n, "axis", 0), r);
    size_t es = wm_dtype_size(out[0]->dtype);
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= (uint64_t)out[0]->dims[d];
    for (int d = a + 1; d < r; d++) inner *= (uint64_t)out[0]->dims[d];
    uint64_t orow = (uint64_t)out[0]->dims[a] * inner * es, off = 0;
    uint8_t *dst = out[0]->data;
    for (int i = 0; i < n->n_in; i++) {
        uint64_t row = (uint64_t)in[i]->dims[a] * inner * es;
        const uint8_t *src = in[i]->data;
        if (row)
            for (uint64_t o = 0; o < outer; o++) memcpy(dst + o * orow + off, src + o * row, row);
        off += row;
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Split */

static wm_status split_sizes(const wm_node *n, wm_tensor *const *in, int64_t *sz, int *axis, wm_error *err) {
    int r = in[0]->rank;
    int a = wm_axis(wm_attr_int(n, "axis", 0), r);
    if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
    *axis = a;
    int64_t dim = in[0]->dims[a];
    int no = n->n_out;
    if (n->opset >= 13 && n->n_in > 1 && in[1]) {
        if (!in[1]->data) return WM_NEED_DATA;
        if ((int)wm_tensor_numel(in[1]) != no) return wm_node_err(n, err, WM_ERR_INPUT, "split has %llu values for %d outputs", (unsigned long long)wm_tensor_numel(in[1]), no);
        for (int i = 0; i < no; i++) sz[i] = wm_tensor_get_int(in[1], (uint64_t)i);
    } else if (n->opset < 13 && wm_attr(n, "split")) {
        size_t k;
        const int64_t *s = wm_attr_ints(n, "split", &k);
        if ((int)k != no) return wm_node_err(n, err, WM_ERR_INPUT, "split has %zu values for %d outputs", k, no);
        for (int i = 0; i < no; i++) sz[i] = s[i];
    } else {
        int64_t parts = wm_attr_int(n, "num_outputs", no);
        if (parts != no || no <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "num_outputs does not match the outputs");
        int64_t each = (dim + no - 1) / no;
        for (int i = 0; i < no; i++) {
            int64_t left = dim - each * i;
            sz[i] = left < 0 ? 0 : left < each ? left : each;
        }
        if (n->opset < 18 && dim % no)
            return wm_node_err(n, err, WM_ERR_INPUT, "dim %lld does not split evenly into %d", (long long)dim, no);
    }
    int64_t sum = 0;
    for (int i = 0; i < no; i++) {
        if (sz[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "negative split");
        if (!wm_add_i64_ok(sum, sz[i], &sum)) return wm_node_err(n, err, WM_ERR_INPUT, "splits sum past the int64 range");
    }
    if (sum != dim) return wm_node_err(n, err, WM_ERR_INPUT, "splits sum to %lld, dim is %lld", (long long)sum, (long long)dim);
    return WM_OK;
}

static wm_status split_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t sz[WM_MAX_IO];
    int a;
    wm_status st = split_sizes(n, in, sz, &a, err);
    if (st) return st;
    for (int i = 0; i < n->n_out; i++) {
        if (!out[i]) continue;
        wm_set_shape(out[i], in[0]->rank, in[0]->dims);
        out[i]->dims[a] = sz[i];
    }
    return WM_OK;
}

static wm_status split_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t sz[WM_MAX_IO];
    int a;
    wm_status st = split_sizes(n, in, sz, &a, x->err);
    if (st) return st;
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= (uint64_t)in[0]->dims[d];
    for (int d = a + 1; d < in[0]->rank; d++) inner *= (uint64_t)in[0]->dims[d];
    uint64_t irow = (uint64_t)in[0]->dims[a] * inner * es, off = 0;
    const uint8_t *src = in[0]->data;
    for (int i = 0; i < n->n_out; i++) {
        uint64_t row = (uint64_t)sz[i] * inner * es;
        if (out[i] && row)
            for (uint64_t o = 0; o < outer; o++) memcpy((uint8_t *)out[i]->data + o * row, src + o * irow + off, row);
        off += row;
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Slice */

typedef struct slice_spec {
    int64_t start[WM_MAX_RANK], step[WM_MAX_RANK], len[WM_MAX_RANK];
} slice_spec;

static wm_status slice_resolve(const wm_node *n, wm_tensor *const *in, slice_spec *s, wm_error *err) {
    int r = in[0]->rank;
    int64_t starts[WM_MAX_RANK], ends[WM_MAX_RANK], axes[WM_MAX_RANK], steps[WM_MAX_RANK];
    int cnt;
    if (n->opset < 10) {
        size_t k1, k2, k3;
        const int64_t *a = wm_attr_ints(n, "starts", &k1), *b = wm_attr_ints(n, "ends", &k2), *c = wm_attr_ints(n, "axes", &k3);
        if (k1 != k2 || k1 > WM_MAX_RANK || (c && k3 != k1)) return wm_node_err(n, err, WM_ERR_INPUT, "starts/ends/axes lengths differ");
        cnt = (int)k1;
        for (int i = 0; i < cnt; i++) starts[i] = a[i], ends[i] = b[i], axes[i] = c ? c[i] : i, steps[i] = 1;
    } else {
        for (int i = 1; i < 5 && i < n->n_in; i++)
            if (in[i] && !in[i]->data && wm_tensor_numel(in[i])) return WM_NEED_DATA;
        uint64_t k = wm_tensor_numel(in[1]);
        if (k > WM_MAX_RANK || wm_tensor_numel(in[2]) != k) return wm_node_err(n, err, WM_ERR_INPUT, "starts and ends lengths differ");
        if ((n->n_in > 3 && in[3] && wm_tensor_numel(in[3]) != k) || (n->n_in > 4 && in[4] && wm_tensor_numel(in[4]) != k))
            return wm_node_err(n, err, WM_ERR_INPUT, "axes/steps lengths differ from starts"); /* before reading them */
        cnt = (int)k;
        for (int i = 0; i < cnt; i++) {
            starts[i] = wm_tensor_get_int(in[1], (uint64_t)i);
            ends[i] = wm_tensor_get_int(in[2], (uint64_t)i);
            axes[i] = n->n_in > 3 && in[3] ? wm_tensor_get_int(in[3], (uint64_t)i) : i;
            steps[i] = n->n_in > 4 && in[4] ? wm_tensor_get_int(in[4], (uint64_t)i) : 1;
        }
    }
    for (int d = 0; d < r; d++) s->start[d] = 0, s->step[d] = 1, s->len[d] = in[0]->dims[d];
    int seen[WM_MAX_RANK] = {0};
    for (int i = 0; i < cnt; i++) {
        int a = wm_axis(axes[i], r);
        if (a < 0 || seen[a]) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld invalid or repeated", (long long)axes[i]);
        seen[a] = 1;
        int64_t dim = in[0]->dims[a], st = steps[i], b = starts[i], e = ends[i];
        if (st == 0) return wm_node_err(n, err, WM_ERR_INPUT, "step 0");
        s->len[a] = wm_slice_axis(dim, b, e, st, &b); /* clamped per the spec, any int64 values: ops/int_math.h */
        s->start[a] = b;
        s->step[a] = st;
    }
    return WM_OK;
}

static wm_status slice_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    slice_spec s;
    wm_status st = slice_resolve(n, in, &s, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, s.len);
    return WM_OK;
}

static wm_status slice_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    slice_spec s;
    wm_status st = slice_resolve(n, in, &s, x->err);
    if (st) return st;
    int r = in[0]->rank;
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t total = wm_tensor_numel(out[0]);
    if (!total) return WM_OK;
    if (r == 0) {
        memcpy(out[0]->data, in[0]->data, es);
        return WM_OK;
    }
    int64_t ist[WM_MAX_RANK];
    strides_of(in[0], ist);
    int64_t inner = s.len[r - 1], istep = s.step[r - 1] * ist[r - 1];
    uint64_t outer = total / (uint64_t)inner;
    int64_t idx[WM_MAX_RANK] = {0};
    const uint8_t *src = in[0]->data;
    uint8_t *dst = out[0]->data;
    for (uint64_t q = 0; q < outer; q++) {
        int64_t so = s.start[r - 1] * ist[r - 1];
        for (int d = 0; d < r - 1; d++) so += (s.start[d] + idx[d] * s.step[d]) * ist[d];
        uint8_t *dp = dst + q * (uint64_t)inner * es;
        if (istep == 1) memcpy(dp, src + (size_t)so * es, (size_t)inner * es);
        else
            for (int64_t i = 0; i < inner; i++) memcpy(dp + (size_t)i * es, src + (size_t)(so + i * istep) * es, es);
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < s.len[d]) break;
            idx[d] = 0;
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Gather */

static wm_status gather_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status gather_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int r = in[0]->rank, a = wm_axis(wm_attr_int(n, "axis", 0), r);
    if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
    int ro = r - 1 + in[1]->rank;
    if (ro > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output rank over %d", WM_MAX_RANK);
    int k = 0;
    for (int d = 0; d < a; d++) out[0]->dims[k++] = in[0]->dims[d];
    for (int d = 0; d < in[1]->rank; d++) out[0]->dims[k++] = in[1]->dims[d];
    for (int d = a + 1; d < r; d++) out[0]->dims[k++] = in[0]->dims[d];
    out[0]->rank = ro;
    return WM_OK;
}

static wm_status gather_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int r = in[0]->rank, a = wm_axis(wm_attr_int(n, "axis", 0), r);
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t outer = 1, inner = 1, ni = wm_tensor_numel(in[1]);
    for (int d = 0; d < a; d++) outer *= (uint64_t)in[0]->dims[d];
    for (int d = a + 1; d < r; d++) inner *= (uint64_t)in[0]->dims[d];
    int64_t dim = in[0]->dims[a];
    size_t row = (size_t)inner * es;
    const uint8_t *src = in[0]->data;
    uint8_t *dst = out[0]->data;
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < ni; i++) {
            int64_t j = wm_tensor_get_int(in[1], i);
            if (j < 0) j += dim;
            if (j < 0 || j >= dim)
                return wm_node_err(n, x->err, WM_ERR_INPUT, "index %lld out of range [-%lld, %lld)",
                                   (long long)wm_tensor_get_int(in[1], i), (long long)dim, (long long)dim);
            memcpy(dst + (o * ni + i) * row, src + (o * (uint64_t)dim + (uint64_t)j) * row, row);
        }
    return WM_OK;
}

/* ---------------------------------------------------------------- GatherElements */

static wm_status gather_el_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (in[0]->rank != in[1]->rank) return wm_node_err(n, err, WM_ERR_INPUT, "data and indices ranks differ");
    if (wm_axis(wm_attr_int(n, "axis", 0), in[0]->rank) < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
    wm_set_shape(out[0], in[1]->rank, in[1]->dims);
    return WM_OK;
}

static wm_status gather_el_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int r = in[0]->rank, a = wm_axis(wm_attr_int(n, "axis", 0), r);
    size_t es = wm_dtype_size(in[0]->dtype);
    int64_t ds[WM_MAX_RANK], idx[WM_MAX_RANK] = {0};
    strides_of(in[0], ds);
    uint64_t total = wm_tensor_numel(out[0]);
    for (uint64_t i = 0; i < total; i++) {
        int64_t j = wm_tensor_get_int(in[1], i), dim = in[0]->dims[a];
        if (j < 0) j += dim;
        if (j < 0 || j >= dim) return wm_node_err(n, x->err, WM_ERR_INPUT, "index out of range");
        int64_t off = 0;
        for (int d = 0; d < r; d++) {
            int64_t v = d == a ? j : idx[d];
            if (v >= in[0]->dims[d]) return wm_node_err(n, x->err, WM_ERR_INPUT, "indices shape exceeds data");
            off += v * ds[d];
        }
        memcpy((uint8_t *)out[0]->data + i * es, (const uint8_t *)in[0]->data + (size_t)off * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < in[1]->dims[d]) break;
            idx[d] = 0;
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- GatherND */

static wm_status gather_nd_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int b = (int)wm_attr_int(n, "batch_dims", 0), rq = in[1]->rank, r = in[0]->rank;
    if (rq < 1) return wm_node_err(n, err, WM_ERR_INPUT, "indices must have rank >= 1");
    int64_t k = in[1]->dims[rq - 1];
    if (b < 0 || b >= rq || b >= r || k < 1 || k > r - b) return wm_node_err(n, err, WM_ERR_INPUT, "bad indices shape or batch_dims");
    int ro = rq - 1 + r - (int)k - b;
    if (ro > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "rank over %d", WM_MAX_RANK);
    int o = 0;
    for (int d = 0; d < rq - 1; d++) out[0]->dims[o++] = in[1]->dims[d];
    for (int d = b + (int)k; d < r; d++) out[0]->dims[o++] = in[0]->dims[d];
    out[0]->rank = o;
    return WM_OK;
}

static wm_status gather_nd_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int b = (int)wm_attr_int(n, "batch_dims", 0), rq = in[1]->rank, r = in[0]->rank;
    int64_t k = in[1]->dims[rq - 1];
    size_t es = wm_dtype_size(in[0]->dtype);
    int64_t ds[WM_MAX_RANK];
    strides_of(in[0], ds);
    uint64_t batch = 1, slice = 1;
    for (int d = 0; d < b; d++) batch *= (uint64_t)in[0]->dims[d];
    for (int d = b + (int)k; d < r; d++) slice *= (uint64_t)in[0]->dims[d];
    uint64_t nq = wm_tensor_numel(in[1]) / (uint64_t)k, per_batch = nq / (batch ? batch : 1);
    uint64_t batch_stride = b ? (uint64_t)ds[b - 1] : 0;
    for (uint64_t q = 0; q < nq; q++) {
        uint64_t bi = per_batch ? q / per_batch : 0;
        int64_t off = (int64_t)(bi * batch_stride);
        for (int64_t j = 0; j < k; j++) {
            int64_t v = wm_tensor_get_int(in[1], q * (uint64_t)k + (uint64_t)j), dim = in[0]->dims[b + j];
            if (v < 0) v += dim;
            if (v < 0 || v >= dim) return wm_node_err(n, x->err, WM_ERR_INPUT, "index out of range");
            off += v * ds[b + j];
        }
        memcpy((uint8_t *)out[0]->data + q * slice * es, (const uint8_t *)in[0]->data + (size_t)off * es, slice * es);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Tile */

static wm_status tile_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (!in[1]->data) return WM_NEED_DATA;
    int r = in[0]->rank;
    if ((int)wm_tensor_numel(in[1]) != r) return wm_node_err(n, err, WM_ERR_INPUT, "repeats length differs from the rank");
    for (int d = 0; d < r; d++) {
        int64_t rep = wm_tensor_get_int(in[1], (uint64_t)d);
        if (rep < 0) return wm_node_err(n, err, WM_ERR_INPUT, "negative repeat");
        if (!wm_mul_i64_ok(in[0]->dims[d], rep, &out[0]->dims[d]))
            return wm_node_err(n, err, WM_ERR_INPUT, "repeats[%d] = %lld makes dim %d too large", d, (long long)rep, d);
    }
    out[0]->rank = r;
    return WM_OK;
}

/* Row by row: each output row (all dims but the last) is the input row its coordinates wrap to, copied once per
 * repeat of the last dim (an element at a time took 10 s under ASan for a 256 MiB output). */
static wm_status tile_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)n, (void)x;
    int r = out[0]->rank;
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t total = wm_tensor_numel(out[0]);
    if (!total) return WM_OK;
    if (r == 0) {
        memcpy(out[0]->data, in[0]->data, es);
        return WM_OK;
    }
    int64_t is[WM_MAX_RANK], idx[WM_MAX_RANK] = {0};
    strides_of(in[0], is);
    int64_t iw = in[0]->dims[r - 1], ow = out[0]->dims[r - 1]; /* ow = iw * repeats, iw > 0 as total > 0 */
    size_t row = (size_t)iw * es;
    uint64_t rows = total / (uint64_t)ow;
    uint8_t *dst = out[0]->data;
    for (uint64_t q = 0; q < rows; q++) {
        int64_t off = 0;
        for (int d = 0; d < r - 1; d++) off += (idx[d] % in[0]->dims[d]) * is[d];
        const uint8_t *src = (const uint8_t *)in[0]->data + (size_t)off * es;
        for (int64_t k = 0; k < ow; k += iw, dst += row) memcpy(dst, src, row);
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < out[0]->dims[d]) break;
            idx[d] = 0;
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Trilu */

static wm_status same_shape_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)n, (void)err;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static wm_status trilu_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)x;
    int r = in[0]->rank;
    if (r < 2) return wm_node_err(n, x->err, WM_ERR_INPUT, "rank must be >= 2");
    if (wm_has_in(n, 1) && wm_tensor_numel(in[1]) != 1) return wm_node_err(n, x->err, WM_ERR_INPUT, "k must hold one value");
    int64_t k = wm_has_in(n, 1) ? wm_tensor_get_int(in[1], 0) : 0;
    int upper = (int)wm_attr_int(n, "upper", 1);
    int64_t R = in[0]->dims[r - 2], C = in[0]->dims[r - 1];
    size_t es = wm_dtype_size(in[0]->dtype);
    uint64_t numel = wm_tensor_numel(in[0]), mats = numel ? numel / ((uint64_t)R * (uint64_t)C) : 0;
    const uint8_t *src = in[0]->data;
    uint8_t *dst = out[0]->data;
    for (uint64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) {
                size_t off = ((size_t)m * (size_t)(R * C) + (size_t)(i * C + j)) * es;
                int keep = upper ? j - i >= k : j - i <= k;
                if (keep) memmove(dst + off, src + off, es);
                else memset(dst + off, 0, es);
            }
    return WM_OK;
}

/* ---------------------------------------------------------------- CumSum */

static wm_status cumsum_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_numeric, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status cumsum_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    if (wm_tensor_numel(in[1]) != 1) return wm_node_err(n, x->err, WM_ERR_INPUT, "axis must hold one value");
    int r = in[0]->rank, a = wm_axis(wm_tensor_get_int(in[1], 0), r);
    if (a < 0) return wm_node_err(n, x->err, WM_ERR_INPUT, "axis out of range");
    int excl = (int)wm_attr_int(n, "exclusive", 0), rev = (int)wm_attr_int(n, "reverse", 0);
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= (uint64_t)in[0]->dims[d];
    for (int d = a + 1; d < r; d++) inner *= (uint64_t)in[0]->dims[d];
    int64_t len = in[0]->dims[a];
    int32_t dt = in[0]->dtype;
    int fl = dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16;
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            double accf = 0;
            int64_t acci = 0;
            for (int64_t s = 0; s < len; s++) {
                int64_t t = rev ? len - 1 - s : s;
                uint64_t off = (o * (uint64_t)len + (uint64_t)t) * inner + i;
                double vf = fl ? wm_tensor_get_f64(in[0], off) : 0;
                int64_t vi = fl ? 0 : wm_tensor_get_int(in[0], off);
                if (!excl) accf += vf, acci = wm_i64_add(acci, vi); /* integers wrap: ops/int_math.h */
                switch (dt) {
                case WM_DT_FLOAT: ((float *)out[0]->data)[off] = (float)accf; break;
                case WM_DT_DOUBLE: ((double *)out[0]->data)[off] = accf; break;
                case WM_DT_FLOAT16: ((uint16_t *)out[0]->data)[off] = wm_f32_to_f16((float)accf); break;
                case WM_DT_BFLOAT16: ((uint16_t *)out[0]->data)[off] = wm_f32_to_bf16((float)accf); break;
                case WM_DT_INT32: ((int32_t *)out[0]->data)[off] = (int32_t)acci; break;
                case WM_DT_INT64: ((int64_t *)out[0]->data)[off] = acci; break;
                case WM_DT_UINT32: ((uint32_t *)out[0]->data)[off] = (uint32_t)acci; break;
                case WM_DT_UINT64: ((uint64_t *)out[0]->data)[off] = (uint64_t)acci; break;
                default: return wm_node_err(n, x->err, WM_ERR_UNSUPPORTED, "element type %s", wm_dtype_name(dt));
                }
                if (excl) accf += vf, acci = wm_i64_add(acci, vi);
            }
        }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "Transpose", 1, 0, any_type_init, transpose_infer, transpose_run, NULL, 0, 0},
    {"", "Concat", 4, 0, concat_init, concat_infer, concat_run, NULL, 0, 0},
    {"", "Split", 2, 0, any_type_init, split_infer, split_run, NULL, 0, 1u << 1},
    {"", "Slice", 1, 0, slice_init, slice_infer, slice_run, NULL, 0, 0x1eu},
    {"", "Gather", 1, 0, gather_init, gather_infer, gather_run, NULL, 0, 0},
    {"", "GatherElements", 11, 0, gather_init, gather_el_infer, gather_el_run, NULL, 0, 0},
    {"", "GatherND", 11, 0, gather_init, gather_nd_infer, gather_nd_run, NULL, 0, 0},
    {"", "Tile", 6, 0, tile_init, tile_infer, tile_run, NULL, 0, 1u << 1},
    {"", "Trilu", 14, 0, any_type_init, same_shape_infer, trilu_run, NULL, 0, 0},
    {"", "CumSum", 11, 0, cumsum_init, same_shape_infer, cumsum_run, NULL, 0, 0},
};

const wm_op_table wm_ops_tensor = {ops, sizeof ops / sizeof ops[0]};
