/*
 * libFuzzer target for SentencePiece model files (spm_model.c): parse
 * arbitrary bytes as a ModelProto. A refusal must carry a message naming
 * the file; what is accepted must be self-consistent (every piece valid
 * UTF-8 of its length with a known type and a finite score, ids inside the
 * pieces) and must make a tokenizer in both layouts (SentencePiece's own
 * and T5's) or refuse with a message; a tokenizer encodes and decodes a
 * sample text.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf/spm_model.h"
#include "hf/tokenizer.h"

static const char TEXT[] = "Hello  world! 123 <s> </s> <unk> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\t"
                           "\xf0\x9f\x98\x80 a\xcc\x81 \xe2\x96\x81x  ";

static void use(const wm_tokenizer *t) {
    wm_encoding e;
    wm_encoding_init(&e);
    wm_error err = {0};
    if (wm_tokenizer_encode(t, TEXT, sizeof TEXT - 1, NULL, 0, NULL, &e, &err) == WM_OK) {
        wm_tok_buf out = {0};
        memset(&err, 0, sizeof err);
        if (wm_tokenizer_decode(t, e.ids, e.n, 1, &out, &err) != WM_OK && !err.msg[0]) abort();
        wm_tok_buf_free(&out);
    } else if (!err.msg[0])
        abort();
    wm_encoding_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_spm_model m;
    wm_error err = {0};
    if (wm_spm_parse(data, size, "fuzz.model", &m, &err) != WM_OK) {
        if (!err.msg[0] || strncmp(err.msg, "fuzz.model", 10) || m.pieces || m.pool) abort();
        return 0;
    }
    if (!m.n || m.unk_id < 0 || (size_t)m.unk_id >= m.n) abort();
    for (size_t i = 0; i < m.n; i++) {
        const wm_spm_piece *p = &m.pieces[i];
        if (!p->s || strlen(p->s) != p->len || p->type < WM_SPM_NORMAL || p->type > WM_SPM_BYTE || !isfinite(p->score))
            abort();
    }
    const char *cls[2] = {NULL, "T5Tokenizer"};
    for (int k = 0; k < 2; k++) {
        wm_tokenizer *t = NULL;
        memset(&err, 0, sizeof err);
        if (wm_spm_tokenizer(&m, "fuzz.model", cls[k], NULL, &t, &err) != WM_OK) {
            if (!err.msg[0] || t) abort();
            continue;
        }
        use(t);
        wm_tokenizer_free(t);
    }
    wm_spm_free(&m);
    return 0;
}
