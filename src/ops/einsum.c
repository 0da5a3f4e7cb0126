/*
 * einsum.c - Einsum (12): any equation with explicit or implicit output,
 * broadcasting ellipsis, repeated labels within a term (diagonals) and any
 * number of inputs.
 *
 * Each operand is brought to a clean form: converted to the compute type
 * (float32 for float32/float16/bfloat16, float64 for float64, int64 for
 * integers), diagonals of repeated labels taken, size-1 dims dropped (they
 * broadcast), and labels no other operand or the output uses summed out.
 * Operands are then contracted left to right: the running result A and the
 * next operand B are transposed to [batch, M, K] and [batch, K, N] and
 * multiplied batch by batch (wm_sgemm for float32, a plain loop for
 * float64 and int64), keeping only the labels the output or a later operand
 * uses. The result is transposed to the output order and converted back.
 * Scratch comes from one workspace sized by a dry run of the same steps.
 */
#include <string.h>

#include "ops/gemm.h"
#include "ops/scalar.h"

#define EIN_MAXL 64     /* label ids: 0..51 letters, 52.. ellipsis dims */
#define EIN_ELL 52
#define EIN_MAXTERMS 32

typedef struct ein_term {
    int8_t lab[WM_MAX_RANK + 1]; /* letter ids in order; -1 marks the ellipsis position */
    int n;                       /* entries in lab (the ellipsis counts as one) */
    int ell;                     /* has an ellipsis */
} ein_term;

typedef struct ein_state {
    ein_term in[EIN_MAXTERMS], out;
    int n_in;
    int32_t ct; /* compute type */
} ein_state;

/* ---------------------------------------------------------------- parsing (init) */

static int letter_id(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + c - 'a';
    return -1;
}

static wm_status parse_term(const wm_node *n, const char *s, size_t len, ein_term *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < len;) {
        if (s[i] == ' ') {
            i++;
            continue;
        }
        if (t->n > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "a term has more than %d labels", WM_MAX_RANK);
        if (s[i] == '.') {
            if (i + 3 > len || s[i + 1] != '.' || s[i + 2] != '.' || t->ell)
                return wm_node_err(n, err, WM_ERR_INPUT, "equation: bad ellipsis");
            t->ell = 1;
            t->lab[t->n++] = -1;
            i += 3;
            continue;
        }
        int id = letter_id(s[i]);
        if (id < 0) return wm_node_err(n, err, WM_ERR_INPUT, "equation: unexpected character '%c'", s[i]);
        t->lab[t->n++] = (int8_t)id;
        i++;
    }
    return WM_OK;
}

