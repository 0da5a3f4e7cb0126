/* budget.c - bounds on a session's memory and time (see budget.h). */
#include "runtime/budget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/sysmem.h"
#include "runtime/session_impl.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static wm_session *root_of(wm_session *s) {
    while (s->parent) s = s->parent;
    return s;
}

static const wm_budget *budget_of(const wm_session *s) {
    while (s->parent) s = s->parent;
    return &s->budget;
}

wm_status wm_budget_init(wm_budget *b, const wm_session_opts *o, wm_error *err) {
    memset(b, 0, sizeof *b);
    const char *v;
    if (o && o->max_memory) {
        b->limit = o->max_memory;
        b->limit_from = 1;
    } else if ((v = getenv("WM_MAX_MEMORY")) && *v) {
        if (wm_parse_size(v, &b->limit))
            return wm_err(err, WM_ERR_USAGE, "WM_MAX_MEMORY: '%s' is not a size (bytes, or with K, M, G, T)", v);
        b->limit_from = 2;
    } else {
        b->limit = wm_mem_available();
        if (!b->limit) b->limit = UINT64_MAX; /* nothing to read it from: only overflow is refused */
    }
    if (o && o->max_loop_iterations > 0) {
        b->max_iter = o->max_loop_iterations;
    } else if ((v = getenv("WM_MAX_LOOP_ITERATIONS")) && *v) {
        char *end;
        long long x = strtoll(v, &end, 10);
        if (*end || x < 1) return wm_err(err, WM_ERR_USAGE, "WM_MAX_LOOP_ITERATIONS: '%s' is not a count >= 1", v);
        b->max_iter = x;
    } else {
        b->max_iter = WM_LOOP_ITER_DEFAULT;
    }
    if (o && o->timeout_s > 0) {
        b->timeout_s = o->timeout_s;
        b->timeout_from = 1;
    } else if ((v = getenv("WM_TIMEOUT")) && *v) {
        char *end;
        double x = strtod(v, &end);
        if (*end || !(x > 0) || x > 1e9)
            return wm_err(err, WM_ERR_USAGE, "WM_TIMEOUT: '%s' is not a number of seconds > 0", v);
        b->timeout_s = x;
        b->timeout_from = 2;
    }
    return WM_OK;
}

int wm_budget_bytes(const wm_tensor *t, uint64_t *out) {
    uint64_t numel = 1;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)t->dims[d], &numel)) return -1;
    size_t es = wm_dtype_size(t->dtype);
    if (es) return __builtin_mul_overflow(numel, (uint64_t)es, out) ? -1 : 0;
    if (wm_dtype_bits(t->dtype) > 0) return wm_dtype_nbytes(t->dtype, numel, out) ? 0 : -1;
    *out = 0; /* no element type (an omitted value) */
    return 0;
}

char *wm_budget_shape(const wm_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->rank && d < WM_MAX_RANK && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    if (k < n) snprintf(buf + k, n - k, "] %s", wm_dtype_name(t->dtype));
    return buf;
}

int wm_budget_fits(const wm_session *s, uint64_t old, uint64_t bytes) {
    const wm_budget *b = budget_of(s);
    uint64_t base = b->held - (old < b->held ? old : b->held);
    return bytes <= b->limit && base <= b->limit - bytes;
}

void wm_budget_over(const wm_session *s, uint64_t old, char *buf, size_t n) {
    const wm_budget *b = budget_of(s);
    uint64_t base = b->held - (old < b->held ? old : b->held);
    char lim[32], held[32], hold[64] = "";
    wm_fmt_size(b->limit, lim, sizeof lim);
    if (base) snprintf(hold, sizeof hold, " with %s already held", wm_fmt_size(base, held, sizeof held));
    size_t k = strlen(buf);
    if (b->limit_from == 0)
        snprintf(buf + k, n - k, "%s, over the %s of memory available to this process (raise the limit with %s)", hold,
                 lim, WM_HINT_MEMORY);
    else
        snprintf(buf + k, n - k, "%s, over the memory limit of %s set by %s (raise it with %s)", hold, lim,
                 b->limit_from == 1 ? "max_memory (--max-memory)" : "WM_MAX_MEMORY", WM_HINT_MEMORY);
}

/* Sets err to "<msg><over>" naming node n when given. */
static wm_status over(wm_session *s, const wm_node *n, uint64_t old, const char *msg, wm_error *err) {
    char full[900];
    snprintf(full, sizeof full, "%s", msg);
    wm_budget_over(s, old, full, sizeof full);
    return n ? wm_node_err(n, err, WM_ERR_INPUT, "%s", full) : wm_err(err, WM_ERR_INPUT, "%s", full);
}

