/* Unit tests of core/output.c (temporaries, signals, stale sweep, locks, space) and the data-file fingerprint
 * of onnx/onnx_out.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file.h"
#include "core/output.h"
#include "onnx/onnx_out.h"
#include "unit_tmpdir.h"

static char g_dir[256];

static int setup(void **state) {
    (void)state;
    return wm_test_tmpdir_make(g_dir, sizeof g_dir, "output");
}

static int teardown(void **state) {
    (void)state;
    return wm_test_tmpdir_remove(g_dir);
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

static int there(const char *name) {
    char p[512];
    struct stat st;
    path_of(p, sizeof p, name);
    return lstat(p, &st) == 0;
}

static void put(const char *name, const char *text) {
    char p[512];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int count_entries(void) {
    int n = 0;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", g_dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

/* A pid that was a process a moment ago and is not any more. */
static long dead_pid(void) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, NULL, 0);
    assert_false(wm_pid_alive(c));
    return (long)c;
}

static void test_tmp_create_commit_discard(void **state) {
    (void)state;
    char final[512], tmp[600];
    int fd, slot;
    wm_error e = {0};
    path_of(final, sizeof final, "a.json");
    assert_int_equal(wm_tmp_create(final, tmp, sizeof tmp, &fd, &slot, &e), WM_OK);
    char want[600];
    snprintf(want, sizeof want, "%s.winml-tmp.%ld", final, (long)getpid());
    assert_string_equal(tmp, want);
    assert_int_equal(wm_write_full(fd, "{}", 2), 0);
    close(fd);
    assert_false(there("a.json")); /* not before the commit */
    assert_int_equal(wm_tmp_commit(tmp, &slot, final, &e), WM_OK);
    assert_true(there("a.json"));
    assert_int_equal(tmp[0], 0);
    assert_int_equal(slot, -1);
    /* a discarded temporary leaves nothing */
    assert_int_equal(wm_tmp_create(final, tmp, sizeof tmp, &fd, &slot, &e), WM_OK);
    close(fd);
    wm_tmp_discard(tmp, &slot);
    assert_int_equal(count_entries(), 1);
    /* a leftover of a dead process that had our pid is replaced, not an error */
    put("b.json.winml-tmp.0", "x"); /* not ours: pid 0 */
    snprintf(want, sizeof want, "%s/b.json.winml-tmp.%ld", g_dir, (long)getpid());
    FILE *f = fopen(want, "w");
    fclose(f);
    path_of(final, sizeof final, "b.json");
    assert_int_equal(wm_tmp_create(final, tmp, sizeof tmp, &fd, &slot, &e), WM_OK);
    close(fd);
    wm_tmp_discard(tmp, &slot);
}

static void test_sweep_stale(void **state) {
    (void)state;
    long dead = dead_pid(), me = (long)getpid();
    char n[256], p[512];
    snprintf(n, sizeof n, "out.winml-tmp.%ld", dead); /* a dead build's staging folder, with a file in it */
    path_of(p, sizeof p, n);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(n, sizeof n, "out.winml-tmp.%ld/model.onnx", dead);
    put(n, "x");
    snprintf(n, sizeof n, "m.onnx.data.winml-tmp.%ld", dead);
    put(n, "x");
    snprintf(n, sizeof n, "live.winml-tmp.%ld", me); /* ours, alive: kept */
    put(n, "x");
    snprintf(n, sizeof n, "gone.winml-old.%ld", dead); /* a replace killed midway, nothing in its place: restored */
    path_of(p, sizeof p, n);
    assert_int_equal(mkdir(p, 0755), 0);
    put("keep.winml-old.1x", "x");   /* not our pattern */
    put("notes.winml-tmp.txt", "x"); /* not our pattern */
    put("idle.winml-lock", "");      /* nobody holds it */
    int removed = wm_sweep_stale(g_dir);
    assert_int_equal(removed, 4);
    snprintf(n, sizeof n, "out.winml-tmp.%ld", dead);
    assert_false(there(n));
    snprintf(n, sizeof n, "m.onnx.data.winml-tmp.%ld", dead);
    assert_false(there(n));
    snprintf(n, sizeof n, "live.winml-tmp.%ld", me);
    assert_true(there(n));
    assert_true(there("gone"));
    assert_true(there("keep.winml-old.1x"));
    assert_true(there("notes.winml-tmp.txt"));
    assert_false(there("idle.winml-lock"));
    /* an old folder whose place was taken again is removed */
    snprintf(n, sizeof n, "gone.winml-old.%ld", dead);
    path_of(p, sizeof p, n);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(wm_sweep_stale(g_dir), 1);
    assert_false(there(n));
    assert_true(there("gone"));
}

