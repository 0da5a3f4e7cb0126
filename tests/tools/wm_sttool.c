/*
 * wm_sttool - drives libwinml's safetensors reader and writer for the
 * oracle tests and for making fuzz seeds.
 *
 *   wm_sttool dump PATH        JSON of every tensor (name, dtype, shape, nbytes,
 *                              shard, aligned, fnv1a64 of its bytes) and metadata
 *   wm_sttool list PATH        the same without touching any weight byte (no
 *                              checksum), plus rss_bytes / peak_rss_bytes
 *   wm_sttool copy IN OUT      read IN (file, folder or index), write OUT (one file)
 *   wm_sttool gen OUT VARIANT  write a deterministic file: "all" (every dtype),
 *                              "scalar" (0-d and zero-size tensors), "empty"
 *   wm_sttool mkbig OUT BYTES  write one F32 tensor "big" of BYTES (rounded down to 4)
 * PATH for dump/list may be followed by --root DIR (wm_st_open_opts.root).
 * Byte k of generated tensor i is (i * 31 + k * 7 + 1) mod 256 (mod 2 for BOOL).
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "hf/safetensors.h"

static int fail(const wm_error *e) {
    fprintf(stderr, "wm_sttool: error: %s\n", e->msg);
    return 2;
}

static uint64_t fnv1a(const uint8_t *p, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int dump(const char *path, const char *root, int touch) {
    wm_error e = {0};
    wm_st_file *f = NULL;
    wm_st_open_opts o = {.root = root};
    if (wm_st_open(path, &o, &f, &e)) return fail(&e);
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_arr(&j, "shards");
    for (size_t i = 0; i < wm_st_shard_count(f); i++) wm_json_str(&j, NULL, wm_st_shard_path(f, i));
    wm_json_arr_end(&j);
    wm_json_obj(&j, "metadata");
    for (size_t i = 0; i < wm_st_meta_count(f); i++) wm_json_str(&j, wm_st_meta_at(f, i)->key, wm_st_meta_at(f, i)->value);
    wm_json_obj_end(&j);
    wm_json_arr(&j, "tensors");
    for (size_t i = 0; i < wm_st_count(f); i++) {
        const wm_st_tensor *t = wm_st_get(f, i);
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "name", t->name);
        wm_json_str(&j, "dtype", wm_st_dtype_name(t->dtype));
        wm_json_arr(&j, "shape");
        for (size_t k = 0; k < t->rank; k++) wm_json_int(&j, NULL, t->shape[k]);
        wm_json_arr_end(&j);
        wm_json_uint(&j, "nbytes", t->nbytes);
        wm_json_uint(&j, "offset", t->offset);
        wm_json_uint(&j, "shard", t->shard);
        wm_json_bool(&j, "aligned", wm_st_is_aligned(t));
        wm_json_int(&j, "onnx_dtype", wm_st_dtype_onnx(t->dtype));
        if (touch) {
            char h[20];
            snprintf(h, sizeof h, "%016llx", (unsigned long long)fnv1a(t->data, t->nbytes));
            wm_json_str(&j, "fnv1a64", h);
        }
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_uint(&j, "rss_bytes", wm_current_rss_bytes());
    wm_json_uint(&j, "peak_rss_bytes", wm_peak_rss_bytes());
    wm_json_obj_end(&j);
    int oom = j.oom;
    if (!oom) printf("%s\n", wm_json_text(&j));
    wm_json_free(&j);
    wm_st_close(f);
    if (oom) {
        fprintf(stderr, "wm_sttool: error: out of memory\n");
        return 2;
    }
    return 0;
}

static int copy(const char *in, const char *out) {
    wm_error e = {0};
    wm_st_file *f = NULL;
    if (wm_st_open(in, NULL, &f, &e)) return fail(&e);
    size_t n = wm_st_count(f), m = wm_st_meta_count(f);
    wm_status s = wm_st_write(out, n ? wm_st_get(f, 0) : NULL, n, m ? wm_st_meta_at(f, 0) : NULL, m, &e);
    wm_st_close(f);
    return s ? fail(&e) : 0;
}

typedef struct gen_spec {
    const char *name;
    wm_st_dtype dt;
    size_t rank;
    int64_t shape[3];
} gen_spec;

static int gen(const char *out, const char *variant) {
    static const gen_spec all[] = {
        {"f64", WM_ST_F64, 2, {2, 3}},  {"f32", WM_ST_F32, 2, {3, 4}},   {"f16", WM_ST_F16, 1, {5}},
        {"bf16", WM_ST_BF16, 2, {2, 2}}, {"i64", WM_ST_I64, 1, {3}},     {"i32", WM_ST_I32, 3, {1, 2, 3}},
        {"i16", WM_ST_I16, 1, {4}},      {"i8", WM_ST_I8, 1, {9}},       {"u8", WM_ST_U8, 2, {3, 3}},
        {"u16", WM_ST_U16, 1, {2}},      {"u32", WM_ST_U32, 1, {2}},     {"u64", WM_ST_U64, 1, {2}},
        {"bool", WM_ST_BOOL, 1, {6}},    {"f8e4m3", WM_ST_F8_E4M3, 1, {4}}, {"f8e5m2", WM_ST_F8_E5M2, 1, {4}},
        {"c64", WM_ST_C64, 1, {2}},      {"f4", WM_ST_F4, 2, {2, 4}},    {"e8m0", WM_ST_F8_E8M0, 1, {3}},
    };
    static const gen_spec scalar[] = {
        {"scalar_f32", WM_ST_F32, 0, {0}}, {"scalar_i64", WM_ST_I64, 0, {0}}, {"empty_f32", WM_ST_F32, 1, {0}},
        {"empty_2d", WM_ST_F16, 3, {4, 0, 2}}, {"one", WM_ST_U8, 1, {1}},
    };
    const gen_spec *tab;
    size_t n;
    if (!strcmp(variant, "all")) tab = all, n = sizeof all / sizeof all[0];
    else if (!strcmp(variant, "scalar")) tab = scalar, n = sizeof scalar / sizeof scalar[0];
    else if (!strcmp(variant, "empty")) tab = all, n = 0;
    else {
        fprintf(stderr, "wm_sttool: unknown variant '%s'\n", variant);
        return 2;
    }
    wm_st_tensor t[32];
    static uint8_t data[32][256];
    for (size_t i = 0; i < n; i++) {
        const gen_spec *d = &tab[i];
        t[i] = (wm_st_tensor){.name = d->name, .dtype = d->dt, .rank = d->rank, .shape = d->rank ? d->shape : NULL,
                              .data = data[i]};
        for (size_t k = 0; k < 256; k++)
            data[i][k] = d->dt == WM_ST_BOOL ? (uint8_t)((i + k) % 2) : (uint8_t)(i * 31 + k * 7 + 1);
    }
    wm_st_kv meta[] = {{"format", "np"}, {"producer", "wm_sttool"}};
    wm_error e = {0};
    return wm_st_write(out, t, n, meta, n ? 2 : 0, &e) ? fail(&e) : 0;
}

static int mkbig(const char *out, unsigned long long bytes) {
    bytes = bytes / 4 * 4;
    /* zero pages from the kernel: the writer streams them without this process touching them first */
    void *p = bytes ? mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : NULL;
    if (p == MAP_FAILED) {
        fprintf(stderr, "wm_sttool: error: cannot map %llu bytes\n", bytes);
        return 2;
    }
    int64_t shape[1] = {(int64_t)(bytes / 4)};
    wm_st_tensor t = {.name = "big", .dtype = WM_ST_F32, .rank = 1, .shape = shape, .data = p};
    wm_error e = {0};
    wm_status s = wm_st_write(out, &t, 1, NULL, 0, &e);
    if (p) munmap(p, bytes);
    return s ? fail(&e) : 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && (!strcmp(argv[1], "dump") || !strcmp(argv[1], "list"))) {
        const char *root = argc >= 5 && !strcmp(argv[3], "--root") ? argv[4] : NULL;
        return dump(argv[2], root, !strcmp(argv[1], "dump"));
    }
    if (argc == 4 && !strcmp(argv[1], "copy")) return copy(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "gen")) return gen(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "mkbig")) return mkbig(argv[2], strtoull(argv[3], NULL, 10));
    fprintf(stderr, "usage: wm_sttool dump|list PATH [--root DIR] | copy IN OUT | gen OUT all|scalar|empty | "
                    "mkbig OUT BYTES\n");
    return 2;
}
