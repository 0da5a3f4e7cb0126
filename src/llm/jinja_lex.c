/* jinja_lex.c - the Jinja lexer with the whitespace rules of jinja2's
 * (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/jinja_lex.h"

#define MAX_BRACES 256

typedef struct lx {
    wm_arena *a;
    const char *s; /* normalized source */
    size_t n;
    jtok *t;
    size_t nt;
    /* position -> line/col cursor (positions asked are non-decreasing, mostly) */
    size_t cur;
    int line, col;
    wm_error *err;
} lx;

static void loc(lx *x, size_t pos, int *line, int *col) {
    if (pos < x->cur) { /* rewind (only on errors): rescan from the start */
        x->cur = 0;
        x->line = 1;
        x->col = 1;
    }
    for (; x->cur < pos && x->cur < x->n; x->cur++) {
        unsigned char ch = (unsigned char)x->s[x->cur];
        if (ch == '\n') {
            x->line++;
            x->col = 1;
        } else if ((ch & 0xc0) != 0x80) {
            x->col++;
        }
    }
    *line = x->line;
    *col = x->col;
}

static wm_status lfail(lx *x, size_t pos, const char *fmt, const char *arg) {
    int line, col;
    loc(x, pos, &line, &col);
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    return wm_err(x->err, WM_ERR_INPUT, "chat template line %d col %d: %s", line, col, msg);
}

static jtok *emit(lx *x, int type, size_t pos) {
    jtok *t = wm_vec_push(x->a, &x->t, &x->nt, sizeof(jtok));
    if (!t) return NULL;
    t->type = type;
    loc(x, pos, &t->line, &t->col);
    return t;
}

static int emit_data(lx *x, size_t pos, size_t n) {
    if (n == 0) return 0;
    jtok *t = emit(x, T_DATA, pos);
    if (!t) return -1;
    t->p = x->s + pos;
    t->n = n;
    return 0;
}

/* Python's \s at i (unicode whitespace) */
static size_t ws_at(lx *x, size_t i) { return i < x->n ? wm_py_space_at(x->s, x->n, i) : 0; }
static size_t skip_ws(lx *x, size_t i) {
    size_t l;
    while ((l = ws_at(x, i))) i += l;
    return i;
}

/* Text [b, e) before a tag: apply "-" (rstrip) or lstrip_blocks. Returns the new end. */
static size_t strip_text(lx *x, size_t b, size_t e, char sign, int lstrip_ok, int line_starting) {
    if (sign == '-') {
        size_t l;
        while (e > b && (l = wm_py_space_before(x->s + b, e - b))) e -= l;
        return e;
    }
    if (sign == '+' || !lstrip_ok) return e;
    size_t lpos = e;
    while (lpos > b && x->s[lpos - 1] != '\n') lpos--;
    if (lpos == b && !line_starting) return e;
    if (lpos == e) return e; /* nothing between the newline and the tag */
    size_t i = lpos;
    while (i < e) {
        size_t l = wm_py_space_at(x->s, e, i);
        if (!l) return e;
        i += l;
    }
    return lpos;
}

static int match_word(lx *x, size_t i, const char *w) {
    size_t k = strlen(w);
    return i + k <= x->n && memcmp(x->s + i, w, k) == 0;
}

