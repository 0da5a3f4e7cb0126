/*
 * budget.h - the bounds on what a session may hold and how long it may run
 * (internal to src/runtime and the control-flow ops).
 *
 * Memory: every buffer whose size follows from the model's shapes and data
 * (the activation arena and workspace of a plan, the buffers of an eager
 * run, folded constants, the buffers of Loop/Scan bodies) is taken from
 * one count per session tree (a subgraph's session counts in its root's).
 * The limit is wm_session_opts.max_memory, else $WM_MAX_MEMORY, else the
 * memory available to the process when the session was made
 * (wm_mem_available). A value or a plan over it fails before anything is
 * allocated, naming the node, op, value, shape, size, what is held and the
 * limit; sizes are computed with checked multiplications.
 * Time: one execution of a Loop or Scan runs at most max_loop_iterations
 * iterations (else $WM_MAX_LOOP_ITERATIONS, else WM_LOOP_ITER_DEFAULT), and
 * a run with timeout_s (else $WM_TIMEOUT) stops at the first node boundary
 * or loop iteration past its deadline. Both checks are a compare (and, with
 * a timeout, a clock read) per node or iteration, nothing allocated.
 */
#ifndef WM_RUNTIME_BUDGET_H
#define WM_RUNTIME_BUDGET_H

#include "ops/op.h"

/*
 * 10^7 iterations: the loops of real models (decoding loops of a few
 * thousand steps, NMS over at most 10^5 boxes, Scan over a sequence) stay
 * well under it, while a Loop with a runaway trip count (2^62) stops after
 * 5 to 20 s of a trivial body (0.5 to 1.7 us an iteration, measured on the
 * 2-core development machine idle and loaded).
 */
#define WM_LOOP_ITER_DEFAULT 10000000
#define WM_HINT_MEMORY "--max-memory SIZE or WM_MAX_MEMORY=SIZE"
#define WM_HINT_LOOP "--max-loop-iterations N or WM_MAX_LOOP_ITERATIONS=N"
#define WM_HINT_TIMEOUT "--timeout SECONDS or WM_TIMEOUT=SECONDS"

typedef struct wm_budget {
    uint64_t limit;     /* bytes */
    int limit_from;     /* 0: the memory available, 1: max_memory, 2: $WM_MAX_MEMORY */
    uint64_t held;      /* bytes taken now by the session tree */
    int64_t max_iter;
    double timeout_s;   /* 0: none */
    int timeout_from;   /* 1: timeout_s, 2: $WM_TIMEOUT */
    double start, deadline; /* of the current run (monotonic seconds); deadline 0: none */
} wm_budget;

struct wm_session;

/* Resolves the limits of a root session from its options and the environment (WM_ERR_USAGE on a bad variable). */
wm_status wm_budget_init(wm_budget *b, const wm_session_opts *o, wm_error *err);

/* Bytes of t (dims times element size, sub-byte types rounded up); -1 when that does not fit 64 bits. */
int wm_budget_bytes(const wm_tensor *t, uint64_t *out);

/*
 * Checks that output k of node n (dims in t) fits what is left of s's
 * budget once a buffer of old bytes (the one it would replace, 0: none) is
 * given back: *bytes receives its size. Nothing is taken.
 */
wm_status wm_budget_value(struct wm_session *s, const wm_node *n, int k, const wm_tensor *t, uint64_t old,
                          uint64_t *bytes, wm_error *err);

/*
 * Takes bytes for a buffer that replaces one of old bytes (0: a new one) on behalf of node n (may be NULL),
 * what saying what it is ("a workspace", "its loop buffers"). Nothing changes on failure.
 */
wm_status wm_budget_take(struct wm_session *s, const wm_node *n, uint64_t old, uint64_t bytes, const char *what,
                         wm_error *err);
void wm_budget_give(struct wm_session *s, uint64_t bytes);

/* 1 when bytes more fit s's budget once a buffer of old bytes is given back. */
int wm_budget_fits(const struct wm_session *s, uint64_t old, uint64_t bytes);

/* Appends ", over <the limit and how to raise it>" for s's budget (held bytes but old counted in) to buf. */
void wm_budget_over(const struct wm_session *s, uint64_t old, char *buf, size_t n);

/* Starts a top-level run's clock (the deadline, when there is a timeout). */
void wm_budget_start(struct wm_session *s);

/* 1 when s is a root session whose current run has a deadline. */
int wm_budget_timed(struct wm_session *s);

/*
 * Between the nodes of a root session's run: WM_ERR_INPUT naming node n when the run is past its deadline. A
 * subgraph's session is not checked here (WM_OK): the Loop/Scan iteration check names its node instead.
 */
wm_status wm_budget_time(struct wm_session *s, const wm_node *n, wm_error *err);

/*
 * Before iteration iter (0-based) of one execution of Loop/Scan node n: the iteration cap (trip: the trip
 * count to name, -1 none) and the deadline.
 */
wm_status wm_budget_iter(const wm_node *n, int64_t iter, int64_t trip, wm_error *err);

/* Before a Scan node n of steps steps in all: WM_ERR_INPUT when they are over the iteration cap. */
wm_status wm_budget_steps(const wm_node *n, int64_t steps, wm_error *err);

/* "[2, 3, 4] float32" of t into buf. */
char *wm_budget_shape(const wm_tensor *t, char *buf, size_t n);

#endif