static wm_status einsum_init(wm_node *n, wm_error *err) {
    static const int32_t types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, WM_DT_INT8, WM_DT_UINT8,
                                    WM_DT_INT16, WM_DT_UINT16,  WM_DT_INT32,    WM_DT_UINT32, WM_DT_INT64, WM_DT_UINT64, 0};
    if (n->n_in < 1 || n->n_in > EIN_MAXTERMS)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "%d inputs (1..%d supported)", n->n_in, EIN_MAXTERMS);
    wm_status st = WM_OK;
    for (int i = 0; i < n->n_in && !st; i++) {
        st = wm_check_type(n, i, types, err);
        if (!st && i) st = wm_check_same_type(n, 0, i, err);
    }
    if (st) return st;
    ein_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    s->n_in = n->n_in;
    int32_t dt = n->in_dtype[0];
    s->ct = dt == WM_DT_DOUBLE ? WM_DT_DOUBLE : wm_dtype_is_float(dt) ? WM_DT_FLOAT : WM_DT_INT64;
    n->out_dtype[0] = dt;
    const wm_onnx_attr *a = wm_attr(n, "equation");
    if (!a) return wm_node_err(n, err, WM_ERR_INPUT, "equation attribute missing");
    const char *eq = (const char *)a->s.p;
    size_t len = a->s.n, arrow = len;
    for (size_t i = 0; i + 1 < len; i++)
        if (eq[i] == '-' && eq[i + 1] == '>') {
            arrow = i;
            break;
        }
    int term = 0;
    size_t start = 0;
    for (size_t i = 0; i <= arrow; i++)
        if (i == arrow || eq[i] == ',') {
            if (term >= s->n_in) return wm_node_err(n, err, WM_ERR_INPUT, "equation has more terms than the %d inputs", s->n_in);
            if ((st = parse_term(n, eq + start, i - start, &s->in[term++], err))) return st;
            start = i + 1;
        }
    if (term != s->n_in) return wm_node_err(n, err, WM_ERR_INPUT, "equation has %d terms for %d inputs", term, s->n_in);
    int count[EIN_MAXL] = {0}, any_ell = 0;
    for (int t = 0; t < s->n_in; t++) {
        any_ell |= s->in[t].ell;
        for (int k = 0; k < s->in[t].n; k++)
            if (s->in[t].lab[k] >= 0) count[s->in[t].lab[k]]++;
    }
    if (arrow < len) {
        if ((st = parse_term(n, eq + arrow + 2, len - arrow - 2, &s->out, err))) return st;
        int seen[EIN_MAXL] = {0};
        for (int k = 0; k < s->out.n; k++) {
            int id = s->out.lab[k];
            if (id < 0) continue;
            if (!count[id]) return wm_node_err(n, err, WM_ERR_INPUT, "output label '%c' is in no input", id < 26 ? 'A' + id : 'a' + id - 26);
            if (seen[id]++) return wm_node_err(n, err, WM_ERR_INPUT, "output label repeated");
        }
        if (s->out.ell && !any_ell) return wm_node_err(n, err, WM_ERR_INPUT, "output has an ellipsis the inputs lack");
    } else { /* implicit: ellipsis dims, then the labels used once, in alphabetical (ASCII) order */
        memset(&s->out, 0, sizeof s->out);
        if (any_ell) s->out.lab[s->out.n++] = -1, s->out.ell = 1;
        for (int id = 0; id < 52; id++)
            if (count[id] == 1) {
                if (s->out.n > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output rank over %d", WM_MAX_RANK);
                s->out.lab[s->out.n++] = (int8_t)id;
            }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- shapes (infer) */

typedef struct eop {
    int rank;
    int lab[EIN_MAXL];
    int64_t dim[EIN_MAXL];
    void *data;
} eop;

/* Label ids of term t for an input of rank r with E ellipsis dims in all (ids EIN_ELL + (E - e) + j). */
static int expand_term(const ein_term *t, int r, int E, int *lab) {
    int letters = t->n - t->ell, e = r - letters, k = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->lab[i] >= 0) lab[k++] = t->lab[i];
        else
            for (int j = 0; j < e; j++) lab[k++] = EIN_ELL + (E - e) + j;
    }
    return k;
}

/* Ellipsis width E and the size of every label; output dims into out (NULL: skip). */
static wm_status ein_shapes(const wm_node *n, wm_tensor *const *in, int *E, int64_t *size, wm_tensor *out, wm_error *err) {
    const ein_state *s = n->state;
    *E = 0;
    for (int t = 0; t < s->n_in; t++) {
        int letters = s->in[t].n - s->in[t].ell, r = in[t]->rank;
        if (s->in[t].ell ? r < letters : r != letters)
            return wm_node_err(n, err, WM_ERR_INPUT, "input %d has rank %d, its term has %d labels%s", t, r, letters,
                               s->in[t].ell ? " and an ellipsis" : "");
        if (s->in[t].ell && r - letters > *E) *E = r - letters;
    }
    for (int l = 0; l < EIN_MAXL; l++) size[l] = -1;
    for (int t = 0; t < s->n_in; t++) {
        int lab[EIN_MAXL];
        int k = expand_term(&s->in[t], in[t]->rank, *E, lab);
        for (int i = 0; i < k; i++) {
            int64_t d = in[t]->dims[i];
            int64_t *sz = &size[lab[i]];
            if (*sz < 0 || *sz == 1) *sz = d; /* size 1 broadcasts */
            else if (d != *sz && d != 1)
                return wm_node_err(n, err, WM_ERR_INPUT, "input %d dim %d is %lld, the label has size %lld elsewhere", t, i,
                                   (long long)d, (long long)*sz);
        }
    }
    if (out) {
        int lab[EIN_MAXL];
        int k = expand_term(&s->out, s->out.n - s->out.ell + (s->out.ell ? *E : 0), *E, lab);
        if (k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output rank over %d", WM_MAX_RANK);
        out->rank = k;
        for (int i = 0; i < k; i++) out->dims[i] = size[lab[i]] < 0 ? 1 : size[lab[i]];
    }
    return WM_OK;
}

static wm_status einsum_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int E;
    int64_t size[EIN_MAXL];
    return ein_shapes(n, in, &E, size, out[0], err);
}

