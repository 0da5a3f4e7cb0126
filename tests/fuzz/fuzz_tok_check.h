/*
 * What the tokenizer fuzz targets (fuzz_tokenizer, fuzz_tokenizer_dir) do with a tokenizer that loaded: encode a
 * text alone and as a pair (offsets inside the texts, every token readable, ids that decode and stream), decode
 * out-of-range ids, and free it. Bad input must give a status and a message.
 */
#ifndef WM_FUZZ_TOK_CHECK_H
#define WM_FUZZ_TOK_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer.h"

static void fuzz_tok_check(const wm_tokenizer *t, const char *text, size_t len, const char *pair, size_t plen) {
    wm_encoding e;
    wm_encoding_init(&e);
    wm_error err = {0};
    if (wm_tokenizer_encode(t, text, len, pair, plen, NULL, &e, &err) == WM_OK) {
        size_t lim = (plen > len ? plen : len) + 64; /* a few quirks give word-relative offsets */
        for (size_t i = 0; i < e.n; i++) {
            if (e.offsets[i].end > lim) abort();
            size_t n;
            const char *s = wm_encoding_token(&e, i, &n);
            if (!s) abort();
            for (size_t k = 0; k < n; k++) (void)(volatile char)s[k]; /* readable (ASan) */
        }
        wm_tok_buf out = {0};
        memset(&err, 0, sizeof err);
        if (wm_tokenizer_decode(t, e.ids, e.n, 0, &out, &err) != WM_OK && !err.msg[0]) abort();
        wm_tok_stream ds;
        wm_tok_stream_init(&ds, t, 1);
        for (size_t i = 0; i < e.n && i < 64; i++) {
            int emitted;
            if (wm_tok_stream_step(&ds, e.ids[i], &out, &emitted, &err) != WM_OK) break;
        }
        wm_tok_stream_free(&ds);
        wm_tok_buf_free(&out);
    } else if (!err.msg[0])
        abort();
    wm_encoding_free(&e);
}

/* Checks t on text (alone and paired with pair), decodes out-of-range ids, then frees t. */
static void fuzz_tok_exercise(wm_tokenizer *t, const char *text, size_t len, const char *pair, size_t plen) {
    fuzz_tok_check(t, text, len, NULL, 0);
    fuzz_tok_check(t, text, len, pair, plen);
    int32_t ids[6] = {0, 1, 2, 3, 1000000, 2147483647};
    wm_tok_buf out = {0};
    wm_error err = {0};
    wm_tokenizer_decode(t, ids, 6, 1, &out, &err);
    wm_tok_buf_free(&out);
    wm_tokenizer_free(t);
}

#endif
