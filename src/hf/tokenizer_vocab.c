/* tokenizer_vocab.c - growable arrays, hash maps and the vocabulary (token <-> id) of the tokenizers. */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

int wm_tgrow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) return 0;
        nc *= 2;
    }
    void *q = realloc(*(void **)p, nc * elem);
    if (!q) return 0;
    *(void **)p = q;
    *cap = nc;
    return 1;
}

/* ---------------------------------------------------------------- tmap */

void wm_tmap_free(wm_tmap *m) {
    free(m->slot);
    free(m->ent);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

long wm_tmap_find_h(const wm_tmap *m, const char *s, size_t n, uint32_t h) {
    if (!m->slot) return -1;
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) return -1;
        const wm_tmap_ent *en = &m->ent[e - 1];
        if (en->hash == h && en->len == n && !memcmp(m->pool + en->off, s, n)) return (long)(e - 1);
    }
}

static int tmap_rehash(wm_tmap *m, size_t nslots) {
    uint32_t *ns = calloc(nslots, sizeof *ns);
    if (!ns) return 0;
    size_t mask = nslots - 1;
    for (size_t k = 0; k < m->n; k++) {
        size_t i = m->ent[k].hash & mask;
        while (ns[i]) i = (i + 1) & mask;
        ns[i] = (uint32_t)(k + 1);
    }
    free(m->slot);
    m->slot = ns;
    m->mask = (uint32_t)mask;
    return 1;
}

long wm_tmap_put(wm_tmap *m, const char *s, size_t n, int32_t val) {
    uint32_t h = wm_thash(s, n);
    long f = wm_tmap_find_h(m, s, n, h);
    if (f >= 0) {
        m->ent[f].val = val;
        return f;
    }
    if (m->n >= UINT32_MAX - 1 || n >= UINT32_MAX / 2) return -1;
    if (!m->slot || (m->n + 1) * 4 > ((size_t)m->mask + 1) * 3) {
        size_t ns = m->slot ? ((size_t)m->mask + 1) * 2 : 64;
        if (!tmap_rehash(m, ns)) return -1;
    }
    if (!wm_tgrow(&m->ent, &m->cap, m->n + 1, sizeof *m->ent)) return -1;
    size_t pcap = m->pool_cap;
    if (!wm_tgrow(&m->pool, &pcap, m->pool_n + n + 1, 1)) return -1;
    m->pool_cap = pcap;
    if (m->pool_n + n + 1 > UINT32_MAX) return -1;
    memcpy(m->pool + m->pool_n, s, n);
    m->pool[m->pool_n + n] = 0;
    wm_tmap_ent *e = &m->ent[m->n];
    e->off = (uint32_t)m->pool_n;
    e->len = (uint32_t)n;
    e->hash = h;
    e->val = val;
    m->pool_n += n + 1;
    size_t i = h & m->mask;
    while (m->slot[i]) i = (i + 1) & m->mask;
    m->slot[i] = (uint32_t)(m->n + 1);
    return (long)m->n++;
}

/* -------------------------------------------------------------- u64map */

void wm_u64map_free(wm_u64map *m) {
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* murmur3's fmix64: keys are (a << 32 | b) pairs of small ids, so every bit must reach the slot index */
static size_t u64_slot(uint64_t k, size_t mask) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return (size_t)k & mask;
}

static int u64_rehash(wm_u64map *m, size_t ns) {
    wm_u64ent *ne = malloc(ns * sizeof *ne);
    if (!ne) return 0;
    for (size_t i = 0; i < ns; i++) ne[i].k = UINT64_MAX;
    size_t mask = ns - 1;
    if (m->e)
        for (size_t i = 0; i <= m->mask; i++) {
            if (m->e[i].k == UINT64_MAX) continue;
            size_t j = u64_slot(m->e[i].k, mask);
            while (ne[j].k != UINT64_MAX) j = (j + 1) & mask;
            ne[j] = m->e[i];
        }
    free(m->e);
    m->e = ne;
    m->mask = mask;
    return 1;
}

int wm_u64map_put(wm_u64map *m, uint64_t k, uint64_t v) {
    if (!m->e || (m->n + 1) * 2 > m->mask + 1)
        if (!u64_rehash(m, m->e ? (m->mask + 1) * 2 : 64)) return 0;
    size_t i = u64_slot(k, m->mask);
    while (m->e[i].k != UINT64_MAX && m->e[i].k != k) i = (i + 1) & m->mask;
    if (m->e[i].k == UINT64_MAX) m->n++;
    m->e[i].k = k;
    m->e[i].v = v;
    return 1;
}

int wm_u64map_get(const wm_u64map *m, uint64_t k, uint64_t *v) {
    if (!m->e) return 0;
    for (size_t i = u64_slot(k, m->mask);; i = (i + 1) & m->mask) {
        if (m->e[i].k == k) {
            *v = m->e[i].v;
            return 1;
        }
        if (m->e[i].k == UINT64_MAX) return 0;
    }
}

