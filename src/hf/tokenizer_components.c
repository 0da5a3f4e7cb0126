/*
 * tokenizer_components.c - normalizer, pre_tokenizer, post_processor and
 * decoder objects of tokenizer.json into their structs (arena-allocated;
 * the *_free functions release the compiled regexes). Nesting of Sequence
 * components is bounded by the JSON depth check.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define NOMEM(t, err) wm_err(err, WM_ERR_NOMEM, "%s: out of memory", (t)->name)

static void *node(wm_tokenizer *t, size_t n) { return wm_arena_alloc(&t->arena, n); }

/* A JSON string holding exactly one character (Metaspace replacement, Strip content ...). */
static wm_status one_char(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, uint32_t def,
                          uint32_t *cp, wm_error *err) {
    const char *s;
    size_t n;
    wm_status st = wm_tjson_str(t, o, key, path, 0, &s, &n, err);
    if (st) return st;
    if (!s) {
        *cp = def;
        return WM_OK;
    }
    size_t adv = 0;
    if (!n || (*cp = wm_u8_get(s, &adv), adv != n))
        return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected exactly one character", t->name, path, key);
    return WM_OK;
}

/* {"String": "..."} or {"Regex": "..."} */
static wm_status pattern(wm_tokenizer *t, const cJSON *o, const char *path, wm_tregex *re, wm_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *s = p ? cJSON_GetObjectItemCaseSensitive(p, "String") : NULL;
    const cJSON *r = p ? cJSON_GetObjectItemCaseSensitive(p, "Regex") : NULL;
    char what[600];
    snprintf(what, sizeof what, "%s: %s.pattern", t->name, path);
    if (cJSON_IsString(s)) return wm_tregex_compile(re, s->valuestring, strlen(s->valuestring), 1, what, err);
    if (cJSON_IsString(r)) return wm_tregex_compile(re, r->valuestring, strlen(r->valuestring), 0, what, err);
    return wm_err(err, WM_ERR_INPUT, "%s: expected {\"String\": ...} or {\"Regex\": ...}", what);
}

static wm_status behavior(wm_tokenizer *t, const cJSON *o, const char *path, wm_split_behavior def,
                          wm_split_behavior *b, wm_error *err) {
    const char *s;
    wm_status st = wm_tjson_str(t, o, "behavior", path, 0, &s, NULL, err);
    if (st) return st;
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    *b = def;
    if (!s) return WM_OK;
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *b = (wm_split_behavior)i;
            return WM_OK;
        }
    return wm_err(err, WM_ERR_INPUT, "%s: %s.behavior: unknown '%s'", t->name, path, s);
}

static wm_status prepend_scheme(wm_tokenizer *t, const cJSON *o, const char *path, int *out, wm_error *err) {
    const char *s;
    int aps;
    wm_status st = wm_tjson_str(t, o, "prepend_scheme", path, 0, &s, NULL, err);
    if (!st) st = wm_tjson_bool(t, o, "add_prefix_space", path, 1, &aps, err);
    if (st) return st;
    *out = WM_PREPEND_ALWAYS;
    if (s && !strcmp(s, "first")) *out = WM_PREPEND_FIRST;
    else if (s && !strcmp(s, "never")) *out = WM_PREPEND_NEVER;
    else if (s && strcmp(s, "always"))
        return wm_err(err, WM_ERR_INPUT, "%s: %s.prepend_scheme: unknown '%s'", t->name, path, s);
    if (!aps) {
        if (*out != WM_PREPEND_NEVER && s)
            return wm_err(err, WM_ERR_INPUT, "%s: %s: add_prefix_space does not match prepend_scheme", t->name, path);
        *out = WM_PREPEND_NEVER;
    }
    return WM_OK;
}

/* The kids of a Sequence: array key. */
static wm_status kids(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, size_t *n, void ***out,
                      wm_error *err) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a)) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected an array", t->name, path, key);
    *n = (size_t)cJSON_GetArraySize(a);
    *out = *n ? node(t, *n * sizeof(void *)) : NULL;
    if (*n && !*out) return NOMEM(t, err);
    return WM_OK;
}

static const char *type_of(wm_tokenizer *t, const cJSON *j, const char *path, wm_error *err) {
    const char *ty = cJSON_IsObject(j) ? wm_tjson_type(j) : NULL;
    if (!ty) wm_err(err, WM_ERR_INPUT, "%s: %s: expected an object with a \"type\"", t->name, path);
    return ty;
}

