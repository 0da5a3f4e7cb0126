/*
 * libFuzzer target for tokenizer.json: the input is a tokenizer.json,
 * optionally followed by "\n#TEXT#\n" and a sample text. What loads must
 * encode the sample (alone and as a pair) with offsets inside the text and
 * ids that decode; bad input must give a status and a message, no handle.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer.h"

static const char SEP[] = "\n#TEXT#\n";
static const char DEFAULT_TEXT[] = "Hello world! 123 <s> </s> [CLS] caf\xc3\xa9  \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\t"
                                   "\xf0\x9f\x98\x80 a\xcc\x81 \xe2\x96\x81x";

static void check(const wm_tokenizer *t, const char *text, size_t len, const char *pair, size_t plen) {
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *d = (const char *)data, *text = DEFAULT_TEXT;
    size_t jlen = size, tlen = sizeof DEFAULT_TEXT - 1;
    for (size_t i = 0; i + sizeof SEP - 1 <= size; i++)
        if (!memcmp(d + i, SEP, sizeof SEP - 1)) {
            jlen = i;
            text = d + i + sizeof SEP - 1;
            tlen = size - i - (sizeof SEP - 1);
            break;
        }
    wm_tokenizer *t = NULL;
    wm_error err = {0};
    if (wm_tokenizer_load_json(d, jlen, "fuzz.json", &t, &err) != WM_OK) {
        if (!err.msg[0] || t) abort();
        return 0;
    }
    check(t, text, tlen, NULL, 0);
    check(t, text, tlen, "pair \xe2\x96\x81 text", 14);
    int32_t ids[6] = {0, 1, 2, 3, 1000000, 2147483647};
    wm_tok_buf out = {0};
    wm_tokenizer_decode(t, ids, 6, 1, &out, &err);
    wm_tok_buf_free(&out);
    wm_tokenizer_free(t);
    return 0;
}
