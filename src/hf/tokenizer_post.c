/*
 * tokenizer_post.c - after the model: truncation (truncate_encodings),
 * the post-processors (BertProcessing, RobertaProcessing, ByteLevel offset
 * trimming, TemplateProcessing, Sequence), merging into the result and
 * padding. The post-processor works on a list of segments, each a
 * sequence's tokens or a run of special tokens, as tokenizers' list of
 * Encodings.
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

/* The error of a failed append: a list at the segment bound, else out of memory. */
static wm_status seg_fail(size_t n, wm_error *err) {
    if (n >= WM_TOK_MAX_TEMPLATE_TOKENS)
        return wm_err(err, WM_ERR_INPUT,
                      "tokenizer: the post-processor makes more than %u pieces of one encoding (the limit "
                      "WM_TOK_MAX_TEMPLATE_TOKENS in src/hf/tokenizer_impl.h)",
                      (unsigned)WM_TOK_MAX_TEMPLATE_TOKENS);
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (post-process)");
}

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (post-process)")

int wm_tseq_push(wm_tseq *q, int32_t id, const char *s, size_t n, int ref, wm_tok_offset off, int32_t word,
                 int32_t type, uint8_t special) {
    if (q->n >= q->cap) {
        size_t c = q->cap, c2 = q->cap, c3 = q->cap, c4 = q->cap, c5 = q->cap, c6 = q->cap, c7 = q->cap, c8 = q->cap;
        if (!wm_tgrow(&q->ids, &c, q->n + 1, sizeof *q->ids) || !wm_tgrow(&q->words, &c2, q->n + 1, sizeof *q->words) ||
            !wm_tgrow(&q->types, &c3, q->n + 1, sizeof *q->types) ||
            !wm_tgrow(&q->special, &c4, q->n + 1, sizeof *q->special) ||
            !wm_tgrow(&q->offs, &c5, q->n + 1, sizeof *q->offs) || !wm_tgrow(&q->soff, &c6, q->n + 1, sizeof *q->soff) ||
            !wm_tgrow(&q->slen, &c7, q->n + 1, sizeof *q->slen) || !wm_tgrow(&q->sptr, &c8, q->n + 1, sizeof *q->sptr))
            return 0;
        size_t mn = c;
        size_t cs[7] = {c2, c3, c4, c5, c6, c7, c8};
        for (int i = 0; i < 7; i++)
            if (cs[i] < mn) mn = cs[i];
        q->cap = mn;
    }
    if (!ref && (q->str_n + n > UINT32_MAX || !wm_tgrow(&q->str, &q->str_cap, q->str_n + n + 1, 1))) return 0;
    if (!ref) memcpy(q->str + q->str_n, s, n);
    size_t i = q->n++;
    q->sptr[i] = ref ? s : NULL;
    q->ids[i] = id;
    q->words[i] = word;
    q->types[i] = type;
    q->special[i] = special;
    q->offs[i] = off;
    q->soff[i] = (uint32_t)q->str_n;
    q->slen[i] = (uint32_t)n;
    if (!ref) q->str_n += n;
    return 1;
}

void wm_tseq_reset(wm_tseq *q) { q->n = q->str_n = 0; }

void wm_tseq_free(wm_tseq *q) {
    free(q->ids);
    free(q->words);
    free(q->types);
    free(q->special);
    free(q->offs);
    free(q->soff);
    free(q->slen);
    free(q->sptr);
    free(q->str);
    memset(q, 0, sizeof *q);
}

/* Keeps max_len tokens (the first ones, or the last ones when left). */
static void seq_truncate(wm_tseq *q, size_t max_len, int left) {
    if (max_len >= q->n) return;
    if (left) {
        size_t d = q->n - max_len;
        memmove(q->ids, q->ids + d, max_len * sizeof *q->ids);
        memmove(q->words, q->words + d, max_len * sizeof *q->words);
        memmove(q->types, q->types + d, max_len * sizeof *q->types);
        memmove(q->special, q->special + d, max_len * sizeof *q->special);
        memmove(q->offs, q->offs + d, max_len * sizeof *q->offs);
        memmove(q->soff, q->soff + d, max_len * sizeof *q->soff);
        memmove(q->slen, q->slen + d, max_len * sizeof *q->slen);
        memmove(q->sptr, q->sptr + d, max_len * sizeof *q->sptr);
    }
    q->n = max_len;
}