/* ------------------------------------------------------------ normalizers */

static int b64v(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with padding into an arena buffer. */
static wm_status base64(wm_tokenizer *t, const char *s, size_t n, const char *what, uint8_t **out, size_t *len,
                        wm_error *err) {
    if (n % 4) return wm_err(err, WM_ERR_INPUT, "%s: %s: base64 length is not a multiple of 4", t->name, what);
    uint8_t *b = wm_arena_alloc(&t->arena, n / 4 * 3 + 4);
    if (!b) return NOMEM(t, err);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            v[j] = b64v(s[i + j]);
            if (s[i + j] == '=' && i + 4 == n && j >= 2) pad++, v[j] = 0;
            else if (v[j] < 0 || pad) return wm_err(err, WM_ERR_INPUT, "%s: %s: not base64 at %zu", t->name, what, i + j);
        }
        uint32_t x = ((uint32_t)v[0] << 18) | ((uint32_t)v[1] << 12) | ((uint32_t)v[2] << 6) | (uint32_t)v[3];
        b[k++] = (uint8_t)(x >> 16);
        if (pad < 2) b[k++] = (uint8_t)(x >> 8);
        if (pad < 1) b[k++] = (uint8_t)x;
    }
    *out = b;
    *len = k;
    return WM_OK;
}

/* {"type":"Precompiled","precompiled_charsmap": base64 of [u32 trie bytes][trie][NUL-separated strings]} */
static wm_status precompiled(wm_tokenizer *t, const cJSON *j, const char *path, wm_tnorm *n, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "precompiled_charsmap");
    char what[300];
    snprintf(what, sizeof what, "%s.precompiled_charsmap", path);
    if (cJSON_IsNull(v)) return WM_OK; /* no map: the identity */
    if (!cJSON_IsString(v)) return wm_err(err, WM_ERR_INPUT, "%s: %s: expected a base64 string", t->name, what);
    uint8_t *b = NULL;
    size_t len = 0;
    wm_status st = base64(t, v->valuestring, strlen(v->valuestring), what, &b, &len, err);
    if (st) return st;
    if (len < 4) return wm_err(err, WM_ERR_INPUT, "%s: %s: shorter than its header", t->name, what);
    uint32_t tsz = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
    size_t units = tsz / 4;
    if (units > (len - 4) / 4) return wm_err(err, WM_ERR_INPUT, "%s: %s: trie size past the end", t->name, what);
    uint32_t *trie = wm_arena_alloc(&t->arena, (units ? units : 1) * sizeof *trie);
    if (!trie) return NOMEM(t, err);
    for (size_t i = 0; i < units; i++) {
        const uint8_t *q = b + 4 + 4 * i;
        trie[i] = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24);
    }
    n->trie = trie;
    n->trie_n = units;
    n->norm_blob = (const char *)b + 4 + 4 * units;
    n->norm_len = len - 4 - 4 * units;
    if (!wm_u8_valid(n->norm_blob, n->norm_len))
        return wm_err(err, WM_ERR_INPUT, "%s: %s: replacement strings are not valid UTF-8", t->name, what);
    return WM_OK;
}