/* UTF-8 of v (at most 4 bytes; never longer than the escape it comes from) */
static size_t utf8_put(char *out, uint32_t v) {
    if (v < 0x80) {
        out[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        out[0] = (char)(0xc0 | (v >> 6));
        out[1] = (char)(0x80 | (v & 0x3f));
        return 2;
    }
    if (v < 0x10000) {
        out[0] = (char)(0xe0 | (v >> 12));
        out[1] = (char)(0x80 | ((v >> 6) & 0x3f));
        out[2] = (char)(0x80 | (v & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (v >> 18));
    out[1] = (char)(0x80 | ((v >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((v >> 6) & 0x3f));
    out[3] = (char)(0x80 | (v & 0x3f));
    return 4;
}

/* a string literal at i (quote q): decodes Python escapes (unicode-escape after backslashreplace) */
static wm_status lex_string(lx *x, size_t *pi, jtok *t) {
    size_t i = *pi;
    char q = x->s[i];
    size_t j = i + 1;
    while (j < x->n && x->s[j] != q) j += x->s[j] == '\\' && j + 1 < x->n ? 2 : 1;
    if (j >= x->n) return lfail(x, i, "unterminated string literal%s", NULL);
    /* an escaped non-ASCII char becomes up to 10 bytes of escape text: 4x the source is enough */
    char *out = wm_arena_alloc(x->a, (j - i) * 4 + 16);
    if (!out) return wm_err(x->err, WM_ERR_NOMEM, "out of memory");
    size_t o = 0;
    for (size_t k = i + 1; k < j;) {
        unsigned char ch = (unsigned char)x->s[k];
        if (ch != '\\') {
            out[o++] = (char)ch;
            k++;
            continue;
        }
        unsigned char e = (unsigned char)x->s[k + 1];
        const char *simple = "\\'\"abfnrtv";
        const char *rep = "\\'\"\a\b\f\n\r\t\v";
        const char *m = e ? strchr(simple, e) : NULL;
        if (m) {
            out[o++] = rep[m - simple];
            k += 2;
        } else if (e == '\n') {
            k += 2; /* line continuation */
        } else if (e >= '0' && e <= '7') {
            uint32_t v = 0;
            size_t d = 0;
            while (d < 3 && k + 1 + d < j && x->s[k + 1 + d] >= '0' && x->s[k + 1 + d] <= '7')
                v = v * 8 + (uint32_t)(x->s[k + 1 + d++] - '0');
            k += 1 + d;
            o += utf8_put(out + o, v);
        } else if (e == 'x' || e == 'u' || e == 'U') {
            size_t nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (size_t d = 0; d < nd; d++) {
                char h = k + 2 + d < j ? x->s[k + 2 + d] : 0;
                int dv = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                       : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (dv < 0)
                    return lfail(x, k, "truncated \\%s escape in a string literal", e == 'x' ? "x" : e == 'u' ? "u" : "U");
                v = v * 16 + (uint32_t)dv;
            }
            if (v > 0x10ffff) return lfail(x, k, "illegal Unicode character in a string literal%s", NULL);
            k += 2 + nd;
            o += utf8_put(out + o, v);
        } else if (e == 'N') {
            return lfail(x, k, "\\N{...} escapes are not supported%s", NULL);
        } else if (e >= 0x80) {
            /* backslashreplace turned the char into \xNN / \uNNNN / \UNNNNNNNN, the backslash before it
             * escaped that backslash: the result is the escape text itself */
            size_t l;
            uint32_t cp = wm_u8_decode(x->s, j, k + 1, &l);
            char tmp[16];
            int tn = cp < 0x100 ? snprintf(tmp, sizeof tmp, "\\x%02x", cp)
                   : cp < 0x10000 ? snprintf(tmp, sizeof tmp, "\\u%04x", cp)
                                  : snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            memcpy(out + o, tmp, (size_t)tn);
            o += (size_t)tn;
            k += 1 + l;
        } else {
            out[o++] = '\\'; /* unknown escape: kept as written */
            k++;
        }
    }
    out[o] = 0;
    t->type = T_STRING;
    t->p = out;
    t->n = o;
    *pi = j + 1;
    return WM_OK;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name_start(unsigned char c) { return c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z') || c >= 0x80; }
static int is_name_char(unsigned char c) { return is_name_start(c) || is_digit((char)c); }

/* digits with single '_' separators; returns the end or start when none */
static size_t digits(lx *x, size_t i) {
    if (i >= x->n || !is_digit(x->s[i])) return i;
    while (i < x->n) {
        if (is_digit(x->s[i])) i++;
        else if (x->s[i] == '_' && i + 1 < x->n && is_digit(x->s[i + 1])) i++;
        else break;
    }
    return i;
}

static wm_status lex_number(lx *x, size_t *pi, jtok *t) {
    size_t i = *pi, e = digits(x, i);
    /* float: digits (.digits)? e[+-]digits | digits .digits ; not right after a '.' */
    if (i == 0 || x->s[i - 1] != '.') {
        size_t f = e, fe = 0;
        if (f < x->n && x->s[f] == '.' && (fe = digits(x, f + 1)) > f + 1) f = fe;
        size_t ex = f;
        if (ex < x->n && (x->s[ex] | 32) == 'e') {
            size_t k = ex + 1;
            if (k < x->n && (x->s[k] == '+' || x->s[k] == '-')) k++;
            size_t de = digits(x, k);
            if (de > k) ex = de;
        }
        if (ex > e) {
            char buf[128];
            size_t o = 0;
            for (size_t k = i; k < ex && o < sizeof buf - 1; k++)
                if (x->s[k] != '_') buf[o++] = x->s[k];
            buf[o] = 0;
            t->type = T_FLOAT;
            t->f = strtod(buf, NULL);
            *pi = ex;
            return WM_OK;
        }
    }
    int base = 10;
    size_t st = i;
    if (x->s[i] == '0' && i + 1 < x->n && strchr("bBoOxX", x->s[i + 1]) && x->s[i + 1]) {
        char b = (char)(x->s[i + 1] | 32);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        st = i + 2;
    }
    uint64_t v = 0;
    size_t k = st;
    int nd = 0;
    for (; k < x->n; k++) {
        char ch = x->s[k];
        if (ch == '_' && nd) continue;
        int d = is_digit(ch) ? ch - '0' : (ch | 32) >= 'a' && (ch | 32) <= 'f' ? (ch | 32) - 'a' + 10 : 99;
        if (d >= base) break;
        if (base == 10 && nd == 1 && v == 0 && ch != '0') break; /* "0(_?0)*" then a new token, as jinja2 */
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base || v * base + d > (uint64_t)INT64_MAX)
            return lfail(x, i, "integer literal out of the 64-bit range%s", NULL);
        v = v * (uint64_t)base + (uint64_t)d;
        nd++;
    }
    if (!nd) return lfail(x, i, "invalid integer literal%s", NULL);
    t->type = T_INT;
    t->i = (int64_t)v;
    *pi = k;
    return WM_OK;
}

static const struct {
    const char *s;
    int op;
} k_ops[] = {{"//", K_FLOORDIV}, {"**", K_POW}, {"==", K_EQ}, {"!=", K_NE}, {">=", K_GTEQ}, {"<=", K_LTEQ},
             {"+", K_ADD}, {"-", K_SUB}, {"/", K_DIV}, {"*", K_MUL}, {"%", K_MOD}, {"~", K_TILDE},
             {"[", K_LBRACKET}, {"]", K_RBRACKET}, {"(", K_LPAREN}, {")", K_RPAREN}, {"{", K_LBRACE},
             {"}", K_RBRACE}, {">", K_GT}, {"<", K_LT}, {"=", K_ASSIGN}, {".", K_DOT}, {":", K_COLON},
             {"|", K_PIPE}, {",", K_COMMA}, {";", K_SEMICOLON}};

/* Tokens inside {{ }} or {% %} from *pi up to and including the end tag. */
static wm_status lex_tag(lx *x, size_t *pi, int is_block, int *line_starting) {
    size_t i = *pi;
    char bal[MAX_BRACES];
    int nb = 0;
    for (;;) {
        if (i >= x->n) return lfail(x, i, "unexpected end of template: missing '%s'", is_block ? "%}" : "}}");
        if (nb == 0) {
            size_t e = 0;
            int ls = 0;
            if (is_block) {
                if (match_word(x, i, "+%}")) e = i + 3;
                else if (match_word(x, i, "-%}")) e = skip_ws(x, i + 3);
                else if (match_word(x, i, "%}")) e = i + 2 + (i + 2 < x->n && x->s[i + 2] == '\n');
            } else {
                if (match_word(x, i, "-}}")) e = skip_ws(x, i + 3);
                else if (match_word(x, i, "}}")) e = i + 2;
            }
            if (e) {
                ls = x->s[e - 1] == '\n';
                if (!emit(x, is_block ? T_BLOCK_END : T_VAR_END, i)) return wm_err(x->err, WM_ERR_NOMEM, "out of memory");
                *line_starting = ls;
                *pi = e;
                return WM_OK;
            }
        }
        size_t l = ws_at(x, i);
        if (l) {
            i += l;
            continue;
        }
        jtok *t = emit(x, T_OP, i);
        if (!t) return wm_err(x->err, WM_ERR_NOMEM, "out of memory");
        unsigned char ch = (unsigned char)x->s[i];
        wm_status st;
        if (is_digit((char)ch)) {
            if ((st = lex_number(x, &i, t))) return st;
        } else if (is_name_start(ch)) {
            size_t e = i;
            while (e < x->n && is_name_char((unsigned char)x->s[e])) e++;
            t->type = T_NAME;
            t->p = x->s + i;
            t->n = e - i;
            i = e;
        } else if (ch == '\'' || ch == '"') {
            if ((st = lex_string(x, &i, t))) return st;
        } else {
            size_t k;
            for (k = 0; k < sizeof k_ops / sizeof k_ops[0]; k++)
                if (match_word(x, i, k_ops[k].s)) break;
            if (k == sizeof k_ops / sizeof k_ops[0]) {
                char c2[8];
                snprintf(c2, sizeof c2, "%c", ch >= 0x20 && ch < 0x7f ? ch : '?');
                return lfail(x, i, "unexpected character '%s' in a tag", c2);
            }
            t->op = k_ops[k].op;
            i += strlen(k_ops[k].s);
            if (t->op == K_LBRACE || t->op == K_LPAREN || t->op == K_LBRACKET) {
                if (nb == MAX_BRACES) return lfail(x, i, "brackets nested too deeply%s", NULL);
                bal[nb++] = t->op == K_LBRACE ? '}' : t->op == K_LPAREN ? ')' : ']';
            } else if (t->op == K_RBRACE || t->op == K_RPAREN || t->op == K_RBRACKET) {
                char want = t->op == K_RBRACE ? '}' : t->op == K_RPAREN ? ')' : ']';
                char got[4] = {want, 0};
                if (!nb) return lfail(x, i - 1, "unexpected '%s'", got);
                if (bal[--nb] != want) return lfail(x, i - 1, "unexpected '%s' (unbalanced brackets)", got);
            }
        }
    }
}

wm_status wm_jlex(wm_arena *a, const char *src, size_t n, jtok **toks, size_t *ntoks, wm_error *err) {
    lx x = {0};
    x.a = a;
    x.err = err;
    x.line = 1;
    x.col = 1;
    /* newlines: \r\n and \r become \n; one trailing newline is dropped */
    char *s = wm_arena_alloc(a, n + 1);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m && s[m - 1] == '\n') m--;
    s[m] = 0;
    x.s = s;
    x.n = m;
    size_t pos = 0;
    int line_starting = 1;
    wm_status st;
    while (pos < x.n) {
        size_t t = pos;
        while (t + 1 < x.n && !(x.s[t] == '{' && (x.s[t + 1] == '{' || x.s[t + 1] == '%' || x.s[t + 1] == '#'))) t++;
        if (t + 1 >= x.n) {
            if (emit_data(&x, pos, x.n - pos)) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        char kind = x.s[t + 1];
        char sign = t + 2 < x.n && (x.s[t + 2] == '-' || x.s[t + 2] == '+') ? x.s[t + 2] : 0;
        size_t body = t + 2 + (sign ? 1 : 0);
        /* {% raw %} */
        size_t r = skip_ws(&x, body), raw_end = 0;
        if (kind == '%' && match_word(&x, r, "raw")) {
            size_t q = skip_ws(&x, r + 3);
            if (match_word(&x, q, "-%}")) raw_end = skip_ws(&x, q + 3);
            else if (match_word(&x, q, "%}")) raw_end = q + 2;
        }
        size_t e = strip_text(&x, pos, t, sign, kind != '{', line_starting);
        if (emit_data(&x, pos, e - pos)) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (raw_end) {
            int ls = x.s[raw_end - 1] == '\n';
            size_t k = raw_end, end = 0, cs = 0;
            char esign = 0;
            for (; k + 1 < x.n; k++) {
                if (x.s[k] != '{' || x.s[k + 1] != '%') continue;
                size_t b2 = k + 2;
                char sg = b2 < x.n && (x.s[b2] == '-' || x.s[b2] == '+') ? x.s[b2] : 0;
                size_t w = skip_ws(&x, b2 + (sg ? 1 : 0));
                if (!match_word(&x, w, "endraw")) continue;
                w = skip_ws(&x, w + 6);
                if (match_word(&x, w, "+%}")) end = w + 3;
                else if (match_word(&x, w, "-%}")) end = skip_ws(&x, w + 3);
                else if (match_word(&x, w, "%}")) end = w + 2 + (w + 2 < x.n && x.s[w + 2] == '\n');
                if (end) {
                    cs = k;
                    esign = sg;
                    break;
                }
            }
            if (!end) return lfail(&x, t, "missing end of raw directive%s", NULL);
            size_t ce = strip_text(&x, raw_end, cs, esign, 1, ls);
            if (emit_data(&x, raw_end, ce - raw_end)) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            line_starting = x.s[end - 1] == '\n';
            pos = end;
            continue;
        }
        if (kind == '#') {
            size_t k = body, end = 0;
            for (; k + 1 < x.n; k++) {
                if (x.s[k] == '#' && x.s[k + 1] == '}') break;
            }
            if (k + 1 >= x.n) return lfail(&x, t, "missing end of comment tag%s", NULL);
            /* the lazy match meets "+#}" / "-#}" one char before "#}" */
            if (k > body && x.s[k - 1] == '-') end = skip_ws(&x, k + 2);
            else if (k > body && x.s[k - 1] == '+') end = k + 2;
            else end = k + 2 + (k + 2 < x.n && x.s[k + 2] == '\n');
            line_starting = x.s[end - 1] == '\n';
            pos = end;
            continue;
        }
        if (!emit(&x, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, t)) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        pos = body;
        if ((st = lex_tag(&x, &pos, kind == '%', &line_starting))) return st;
    }
    if (!emit(&x, T_EOF, x.n)) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    *toks = x.t;
    *ntoks = x.nt;
    return WM_OK;
}
