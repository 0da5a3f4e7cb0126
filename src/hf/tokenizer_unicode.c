/* tokenizer_unicode.c - UTF-8, character properties and composition data for the tokenizers. */
#include "hf/tokenizer_unicode.h"

#include "hf/tokenizer_unidata.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

size_t wm_u8_put(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Bytes of a well-formed sequence at s (Unicode table 3-7), or 0; *part gets the valid prefix length. */
static size_t seq_len(const uint8_t *s, size_t n, size_t *part) {
    uint8_t b = s[0];
    *part = 1;
    if (b < 0x80) return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return 0;
    for (size_t i = 1; i < need; i++) {
        if (i >= n) return 0;
        uint8_t c = s[i];
        if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return 0;
        *part = i + 1;
    }
    return need;
}

size_t wm_u8_valid_prefix(const char *s, size_t n, size_t *bad) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    *bad = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t part, k = seq_len(p + i, n - i, &part);
        if (!k) {
            *bad = part;
            return i;
        }
        i += k;
    }
    return i;
}

int wm_u8_valid(const char *s, size_t n) {
    size_t bad;
    return wm_u8_valid_prefix(s, n, &bad) == n;
}

size_t wm_u8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((uint8_t)s[i] & 0xC0) != 0x80;
    return c;
}

/* Normalization data is Unicode 9.0's: code points assigned later have none (utf8proc's is masked). */
static int assigned9(uint32_t cp) { return cp < 0x378 || wm_urange_has(wm_ud9_assigned, wm_ud9_assigned_n, cp); }

int wm_uc_ccc(uint32_t cp) {
    if (cp < 0x300 || !assigned9(cp)) return 0;
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
}

int wm_uc_is_white(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int wm_uc_is_numeric(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return wm_urange_has(wm_ud17_numeric, wm_ud17_numeric_n, cp);
}

int wm_uc_is_regex_word(uint32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    return wm_urange_has(wm_ud16_word, wm_ud16_word_n, cp);
}

int wm_uc_is_punct(uint32_t cp) {
    if (cp < 0x80) return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                          (cp >= 0x7B && cp <= 0x7E);
    return wm_urange_has(wm_ud8_punct, wm_ud8_punct_n, cp);
}

int wm_uc_is_other(uint32_t cp) { return wm_urange_has(wm_ud8_other, wm_ud8_other_n, cp); }

int wm_uc_is_mn(uint32_t cp) { return cp >= 0x300 && wm_urange_has(wm_ud8_mn, wm_ud8_mn_n, cp); }

int wm_uc_is_mark(uint32_t cp) { return cp >= 0x300 && wm_urange_has(wm_ud9_mark, wm_ud9_mark_n, cp); }

int wm_uc_is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

size_t wm_uc_lower(uint32_t cp, uint32_t out[3]) {
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    size_t lo = 0, hi = wm_ud17_lower_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (wm_ud17_lower[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < wm_ud17_lower_n && wm_ud17_lower[lo].cp == cp) {
        out[0] = wm_ud17_lower[lo].l1;
        if (wm_ud17_lower[lo].l2) {
            out[1] = wm_ud17_lower[lo].l2;
            return 2;
        }
        return 1;
    }
    out[0] = cp;
    return 1;
}

size_t wm_uc_decompose(uint32_t cp, int compat, uint32_t out[32]) {
    if (cp < 0xA0 || !assigned9(cp)) {
        out[0] = cp;
        return 1;
    }
    utf8proc_int32_t buf[32];
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 32,
                                                 UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0), NULL);
    if (n <= 0 || n > 32) {
        out[0] = cp;
        return 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; i++) out[i] = (uint32_t)buf[i];
    return (size_t)n;
}

/* ---------------------------------------------------- composition table */

/* Open-addressing table (a << 21 | b) -> composite, built once from utf8proc's data. */
static uint64_t *comp_keys;
static uint32_t *comp_vals;
static size_t comp_mask;
static uint8_t *second_bits; /* codepoints that are the second part of some composition */
static pthread_once_t comp_once = PTHREAD_ONCE_INIT;

static size_t comp_slot(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return (size_t)k & comp_mask;
}

static void comp_put(uint64_t k, uint32_t v) {
    size_t i = comp_slot(k);
    while (comp_keys[i] && comp_keys[i] != k) i = (i + 1) & comp_mask;
    comp_keys[i] = k;
    comp_vals[i] = v;
}

