/* Unit tests of src/core/file.c: the one place that opens named input files (kinds, messages, never blocking)
   and the -m MODEL resolver. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/file.h"
#include "unit_tmpdir.h"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    return wm_test_tmpdir_make(g_dir, sizeof g_dir, "file");
}

static int teardown(void **state) {
    (void)state;
    return wm_test_tmpdir_remove(g_dir);
}

static void path_of(char *p, size_t n, const char *name) { snprintf(p, n, "%s/%s", g_dir, name); }

static void write_text(const char *p, const char *text) {
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_msg(const wm_error *e, const char *want) {
    if (!strstr(e->msg, want)) {
        print_error("message '%s' lacks '%s'\n", e->msg, want);
        fail();
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Each kind of non-regular file is refused by name, through wm_map_file, wm_open_input and wm_input_present. */
static void test_kinds(void **state) {
    (void)state;
    char fifo[128], folder[128], sock[128], want[256];
    path_of(fifo, sizeof fifo, "f.json");
    path_of(folder, sizeof folder, "d.json");
    path_of(sock, sizeof sock, "s.json");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(mkdir(folder, 0755), 0);
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    assert_true(sfd >= 0 && bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    static const struct {
        const char *path, *kind;
    } cases[] = {{NULL, "a FIFO"}, {NULL, "a folder"}, {NULL, "a socket"}, {"/dev/null", "a character device"}};
    const char *paths[] = {fifo, folder, sock, "/dev/null"};
    for (size_t i = 0; i < 4; i++) {
        const char *p = cases[i].path ? cases[i].path : paths[i];
        snprintf(want, sizeof want, "%s: is %s (a regular file is needed)", p, cases[i].kind);
        double t0 = now_s();
        wm_map m;
        wm_error e = {0};
        assert_int_equal(wm_map_file(p, 0, &m, &e), WM_ERR_INPUT); /* a FIFO without a writer: no wait */
        assert_string_equal(e.msg, want);
        assert_null(m.data);
        int fd = 123;
        memset(&e, 0, sizeof e);
        assert_int_equal(wm_open_input(p, 1, &fd, NULL, &e), WM_ERR_INPUT);
        assert_string_equal(e.msg, want);
        assert_int_equal(fd, -1);
        int present = 7;
        memset(&e, 0, sizeof e);
        assert_int_equal(wm_input_present(p, &present, &e), WM_ERR_INPUT);
        assert_string_equal(e.msg, want);
        assert_int_equal(present, 0);
        assert_true(now_s() - t0 < 5);
    }
    close(sfd);
}

static void test_regular_absent_and_links(void **state) {
    (void)state;
    char p[128], link[128], sub[160];
    path_of(p, sizeof p, "a.txt");
    write_text(p, "hello");
    int present = 0, fd = -1;
    uint64_t size = 0;
    wm_error e = {0};
    assert_int_equal(wm_input_present(p, &present, &e), WM_OK);
    assert_int_equal(present, 1);
    assert_int_equal(wm_open_input(p, 0, &fd, &size, &e), WM_OK);
    assert_true(fd >= 0 && size == 5);
    assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK); /* the descriptor handed out reads normally */
    close(fd);
    /* absent: not an error for the probe; a clear one for the opener */
    path_of(p, sizeof p, "none.json");
    assert_int_equal(wm_input_present(p, &present, &e), WM_OK);
    assert_int_equal(present, 0);
    assert_int_equal(wm_open_input(p, 0, &fd, NULL, &e), WM_ERR_INPUT);
    expect_msg(&e, "none.json: cannot open: No such file or directory");
    /* a path through a file: absent for the probe, and said so by the opener */
    path_of(p, sizeof p, "a.txt");
    snprintf(sub, sizeof sub, "%s/model.onnx", p);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_input_present(sub, &present, &e), WM_OK);
    assert_int_equal(present, 0);
    assert_int_equal(wm_open_input(sub, 0, &fd, NULL, &e), WM_ERR_INPUT);
    expect_msg(&e, "is not a folder");
    /* a link: followed unless nofollow */
    path_of(link, sizeof link, "l.txt");
    assert_int_equal(symlink("a.txt", link), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_open_input(link, 0, &fd, NULL, &e), WM_OK);
    close(fd);
    assert_int_equal(wm_open_input(link, 1, &fd, NULL, &e), WM_ERR_INPUT);
    expect_msg(&e, "is a symbolic link, refused");
}

/* -m MODEL: a folder gives FOLDER/model.onnx, a file gives itself and its folder; errors say what is needed. */
static void test_model_path(void **state) {
    (void)state;
    char b[128], p[192], file[256], dir[256];
    path_of(b, sizeof b, "build");
    assert_int_equal(mkdir(b, 0755), 0);
    wm_error e = {0};
    assert_int_equal(wm_model_path(b, "a build folder", file, sizeof file, dir, sizeof dir, &e), WM_ERR_INPUT);
    expect_msg(&e, "build: a folder without model.onnx (a build folder is needed)");
    snprintf(p, sizeof p, "%s/model.onnx", b);
    write_text(p, "x");
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_model_path(b, NULL, file, sizeof file, dir, sizeof dir, &e), WM_OK);
    assert_string_equal(file, p);
    assert_string_equal(dir, b);
    assert_int_equal(wm_model_path(p, NULL, file, sizeof file, dir, sizeof dir, &e), WM_OK);
    assert_string_equal(file, p);
    assert_string_equal(dir, b);
    assert_int_equal(wm_model_path("model.onnx", NULL, file, sizeof file, dir, sizeof dir, &e), WM_ERR_INPUT);
    expect_msg(&e, "model.onnx: no such file or folder");
    /* model.onnx a FIFO inside the folder: said so */
    unlink(p);
    assert_int_equal(mkfifo(p, 0644), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_model_path(b, NULL, file, sizeof file, dir, sizeof dir, &e), WM_ERR_INPUT);
    expect_msg(&e, "model.onnx: is a FIFO (a regular file is needed)");
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_model_path(p, NULL, file, sizeof file, dir, sizeof dir, &e), WM_ERR_INPUT);
    expect_msg(&e, "model.onnx: is a FIFO (a regular file is needed)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_regular_absent_and_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_path, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
