/*
 * libFuzzer target for what the hub module parses from untrusted sources.
 * The first byte picks the parser, the rest is its input:
 *   0  model.safetensors.index.json -> shard names (wm_hf_index_shards)
 *   1  HTTP answer header lines (wm_hf_http_meta_line), '\n'-separated
 *   2  a -m spec "ORG/NAME[@REVISION]" (wm_hf_parse_repo_spec)
 *   3  the bytes of a refs/REV file (wm_hf_check_ref)
 *   4  an ETag value (wm_hf_etag_normalize)
 *   5  refs/main of a scratch cache, then an offline resolution of org/m
 *   6  the index of a cached snapshot, then an offline resolution of org/m
 *   7  a dataset repository's file listing -> paths (wm_hf_tree_files)
 * Whatever is accepted must satisfy the documented invariants (plain
 * shard names, 40-hex commits, blob-safe etags, checked paths).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/hub.h"
#include "hf/safetensors.h"

static const char C1[] = "1111111111111111111111111111111111111111";
static char dir[64], cache[128], model[192];

static void put(const char *rel, const void *d, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", model, rel);
    unlink(p);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (n && fwrite(d, 1, n, f) != n) abort();
    fclose(f);
}

static void cleanup(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/wm_fuzz_hub_XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(model, sizeof model, "%s/models--org--m", cache);
    char p[512];
    const char *sub[] = {"", "/models--org--m", "/models--org--m/refs", "/models--org--m/blobs",
                         "/models--org--m/snapshots", "/models--org--m/snapshots/1111111111111111111111111111111111111111"};
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        snprintf(p, sizeof p, "%s%s", cache, sub[i]);
        if (mkdir(p, 0755) != 0) abort();
    }
    put("blobs/cfg", "{}", 2);
    static const float v[2] = {1, 2};
    static const int64_t sh[] = {2};
    wm_st_tensor t = {.name = "w", .dtype = WM_ST_F32, .rank = 1, .shape = sh, .data = (const uint8_t *)v};
    wm_error e = {0};
    snprintf(p, sizeof p, "%s/blobs/shard", model);
    if (wm_st_write(p, &t, 1, NULL, 0, &e)) abort();
    snprintf(p, sizeof p, "%s/snapshots/%s/config.json", model, C1);
    if (symlink("../../blobs/cfg", p)) abort();
    snprintf(p, sizeof p, "%s/snapshots/%s/a.safetensors", model, C1);
    if (symlink("../../blobs/shard", p)) abort();
    put("refs/main", C1, 40);
    atexit(cleanup);
    return 0;
}

static int blob_safe(const char *s) {
    if (!*s) return 1;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static void resolve_offline(int expect_ok_possible) {
    wm_hf_resolve_opts o = {.cache_dir = cache, .offline = 1};
    wm_hf_result *r = NULL;
    wm_error e = {0};
    if (wm_hf_resolve_ex("org/m", &o, &r, &e) == WM_OK) {
        if (!expect_ok_possible || !r || strcmp(r->commit, C1)) abort();
        wm_hf_result_free(r);
    } else if (r || !e.msg[0]) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0] % 8;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;
    wm_error e = {0};
    switch (mode) {
    case 0: {
        wm_arena a;
        wm_arena_init(&a);
        const char **names;
        size_t k;
        if (wm_hf_index_shards(&a, in, n, NULL, &names, &k, &e) == WM_OK) {
            if (!k) abort();
            for (size_t i = 0; i < k; i++) {
                size_t L = strlen(names[i]);
                if (strchr(names[i], '/') || L <= 12 || strcmp(names[i] + L - 12, ".safetensors") ||
                    wm_path_check_relative(names[i], NULL) || (i && strcmp(names[i - 1], names[i]) >= 0))
                    abort();
            }
        } else if (!e.msg[0]) {
            abort();
        }
        wm_arena_free(&a);
        break;
    }
    case 7: {
        wm_arena a;
        wm_arena_init(&a);
        const char **names;
        size_t k;
        if (wm_hf_tree_files(&a, in, n, NULL, &names, &k, &e) == WM_OK) {
            for (size_t i = 0; i < k; i++) {
                size_t L = strlen(names[i]);
                if (!L || L > WM_HF_MAX_FILENAME || wm_path_check_relative(names[i], NULL) ||
                    (i && strcmp(names[i - 1], names[i]) > 0))
                    abort();
                for (size_t c = 0; c < L; c++)
                    if ((unsigned char)names[i][c] < 0x20 || names[i][c] == '\\') abort();
            }
        } else if (!e.msg[0]) {
            abort();
        }
        wm_arena_free(&a);
        break;
    }
    case 1: {
        wm_hf_http_meta m;
        wm_hf_http_meta_reset(&m);
        const char *p = in, *end = in + n;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t L = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
            wm_hf_http_meta_line(&m, p, L);
            p += L;
        }
        if (m.status < 0 || m.status > 999 || !blob_safe(m.etag) || !blob_safe(m.linked_etag)) abort();
        if (m.linked_size < -2 || m.content_length < -2 || m.range_start < -2) abort();
        if (memchr(m.commit, 0, sizeof m.commit) == NULL) abort();
        break;
    }
    case 2: {
        char *s = malloc(n + 1), id[WM_HF_MAX_REPO_ID + 1], rev[WM_HF_MAX_REVISION + 1];
        if (!s) return 0;
        memcpy(s, in, n);
        s[n] = 0;
        if (wm_hf_parse_repo_spec(s, id, sizeof id, rev, sizeof rev, &e) == WM_OK) {
            const char *sl = strchr(id, '/');
            if (!sl || strchr(sl + 1, '/') || strstr(id, "..") || strstr(id, "--") || wm_path_check_relative(rev, NULL))
                abort();
        } else if (!e.msg[0]) {
            abort();
        }
        free(s);
        break;
    }
    case 3: {
        char c[WM_HF_COMMIT_LEN + 1];
        if (wm_hf_check_ref(in, n, "refs/main", c, &e) == WM_OK && (n != 40 || !wm_hf_is_commit(c, strlen(c)))) abort();
        break;
    }
    case 4: {
        char et[WM_HF_MAX_ETAG + 1];
        if (wm_hf_etag_normalize(in, n, et, &e) == WM_OK && (!et[0] || !blob_safe(et))) abort();
        break;
    }
    case 5:
        put("refs/main", in, n);
        resolve_offline(n == 40 && !memcmp(in, C1, 40));
        put("refs/main", C1, 40);
        break;
    case 6: {
        char rel[128];
        snprintf(rel, sizeof rel, "snapshots/%s/model.safetensors.index.json", C1);
        put(rel, in, n);
        resolve_offline(1);
        break;
    }
    }
    return 0;
}
