#include "runtime/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"

#define WM_POOL_SPIN 20000 /* polls before a worker sleeps */

struct wm_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint gen;     /* bumped once per job */
    atomic_int next;     /* the next share of the current job to claim */
    atomic_int done;     /* shares of the current job finished */
    atomic_int nth;      /* shares of the current job */
    atomic_int sleepers; /* workers waiting on `wake` */
    atomic_int stop;
    wm_pool_fn fn;       /* read only after a successful claim (which orders it after the caller's stores) */
    void *ctx;
};

/*
 * Shares are claimed, not assigned: the caller and every awake worker take
 * the next unclaimed share until none is left, so a worker the OS has not
 * scheduled yet does not hold up the job (the caller takes its share). A
 * share's work depends only on its index, never on the thread running it,
 * so results stay bit-identical; share k uses scratch slice k.
 */
static void claim_shares(wm_pool *p) {
    for (;;) {
        int k = atomic_fetch_add(&p->next, 1);
        int nth = atomic_load(&p->nth);
        if (k >= nth) return;
        p->fn(p->ctx, k, nth);
        atomic_fetch_add(&p->done, 1);
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
        claim_shares(p);
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
    atomic_store(&p->next, 1 << 30); /* no job yet: nothing to claim */
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
    atomic_store(&p->next, 0);    /* opens the job to claims */
    atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with the sleepers count */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    claim_shares(p);
    while (atomic_load(&p->done) < nth) cpu_relax();
}
