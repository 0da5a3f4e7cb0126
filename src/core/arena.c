#include "core/arena.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define WM_ARENA_BLOCK (64u * 1024u)
#define WM_ARENA_MAP ((size_t)1 << 21) /* requests from this size on get their own mapping, on huge pages */

struct wm_arena_block {
    wm_arena_block *next;
    size_t size, used;
    size_t mapped; /* bytes of the block's own mapping (munmap), or 0 (malloc) */
    _Alignas(16) unsigned char data[];
};

/* A block of its own for a big request: anonymous pages (already zero), 2 MiB aligned and advised as huge pages
 * (weights the kernels stream: fewer TLB misses, fewer page faults at creation). NULL when mmap fails. */
static wm_arena_block *map_block(size_t need) {
    size_t hp = WM_ARENA_MAP, len = (sizeof(wm_arena_block) + need + 4095) / 4096 * 4096; /* the tail: small pages */
    if (len < need) return NULL;
    uint8_t *m = mmap(NULL, len + hp, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)m + hp - 1) / hp * hp);
    if (a > m) munmap(m, (size_t)(a - m));
    if (m + len + hp > a + len) munmap(a + len, (size_t)(m + len + hp - (a + len)));
#ifdef MADV_HUGEPAGE
    madvise(a, len, MADV_HUGEPAGE);
#endif
    wm_arena_block *b = (wm_arena_block *)a;
    b->size = need;
    b->used = 0;
    b->mapped = len;
    return b;
}

void wm_arena_init(wm_arena *a) {
    a->head = NULL;
    a->used_bytes = 0;
}

void wm_arena_free(wm_arena *a) {
    wm_arena_block *b = a->head;
    while (b) {
        wm_arena_block *n = b->next;
        if (b->mapped) munmap(b, b->mapped);
        else free(b);
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
        if (size > SIZE_MAX - sizeof *b - WM_ARENA_MAP * 2) return NULL;
        wm_arena_block *nb = size >= WM_ARENA_MAP ? map_block(size) : NULL;
        if (nb) { /* fresh anonymous pages are zero: no memset; the current block stays on top */
            nb->next = b ? b->next : NULL;
            if (b) b->next = nb;
            else a->head = nb;
            nb->used = need;
            a->used_bytes += need;
            return nb->data;
        }
        nb = malloc(sizeof *nb + size);
        if (!nb) return NULL;
        nb->size = size;
        nb->used = 0;
        nb->mapped = 0;
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