/* ------------------------------------------------------------ vocabulary */

void wm_tvocab_free(wm_tvocab *v) {
    wm_tmap_free(&v->map);
    free(v->r);
    free(v->s_id);
    free(v->s_off);
    free(v->s_len);
    memset(v, 0, sizeof *v);
    v->max_id = -1;
}

static int cmp_sparse(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return (*x > *y) - (*x < *y);
}

wm_status wm_tvocab_build_reverse(wm_tvocab *v, const char *name, wm_error *err) {
    int32_t mx = -1;
    for (size_t i = 0; i < v->map.n; i++)
        if (v->map.ent[i].val > mx) mx = v->map.ent[i].val;
    v->max_id = mx;
    v->rpool = v->map.pool;
    if (mx < 0) return WM_OK;
    if ((size_t)mx <= 2 * v->map.n + 4096) {
        size_t n = (size_t)mx + 1;
        v->r = malloc(n * sizeof *v->r);
        if (!v->r) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory (vocabulary)", name);
        memset(v->r, 0xFF, n * sizeof *v->r);
        /* a HashMap iterates in no fixed order; for ids shared by several tokens the first one is kept */
        for (size_t i = 0; i < v->map.n; i++) {
            int32_t id = v->map.ent[i].val;
            if (v->r[id].len != UINT32_MAX) continue;
            v->r[id] = (wm_tstr){v->map.ent[i].off, v->map.ent[i].len};
        }
        return WM_OK;
    }
    /* sparse ids: sorted (id, entry) pairs */
    int64_t *pairs = malloc(v->map.n * sizeof *pairs);
    if (!pairs) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory (vocabulary)", name);
    for (size_t i = 0; i < v->map.n; i++) pairs[i] = ((int64_t)v->map.ent[i].val << 32) | (int64_t)i;
    qsort(pairs, v->map.n, sizeof *pairs, cmp_sparse);
    v->s_id = malloc(v->map.n * sizeof *v->s_id);
    v->s_off = malloc(v->map.n * sizeof *v->s_off);
    v->s_len = malloc(v->map.n * sizeof *v->s_len);
    if (!v->s_id || !v->s_off || !v->s_len) {
        free(pairs);
        return wm_err(err, WM_ERR_NOMEM, "%s: out of memory (vocabulary)", name);
    }
    size_t k = 0;
    for (size_t i = 0; i < v->map.n; i++) {
        int32_t id = (int32_t)(pairs[i] >> 32);
        size_t e = (size_t)(pairs[i] & 0xFFFFFFFF);
        if (k && v->s_id[k - 1] == id) continue;
        v->s_id[k] = id;
        v->s_off[k] = v->map.ent[e].off;
        v->s_len[k] = v->map.ent[e].len;
        k++;
    }
    v->s_n = k;
    free(pairs);
    return WM_OK;
}

const char *wm_tvocab_token(const wm_tvocab *v, int32_t id, size_t *len) {
    if (id < 0 || id > v->max_id) return NULL;
    if (v->r) {
        if (v->r[id].len == UINT32_MAX) return NULL;
        *len = v->r[id].len;
        return v->rpool + v->r[id].off;
    }
    size_t lo = 0, hi = v->s_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->s_id[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < v->s_n && v->s_id[lo] == id) {
        *len = v->s_len[lo];
        return v->rpool + v->s_off[lo];
    }
    return NULL;
}

/* ------------------------------------------------------------------ trie */

void wm_ttrie_free(wm_ttrie *tr) {
    wm_u64map_free(&tr->edges);
    free(tr->val);
    memset(tr, 0, sizeof *tr);
}

int wm_ttrie_insert(wm_ttrie *tr, const char *s, size_t n, int32_t val) {
    if (!tr->n_nodes) {
        if (!wm_tgrow(&tr->val, &tr->cap, 1, sizeof *tr->val)) return 0;
        tr->val[0] = -1;
        tr->n_nodes = 1;
    }
    if (!n) {
        tr->empty = 1;
        return 1;
    }
    uint64_t node = 0;
    tr->first[(uint8_t)s[0]] = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = (node << 8) | (uint8_t)s[i], child;
        if (!wm_u64map_get(&tr->edges, key, &child)) {
            if (tr->n_nodes >= (1ull << 40) || !wm_tgrow(&tr->val, &tr->cap, tr->n_nodes + 1, sizeof *tr->val))
                return 0;
            child = tr->n_nodes++;
            tr->val[child] = -1;
            if (!wm_u64map_put(&tr->edges, key, child)) return 0;
        }
        node = child;
    }
    tr->val[node] = val;
    return 1;
}
