/*
 * tokenizer_bpe.c - the BPE model: initial symbols (with unk fusing and
 * byte fallback as in BPE::merge_word), then merges applied lowest rank
 * first, leftmost first on ties (a min-heap of (rank, position) with the
 * same stale-entry rule as tokenizers' Word::merge_all). Results of words
 * shorter than 256 bytes are cached per scratch (the cache is transparent:
 * a hit returns what the merges would).
 *
 * Output: sc->tids / ts / te / tsrc, ntok tokens (offsets are byte
 * offsets into the word, cumulative over symbol lengths as in tokenizers).
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (BPE)")
#define CACHE_MAX_KEY 256
#define CACHE_MAX_ENTRIES 65536

typedef struct wm_bpe_sym {
    int32_t c, prev, next;
    uint32_t len;
} wm_bpe_sym;

typedef struct heap_ent {
    uint64_t key; /* rank << 32 | pos */
    int32_t new_id;
} heap_ent;

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p].key <= e.key) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t mk = last.key;
        if (l < *n && h[l].key < mk) m = l, mk = h[l].key;
        if (r < *n && h[r].key < mk) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

static int merge_of(const wm_tmodel *m, int32_t a, int32_t b, uint32_t *rank, int32_t *new_id) {
    uint64_t v;
    if (!wm_u64map_get(&m->merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, &v)) return 0;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int32_t)(uint32_t)v;
    return 1;
}

static int grow_tokens(wm_tok_scratch *sc, size_t need) {
    if (need <= sc->t_cap) return 1;
    size_t c[4] = {sc->t_cap, sc->t_cap, sc->t_cap, sc->t_cap};
    if (!wm_tgrow(&sc->tids, &c[0], need, sizeof *sc->tids) || !wm_tgrow(&sc->ts, &c[1], need, sizeof *sc->ts) ||
        !wm_tgrow(&sc->te, &c[2], need, sizeof *sc->te) || !wm_tgrow(&sc->tsrc, &c[3], need, sizeof *sc->tsrc))
        return 0;
    size_t mn = c[0];
    for (int i = 1; i < 4; i++)
        if (c[i] < mn) mn = c[i];
    sc->t_cap = mn;
    return 1;
}

int wm_ttok_reserve(wm_tok_scratch *sc, size_t need) { return grow_tokens(sc, need); }

/* Adds a symbol (Word::add). */
static int add_sym(wm_tok_scratch *sc, size_t *n, int32_t c, uint32_t len) {
    if (!wm_tgrow(&sc->sym, &sc->sym_cap, *n + 1, sizeof *sc->sym)) return 0;
    wm_bpe_sym *s = sc->sym;
    if (*n) s[*n - 1].next = (int32_t)*n;
    s[*n] = (wm_bpe_sym){c, *n ? (int32_t)*n - 1 : -1, -1, len};
    (*n)++;
    return 1;
}

/* Vocabulary id of one character with the prefix / suffix the position calls for, or -1. */
static int32_t char_id(const wm_tmodel *m, wm_tok_scratch *sc, const char *ch, size_t n, int first, int last,
                       int *oom) {
    int pre = !first && m->prefix, suf = last && m->suffix;
    if (!pre && !suf) {
        if (n == 1) return m->ascii_ids[(uint8_t)ch[0]];
        if (n == 2) return m->small_ids[((uint32_t)(ch[0] & 0x1F) << 6) | (ch[1] & 0x3F)];
        return wm_tmap_get(&m->v.map, ch, n);
    }
    size_t k = (pre ? m->prefix_len : 0) + n + (suf ? m->suffix_len : 0);
    if (!wm_tgrow(&sc->kbuf, &sc->k_cap, k, 1)) {
        *oom = 1;
        return -1;
    }
    size_t o = 0;
    if (pre) memcpy(sc->kbuf, m->prefix, m->prefix_len), o = m->prefix_len;
    memcpy(sc->kbuf + o, ch, n);
    o += n;
    if (suf) memcpy(sc->kbuf + o, m->suffix, m->suffix_len);
    return wm_tmap_get(&m->v.map, sc->kbuf, k);
}