static void test_lock(void **state) {
    (void)state;
    char final[512];
    path_of(final, sizeof final, "out");
    wm_lockfile a = WM_LOCKFILE_INIT, b = WM_LOCKFILE_INIT;
    wm_error e = {0};
    assert_int_equal(wm_lock_output(final, &a, &e), WM_OK);
    assert_true(there("out.winml-lock"));
    assert_int_equal(wm_sweep_stale(g_dir), 0); /* a held lock is not swept */
    pid_t c = fork();
    if (c == 0) { /* another process: refused, naming the holder */
        wm_error ce = {0};
        wm_lockfile l = WM_LOCKFILE_INIT;
        char pid[32];
        snprintf(pid, sizeof pid, "(pid %ld)", (long)getppid());
        _exit(wm_lock_output(final, &l, &ce) == WM_ERR_USAGE && strstr(ce.msg, pid) ? 0 : 1);
    }
    int st;
    waitpid(c, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(wm_lock_output(final, &b, &e), WM_ERR_USAGE); /* and a second writer in this process too */
    wm_unlock_output(&a);
    assert_false(there("out.winml-lock"));
    wm_error e2 = {0};
    assert_int_equal(wm_lock_output(final, &b, &e2), WM_OK);
    wm_unlock_output(&b);
    wm_unlock_output(&b); /* idempotent */
}

static void test_commit_dir(void **state) {
    (void)state;
    char final[512], tmp[600];
    int slot;
    wm_error e = {0};
    path_of(final, sizeof final, "build");
    assert_int_equal(wm_tmp_mkdir(final, tmp, sizeof tmp, &slot, &e), WM_OK);
    put("build.winml-tmp.x", ""); /* unrelated */
    char f[700];
    snprintf(f, sizeof f, "%s/new.txt", tmp);
    FILE *o = fopen(f, "w");
    fclose(o);
    assert_int_equal(wm_tmp_commit_dir(tmp, &slot, final, 0, &e), WM_OK);
    assert_true(there("build/new.txt"));
    /* replace = 0 never replaces a folder that appeared */
    assert_int_equal(wm_tmp_mkdir(final, tmp, sizeof tmp, &slot, &e), WM_OK);
    wm_error e2 = {0};
    assert_int_equal(wm_tmp_commit_dir(tmp, &slot, final, 0, &e2), WM_ERR_USAGE);
    assert_non_null(strstr(e2.msg, "appeared"));
    assert_true(there("build/new.txt"));
    /* replace = 1 swaps the folders and removes the old one */
    snprintf(f, sizeof f, "%s/newer.txt", tmp);
    o = fopen(f, "w");
    fclose(o);
    assert_int_equal(wm_tmp_commit_dir(tmp, &slot, final, 1, &e), WM_OK);
    assert_true(there("build/newer.txt"));
    assert_false(there("build/new.txt"));
    assert_int_equal(count_entries(), 2); /* build and the unrelated file: no temporary, no old folder */
}

/* A fatal signal removes the registered temporaries and still ends the process by that signal. */
static void test_signal_cleanup(void **state) {
    (void)state;
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        pid_t c = fork();
        if (c == 0) {
            wm_cleanup_install();
            char final[512], tmp[600], dtmp[600], f[700];
            int fd, slot, dslot;
            wm_error e = {0};
            path_of(final, sizeof final, "file.onnx");
            if (wm_tmp_create(final, tmp, sizeof tmp, &fd, &slot, &e)) _exit(3);
            path_of(final, sizeof final, "folder");
            if (wm_tmp_mkdir(final, dtmp, sizeof dtmp, &dslot, &e)) _exit(3);
            snprintf(f, sizeof f, "%s/sub", dtmp);
            mkdir(f, 0755);
            snprintf(f, sizeof f, "%s/sub/model.onnx.data", dtmp);
            FILE *o = fopen(f, "w");
            fputs("weights", o);
            fclose(o);
            raise(sigs[i]);
            _exit(4); /* not reached */
        }
        int st;
        waitpid(c, &st, 0);
        assert_true(WIFSIGNALED(st));
        assert_int_equal(WTERMSIG(st), sigs[i]);
        assert_int_equal(count_entries(), 0);
    }
}

