/*
 * control.c - If (1..), Loop (1..), Scan (8, 9..) over tensor values, their
 * bodies compiled as nested sessions (runtime/subgraph.h).
 *
 * The output shapes depend on data (the branch taken, the trip count), so
 * infer executes the node when all its inputs are known and reports
 * WM_NEED_DATA otherwise: a graph holding these ops runs eagerly. The
 * results of that execution wait in node-owned buffers and run copies
 * them into the outputs; a run not preceded by its infer (a plan that
 * knew every input ahead) executes again. Loop-carried and Scan state
 * values are copied out of the body's memory after every iteration (the
 * next run of the body reuses it), alternating between two buffers so an
 * iteration never overwrites the value it reads. Sequence and optional
 * values are not supported (an input or output of such a type is refused
 * at session creation).
 */
#include <string.h>

#include "ops/scalar.h"
#include "runtime/budget.h"
#include "runtime/subgraph.h"

enum { CF_IF, CF_LOOP, CF_SCAN };

typedef struct cf_state {
    int kind;
    wm_subgraph *g[2];      /* If: then, else; Loop/Scan: body */
    int fresh;              /* infer's results are waiting for run */
    int n_carry, n_scan_in, n_scan_out; /* Loop: N carried, K scan outputs; Scan: N states, M inputs, K outputs */
    int scan8;              /* Scan opset 8: batch axis, sequence_lens */
    /* buffers of the body (wm_subgraph_buf slots): Loop carried j: 2j, 2j+1 (alternating); Loop/Scan output k: 2N+k;
       Scan input slice i: 2N+K+i; Scan 8 final state j: 2N+K+M+j */
    int64_t in_axis[WM_MAX_IO], out_axis[WM_MAX_IO];
    uint8_t in_rev[WM_MAX_IO], out_rev[WM_MAX_IO];
    wm_tensor res[WM_MAX_IO]; /* results: dims and data (body memory or node buffers) */
} cf_state;

/* All inputs' data available (present inputs with elements). */
static int all_known(const wm_node *n, wm_tensor *const *in) {
    for (int k = 0; k < n->n_in; k++)
        if (in[k] && !in[k]->data && wm_tensor_numel(in[k]) > 0) return 0;
    return 1;
}

/* A copy of t's bytes into buffer slot of g (dims kept). */
static wm_status keep(wm_subgraph *g, int slot, const wm_tensor *t, wm_tensor *dst, wm_error *err) {
    uint64_t nb = wm_tensor_nbytes(t);
    void *b;
    wm_status st = wm_subgraph_buf(g, slot, nb, &b, err);
    if (st) return st;
    if (nb && b != t->data) memmove(b, t->data, (size_t)nb);
    *dst = *t;
    dst->data = b;
    return WM_OK;
}

/* ---------------------------------------------------------------- If */

static wm_status if_init(wm_node *n, wm_error *err) {
    cf_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->kind = CF_IF;
    wm_status st = wm_check_type(n, 0, (const int32_t[]){WM_DT_BOOL, 0}, err);
    if (!st) st = wm_subgraph_new(n, "then_branch", NULL, 0, &s->g[0], err);
    if (!st) st = wm_subgraph_new(n, "else_branch", NULL, 0, &s->g[1], err);
    if (st) return st;
    for (int b = 0; b < 2; b++)
        if ((int)wm_subgraph_n_outputs(s->g[b]) != n->n_out)
            return wm_node_err(n, err, WM_ERR_INPUT, "%s has %zu outputs, the node %d", b ? "else_branch" : "then_branch",
                               wm_subgraph_n_outputs(s->g[b]), n->n_out);
    for (int k = 0; k < n->n_out; k++) {
        int32_t a = wm_subgraph_output(s->g[0], (size_t)k)->dtype, b = wm_subgraph_output(s->g[1], (size_t)k)->dtype;
        if (a != b)
            return wm_node_err(n, err, WM_ERR_INPUT, "output %d is %s in then_branch, %s in else_branch", k, wm_dtype_name(a),
                               wm_dtype_name(b));
        n->out_dtype[k] = a;
    }
    return WM_OK;
}

