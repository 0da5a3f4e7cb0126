/*
 * spm_model.c - the SentencePiece ModelProto reader (protobuf wire format).
 *
 * A message is a run of (tag varint, value): tag = field << 3 | wire type;
 * wire type 0 a varint (at most 10 bytes), 1 eight bytes, 2 a varint length
 * and that many bytes, 5 four bytes. Every length is checked against what
 * is left of its enclosing message before it is used.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/spm_model.h"
#include "hf/tokenizer_unicode.h"

typedef struct rd {
    const uint8_t *p, *end, *base;
    const char *name;
    wm_error *err;
} rd;

static const char *const wt_names[8] = {"varint", "64-bit", "length-delimited", "start-group", "end-group",
                                        "32-bit", "reserved 6", "reserved 7"};

static wm_status bad(rd *r, const char *field, const char *why) {
    return wm_err(r->err, WM_ERR_INPUT, "%s: %s: %s (at byte %zu)", r->name, field, why, (size_t)(r->p - r->base));
}

static wm_status varint(rd *r, const char *field, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end) return bad(r, field, "truncated varint");
        uint8_t b = *r->p++;
        if (i == 9 && b > 1) return bad(r, field, "varint longer than 64 bits");
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return WM_OK;
        }
    }
    return bad(r, field, "varint longer than 10 bytes");
}

/* Reads a tag: field number and wire type (groups and reserved types refused). */
static wm_status tag(rd *r, const char *msg, uint32_t *field, int *wt) {
    uint64_t t;
    wm_status st = varint(r, msg, &t);
    if (st) return st;
    *wt = (int)(t & 7);
    if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff) return bad(r, msg, "field number 0 or past 2^29");
    *field = (uint32_t)(t >> 3);
    if (*wt != 0 && *wt != 1 && *wt != 2 && *wt != 5) {
        char why[96];
        snprintf(why, sizeof why, "field %u has wire type %d (%s), which this reader does not accept", *field, *wt,
                 wt_names[*wt]);
        return bad(r, msg, why);
    }
    return WM_OK;
}

/* A length-delimited value: [*s, *s + *n) inside the message. */
static wm_status bytes(rd *r, const char *field, const uint8_t **s, size_t *n) {
    uint64_t len;
    wm_status st = varint(r, field, &len);
    if (st) return st;
    if (len > (uint64_t)(r->end - r->p)) {
        char why[128];
        snprintf(why, sizeof why, "length %llu runs past the end of its message (%zu bytes left)",
                 (unsigned long long)len, (size_t)(r->end - r->p));
        return bad(r, field, why);
    }
    *s = r->p;
    *n = (size_t)len;
    r->p += len;
    return WM_OK;
}

/* Skips a value of wire type wt. */
/* Steps over the value of a field this reader does not use (protobuf's rule for unknown fields): a varint, a
 * length-delimited value or a fixed 64 / 32-bit one, each bounds-checked like a field that is read; groups
 * (wire types 3, 4) never get here, tag() refuses them. */
static wm_status skip(rd *r, const char *field, int wt) {
    uint64_t v;
    const uint8_t *s;
    size_t n;
    size_t fixed = wt == 1 ? 8 : 4;
    switch (wt) {
    case 0: return varint(r, field, &v);
    case 2: return bytes(r, field, &s, &n);
    default:
        if ((size_t)(r->end - r->p) < fixed) return bad(r, field, "truncated fixed-size value");
        r->p += fixed;
        return WM_OK;
    }
}

static wm_status want(rd *r, const char *field, int wt, int expect) {
    if (wt == expect) return WM_OK;
    char why[128];
    snprintf(why, sizeof why, "wire type %d (%s), expected %d (%s)", wt, wt_names[wt], expect, wt_names[expect]);
    return bad(r, field, why);
}

/* A string field into the pool: copied, NUL-terminated, checked UTF-8 (no NUL inside). */
typedef struct pool {
    char *buf;
    size_t n, cap;
} pool;

static wm_status pool_put(rd *r, pool *pl, const char *field, const uint8_t *s, size_t n, int text, size_t *off) {
    if (text && (!wm_u8_valid((const char *)s, n) || memchr(s, 0, n))) return bad(r, field, "not valid UTF-8 text");
    if (pl->n + n + 1 > pl->cap) { /* the pool never outgrows the file: sized once in wm_spm_parse */
        return bad(r, field, "string pool overflow");
    }
    memcpy(pl->buf + pl->n, s, n);
    pl->buf[pl->n + n] = 0;
    *off = pl->n;
    pl->n += n + 1;
    return WM_OK;
}

