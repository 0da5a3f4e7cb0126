/*
 * libFuzzer target for the tokenizers read from a folder without
 * tokenizer.json (hf/tokenizer_files.c, hf/spm_marian.c): the first byte
 * picks the layout, the rest is split at "\n--\n" into its files (a part
 * left out: that file absent), written into a scratch folder and read by
 * wm_tokenizer_load_dir:
 *   0 GPT-2:    vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json
 *   1 BERT:     vocab.txt, tokenizer_config.json, special_tokens_map.json
 *   2 Marian:   source.spm, target.spm, vocab.json, tokenizer_config.json
 *   3 SentencePiece: spiece.model, tokenizer_config.json, special_tokens_map.json
 * What loads must encode a sample text (alone and as a pair) with offsets
 * inside it and decode its ids; bad input must give a status and a message,
 * no handle.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_tok_check.h"

#define NLAYOUT 4
static const char *const layouts[NLAYOUT][4] = {
    {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"},
    {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json", NULL},
    {"source.spm", "target.spm", "vocab.json", "tokenizer_config.json"},
    {"spiece.model", "tokenizer_config.json", "special_tokens_map.json", NULL},
};
static const char *const all_files[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json",
                                        "vocab.txt",  "source.spm", "target.spm",            "spiece.model"};
static const char TEXT[] = "Hello world! 123 <s> </s> [CLS] >>fra<< caf\xc3\xa9  \xe6\x97\xa5\xe6\x9c\xac\t"
                           "\xf0\x9f\x98\x80";

static char dir[64];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void clear(void) {
    char path[128];
    for (size_t i = 0; i < sizeof all_files / sizeof *all_files; i++) {
        path_of(path, sizeof path, all_files[i]);
        unlink(path);
    }
}

static void cleanup(void) { /* the scratch folder goes with the process */
    clear();
    rmdir(dir);
}

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[128];
    path_of(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_tokdir.XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
    }
    if (!size) return 0;
    const char *const *names = layouts[data[0] % NLAYOUT];
    clear();
    const uint8_t *p = data + 1, *end = data + size;
    for (int i = 0; i < 4 && names[i] && p; i++) {
        const uint8_t *q = NULL;
        for (const uint8_t *c = p; !q && end - c >= 4; c++)
            if (!memcmp(c, "\n--\n", 4)) q = c;
        put(names[i], p, (size_t)((q ? q : end) - p));
        p = q ? q + 4 : NULL;
    }
    wm_tokenizer *t = NULL;
    wm_error err = {0};
    if (wm_tokenizer_load_dir(dir, &t, &err) != WM_OK) {
        if (!err.msg[0] || t) abort();
        return 0;
    }
    fuzz_tok_exercise(t, TEXT, sizeof TEXT - 1, "pair text", 9);
    return 0;
}
