/* run.c - wm_session_run: check inputs, find the plan, bind buffers, execute. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "ops/int_math.h"
#include "runtime/session_impl.h"

static wm_status check_inputs(const wm_session *s, const wm_tensor *inputs, size_t n, wm_error *err) {
    if (n != s->n_inputs)
        return wm_err(err, WM_ERR_INPUT, "the model takes %zu inputs, %zu given", s->n_inputs, n);
    for (size_t i = 0; i < n; i++) {
        const wm_io_info *io = &s->inputs[i];
        const wm_tensor *t = &inputs[i];
        if (t->dtype != io->dtype)
            return wm_err(err, WM_ERR_INPUT, "input '%s': element type %s given, the model takes %s", io->name,
                          wm_dtype_name(t->dtype), wm_dtype_name(io->dtype));
        if (t->rank < 0 || t->rank > WM_MAX_RANK)
            return wm_err(err, WM_ERR_INPUT, "input '%s': rank %d is out of range", io->name, t->rank);
        if (io->rank >= 0 && t->rank != io->rank)
            return wm_err(err, WM_ERR_INPUT, "input '%s': rank %d given, the model takes rank %d", io->name, t->rank,
                          io->rank);
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 0) return wm_err(err, WM_ERR_INPUT, "input '%s': dim %d is negative", io->name, d);
            if (io->rank >= 0 && io->dims[d] >= 0 && io->dims[d] != t->dims[d])
                return wm_err(err, WM_ERR_INPUT, "input '%s': dim %d is %lld, the model takes %lld", io->name, d,
                              (long long)t->dims[d], (long long)io->dims[d]);
        }
        if (!wm_dims_fit(t->dims, t->rank, 1ull << 46)) /* an empty input's other dims too: ops stride over them */
            return wm_err(err, WM_ERR_INPUT, "input '%s' has too many elements", io->name);
        if (!t->data && wm_tensor_numel(t) > 0) return wm_err(err, WM_ERR_INPUT, "input '%s' has no data", io->name);
    }
    return WM_OK;
}

/* The run's next buffer of n bytes for node nd (what: the message's name of it): an eager run allocates in the
 * same order every time, so the k-th request takes the k-th buffer of the runs before when it is large enough (no
 * allocation once sizes settle). A new buffer is taken from the budget (the one it replaces given back). */
static wm_status eager_alloc(wm_session *s, const wm_node *nd, uint64_t n, const char *what, void **out,
                             wm_error *err) {
    size_t k = s->eager_next;
    *out = NULL;
    if (k < s->n_eager_bufs && s->eager_size[k] >= n) {
        s->eager_next++;
        *out = s->eager_bufs[k];
        return WM_OK;
    }
    if (k == s->cap_eager_bufs) {
        size_t cap = s->cap_eager_bufs ? 2 * s->cap_eager_bufs : 64;
        void **nb = realloc(s->eager_bufs, cap * sizeof *nb);
        if (nb) s->eager_bufs = nb;
        uint64_t *ns = nb ? realloc(s->eager_size, cap * sizeof *ns) : NULL;
        if (!ns) return wm_err(err, WM_ERR_NOMEM, "run: out of memory");
        s->eager_size = ns;
        s->cap_eager_bufs = cap;
    }
    uint64_t size = ((n ? n : 1) + 63) & ~(uint64_t)63, old = k < s->n_eager_bufs ? s->eager_size[k] : 0;
    wm_status st = wm_budget_take(s, nd, old, size, what, err);
    if (st) return st;
    void *p = size <= SIZE_MAX ? aligned_alloc(64, (size_t)size) : NULL;
    if (!p) {
        wm_budget_take(s, NULL, size, old, "", NULL); /* back as it was */
        return wm_err(err, WM_ERR_NOMEM, "run: out of memory");
    }
    if (k < s->n_eager_bufs) free(s->eager_bufs[k]);
    else s->n_eager_bufs++;
    s->eager_bufs[k] = p, s->eager_size[k] = size;
    s->eager_next++;
    s->run_allocs++;
    *out = p;
    return WM_OK;
}