wm_status wm_tjson_normalizer(wm_tokenizer *t, const cJSON *j, const char *path, wm_tnorm **out, int depth,
                              wm_error *err) {
    if (depth > 32) return wm_err(err, WM_ERR_INPUT, "%s: %s: Sequence nested deeper than 32", t->name, path);
    const char *ty = type_of(t, j, path, err);
    if (!ty) return WM_ERR_INPUT;
    wm_tnorm *n = node(t, sizeof *n);
    if (!n) return NOMEM(t, err);
    *out = n;
    wm_status st = WM_OK;
    int sa = -1;
    if (!strcmp(ty, "Sequence")) {
        n->kind = WM_TN_SEQUENCE;
        if ((st = kids(t, j, "normalizers", path, &n->n_kids, (void ***)&n->kids, err))) return st;
        size_t i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "normalizers")) {
            char p[256];
            snprintf(p, sizeof p, "%s.normalizers[%zu]", path, i);
            if ((st = wm_tjson_normalizer(t, e, p, &n->kids[i++], depth + 1, err))) return st;
        }
    } else if (!strcmp(ty, "NFC")) n->kind = WM_TN_NFC;
    else if (!strcmp(ty, "NFD")) n->kind = WM_TN_NFD;
    else if (!strcmp(ty, "NFKC")) n->kind = WM_TN_NFKC;
    else if (!strcmp(ty, "NFKD")) n->kind = WM_TN_NFKD;
    else if (!strcmp(ty, "Lowercase")) n->kind = WM_TN_LOWERCASE;
    else if (!strcmp(ty, "StripAccents")) n->kind = WM_TN_STRIP_ACCENTS;
    else if (!strcmp(ty, "Nmt")) n->kind = WM_TN_NMT;
    else if (!strcmp(ty, "ByteLevel")) n->kind = WM_TN_BYTELEVEL;
    else if (!strcmp(ty, "Strip")) {
        n->kind = WM_TN_STRIP;
        if ((st = wm_tjson_bool(t, j, "strip_left", path, 1, &n->left, err)) ||
            (st = wm_tjson_bool(t, j, "strip_right", path, 1, &n->right, err)))
            return st;
    } else if (!strcmp(ty, "BertNormalizer")) {
        n->kind = WM_TN_BERT;
        if ((st = wm_tjson_bool(t, j, "clean_text", path, 1, &n->clean_text, err)) ||
            (st = wm_tjson_bool(t, j, "handle_chinese_chars", path, 1, &n->handle_chinese, err)) ||
            (st = wm_tjson_bool(t, j, "lowercase", path, 1, &n->lowercase, err)) ||
            (st = wm_tjson_bool(t, j, "strip_accents", path, -1, &sa, err)))
            return st;
        n->strip_accents = sa < 0 ? n->lowercase : sa;
    } else if (!strcmp(ty, "Prepend")) {
        n->kind = WM_TN_PREPEND;
        if ((st = wm_tjson_str(t, j, "prepend", path, 1, &n->str, &n->str_len, err))) return st;
    } else if (!strcmp(ty, "Precompiled")) {
        n->kind = WM_TN_PRECOMPILED;
        if ((st = precompiled(t, j, path, n, err))) return st;
    } else if (!strcmp(ty, "Replace")) {
        n->kind = WM_TN_REPLACE;
        if ((st = wm_tjson_str(t, j, "content", path, 1, &n->str, &n->str_len, err))) return st;
        if ((st = pattern(t, j, path, &n->re, err))) return st;
    } else
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: %s: unsupported normalizer type '%s'", t->name, path, ty);
    return WM_OK;
}

void wm_tnorm_free(wm_tnorm *n) {
    if (!n) return;
    wm_tregex_free(&n->re);
    for (size_t i = 0; i < n->n_kids; i++) wm_tnorm_free(n->kids[i]);
}

/* --------------------------------------------------------- pre-tokenizers */

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

