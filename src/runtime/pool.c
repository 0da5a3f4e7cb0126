#include "runtime/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"

#define WM_POOL_SPIN 20000 /* polls before a worker sleeps */

/* one thread's home range of shares [next, end), on its own cache line: next in the low 32 bits, end in the
   high ones, so that a claim (one fetch_add) reads the pair of one job, never the next of one and the end of
   another (a worker may still be claiming when the caller posts the next job) */
typedef struct wm_pool_range {
    _Alignas(64) atomic_ullong r;
} wm_pool_range;

static inline unsigned long long range_pack(long b, long e) {
    return (unsigned long long)b | (unsigned long long)e << 32;
}

struct wm_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint gen;     /* bumped once per job */
    wm_pool_range *home; /* per thread: its range of the current job's shares, claimed from the front */
    atomic_int done;     /* shares of the current job finished */
    atomic_int nth;      /* shares of the current job */
    atomic_int sleepers; /* workers waiting on `wake` */
    atomic_int stop;
    wm_pool_fn fn;       /* read only after a successful claim (which orders it after the caller's stores) */
    void *ctx;
};

/*
 * Shares are claimed, not assigned: thread t first takes the shares of its
 * home range (the t-th contiguous slice of [0, nth)) in order, then those
 * left in the other threads' ranges, so a worker the OS has not scheduled
 * yet does not hold up the job (the others take its shares), while an
 * undisturbed run gives every thread the same shares each time: what a
 * thread writes in one job is in its own cache when a later job with the
 * same split reads it. A share's work depends only on its index, never on
 * the thread running it, so results stay bit-identical; share k uses
 * scratch slice k.
 */
static void claim_shares(wm_pool *p, int self) {
    for (int v = 0; v < p->n; v++) {
        wm_pool_range *r = &p->home[(self + v) % p->n];
        /* another thread's range: read it before claiming from it. Most are used up by then, and a plain read of
           each range leaves its line shared, where a fetch_add by every thread on every range moved each line
           through all of them (n x n read-modify-writes a job at n threads) */
        if (v) {
            unsigned long long c = atomic_load_explicit(&r->r, memory_order_relaxed);
            if ((unsigned)(c & 0xffffffffu) >= (unsigned)(c >> 32)) continue;
        }
        for (;;) {
            unsigned long long c = atomic_fetch_add(&r->r, 1);
            unsigned k = (unsigned)(c & 0xffffffffu), e = (unsigned)(c >> 32);
            if (k >= e) break;
            p->fn(p->ctx, (int)k, atomic_load(&p->nth)); /* fn, ctx and nth were stored before the range */
            atomic_fetch_add(&p->done, 1);
        }
    }
}

typedef struct worker_arg {
    wm_pool *p;
    int index;
} worker_arg;

static _Thread_local const wm_pool *tl_pool; /* the pool this thread works for, or NULL */
static _Thread_local int tl_index;           /* its index there */

int wm_pool_thread(const wm_pool *p) { return p && tl_pool == p ? tl_index : 0; }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *arg) {
    worker_arg *wa = arg;
    wm_pool *p = wa->p;
    tl_pool = p;
    tl_index = wa->index;
    free(wa);
    unsigned seen = 0; /* the generation at creation: a job posted before this thread first runs is still seen */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (atomic_load(&p->stop)) return NULL;
            if (++spins < WM_POOL_SPIN) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        seen = g;
        claim_shares(p, tl_index);
    }
}

wm_status wm_pool_new(int n_threads, wm_pool **out, wm_error *err) {
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 256) return wm_err(err, WM_ERR_USAGE, "threads: %d is more than 256", n_threads);
    wm_pool *p = calloc(1, sizeof *p);
    if (!p) return wm_err(err, WM_ERR_NOMEM, "thread pool: out of memory");
    p->n = n_threads;
    p->home = aligned_alloc(64, (size_t)n_threads * sizeof *p->home);
    if (!p->home) {
        free(p);
        return wm_err(err, WM_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 0; i < n_threads; i++) atomic_init(&p->home[i].r, 0); /* no job yet: nothing to claim */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads, sizeof *p->threads);
        if (!p->threads) goto nomem;
        for (int i = 1; i < n_threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) goto nomem;
            wa->p = p;
            wa->index = i;
            if (pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
                free(wa);
                p->n = i; /* join the ones that started */
                wm_pool_free(p);
                return wm_err(err, WM_ERR_IO, "thread pool: cannot start thread %d of %d", i, n_threads);
            }
        }
    }
    *out = p;
    return WM_OK;
nomem:
    p->n = 1;
    wm_pool_free(p);
    return wm_err(err, WM_ERR_NOMEM, "thread pool: out of memory");
}

void wm_pool_free(wm_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->home);
    free(p);
}

int wm_pool_size(const wm_pool *p) { return p ? p->n : 1; }

void wm_pool_run(wm_pool *p, wm_pool_fn fn, void *ctx, int nth) {
    int size = wm_pool_size(p);
    wm_pool_run_shares(p, fn, ctx, nth <= 0 || nth > size ? size : nth);
}

void wm_pool_run_shares(wm_pool *p, wm_pool_fn fn, void *ctx, int nth) {
    if (nth < 1) nth = 1;
    if (nth == 1 || wm_pool_size(p) == 1) {
        for (int i = 0; i < nth; i++) fn(ctx, i, nth);
        return;
    }
    /* every share of the previous job is done: no thread reads these until it claims a share below */
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->nth, nth);
    atomic_store(&p->done, 0);
    for (int t = 0; t < p->n; t++) { /* home ranges: nth split into p->n contiguous slices; opens the job to claims */
        long b, e;
        wm_split(nth, t, p->n, &b, &e);
        atomic_store(&p->home[t].r, range_pack(b, e));
    }
    atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with the sleepers count */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    claim_shares(p, 0);
    while (atomic_load(&p->done) < nth) cpu_relax();
}