static void comp_build(void) {
    comp_mask = 8191;
    comp_keys = calloc(comp_mask + 1, sizeof *comp_keys);
    comp_vals = calloc(comp_mask + 1, sizeof *comp_vals);
    second_bits = calloc(0x110000 / 8, 1);
    if (!comp_keys || !comp_vals || !second_bits) {
        free(comp_keys);
        free(comp_vals);
        free(second_bits);
        comp_keys = NULL;
        comp_vals = NULL;
        second_bits = NULL;
        return;
    }
    for (uint32_t cp = 0xC0; cp < 0x110000; cp++) {
        if ((cp >= 0xAC00 && cp <= 0xD7A3) || !assigned9(cp)) continue; /* Hangul: algorithmic */
        const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
        if (pr->decomp_seqindex == UINT16_MAX || pr->decomp_type != 0 || pr->comp_exclusion) continue;
        utf8proc_int32_t d[32];
        utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, d, 32, UTF8PROC_DECOMPOSE, NULL);
        if (n < 2 || n > 32) continue;
        /* the one-level mapping is (composition of the rest, last) */
        utf8proc_int32_t head[32];
        memcpy(head, d, sizeof(utf8proc_int32_t) * (size_t)(n - 1));
        utf8proc_ssize_t hn = utf8proc_normalize_utf32(head, n - 1, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (hn != 1) continue;
        utf8proc_int32_t pair[2] = {head[0], d[n - 1]};
        utf8proc_ssize_t pn = utf8proc_normalize_utf32(pair, 2, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (pn != 1 || pair[0] != (utf8proc_int32_t)cp) continue;
        uint32_t a = (uint32_t)head[0], b = (uint32_t)d[n - 1];
        comp_put(((uint64_t)a << 21) | b, cp);
        second_bits[b >> 3] |= (uint8_t)(1u << (b & 7));
    }
}

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19, V_COUNT = 21,
       T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

int wm_uc_compose(uint32_t a, uint32_t b, uint32_t *out) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT) {
        *out = S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
        return 1;
    }
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT) {
        *out = a + (b - T_BASE);
        return 1;
    }
    pthread_once(&comp_once, comp_build);
    if (!comp_keys || b >= 0x110000 || !(second_bits[b >> 3] & (1u << (b & 7)))) return 0;
    uint64_t k = ((uint64_t)a << 21) | b;
    for (size_t i = comp_slot(k); comp_keys[i]; i = (i + 1) & comp_mask)
        if (comp_keys[i] == k) {
            *out = comp_vals[i];
            return 1;
        }
    return 0;
}

int wm_uc_nf_inert(uint32_t cp, int compat, int compose) {
    if (cp < 0xA0 || !assigned9(cp)) return 1;
    const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
    if (pr->combining_class) return 0;
    if (pr->decomp_seqindex != UINT16_MAX && (compat || pr->decomp_type == 0)) return 0;
    if (cp >= 0xAC00 && cp <= 0xD7A3) return 0; /* Hangul syllables decompose */
    if (!compose) return 1;
    if ((cp >= V_BASE && cp < V_BASE + V_COUNT) || (cp > T_BASE && cp < T_BASE + T_COUNT)) return 0;
    pthread_once(&comp_once, comp_build);
    if (!second_bits) return 0;
    return !(second_bits[cp >> 3] & (1u << (cp & 7)));
}

/* ------------------------------------------------------------ byte level */

const uint16_t wm_bytelevel_cp[256] = {
#define R4(b) (b), (b) + 1, (b) + 2, (b) + 3
    /* 0x00-0x20 -> 256..288 */
    R4(256), R4(260), R4(264), R4(268), R4(272), R4(276), R4(280), R4(284), 288,
    /* 0x21-0x7E themselves */
    0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x2D, 0x2E, 0x2F, 0x30, 0x31, 0x32,
    0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F, 0x40, 0x41, 0x42, 0x43, 0x44,
    0x45, 0x46, 0x47, 0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56,
    0x57, 0x58, 0x59, 0x5A, 0x5B, 0x5C, 0x5D, 0x5E, 0x5F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6A, 0x6B, 0x6C, 0x6D, 0x6E, 0x6F, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7A,
    0x7B, 0x7C, 0x7D, 0x7E,
    /* 0x7F-0xA0 -> 289..322 */
    R4(289), R4(293), R4(297), R4(301), R4(305), R4(309), R4(313), R4(317), 321, 322,
    /* 0xA1-0xAC themselves */
    0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8, 0xA9, 0xAA, 0xAB, 0xAC,
    /* 0xAD -> 323 */
    323,
    /* 0xAE-0xFF themselves */
    0xAE, 0xAF, 0xB0, 0xB1, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8, 0xB9, 0xBA, 0xBB, 0xBC, 0xBD, 0xBE, 0xBF,
    0xC0, 0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xCB, 0xCC, 0xCD, 0xCE, 0xCF, 0xD0, 0xD1,
    0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8, 0xD9, 0xDA, 0xDB, 0xDC, 0xDD, 0xDE, 0xDF, 0xE0, 0xE1, 0xE2, 0xE3,
    0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9, 0xEA, 0xEB, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0xF5,
    0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF
#undef R4
};

int wm_bytelevel_byte(uint32_t cp) {
    if (cp >= 0x21 && cp <= 0x7E) return (int)cp;
    if ((cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 289 + 0x7F);
    if (cp == 323) return 0xAD;
    return -1;
}