wm_status wm_tjson_pretok(wm_tokenizer *t, const cJSON *j, const char *path, wm_tpre **out, int depth,
                          wm_error *err) {
    if (depth > 32) return wm_err(err, WM_ERR_INPUT, "%s: %s: Sequence nested deeper than 32", t->name, path);
    const char *ty = type_of(t, j, path, err);
    if (!ty) return WM_ERR_INPUT;
    wm_tpre *p = node(t, sizeof *p);
    if (!p) return NOMEM(t, err);
    *out = p;
    wm_status st = WM_OK;
    char what[600];
    if (!strcmp(ty, "Sequence")) {
        p->kind = WM_TP_SEQUENCE;
        if ((st = kids(t, j, "pretokenizers", path, &p->n_kids, (void ***)&p->kids, err))) return st;
        size_t i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "pretokenizers")) {
            char q[256];
            snprintf(q, sizeof q, "%s.pretokenizers[%zu]", path, i);
            if ((st = wm_tjson_pretok(t, e, q, &p->kids[i++], depth + 1, err))) return st;
        }
    } else if (!strcmp(ty, "ByteLevel")) {
        p->kind = WM_TP_BYTELEVEL;
        if ((st = wm_tjson_bool(t, j, "add_prefix_space", path, 1, &p->add_prefix_space, err)) ||
            (st = wm_tjson_bool(t, j, "trim_offsets", path, 1, &p->trim_offsets, err)) ||
            (st = wm_tjson_bool(t, j, "use_regex", path, 1, &p->use_regex, err)))
            return st;
        snprintf(what, sizeof what, "%s: %s (ByteLevel regex)", t->name, path);
        if (p->use_regex && (st = wm_tregex_compile(&p->re, GPT2_REGEX, strlen(GPT2_REGEX), 0, what, err))) return st;
    } else if (!strcmp(ty, "Split")) {
        p->kind = WM_TP_SPLIT;
        if ((st = behavior(t, j, path, WM_SPLIT_ISOLATED, &p->behavior, err)) ||
            (st = wm_tjson_bool(t, j, "invert", path, 0, &p->invert, err)) || (st = pattern(t, j, path, &p->re, err)))
            return st;
    } else if (!strcmp(ty, "Metaspace")) {
        p->kind = WM_TP_METASPACE;
        if ((st = one_char(t, j, "replacement", path, 0x2581, &p->cp, err)) ||
            (st = prepend_scheme(t, j, path, &p->prepend_scheme, err)) ||
            (st = wm_tjson_bool(t, j, "split", path, 1, &p->split, err)))
            return st;
        p->rep_len = wm_u8_put(p->cp, p->rep);
    } else if (!strcmp(ty, "Whitespace")) p->kind = WM_TP_WHITESPACE;
    else if (!strcmp(ty, "WhitespaceSplit")) p->kind = WM_TP_WHITESPACE_SPLIT;
    else if (!strcmp(ty, "BertPreTokenizer")) p->kind = WM_TP_BERT;
    else if (!strcmp(ty, "Digits")) {
        p->kind = WM_TP_DIGITS;
        if ((st = wm_tjson_bool(t, j, "individual_digits", path, 0, &p->individual, err))) return st;
    } else if (!strcmp(ty, "Punctuation")) {
        p->kind = WM_TP_PUNCTUATION;
        if ((st = behavior(t, j, path, WM_SPLIT_ISOLATED, &p->behavior, err))) return st;
    } else if (!strcmp(ty, "CharDelimiterSplit") || !strcmp(ty, "Delimiter")) {
        p->kind = WM_TP_DELIMITER;
        if ((st = one_char(t, j, "delimiter", path, ' ', &p->cp, err))) return st;
    } else if (!strcmp(ty, "FixedLength")) {
        int64_t v;
        p->kind = WM_TP_FIXED_LENGTH;
        if ((st = wm_tjson_int(t, j, "length", path, 5, 1, INT32_MAX, &v, err))) return st;
        p->length = (size_t)v;
    } else
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: %s: unsupported pre-tokenizer type '%s'", t->name, path, ty);
    return WM_OK;
}

void wm_tpre_free(wm_tpre *p) {
    if (!p) return;
    wm_tregex_free(&p->re);
    for (size_t i = 0; i < p->n_kids; i++) wm_tpre_free(p->kids[i]);
}

/* --------------------------------------------------------- post-processors */

/* ["[CLS]", 101] */
static wm_status tok_pair(wm_tokenizer *t, const cJSON *j, const char *key, const char *path, wm_ttpl_special *sp,
                          wm_error *err) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
    char what[300];
    snprintf(what, sizeof what, "%s.%s", path, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsString(cJSON_GetArrayItem(a, 0)))
        return wm_err(err, WM_ERR_INPUT, "%s: %s: expected [token, id]", t->name, what);
    const char *s = cJSON_GetArrayItem(a, 0)->valuestring;
    size_t n = strlen(s);
    sp->ids = node(t, sizeof *sp->ids);
    sp->toks = node(t, sizeof *sp->toks);
    sp->tok_lens = node(t, sizeof *sp->tok_lens);
    char *c = wm_arena_strndup(&t->arena, s, n);
    if (!sp->ids || !sp->toks || !sp->tok_lens || !c) return NOMEM(t, err);
    if (!wm_u8_valid(s, n)) return wm_err(err, WM_ERR_INPUT, "%s: %s: not valid UTF-8", t->name, what);
    sp->n = 1;
    sp->name = c;
    sp->toks[0] = c;
    sp->tok_lens[0] = n;
    return wm_tjson_id(t, cJSON_GetArrayItem(a, 1), what, &sp->ids[0], err);
}