/* truncate_encodings */
static wm_status truncate(const wm_tok_truncation *tr, size_t max_length, wm_tseq *a, wm_tseq *b, wm_error *err) {
    if (max_length == 0) {
        seq_truncate(a, 0, tr->left);
        if (b) seq_truncate(b, 0, tr->left);
        return WM_OK;
    }
    size_t total = a->n + (b ? b->n : 0);
    if (total <= max_length) return WM_OK;
    size_t to_remove = total - max_length;
    if (tr->strategy == WM_TOK_TRUNC_LONGEST_FIRST) {
        if (!b) {
            if (tr->stride >= total - to_remove)
                return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation stride %zu must be < max_length %zu", tr->stride,
                              total - to_remove);
            seq_truncate(a, total - to_remove, tr->left);
            return WM_OK;
        }
        size_t n1 = a->n, n2 = b->n;
        int swap = n1 > n2;
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        if (n1 > max_length) n2 = n1;
        else n2 = n1 > max_length - n1 ? n1 : max_length - n1;
        if (n1 + n2 > max_length) {
            n1 = max_length / 2;
            n2 = n1 + max_length % 2;
        }
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        if ((n1 < a->n && tr->stride >= n1) || (n2 < b->n && tr->stride >= n2))
            return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation stride %zu is too large for max_length %zu",
                          tr->stride, max_length);
        seq_truncate(a, n1, tr->left);
        seq_truncate(b, n2, tr->left);
        return WM_OK;
    }
    wm_tseq *target = tr->strategy == WM_TOK_TRUNC_ONLY_FIRST ? a : b;
    if (!target) return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation only_second needs a pair");
    if (target->n <= to_remove)
        return wm_err(err, WM_ERR_INPUT,
                      "tokenizer: sequence to truncate is too short to respect max_length %zu", max_length);
    if (tr->stride >= target->n - to_remove)
        return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation stride %zu is too large", tr->stride);
    seq_truncate(target, target->n - to_remove, tr->left);
    return WM_OK;
}

size_t wm_tpost_added_count(const wm_tpost *pp, int is_pair) {
    if (!pp) return 0;
    size_t n = 0;
    switch (pp->kind) {
    case WM_TPP_BERT: return is_pair ? 3 : 2;
    case WM_TPP_ROBERTA: return is_pair ? 4 : 2;
    case WM_TPP_BYTELEVEL: return 0;
    case WM_TPP_TEMPLATE: {
        const wm_ttpl_piece *ps = is_pair ? pp->pair : pp->single;
        size_t np = is_pair ? pp->n_pair : pp->n_single;
        for (size_t i = 0; i < np; i++)
            if (ps[i].seq < 0) n += pp->specials[ps[i].special].n;
        return n;
    }
    case WM_TPP_SEQUENCE:
        for (size_t i = 0; i < pp->n_kids; i++) n += wm_tpost_added_count(pp->kids[i], is_pair);
        return n;
    }
    return 0;
}

/*
 * byte_level::process_offsets over one sequence. tokenizers (Python) trims
 * character offsets: "start + leading" and "end - trailing" count
 * characters, which here step over characters of the sequence's text.
 */
static void trim_offsets(wm_tseq *q, const char *text, size_t tlen, int add_prefix_space) {
    for (size_t i = 0; i < q->n; i++) {
        const char *s = wm_tseq_tok(q, i);
        size_t n = q->slen[i], lead = 0, run = 0;
        int in_lead = 1;
        for (size_t b = 0; b < n;) {
            size_t adv;
            uint32_t cp = wm_u8_get(s + b, &adv);
            b += adv;
            int sp = cp == 0x120 || wm_uc_is_white(cp);
            if (in_lead && sp) lead++;
            else in_lead = 0;
            run = sp ? run + 1 : 0;
        }
        size_t trail = run;
        if (!lead && !trail) continue;
        wm_tok_offset *o = &q->offs[i];
        if (lead) {
            int first = i == 0 || o->start == 0;
            if (first && add_prefix_space && lead == 1) lead = 0;
            size_t p = o->start;
            for (size_t k = 0; k < lead && p < o->end && p < tlen; k++) p += wm_u8_len((uint8_t)text[p]);
            o->start = (uint32_t)(p < o->end ? p : o->end);
        }
        if (trail) {
            size_t p = o->end, k = 0;
            for (; k < trail && p > 0 && p <= tlen; k++) {
                p--;
                while (p > 0 && ((uint8_t)text[p] & 0xC0) == 0x80) p--;
            }
            if (k == trail) o->end = (uint32_t)(p > o->start ? p : o->start);
        }
    }
}

