/*
 * Unit tests of the hub module's parsers and of -m resolution against a
 * Hugging Face cache laid out in a scratch folder (offline: the download
 * path is tested against a local hub server in tests/oracle/test_hub.py).
 * Hash vectors are the published FIPS 180 examples and git's hash of
 * "hello\n"; the adversarial cache entries are those of untrusted-input.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "hf/hub.h"
#include "hf/safetensors.h"
#include "unit_tmpdir.h"

static char dir[64];

static int setup(void **s) {
    (void)s;
    return wm_test_tmpdir_make(dir, sizeof dir, "hub");
}

static int teardown(void **s) {
    (void)s;
    return wm_test_tmpdir_remove(dir);
}

/* ---- hashes ---- */

static void sha256_hex(const void *p, size_t n, size_t chunk, char *hex) {
    wm_sha256 s;
    uint8_t d[32];
    wm_sha256_init(&s);
    const uint8_t *b = p;
    for (size_t off = 0; off < n; off += chunk) wm_sha256_update(&s, b + off, n - off < chunk ? n - off : chunk);
    wm_sha256_final(&s, d);
    wm_hex(d, 32, hex);
}

static void sha1_hex(const void *p, size_t n, size_t chunk, char *hex) {
    wm_sha1 s;
    uint8_t d[20];
    wm_sha1_init(&s);
    const uint8_t *b = p;
    for (size_t off = 0; off < n; off += chunk) wm_sha1_update(&s, b + off, n - off < chunk ? n - off : chunk);
    wm_sha1_final(&s, d);
    wm_hex(d, 20, hex);
}

