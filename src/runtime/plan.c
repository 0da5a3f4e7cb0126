/*
 * plan.c - one plan per set of input shapes: dims of every value, shape
 * arithmetic evaluated ahead, the nodes left to run, and activation memory
 * assigned from liveness (views share their input's bytes, elementwise ops
 * may write over an input that dies with them; blocks placed greedily,
 * largest first, where no block live at the same time overlaps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/sysmem.h"
#include "ops/int_math.h"
#include "runtime/session_impl.h"

#define AHEAD_MAX_BYTES (1u << 18) /* values evaluated ahead stay small: shape arithmetic, not weights */
#define ALIGN 64

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

void wm_plan_free(wm_plan *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_ahead; i++) free(p->ahead[i]);
    free(p->ahead);
    free(p->key);
    free(p->t);
    free(p->loc);
    free(p->root);
    free(p->run);
    free(p->io);
    free(p->io_off);
    free(p->kept);
    free(p);
}

static size_t make_key(const wm_session *s, const wm_tensor *inputs, int64_t *key) {
    size_t k = 0;
    for (size_t i = 0; i < s->n_inputs; i++) {
        if (key) key[k] = inputs[i].rank;
        k++;
        for (int d = 0; d < inputs[i].rank; d++) {
            if (key) key[k] = inputs[i].dims[d];
            k++;
        }
    }
    return k;
}

/* Points in/out at the plan's tensors of node i's values. */
static void node_io(const wm_session *s, wm_plan *p, int i, wm_tensor **in, wm_tensor **out) {
    const wm_node *n = &s->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
        int v = wm_session_value(s, n->proto->input[k]);
        in[k] = v >= 0 ? &p->t[v] : NULL;
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = wm_session_value(s, n->proto->output[k]);
        out[k] = v >= 0 ? &p->t[v] : NULL;
    }
}

/* Evaluates node i now (all inputs known): outputs go to buffers the plan owns. */
static wm_status eval_ahead(wm_session *s, wm_plan *p, int i, wm_tensor **in, wm_tensor **out, wm_error *err) {
    const wm_node *n = &s->nodes[i];
    for (int k = 0; k < n->n_out; k++) {
        if (!out[k]) continue;
        void *b = malloc(align_up(wm_tensor_nbytes(out[k])) + ALIGN);
        void **na = realloc(p->ahead, (p->n_ahead + 1) * sizeof *na);
        if (!b || !na) {
            free(b);
            if (na) p->ahead = na;
            return wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
        }
        p->ahead = na;
        p->ahead[p->n_ahead++] = b;
        out[k]->data = b;
        int v = wm_session_value(s, n->proto->output[k]);
        p->loc[v].kind = WM_LOC_FIXED;
        p->loc[v].ptr = b;
    }
    size_t ws = wm_node_workspace(s, i, in, out);
    void *wsp = NULL;
    wm_status st = ws ? wm_budget_take(s, n, 0, ws, "a workspace", err) : WM_OK;
    if (st) return st;
    if (ws && !(wsp = aligned_alloc(ALIGN, align_up(ws)))) st = wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
    if (!st) st = wm_node_exec(s, i, in, out, wsp, ws, err);
    free(wsp);
    wm_budget_give(s, ws);
    return st;
}

static int known(const wm_plan *p, const wm_tensor *t) { return t && p->loc[t - p->t].kind == WM_LOC_FIXED; }

/* Rank and dims of node n's outputs, and that each fits the memory budget (bytes by checked multiplication). */
static wm_status check_dims(wm_session *s, const wm_node *n, wm_tensor **out, wm_error *err) {
    for (int k = 0; k < n->n_out; k++) {
        if (!out[k]) continue;
        if (out[k]->rank < 0 || out[k]->rank > WM_MAX_RANK)
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output %d has rank %d (at most %d)", k, out[k]->rank,
                               WM_MAX_RANK);
        int fit = wm_dims_fit(out[k]->dims, out[k]->rank, 1ull << 46); /* empty ones too: see ops/int_math.h */
        if (fit < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output %d has a negative dim", k);
        if (!fit) return wm_node_err(n, err, WM_ERR_INPUT, "output %d is too large", k);
        uint64_t nb;
        wm_status st = wm_budget_value(s, n, k, out[k], s->mem_size, &nb, err); /* the arena it would replace */
        if (st) return st;
    }
    return WM_OK;
}

