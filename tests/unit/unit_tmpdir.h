/* unit_tmpdir.h - a scratch folder per unit test (made by setup, removed by teardown). */
#ifndef WM_TEST_UNIT_TMPDIR_H
#define WM_TEST_UNIT_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Creates /tmp/wm_<tag>_XXXXXX into dir (size n); 0 on success. */
static inline int wm_test_tmpdir_make(char *dir, size_t n, const char *tag) {
    snprintf(dir, n, "/tmp/wm_%s_XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

/* Removes the folder and everything in it; 0 on success. */
static inline int wm_test_tmpdir_remove(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