/* Appends a segment to list (l = 0 / 1); 0 on OOM or past WM_TOK_MAX_TEMPLATE_TOKENS segments (a Sequence of
 * Bert / Roberta processors multiplies them: the caller reports which). */
static int seg_push(wm_tok_scratch *sc, size_t *n, int l, wm_tseg g) {
    size_t half = sc->segcap / 2;
    if (*n >= WM_TOK_MAX_TEMPLATE_TOKENS) return 0;
    if (*n >= half) {
        size_t nh = half ? half * 2 : 16;
        wm_tseg *ns = malloc(2 * nh * sizeof *ns);
        if (!ns) return 0;
        if (sc->segs) {
            memcpy(ns, sc->segs, half * sizeof *ns);
            memcpy(ns + nh, sc->segs + half, half * sizeof *ns);
        }
        free(sc->segs);
        sc->segs = ns;
        sc->segcap = 2 * nh;
        half = nh;
    }
    sc->segs[l * half + (*n)++] = g;
    return 1;
}

static wm_status apply(const wm_tpost *pp, wm_tok_scratch *sc, int *l, size_t *n, int add_special, wm_error *err) {
#define SEG(i) (sc->segs[(size_t)*l * (sc->segcap / 2) + (i)])
    size_t m = 0;
    int o = 1 - *l;
    switch (pp->kind) {
    case WM_TPP_SEQUENCE:
        for (size_t i = 0; i < pp->n_kids; i++) {
            wm_status st = apply(pp->kids[i], sc, l, n, add_special, err);
            if (st) return st;
        }
        return WM_OK;
    case WM_TPP_BYTELEVEL:
        if (pp->trim_offsets)
            for (size_t i = 0; i < *n; i++)
                if (SEG(i).seq >= 0)
                    trim_offsets(&sc->seq[SEG(i).seq], sc->text[SEG(i).seq], sc->text_len[SEG(i).seq], pp->add_prefix_space);
        return WM_OK;
    case WM_TPP_ROBERTA:
        if (pp->trim_offsets)
            for (size_t i = 0; i < *n; i++)
                if (SEG(i).seq >= 0)
                    trim_offsets(&sc->seq[SEG(i).seq], sc->text[SEG(i).seq], sc->text_len[SEG(i).seq], pp->add_prefix_space);
        for (size_t i = 0; i < *n; i++) SEG(i).type = 0;
        if (!add_special) return WM_OK;
        for (size_t i = 0; i < *n; i++) {
            wm_tseg g = SEG(i);
            if (!seg_push(sc, &m, o, (wm_tseg){-1, i ? &pp->sep : &pp->cls, 0}) || !seg_push(sc, &m, o, g) ||
                !seg_push(sc, &m, o, (wm_tseg){-1, &pp->sep, 0}))
                return seg_fail(m, err);
        }
        break;
    case WM_TPP_BERT:
        if (!add_special) return WM_OK;
        for (size_t i = 0; i < *n; i++) {
            wm_tseg g = SEG(i);
            if (!i && !seg_push(sc, &m, o, (wm_tseg){-1, &pp->cls, 0})) return seg_fail(m, err);
            if (!seg_push(sc, &m, o, g) || !seg_push(sc, &m, o, (wm_tseg){-1, &pp->sep, i ? 1 : 0})) return seg_fail(m, err);
        }
        break;
    case WM_TPP_TEMPLATE: {
        if (*n != 1 && *n != 2)
            return wm_err(err, WM_ERR_UNSUPPORTED, "tokenizer: TemplateProcessing applied to %zu encodings", *n);
        const wm_ttpl_piece *ps = *n == 2 ? pp->pair : pp->single;
        size_t np = *n == 2 ? pp->n_pair : pp->n_single;
        for (size_t i = 0; i < np; i++) {
            if (ps[i].seq >= 0) {
                if ((size_t)ps[i].seq >= *n)
                    return wm_err(err, WM_ERR_INPUT, "tokenizer: TemplateProcessing uses $B for a single sequence");
                wm_tseg g = SEG((size_t)ps[i].seq);
                g.type = ps[i].type_id;
                if (!seg_push(sc, &m, o, g)) return seg_fail(m, err);
            } else if (add_special && !seg_push(sc, &m, o, (wm_tseg){-1, &pp->specials[ps[i].special], ps[i].type_id}))
                return seg_fail(m, err);
        }
        break;
    }
    }
    *l = o;
    *n = m;
    return WM_OK;
#undef SEG
}