typedef struct strs { /* string fields by offset into the pool until the pool is final */
    size_t unk, bos, eos, pad, name, cmap, surf;
    int has_unk, has_bos, has_eos, has_pad, has_name, has_cmap, has_surf;
} strs;

static int32_t as_i32(uint64_t v) { return (int32_t)(uint32_t)v; } /* int32 fields: two's complement, 64-bit varint */

static wm_status read_piece(rd *r, pool *pl, size_t idx, wm_spm_piece *pc, size_t *off) {
    char f[64];
    int have = 0;
    pc->score = 0.0f;
    pc->type = WM_SPM_NORMAL;
    while (r->p < r->end) {
        uint32_t field;
        int wt;
        snprintf(f, sizeof f, "pieces[%zu]", idx);
        wm_status st = tag(r, f, &field, &wt);
        if (st) return st;
        if (field == 1) {
            snprintf(f, sizeof f, "pieces[%zu].piece", idx);
            const uint8_t *s;
            size_t n;
            if ((st = want(r, f, wt, 2)) || (st = bytes(r, f, &s, &n))) return st;
            if (!n) return bad(r, f, "empty piece");
            if (n > UINT32_MAX) return bad(r, f, "piece too long");
            if ((st = pool_put(r, pl, f, s, n, 1, off))) return st;
            pc->len = (uint32_t)n;
            have = 1;
        } else if (field == 2) {
            snprintf(f, sizeof f, "pieces[%zu].score", idx);
            if ((st = want(r, f, wt, 5))) return st;
            if (r->end - r->p < 4) return bad(r, f, "truncated float");
            uint32_t u = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
            memcpy(&pc->score, &u, 4);
            r->p += 4;
            if (!isfinite(pc->score)) return bad(r, f, "score is not finite");
        } else if (field == 3) {
            snprintf(f, sizeof f, "pieces[%zu].type", idx);
            uint64_t v;
            if ((st = want(r, f, wt, 0)) || (st = varint(r, f, &v))) return st;
            if (v < WM_SPM_NORMAL || v > WM_SPM_BYTE)
                return bad(r, f, "type is not one of NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE");
            pc->type = (int)v;
        } else if ((st = skip(r, f, wt))) {
            return st;
        }
    }
    if (!have) {
        snprintf(f, sizeof f, "pieces[%zu].piece", idx);
        return bad(r, f, "missing");
    }
    return WM_OK;
}

static wm_status read_trainer(rd *r, pool *pl, wm_spm_model *m, strs *ss) {
    while (r->p < r->end) {
        uint32_t field;
        int wt;
        wm_status st = tag(r, "trainer_spec", &field, &wt);
        if (st) return st;
        static const struct {
            uint32_t field;
            const char *name;
            int kind; /* 0 int32, 1 bool, 2 enum, 3 string */
        } known[] = {
            {3, "trainer_spec.model_type", 2},   {4, "trainer_spec.vocab_size", 0},
            {22, "trainer_spec.split_by_whitespace", 1}, {24, "trainer_spec.treat_whitespace_as_suffix", 1},
            {25, "trainer_spec.split_digits", 1}, {35, "trainer_spec.byte_fallback", 1},
            {40, "trainer_spec.unk_id", 0},      {41, "trainer_spec.bos_id", 0},
            {42, "trainer_spec.eos_id", 0},      {43, "trainer_spec.pad_id", 0},
            {44, "trainer_spec.unk_surface", 3}, {45, "trainer_spec.unk_piece", 3},   {46, "trainer_spec.bos_piece", 3},
            {47, "trainer_spec.eos_piece", 3},   {48, "trainer_spec.pad_piece", 3},
        };
        int k = -1;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (known[i].field == field) k = (int)i;
        if (k < 0) {
            if ((st = skip(r, "trainer_spec", wt))) return st;
            continue;
        }
        const char *fn = known[k].name;
        if (known[k].kind == 3) {
            const uint8_t *s;
            size_t n, off;
            if ((st = want(r, fn, wt, 2)) || (st = bytes(r, fn, &s, &n)) || (st = pool_put(r, pl, fn, s, n, 1, &off)))
                return st;
            if (field == 44) ss->surf = off, ss->has_surf = 1;
            else if (field == 45) ss->unk = off, ss->has_unk = 1;
            else if (field == 46) ss->bos = off, ss->has_bos = 1;
            else if (field == 47) ss->eos = off, ss->has_eos = 1;
            else ss->pad = off, ss->has_pad = 1;
            continue;
        }
        uint64_t v;
        if ((st = want(r, fn, wt, 0)) || (st = varint(r, fn, &v))) return st;
        switch (field) {
        case 3:
            if (v < 1 || v > 4) return bad(r, fn, "not one of UNIGRAM, BPE, WORD, CHAR");
            m->model_type = (int)v;
            break;
        case 4: m->vocab_size = as_i32(v); break;
        case 22: m->split_by_whitespace = v != 0; break;
        case 24: m->treat_whitespace_as_suffix = v != 0; break;
        case 25: m->split_digits = v != 0; break;
        case 35: m->byte_fallback = v != 0; break;
        case 40: m->unk_id = as_i32(v); break;
        case 41: m->bos_id = as_i32(v); break;
        case 42: m->eos_id = as_i32(v); break;
        default: m->pad_id = as_i32(v); break;
        }
    }
    return WM_OK;
}

