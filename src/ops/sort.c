/* sort.c - stable bottom-up merge sort of index arrays (see sort.h). */
#include "ops/sort.h"

#include <string.h>

void wm_sort_idx(int64_t *idx, int64_t *tmp, int64_t n, wm_sort_cmp cmp, const void *ctx) {
    if (n < 2) return;
    /* insertion sort of runs of 16, then merges of doubling width */
    const int64_t run = 16;
    for (int64_t lo = 0; lo < n; lo += run) {
        int64_t hi = lo + run < n ? lo + run : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            int64_t v = idx[i], j = i - 1;
            while (j >= lo && cmp(ctx, idx[j], v) > 0) {
                idx[j + 1] = idx[j];
                j--;
            }
            idx[j + 1] = v;
        }
    }
    int64_t *src = idx, *dst = tmp;
    for (int64_t w = run; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) dst[o++] = cmp(ctx, src[b], src[a]) < 0 ? src[b++] : src[a++];
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx) memcpy(idx, src, (size_t)n * sizeof *idx);
}
