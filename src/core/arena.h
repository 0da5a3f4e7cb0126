/*
 * arena.h - bump allocator owning many small objects with one lifetime.
 *
 * Everything a loaded model holds (messages, names, arrays) lives in its
 * arena and is released by one wm_arena_free. Large allocations get their
 * own block. Allocation failure returns NULL; callers report WM_ERR_NOMEM.
 */
#ifndef WM_CORE_ARENA_H
#define WM_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct wm_arena_block wm_arena_block;
typedef struct wm_arena {
    wm_arena_block *head;
    size_t used_bytes; /* total handed out, for statistics */
} wm_arena;

void wm_arena_init(wm_arena *a);
/* Frees every block; the arena may be reused after. */
void wm_arena_free(wm_arena *a);
/* Returns zeroed memory aligned to 16 bytes, owned by the arena; NULL on OOM. */
void *wm_arena_alloc(wm_arena *a, size_t n);
/* Copies n bytes of s and appends a NUL; owned by the arena. */
char *wm_arena_strndup(wm_arena *a, const char *s, size_t n);
char *wm_arena_strdup(wm_arena *a, const char *s);

/*
 * Growable arrays inside an arena, without a capacity field: the capacity
 * is always >= the next power of two of the count, so an append reallocates
 * exactly when count is 0 or a power of two. *arr and *count are the array
 * and its length; elem is the element size. Returns a pointer to the new
 * (zeroed) element, or NULL on OOM (array unchanged).
 */
void *wm_vec_push(wm_arena *a, void *arr, size_t *count, size_t elem);
/* Removes element i, keeping order. */
void wm_vec_remove(void *arr, size_t *count, size_t elem, size_t i);
/* Inserts a zeroed element at position i; returns it, NULL on OOM. */
void *wm_vec_insert(wm_arena *a, void *arr, size_t *count, size_t elem, size_t i);

/* Checked arithmetic: return 0 on overflow, 1 when *out is valid. */
static inline int wm_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int wm_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

#endif