/* ---------------------------------------------------------------- steps */

typedef struct ein_run {
    wm_exec *x;
    int dry;          /* only count scratch bytes */
    int32_t ct;
    size_t es;
    uint8_t *ws;
    size_t used;
} ein_run;

static void *scratch(ein_run *r, uint64_t numel) {
    size_t b = ((size_t)(numel ? numel : 1) * r->es + 63) & ~(size_t)63;
    void *p = r->dry ? NULL : r->ws + r->used;
    r->used += b;
    return p;
}

static uint64_t op_numel(const eop *o) {
    uint64_t m = 1;
    for (int i = 0; i < o->rank; i++) m *= (uint64_t)o->dim[i];
    return m;
}

static int op_has(const eop *o, int l) {
    for (int i = 0; i < o->rank; i++)
        if (o->lab[i] == l) return 1;
    return 0;
}

/* Permutes o's dims to the label order want (a permutation of o's labels) into new scratch. */
static wm_status op_permute(ein_run *r, eop *o, const int *want) {
    int64_t perm[WM_MAX_RANK];
    int ident = 1;
    if (o->rank > WM_MAX_RANK) return WM_ERR_UNSUPPORTED;
    for (int i = 0; i < o->rank; i++) {
        for (int j = 0; j < o->rank; j++)
            if (o->lab[j] == want[i]) perm[i] = j;
        ident &= perm[i] == i;
    }
    if (ident) return WM_OK;
    void *dst = scratch(r, op_numel(o));
    int64_t dims[WM_MAX_RANK];
    for (int i = 0; i < o->rank; i++) dims[i] = o->dim[i];
    if (!r->dry) wm_transpose(o->data, dst, r->es, o->rank, dims, perm, r->x);
    for (int i = 0; i < o->rank; i++) o->lab[i] = want[i], o->dim[i] = dims[perm[i]];
    o->data = dst;
    return WM_OK;
}

/* Sums out the labels of o for which drop[label] is set. */
static wm_status op_sum_out(ein_run *r, eop *o, const uint8_t *drop) {
    int want[EIN_MAXL], k = 0, nk;
    uint64_t keep = 1, red = 1;
    for (int i = 0; i < o->rank; i++)
        if (!drop[o->lab[i]]) want[k++] = o->lab[i], keep *= (uint64_t)o->dim[i];
    nk = k;
    if (nk == o->rank) return WM_OK;
    for (int i = 0; i < o->rank; i++)
        if (drop[o->lab[i]]) want[k++] = o->lab[i], red *= (uint64_t)o->dim[i];
    wm_status st = op_permute(r, o, want);
    if (st) return st;
    void *dst = scratch(r, keep);
    if (!r->dry)
        for (uint64_t i = 0; i < keep; i++) {
            if (r->ct == WM_DT_INT64) {
                const int64_t *s = (const int64_t *)o->data + i * red;
                int64_t acc = 0;
                for (uint64_t j = 0; j < red; j++) acc = (int64_t)((uint64_t)acc + (uint64_t)s[j]);
                ((int64_t *)dst)[i] = acc;
            } else {
                double acc = 0;
                if (r->ct == WM_DT_FLOAT) {
                    const float *s = (const float *)o->data + i * red;
                    for (uint64_t j = 0; j < red; j++) acc += s[j];
                    ((float *)dst)[i] = (float)acc;
                } else {
                    const double *s = (const double *)o->data + i * red;
                    for (uint64_t j = 0; j < red; j++) acc += s[j];
                    ((double *)dst)[i] = acc;
                }
            }
        }
    o->rank = nk;
    o->data = dst;
    return WM_OK;
}

