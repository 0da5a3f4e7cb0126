/*
 * wm_hubtool - resolves a model the way `-m` does (hf/hub.h) and opens its
 * safetensors weights (hf/safetensors.h), reporting resident memory at each
 * step; used by bench/rss_sharded.py.
 *
 *   wm_hubtool open SPEC [--touch]
 *
 * Prints JSON: folder, root, source, commit, shards, tensors, bytes,
 * rss_start / rss_resolved / rss_opened (bytes, from /proc/self/statm),
 * peak_rss; with --touch also rss_touched and a checksum after reading one
 * byte of every 4 KiB page of every tensor. The cache and the network come
 * from the environment (HF_HUB_CACHE, HF_HUB_OFFLINE ...).
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"
#include "hf/hub.h"
#include "hf/safetensors.h"

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[1], "open")) {
        fprintf(stderr, "usage: wm_hubtool open SPEC [--touch]\n");
        return 2;
    }
    int touch = argc > 3 && !strcmp(argv[3], "--touch");
    uint64_t rss0 = wm_current_rss_bytes();
    wm_error e = {0};
    wm_hf_result *r = NULL;
    if (wm_hf_resolve_ex(argv[2], NULL, &r, &e)) {
        fprintf(stderr, "wm_hubtool: error: %s\n", e.msg);
        return 2;
    }
    uint64_t rss1 = wm_current_rss_bytes();
    wm_st_file *f = NULL;
    wm_st_open_opts o = {.root = r->root};
    if (wm_st_open(r->folder, &o, &f, &e)) {
        fprintf(stderr, "wm_hubtool: error: %s\n", e.msg);
        wm_hf_result_free(r);
        return 2;
    }
    uint64_t rss2 = wm_current_rss_bytes(), bytes = 0, sum = 0;
    for (size_t i = 0; i < wm_st_count(f); i++) bytes += wm_st_get(f, i)->nbytes;
    uint64_t rss3 = 0;
    if (touch) {
        for (size_t i = 0; i < wm_st_count(f); i++) {
            const wm_st_tensor *t = wm_st_get(f, i);
            for (uint64_t k = 0; k < t->nbytes; k += 4096) /* the last byte of each page: a float's top byte */
                sum = sum * 31 + t->data[k + 4095 < t->nbytes ? k + 4095 : t->nbytes - 1];
        }
        rss3 = wm_current_rss_bytes();
    }
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "folder", r->folder);
    wm_json_str(&j, "root", r->root);
    wm_json_str(&j, "source", r->source == WM_HF_SRC_CACHE ? "cache" : r->source == WM_HF_SRC_DOWNLOAD ? "hub" : "local");
    wm_json_str(&j, "commit", r->commit);
    wm_json_uint(&j, "shards", wm_st_shard_count(f));
    wm_json_uint(&j, "tensors", wm_st_count(f));
    wm_json_uint(&j, "bytes", bytes);
    wm_json_uint(&j, "rss_start", rss0);
    wm_json_uint(&j, "rss_resolved", rss1);
    wm_json_uint(&j, "rss_opened", rss2);
    if (touch) {
        wm_json_uint(&j, "rss_touched", rss3);
        wm_json_uint(&j, "checksum", sum);
    }
    wm_json_uint(&j, "peak_rss", wm_peak_rss_bytes());
    wm_json_obj_end(&j);
    puts(wm_json_text(&j));
    wm_json_free(&j);
    wm_st_close(f);
    wm_hf_result_free(r);
    return 0;
}
