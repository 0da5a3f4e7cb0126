/*
 * Unit tests of the thread pool (src/runtime/pool.c): wm_pool_run_shares runs
 * every share exactly once also when there are more shares than threads, on a
 * pool of 1, 2 and 4 threads and on no pool; wm_pool_thread gives each running
 * share an index below the pool's size that no other share holds at the same
 * time (what per-thread scratch relies on), and 0 outside the pool's jobs;
 * wm_pool_run still caps its shares at the pool's size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/pool.h"

#define MAXS 64

typedef struct job {
    const wm_pool *p;
    int size;
    atomic_int runs[MAXS];   /* per share */
    atomic_int busy[8];      /* per thread index: a share holds it */
    atomic_int bad;          /* an index out of range, or held twice at once, or a wrong nth */
    int want_nth;
    _Atomic uint64_t sink;   /* keeps the busy loop */
} job;

static void share(void *arg, int ith, int nth) {
    job *j = arg;
    if (nth != j->want_nth || ith < 0 || ith >= nth || ith >= MAXS) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    atomic_fetch_add(&j->runs[ith], 1);
    int t = wm_pool_thread(j->p);
    if (t < 0 || t >= j->size) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    if (atomic_exchange(&j->busy[t], 1)) atomic_fetch_add(&j->bad, 1);
    uint64_t x = (uint64_t)ith + 1; /* a little work, so that shares overlap */
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    atomic_store_explicit(&j->sink, x, memory_order_relaxed);
    atomic_store(&j->busy[t], 0);
}

static void check(wm_pool *p, int size, int nshares, int capped) {
    static job j;
    memset(&j, 0, sizeof j);
    j.p = p, j.size = size;
    j.want_nth = capped ? (nshares > size ? size : nshares) : nshares;
    if (capped) wm_pool_run(p, share, &j, nshares);
    else wm_pool_run_shares(p, share, &j, nshares);
    assert_int_equal(atomic_load(&j.bad), 0);
    for (int i = 0; i < MAXS; i++) assert_int_equal(atomic_load(&j.runs[i]), i < j.want_nth ? 1 : 0);
}

static void test_shares(void **state) {
    (void)state;
    static const int sizes[] = {1, 2, 4};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        wm_pool *p = NULL;
        wm_error err = {0};
        assert_int_equal(wm_pool_new(sizes[s], &p, &err), WM_OK);
        assert_int_equal(wm_pool_size(p), sizes[s]);
        for (int rep = 0; rep < 20; rep++) {
            check(p, sizes[s], 1, 0);
            check(p, sizes[s], sizes[s], 0);
            check(p, sizes[s], 3 * sizes[s] + 1, 0); /* more shares than threads */
            check(p, sizes[s], MAXS, 0);
            check(p, sizes[s], 3 * sizes[s] + 1, 1); /* wm_pool_run: at most one share per thread */
        }
        assert_int_equal(wm_pool_thread(p), 0); /* outside a job */
        wm_pool_free(p);
    }
    check(NULL, 1, 5, 0); /* no pool: every share in the caller */
    assert_int_equal(wm_pool_thread(NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shares)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
