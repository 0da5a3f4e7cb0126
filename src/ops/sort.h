/*
 * sort.h - a stable merge sort of index arrays with a caller's comparator
 * (TopK, Unique). No allocation: the caller passes scratch of n entries.
 */
#ifndef WM_OPS_SORT_H
#define WM_OPS_SORT_H

#include <stdint.h>

/* < 0 when item a goes before item b, > 0 after, 0 when equal (then a stable sort keeps their order). */
typedef int (*wm_sort_cmp)(const void *ctx, int64_t a, int64_t b);

/* Sorts idx[0..n) stably by cmp; tmp has room for n entries. */
void wm_sort_idx(int64_t *idx, int64_t *tmp, int64_t n, wm_sort_cmp cmp, const void *ctx);

#endif