/* The pieces of template key ("single" / "pair"); names: special token name -> index into pp->specials. */
static wm_status template_pieces(wm_tokenizer *t, wm_tpost *pp, const wm_tmap *names, const cJSON *j, const char *key,
                                 const char *path, wm_ttpl_piece **out, size_t *n, wm_error *err) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsArray(a)) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected an array", t->name, path, key);
    *n = (size_t)cJSON_GetArraySize(a);
    *out = node(t, (*n ? *n : 1) * sizeof **out);
    if (!*out) return NOMEM(t, err);
    size_t i = 0, added = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        wm_ttpl_piece *p = &(*out)[i];
        char q[300];
        snprintf(q, sizeof q, "%s.%s[%zu]", path, key, i++);
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(e, "Sequence");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *body = sq ? sq : sp;
        if (!cJSON_IsObject(body))
            return wm_err(err, WM_ERR_INPUT, "%s: %s: expected {\"Sequence\": ...} or {\"SpecialToken\": ...}", t->name, q);
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(body, "id");
        int64_t ty;
        wm_status st = wm_tjson_int(t, body, "type_id", q, 0, 0, INT32_MAX, &ty, err);
        if (st) return st;
        p->type_id = (int32_t)ty;
        if (!cJSON_IsString(idv)) return wm_err(err, WM_ERR_INPUT, "%s: %s.id: expected a string", t->name, q);
        if (sq) {
            if (!strcmp(idv->valuestring, "A")) p->seq = 0;
            else if (!strcmp(idv->valuestring, "B")) p->seq = 1;
            else return wm_err(err, WM_ERR_INPUT, "%s: %s.id: expected \"A\" or \"B\"", t->name, q);
            continue;
        }
        p->seq = -1;
        p->special = wm_tmap_get(names, idv->valuestring, strlen(idv->valuestring));
        if (p->special < 0)
            return wm_err(err, WM_ERR_INPUT, "%s: %s: special token '%.100s' is not defined in special_tokens", t->name,
                          q, idv->valuestring);
        added += pp->specials[p->special].n;
        if (added > WM_TOK_MAX_TEMPLATE_TOKENS)
            return wm_err(err, WM_ERR_INPUT,
                          "%s: %s.%s: the template adds more than %u special tokens to every encoding (the limit "
                          "WM_TOK_MAX_TEMPLATE_TOKENS in src/hf/tokenizer_impl.h; real templates add a few)",
                          t->name, path, key, (unsigned)WM_TOK_MAX_TEMPLATE_TOKENS);
    }
    return WM_OK;
}

/* special_tokens: {name: {"id", "ids", "tokens"}}, into pp->specials and names (name -> index, the last of a
 * repeated name wins). One pass over each array: linear in the file. */
static wm_status template_specials(wm_tokenizer *t, wm_tpost *pp, wm_tmap *names, const cJSON *j, const char *path,
                                   wm_error *err) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
    if (!m || cJSON_IsNull(m)) return WM_OK;
    if (!cJSON_IsObject(m)) return wm_err(err, WM_ERR_INPUT, "%s: %s.special_tokens: expected an object", t->name, path);
    pp->n_specials = (size_t)cJSON_GetArraySize(m);
    pp->specials = node(t, (pp->n_specials ? pp->n_specials : 1) * sizeof *pp->specials);
    if (!pp->specials) return NOMEM(t, err);
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, m) {
        wm_ttpl_special *sp = &pp->specials[i];
        char q[300];
        snprintf(q, sizeof q, "%s.special_tokens[\"%.80s\"]", path, e->string);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(e, "ids"), *toks = cJSON_GetObjectItemCaseSensitive(e, "tokens");
        if (!cJSON_IsArray(ids) || !cJSON_IsArray(toks) || cJSON_GetArraySize(ids) != cJSON_GetArraySize(toks))
            return wm_err(err, WM_ERR_INPUT, "%s: %s: ids and tokens must be arrays of the same length", t->name, q);
        sp->name = wm_arena_strdup(&t->arena, e->string ? e->string : "");
        sp->n = (size_t)cJSON_GetArraySize(ids);
        if (sp->n > WM_TOK_MAX_TEMPLATE_TOKENS)
            return wm_err(err, WM_ERR_INPUT,
                          "%s: %s: %zu ids, more than the %u special tokens a template may add (the limit "
                          "WM_TOK_MAX_TEMPLATE_TOKENS in src/hf/tokenizer_impl.h)",
                          t->name, q, sp->n, (unsigned)WM_TOK_MAX_TEMPLATE_TOKENS);
        sp->ids = node(t, (sp->n ? sp->n : 1) * sizeof *sp->ids);
        sp->toks = node(t, (sp->n ? sp->n : 1) * sizeof *sp->toks);
        sp->tok_lens = node(t, (sp->n ? sp->n : 1) * sizeof *sp->tok_lens);
        if (!sp->name || !sp->ids || !sp->toks || !sp->tok_lens) return NOMEM(t, err);
        if (wm_tmap_put(names, sp->name, strlen(sp->name), (int32_t)i) < 0) return NOMEM(t, err);
        const cJSON *idv = ids->child, *s = toks->child;
        for (size_t k = 0; k < sp->n; k++, idv = idv->next, s = s->next) {
            wm_status st = wm_tjson_id(t, idv, q, &sp->ids[k], err);
            if (st) return st;
            if (!cJSON_IsString(s) || !wm_u8_valid(s->valuestring, strlen(s->valuestring)))
                return wm_err(err, WM_ERR_INPUT, "%s: %s.tokens[%zu]: expected a UTF-8 string", t->name, q, k);
            sp->toks[k] = wm_arena_strdup(&t->arena, s->valuestring);
            sp->tok_lens[k] = strlen(s->valuestring);
            if (!sp->toks[k]) return NOMEM(t, err);
        }
        i++;
    }
    return WM_OK;
}