static int out_reserve(wm_encoding *e, size_t n) {
    if (n <= e->cap) return 1;
    size_t c = e->cap;
    size_t caps[9];
    for (int i = 0; i < 9; i++) caps[i] = c;
    if (!wm_tgrow(&e->ids, &caps[0], n, sizeof *e->ids) || !wm_tgrow(&e->type_ids, &caps[1], n, sizeof *e->type_ids) ||
        !wm_tgrow(&e->word_ids, &caps[2], n, sizeof *e->word_ids) ||
        !wm_tgrow(&e->attention_mask, &caps[3], n, sizeof *e->attention_mask) ||
        !wm_tgrow(&e->special_mask, &caps[4], n, sizeof *e->special_mask) ||
        !wm_tgrow(&e->offsets, &caps[5], n, sizeof *e->offsets) || !wm_tgrow(&e->tok_off, &caps[6], n, sizeof *e->tok_off) ||
        !wm_tgrow(&e->tok_len, &caps[7], n, sizeof *e->tok_len) || !wm_tgrow(&e->tok_ptr, &caps[8], n, sizeof *e->tok_ptr))
        return 0;
    size_t mn = caps[0];
    for (int i = 1; i < 9; i++)
        if (caps[i] < mn) mn = caps[i];
    e->cap = mn;
    return 1;
}

/* Appends a token; its string is copied into strbuf unless ref (it then lives in the tokenizer). */
static int out_push(wm_encoding *e, int32_t id, int32_t type, int32_t word, uint8_t special, wm_tok_offset off,
                    const char *s, size_t n, int ref) {
    if (!out_reserve(e, e->n + 1)) return 0;
    if (ref) {
        size_t i = e->n++;
        e->ids[i] = id;
        e->type_ids[i] = type;
        e->word_ids[i] = word;
        e->attention_mask[i] = 1;
        e->special_mask[i] = special;
        e->offsets[i] = off;
        e->tok_ptr[i] = s;
        e->tok_off[i] = 0;
        e->tok_len[i] = (uint32_t)n;
        return 1;
    }
    if (e->strbuf_n + n > UINT32_MAX || !wm_tgrow(&e->strbuf, &e->strbuf_cap, e->strbuf_n + n + 1, 1)) return 0;
    size_t i = e->n++;
    e->tok_ptr[i] = NULL;
    e->ids[i] = id;
    e->type_ids[i] = type;
    e->word_ids[i] = word;
    e->attention_mask[i] = 1;
    e->special_mask[i] = special;
    e->offsets[i] = off;
    memcpy(e->strbuf + e->strbuf_n, s, n);
    e->tok_off[i] = (uint32_t)e->strbuf_n;
    e->tok_len[i] = (uint32_t)n;
    e->strbuf_n += n;
    e->strbuf[e->strbuf_n] = 0;
    return 1;
}