static wm_status merge_word(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, size_t wn, size_t *nsym,
                            wm_error *err) {
    size_t n = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    int have_unk = 0, oom = 0;
    for (size_t i = 0; i < wn;) {
        size_t cl = wm_u8_len((uint8_t)w[i]);
        int first = i == 0, last = i + cl >= wn;
        int32_t id = char_id(m, sc, w + i, cl, first, last, &oom);
        if (oom) return OOM(err);
        if (id >= 0) {
            if (have_unk && !add_sym(sc, &n, unk_id, unk_len)) return OOM(err);
            have_unk = 0;
            if (!add_sym(sc, &n, id, (uint32_t)cl)) return OOM(err);
            i += cl;
            continue;
        }
        if (m->byte_fallback) {
            /* every byte of the (prefixed / suffixed) string must have its <0xXX> token */
            int pre = !first && m->prefix, suf = last && m->suffix;
            const char *parts[3] = {pre ? m->prefix : "", w + i, suf ? m->suffix : ""};
            size_t lens[3] = {pre ? m->prefix_len : 0, cl, suf ? m->suffix_len : 0};
            int all = 1;
            for (int p = 0; p < 3 && all; p++)
                for (size_t b = 0; b < lens[p] && all; b++) all = m->byte_ids[(uint8_t)parts[p][b]] >= 0;
            if (all) {
                for (int p = 0; p < 3; p++)
                    for (size_t b = 0; b < lens[p]; b++)
                        if (!add_sym(sc, &n, m->byte_ids[(uint8_t)parts[p][b]], 1)) return OOM(err);
                i += cl;
                continue;
            }
        }
        if (m->unk) {
            if (m->unk_id < 0)
                return wm_err(err, WM_ERR_INPUT, "tokenizer: BPE unk_token '%.*s' is not in the vocabulary",
                              (int)(m->unk_len > 64 ? 64 : m->unk_len), m->unk);
            if (have_unk && m->fuse_unk) unk_len += (uint32_t)cl;
            else {
                if (have_unk && !add_sym(sc, &n, unk_id, unk_len)) return OOM(err);
                unk_id = m->unk_id;
                unk_len = (uint32_t)cl;
                have_unk = 1;
            }
        }
        i += cl;
    }
    if (have_unk && !add_sym(sc, &n, unk_id, unk_len)) return OOM(err);
    *nsym = n;
    if (n < 2) return WM_OK;

    /* merges: the heap lives in sc->kbuf */
    size_t cap_bytes = sc->k_cap;
    if (!wm_tgrow(&sc->kbuf, &cap_bytes, (3 * n + 8) * sizeof(heap_ent), 1)) return OOM(err);
    sc->k_cap = cap_bytes;
    heap_ent *h = (heap_ent *)(void *)sc->kbuf;
    size_t hn = 0, hcap = cap_bytes / sizeof(heap_ent);
    wm_bpe_sym *s = sc->sym;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t rank;
        int32_t nid;
        if (merge_of(m, s[i].c, s[i + 1].c, &rank, &nid)) heap_push(h, &hn, (heap_ent){((uint64_t)rank << 32) | i, nid});
    }
    while (hn) {
        heap_ent top = heap_pop(h, &hn);
        size_t pos = (size_t)(top.key & 0xFFFFFFFF);
        if (!s[pos].len || s[pos].next < 0) continue;
        size_t np = (size_t)s[pos].next;
        wm_bpe_sym right = s[np];
        uint32_t rank;
        int32_t nid;
        if (!merge_of(m, s[pos].c, right.c, &rank, &nid) || nid != top.new_id) continue;
        s[pos].c = top.new_id;
        s[pos].len += right.len;
        s[pos].next = right.next;
        s[np].len = 0;
        if (right.next >= 0 && (size_t)right.next < n) s[right.next].prev = (int32_t)pos;
        if (hn + 2 > hcap) { /* cannot happen: at most one push per pair plus two per merge */
            return wm_err(err, WM_ERR_INTERNAL, "tokenizer: BPE merge queue overflow");
        }
        if (s[pos].prev >= 0 && merge_of(m, s[s[pos].prev].c, s[pos].c, &rank, &nid))
            heap_push(h, &hn, (heap_ent){((uint64_t)rank << 32) | (uint32_t)s[pos].prev, nid});
        if (s[pos].next >= 0 && merge_of(m, s[pos].c, s[s[pos].next].c, &rank, &nid))
            heap_push(h, &hn, (heap_ent){((uint64_t)rank << 32) | pos, nid});
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].len) s[k++] = s[i];
    *nsym = k;
    return WM_OK;
}

/* ------------------------------------------------------------------ cache */

