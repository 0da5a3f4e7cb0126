/*
 * tokenizer_regex.c - Split / Replace patterns. tokenizer.json regexes are
 * written for Oniguruma (the `onig` crate); we run them with PCRE2 (UTF,
 * UCP, JIT) after translating the escapes whose meaning differs:
 *   \s \S  Oniguruma: U+0009-000D, U+0085 and Z*  (PCRE2 also has U+180E)
 *   \w \W  Oniguruma: L, M, Nd, Pc                (PCRE2: L, N, _)
 *   \d \D  Nd;  \h \H  hex digit (PCRE2: horizontal space);  \uHHHH
 * ^ and $ are line anchors in Oniguruma's default syntax (PCRE2_MULTILINE).
 */
#include <stdio.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

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

#define S_SET "\\t-\\r\\x{85}\\p{Z}"
#define W_SET "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

/* Translates pat into b; returns NULL or the reason it cannot be translated. */
static const char *translate(const char *pat, size_t len, rbuf *b) {
    int in_class = 0, class_start = 0;
    for (size_t i = 0; i < len; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            char e = pat[++i];
            switch (e) {
            case 's': puts_(b, in_class ? S_SET : "[" S_SET "]"); break;
            case 'S': puts_(b, in_class ? "\\S" : "[^" S_SET "]"); break;
            case 'w': puts_(b, in_class ? W_SET : "[" W_SET "]"); break;
            case 'W':
                if (in_class) return "\\W inside a character class";
                puts_(b, "[^" W_SET "]");
                break;
            case 'd': puts_(b, "\\p{Nd}"); break;
            case 'D': puts_(b, "\\P{Nd}"); break;
            case 'h': puts_(b, in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"); break;
            case 'H':
                if (in_class) return "\\H inside a character class";
                puts_(b, "[^0-9a-fA-F]");
                break;
            case 'u':
                if (i + 4 < len && is_hex(pat[i + 1]) && is_hex(pat[i + 2]) &&
                    is_hex(pat[i + 3]) && is_hex(pat[i + 4])) {
                    char tmp[16];
                    snprintf(tmp, sizeof tmp, "\\x{%.4s}", pat + i + 1);
                    puts_(b, tmp);
                    i += 4;
                } else
                    return "\\u without four hex digits";
                break;
            default: {
                char tmp[2] = {'\\', e};
                put(b, tmp, 2);
                /* copy a braced argument verbatim: \p{..} \x{..} \o{..} */
                if ((e == 'p' || e == 'P' || e == 'x' || e == 'o') && i + 1 < len && pat[i + 1] == '{') {
                    size_t j = i + 1;
                    while (j < len && pat[j] != '}') j++;
                    if (j >= len) return "unterminated \\p{ or \\x{";
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
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    return WM_OK;
}
