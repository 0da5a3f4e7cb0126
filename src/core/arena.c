#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#define WM_ARENA_BLOCK (64u * 1024u)

struct wm_arena_block {
    wm_arena_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void wm_arena_init(wm_arena *a) {
    a->head = NULL;
    a->used_bytes = 0;
}

void wm_arena_free(wm_arena *a) {
    wm_arena_block *b = a->head;
    while (b) {
        wm_arena_block *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

void *wm_arena_alloc(wm_arena *a, size_t n) {
    size_t need = (n + 15u) & ~(size_t)15u;
    if (need < n) return NULL;
    wm_arena_block *b = a->head;
    if (!b || b->size - b->used < need) {
        size_t size = need > WM_ARENA_BLOCK / 4 ? need : WM_ARENA_BLOCK;
        if (size > SIZE_MAX - sizeof *b) return NULL;
        wm_arena_block *nb = malloc(sizeof *nb + size);
        if (!nb) return NULL;
        nb->size = size;
        nb->used = 0;
        if (size == need && b) { /* big: keep the current block on top */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_bytes += need;
    memset(p, 0, n);
    return p;
}

char *wm_arena_strndup(wm_arena *a, const char *s, size_t n) {
    char *p = wm_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *wm_arena_strdup(wm_arena *a, const char *s) { return wm_arena_strndup(a, s, strlen(s)); }

static int is_pow2_or_zero(size_t n) { return (n & (n - 1)) == 0; }

void *wm_vec_push(wm_arena *a, void *arr, size_t *count, size_t elem) {
    unsigned char **pa = arr;
    size_t n = *count;
    if (is_pow2_or_zero(n)) {
        size_t cap = n ? n * 2 : 1;
        if (cap < n || cap > SIZE_MAX / elem) return NULL;
        unsigned char *na = wm_arena_alloc(a, cap * elem);
        if (!na) return NULL;
        if (n) memcpy(na, *pa, n * elem);
        *pa = na;
    }
    unsigned char *slot = *pa + n * elem;
    memset(slot, 0, elem);
    *count = n + 1;
    return slot;
}

void wm_vec_remove(void *arr, size_t *count, size_t elem, size_t i) {
    unsigned char *p = *(unsigned char **)arr;
    size_t n = *count;
    if (i >= n) return;
    memmove(p + i * elem, p + (i + 1) * elem, (n - i - 1) * elem);
    *count = n - 1;
}

void *wm_vec_insert(wm_arena *a, void *arr, size_t *count, size_t elem, size_t i) {
    if (i > *count) i = *count;
    if (!wm_vec_push(a, arr, count, elem)) return NULL;
    unsigned char *p = *(unsigned char **)arr;
    memmove(p + (i + 1) * elem, p + i * elem, (*count - 1 - i) * elem);
    memset(p + i * elem, 0, elem);
    return p + i * elem;
}
