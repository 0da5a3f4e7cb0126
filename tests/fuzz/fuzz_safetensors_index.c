/*
 * libFuzzer target for the sharded-checkpoint index reader: arbitrary
 * bytes as model.safetensors.index.json over a fixed folder holding two
 * valid shards (a.safetensors: "x", "y"; b.safetensors: "z"). Whatever is
 * accepted must name only those shards and list exactly their tensors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf/safetensors.h"

static char dir[64];
static char shard_a[128], shard_b[128];

static void cleanup(void) {
    unlink(shard_a);
    unlink(shard_b);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/wm_fuzz_st_XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(shard_a, sizeof shard_a, "%s/a.safetensors", dir);
    snprintf(shard_b, sizeof shard_b, "%s/b.safetensors", dir);
    static const float v[4] = {1, 2, 3, 4};
    static const int64_t sh[] = {2};
    wm_st_tensor ta[2] = {{.name = "x", .dtype = WM_ST_F32, .rank = 1, .shape = sh, .data = (const uint8_t *)v},
                          {.name = "y", .dtype = WM_ST_F32, .rank = 1, .shape = sh, .data = (const uint8_t *)(v + 2)}};
    wm_st_tensor tb = {.name = "z", .dtype = WM_ST_U8, .rank = 0, .data = (const uint8_t *)v};
    wm_st_kv ma[] = {{"format", "pt"}, {"shard", "a"}}, mb[] = {{"format", "pt"}, {"shard", "b"}, {"only_b", "1"}};
    wm_error err = {0};
    if (wm_st_write(shard_a, ta, 2, ma, 2, &err) || wm_st_write(shard_b, &tb, 1, mb, 3, &err)) abort();
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error err = {0};
    wm_st_file *f = NULL;
    if (wm_st_open_index_buffer(data, size, NULL, dir, NULL, &f, &err) != WM_OK) {
        if (!err.msg[0] || f) abort();
        return 0;
    }
    size_t n = wm_st_count(f), ns = wm_st_shard_count(f);
    if (ns < 1 || ns > 2 || (ns == 1 && n != 1 && n != 2) || (ns == 2 && n != 3)) abort();
    if (wm_st_meta_count(f) != (ns == 2 ? 3 : n == 1 ? 3 : 2) || !wm_st_meta_get(f, "shard")) abort(); /* union */
    for (size_t i = 0; i < n; i++) {
        const wm_st_tensor *t = wm_st_get(f, i);
        const char *p = wm_st_shard_path(f, t->shard);
        if (!p || (strcmp(p, shard_a) && strcmp(p, shard_b))) abort();
    }
    wm_st_close(f);
    return 0;
}