static long cache_find(const wm_tok_scratch *sc, const char *w, size_t n, uint32_t h) {
    if (!sc->cslot) return -1;
    for (size_t i = h & sc->cmask;; i = (i + 1) & sc->cmask) {
        uint32_t e = sc->cslot[i];
        if (!e) return -1;
        const wm_bpe_cache_ent *c = &sc->cent[e - 1];
        if (c->hash == h && c->key_len == n && !memcmp(sc->ckeys + c->key_off, w, n)) return (long)(e - 1);
    }
}

static void cache_clear(wm_tok_scratch *sc) {
    if (sc->cslot) memset(sc->cslot, 0, (sc->cmask + 1) * sizeof *sc->cslot);
    sc->cn = sc->ckn = sc->ctn = 0;
}

static void cache_put(wm_tok_scratch *sc, const char *w, size_t n, uint32_t h, size_t ntok) {
    if (!sc->cslot) {
        sc->cmask = 2 * CACHE_MAX_ENTRIES - 1;
        sc->cslot = calloc(sc->cmask + 1, sizeof *sc->cslot);
        if (!sc->cslot) return;
    }
    if (sc->cn >= CACHE_MAX_ENTRIES) cache_clear(sc);
    size_t c1 = sc->ccap, c3 = sc->ctcap, c4 = sc->ctcap;
    if (!wm_tgrow(&sc->cent, &c1, sc->cn + 1, sizeof *sc->cent) || !wm_tgrow(&sc->ckeys, &sc->ckcap, sc->ckn + n, 1) ||
        !wm_tgrow(&sc->cids, &c3, sc->ctn + ntok, sizeof *sc->cids) ||
        !wm_tgrow(&sc->clens, &c4, sc->ctn + ntok, sizeof *sc->clens))
        return; /* the cache is an optimisation: skip on OOM */
    sc->ccap = c1;
    sc->ctcap = c3 < c4 ? c3 : c4;
    memcpy(sc->ckeys + sc->ckn, w, n);
    for (size_t i = 0; i < ntok; i++) {
        sc->cids[sc->ctn + i] = sc->tids[i];
        sc->clens[sc->ctn + i] = sc->te[i] - sc->ts[i];
    }
    sc->cent[sc->cn] = (wm_bpe_cache_ent){(uint32_t)sc->ckn, (uint32_t)n, h, (uint32_t)sc->ctn, (uint32_t)ntok};
    size_t i = h & sc->cmask;
    while (sc->cslot[i]) i = (i + 1) & sc->cmask;
    sc->cslot[i] = (uint32_t)(sc->cn + 1);
    sc->cn++;
    sc->ckn += n;
    sc->ctn += ntok;
}

wm_status wm_tbpe_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, size_t n, size_t *ntok,
                           wm_error *err) {
    *ntok = 0;
    if (!n) return WM_OK;
    if (m->ignore_merges) {
        int32_t id = wm_tmap_get(&m->v.map, w, n);
        if (id >= 0) {
            if (!grow_tokens(sc, 1)) return OOM(err);
            sc->tids[0] = id;
            sc->ts[0] = 0;
            sc->te[0] = (uint32_t)n;
            sc->tsrc[0] = 0;
            *ntok = 1;
            return WM_OK;
        }
    }
    uint32_t h = 0;
    if (n < CACHE_MAX_KEY) {
        h = wm_thash(w, n);
        long c = cache_find(sc, w, n, h);
        if (c >= 0) {
            const wm_bpe_cache_ent *e = &sc->cent[c];
            if (!grow_tokens(sc, e->n_tok)) return OOM(err);
            uint32_t pos = 0;
            for (uint32_t i = 0; i < e->n_tok; i++) {
                sc->tids[i] = sc->cids[e->tok_off + i];
                sc->ts[i] = pos;
                pos += sc->clens[e->tok_off + i];
                sc->te[i] = pos;
                sc->tsrc[i] = 0;
            }
            *ntok = e->n_tok;
            return WM_OK;
        }
    }
    size_t ns = 0;
    wm_status st = merge_word(m, sc, w, n, &ns, err);
    if (st) return st;
    if (!grow_tokens(sc, ns)) return OOM(err);
    uint32_t pos = 0;
    for (size_t i = 0; i < ns; i++) {
        sc->tids[i] = sc->sym[i].c;
        sc->ts[i] = pos;
        pos += sc->sym[i].len;
        sc->te[i] = pos;
        sc->tsrc[i] = 0;
    }
    *ntok = ns;
    if (n < CACHE_MAX_KEY) cache_put(sc, w, n, h, ns);
    return WM_OK;
}