wm_status wm_budget_value(wm_session *s, const wm_node *n, int k, const wm_tensor *t, uint64_t old, uint64_t *bytes,
                          wm_error *err) {
    const char *name = k < n->n_out && n->proto->output[k] ? n->proto->output[k] : "?";
    char shape[256], msg[600], sz[32];
    uint64_t nb;
    if (t->rank < 0 || t->rank > WM_MAX_RANK)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output '%s' has rank %d (at most %d)", name, t->rank,
                           WM_MAX_RANK);
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "output '%s' has a negative dim", name);
    if (wm_budget_bytes(t, &nb)) {
        snprintf(msg, sizeof msg, "output '%s' %s is too large: its byte count overflows 64 bits", name,
                 wm_budget_shape(t, shape, sizeof shape));
        return over(s, n, 0, msg, err);
    }
    if (nb > old && !wm_budget_fits(s, old, nb)) {
        snprintf(msg, sizeof msg, "output '%s' %s needs %s (%llu bytes)", name, wm_budget_shape(t, shape, sizeof shape),
                 wm_fmt_size(nb, sz, sizeof sz), (unsigned long long)nb);
        return over(s, n, old, msg, err);
    }
    *bytes = nb;
    return WM_OK;
}

wm_status wm_budget_take(wm_session *s, const wm_node *n, uint64_t old, uint64_t bytes, const char *what,
                         wm_error *err) {
    if (!wm_budget_fits(s, old, bytes)) {
        char msg[300], sz[32];
        snprintf(msg, sizeof msg, "%s of %s (%llu bytes)", what, wm_fmt_size(bytes, sz, sizeof sz),
                 (unsigned long long)bytes);
        return over(s, n, old, msg, err);
    }
    wm_budget *b = &root_of(s)->budget;
    b->held = b->held - (old < b->held ? old : b->held) + bytes;
    return WM_OK;
}

void wm_budget_give(wm_session *s, uint64_t bytes) {
    wm_budget *b = &root_of(s)->budget;
    b->held -= bytes < b->held ? bytes : b->held;
}

void wm_budget_start(wm_session *s) {
    if (s->parent) return; /* a subgraph runs inside its root's run */
    wm_budget *b = &s->budget;
    if (b->timeout_s > 0) {
        b->start = now_s();
        b->deadline = b->start + b->timeout_s;
    }
}

static wm_status late(const wm_budget *b, const wm_node *n, double t, wm_error *err) {
    char msg[300];
    snprintf(msg, sizeof msg, "the run stopped after %.3g s, over the timeout of %g s set by %s (raise it with %s)",
             t - b->start, b->timeout_s, b->timeout_from == 1 ? "timeout_s (--timeout)" : "WM_TIMEOUT",
             WM_HINT_TIMEOUT);
    return n ? wm_node_err(n, err, WM_ERR_INPUT, "%s", msg) : wm_err(err, WM_ERR_INPUT, "%s", msg);
}

int wm_budget_timed(wm_session *s) { return !s->parent && s->budget.deadline != 0; }

wm_status wm_budget_time(wm_session *s, const wm_node *n, wm_error *err) {
    if (s->parent) return WM_OK; /* inside a Loop/Scan/If: its node's iteration check names the node */
    const wm_budget *b = &s->budget;
    if (!b->deadline) return WM_OK;
    double t = now_s();
    return t > b->deadline ? late(b, n, t, err) : WM_OK;
}

wm_status wm_budget_iter(const wm_node *n, int64_t iter, int64_t trip, wm_error *err) {
    wm_session *s = root_of(n->scope);
    const wm_budget *b = &s->budget;
    if (iter >= b->max_iter) {
        char tc[64] = "";
        if (trip >= 0) snprintf(tc, sizeof tc, " of a trip count of %lld", (long long)trip);
        return wm_node_err(n, err, WM_ERR_INPUT,
                           "stopped after %lld iterations%s: the limit of one Loop or Scan is %lld iterations "
                           "(raise it with %s)",
                           (long long)iter, tc, (long long)b->max_iter, WM_HINT_LOOP);
    }
    if (b->deadline) {
        double t = now_s();
        if (t > b->deadline) return late(b, n, t, err);
    }
    return WM_OK;
}

wm_status wm_budget_steps(const wm_node *n, int64_t steps, wm_error *err) {
    const wm_budget *b = &root_of(n->scope)->budget;
    if (steps <= b->max_iter) return WM_OK;
    return wm_node_err(n, err, WM_ERR_INPUT,
                       "%lld steps are over the limit of %lld iterations of one Loop or Scan (raise it with %s)",
                       (long long)steps, (long long)b->max_iter, WM_HINT_LOOP);
}

wm_status wm_session_reserve(wm_session *s, uint64_t bytes, const char *what, wm_error *err) {
    return wm_budget_take(s, NULL, 0, bytes, what, err);
}