/*
 * The plan's activations (arena and workspace, need bytes) against the budget, the session's current arena (which
 * they replace) not counted: the message names the largest value and the node with the largest workspace.
 */
static wm_status plan_fits(wm_session *s, const wm_plan *p, uint64_t need, wm_error *err) {
    if (wm_budget_fits(s, s->mem_size, need)) return WM_OK;
    int big = -1;
    uint64_t big_nb = 0;
    for (size_t v = 0; v < s->n_vals; v++)
        if (p->loc[v].kind == WM_LOC_ARENA && p->root[v] == (int)v && wm_tensor_nbytes(&p->t[v]) >= big_nb)
            big = (int)v, big_nb = wm_tensor_nbytes(&p->t[v]);
    char msg[900], a[32], b[32], c[32], shape[256], more[400] = "";
    if (big >= 0 && s->vals[big].producer >= 0) {
        const wm_node *n = &s->nodes[s->vals[big].producer];
        snprintf(more, sizeof more, "; the largest value is '%s' %s of node '%s' (%s), %s", s->vals[big].name,
                 wm_budget_shape(&p->t[big], shape, sizeof shape), wm_node_label(n), n->proto->op_type,
                 wm_fmt_size(big_nb, c, sizeof c));
    }
    if (p->ws_node >= 0) {
        const wm_node *n = &s->nodes[p->ws_node];
        size_t k = strlen(more);
        snprintf(more + k, sizeof more - k, "; the largest workspace is that of node '%s' (%s)", wm_node_label(n),
                 n->proto->op_type);
    }
    snprintf(msg, sizeof msg, "plan: the activations need %s (arena %s + workspace %s%s)",
             wm_fmt_size(need, a, sizeof a), wm_fmt_size(p->arena_bytes, b, sizeof b),
             wm_fmt_size(p->ws_bytes, c, sizeof c), more);
    wm_budget_over(s, s->mem_size, msg, sizeof msg);
    return wm_err(err, WM_ERR_INPUT, "%s", msg);
}