wm_status wm_tjson_post(wm_tokenizer *t, const cJSON *j, const char *path, wm_tpost **out, int depth, wm_error *err) {
    if (depth > 32) return wm_err(err, WM_ERR_INPUT, "%s: %s: Sequence nested deeper than 32", t->name, path);
    const char *ty = type_of(t, j, path, err);
    if (!ty) return WM_ERR_INPUT;
    wm_tpost *pp = node(t, sizeof *pp);
    if (!pp) return NOMEM(t, err);
    *out = pp;
    wm_status st;
    if (!strcmp(ty, "Sequence")) {
        pp->kind = WM_TPP_SEQUENCE;
        if ((st = kids(t, j, "processors", path, &pp->n_kids, (void ***)&pp->kids, err))) return st;
        size_t i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "processors")) {
            char q[256];
            snprintf(q, sizeof q, "%s.processors[%zu]", path, i);
            if ((st = wm_tjson_post(t, e, q, &pp->kids[i++], depth + 1, err))) return st;
        }
    } else if (!strcmp(ty, "BertProcessing") || !strcmp(ty, "RobertaProcessing")) {
        pp->kind = ty[0] == 'B' ? WM_TPP_BERT : WM_TPP_ROBERTA;
        if ((st = tok_pair(t, j, "cls", path, &pp->cls, err)) || (st = tok_pair(t, j, "sep", path, &pp->sep, err)) ||
            (st = wm_tjson_bool(t, j, "trim_offsets", path, 1, &pp->trim_offsets, err)) ||
            (st = wm_tjson_bool(t, j, "add_prefix_space", path, 1, &pp->add_prefix_space, err)))
            return st;
    } else if (!strcmp(ty, "ByteLevel")) {
        pp->kind = WM_TPP_BYTELEVEL;
        if ((st = wm_tjson_bool(t, j, "trim_offsets", path, 1, &pp->trim_offsets, err)) ||
            (st = wm_tjson_bool(t, j, "add_prefix_space", path, 1, &pp->add_prefix_space, err)))
            return st;
    } else if (!strcmp(ty, "TemplateProcessing")) {
        pp->kind = WM_TPP_TEMPLATE;
        wm_tmap names = {0};
        if ((st = template_specials(t, pp, &names, j, path, err)) ||
            (st = template_pieces(t, pp, &names, j, "single", path, &pp->single, &pp->n_single, err)) ||
            (st = template_pieces(t, pp, &names, j, "pair", path, &pp->pair, &pp->n_pair, err))) {
            wm_tmap_free(&names);
            return st;
        }
        wm_tmap_free(&names);
    } else
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: %s: unsupported post-processor type '%s'", t->name, path, ty);
    return WM_OK;
}

