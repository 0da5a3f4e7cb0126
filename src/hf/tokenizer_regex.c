/*
 * tokenizer_regex.c - Split / Replace patterns. tokenizer.json regexes are
 * written for Oniguruma (the `onig` crate); we run them with PCRE2 (UTF,
 * UCP, JIT) after translating the escapes whose meaning differs:
 *   \s \S  Oniguruma: U+0009-000D, U+0085 and Z*  (PCRE2 also has U+180E)
 *   \w \W  Oniguruma: L, M, Nd, Pc                (PCRE2: L, N, _)
 *   \d \D  Nd;  \h \H  hex digit (PCRE2: horizontal space);  \uHHHH
 * and general categories (\p{L}, \p{N} ...) are those of the onig crate's
 * Unicode 16.0: PCRE2 10.42 knows 14.0, so each class also gets what its
 * category gained since (tokenizer_unidata.c). ^ and $ are line anchors in
 * Oniguruma's default syntax (PCRE2_MULTILINE).
 */
#include <stdio.h>
#include <string.h>

#include "hf/tokenizer_impl.h"
#include "hf/tokenizer_unidata.h"

typedef struct rbuf {
    char *p;
    size_t n, cap;
    int oom;
} rbuf;

static void put(rbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (!wm_tgrow(&b->p, &b->cap, b->n + n + 1, 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_(rbuf *b, const char *s) { put(b, s, strlen(s)); }

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static void put_ranges(rbuf *b, const wm_urange *r, size_t n) {
    char tmp[48];
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo == r[i].hi) snprintf(tmp, sizeof tmp, "\\x{%X}", r[i].lo);
        else snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", r[i].lo, r[i].hi);
        puts_(b, tmp);
    }
}

/* The general category named s[0..n) (short or long name, case, '_', '-' and ' ' ignored), or NULL. */
static const wm_ugc_delta *find_gc(const char *s, size_t n) {
    char want[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof want; i++)
        if (s[i] != '_' && s[i] != '-' && s[i] != ' ') want[k++] = (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] + 32 : s[i]);
    want[k] = 0;
    for (const wm_ugc_delta *g = wm_ud16_gc; g->name; g++) {
        const char *names[2] = {g->name, g->long_name};
        for (int v = 0; v < 2; v++) {
            char have[64];
            size_t h = 0;
            for (const char *c = names[v]; *c && h + 1 < sizeof have; c++)
                if (*c != '_') have[h++] = (char)((*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
            have[h] = 0;
            if (!strcmp(have, want)) return g;
        }
    }
    return NULL;
}

/*
 * A set of general categories (as in Unicode 16.0) plus literal items,
 * emitted as a class body (in_class) or a whole expression. PCRE2's own
 * \p{X} (Unicode 14.0) is patched with what X gained since; what it lost
 * is removed with a lookahead outside classes (inside one it cannot be).
 */
static void put_set(rbuf *b, const char *const *gcs, size_t ngc, const char *extra, int negate, int in_class) {
    const wm_ugc_delta *g[8];
    int any_rem = 0;
    for (size_t i = 0; i < ngc; i++) {
        g[i] = find_gc(gcs[i], strlen(gcs[i]));
        any_rem |= g[i]->n_rem != 0;
    }
    if (in_class) {
        puts_(b, extra);
        for (size_t i = 0; i < ngc; i++) {
            puts_(b, "\\p{");
            puts_(b, gcs[i]);
            puts_(b, "}");
            put_ranges(b, g[i]->add, g[i]->n_add);
        }
        return;
    }
    if (any_rem) puts_(b, negate ? "(?:" : "(?:(?![");
    if (any_rem && !negate) {
        for (size_t i = 0; i < ngc; i++) put_ranges(b, g[i]->rem, g[i]->n_rem);
        puts_(b, "])");
    }
    puts_(b, negate ? "[^" : "[");
    put_set(b, gcs, ngc, extra, 0, 1);
    puts_(b, "]");
    if (any_rem && negate) {
        puts_(b, "|[");
        for (size_t i = 0; i < ngc; i++) put_ranges(b, g[i]->rem, g[i]->n_rem);
        puts_(b, "])");
    } else if (any_rem)
        puts_(b, ")");
}

static const char *const GC_S[] = {"Z"}, *const GC_W[] = {"L", "M", "Nd", "Pc"}, *const GC_D[] = {"Nd"};
#define S_EXTRA "\\t-\\r\\x{85}"

/* Translates pat into b; returns NULL or the reason it cannot be translated. */
static const char *translate(const char *pat, size_t len, rbuf *b) {
    int in_class = 0, class_start = 0;
    for (size_t i = 0; i < len; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            char e = pat[++i];
            switch (e) {
            case 's': put_set(b, GC_S, 1, S_EXTRA, 0, in_class); break;
            case 'w': put_set(b, GC_W, 4, "", 0, in_class); break;
            case 'd': put_set(b, GC_D, 1, "", 0, in_class); break;
            case 'S':
            case 'W':
            case 'D':
                if (in_class) return "\\S, \\W or \\D inside a character class";
                if (e == 'S') put_set(b, GC_S, 1, S_EXTRA, 1, 0);
                else if (e == 'W') put_set(b, GC_W, 4, "", 1, 0);
                else put_set(b, GC_D, 1, "", 1, 0);
                break;
            case 'h': puts_(b, in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"); break;
            case 'H':
                if (in_class) return "\\H inside a character class";
                puts_(b, "[^0-9a-fA-F]");
                break;
            case 'u':
                if (i + 4 < len && is_hex(pat[i + 1]) && is_hex(pat[i + 2]) && is_hex(pat[i + 3]) && is_hex(pat[i + 4])) {
                    char tmp[16];
                    snprintf(tmp, sizeof tmp, "\\x{%.4s}", pat + i + 1);
                    puts_(b, tmp);
                    i += 4;
                } else
                    return "\\u without four hex digits";
                break;
            case 'p':
            case 'P': {
                if (i + 1 >= len || pat[i + 1] != '{') return "\\p without {name}";
                size_t j = i + 2;
                while (j < len && pat[j] != '}') j++;
                if (j >= len) return "unterminated \\p{";
                const char *name = pat + i + 2;
                size_t nn = j - (i + 2);
                int neg = e == 'P';
                if (nn && name[0] == '^') neg = !neg, name++, nn--;
                const wm_ugc_delta *g = find_gc(name, nn);
                if (g && !(neg && in_class)) {
                    const char *one[1] = {g->name};
                    put_set(b, one, 1, "", neg, in_class);
                } else { /* a script or other property: PCRE2's own tables */
                    put(b, neg ? "\\P{" : "\\p{", 3);
                    put(b, name, nn);
                    put(b, "}", 1);
                }
                i = j;
                break;
            }
            default: {
                char tmp[2] = {'\\', e};
                put(b, tmp, 2);
                /* copy a braced argument verbatim: \x{..} \o{..} */
                if ((e == 'x' || e == 'o') && i + 1 < len && pat[i + 1] == '{') {
                    size_t j = i + 1;
                    while (j < len && pat[j] != '}') j++;
                    if (j >= len) return "unterminated \\x{";
                    put(b, pat + i + 1, j - i);
                    i = j;
                }
            }
            }
            class_start = 0;
            continue;
        }
        if (in_class) {
            if (c == '[') {
                if (i + 1 < len && pat[i + 1] == ':') {
                    /* POSIX bracket: copy through ":]" */
                    const char *end = NULL;
                    for (size_t j = i + 2; j + 1 < len; j++)
                        if (pat[j] == ':' && pat[j + 1] == ']') {
                            end = pat + j + 2;
                            break;
                        }
                    if (!end) return "unterminated POSIX bracket";
                    put(b, pat + i, (size_t)(end - (pat + i)));
                    i = (size_t)(end - pat) - 1;
                    class_start = 0;
                    continue;
                }
                return "nested character class";
            }
            if (c == '&' && i + 1 < len && pat[i + 1] == '&') return "class intersection (&&)";
            if (c == ']' && !class_start) in_class = 0;
            class_start = 0;
            put(b, &c, 1);
            continue;
        }
        if (c == '[') {
            in_class = 1;
            put(b, &c, 1);
            class_start = 1;
            if (i + 1 < len && pat[i + 1] == '^') {
                put(b, "^", 1);
                i++;
            }
            continue;
        }
        put(b, &c, 1);
    }
    return NULL;
}

void wm_tregex_free(wm_tregex *re) {
    if (re->code) pcre2_code_free(re->code);
    re->code = NULL;
}

wm_status wm_tregex_compile(wm_tregex *re, const char *pat, size_t len, int literal, const char *what, wm_error *err) {
    memset(re, 0, sizeof *re);
    if (!wm_u8_valid(pat, len)) return wm_err(err, WM_ERR_INPUT, "%s: pattern is not valid UTF-8", what);
    rbuf b = {0};
    uint32_t opts;
    if (literal) {
        put(&b, pat, len);
        opts = PCRE2_LITERAL | PCRE2_UTF;
    } else {
        const char *why = translate(pat, len, &b);
        if (why) {
            free(b.p);
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: unsupported regex construct: %s", what, why);
        }
        opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C;
    }
    if (b.oom) {
        free(b.p);
        return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", what);
    }
    int ec;
    PCRE2_SIZE eo;
    re->code = pcre2_compile((PCRE2_SPTR)(b.p ? b.p : ""), b.n, opts, &ec, &eo, NULL);
    free(b.p);
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return wm_err(err, WM_ERR_INPUT, "%s: bad regex at offset %zu: %s", what, (size_t)eo, (const char *)msg);
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
    return WM_OK;
}