/* Liveness and placement of the run nodes' values into one arena. */
static wm_status assign_memory(wm_session *s, wm_plan *p, wm_error *err) {
    size_t nv = s->n_vals;
    int nr = p->n_run;
    int *root = malloc(nv * sizeof *root), *lastv = malloc(nv * sizeof *lastv);
    int *rdef = malloc(nv * sizeof *rdef), *rlast = malloc(nv * sizeof *rlast);
    uint64_t *rsize = calloc(nv, sizeof *rsize), *roff = calloc(nv, sizeof *roff);
    int *order = malloc(nv * sizeof *order);
    wm_status st = WM_OK;
    if (!root || !lastv || !rdef || !rlast || !rsize || !roff || !order) {
        st = wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
        goto done;
    }
    for (size_t v = 0; v < nv; v++) root[v] = -1, lastv[v] = -1;
    /* last use of every value by a run node; graph outputs live to the end */
    for (int j = 0; j < nr; j++) {
        const wm_node *n = &s->nodes[p->run[j]];
        for (int k = 0; k < n->n_in; k++) {
            int v = wm_session_value(s, n->proto->input[k]);
            if (v >= 0) lastv[v] = j;
        }
    }
    for (size_t i = 0; i < s->n_outputs; i++) lastv[s->out_val[i]] = nr;
    if (s->opts.keep_values) /* every value lives to the end: nothing is overwritten */
        for (size_t v = 0; v < nv; v++) lastv[v] = nr;
    for (int j = 0; j < nr; j++) {
        int i = p->run[j];
        const wm_node *n = &s->nodes[i];
        int u = n->n_in > 0 ? wm_session_value(s, n->proto->input[0]) : -1;
        /* the input whose buffer output 0 may take over when it dies here */
        int ui = (n->op->flags & WM_OP_INPLACE) ? u
                 : (n->op->flags & WM_OP_INPLACE_IN3) && n->n_in > 3 ? wm_session_value(s, n->proto->input[3])
                                                                      : -1;
        if (ui >= 0 && !(n->op->flags & WM_OP_INPLACE)) /* not elementwise: no other input in those bytes */
            for (int k = 0; k < n->n_in && ui >= 0; k++) {
                int v = k == 3 ? -1 : wm_session_value(s, n->proto->input[k]);
                if (v >= 0 && root[v] == root[ui]) ui = -1;
            }
        for (int k = 0; k < n->n_out; k++) {
            int w = wm_session_value(s, n->proto->output[k]);
            if (w < 0 || p->loc[w].kind == WM_LOC_STEADY) continue; /* kept outside the arena (steady.c) */
            uint64_t nb = wm_tensor_nbytes(&p->t[w]);
            int is_out = s->vals[w].output_index >= 0;
            int ur = u >= 0 ? root[u] : -1;
            /* a view of a planned value takes its bytes, a graph output too (logits = Reshape(Gemm output): the
             * Gemm writes the output, or a buffer bound to it); views of constants and inputs only inside */
            int view_out = is_out && u >= 0 && p->loc[u].kind == WM_LOC_ARENA && s->vals[u].output_index < 0;
            if (k == 0 && u >= 0 && (!is_out || view_out) && (n->op->flags & WM_OP_ALIAS)) {
                if (p->loc[u].kind == WM_LOC_ARENA) {
                    root[w] = ur;
                    if (lastv[w] > rlast[ur]) rlast[ur] = lastv[w];
                    if (nb > rsize[ur]) rsize[ur] = nb;
                    p->loc[w].kind = WM_LOC_ARENA;
                    continue;
                }
                p->loc[w] = p->loc[u]; /* a view of a constant or of a caller's input */
                continue;
            }
            int ri = ui >= 0 ? root[ui] : -1;
            if (k == 0 && ui >= 0 && !is_out && p->loc[ui].kind == WM_LOC_ARENA && rlast[ri] == j && rsize[ri] == nb &&
                wm_tensor_nbytes(&p->t[ui]) == nb && p->t[ui].dtype == p->t[w].dtype) {
                root[w] = ri;
                rlast[ri] = lastv[w] > j ? lastv[w] : j;
                p->loc[w].kind = WM_LOC_ARENA;
                continue;
            }
            root[w] = w;
            rdef[w] = j;
            rlast[w] = lastv[w] > j ? lastv[w] : j;
            rsize[w] = nb;
            p->loc[w].kind = WM_LOC_ARENA;
        }
    }
    /* place roots, largest first */
    int nroots = 0;
    for (size_t v = 0; v < nv; v++)
        if (root[v] == (int)v) order[nroots++] = (int)v;
    for (int a = 1; a < nroots; a++) { /* insertion sort by size desc, stable by id */
        int x = order[a], b = a - 1;
        while (b >= 0 && rsize[order[b]] < rsize[x]) order[b + 1] = order[b], b--;
        order[b + 1] = x;
    }
    uint64_t total = 0, naive = 0;
    int *placed = malloc((size_t)(nroots ? nroots : 1) * sizeof *placed);
    if (!placed) {
        st = wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
        goto done;
    }
    int np = 0;
    for (int a = 0; a < nroots; a++) {
        int r = order[a];
        uint64_t sz = align_up(rsize[r] ? rsize[r] : 1), off = 0;
        naive += sz;
        /* lowest offset clear of every placed block live at the same time (blocks sorted by offset as we go) */
        for (int again = 1; again;) {
            again = 0;
            for (int b = 0; b < np; b++) {
                int q = placed[b];
                if (rlast[q] < rdef[r] || rlast[r] < rdef[q]) continue;
                uint64_t qs = align_up(rsize[q] ? rsize[q] : 1);
                if (off < roff[q] + qs && roff[q] < off + sz) {
                    off = roff[q] + qs;
                    again = 1;
                }
            }
        }
        roff[r] = off;
        placed[np++] = r;
        if (off + sz > total) total = off + sz;
    }
    free(placed);
    for (size_t v = 0; v < nv; v++) {
        if (root[v] >= 0) p->loc[v].off = roff[root[v]];
        p->root[v] = root[v];
    }
    p->arena_bytes = total;
    p->naive_bytes = naive;
done:
    free(root);
    free(lastv);
    free(rdef);
    free(rlast);
    free(rsize);
    free(roff);
    free(order);
    return st;
}

static wm_status make_plan_nodes(wm_session *s, wm_plan *p, const wm_tensor *inputs, uint8_t *vsteady,
                                 wm_error *err);