/* Data-dependent shapes: infer with real data and allocate node by node. */
static wm_status run_eager(wm_session *s, wm_plan *p, const wm_tensor *inputs, wm_error *err) {
    s->eager_next = 0;
    for (size_t v = 0; v < s->n_vals; v++) {
        const wm_val *val = &s->vals[v];
        if (val->kind == WM_VAL_CONST) p->t[v] = val->c;
        else if (val->kind == WM_VAL_INPUT) p->t[v] = inputs[val->input_index];
        else {
            memset(&p->t[v], 0, sizeof p->t[v]);
            p->t[v].dtype = val->dtype;
        }
    }
    wm_tensor *in[WM_MAX_IO], *out[WM_MAX_IO];
    for (size_t i = 0; i < s->n_nodes; i++) {
        if (s->folded[i]) continue;
        const wm_node *n = &s->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = wm_session_value(s, n->proto->input[k]);
            in[k] = v >= 0 ? &p->t[v] : NULL;
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = wm_session_value(s, n->proto->output[k]);
            out[k] = v >= 0 ? &p->t[v] : NULL;
        }
        wm_status st = wm_budget_time(s, n, err);
        if (st) return st;
        if ((st = n->op->infer(&s->nodes[i], in, out, err)) == WM_NEED_DATA)
            return wm_node_err(n, err, WM_ERR_INTERNAL, "shape unknown with every input known");
        if (st) return st;
        for (int k = 0; k < n->n_out; k++) {
            if (!out[k]) continue;
            int fit = wm_dims_fit(out[k]->dims, out[k]->rank, 1ull << 46); /* as the plan (runtime/plan.c); the memory budget names the size */
            if (fit < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output %d has a negative dim", k);
            if (!fit) return wm_node_err(n, err, WM_ERR_INPUT, "output %d is too large", k);
            uint64_t nb;
            size_t slot = s->eager_next; /* the buffer of the runs before that this one reuses or replaces */
            if ((st = wm_budget_value(s, n, k, out[k], slot < s->n_eager_bufs ? s->eager_size[slot] : 0, &nb, err)))
                return st;
            if ((st = eager_alloc(s, n, nb, "an output", &out[k]->data, err))) return st;
        }
        size_t ws = wm_node_workspace(s, (int)i, in, out);
        void *wsp = NULL;
        if (ws && (st = eager_alloc(s, n, ws, "a workspace", &wsp, err))) return st;
        if ((st = wm_node_exec(s, (int)i, in, out, wsp, ws, err))) return st;
    }
    return WM_OK;
}

wm_status wm_session_run(wm_session *s, const wm_tensor *inputs, size_t n_inputs, wm_tensor *outputs,
                         size_t n_outputs, wm_error *err) {
    return wm_session_run_bound(s, inputs, n_inputs, outputs, n_outputs, NULL, err);
}

/* Points output i (and every view sharing its block) at the caller's buffer. */
static wm_status bind_output(wm_session *s, wm_plan *p, size_t i, const wm_out_bind *b, wm_error *err) {
    int v = s->out_val[i];
    uint64_t need = wm_tensor_nbytes(&p->t[v]);
    if (need > b->capacity)
        return wm_err(err, WM_ERR_USAGE, "output '%s' needs %llu bytes, the bound buffer has %llu", s->outputs[i].name,
                      (unsigned long long)need, (unsigned long long)b->capacity);
    if (p->loc[v].kind != WM_LOC_ARENA || p->eager) return WM_OK; /* copied after the run */
    int r = p->root[v];
    for (size_t u = 0; u < s->n_vals; u++)
        if (p->root[u] == r && p->loc[u].kind == WM_LOC_ARENA) p->t[u].data = b->data;
    return WM_OK;
}

static wm_status run_bound(wm_session *s, const wm_tensor *inputs, size_t n_inputs, wm_tensor *outputs,
                           size_t n_outputs, const wm_out_bind *bind, wm_error *err);