/* Input t as a clean operand: compute type, diagonals taken, size-1 dims dropped. */
static wm_status op_load(ein_run *r, const wm_node *n, const wm_tensor *t, int ti, int E, eop *o) {
    const ein_state *s = n->state;
    int lab[EIN_MAXL];
    int k = expand_term(&s->in[ti], t->rank, E, lab);
    uint64_t numel = wm_tensor_numel(t);
    void *data = t->data;
    if (t->dtype != r->ct) {
        data = scratch(r, numel);
        if (!r->dry) wm_convert(t->dtype, t->data, r->ct, data, numel);
    }
    int64_t st[WM_MAX_RANK];
    for (int64_t m = 1, d = k - 1; d >= 0; d--) {
        st[d] = m;
        m *= t->dims[d];
    }
    /* unique labels with summed strides (a repeated label walks the diagonal), size-1 dims left out */
    int64_t ustride[EIN_MAXL];
    o->rank = 0;
    for (int i = 0; i < k; i++) {
        if (t->dims[i] == 1) continue;
        int j = 0;
        while (j < o->rank && o->lab[j] != lab[i]) j++;
        if (j == o->rank) {
            o->lab[j] = lab[i];
            o->dim[j] = t->dims[i];
            ustride[j] = 0;
            o->rank++;
        } else if (o->dim[j] != t->dims[i]) {
            return wm_node_err(n, r->x ? r->x->err : NULL, WM_ERR_INPUT, "a repeated label has sizes %lld and %lld in input %d",
                               (long long)o->dim[j], (long long)t->dims[i], ti);
        }
        ustride[j] += st[i];
    }
    int diag = 0;
    for (int j = 0; j < o->rank; j++) {
        int uses = 0;
        for (int i = 0; i < k; i++) uses += lab[i] == o->lab[j] && t->dims[i] != 1;
        diag |= uses > 1;
    }
    if (!diag) {
        o->data = data;
        return WM_OK;
    }
    uint64_t total = op_numel(o);
    void *dst = scratch(r, total);
    if (!r->dry) {
        int64_t idx[EIN_MAXL] = {0};
        for (uint64_t q = 0; q < total; q++) {
            int64_t off = 0;
            for (int j = 0; j < o->rank; j++) off += idx[j] * ustride[j];
            memcpy((uint8_t *)dst + q * r->es, (const uint8_t *)data + (size_t)off * r->es, r->es);
            for (int j = o->rank - 1; j >= 0; j--) {
                if (++idx[j] < o->dim[j]) break;
                idx[j] = 0;
            }
        }
    }
    o->data = dst;
    return WM_OK;
}

typedef struct mm_ctx {
    ein_run *r;
    const void *a, *b;
    void *c;
    int64_t batch, M, N, K;
} mm_ctx;