static wm_status make_plan(wm_session *s, const wm_tensor *inputs, wm_plan *p, wm_error *err) {
    size_t nv = s->n_vals;
    p->t = calloc(nv ? nv : 1, sizeof *p->t);
    p->loc = calloc(nv ? nv : 1, sizeof *p->loc);
    p->root = malloc((nv ? nv : 1) * sizeof *p->root);
    for (size_t v = 0; p->root && v < nv; v++) p->root[v] = -1;
    p->run = malloc((s->n_nodes ? s->n_nodes : 1) * sizeof *p->run);
    p->kept = calloc(s->n_nodes ? s->n_nodes : 1, 1);
    uint8_t *vsteady = s->steady.n_in ? calloc(nv ? nv : 1, 1) : NULL; /* per value: from steady inputs */
    if (!p->t || !p->loc || !p->root || !p->run || !p->kept || (s->steady.n_in && !vsteady)) {
        free(vsteady);
        return wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
    }
    wm_status st = make_plan_nodes(s, p, inputs, vsteady, err);
    free(vsteady);
    return st;
}

/* make_plan's walk over the nodes: dims, values evaluated ahead, the run list, kept values (vsteady), memory. */
static wm_status make_plan_nodes(wm_session *s, wm_plan *p, const wm_tensor *inputs, uint8_t *vsteady,
                                 wm_error *err) {
    size_t nv = s->n_vals;
    for (size_t v = 0; v < nv; v++) {
        const wm_val *val = &s->vals[v];
        p->t[v].dtype = val->dtype;
        if (val->kind == WM_VAL_CONST) {
            p->t[v] = val->c;
            p->loc[v].kind = WM_LOC_FIXED;
            p->loc[v].ptr = val->c.data;
        } else if (val->kind == WM_VAL_INPUT) {
            const wm_tensor *in = &inputs[val->input_index];
            wm_set_shape(&p->t[v], in->rank, in->dims);
            p->loc[v].kind = WM_LOC_INPUT;
            p->loc[v].input = val->input_index;
            if (vsteady) vsteady[v] = s->steady.in[val->input_index];
        }
    }
    wm_tensor *in[WM_MAX_IO], *out[WM_MAX_IO];
    size_t n_io = 0;
    for (size_t i = 0; i < s->n_nodes; i++) {
        if (s->folded[i]) continue;
        const wm_node *n = &s->nodes[i];
        node_io(s, p, (int)i, in, out);
        for (int k = 0; k < n->n_in; k++)
            if (in[k] && !known(p, in[k])) in[k]->data = NULL;
        wm_status st = n->op->infer(&s->nodes[i], in, out, err);
        if (st == WM_NEED_DATA) {
            p->eager = 1;
            return WM_OK;
        }
        if (st) return st;
        if ((st = check_dims(s, n, out, err))) return st;
        int all_known = 1;
        uint64_t out_bytes = 0;
        for (int k = 0; k < n->n_in; k++)
            if (in[k] && !known(p, in[k])) all_known = 0;
        for (int k = 0; k < n->n_out; k++)
            if (out[k]) out_bytes += wm_tensor_nbytes(out[k]);
        int ahead = (all_known || (n->op->flags & WM_OP_DIMS_ONLY)) && !(n->op->flags & WM_OP_NOFOLD) &&
                    out_bytes <= AHEAD_MAX_BYTES;
        for (int k = 0; k < n->n_out && ahead; k++) /* a graph output is written per run, not ahead */
            if (out[k] && s->vals[out[k] - p->t].output_index >= 0) ahead = 0;
        if (ahead) {
            if ((st = eval_ahead(s, p, (int)i, in, out, err))) return st;
            continue;
        }
        if (vsteady && wm_steady_kept(s, n, in, out, p->t, vsteady)) {
            int u = n->n_in > 0 && in[0] ? (int)(in[0] - p->t) : -1;
            if ((n->op->flags & WM_OP_ALIAS) && u >= 0 && p->loc[u].kind != WM_LOC_STEADY) {
                /* a view of a steady input: the input's bytes, as any view of an input (assign_memory) */
            } else {
                p->kept[p->n_run] = 1;
                p->n_kept++;
                for (int k = 0; k < n->n_out; k++) {
                    if (!out[k]) continue;
                    int w = (int)(out[k] - p->t);
                    p->loc[w].kind = WM_LOC_STEADY; /* its own kept buffer, or its input's for a view */
                    p->loc[w].input = k == 0 && (n->op->flags & WM_OP_ALIAS) ? p->loc[u].input : w;
                }
            }
        }
        p->run[p->n_run++] = (int)i;
        n_io += (size_t)(n->n_in + n->n_out);
    }
    p->io = malloc((n_io ? n_io : 1) * sizeof *p->io);
    p->io_off = malloc(((size_t)p->n_run + 1) * sizeof *p->io_off);
    p->ws_node = -1;
    if (!p->io || !p->io_off) return wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
    size_t o = 0;
    uint64_t ws = 0;
    for (int j = 0; j < p->n_run; j++) {
        int i = p->run[j];
        const wm_node *n = &s->nodes[i];
        p->io_off[j] = o;
        node_io(s, p, i, p->io + o, p->io + o + n->n_in);
        size_t w = wm_node_workspace(s, i, p->io + o, p->io + o + n->n_in);
        if (w > ws) ws = w, p->ws_node = i;
        o += (size_t)(n->n_in + n->n_out);
    }
    p->io_off[p->n_run] = o;
    p->ws_bytes = ws;
    return assign_memory(s, p, err);
}

