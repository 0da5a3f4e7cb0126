/*
 * libFuzzer target for the sentence-transformers files (hf/sbert.h): the
 * input split at "\n--\n" into modules.json, sentence_bert_config.json and
 * 1_Pooling/config.json (a part left out: that file absent), written into a
 * scratch folder and read by wm_sbert_load. Everything must fail cleanly
 * (a status and a message) or give settings in their documented ranges.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf/sbert.h"

static char dir[64];

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!p) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

static void cleanup(void) { /* the scratch folder goes with the process */
    char path[128];
    static const char *const rm[] = {"modules.json", "sentence_bert_config.json", "1_Pooling/config.json"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, rm[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    rmdir(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_sbert.XXXXXX");
        char pool[96];
        if (!mkdtemp(dir)) abort();
        snprintf(pool, sizeof pool, "%s/1_Pooling", dir);
        if (mkdir(pool, 0700)) abort();
        atexit(cleanup);
    }
    static const char *const names[3] = {"modules.json", "sentence_bert_config.json", "1_Pooling/config.json"};
    const uint8_t *p = data, *end = data + size;
    for (int i = 0; i < 3; i++) {
        const uint8_t *q = NULL;
        for (const uint8_t *c = p; c && !q && end - c >= 4; c++)
            if (!memcmp(c, "\n--\n", 4)) q = c;
        put(names[i], p, p ? (size_t)((q ? q : end) - p) : 0);
        p = q ? q + 4 : NULL;
    }
    wm_sbert sb;
    wm_error err = {0};
    wm_status s = wm_sbert_load(dir, &sb, &err);
    if (s) {
        if (!err.msg[0]) abort();
        return 0;
    }
    if (sb.max_seq_length < 0 || sb.max_seq_length > (1 << 20) || sb.dim < 0 || sb.dim > (1 << 20)) abort();
    if (sb.has_modules && (!sb.modes || !sb.pooling_dir[0] || strchr(sb.pooling_dir, '/') || sb.pooling_dir[0] == '.'))
        abort();
    if (sb.modes >> WM_SBERT_N_MODES) abort();
    (void)wm_sbert_check_length(&sb, dir, 512, &err);
    return 0;
}