static void mm_batches(void *arg, int ith, int nth) {
    const mm_ctx *m = arg;
    long lo, hi;
    wm_split((long)m->batch, ith, nth, &lo, &hi);
    for (long b = lo; b < hi; b++) {
        if (m->r->ct == WM_DT_FLOAT) {
            wm_gemm_args g = {.M = m->M, .N = m->N, .K = m->K, .A = (const float *)m->a + b * m->M * m->K, .lda = m->K,
                              .B = (const float *)m->b + b * m->K * m->N, .ldb = m->N,
                              .C = (float *)m->c + b * m->M * m->N, .ldc = m->N, .alpha = 1, .beta = 0};
            wm_sgemm_st(m->r->x, ith, &g);
            continue;
        }
        for (int64_t i = 0; i < m->M; i++)
            for (int64_t j = 0; j < m->N; j++) {
                int64_t ao = (b * m->M + i) * m->K, bo = b * m->K * m->N + j;
                if (m->r->ct == WM_DT_DOUBLE) {
                    double acc = 0;
                    for (int64_t q = 0; q < m->K; q++) acc += ((const double *)m->a)[ao + q] * ((const double *)m->b)[bo + q * m->N];
                    ((double *)m->c)[(b * m->M + i) * m->N + j] = acc;
                } else {
                    uint64_t acc = 0;
                    for (int64_t q = 0; q < m->K; q++)
                        acc += (uint64_t)((const int64_t *)m->a)[ao + q] * (uint64_t)((const int64_t *)m->b)[bo + q * m->N];
                    ((int64_t *)m->c)[(b * m->M + i) * m->N + j] = (int64_t)acc;
                }
            }
    }
}

/* A <- contraction of A and B over their shared labels not in keep. */
static wm_status op_contract(ein_run *r, eop *a, eop *b, const uint8_t *keep) {
    int la[EIN_MAXL], lb[EIN_MAXL], lc[EIN_MAXL], na = 0, nb = 0, nc = 0;
    int64_t batch = 1, M = 1, N = 1, K = 1;
    for (int i = 0; i < a->rank; i++) /* batch labels */
        if (op_has(b, a->lab[i]) && keep[a->lab[i]]) la[na++] = lb[nb++] = lc[nc++] = a->lab[i], batch *= a->dim[i];
    for (int i = 0; i < a->rank; i++) /* M */
        if (!op_has(b, a->lab[i])) la[na++] = lc[nc++] = a->lab[i], M *= a->dim[i];
    for (int i = 0; i < a->rank; i++) /* K */
        if (op_has(b, a->lab[i]) && !keep[a->lab[i]]) la[na++] = lb[nb++] = a->lab[i], K *= a->dim[i];
    for (int i = 0; i < b->rank; i++) /* N */
        if (!op_has(a, b->lab[i])) lb[nb++] = lc[nc++] = b->lab[i], N *= b->dim[i];
    if (nc > WM_MAX_RANK) return WM_ERR_UNSUPPORTED;
    wm_status st = op_permute(r, a, la);
    if (!st) st = op_permute(r, b, lb);
    if (st) return st;
    int64_t cd[EIN_MAXL];
    for (int i = 0; i < nc; i++)
        for (int j = 0; j < a->rank + b->rank; j++) {
            const eop *o = j < a->rank ? a : b;
            int jj = j < a->rank ? j : j - a->rank;
            if (o->lab[jj] == lc[i]) cd[i] = o->dim[jj];
        }
    void *c = scratch(r, (uint64_t)(batch * M * N));
    if (!r->dry) {
        mm_ctx m = {r, a->data, b->data, c, batch, M, N, K};
        if (K == 0) {
            memset(c, 0, (size_t)(batch * M * N) * r->es);
        } else if (r->ct == WM_DT_FLOAT && batch == 1) {
            wm_gemm_args g = {.M = M, .N = N, .K = K, .A = a->data, .lda = K, .B = b->data, .ldb = N, .C = c, .ldc = N,
                              .alpha = 1, .beta = 0};
            if (M && N) wm_sgemm(r->x, &g);
        } else if (batch && M && N) {
            int nth = batch >= 2 && batch * M * N * (K ? K : 1) >= 32768 ? r->x->nth : 1;
            if (nth > batch) nth = (int)batch;
            wm_pool_run(r->x->pool, mm_batches, &m, nth);
        }
    }
    a->rank = nc;
    for (int i = 0; i < nc; i++) a->lab[i] = lc[i], a->dim[i] = cd[i];
    a->data = c;
    return WM_OK;
}