static void test_hashes(void **state) {
    (void)state;
    char h[65];
    const char *l448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex("abc", 3, 64, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_hex("", 0, 64, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    for (size_t chunk = 1; chunk <= 64; chunk += 7) {
        sha256_hex(l448, strlen(l448), chunk, h);
        assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    }
    char *mil = malloc(1000000);
    assert_non_null(mil);
    memset(mil, 'a', 1000000);
    sha256_hex(mil, 1000000, 4099, h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    sha1_hex(mil, 1000000, 333, h);
    assert_string_equal(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    free(mil);
    sha1_hex("abc", 3, 2, h);
    assert_string_equal(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
    sha1_hex("", 0, 1, h);
    assert_string_equal(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    sha1_hex(l448, strlen(l448), 5, h);
    assert_string_equal(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* git hash-object of "hello\n": sha1 of "blob 6\0hello\n" */
    sha1_hex("blob 6\0hello\n", 13, 64, h);
    assert_string_equal(h, "ce013625030ba8dba906f756967f9e9ca394464a");
}

/* ---- names ---- */

static void spec_ok(const char *spec, const char *id, const char *rev) {
    char r[WM_HF_MAX_REPO_ID + 1], v[WM_HF_MAX_REVISION + 1];
    wm_error e = {0};
    assert_int_equal(wm_hf_parse_repo_spec(spec, r, sizeof r, v, sizeof v, &e), WM_OK);
    assert_string_equal(r, id);
    assert_string_equal(v, rev);
}

static void spec_bad(const char *spec, const char *needle) {
    char r[WM_HF_MAX_REPO_ID + 1], v[WM_HF_MAX_REVISION + 1];
    wm_error e = {0};
    assert_int_equal(wm_hf_parse_repo_spec(spec, r, sizeof r, v, sizeof v, &e), WM_ERR_INPUT);
    if (!strstr(e.msg, needle)) fail_msg("'%s': message '%s' lacks '%s'", spec, e.msg, needle);
}

static void test_repo_spec(void **state) {
    (void)state;
    spec_ok("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", "main");
    spec_ok("org/name@v1.0", "org/name", "v1.0");
    spec_ok("org/name@refs/pr/1", "org/name", "refs/pr/1");
    spec_ok("a_b/c.d-e@0123456789abcdef0123456789abcdef01234567", "a_b/c.d-e", "0123456789abcdef0123456789abcdef01234567");
    spec_bad("org/na--me", "'--'");
    spec_bad("org/a..b", "'..'");
    spec_bad("-org/x", "start and end");
    spec_bad("org/x.", "start and end");
    spec_bad("org/x.git", ".git");
    spec_bad("org/x@../main", "'..'");
    spec_bad("org/x@a//b", "empty component");
    spec_bad("org/x@", "1 to 255");
    spec_bad("org/x@a b", "revision may only");
    spec_bad("org/x@main/", "ends with '/'");
    spec_bad("org/x y", "may only hold");
    spec_bad("justaname", "ORG/NAME");
    char longname[128];
    memset(longname, 'a', sizeof longname);
    memcpy(longname, "o/", 2);
    longname[99] = 0; /* name of 97 characters */
    spec_bad(longname, "1 to 96");
}

static void test_ref_and_etag(void **state) {
    (void)state;
    char c[WM_HF_COMMIT_LEN + 1], et[WM_HF_MAX_ETAG + 1];
    wm_error e = {0};
    const char *good = "0123456789abcdef0123456789abcdef01234567";
    assert_int_equal(wm_hf_check_ref(good, 40, "refs/main", c, &e), WM_OK);
    assert_string_equal(c, good);
    assert_int_equal(wm_hf_check_ref("../../x", 7, "refs/main", c, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "refs/main: holds '../../x'"));
    wm_err_clear(&e);
    char nl[41];
    memcpy(nl, good, 40);
    nl[40] = '\n';
    assert_int_equal(wm_hf_check_ref(nl, 41, "refs/main", c, &e), WM_ERR_INPUT); /* exactly 40, nothing else */
    wm_err_clear(&e);
    assert_int_equal(wm_hf_check_ref("0123456789ABCDEF0123456789abcdef01234567", 40, "r", c, &e), WM_ERR_INPUT);
    assert_int_equal(wm_hf_is_commit(good, 40), 1);
    assert_int_equal(wm_hf_is_commit(good, 39), 0);

    assert_int_equal(wm_hf_etag_normalize("W/\"abc-1_2\"", 11, et, NULL), WM_OK);
    assert_string_equal(et, "abc-1_2");
    assert_int_equal(wm_hf_etag_normalize("\"0a\"", 4, et, NULL), WM_OK);
    assert_string_equal(et, "0a");
    assert_int_equal(wm_hf_etag_normalize("\"../x\"", 6, et, NULL), WM_ERR_INPUT);
    assert_int_equal(wm_hf_etag_normalize("\"\"", 2, et, NULL), WM_ERR_INPUT);
    assert_int_equal(wm_hf_etag_normalize("a.incomplete", 12, et, NULL), WM_ERR_INPUT);
    char big[200];
    memset(big, 'a', sizeof big);
    assert_int_equal(wm_hf_etag_normalize(big, 129, et, NULL), WM_ERR_INPUT);
    assert_int_equal(wm_hf_etag_normalize(big, 128, et, NULL), WM_OK);
}

static void feed(wm_hf_http_meta *m, const char *line) { wm_hf_http_meta_line(m, line, strlen(line)); }

static void test_headers(void **state) {
    (void)state;
    wm_hf_http_meta m;
    wm_hf_http_meta_reset(&m);
    feed(&m, "HTTP/1.1 302 Found\r\n");
    feed(&m, "x-repo-commit: 0123456789abcdef0123456789abcdef01234567\r\n");
    feed(&m, "X-Linked-Etag:  \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"\r\n");
    feed(&m, "ETag: W/\"abc\"\r\n");
    feed(&m, "X-Linked-Size: 123456789012\r\n");
    feed(&m, "Content-Length: 12x\r\n");
    feed(&m, "X-Error-Message: bad\x01thing\r\n");
    assert_int_equal(m.status, 302);
    assert_string_equal(m.commit, "0123456789abcdef0123456789abcdef01234567");
    assert_string_equal(m.linked_etag, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_string_equal(m.etag, "abc");
    assert_true(m.linked_size == 123456789012LL);
    assert_true(m.content_length == -2);
    assert_string_equal(m.error_message, "bad?thing");
    feed(&m, "HTTP/1.1 206 Partial Content\r\n"); /* a new answer resets everything */
    assert_int_equal(m.status, 206);
    assert_string_equal(m.commit, "");
    assert_true(m.linked_size == -1);
    feed(&m, "Content-Range: bytes 5-9/10\r\n");
    assert_true(m.range_start == 5 && m.range_total == 10);
    feed(&m, "content-range: bytes 5-9/*\r\n");
    assert_true(m.range_start == 5 && m.range_total == -1);
    feed(&m, "Content-Range: bytes 9-5/10\r\n");
    assert_true(m.range_start == -2);
    feed(&m, "Content-Range: bytes 5-10/10\r\n");
    assert_true(m.range_start == -2);
    feed(&m, "X-Repo-Commit: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789\r\n");
    assert_int_equal(m.commit_bad, 1);
    feed(&m, "ETag: \"a/b\"\r\n");
    assert_int_equal(m.etag_bad, 1);
    assert_string_equal(m.etag, "");
}

static void shards_bad(const char *json, const char *needle) {
    wm_arena a;
    wm_arena_init(&a);
    const char **names;
    size_t n;
    wm_error e = {0};
    assert_int_equal(wm_hf_index_shards(&a, json, strlen(json), "idx.json", &names, &n, &e), WM_ERR_INPUT);
    if (!strstr(e.msg, needle)) fail_msg("'%s': message '%s' lacks '%s'", json, e.msg, needle);
    wm_arena_free(&a);
}

static void test_index_shards(void **state) {
    (void)state;
    wm_arena a;
    wm_arena_init(&a);
    const char **names;
    size_t n;
    wm_error e = {0};
    const char *ok = "{\"metadata\":{\"total_size\":123456789012345678},\"weight_map\":{\"x\":\"m-2.safetensors\","
                     "\"y\":\"m-1.safetensors\",\"z\":\"m-2.safetensors\"}}";
    assert_int_equal(wm_hf_index_shards(&a, ok, strlen(ok), "idx", &names, &n, &e), WM_OK);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "m-1.safetensors");
    assert_string_equal(names[1], "m-2.safetensors");
    wm_arena_free(&a);
    shards_bad("{\"weight_map\":{\"x\":\"../evil.safetensors\"}}", "'..'");
    shards_bad("{\"weight_map\":{\"x\":\"sub/a.safetensors\"}}", "plain file name");
    shards_bad("{\"weight_map\":{\"x\":\"/etc/a.safetensors\"}}", "absolute path");
    shards_bad("{\"weight_map\":{\"x\":\"pytorch_model-1.bin\"}}", ".safetensors");
    shards_bad("{\"weight_map\":{\"x\":\"a\\u0000.safetensors\"}}", ".safetensors");
    shards_bad("{\"weight_map\":{\"x\":\"a\\u0001.safetensors\"}}", "control");
    shards_bad("{\"weight_map\":{\"x\":7}}", "not a string");
    shards_bad("{\"weight_map\":{}}", "empty");
    shards_bad("{\"metadata\":{}}", "no \"weight_map\"");
    shards_bad("[1,2]", "not a JSON object");
    shards_bad("{\"weight_map\":", "not a JSON object");
}

/* ---- a cache in the scratch folder ---- */

static const char C1[] = "1111111111111111111111111111111111111111";
static const char C2[] = "2222222222222222222222222222222222222222";

static void put(const char *rel, const void *data, size_t n) {
    char p[512], d[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    snprintf(d, sizeof d, "mkdir -p \"$(dirname '%s')\"", p);
    assert_int_equal(system(d), 0);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void link_rel(const char *target, const char *rel) {
    char p[512], d[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    snprintf(d, sizeof d, "mkdir -p \"$(dirname '%s')\"", p);
    assert_int_equal(system(d), 0);
    unlink(p);
    assert_int_equal(symlink(target, p), 0);
}

/* A snapshot of org/m at commit with config.json + model.safetensors, blobs named by fake etags. */
static void make_snapshot(const char *commit, const char *cfg) {
    char rel[256], tgt[256];
    snprintf(rel, sizeof rel, "cache/models--org--m/blobs/cfg%.8s", commit);
    put(rel, cfg, strlen(cfg));
    snprintf(rel, sizeof rel, "cache/models--org--m/snapshots/%s/config.json", commit);
    snprintf(tgt, sizeof tgt, "../../blobs/cfg%.8s", commit);
    link_rel(tgt, rel);
    static const float v[4] = {1, 2, 3, 4};
    static const int64_t sh[] = {4};
    wm_st_tensor t = {.name = "w", .dtype = WM_ST_F32, .rank = 1, .shape = sh, .data = (const uint8_t *)v};
    char p[512];
    snprintf(p, sizeof p, "%s/cache/models--org--m/blobs/st%.8s", dir, commit);
    wm_error e = {0};
    assert_int_equal(wm_st_write(p, &t, 1, NULL, 0, &e), WM_OK);
    snprintf(rel, sizeof rel, "cache/models--org--m/snapshots/%s/model.safetensors", commit);
    snprintf(tgt, sizeof tgt, "../../blobs/st%.8s", commit);
    link_rel(tgt, rel);
}

static wm_status resolve(const char *spec, wm_hf_result **r, wm_error *e) {
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    wm_hf_resolve_opts o = {.cache_dir = cache, .offline = 1};
    wm_err_clear(e);
    return wm_hf_resolve_ex(spec, &o, r, e);
}

static void expect_fail(const char *spec, wm_status want, const char *n1, const char *n2) {
    wm_hf_result *r = NULL;
    wm_error e = {0};
    assert_int_equal(resolve(spec, &r, &e), want);
    assert_null(r);
    if (!strstr(e.msg, n1) || (n2 && !strstr(e.msg, n2))) fail_msg("%s: message '%s' lacks '%s' / '%s'", spec, e.msg, n1, n2 ? n2 : "");
}

static void test_cache_resolution(void **state) {
    (void)state;
    make_snapshot(C1, "{\"v\":1}");
    make_snapshot(C2, "{\"v\":2}");
    put("cache/models--org--m/refs/main", C2, 40);
    put("cache/models--org--m/refs/v1", C1, 40);
    wm_hf_result *r = NULL;
    wm_error e = {0};
    assert_int_equal(resolve("org/m", &r, &e), WM_OK);
    assert_int_equal(r->source, WM_HF_SRC_CACHE);
    assert_string_equal(r->commit, C2);
    assert_non_null(strstr(r->folder, "/cache/models--org--m/snapshots/2222"));
    assert_true(r->info.has_config && r->info.weights == WM_HF_WEIGHTS_SINGLE);
    /* the files link outside the snapshot folder: the reader needs the model folder as root */
    wm_st_file *f = NULL;
    wm_st_open_opts so = {.root = r->root};
    assert_int_equal(wm_st_open(r->folder, &so, &f, &e), WM_OK);
    assert_non_null(wm_st_find(f, "w"));
    wm_st_close(f);
    wm_hf_result_free(r);
    /* revision pinning: a tag, and a commit without any ref */
    assert_int_equal(resolve("org/m@v1", &r, &e), WM_OK);
    assert_string_equal(r->commit, C1);
    wm_hf_result_free(r);
    assert_int_equal(resolve("org/m@1111111111111111111111111111111111111111", &r, &e), WM_OK);
    assert_string_equal(r->commit, C1);
    wm_hf_result_free(r);
    /* the snapshot folder given by path: root is the model folder */
    char snap[256];
    snprintf(snap, sizeof snap, "%s/cache/models--org--m/snapshots/%s", dir, C1);
    assert_int_equal(resolve(snap, &r, &e), WM_OK);
    assert_int_equal(r->source, WM_HF_SRC_LOCAL);
    assert_non_null(strstr(r->root, "/cache/models--org--m"));
    assert_null(strstr(r->root, "snapshots"));
    wm_hf_result_free(r);
    /* a file inside a folder */
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/config.json", snap);
    assert_int_equal(resolve(cfg, &r, &e), WM_OK);
    assert_non_null(strstr(r->folder, C1));
    wm_hf_result_free(r);
    /* offline misses say what to run */
    expect_fail("org/none", WM_ERR_INPUT, "HF_HUB_OFFLINE=1", "run `winml download -m org/none@main`");
    expect_fail("org/m@v2", WM_ERR_INPUT, "not in the Hugging Face cache", "winml download -m org/m@v2");
    expect_fail("./nothing/here", WM_ERR_INPUT, "no such file or folder", NULL);
}

static void test_cache_adversarial(void **state) {
    (void)state;
    make_snapshot(C1, "{}");
    /* item 15: refs/main = "../../x" */
    put("cache/models--org--m/refs/main", "../../x", 7);
    expect_fail("org/m", WM_ERR_INPUT, "refs/main: holds '../../x'", "40 lowercase hex");
    /* a ref that is a symlink */
    link_rel(C1, "cache/models--org--m/refs/main");
    expect_fail("org/m", WM_ERR_INPUT, "symbolic link", NULL);
    char p[256];
    snprintf(p, sizeof p, "%s/cache/models--org--m/refs/main", dir);
    assert_int_equal(unlink(p), 0);
    put("cache/models--org--m/refs/main", C1, 40);
    /* a snapshot file linking outside its model folder */
    put("outside.json", "{}", 2);
    char rel[128];
    snprintf(rel, sizeof rel, "cache/models--org--m/snapshots/%s/config.json", C1);
    link_rel("../../../../outside.json", rel);
    expect_fail("org/m", WM_ERR_INPUT, "outside the model folder", "config.json");
    link_rel("/etc/hostname", rel);
    expect_fail("org/m", WM_ERR_INPUT, "outside the model folder", NULL);
    link_rel("../../blobs/cfg11111111", rel);
    /* an index naming a shard with ../ */
    snprintf(rel, sizeof rel, "cache/models--org--m/snapshots/%s/model.safetensors", C1);
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    unlink(p);
    const char *idx = "{\"weight_map\":{\"w\":\"../../blobs/st11111111.safetensors\"}}";
    snprintf(rel, sizeof rel, "cache/models--org--m/snapshots/%s/model.safetensors.index.json", C1);
    put(rel, idx, strlen(idx));
    expect_fail("org/m", WM_ERR_INPUT, "shard file name '../../blobs/st11111111.safetensors'", "'..'");
    /* pickle only */
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    unlink(p);
    snprintf(rel, sizeof rel, "cache/models--org--m/snapshots/%s/pytorch_model.bin", C1);
    put(rel, "\x80\x02", 2);
    expect_fail("org/m", WM_ERR_UNSUPPORTED, "only pickle weights (pytorch_model.bin)", "use a safetensors");
}

static void test_local_folders(void **state) {
    (void)state;
    wm_hf_result *r = NULL;
    wm_error e = {0};
    char p[256];
    put("loc/pickle/config.json", "{}", 2);
    put("loc/pickle/pytorch_model.bin", "\x80\x02", 2);
    put("loc/pickle/model.ckpt", "\x80\x02", 2);
    snprintf(p, sizeof p, "%s/loc/pickle", dir);
    expect_fail(p, WM_ERR_UNSUPPORTED, "only pickle weights (model.ckpt)", "use safetensors");
    /* missing config, then a missing shard, named exactly */
    static const float v[2] = {1, 2};
    static const int64_t sh[] = {2};
    wm_st_tensor t = {.name = "w", .dtype = WM_ST_F32, .rank = 1, .shape = sh, .data = (const uint8_t *)v};
    snprintf(p, sizeof p, "%s/loc/ok/model-1.safetensors", dir);
    put("loc/ok/x", "", 0);
    assert_int_equal(wm_st_write(p, &t, 1, NULL, 0, &e), WM_OK);
    const char *idx = "{\"weight_map\":{\"w\":\"model-1.safetensors\",\"v\":\"model-2.safetensors\"}}";
    put("loc/ok/model.safetensors.index.json", idx, strlen(idx));
    snprintf(p, sizeof p, "%s/loc/ok", dir);
    expect_fail(p, WM_ERR_INPUT, "missing shard 'model-2.safetensors' named by model.safetensors.index.json", "1 of 2");
    idx = "{\"weight_map\":{\"w\":\"model-1.safetensors\"}}";
    put("loc/ok/model.safetensors.index.json", idx, strlen(idx));
    expect_fail(p, WM_ERR_INPUT, "missing config.json", NULL);
    put("loc/ok/config.json", "{}", 2);
    put("loc/ok/tokenizer.json", "{}", 2);
    put("loc/ok/merges.txt", "", 0);
    assert_int_equal(resolve(p, &r, &e), WM_OK);
    assert_int_equal(r->info.weights, WM_HF_WEIGHTS_INDEX);
    assert_int_equal(r->info.tokenizer, WM_HF_TOK_JSON | WM_HF_TOK_MERGES);
    assert_string_equal(r->info.pickle, "");
    wm_hf_result_free(r);
    /* the short form */
    char folder[4096], root[4096];
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    wm_hf_resolve_opts o = {.cache_dir = cache, .offline = 1};
    assert_int_equal(wm_hf_resolve(p, &o, folder, sizeof folder, root, sizeof root, &e), WM_OK);
    assert_string_equal(folder, root);
    assert_int_equal(wm_hf_resolve(p, &o, folder, 8, NULL, 0, &e), WM_ERR_INPUT);
}

static void test_cache_dir_env(void **state) {
    (void)state;
    char out[4096];
    wm_error e = {0};
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    unsetenv("XDG_CACHE_HOME");
    setenv("HF_HOME", "/x/hf", 1);
    assert_int_equal(wm_hf_cache_dir(out, sizeof out, &e), WM_OK);
    assert_string_equal(out, "/x/hf/hub");
    setenv("HF_HUB_CACHE", "/y/hub", 1);
    assert_int_equal(wm_hf_cache_dir(out, sizeof out, &e), WM_OK);
    assert_string_equal(out, "/y/hub");
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(wm_hf_cache_dir(out, sizeof out, &e), WM_OK);
    assert_string_equal(out, "/home/u/.cache/huggingface/hub");
    setenv("HF_HOME", "~/hfh", 1);
    assert_int_equal(wm_hf_cache_dir(out, sizeof out, &e), WM_OK);
    assert_string_equal(out, "/home/u/hfh/hub");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hashes),
        cmocka_unit_test(test_repo_spec),
        cmocka_unit_test(test_ref_and_etag),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_index_shards),
        cmocka_unit_test_setup_teardown(test_cache_resolution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_adversarial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_folders, setup, teardown),
        cmocka_unit_test(test_cache_dir_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
