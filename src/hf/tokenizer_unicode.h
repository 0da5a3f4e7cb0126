/*
 * tokenizer_unicode.h - UTF-8 and the Unicode properties the tokenizers
 * need, each named after the Rust function whose behaviour it reproduces
 * (char::is_whitespace, char::is_numeric, regex's \w ...) and in the
 * Unicode version that crate used (tokenizer_unidata.h): 8.0 for
 * unicode_categories, 9.0 for the normalization crate, 16.0 for regex and
 * Oniguruma, 17.0 for Rust's std. utf8proc supplies decompositions and
 * combining classes (masked to Unicode 9.0). Normalization is done here as a
 * stream of (codepoint, change) so that alignments follow the characters
 * exactly as in the `unicode-normalization-alignments` crate.
 */
#ifndef WM_HF_TOKENIZER_UNICODE_H
#define WM_HF_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one character of valid UTF-8 at s; *adv receives its length. */
static inline uint32_t wm_u8_get(const char *s, size_t *adv) {
    const uint8_t *p = (const uint8_t *)s;
    if (p[0] < 0x80) {
        *adv = 1;
        return p[0];
    }
    if (p[0] < 0xE0) {
        *adv = 2;
        return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (p[0] < 0xF0) {
        *adv = 3;
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    *adv = 4;
    return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) |
           (p[3] & 0x3F);
}
/* Length of the character starting with lead byte b (valid UTF-8). */
static inline size_t wm_u8_len(uint8_t b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }
/* Encodes cp (a scalar value) into out (4 bytes); returns its length. */
size_t wm_u8_put(uint32_t cp, char *out);
static inline size_t wm_u8_cplen(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }
/* 1 when s[0..n) is well-formed UTF-8 (no surrogates, no overlongs). */
int wm_u8_valid(const char *s, size_t n);
/*
 * Length of the valid UTF-8 prefix of s, and in *bad the length of the
 * maximal ill-formed subpart that follows (0 at the end): the unit that
 * String::from_utf8_lossy replaces with one U+FFFD.
 */
size_t wm_u8_valid_prefix(const char *s, size_t n, size_t *bad);
/* Number of characters in valid UTF-8. */
size_t wm_u8_count(const char *s, size_t n);

/* Canonical combining class (Unicode 9.0). */
int wm_uc_ccc(uint32_t cp);

int wm_uc_is_white(uint32_t cp);      /* Rust char::is_whitespace (White_Space) */
int wm_uc_is_numeric(uint32_t cp);    /* Rust char::is_numeric (N*, 17.0) */
int wm_uc_is_regex_word(uint32_t cp); /* Rust regex \w (Alphabetic, M, Nd, Pc, Join_Control; 16.0) */
int wm_uc_is_punct(uint32_t cp);      /* ASCII punctuation or P* (8.0): BERT, Punctuation */
int wm_uc_is_other(uint32_t cp);      /* unicode_categories is_other: Cc, Cf, Co (8.0) */
int wm_uc_is_mn(uint32_t cp);         /* Mn (8.0) */
int wm_uc_is_mark(uint32_t cp);       /* Mn, Mc, Me: is_combining_mark (9.0) */
int wm_uc_is_cjk(uint32_t cp);        /* BERT's "Chinese character" blocks */

/* Rust char::to_lowercase (17.0): writes 1 or 2 codepoints; returns the count. */
size_t wm_uc_lower(uint32_t cp, uint32_t out[3]);

/* Full decomposition (canonical, or compatibility when compat); returns the count (<= 32). */
size_t wm_uc_decompose(uint32_t cp, int compat, uint32_t out[32]);
/* Primary composition of a + b (Hangul included); 1 and *out when they compose. */
int wm_uc_compose(uint32_t a, uint32_t b, uint32_t *out);
/*
 * 1 when cp is left as is by the normalization form in any context: no
 * decomposition, combining class 0 and (for composing forms) never the
 * second part of a composition.
 */
int wm_uc_nf_inert(uint32_t cp, int compat, int compose);

/* GPT-2 byte <-> unicode map: byte b becomes codepoint wm_bytelevel_cp[b]. */
extern const uint16_t wm_bytelevel_cp[256];
/* The byte a byte-level codepoint stands for, or -1. */
int wm_bytelevel_byte(uint32_t cp);

#endif
