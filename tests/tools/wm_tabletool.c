/*
 * wm_tabletool - prints a data set as eval --dataset and calibration read it (the oracle tests compare it with
 * pyarrow): hf/dataset.h resolves SPEC (a table file, a folder, a hub name in the caches), wm_dataset_read reads it.
 *   wm_tabletool SPEC [MAX_ROWS [CONFIG [SPLIT]]]
 * One JSON object: {"files": [...], "columns": [...], "rows": [[cell, ...], ...], "lines": [...]}, each cell the
 * hex of its bytes, or null. Errors: "wm_tabletool: error: MESSAGE" on stderr, exit 2 (bad input) or 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/table.h"
#include "hf/dataset.h"

static void put_str(const char *s) {
    printf("\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        printf(*p == '"' || *p == '\\' ? "\\%c" : *p < 0x20 ? "\\u%04x" : "%c", *p);
    printf("\"");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: wm_tabletool SPEC [MAX_ROWS [CONFIG [SPLIT]]]\n");
        return 2;
    }
    wm_table_opts o = {.max_rows = argc > 2 ? strtoul(argv[2], NULL, 10) : 0};
    static wm_dataset_files f;
    char why[1400];
    wm_table t;
    wm_error err = {0};
    wm_status st = wm_dataset_resolve(argv[1], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, &f, why,
                                      sizeof why, &err);
    if (!st && !f.n) {
        fprintf(stderr, "wm_tabletool: error: %s\n", why);
        return 2;
    }
    if (!st) st = wm_dataset_read(&f, &o, &t, &err);
    if (st) {
        fprintf(stderr, "wm_tabletool: error: %s\n", err.msg);
        return st == WM_ERR_NOMEM || st == WM_ERR_IO ? 1 : 2;
    }
    printf("{\"files\": [");
    for (size_t i = 0; i < f.n; i++) printf("%s", i ? ", " : ""), put_str(f.paths[i]);
    printf("], \"columns\": [");
    for (size_t c = 0; c < t.n_cols; c++) printf("%s", c ? ", " : ""), put_str(t.names[c]);
    printf("], \"rows\": [");
    for (size_t r = 0; r < t.n_rows; r++) {
        printf("%s[", r ? ", " : "");
        for (size_t c = 0; c < t.n_cols; c++) {
            const char *s = wm_table_cell(&t, r, (int)c);
            if (c) printf(", ");
            if (!s) {
                printf("null");
                continue;
            }
            size_t n = t.sizes ? t.sizes[r * t.n_cols + c] : strlen(s);
            printf("\"");
            for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
            printf("\"");
        }
        printf("]");
    }
    printf("], \"lines\": [");
    for (size_t r = 0; r < t.n_rows; r++) printf("%s%zu", r ? ", " : "", t.lines[r]);
    printf("]}\n");
    wm_table_free(&t);
    return 0;
}