static void test_json_atomic(void **state) {
    (void)state;
    char p[512];
    wm_error e = {0};
    path_of(p, sizeof p, "r.json");
    assert_int_equal(wm_write_json_atomic(p, "{\"a\": 1}", &e), WM_OK);
    assert_int_equal(wm_write_json_atomic(p, "{\"a\": 2}", &e), WM_OK); /* a JSON result is replaced */
    put("model.onnx", "\x08\x07\x12\x05winml");
    path_of(p, sizeof p, "model.onnx");
    wm_error e2 = {0};
    assert_int_equal(wm_write_json_atomic(p, "{}", &e2), WM_ERR_USAGE);
    assert_non_null(strstr(e2.msg, "not a JSON file"));
    path_of(p, sizeof p, "");
    wm_error e3 = {0};
    assert_int_equal(wm_write_json_atomic(p, "{}", &e3), WM_ERR_USAGE); /* a folder */
    assert_int_equal(count_entries(), 2);
}

static void test_space(void **state) {
    (void)state;
    wm_error e = {0};
    assert_int_equal(wm_space_check(g_dir, 1024, "the build", &e), WM_OK);
    assert_int_equal(wm_space_check(g_dir, UINT64_MAX / 2, "the build", &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "the build needs about"));
    assert_non_null(strstr(e.msg, "free"));
    assert_true(wm_free_space(g_dir) > 0);
}

static void test_out_path(void **state) {
    (void)state;
    char out[64];
    wm_error e = {0};
    assert_int_equal(wm_out_path_clean("", "-o", out, sizeof out, &e), WM_ERR_USAGE);
    assert_int_equal(wm_out_path_clean("a/b//", "-o", out, sizeof out, &e), WM_OK);
    assert_string_equal(out, "a/b");
    assert_int_equal(wm_out_path_clean("/", "-o", out, sizeof out, &e), WM_OK);
    assert_string_equal(out, "/");
}

/* The fingerprint of a data file: another file of the same size differs; the same bytes grown by appending match. */
static void test_fingerprint(void **state) {
    (void)state;
    char p[512];
    path_of(p, sizeof p, "d.data");
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    static uint8_t buf[1 << 20];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    assert_int_equal(wm_write_full(fd, buf, sizeof buf), 0);
    char a[65], b[65], c[65], d[65];
    wm_error e = {0};
    assert_int_equal(wm_onnx_data_fingerprint(fd, sizeof buf, a, &e), WM_OK);
    assert_int_equal(wm_write_full(fd, "appended", 8), 0);
    assert_int_equal(wm_onnx_data_fingerprint(fd, sizeof buf, b, &e), WM_OK);
    assert_string_equal(a, b);
    assert_int_equal(wm_onnx_data_fingerprint(fd, sizeof buf + 8, c, &e), WM_OK);
    assert_string_not_equal(a, c); /* the size is part of it */
    buf[(sizeof buf - 4096) / 63 * 10 + 7] ^= 1; /* one bit inside the 11th sample */
    assert_int_equal(pwrite(fd, buf, sizeof buf, 0), (ssize_t)sizeof buf);
    assert_int_equal(wm_onnx_data_fingerprint(fd, sizeof buf, d, &e), WM_OK);
    assert_string_not_equal(a, d);
    close(fd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tmp_create_commit_discard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_cleanup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_space, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fingerprint, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