void wm_tpost_free(wm_tpost *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_kids; i++) wm_tpost_free(p->kids[i]);
}

/* ---------------------------------------------------------------- decoders */

wm_status wm_tjson_decoder(wm_tokenizer *t, const cJSON *j, const char *path, wm_tdec **out, int depth,
                           wm_error *err) {
    if (depth > 32) return wm_err(err, WM_ERR_INPUT, "%s: %s: Sequence nested deeper than 32", t->name, path);
    const char *ty = type_of(t, j, path, err);
    if (!ty) return WM_ERR_INPUT;
    wm_tdec *d = node(t, sizeof *d);
    if (!d) return NOMEM(t, err);
    *out = d;
    wm_status st;
    int64_t v;
    if (!strcmp(ty, "Sequence")) {
        d->kind = WM_TD_SEQUENCE;
        if ((st = kids(t, j, "decoders", path, &d->n_kids, (void ***)&d->kids, err))) return st;
        size_t i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "decoders")) {
            char q[256];
            snprintf(q, sizeof q, "%s.decoders[%zu]", path, i);
            if ((st = wm_tjson_decoder(t, e, q, &d->kids[i++], depth + 1, err))) return st;
        }
    } else if (!strcmp(ty, "ByteLevel")) d->kind = WM_TD_BYTELEVEL;
    else if (!strcmp(ty, "ByteFallback")) d->kind = WM_TD_BYTEFALLBACK;
    else if (!strcmp(ty, "Fuse")) d->kind = WM_TD_FUSE;
    else if (!strcmp(ty, "Metaspace")) {
        d->kind = WM_TD_METASPACE;
        if ((st = one_char(t, j, "replacement", path, 0x2581, &d->cp, err)) ||
            (st = prepend_scheme(t, j, path, &d->prepend_scheme, err)))
            return st;
    } else if (!strcmp(ty, "WordPiece")) {
        d->kind = WM_TD_WORDPIECE;
        if ((st = wm_tjson_str(t, j, "prefix", path, 0, &d->s1, &d->s1_len, err)) ||
            (st = wm_tjson_bool(t, j, "cleanup", path, 1, &d->cleanup, err)))
            return st;
        if (!d->s1) d->s1 = "##", d->s1_len = 2;
    } else if (!strcmp(ty, "BPEDecoder")) {
        d->kind = WM_TD_BPE;
        if ((st = wm_tjson_str(t, j, "suffix", path, 0, &d->s1, &d->s1_len, err))) return st;
        if (!d->s1) d->s1 = "</w>", d->s1_len = 4;
    } else if (!strcmp(ty, "Strip")) {
        d->kind = WM_TD_STRIP;
        if ((st = one_char(t, j, "content", path, ' ', &d->cp, err))) return st;
        if ((st = wm_tjson_int(t, j, "start", path, 0, 0, INT32_MAX, &v, err))) return st;
        d->start = (size_t)v;
        if ((st = wm_tjson_int(t, j, "stop", path, 0, 0, INT32_MAX, &v, err))) return st;
        d->stop = (size_t)v;
    } else if (!strcmp(ty, "Replace")) {
        d->kind = WM_TD_REPLACE;
        if ((st = wm_tjson_str(t, j, "content", path, 1, &d->s1, &d->s1_len, err)) ||
            (st = pattern(t, j, path, &d->re, err)))
            return st;
    } else if (!strcmp(ty, "CTC")) {
        d->kind = WM_TD_CTC;
        if ((st = wm_tjson_str(t, j, "pad_token", path, 0, &d->s1, &d->s1_len, err)) ||
            (st = wm_tjson_str(t, j, "word_delimiter_token", path, 0, &d->s2, &d->s2_len, err)) ||
            (st = wm_tjson_bool(t, j, "cleanup", path, 1, &d->cleanup, err)))
            return st;
        if (!d->s1) d->s1 = "<pad>", d->s1_len = 5;
        if (!d->s2) d->s2 = "|", d->s2_len = 1;
    } else
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: %s: unsupported decoder type '%s'", t->name, path, ty);
    return WM_OK;
}

void wm_tdec_free(wm_tdec *d) {
    if (!d) return;
    wm_tregex_free(&d->re);
    for (size_t i = 0; i < d->n_kids; i++) wm_tdec_free(d->kids[i]);
}
