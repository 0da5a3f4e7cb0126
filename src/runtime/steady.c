/*
 * steady.c - values kept across runs (wm_session_steady_inputs): a graph
 * input the caller marks steady feeds the same bytes run after run (a
 * decoder's cross-attention cache), so what is computed from it and from
 * constants alone (a float16 build's Cast of that cache) need not be
 * computed again each step. The plan (plan.c) marks those nodes "kept" and
 * gives their outputs WM_LOC_STEADY: a buffer of the session's, one per such
 * value (a view of one shares its buffer), outside the arena, so no other
 * value is placed over it and it outlives the plan (a decoder makes a new
 * plan each step as its self cache grows). The run (run.c) executes the kept
 * nodes when the kept values are stale (first run after marking, a steady
 * input fed from another buffer or with other dims) and skips them otherwise.
 * Only constants (initializers, values folded at creation) may join steady
 * inputs in a kept node: a value evaluated ahead from another input's shape
 * could differ from one plan to the next.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/session_impl.h"

#define ALIGN 64

/* Drops the kept values (their buffers given back to the budget). */
static void drop_kept(wm_session *s) {
    for (size_t v = 0; s->steady.buf && v < s->n_vals; v++) {
        if (!s->steady.buf[v]) continue;
        free(s->steady.buf[v]);
        wm_budget_give(s, s->steady.cap[v]);
        s->steady.buf[v] = NULL;
        s->steady.cap[v] = 0;
    }
    s->steady.valid = 0;
}

/* Frees the session's steady state (wm_session_free). */
void wm_steady_free(wm_session *s) {
    drop_kept(s);
    free(s->steady.in);
    free(s->steady.buf);
    free(s->steady.cap);
    free(s->steady.fed);
    free(s->steady.fed_dims);
    memset(&s->steady, 0, sizeof s->steady);
}

wm_status wm_session_steady_inputs(wm_session *s, const char *const *names, size_t n, wm_error *err) {
    uint8_t *mark = calloc(s->n_inputs ? s->n_inputs : 1, 1);
    if (!mark) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        int i = wm_session_input_index(s, names[k]);
        if (i < 0) {
            free(mark);
            return wm_err(err, WM_ERR_INPUT, "steady input '%s' is no graph input", names[k]);
        }
        mark[i] = 1;
    }
    if (n && !s->steady.buf) {
        s->steady.buf = calloc(s->n_vals ? s->n_vals : 1, sizeof *s->steady.buf);
        s->steady.cap = calloc(s->n_vals ? s->n_vals : 1, sizeof *s->steady.cap);
        s->steady.fed = calloc(s->n_inputs ? s->n_inputs : 1, sizeof *s->steady.fed);
        s->steady.fed_dims = calloc((s->n_inputs ? s->n_inputs : 1) * (WM_MAX_RANK + 1), sizeof *s->steady.fed_dims);
        if (!s->steady.buf || !s->steady.cap || !s->steady.fed || !s->steady.fed_dims) {
            free(mark);
            wm_steady_free(s);
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
    }
    drop_kept(s);
    size_t marked = 0;
    for (size_t i = 0; i < s->n_inputs; i++) marked += mark[i];
    int same = s->steady.in ? !memcmp(mark, s->steady.in, s->n_inputs) : !marked;
    if (!same) { /* the plans placed values by the old marks: made again */
        for (size_t i = 0; i < s->n_plans; i++) wm_plan_free(s->plans[i]);
        s->n_plans = 0;
        s->last = NULL;
    }
    free(s->steady.in);
    s->steady.in = mark;
    s->steady.n_in = marked;
    return WM_OK;
}

int wm_steady_kept(const wm_session *s, const wm_node *n, wm_tensor *const *in, wm_tensor *const *out,
                   const wm_tensor *t, uint8_t *vsteady) {
    if (!s->steady.n_in || (n->op->flags & WM_OP_NOFOLD)) return 0;
    int any = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (!in[k]) continue;
        size_t v = (size_t)(in[k] - t);
        if (vsteady[v]) any = 1;
        else if (s->vals[v].kind != WM_VAL_CONST) return 0;
    }
    if (!any) return 0;
    for (int k = 0; k < n->n_out; k++)
        if (out[k] && s->vals[out[k] - t].output_index >= 0) return 0; /* a graph output is written per run */
    for (int k = 0; k < n->n_out; k++)
        if (out[k]) vsteady[out[k] - t] = 1;
    return 1;
}

/* 1 when the steady inputs are fed as when the kept values were computed. */
static int fed_same(const wm_session *s, const wm_tensor *inputs) {
    for (size_t i = 0; i < s->n_inputs; i++) {
        if (!s->steady.in[i]) continue;
        const int64_t *d = s->steady.fed_dims + i * (WM_MAX_RANK + 1);
        if (s->steady.fed[i] != inputs[i].data || d[0] != inputs[i].rank ||
            memcmp(d + 1, inputs[i].dims, (size_t)inputs[i].rank * sizeof *d))
            return 0;
    }
    return 1;
}

wm_status wm_steady_bind(wm_session *s, wm_plan *p, const wm_tensor *inputs, int *run_kept, wm_error *err) {
    *run_kept = 0;
    s->steady.skipped = 0;
    if (!p->n_kept) return WM_OK;
    if (!s->steady.valid || !fed_same(s, inputs)) {
        s->steady.valid = 0;
        *run_kept = 1;
        for (size_t v = 0; v < s->n_vals; v++) { /* each kept value's own buffer, grown to its size */
            if (p->loc[v].kind != WM_LOC_STEADY || p->loc[v].input != (int32_t)v) continue;
            uint64_t nb = (wm_tensor_nbytes(&p->t[v]) + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
            if (nb <= s->steady.cap[v] && s->steady.buf[v]) continue;
            const wm_node *n = &s->nodes[s->vals[v].producer];
            uint64_t sz = nb ? nb : ALIGN;
            void *b = aligned_alloc(ALIGN, (size_t)sz);
            if (!b) return wm_err(err, WM_ERR_NOMEM, "out of memory keeping a value across runs");
            wm_status st = wm_budget_take(s, n, s->steady.cap[v], sz, "a value kept across runs", err);
            if (st) {
                free(b);
                return st;
            }
            free(s->steady.buf[v]);
            s->steady.buf[v] = b;
            s->steady.cap[v] = sz;
        }
    } else {
        s->steady.skipped = (size_t)p->n_kept;
    }
    for (size_t v = 0; v < s->n_vals; v++)
        if (p->loc[v].kind == WM_LOC_STEADY) p->t[v].data = s->steady.buf[p->loc[v].input];
    return WM_OK;
}

void wm_steady_done(wm_session *s, const wm_tensor *inputs) {
    for (size_t i = 0; i < s->n_inputs; i++) {
        if (!s->steady.in[i]) continue;
        int64_t *d = s->steady.fed_dims + i * (WM_MAX_RANK + 1);
        s->steady.fed[i] = inputs[i].data;
        d[0] = inputs[i].rank;
        memcpy(d + 1, inputs[i].dims, (size_t)inputs[i].rank * sizeof *d);
    }
    s->steady.valid = 1;
}