static wm_status read_normalizer(rd *r, pool *pl, wm_spm_model *m, strs *ss) {
    while (r->p < r->end) {
        uint32_t field;
        int wt;
        wm_status st = tag(r, "normalizer_spec", &field, &wt);
        if (st) return st;
        if (field == 1 || field == 2) {
            const char *fn = field == 1 ? "normalizer_spec.name" : "normalizer_spec.precompiled_charsmap";
            const uint8_t *s;
            size_t n, off;
            if ((st = want(r, fn, wt, 2)) || (st = bytes(r, fn, &s, &n)) ||
                (st = pool_put(r, pl, fn, s, n, field == 1, &off)))
                return st;
            if (field == 1) ss->name = off, ss->has_name = 1;
            else ss->cmap = off, ss->has_cmap = 1, m->charsmap_len = n;
        } else if (field >= 3 && field <= 5) {
            static const char *const fns[] = {"normalizer_spec.add_dummy_prefix",
                                              "normalizer_spec.remove_extra_whitespaces",
                                              "normalizer_spec.escape_whitespaces"};
            uint64_t v;
            if ((st = want(r, fns[field - 3], wt, 0)) || (st = varint(r, fns[field - 3], &v))) return st;
            if (field == 3) m->add_dummy_prefix = v != 0;
            else if (field == 4) m->remove_extra_whitespaces = v != 0;
            else m->escape_whitespaces = v != 0;
        } else if ((st = skip(r, "normalizer_spec", wt))) {
            return st;
        }
    }
    return WM_OK;
}