wm_status wm_session_run_bound(wm_session *s, const wm_tensor *inputs, size_t n_inputs, wm_tensor *outputs,
                               size_t n_outputs, const wm_out_bind *bind, wm_error *err) {
    wm_status st = run_bound(s, inputs, n_inputs, outputs, n_outputs, bind, err);
    /* a failed run names the model file (once: a subgraph's run reports through its parent's) */
    if (st && !s->parent && s->model && s->model->path) wm_err_prefix(err, "%s", s->model->path);
    return st;
}

static wm_status run_bound(wm_session *s, const wm_tensor *inputs, size_t n_inputs, wm_tensor *outputs,
                           size_t n_outputs, const wm_out_bind *bind, wm_error *err) {
    wm_status st = check_inputs(s, inputs, n_inputs, err);
    if (st) return st;
    wm_budget_start(s);
    if (n_outputs > s->n_outputs)
        return wm_err(err, WM_ERR_USAGE, "%zu outputs asked, the model has %zu", n_outputs, s->n_outputs);
    wm_plan *p;
    if ((st = wm_plan_get(s, inputs, &p, err))) return st;
    s->last = p;
    s->steady.skipped = 0;
    if (p->eager) {
        if ((st = run_eager(s, p, inputs, err))) return st;
    } else {
        uint8_t *mem = s->mem;
        for (size_t v = 0; v < s->n_vals; v++) {
            const wm_loc *l = &p->loc[v];
            switch (l->kind) {
            case WM_LOC_ARENA: p->t[v].data = mem + l->off; break;
            case WM_LOC_FIXED: p->t[v].data = l->ptr; break;
            case WM_LOC_INPUT: p->t[v].data = inputs[l->input].data; break;
            default: break;
            }
        }
        int run_kept;
        if ((st = wm_steady_bind(s, p, inputs, &run_kept, err))) return st;
        for (size_t i = 0; bind && i < n_outputs; i++)
            if (bind[i].data && (st = bind_output(s, p, i, &bind[i], err))) return st;
        void *ws = mem ? mem + ((p->arena_bytes + 63) & ~(uint64_t)63) : NULL; /* no arena: nothing planned to run */
        struct timespec t0, t1;
        int timed = wm_budget_timed(s);
        /* one thread: the profile counts this thread's CPU time (the steady figure on a machine shared with other
           jobs, where wall time mostly measures them); more: wall time, since the pool's threads work too */
        const clockid_t pclk = wm_pool_size(s->pool) == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
        for (int j = 0; j < p->n_run; j++) {
            wm_tensor **io = p->io + p->io_off[j];
            int i = p->run[j];
            if (p->kept[j] && !run_kept) continue; /* its outputs kept from an earlier run (steady.c) */
            if (timed && (st = wm_budget_time(s, &s->nodes[i], err))) return st;
            if (s->prof_ms) clock_gettime(pclk, &t0);
            if ((st = wm_node_exec(s, i, io, io + s->nodes[i].n_in, ws, p->ws_bytes, err))) return st;
            if (s->prof_ms) {
                clock_gettime(pclk, &t1);
                s->prof_ms[i] += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
            }
        }
        s->prof_runs++;
        if (run_kept) wm_steady_done(s, inputs);
    }
    for (size_t i = 0; i < n_outputs; i++) {
        outputs[i] = p->t[s->out_val[i]];
        if (bind && bind[i].data && outputs[i].data != bind[i].data) { /* eager plans, constants, inputs */
            uint64_t nb = wm_tensor_nbytes(&outputs[i]);
            if (nb > bind[i].capacity)
                return wm_err(err, WM_ERR_USAGE, "output '%s' needs %llu bytes, the bound buffer has %llu",
                              s->outputs[i].name, (unsigned long long)nb, (unsigned long long)bind[i].capacity);
            memmove(bind[i].data, outputs[i].data, nb);
            outputs[i].data = bind[i].data;
        }
    }
    return WM_OK;
}
