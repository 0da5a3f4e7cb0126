/*
 * Unit tests of wm_transpose (src/ops/tensor.c) against a naive
 * index-by-index transpose: every permutation of rank 3 and 4 shapes (with
 * size-1 dims, dims that merge because they stay adjacent, a short last dim
 * that takes the plane path, and images large enough to be split over a pool
 * of 2 threads, also when there are fewer planes than threads), for element
 * sizes 1, 2, 4 and 8, on no pool and on a pool. Outputs must match bit for bit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/op.h"
#include "runtime/pool.h"

static void naive(const uint8_t *src, uint8_t *dst, size_t es, int r, const int64_t *dims, const int64_t *perm) {
    int64_t st[WM_MAX_RANK], od[WM_MAX_RANK], idx[WM_MAX_RANK] = {0}, total = 1;
    for (int d = r - 1, s = 1; d >= 0; d--) st[d] = s, s *= (int)dims[d];
    for (int i = 0; i < r; i++) od[i] = dims[perm[i]], total *= od[i];
    for (int64_t o = 0; o < total; o++) {
        int64_t so = 0;
        for (int i = 0; i < r; i++) so += idx[i] * st[perm[i]];
        memcpy(dst + (size_t)o * es, src + (size_t)so * es, es);
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < od[i]) break;
            idx[i] = 0;
        }
    }
}

static int next_perm(int64_t *p, int r) { /* lexicographic successor; 0 after the last */
    int i = r - 2;
    while (i >= 0 && p[i] > p[i + 1]) i--;
    if (i < 0) return 0;
    int j = r - 1;
    while (p[j] < p[i]) j--;
    int64_t t = p[i];
    p[i] = p[j], p[j] = t;
    for (int a = i + 1, b = r - 1; a < b; a++, b--) t = p[a], p[a] = p[b], p[b] = t;
    return 1;
}

static void check_shape(wm_exec *x, int r, const int64_t *dims) {
    static const size_t ess[] = {1, 2, 4, 8};
    size_t n = 1;
    for (int i = 0; i < r; i++) n *= (size_t)dims[i];
    for (size_t e = 0; e < sizeof ess / sizeof ess[0]; e++) {
        size_t es = ess[e], bytes = n * es;
        uint8_t *src = malloc(bytes + 1), *got = malloc(bytes + 1), *want = malloc(bytes + 1);
        assert_non_null(src), assert_non_null(got), assert_non_null(want);
        for (size_t i = 0; i < bytes; i++) src[i] = (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
        int64_t perm[WM_MAX_RANK];
        for (int i = 0; i < r; i++) perm[i] = i;
        do {
            memset(got, 0xa5, bytes);
            naive(src, want, es, r, dims, perm);
            wm_transpose(src, got, es, r, dims, perm, x);
            if (memcmp(got, want, bytes))
                fail_msg("transpose es=%zu rank %d dims %lld,%lld,%lld,%lld perm %lld,%lld,%lld,%lld (pool %d): differs",
                         es, r, (long long)dims[0], (long long)dims[1], (long long)dims[2],
                         (long long)(r > 3 ? dims[3] : 0), (long long)perm[0], (long long)perm[1], (long long)perm[2],
                         (long long)(r > 3 ? perm[3] : 0), x ? x->nth : 0);
        } while (next_perm(perm, r));
        free(src), free(got), free(want);
    }
}

static void test_transpose(void **state) {
    (void)state;
    wm_pool *p = NULL;
    wm_error err = {0};
    assert_int_equal(wm_pool_new(2, &p, &err), WM_OK);
    wm_exec ex = {.pool = p, .nth = 2};
    static const int64_t s3[][3] = {{2, 3, 4}, {1, 5, 7}, {3, 1, 2}, {5, 7, 1}, {3, 120, 224}, {49, 2048, 1},
                                    {1, 33, 2100}, {2, 65, 600}};
    static const int64_t s4[][4] = {{1, 3, 224, 224}, {1, 7, 7, 2048}, {2, 3, 4, 5}, {1, 1, 6, 1}, {2, 40, 30, 31}};
    for (int pool = 0; pool < 2; pool++) {
        wm_exec *x = pool ? &ex : NULL;
        for (size_t i = 0; i < sizeof s3 / sizeof s3[0]; i++) check_shape(x, 3, s3[i]);
        for (size_t i = 0; i < sizeof s4 / sizeof s4[0]; i++) check_shape(x, 4, s4[i]);
    }
    wm_pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_transpose)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