wm_status wm_plan_get(wm_session *s, const wm_tensor *inputs, wm_plan **out, wm_error *err) {
    size_t klen = make_key(s, inputs, NULL);
    int64_t kbuf[64], *key = klen <= 64 ? kbuf : malloc(klen * sizeof *key);
    if (!key) return wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
    make_key(s, inputs, key);
    for (size_t i = 0; i < s->n_plans; i++) {
        wm_plan *p = s->plans[i];
        if (p->key_len == klen && !memcmp(p->key, key, klen * sizeof *key)) {
            if (key != kbuf) free(key);
            p->stamp = ++s->clock;
            *out = p;
            return WM_OK;
        }
    }
    wm_plan *p = calloc(1, sizeof *p);
    if (!p) {
        if (key != kbuf) free(key);
        return wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
    }
    p->key_len = klen;
    p->key = malloc((klen ? klen : 1) * sizeof *key);
    if (p->key) memcpy(p->key, key, klen * sizeof *key);
    if (key != kbuf) free(key);
    wm_status st = p->key ? make_plan(s, inputs, p, err) : wm_err(err, WM_ERR_NOMEM, "plan: out of memory");
    if (st) {
        wm_plan_free(p);
        return st;
    }
    uint64_t need = align_up(p->arena_bytes) + align_up(p->ws_bytes);
    if (!p->eager && need > s->mem_size) {
        void *m = NULL;
        /* Regrown by a quarter more when the budget allows: a decoder whose cache grows one position a step (a new
         * plan each step) would otherwise get a fresh buffer, and fault in its pages, every step. */
        uint64_t grow = s->mem_size ? align_up(need + need / 4) : need;
        if (grow > need && !wm_budget_fits(s, s->mem_size, grow)) grow = need;
        if ((st = plan_fits(s, p, need, err)) || grow > SIZE_MAX || !(m = aligned_alloc(ALIGN, (size_t)grow))) {
            if (!st)
                st = wm_err(err, WM_ERR_NOMEM, "plan: cannot allocate %llu bytes of activations",
                            (unsigned long long)need);
            wm_plan_free(p);
            return st;
        }
        wm_budget_take(s, NULL, s->mem_size, grow, "the activations", NULL); /* fits: plan_fits, or checked above */
        free(s->mem);
        s->mem = m;
        s->mem_size = (size_t)grow;
    }
    if (s->n_plans == (size_t)s->opts.max_plans) { /* evict the least recently used */
        size_t lru = 0;
        for (size_t i = 1; i < s->n_plans; i++)
            if (s->plans[i]->stamp < s->plans[lru]->stamp) lru = i;
        if (s->last == s->plans[lru]) s->last = NULL;
        wm_plan_free(s->plans[lru]);
        s->plans[lru] = s->plans[--s->n_plans];
    }
    p->stamp = ++s->clock;
    s->plans[s->n_plans++] = p;
    s->n_plans_made++;
    *out = p;
    return WM_OK;
}