static wm_status if_exec(wm_node *n, wm_tensor *const *in, wm_error *err) {
    cf_state *s = n->state;
    if (wm_tensor_numel(in[0]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "cond must hold one value");
    int b = ((const uint8_t *)in[0]->data)[0] ? 0 : 1;
    return wm_subgraph_run(s->g[b], NULL, in, s->res, err);
}

/* ---------------------------------------------------------------- Loop */

static wm_status loop_init(wm_node *n, wm_error *err) {
    cf_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->kind = CF_LOOP;
    if (n->n_in_proto < 2) return wm_node_err(n, err, WM_ERR_INPUT, "needs inputs M and cond (either may be empty)");
    wm_status st = WM_OK;
    if (wm_has_in(n, 0)) st = wm_check_type(n, 0, (const int32_t[]){WM_DT_INT64, 0}, err);
    if (!st && wm_has_in(n, 1)) st = wm_check_type(n, 1, (const int32_t[]){WM_DT_BOOL, 0}, err);
    if (st) return st;
    s->n_carry = n->n_in_proto - 2;
    int32_t formal[WM_MAX_IO];
    formal[0] = WM_DT_INT64;
    formal[1] = WM_DT_BOOL;
    for (int j = 0; j < s->n_carry; j++) {
        if (!wm_has_in(n, 2 + j)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "loop-carried input %d is empty", j);
        formal[2 + j] = n->in_dtype[2 + j];
    }
    if ((st = wm_subgraph_new(n, "body", formal, (size_t)(2 + s->n_carry), &s->g[0], err))) return st;
    int nb = (int)wm_subgraph_n_outputs(s->g[0]);
    s->n_scan_out = nb - 1 - s->n_carry;
    if (s->n_scan_out < 0) return wm_node_err(n, err, WM_ERR_INPUT, "body has %d outputs for %d carried values", nb, s->n_carry);
    if (n->n_out > s->n_carry + s->n_scan_out)
        return wm_node_err(n, err, WM_ERR_INPUT, "%d outputs, the body makes %d", n->n_out, s->n_carry + s->n_scan_out);
    if (2 * s->n_carry + s->n_scan_out > WM_SUBGRAPH_BUFS)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "more than %d carried and scan values", WM_SUBGRAPH_BUFS);
    if (wm_subgraph_output(s->g[0], 0)->dtype != WM_DT_BOOL)
        return wm_node_err(n, err, WM_ERR_INPUT, "the body's first output (cond) must be bool");
    for (int j = 0; j < s->n_carry; j++)
        if (wm_subgraph_output(s->g[0], (size_t)(1 + j))->dtype != n->in_dtype[2 + j])
            return wm_node_err(n, err, WM_ERR_INPUT, "carried value %d changes type in the body", j);
    for (int k = 0; k < n->n_out; k++) n->out_dtype[k] = wm_subgraph_output(s->g[0], (size_t)(1 + k))->dtype;
    return WM_OK;
}

/* Stacked output k of zero iterations: [0] + the dims the body declares when all known, else [0]. */
static void empty_scan(const wm_io_info *io, wm_tensor *t, int at) {
    int known = io->rank >= 0 && io->rank < WM_MAX_RANK;
    for (int d = 0; known && d < io->rank; d++) known = io->dims[d] >= 0;
    t->rank = known ? io->rank + 1 : 1;
    for (int d = 0, k = 0; d < t->rank; d++) t->dims[d] = d == at ? 0 : io->dims[k++];
    t->data = NULL;
}

