/*
 * pool.h - one thread pool per session: a parallel-for over (ith, nth).
 *
 * wm_pool_run(p, fn, ctx, nth) calls fn(ctx, ith, nth) once for every ith
 * in [0, nth) and returns when all calls are done; each thread claims the
 * shares of its own contiguous slice of [0, nth) first, in order (so an
 * undisturbed run maps the same shares to the same thread every time, and
 * a job reads from its own cache what the same split of an earlier job
 * wrote there), then what is left of the others' slices (a descheduled
 * worker's shares are taken by another thread); at most one thread runs a given ith at a
 * time, so ith may index per-share scratch. Kernels take their own share of the work from (ith, nth), so the
 * partitioning, and with it the order of every reduction, depends only on
 * nth: the same nth gives bit-identical results run to run. Workers spin
 * briefly after a job (decode steps run hundreds of small ops back to back),
 * then sleep on a condition variable. Not reentrant: fn must not call
 * wm_pool_run on the same pool.
 */
#ifndef WM_RUNTIME_POOL_H
#define WM_RUNTIME_POOL_H

#include "winml/winml.h"

typedef struct wm_pool wm_pool;
typedef void (*wm_pool_fn)(void *ctx, int ith, int nth);

/*
 * Creates a pool of n_threads (the caller counts as one; 0 = number of
 * online CPUs). *out owns its threads; release with wm_pool_free.
 */
wm_status wm_pool_new(int n_threads, wm_pool **out, wm_error *err);
void wm_pool_free(wm_pool *p); /* joins the workers; accepts NULL */
int wm_pool_size(const wm_pool *p); /* 1 for a NULL pool */

/* Runs fn over nth shares (nth <= 0 or > size: size). A NULL pool runs them in the caller. */
void wm_pool_run(wm_pool *p, wm_pool_fn fn, void *ctx, int nth);

/*
 * Runs fn over exactly nth shares (>= 1), also more than the pool has threads: the threads claim them as they
 * come free, so a thread that another process holds up leaves its unclaimed shares to the others. For jobs
 * whose shares are small and independent (decode GEMVs).
 */
void wm_pool_run_shares(wm_pool *p, wm_pool_fn fn, void *ctx, int nth);

/* The calling thread's index in p while it runs one of p's shares: 1 .. size - 1 for p's workers, 0 for the
 * thread that called wm_pool_run (whatever pool it may work for otherwise). With more shares than threads
 * (wm_pool_run_shares) this, not the share index, picks per-thread scratch: a thread runs one share at a time. */
int wm_pool_thread(const wm_pool *p);

/* The range [*b, *e) of n items that share ith of nth takes (contiguous, balanced). */
static inline void wm_split(long n, int ith, int nth, long *b, long *e) {
    long q = n / nth, r = n % nth;
    *b = ith * q + (ith < r ? ith : r);
    *e = *b + q + (ith < r);
}

#endif