wm_status wm_tpost_pad(wm_encoding *e, const wm_tok_padding *pad, size_t len, wm_error *err) {
    if (pad->multiple && len % pad->multiple) len += pad->multiple - len % pad->multiple;
    if (e->n >= len) return WM_OK;
    size_t add = len - e->n, old = e->n;
    size_t tl = strlen(pad->pad_token);
    if (!out_reserve(e, len) || !wm_tgrow(&e->strbuf, &e->strbuf_cap, e->strbuf_n + add * tl + 1, 1)) return OOM(err);
    if (pad->left) {
        memmove(e->ids + add, e->ids, old * sizeof *e->ids);
        memmove(e->type_ids + add, e->type_ids, old * sizeof *e->type_ids);
        memmove(e->word_ids + add, e->word_ids, old * sizeof *e->word_ids);
        memmove(e->attention_mask + add, e->attention_mask, old);
        memmove(e->special_mask + add, e->special_mask, old);
        memmove(e->offsets + add, e->offsets, old * sizeof *e->offsets);
        memmove(e->tok_off + add, e->tok_off, old * sizeof *e->tok_off);
        memmove(e->tok_len + add, e->tok_len, old * sizeof *e->tok_len);
        memmove(e->tok_ptr + add, e->tok_ptr, old * sizeof *e->tok_ptr);
    }
    size_t at = pad->left ? 0 : old;
    for (size_t i = at; i < at + add; i++) {
        e->ids[i] = pad->pad_id;
        e->type_ids[i] = pad->pad_type_id;
        e->word_ids[i] = -1;
        e->attention_mask[i] = 0;
        e->special_mask[i] = 1;
        e->offsets[i] = (wm_tok_offset){0, 0};
        memcpy(e->strbuf + e->strbuf_n, pad->pad_token, tl);
        e->tok_off[i] = (uint32_t)e->strbuf_n;
        e->tok_len[i] = (uint32_t)tl;
        e->tok_ptr[i] = NULL;
        e->strbuf_n += tl;
    }
    e->strbuf[e->strbuf_n] = 0;
    e->n = len;
    return WM_OK;
}

wm_status wm_tpost_finish(const wm_tokenizer *t, wm_tok_scratch *sc, int has_pair, const wm_encode_opts *o,
                          wm_encoding *out, wm_error *err) {
    const wm_tok_truncation *tr = o->use_defaults ? &t->trunc : &o->truncation;
    const wm_tok_padding *pad = o->use_defaults ? &t->pad : &o->padding;
    wm_tseq *a = &sc->seq[0], *b = has_pair ? &sc->seq[1] : NULL;
    wm_status st;
    if (tr->enabled) {
        size_t max_length = tr->max_length, added = o->add_special_tokens ? wm_tpost_added_count(t->post, has_pair) : 0;
        /* tokenizers subtracts in usize: a max_length below the added count wraps (no truncation) */
        if (added <= max_length && (st = truncate(tr, max_length - added, a, b, err))) return st;
    }
    size_t n = 0;
    int l = 0;
    if (!seg_push(sc, &n, 0, (wm_tseg){0, NULL, -1})) return OOM(err);
    if (b && !seg_push(sc, &n, 0, (wm_tseg){1, NULL, -1})) return OOM(err);
    if (t->post && (st = apply(t->post, sc, &l, &n, o->add_special_tokens, err))) return st;
    out->n = 0;
    out->strbuf_n = 0;
    size_t half = sc->segcap / 2;
    for (size_t i = 0; i < n; i++) {
        wm_tseg g = sc->segs[(size_t)l * half + i];
        if (g.seq >= 0) {
            const wm_tseq *q = &sc->seq[g.seq];
            for (size_t k = 0; k < q->n; k++)
                if (!out_push(out, q->ids[k], g.type >= 0 ? g.type : q->types[k], q->words[k], q->special[k], q->offs[k],
                              wm_tseq_tok(q, k), q->slen[k], q->sptr[k] != NULL))
                    return OOM(err);
        } else
            for (size_t k = 0; k < g.sp->n; k++)
                if (!out_push(out, g.sp->ids[k], g.type >= 0 ? g.type : 0, -1, 1, (wm_tok_offset){0, 0}, g.sp->toks[k],
                              g.sp->tok_lens[k], 1))
                    return OOM(err);
    }
    if (!out_reserve(out, 1) || !wm_tgrow(&out->strbuf, &out->strbuf_cap, 1, 1)) return OOM(err);
    if (!out->n) out->strbuf[0] = 0;
    if (pad->enabled) return wm_tpost_pad(out, pad, pad->length ? pad->length : out->n, err);
    return WM_OK;
}
