/*
 * libFuzzer target for tokenizer.json: the input is a tokenizer.json,
 * optionally followed by "\n#TEXT#\n" and a sample text. What loads must
 * encode the sample (alone and as a pair) with offsets inside the text and
 * ids that decode; bad input must give a status and a message, no handle.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tok_check.h"

static const char SEP[] = "\n#TEXT#\n";
static const char DEFAULT_TEXT[] = "Hello world! 123 <s> </s> [CLS] caf\xc3\xa9  \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\t"
                                   "\xf0\x9f\x98\x80 a\xcc\x81 \xe2\x96\x81x";

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
    fuzz_tok_exercise(t, text, tlen, "pair \xe2\x96\x81 text", 14);
    return 0;
}