/* The whole evaluation (dry: scratch size only). */
static wm_status ein_eval(const wm_node *n, wm_tensor *const *in, wm_tensor *out, ein_run *r) {
    const ein_state *s = n->state;
    wm_error *err = r->x ? r->x->err : NULL;
    int E;
    int64_t size[EIN_MAXL];
    wm_status st = ein_shapes(n, in, &E, size, NULL, err);
    if (st) return st;
    int olab[EIN_MAXL];
    int ok = expand_term(&s->out, s->out.n - s->out.ell + (s->out.ell ? E : 0), E, olab);
    uint8_t in_out[EIN_MAXL] = {0};
    for (int i = 0; i < ok; i++) in_out[olab[i]] = 1;
    eop ops[EIN_MAXTERMS];
    ops[0].rank = 0;
    for (int t = 0; t < s->n_in; t++)
        if ((st = op_load(r, n, in[t], t, E, &ops[t]))) return st;
    /* uses[t][l]: label l appears in operand t */
    for (int t = 0; t < s->n_in; t++) { /* sum out labels only operand t has */
        uint8_t drop[EIN_MAXL] = {0};
        for (int i = 0; i < ops[t].rank; i++) {
            int l = ops[t].lab[i], other = in_out[l];
            for (int u = 0; u < s->n_in && !other; u++) other = u != t && op_has(&ops[u], l);
            drop[l] = !other;
        }
        if ((st = op_sum_out(r, &ops[t], drop))) return st;
    }
    eop *a = &ops[0];
    for (int t = 1; t < s->n_in; t++) {
        uint8_t keep[EIN_MAXL];
        memcpy(keep, in_out, sizeof keep);
        for (int u = t + 1; u < s->n_in; u++)
            for (int i = 0; i < ops[u].rank; i++) keep[ops[u].lab[i]] = 1;
        uint8_t drop[EIN_MAXL] = {0};
        for (int i = 0; i < a->rank; i++) drop[a->lab[i]] = !keep[a->lab[i]] && !op_has(&ops[t], a->lab[i]);
        if ((st = op_sum_out(r, a, drop))) return st;
        memset(drop, 0, sizeof drop);
        for (int i = 0; i < ops[t].rank; i++) drop[ops[t].lab[i]] = !keep[ops[t].lab[i]] && !op_has(a, ops[t].lab[i]);
        if ((st = op_sum_out(r, &ops[t], drop))) return st;
        if ((st = op_contract(r, a, &ops[t], keep)))
            return st == WM_ERR_UNSUPPORTED ? wm_node_err(n, err, st, "an intermediate has rank over %d", WM_MAX_RANK) : st;
    }
    /* output order; labels the result lacks have size 1 */
    int want[EIN_MAXL], k = 0;
    for (int i = 0; i < ok; i++)
        if (op_has(a, olab[i])) want[k++] = olab[i];
    if (k != a->rank) return wm_node_err(n, err, WM_ERR_INTERNAL, "einsum result has labels the output lacks");
    if ((st = op_permute(r, a, want)))
        return wm_node_err(n, err, st, "an intermediate has rank over %d", WM_MAX_RANK);
    if (!r->dry) {
        uint64_t total = wm_tensor_numel(out);
        if (op_numel(a) != total) return wm_node_err(n, err, WM_ERR_INTERNAL, "einsum result size mismatch");
        wm_convert(r->ct, a->data, out->dtype, out->data, total);
    }
    return WM_OK;
}

static size_t einsum_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)nth;
    const ein_state *s = n->state;
    ein_run r = {.dry = 1, .ct = s->ct, .es = wm_dtype_size(s->ct)};
    if (ein_eval(n, in, out[0], &r)) return 0;
    return r.used;
}

static wm_status einsum_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const ein_state *s = n->state;
    ein_run r = {.x = x, .ct = s->ct, .es = wm_dtype_size(s->ct), .ws = x->ws};
    return ein_eval(n, in, out[0], &r);
}

static const wm_op ops[] = {
    {"", "Einsum", 12, 0, einsum_init, einsum_infer, einsum_run, einsum_workspace, 0, 0},
};

const wm_op_table wm_ops_einsum = {ops, sizeof ops / sizeof ops[0]};