static wm_status loop_exec(wm_node *n, wm_tensor *const *in, wm_error *err) {
    cf_state *s = n->state;
    wm_subgraph *g = s->g[0];
    int N = s->n_carry, K = s->n_scan_out;
    int has_M = wm_has_in(n, 0) && in[0];
    int has_cond = wm_has_in(n, 1) && in[1];
    if (has_M && wm_tensor_numel(in[0]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "M must hold one value");
    if (has_cond && wm_tensor_numel(in[1]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "cond must hold one value");
    int64_t M = has_M ? wm_tensor_get_int(in[0], 0) : INT64_MAX; /* read once known to be there */
    uint8_t cond = has_cond ? ((const uint8_t *)in[1]->data)[0] != 0 : 1;
    wm_tensor formal[WM_MAX_IO], out[WM_MAX_IO];
    int64_t iter = 0;
    for (int j = 0; j < N; j++) formal[2 + j] = *in[2 + j];
    uint64_t scan_bytes[WM_MAX_IO] = {0};
    for (; iter < M && cond; iter++) {
        uint8_t cin = cond;
        formal[0] = (wm_tensor){.dtype = WM_DT_INT64, .rank = 0, .data = &iter};
        formal[1] = (wm_tensor){.dtype = WM_DT_BOOL, .rank = 0, .data = &cin};
        wm_status st = wm_budget_iter(n, iter, has_M ? M : -1, err);
        if (!st) st = wm_subgraph_run(g, formal, in, out, err);
        if (st) return st;
        if (wm_tensor_numel(&out[0]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "the body's cond output must hold one value");
        if (has_cond) cond = ((const uint8_t *)out[0].data)[0] != 0;
        for (int j = 0; j < N; j++) /* alternate buffers: the value read this iteration stays intact */
            if ((st = keep(g, 2 * j + (int)(iter & 1), &out[1 + j], &formal[2 + j], err))) return st;
        for (int k = 0; k < K; k++) {
            const wm_tensor *e = &out[1 + N + k];
            wm_tensor *r = &s->res[N + k];
            if (iter == 0) {
                if (e->rank + 1 > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "scan output rank over %d", WM_MAX_RANK);
                r->dtype = e->dtype;
                r->rank = e->rank + 1;
                for (int d = 0; d < e->rank; d++) r->dims[d + 1] = e->dims[d];
            } else {
                int same = r->rank == e->rank + 1;
                for (int d = 0; same && d < e->rank; d++) same = r->dims[d + 1] == e->dims[d];
                if (!same) return wm_node_err(n, err, WM_ERR_INPUT, "scan output %d changes shape at iteration %lld", k, (long long)iter);
            }
            uint64_t nb = wm_tensor_nbytes(e);
            void *bv;
            if ((st = wm_subgraph_buf(g, 2 * N + k, scan_bytes[k] + nb, &bv, err))) return st;
            uint8_t *b = bv;
            if (nb) memcpy(b + scan_bytes[k], e->data, (size_t)nb);
            scan_bytes[k] += nb;
            r->data = b;
        }
    }
    for (int j = 0; j < N; j++) s->res[j] = formal[2 + j];
    for (int k = 0; k < K; k++) {
        if (iter == 0) empty_scan(wm_subgraph_output(g, (size_t)(1 + N + k)), &s->res[N + k], 0);
        s->res[N + k].dims[0] = iter;
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Scan */

static wm_status scan_init(wm_node *n, wm_error *err) {
    cf_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->kind = CF_SCAN;
    s->scan8 = n->opset < 9;
    int first = s->scan8 ? 1 : 0; /* opset 8: sequence_lens first */
    if (s->scan8 && wm_has_in(n, 0)) {
        wm_status st = wm_check_type(n, 0, (const int32_t[]){WM_DT_INT64, 0}, err);
        if (st) return st;
    }
    int64_t M = wm_attr_int(n, "num_scan_inputs", -1);
    int total = n->n_in_proto - first;
    if (M < 1 || M > total) return wm_node_err(n, err, WM_ERR_INPUT, "num_scan_inputs %lld does not fit %d inputs", (long long)M, total);
    s->n_scan_in = (int)M;
    s->n_carry = total - (int)M;
    int32_t formal[WM_MAX_IO];
    for (int i = 0; i < total; i++) {
        if (!wm_has_in(n, first + i)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "input %d is empty", first + i);
        formal[i] = n->in_dtype[first + i];
    }
    wm_status st = wm_subgraph_new(n, "body", formal, (size_t)total, &s->g[0], err);
    if (st) return st;
    int nb = (int)wm_subgraph_n_outputs(s->g[0]);
    s->n_scan_out = nb - s->n_carry;
    if (s->n_scan_out < 0 || n->n_out > nb) return wm_node_err(n, err, WM_ERR_INPUT, "the body's outputs do not match the node's");
    if (2 * s->n_carry + s->n_scan_out + s->n_scan_in > WM_SUBGRAPH_BUFS)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "more than %d state and scan values", WM_SUBGRAPH_BUFS);
    size_t c;
    const int64_t *v;
    const char *dir_attr = s->scan8 ? "directions" : "scan_input_directions";
    if ((v = wm_attr_ints(n, dir_attr, &c)) && (int)c != s->n_scan_in) return wm_node_err(n, err, WM_ERR_INPUT, "%s has %zu entries", dir_attr, c);
    for (int i = 0; i < s->n_scan_in; i++) s->in_rev[i] = v ? v[i] != 0 : 0;
    if (!s->scan8) {
        if ((v = wm_attr_ints(n, "scan_input_axes", &c)) && (int)c != s->n_scan_in) return wm_node_err(n, err, WM_ERR_INPUT, "scan_input_axes has %zu entries", c);
        for (int i = 0; i < s->n_scan_in; i++) s->in_axis[i] = v ? v[i] : 0;
        if ((v = wm_attr_ints(n, "scan_output_directions", &c)) && (int)c != s->n_scan_out) return wm_node_err(n, err, WM_ERR_INPUT, "scan_output_directions has %zu entries", c);
        for (int k = 0; k < s->n_scan_out; k++) s->out_rev[k] = v ? v[k] != 0 : 0;
        if ((v = wm_attr_ints(n, "scan_output_axes", &c)) && (int)c != s->n_scan_out) return wm_node_err(n, err, WM_ERR_INPUT, "scan_output_axes has %zu entries", c);
        for (int k = 0; k < s->n_scan_out; k++) s->out_axis[k] = v ? v[k] : 0;
    }
    for (int j = 0; j < s->n_carry; j++)
        if (wm_subgraph_output(s->g[0], (size_t)j)->dtype != formal[j]) return wm_node_err(n, err, WM_ERR_INPUT, "state %d changes type in the body", j);
    for (int k = 0; k < n->n_out; k++) n->out_dtype[k] = wm_subgraph_output(s->g[0], (size_t)k)->dtype;
    return WM_OK;
}

/* View of batch entry b of t (drops dim 0). */
static wm_tensor batch_view(const wm_tensor *t, int64_t b) {
    wm_tensor v = {.dtype = t->dtype, .rank = t->rank - 1};
    for (int d = 1; d < t->rank; d++) v.dims[d - 1] = t->dims[d];
    v.data = (uint8_t *)t->data + (size_t)(wm_tensor_nbytes(&v) * (uint64_t)b);
    return v;
}

/* Copies slice t of x along axis a (x's dims without a) into dst. */
static void take_slice(const wm_tensor *x, int a, int64_t t, void *dst) {
    uint64_t outer = 1, inner = wm_dtype_size(x->dtype);
    for (int d = 0; d < a; d++) outer *= (uint64_t)x->dims[d];
    for (int d = a + 1; d < x->rank; d++) inner *= (uint64_t)x->dims[d];
    for (uint64_t o = 0; o < outer; o++)
        memcpy((uint8_t *)dst + o * inner, (const uint8_t *)x->data + (o * (uint64_t)x->dims[a] + (uint64_t)t) * inner, (size_t)inner);
}

/* Scan output k laid out for element e: [B (opset 8)] + e's dims with T inserted at its axis; buffer zeroed. */
static wm_status scan_out_alloc(wm_node *n, const wm_tensor *e, int k, int64_t T, int64_t B, wm_error *err) {
    cf_state *s = n->state;
    int off = s->scan8 ? 1 : 0, r1 = e->rank + 1, a = wm_axis(s->out_axis[k], r1);
    if (a < 0 || r1 + off > WM_MAX_RANK)
        return wm_node_err(n, err, WM_ERR_INPUT, "scan output %d: axis out of range or rank over %d", k, WM_MAX_RANK);
    wm_tensor *r = &s->res[s->n_carry + k];
    r->dtype = e->dtype;
    r->rank = r1 + off;
    if (off) r->dims[0] = B;
    for (int d = 0, q = 0; d < r1; d++) r->dims[off + d] = d == a ? T : e->dims[q++];
    uint64_t nb;
    if (wm_budget_bytes(r, &nb))
        return wm_node_err(n, err, WM_ERR_INPUT, "scan output %d: its size overflows 64 bits", k);
    wm_status st = wm_subgraph_buf(s->g[0], 2 * s->n_carry + k, nb, &r->data, err);
    if (st) return st;
    memset(r->data, 0, (size_t)nb); /* steps past a sequence's length stay 0 */
    return WM_OK;
}

/*
 * One scan of len steps (of T) over states st0[] and scan inputs sc[] (scan axes ax[]): final states into
 * s->res[0..N) (opset 8: entry b of [B, ...]), scan outputs into s->res[N..) (block b of B).
 */
static wm_status scan_run1(wm_node *n, wm_tensor *const *in, const wm_tensor *st0, const wm_tensor *sc, const int *ax,
                           int64_t T, int64_t len, int64_t b, int64_t B, uint8_t *ready, wm_error *err) {
    cf_state *s = n->state;
    wm_subgraph *g = s->g[0];
    int N = s->n_carry, M = s->n_scan_in, K = s->n_scan_out;
    wm_tensor formal[WM_MAX_IO], out[WM_MAX_IO];
    for (int j = 0; j < N; j++) formal[j] = st0[j];
    for (int64_t t = 0; t < len; t++) {
        for (int i = 0; i < M; i++) {
            const wm_tensor *x = &sc[i];
            wm_tensor *f = &formal[N + i];
            f->dtype = x->dtype;
            f->rank = x->rank - 1;
            for (int d = 0, q = 0; d < x->rank; d++)
                if (d != ax[i]) f->dims[q++] = x->dims[d];
            void *buf;
            wm_status st = wm_subgraph_buf(g, 2 * N + K + i, wm_tensor_nbytes(f), &buf, err);
            if (st) return st;
            take_slice(x, ax[i], s->in_rev[i] ? len - 1 - t : t, buf);
            f->data = buf;
        }
        wm_status st = wm_budget_iter(n, b * T + t, -1, err);
        if (!st) st = wm_subgraph_run(g, formal, in, out, err);
        if (st) return st;
        for (int j = 0; j < N; j++)
            if ((st = keep(g, 2 * j + (int)(t & 1), &out[j], &formal[j], err))) return st;
        for (int k = 0; k < K; k++) {
            const wm_tensor *e = &out[N + k];
            wm_tensor *r = &s->res[N + k];
            if (!ready[k]) {
                if ((st = scan_out_alloc(n, e, k, T, B, err))) return st;
                ready[k] = 1;
            }
            int off = s->scan8 ? 1 : 0, a = wm_axis(s->out_axis[k], e->rank + 1), same = r->rank == e->rank + 1 + off;
            for (int d = 0, q = 0; same && d <= e->rank; d++) same = d == a || r->dims[off + d] == e->dims[q++];
            if (!same) return wm_node_err(n, err, WM_ERR_INPUT, "scan output %d changes shape", k);
            uint64_t outer = 1, inner = wm_dtype_size(e->dtype);
            for (int d = 0; d < a; d++) outer *= (uint64_t)e->dims[d];
            for (int d = a; d < e->rank; d++) inner *= (uint64_t)e->dims[d];
            int64_t pos = s->out_rev[k] ? len - 1 - t : t;
            uint8_t *dst = (uint8_t *)r->data + (uint64_t)b * wm_tensor_nbytes(e) * (uint64_t)T;
            for (uint64_t o = 0; o < outer; o++)
                memcpy(dst + (o * (uint64_t)T + (uint64_t)pos) * inner, (const uint8_t *)e->data + o * inner, (size_t)inner);
        }
    }
    for (int j = 0; j < N; j++) {
        if (!s->scan8) {
            s->res[j] = formal[j]; /* a buffer of g, or the initial input when no step ran */
            continue;
        }
        wm_tensor *r = &s->res[j];
        const wm_tensor *f = &formal[j];
        uint64_t nb = wm_tensor_nbytes(f);
        if (b == 0) {
            r->dtype = f->dtype;
            r->rank = f->rank + 1;
            r->dims[0] = B;
            for (int d = 0; d < f->rank; d++) r->dims[d + 1] = f->dims[d];
            wm_status st = wm_subgraph_buf(g, 2 * N + K + M + j, nb * (uint64_t)B, &r->data, err);
            if (st) return st;
        }
        if (nb) memcpy((uint8_t *)r->data + (uint64_t)b * nb, f->data, (size_t)nb);
    }
    return WM_OK;
}

static wm_status scan_exec(wm_node *n, wm_tensor *const *in, wm_error *err) {
    cf_state *s = n->state;
    int N = s->n_carry, M = s->n_scan_in, K = s->n_scan_out, first = s->scan8 ? 1 : 0;
    if (3 * N + K + M > WM_SUBGRAPH_BUFS) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "too many state and scan values");
    wm_tensor st0[WM_MAX_IO], sc[WM_MAX_IO];
    int ax[WM_MAX_IO];
    uint8_t ready[WM_MAX_IO] = {0};
    int64_t B = 1, T = -1;
    if (s->scan8) {
        if (in[first + N]->rank < 2) return wm_node_err(n, err, WM_ERR_INPUT, "scan inputs must be [batch, sequence, ...]");
        B = in[first + N]->dims[0];
        for (int j = 0; j < N; j++)
            if (in[first + j]->rank < 1 || in[first + j]->dims[0] != B)
                return wm_node_err(n, err, WM_ERR_INPUT, "state %d must be [batch, ...] with batch %lld", j, (long long)B);
    }
    for (int i = 0; i < M; i++) {
        const wm_tensor *x = in[first + N + i];
        int r = x->rank - first;
        ax[i] = wm_axis(s->in_axis[i], r);
        if (ax[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "scan input %d: axis out of range for rank %d", i, r);
        if (s->scan8 && x->dims[0] != B) return wm_node_err(n, err, WM_ERR_INPUT, "scan inputs differ in batch size");
        int64_t Ti = x->dims[ax[i] + first];
        if (T >= 0 && Ti != T) return wm_node_err(n, err, WM_ERR_INPUT, "scan inputs differ in sequence length");
        T = Ti;
    }
    if (s->scan8 && wm_has_in(n, 0) && in[0] && wm_tensor_numel(in[0]) != (uint64_t)B)
        return wm_node_err(n, err, WM_ERR_INPUT, "sequence_lens must hold one length per batch entry");
    int64_t steps;
    if (T > 0 && B > 0) { /* every step is an iteration of the body: refused before the first when over the cap */
        wm_status st = wm_budget_steps(n, __builtin_mul_overflow(T, B, &steps) ? INT64_MAX : steps, err);
        if (st) return st;
    }
    for (int64_t b = 0; b < B; b++) {
        for (int j = 0; j < N; j++) st0[j] = s->scan8 ? batch_view(in[first + j], b) : *in[first + j];
        for (int i = 0; i < M; i++) sc[i] = s->scan8 ? batch_view(in[first + N + i], b) : *in[first + N + i];
        int64_t len = T;
        if (s->scan8 && wm_has_in(n, 0) && in[0]) {
            len = wm_tensor_get_int(in[0], (uint64_t)b);
            if (len < 0 || len > T)
                return wm_node_err(n, err, WM_ERR_INPUT, "sequence_lens[%lld] = %lld outside [0, %lld]", (long long)b, (long long)len, (long long)T);
        }
        wm_status st = scan_run1(n, in, st0, sc, ax, T, len, b, B, ready, err);
        if (st) return st;
    }
    for (int k = 0; k < K; k++) { /* no step ran at all: the body's declared element shape */
        if (ready[k]) continue;
        const wm_io_info *io = wm_subgraph_output(s->g[0], (size_t)(N + k));
        int known = io->rank >= 0;
        for (int d = 0; known && d < io->rank; d++) known = io->dims[d] >= 0;
        if (!known) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "scan output %d: shape unknown without a step", k);
        wm_tensor e = {.dtype = io->dtype, .rank = io->rank};
        memcpy(e.dims, io->dims, sizeof e.dims);
        wm_status st = scan_out_alloc(n, &e, k, T, B, err);
        if (st) return st;
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- common */

static wm_status cf_exec(wm_node *n, wm_tensor *const *in, wm_error *err) {
    const cf_state *s = n->state;
    return s->kind == CF_IF ? if_exec(n, in, err) : s->kind == CF_LOOP ? loop_exec(n, in, err) : scan_exec(n, in, err);
}

static wm_status cf_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    cf_state *s = n->state;
    if (!all_known(n, in)) return WM_NEED_DATA;
    wm_status st = cf_exec(n, in, err);
    if (st) return st;
    for (int k = 0; k < n->n_out; k++)
        if (out[k]) {
            if (s->res[k].dtype != out[k]->dtype)
                return wm_node_err(n, err, WM_ERR_INPUT, "output %d is %s, declared %s", k, wm_dtype_name(s->res[k].dtype),
                                   wm_dtype_name(out[k]->dtype));
            wm_set_shape(out[k], s->res[k].rank, s->res[k].dims);
        }
    s->fresh = 1;
    return WM_OK;
}

static wm_status cf_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    cf_state *s = n->state;
    if (!s->fresh) {
        wm_status st = cf_exec(n, in, x->err);
        if (st) return st;
        for (int k = 0; k < n->n_out; k++) {
            if (!out[k]) continue;
            int same = s->res[k].rank == out[k]->rank;
            for (int d = 0; same && d < out[k]->rank; d++) same = s->res[k].dims[d] == out[k]->dims[d];
            if (!same) return wm_node_err(n, x->err, WM_ERR_INPUT, "output %d changed shape after planning", k);
        }
    }
    s->fresh = 0;
    for (int k = 0; k < n->n_out; k++)
        if (out[k] && wm_tensor_nbytes(out[k])) memcpy(out[k]->data, s->res[k].data, (size_t)wm_tensor_nbytes(out[k]));
    return WM_OK;
}

/* NOFOLD: a body may draw random numbers; running it at creation would freeze them */
static const wm_op ops[] = {
    {"", "If", 1, 0, if_init, cf_infer, cf_run, NULL, WM_OP_NOFOLD, 0},
    {"", "Loop", 1, 0, loop_init, cf_infer, cf_run, NULL, WM_OP_NOFOLD | WM_OP_NO_INPUT0, 0},
    {"", "Scan", 8, 0, scan_init, cf_infer, cf_run, NULL, WM_OP_NOFOLD | WM_OP_NO_INPUT0, 0},
};

const wm_op_table wm_ops_control = {ops, sizeof ops / sizeof ops[0]};
