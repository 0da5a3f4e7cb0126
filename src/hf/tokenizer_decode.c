/*
 * tokenizer_decode.c - ids back to text (Tokenizer::decode): tokens of the
 * ids (added tokens first), special ones skipped on request, then the
 * decoder chain over the list of token strings (ByteLevel, Metaspace,
 * WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, CTC, Sequence)
 * joined. Also the streaming decoder (DecodeStream) and token lookups.
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (decode)")

/* A list of strings: spans into one buffer. */
typedef struct slist {
    char *buf;
    size_t n, cap;
    size_t *off, *len;
    size_t cnt, scap;
} slist;

static void slist_free(slist *l) {
    free(l->buf);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

/* Appends bytes to the buffer (not a new item); 0 on OOM. */
static int sl_bytes(slist *l, const char *s, size_t n) {
    if (!wm_tgrow(&l->buf, &l->cap, l->n + n + 1, 1)) return 0;
    if (n) memcpy(l->buf + l->n, s, n);
    l->n += n;
    return 1;
}
/* Starts a new item at the current end of the buffer. */
static int sl_begin(slist *l) {
    size_t c1 = l->scap, c2 = l->scap;
    if (!wm_tgrow(&l->off, &c1, l->cnt + 1, sizeof *l->off) || !wm_tgrow(&l->len, &c2, l->cnt + 1, sizeof *l->len))
        return 0;
    l->scap = c1 < c2 ? c1 : c2;
    l->off[l->cnt] = l->n;
    l->len[l->cnt] = 0;
    l->cnt++;
    return 1;
}
static void sl_end(slist *l) { l->len[l->cnt - 1] = l->n - l->off[l->cnt - 1]; }
static int sl_item(slist *l, const char *s, size_t n) {
    if (!sl_begin(l) || !sl_bytes(l, s, n)) return 0;
    sl_end(l);
    return 1;
}
static void sl_reset(slist *l) { l->n = l->cnt = 0; }
#define ITEM(l, i) ((l)->buf ? (l)->buf + (l)->off[i] : "")

/* str::replace: every non-overlapping occurrence of pat (empty pat: between all characters). */
static int str_replace(slist *o, const char *s, size_t n, const char *pat, size_t pn, const char *to, size_t tn) {
    if (!pn) {
        if (!sl_bytes(o, to, tn)) return 0;
        for (size_t i = 0; i < n;) {
            size_t a = wm_u8_len((uint8_t)s[i]);
            if (!sl_bytes(o, s + i, a) || !sl_bytes(o, to, tn)) return 0;
            i += a;
        }
        return 1;
    }
    size_t i = 0;
    while (i < n) {
        if (i + pn <= n && !memcmp(s + i, pat, pn)) {
            if (!sl_bytes(o, to, tn)) return 0;
            i += pn;
        } else {
            if (!sl_bytes(o, s + i, 1)) return 0;
            i++;
        }
    }
    return 1;
}

/* from_utf8_lossy of bytes into o (appending). */
static int lossy(slist *o, const char *s, size_t n) {
    while (n) {
        size_t bad, ok = wm_u8_valid_prefix(s, n, &bad);
        if (!sl_bytes(o, s, ok)) return 0;
        s += ok;
        n -= ok;
        if (!n) break;
        if (!sl_bytes(o, "\xEF\xBF\xBD", 3)) return 0;
        s += bad;
        n -= bad;
    }
    return 1;
}

static const char *const cleanup_pairs[][2] = {{" .", "."},   {" ?", "?"},   {" !", "!"},          {" ,", ","},
                                               {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},       {" do not", " don't"},
                                               {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};

/* WordPiece cleanup(): the chain of replaces, through two scratch lists. */
static int cleanup(slist *o, const char *s, size_t n, slist *t1, slist *t2) {
    sl_reset(t1);
    if (!sl_bytes(t1, s, n)) return 0;
    slist *a = t1, *b = t2;
    for (size_t k = 0; k < sizeof cleanup_pairs / sizeof cleanup_pairs[0]; k++) {
        sl_reset(b);
        const char *p = cleanup_pairs[k][0], *r = cleanup_pairs[k][1];
        if (!str_replace(b, a->buf, a->n, p, strlen(p), r, strlen(r))) return 0;
        slist *x = a;
        a = b;
        b = x;
    }
    return sl_bytes(o, a->buf, a->n);
}

/* sc: a scratch for Replace's regex, made on first use (freed by the caller). */
static wm_status dec_apply(const wm_tdec *d, slist **in, slist **out, slist *t1, slist *t2, wm_tok_scratch **sc,
                           wm_error *err) {
    slist *a = *in, *o = *out;
    sl_reset(o);
    switch (d->kind) {
    case WM_TD_SEQUENCE:
        for (size_t i = 0; i < d->n_kids; i++) {
            wm_status st = dec_apply(d->kids[i], in, out, t1, t2, sc, err);
            if (st) return st;
        }
        return WM_OK;
    case WM_TD_BYTELEVEL: {
        sl_reset(t1);
        for (size_t i = 0; i < a->cnt; i++) {
            const char *s = ITEM(a, i);
            size_t n = a->len[i], j = 0;
            int all = 1;
            for (j = 0; j < n && all;) {
                size_t adv;
                all = wm_bytelevel_byte(wm_u8_get(s + j, &adv)) >= 0;
                j += adv;
            }
            if (!all) {
                if (!sl_bytes(t1, s, n)) return OOM(err);
                continue;
            }
            for (j = 0; j < n;) {
                size_t adv;
                char c = (char)wm_bytelevel_byte(wm_u8_get(s + j, &adv));
                j += adv;
                if (!sl_bytes(t1, &c, 1)) return OOM(err);
            }
        }
        if (!sl_begin(o) || !lossy(o, t1->buf ? t1->buf : "", t1->n)) return OOM(err);
        sl_end(o);
        break;
    }
    case WM_TD_METASPACE:
        for (size_t i = 0; i < a->cnt; i++) {
            if (!sl_begin(o)) return OOM(err);
            const char *s = ITEM(a, i);
            for (size_t j = 0; j < a->len[i];) {
                size_t adv;
                uint32_t cp = wm_u8_get(s + j, &adv);
                if (cp == d->cp) {
                    if (!(i == 0 && d->prepend_scheme != WM_PREPEND_NEVER) && !sl_bytes(o, " ", 1)) return OOM(err);
                } else if (!sl_bytes(o, s + j, adv))
                    return OOM(err);
                j += adv;
            }
            sl_end(o);
        }
        break;
    case WM_TD_WORDPIECE:
        for (size_t i = 0; i < a->cnt; i++) {
            const char *s = ITEM(a, i);
            size_t n = a->len[i];
            sl_reset(t2);
            if (i != 0) {
                if (n >= d->s1_len && !memcmp(s, d->s1, d->s1_len)) s += d->s1_len, n -= d->s1_len;
                else if (!sl_bytes(t2, " ", 1)) return OOM(err);
            }
            if (!sl_bytes(t2, s, n)) return OOM(err);
            if (!sl_begin(o)) return OOM(err);
            if (d->cleanup) {
                slist tmp = *t2; /* cleanup uses t1 and a private copy */
                slist x = {0};
                int ok = cleanup(o, tmp.buf ? tmp.buf : "", tmp.n, t1, &x);
                slist_free(&x);
                if (!ok) return OOM(err);
            } else if (!sl_bytes(o, t2->buf ? t2->buf : "", t2->n))
                return OOM(err);
            sl_end(o);
        }
        break;
    case WM_TD_BPE:
        for (size_t i = 0; i < a->cnt; i++) {
            const char *rep = i + 1 == a->cnt ? "" : " ";
            if (!sl_begin(o) || !str_replace(o, ITEM(a, i), a->len[i], d->s1, d->s1_len, rep, strlen(rep)))
                return OOM(err);
            sl_end(o);
        }
        break;
    case WM_TD_BYTEFALLBACK: {
        sl_reset(t1); /* pending bytes */
        for (size_t i = 0; i <= a->cnt; i++) {
            const char *s = i < a->cnt ? ITEM(a, i) : NULL;
            size_t n = i < a->cnt ? a->len[i] : 0;
            int byte = -1;
            if (s && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
                int hi = s[3], lo = s[4], v = 0, ok = 1;
                int ds[2] = {hi, lo};
                for (int k = 0; k < 2; k++) {
                    int c = ds[k];
                    v <<= 4;
                    if (c >= '0' && c <= '9') v |= c - '0';
                    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
                    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
                    else ok = 0;
                }
                if (ok) byte = v;
            }
            if (byte >= 0) {
                char c = (char)byte;
                if (!sl_bytes(t1, &c, 1)) return OOM(err);
                continue;
            }
            if (t1->n) {
                if (d->spm_bytes && !wm_u8_valid(t1->buf, t1->n)) { /* whole characters kept, other bytes U+FFFD */
                    if (!sl_begin(o)) return OOM(err);
                    for (size_t k = 0; k < t1->n;) {
                        size_t cl = wm_u8_len((uint8_t)t1->buf[k]);
                        int ok = cl && k + cl <= t1->n && wm_u8_valid(t1->buf + k, cl);
                        if (!sl_bytes(o, ok ? t1->buf + k : "\xEF\xBF\xBD", ok ? cl : 3)) return OOM(err);
                        k += ok ? cl : 1;
                    }
                    sl_end(o);
                } else if (wm_u8_valid(t1->buf, t1->n)) {
                    if (!sl_item(o, t1->buf, t1->n)) return OOM(err);
                } else
                    for (size_t k = 0; k < t1->n; k++)
                        if (!sl_item(o, "\xEF\xBF\xBD", 3)) return OOM(err);
                sl_reset(t1);
            }
            if (s && !sl_item(o, s, n)) return OOM(err);
        }
        break;
    }
    case WM_TD_FUSE:
        if (!sl_begin(o)) return OOM(err);
        for (size_t i = 0; i < a->cnt; i++)
            if (!sl_bytes(o, ITEM(a, i), a->len[i])) return OOM(err);
        sl_end(o);
        break;
    case WM_TD_STRIP:
        for (size_t i = 0; i < a->cnt; i++) {
            const char *s = ITEM(a, i);
            size_t n = a->len[i], nc = wm_u8_count(s, n);
            /* character index -> byte offsets via a forward scan */
            size_t start_cut = 0, stop_cut = nc, k = 0;
            for (size_t j = 0; j < n && k < d->start; k++) {
                size_t adv;
                if (wm_u8_get(s + j, &adv) != d->cp) break;
                start_cut = k + 1;
                j += adv;
            }
            size_t j = n;
            for (k = 0; k < d->stop && k < nc; k++) {
                size_t b = j - 1;
                while (b > 0 && ((uint8_t)s[b] & 0xC0) == 0x80) b--;
                size_t adv;
                if (wm_u8_get(s + b, &adv) != d->cp) break;
                stop_cut = nc - k - 1;
                j = b;
            }
            if (!sl_begin(o)) return OOM(err);
            size_t ci = 0;
            for (size_t b = 0; b < n; ci++) {
                size_t adv = wm_u8_len((uint8_t)s[b]);
                if (ci >= start_cut && ci < stop_cut && !sl_bytes(o, s + b, adv)) return OOM(err);
                b += adv;
            }
            sl_end(o);
        }
        break;
    case WM_TD_REPLACE:
        if (!*sc && !(*sc = wm_tscratch_new())) return OOM(err);
        for (size_t i = 0; i < a->cnt; i++) {
            if (!sl_begin(o)) return OOM(err);
            /* run the regex on the token through the scratch work buffer */
            wm_piece p;
            wm_status st = wm_ts_begin(*sc, ITEM(a, i), a->len[i], 0, &p, err);
            if (!st) st = wm_ts_find_regex(*sc, &p, &d->re, err);
            if (st) return st;
            for (size_t k = 0; k < (*sc)->mn; k++) {
                const wm_tmatch *m = &(*sc)->mt[k];
                if (m->m ? !sl_bytes(o, d->s1, d->s1_len)
                         : m->e > m->s && !sl_bytes(o, (*sc)->txt + m->s, m->e - m->s)) /* (no buffer for "") */
                    return OOM(err);
            }
            sl_end(o);
        }
        break;
    case WM_TD_CTC:
        for (size_t i = 0; i < a->cnt; i++) {
            if (i && a->len[i] == a->len[i - 1] && !memcmp(ITEM(a, i), ITEM(a, i - 1), a->len[i])) continue;
            sl_reset(t2);
            if (!str_replace(t2, ITEM(a, i), a->len[i], d->s1, d->s1_len, "", 0)) return OOM(err);
            size_t before = o->n;
            if (!sl_begin(o)) return OOM(err);
            if (d->cleanup) {
                slist x = {0}, y = {0};
                int ok = cleanup(&y, t2->buf ? t2->buf : "", t2->n, t1, &x) &&
                         str_replace(o, y.buf ? y.buf : "", y.n, d->s2, d->s2_len, " ", 1);
                slist_free(&x);
                slist_free(&y);
                if (!ok) return OOM(err);
            } else if (!sl_bytes(o, t2->buf ? t2->buf : "", t2->n))
                return OOM(err);
            sl_end(o);
            if (o->n == before) o->cnt--; /* empty tokens are dropped */
        }
        break;
    }
    *in = o;
    *out = a;
    return WM_OK;
}

const char *wm_tokenizer_id_to_token(const wm_tokenizer *t, int32_t id, size_t *len) {
    uint64_t idx;
    if (wm_u64map_get(&t->added_by_id, (uint64_t)(uint32_t)id, &idx)) {
        const wm_tadded *a = &t->added[idx];
        *len = a->norm ? a->norm_len : a->len;
        return a->norm ? a->norm : a->content;
    }
    return wm_tvocab_token(&t->model.v, id, len);
}

int32_t wm_tokenizer_token_to_id(const wm_tokenizer *t, const char *tok, size_t len) {
    int32_t id = wm_tmap_get(&t->added_map, tok, len);
    return id >= 0 ? id : wm_tmap_get(&t->model.v.map, tok, len);
}

int wm_tokenizer_is_special(const wm_tokenizer *t, int32_t id) {
    size_t n;
    const char *s = wm_tokenizer_id_to_token(t, id, &n);
    return s && wm_tmap_find(&t->special_set, s, n) >= 0;
}

void wm_tok_buf_free(wm_tok_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int buf_set(wm_tok_buf *b, const char *s, size_t n) {
    if (!wm_tgrow(&b->p, &b->cap, n + 1, 1)) return 0;
    if (n) memmove(b->p, s, n);
    b->p[n] = 0;
    b->n = n;
    return 1;
}

wm_status wm_tokenizer_decode(const wm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, wm_tok_buf *out,
                              wm_error *err) {
    slist l1 = {0}, l2 = {0}, t1 = {0}, t2 = {0};
    slist *a = &l1, *b = &l2;
    wm_tok_scratch *sc = NULL;
    wm_status st = WM_OK;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = wm_tokenizer_id_to_token(t, ids[i], &len);
        if (!s) continue;
        if (skip_special && wm_tmap_find(&t->special_set, s, len) >= 0) continue;
        if (!sl_item(a, s, len)) {
            st = OOM(err);
            goto done;
        }
    }
    if (t->dec && (st = dec_apply(t->dec, &a, &b, &t1, &t2, &sc, err))) goto done;
    /* join (with " " when there is no decoder) */
    sl_reset(&t1);
    for (size_t i = 0; i < a->cnt; i++)
        if ((i && !t->dec && !sl_bytes(&t1, " ", 1)) || !sl_bytes(&t1, ITEM(a, i), a->len[i])) {
            st = OOM(err);
            goto done;
        }
    const char *txt = t1.buf ? t1.buf : "";
    size_t s0 = 0, e0 = t1.n;
    if (t->dec_py_strip) { /* Python's str.strip(): White_Space and the separators U+001C..U+001F */
        size_t adv;
        uint32_t cp;
        while (s0 < e0 && ((cp = wm_u8_get(txt + s0, &adv)) == 0x1C || cp == 0x1D || cp == 0x1E || cp == 0x1F ||
                           wm_uc_is_white(cp)))
            s0 += adv;
        while (e0 > s0) {
            size_t k = e0 - 1;
            while (k > s0 && ((uint8_t)txt[k] & 0xC0) == 0x80) k--;
            cp = wm_u8_get(txt + k, &adv);
            if (!(cp == 0x1C || cp == 0x1D || cp == 0x1E || cp == 0x1F || wm_uc_is_white(cp))) break;
            e0 = k;
        }
    }
    if (!buf_set(out, txt + s0, e0 - s0)) st = OOM(err);
done:
    wm_tscratch_free(sc);
    slist_free(&l1);
    slist_free(&l2);
    slist_free(&t1);
    slist_free(&t2);
    return st;
}

/* -------------------------------------------------------- stream decode */

void wm_tok_stream_init(wm_tok_stream *s, const wm_tokenizer *t, int skip_special) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->skip_special = skip_special;
}

void wm_tok_stream_free(wm_tok_stream *s) {
    free(s->ids);
    wm_tok_buf_free(&s->prefix);
    wm_tok_buf_free(&s->tmp);
    memset(s, 0, sizeof *s);
}

static int ends_with_fffd(const wm_tok_buf *b) { return b->n >= 3 && !memcmp(b->p + b->n - 3, "\xEF\xBF\xBD", 3); }

wm_status wm_tok_stream_step(wm_tok_stream *s, int32_t id, wm_tok_buf *chunk, int *emitted, wm_error *err) {
    *emitted = 0;
    wm_status st;
    if (!s->prefix.n && s->n) {
        if ((st = wm_tokenizer_decode(s->t, s->ids, s->n, s->skip_special, &s->tmp, err))) return st;
        if (!ends_with_fffd(&s->tmp)) {
            if (!buf_set(&s->prefix, s->tmp.p, s->tmp.n)) return OOM(err);
            s->prefix_index = s->n;
        }
    }
    if (!wm_tgrow(&s->ids, &s->cap, s->n + 1, sizeof *s->ids)) return OOM(err);
    s->ids[s->n++] = id;
    if ((st = wm_tokenizer_decode(s->t, s->ids, s->n, s->skip_special, &s->tmp, err))) return st;
    if (s->tmp.n > s->prefix.n && !ends_with_fffd(&s->tmp)) {
        if (memcmp(s->tmp.p, s->prefix.p ? s->prefix.p : "", s->prefix.n))
            return wm_err(err, WM_ERR_INPUT, "tokenizer: stream decode: token %d changed the text before it", id);
        size_t add = s->tmp.n - s->prefix.n;
        if (!wm_tgrow(&chunk->p, &chunk->cap, chunk->n + add + 1, 1)) return OOM(err);
        memcpy(chunk->p + chunk->n, s->tmp.p + s->prefix.n, add);
        chunk->n += add;
        chunk->p[chunk->n] = 0;
        size_t new_prefix_index = s->n - s->prefix_index;
        memmove(s->ids, s->ids + s->prefix_index, new_prefix_index * sizeof *s->ids);
        s->n = new_prefix_index;
        if ((st = wm_tokenizer_decode(s->t, s->ids, s->n, s->skip_special, &s->prefix, err))) return st;
        s->prefix_index = new_prefix_index;
        *emitted = 1;
    }
    return WM_OK;
}