const char *wm_spm_model_type_name(int t) {
    static const char *const n[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
    return t >= 1 && t <= 4 ? n[t] : n[0];
}

void wm_spm_free(wm_spm_model *m) {
    if (!m) return;
    free(m->pieces);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

wm_status wm_spm_parse(const uint8_t *data, size_t size, const char *name, wm_spm_model *m, wm_error *err) {
    memset(m, 0, sizeof *m);
    m->model_type = WM_SPM_UNIGRAM;
    m->vocab_size = 8000;
    m->unk_id = 0, m->bos_id = 1, m->eos_id = 2, m->pad_id = -1;
    m->split_by_whitespace = 1;
    m->add_dummy_prefix = m->remove_extra_whitespaces = m->escape_whitespaces = 1;
    if (!size || !data) return wm_err(err, WM_ERR_INPUT, "%s: empty file (no pieces)", name);
    rd r = {data, data + size, data, name, err};
    /* every string is a copy of bytes of the file plus a NUL: the pool never needs more than this */
    pool pl = {malloc(size + size / 2 + 8), 0, size + size / 2 + 8};
    size_t *offs = NULL, cap = 0;
    strs ss = {0};
    wm_status st = WM_OK;
    if (!pl.buf) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", name);
    int seen_trainer = 0, seen_norm = 0;
    while (r.p < r.end && !st) {
        uint32_t field;
        int wt;
        if ((st = tag(&r, "ModelProto", &field, &wt))) break;
        const char *fn = field == 1   ? "pieces"
                         : field == 2 ? "trainer_spec"
                         : field == 3 ? "normalizer_spec"
                                      : "ModelProto";
        if (field < 1 || field > 3) {
            st = skip(&r, fn, wt);
            continue;
        }
        const uint8_t *s;
        size_t n;
        if ((st = want(&r, fn, wt, 2)) || (st = bytes(&r, fn, &s, &n))) break;
        rd sub = {s, s + n, data, name, err};
        if (field == 1) {
            if (m->n >= WM_SPM_MAX_PIECES) {
                st = bad(&r, "pieces", "more than 2^24 pieces");
                break;
            }
            if (m->n >= cap) {
                size_t nc = cap ? cap * 2 : 1024;
                wm_spm_piece *np = realloc(m->pieces, nc * sizeof *np);
                if (np) m->pieces = np;
                size_t *no = np ? realloc(offs, nc * sizeof *no) : NULL;
                if (!np || !no) {
                    st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory (%zu pieces)", name, m->n);
                    break;
                }
                offs = no;
                cap = nc;
            }
            st = read_piece(&sub, &pl, m->n, &m->pieces[m->n], &offs[m->n]);
            if (!st) m->n++;
        } else if (field == 2) {
            if (seen_trainer++) st = bad(&r, "trainer_spec", "appears twice");
            else st = read_trainer(&sub, &pl, m, &ss);
        } else {
            if (seen_norm++) st = bad(&r, "normalizer_spec", "appears twice");
            else st = read_normalizer(&sub, &pl, m, &ss);
        }
    }
    if (!st && !m->n) st = wm_err(err, WM_ERR_INPUT, "%s: pieces: the model has no pieces", name);
    if (!st) {
        for (size_t i = 0; i < m->n; i++) m->pieces[i].s = pl.buf + offs[i];
        m->pool = pl.buf;
        pl.buf = NULL;
        m->unk_piece = ss.has_unk ? m->pool + ss.unk : "<unk>";
        m->bos_piece = ss.has_bos ? m->pool + ss.bos : "<s>";
        m->eos_piece = ss.has_eos ? m->pool + ss.eos : "</s>";
        m->pad_piece = ss.has_pad ? m->pool + ss.pad : "<pad>";
        m->unk_surface = ss.has_surf ? m->pool + ss.surf : " \xe2\x81\x87 ";
        m->norm_name = ss.has_name ? m->pool + ss.name : "";
        m->charsmap = ss.has_cmap && m->charsmap_len ? (const uint8_t *)m->pool + ss.cmap : NULL;
        if (!m->charsmap) m->charsmap_len = 0;
        int32_t n = (int32_t)m->n;
        const struct {
            const char *f;
            int32_t id;
        } ids[] = {{"trainer_spec.unk_id", m->unk_id}, {"trainer_spec.bos_id", m->bos_id},
                   {"trainer_spec.eos_id", m->eos_id}, {"trainer_spec.pad_id", m->pad_id}};
        for (int i = 0; i < 4 && !st; i++)
            if (ids[i].id < (i ? -1 : 0) || ids[i].id >= n)
                st = wm_err(err, WM_ERR_INPUT, "%s: %s: %d is not %sa piece id (the model has %d pieces)", name,
                            ids[i].f, (int)ids[i].id, i ? "-1 or " : "", (int)n);
        if (!st && m->pieces[m->unk_id].type != WM_SPM_UNKNOWN)
            st = wm_err(err, WM_ERR_INPUT, "%s: trainer_spec.unk_id: piece %d '%.40s' is not of type UNKNOWN", name,
                        (int)m->unk_id, m->pieces[m->unk_id].s);
        for (size_t i = 0; i < m->n && !st; i++)
            if (m->pieces[i].type == WM_SPM_UNKNOWN && (int32_t)i != m->unk_id)
                st = wm_err(err, WM_ERR_INPUT, "%s: pieces[%zu]: a second piece of type UNKNOWN", name, i);
        if (!st && m->model_type != WM_SPM_UNIGRAM && m->model_type != WM_SPM_BPE)
            st = wm_err(err, WM_ERR_UNSUPPORTED,
                        "%s: trainer_spec.model_type: %s models are not supported (UNIGRAM and BPE are)", name,
                        wm_spm_model_type_name(m->model_type));
    }
    free(offs);
    free(pl.buf);
    if (st) wm_spm_free(m);
    return st;
}

wm_status wm_spm_load(const char *path, wm_spm_model *m, wm_error *err) {
    wm_map mp;
    memset(m, 0, sizeof *m);
    wm_status st = wm_map_file(path, 0, &mp, err);
    if (st) return st;
    st = wm_spm_parse(mp.data, mp.size, path, m, err);
    wm_unmap(&mp);
    return st;
}
