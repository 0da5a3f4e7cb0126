/*
 * tokenizer_unidata.h - Unicode tables in the versions the Rust tokenizers
 * use (generated into tokenizer_unidata.c by scripts/gen_tok_unicode.py
 * from the Unicode Character Database; ranges are inclusive and sorted).
 */
#ifndef WM_HF_TOKENIZER_UNIDATA_H
#define WM_HF_TOKENIZER_UNIDATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct wm_urange {
    uint32_t lo, hi;
} wm_urange;

typedef struct wm_ulower {
    uint32_t cp, l1, l2; /* to_lowercase(cp) = l1 (, l2 when non-zero) */
} wm_ulower;

typedef struct wm_ugc_delta { /* a general category in 16.0 relative to 14.0 */
    const char *name, *long_name;
    const wm_urange *add;
    size_t n_add;
    const wm_urange *rem;
    size_t n_rem;
} wm_ugc_delta;

/* Unicode 8.0 (unicode_categories): punctuation P*, "other" Cc|Cf|Co, Mn */
extern const wm_urange wm_ud8_punct[], wm_ud8_other[], wm_ud8_mn[];
extern const size_t wm_ud8_punct_n, wm_ud8_other_n, wm_ud8_mn_n;
/* Unicode 9.0 (unicode-normalization-alignments): assigned code points, marks M* */
extern const wm_urange wm_ud9_assigned[], wm_ud9_mark[];
extern const size_t wm_ud9_assigned_n, wm_ud9_mark_n;
/* Unicode 16.0 (regex-syntax): \w = Alphabetic | M | Nd | Pc | Join_Control */
extern const wm_urange wm_ud16_word[];
extern const size_t wm_ud16_word_n;
/* Unicode 16.0 (Oniguruma) general categories as changes from 14.0 (PCRE2 10.42); name == NULL ends */
extern const wm_ugc_delta wm_ud16_gc[];
/* Unicode 17.0 (Rust std): N*, and to_lowercase for code points that change */
extern const wm_urange wm_ud17_numeric[];
extern const size_t wm_ud17_numeric_n;
extern const wm_ulower wm_ud17_lower[];
extern const size_t wm_ud17_lower_n;

/* 1 when cp lies in one of the n sorted ranges. */
static inline int wm_urange_has(const wm_urange *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].lo <= cp;
}

#endif
